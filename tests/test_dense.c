/*
 * test_dense: the dense JIT operator (jit/tsr_dense.c, lowered through the
 * conv2d JIT) and the scale quantization helpers (jit/tsr_quant.c), both
 * against the independent plain-C reference of jit/operators.md
 * (tests/tsr_opref.c), exact equality.
 *
 * Dense: random cases over N, K, M (K not a multiple of BLOCK_IN, M not a
 * multiple of BLOCK_OUT, N > 1 and N > BATCH), dtypes, zero points per
 * tensor and per output (including the ones that need the split weight
 * reduction), bias, per-tensor and per-channel requantization and clamps,
 * on tiny/default/large and a BATCH 2 and a BLOCK_IN != BLOCK_OUT config.
 * Weights span their whole dtype range. Failures print the seed, the case
 * and the first differing element. Backend from TSR_TEST_BACKEND (default
 * fsim with a random stage interleaving; other backends run a tenth of the
 * random cases); TSR_DENSE_SEED overrides the base seed, TSR_DENSE_FILTER
 * selects tests (cmocka pattern).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_dense.h"
#include "tsr_driver.h"
#include "tsr_dtype.h"
#include "tsr_error.h"
#include "tsr_opref.h"
#include "tsr_testenv.h"
#include "tsr_quant.h"
#include "tsr_requant.h"

static const char *backend(void) { return tsr_test_backend(); }

static int is_fsim(void) { return !strcmp(backend(), "fsim"); }

/* Random case counts: full on fsim, a tenth on the (much slower) RTL. */
static int scaled(int n) { return is_fsim() ? n : (n + 9) / 10; }

static uint64_t base_seed(void) { return tsr_test_seed("TSR_DENSE_SEED", 20261123u); }


static tsr_device_t *open_dev(const char *name) { return tsr_test_open(name, base_seed() | 1); }

static uint64_t rng_next(uint64_t *s) { return tsr_test_next(s); }
static int rnd(uint64_t *s, int lo, int hi) { return tsr_test_rnd(s, lo, hi); }
static double rnd01(uint64_t *s) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

static int32_t dmin(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 0 : -128; }
static int32_t dmax(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 255 : 127; }
static opref_dtype_t odt(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8; }
static const char *dn(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? "u8" : "i8"; }

/* ============================================================ tsr_quant */

static void check_qm(double r)
{
    int32_t m1 = -7, s1 = -7, m2 = -7;
    int s2 = -7;
    int rc1 = tsr_quantize_multiplier(r, &m1, &s1);
    char msg1[256];
    snprintf(msg1, sizeof msg1, "%s", tsr_errmsg());
    int rc2 = opref_quantize_multiplier(r, &m2, &s2);
    if (rc1 != rc2)
        fail_msg("quantize_multiplier(%a = %.17g): rc %d (%s), reference %d (%s)", r, r, rc1, msg1, rc2, tsr_errmsg());
    if (!rc1 && (m1 != m2 || s1 != s2))
        fail_msg("quantize_multiplier(%a = %.17g): (%d, %d), reference (%d, %d)", r, r, m1, s1, m2, s2);
}

static void test_quantize_multiplier(void **state)
{
    (void)state;
    /* the examples and edges of operators.md */
    const double edges[] = {0.0, -0.0, 0.5, 1.0, 0.1, ldexp(1, -32), ldexp(1, -33), ldexp(1, -31), ldexp(1.5, -33),
                            ldexp(0.75, -32), ldexp(1, -34), ldexp(1, 29), ldexp(1, 30), ldexp(1, 30) - 0.25,
                            ldexp(1, 30) - 0.25 - ldexp(1, -23), ldexp(1, 30) - 0.5, 1.0 - ldexp(1, -33),
                            1.0 - ldexp(1, -32), 1.0 - ldexp(1, -31), 0.5 - ldexp(1, -34), 0.5 + ldexp(1, -33),
                            ldexp(1, -32) - ldexp(1, -66), DBL_MIN, DBL_TRUE_MIN, DBL_MAX, -1.0, -DBL_MIN, NAN,
                            INFINITY,
                            -INFINITY, 3.0, 1e-10, 1e9, 1e-9, 0.0078125, 2.0 / 3.0};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        check_qm(edges[i]);
    int32_t m, s;
    assert_int_equal(tsr_quantize_multiplier(0.1, &m, &s), TSR_OK);
    assert_int_equal(m, 1717986918);
    assert_int_equal(s, -3);
    assert_int_equal(tsr_quantize_multiplier(ldexp(1, 30), &m, &s), TSR_EBOUNDS);
    assert_non_null(strstr(tsr_errmsg(), "shift"));
    assert_int_equal(tsr_quantize_multiplier(-1, &m, &s), TSR_EINVAL);
    assert_int_equal(tsr_quantize_multiplier(1, NULL, &s), TSR_EINVAL);
    /* random reals: log-uniform over the whole useful range and beyond,
     * uniform mantissas, halfway-rounding mantissas, random bit patterns */
    uint64_t st = base_seed() ^ 0x9a;
    for (int i = 0; i < 200000; i++) {
        double r;
        switch (i % 4) {
        case 0: r = ldexp(0.5 + 0.5 * rnd01(&st), rnd(&st, -40, 33)); break;
        case 1: r = ldexp(rnd01(&st), rnd(&st, -8, 8)); break;
        case 2: { /* q*2^31 exactly halfway between integers */
            double q = (double)((1u << 30) + (uint32_t)rnd(&st, 0, (1 << 30) - 1)) + 0.5;
            r = ldexp(q, rnd(&st, -62, -1));
            break;
        }
        default: {
            uint64_t bits = rng_next(&st);
            memcpy(&r, &bits, sizeof r);
            break;
        }
        }
        check_qm(r);
    }
}

