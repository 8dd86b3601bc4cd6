/*
 * tsr_ox_shape: relabellings and Concat. Flatten, Reshape and a Transpose
 * that keeps the order of the dimensions larger than 1 only give the bytes
 * another shape (an alias, no data movement); a Transpose that moves data,
 * and a Slice, of a quantized view (DequantizeLinear folded) permute or
 * slice the quantized bytes on the host (others: ops/tsr_ox_math.c's float
 * forms). Concat of computed tensors is a host copy (one input: an
 * alias), inputs with their own quantization requantized on the device.
 */
#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"

/* Reshape target shape (0 copies, -1 infers). */
static int reshape_dims(tsr_onnx_t *m, int ni, const ox_val_t *X, int vs, int *nd, int64_t *d)
{
    if (vs < 0 || !m->vals[vs].cdata || m->vals[vs].elem != ET_INT64 || m->vals[vs].ndim != 1)
        return NERR(m, ni, "the shape must be a 1-D int64 constant");
    const ox_val_t *S = &m->vals[vs];
    int64_t cnt = numel(S), known = 1, neg = -1;
    if (cnt > MAXD)
        return NERR(m, ni, "more than %d dimensions", MAXD);
    for (int64_t i = 0; i < cnt; i++) {
        int64_t v;
        memcpy(&v, S->cdata + 8 * i, 8);
        if (v == 0 && !attr_i(m->gp->node[ni], "allowzero", 0)) {
            if (i >= X->ndim)
                return NERR(m, ni, "0 copies a dimension the input does not have");
            v = X->dims[i];
        }
        if (v == -1) {
            if (neg >= 0)
                return NERR(m, ni, "two -1 dimensions");
            neg = i;
            v = 1;
        } else if (v < 0 || v > TSR_ONNX_MAX_ELEMS)
            return NERR(m, ni, "dimension %lld out of range", (long long)v);
        d[i] = v;
        known *= v;
        if (known > TSR_ONNX_MAX_ELEMS)
            return NERR(m, ni, "too many elements");
    }
    if (neg >= 0) {
        if (!known || numel(X) % known)
            return NERR(m, ni, "cannot infer the -1 dimension");
        d[neg] = numel(X) / known;
    }
    *nd = (int)cnt;
    return 0;
}

/* Host copies concatenating src[0..n) (values of elem, the node inputs'
 * shapes: bytes[i] each) along axis into y (shape od): a chain of binary
 * H_CONCAT lops through unnamed intermediates. */
static int concat_chain(tsr_onnx_t *m, int ni, const int *src, const size_t *bytes, int n, int axis, int elem,
                        int ndim, const int64_t *od, int y)
{
    int64_t outer = 1;
    for (int i = 0; i < axis; i++)
        outer *= od[i];
    int acc = src[0];
    size_t accb = bytes[0];
    for (int i = 1; i < n; i++) {
        int out = y;
        if (i < n - 1) { /* the first i + 1 inputs concatenated (4-D along channels, else only its byte count matters) */
            if ((out = tsr_ox_new_val(m, "")) < 0)
                return out;
            ox_val_t *O = &m->vals[out];
            O->elem = elem, O->ndim = 1, O->defined = 1;
            O->nbytes = accb + bytes[i];
            O->dims[0] = (int64_t)(O->nbytes / esize(elem));
            if (ndim == 4 && axis == 1 && od[0] && od[2] && od[3]) { /* [N, C so far, H, W]: a device concat's */
                O->ndim = 4;
                O->dims[1] = (int64_t)(O->nbytes / esize(elem)) / (od[0] * od[2] * od[3]);
                O->dims[0] = od[0], O->dims[2] = od[2], O->dims[3] = od[3];
            }
        }
        const int l = tsr_ox_host_lop(m, ni, H_CONCAT, m->vals[acc].base, out);
        if (l < 0)
            return l;
        m->lops[l].in2 = m->vals[src[i]].base;
        m->lops[l].geo[0] = outer;
        m->lops[l].geo[1] = outer ? (int64_t)accb / outer : 0;
        m->lops[l].geo[2] = outer ? (int64_t)bytes[i] / outer : 0;
        acc = out;
        accb += bytes[i];
    }
    return 0;
}

/* The float constant view b quantized to o's parameters (QuantizeLinear:
 * round half to even, saturate) into a new constant: *q. */
