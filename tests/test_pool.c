/*
 * test_pool: the pool JIT operators (jit/tsr_pool.c: maxpool, avgpool,
 * global average pool) against the plain-C reference of jit/operators.md
 * (tests/tsr_opref.c), exact equality. Hand cases from operators.md (all-
 * negative maxpool inputs with padding, rounding ties of the average),
 * random cases over kind, dtype, zero point, shape, kernel, stride,
 * asymmetric padding, count_include_pad and preset, bad parameters, and the
 * ResNet-18 pools with their figures. Failures print the seed, the case and
 * the first differing element. Backend from TSR_TEST_BACKEND (default fsim;
 * other backends run a quarter of the random cases);
 * TSR_POOL_SEED overrides the base seed, TSR_POOL_FILTER selects tests
 * (cmocka pattern). fsim runs with a random stage interleaving, so a
 * missing dependency token shows up as a wrong result.
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

#include "tsr_cost.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_opref.h"
#include "tsr_testenv.h"
#include "tsr_pool.h"

static const char *backend(void) { return tsr_test_backend(); }
static int on_fsim(void) { return !strcmp(backend(), "fsim"); }

/* Random case counts: full on fsim, a quarter on the (slower) RTL. */
static int scaled(int n) { return on_fsim() ? n : (n + 3) / 4; }

static uint64_t base_seed(void) { return tsr_test_seed("TSR_POOL_SEED", 20261124u); }


static tsr_device_t *open_dev(const char *name) { return tsr_test_open(name, base_seed() | 1); }

static int rnd(uint64_t *s, int lo, int hi) { return tsr_test_rnd(s, lo, hi); }

static int32_t dmin(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 0 : -128; }
static int32_t dmax(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 255 : 127; }
static int32_t val(tsr_dtype_e d, const uint8_t *y, size_t i) { return d == TSR_DT_UINT8 ? y[i] : (int8_t)y[i]; }

static const char *kname(int k) { return k == TSR_POOL_MAX ? "max" : k == TSR_POOL_AVG ? "avg" : "global"; }

static void describe(const tsr_pool_params_t *p, const char *cfg, uint64_t seed, char *buf, size_t n)
{
    snprintf(buf, n,
             "seed %llu config %s: %s pool x [%d,%d,%d,%d] %s zp %d, kernel %dx%d stride %dx%d pad t%d l%d b%d r%d, "
             "count_include_pad %d",
             (unsigned long long)seed, cfg, kname(p->kind), p->n, p->c, p->h, p->w,
             p->dtype == TSR_DT_UINT8 ? "u8" : "i8", p->zp, p->kh, p->kw, p->stride_h, p->stride_w, p->pad_top,
             p->pad_left, p->pad_bottom, p->pad_right, p->count_include_pad);
}

/* Plan statistics over a group of cases. */
static int g_single, g_map, g_div2, g_chunked, g_coltile, g_sepavg, g_one_call;

/* Reference output of p on x into yr (oh x ow). */
static void reference(const tsr_pool_params_t *p, const uint8_t *x, uint8_t *yr, int oh, int ow, const char *desc)
{
    opref_dtype_t dt = (opref_dtype_t)(p->dtype == TSR_DT_UINT8);
    opref_tensor_t tx = {dt, p->n, p->c, p->h, p->w, (void *)x, p->zp};
    opref_tensor_t ty = {dt, p->n, p->c, oh, ow, yr, p->zp};
    opref_pool_params_t pp = {p->kh, p->kw, p->stride_h, p->stride_w, p->pad_top, p->pad_left, p->pad_bottom,
                              p->pad_right, p->count_include_pad};
    int rc = p->kind == TSR_POOL_MAX   ? opref_maxpool(&tx, &pp, &ty)
             : p->kind == TSR_POOL_AVG ? opref_avgpool(&tx, &pp, &ty)
                                       : opref_global_avgpool(&tx, &ty);
    if (rc)
        fail_msg("%s: reference: %s", desc, tsr_errmsg());
}