static void check_bound(double real, double scale, int32_t zp, tsr_dtype_e dt)
{
    int32_t q1 = -999, q2 = -999;
    int rc1 = tsr_quantize_bound(real, scale, zp, dt, &q1);
    int rc2 = opref_quantize_bound(real, scale, zp, odt(dt), &q2);
    if (rc1 != rc2 || (!rc1 && q1 != q2))
        fail_msg("quantize_bound(%.17g, %.17g, zp %d, %s): rc %d q %d, reference rc %d q %d", real, scale, zp, dn(dt),
                 rc1, q1, rc2, q2);
}

static void test_quantize_bound(void **state)
{
    (void)state;
    const tsr_dtype_e dts[2] = {TSR_DT_INT8, TSR_DT_UINT8};
    for (int d = 0; d < 2; d++) {
        tsr_dtype_e dt = dts[d];
        const double reals[] = {0, -0.0, 6, -6, 1, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, INFINITY, -INFINITY, NAN, 1e300};
        const double scales[] = {1, 0.5, 0.0235, 1e-30, 0, -1, NAN, INFINITY};
        const int32_t zps[] = {0, -128, 127, 255, 3, -1, 256};
        for (size_t a = 0; a < sizeof reals / sizeof reals[0]; a++)
            for (size_t b = 0; b < sizeof scales / sizeof scales[0]; b++)
                for (size_t c = 0; c < sizeof zps / sizeof zps[0]; c++)
                    check_bound(reals[a], scales[b], zps[c], dt);
    }
    int32_t q;
    assert_int_equal(tsr_quantize_bound(1, 1, 0, TSR_DT_INT16, &q), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "int16"));
    assert_int_equal(tsr_quantize_bound(6.0, 6.0 / 255, 0, TSR_DT_UINT8, &q), TSR_OK);
    assert_int_equal(q, 255);
    assert_int_equal(tsr_quantize_bound(0.5, 1, -3, TSR_DT_INT8, &q), TSR_OK); /* tie away from zero */
    assert_int_equal(q, -2);
    assert_int_equal(tsr_quantize_bound(-0.5, 1, 3, TSR_DT_INT8, &q), TSR_OK);
    assert_int_equal(q, 2);
    uint64_t st = base_seed() ^ 0xb0;
    for (int i = 0; i < 100000; i++) {
        tsr_dtype_e dt = rnd(&st, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
        double scale = ldexp(0.5 + 0.5 * rnd01(&st), rnd(&st, -12, 2));
        double real = i % 3 ? (rnd01(&st) - 0.5) * 300 * scale : (rnd(&st, -300, 300) + 0.5) * scale; /* ties */
        check_bound(real, scale, rnd(&st, dmin(dt), dmax(dt)), dt);
    }
}

