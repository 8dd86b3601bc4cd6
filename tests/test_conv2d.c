/*
 * test_conv2d: the conv2d JIT operator (jit/tsr_conv2d.c) against the
 * plain-C reference of jit/operators.md (tests/tsr_opref.c), exact
 * equality, on random cases over kernels, strides, paddings, channel
 * counts, batch, dtypes, zero points, requantization and depthwise, on the
 * tiny/default/large presets and two custom configs (BATCH 2; BLOCK_IN !=
 * BLOCK_OUT). Failures print the seed, the case and the first differing
 * element. Backend from TSR_TEST_BACKEND (default fsim; other backends run
 * a tenth of the random cases); TSR_CONV_SEED overrides the base seed,
 * TSR_CONV_FILTER selects tests (cmocka pattern). fsim runs with a random
 * stage interleaving, so a missing dependency token shows up as a wrong
 * result.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_act.h"
#include "tsr_conv2d.h"
#include "tsr_cost.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_kcache.h"
#include "tsr_netbench.h"
#include "tsr_opref.h"
#include "tsr_testenv.h"

static const char *backend(void) { return tsr_test_backend(); }

/* Random case counts: full on fsim, a tenth on the (much slower) RTL. */
static int scaled(int n)
{
    return strcmp(backend(), "fsim") ? (n + 9) / 10 : n;
}

static uint64_t base_seed(void) { return tsr_test_seed("TSR_CONV_SEED", 20261123u); }


/* Named configs beyond tsr_test_config's: the depthwise-mode ones
 * (DEPTHWISE = K taps on default, tiny and a batch-2 config). */
static const char *CFG_B2_DW3 = "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": 3, \"LOG_WGT_WIDTH\": 3, \"LOG_ACC_WIDTH\": 5, "
                                "\"LOG_BATCH\": 1, \"LOG_BLOCK\": 2, \"LOG_UOP_BUFF_SIZE\": 12, \"LOG_INP_BUFF_SIZE\": 11, "
                                "\"LOG_WGT_BUFF_SIZE\": 11, \"LOG_ACC_BUFF_SIZE\": 13, \"DEPTHWISE\": 3}";
/* tiny's with 2 input rows: a depthwise op (3 rows) has no room, a 1x1
 * conv's block-diagonal op has */
static const char *CFG_TINY_DW3_INP2 = "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": 3, \"LOG_WGT_WIDTH\": 3, "
                                       "\"LOG_ACC_WIDTH\": 5, \"LOG_BATCH\": 0, \"LOG_BLOCK\": 2, "
                                       "\"LOG_UOP_BUFF_SIZE\": 10, \"LOG_INP_BUFF_SIZE\": 3, \"LOG_WGT_BUFF_SIZE\": 10, "
                                       "\"LOG_ACC_BUFF_SIZE\": 11, \"DEP_QUEUE_DEPTH\": 4, \"DEPTHWISE\": 3}";
static tsr_device_t *open_dev(const char *name)
{
    tsr_config_t cfg;
    int dwk = 0;
    char base[32];
    const char *plus = strstr(name, "+dw");
    if (!strcmp(name, "b2+dw3") || !strcmp(name, "tiny+dw3+inp2")) {
        if (tsr_config_parse(strcmp(name, "b2+dw3") ? CFG_TINY_DW3_INP2 : CFG_B2_DW3, name, &cfg))
            fail_msg("config %s: %s", name, tsr_errmsg());
    } else if (plus && sscanf(plus, "+dw%d", &dwk) == 1) {
        snprintf(base, sizeof base, "%.*s", (int)(plus - name), name);
        tsr_test_preset_with(base, "DEPTHWISE", dwk, &cfg);
    } else
        return tsr_test_open(name, base_seed() | 1);
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = base_seed() | 1};
    if (tsr_device_open(tsr_test_backend(), &cfg, &o, &dev))
        fail_msg("open %s/%s: %s", tsr_test_backend(), name, tsr_errmsg());
    return dev;
}

static int rnd(uint64_t *s, int lo, int hi) { return tsr_test_rnd(s, lo, hi); }

/* Outputs strictly inside the clamp range, and all outputs compared (the
 * random cases must not be mostly saturated to mean something). */
static uint64_t g_inside, g_total;
/* Cases whose plan split the reduction, tiled the columns, single-buffered. */
static int g_split, g_coltile, g_single, g_res, g_dwsplit;
/* Depthwise cases planned in the GEMM depthwise mode (plan.dwk > 0). */
static int g_dwmode;
/* 1: the depthwise cases run on a config where the mode cannot tile them */
static int g_dw_fallback;
/* 1: random_case makes every case depthwise (groups = C_in = C_out) */
static int g_force_dw;
/* 1: run_case uses the one-call tsr_conv2d_run instead of plan/pack/exec. */
static int g_one_call;
/* 1: random_case draws float32 scales (exact requantization, fscale) */
static int g_exact;
/* 1: run_case gives every output-channel block the first block's weights
 * (and weight zero points) and plans with them known (p.w_plan); g_shared
 * counts the plans that share one copy (plan.wshare) */
static int g_periodic_w, g_shared, g_shared_split;
/* > 0: random_case makes a grouped case with these groups and C_in = C_out = g_force_c */
static int g_force_groups, g_force_c;

/* One test case: parameters plus its data. */
typedef struct {
    tsr_conv2d_params_t p;
    int32_t w_zp[256], mult[256], shift[256];
    float fscale[256]; /* g_exact: the float32 scales (exact requantization) */
    int use_bias;
    int full_w; /* weights drawn from the whole dtype range (w - w_zp may leave int8) */
} conv_case_t;

static int32_t dmin(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 0 : -128; }
static int32_t dmax(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 255 : 127; }

static void describe(const conv_case_t *k, const char *cfg, uint64_t seed, char *buf, size_t n)
{
    const tsr_conv2d_params_t *p = &k->p;
    snprintf(buf, n,
             "seed %llu config %s: x [%d,%d,%d,%d] %s zp %d, w [%d,%d,%d,%d] %s zp[0] %d (%s), stride %dx%d, pad "
             "t%d l%d b%d r%d, groups %d, y %s zp %d act [%d,%d], requant %s mult[0] %d shift[0] %d, bias %d",
             (unsigned long long)seed, cfg, p->n, p->c_in, p->h, p->w, p->x_dtype == TSR_DT_UINT8 ? "u8" : "i8",
             p->x_zp, p->c_out, p->c_in / (p->groups > 0 ? p->groups : 1), p->kh, p->kw, p->w_dtype == TSR_DT_UINT8 ? "u8" : "i8",
             p->w_zp[0], p->w_zp_count > 1 ? "per channel" : "per tensor", p->stride_h, p->stride_w, p->pad_top,
             p->pad_left, p->pad_bottom, p->pad_right, p->groups, p->y_dtype == TSR_DT_UINT8 ? "u8" : "i8", p->y_zp,
             p->act_min, p->act_max, p->rq_count > 1 ? "per channel" : "per tensor", p->mult[0], p->shift[0],
             k->use_bias);
}

/* The grouped conv from its definition (the plain-C reference has groups 1
 * and depthwise only): output channel o of group o / (C_out/G) sums
 * (x - x_zp)(w - w_zp[o]) over its group's C_in/G input channels and the
 * taps (padding is x_zp: contributes 0), plus bias; the reference's
 * requantization then gives y. */
static int grouped_ref(const tsr_conv2d_params_t *p, const uint8_t *x, const uint8_t *w, const int32_t *bias, int oh,
                       int ow, const opref_requant_t *rq, opref_tensor_t *y)
{
    const int cg = p->c_in / p->groups, mg = p->c_out / p->groups;
    int32_t *acc = malloc(sizeof(int32_t) * (size_t)p->n * p->c_out * oh * ow);
    assert_non_null(acc);
    for (int n = 0; n < p->n; n++)
        for (int o = 0; o < p->c_out; o++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    int64_t a = bias ? bias[o] : 0;
                    const int32_t wz = p->w_zp[p->w_zp_count > 1 ? o : 0];
                    for (int j = 0; j < cg; j++) {
                        const int ci = (o / mg) * cg + j;
                        for (int ky = 0; ky < p->kh; ky++)
                            for (int kx = 0; kx < p->kw; kx++) {
                                const int iy = oy * p->stride_h - p->pad_top + ky,
                                          ix = ox * p->stride_w - p->pad_left + kx;
                                if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w)
                                    continue;
                                const uint8_t xb = x[(((size_t)n * p->c_in + ci) * p->h + iy) * p->w + ix];
                                const uint8_t wb = w[(((size_t)o * cg + j) * p->kh + ky) * p->kw + kx];
                                const int32_t xv = p->x_dtype == TSR_DT_UINT8 ? xb : (int8_t)xb;
                                const int32_t wv = p->w_dtype == TSR_DT_UINT8 ? wb : (int8_t)wb;
                                a += (int64_t)(xv - p->x_zp) * (wv - wz);
                            }
                    }
                    acc[(((size_t)n * p->c_out + o) * oh + oy) * ow + ox] = (int32_t)a;
                }
    opref_acc_t A = {p->n, p->c_out, oh, ow, acc};
    int rc = opref_requantize(&A, rq, y);
    free(acc);
    return rc;
}

/* Run one case on dev and compare with the reference; returns the plan's
 * chunk count (for tests that want a split reduction). */
