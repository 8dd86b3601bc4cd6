/*
 * test_grad: the backward operators (jit/tsr_grad.h) against the plain-C
 * reference written from their formulas (tests/tsr_gradref.c), bit for
 * bit, with the stats they report: device_macs is the formula's count of
 * multiply-accumulates, host_macs only the zero-point fold of dW (one
 * product per output channel when x_zp differs from the dtype's offset).
 *
 * The forward's exact sums (tsr_grad_*_fwd: a training forward on weights
 * wider than int8, one part at a time) on the same cases.
 *
 * Random shapes (sizes not multiples of the blocks), strides 1-2, pads,
 * kernels 1/3/5, depthwise, x int8/uint8 with random zero points, dy over
 * the whole int8 range (-128 included), and the extremes (every product
 * -128 * -128, the longest reduction that still fits int32: four byte
 * planes with the sign bit set). Configs: default (GEMM depthwise mode),
 * tiny, and default with DEPTHWISE 0 (diagonal weight rows). Bad inputs:
 * each refused parameter gives its message, nothing allocated on the
 * device and nothing run.
 *
 * On backend rtl (test_grad_rtl) only test_rtl_vs_fsim runs: one dense
 * dx/dw and a strided and a depthwise conv dx/dw (each lowering) on the tiny config, the RTL's int32
 * results equal fsim's and the reference's. TSR_GRAD_SEED overrides the
 * seed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_grad.h"
#include "tsr_gradref.h"
#include "tsr_testenv.h"

static uint64_t base_seed(void) { return tsr_test_seed("TSR_GRAD_SEED", 20261207u); }
static int rnd(uint64_t *s, int lo, int hi) { return tsr_test_rnd(s, lo, hi); }
static int is_rtl(void) { return !strcmp(tsr_test_backend(), "rtl"); }

/* A device on backend for a preset, optionally with DEPTHWISE set to dw (dw < 0: the preset as it is). */
static tsr_device_t *open_cfg(const char *backend, const char *preset, int dw)
{
    tsr_config_t cfg;
    if (dw >= 0)
        tsr_test_preset_with(preset, "DEPTHWISE", dw, &cfg);
    else if (tsr_test_config(preset, &cfg))
        fail_msg("config %s: %s", preset, tsr_errmsg());
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = base_seed() | 1};
    if (tsr_device_open(backend, &cfg, &o, &dev))
        fail_msg("open %s/%s: %s", backend, preset, tsr_errmsg());
    return dev;
}

static void fill8(uint64_t *s, int8_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (int8_t)rnd(s, -128, 127);
}

static void fill_small(uint64_t *s, int8_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (int8_t)(rnd(s, 0, 3) ? 0 : rnd(s, -2, 2));
}

static void fillx(uint64_t *s, uint8_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (uint8_t)rnd(s, 0, 255);
}

static void cmp32(const char *what, const int32_t *got, const int32_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s: element %zu is %d, reference %d", what, i, got[i], want[i]);
}

/* ---------------------------------------------------------------- dense */

