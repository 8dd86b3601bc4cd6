/*
 * test_softmax: the quantized Softmax on the device (jit/tsr_softmax.h)
 * against the plain-C reference tests/tsr_opref.c opref_softmax (written
 * from jit/operators.md "softmax", not from jit/): random tensors [N, C, H, W] (softmax along
 * w, lengths 1, 2, small, 197 and > 256 so that a row takes several
 * chunks on chip), and over h*w (a 3-D tensor's last axis: ViT-tiny's
 * attention [3, 197, 197]), input and output dtypes, zero points and scales, on
 * tiny + ACT_LUT 4 (128 accumulator rows: rows of more than 40 go in
 * chunks) and default + ACT_LUT 4. Every output byte must equal the
 * reference. Also against ONNX Runtime's QLinearSoftmax arithmetic
 * (float32 table, float32 running sum, float32 division; ort_softmax
 * below, as contrib_ops/cpu/quantization/qlinear_softmax.cc computes it):
 * at most 1 LSB apart, the count printed (rows of one element excepted:
 * there ORT's table entry times floor(1 / y_scale) overflows float32 and
 * its output is not 1.0 but the cast of an infinity). Refusals: a config without
 * ACT_LUT >= 4, bad scales, floor(1 / y_scale) out of range.
 *
 * Backend: TSR_TEST_BACKEND (default fsim); test_softmax_rtl in
 * tests/CMakeLists.txt runs the tiny cases on the RTL.
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

#include "tsr_counters.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_opref.h"
#include "tsr_softmax.h"
#include "tsr_testenv.h"

/* ONNX Runtime 1.20's QLinearSoftmax (opset 13, last axis) in its float32 operations. */
static void ort_softmax(const tsr_softmax_params_t *p, const uint8_t *x, uint8_t *y)
{
    const int sx = p->x_dtype == TSR_DT_INT8;
    float table[256];
    double shift = log((double)3.40282346638528859812e+38 / (double)p->w) - 5.0;
    shift = (shift > 0 ? shift : 0) / (double)p->x_scale;
    for (int i = 0; i < 256; i++)
        table[(uint8_t)(sx ? i - 128 : i)] = (float)exp(((double)i - 255 + shift) * (double)p->x_scale);
    const float ys = floorf(1.0f / p->y_scale);
    const int64_t rows = (int64_t)p->n * p->c * p->h;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *xr = x + r * p->w;
        int m = sx ? -128 : 0;
        for (int k = 0; k < p->w; k++)
            m = (sx ? (int8_t)xr[k] : xr[k]) > m ? (sx ? (int8_t)xr[k] : xr[k]) : m;
        float sum = 0;
        for (int k = 0; k < p->w; k++) {
            const int v = sx ? (int8_t)xr[k] : xr[k];
            sum += sx ? table[(uint8_t)(v + 127 - m)] : table[v + 255 - m];
        }
        for (int k = 0; k < p->w; k++) {
            const int v = sx ? (int8_t)xr[k] : xr[k];
            const float t = sx ? table[(uint8_t)(v + 127 - m)] : table[v + 255 - m];
            if (isinf(t * ys)) { /* w = 1: the table's top entry times ys overflows float32 in ORT (its
                                    cast of the infinite quotient then gives 0 or 255 by platform) */
                y[r * p->w + k] = 0;
                continue;
            }
            const int32_t q = (int32_t)nearbyintf((t * ys) / sum) + p->y_zp;
            y[r * p->w + k] = (uint8_t)(q > 255 ? 255 : q);
        }
    }
}

/* ------------------------------------------------- the cases */

static const char *backend(void)
{
    const char *b = getenv("TSR_TEST_BACKEND");
    return b && *b ? b : "fsim";
}

static tsr_device_t *open_cfg(const char *preset, int lut)
{
    tsr_config_t c;
    tsr_test_preset_with(preset, "ACT_LUT", lut, &c);
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = 5};
    if (tsr_device_open(backend(), &c, &o, &dev))
        fail_msg("open %s/%s: %s", backend(), preset, tsr_errmsg());
    return dev;
}

static long ort_diff, ort_n;

