/*
 * tsr_bmm: the quantized (batched) matmul of two activations on the device
 * (jit/operators.md "matmul of two activations"): attention's Q.K^T and
 * attention.V, ONNX Runtime's QLinearMatMul with both operands computed at
 * run time:
 *
 *   Y[b] = clamp(requant(SUM_k (A[b][m][k] - a_zp) * (B[b][k][n] - b_zp)) + y_zp)
 *
 * A [batch][M][K], B [batch][K][N] (or one [K][N] for every batch,
 * b_shared), Y [batch][M][N], every zero point per tensor, the
 * requantization per tensor (fixed point, or the float32 scale where the
 * config has EXACT_REQUANT).
 *
 * How. The GEMM computes out[r][o] = SUM_i inp[r][i] * wgt[o][i], so A's
 * rows are the dense's input rows and B^T is its weight matrix [N][K]:
 * each batch is one run of one dense plan (tsr_dense.h) whose weight
 * buffer is written again for that batch, B[b] transposed into the
 * weight tiles [BLOCK_OUT][BLOCK_IN] by the host as it packs the operands
 * (the same edge packing as the input's). The dense's own weight
 * zero-point handling keeps (b - b_zp) exact: a uint8 B with b_zp != 128
 * is split into two int8 parts (twice the GEMM work), an int8 B with
 * b_zp = 0 is not; a_zp is folded into the bias as for every conv.
 * The plan (kernel, buffers) is made once and runs every batch.
 */
#ifndef TSR_BMM_H
#define TSR_BMM_H

#include <stdint.h>

#include "tsr_dense.h"
#include "tsr_driver.h"
#include "tsr_npy.h"
#include "tsr_requant.h"

typedef struct tsr_bmm_params {
    int batch;                     /* >= 1 */
    int m, k, n;                   /* A [batch][M][K], B [batch][K][N], Y [batch][M][N], each >= 1 */
    int b_shared;                  /* 1: B is one [K][N] matrix for every batch */
    tsr_dtype_e a_dtype, b_dtype;  /* TSR_DT_INT8 or TSR_DT_UINT8 */
    int32_t a_zp, b_zp;            /* within their dtypes' ranges */
    /* the output: y_dtype, y_zp, mult, shift, rq_count (must be 1), act_min, act_max, fscale
       (tsr_requant.h), also as .rq */
    TSR_REQUANT_MEMBERS;
} tsr_bmm_params_t;

typedef struct tsr_bmm_plan {
    tsr_bmm_params_t p;            /* copy (its arrays point into the plan) */
    int32_t mult, shift, b_zp;     /* the plan's copies */
    float fscale;
    tsr_dense_plan_t dense;        /* [M, K] x [N, K]^T, run once per batch */
    uint8_t *bt;                   /* [N][K] host scratch: one batch of B transposed */
} tsr_bmm_plan_t;

/* Validate (everything that does not depend on the config). */
int tsr_bmm_check(const tsr_bmm_params_t *p);
/* Validate and plan for dev (fscale dropped on a config without
 * EXACT_REQUANT: the fixed-point form, within 1 LSB). */
int tsr_bmm_plan(tsr_device_t *dev, const tsr_bmm_params_t *p, tsr_bmm_plan_t *plan);
void tsr_bmm_plan_free(tsr_device_t *dev, tsr_bmm_plan_t *plan);
/* Run every batch: a, b, y row-major bytes of their dtypes. */
int tsr_bmm_exec(tsr_device_t *dev, tsr_bmm_plan_t *plan, const void *a, const void *b, void *y);
/* Plan, run, free. */
int tsr_bmm_run(tsr_device_t *dev, const tsr_bmm_params_t *p, const void *a, const void *b, void *y);

#endif
