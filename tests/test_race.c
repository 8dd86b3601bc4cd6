/*
 * test_race: the hostile soak's race classifier (tests/tsr_race.c) must
 * not call a race-free stream racy (every generator program is race-free
 * by construction: tsr_gen.h) and must find the race when tokens are taken
 * away (flags cleared: the load stage's writes of inp/wgt rows are no
 * longer ordered before the GEMMs that read them). And the verifier's race
 * pass (isa/tsr_hb.c: shadow rows as flat ordinal arrays, footprints as runs) agrees
 * with this exact, independent check on hostile streams: it accepts none
 * the classifier finds a race in, and names a race only where there is one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tsr_error.h"
#include "tsr_gen.h"
#include "tsr_hostile.h"
#include "tsr_race.h"
#include "tsr_testenv.h"
#include "tsr_verify.h"

static void check_config(const char *name, uint64_t seed0, int count)
{
    tsr_config_t cfg;
    assert_int_equal(tsr_test_config(name, &cfg), TSR_OK);
    int found = 0;
    for (int k = 0; k < count; k++) {
        tsr_gen_prog_t p;
        char why[200];
        if (tsr_gen_program(seed0 + (uint64_t)k, &cfg, NULL, &p))
            fail_msg("generator seed %llu: %s", (unsigned long long)(seed0 + (uint64_t)k), tsr_errmsg());
        int r = tsr_race_check(&p, p.insns, p.ninsns, why, sizeof why);
        if (r == TSR_RACE_FOUND)
            fail_msg("%s, generator seed %llu: race-free program called racy: %s", name,
                     (unsigned long long)(seed0 + (uint64_t)k), why);
        /* without any token between the load stage and compute every
         * GEMM reading a loaded row races with its LOAD */
        for (size_t i = 0; i < p.ninsns; i++)
            if (p.insns[i].opcode != TSR_OP_FINISH && tsr_insn_stage(&p.insns[i]) == TSR_STAGE_LOAD)
                p.insns[i].push_next = p.insns[i].pop_next = 0;
        for (size_t i = 0; i < p.ninsns; i++)
            if (tsr_insn_stage(&p.insns[i]) == TSR_STAGE_COMPUTE)
                p.insns[i].pop_prev = p.insns[i].push_prev = 0;
        found += tsr_race_check(&p, p.insns, p.ninsns, why, sizeof why) == TSR_RACE_FOUND;
        tsr_gen_free(&p);
    }
    print_message("%s: %d of %d programs race once the load-stage tokens are removed\n", name, found, count);
    assert_true(found > count / 2);
}

static void test_tiny(void **state)
{
    (void)state;
    check_config("tiny", tsr_test_seed("TSR_RACE_SEED", 1), 300);
}

static void test_default(void **state)
{
    (void)state;
    check_config("default", tsr_test_seed("TSR_RACE_SEED", 1), 100);
}

/* Streams of generator programs mutated (tsr_hostile_mutate) or with a
 * third of their token flags cleared, on config name: tsr_verify against
 * tsr_race_check. */
static void check_verify_agrees(const char *name, uint64_t seed0, int count)
{
    tsr_config_t cfg;
    assert_int_equal(tsr_test_config(name, &cfg), TSR_OK);
    int races = 0, named = 0;
    for (int k = 0; k < count; k++) {
        const uint64_t seed = seed0 + (uint64_t)k;
        tsr_gen_prog_t p;
        if (tsr_gen_program(seed, &cfg, NULL, &p))
            fail_msg("generator seed %llu: %s", (unsigned long long)seed, tsr_errmsg());
        const size_t cap = p.ninsns + 4;
        tsr_insn_t *m = malloc(cap * sizeof *m);
        assert_non_null(m);
        for (int h = 0; h < 6; h++) {
            size_t n = p.ninsns;
            char desc[200] = "tokens cleared", why[200];
            memcpy(m, p.insns, n * sizeof *m);
            uint64_t st = seed * 31 + (uint64_t)h;
            if (h < 4)
                tsr_hostile_mutate(&p.cfg, st, m, &n, cap, desc, sizeof desc);
            else
                for (size_t i = 0; i + 1 < n; i++)
                    if (tsr_test_next(&st) % 3 == 0)
                        m[i].push_next = m[i].pop_next = m[i].push_prev = m[i].pop_prev = 0;
            const int r = tsr_race_check(&p, m, n, why, sizeof why);
            const int v = tsr_gen_verify(&p, m, n);
            const int vrace = v && strstr(tsr_errmsg(), "race on") != NULL;
            if (r == TSR_RACE_FOUND && !v)
                fail_msg("%s, seed %llu (%s): the verifier accepts a stream with a race: %s", name,
                         (unsigned long long)seed, desc, why);
            if (r == TSR_RACE_NONE && vrace)
                fail_msg("%s, seed %llu (%s): the verifier names a race the exact check does not find: %s", name,
                         (unsigned long long)seed, desc, tsr_errmsg());
            races += r == TSR_RACE_FOUND;
            named += vrace;
        }
        free(m);
        tsr_gen_free(&p);
    }
    print_message("%s: %d streams, %d with a race (all rejected), %d rejected naming a race\n", name, 6 * count, races,
                  named);
    assert_true(races > 0);
}

