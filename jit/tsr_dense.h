/*
 * tsr_dense: lowering of the quantized dense (fully connected) operator of
 * jit/operators.md: x [N, K] (an [N, C, H, W] tensor read as [N, C*H*W]),
 * weights [M, K] (int8/uint8, zero point per tensor or per output), int32
 * bias, per-tensor or per-channel requantization, int8/uint8 output with
 * zero point and clamp. Output [N, M].
 *
 * Why through conv2d. A dense layer is a 1x1 convolution whose spatial
 * positions are the batch rows: x [N, K] becomes the conv input
 * [L, K', R, 1] with R = ceil(N / BATCH) rows per batch lane and L =
 * ceil(N / R) lanes (row n -> lane n / R, row n % R; rows past N hold x_zp
 * and are dropped). Each GEMM instruction then sweeps R rows (up to the
 * tile height) with one uop per input block, so the GEMM core sees long
 * loops rather than one instruction per row, every BATCH lane is used, and
 * the conv2d JIT's tiling, double buffering, zero-point folding and
 * requantization are reused unchanged (tsr_conv2d.h).
 *
 * Weight zero points. The conv2d lowering stores w - w_zp[m] as int8. When
 * some weight the dtype allows could make that leave [-128, 127] (uint8
 * weights with zp != 128, int8 weights with zp != 0), the reduction is
 * split into P = 2 or 3 parts: K' = P*K, the input is repeated P times along
 * K' and w - w_zp is written as a sum of P int8 values (greedy: each part
 * takes clamp(rest, -128, 127)), which is exact because SUM_p (x - x_zp) *
 * part_p = (x - x_zp) * (w - w_zp). P depends only on the dtype and zero
 * points (known at plan time), never on the weight values; it costs P times
 * the GEMM work and input traffic.
 */
#ifndef TSR_DENSE_H
#define TSR_DENSE_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_conv2d.h"
#include "tsr_driver.h"
#include "tsr_npy.h"
#include "tsr_requant.h"

typedef struct tsr_dense_params {
    int n;                         /* batch rows N >= 1 */
    int k;                         /* reduction length K >= 1 (C*H*W for a 4-D input) */
    int m;                         /* output features M >= 1 */
    tsr_dtype_e x_dtype;           /* TSR_DT_INT8 or TSR_DT_UINT8 */
    int32_t x_zp;                  /* input zero point, within x_dtype's range */
    tsr_dtype_e w_dtype;           /* TSR_DT_INT8 or TSR_DT_UINT8 */
    const int32_t *w_zp;           /* [w_zp_count] weight zero points, within w_dtype's range */
    int w_zp_count;                /* 1 (per tensor) or M (per output) */
    /* the output: y_dtype, y_zp, mult, shift, rq_count (1 per tensor or M per output), act_min,
     * act_max (tsr_requant.h), also as .rq */
    TSR_REQUANT_MEMBERS;
} tsr_dense_params_t;

typedef struct tsr_dense_plan {
    tsr_dense_params_t p;          /* copy of the parameters (arrays point into the plan's own copies) */
    int32_t *w_zp, *mult, *shift;  /* owned copies of the parameter arrays */
    int parts;                     /* P: int8 parts of w - w_zp (1 when it always fits int8) */
    int rows;                      /* R: rows per batch lane (the conv input height) */
    int lanes;                     /* L: batch lanes used (the conv input N) */
    tsr_conv2d_plan_t conv;        /* the 1x1 conv2d plan doing the work (owns the device buffers) */
} tsr_dense_plan_t;

/* Validate a parameter set (everything that does not depend on the
 * config); *parts (may be NULL) gets P. */
int tsr_dense_check(const tsr_dense_params_t *p, int *parts);

/* Validate, map onto a 1x1 conv2d for dev's config and plan it (device
 * buffers, uop kernels, instruction stream). */
int tsr_dense_plan(tsr_device_t *dev, const tsr_dense_params_t *p, tsr_dense_plan_t *plan);
void tsr_dense_plan_free(tsr_device_t *dev, tsr_dense_plan_t *plan);

/* x: [N, K] row-major bytes of x_dtype. */
int tsr_dense_write_input(tsr_device_t *dev, const tsr_dense_plan_t *plan, const void *x);
/* w: [M, K] row-major bytes of w_dtype; bias: [M] or NULL. */
int tsr_dense_write_weights(tsr_device_t *dev, const tsr_dense_plan_t *plan, const void *w, const int32_t *bias);
/* tsr_submit (verifies) + tsr_wait. */
int tsr_dense_exec(tsr_device_t *dev, const tsr_dense_plan_t *plan);
/* y: [N, M] row-major bytes of y_dtype. */
int tsr_dense_read_output(tsr_device_t *dev, const tsr_dense_plan_t *plan, void *y);

/* One call: plan, write, run, read, free. bias may be NULL. */
int tsr_dense_run(tsr_device_t *dev, const tsr_dense_params_t *p, const void *x, const void *w, const int32_t *bias,
                  void *y);

#endif
