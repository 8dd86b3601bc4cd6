/* tsr_pipeexec: a network pipelined over K devices (tsr_pipeexec.h). */
#include "tsr_pipeexec.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_graph.h"
#include "tsr_pipenet.h"
#include "tsr_util.h"

/* ------------------------------------------------------------ bounded queues */

/* A bundle: one input's tensors that cross stage boundaries (host memory:
 * the host-mediated side of every transfer), indexed by network tensor. */
typedef struct {
    int idx;
    uint8_t **buf;        /* per network tensor, then (NBUF) the tail slice stage s sends: ntensors + s */
} bundle_t;

#define NBUF(nd) ((nd)->ntensors + TSR_MDEV_MAX)

typedef struct {
    bundle_t **ring;
    int cap, head, n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int *abort;    /* the run's stop flag (written under another lock: atomic) */
} queue_t;

/* 0, or -1 when the pipeline stopped. */
static int q_push(queue_t *q, bundle_t *b)
{
    pthread_mutex_lock(&q->mu);
    while (q->n == q->cap && !*q->abort)
        pthread_cond_wait(&q->cv, &q->mu);
    int rc = *q->abort ? -1 : 0;
    if (!rc) {
        q->ring[(q->head + q->n) % q->cap] = b;
        q->n++;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

static bundle_t *q_pop(queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    while (!q->n && !*q->abort)
        pthread_cond_wait(&q->cv, &q->mu);
    bundle_t *b = NULL;
    if (!*q->abort) {
        b = q->ring[q->head];
        q->head = (q->head + 1) % q->cap;
        q->n--;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return b;
}

static void q_wake(queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* ------------------------------------------------------------ the run */

typedef struct stage stage_t;
typedef struct run run_t;

struct stage {
    int s, dev;
    tsr_graph_t *g;
    int nin, nout;
    int *in_t, *out_t;    /* network tensor ids, ascending (the graph's input / output order) */
    double link;          /* link cycles per input */
    uint64_t bytes_in, bytes_out;
    double *cyc;          /* per input: measured device cycles, in the first device's clock */
    double clock;         /* the first device's clock / this device's (mixed configs) */
    run_t *run;
    /* a split stage (parts > 1): its one conv in parts output-channel parts, part j a graph gp[j] on device
     * devs[j] (devs[0] = dev, g unused); the host concatenates the parts' outputs pbuf[j] */
    int parts;
    int devs[TSR_PP_MAX_SPLIT];
    tsr_graph_t *gp[TSR_PP_MAX_SPLIT];
    uint8_t *pbuf[TSR_PP_MAX_SPLIT];
    uint64_t slice;       /* bytes of one part's output per batch item */
    int batch;
    double clk[TSR_PP_MAX_SPLIT];
    /* a shared boundary (tsr_pp_solve_shared): head node hv's channels [hc0, C) run first on this device as
     * graph gh (its input -> slice hbuf); the host joins the earlier stage's slice (bundle slot
     * ntensors + s - 1, channels [0, hc0)) and hbuf into hv's output, an input of g. The tail node tv's
     * channels [0, tc1) run in g, their slice an output of g after the network tensors (bundle slot
     * ntensors + s). */
    int hv, hc0, tv, tc1;
    tsr_graph_t *gh;
    uint8_t *hbuf;
    int gnin;
    int *gin_t;           /* g's inputs (network tensor ids, ascending: the graph's input order) */
    int nextra;
    uint64_t extra[4];    /* the shared boundary's transfers: the earlier slice in, this part's slice out and
                             back in, the tail slice out (bytes) */
    /* a stage with host nodes (dev -1: a host stage): its nodes in pieces, run in order on its thread */
    int npc;
    struct piece *pc;
    int nhx;
    uint64_t *hx;         /* a device stage's host nodes: their inputs to the host and outputs back (bytes) */
    double *hcyc;         /* per input: measured host cycles */
};

struct run {
    tsr_mdev_t *m;
    const tsr_netdesc_t *nd;
    const tsr_pipex_opts_t *o;
    int ns, n;
    stage_t *st;
    queue_t *q;           /* q[s]: from stage s to s + 1 */
    atomic_int abort;     /* set by the first failure; every thread and queue reads it */
    pthread_mutex_t emu;
    int err, err_stage;   /* the first failure */
    char errmsg[512];
    uint8_t **outs;       /* per input: the network output */
    int corrupt;          /* stage whose received tensors get a byte flipped (0: none) */
    const tsr_pipenet_host_t *host; /* host nodes (NULL: none) */
    double clock0;        /* the first device's clock (MHz): the host model's cycles */
};

static void bundle_free(const tsr_netdesc_t *nd, bundle_t *b)
{
    if (!b)
        return;
    for (int t = 0; t < NBUF(nd); t++)
        free(b->buf[t]);
    free(b->buf);
    free(b);
}

static void run_fail(run_t *r, int s, int rc)
{
    pthread_mutex_lock(&r->emu);
    if (!r->err) {
        r->err = rc;
        r->err_stage = s;
        snprintf(r->errmsg, sizeof r->errmsg, "%s", tsr_errmsg());
    }
    r->abort = 1;
    pthread_mutex_unlock(&r->emu);
    for (int i = 0; i < r->ns - 1; i++)
        q_wake(&r->q[i]);
}

/* A split stage on one input: each part on its device (one after another
 * on this host thread; the devices' cycles are the measure, and the parts
 * would run side by side on K devices), every device charged the whole
 * input and its slice of the output; then the host concatenates the slices
 * along C into y (NCHW: per batch item, part j's channels after part j-1's).
 * *cyc gets the slowest part's cycles (the stage's time: the parts run in
 * parallel). */
static int split_exec(run_t *r, stage_t *st, const void **in, void *y, double *cyc)
{
    const tsr_netdesc_t *nd = r->nd;
    double worst = 0;
    for (int j = 0; j < st->parts; j++) {
        void *po[1] = {st->pbuf[j]};
        tsr_mdev_run_lock(r->m, st->devs[j]);
        int rc = tsr_graph_exec(st->gp[j], in, po);
        tsr_mdev_run_unlock(r->m, st->devs[j]);
        if (rc)
            return tsr_err_prefix(rc, "split part %d on device %d: ", j, st->devs[j]);
        tsr_graph_totals_t t;
        tsr_graph_totals(st->gp[j], &t);
        if (t.cycles * st->clk[j] > worst)
            worst = t.cycles * st->clk[j];
        for (int k = 0; k < st->nin; k++)
            tsr_mdev_charge(r->m, st->devs[j], tsr_netdesc_tensor_bytes(nd, st->in_t[k]));
        tsr_mdev_charge(r->m, st->devs[j], st->slice * (uint64_t)st->batch);
    }
    for (int b = 0; b < st->batch; b++)
        for (int j = 0; j < st->parts; j++)
            memcpy((uint8_t *)y + ((size_t)b * (size_t)st->parts + (size_t)j) * st->slice,
                   st->pbuf[j] + (size_t)b * st->slice, st->slice);
    *cyc = worst;
    return TSR_OK;
}

/* ------------------------------------------------------------ host nodes and pieces */

/* Virtual node v: a node of nd (v < nnodes) or host node v - nnodes: its
 * inputs and output tensor. */
static void vnode_io(const tsr_netdesc_t *nd, const tsr_pipenet_host_t *H, int v, int in[2], int *out)
{
    if (v < nd->nnodes) {
        in[0] = nd->nodes[v].in[0], in[1] = nd->nodes[v].in[1], *out = nd->nodes[v].out;
    } else {
        in[0] = H->in_t[v - nd->nnodes], in[1] = H->in2_t ? H->in2_t[v - nd->nnodes] : -1;
        *out = H->out_t[v - nd->nnodes];
    }
}

static const char *vname(const tsr_netdesc_t *nd, const tsr_pipenet_host_t *H, int v)
{
    if (v >= 0 && v < nd->nnodes)
        return nd->nodes[v].name;
    return H && v >= nd->nnodes && v < nd->nnodes + H->n && H->names[v - nd->nnodes] ? H->names[v - nd->nnodes] : "?";
}

static int nhost(const tsr_pipenet_host_t *H) { return H && H->n > 0 ? H->n : 0; }

/* A piece of a stage with host nodes: one host node, or a graph of
 * consecutive device nodes (its inputs and outputs network tensors). */
typedef struct piece {
    int h;                /* host node, or -1 */
    tsr_graph_t *g;
    int nin, nout;
    int *in_t, *out_t;
} piece_t;

static void pieces_free(piece_t *pc, int n)
{
    for (int i = 0; pc && i < n; i++) {
        tsr_graph_free(pc[i].g);
        free(pc[i].in_t), free(pc[i].out_t);
    }
    free(pc);
}

/* Node nn into graph g (tensors mapped by local). */
static int graph_add_node(tsr_graph_t *g, const tsr_nd_node_t *nn, const int *local)
{
    int x = local[nn->in[0]], y = local[nn->out];
    switch (nn->kind) {
    case TSR_ND_CONV: return tsr_graph_conv2d(g, nn->name, x, y, &nn->conv, nn->w, nn->bias);
    case TSR_ND_DENSE: return tsr_graph_dense(g, nn->name, x, y, &nn->dense, nn->w, nn->bias);
    case TSR_ND_POOL: return tsr_graph_pool(g, nn->name, x, y, &nn->pool);
    case TSR_ND_ADD: return tsr_graph_add(g, nn->name, x, local[nn->in[1]], y, &nn->add);
    case TSR_ND_CLIP: return tsr_graph_clip(g, nn->name, x, y, &nn->clip);
    case TSR_ND_ACT: return tsr_graph_act(g, nn->name, x, y, &nn->act.table);
    case TSR_ND_MUL: return tsr_graph_mul(g, nn->name, x, local[nn->in[1]], y, &nn->mul);
    case TSR_ND_GAVG: return tsr_graph_gavg(g, nn->name, x, y, &nn->gavg);
    case TSR_ND_SOFTMAX: return tsr_graph_softmax(g, nn->name, x, y, &nn->softmax);
    case TSR_ND_CONCAT: return tsr_graph_concat(g, nn->name, x, local[nn->in[1]], y);
    }
    return tsr_err(TSR_EINVAL, "pipeline: node \"%s\": unknown kind %d", nn->name, (int)nn->kind);
}

/* The pieces of nodes vn[0..n) (virtual nodes in a topological order):
 * each run of device nodes a graph planned on dev (its inputs the tensors
 * it reads and does not make, ascending; its outputs the tensors it makes
 * that any other virtual node reads, or the network output), each host node
 * a piece of its own; cut (NULL: none): cut[k] starts a new piece at vn[k]
 * too (a non-contiguous stage: its nodes between other stages' nodes). */
static int pieces_build(const tsr_netdesc_t *nd, const tsr_pipenet_host_t *H, const tsr_config_t *cfg,
                        tsr_device_t *dev, unsigned flags, const int *vn, const char *cut, int n, piece_t **out,
                        int *np)
{
    int V = nd->nnodes + nhost(H);
    *out = NULL, *np = 0;
    piece_t *pc = calloc((size_t)n + 1, sizeof *pc);
    int *piece_of = malloc(sizeof(int) * (size_t)V), *local = malloc(sizeof(int) * (size_t)nd->ntensors);
    char *use = malloc((size_t)nd->ntensors), *made = malloc((size_t)nd->ntensors);
    int rc = pc && piece_of && local && use && made ? TSR_OK : tsr_err(TSR_ENOMEM, "out of memory"), npc = 0;
    for (int v = 0; v < V && !rc; v++)
        piece_of[v] = -1;
    for (int k = 0; k < n && !rc; k++) {
        int v = vn[k];
        if (v >= nd->nnodes || !k || vn[k - 1] >= nd->nnodes || (cut && cut[k]))
            pc[npc++].h = v >= nd->nnodes ? v - nd->nnodes : -1;
        piece_of[v] = npc - 1;
    }
    for (int p = 0; p < npc && !rc; p++) {
        piece_t *q = &pc[p];
        if (q->h >= 0)
            continue;
        memset(use, 0, (size_t)nd->ntensors), memset(made, 0, (size_t)nd->ntensors);
        for (int v = 0; v < nd->nnodes; v++)
            if (piece_of[v] == p) {
                const tsr_nd_node_t *nn = &nd->nodes[v];
                use[nn->out] = made[nn->out] = 1;
                for (int j = 0; j < 2; j++)
                    if (nn->in[j] >= 0)
                        use[nn->in[j]] = 1;
            }
        q->in_t = malloc(sizeof(int) * (size_t)nd->ntensors);
        q->out_t = malloc(sizeof(int) * (size_t)nd->ntensors);
        if (!q->in_t || !q->out_t || (rc = tsr_graph_create(cfg, &q->g))) {
            rc = rc ? rc : tsr_err(TSR_ENOMEM, "out of memory");
            break;
        }
        for (int t = 0; t < nd->ntensors && !rc; t++) {
            local[t] = -1;
            if (!use[t])
                continue;
            const tsr_nd_tensor_t *d = &nd->tensors[t];
            rc = tsr_graph_tensor(q->g, d->n, d->c, d->h, d->w, d->dtype, d->zp, &local[t]);
            if (!made[t])
                q->in_t[q->nin++] = t;
            int outside = t == nd->output;
            for (int w = 0; w < V && made[t] && !outside; w++) {
                int wi[2], wo;
                vnode_io(nd, H, w, wi, &wo);
                outside = piece_of[w] != p && (wi[0] == t || wi[1] == t);
            }
            if (made[t] && outside)
                q->out_t[q->nout++] = t;
        }
        for (int k = 0; k < n && !rc; k++)
            if (piece_of[vn[k]] == p)
                rc = graph_add_node(q->g, &nd->nodes[vn[k]], local);
        for (int j = 0; j < q->nout && !rc; j++)
            rc = tsr_graph_output(q->g, local[q->out_t[j]]);
        if (!rc && dev)
            rc = tsr_graph_plan(q->g, dev, flags);
        if (rc)
            tsr_err_prefix(rc, "the stage's device nodes from \"%s\": ", vname(nd, H, vn[0]));
    }
    free(piece_of), free(local), free(use), free(made);
    if (rc) {
        pieces_free(pc, npc);
        return rc;
    }
    *out = pc, *np = npc;
    return TSR_OK;
}

/* Run the pieces on one input: buf[t] the network tensors' bytes (a piece's
 * outputs allocated here when missing). Device pieces on device d of m (its
 * run lock; m NULL: a device of its own), their cycles times clock into
 * *dev_cyc; host nodes' wall time by the host model (clock0 MHz) into
 * *host_cyc. skip: host nodes not run (a test's broken pipeline). */
static int pieces_exec(tsr_mdev_t *m, int d, double clock, double clock0, const tsr_netdesc_t *nd,
                       const tsr_pipenet_host_t *H, int skip, const piece_t *pc, int npc, uint8_t **buf,
                       double *dev_cyc, double *host_cyc)
{
    *dev_cyc = *host_cyc = 0;
    int rc = TSR_OK;
    for (int p = 0; p < npc && !rc; p++) {
        const piece_t *q = &pc[p];
        if (q->h >= 0) {
            int a = H->in_t[q->h], a2 = H->in2_t ? H->in2_t[q->h] : -1, b = H->out_t[q->h];
            if (!buf[b] && !(buf[b] = calloc(1, tsr_netdesc_tensor_bytes(nd, b) + 1)))
                return tsr_err(TSR_ENOMEM, "out of memory");
            if (!buf[a] || (a2 >= 0 && !buf[a2]))
                return tsr_err(TSR_EINVAL, "host node \"%s\": no input", H->names[q->h]);
            if (skip)
                continue;
            uint64_t t0 = tsr_pipenet_host_clock_ns();
            if ((rc = H->run(H->ctx, q->h, buf[a], a2 >= 0 ? buf[a2] : NULL, buf[b])))
                return tsr_err_prefix(rc, "host node \"%s\": ", H->names[q->h]);
            *host_cyc += tsr_pipenet_host_cycles((double)(tsr_pipenet_host_clock_ns() - t0), clock0) *
                         (H->scale > 0 ? H->scale : 1);
            continue;
        }
        const void **in = calloc((size_t)q->nin + 1, sizeof *in);
        void **out = calloc((size_t)q->nout + 1, sizeof *out);
        if (!in || !out)
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        for (int j = 0; j < q->nin && !rc; j++)
            if (!(in[j] = buf[q->in_t[j]]))
                rc = tsr_err(TSR_EINVAL, "pipeline: tensor %d is missing", q->in_t[j]);
        for (int j = 0; j < q->nout && !rc; j++)
            if (!(out[j] = buf[q->out_t[j]]) &&
                !(out[j] = buf[q->out_t[j]] = malloc(tsr_netdesc_tensor_bytes(nd, q->out_t[j]) + 1)))
                rc = tsr_err(TSR_ENOMEM, "out of memory");
        if (!rc) {
            if (m)
                tsr_mdev_run_lock(m, d);
            rc = tsr_graph_exec(q->g, in, out);
            if (m)
                tsr_mdev_run_unlock(m, d);
        }
        if (!rc) {
            tsr_graph_totals_t t;
            tsr_graph_totals(q->g, &t);
            *dev_cyc += t.cycles * clock;
        }
        free(in), free(out);
    }
    return rc;
}

/* One input through a stage without host nodes: its graph (a split
 * stage's parts, a shared boundary's head part and join); the measured
 * cycles and the link charged. */
static int stage_graphs(run_t *r, stage_t *st, bundle_t *b, const void **in, void **out, int i)
{
    const tsr_netdesc_t *nd = r->nd;
    int rc = TSR_OK;
    for (int j = 0; j < st->nout && !rc; j++)
        if (!(out[j] = b->buf[st->out_t[j]] = malloc(tsr_netdesc_tensor_bytes(nd, st->out_t[j]))))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
    double hcyc = 0;
    if (!rc && st->tv >= 0) { /* the tail slice: g's last output */
        uint64_t nb = tsr_netdesc_tensor_bytes(nd, nd->nodes[st->tv].out) / (uint64_t)nd->nodes[st->tv].conv.c_out *
                      (uint64_t)st->tc1;
        if (!(out[st->nout] = b->buf[nd->ntensors + st->s] = malloc(nb)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
    }
    if (!rc && st->hv >= 0) { /* the head part, then the join on the host */
        const tsr_nd_node_t *hn = &nd->nodes[st->hv];
        const void *hin[1] = {b->buf[hn->in[0]]};
        void *hout[1] = {st->hbuf};
        tsr_mdev_run_lock(r->m, st->dev);
        rc = tsr_graph_exec(st->gh, hin, hout);
        tsr_mdev_run_unlock(r->m, st->dev);
        tsr_graph_totals_t ht;
        tsr_graph_totals(st->gh, &ht);
        hcyc = ht.cycles * st->clock;
        const tsr_nd_tensor_t *y = &nd->tensors[hn->out];
        uint64_t plane = (uint64_t)y->h * (uint64_t)y->w, C = (uint64_t)hn->conv.c_out, c0 = (uint64_t)st->hc0;
        uint8_t *full = rc ? NULL : malloc(tsr_netdesc_tensor_bytes(nd, hn->out));
        const uint8_t *a = b->buf[nd->ntensors + st->s - 1];
        if (!rc && (!full || !a))
            rc = tsr_err(TSR_ENOMEM, "out of memory (or no slice from stage %d)", st->s - 1);
        for (int i = 0; !rc && i < y->n; i++) { /* NCHW: per batch item, channels [0, c0) then [c0, C) */
            memcpy(full + (uint64_t)i * C * plane, a + (uint64_t)i * c0 * plane, c0 * plane);
            memcpy(full + ((uint64_t)i * C + c0) * plane, st->hbuf + (uint64_t)i * (C - c0) * plane,
                   (C - c0) * plane);
        }
        if (rc)
            free(full);
        else {
            free(b->buf[hn->out]);
            b->buf[hn->out] = full;
            free(b->buf[nd->ntensors + st->s - 1]);
            b->buf[nd->ntensors + st->s - 1] = NULL;
        }
    }
    if (st->gin_t) /* the stage's graph (a split stage's parts read the stage's inputs) */
        for (int j = 0; j < st->gnin; j++)
            in[j] = b->buf[st->gin_t[j]];
    else
        for (int j = 0; j < st->nin; j++)
            in[j] = b->buf[st->in_t[j]];
    tsr_graph_totals_t t;
    if (!rc && st->parts > 1) {
        rc = split_exec(r, st, in, out[0], &st->cyc[i]);
    } else if (!rc) {
        tsr_mdev_run_lock(r->m, st->dev);
        rc = tsr_graph_exec(st->g, in, out);
        tsr_mdev_run_unlock(r->m, st->dev);
    }
    if (rc)
        return rc;
    if (st->parts == 1) {
        tsr_graph_totals(st->g, &t);
        st->cyc[i] = t.cycles * st->clock + hcyc; /* cycles of the first device's clock, as the plan's */
        /* the link: this device receives its inputs and sends its outputs */
        for (int j = 0; j < st->nin; j++)
            tsr_mdev_charge(r->m, st->dev, tsr_netdesc_tensor_bytes(nd, st->in_t[j]));
        for (int j = 0; j < st->nout; j++)
            tsr_mdev_charge(r->m, st->dev, tsr_netdesc_tensor_bytes(nd, st->out_t[j]));
        for (int j = 0; j < st->nextra; j++)
            tsr_mdev_charge(r->m, st->dev, st->extra[j]);
    }
    return TSR_OK;
}

/* One input through a stage with host nodes: its pieces in order; the
 * measured cycles (device and host) and the link charged (a device stage:
 * its inputs and outputs, and each host node's round trip). */
static int stage_pieces(run_t *r, stage_t *st, bundle_t *b, int i)
{
    double dc = 0, hc = 0;
    int rc = pieces_exec(st->dev >= 0 ? r->m : NULL, st->dev, st->clock, r->clock0, r->nd, r->host, r->o->skip_host,
                         st->pc, st->npc, b->buf, &dc, &hc);
    if (rc)
        return rc;
    st->cyc[i] = dc + hc;
    st->hcyc[i] = hc;
    if (st->dev >= 0) {
        for (int j = 0; j < st->nin; j++)
            tsr_mdev_charge(r->m, st->dev, tsr_netdesc_tensor_bytes(r->nd, st->in_t[j]));
        for (int j = 0; j < st->nout; j++)
            tsr_mdev_charge(r->m, st->dev, tsr_netdesc_tensor_bytes(r->nd, st->out_t[j]));
        for (int j = 0; j < st->nhx; j++)
            tsr_mdev_charge(r->m, st->dev, st->hx[j]);
    }
    return TSR_OK;
}

static void *stage_main(void *arg)
{
    stage_t *st = arg;
    run_t *r = st->run;
    const tsr_netdesc_t *nd = r->nd;
    const void **in = calloc((size_t)st->nin + 2, sizeof *in);
    void **out = calloc((size_t)st->nout + 2, sizeof *out);
    if (!in || !out) {
        run_fail(r, st->s, tsr_err(TSR_ENOMEM, "out of memory"));
        goto done;
    }
    for (int i = 0; i < r->n && !r->abort; i++) {
        bundle_t *b;
        int rc = TSR_OK;
        if (st->s == 0) {
            b = calloc(1, sizeof *b);
            if (b && !(b->buf = calloc((size_t)NBUF(nd), sizeof *b->buf))) {
                free(b);
                b = NULL;
            }
            if (b && !(b->buf[0] = malloc(tsr_netdesc_tensor_bytes(nd, 0))))
                bundle_free(nd, b), b = NULL;
            if (!b) {
                run_fail(r, st->s, tsr_err(TSR_ENOMEM, "out of memory"));
                break;
            }
            b->idx = i;
            if (r->o->inputs)
                memcpy(b->buf[0], r->o->inputs[i], tsr_netdesc_tensor_bytes(nd, 0));
            else
                tsr_netdesc_random_input(nd, r->o->seed + (uint64_t)i, b->buf[0]);
        } else if (!(b = q_pop(&r->q[st->s - 1])))
            break; /* stopped */
        for (int j = 0; j < st->nin; j++)
            if (r->corrupt == st->s && st->in_t[j] != 0) /* the test's broken transfer */
                b->buf[st->in_t[j]][0] ^= 0x5a;
        if (st->npc)
            rc = stage_pieces(r, st, b, i);
        else
            rc = stage_graphs(r, st, b, in, out, i);
        if (rc) {
            bundle_free(nd, b);
            run_fail(r, st->s, rc);
            break;
        }
        if (st->s == r->ns - 1) { /* results in order: the stream is FIFO through every stage */
            r->outs[b->idx] = b->buf[nd->output];
            b->buf[nd->output] = NULL;
            bundle_free(nd, b);
        } else if (q_push(&r->q[st->s], b)) {
            bundle_free(nd, b);
            break;
        }
    }
done:
    free(in);
    free(out);
    return NULL;
}

/* Build stage s's graph over the network's tensors it touches (a shared
 * head node is not in it: its joined output is an input; a shared tail
 * node is its slice, an output after the network tensors); st->gin_t gets
 * the graph's inputs. */
static int stage_graph(const tsr_netdesc_t *nd, const tsr_config_t *cfg, const tsr_pp_stage_t *ps, stage_t *st)
{
    int *local = malloc(sizeof(int) * (size_t)nd->ntensors);
    char *use = calloc((size_t)nd->ntensors, 1), *made = calloc((size_t)nd->ntensors, 1);
    st->gin_t = malloc(sizeof(int) * (size_t)(nd->ntensors + 1));
    st->gnin = 0;
    tsr_graph_t *g = NULL;
    int k0 = st->hv >= 0 ? 1 : 0, k1 = ps->nnodes - (st->tv >= 0 ? 1 : 0), ly = -1;
    int rc = local && use && made && st->gin_t ? tsr_graph_create(cfg, &g) : tsr_err(TSR_ENOMEM, "out of memory");
    for (int k = k0; k < ps->nnodes && !rc; k++) {
        const tsr_nd_node_t *nn = &nd->nodes[ps->nodes[k]];
        if (k < k1)
            use[nn->out] = made[nn->out] = 1;
        for (int j = 0; j < 2; j++)
            if (nn->in[j] >= 0)
                use[nn->in[j]] = 1;
    }
    for (int t = 0; t < nd->ntensors && !rc; t++) {
        local[t] = -1;
        if (use[t]) {
            const tsr_nd_tensor_t *d = &nd->tensors[t];
            rc = tsr_graph_tensor(g, d->n, d->c, d->h, d->w, d->dtype, d->zp, &local[t]);
            if (!made[t])
                st->gin_t[st->gnin++] = t;
        }
    }
    tsr_nd_node_t tail;
    if (!rc && st->tv >= 0 && !(rc = tsr_pipenet_slice_part(nd, st->tv, 0, st->tc1, &tail))) {
        const tsr_nd_tensor_t *d = &nd->tensors[tail.out];
        if (!(rc = tsr_graph_tensor(g, d->n, st->tc1, d->h, d->w, d->dtype, d->zp, &ly)))
            rc = tsr_graph_conv2d(g, tail.name, local[tail.in[0]], ly, &tail.conv, tail.w, tail.bias);
    }
    for (int k = k0; k < k1 && !rc; k++) {
        rc = graph_add_node(g, &nd->nodes[ps->nodes[k]], local);
    }
    for (int j = 0; j < st->nout && !rc; j++)
        rc = tsr_graph_output(g, local[st->out_t[j]]);
    if (!rc && ly >= 0)
        rc = tsr_graph_output(g, ly);
    free(local);
    free(use);
    free(made);
    if (rc) {
        tsr_graph_free(g);
        return rc;
    }
    st->g = g;
    return TSR_OK;
}

/* Part j's graph of split stage st (node v in st->parts parts): the whole
 * input, the part's output slice. */
static int split_graph(const tsr_netdesc_t *nd, const tsr_config_t *cfg, int v, int parts, int j, tsr_graph_t **out)
{
    tsr_nd_node_t part;
    int rc = tsr_pipenet_split_part(nd, v, parts, j, &part);
    if (rc)
        return rc;
    const tsr_nd_tensor_t *x = &nd->tensors[part.in[0]], *y = &nd->tensors[part.out];
    tsr_graph_t *g = NULL;
    int lx, ly;
    if (!(rc = tsr_graph_create(cfg, &g)) && !(rc = tsr_graph_tensor(g, x->n, x->c, x->h, x->w, x->dtype, x->zp, &lx)) &&
        !(rc = tsr_graph_tensor(g, y->n, part.conv.c_out, y->h, y->w, y->dtype, y->zp, &ly)) &&
        !(rc = tsr_graph_conv2d(g, part.name, lx, ly, &part.conv, part.w, part.bias)))
        rc = tsr_graph_output(g, ly);
    if (rc) {
        tsr_graph_free(g);
        return rc;
    }
    *out = g;
    return TSR_OK;
}

/* The graph of node v's output channels [c0, c1) alone: v's input, the slice. */
static int slice_graph(const tsr_netdesc_t *nd, const tsr_config_t *cfg, int v, int c0, int c1, tsr_graph_t **out)
{
    tsr_nd_node_t part;
    int rc = tsr_pipenet_slice_part(nd, v, c0, c1, &part);
    if (rc)
        return rc;
    const tsr_nd_tensor_t *x = &nd->tensors[part.in[0]], *y = &nd->tensors[part.out];
    tsr_graph_t *g = NULL;
    int lx, ly;
    if (!(rc = tsr_graph_create(cfg, &g)) && !(rc = tsr_graph_tensor(g, x->n, x->c, x->h, x->w, x->dtype, x->zp, &lx)) &&
        !(rc = tsr_graph_tensor(g, y->n, c1 - c0, y->h, y->w, y->dtype, y->zp, &ly)) &&
        !(rc = tsr_graph_conv2d(g, part.name, lx, ly, &part.conv, part.w, part.bias)))
        rc = tsr_graph_output(g, ly);
    if (rc) {
        tsr_graph_free(g);
        return rc;
    }
    *out = g;
    return TSR_OK;
}

/* The cycles of graph g (one input of xb bytes, seeded random; one output
 * of yb bytes) planned and run on a fresh device; frees g. rc: the error of
 * building g (then it only frees). what prefixes an error. */
static int time_graph(int rc, tsr_graph_t *g, const char *backend, const tsr_config_t *cfg,
                      const tsr_device_opts_t *dopts, uint64_t xb, uint64_t yb, unsigned flags, uint64_t seed,
                      double *cycles, const char *what)
{
    tsr_device_t *dev = NULL;
    uint8_t *x = NULL, *y = NULL;
    if (!rc) {
        x = malloc(xb);
        y = malloc(yb);
        rc = x && y ? tsr_device_open(backend ? backend : "fsim", cfg, dopts, &dev) : tsr_err(TSR_ENOMEM, "out of memory");
        uint64_t z = seed;
        for (uint64_t i = 0; x && i < xb; i++)
            x[i] = (uint8_t)tsr_splitmix64(&z);
    }
    if (!rc)
        rc = tsr_graph_plan(g, dev, flags);
    if (!rc) {
        const void *in[1] = {x};
        void *out[1] = {y};
        rc = tsr_graph_exec(g, in, out);
    }
    if (!rc) {
        tsr_graph_totals_t t;
        tsr_graph_totals(g, &t);
        *cycles = t.cycles;
    }
    tsr_graph_free(g);
    tsr_device_close(dev);
    free(x), free(y);
    return rc ? tsr_err_prefix(rc, "%s", what) : TSR_OK;
}

int tsr_pipex_calibrate_slice(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *dopts,
                              const tsr_netdesc_t *nd, int v, int c0, int c1, unsigned flags, uint64_t seed,
                              double *cycles)
{
    if (!cfg || !nd || !cycles || v < 0 || v >= nd->nnodes)
        return tsr_err(TSR_EINVAL, "calibrate slice: bad argument");
    *cycles = 0;
    tsr_graph_t *g = NULL;
    int rc = slice_graph(nd, cfg, v, c0, c1, &g);
    const tsr_nd_node_t *nn = &nd->nodes[v];
    return time_graph(rc, g, backend, cfg, dopts, tsr_netdesc_tensor_bytes(nd, nn->in[0]),
                      tsr_netdesc_tensor_bytes(nd, nn->out), flags, seed, cycles, "calibrate slice: ");
}

/* The plan against the network and the system: everything refused here is
 * refused before any device runs. stage_of[v] gets node v's stage. */
static int check_plan(tsr_mdev_t *m, const tsr_netdesc_t *nd, const tsr_pipenet_host_t *H, const tsr_pp_t *pp,
                      const tsr_pp_plan_t *plan, int *stage_of)
{
    int K = tsr_mdev_count(m), NH = nhost(H), V = nd->nnodes + NH;
    if (tsr_pp_ndevices(pp) != K)
        return tsr_err(TSR_EINVAL, "pipeline: the plan is for %d devices, the system has %d", tsr_pp_ndevices(pp), K);
    if (tsr_pp_nnodes(pp) != V)
        return tsr_err(TSR_EINVAL, "pipeline: the plan has %d nodes, the network %d (and %d host nodes)",
                       tsr_pp_nnodes(pp), nd->nnodes, NH);
    for (int v = 0; v < V; v++)
        if (strcmp(tsr_pp_node_name(pp, v), vname(nd, H, v)))
            return tsr_err(TSR_EINVAL, "pipeline: plan node %d is \"%s\", the network's is \"%s\"", v,
                           tsr_pp_node_name(pp, v), vname(nd, H, v));
    int hs = NH ? tsr_pp_nslots(pp) - K : 0; /* host stages: only with host nodes */
    if (plan->nstages < 1 || plan->nstages > K + hs) /* (split stages: counted with their devices below) */
        return tsr_err(TSR_EINVAL, "pipeline: %d stages for %d devices", plan->nstages, K);
    /* a non-contiguous plan (the ILP's) runs as a DAG of pieces (run_dag): whole nodes only */
    for (int s = 0; s < plan->nstages && !plan->contiguous; s++)
        if (plan->stages[s].parts > 1 || plan->stages[s].head > 0 || plan->stages[s].tail > 0)
            return tsr_err(TSR_EINVAL, "pipeline: the plan is not contiguous and stage %d is split or shared: the "
                                       "executor runs non-contiguous plans of whole nodes", s);
    for (int v = 0; v < V; v++)
        stage_of[v] = -1;
    int used[TSR_PIPEX_MAX_STAGES] = {0};
    for (int s = 0; s < plan->nstages; s++) {
        const tsr_pp_stage_t *ps = &plan->stages[s];
        int only_host = ps->nnodes > 0;
        for (int k = 0; k < ps->nnodes; k++)
            only_host &= ps->nodes[k] >= nd->nnodes;
        if (ps->slot < 0 || ps->slot >= K + hs || (ps->slot >= K && !only_host))
            return tsr_err(TSR_EINVAL, "pipeline: stage %d is on the host (slot %d): the executor runs host nodes "
                                       "there only", s, ps->slot);
        if (used[ps->slot]++)
            return tsr_err(TSR_EINVAL, "pipeline: %s %d has two stages", ps->slot < K ? "device" : "host stage",
                           ps->slot < K ? ps->slot : ps->slot - K);
        if (NH && (ps->parts > 1 || ps->head > 0 || ps->tail > 0))
            return tsr_err(TSR_EINVAL, "pipeline: stage %d is split or shared: the executor does not run those with "
                                       "host nodes", s);
        if (ps->parts > 1) { /* a split stage: one splittable node, a free device per part */
            if (ps->parts > TSR_PP_MAX_SPLIT || ps->nnodes != 1)
                return tsr_err(TSR_EINVAL, "pipeline: split stage %d has %d nodes in %d parts, need one node in "
                                           "2..%d", s, ps->nnodes, ps->parts, TSR_PP_MAX_SPLIT);
            int rc = tsr_pipenet_splittable(nd, ps->nodes[0], ps->parts);
            if (rc)
                return tsr_err_prefix(rc, "pipeline: stage %d: ", s);
            for (int j = 1; j < ps->parts; j++) {
                int d = ps->slots[j];
                if (d < 0 || d >= K)
                    return tsr_err(TSR_EINVAL, "pipeline: split stage %d: part %d on device %d, have %d", s, j, d, K);
                if (used[d]++)
                    return tsr_err(TSR_EINVAL, "pipeline: device %d has two stages (part %d of split stage %d)", d, j,
                                   s);
            }
        }
        if (ps->head > 0 || ps->tail > 0) { /* a shared boundary: one conv, its units over two consecutive stages */
            int v = ps->tail > 0 ? ps->nodes[ps->nnodes - 1] : ps->nodes[0];
            if (ps->head > 0 && ps->tail > 0 && ps->nnodes < 2)
                return tsr_err(TSR_EINVAL, "pipeline: stage %d is a middle piece of node \"%s\"", s, nd->nodes[v].name);
            if (ps->parts > 1)
                return tsr_err(TSR_EINVAL, "pipeline: stage %d is both split and shared", s);
            if (ps->tail > 0 && (s + 1 >= plan->nstages || plan->stages[s + 1].nnodes < 1 ||
                                 plan->stages[s + 1].nodes[0] != v || plan->stages[s + 1].head != ps->tail))
                return tsr_err(TSR_EINVAL, "pipeline: stage %d shares node \"%s\" (its first %d units) but stage %d "
                                           "does not run the rest", s, nd->nodes[v].name, ps->tail, s + 1);
            for (int e = 0; e < 2; e++) {
                int w = e ? ps->nodes[ps->nnodes - 1] : ps->nodes[0], u = e ? ps->tail : ps->head;
                if (u <= 0)
                    continue;
                int q = tsr_pp_node_units(pp, w);
                const tsr_nd_node_t *wn = &nd->nodes[w];
                if (wn->kind != TSR_ND_CONV || wn->conv.groups != 1 || q < 2 || u >= q || wn->conv.c_out % q ||
                    wn->out == nd->output)
                    return tsr_err(TSR_EINVAL, "pipeline: stage %d shares node \"%s\" at unit %d: not a conv with "
                                               "groups 1 in %d units of whole channels, or the network output",
                                   s, wn->name, u, q);
            }
        }
        if (ps->slot < K && ps->mem > tsr_mdev_dram(m, ps->slot))
            return tsr_err(TSR_EINVAL, "pipeline: stage %d (%s .. %s) needs %.1f MiB, device %d has %.1f MiB of DRAM",
                           s, tsr_pp_node_name(pp, ps->nodes[0]), tsr_pp_node_name(pp, ps->nodes[ps->nnodes - 1]),
                           (double)ps->mem / 1048576.0, ps->slot, (double)tsr_mdev_dram(m, ps->slot) / 1048576.0);
        for (int k = 0; k < ps->nnodes; k++) {
            int v = ps->nodes[k];
            if (k == ps->nnodes - 1 && ps->tail > 0) /* a shared node belongs to the stage running the rest */
                continue;
            if (v < 0 || v >= V || stage_of[v] >= 0)
                return tsr_err(TSR_EINVAL, "pipeline: node %d is in two stages or none", v);
            stage_of[v] = s;
        }
    }
    for (int v = 0; v < V; v++)
        if (stage_of[v] < 0)
            return tsr_err(TSR_EINVAL, "pipeline: node \"%s\" is in no stage", vname(nd, H, v));
    /* every tensor a stage reads comes from the host or an earlier stage */
    int *prod = malloc(sizeof(int) * (size_t)nd->ntensors);
    if (!prod)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int t = 0; t < nd->ntensors; t++)
        prod[t] = -1;
    for (int v = 0; v < V; v++) {
        int vi[2], vo;
        vnode_io(nd, H, v, vi, &vo);
        prod[vo] = v;
    }
    int rc = TSR_OK;
    for (int v = 0; v < V && !rc; v++)
        for (int j = 0; j < 2 && !rc; j++) {
            int vi[2], vo;
            vnode_io(nd, H, v, vi, &vo);
            int t = vi[j];
            int p = t >= 0 ? prod[t] : -1;
            if (p >= 0 && stage_of[p] > stage_of[v] && plan->contiguous)
                rc = tsr_err(TSR_EINVAL, "pipeline: stage %d (slot %d) reads \"%s\"'s output, which stage %d "
                             "(slot %d) produces later: the stages are not in a topological order",
                             stage_of[v], plan->stages[stage_of[v]].slot, vname(nd, H, p), stage_of[p],
                             plan->stages[stage_of[p]].slot);
            /* a shared node's output is joined in the stage running its rest: every reader is there */
            if (!rc && p >= 0 && plan->stages[stage_of[p]].head > 0 && plan->stages[stage_of[p]].nodes[0] == p &&
                stage_of[v] != stage_of[p])
                rc = tsr_err(TSR_EINVAL, "pipeline: node \"%s\" (stage %d) reads shared node \"%s\", whose slices "
                             "are joined in stage %d", nd->nodes[v].name, stage_of[v], nd->nodes[p].name, stage_of[p]);
        }
    free(prod);
    return rc;
}

/* The reference's backend: device 0's, an rtl one in a child process as the
 * system's own rtl devices (tsr_multidev.c), so this process never holds a
 * Verilated model beside others. A sampled device's RTL windows are such an
 * in-process model, and a second one (the reference's) hung closing in
 * Verilator's scopeErase: its reference runs on systemc, the model its
 * windows correct (the same output bytes; the cycles are the fast model's). */
static const char *ref_backend(const tsr_mdev_t *m)
{
    const char *b = tsr_mdev_backend(m, 0);
    return !strcmp(b, "rtl") ? "rtlproc" : !strcmp(b, "sampled") ? "systemc" : b;
}

/* The single-device run: outputs and cycles per input. */
static int reference(tsr_mdev_t *m, const tsr_netdesc_t *nd, const tsr_pipex_opts_t *o, int n, uint8_t **refs,
                     double *cycles)
{
    tsr_device_t *dev = NULL;
    tsr_graph_t *g = NULL;
    uint8_t *x = malloc(tsr_netdesc_tensor_bytes(nd, 0));
    int rc = x ? tsr_device_open(ref_backend(m), tsr_mdev_config(m, 0), NULL, &dev)
               : tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc)
        rc = tsr_graph_from_netdesc(tsr_mdev_config(m, 0), nd, &g);
    if (!rc)
        rc = tsr_graph_plan(g, dev, o->flags);
    *cycles = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (!(refs[i] = malloc(tsr_netdesc_tensor_bytes(nd, nd->output)))) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            break;
        }
        if (o->inputs)
            memcpy(x, o->inputs[i], tsr_netdesc_tensor_bytes(nd, 0));
        else
            tsr_netdesc_random_input(nd, o->seed + (uint64_t)i, x);
        const void *in[1] = {x};
        void *out[1] = {refs[i]};
        if (!(rc = tsr_graph_exec(g, in, out))) {
            tsr_graph_totals_t t;
            tsr_graph_totals(g, &t);
            *cycles += t.cycles / n;
        }
    }
    tsr_graph_free(g);
    tsr_device_close(dev);
    free(x);
    return rc ? tsr_err_prefix(rc, "pipeline: the single-device reference run: ") : TSR_OK;
}

/* The single-device run with host nodes: every node in one topological
 * order (a device node whenever one is ready, a host node only when none
 * is: the device runs stay whole), in pieces on one device, the host nodes
 * between them; *cycles the device and host cycles per input plus each host
 * node's link round trip (the planner's cost of host nodes merged into one
 * device's stage). */
static int reference_host(tsr_mdev_t *m, const tsr_netdesc_t *nd, const tsr_pipex_opts_t *o, int n, uint8_t **refs,
                          double *cycles)
{
    const tsr_pipenet_host_t *H = o->host;
    int V = nd->nnodes + nhost(H);
    int *order = malloc(sizeof(int) * (size_t)V);
    char *done = calloc((size_t)V, 1), *have = calloc((size_t)nd->ntensors, 1);
    uint8_t **buf = calloc((size_t)nd->ntensors, sizeof *buf);
    tsr_device_t *dev = NULL;
    piece_t *pc = NULL;
    int npc = 0, rc = order && done && have && buf ? TSR_OK : tsr_err(TSR_ENOMEM, "out of memory");
    /* tensors no node makes are ready (the network input) */
    for (int t = 0; t < nd->ntensors && !rc; t++)
        have[t] = 1;
    for (int v = 0; v < V && !rc; v++) {
        int vi[2], vo;
        vnode_io(nd, H, v, vi, &vo);
        have[vo] = 0;
    }
    for (int k = 0; k < V && !rc; k++) {
        int pick = -1;
        for (int v = 0; v < V && pick < 0; v++) {
            int vi[2], vo;
            vnode_io(nd, H, v, vi, &vo);
            if (!done[v] && (vi[0] < 0 || have[vi[0]]) && (vi[1] < 0 || have[vi[1]]))
                pick = v;
        }
        if (pick < 0) {
            rc = tsr_err(TSR_EINVAL, "pipeline: the network with its host nodes has a cycle");
            break;
        }
        int vi[2], vo;
        vnode_io(nd, H, pick, vi, &vo);
        done[pick] = have[vo] = 1;
        order[k] = pick;
    }
    if (!rc)
        rc = tsr_device_open(ref_backend(m), tsr_mdev_config(m, 0), NULL, &dev);
    if (!rc)
        rc = pieces_build(nd, H, tsr_mdev_config(m, 0), dev, o->flags, order, NULL, V, &pc, &npc);
    if (!rc && !(buf[0] = malloc(tsr_netdesc_tensor_bytes(nd, 0) + 1)))
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    double link = 0, clock0 = tsr_mdev_config(m, 0)->clock_mhz;
    for (int h = 0; h < nhost(H); h++) {
        link += tsr_mdev_link_cycles(m, tsr_netdesc_tensor_bytes(nd, H->in_t[h])) +
                tsr_mdev_link_cycles(m, tsr_netdesc_tensor_bytes(nd, H->out_t[h]));
        if (H->in2_t && H->in2_t[h] >= 0)
            link += tsr_mdev_link_cycles(m, tsr_netdesc_tensor_bytes(nd, H->in2_t[h]));
    }
    *cycles = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (o->inputs)
            memcpy(buf[0], o->inputs[i], tsr_netdesc_tensor_bytes(nd, 0));
        else
            tsr_netdesc_random_input(nd, o->seed + (uint64_t)i, buf[0]);
        double dc, hc;
        if ((rc = pieces_exec(NULL, 0, 1.0, clock0, nd, H, 0, pc, npc, buf, &dc, &hc)))
            break;
        if (dc > 0) /* (an untimed backend: no cycles at all) */
            *cycles += (dc + hc + link) / n;
        if (!(refs[i] = malloc(tsr_netdesc_tensor_bytes(nd, nd->output) + 1)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        else
            memcpy(refs[i], buf[nd->output], tsr_netdesc_tensor_bytes(nd, nd->output));
    }
    pieces_free(pc, npc);
    tsr_device_close(dev);
    for (int t = 0; buf && t < nd->ntensors; t++)
        free(buf[t]);
    free(buf), free(order), free(done), free(have);
    return rc ? tsr_err_prefix(rc, "pipeline: the single-device reference run: ") : TSR_OK;
}

/* Replay the stream with the measured times and the bounded queues. */
static void timeline(const run_t *r, int depth, tsr_pipex_result_t *res)
{
    int S = r->ns, N = r->n;
    double *start = calloc((size_t)S * (size_t)N, sizeof(double)), *fin = calloc((size_t)S * (size_t)N, sizeof(double));
    if (!start || !fin) {
        free(start), free(fin);
        return;
    }
#define AT(a, s, i) a[(size_t)(s) * (size_t)N + (size_t)(i)]
    for (int i = 0; i < N; i++)
        for (int s = 0; s < S; s++) {
            double t0 = 0;
            if (s > 0)
                t0 = AT(fin, s - 1, i);
            if (i > 0 && AT(fin, s, i - 1) > t0)
                t0 = AT(fin, s, i - 1);
            AT(start, s, i) = t0;
            double f = t0 + r->st[s].cyc[i] + r->st[s].link;
            /* the hand-over waits for room in the next queue: the next stage has taken input i - depth */
            if (s < S - 1 && i >= depth && AT(start, s + 1, i - depth) > f)
                f = AT(start, s + 1, i - depth);
            AT(fin, s, i) = f;
        }
    res->makespan = AT(fin, S - 1, N - 1);
    double lat = 0;
    for (int s = 0; s < S; s++)
        lat += r->st[s].cyc[0] + r->st[s].link;
    res->latency = lat;
#undef AT
    free(start), free(fin);
}

/* The shared link: stage s's transfers of one input as the replay's lists
 * (receives; a shared boundary's head slices and host nodes' round trips
 * with them; then the sends and the tail slice). */
static int link_lists(const run_t *r, const stage_t *st, tsr_link_stage_t *ls)
{
    const tsr_netdesc_t *nd = r->nd;
    int tail = st->tv >= 0; /* the last extra is the tail slice */
    if (st->nin + st->nextra + st->nhx > TSR_LINK_MAX_XFERS || st->nout + tail > TSR_LINK_MAX_XFERS)
        return tsr_err(TSR_EINVAL, "pipeline: stage %d has more than %d transfers each way for the shared link", st->s,
                       TSR_LINK_MAX_XFERS);
    for (int j = 0; j < st->nin; j++)
        ls->rx[ls->nrx++] = tsr_netdesc_tensor_bytes(nd, st->in_t[j]);
    for (int j = 0; j < st->nextra - tail; j++)
        ls->rx[ls->nrx++] = st->extra[j];
    for (int j = 0; j < st->nhx; j++)
        ls->rx[ls->nrx++] = st->hx[j];
    for (int j = 0; j < st->nout; j++)
        ls->tx[ls->ntx++] = tsr_netdesc_tensor_bytes(nd, st->out_t[j]);
    if (tail)
        ls->tx[ls->ntx++] = st->extra[st->nextra - 1];
    ls->compute = st->cyc;
    return TSR_OK;
}

/* The replays of link_replay: the N inputs as measured (the makespans), and
 * a longer stream whose inputs repeat the measured ones (input i's cycles
 * are input i mod N's) for the steady-state periods: the window is a whole
 * number of repeats, after the pipeline's fill and before its drain. */
static int link_runs(tsr_mdev_t *m, tsr_link_problem_t *p, tsr_link_stage_t *ls, tsr_pipex_result_t *res)
{
    int S = p->nstages, N = p->ninputs, F = S * (p->depth + 1), reps = (64 + N - 1) / N, R = 2 * F + N * reps + 1;
    tsr_link_result_t *lr = calloc(1, sizeof *lr);
    double *cyc = malloc(sizeof(double) * (size_t)S * (size_t)R);
    const double **orig = malloc(sizeof(double *) * (size_t)S);
    int rc = lr && cyc && orig ? TSR_OK : tsr_err(TSR_ENOMEM, "out of memory");
    for (int k = 0; k < 4 && !rc; k++) {
        p->mode = k & 1 ? TSR_LINK_SHARED : TSR_LINK_P2P;
        if (k == 2) { /* the long stream */
            for (int st = 0; st < S; st++) {
                orig[st] = ls[st].compute;
                for (int i = 0; i < R; i++)
                    cyc[(size_t)st * (size_t)R + (size_t)i] = orig[st][i % N];
                ls[st].compute = cyc + (size_t)st * (size_t)R;
            }
            p->ninputs = R, p->win0 = F, p->win1 = F + N * reps;
        }
        if ((rc = tsr_mdev_link_replay(m, p, lr)))
            break;
        if (k == 0)
            res->makespan_p2p = lr->makespan;
        else if (k == 1)
            res->makespan_link = lr->makespan, res->link_busy = lr->busy;
        else if (k == 2)
            res->period_p2p = lr->period;
        else
            res->period_link = lr->period;
        for (int st = 0; st < S && k == 3; st++)
            res->link_wait[st] = lr->wait[st];
    }
    free(lr), free(cyc), free(orig);
    return rc;
}

/* Replay the stream's measured cycles over one shared link (the SystemC
 * interconnect) and over a link per device: the contended period and
 * makespan against the uncontended ones. */
static int link_replay(const run_t *r, int depth, tsr_pipex_result_t *res)
{
    int S = r->ns;
    tsr_link_stage_t *ls = calloc((size_t)S, sizeof *ls);
    int rc = ls ? TSR_OK : tsr_err(TSR_ENOMEM, "out of memory");
    res->link_floor = 0;
    for (int s = 0; s < S && !rc; s++) {
        rc = link_lists(r, &r->st[s], &ls[s]);
        res->link_floor += r->st[s].link;
    }
    tsr_link_problem_t p = {.nstages = S, .ninputs = r->n, .depth = depth, .st = ls};
    if (!rc)
        rc = link_runs(r->m, &p, ls, res);
    if (!rc) {
        res->link_shared = 1;
        res->speedup_link = res->period_link > 0 && res->single > 0 ? res->single / res->period_link : 0;
    }
    free(ls);
    return rc ? tsr_err_prefix(rc, "pipeline: the shared link's replay: ") : TSR_OK;
}

/* ------------------------------------------------------------ non-contiguous plans */

/* A non-contiguous plan (the ILP's: a stage's nodes need another stage's
 * work between them, so per input the stages form a DAG, not a chain). The
 * nodes in one topological order that keeps a stage's nodes together where
 * it can; each stage's nodes cut into pieces at the points where another
 * stage's nodes come between them (pieces_build), so a piece's inputs are
 * made by earlier pieces of that order. One thread per stage runs its
 * pieces, for each input, as soon as their inputs are there: the earliest
 * input first, then the order; at most `window` inputs in flight. Each
 * tensor that crosses stages is received once per stage (the piece that
 * first reads it pays the link) and sent once (the piece that makes it),
 * as the planner counts it. The measure replays the same rule over the
 * measured cycles: each stage starts the ready piece it can start first
 * (the lowest input, then the order, on a tie). */
typedef struct dag dag_t;

typedef struct {
    int s, p;             /* stage, its piece */
    int ndeps;
    int *deps;            /* global pieces whose outputs it reads */
    double link;          /* its link cycles per input */
} gpiece_t;

struct dag {
    tsr_mdev_t *m;
    const tsr_netdesc_t *nd;
    const tsr_pipex_opts_t *o;
    const tsr_pipenet_host_t *H;
    int S, G, N, window;
    stage_t *st;
    gpiece_t *gp;
    int **gof;            /* gof[s][p]: the global index of stage s's piece p */
    char *done, *busy;    /* [i * G + k] */
    double *cyc;          /* [i * G + k]: measured cycles (device + host) */
    uint8_t ***buf;       /* per input: the tensors (NBUF), while the input is in flight */
    int *left;            /* per input: pieces not done */
    int lo;               /* the lowest input not complete */
    uint8_t **outs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int abort, err, err_stage;
    char errmsg[512];
};

typedef struct {
    dag_t *d;
    int s;
} dag_arg_t;

/* Under d->mu: the first piece of stage s ready to run (*pi, *pk), or 0. */
static int dag_pick(dag_t *d, int s, int *pi, int *pk)
{
    for (int i = d->lo; i < d->N && i < d->lo + d->window; i++)
        for (int p = 0; p < d->st[s].npc; p++) {
            int k = d->gof[s][p];
            if (d->done[(size_t)i * d->G + k] || d->busy[(size_t)i * d->G + k])
                continue;
            int ok = 1;
            for (int j = 0; j < d->gp[k].ndeps && ok; j++)
                ok = d->done[(size_t)i * d->G + d->gp[k].deps[j]];
            if (ok) {
                *pi = i, *pk = k;
                return 1;
            }
        }
    return 0;
}

static void *dag_main(void *arg)
{
    dag_t *d = ((dag_arg_t *)arg)->d;
    int s = ((dag_arg_t *)arg)->s;
    stage_t *st = &d->st[s];
    const tsr_netdesc_t *nd = d->nd;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        int left = 0;
        for (int i = d->lo; i < d->N && !left; i++)
            for (int p = 0; p < st->npc && !left; p++)
                left = !d->done[(size_t)i * d->G + d->gof[s][p]];
        if (!left || d->abort)
            break;
        int i, k;
        if (!dag_pick(d, s, &i, &k)) {
            pthread_cond_wait(&d->cv, &d->mu);
            continue;
        }
        int rc = TSR_OK;
        if (!d->buf[i]) { /* the input enters the pipeline */
            if (!(d->buf[i] = calloc((size_t)NBUF(nd), sizeof **d->buf)) ||
                !(d->buf[i][0] = malloc(tsr_netdesc_tensor_bytes(nd, 0) + 1)))
                rc = tsr_err(TSR_ENOMEM, "out of memory");
            else if (d->o->inputs)
                memcpy(d->buf[i][0], d->o->inputs[i], tsr_netdesc_tensor_bytes(nd, 0));
            else
                tsr_netdesc_random_input(nd, d->o->seed + (uint64_t)i, d->buf[i][0]);
        }
        d->busy[(size_t)i * d->G + k] = 1;
        uint8_t **b = d->buf[i];
        pthread_mutex_unlock(&d->mu);
        double dc = 0, hc = 0;
        if (!rc) /* (another thread only reads tensors of finished pieces, and writes its own) */
            rc = pieces_exec(st->dev >= 0 ? d->m : NULL, st->dev, st->clock,
                             (double)tsr_mdev_config(d->m, 0)->clock_mhz, nd, d->H, d->o->skip_host,
                             &st->pc[d->gp[k].p], 1, b, &dc, &hc);
        pthread_mutex_lock(&d->mu);
        if (rc) {
            if (!d->err) {
                d->err = rc, d->err_stage = s;
                snprintf(d->errmsg, sizeof d->errmsg, "%s", tsr_errmsg());
            }
            d->abort = 1;
            pthread_cond_broadcast(&d->cv);
            break;
        }
        d->cyc[(size_t)i * d->G + k] = dc + hc;
        st->hcyc[i] += hc;
        d->done[(size_t)i * d->G + k] = 1;
        if (!--d->left[i]) { /* input i complete: its output kept, the rest freed */
            d->outs[i] = b[nd->output];
            b[nd->output] = NULL;
            for (int t = 0; t < NBUF(nd); t++)
                free(b[t]);
            free(b);
            d->buf[i] = NULL;
            while (d->lo < d->N && !d->left[d->lo])
                d->lo++;
        }
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* The replay: *makespan of the N inputs; *latency of input 0 alone. */
static void dag_replay(const dag_t *d, int n, double *makespan)
{
    int G = d->G, S = d->S;
    double *fin = calloc((size_t)n * (size_t)G, sizeof(double)), *free_at = calloc((size_t)S, sizeof(double));
    char *sched = calloc((size_t)n * (size_t)G, 1);
    int *left = malloc(sizeof(int) * (size_t)n);
    *makespan = 0;
    if (!fin || !free_at || !sched || !left) {
        free(fin), free(free_at), free(sched), free(left);
        return;
    }
    for (int i = 0; i < n; i++)
        left[i] = G;
    int lo = 0;
    double *done_at = calloc((size_t)n, sizeof(double)); /* input i complete (for the window) */
    for (long step = 0; step < (long)n * G && done_at; step++) {
        double best = INFINITY;
        int bi = -1, bk = -1;
        for (int i = lo; i < n && i < lo + d->window; i++)
            for (int k = 0; k < G; k++) {
                if (sched[(size_t)i * G + k])
                    continue;
                double t = free_at[d->gp[k].s];
                int ok = 1;
                for (int j = 0; j < d->gp[k].ndeps && ok; j++) {
                    size_t x = (size_t)i * G + (size_t)d->gp[k].deps[j];
                    ok = sched[x];
                    if (ok && fin[x] > t)
                        t = fin[x];
                }
                if (i >= d->window && done_at[i - d->window] > t) /* the window: input i - window complete */
                    t = done_at[i - d->window];
                if (ok && t < best)
                    best = t, bi = i, bk = k;
            }
        if (bi < 0)
            break; /* (cannot happen: the order is topological) */
        size_t x = (size_t)bi * G + (size_t)bk;
        sched[x] = 1;
        fin[x] = best + d->cyc[x] + d->gp[bk].link;
        free_at[d->gp[bk].s] = fin[x];
        if (fin[x] > done_at[bi])
            done_at[bi] = fin[x];
        if (fin[x] > *makespan)
            *makespan = fin[x];
        if (!--left[bi])
            while (lo < n && !left[lo])
                lo++;
    }
    free(done_at);
    free(fin), free(free_at), free(sched), free(left);
}

/* the result's figures both executors (the chain's stage threads, the DAG's piece threads) fill the same
 * way; what differs - parts, head/tail, the pieces' count and cycles, the timeline - stays with each */

/* a stage's plan-side figures (its nodes, the plan's predictions, its host nodes' predicted cycles) and
 * its link figures */
static void stage_res_plan(tsr_pipex_stage_res_t *q, const tsr_pp_stage_t *ps, const stage_t *st,
                           const tsr_netdesc_t *nd, const tsr_pipenet_host_t *H)
{
    q->device = st->dev;
    q->nnodes = ps->nnodes;
    snprintf(q->first, sizeof q->first, "%s", vname(nd, H, ps->nodes[0]));
    snprintf(q->last, sizeof q->last, "%s", vname(nd, H, ps->nodes[ps->nnodes - 1]));
    for (int k = 0; k < ps->nnodes; k++)
        if (ps->nodes[k] >= nd->nnodes) {
            q->host_nodes++;
            q->pred_host += H->cycles[ps->nodes[k] - nd->nnodes];
        }
    q->predicted = ps->load;
    q->pred_compute = ps->compute;
    q->link = st->link;
    q->bytes_in = st->bytes_in;
    q->bytes_out = st->bytes_out;
}

/* stage s's measured total (its compute is filled) and the slowest stages, predicted and measured */
static void stage_res_period(tsr_pipex_result_t *res, int s)
{
    tsr_pipex_stage_res_t *q = &res->st[s];
    q->measured = q->compute + q->link;
    if (q->predicted > res->period_pred)
        res->period_pred = q->predicted, res->slowest_pred = s;
    if (q->measured > res->period_meas)
        res->period_meas = q->measured, res->slowest_meas = s;
}

/* whether the devices counted cycles (a host stage's time is the host model's), before the timeline */
static void res_timed(tsr_pipex_result_t *res, int S)
{
    for (int s = 0; s < S; s++)
        res->timed |= res->st[s].device >= 0 && res->st[s].compute - res->st[s].host > 0;
}

/* after the timeline (makespan, latency): throughput, speed-ups, the outputs handed back and their
 * comparison with the single-device run's */
static void res_finish(tsr_pipex_result_t *res, const tsr_netdesc_t *nd, int N, uint8_t *const *outs,
                       void *const *outputs, int no_reference, uint8_t *const *refs)
{
    if (res->makespan > 0)
        res->throughput = N / res->makespan;
    if (res->timed && res->single > 0) {
        res->speedup = res->single / res->period_meas;
        res->speedup_n = N * res->single / res->makespan;
    }
    uint64_t ob = tsr_netdesc_tensor_bytes(nd, nd->output);
    for (int i = 0; i < N && outputs; i++)
        if (outputs[i] && outs[i])
            memcpy(outputs[i], outs[i], ob);
    for (int i = 0; i < N && !no_reference; i++) {
        res->checked++;
        if (outs[i] && refs[i] && !memcmp(outs[i], refs[i], ob))
            res->equal++;
        else if (res->first_diff < 0)
            res->first_diff = i;
    }
}

static int run_dag(tsr_mdev_t *m, const tsr_netdesc_t *nd, const tsr_pp_plan_t *plan,
                   const tsr_pipex_opts_t *o, const int *stage_of, tsr_pipex_result_t *res)
{
    const tsr_pipenet_host_t *H = o->host;
    int K = tsr_mdev_count(m), NH = nhost(H), V = nd->nnodes + NH, S = plan->nstages, N = o->ninputs;
    dag_t d = {.m = m, .nd = nd, .o = o, .H = NH ? H : NULL, .S = S, .N = N, .window = o->queue_depth + S};
    pthread_mutex_init(&d.mu, NULL);
    pthread_cond_init(&d.cv, NULL);
    int *order = malloc(sizeof(int) * (size_t)V), *pos = malloc(sizeof(int) * (size_t)V);
    int *prod = malloc(sizeof(int) * (size_t)nd->ntensors);
    char *have = calloc((size_t)nd->ntensors, 1), *placed = calloc((size_t)V, 1);
    d.st = calloc((size_t)S, sizeof *d.st);
    d.gof = calloc((size_t)S, sizeof *d.gof);
    d.outs = calloc((size_t)N, sizeof *d.outs);
    d.buf = calloc((size_t)N, sizeof *d.buf);
    d.left = calloc((size_t)N, sizeof *d.left);
    uint8_t **refs = calloc((size_t)N, sizeof *refs);
    int rc = order && pos && prod && have && placed && d.st && d.gof && d.outs && d.buf && d.left && refs
                 ? TSR_OK
                 : tsr_err(TSR_ENOMEM, "out of memory");
    /* the order: Kahn's, preferring a ready node of the last node's stage */
    for (int t = 0; t < nd->ntensors && !rc; t++)
        have[t] = 1, prod[t] = -1;
    for (int v = 0; v < V && !rc; v++) {
        int vi[2], vo;
        vnode_io(nd, H, v, vi, &vo);
        have[vo] = 0, prod[vo] = v;
    }
    for (int k = 0, last = -1; k < V && !rc; k++) {
        int pick = -1;
        for (int v = 0; v < V; v++) {
            int vi[2], vo;
            vnode_io(nd, H, v, vi, &vo);
            if (placed[v] || (vi[0] >= 0 && !have[vi[0]]) || (vi[1] >= 0 && !have[vi[1]]))
                continue;
            if (pick < 0 || (last >= 0 && stage_of[v] == stage_of[last] && stage_of[pick] != stage_of[last]))
                pick = v;
        }
        if (pick < 0) {
            rc = tsr_err(TSR_EINVAL, "pipeline: the network has a cycle");
            break;
        }
        int vi[2], vo;
        vnode_io(nd, H, pick, vi, &vo);
        placed[pick] = have[vo] = 1;
        order[k] = pick, pos[pick] = k, last = pick;
    }
    /* each stage's pieces */
    for (int s = 0; s < S && !rc; s++) {
        stage_t *st = &d.st[s];
        const tsr_pp_stage_t *ps = &plan->stages[s];
        st->s = s;
        st->dev = ps->slot < K ? ps->slot : -1;
        st->clock = st->dev < 0 ? 1.0 : (double)tsr_mdev_config(m, 0)->clock_mhz / tsr_mdev_config(m, st->dev)->clock_mhz;
        st->hcyc = calloc((size_t)N, sizeof(double));
        int *vn = malloc(sizeof(int) * (size_t)ps->nnodes + 1);
        char *cut = calloc((size_t)ps->nnodes + 1, 1);
        if (!st->hcyc || !vn || !cut)
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        for (int k = 0, j = 0; k < V && !rc; k++) /* its nodes in the order; a new piece after a gap */
            if (stage_of[order[k]] == s) {
                vn[j] = order[k];
                cut[j] = j > 0 && pos[vn[j - 1]] != k - 1;
                j++;
            }
        if (!rc && (rc = pieces_build(nd, H, tsr_mdev_config(m, st->dev >= 0 ? st->dev : 0),
                                      st->dev >= 0 ? tsr_mdev_device(m, st->dev) : NULL, o->flags, vn, cut, ps->nnodes,
                                      &st->pc, &st->npc)))
            tsr_err_prefix(rc, "pipeline: stage %d on %s %d: ", s, st->dev >= 0 ? "device" : "host stage",
                           st->dev >= 0 ? st->dev : ps->slot - K);
        free(vn), free(cut);
        d.G += st->npc;
    }
    d.gp = rc ? NULL : calloc((size_t)d.G + 1, sizeof *d.gp);
    if (!rc && !d.gp)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    /* the global pieces, their dependencies and their link */
    int *gprod = rc ? NULL : malloc(sizeof(int) * (size_t)nd->ntensors);
    if (!rc && !gprod)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    for (int t = 0; t < nd->ntensors && !rc; t++)
        gprod[t] = -1;
    for (int s = 0, k = 0; s < S && !rc; s++) {
        if (!(d.gof[s] = malloc(sizeof(int) * (size_t)d.st[s].npc + 1))) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            break;
        }
        for (int p = 0; p < d.st[s].npc; p++, k++) {
            const piece_t *q = &d.st[s].pc[p];
            d.gof[s][p] = k, d.gp[k].s = s, d.gp[k].p = p;
            if (q->h >= 0)
                gprod[H->out_t[q->h]] = k;
            for (int j = 0; j < q->nout; j++)
                gprod[q->out_t[j]] = k;
        }
    }
    for (int k = 0; k < d.G && !rc; k++) {
        int s = d.gp[k].s;
        stage_t *st = &d.st[s];
        const piece_t *q = &st->pc[d.gp[k].p];
        int nin = q->h >= 0 ? 2 : q->nin, ins[2];
        if (q->h >= 0)
            ins[0] = H->in_t[q->h], ins[1] = H->in2_t ? H->in2_t[q->h] : -1;
        if (!(d.gp[k].deps = malloc(sizeof(int) * (size_t)(nin + 1)))) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            break;
        }
        for (int j = 0; j < nin; j++) {
            int t = q->h >= 0 ? ins[j] : q->in_t[j];
            if (t < 0)
                continue;
            if (gprod[t] >= 0)
                d.gp[k].deps[d.gp[k].ndeps++] = gprod[t];
            /* received once per stage: the stage's first piece (in its order) to read it pays */
            int from_other = gprod[t] < 0 || d.gp[gprod[t]].s != s, first = from_other;
            for (int p2 = 0; p2 < d.gp[k].p && first; p2++) {
                const piece_t *q2 = &st->pc[p2];
                if (q2->h >= 0)
                    first = H->in_t[q2->h] != t && !(H->in2_t && H->in2_t[q2->h] == t);
                for (int j2 = 0; j2 < q2->nin && first && q2->h < 0; j2++)
                    first = q2->in_t[j2] != t;
            }
            if (first) { /* (a host stage pays the link as any stage) */
                d.gp[k].link += tsr_mdev_link_cycles(m, tsr_netdesc_tensor_bytes(nd, t));
                st->bytes_in += tsr_netdesc_tensor_bytes(nd, t);
            }
        }
        /* sent: each output another stage reads, or the network's */
        int nout = q->h >= 0 ? 1 : q->nout;
        for (int j = 0; j < nout; j++) {
            int t = q->h >= 0 ? H->out_t[q->h] : q->out_t[j], other = t == nd->output;
            for (int v = 0; v < V && !other; v++) {
                int vi[2], vo;
                vnode_io(nd, H, v, vi, &vo);
                other = stage_of[v] != s && (vi[0] == t || vi[1] == t);
            }
            if (other) {
                d.gp[k].link += tsr_mdev_link_cycles(m, tsr_netdesc_tensor_bytes(nd, t));
                st->bytes_out += tsr_netdesc_tensor_bytes(nd, t);
            }
        }
        if (q->h >= 0 && st->dev >= 0) /* a host node in a device's stage: the round trip */
            for (int j = 0; j < 3; j++) {
                int t = j < 2 ? ins[j] : H->out_t[q->h];
                if (t >= 0)
                    d.gp[k].link += tsr_mdev_link_cycles(m, tsr_netdesc_tensor_bytes(nd, t));
            }
        st->link += d.gp[k].link;
    }
    free(gprod);
    if (!rc) {
        d.done = calloc((size_t)N * (size_t)d.G, 1);
        d.busy = calloc((size_t)N * (size_t)d.G, 1);
        d.cyc = calloc((size_t)N * (size_t)d.G, sizeof(double));
        if (!d.done || !d.busy || !d.cyc)
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        for (int i = 0; i < N && !rc; i++)
            d.left[i] = d.G;
    }
    if (!rc && !o->no_reference)
        rc = NH ? reference_host(m, nd, o, N, refs, &res->single) : reference(m, nd, o, N, refs, &res->single);
    if (res->single > 0)
        res->single += tsr_mdev_link_cycles(m, tsr_netdesc_tensor_bytes(nd, 0)) +
                       tsr_mdev_link_cycles(m, tsr_netdesc_tensor_bytes(nd, nd->output));
    pthread_t th[TSR_PIPEX_MAX_STAGES];
    dag_arg_t args[TSR_PIPEX_MAX_STAGES];
    int nth = 0;
    double t0 = tsr_now_s();
    if (!rc) {
        tsr_mdev_clear_link(m);
        for (int s = 0; s < S; s++) {
            args[s] = (dag_arg_t){&d, s};
            if (pthread_create(&th[s], NULL, dag_main, &args[s])) {
                pthread_mutex_lock(&d.mu);
                d.abort = 1, d.err = TSR_ENOMEM, d.err_stage = s;
                snprintf(d.errmsg, sizeof d.errmsg, "cannot start the thread of stage %d", s);
                pthread_cond_broadcast(&d.cv);
                pthread_mutex_unlock(&d.mu);
                break;
            }
            nth++;
        }
        for (int s = 0; s < nth; s++)
            pthread_join(th[s], NULL);
        res->wall_s = tsr_now_s() - t0;
        if (d.err) {
            int dv = d.st[d.err_stage].dev;
            res->failed_device = dv;
            int rr = tsr_mdev_reset_all(m, -1);
            rc = tsr_err(d.err, "pipeline stopped: %s %d (stage %d) failed: %s; the devices were %s",
                         dv < 0 ? "host stage" : "device", dv < 0 ? d.err_stage : dv, d.err_stage, d.errmsg,
                         rr ? "reset with an error" : "reset");
        }
    }
    res->nstages = S;
    res->ninputs = N;
    for (int s = 0; s < S && d.st; s++) {
        stage_t *st = &d.st[s];
        tsr_pipex_stage_res_t *q = &res->st[s];
        const tsr_pp_stage_t *ps = &plan->stages[s];
        stage_res_plan(q, ps, st, nd, H);
        q->parts = 1;
        q->nin = q->nout = st->npc; /* (pieces) */
        for (int i = 0; i < N && d.cyc; i++) {
            double c = 0;
            for (int p = 0; p < st->npc; p++)
                c += d.cyc[(size_t)i * d.G + d.gof[s][p]];
            q->compute += c / N;
            q->host += st->hcyc ? st->hcyc[i] / N : 0;
            if (c > q->compute_max)
                q->compute_max = c;
        }
        stage_res_period(res, s);
    }
    if (!rc) {
        res_timed(res, S);
        dag_replay(&d, N, &res->makespan);
        dag_replay(&d, 1, &res->latency);
        res_finish(res, nd, N, d.outs, o->outputs, o->no_reference, refs);
    }
    for (int s = 0; s < S && d.st; s++) {
        pieces_free(d.st[s].pc, d.st[s].npc);
        free(d.st[s].hcyc);
        if (d.gof)
            free(d.gof[s]);
    }
    for (int k = 0; k < d.G && d.gp; k++)
        free(d.gp[k].deps);
    for (int i = 0; i < N; i++) {
        if (d.buf && d.buf[i]) {
            for (int t = 0; t < NBUF(nd); t++)
                free(d.buf[i][t]);
            free(d.buf[i]);
        }
        if (d.outs)
            free(d.outs[i]);
        if (refs)
            free(refs[i]);
    }
    free(d.st), free(d.gof), free(d.gp), free(d.done), free(d.busy), free(d.cyc), free(d.buf), free(d.left);
    free(d.outs), free(refs), free(order), free(pos), free(prod), free(have), free(placed);
    pthread_mutex_destroy(&d.mu);
    pthread_cond_destroy(&d.cv);
    return rc;
}

int tsr_pipex_run(tsr_mdev_t *m, const tsr_netdesc_t *nd, const tsr_pp_t *pp, const tsr_pp_plan_t *plan,
                 const tsr_pipex_opts_t *opts, tsr_pipex_result_t *res)
{
    if (!res)
        return tsr_err(TSR_EINVAL, "pipeline: NULL result");
    memset(res, 0, sizeof *res);
    res->failed_device = -1;
    res->first_diff = -1;
    if (!m || !nd || !pp || !plan)
        return tsr_err(TSR_EINVAL, "pipeline: NULL system, network or plan");
    tsr_pipex_opts_t o = {0};
    if (opts)
        o = *opts;
    if (!o.ninputs)
        o.ninputs = 4;
    if (!o.queue_depth)
        o.queue_depth = 2;
    if (o.ninputs < 1 || o.ninputs > TSR_PIPEX_MAX_INPUTS)
        return tsr_err(TSR_EINVAL, "pipeline: %d inputs, need 1..%d", o.ninputs, TSR_PIPEX_MAX_INPUTS);
    if (o.queue_depth < 1 || o.queue_depth > 16)
        return tsr_err(TSR_EINVAL, "pipeline: queue depth %d, need 1..16", o.queue_depth);
    int N = o.ninputs, S = plan->nstages;
    const tsr_pipenet_host_t *H = o.host;
    int NH = nhost(H), V = nd->nnodes + NH;
    int *stage_of = malloc(sizeof(int) * (size_t)(V + 1));
    if (!stage_of)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = check_plan(m, nd, H, pp, plan, stage_of);
    int shared = tsr_mdev_link_mode(m) == TSR_LINK_SHARED;
    for (int s = 0; s < S && !rc && shared; s++)
        if (!plan->contiguous || plan->stages[s].parts > 1)
            rc = tsr_err(TSR_EINVAL, "pipeline: the shared link replays contiguous plans without split stages (%s)",
                         plan->contiguous ? "a split stage" : "the plan is not contiguous");
    if (!rc && !plan->contiguous)
        rc = run_dag(m, nd, plan, &o, stage_of, res);
    if (rc || !plan->contiguous) {
        free(stage_of);
        return rc;
    }
    int K = tsr_mdev_count(m);
    run_t r = {.m = m, .nd = nd, .o = &o, .ns = S, .n = N, .corrupt = o.corrupt_stage, .host = NH ? H : NULL,
               .clock0 = tsr_mdev_config(m, 0)->clock_mhz};
    pthread_mutex_init(&r.emu, NULL);
    r.st = calloc((size_t)S, sizeof *r.st);
    r.q = calloc((size_t)S, sizeof *r.q);
    r.outs = calloc((size_t)N, sizeof *r.outs);
    uint8_t **refs = calloc((size_t)N, sizeof *refs);
    int *prod = malloc(sizeof(int) * (size_t)nd->ntensors);
    int *last_reader = malloc(sizeof(int) * (size_t)nd->ntensors);
    if (!r.st || !r.q || !r.outs || !refs || !prod || !last_reader)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    /* each stage's inputs and outputs */
    for (int t = 0; t < nd->ntensors && !rc; t++)
        prod[t] = -1, last_reader[t] = -1;
    for (int v = 0; v < V && !rc; v++) {
        int vi[2], vo;
        vnode_io(nd, H, v, vi, &vo);
        prod[vo] = v;
        for (int j = 0; j < 2; j++)
            if (vi[j] >= 0 && stage_of[v] > last_reader[vi[j]])
                last_reader[vi[j]] = stage_of[v];
    }
    for (int s = 0; s < S && !rc; s++) {
        stage_t *st = &r.st[s];
        st->s = s;
        st->dev = plan->stages[s].slot < K ? plan->stages[s].slot : -1; /* -1: a host stage */
        st->run = &r;
        st->hv = st->tv = -1;
        if (plan->stages[s].head > 0) {
            st->hv = plan->stages[s].nodes[0];
            st->hc0 = nd->nodes[st->hv].conv.c_out / tsr_pp_node_units(pp, st->hv) * plan->stages[s].head;
        }
        if (plan->stages[s].tail > 0) {
            st->tv = plan->stages[s].nodes[plan->stages[s].nnodes - 1];
            st->tc1 = nd->nodes[st->tv].conv.c_out / tsr_pp_node_units(pp, st->tv) * plan->stages[s].tail;
        }
        st->clock = st->dev < 0 ? 1.0 : (double)tsr_mdev_config(m, 0)->clock_mhz / tsr_mdev_config(m, st->dev)->clock_mhz;
        st->in_t = malloc(sizeof(int) * (size_t)nd->ntensors);
        st->out_t = malloc(sizeof(int) * (size_t)nd->ntensors);
        st->cyc = calloc((size_t)N, sizeof(double));
        st->hcyc = calloc((size_t)N, sizeof(double));
        st->hx = NH ? malloc(sizeof(uint64_t) * 3 * (size_t)NH) : NULL;
        if (!st->in_t || !st->out_t || !st->cyc || !st->hcyc || (NH && !st->hx)) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            break;
        }
        for (int t = 0; t < nd->ntensors; t++) {
            int p = prod[t];
            int reads = 0;
            for (int v = 0; v < V && !reads; v++) {
                int vi[2], vo;
                vnode_io(nd, H, v, vi, &vo);
                reads = (stage_of[v] == s || v == st->tv) && (vi[0] == t || vi[1] == t);
            }
            if (reads && (p < 0 || stage_of[p] != s))
                st->in_t[st->nin++] = t;
            if (p >= 0 && stage_of[p] == s && (last_reader[t] > s || t == nd->output))
                st->out_t[st->nout++] = t;
        }
        for (int j = 0; j < st->nin; j++) {
            uint64_t b = tsr_netdesc_tensor_bytes(nd, st->in_t[j]);
            st->bytes_in += b;
            st->link += tsr_mdev_link_cycles(m, b);
        }
        const tsr_pp_stage_t *ps = &plan->stages[s];
        st->parts = ps->parts > 1 ? ps->parts : 1;
        if (st->parts > 1 && st->nout != 1)
            rc = tsr_err(TSR_EINVAL, "pipeline: split stage %d has %d outputs, need 1", s, st->nout);
        if (st->parts > 1 && !rc) { /* each part device sends its slice (the host gathers): that is its link */
            const tsr_nd_tensor_t *y = &nd->tensors[st->out_t[0]];
            st->batch = y->n;
            st->slice = tsr_netdesc_tensor_bytes(nd, st->out_t[0]) / (uint64_t)y->n / (uint64_t)st->parts;
            st->bytes_out = st->slice * (uint64_t)y->n;
            st->link += tsr_mdev_link_cycles(m, st->bytes_out);
            for (int j = 0; j < st->parts && !rc; j++) {
                st->devs[j] = ps->slots[j];
                st->clk[j] = (double)tsr_mdev_config(m, 0)->clock_mhz / tsr_mdev_config(m, st->devs[j])->clock_mhz;
                if (!(st->pbuf[j] = malloc(st->bytes_out)))
                    rc = tsr_err(TSR_ENOMEM, "out of memory");
            }
            continue;
        }
        for (int j = 0; j < st->nout; j++) {
            uint64_t b = tsr_netdesc_tensor_bytes(nd, st->out_t[j]);
            st->bytes_out += b;
            st->link += tsr_mdev_link_cycles(m, b);
        }
        /* the shared boundary: the earlier slice in; this part's slice to the host and back; the tail slice out */
        if (st->hv >= 0) {
            const tsr_nd_node_t *hn = &nd->nodes[st->hv];
            uint64_t whole = tsr_netdesc_tensor_bytes(nd, hn->out), per = whole / (uint64_t)hn->conv.c_out;
            uint64_t a = per * (uint64_t)st->hc0, bb = whole - a;
            st->extra[st->nextra++] = a;
            st->extra[st->nextra++] = bb;
            st->extra[st->nextra++] = bb;
            st->bytes_in += a + bb;
            st->bytes_out += bb;
            if (!(st->hbuf = malloc(bb)))
                rc = tsr_err(TSR_ENOMEM, "out of memory");
        }
        if (st->tv >= 0) {
            const tsr_nd_node_t *tn = &nd->nodes[st->tv];
            uint64_t b = tsr_netdesc_tensor_bytes(nd, tn->out) / (uint64_t)tn->conv.c_out * (uint64_t)st->tc1;
            st->extra[st->nextra++] = b;
            st->bytes_out += b;
        }
        for (int j = 0; j < st->nextra; j++)
            st->link += tsr_mdev_link_cycles(m, st->extra[j]);
        /* host nodes in a device stage: each one's input to the host and its output back (the planner's
         * merged host node); a host stage pays its inputs and outputs only, as any stage */
        for (int k = 0; k < plan->stages[s].nnodes && st->dev >= 0; k++) {
            int h = plan->stages[s].nodes[k] - nd->nnodes;
            if (h < 0)
                continue;
            st->hx[st->nhx++] = tsr_netdesc_tensor_bytes(nd, H->in_t[h]);
            if (H->in2_t && H->in2_t[h] >= 0)
                st->hx[st->nhx++] = tsr_netdesc_tensor_bytes(nd, H->in2_t[h]);
            st->hx[st->nhx++] = tsr_netdesc_tensor_bytes(nd, H->out_t[h]);
        }
        for (int j = 0; j < st->nhx; j++)
            st->link += tsr_mdev_link_cycles(m, st->hx[j]);
    }
    /* plan every stage's graph on its device (weights uploaded once): a stage that does not fit its
     * device is refused before anything runs */
    for (int s = 0; s < S && !rc; s++) {
        stage_t *st = &r.st[s];
        if (st->parts > 1) {
            for (int j = 0; j < st->parts && !rc; j++)
                if ((rc = split_graph(nd, tsr_mdev_config(m, st->devs[j]), plan->stages[s].nodes[0], st->parts, j,
                                      &st->gp[j])) ||
                    (rc = tsr_graph_plan(st->gp[j], tsr_mdev_device(m, st->devs[j]), o.flags)))
                    tsr_err_prefix(rc, "pipeline: split stage %d, part %d on device %d (%s): ", s, j, st->devs[j],
                                   tsr_mdev_backend(m, st->devs[j]));
            continue;
        }
        int mixed = 0; /* a stage with host nodes runs in pieces */
        for (int k = 0; k < plan->stages[s].nnodes; k++)
            mixed |= plan->stages[s].nodes[k] >= nd->nnodes;
        if (mixed) {
            if ((rc = pieces_build(nd, H, tsr_mdev_config(m, st->dev >= 0 ? st->dev : 0),
                                   st->dev >= 0 ? tsr_mdev_device(m, st->dev) : NULL, o.flags, plan->stages[s].nodes,
                                   NULL, plan->stages[s].nnodes, &st->pc, &st->npc)))
                tsr_err_prefix(rc, "pipeline: stage %d on %s %d: ", s, st->dev >= 0 ? "device" : "host stage",
                               st->dev >= 0 ? st->dev : plan->stages[s].slot - K);
            continue;
        }
        if ((rc = stage_graph(nd, tsr_mdev_config(m, st->dev), &plan->stages[s], st)) ||
            (rc = tsr_graph_plan(st->g, tsr_mdev_device(m, st->dev), o.flags)))
            tsr_err_prefix(rc, "pipeline: stage %d on device %d (%s): ", s, st->dev, tsr_mdev_backend(m, st->dev));
        if (!rc && st->hv >= 0 &&
            ((rc = slice_graph(nd, tsr_mdev_config(m, st->dev), st->hv, st->hc0, nd->nodes[st->hv].conv.c_out,
                               &st->gh)) ||
             (rc = tsr_graph_plan(st->gh, tsr_mdev_device(m, st->dev), o.flags))))
            tsr_err_prefix(rc, "pipeline: stage %d's part of shared node \"%s\" on device %d: ", s,
                           nd->nodes[st->hv].name, st->dev);
    }
    /* the single-device run: its outputs are what every pipeline output must equal */
    if (!rc && !o.no_reference)
        rc = NH ? reference_host(m, nd, &o, N, refs, &res->single) : reference(m, nd, &o, N, refs, &res->single);
    if (res->single > 0) /* one device also receives the input from the host and sends the output back */
        res->single += tsr_mdev_link_cycles(m, tsr_netdesc_tensor_bytes(nd, 0)) +
                       tsr_mdev_link_cycles(m, tsr_netdesc_tensor_bytes(nd, nd->output));
    for (int s = 0; s < S - 1 && !rc; s++) {
        queue_t *q = &r.q[s];
        q->cap = o.queue_depth;
        q->abort = &r.abort;
        if (!(q->ring = calloc((size_t)q->cap, sizeof *q->ring)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        pthread_mutex_init(&q->mu, NULL);
        pthread_cond_init(&q->cv, NULL);
    }
    int nthreads = 0;
    pthread_t *th = rc ? NULL : calloc((size_t)S, sizeof *th);
    if (!rc && !th)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    double t0 = tsr_now_s();
    if (!rc) {
        tsr_mdev_clear_link(m);
        for (int s = 0; s < S; s++) {
            if (pthread_create(&th[s], NULL, stage_main, &r.st[s])) {
                run_fail(&r, s, tsr_err(TSR_ENOMEM, "pipeline: cannot start the thread of stage %d", s));
                break;
            }
            nthreads++;
        }
        for (int s = 0; s < nthreads; s++)
            pthread_join(th[s], NULL);
        res->wall_s = tsr_now_s() - t0;
        if (r.err) {
            int d = r.st[r.err_stage].dev;
            res->failed_device = d;
            /* the others' resets are what the message reports; the failed device's may fail too (an rtl
             * device whose process died) */
            int rr = tsr_mdev_reset_all(m, d);
            if (d >= 0)
                tsr_device_reset(tsr_mdev_device(m, d));
            if (d < 0)
                rc = tsr_err(r.err, "pipeline stopped: host stage %d failed: %s; the devices were %s", r.err_stage,
                             r.errmsg, rr ? "reset with an error" : "reset");
            else
                rc = tsr_err(r.err, "pipeline stopped: device %d (%s, stage %d) failed: %s; the other devices were %s",
                             d, tsr_mdev_backend(m, d), r.err_stage, r.errmsg, rr ? "reset with an error" : "reset");
        }
    }
    free(th);
    /* the figures */
    res->nstages = S;
    res->ninputs = N;
    for (int s = 0; s < S; s++) {
        stage_t *st = &r.st[s];
        tsr_pipex_stage_res_t *q = &res->st[s];
        const tsr_pp_stage_t *ps = &plan->stages[s];
        stage_res_plan(q, ps, st, nd, H);
        q->parts = st->parts;
        q->head = ps->head;
        q->tail = ps->tail;
        q->nin = st->nin;
        q->nout = st->nout;
        for (int i = 0; st->cyc && i < N; i++) {
            q->compute += st->cyc[i] / N;
            q->host += st->hcyc ? st->hcyc[i] / N : 0;
            if (st->cyc[i] > q->compute_max)
                q->compute_max = st->cyc[i];
        }
        stage_res_period(res, s);
    }
    if (!rc) {
        res_timed(res, S);
        timeline(&r, o.queue_depth, res);
        res_finish(res, nd, N, r.outs, o.outputs, o.no_reference, refs);
        if (shared && res->timed)
            rc = link_replay(&r, o.queue_depth, res);
    }
    /* free every stage's plan while its device is open */
    for (int s = 0; s < S && r.st; s++) {
        tsr_graph_free(r.st[s].g);
        tsr_graph_free(r.st[s].gh);
        free(r.st[s].hbuf);
        free(r.st[s].gin_t);
        for (int j = 0; j < TSR_PP_MAX_SPLIT; j++) {
            tsr_graph_free(r.st[s].gp[j]);
            free(r.st[s].pbuf[j]);
        }
        free(r.st[s].in_t);
        free(r.st[s].out_t);
        free(r.st[s].cyc);
        free(r.st[s].hcyc);
        free(r.st[s].hx);
        pieces_free(r.st[s].pc, r.st[s].npc);
    }
    for (int s = 0; s < S - 1 && r.q; s++)
        if (r.q[s].ring) {
            for (int k = 0; k < r.q[s].n; k++) /* bundles left in a stopped pipeline */
                bundle_free(nd, r.q[s].ring[(r.q[s].head + k) % r.q[s].cap]);
            free(r.q[s].ring);
            pthread_mutex_destroy(&r.q[s].mu);
            pthread_cond_destroy(&r.q[s].cv);
        }
    for (int i = 0; i < N; i++) {
        if (r.outs)
            free(r.outs[i]);
        if (refs)
            free(refs[i]);
    }
    free(r.outs), free(refs), free(r.st), free(r.q), free(prod), free(last_reader), free(stage_of);
    pthread_mutex_destroy(&r.emu);
    return rc;
}

int tsr_pipex_stage_alone(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *dopts,
                          const tsr_netdesc_t *nd, const tsr_pp_plan_t *plan, int s, unsigned flags, uint64_t seed,
                          double *cycles)
{
    return tsr_pipex_stage_alone_pp(backend, cfg, dopts, nd, NULL, plan, s, flags, seed, cycles);
}

int tsr_pipex_stage_alone_pp(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *dopts,
                             const tsr_netdesc_t *nd, const tsr_pp_t *pp, const tsr_pp_plan_t *plan, int s,
                             unsigned flags, uint64_t seed, double *cycles)
{
    if (!cfg || !nd || !plan || !cycles || s < 0 || s >= plan->nstages)
        return tsr_err(TSR_EINVAL, "stage alone: bad argument (stage %d)", s);
    *cycles = 0;
    const tsr_pp_stage_t *ps = &plan->stages[s];
    if (ps->parts > 1) /* a split stage: one part alone (every part has its shape and cycles) */
        return ps->nnodes == 1 ? tsr_pipex_calibrate_split(backend, cfg, dopts, nd, ps->nodes[0], ps->parts, flags, seed,
                                                           cycles)
                               : tsr_err(TSR_EINVAL, "stage alone: split stage %d has %d nodes", s, ps->nnodes);
    if ((ps->head > 0 || ps->tail > 0) && !pp)
        return tsr_err(TSR_EINVAL, "stage alone: stage %d shares a node with a neighbour: give the problem", s);
    int *stage_of = malloc(sizeof(int) * (size_t)(nd->nnodes + 1));
    int *prod = malloc(sizeof(int) * (size_t)nd->ntensors);
    stage_t st = {.s = s, .hv = -1, .tv = -1};
    if (ps->head > 0 && ps->nnodes > 0 && tsr_pp_node_units(pp, ps->nodes[0]) > 1) {
        st.hv = ps->nodes[0];
        st.hc0 = nd->nodes[st.hv].conv.c_out / tsr_pp_node_units(pp, st.hv) * ps->head;
    }
    if (ps->tail > 0 && ps->nnodes > 0 && tsr_pp_node_units(pp, ps->nodes[ps->nnodes - 1]) > 1) {
        st.tv = ps->nodes[ps->nnodes - 1];
        st.tc1 = nd->nodes[st.tv].conv.c_out / tsr_pp_node_units(pp, st.tv) * ps->tail;
    }
    tsr_graph_t *gh = NULL;
    st.in_t = malloc(sizeof(int) * (size_t)nd->ntensors);
    st.out_t = malloc(sizeof(int) * (size_t)nd->ntensors);
    const void **in = calloc((size_t)nd->ntensors + 2, sizeof *in);
    void **out = calloc((size_t)nd->ntensors + 2, sizeof *out);
    int rc = stage_of && prod && st.in_t && st.out_t && in && out ? TSR_OK : tsr_err(TSR_ENOMEM, "out of memory");
    for (int v = 0; v < nd->nnodes && !rc; v++)
        stage_of[v] = -1;
    for (int k = 0; k < plan->nstages && !rc; k++)
        for (int j = 0; j < plan->stages[k].nnodes; j++)
            if (plan->stages[k].nodes[j] >= 0 && plan->stages[k].nodes[j] < nd->nnodes &&
                !(j == plan->stages[k].nnodes - 1 && plan->stages[k].tail > 0)) /* shared: the later stage's */
                stage_of[plan->stages[k].nodes[j]] = k;
    for (int t = 0; t < nd->ntensors && !rc; t++)
        prod[t] = -1;
    for (int v = 0; v < nd->nnodes && !rc; v++)
        prod[nd->nodes[v].out] = v;
    /* the stage's inputs and outputs as the pipeline has them (outputs: read by another stage, or the network's) */
    for (int t = 0; t < nd->ntensors && !rc; t++) {
        int reads = 0, later = 0;
        for (int v = 0; v < nd->nnodes; v++)
            if (nd->nodes[v].in[0] == t || nd->nodes[v].in[1] == t) {
                reads |= stage_of[v] == s;
                later |= stage_of[v] != s;
            }
        int mine = prod[t] >= 0 && stage_of[prod[t]] == s;
        if (reads && !mine)
            st.in_t[st.nin++] = t;
        if (mine && (later || t == nd->output))
            st.out_t[st.nout++] = t;
    }
    tsr_device_t *dev = NULL;
    if (!rc)
        rc = tsr_device_open(backend ? backend : "fsim", cfg, dopts, &dev);
    if (!rc)
        rc = stage_graph(nd, cfg, ps, &st);
    if (!rc)
        rc = tsr_graph_plan(st.g, dev, flags);
    /* a shared node's later part first: its input and the joined output seeded bytes (cycles do not depend
     * on the data on the timed backends) */
    double hcyc = 0;
    if (!rc && st.hv >= 0 && !(rc = slice_graph(nd, cfg, st.hv, st.hc0, nd->nodes[st.hv].conv.c_out, &gh)) &&
        !(rc = tsr_graph_plan(gh, dev, flags))) {
        const tsr_nd_node_t *hn = &nd->nodes[st.hv];
        uint64_t xb = tsr_netdesc_tensor_bytes(nd, hn->in[0]), yb = tsr_netdesc_tensor_bytes(nd, hn->out);
        uint8_t *hx = malloc(xb), *hy = malloc(yb);
        uint64_t z = seed + 99;
        for (uint64_t i = 0; hx && i < xb; i++)
            hx[i] = (uint8_t)tsr_splitmix64(&z);
        const void *hin[1] = {hx};
        void *hout[1] = {hy};
        rc = hx && hy ? tsr_graph_exec(gh, hin, hout) : tsr_err(TSR_ENOMEM, "out of memory");
        tsr_graph_totals_t t;
        tsr_graph_totals(gh, &t);
        hcyc = t.cycles;
        free(hx), free(hy);
    }
    /* inputs: seeded bytes (a layer's cycles do not depend on its data on the timed backends) */
    if (!rc && st.gin_t) { /* the graph's own inputs (a shared node's joined output among them) */
        st.nin = st.gnin;
        memcpy(st.in_t, st.gin_t, sizeof(int) * (size_t)st.gnin);
    }
    for (int j = 0; j < st.nin && !rc; j++) {
        uint64_t n = tsr_netdesc_tensor_bytes(nd, st.in_t[j]);
        uint8_t *b = malloc(n ? n : 1);
        if (!(in[j] = b)) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            break;
        }
        uint64_t z = seed + (uint64_t)st.in_t[j];
        for (uint64_t i = 0; i < n; i++)
            b[i] = (uint8_t)tsr_splitmix64(&z);
    }
    for (int j = 0; j < st.nout && !rc; j++)
        if (!(out[j] = malloc(tsr_netdesc_tensor_bytes(nd, st.out_t[j]))))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc && st.tv >= 0 && !(out[st.nout] = malloc(tsr_netdesc_tensor_bytes(nd, nd->nodes[st.tv].out))))
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc)
        rc = tsr_graph_exec(st.g, in, out);
    if (!rc) {
        tsr_graph_totals_t t;
        tsr_graph_totals(st.g, &t);
        *cycles = t.cycles + hcyc;
    }
    if (st.tv >= 0 && out)
        free(out[st.nout]);
    tsr_graph_free(gh);
    tsr_graph_free(st.g);
    free(st.gin_t);
    tsr_device_close(dev);
    for (int j = 0; in && j < st.nin; j++)
        free((void *)in[j]);
    for (int j = 0; out && j < st.nout; j++)
        free(out[j]);
    free(in), free(out), free(st.in_t), free(st.out_t), free(stage_of), free(prod);
    return rc ? tsr_err_prefix(rc, "stage %d alone on %s: ", s, backend ? backend : "fsim") : TSR_OK;
}

