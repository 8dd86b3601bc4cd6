/*
 * tsr_onnx_exec: the heterogeneous executor. Prepare plans every device
 * segment (tsr_graph) and gives each computed value its run-time bytes;
 * run goes through the lops in order, a device segment at a time or a
 * host kernel (tsr_onnx_host.c); values are read back by name.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tsr_error.h"
#include "tsr_quant.h"
#include "tsr_roofline.h"
#include "tsr_onnx_ir.h"
#include "tsr_strsafe.h"

uint8_t *tsr_ox_bytes(tsr_onnx_t *m, int v)
{
    const ox_val_t *x = &m->vals[m->vals[v].base];
    return x->cdata ? x->cdata : x->rt;
}

/* The matmul of two activations of segment s (tsr_ox_is_bmm): its plan,
 * requantized by the lop's float32 a_scale * b_scale / y_scale as the
 * importer's dense layers are (fixed point; fscale with EXACT_REQUANT). */
static int bmm_prepare(tsr_onnx_t *m, ox_seg_t *s)
{
    const ox_lop_t *L = &m->lops[s->first];
    const ox_val_t *A = &m->vals[L->in], *B = &m->vals[L->in2], *Y = &m->vals[L->out];
    tsr_bmm_params_t p;
    memset(&p, 0, sizeof p);
    p.batch = (int)L->geo[0], p.m = (int)L->geo[1], p.k = (int)L->geo[2], p.n = (int)L->geo[3];
    p.b_shared = !L->geo[4];
    int rc = qdtype(A->elem, &p.a_dtype);
    if (!rc)
        rc = qdtype(B->elem, &p.b_dtype);
    if (!rc)
        rc = qdtype(Y->elem, &p.y_dtype);
    if (rc)
        return tsr_err(TSR_EINVAL, "matmul \"%s\": operands must be int8 or uint8", TSR_SAFE(L->nd.name));
    p.a_zp = L->zpa[0], p.b_zp = L->zpb[0], p.y_zp = L->yzp;
    p.act_min = p.y_dtype == TSR_DT_UINT8 ? 0 : -128, p.act_max = p.y_dtype == TSR_DT_UINT8 ? 255 : 127;
    int32_t mult, shift;
    const float r = L->mult;
    if (r < 1.0f && r > 0x1p-20f) /* one rounding, as tsr_ox_rq_params forms the dense layers' */
        mult = (int32_t)llround((double)r * 2147483648.0), shift = 0;
    else if ((rc = tsr_quantize_multiplier((double)r, &mult, &shift)))
        return rc;
    p.mult = &mult, p.shift = &shift, p.rq_count = 1;
    p.fscale = isnormal(r) ? &r : NULL;
    if (!(s->bp = calloc(1, sizeof *s->bp)))
        return tsr_err(TSR_ENOMEM, "out of memory");
    if ((rc = tsr_bmm_plan(m->dev, &p, s->bp))) {
        free(s->bp);
        s->bp = NULL;
    }
    return rc;
}

/* Run segment s's matmul of two activations, its counters' deltas kept for the report. */
static int bmm_run(tsr_onnx_t *m, ox_seg_t *s, const void *a, const void *b, void *y)
{
    if (!s->bp)
        return tsr_err(TSR_EINVAL, "prepare the model first");
    tsr_counters_t c0, c1, d;
    int rc = tsr_read_counters(m->dev, &c0);
    if (!rc)
        rc = tsr_bmm_exec(m->dev, s->bp, a, b, y);
    if (!rc)
        rc = tsr_read_counters(m->dev, &c1);
    if (!rc) {
        tsr_counters_delta(&c0, &c1, &d);
        s->bmm_cycles = (double)d.cycles;
        s->bmm_moved = tsr_roofline_moved(&d);
    }
    return rc;
}

/* Whether lowered op i of device segment s writes a value that stays inside s (not the segment's output):
 * one rule for the host buffers prepare leaves out, the values value_check refuses and those read_value
 * fetches from the device. */
static int stays_inside(const tsr_onnx_t *m, int s, int i)
{
    return m->lops[i].out >= 0 && m->lops[i].out != m->segs[s].out_val;
}

