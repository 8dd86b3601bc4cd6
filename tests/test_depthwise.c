/*
 * test_depthwise: the GEMM depthwise mode (config key DEPTHWISE, the GEMM
 * field depthwise; isa/semantics.md) through the config, the field table,
 * the device (fsim by default; TSR_TEST_BACKEND=rtl or systemc run the same
 * cases) and the verifier.
 *
 * Results are checked against a plain loop over the formula of
 * semantics.md written here, on all 32 bits of every accumulator (each byte
 * stored after shifting it down), not against the simulator: the weight
 * index names one of the G tap groups of a weight row (G = 4 on default +
 * DEPTHWISE 3, 2 on tiny + DSP_PACK + DEPTHWISE 2, 1 on the others), and
 * the loops reach groups the uop field cannot (run_high). The timing
 * contract (tsr_insn_issue_cycles) is checked against a brute-force walk of
 * the loops that charges K cycles to every op not following its
 * predecessor's src + 1.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_carryin.h"
#include "tsr_config.h"
#include "tsr_counters.h"
#include "tsr_driver.h"
#include "tsr_emit.h"
#include "tsr_error.h"
#include "tsr_gen.h"
#include "tsr_isa.h"
#include "tsr_ref.h"
#include "tsr_testenv.h"
#include "tsr_util.h"

/* ------------------------------------------------------------- config */

static void expect_config_error(const char *json, const char *want)
{
    tsr_config_t c;
    int rc = tsr_config_parse(json, "t", &c);
    if (rc == TSR_OK)
        fail_msg("config accepted, want an error containing \"%s\": %s", want, json);
    if (!strstr(tsr_errmsg(), want))
        fail_msg("config error \"%s\" does not name \"%s\"", tsr_errmsg(), want);
}

#define TINY_KEYS                                                                                  \
    "\"TARGET\":\"sim\",\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":0," \
    "\"LOG_UOP_BUFF_SIZE\":10,\"LOG_INP_BUFF_SIZE\":9,\"LOG_WGT_BUFF_SIZE\":10,\"LOG_ACC_BUFF_SIZE\":11"

static void test_config(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_test_preset_with("default", "DEPTHWISE", 3, &c);
    assert_int_equal(c.depthwise, 3);
    /* each lane is one channel: square blocks only */
    expect_config_error("{" TINY_KEYS ",\"LOG_BLOCK_IN\":3,\"LOG_BLOCK_OUT\":2,\"DEPTHWISE\":2}",
                        "BLOCK_IN == BLOCK_OUT");
    /* the taps must fit the columns: 4 columns, paired by DSP_PACK, hold 2 */
    assert_int_equal(tsr_config_parse("{" TINY_KEYS ",\"LOG_BLOCK\":2,\"DSP_PACK\":1,\"DEPTHWISE\":2}", "t", &c),
                     TSR_OK);
    expect_config_error("{" TINY_KEYS ",\"LOG_BLOCK\":2,\"DSP_PACK\":1,\"DEPTHWISE\":3}", "do not fit");
    expect_config_error("{" TINY_KEYS ",\"LOG_BLOCK\":2,\"DEPTHWISE\":5}", "do not fit");
    expect_config_error("{" TINY_KEYS ",\"LOG_BLOCK\":2,\"DEPTHWISE\":9}", "DEPTHWISE");
    /* the serial core has no depthwise mode: its RTL is refused */
    assert_int_equal(tsr_config_parse("{" TINY_KEYS ",\"LOG_BLOCK\":2,\"SERIAL_CORE\":1,\"DEPTHWISE\":2}", "t", &c),
                     TSR_OK);
    assert_int_not_equal(tsr_emit_rtl_supported(&c), TSR_OK);
    assert_non_null(strstr(tsr_errmsg(), "DEPTHWISE"));
}

/* ------------------------------------------------------------ field table */

static int has_field(const tsr_format_t *f, const char *name)
{
    for (int i = 0; i < f->nfields; i++)
        if (!strcmp(f->fields[i].name, name))
            return 1;
    return 0;
}

