/*
 * tsr_grad: the backward operators of dense and conv2d (input gradient dX
 * and weight gradient dW) as int8 GEMMs on the array, for on-device
 * training (issue 27). See jit/operators.md, "Backward operators", for the
 * formulas and how each one lowers onto the forward dense / conv2d
 * lowerings (one stream builder, no new streams).
 *
 * Gradients are int8 with zero point 0 (symmetric, per-tensor scale kept by
 * the caller: quantization-aware scaling). Results are the exact int32 sums
 * (int64 reference; wrap32 as jit/operators.md says).
 */
#ifndef TSR_GRAD_H
#define TSR_GRAD_H

#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_dtype.h"

typedef struct tsr_grad_stats {
    uint64_t device_macs;   /* multiply-accumulates done by the GEMM core (useful ones: the exact count of the formula) */
    uint64_t host_macs;     /* multiply-accumulates done on the host (0 when all on the device) */
    uint64_t cycles;        /* device cycles (the backend's counter), summed over the calls */
} tsr_grad_stats_t;          /* every function ADDS to *st (st may be NULL) */

/* dense, weights w [M][K] int8 (zero point 0), dy [N][M] int8:
 *   dx[n][k] = SUM_m dy[n][m] * w[m][k]                         (int32 [N][K]) */
int tsr_grad_dense_dx(tsr_device_t *dev, int n, int k, int m, const int8_t *dy, const int8_t *w, int32_t *dx,
                      tsr_grad_stats_t *st);
/* x [N][K] bytes of x_dtype (TSR_DT_INT8 / TSR_DT_UINT8) with zero point x_zp:
 *   dw[m][k] = SUM_n dy[n][m] * (x[n][k] - x_zp)                (int32 [M][K]) */
int tsr_grad_dense_dw(tsr_device_t *dev, int n, int k, int m, const int8_t *dy, const void *x, tsr_dtype_e x_dtype,
                      int32_t x_zp, int32_t *dw, tsr_grad_stats_t *st);

typedef struct tsr_grad_conv {
    int n, c_in, h, w;            /* forward input [N, C_in, H, W] */
    int c_out, kh, kw;            /* weights [C_out, C_in/groups, KH, KW] */
    int stride_h, stride_w;
    int pad_top, pad_left, pad_bottom, pad_right;
    int groups;                   /* 1, or C_in == C_out == groups (depthwise); other groups may be refused */
} tsr_grad_conv_t;               /* output [N, C_out, OH, OW], OH = (H + pt + pb - KH) / stride_h + 1 (same as tsr_conv2d) */

/* dx[n][ci][y][x] = SUM over (co, ky, kx) with oy*sh + ky - pt == y, ox*sw + kx - pl == x of dy[n][co][oy][ox] * w[co][ci'][ky][kx]
 * (int32 [N, C_in, H, W]; the transposed convolution) */
int tsr_grad_conv_dx(tsr_device_t *dev, const tsr_grad_conv_t *p, const int8_t *dy, const int8_t *w, int32_t *dx,
                     tsr_grad_stats_t *st);
/* dw[co][ci'][ky][kx] = SUM over (n, oy, ox) of dy[n][co][oy][ox] * (x[n][ci][oy*sh+ky-pt][ox*sw+kx-pl] - x_zp), padding
 * contributing 0 (int32 [C_out, C_in/groups, KH, KW]) */
int tsr_grad_conv_dw(tsr_device_t *dev, const tsr_grad_conv_t *p, const int8_t *dy, const void *x, tsr_dtype_e x_dtype,
                     int32_t x_zp, int32_t *dw, tsr_grad_stats_t *st);

/* The same two with a device-memory budget: groups-1 convs lower either gathered on chip or as an
 * im2col GEMM (a KH*KW-fold copy of the input or dy on the device), by estimated cycles; with
 * dev_budget > 0 the im2col GEMM is taken only when its device buffers (operands, result, uops) are
 * at most dev_budget bytes, else the gathered lowering (when it has a tiling). 0: no budget, as
 * above. Same integers either way. (A trainer passes the inference's high-water mark, so that a
 * training step's peak stays within twice the inference's.) */
int tsr_grad_conv_dx_budget(tsr_device_t *dev, const tsr_grad_conv_t *p, uint64_t dev_budget, const int8_t *dy,
                            const int8_t *w, int32_t *dx, tsr_grad_stats_t *st);
int tsr_grad_conv_dw_budget(tsr_device_t *dev, const tsr_grad_conv_t *p, uint64_t dev_budget, const int8_t *dy,
                            const void *x, tsr_dtype_e x_dtype, int32_t x_zp, int32_t *dw, tsr_grad_stats_t *st);

/* The forward's exact int32 sums, before any requantization: for a training forward whose weights are
 * wider than int8, run once per int8 part of them and combined by the caller (tsr_train --weight-bits 16).
 * dense, w [M][K] int8, x [N][K] of x_dtype (int8 / uint8) with zero point x_zp:
 *   y[n][m] = SUM_k w[m][k] * (x[n][k] - x_zp)                  (int32 [N][M]) */
int tsr_grad_dense_fwd(tsr_device_t *dev, int n, int k, int m, const void *x, tsr_dtype_e x_dtype, int32_t x_zp,
                       const int8_t *w, int32_t *y, tsr_grad_stats_t *st);
/* conv (groups 1 or depthwise), w [C_out][C_in/groups][KH][KW]:
 *   y[n][co][oy][ox] = SUM over (ci', ky, kx) of w[co][ci'][ky][kx] * (x[n][ci][oy*sh+ky-pt][ox*sw+kx-pl] - x_zp),
 * ci the channel ci' of co's group, padding contributing 0 (int32 [N, C_out, OH, OW]). Kernel rows and
 * columns that meet only padding are skipped (a 3x3 conv on a 1x1 input runs its centre tap); groups 1
 * gathered on chip (the stride's phases as channels) or as the im2col GEMM, by estimated cycles under
 * dev_budget as the _budget functions above; depthwise as lanes. */
int tsr_grad_conv_fwd(tsr_device_t *dev, const tsr_grad_conv_t *p, uint64_t dev_budget, const void *x,
                      tsr_dtype_e x_dtype, int32_t x_zp, const int8_t *w, int32_t *y, tsr_grad_stats_t *st);

#endif
