/*
 * test_recover: one long-lived device (tsr_test_backend(): fsim, or rtl
 * with TSR_TEST_BACKEND=rtl) runs valid, bad, valid, bad, ... streams with
 * verification skipped. Every bad kind must fail with an error naming the
 * problem, and every valid stream after it must give the output of the
 * independent reference machine (tests/tsr_ref.c through tsr_gen's "ref"
 * executor), byte for byte: a failed run must leave nothing behind (error
 * bits, tokens, stage state, outstanding DRAM transactions).
 *
 * Bad kinds: an index error found only at run time (a STORE rewrites the
 * uop kernel), a STORE whose byte address is beyond 2^32 (must fault, not
 * wrap into another buffer), tokens left in a queue at FINISH, a reserved
 * ALU opcode, a deadlock (fsim: deadlock report; rtl: the watchdog), a
 * stream over the run budget, and a caller that gives up after a timeout
 * (also in the middle of DRAM transfers) and resets the device. Also the
 * one DRAM rule: a row spanning two adjacent buffers works, a row running
 * into unmapped bytes fails, on every backend.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tsr_asm.h"
#include "tsr_error.h"
#include "tsr_gen.h"
#include "tsr_testenv.h"

/* Reproducers (from the hostile-stream review), kept verbatim. */
static const char *const wrap_store_s =
    ".buffer inp 4096\n.buffer wgt 4096\n.buffer out 4096\n.output out\n.uops k 0,0,0\n"
    "load uop sram=0 dram=k y=1 x=1 stride=1\n"
    "gemm reset uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
    "alu add uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=42 push_next\n"
    "store out sram=0 dram=0x10010200 y=1 x=1 stride=1 pop_prev push_prev\n"
    "finish pop_next\n";

static const char *const bypass_uop_oob_s =
    ".buffer out 1024\n.output out\n.uops k 0,0,0 0,0,0 0,0,0 0,0,0\n"
    "load uop sram=0 dram=k y=1 x=4 stride=4\n"
    "gemm reset uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
    "alu add uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=5 push_next\n"
    "store out sram=0 dram=k y=1 x=1 stride=1 pop_prev push_prev\n"
    "load uop sram=0 dram=k y=1 x=4 stride=4 pop_next\n"
    "alu add uop=0:1 iter=1,1000 dst=0,1 src=0,1 imm=1 push_next\n"
    "store out sram=0 dram=out y=1 x=1 stride=1 pop_prev push_prev\n"
    "finish pop_next\n";

/* A LOAD pushes a token that nothing pops: left in load->compute at FINISH. */
static const char *const leftover_s =
    ".buffer out 1024\n.output out\n.uops k 0,0,0\n"
    "load uop sram=0 dram=k y=1 x=1 stride=1\n"
    "load inp sram=0 dram=out y=1 x=1 stride=1 push_next\n"
    "gemm reset uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
    "finish\n";

/* compute waits for a token that never comes. */
static const char *const deadlock_s =
    ".buffer out 1024\n.output out\n.uops k 0,0,0\n"
    "load uop sram=0 dram=k y=1 x=1 stride=1\n"
    "gemm reset uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 pop_prev\n"
    "finish\n";

/* ALU loops of iter 16383 x 16383: about 2.7e8 ops (under the default
 * budget, so it starts; a 1 ms wait times out). With 64 uops it is over. */
static const char *const long_s =
    ".buffer out 1024\n.output out\n.uops k 0,0,0\n"
    "load uop sram=0 dram=k y=1 x=1 stride=1\n"
    "alu add uop=0:1 iter=16383,16383 dst=0,0 src=0,0 imm=1\n"
    "finish\n";
static const char *const huge_s =
    ".buffer out 1024\n.output out\n.uops k 0,0,0\n"
    "load uop sram=0 dram=k y=1 x=64 stride=1\n"
    "alu add uop=0:64 iter=16383,16383 dst=0,0 src=0,0 imm=1\n"
    "finish\n";

