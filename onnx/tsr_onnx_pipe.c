/* tsr_onnx_pipe: an imported model as the pipeline's network (tsr_onnx_pipe.h). */
#include "tsr_onnx_pipe.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_strsafe.h"

struct tsr_onnx_pipe {
    tsr_onnx_t *m;
    tsr_netdesc_t nd;     /* merged: tensors owned, nodes copied shallow (arrays point into the lops') */
    int first, last;      /* lop range of the device operators */
};

static const char *lop_name(const tsr_onnx_t *m, const ox_lop_t *L)
{
    return L->node >= 0 && (size_t)L->node < m->gp->n_node && m->gp->node[L->node]->name ? m->gp->node[L->node]->name
                                                                                         : "?";
}

int tsr_onnx_pipe_open(tsr_onnx_t *m, const tsr_config_t *cfg, tsr_onnx_pipe_t **out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "pipeline: NULL result");
    *out = NULL;
    if (!m || !cfg)
        return tsr_err(TSR_EINVAL, "pipeline: NULL model or config");
    int rc = tsr_onnx_set_target(m, cfg);
    if (rc)
        return rc;
    if (!m->nsegs)
        return tsr_err(TSR_EINVAL, "%s: no device operator: nothing to pipeline over devices", m->path);
    for (int s = 0; s < m->nsegs; s++)
        if (m->segs[s].solo)
            return tsr_err(TSR_EINVAL, "%s: device segment %d is a conv that runs alone (int8 weight parts): the "
                                       "pipeline does not run it", m->path, s);
    for (int s = 0; s + 1 < m->nsegs; s++) {
        const ox_seg_t *a = &m->segs[s], *b = &m->segs[s + 1];
        for (int i = a->last + 1; i < b->first; i++)
            if (m->lops[i].side == SIDE_HOST)
                return tsr_err(TSR_EINVAL, "%s: host operator \"%s\" (%s) runs between device segments %d and %d: the "
                                           "pipeline runs one chain of device operators",
                               m->path, TSR_SAFE(lop_name(m, &m->lops[i])), tsr_ox_host_name(m->lops[i].hkind), s, s + 1);
        if (m->vals[b->in_val].base != m->vals[a->out_val].base)
            return tsr_err(TSR_EINVAL, "%s: device segment %d does not read segment %d's output: the pipeline runs one "
                                       "chain of device operators", m->path, s + 1, s);
    }
    tsr_onnx_pipe_t *p = calloc(1, sizeof *p);
    if (!p)
        return tsr_err(TSR_ENOMEM, "out of memory");
    p->m = m;
    p->first = m->segs[0].first;
    p->last = m->segs[m->nsegs - 1].last;
    /* the merged description: segment s's tensor 0 (its input) is segment s-1's output */
    int nt = 0, nn = 0;
    for (int s = 0; s < m->nsegs; s++)
        nt += m->segs[s].nd.ntensors - (s ? 1 : 0), nn += m->segs[s].nd.nnodes;
    p->nd.tensors = calloc((size_t)nt, sizeof *p->nd.tensors);
    p->nd.nodes = calloc((size_t)nn, sizeof *p->nd.nodes);
    if (!p->nd.tensors || !p->nd.nodes) {
        tsr_onnx_pipe_free(p);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    int prev_out = -1;
    for (int s = 0; s < m->nsegs; s++) {
        const tsr_netdesc_t *sd = &m->segs[s].nd;
        int base = p->nd.ntensors - (s ? 1 : 0); /* local t >= 1 -> base + t */
        for (int t = s ? 1 : 0; t < sd->ntensors; t++)
            p->nd.tensors[p->nd.ntensors++] = sd->tensors[t];
        if (s && (sd->tensors[0].zp != p->nd.tensors[prev_out].zp ||
                  sd->tensors[0].dtype != p->nd.tensors[prev_out].dtype)) {
            tsr_onnx_pipe_free(p);
            return tsr_err(TSR_EINVAL, "%s: device segment %d reads segment %d's output with another zero point or "
                                       "type: the pipeline cannot join them", m->path, s, s - 1);
        }
        for (int j = 0; j < sd->nnodes; j++) {
            tsr_nd_node_t nd = sd->nodes[j];
            for (int k = 0; k < 2; k++)
                if (nd.in[k] >= 0)
                    nd.in[k] = nd.in[k] == 0 ? (s ? prev_out : 0) : base + nd.in[k];
            nd.out = base + nd.out;
            p->nd.nodes[p->nd.nnodes++] = nd;
        }
        prev_out = sd->output == 0 ? (s ? prev_out : 0) : base + sd->output;
    }
    p->nd.output = prev_out;
    snprintf(p->nd.name, sizeof p->nd.name, "onnx");
    if ((rc = tsr_netdesc_validate(&p->nd))) {
        tsr_onnx_pipe_free(p);
        return tsr_err_prefix(rc, "%s: the device segments merged into one network: ", m->path);
    }
    /* run-time bytes of every computed value (as tsr_onnx_prepare gives them) */
    for (int i = 0; i < m->nvals; i++) {
        ox_val_t *x = &m->vals[i];
        if (x->base != i || x->cdata || !x->defined)
            continue;
        free(x->rt);
        if (!(x->rt = calloc(1, x->nbytes ? x->nbytes : 1))) {
            tsr_onnx_pipe_free(p);
            return tsr_err(TSR_ENOMEM, "out of memory");
        }
    }
    *out = p;
    return TSR_OK;
}

