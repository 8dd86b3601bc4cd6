/*
 * tsr_onnx_attr: what handlers read from a node besides its tensors:
 * attributes, constant scalars and vectors (scales, zero points), float
 * views as quantized operands, and the requantization multipliers with the
 * model's optional exact integers (tessera.requant metadata).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_quant.h"

/* ints attribute into dst[cnt] (dflt when absent); -1 when the count is wrong. */
int tsr_ox_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *dst, size_t cnt, int64_t dflt)
{
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a) {
        for (size_t i = 0; i < cnt; i++)
            dst[i] = dflt;
        return 0;
    }
    if (a->n_ints != cnt)
        return -1;
    memcpy(dst, a->ints, cnt * sizeof *dst);
    return 0;
}

/* A scalar constant as double (scales, zero points). */
int tsr_ox_const_scalar(const tsr_onnx_t *m, int ni, int v, const char *what, double *out)
{
    if (v < 0)
        return NERR(m, ni, "%s is missing", what);
    const ox_val_t *x = &m->vals[v];
    if (!x->cdata || numel(x) != 1)
        return NERR(m, ni, "%s (\"%s\") must be a constant scalar", what, TSR_SAFE(x->name));
    /* a zero point has the quantized (integer) type in ONNX; refusing a float one here keeps every
       later (int32_t) conversion of it exact and in range */
    if (x->elem == ET_FLOAT && strstr(what, "zero_point"))
        return NERR(m, ni, "%s (\"%s\") must be an integer (uint8/int8/int32), not float", what, TSR_SAFE(x->name));
    switch (x->elem) {
    case ET_FLOAT: { float f; memcpy(&f, x->cdata, 4); *out = f; break; }
    case ET_UINT8: *out = x->cdata[0]; break;
    case ET_INT8: *out = (int8_t)x->cdata[0]; break;
    case ET_INT32: { int32_t i; memcpy(&i, x->cdata, 4); *out = i; break; }
    default: return NERR(m, ni, "%s has type %s", what, ename(x->elem));
    }
    /* every scale divides or multiplies later (1/0, NaN, a negative scale have no quantization) */
    if (strstr(what, "scale") && !(isfinite(*out) && *out > 0))
        return NERR(m, ni, "%s (\"%s\") is %g: it must be finite and > 0", what, TSR_SAFE(x->name), *out);
    return 0;
}

/* scale / zero point from value ids (constants, scalar or 1-D). */
int tsr_ox_qarg_consts(tsr_onnx_t *m, int ni, int vs, int vz, qarg_t *q, float **sbuf, int32_t **zbuf,
                       const char *what)
{
    if (vs < 0 || !m->vals[vs].cdata || m->vals[vs].elem != ET_FLOAT)
        return NERR(m, ni, "%s scale must be a float constant", what);
    const int64_t cnt = numel(&m->vals[vs]);
    if (cnt < 1 || cnt > 65536)
        return NERR(m, ni, "%s scale has %lld elements", what, (long long)cnt);
    if (vz >= 0 && (!m->vals[vz].cdata || numel(&m->vals[vz]) != cnt))
        return NERR(m, ni, "%s zero point must be a constant with as many elements as the scale", what);
    *sbuf = malloc(sizeof(float) * (size_t)cnt);
    *zbuf = malloc(sizeof(int32_t) * (size_t)cnt);
    if (!*sbuf || !*zbuf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int64_t i = 0; i < cnt; i++) {
        (*sbuf)[i] = cget_f(&m->vals[vs], i);
        (*zbuf)[i] = vz >= 0 ? cget_i(&m->vals[vz], i) : 0;
        if (!isfinite((*sbuf)[i]) || (*sbuf)[i] <= 0)
            return NERR(m, ni, "%s scale %lld is %g (must be finite and > 0)", what, (long long)i, (double)(*sbuf)[i]);
    }
    q->sc = *sbuf;
    q->zp = *zbuf;
    q->cnt = (int)cnt;
    return 0;
}

