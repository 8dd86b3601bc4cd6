/*
 * test_opref: the quantized-operator reference (tests/tsr_opref.c) against
 * data it did not produce:
 *
 *  1. hand-worked tiny cases (the arithmetic is in the comments);
 *  2. known values of the gemmlowp / TFLite fixed-point functions
 *     (SaturatingRoundingDoublingHighMul, RoundingDivideByPOT,
 *     MultiplyByQuantizedMultiplier, QuantizeMultiplier);
 *  3. the accelerator's ALU ops mulhr / rshr / shr / add / min / max, both
 *     libtessera's tsr_alu_apply and the test reference machine's ref_alu:
 *     the requantization lowering of jit/operators.md must be bit-exact;
 *  4. argument validation (every bad shape / parameter is refused with a
 *     message);
 *  5. an independent vectorised NumPy implementation of jit/operators.md
 *     (embedded below, run with /usr/bin/python3; missing NumPy is a
 *     failure) on random conv2d / depthwise / dense / requantize / pool /
 *     add / relu / clip / fixed-point cases, compared element for element.
 *     The NumPy side uses different but equivalent formulas where the
 *     document proves them equal (SRDHM as floor((a*b + 2^30) / 2^31),
 *     RDBPOT and the average as sign * floor(|x| / d + 1/2), padding by
 *     np.pad of the centred input, no int32 wrap in add).
 *
 * TSR_OPREF_SEED sets the seed of part 5 (printed on failure).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_opref.h"
#include "tsr_ref.h"
#include "tsr_util.h"

#define B30 ((int32_t)1 << 30)

/* ------------------------------------------------------------ helpers */

/* A tensor over buf (at least n*c*h*w bytes) holding vals (may be NULL). */
static opref_tensor_t mk(opref_dtype_t dt, int n, int c, int h, int w, int32_t zp, uint8_t *buf,
                         const int32_t *vals)
{
    opref_tensor_t t = {dt, n, c, h, w, buf, zp};
    if (vals)
        for (int i = 0; i < n * c * h * w; i++)
            opref_set(&t, i, vals[i]);
    return t;
}

static void expect_tensor(const opref_tensor_t *t, const int32_t *want)
{
    int count = t->n * t->c * t->h * t->w;
    for (int i = 0; i < count; i++) {
        if (opref_get(t, i) != want[i])
            fail_msg("element %d: got %d, want %d", i, (int)opref_get(t, i), (int)want[i]);
    }
}

static void expect_ok(int rc)
{
    if (rc != TSR_OK)
        fail_msg("unexpected error %d (%s): %s", rc, tsr_errname(rc), tsr_errmsg());
}

static void expect_err(int rc, int code, const char *what)
{
    if (rc != code)
        fail_msg("%s: got %d, want %d (%s); message: %s", what, rc, code, tsr_errname(code), tsr_errmsg());
    if (tsr_errmsg()[0] == '\0')
        fail_msg("%s: no error message", what);
    tsr_err_clear();
}

/* ------------------------------------------- 2. fixed-point functions */

static void test_srdhm_known(void **state)
{
    (void)state;
    /* gemmlowp: the one overflowing case saturates. */
    assert_int_equal(opref_srdhm(INT32_MIN, INT32_MIN), INT32_MAX);
    /* (2^31-1)^2 = 2^62 - 2^32 + 1; + 2^30; / 2^31 = 2^31 - 2 + (2^30 + 1)/2^31 -> 2^31 - 2 */
    assert_int_equal(opref_srdhm(INT32_MAX, INT32_MAX), INT32_MAX - 1);
    /* -2^31 (2^31 - 1) / 2^31 = -(2^31 - 1) exactly */
    assert_int_equal(opref_srdhm(INT32_MIN, INT32_MAX), -INT32_MAX);
    assert_int_equal(opref_srdhm(INT32_MAX, INT32_MIN), -INT32_MAX);
    /* b = 2^30 halves: 0.5 -> 1, -0.5 -> 0, 1.5 -> 2, -1.5 -> -1 (ties toward +inf) */
    assert_int_equal(opref_srdhm(1, B30), 1);
    assert_int_equal(opref_srdhm(-1, B30), 0);
    assert_int_equal(opref_srdhm(3, B30), 2);
    assert_int_equal(opref_srdhm(-3, B30), -1);
    assert_int_equal(opref_srdhm(-5, B30), -2); /* -2.5 -> -2 */
    /* p = -2^31: p / 2^31 = -1 exactly; p = 2^31: 1 exactly */
    assert_int_equal(opref_srdhm(INT32_MIN, 1), -1);
    assert_int_equal(opref_srdhm(INT32_MIN, -1), 1);
    assert_int_equal(opref_srdhm(-B30, 1), 0);  /* -0.5 -> 0 */
    assert_int_equal(opref_srdhm(B30, 1), 1);   /* 0.5 -> 1 */
    assert_int_equal(opref_srdhm(INT32_MIN, B30), -B30);
    assert_int_equal(opref_srdhm(B30, B30), 1 << 29);
    assert_int_equal(opref_srdhm(0, INT32_MIN), 0);
    assert_int_equal(opref_srdhm(12345, 0), 0);
}

static int32_t rdb(int32_t x, int e)
{
    int32_t out = 0;
    expect_ok(opref_rdbpot(x, e, &out));
    return out;
}

static void test_rdbpot_known(void **state)
{
    (void)state;
    /* x = -5, e = 1: mask 1, remainder (-5 & 1) = 1, threshold 0 + 1 = 1, floor(-2.5) = -3, 1 > 1 no -> -3 */
    assert_int_equal(rdb(-5, 1), -3);
    /* 5: floor 2, remainder 1 > threshold 0 -> 3 */
    assert_int_equal(rdb(5, 1), 3);
    assert_int_equal(rdb(-4, 1), -2);
    assert_int_equal(rdb(4, 1), 2);
    assert_int_equal(rdb(-1, 1), -1); /* -0.5 -> -1 */
    assert_int_equal(rdb(1, 1), 1);   /* 0.5 -> 1 */
    /* -6 / 4 = -1.5: mask 3, rem (-6 & 3) = 2, thr 1 + 1 = 2, floor -2, 2 > 2 no -> -2 */
    assert_int_equal(rdb(-6, 2), -2);
    assert_int_equal(rdb(6, 2), 2);   /* 1.5: floor 1, rem 2 > thr 1 -> 2 */
    assert_int_equal(rdb(-7, 2), -2); /* -1.75: floor -2, rem 1 > 2 no */
    assert_int_equal(rdb(-5, 2), -1); /* -1.25: floor -2, rem 3 > 2 -> -1 */
    assert_int_equal(rdb(INT32_MIN, 31), -1);
    assert_int_equal(rdb(INT32_MAX, 31), 1); /* 0.99999 */
    assert_int_equal(rdb(-B30, 31), -1);     /* -0.5 -> -1 */
    assert_int_equal(rdb(B30, 31), 1);       /* 0.5 -> 1 */
    assert_int_equal(rdb(B30 - 1, 31), 0);
    assert_int_equal(rdb(-B30 + 1, 31), 0);
    assert_int_equal(rdb(-123456, 0), -123456);
    assert_int_equal(rdb(INT32_MIN, 0), INT32_MIN);
    int32_t out;
    expect_err(opref_rdbpot(1, 32, &out), TSR_EINVAL, "rdbpot exponent 32");
    expect_err(opref_rdbpot(1, -1, &out), TSR_EINVAL, "rdbpot exponent -1");
}

static int32_t mbq(int32_t x, int32_t m, int s)
{
    int32_t out = 0;
    expect_ok(opref_mbqm(x, m, s, &out));
    return out;
}

static void test_mbqm_known(void **state)
{
    (void)state;
    /* double rounding: 5 * 0.25 = 1.25, but SRDHM(5, 2^30) = 2.5 -> 3, RDBPOT(3, 1) = 1.5 -> 2 */
    assert_int_equal(mbq(5, B30, -1), 2);
    /* 7 / 16 = 0.4375: SRDHM 3.5 -> 4, RDBPOT(4, 3) = 0.5 -> 1 */
    assert_int_equal(mbq(7, B30, -3), 1);
    /* left shift wraps: 2^30 * 2 = 2^31 -> -2^31, SRDHM(-2^31, 2^30) = -2^30 */
    assert_int_equal(mbq(B30, B30, 1), -B30);
    /* real multiplier 2 (2^30 * 2^(2-31)): 3 * 4 = 12, SRDHM(12, 2^30) = 6 */
    assert_int_equal(mbq(3, B30, 2), 6);
    assert_int_equal(mbq(INT32_MAX, INT32_MAX, 0), INT32_MAX - 1);
    assert_int_equal(mbq(123, 0, 5), 0);
    assert_int_equal(mbq(-1, B30, 0), 0);
    assert_int_equal(mbq(-3, B30, 0), -1);
    assert_int_equal(mbq(100, B30, -31), 0); /* 50 / 2^31 */
    int32_t out;
    expect_err(opref_mbqm(1, -1, 0, &out), TSR_EINVAL, "mbqm negative multiplier");
    expect_err(opref_mbqm(1, B30, 31, &out), TSR_EINVAL, "mbqm shift 31");
    expect_err(opref_mbqm(1, B30, -32, &out), TSR_EINVAL, "mbqm shift -32");
}

static void qm_expect(double r, int32_t m, int s)
{
    int32_t gm = -1;
    int gs = -99;
    expect_ok(opref_quantize_multiplier(r, &gm, &gs));
    if (gm != m || gs != s)
        fail_msg("QuantizeMultiplier(%.17g) = (%d, %d), want (%d, %d)", r, (int)gm, gs, (int)m, s);
}

static void test_quantize_multiplier_known(void **state)
{
    (void)state;
    qm_expect(0.5, B30, 0);
    qm_expect(1.0, B30, 1);
    qm_expect(0.75, 1610612736, 0);
    qm_expect(0.1, 1717986918, -3);  /* 0.8 * 2^-3; 0.8 * 2^31 = 1717986918.4 */
    qm_expect(0.3, 1288490189, -1);  /* 0.6 * 2^-1; 0.6 * 2^31 = 1288490188.8 */
    qm_expect(ldexp(1, -32), B30, -31);
    qm_expect(ldexp(1, -33), 0, 0);  /* shift -32 < -31: flushed */
    qm_expect(5e-324, 0, 0);         /* denormal */
    qm_expect(0.0, 0, 0);
    qm_expect(1 - ldexp(1, -40), B30, 1); /* q * 2^31 rounds to 2^31: halved, shift + 1 */
    qm_expect(ldexp(1, 29), B30, 30);
    qm_expect(ldexp(1, 30) - 0.5, INT32_MAX, 30);
    /* exact ties of q * 2^31 round away from zero (C round), not to even: 2^30 + 0.5 -> 2^30 + 1 */
    qm_expect(0.5 + ldexp(1, -32), B30 + 1, 0);
    qm_expect(ldexp(0.5 + ldexp(1, -32), -7), B30 + 1, -7);
    qm_expect(0.5 + ldexp(3, -32), B30 + 2, 0); /* 2^30 + 1.5 -> 2^30 + 2 */
    int32_t m;
    int s;
    expect_err(opref_quantize_multiplier(ldexp(1, 30) - 0.25, &m, &s), TSR_EBOUNDS, "scale 2^30 - 1/4");
    expect_err(opref_quantize_multiplier(ldexp(1, 30), &m, &s), TSR_EBOUNDS, "scale 2^30");
    expect_err(opref_quantize_multiplier(-0.5, &m, &s), TSR_EINVAL, "negative scale");
    expect_err(opref_quantize_multiplier(NAN, &m, &s), TSR_EINVAL, "NaN scale");
    expect_err(opref_quantize_multiplier(INFINITY, &m, &s), TSR_EINVAL, "infinite scale");
}