static tsr_config_t g_cfg; /* the test config, for the tweaks */

typedef struct {
    tsr_device_t *dev;
    tsr_config_t cfg;
    uint64_t gen_seed; /* next valid program */
    int valid_runs;
} rs_t;

static int setup(void **state)
{
    rs_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    assert_int_equal(tsr_test_config("tiny", &s->cfg), TSR_OK);
    g_cfg = s->cfg;
    tsr_device_opts_t o;
    memset(&o, 0, sizeof o);
    o.skip_verify = 1;
    o.rtl.watchdog_cycles = 20000; /* the deadlock case ends quickly */
    o.rtl.dram_latency = 200;      /* many bursts in flight when a run is abandoned */
    if (tsr_device_open(tsr_test_backend(), &s->cfg, &o, &s->dev))
        fail_msg("open %s: %s", tsr_test_backend(), tsr_errmsg());
    s->gen_seed = tsr_test_seed("TSR_RECOVER_SEED", 1000);
    print_message("backend %s, generator seeds from %llu\n", tsr_test_backend(),
                  (unsigned long long)s->gen_seed);
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    rs_t *s = *state;
    tsr_device_close(s->dev);
    free(s);
    return 0;
}

/* A valid random program (tsr_gen) on the long-lived device, its outputs
 * compared with the reference machine's. With give_up, the caller waits
 * 0 ms and resets the device mid-run instead (DRAM bursts in flight). */
static void run_valid_or_abort(rs_t *s, int give_up)
{
    tsr_gen_prog_t p;
    uint64_t seed = s->gen_seed++;
    if (tsr_gen_program(seed, &s->cfg, NULL, &p))
        fail_msg("generator seed %llu: %s", (unsigned long long)seed, tsr_errmsg());
    uint8_t *want[TSR_GEN_MAX_BUFS], *got[TSR_GEN_MAX_BUFS];
    tsr_gen_exec_t ref = {"ref", 0, NULL, NULL};
    if (tsr_gen_run(&ref, &p, p.insns, p.ninsns, want))
        fail_msg("reference, seed %llu: %s", (unsigned long long)seed, tsr_errmsg());
    int rc = tsr_gen_load(s->dev, &p);
    if (!rc)
        rc = tsr_submit(s->dev, p.insns, p.ninsns);
    if (!rc && give_up) {
        rc = tsr_wait(s->dev, 0);
        if (rc == TSR_ETIMEOUT) {
            assert_int_equal(tsr_device_reset(s->dev), TSR_OK);
            print_message("  gave up on a running stream and reset the device\n");
        } else if (rc) {
            fail_msg("valid run (generator seed %llu): %s", (unsigned long long)seed, tsr_errmsg());
        }
        for (size_t i = 0; i < p.nbufs; i++)
            assert_int_equal(tsr_mem_free(s->dev, p.bufs[i].addr), TSR_OK);
        tsr_gen_outputs_free(want);
        tsr_gen_free(&p);
        return;
    }
    if (!rc)
        rc = tsr_wait(s->dev, -1);
    if (rc)
        fail_msg("valid run %d (generator seed %llu) failed after the previous bad stream: %s", s->valid_runs,
                 (unsigned long long)seed, tsr_errmsg());
    assert_int_equal(tsr_gen_read_outputs(s->dev, &p, got), TSR_OK);
    tsr_gen_diff_t d;
    if (tsr_gen_compare(&p, want, got, &d))
        fail_msg("valid run %d (generator seed %llu): buffer %s byte %llu is 0x%02x, reference 0x%02x (%llu "
                 "bytes differ)",
                 s->valid_runs, (unsigned long long)seed, p.bufs[d.buf].name, (unsigned long long)d.offset, d.b,
                 d.a, (unsigned long long)d.nbytes);
    for (size_t i = 0; i < p.nbufs; i++)
        assert_int_equal(tsr_mem_free(s->dev, p.bufs[i].addr), TSR_OK);
    tsr_gen_outputs_free(want);
    tsr_gen_outputs_free(got);
    tsr_gen_free(&p);
    s->valid_runs++;
}