/* Operand from a float view (a DequantizeLinear output). */
int tsr_ox_view_arg(tsr_onnx_t *m, int ni, int v, const char *what, int *qv, const float **sc, const int32_t **zp,
                    int *cnt)
{
    if (v < 0)
        return NERR(m, ni, "%s is missing", what);
    const ox_val_t *x = &m->vals[v];
    if (x->view_of < 0)
        return NERR(m, ni, "%s \"%s\" is a float tensor that is not a DequantizeLinear output: the device needs "
                    "quantized operands and the host has no float %s", what,
                    TSR_SAFE(x->name), TSR_SAFE(m->gp->node[ni]->op_type));
    *qv = x->view_of;
    *sc = x->vscale;
    *zp = x->vzp;
    *cnt = x->vcount;
    return 0;
}

/* Zero points of an integer operand: a constant scalar or 1-D of want
 * elements (want 0: scalar only); absent = 0. */
int tsr_ox_int_zps(tsr_onnx_t *m, int ni, int v, int elem, int64_t want, const char *what, int32_t **zp, int *cnt)
{
    *cnt = 1;
    if (!(*zp = calloc((size_t)(want > 1 ? want : 1), sizeof(int32_t))))
        return tsr_err(TSR_ENOMEM, "out of memory");
    if (v < 0)
        return 0;
    const ox_val_t *Z = &m->vals[v];
    const int64_t c = numel(Z);
    if (!Z->cdata || Z->elem != elem || !(c == 1 || (want > 1 && c == want && Z->ndim == 1)))
        return NERR(m, ni, "%s must be a constant %s scalar%s", what, ename(elem),
                    want > 1 ? " or 1-D with one per row/column/channel" : "");
    for (int64_t i = 0; i < c; i++)
        (*zp)[i] = cget_i(Z, i);
    *cnt = (int)c;
    return 0;
}

/* Exact requantization integers a model may carry for node ni: the
 * metadata entry "tessera.requant/<node name>" holds count integers
 * separated by commas or spaces (conv/gemm: mult0 shift0 mult1 shift1 ...
 * per output channel or one pair; add: left_shift mult_a shift_a mult_b
 * shift_b mult_out shift_out). Why: ONNX stores scales as float32, and a
 * network whose integers were derived in double (TFLite's QuantizeMultiplier
 * with two roundings, as jit/tsr_netdesc.c builds ResNet-18) cannot be
 * written in float32 scales exactly; the metadata carries the integers, the
 * scales stay what ONNX Runtime computes with, and the caller checks that
 * both describe the same multiplier. 1 when present (vals filled), 0 when
 * absent, negative on a malformed entry. */
int tsr_ox_meta_ints(tsr_onnx_t *m, int ni, int count, int64_t *vals)
{
    static const char pre[] = "tessera.requant/";
    const char *nm = m->gp->node[ni]->name;
    if (!nm || !nm[0])
        return 0;
    for (size_t i = 0; i < m->mp->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *e = m->mp->metadata_props[i];
        if (!e->key || strncmp(e->key, pre, sizeof pre - 1) || strcmp(e->key + sizeof pre - 1, nm))
            continue;
        const char *p = e->value ? e->value : "";
        for (int k = 0; k < count; k++) {
            while (*p == ' ' || *p == ',')
                p++;
            char *end;
            errno = 0;
            const long long v = strtoll(p, &end, 10);
            if (end == p || errno || v < INT32_MIN || v > INT32_MAX)
                return NERR(m, ni, "metadata \"%s\": integer %d of %d is missing or out of range",
                            TSR_SAFE(e->key), k + 1, count);
            vals[k] = v;
            p = end;
        }
        while (*p == ' ' || *p == ',')
            p++;
        if (*p)
            return NERR(m, ni, "metadata \"%s\": more than %d integers", TSR_SAFE(e->key), count);
        return 1;
    }
    return 0;
}