static void test_field(void **state)
{
    (void)state;
    tsr_config_t off, on;
    tsr_format_t f;
    tsr_test_preset_with("default", "DEPTHWISE", 0, &off);
    tsr_test_preset_with("default", "DEPTHWISE", 3, &on);
    /* off: the layout of today (127 bits, no such field) */
    assert_int_equal(tsr_isa_format(&off, TSR_OP_GEMM, &f), TSR_OK);
    assert_int_equal(f.total_bits, 127);
    assert_false(has_field(&f, "depthwise"));
    assert_int_equal(tsr_isa_format(&on, TSR_OP_GEMM, &f), TSR_OK);
    assert_int_equal(f.total_bits, 128);
    assert_true(has_field(&f, "depthwise"));

    tsr_insn_t in, back;
    tsr_insn_bits_t bits;
    memset(&in, 0, sizeof in);
    in.opcode = TSR_OP_GEMM;
    in.uop_end = 3;
    in.iter_out = in.iter_in = 2;
    in.src_factor_out = 7;
    in.depthwise = 1;
    /* without the key there is no bit for it: the encoder names the key */
    assert_int_not_equal(tsr_insn_encode(&off, &in, &bits), TSR_OK);
    assert_non_null(strstr(tsr_errmsg(), "DEPTHWISE"));
    assert_int_equal(tsr_insn_encode(&on, &in, &bits), TSR_OK);
    assert_int_equal((bits.w[1] >> 63) & 1, 1); /* the last GEMM field: bit 127 */
    assert_int_equal(tsr_insn_decode(&on, &bits, &back), TSR_OK);
    assert_int_equal(back.depthwise, 1);
    assert_int_equal(back.src_factor_out, 7);
    /* the same word on a config without the key: a reserved bit is set */
    assert_int_not_equal(tsr_insn_decode(&off, &bits, &back), TSR_OK);
    assert_non_null(strstr(tsr_errmsg(), "reserved bit 127"));
}

/* ------------------------------------------------------- timing contract */

/* Brute force: walk the loops in order; an op whose src is the previous
 * op's + d with 1 <= d < K costs d cycles (d new rows), any other K. */
static double walk_cycles(const tsr_config_t *c, const tsr_insn_t *in, const tsr_uop_t *uops)
{
    double cyc = 0;
    int64_t prev = -100;
    for (uint32_t i = 0; i < in->iter_out; i++)
        for (uint32_t j = 0; j < in->iter_in; j++)
            for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
                int64_t src = (int64_t)uops[u].src + (int64_t)i * in->src_factor_out + (int64_t)j * in->src_factor_in;
                cyc += src - prev >= 1 && src - prev < c->depthwise ? (double)(src - prev) : c->depthwise;
                prev = src;
            }
    return cyc;
}

static void test_issue_cycles(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_test_preset_with("default", "DEPTHWISE", 3, &c);
    tsr_uop_t u[16];
    tsr_insn_t in;
    memset(&in, 0, sizeof in);
    in.opcode = TSR_OP_GEMM;
    in.depthwise = 1;
    /* ten ops along x: one fresh (3) + nine slides */
    for (int k = 0; k < 10; k++)
        u[k] = (tsr_uop_t){(uint32_t)k, (uint32_t)k, 0};
    in.uop_end = 10;
    in.iter_out = in.iter_in = 1;
    assert_true(tsr_insn_issue_cycles(&c, &in, u) == 12);
    /* three kernel rows (src jumps by 12 between passes): three fresh ops */
    in.iter_out = 3;
    in.src_factor_out = 12;
    assert_true(tsr_insn_issue_cycles(&c, &in, u) == 36);
    /* a pass that continues where the last ended: one fresh op in all */
    in.src_factor_out = 10;
    assert_true(tsr_insn_issue_cycles(&c, &in, u) == 32);
    /* stride 2 (src 0, 2, .., 18): one fresh op, nine slides by 2 rows */
    for (int k = 0; k < 10; k++)
        u[k] = (tsr_uop_t){(uint32_t)k, 2 * (uint32_t)k, 0};
    in.iter_out = 1;
    in.src_factor_out = 0;
    assert_true(tsr_insn_issue_cycles(&c, &in, u) == 3 + 9 * 2);
    /* a slide by K is no slide: src 0, 3, .., 27 are ten fresh ops */
    for (int k = 0; k < 10; k++)
        u[k].src = 3 * (uint32_t)k;
    assert_true(tsr_insn_issue_cycles(&c, &in, u) == 30);
    /* random uops and factors against the brute-force walk */
    uint64_t s = tsr_test_seed("TSR_TEST_SEED", 0xd3b7);
    for (int t = 0; t < 2000; t++) {
        uint32_t nu = (uint32_t)tsr_test_rnd(&s, 1, 8);
        uint32_t base = (uint32_t)tsr_test_rnd(&s, 0, 20);
        for (uint32_t k = 0; k < nu; k++) {
            base += tsr_test_rnd(&s, 0, 3) ? 1u : (uint32_t)tsr_test_rnd(&s, 0, 4);
            u[k].src = base;
        }
        in.uop_bgn = 0;
        in.uop_end = nu;
        in.iter_out = (uint32_t)tsr_test_rnd(&s, 1, 4);
        in.iter_in = (uint32_t)tsr_test_rnd(&s, 1, 4);
        in.src_factor_out = (uint32_t)tsr_test_rnd(&s, 0, 12);
        in.src_factor_in = (uint32_t)tsr_test_rnd(&s, 0, 12);
        double want = walk_cycles(&c, &in, u), got = tsr_insn_issue_cycles(&c, &in, u);
        if (got != want)
            fail_msg("case %d: issue cycles %.0f, the walk gives %.0f (nu %u, iter %u,%u, src factors %u,%u)", t, got,
                     want, nu, in.iter_out, in.iter_in, in.src_factor_out, in.src_factor_in);
    }
}