static void dense_case(tsr_device_t *dev, const char *cname, uint64_t *s, int n, int k, int m, int dtu, int32_t zp,
                       int extreme)
{
    int8_t *dy = malloc((size_t)n * m), *w = malloc((size_t)m * k);
    uint8_t *x = malloc((size_t)n * k);
    const size_t nk = (size_t)n * k, mk = (size_t)m * k, nm = (size_t)n * m;
    const size_t big = nk > mk ? (nk > nm ? nk : nm) : (mk > nm ? mk : nm); /* (dx, dw and the forward's) */
    int32_t *got = malloc(sizeof(int32_t) * big), *want = malloc(sizeof(int32_t) * big);
    assert_true(dy && w && x && got && want);
    if (extreme == 1) {
        memset(dy, 0x80, (size_t)n * m);
        memset(w, 0x80, (size_t)m * k);
        memset(x, dtu ? 0 : 0x80, (size_t)n * k);
    } else if (extreme == 2) { /* small values: sums of one or two bytes (fewer planes stored) */
        fill_small(s, dy, (size_t)n * m);
        fill_small(s, w, (size_t)m * k);
        fill_small(s, (int8_t *)x, (size_t)n * k);
        if (dtu)
            for (size_t i = 0; i < (size_t)n * k; i++)
                x[i] = (uint8_t)(x[i] + 128);
    } else {
        fill8(s, dy, (size_t)n * m);
        fill8(s, w, (size_t)m * k);
        fillx(s, x, (size_t)n * k);
    }
    char what[160];
    tsr_grad_stats_t st = {0, 0, 0};
    snprintf(what, sizeof what, "%s dense dx n %d k %d m %d", cname, n, k, m);
    if (tsr_grad_dense_dx(dev, n, k, m, dy, w, got, &st))
        fail_msg("%s: %s", what, tsr_errmsg());
    gradref_dense_dx(n, k, m, dy, w, want);
    cmp32(what, got, want, (size_t)n * k);
    assert_int_equal(st.device_macs, (uint64_t)n * k * m);
    assert_int_equal(st.host_macs, 0);

    const tsr_dtype_e dt = dtu ? TSR_DT_UINT8 : TSR_DT_INT8;
    snprintf(what, sizeof what, "%s dense dw n %d k %d m %d %s zp %d", cname, n, k, m, dtu ? "u8" : "i8", zp);
    memset(&st, 0, sizeof st);
    if (tsr_grad_dense_dw(dev, n, k, m, dy, x, dt, zp, got, &st))
        fail_msg("%s: %s", what, tsr_errmsg());
    gradref_dense_dw(n, k, m, dy, x, dtu, zp, want);
    cmp32(what, got, want, (size_t)m * k);
    assert_int_equal(st.device_macs, (uint64_t)n * k * m);
    assert_int_equal(st.host_macs, zp == (dtu ? 128 : 0) ? 0 : (uint64_t)m);

    snprintf(what, sizeof what, "%s dense fwd n %d k %d m %d %s zp %d", cname, n, k, m, dtu ? "u8" : "i8", zp);
    memset(&st, 0, sizeof st);
    if (tsr_grad_dense_fwd(dev, n, k, m, x, dt, zp, w, got, &st))
        fail_msg("%s: %s", what, tsr_errmsg());
    gradref_dense_fwd(n, k, m, x, dtu, zp, w, want);
    cmp32(what, got, want, (size_t)n * m);
    assert_int_equal(st.device_macs, (uint64_t)n * k * m);
    assert_int_equal(st.host_macs, zp == (dtu ? 128 : 0) ? 0 : (uint64_t)m);
    free(dy);
    free(w);
    free(x);
    free(got);
    free(want);
}

static void dense_random(const char *preset, int dwk, int cases)
{
    tsr_device_t *dev = open_cfg("fsim", preset, dwk);
    uint64_t s = base_seed() ^ (uint64_t)(uintptr_t)preset[0] ^ (uint64_t)(dwk + 7);
    for (int i = 0; i < cases; i++) {
        const int dtu = rnd(&s, 0, 1);
        const int32_t zp = rnd(&s, 0, 3) == 0 ? (dtu ? 128 : 0) : (dtu ? rnd(&s, 0, 255) : rnd(&s, -128, 127));
        dense_case(dev, preset, &s, rnd(&s, 1, 40), rnd(&s, 1, 70), rnd(&s, 1, 40), dtu, zp, i % 4 == 3 ? 2 : 0);
    }
    tsr_device_close(dev);
}

static void test_dense_default(void **state)
{
    (void)state;
    dense_random("default", -1, 25);
}

static void test_dense_tiny(void **state)
{
    (void)state;
    dense_random("tiny", -1, 25);
}