static int quantize_const(tsr_onnx_t *m, int b, const ox_qout_t *o, int *q)
{
    const int c = tsr_ox_new_val(m, "");
    if (c < 0)
        return c;
    ox_val_t *C = &m->vals[c];
    const ox_val_t *B = &m->vals[b];
    const int64_t n = numel(B);
    C->elem = o->elem, C->ndim = B->ndim, C->defined = 1;
    memcpy(C->dims, B->dims, sizeof C->dims);
    C->nbytes = (size_t)n;
    if (!(C->cdata = malloc(n ? (size_t)n : 1)))
        return tsr_err(TSR_ENOMEM, "out of memory");
    const float lo = o->elem == ET_UINT8 ? 0.f : -128.f, hi = o->elem == ET_UINT8 ? 255.f : 127.f;
    for (int64_t i = 0; i < n; i++) {
        float f = nearbyintf(cget_f(B, i) / o->scale) + (float)o->zp;
        f = f < lo ? lo : f > hi ? hi : f;
        C->cdata[i] = (uint8_t)(int32_t)f; /* int8: two's complement */
    }
    *q = c;
    return 0;
}

/* The quantized value qv (scale xs, zero point xzp) requantized on the
 * device to o's parameters: a new value *t. The requantize is elementwise:
 * it reads the bytes in their device shape (the base's, when 4-D), else
 * as [1, 1, rows, last dimension]. */
static int requant_to(tsr_onnx_t *m, int ni, int qv, float xs, int32_t xzp, const ox_qout_t *o, int *t)
{
    const int b = m->vals[qv].base;
    const ox_val_t *QB = &m->vals[b];
    int64_t d[4] = {QB->dims[0], QB->dims[1], QB->dims[2], QB->dims[3]};
    int xq = b;
    if (QB->ndim != 4) {
        const int64_t last = QB->ndim ? QB->dims[QB->ndim - 1] : 1;
        d[0] = d[1] = 1, d[3] = last, d[2] = last ? numel(QB) / last : 0;
        if ((xq = tsr_ox_new_val(m, "")) < 0)
            return xq;
        ox_val_t *R = &m->vals[xq];
        R->elem = m->vals[b].elem, R->ndim = 4, R->defined = 1;
        memcpy(R->dims, d, sizeof d);
        R->nbytes = m->vals[b].nbytes;
        R->base = b;
    }
    const int y = tsr_ox_new_val(m, "");
    if (y < 0)
        return y;
    ox_val_t *Y = &m->vals[y];
    Y->elem = o->elem, Y->ndim = 4, Y->defined = 1;
    memcpy(Y->dims, d, sizeof d);
    Y->nbytes = (size_t)numel(Y);
    static const int64_t one[2] = {1, 1}, nopad[4] = {0, 0, 0, 0};
    *t = y;
    const int rc = tsr_ox_sum_requant(m, ni, xq, xs, xzp, one, one, nopad, 1, o, y);
    const int l = rc ? -1 : m->vals[y].prod;
    if (l >= 0 && m->lops[l].side == SIDE_DEV && m->lops[l].nd.kind == TSR_ND_CONV) { /* a table with ACT_LUT */
        ox_lop_t *L = &m->lops[l];
        L->cat_rq = 1, L->scale = xs, L->zp = xzp, L->mult = o->scale, L->yzp = o->zp;
    }
    return rc;
}

/* Concat of any number of computed tensors of one type along any axis: a
 * host copy (one input: an alias). Float views (QDQ): with equal per-tensor
 * parameters, the quantized bytes are concatenated and the output is a view
 * of them; when a QuantizeLinear takes the output (quantize_static's form:
 * every input and the output with its own range), each input whose
 * parameters differ from the output's is requantized to them by a device
 * requantize (tsr_ox_sum_requant) and the output is a view with the
 * QuantizeLinear's parameters (which makes that QuantizeLinear an alias).
 * Why not in the producer's epilogue: ONNX Runtime rounds twice (the
 * producer's QuantizeLinear, then the Concat's requantization) and a fused
 * epilogue once; measured on GoogLeNet at 224 (u8, 20 inputs) the fusion
 * saved 27 of 94 segments but its logits differed from ONNX Runtime in
 * 17074 of 20000 values (max 12 LSB, top-1 85%) against 7143 (max 4,
 * top-1 100%) with the requantize. */
