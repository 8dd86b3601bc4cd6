/*
 * test_mul_rtl: the multiply by a per-channel vector (jit/tsr_mul.h) on the
 * RTL (the pipelined core, Verilated), against the plain-C reference
 * tests/tsr_opref.c opref_mul and against fsim, on small shapes of the
 * tiny preset (BLOCK 4, 128 accumulator rows): [2, 7, 3, 5] (two channel
 * blocks per batch element, several blocks per tile: the vector row
 * broadcast with a src factor over blocks) and [1, 5, 9, 9] (81 rows per
 * block: chunks of one block, the vector rows kept across its tiles), u8 x
 * u8 -> s8 and s8 x u8 -> u8, with the integer form (mulhr, rounding
 * shift), and the same on tiny with EXACT_REQUANT (fscale). The other
 * operator of a squeeze-and-excite block that is new on the device, the
 * global average into its own quantization (jit/tsr_gavg.h), likewise
 * against opref_gavg and fsim: [2, 7, 3, 5] (seven blocks per staging
 * load) and [1, 5, 13, 11] (143 rows per block: chunks of one block), fixed
 * point and fscale. The cycles of the RTL runs are printed.
 *
 * Backend: rtl, unless TSR_TEST_BACKEND names another (fsim: the test runs
 * as a plain one).
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
#include "tsr_dtensor.h"
#include "tsr_error.h"
#include "tsr_gavg.h"
#include "tsr_mul.h"
#include "tsr_quant.h"
#include "tsr_opref.h"
#include "tsr_testenv.h"

static const char *backend(void)
{
    const char *b = getenv("TSR_TEST_BACKEND");
    return b && *b ? b : "rtl";
}

static tsr_device_t *open_dev(const char *backend_name, const char *cfg_name)
{
    tsr_config_t c;
    if (tsr_test_config(cfg_name, &c))
        fail_msg("config %s: %s", cfg_name, tsr_errmsg());
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = 7};
    if (tsr_device_open(backend_name, &c, &o, &dev))
        fail_msg("open %s/%s: %s", backend_name, cfg_name, tsr_errmsg());
    return dev;
}

static opref_dtype_t odt(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8; }

static void one_case(const char *cfg, int n, int c, int h, int w, tsr_dtype_e dx, tsr_dtype_e ds, tsr_dtype_e dy,
                     uint64_t *rs)
{
    tsr_mul_params_t p;
    memset(&p, 0, sizeof p);
    p.x = (tsr_eltwise_desc_t){n, c, h, w, dx, dx == TSR_DT_UINT8 ? 131 : -9};
    p.s = (tsr_eltwise_desc_t){n, c, 1, 1, ds, ds == TSR_DT_UINT8 ? 0 : -128};
    p.y = (tsr_eltwise_desc_t){n, c, h, w, dy, dy == TSR_DT_UINT8 ? 120 : 4};
    p.act_min = dy == TSR_DT_UINT8 ? 0 : -128;
    p.act_max = dy == TSR_DT_UINT8 ? 255 : 127;
    tsr_mul_fixed_t fx;
    for (int i = 0;; i++) { /* scales as a quantizer writes them, one with an integer form */
        assert_true(i < 50);
        const float xs = 0.01f + 0.001f * (float)tsr_test_rnd(rs, 0, 200), ss = 1.0f / 255.0f,
                    ys = 0.01f + 0.001f * (float)tsr_test_rnd(rs, 0, 200);
        const float xss = xs * ss;
        p.scale = xss / ys;
        if (!tsr_mul_fixed(&p, &fx))
            break;
    }
    const size_t nx = (size_t)n * c * h * w, ns = (size_t)n * c;
    uint8_t *x = malloc(nx), *s = malloc(ns), *y = malloc(nx), *y0 = malloc(nx), *want = malloc(nx);
    assert_true(x && s && y && y0 && want);
    for (size_t i = 0; i < nx; i++)
        x[i] = (uint8_t)tsr_test_next(rs);
    for (size_t i = 0; i < ns; i++)
        s[i] = (uint8_t)tsr_test_next(rs);
    tsr_device_t *dev = open_dev(backend(), cfg), *ref = open_dev("fsim", cfg);
    tsr_counters_t a, b;
    assert_int_equal(tsr_read_counters(dev, &a), TSR_OK);
    if (tsr_mul_run(dev, &p, x, s, y))
        fail_msg("%s on %s: %s", cfg, backend(), tsr_errmsg());
    assert_int_equal(tsr_read_counters(dev, &b), TSR_OK);
    if (tsr_mul_run(ref, &p, x, s, y0))
        fail_msg("%s on fsim: %s", cfg, tsr_errmsg());
    opref_tensor_t X = {odt(dx), n, c, h, w, x, p.x.zp}, S = {odt(ds), n, c, 1, 1, s, p.s.zp},
                   Y = {odt(dy), n, c, h, w, want, p.y.zp};
    assert_int_equal(opref_mul(&X, &S, p.scale, p.act_min, p.act_max, &Y), TSR_OK);
    for (size_t i = 0; i < nx; i++)
        if (y[i] != want[i] || y0[i] != want[i])
            fail_msg("%s [%d,%d,%d,%d]: element %zu: %s %u, fsim %u, reference %u", cfg, n, c, h, w, i, backend(),
                     y[i], y0[i], want[i]);
    printf("  %s [%d,%d,%d,%d] %s x %s -> %s: %zu elements equal on %s, fsim and the reference (%llu cycles)\n",
           cfg, n, c, h, w, dx == TSR_DT_UINT8 ? "u8" : "s8", ds == TSR_DT_UINT8 ? "u8" : "s8",
           dy == TSR_DT_UINT8 ? "u8" : "s8", nx, backend(), (unsigned long long)(b.cycles - a.cycles));
    tsr_device_close(dev);
    tsr_device_close(ref);
    free(x), free(s), free(y), free(y0), free(want);
}

