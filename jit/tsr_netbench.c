/*
 * tsr_netbench: ResNet-18 layer by layer and as a whole network on a
 * device (tsr_netbench.h). Why the layer table: the headline number of the
 * accelerator is how close real layers get to their roofline, not a
 * synthetic GEMM loop; each convolution runs through the conv2d JIT (plan
 * with the kernel cache, pack, exec) on random int8 data with per-channel
 * requantization, and its cycles are set against max(compute, compulsory
 * DRAM traffic). Why the network: the accelerator's job is a whole
 * network; it is planned once and run end to end, activations staying in
 * device DRAM from the first layer to the last.
 */
#include "tsr_netbench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tsr_error.h"
#include "tsr_kcache.h"
#include "tsr_oprun.h"
#include "tsr_roofline.h"
#include "tsr_tappack.h"
#include "tsr_util.h"

int tsr_netbench_open_devices(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *base, int check,
                              uint64_t seed, tsr_device_t **dev, tsr_device_t **chk)
{
    *dev = NULL;
    *chk = NULL;
    tsr_device_opts_t dopts = {0};
    if (base)
        dopts = *base;
    dopts.rtl.verbose = 1;
    int rc = tsr_device_open(backend, cfg, &dopts, dev);
    if (!rc && check) {
        tsr_device_opts_t co = {.seed = seed * 2654435761u + 1}; /* random legal stage interleaving */
        rc = tsr_device_open("fsim", cfg, &co, chk);
    }
    if (rc) {
        if (*dev)
            tsr_device_close(*dev);
        *dev = NULL;
        *chk = NULL;
    }
    return rc;
}

/* ------------------------------------------------------------ the layers */

static const tsr_rn18_layer_t rn_layers[TSR_RN18_LAYERS] = {
    {"C1", 224, 3, 64, 7, 3, 2},     {"C2", 56, 64, 64, 3, 1, 1},     {"C3", 56, 64, 128, 3, 1, 2},
    {"C4", 56, 64, 128, 1, 0, 2},    {"C5", 28, 128, 128, 3, 1, 1},   {"C6", 28, 128, 256, 3, 1, 2},
    {"C7", 28, 128, 256, 1, 0, 2},   {"C8", 14, 256, 256, 3, 1, 1},   {"C9", 14, 256, 512, 3, 1, 2},
    {"C10", 14, 256, 512, 1, 0, 2},  {"C11", 7, 512, 512, 3, 1, 1},
};

const tsr_rn18_layer_t *tsr_rn18_layer(int i)
{
    return i >= 0 && i < TSR_RN18_LAYERS ? &rn_layers[i] : NULL;
}

int tsr_rn18_layer_find(const char *name)
{
    for (int i = 0; i < TSR_RN18_LAYERS; i++)
        if (!strcasecmp(name, rn_layers[i].name))
            return i;
    return -1;
}

/* Layer data and parameters, from the seed. */
typedef struct {
    tsr_conv2d_params_t p;
    int32_t w_zp, *mult, *shift, *bias;
    int8_t *x, *w, *y, *yc; /* input, weights, output, reference output */
    size_t nx, nw, ny;
    int oh, ow;
} rn_data_t;

static void rn_free(rn_data_t *d)
{
    free(d->mult);
    free(d->shift);
    free(d->bias);
    free(d->x);
    free(d->w);
    free(d->y);
    free(d->yc);
}

static void rn_params(const tsr_rn18_layer_t *L, rn_data_t *d)
{
    tsr_conv2d_params_t *p = &d->p;
    p->n = 1;
    p->c_in = L->cin;
    p->h = p->w = L->hw;
    p->c_out = L->cout;
    p->kh = p->kw = L->k;
    p->stride_h = p->stride_w = L->stride;
    p->pad_top = p->pad_left = p->pad_bottom = p->pad_right = L->pad;
    p->groups = 1;
    p->x_dtype = p->w_dtype = p->y_dtype = TSR_DT_INT8;
    p->x_zp = -128; /* post-ReLU activations, TFLite int8 style */
    p->y_zp = -128;
    p->act_min = -128; /* ReLU: clamp at the zero point */
    p->act_max = 127;
    p->w_zp = &d->w_zp;
    p->w_zp_count = 1;
    p->rq_count = L->cout;
    d->oh = (L->hw + 2 * L->pad - L->k) / L->stride + 1;
    d->ow = d->oh;
    d->nx = (size_t)L->cin * L->hw * L->hw;
    d->nw = (size_t)L->cout * L->cin * L->k * L->k;
    d->ny = (size_t)L->cout * d->oh * d->ow;
}