static void test_requant_params(void **state)
{
    (void)state;
    uint64_t st = base_seed() ^ 0xc1;
    for (int i = 0; i < 2000; i++) {
        double ws[16];
        int32_t m[16], s[16];
        int n = rnd(&st, 1, 16);
        double xs = ldexp(0.5 + 0.5 * rnd01(&st), rnd(&st, -10, 0));
        double ys = ldexp(0.5 + 0.5 * rnd01(&st), rnd(&st, -10, 0));
        for (int k = 0; k < n; k++)
            ws[k] = k == 3 ? 0 : ldexp(0.5 + 0.5 * rnd01(&st), rnd(&st, -12, 0));
        if (tsr_quant_requant_params(xs, ws, n, ys, m, s))
            fail_msg("requant_params: %s", tsr_errmsg());
        for (int k = 0; k < n; k++) {
            int32_t rm;
            int rs;
            assert_int_equal(opref_quantize_multiplier(xs * ws[k] / ys, &rm, &rs), TSR_OK);
            if (rm != m[k] || rs != s[k])
                fail_msg("channel %d: (%d, %d), reference (%d, %d)", k, m[k], s[k], rm, rs);
        }
    }
    double ws[2] = {0.5, -1};
    int32_t m[2], s[2];
    assert_int_equal(tsr_quant_requant_params(0.5, ws, 2, 1, m, s), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "weight scale [1]"));
    assert_int_equal(tsr_quant_requant_params(0, ws, 1, 1, m, s), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "input scale"));
    assert_int_equal(tsr_quant_requant_params(1, ws, 1, 0, m, s), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "output scale"));
    ws[0] = 1e10;
    assert_int_equal(tsr_quant_requant_params(1, ws, 1, 1e-3, m, s), TSR_EBOUNDS);
    assert_non_null(strstr(tsr_errmsg(), "scale [0]"));
    assert_int_equal(tsr_quant_requant_params(1, ws, 0, 1, m, s), TSR_EINVAL);
}

static void test_add_params(void **state)
{
    (void)state;
    uint64_t st = base_seed() ^ 0xad;
    int ok = 0;
    for (int i = 0; i < 20000; i++) {
        double sa = ldexp(0.5 + 0.5 * rnd01(&st), rnd(&st, -12, 2));
        double sb = i % 7 == 0 ? sa : ldexp(0.5 + 0.5 * rnd01(&st), rnd(&st, -12, 2));
        double sy = i % 11 == 0 ? (double)(float)sa : ldexp(0.5 + 0.5 * rnd01(&st), rnd(&st, -40, 2));
        if (i % 13 == 0)
            sy = i % 2 ? -sy : (i % 3 ? 0 : NAN);
        tsr_add_quant_t q;
        opref_add_params_t r;
        memset(&q, 0x5a, sizeof q);
        int rc1 = tsr_quant_add_params(sa, sb, sy, &q);
        int rc2 = opref_add_params_from_scales(sa, sb, sy, OPREF_INT8, &r);
        if (rc1 != rc2)
            fail_msg("add_params(%.17g, %.17g, %.17g): rc %d, reference %d (%s)", sa, sb, sy, rc1, rc2, tsr_errmsg());
        if (rc1)
            continue;
        ok++;
        if (q.left_shift != r.left_shift || q.mult_a != r.mult_a || q.shift_a != r.shift_a || q.mult_b != r.mult_b ||
            q.shift_b != r.shift_b || q.mult_out != r.mult_out || q.shift_out != r.shift_out)
            fail_msg("add_params(%.17g, %.17g, %.17g): (%d; %d,%d; %d,%d; %d,%d), reference (%d; %d,%d; %d,%d; %d,%d)",
                     sa, sb, sy, q.left_shift, q.mult_a, q.shift_a, q.mult_b, q.shift_b, q.mult_out, q.shift_out,
                     r.left_shift, r.mult_a, r.shift_a, r.mult_b, r.shift_b, r.mult_out, r.shift_out);
    }
    assert_true(ok > 10000);
    tsr_add_quant_t q;
    assert_int_equal(tsr_quant_add_params(1, 1, ldexp(1, -30), &q), TSR_EBOUNDS); /* output multiplier >= 1 */
    assert_non_null(strstr(tsr_errmsg(), "output multiplier"));
    assert_int_equal(tsr_quant_add_params(0, 1, 1, &q), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "input a scale"));
}

/* ================================================================ dense */

typedef struct {
    tsr_dense_params_t p;
    int32_t w_zp[512], mult[512], shift[512];
    int use_bias;
    int auto_rq; /* 1: requantization and bias fitted to the data (set_from_data) */
} dense_case_t;

static uint64_t g_inside, g_total;
static int g_one_call;
static int g_parts[4];

static void describe(const dense_case_t *k, const char *cfg, uint64_t seed, char *buf, size_t n)
{
    const tsr_dense_params_t *p = &k->p;
    snprintf(buf, n,
             "seed %llu config %s backend %s: N %d K %d M %d, x %s zp %d, w %s zp[0] %d (%s), y %s zp %d act [%d,%d], "
             "requant %s mult[0] %d shift[0] %d, bias %d",
             (unsigned long long)seed, cfg, backend(), p->n, p->k, p->m, dn(p->x_dtype), p->x_zp, dn(p->w_dtype),
             p->w_zp[0], p->w_zp_count > 1 ? "per output" : "per tensor", dn(p->y_dtype), p->y_zp, p->act_min,
             p->act_max, p->rq_count > 1 ? "per channel" : "per tensor", p->mult[0], p->shift[0], k->use_bias);
}

