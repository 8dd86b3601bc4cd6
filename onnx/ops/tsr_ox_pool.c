/*
 * tsr_ox_pool: pools on the device: MaxPool (quantized, or a QDQ float view;
 * ceil_mode as more bottom/right padding, which the type minimum fills),
 * AveragePool, GlobalAveragePool and ReduceMean over the spatial axes of a
 * QDQ group, and com.microsoft QLinearGlobalAveragePool.
 *
 * Each tensor has its own scale and zero point. An average whose output
 * keeps the input's quantization is the device pool (exact, rounded half
 * away from zero, operators.md). One whose output has its own is the
 * depthwise conv of weight 1 over the window (padding x_zp adds 0): the
 * window sum of x - x_zp, then the conv's requantizing epilogue with the
 * multiplier x_scale / (count * y_scale), so the division and the change
 * of quantization are one rounding, as ONNX Runtime's QLinear pools round
 * once in float (<= 1 LSB from it). When the conv cannot take the window
 * (count_include_pad 0 with borders: the count varies; a window of more
 * than 1024 taps, e.g. a squeeze-and-excite average over 56x56, whose
 * input and weight rows the conv's buffers cannot hold) the pool runs in the input's quantization and a device
 * requantize (the same conv, 1x1) follows, when two roundings stay within
 * 1 LSB; else a global average runs on the device in one rounding (the
 * window sum, then the fused form's requantization: jit/tsr_gavg.h), or on
 * the host when even that cannot take it (avg_requant says which).
 */
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"
#include "tsr_quant.h"

/* The largest window (taps) an average's fused depthwise-conv form takes. */
#define OX_POOL_CONV_TAPS 1024

/* A pool's window geometry from its attributes: kernel k, strides s, pads
 * pd (top, left, bottom, right), output od. ceil_mode becomes more
 * bottom/right padding (ONNX and ONNX Runtime: a last window that starts
 * inside the input or the leading pad is kept, one that would start in the
 * trailing pad is not), which a max pool fills with the type minimum and
 * an average with count_include_pad 0 does not count (as ONNX); with
 * count_include_pad 1 ONNX counts the given pads but not the ceil's: that
 * window is refused. */
static int pool_geom(tsr_onnx_t *m, int ni, const ox_val_t *X, tsr_pool_kind_e kind, int64_t *k, int64_t *s,
                     int64_t *pd, int64_t *od)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    int64_t dil[2];
    if (tsr_ox_attr_ints(n, "kernel_shape", k, 2, 0) || tsr_ox_attr_ints(n, "strides", s, 2, 1) ||
        tsr_ox_attr_ints(n, "pads", pd, 4, 0) || tsr_ox_attr_ints(n, "dilations", dil, 2, 1))
        return NERR(m, ni, "kernel_shape/strides/dilations need 2 values, pads 4");
    if (dil[0] != 1 || dil[1] != 1 || attr_i(n, "storage_order", 0))
        return NERR(m, ni, "dilations other than 1 and storage_order are not supported");
    const Onnx__AttributeProto *ap = attr(n, "auto_pad");
    if (ap && ap->has_s && !(ap->s.len == 6 && !memcmp(ap->s.data, "NOTSET", 6)))
        return NERR(m, ni, "auto_pad is not supported (give pads)");
    if (n->n_output > 1 && n->output[1][0])
        return NERR(m, ni, "the Indices output is not supported");
    if (!attr(n, "kernel_shape"))
        return NERR(m, ni, "kernel_shape is missing");
    if (k[0] < 1 || k[1] < 1 || k[0] > 64 || k[1] > 64 || s[0] < 1 || s[1] < 1 || s[0] > 64 || s[1] > 64)
        return NERR(m, ni, "kernel or stride out of range");
    const int ceil = attr_i(n, "ceil_mode", 0) != 0;
    od[0] = X->dims[0], od[1] = X->dims[1];
    for (int i = 0; i < 2; i++) {
        if (pd[i] < 0 || pd[i + 2] < 0 || pd[i] > 64 || pd[i + 2] > 64)
            return NERR(m, ni, "pads out of range");
        const int64_t in = X->dims[2 + i], e = in + pd[i] + pd[i + 2] - k[i];
        if (e < 0)
            return NERR(m, ni, "kernel larger than the padded input");
        int64_t o = (ceil ? (e + s[i] - 1) / s[i] : e / s[i]) + 1;
        if (ceil && (o - 1) * s[i] >= in + pd[i])
            o--; /* that window would start in the trailing pad */
        const int64_t extra = (o - 1) * s[i] + k[i] - (in + pd[i] + pd[i + 2]);
        if (extra > 0 && kind != TSR_POOL_MAX && attr_i(n, "count_include_pad", 0))
            return NERR(m, ni, "ceil_mode with a partial last window and count_include_pad 1 is not supported "
                        "(the window counts the given pads but not the ceil's)");
        if (extra > 0)
            pd[i + 2] += extra;
        od[2 + i] = o;
    }
    return 0;
}

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
    int64_t k[2], s[2], pd[4];
    int rc = pool_geom(m, ni, X, kind, k, s, pd, odims);
    if (rc)
        return rc;
    p.kind = kind;
    p.count_include_pad = kind == TSR_POOL_AVG ? (int)attr_i(n, "count_include_pad", 0) : 0;
    p.round_even = kind == TSR_POOL_AVG; /* ONNX Runtime's float average rounds half to even */
    p.n = (int)X->dims[0], p.c = (int)X->dims[1], p.h = (int)X->dims[2], p.w = (int)X->dims[3];
    p.kh = (int)k[0], p.kw = (int)k[1], p.stride_h = (int)s[0], p.stride_w = (int)s[1];
    p.pad_top = (int)pd[0], p.pad_left = (int)pd[1], p.pad_bottom = (int)pd[2], p.pad_right = (int)pd[3];
    /* max pool padding never wins (the device pads with the type minimum): any zp gives the same bytes */
    p.zp = kind == TSR_POOL_MAX ? (p.dtype == TSR_DT_UINT8 ? 0 : -128) : zp;
    int poh, pow_;
    if ((rc = tsr_pool_check(&p, &poh, &pow_)))
        return NERR(m, ni, "the device cannot run it (%s) and the host has no quantized pool", tsr_errmsg());
