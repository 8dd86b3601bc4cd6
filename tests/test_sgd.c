/*
 * test_sgd: the SGD-with-momentum update on the device ALU (jit/tsr_sgd.h)
 * against a plain-C reference written here from the definition in
 * jit/tsr_sgd.h and isa/semantics.md's mulhr / rshr (int64 arithmetic, nothing
 * of jit/ or the ALU code), bit for bit: q after every step and the state
 * (w_m, v) after the last. The reference also checks that no sum of the
 * definition leaves int32 for any legal parameters.
 *
 * Random sizes (not multiples of a row, several tiles), every parameter
 * over its whole legal range, gradients over the whole int32 range with
 * INT32_MIN and INT32_MAX (saturating the clamps), w_m on its bounds; int8
 * and int32 q; configs default and tiny; half the cases with per-channel
 * multipliers (chans C > 1: channel c = values c*K .. c*K+K-1, its own mg_c,
 * C not a multiple of a row's lanes; their second step is tsr_sgd_step's one
 * multiplier copied to every channel); a quarter with the step's buffers
 * allocated by each step (transient), at times moved by a buffer in the way. Bad parameters: each refused with
 * its message. On backend rtl (test_sgd_rtl) three cases on tiny (one
 * per-channel), the RTL against the reference. TSR_SGD_SEED overrides the seed.
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
#include "tsr_sgd.h"
#include "tsr_testenv.h"


static uint64_t base_seed(void) { return tsr_test_seed("TSR_SGD_SEED", 20261207u); }
static int rnd(uint64_t *s, int lo, int hi) { return tsr_test_rnd(s, lo, hi); }
static int is_rtl(void) { return !strcmp(tsr_test_backend(), "rtl"); }

static int32_t rnd32(uint64_t *s, int64_t lo, int64_t hi)
{
    const uint64_t r = ((uint64_t)(uint32_t)rnd(s, 0, 65535) << 32) | ((uint64_t)(uint32_t)rnd(s, 0, 65535) << 16) |
                       (uint64_t)(uint32_t)rnd(s, 0, 65535);
    return (int32_t)(lo + (int64_t)(r % (uint64_t)(hi - lo + 1)));
}

/* ---- the reference ---- */

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static int64_t fits(int64_t v)
{
    if (v < INT32_MIN || v > INT32_MAX)
        fail_msg("reference: a sum left int32: %lld", (long long)v);
    return v;
}

/* gemmlowp SaturatingRoundingDoublingHighMul */
static int64_t ref_mulhr(int64_t a, int64_t b)
{
    if (a == INT32_MIN && b == INT32_MIN)
        return INT32_MAX;
    const int64_t p = a * b, nudge = p >= 0 ? (INT64_C(1) << 30) : 1 - (INT64_C(1) << 30);
    return (p + nudge) / (INT64_C(1) << 31); /* C division truncates toward zero */
}

/* division by 2^s rounding half away from zero; s <= 0: a left shift (exact here) */
static int64_t ref_rshr(int64_t a, int s)
{
    if (s <= 0)
        return fits(a * (INT64_C(1) << -s));
    const int64_t d = INT64_C(1) << s, q = (a >= 0 ? a + d / 2 : a - d / 2) / d;
    return q;
}

/* the bound of w_m and q: 2^30 with w_m in four planes, 2^22 with three (g and v: always 2^30) */
static int64_t lim_of(const tsr_sgd_params_t *p) { return p->planes == 3 ? INT64_C(1) << 22 : INT64_C(1) << 30; }

/* mg [chans] (chans <= 1: mg [1]): value i's multiplier is its channel's, channel i / (n / chans) */
static void ref_step(const tsr_sgd_params_t *p, const int32_t *graw, const int32_t *mg, int sg, int32_t *w,
                     int32_t *v, int32_t *q)
{
    const int64_t LIM = INT64_C(1) << 30;
    const int64_t gl = sg < 0 ? LIM >> -sg : (LIM << sg > INT32_MAX ? INT32_MAX : LIM << sg);
    const int64_t per = p->chans > 1 ? p->n / p->chans : p->n;
    for (int64_t i = 0; i < p->n; i++) {
        const int64_t g = ref_rshr(clamp64(ref_mulhr(graw[i], mg[i / per]), -gl, gl), sg);
        if (g < -LIM || g > LIM)
            fail_msg("reference: g %lld past %lld", (long long)g, (long long)LIM);
        const int64_t vn = clamp64(fits(ref_mulhr(v[i], p->mmu) + g), -(LIM - 1), LIM - 1);
        const int64_t t = ref_rshr(ref_mulhr(vn, p->mlr), p->slr);
        const int64_t wn = clamp64(fits(w[i] - t), p->w_lo, p->w_hi);
        v[i] = (int32_t)vn;
        w[i] = (int32_t)wn;
        q[i] = (int32_t)clamp64(ref_rshr(wn, p->frac), p->q_lo, p->q_hi);
    }
}

