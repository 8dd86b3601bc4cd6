/*
 * tsr_ox_fold: the nodes of shape subgraphs that are constants at import
 * because every shape is known there (a model is imported for one batch
 * size): Shape, Size, Range of constants and Concat of constants (any
 * number of inputs; a Concat of computed tensors goes on to
 * ops/tsr_ox_shape.c, but for two float inputs of another rank than 4 with
 * their own parameters, concatenated as floats on the host). The int64 arithmetic between them (Gather, Mul,
 * Div, Equal, Where, Slice, Unsqueeze, ...) folds in ops/tsr_ox_math.c,
 * whose handlers run their kernel at import when all inputs are constants.
 * Sizes are bounded before anything is allocated.
 */
#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"

#define FOLD_MAX (1 << 20) /* elements a folded node may produce */

/* A new constant output k of node ni (zeroed bytes). */
static int const_out(tsr_onnx_t *m, int ni, int elem, int nd, const int64_t *d)
{
    const int y = tsr_ox_def_out(m, ni, 0, elem, nd, d);
    if (y < 0)
        return y;
    if (numel(&m->vals[y]) > FOLD_MAX)
        return NERR(m, ni, "%lld elements: at most %d are folded at import", (long long)numel(&m->vals[y]), FOLD_MAX);
    if (!(m->vals[y].cdata = calloc(1, m->vals[y].nbytes ? m->vals[y].nbytes : 1)))
        return tsr_err(TSR_ENOMEM, "out of memory");
    m->placed[ni] = OX_CONST;
    return y;
}

/* Shape (start/end since opset 15) and Size (arg 1) of any input: its shape is known. */
int tsr_ox_shape_of(tsr_onnx_t *m, int ni, int size)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    if (x < 0)
        return NERR(m, ni, "input missing");
    const ox_val_t X = m->vals[x];
    if (size) {
        const int y = const_out(m, ni, ET_INT64, 0, NULL);
        if (y < 0)
            return y;
        const int64_t c = numel(&X);
        memcpy(m->vals[y].cdata, &c, 8);
        return 0;
    }
    int64_t s = attr_i(n, "start", 0), e = attr_i(n, "end", X.ndim);
    s = s < 0 ? s + X.ndim : s, e = e < 0 ? e + X.ndim : e;
    s = s < 0 ? 0 : s > X.ndim ? X.ndim : s, e = e < 0 ? 0 : e > X.ndim ? X.ndim : e;
    const int64_t cnt = e > s ? e - s : 0;
    const int y = const_out(m, ni, ET_INT64, 1, &cnt);
    if (y < 0)
        return y;
    memcpy(m->vals[y].cdata, X.dims + s, (size_t)cnt * 8);
    return 0;
}

/* Range(start, limit, delta) of constant scalars: max(ceil((limit - start) / delta), 0) elements. */
int tsr_ox_range(tsr_onnx_t *m, int ni, int arg)
{
    (void)arg;
    int v[3];
    for (int k = 0; k < 3; k++) {
        v[k] = tsr_ox_in_val(m, ni, (size_t)k);
        if (v[k] < 0 || !m->vals[v[k]].cdata || numel(&m->vals[v[k]]) != 1)
            return NERR(m, ni, "start, limit and delta must be constant scalars (the count decides the shape)");
        if (m->vals[v[k]].elem != m->vals[v[0]].elem)
            return NERR(m, ni, "start, limit and delta differ in type");
    }
    const int e = m->vals[v[0]].elem;
    if (e != ET_INT64 && e != ET_INT32 && e != ET_FLOAT)
        return NERR(m, ni, "type %s is not supported (float, int64, int32)", ename(e));
    double f[3];
    int64_t i[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
        if (e == ET_FLOAT)
            f[k] = cget_f(&m->vals[v[k]], 0);
        else {
            if (e == ET_INT64)
                memcpy(&i[k], m->vals[v[k]].cdata, 8);
            else
                i[k] = cget_i(&m->vals[v[k]], 0);
            f[k] = (double)i[k];
        }
    }
    if (f[2] == 0 || f[2] != f[2])
        return NERR(m, ni, "delta is 0");
    /* the count in double first: bounded before it becomes an integer or an allocation */
    const double c = ceil((f[1] - f[0]) / f[2]);
    if (!(c <= FOLD_MAX))
        return NERR(m, ni, "%g elements: at most %d are folded at import", c, FOLD_MAX);
    int64_t cnt = c > 0 ? (int64_t)c : 0;
    if (e != ET_FLOAT) { /* exact for integers */
        const int64_t span = i[1] - i[0];
        cnt = (span > 0) == (i[2] > 0) && span ? (span + i[2] - (i[2] > 0 ? 1 : -1)) / i[2] : 0;
    }
    const int y = const_out(m, ni, e, 1, &cnt);
    if (y < 0)
        return y;
    for (int64_t k = 0; k < cnt; k++) {
        if (e == ET_FLOAT) {
            const float r = (float)(f[0] + (double)k * f[2]);
            memcpy(m->vals[y].cdata + 4 * k, &r, 4);
        } else if (e == ET_INT64) {
            const int64_t r = i[0] + k * i[2];
            memcpy(m->vals[y].cdata + 8 * k, &r, 8);
        } else {
            const int32_t r = (int32_t)(i[0] + k * i[2]);
            memcpy(m->vals[y].cdata + 4 * k, &r, 4);
        }
    }
    return 0;
}