/* The differential generator (tests/tsr_gen.c, dw_slides) must give the
 * soaks every kind of depthwise step: slides by 1, slides by 2 (stride-2
 * layers: d - 1 fill reads from src + K - d) and fresh ops, and whole
 * stride-2 instructions (every op after the first a slide by 2). Programs on
 * tiny + DEPTHWISE 3 run on the reference machine to know the uop buffer. */
static void test_gen_slides(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_test_preset_with("tiny", "DEPTHWISE", 3, &c);
    uint64_t n1 = 0, n2 = 0, fresh = 0, stride2 = 0;
    for (uint64_t seed = 0; seed < 100; seed++) {
        tsr_gen_prog_t p;
        assert_int_equal(tsr_gen_program(tsr_gen_mix(seed + 1), &c, NULL, &p), TSR_OK);
        ref_machine_t m;
        ref_dram_t d = {.base = TSR_GEN_BASE_ADDR};
        assert_int_equal(ref_machine_init(&m, &c), 0);
        for (size_t i = 0; i < p.nbufs; i++)
            if (p.bufs[i].addr + p.bufs[i].size > d.base + d.size)
                d.size = p.bufs[i].addr + p.bufs[i].size - d.base;
        assert_non_null(d.bytes = calloc(d.size, 1));
        for (size_t i = 0; i < p.nbufs; i++)
            memcpy(d.bytes + (p.bufs[i].addr - d.base), p.bufs[i].bytes, p.bufs[i].size);
        for (size_t i = 0; i < p.ninsns; i++) {
            const tsr_insn_t *in = &p.insns[i];
            if (in->opcode == TSR_OP_GEMM && in->depthwise && !in->reset) {
                int64_t prev = INT64_MIN;
                uint64_t ops = 0, twos = 0;
                for (uint32_t o = 0; o < in->iter_out; o++)
                    for (uint32_t j = 0; j < in->iter_in; j++)
                        for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
                            uint32_t dst, src, wgt;
                            ref_uop_fields(&m, m.uop[u], &dst, &src, &wgt);
                            const int64_t sr = (int64_t)src + (int64_t)o * in->src_factor_out +
                                               (int64_t)j * in->src_factor_in;
                            const int64_t step = prev == INT64_MIN ? 0 : sr - prev;
                            n1 += step == 1;
                            n2 += step == 2;
                            twos += step == 2;
                            fresh += step != 1 && step != 2;
                            prev = sr;
                            ops++;
                        }
                stride2 += ops >= 4 && twos == ops - 1;
            }
            if (ref_exec(&m, in, &d))
                fail_msg("seed %" PRIu64 " insn %zu: reference machine: %s", seed, i, ref_errmsg());
        }
        free(d.bytes);
        ref_machine_free(&m);
        tsr_gen_free(&p);
    }
    printf("generator, 100 programs on tiny + DEPTHWISE 3: depthwise ops sliding by 1 %" PRIu64 ", by 2 %" PRIu64
           ", fresh %" PRIu64 "; stride-2 instructions (>= 4 ops) %" PRIu64 "\n",
           n1, n2, fresh, stride2);
    assert_true(n1 > 0 && fresh > 0);
    if (n2 * 10 < n1 || stride2 < 10)
        fail_msg("too few slides by 2 for the soaks: %" PRIu64 " ops (by 1: %" PRIu64 "), %" PRIu64
                 " stride-2 instructions (want >= n1 / 10 and >= 10)", n2, n1, stride2);
}

/* ---------------------------------------------------------- device runs */

/* A stream: inp rows [0, ni) and wgt rows [0, nw) loaded, every acc row of
 * [0, na) reset, then the depthwise GEMM g (uops already in the uop
 * buffer at rows [0, nu)), then each acc row's four bytes stored to out
 * buffers o[0..3] (shifting by 8 between them). */