/* ---- cases ---- */

static tsr_device_t *open_cfg(const char *backend, const char *preset)
{
    tsr_config_t cfg;
    if (tsr_test_config(preset, &cfg))
        fail_msg("config %s: %s", preset, tsr_errmsg());
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = base_seed() | 1};
    if (tsr_device_open(backend, &cfg, &o, &dev))
        fail_msg("open %s/%s: %s", backend, preset, tsr_errmsg());
    return dev;
}

static void rnd_params(uint64_t *s, int64_t n, tsr_sgd_params_t *p)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    p->planes = rnd(s, 0, 2) ? 4 : 3;
    const int64_t LIM = lim_of(p);
    p->frac = rnd(s, 0, 30);
    p->mmu = rnd(s, 0, 4) ? rnd32(s, 0, INT32_MAX) : (rnd(s, 0, 1) ? INT32_MAX : 0);
    p->mlr = rnd(s, 0, 4) ? rnd32(s, 0, INT32_MAX) : INT32_MAX;
    p->slr = rnd(s, 0, 31);
    p->w_lo = rnd(s, 0, 3) ? rnd32(s, -LIM, 0) : (int32_t)-LIM;
    p->w_hi = rnd(s, 0, 3) ? rnd32(s, 0, LIM - 1) : (int32_t)(LIM - 1);
    p->q_bytes = rnd(s, 0, 1) ? 1 : 4;
    const int64_t qmin = p->q_bytes == 1 ? -128 : -LIM, qmax = p->q_bytes == 1 ? 127 : LIM - 1;
    p->q_lo = rnd(s, 0, 2) ? (int32_t)qmin : rnd32(s, qmin, 0);
    p->q_hi = rnd(s, 0, 2) ? (int32_t)qmax : rnd32(s, 0, qmax);
}

static int32_t rnd_grad(uint64_t *s, int small)
{
    switch (rnd(s, 0, 9)) {
    case 0: return INT32_MIN;
    case 1: return INT32_MAX;
    case 2: return 0;
    default: return small ? rnd32(s, -100000, 100000) : rnd32(s, INT32_MIN, INT32_MAX);
    }
}

static int32_t rnd_mult(uint64_t *s) { return rnd(s, 0, 4) ? rnd32(s, 0, INT32_MAX) : (rnd(s, 0, 1) ? INT32_MAX : 0); }

/* steps of one random case of n values (chans > 1: chans channels of n / chans) on dev, every q and the final
   state against the reference */