static void test_mul_rtl(void **state)
{
    (void)state;
    uint64_t rs = tsr_test_seed("TSR_MUL_SEED", 0x271ull);
    static const char *cfgs[] = {"tiny", "tiny+exact"};
    for (int k = 0; k < 2; k++) {
        one_case(cfgs[k], 2, 7, 3, 5, TSR_DT_UINT8, TSR_DT_UINT8, TSR_DT_INT8, &rs);
        one_case(cfgs[k], 1, 5, 9, 9, TSR_DT_INT8, TSR_DT_UINT8, TSR_DT_UINT8, &rs);
    }
}

static void gavg_case(const char *cfg, int n, int c, int h, int w, tsr_dtype_e dx, tsr_dtype_e dy, uint64_t *rs)
{
    tsr_gavg_params_t p;
    memset(&p, 0, sizeof p);
    p.n = n, p.c = c, p.h = h, p.w = w, p.x_dtype = dx, p.y_dtype = dy;
    p.x_zp = dx == TSR_DT_UINT8 ? 77 : -20, p.y_zp = dy == TSR_DT_UINT8 ? 3 : -100;
    const float xs = 0.05f, ys = 0.013f, ws = 1.0f / (float)(h * w), r = xs * ws / ys;
    p.mult = (int32_t)llround((double)r * 2147483648.0);
    p.shift = 0;
    p.fscale = r;
    p.act_min = dy == TSR_DT_UINT8 ? 0 : -128, p.act_max = dy == TSR_DT_UINT8 ? 255 : 127;
    const size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c;
    uint8_t *x = malloc(nx), *y = malloc(ny), *y0 = malloc(ny), *want = malloc(ny);
    assert_true(x && y && y0 && want);
    for (size_t i = 0; i < nx; i++)
        x[i] = (uint8_t)tsr_test_next(rs);
    tsr_device_t *dev = open_dev(backend(), cfg), *ref = open_dev("fsim", cfg);
    tsr_counters_t a, b;
    assert_int_equal(tsr_read_counters(dev, &a), TSR_OK);
    if (tsr_gavg_run(dev, &p, x, y))
        fail_msg("gavg %s on %s: %s", cfg, backend(), tsr_errmsg());
    assert_int_equal(tsr_read_counters(dev, &b), TSR_OK);
    if (tsr_gavg_run(ref, &p, x, y0))
        fail_msg("gavg %s on fsim: %s", cfg, tsr_errmsg());
    const int exact = tsr_device_config(dev)->exact_requant;
    opref_tensor_t X = {odt(dx), n, c, h, w, x, p.x_zp}, Y = {odt(dy), n, c, 1, 1, want, p.y_zp};
    opref_requant_t rq = {.count = 1, .mult = &p.mult, .shift = &p.shift, .act_min = p.act_min,
                          .act_max = p.act_max, .fscale = exact ? &p.fscale : NULL};
    assert_int_equal(opref_gavg(&X, &rq, &Y), TSR_OK);
    for (size_t i = 0; i < ny; i++)
        if (y[i] != want[i] || y0[i] != want[i])
            fail_msg("gavg %s [%d,%d,%d,%d]: output %zu: %s %u, fsim %u, reference %u", cfg, n, c, h, w, i,
                     backend(), y[i], y0[i], want[i]);
    printf("  gavg %s [%d,%d,%d,%d]: %zu outputs equal on %s, fsim and the reference (%llu cycles)\n", cfg, n, c, h,
           w, ny, backend(), (unsigned long long)(b.cycles - a.cycles));
    tsr_device_close(dev);
    tsr_device_close(ref);
    free(x), free(y), free(y0), free(want);
}

static void test_gavg_rtl(void **state)
{
    (void)state;
    uint64_t rs = tsr_test_seed("TSR_MUL_SEED", 0x6a7ull);
    static const char *cfgs[] = {"tiny", "tiny+exact"};
    for (int k = 0; k < 2; k++) {
        gavg_case(cfgs[k], 2, 7, 3, 5, TSR_DT_UINT8, TSR_DT_UINT8, &rs);
        gavg_case(cfgs[k], 1, 5, 13, 11, TSR_DT_INT8, TSR_DT_UINT8, &rs);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_mul_rtl), cmocka_unit_test(test_gavg_rtl)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