typedef struct {
    tsr_device_t *dev;
    const tsr_config_t *c;
    uint64_t inp, wgt, uop, out[4];
    uint32_t ni, nw, na, nu;
    int8_t *x, *w; /* host copies of inp and wgt */
} rig_t;

static void rig_open(rig_t *r, const tsr_config_t *c, uint32_t ni, uint32_t nw, uint32_t na, const tsr_uop_t *u,
                     uint32_t nu, uint64_t *seed)
{
    memset(r, 0, sizeof *r);
    tsr_device_opts_t o = {.seed = *seed};
    if (tsr_device_open(tsr_test_backend(), c, &o, &r->dev))
        fail_msg("open: %s", tsr_errmsg());
    r->c = tsr_device_config(r->dev);
    r->ni = ni;
    r->nw = nw;
    r->na = na;
    r->nu = nu;
    r->x = malloc((size_t)ni * c->inp_bytes);
    r->w = malloc((size_t)nw * c->wgt_bytes);
    assert_non_null(r->x);
    assert_non_null(r->w);
    for (size_t k = 0; k < (size_t)ni * c->inp_bytes; k++)
        r->x[k] = (int8_t)tsr_test_rnd(seed, -128, 127);
    for (size_t k = 0; k < (size_t)nw * c->wgt_bytes; k++)
        r->w[k] = (int8_t)tsr_test_rnd(seed, -128, 127);
    assert_int_equal(tsr_mem_alloc(r->dev, (uint64_t)ni * c->inp_bytes, &r->inp), TSR_OK);
    assert_int_equal(tsr_mem_alloc(r->dev, (uint64_t)nw * c->wgt_bytes, &r->wgt), TSR_OK);
    assert_int_equal(tsr_mem_write(r->dev, r->inp, r->x, (uint64_t)ni * c->inp_bytes), TSR_OK);
    assert_int_equal(tsr_mem_write(r->dev, r->wgt, r->w, (uint64_t)nw * c->wgt_bytes), TSR_OK);
    for (int k = 0; k < 4; k++)
        assert_int_equal(tsr_mem_alloc(r->dev, (uint64_t)na * c->out_bytes, &r->out[k]), TSR_OK);
    /* uop rows [0, nu) = u, row nu = the "every acc row" uop (0, 0, 0) */
    tsr_uop_t *all = calloc(nu + 1, sizeof *all);
    assert_non_null(all);
    memcpy(all, u, nu * sizeof *u);
    r->uop = tsr_test_uops(r->dev, all, nu + 1);
    free(all);
}

static void rig_close(rig_t *r)
{
    free(r->x);
    free(r->w);
    tsr_device_close(r->dev);
}

/* one row of n elements of memory type m between DRAM byte addr and on-chip row sram */
static tsr_insn_t mem(uint32_t op, uint32_t m, uint32_t sram, uint64_t addr, uint32_t bytes, uint32_t n)
{
    return tsr_test_mem_insn(op, m, sram, addr, bytes, n);
}

static tsr_insn_t rows_op(uint32_t opcode, uint32_t uop, uint32_t n)
{
    tsr_insn_t in;
    memset(&in, 0, sizeof in);
    in.opcode = opcode;
    in.uop_bgn = uop;
    in.uop_end = uop + 1;
    in.iter_out = 1;
    in.iter_in = n;
    in.dst_factor_in = 1;
    in.src_factor_in = 1;
    return in;
}

/* Build and run the stream around GEMM g; returns the device's code. */
static int rig_run(rig_t *r, const tsr_insn_t *g)
{
    const tsr_config_t *c = r->c;
    tsr_insn_t s[24];
    size_t n = 0;
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, r->uop, c->uop_bytes, r->nu + 1);
    s[n] = rows_op(TSR_OP_GEMM, r->nu, r->na);
    s[n++].reset = 1;
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_INP, 0, r->inp, c->inp_bytes, r->ni);
    s[n] = mem(TSR_OP_LOAD, TSR_MEM_WGT, 0, r->wgt, c->wgt_bytes, r->nw);
    s[n++].push_next = 1;
    s[n] = *g;
    s[n++].pop_prev = 1;
    for (int k = 0; k < 4; k++) {
        if (k) { /* shift the next byte down, once the store read the last */
            s[n] = rows_op(TSR_OP_ALU, r->nu, r->na);
            s[n].alu_opcode = TSR_ALU_SHR;
            s[n].use_imm = 1;
            s[n].imm = 8;
            s[n].pop_next = 1;
            s[n++].push_next = 1;
        } else {
            s[n - 1].push_next = 1;
        }
        s[n] = mem(TSR_OP_STORE, TSR_MEM_OUT, 0, r->out[k], c->out_bytes, r->na);
        s[n].pop_prev = 1;
        s[n++].push_prev = 1;
    }
    tsr_insn_t fin;
    memset(&fin, 0, sizeof fin);
    fin.opcode = TSR_OP_FINISH;
    fin.pop_next = 1;
    s[n++] = fin;
    int rc = tsr_submit(r->dev, s, n);
    if (!rc)
        rc = tsr_wait(r->dev, -1);
    return rc;
}