static int run_case(tsr_device_t *dev, const char *cfgname, conv_case_t *k, uint64_t seed, int verbose)
{
    tsr_conv2d_params_t *p = &k->p;
    p->w_zp = k->w_zp;
    p->mult = k->mult;
    p->shift = k->shift;
    int oh = 0, ow = 0;
    char desc[512];
    describe(k, cfgname, seed, desc, sizeof desc);
    if (tsr_conv2d_check(p, &oh, &ow))
        fail_msg("%s: check: %s", desc, tsr_errmsg());
    int cin_g = p->c_in / p->groups;
    size_t nx = (size_t)p->n * p->c_in * p->h * p->w, nw = (size_t)p->c_out * cin_g * p->kh * p->kw;
    size_t ny = (size_t)p->n * p->c_out * oh * ow;
    uint8_t *x = malloc(nx), *w = malloc(nw), *y = malloc(ny), *yr = malloc(ny);
    int32_t *bias = malloc(sizeof(int32_t) * (size_t)p->c_out);
    assert_non_null(x);
    assert_non_null(w);
    assert_non_null(y);
    assert_non_null(yr);
    assert_non_null(bias);
    uint64_t s = seed ^ 0x5555;
    for (size_t i = 0; i < nx; i++)
        x[i] = (uint8_t)rnd(&s, dmin(p->x_dtype), dmax(p->x_dtype));
    for (size_t i = 0; i < nw; i++) {
        int co = (int)(i / ((size_t)cin_g * p->kh * p->kw));
        int32_t zp = k->w_zp[p->w_zp_count == 1 ? 0 : co];
        /* any weight is taken (w - w_zp beyond int8 is split into parts):
         * full_w cases draw from the whole dtype range; others keep w - w_zp
         * within int8 */
        int full = k->full_w;
        int lo = !full && zp - 128 > dmin(p->w_dtype) ? zp - 128 : dmin(p->w_dtype);
        int hi = !full && zp + 127 < dmax(p->w_dtype) ? zp + 127 : dmax(p->w_dtype);
        w[i] = (uint8_t)rnd(&s, lo, hi);
    }
    for (int i = 0; i < p->c_out; i++)
        bias[i] = rnd(&s, -20000, 20000);

    if (g_periodic_w) {
        /* channel co's weights (and zero point) are channel co % BLOCK_OUT's */
        const int bo = (int)tsr_device_config(dev)->block_out;
        const size_t per = (size_t)cin_g * p->kh * p->kw;
        for (int co = bo; co < p->c_out; co++) {
            memcpy(w + (size_t)co * per, w + (size_t)(co % bo) * per, per);
            if (p->w_zp_count > 1)
                k->w_zp[co] = k->w_zp[co % bo];
        }
        p->w_plan = w;
    }
    const int32_t *b = k->use_bias ? bias : NULL;
    int chunks = 0;
    if (g_one_call) {
        if (tsr_conv2d_run(dev, p, x, w, b, y))
            fail_msg("%s: tsr_conv2d_run: %s", desc, tsr_errmsg());
        goto compare;
    }
    tsr_conv2d_plan_t pl;
    if (tsr_conv2d_plan(dev, p, &pl))
        fail_msg("%s: plan: %s", desc, tsr_errmsg());
    chunks = pl.chunks;
    p->w_plan = NULL; /* (w is freed below) */
    if (g_periodic_w) {
        /* the mode's layout with more than one block: one shared copy
         * (not when the last block is partial: its padding lanes hold zero
         * weights where the first block's hold real ones) */
        const int bo = (int)tsr_device_config(dev)->block_out;
        if (pl.wshare != (pl.dwk > 0 && pl.cob > 1 && p->c_out % bo == 0))
            fail_msg("%s: wshare %d (dwk %d, %d blocks)", desc, pl.wshare, pl.dwk, pl.cob);
        g_shared += pl.wshare;
        g_shared_split += pl.wshare && pl.wsplit > 1; /* (parts: chunks of parts, loaded per step) */
    } else
        assert_int_equal(pl.wshare, 0);
    g_split += pl.chunks > 1;
    g_coltile += pl.tow < pl.ow;
    g_single += pl.nbuf_inp == 1 || pl.nbuf_acc == 1;
    g_res += pl.resident;
    g_dwsplit += pl.depthwise && pl.wsplit > 1;
    g_dwmode += pl.dwk > 0;
    if (p->groups > 1) {
        /* grouped: one input block per output block and tap (and weight
         * part); in the depthwise mode (every depthwise conv on a config
         * with DEPTHWISE = K) one op per kernel row and group of K taps */
        assert_int_equal(pl.depthwise, 1);
        const int dwk = tsr_device_config(dev)->depthwise;
        assert_int_equal(pl.dwk, p->groups == p->c_in && !g_dw_fallback ? dwk : 0);
        const int taps = pl.dwk ? p->kh * ((p->kw + pl.dwk - 1) / pl.dwk) : p->kh * p->kw;
        const uint64_t want = (uint64_t)pl.nb * (uint64_t)pl.oh * (uint64_t)pl.ow * (uint64_t)pl.cob *
                              (uint64_t)taps * (uint64_t)pl.wsplit;
        if (pl.tow == pl.ow && pl.gemm_ops != want)
            fail_msg("%s: %llu gemm ops, the grouped conv has %llu", desc, (unsigned long long)pl.gemm_ops,
                     (unsigned long long)want);
    }
    if (verbose)
        printf("  %s\n    tile toh %d tco %d tci %d co_inner %d, %d tiles x %d chunks, %zu insns, %llu gemm ops\n",
               desc, pl.toh, pl.tco, pl.tci, pl.co_inner, pl.tiles, pl.chunks, pl.ninsns,
               (unsigned long long)pl.gemm_ops);
    int rc = tsr_conv2d_write_weights(dev, &pl, w, b);
    if (!rc)
        rc = tsr_conv2d_write_input(dev, &pl, x);
    if (!rc)
        rc = tsr_conv2d_exec(dev, &pl);
    if (!rc)
        rc = tsr_conv2d_read_output(dev, &pl, y);
    if (rc)
        fail_msg("%s: run: %s", desc, tsr_errmsg());
    tsr_conv2d_plan_free(dev, &pl);

compare:;
    opref_tensor_t tx = {(opref_dtype_t)(p->x_dtype == TSR_DT_UINT8), p->n, p->c_in, p->h, p->w, x, p->x_zp};
    opref_weights_t tw = {(opref_dtype_t)(p->w_dtype == TSR_DT_UINT8), p->c_out, cin_g, p->kh, p->kw, w, k->w_zp,
                          p->w_zp_count};
    opref_tensor_t ty = {(opref_dtype_t)(p->y_dtype == TSR_DT_UINT8), p->n, p->c_out, oh, ow, yr, p->y_zp};
    opref_conv_params_t cp = {p->stride_h, p->stride_w, p->pad_top, p->pad_left, p->pad_bottom, p->pad_right,
                              p->groups};
    opref_requant_t rq = {p->rq_count, k->mult, k->shift, p->act_min, p->act_max, p->fscale};
    if (p->groups > 1 && p->groups != p->c_in) {
        if (grouped_ref(p, x, w, b, oh, ow, &rq, &ty))
            fail_msg("%s: grouped reference: %s", desc, tsr_errmsg());
    } else if (opref_conv2d(&tx, &tw, b, &cp, &rq, &ty))
        fail_msg("%s: reference: %s", desc, tsr_errmsg());
    for (size_t i = 0; i < ny; i++) {
        int32_t v = p->y_dtype == TSR_DT_UINT8 ? yr[i] : (int8_t)yr[i];
        g_inside += v > p->act_min && v < p->act_max;
        g_total++;
    }
    for (size_t i = 0; i < ny; i++)
        if (y[i] != yr[i]) {
            size_t ox = i % (size_t)ow, oy = i / ow % (size_t)oh, co = i / ((size_t)ow * oh) % (size_t)p->c_out;
            size_t n = i / ((size_t)ow * oh * p->c_out);
            fail_msg("%s\n  output [%zu][%zu][%zu][%zu] (flat %zu of %zu): got %d, want %d", desc, n, co, oy, ox, i,
                     ny, p->y_dtype == TSR_DT_UINT8 ? y[i] : (int8_t)y[i],
                     p->y_dtype == TSR_DT_UINT8 ? yr[i] : (int8_t)yr[i]);
        }
    p->w_plan = NULL;
    free(x);
    free(w);
    free(y);
    free(yr);
    free(bias);
    return chunks;
}

