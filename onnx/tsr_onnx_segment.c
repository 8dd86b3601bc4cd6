/*
 * tsr_onnx_segment: device lops grouped into segments. Host lops that
 * have become device work are moved to the device first (a gate's Mul and
 * the Add after it, tsr_ox_promote_lop); zero points are agreed next (a
 * quantized value read by two device operators must mean the same to
 * both), then each longest run of consecutive device lops
 * with one input from outside and one tensor read outside becomes a
 * netdesc (a DAG: residual branches stay inside), later one tsr_graph.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_strsafe.h"

static int nd_tensor(tsr_onnx_t *m, ox_seg_t *s, int v)
{
    ox_val_t *x = &m->vals[v];
    if (x->seg_tensor >= 0)
        return x->seg_tensor;
    tsr_nd_tensor_t *nt = realloc(s->nd.tensors, sizeof *nt * (size_t)(s->nd.ntensors + 1));
    if (!nt)
        return tsr_err(TSR_ENOMEM, "out of memory");
    s->nd.tensors = nt;
    tsr_nd_tensor_t *t = &nt[s->nd.ntensors];
    memset(t, 0, sizeof *t);
    int64_t d[4] = {1, 1, 1, 1};
    if (x->ndim > MAXD || x->ndim < 1)
        return tsr_err(TSR_EINVAL, "%s: tensor \"%s\" has %d dimensions (the device takes 1..4)", m->path,
                       TSR_SAFE(x->name), x->ndim);
    for (int i = 0; i < x->ndim && i < 4; i++)
        d[i] = x->dims[i];
    if (x->ndim > 4) {
        /* a host result of more dimensions that a device operator reads
         * through a 4-D alias (ShuffleNet's channel shuffle: the host
         * transpose writes [N, C/g, g, H, W], the conv reads [N, C, H, W]):
         * the same contiguous bytes as [N, prod(middle), H, W]; a reader of
         * another 4-D shape fails the netdesc's shape check, naming it */
        d[1] = 1;
        for (int i = 1; i < x->ndim - 2; i++)
            d[1] *= x->dims[i];
        d[2] = x->dims[x->ndim - 2], d[3] = x->dims[x->ndim - 1];
    }
    t->n = (int)d[0], t->c = (int)d[1], t->h = (int)d[2], t->w = (int)d[3];
    qdtype(x->elem, &t->dtype);
    t->scale = 1;
    x->seg_tensor = s->nd.ntensors;
    return s->nd.ntensors++;
}

/* Zero points of quantized values: a conv fixes its input's and output's,
 * a host QuantizeLinear its output's, a max pool passes its input's on
 * (either way; padding never wins a max, so any zero point is exact). Two
 * conv readers with different input zero points would need a copy: refused. */