/* The longest reductions whose sums still fit int32, all products -128 * -128
 * (dx: 2^31 - 2^14 - ... with the top plane's sign bit clear; dw with
 * x - x_zp = -255: the largest magnitude) and a few-term one (one plane). */
static void test_dense_extremes(void **state)
{
    (void)state;
    tsr_device_t *dev = open_cfg("fsim", "default", -1);
    uint64_t s = base_seed();
    dense_case(dev, "default", &s, 1, 3, INT32_MAX / 16384, 0, 0, 1);
    dense_case(dev, "default", &s, INT32_MAX / (128 * 255), 2, 1, 1, 255, 1);
    dense_case(dev, "default", &s, 2, 1, 1, 0, 127, 1);
    dense_case(dev, "default", &s, 1, INT32_MAX / (128 * 255), 2, 1, 255, 1); /* the forward's longest */
    tsr_device_close(dev);
}

/* ----------------------------------------------------------------- conv */

static void conv_case(tsr_device_t *dev, const char *cname, uint64_t *s, const tsr_grad_conv_t *p, int dtu, int32_t zp,
                      int small)
{
    const gradref_conv_t r = {p->n, p->c_in, p->h, p->w, p->c_out, p->kh, p->kw, p->stride_h, p->stride_w,
                              p->pad_top, p->pad_left, p->pad_bottom, p->pad_right, p->groups};
    const int oh = gradref_conv_oh(&r), ow = gradref_conv_ow(&r);
    const size_t nx = (size_t)p->n * p->c_in * p->h * p->w, ny = (size_t)p->n * p->c_out * oh * ow;
    const size_t nw = (size_t)p->c_out * (p->c_in / p->groups) * p->kh * p->kw;
    int8_t *dy = malloc(ny), *w = malloc(nw);
    uint8_t *x = malloc(nx);
    const size_t nmax = nx > nw ? (nx > ny ? nx : ny) : (nw > ny ? nw : ny);
    int32_t *got = malloc(sizeof(int32_t) * nmax), *want = malloc(sizeof(int32_t) * nmax);
    assert_true(dy && w && x && got && want);
    if (small) {
        fill_small(s, dy, ny);
        fill_small(s, w, nw);
        fill_small(s, (int8_t *)x, nx);
        for (size_t i = 0; i < nx; i++)
            x[i] = (uint8_t)(x[i] + zp); /* x - x_zp small */
    } else {
        fill8(s, dy, ny);
        fill8(s, w, nw);
        fillx(s, x, nx);
    }
    char what[256];
    snprintf(what, sizeof what, "%s conv n %d c_in %d %dx%d c_out %d k %dx%d s %d,%d pad %d,%d,%d,%d g %d", cname,
             p->n, p->c_in, p->h, p->w, p->c_out, p->kh, p->kw, p->stride_h, p->stride_w, p->pad_top, p->pad_left,
             p->pad_bottom, p->pad_right, p->groups);
    const uint64_t macs = gradref_conv_macs(&r);
    tsr_grad_stats_t st = {0, 0, 0};
    if (tsr_grad_conv_dx(dev, p, dy, w, got, &st))
        fail_msg("%s dx: %s", what, tsr_errmsg());
    gradref_conv_dx(&r, dy, w, want);
    cmp32(what, got, want, nx);
    if (st.device_macs != macs || st.host_macs)
        fail_msg("%s dx: device_macs %llu (formula %llu), host_macs %llu", what, (unsigned long long)st.device_macs,
                 (unsigned long long)macs, (unsigned long long)st.host_macs);
    memset(&st, 0, sizeof st);
    const tsr_dtype_e dt = dtu ? TSR_DT_UINT8 : TSR_DT_INT8;
    if (tsr_grad_conv_dw(dev, p, dy, x, dt, zp, got, &st))
        fail_msg("%s dw: %s", what, tsr_errmsg());
    gradref_conv_dw(&r, dy, x, dtu, zp, want);
    cmp32(what, got, want, nw);
    const uint64_t host = zp == (dtu ? 128 : 0) ? 0 : (uint64_t)p->c_out;
    if (st.device_macs != macs || st.host_macs != host)
        fail_msg("%s dw (%s zp %d): device_macs %llu (formula %llu), host_macs %llu (want %llu)", what,
                 dtu ? "u8" : "i8", zp, (unsigned long long)st.device_macs, (unsigned long long)macs,
                 (unsigned long long)st.host_macs, (unsigned long long)host);
    memset(&st, 0, sizeof st);
    if (tsr_grad_conv_fwd(dev, p, 0, x, dt, zp, w, got, &st))
        fail_msg("%s fwd: %s", what, tsr_errmsg());
    gradref_conv_fwd(&r, x, dtu, zp, w, want);
    cmp32(what, got, want, ny);
    if (st.device_macs != macs || st.host_macs != (macs ? host : 0)) /* (every tap on padding: nothing run) */
        fail_msg("%s fwd (%s zp %d): device_macs %llu (formula %llu), host_macs %llu (want %llu)", what,
                 dtu ? "u8" : "i8", zp, (unsigned long long)st.device_macs, (unsigned long long)macs,
                 (unsigned long long)st.host_macs, (unsigned long long)host);
    free(dy);
    free(w);
    free(x);
    free(got);
    free(want);
}

