/*
 * test_gavg: the global average into its own quantization (jit/tsr_gavg.h)
 * on the device, against the plain-C reference tests/tsr_opref.c
 * opref_gavg (the exact window sum, then opref_requantize; nothing from
 * jit/):
 *  - random shapes (windows of 1 to 2,500 taps: several blocks per input
 *    piece, and blocks in chunks on tiny's 64-row input halves), types, zero
 *    points, multipliers (both signs of the shift) and clamps on tiny,
 *    default and b2 (BATCH 2); the float32 form (fscale) on tiny+exact and
 *    default+exact, and the fixed-point one there when fscale is 0;
 *  - the extremes: every input at the type's minimum or maximum over a
 *    112x112 window (the largest sums);
 *  - against the depthwise conv of weight 1 over the window (the form an
 *    importer uses for windows that fit on chip): the same bytes;
 *  - in a graph (tsr_graph_from_netdesc) between a clip and a mul, against
 *    tests/tsr_netref.c;
 *  - refusals: a shift that would overflow the sum, bad types, zero points,
 *    scales, clamps, tensors that do not match.
 * Backend from TSR_TEST_BACKEND (default fsim).
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

#include "tsr_conv2d.h"
#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_error.h"
#include "tsr_gavg.h"
#include "tsr_graph.h"
#include "tsr_netdesc.h"
#include "tsr_netref.h"
#include "tsr_opref.h"
#include "tsr_quant.h"
#include "tsr_testenv.h"

static opref_dtype_t odt(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8; }

/* The importer's multipliers for an average of `count` taps from x_scale to y_scale. */
static void set_scale(tsr_gavg_params_t *p, float xs, float ys)
{
    const int64_t count = (int64_t)p->h * p->w;
    const float ws = 1.0f / (float)count, r = xs * ws / ys;
    if (r < 1.0f && r > 0x1p-20f) {
        p->mult = (int32_t)llround((double)r * 2147483648.0);
        p->shift = 0;
    } else
        assert_int_equal(tsr_quantize_multiplier((double)r, &p->mult, &p->shift), TSR_OK);
    p->fscale = r;
}

static void run_case(tsr_device_t *dev, const tsr_gavg_params_t *p, const uint8_t *xv, uint64_t *rs,
                     const char *what)
{
    const size_t nx = (size_t)p->n * p->c * p->h * p->w, ny = (size_t)p->n * p->c;
    uint8_t *x = malloc(nx), *y = malloc(ny), *want = malloc(ny);
    assert_true(x && y && want);
    for (size_t i = 0; i < nx; i++)
        x[i] = xv ? xv[i] : (uint8_t)tsr_test_next(rs);
    if (tsr_gavg_run(dev, p, x, y))
        fail_msg("%s: %s", what, tsr_errmsg());
    const int exact = tsr_device_config(dev)->exact_requant && p->fscale > 0.0f;
    opref_tensor_t X = {odt(p->x_dtype), p->n, p->c, p->h, p->w, x, p->x_zp};
    opref_tensor_t Y = {odt(p->y_dtype), p->n, p->c, 1, 1, want, p->y_zp};
    opref_requant_t rq = {.count = 1, .mult = &p->mult, .shift = &p->shift, .act_min = p->act_min,
                          .act_max = p->act_max, .fscale = exact ? &p->fscale : NULL};
    assert_int_equal(opref_gavg(&X, &rq, &Y), TSR_OK);
    for (size_t i = 0; i < ny; i++)
        if (y[i] != want[i])
            fail_msg("%s: [%d,%d,%d,%d] zps %d -> %d, mult %d shift %d%s: output %zu: device %u, reference %u", what,
                     p->n, p->c, p->h, p->w, p->x_zp, p->y_zp, p->mult, p->shift, exact ? " (fscale)" : "", i, y[i],
                     want[i]);
    free(x), free(y), free(want);
}