static uint64_t run_case(tsr_device_t *dev, uint64_t *s, int64_t n, int64_t chans, int steps, const char *what)
{
    uint64_t cycles = 0;
    tsr_sgd_params_t p;
    rnd_params(s, n, &p);
    p.chans = chans;
    const int64_t nm = chans > 1 ? chans : 1;
    int32_t *mg = malloc((size_t)nm * 4);
    assert_non_null(mg);
    int32_t *w = malloc((size_t)n * 4), *v = calloc((size_t)n, 4), *g = malloc((size_t)n * 4);
    int32_t *q = malloc((size_t)n * 4), *qd = malloc((size_t)n * 4), *wd = malloc((size_t)n * 4),
            *vd = malloc((size_t)n * 4);
    assert_non_null(w && v && g && q && qd && wd && vd);
    for (int64_t i = 0; i < n; i++)
        w[i] = rnd(s, 0, 9) ? rnd32(s, p.w_lo, p.w_hi) : (rnd(s, 0, 1) ? p.w_lo : p.w_hi);
    /* half the cases take g_raw and q through buffers of the caller's (shared by a trainer's tensors) */
    const tsr_config_t *cfg = tsr_device_config(dev);
    const int64_t lanes = (int64_t)cfg->batch * cfg->block_out;
    uint64_t gbuf = 0, qbuf = 0;
    const int64_t rows = tsr_sgd_rows(cfg, &p);
    if (rnd(s, 0, 1)) {
        assert_int_equal(tsr_mem_alloc(dev, (uint64_t)rows * cfg->acc_bytes, &gbuf), TSR_OK);
        assert_int_equal(tsr_mem_alloc(dev, (uint64_t)(rows * lanes * p.q_bytes), &qbuf), TSR_OK);
    }
    p.g_buf = gbuf;
    p.q_buf = qbuf;
    /* half the others with the step's buffers allocated by each step (transient), landing elsewhere at times */
    p.transient = !gbuf && rnd(s, 0, 1);
    uint64_t other = 0;
    tsr_sgd_t sg;
    if (tsr_sgd_init(&sg, dev, &p, w))
        fail_msg("%s: init: %s", what, tsr_errmsg());
    const int small = rnd(s, 0, 1);
    for (int st = 0; st < steps; st++) {
        for (int64_t i = 0; i < n; i++)
            g[i] = rnd_grad(s, small);
        if (p.transient && rnd(s, 0, 1)) { /* a buffer in the way: the step's buffers move, the stream follows */
            if (other)
                tsr_mem_free(dev, other), other = 0;
            else
                assert_int_equal(tsr_mem_alloc(dev, (uint64_t)rnd(s, 1, 4096), &other), TSR_OK);
        }
        for (int64_t c = 0; c < nm; c++)
            mg[c] = rnd_mult(s);
        const int sh = rnd(s, -30, 31);
        memset(qd, 0, (size_t)n * 4);
        /* per channel, the second step: tsr_sgd_step's one multiplier, copied to every channel */
        const int one = chans > 1 && st == 1;
        for (int64_t c = 1; c < nm && one; c++)
            mg[c] = mg[0];
        /* (per tensor: tsr_sgd_step, or tsr_sgd_step_ch with one multiplier) */
        if ((!one && (chans > 1 || (st % 2)) ? tsr_sgd_step_ch(&sg, g, mg, sh, qd, &cycles)
                                             : tsr_sgd_step(&sg, g, mg[0], sh, qd, &cycles)))
            fail_msg("%s: step %d: %s", what, st, tsr_errmsg());
        ref_step(&p, g, mg, sh, w, v, q);
        for (int64_t i = 0; i < n; i++) {
            const int32_t dq = p.q_bytes == 1 ? ((int8_t *)qd)[i] : qd[i];
            if (dq != q[i])
                fail_msg("%s (n %lld chans %lld transient %d planes %d frac %d mg %d sg %d mmu %d mlr %d slr %d "
                         "q_bytes %d): step %d q[%lld] = %d, reference %d", what, (long long)n, (long long)chans,
                         p.transient, p.planes, p.frac,
                         (int)mg[chans > 1 ? i / (n / chans) : 0], sh, (int)p.mmu, (int)p.mlr, p.slr, p.q_bytes, st,
                         (long long)i, (int)dq, (int)q[i]);
        }
    }
    assert_int_equal(tsr_sgd_read_state(&sg, wd, vd), TSR_OK);
    for (int64_t i = 0; i < n; i++)
        if (wd[i] != w[i] || vd[i] != v[i])
            fail_msg("%s: state [%lld]: w_m %d v %d, reference %d %d", what, (long long)i, (int)wd[i], (int)vd[i],
                     (int)w[i], (int)v[i]);
    tsr_sgd_free(&sg);
    if (gbuf)
        tsr_mem_free(dev, gbuf), tsr_mem_free(dev, qbuf);
    if (other)
        tsr_mem_free(dev, other);
    free(w), free(v), free(g), free(q), free(qd), free(wd), free(vd), free(mg);
    return cycles;
}

static void test_random(const char *preset, int cases, int64_t nmax)
{
    tsr_device_t *dev = open_cfg("fsim", preset);
    uint64_t s = base_seed() ^ (uint64_t)nmax;
    for (int k = 0; k < cases; k++) {
        char what[64];
        snprintf(what, sizeof what, "%s case %d", preset, k);
        if (k % 2) { /* per channel: C channels of K values, C from 2 (past a row's lanes too) */
            const int64_t C = rnd(&s, 2, 70), K = rnd(&s, 1, (int)(nmax / C));
            run_case(dev, &s, C * K, C, 3, what);
        } else
            run_case(dev, &s, rnd(&s, 0, 3) ? rnd(&s, 1, (int)nmax) : nmax, 0, 3, what);
    }
    tsr_device_close(dev);
}

static void test_default(void **st) { (void)st; test_random("default", 24, 5000); }
static void test_tiny(void **st) { (void)st; test_random("tiny", 24, 700); }

