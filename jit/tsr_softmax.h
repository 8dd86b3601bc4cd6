/*
 * tsr_softmax: the quantized Softmax along the last axis (w) of a device
 * tensor, in integers on the accelerator: the row maximum, the exponent by
 * activation tables (config key ACT_LUT >= 4: three of its tables), the
 * row sum, an exact integer reciprocal and the requantization, all on the
 * device (jit/operators.md "softmax" is normative; this is a summary).
 *
 * Values (per softmax row of x, i.e. fixed n, c, h; k over w; with
 * spatial, fixed n, c and k over the h*w positions):
 *   m    = max_k x_k                      (the quantized input; x_zp cancels)
 *   d_k  = m - x_k                        in [0, 255]
 *   E(d) = floor(2^P * exp(-d * x_scale) + 1/2)   (double, once per d at plan time)
 *   S    = sum_k E(d_k)                   exact, S <= w * 2^P <= 2^30
 *   R    = floor(2^(30 + P) / S)          exact (a restoring division on the ALU)
 *   q_k  = RDBPOT(SRDHM(E(d_k) * ys, R), P - 1)          (gemmlowp, as the ALU's mulhr/rqfin)
 *   y_k  = min(q_k + y_zp, 255), stored as its low 8 bits (the y dtype's byte)
 * with ys = floorf(1.0f / y_scale) (float32, as ONNX Runtime's QLinearSoftmax)
 * and P = min(22, 30 - ceil(log2 w), floor(log2((2^31 - 1) / ys))).
 * q_k is ys * E(d_k) / S rounded: the real softmax times floor(1 / y_scale),
 * which is what ONNX Runtime's QLinearSoftmax rounds too, there from a
 * float32 table, a float32 running sum and a float32 division (its
 * results can differ from these by 1 LSB: jit/operators.md). The clamp
 * at 255 and the low 8 bits are ORT's too (an int8 output over 127 wraps,
 * as its cast does).
 *
 * Refused (TSR_EINVAL, one line): shapes < 1, dtypes other than int8 /
 * uint8, zero points outside their type, scales not positive, normal and
 * finite, ys outside [1, 32767], P < 8 (w > 2^22 or ys too large), a
 * config without ACT_LUT >= 4 or with accumulators other than 32 bits, or
 * whose accumulator buffer cannot hold ten rows.
 */
#ifndef TSR_SOFTMAX_H
#define TSR_SOFTMAX_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_npy.h"

typedef struct tsr_softmax_params {
    int n, c, h, w;        /* the tensor [N, C, H, W]; softmax along w ... */
    int spatial;           /* ... or, 1, over the h*w positions of each (n, c): the last axis of a 3-D
                              [B, T, L] tensor, which a device tensor holds as [B, T, L, 1] (L the rows
                              of a group, T in the lanes); the values are those of [N, C, 1, H*W] */
    tsr_dtype_e x_dtype;   /* int8 or uint8 */
    float x_scale;         /* > 0, normal, finite */
    int32_t x_zp;          /* within x_dtype's range (the values do not depend on it) */
    tsr_dtype_e y_dtype;
    float y_scale;         /* > 0, normal, finite; floorf(1 / y_scale) in [1, 32767] */
    int32_t y_zp;
} tsr_softmax_params_t;

/* The integer form of params (tsr_softmax.h above). */
typedef struct tsr_softmax_form {
    int p;                 /* P */
    int32_t ys;            /* floorf(1.0f / y_scale) */
    int32_t e[256];        /* E(d), d = 0 .. 255: E(0) = 2^P */
} tsr_softmax_form_t;

/* Check params and compute the form (TSR_EINVAL with one line). */
int tsr_softmax_form(const tsr_softmax_params_t *p, tsr_softmax_form_t *f);

typedef struct tsr_softmax_plan {
    tsr_softmax_form_t form;
    uint32_t groups;       /* softmax rows of device rows: NB * CB * H */
    uint32_t len;          /* w (spatial: h*w) */
    uint32_t tile_groups;  /* G: softmax rows per tile */
    uint32_t chunk;        /* L: device rows of a softmax row on chip at once (w: one pass) */
    int tiles;
    uint64_t c_addr;       /* owned: the three tables, the rqfin row, the uops */
    tsr_insn_t *insns;     /* the stream (owned) */
    size_t ninsns;
    uint64_t alu_ops;      /* ALU tensor ops */
    uint64_t dram_bytes;   /* DRAM bytes of the data rows moved (acc8 in, out) */
} tsr_softmax_plan_t;

/* Plan the softmax of device tensor x into y (both [N, C, H, W] with the
 * params' dtypes and zero points, buffers allocated). */
int tsr_softmax_plan_tensors(tsr_device_t *dev, const tsr_softmax_params_t *p, const tsr_dtensor_t *x,
                             const tsr_dtensor_t *y, tsr_softmax_plan_t *plan);
/* Run the plan (tsr_submit, which verifies, + tsr_wait). */
int tsr_softmax_exec(tsr_device_t *dev, const tsr_softmax_plan_t *plan);
/* Free the stream and the constant buffer (safe on a zeroed or failed plan). */
void tsr_softmax_plan_free(tsr_device_t *dev, tsr_softmax_plan_t *plan);
/* Host NCHW bytes in and out: tensors allocated, written, planned, run, read, freed. */
int tsr_softmax_run(tsr_device_t *dev, const tsr_softmax_params_t *p, const void *x, void *y);

#endif
