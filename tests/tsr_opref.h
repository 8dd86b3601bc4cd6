/*
 * tsr_opref: the plain-C reference for the quantized operators of
 * jit/operators.md (the normative definition; read it first). Written from
 * that document only, for clarity rather than speed: naive loops, 64-bit
 * intermediates, every rule spelled out (conv2d alone centres its operands
 * once and skips padded taps, which contribute exactly 0, so that whole
 * networks, tests/tsr_netref.c, run in seconds). It uses nothing from jit/ and is
 * compiled into the tests only (never into libtessera).
 *
 * Data structures (all plain arrays, row-major, caller-owned memory):
 *
 *   opref_tensor_t   a quantized activation tensor, NCHW: element (n, c, h, w)
 *                    is data[((n*C + c)*H + h)*W + w], one byte each, read as
 *                    int8_t or uint8_t according to dtype; one zero point.
 *   opref_weights_t  quantized weights, OIHW: element (o, i, kh, kw) is
 *                    data[((o*I + i)*KH + kh)*KW + kw]; zero point per tensor
 *                    (zp_count == 1) or per output channel (zp_count == O).
 *                    Dense weights are [M][K] = O x I with KH = KW = 1.
 *   opref_acc_t      an int32 tensor (accumulators), NCHW like opref_tensor_t.
 *
 * Every dimension must be >= 1 and a tensor may hold at most 2^31 - 1
 * elements. Output tensors must already have the right shape (use the
 * *_out_shape helpers) and data; the functions check them.
 *
 * Every function that can fail returns TSR_OK or a negative tsr_error.h code
 * (TSR_EINVAL for bad shapes/parameters, TSR_EBOUNDS for a value that does
 * not fit, TSR_ENOMEM) with a message recorded by tsr_err(); on failure the
 * outputs are unspecified.
 */
#ifndef TSR_OPREF_H
#define TSR_OPREF_H

#include <stdint.h>

/* ------------------------------------------------------------- types */

typedef enum opref_dtype {
    OPREF_INT8 = 0,  /* [-128, 127] */
    OPREF_UINT8 = 1, /* [0, 255] */
} opref_dtype_t;

/* Range of a dtype. */
int32_t opref_dtype_min(opref_dtype_t dt);
int32_t opref_dtype_max(opref_dtype_t dt);

typedef struct opref_shape {
    int n, c, h, w;
} opref_shape_t;

typedef struct opref_tensor {
    opref_dtype_t dtype;
    int n, c, h, w;
    void *data; /* n*c*h*w bytes */
    int32_t zp; /* zero point, within the dtype range */
} opref_tensor_t;

typedef struct opref_weights {
    opref_dtype_t dtype;
    int o, i, kh, kw;
    const void *data;  /* o*i*kh*kw bytes */
    const int32_t *zp; /* zp_count zero points, each within the dtype range */
    int zp_count;      /* 1 (per tensor) or o (per output channel) */
} opref_weights_t;

typedef struct opref_acc {
    int n, c, h, w;
    int32_t *data; /* n*c*h*w values */
} opref_acc_t;

/* Requantization int32 -> int8/uint8 (operators.md "Requantization"). The
 * output dtype and zero point are those of the output tensor. */
typedef struct opref_requant {
    int count;            /* 1 (per tensor) or C of the output (per channel) */
    const int32_t *mult;  /* [count], each in [0, 2^31 - 1] */
    const int32_t *shift; /* [count], each in [-31, 30]; > 0 shifts left */
    int32_t act_min;      /* output clamp (fused activation), within the */
    int32_t act_max;      /* output dtype range, act_min <= act_max */
    const float *fscale;  /* NULL, or [count] float32 scales: y = clamp(round_half_even((float)acc * fscale) + zp),
                             ONNX Runtime's form (MLAS MlasRequantizeOutput), mult/shift unused */
} opref_requant_t;

