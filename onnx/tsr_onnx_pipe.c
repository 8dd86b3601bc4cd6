/* tsr_onnx_pipe: an imported model as the pipeline's network (tsr_onnx_pipe.h). */
#include "tsr_onnx_pipe.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_strsafe.h"

/* The host operators between device segments s and s + 1: one host node of
 * the pipeline (tsr_pipenet.h). */
typedef struct {
    int first, last;      /* lop range */
    int b_val;            /* segment s + 1's input (base): the result */
    int next;             /* values read from outside (1..2): */
    int ext_val[2];       /* their bases */
    int ext_t[2];         /* their tensors of the description */
    int nops;             /* host lops in it */
    char name[48];        /* "hostH(N ops):..." (tsr_onnx_pipe_open) */
} host_grp_t;

struct tsr_onnx_pipe {
    tsr_onnx_t *m;
    tsr_netdesc_t nd;     /* merged: tensors owned, nodes copied shallow (arrays point into the lops') */
    int first, last;      /* lop range of the device operators */
    int nh;               /* host groups between device segments */
    host_grp_t *hg;
    const char **names;   /* the host nodes' view (tsr_pipenet_host_t) */
    int *in_t, *in2_t, *out_t;
    double *cycles;
    tsr_pipenet_host_t host;
    pthread_mutex_t mu;   /* one host node at a time on the model's bytes */
    int mu_init;
};

static const char *lop_name(const tsr_onnx_t *m, const ox_lop_t *L)
{
    return L->node >= 0 && (size_t)L->node < m->gp->n_node && m->gp->node[L->node]->name ? m->gp->node[L->node]->name
                                                                                         : "?";
}

/* Value v as bytes: its base, or for a view the viewed value's base. */
static int vbase(const tsr_onnx_t *m, int v) { return v < 0 ? -1 : m->vals[v].base; }

static int reads_base(const tsr_onnx_t *m, int v, int base)
{
    return v >= 0 && (vbase(m, v) == base || (m->vals[v].view_of >= 0 && vbase(m, m->vals[v].view_of) == base));
}

static int is_const(const tsr_onnx_t *m, int v)
{
    return v < 0 || m->vals[vbase(m, v)].cdata ||
           (m->vals[v].view_of >= 0 && m->vals[vbase(m, m->vals[v].view_of)].cdata);
}

/* Where the pipeline hands value base v on: its tensor of the description
 * (tmap), or -1. A view reads its quantized value's bytes. *src gets the
 * base whose bytes they are. */
static int handed(const tsr_onnx_t *m, const int *tmap, int v, int *src)
{
    if (v < 0)
        return -1;
    if (tmap[vbase(m, v)] >= 0) {
        *src = vbase(m, v);
        return tmap[*src];
    }
    if (m->vals[v].view_of >= 0 && tmap[vbase(m, m->vals[v].view_of)] >= 0) {
        *src = vbase(m, m->vals[v].view_of);
        return tmap[*src];
    }
    return -1;
}

/* Group g (between segments s and s + 1) on the description: its host lops
 * read constants, each other's values and at most two values the pipeline
 * hands on (tensors of the description: device operators' outputs, a
 * segment's input, an earlier group's result); segment s + 1 reads its
 * result; nothing outside reads any other of its values. Else refused,
 * naming the operator. */