/* Run p on x with dev into y (plan/pack/exec/read, or the one-call API). */
static void run_dev(tsr_device_t *dev, const tsr_pool_params_t *p, const uint8_t *x, uint8_t *y, const char *desc,
                    int verbose)
{
    if (g_one_call) {
        if (tsr_pool_run(dev, p, x, y))
            fail_msg("%s: tsr_pool_run: %s", desc, tsr_errmsg());
        return;
    }
    tsr_pool_plan_t pl;
    if (tsr_pool_plan(dev, p, &pl))
        fail_msg("%s: plan: %s", desc, tsr_errmsg());
    g_single += pl.nbuf_inp == 1 || pl.nbuf_acc == 1;
    g_map += pl.use_map;
    g_div2 += pl.div_kind == 2;
    g_chunked += pl.chunks > 1;
    g_coltile += pl.tow < pl.ow;
    g_sepavg += pl.sep && p->kind == TSR_POOL_AVG;
    if (verbose)
        printf("  %s\n    %s, toh %d tow %d tco %d, %d tiles x %d chunks, buffers %d/%d, division %d (k %d e %d, %d counts%s), "
               "%zu insns\n",
               desc, pl.sep ? "separable" : "direct", pl.toh, pl.tow, pl.tco, pl.tiles, pl.chunks, pl.nbuf_inp, pl.nbuf_acc, pl.div_kind, pl.div_k, pl.div_e,
               pl.ncounts, pl.use_map ? ", map" : "", pl.ninsns);
    int rc = tsr_pool_write_input(dev, &pl, x);
    if (!rc)
        rc = tsr_pool_exec(dev, &pl);
    if (!rc)
        rc = tsr_pool_read_output(dev, &pl, y);
    tsr_pool_plan_free(dev, &pl);
    if (rc)
        fail_msg("%s: run: %s", desc, tsr_errmsg());
}

static void compare(const tsr_pool_params_t *p, const uint8_t *y, const uint8_t *yr, int oh, int ow,
                    const char *desc)
{
    size_t ny = (size_t)p->n * p->c * oh * ow;
    for (size_t i = 0; i < ny; i++)
        if (y[i] != yr[i]) {
            size_t ox = i % (size_t)ow, oy = i / ow % (size_t)oh, c = i / ((size_t)ow * oh) % (size_t)p->c;
            size_t n = i / ((size_t)ow * oh * p->c);
            fail_msg("%s\n  output [%zu][%zu][%zu][%zu] (flat %zu of %zu): got %d, want %d", desc, n, c, oy, ox, i, ny,
                     val(p->dtype, y, i), val(p->dtype, yr, i));
        }
}

/* One case with x given (or random from seed when x is NULL). */
static void run_case(tsr_device_t *dev, const char *cfg, const tsr_pool_params_t *p, const uint8_t *xin,
                     uint64_t seed, int verbose)
{
    char desc[512];
    describe(p, cfg, seed, desc, sizeof desc);
    int oh = 0, ow = 0;
    if (tsr_pool_check(p, &oh, &ow))
        fail_msg("%s: check: %s", desc, tsr_errmsg());
    size_t nx = (size_t)p->n * p->c * p->h * p->w, ny = (size_t)p->n * p->c * oh * ow;
    uint8_t *x = malloc(nx), *y = malloc(ny), *yr = malloc(ny);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(yr);
    if (xin)
        memcpy(x, xin, nx);
    else {
        uint64_t s = seed ^ 0x5151;
        int mode = rnd(&s, 0, 3); /* full range, narrow around zp, extremes only, or constant */
        int cval = rnd(&s, dmin(p->dtype), dmax(p->dtype));
        for (size_t i = 0; i < nx; i++) {
            int v = mode == 0   ? rnd(&s, dmin(p->dtype), dmax(p->dtype))
                    : mode == 1 ? p->zp + rnd(&s, -3, 3)
                    : mode == 2 ? (rnd(&s, 0, 1) ? dmin(p->dtype) : dmax(p->dtype))
                                : cval + rnd(&s, 0, 1);
            if (v < dmin(p->dtype))
                v = dmin(p->dtype);
            if (v > dmax(p->dtype))
                v = dmax(p->dtype);
            x[i] = (uint8_t)v;
        }
    }
    memset(y, 0xa5, ny);
    run_dev(dev, p, x, y, desc, verbose);
    reference(p, x, yr, oh, ow, desc);
    compare(p, y, yr, oh, ow, desc);
    free(x);
    free(y);
    free(yr);
}

