/*
 * tsr_graph: build, validate, plan and execute a graph of operators over
 * device tensors (tsr_graph.h). The operators are the JIT's lowerings
 * planned over tensors (tsr_*_plan_tensors); this file adds the graph:
 * ordering, activation placement with lifetimes, and the per-layer report.
 */
#include "tsr_graph.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr_error.h"
#include "tsr_jitutil.h"
#include "tsr_op.h"
#include "tsr_roofline.h"
#include "tsr_stream.h"
#include "tsr_tappack.h"

typedef struct {
    tsr_dtensor_t t;       /* descriptor; addr set by the plan */
    int producer;          /* node index, -1 for an input */
    int alias;             /* the tensor whose bytes this one relabels (itself unless produced by a reshape) */
    int is_output;         /* marked with tsr_graph_output */
    int first, last;       /* lifetime (plan positions; roots only) */
    uint64_t off;          /* offset in the arena (roots only) */
    int tap;               /* plan: node whose tap-packed input this graph input holds (-1: none) */
    int is_input;          /* plan: a graph input (no producer, read by some node) */
    tsr_dtensor_t orig;    /* the tensor as declared, while t is its tap-packed form */
    int dead;              /* plan: a conv's output that an add fused into the conv replaces (no buffer) */
    uint64_t view_off;     /* plan: where its bytes start in its alias's (a concat's input: its channel slice) */
    int slice;             /* plan: a concat's input, a view of the concat's output (alias) at view_off */
} gtensor_t;

typedef struct {
    tsr_op_kind_e op;      /* operator (tsr_op.h) */
    char name[48];         /* for errors and the report */
    int in[2], out;        /* tensor ids (in[1] = -1 unless add or mul) */
    tsr_conv2d_params_t conv;  /* conv, and dense as a 1x1 conv over [N, K, 1, 1] */
    int32_t *w_zp, *mult, *shift; /* owned copies of conv's arrays */
    float *fscale;                /* (its float32 scales, kept when the config has EXACT_REQUANT) */
    void *w;               /* owned weights (OIHW bytes of the weight dtype) */
    int32_t *bias;         /* owned bias or NULL */
    union {                /* the parameters of a pool, add, clip, act, mul or gavg (prm: whichever it is) */
        tsr_pool_params_t pool;
        tsr_add_params_t add;
        tsr_clip_params_t clip;
        tsr_op_act_t act;
        tsr_mul_params_t mul;
        tsr_gavg_params_t gavg;
        tsr_softmax_params_t softmax;
        tsr_concat_params_t concat;
        unsigned char prm[1];
    };
    int is_dense;          /* conv built from a dense node */
    int is_requant;        /* conv built from a requantize node (unit depthwise weights) */
    int tap;               /* plan: the conv runs tap-packed (tsr_tappack.h) over its packed graph input */
    tsr_conv2d_params_t tconv; /* the rewritten parameters (tap) */
    void *tw;              /* the rewritten weights (tap; owned) */
    tsr_op_plan_t pl;      /* its plan, by plan_kind's row of the operator registry */
    tsr_op_kind_e plan_kind; /* CONV for a conv, a dense and an add with a conv fused into it; else op */
    int planned;           /* the plan above is live */
    int fconv;             /* plan, add: 1 + the conv node whose epilogue runs it (0: none; cp is then the fused
                              conv's plan (pl.conv) and in[fk] the conv's input instead of its output) */
    int fk;                /* plan, add: which input the conv's output was */
    int finto;             /* plan, conv: 1 + the add node it runs in (0: none; the conv itself runs nothing) */
    tsr_graph_layer_t L;   /* report of the last execution */
} gnode_t;

struct tsr_graph {
    tsr_config_t cfg;      /* config the tensors are laid out for */
    gtensor_t *ts;         /* tensors */
    int nt, capt;
    gnode_t *ns;           /* nodes, in the order they were added */
    int nn, capn;
    int *order;            /* plan: node indices in execution order */
    int *outs;             /* marked outputs, in marking order */
    int nout;
    tsr_device_t *dev;     /* the plan's device (NULL: not planned) */
    uint64_t arena, arena_bytes, tensor_bytes, weight_bytes;
    double bw;             /* DRAM bytes per cycle of the bounds */
    double plan_ms, exec_ms;
    double plan_cpu_ms;    /* CPU time of tsr_graph_plan (every thread of the process) */
    double search_ms;      /* wall time of its tiling searches run ahead (presearch) */
    int search_threads;    /* threads they ran on */
    unsigned flags;        /* the plan's flags */
    uint8_t *pack;         /* plan: the buffer every layer's weights are packed in */
    size_t pack_cap;       /* its size */
    tsr_insn_t *all;       /* TSR_GRAPH_ONE_SUBMISSION: every layer's stream, joined by token barriers */
    size_t nall;
    double all_cycles, all_moved; /* its counters in the last execution */
};

static double now_ms(void) { return (double)tsr_mono_ns() / 1e6; }

static int join_streams(tsr_graph_t *g);

int tsr_graph_create(const tsr_config_t *cfg, tsr_graph_t **out)
{
    if (!cfg || !out)
        return tsr_err(TSR_EINVAL, "graph: NULL config or result");
    *out = NULL;
    tsr_dtensor_t probe;
    int rc = tsr_dtensor_init(cfg, 1, 1, 1, 1, TSR_DT_INT8, 0, &probe); /* refuses configs that cannot chain */
    if (rc)
        return tsr_err_prefix(rc, "graph: ");
    tsr_graph_t *g = calloc(1, sizeof *g);
    if (!g)
        return tsr_err(TSR_ENOMEM, "out of memory");
    g->cfg = *cfg;
    g->bw = tsr_roofline_dram_bw(cfg, 0);
    *out = g;
    return TSR_OK;
}

static void unplan(tsr_graph_t *g)
{
    if (!g->dev)
        return;
    for (int i = 0; i < g->nn; i++) {
        gnode_t *n = &g->ns[i];
        if (!n->planned)
            continue;
        tsr_op_def(n->plan_kind)->plan_free(g->dev, &n->pl);
        n->planned = 0;
    }
    if (g->arena)
        tsr_mem_free(g->dev, g->arena);
    for (int i = 0; i < g->nn; i++) {
        gnode_t *n = &g->ns[i];
        if (n->fconv) { /* the add reads the conv's output again */
            const gnode_t *cv = &g->ns[n->fconv - 1];
            n->in[n->fk] = cv->out;
            g->ts[cv->out].dead = 0;
        }
        n->fconv = n->finto = n->fk = 0;
        free(n->tw);
        n->tw = NULL;
        n->tap = 0;
    }
    for (int t = 0; t < g->nt; t++) {
        if (g->ts[t].tap >= 0)
            g->ts[t].t = g->ts[t].orig;
        g->ts[t].tap = -1;
        g->ts[t].t.addr = 0;
    }
    g->arena = g->arena_bytes = g->weight_bytes = 0;
    free(g->order);
    g->order = NULL;
    free(g->all);
    g->all = NULL;
    g->nall = 0;
    g->dev = NULL;
}

void tsr_graph_free(tsr_graph_t *g)
{
    if (!g)
        return;
    unplan(g);
    for (int i = 0; i < g->nn; i++) {
        free(g->ns[i].w_zp);
        free(g->ns[i].mult);
        free(g->ns[i].shift);
        free(g->ns[i].fscale);
        free(g->ns[i].w);
        free(g->ns[i].bias);
    }
    free(g->ns);
    free(g->ts);
    free(g->outs);
    free(g);
}

int tsr_graph_tensor(tsr_graph_t *g, int n, int c, int h, int w, tsr_dtype_e dt, int32_t zp, int *id)
{
    if (!g || !id)
        return tsr_err(TSR_EINVAL, "graph: NULL graph or id");
    if (g->dev)
        return tsr_err(TSR_EINVAL, "graph: already planned (build the whole graph first)");
    tsr_dtensor_t t;
    int rc = tsr_dtensor_init(&g->cfg, n, c, h, w, dt, zp, &t);
    if (rc)
        return tsr_err_prefix(rc, "graph: tensor %d: ", g->nt);
    if (g->nt == g->capt) {
        int cap = g->capt ? 2 * g->capt : 16;
        gtensor_t *p = realloc(g->ts, sizeof *p * (size_t)cap);
        if (!p)
            return tsr_err(TSR_ENOMEM, "out of memory");
        g->ts = p;
        g->capt = cap;
    }
    gtensor_t *gt = &g->ts[g->nt];
    memset(gt, 0, sizeof *gt);
    gt->t = t;
    gt->producer = -1;
    gt->alias = g->nt;
    gt->tap = -1;
    *id = g->nt++;
    return TSR_OK;
}

