/*
 * tsr_onnx_qadd: ONNX Runtime's AVX2 QLinearAdd in float32 (tsr_onnx_qadd.h).
 */
#include "tsr_onnx_qadd.h"

#include <math.h>

void tsr_qadd_ort_init(tsr_qadd_ort_t *q, float r0, float r1, int32_t z0, int32_t z1, int32_t zy, int y_s8)
{
    q->r0 = r0, q->r1 = r1;
    q->F = (float)zy - fmaf(r0, (float)z0, r1 * (float)z1);
    q->lo = y_s8 ? -128 : 0;
    q->hi = y_s8 ? 127 : 255;
}

static int32_t sat(const tsr_qadd_ort_t *q, float c)
{
    const long v = lrintf(c); /* the rounding mode's nearest, half to even (as cvtps2dq) */
    return v < q->lo ? q->lo : v > q->hi ? q->hi : (int32_t)v;
}

int32_t tsr_qadd_ort(const tsr_qadd_ort_t *q, int32_t x0, int32_t x1)
{
    return sat(q, fmaf((float)x0, q->r0, fmaf((float)x1, q->r1, q->F)));
}

void tsr_qadd_ort_table(const tsr_qadd_ort_t *q, int x0_s8, int x1_s8, uint8_t *t)
{
    for (int i = 0; i < 256; i++)
        for (int j = 0; j < 256; j++)
            t[256 * i + j] = (uint8_t)tsr_qadd_ort(q, x0_s8 ? (int8_t)i : i, x1_s8 ? (int8_t)j : j);
}
