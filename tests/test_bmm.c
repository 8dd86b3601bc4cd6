/*
 * test_bmm: the matmul of two activations (jit/tsr_bmm.h: attention's
 * Q.K^T and attention.V) against a plain-C reference written here from
 * jit/operators.md: the int32 sum of (a - a_zp)(b - b_zp) over K, then the
 * requantization of tests/tsr_opref.c (fixed point; or ONNX Runtime's
 * round_half_even(float32(acc) * scale) on a config with EXACT_REQUANT),
 * exact equality on every byte.
 *
 * Random cases: batch 1-3, M, K, N 1-40 (K and N not multiples of the
 * blocks), every dtype pair, zero points over the whole range (uint8 B
 * with b_zp != 128 needs the weight split), B per batch or shared, on
 * tiny, default and tiny with EXACT_REQUANT; the refusals of bad
 * parameters. Backend from TSR_TEST_BACKEND (default fsim; other
 * backends run a few small cases on tiny, as test_bmm_rtl does).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_bmm.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_opref.h"
#include "tsr_quant.h"
#include "tsr_testenv.h"

static int is_fsim(void) { return !strcmp(tsr_test_backend(), "fsim"); }
static int32_t dmin(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 0 : -128; }
static int32_t dmax(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 255 : 127; }
static int32_t get(tsr_dtype_e d, const uint8_t *p, size_t i) { return d == TSR_DT_UINT8 ? p[i] : (int8_t)p[i]; }

/* The reference: Y[b][m][n] = requant(SUM_k (A[b][m][k] - a_zp)(B[b][k][n] - b_zp)). */
static void reference(const tsr_bmm_params_t *p, const uint8_t *a, const uint8_t *b, uint8_t *y)
{
    const size_t rows = (size_t)p->batch * (size_t)p->m, N = (size_t)p->n, K = (size_t)p->k;
    int32_t *acc = malloc(sizeof(int32_t) * rows * N);
    assert_non_null(acc);
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < N; j++) {
            const size_t bi = p->b_shared ? 0 : r / (size_t)p->m;
            int64_t s = 0;
            for (size_t k = 0; k < K; k++)
                s += (int64_t)(get(p->a_dtype, a, r * K + k) - p->a_zp) *
                     (get(p->b_dtype, b, bi * K * N + k * N + j) - p->b_zp);
            acc[r * N + j] = (int32_t)s;
        }
    opref_acc_t A = {1, 1, (int)rows, (int)N, acc};
    opref_requant_t rq = {1, p->mult, p->shift, p->act_min, p->act_max, p->fscale};
    opref_tensor_t Y = {p->y_dtype == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8, 1, 1, (int)rows, (int)N, y, p->y_zp};
    if (opref_requantize(&A, &rq, &Y))
        fail_msg("reference: %s", tsr_errmsg());
    free(acc);
}

static uint8_t *rand_bytes(uint64_t *rs, size_t n)
{
    uint8_t *v = malloc(n ? n : 1);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint8_t)tsr_test_rnd(rs, 0, 255);
    return v;
}