int tsr_ox_concat(tsr_onnx_t *m, int ni, int arg)
{
    (void)arg;
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int nin = (int)n->n_input;
    if (nin < 1 || nin > 4096)
        return NERR(m, ni, "%d inputs (1 to 4096 are supported)", nin);
    int *v = calloc((size_t)nin, sizeof *v), *src = calloc((size_t)nin, sizeof *src);
    size_t *bytes = calloc((size_t)nin, sizeof *bytes);
    int rc = !v || !src || !bytes ? tsr_err(TSR_ENOMEM, "out of memory") : 0;
    for (int i = 0; !rc && i < nin; i++)
        if ((v[i] = tsr_ox_in_val(m, ni, (size_t)i)) < 0)
            rc = NERR(m, ni, "input %d is missing", i);
    const ox_val_t *A = rc ? NULL : &m->vals[v[0]];
    int64_t axis = rc ? 0 : attr_i(n, "axis", 1), od[MAXD];
    if (!rc && axis < 0)
        axis += A->ndim;
    if (!rc && (axis < 0 || axis >= A->ndim))
        rc = NERR(m, ni, "axis out of range");
    int views = 0, cviews = 0, same = 1;
    for (int i = 0; !rc && i < nin; i++) {
        const ox_val_t *B = &m->vals[v[i]];
        if (B->elem != A->elem || B->ndim != A->ndim) {
            rc = NERR(m, ni, "inputs differ in type or rank");
            break;
        }
        for (int d = 0; d < A->ndim && !rc; d++)
            if (d != axis && A->dims[d] != B->dims[d])
                rc = NERR(m, ni, "dimension %d differs (%lld and %lld)", d, (long long)A->dims[d],
                          (long long)B->dims[d]);
        if (B->view_of >= 0 && B->cdata)
            cviews++; /* a DequantizeLinear of a constant (ViT's class token): quantized again at import */
        else if (B->view_of >= 0) {
            views++;
            if (B->vcount != 1)
                rc = NERR(m, ni, "per-channel DequantizeLinear inputs are not supported");
            else if (A->view_of < 0 || A->cdata || B->vscale[0] != A->vscale[0] || B->vzp[0] != A->vzp[0] ||
                     m->vals[B->view_of].elem != m->vals[A->view_of].elem)
                same = 0;
        }
    }
    const ox_qdq_sel_t *qs = &m->qsel[ni];
    const int qdq = views && qs->status == OX_SEL_OK && qs->act < 0 && views + cviews == nin;
    if (!rc && views && !qdq && views != nin)
        rc = NERR(m, ni, "some inputs are DequantizeLinear outputs and some are not");
    if (!rc && nin == 1) { /* one input: the same bytes */
        rc = tsr_ox_def_alias(m, ni, v[0], A->ndim, A->dims) < 0 ? -1 : 0;
        goto out;
    }
    if (rc)
        goto out;
    memcpy(od, A->dims, sizeof od);
    od[axis] = 0;
    for (int i = 0; i < nin; i++)
        od[axis] += m->vals[v[i]].dims[axis];
    const int ndim = A->ndim;
    if (qdq) {
        /* quantize_static's form: each input to the output's parameters, then the bytes concatenated */
        ox_qout_t o;
        const int qn = tsr_ox_qdq_output(m, ni, &o);
        if (qn < 0) {
            rc = qn;
            goto out;
        }
        for (int i = 0; i < nin && !rc; i++) {
            const ox_val_t *B = &m->vals[v[i]];
            const int qv = B->view_of;
            bytes[i] = (size_t)numel(B);
            if (B->vscale[0] == o.scale && B->vzp[0] == o.zp && m->vals[qv].elem == o.elem) {
                src[i] = qv;
                continue;
            }
            if (B->cdata) { /* its floats quantized to the output's parameters, as QuantizeLinear does */
                if ((rc = quantize_const(m, v[i], &o, &src[i])))
                    break;
                continue;
            }
            if ((rc = requant_to(m, ni, qv, B->vscale[0], B->vzp[0], &o, &src[i])))
                break;
        }
        /* the concatenated bytes (no ONNX name), the output a view of them with the QuantizeLinear's
           parameters: that QuantizeLinear is then an alias (placed as one) */
        const int q = rc ? -1 : tsr_ox_new_val(m, "");
        if (!rc && q < 0)
            rc = q;
        if (!rc) {
            ox_val_t *Q = &m->vals[q];
            Q->elem = o.elem, Q->ndim = ndim, Q->defined = 1;
            memcpy(Q->dims, od, sizeof od);
            Q->nbytes = (size_t)numel(Q);
            rc = concat_chain(m, ni, src, bytes, nin, (int)axis, o.elem, ndim, od, q);
        }
        const int y = rc ? -1 : tsr_ox_def_out(m, ni, 0, ET_FLOAT, ndim, od);
        if (!rc)
            rc = y < 0 ? y : tsr_ox_set_view(&m->vals[y], q, o.scale, o.zp);
        goto out;
    }
    if (views && !same) {
        rc = NERR(m, ni, "DequantizeLinear inputs with different scales or zero points need a QuantizeLinear "
                  "as the Concat's only consumer (it gives the output's parameters)");
        goto out;
    }
    const int qe = views ? m->vals[A->view_of].elem : A->elem;
    for (int i = 0; i < nin; i++) {
        src[i] = views ? m->vals[v[i]].view_of : v[i];
        bytes[i] = (size_t)numel(&m->vals[v[i]]) * esize(qe);
    }
    int q;
    if (views) { /* the concatenated quantized bytes (no ONNX name), the output a view of them */
        if ((q = tsr_ox_new_val(m, "")) < 0) {
            rc = q;
            goto out;
        }
        ox_val_t *Q = &m->vals[q];
        Q->elem = qe, Q->ndim = ndim, Q->defined = 1;
        memcpy(Q->dims, od, sizeof od);
        Q->nbytes = (size_t)numel(Q) * esize(Q->elem);
    } else if ((q = tsr_ox_def_out(m, ni, 0, A->elem, ndim, od)) < 0) {
        rc = q;
        goto out;
    }
    const float sc = views ? m->vals[v[0]].vscale[0] : 0;
    const int32_t zp = views ? m->vals[v[0]].vzp[0] : 0;
    if ((rc = concat_chain(m, ni, src, bytes, nin, (int)axis, qe, ndim, od, q)))
        goto out;
    if (views) {
        const int y = tsr_ox_def_out(m, ni, 0, ET_FLOAT, ndim, od);
        rc = y < 0 ? y : tsr_ox_set_view(&m->vals[y], q, sc, zp);
    }
out:
    free(v);
    free(src);
    free(bytes);
    return rc;
}