static void test_quantize_bound_known(void **state)
{
    (void)state;
    int32_t q = 0;
    /* ReLU6 bounds for scale 0.05, zp -128: -128 + round(0) and -128 + round(120) */
    expect_ok(opref_quantize_bound(0.0, 0.05, -128, OPREF_INT8, &q));
    assert_int_equal(q, -128);
    expect_ok(opref_quantize_bound(6.0, 0.05, -128, OPREF_INT8, &q));
    assert_int_equal(q, -8);
    /* 0.625 / 0.25 = 2.5 exactly -> 3 (half away from zero, not to even) */
    expect_ok(opref_quantize_bound(0.625, 0.25, 0, OPREF_INT8, &q));
    assert_int_equal(q, 3);
    expect_ok(opref_quantize_bound(-0.625, 0.25, 0, OPREF_INT8, &q));
    assert_int_equal(q, -3);
    expect_ok(opref_quantize_bound(-1.0, 0.003, 0, OPREF_INT8, &q)); /* -333 clamps */
    assert_int_equal(q, -128);
    expect_ok(opref_quantize_bound(INFINITY, 0.1, 7, OPREF_UINT8, &q));
    assert_int_equal(q, 255);
    expect_ok(opref_quantize_bound(-INFINITY, 0.1, 7, OPREF_UINT8, &q));
    assert_int_equal(q, 0);
    expect_err(opref_quantize_bound(1.0, 0.0, 0, OPREF_INT8, &q), TSR_EINVAL, "scale 0");
    expect_err(opref_quantize_bound(NAN, 1.0, 0, OPREF_INT8, &q), TSR_EINVAL, "NaN bound");
    expect_err(opref_quantize_bound(1.0, 1.0, 200, OPREF_INT8, &q), TSR_EINVAL, "zp 200 int8");
}

/* ------------------------------------------------- 1. hand-worked cases */

static void test_requantize_hand(void **state)
{
    (void)state;
    /* multiplier 2^30 * 2^(-3-31) = 1/16, zp -10:
     *   -1000: SRDHM -500, RDBPOT(-500, 3) = -62.5 -> -63, -73
     *       0: 0, -10
     *       7: SRDHM 3.5 -> 4, RDBPOT(4, 3) = 0.5 -> 1, -9     (7/16 = 0.44 alone would round to 0)
     *    1000: 500, 62.5 -> 63, 53
     *   10^6 : 62500 -> saturates to 127;  -10^6 -> -128 */
    int32_t accv[6] = {-1000, 0, 7, 1000, 1000000, -1000000};
    opref_acc_t acc = {1, 1, 1, 6, accv};
    int32_t m = B30, s = -3;
    opref_requant_t rq = {1, &m, &s, -128, 127, NULL};
    uint8_t yb[6];
    opref_tensor_t y = mk(OPREF_INT8, 1, 1, 1, 6, -10, yb, NULL);
    expect_ok(opref_requantize(&acc, &rq, &y));
    expect_tensor(&y, (const int32_t[]){-73, -10, -9, 53, 127, -128});
    /* uint8, zp 100: -63+100, 100, 101, 163, 255, 0 */
    y = mk(OPREF_UINT8, 1, 1, 1, 6, 100, yb, NULL);
    rq.act_min = 0;
    rq.act_max = 255;
    expect_ok(opref_requantize(&acc, &rq, &y));
    expect_tensor(&y, (const int32_t[]){37, 100, 101, 163, 255, 0});
    /* fused clamp [100, 150] */
    rq.act_min = 100;
    rq.act_max = 150;
    expect_ok(opref_requantize(&acc, &rq, &y));
    expect_tensor(&y, (const int32_t[]){100, 100, 101, 150, 150, 100});
    /* the float32 form (ONNX Runtime's): scale 1/8 by hand, ties to even:
     * -1000 -> -125, 0, 7 -> 0.875 -> 1, 1000 -> 125, 10^6 and -10^6
     * saturate; then 12 -> 1.5 -> 2 and 20 -> 2.5 -> 2 (even), -20 -> -2 */
    float f = 0.125f;
    rq = (opref_requant_t){1, &m, &s, -128, 127, &f};
    y = mk(OPREF_INT8, 1, 1, 1, 6, -10, yb, NULL);
    expect_ok(opref_requantize(&acc, &rq, &y));
    expect_tensor(&y, (const int32_t[]){-128, -10, -9, 115, 127, -128});
    int32_t tie[6] = {12, 20, -20, 28, -12, 4};
    opref_acc_t acct = {1, 1, 1, 6, tie};
    y = mk(OPREF_INT8, 1, 1, 1, 6, 0, yb, NULL);
    expect_ok(opref_requantize(&acct, &rq, &y));
    expect_tensor(&y, (const int32_t[]){2, 2, -2, 4, -2, 0});
}

static void test_conv2d_hand(void **state)
{
    (void)state;
    /* x uint8 [1,1,3,3], zp 2 -> centred [[0,1,2],[3,4,5],[6,7,8]]
     * w uint8 [1,1,2,2], zp 1: raw [[2,1],[1,3]] -> centred [[1,0],[0,2]]
     * stride (2,1), pads top 1, left 0, bottom 0, right 1:
     *   OH = floor((3+1+0-2)/2)+1 = 2, OW = floor((3+0+1-2)/1)+1 = 3
     *   centred padded rows: r-1 [0,0,0,0], r0 [0,1,2,0], r1 [3,4,5,0], r2 [6,7,8,0]
     *   out(oy,ox) = 1*P[2oy][ox] + 2*P[2oy+1][ox+1]   (P row 0 = r-1)
     *   oy 0: 0+2*1=2, 0+2*2=4, 0+2*0=0;   oy 1: 3+2*7=17, 4+2*8=20, 5+2*0=5
     *   + bias 10: [[12,14,10],[27,30,15]]
     * requant by 2^30, shift -1 (0.25), y int8 zp -3:
     *   12->6->3->0, 14->7->3.5->4->1, 10->5->2.5->3->0, 27->13.5->14->7->4, 30->15->7.5->8->5,
     *   15->7.5->8->4->1 */
    uint8_t xb[9], wb[4], yb[6];
    opref_tensor_t x = mk(OPREF_UINT8, 1, 1, 3, 3, 2, xb, (const int32_t[]){2, 3, 4, 5, 6, 7, 8, 9, 10});
    opref_tensor_t wt = mk(OPREF_UINT8, 1, 1, 2, 2, 0, wb, (const int32_t[]){2, 1, 1, 3});
    int32_t wzp = 1, bias = 10;
    opref_weights_t w = {OPREF_UINT8, 1, 1, 2, 2, wt.data, &wzp, 1};
    opref_conv_params_t p = {2, 1, 1, 0, 0, 1, 1};
    opref_shape_t s = {0, 0, 0, 0};
    expect_ok(opref_conv2d_out_shape(&x, &w, &p, &s));
    assert_int_equal(s.n, 1);
    assert_int_equal(s.c, 1);
    assert_int_equal(s.h, 2);
    assert_int_equal(s.w, 3);
    int32_t accv[6];
    opref_acc_t acc = {1, 1, 2, 3, accv};
    expect_ok(opref_conv2d_acc(&x, &w, &bias, &p, &acc));
    const int32_t want_acc[6] = {12, 14, 10, 27, 30, 15};
    for (int i = 0; i < 6; i++)
        assert_int_equal(accv[i], want_acc[i]);
    int32_t m = B30, sh = -1;
    opref_requant_t rq = {1, &m, &sh, -128, 127, NULL};
    opref_tensor_t y = mk(OPREF_INT8, 1, 1, 2, 3, -3, yb, NULL);
    expect_ok(opref_conv2d(&x, &w, &bias, &p, &rq, &y));
    expect_tensor(&y, (const int32_t[]){0, 1, 0, 4, 5, 1});
    /* without bias: acc = [[2,4,0],[17,20,5]] */
    expect_ok(opref_conv2d_acc(&x, &w, NULL, &p, &acc));
    const int32_t want_nobias[6] = {2, 4, 0, 17, 20, 5};
    for (int i = 0; i < 6; i++)
        assert_int_equal(accv[i], want_nobias[i]);
}

static void test_depthwise_hand(void **state)
{
    (void)state;
    /* x int8 [1,2,2,2] zp 0: ch0 [1,2,3,4], ch1 [-1,-2,-3,-4]
     * w int8 [2,1,2,2], per-channel zp [0, 1]: ch0 [1,1,1,1], ch1 raw [1,-1,2,0] -> centred [0,-2,1,-1]
     * no padding, 1x1 output: ch0 1+2+3+4 = 10, + bias 100 = 110
     *                         ch1 0 + 4 - 3 + 4 = 5, + bias -5 = 0
     * per-channel requant: ch0 2^30, shift -2 (1/8): SRDHM 55, RDBPOT(55, 2) = 13.75 -> 14
     *                      ch1 2^30, shift 0: 0 */
    uint8_t xb[8], wb[8], yb[2];
    opref_tensor_t x = mk(OPREF_INT8, 1, 2, 2, 2, 0, xb, (const int32_t[]){1, 2, 3, 4, -1, -2, -3, -4});
    opref_tensor_t wt = mk(OPREF_INT8, 2, 1, 2, 2, 0, wb, (const int32_t[]){1, 1, 1, 1, 1, -1, 2, 0});
    int32_t wzp[2] = {0, 1}, bias[2] = {100, -5};
    opref_weights_t w = {OPREF_INT8, 2, 1, 2, 2, wt.data, wzp, 2};
    opref_conv_params_t p = {1, 1, 0, 0, 0, 0, 2};
    int32_t accv[2];
    opref_acc_t acc = {1, 2, 1, 1, accv};
    expect_ok(opref_conv2d_acc(&x, &w, bias, &p, &acc));
    assert_int_equal(accv[0], 110);
    assert_int_equal(accv[1], 0);
    int32_t m[2] = {B30, B30}, sh[2] = {-2, 0};
    opref_requant_t rq = {2, m, sh, -128, 127, NULL};
    opref_tensor_t y = mk(OPREF_INT8, 1, 2, 1, 1, 0, yb, NULL);
    expect_ok(opref_conv2d(&x, &w, bias, &p, &rq, &y));
    expect_tensor(&y, (const int32_t[]){14, 0});
    rq.act_max = 10; /* fused clamp */
    expect_ok(opref_conv2d(&x, &w, bias, &p, &rq, &y));
    expect_tensor(&y, (const int32_t[]){10, 0});
}

static void test_dense_hand(void **state)
{
    (void)state;
    /* x uint8 [2,3] zp 128 -> centred [[0,1,2],[-1,-2,127]]; w int8 [M=2][K=3] zp 0: [[1,2,3],[-1,0,1]]
     *   acc[0] = [0+2+6, 0+0+2] = [8, 2]; acc[1] = [-1-4+381, 1+0+127] = [376, 128]
     * requant 2^30 shift 0 (0.5) to uint8 zp 128: 4+128, 1+128, 188+128 = 316 -> 255, 64+128 */
    uint8_t xb[6], wb[6], yb[4];
    opref_tensor_t x = mk(OPREF_UINT8, 2, 3, 1, 1, 128, xb, (const int32_t[]){128, 129, 130, 127, 126, 255});
    opref_tensor_t wt = mk(OPREF_INT8, 2, 3, 1, 1, 0, wb, (const int32_t[]){1, 2, 3, -1, 0, 1});
    int32_t wzp = 0;
    opref_weights_t w = {OPREF_INT8, 2, 3, 1, 1, wt.data, &wzp, 1};
    int32_t accv[4];
    opref_acc_t acc = {2, 2, 1, 1, accv};
    expect_ok(opref_dense_acc(&x, &w, NULL, &acc));
    assert_int_equal(accv[0], 8);
    assert_int_equal(accv[1], 2);
    assert_int_equal(accv[2], 376);
    assert_int_equal(accv[3], 128);
    int32_t m = B30, sh = 0;
    opref_requant_t rq = {1, &m, &sh, 0, 255, NULL};
    opref_tensor_t y = mk(OPREF_UINT8, 2, 2, 1, 1, 128, yb, NULL);
    expect_ok(opref_dense(&x, &w, NULL, &rq, &y));
    expect_tensor(&y, (const int32_t[]){132, 129, 255, 192});

    /* K = C*H*W flattening: the same x as [2][3][1][1] or [2][1][1][3] gives the same result */
    opref_tensor_t x2 = x;
    x2.c = 1;
    x2.w = 3;
    expect_ok(opref_dense_acc(&x2, &w, NULL, &acc));
    assert_int_equal(accv[2], 376);
}