int tsr_graph_output(tsr_graph_t *g, int t)
{
    if (!g || t < 0 || t >= g->nt)
        return tsr_err(TSR_EINVAL, "graph: output: no tensor %d", t);
    if (g->dev)
        return tsr_err(TSR_EINVAL, "graph: already planned");
    if (g->ts[t].is_output)
        return TSR_OK;
    int *p = realloc(g->outs, sizeof *p * (size_t)(g->nout + 1));
    if (!p)
        return tsr_err(TSR_ENOMEM, "out of memory");
    g->outs = p;
    g->outs[g->nout++] = t;
    g->ts[t].is_output = 1;
    return TSR_OK;
}

/* A new node's slot (committed by commit_node once every check passed),
 * after the checks every operator shares: graph, tensor ids, one producer,
 * no cycle, and its arguments (missing: NULL, or what the caller lacks,
 * e.g. "parameters"). */
static int new_node(tsr_graph_t *g, tsr_op_kind_e op, const char *name, int a, int b, int y, const char *missing,
                    gnode_t **out)
{
    if (!g)
        return tsr_err(TSR_EINVAL, "graph: NULL graph");
    if (g->dev)
        return tsr_err(TSR_EINVAL, "graph: already planned (build the whole graph first)");
    char nm[48];
    snprintf(nm, sizeof nm, "%s", name && *name ? name : "?");
    const int two = tsr_op_def(op)->n_inputs == 2;
    const int ids[3] = {a, b, y};
    for (int k = 0; k < 3; k++) {
        if (k == 1 && !two)
            continue;
        if (ids[k] < 0 || ids[k] >= g->nt)
            return tsr_err(TSR_EINVAL, "graph: node \"%s\": %s tensor %d does not exist", nm,
                           k == 2 ? "output" : "input", ids[k]);
    }
    if (g->ts[y].producer >= 0)
        return tsr_err(TSR_EINVAL, "graph: node \"%s\": tensor %d already has a producer (node \"%s\")", nm, y,
                       g->ns[g->ts[y].producer].name);
    if (y == a || (two && y == b))
        return tsr_err(TSR_EINVAL, "graph: node \"%s\": tensor %d is both an input and the output (a cycle)", nm, y);
    if (missing)
        return tsr_err(TSR_EINVAL, "graph: node \"%s\": NULL %s", nm, missing);
    if (g->nn == g->capn) {
        int cap = g->capn ? 2 * g->capn : 16;
        gnode_t *p = realloc(g->ns, sizeof *p * (size_t)cap);
        if (!p)
            return tsr_err(TSR_ENOMEM, "out of memory");
        g->ns = p;
        g->capn = cap;
    }
    gnode_t *n = &g->ns[g->nn];
    memset(n, 0, sizeof *n);
    n->op = op;
    memcpy(n->name, nm, sizeof nm);
    n->in[0] = a;
    n->in[1] = two ? b : -1;
    n->out = y;
    *out = n;
    return TSR_OK;
}

/* The node becomes part of the graph (after every check passed). */
static void commit_node(tsr_graph_t *g, gnode_t *n)
{
    g->ts[n->out].producer = g->nn;
    g->nn++;
}

static void free_node_arrays(gnode_t *n)
{
    free(n->w_zp);
    free(n->mult);
    free(n->shift);
    free(n->fscale);
    free(n->w);
    free(n->bias);
    n->w_zp = n->mult = n->shift = n->bias = NULL;
    n->fscale = NULL;
    n->w = NULL;
}


/* Does tensor t match shape/dtype/zp? Else an error naming the node. */
static int match(const tsr_graph_t *g, const gnode_t *n, const char *what, int id, int N, int C, int H, int W,
                 tsr_dtype_e dt, int32_t zp)
{
    const tsr_dtensor_t *t = &g->ts[id].t;
    if (t->n != N || t->c != C || t->h != H || t->w != W)
        return tsr_err(TSR_EINVAL, "graph: node \"%s\": %s tensor %d is [%d,%d,%d,%d], the operator needs [%d,%d,%d,%d]",
                       n->name, what, id, t->n, t->c, t->h, t->w, N, C, H, W);
    if (t->dtype != dt || t->zp != zp)
        return tsr_err(TSR_EINVAL, "graph: node \"%s\": %s tensor %d is %s zp %d, the operator needs %s zp %d",
                       n->name, what, id, tsr_dtype_name(t->dtype), (int)t->zp, tsr_dtype_name(dt), (int)zp);
    return TSR_OK;
}

/* Copy conv parameters, weights and bias into the node (owned). Float32
 * scales (exact requantization) are kept where the config runs them (the
 * ALU's fscale, EXACT_REQUANT); elsewhere the node requantizes with the
 * fixed-point (mult, shift) every caller gives too, within 1 LSB of them. */