emit:
    if (yv_or_neg == -1)
        return 0; /* shape only */
    const tsr_nd_node_t nd = {.kind = TSR_ND_POOL, .pool = p};
    const int l = tsr_ox_dev_lop(m, ni, &nd, X->base, -1, yv_or_neg);
    return l < 0 ? l : 0;
}

/* A quantized value of elem and 4-D shape d with no ONNX name (an
 * intermediate of a lowering). */
static int new_qval(tsr_onnx_t *m, int elem, const int64_t *d)
{
    const int q = tsr_ox_new_val(m, "");
    if (q < 0)
        return q;
    ox_val_t *Q = &m->vals[q];
    Q->elem = elem, Q->ndim = 4, Q->defined = 1;
    memcpy(Q->dims, d, 4 * sizeof *d);
    Q->nbytes = (size_t)numel(Q);
    return q;
}

int tsr_ox_sum_requant(tsr_onnx_t *m, int ni, int xq, float xs, int32_t xzp, const int64_t *k, const int64_t *s,
                       const int64_t *pd, int64_t count, const ox_qout_t *y, int yv)
{
    const ox_val_t *X = &m->vals[xq];
    if (X->ndim != 4 || count < 1)
        return NERR(m, ni, "a device requantize needs a 4-D tensor");
    const int64_t C = X->dims[1];
    const int w = tsr_ox_new_val(m, "");
    if (w < 0)
        return w;
    ox_val_t *W = &m->vals[w];
    W->elem = ET_INT8, W->ndim = 4, W->defined = 1;
    W->dims[0] = C, W->dims[1] = 1, W->dims[2] = k[0], W->dims[3] = k[1];
    W->nbytes = (size_t)numel(W);
    if (!(W->cdata = malloc(W->nbytes)))
        return tsr_err(TSR_ENOMEM, "out of memory");
    memset(W->cdata, 1, W->nbytes);
    static const int32_t zero = 0;
    const float ws = 1.0f / (float)count; /* multiplier x_scale * ws / y_scale, as a conv's */
    conv_desc_t cd;
    memset(&cd, 0, sizeof cd);
    cd.x = xq, cd.xs = xs, cd.xzp = xzp;
    cd.w = w, cd.ws = &ws, cd.wzp = &zero, cd.wcnt = 1;
    cd.y = *y;
    cd.kshape[0] = k[0], cd.kshape[1] = k[1];
    cd.strides[0] = s[0], cd.strides[1] = s[1];
    memcpy(cd.pads, pd, sizeof cd.pads);
    cd.group = C;
    return tsr_ox_lower_conv(m, ni, &cd, yv);
}

