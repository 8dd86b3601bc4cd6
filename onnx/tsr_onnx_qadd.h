/*
 * tsr_onnx_qadd: ONNX Runtime's QLinearAdd bytes as its x86-64 AVX2 kernel
 * computes them (MLAS MlasQLinearAddKernelAvx2Helper: the QDQ Add ORT fuses,
 * and com.microsoft QLinearAdd), in float32 with fused multiply-adds:
 *   F  = zy - fma(r0, z0, r1 * z1)       (r = fl32(s / ys), the kernel's
 *                                          constant, contracted by its compiler)
 *   y  = nearbyint(fma(x0, r0, fma(x1, r1, F))), saturated to the output type
 * on the raw integers x0, x1 of the node's inputs 0 and 1. When one operand
 * is a single value (a scalar constant), ORT passes it as MLAS's B whatever
 * the node's input order, and adds it into F first, fma(s, rb, F): the same
 * formula with the tensor as operand 0 and the scalar as operand 1.
 * The body handles every length: the last partial vector is computed by the
 * same vector code and stored masked (no scalar tail). Checked against ONNX
 * Runtime on every byte pair (scripts/onnx/test_op_add.py every_pair,
 * host_fma, scalar). The host kernel (tsr_onnx_hostf.c tsr_ox_run_qaddc),
 * the device add's exact-parameter search (ops/tsr_ox_eltwise.c) and the
 * bias Add's (ops/tsr_ox_bias.c, through the host kernel) all use these.
 * Compiled with -ffp-contract=off: every rounding here is the one written.
 */
#ifndef TSR_ONNX_QADD_H
#define TSR_ONNX_QADD_H

#include <stdint.h>

typedef struct {
    float r0, r1; /* the scale ratios fl32(s0 / ys), fl32(s1 / ys) of operands 0 and 1 */
    float F;      /* zy - fma(r0, z0, r1 * z1) */
    int32_t lo, hi; /* the output type's range */
} tsr_qadd_ort_t;

/* Operand 0 and 1's scale ratios r0, r1 and zero points z0, z1, the output's zero point zy; y_s8: the output
 * is int8 (else uint8). A scalar operand is operand 1, whatever the node's order. */
void tsr_qadd_ort_init(tsr_qadd_ort_t *q, float r0, float r1, int32_t z0, int32_t z1, int32_t zy, int y_s8);
/* The output integer for operands' raw integers x0, x1 (int8 or uint8 values). */
int32_t tsr_qadd_ort(const tsr_qadd_ort_t *q, int32_t x0, int32_t x1);
/* All 65,536 outputs of two 8-bit tensors: t[256 * i + j] (the output's byte) for operand 0's byte i and
 * operand 1's byte j (each read as int8 when its s8 is set). */
void tsr_qadd_ort_table(const tsr_qadd_ort_t *q, int x0_s8, int x1_s8, uint8_t *t);

#endif