/* Random data: inputs and weights uniform int8; accumulators then have an
 * rms of about sqrt(K) * 147 * 74, so a multiplier in [0.5, 1) and a right
 * shift of log2(sqrt(K) * 128) put the outputs in the int8 range without
 * saturating most of them. */
static void rn_fill(const tsr_rn18_layer_t *L, uint64_t seed, rn_data_t *d)
{
    uint64_t s = seed * 0x100000001b3ull + (uint64_t)(L - rn_layers);
    for (size_t i = 0; i < d->nx; i++)
        d->x[i] = (int8_t)tsr_splitmix64(&s);
    for (size_t i = 0; i < d->nw; i++)
        d->w[i] = (int8_t)tsr_splitmix64(&s);
    int kterms = L->cin * L->k * L->k;
    int sh = (int)lround(log2(sqrt((double)kterms) * 128.0));
    for (int o = 0; o < L->cout; o++) {
        d->mult[o] = (int32_t)((1u << 30) + (uint32_t)(tsr_splitmix64(&s) % (1u << 30)));
        d->shift[o] = -sh - (int)(tsr_splitmix64(&s) % 2);
        d->bias[o] = (int32_t)(tsr_splitmix64(&s) % 32768) - 16384;
    }
}

static int rn_make(const tsr_rn18_layer_t *L, uint64_t seed, rn_data_t *d)
{
    memset(d, 0, sizeof *d);
    rn_params(L, d);
    size_t nc = (size_t)L->cout;
    d->mult = malloc(sizeof(int32_t) * nc);
    d->shift = malloc(sizeof(int32_t) * nc);
    d->bias = malloc(sizeof(int32_t) * nc);
    d->x = malloc(d->nx);
    d->w = malloc(d->nw);
    d->y = malloc(d->ny);
    d->yc = malloc(d->ny);
    if (!d->mult || !d->shift || !d->bias || !d->x || !d->w || !d->y || !d->yc) {
        rn_free(d);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    d->p.mult = d->mult;
    d->p.shift = d->shift;
    rn_fill(L, seed, d);
    int rc = tsr_conv2d_check(&d->p, &d->oh, &d->ow);
    if (rc)
        rn_free(d);
    return rc;
}

/* Few input channels (C1): the exact tap-packed rewrite; the host packing
 * happens here, before the device counters start. */
static int rn_run_tappacked(tsr_lbench_t *b, rn_data_t *d, tsr_lbench_row_t *row, tsr_oprun_info_t *oi)
{
    double t0 = tsr_now_s();
    uint64_t nx2 = tsr_tappack_input_bytes(&d->p);
    uint8_t *x2 = malloc(nx2 ? (size_t)nx2 : 1), *w2 = malloc(d->nw);
    int rc = !x2 || !w2 ? tsr_err(TSR_ENOMEM, "out of memory") : tsr_tappack_rewrite(&d->p, d->w, &row->tp, w2);
    if (!rc) {
        tsr_tappack_pack_input(&d->p, d->x, x2);
        row->tappacked = 1;
        row->tp_bytes = nx2;
        row->tp_ms = (tsr_now_s() - t0) * 1e3;
        rc = tsr_oprun(b->dev, TSR_OPRUN_CONV2D, &row->tp, x2, w2, d->bias, d->y, oi);
    }
    free(x2);
    free(w2);
    return rc;
}

/* The reference run on fsim, compared byte for byte. */
static int rn_check(tsr_lbench_t *b, rn_data_t *d, tsr_lbench_row_t *row)
{
    int rc = tsr_oprun(b->chk, TSR_OPRUN_CONV2D, &d->p, d->x, d->w, d->bias, d->yc, NULL);
    if (rc)
        return rc;
    row->checked = 1;
    for (size_t i = 0; i < d->ny; i++)
        if (d->y[i] != d->yc[i]) {
            row->differs = 1;
            row->diff_flat = i;
            row->diff_n = d->ny;
            row->diff_x = (int)(i % (size_t)d->ow);
            row->diff_y = (int)(i / (size_t)d->ow % (size_t)d->oh);
            row->diff_c = (int)(i / ((size_t)d->ow * d->oh));
            row->diff_dev = d->y[i];
            row->diff_ref = d->yc[i];
            break;
        }
    return TSR_OK;
}

/* The roofline figures of a run layer. */
static void rn_figures(const tsr_lbench_t *b, const rn_data_t *d, const tsr_counters_t *ctr, tsr_lbench_row_t *row)
{
    row->macs = tsr_roofline_conv2d_macs(&d->p);
    row->compulsory = tsr_roofline_conv2d_compulsory(&d->p, 0);
    double comp_rd = tsr_roofline_conv2d_compulsory(&d->p, 1);
    row->moved = tsr_roofline_moved(ctr);
    tsr_roofline_t rl = tsr_roofline_bound(&b->cfg, row->macs, row->compulsory, b->bw);
    row->bound = rl.bound;
    row->memory_bound = rl.memory_bound;
    row->bound_rd = tsr_roofline_bound(&b->cfg, row->macs, comp_rd, b->bw).bound;
    row->cycles = (double)ctr->cycles;
    row->timed = row->cycles > 0;
    if (row->timed) {
        row->util = row->macs / (row->cycles * b->peak);
        row->ratio = row->bound / row->cycles;
        row->ratio_rd = row->bound_rd / row->cycles;
    }
}

int tsr_lbench_layer(tsr_lbench_t *b, int i, tsr_lbench_row_t *row)
{
    const tsr_rn18_layer_t *L = tsr_rn18_layer(i);
    memset(row, 0, sizeof *row);
    if (!L)
        return tsr_err(TSR_EINVAL, "no ResNet-18 layer %d (0..%d)", i, TSR_RN18_LAYERS - 1);
    row->layer = L;
    rn_data_t d;
    int rc = rn_make(L, b->seed, &d);
    if (rc)
        return tsr_err_prefix(rc, "%s: ", L->name);
    tsr_oprun_info_t oi;
    memset(&oi, 0, sizeof oi);
    if (b->tappack && tsr_tappack_applies(&d.p, &b->cfg))
        rc = rn_run_tappacked(b, &d, row, &oi);
    else
        rc = tsr_oprun(b->dev, TSR_OPRUN_CONV2D, &d.p, d.x, d.w, d.bias, d.y, &oi);
    row->jit_ms = oi.plan_ms;
    row->kcache = oi.kcache;
    if (!rc && b->chk)
        rc = rn_check(b, &d, row);
    if (!rc)
        rn_figures(b, &d, &oi.ctr, row);
    rn_free(&d);
    return rc ? tsr_err_prefix(rc, "%s: ", L->name) : TSR_OK;
}

int tsr_lbench_open(const tsr_lbench_opts_t *o, tsr_lbench_t *b)
{
    memset(b, 0, sizeof *b);
    b->seed = o->seed;
    b->tappack = o->tappack;
    int rc = tsr_config_load(o->cfgname, &b->cfg);
    if (!rc)
        rc = tsr_netbench_open_devices(o->backend, &b->cfg, o->dev, o->check, o->seed, &b->dev, &b->chk);
    if (!rc && o->no_cache) {
        tsr_kcache_opts_t ko = {.disabled = 1};
        tsr_kcache_t *kc;
        rc = tsr_kcache_create(b->dev, &ko, &kc);
    }
    if (rc) {
        tsr_lbench_close(b);
        return rc;
    }
    b->peak = (double)b->cfg.macs_per_op;
    b->bw = tsr_roofline_dram_bw(&b->cfg, o->dev ? o->dev->rtl.dram_bytes_per_cycle : 0);
    return TSR_OK;
}

void tsr_lbench_close(tsr_lbench_t *b)
{
    tsr_device_close(b->chk);
    tsr_device_close(b->dev);
    b->chk = b->dev = NULL;
}

void tsr_lbench_total_init(tsr_lbench_total_t *t)
{
    memset(t, 0, sizeof *t);
    t->timed = 1;
}

void tsr_lbench_total_add(const tsr_lbench_t *b, tsr_lbench_total_t *t, const tsr_lbench_row_t *row)
{
    t->macs += row->macs;
    t->cycles += row->cycles;
    t->bound += row->bound;
    t->bound_rd += row->bound_rd;
    t->moved += row->moved;
    t->compulsory += row->compulsory;
    t->jit_ms += row->jit_ms;
    t->nrun++;
    t->ndiff += row->differs;
    t->timed = t->timed && row->timed;
    if (t->timed && t->cycles > 0) {
        t->util = t->macs / (t->cycles * b->peak);
        t->ratio = t->bound / t->cycles;
        t->ratio_rd = t->bound_rd / t->cycles;
    }
}

/* ------------------------------------------------------------ the network */

static int nb_describe(const tsr_netbench_opts_t *o, tsr_netbench_t *nb)
{
    const double t0 = tsr_now_s();
    int rc = o->small ? tsr_netdesc_resnet18_small(o->seed, o->batch, o->small_hw, o->small_width,
                                                   o->small_classes, &nb->nd)
                      : tsr_netdesc_resnet18(o->seed, o->batch, &nb->nd);
    nb->desc_ms = (tsr_now_s() - t0) * 1e3;
    return rc;
}

/* Plan the network, then plan it again: every kernel from the in-memory cache. */
static int nb_plan(tsr_netbench_t *nb)
{
    tsr_graph_t *g2 = NULL;
    int rc = tsr_graph_from_netdesc(&nb->cfg, &nb->nd, &nb->g);
    if (rc)
        return rc;
    tsr_graph_set_dram_bw(nb->g, nb->dram_bw);
    if ((rc = tsr_graph_plan(nb->g, nb->dev, nb->flags)))
        return rc;
    if (!(rc = tsr_graph_from_netdesc(&nb->cfg, &nb->nd, &g2)) && !(rc = tsr_graph_plan(g2, nb->dev, nb->flags)))
        tsr_graph_totals(g2, &nb->again);
    tsr_graph_free(g2);
    return rc;
}

/* Run it runs times on a seeded random input; the first image's top class. */
static int nb_exec(const tsr_netbench_opts_t *o, tsr_netbench_t *nb)
{
    const tsr_netdesc_t *nd = &nb->nd;
    const uint64_t nin = tsr_netdesc_tensor_bytes(nd, 0), nout = tsr_netdesc_tensor_bytes(nd, nd->output);
    nb->in = malloc(nin);
    nb->out = malloc(nout);
    if (!nb->in || !nb->out)
        return tsr_err(TSR_ENOMEM, "out of memory");
    tsr_netdesc_random_input(nd, o->seed, nb->in);
    const void *ins[1] = {nb->in};
    void *outs[1] = {nb->out};
    double wall = 0;
    for (int r = 0; r < o->runs; r++) {
        const double t0 = tsr_now_s();
        int rc = tsr_graph_exec(nb->g, ins, outs);
        if (rc)
            return rc;
        wall += tsr_now_s() - t0;
    }
    nb->wall_s = wall / (double)o->runs;
    int top = 0;
    for (uint64_t i = 1; i < nout && i < (uint64_t)nd->tensors[nd->output].c; i++)
        if ((int8_t)nb->out[i] > (int8_t)nb->out[top])
            top = (int)i;
    nb->top = top;
    nb->top_logit = (int8_t)nb->out[top];
    return TSR_OK;
}

int tsr_netbench_run(const tsr_netbench_opts_t *o, tsr_netbench_t *nb)
{
    memset(nb, 0, sizeof *nb);
    if (o->batch < 1 || o->runs < 1)
        return tsr_err(TSR_EINVAL, "batch %d and runs %d must be at least 1", o->batch, o->runs);
    nb->flags = o->flags | (o->check ? TSR_GRAPH_KEEP_ALL : 0);
    int rc = tsr_config_load(o->cfgname, &nb->cfg);
    if (!rc)
        rc = tsr_netbench_open_devices(o->backend, &nb->cfg, o->dev, o->check, o->seed, &nb->dev, &nb->chk);
    if (rc)
        return rc;
    nb->dram_bw = tsr_roofline_dram_bw(&nb->cfg, o->dev ? o->dev->rtl.dram_bytes_per_cycle : 0);
    if (!(rc = nb_describe(o, nb)) && !(rc = nb_plan(nb)))
        rc = nb_exec(o, nb);
    return rc;
}

/* Compare tensor t of node i: the device's graph against the reference's. */
static int nb_compare(tsr_netbench_t *nb, tsr_graph_t *gc, int i, uint8_t **a, uint8_t **b, tsr_netbench_diff_t *d)
{
    const int t = nb->nd.nodes[i].out;
    const uint64_t n = tsr_netdesc_tensor_bytes(&nb->nd, t);
    free(*a);
    free(*b);
    *a = malloc(n);
    *b = malloc(n);
    if (!*a || !*b)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = tsr_graph_read_tensor(nb->g, t, *a);
    if (!rc)
        rc = tsr_graph_read_tensor(gc, t, *b);
    for (uint64_t k = 0; !rc && k < n; k++)
        if ((*a)[k] != (*b)[k]) {
            *d = (tsr_netbench_diff_t){t, nb->nd.nodes[i].name, k, n, (*a)[k], (*b)[k]};
            return 1;
        }
    return rc;
}

int tsr_netbench_check(tsr_netbench_t *nb, void (*on_diff)(const tsr_netbench_diff_t *d, void *ctx), void *ctx,
                       tsr_netbench_check_t *out)
{
    memset(out, 0, sizeof *out);
    if (!nb->chk || !nb->g)
        return tsr_err(TSR_EINVAL, "the network was not run for a check");
    /* the reference run has every add on its own: the fused epilogues
     * are checked byte for byte against the standalone adds */
    tsr_graph_t *gc = NULL;
    const void *ins[1] = {nb->in};
    int rc = tsr_graph_from_netdesc(&nb->cfg, &nb->nd, &gc);
    if (!rc && !(rc = tsr_graph_plan(gc, nb->chk, nb->flags | TSR_GRAPH_NO_FUSE)))
        rc = tsr_graph_exec(gc, ins, NULL);
    uint8_t *a = NULL, *b = NULL;
    for (int i = 0; i < nb->nd.nnodes && !rc; i++) {
        if (tsr_graph_tensor_fused(nb->g, nb->nd.nodes[i].out)) { /* never in DRAM: the add's output is compared */
            out->fused++;
            continue;
        }
        tsr_netbench_diff_t d;
        out->compared++;
        rc = nb_compare(nb, gc, i, &a, &b, &d);
        if (rc == 1) {
            out->diffs++;
            if (on_diff)
                on_diff(&d, ctx);
            rc = TSR_OK;
        }
    }
    free(a);
    free(b);
    tsr_graph_free(gc);
    return rc;
}

void tsr_netbench_close(tsr_netbench_t *nb)
{
    free(nb->in);
    free(nb->out);
    tsr_graph_free(nb->g);
    tsr_netdesc_free(&nb->nd);
    tsr_device_close(nb->chk);
    tsr_device_close(nb->dev);
    memset(nb, 0, sizeof *nb);
}

/* ------------------------------- MobileNetV2's depthwise layers (bench) */

/* torchvision's mobilenet_v2 at 224x224: the depthwise 3x3 conv (pad 1) of
 * each inverted-residual block features[1..17]: input size, hidden
 * channels (in * expansion), stride. */
static const tsr_mbv2_dw_layer_t mb_layers[TSR_MBV2_DW_LAYERS] = {
    {"D1", 112, 32, 1, 1},  {"D2", 112, 96, 2, 2},  {"D3", 56, 144, 1, 3},  {"D4", 56, 144, 2, 4},
    {"D5", 28, 192, 1, 5},  {"D6", 28, 192, 1, 6},  {"D7", 28, 192, 2, 7},  {"D8", 14, 384, 1, 8},
    {"D9", 14, 384, 1, 9},  {"D10", 14, 384, 1, 10}, {"D11", 14, 384, 1, 11}, {"D12", 14, 576, 1, 12},
    {"D13", 14, 576, 1, 13}, {"D14", 14, 576, 2, 14}, {"D15", 7, 960, 1, 15}, {"D16", 7, 960, 1, 16},
    {"D17", 7, 960, 1, 17},
};

const tsr_mbv2_dw_layer_t *tsr_mbv2_dw_layer(int i)
{
    return i >= 0 && i < TSR_MBV2_DW_LAYERS ? &mb_layers[i] : NULL;
}

int tsr_mbv2_dw_layer_find(const char *name)
{
    for (int i = 0; i < TSR_MBV2_DW_LAYERS; i++)
        if (!strcasecmp(name, mb_layers[i].name))
            return i;
    return -1;
}

int tsr_dwbench_open(const tsr_dwbench_opts_t *o, tsr_dwbench_t *b)
{
    memset(b, 0, sizeof *b);
    b->seed = o->seed;
    if (o->taps < 1 || o->taps > 8)
        return tsr_err(TSR_EINVAL, "depthwise bench: taps %d outside 1..8", o->taps);
    /* the config without the mode (the block-diagonal path) and with it */
    int rc = tsr_config_load_with(o->cfgname, "DEPTHWISE", 0, &b->cfg[0]);
    if (!rc)
        rc = tsr_config_load_with(o->cfgname, "DEPTHWISE", o->taps, &b->cfg[1]);
    for (int k = 0; k < 2 && !rc; k++)
        rc = tsr_netbench_open_devices(o->backend, &b->cfg[k], o->dev, k == 0 && o->check, o->seed, &b->dev[k],
                                       k == 0 ? &b->chk : &(tsr_device_t *){NULL});
    if (rc) {
        tsr_dwbench_close(b);
        return rc;
    }
    b->bw = tsr_roofline_dram_bw(&b->cfg[0], o->dev ? o->dev->rtl.dram_bytes_per_cycle : 0);
    return TSR_OK;
}

void tsr_dwbench_close(tsr_dwbench_t *b)
{
    tsr_device_close(b->chk);
    tsr_device_close(b->dev[0]);
    tsr_device_close(b->dev[1]);
    b->chk = b->dev[0] = b->dev[1] = NULL;
}

/* One run of p on dev: plan, pack, exec with the counters reset, output
 * into y; the plan's figures into row column k (k < 0: none). */
static int dw_run(tsr_device_t *dev, const tsr_conv2d_params_t *p, const int8_t *x, const int8_t *w,
                  const int32_t *bias, int8_t *y, tsr_dwbench_row_t *row, int k)
{
    tsr_conv2d_plan_t pl;
    tsr_counters_t ct;
    int rc = tsr_conv2d_plan(dev, p, &pl);
    if (rc)
        return rc;
    if (!(rc = tsr_conv2d_write_weights(dev, &pl, w, bias)) && !(rc = tsr_conv2d_write_input(dev, &pl, x)) &&
        !(rc = tsr_reset_counters(dev)) && !(rc = tsr_conv2d_exec(dev, &pl)) && !(rc = tsr_read_counters(dev, &ct)))
        rc = tsr_conv2d_read_output(dev, &pl, y);
    if (!rc && k >= 0) {
        row->cycles[k] = (double)ct.cycles;
        row->est[k] = pl.cost;
        row->moved[k] = tsr_roofline_moved(&ct);
        row->gemm_ops[k] = (double)ct.gemm_ops;
        row->dwk[k] = pl.dwk;
        row->toh[k] = pl.toh;
        row->tow[k] = pl.tow;
        row->tco[k] = pl.tco;
        row->tiles[k] = pl.tiles;
    }
    tsr_conv2d_plan_free(dev, &pl);
    return rc;
}

int tsr_dwbench_layer(tsr_dwbench_t *b, int i, tsr_dwbench_row_t *row)
{
    const tsr_mbv2_dw_layer_t *L = tsr_mbv2_dw_layer(i);
    memset(row, 0, sizeof *row);
    if (!L)
        return tsr_err(TSR_EINVAL, "no MobileNetV2 depthwise layer %d (0..%d)", i, TSR_MBV2_DW_LAYERS - 1);
    row->layer = L;
    const int C = L->c;
    tsr_conv2d_params_t p;
    memset(&p, 0, sizeof p);
    p.n = 1;
    p.c_in = p.c_out = p.groups = C;
    p.h = p.w = L->hw;
    p.kh = p.kw = 3;
    p.stride_h = p.stride_w = L->stride;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
    p.x_dtype = p.w_dtype = p.y_dtype = TSR_DT_INT8;
    p.x_zp = -128; /* post-ReLU6 activations, TFLite int8 style */
    p.y_zp = -128;
    p.act_min = -128;
    p.act_max = 127;
    int32_t w_zp = 0;
    p.w_zp = &w_zp;
    p.w_zp_count = 1;
    p.rq_count = C;
    const int oh = (L->hw + 2 - 3) / L->stride + 1;
    const size_t nx = (size_t)C * L->hw * L->hw, nw = (size_t)C * 9, ny = (size_t)C * oh * oh;
    int32_t *mult = malloc(sizeof(int32_t) * (size_t)C), *shift = malloc(sizeof(int32_t) * (size_t)C),
            *bias = malloc(sizeof(int32_t) * (size_t)C);
    int8_t *x = malloc(nx), *w = malloc(nw), *y[3] = {malloc(ny), malloc(ny), malloc(ny)};
    int rc = TSR_OK;
    if (!mult || !shift || !bias || !x || !w || !y[0] || !y[1] || !y[2]) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    p.mult = mult;
    p.shift = shift;
    uint64_t s = b->seed * 0x100000001b3ull + (uint64_t)i;
    for (size_t k = 0; k < nx; k++)
        x[k] = (int8_t)tsr_splitmix64(&s);
    for (size_t k = 0; k < nw; k++)
        w[k] = (int8_t)tsr_splitmix64(&s);
    for (int o = 0; o < C; o++) { /* (9 terms of ~147 * 74: a shift of about 15 keeps outputs in range) */
        mult[o] = (int32_t)((1u << 30) + (uint32_t)(tsr_splitmix64(&s) % (1u << 30)));
        shift[o] = -15 - (int)(tsr_splitmix64(&s) % 2);
        bias[o] = (int32_t)(tsr_splitmix64(&s) % 32768) - 16384;
    }
    row->macs = tsr_roofline_conv2d_macs(&p);
    row->compulsory = tsr_roofline_conv2d_compulsory(&p, 0);
    row->t_mem = row->compulsory / b->bw;
    for (int k = 0; k < 2 && !rc; k++) {
        const tsr_config_t *c = &b->cfg[k];
        row->t_comp[k] = row->macs / ((double)c->batch * c->block_in * (c->depthwise ? c->depthwise : 1));
        rc = dw_run(b->dev[k], &p, x, w, bias, y[k], row, k);
    }
    row->timed = row->cycles[0] > 0 && row->cycles[1] > 0;
    if (!rc && b->chk) {
        rc = dw_run(b->chk, &p, x, w, bias, y[2], row, -1);
        row->checked = !rc;
        row->differs = !rc && (memcmp(y[0], y[2], ny) || memcmp(y[1], y[2], ny));
    }
out:
    free(mult);
    free(shift);
    free(bias);
    free(x);
    free(w);
    for (int k = 0; k < 3; k++)
        free(y[k]);
    return rc ? tsr_err_prefix(rc, "%s: ", L->name) : TSR_OK;
}