/* The float mean over H, W of the float view x (a host DequantizeLinear,
 * the host's float reduce kernel, a host QuantizeLinear into yv): ONNX
 * Runtime's own arithmetic when it does not fuse the QDQ group. */
static int host_gap(tsr_onnx_t *m, int ni, int x, const ox_qout_t *o, int yv)
{
    int rc = tsr_ox_need_real(m, ni, x);
    if (rc)
        return rc;
    const int f = tsr_ox_new_val(m, "");
    if (f < 0)
        return f;
    ox_val_t *Fv = &m->vals[f];
    Fv->elem = ET_FLOAT, Fv->ndim = 4, Fv->defined = 1;
    memcpy(Fv->dims, m->vals[yv].dims, sizeof Fv->dims);
    Fv->dims[2] = Fv->dims[3] = 1;
    Fv->nbytes = (size_t)numel(Fv) * 4;
    int l = tsr_ox_host_lop(m, ni, H_REDUCE, m->vals[x].base, f);
    if (l < 0)
        return l;
    m->lops[l].axis = RD_MEAN;
    m->lops[l].geo[0] = x;
    m->lops[l].geo[4] = 0xc; /* axes 2 and 3 */
    if ((l = tsr_ox_host_lop(m, ni, H_QUANT, f, yv)) < 0)
        return l;
    m->lops[l].scale = o->scale;
    m->lops[l].zp = o->zp;
    return 0;
}

/* A global average of any window into its own quantization on the device
 * (jit/tsr_gavg.h): the exact window sum of x - x_zp, then the conv's
 * requantization by x_scale / (count * y_scale) -- the fused depthwise-conv
 * form's bytes, without its window on chip (a squeeze-and-excite average
 * over 56x56 or 112x112). Returns 1 when the device operator cannot take
 * it (nothing made). */
static int device_gavg(tsr_onnx_t *m, int ni, int qv, float xs, int32_t xzp, const ox_qout_t *o, int yv)
{
    const ox_val_t *X = &m->vals[qv], *Y = &m->vals[yv];
    tsr_nd_node_t nd;
    memset(&nd, 0, sizeof nd);
    nd.kind = TSR_ND_GAVG;
    tsr_gavg_params_t *p = &nd.gavg;
    if (X->ndim != 4 || Y->ndim != 4 || qdtype(X->elem, &p->x_dtype) || qdtype(Y->elem, &p->y_dtype) ||
        X->dims[0] > 65536 || X->dims[1] > 65536 || X->dims[2] > 65536 || X->dims[3] > 65536)
        return 1;
    p->n = (int)X->dims[0], p->c = (int)X->dims[1], p->h = (int)X->dims[2], p->w = (int)X->dims[3];
    p->x_zp = xzp, p->y_zp = o->zp;
    const float ws = 1.0f / (float)((int64_t)p->h * p->w); /* as the fused form's conv of weight 1 */
    int32_t *mult = NULL, *shift = NULL;
    float *fscale = NULL;
    int rc = tsr_ox_rq_params(m, ni, xs, &ws, 1, o->scale, &mult, &shift, &fscale);
    if (!rc) {
        p->mult = mult[0], p->shift = shift[0];
        p->fscale = fscale ? fscale[0] : 0.0f;
    }
    free(mult), free(shift), free(fscale);
    if (rc)
        return rc;
    p->act_min = p->y_dtype == TSR_DT_UINT8 ? 0 : -128;
    p->act_max = p->y_dtype == TSR_DT_UINT8 ? 255 : 127;
    if (o->relu && p->act_min < o->zp)
        p->act_min = o->zp;
    if (o->has_clip) {
        int32_t a, b;
        if (tsr_quantize_bound(o->clip_lo, o->scale, o->zp, p->y_dtype, &a) ||
            tsr_quantize_bound(o->clip_hi, o->scale, o->zp, p->y_dtype, &b))
            return NERR(m, ni, "Clip bounds: %s", tsr_errmsg());
        p->act_min = a > p->act_min ? a : p->act_min;
        p->act_max = b < p->act_max ? b : p->act_max;
        if (p->act_min > p->act_max)
            return NERR(m, ni, "Clip bounds [%g, %g] leave no output value", (double)o->clip_lo, (double)o->clip_hi);
    }
    if (tsr_gavg_check(p)) { /* (a multiplier >= 2^.. whose shift would overflow the sum) */
        tsr_err_clear();
        return 1;
    }
    const int l = tsr_ox_dev_lop(m, ni, &nd, X->base, -1, yv);
    return l < 0 ? l : 0;
}