static void test_acc_wraps(void **state)
{
    (void)state;
    /* x int8 127 with zp -128 -> 255; w int8 -128 with zp 127 -> -255; product -65025;
     * bias INT32_MIN + 1000: exact sum INT32_MIN - 64025 wraps to INT32_MAX - 64024 = 2147419623 */
    uint8_t xb[1], wb[1];
    opref_tensor_t x = mk(OPREF_INT8, 1, 1, 1, 1, -128, xb, (const int32_t[]){127});
    opref_tensor_t wt = mk(OPREF_INT8, 1, 1, 1, 1, 0, wb, (const int32_t[]){-128});
    int32_t wzp = 127, bias = INT32_MIN + 1000, accv[1];
    opref_weights_t w = {OPREF_INT8, 1, 1, 1, 1, wt.data, &wzp, 1};
    opref_acc_t acc = {1, 1, 1, 1, accv};
    expect_ok(opref_dense_acc(&x, &w, &bias, &acc));
    assert_int_equal(accv[0], 2147419623);
    opref_conv_params_t p = {1, 1, 0, 0, 0, 0, 1};
    expect_ok(opref_conv2d_acc(&x, &w, &bias, &p, &acc));
    assert_int_equal(accv[0], 2147419623);
}

static void test_maxpool_hand(void **state)
{
    (void)state;
    /* x int8 [1,1,3,3] all negative, zp 0; kernel 2x2 stride 2, pads bottom 1 right 1:
     *   OH = OW = floor((3+0+1-2)/2)+1 = 2
     *   (0,0): max(-5,-6,-8,-9) = -5; (0,1): cols 2..3 -> max(-7,-10) = -7 (padding would be 0);
     *   (1,0): rows 2..3 -> max(-11,-12) = -11; (1,1): -13 */
    uint8_t xb[9], yb[4];
    opref_tensor_t x = mk(OPREF_INT8, 1, 1, 3, 3, 0, xb, (const int32_t[]){-5, -6, -7, -8, -9, -10, -11, -12, -13});
    opref_pool_params_t p = {2, 2, 2, 2, 0, 0, 1, 1, 0};
    opref_shape_t s = {0, 0, 0, 0};
    expect_ok(opref_pool_out_shape(&x, &p, &s));
    assert_int_equal(s.h, 2);
    assert_int_equal(s.w, 2);
    opref_tensor_t y = mk(OPREF_INT8, 1, 1, 2, 2, 0, yb, NULL);
    expect_ok(opref_maxpool(&x, &p, &y));
    expect_tensor(&y, (const int32_t[]){-5, -7, -11, -13});
    /* the same with padding top 1, left 1 instead: windows start at -1:
     *   (0,0): only x[0][0] = -5; (0,1): x[0][1..2] = -6; (1,0): x[1..2][0] = -8; (1,1): -9 */
    opref_pool_params_t p2 = {2, 2, 2, 2, 1, 1, 0, 0, 0};
    expect_ok(opref_maxpool(&x, &p2, &y));
    expect_tensor(&y, (const int32_t[]){-5, -6, -8, -9});
}

static void test_avgpool_hand(void **state)
{
    (void)state;
    /* x int8 [1,1,2,3] = [[2,2,4],[-3,1,-9]], zp 1; kernel 2x2, stride 1, pad left 1:
     *   OH = 1, OW = floor((3+1-2)/1)+1 = 3
     *   ox 0: cols -1..0, valid [2,-3]: sum -1
     *         exclude pad: count 2, (-1 - 1)/2 = -1        (-0.5 -> -1, tie away from zero)
     *         include pad: sum -1 + 2*zp = 1, count 4, (1 + 2)/4 = 0
     *   ox 1: cols 0..1 [2,2,-3,1]: sum 2, (2 + 2)/4 = 1  (0.5 -> 1)
     *   ox 2: cols 1..2 [2,4,1,-9]: sum -2, (-2 - 2)/4 = -1 (-0.5 -> -1) */
    uint8_t xb[6], yb[3];
    opref_tensor_t x = mk(OPREF_INT8, 1, 1, 2, 3, 1, xb, (const int32_t[]){2, 2, 4, -3, 1, -9});
    opref_pool_params_t p = {2, 2, 1, 1, 0, 1, 0, 0, 0};
    opref_tensor_t y = mk(OPREF_INT8, 1, 1, 1, 3, 1, yb, NULL);
    expect_ok(opref_avgpool(&x, &p, &y));
    expect_tensor(&y, (const int32_t[]){-1, 1, -1});
    p.count_include_pad = 1;
    expect_ok(opref_avgpool(&x, &p, &y));
    expect_tensor(&y, (const int32_t[]){0, 1, -1});
}

static void test_global_avgpool_hand(void **state)
{
    (void)state;
    /* uint8 [1,2,2,2] zp 3: ch0 [1,2,3,4] = 10/4 = 2.5 -> 3; ch1 [0,0,0,2] = 0.5 -> 1 */
    uint8_t xb[8], yb[2];
    opref_tensor_t x = mk(OPREF_UINT8, 1, 2, 2, 2, 3, xb, (const int32_t[]){1, 2, 3, 4, 0, 0, 0, 2});
    opref_tensor_t y = mk(OPREF_UINT8, 1, 2, 1, 1, 3, yb, NULL);
    expect_ok(opref_global_avgpool(&x, &y));
    expect_tensor(&y, (const int32_t[]){3, 1});
    /* int8 [1,2,1,4]: ch0 [-1,-2,-3,-4] = -2.5 -> -3; ch1 [-1,0,0,0] = -0.25 -> 0 */
    x = mk(OPREF_INT8, 1, 2, 1, 4, 0, xb, (const int32_t[]){-1, -2, -3, -4, -1, 0, 0, 0});
    y = mk(OPREF_INT8, 1, 2, 1, 1, 0, yb, NULL);
    expect_ok(opref_global_avgpool(&x, &y));
    expect_tensor(&y, (const int32_t[]){-3, 0});
}

static void test_add_hand(void **state)
{
    (void)state;
    /* left_shift 0, a and b both scaled by 2^30 shift 0 (halving with SRDHM: ties toward +inf),
     * output by 2^30 shift 1 (x1, exact), y zp 5:
     *   a = [10,-10,3] -> [5,-5,2 (1.5 -> 2)]
     *   b = [3,-3,-128] -> [2 (1.5), -1 (-1.5 -> -1), -64]
     *   raw = [7,-6,-62] -> y = [12,-1,-57] */
    uint8_t ab[4], bb[4], yb[4];
    opref_tensor_t a = mk(OPREF_INT8, 1, 1, 1, 3, 0, ab, (const int32_t[]){10, -10, 3});
    opref_tensor_t b = mk(OPREF_INT8, 1, 1, 1, 3, 0, bb, (const int32_t[]){3, -3, -128});
    opref_tensor_t y = mk(OPREF_INT8, 1, 1, 1, 3, 5, yb, NULL);
    opref_add_params_t p = {0, B30, B30, 0, 0, B30, 1, -128, 127, 0};
    expect_ok(opref_add(&a, &b, &p, &y));
    expect_tensor(&y, (const int32_t[]){12, -1, -57});
    p.act_min = -10;
    p.act_max = 10;
    expect_ok(opref_add(&a, &b, &p, &y));
    expect_tensor(&y, (const int32_t[]){10, -1, -10});

    /* TFLite parameters for equal scales 1.0: twice_max 2, inputs 0.5 -> (2^30, 0),
     * output 2 / 2^20 = 2^-19 = 0.5 * 2^-18 -> (2^30, -18). 10 + 3: va = 10*2^20 -> 5*2^20,
     * vb -> 1.5*2^20, raw 6.5*2^20, SRDHM 3.25*2^20 = 3407872, RDBPOT(., 18) = 13. */
    opref_add_params_t q;
    expect_ok(opref_add_params_from_scales(1.0, 1.0, 1.0, OPREF_INT8, &q));
    assert_int_equal(q.left_shift, 20);
    assert_int_equal(q.mult_a, B30);
    assert_int_equal(q.shift_a, 0);
    assert_int_equal(q.mult_b, B30);
    assert_int_equal(q.shift_b, 0);
    assert_int_equal(q.mult_out, B30);
    assert_int_equal(q.shift_out, -18);
    assert_int_equal(q.act_min, -128);
    assert_int_equal(q.act_max, 127);
    a = mk(OPREF_INT8, 1, 1, 1, 4, 0, ab, (const int32_t[]){10, -10, 127, -128});
    b = mk(OPREF_INT8, 1, 1, 1, 4, 0, bb, (const int32_t[]){3, -3, 127, -128});
    y = mk(OPREF_INT8, 1, 1, 1, 4, 0, yb, NULL);
    expect_ok(opref_add(&a, &b, &q, &y));
    expect_tensor(&y, (const int32_t[]){13, -13, 127, -128});

    /* scales 0.5, 0.25 -> 1.0: twice_max 1, a by 0.5 (2^30, 0), b by 0.25 (2^30, -1),
     * output 2^-20 (2^30, -19). a = 10 (5.0), b = 6 (1.5): 6.5 -> 7; a = -10, b = -6: -6.5 -> -7 */
    expect_ok(opref_add_params_from_scales(0.5, 0.25, 1.0, OPREF_INT8, &q));
    assert_int_equal(q.shift_b, -1);
    assert_int_equal(q.shift_out, -19);
    a = mk(OPREF_INT8, 1, 1, 1, 2, 0, ab, (const int32_t[]){10, -10});
    b = mk(OPREF_INT8, 1, 1, 1, 2, 0, bb, (const int32_t[]){6, -6});
    y = mk(OPREF_INT8, 1, 1, 1, 2, 0, yb, NULL);
    expect_ok(opref_add(&a, &b, &q, &y));
    expect_tensor(&y, (const int32_t[]){7, -7});
}

static void test_relu_clip_hand(void **state)
{
    (void)state;
    uint8_t xb[5], yb[5];
    opref_tensor_t x = mk(OPREF_INT8, 1, 1, 1, 5, -3, xb, (const int32_t[]){-128, -4, -3, -2, 127});
    opref_tensor_t y = mk(OPREF_INT8, 1, 1, 1, 5, -3, yb, NULL);
    expect_ok(opref_relu(&x, &y)); /* max(x, zp) */
    expect_tensor(&y, (const int32_t[]){-3, -3, -3, -2, 127});
    expect_ok(opref_clip(&x, -5, 5, &y));
    expect_tensor(&y, (const int32_t[]){-5, -4, -3, -2, 5});
    x = mk(OPREF_UINT8, 1, 1, 1, 5, 128, xb, (const int32_t[]){0, 127, 128, 129, 255});
    y = mk(OPREF_UINT8, 1, 1, 1, 5, 128, yb, NULL);
    expect_ok(opref_relu(&x, &y));
    expect_tensor(&y, (const int32_t[]){128, 128, 128, 129, 255});
}

/* ------------------------------------------------------------ 4. errors */