typedef struct opref_conv_params {
    int stride_h, stride_w; /* >= 1 */
    int pad_top, pad_left, pad_bottom, pad_right; /* >= 0 */
    int groups; /* 1, or C_in == C_out (depthwise, weights [C][1][KH][KW]) */
} opref_conv_params_t;

typedef struct opref_pool_params {
    int kh, kw;             /* >= 1 */
    int stride_h, stride_w; /* >= 1 */
    int pad_top, pad_left, pad_bottom, pad_right; /* 0 <= pad < kernel size */
    int count_include_pad; /* avgpool only: 0 or 1 */
} opref_pool_params_t;

/* Elementwise add (operators.md "add"); zero points come from the tensors. */
typedef struct opref_add_params {
    int left_shift;             /* [0, 22] (TFLite: 20) */
    int32_t mult_a, mult_b;     /* input multipliers, [0, 2^31 - 1] */
    int shift_a, shift_b;       /* [-31, 30] */
    int32_t mult_out;           /* output multiplier, [0, 2^31 - 1] */
    int shift_out;              /* [-31, 30] */
    int32_t act_min, act_max;   /* output clamp, as in opref_requant_t */
    int round_once;             /* 1: mult_out is 2^30, y = RDBPOT(sum, 1 - shift_out) + zp, clamped (one
                                   rounding, ONNX Runtime's QLinearAdd) */
} opref_add_params_t;

/* ------------------------------------------------ fixed-point helpers */

/* gemmlowp SaturatingRoundingDoublingHighMul: INT32_MAX if a == b ==
 * INT32_MIN, else floor((a*b + 2^30) / 2^31) (ties toward +infinity). Total. */
int32_t opref_srdhm(int32_t a, int32_t b);
/* gemmlowp RoundingDivideByPOT: x / 2^exponent rounded half away from zero,
 * exponent in [0, 31]. */
int opref_rdbpot(int32_t x, int exponent, int32_t *out);
/* TFLite MultiplyByQuantizedMultiplier (double rounding):
 * rdbpot(srdhm(wrap32(x * 2^max(shift,0)), mult), max(-shift,0)),
 * mult in [0, 2^31 - 1], shift in [-31, 30]. */
int opref_mbqm(int32_t x, int32_t mult, int shift, int32_t *out);
/* TFLite QuantizeMultiplier for a finite real >= 0: (0, 0) for 0 and for
 * reals below about 2^-32, else mult in [2^30, 2^31) and real ~ mult * 2^(shift-31).
 * TSR_EINVAL for negative / NaN / infinite, TSR_EBOUNDS if shift would exceed 30. */
int opref_quantize_multiplier(double real, int32_t *mult, int *shift);
/* TFLite's activation-bound quantization: zp + round_half_away(real / scale),
 * clamped to the dtype range (scale > 0, zp within the range). */
int opref_quantize_bound(double real, double scale, int32_t zp, opref_dtype_t dt, int32_t *q);
/* TFLite ADD parameter preparation (left_shift 20) from the three scales
 * (each > 0); act range = the whole range of out_dtype. */
int opref_add_params_from_scales(double scale_a, double scale_b, double scale_out,
                                 opref_dtype_t out_dtype, opref_add_params_t *p);

/* ------------------------------------------------------- operators */

int opref_conv2d_out_shape(const opref_tensor_t *x, const opref_weights_t *w, const opref_conv_params_t *p,
                           opref_shape_t *out);
/* acc[n][o][y][x] = wrap32(sum (x - x_zp)*(w - w_zp[o]) + bias[o]); bias may be NULL. */
int opref_conv2d_acc(const opref_tensor_t *x, const opref_weights_t *w, const int32_t *bias,
                     const opref_conv_params_t *p, opref_acc_t *acc);
/* conv2d_acc then requantize into y (per-channel = per output channel). */
int opref_conv2d(const opref_tensor_t *x, const opref_weights_t *w, const int32_t *bias,
                 const opref_conv_params_t *p, const opref_requant_t *rq, opref_tensor_t *y);