/* An average (kind AVG or GLOBAL_AVG) of the quantized qv (xs, xzp; x:
 * its float view, -1 for an operator-form node) into yv with the output
 * quantization o (its own). Placed as:
 *  - the fused form (one rounding, <= 1 LSB from ONNX Runtime) when the
 *    count is the same for every output (no padding or count_include_pad
 *    1) and the window fits the device conv (at most 64x64 and
 *    OX_POOL_CONV_TAPS taps);
 *  - else, when the output's scale is not finer than the input's, the
 *    device pool (rounded to the input's grid) then a device requantize:
 *    two roundings, at most 0.5 * xs / ys + 0.5 <= 1 LSB;
 *  - else a global average on the device in one rounding (device_gavg,
 *    the fused form's arithmetic over any window), or, when it cannot take
 *    it, on the host in float (the DQ -> mean -> Q ONNX Runtime computes
 *    when it does not fuse the group); another window is refused (naming
 *    why). */
static int avg_requant(tsr_onnx_t *m, int ni, int x, int qv, float xs, int32_t xzp, tsr_pool_kind_e kind,
                       const ox_qout_t *o, int yv)
{
    const ox_val_t X = m->vals[qv];
    int64_t k[2] = {1, 1}, s[2] = {1, 1}, pd[4] = {0, 0, 0, 0}, od[4];
    int rc;
    if (X.ndim != 4)
        return NERR(m, ni, "needs a 4-D input");
    if (kind == TSR_POOL_GLOBAL_AVG)
        k[0] = X.dims[2], k[1] = X.dims[3];
    else if ((rc = pool_geom(m, ni, &X, kind, k, s, pd, od)))
        return rc;
    const int uniform = kind == TSR_POOL_GLOBAL_AVG || attr_i(m->gp->node[ni], "count_include_pad", 0) ||
                        !(pd[0] || pd[1] || pd[2] || pd[3]);
    /* the fused form needs the whole window on chip (k[0] * k[1] input and
     * weight rows: the default config holds 2048 / 1024, the planner
     * refuses more; the device is chosen after import, so a fixed bound) */
    if (uniform && k[0] <= 64 && k[1] <= 64 && k[0] * k[1] <= OX_POOL_CONV_TAPS) {
        const int nl0 = m->nlops;
        if (!tsr_ox_sum_requant(m, ni, qv, xs, xzp, k, s, pd, k[0] * k[1], o, yv))
            return 0;
        if (m->nlops != nl0) /* a lop was made: the error is not the window's */
            return -1;
    }
    if (xs > o->scale) {
        if (kind == TSR_POOL_GLOBAL_AVG && (rc = device_gavg(m, ni, qv, xs, xzp, o, yv)) != 1)
            return rc;
        if (kind == TSR_POOL_GLOBAL_AVG && x >= 0 && !o->relu && !o->has_clip)
            return host_gap(m, ni, x, o, yv);
        return NERR(m, ni, "its output scale %g is finer than its input's %g and its window (count_include_pad 0 "
                    "with padding, or more than 1024 taps) has no single-rounding device form: a pool then a "
                    "requantize would be more than 1 LSB off", (double)o->scale, (double)xs);
    }
    /* the pool in the input's quantization, then a device requantize */
    if ((rc = lower_pool(m, ni, qv, -1, od, kind, xzp)))
        return rc;
    const int t = new_qval(m, X.elem, od);
    if (t < 0 || (rc = lower_pool(m, ni, qv, t, od, kind, xzp)))
        return t < 0 ? t : rc;
    static const int64_t one[2] = {1, 1}, nopad[4] = {0, 0, 0, 0};
    return tsr_ox_sum_requant(m, ni, t, xs, xzp, one, one, nopad, 1, o, yv);
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
 * QuantizeLinear. The same scale, zero point and type on both sides: the
 * device pool; otherwise (or a Relu/Clip between) the requantizing forms
 * of avg_requant. */
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
    if (cnt != 1)
        return NERR(m, ni, "per-channel input quantization is not supported");
    int64_t od[4];
    if ((rc = lower_pool(m, ni, qv, -1, od, kind, zp[0])))
        return rc;
    int y = tsr_ox_def_out(m, qn, 0, o.elem, 4, od);
    if (y < 0)
        return y;
    if (!o.relu && !o.has_clip && o.scale == sc[0] && o.zp == zp[0] && o.elem == m->vals[qv].elem)
        rc = lower_pool(m, ni, qv, y, od, kind, zp[0]);
    else
        rc = avg_requant(m, ni, x, qv, sc[0], zp[0], kind, &o, y);
    if (rc)
        return rc;
    tsr_ox_qdq_fold(m, ni);
    return 0;
}