static void run_valid(rs_t *s) { run_valid_or_abort(s, 0); }

/* A program from assembly text: buffers loaded (uops from .uops,
 * everything else zero), optional tweak of the instructions, submit and
 * wait (a caller that times out gives up and resets). Returns the run's
 * code; *out0 gets byte 0 of the first output buffer after the run. */
static int run_text(rs_t *s, const char *text, void (*tweak)(tsr_program_t *), int timeout_ms, uint8_t *out0)
{
    tsr_program_t p;
    memset(&p, 0, sizeof p);
    if (tsr_asm_parse(&s->cfg, text, "prog.s", &p))
        fail_msg("assembling: %s", tsr_errmsg());
    if (tweak)
        tweak(&p);
    for (size_t k = 0; k < p.nbufs; k++) {
        const tsr_asm_buffer_t *b = &p.bufs[k];
        uint8_t *img = calloc(1, (size_t)b->size);
        assert_non_null(img);
        for (size_t u = 0; u < b->nuops; u++)
            for (uint32_t i = 0; i < s->cfg.uop_bytes; i++)
                img[u * s->cfg.uop_bytes + i] = (uint8_t)(b->uops[u] >> (8 * i));
        assert_int_equal(tsr_mem_alloc_at(s->dev, b->addr, b->size), TSR_OK);
        assert_int_equal(tsr_mem_write(s->dev, b->addr, img, b->size), TSR_OK);
        free(img);
    }
    int rc = tsr_submit(s->dev, p.insns, p.ninsns);
    if (!rc)
        rc = tsr_wait(s->dev, timeout_ms);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tsr_errmsg());
    if (rc == TSR_ETIMEOUT && timeout_ms >= 0) /* the caller gives up */
        assert_int_equal(tsr_device_reset(s->dev), TSR_OK);
    for (size_t k = 0; k < p.nbufs; k++) {
        if (out0 && p.bufs[k].is_output) {
            assert_int_equal(tsr_mem_read(s->dev, p.bufs[k].addr, out0, 1), TSR_OK);
            out0 = NULL;
        }
        assert_int_equal(tsr_mem_free(s->dev, p.bufs[k].addr), TSR_OK);
    }
    tsr_program_free(&p);
    if (rc)
        tsr_err(rc, "%s", msg);
    return rc;
}

/* run_text must fail with code want_rc (0: any) and a message containing want_msg. */
static void run_bad(rs_t *s, const char *text, void (*tweak)(tsr_program_t *), int timeout_ms, int want_rc,
                    const char *want_msg, uint8_t *out0)
{
    int rc = run_text(s, text, tweak, timeout_ms, out0);
    if (rc == TSR_OK)
        fail_msg("bad stream ran without an error (expected \"%s\")", want_msg);
    if ((want_rc && rc != want_rc) || !strstr(tsr_errmsg(), want_msg))
        fail_msg("bad stream: got %s \"%s\", expected %s containing \"%s\"", tsr_errname(rc), tsr_errmsg(),
                 want_rc ? tsr_errname(want_rc) : "an error", want_msg);
    print_message("  bad stream refused: %s\n", tsr_errmsg());
}

static void beyond_4g(tsr_program_t *p)
{
    uint64_t out = 0;
    for (size_t k = 0; k < p->nbufs; k++)
        if (!strcmp(p->bufs[k].name, "out"))
            out = p->bufs[k].addr;
    for (size_t i = 0; i < p->ninsns; i++)
        if (p->insns[i].opcode == TSR_OP_STORE)
            p->insns[i].dram_base = (uint32_t)(((1ull << 32) + out) / g_cfg.out_bytes);
}

static void reserved_alu(tsr_program_t *p)
{
    for (size_t i = 0; i < p->ninsns; i++)
        if (p->insns[i].opcode == TSR_OP_ALU)
            p->insns[i].alu_opcode = 12;
}