static void conv_random(const char *preset, int dwk, int cases)
{
    tsr_device_t *dev = open_cfg("fsim", preset, dwk);
    uint64_t s = base_seed() ^ 0xc0 ^ (uint64_t)(uintptr_t)preset[0] ^ (uint64_t)(dwk + 7) * 131;
    for (int i = 0; i < cases; i++) {
        tsr_grad_conv_t p;
        memset(&p, 0, sizeof p);
        const int ks[3] = {1, 3, 5};
        p.kh = ks[rnd(&s, 0, 2)];
        p.kw = rnd(&s, 0, 3) ? p.kh : ks[rnd(&s, 0, 2)];
        p.stride_h = rnd(&s, 1, 2);
        p.stride_w = rnd(&s, 0, 3) ? p.stride_h : rnd(&s, 1, 2);
        p.pad_top = rnd(&s, 0, p.kh / 2 + 1);
        p.pad_bottom = rnd(&s, 0, p.kh / 2);
        p.pad_left = rnd(&s, 0, p.kw / 2 + 1);
        p.pad_right = rnd(&s, 0, p.kw / 2);
        p.n = rnd(&s, 1, 3);
        p.h = rnd(&s, p.kh > p.pad_top + p.pad_bottom ? p.kh - p.pad_top - p.pad_bottom : 1, 11);
        p.w = rnd(&s, p.kw > p.pad_left + p.pad_right ? p.kw - p.pad_left - p.pad_right : 1, 11);
        if (i % 3 == 2) { /* depthwise */
            p.c_in = p.c_out = p.groups = rnd(&s, 1, 37);
        } else {
            p.c_in = rnd(&s, 1, 20);
            p.c_out = rnd(&s, 1, 24);
            p.groups = 1;
        }
        const int dtu = rnd(&s, 0, 1);
        const int32_t zp = rnd(&s, 0, 3) == 0 ? (dtu ? 128 : 0) : (dtu ? rnd(&s, 0, 255) : rnd(&s, -128, 127));
        conv_case(dev, preset, &s, &p, dtu, zp, i % 4 == 3);
    }
    tsr_device_close(dev);
}

/* The random convs three ways: groups-1 dX/dW lowered as the estimate picks,
 * gathered on chip, and as the im2col GEMM (TESSERA_GRAD_LOWERING). */
static void conv_random3(const char *preset, int dwk, int cases)
{
    const char *modes[3] = {NULL, "gather", "im2col"};
    for (int i = 0; i < 3; i++) {
        if (modes[i])
            setenv("TESSERA_GRAD_LOWERING", modes[i], 1);
        else
            unsetenv("TESSERA_GRAD_LOWERING");
        conv_random(preset, dwk, cases);
    }
    unsetenv("TESSERA_GRAD_LOWERING");
}