static int assign_zps(tsr_onnx_t *m)
{
    for (int i = 0; i < m->nlops; i++) {
        const ox_lop_t *L = &m->lops[i];
        int32_t zin = 0, zout = 0, fin = 0, fout = 0;
        if (L->side == SIDE_HOST && L->hkind == H_QUANT)
            zout = L->zp, fout = 1;
        if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_CONV)
            zin = L->nd.conv.x_zp, fin = 1, zout = L->nd.conv.y_zp, fout = 1;
        if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_DENSE)
            zin = L->nd.dense.x_zp, fin = 1, zout = L->nd.dense.y_zp, fout = 1;
        if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_GAVG)
            zin = L->nd.gavg.x_zp, fin = 1, zout = L->nd.gavg.y_zp, fout = 1;
        if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_ACT) /* the table maps any input zero point */
            zout = L->nd.act.y_zp, fout = 1;
        if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_SOFTMAX) /* (the values do not depend on x_zp) */
            zout = L->nd.softmax.y_zp, fout = 1;
        if (tsr_ox_is_bmm(L)) { /* B's zero point is the lop's own (its segment packs B itself) */
            zin = L->zpa[0], fin = 1, zout = L->yzp, fout = 1;
            ox_val_t *I2 = &m->vals[L->in2];
            if (I2->has_zp && I2->zp != L->zpb[0])
                return tsr_err(TSR_EINVAL, "%s: node \"%s\": input zero point %d, but \"%s\" has %d", m->path,
                               TSR_SAFE(nname(m, L->node)), L->zpb[0], TSR_SAFE(I2->name), I2->zp);
            I2->zp = L->zpb[0], I2->has_zp = 1;
        }
        if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_POOL && L->nd.pool.kind != TSR_POOL_MAX)
            zin = zout = L->nd.pool.zp, fin = fout = 1;
        if (L->side == SIDE_DEV && (L->nd.kind == TSR_ND_ADD || L->nd.kind == TSR_ND_MUL)) {
            const int add = L->nd.kind == TSR_ND_ADD;
            const int32_t z2 = add ? L->nd.add.b.zp : L->nd.mul.s.zp;
            zin = add ? L->nd.add.a.zp : L->nd.mul.x.zp, fin = 1;
            zout = add ? L->nd.add.y.zp : L->nd.mul.y.zp, fout = 1;
            ox_val_t *I2 = &m->vals[L->in2];
            if (I2->has_zp && I2->zp != z2)
                return tsr_err(TSR_EINVAL, "%s: node \"%s\": input zero point %d, but \"%s\" has %d", m->path,
                               TSR_SAFE(nname(m, L->node)), z2, TSR_SAFE(I2->name), I2->zp);
            I2->zp = z2, I2->has_zp = 1;
        }
        ox_val_t *I = L->in >= 0 ? &m->vals[L->in] : NULL, *O = &m->vals[L->out];
        if (fin && I) {
            if (I->has_zp && I->zp != zin)
                return tsr_err(TSR_EINVAL, "%s: node \"%s\": input zero point %d, but \"%s\" has %d", m->path,
                               TSR_SAFE(nname(m, L->node)), zin, TSR_SAFE(I->name), I->zp);
            I->zp = zin, I->has_zp = 1;
        }
        if (fout)
            O->zp = zout, O->has_zp = 1;
    }
    for (int pass = 0; pass < 4; pass++)
        for (int i = 0; i < m->nlops; i++) {
            const ox_lop_t *L = &m->lops[i];
            if (L->side != SIDE_DEV || L->nd.kind != TSR_ND_POOL || L->nd.pool.kind != TSR_POOL_MAX)
                continue;
            ox_val_t *I = &m->vals[L->in], *O = &m->vals[L->out];
            if (I->has_zp && !O->has_zp)
                O->zp = I->zp, O->has_zp = 1;
            else if (O->has_zp && !I->has_zp)
                I->zp = O->zp, I->has_zp = 1;
            else if (!I->has_zp && !O->has_zp)
                I->zp = O->zp = I->elem == ET_UINT8 ? 0 : -128, I->has_zp = O->has_zp = 1;
            else if (I->zp != O->zp)
                return tsr_err(TSR_EINVAL, "%s: node \"%s\": its input and output zero points differ", m->path,
                               TSR_SAFE(nname(m, L->node)));
        }
    return 0;
}

/* Lops [i, end) as one device graph: one external input (tensor 0 of the
 * netdesc) and at most one tensor read after it (or the graph output). */
static int seg_valid(const tsr_onnx_t *m, int i, int end, int *in_val, int *out_val)
{
    int nin = 0, nout = 0;
    *in_val = *out_val = -1;
    for (int k = i; k < end; k++) {
        const int ins[2] = {m->lops[k].in, m->lops[k].in2};
        for (int q = 0; q < 2; q++) {
            if (ins[q] < 0)
                continue;
            int inside = 0;
            for (int j = i; j < k && !inside; j++)
                inside = m->lops[j].out == ins[q];
            if (!inside && ins[q] != *in_val) {
                if (nin++)
                    return 0;
                *in_val = ins[q];
            }
        }
        const int o = m->lops[k].out;
        int read = o == m->vals[m->out_val].base;
        for (int j = end; j < m->nlops && !read; j++)
            read = m->lops[j].in == o || m->lops[j].in2 == o;
        if (read) {
            if (nout++)
                return 0;
            *out_val = o;
        }
    }
    if (!nout)
        *out_val = m->lops[end - 1].out;
    return nin == 1;
}