/* fscale (ALU op 9) on a config without EXACT_REQUANT */
static void unavailable_alu(tsr_program_t *p)
{
    for (size_t i = 0; i < p->ninsns; i++)
        if (p->insns[i].opcode == TSR_OP_ALU)
            p->insns[i].alu_opcode = TSR_ALU_FSCALE;
}

static void test_valid_bad_valid(void **state)
{
    rs_t *s = *state;
    uint8_t out0 = 0xff;
    run_valid(s);
    /* run-time index error; on the RTL every later stream used to fail */
    run_bad(s, bypass_uop_oob_s, NULL, -1, 0, "", NULL);
    run_valid(s);
    run_valid(s);
    /* beyond 2^32: a fault, and buffer out keeps its zero (the RTL used to wrap and write 42) */
    run_bad(s, wrap_store_s, beyond_4g, -1, 0, "", &out0);
    assert_int_equal(out0, 0);
    run_valid(s);
    /* a token left in load->compute at FINISH */
    run_bad(s, leftover_s, NULL, -1, 0, "load->compute", NULL);
    run_valid(s);
    /* reserved ALU opcode 12 */
    run_bad(s, bypass_uop_oob_s, reserved_alu, -1, 0, "", NULL);
    run_valid(s);
    /* deadlock: fsim reports it, the RTL's watchdog stops it */
    run_bad(s, deadlock_s, NULL, -1, 0, "", NULL);
    run_valid(s);
    /* a stream whose bound is over the run budget is refused at submit */
    run_bad(s, huge_s, NULL, -1, TSR_EBOUNDS, "run budget", NULL);
    run_valid(s);
    /* the caller gives up after 1 ms and resets */
    run_bad(s, long_s, NULL, 1, TSR_ETIMEOUT, "", NULL);
    run_valid(s);
    /* ... and in the middle of DRAM transfers (the RTL drains its bursts) */
    for (int k = 0; k < 4; k++) {
        run_valid_or_abort(s, 1);
        run_valid(s);
    }
}

/* Each message names its problem (checked where both backends agree on words). */
static void test_messages(void **state)
{
    rs_t *s = *state;
    run_bad(s, wrap_store_s, beyond_4g, -1, 0, tsr_test_backend()[0] == 'r' ? "store" : "outside every allocated buffer",
            NULL);
    /* The encoder refuses ALU opcodes 10..15 (the ISA field table), so such a
     * stream never reaches a backend through the driver; the backends'
     * own checks guard raw instruction words. */
    run_bad(s, bypass_uop_oob_s, reserved_alu, -1, 0, "is not an ALU op", NULL);
    run_valid(s);
    /* an op the config lacks: fsim names it and its key; the RTL built
     * without it raises its error bit as for a reserved op */
    if (!s->cfg.exact_requant) {
        run_bad(s, bypass_uop_oob_s, unavailable_alu, -1, 0,
                tsr_test_backend()[0] == 'r' ? "" : "ALU op fscale needs config key EXACT_REQUANT", NULL);
        run_valid(s);
    }
}

/* One DRAM rule on every backend (isa/semantics.md, "DRAM accesses"): a
 * row may run from one buffer into an adjacent one, and a row that runs
 * into unmapped bytes is an error. acc rows spanning a -> b are mirrored
 * to out (ALU add 0) and stored; out's bytes are the low bytes of the
 * lanes read. */
static const char *const span_s =
    ".buffer a 4096\n.buffer b 4096\n.buffer out 4096\n.output out\n.uops k 0,0,0\n"
    "load uop sram=0 dram=k y=1 x=1 stride=1\n"
    "load acc sram=0 dram=a y=1 x=4 stride=4\n"
    "alu add uop=0:1 iter=4,1 dst=1,0 src=1,0 imm=0 push_next\n"
    "store out sram=0 dram=out y=1 x=4 stride=4 pop_prev push_prev\n"
    "finish pop_next\n";