/* com.microsoft QLinearConcat (ONNX Runtime's fused Concat): Y_scale,
 * Y_zero_point, then (X, X_scale, X_zero_point) per input; each input
 * whose parameters differ from Y's requantized on the device (a constant
 * at import), then the bytes concatenated on the host. */
int tsr_ox_qlinear_concat(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    (void)arg;
    if (n->n_input < 5 || (n->n_input - 2) % 3)
        return NERR(m, ni, "%zu inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input",
                    n->n_input);
    const int nin = (int)(n->n_input - 2) / 3;
    double ys, yz;
    int rc = tsr_ox_const_scalar(m, ni, tsr_ox_in_val(m, ni, 0), "Y_scale", &ys);
    if (!rc)
        rc = tsr_ox_const_scalar(m, ni, tsr_ox_in_val(m, ni, 1), "Y_zero_point", &yz);
    if (rc)
        return rc;
    ox_qout_t o;
    memset(&o, 0, sizeof o);
    o.scale = (float)ys, o.zp = (int32_t)yz, o.elem = m->vals[tsr_ox_in_val(m, ni, 1)].elem;
    if (o.elem != ET_UINT8 && o.elem != ET_INT8)
        return NERR(m, ni, "Y_zero_point has type %s (uint8 or int8)", ename(o.elem));
    int *src = calloc((size_t)nin, sizeof *src);
    size_t *bytes = calloc((size_t)nin, sizeof *bytes);
    if (!src || !bytes) {
        free(src), free(bytes);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    const int x0 = tsr_ox_in_val(m, ni, 2);
    int64_t axis = attr_i(n, "axis", 0), od[MAXD];
    if (x0 < 0)
        rc = NERR(m, ni, "input 0 is missing");
    const int ndim = rc ? 0 : m->vals[x0].ndim;
    if (!rc && axis < 0)
        axis += ndim;
    if (!rc && (axis < 0 || axis >= ndim))
        rc = NERR(m, ni, "axis out of range");
    if (!rc) {
        memcpy(od, m->vals[x0].dims, sizeof od);
        od[axis] = 0;
    }
    for (int i = 0; i < nin && !rc; i++) {
        const int x = tsr_ox_in_val(m, ni, (size_t)(2 + 3 * i));
        double xs, xz;
        if (x < 0) {
            rc = NERR(m, ni, "input %d is missing", i);
            break;
        }
        if ((rc = tsr_ox_const_scalar(m, ni, tsr_ox_in_val(m, ni, (size_t)(3 + 3 * i)), "X_scale", &xs)) ||
            (rc = tsr_ox_const_scalar(m, ni, tsr_ox_in_val(m, ni, (size_t)(4 + 3 * i)), "X_zero_point", &xz)))
            break;
        const ox_val_t *X = &m->vals[x];
        if (X->elem != ET_UINT8 && X->elem != ET_INT8) {
            rc = NERR(m, ni, "input %d has type %s (uint8 or int8)", i, ename(X->elem));
            break;
        }
        if (X->ndim != ndim) {
            rc = NERR(m, ni, "inputs differ in rank");
            break;
        }
        for (int d = 0; d < ndim && !rc; d++)
            if (d != axis && X->dims[d] != m->vals[x0].dims[d])
                rc = NERR(m, ni, "dimension %d differs (%lld and %lld)", d, (long long)X->dims[d],
                          (long long)m->vals[x0].dims[d]);
        if (rc)
            break;
        od[axis] += X->dims[axis];
        bytes[i] = (size_t)numel(X);
        if ((float)xs == o.scale && (int32_t)xz == o.zp && X->elem == o.elem) {
            src[i] = x;
            continue;
        }
        if (X->cdata) { /* dequantized and quantized again at import, as ONNX Runtime's float path */
            const int c = tsr_ox_new_val(m, "");
            if (c < 0) {
                rc = c;
                break;
            }
            X = &m->vals[x];
            ox_val_t *C = &m->vals[c];
            C->elem = ET_FLOAT, C->ndim = X->ndim, C->defined = 1, C->view_of = x;
            memcpy(C->dims, X->dims, sizeof C->dims);
            C->nbytes = (size_t)numel(X) * 4;
            if (!(C->cdata = malloc(C->nbytes ? C->nbytes : 1))) {
                rc = tsr_err(TSR_ENOMEM, "out of memory");
                break;
            }
            for (int64_t e = 0; e < numel(X); e++) {
                const float f = (float)(cget_i(X, e) - (int32_t)xz) * (float)xs;
                memcpy(C->cdata + 4 * e, &f, 4);
            }
            rc = quantize_const(m, c, &o, &src[i]);
            continue;
        }
        rc = requant_to(m, ni, x, (float)xs, (int32_t)xz, &o, &src[i]);
    }
    const int y = rc ? -1 : tsr_ox_def_out(m, ni, 0, o.elem, ndim, od);
    if (!rc && y < 0)
        rc = y;
    if (!rc)
        rc = concat_chain(m, ni, src, bytes, nin, (int)axis, o.elem, ndim, od, y);
    free(src);
    free(bytes);
    return rc;
}

/* Split (any axis; sizes from the attribute before opset 13, the input
 * since, else equal parts, num_outputs from 18): each output a host slice
 * (H_SLICE, ops/tsr_ox_math.c's kernel) of the bytes. A float view (QDQ:
 * quantize_static gives the outputs the input's parameters) is split as
 * its quantized bytes, each output a view with the same parameters, so the
 * QuantizeLinears after it are aliases. */
int tsr_ox_split(tsr_onnx_t *m, int ni, int arg)
{
    (void)arg;
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    if (x < 0)
        return NERR(m, ni, "input missing");
    const int nout = (int)n->n_output;
    if (nout < 1 || nout > MAXD * 64)
        return NERR(m, ni, "%d outputs", nout);
    const ox_val_t X = m->vals[x];
    int64_t axis = attr_i(n, "axis", 0);
    if (axis < 0)
        axis += X.ndim;
    if (axis < 0 || axis >= X.ndim)
        return NERR(m, ni, "axis out of range");
    const int view = X.view_of >= 0 && !X.cdata;
    if (view && X.vcount != 1)
        return NERR(m, ni, "per-channel DequantizeLinear input is not supported");
    int64_t *sz = calloc((size_t)nout, sizeof *sz);
    if (!sz)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = 0;
    const Onnx__AttributeProto *sa = attr(n, "split");
    const int vs = tsr_ox_in_val(m, ni, 1);
    if (sa) {
        if (sa->n_ints != (size_t)nout)
            rc = NERR(m, ni, "split has %zu sizes for %d outputs", sa->n_ints, nout);
        for (int k = 0; !rc && k < nout; k++)
            sz[k] = sa->ints[k];
    } else if (vs >= 0) {
        const ox_val_t *S = &m->vals[vs];
        if (!S->cdata || S->elem != ET_INT64 || numel(S) != nout)
            rc = NERR(m, ni, "split must be an int64 constant of %d sizes", nout);
        for (int k = 0; !rc && k < nout; k++)
            memcpy(&sz[k], S->cdata + 8 * k, 8);
    } else { /* equal parts, the last one smaller (opset 18) */
        const int64_t part = (X.dims[axis] + nout - 1) / nout;
        for (int k = 0; k < nout; k++) {
            const int64_t left = X.dims[axis] - part * k;
            sz[k] = left < part ? (left > 0 ? left : 0) : part;
        }
        if (attr_i(n, "num_outputs", nout) != nout || (X.dims[axis] % nout && m->opset < 18))
            rc = NERR(m, ni, "the input's %lld along axis %lld do not split into %d equal parts",
                      (long long)X.dims[axis], (long long)axis, nout);
    }
    int64_t tot = 0;
    for (int k = 0; !rc && k < nout; k++) {
        if (sz[k] < 0)
            rc = NERR(m, ni, "negative split size");
        tot += sz[k];
    }
    if (!rc && tot != X.dims[axis])
        rc = NERR(m, ni, "the split sizes add up to %lld, the axis has %lld", (long long)tot,
                  (long long)X.dims[axis]);
    /* the bytes split: the view's quantized value in the view's shape */
    int src = x;
    if (!rc && view) {
        const int q = m->vals[x].view_of;
        if ((src = tsr_ox_new_val(m, "")) < 0)
            rc = src;
        else {
            ox_val_t *S = &m->vals[src];
            S->elem = m->vals[q].elem, S->ndim = X.ndim, S->defined = 1;
            memcpy(S->dims, X.dims, sizeof S->dims);
            S->nbytes = m->vals[q].nbytes;
            S->base = m->vals[q].base;
        }
    }
    int64_t start = 0;
    for (int k = 0; !rc && k < nout; start += sz[k], k++) {
        if (!n->output[k][0])
            continue;
        int64_t d[MAXD];
        memcpy(d, X.dims, sizeof d);
        d[axis] = sz[k];
        const int elem = m->vals[src].elem;
        int y;
        if (view) {
            if ((y = tsr_ox_new_val(m, "")) < 0) {
                rc = y;
                break;
            }
            ox_val_t *Y = &m->vals[y];
            Y->elem = elem, Y->ndim = X.ndim, Y->defined = 1;
            memcpy(Y->dims, d, sizeof d);
            Y->nbytes = (size_t)numel(Y) * esize(elem);
        } else if ((y = tsr_ox_def_out(m, ni, (size_t)k, elem, X.ndim, d)) < 0) {
            rc = y;
            break;
        }
        int32_t *st = calloc(MAXD, sizeof *st), *sp = malloc(MAXD * sizeof *sp);
        if (!st || !sp) {
            free(st), free(sp);
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            break;
        }
        for (int i = 0; i < MAXD; i++)
            sp[i] = 1;
        st[axis] = (int32_t)start;
        const int l = tsr_ox_host_lop(m, ni, H_SLICE, m->vals[src].base, y);
        if (l < 0) {
            free(st), free(sp);
            rc = l;
            break;
        }
        ox_lop_t *L = &m->lops[l];
        L->geo[0] = src;
        L->zpa = st, L->zpb = sp, L->nzpa = L->nzpb = MAXD;
        if (view) {
            const float sc = m->vals[x].vscale[0];
            const int32_t zp = m->vals[x].vzp[0];
            const int f = tsr_ox_def_out(m, ni, (size_t)k, ET_FLOAT, X.ndim, d);
            rc = f < 0 ? f : tsr_ox_set_view(&m->vals[f], y, sc, zp);
        }
    }
    free(sz);
    return rc;
}

/* A Transpose's perm (the attribute, or the reverse when absent) checked
 * against X's rank; odims: the output's dimensions; *moves: 1 when the
 * dimensions of size > 1 change order, i.e. the bytes move. */
int tsr_ox_perm(tsr_onnx_t *m, int ni, const ox_val_t *X, int64_t *perm, int64_t *odims, int *moves)
{
    const Onnx__AttributeProto *pa = attr(m->gp->node[ni], "perm");
    if (pa && pa->n_ints != (size_t)X->ndim)
        return NERR(m, ni, "perm has %zu entries for a %d-D input", pa->n_ints, X->ndim);
    int seen[MAXD] = {0};
    int64_t last = -1;
    *moves = 0;
    for (int i = 0; i < X->ndim; i++) {
        perm[i] = pa ? pa->ints[i] : X->ndim - 1 - i;
        if (perm[i] < 0 || perm[i] >= X->ndim || seen[perm[i]]++)
            return NERR(m, ni, "perm is not a permutation");
        odims[i] = X->dims[perm[i]];
        if (X->dims[perm[i]] != 1) {
            *moves |= perm[i] < last;
            last = perm[i];
        }
    }
    return 0;
}

/* Transpose that only relabels: the dimensions it moves are 1 except one, so
 * the bytes keep their order. Anything else moves data: refused. */
static int lower_transpose(tsr_onnx_t *m, int ni, int x)
{
    const ox_val_t X = m->vals[x];
    int64_t perm[MAXD], od[MAXD];
    int moves, rc;
    if ((rc = tsr_ox_perm(m, ni, &X, perm, od, &moves)))
        return rc;
    if (moves)
        return NERR(m, ni, "it moves data (dimensions of size > 1 change order): only a Transpose that "
                    "relabels is supported");
    return tsr_ox_def_alias(m, ni, x, X.ndim, od) < 0 ? -1 : 0;
}

/* Flatten (flatten = 1) and Reshape: an alias with the new shape. */
int tsr_ox_reshape(tsr_onnx_t *m, int ni, int flatten)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    int rc;
    if (x < 0)
        return NERR(m, ni, "input missing");
    const ox_val_t X = m->vals[x];
    int64_t d[MAXD];
    int nd = 0;
    if (flatten) {
        int64_t axis = attr_i(n, "axis", 1), a = 1, b = 1;
        if (axis < 0)
            axis += X.ndim;
        if (axis < 0 || axis > X.ndim)
            return NERR(m, ni, "axis out of range");
        for (int i = 0; i < X.ndim; i++)
            *(i < axis ? &a : &b) *= X.dims[i];
        d[0] = a, d[1] = b, nd = 2;
    } else if ((rc = reshape_dims(m, ni, &X, tsr_ox_in_val(m, ni, 1), &nd, d)))
        return rc;
    return tsr_ox_def_alias(m, ni, x, nd, d) < 0 ? -1 : 0;
}