/* mu = 0, lr small, mg for a typical fc layer: a value moves by exactly the reference's amount */
static void test_multiplier(void **st)
{
    (void)st;
    int32_t m;
    int s;
    assert_int_equal(tsr_sgd_multiplier(0.005, 0, &m, &s), TSR_OK);
    const double back = (double)m / 2147483648.0 / (double)(INT64_C(1) << s);
    assert_true(back > 0.005 * (1 - 1e-9) && back < 0.005 * (1 + 1e-9));
    assert_true(m >= (INT32_C(1) << 30));
    assert_int_equal(tsr_sgd_multiplier(0.0, 0, &m, &s), TSR_OK);
    assert_int_equal(m, 0);
    assert_int_equal(tsr_sgd_multiplier(1.0, 0, &m, &s), TSR_EINVAL); /* lr 1 needs a left shift */
    assert_int_equal(tsr_sgd_multiplier(12.0, -30, &m, &s), TSR_OK);
    assert_int_equal(s, -4);
}

static void expect_bad(tsr_device_t *dev, const tsr_sgd_params_t *p, const int32_t *w, const char *msg)
{
    tsr_sgd_t sg;
    assert_int_equal(tsr_sgd_init(&sg, dev, p, w), TSR_EINVAL);
    if (!strstr(tsr_errmsg(), msg))
        fail_msg("expected '%s', got '%s'", msg, tsr_errmsg());
}

static void test_bad(void **st)
{
    (void)st;
    tsr_device_t *dev = open_cfg("fsim", "default");
    const tsr_sgd_params_t ok = {.n = 10, .frac = 16, .mmu = 0, .mlr = 1 << 30, .slr = 8, .w_lo = -(127 << 16),
                                 .w_hi = 127 << 16, .q_lo = -127, .q_hi = 127, .q_bytes = 1};
    int32_t w[10] = {0};
    tsr_sgd_params_t p = ok;
    p.frac = 31;
    expect_bad(dev, &p, w, "frac 31");
    p = ok, p.q_bytes = 2;
    expect_bad(dev, &p, w, "q_bytes 2");
    p = ok, p.q_hi = 128;
    expect_bad(dev, &p, w, "q clamp");
    p = ok, p.w_hi = 1 << 30;
    expect_bad(dev, &p, w, "w_m clamp");
    p = ok, p.mlr = -1;
    expect_bad(dev, &p, w, "negative multiplier");
    p = ok, p.n = 0;
    expect_bad(dev, &p, w, "n 0");
    p = ok, p.planes = 2;
    expect_bad(dev, &p, w, "planes 2");
    p = ok, p.chans = 3;
    expect_bad(dev, &p, w, "chans 3 does not divide n 10");
    p = ok, p.planes = 3; /* 127 << 16 is past three planes' 2^22 */
    expect_bad(dev, &p, w, "outside [-4194304, 4194303]");
    w[3] = 128 << 16;
    expect_bad(dev, &ok, w, "initial w_m[3]");
    w[3] = 0;
    tsr_sgd_t sg;
    int8_t q[10];
    assert_int_equal(tsr_sgd_init(&sg, dev, &ok, w), TSR_OK);
    assert_int_equal(tsr_sgd_step(&sg, w, 1, -31, q, NULL), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "shift -31"));
    assert_int_equal(tsr_sgd_step(&sg, w, -1, 0, q, NULL), TSR_EINVAL);
    tsr_sgd_free(&sg);
    tsr_sgd_params_t pc = ok;
    pc.chans = 5;
    const int32_t mgs[5] = {1, 2, -3, 4, 5};
    assert_int_equal(tsr_sgd_init(&sg, dev, &pc, w), TSR_OK);
    assert_int_equal(tsr_sgd_step_ch(&sg, w, mgs, 0, q, NULL), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "multiplier -3 of channel 2"));
    tsr_sgd_free(&sg);
    tsr_device_close(dev);
}

/* the RTL: two cases on tiny (several tiles, saturating values), against the reference */
static void test_rtl(void **st)
{
    (void)st;
    tsr_device_t *dev = open_cfg("rtl", "tiny");
    uint64_t s = base_seed() ^ 77;
    const uint64_t c1 = run_case(dev, &s, 300, 0, 2, "rtl tiny 300"), c2 = run_case(dev, &s, 37, 0, 2, "rtl tiny 37");
    const uint64_t c3 = run_case(dev, &s, 13 * 23, 13, 2, "rtl tiny 13 channels of 23");
    assert_true(c1 > c2 && c2 > 0 && c3 > 0);
    printf("rtl tiny: 2 steps of 300 values %llu cycles, of 37 values %llu, of 13 channels of 23 values %llu\n",
           (unsigned long long)c1, (unsigned long long)c2, (unsigned long long)c3);
    tsr_device_close(dev);
}

int main(void)
{
    if (is_rtl()) {
        const struct CMUnitTest rtl[] = {cmocka_unit_test(test_rtl)};
        return cmocka_run_group_tests(rtl, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default), cmocka_unit_test(test_tiny), cmocka_unit_test(test_multiplier),
        cmocka_unit_test(test_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