/* Two float inputs, not 4-D, at least one a constant or a DequantizeLinear view, and not two views
 * of one scale and zero point (whose bytes concatenate as they are): the host concatenates the real
 * values (a ViT's class token before its patches: the device's requantization needs 4-D tensors). */
static int float_concat(const tsr_onnx_t *m, int ni)
{
    const int a = tsr_ox_in_val((tsr_onnx_t *)m, ni, 0), b = tsr_ox_in_val((tsr_onnx_t *)m, ni, 1);
    if (a < 0 || b < 0)
        return 0;
    const ox_val_t *A = &m->vals[a], *B = &m->vals[b];
    if (A->elem != ET_FLOAT || B->elem != ET_FLOAT || A->ndim == 4 || A->ndim != B->ndim)
        return 0;
    if (A->view_of >= 0 && B->view_of >= 0 && !A->cdata && !B->cdata && A->vcount == 1 && B->vcount == 1 &&
        A->vscale[0] == B->vscale[0] && A->vzp[0] == B->vzp[0])
        return 0;
    return A->cdata || B->cdata || A->view_of >= 0 || B->view_of >= 0;
}

static int host_float_concat(tsr_onnx_t *m, int ni)
{
    const int a = tsr_ox_in_val(m, ni, 0), b = tsr_ox_in_val(m, ni, 1);
    int rc;
    if ((rc = tsr_ox_need_real(m, ni, a)) || (rc = tsr_ox_need_real(m, ni, b)))
        return rc;
    const ox_val_t A = m->vals[a], B = m->vals[b];
    const int axis = (int)(attr_i(m->gp->node[ni], "axis", 0) < 0 ? attr_i(m->gp->node[ni], "axis", 0) + A.ndim
                                                                   : attr_i(m->gp->node[ni], "axis", 0));
    if (axis < 0 || axis >= A.ndim)
        return NERR(m, ni, "axis out of range");
    int64_t d[MAXD];
    for (int i = 0; i < A.ndim; i++) {
        if (i != axis && A.dims[i] != B.dims[i])
            return NERR(m, ni, "dimension %d differs (%lld and %lld)", i, (long long)A.dims[i], (long long)B.dims[i]);
        d[i] = i == axis ? A.dims[i] + B.dims[i] : A.dims[i];
    }
    const int y = tsr_ox_def_out(m, ni, 0, ET_FLOAT, A.ndim, d);
    if (y < 0)
        return y;
    const int l = tsr_ox_host_lop(m, ni, H_CONCAT, A.base, y);
    if (l < 0)
        return l;
    int64_t outer = 1;
    for (int i = 0; i < axis; i++)
        outer *= d[i];
    m->lops[l].in2 = B.base;
    m->lops[l].geo[0] = outer;
    m->lops[l].geo[1] = outer ? (int64_t)A.nbytes / outer : 0;
    m->lops[l].geo[2] = outer ? (int64_t)B.nbytes / outer : 0;
    return 0;
}

/* Concat: of constants (the shape vectors of a shape subgraph, any count) folded here; otherwise
 * ops/tsr_ox_shape.c's Concat. */
int tsr_ox_concat_fold(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    int all = n->n_input > 0;
    for (size_t k = 0; k < n->n_input && all; k++) {
        const int v = tsr_ox_in_val(m, ni, k);
        all = v >= 0 && m->vals[v].cdata && m->vals[v].view_of < 0;
    }
    if (!all && n->n_input == 2 && float_concat(m, ni))
        return host_float_concat(m, ni);
    if (!all)
        return tsr_ox_concat(m, ni, arg);
    const ox_val_t *A = &m->vals[tsr_ox_in_val(m, ni, 0)];
    const int axis0 = (int)attr_i(n, "axis", 0), r = A->ndim;
    const int axis = axis0 < 0 ? axis0 + r : axis0;
    if (axis < 0 || axis >= r)
        return NERR(m, ni, "axis out of range");
    int64_t d[MAXD];
    memcpy(d, A->dims, sizeof d);
    d[axis] = 0;
    for (size_t k = 0; k < n->n_input; k++) {
        const ox_val_t *B = &m->vals[tsr_ox_in_val(m, ni, k)];
        if (B->elem != A->elem || B->ndim != r)
            return NERR(m, ni, "inputs differ in type or rank");
        for (int i = 0; i < r; i++)
            if (i != axis && B->dims[i] != A->dims[i])
                return NERR(m, ni, "dimension %d differs", i);
        if ((d[axis] += B->dims[axis]) > FOLD_MAX)
            return NERR(m, ni, "more than %d elements: not folded at import", FOLD_MAX);
    }
    const int elem = A->elem;
    const int y = const_out(m, ni, elem, r, d);
    if (y < 0)
        return y;
    int64_t outer = 1;
    for (int i = 0; i < axis; i++)
        outer *= d[i];
    size_t pos = 0;
    for (int64_t o = 0; o < outer; o++)
        for (size_t k = 0; k < n->n_input; k++) {
            const ox_val_t *B = &m->vals[tsr_ox_in_val(m, ni, k)];
            const size_t chunk = outer ? B->nbytes / (size_t)outer : 0;
            memcpy(m->vals[y].cdata + pos, B->cdata + (size_t)o * chunk, chunk);
            pos += chunk;
        }
    return 0;
}
