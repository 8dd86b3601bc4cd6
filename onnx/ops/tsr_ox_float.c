/*
 * tsr_ox_float: float operators the host runs (tsr_onnx_host.c): Relu,
 * Softmax (before opset 13 over the last axis only: it flattened from its
 * axis then) and ArgMax (keepdims; select_last_index refused); ONNX
 * Runtime's QLinearSigmoid and QLinearLeakyRelu as lookup tables.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"

/* DequantizeLinear -> Softmax -> QuantizeLinear of one type, per tensor: the
 * integer form ONNX Runtime fuses it into (QLinearSoftmax, tsr_onnx_hostf.c),
 * so that the quantized output is ORT's exactly. 1 when lowered so (the
 * QuantizeLinear folded in), 0 when the pattern is not there, < 0 on error. */
static int qdq_softmax(tsr_onnx_t *m, int ni, int x, int axis)
{
    const ox_val_t *X = &m->vals[x];
    if (X->view_of < 0 || X->cdata || X->vcount != 1)
        return 0;
    const int qn = tsr_ox_sole_consumer(m, m->gp->node[ni]->output[0]);
    if (qn < 0 || strcmp(m->gp->node[qn]->op_type, "QuantizeLinear") || m->placed[qn] ||
        (m->gp->node[qn]->domain && m->gp->node[qn]->domain[0] && strcmp(m->gp->node[qn]->domain, "ai.onnx")))
        return 0;
    const int qe = m->vals[X->view_of].elem, vs = tsr_ox_in_val(m, qn, 1), vz = tsr_ox_in_val(m, qn, 2);
    if (vs < 0 || vz < 0 || m->vals[vz].elem != qe || !m->vals[vs].cdata || !m->vals[vz].cdata ||
        numel(&m->vals[vs]) != 1 || numel(&m->vals[vz]) != 1)
        return 0;
    double ys, yz;
    int rc;
    if ((rc = tsr_ox_const_scalar(m, qn, vs, "y_scale", &ys)) || (rc = tsr_ox_const_scalar(m, qn, vz, "y_zero_point", &yz)))
        return rc;
    if (!(ys > 0))
        return 0;
    const float xs = X->vscale[0];
    const int q = X->view_of;
    const int y = tsr_ox_def_out(m, qn, 0, qe, m->vals[q].ndim, m->vals[q].dims);
    if (y < 0)
        return y;
    const int l = tsr_ox_host_lop(m, ni, H_QSOFTMAX, m->vals[q].base, y);
    if (l < 0)
        return l;
    ox_lop_t *L = &m->lops[l];
    L->geo[0] = q;
    L->axis = axis;
    L->scale = xs;
    L->mult = (float)ys;
    L->zp = (int32_t)yz;
    m->placed[qn] = OX_FOLDED;
    m->node_lop[qn] = l;
    return 1;
}

/* The QLinearSoftmax host lops on the device (jit/tsr_softmax.h: integers, the exponent from three
 * activation tables), for a config with at least four tables: a softmax along the last axis of a
 * 4-D tensor (along w) or of a 3-D one (a device tensor holds [B, T, L] as [B, T, L, 1]: over h*w), whose
 * integer form exists (tsr_softmax_form). ONNX Runtime computes it from a float32 table, a float32
 * running sum and a float32 division; the device's integers agree with it within 1 LSB (operators.md).
 * Placement, as the activation tables' (tsr_onnx_act.c): only next to device work (input made by a
 * device operator or output read by one), so that a softmax between two host operators does not become
 * a device segment of its own; --place softmax=device takes every one that fits, softmax=host none. */
