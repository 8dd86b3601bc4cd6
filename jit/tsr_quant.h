/*
 * tsr_quant: the real-number side of quantization, in the library, so that
 * tools (the `tessera op` CLI, a model importer) can turn the scales a
 * framework stores into the integer parameters the operators take, exactly
 * as TFLite does (jit/operators.md, "From a real scale to (M, S)" and the
 * activation bounds of "relu and clip").
 *
 * The test-only reference (tests/tsr_opref.c) has its own copies written
 * from the same page; tests/test_dense.c checks these against them on many
 * random reals and the documented edge cases.
 */
#ifndef TSR_QUANT_H
#define TSR_QUANT_H

#include <stdint.h>

#include "tsr_npy.h"

/* TFLite QuantizeMultiplier for a finite real >= 0: (0, 0) for 0 and for
 * reals below about 2^-32 (flushed), else mult in [2^30, 2^31) and shift in
 * [-31, 30] with real ~ mult * 2^(shift - 31). TSR_EINVAL for a negative,
 * NaN or infinite real, TSR_EBOUNDS when the shift would exceed 30
 * (real >= 2^30 - 2^-2). */
int tsr_quantize_multiplier(double real, int32_t *mult, int32_t *shift);

/* Per-tensor or per-channel requantization parameters of conv2d/dense:
 * (mult[i], shift[i]) = QuantizeMultiplier(x_scale * w_scale[i] / y_scale),
 * computed in double in that order (as TFLite does). x_scale and y_scale
 * must be finite and > 0, each w_scale[i] finite and >= 0; count >= 1.
 * Messages name the channel. */
int tsr_quant_requant_params(double x_scale, const double *w_scale, int count, double y_scale, int32_t *mult,
                             int32_t *shift);

/* Integer parameters of the quantized add (jit/operators.md "add"). */
typedef struct tsr_add_quant {
    int left_shift;            /* applied to both inputs first: 20 (TFLite) */
    int32_t mult_a, shift_a;   /* input a: multiplier [2^30, 2^31) or 0, shift [-31, 0] */
    int32_t mult_b, shift_b;   /* input b: as input a */
    int32_t mult_out, shift_out; /* output: multiplier, shift [-31, 0] */
} tsr_add_quant_t;

/* TFLite ADD's Prepare from the three real scales (each finite and > 0):
 * left_shift = 20, twice_max = 2 * max(scale_a, scale_b), (mult_a, shift_a)
 * = QuantizeMultiplier(scale_a / twice_max), likewise b, and (mult_out,
 * shift_out) = QuantizeMultiplier(twice_max / (2^20 * scale_y)); every real
 * multiplier must be in (0, 1) with a shift <= 0, else TSR_EBOUNDS naming
 * it (TFLite's QuantizeMultiplierSmallerThanOneExp). */
int tsr_quant_add_params(double scale_a, double scale_b, double scale_y, tsr_add_quant_t *out);

/* TFLite's activation-bound quantization (CalculateActivationRangeQuantized):
 * zp + round(real / scale), rounding half away from zero, clamped to the
 * range of dt (TSR_DT_INT8 or TSR_DT_UINT8). scale finite and > 0, zp within
 * the range, real not NaN (infinities clamp). */
int tsr_quantize_bound(double real, double scale, int32_t zp, tsr_dtype_e dt, int32_t *q);

#endif