int tsr_pipex_calibrate(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *dopts,
                       const tsr_netdesc_t *nd, unsigned flags, uint64_t seed, double *cost)
{
    if (!cfg || !nd || !cost)
        return tsr_err(TSR_EINVAL, "calibrate: NULL argument");
    tsr_device_t *dev = NULL;
    tsr_graph_t *g = NULL;
    uint8_t *x = malloc(tsr_netdesc_tensor_bytes(nd, 0)), *y = malloc(tsr_netdesc_tensor_bytes(nd, nd->output));
    int rc = x && y ? tsr_device_open(backend ? backend : "fsim", cfg, dopts, &dev) : tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc)
        rc = tsr_graph_from_netdesc(cfg, nd, &g);
    if (!rc)
        rc = tsr_graph_plan(g, dev, flags);
    if (!rc) {
        tsr_netdesc_random_input(nd, seed, x);
        const void *in[1] = {x};
        void *out[1] = {y};
        rc = tsr_graph_exec(g, in, out);
    }
    for (int v = 0; v < nd->nnodes; v++)
        cost[v] = 0;
    const tsr_graph_layer_t *L;
    for (int i = 0; !rc && (L = tsr_graph_layer(g, i)); i++) {
        int v = tsr_graph_layer_node(g, i);
        if (v >= 0 && v < nd->nnodes)
            cost[v] += L->cycles;
    }
    tsr_graph_free(g);
    tsr_device_close(dev);
    free(x), free(y);
    return rc ? tsr_err_prefix(rc, "calibrate: ") : TSR_OK;
}