int tsr_onnx_prepare(tsr_onnx_t *m, const tsr_config_t *cfg, tsr_device_t *dev, unsigned flags)
{
    m->flags = flags;
    int rc0 = tsr_onnx_set_target(m, cfg); /* the activation tables of ACT_LUT configs (tsr_onnx_act.c) */
    if (rc0)
        return rc0;
    /* No host copy for what value_check calls never materialized: a value
     * that stays inside a device segment (not its output, not a solo conv's,
     * not kept: the device holds it) and a value inside a device activation
     * table. Nothing on the host reads or writes them (zeroed, they were a
     * tenth of a small network's page faults). (A DequantizeLinear folded
     * into the device operators is not one: squeezenet's host ops read such
     * a view's buffer.) */
    uint8_t *inside = calloc((size_t)m->nvals + 1, 1);
    if (!inside)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int s = 0; s < m->nsegs && !(flags & TSR_ONNX_KEEP_ALL); s++)
        for (int i = m->segs[s].first; i <= m->segs[s].last && !m->segs[s].solo; i++)
            if (stays_inside(m, s, i))
                inside[m->lops[i].out] = 1;
    for (int i = 0; i < m->nvals; i++) {
        ox_val_t *x = &m->vals[i];
        if (x->base != i || x->cdata || !x->defined)
            continue;
        free(x->rt);
        x->rt = NULL;
        if (!inside[i] && !x->in_act &&
            !(x->rt = calloc(1, x->nbytes ? x->nbytes : 1))) {
            free(inside);
            return tsr_err(TSR_ENOMEM, "out of memory");
        }
    }
    free(inside);
    m->dev = dev;
    for (int s = 0; s < m->nsegs; s++) {
        if (m->segs[s].solo)
            continue;
        if (m->segs[s].bmm) {
            int rc = bmm_prepare(m, &m->segs[s]);
            if (rc)
                return tsr_err_prefix(rc, "%s: device segment %d: ", m->path, s);
            continue;
        }
        int rc = tsr_graph_from_netdesc(cfg, &m->segs[s].nd, &m->segs[s].g);
        if (!rc)
            rc = tsr_graph_plan(m->segs[s].g, dev, /* every tensor readable: none fused away */
                                flags & TSR_ONNX_KEEP_ALL ? TSR_GRAPH_KEEP_ALL | TSR_GRAPH_NO_FUSE : 0);
        if (rc)
            return tsr_err_prefix(rc, "%s: device segment %d: ", m->path, s);
    }
    return 0;
}

static int value_tensor(const tsr_onnx_t *m, int v, tsr_tensor_t *out)
{
    const ox_val_t *Y = &m->vals[v];
    const tsr_dtype_e dt = Y->elem == ET_FLOAT ? TSR_DT_FLOAT32 : Y->elem == ET_UINT8 ? TSR_DT_UINT8
                         : Y->elem == ET_INT8 ? TSR_DT_INT8 : TSR_DT_INT32;
    int rc = tsr_tensor_alloc(out, dt, Y->ndim, Y->dims);
    if (rc)
        return rc;
    const ox_val_t *B = &m->vals[Y->base];
    const uint8_t *yb = B->cdata ? B->cdata : B->rt;
    if (Y->elem == ET_INT64)
        for (int64_t i = 0; i < numel(Y); i++) {
            int64_t x;
            memcpy(&x, yb + 8 * i, 8);
            ((int32_t *)out->data)[i] = (int32_t)x;
        }
    else
        memcpy(out->data, yb, Y->nbytes);
    return 0;
}

/* Whether value name can be read after a run prepared with flags: its
 * index in *vp, else the error tsr_onnx_read_value would give. */
static int value_check(const tsr_onnx_t *m, const char *name, unsigned flags, int *vp)
{
    int v = name && name[0] ? tsr_ox_find_val(m, name) : -1;
    if (v < 0)
        return tsr_err(TSR_EINVAL, "%s: no value called \"%s\"", m->path, TSR_SAFE(name));
    const ox_val_t *Y = &m->vals[v];
    if (Y->view_of >= 0 && !Y->cdata && Y->real_lop < 0)
        return tsr_err(TSR_EINVAL, "%s: \"%s\" is a DequantizeLinear folded into the device operators (never "
                       "computed in float): ask for \"%s\"", m->path, TSR_SAFE(name),
                       TSR_SAFE(m->vals[Y->view_of].name));
    if (m->vals[Y->base].in_act)
        return tsr_err(TSR_EINVAL, "%s: \"%s\" is computed inside a device activation table (the chain from its "
                       "quantized input to its quantized output is one table on ACT_LUT configs): never "
                       "materialized", m->path, TSR_SAFE(name));
    const int b = Y->base;
    if (m->vals[b].padded || (Y->view_of >= 0 && m->vals[m->vals[Y->view_of].base].padded))
        return tsr_err(TSR_EINVAL, "%s: \"%s\" is held with padding channels on the device (--place shuffle=device): "
                       "not readable", m->path, TSR_SAFE(name));
    for (int s = 0; s < m->nsegs; s++)
        for (int i = m->segs[s].first; i <= m->segs[s].last; i++)
            if (m->lops[i].out == b && stays_inside(m, s, i) && (!(flags & TSR_ONNX_KEEP_ALL) || m->segs[s].solo))
                return tsr_err(TSR_EINVAL, "%s: \"%s\" stays inside device segment %d (only its output comes "
                               "back; keep all tensors to read it)", m->path, TSR_SAFE(name), s);
    *vp = v;
    return 0;
}