/* Fit bias and requantization to the data so that the outputs mostly land
 * inside the clamp range (random data with extreme zero points has large
 * per-channel offsets): bias ~ -mean of each channel's raw sum plus noise,
 * real scale ~ 80 / spread (per channel or the widest), via the test
 * reference's QuantizeMultiplier; some multipliers 0. */
static void set_from_data(dense_case_t *k, const uint8_t *x, const uint8_t *w, int32_t *bias, uint64_t *s)
{
    tsr_dense_params_t *p = &k->p;
    opref_tensor_t ox = {odt(p->x_dtype), p->n, p->k, 1, 1, (void *)x, p->x_zp};
    opref_weights_t ow = {odt(p->w_dtype), p->m, p->k, 1, 1, w, k->w_zp, p->w_zp_count};
    opref_acc_t acc = {p->n, p->m, 1, 1, malloc(sizeof(int32_t) * (size_t)p->n * p->m)};
    assert_non_null(acc.data);
    if (opref_dense_acc(&ox, &ow, NULL, &acc))
        fail_msg("reference acc: %s", tsr_errmsg());
    double dmax_all = 1;
    double *dev = malloc(sizeof(double) * (size_t)p->m);
    assert_non_null(dev);
    for (int m = 0; m < p->m; m++) {
        double mean = 0, d = 1;
        for (int n = 0; n < p->n; n++)
            mean += acc.data[(size_t)n * p->m + m];
        mean /= p->n;
        for (int n = 0; n < p->n; n++)
            d = fmax(d, fabs(acc.data[(size_t)n * p->m + m] - mean));
        if (p->n == 1) /* no spread: use the channel's scale */
            d = fmax(1, fabs(mean) / 4 + 8 * sqrt((double)p->k));
        dev[m] = d;
        dmax_all = fmax(dmax_all, d);
        int32_t noise = (int32_t)(d / 4);
        bias[m] = (int32_t)llround(-mean) + rnd(s, -noise, noise);
    }
    for (int i = 0; i < p->rq_count; i++) {
        double d = p->rq_count > 1 ? dev[i] : dmax_all;
        double real = 80.0 / d * (0.7 + 0.6 * rnd01(s));
        int sh = 0;
        if (opref_quantize_multiplier(real, &k->mult[i], &sh))
            fail_msg("quantize_multiplier(%g): %s", real, tsr_errmsg());
        k->shift[i] = sh;
        if (rnd(s, 0, 15) == 0)
            k->mult[i] = 0;
    }
    free(dev);
    free(acc.data);
}