static void test_errors(void **state)
{
    (void)state;
    uint8_t xb[64] = {0}, wb[64] = {0}, yb[64] = {0};
    int32_t accv[64];
    int32_t wzp[4] = {0, 0, 0, 0}, m[4] = {B30, B30, B30, B30}, sh[4] = {0, 0, 0, 0};
    opref_tensor_t x = mk(OPREF_INT8, 1, 2, 3, 3, 0, xb, NULL);
    opref_weights_t w = {OPREF_INT8, 2, 2, 2, 2, wb, wzp, 1};
    opref_conv_params_t p = {1, 1, 0, 0, 0, 0, 1};
    opref_requant_t rq = {1, m, sh, -128, 127, NULL};
    opref_tensor_t y = mk(OPREF_INT8, 1, 2, 2, 2, 0, yb, NULL);
    opref_acc_t acc = {1, 2, 2, 2, accv};
    expect_ok(opref_conv2d(&x, &w, NULL, &p, &rq, &y)); /* the baseline is valid */

    opref_conv_params_t bp = p;
    bp.groups = 3;
    expect_err(opref_conv2d(&x, &w, NULL, &bp, &rq, &y), TSR_EINVAL, "groups 3 with C 2");
    bp.groups = 2; /* depthwise needs weights [2][1][..] */
    expect_err(opref_conv2d(&x, &w, NULL, &bp, &rq, &y), TSR_EINVAL, "depthwise with [2][2] weights");
    bp = p;
    bp.stride_h = 0;
    expect_err(opref_conv2d(&x, &w, NULL, &bp, &rq, &y), TSR_EINVAL, "stride 0");
    bp = p;
    bp.pad_right = -1;
    expect_err(opref_conv2d(&x, &w, NULL, &bp, &rq, &y), TSR_EINVAL, "negative padding");
    opref_weights_t bw = w;
    bw.kh = 4; /* 4 > 3 + 0 + 0 */
    expect_err(opref_conv2d_acc(&x, &bw, NULL, &p, &acc), TSR_EINVAL, "kernel larger than input");
    bw = w;
    bw.i = 1;
    expect_err(opref_conv2d_acc(&x, &bw, NULL, &p, &acc), TSR_EINVAL, "weights C_in 1 vs input 2");
    bw = w;
    bw.zp_count = 3;
    expect_err(opref_conv2d_acc(&x, &bw, NULL, &p, &acc), TSR_EINVAL, "3 weight zero points for 2 channels");
    bw = w;
    bw.zp = NULL;
    expect_err(opref_conv2d_acc(&x, &bw, NULL, &p, &acc), TSR_EINVAL, "NULL weight zero points");
    int32_t bad_wzp = 128;
    bw = w;
    bw.zp = &bad_wzp;
    expect_err(opref_conv2d_acc(&x, &bw, NULL, &p, &acc), TSR_EINVAL, "weight zp 128 for int8");
    opref_tensor_t bx = x;
    bx.zp = -129;
    expect_err(opref_conv2d_acc(&bx, &w, NULL, &p, &acc), TSR_EINVAL, "input zp -129");
    bx = x;
    bx.dtype = OPREF_UINT8;
    bx.zp = -1;
    expect_err(opref_conv2d_acc(&bx, &w, NULL, &p, &acc), TSR_EINVAL, "uint8 zp -1");
    bx = x;
    bx.h = 0;
    expect_err(opref_conv2d_acc(&bx, &w, NULL, &p, &acc), TSR_EINVAL, "zero height");
    bx = x;
    bx.data = NULL;
    expect_err(opref_conv2d_acc(&bx, &w, NULL, &p, &acc), TSR_EINVAL, "NULL data");
    bx = x;
    bx.n = 70000;
    bx.c = 70000; /* more than 2^31 - 1 elements */
    expect_err(opref_conv2d_acc(&bx, &w, NULL, &p, &acc), TSR_EINVAL, "too many elements");
    opref_acc_t bacc = acc;
    bacc.w = 3;
    expect_err(opref_conv2d_acc(&x, &w, NULL, &p, &bacc), TSR_EINVAL, "accumulator shape");
    opref_tensor_t by = y;
    by.c = 1;
    expect_err(opref_conv2d(&x, &w, NULL, &p, &rq, &by), TSR_EINVAL, "output shape");
    expect_err(opref_conv2d(&x, &w, NULL, NULL, &rq, &y), TSR_EINVAL, "NULL params");

    opref_requant_t brq = rq;
    brq.count = 3;
    expect_err(opref_conv2d(&x, &w, NULL, &p, &brq, &y), TSR_EINVAL, "3 requant channels for 2");
    int32_t bad_m = -1, bad_s = 31;
    brq = rq;
    brq.mult = &bad_m;
    expect_err(opref_requantize(&acc, &brq, &y), TSR_EINVAL, "negative multiplier");
    brq = rq;
    brq.shift = &bad_s;
    expect_err(opref_requantize(&acc, &brq, &y), TSR_EINVAL, "shift 31");
    brq = rq;
    brq.act_min = 5;
    brq.act_max = 4;
    expect_err(opref_requantize(&acc, &brq, &y), TSR_EINVAL, "empty activation range");
    by = y;
    by.dtype = OPREF_UINT8;
    by.zp = 0;
    brq = rq; /* [-128, 127] is outside uint8 */
    expect_err(opref_requantize(&acc, &brq, &by), TSR_EINVAL, "int8 activation range for uint8 output");

    /* dense: K mismatch, kernel not 1x1 */
    opref_weights_t dw = {OPREF_INT8, 2, 17, 1, 1, wb, wzp, 1};
    opref_tensor_t dy = mk(OPREF_INT8, 1, 2, 1, 1, 0, yb, NULL);
    expect_err(opref_dense(&x, &dw, NULL, &rq, &dy), TSR_EINVAL, "dense K 17 vs 18");
    dw.i = 18;
    expect_ok(opref_dense(&x, &dw, NULL, &rq, &dy));
    dw.i = 9;
    dw.kw = 2;
    expect_err(opref_dense(&x, &dw, NULL, &rq, &dy), TSR_EINVAL, "dense weights with KW 2");

    /* pools */
    opref_pool_params_t pp = {2, 2, 1, 1, 0, 0, 0, 0, 0};
    opref_tensor_t py = mk(OPREF_INT8, 1, 2, 2, 2, 0, yb, NULL);
    expect_ok(opref_avgpool(&x, &pp, &py));
    opref_pool_params_t bpp = pp;
    bpp.pad_top = 2; /* == kernel */
    expect_err(opref_maxpool(&x, &bpp, &py), TSR_EINVAL, "pool pad == kernel");
    bpp = pp;
    bpp.count_include_pad = 2;
    expect_err(opref_avgpool(&x, &bpp, &py), TSR_EINVAL, "count_include_pad 2");
    bpp = pp;
    bpp.kw = 0;
    expect_err(opref_avgpool(&x, &bpp, &py), TSR_EINVAL, "kernel width 0");
    bpp = pp;
    bpp.kh = 4;
    bpp.pad_bottom = 0;
    expect_err(opref_maxpool(&x, &bpp, &py), TSR_EINVAL, "pool kernel larger than input");
    opref_tensor_t bpy = py;
    bpy.zp = 1;
    expect_err(opref_maxpool(&x, &pp, &bpy), TSR_EINVAL, "pool output zero point differs");
    bpy = py;
    bpy.dtype = OPREF_UINT8;
    expect_err(opref_avgpool(&x, &pp, &bpy), TSR_EINVAL, "pool output dtype differs");
    opref_tensor_t gy = mk(OPREF_INT8, 1, 2, 1, 2, 0, yb, NULL);
    expect_err(opref_global_avgpool(&x, &gy), TSR_EINVAL, "global pool output [1,2,1,2]");

    /* add, relu, clip */
    opref_add_params_t ap = {20, B30, B30, 0, 0, B30, -18, -128, 127, 0};
    opref_tensor_t a = mk(OPREF_INT8, 1, 2, 3, 3, 0, wb, NULL);
    opref_tensor_t ay = mk(OPREF_INT8, 1, 2, 3, 3, 0, yb, NULL);
    expect_ok(opref_add(&x, &a, &ap, &ay));
    opref_tensor_t ba = a;
    ba.w = 2;
    expect_err(opref_add(&x, &ba, &ap, &ay), TSR_EINVAL, "add shape mismatch (no broadcasting)");
    opref_add_params_t bap = ap;
    bap.left_shift = 23;
    expect_err(opref_add(&x, &a, &bap, &ay), TSR_EINVAL, "add left_shift 23");
    bap = ap;
    bap.shift_a = 1;
    expect_err(opref_add(&x, &a, &bap, &ay), TSR_EINVAL, "add input shift 1");
    bap = ap;
    bap.shift_out = 31;
    expect_err(opref_add(&x, &a, &bap, &ay), TSR_EINVAL, "add output shift 31");
    expect_err(opref_clip(&x, 5, 4, &ay), TSR_EINVAL, "clip lo > hi");
    expect_err(opref_clip(&x, -129, 4, &ay), TSR_EINVAL, "clip lo below int8");
    opref_tensor_t ry = ay;
    ry.zp = 3;
    expect_err(opref_relu(&x, &ry), TSR_EINVAL, "relu output zero point differs");
    expect_err(opref_add_params_from_scales(0.0, 1.0, 1.0, OPREF_INT8, &ap), TSR_EINVAL, "add scale 0");
    /* output multiplier 2 * 1 / (2^20 * 2^-30) = 2^11 >= 1: TFLite rejects it */
    expect_err(opref_add_params_from_scales(1.0, 1.0, ldexp(1, -30), OPREF_INT8, &ap), TSR_EBOUNDS,
               "add output multiplier >= 1");
}

/* ------------------------------------------------------------ random */

static uint64_t rng_u64(uint64_t *s)
{
    return tsr_splitmix64(s);
}

/* Uniform in [lo, hi]. */
static int64_t rr(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng_u64(s) % (uint64_t)(hi - lo + 1));
}

static const int32_t k_edges[] = {INT32_MIN, INT32_MIN + 1, -B30 - 1, -B30, -B30 + 1, -65536, -257, -256,
                                  -255, -129, -128, -3, -2, -1, 0, 1, 2, 3, 127, 128, 255, 256, 65535,
                                  B30 - 1, B30, B30 + 1, INT32_MAX - 1, INT32_MAX};
#define N_EDGES ((int)(sizeof k_edges / sizeof k_edges[0]))

/* An int32 from a mixture: edges, full range, small, near powers of two. */
static int32_t r_i32(uint64_t *s)
{
    switch (rr(s, 0, 3)) {
    case 0: return k_edges[rr(s, 0, N_EDGES - 1)];
    case 1: return (int32_t)(uint32_t)rng_u64(s);
    case 2: return (int32_t)rr(s, -65536, 65536);
    default: {
        int64_t v = ((int64_t)1 << rr(s, 0, 30)) + rr(s, -2, 2);
        return (int32_t)(rr(s, 0, 1) ? v : -v);
    }
    }
}

static int32_t r_mult(uint64_t *s)
{
    static const int32_t e[] = {0, 1, B30, B30 + 1, INT32_MAX - 1, INT32_MAX};
    switch (rr(s, 0, 3)) {
    case 0: return e[rr(s, 0, 5)];
    case 1: return (int32_t)rr(s, 0, INT32_MAX);
    default: return (int32_t)rr(s, B30, INT32_MAX);
    }
}

static int r_shift(uint64_t *s)
{
    static const int e[] = {-31, -30, -1, 0, 1, 29, 30};
    return rr(s, 0, 3) == 0 ? e[rr(s, 0, 6)] : (int)rr(s, -31, 30);
}

static opref_dtype_t r_dtype(uint64_t *s)
{
    return rr(s, 0, 1) ? OPREF_UINT8 : OPREF_INT8;
}

static int32_t r_zp(uint64_t *s, opref_dtype_t dt)
{
    int32_t lo = opref_dtype_min(dt), hi = opref_dtype_max(dt);
    switch (rr(s, 0, 5)) {
    case 0: return lo;
    case 1: return hi;
    case 2: return dt == OPREF_UINT8 ? 128 : 0;
    default: return (int32_t)rr(s, lo, hi);
    }
}

static void r_fill(uint64_t *s, opref_tensor_t *t)
{
    int64_t count = (int64_t)t->n * t->c * t->h * t->w;
    int32_t lo = opref_dtype_min(t->dtype), hi = opref_dtype_max(t->dtype);
    int mode = (int)rr(s, 0, 5); /* 0: extremes only, 1: narrow around zp, else uniform */
    for (int64_t i = 0; i < count; i++) {
        int32_t v;
        if (mode == 0)
            v = rr(s, 0, 1) ? lo : hi;
        else if (mode == 1)
            v = (int32_t)(t->zp + rr(s, -3, 3));
        else
            v = (int32_t)rr(s, lo, hi);
        opref_set(t, i, v < lo ? lo : v > hi ? hi : v);
    }
}

static void r_act(uint64_t *s, opref_dtype_t dt, int32_t *lo, int32_t *hi)
{
    *lo = opref_dtype_min(dt);
    *hi = opref_dtype_max(dt);
    if (rr(s, 0, 3) == 0) {
        int32_t a = (int32_t)rr(s, *lo, *hi), b = (int32_t)rr(s, *lo, *hi);
        *lo = a < b ? a : b;
        *hi = a < b ? b : a;
    }
}

/* Requant (mult, shift) for `count` channels: mostly from a realistic real
 * scale 2^[lo_log2, hi_log2) via QuantizeMultiplier, sometimes anything valid. */
static void r_requant(uint64_t *s, int count, double lo_log2, double hi_log2, int32_t *mult, int32_t *shift)
{
    int mode = (int)rr(s, 0, 9);
    for (int k = 0; k < count; k++) {
        if (mode < 7) {
            double e = lo_log2 + (hi_log2 - lo_log2) * (double)rr(s, 0, 1000000) / 1e6;
            double real = ldexp(1.0 + (double)rr(s, 0, 1000000) / 1e6, 0) * pow(2.0, e);
            int sh = 0;
            if (opref_quantize_multiplier(real, &mult[k], &sh) != TSR_OK) {
                mult[k] = B30;
                sh = 0;
            }
            shift[k] = sh;
        } else {
            mult[k] = r_mult(s);
            shift[k] = r_shift(s);
        }
    }
}

/* ----------------------------------------------- 3. ALU agreement */