int tsr_onnx_check_value(const tsr_onnx_t *m, const char *name, unsigned flags)
{
    int v;
    return value_check(m, name, flags, &v);
}

int tsr_onnx_read_value(const tsr_onnx_t *m, const char *name, tsr_tensor_t *out)
{
    memset(out, 0, sizeof *out);
    int v, rc = value_check(m, name, m->flags, &v);
    if (rc)
        return rc;
    const int b = m->vals[v].base;
    for (int s = 0; s < m->nsegs; s++)
        for (int i = m->segs[s].first; i <= m->segs[s].last; i++)
            if (m->lops[i].out == b && stays_inside(m, s, i)) {
                if (!m->segs[s].g)
                    return tsr_err(TSR_EINVAL, "%s: \"%s\": prepare the model first", m->path, TSR_SAFE(name));
                if ((rc = tsr_graph_read_tensor(m->segs[s].g, m->segs[s].nd.nodes[i - m->segs[s].first].out,
                                                m->vals[b].rt)))
                    return rc;
            }
    if (!m->vals[b].cdata && !m->vals[b].rt)
        return tsr_err(TSR_EINVAL, "%s: run the model first", m->path);
    return value_tensor(m, v, out);
}

/* CPU time of the calling thread: a host kernel's own cost (single-threaded),
 * which a shared machine's load inflates far less than wall time. */
static int64_t thread_cpu_ns(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t))
        return 0;
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int tsr_onnx_run(tsr_onnx_t *m, const tsr_tensor_t *in, tsr_tensor_t *out)
{
    memset(out, 0, sizeof *out);
    const ox_val_t *X = &m->vals[m->in_val];
    const int want = X->elem == ET_FLOAT ? TSR_DT_FLOAT32 : X->elem == ET_UINT8 ? TSR_DT_UINT8
                   : X->elem == ET_INT8 ? TSR_DT_INT8 : X->elem == ET_INT32 ? TSR_DT_INT32
                   : X->elem == ET_INT64 ? TSR_DT_INT64 : -1; /* int64: token ids (a Gather on the host) */
    int same = (int)in->dtype == want && in->ndim == X->ndim;
    for (int i = 0; same && i < X->ndim; i++)
        same = in->shape[i] == X->dims[i];
    if (!same) {
        char s[128] = "";
        for (int i = 0; i < X->ndim; i++)
            snprintf(s + strlen(s), sizeof s - strlen(s), "%s%lld", i ? "," : "", (long long)X->dims[i]);
        return tsr_err(TSR_EINVAL, "%s: input \"%s\" must be %s [%s]", m->path, TSR_SAFE(X->name), ename(X->elem), s);
    }
    memcpy(tsr_ox_bytes(m, m->in_val), in->data, X->nbytes);
    int rc = 0;
    for (int i = 0; i < m->nlops && !rc;) {
        const ox_lop_t *L = &m->lops[i];
        if (L->side == SIDE_HOST) {
            const int64_t t0 = thread_cpu_ns();
            rc = tsr_ox_host_run(m, L);
            m->lops[i].host_ns = thread_cpu_ns() - t0;
            i++;
            continue;
        }
        const ox_seg_t *s = &m->segs[L->seg];
        const void *ins[1] = {tsr_ox_bytes(m, s->in_val)};
        void *outs[1] = {tsr_ox_bytes(m, s->out_val)};
        if (s->bmm)
            rc = bmm_run(m, &m->segs[L->seg], ins[0], tsr_ox_bytes(m, L->in2), outs[0]);
        else if (s->solo) {
            /* float32 scales where the device can apply them (as the graph keeps them) */
            tsr_conv2d_params_t p = tsr_conv2d_for_config(tsr_device_config(m->dev), &L->nd.conv);
            rc = tsr_conv2d_run(m->dev, &p, ins[0], L->nd.w, L->nd.bias, outs[0]);
        }
        else
            rc = tsr_graph_exec(s->g, ins, outs);
        if (rc)
            rc = tsr_err_prefix(rc, "%s: device segment %d: ", m->path, L->seg);
        i = s->last + 1;
    }
    if (rc)
        return rc;
    return value_tensor(m, m->out_val, out);
}

