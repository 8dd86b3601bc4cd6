/*
 * test_mul: the multiply by a per-channel vector (jit/tsr_mul.h, a
 * squeeze-and-excite block's Mul) on the device, against the plain-C
 * reference tests/tsr_opref.c opref_mul (written from the formula, nothing
 * from jit/):
 *  - every product: x holds all 256 values of its type in each channel's
 *    16x16 pixels and s all 256 values over 256 channels, so one run
 *    covers every (x, s) pair, for random scale sets and zero points, u8
 *    and s8 operands, on default (the integer form) and default+exact
 *    (fscale);
 *  - random shapes, types, zero points, scales and clamps on tiny (tiles of
 *    several blocks and, above 62 rows per block, chunks of one block),
 *    default and b2 (BATCH 2: two batch lanes per row), each element;
 *  - the integer form's parts: a parameter set whose form needs the offset D
 *    and one with both zero points at the re-centring offset (the skipped
 *    immediates), run on the device; scale 0.5 (exact ties of both
 *    parities) has no integer form: refused naming the key, and exact on
 *    default+exact; a real SE Mul whose odd output zero point turns a tie
 *    (fscale not exact: the integer form on both configs);
 *  - in a graph (tsr_graph_from_netdesc): x -> global average pool -> mul
 *    (x, pool) -> add (x) against the whole-network reference
 *    tests/tsr_netref.c;
 *  - refusals: s not [N, C, 1, 1], an output of another shape, a scale that
 *    is not positive and normal, a clamp outside the type, tensors that
 *    do not match the parameters.
 * Backend from TSR_TEST_BACKEND (default fsim; systemc too).
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

#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_error.h"
#include "tsr_graph.h"
#include "tsr_mul.h"
#include "tsr_netdesc.h"
#include "tsr_netref.h"
#include "tsr_opref.h"
#include "tsr_testenv.h"

static opref_dtype_t odt(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8; }

static tsr_eltwise_desc_t desc(int n, int c, int h, int w, tsr_dtype_e dt, int32_t zp)
{
    return (tsr_eltwise_desc_t){n, c, h, w, dt, zp};
}

/* A float32 scale as ONNX Runtime's QLinearMul forms it from the three tensors' scales. */
static float ort_scale(float xs, float ss, float ys)
{
    const float xss = xs * ss;
    return xss / ys;
}

/* p on device dev over host bytes x, s (random unless given): its output
 * against opref_mul, element by element; returns 0, or 1 when the
 * integer form refuses p (and the config has no EXACT_REQUANT, or fscale
 * is not exact for p). */
static int run_case(tsr_device_t *dev, const tsr_mul_params_t *p, const uint8_t *xv, const uint8_t *sv, uint64_t *rs,
                    const char *what)
{
    const size_t nx = (size_t)p->x.n * p->x.c * p->x.h * p->x.w, ns = (size_t)p->x.n * p->x.c;
    uint8_t *x = malloc(nx), *s = malloc(ns), *y = malloc(nx), *want = malloc(nx);
    assert_true(x && s && y && want);
    for (size_t i = 0; i < nx; i++)
        x[i] = xv ? xv[i] : (uint8_t)tsr_test_next(rs);
    for (size_t i = 0; i < ns; i++)
        s[i] = sv ? sv[i] : (uint8_t)tsr_test_next(rs);
    if (!xv && nx > 8)
        for (size_t i = 0; i < nx; i += nx / 8) /* the types' extremes */
            x[i] = (uint8_t)(i & 1 ? 0x80 : 0x7f);
    tsr_mul_fixed_t fx;
    if ((!tsr_device_config(dev)->exact_requant || tsr_mul_fscale_exact(p) != 1) && tsr_mul_fixed(p, &fx)) {
        if (!strstr(tsr_errmsg(), "no exact integer form"))
            fail_msg("%s: refused for another reason: %s", what, tsr_errmsg());
        free(x), free(s), free(y), free(want);
        return 1;
    }
    if (tsr_mul_run(dev, p, x, s, y))
        fail_msg("%s: %s", what, tsr_errmsg());
    opref_tensor_t X = {odt(p->x.dtype), p->x.n, p->x.c, p->x.h, p->x.w, x, p->x.zp};
    opref_tensor_t S = {odt(p->s.dtype), p->s.n, p->s.c, 1, 1, s, p->s.zp};
    opref_tensor_t Y = {odt(p->y.dtype), p->y.n, p->y.c, p->y.h, p->y.w, want, p->y.zp};
    assert_int_equal(opref_mul(&X, &S, p->scale, p->act_min, p->act_max, &Y), TSR_OK);
    for (size_t i = 0; i < nx; i++)
        if (y[i] != want[i]) {
            const size_t hw = (size_t)p->x.h * p->x.w;
            fail_msg("%s: [%d,%d,%d,%d] scale %a zps %d %d %d: element %zu (x byte %u, s byte %u): device %u, "
                     "reference %u", what, p->x.n, p->x.c, p->x.h, p->x.w, (double)p->scale, p->x.zp, p->s.zp,
                     p->y.zp, i, x[i], s[i / hw], y[i], want[i]);
        }
    free(x), free(s), free(y), free(want);
    return 0;
}