/* Run one case on dev, compare with opref_dense; returns the plan's parts. */
static int run_case(tsr_device_t *dev, const char *cfgname, dense_case_t *k, uint64_t seed)
{
    tsr_dense_params_t *p = &k->p;
    p->w_zp = k->w_zp;
    p->mult = k->mult;
    p->shift = k->shift;
    size_t nx = (size_t)p->n * p->k, nw = (size_t)p->m * p->k, ny = (size_t)p->n * p->m;
    uint8_t *x = malloc(nx), *w = malloc(nw), *y = malloc(ny), *yr = malloc(ny);
    int32_t *bias = malloc(sizeof(int32_t) * (size_t)p->m);
    assert_true(x && w && y && yr && bias);
    uint64_t s = seed ^ 0x5555;
    for (size_t i = 0; i < nx; i++)
        x[i] = (uint8_t)rnd(&s, dmin(p->x_dtype), dmax(p->x_dtype));
    for (size_t i = 0; i < nw; i++) /* the whole dtype range, whatever the zero point */
        w[i] = (uint8_t)rnd(&s, dmin(p->w_dtype), dmax(p->w_dtype));
    for (int i = 0; i < p->m; i++)
        bias[i] = rnd(&s, -20000, 20000);
    if (k->auto_rq && p->w_zp_count >= 1 && p->rq_count >= 1 && tsr_dense_check(p, NULL) == TSR_OK)
        set_from_data(k, x, w, bias, &s);
    char desc[512];
    describe(k, cfgname, seed, desc, sizeof desc);
    int parts = 0;
    if (tsr_dense_check(p, &parts))
        fail_msg("%s: check: %s", desc, tsr_errmsg());
    const int32_t *b = k->use_bias ? bias : NULL;
    memset(y, 0xa5, ny);
    if (g_one_call) {
        if (tsr_dense_run(dev, p, x, w, b, y))
            fail_msg("%s: tsr_dense_run: %s", desc, tsr_errmsg());
    } else {
        tsr_dense_plan_t pl;
        if (tsr_dense_plan(dev, p, &pl))
            fail_msg("%s: plan: %s", desc, tsr_errmsg());
        assert_int_equal(pl.parts, parts);
        if (tsr_dense_write_weights(dev, &pl, w, b) || tsr_dense_write_input(dev, &pl, x) ||
            tsr_dense_exec(dev, &pl) || tsr_dense_read_output(dev, &pl, y))
            fail_msg("%s: %s", desc, tsr_errmsg());
        tsr_dense_plan_free(dev, &pl);
    }
    opref_tensor_t ox = {odt(p->x_dtype), p->n, p->k, 1, 1, x, p->x_zp};
    opref_weights_t ow = {odt(p->w_dtype), p->m, p->k, 1, 1, w, k->w_zp, p->w_zp_count};
    opref_tensor_t oy = {odt(p->y_dtype), p->n, p->m, 1, 1, yr, p->y_zp};
    opref_requant_t rq = {p->rq_count, k->mult, k->shift, p->act_min, p->act_max, NULL};
    if (opref_dense(&ox, &ow, b, &rq, &oy))
        fail_msg("%s: reference: %s", desc, tsr_errmsg());
    for (size_t i = 0; i < ny; i++) {
        if (y[i] != yr[i]) {
            int32_t got = p->y_dtype == TSR_DT_UINT8 ? y[i] : (int8_t)y[i];
            int32_t want = p->y_dtype == TSR_DT_UINT8 ? yr[i] : (int8_t)yr[i];
            fail_msg("%s (parts %d): first difference at y[%zu][%zu]: got %d, reference %d", desc, parts,
                     i / (size_t)p->m, i % (size_t)p->m, got, want);
        }
        int32_t v = p->y_dtype == TSR_DT_UINT8 ? yr[i] : (int8_t)yr[i];
        g_inside += v > p->act_min && v < p->act_max;
        g_total++;
    }
    g_parts[parts]++;
    free(x);
    free(w);
    free(y);
    free(yr);
    free(bias);
    return parts;
}