/* The ReduceMean's axes (attribute up to opset 17, input 1 from 18; none:
 * all axes, or none with noop_with_empty_axes) as a bit mask of x's. */
static int reduce_axes(tsr_onnx_t *m, int ni, int ndim, unsigned *mask)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    int64_t ax[MAXD];
    int na = 0;
    const Onnx__AttributeProto *a = attr(n, "axes");
    const int va = tsr_ox_in_val(m, ni, 1);
    if (a) {
        if (a->n_ints > MAXD)
            return NERR(m, ni, "too many axes");
        for (size_t i = 0; i < a->n_ints; i++)
            ax[na++] = a->ints[i];
    } else if (va >= 0) {
        const ox_val_t *A = &m->vals[va];
        if (!A->cdata || A->elem != ET_INT64 || A->ndim != 1 || numel(A) > MAXD)
            return NERR(m, ni, "axes must be a 1-D int64 constant");
        for (int64_t i = 0; i < numel(A); i++)
            ax[na++] = cget_i(A, i);
    }
    *mask = 0;
    if (!na && attr_i(n, "noop_with_empty_axes", 0))
        return 0;
    if (!na)
        *mask = (1u << ndim) - 1;
    for (int i = 0; i < na; i++) {
        const int64_t v = ax[i] < 0 ? ax[i] + ndim : ax[i];
        if (v < 0 || v >= ndim)
            return NERR(m, ni, "axis %lld out of range", (long long)ax[i]);
        *mask |= 1u << v;
    }
    return 0;
}

/* QDQ ReduceMean over the spatial axes (2 and 3) of a 4-D tensor: a
 * global average pool (keepdims 0: its [N, C] output aliases the pooled
 * [N, C, 1, 1] bytes). Other axes, or floats that no QuantizeLinear
 * takes: the host's float ReduceMean (ops/tsr_ox_math.c). */
int tsr_ox_qdq_reducemean(tsr_onnx_t *m, int ni, int arg)
{
    (void)arg;
    const int x = tsr_ox_in_val(m, ni, 0);
    int rc, qv, cnt;
    const float *sc;
    const int32_t *zp;
    unsigned mask = 0;
    if (x < 0)
        return NERR(m, ni, "input missing");
    if ((rc = reduce_axes(m, ni, m->vals[x].ndim, &mask)))
        return rc;
    const ox_val_t *X = &m->vals[x];
    if (X->ndim != 4 || mask != 0xcu || X->view_of < 0 || X->cdata || X->vcount != 1 ||
        m->qsel[ni].status != OX_SEL_OK)
        return tsr_ox_reduce(m, ni, RD_MEAN); /* no global pool: the host's float ReduceMean */
    if ((rc = tsr_ox_view_arg(m, ni, x, "input", &qv, &sc, &zp, &cnt)))
        return rc;
    ox_qout_t o;
    const int qn = tsr_ox_qdq_output(m, ni, &o);
    if (qn < 0)
        return qn;
    if (cnt != 1)
        return NERR(m, ni, "per-channel input quantization is not supported");
    int64_t od[4];
    if ((rc = lower_pool(m, ni, qv, -1, od, TSR_POOL_GLOBAL_AVG, zp[0])))
        return rc;
    const int keep = attr_i(m->gp->node[ni], "keepdims", 1) != 0;
    const int y = keep ? tsr_ox_def_out(m, qn, 0, o.elem, 4, od) : new_qval(m, o.elem, od);
    if (y < 0)
        return y;
    if (!o.relu && !o.has_clip && o.scale == sc[0] && o.zp == zp[0] && o.elem == m->vals[qv].elem)
        rc = lower_pool(m, ni, qv, y, od, TSR_POOL_GLOBAL_AVG, zp[0]);
    else
        rc = avg_requant(m, ni, x, qv, sc[0], zp[0], TSR_POOL_GLOBAL_AVG, &o, y);
    if (rc)
        return rc;
    if (!keep) { /* [N, C]: the same bytes */
        const int y2 = tsr_ox_def_out(m, qn, 0, o.elem, 2, od);
        if (y2 < 0)
            return y2;
        m->vals[y2].base = m->vals[y].base;
    }
    tsr_ox_qdq_fold(m, ni);
    return 0;
}