/* A random case; maxc / maxhw bound its size. */
static void random_case(uint64_t *s, conv_case_t *k, int maxn, int maxc, int maxhw, int allow_dw)
{
    memset(k, 0, sizeof *k);
    tsr_conv2d_params_t *p = &k->p;
    static const int ks[4] = {1, 3, 5, 7};
    p->n = rnd(s, 1, maxn);
    p->kh = ks[rnd(s, 0, 3)];
    p->kw = rnd(s, 0, 3) ? p->kh : ks[rnd(s, 0, 3)];
    p->stride_h = rnd(s, 1, 2);
    p->stride_w = rnd(s, 0, 3) ? p->stride_h : 3 - p->stride_h;
    int sym = rnd(s, 0, 1);
    p->pad_top = rnd(s, 0, p->kh);
    p->pad_left = sym ? (p->kw / 2) : rnd(s, 0, p->kw);
    p->pad_bottom = sym ? p->pad_top : rnd(s, 0, p->kh);
    p->pad_right = sym ? p->pad_left : rnd(s, 0, p->kw);
    if (sym)
        p->pad_top = p->pad_bottom = p->kh / 2;
    p->h = rnd(s, 1, maxhw);
    p->w = rnd(s, 1, maxhw);
    if (p->h + p->pad_top + p->pad_bottom < p->kh)
        p->pad_bottom += p->kh - (p->h + p->pad_top + p->pad_bottom);
    if (p->w + p->pad_left + p->pad_right < p->kw)
        p->pad_right += p->kw - (p->w + p->pad_left + p->pad_right);
    p->c_in = rnd(s, 1, maxc);
    p->groups = 1;
    p->c_out = rnd(s, 1, maxc);
    if (allow_dw && p->c_in >= 2 && rnd(s, 0, 3) == 0) {
        p->groups = p->c_in;
        p->c_out = p->c_in;
    }
    if (g_force_dw) {
        p->c_out = p->c_in;
        p->groups = p->c_in;
    }
    if (g_force_groups > 0) {
        p->c_in = p->c_out = g_force_c;
        p->groups = g_force_groups;
    }
    p->x_dtype = rnd(s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p->w_dtype = rnd(s, 0, 2) == 0 ? TSR_DT_UINT8 : TSR_DT_INT8;
    p->y_dtype = rnd(s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    int e = rnd(s, 0, 5);
    p->x_zp = e == 0 ? dmin(p->x_dtype) : e == 1 ? dmax(p->x_dtype) : rnd(s, dmin(p->x_dtype), dmax(p->x_dtype));
    p->y_zp = rnd(s, dmin(p->y_dtype), dmax(p->y_dtype));
    p->w_zp_count = rnd(s, 0, 1) ? p->c_out : 1;
    for (int i = 0; i < p->w_zp_count; i++)
        k->w_zp[i] = p->w_dtype == TSR_DT_INT8 ? (rnd(s, 0, 3) ? 0 : rnd(s, -10, 10))
                                               : (rnd(s, 0, 5) == 0 ? rnd(s, 0, 255) : 128 + rnd(s, -5, 5));
    /* a third of the cases (depthwise too) take weights over the whole
     * dtype range (w - w_zp up to +-255: the split path); a zero point off
     * the centre then biases every term, so accumulators grow with K, not
     * sqrt(K) */
    k->full_w = rnd(s, 0, 2) == 0;
    p->rq_count = rnd(s, 0, 1) ? p->c_out : 1;
    /* shift so that accumulators of ~K * 2^13 map to a few hundred. */
    int kterms = p->c_in / p->groups * p->kh * p->kw;
    int lg = 0;
    while ((1 << lg) < kterms)
        lg++;
    for (int i = 0; i < p->rq_count; i++) {
        int r = rnd(s, 0, 9);
        k->mult[i] = r == 0 ? 0 : (int32_t)((1u << 30) + (uint32_t)rnd(s, 0, (1 << 30) - 1));
        k->shift[i] = r == 1 ? rnd(s, 1, 3) : -((k->full_w ? lg : lg / 2) + 7) + rnd(s, -2, 2);
        /* the same real multiplier as a float32 (a random significand: ties are frequent only when it is
           short, so a quarter of the scales keep 8 significant bits) */
        double real = k->mult[i] ? ldexp((double)k->mult[i], k->shift[i] - 31) : 0x1p-20;
        k->fscale[i] = (float)real;
        if (rnd(s, 0, 3) == 0)
            k->fscale[i] = ldexpf(roundf(ldexpf(k->fscale[i], 8 - ilogbf(k->fscale[i]))), ilogbf(k->fscale[i]) - 8);
    }
    p->fscale = g_exact ? k->fscale : NULL;
    int full = rnd(s, 0, 2);
    p->act_min = full ? dmin(p->y_dtype) : rnd(s, dmin(p->y_dtype), p->y_zp);
    p->act_max = full ? dmax(p->y_dtype) : rnd(s, p->act_min, dmax(p->y_dtype));
    k->use_bias = rnd(s, 0, 4) != 0;
}

static void random_cases(const char *cfg, int count, int maxn, int maxc, int maxhw, int allow_dw, uint64_t salt)
{
    tsr_device_t *dev = open_dev(cfg);
    uint64_t seed0 = base_seed() ^ salt;
    count = scaled(count);
    g_inside = g_total = 0;
    g_split = g_coltile = g_single = g_res = g_dwsplit = 0;
    for (int i = 0; i < count; i++) {
        uint64_t seed = seed0 + (uint64_t)i;
        uint64_t s = seed;
        conv_case_t k;
        random_case(&s, &k, maxn, maxc, maxhw, allow_dw);
        run_case(dev, cfg, &k, seed, 0);
    }
    printf("  %s: %d cases (%d split reductions, %d column-tiled, %d single-buffered, %d resident, %d depthwise "
           "with split weights), %llu outputs, %.0f%% strictly inside the clamp range\n",
           cfg, count, g_split, g_coltile, g_single, g_res, g_dwsplit, (unsigned long long)g_total,
           100.0 * (double)g_inside / (double)(g_total ? g_total : 1));
    if (count >= 16) /* too few cases (scaled-down runs) say little */
        assert_true(g_inside * 5 > g_total * 2);
    if (count >= 100 && allow_dw && !g_one_call) /* the depthwise split path is exercised */
        assert_true(g_dwsplit > 0);
    tsr_device_close(dev);
}

static conv_case_t basic_case(int n, int cin, int h, int w, int cout, int kh, int kw, int s, int pad);
static void expect_err(tsr_device_t *dev, conv_case_t *k, const char *word);

/* Grouped convs (RegNet's group widths) on the grouped path: G in
 * {2, 4, 8, 16} with C/G dividing the block (tiny: 4, default: 16; a
 * partial last block too), random kernels, strides, dtypes, zero points
 * (split weights included), against the grouped reference. */
static void grouped_cases(const char *cfg, const int (*gc)[2], int npairs, int per, uint64_t salt)
{
    tsr_device_t *dev = open_dev(cfg);
    const int count = strcmp(backend(), "fsim") ? 1 : per; /* rtl: one case per config */
    for (int i = 0; i < npairs && (count == per || i == 0); i++)
        for (int j = 0; j < count; j++) {
            uint64_t seed = base_seed() ^ salt ^ (uint64_t)(i * 100 + j);
            uint64_t s = seed;
            conv_case_t k;
            g_force_groups = gc[i][0];
            g_force_c = gc[i][1];
            random_case(&s, &k, 2, 1, 9, 0);
            g_force_groups = g_force_c = 0;
            run_case(dev, cfg, &k, seed, j == 0);
        }
    tsr_device_close(dev);
}

static void test_grouped(void **state)
{
    (void)state;
    static const int tiny[][2] = {{2, 8}, {4, 8}, {8, 16}, {16, 32}, {2, 4}, {4, 16}, {16, 16}};
    static const int dflt[][2] = {{2, 32}, {4, 32}, {8, 32}, {16, 64}, {2, 8}, {4, 8}, {16, 256}, {8, 128}};
    grouped_cases("tiny", tiny, (int)(sizeof tiny / sizeof tiny[0]), 6, 0x6770);
    grouped_cases("default", dflt, (int)(sizeof dflt / sizeof dflt[0]), 4, 0x6771);
    /* a group spanning two blocks (12 channels on tiny's 4) is not
     * planned grouped: refused here, run expanded by the graph */
    tsr_device_t *dev = open_dev("tiny");
    conv_case_t k = basic_case(1, 24, 5, 5, 24, 3, 3, 1, 1);
    k.p.groups = 2;
    assert_int_equal(tsr_conv2d_check(&k.p, NULL, NULL), TSR_OK);
    assert_int_equal(tsr_conv2d_groups_fit(tsr_device_config(dev), &k.p), 0);
    expect_err(dev, &k, "do not divide BLOCK_IN");
    k.p.groups = 6; /* 4 channels per group: fits */
    assert_int_equal(tsr_conv2d_groups_fit(tsr_device_config(dev), &k.p), 1);
    tsr_device_close(dev);
}

/* Depthwise convs in the GEMM depthwise mode (config key DEPTHWISE = K):
 * random depthwise cases (kernels 1/3/5/7 square and mixed, so 5x5 and 7x7
 * take 2-3 tap groups with zero-weight padding taps; strides 1 and 2;
 * padding; channel counts off the block; u8/s8, zero points, split
 * weights) on default + K 3, tiny + K 3 and K 2 (tiny has no DSP_PACK) and
 * a batch-2 config + K 3, each run on the mode's device and on the same
 * preset without the key: both byte-identical to the reference (so to each
 * other), the mode's plans use it (run_case: plan.dwk = K and K taps per
 * GEMM op; the fsim counters say the same) and the driver verifies every
 * stream. Then MobileNetV2-like layers (3x3, stride 1 and 2, 96-144
 * channels) on default + K 3, and the mode's op count against the
 * block-diagonal path's. */
static void dw_cases(const char *cfg, const char *plain, int count, int maxn, int maxc, int maxhw, uint64_t salt)
{
    tsr_device_t *dev = open_dev(cfg), *dev0 = open_dev(plain);
    count = scaled(count);
    g_dwmode = 0;
    g_force_dw = 1;
    for (int i = 0; i < count; i++) {
        uint64_t seed = base_seed() ^ salt ^ (uint64_t)i, s = seed;
        conv_case_t k;
        random_case(&s, &k, maxn, maxc, maxhw, 0);
        if (k.p.c_in == 1) /* (groups == C_in == 1 is a groups-1 conv) */
            continue;
        if (g_periodic_w) {
            /* whole blocks (a partial last block does not share): round the
             * channels up, the new ones' per-channel values repeating */
            const int bo = (int)tsr_device_config(dev)->block_out, c0 = k.p.c_in;
            const int c1 = (c0 + bo - 1) / bo * bo;
            for (int co = c0; co < c1 && c1 <= 256; co++) {
                k.w_zp[co] = k.w_zp[co % c0];
                k.mult[co] = k.mult[co % c0];
                k.shift[co] = k.shift[co % c0];
                k.fscale[co] = k.fscale[co % c0];
            }
            if (c1 <= 256) {
                k.p.c_in = k.p.c_out = k.p.groups = c1;
                k.p.w_zp_count = k.p.w_zp_count > 1 ? c1 : 1;
                k.p.rq_count = k.p.rq_count > 1 ? c1 : 1;
            }
        }
        run_case(dev, cfg, &k, seed, i < 2);
        run_case(dev0, plain, &k, seed, 0);
    }
    g_force_dw = 0;
    printf("  %s: %d depthwise cases, %d in the depthwise mode\n", cfg, count, g_dwmode);
    assert_true(g_dwmode > count / 2);
    tsr_device_close(dev);
    tsr_device_close(dev0);
}

/* The cost model's depthwise GEMMs: with the uops, a run of windows that
 * each follow the previous one costs 1 cycle per op after the first (K);
 * without them (tsr_cost_stream) every op counts K. 64 ops, K = 3. */
static void dw_cost_model(void)
{
    tsr_config_t cfg;
    tsr_test_preset_with("default", "DEPTHWISE", 3, &cfg);
    tsr_uop_t u[64];
    for (int i = 0; i < 64; i++)
        u[i] = (tsr_uop_t){(uint32_t)i, (uint32_t)i, 0};
    tsr_insn_t in[2];
    memset(in, 0, sizeof in);
    in[0].opcode = TSR_OP_GEMM;
    in[0].depthwise = 1;
    in[0].uop_end = 64;
    in[0].iter_out = in[0].iter_in = 1;
    in[1].opcode = TSR_OP_FINISH;
    const double with = tsr_cost_stream_uops(&cfg, in, 2, NULL, u, 64, INFINITY);
    const double without = tsr_cost_stream(&cfg, in, 2, NULL, INFINITY);
    printf("    cost model, 64 sliding depthwise ops: %.0f cycles with the uops, %.0f without\n", with, without);
    assert_true(without - with > 2 * 64 - 3);
    /* windows two apart (stride 2): after the first, each op reads its 2
     * new rows (2 cycles, not K = 3), one cycle less per op */
    for (int i = 0; i < 64; i++)
        u[i].src = (uint32_t)(2 * i);
    assert_true(without - tsr_cost_stream_uops(&cfg, in, 2, NULL, u, 64, INFINITY) == 64 - 1);
    /* uops that do not cover the range: taken as fresh */
    assert_true(tsr_cost_stream_uops(&cfg, in, 2, NULL, u, 10, INFINITY) == without);
}

/* The MobileNetV2 depthwise bench (tessera bench --kind mbv2-dw) on one
 * layer: both paths planned as they should be, outputs equal to fsim's, the
 * compulsory bytes of a 7x7x960 3x3 depthwise conv. */
static void dw_bench_layer(void)
{
    tsr_dwbench_opts_t o = {.cfgname = "default", .backend = backend(), .seed = 3, .taps = 3, .check = 1};
    tsr_dwbench_t b;
    tsr_dwbench_row_t r;
    assert_int_equal(tsr_dwbench_open(&o, &b), TSR_OK);
    assert_int_equal(tsr_dwbench_layer(&b, tsr_mbv2_dw_layer_find("D15"), &r), TSR_OK);
    tsr_dwbench_close(&b);
    assert_int_equal(r.dwk[0], 0);
    assert_int_equal(r.dwk[1], 3);
    assert_true(r.gemm_ops[0] == 3 * r.gemm_ops[1]);
    assert_true(r.checked && !r.differs);
    assert_true(r.compulsory == 2.0 * 960 * 49 + 960 * 9 + 4 * 960);
    o.taps = 9; /* refused: DEPTHWISE is 1..8 */
    assert_int_not_equal(tsr_dwbench_open(&o, &b), TSR_OK);
}

static void test_depthwise_mode(void **state)
{
    (void)state;
    dw_cost_model();
    dw_bench_layer();
    dw_cases("default+dw3", "default+dw0", 60, 2, 40, 14, 0xd301);
    dw_cases("tiny+dw3", "tiny", 120, 1, 11, 9, 0xd302);
    dw_cases("tiny+dw2", "tiny", 80, 1, 11, 9, 0xd303);
    dw_cases("b2+dw3", "b2", 80, 3, 10, 9, 0xd304);
    /* MobileNetV2's shapes (reduced in size for fsim), u8 in/out, and the
     * mode's work: 3 GEMM ops of K = 3 taps per pixel and block where the
     * block-diagonal path has 9 of one tap each */
    tsr_device_t *dev = open_dev("default+dw3"), *dev0 = open_dev("default+dw0");
    static const int L[][4] = {{96, 28, 2, 1}, {144, 21, 1, 1}, {40, 9, 1, 1}, {24, 30, 2, 1}};
    for (int i = 0; i < 4; i++) {
        conv_case_t k = basic_case(1, L[i][0], L[i][1], L[i][1], L[i][0], 3, 3, L[i][2], L[i][3]);
        k.p.groups = L[i][0];
        k.p.x_dtype = k.p.y_dtype = k.p.w_dtype = TSR_DT_UINT8;
        k.p.x_zp = 3 + i;
        k.p.y_zp = 0;
        k.w_zp[0] = 128;
        k.p.act_min = 0;
        k.p.act_max = 255;
        k.shift[0] = -7;
        run_case(dev, "default+dw3", &k, 100 + (uint64_t)i, 1);
        run_case(dev0, "default+dw0", &k, 100 + (uint64_t)i, 0);
        tsr_conv2d_plan_t a, b;
        k.p.w_zp = k.w_zp;
        k.p.mult = k.mult;
        k.p.shift = k.shift;
        assert_int_equal(tsr_conv2d_plan(dev, &k.p, &a), TSR_OK);
        assert_int_equal(tsr_conv2d_plan(dev0, &k.p, &b), TSR_OK);
        printf("    depthwise mode: %llu gemm ops, est. %.0f cycles; block-diagonal: %llu, est. %.0f\n",
               (unsigned long long)a.gemm_ops, a.cost, (unsigned long long)b.gemm_ops, b.cost);
        assert_int_equal(a.dwk, 3);
        assert_int_equal(b.dwk, 0);
        assert_true(a.gemm_ops * 3 == b.gemm_ops);
        tsr_conv2d_plan_free(dev, &a);
        tsr_conv2d_plan_free(dev0, &b);
    }
    tsr_device_close(dev);
    tsr_device_close(dev0);
    /* no tiling of the mode fits (2 input rows, an op reads 3): the
     * block-diagonal path instead, the same bytes (and a second plan of the
     * same conv takes that kernel from the cache) */
    dev = open_dev("tiny+dw3+inp2");
    conv_case_t k = basic_case(1, 6, 3, 4, 6, 1, 1, 1, 0);
    k.p.groups = 6;
    g_dw_fallback = 1;
    run_case(dev, "tiny+dw3+inp2", &k, 7, 1);
    run_case(dev, "tiny+dw3+inp2", &k, 8, 0);
    g_dw_fallback = 0;
    tsr_device_close(dev);
}

/* The one-call API, and a device reused across many plans (buffers freed). */
static void test_one_call(void **state)
{
    (void)state;
    g_one_call = 1;
    random_cases("default", 30, 2, 24, 10, 1, 77);
    g_one_call = 0;
    tsr_device_t *dev = open_dev("tiny");
    tsr_conv2d_params_t bad = {0};
    assert_int_equal(tsr_conv2d_run(dev, &bad, "", "", NULL, (void *)""), TSR_EINVAL);
    assert_int_equal(tsr_conv2d_run(dev, NULL, "", "", NULL, (void *)""), TSR_EINVAL);
    tsr_device_close(dev);
}

/* Exact requantization (EXACT_REQUANT): the conv's ALU sequence takes
 * fscale by the float32 scale's bits and rqfin by shift 0; against the
 * reference's float32 form (ONNX Runtime's). Depthwise, split weights,
 * per-channel and per-tensor scales, u8/s8 as the random cases draw them. */
static void test_exact(void **state)
{
    (void)state;
    g_exact = 1;
    random_cases("default+exact", 120, 2, 40, 14, 1, 3);
    random_cases("tiny+exact", 200, 1, 11, 9, 1, 4);
    g_exact = 0;
    /* a config without the key refuses float scales, naming it */
    tsr_device_t *dev = open_dev("default");
    conv_case_t k = basic_case(1, 16, 5, 5, 16, 3, 3, 1, 1);
    k.p.fscale = k.fscale;
    k.fscale[0] = 0.01f;
    expect_err(dev, &k, "EXACT_REQUANT");
    tsr_device_close(dev);
}

static void test_random_tiny(void **state)
{
    (void)state;
    random_cases("tiny", 400, 1, 11, 9, 1, 1);
}
static void test_random_default(void **state)
{
    (void)state;
    random_cases("default", 120, 2, 40, 14, 1, 2);
}
/* Wider channel counts on default: output-channel tiles and split
 * reductions on the preset the benchmarks use. */
static void test_random_default_wide(void **state)
{
    (void)state;
    random_cases("default", 16, 1, 200, 12, 1, 6);
}
static void test_random_large(void **state)
{
    (void)state;
    random_cases("large", 40, 1, 70, 12, 1, 3);
}
static void test_random_batch2(void **state)
{
    (void)state;
    random_cases("b2", 200, 3, 10, 9, 1, 4);
}
static void test_random_rect(void **state)
{
    (void)state;
    random_cases("rect", 150, 1, 20, 9, 0, 5); /* BLOCK_IN 8 != BLOCK_OUT 4: no depthwise */
}

/* A simple int8 case. The returned copy's parameter pointers must be reset
 * to its own arrays before use (run_case and expect_err do). */
static conv_case_t basic_case(int n, int cin, int h, int w, int cout, int kh, int kw, int s, int pad)
{
    conv_case_t k;
    memset(&k, 0, sizeof k);
    tsr_conv2d_params_t *p = &k.p;
    p->n = n;
    p->c_in = cin;
    p->h = h;
    p->w = w;
    p->c_out = cout;
    p->kh = kh;
    p->kw = kw;
    p->stride_h = p->stride_w = s;
    p->pad_top = p->pad_left = p->pad_bottom = p->pad_right = pad;
    p->groups = 1;
    p->x_dtype = p->w_dtype = p->y_dtype = TSR_DT_INT8;
    p->w_zp_count = 1;
    p->rq_count = 1;
    k.mult[0] = 1518500250; /* ~0.707 */
    k.shift[0] = -9;
    p->act_min = -128;
    p->act_max = 127;
    p->w_zp = k.w_zp;
    p->mult = k.mult;
    p->shift = k.shift;
    k.use_bias = 1;
    return k;
}

/* A conv with a fused add whose integers are ONNX Runtime's (left shift 22,
 * multipliers MA * 512 and MB * 512, shifts 0: onnx/ops/tsr_ox_eltwise.c)
 * and whose input a (the conv's output) and b have zero points: the
 * epilogue's shortcuts (tsr_conv2d_geo.h: the conv's rqfin takes a's zero
 * point, a mul replaces each shl + mulhr) keep every byte of the reference
 * (the conv, then the add on its output), and the add takes 6 ALU ops per
 * accumulator row beyond the plain conv's instead of 9 (rows of a 1x1 conv:
 * NB * CB_out * OH * OW). Fails before the shortcuts on the op count.
 * once: the add rounds once (round_once, ONNX Runtime's form): no output
 * mulhr, 5 ops per row, and the reference's one rounding. once 2: that
 * with a bias_once (the importer's exact form) and b's zero point, both
 * folded into one constant C (tsr_conv2d_fuse_fold_c): still 5 ops per row
 * (6 before the fold), every byte as the add computed here in plain C. */
static void fused_add_case(int once, int cin, int h, int wd, int cout, int overlap)
{
    const int32_t bias_once = once == 2 ? -45 : 0;
    tsr_device_t *dev = open_dev("default");
    const tsr_config_t *cfg = tsr_device_config(dev);
    conv_case_t k = basic_case(1, cin, h, wd, cout, 1, 1, 1, 0);
    tsr_conv2d_params_t *p = &k.p;
    p->w_zp = k.w_zp; /* (into this copy) */
    p->mult = k.mult;
    p->shift = k.shift;
    p->x_zp = 3;
    p->y_zp = 9;
    const int oh = h, ow = wd;
    const size_t nx = (size_t)p->c_in * h * wd, nw = (size_t)p->c_out * p->c_in, ny = (size_t)p->c_out * h * wd;
    uint8_t *x = malloc(nx), *w = malloc(nw), *r = malloc(ny), *yc = malloc(ny), *yr = malloc(ny), *y = malloc(ny);
    int32_t *bias = malloc(sizeof *bias * (size_t)cout);
    assert_true(x && w && r && yc && yr && y && bias);
    uint64_t s = base_seed() ^ 0xadd5;
    for (size_t i = 0; i < nx; i++)
        x[i] = (uint8_t)rnd(&s, -128, 127);
    for (size_t i = 0; i < nw; i++)
        w[i] = (uint8_t)rnd(&s, -128, 127);
    for (size_t i = 0; i < ny; i++)
        r[i] = (uint8_t)rnd(&s, -128, 127);
    for (int i = 0; i < p->c_out; i++)
        bias[i] = rnd(&s, -20000, 20000);
    /* the reference: conv, then the add on its int8 output */
    opref_tensor_t tx = {OPREF_INT8, 1, p->c_in, p->h, p->w, x, p->x_zp};
    opref_weights_t tw = {OPREF_INT8, p->c_out, p->c_in, 1, 1, w, k.w_zp, 1};
    opref_tensor_t tc = {OPREF_INT8, 1, p->c_out, oh, ow, yc, p->y_zp};
    opref_conv_params_t cp = {1, 1, 0, 0, 0, 0, 1};
    opref_requant_t rq = {1, k.mult, k.shift, p->act_min, p->act_max, NULL};
    assert_int_equal(opref_conv2d(&tx, &tw, bias, &cp, &rq, &tc), TSR_OK);
    const int sh = 20; /* MA, MB in [2^21, 2^22): tsr_ox_eltwise.c's mlas form */
    const int32_t ma = 0x2a3b4c, mb = 0x3c1d2e;
    tsr_add_params_t ap = {.a = {1, p->c_out, oh, ow, TSR_DT_INT8, p->y_zp},
                           .b = {1, p->c_out, oh, ow, TSR_DT_INT8, -7},
                           .y = {1, p->c_out, oh, ow, TSR_DT_INT8, 4},
                           .left_shift = 22, .mult_a = ma * 512, .mult_b = mb * 512, .shift_a = 0, .shift_b = 0,
                           .mult_out = 1 << 30, .shift_out = -(sh - 1), .act_min = -128, .act_max = 127,
                           .round_once = once > 0, .bias_once = bias_once};
    opref_add_params_t op = {ap.left_shift, ap.mult_a, ap.mult_b, ap.shift_a, ap.shift_b, ap.mult_out,
                             ap.shift_out, ap.act_min, ap.act_max, ap.round_once};
    opref_tensor_t ob = {OPREF_INT8, 1, p->c_out, oh, ow, r, ap.b.zp}, oy = {OPREF_INT8, 1, p->c_out, oh, ow, yr, ap.y.zp};
    assert_int_equal(opref_add(&tc, &ob, &op, &oy), TSR_OK);
    if (bias_once) /* (operators.md "add": y = clamp(RDBPOT(raw + bias_once, sh) + y_zp), raw exact) */
        for (size_t i = 0; i < ny; i++) {
            const int64_t raw = (int64_t)((int8_t)yc[i] - ap.a.zp) * ma + (int64_t)((int8_t)r[i] - ap.b.zp) * mb +
                                bias_once;
            const int64_t mask = ((int64_t)1 << sh) - 1, th = (mask >> 1) + (raw < 0);
            const int64_t v = (raw >> sh) + ((raw & mask) > th) + ap.y.zp;
            yr[i] = (uint8_t)(int8_t)(v < ap.act_min ? ap.act_min : v > ap.act_max ? ap.act_max : v);
        }
    /* the fused plan on the device */
    tsr_dtensor_t dx, dr, dy;
    assert_int_equal(tsr_dtensor_init(cfg, 1, p->c_in, p->h, p->w, TSR_DT_INT8, p->x_zp, &dx), TSR_OK);
    assert_int_equal(tsr_dtensor_init(cfg, 1, p->c_out, oh, ow, TSR_DT_INT8, ap.b.zp, &dr), TSR_OK);
    assert_int_equal(tsr_dtensor_init(cfg, 1, p->c_out, oh, ow, TSR_DT_INT8, ap.y.zp, &dy), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &dx), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &dr), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &dy), TSR_OK);
    tsr_conv2d_plan_t pl;
    if (tsr_conv2d_plan_tensors_add(dev, p, &ap, &dx, &dr, &dy, &pl))
        fail_msg("fused plan: %s", tsr_errmsg());
    int rc = tsr_conv2d_write_weights(dev, &pl, w, bias);
    if (!rc)
        rc = tsr_dtensor_write_nchw(dev, &dx, x);
    if (!rc)
        rc = tsr_dtensor_write_nchw(dev, &dr, r);
    if (!rc)
        rc = tsr_conv2d_exec(dev, &pl);
    if (!rc)
        rc = tsr_dtensor_read_nchw(dev, &dy, y);
    if (rc)
        fail_msg("fused run: %s", tsr_errmsg());
    for (size_t i = 0; i < ny; i++)
        if (y[i] != yr[i])
            fail_msg("fused add shortcuts: output %zu of %zu: got %d, want %d", i, ny, (int8_t)y[i], (int8_t)yr[i]);
    /* the add's share: the fused plan's ALU ops less the plain conv's */
    tsr_conv2d_plan_t pc;
    tsr_dtensor_t dc;
    assert_int_equal(tsr_dtensor_init(cfg, 1, p->c_out, oh, ow, TSR_DT_INT8, p->y_zp, &dc), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &dc), TSR_OK);
    if (tsr_conv2d_plan_tensors(dev, p, &dx, &dc, &pc))
        fail_msg("conv plan: %s", tsr_errmsg());
    const uint64_t rows = (uint64_t)dy.nb * (uint64_t)dy.cb * (uint64_t)(oh * ow), add_ops = pl.alu_ops - pc.alu_ops;
    print_message("fused add shortcuts: %llu ALU ops (the conv alone %llu) over %llu accumulator rows\n",
                  (unsigned long long)pl.alu_ops, (unsigned long long)pc.alu_ops, (unsigned long long)rows);
    const int want = once ? 5 : 6;
    if (pl.alu_ops < pc.alu_ops || add_ops != rows * (uint64_t)want)
        fail_msg("fused add: %llu ALU ops for the add over %llu rows, want %d per row", (unsigned long long)add_ops,
                 (unsigned long long)rows, want);
    if (overlap) {
        /* The ALU bounds this layer (4 GEMM ops per row, 8 ALU ops): the
         * residual's LOAD must not leave it idle (tiling_t.rpre): the
         * estimate within 10% of the ALU pipe's own issue cycles. */
        double alu = 0;
        for (size_t i = 0; i < pl.ninsns; i++)
            if (pl.insns[i].opcode == TSR_OP_ALU)
                alu += tsr_insn_issue_cycles(cfg, &pl.insns[i], NULL);
        print_message("fused add overlap: estimate %.0f cycles, ALU issue cycles %.0f (%.3fx)\n", pl.cost, alu,
                      pl.cost / alu);
        if (pl.cost > 1.10 * alu)
            fail_msg("fused add: estimated %.0f cycles, %.3f times the ALU's %.0f: the residual's LOAD is not "
                     "hidden", pl.cost, pl.cost / alu, alu);
    }
    tsr_conv2d_plan_free(dev, &pc);
    tsr_dtensor_free(dev, &dc);
    tsr_conv2d_plan_free(dev, &pl);
    tsr_dtensor_free(dev, &dx);
    tsr_dtensor_free(dev, &dr);
    tsr_dtensor_free(dev, &dy);
    tsr_device_close(dev);
    free(x);
    free(w);
    free(r);
    free(yc);
    free(yr);
    free(y);
    free(bias);
}

