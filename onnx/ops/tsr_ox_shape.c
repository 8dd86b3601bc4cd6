/*
 * tsr_ox_shape: relabellings and Concat. Flatten, Reshape and a Transpose
 * that keeps the order of the dimensions larger than 1 only give the bytes
 * another shape (an alias, no data movement); a Transpose that moves data
 * is refused. Concat of two computed tensors is a host copy.
 */
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

/* Concat of two computed tensors of the same type (any axis): a host copy.
 * Float views (QDQ) with equal per-tensor scale and zero point concatenate
 * their quantized bytes, the output a view of the result. */
int tsr_ox_concat(tsr_onnx_t *m, int ni, int arg)
{
    (void)arg;
    const Onnx__NodeProto *n = m->gp->node[ni];
    if (n->n_input != 2)
        return NERR(m, ni, "%zu inputs: two are supported", n->n_input);
    int a = tsr_ox_in_val(m, ni, 0), b = tsr_ox_in_val(m, ni, 1);
    if (a < 0 || b < 0)
        return NERR(m, ni, "an input is missing");
    const ox_val_t *A = &m->vals[a], *B = &m->vals[b];
    int view = 0;
    if (A->view_of >= 0 || B->view_of >= 0) {
        if (A->view_of < 0 || B->view_of < 0 || A->cdata || B->cdata || A->vcount != 1 || B->vcount != 1 ||
            A->vscale[0] != B->vscale[0] || A->vzp[0] != B->vzp[0] ||
            m->vals[A->view_of].elem != m->vals[B->view_of].elem)
            return NERR(m, ni, "DequantizeLinear inputs must share one per-tensor scale, zero point and type (the "
                        "host concatenates the quantized bytes)");
        view = 1;
    }
    if (A->elem != B->elem || A->ndim != B->ndim)
        return NERR(m, ni, "inputs differ in type or rank");
    int64_t axis = attr_i(n, "axis", 1);
    if (axis < 0)
        axis += A->ndim;
    if (axis < 0 || axis >= A->ndim)
        return NERR(m, ni, "axis out of range");
    int64_t od[MAXD];
    for (int i = 0; i < A->ndim; i++) {
        if (i != axis && A->dims[i] != B->dims[i])
            return NERR(m, ni, "dimension %d differs (%lld and %lld)", i, (long long)A->dims[i], (long long)B->dims[i]);
        od[i] = i == axis ? A->dims[i] + B->dims[i] : A->dims[i];
    }
    const int qa = view ? A->view_of : a, qb = view ? B->view_of : b;
    const float sc = view ? A->vscale[0] : 0;
    const int32_t zp = view ? A->vzp[0] : 0;
    int q;
    if (view) { /* the concatenated quantized bytes (no ONNX name) */
        if ((q = tsr_ox_new_val(m, "")) < 0)
            return q;
        ox_val_t *Q = &m->vals[q];
        Q->elem = m->vals[qa].elem, Q->ndim = A->ndim, Q->defined = 1;
        memcpy(Q->dims, od, sizeof od);
        Q->nbytes = (size_t)numel(Q) * esize(Q->elem);
    } else if ((q = tsr_ox_def_out(m, ni, 0, A->elem, A->ndim, od)) < 0)
        return q;
    const int l = tsr_ox_host_lop(m, ni, H_CONCAT, m->vals[qa].base, q);
    if (l < 0)
        return l;
    m->lops[l].in2 = m->vals[qb].base;
    int64_t outer = 1;
    for (int i = 0; i < axis; i++)
        outer *= od[i];
    m->lops[l].geo[0] = outer;
    m->lops[l].geo[1] = outer ? (int64_t)m->vals[qa].nbytes / outer : 0;
    m->lops[l].geo[2] = outer ? (int64_t)m->vals[qb].nbytes / outer : 0;
    if (view) {
        const int y = tsr_ox_def_out(m, ni, 0, ET_FLOAT, A->ndim, od);
        if (y < 0)
            return y;
        int rc = tsr_ox_set_view(&m->vals[y], q, sc, zp);
        if (rc)
            return rc;
    }
    return 0;
}

/* Transpose that only relabels: the dimensions it moves are 1 except one, so
 * the bytes keep their order. Anything else moves data: refused. */
static int lower_transpose(tsr_onnx_t *m, int ni, int x)
{
    const ox_val_t X = m->vals[x];
    int64_t perm[MAXD], od[MAXD];
    const Onnx__AttributeProto *pa = attr(m->gp->node[ni], "perm");
    if (pa && pa->n_ints != (size_t)X.ndim)
        return NERR(m, ni, "perm has %zu entries for a %d-D input", pa->n_ints, X.ndim);
    int seen[MAXD] = {0};
    for (int i = 0; i < X.ndim; i++) {
        perm[i] = pa ? pa->ints[i] : X.ndim - 1 - i;
        if (perm[i] < 0 || perm[i] >= X.ndim || seen[perm[i]]++)
            return NERR(m, ni, "perm is not a permutation");
        od[i] = X.dims[perm[i]];
    }
    /* the order of the non-1 dimensions must be kept */
    int64_t last = -1;
    for (int i = 0; i < X.ndim; i++) {
        if (X.dims[perm[i]] == 1)
            continue;
        if (perm[i] < last)
            return NERR(m, ni, "it moves data (dimensions of size > 1 change order): only a Transpose that "
                        "relabels is supported");
        last = perm[i];
    }
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
