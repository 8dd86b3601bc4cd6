/*
 * test_dw_timing_rtl: the pipelined RTL core's GEMM depthwise mode keeps the
 * timing contract of isa/tsr_isa.c (tsr_insn_issue_cycles, which SystemC
 * uses): an op whose src is the previous op's src + d with 1 <= d < K in
 * the same instruction costs d cycles (d new input rows; the window holds
 * the other K-d), any other op K cycles (K-1 fill reads, then its own).
 *
 * The same stream runs with depthwise GEMMs that differ only in their src
 * pattern: A one run of consecutive src (one fresh op, the rest slides by
 * 1), B src stepping by 2 (a stride-2 layer: one fresh op, the rest slides
 * by 2), C a kernel of slides and jumps over a 2-D loop, D src stepping by
 * K (every op fresh: a step of K is no slide). Loads, stores and op counts
 * are equal, so the compute-busy and total cycle counts of two runs must
 * differ by exactly the difference of their issue cycles; B - A is N-1
 * (it was (K-1) * (N-1) when only slides by 1 reused the window), D - A is
 * (K-1) * (N-1). If the window were not reused (every op filling), A would
 * cost as much as D. The outputs are checked against the formula of
 * isa/semantics.md on the way.
 *
 * The range check of a depthwise op covers its last row, src + K - 1, on
 * the RTL as on fsim.
 *
 * Configs: tiny with DSP_PACK 0 and DEPTHWISE 3 (tests/rtl/tiny_dw.json),
 * and TSR_DW_DEFAULT=1 adds default + DEPTHWISE 3 (DSP_PACK 1: the paired
 * multipliers; a bigger model build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_config.h"
#include "tsr_counters.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_regs.h"
#include "tsr_testenv.h"

#define N_OPS 24   /* ops of the A and B GEMMs */
#define MAX_K 3    /* DEPTHWISE of the configs run */
#define N_INP (MAX_K * N_OPS) /* input rows loaded: D reads up to K * (N_OPS - 1) + K - 1 */
#define N_UOP 8    /* uop rows loaded */

typedef struct {
    uint64_t cycles, busy;  /* the run's total and compute-busy cycles */
    double issue;           /* tsr_insn_issue_cycles of its depthwise GEMM */
} meas_t;

/* one row of n elements of memory type m between DRAM byte addr and on-chip row sram */
static tsr_insn_t mem(uint32_t op, uint32_t m, uint32_t sram, uint64_t addr, uint32_t bytes, uint32_t n)
{
    return tsr_test_mem_insn(op, m, sram, addr, bytes, n);
}

/* acc[dst] = sum_k inp[src+k][c] * wgt[w][k][c] over g's loops, from 0. */
static void plain_dw(const tsr_config_t *c, const int8_t *x, const int8_t *w, const tsr_insn_t *g,
                     const tsr_uop_t *u, int32_t *acc, uint32_t na)
{
    const uint32_t L = (uint32_t)(c->batch * c->block_in);
    memset(acc, 0, sizeof *acc * na * L);
    for (uint32_t i = 0; i < g->iter_out; i++)
        for (uint32_t j = 0; j < g->iter_in; j++)
            for (uint32_t q = g->uop_bgn; q < g->uop_end; q++) {
                uint32_t d = u[q].dst + i * g->dst_factor_out + j * g->dst_factor_in;
                uint32_t s = u[q].src + i * g->src_factor_out + j * g->src_factor_in;
                uint32_t wr = u[q].wgt + i * g->wgt_factor_out + j * g->wgt_factor_in;
                assert_true(d < na);
                for (uint32_t b = 0; b < (uint32_t)c->batch; b++)
                    for (uint32_t ch = 0; ch < (uint32_t)c->block_in; ch++) {
                        int64_t sum = 0;
                        for (int k = 0; k < c->depthwise; k++)
                            sum += (int64_t)x[(s + (uint32_t)k) * L + b * (uint32_t)c->block_in + ch] *
                                   w[(size_t)wr * c->block_out * c->block_in + (size_t)k * c->block_in + ch];
                        int32_t *a = &acc[d * L + b * (uint32_t)c->block_in + ch];
                        *a = (int32_t)((uint32_t)*a + (uint32_t)sum);
                    }
            }
}