/* Requantize one value with the ALU ops, as jit/operators.md lowers it. */
static int32_t alu_requant(int32_t (*alu)(uint32_t, int32_t, int32_t, int), int32_t x, int32_t m, int sh,
                           int32_t zp, int32_t lo, int32_t hi, int always_all_steps)
{
    int32_t v = x;
    if (sh > 0 || always_all_steps)
        v = alu(TSR_ALU_SHR, v, -(sh > 0 ? sh : 0), 32);
    v = alu(TSR_ALU_MULHR, v, m, 32);
    if (sh < 0 || always_all_steps)
        v = alu(TSR_ALU_RSHR, v, sh < 0 ? -sh : 0, 32);
    v = alu(TSR_ALU_MAX, v, lo - zp, 32);
    v = alu(TSR_ALU_MIN, v, hi - zp, 32);
    v = alu(TSR_ALU_ADD, v, zp, 32);
    return v;
}

static int32_t ref_alu_fn(uint32_t op, int32_t a, int32_t b, int w)
{
    return ref_alu(op, a, b, w);
}

static void test_alu_agreement(void **state)
{
    (void)state;
    int32_t (*alus[2])(uint32_t, int32_t, int32_t, int) = {tsr_alu_apply, ref_alu_fn};
    const char *names[2] = {"tsr_alu_apply", "ref_alu"};
    for (int f = 0; f < 2; f++) {
        /* every edge pair, then random pairs */
        for (int i = 0; i < N_EDGES; i++)
            for (int j = 0; j < N_EDGES; j++) {
                int32_t a = k_edges[i], b = k_edges[j];
                if (opref_srdhm(a, b) != alus[f](TSR_ALU_MULHR, a, b, 32))
                    fail_msg("%s mulhr(%d, %d) = %d, SRDHM = %d", names[f], (int)a, (int)b,
                             (int)alus[f](TSR_ALU_MULHR, a, b, 32), (int)opref_srdhm(a, b));
            }
        uint64_t s = 0x5eed0a1ull;
        for (int it = 0; it < 200000; it++) {
            int32_t a = r_i32(&s), b = rr(&s, 0, 1) ? r_i32(&s) : r_mult(&s);
            if (opref_srdhm(a, b) != alus[f](TSR_ALU_MULHR, a, b, 32))
                fail_msg("%s mulhr(%d, %d) differs from SRDHM", names[f], (int)a, (int)b);
            int e = (int)rr(&s, 0, 31);
            int32_t r = 0;
            expect_ok(opref_rdbpot(a, e, &r));
            if (r != alus[f](TSR_ALU_RSHR, a, e, 32))
                fail_msg("%s rshr(%d, %d) = %d, RDBPOT = %d", names[f], (int)a, e,
                         (int)alus[f](TSR_ALU_RSHR, a, e, 32), (int)r);
            /* rqfin = clamp(RDBPOT(a, e) + zp, lo, hi), exact (operators.md,
             * requantization mapping), for zp, lo, hi in 9-bit signed range */
            {
                int32_t qz = (int32_t)rr(&s, 0, 511) - 256, ql = (int32_t)rr(&s, 0, 511) - 256;
                int32_t qh = (int32_t)rr(&s, 0, 511) - 256;
                uint32_t pk = (uint32_t)e | ((uint32_t)qz & 511u) << 5 | ((uint32_t)ql & 511u) << 14 |
                              ((uint32_t)qh & 511u) << 23;
                int64_t want = (int64_t)r + qz;
                want = want < ql ? ql : want;
                want = want > qh ? qh : want;
                int32_t got = alus[f](TSR_ALU_RQFIN, a, (int32_t)pk, 32);
                if (got != want)
                    fail_msg("%s rqfin(%d, shift %d zp %d lo %d hi %d) = %d, want %d", names[f], (int)a, e,
                             (int)qz, (int)ql, (int)qh, (int)got, (int)want);
            }

            /* the whole requantization of one value, through the public function */
            int32_t m = r_mult(&s);
            int32_t sh = r_shift(&s);
            opref_dtype_t dt = r_dtype(&s);
            int32_t zp = r_zp(&s, dt), lo, hi;
            r_act(&s, dt, &lo, &hi);
            opref_acc_t acc = {1, 1, 1, 1, &a};
            opref_requant_t rq = {1, &m, &sh, lo, hi, NULL};
            uint8_t yb[1];
            opref_tensor_t y = mk(dt, 1, 1, 1, 1, zp, yb, NULL);
            expect_ok(opref_requantize(&acc, &rq, &y));
            for (int all = 0; all < 2; all++) {
                int32_t v = alu_requant(alus[f], a, m, sh, zp, lo, hi, all);
                if ((uint8_t)((uint32_t)v & 0xffu) != yb[0] || v < lo || v > hi)
                    fail_msg("%s requant(%d, M %d, S %d, zp %d, [%d, %d]%s) = %d, reference byte %u", names[f],
                             (int)a, (int)m, (int)sh, (int)zp, (int)lo, (int)hi, all ? ", all steps" : "", (int)v,
                             yb[0]);
            }
        }
    }
}

/* -------------------------------------------------- 5. NumPy cross-check */

static const char *k_numpy_script =
    "import sys\n"
    "import numpy as np\n"
    "\n"
    "I64 = np.int64\n"
    "B31 = 1 << 31\n"
    "\n"
    "def wrap32(v):\n"
    "    v = np.asarray(v, dtype=I64)\n"
    "    return ((v + B31) & 0xFFFFFFFF) - B31\n"
    "\n"
    "def srdhm(a, b):\n"
    "    # floor((a*b + 2^30) / 2^31): the ties-toward-+inf form proven equal in operators.md\n"
    "    a = np.asarray(a, dtype=I64)\n"
    "    b = np.asarray(b, dtype=I64)\n"
    "    r = (a * b + (1 << 30)) >> 31\n"
    "    return np.where((a == -B31) & (b == -B31), B31 - 1, r)\n"
    "\n"
    "def rdbpot(x, e):\n"
    "    # round half away from zero: sign(x) * floor((|x| + 2^(e-1)) / 2^e)\n"
    "    x = np.asarray(x, dtype=I64)\n"
    "    e = np.asarray(e, dtype=I64)\n"
    "    half = np.where(e > 0, np.left_shift(I64(1), np.maximum(e - 1, 0)), 0)\n"
    "    mag = (np.abs(x) + half) >> e\n"
    "    return np.where(x < 0, -mag, mag)\n"
    "\n"
    "def mbqm(x, m, s):\n"
    "    x = np.asarray(x, dtype=I64)\n"
    "    m = np.asarray(m, dtype=I64)\n"
    "    s = np.asarray(s, dtype=I64)\n"
    "    return rdbpot(srdhm(wrap32(x << np.maximum(s, 0)), m), np.maximum(-s, 0))\n"
    "\n"
    "def per_channel(v, c):\n"
    "    return np.full(c, v[0], dtype=I64) if v.size == 1 else v\n"
    "\n"
    "def requant(acc, m, s, zp, lo, hi):\n"
    "    c = acc.shape[1]\n"
    "    m = per_channel(m, c).reshape(1, c, 1, 1)\n"
    "    s = per_channel(s, c).reshape(1, c, 1, 1)\n"
    "    return np.clip(mbqm(acc, m, s) + zp, lo, hi)\n"
    "\n"
    "def round_away(s, c):\n"
    "    mag = (2 * np.abs(s) + c) // (2 * c)\n"
    "    return np.where(s < 0, -mag, mag)\n"
    "\n"
    "def out_hw(p):\n"
    "    oh = (p['H'] + p['pt'] + p['pb'] - p['KH']) // p['sh'] + 1\n"
    "    ow = (p['W'] + p['pl'] + p['pr'] - p['KW']) // p['sw'] + 1\n"
    "    return oh, ow\n"
    "\n"
    "def window(xp, p, ky, kx, oh, ow):\n"
    "    sh, sw = p['sh'], p['sw']\n"
    "    return xp[:, :, ky:ky + sh * (oh - 1) + 1:sh, kx:kx + sw * (ow - 1) + 1:sw]\n"
    "\n"
    "def pads(p):\n"
    "    return ((0, 0), (0, 0), (p['pt'], p['pb']), (p['pl'], p['pr']))\n"
    "\n"
    "def op_conv(p, a):\n"
    "    N, C, H, W = p['N'], p['C'], p['H'], p['W']\n"
    "    O, I, KH, KW = p['O'], p['I'], p['KH'], p['KW']\n"
    "    x = a['x'].reshape(N, C, H, W) - p['xzp']\n"
    "    w = a['w'].reshape(O, I, KH, KW) - per_channel(a['wzp'], O).reshape(O, 1, 1, 1)\n"
    "    xp = np.pad(x, pads(p))  # centred input padded with 0 = the real value 0\n"
    "    oh, ow = out_hw(p)\n"
    "    acc = np.zeros((N, O, oh, ow), dtype=I64)\n"
    "    for ky in range(KH):\n"
    "        for kx in range(KW):\n"
    "            win = window(xp, p, ky, kx, oh, ow)\n"
    "            if p['groups'] == 1:\n"
    "                acc += np.einsum('nchw,oc->nohw', win, w[:, :, ky, kx])\n"
    "            else:\n"
    "                acc += win * w[:, 0, ky, kx].reshape(1, O, 1, 1)\n"
    "    if 'bias' in a:\n"
    "        acc += a['bias'].reshape(1, O, 1, 1)\n"
    "    acc = wrap32(acc)\n"
    "    return {'acc': acc, 'y': requant(acc, a['m'], a['s'], p['yzp'], p['lo'], p['hi'])}\n"
    "\n"
    "def op_dense(p, a):\n"
    "    N, K, M = p['N'], p['K'], p['M']\n"
    "    x = a['x'].reshape(N, K) - p['xzp']\n"
    "    w = a['w'].reshape(M, K) - per_channel(a['wzp'], M).reshape(M, 1)\n"
    "    acc = x @ w.T\n"
    "    if 'bias' in a:\n"
    "        acc = acc + a['bias'].reshape(1, M)\n"
    "    acc = wrap32(acc).reshape(N, M, 1, 1)\n"
    "    return {'acc': acc, 'y': requant(acc, a['m'], a['s'], p['yzp'], p['lo'], p['hi'])}\n"
    "\n"
    "def op_maxpool(p, a):\n"
    "    x = a['x'].reshape(p['N'], p['C'], p['H'], p['W'])\n"
    "    xp = np.pad(x, pads(p), constant_values=-(1 << 40))\n"
    "    oh, ow = out_hw(p)\n"
    "    y = np.full((p['N'], p['C'], oh, ow), -(1 << 40), dtype=I64)\n"
    "    for ky in range(p['KH']):\n"
    "        for kx in range(p['KW']):\n"
    "            y = np.maximum(y, window(xp, p, ky, kx, oh, ow))\n"
    "    return {'y': y}\n"
    "\n"
    "def op_avgpool(p, a):\n"
    "    x = a['x'].reshape(p['N'], p['C'], p['H'], p['W'])\n"
    "    xp = np.pad(x, pads(p))\n"
    "    inside = np.pad(np.ones_like(x), pads(p))\n"
    "    oh, ow = out_hw(p)\n"
    "    s = np.zeros((p['N'], p['C'], oh, ow), dtype=I64)\n"
    "    n = np.zeros_like(s)\n"
    "    for ky in range(p['KH']):\n"
    "        for kx in range(p['KW']):\n"
    "            s += window(xp, p, ky, kx, oh, ow)\n"
    "            n += window(inside, p, ky, kx, oh, ow)\n"
    "    if p['cip']:\n"
    "        s = s + (p['KH'] * p['KW'] - n) * p['zp']\n"
    "        n = np.full_like(n, p['KH'] * p['KW'])\n"
    "    return {'y': round_away(s, n)}\n"
    "\n"
    "def op_gavg(p, a):\n"
    "    x = a['x'].reshape(p['N'], p['C'], p['H'] * p['W'])\n"
    "    return {'y': round_away(x.sum(axis=2), p['H'] * p['W'])}\n"
    "\n"
    "def op_add(p, a):\n"
    "    ls = p['ls']\n"
    "    va = (a['a'] - p['azp']) << ls\n"
    "    vb = (a['b'] - p['bzp']) << ls\n"
    "    raw = mbqm(va, p['ma'], p['sa']) + mbqm(vb, p['mb'], p['sb'])\n"
    "    return {'y': np.clip(mbqm(raw, p['mo'], p['so']) + p['yzp'], p['lo'], p['hi'])}\n"
    "\n"
    "def op_requant(p, a):\n"
    "    acc = a['acc'].reshape(p['N'], p['C'], p['H'], p['W'])\n"
    "    return {'y': requant(acc, a['m'], a['s'], p['yzp'], p['lo'], p['hi'])}\n"
    "\n"
    "def op_srdhm(p, a):\n"
    "    return {'y': srdhm(a['a'], a['b'])}\n"
    "\n"
    "def op_rdbpot(p, a):\n"
    "    return {'y': rdbpot(a['x'], a['e'])}\n"
    "\n"
    "def op_mbqm(p, a):\n"
    "    return {'y': mbqm(a['x'], a['m'], a['s'])}\n"
    "\n"
    "def op_qmul(p, a):\n"
    "    r = a['bits'].view(np.float64)\n"
    "    q, e = np.frexp(r)\n"
    "    e = e.astype(I64)\n"
    "    m = np.floor(np.ldexp(q, 31) + 0.5).astype(I64)  # q >= 0: half away from zero\n"
    "    carry = m == B31\n"
    "    m = np.where(carry, m // 2, m)\n"
    "    e = np.where(carry, e + 1, e)\n"
    "    flush = (r == 0) | (e < -31)\n"
    "    m = np.where(flush, 0, m)\n"
    "    e = np.where(flush, 0, e)\n"
    "    bad = e > 30\n"
    "    return {'m': np.where(bad, -1, m), 's': np.where(bad, 99, e)}\n"
    "\n"
    "def op_relu(p, a):\n"
    "    return {'y': np.maximum(a['x'], p['zp'])}\n"
    "\n"
    "def op_clip(p, a):\n"
    "    return {'y': np.minimum(np.maximum(a['x'], p['lo']), p['hi'])}\n"
    "\n"
    "def main():\n"
    "    ops = {k[3:]: v for k, v in globals().items() if k.startswith('op_')}\n"
    "    out = open(sys.argv[2], 'w')\n"
    "    cur = None\n"
    "    for line in open(sys.argv[1]):\n"
    "        t = line.split()\n"
    "        if not t:\n"
    "            continue\n"
    "        if t[0] == 'case':\n"
    "            cur = (int(t[1]), t[2], {}, {})\n"
    "        elif t[0] == 'p':\n"
    "            cur[2][t[1]] = int(t[2])\n"
    "        elif t[0] == 'a':\n"
    "            cur[3][t[1]] = np.array([int(v) for v in t[2:]], dtype=I64)\n"
    "        elif t[0] == 'end':\n"
    "            res = ops[cur[1]](cur[2], cur[3])\n"
    "            for name in sorted(res):\n"
    "                vals = np.asarray(res[name], dtype=I64).ravel().tolist()\n"
    "                out.write('r %d %s %s\\n' % (cur[0], name, ' '.join(map(str, vals))))\n"
    "    out.close()\n"
    "\n"
    "main()\n";

