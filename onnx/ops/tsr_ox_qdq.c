/*
 * tsr_ox_qdq: QuantizeLinear and DequantizeLinear. A DequantizeLinear of a
 * computed tensor is a float view of the quantized bytes (consumers that
 * take quantized operands read them as is; one that needs floats gets a
 * host dequantize, tsr_ox_need_real); of a constant, also the float
 * constant. A QuantizeLinear of a view with the same parameters is the
 * quantized value again (an alias); of real floats, a host quantize.
 */
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"

/* y's float constant (X - zp[c]) * sc[c] of the constant X, c the index
 * along axis when cnt > 1: runs of `inner` elements share a channel, and
 * the bytes are read by type once per run, not per element. */
static void dequantize_const(const ox_val_t *X, ox_val_t *y, int cnt, int axis, const float *sc, const int32_t *zp)
{
    const int64_t n = numel(y);
    int64_t inner = cnt > 1 ? 1 : n;
    for (int i = axis + 1; cnt > 1 && i < X->ndim; i++)
        inner *= X->dims[i];
    float *out = (float *)(void *)y->cdata; /* (malloc'd: aligned for floats) */
    for (int64_t i0 = 0, r = 0; i0 < n && inner > 0; i0 += inner, r++) {
        const int c = cnt > 1 ? (int)(r % cnt) : 0;
        const int32_t z = zp[c];
        const float s = sc[c];
        const int64_t len = inner < n - i0 ? inner : n - i0;
        const uint8_t *b = X->cdata + i0;
        if (X->elem == ET_UINT8)
            for (int64_t i = 0; i < len; i++)
                out[i0 + i] = (float)((int32_t)b[i] - z) * s;
        else if (X->elem == ET_INT8)
            for (int64_t i = 0; i < len; i++)
                out[i0 + i] = (float)((int32_t)(int8_t)b[i] - z) * s;
        else
            for (int64_t i = i0; i < i0 + len; i++)
                out[i] = (float)(cget_i(X, i) - z) * s;
    }
}

/* DequantizeLinear: a float view of its quantized input (per tensor or per
 * channel along axis), and of a constant also the float constant. */
int tsr_ox_dequantize(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    int rc;
    (void)arg;
    if (x < 0)
        return NERR(m, ni, "input missing");
    float *sc = NULL;
    int32_t *zp = NULL;
    qarg_t q;
    rc = tsr_ox_qarg_consts(m, ni, tsr_ox_in_val(m, ni, 1), tsr_ox_in_val(m, ni, 2), &q, &sc, &zp, "x");
    const ox_val_t X = m->vals[x];
    int axis = (int)attr_i(n, "axis", 1);
    if (!rc && X.elem != ET_UINT8 && X.elem != ET_INT8 && X.elem != ET_INT32)
        rc = NERR(m, ni, "input has type %s", ename(X.elem));
    if (!rc && q.cnt > 1) {
        if (axis < 0)
            axis += X.ndim;
        if (axis < 0 || axis >= X.ndim || X.dims[axis] != q.cnt)
            rc = NERR(m, ni, "%d scales do not match axis %d of the input", q.cnt, axis);
    }
    int v = rc ? rc : tsr_ox_def_out(m, ni, 0, ET_FLOAT, X.ndim, X.dims);
    if (v < 0) {
        free(sc);
        free(zp);
        return v;
    }
    ox_val_t *y = &m->vals[v];
    y->view_of = x; /* keeps the shape: a relabelled view's bytes are at .base */
    y->vscale = sc;
    y->vzp = zp;
    y->vcount = q.cnt;
    y->vaxis = axis;
    m->placed[ni] = OX_VIEW;
    if (X.cdata) { /* also the float constant, for consumers that want floats */
        y->cdata = malloc(y->nbytes ? y->nbytes : 1);
        if (!y->cdata)
            return tsr_err(TSR_ENOMEM, "out of memory");
        dequantize_const(&X, y, q.cnt, axis, sc, zp);
        y->view_of = x;
        m->placed[ni] = OX_CONST;
    }
    return 0;
}

/* QuantizeLinear (per tensor, to uint8 or int8). */
int tsr_ox_quantize(tsr_onnx_t *m, int ni, int arg)
{
    const int x = tsr_ox_in_val(m, ni, 0);
    int rc;
    (void)arg;
    if (x < 0)
        return NERR(m, ni, "input missing");
    double s, z = 0;
    int vz = tsr_ox_in_val(m, ni, 2);
    if ((rc = tsr_ox_const_scalar(m, ni, tsr_ox_in_val(m, ni, 1), "y_scale", &s)) ||
        (vz >= 0 && (rc = tsr_ox_const_scalar(m, ni, vz, "y_zero_point", &z))))
        return rc;
    const int elem = vz >= 0 ? m->vals[vz].elem : ET_UINT8;
    const ox_val_t X = m->vals[x];
    if (elem != ET_UINT8 && elem != ET_INT8)
        return NERR(m, ni, "output type %s (uint8 and int8 are supported)", ename(elem));
    if (X.elem != ET_FLOAT)
        return NERR(m, ni, "input has type %s (float expected)", ename(X.elem));
    if (X.view_of >= 0 && !X.cdata && X.vcount == 1 && X.vscale[0] == (float)s && X.vzp[0] == (int32_t)z &&
        m->vals[X.view_of].elem == elem) {
        /* Q(DQ(q)) with the same parameters is q: an alias */
        return tsr_ox_def_alias(m, ni, X.view_of, X.ndim, X.dims) < 0 ? -1 : 0;
    }
    if ((rc = tsr_ox_need_real(m, ni, x)))
        return rc;
    int v = tsr_ox_def_out(m, ni, 0, elem, X.ndim, X.dims);
    if (v < 0)
        return v;
    int l = tsr_ox_host_lop(m, ni, H_QUANT, m->vals[x].base, v);
    if (l < 0)
        return l;
    m->lops[l].scale = (float)s;
    m->lops[l].zp = (int32_t)z;
    return 0;
}