/* One run on dev: uops u[0..nu) loaded, N_INP input rows and one weight
 * row, acc rows [0, na) reset, the depthwise GEMM g, the rows stored;
 * outputs checked; cycles measured. */
static void run(tsr_device_t *dev, const tsr_uop_t *u, uint32_t nu, const tsr_insn_t *g, uint32_t na,
                uint64_t *seed, meas_t *m)
{
    const tsr_config_t *c = tsr_device_config(dev);
    const uint32_t L = (uint32_t)(c->batch * c->block_in);
    int8_t *x = malloc((size_t)N_INP * c->inp_bytes), *w = malloc(c->wgt_bytes);
    int32_t *acc = malloc(sizeof *acc * na * L);
    uint8_t *out = malloc((size_t)na * c->out_bytes);
    assert_true(x && w && acc && out);
    for (size_t k = 0; k < (size_t)N_INP * c->inp_bytes; k++)
        x[k] = (int8_t)tsr_test_rnd(seed, -128, 127);
    for (size_t k = 0; k < c->wgt_bytes; k++)
        w[k] = (int8_t)tsr_test_rnd(seed, -128, 127);
    uint64_t ai, aw, ao;
    assert_int_equal(tsr_mem_alloc(dev, (uint64_t)N_INP * c->inp_bytes, &ai), TSR_OK);
    assert_int_equal(tsr_mem_alloc(dev, c->wgt_bytes, &aw), TSR_OK);
    assert_int_equal(tsr_mem_alloc(dev, (uint64_t)na * c->out_bytes, &ao), TSR_OK);
    assert_int_equal(tsr_mem_write(dev, ai, x, (uint64_t)N_INP * c->inp_bytes), TSR_OK);
    assert_int_equal(tsr_mem_write(dev, aw, w, c->wgt_bytes), TSR_OK);
    /* uop rows [0, nu) = u, the others (0, 0, 0) (row N_UOP - 1 for the
     * reset); every run loads N_UOP rows, so their loads take equal time */
    tsr_uop_t all[N_UOP];
    assert_true(nu < N_UOP);
    memset(all, 0, sizeof all);
    memcpy(all, u, nu * sizeof *u);
    const uint64_t au = tsr_test_uops(dev, all, N_UOP);

    tsr_insn_t s[8];
    int n = 0;
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, au, c->uop_bytes, N_UOP);
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_INP, 0, ai, c->inp_bytes, N_INP);
    s[n] = mem(TSR_OP_LOAD, TSR_MEM_WGT, 0, aw, c->wgt_bytes, 1);
    s[n++].push_next = 1;
    tsr_insn_t r;
    memset(&r, 0, sizeof r);
    r.opcode = TSR_OP_GEMM;
    r.reset = 1;
    r.pop_prev = 1;
    r.uop_bgn = N_UOP - 1;
    r.uop_end = N_UOP;
    r.iter_out = 1;
    r.iter_in = na;
    r.dst_factor_in = 1;
    s[n++] = r;
    s[n] = *g;
    s[n++].push_next = 1;
    s[n] = mem(TSR_OP_STORE, TSR_MEM_OUT, 0, ao, c->out_bytes, na);
    s[n].pop_prev = 1;
    s[n++].push_prev = 1; /* FINISH waits for the store */
    memset(&s[n], 0, sizeof s[n]);
    s[n].opcode = TSR_OP_FINISH;
    s[n++].pop_next = 1;

    tsr_counters_t c0, c1;
    assert_int_equal(tsr_read_counters(dev, &c0), TSR_OK);
    if (tsr_submit(dev, s, (size_t)n))
        fail_msg("submit: %s", tsr_errmsg());
    if (tsr_wait(dev, -1))
        fail_msg("run: %s", tsr_errmsg());
    assert_int_equal(tsr_read_counters(dev, &c1), TSR_OK);
    assert_true(c1.has_hw);
    m->cycles = c1.hw[TSR_CNT_CYCLES] - c0.hw[TSR_CNT_CYCLES];
    m->busy = c1.hw[TSR_CNT_COMPUTE_BUSY] - c0.hw[TSR_CNT_COMPUTE_BUSY];
    m->issue = tsr_insn_issue_cycles(c, g, all);

    /* outputs: the low 8 bits of each accumulator (int8 outputs) */
    assert_int_equal(c->out_width, 8);
    plain_dw(c, x, w, g, all, acc, na);
    assert_int_equal(tsr_mem_read(dev, ao, out, (uint64_t)na * c->out_bytes), TSR_OK);
    for (uint32_t k = 0; k < na * L; k++)
        if (out[k] != (uint8_t)acc[k])
            fail_msg("output row %u lane %u: 0x%02x, want 0x%02x", k / L, k % L, out[k], (uint8_t)acc[k]);
    free(x);
    free(w);
    free(acc);
    free(out);
}