static void test_conv_default(void **state)
{
    (void)state;
    conv_random3("default", -1, 30);
}

static void test_conv_tiny(void **state)
{
    (void)state;
    conv_random3("tiny", -1, 30);
}

static void test_conv_default_nodw(void **state)
{
    (void)state;
    conv_random3("default", 0, 30);
    dense_random("default", 0, 5);
}

/* Larger shapes on default: the digits CNN's layers at batch 32 (conv1 1->16
 * and conv2 16->32, 3x3 pad 1 on 8x8; fc 512->10), a strided 5x5, a
 * depthwise conv whose dW reduction (N*OH*OW = 20000) runs in parts, and a
 * dense of several tiles and reduction chunks on tiny. */
static void test_larger(void **state)
{
    (void)state;
    tsr_device_t *dev = open_cfg("fsim", "default", -1);
    uint64_t s = base_seed() ^ 0x1a;
    const tsr_grad_conv_t cps[] = {{32, 1, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1},
                                   {32, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},
                                   {3, 20, 17, 13, 40, 5, 5, 2, 2, 2, 2, 2, 2, 1},
                                   {2, 3, 100, 100, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3},
                                   /* the forward's skipped taps: a 3x3 conv on a 1x1 input (its centre tap, the
                                      zoo ResNet-18's last block), on a row one tap of which meets it, and a
                                      strided one whose middle tap meets only padding */
                                   {16, 64, 1, 1, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1},
                                   {3, 4, 1, 5, 7, 3, 3, 1, 1, 2, 0, 0, 2, 1},
                                   {2, 5, 1, 1, 6, 3, 3, 2, 2, 2, 2, 2, 2, 1}};
    for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++)
        conv_case(dev, "default", &s, &cps[i], (int)(i & 1), (int32_t)(i & 1 ? 77 : -9), 0);
    dense_case(dev, "default", &s, 32, 512, 10, 1, 0, 0);
    dense_case(dev, "default", &s, 300, 700, 50, 0, 5, 0);
    tsr_device_close(dev);
    dev = open_cfg("fsim", "tiny", -1);
    dense_case(dev, "tiny", &s, 37, 300, 45, 1, 200, 0);
    tsr_device_close(dev);
}

/* ------------------------------------------------------------ bad input */

/* The call's message names `needle`; the device has not been touched: the
 * next allocation lands where the probe did, and nothing ran. */
#define BAD(call, needle)                                                                                              \
    do {                                                                                                               \
        uint64_t a0 = 0, a1 = 0;                                                                                       \
        tsr_counters_t k0, k1;                                                                                         \
        assert_int_equal(tsr_mem_alloc(dev, 4096, &a0), TSR_OK);                                                       \
        assert_int_equal(tsr_mem_free(dev, a0), TSR_OK);                                                               \
        assert_int_equal(tsr_read_counters(dev, &k0), TSR_OK);                                                         \
        tsr_err_clear();                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ == TSR_OK || !strstr(tsr_errmsg(), needle) || strchr(tsr_errmsg(), '\n'))                              \
            fail_msg("%s: rc %d, message \"%s\", wanted one line naming \"%s\"", #call, rc_, tsr_errmsg(), needle);   \
        assert_int_equal(tsr_read_counters(dev, &k1), TSR_OK);                                                         \
        assert_int_equal(k1.insns[TSR_OP_FINISH], k0.insns[TSR_OP_FINISH]);                                            \
        assert_int_equal(tsr_mem_alloc(dev, 4096, &a1), TSR_OK);                                                       \
        assert_int_equal(a1, a0);                                                                                      \
        assert_int_equal(tsr_mem_free(dev, a1), TSR_OK);                                                               \
    } while (0)

