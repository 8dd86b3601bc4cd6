/*
 * tsr_ox_pool: pools on the device: MaxPool (quantized, or a QDQ float view),
 * AveragePool and GlobalAveragePool of a QDQ group that keeps its
 * quantization, and com.microsoft QLinearGlobalAveragePool.
 */
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"

/* A pool of kind TSR_POOL_MAX / AVG / GLOBAL_AVG over the quantized value
 * src (zp: its zero point, needed by average pools: input and output
 * share scale and zero point). yv_or_neg -1: output shape only. */
static int lower_pool(tsr_onnx_t *m, int ni, int src, int yv_or_neg, int64_t *odims, tsr_pool_kind_e kind, int32_t zp)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const ox_val_t *X = &m->vals[src];
    tsr_pool_params_t p;
    memset(&p, 0, sizeof p);
    if (qdtype(X->elem, &p.dtype))
        return NERR(m, ni, "input must be int8 or uint8 (is %s)", ename(X->elem));
    if (X->ndim != 4)
        return NERR(m, ni, "needs a 4-D input");
    if (kind == TSR_POOL_GLOBAL_AVG) {
        p.kind = kind;
        p.n = (int)X->dims[0], p.c = (int)X->dims[1], p.h = (int)X->dims[2], p.w = (int)X->dims[3];
        p.kh = p.kw = p.stride_h = p.stride_w = 1;
        p.zp = zp;
        int poh, pow_;
        if (tsr_pool_check(&p, &poh, &pow_))
            return NERR(m, ni, "the device cannot run it (%s) and the host has no quantized pool", tsr_errmsg());
        odims[0] = X->dims[0], odims[1] = X->dims[1], odims[2] = odims[3] = 1;
        goto emit;
    }
    int64_t k[2], s[2], pd[4], dil[2];
    if (tsr_ox_attr_ints(n, "kernel_shape", k, 2, 0) || tsr_ox_attr_ints(n, "strides", s, 2, 1) ||
        tsr_ox_attr_ints(n, "pads", pd, 4, 0) || tsr_ox_attr_ints(n, "dilations", dil, 2, 1))
        return NERR(m, ni, "kernel_shape/strides/dilations need 2 values, pads 4");
    if (attr_i(n, "ceil_mode", 0) || dil[0] != 1 || dil[1] != 1 || attr_i(n, "storage_order", 0))
        return NERR(m, ni, "ceil_mode, dilations and storage_order are not supported");
    const Onnx__AttributeProto *ap = attr(n, "auto_pad");
    if (ap && ap->has_s && !(ap->s.len == 6 && !memcmp(ap->s.data, "NOTSET", 6)))
        return NERR(m, ni, "auto_pad is not supported (give pads)");
    if (n->n_output > 1 && n->output[1][0])
        return NERR(m, ni, "the Indices output is not supported");
    p.kind = kind;
    p.count_include_pad = kind == TSR_POOL_AVG ? (int)attr_i(n, "count_include_pad", 0) : 0;
    p.n = (int)X->dims[0], p.c = (int)X->dims[1], p.h = (int)X->dims[2], p.w = (int)X->dims[3];
    p.kh = (int)k[0], p.kw = (int)k[1], p.stride_h = (int)s[0], p.stride_w = (int)s[1];
    p.pad_top = (int)pd[0], p.pad_left = (int)pd[1], p.pad_bottom = (int)pd[2], p.pad_right = (int)pd[3];
    /* max pool padding never wins (the device pads with the type minimum): any zp gives the same bytes */
    p.zp = kind == TSR_POOL_MAX ? (p.dtype == TSR_DT_UINT8 ? 0 : -128) : zp;
    if (k[0] < 1 || k[1] < 1 || k[0] > 64 || k[1] > 64 || s[0] < 1 || s[1] < 1 || s[0] > 64 || s[1] > 64)
        return NERR(m, ni, "kernel or stride out of range");
    int poh, pow_, rc = tsr_pool_check(&p, &poh, &pow_);
    if (rc)
        return NERR(m, ni, "the device cannot run it (%s) and the host has no quantized pool", tsr_errmsg());
    odims[0] = X->dims[0], odims[1] = X->dims[1];
    odims[2] = (X->dims[2] + pd[0] + pd[2] - k[0]) / s[0] + 1;
    odims[3] = (X->dims[3] + pd[1] + pd[3] - k[1]) / s[1] + 1;
emit:
    if (yv_or_neg == -1)
        return 0; /* shape only */
    const tsr_nd_node_t nd = {.kind = TSR_ND_POOL, .pool = p};
    const int l = tsr_ox_dev_lop(m, ni, &nd, X->base, -1, yv_or_neg);
    return l < 0 ? l : 0;
}