/* One random case (spatial: the softmax over h*w, tsr_softmax.h). */
static void one_case(tsr_device_t *dev, const char *cfg, int n, int c, int h, int w, int spatial, uint64_t *rs)
{
    tsr_softmax_params_t p;
    memset(&p, 0, sizeof p);
    p.n = n, p.c = c, p.h = h, p.w = w, p.spatial = spatial;
    const int rh = spatial ? 1 : h, rw = spatial ? h * w : w; /* the reference's view: rows of rw */
    p.x_dtype = tsr_test_rnd(rs, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p.y_dtype = tsr_test_rnd(rs, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p.x_zp = p.x_dtype == TSR_DT_UINT8 ? tsr_test_rnd(rs, 0, 255) : tsr_test_rnd(rs, -128, 127);
    p.x_scale = 0.005f + 0.0005f * (float)tsr_test_rnd(rs, 0, 600); /* attention scores' scales */
    /* outputs as quantizers write them: [0, 1] in u8 (1/255, zp 0), s8 (1/255 or 1/256, zp -128), or another */
    const int k = tsr_test_rnd(rs, 0, 3);
    p.y_scale = k == 0 ? 1.0f / 255.0f : k == 1 ? 1.0f / 256.0f : k == 2 ? 1.0f / 127.0f : 0.0037f;
    p.y_zp = p.y_dtype == TSR_DT_UINT8 ? (k == 3 ? 3 : 0) : (k == 2 ? 0 : -128);
    const size_t nx = (size_t)n * c * h * w;
    uint8_t *x = malloc(nx), *y = malloc(nx), *want = malloc(nx), *orty = malloc(nx);
    assert_true(x && y && want && orty);
    /* scores: a few large values per row over a spread (and rows with ties at the max) */
    const int spread = tsr_test_rnd(rs, 1, 255);
    for (size_t i = 0; i < nx; i++) {
        const int lo = p.x_dtype == TSR_DT_UINT8 ? 0 : -128;
        int v = lo + 255 - tsr_test_rnd(rs, 0, spread);
        x[i] = (uint8_t)v;
    }
    /* every other row spans the whole range (d = 255 occurs: a table index off by anything wraps) */
    for (size_t r = 0; rw > 1 && r < nx / (size_t)rw; r += 2) {
        const int lo = p.x_dtype == TSR_DT_UINT8 ? 0 : -128;
        x[r * (size_t)rw + (size_t)tsr_test_rnd(rs, 0, rw - 1)] = (uint8_t)(lo + 255);
        x[r * (size_t)rw + (size_t)tsr_test_rnd(rs, 0, rw - 1)] = (uint8_t)lo;
    }
    if (tsr_softmax_run(dev, &p, x, y))
        fail_msg("%s [%d,%d,%d,%d]: %s", cfg, n, c, h, w, tsr_errmsg());
    opref_tensor_t X = {p.x_dtype == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8, n, c, rh, rw, x, p.x_zp},
                   Y = {p.y_dtype == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8, n, c, rh, rw, want, p.y_zp};
    assert_int_equal(opref_softmax(&X, p.x_scale, p.y_scale, &Y), TSR_OK);
    tsr_softmax_params_t po = p; /* ORT's rows: the last axis of [N, C, rh, rw] */
    po.h = rh, po.w = rw;
    ort_softmax(&po, x, orty);
    for (size_t i = 0; i < nx; i++)
        if (y[i] != want[i])
            fail_msg("%s [%d,%d,%d,%d] x %s scale %g, y %s scale %g zp %d: element %zu: device %u, reference %u", cfg,
                     n, c, h, w, p.x_dtype == TSR_DT_UINT8 ? "u8" : "s8", (double)p.x_scale,
                     p.y_dtype == TSR_DT_UINT8 ? "u8" : "s8", (double)p.y_scale, (int)p.y_zp, i, y[i], want[i]);
    long nd = 0;
    for (size_t i = 0; i < nx && rw > 1; i++) { /* (w = 1: ORT overflows, above; the device gives 1.0) */
        const int sy = p.y_dtype == TSR_DT_INT8;
        const int dv = sy ? (int8_t)y[i] : y[i], ov = sy ? (int8_t)orty[i] : orty[i];
        if (dv != ov) {
            nd++;
            if (abs(dv - ov) > 1)
                fail_msg("%s [%d,%d,%d,%d]: element %zu: device %d, ONNX Runtime's form %d (more than 1 LSB)", cfg, n,
                         c, h, w, i, dv, ov);
        }
    }
    ort_diff += nd, ort_n += rw > 1 ? (long)nx : 0;
    free(x), free(y), free(want), free(orty);
}

static void run_cases(const char *preset, const int (*shapes)[5], int count, uint64_t seed)
{
    uint64_t rs = tsr_test_seed("TSR_SOFTMAX_SEED", seed);
    tsr_device_t *dev = open_cfg(preset, 4);
    for (int i = 0; i < count; i++) {
        one_case(dev, preset, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4], &rs);
        printf("  %s [%d,%d,%d,%d]%s: equal to the reference\n", preset, shapes[i][0], shapes[i][1], shapes[i][2],
               shapes[i][3], shapes[i][4] ? " over h*w" : "");
    }
    tsr_device_close(dev);
}

static void test_tiny(void **state)
{
    (void)state;
    /* tiny: BLOCK 4, 128 accumulator rows: w <= 40 in one pass (several groups per tile), longer in chunks */
    static const int shapes[][5] = {{1, 1, 1, 1, 0},  {1, 3, 2, 2, 0},   {2, 5, 3, 7, 0},  {1, 4, 6, 40, 0},
                                    {1, 2, 3, 41, 0}, {1, 3, 2, 197, 0}, {1, 1, 2, 300, 0}, {2, 6, 1, 13, 0},
                                    {3, 9, 13, 1, 1}, {2, 5, 3, 4, 1},   {1, 6, 50, 1, 1}};
    run_cases("tiny", shapes, (int)(sizeof shapes / sizeof shapes[0]), 0x50f7ull);
}

static void test_default(void **state)
{
    (void)state;
    /* default: BLOCK 16, 2048 rows: ViT-tiny's attention [1, 3, 197, 197] rows in one pass, 3 groups a tile */
    static const int shapes[][5] = {{1, 3, 197, 197, 0}, {1, 2, 16, 16, 0}, {1, 17, 2, 681, 0}, {1, 4, 3, 1, 0},
                                    {3, 197, 197, 1, 1}};
    run_cases("default", shapes, (int)(sizeof shapes / sizeof shapes[0]), 0x50f8ull);
    printf("  against ONNX Runtime's float32 QLinearSoftmax: %ld of %ld values differ (by 1)\n", ort_diff, ort_n);
}

static void expect_refusal(tsr_device_t *dev, const tsr_softmax_params_t *p, const char *want)
{
    uint8_t x[64] = {0}, y[64];
    assert_int_not_equal(tsr_softmax_run(dev, p, x, y), TSR_OK);
    if (!strstr(tsr_errmsg(), want))
        fail_msg("expected '%s' in: %s", want, tsr_errmsg());
}

static void test_refusals(void **state)
{
    (void)state;
    tsr_softmax_params_t p = {.n = 1, .c = 2, .h = 2, .w = 8, .x_dtype = TSR_DT_UINT8, .x_scale = 0.1f,
                              .y_dtype = TSR_DT_UINT8, .y_scale = 1.0f / 255.0f};
    tsr_device_t *nolut = open_cfg("tiny", 2);
    expect_refusal(nolut, &p, "ACT_LUT >= 4");
    tsr_device_close(nolut);
    tsr_device_t *dev = open_cfg("tiny", 4);
    tsr_softmax_params_t q = p;
    q.x_scale = -1.0f;
    expect_refusal(dev, &q, "input scale");
    q = p;
    q.y_scale = 2.0f;
    expect_refusal(dev, &q, "floor(1 / output scale)");
    q = p;
    q.y_zp = 300;
    expect_refusal(dev, &q, "output zero point");
    q = p;
    q.w = 0;
    expect_refusal(dev, &q, "must be positive");
    tsr_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tiny), cmocka_unit_test(test_default),
                                       cmocka_unit_test(test_refusals)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
