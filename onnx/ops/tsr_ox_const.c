/*
 * tsr_ox_const: nodes folded into constants at import: Constant, Cast (and
 * Identity) of a constant, ConstantOfShape. Identity and a Cast to the
 * same type of a computed value only relabel it (an alias).
 */
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"
#include "tsr_strsafe.h"

/* Constant: its tensor 'value' becomes the output's bytes. */
int tsr_ox_constant(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    (void)arg;
    const Onnx__AttributeProto *a = attr(n, "value");
    if (!a || !a->t || n->n_output != 1)
        return NERR(m, ni, "only a tensor 'value' attribute is supported");
    int v = tsr_ox_new_val(m, n->output[0]);
    if (v < 0)
        return v;
    m->placed[ni] = OX_CONST;
    return tsr_ox_load_tensor(m->path, n->output[0], a->t, &m->vals[v]);
}

/* Identity and Cast: an alias when the type stays, else a constant converted here. */
int tsr_ox_cast(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    (void)arg;
    if (x < 0)
        return NERR(m, ni, "input missing");
    const ox_val_t X = m->vals[x];
    int to = !strcmp(n->op_type, "Cast") ? (int)attr_i(n, "to", 0) : X.elem;
    if (to == X.elem)
        return tsr_ox_def_alias(m, ni, x, X.ndim, X.dims) < 0 ? -1 : 0;
    if (X.cdata && esize(to) && X.view_of < 0) { /* fold */
        int v = tsr_ox_def_out(m, ni, 0, to, X.ndim, X.dims);
        if (v < 0)
            return v;
        ox_val_t *y = &m->vals[v];
        y->cdata = calloc(1, y->nbytes ? y->nbytes : 1);
        if (!y->cdata)
            return tsr_err(TSR_ENOMEM, "out of memory");
        for (int64_t i = 0; i < numel(y); i++) {
            /* integers go through int64 (an int64 constant must not be cut to int32 first) and
               wrap into narrower types like numpy's astype; a float must truncate to a value
               int64 holds (converting NaN or a value outside it is undefined in C) */
            int64_t q = 0;
            float f;
            if (X.elem == ET_FLOAT) {
                f = cget_f(&X, i);
                if (to != ET_FLOAT && !(f > -0x1p63f && f < 0x1p63f))
                    return NERR(m, ni, "Cast of element %lld (%g) to %s: out of range", (long long)i,
                                (double)f, ename(to));
                if (to != ET_FLOAT)
                    q = (int64_t)f;
            } else {
                if (X.elem == ET_INT64)
                    memcpy(&q, X.cdata + 8 * i, 8);
                else
                    q = cget_i(&X, i);
                f = (float)q;
            }
            switch (to) {
            case ET_FLOAT: memcpy(y->cdata + 4 * i, &f, 4); break;
            case ET_UINT8: y->cdata[i] = (uint8_t)q; break;
            case ET_INT8: y->cdata[i] = (uint8_t)q; break;
            case ET_INT32: { int32_t w = (int32_t)(uint32_t)q; memcpy(y->cdata + 4 * i, &w, 4); break; }
            default: memcpy(y->cdata + 8 * i, &q, 8); break;
            }
        }
        m->placed[ni] = OX_CONST;
        return 0;
    }
    return NERR(m, ni, "Cast from %s to %s of a computed tensor is not supported", ename(X.elem), ename(to));
}

/* ConstantOfShape of a constant shape, expanded (at most 2^20 elements). */
int tsr_ox_constant_of_shape(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    int rc;
    (void)arg;
    if (x < 0 || !m->vals[x].cdata || m->vals[x].elem != ET_INT64 || m->vals[x].ndim != 1 || numel(&m->vals[x]) > MAXD)
        return NERR(m, ni, "the shape must be a 1-D int64 constant");
    int64_t d[MAXD];
    for (int64_t i = 0; i < numel(&m->vals[x]); i++)
        memcpy(&d[i], m->vals[x].cdata + 8 * i, 8);
    const Onnx__AttributeProto *a = attr(n, "value");
    ox_val_t fill;
    memset(&fill, 0, sizeof fill);
    if (a && a->t && (rc = tsr_ox_load_tensor(m->path, "value", a->t, &fill)))
        return rc;
    if (a && a->t && numel(&fill) != 1) {
        free(fill.cdata);
        return NERR(m, ni, "value must have one element");
    }
    int64_t cnt = 1;
    for (int64_t i = 0; i < numel(&m->vals[x]); i++)
        if (d[i] < 0 || (cnt *= d[i]) > (1 << 20)) {
            free(fill.cdata);
            return NERR(m, ni, "more than %d elements or a negative dimension (a constant this large is not "
                        "expanded at import)", 1 << 20);
        }
    int v = tsr_ox_def_out(m, ni, 0, a && a->t ? fill.elem : ET_FLOAT, (int)numel(&m->vals[x]), d);
    if (v < 0) {
        free(fill.cdata);
        return v;
    }
    ox_val_t *y = &m->vals[v];
    y->cdata = calloc(1, y->nbytes ? y->nbytes : 1);
    if (!y->cdata) {
        free(fill.cdata);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    const size_t es = esize(y->elem);
    if (fill.cdata)
        for (int64_t i = 0; i < numel(y); i++)
            memcpy(y->cdata + (size_t)i * es, fill.cdata, es);
    free(fill.cdata);
    m->placed[ni] = OX_CONST;
    return 0;
}
