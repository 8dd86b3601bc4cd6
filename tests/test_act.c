/*
 * test_act: activation tables (jit/tsr_act.h) on the device, against plain
 * C written here from the header's definitions: random tables over random
 * int8/uint8 device tensors (one tile and many, the smallest and the
 * default presets with ACT_LUT 1, 2 and 8, batch 2), the table of a
 * quantized function against a per-element float32 computation and
 * hand-worked values (ties to even, saturation, the uint8 re-centring), and
 * the refusals (a value out of range naming its index, a config without
 * ACT_LUT, mismatched tensors, NaN).
 *
 * Runs on fsim (and SystemC, TSR_TEST_BACKEND=systemc); the RTL has no
 * table unit and refuses such configs, so there the test checks only that.
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
#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_error.h"
#include "tsr_testenv.h"


static tsr_device_t *open_lut(const char *preset, int n, uint64_t seed)
{
    tsr_config_t c;
    tsr_test_preset_with(preset, "ACT_LUT", n, &c);
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = seed};
    if (tsr_device_open(tsr_test_backend(), &c, &o, &dev))
        fail_msg("open %s/%s+ACT_LUT: %s", tsr_test_backend(), preset, tsr_errmsg());
    return dev;
}

/* The reference: y = entry[(x - off_x) & 255] + off_y, element by element. */
static void ref_apply(const tsr_act_table_t *t, tsr_dtype_e xd, tsr_dtype_e yd, const uint8_t *x, uint8_t *y, size_t n)
{
    const int xo = xd == TSR_DT_UINT8 ? 128 : 0, yo = yd == TSR_DT_UINT8 ? 128 : 0;
    for (size_t i = 0; i < n; i++) {
        int xv = xd == TSR_DT_UINT8 ? x[i] : (int8_t)x[i];
        int yv = t->v[(unsigned)(xv - xo) & 255u] + yo;
        y[i] = (uint8_t)yv;
    }
}

/* One run of table t over a random tensor of shape [n, c, h, w]. */
static void run_case(tsr_device_t *dev, const tsr_act_table_t *t, int n, int c, int h, int w, tsr_dtype_e xd,
                     tsr_dtype_e yd, uint64_t *s, int *tiles)
{
    const tsr_config_t *cfg = tsr_device_config(dev);
    tsr_dtensor_t x, y;
    assert_int_equal(tsr_dtensor_init(cfg, n, c, h, w, xd, xd == TSR_DT_UINT8 ? 128 : 0, &x), TSR_OK);
    assert_int_equal(tsr_dtensor_init(cfg, n, c, h, w, yd, yd == TSR_DT_UINT8 ? 3 : -5, &y), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &x), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &y), TSR_OK);
    size_t cnt = (size_t)n * c * h * w;
    uint8_t *xv = malloc(cnt), *yv = malloc(cnt), *want = malloc(cnt);
    assert_true(xv && yv && want);
    for (size_t i = 0; i < cnt; i++)
        xv[i] = (uint8_t)tsr_test_next(s);
    for (size_t i = 0; i < cnt && cnt > 8; i += cnt / 8) /* the extremes of both types */
        xv[i] = (uint8_t)(i & 1 ? 0x80 : 0x7f);
    assert_int_equal(tsr_dtensor_write_nchw(dev, &x, xv), TSR_OK);
    tsr_act_plan_t pl;
    if (tsr_act_plan_tensors(dev, t, &x, &y, &pl))
        fail_msg("plan [%d,%d,%d,%d]: %s", n, c, h, w, tsr_errmsg());
    *tiles = pl.tiles;
    assert_int_equal(pl.alu_ops, pl.rows);
    if (tsr_act_exec(dev, &pl))
        fail_msg("exec [%d,%d,%d,%d]: %s", n, c, h, w, tsr_errmsg());
    tsr_act_plan_free(dev, &pl);
    assert_int_equal(tsr_dtensor_read_nchw(dev, &y, yv), TSR_OK);
    ref_apply(t, xd, yd, xv, want, cnt);
    for (size_t i = 0; i < cnt; i++)
        if (yv[i] != want[i])
            fail_msg("[%d,%d,%d,%d] %s -> %s: element %zu (x byte %u): device %u, reference %u", n, c, h, w,
                     xd == TSR_DT_UINT8 ? "u8" : "s8", yd == TSR_DT_UINT8 ? "u8" : "s8", i, xv[i], yv[i], want[i]);
    free(xv);
    free(yv);
    free(want);
    tsr_dtensor_free(dev, &x);
    tsr_dtensor_free(dev, &y);
}