int tsr_ox_transpose(tsr_onnx_t *m, int ni, int arg)
{
    const int x = tsr_ox_in_val(m, ni, 0);
    (void)arg;
    if (x < 0)
        return NERR(m, ni, "input missing");
    return lower_transpose(m, ni, x);
}

/* Transpose of a float view of quantized bytes (DequantizeLinear ->
 * Transpose -> QuantizeLinear, ShuffleNetV2's channel shuffle) that moves
 * data: the host permutes the quantized bytes (exact: a permutation
 * commutes with the per-tensor DequantizeLinear) and the output is a view
 * of them, so the QuantizeLinear after it is a relabelling, not a host
 * dequantize, a float transpose and a quantize. Anything else: the float
 * or relabelling forms of tsr_ox_transpose_any. */
int tsr_ox_transpose_q(tsr_onnx_t *m, int ni, int arg)
{
    const int x = tsr_ox_in_val(m, ni, 0);
    if (x < 0)
        return NERR(m, ni, "input missing");
    const ox_val_t X = m->vals[x];
    const Onnx__AttributeProto *pa = attr(m->gp->node[ni], "perm");
    /* (a view of a constant: tsr_ox_transpose_any folds it at import) */
    if (X.view_of < 0 || X.cdata || m->vals[X.view_of].cdata || X.vcount != 1 ||
        (pa && pa->n_ints != (size_t)X.ndim))
        return tsr_ox_transpose_any(m, ni, arg);
    int64_t perm[MAXD], d[MAXD];
    int moves, rc;
    if ((rc = tsr_ox_perm(m, ni, &X, perm, d, &moves)))
        return rc;
    if (!moves)
        return tsr_ox_transpose_any(m, ni, arg);
    if ((rc = tsr_ox_shuffle_q(m, ni, x, perm, d)) != 1) /* a channel shuffle: on the device */
        return rc;
    const int qv = X.view_of;
    /* the quantized bytes in the view's shape (a relabelled view keeps the
     * quantized value of its source's shape) */
    const int a = tsr_ox_new_val(m, "");
    if (a < 0)
        return a;
    ox_val_t *A = &m->vals[a];
    A->elem = m->vals[qv].elem, A->ndim = X.ndim, A->defined = 1;
    memcpy(A->dims, X.dims, sizeof A->dims);
    A->nbytes = (size_t)numel(A);
    if (A->nbytes != m->vals[qv].nbytes)
        return NERR(m, ni, "its quantized input has %zu bytes, the view %zu", m->vals[qv].nbytes, A->nbytes);
    A->base = m->vals[qv].base;
    const int q = tsr_ox_new_val(m, "");
    if (q < 0)
        return q;
    ox_val_t *Q = &m->vals[q];
    Q->elem = m->vals[qv].elem, Q->ndim = X.ndim, Q->defined = 1;
    memcpy(Q->dims, d, sizeof d);
    Q->nbytes = (size_t)numel(Q);
    const int l = tsr_ox_host_lop(m, ni, H_FTRANSPOSE, m->vals[qv].base, q);
    if (l < 0)
        return l;
    m->lops[l].geo[0] = a;
    for (int i = 0; i < X.ndim; i++)
        m->lops[l].geo[4 + i] = perm[i];
    const int y = tsr_ox_def_out(m, ni, 0, ET_FLOAT, X.ndim, d);
    if (y < 0)
        return y;
    return tsr_ox_set_view(&m->vals[y], q, X.vscale[0], X.vzp[0]);
}