/* The real multiplier of a fixed-point (mult, shift) pair. */
double tsr_ox_fx_real(int64_t mult, int64_t shift)
{
    return ldexp((double)mult, (int)shift - 31);
}

/* |a - b| within 1e-5 of b: the metadata's integers and the float32 scales
 * describe the same requantization (float32 scales round at 6e-8 each). */
int tsr_ox_fx_agrees(double a, double b)
{
    return fabs(a - b) <= 1e-5 * fabs(b);
}

/* Requantization multipliers as ONNX Runtime forms them: float32
 * x_scale * w_scale / y_scale. *fscale gets those float32 scales (the
 * graph requantizes with them, bit for bit as ONNX Runtime, on a config
 * with EXACT_REQUANT), or NULL when the model states its own fixed-point
 * multipliers (metadata tessera.requant: then they are its semantics). */
int tsr_ox_rq_params(tsr_onnx_t *m, int ni, float xs, const float *ws, int cnt, float ys, int32_t **mult,
                     int32_t **shift, float **fscale)
{
    *fscale = NULL;
    *mult = malloc(sizeof(int32_t) * (size_t)cnt);
    *shift = malloc(sizeof(int32_t) * (size_t)cnt);
    if (!*mult || !*shift)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int i = 0; i < cnt; i++) {
        float r = xs * ws[i] / ys;
        /* r < 1: (round(r * 2^31), 0), one rounding (SRDHM) instead of TFLite's two (SRDHM, then the
           rounding right shift of the normalized (M, S)): ONNX Runtime rounds acc * r once (in
           float32); the double rounding moves ties of the high product (e.g. 48.49996 -> 48.5 -> 49)
           and disagreed with it on 0.14% of the digits conv1 outputs, single rounding on none */
        if (r < 1.0f && r > 0x1p-20f) {
            (*mult)[i] = (int32_t)llround((double)r * 2147483648.0);
            (*shift)[i] = 0;
            continue;
        }
        int rc = tsr_quantize_multiplier((double)r, &(*mult)[i], &(*shift)[i]);
        if (rc)
            return NERR(m, ni, "requantization multiplier %g of channel %d: %s", (double)r, i, tsr_errmsg());
    }
    int64_t *mv = malloc(sizeof(int64_t) * 2 * (size_t)cnt);
    if (!mv)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = tsr_ox_meta_ints(m, ni, 2 * cnt, mv);
    for (int i = 0; rc == 1 && i < cnt; i++) {
        const double r = (double)(xs * ws[i] / ys);
        if (mv[2 * i] < 0 || mv[2 * i + 1] < -31 || mv[2 * i + 1] > 30 ||
            !tsr_ox_fx_agrees(tsr_ox_fx_real(mv[2 * i], mv[2 * i + 1]), r))
            rc = NERR(m, ni, "metadata tessera.requant: channel %d (%lld, %lld) is not the multiplier %.9g of the scales",
                      i, (long long)mv[2 * i], (long long)mv[2 * i + 1], r);
    }
    for (int i = 0; rc == 1 && i < cnt; i++) {
        (*mult)[i] = (int32_t)mv[2 * i];
        (*shift)[i] = (int32_t)mv[2 * i + 1];
    }
    free(mv);
    if (rc == 1)
        m->nexact++;
    if (rc == 0) {
        if (!(*fscale = malloc(sizeof(float) * (size_t)cnt)))
            return tsr_err(TSR_ENOMEM, "out of memory");
        for (int i = 0; i < cnt; i++) {
            (*fscale)[i] = xs * ws[i] / ys;
            if (!isnormal((*fscale)[i])) { /* (0: no fscale form; the fixed-point one handles it) */
                free(*fscale);
                *fscale = NULL;
                break;
            }
        }
    }
    return rc < 0 ? rc : 0;
}