static void test_fused_add_shortcuts(void **state)
{
    (void)state;
    fused_add_case(0, 32, 6, 5, 48, 0);
    fused_add_case(1, 32, 6, 5, 48, 0);
    fused_add_case(2, 32, 6, 5, 48, 0);
}

/* ResNet-50's layer1 conv+add (1x1, 64 -> 256 channels, rows of 56; 16 of
 * its 56 rows here): the ALU does twice the GEMM's work, so the residual's
 * LOAD has to run beside ALU steps of another tile, not ahead of its own
 * (tiling_t.rpre). Every byte as the reference, and the estimate within 10%
 * of the ALU's issue cycles: 1.37 times before the placement was searched
 * (the LOAD in the epilogue, the ALU idle for its transfer). */
static void test_fused_add_overlap(void **state)
{
    (void)state;
    fused_add_case(1, 64, 16, 56, 256, 1);
}

/* Large C_in on tiny: the reduction is split across chunks. */
static void test_reduction_split(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    conv_case_t k = basic_case(1, 100, 5, 6, 9, 3, 3, 1, 1);
    assert_true(run_case(dev, "tiny", &k, 1, 1) > 1);
    k = basic_case(1, 61, 4, 4, 6, 1, 1, 2, 0);
    k.p.x_dtype = TSR_DT_UINT8;
    k.p.x_zp = 255;
    k.p.rq_count = 1;
    int chunks = run_case(dev, "tiny", &k, 2, 1);
    (void)chunks;
    k = basic_case(1, 40, 7, 5, 5, 5, 5, 2, 2); /* 5x5 s2, 10 input blocks */
    k.p.w_dtype = TSR_DT_UINT8;
    k.w_zp[0] = 128;
    assert_true(run_case(dev, "tiny", &k, 3, 1) > 1);
    tsr_device_close(dev);
}

