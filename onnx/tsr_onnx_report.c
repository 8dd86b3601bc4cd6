/*
 * tsr_onnx_report: the per-layer report as rows (tsr_onnx_report.h). The
 * rows are the layers tsr_graph_print_report prints for each segment
 * (tsr_graph_layer in execution order, less reshapes, concats and convs fused into an
 * add), and one row per conv run alone; each is joined to its ONNX node
 * through the graph node it is named after (tsr_graph_layer_node: the
 * segment's netdesc node j is lop first + j) and the node that lop's name
 * came from (ox_lop_t.name_node).
 */
#include "tsr_onnx_report.h"

#include <stdio.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_roofline.h"

/* Whether the table prints graph layer L (tsr_graph_print_report's rule). */
static int printed(const tsr_graph_layer_t *L)
{
    return L && strcmp(L->op, "reshape") && strcmp(L->op, "concat") && strcmp(L->op, "fused");
}

/* The ONNX node whose name device lop L carries (recorded when the name was given). */
static int lop_node(const tsr_onnx_t *m, const ox_lop_t *L)
{
    return L->name_node >= 0 && (size_t)L->name_node < m->gp->n_node ? L->name_node : -1;
}

int tsr_onnx_report_rows(const tsr_onnx_t *m)
{
    if (!m || !m->dev)
        return 0;
    int n = 0;
    for (int s = 0; s < m->nsegs; s++) {
        if (m->segs[s].solo || m->segs[s].bmm) {
            n++;
            continue;
        }
        const tsr_graph_t *g = m->segs[s].g;
        for (int i = 0; i < tsr_graph_nnodes(g); i++)
            n += printed(tsr_graph_layer(g, i));
    }
    return n;
}

/* The row of a conv run alone: its static figures (no counters per layer). */
static void solo_row(const tsr_onnx_t *m, const tsr_config_t *cfg, double bw, int s, tsr_onnx_layer_t *out)
{
    const ox_seg_t *S = &m->segs[s];
    const tsr_conv2d_params_t *c = &S->nd.nodes[0].conv;
    out->layer = S->nd.nodes[0].name;
    out->op = c->groups == 1 ? "conv" : c->groups == c->c_in ? "dwconv" : "gconv";
    snprintf(out->shape, sizeof out->shape, "%dx%d,%d->%d,%dx%d,s%d%s", c->h, c->w, c->c_in, c->c_out, c->kh, c->kw,
             c->stride_h, c->groups > 1 ? (c->groups == c->c_in ? ",dw" : ",g") : "");
    out->macs = tsr_roofline_conv2d_macs(c);
    out->compulsory = tsr_roofline_conv2d_compulsory(c, 0);
    if (!S->nd.nodes[0].bias)
        out->compulsory -= 4.0 * c->c_out;
    tsr_roofline_t r = tsr_roofline_bound(cfg, out->macs, out->compulsory, bw);
    out->bound = r.bound;
    out->memory_bound = r.memory_bound;
    out->kcache = -1;
    out->solo = 1;
    out->node = lop_node(m, &m->lops[S->first]);
}

/* The row of a matmul of two activations (run alone, like the conv above). */
static void bmm_row(const tsr_onnx_t *m, const tsr_config_t *cfg, double bw, int s, tsr_onnx_layer_t *out)
{
    const ox_lop_t *L = &m->lops[m->segs[s].first];
    const int64_t *g = L->geo;
    out->layer = L->nd.name;
    out->op = "matmul";
    snprintf(out->shape, sizeof out->shape, "%lldx%lldx%lld,%lld", (long long)g[0], (long long)g[1], (long long)g[2],
             (long long)g[3]);
    out->macs = (double)(g[0] * g[1] * g[2] * g[3]);
    out->compulsory = (double)(g[0] * g[1] * g[2] + (g[4] ? g[0] : 1) * g[2] * g[3] + g[0] * g[1] * g[3]);
    tsr_roofline_t r = tsr_roofline_bound(cfg, out->macs, out->compulsory, bw);
    out->bound = r.bound;
    out->memory_bound = r.memory_bound;
    out->kcache = -1;
    out->solo = 1;
    out->node = lop_node(m, L);
    out->cycles = m->segs[s].bmm_cycles;
    out->moved = m->segs[s].bmm_moved;
}

int tsr_onnx_report_row(const tsr_onnx_t *m, int i, tsr_onnx_layer_t *out)
{
    memset(out, 0, sizeof *out);
    if (!m || !m->dev)
        return tsr_err(TSR_EINVAL, "report: the model is not prepared on a device");
    const tsr_config_t *cfg = tsr_device_config(m->dev);
    /* the bound's DRAM rate: the graphs the importer builds keep the default */
    const double bw = tsr_roofline_dram_bw(cfg, 0);
    int k = 0;
    for (int s = 0; s < m->nsegs; s++) {
        const ox_seg_t *S = &m->segs[s];
        if (S->solo || S->bmm) {
            if (k++ < i)
                continue;
            (S->bmm ? bmm_row : solo_row)(m, cfg, bw, s, out);
        } else {
            int row = -1, j = 0;
            for (; j < tsr_graph_nnodes(S->g); j++)
                if (printed(tsr_graph_layer(S->g, j)) && (row++, k++ == i))
                    break;
            if (j == tsr_graph_nnodes(S->g))
                continue;
            const tsr_graph_layer_t *L = tsr_graph_layer(S->g, j);
            const int nd = tsr_graph_layer_node(S->g, j);
            out->index = row;
            out->layer = L->name;
            out->op = L->op;
            memcpy(out->shape, L->shape, sizeof out->shape);
            out->macs = L->macs;
            out->cycles = L->cycles;
            out->bound = L->bound;
            out->memory_bound = L->memory_bound;
            out->moved = L->moved;
            out->compulsory = L->compulsory;
            out->wall_ms = L->wall_ms;
            out->plan_ms = L->plan_ms;
            out->upload_ms = L->upload_ms;
            out->kcache = L->kcache;
            out->node = nd >= 0 && nd <= S->last - S->first ? lop_node(m, &m->lops[S->first + nd]) : -1;
        }
        out->segment = s;
        out->name = out->node >= 0 ? nname(m, out->node) : out->layer;
        out->peak = (double)cfg->macs_per_op;
        out->dram_bw = bw;
        if (out->cycles > 0) {
            out->util = out->macs / (out->cycles * out->peak);
            out->ratio = out->bound / out->cycles;
        }
        return TSR_OK;
    }
    return tsr_err(TSR_EINVAL, "report: row %d out of range (%d rows)", i, k);
}
