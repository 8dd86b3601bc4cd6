/*
 * tsr_onnx_qdq: QDQ group selection, a pass of its own before lowering
 * (as ONNX Runtime's QDQ selectors run before its op builders). A QDQ
 * model writes a quantized operator as DequantizeLinear inputs -> float
 * op -> [Relu | Clip] -> QuantizeLinear. The input side needs no
 * selection: a DequantizeLinear output is a float view of its quantized
 * value (tsr_onnx_val.c), which the handler reads. The output side is
 * selected here: for every target node (an op registered with the
 * OX_QDQ_OUT flag, tsr_onnx_ops.c), the walk down its float output over
 * sole consumers. The handler then takes the group: reads the members'
 * parameters (tsr_ox_qdq_output), defines the QuantizeLinear's output as
 * its own, and marks the members folded (tsr_ox_qdq_fold).
 * Why the walk records a broken pattern instead of refusing it: a target
 * may still fail for another reason first (its inputs, its geometry), and
 * the error a user sees must be the first one lowering meets.
 */
#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_onnx_ops.h"
#include "tsr_strsafe.h"

/* Quantization parameter vi of QuantizeLinear node c (1 scale, 2 zero point) as constant bytes:
 * its element type and first 4 bytes, or 0 when it is absent or not a constant scalar. */
static int qparam(tsr_onnx_t *m, int c, size_t k, int *elem, uint8_t b[4])
{
    const int v = (int)k < (int)m->gp->node[c]->n_input ? tsr_ox_in_val(m, c, k) : -1;
    if (v < 0 || !m->vals[v].cdata || numel(&m->vals[v]) != 1)
        return 0;
    *elem = m->vals[v].elem;
    memset(b, 0, 4);
    memcpy(b, m->vals[v].cdata, m->vals[v].elem == ET_UINT8 || m->vals[v].elem == ET_INT8 ? 1 : 4);
    return 1;
}

/* The int8-symmetric QDQ form keeps a Relu/Clip between Q/DQ pairs: node -> Q -> DQ -> Relu|Clip -> Q,
 * both QuantizeLinears with the same scale and zero point (quantize_static gives the activation's
 * input its output's range). Then the Relu/Clip is exactly a clamp of the first Q's integers (on
 * one grid, DQ -> max/min -> Q returns the same integers, the bounds rounded as Q rounds them), so
 * the group is node -> [clamp] -> Q with the members q0, dq0 folded too: one device op, and a
 * residual Add after it reads a device tensor. Different parameters keep the plain group. */
static void kept_act(tsr_onnx_t *m, ox_qdq_sel_t *s)
{
    const int d = tsr_ox_sole_consumer(m, m->gp->node[s->q]->output[0]);
    if (d < 0 || strcmp(m->gp->node[d]->op_type, "DequantizeLinear"))
        return;
    const int a = tsr_ox_sole_consumer(m, m->gp->node[d]->output[0]);
    if (a < 0 || (strcmp(m->gp->node[a]->op_type, "Relu") && strcmp(m->gp->node[a]->op_type, "Clip")))
        return;
    const int q2 = tsr_ox_sole_consumer(m, m->gp->node[a]->output[0]);
    if (q2 < 0 || strcmp(m->gp->node[q2]->op_type, "QuantizeLinear"))
        return;
    /* DQ's parameters are Q's (a view of the same grid), and Q2's too */
    for (size_t k = 1; k <= 2; k++) {
        int e0, e1, e2;
        uint8_t b0[4], b1[4], b2[4];
        const int h0 = qparam(m, s->q, k, &e0, b0), h1 = qparam(m, d, k, &e1, b1), h2 = qparam(m, q2, k, &e2, b2);
        if (k == 1 && !(h0 && h1 && h2))
            return;
        if (h0 != h1 || h0 != h2 || (h0 && (e0 != e1 || e0 != e2 || memcmp(b0, b1, 4) || memcmp(b0, b2, 4))))
            return;
    }
    s->q0 = s->q;
    s->dq0 = d;
    s->act = a;
    s->q = q2;
}

/* The walk from target node ni: at most one Relu or Clip, then a QuantizeLinear. */
static void select_group(tsr_onnx_t *m, int ni, ox_qdq_sel_t *s)
{
    const char *cur = m->gp->node[ni]->output[0];
    s->act = s->q = s->stop_node = s->q0 = s->dq0 = -1;
    for (int step = 0; step < 2; step++) {
        const int c = tsr_ox_sole_consumer(m, cur);
        s->stop_step = step;
        if (c < 0) {
            s->status = OX_SEL_NOT_SOLE;
            return;
        }
        const Onnx__NodeProto *cn = m->gp->node[c];
        if (!strcmp(cn->op_type, "QuantizeLinear")) {
            s->q = c;
            s->status = OX_SEL_OK;
            if (step == 0)
                kept_act(m, s);
            return;
        }
        if (step > 0 || (strcmp(cn->op_type, "Relu") && strcmp(cn->op_type, "Clip"))) {
            s->status = OX_SEL_BAD_OP;
            s->stop_node = c;
            return;
        }
        s->act = c;
        cur = cn->output[0];
    }
}