static void random_table(uint64_t *s, tsr_act_table_t *t)
{
    int32_t v[TSR_ACT_ENTRIES];
    for (int i = 0; i < TSR_ACT_ENTRIES; i++)
        v[i] = (int32_t)(tsr_test_next(s) % 256) - 128;
    assert_int_equal(tsr_act_table_from_values(v, t), TSR_OK);
    for (int i = 0; i < TSR_ACT_ENTRIES; i++)
        assert_int_equal(t->v[i], v[i]);
}

/* Random tables over random tensors: shapes of one tile and of many (tiny's
 * accumulator holds 128 rows: 64 per tile), every dtype pair. */
static void test_random_tables(void **state)
{
    (void)state;
    static const struct {
        const char *preset;
        int n;
    } cfgs[] = {{"tiny", 1}, {"tiny", 8}, {"default", 2}};
    static const int shapes[][4] = {{1, 1, 1, 1}, {1, 3, 5, 7}, {2, 16, 9, 9}, {3, 5, 31, 17}};
    uint64_t s = tsr_test_seed("TSR_ACT_SEED", 0xac7ull);
    int multi = 0;
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        tsr_device_t *dev = open_lut(cfgs[k].preset, cfgs[k].n, s | 1);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int d = 0; d < 4; d++) {
                tsr_act_table_t t;
                random_table(&s, &t);
                int tiles = 0;
                run_case(dev, &t, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3],
                         d & 1 ? TSR_DT_UINT8 : TSR_DT_INT8, d & 2 ? TSR_DT_UINT8 : TSR_DT_INT8, &s, &tiles);
                multi |= tiles > 2;
            }
        tsr_device_close(dev);
    }
    assert_true(multi); /* (both accumulator halves used more than once) */
}

static double f_identity(double x) { return x; }
static double f_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double f_nan(double x) { return x > 0.5 ? NAN : x; }
static double f_big(double x) { return x * 1e30; }

/* The table of a quantized function: hand-worked values, then every entry
 * against the float32 computation written out here, for sigmoid over
 * dtype pairs, then on the device. */
static void test_function_table(void **state)
{
    (void)state;
    tsr_act_table_t t;
    /* identity with x_scale 0.5, y_scale 1, int8: x * 0.5 rounded half to even */
    tsr_act_quant_t q = {TSR_DT_INT8, 0.5f, 0, TSR_DT_INT8, 1.0f, 0};
    assert_int_equal(tsr_act_table_from_function(&q, f_identity, &t), TSR_OK);
    static const int xs[] = {1, 3, 5, -1, -3, 2, 127, -128};
    static const int ys[] = {0, 2, 2, 0, -2, 1, 64, -64};
    for (int i = 0; i < 8; i++)
        if (t.v[(unsigned)xs[i] & 255u] != ys[i])
            fail_msg("identity/2 at %d: %d, want %d", xs[i], t.v[(unsigned)xs[i] & 255u], ys[i]);
    /* uint8 in and out, zero points 128 and 10, scale 1 -> 1: y = x - 118, saturating at 0 */
    tsr_act_quant_t qu = {TSR_DT_UINT8, 1.0f, 128, TSR_DT_UINT8, 1.0f, 10};
    assert_int_equal(tsr_act_table_from_function(&qu, f_identity, &t), TSR_OK);
    for (int x = 0; x < 256; x++) {
        int y = x - 118 < 0 ? 0 : x - 118;
        /* device terms: index (x - 128) & 255, entry y - 128 */
        if (t.v[(unsigned)(x - 128) & 255u] != y - 128)
            fail_msg("u8 shift at %d: entry %d, want %d", x, t.v[(unsigned)(x - 128) & 255u], y - 128);
    }
    /* saturation both ways, infinities included */
    tsr_act_quant_t qb = {TSR_DT_INT8, 1.0f, 0, TSR_DT_INT8, 1.0f, 0};
    assert_int_equal(tsr_act_table_from_function(&qb, f_big, &t), TSR_OK);
    assert_int_equal(t.v[1], 127);
    assert_int_equal(t.v[255], -128);
    assert_int_equal(t.v[0], 0);

    /* sigmoid, every dtype pair: each entry from the float32 steps */
    for (int d = 0; d < 4; d++) {
        tsr_act_quant_t qs = {d & 1 ? TSR_DT_UINT8 : TSR_DT_INT8, 0.0625f, d & 1 ? 131 : -3,
                              d & 2 ? TSR_DT_UINT8 : TSR_DT_INT8, 1.0f / 256.0f, d & 2 ? 0 : -128};
        assert_int_equal(tsr_act_table_from_function(&qs, f_sigmoid, &t), TSR_OK);
        const int xo = d & 1 ? 128 : 0, yo = d & 2 ? 128 : 0, lo = d & 2 ? 0 : -128, hi = d & 2 ? 255 : 127;
        for (int x = d & 1 ? 0 : -128; x <= (d & 1 ? 255 : 127); x++) {
            float xf = (float)(x - qs.x_zp) * qs.x_scale;
            float yf = (float)f_sigmoid((double)xf);
            float r = nearbyintf(yf / qs.y_scale) + (float)qs.y_zp;
            int y = r < (float)lo ? lo : r > (float)hi ? hi : (int)r;
            if (t.v[(unsigned)(x - xo) & 255u] != y - yo)
                fail_msg("sigmoid (pair %d) at %d: entry %d, want %d", d, x, t.v[(unsigned)(x - xo) & 255u], y - yo);
        }
        tsr_device_t *dev = open_lut("tiny", 2, 7);
        uint64_t s = 99 + (uint64_t)d;
        int tiles;
        run_case(dev, &t, 2, 7, 6, 5, qs.x_dtype, qs.y_dtype, &s, &tiles);
        tsr_device_close(dev);
    }
}