/* One more segment, zeroed and counted (m->nsegs - 1), so that tsr_onnx_free frees what a later failure
 * leaves in it; NULL when out of memory (the array unchanged). */
static ox_seg_t *new_segment(tsr_onnx_t *m)
{
    ox_seg_t *ns = realloc(m->segs, sizeof *ns * (size_t)(m->nsegs + 1));
    if (!ns)
        return NULL;
    m->segs = ns;
    ox_seg_t *s = &ns[m->nsegs++];
    memset(s, 0, sizeof *s);
    return s;
}

/* Lops [i, end) as segment m->nsegs: its netdesc (tensors numbered per
 * segment, zero points agreed by assign_zps), then validated. The segment
 * is counted before it is filled, so that tsr_onnx_free frees what a
 * failure leaves. */
static int emit_segment(tsr_onnx_t *m, int i, int end, int in_val, int out_val, int solo)
{
    ox_seg_t *s = new_segment(m);
    if (!s)
        return tsr_err(TSR_ENOMEM, "out of memory");
    const int si = m->nsegs - 1;
    for (int v = 0; v < m->nvals; v++)
        m->vals[v].seg_tensor = -1;
    s->in_val = in_val;
    s->out_val = out_val;
    s->first = i;
    s->last = end - 1;
    s->solo = solo && end - i == 1;
    s->nd.nodes = calloc((size_t)(end - i), sizeof *s->nd.nodes);
    if (!s->nd.nodes)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc;
    if ((rc = nd_tensor(m, s, in_val)) < 0)
        return rc;
    s->nd.tensors[rc].zp = m->vals[in_val].zp;
    for (int j = i; j < end; j++) {
        ox_lop_t *L = &m->lops[j];
        tsr_nd_node_t *nn = &s->nd.nodes[s->nd.nnodes];
        *nn = L->nd;
        int ti = nd_tensor(m, s, L->in), t2 = ti < 0 || L->in2 < 0 ? -1 : nd_tensor(m, s, L->in2);
        int to = ti < 0 ? ti : nd_tensor(m, s, L->out);
        if (ti < 0 || to < 0 || (L->in2 >= 0 && t2 < 0))
            return ti < 0 ? ti : to < 0 ? to : t2;
        nn->in[0] = ti;
        nn->in[1] = t2;
        nn->out = to;
        s->nd.tensors[ti].zp = m->vals[L->in].zp;
        if (t2 >= 0)
            s->nd.tensors[t2].zp = m->vals[L->in2].zp;
        s->nd.tensors[to].zp = m->vals[L->out].zp;
        if (L->nd.kind == TSR_ND_POOL)
            nn->pool.zp = m->vals[L->in].zp;
        if (L->nd.kind == TSR_ND_SOFTMAX)
            nn->softmax.x_zp = s->nd.tensors[ti].zp;
        if (L->nd.kind == TSR_ND_CONCAT)
            nn->concat.zp = s->nd.tensors[to].zp;
        if (L->nd.kind == TSR_ND_ACT) { /* the tensors as the segment has them (bytes to bytes: any will do) */
            const tsr_nd_tensor_t *X = &s->nd.tensors[ti];
            nn->act.n = X->n, nn->act.c = X->c, nn->act.h = X->h, nn->act.w = X->w;
            nn->act.x_zp = X->zp;
            nn->act.y_zp = s->nd.tensors[to].zp;
        }
        L->seg = si;
        s->nd.nnodes++;
    }
    s->nd.output = m->vals[out_val].seg_tensor;
    snprintf(s->nd.name, sizeof s->nd.name, "segment%d", si);
    if ((rc = tsr_netdesc_validate(&s->nd)))
        return tsr_err_prefix(rc, "%s: device segment %d: ", m->path, si);
    return 0;
}