int tsr_ox_softmax_device(tsr_onnx_t *m, int act_lut)
{
    const int force = m->opts.place[TSR_PLACE_SOFTMAX] == TSR_PLACE_DEVICE;
    if (act_lut < 4 || m->opts.place[TSR_PLACE_SOFTMAX] == TSR_PLACE_HOST)
        return 0;
    for (int c = 0; c < m->nlops; c++) {
        ox_lop_t *L = &m->lops[c];
        if (L->side != SIDE_HOST || L->hkind != H_QSOFTMAX)
            continue;
        const int q = (int)L->geo[0], in = L->in;
        const ox_val_t *X = &m->vals[q], *B = &m->vals[in], *Y = &m->vals[L->out];
        if (B->ndim != X->ndim || memcmp(B->dims, X->dims, sizeof(int64_t) * (size_t)X->ndim) ||
            m->vals[L->out].base != L->out)
            continue; /* (a relabelled input: the device tensor would have its base's shape) */
        tsr_softmax_params_t p;
        memset(&p, 0, sizeof p);
        int ok = 1;
        for (int i = 0; i < X->ndim; i++)
            ok = ok && X->dims[i] >= 1 && X->dims[i] <= 65536;
        if (ok && X->ndim == 4 && L->axis == 3)
            p.n = (int)X->dims[0], p.c = (int)X->dims[1], p.h = (int)X->dims[2], p.w = (int)X->dims[3];
        else if (ok && X->ndim == 3 && L->axis == 2)
            p.n = (int)X->dims[0], p.c = (int)X->dims[1], p.h = (int)X->dims[2], p.w = 1, p.spatial = 1;
        else
            continue;
        if (qdtype(X->elem, &p.x_dtype) || qdtype(Y->elem, &p.y_dtype))
            continue;
        p.x_scale = L->scale;
        p.y_scale = L->mult;
        p.y_zp = L->zp;
        p.x_zp = 0; /* (the segment's tensor's, tsr_onnx_segment.c: the values do not depend on it) */
        tsr_softmax_form_t f;
        if (tsr_softmax_form(&p, &f)) {
            tsr_err_clear();
            continue;
        }
        const int pr = m->vals[in].prod;
        int near = force || (pr >= 0 && m->lops[pr].side == SIDE_DEV);
        for (int j = c + 1; j < m->nlops && !near; j++)
            near = m->lops[j].side == SIDE_DEV && (m->lops[j].in == L->out || m->lops[j].in2 == L->out);
        if (!near)
            continue;
        tsr_nd_node_t nd;
        memset(&nd, 0, sizeof nd);
        nd.kind = TSR_ND_SOFTMAX;
        nd.in[1] = -1;
        nd.softmax = p;
        tsr_strsafe(nname(m, L->node), nd.name, sizeof nd.name);
        const int node = L->node, out = L->out;
        free(L->zpa);
        free(L->zpb);
        memset(L, 0, sizeof *L);
        L->node = node;
        L->name_node = node;
        L->side = SIDE_DEV;
        L->in = in;
        L->in2 = -1;
        L->out = out;
        L->seg = -1;
        L->nd = nd;
    }
    return 0;
}

/* Relu, Softmax, ArgMax (hk: the host kernel) of real floats: a float view
 * gets its host dequantize first. */
int tsr_ox_host_float(tsr_onnx_t *m, int ni, int hk)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    int rc;
    if (x < 0)
        return NERR(m, ni, "input missing");
    if (m->vals[x].elem != ET_FLOAT)
        return NERR(m, ni, "input type %s: the host runs it on float only", ename(m->vals[x].elem));
    const ox_val_t X = m->vals[x];
    int64_t d[MAXD];
    memcpy(d, X.dims, sizeof d);
    int64_t axis = attr_i(n, "axis", hk == H_SOFTMAX ? (m->opset < 13 ? 1 : -1) : 0);
    if (axis < 0)
        axis += X.ndim;
    if (hk == H_SOFTMAX && m->opset < 13 && axis != X.ndim - 1)
        return NERR(m, ni, "before opset 13 Softmax flattens from its axis: only the last axis is supported");
    if (hk != H_RELU && (axis < 0 || axis >= X.ndim))
        return NERR(m, ni, "axis out of range");
    int nd = X.ndim, keep = (int)attr_i(n, "keepdims", 1);
    if (hk == H_ARGMAX) {
        if (attr_i(n, "select_last_index", 0))
            return NERR(m, ni, "select_last_index is not supported");
        if (keep)
            d[axis] = 1;
        else {
            for (int i = (int)axis; i + 1 < nd; i++)
                d[i] = d[i + 1];
            nd--;
        }
    }
    if (hk == H_SOFTMAX) {
        const int r = qdq_softmax(m, ni, x, (int)axis);
        if (r)
            return r < 0 ? r : 0;
    }
    if ((rc = tsr_ox_need_real(m, ni, x)))
        return rc;
    int v = tsr_ox_def_out(m, ni, 0, hk == H_ARGMAX ? ET_INT64 : ET_FLOAT, nd, d);
    if (v < 0)
        return v;
    int l = tsr_ox_host_lop(m, ni, hk, X.base, v);
    if (l < 0)
        return l;
    m->lops[l].axis = (int)axis;
    return 0;
}