int tsr_ox_qdq_select(tsr_onnx_t *m)
{
    const size_t nn = m->gp->n_node;
    m->qsel = calloc(nn + 1, sizeof *m->qsel);
    if (!m->qsel)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (size_t i = 0; i < nn; i++) {
        const ox_op_t *op = tsr_ox_op_find(m, (int)i, NULL);
        if (op && (op->flags & OX_QDQ_OUT))
            select_group(m, (int)i, &m->qsel[i]);
    }
    return 0;
}

/* The error of a walk that stopped at step: the messages a lookahead gave. */
static int broken(tsr_onnx_t *m, int ni, const ox_qdq_sel_t *s)
{
    const char *op = TSR_SAFE(m->gp->node[ni]->op_type);
    if (s->status == OX_SEL_NOT_SOLE)
        return NERR(m, ni, "a float %s is only supported when its single consumer is a QuantizeLinear "
                    "(possibly after one Relu/Clip): the host has no float %s", op, op);
    return NERR(m, ni, "its float output feeds %s \"%s\": only Relu/Clip then QuantizeLinear can follow",
                TSR_SAFE(m->gp->node[s->stop_node]->op_type), TSR_SAFE(nname(m, s->stop_node)));
}

/* The Clip's bounds (opset >= 11: inputs min and max, each optional). */
static int clip_bounds(tsr_onnx_t *m, int c, ox_qout_t *o)
{
    const Onnx__NodeProto *cn = m->gp->node[c];
    double lo = -INFINITY, hi = INFINITY;
    const int vlo = tsr_ox_in_val(m, c, 1), vhi = tsr_ox_in_val(m, c, 2);
    int rc = 0;
    if (attr(cn, "min") || attr(cn, "max"))
        return NERR(m, c, "Clip with min/max attributes (opset < 11) is not supported: give them as inputs");
    if (vlo >= 0)
        rc = tsr_ox_const_scalar(m, c, vlo, "min", &lo);
    if (!rc && vhi >= 0)
        rc = tsr_ox_const_scalar(m, c, vhi, "max", &hi);
    if (rc)
        return rc;
    o->has_clip = 1;
    o->clip_lo = (float)lo;
    o->clip_hi = (float)hi;
    return 0;
}

/* Node ni's selected group as an output quantization (members in walk
 * order: the Relu/Clip, then the QuantizeLinear). Returns the
 * QuantizeLinear node (its output becomes ni's) or a negative error. */
int tsr_ox_qdq_output(tsr_onnx_t *m, int ni, ox_qout_t *o)
{
    const ox_qdq_sel_t *s = &m->qsel[ni];
    memset(o, 0, sizeof *o);
    if (s->status == OX_SEL_NONE)
        return tsr_err(TSR_EINVAL, "%s: node \"%s\": no QDQ group was selected", m->path, TSR_SAFE(nname(m, ni)));
    if (s->status != OX_SEL_OK && s->stop_step == 0)
        return broken(m, ni, s);
    int rc = 0;
    if (s->act >= 0 && !strcmp(m->gp->node[s->act]->op_type, "Relu"))
        o->relu = 1;
    else if (s->act >= 0 && (rc = clip_bounds(m, s->act, o)))
        return rc;
    if (s->status != OX_SEL_OK)
        return broken(m, ni, s);
    const int c = s->q, vz = tsr_ox_in_val(m, c, 2);
    double sc, z = 0;
    rc = tsr_ox_const_scalar(m, c, tsr_ox_in_val(m, c, 1), "y_scale", &sc);
    if (!rc && vz >= 0)
        rc = tsr_ox_const_scalar(m, c, vz, "y_zero_point", &z);
    if (rc)
        return rc;
    o->scale = (float)sc;
    o->zp = (int32_t)z;
    o->elem = vz >= 0 ? m->vals[vz].elem : ET_UINT8;
    return c;
}

/* After ni's lop is made (the last one): its group's members are part of it. */
void tsr_ox_qdq_fold(tsr_onnx_t *m, int ni)
{
    const int members[4] = {m->qsel[ni].act, m->qsel[ni].q, m->qsel[ni].q0, m->qsel[ni].dq0};
    for (int i = 0; i < 4; i++)
        if (members[i] >= 0) {
            m->placed[members[i]] = OX_FOLDED;
            m->node_lop[members[i]] = m->nlops - 1;
        }
}