/* uint8 zero points 0 and 255 (pad values -128 and 127), full-window
 * padding, 1x1 stride 2 with padding, wide kernels. */
static void test_edges(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    for (int zp = 0; zp <= 255; zp += 255)
        for (int wd = 0; wd < 2; wd++) {
            conv_case_t k = basic_case(1, 5, 4, 3, 6, 3, 3, 1, 2);
            k.p.x_dtype = TSR_DT_UINT8;
            k.p.x_zp = zp;
            k.p.w_dtype = wd ? TSR_DT_UINT8 : TSR_DT_INT8;
            k.w_zp[0] = wd ? (zp ? 255 : 0) : 0; /* uint8 weights fit int8 after - zp when in range */
            k.p.y_dtype = TSR_DT_UINT8;
            k.p.y_zp = zp;
            k.p.act_min = 0;
            k.p.act_max = 255;
            run_case(dev, "tiny", &k, (uint64_t)(10 + zp + wd), 0);
            /* the same over the whole weight range: uint8 zero point 0 or 255
             * makes w - w_zp reach +-255 (three int8 parts) */
            k.full_w = 1;
            k.shift[0] = -12;
            run_case(dev, "tiny", &k, (uint64_t)(20 + zp + wd), 0);
        }
    /* pads larger than the kernel: windows entirely in padding give bias */
    conv_case_t k = basic_case(1, 3, 1, 2, 4, 3, 3, 1, 5);
    k.p.x_zp = -7;
    run_case(dev, "tiny", &k, 20, 0);
    /* 1x1 stride 2 with padding (row-skipping loads) */
    k = basic_case(2, 6, 9, 7, 5, 1, 1, 2, 1);
    k.p.pad_bottom = 3;
    run_case(dev, "tiny", &k, 21, 0);
    /* windows entirely in the left padding (x all pad), and rows of only padding */
    k = basic_case(1, 3, 1, 1, 4, 1, 1, 2, 0);
    k.p.pad_left = 1;
    k.p.x_zp = 9;
    run_case(dev, "tiny", &k, 25, 0);
    k = basic_case(1, 3, 2, 3, 4, 3, 3, 2, 0);
    k.p.pad_left = 4;
    k.p.pad_top = 4;
    k.p.pad_right = 1;
    run_case(dev, "tiny", &k, 26, 0);
    /* rows too long for half (or all) of tiny's input buffer: column tiles */
    k = basic_case(1, 5, 6, 50, 6, 7, 7, 1, 3);
    run_case(dev, "tiny", &k, 27, 1);
    k = basic_case(2, 3, 7, 61, 5, 5, 3, 2, 1);
    k.p.pad_right = 2;
    k.p.x_dtype = TSR_DT_UINT8;
    k.p.x_zp = 3;
    run_case(dev, "tiny", &k, 28, 1);
    /* 1x7 and 7x1 */
    k = basic_case(1, 4, 8, 9, 4, 1, 7, 1, 0);
    k.p.pad_left = 3;
    k.p.pad_right = 2;
    run_case(dev, "tiny", &k, 22, 0);
    k = basic_case(1, 4, 9, 3, 4, 7, 1, 2, 0);
    k.p.pad_top = 6;
    run_case(dev, "tiny", &k, 23, 0);
    /* depthwise, per-channel everything */
    k = basic_case(1, 13, 6, 6, 13, 3, 3, 2, 1);
    k.p.groups = 13;
    k.p.w_zp_count = 13;
    k.p.rq_count = 13;
    for (int i = 0; i < 13; i++) {
        k.w_zp[i] = i - 6;
        k.mult[i] = (int32_t)(1073741824 + i * 50000000);
        k.shift[i] = i % 4 == 0 ? 1 : -4 - i % 3;
    }
    run_case(dev, "tiny", &k, 24, 0);
    tsr_device_close(dev);
}

/* A ResNet-18 layer end to end on default (C11: 7x7 512->512 is too slow
 * for fsim in a unit test; use a channel-reduced C8 shape), and the tile
 * choices of C2..C11 printed. */
static void test_resnet_plans(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("default");
    static const int L[11][6] = {
        {56, 64, 64, 3, 1, 1},   {56, 64, 128, 3, 1, 2},  {56, 64, 128, 1, 0, 2},  {28, 128, 128, 3, 1, 1},
        {28, 128, 256, 3, 1, 2}, {28, 128, 256, 1, 0, 2}, {14, 256, 256, 3, 1, 1}, {14, 256, 512, 3, 1, 2},
        {14, 256, 512, 1, 0, 2}, {7, 512, 512, 3, 1, 1},   {224, 3, 64, 7, 3, 2}};
    for (int i = 0; i < 11; i++) {
        conv_case_t k = basic_case(1, L[i][1], L[i][0], L[i][0], L[i][2], L[i][3], L[i][3], L[i][5], L[i][4]);
        k.p.w_zp = k.w_zp; /* basic_case returned a copy: point into it */
        k.p.mult = k.mult;
        k.p.shift = k.shift;
        tsr_conv2d_plan_t pl;
        if (tsr_conv2d_plan(dev, &k.p, &pl))
            fail_msg("C%d: %s", i + 2, tsr_errmsg());
        uint64_t comp = pl.x_bytes + pl.w_bytes + pl.y_bytes + pl.c_bytes;
        printf("  C%-2d %3dx%-3d %3d->%-3d %dx%d s%d: toh %2d tow %3d tco %2d tci %2d %s, buffers %d/%d, %4d tiles x %2d "
               "chunks, %6zu insns, %8llu gemm ops, DRAM %8llu B (compulsory %8llu)\n",
               i < 10 ? i + 2 : 1, L[i][0], L[i][0], L[i][1], L[i][2], L[i][3], L[i][3], L[i][5], pl.toh, pl.tow, pl.tco, pl.tci,
               pl.co_inner ? "co-inner" : "rows-inner", pl.nbuf_inp, pl.nbuf_acc, pl.tiles, pl.chunks, pl.ninsns,
               (unsigned long long)pl.gemm_ops, (unsigned long long)pl.dram_bytes, (unsigned long long)comp);
        tsr_conv2d_plan_free(dev, &pl);
    }
    conv_case_t k = basic_case(1, 64, 14, 14, 48, 3, 3, 1, 1);
    run_case(dev, "default", &k, 30, 1);
    k = basic_case(1, 512, 7, 7, 512, 3, 3, 1, 1); /* C11 */
    run_case(dev, "default", &k, 31, 1);
    k = basic_case(1, 256, 14, 14, 512, 1, 1, 2, 0); /* C10 */
    run_case(dev, "default", &k, 32, 1);
    tsr_device_close(dev);
}

/* tsr_conv2d_presearch: a graph's searches run ahead on threads must give
 * the plans the tilings, and so the streams, a plan searching for itself
 * gives; shapes that repeat are searched once; a job whose tensors do not
 * match is left to its plan, which names the problem. Memory-only caches,
 * so no kernel file from an earlier run answers instead of the search. */