static void test_bad_dense(void **state)
{
    (void)state;
    tsr_device_t *dev = open_cfg("fsim", "tiny", -1);
    int8_t dy[64] = {0}, w[64] = {0};
    uint8_t x[64] = {0};
    int32_t out[64];
    tsr_grad_stats_t st = {0, 0, 0};
    BAD(tsr_grad_dense_dx(dev, 0, 2, 2, dy, w, out, &st), "n = 0");
    BAD(tsr_grad_dense_dx(dev, 2, -1, 2, dy, w, out, &st), "k = -1");
    BAD(tsr_grad_dense_dx(dev, 2, 2, 0, dy, w, out, &st), "m = 0");
    BAD(tsr_grad_dense_dx(dev, 2, 2, 2, NULL, w, out, &st), "dy");
    BAD(tsr_grad_dense_dx(dev, 2, 2, 2, dy, NULL, out, &st), "w");
    BAD(tsr_grad_dense_dx(dev, 2, 2, 2, dy, w, NULL, &st), "output");
    BAD(tsr_grad_dense_dx(dev, 1, 1, INT32_MAX / 16384 + 1, dy, w, out, &st), "overflow int32");
    BAD(tsr_grad_dense_dw(dev, 2, 2, 2, dy, x, (tsr_dtype_e)99, 0, out, &st), "x_dtype");
    BAD(tsr_grad_dense_dw(dev, 2, 2, 2, dy, x, TSR_DT_UINT8, 256, out, &st), "x_zp 256");
    BAD(tsr_grad_dense_dw(dev, 2, 2, 2, dy, x, TSR_DT_INT8, -129, out, &st), "x_zp -129");
    BAD(tsr_grad_dense_dw(dev, 2, 2, 2, dy, NULL, TSR_DT_INT8, 0, out, &st), "x");
    BAD(tsr_grad_dense_dw(dev, INT32_MAX / (128 * 255) + 1, 1, 1, dy, x, TSR_DT_INT8, 0, out, &st), "overflow int32");
    BAD(tsr_grad_dense_dx(dev, 1 << 16, 1 << 15, 2, dy, w, out, &st), "too large");
    /* within the host limits, but 2^26 one-element rows pad to a GiB of packed 16x16 blocks on default */
    tsr_device_close(dev);
    dev = open_cfg("fsim", "default", -1);
    BAD(tsr_grad_dense_dx(dev, 1 << 26, 1, 1, dy, w, out, &st), "device memory");
    assert_int_equal(tsr_grad_dense_dx(NULL, 2, 2, 2, dy, w, out, &st), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "device"));
    tsr_device_close(dev);
}