void tsr_onnx_pipe_free(tsr_onnx_pipe_t *p)
{
    if (!p)
        return;
    free(p->nd.tensors);
    free(p->nd.nodes);
    free(p);
}

const tsr_netdesc_t *tsr_onnx_pipe_net(const tsr_onnx_pipe_t *p) { return p ? &p->nd : NULL; }

int tsr_onnx_pipe_before(tsr_onnx_pipe_t *p, const tsr_tensor_t *in, void *net_in)
{
    tsr_onnx_t *m = p->m;
    const ox_val_t *X = &m->vals[m->in_val];
    const int want = X->elem == ET_FLOAT ? TSR_DT_FLOAT32 : X->elem == ET_UINT8 ? TSR_DT_UINT8
                   : X->elem == ET_INT8 ? TSR_DT_INT8 : X->elem == ET_INT32 ? TSR_DT_INT32 : -1;
    int same = (int)in->dtype == want && in->ndim == X->ndim && in->nbytes == X->nbytes;
    for (int i = 0; same && i < X->ndim; i++)
        same = in->shape[i] == X->dims[i];
    if (!same)
        return tsr_err(TSR_EINVAL, "%s: an input of the pipeline must be %s of the model input's shape", m->path,
                       ename(X->elem));
    memcpy(tsr_ox_bytes(m, m->in_val), in->data, X->nbytes);
    int rc = TSR_OK;
    for (int i = 0; i < p->first && !rc; i++)
        if (m->lops[i].side == SIDE_HOST)
            rc = tsr_ox_host_run(m, &m->lops[i]);
    if (!rc)
        memcpy(net_in, tsr_ox_bytes(m, m->segs[0].in_val), tsr_netdesc_tensor_bytes(&p->nd, 0));
    return rc;
}

int tsr_onnx_pipe_after(tsr_onnx_pipe_t *p, const void *net_out, tsr_tensor_t *out)
{
    tsr_onnx_t *m = p->m;
    memcpy(tsr_ox_bytes(m, m->segs[m->nsegs - 1].out_val), net_out, tsr_netdesc_tensor_bytes(&p->nd, p->nd.output));
    int rc = TSR_OK;
    for (int i = p->last + 1; i < m->nlops && !rc; i++)
        if (m->lops[i].side == SIDE_HOST)
            rc = tsr_ox_host_run(m, &m->lops[i]);
    if (!rc)
        rc = tsr_onnx_read_value(m, m->vals[m->out_val].name, out);
    return rc;
}

void tsr_onnx_pipe_counts(const tsr_onnx_pipe_t *p, int *host_before, int *device, int *host_after, int *segments)
{
    const tsr_onnx_t *m = p->m;
    *host_before = *host_after = *device = 0;
    for (int i = 0; i < m->nlops; i++) {
        if (m->lops[i].side != SIDE_HOST)
            (*device)++;
        else if (i < p->first)
            (*host_before)++;
        else
            (*host_after)++;
    }
    *segments = m->nsegs;
}