/* 100000 GEMM reset ops: no counted op and no DRAM traffic for longer
 * than the watchdog's 20000 cycles, yet progress (the RTL watchdog once
 * stopped such a loop). */
static const char *const reset_loop_s =
    ".buffer out 1024\n.output out\n.uops k 0,0,0\n"
    "load uop sram=0 dram=k y=1 x=1 stride=1\n"
    "gemm reset uop=0:1 iter=100,1000 dst=0,0 src=0,0 wgt=0,0\n"
    "finish\n";

static void test_long_reset_loop(void **state)
{
    rs_t *s = *state;
    if (run_text(s, reset_loop_s, NULL, -1, NULL))
        fail_msg("a long GEMM reset loop failed: %s", tsr_errmsg());
    run_valid(s);
}

static void test_span(void **state)
{
    rs_t *s = *state;
    const tsr_config_t *c = &s->cfg;
    for (int past_end = 0; past_end < 2; past_end++) {
        tsr_program_t p;
        memset(&p, 0, sizeof p);
        if (tsr_asm_parse(c, span_s, "span.s", &p))
            fail_msg("assembling: %s", tsr_errmsg());
        const tsr_asm_buffer_t *a = &p.bufs[0], *b = &p.bufs[1], *k = &p.bufs[3];
        assert_int_equal(b->addr, a->addr + a->size); /* adjacent */
        uint64_t first = past_end ? k->addr + 32 : a->addr + a->size - 2 * c->acc_bytes;
        p.insns[1].dram_base = (uint32_t)(first / c->acc_bytes);
        uint8_t *img = malloc(8192);
        assert_non_null(img);
        for (int i = 0; i < 8192; i++)
            img[i] = (uint8_t)(i * 7 + 3);
        for (size_t i = 0; i < p.nbufs; i++) {
            const tsr_asm_buffer_t *x = &p.bufs[i];
            assert_int_equal(tsr_mem_alloc_at(s->dev, x->addr, x->size), TSR_OK);
            uint8_t zero[64] = {0};
            if (i < 2)
                assert_int_equal(tsr_mem_write(s->dev, x->addr, img + i * 4096, x->size), TSR_OK);
            else if (i == 3) /* uop 0 = 0,0,0 */
                assert_int_equal(tsr_mem_write(s->dev, x->addr, zero, x->size < 64 ? x->size : 64), TSR_OK);
        }
        int rc = tsr_submit(s->dev, p.insns, p.ninsns);
        if (!rc)
            rc = tsr_wait(s->dev, -1);
        if (past_end) {
            if (rc == TSR_OK)
                fail_msg("a row running past the last buffer into unmapped bytes ran without an error");
            print_message("  past the end: %s\n", tsr_errmsg());
        } else {
            if (rc)
                fail_msg("a row spanning two adjacent buffers failed: %s", tsr_errmsg());
            uint8_t out[64];
            assert_int_equal(tsr_mem_read(s->dev, p.bufs[2].addr, out, 4 * c->out_bytes), TSR_OK);
            const uint8_t *src = img + (first - a->addr);
            uint32_t lanes = c->out_bytes; /* one byte per lane: int8 outputs */
            for (uint32_t r = 0; r < 4; r++)
                for (uint32_t l = 0; l < lanes; l++)
                    if (out[r * lanes + l] != src[r * c->acc_bytes + l * 4])
                        fail_msg("row %u lane %u: got 0x%02x, want 0x%02x (the low byte of the lane read)", r, l,
                                 out[r * lanes + l], src[r * c->acc_bytes + l * 4]);
        }
        for (size_t i = 0; i < p.nbufs; i++)
            assert_int_equal(tsr_mem_free(s->dev, p.bufs[i].addr), TSR_OK);
        free(img);
        tsr_program_free(&p);
        run_valid(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_bad_valid),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_span),
        cmocka_unit_test(test_long_reset_loop),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