/* Bad input: one line each, nothing written. */
static void test_refusals(void **state)
{
    (void)state;
    int32_t v[TSR_ACT_ENTRIES] = {0};
    tsr_act_table_t t;
    memset(&t, 0x55, sizeof t);
    v[7] = 300;
    assert_int_equal(tsr_act_table_from_values(v, &t), TSR_EINVAL);
    assert_string_equal(tsr_errmsg(), "act: table value 300 at index 7 is outside [-128, 127]");
    assert_int_equal(t.v[0], 0x55);
    v[7] = 0;
    v[255] = -129;
    assert_int_equal(tsr_act_table_from_values(v, &t), TSR_EINVAL);
    assert_string_equal(tsr_errmsg(), "act: table value -129 at index 255 is outside [-128, 127]");
    tsr_act_quant_t q = {TSR_DT_INT8, 1.0f, 0, TSR_DT_INT8, 1.0f, 0};
    assert_int_equal(tsr_act_table_from_function(&q, f_nan, &t), TSR_EINVAL);
    assert_string_equal(tsr_errmsg(), "act: the function gives NaN at input 1 (real 1)");
    assert_int_equal(t.v[0], 0x55);
    q.y_scale = 0.0f;
    assert_int_equal(tsr_act_table_from_function(&q, f_identity, &t), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "output scale"));
    q.y_scale = 1.0f;
    q.x_zp = 200;
    assert_int_equal(tsr_act_table_from_function(&q, f_identity, &t), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "input zero point 200"));
    q.x_zp = 0;
    assert_int_equal(tsr_act_table_from_function(&q, NULL, &t), TSR_EINVAL);

    /* a config without tables: refused at plan */
    tsr_device_t *dev = tsr_test_open("tiny", 1);
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_dtensor_t x, y;
    assert_int_equal(tsr_dtensor_init(c, 1, 4, 2, 2, TSR_DT_INT8, 0, &x), TSR_OK);
    y = x;
    assert_int_equal(tsr_dtensor_alloc(dev, &x), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &y), TSR_OK);
    tsr_act_plan_t pl;
    memset(&t, 0, sizeof t);
    assert_int_equal(tsr_act_plan_tensors(dev, &t, &x, &y, &pl), TSR_EINVAL);
    assert_string_equal(tsr_errmsg(), "act: the config has no activation tables (ACT_LUT = 0)");
    assert_null(pl.insns);
    tsr_dtensor_free(dev, &x);
    tsr_dtensor_free(dev, &y);
    tsr_device_close(dev);

    /* shapes that differ */
    dev = open_lut("tiny", 1, 1);
    c = tsr_device_config(dev);
    assert_int_equal(tsr_dtensor_init(c, 1, 4, 2, 2, TSR_DT_INT8, 0, &x), TSR_OK);
    assert_int_equal(tsr_dtensor_init(c, 1, 4, 2, 3, TSR_DT_INT8, 0, &y), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &x), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &y), TSR_OK);
    assert_int_equal(tsr_act_plan_tensors(dev, &t, &x, &y, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "differ in shape"));
    assert_int_equal(tsr_act_plan_tensors(dev, NULL, &x, &y, &pl), TSR_EINVAL);
    assert_int_equal(tsr_act_exec(dev, &pl), TSR_EINVAL); /* a failed plan does not run */
    tsr_dtensor_free(dev, &x);
    tsr_dtensor_free(dev, &y);
    tsr_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_tables),
        cmocka_unit_test(test_function_table),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
