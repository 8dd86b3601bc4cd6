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

/* The walk from target node ni: at most one Relu or Clip, then a QuantizeLinear. */
static void select_group(const tsr_onnx_t *m, int ni, ox_qdq_sel_t *s)
{
    const char *cur = m->gp->node[ni]->output[0];
    s->act = s->q = s->stop_node = -1;
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
    const int members[2] = {m->qsel[ni].act, m->qsel[ni].q};
    for (int i = 0; i < 2; i++)
        if (members[i] >= 0) {
            m->placed[members[i]] = OX_FOLDED;
            m->node_lop[members[i]] = m->nlops - 1;
        }
}