#define MAX_OUTS 2

typedef struct np_out {
    char name[8];
    int64_t *v;
    int64_t len;
    int shape[4];
    int seen;
} np_out_t;

typedef struct np_case {
    char desc[400];
    int nout;
    np_out_t out[MAX_OUTS];
} np_case_t;

typedef struct np_ctx {
    FILE *f;
    np_case_t *cases;
    int ncases, cap;
    uint64_t rng;
} np_ctx_t;

static np_case_t *case_begin(np_ctx_t *c, const char *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static np_case_t *case_begin(np_ctx_t *c, const char *op, const char *fmt, ...)
{
    if (c->ncases == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        c->cases = realloc(c->cases, (size_t)c->cap * sizeof *c->cases);
        assert_non_null(c->cases);
    }
    np_case_t *k = &c->cases[c->ncases];
    memset(k, 0, sizeof *k);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->desc, sizeof k->desc, fmt, ap);
    va_end(ap);
    fprintf(c->f, "case %d %s\n", c->ncases, op);
    c->ncases++;
    return k;
}

static void wp(np_ctx_t *c, const char *name, int64_t v)
{
    fprintf(c->f, "p %s %" PRId64 "\n", name, v);
}

static void wa32(np_ctx_t *c, const char *name, const int32_t *v, int64_t n)
{
    fprintf(c->f, "a %s", name);
    for (int64_t i = 0; i < n; i++)
        fprintf(c->f, " %d", (int)v[i]);
    fputc('\n', c->f);
}

static void wa_tensor(np_ctx_t *c, const char *name, const opref_tensor_t *t)
{
    int64_t n = (int64_t)t->n * t->c * t->h * t->w;
    fprintf(c->f, "a %s", name);
    for (int64_t i = 0; i < n; i++)
        fprintf(c->f, " %d", (int)opref_get(t, i));
    fputc('\n', c->f);
}

static void wa_weights(np_ctx_t *c, const opref_weights_t *w)
{
    opref_tensor_t t = {w->dtype, w->o, w->i, w->kh, w->kw, (void *)(uintptr_t)w->data, 0};
    wa_tensor(c, "w", &t);
    wa32(c, "wzp", w->zp, w->zp_count);
}

static void case_end(np_ctx_t *c)
{
    fputs("end\n", c->f);
}

static void out_add(np_case_t *k, const char *name, int n, int ch, int h, int w, const int64_t *v)
{
    assert_true(k->nout < MAX_OUTS);
    np_out_t *o = &k->out[k->nout++];
    snprintf(o->name, sizeof o->name, "%s", name);
    o->len = (int64_t)n * ch * h * w;
    o->shape[0] = n;
    o->shape[1] = ch;
    o->shape[2] = h;
    o->shape[3] = w;
    o->v = malloc((size_t)o->len * sizeof(int64_t));
    assert_non_null(o->v);
    memcpy(o->v, v, (size_t)o->len * sizeof(int64_t));
}

static void out_tensor(np_case_t *k, const char *name, const opref_tensor_t *t)
{
    int64_t n = (int64_t)t->n * t->c * t->h * t->w;
    int64_t *v = malloc((size_t)n * sizeof(int64_t));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = opref_get(t, i);
    out_add(k, name, t->n, t->c, t->h, t->w, v);
    free(v);
}

static void out_acc(np_case_t *k, const opref_acc_t *a)
{
    int64_t n = (int64_t)a->n * a->c * a->h * a->w;
    int64_t *v = malloc((size_t)n * sizeof(int64_t));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = a->data[i];
    out_add(k, "acc", a->n, a->c, a->h, a->w, v);
    free(v);
}

static opref_tensor_t alloc_tensor(opref_dtype_t dt, int n, int c, int h, int w, int32_t zp)
{
    opref_tensor_t t = {dt, n, c, h, w, malloc((size_t)n * c * h * w), zp};
    assert_non_null(t.data);
    return t;
}

static const char *dn(opref_dtype_t dt)
{
    return dt == OPREF_UINT8 ? "uint8" : "int8";
}

static void expect_ref_ok(int rc, const np_case_t *k)
{
    if (rc != TSR_OK)
        fail_msg("reference refused generated case \"%s\": %s", k->desc, tsr_errmsg());
}

/* Bias: absent, small, or near the int32 ends (exercises the wrap). */
static int r_bias(uint64_t *s, int count, int32_t *bias)
{
    int mode = (int)rr(s, 0, 9);
    if (mode < 3)
        return 0;
    for (int k = 0; k < count; k++) {
        if (mode == 9)
            bias[k] = rr(s, 0, 1) ? INT32_MAX - (int32_t)rr(s, 0, 200000) : INT32_MIN + (int32_t)rr(s, 0, 200000);
        else
            bias[k] = (int32_t)rr(s, -70000, 70000);
    }
    return 1;
}

static void gen_conv(np_ctx_t *c)
{
    uint64_t *s = &c->rng;
    int depthwise = rr(s, 0, 4) < 2;
    int N = (int)rr(s, 1, 2), C = (int)rr(s, 1, depthwise ? 8 : 6);
    int O = depthwise ? C : (int)rr(s, 1, 6), I = depthwise ? 1 : C;
    int KH = (int)rr(s, 1, 5), KW = (int)rr(s, 1, 5);
    int sh = rr(s, 0, 4) ? (int)rr(s, 1, 2) : 3, sw = rr(s, 0, 4) ? (int)rr(s, 1, 2) : 3;
    int pt = (int)rr(s, 0, 3), pl = (int)rr(s, 0, 3), pb = (int)rr(s, 0, 3), pr = (int)rr(s, 0, 3);
    if (rr(s, 0, 2) == 0)
        pt = pl = pb = pr = 0;
    int H = (int)rr(s, 1, 10), W = (int)rr(s, 1, 10);
    if (H + pt + pb < KH)
        H = KH - pt - pb + (int)rr(s, 0, 2);
    if (W + pl + pr < KW)
        W = KW - pl - pr + (int)rr(s, 0, 2);
    if (H < 1)
        H = 1;
    if (W < 1)
        W = 1;
    opref_dtype_t xdt = r_dtype(s), wdt = r_dtype(s), ydt = r_dtype(s);
    opref_tensor_t x = alloc_tensor(xdt, N, C, H, W, r_zp(s, xdt));
    r_fill(s, &x);
    int32_t wzp[8], bias[8], mult[8], shift[8], lo, hi;
    int wzp_count = rr(s, 0, 1) ? 1 : O;
    for (int k = 0; k < wzp_count; k++)
        wzp[k] = r_zp(s, wdt);
    opref_tensor_t wt = alloc_tensor(wdt, O, I, KH, KW, 0);
    r_fill(s, &wt);
    opref_weights_t w = {wdt, O, I, KH, KW, wt.data, wzp, wzp_count};
    int has_bias = r_bias(s, O, bias);
    int rq_count = rr(s, 0, 1) ? 1 : O;
    double terms = (double)I * KH * KW;
    r_requant(s, rq_count, -log2(terms) - 10, -log2(terms) + 1, mult, shift);
    opref_conv_params_t p = {sh, sw, pt, pl, pb, pr, depthwise ? C : 1};
    opref_shape_t os = {0, 0, 0, 0};
    expect_ok(opref_conv2d_out_shape(&x, &w, &p, &os));
    opref_tensor_t y = alloc_tensor(ydt, os.n, os.c, os.h, os.w, r_zp(s, ydt));
    r_act(s, ydt, &lo, &hi);
    opref_requant_t rq = {rq_count, mult, shift, lo, hi, NULL};

    np_case_t *k = case_begin(c, "conv",
                              "conv2d x %s[%d,%d,%d,%d] zp %d, w %s[%d,%d,%d,%d] zp %s, stride (%d,%d), pads "
                              "(t%d,l%d,b%d,r%d), groups %d, bias %s, y %s zp %d, requant %s, act [%d,%d]",
                              dn(xdt), N, C, H, W, (int)x.zp, dn(wdt), O, I, KH, KW,
                              wzp_count == 1 ? "per-tensor" : "per-channel", sh, sw, pt, pl, pb, pr, p.groups,
                              has_bias ? "yes" : "no", dn(ydt), (int)y.zp, rq_count == 1 ? "per-tensor" : "per-channel",
                              (int)lo, (int)hi);
    const char *pn[] = {"N", "C", "H", "W", "O", "I", "KH", "KW", "sh", "sw", "pt", "pl", "pb", "pr", "groups"};
    int pv[] = {N, C, H, W, O, I, KH, KW, sh, sw, pt, pl, pb, pr, p.groups};
    for (int i = 0; i < 15; i++)
        wp(c, pn[i], pv[i]);
    wp(c, "xzp", x.zp);
    wp(c, "yzp", y.zp);
    wp(c, "lo", lo);
    wp(c, "hi", hi);
    wa_tensor(c, "x", &x);
    wa_weights(c, &w);
    if (has_bias)
        wa32(c, "bias", bias, O);
    wa32(c, "m", mult, rq_count);
    wa32(c, "s", shift, rq_count);
    case_end(c);

    opref_acc_t acc = {os.n, os.c, os.h, os.w, malloc((size_t)os.n * os.c * os.h * os.w * sizeof(int32_t))};
    assert_non_null(acc.data);
    expect_ref_ok(opref_conv2d_acc(&x, &w, has_bias ? bias : NULL, &p, &acc), k);
    expect_ref_ok(opref_conv2d(&x, &w, has_bias ? bias : NULL, &p, &rq, &y), k);
    out_acc(k, &acc);
    out_tensor(k, "y", &y);
    free(acc.data);
    free(x.data);
    free(wt.data);
    free(y.data);
}