/* The host operators of the last run by kernel and ONNX op: count, elements
 * read + written, CPU time on this machine (the thread's: load from other
 * processes inflates it far less than wall time). The DSE's host-time model
 * (scripts/dse/tsrdse/hostmodel.py) is calibrated on these lines: a host op's
 * cost per element differs by kernel (a float Sigmoid's expf against a copy). */
static void print_host_table(const tsr_onnx_t *m, FILE *f)
{
    int nhost = 0;
    int64_t el = 0, ns = 0;
    for (int i = 0; i < m->nlops; i++)
        if (m->lops[i].side == SIDE_HOST)
            nhost++, el += host_elements(m, &m->lops[i]), ns += m->lops[i].host_ns;
    if (!nhost)
        return;
    fprintf(f, "host operators: %d, %lld elements read + written, %.3f ms of CPU on this machine:\n", nhost,
            (long long)el, (double)ns / 1e6);
    fprintf(f, "  %-26s %-22s %5s %12s %10s %8s\n", "host kernel", "onnx op", "ops", "elements", "ms", "ns/elem");
    for (int i = 0; i < m->nlops; i++) { /* one row per (kernel, op), in order of first appearance */
        const ox_lop_t *L = &m->lops[i];
        const char *op = m->gp->node[L->node]->op_type;
        int first = L->side == SIDE_HOST;
        for (int j = 0; j < i && first; j++)
            first = !(m->lops[j].side == SIDE_HOST && m->lops[j].hkind == L->hkind &&
                      !strcmp(m->gp->node[m->lops[j].node]->op_type, op));
        if (!first)
            continue;
        int n = 0;
        int64_t e = 0, t = 0;
        for (int j = i; j < m->nlops; j++)
            if (m->lops[j].side == SIDE_HOST && m->lops[j].hkind == L->hkind &&
                !strcmp(m->gp->node[m->lops[j].node]->op_type, op))
                n++, e += host_elements(m, &m->lops[j]), t += m->lops[j].host_ns;
        char opn[23];
        fprintf(f, "  %-26s %-22s %5d %12lld %10.3f %8.3f\n", tsr_ox_host_name(L->hkind),
                tsr_strsafe(op, opn, sizeof opn), n, (long long)e, (double)t / 1e6, e ? (double)t / (double)e : 0.0);
    }
}

/* A matmul of two activations' segment: one line, and its cycles as a graph's totals line reads. */
static void print_bmm(const tsr_onnx_t *m, int s, FILE *f)
{
    const ox_lop_t *L = &m->lops[m->segs[s].first];
    const int64_t *g = L->geo;
    fprintf(f, "device segment %d: matmul of two activations \"%s\" run alone (%lld x [%lld x %lld] x [%lld x %lld], "
            "B written as the weights of each batch)\n", s, L->nd.name, (long long)g[0], (long long)g[1],
            (long long)g[2], (long long)g[2], (long long)g[3]);
    const double cyc = m->segs[s].bmm_cycles;
    if (cyc <= 0 || !m->dev)
        return;
    const tsr_config_t *cfg = tsr_device_config(m->dev);
    const double macs = (double)(g[0] * g[1] * g[2] * g[3]),
                 bytes = (double)(g[0] * g[1] * g[2] + (g[4] ? g[0] : 1) * g[2] * g[3] + g[0] * g[1] * g[3]);
    const tsr_roofline_t r = tsr_roofline_bound(cfg, macs, bytes, tsr_roofline_dram_bw(cfg, 0));
    fprintf(f, "total cycles %.0f, sum of per-layer bounds %.0f, ratio %.3f; %.1f images/s at %d MHz (batch of 1 "
            "per execution)\n", cyc, r.bound, r.bound / cyc, cfg->clock_mhz * 1e6 / cyc, cfg->clock_mhz);
}

void tsr_onnx_print_report(const tsr_onnx_t *m, FILE *f)
{
    for (int s = 0; s < m->nsegs; s++) {
        if (m->segs[s].bmm) {
            print_bmm(m, s, f);
            continue;
        }
        if (m->segs[s].solo) {
            fprintf(f, "device segment %d: conv \"%s\" run alone (w - w_zp in %d int8 parts, the input packed "
                    "once per part; no per-layer counters)\n", s, m->segs[s].nd.nodes[0].name,
                    tsr_conv2d_input_copies(&m->segs[s].nd.nodes[0].conv));
            continue;
        }
        fprintf(f, "device segment %d (%d operators):\n", s, m->segs[s].nd.nnodes);
        if (m->segs[s].g)
            tsr_graph_print_report(m->segs[s].g, f);
    }
    print_host_table(m, f);
}