static void test_presearch(void **state)
{
    (void)state;
    enum { NJ = 6 };
    conv_case_t ks[NJ] = {basic_case(1, 64, 14, 14, 64, 3, 3, 1, 1), basic_case(1, 128, 7, 7, 256, 1, 1, 1, 0),
                          basic_case(1, 32, 28, 28, 64, 3, 3, 2, 1),  basic_case(1, 64, 14, 14, 64, 3, 3, 1, 1),
                          basic_case(1, 16, 9, 11, 48, 5, 3, 1, 2),   basic_case(1, 64, 14, 14, 64, 3, 3, 1, 1)};
    tsr_device_t *dev[2] = {open_dev("default"), open_dev("default")};
    tsr_dtensor_t x[2][NJ], y[2][NJ];
    tsr_conv2d_plan_t pl[2][NJ];
    memset(pl, 0, sizeof pl);
    memset(x, 0, sizeof x);
    memset(y, 0, sizeof y);
    for (int d = 0; d < 2; d++) {
        tsr_kcache_opts_t o = {.dir = ""};
        tsr_kcache_t *kc;
        if (tsr_kcache_create(dev[d], &o, &kc))
            fail_msg("kcache: %s", tsr_errmsg());
        const tsr_config_t *c = tsr_device_config(dev[d]);
        tsr_conv2d_job_t jobs[NJ];
        for (int i = 0; i < NJ; i++) {
            conv_case_t *k = &ks[i];
            k->p.w_zp = k->w_zp;
            k->p.mult = k->mult;
            k->p.shift = k->shift;
            int oh, ow;
            assert_int_equal(tsr_conv2d_check(&k->p, &oh, &ow), TSR_OK);
            /* job 5: an input tensor of the wrong height */
            if (tsr_dtensor_init(c, 1, k->p.c_in, k->p.h + (i == 5), k->p.w, TSR_DT_INT8, 0, &x[d][i]) ||
                tsr_dtensor_init(c, 1, k->p.c_out, oh, ow, TSR_DT_INT8, 0, &y[d][i]) ||
                tsr_dtensor_alloc(dev[d], &x[d][i]) || tsr_dtensor_alloc(dev[d], &y[d][i]))
                fail_msg("tensors: %s", tsr_errmsg());
            jobs[i] = (tsr_conv2d_job_t){&k->p, NULL, &x[d][i], NULL, &y[d][i], NULL};
        }
        if (d == 1)
            assert_int_equal(tsr_conv2d_presearch(dev[d], jobs, NJ, 2), TSR_OK);
        tsr_kcache_stats_t st0, st1;
        tsr_kcache_stats(kc, &st0);
        for (int i = 0; i < NJ; i++) {
            int rc = tsr_conv2d_plan_tensors(dev[d], &ks[i].p, &x[d][i], &y[d][i], &pl[d][i]);
            if (i == 5) {
                assert_int_equal(rc, TSR_EINVAL);
                assert_non_null(strstr(tsr_errmsg(), "input tensor"));
                continue;
            }
            if (rc)
                fail_msg("job %d: %s", i, tsr_errmsg());
        }
        tsr_kcache_stats(kc, &st1);
        /* with the presearch, every distinct shape's search came from the
         * memo (4 shapes; jobs 3 and 5 repeat job 0's, job 3 hits the kernel) */
        if (d == 1)
            assert_int_equal(st1.memo_hits - st0.memo_hits, 4);
        else
            assert_int_equal(st1.memo_hits - st0.memo_hits, 0);
    }
    for (int i = 0; i < 5; i++) {
        const tsr_conv2d_plan_t *a = &pl[0][i], *b = &pl[1][i];
        if (a->toh != b->toh || a->tow != b->tow || a->tco != b->tco || a->tci != b->tci ||
            a->co_inner != b->co_inner || a->nbuf_inp != b->nbuf_inp || a->nbuf_acc != b->nbuf_acc ||
            a->resident != b->resident || a->ninsns != b->ninsns)
            fail_msg("job %d: tiling with the presearch differs: toh %d/%d tow %d/%d tco %d/%d tci %d/%d, %zu/%zu insns",
                     i, a->toh, b->toh, a->tow, b->tow, a->tco, b->tco, a->tci, b->tci, a->ninsns, b->ninsns);
        for (size_t j = 0; j < a->ninsns; j++) {
            tsr_insn_t ia = a->insns[j], ib = b->insns[j];
            ia.dram_base = ib.dram_base = 0; /* (the devices placed their buffers alike, but need not) */
            if (memcmp(&ia, &ib, sizeof ia))
                fail_msg("job %d: instruction %zu differs with the presearch", i, j);
        }
    }
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < NJ; i++) {
            tsr_conv2d_plan_free(dev[d], &pl[d][i]);
            tsr_dtensor_free(dev[d], &x[d][i]);
            tsr_dtensor_free(dev[d], &y[d][i]);
        }
        tsr_device_close(dev[d]);
    }
}

static void expect_err(tsr_device_t *dev, conv_case_t *k, const char *word)
{
    tsr_conv2d_params_t *p = &k->p;
    p->w_zp = k->w_zp;
    p->mult = k->mult;
    p->shift = k->shift;
    tsr_conv2d_plan_t pl;
    int rc = tsr_conv2d_plan(dev, p, &pl);
    if (rc != TSR_EINVAL)
        fail_msg("want EINVAL (\"%s\"), got %s", word, tsr_errname(rc));
    if (!strstr(tsr_errmsg(), word))
        fail_msg("message \"%s\" lacks \"%s\"", tsr_errmsg(), word);
}

static void test_bad_params(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    conv_case_t k;
#define BAD(stmt, word)                                                                                            \
    do {                                                                                                           \
        k = basic_case(1, 4, 5, 5, 4, 3, 3, 1, 1);                                                                 \
        stmt;                                                                                                      \
        expect_err(dev, &k, word);                                                                                 \
    } while (0)
    BAD(k.p.n = 0, "positive");
    BAD(k.p.c_in = -1, "positive");
    BAD(k.p.kh = 0, "positive");
    BAD(k.p.stride_w = 0, "stride");
    BAD(k.p.pad_left = -1, "negative");
    BAD(k.p.pad_top = 16, "more than 15");
    BAD((k.p.h = 1, k.p.pad_top = 0, k.p.pad_bottom = 1), "larger than the padded input");
    BAD(k.p.groups = 3, "does not divide");
    BAD((k.p.groups = 4, k.p.c_out = 8), "C_out == C_in");
    BAD(k.p.x_zp = 128, "zero point");
    BAD((k.p.x_dtype = TSR_DT_UINT8, k.p.x_zp = -1), "zero point");
    BAD(k.p.y_zp = -129, "zero point");
    BAD(k.w_zp[0] = 200, "weight zero point");
    BAD(k.p.w_zp_count = 3, "weight zero points");
    BAD(k.p.rq_count = 2, "requantization");
    BAD(k.mult[0] = -1, "negative");
    BAD(k.shift[0] = 31, "shift");
    BAD(k.shift[0] = -32, "shift");
    BAD((k.p.act_min = 5, k.p.act_max = 4), "activation range");
    BAD((k.p.y_dtype = TSR_DT_UINT8, k.p.act_min = -1), "activation range");
    BAD(k.p.x_dtype = TSR_DT_INT16, "dtypes");
    BAD((k.p.kh = k.p.kw = 13, k.p.h = k.p.w = 13, k.p.c_in = 1), "no tiling fits"); /* 13x13 taps > tiny's 64 weight rows */
#undef BAD
    /* depthwise with w - w_zp beyond int8 (uint8 weights, zero point 0 and
     * 255: three and two int8 parts per block) is exact */
    for (int zp = 0; zp <= 255; zp += 255) {
        k = basic_case(1, 20, 6, 5, 20, 3, 3, 1, 1);
        k.p.groups = 20;
        k.p.w_dtype = TSR_DT_UINT8;
        k.w_zp[0] = zp;
        k.full_w = 1;
        k.shift[0] = -10;
        run_case(dev, "tiny", &k, (uint64_t)(40 + zp), 0);
        tsr_conv2d_plan_t pl;
        k.p.w_zp = k.w_zp;
        k.p.mult = k.mult;
        k.p.shift = k.shift;
        assert_int_equal(tsr_conv2d_plan(dev, &k.p, &pl), TSR_OK);
        assert_int_equal(pl.wsplit, zp ? 2 : 3); /* [-255, 0]: two parts; [0, 255]: three */
        tsr_conv2d_plan_free(dev, &pl);
    }
    tsr_device_close(dev);
}

/* Shared weight rows (plan.wshare): a depthwise conv whose weights are all
 * 1 (an average lowered as a conv, onnx/ops/tsr_ox_pool.c), whole-input
 * 7x7 (GlobalAveragePool over 7x7x1280's shape, fewer channels) and 28x28
 * (EfficientNet's squeeze-and-excite average), on default + DEPTHWISE 3.
 * Planned with the weights known (p.w_plan) the blocks' identical packed
 * rows are uploaded and loaded once: the device's weight LOAD bytes are
 * the one copy (w_bytes, loaded once per kernel), 1/blocks or less of the
 * unshared plan's (w_plan NULL, same device: a different kernel, the
 * signature says so); outputs equal the plain-C reference and the
 * block-diagonal path's (default, no DEPTHWISE). Weights that differ
 * between blocks are not shared, and a shared plan refuses them at
 * write_weights. Fails before the sharing: wshare 0, the loads per block. */
static uint64_t wgt_loaded_run(tsr_device_t *dev, tsr_conv2d_plan_t *pl, const uint8_t *x, const uint8_t *w,
                               const int32_t *bias, uint8_t *y)
{
    tsr_counters_t a, b;
    assert_int_equal(tsr_conv2d_write_weights(dev, pl, w, bias), TSR_OK);
    assert_int_equal(tsr_conv2d_write_input(dev, pl, x), TSR_OK);
    assert_int_equal(tsr_read_counters(dev, &a), TSR_OK);
    if (tsr_conv2d_exec(dev, pl))
        fail_msg("exec: %s", tsr_errmsg());
    assert_int_equal(tsr_read_counters(dev, &b), TSR_OK);
    assert_int_equal(tsr_conv2d_read_output(dev, pl, y), TSR_OK);
    return b.bytes_loaded[TSR_MEM_WGT] - a.bytes_loaded[TSR_MEM_WGT];
}