/* The accumulators after the stream, from the four stored bytes. */
static void rig_acc(rig_t *r, int32_t *acc)
{
    const tsr_config_t *c = r->c;
    const size_t lanes = (size_t)c->batch * c->block_out, n = r->na * lanes;
    uint8_t *b = malloc(n);
    assert_non_null(b);
    memset(acc, 0, n * sizeof *acc);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(tsr_mem_read(r->dev, r->out[k], b, n), TSR_OK);
        for (size_t e = 0; e < n; e++)
            acc[e] = (int32_t)((uint32_t)acc[e] | (uint32_t)b[e] << (8 * k));
    }
    free(b);
}

/* The formula of semantics.md over the loops, from zeroed accumulators
 * (written out here: not tsr_ref.c's). */
static void plain_dw(const rig_t *r, const tsr_insn_t *g, const tsr_uop_t *u, int32_t *acc)
{
    const tsr_config_t *c = r->c;
    const int B = c->batch, BI = c->block_in, K = c->depthwise;
    /* G tap groups per weight row: the largest power of two with G*K <= BO */
    uint32_t G = 1;
    while ((G * 2) * (uint32_t)K <= (uint32_t)c->block_out)
        G *= 2;
    memset(acc, 0, (size_t)r->na * B * BI * sizeof *acc);
    for (uint32_t i = 0; i < g->iter_out; i++)
        for (uint32_t j = 0; j < g->iter_in; j++)
            for (uint32_t q = g->uop_bgn; q < g->uop_end; q++) {
                uint32_t dst = u[q].dst + i * g->dst_factor_out + j * g->dst_factor_in;
                uint32_t src = u[q].src + i * g->src_factor_out + j * g->src_factor_in;
                uint32_t wr = u[q].wgt + i * g->wgt_factor_out + j * g->wgt_factor_in;
                for (int b = 0; b < B; b++)
                    for (int ch = 0; ch < BI; ch++) {
                        int64_t sum = 0;
                        for (int k = 0; k < K; k++)
                            sum += (int64_t)r->x[(size_t)(src + (uint32_t)k) * B * BI + (size_t)b * BI + ch] *
                                   r->w[(size_t)(wr / G) * BI * BI + (size_t)((wr % G) * (uint32_t)K + (uint32_t)k) * BI +
                                        ch];
                        int32_t *a = &acc[((size_t)dst * B + b) * BI + ch];
                        *a = (int32_t)((uint32_t)*a + (uint32_t)sum);
                    }
            }
}

/* A 1-D depthwise "convolution" of width W over three input rows of a
 * tile, the way a 3x3 layer runs: uop x = (dst x, src x, wgt 0), the outer
 * loop over kernel rows (src + ky*row, wgt + ky), plus a second instruction
 * with jumps (stride 2) into the same accumulators. */