int tsr_pipex_calibrate_split(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *dopts,
                              const tsr_netdesc_t *nd, int v, int parts, unsigned flags, uint64_t seed, double *cycles)
{
    if (!cfg || !nd || !cycles)
        return tsr_err(TSR_EINVAL, "calibrate split: NULL argument");
    *cycles = 0;
    tsr_graph_t *g = NULL;
    int rc = split_graph(nd, cfg, v, parts, 0, &g);
    if (rc) /* (v is checked by split_graph) */
        return tsr_err_prefix(rc, "calibrate split: ");
    const tsr_nd_node_t *nn = &nd->nodes[v];
    return time_graph(rc, g, backend, cfg, dopts, tsr_netdesc_tensor_bytes(nd, nn->in[0]),
                      tsr_netdesc_tensor_bytes(nd, nn->out) / (uint64_t)parts, flags, seed, cycles,
                      "calibrate split: ");
}

/* The shared link's replay: the planner's bounds against the contended period. */
static void link_print(const tsr_pipex_result_t *r, FILE *f)
{
    double bound = r->period_pred > r->link_floor ? r->period_pred : r->link_floor;
    fprintf(f, "shared link (one link for every device and the host, FIFO; the measured cycles replayed on the "
               "SystemC/TLM interconnect):\n");
    fprintf(f, "  link cycles per input %.0f (the period's lower bound with one link), busy %.1f%% of the makespan\n",
            r->link_floor, r->makespan_link > 0 ? 100.0 * r->link_busy / r->makespan_link : 0);
    fprintf(f, "  waits for the link, cycles per input (the repeated stream's, fill and drain included):");
    for (int s = 0; s < r->nstages; s++)
        fprintf(f, " stage %d %.0f%s", s, r->link_wait[s], s + 1 < r->nstages ? "," : "\n");
    fprintf(f, "  period: predicted %.0f (no contention), with the shared link's bound %.0f; replayed, the "
               "stream repeated: %.0f without contention (a link per device), %.0f with it (%+.2f%%)\n",
            r->period_pred, bound, r->period_p2p, r->period_link,
            r->period_p2p > 0 ? 100.0 * (r->period_link - r->period_p2p) / r->period_p2p : 0);
    fprintf(f, "  makespan %.0f cycles with contention, %.0f without (the timeline's %.0f)", r->makespan_link,
            r->makespan_p2p, r->makespan);
    if (r->single > 0)
        fprintf(f, "; speed-up %.3fx steady state, %.3fx over these %d inputs", r->speedup_link,
                r->makespan_link > 0 ? r->ninputs * r->single / r->makespan_link : 0, r->ninputs);
    fprintf(f, "\n");
}

