/*
 * test_tappack: the tap-packing rewrite (jit/tsr_tappack.c) is exact.
 *  - host: for random convolutions (C_in 1..5, kernels up to 7x7, strides
 *    1..3, asymmetric padding, int8/uint8 with random zero points, weight
 *    zero points per tensor or per channel, per-channel requantization),
 *    the reference conv (tests/tsr_opref.c) of the rewritten parameters on
 *    the packed input and permuted weights equals the reference conv of
 *    the original, byte for byte. Fails on a wrong permutation, a wrong
 *    padding byte or a wrong output width.
 *  - device: the rewritten conv run through tsr_conv2d_run on the test
 *    backend (fsim with a random stage interleaving by default;
 *    TSR_TEST_BACKEND=rtl) equals the reference conv of the ORIGINAL, on
 *    the default and tiny configs, including the ResNet stem shape at
 *    reduced size (3 -> 64, 7x7, stride 2, pad 3) and (fsim only) the full
 *    224x224 stem.
 *  - applies/rewrite: which convolutions qualify, and rejected parameters.
 * Seeds are printed; TSR_TAPPACK_SEED overrides the base seed. Failures
 * name the case and the first differing element.
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
#include "tsr_error.h"
#include "tsr_opref.h"
#include "tsr_tappack.h"
#include "tsr_testenv.h"

static uint64_t base_seed(void) { return tsr_test_seed("TSR_TAPPACK_SEED", 20261125u); }
static int on_fsim(void) { return !strcmp(tsr_test_backend(), "fsim"); }

typedef struct {
    tsr_conv2d_params_t p;
    int32_t w_zp[64], mult[64], shift[64];
    uint8_t *x, *w;
    int32_t *bias;
    int oh, ow;
} tp_case_t;

static int32_t dmin(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 0 : -128; }
static int32_t dmax(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 255 : 127; }

/* A random valid case; cin/cout/k/hw ranges from the caller (stem: fixed). */
static void make_case(uint64_t seed, int stem, int hw_max, tp_case_t *c)
{
    uint64_t s = seed;
    memset(c, 0, sizeof *c);
    tsr_conv2d_params_t *p = &c->p;
    p->n = tsr_test_rnd(&s, 1, 2);
    p->c_in = stem ? 3 : tsr_test_rnd(&s, 1, 5);
    p->c_out = stem ? 64 : tsr_test_rnd(&s, 1, 40);
    p->kh = stem ? 7 : tsr_test_rnd(&s, 1, 7);
    p->kw = stem ? 7 : tsr_test_rnd(&s, 2, 7);
    p->stride_h = stem ? 2 : tsr_test_rnd(&s, 1, 3);
    p->stride_w = stem ? 2 : tsr_test_rnd(&s, 1, 3);
    p->pad_top = stem ? 3 : tsr_test_rnd(&s, 0, p->kh - 1);
    p->pad_bottom = stem ? 3 : tsr_test_rnd(&s, 0, p->kh - 1);
    p->pad_left = stem ? 3 : tsr_test_rnd(&s, 0, p->kw - 1);
    p->pad_right = stem ? 3 : tsr_test_rnd(&s, 0, p->kw - 1);
    p->h = tsr_test_rnd(&s, p->kh, hw_max);
    p->w = tsr_test_rnd(&s, p->kw, hw_max);
    if (stem)
        p->h = p->w = hw_max;
    p->groups = 1;
    p->x_dtype = tsr_test_rnd(&s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p->w_dtype = TSR_DT_INT8; /* symmetric int8 weights with zero point 0, or per-channel small zero points */
    p->y_dtype = tsr_test_rnd(&s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    p->x_zp = tsr_test_rnd(&s, dmin(p->x_dtype), dmax(p->x_dtype));
    p->y_zp = tsr_test_rnd(&s, dmin(p->y_dtype), dmax(p->y_dtype));
    p->w_zp_count = tsr_test_rnd(&s, 0, 1) ? p->c_out : 1;
    for (int o = 0; o < p->w_zp_count; o++)
        c->w_zp[o] = p->w_zp_count == 1 ? 0 : tsr_test_rnd(&s, -3, 3); /* w - w_zp may leave int8: split parts */
    p->w_zp = c->w_zp;
    p->rq_count = p->c_out;
    int K = p->c_in * p->kh * p->kw, sh = (int)lround(log2(sqrt((double)K) * 74.0 * 74.0 / 40.0));
    for (int o = 0; o < p->c_out; o++) {
        c->mult[o] = (int32_t)((1u << 30) + (uint32_t)(tsr_test_next(&s) % (1u << 30)));
        c->shift[o] = -sh + tsr_test_rnd(&s, -1, 1);
    }
    p->mult = c->mult;
    p->shift = c->shift;
    p->act_min = tsr_test_rnd(&s, 0, 3) ? dmin(p->y_dtype) : p->y_zp; /* sometimes relu */
    p->act_max = dmax(p->y_dtype);
    if (tsr_conv2d_check(p, &c->oh, &c->ow))
        fail_msg("seed %llu: bad generated case: %s", (unsigned long long)seed, tsr_errmsg());
    size_t nx = (size_t)p->n * p->c_in * p->h * p->w, nw = (size_t)p->c_out * p->c_in * p->kh * p->kw;
    c->x = malloc(nx);
    c->w = malloc(nw);
    c->bias = tsr_test_rnd(&s, 0, 3) ? malloc(sizeof *c->bias * (size_t)p->c_out) : NULL;
    assert_non_null(c->x);
    assert_non_null(c->w);
    for (size_t i = 0; i < nx; i++)
        c->x[i] = (uint8_t)tsr_test_next(&s);
    for (size_t i = 0; i < nw; i++)
        c->w[i] = (uint8_t)tsr_test_rnd(&s, -127, 127);
    for (int o = 0; c->bias && o < p->c_out; o++)
        c->bias[o] = tsr_test_rnd(&s, -20000, 20000);
}

static void free_case(tp_case_t *c)
{
    free(c->x);
    free(c->w);
    free(c->bias);
}

static void describe(const tp_case_t *c, uint64_t seed, const char *cfg, char *buf, size_t n)
{
    const tsr_conv2d_params_t *p = &c->p;
    snprintf(buf, n,
             "seed %llu config %s: x [%d,%d,%d,%d] %s zp %d, %d outputs, kernel %dx%d stride %dx%d pad t%d l%d b%d "
             "r%d, w_zp %s, y %s zp %d [%d,%d]%s",
             (unsigned long long)seed, cfg, p->n, p->c_in, p->h, p->w, p->x_dtype == TSR_DT_UINT8 ? "u8" : "i8",
             p->x_zp, p->c_out, p->kh, p->kw, p->stride_h, p->stride_w, p->pad_top, p->pad_left, p->pad_bottom,
             p->pad_right, p->w_zp_count == 1 ? "per tensor" : "per channel",
             p->y_dtype == TSR_DT_UINT8 ? "u8" : "i8", p->y_zp, p->act_min, p->act_max, c->bias ? "" : ", no bias");
}

/* Reference conv (tsr_opref) of parameters p on x, w into y. */
static void ref_conv(const tsr_conv2d_params_t *p, const void *x, const void *w, const int32_t *bias, void *y,
                     const char *desc)
{
    int oh, ow;
    assert_int_equal(tsr_conv2d_check(p, &oh, &ow), 0);
    opref_tensor_t tx = {(opref_dtype_t)(p->x_dtype == TSR_DT_UINT8), p->n, p->c_in, p->h, p->w, (void *)x, p->x_zp};
    opref_weights_t tw = {(opref_dtype_t)(p->w_dtype == TSR_DT_UINT8), p->c_out, p->c_in, p->kh, p->kw, w, p->w_zp,
                          p->w_zp_count};
    opref_tensor_t ty = {(opref_dtype_t)(p->y_dtype == TSR_DT_UINT8), p->n, p->c_out, oh, ow, y, p->y_zp};
    opref_conv_params_t cp = {p->stride_h, p->stride_w, p->pad_top, p->pad_left, p->pad_bottom, p->pad_right, 1};
    opref_requant_t rq = {p->rq_count, p->mult, p->shift, p->act_min, p->act_max, NULL};
    if (opref_conv2d(&tx, &tw, bias, &cp, &rq, &ty))
        fail_msg("%s: reference: %s", desc, tsr_errmsg());
}

static void compare(const tp_case_t *c, const uint8_t *got, const uint8_t *want, const char *what, const char *desc)
{
    size_t ny = (size_t)c->p.n * c->p.c_out * c->oh * c->ow;
    for (size_t i = 0; i < ny; i++)
        if (got[i] != want[i]) {
            size_t ox = i % (size_t)c->ow, oy = i / c->ow % (size_t)c->oh, co = i / ((size_t)c->ow * c->oh) % (size_t)c->p.c_out;
            fail_msg("%s\n  %s: output [%zu][%zu][%zu][%zu] (flat %zu of %zu): got %d, want %d (reference of the "
                     "original conv)", desc, what, i / ((size_t)c->ow * c->oh * c->p.c_out), co, oy, ox, i, ny,
                     got[i], want[i]);
        }
}

/* Rewrite c; run the rewritten conv on dev (NULL: the reference on the
 * host) and compare with the reference of the original. */
static void run_rewritten(tsr_device_t *dev, const tp_case_t *c, const char *desc, uint64_t *inside, uint64_t *total)
{
    const tsr_conv2d_params_t *p = &c->p;
    tsr_conv2d_params_t q;
    size_t nw = (size_t)p->c_out * p->c_in * p->kh * p->kw, ny = (size_t)p->n * p->c_out * c->oh * c->ow;
    uint64_t nxp = tsr_tappack_input_bytes(p);
    uint8_t *w2 = malloc(nw), *x2 = malloc(nxp ? (size_t)nxp : 1), *y = malloc(ny), *yr = malloc(ny);
    assert_true(w2 && x2 && y && yr);
    if (tsr_tappack_rewrite(p, c->w, &q, w2))
        fail_msg("%s: rewrite: %s", desc, tsr_errmsg());
    assert_int_equal(q.c_in, p->c_in * p->kw);
    assert_int_equal(q.kw, 1);
    assert_int_equal(q.w, c->ow);
    assert_int_equal((int64_t)nxp, (int64_t)p->n * q.c_in * p->h * c->ow);
    tsr_tappack_pack_input(p, c->x, x2);
    ref_conv(p, c->x, c->w, c->bias, yr, desc);
    if (dev) {
        if (tsr_conv2d_run(dev, &q, x2, w2, c->bias, y))
            fail_msg("%s: tsr_conv2d_run of the rewritten conv: %s", desc, tsr_errmsg());
    } else {
        ref_conv(&q, x2, w2, c->bias, y, desc);
    }
    compare(c, y, yr, dev ? "device, rewritten" : "reference, rewritten", desc);
    for (size_t i = 0; i < ny; i++) {
        int32_t v = p->y_dtype == TSR_DT_UINT8 ? yr[i] : (int8_t)yr[i];
        *inside += v > p->act_min && v < p->act_max;
    }
    *total += ny;
    free(w2);
    free(x2);
    free(y);
    free(yr);
}

static void test_host_exact(void **state)
{
    (void)state;
    uint64_t inside = 0, total = 0;
    for (int i = 0; i < 300; i++) {
        uint64_t seed = base_seed() * 1000003u + (uint64_t)i;
        tp_case_t c;
        char desc[512];
        make_case(seed, i % 50 == 0, i % 50 == 0 ? 15 : 16, &c);
        describe(&c, seed, "host", desc, sizeof desc);
        run_rewritten(NULL, &c, desc, &inside, &total);
        free_case(&c);
    }
    printf("host: 300 cases, %.1f%% of %llu outputs inside the clamp range\n", 100.0 * (double)inside / (double)total,
           (unsigned long long)total);
    assert_true(inside > total / 4); /* the cases are not mostly saturated */
}

static void device_cases(const char *cfgname, int count)
{
    tsr_device_t *dev = tsr_test_open(cfgname, base_seed() | 1);
    tsr_config_t cfg;
    assert_int_equal(tsr_test_config(cfgname, &cfg), 0);
    uint64_t inside = 0, total = 0;
    int applied = 0;
    for (int i = 0; i < count; i++) {
        uint64_t seed = base_seed() * 7919u + (uint64_t)i + (uint64_t)cfg.block_in * 100000u;
        tp_case_t c;
        char desc[512];
        int stem = i < 2; /* the stem at 24x24 and 31x31 */
        make_case(seed, stem, stem ? (i == 0 ? 24 : 31) : 14, &c);
        describe(&c, seed, cfgname, desc, sizeof desc);
        applied += tsr_tappack_applies(&c.p, &cfg);
        run_rewritten(dev, &c, desc, &inside, &total);
        free_case(&c);
    }
    printf("%s on %s: %d cases (%d where tsr_tappack_applies), %.1f%% of %llu outputs inside the clamp range\n",
           cfgname, tsr_test_backend(), count, applied, 100.0 * (double)inside / (double)total,
           (unsigned long long)total);
    assert_true(inside > total / 4);
    tsr_device_close(dev);
}

static void test_device_default(void **state)
{
    (void)state;
    device_cases("default", on_fsim() ? 40 : 6);
}

static void test_device_tiny(void **state)
{
    (void)state;
    device_cases("tiny", on_fsim() ? 25 : 4);
}

/* The full ResNet-18 stem (C1), fsim only (about 0.1 G MACs). */
static void test_stem_full(void **state)
{
    (void)state;
    if (!on_fsim()) {
        printf("skipped on %s (tessera bench --kind resnet18 --layers C1 --check runs it)\n", tsr_test_backend());
        return;
    }
    tsr_device_t *dev = tsr_test_open("default", base_seed() | 1);
    tp_case_t c;
    char desc[512];
    make_case(base_seed(), 1, 224, &c);
    c.p.n = 1;
    assert_int_equal(tsr_conv2d_check(&c.p, &c.oh, &c.ow), 0);
    describe(&c, base_seed(), "default", desc, sizeof desc);
    uint64_t inside = 0, total = 0;
    run_rewritten(dev, &c, desc, &inside, &total);
    printf("stem 224x224: %.1f%% of outputs inside the clamp range\n", 100.0 * (double)inside / (double)total);
    free_case(&c);
    tsr_device_close(dev);
}

static void test_applies(void **state)
{
    (void)state;
    tsr_config_t def, tiny;
    assert_int_equal(tsr_test_config("default", &def), 0);
    assert_int_equal(tsr_test_config("tiny", &tiny), 0);
    int32_t zp = 0, m = 1 << 30, sh = -8;
    tsr_conv2d_params_t p = {.n = 1, .c_in = 3, .h = 224, .w = 224, .c_out = 64, .kh = 7, .kw = 7, .stride_h = 2,
                             .stride_w = 2, .pad_top = 3, .pad_left = 3, .pad_bottom = 3, .pad_right = 3,
                             .groups = 1, .x_dtype = TSR_DT_UINT8, .x_zp = 128, .w_dtype = TSR_DT_INT8, .w_zp = &zp,
                             .w_zp_count = 1, .y_dtype = TSR_DT_INT8, .y_zp = -128, .mult = &m, .shift = &sh,
                             .rq_count = 1, .act_min = -128, .act_max = 127};
    assert_int_equal(tsr_tappack_applies(&p, &def), 1);  /* 21 channels: 2 blocks instead of 7 */
    assert_int_equal(tsr_tappack_applies(&p, &tiny), 0); /* BLOCK_IN 4: 21 > 4 blocks of 4 */
    tsr_conv2d_params_t q = p;
    q.c_in = 64;
    q.kh = q.kw = 3;
    assert_int_equal(tsr_tappack_applies(&q, &def), 0); /* 192 channels: beyond a few blocks */
    q = p;
    q.kw = 1;
    assert_int_equal(tsr_tappack_applies(&q, &def), 0); /* nothing to pack */
    q = p;
    q.c_in = 16;
    q.kw = 2;
    assert_int_equal(tsr_tappack_applies(&q, &def), 0); /* full blocks already: no saving */
    q = p;
    q.c_in = q.c_out = 3;
    q.groups = 3;
    assert_int_equal(tsr_tappack_applies(&q, &def), 0); /* depthwise */
    tsr_conv2d_params_t out;
    assert_int_equal(tsr_tappack_rewrite(&q, NULL, &out, NULL), TSR_EINVAL);
    printf("rejected: %s\n", tsr_errmsg());
    q = p;
    q.stride_w = 0;
    assert_int_equal(tsr_tappack_applies(&q, &def), 0);
    assert_int_equal(tsr_tappack_rewrite(&q, NULL, &out, NULL), TSR_EINVAL);
    printf("rejected: %s\n", tsr_errmsg());
    assert_int_equal(tsr_tappack_input_bytes(&q), 0);
    assert_int_equal(tsr_tappack_rewrite(NULL, NULL, &out, NULL), TSR_EINVAL);
    assert_int_equal(tsr_tappack_rewrite(&p, NULL, &out, NULL), 0);
    assert_true(out.c_in == 21 && out.kh == 7 && out.kw == 1 && out.stride_h == 2 && out.stride_w == 1 &&
                out.pad_top == 3 && out.pad_bottom == 3 && out.pad_left == 0 && out.pad_right == 0 && out.h == 224 &&
                out.w == 112);
    assert_int_equal(tsr_tappack_input_bytes(&p), 21ull * 224 * 112);
}

int main(void)
{
    printf("test_tappack base seed %llu (TSR_TAPPACK_SEED), backend %s\n", (unsigned long long)base_seed(),
           tsr_test_backend());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_applies),
        cmocka_unit_test(test_host_exact),
        cmocka_unit_test(test_device_default),
        cmocka_unit_test(test_device_tiny),
        cmocka_unit_test(test_stem_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