static int host_group(tsr_onnx_pipe_t *p, int s, int h, const int *tmap)
{
    tsr_onnx_t *m = p->m;
    host_grp_t *g = &p->hg[h];
    int made_b = 0;
    g->next = 0;
    for (int i = g->first; i <= g->last; i++) {
        const ox_lop_t *L = &m->lops[i];
        if (L->side != SIDE_HOST)
            continue;
        for (int k = 0; k < 2; k++) {
            int v = k ? L->in2 : L->in, ok = is_const(m, v), src = -1;
            for (int j = g->first; j < i && !ok; j++)
                ok = m->lops[j].side == SIDE_HOST && reads_base(m, v, vbase(m, m->lops[j].out));
            if (ok)
                continue;
            int t = handed(m, tmap, v, &src);
            if (t < 0)
                return tsr_err(TSR_EINVAL, "%s: host operator \"%s\" (%s) between device segments %d and %d reads a "
                                           "value the pipeline does not hand on (not a device operator's output)",
                               m->path, TSR_SAFE(lop_name(m, L)), tsr_ox_host_name(L->hkind), s, s + 1);
            int seen = 0;
            for (int e = 0; e < g->next; e++)
                seen |= g->ext_val[e] == src;
            if (seen)
                continue;
            if (g->next == 2)
                return tsr_err(TSR_EINVAL, "%s: the host operators between device segments %d and %d read more than 2 "
                                           "values (\"%s\" the third): a host node takes two", m->path, s, s + 1,
                               TSR_SAFE(lop_name(m, L)));
            if (m->vals[src].nbytes != tsr_netdesc_tensor_bytes(&p->nd, t))
                return tsr_err(TSR_EINVAL, "%s: host operator \"%s\" reads a value of %zu bytes as a tensor of %llu",
                               m->path, TSR_SAFE(lop_name(m, L)), m->vals[src].nbytes,
                               (unsigned long long)tsr_netdesc_tensor_bytes(&p->nd, t));
            g->ext_val[g->next] = src, g->ext_t[g->next] = t;
            g->next++;
        }
        made_b |= vbase(m, L->out) == g->b_val;
    }
    if (!made_b || !g->next)
        return tsr_err(TSR_EINVAL, "%s: device segment %d does not read the result of the host operators before it "
                                   "(or they read nothing): the pipeline runs one chain", m->path, s + 1);
    const ox_seg_t *b = &m->segs[s + 1];
    for (int i = 0; i < m->nlops; i++) { /* a value of the group read outside it: only the result, by the pipeline */
        if (i >= g->first && i <= g->last)
            continue;
        const ox_lop_t *L = &m->lops[i];
        for (int k = 0; k < 2; k++) {
            int v = k ? L->in2 : L->in;
            if (v < 0 || is_const(m, v))
                continue;
            for (int j = g->first; j <= g->last; j++) {
                int w = vbase(m, m->lops[j].out);
                if (m->lops[j].side == SIDE_HOST && reads_base(m, v, w) &&
                    !(w == g->b_val && ((i >= b->first && i <= b->last) || (i < p->last && m->lops[i].side == SIDE_HOST))))
                    return tsr_err(TSR_EINVAL, "%s: operator \"%s\" reads a value of the host operators between device "
                                               "segments %d and %d that the pipeline does not hand on", m->path,
                                   TSR_SAFE(lop_name(m, L)), s, s + 1);
            }
        }
    }
    return TSR_OK;
}

/* tsr_pipenet_host_fn: host node h on the model's run-time bytes. Host
 * nodes share them (a residual read by two), so one runs at a time; its
 * measure is its own run (tsr_pipeexec.c times the call: the wait for the
 * lock does not: the measure is the thread's CPU time). */