/* Pad whose pads are all zero: an identity (torch exports one before
 * DenseNet's AveragePool), the output an alias of its input (a QDQ view
 * stays a view). Pads from the attribute before opset 11, the input
 * since. Padding that adds elements is refused. */
int tsr_ox_pad(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    (void)arg;
    const int x = tsr_ox_in_val(m, ni, 0);
    if (x < 0)
        return NERR(m, ni, "input missing");
    const ox_val_t X = m->vals[x];
    const int vp = tsr_ox_in_val(m, ni, 1);
    int64_t cnt = 0, nz = 0;
    if (m->opset < 11) {
        const Onnx__AttributeProto *a = attr(n, "pads");
        cnt = a ? (int64_t)a->n_ints : 0;
        for (int64_t i = 0; i < cnt; i++)
            nz += a->ints[i] != 0;
    } else if (vp >= 0) {
        const ox_val_t *P = &m->vals[vp];
        if (!P->cdata || P->elem != ET_INT64 || P->ndim != 1)
            return NERR(m, ni, "pads must be a 1-D int64 constant");
        cnt = numel(P);
        for (int64_t i = 0; i < cnt; i++)
            nz += cget_i(P, i) != 0;
    }
    if (cnt != 2 * X.ndim && !(m->opset >= 18 && tsr_ox_in_val(m, ni, 3) >= 0))
        return NERR(m, ni, "%lld pads for a %d-D input", (long long)cnt, X.ndim);
    if (nz)
        return NERR(m, ni, "padding that adds elements is not supported (only a Pad of zeros, an identity)");
    return tsr_ox_def_alias(m, ni, x, X.ndim, X.dims) < 0 ? -1 : 0;
}

/* com.microsoft QLinearGlobalAveragePool and QLinearAveragePool (ONNX
 * Runtime's fused forms of the QDQ pools; kind: the registry's argument):
 * the pool's attributes, x and y each with their own scale and zero point
 * (QLinearAveragePool's zero points optional, 0 when absent); the plain
 * pool where both share scale and zero point, else the requantizing forms
 * of the QDQ node. */
int tsr_ox_qlinear_pool(tsr_onnx_t *m, int ni, int kind)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    const int zp_optional = kind == TSR_POOL_AVG;
    int rc;
    double v[4] = {0, 0, 0, 0};
    static const char *const what[4] = {"x_scale", "x_zero_point", "y_scale", "y_zero_point"};
    for (int k = 0; k < 4; k++) {
        const int vk = tsr_ox_in_val(m, ni, (size_t)k + 1);
        if ((k == 0 || k == 2 || vk >= 0 || !zp_optional) && (rc = tsr_ox_const_scalar(m, ni, vk, what[k], &v[k])))
            return rc;
    }
    if (attr_i(n, "channels_last", 0))
        return NERR(m, ni, "channels_last is not supported");
    if (x < 0)
        return NERR(m, ni, "input missing");
    int64_t od[4];
    if ((rc = lower_pool(m, ni, x, -1, od, (tsr_pool_kind_e)kind, (int32_t)v[1])))
        return rc;
    const int vyz = tsr_ox_in_val(m, ni, 4);
    ox_qout_t o;
    memset(&o, 0, sizeof o);
    o.scale = (float)v[2], o.zp = (int32_t)v[3], o.elem = vyz >= 0 ? m->vals[vyz].elem : m->vals[x].elem;
    const int y = tsr_ox_def_out(m, ni, 0, o.elem, 4, od);
    if (y < 0)
        return y;
    if ((float)v[0] == o.scale && v[1] == v[3] && o.elem == m->vals[x].elem)
        return lower_pool(m, ni, x, y, od, (tsr_pool_kind_e)kind, (int32_t)v[1]);
    return avg_requant(m, ni, -1, x, (float)v[0], (int32_t)v[1], (tsr_pool_kind_e)kind, &o, y);
}