static void gen_dense(np_ctx_t *c)
{
    uint64_t *s = &c->rng;
    int N = (int)rr(s, 1, 4), C = (int)rr(s, 1, 24), H = (int)rr(s, 1, 2), W = (int)rr(s, 1, 3);
    int K = C * H * W, M = (int)rr(s, 1, 20);
    opref_dtype_t xdt = r_dtype(s), wdt = r_dtype(s), ydt = r_dtype(s);
    opref_tensor_t x = alloc_tensor(xdt, N, C, H, W, r_zp(s, xdt));
    r_fill(s, &x);
    int32_t wzp[20], bias[20], mult[20], shift[20], lo, hi;
    int wzp_count = rr(s, 0, 1) ? 1 : M;
    for (int k = 0; k < wzp_count; k++)
        wzp[k] = r_zp(s, wdt);
    opref_tensor_t wt = alloc_tensor(wdt, M, K, 1, 1, 0);
    r_fill(s, &wt);
    opref_weights_t w = {wdt, M, K, 1, 1, wt.data, wzp, wzp_count};
    int has_bias = r_bias(s, M, bias);
    int rq_count = rr(s, 0, 1) ? 1 : M;
    r_requant(s, rq_count, -log2((double)K) - 10, -log2((double)K) + 1, mult, shift);
    opref_tensor_t y = alloc_tensor(ydt, N, M, 1, 1, r_zp(s, ydt));
    r_act(s, ydt, &lo, &hi);
    opref_requant_t rq = {rq_count, mult, shift, lo, hi, NULL};

    np_case_t *k = case_begin(c, "dense",
                              "dense x %s[%d,%d,%d,%d] (K %d) zp %d, w %s[%d,%d] zp %s, bias %s, y %s zp %d, "
                              "requant %s, act [%d,%d]",
                              dn(xdt), N, C, H, W, K, (int)x.zp, dn(wdt), M, K,
                              wzp_count == 1 ? "per-tensor" : "per-channel", has_bias ? "yes" : "no", dn(ydt),
                              (int)y.zp, rq_count == 1 ? "per-tensor" : "per-channel", (int)lo, (int)hi);
    wp(c, "N", N);
    wp(c, "K", K);
    wp(c, "M", M);
    wp(c, "xzp", x.zp);
    wp(c, "yzp", y.zp);
    wp(c, "lo", lo);
    wp(c, "hi", hi);
    wa_tensor(c, "x", &x);
    wa_weights(c, &w);
    if (has_bias)
        wa32(c, "bias", bias, M);
    wa32(c, "m", mult, rq_count);
    wa32(c, "s", shift, rq_count);
    case_end(c);

    int32_t accv[4 * 20];
    opref_acc_t acc = {N, M, 1, 1, accv};
    expect_ref_ok(opref_dense_acc(&x, &w, has_bias ? bias : NULL, &acc), k);
    expect_ref_ok(opref_dense(&x, &w, has_bias ? bias : NULL, &rq, &y), k);
    out_acc(k, &acc);
    out_tensor(k, "y", &y);
    free(x.data);
    free(wt.data);
    free(y.data);
}

static void gen_pool(np_ctx_t *c, const char *op)
{
    uint64_t *s = &c->rng;
    int is_max = strcmp(op, "maxpool") == 0;
    opref_pool_params_t p;
    p.kh = (int)rr(s, 1, 4);
    p.kw = (int)rr(s, 1, 4);
    p.stride_h = (int)rr(s, 1, 3);
    p.stride_w = (int)rr(s, 1, 3);
    p.pad_top = (int)rr(s, 0, p.kh - 1);
    p.pad_bottom = (int)rr(s, 0, p.kh - 1);
    p.pad_left = (int)rr(s, 0, p.kw - 1);
    p.pad_right = (int)rr(s, 0, p.kw - 1);
    if (rr(s, 0, 2) == 0)
        p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 0;
    p.count_include_pad = (int)rr(s, 0, 1);
    int N = (int)rr(s, 1, 2), C = (int)rr(s, 1, 4), H = (int)rr(s, 1, 10), W = (int)rr(s, 1, 10);
    if (H + p.pad_top + p.pad_bottom < p.kh)
        H = p.kh;
    if (W + p.pad_left + p.pad_right < p.kw)
        W = p.kw;
    opref_dtype_t dt = r_dtype(s);
    opref_tensor_t x = alloc_tensor(dt, N, C, H, W, r_zp(s, dt));
    r_fill(s, &x);
    opref_shape_t os = {0, 0, 0, 0};
    expect_ok(opref_pool_out_shape(&x, &p, &os));
    opref_tensor_t y = alloc_tensor(dt, os.n, os.c, os.h, os.w, x.zp);
    np_case_t *k = case_begin(c, op,
                              "%s x %s[%d,%d,%d,%d] zp %d, kernel %dx%d, stride (%d,%d), pads (t%d,l%d,b%d,r%d), "
                              "count_include_pad %d",
                              op, dn(dt), N, C, H, W, (int)x.zp, p.kh, p.kw, p.stride_h, p.stride_w, p.pad_top,
                              p.pad_left, p.pad_bottom, p.pad_right, p.count_include_pad);
    const char *pn[] = {"N", "C", "H", "W", "KH", "KW", "sh", "sw", "pt", "pl", "pb", "pr", "cip", "zp"};
    int pv[] = {N, C, H, W, p.kh, p.kw, p.stride_h, p.stride_w, p.pad_top, p.pad_left, p.pad_bottom, p.pad_right,
                p.count_include_pad, (int)x.zp};
    for (int i = 0; i < 14; i++)
        wp(c, pn[i], pv[i]);
    wa_tensor(c, "x", &x);
    case_end(c);
    expect_ref_ok(is_max ? opref_maxpool(&x, &p, &y) : opref_avgpool(&x, &p, &y), k);
    out_tensor(k, "y", &y);
    free(x.data);
    free(y.data);
}

static void gen_gavg(np_ctx_t *c)
{
    uint64_t *s = &c->rng;
    int N = (int)rr(s, 1, 2), C = (int)rr(s, 1, 4), H = (int)rr(s, 1, 9), W = (int)rr(s, 1, 9);
    opref_dtype_t dt = r_dtype(s);
    opref_tensor_t x = alloc_tensor(dt, N, C, H, W, r_zp(s, dt));
    r_fill(s, &x);
    opref_tensor_t y = alloc_tensor(dt, N, C, 1, 1, x.zp);
    np_case_t *k = case_begin(c, "gavg", "global_avgpool x %s[%d,%d,%d,%d] zp %d", dn(dt), N, C, H, W, (int)x.zp);
    wp(c, "N", N);
    wp(c, "C", C);
    wp(c, "H", H);
    wp(c, "W", W);
    wa_tensor(c, "x", &x);
    case_end(c);
    expect_ref_ok(opref_global_avgpool(&x, &y), k);
    out_tensor(k, "y", &y);
    free(x.data);
    free(y.data);
}

static void gen_add(np_ctx_t *c)
{
    uint64_t *s = &c->rng;
    int N = (int)rr(s, 1, 2), C = (int)rr(s, 1, 4), H = (int)rr(s, 1, 6), W = (int)rr(s, 1, 6);
    opref_dtype_t adt = r_dtype(s), bdt = r_dtype(s), ydt = r_dtype(s);
    opref_tensor_t a = alloc_tensor(adt, N, C, H, W, r_zp(s, adt));
    opref_tensor_t b = alloc_tensor(bdt, N, C, H, W, r_zp(s, bdt));
    opref_tensor_t y = alloc_tensor(ydt, N, C, H, W, r_zp(s, ydt));
    r_fill(s, &a);
    r_fill(s, &b);
    opref_add_params_t p;
    int mode = (int)rr(s, 0, 2);
    if (mode == 0) { /* TFLite parameters from random scales */
        double sa = ldexp(1.0 + (double)rr(s, 0, 999) / 1000, (int)rr(s, -9, 0));
        double sb = ldexp(1.0 + (double)rr(s, 0, 999) / 1000, (int)rr(s, -9, 0));
        double so = ldexp(1.0 + (double)rr(s, 0, 999) / 1000, (int)rr(s, -9, 0));
        expect_ok(opref_add_params_from_scales(sa, sb, so, ydt, &p));
    } else { /* any valid parameters; mode 1 in realistic ranges */
        p.round_once = 0; /* (the numpy cross-check mirrors the TFLite form) */
        p.left_shift = mode == 1 ? 20 : (int)rr(s, 0, 22);
        p.mult_a = r_mult(s);
        p.mult_b = r_mult(s);
        p.mult_out = r_mult(s);
        p.shift_a = mode == 1 ? (int)rr(s, -4, 0) : (int)rr(s, -31, 0);
        p.shift_b = mode == 1 ? (int)rr(s, -4, 0) : (int)rr(s, -31, 0);
        p.shift_out = mode == 1 ? (int)rr(s, -24, -12) : r_shift(s);
    }
    r_act(s, ydt, &p.act_min, &p.act_max);
    np_case_t *k = case_begin(c, "add",
                              "add [%d,%d,%d,%d] a %s zp %d, b %s zp %d, y %s zp %d, left_shift %d, a (%d,%d), "
                              "b (%d,%d), out (%d,%d), act [%d,%d]",
                              N, C, H, W, dn(adt), (int)a.zp, dn(bdt), (int)b.zp, dn(ydt), (int)y.zp, p.left_shift,
                              (int)p.mult_a, p.shift_a, (int)p.mult_b, p.shift_b, (int)p.mult_out, p.shift_out,
                              (int)p.act_min, (int)p.act_max);
    wp(c, "azp", a.zp);
    wp(c, "bzp", b.zp);
    wp(c, "yzp", y.zp);
    wp(c, "ls", p.left_shift);
    wp(c, "ma", p.mult_a);
    wp(c, "sa", p.shift_a);
    wp(c, "mb", p.mult_b);
    wp(c, "sb", p.shift_b);
    wp(c, "mo", p.mult_out);
    wp(c, "so", p.shift_out);
    wp(c, "lo", p.act_min);
    wp(c, "hi", p.act_max);
    wa_tensor(c, "a", &a);
    wa_tensor(c, "b", &b);
    case_end(c);
    expect_ref_ok(opref_add(&a, &b, &p, &y), k);
    out_tensor(k, "y", &y);
    free(a.data);
    free(b.data);
    free(y.data);
}

static void gen_requant(np_ctx_t *c)
{
    uint64_t *s = &c->rng;
    int C = (int)rr(s, 1, 8), W = (int)rr(s, 1, 64);
    int32_t accv[8 * 64], mult[8], shift[8], lo, hi;
    for (int i = 0; i < C * W; i++)
        accv[i] = r_i32(s);
    int count = rr(s, 0, 1) ? 1 : C;
    for (int k = 0; k < count; k++) {
        mult[k] = r_mult(s);
        shift[k] = r_shift(s);
    }
    opref_dtype_t dt = r_dtype(s);
    opref_tensor_t y = alloc_tensor(dt, 1, C, 1, W, r_zp(s, dt));
    r_act(s, dt, &lo, &hi);
    opref_acc_t acc = {1, C, 1, W, accv};
    opref_requant_t rq = {count, mult, shift, lo, hi, NULL};
    np_case_t *k = case_begin(c, "requant", "requantize [1,%d,1,%d] to %s zp %d, %s, act [%d,%d]", C, W, dn(dt),
                              (int)y.zp, count == 1 ? "per-tensor" : "per-channel", (int)lo, (int)hi);
    wp(c, "N", 1);
    wp(c, "C", C);
    wp(c, "H", 1);
    wp(c, "W", W);
    wp(c, "yzp", y.zp);
    wp(c, "lo", lo);
    wp(c, "hi", hi);
    wa32(c, "acc", accv, C * W);
    wa32(c, "m", mult, count);
    wa32(c, "s", shift, count);
    case_end(c);
    expect_ref_ok(opref_requantize(&acc, &rq, &y), k);
    out_tensor(k, "y", &y);
    free(y.data);
}

