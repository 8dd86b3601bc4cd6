/*
 * tsr_ox_float: float operators the host runs (tsr_onnx_host.c): Relu,
 * Softmax (before opset 13 over the last axis only: it flattened from its
 * axis then) and ArgMax (keepdims; select_last_index refused).
 */
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"

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
    if ((rc = tsr_ox_need_real(m, ni, x)))
        return rc;
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
    int v = tsr_ox_def_out(m, ni, 0, hk == H_ARGMAX ? ET_INT64 : ET_FLOAT, nd, d);
    if (v < 0)
        return v;
    int l = tsr_ox_host_lop(m, ni, hk, X.base, v);
    if (l < 0)
        return l;
    m->lops[l].axis = (int)axis;
    return 0;
}