static int copy_conv(const tsr_graph_t *g, gnode_t *n, const tsr_conv2d_params_t *p, const void *w,
                     const int32_t *bias)
{
    n->conv = tsr_conv2d_for_config(&g->cfg, p);
    if (n->conv.fscale) {
        if (!(n->fscale = malloc(sizeof(float) * (size_t)p->rq_count)))
            return tsr_err(TSR_ENOMEM, "out of memory");
        memcpy(n->fscale, p->fscale, sizeof(float) * (size_t)p->rq_count);
        n->conv.fscale = n->fscale;
    }
    const size_t nw = (size_t)p->c_out * (size_t)(p->c_in / p->groups) * (size_t)p->kh * (size_t)p->kw;
    n->w_zp = malloc(sizeof(int32_t) * (size_t)p->w_zp_count);
    n->mult = malloc(sizeof(int32_t) * (size_t)p->rq_count);
    n->shift = malloc(sizeof(int32_t) * (size_t)p->rq_count);
    n->w = malloc(nw);
    n->bias = bias ? malloc(sizeof(int32_t) * (size_t)p->c_out) : NULL;
    if (!n->w_zp || !n->mult || !n->shift || !n->w || (bias && !n->bias)) {
        free_node_arrays(n);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    memcpy(n->w_zp, p->w_zp, sizeof(int32_t) * (size_t)p->w_zp_count);
    memcpy(n->mult, p->mult, sizeof(int32_t) * (size_t)p->rq_count);
    memcpy(n->shift, p->shift, sizeof(int32_t) * (size_t)p->rq_count);
    memcpy(n->w, w, nw);
    if (bias)
        memcpy(n->bias, bias, sizeof(int32_t) * (size_t)p->c_out);
    n->conv.w_zp = n->w_zp;
    n->conv.mult = n->mult;
    n->conv.shift = n->shift;
    /* the weights are known when planning: a depthwise-mode conv whose
     * blocks' weight rows are the same (an average lowered as a conv of
     * weight 1) keeps one copy (tsr_conv2d_plan_t.wshare) */
    n->conv.w_plan = n->w;
    return TSR_OK;
}

/* Checks shared by conv and dense: tensors, and what device tensors cannot
 * hold (weights whose w - w_zp does not fit int8 need the input packed
 * once per int8 part, groups 1). */
static int check_conv(tsr_graph_t *g, gnode_t *n, const tsr_conv2d_params_t *p)
{
    int oh, ow, rc = tsr_conv2d_check(p, &oh, &ow);
    if (rc)
        return tsr_err_prefix(rc, "graph: node \"%s\": ", n->name);
    if ((rc = match(g, n, "input", n->in[0], p->n, p->c_in, p->h, p->w, p->x_dtype, p->x_zp)) ||
        (rc = match(g, n, "output", n->out, p->n, p->c_out, oh, ow, p->y_dtype, p->y_zp)))
        return rc;
    const int copies = tsr_conv2d_input_copies(p);
    if (copies != 1)
        return tsr_err(TSR_EINVAL,
                       "graph: node \"%s\": weight zero point %d of %s weights needs w - w_zp split into %d int8 "
                       "parts and the input packed once per part; device tensors hold one copy (use int8 weights "
                       "with zero point 0 or uint8 weights with zero point 128)",
                       n->name, (int)p->w_zp[0], tsr_dtype_name(p->w_dtype), copies);
    return TSR_OK;
}

int tsr_graph_conv2d(tsr_graph_t *g, const char *name, int x, int y, const tsr_conv2d_params_t *p, const void *w,
                     const int32_t *bias)
{
    gnode_t *n = NULL;
    int rc = new_node(g, TSR_OPK_CONV, name, x, -1, y, !p || !w ? "parameters or weights" : NULL, &n);
    if (rc)
        return rc;
    tsr_conv2d_params_t u;
    uint8_t *full = NULL;
    /* groups that do not fit the config's blocks (tsr_conv2d_groups_fit: a
     * group spanning two blocks, C_out != C_in, BLOCK_IN != BLOCK_OUT) run
     * as groups 1 with block-diagonal weights */
    if (p->groups != 1 && !tsr_conv2d_groups_fit(&g->cfg, p)) {
        if ((rc = tsr_conv2d_expand_groups(p, w, &u, &full)))
            return tsr_err_prefix(rc, "graph: node \"%s\": ", n->name);
        p = &u;
        w = full;
    }
    if (!(rc = check_conv(g, n, p)))
        rc = copy_conv(g, n, p, w, bias);
    free(full);
    if (rc)
        return rc;
    commit_node(g, n);
    return TSR_OK;
}

/* The activation quantization and requantization of a conv (*c) from the
 * fields of the same names in a dense or requantize node's parameters (*p):
 * both become convs, and this is the part they state alike. */
#define COPY_QUANT(c, p)                                                                                              \
    do {                                                                                                              \
        (c)->x_dtype = (p)->x_dtype;                                                                                  \
        (c)->x_zp = (p)->x_zp;                                                                                        \
        (c)->rq = (p)->rq;                                                                                            \
    } while (0)

int tsr_graph_dense(tsr_graph_t *g, const char *name, int x, int y, const tsr_dense_params_t *p, const void *w,
                    const int32_t *bias)
{
    gnode_t *n = NULL;
    int rc = new_node(g, TSR_OPK_DENSE, name, x, -1, y, !p || !w ? "parameters or weights" : NULL, &n);
    if (rc)
        return rc;
    if ((rc = tsr_dense_check(p, NULL)))
        return tsr_err_prefix(rc, "graph: node \"%s\": ", n->name);
    const tsr_dtensor_t *xt = &g->ts[x].t;
    /* the blocked layout of [N, C, H, W] is that of [N, K] only when H*W == 1 */
    if (xt->h * xt->w != 1)
        return tsr_err(TSR_EINVAL,
                       "graph: node \"%s\": dense over a [%d,%d,%d,%d] tensor: its blocked layout is not [N][K] "
                       "(only H = W = 1 inputs, e.g. after a global pool, are supported)",
                       n->name, xt->n, xt->c, xt->h, xt->w);
    /* a dense layer over [N, K, 1, 1] is the 1x1 conv2d K -> M */
    tsr_conv2d_params_t c;
    memset(&c, 0, sizeof c);
    c.n = p->n;
    c.c_in = p->k;
    c.h = c.w = 1;
    c.c_out = p->m;
    c.kh = c.kw = c.stride_h = c.stride_w = c.groups = 1;
    COPY_QUANT(&c, p);
    c.w_dtype = p->w_dtype;
    c.w_zp = p->w_zp;
    c.w_zp_count = p->w_zp_count;
    if ((rc = check_conv(g, n, &c)) || (rc = copy_conv(g, n, &c, w, bias)))
        return rc;
    n->is_dense = 1;
    commit_node(g, n);
    return TSR_OK;
}

int tsr_graph_requantize(tsr_graph_t *g, const char *name, int x, int y, const tsr_requant_params_t *p)
{
    gnode_t *n = NULL;
    int rc = new_node(g, TSR_OPK_CONV, name, x, -1, y, p ? NULL : "parameters", &n);
    if (rc)
        return rc;
    if (p->c < 1 || p->c > (1 << 20))
        return tsr_err(TSR_EINVAL, "graph: node \"%s\": requantize over %d channels (1..%d)", n->name, p->c,
                       1 << 20);
    /* the depthwise 1x1 conv with weight 1 and no bias: acc = x - x_zp,
     * then the conv's output stage (one channel: an ordinary 1x1 conv) */
    static const int32_t zero = 0;
    tsr_conv2d_params_t c;
    memset(&c, 0, sizeof c);
    c.n = p->n;
    c.c_in = c.c_out = p->c;
    c.h = p->h;
    c.w = p->w;
    c.kh = c.kw = c.stride_h = c.stride_w = 1;
    c.groups = p->c;
    COPY_QUANT(&c, p);
    c.w_dtype = TSR_DT_INT8;
    c.w_zp = &zero;
    c.w_zp_count = 1;
    int8_t *ones = malloc((size_t)p->c);
    if (!ones)
        return tsr_err(TSR_ENOMEM, "out of memory");
    memset(ones, 1, (size_t)p->c);
    if (!(rc = check_conv(g, n, &c)))
        rc = copy_conv(g, n, &c, ones, NULL);
    free(ones);
    if (rc)
        return rc;
    n->is_requant = 1;
    commit_node(g, n);
    return TSR_OK;
}

/* A node whose parameters the graph keeps as they are (pool, add, clip, act, mul, gavg):
 * the operator's check (tsr_op.h) gives the tensors they need. */
static int plain_node(tsr_graph_t *g, tsr_op_kind_e op, const char *name, int a, int b, int y, const void *p)
{
    gnode_t *n = NULL;
    int rc = new_node(g, op, name, a, b, y, p ? NULL : "parameters", &n);
    if (rc)
        return rc;
    const tsr_op_def_t *d = tsr_op_def(op);
    if (op == TSR_OPK_ACT && !g->cfg.act_lut) /* refused here, not at plan: the caller may run it elsewhere */
        return tsr_err(TSR_EINVAL, "graph: node \"%s\": an activation table needs the config key ACT_LUT (this "
                       "config has ACT_LUT = 0)", n->name);
    tsr_op_io_t io[3];
    if ((rc = d->check(p, io)) || (op == TSR_OPK_CONCAT && (rc = tsr_concat_layout(&g->cfg, p))))
        return tsr_err_prefix(rc, "graph: node \"%s\": ", n->name);
    const int ids[3] = {a, d->n_inputs == 2 ? b : y, y};
    for (int k = 0; k <= d->n_inputs; k++)
        if ((rc = match(g, n, d->io_names[k], ids[k], io[k].n, io[k].c, io[k].h, io[k].w, io[k].dtype, io[k].zp)))
            return rc;
    memcpy(n->prm, p, d->params_size);
    commit_node(g, n);
    return TSR_OK;
}

int tsr_graph_pool(tsr_graph_t *g, const char *name, int x, int y, const tsr_pool_params_t *p)
{
    return plain_node(g, TSR_OPK_POOL, name, x, -1, y, p);
}

int tsr_graph_add(tsr_graph_t *g, const char *name, int a, int b, int y, const tsr_add_params_t *p)
{
    return plain_node(g, TSR_OPK_ADD, name, a, b, y, p);
}

int tsr_graph_clip(tsr_graph_t *g, const char *name, int x, int y, const tsr_clip_params_t *p)
{
    return plain_node(g, TSR_OPK_CLIP, name, x, -1, y, p);
}

int tsr_graph_act(tsr_graph_t *g, const char *name, int x, int y, const tsr_act_table_t *t)
{
    /* the parameters are the tensors' own (the table maps any bytes to any bytes): an output of
       another shape fails the output's match, naming the node */
    tsr_op_act_t p;
    memset(&p, 0, sizeof p);
    if (g && t && x >= 0 && x < g->nt && y >= 0 && y < g->nt) {
        const tsr_dtensor_t *a = &g->ts[x].t, *b = &g->ts[y].t;
        p.n = a->n, p.c = a->c, p.h = a->h, p.w = a->w;
        p.x_dtype = a->dtype, p.x_zp = a->zp, p.y_dtype = b->dtype, p.y_zp = b->zp;
        p.table = *t;
    }
    return plain_node(g, TSR_OPK_ACT, name, x, -1, y, t ? &p : NULL);
}

int tsr_graph_mul(tsr_graph_t *g, const char *name, int x, int s, int y, const tsr_mul_params_t *p)
{
    return plain_node(g, TSR_OPK_MUL, name, x, s, y, p);
}

int tsr_graph_gavg(tsr_graph_t *g, const char *name, int x, int y, const tsr_gavg_params_t *p)
{
    return plain_node(g, TSR_OPK_GAVG, name, x, -1, y, p);
}

int tsr_graph_softmax(tsr_graph_t *g, const char *name, int x, int y, const tsr_softmax_params_t *p)
{
    return plain_node(g, TSR_OPK_SOFTMAX, name, x, -1, y, p);
}

int tsr_graph_concat(tsr_graph_t *g, const char *name, int a, int b, int y)
{
    if (!g || a < 0 || b < 0 || a >= g->nt || b >= g->nt)
        return tsr_err(TSR_EINVAL, "graph: node \"%s\": an input tensor does not exist", name ? name : "?");
    const tsr_dtensor_t *ta = &g->ts[a].t, *tb = &g->ts[b].t;
    const tsr_concat_params_t p = {ta->n, ta->h, ta->w, ta->c, tb->c, ta->dtype, ta->zp};
    return plain_node(g, TSR_OPK_CONCAT, name, a, b, y, &p);
}

int tsr_graph_reshape(tsr_graph_t *g, const char *name, int x, int y)
{
    gnode_t *n = NULL;
    int rc = new_node(g, TSR_OPK_RESHAPE, name, x, -1, y, NULL, &n);
    if (rc)
        return rc;
    const tsr_dtensor_t *a = &g->ts[x].t, *b = &g->ts[y].t;
    if (a->n != b->n || a->c != b->c || (int64_t)a->h * a->w != (int64_t)b->h * b->w || a->dtype != b->dtype ||
        a->zp != b->zp)
        return tsr_err(TSR_EINVAL,
                       "graph: node \"%s\": reshape [%d,%d,%d,%d] -> [%d,%d,%d,%d] is not a relabelling of the "
                       "blocked layout (N, C, H*W, dtype and zero point must stay)",
                       n->name, a->n, a->c, a->h, a->w, b->n, b->c, b->h, b->w);
    commit_node(g, n);
    return TSR_OK;
}

/* ---------------------------------------------------------------- plan */

static int root_of(const tsr_graph_t *g, int t)
{
    while (g->ts[t].alias != t)
        t = g->ts[t].alias;
    return t;
}

/* Bytes from t's root's start to t's (a concat slice's offset, summed along the aliases). */
static uint64_t view_offset(const tsr_graph_t *g, int t)
{
    uint64_t off = 0;
    for (; g->ts[t].alias != t; t = g->ts[t].alias)
        off += g->ts[t].view_off;
    return off;
}

/* Tensor x (through its reshapes) can become a slice of another: its
 * bytes are its own (no slice of another concat yet, no graph input, which
 * the host writes and may hold tap-packed) and not y's (a cycle). */
static int sliceable(const tsr_graph_t *g, int x, int y)
{
    for (int t = x;; t = g->ts[t].alias) {
        if (g->ts[t].slice)
            return 0;
        if (g->ts[t].alias == t)
            return g->ts[t].producer >= 0 && t != root_of(g, y);
    }
}

/* Each concat's inputs become views of its output (tsr_concat.h): the
 * root of each input's bytes aliases the output at the input's channel
 * offset, so its producer writes the slice in place and the lifetimes
 * (place) keep the output from the first producer to the last reader of
 * any slice. An input that cannot be a slice (a graph input, a slice of
 * another concat already: DenseNet's features in every later concat, or
 * both inputs one tensor) is first copied on the device by an identity
 * requantize (multiplier 2^30, shift 1: exactly x), a node added here once. */
static int concat_views(tsr_graph_t *g)
{
    const int nn = g->nn;
    for (int i = 0; i < nn; i++) {
        if (g->ns[i].op != TSR_OPK_CONCAT)
            continue;
        for (int k = 0; k < 2; k++) {
            const int x = g->ns[i].in[k], y = g->ns[i].out;
            if (!sliceable(g, x, y) || (k == 1 && root_of(g, x) == root_of(g, g->ns[i].in[0]))) {
                const tsr_dtensor_t t = g->ts[x].t;
                static const int32_t mult = 1 << 30, shift = 1;
                tsr_requant_params_t rp = {.n = t.n, .c = t.c, .h = t.h, .w = t.w, .x_dtype = t.dtype, .x_zp = t.zp};
                rp.y_dtype = t.dtype, rp.y_zp = t.zp, rp.mult = &mult, rp.shift = &shift, rp.rq_count = 1;
                rp.act_min = t.dtype == TSR_DT_UINT8 ? 0 : -128, rp.act_max = rp.act_min + 255;
                char nm[48];
                snprintf(nm, sizeof nm, "%.40s.copy%d", g->ns[i].name, k);
                int c, rc = tsr_graph_tensor(g, t.n, t.c, t.h, t.w, t.dtype, t.zp, &c);
                if (!rc)
                    rc = tsr_graph_requantize(g, nm, x, c, &rp);
                if (rc)
                    return tsr_err_prefix(rc, "graph: node \"%s\": ", g->ns[i].name);
                g->ns[i].in[k] = c;
            }
            const int r = root_of(g, g->ns[i].in[k]);
            g->ts[r].alias = y;
            g->ts[r].slice = 1;
            g->ts[r].view_off = k ? tsr_concat_b_offset(&g->cfg, &g->ns[i].concat) : 0;
        }
    }
    return TSR_OK;
}

/* Kahn's algorithm over the producer relation; a node left over is on (or
 * behind) a cycle. */
static int order_nodes(tsr_graph_t *g)
{
    int *indeg = calloc((size_t)(unsigned)g->nn + 1, sizeof *indeg);
    int *q = malloc(sizeof *q * ((size_t)(unsigned)g->nn + 1));
    g->order = malloc(sizeof *g->order * ((size_t)(unsigned)g->nn + 1));
    int rc = TSR_OK;
    if (!indeg || !q || !g->order) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < g->nn; i++)
        for (int k = 0; k < 2; k++)
            if (g->ns[i].in[k] >= 0 && g->ts[g->ns[i].in[k]].producer >= 0)
                indeg[i]++;
    int qh = 0, qt = 0, no = 0;
    for (int i = 0; i < g->nn; i++)
        if (!indeg[i])
            q[qt++] = i;
    while (qh < qt) {
        int i = q[qh++];
        g->order[no++] = i;
        for (int j = 0; j < g->nn; j++)
            for (int k = 0; k < 2; k++)
                if (g->ns[j].in[k] == g->ns[i].out && --indeg[j] == 0)
                    q[qt++] = j;
    }
    if (no < g->nn) {
        int bad = -1;
        for (int i = 0; i < g->nn && bad < 0; i++)
            if (indeg[i])
                bad = i;
        rc = tsr_err(TSR_EINVAL, "graph: node \"%s\" is on a cycle (its input depends on its own output)",
                     g->ns[bad].name);
    }
out:
    free(indeg);
    free(q);
    return rc;
}