static tsr_insn_t dw_gemm(uint32_t nu, uint32_t io, uint32_t ii)
{
    tsr_insn_t g;
    memset(&g, 0, sizeof g);
    g.opcode = TSR_OP_GEMM;
    g.depthwise = 1;
    g.uop_end = nu;
    g.iter_out = io;
    g.iter_in = ii;
    return g;
}

static void check_config(const tsr_config_t *cfg)
{
    const int K = cfg->depthwise;
    assert_true(K >= 3 && K <= MAX_K); /* B's step of 2 a slide, D's rows loaded */
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = 1};
    if (tsr_device_open("rtl", cfg, &o, &dev))
        fail_msg("open rtl: %s", tsr_errmsg());
    uint64_t seed = 7;
    meas_t a, b, cc, dd;

    /* A: op j = (dst j, src j): one fresh op, N-1 slides */
    const tsr_uop_t u0 = {0, 0, 0};
    tsr_insn_t ga = dw_gemm(1, 1, N_OPS);
    ga.dst_factor_in = 1;
    ga.src_factor_in = 1;
    run(dev, &u0, 1, &ga, N_OPS, &seed, &a);
    /* B: src 2j, a stride-2 layer: slides by 2 after the first op */
    tsr_insn_t gb = ga;
    gb.src_factor_in = 2;
    run(dev, &u0, 1, &gb, N_OPS, &seed, &b);
    /* C: uop srcs 0, 1, 2, 7 (two slides, a jump), the inner loop +8 (its
     * second pass starts at 8, a slide from 7), the outer +12 (12 after 15:
     * a jump); 4 x 2 x 3 = N_OPS ops on acc rows 0 .. N_OPS-1 */
    const tsr_uop_t uc[4] = {{0, 0, 0}, {1, 1, 0}, {2, 2, 0}, {3, 7, 0}};
    tsr_insn_t gc = dw_gemm(4, 3, 2);
    gc.dst_factor_out = 8;
    gc.dst_factor_in = 4;
    gc.src_factor_out = 12;
    gc.src_factor_in = 8;
    run(dev, uc, 4, &gc, N_OPS, &seed, &cc);
    /* D: src K j, every op fresh */
    tsr_insn_t gd = ga;
    gd.src_factor_in = (uint32_t)K;
    run(dev, &u0, 1, &gd, N_OPS, &seed, &dd);
    tsr_device_close(dev);

    printf("DEPTHWISE %d, %d ops: A (slides) %llu cycles, compute busy %llu, issue %.0f; "
           "B (stride 2) %llu, %llu, %.0f; C (mixed) %llu, %llu, %.0f; D (jumps) %llu, %llu, %.0f\n",
           K, N_OPS, (unsigned long long)a.cycles, (unsigned long long)a.busy, a.issue,
           (unsigned long long)b.cycles, (unsigned long long)b.busy, b.issue, (unsigned long long)cc.cycles,
           (unsigned long long)cc.busy, cc.issue, (unsigned long long)dd.cycles, (unsigned long long)dd.busy,
           dd.issue);
    /* the contract itself, as the header states it */
    assert_true(a.issue == N_OPS + (K - 1));
    assert_true(b.issue == K + 2.0 * (N_OPS - 1));
    assert_true(dd.issue == (double)N_OPS * K);
    const meas_t *v[3] = {&b, &cc, &dd};
    const char *name[3] = {"B (stride 2)", "C (mixed)", "D (jumps)"};
    for (int k = 0; k < 3; k++) {
        const int64_t want = (int64_t)(v[k]->issue - a.issue);
        const int64_t busy = (int64_t)v[k]->busy - (int64_t)a.busy, cyc = (int64_t)v[k]->cycles - (int64_t)a.cycles;
        if (busy != want || cyc != want)
            fail_msg("%s - A: compute busy %lld, total %lld cycles; the timing contract "
                     "(tsr_insn_issue_cycles) says %lld",
                     name[k], (long long)busy, (long long)cyc, (long long)want);
    }
}