static int32_t rnd_zp(uint64_t *rs, tsr_dtype_e d)
{
    return d == TSR_DT_UINT8 ? tsr_test_rnd(rs, 0, 255) : tsr_test_rnd(rs, -128, 127);
}

/* Scales as a quantizer writes them: activations' ranges / 255, the gate's often 1/255. */
static float rnd_scale(uint64_t *rs, double lo, double hi)
{
    return (float)(lo + (hi - lo) * (double)(tsr_test_next(rs) >> 11) / 9007199254740992.0);
}

static tsr_mul_params_t rnd_params(uint64_t *rs, int n, int c, int h, int w)
{
    tsr_mul_params_t p;
    memset(&p, 0, sizeof p);
    const tsr_dtype_e dx = tsr_test_rnd(rs, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8,
                      ds = tsr_test_rnd(rs, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8,
                      dy = tsr_test_rnd(rs, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p.x = desc(n, c, h, w, dx, rnd_zp(rs, dx));
    p.s = desc(n, c, 1, 1, ds, rnd_zp(rs, ds));
    p.y = desc(n, c, h, w, dy, rnd_zp(rs, dy));
    const float ss = tsr_test_rnd(rs, 0, 1) ? 1.0f / 255.0f : rnd_scale(rs, 0.001, 0.05);
    p.scale = ort_scale(rnd_scale(rs, 0.005, 0.3), ss, rnd_scale(rs, 0.005, 0.3));
    p.act_min = dy == TSR_DT_UINT8 ? 0 : -128;
    p.act_max = dy == TSR_DT_UINT8 ? 255 : 127;
    if (tsr_test_rnd(rs, 0, 3) == 0) { /* a fused clamp */
        p.act_min += tsr_test_rnd(rs, 0, 60);
        p.act_max -= tsr_test_rnd(rs, 0, 60);
    }
    return p;
}

/* Every (x, s) pair of the types in one run: s[c] = the c-th value, x[c][h][w] = the (16h + w)-th. */
static void every_product(tsr_device_t *dev, tsr_mul_params_t *p, const char *what)
{
    static uint8_t xv[256 * 256], sv[256];
    for (int c = 0; c < 256; c++) {
        sv[c] = (uint8_t)c;
        for (int i = 0; i < 256; i++)
            xv[c * 256 + i] = (uint8_t)(i * 7 + c); /* each channel a permutation of the bytes */
    }
    p->x.n = p->s.n = p->y.n = 1;
    p->x.c = p->s.c = p->y.c = 256;
    p->x.h = p->x.w = p->y.h = p->y.w = 16;
    assert_int_equal(run_case(dev, p, xv, sv, NULL, what), 0);
}

static void test_every_product(void **state)
{
    (void)state;
    uint64_t rs = tsr_test_seed("TSR_MUL_SEED", 0x5eull);
    static const char *cfgs[] = {"default", "default+exact"};
    for (int k = 0; k < 2; k++) {
        tsr_device_t *dev = tsr_test_open(cfgs[k], rs | 1);
        int done = 0;
        for (int i = 0; done < 6; i++) {
            assert_true(i < 100);
            tsr_mul_params_t p = rnd_params(&rs, 1, 1, 1, 1);
            tsr_mul_fixed_t fx;
            if ((!k || tsr_mul_fscale_exact(&p) != 1) && tsr_mul_fixed(&p, &fx))
                continue; /* (the rare set without an integer form, or fscale: test_fixed) */
            char what[64];
            snprintf(what, sizeof what, "%s, every product, set %d", cfgs[k], done);
            every_product(dev, &p, what);
            done++;
        }
        tsr_device_close(dev);
    }
}

static void test_random(void **state)
{
    (void)state;
    uint64_t rs = tsr_test_seed("TSR_MUL_SEED", 0x3a1ull);
    static const struct {
        const char *cfg;
        int cases, maxc, maxhw;
    } cfgs[] = {{"tiny", 40, 13, 12}, {"default", 25, 70, 20}, {"b2", 20, 20, 11}, {"tiny+exact", 15, 9, 10}};
    int refused = 0, ran = 0, chunked = 0, multi = 0;
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        tsr_device_t *dev = tsr_test_open(cfgs[k].cfg, rs | 1);
        for (int i = 0; i < cfgs[k].cases; i++) {
            const int n = tsr_test_rnd(&rs, 1, 3), c = tsr_test_rnd(&rs, 1, cfgs[k].maxc),
                      h = tsr_test_rnd(&rs, 1, cfgs[k].maxhw), w = tsr_test_rnd(&rs, 1, cfgs[k].maxhw);
            tsr_mul_params_t p = rnd_params(&rs, n, c, h, w);
            char what[64];
            snprintf(what, sizeof what, "%s case %d", cfgs[k].cfg, i);
            if (run_case(dev, &p, NULL, NULL, &rs, what)) {
                refused++;
                continue;
            }
            ran++;
            /* the tiling the plan chose (tiny: 128 accumulator rows, a block of more than 62 rows is chunked) */
            tsr_dtensor_t t[3];
            const tsr_eltwise_desc_t *d[3] = {&p.x, &p.s, &p.y};
            for (int j = 0; j < 3; j++) {
                assert_int_equal(tsr_dtensor_init(tsr_device_config(dev), d[j]->n, d[j]->c, d[j]->h, d[j]->w,
                                                  d[j]->dtype, d[j]->zp, &t[j]), TSR_OK);
                assert_int_equal(tsr_dtensor_alloc(dev, &t[j]), TSR_OK);
            }
            tsr_mul_plan_t pl;
            assert_int_equal(tsr_mul_plan_tensors(dev, &p, &t[0], &t[1], &t[2], &pl), TSR_OK);
            chunked |= pl.tile_blocks == 0 && pl.tiles > 2;
            multi |= pl.tile_blocks > 1 && pl.tiles > 2;
            assert_true(pl.alu_ops >= pl.rows * 3);
            tsr_mul_plan_free(dev, &pl);
            for (int j = 0; j < 3; j++)
                tsr_dtensor_free(dev, &t[j]);
        }
        tsr_device_close(dev);
    }
    assert_true(ran >= 95);
    assert_true(refused <= 3);
    assert_true(chunked && multi);
}

/* The integer form's parts, and the set that has none. */
static void test_fixed(void **state)
{
    (void)state;
    uint64_t rs = tsr_test_seed("TSR_MUL_SEED", 0xf1dull);
    tsr_device_t *dev = tsr_test_open("default", 3);
    /* a set whose form needs the offset D (about 1 in 100 random sets) */
    int found = 0;
    for (int i = 0; i < 3000 && !found; i++) {
        tsr_mul_params_t p = rnd_params(&rs, 1, 1, 1, 1);
        tsr_mul_fixed_t fx;
        if (tsr_mul_fixed(&p, &fx) || !fx.offset)
            continue;
        found = 1;
        assert_true(fx.offset >= -32768 && fx.offset < 32768 && fx.shift >= 0 && fx.shift <= 31 && fx.mult > 0);
        every_product(dev, &p, "a form with an offset");
    }
    assert_true(found);
    /* both zero points at the re-centring offset: no immediate add on either side */
    tsr_mul_params_t p;
    memset(&p, 0, sizeof p);
    p.x = desc(2, 37, 9, 5, TSR_DT_UINT8, 128);
    p.s = desc(2, 37, 1, 1, TSR_DT_INT8, 0);
    p.y = desc(2, 37, 9, 5, TSR_DT_UINT8, 3);
    p.scale = ort_scale(0.05f, 1.0f / 255.0f, 0.07f);
    p.act_min = 0, p.act_max = 255;
    assert_int_equal(run_case(dev, &p, NULL, NULL, &rs, "zero points at the offsets"), 0);
    /* scale 0.5: (x - zp) * (s - zp) / 2 has exact ties of both parities, ties to even: no integer form */
    p.x = desc(1, 256, 16, 16, TSR_DT_INT8, 0);
    p.s = desc(1, 256, 1, 1, TSR_DT_INT8, 0);
    p.y = desc(1, 256, 16, 16, TSR_DT_INT8, 0);
    p.scale = 0.5f;
    p.act_min = -128, p.act_max = 127;
    tsr_mul_fixed_t fx;
    assert_int_equal(tsr_mul_fixed(&p, &fx), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "EXACT_REQUANT"));
    static uint8_t x[256 * 256], s[256], y[256 * 256];
    assert_int_equal(tsr_mul_run(dev, &p, x, s, y), TSR_EINVAL); /* refused by the plan too */
    assert_non_null(strstr(tsr_errmsg(), "no exact integer form"));
    tsr_device_close(dev);
    dev = tsr_test_open("default+exact", 4);
    every_product(dev, &p, "scale 0.5 with fscale");
    /* EfficientNet-B0 u8 224x224 features.4.1's SE Mul: y_zp 7 is odd and p = 25,803 gives float32(p) * f =
       138.5, so MLAS's float32 sum with the zero point, 145.5, goes to 146 where fscale then + 7 gives 145: the
       plan takes the integer form on this config (and it is the only form on default) */
    p.x = desc(1, 256, 16, 16, TSR_DT_UINT8, 5);
    p.s = desc(1, 256, 1, 1, TSR_DT_UINT8, 0);
    p.y = desc(1, 256, 16, 16, TSR_DT_UINT8, 7);
    p.scale = ort_scale(0.053469732f, 0.0028141001f, 0.028032897f);
    p.act_min = 0, p.act_max = 255;
    assert_int_equal(tsr_mul_fscale_exact(&p), 0);
    every_product(dev, &p, "odd zero point at a tie, EXACT_REQUANT");
    tsr_device_close(dev);
    dev = tsr_test_open("default", 5);
    every_product(dev, &p, "odd zero point at a tie, integer form");
    tsr_device_close(dev);
}

/* tsr_mul_fixed's search as it was at 8fef84a, before its check ran on
 * rows (each product through tsr_alu_apply twice), kept to compare: the
 * form found (or the refusal) must be the same. */
static int32_t old_target(const tsr_mul_params_t *p, int32_t pr)
{
    const int64_t q = (int64_t)nearbyintf((float)pr * p->scale + (float)p->y.zp);
    return (int32_t)(q < p->act_min ? p->act_min : q > p->act_max ? p->act_max : q);
}

static int64_t old_p_for_m(int64_t mm, int64_t mu)
{
    if (mm > INT32_MAX)
        return INT64_MAX / 4;
    if (mm <= INT32_MIN)
        return INT64_MIN / 4;
    const int64_t a = (2 * mm - 1) * (INT64_C(1) << 30), q = a / mu;
    return q + (a % mu > 0);
}

static int64_t old_m_for_j(int64_t j, int t)
{
    if (!t)
        return j;
    const int64_t v = j * (INT64_C(1) << t) - (INT64_C(1) << (t - 1));
    return j > 0 ? v : v + 1;
}

static int old_fixed(const tsr_mul_params_t *p, tsr_mul_fixed_t *fx)
{
    static int32_t ps[2 * 65025 + 1], tg[2 * 65025 + 1];
    static uint8_t seen[2 * 65025 + 1];
    memset(seen, 0, sizeof seen);
    const int32_t a0 = (p->x.dtype == TSR_DT_UINT8 ? 0 : -128) - p->x.zp, b0 = (p->s.dtype == TSR_DT_UINT8 ? 0 : -128) - p->s.zp;
    for (int32_t a = a0; a < a0 + 256; a++)
        for (int32_t b = b0; b < b0 + 256; b++)
            seen[a * b + 65025] = 1;
    int np = 0;
    for (int32_t q = -65025; q <= 65025; q++)
        if (seen[q + 65025]) {
            ps[np] = q;
            tg[np++] = old_target(p, q);
        }
    int found = 0, tmax = 31;
    while (tmax >= 0 && ldexp((double)p->scale, 16 + tmax) >= 2147483647.0)
        tmax--;
    for (int t = tmax; t >= 0 && t >= tmax - 2 && !found; t--) {
        const int64_t mu0 = llround(ldexp((double)p->scale, 16 + t));
        for (int k = 0; k <= 1024 && !found; k++) {
            const int64_t mu = mu0 + (k & 1 ? (k + 1) / 2 : -(k / 2));
            if (mu <= 0 || mu > INT32_MAX)
                continue;
            int64_t dlo = -(1 << 15), dhi = (1 << 15) - 1;
            for (int i = 0; i < np && dlo <= dhi; i++) {
                const int64_t P0 = (int64_t)ps[i] * 32768;
                if (tg[i] > p->act_min) {
                    const int64_t d = old_p_for_m(old_m_for_j((int64_t)tg[i] - p->y.zp, t), mu) - P0;
                    dlo = d > dlo ? d : dlo;
                }
                if (tg[i] < p->act_max) {
                    const int64_t d = old_p_for_m(old_m_for_j((int64_t)tg[i] + 1 - p->y.zp, t), mu) - 1 - P0;
                    dhi = d < dhi ? d : dhi;
                }
            }
            if (dlo > dhi)
                continue;
            fx->mult = (int32_t)mu;
            fx->shift = t;
            fx->offset = (int32_t)(dlo <= 0 && dhi >= 0 ? 0 : dlo > 0 ? dlo : dhi);
            found = 1;
        }
    }
    const int32_t off = p->y.dtype == TSR_DT_UINT8 ? 128 : 0;
    const uint32_t zp = (uint32_t)(p->y.zp - off) & 511u, lo = (uint32_t)(p->act_min - off) & 511u,
                   hi = (uint32_t)(p->act_max - off) & 511u;
    const int32_t rq = found ? (int32_t)((uint32_t)fx->shift | zp << 5 | lo << 14 | hi << 23) : 0;
    for (int i = 0; i < np && found; i++) {
        const int32_t P = (int32_t)((int64_t)ps[i] * 32768 + fx->offset);
        if (tsr_alu_apply(TSR_ALU_RQFIN, tsr_alu_apply(TSR_ALU_MULHR, P, fx->mult, 32), rq, 32) + off != tg[i])
            found = 0;
    }
    return found ? TSR_OK : TSR_EINVAL;
}

/* The form tsr_mul_fixed finds equals the old search's on random parameter
 * sets (u8/s8, zero points, scales, clamps), refusals included. */
static void test_fixed_same(void **state)
{
    (void)state;
    uint64_t rs = tsr_test_seed("TSR_MUL_SEED", 0xf1e5ull);
    int refused = 0;
    for (int i = 0; i < 80; i++) {
        tsr_mul_params_t p = rnd_params(&rs, 1, 1, 1, 1);
        if (i % 20 == 19)
            p.scale = ldexpf(1.0f, -(int)tsr_test_rnd(&rs, 1, 9)); /* exact ties: mostly refused */
        tsr_mul_fixed_t a, b;
        memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
        const int ra = tsr_mul_fixed(&p, &a), rb = old_fixed(&p, &b);
        if (ra != rb || (!ra && (a.mult != b.mult || a.shift != b.shift || a.offset != b.offset)))
            fail_msg("set %d (scale %a, zps %d %d %d): rc %d form %d/%d/%d, the old search rc %d form %d/%d/%d", i,
                     (double)p.scale, (int)p.x.zp, (int)p.s.zp, (int)p.y.zp, ra, (int)a.mult, a.shift,
                     (int)a.offset, rb, (int)b.mult, b.shift, (int)b.offset);
        refused += ra != 0;
    }
    assert_true(refused > 0 && refused < 80);
}

/* x -> gap -> mul(x, gap) -> add(mul, x), against the network reference. */
static void test_graph(void **state)
{
    (void)state;
    uint64_t rs = tsr_test_seed("TSR_MUL_SEED", 0x9a9ull);
    static const char *cfgs[] = {"default", "tiny", "b2"};
    for (int k = 0; k < 3; k++) {
        tsr_device_t *dev = tsr_test_open(cfgs[k], 5);
        const int N = k == 2 ? 3 : 1, C = 24, H = 10, W = 7;
        tsr_netdesc_t nd;
        memset(&nd, 0, sizeof nd);
        snprintf(nd.name, sizeof nd.name, "se");
        nd.ntensors = 4;
        nd.tensors = calloc(4, sizeof *nd.tensors);
        assert_non_null(nd.tensors);
        nd.tensors[0] = (tsr_nd_tensor_t){N, C, H, W, TSR_DT_UINT8, 121, 1};
        nd.tensors[1] = (tsr_nd_tensor_t){N, C, 1, 1, TSR_DT_UINT8, 121, 1};
        nd.tensors[2] = (tsr_nd_tensor_t){N, C, H, W, TSR_DT_UINT8, 97, 1};
        nd.tensors[3] = (tsr_nd_tensor_t){N, C, H, W, TSR_DT_UINT8, 130, 1};
        int cap = 0;
        tsr_nd_node_t *nn = tsr_netdesc_add_node(&nd, &cap, TSR_ND_POOL, "gap", 0, -1);
        assert_non_null(nn);
        nn->out = 1;
        nn->pool = (tsr_pool_params_t){.kind = TSR_POOL_GLOBAL_AVG, .n = N, .c = C, .h = H, .w = W, .dtype = TSR_DT_UINT8,
                                       .zp = 121};
        nn = tsr_netdesc_add_node(&nd, &cap, TSR_ND_MUL, "se.mul", 0, 1);
        assert_non_null(nn);
        nn->out = 2;
        nn->mul.x = desc(N, C, H, W, TSR_DT_UINT8, 121);
        nn->mul.s = desc(N, C, 1, 1, TSR_DT_UINT8, 121);
        nn->mul.y = desc(N, C, H, W, TSR_DT_UINT8, 97);
        nn->mul.act_min = 0, nn->mul.act_max = 255;
        for (;;) { /* (a scale set with an integer form, for the configs without fscale) */
            tsr_mul_fixed_t fx;
            nn->mul.scale = ort_scale(rnd_scale(&rs, 0.01, 0.1), 1.0f / 255.0f, rnd_scale(&rs, 0.01, 0.1));
            if (!tsr_mul_fixed(&nn->mul, &fx))
                break;
        }
        nn = tsr_netdesc_add_node(&nd, &cap, TSR_ND_ADD, "add", 2, 0);
        assert_non_null(nn);
        nn->out = 3;
        tsr_add_params_t *ap = &nn->add;
        ap->a = desc(N, C, H, W, TSR_DT_UINT8, 97);
        ap->b = desc(N, C, H, W, TSR_DT_UINT8, 121);
        ap->y = desc(N, C, H, W, TSR_DT_UINT8, 130);
        ap->left_shift = 20, ap->mult_a = 1 << 30, ap->mult_b = 1 << 30, ap->shift_a = ap->shift_b = 0;
        ap->mult_out = 1 << 30, ap->shift_out = 0, ap->act_min = 0, ap->act_max = 255;
        nd.output = 3;
        const size_t cnt = (size_t)N * C * H * W;
        tsr_test_graph_vs_netref(dev, &nd, cnt, cnt, &rs, "mul", cfgs[k]);
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
    tsr_mul_params_t p, q;
    memset(&p, 0, sizeof p);
    p.x = desc(1, 8, 4, 4, TSR_DT_UINT8, 10);
    p.s = desc(1, 8, 1, 1, TSR_DT_UINT8, 0);
    p.y = desc(1, 8, 4, 4, TSR_DT_INT8, 0);
    p.scale = ort_scale(0.05f, 1.0f / 255.0f, 0.07f); /* (a decimal scale like 0.01 has no integer form) */
    p.act_min = -128, p.act_max = 127;
    assert_int_equal(tsr_mul_check(&p, NULL), TSR_OK);
    q = p, q.s.h = 4;
    expect_refused(tsr_mul_check(&q, NULL), "per-channel vector");
    q = p, q.s.c = 4;
    expect_refused(tsr_mul_check(&q, NULL), "per-channel vector");
    q = p, q.y.w = 2;
    expect_refused(tsr_mul_check(&q, NULL), "output shape");
    const float bad[4] = {0.0f, -1.0f, NAN, 1e-40f};
    for (int i = 0; i < 4; i++) {
        q = p, q.scale = bad[i];
        expect_refused(tsr_mul_check(&q, NULL), "scale");
    }
    q = p, q.act_max = 200;
    expect_refused(tsr_mul_check(&q, NULL), "clamp");
    q = p, q.x.zp = 300;
    expect_refused(tsr_mul_check(&q, NULL), "zero point");
    tsr_device_t *dev = tsr_test_open("default", 1);
    tsr_dtensor_t t[3];
    const tsr_eltwise_desc_t *d[3] = {&p.x, &p.s, &p.y};
    for (int j = 0; j < 3; j++) {
        assert_int_equal(tsr_dtensor_init(tsr_device_config(dev), d[j]->n, d[j]->c, d[j]->h, d[j]->w, d[j]->dtype,
                                          d[j]->zp, &t[j]), TSR_OK);
        assert_int_equal(tsr_dtensor_alloc(dev, &t[j]), TSR_OK);
    }
    tsr_mul_plan_t pl;
    q = p, q.s.zp = 3; /* the tensor's zero point is 0 */
    expect_refused(tsr_mul_plan_tensors(dev, &q, &t[0], &t[1], &t[2], &pl), "does not match");
    expect_refused(tsr_mul_plan_tensors(dev, &p, &t[0], &t[0], &t[2], &pl), "does not match");
    expect_refused(tsr_mul_plan_tensors(dev, &p, &t[0], NULL, &t[2], &pl), "NULL");
    if (tsr_mul_plan_tensors(dev, &p, &t[0], &t[1], &t[2], &pl))
        fail_msg("plan: %s", tsr_errmsg());
    tsr_mul_plan_free(dev, &pl);
    tsr_mul_plan_free(dev, &pl); /* (twice: safe) */
    for (int j = 0; j < 3; j++)
        tsr_dtensor_free(dev, &t[j]);
    tsr_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_product), cmocka_unit_test(test_random), cmocka_unit_test(test_fixed),
        cmocka_unit_test(test_fixed_same),
        cmocka_unit_test(test_graph),         cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