/* Place the roots' buffers in one arena: a root lives from its producer's
 * position to its last consumer's (outputs and KEEP_ALL: to the end); two
 * roots whose lifetimes meet (a node's inputs and output included) never
 * overlap. Largest first, lowest offset that fits. */
static int place(tsr_graph_t *g, unsigned flags, uint64_t align)
{
    int *pos = malloc(sizeof *pos * ((size_t)(unsigned)g->nn + 1));
    int *roots = malloc(sizeof *roots * ((size_t)(unsigned)g->nt + 1));
    int *placed = malloc(sizeof *placed * ((size_t)(unsigned)g->nt + 1));
    if (!pos || !roots || !placed) {
        free(pos);
        free(roots);
        free(placed);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    for (int k = 0; k < g->nn; k++)
        pos[g->order[k]] = k;
    for (int t = 0; t < g->nt; t++) {
        g->ts[t].first = INT_MAX;
        g->ts[t].last = INT_MIN;
    }
    for (int t = 0; t < g->nt; t++) {
        gtensor_t *r = &g->ts[root_of(g, t)];
        int p = g->ts[t].producer;
        int def = p < 0 ? -1 : pos[p];
        if (def < r->first)
            r->first = def;
        if (def > r->last)
            r->last = def;
        if (g->ts[t].is_output || (flags & TSR_GRAPH_KEEP_ALL)) {
            r->first = -1;
            r->last = INT_MAX;
        }
    }
    for (int i = 0; i < g->nn; i++)
        for (int k = 0; k < 2; k++)
            if (g->ns[i].in[k] >= 0) {
                gtensor_t *r = &g->ts[root_of(g, g->ns[i].in[k])];
                if (pos[i] > r->last)
                    r->last = pos[i];
            }
    int nr = 0;
    g->tensor_bytes = 0;
    for (int t = 0; t < g->nt; t++)
        if (g->ts[t].alias == t && !g->ts[t].dead) {
            roots[nr++] = t;
            g->tensor_bytes += g->ts[t].t.bytes;
        }
    /* largest first (insertion sort: graphs are small) */
    for (int i = 1; i < nr; i++)
        for (int j = i; j > 0 && g->ts[roots[j]].t.bytes > g->ts[roots[j - 1]].t.bytes; j--) {
            int s = roots[j];
            roots[j] = roots[j - 1];
            roots[j - 1] = s;
        }
    uint64_t end = 0;
    int np = 0;
    for (int i = 0; i < nr; i++) {
        gtensor_t *r = &g->ts[roots[i]];
        const uint64_t sz = (r->t.bytes + align - 1) / align * align;
        uint64_t off = 0;
        for (int again = 1; again;) { /* move past every conflicting placed buffer */
            again = 0;
            for (int j = 0; j < np; j++) {
                const gtensor_t *o = &g->ts[placed[j]];
                const uint64_t osz = (o->t.bytes + align - 1) / align * align;
                if (o->first <= r->last && r->first <= o->last && off < o->off + osz && o->off < off + sz) {
                    off = o->off + osz;
                    again = 1;
                }
            }
        }
        r->off = off;
        placed[np++] = roots[i];
        if (off + sz > end)
            end = off + sz;
    }
    g->arena_bytes = end ? end : align;
    free(pos);
    free(roots);
    free(placed);
    return TSR_OK;
}

static void layer_shape(const gnode_t *n, const tsr_graph_t *g, char *s, size_t len)
{
    const tsr_dtensor_t *x = &g->ts[n->in[0]].t;
    if (n->op == TSR_OPK_CONV)
        snprintf(s, len, "%dx%d,%d->%d,%dx%d,s%d%s", n->conv.h, n->conv.w, n->conv.c_in, n->conv.c_out, n->conv.kh,
                 n->conv.kw, n->conv.stride_h, n->conv.groups > 1 ? (n->conv.groups == n->conv.c_in ? ",dw" : ",g") : n->tap ? ",tap" : "");
    else if (n->op == TSR_OPK_DENSE)
        snprintf(s, len, "%d->%d", n->conv.c_in, n->conv.c_out);
    else if ((n->op == TSR_OPK_POOL && n->pool.kind == TSR_POOL_GLOBAL_AVG) || n->op == TSR_OPK_GAVG)
        snprintf(s, len, "%dx%d,%d->1x1", x->h, x->w, x->c);
    else if (n->op == TSR_OPK_POOL)
        snprintf(s, len, "%dx%d,%d,%dx%d,s%d", x->h, x->w, x->c, n->pool.kh, n->pool.kw, n->pool.stride_h);
    else
        snprintf(s, len, "%dx%d,%d", x->h, x->w, x->c);
}

static const char *op_name(const gnode_t *n)
{
    if (n->finto)
        return "fused";
    switch (n->op) {
    case TSR_OPK_CONV:
        return n->is_requant ? "requant" : n->conv.groups == 1 ? "conv" : n->conv.groups == n->conv.c_in ? "dwconv" : "gconv";
    case TSR_OPK_POOL:
        return n->pool.kind == TSR_POOL_MAX ? "maxpool" : n->pool.kind == TSR_POOL_AVG ? "avgpool" : "gap";
    default: return tsr_op_name(n->op); /* "dense", "add", "clip", "reshape", "act", "mul", "gavg" */
    }
}

/* A reshape or a concat: views of other tensors' bytes, no kernel. */
static int runs_nothing(const gnode_t *n) { return n->op == TSR_OPK_RESHAPE || n->op == TSR_OPK_CONCAT; }

static double real_bytes(const tsr_dtensor_t *t) { return (double)t->n * t->c * t->h * t->w; }

/* Static per-layer figures: MACs, compulsory bytes, bound. */
static void layer_static(tsr_graph_t *g, gnode_t *n)
{
    tsr_graph_layer_t *L = &n->L;
    const gnode_t *cv = n->fconv ? &g->ns[n->fconv - 1] : NULL; /* a fused add is its conv's layer */
    L->name = cv ? cv->name : n->name;
    layer_shape(cv ? cv : n, g, L->shape, sizeof L->shape);
    const int act = cv && n->op == TSR_OPK_ACT; /* a conv with its activation table (fuse_acts) */
    L->op = !cv                            ? op_name(n)
            : cv->conv.groups == 1         ? (act ? "conv+act" : "conv+add")
            : cv->conv.groups == cv->conv.c_in ? (act ? "dwconv+act" : "dwconv+add")
                                               : (act ? "gconv+act" : "gconv+add");
    L->kcache = -1;
    if (act) { /* the conv's figures (its output written in the table's terms) */
        L->macs = tsr_roofline_conv2d_macs(&cv->conv);
        L->compulsory = tsr_roofline_conv2d_compulsory(&cv->conv, 0);
        if (!cv->bias)
            L->compulsory -= 4.0 * cv->conv.c_out;
    } else if (cv) { /* the conv's figures, and the residual read instead of the add's own traffic */
        L->macs = tsr_roofline_conv2d_macs(&cv->conv);
        L->compulsory = tsr_roofline_conv2d_compulsory(&cv->conv, 0) + real_bytes(&g->ts[n->in[1 - n->fk]].t);
        if (!cv->bias)
            L->compulsory -= 4.0 * cv->conv.c_out;
    } else if (n->finto) {
    } else if (n->op == TSR_OPK_CONV || n->op == TSR_OPK_DENSE) {
        L->macs = tsr_roofline_conv2d_macs(&n->conv);
        L->compulsory = tsr_roofline_conv2d_compulsory(&n->conv, 0);
        if (!n->bias) /* no bias moves no bias bytes */
            L->compulsory -= 4.0 * n->conv.c_out;
    } else if (!runs_nothing(n)) {
        L->compulsory = real_bytes(&g->ts[n->in[0]].t) + real_bytes(&g->ts[n->out].t);
        if (n->in[1] >= 0)
            L->compulsory += real_bytes(&g->ts[n->in[1]].t);
    }
    tsr_roofline_t r = tsr_roofline_bound(&g->cfg, L->macs, L->compulsory, g->bw);
    L->bound = r.bound;
    L->memory_bound = r.memory_bound;
}

/* The add's parameters with a = the fused conv's output (the add is
 * symmetric: raw = MBQM(va) + MBQM(vb) is the same integer either way). */
static tsr_add_params_t fused_add_params(const gnode_t *n)
{
    tsr_add_params_t p = n->add;
    if (n->fk == 1) {
        p.a = n->add.b;
        p.b = n->add.a;
        p.mult_a = n->add.mult_b;
        p.mult_b = n->add.mult_a;
        p.shift_a = n->add.shift_b;
        p.shift_b = n->add.shift_a;
    }
    return p;
}

/* The conv node n plans, if any: n itself (a conv or dense not fused
 * into an add), or for an add with a conv fused into it that conv, the
 * add's parameters (into *add) and the residual. Returns the conv node whose
 * parameters and weights it plans, with *j the arguments of its plan
 * (tsr_conv2d_plan_tensors[_add]); NULL when n plans no conv. The one
 * place that says so: the plan and the searches run ahead of it. */
static const gnode_t *conv_job(const tsr_graph_t *g, const gnode_t *n, tsr_conv2d_job_t *j, tsr_add_params_t *add)
{
    const gnode_t *cv;
    memset(j, 0, sizeof *j);
    if ((n->op == TSR_OPK_CONV || n->op == TSR_OPK_DENSE) && !n->finto) {
        cv = n;
        j->x = &g->ts[n->in[0]].t;
    } else if (n->op == TSR_OPK_ADD && n->fconv) {
        cv = &g->ns[n->fconv - 1];
        *add = fused_add_params(n);
        j->add = add;
        j->x = &g->ts[n->in[n->fk]].t;
        j->r = &g->ts[n->in[1 - n->fk]].t;
    } else if (n->op == TSR_OPK_ACT && n->fconv) {
        cv = &g->ns[n->fconv - 1]; /* (fuse_acts: in[0] is the conv's input) */
        j->act = &n->act.table;
        j->x = &g->ts[n->in[0]].t;
    } else
        return NULL;
    j->p = cv->tap ? &cv->tconv : &cv->conv;
    j->y = &g->ts[n->out].t;
    return cv;
}

/* Plan conv node cv's parameters into n->pl.conv with the arguments j of
 * conv_job (n is cv, or the add fused into it) and upload cv's weights. */
static int plan_conv(tsr_graph_t *g, gnode_t *n, const gnode_t *cv, const tsr_conv2d_job_t *j)
{
    tsr_device_t *dev = g->dev;
    tsr_conv2d_plan_t *cp = &n->pl.conv;
    int rc = j->act   ? tsr_conv2d_plan_tensors_act(dev, j->p, j->act, j->x, j->y, cp)
             : j->add ? tsr_conv2d_plan_tensors_add(dev, j->p, j->add, j->x, j->r, j->y, cp)
                      : tsr_conv2d_plan_tensors(dev, j->p, j->x, j->y, cp);
    if (rc)
        return rc;
    n->plan_kind = TSR_OPK_CONV;
    n->planned = 1;
    const double t1 = now_ms();
    const size_t need = cp->w_bytes + cp->c_bytes;
    if (need > g->pack_cap) {
        free(g->pack);
        g->pack_cap = 0;
        if (!(g->pack = malloc(need)))
            return tsr_err(TSR_ENOMEM, "out of memory");
        g->pack_cap = need;
    }
    rc = tsr_conv2d_write_weights_buf(dev, cp, cv->tap ? cv->tw : cv->w, cv->bias, g->pack);
    n->L.upload_ms = now_ms() - t1;
    g->weight_bytes += cp->w_bytes + cp->c_bytes;
    return rc;
}

/* A node the registry plans over its tensors as it is (pool, add, clip, act). */
static int plan_plain(tsr_graph_t *g, gnode_t *n)
{
    const tsr_op_def_t *d = tsr_op_def(n->op);
    const tsr_dtensor_t *x[2] = {&g->ts[n->in[0]].t, n->in[1] >= 0 ? &g->ts[n->in[1]].t : NULL};
    int rc = d->plan_tensors(g->dev, n->prm, x, &g->ts[n->out].t, &n->pl);
    if (rc)
        return rc;
    n->plan_kind = n->op;
    n->planned = 1;
    tsr_op_figures_t f;
    d->figures(&n->pl, &f);
    g->weight_bytes += f.w_bytes + f.c_bytes;
    return TSR_OK;
}

static int plan_node(tsr_graph_t *g, gnode_t *n)
{
    const double t0 = now_ms();
    int rc = TSR_OK;
    tsr_conv2d_job_t j;
    tsr_add_params_t ap;
    const gnode_t *cv = conv_job(g, n, &j, &ap);
    if (cv)
        rc = plan_conv(g, n, cv, &j);
    else if (!n->finto && !runs_nothing(n)) /* a conv fused into an add runs in the add's node */
        rc = plan_plain(g, n);
    if (rc)
        return tsr_err_prefix(rc, "graph: node \"%s\": ", n->name);
    const double upload = n->L.upload_ms;
    layer_static(g, n);
    n->L.upload_ms = upload;
    n->L.plan_ms = now_ms() - t0 - upload;
    if (n->planned) {
        tsr_op_figures_t f;
        tsr_op_def(n->plan_kind)->figures(&n->pl, &f);
        n->L.kcache = f.kcache;
    }
    return TSR_OK;
}

/* A conv with few input channels reading a graph input that nothing else
 * reads runs tap-packed (tsr_tappack.h: the stem's 3 channels x 7 taps
 * fill 21 of 32 input lanes instead of 3 of 16): the input tensor takes the
 * packed shape and the host packs it at the edge, where it touches the
 * data anyway. */
static int tap_inputs(tsr_graph_t *g)
{
    for (int i = 0; i < g->nn; i++) {
        gnode_t *n = &g->ns[i];
        const int x = n->in[0];
        if (n->op != TSR_OPK_CONV || g->ts[x].producer >= 0 || g->ts[x].is_output || g->ts[x].tap >= 0 ||
            !tsr_tappack_applies(&n->conv, &g->cfg))
            continue;
        int uses = 0;
        for (int j = 0; j < g->nn; j++)
            uses += g->ns[j].in[0] == x || g->ns[j].in[1] == x;
        if (uses != 1)
            continue;
        const size_t nw = (size_t)n->conv.c_out * (size_t)n->conv.c_in * (size_t)n->conv.kh * (size_t)n->conv.kw;
        tsr_dtensor_t packed;
        if (!(n->tw = malloc(nw)))
            return tsr_err(TSR_ENOMEM, "out of memory");
        int rc = tsr_tappack_rewrite(&n->conv, n->w, &n->tconv, n->tw);
        n->tconv.w_plan = n->tw; /* (the rewritten conv's weights, not the node's) */
        if (!rc)
            rc = tsr_dtensor_init(&g->cfg, n->tconv.n, n->tconv.c_in, n->tconv.h, n->tconv.w, n->tconv.x_dtype,
                                  n->tconv.x_zp, &packed);
        if (rc)
            return tsr_err_prefix(rc, "graph: node \"%s\": ", n->name);
        n->tap = 1;
        g->ts[x].orig = g->ts[x].t;
        g->ts[x].t = packed;
        g->ts[x].tap = i;
    }
    return TSR_OK;
}

/* Fuse each add into the conv feeding one of its inputs when the conv's
 * output has no other reader (no other node, no reshape, not a graph
 * output) and the conv's parameters leave room for the epilogue on this
 * device (tsr_conv2d_add_fits); else the add runs on its own. The add's
 * node then runs the conv (its input in[fk] becomes the conv's input, so
 * the ordering and the lifetimes follow from the usual rules: the conv's
 * input lives until the add, the add's output is written there); the conv
 * node runs nothing and its output gets no buffer. unplan() undoes it. */
/* The conv producing tensor t when its epilogue may take t's one consumer
 * (an add or an activation table): t is a conv's output, that conv runs no
 * fused node yet, t is no graph output and exactly one node input reads it.
 * Else -1. */
static int fusable_conv(const tsr_graph_t *g, int t)
{
    const int c = g->ts[t].producer;
    if (c < 0 || g->ns[c].op != TSR_OPK_CONV || g->ns[c].finto || g->ts[t].is_output)
        return -1;
    int uses = 0;
    for (int j = 0; j < g->nn; j++)
        uses += (g->ns[j].in[0] == t) + (g->ns[j].in[1] == t);
    return uses == 1 ? c : -1;
}

static void fuse_adds(tsr_graph_t *g)
{
    for (int i = 0; i < g->nn; i++) {
        gnode_t *n = &g->ns[i];
        if (n->op != TSR_OPK_ADD || n->in[0] == n->in[1])
            continue;
        for (int k = 0; k < 2 && !n->fconv; k++) {
            const int t = n->in[k], c = fusable_conv(g, t);
            if (c < 0)
                continue;
            gnode_t *cv = &g->ns[c];
            n->fk = k;
            const tsr_add_params_t ap = fused_add_params(n);
            if (!tsr_conv2d_add_fits(tsr_device_config(g->dev), cv->tap ? &cv->tconv : &cv->conv, &ap))
                continue;
            n->fconv = c + 1;
            cv->finto = i + 1;
            n->in[k] = cv->in[0];
            g->ts[t].dead = 1;
        }
        if (!n->fconv)
            n->fk = 0;
    }
}

/* Fuse each activation table into the conv feeding it when the conv's
 * output has no other reader and is no graph output (and the conv runs no
 * add): the table's lut step runs in the conv's epilogue
 * (tsr_conv2d_plan_tensors_act), so the conv's output never reaches DRAM
 * and the table costs no pass of its own. As for adds, the act node runs
 * the conv (its input becomes the conv's input), the conv node runs
 * nothing, its output gets no buffer; unplan() undoes it. */
static void fuse_acts(tsr_graph_t *g)
{
    for (int i = 0; i < g->nn; i++) {
        gnode_t *n = &g->ns[i];
        if (n->op != TSR_OPK_ACT)
            continue;
        const int t = n->in[0], c = fusable_conv(g, t);
        if (c < 0)
            continue;
        n->fconv = c + 1;
        n->fk = 0;
        g->ns[c].finto = i + 1;
        n->in[0] = g->ns[c].in[0];
        g->ts[t].dead = 1;
    }
}

/* Every conv's tiling search (with its fused add, if any), run ahead on
 * the CPU's cores: the searches are most of a cold plan, independent of
 * each other, and their results are the same as run one by one in
 * plan_node, which then only builds the chosen streams. */
static int presearch(tsr_graph_t *g)
{
    const double t0 = now_ms();
    tsr_conv2d_job_t *jobs = calloc((size_t)g->nn, sizeof *jobs);
    tsr_add_params_t *adds = calloc((size_t)g->nn, sizeof *adds);
    if (!jobs || !adds) {
        free(jobs);
        free(adds);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    int n = 0;
    for (int i = 0; i < g->nn; i++)
        if (conv_job(g, &g->ns[i], &jobs[n], &adds[n]))
            n++;
    const int threads = tsr_jit_threads();
    const int rc = tsr_conv2d_presearch(g->dev, jobs, n, threads);
    free(jobs);
    free(adds);
    g->search_threads = threads;
    g->search_ms = now_ms() - t0;
    return rc;
}

int tsr_graph_plan(tsr_graph_t *g, tsr_device_t *dev, unsigned flags)
{
    if (!g || !dev)
        return tsr_err(TSR_EINVAL, "graph: NULL graph or device");
    if (g->dev)
        return tsr_err(TSR_EINVAL, "graph: already planned");
    const double t0 = now_ms(), c0 = (double)tsr_process_cpu_ns() / 1e6;
    const tsr_config_t *dc = tsr_device_config(dev);
    if (dc->batch != g->cfg.batch || dc->block_in != g->cfg.block_in || dc->block_out != g->cfg.block_out)
        return tsr_err(TSR_EINVAL, "graph: the device's config has another BATCH/BLOCK than the graph's");
    if (!g->nn)
        return tsr_err(TSR_EINVAL, "graph: no nodes");
    /* reshapes alias their input's bytes, concats' inputs are slices of their output's */
    for (int i = 0; i < g->nn; i++)
        if (g->ns[i].op == TSR_OPK_RESHAPE)
            g->ts[g->ns[i].out].alias = g->ns[i].in[0];
    int rc = concat_views(g);
    g->dev = dev;
    if (!rc && !(flags & TSR_GRAPH_NO_TAPPACK))
        rc = tap_inputs(g);
    if (!rc && !(flags & TSR_GRAPH_NO_FUSE)) {
        fuse_adds(g);
        if (!(flags & TSR_GRAPH_NO_FUSE_ACT))
            fuse_acts(g);
    }
    if (!rc)
        rc = order_nodes(g);
    uint64_t align = 64;
    while (align < dc->inp_bytes || align < dc->wgt_bytes || align < dc->acc_bytes)
        align <<= 1;
    if (!rc)
        rc = place(g, flags, align);
    if (!rc)
        rc = tsr_mem_alloc(dev, g->arena_bytes, &g->arena);
    if (rc)
        goto fail;
    for (int t = 0; t < g->nt; t++) {
        g->ts[t].t.addr = g->ts[root_of(g, t)].dead ? 0 : g->arena + g->ts[root_of(g, t)].off + view_offset(g, t);
        g->ts[t].is_input = 0;
        for (int i = 0; i < g->nn && g->ts[t].producer < 0; i++)
            g->ts[t].is_input |= g->ns[i].in[0] == t || g->ns[i].in[1] == t;
    }
    if ((rc = presearch(g)))
        goto fail;
    for (int k = 0; k < g->nn; k++)
        if ((rc = plan_node(g, &g->ns[g->order[k]])))
            goto fail;
    g->flags = flags;
    if ((flags & TSR_GRAPH_ONE_SUBMISSION) && (rc = join_streams(g)))
        goto fail;
    free(g->pack);
    g->pack = NULL;
    g->pack_cap = 0;
    g->plan_ms = now_ms() - t0;
    g->plan_cpu_ms = (double)tsr_process_cpu_ns() / 1e6 - c0;
    return TSR_OK;
fail:
    free(g->pack);
    g->pack = NULL;
    g->pack_cap = 0;
    unplan(g);
    for (int t = 0; t < g->nt; t++)
        g->ts[t].alias = t, g->ts[t].view_off = 0, g->ts[t].slice = 0;
    return rc;
}

/* ------------------------------------------------------------- execute */

/* A node's stream (NULL for a reshape). */
static const tsr_insn_t *node_stream(const gnode_t *n, size_t *ni)
{
    *ni = 0;
    if (!n->planned)
        return NULL; /* a reshape, or a conv that runs in its add's node */
    tsr_op_figures_t f;
    tsr_op_def(n->plan_kind)->figures(&n->pl, &f);
    *ni = f.ninsns;
    return f.insns;
}

/* TSR_GRAPH_ONE_SUBMISSION: join the layers' streams into one. Every
 * lowering ends in FINISH with pop_next (it waits for the store stage's
 * last token, so every STORE of the layer is done). Between two layers
 * that FINISH becomes a compute-stage token carrier (LOAD acc, x_size 0)
 * that pops the same token and pushes one to the load stage, and the next
 * layer starts with a load-stage carrier (LOAD inp, x_size 0) popping it:
 * no LOAD of the next layer reads DRAM or overwrites an on-chip buffer
 * before the previous layer's last STORE and last compute instruction. A
 * layer with no load-stage instruction (an activation table: its LOADs are
 * compute-stage) gets no load carrier, and the FINISH before it pushes
 * nothing: its compute-stage LOADs follow the carrier in order. */
static int join_streams(tsr_graph_t *g)
{
    size_t total = 0, ni;
    for (int k = 0; k < g->nn; k++)
        if (node_stream(&g->ns[g->order[k]], &ni))
            total += ni + 1;
    g->all = malloc(sizeof *g->all * (total ? total : 1));
    if (!g->all)
        return tsr_err(TSR_ENOMEM, "out of memory");
    size_t n = 0;
    tsr_insn_t *last_finish = NULL;
    for (int k = 0; k < g->nn; k++) {
        const tsr_insn_t *v = node_stream(&g->ns[g->order[k]], &ni);
        if (!v)
            continue;
        if (!ni || v[ni - 1].opcode != TSR_OP_FINISH || !v[ni - 1].pop_next || v[ni - 1].pop_prev ||
            v[ni - 1].push_prev || v[ni - 1].push_next)
            return tsr_err(TSR_EINVAL, "graph: node \"%s\": its stream does not end in FINISH waiting for the "
                           "store stage (cannot be joined)", g->ns[g->order[k]].name);
        int loads = 0; /* an activation table's stream has no load-stage instruction (tsr_act.h) */
        for (size_t i = 0; i < ni && !loads; i++)
            loads = tsr_insn_stage(&v[i]) == TSR_STAGE_LOAD;
        if (last_finish && loads)
            tsr_stream_barrier(last_finish, &g->all[n++]);
        else if (last_finish) {
            /* no load-stage carrier: nothing there would pop it, and the previous FINISH as a compute
               carrier popping the store token already orders the next compute-stage LOADs after the
               previous layer's last STORE (one stage runs in order) */
            tsr_stream_barrier(last_finish, &g->all[n]);
            last_finish->push_prev = 0;
        }
        memcpy(&g->all[n], v, ni * sizeof *v);
        n += ni;
        last_finish = &g->all[n - 1];
    }
    g->nall = n;
    return TSR_OK;
}

static int run_node(tsr_graph_t *g, gnode_t *n)
{
    size_t ni = 0;
    const tsr_insn_t *insns = node_stream(n, &ni);
    if (!insns)
        return TSR_OK; /* reshape: nothing to run */
    tsr_counters_t a, b, d;
    const double t0 = now_ms();
    int rc = tsr_read_counters(g->dev, &a);
    if (!rc)
        rc = tsr_submit(g->dev, insns, ni);
    if (!rc)
        rc = tsr_wait(g->dev, -1);
    if (!rc)
        rc = tsr_read_counters(g->dev, &b);
    if (rc)
        return tsr_err_prefix(rc, "graph: node \"%s\": ", n->name);
    n->L.wall_ms = now_ms() - t0;
    tsr_counters_delta(&a, &b, &d);
    n->L.cycles = (double)d.cycles;
    n->L.moved = tsr_roofline_moved(&d);
    return TSR_OK;
}

int tsr_graph_exec(tsr_graph_t *g, const void *const *inputs, void *const *outputs)
{
    if (!g || !g->dev)
        return tsr_err(TSR_EINVAL, "graph: not planned");
    const double t0 = now_ms();
    int rc = TSR_OK, k = 0;
    /* A timing-only device computes no data: packing the inputs would be
     * all of its host work that is not timing (a tenth of a ResNet-18's
     * first timing-only execution), so they are checked, not written. */
    const int pack = !tsr_device_timing_only(g->dev);
    for (int t = 0; t < g->nt && !rc; t++)
        if (g->ts[t].is_input) {
            if (!inputs || !inputs[k])
                return tsr_err(TSR_EINVAL, "graph: no data for input %d (tensor %d)", k, t);
            if (!pack)
                k++;
            else if (g->ts[t].tap >= 0) { /* the tap-packed layout, packed at the edge */
                const tsr_conv2d_params_t *p = &g->ns[g->ts[t].tap].conv;
                uint8_t *buf = malloc(tsr_tappack_input_bytes(p));
                if (!buf)
                    return tsr_err(TSR_ENOMEM, "out of memory");
                tsr_tappack_pack_input(p, inputs[k++], buf);
                rc = tsr_dtensor_write_nchw(g->dev, &g->ts[t].t, buf);
                free(buf);
            } else
                rc = tsr_dtensor_write_nchw(g->dev, &g->ts[t].t, inputs[k++]);
        }
    if (g->all) { /* one submission for the whole network */
        tsr_counters_t a, b, d;
        if (!(rc = tsr_read_counters(g->dev, &a)) && !(rc = tsr_submit(g->dev, g->all, g->nall)) &&
            !(rc = tsr_wait(g->dev, -1)) && !(rc = tsr_read_counters(g->dev, &b))) {
            tsr_counters_delta(&a, &b, &d);
            g->all_cycles = (double)d.cycles;
            g->all_moved = tsr_roofline_moved(&d);
        }
        if (rc)
            tsr_err_prefix(rc, "graph: the joined stream: ");
    }
    for (int i = 0; i < g->nn && !rc && !g->all; i++)
        rc = run_node(g, &g->ns[g->order[i]]);
    /* (a timing-only device computed no data: its outputs are not read, the
     * caller's buffers are left as they were) */
    for (int j = 0; j < g->nout && !rc && outputs && tsr_device_data_valid(g->dev); j++)
        if (outputs[j])
            rc = tsr_dtensor_read_nchw(g->dev, &g->ts[g->outs[j]].t, outputs[j]);
    g->exec_ms = now_ms() - t0;
    return rc;
}

int tsr_graph_read_tensor(tsr_graph_t *g, int t, void *dst)
{
    if (!g || !g->dev || t < 0 || t >= g->nt || !dst)
        return tsr_err(TSR_EINVAL, "graph: not planned, no tensor %d or NULL destination", t);
    if (g->ts[t].dead)
        return tsr_err(TSR_EINVAL, "graph: tensor %d is the output of conv \"%s\", whose epilogue does the add that "
                       "reads it: it never reaches DRAM (plan with TSR_GRAPH_NO_FUSE to read it back)", t,
                       g->ns[g->ts[t].producer].name);
    if (g->ts[t].tap >= 0)
        return tsr_err(TSR_EINVAL, "graph: input tensor %d is held tap-packed for node \"%s\" (plan with "
                       "TSR_GRAPH_NO_TAPPACK to read it back)", t, g->ns[g->ts[t].tap].name);
    return tsr_dtensor_read_nchw(g->dev, &g->ts[t].t, dst);
}

/* ------------------------------------------------------------- netdesc */

/* A node of any kind (a netdesc node): conv and dense become the graph's
 * conv nodes, the others are kept as they are. */
static int add_kind(tsr_graph_t *g, tsr_op_kind_e kind, const char *name, const int *in, int y, const void *p,
                    const void *w, const int32_t *bias)
{
    if (kind == TSR_OPK_CONV)
        return tsr_graph_conv2d(g, name, in[0], y, p, w, bias);
    if (kind == TSR_OPK_DENSE)
        return tsr_graph_dense(g, name, in[0], y, p, w, bias);
    const tsr_op_def_t *d = tsr_op_def(kind);
    if (!d || !d->check || !p)
        return tsr_err(TSR_EINVAL, "graph: node \"%s\": unknown kind %d", name, (int)kind);
    return plain_node(g, kind, name, in[0], in[1], y, p);
}

int tsr_graph_from_netdesc(const tsr_config_t *cfg, const tsr_netdesc_t *nd, tsr_graph_t **out)
{
    if (!nd || !out)
        return tsr_err(TSR_EINVAL, "graph: NULL network description or result");
    tsr_graph_t *g;
    int rc = tsr_graph_create(cfg, &g);
    if (rc)
        return rc;
    for (int t = 0; t < nd->ntensors && !rc; t++) {
        const tsr_nd_tensor_t *d = &nd->tensors[t];
        int id;
        rc = tsr_graph_tensor(g, d->n, d->c, d->h, d->w, d->dtype, d->zp, &id);
    }
    for (int i = 0; i < nd->nnodes && !rc; i++) {
        const tsr_nd_node_t *n = &nd->nodes[i];
        rc = add_kind(g, (tsr_op_kind_e)n->kind, n->name, n->in, n->out, tsr_nd_node_params(n), n->w, n->bias);
    }
    if (!rc)
        rc = tsr_graph_output(g, nd->output);
    if (rc) {
        tsr_graph_free(g);
        return rc;
    }
    *out = g;
    return TSR_OK;
}

/* ------------------------------------------------------------- queries */

int tsr_graph_ntensors(const tsr_graph_t *g) { return g ? g->nt : 0; }
int tsr_graph_nnodes(const tsr_graph_t *g) { return g ? g->nn : 0; }

const tsr_dtensor_t *tsr_graph_tensor_desc(const tsr_graph_t *g, int t)
{
    return g && t >= 0 && t < g->nt ? &g->ts[t].t : NULL;
}

int tsr_graph_tensor_fused(const tsr_graph_t *g, int t)
{
    return g && g->dev && t >= 0 && t < g->nt && g->ts[t].dead;
}

const char *tsr_graph_producer(const tsr_graph_t *g, int t)
{
    if (!g || t < 0 || t >= g->nt || g->ts[t].producer < 0)
        return "";
    return g->ns[g->ts[t].producer].name;
}

const tsr_graph_layer_t *tsr_graph_layer(const tsr_graph_t *g, int i)
{
    if (!g || !g->order || i < 0 || i >= g->nn)
        return NULL;
    return &g->ns[g->order[i]].L;
}

int tsr_graph_layer_node(const tsr_graph_t *g, int i)
{
    if (!g || !g->order || i < 0 || i >= g->nn)
        return -1;
    const gnode_t *n = &g->ns[g->order[i]];
    return n->fconv ? n->fconv - 1 : g->order[i];
}

const tsr_insn_t *tsr_graph_stream(const tsr_graph_t *g, int i, size_t *n)
{
    *n = 0;
    if (!g || !g->order || i < -1 || i >= g->nn)
        return NULL;
    if (i == -1) {
        *n = g->all ? g->nall : 0;
        return g->all;
    }
    return node_stream(&g->ns[g->order[i]], n);
}

void tsr_graph_set_dram_bw(tsr_graph_t *g, double bytes_per_cycle)
{
    if (!g)
        return;
    g->bw = tsr_roofline_dram_bw(&g->cfg, bytes_per_cycle);
    for (int i = 0; g->dev && i < g->nn; i++) {
        tsr_roofline_t r = tsr_roofline_bound(&g->cfg, g->ns[i].L.macs, g->ns[i].L.compulsory, g->bw);
        g->ns[i].L.bound = r.bound;
        g->ns[i].L.memory_bound = r.memory_bound;
    }
}

void tsr_graph_totals(const tsr_graph_t *g, tsr_graph_totals_t *o)
{
    memset(o, 0, sizeof *o);
    if (!g)
        return;
    for (int i = 0; i < g->nn; i++) {
        const gnode_t *n = &g->ns[i];
        if (runs_nothing(n) || n->finto)
            continue;
        o->layers++;
        o->macs += n->L.macs;
        o->cycles += n->L.cycles;
        o->moved += n->L.moved;
        o->compulsory += n->L.compulsory;
        o->bound += n->L.bound;
        o->jit_ms += n->L.plan_ms;
        o->upload_ms += n->L.upload_ms;
        if (n->L.kcache == TSR_KC_HIT || n->L.kcache == TSR_KC_DISK)
            o->kc_hits++;
        else if (n->L.kcache >= 0)
            o->kc_misses++;
    }
    if (g->all) { /* one submission: only whole-network counters */
        o->cycles = g->all_cycles;
        o->moved = g->all_moved;
    }
    o->exec_ms = g->exec_ms;
    o->plan_ms = g->plan_ms;
    o->plan_cpu_ms = g->plan_cpu_ms;
    o->jit_ms += g->search_ms;
    o->search_ms = g->search_ms;
    o->search_threads = g->search_threads;
    o->peak_bytes = g->arena_bytes;
    o->tensor_bytes = g->tensor_bytes;
    o->weight_bytes = g->weight_bytes;
}

void tsr_graph_print_report(const tsr_graph_t *g, FILE *f)
{
    if (!g || !g->order)
        return;
    const double peak = (double)g->cfg.macs_per_op;
    fprintf(f, "%-3s %-18s %-10s %-26s %11s %10s %6s %10s %6s %-7s %10s %10s %7s %-4s\n", "#", "layer", "op", "shape",
            "MACs", "cycles", "util", "bound", "ratio", "limit", "moved", "compulsory", "plan_ms", "jit");
    static const char *kcn[] = {"off", "miss", "hit", "disk"};
    int k = 0;
    for (int i = 0; i < g->nn; i++) {
        const gnode_t *n = &g->ns[g->order[i]];
        if (runs_nothing(n) || n->finto)
            continue;
        const tsr_graph_layer_t *L = &n->L;
        char cyc[24] = "-", util[16] = "-", ratio[16] = "-";
        if (L->cycles > 0) {
            snprintf(cyc, sizeof cyc, "%.0f", L->cycles);
            snprintf(util, sizeof util, "%.3f", L->macs / (L->cycles * peak));
            snprintf(ratio, sizeof ratio, "%.3f", L->bound / L->cycles);
        }
        fprintf(f, "%-3d %-18.18s %-10s %-26.26s %11.0f %10s %6s %10.0f %6s %-7s %10.0f %10.0f %7.2f %-4s\n", k++,
                L->name, L->op, L->shape, L->macs, cyc, util, L->bound, ratio, L->memory_bound ? "memory" : "compute",
                L->moved, L->compulsory, L->plan_ms, L->kcache >= 0 && L->kcache < 4 ? kcn[L->kcache] : "-");
    }
    tsr_graph_totals_t t;
    tsr_graph_totals(g, &t);
    char cyc[24] = "-", util[16] = "-", ratio[16] = "-";
    if (t.cycles > 0) {
        snprintf(cyc, sizeof cyc, "%.0f", t.cycles);
        snprintf(util, sizeof util, "%.3f", t.macs / (t.cycles * peak));
        snprintf(ratio, sizeof ratio, "%.3f", t.bound / t.cycles);
    }
    fprintf(f, "%-3s %-18s %-10s %-26s %11.0f %10s %6s %10.0f %6s %-7s %10.0f %10.0f %7.2f %-4s\n", "", "total", "-", "-",
            t.macs, cyc, util, t.bound, ratio, "-", t.moved, t.compulsory, t.plan_ms, "-");
    fprintf(f, "layers %d; DRAM moved %.0f B vs compulsory %.0f B (%.2fx); activations: peak device DRAM %llu B vs "
               "sum of tensors %llu B (%.2f of it); weights and constants %llu B\n",
            t.layers, t.moved, t.compulsory, t.compulsory > 0 ? t.moved / t.compulsory : 0.0,
            (unsigned long long)t.peak_bytes, (unsigned long long)t.tensor_bytes,
            t.tensor_bytes ? (double)t.peak_bytes / (double)t.tensor_bytes : 0.0, (unsigned long long)t.weight_bytes);
    /* one execution is one batch: N images (N of the graph's tensors; the first one's, as declared) */
    const int batch = !g->nt ? 1 : g->ts[0].tap >= 0 ? g->ts[0].orig.n : g->ts[0].t.n;
    if (t.cycles > 0)
        fprintf(f, "total cycles %.0f, sum of per-layer bounds %.0f, ratio %.3f; %.1f images/s at %d MHz (batch of %d "
                "per execution)\n", t.cycles, t.bound, t.bound / t.cycles, batch * (g->cfg.clock_mhz * 1e6 / t.cycles),
                g->cfg.clock_mhz, batch);
    fprintf(f, "plan %.1f ms wall, %.1f ms CPU: operators %.1f ms (%d kernels generated, %d from the cache; of it "
               "tiling searches %.1f ms on %d threads), weights packed and uploaded %.1f ms; last execution %.1f ms wall\n",
            t.plan_ms, t.plan_cpu_ms, t.jit_ms, t.kc_misses, t.kc_hits, t.search_ms, t.search_threads, t.upload_ms,
            t.exec_ms);
}