static void gen_unary(np_ctx_t *c, int is_relu)
{
    uint64_t *s = &c->rng;
    int W = (int)rr(s, 1, 300);
    opref_dtype_t dt = r_dtype(s);
    opref_tensor_t x = alloc_tensor(dt, 1, 1, 1, W, r_zp(s, dt));
    opref_tensor_t y = alloc_tensor(dt, 1, 1, 1, W, x.zp);
    r_fill(s, &x);
    int32_t lo, hi;
    r_act(s, dt, &lo, &hi);
    np_case_t *k = is_relu ? case_begin(c, "relu", "relu %s[%d] zp %d", dn(dt), W, (int)x.zp)
                           : case_begin(c, "clip", "clip %s[%d] [%d,%d]", dn(dt), W, (int)lo, (int)hi);
    wp(c, "zp", x.zp);
    wp(c, "lo", lo);
    wp(c, "hi", hi);
    wa_tensor(c, "x", &x);
    case_end(c);
    expect_ref_ok(is_relu ? opref_relu(&x, &y) : opref_clip(&x, lo, hi, &y), k);
    out_tensor(k, "y", &y);
    free(x.data);
    free(y.data);
}

#define SCALAR_N 20000

static void gen_scalars(np_ctx_t *c)
{
    uint64_t *s = &c->rng;
    int32_t *a = malloc(SCALAR_N * sizeof(int32_t)), *b = malloc(SCALAR_N * sizeof(int32_t));
    int32_t *e = malloc(SCALAR_N * sizeof(int32_t));
    int64_t *r = malloc(SCALAR_N * sizeof(int64_t)), *r2 = malloc(SCALAR_N * sizeof(int64_t));
    assert_true(a && b && e && r && r2);

    /* SRDHM: all edge pairs, then random */
    int n = 0;
    for (int i = 0; i < N_EDGES; i++)
        for (int j = 0; j < N_EDGES; j++, n++) {
            a[n] = k_edges[i];
            b[n] = k_edges[j];
        }
    for (; n < SCALAR_N; n++) {
        a[n] = r_i32(s);
        b[n] = rr(s, 0, 1) ? r_i32(s) : r_mult(s);
    }
    for (int i = 0; i < SCALAR_N; i++)
        r[i] = opref_srdhm(a[i], b[i]);
    np_case_t *k = case_begin(c, "srdhm", "SRDHM on %d pairs", SCALAR_N);
    wa32(c, "a", a, SCALAR_N);
    wa32(c, "b", b, SCALAR_N);
    case_end(c);
    out_add(k, "y", 1, 1, 1, SCALAR_N, r);

    /* RDBPOT: every edge with every exponent, then random */
    n = 0;
    for (int i = 0; i < N_EDGES; i++)
        for (int x = 0; x < 32; x++, n++) {
            a[n] = k_edges[i];
            e[n] = x;
        }
    for (; n < SCALAR_N; n++) {
        a[n] = r_i32(s);
        e[n] = (int32_t)rr(s, 0, 31);
    }
    for (int i = 0; i < SCALAR_N; i++) {
        int32_t v = 0;
        expect_ok(opref_rdbpot(a[i], e[i], &v));
        r[i] = v;
    }
    k = case_begin(c, "rdbpot", "RoundingDivideByPOT on %d values", SCALAR_N);
    wa32(c, "x", a, SCALAR_N);
    wa32(c, "e", e, SCALAR_N);
    case_end(c);
    out_add(k, "y", 1, 1, 1, SCALAR_N, r);

    /* MBQM over the whole valid parameter range */
    for (int i = 0; i < SCALAR_N; i++) {
        a[i] = r_i32(s);
        b[i] = r_mult(s);
        e[i] = r_shift(s);
        int32_t v = 0;
        expect_ok(opref_mbqm(a[i], b[i], e[i], &v));
        r[i] = v;
    }
    k = case_begin(c, "mbqm", "MultiplyByQuantizedMultiplier on %d values", SCALAR_N);
    wa32(c, "x", a, SCALAR_N);
    wa32(c, "m", b, SCALAR_N);
    wa32(c, "s", e, SCALAR_N);
    case_end(c);
    out_add(k, "y", 1, 1, 1, SCALAR_N, r);

    /* QuantizeMultiplier on doubles (passed as their bit patterns) */
    enum { QN = 4000 };
    double d[QN];
    static const double special[] = {0.0, 5e-324, 1e-300, 0.5, 1.0, 0.75, 0.1, 0.3, 1e-10, 1e9, 1073741823.5,
                                     1073741823.75, 1073741824.0, 1e300};
    int ns = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < QN; i++) {
        if (i < ns)
            d[i] = special[i];
        else if (i < ns + 64) /* 1 - 2^-k and 2^k boundaries */
            d[i] = (i % 2) ? 1.0 - ldexp(1, -(i - ns) / 2 - 20) : ldexp(1, (i - ns) / 2 - 40);
        else if (i % 4 == 0) /* (2k+1) * 2^e with 2k+1 of 32 bits: q * 2^31 = k + 0.5, an exact tie */
            d[i] = ldexp((double)(2 * rr(s, (int64_t)1 << 30, ((int64_t)1 << 31) - 1) + 1), (int)rr(s, -72, 0));
        else
            d[i] = ldexp(1.0 + (double)(rng_u64(s) >> 11) * ldexp(1, -53), (int)rr(s, -40, 32));
    }
    int64_t bits[QN];
    for (int i = 0; i < QN; i++) {
        int32_t m = 0;
        int sh = 0;
        int rc = opref_quantize_multiplier(d[i], &m, &sh);
        if (rc == TSR_EBOUNDS) {
            m = -1;
            sh = 99;
            tsr_err_clear();
        } else {
            expect_ok(rc);
        }
        r[i] = m;
        r2[i] = sh;
        memcpy(&bits[i], &d[i], sizeof bits[i]);
    }
    k = case_begin(c, "qmul", "QuantizeMultiplier on %d doubles", QN);
    fprintf(c->f, "a bits");
    for (int i = 0; i < QN; i++)
        fprintf(c->f, " %" PRId64, bits[i]);
    fputc('\n', c->f);
    case_end(c);
    out_add(k, "m", 1, 1, 1, QN, r);
    out_add(k, "s", 1, 1, 1, QN, r2);

    free(a);
    free(b);
    free(e);
    free(r);
    free(r2);
}

/* Compare the NumPy results with the stored reference results. */
static int compare_results(np_ctx_t *c, const char *path, uint64_t seed, char *msg, size_t msgsz)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(msg, msgsz, "cannot open NumPy output %s", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    int bad = 0;
    while (!bad && getline(&line, &cap, f) > 0) {
        char *p = line, *end;
        if (strncmp(p, "r ", 2) != 0)
            continue;
        p += 2;
        long id = strtol(p, &end, 10);
        p = end;
        while (*p == ' ')
            p++;
        char name[16] = {0};
        int nl = 0;
        while (*p && *p != ' ' && *p != '\n' && nl < 15)
            name[nl++] = *p++;
        if (id < 0 || id >= c->ncases) {
            snprintf(msg, msgsz, "NumPy output names unknown case %ld", id);
            bad = 1;
            break;
        }
        np_case_t *k = &c->cases[id];
        np_out_t *o = NULL;
        for (int j = 0; j < k->nout; j++)
            if (strcmp(k->out[j].name, name) == 0)
                o = &k->out[j];
        if (!o) {
            snprintf(msg, msgsz, "case %ld (%s): unexpected NumPy output '%s'", id, k->desc, name);
            bad = 1;
            break;
        }
        o->seen = 1;
        int64_t i = 0;
        for (;; i++) {
            long long v = strtoll(p, &end, 10);
            if (end == p)
                break;
            p = end;
            if (i >= o->len)
                break;
            if (v != o->v[i]) {
                int64_t r = i;
                int w = (int)(r % o->shape[3]);
                r /= o->shape[3];
                int h = (int)(r % o->shape[2]);
                r /= o->shape[2];
                int ch = (int)(r % o->shape[1]);
                int n = (int)(r / o->shape[1]);
                snprintf(msg, msgsz,
                         "seed 0x%" PRIx64 " case %ld: %s\n  output '%s' first difference at element %" PRId64
                         " [n %d, c %d, h %d, w %d]: reference %" PRId64 ", NumPy %lld",
                         seed, id, k->desc, name, i, n, ch, h, w, o->v[i], v);
                bad = 1;
                break;
            }
        }
        if (!bad && i != o->len) {
            snprintf(msg, msgsz, "seed 0x%" PRIx64 " case %ld (%s): output '%s' has %" PRId64 " values, want %" PRId64,
                     seed, id, k->desc, name, i, o->len);
            bad = 1;
        }
    }
    free(line);
    fclose(f);
    if (bad)
        return -1;
    for (int id = 0; id < c->ncases; id++)
        for (int j = 0; j < c->cases[id].nout; j++)
            if (!c->cases[id].out[j].seen) {
                snprintf(msg, msgsz, "seed 0x%" PRIx64 " case %d (%s): NumPy produced no '%s'", seed, id,
                         c->cases[id].desc, c->cases[id].out[j].name);
                return -1;
            }
    return 0;
}

static void test_numpy_crosscheck(void **state)
{
    (void)state;
    uint64_t seed = 0x0e7a7e5eed2024ull;
    const char *env = getenv("TSR_OPREF_SEED");
    if (env && *env)
        seed = strtoull(env, NULL, 0);

    char dir[] = "/tmp/test_opref.XXXXXX";
    if (!mkdtemp(dir))
        fail_msg("mkdtemp failed");
    char script[64], cases[64], out[64], err[64];
    snprintf(script, sizeof script, "%s/opref.py", dir);
    snprintf(cases, sizeof cases, "%s/cases.txt", dir);
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(err, sizeof err, "%s/stderr.txt", dir);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fputs(k_numpy_script, f);
    fclose(f);

    np_ctx_t c = {0};
    c.rng = seed;
    c.f = fopen(cases, "w");
    assert_non_null(c.f);
    for (int i = 0; i < 600; i++)
        gen_conv(&c);
    for (int i = 0; i < 300; i++)
        gen_dense(&c);
    for (int i = 0; i < 250; i++)
        gen_pool(&c, "maxpool");
    for (int i = 0; i < 350; i++)
        gen_pool(&c, "avgpool");
    for (int i = 0; i < 100; i++)
        gen_gavg(&c);
    for (int i = 0; i < 300; i++)
        gen_add(&c);
    for (int i = 0; i < 150; i++)
        gen_requant(&c);
    for (int i = 0; i < 40; i++) {
        gen_unary(&c, 1);
        gen_unary(&c, 0);
    }
    gen_scalars(&c);
    fclose(c.f);

    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s %s 2>%s", script, cases, out, err);
    int st = system(cmd);
    char msg[2048] = "";
    int failed = 0;
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char errtext[1024] = "";
        FILE *ef = fopen(err, "r");
        if (ef) {
            size_t got = fread(errtext, 1, sizeof errtext - 1, ef);
            errtext[got] = '\0';
            fclose(ef);
        }
        snprintf(msg, sizeof msg,
                 "/usr/bin/python3 with NumPy failed (status %d; NumPy is installed by scripts/setup.sh), seed "
                 "0x%" PRIx64 ":\n%s",
                 st, seed, errtext);
        failed = 1;
    } else if (compare_results(&c, out, seed, msg, sizeof msg) != 0) {
        failed = 1;
    }
    fprintf(stderr, "test_opref: %d NumPy cases, seed 0x%" PRIx64 " (set TSR_OPREF_SEED to change)%s\n", c.ncases,
            seed, failed ? "" : ", all equal");
    for (int i = 0; i < c.ncases; i++)
        for (int j = 0; j < c.cases[i].nout; j++)
            free(c.cases[i].out[j].v);
    free(c.cases);
    if (failed)
        fail_msg("%s\n  (inputs kept in %s)", msg, dir);
    unlink(script);
    unlink(cases);
    unlink(out);
    unlink(err);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_srdhm_known),
        cmocka_unit_test(test_rdbpot_known),
        cmocka_unit_test(test_mbqm_known),
        cmocka_unit_test(test_quantize_multiplier_known),
        cmocka_unit_test(test_quantize_bound_known),
        cmocka_unit_test(test_requantize_hand),
        cmocka_unit_test(test_conv2d_hand),
        cmocka_unit_test(test_depthwise_hand),
        cmocka_unit_test(test_dense_hand),
        cmocka_unit_test(test_acc_wraps),
        cmocka_unit_test(test_maxpool_hand),
        cmocka_unit_test(test_avgpool_hand),
        cmocka_unit_test(test_global_avgpool_hand),
        cmocka_unit_test(test_add_hand),
        cmocka_unit_test(test_relu_clip_hand),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_alu_agreement),
        cmocka_unit_test(test_numpy_crosscheck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