/* Slice of a float view of quantized bytes (DequantizeLinear -> Slice ->
 * QuantizeLinear with the input's parameters, as quantize_static writes
 * torch's chunk: ShuffleNetV2's channel split) with constant starts/ends
 * (axes optional, steps 1): the host slices the quantized bytes and the
 * output is a view of them, so no host dequantize and quantize around it
 * (exact: a slice commutes with the per-tensor DequantizeLinear). Anything
 * else: ops/tsr_ox_math.c's Slice. */
int tsr_ox_slice_q(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    if (x < 0 || m->opset < 10 || n->n_input < 3 || n->n_input > 5)
        return tsr_ox_slice(m, ni, arg);
    const ox_val_t X = m->vals[x];
    if (X.view_of < 0 || X.cdata || m->vals[X.view_of].cdata || X.vcount != 1)
        return tsr_ox_slice(m, ni, arg); /* (a view of a constant: folded there) */
    int64_t v[4][MAXD];
    int cnt[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; k++) { /* starts, ends, axes, steps */
        const int c = k + 1 < (int)n->n_input ? tsr_ox_in_val(m, ni, k + 1) : -1;
        if (c < 0) {
            if (k < 2)
                return tsr_ox_slice(m, ni, arg);
            cnt[k] = -1;
            continue;
        }
        const ox_val_t *C = &m->vals[c];
        if (!C->cdata || C->elem != ET_INT64 || C->ndim != 1 || numel(C) < 1 || numel(C) > X.ndim)
            return tsr_ox_slice(m, ni, arg);
        cnt[k] = (int)numel(C);
        memcpy(v[k], C->cdata, (size_t)cnt[k] * 8);
    }
    if (cnt[1] != cnt[0] || (cnt[2] >= 0 && cnt[2] != cnt[0]) || (cnt[3] >= 0 && cnt[3] != cnt[0]))
        return tsr_ox_slice(m, ni, arg);
    int32_t *st = calloc(MAXD, sizeof *st), *sp = malloc(MAXD * sizeof *sp);
    if (!st || !sp) {
        free(st), free(sp);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    int64_t d[MAXD];
    int seen[MAXD] = {0}, plain = 1;
    for (int i = 0; i < MAXD; i++)
        sp[i] = 1, d[i] = i < X.ndim ? X.dims[i] : 1;
    for (int k = 0; k < cnt[0] && plain; k++) {
        int64_t a = cnt[2] >= 0 ? v[2][k] : k;
        a = a < 0 ? a + X.ndim : a;
        if (a < 0 || a >= X.ndim || seen[a]++ || (cnt[3] >= 0 && v[3][k] != 1)) {
            plain = 0; /* tsr_ox_slice names the problem or takes the step */
            break;
        }
        const int64_t dim = X.dims[a];
        int64_t s = v[0][k], e = v[1][k]; /* ONNX's clamping for steps > 0 */
        s = s < 0 ? (s < -dim ? 0 : s + dim) : (s > dim ? dim : s);
        e = e < 0 ? (e < -dim ? 0 : e + dim) : (e > dim ? dim : e);
        d[a] = e > s ? e - s : 0;
        st[a] = (int32_t)s;
    }
    if (!plain) {
        free(st), free(sp);
        return tsr_ox_slice(m, ni, arg);
    }
    const int dev = tsr_ox_chslice_q(m, ni, x, st, d); /* a channel slice: on the device */
    if (dev != 1) {
        free(st), free(sp);
        return dev;
    }
    const int qv = X.view_of;
    const int a = tsr_ox_new_val(m, ""); /* the quantized bytes in the view's shape */
    const int q = a < 0 ? a : tsr_ox_new_val(m, "");
    if (q < 0) {
        free(st), free(sp);
        return q;
    }
    ox_val_t *A = &m->vals[a];
    A->elem = m->vals[qv].elem, A->ndim = X.ndim, A->defined = 1;
    memcpy(A->dims, X.dims, sizeof A->dims);
    A->nbytes = m->vals[qv].nbytes;
    A->base = m->vals[qv].base;
    ox_val_t *Q = &m->vals[q];
    Q->elem = A->elem, Q->ndim = X.ndim, Q->defined = 1;
    memcpy(Q->dims, d, sizeof Q->dims);
    Q->nbytes = (size_t)numel(Q);
    const int l = tsr_ox_host_lop(m, ni, H_SLICE, A->base, q);
    if (l < 0) {
        free(st), free(sp);
        return l;
    }
    ox_lop_t *L = &m->lops[l];
    L->geo[0] = a;
    L->zpa = st, L->zpb = sp, L->nzpa = L->nzpb = MAXD;
    const int y = tsr_ox_def_out(m, ni, 0, ET_FLOAT, X.ndim, d);
    return y < 0 ? y : tsr_ox_set_view(&m->vals[y], q, X.vscale[0], X.vzp[0]);
}