/* Lop i, a matmul of two activations, as segment m->nsegs of its own (no
 * netdesc: jit/tsr_bmm.h runs it, planned by prepare). */
static int emit_bmm_segment(tsr_onnx_t *m, int i)
{
    ox_seg_t *s = new_segment(m);
    if (!s)
        return tsr_err(TSR_ENOMEM, "out of memory");
    const int si = m->nsegs - 1;
    s->in_val = m->lops[i].in;
    s->out_val = m->lops[i].out;
    s->first = s->last = i;
    s->bmm = 1;
    snprintf(s->nd.name, sizeof s->nd.name, "segment%d", si);
    m->lops[i].seg = si;
    return 0;
}

void tsr_ox_free_segments(tsr_onnx_t *m)
{
    for (int i = 0; i < m->nsegs; i++) {
        if (m->segs[i].bp) {
            tsr_bmm_plan_free(m->dev, m->segs[i].bp);
            free(m->segs[i].bp);
        }
        tsr_graph_free(m->segs[i].g);
        free(m->segs[i].nd.nodes);
        free(m->segs[i].nd.tensors);
    }
    free(m->segs);
    m->segs = NULL;
    m->nsegs = 0;
    for (int i = 0; i < m->nlops; i++)
        m->lops[i].seg = -1;
    for (int v = 0; v < m->nvals; v++)
        m->vals[v].zp = 0, m->vals[v].has_zp = 0;
}

int tsr_ox_build_segments(tsr_onnx_t *m)
{
    /* host lops whose operands are device work now (a squeeze-and-excite Mul once its gate's activation
       tables are device lops, then the residual Add after it): device lops, in order, so that each
       promotion can enable the next */
    for (int i = 0; i < m->nlops; i++) {
        tsr_ox_promote_lop(m, i);
        tsr_ox_concat_place(m, i); /* (a Concat's chain: views on the device for the target, ops/tsr_ox_concat.c) */
    }
    int rc = assign_zps(m);
    if (!rc)
        rc = tsr_ox_concat_zps(m);
    if (rc)
        return rc;
    for (int i = 0; i < m->nlops;) {
        if (m->lops[i].side != SIDE_DEV) {
            i++;
            continue;
        }
        if (tsr_ox_is_bmm(&m->lops[i])) {
            if ((rc = emit_bmm_segment(m, i)))
                return rc;
            i++;
            continue;
        }
        /* the longest run of device operators that is a valid device graph; a conv whose weights need
           int8 parts runs alone (device tensors hold one copy of its input) */
        int e = i, solo = 0;
        while (e < m->nlops && tsr_ox_in_graph(&m->lops[e])) {
            const int split = m->lops[e].nd.kind == TSR_ND_CONV && tsr_conv2d_input_copies(&m->lops[e].nd.conv) > 1;
            if (split && e > i)
                break;
            e++;
            if (split) {
                solo = 1;
                break;
            }
        }
        int end = e, in_val = -1, out_val = -1;
        while (end > i && !seg_valid(m, i, end, &in_val, &out_val))
            end--;
        if (end == i && tsr_ox_concat_demote(m, i))
            continue; /* a device concat whose inputs come from two segments: the host copy after all */
        if (end == i)
            return tsr_err(TSR_EINVAL, "%s: node \"%s\" (%s): its inputs come from two places outside the device "
                           "(a device graph takes one input): not supported yet", m->path,
                           TSR_SAFE(nname(m, m->lops[i].node)), TSR_SAFE(m->gp->node[m->lops[i].node]->op_type));
        if ((rc = emit_segment(m, i, end, in_val, out_val, solo)))
            return rc;
        i = end;
    }
    return 0;
}