static void test_dw_shared_weights(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("default+dw3"), *dev0 = open_dev("default+dw0");
    static const int L[][2] = {{7, 320}, {28, 144}}; /* H = W = kernel, channels */
    for (int li = 0; li < 2; li++) {
        const int H = L[li][0], C = L[li][1];
        conv_case_t k = basic_case(1, C, H, H, C, H, H, 1, 0);
        tsr_conv2d_params_t *p = &k.p;
        p->w_zp = k.w_zp; /* (k is a copy: its own arrays) */
        p->mult = k.mult;
        p->shift = k.shift;
        p->groups = C;
        p->x_dtype = p->y_dtype = TSR_DT_UINT8;
        p->x_zp = 7;
        p->y_zp = 5;
        p->act_min = 0;
        p->act_max = 255;
        k.w_zp[0] = 0;
        int sh2 = 0; /* 1 / (H*H) = mult / 2^31 * 2^-sh2 with mult in [2^30, 2^31) */
        while ((2 << sh2) <= H * H)
            sh2++;
        k.mult[0] = (int32_t)((((int64_t)1 << 31) << sh2) / (H * H));
        k.shift[0] = -sh2;
        const size_t nx = (size_t)C * H * H, nw = (size_t)C * H * H;
        uint8_t *x = malloc(nx), *w = malloc(nw), *ys = malloc(C), *yu = malloc(C), *y0 = malloc(C), *yr = malloc(C);
        int32_t *bias = malloc(sizeof(int32_t) * (size_t)C);
        assert_true(x && w && ys && yu && y0 && yr && bias);
        uint64_t sd = 0x5eed + (uint64_t)li;
        for (size_t i = 0; i < nx; i++)
            x[i] = (uint8_t)rnd(&sd, 0, 255);
        memset(w, 1, nw);
        for (int i = 0; i < C; i++)
            bias[i] = rnd(&sd, -300, 300);
        tsr_conv2d_plan_t sh, un, d0;
        p->w_plan = w;
        if (tsr_conv2d_plan(dev, p, &sh))
            fail_msg("shared plan: %s", tsr_errmsg());
        p->w_plan = NULL;
        if (tsr_conv2d_plan(dev, p, &un))
            fail_msg("unshared plan: %s", tsr_errmsg());
        if (tsr_conv2d_plan(dev0, p, &d0))
            fail_msg("block-diagonal plan: %s", tsr_errmsg());
        assert_int_equal(sh.dwk, 3);
        assert_int_equal(un.dwk, 3);
        assert_int_equal(sh.wshare, 1);
        assert_int_equal(un.wshare, 0);
        assert_true(un.kcache != TSR_KC_HIT); /* not the shared kernel: the signature differs */
        /* unshared: a run of rows per block, or (wtight) every block's tap groups back to back, no more rows */
        assert_true(un.wtight ? un.w_bytes <= sh.w_bytes * (uint64_t)sh.cob : sh.w_bytes * (uint64_t)sh.cob == un.w_bytes);
        const uint64_t ls = wgt_loaded_run(dev, &sh, x, w, bias, ys);
        const uint64_t lu = wgt_loaded_run(dev, &un, x, w, bias, yu);
        (void)wgt_loaded_run(dev0, &d0, x, w, bias, y0);
        printf("    %dx%d,%d: weight LOAD bytes %llu shared (w_bytes %llu), %llu unshared, %d blocks; "
               "est. %.0f vs %.0f cycles\n",
               H, H, C, (unsigned long long)ls, (unsigned long long)sh.w_bytes, (unsigned long long)lu, sh.cob,
               sh.cost, un.cost);
        assert_true(ls == sh.w_bytes);          /* one copy, loaded once */
        /* 1/blocks of the unshared loads, or less (packed groups: less than those, which load each row) */
        assert_true(un.wtight ? ls < lu && lu >= un.w_bytes : ls * (uint64_t)sh.cob <= lu);
        assert_true(sh.dram_bytes < un.dram_bytes);
        opref_tensor_t tx = {OPREF_UINT8, 1, C, H, H, x, p->x_zp};
        opref_weights_t tw = {OPREF_UINT8, C, 1, H, H, w, k.w_zp, 1};
        opref_tensor_t ty = {OPREF_UINT8, 1, C, 1, 1, yr, p->y_zp};
        opref_conv_params_t cp = {1, 1, 0, 0, 0, 0, C};
        opref_requant_t rq = {1, k.mult, k.shift, p->act_min, p->act_max, NULL};
        assert_int_equal(opref_conv2d(&tx, &tw, bias, &cp, &rq, &ty), 0);
        for (int i = 0; i < C; i++)
            if (ys[i] != yr[i] || yu[i] != yr[i] || y0[i] != yr[i])
                fail_msg("%dx%d,%d: channel %d: shared %d, unshared %d, block-diagonal %d, reference %d", H, H, C, i,
                         ys[i], yu[i], y0[i], yr[i]);
        /* other weights in one block: the shared plan refuses them (one
         * line, nothing uploaded), a plan that knows them does not share */
        w[nw - 1] = 2;
        assert_int_equal(tsr_conv2d_write_weights(dev, &sh, w, bias), TSR_EINVAL);
        assert_non_null(strstr(tsr_errmsg(), "differ between output-channel blocks"));
        tsr_conv2d_plan_t ot;
        p->w_plan = w;
        assert_int_equal(tsr_conv2d_plan(dev, p, &ot), TSR_OK);
        assert_int_equal(ot.wshare, 0);
        assert_true(ot.w_bytes == un.w_bytes);
        p->w_plan = NULL;
        tsr_conv2d_plan_free(dev, &ot);
        tsr_conv2d_plan_free(dev, &sh);
        tsr_conv2d_plan_free(dev, &un);
        tsr_conv2d_plan_free(dev0, &d0);
        free(x);
        free(w);
        free(ys);
        free(yu);
        free(y0);
        free(yr);
        free(bias);
    }
    tsr_device_close(dev);
    tsr_device_close(dev0);
    /* random depthwise cases (kernels, strides, padding, batches, weight
     * zero points that split w - w_zp in parts over chunks, per-channel
     * requantization) whose blocks repeat the first block's weights: every
     * one in the mode with more than one block shares, every byte equal to
     * the reference and to the block-diagonal path (dw_cases, run_case) */
    g_periodic_w = 1;
    g_shared = g_shared_split = 0;
    dw_cases("default+dw3", "default+dw0", 30, 2, 56, 14, 0x5a01);
    dw_cases("tiny+dw3", "tiny", 60, 1, 20, 9, 0x5a02);
    dw_cases("b2+dw3", "b2", 40, 3, 20, 9, 0x5a03);
    printf("  %d of the cases shared one copy of the weights, %d with split weights\n", g_shared, g_shared_split);
    g_periodic_w = 0;
    /* (the mode tiles most cases; one with one block does not share) */
    const int total = scaled(30) + scaled(60) + scaled(40);
    assert_true(g_shared > total / 2 && g_shared_split > 0);
}

/* Block skipping (plan.wnz): groups-1 convs with all-zero BLOCK_OUT x
 * BLOCK_IN weight blocks, planned with the weights known (p.w_plan): a 1x1
 * one-hot channel shuffle of 128 channels (ShuffleNetV2's groups 2: output
 * channel j reads input (j % 2) * 64 + j / 2, identity requantization)
 * and a 3x3 conv with random zero blocks and one output block of zeros.
 * Every byte equals the plain-C reference (opref) and the dense plan's
 * (w_plan NULL: another kernel); the device counts fewer GEMM ops (the
 * shuffle at most half: two of eight input blocks per output block, plus
 * a zero pair per input block a small resident tile does not meet) and, on a
 * timed backend, fewer cycles. Weights nonzero in a skipped block are
 * refused at write_weights. Fails without the skipping (wnz NULL). */
static void skip_run(tsr_device_t *dev, tsr_conv2d_plan_t *pl, const int8_t *x, const int8_t *w,
                     const int32_t *bias, int8_t *y, tsr_counters_t *d)
{
    tsr_counters_t a, b;
    if (tsr_conv2d_write_weights(dev, pl, w, bias) || tsr_conv2d_write_input(dev, pl, x) ||
        tsr_read_counters(dev, &a) || tsr_conv2d_exec(dev, pl) || tsr_read_counters(dev, &b) ||
        tsr_conv2d_read_output(dev, pl, y))
        fail_msg("block skipping run: %s", tsr_errmsg());
    d->gemm_ops = b.gemm_ops - a.gemm_ops;
    d->cycles = b.cycles - a.cycles;
}

static void skip_case(tsr_device_t *dev, int shuffle, uint64_t sd)
{
    const int C = shuffle ? 128 : 64, M = shuffle ? 128 : 48, K = shuffle ? 1 : 3, H = 8;
    conv_case_t k = basic_case(1, C, H, H, M, K, K, 1, K / 2);
    tsr_conv2d_params_t *p = &k.p;
    p->w_zp = k.w_zp, p->mult = k.mult, p->shift = k.shift;
    k.mult[0] = 1 << 30, k.shift[0] = shuffle ? 1 : -12; /* (1.0 for the shuffle) */
    const size_t nx = (size_t)C * H * H, nw = (size_t)M * C * K * K, ny = (size_t)M * H * H;
    int8_t *x = malloc(nx), *w = calloc(nw, 1), *ys = malloc(ny), *yd = malloc(ny), *yr = malloc(ny);
    int32_t *bias = calloc((size_t)M, sizeof *bias);
    assert_true(x && w && ys && yd && yr && bias);
    for (size_t i = 0; i < nx; i++)
        x[i] = (int8_t)rnd(&sd, -128, 127);
    const int bo = (int)tsr_device_config(dev)->block_out, bi = (int)tsr_device_config(dev)->block_in;
    for (int o = 0; o < M; o++)
        if (shuffle)
            w[(size_t)o * C + (size_t)((o % 2) * (C / 2) + o / 2)] = 1;
        else {
            bias[o] = rnd(&sd, -5000, 5000);
            for (int c = 0; c < C; c++)
                for (int t = 0; t < K * K; t++) /* zero blocks: (o/bo + 2*(c/bi)) % 3 == 0, and output block 1 */
                    if ((o / bo + 2 * (c / bi)) % 3 && o / bo != 1)
                        w[((size_t)o * C + (size_t)c) * K * K + (size_t)t] = (int8_t)rnd(&sd, -128, 127);
        }
    tsr_conv2d_plan_t sk, de;
    p->w_plan = w;
    if (tsr_conv2d_plan(dev, p, &sk))
        fail_msg("skipping plan: %s", tsr_errmsg());
    p->w_plan = NULL;
    if (tsr_conv2d_plan(dev, p, &de))
        fail_msg("dense plan: %s", tsr_errmsg());
    assert_non_null(sk.wnz);
    assert_null(de.wnz);
    tsr_counters_t cs, cd;
    skip_run(dev, &sk, x, w, bias, ys, &cs);
    skip_run(dev, &de, x, w, bias, yd, &cd);
    printf("    %s %dx%d %d->%d: gemm ops %llu skipping, %llu dense; cycles %llu, %llu; est. %.0f, %.0f\n",
           shuffle ? "shuffle" : "conv", K, K, C, M, (unsigned long long)cs.gemm_ops, (unsigned long long)cd.gemm_ops,
           (unsigned long long)cs.cycles, (unsigned long long)cd.cycles, sk.cost, de.cost);
    opref_tensor_t tx = {OPREF_INT8, 1, C, H, H, x, 0};
    opref_weights_t tw = {OPREF_INT8, M, C, K, K, w, k.w_zp, 1};
    opref_tensor_t ty = {OPREF_INT8, 1, M, H, H, yr, 0};
    opref_conv_params_t cp = {1, 1, K / 2, K / 2, K / 2, K / 2, 1};
    opref_requant_t rq = {1, k.mult, k.shift, p->act_min, p->act_max, NULL};
    assert_int_equal(opref_conv2d(&tx, &tw, bias, &cp, &rq, &ty), 0);
    for (size_t i = 0; i < ny; i++) {
        const size_t o = i / (size_t)(H * H), px = i % (size_t)(H * H);
        const int8_t perm = shuffle ? x[(size_t)((o % 2) * (size_t)(C / 2) + o / 2) * (size_t)(H * H) + px] : yr[i];
        if (ys[i] != yr[i] || yd[i] != yr[i] || perm != yr[i])
            fail_msg("%s: output %zu: skipping %d, dense %d, reference %d (permutation %d)",
                     shuffle ? "shuffle" : "conv", i, ys[i], yd[i], yr[i], perm);
    }
    assert_true(cs.gemm_ops < cd.gemm_ops && (!shuffle || cs.gemm_ops * 2 <= cd.gemm_ops));
    assert_true(cs.cycles <= cd.cycles && (cd.cycles == 0 || cs.cycles < cd.cycles));
    /* a nonzero weight in a skipped block: refused, one line */
    w[shuffle ? 16 : 0] = 3; /* (output 0, input 16 or 0: a block that output block 0 skips) */
    assert_int_equal(tsr_conv2d_write_weights(dev, &sk, w, bias), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "the plan skips it"));
    /* planned again with these weights (same address, same shapes): the
     * block is kept, not taken from the memo of the first plan's bits */
    tsr_conv2d_plan_t s2;
    p->w_plan = w;
    if (tsr_conv2d_plan(dev, p, &s2))
        fail_msg("second skipping plan: %s", tsr_errmsg());
    p->w_plan = NULL;
    const size_t kept = (size_t)((shuffle ? 16 : 0) / bi); /* (output block 0's bit of that input block) */
    assert_non_null(s2.wnz);
    if (!((s2.wnz[kept >> 3] >> (kept & 7)) & 1))
        fail_msg("%s: planned again with a nonzero weight in block (0, %zu), the plan still skips it",
                 shuffle ? "shuffle" : "conv", kept);
    assert_int_equal(tsr_conv2d_write_weights(dev, &s2, w, bias), TSR_OK);
    tsr_conv2d_plan_free(dev, &s2);
    tsr_conv2d_plan_free(dev, &sk);
    tsr_conv2d_plan_free(dev, &de);
    free(x), free(w), free(ys), free(yd), free(yr), free(bias);
}

static void test_block_skip(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("default");
    skip_case(dev, 1, base_seed() ^ 0x5c1);
    skip_case(dev, 0, base_seed() ^ 0x5c2);
    tsr_device_close(dev);
}

/* An activation table in the conv epilogue (tsr_conv2d_plan_tensors_act):
 * y = act(conv(x)) in one pass, every byte equal to the unfused pair (the
 * conv into an intermediate tensor, then tsr_act_run over it), for convs
 * groups 1 (3x3, 1x1, per-channel requantization) and depthwise (the GEMM
 * depthwise mode), on default + ACT_LUT 4 (+ DEPTHWISE 3). The fused
 * stream: one LOAD lut (256 bytes) before its first ALU lut, one ALU lut op
 * per output row beyond the conv's ALU ops, and the conv's DRAM traffic +
 * the table only (the act pass's 2 bytes per element are gone). Refused
 * without ACT_LUT and with a NULL table. */