/* com.microsoft QLinearSigmoid / QLinearLeakyRelu (X, X_scale, X_zero_point, Y_scale, Y_zero_point: per
 * tensor, one 8-bit type for X and Y): ONNX Runtime computes them through a lookup table of 256 entries
 * (QlinearBuildLookupTable): every input value dequantized in float32 ((x - zp) * scale), the function,
 * then quantized as MlasQuantizeLinear (a float32 division rounded half to even, saturated). The same
 * table here, with the host's function (H_FUNARY's, rounded to float32 once: MLAS's logistic is its own
 * approximation, so a Sigmoid entry on a rounding boundary may differ by 1 LSB; LeakyRelu's float32
 * product is exact to it); a host lookup (H_QLUT), a device activation table on ACT_LUT configs. */
int tsr_ox_qlinear_unary(tsr_onnx_t *m, int ni, int op)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    if (x < 0)
        return NERR(m, ni, "input missing");
    const ox_val_t X = m->vals[x];
    if ((X.elem != ET_UINT8 && X.elem != ET_INT8) || X.cdata)
        return NERR(m, ni, "X must be a computed uint8 or int8 tensor (it is %s%s)", ename(X.elem),
                    X.cdata ? ", a constant" : "");
    static const char *const what[4] = {"X_scale", "X_zero_point", "Y_scale", "Y_zero_point"};
    double v[4] = {0, 0, 0, 0};
    int rc;
    for (int k = 0; k < 4; k++) {
        const int vk = tsr_ox_in_val(m, ni, (size_t)k + 1);
        if ((k == 0 || k == 2 || vk >= 0) && (rc = tsr_ox_const_scalar(m, ni, vk, what[k], &v[k])))
            return rc;
        if ((k == 1 || k == 3) && vk >= 0 && m->vals[vk].elem != X.elem)
            return NERR(m, ni, "%s is %s, X is %s (one type)", what[k], ename(m->vals[vk].elem), ename(X.elem));
    }
    const int s8 = X.elem == ET_INT8, lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
    const Onnx__AttributeProto *a = attr(n, "alpha");
    const float alpha = op == FU_LEAKYRELU && a && a->has_f ? a->f : 0.01f;
    int32_t *t = malloc(sizeof *t * 256);
    if (!t)
        return tsr_err(TSR_ENOMEM, "out of memory");
    const float xs = (float)v[0], ys = (float)v[2];
    const int32_t xz = (int32_t)v[1], yz = (int32_t)v[3];
    for (int b = 0; b < 256; b++) { /* by the input's byte */
        const int32_t q = s8 ? (int8_t)b : b;
        const float xf = (float)(q - xz) * xs, yf = (float)tsr_ox_unary(op, xf, alpha, 0);
        float r = nearbyintf(yf / ys) + (float)yz;
        r = r < (float)lo ? (float)lo : r > (float)hi ? (float)hi : r; /* no NaN: both functions are finite */
        t[b] = (int32_t)(uint8_t)(int32_t)r;
    }
    const int y = tsr_ox_def_out(m, ni, 0, X.elem, X.ndim, X.dims);
    const int l = y < 0 ? y : tsr_ox_host_lop(m, ni, H_QLUT, X.base, y);
    if (l < 0) {
        free(t);
        return l;
    }
    m->lops[l].zpa = t;
    m->lops[l].nzpa = 256;
    return 0;
}