static void run_case(const char *what, const tsr_config_t *cfg, uint32_t W, uint64_t *seed)
{
    const uint32_t K = (uint32_t)cfg->depthwise, row = W + K + 1, ni = 3 * row + 4;
    tsr_uop_t u[64];
    assert_true(W <= 32);
    for (uint32_t x = 0; x < W; x++)
        u[x] = (tsr_uop_t){x, x, 0};
    for (uint32_t x = 0; x < W / 2; x++) /* stride 2 */
        u[W + x] = (tsr_uop_t){x, 2 * x + 1, 3};
    rig_t r;
    rig_open(&r, cfg, ni, 6, W, u, W + W / 2, seed);
    tsr_insn_t g;
    memset(&g, 0, sizeof g);
    g.opcode = TSR_OP_GEMM;
    g.depthwise = 1;
    g.uop_end = W;
    g.iter_out = 3;
    g.iter_in = 1;
    g.src_factor_out = row;
    g.wgt_factor_out = 1;
    assert_int_equal(rig_run(&r, &g), TSR_OK);
    int32_t *got = malloc(sizeof(int32_t) * W * cfg->batch * cfg->block_in);
    int32_t *want = malloc(sizeof(int32_t) * W * cfg->batch * cfg->block_in);
    assert_non_null(got);
    assert_non_null(want);
    rig_acc(&r, got);
    plain_dw(&r, &g, u, want);
    for (size_t e = 0; e < (size_t)W * cfg->batch * cfg->block_in; e++)
        if (got[e] != want[e])
            fail_msg("%s: acc element %zu (row %zu): device %d, formula %d", what, e,
                     e / ((size_t)cfg->batch * cfg->block_in), got[e], want[e]);
    /* counters: W*3 ops of B*BI*K MACs each */
    tsr_counters_t ct;
    assert_int_equal(tsr_read_counters(r.dev, &ct), TSR_OK);
    assert_int_equal(ct.gemm_ops, 3 * W);
    assert_int_equal(ct.macs, (uint64_t)3 * W * cfg->batch * cfg->block_in * K);
    rig_close(&r);

    /* jumps: the stride-2 uops, two kernel rows */
    rig_open(&r, cfg, ni, 6, W, u, W + W / 2, seed);
    g.uop_bgn = W;
    g.uop_end = W + W / 2;
    g.iter_out = 2;
    assert_int_equal(rig_run(&r, &g), TSR_OK);
    rig_acc(&r, got);
    plain_dw(&r, &g, u, want);
    for (size_t e = 0; e < (size_t)W * cfg->batch * cfg->block_in; e++)
        if (got[e] != want[e])
            fail_msg("%s (stride 2): acc element %zu: device %d, formula %d", what, e, got[e], want[e]);
    rig_close(&r);
    free(got);
    free(want);
}

/* The weight index names a tap group and may reach G times the buffer's
 * rows through the loops while a uop's field holds only WGT_DEPTH values:
 * the whole weight buffer loaded, uops x = (dst x, src x, wgt depth-1-x)
 * and an outer loop of G passes stepping the group by depth-1 (dst by W),
 * so the last pass reads tap groups of the buffer's top rows; checked
 * against the formula like run_case. */
static void run_high(const char *what, const tsr_config_t *cfg, uint32_t W, uint64_t *seed)
{
    const uint32_t K = (uint32_t)cfg->depthwise, G = 1u << cfg->dw_group_bits, D = cfg->wgt_depth;
    tsr_uop_t u[32];
    assert_true(W <= 32 && W < D);
    for (uint32_t x = 0; x < W; x++)
        u[x] = (tsr_uop_t){x, x, D - 1 - x};
    rig_t r;
    rig_open(&r, cfg, W + K, D, G * W, u, W, seed);
    tsr_insn_t g;
    memset(&g, 0, sizeof g);
    g.opcode = TSR_OP_GEMM;
    g.depthwise = 1;
    g.uop_end = W;
    g.iter_out = G;
    g.iter_in = 1;
    g.dst_factor_out = W;
    g.wgt_factor_out = D - 1; /* the last pass: groups up to G*(D-1), row D-1 */
    assert_int_equal(rig_run(&r, &g), TSR_OK);
    const size_t n = (size_t)G * W * cfg->batch * cfg->block_in;
    int32_t *got = malloc(sizeof(int32_t) * n), *want = malloc(sizeof(int32_t) * n);
    assert_non_null(got);
    assert_non_null(want);
    rig_acc(&r, got);
    plain_dw(&r, &g, u, want);
    for (size_t e = 0; e < n; e++)
        if (got[e] != want[e])
            fail_msg("%s (groups past the uop field, G %u): acc element %zu (row %zu): device %d, formula %d", what, G,
                     e, e / ((size_t)cfg->batch * cfg->block_in), got[e], want[e]);
    rig_close(&r);
    free(got);
    free(want);
}

static void test_results(void **state)
{
    (void)state;
    uint64_t seed = tsr_test_seed("TSR_TEST_SEED", 0x5eed);
    tsr_config_t c;
    tsr_test_preset_with("default", "DEPTHWISE", 3, &c);
    run_case("default+DEPTHWISE 3", &c, 14, &seed);
    run_high("default+DEPTHWISE 3", &c, 5, &seed);
    assert_int_equal(tsr_config_parse("{" TINY_KEYS ",\"LOG_BLOCK\":2,\"DEPTHWISE\":4}", "tiny+dw4", &c), TSR_OK);
    run_case("tiny+DEPTHWISE 4", &c, 9, &seed);
    assert_int_equal(
        tsr_config_parse("{" TINY_KEYS ",\"LOG_BLOCK\":2,\"DSP_PACK\":1,\"DEPTHWISE\":2}", "tiny+pack+dw2", &c),
        TSR_OK);
    run_case("tiny+DSP_PACK+DEPTHWISE 2", &c, 7, &seed);
    run_high("tiny+DSP_PACK+DEPTHWISE 2", &c, 5, &seed);
    assert_int_equal(tsr_config_parse("{\"TARGET\":\"sim\",\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,"
                                      "\"LOG_BATCH\":1,\"LOG_BLOCK\":2,\"LOG_UOP_BUFF_SIZE\":10,"
                                      "\"LOG_INP_BUFF_SIZE\":10,\"LOG_WGT_BUFF_SIZE\":10,\"LOG_ACC_BUFF_SIZE\":11,"
                                      "\"DEPTHWISE\":3}",
                                      "b2+dw3", &c),
                     TSR_OK);
    run_case("batch 2+DEPTHWISE 3", &c, 8, &seed);
}