static void test_bad_conv(void **state)
{
    (void)state;
    tsr_device_t *dev = open_cfg("fsim", "tiny", -1);
    int8_t dy[64] = {0}, w[64] = {0};
    uint8_t x[64] = {0};
    int32_t out[64];
    tsr_grad_stats_t st = {0, 0, 0};

    const tsr_grad_conv_t ok = {1, 2, 4, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(tsr_grad_conv_dx(dev, &ok, dy, w, out, &st), TSR_OK);
    tsr_grad_conv_t p;
#define BADC(field, val, needle)                                                                                       \
    do {                                                                                                               \
        p = ok;                                                                                                        \
        p.field = val;                                                                                                 \
        BAD(tsr_grad_conv_dx(dev, &p, dy, w, out, &st), needle);                                                       \
        BAD(tsr_grad_conv_dw(dev, &p, dy, x, TSR_DT_INT8, 0, out, &st), needle);                                       \
    } while (0)
    BADC(n, 0, "n = 0");
    BADC(c_in, -2, "c_in = -2");
    BADC(h, 0, "h = 0");
    BADC(w, 0, "w = 0");
    BADC(c_out, 0, "c_out = 0");
    BADC(kh, 0, "kh = 0");
    BADC(kw, -1, "kw = -1");
    BADC(stride_h, 0, "stride_h = 0");
    BADC(stride_w, 17, "stride_w = 17");
    BADC(pad_top, -1, "pad_top = -1");
    BADC(pad_left, 16, "pad_left = 16");
    BADC(pad_bottom, -3, "pad_bottom = -3");
    BADC(pad_right, 99, "pad_right = 99");
    BADC(groups, 2, "groups = 2");
    BADC(groups, 0, "groups = 0");
    BADC(kh, 9, "kh = 9");          /* larger than the padded input */
    BADC(kw, 7, "kw = 7");
    p = ok; /* dX: 2^20 * 9 taps; dW: 2^13 * 16 output pixels */
    p.c_out = 1 << 20;
    BAD(tsr_grad_conv_dx(dev, &p, dy, w, out, &st), "overflow int32");
    p = ok;
    p.n = 1 << 13;
    BAD(tsr_grad_conv_dw(dev, &p, dy, x, TSR_DT_UINT8, 0, out, &st), "overflow int32");
    p = ok;
    p.c_in = 2;
    p.c_out = p.groups = 4;
    BAD(tsr_grad_conv_dx(dev, &p, dy, w, out, &st), "groups = 4");
    BAD(tsr_grad_conv_dx(dev, NULL, dy, w, out, &st), "parameters");
    BAD(tsr_grad_conv_dx(dev, &ok, NULL, w, out, &st), "dy");
    BAD(tsr_grad_conv_dx(dev, &ok, dy, NULL, out, &st), "w");
    BAD(tsr_grad_conv_dw(dev, &ok, dy, NULL, TSR_DT_INT8, 0, out, &st), "x");
    BAD(tsr_grad_conv_dw(dev, &ok, dy, x, TSR_DT_UINT8, -1, out, &st), "x_zp -1");
    BAD(tsr_grad_conv_dw(dev, &ok, dy, x, TSR_DT_INT8, 0, NULL, &st), "output");
    p = ok;
    p.n = 1 << 14;
    p.h = p.w = 1 << 10;
    BAD(tsr_grad_conv_dx(dev, &p, dy, w, out, &st), "too large");
    p = ok; /* sizes whose products overflow 64 bits: saturated, refused */
    p.n = p.c_in = p.h = p.w = INT32_MAX;
    p.kh = p.kw = 1;
    BAD(tsr_grad_conv_dx(dev, &p, dy, w, out, &st), "too large");
    BAD(tsr_grad_conv_dw(dev, &p, dy, x, TSR_DT_INT8, 0, out, &st), "overflow int32");
    tsr_device_close(dev);
}

/* ------------------------------------------------------------ rtl == fsim */

static void test_rtl_vs_fsim(void **state)
{
    (void)state;
    if (!is_rtl())
        skip();
    tsr_device_t *rd = open_cfg("rtl", "tiny", -1), *fd = open_cfg("fsim", "tiny", -1);
    uint64_t s = base_seed() ^ 0x77;
    const int n = 5, k = 9, m = 6;
    int8_t dy[5 * 6], w[6 * 9];
    uint8_t x[5 * 9];
    fill8(&s, dy, sizeof dy);
    fill8(&s, w, sizeof w);
    fillx(&s, x, sizeof x);
    int32_t a[64], b[64], ref[64];
    tsr_grad_stats_t sr = {0, 0, 0}, sf = {0, 0, 0};
    assert_int_equal(tsr_grad_dense_dx(rd, n, k, m, dy, w, a, &sr), TSR_OK);
    assert_int_equal(tsr_grad_dense_dx(fd, n, k, m, dy, w, b, &sf), TSR_OK);
    gradref_dense_dx(n, k, m, dy, w, ref);
    cmp32("rtl dense dx vs fsim", a, b, (size_t)n * k);
    cmp32("rtl dense dx vs reference", a, ref, (size_t)n * k);
    assert_int_equal(tsr_grad_dense_dw(rd, n, k, m, dy, x, TSR_DT_UINT8, 3, a, &sr), TSR_OK);
    assert_int_equal(tsr_grad_dense_dw(fd, n, k, m, dy, x, TSR_DT_UINT8, 3, b, &sf), TSR_OK);
    gradref_dense_dw(n, k, m, dy, x, 1, 3, ref);
    cmp32("rtl dense dw vs fsim", a, b, (size_t)m * k);
    cmp32("rtl dense dw vs reference", a, ref, (size_t)m * k);

    /* a strided, padded conv (3x3, stride 2) and a depthwise one */
    const tsr_grad_conv_t cps[2] = {{2, 3, 7, 6, 5, 3, 3, 2, 2, 1, 1, 1, 0, 1}, {1, 6, 6, 5, 6, 3, 3, 2, 1, 1, 1, 0, 1, 6}};
    for (int i = 0; i < 4; i++) {
        /* each conv gathered on chip and as the im2col GEMM */
        setenv("TESSERA_GRAD_LOWERING", i < 2 ? "gather" : "im2col", 1);
        const tsr_grad_conv_t *p = &cps[i % 2];
        const gradref_conv_t r = {p->n, p->c_in, p->h, p->w, p->c_out, p->kh, p->kw, p->stride_h, p->stride_w,
                                  p->pad_top, p->pad_left, p->pad_bottom, p->pad_right, p->groups};
        const size_t nx = (size_t)p->n * p->c_in * p->h * p->w;
        const size_t ny = (size_t)p->n * p->c_out * gradref_conv_oh(&r) * gradref_conv_ow(&r);
        const size_t nw = (size_t)p->c_out * (p->c_in / p->groups) * p->kh * p->kw;
        int8_t cdy[512], cw[512];
        uint8_t cx[512];
        int32_t ca[512], cb[512], cr[512];
        assert_true(nx <= 512 && ny <= 512 && nw <= 512);
        fill8(&s, cdy, ny);
        fill8(&s, cw, nw);
        fillx(&s, cx, nx);
        assert_int_equal(tsr_grad_conv_dx(rd, p, cdy, cw, ca, &sr), TSR_OK);
        assert_int_equal(tsr_grad_conv_dx(fd, p, cdy, cw, cb, &sf), TSR_OK);
        gradref_conv_dx(&r, cdy, cw, cr);
        cmp32("rtl conv dx vs fsim", ca, cb, nx);
        cmp32("rtl conv dx vs reference", ca, cr, nx);
        assert_int_equal(tsr_grad_conv_dw(rd, p, cdy, cx, TSR_DT_INT8, -5, ca, &sr), TSR_OK);
        assert_int_equal(tsr_grad_conv_dw(fd, p, cdy, cx, TSR_DT_INT8, -5, cb, &sf), TSR_OK);
        gradref_conv_dw(&r, cdy, cx, 0, -5, cr);
        cmp32("rtl conv dw vs fsim", ca, cb, nw);
        cmp32("rtl conv dw vs reference", ca, cr, nw);
    }
    unsetenv("TESSERA_GRAD_LOWERING");
    assert_int_equal(sr.device_macs, sf.device_macs);
    assert_true(sr.cycles > 0);
    printf("rtl tiny: %llu device MACs in %llu cycles\n", (unsigned long long)sr.device_macs,
           (unsigned long long)sr.cycles);
    tsr_device_close(rd);
    tsr_device_close(fd);
}

int main(void)
{
    if (is_rtl()) {
        const struct CMUnitTest rtl[] = {cmocka_unit_test(test_rtl_vs_fsim)};
        return cmocka_run_group_tests(rtl, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_default), cmocka_unit_test(test_dense_tiny),
        cmocka_unit_test(test_dense_extremes), cmocka_unit_test(test_bad_dense),
        cmocka_unit_test(test_conv_default),   cmocka_unit_test(test_conv_tiny),
        cmocka_unit_test(test_conv_default_nodw), cmocka_unit_test(test_bad_conv), cmocka_unit_test(test_larger),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