/* One random case on dev; exact (with fscale) when the config has EXACT_REQUANT. */
static void one_case(tsr_device_t *dev, const char *cfg, int exact, uint64_t *rs, int maxdim, int idx)
{
    tsr_bmm_params_t p;
    memset(&p, 0, sizeof p);
    p.batch = tsr_test_rnd(rs, 1, 3);
    p.m = tsr_test_rnd(rs, 1, maxdim), p.k = tsr_test_rnd(rs, 1, maxdim), p.n = tsr_test_rnd(rs, 1, maxdim);
    p.b_shared = tsr_test_rnd(rs, 0, 3) == 0;
    p.a_dtype = tsr_test_rnd(rs, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p.b_dtype = tsr_test_rnd(rs, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p.y_dtype = tsr_test_rnd(rs, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p.a_zp = tsr_test_rnd(rs, dmin(p.a_dtype), dmax(p.a_dtype));
    p.b_zp = tsr_test_rnd(rs, 0, 2) ? tsr_test_rnd(rs, dmin(p.b_dtype), dmax(p.b_dtype))
                                     : (p.b_dtype == TSR_DT_UINT8 ? 128 : 0);
    p.y_zp = tsr_test_rnd(rs, dmin(p.y_dtype), dmax(p.y_dtype));
    p.act_min = dmin(p.y_dtype), p.act_max = dmax(p.y_dtype);
    /* a scale that spreads the sums over the output range: 1 / (K * ~64), randomised */
    const float scale = (float)(1.0 / ((double)p.k * (16.0 + tsr_test_rnd(rs, 0, 200))));
    int32_t mult, shift;
    assert_int_equal(tsr_quantize_multiplier(scale, &mult, &shift), 0);
    p.mult = &mult, p.shift = &shift, p.rq_count = 1;
    p.fscale = exact ? &scale : NULL;
    const size_t na = (size_t)p.batch * p.m * p.k, nb = (size_t)(p.b_shared ? 1 : p.batch) * p.k * p.n,
                 ny = (size_t)p.batch * p.m * p.n;
    uint8_t *a = rand_bytes(rs, na), *b = rand_bytes(rs, nb), *y = calloc(ny, 1), *want = calloc(ny, 1);
    assert_non_null(y);
    assert_non_null(want);
    reference(&p, a, b, want);
    if (tsr_bmm_run(dev, &p, a, b, y))
        fail_msg("%s case %d: %s", cfg, idx, tsr_errmsg());
    for (size_t i = 0; i < ny; i++)
        if (y[i] != want[i])
            fail_msg("%s case %d: batch %d [%d x %d] x [%d x %d]%s %s x %s -> %s, zps %d %d %d: element %zu is %d, "
                     "the reference %d", cfg, idx, p.batch, p.m, p.k, p.k, p.n, p.b_shared ? " (shared)" : "",
                     p.a_dtype == TSR_DT_UINT8 ? "u8" : "s8", p.b_dtype == TSR_DT_UINT8 ? "u8" : "s8",
                     p.y_dtype == TSR_DT_UINT8 ? "u8" : "s8", p.a_zp, p.b_zp, p.y_zp, i,
                     get(p.y_dtype, y, i), get(p.y_dtype, want, i));
    free(a), free(b), free(y), free(want);
}

static void run_cases(const char *cfg, int exact, int count, int maxdim, uint64_t seed)
{
    tsr_device_t *dev = tsr_test_open(cfg, seed | 1);
    uint64_t rs = seed;
    for (int i = 0; i < count; i++)
        one_case(dev, cfg, exact, &rs, maxdim, i);
    tsr_device_close(dev);
}

static void test_random_tiny(void **st)
{
    (void)st;
    run_cases("tiny", 0, is_fsim() ? 60 : 4, is_fsim() ? 40 : 12, 301);
}

static void test_random_default(void **st)
{
    (void)st;
    if (is_fsim())
        run_cases("default", 0, 30, 40, 302);
}

static void test_random_exact(void **st)
{
    (void)st;
    run_cases("tiny+exact", 1, is_fsim() ? 40 : 2, is_fsim() ? 40 : 12, 303);
}

/* Attention's shapes at a small scale: 3 heads of [17 x 64] x [64 x 17] (ViT-tiny's Q.K^T at 32x32). */
static void test_attention_shape(void **st)
{
    (void)st;
    if (!is_fsim())
        return;
    tsr_device_t *dev = tsr_test_open("default", 5);
    uint64_t rs = 77;
    for (int t = 0; t < 2; t++) {
        const int u8 = t == 0;
        int32_t mult, shift;
        assert_int_equal(tsr_quantize_multiplier(0.0009, &mult, &shift), 0);
        tsr_bmm_params_t p = {.batch = 3, .m = 17, .k = 64, .n = 17,
                              .a_dtype = u8 ? TSR_DT_UINT8 : TSR_DT_INT8, .b_dtype = u8 ? TSR_DT_UINT8 : TSR_DT_INT8,
                              .a_zp = u8 ? 121 : 0, .b_zp = u8 ? 135 : 0};
        p.y_dtype = p.a_dtype, p.y_zp = u8 ? 140 : 0, p.act_min = dmin(p.y_dtype), p.act_max = dmax(p.y_dtype);
        p.mult = &mult, p.shift = &shift, p.rq_count = 1;
        const size_t na = 3 * 17 * 64, ny = 3 * 17 * 17;
        uint8_t *a = rand_bytes(&rs, na), *b = rand_bytes(&rs, na), y[3 * 17 * 17], want[3 * 17 * 17];
        reference(&p, a, b, want);
        if (tsr_bmm_run(dev, &p, a, b, y))
            fail_msg("attention %s: %s", u8 ? "u8" : "s8", tsr_errmsg());
        assert_memory_equal(y, want, ny);
        free(a), free(b);
    }
    tsr_device_close(dev);
}

static void expect_refused(tsr_device_t *dev, const tsr_bmm_params_t *p, const char *what)
{
    tsr_bmm_plan_t pl;
    const int rc = tsr_bmm_plan(dev, p, &pl);
    if (rc != TSR_EINVAL)
        fail_msg("%s: expected TSR_EINVAL, got %d (%s)", what, rc, tsr_errmsg());
    if (!strchr(tsr_errmsg(), ':') || strchr(tsr_errmsg(), '\n'))
        fail_msg("%s: not a one-line message naming the problem: %s", what, tsr_errmsg());
}

static void test_bad_params(void **st)
{
    (void)st;
    if (!is_fsim())
        return;
    tsr_device_t *dev = tsr_test_open("tiny", 3);
    int32_t mult[2] = {1 << 30, 1 << 30}, shift[2] = {-8, -8};
    const tsr_bmm_params_t good = {.batch = 2, .m = 3, .k = 4, .n = 5, .a_dtype = TSR_DT_UINT8,
                                   .b_dtype = TSR_DT_UINT8, .a_zp = 3, .b_zp = 7, .y_dtype = TSR_DT_INT8,
                                   .mult = mult, .shift = shift, .rq_count = 1, .act_min = -128, .act_max = 127};
    tsr_bmm_plan_t pl;
    assert_int_equal(tsr_bmm_plan(dev, &good, &pl), 0);
    tsr_bmm_plan_free(dev, &pl);
    tsr_bmm_params_t p = good;
    p.k = 0;
    expect_refused(dev, &p, "K 0");
    p = good, p.b_zp = 300;
    expect_refused(dev, &p, "b_zp 300");
    p = good, p.a_zp = -1;
    expect_refused(dev, &p, "a_zp -1 for uint8");
    p = good, p.rq_count = 2;
    expect_refused(dev, &p, "per-channel requantization");
    p = good, p.b_dtype = TSR_DT_INT32;
    expect_refused(dev, &p, "int32 B");
    assert_int_equal(tsr_bmm_exec(dev, NULL, NULL, NULL, NULL), TSR_EINVAL);
    tsr_device_close(dev);
}

int main(void)
{
    printf("test_bmm: backend %s\n", tsr_test_backend());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_params),    cmocka_unit_test(test_random_tiny),
        cmocka_unit_test(test_random_default), cmocka_unit_test(test_random_exact),
        cmocka_unit_test(test_attention_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