static void random_case(uint64_t *s, dense_case_t *k, int maxn, int maxk, int maxm)
{
    memset(k, 0, sizeof *k);
    tsr_dense_params_t *p = &k->p;
    p->n = rnd(s, 0, 3) ? rnd(s, 1, maxn) : 1;
    p->k = rnd(s, 1, maxk);
    p->m = rnd(s, 1, maxm);
    p->x_dtype = rnd(s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p->w_dtype = rnd(s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p->y_dtype = rnd(s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    int e = rnd(s, 0, 5);
    p->x_zp = e == 0 ? dmin(p->x_dtype) : e == 1 ? dmax(p->x_dtype) : rnd(s, dmin(p->x_dtype), dmax(p->x_dtype));
    p->y_zp = rnd(s, dmin(p->y_dtype), dmax(p->y_dtype));
    p->w_zp_count = rnd(s, 0, 1) ? p->m : 1;
    int zk = rnd(s, 0, 3); /* 0: symmetric (1 part), 1: near, 2: anywhere, 3: extreme */
    for (int i = 0; i < p->w_zp_count; i++) {
        int32_t mid = p->w_dtype == TSR_DT_UINT8 ? 128 : 0;
        k->w_zp[i] = zk == 0 ? mid
                     : zk == 1 ? mid + rnd(s, -3, 3)
                     : zk == 2 ? rnd(s, dmin(p->w_dtype), dmax(p->w_dtype))
                               : (rnd(s, 0, 1) ? dmin(p->w_dtype) : dmax(p->w_dtype));
    }
    p->rq_count = rnd(s, 0, 1) ? p->m : 1;
    k->auto_rq = 1;
    int full = rnd(s, 0, 2);
    p->act_min = full ? dmin(p->y_dtype) : rnd(s, dmin(p->y_dtype), p->y_zp);
    p->act_max = full ? dmax(p->y_dtype) : rnd(s, p->act_min, dmax(p->y_dtype));
    k->use_bias = rnd(s, 0, 4) != 0;
}

static void random_cases(const char *cfg, int count, int maxn, int maxk, int maxm, uint64_t salt)
{
    tsr_device_t *dev = open_dev(cfg);
    uint64_t seed0 = base_seed() ^ salt;
    count = scaled(count);
    g_inside = g_total = 0;
    memset(g_parts, 0, sizeof g_parts);
    for (int i = 0; i < count; i++) {
        uint64_t seed = seed0 + (uint64_t)i;
        uint64_t s = seed;
        dense_case_t k;
        random_case(&s, &k, maxn, maxk, maxm);
        run_case(dev, cfg, &k, seed);
    }
    printf("  %s: %d cases (weight parts 1/2/3: %d/%d/%d), %llu outputs, %.0f%% strictly inside the clamp range\n",
           cfg, count, g_parts[1], g_parts[2], g_parts[3], (unsigned long long)g_total,
           100.0 * (double)g_inside / (double)(g_total ? g_total : 1));
    if (count >= 16)
        assert_true(g_inside * 5 > g_total * 2);
    tsr_device_close(dev);
}

static void test_random_tiny(void **state)
{
    (void)state;
    random_cases("tiny", 300, 20, 70, 23, 1);
}
static void test_random_default(void **state)
{
    (void)state;
    random_cases("default", 100, 40, 300, 70, 2);
}
static void test_random_large(void **state)
{
    (void)state;
    random_cases("large", 30, 24, 300, 100, 3);
}
static void test_random_batch2(void **state)
{
    (void)state;
    random_cases("b2", 150, 13, 40, 13, 4);
}
static void test_random_rect(void **state)
{
    (void)state;
    random_cases("rect", 120, 13, 40, 13, 5);
}

static dense_case_t basic_case(int n, int k, int m)
{
    dense_case_t c;
    memset(&c, 0, sizeof c);
    tsr_dense_params_t *p = &c.p;
    p->n = n;
    p->k = k;
    p->m = m;
    p->x_dtype = p->w_dtype = p->y_dtype = TSR_DT_INT8;
    p->w_zp_count = p->rq_count = 1;
    c.mult[0] = 1518500250;
    int lg = 0;
    while ((1 << lg) < k)
        lg++;
    c.shift[0] = -(lg / 2 + 7);
    p->act_min = -128;
    p->act_max = 127;
    p->w_zp = c.w_zp;
    p->mult = c.mult;
    p->shift = c.shift;
    c.use_bias = 1;
    return c;
}

/* Shapes at the block edges, long reductions (split across chunks), many
 * rows (row tiles), and each weight-split case. */
static void test_shapes(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    static const int S[][3] = {{1, 1, 1},  {1, 4, 4},   {4, 4, 4},   {3, 5, 3},  {1, 3, 9},   {7, 1, 5},
                               {2, 17, 1}, {1, 600, 6}, {300, 9, 7}, {5, 1000, 3}, {64, 64, 64}, {1, 5, 130}};
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
        dense_case_t k = basic_case(S[i][0], S[i][1], S[i][2]);
        run_case(dev, "tiny", &k, 100 + i);
    }
    /* weight zero points needing 1, 2 and 3 parts */
    struct {
        tsr_dtype_e dt;
        int32_t zp;
        int parts;
    } Z[] = {{TSR_DT_INT8, 0, 1},    {TSR_DT_UINT8, 128, 1}, {TSR_DT_INT8, 1, 2},   {TSR_DT_INT8, -1, 2},
             {TSR_DT_INT8, 127, 2},  {TSR_DT_INT8, -127, 2}, {TSR_DT_INT8, -128, 3}, {TSR_DT_UINT8, 0, 3},
             {TSR_DT_UINT8, 1, 2},   {TSR_DT_UINT8, 255, 2}, {TSR_DT_UINT8, 127, 2}};
    for (size_t i = 0; i < sizeof Z / sizeof Z[0]; i++) {
        dense_case_t k = basic_case(3, 13, 5);
        k.p.w_dtype = Z[i].dt;
        k.w_zp[0] = Z[i].zp;
        k.shift[0] -= 2;
        assert_int_equal(run_case(dev, "tiny", &k, 200 + i), Z[i].parts);
    }
    /* per-output zero points: the worst one decides */
    dense_case_t k = basic_case(2, 9, 6);
    k.p.w_dtype = TSR_DT_UINT8;
    k.p.w_zp_count = 6;
    for (int i = 0; i < 6; i++)
        k.w_zp[i] = i == 4 ? 0 : 128;
    k.shift[0] -= 2;
    assert_int_equal(run_case(dev, "tiny", &k, 300), 3);
    tsr_device_close(dev);
}

/* The one-call API and a device reused across many plans. */
static void test_one_call(void **state)
{
    (void)state;
    g_one_call = 1;
    random_cases("default", 20, 10, 100, 40, 77);
    g_one_call = 0;
    tsr_device_t *dev = open_dev("tiny");
    tsr_dense_params_t bad = {0};
    assert_int_equal(tsr_dense_run(dev, &bad, "", "", NULL, (void *)""), TSR_EINVAL);
    assert_int_equal(tsr_dense_run(dev, NULL, "", "", NULL, (void *)""), TSR_EINVAL);
    dense_case_t k = basic_case(1, 1, 1);
    assert_int_equal(tsr_dense_run(dev, &k.p, NULL, "", NULL, (void *)""), TSR_EINVAL);
    tsr_dense_plan_t pl;
    assert_int_equal(tsr_dense_plan(NULL, &k.p, &pl), TSR_EINVAL);
    tsr_device_close(dev);
}

static void expect_err(tsr_device_t *dev, dense_case_t *k, const char *word)
{
    tsr_dense_params_t *p = &k->p;
    p->w_zp = k->w_zp;
    p->mult = k->mult;
    p->shift = k->shift;
    tsr_dense_plan_t pl;
    int rc = tsr_dense_plan(dev, p, &pl);
    if (rc != TSR_EINVAL)
        fail_msg("want EINVAL (\"%s\"), got %s", word, tsr_errname(rc));
    if (!strstr(tsr_errmsg(), word) || strncmp(tsr_errmsg(), "dense", 5))
        fail_msg("message \"%s\" lacks \"%s\" or does not start with \"dense\"", tsr_errmsg(), word);
}

static void test_bad_params(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    dense_case_t k;
#define BAD(stmt, word)                                                                                            \
    do {                                                                                                           \
        k = basic_case(2, 8, 4);                                                                                   \
        stmt;                                                                                                      \
        expect_err(dev, &k, word);                                                                                 \
    } while (0)
    BAD(k.p.n = 0, "positive");
    BAD(k.p.k = -1, "positive");
    BAD(k.p.m = 0, "positive");
    BAD(k.p.x_dtype = TSR_DT_INT32, "dtypes");
    BAD(k.p.w_dtype = TSR_DT_FLOAT32, "dtypes");
    BAD(k.p.y_dtype = (tsr_dtype_e)99, "dtypes");
    BAD(k.p.x_zp = 128, "input zero point");
    BAD((k.p.x_dtype = TSR_DT_UINT8, k.p.x_zp = -1), "input zero point");
    BAD(k.p.y_zp = -129, "output zero point");
    BAD(k.w_zp[0] = 200, "weight zero point [0]");
    BAD((k.p.w_zp_count = 4, k.w_zp[3] = -200), "weight zero point [3]");
    BAD(k.p.w_zp_count = 3, "weight zero points");
    BAD(k.p.w_zp_count = 0, "weight zero points");
    BAD(k.p.rq_count = 2, "requantization");
    BAD(k.mult[0] = -1, "negative");
    BAD(k.shift[0] = 31, "shift");
    BAD(k.shift[0] = -32, "shift");
    BAD((k.p.act_min = 5, k.p.act_max = 4), "activation range");
    BAD((k.p.y_dtype = TSR_DT_UINT8, k.p.act_min = -1), "activation range");
    BAD((k.p.n = 70000, k.p.k = 70000), "too large");
#undef BAD
    k = basic_case(2, 8, 4);
    k.p.w_zp = NULL;
    tsr_dense_plan_t pl;
    assert_int_equal(tsr_dense_plan(dev, &k.p, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "NULL"));
    assert_int_equal(tsr_dense_check(NULL, NULL), TSR_EINVAL);
    tsr_dense_plan_free(dev, &pl); /* zeroed by the failed plan: safe */
    tsr_device_close(dev);
}

/* The mapping: rows over batch lanes and the plan's GEMM work. */
static void test_plan_shape(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("default");
    dense_case_t k = basic_case(64, 512, 100);
    tsr_dense_plan_t pl;
    k.p.w_zp = k.w_zp;
    k.p.mult = k.mult;
    k.p.shift = k.shift;
    assert_int_equal(tsr_dense_plan(dev, &k.p, &pl), TSR_OK);
    /* BATCH 1: one lane of 64 rows; GEMM ops = rows x K blocks x M blocks */
    assert_int_equal(pl.lanes, 1);
    assert_int_equal(pl.rows, 64);
    assert_int_equal(pl.parts, 1);
    assert_int_equal((int)pl.conv.gemm_ops, 64 * 32 * 7);
    printf("  default 64x512x100: %zu instructions, %llu gemm ops (%.1f per GEMM instruction), DRAM %llu B\n",
           pl.conv.ninsns, (unsigned long long)pl.conv.gemm_ops,
           (double)pl.conv.gemm_ops / (double)(pl.conv.ninsns ? pl.conv.ninsns : 1),
           (unsigned long long)pl.conv.dram_bytes);
    tsr_dense_plan_free(dev, &pl);
    tsr_device_close(dev);
    dev = open_dev("b2");
    k = basic_case(7, 8, 4);
    k.p.w_zp = k.w_zp;
    k.p.mult = k.mult;
    k.p.shift = k.shift;
    assert_int_equal(tsr_dense_plan(dev, &k.p, &pl), TSR_OK);
    assert_int_equal(pl.rows, 4); /* BATCH 2: rows 0-3 in lane 0, 4-6 in lane 1 */
    assert_int_equal(pl.lanes, 2);
    tsr_dense_plan_free(dev, &pl);
    tsr_device_close(dev);
}

/* The requantization fields as one struct (tsr_requant.h): the named
 * fields and .rq are the same storage in conv2d and dense parameters, the
 * one check refuses what the operators' checks refused with the channel
 * count's name, rqfin packs as isa/semantics.md says, and the dtype
 * helpers (tsr_dtype.h) give the type ranges. */
static void test_requant_struct(void **state)
{
    (void)state;
    int32_t mult[2] = {1 << 30, 1 << 30}, shift[2] = {-3, 31}, zero = 0;
    tsr_dense_params_t d = {.n = 1, .k = 4, .m = 2, .x_dtype = TSR_DT_INT8, .w_dtype = TSR_DT_INT8, .w_zp = &zero,
                            .w_zp_count = 1, .y_dtype = TSR_DT_UINT8, .y_zp = 3, .mult = mult, .shift = shift,
                            .rq_count = 2, .act_min = 0, .act_max = 255};
    assert_ptr_equal(&d.rq.y_zp, &d.y_zp);
    assert_ptr_equal(&d.rq.act_max, &d.act_max);
    assert_ptr_equal(d.rq.mult, mult);
    tsr_conv2d_params_t c;
    memset(&c, 0, sizeof c);
    c.rq = d.rq;
    assert_int_equal(c.y_dtype, TSR_DT_UINT8);
    assert_int_equal(c.rq_count, 2);
    assert_ptr_equal(c.shift, shift);
    /* shift[1] = 31 is out of range: the same message from dense and the shared check */
    assert_int_equal(tsr_dense_check(&d, NULL), TSR_EINVAL);
    assert_string_equal(tsr_errmsg(), "dense: shift [1] = 31 outside [-31, 30]");
    shift[1] = 0;
    assert_int_equal(tsr_dense_check(&d, NULL), 0);
    d.rq_count = 3;
    assert_int_equal(tsr_requant_check("conv2d", &d.rq, 2, "C_out"), TSR_EINVAL);
    assert_string_equal(tsr_errmsg(), "conv2d: requantization: need 1 or C_out = 2 (multiplier, shift) pairs, got 3");
    d.rq_count = 1;
    d.act_min = -1;
    assert_int_equal(tsr_dense_check(&d, NULL), TSR_EINVAL);
    assert_string_equal(tsr_errmsg(), "dense: activation range [-1, 255] is not a non-empty subrange of [0, 255]");
    /* rqfin: shift 3, zp -3, clamp [-128, 127] */
    const uint32_t want = 3u | (((uint32_t)-3 & 511u) << 5) | (((uint32_t)-128 & 511u) << 14) | (127u << 23);
    assert_int_equal((uint32_t)tsr_requant_rqfin(3, -3, -128, 127), want);
    assert_true(tsr_dt_ok(TSR_DT_INT8) && tsr_dt_ok(TSR_DT_UINT8) && !tsr_dt_ok(TSR_DT_INT32));
    assert_int_equal(tsr_dt_min(TSR_DT_UINT8), 0);
    assert_int_equal(tsr_dt_max(TSR_DT_INT8), 127);
    assert_int_equal(tsr_dt_off(TSR_DT_UINT8), 128);
    const uint8_t raw[2] = {0xff, 0x80};
    assert_int_equal(tsr_dt_get(TSR_DT_INT8, raw, 0), -1);
    assert_int_equal(tsr_dt_get(TSR_DT_UINT8, raw, 1), 128);
}

int main(void)
{
    printf("test_dense: backend %s, base seed %llu (TSR_DENSE_SEED)\n", backend(), (unsigned long long)base_seed());
    const char *filter = getenv("TSR_DENSE_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_multiplier), cmocka_unit_test(test_quantize_bound),
        cmocka_unit_test(test_requant_params),      cmocka_unit_test(test_add_params),
        cmocka_unit_test(test_bad_params),          cmocka_unit_test(test_requant_struct),
        cmocka_unit_test(test_plan_shape),          cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_random_tiny),         cmocka_unit_test(test_random_default),
        cmocka_unit_test(test_random_large),        cmocka_unit_test(test_random_batch2),
        cmocka_unit_test(test_random_rect),         cmocka_unit_test(test_one_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
