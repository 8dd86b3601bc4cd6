/*
 * test_stream: the instruction-stream builder every lowering emits through
 * (jit/stream/tsr_stream.h), against token flags and counts written out by
 * hand here:
 *  - wait/signal put pop/push flags on the right instruction of the right
 *    stage (a wait is taken by the next instruction of its consumer stage,
 *    not by one of another stage emitted in between);
 *  - a signal with nothing new in the producer stage emits a token-only
 *    carrier of that stage; a carrier of a pop does not carry a later push;
 *  - FINISH pops the pending store->compute token, and a stream whose
 *    queues do not balance is refused naming the queue;
 *  - the uop LOAD's length set later is counted once in the DRAM bytes; a
 *    dry run counts the same instructions and bytes as the real one;
 *  - a finished stream passes the ISA verifier (isa/tsr_verify, written
 *    independently of the builder).
 * How it can fail: a flag on the wrong instruction, a missing carrier or one
 * too many, an unbalanced stream accepted, a byte count that differs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_stream.h"
#include "tsr_verify.h"

static tsr_config_t cfg;

static int setup(void **state)
{
    (void)state;
    return tsr_config_load("default", &cfg);
}

/* A two-tile double-buffered schedule (load, GEMM, ALU, STORE per tile), as
 * a lowering writes it. */
static void two_tiles(tsr_stream_t *s)
{
    tsr_stream_uops(s, 1000, 1); /* away from the stores: a stream may not rewrite its uops */
    for (int t = 0; t < 2; t++) {
        tsr_stream_load(s, TSR_MEM_INP, (uint32_t)(t * 8), 0, 1, 4, 4);
        tsr_stream_signal(s, TSR_Q_LD2CMP);
        tsr_stream_wait(s, TSR_Q_LD2CMP);
        tsr_insn_t *in = tsr_stream_gemm(s, 0, 1, 1);
        tsr_stream_loops(in, 1, 0, 0, 1, 0, 0);
        in = tsr_stream_alu(s, TSR_ALU_ADD, 0, 1);
        in->use_imm = 1;
        tsr_stream_loops(in, 1, 0, 0, 1, 0, 0);
        tsr_stream_signal(s, TSR_Q_CMP2ST);
        tsr_stream_wait(s, TSR_Q_CMP2ST);
        tsr_stream_store(s, 0, (uint32_t)(8192 + t * 16), 1, 1, 1);
        if (t == 1)
            tsr_stream_signal(s, TSR_Q_ST2CMP);
    }
}

static void test_flags(void **state)
{
    (void)state;
    tsr_stream_t s;
    tsr_stream_init(&s, &cfg, 0, 0);
    two_tiles(&s);
    assert_int_equal(tsr_stream_finish(&s), TSR_OK);
    /* uop, then per tile: load, gemm, alu, store; then FINISH */
    assert_int_equal(s.n, 1 + 2 * 4 + 1);
    const tsr_insn_t *v = s.v;
    for (int t = 0; t < 2; t++) {
        const tsr_insn_t *ld = &v[1 + 4 * t], *gm = ld + 1, *alu = ld + 2, *st = ld + 3;
        assert_int_equal(ld->opcode, TSR_OP_LOAD);
        assert_true(ld->push_next && !ld->pop_next && !ld->pop_prev && !ld->push_prev);
        assert_int_equal(gm->opcode, TSR_OP_GEMM);
        assert_true(gm->pop_prev && !gm->pop_next && !gm->push_prev && !gm->push_next);
        assert_int_equal(alu->opcode, TSR_OP_ALU);
        assert_true(alu->push_next && !alu->pop_prev && !alu->pop_next);
        assert_int_equal(st->opcode, TSR_OP_STORE);
        assert_true(st->pop_prev);
        assert_int_equal(st->push_prev, t == 1);
    }
    const tsr_insn_t *fin = &v[s.n - 1];
    assert_int_equal(fin->opcode, TSR_OP_FINISH);
    assert_true(fin->pop_next && !fin->pop_prev && !fin->push_prev && !fin->push_next);
    /* bytes: uop 1 row, 2 loads of 4 inp elements, 2 stores of 1 out element */
    assert_int_equal(s.bytes, cfg.uop_bytes + 2 * 4 * cfg.inp_bytes + 2 * cfg.out_bytes);
    if (tsr_verify(&cfg, s.v, s.n, NULL))
        fail_msg("verifier: %s", tsr_errmsg());
    tsr_stream_free(&s);
}

static void test_wait_skips_other_stages(void **state)
{
    (void)state;
    tsr_stream_t s;
    tsr_stream_init(&s, &cfg, 0, 0);
    tsr_stream_wait(&s, TSR_Q_CMP2LD); /* for the load stage */
    tsr_stream_gemm(&s, 0, 1, 0);      /* compute: must not take it */
    tsr_stream_store(&s, 0, 0, 1, 1, 1); /* store: must not take it */
    tsr_stream_load(&s, TSR_MEM_WGT, 0, 0, 1, 1, 1);
    assert_false(s.v[0].pop_next || s.v[0].pop_prev);
    assert_false(s.v[1].pop_next || s.v[1].pop_prev);
    assert_true(s.v[2].pop_next);
    assert_int_equal(tsr_stream_pending(&s, TSR_Q_CMP2LD), -1); /* popped, nothing pushed */
    tsr_stream_free(&s);
}

