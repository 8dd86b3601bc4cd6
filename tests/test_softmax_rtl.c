/*
 * test_softmax_rtl: the quantized Softmax (jit/tsr_softmax.h) on the RTL
 * (the pipelined core with the activation table unit, Verilated) on the
 * tiny preset + ACT_LUT 4 (BLOCK 4, 128 accumulator rows), against fsim
 * and the plain-C reference tests/tsr_opref.c opref_softmax: [2, 5, 3, 7]
 * (four softmax rows a tile: the reductions and the per-row reciprocal
 * over several groups), [1, 2, 2, 45] (rows longer than a tile holds: the
 * three passes over chunks), u8 -> u8 and s8 -> s8 (zero point -128,
 * scale 1/256). Every row spans the input range (d = 255 occurs). The
 * RTL's cycles are printed.
 *
 * Backend: rtl, unless TSR_TEST_BACKEND names another.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_counters.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_opref.h"
#include "tsr_softmax.h"
#include "tsr_testenv.h"

static const char *backend(void)
{
    const char *b = getenv("TSR_TEST_BACKEND");
    return b && *b ? b : "rtl";
}

static tsr_device_t *open_dev(const char *name)
{
    tsr_config_t c;
    tsr_test_preset_with("tiny", "ACT_LUT", 4, &c);
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = 7};
    if (tsr_device_open(name, &c, &o, &dev))
        fail_msg("open %s/tiny + ACT_LUT 4: %s", name, tsr_errmsg());
    return dev;
}

static void one_case(int n, int c, int h, int w, tsr_dtype_e dt, float xs, float ysc, int32_t yzp, uint64_t *rs)
{
    tsr_softmax_params_t p = {.n = n, .c = c, .h = h, .w = w, .x_dtype = dt, .x_scale = xs,
                              .x_zp = dt == TSR_DT_UINT8 ? 100 : -3, .y_dtype = dt, .y_scale = ysc, .y_zp = yzp};
    const size_t nx = (size_t)n * c * h * w;
    uint8_t *x = malloc(nx), *y = malloc(nx), *y0 = malloc(nx), *want = malloc(nx);
    assert_true(x && y && y0 && want);
    const int lo = dt == TSR_DT_UINT8 ? 0 : -128;
    for (size_t i = 0; i < nx; i++)
        x[i] = (uint8_t)(lo + 255 - tsr_test_rnd(rs, 0, 60));
    for (size_t r = 0; r < nx / (size_t)w; r++) /* each row spans the range: d = 255 occurs */
        x[r * (size_t)w + (size_t)tsr_test_rnd(rs, 0, w - 1)] = (uint8_t)lo;
    tsr_device_t *dev = open_dev(backend()), *ref = open_dev("fsim");
    tsr_counters_t a, b;
    assert_int_equal(tsr_read_counters(dev, &a), TSR_OK);
    if (tsr_softmax_run(dev, &p, x, y))
        fail_msg("%s: %s", backend(), tsr_errmsg());
    assert_int_equal(tsr_read_counters(dev, &b), TSR_OK);
    if (tsr_softmax_run(ref, &p, x, y0))
        fail_msg("fsim: %s", tsr_errmsg());
    const opref_dtype_t od = dt == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8;
    opref_tensor_t X = {od, n, c, h, w, x, p.x_zp}, Y = {od, n, c, h, w, want, yzp};
    assert_int_equal(opref_softmax(&X, xs, ysc, &Y), TSR_OK);
    for (size_t i = 0; i < nx; i++)
        if (y[i] != want[i] || y0[i] != want[i])
            fail_msg("[%d,%d,%d,%d]: element %zu: %s %u, fsim %u, reference %u", n, c, h, w, i, backend(), y[i],
                     y0[i], want[i]);
    printf("  tiny + ACT_LUT 4 [%d,%d,%d,%d] %s: %zu elements equal on %s, fsim and the reference (%llu cycles)\n",
           n, c, h, w, dt == TSR_DT_UINT8 ? "u8" : "s8", nx, backend(), (unsigned long long)(b.cycles - a.cycles));
    tsr_device_close(dev);
    tsr_device_close(ref);
    free(x), free(y), free(y0), free(want);
}

static void test_softmax_rtl(void **state)
{
    (void)state;
    uint64_t rs = tsr_test_seed("TSR_SOFTMAX_SEED", 0x5f7ull);
    one_case(2, 5, 3, 7, TSR_DT_UINT8, 0.0625f, 1.0f / 255.0f, 0, &rs);
    one_case(1, 2, 2, 45, TSR_DT_INT8, 0.11f, 1.0f / 256.0f, -128, &rs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_softmax_rtl)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