void tsr_pipex_print(const tsr_pipex_result_t *r, FILE *f)
{
    fprintf(f, "%-5s %-6s %5s  %-34s %12s %12s %10s %12s %7s %10s\n", "stage", "device", "nodes", "layers",
            "pred cycles", "meas compute", "link", "meas total", "error", "sent B");
    for (int s = 0; s < r->nstages; s++) {
        const tsr_pipex_stage_res_t *q = &r->st[s];
        char span[100];
        snprintf(span, sizeof span, "%s .. %s", q->first, q->last);
        char err[16] = "-";
        if (r->timed && q->measured > 0)
            snprintf(err, sizeof err, "%+.2f%%", 100.0 * (q->predicted - q->measured) / q->measured);
        char dev[16]; /* a split stage: its first device and its parts ("0x2": devices 0 and 1 in the plan) */
        if (q->device < 0)
            snprintf(dev, sizeof dev, "host");
        else if (q->parts > 1)
            snprintf(dev, sizeof dev, "%dx%d", q->device % 1000, q->parts % 10);
        else
            snprintf(dev, sizeof dev, "%d", q->device % 1000);
        fprintf(f, "%-5d %-6s %5d  %-34.34s %12.0f %12.0f %10.0f %12.0f %7s %10llu\n", s, dev, q->nnodes, span,
                q->predicted, q->compute, q->link, q->measured, err, (unsigned long long)q->bytes_out);
        if (q->host_nodes)
            fprintf(f, "      (%s: %d host node%s, host cycles per input predicted %.0f, measured %.0f (the host model: "
                       "thread CPU time x the clock)%s)\n",
                    q->device < 0 ? "host stage, its own thread" : "on the device's host thread", q->host_nodes,
                    q->host_nodes == 1 ? "" : "s", q->pred_host, q->host,
                    q->device < 0 ? "" : ", in its compute; link: their round trips too");
        if (q->parts > 1)
            fprintf(f, "      (split stage: %d output-channel parts, one per device; compute is the slowest part, "
                       "link and sent bytes one part's)\n", q->parts);
        if (q->head > 0 || q->tail > 0) {
            fprintf(f, "      (shared boundary:");
            if (q->head > 0)
                fprintf(f, " %s from unit %d, the stage before runs its first %d;", q->first, q->head + 1, q->head);
            if (q->tail > 0)
                fprintf(f, " %s's first %d units, the stage after runs the rest;", q->last, q->tail);
            fprintf(f, " the host joins the slices)\n");
        }
    }
    if (r->timed) {
        fprintf(f, "slowest stage: predicted %.0f cycles (stage %d), measured %.0f cycles (stage %d): %+.2f%%\n",
                r->period_pred, r->slowest_pred, r->period_meas, r->slowest_meas,
                100.0 * (r->period_pred - r->period_meas) / r->period_meas);
        fprintf(f, "%d inputs: makespan %.0f cycles, throughput %.3f inputs per Mcycle, latency (batch 1) %.0f cycles\n",
                r->ninputs, r->makespan, r->throughput * 1e6, r->latency);
        if (r->single > 0)
            fprintf(f, "one device: %.0f cycles per input; speed-up %.3fx steady state (one input per slowest stage), "
                       "%.3fx over these %d inputs (pipeline fill included)\n",
                    r->single, r->speedup, r->speedup_n, r->ninputs);
    } else
        fprintf(f, "untimed backend (fsim): outputs only, no cycles\n");
    if (r->link_shared)
        link_print(r, f);
    int hp = r->nstages > 0 && r->st[r->slowest_pred].device < 0,
        hm = r->nstages > 0 && r->timed && r->st[r->slowest_meas].device < 0;
    if (hp || hm) /* a valid plan: the host is the slowest stage (the devices wait for it) */
        fprintf(f, "the bottleneck is a host stage (%s): the devices wait for the host\n",
                hp && hm ? "predicted and measured" : hp ? "predicted" : "measured");
    if (r->checked)
        fprintf(f, "outputs equal to the single-device run: %s (%d of %d)\n", r->equal == r->checked ? "yes" : "NO",
                r->equal, r->checked);
    fprintf(f, "host wall time %.2f s (not the measure: device cycles are)\n", r->wall_s);
}