/* Dense: x [N][C][H][W] is read as [N][K] with K = C*H*W (flattened NCHW),
 * weights [M][K] (o = M, i = K, kh = kw = 1); output [N][M][1][1]. */
int opref_dense_out_shape(const opref_tensor_t *x, const opref_weights_t *w, opref_shape_t *out);
int opref_dense_acc(const opref_tensor_t *x, const opref_weights_t *w, const int32_t *bias, opref_acc_t *acc);
int opref_dense(const opref_tensor_t *x, const opref_weights_t *w, const int32_t *bias,
                const opref_requant_t *rq, opref_tensor_t *y);

/* acc [N][C][H][W] -> y of the same shape; channel = C index. */
int opref_requantize(const opref_acc_t *acc, const opref_requant_t *rq, opref_tensor_t *y);

/* Pools: y has x's dtype and zero point. */
int opref_pool_out_shape(const opref_tensor_t *x, const opref_pool_params_t *p, opref_shape_t *out);
int opref_maxpool(const opref_tensor_t *x, const opref_pool_params_t *p, opref_tensor_t *y);
int opref_avgpool(const opref_tensor_t *x, const opref_pool_params_t *p, opref_tensor_t *y);
/* y [N][C][1][1]. */
int opref_global_avgpool(const opref_tensor_t *x, opref_tensor_t *y);

/* a, b, y all the same shape (no broadcasting). */
int opref_add(const opref_tensor_t *a, const opref_tensor_t *b, const opref_add_params_t *p, opref_tensor_t *y);
/* y = max(x, zp); y has x's shape, dtype and zero point. */
int opref_relu(const opref_tensor_t *x, opref_tensor_t *y);
/* y = min(max(x, lo), hi), lo <= hi within the dtype range; same shape/dtype/zp. */
int opref_clip(const opref_tensor_t *x, int32_t lo, int32_t hi, opref_tensor_t *y);

/* Multiply by a per-channel vector (operators.md "mul by a per-channel
 * vector", ONNX Runtime's QLinearMul broadcast over H, W): x [N,C,H,W],
 * s [N,C,1,1], y of x's shape (its own dtype and zero point);
 * y = clamp(nearbyintf(float32(float32(float32((x - x_zp)(s - s_zp)) *
 * scale) + y_zp)), act_min, act_max), float32 arithmetic rounded to
 * nearest even (the zero point added before the integer rounding). */
int opref_mul(const opref_tensor_t *x, const opref_tensor_t *s, float scale, int32_t act_min, int32_t act_max,
              opref_tensor_t *y);

/* Global average into y's own quantization: S[n][c] = sum over h, w of
 * (x - x_zp), exact; y [N,C,1,1] = the requantization rq of S (per tensor:
 * rq->count 1; rq->fscale for ONNX Runtime's float32 form). */
int opref_gavg(const opref_tensor_t *x, const opref_requant_t *rq, opref_tensor_t *y);

/* Softmax along w (jit/operators.md "softmax"): per row of w elements,
 * m = max x, d = m - x, E(d) = floor(2^P exp(-d x_scale) + 1/2) (double),
 * S = sum E, R = floor(2^(30+P) / S), y = min(RDBPOT(SRDHM(E ys, R), P - 1)
 * + y_zp, 255) written as its low 8 bits; ys = floorf(1.0f / y_scale),
 * P = min(22, 30 - ceil(log2 w), floor(log2((2^31 - 1) / ys))). y has x's
 * shape. TSR_EINVAL for ys outside [1, 32767] or P < 8. */
int opref_softmax(const opref_tensor_t *x, float x_scale, float y_scale, opref_tensor_t *y);

/* Element access (no checks): value of element i, and store (v must fit). */
int32_t opref_get(const opref_tensor_t *t, int64_t i);
void opref_set(opref_tensor_t *t, int64_t i, int32_t v);

#endif