static tsr_gavg_params_t rnd_params(uint64_t *rs, int n, int c, int h, int w)
{
    tsr_gavg_params_t p;
    memset(&p, 0, sizeof p);
    p.n = n, p.c = c, p.h = h, p.w = w;
    p.x_dtype = tsr_test_rnd(rs, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p.y_dtype = tsr_test_rnd(rs, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p.x_zp = p.x_dtype == TSR_DT_UINT8 ? tsr_test_rnd(rs, 0, 255) : tsr_test_rnd(rs, -128, 127);
    p.y_zp = p.y_dtype == TSR_DT_UINT8 ? tsr_test_rnd(rs, 0, 255) : tsr_test_rnd(rs, -128, 127);
    /* output scales finer and coarser than the input's; now and then a multiplier >= 1 (a left shift) */
    const float xs = 0.01f + 0.001f * (float)tsr_test_rnd(rs, 0, 100);
    const float ys = tsr_test_rnd(rs, 0, 7) ? xs * (0.2f + 0.01f * (float)tsr_test_rnd(rs, 0, 300))
                                            : xs / ((float)h * (float)w) / (1.5f + 0.5f * (float)tsr_test_rnd(rs, 0, 4));
    set_scale(&p, xs, ys);
    if (p.shift > 0 && ((255 * (int64_t)h * w) << p.shift) > INT32_MAX)
        p.shift = 0; /* (a shift the check refuses: test_refusals) */
    p.act_min = p.y_dtype == TSR_DT_UINT8 ? 0 : -128;
    p.act_max = p.y_dtype == TSR_DT_UINT8 ? 255 : 127;
    if (!tsr_test_rnd(rs, 0, 3))
        p.act_min += tsr_test_rnd(rs, 0, 50), p.act_max -= tsr_test_rnd(rs, 0, 50);
    return p;
}

static void test_random(void **state)
{
    (void)state;
    uint64_t rs = tsr_test_seed("TSR_GAVG_SEED", 0x6a5ull);
    static const struct {
        const char *cfg;
        int cases, maxc, maxhw;
    } cfgs[] = {{"tiny", 40, 10, 50}, {"default", 25, 70, 40}, {"b2", 15, 20, 30}, {"tiny+exact", 15, 9, 40},
                {"default+exact", 10, 40, 30}};
    int chunked = 0, multi = 0, left = 0;
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        tsr_device_t *dev = tsr_test_open(cfgs[k].cfg, rs | 1);
        for (int i = 0; i < cfgs[k].cases; i++) {
            const int n = tsr_test_rnd(&rs, 1, 3), c = tsr_test_rnd(&rs, 1, cfgs[k].maxc),
                      h = tsr_test_rnd(&rs, 1, cfgs[k].maxhw), w = tsr_test_rnd(&rs, 1, cfgs[k].maxhw);
            tsr_gavg_params_t p = rnd_params(&rs, n, c, h, w);
            if (strstr(cfgs[k].cfg, "exact") && i % 3 == 0)
                p.fscale = 0.0f; /* fixed point on an exact config */
            left |= p.shift > 0;
            char what[64];
            snprintf(what, sizeof what, "%s case %d", cfgs[k].cfg, i);
            run_case(dev, &p, NULL, &rs, what);
            tsr_dtensor_t tx, ty;
            const tsr_config_t *cf = tsr_device_config(dev);
            assert_int_equal(tsr_dtensor_init(cf, n, c, h, w, p.x_dtype, p.x_zp, &tx), TSR_OK);
            assert_int_equal(tsr_dtensor_init(cf, n, c, 1, 1, p.y_dtype, p.y_zp, &ty), TSR_OK);
            assert_int_equal(tsr_dtensor_alloc(dev, &tx), TSR_OK);
            assert_int_equal(tsr_dtensor_alloc(dev, &ty), TSR_OK);
            tsr_gavg_plan_t pl;
            assert_int_equal(tsr_gavg_plan_tensors(dev, &p, &tx, &ty, &pl), TSR_OK);
            chunked |= pl.group == 1 && pl.hw > pl.stage_rows;
            multi |= pl.group > 1 && pl.groups > 2;
            tsr_gavg_plan_free(dev, &pl);
            tsr_dtensor_free(dev, &tx);
            tsr_dtensor_free(dev, &ty);
        }
        tsr_device_close(dev);
    }
    assert_true(chunked && multi && left);
}

/* The largest sums: a 112x112 window of the type's minimum or maximum, both zero point extremes. */
static void test_extremes(void **state)
{
    (void)state;
    static uint8_t x[2 * 16 * 112 * 112];
    const int hw = 112 * 112;
    for (int k = 0; k < 2; k++) {
        tsr_device_t *dev = tsr_test_open(k ? "default+exact" : "default", 9);
        for (int d = 0; d < 2; d++) {
            tsr_gavg_params_t p;
            memset(&p, 0, sizeof p);
            p.n = 2, p.c = 16, p.h = 112, p.w = 112;
            p.x_dtype = p.y_dtype = d ? TSR_DT_UINT8 : TSR_DT_INT8;
            p.x_zp = d ? 0 : -128;
            p.y_zp = d ? 0 : -128;
            set_scale(&p, 0.05f, 0.05f / 1.3f);
            p.act_min = d ? 0 : -128, p.act_max = d ? 255 : 127;
            for (int i = 0; i < 2 * 16; i++)
                memset(x + (size_t)i * hw, i % 3 == 0 ? 0x00 : i % 3 == 1 ? 0xff : (d ? 0x80 : 0x7f), (size_t)hw);
            run_case(dev, &p, x, NULL, "extremes");
            p.x_zp = d ? 255 : 127; /* the other side */
            run_case(dev, &p, x, NULL, "extremes, zero point at the top");
        }
        tsr_device_close(dev);
    }
}

/* The same bytes as a depthwise conv of weight 1 over the window with the same requantization. */
static void test_conv_form(void **state)
{
    (void)state;
    uint64_t rs = tsr_test_seed("TSR_GAVG_SEED", 0xc0full);
    tsr_device_t *dev = tsr_test_open("default", 11);
    static const int shapes[][2] = {{7, 7}, {14, 14}, {28, 28}, {32, 30}};
    for (int i = 0; i < 4; i++) {
        const int C = 40, H = shapes[i][0], W = shapes[i][1];
        tsr_gavg_params_t p = rnd_params(&rs, 1, C, H, W);
        p.act_min = p.y_dtype == TSR_DT_UINT8 ? 0 : -128;
        p.act_max = p.y_dtype == TSR_DT_UINT8 ? 255 : 127;
        const size_t nx = (size_t)C * H * W;
        uint8_t *x = malloc(nx), *w = malloc((size_t)C * H * W), y1[64], y2[64];
        assert_true(x && w);
        for (size_t j = 0; j < nx; j++)
            x[j] = (uint8_t)tsr_test_next(&rs);
        memset(w, 1, (size_t)C * H * W);
        assert_int_equal(tsr_gavg_run(dev, &p, x, y1), TSR_OK);
        static const int32_t zero = 0;
        tsr_conv2d_params_t cp;
        memset(&cp, 0, sizeof cp);
        cp.n = 1, cp.c_in = cp.c_out = C, cp.h = H, cp.w = W, cp.kh = H, cp.kw = W, cp.stride_h = cp.stride_w = 1;
        cp.groups = C;
        cp.x_dtype = p.x_dtype, cp.x_zp = p.x_zp, cp.w_dtype = TSR_DT_INT8, cp.w_zp = &zero, cp.w_zp_count = 1;
        cp.y_dtype = p.y_dtype, cp.y_zp = p.y_zp, cp.mult = &p.mult, cp.shift = &p.shift, cp.rq_count = 1;
        cp.act_min = p.act_min, cp.act_max = p.act_max;
        if (tsr_conv2d_run(dev, &cp, x, w, NULL, y2))
            fail_msg("conv %dx%d: %s", H, W, tsr_errmsg());
        assert_memory_equal(y1, y2, (size_t)C);
        free(x), free(w);
    }
    tsr_device_close(dev);
}

/* x -> clip -> gavg -> mul(x', gate): the graph against the network reference. */
static void test_graph(void **state)
{
    (void)state;
    uint64_t rs = tsr_test_seed("TSR_GAVG_SEED", 0x96aull);
    static const char *cfgs[] = {"tiny", "default", "b2"};
    for (int k = 0; k < 3; k++) {
        tsr_device_t *dev = tsr_test_open(cfgs[k], 13);
        const int N = k == 2 ? 3 : 1, C = 20, H = 30, W = 41;
        tsr_netdesc_t nd;
        memset(&nd, 0, sizeof nd);
        snprintf(nd.name, sizeof nd.name, "gavg");
        nd.ntensors = 4;
        nd.tensors = calloc(4, sizeof *nd.tensors);
        assert_non_null(nd.tensors);
        nd.tensors[0] = (tsr_nd_tensor_t){N, C, H, W, TSR_DT_UINT8, 100, 1};
        nd.tensors[1] = (tsr_nd_tensor_t){N, C, H, W, TSR_DT_UINT8, 100, 1};
        nd.tensors[2] = (tsr_nd_tensor_t){N, C, 1, 1, TSR_DT_UINT8, 7, 1};
        nd.tensors[3] = (tsr_nd_tensor_t){N, C, H, W, TSR_DT_INT8, -3, 1};
        int cap = 0;
        tsr_nd_node_t *nn = tsr_netdesc_add_node(&nd, &cap, TSR_ND_CLIP, "relu", 0, -1);
        nn->out = 1;
        nn->clip = (tsr_clip_params_t){{N, C, H, W, TSR_DT_UINT8, 100}, {N, C, H, W, TSR_DT_UINT8, 100}, 100, 255};
        nn = tsr_netdesc_add_node(&nd, &cap, TSR_ND_GAVG, "squeeze", 1, -1);
        nn->out = 2;
        tsr_gavg_params_t *g = &nn->gavg;
        g->n = N, g->c = C, g->h = H, g->w = W, g->x_dtype = TSR_DT_UINT8, g->x_zp = 100, g->y_dtype = TSR_DT_UINT8;
        g->y_zp = 7, g->act_min = 0, g->act_max = 255;
        set_scale(g, 0.04f, 0.011f);
        g->fscale = 0.0f;
        nn = tsr_netdesc_add_node(&nd, &cap, TSR_ND_MUL, "excite", 1, 2);
        nn->out = 3;
        tsr_mul_params_t *mp = &nn->mul;
        mp->x = (tsr_eltwise_desc_t){N, C, H, W, TSR_DT_UINT8, 100};
        mp->s = (tsr_eltwise_desc_t){N, C, 1, 1, TSR_DT_UINT8, 7};
        mp->y = (tsr_eltwise_desc_t){N, C, H, W, TSR_DT_INT8, -3};
        mp->act_min = -128, mp->act_max = 127;
        for (;;) {
            tsr_mul_fixed_t fx;
            const float a = 0.04f, b = 0.002f + 0.0001f * (float)tsr_test_rnd(&rs, 0, 100), yy = 0.05f;
            const float ab = a * b;
            mp->scale = ab / yy;
            if (!tsr_mul_fixed(mp, &fx))
                break;
        }
        nd.output = 3;
        const size_t cnt = (size_t)N * C * H * W;
        tsr_test_graph_vs_netref(dev, &nd, cnt, cnt, &rs, "gavg", cfgs[k]);
        tsr_netdesc_free(&nd);
        tsr_device_close(dev);
    }
}

static void expect_refused(int rc, const char *what)
{
    if (rc != TSR_EINVAL || !strstr(tsr_errmsg(), what))
        fail_msg("expected a refusal naming \"%s\", got %d: %s", what, rc, tsr_errmsg());
}

static void test_refusals(void **state)
{
    (void)state;
    tsr_gavg_params_t p, q;
    memset(&p, 0, sizeof p);
    p.n = 1, p.c = 8, p.h = 100, p.w = 100;
    p.x_dtype = TSR_DT_UINT8, p.x_zp = 3, p.y_dtype = TSR_DT_INT8, p.y_zp = 0;
    set_scale(&p, 0.1f, 0.05f);
    p.act_min = -128, p.act_max = 127;
    assert_int_equal(tsr_gavg_check(&p), TSR_OK);
    q = p, q.mult = 1 << 30, q.shift = 12; /* 255 * 10,000 * 2^12 > 2^31 */
    expect_refused(tsr_gavg_check(&q), "overflow");
    q = p, q.shift = 31;
    expect_refused(tsr_gavg_check(&q), "shift");
    q = p, q.mult = -1;
    expect_refused(tsr_gavg_check(&q), "multiplier");
    q = p, q.fscale = -1.0f;
    expect_refused(tsr_gavg_check(&q), "fscale");
    q = p, q.y_zp = 200;
    expect_refused(tsr_gavg_check(&q), "zero point");
    q = p, q.act_max = 200;
    expect_refused(tsr_gavg_check(&q), "clamp");
    q = p, q.h = 0;
    expect_refused(tsr_gavg_check(&q), "shape");
    q = p, q.x_dtype = (tsr_dtype_e)7;
    expect_refused(tsr_gavg_check(&q), "dtype");
    tsr_device_t *dev = tsr_test_open("default", 1);
    tsr_dtensor_t tx, ty;
    const tsr_config_t *cf = tsr_device_config(dev);
    assert_int_equal(tsr_dtensor_init(cf, 1, 8, 100, 100, TSR_DT_UINT8, 3, &tx), TSR_OK);
    assert_int_equal(tsr_dtensor_init(cf, 1, 8, 1, 1, TSR_DT_INT8, 0, &ty), TSR_OK);
    tsr_gavg_plan_t pl;
    expect_refused(tsr_gavg_plan_tensors(dev, &p, &tx, &ty, &pl), "without a buffer");
    assert_int_equal(tsr_dtensor_alloc(dev, &tx), TSR_OK);
    assert_int_equal(tsr_dtensor_alloc(dev, &ty), TSR_OK);
    q = p, q.y_zp = 5;
    expect_refused(tsr_gavg_plan_tensors(dev, &q, &tx, &ty, &pl), "do not match");
    expect_refused(tsr_gavg_plan_tensors(dev, &p, &tx, NULL, &pl), "NULL");
    assert_int_equal(tsr_gavg_plan_tensors(dev, &p, &tx, &ty, &pl), TSR_OK);
    tsr_gavg_plan_free(dev, &pl);
    tsr_gavg_plan_free(dev, &pl);
    tsr_dtensor_free(dev, &tx);
    tsr_dtensor_free(dev, &ty);
    tsr_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random), cmocka_unit_test(test_extremes), cmocka_unit_test(test_conv_form),
        cmocka_unit_test(test_graph),  cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