static void test_carriers(void **state)
{
    (void)state;
    tsr_stream_t s;
    tsr_stream_init(&s, &cfg, 0, 0);
    tsr_stream_load(&s, TSR_MEM_INP, 0, 0, 1, 1, 1);
    tsr_stream_signal(&s, TSR_Q_LD2CMP); /* on the load */
    tsr_stream_signal(&s, TSR_Q_LD2CMP); /* nothing new: a carrier */
    assert_int_equal(s.n, 2);
    assert_int_equal(s.v[1].opcode, TSR_OP_LOAD);
    assert_int_equal(s.v[1].mem_type, TSR_MEM_INP);
    assert_int_equal(s.v[1].x_size, 0);
    assert_true(s.v[1].push_next);
    /* a carrier of a pop does not carry the next push */
    tsr_stream_wait(&s, TSR_Q_CMP2LD);
    tsr_stream_carrier(&s, TSR_STAGE_LOAD);
    assert_true(s.v[2].pop_next && !s.v[2].push_next);
    tsr_stream_signal(&s, TSR_Q_LD2CMP);
    assert_int_equal(s.n, 4);
    assert_true(s.v[3].push_next && !s.v[3].pop_next);
    /* compute-stage carrier: LOAD acc of nothing; after the fact push */
    tsr_stream_signal(&s, TSR_Q_CMP2LD);
    assert_int_equal(s.v[4].opcode, TSR_OP_LOAD);
    assert_int_equal(s.v[4].mem_type, TSR_MEM_ACC);
    assert_true(s.v[4].push_prev);
    tsr_stream_signal_at(&s, 4, TSR_Q_CMP2ST);
    assert_true(s.v[4].push_next);
    assert_int_equal(tsr_stream_pending(&s, TSR_Q_LD2CMP), 3);
    tsr_stream_free(&s);
}

static void test_unbalanced(void **state)
{
    (void)state;
    tsr_stream_t s;
    tsr_stream_init(&s, &cfg, 0, 0);
    tsr_stream_load(&s, TSR_MEM_INP, 0, 0, 1, 1, 1);
    tsr_stream_signal(&s, TSR_Q_LD2CMP);
    tsr_stream_wait(&s, TSR_Q_LD2CMP);
    tsr_stream_gemm(&s, 0, 1, 0);
    tsr_stream_signal(&s, TSR_Q_CMP2LD); /* pushed, never popped */
    assert_int_equal(tsr_stream_finish(&s), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "compute->load"));
    assert_int_equal(tsr_stream_status(&s), TSR_EINVAL);
    tsr_stream_free(&s);
    /* two store->compute tokens pending: FINISH pops one, the other is refused */
    tsr_stream_init(&s, &cfg, 0, 0);
    tsr_stream_store(&s, 0, 0, 1, 1, 1);
    tsr_stream_signal(&s, TSR_Q_ST2CMP);
    tsr_stream_store(&s, 0, 0, 1, 1, 1);
    tsr_stream_signal(&s, TSR_Q_ST2CMP);
    assert_int_equal(tsr_stream_finish(&s), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "store->compute"));
    tsr_stream_free(&s);
}

static void test_dry_run_and_uops(void **state)
{
    (void)state;
    tsr_stream_t a, b;
    tsr_stream_init(&a, &cfg, 0, 1);
    tsr_stream_init(&b, &cfg, 1, 0);
    a.cur_tag = 1;
    two_tiles(&a);
    two_tiles(&b);
    tsr_stream_set_uops(&a, 0, 7);
    tsr_stream_set_uops(&b, 0, 7);
    assert_int_equal(tsr_stream_finish(&a), TSR_OK);
    assert_int_equal(tsr_stream_finish(&b), TSR_OK);
    assert_int_equal(a.n, b.n);
    assert_null(b.v);
    assert_int_equal(a.bytes, b.bytes);
    assert_int_equal(a.bytes, 7 * cfg.uop_bytes + 2 * 4 * cfg.inp_bytes + 2 * cfg.out_bytes);
    assert_int_equal(a.v[0].x_size, 7);
    assert_int_equal(a.v[0].x_stride, 7);
    assert_non_null(a.tag);
    assert_int_equal(a.tag[3], 1);
    tsr_insn_t *v;
    size_t n;
    tsr_stream_take(&a, &v, &n);
    assert_int_equal(n, b.n);
    assert_null(a.v);
    free(v);
    tsr_stream_free(&a);
    tsr_stream_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_wait_skips_other_stages),
        cmocka_unit_test(test_carriers),
        cmocka_unit_test(test_unbalanced),
        cmocka_unit_test(test_dry_run_and_uops),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