static void test_tiny_dw(void **state)
{
    (void)state;
    tsr_config_t cfg; /* tests/rtl/tiny_dw.json */
    tsr_test_preset_with("tiny", "DEPTHWISE", 3, &cfg);
    assert_int_equal(cfg.dsp_pack, 0);
    check_config(&cfg);
}

/* Verdict of one depthwise op with src S (iter 1) on a device opened with
 * the verifier off: TSR_OK, or the run's error. */
static int one_op(const char *backend, const tsr_config_t *cfg, uint32_t src)
{
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.skip_verify = 1};
    o.rtl.watchdog_cycles = 50000;
    if (tsr_device_open(backend, cfg, &o, &dev))
        fail_msg("open %s: %s", backend, tsr_errmsg());
    const tsr_uop_t u = {0, src, 0};
    tsr_insn_t s[3];
    s[0] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, tsr_test_uops(dev, &u, 1), cfg->uop_bytes, 1);
    s[1] = dw_gemm(1, 1, 1);
    memset(&s[2], 0, sizeof s[2]);
    s[2].opcode = TSR_OP_FINISH;
    assert_int_equal(tsr_submit(dev, s, 3), TSR_OK);
    int rc = tsr_wait(dev, 60000);
    tsr_device_close(dev);
    return rc;
}

/* The range check covers the op's last row: src + K - 1 < INP_DEPTH. The
 * op at INP_DEPTH - K runs; the one at INP_DEPTH - K + 1 (its src alone in
 * range) is an error on the RTL as on fsim. */
static void test_range(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_test_preset_with("tiny", "DEPTHWISE", 3, &cfg);
    const uint32_t last = cfg.inp_depth - (uint32_t)cfg.depthwise;
    assert_int_equal(one_op("fsim", &cfg, last), TSR_OK);
    assert_int_equal(one_op("rtl", &cfg, last), TSR_OK);
    assert_int_not_equal(one_op("fsim", &cfg, last + 1), TSR_OK);
    if (one_op("rtl", &cfg, last + 1) == TSR_OK)
        fail_msg("rtl: a depthwise op with src %u (src + %d = INP_DEPTH %u) ran without an error", last + 1,
                 cfg.depthwise - 1, cfg.inp_depth);
    assert_int_not_equal(one_op("rtl", &cfg, cfg.inp_depth - 1), TSR_OK);
}

static void test_default_dw(void **state)
{
    (void)state;
    const char *v = getenv("TSR_DW_DEFAULT");
    if (!v || strcmp(v, "1")) {
        printf("default + DEPTHWISE 3: skipped (TSR_DW_DEFAULT=1 runs it)\n");
        return;
    }
    tsr_config_t cfg;
    tsr_test_preset_with("default", "DEPTHWISE", 3, &cfg);
    assert_int_equal(cfg.dsp_pack, 1);
    check_config(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_dw),
        cmocka_unit_test(test_range),
        cmocka_unit_test(test_default_dw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