/* ----------------------------------------------------------- bad streams */

static void test_refusals(void **state)
{
    (void)state;
    uint64_t seed = 7;
    tsr_config_t on, off;
    tsr_test_preset_with("default", "DEPTHWISE", 3, &on);
    tsr_test_preset_with("default", "DEPTHWISE", 0, &off);
    tsr_uop_t u[4] = {{0, 0, 0}, {1, 1, 0}, {2, 2, 0}, {3, 3, 0}};
    tsr_insn_t g;
    memset(&g, 0, sizeof g);
    g.opcode = TSR_OP_GEMM;
    g.depthwise = 1;
    g.uop_end = 4;
    g.iter_out = g.iter_in = 1;

    /* the mode on a config without the key: the verifier names the instruction and the key */
    rig_t r;
    rig_open(&r, &off, 8, 1, 4, u, 4, &seed);
    assert_int_not_equal(rig_run(&r, &g), TSR_OK);
    if (!strstr(tsr_errmsg(), "DEPTHWISE") || !strstr(tsr_errmsg(), "#4"))
        fail_msg("want the instruction (#4) and the key named: %s", tsr_errmsg());
    rig_close(&r);

    /* src + K - 1 past the input buffer (the last op reads rows depth-2 .. depth) */
    tsr_uop_t far[1] = {{0, on.inp_depth - 2, 0}};
    rig_open(&r, &on, 8, 1, 4, far, 1, &seed);
    g.uop_end = 1;
    assert_int_not_equal(rig_run(&r, &g), TSR_OK);
    if (!strstr(tsr_errmsg(), "src + DEPTHWISE - 1"))
        fail_msg("want the K rows' range named: %s", tsr_errmsg());
    rig_close(&r);
    /* ... while row depth-3 .. depth-1 is fine for the checks (unloaded rows are not an index error) */
    far[0].src = on.inp_depth - 3;
    rig_open(&r, &on, 8, 1, 4, far, 1, &seed);
    assert_int_equal(rig_run(&r, &g), TSR_OK);
    rig_close(&r);
    /* the weight index names a tap group (G = 4 per row here): the uop field reaches the first
     * wgt_depth groups, the loops the rest; group 4092 (row 1023, the last) is fine, 4096 is not */
    assert_int_equal(on.dw_group_bits, 2);
    assert_int_equal(on.wgt_depth, 1024);
    far[0].src = 0;
    far[0].wgt = 1023;
    g.iter_out = 4;
    g.wgt_factor_out = 1023; /* groups 1023, 2046, 3069, 4092 */
    rig_open(&r, &on, 8, 1, 4, far, 1, &seed);
    assert_int_equal(rig_run(&r, &g), TSR_OK);
    rig_close(&r);
    g.iter_in = 2;
    g.wgt_factor_in = 4; /* ... and 4096: row 1024 */
    rig_open(&r, &on, 8, 1, 4, far, 1, &seed);
    assert_int_not_equal(rig_run(&r, &g), TSR_OK);
    if (!strstr(tsr_errmsg(), "tap group"))
        fail_msg("want the tap group's row named: %s", tsr_errmsg());
    rig_close(&r);
}

/* A LOAD of inp row 9 unordered with a GEMM whose ops start at rows <= 8:
 * a plain GEMM (reading rows 4..7) does not race it; the depthwise one
 * (reading 4..9 with K = 3) does, and the verifier names the race. */