static const char *CFG_DW3_LUT4 = "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": 3, \"LOG_WGT_WIDTH\": 3, "
                                  "\"LOG_ACC_WIDTH\": 5, \"LOG_BATCH\": 0, \"LOG_BLOCK\": 4, "
                                  "\"LOG_UOP_BUFF_SIZE\": 15, \"LOG_INP_BUFF_SIZE\": 15, \"LOG_WGT_BUFF_SIZE\": 18, "
                                  "\"LOG_ACC_BUFF_SIZE\": 17, \"DRAM_BUS_WIDTH\": 64, \"CLOCK_MHZ\": 100, "
                                  "\"DEPTHWISE\": 3, \"ACT_LUT\": 4}";

static void act_epilogue_case(tsr_device_t *dev, conv_case_t *k, uint64_t seed)
{
    const tsr_config_t *cfg = tsr_device_config(dev);
    tsr_conv2d_params_t *p = &k->p;
    p->w_zp = k->w_zp;
    p->mult = k->mult;
    p->shift = k->shift;
    int oh, ow;
    assert_int_equal(tsr_conv2d_check(p, &oh, &ow), TSR_OK);
    const size_t nx = (size_t)p->n * p->c_in * p->h * p->w, ny = (size_t)p->n * p->c_out * oh * ow;
    const size_t nw = (size_t)p->c_out * (p->c_in / p->groups) * p->kh * p->kw;
    uint8_t *x = malloc(nx), *w = malloc(nw), *y1 = malloc(ny), *y2 = malloc(ny);
    int32_t *bias = malloc(sizeof(int32_t) * (size_t)p->c_out);
    assert_true(x && w && y1 && y2 && bias);
    uint64_t s = seed;
    for (size_t i = 0; i < nx; i++)
        x[i] = (uint8_t)tsr_test_next(&s);
    for (size_t i = 0; i < nw; i++) /* (w - w_zp within int8: one weight part) */
        w[i] = (uint8_t)(p->w_dtype == TSR_DT_UINT8 ? rnd(&s, 0, 255) : rnd(&s, -127, 127));
    for (int i = 0; i < p->c_out; i++)
        bias[i] = rnd(&s, -3000, 3000);
    int32_t v[TSR_ACT_ENTRIES];
    for (int i = 0; i < TSR_ACT_ENTRIES; i++)
        v[i] = rnd(&s, -128, 127);
    tsr_act_table_t tab;
    assert_int_equal(tsr_act_table_from_values(v, &tab), TSR_OK);
    tsr_dtensor_t xt, mid, ya, yb;
    assert_int_equal(tsr_dtensor_init(cfg, p->n, p->c_in, p->h, p->w, p->x_dtype, p->x_zp, &xt), TSR_OK);
    assert_int_equal(tsr_dtensor_init(cfg, p->n, p->c_out, oh, ow, p->y_dtype, p->y_zp, &mid), TSR_OK);
    assert_int_equal(tsr_dtensor_init(cfg, p->n, p->c_out, oh, ow, TSR_DT_UINT8, 3, &ya), TSR_OK);
    assert_int_equal(tsr_dtensor_init(cfg, p->n, p->c_out, oh, ow, TSR_DT_UINT8, 3, &yb), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &xt), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &mid), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &ya), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &yb), TSR_OK);
    assert_int_equal(tsr_dtensor_write_nchw(dev, &xt, x), TSR_OK);
    /* unfused: conv into mid, then the table over mid */
    tsr_conv2d_plan_t pc, pf;
    if (tsr_conv2d_plan_tensors(dev, p, &xt, &mid, &pc))
        fail_msg("conv plan: %s", tsr_errmsg());
    assert_int_equal(tsr_conv2d_write_weights(dev, &pc, w, bias), TSR_OK);
    assert_int_equal(tsr_conv2d_exec(dev, &pc), TSR_OK);
    tsr_act_plan_t pa;
    assert_int_equal(tsr_act_plan_tensors(dev, &tab, &mid, &ya, &pa), TSR_OK);
    assert_int_equal(tsr_act_exec(dev, &pa), TSR_OK);
    assert_int_equal(tsr_dtensor_read_nchw(dev, &ya, y1), TSR_OK);
    /* fused */
    if (tsr_conv2d_plan_tensors_act(dev, p, &tab, &xt, &yb, &pf))
        fail_msg("fused plan: %s", tsr_errmsg());
    assert_int_equal(pf.act, 1);
    assert_int_equal(tsr_conv2d_write_weights(dev, &pf, w, bias), TSR_OK);
    assert_int_equal(tsr_conv2d_exec(dev, &pf), TSR_OK);
    assert_int_equal(tsr_dtensor_read_nchw(dev, &yb, y2), TSR_OK);
    for (size_t i = 0; i < ny; i++)
        if (y1[i] != y2[i])
            fail_msg("[%d,%d,%d,%d] %dx%d groups %d: element %zu: fused %u, conv then act %u", p->n, p->c_in, p->h,
                     p->w, p->kh, p->kw, p->groups, i, y2[i], y1[i]);
    /* the stream: one table LOAD before every lut, a lut op per output row */
    int lut_loads = 0, lut_alus = 0, late = 0;
    uint64_t lut_ops = 0;
    for (size_t i = 0; i < pf.ninsns; i++) {
        const tsr_insn_t *in = &pf.insns[i];
        if (in->opcode == TSR_OP_LOAD && in->mem_type == TSR_MEM_LUT)
            lut_loads++;
        if (in->opcode == TSR_OP_ALU && in->alu_opcode == TSR_ALU_LUT) {
            lut_alus++;
            late |= lut_loads == 0;
            lut_ops += (uint64_t)in->iter_out * in->iter_in * (in->uop_end - in->uop_bgn);
        }
    }
    const uint64_t rows = (uint64_t)pf.nb * pf.cob * pf.oh * pf.ow;
    printf("    %dx%d,%d->%d,%dx%d groups %d: fused %llu DRAM bytes, est. %.0f cycles; conv %llu + act %llu "
           "bytes, est. %.0f cycles + act\n",
           p->h, p->w, p->c_in, p->c_out, p->kh, p->kw, p->groups, (unsigned long long)pf.dram_bytes, pf.cost,
           (unsigned long long)pc.dram_bytes, (unsigned long long)pa.dram_bytes, pc.cost);
    assert_int_equal(lut_loads, 1);
    assert_true(lut_alus > 0 && !late);
    assert_true(lut_ops == rows);
    assert_true(pf.gemm_ops == pc.gemm_ops);
    /* (the search may pick another tiling for the longer epilogue: the
     * conv's bytes within a few percent, plus the table) */
    assert_true(pf.dram_bytes <= pc.dram_bytes + TSR_ACT_ENTRIES + pc.dram_bytes / 20);
    assert_true(pf.dram_bytes + pa.dram_bytes / 2 < pc.dram_bytes + pa.dram_bytes);
    tsr_act_plan_free(dev, &pa);
    tsr_conv2d_plan_free(dev, &pc);
    tsr_conv2d_plan_free(dev, &pf);
    tsr_dtensor_free(dev, &xt);
    tsr_dtensor_free(dev, &mid);
    tsr_dtensor_free(dev, &ya);
    tsr_dtensor_free(dev, &yb);
    free(x);
    free(w);
    free(y1);
    free(y2);
    free(bias);
}

static void test_act_epilogue(void **state)
{
    (void)state;
    tsr_config_t cfg;
    if (tsr_config_parse(CFG_DW3_LUT4, "default+dw3+lut4", &cfg))
        fail_msg("config: %s", tsr_errmsg());
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = base_seed() | 1};
    if (tsr_device_open(tsr_test_backend(), &cfg, &o, &dev))
        fail_msg("open: %s", tsr_errmsg());
    /* 3x3 s1 int8, 1x1 u8 per channel, depthwise 3x3 s2 and 5x5 s1 u8 */
    conv_case_t k = basic_case(1, 24, 14, 14, 40, 3, 3, 1, 1);
    act_epilogue_case(dev, &k, 11);
    k = basic_case(1, 32, 7, 9, 96, 1, 1, 1, 0);
    k.p.x_dtype = k.p.y_dtype = k.p.w_dtype = TSR_DT_UINT8;
    k.p.x_zp = 120;
    k.p.y_zp = 7;
    k.p.act_min = 0;
    k.p.act_max = 255;
    k.w_zp[0] = 128;
    k.p.rq_count = 96;
    for (int i = 0; i < 96; i++) {
        k.mult[i] = 1300000000 + i * 5000000;
        k.shift[i] = -8 - i % 3;
    }
    act_epilogue_case(dev, &k, 12);
    for (int d = 0; d < 2; d++) {
        k = basic_case(1, 48, 15, 15, 48, d ? 5 : 3, d ? 5 : 3, d ? 1 : 2, d ? 2 : 1);
        k.p.groups = 48;
        k.p.x_dtype = k.p.y_dtype = k.p.w_dtype = TSR_DT_UINT8;
        k.p.x_zp = 3;
        k.w_zp[0] = 128;
        k.p.act_min = 0;
        k.p.act_max = 255;
        k.shift[0] = -8;
        act_epilogue_case(dev, &k, 13 + (uint64_t)d);
    }
    /* refusals: a NULL table; a config without tables */
    k = basic_case(1, 16, 4, 4, 16, 1, 1, 1, 0);
    k.p.w_zp = k.w_zp;
    k.p.mult = k.mult;
    k.p.shift = k.shift;
    tsr_dtensor_t xt, yt;
    tsr_conv2d_plan_t pl;
    assert_int_equal(tsr_dtensor_init(&cfg, 1, 16, 4, 4, TSR_DT_INT8, 0, &xt), TSR_OK);
    assert_int_equal(tsr_dtensor_init(&cfg, 1, 16, 4, 4, TSR_DT_INT8, 0, &yt), TSR_OK);
    assert_int_equal(tsr_conv2d_plan_tensors_act(dev, &k.p, NULL, &xt, &yt, &pl), TSR_EINVAL);
    tsr_device_close(dev);
    dev = open_dev("default+lut0"); /* (the default preset has ACT_LUT 2) */
    tsr_act_table_t tab;
    memset(&tab, 0, sizeof tab);
    assert_int_equal(tsr_dtensor_alloc(dev, &xt), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &yt), TSR_OK);
    assert_int_equal(tsr_conv2d_plan_tensors_act(dev, &k.p, &tab, &xt, &yt, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "ACT_LUT"));
    tsr_dtensor_free(dev, &xt);
    tsr_dtensor_free(dev, &yt);
    tsr_device_close(dev);
}

int main(void)
{
    printf("test_conv2d: backend %s, base seed %llu (TSR_CONV_SEED)\n", backend(), (unsigned long long)base_seed());
    const char *filter = getenv("TSR_CONV_FILTER"); /* e.g. "test_edges" or "test_random_*" */
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_params),      cmocka_unit_test(test_edges),
        cmocka_unit_test(test_reduction_split), cmocka_unit_test(test_random_tiny),
        cmocka_unit_test(test_random_default),  cmocka_unit_test(test_random_default_wide),
        cmocka_unit_test(test_random_large),
        cmocka_unit_test(test_random_batch2),   cmocka_unit_test(test_random_rect),
        cmocka_unit_test(test_resnet_plans),    cmocka_unit_test(test_one_call),
        cmocka_unit_test(test_presearch),       cmocka_unit_test(test_grouped),
        cmocka_unit_test(test_fused_add_shortcuts), cmocka_unit_test(test_fused_add_overlap),
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_depthwise_mode),  cmocka_unit_test(test_dw_shared_weights),
        cmocka_unit_test(test_block_skip),
        cmocka_unit_test(test_act_epilogue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