/* MaxPool of uint8/int8, or of a float view (max commutes with a monotone
 * DequantizeLinear: the quantized bytes are pooled, the output a view). */
int tsr_ox_maxpool(tsr_onnx_t *m, int ni, int arg)
{
    const int x = tsr_ox_in_val(m, ni, 0);
    int rc;
    (void)arg;
    if (x < 0)
        return NERR(m, ni, "input missing");
    int64_t od[4];
    const ox_val_t X = m->vals[x];
    if (X.view_of >= 0 && !X.cdata) { /* max commutes with a monotone DequantizeLinear: pool the bytes */
        if (X.vcount != 1)
            return NERR(m, ni, "per-channel input views are not supported");
        int qv = X.view_of;
        if ((rc = lower_pool(m, ni, qv, -1, od, TSR_POOL_MAX, 0)))
            return rc;
        int q = tsr_ox_new_val(m, ""); /* the pooled quantized bytes (no ONNX name) */
        if (q < 0)
            return q;
        ox_val_t *Q = &m->vals[q];
        Q->elem = m->vals[qv].elem, Q->ndim = 4, Q->defined = 1;
        memcpy(Q->dims, od, sizeof od);
        Q->nbytes = (size_t)numel(Q);
        if ((rc = lower_pool(m, ni, qv, q, od, TSR_POOL_MAX, 0)))
            return rc;
        int y = tsr_ox_def_out(m, ni, 0, ET_FLOAT, 4, od); /* the float output: a view of the pooled bytes */
        if (y < 0)
            return y;
        return tsr_ox_set_view(&m->vals[y], q, X.vscale[0], X.vzp[0]);
    }
    if ((rc = lower_pool(m, ni, x, -1, od, TSR_POOL_MAX, 0)))
        return rc;
    int y = tsr_ox_def_out(m, ni, 0, X.elem, 4, od);
    return y < 0 ? y : lower_pool(m, ni, x, y, od, TSR_POOL_MAX, 0);
}

/* QDQ AveragePool / GlobalAveragePool (kind): DequantizeLinear -> pool ->
 * QuantizeLinear with the same scale and zero point (the device averages
 * in its input's quantization). */
int tsr_ox_qdq_avgpool(tsr_onnx_t *m, int ni, int kind)
{
    const int x = tsr_ox_in_val(m, ni, 0);
    int rc;
    int qv, cnt;
    const float *sc;
    const int32_t *zp;
    if ((rc = tsr_ox_view_arg(m, ni, x, "input", &qv, &sc, &zp, &cnt)))
        return rc;
    ox_qout_t o;
    const int qn = tsr_ox_qdq_output(m, ni, &o);
    if (qn < 0)
        return qn;
    if (cnt != 1 || o.relu || o.has_clip || o.scale != sc[0] || o.zp != zp[0] || o.elem != m->vals[qv].elem)
        return NERR(m, ni, "the device averages in the input's quantization: the QuantizeLinear after it must "
                    "have the DequantizeLinear's scale, zero point and type (and no Relu/Clip between)");
    int64_t od[4];
    if ((rc = lower_pool(m, ni, qv, -1, od, kind, zp[0])))
        return rc;
    int y = tsr_ox_def_out(m, qn, 0, o.elem, 4, od);
    if (y < 0 || (rc = lower_pool(m, ni, qv, y, od, kind, zp[0])))
        return y < 0 ? y : rc;
    tsr_ox_qdq_fold(m, ni);
    return 0;
}

/* com.microsoft QLinearGlobalAveragePool with equal input and output quantization. */
int tsr_ox_qlinear_gap(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    int rc;
    (void)arg;
    double v[4];
    static const char *const what[4] = {"x_scale", "x_zero_point", "y_scale", "y_zero_point"};
    for (int k = 0; k < 4; k++)
        if ((rc = tsr_ox_const_scalar(m, ni, tsr_ox_in_val(m, ni, (size_t)k + 1), what[k], &v[k])))
            return rc;
    if (attr_i(n, "channels_last", 0))
        return NERR(m, ni, "channels_last is not supported");
    if (x < 0 || (float)v[0] != (float)v[2] || v[1] != v[3])
        return NERR(m, ni, "the device averages in the input's quantization: x and y scale and zero point must "
                    "be equal");
    int64_t od[4];
    if ((rc = lower_pool(m, ni, x, -1, od, TSR_POOL_GLOBAL_AVG, (int32_t)v[1])))
        return rc;
    int y = tsr_ox_def_out(m, ni, 0, m->vals[x].elem, 4, od);
    return y < 0 ? y : lower_pool(m, ni, x, y, od, TSR_POOL_GLOBAL_AVG, (int32_t)v[1]);
}