static int run_host(void *ctx, int h, const void *in, const void *in2, void *out)
{
    tsr_onnx_pipe_t *p = ctx;
    tsr_onnx_t *m = p->m;
    const host_grp_t *g = &p->hg[h];
    if ((g->next > 1 && !in2) || !in)
        return tsr_err(TSR_EINVAL, "host node %d: missing input", h);
    pthread_mutex_lock(&p->mu);
    memcpy(tsr_ox_bytes(m, g->ext_val[0]), in, m->vals[g->ext_val[0]].nbytes);
    if (g->next > 1)
        memcpy(tsr_ox_bytes(m, g->ext_val[1]), in2, m->vals[g->ext_val[1]].nbytes);
    int rc = TSR_OK;
    for (int i = g->first; i <= g->last && !rc; i++)
        if (m->lops[i].side == SIDE_HOST)
            rc = tsr_ox_host_run(m, &m->lops[i]);
    if (!rc)
        memcpy(out, tsr_ox_bytes(m, g->b_val), m->vals[g->b_val].nbytes);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

static int open_fail(tsr_onnx_pipe_t *p, int *gap, int *tmap, int rc)
{
    free(gap), free(tmap);
    tsr_onnx_pipe_free(p);
    return rc;
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
        if (m->segs[s].solo || m->segs[s].bmm)
            return tsr_err(TSR_EINVAL, "%s: device segment %d is a %s that runs alone: the pipeline does not run it",
                           m->path, s, m->segs[s].bmm ? "matmul of two activations" : "conv (int8 weight parts)");
    tsr_onnx_pipe_t *p = calloc(1, sizeof *p);
    int *gap = calloc((size_t)m->nsegs + 1, sizeof *gap); /* gap[s + 1]: host group before segment s + 1, + 1 */
    int *tmap = malloc(sizeof(int) * (size_t)(m->nvals + 1)); /* value base -> tensor of the description */
    if (!p || !gap || !tmap || !(p->hg = calloc((size_t)m->nsegs, sizeof *p->hg)))
        return open_fail(p, gap, tmap, tsr_err(TSR_ENOMEM, "out of memory"));
    pthread_mutex_init(&p->mu, NULL);
    p->m = m;
    p->mu_init = 1;
    p->first = m->segs[0].first;
    p->last = m->segs[m->nsegs - 1].last;
    for (int s = 0; s + 1 < m->nsegs; s++) {
        const ox_seg_t *a = &m->segs[s], *b = &m->segs[s + 1];
        int nops = 0;
        const char *n0 = NULL, *n1 = NULL;
        for (int i = a->last + 1; i < b->first; i++)
            if (m->lops[i].side == SIDE_HOST) {
                nops++;
                n1 = lop_name(m, &m->lops[i]);
                n0 = n0 ? n0 : n1;
            }
        if (nops) { /* host operators between the segments: a host node of the pipeline (its own stage or
                       merged into a device's, as the planner finds) */
            host_grp_t *g = &p->hg[p->nh];
            g->first = a->last + 1, g->last = b->first - 1, g->nops = nops;
            g->b_val = vbase(m, b->in_val);
            /* a name the planner keeps whole (47 characters): the host node's index, its operators and the
             * tail of the first one's ONNX name (the distinctive end of a path such as /features/...) */
            char head[24];
            int hl = snprintf(head, sizeof head, "host%d(%d ops):", p->nh, nops);
            const char *f = TSR_SAFE(n0);
            size_t fl = strlen(f), room = 47 - (size_t)hl;
            snprintf(g->name, sizeof g->name, "%s%s", head, fl > room ? f + fl - room : f);
            (void)n1;
            gap[s + 1] = ++p->nh;
        } else if (m->vals[b->in_val].base != m->vals[a->out_val].base)
            return open_fail(p, gap, tmap,
                             tsr_err(TSR_EINVAL, "%s: device segment %d does not read segment %d's output: the "
                                                 "pipeline runs one chain of device operators", m->path, s + 1, s));
    }
    /* the merged description: segment s's tensor 0 (its input) is segment s-1's output */
    int nt = 0, nn = 0;
    for (int s = 0; s < m->nsegs; s++)
        nt += m->segs[s].nd.ntensors - (s && !gap[s] ? 1 : 0), nn += m->segs[s].nd.nnodes;
    p->nd.tensors = calloc((size_t)nt, sizeof *p->nd.tensors);
    p->nd.nodes = calloc((size_t)nn, sizeof *p->nd.nodes);
    p->names = calloc((size_t)p->nh + 1, sizeof *p->names);
    p->in_t = calloc((size_t)p->nh + 1, sizeof *p->in_t);
    p->in2_t = calloc((size_t)p->nh + 1, sizeof *p->in2_t);
    p->out_t = calloc((size_t)p->nh + 1, sizeof *p->out_t);
    p->cycles = calloc((size_t)p->nh + 1, sizeof *p->cycles);
    if (!p->nd.tensors || !p->nd.nodes || !p->names || !p->in_t || !p->in2_t || !p->out_t || !p->cycles)
        return open_fail(p, gap, tmap, tsr_err(TSR_ENOMEM, "out of memory"));
    for (int v = 0; v <= m->nvals; v++)
        tmap[v] = -1;
    int prev_out = -1;
    for (int s = 0; s < m->nsegs; s++) {
        const ox_seg_t *sg = &m->segs[s];
        const tsr_netdesc_t *sd = &sg->nd;
        /* segment s's tensor 0 is segment s - 1's output, or after host operators a tensor of its own (the host
         * node's output); local t >= 1 -> base + t */
        int joined = s && !gap[s], in0 = joined ? prev_out : s ? p->nd.ntensors : 0;
        int base = p->nd.ntensors - (joined ? 1 : 0);
        for (int t = joined ? 1 : 0; t < sd->ntensors; t++)
            p->nd.tensors[p->nd.ntensors++] = sd->tensors[t];
        if (joined && (sd->tensors[0].zp != p->nd.tensors[prev_out].zp ||
                       sd->tensors[0].dtype != p->nd.tensors[prev_out].dtype))
            return open_fail(p, gap, tmap,
                             tsr_err(TSR_EINVAL, "%s: device segment %d reads segment %d's output with another zero "
                                                 "point or type: the pipeline cannot join them", m->path, s, s - 1));
        if (s && gap[s]) { /* the host node before segment s: its inputs are tensors already mapped */
            int h = gap[s] - 1;
            host_grp_t *g = &p->hg[h];
            if ((rc = host_group(p, s - 1, h, tmap)))
                return open_fail(p, gap, tmap, rc);
            if (m->vals[g->b_val].nbytes != tsr_netdesc_tensor_bytes(&p->nd, in0))
                return open_fail(p, gap, tmap,
                                 tsr_err(TSR_EINVAL, "%s: the host operators before device segment %d: their result "
                                                     "is not the segment's input tensor", m->path, s));
            p->names[h] = g->name, p->in_t[h] = g->ext_t[0], p->in2_t[h] = g->next > 1 ? g->ext_t[1] : -1;
            p->out_t[h] = in0;
        }
        tmap[vbase(m, sg->in_val)] = in0;
        for (int j = 0; j < sd->nnodes; j++) {
            tsr_nd_node_t nd = sd->nodes[j];
            for (int k = 0; k < 2; k++)
                if (nd.in[k] >= 0)
                    nd.in[k] = nd.in[k] == 0 ? in0 : base + nd.in[k];
            nd.out = base + nd.out;
            p->nd.nodes[p->nd.nnodes++] = nd;
            tmap[vbase(m, m->lops[sg->first + j].out)] = nd.out; /* (a segment's lops are its nodes, in order) */
        }
        prev_out = sd->output == 0 ? in0 : base + sd->output;
    }
    p->nd.output = prev_out;
    snprintf(p->nd.name, sizeof p->nd.name, "onnx");
    p->host = (tsr_pipenet_host_t){.n = p->nh, .names = p->names, .in_t = p->in_t, .in2_t = p->in2_t,
                                   .out_t = p->out_t, .cycles = p->cycles, .run = run_host, .ctx = p};
    /* the host operators after the device operators read the last segment's output (what the pipeline hands
     * back), each other's values and constants */
    int last_out = vbase(m, m->segs[m->nsegs - 1].out_val);
    for (int i = p->last + 1; i < m->nlops; i++) {
        const ox_lop_t *L = &m->lops[i];
        for (int k = 0; k < 2 && L->side == SIDE_HOST; k++) {
            int v = k ? L->in2 : L->in, ok = is_const(m, v) || reads_base(m, v, last_out);
            for (int j = p->last + 1; j < i && !ok; j++)
                ok = reads_base(m, v, vbase(m, m->lops[j].out));
            if (!ok)
                return open_fail(p, gap, tmap,
                                 tsr_err(TSR_EINVAL, "%s: host operator \"%s\" after the device operators reads a value "
                                                     "other than their output: the pipeline does not hand it back",
                                         m->path, TSR_SAFE(lop_name(m, L))));
        }
    }
    free(gap), free(tmap);
    /* (with host nodes the description has tensors no node makes, which the check refuses: each segment
     * passed it when the importer built it) */
    if (!p->nh && (rc = tsr_netdesc_validate(&p->nd))) {
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
    free(p->hg), free(p->names), free(p->in_t), free(p->in2_t), free(p->out_t), free(p->cycles);
    if (p->mu_init)
        pthread_mutex_destroy(&p->mu);
    free(p);
}

const tsr_pipenet_host_t *tsr_onnx_pipe_host(const tsr_onnx_pipe_t *p) { return p && p->nh ? &p->host : NULL; }

#define TSR_ONNX_PIPE_MAX_REPS 64

int tsr_onnx_pipe_time_host(tsr_onnx_pipe_t *p, double clock_mhz, int reps, double scale)
{
    if (!p || !(clock_mhz > 0) || reps < 1 || !(scale > 0) || scale > 1e6)
        return tsr_err(TSR_EINVAL, "pipeline: bad host timing request");
    p->host.scale = scale;
    uint8_t *in = NULL, *in2 = NULL, *out = NULL;
    int rc = TSR_OK;
    for (int h = 0; h < p->nh && !rc; h++) {
        uint64_t ib = tsr_netdesc_tensor_bytes(&p->nd, p->in_t[h]), ob = tsr_netdesc_tensor_bytes(&p->nd, p->out_t[h]);
        uint64_t ib2 = p->in2_t[h] >= 0 ? tsr_netdesc_tensor_bytes(&p->nd, p->in2_t[h]) : 0;
        free(in), free(in2), free(out);
        in = calloc(1, ib + 1), in2 = calloc(1, ib2 + 1), out = calloc(1, ob + 1);
        if (!in || !in2 || !out) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            break;
        }
        /* zero tensors in their quantization */
        memset(in, (int)(uint8_t)p->nd.tensors[p->in_t[h]].zp, ib);
        if (ib2)
            memset(in2, (int)(uint8_t)p->nd.tensors[p->in2_t[h]].zp, ib2);
        /* the median run: a host node runs once per input in the pipeline, among other threads, so the
         * fastest of a tight loop (warm caches) under-predicts it */
        double t[TSR_ONNX_PIPE_MAX_REPS];
        int n = reps < TSR_ONNX_PIPE_MAX_REPS ? reps : TSR_ONNX_PIPE_MAX_REPS;
        for (int k = 0; k < n && !rc; k++) {
            uint64_t t0 = tsr_pipenet_host_clock_ns();
            rc = run_host(p, h, in, ib2 ? in2 : NULL, out);
            t[k] = (double)(tsr_pipenet_host_clock_ns() - t0);
        }
        for (int i = 1; i < n; i++) /* (insertion sort: a handful) */
            for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
                double x = t[j];
                t[j] = t[j - 1], t[j - 1] = x;
            }
        double best = t[n / 2];
        if (!rc)
            p->cycles[h] = tsr_pipenet_host_cycles(best, clock_mhz) * scale;
    }
    free(in), free(in2), free(out);
    return rc ? tsr_err_prefix(rc, "pipeline: timing the host operators: ") : TSR_OK;
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

void tsr_onnx_pipe_counts(const tsr_onnx_pipe_t *p, int *host_before, int *device, int *host_after, int *segments,
                          int *host_between)
{
    const tsr_onnx_t *m = p->m;
    *host_before = *host_after = *device = *host_between = 0;
    for (int i = 0; i < m->nlops; i++) {
        if (m->lops[i].side != SIDE_HOST)
            (*device)++;
        else if (i < p->first)
            (*host_before)++;
        else if (i > p->last)
            (*host_after)++;
        else
            (*host_between)++;
    }
    *segments = m->nsegs;
}