static void test_race(void **state)
{
    (void)state;
    uint64_t seed = 9;
    tsr_config_t on;
    tsr_test_preset_with("default", "DEPTHWISE", 3, &on);
    tsr_uop_t u[4] = {{0, 4, 0}, {1, 5, 0}, {2, 6, 0}, {3, 7, 0}};
    for (int dw = 0; dw < 2; dw++) {
        rig_t r;
        rig_open(&r, &on, 16, 1, 4, u, 4, &seed);
        tsr_insn_t s[8];
        size_t n = 0;
        s[n++] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, r.uop, on.uop_bytes, 5);
        s[n++] = mem(TSR_OP_LOAD, TSR_MEM_INP, 0, r.inp, on.inp_bytes, 8);
        s[n] = mem(TSR_OP_LOAD, TSR_MEM_WGT, 0, r.wgt, on.wgt_bytes, 1);
        s[n++].push_next = 1;
        s[n] = mem(TSR_OP_LOAD, TSR_MEM_INP, 9, r.inp, on.inp_bytes, 1); /* row 9, not ordered */
        s[n++].push_next = 1;
        tsr_insn_t g;
        memset(&g, 0, sizeof g);
        g.opcode = TSR_OP_GEMM;
        g.depthwise = (uint32_t)dw;
        g.uop_end = 4;
        g.iter_out = g.iter_in = 1;
        g.pop_prev = 1;
        s[n++] = g;
        tsr_insn_t w;
        memset(&w, 0, sizeof w);
        w.opcode = TSR_OP_GEMM; /* pops the second token (no access) */
        w.pop_prev = 1;
        s[n++] = w;
        tsr_insn_t fin;
        memset(&fin, 0, sizeof fin);
        fin.opcode = TSR_OP_FINISH;
        s[n++] = fin;
        int rc = tsr_submit(r.dev, s, n);
        if (!rc)
            rc = tsr_wait(r.dev, -1);
        if (!dw && rc)
            fail_msg("the plain GEMM's stream was refused: %s", tsr_errmsg());
        if (dw && (rc == TSR_OK || !strstr(tsr_errmsg(), "inp")))
            fail_msg("the depthwise GEMM reading row 9 unordered with its LOAD was %s: %s",
                     rc ? "refused for another reason" : "accepted", rc ? tsr_errmsg() : "");
        rig_close(&r);
    }
}

/* What a stream reads before writing it (tsr_carryin: the sampled
 * backend's hand-over) knows the tap groups: four ops reading the four
 * groups of weight row 0, which the stream loaded, carry no weight row in
 * (taking the groups for rows, rows 1..3 would be). */
static void test_carryin(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_test_preset_with("default", "DEPTHWISE", 3, &c);
    assert_int_equal(c.dw_group_bits, 2);
    tsr_uop_t *u0 = calloc(c.uop_depth, sizeof *u0);
    uint8_t *carried[TSR_CARRY_COUNT];
    assert_non_null(u0);
    for (int b = 0; b < TSR_CARRY_COUNT; b++)
        assert_non_null(carried[b] = calloc(tsr_carryin_depth(&c, b) + 1, 1));
    for (uint32_t x = 0; x < 4; x++)
        u0[x] = (tsr_uop_t){x, x, x};
    tsr_insn_t s[4];
    s[0] = mem(TSR_OP_LOAD, TSR_MEM_WGT, 0, 0x1000, c.wgt_bytes, 1);
    s[1] = mem(TSR_OP_LOAD, TSR_MEM_INP, 0, 0x2000, c.inp_bytes, 8);
    s[1].push_next = 1;
    memset(&s[2], 0, sizeof s[2]);
    s[2].opcode = TSR_OP_GEMM;
    s[2].depthwise = 1;
    s[2].reset = 0;
    s[2].uop_end = 4;
    s[2].iter_out = s[2].iter_in = 1;
    s[2].pop_prev = 1;
    memset(&s[3], 0, sizeof s[3]);
    s[3].opcode = TSR_OP_FINISH;
    assert_int_equal(tsr_carryin_rows(&c, s, 4, NULL, NULL, u0, carried), TSR_OK);
    for (uint32_t r = 0; r < c.wgt_depth; r++)
        if (carried[TSR_CARRY_WGT][r])
            fail_msg("weight row %u taken as carried in (the ops read tap groups 0..3 of row 0)", r);
    assert_int_equal(carried[TSR_CARRY_ACC][0], 1); /* (the GEMM accumulates onto acc rows it never wrote) */
    for (int b = 0; b < TSR_CARRY_COUNT; b++)
        free(carried[b]);
    free(u0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),  cmocka_unit_test(test_field),    cmocka_unit_test(test_issue_cycles),
        cmocka_unit_test(test_results), cmocka_unit_test(test_refusals), cmocka_unit_test(test_race),
        cmocka_unit_test(test_gen_slides), cmocka_unit_test(test_carryin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