static tsr_pool_params_t basic(int kind, int n, int c, int h, int w, int k, int s, int pad)
{
    tsr_pool_params_t p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    p.n = n;
    p.c = c;
    p.h = h;
    p.w = w;
    p.kh = p.kw = k;
    p.stride_h = p.stride_w = s;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad;
    p.dtype = TSR_DT_INT8;
    return p;
}

static void random_params(uint64_t *s, tsr_pool_params_t *p, int maxn, int maxc, int maxhw)
{
    memset(p, 0, sizeof *p);
    int r = rnd(s, 0, 9);
    p->kind = r < 4 ? TSR_POOL_MAX : r < 8 ? TSR_POOL_AVG : TSR_POOL_GLOBAL_AVG;
    p->n = rnd(s, 1, maxn);
    p->c = rnd(s, 1, maxc);
    p->dtype = rnd(s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    int e = rnd(s, 0, 5);
    p->zp = e == 0 ? dmin(p->dtype) : e == 1 ? dmax(p->dtype) : rnd(s, dmin(p->dtype), dmax(p->dtype));
    p->h = rnd(s, 1, maxhw);
    p->w = rnd(s, 1, maxhw);
    if (p->kind == TSR_POOL_GLOBAL_AVG)
        return;
    static const int ks[6] = {1, 2, 3, 3, 5, 7};
    p->kh = ks[rnd(s, 0, 5)];
    p->kw = rnd(s, 0, 2) ? p->kh : ks[rnd(s, 0, 5)];
    p->stride_h = rnd(s, 1, 3);
    p->stride_w = rnd(s, 0, 2) ? p->stride_h : rnd(s, 1, 3);
    p->pad_top = rnd(s, 0, p->kh - 1);
    p->pad_bottom = rnd(s, 0, 1) ? p->pad_top : rnd(s, 0, p->kh - 1);
    p->pad_left = rnd(s, 0, p->kw - 1);
    p->pad_right = rnd(s, 0, 1) ? p->pad_left : rnd(s, 0, p->kw - 1);
    if (p->h + p->pad_top + p->pad_bottom < p->kh)
        p->h = p->kh - p->pad_top - p->pad_bottom;
    if (p->w + p->pad_left + p->pad_right < p->kw)
        p->w = p->kw - p->pad_left - p->pad_right;
    p->count_include_pad = rnd(s, 0, 1);
}

static void random_cases(const char *cfg, int count, int maxn, int maxc, int maxhw, uint64_t salt)
{
    tsr_device_t *dev = open_dev(cfg);
    uint64_t seed0 = base_seed() ^ salt;
    count = scaled(count);
    g_single = g_map = g_div2 = g_chunked = g_coltile = g_sepavg = 0;
    int kinds[3] = {0, 0, 0};
    for (int i = 0; i < count; i++) {
        uint64_t seed = seed0 + (uint64_t)i, s = seed;
        tsr_pool_params_t p;
        random_params(&s, &p, maxn, maxc, maxhw);
        kinds[p.kind]++;
        run_case(dev, cfg, &p, NULL, seed, 0);
    }
    printf("  %s: %d cases (%d max, %d avg, %d global; %d single-buffered, %d multiplier maps, %d reciprocal "
           "divisions, %d chunked, %d column-tiled, %d separable avg)\n",
           cfg, count, kinds[0], kinds[1], kinds[2], g_single, g_map, g_div2, g_chunked, g_coltile, g_sepavg);
    tsr_device_close(dev);
}

static void test_random_tiny(void **state)
{
    (void)state;
    random_cases("tiny", 500, 2, 9, 9, 1);
    random_cases("tiny", 100, 1, 40, 14, 5); /* channel tiles, row tiles, single buffering */
}
static void test_random_default(void **state)
{
    (void)state;
    random_cases("default", 150, 2, 40, 16, 2);
    random_cases("default", 20, 1, 200, 40, 6); /* wider and taller: several row and channel tiles */
}
static void test_random_large(void **state)
{
    (void)state;
    random_cases("large", 60, 1, 70, 14, 3);
}
static void test_random_batch2(void **state)
{
    (void)state;
    random_cases("b2", 120, 3, 9, 9, 4);
}

/* Hand cases of operators.md, with hand-worked expected values. */
static void expect_values(tsr_device_t *dev, const tsr_pool_params_t *p, const int8_t *x, const int *want,
                          int nwant, const char *what)
{
    int oh, ow;
    assert_int_equal(tsr_pool_check(p, &oh, &ow), TSR_OK);
    assert_int_equal(p->n * p->c * oh * ow, nwant);
    uint8_t y[64];
    char desc[512];
    describe(p, "tiny", 0, desc, sizeof desc);
    run_dev(dev, p, (const uint8_t *)x, y, desc, 0);
    for (int i = 0; i < nwant; i++)
        if (val(p->dtype, y, (size_t)i) != want[i])
            fail_msg("%s (%s): output %d: got %d, want %d", what, desc, i, val(p->dtype, y, (size_t)i), want[i]);
    run_case(dev, "tiny", p, (const uint8_t *)x, 0, 0); /* and the reference agrees */
}

static void test_hand(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    /* maxpool, all negative, zp 0, 2x2 s1 pad 1: padding never wins */
    const int8_t xm[4] = {-5, -3, -7, -9};
    tsr_pool_params_t p = basic(TSR_POOL_MAX, 1, 1, 2, 2, 2, 1, 1);
    const int wm[9] = {-5, -3, -3, -5, -3, -3, -7, -7, -9};
    expect_values(dev, &p, xm, wm, 9, "maxpool negative with padding");
    /* int8 -128 everywhere with padding: still -128 */
    const int8_t xmin[4] = {-128, -128, -128, -128};
    const int wmin[9] = {-128, -128, -128, -128, -128, -128, -128, -128, -128};
    expect_values(dev, &p, xmin, wmin, 9, "maxpool type minimum");
    /* avgpool 2x2 s2 no pad, ties away from zero: sums 2 (0.5 -> 1), -2 (-0.5 -> -1), -1 (-0.25 -> 0), 6 (1.5 -> 2) */
    const int8_t xa[16] = {1, 1, -1, -1, 0, 0, 0, 0, -1, 0, 3, 3, 0, 0, 0, 0};
    p = basic(TSR_POOL_AVG, 1, 1, 4, 4, 2, 2, 0);
    const int wa[4] = {1, -1, 0, 2};
    expect_values(dev, &p, xa, wa, 4, "avgpool ties");
    /* 3x3 s1 pad 1 on 2x2 (every window is the whole input plus padding):
     * count_include_pad 0: sum 4+5+6+8 = 23 / 4 = 5.75 -> 6; with zp 3 and
     * count_include_pad 1: (23 + 5*3) / 9 = 4.22 -> 4 */
    const int8_t xc[4] = {4, 5, 6, 8};
    p = basic(TSR_POOL_AVG, 1, 1, 2, 2, 3, 1, 1);
    const int wc0[4] = {6, 6, 6, 6};
    expect_values(dev, &p, xc, wc0, 4, "avgpool count_include_pad 0");
    p.count_include_pad = 1;
    p.zp = 3;
    const int wc1[4] = {4, 4, 4, 4};
    expect_values(dev, &p, xc, wc1, 4, "avgpool count_include_pad 1");
    /* 3x3 (count 9) ties cannot occur; -13/9 = -1.44 -> -1, -14/9 = -1.56 -> -2 */
    const int8_t x9[18] = {-13, 0, 0, 0, 0, 0, 0, 0, 0, -14, 0, 0, 0, 0, 0, 0, 0, 0};
    p = basic(TSR_POOL_AVG, 1, 2, 3, 3, 3, 1, 0);
    const int w9[2] = {-1, -2};
    expect_values(dev, &p, x9, w9, 2, "avgpool count 9");
    /* global, 3x2 = count 6: sum 3 -> 0.5 -> 1, sum -3 -> -1, sum -9 -> -1.5 -> -2 */
    const int8_t xg[18] = {3, 0, 0, 0, 0, 0, -3, 0, 0, 0, 0, 0, -9, 0, 0, 0, 0, 0};
    p = basic(TSR_POOL_GLOBAL_AVG, 1, 3, 3, 2, 0, 0, 0);
    const int wg[3] = {1, -1, -2};
    expect_values(dev, &p, xg, wg, 3, "global ties");
    /* uint8 zp 0 global 1x1x2x1 {255, 254}: 254.5 -> 255 */
    const int8_t xu[2] = {(int8_t)255, (int8_t)254};
    p = basic(TSR_POOL_GLOBAL_AVG, 1, 1, 2, 1, 0, 0, 0);
    p.dtype = TSR_DT_UINT8;
    const int wu[1] = {255};
    expect_values(dev, &p, xu, wu, 1, "uint8 global");
    /* uint8 maxpool, values 0 with padding: 0 (raw), and uint8 200 > 100 */
    const int8_t xu2[4] = {0, 0, (int8_t)200, 100};
    p = basic(TSR_POOL_MAX, 1, 1, 2, 2, 2, 1, 1);
    p.dtype = TSR_DT_UINT8;
    p.zp = 128;
    const int wu2[9] = {0, 0, 0, 200, 200, 100, 200, 200, 100};
    expect_values(dev, &p, xu2, wu2, 9, "uint8 maxpool");
    tsr_device_close(dev);
}

/* Border counts, large kernels, extreme zero points, chunked global pools,
 * long rows and many channels on tiny; the one-call API. */
static void test_edges(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    tsr_pool_params_t p;
    for (int dt = 0; dt < 2; dt++)
        for (int cip = 0; cip < 2; cip++) {
            p = basic(TSR_POOL_AVG, 1, 5, 9, 8, 3, 2, 1);
            p.pad_bottom = 2;
            p.pad_right = 0;
            p.count_include_pad = cip;
            p.dtype = dt ? TSR_DT_UINT8 : TSR_DT_INT8;
            p.zp = dt ? 255 : -128;
            run_case(dev, "tiny", &p, NULL, 100 + (uint64_t)(dt * 2 + cip), 0);
            p = basic(TSR_POOL_AVG, 1, 3, 6, 3, 7, 1, 6); /* 7x7 pad 6: many border counts */
            p.count_include_pad = cip;
            p.dtype = dt ? TSR_DT_UINT8 : TSR_DT_INT8;
            run_case(dev, "tiny", &p, NULL, 110 + (uint64_t)(dt * 2 + cip), 0);
        }
    /* global over a plane larger than tiny's input buffer (chunks) */
    p = basic(TSR_POOL_GLOBAL_AVG, 2, 9, 13, 11, 0, 0, 0);
    run_case(dev, "tiny", &p, NULL, 120, 1);
    p.dtype = TSR_DT_UINT8;
    p.zp = 7;
    run_case(dev, "tiny", &p, NULL, 121, 0);
    /* the largest count the plan proves (65535, uint8: sums up to 255 * 65535),
     * and a plane longer than a LOAD's x_stride (2^16, rshr only) */
    p = basic(TSR_POOL_GLOBAL_AVG, 1, 5, 255, 257, 0, 0, 0);
    p.dtype = TSR_DT_UINT8;
    run_case(dev, "tiny", &p, NULL, 129, 1);
    p = basic(TSR_POOL_GLOBAL_AVG, 1, 6, 256, 256, 0, 0, 0);
    run_case(dev, "tiny", &p, NULL, 130, 1);
    /* power-of-two global (rshr only) and count 1 */
    p = basic(TSR_POOL_GLOBAL_AVG, 1, 6, 4, 4, 0, 0, 0);
    run_case(dev, "tiny", &p, NULL, 122, 0);
    p = basic(TSR_POOL_GLOBAL_AVG, 1, 6, 1, 1, 0, 0, 0);
    run_case(dev, "tiny", &p, NULL, 123, 0);
    /* many channels, strides larger than the kernel, 1xK and Kx1 */
    p = basic(TSR_POOL_MAX, 1, 37, 7, 9, 2, 3, 1);
    run_case(dev, "tiny", &p, NULL, 124, 0);
    p = basic(TSR_POOL_MAX, 2, 5, 6, 20, 1, 1, 0);
    p.kw = 5;
    p.pad_left = 4;
    p.pad_right = 2;
    run_case(dev, "tiny", &p, NULL, 125, 0);
    p = basic(TSR_POOL_AVG, 1, 5, 11, 5, 1, 2, 0);
    p.kh = 6;
    p.pad_top = 5;
    run_case(dev, "tiny", &p, NULL, 126, 0);
    /* kernels larger than half of tiny's input (9x9) or accumulator buffer
     * (11x11): single-buffered rotations; rows longer than the input
     * buffer: column tiles */
    g_single = g_coltile = 0;
    p = basic(TSR_POOL_MAX, 1, 6, 12, 10, 9, 2, 4);
    run_case(dev, "tiny", &p, NULL, 131, 1);
    p = basic(TSR_POOL_AVG, 1, 6, 12, 10, 9, 1, 3);
    run_case(dev, "tiny", &p, NULL, 132, 1);
    p = basic(TSR_POOL_MAX, 2, 5, 11, 11, 11, 1, 0);
    p.dtype = TSR_DT_UINT8;
    run_case(dev, "tiny", &p, NULL, 133, 1);
    p = basic(TSR_POOL_MAX, 1, 9, 5, 150, 3, 2, 1);
    run_case(dev, "tiny", &p, NULL, 134, 1);
    p = basic(TSR_POOL_AVG, 1, 9, 6, 137, 3, 1, 1);
    run_case(dev, "tiny", &p, NULL, 135, 1);
    p = basic(TSR_POOL_AVG, 1, 3, 4, 200, 1, 1, 0);
    run_case(dev, "tiny", &p, NULL, 136, 1);
    assert_true(g_single >= 3);
    assert_true(g_coltile >= 3);
    /* the one-call API */
    g_one_call = 1;
    p = basic(TSR_POOL_AVG, 1, 6, 6, 6, 3, 1, 1);
    run_case(dev, "tiny", &p, NULL, 127, 0);
    p = basic(TSR_POOL_GLOBAL_AVG, 1, 6, 5, 5, 0, 0, 0);
    run_case(dev, "tiny", &p, NULL, 128, 0);
    g_one_call = 0;
    tsr_device_close(dev);
}

static void expect_err(tsr_device_t *dev, const tsr_pool_params_t *p, const char *word)
{
    tsr_pool_plan_t pl;
    int rc = tsr_pool_plan(dev, p, &pl);
    if (rc != TSR_EINVAL)
        fail_msg("want EINVAL (\"%s\"), got %s", word, tsr_errname(rc));
    if (!strstr(tsr_errmsg(), word))
        fail_msg("message \"%s\" lacks \"%s\"", tsr_errmsg(), word);
}

static void test_bad_params(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    tsr_pool_params_t p;
#define BAD(stmt, word)                                                                                            \
    do {                                                                                                           \
        p = basic(TSR_POOL_AVG, 1, 4, 5, 5, 3, 1, 1);                                                              \
        stmt;                                                                                                      \
        expect_err(dev, &p, word);                                                                                 \
    } while (0)
    BAD(p.kind = 7, "kind");
    BAD(p.n = 0, "positive");
    BAD(p.w = -3, "positive");
    BAD(p.kh = 0, "kernel");
    BAD(p.stride_w = 0, "stride");
    BAD(p.pad_left = -1, "padding");
    BAD(p.pad_top = 3, "smaller than the kernel");
    BAD((p.kh = p.kw = 20, p.h = p.w = 40, p.pad_top = 16), "more than 15");
    BAD((p.h = 1, p.pad_top = p.pad_bottom = 0), "larger than the padded input");
    BAD(p.count_include_pad = 2, "count_include_pad");
    BAD(p.dtype = TSR_DT_INT32, "dtype");
    BAD(p.zp = 128, "zero point");
    BAD((p.dtype = TSR_DT_UINT8, p.zp = -1), "zero point");
    BAD((p.kind = TSR_POOL_GLOBAL_AVG, p.h = 0), "positive");
    BAD((p.kind = TSR_POOL_MAX, p.kh = p.kw = p.h = p.w = 13), "no tiling fits"); /* 169 acc rows > tiny's 128 */
    BAD((p.kh = p.kw = 17, p.h = p.w = 17, p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 0), "no tiling fits");
    BAD((p.kind = TSR_POOL_GLOBAL_AVG, p.h = 300, p.w = 301, p.c = 1), "not supported");
#undef BAD
    assert_int_equal(tsr_pool_check(NULL, NULL, NULL), TSR_EINVAL);
    tsr_pool_plan_t pl;
    assert_int_equal(tsr_pool_plan(dev, NULL, &pl), TSR_EINVAL);
    p = basic(TSR_POOL_MAX, 1, 4, 5, 5, 3, 1, 1);
    assert_int_equal(tsr_pool_run(dev, &p, NULL, (void *)""), TSR_EINVAL);
    assert_int_equal(tsr_pool_run(NULL, &p, "", (void *)""), TSR_EINVAL);
    tsr_device_close(dev);
    dev = open_dev("rect");
    expect_err(dev, &p, "BLOCK_IN == BLOCK_OUT");
    tsr_device_close(dev);
}

/* ResNet-18's pools on default: plans, and runs with cycle counts on timed
 * backends (figures vs. the DRAM bound at the bus width). */
static void figure(tsr_device_t *dev, const tsr_pool_params_t *p, const char *name)
{
    tsr_pool_plan_t pl;
    if (tsr_pool_plan(dev, p, &pl))
        fail_msg("%s: %s", name, tsr_errmsg());
    const tsr_config_t *c = tsr_device_config(dev);
    uint64_t comp = pl.x_bytes + pl.y_bytes;
    printf("  %s: %s, toh %d tow %d tco %d, %d tiles x %d chunks, buffers %d/%d, %zu insns, %llu gemm + %llu alu ops, DRAM "
           "%llu B (compulsory %llu B, bound %llu cycles)\n",
           name, pl.sep ? "separable" : "direct", pl.toh, pl.tow, pl.tco, pl.tiles, pl.chunks, pl.nbuf_inp, pl.nbuf_acc, pl.ninsns,
           (unsigned long long)pl.gemm_ops, (unsigned long long)pl.alu_ops, (unsigned long long)pl.dram_bytes,
           (unsigned long long)comp, (unsigned long long)(comp / (uint64_t)(c->dram_bus_width / 8)));
    tsr_pool_plan_free(dev, &pl);
    uint64_t seed = 7;
    tsr_reset_counters(dev);
    run_case(dev, "default", p, NULL, seed, 0);
    tsr_counters_t ct;
    if (!tsr_read_counters(dev, &ct) && ct.cycles)
        printf("    %s: %llu cycles on %s (%.2fx the DRAM bound), %llu cycles with GEMM and ALU both issuing\n", name,
               (unsigned long long)ct.cycles, backend(),
               (double)ct.cycles / (double)(comp / (uint64_t)(c->dram_bus_width / 8)),
               (unsigned long long)(ct.has_hw ? ct.hw[TSR_CNT_DUAL_OPS] : 0));
}

static void test_resnet(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("default");
    tsr_pool_params_t p = basic(TSR_POOL_MAX, 1, 64, 112, 112, 3, 2, 1);
    figure(dev, &p, "maxpool 1x64x112x112 3x3 s2 p1");
    p = basic(TSR_POOL_GLOBAL_AVG, 1, 512, 7, 7, 0, 0, 0);
    figure(dev, &p, "global avgpool 1x512x7x7");
    p.dtype = TSR_DT_UINT8;
    p.zp = 3;
    run_case(dev, "default", &p, NULL, 8, 0);
    for (int cip = 0; cip < 2; cip++) { /* 7x7 pad 6 on 7x7: counts 1..49 */
        p = basic(TSR_POOL_AVG, 1, 20, 7, 7, 7, 1, 6);
        p.count_include_pad = cip;
        p.dtype = cip ? TSR_DT_UINT8 : TSR_DT_INT8;
        p.zp = cip ? 200 : -100;
        run_case(dev, "default", &p, NULL, 9 + (uint64_t)cip, 1);
    }
    p = basic(TSR_POOL_AVG, 1, 64, 56, 56, 3, 1, 1); /* a typical cip=0 border pool */
    figure(dev, &p, "avgpool 1x64x56x56 3x3 s1 p1 (count_include_pad 0)");
    tsr_device_close(dev);
}

/* The one cost model (tsr_cost.h): the closed form by hand, and the
 * stream estimate of a planned pool: at least the stream's DRAM time, and
 * above any limit its lower bounds already pass; a stream whose tokens do
 * not balance is priced out. */
static void test_cost_model(void **state)
{
    (void)state;
    /* max(100, 40) + 40/4 + 5*4 + 3 + 2 + 2*10 */
    tsr_cost_terms_t t = {.mem = 100, .comp = 40, .fill = -1, .serial = {3, 2}, .steps = 4, .per_step = 5,
                          .insns = 10, .per_insn = 2};
    assert_true(tsr_cost_pipelined(&t) == 155.0);
    /* a given fill: max(10, 40) + 7 */
    tsr_cost_terms_t u = {.mem = 10, .comp = 40, .fill = 7, .steps = 2};
    assert_true(tsr_cost_pipelined(&u) == 47.0);

    tsr_device_t *dev = tsr_test_open("default", 1);
    const tsr_config_t *c = tsr_device_config(dev);
    /* the default preset's 64-bit DRAM port moves 8 bytes a cycle (configs/default.json, pynq) */
    assert_true(tsr_cost_dram_bw(c) == 8.0);
    tsr_pool_params_t p = {.kind = TSR_POOL_MAX, .n = 1, .c = 64, .h = 28, .w = 28, .kh = 3, .kw = 3, .stride_h = 2,
                           .stride_w = 2, .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1,
                           .dtype = TSR_DT_INT8, .zp = 0};
    tsr_pool_plan_t pl;
    if (tsr_pool_plan(dev, &p, &pl))
        fail_msg("pool plan: %s", tsr_errmsg());
    const double est = tsr_cost_stream(c, pl.insns, pl.ninsns, NULL, INFINITY);
    if (!(est >= (double)pl.dram_bytes / 8.0 && est < 1e29))
        fail_msg("estimate %.1f cycles below the stream's DRAM time (%llu B) or priced out", est,
                 (unsigned long long)pl.dram_bytes);
    assert_true(tsr_cost_stream(c, pl.insns, pl.ninsns, NULL, 1.0) > 1.0);
    tsr_pool_plan_free(dev, &pl);
    /* a GEMM waiting for a load that never signals */
    tsr_insn_t gemm;
    memset(&gemm, 0, sizeof gemm);
    gemm.opcode = TSR_OP_GEMM;
    gemm.pop_prev = 1;
    assert_true(tsr_cost_stream(c, &gemm, 1, NULL, INFINITY) >= 1e30);
    assert_true(tsr_cost_stream(c, NULL, 0, NULL, INFINITY) == 0.0);
    tsr_device_close(dev);
}

int main(void)
{
    printf("test_pool: backend %s, base seed %llu (TSR_POOL_SEED)\n", backend(), (unsigned long long)base_seed());
    const char *filter = getenv("TSR_POOL_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_params),     cmocka_unit_test(test_hand),
        cmocka_unit_test(test_cost_model),
        cmocka_unit_test(test_edges),          cmocka_unit_test(test_random_tiny),
        cmocka_unit_test(test_random_default), cmocka_unit_test(test_random_large),
        cmocka_unit_test(test_random_batch2),  cmocka_unit_test(test_resnet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