static void test_verify_agrees(void **state)
{
    (void)state;
    const uint64_t s = tsr_test_seed("TSR_RACE_SEED", 1);
    check_verify_agrees("tiny", s, 120);
    check_verify_agrees("default", s + 1000, 60);
    check_verify_agrees("default+lut2", s + 2000, 30);
    check_verify_agrees("rect", s + 3000, 30);
}

/* A hostile uop order costs the race pass no more than an ordered one: a
 * uop LOAD of the whole default uop buffer with its bases in descending
 * order, then G GEMMs over all of it, each with another loop (a new
 * footprint key). The footprints' base sort was an insertion sort: 300
 * such reset GEMMs took 7 s (50 s for 2,000), now milliseconds. With the
 * second GEMM kind reading inp rows a LOAD writes without a token, the
 * race is still found on that path. */
static uint8_t *so_dram;
static size_t so_dram_n;

static int so_read(void *ctx, uint64_t a, void *d, size_t n)
{
    (void)ctx;
    if (a + n > so_dram_n)
        return TSR_EVERIFY;
    memcpy(d, so_dram + a, n);
    return TSR_OK;
}

static double so_verify(const tsr_config_t *c, int racy, int G, int *rc)
{
    const uint32_t U = c->uop_depth;
    so_dram_n = (size_t)U * c->uop_bytes + 4096;
    so_dram = calloc(1, so_dram_n);
    assert_non_null(so_dram);
    for (uint32_t u = 0; u < U; u++) {
        const tsr_uop_t uo = {(U - 1 - u) % c->acc_depth, racy ? (U - 1 - u) % c->inp_depth : 0, 0};
        uint64_t raw = 0;
        assert_int_equal(tsr_uop_encode(c, &uo, &raw), TSR_OK);
        memcpy(so_dram + (size_t)u * c->uop_bytes, &raw, c->uop_bytes);
    }
    const size_t n = (size_t)G + 3;
    tsr_insn_t *p = calloc(n, sizeof *p);
    assert_non_null(p);
    p[0] = (tsr_insn_t){.opcode = TSR_OP_LOAD, .mem_type = TSR_MEM_UOP, .y_size = 1, .x_size = U, .x_stride = U};
    /* racy: the load stage writes inp row 5 with no token before the GEMMs read it (its token is popped by
     * FINISH alone); else an empty GEMM */
    if (racy)
        p[1] = (tsr_insn_t){.opcode = TSR_OP_LOAD, .mem_type = TSR_MEM_INP, .sram_base = 5, .y_size = 1, .x_size = 1,
                            .x_stride = 1, .dram_base = (uint32_t)(so_dram_n - 64) / c->inp_bytes, .push_next = 1};
    else
        p[1] = (tsr_insn_t){.opcode = TSR_OP_GEMM, .reset = 1, .iter_out = 1, .iter_in = 1};
    for (int g = 0; g < G; g++)
        p[2 + g] = (tsr_insn_t){.opcode = TSR_OP_GEMM, .reset = !racy, .uop_bgn = 0, .uop_end = U, .iter_out = 1,
                                .iter_in = 1 + (uint32_t)g};
    p[n - 1] = (tsr_insn_t){.opcode = TSR_OP_FINISH, .pop_prev = (uint32_t)racy};
    const tsr_region_t reg = {0, so_dram_n, "dram"};
    const tsr_verify_opts_t o = {&reg, 1, 0, so_read, NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    *rc = tsr_verify(c, p, n, &o);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(p);
    free(so_dram);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

static void test_slice_order(void **state)
{
    (void)state;
    tsr_config_t c;
    assert_int_equal(tsr_config_load("default", &c), TSR_OK);
    int rc;
    const double t = so_verify(&c, 0, 300, &rc);
    print_message("300 GEMMs over a descending 8,192-uop slice: %.3f s: %s\n", t, rc ? tsr_errmsg() : "(accepted)");
    assert_int_equal(rc, TSR_OK);
    assert_true(t < 3.0);
    const double t2 = so_verify(&c, 1, 40, &rc);
    print_message("racy: %.3f s: %s\n", t2, rc ? tsr_errmsg() : "(accepted)");
    assert_int_equal(rc, TSR_EVERIFY);
    assert_non_null(strstr(tsr_errmsg(), "race on inp rows [5, 6)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tiny), cmocka_unit_test(test_default),
                                       cmocka_unit_test(test_verify_agrees), cmocka_unit_test(test_slice_order)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
