/* tsr_pipenet: networks as planner problems (tsr_pipenet.h). */
#include "tsr_pipenet.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr_conv2d.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_jitutil.h"
#include "tsr_op.h"
#include "tsr_roofline.h"
#include "tsr_tappack.h"
#include "tsr_util.h"

/* ------------------------------------------------------------ ResNet-50's shapes */

/* Per-tensor requantization for every node: the values do not change a
 * plan's tiling or cost, only its constants. */
static const int32_t rn50_mult[1] = {1 << 30};
static const int32_t rn50_shift[1] = {-8};
static const int32_t rn50_wzp[1] = {0};

typedef struct {
    tsr_netdesc_t *nd;
    int capt, capn;
} rn50_t;

static int rn50_tensor(rn50_t *b, int n, int c, int h, int w, tsr_dtype_e dt)
{
    tsr_netdesc_t *nd = b->nd;
    if (nd->ntensors == b->capt) {
        int cap = b->capt ? 2 * b->capt : 64;
        tsr_nd_tensor_t *t = realloc(nd->tensors, sizeof *t * (size_t)cap);
        if (!t)
            return tsr_err(TSR_ENOMEM, "out of memory");
        nd->tensors = t;
        b->capt = cap;
    }
    nd->tensors[nd->ntensors] = (tsr_nd_tensor_t){n, c, h, w, dt, dt == TSR_DT_UINT8 && !nd->ntensors ? 128 : 0, 1.0};
    return nd->ntensors++;
}

static tsr_nd_node_t *rn50_node(rn50_t *b, tsr_nd_kind_e kind, const char *name, int in0, int in1)
{
    return tsr_netdesc_add_node(b->nd, &b->capn, kind, name, in0, in1);
}

static int rn50_conv(rn50_t *b, const char *name, int in, int cout, int k, int stride, int relu)
{
    tsr_nd_node_t *nn = rn50_node(b, TSR_ND_CONV, name, in, -1);
    if (!nn)
        return tsr_err(TSR_ENOMEM, "out of memory");
    tsr_nd_tensor_t x = b->nd->tensors[in];
    int pad = k / 2;
    nn->conv = (tsr_conv2d_params_t){.n = x.n, .c_in = x.c, .h = x.h, .w = x.w, .c_out = cout, .kh = k, .kw = k,
                                     .stride_h = stride, .stride_w = stride, .pad_top = pad, .pad_left = pad,
                                     .pad_bottom = pad, .pad_right = pad, .groups = 1, .x_dtype = x.dtype,
                                     .x_zp = x.zp, .w_dtype = TSR_DT_INT8, .w_zp = rn50_wzp, .w_zp_count = 1,
                                     .y_dtype = relu ? TSR_DT_UINT8 : TSR_DT_INT8, .y_zp = 0, .mult = rn50_mult,
                                     .shift = rn50_shift, .rq_count = 1, .act_min = relu ? 0 : -128,
                                     .act_max = relu ? 255 : 127};
    int oh, ow, rc = tsr_conv2d_check(&nn->conv, &oh, &ow);
    if (rc)
        return tsr_err_prefix(rc, "resnet50: %s: ", name);
    int t = rn50_tensor(b, x.n, cout, oh, ow, nn->conv.y_dtype);
    if (t >= 0)
        b->nd->nodes[b->nd->nnodes - 1].out = t;
    return t;
}

int tsr_pipenet_resnet50_desc(int n, tsr_netdesc_t *out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "resnet50: NULL output");
    memset(out, 0, sizeof *out);
    if (n < 1 || n > 64)
        return tsr_err(TSR_EINVAL, "resnet50: batch %d, need 1..64", n);
    rn50_t b = {out, 0, 0};
    snprintf(out->name, sizeof out->name, "resnet50");
    int t = rn50_tensor(&b, n, 3, 224, 224, TSR_DT_UINT8);
    if (t >= 0)
        t = rn50_conv(&b, "conv1", t, 64, 7, 2, 1);
    if (t >= 0) { /* maxpool 3x3/2 pad 1 */
        tsr_nd_node_t *nn = rn50_node(&b, TSR_ND_POOL, "maxpool", t, -1);
        tsr_nd_tensor_t x = out->tensors[t];
        if (!nn)
            t = tsr_err(TSR_ENOMEM, "out of memory");
        else {
            nn->pool = (tsr_pool_params_t){.kind = TSR_POOL_MAX, .n = x.n, .c = x.c, .h = x.h, .w = x.w, .kh = 3,
                                           .kw = 3, .stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_left = 1,
                                           .pad_bottom = 1, .pad_right = 1, .dtype = x.dtype, .zp = x.zp};
            int oh, ow;
            int rc = tsr_pool_check(&nn->pool, &oh, &ow);
            t = rc ? rc : rn50_tensor(&b, x.n, x.c, oh, ow, x.dtype);
            if (t >= 0)
                out->nodes[out->nnodes - 1].out = t;
        }
    }
    static const int blocks[4] = {3, 4, 6, 3}, mids[4] = {64, 128, 256, 512};
    for (int s = 0; s < 4 && t >= 0; s++)
        for (int k = 0; k < blocks[s] && t >= 0; k++) {
            int stride = s > 0 && k == 0 ? 2 : 1, mid = mids[s], cout = 4 * mid, x = t, br, sc = t;
            char nm[48];
            snprintf(nm, sizeof nm, "layer%d.%d.conv1", s + 1, k);
            br = rn50_conv(&b, nm, x, mid, 1, 1, 1);
            snprintf(nm, sizeof nm, "layer%d.%d.conv2", s + 1, k);
            if (br >= 0)
                br = rn50_conv(&b, nm, br, mid, 3, stride, 1);
            snprintf(nm, sizeof nm, "layer%d.%d.conv3", s + 1, k);
            if (br >= 0)
                br = rn50_conv(&b, nm, br, cout, 1, 1, 0);
            if (br >= 0 && k == 0) {
                snprintf(nm, sizeof nm, "layer%d.%d.downsample", s + 1, k);
                sc = rn50_conv(&b, nm, x, cout, 1, stride, 0);
            }
            if (br < 0 || sc < 0) {
                t = br < 0 ? br : sc;
                break;
            }
            snprintf(nm, sizeof nm, "layer%d.%d.add", s + 1, k);
            tsr_nd_node_t *nn = rn50_node(&b, TSR_ND_ADD, nm, br, sc);
            if (!nn) {
                t = tsr_err(TSR_ENOMEM, "out of memory");
                break;
            }
            tsr_nd_tensor_t ta = out->tensors[br], tb = out->tensors[sc];
            nn->add = (tsr_add_params_t){
                .a = {.n = ta.n, .c = ta.c, .h = ta.h, .w = ta.w, .dtype = ta.dtype, .zp = ta.zp},
                .b = {.n = tb.n, .c = tb.c, .h = tb.h, .w = tb.w, .dtype = tb.dtype, .zp = tb.zp},
                .y = {.n = ta.n, .c = ta.c, .h = ta.h, .w = ta.w, .dtype = TSR_DT_UINT8, .zp = 0},
                .left_shift = 20, .mult_a = 1 << 30, .mult_b = 1 << 30, .shift_a = -1, .shift_b = -1,
                .mult_out = 1 << 30, .shift_out = -10, .act_min = 0, .act_max = 255};
            int rc = tsr_add_check(&nn->add, NULL);
            t = rc ? tsr_err_prefix(rc, "resnet50: %s: ", nm) : rn50_tensor(&b, ta.n, ta.c, ta.h, ta.w, TSR_DT_UINT8);
            if (t >= 0)
                out->nodes[out->nnodes - 1].out = t;
        }
    if (t >= 0) {
        tsr_nd_node_t *nn = rn50_node(&b, TSR_ND_POOL, "avgpool", t, -1);
        tsr_nd_tensor_t x = out->tensors[t];
        if (!nn)
            t = tsr_err(TSR_ENOMEM, "out of memory");
        else {
            nn->pool = (tsr_pool_params_t){.kind = TSR_POOL_GLOBAL_AVG, .n = x.n, .c = x.c, .h = x.h, .w = x.w,
                                           .kh = 1, .kw = 1, .stride_h = 1, .stride_w = 1, .dtype = x.dtype,
                                           .zp = x.zp};
            t = rn50_tensor(&b, x.n, x.c, 1, 1, x.dtype);
            if (t >= 0)
                out->nodes[out->nnodes - 1].out = t;
        }
    }
    if (t >= 0) {
        tsr_nd_node_t *nn = rn50_node(&b, TSR_ND_DENSE, "fc", t, -1);
        tsr_nd_tensor_t x = out->tensors[t];
        if (!nn)
            t = tsr_err(TSR_ENOMEM, "out of memory");
        else {
            nn->dense = (tsr_dense_params_t){.n = x.n, .k = x.c * x.h * x.w, .m = 1000, .x_dtype = x.dtype,
                                             .x_zp = x.zp, .w_dtype = TSR_DT_INT8, .w_zp = rn50_wzp,
                                             .w_zp_count = 1, .y_dtype = TSR_DT_INT8, .y_zp = 0, .mult = rn50_mult,
                                             .shift = rn50_shift, .rq_count = 1, .act_min = -128, .act_max = 127};
            t = rn50_tensor(&b, x.n, 1000, 1, 1, TSR_DT_INT8);
            if (t >= 0)
                out->nodes[out->nnodes - 1].out = t;
        }
    }
    out->output = t;
    if (t < 0) {
        tsr_pipenet_desc_free(out);
        return t;
    }
    return TSR_OK;
}

int tsr_pipenet_resnet50_weights(tsr_netdesc_t *nd, uint64_t seed)
{
    if (!nd || strcmp(nd->name, "resnet50"))
        return tsr_err(TSR_EINVAL, "resnet50: weights for a description that is not tsr_pipenet_resnet50_desc's");
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 26;
    for (int i = 0; i < nd->nnodes; i++) {
        tsr_nd_node_t *nn = &nd->nodes[i];
        uint64_t n;
        if (nn->kind == TSR_ND_CONV)
            n = (uint64_t)nn->conv.c_out * (uint64_t)(nn->conv.c_in / nn->conv.groups) * (uint64_t)nn->conv.kh *
                (uint64_t)nn->conv.kw;
        else if (nn->kind == TSR_ND_DENSE)
            n = (uint64_t)nn->dense.m * (uint64_t)nn->dense.k;
        else
            continue;
        if (nn->w)
            continue;
        int8_t *w = malloc((size_t)n);
        if (!w)
            return tsr_err(TSR_ENOMEM, "out of memory");
        /* weights in -8..8: with the fixed requantization (x 2^-9) most activations stay inside their range
         * through the 53 convs (measured: about half of each post-ReLU tensor nonzero, 81% of the logits
         * neither 0 nor saturated; -2..2 decays to all zeros by layer1, -32..32 saturates 73% of the logits) */
        for (uint64_t k = 0; k < n; k++)
            w[k] = (int8_t)((int)(tsr_splitmix64(&s) % 17) - 8);
        nn->w = w;
    }
    return TSR_OK;
}

void tsr_pipenet_desc_free(tsr_netdesc_t *nd)
{
    if (!nd)
        return;
    for (int i = 0; i < nd->nnodes; i++) /* weights (tsr_pipenet_resnet50_weights); the other arrays are static */
        free(nd->nodes[i].w);
    free(nd->tensors);
    free(nd->nodes);
    memset(nd, 0, sizeof *nd);
}

/* ------------------------------------------------------------ costs from the JIT */

static double node_macs(const tsr_nd_node_t *nn)
{
    if (nn->kind == TSR_ND_CONV)
        return tsr_roofline_conv2d_macs(&nn->conv);
    if (nn->kind == TSR_ND_DENSE)
        return (double)nn->dense.n * nn->dense.k * nn->dense.m;
    return 0;
}

/* The cost model's cycles of the planned operator. */
static double plan_cycles(const tsr_config_t *cfg, const tsr_nd_node_t *nn, const tsr_op_plan_t *pl, uint64_t bytes)
{
    switch (nn->kind) {
    case TSR_ND_CONV: return pl->conv.cost;
    case TSR_ND_DENSE: return pl->dense.conv.cost;
    case TSR_ND_POOL: return pl->pool.cost;
    case TSR_ND_ADD:
    case TSR_ND_CLIP: return pl->elt.est_cycles;
    default: return (double)bytes / tsr_roofline_dram_bw(cfg, 0); /* no estimate: its traffic */
    }
}

static int problem(const tsr_netdesc_t *nd, const tsr_pipenet_host_t *host, double link_bw, double link_lat,
                   const tsr_config_t *cfgs, int nkinds, const double *given, tsr_pp_t **out, double *plan_ms);

int tsr_pipenet_problem(const tsr_netdesc_t *nd, const tsr_config_t *cfgs, int nkinds, tsr_pp_t **out,
                        double *plan_ms)
{
    return problem(nd, NULL, 0, 0, cfgs, nkinds, NULL, out, plan_ms);
}

int tsr_pipenet_problem_costs(const tsr_netdesc_t *nd, const tsr_config_t *cfgs, int nkinds, const double *cost,
                              tsr_pp_t **out)
{
    if (!cost) {
        if (out)
            *out = NULL;
        return tsr_err(TSR_EINVAL, "pipenet: no measured costs");
    }
    return problem(nd, NULL, 0, 0, cfgs, nkinds, cost, out, NULL);
}

/* Node i is a conv the graph runtime runs tap-packed on cfg: it reads a
 * network input (a tensor no node produces) that nothing else reads, and
 * the rewrite saves GEMM work (tsr_graph.c's tap_inputs, same test). */
static int tap_packed(const tsr_netdesc_t *nd, int i, const tsr_config_t *cfg)
{
    const tsr_nd_node_t *nn = &nd->nodes[i];
    if (nn->kind != TSR_ND_CONV || !tsr_tappack_applies(&nn->conv, cfg) || nn->in[0] == nd->output)
        return 0;
    int uses = 0;
    for (int j = 0; j < nd->nnodes; j++) {
        if (nd->nodes[j].out == nn->in[0])
            return 0;
        uses += nd->nodes[j].in[0] == nn->in[0] || nd->nodes[j].in[1] == nn->in[0];
    }
    return uses == 1;
}

double tsr_pipenet_host_cycles(double ns, double clock_mhz) { return ns * clock_mhz / 1000.0; }

uint64_t tsr_pipenet_host_clock_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
        return tsr_mono_ns(); /* (no per-thread clock: wall time) */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int tsr_pipenet_problem_host(const tsr_netdesc_t *nd, const tsr_pipenet_host_t *host, double link_bw,
                             double link_lat, const tsr_config_t *cfgs, int nkinds, const double *cost,
                             tsr_pp_t **out)
{
    if (out)
        *out = NULL;
    if (!nd || !out)
        return tsr_err(TSR_EINVAL, "pipenet: NULL network or result");
    if (host && host->n > 0) {
        if (!host->names || !host->in_t || !host->out_t || !host->cycles || !(link_bw > 0) || !(link_lat >= 0) ||
            !isfinite(link_bw) || !isfinite(link_lat))
            return tsr_err(TSR_EINVAL, "pipenet: host nodes without names, tensors or costs, or a bad link");
        for (int h = 0; h < host->n; h++) {
            const char *nm = host->names[h] ? host->names[h] : "?";
            int a = host->in_t[h], a2 = host->in2_t ? host->in2_t[h] : -1, b = host->out_t[h];
            if (a < 0 || a >= nd->ntensors || a2 < -1 || a2 >= nd->ntensors || b <= 0 || b >= nd->ntensors || a == b ||
                a2 == b)
                return tsr_err(TSR_EINVAL, "pipenet: host node \"%s\": tensors %d, %d -> %d, the network has %d", nm, a,
                               a2, b, nd->ntensors);
            if (!isfinite(host->cycles[h]) || host->cycles[h] < 0 || host->cycles[h] > TSR_PP_MAX_COST)
                return tsr_err(TSR_EINVAL, "pipenet: host node \"%s\": cost %g cycles", nm, host->cycles[h]);
            for (int v = 0; v < nd->nnodes; v++)
                if (nd->nodes[v].out == b)
                    return tsr_err(TSR_EINVAL, "pipenet: host node \"%s\" writes tensor %d, which node \"%s\" produces", nm,
                                   b, nd->nodes[v].name);
            for (int j = 0; j < host->n; j++)
                if (j != h && host->out_t[j] == b)
                    return tsr_err(TSR_EINVAL, "pipenet: host node \"%s\" shares tensor %d with host node \"%s\"", nm,
                                   host->out_t[j], host->names[j] ? host->names[j] : "?");
        }
    }
    return problem(nd, host, link_bw, link_lat, cfgs, nkinds, cost, out, NULL);
}

static int problem(const tsr_netdesc_t *nd, const tsr_pipenet_host_t *host, double link_bw, double link_lat,
                   const tsr_config_t *cfgs, int nkinds, const double *given, tsr_pp_t **out, double *plan_ms)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "pipenet: NULL result");
    *out = NULL;
    if (!nd || !cfgs || nkinds < 1 || nkinds > TSR_PP_MAX_KINDS)
        return tsr_err(TSR_EINVAL, "pipenet: need a network and 1..%d configs", TSR_PP_MAX_KINDS);
    uint64_t t0 = tsr_mono_ns();
    tsr_device_t *dev[TSR_PP_MAX_KINDS] = {0};
    tsr_pp_t *pp = NULL;
    double *cost = calloc((size_t)nd->nnodes * (size_t)nkinds, sizeof(double));
    uint64_t *wbytes = calloc((size_t)nd->nnodes, sizeof(uint64_t));
    int *producer = malloc(sizeof(int) * (size_t)(nd->ntensors + 1));
    int rc = cost && wbytes && producer ? TSR_OK : tsr_err(TSR_ENOMEM, "out of memory");
    for (int k = 0; k < nkinds && !rc; k++)
        if ((rc = tsr_device_open("fsim", &cfgs[k], NULL, &dev[k])))
            tsr_err_prefix(rc, "pipenet: config %d: ", k);
    for (int i = 0; i < nd->nnodes && !rc; i++) {
        const tsr_nd_node_t *nn = &nd->nodes[i];
        const tsr_op_def_t *def = tsr_op_def(nn->kind);
        uint64_t io = tsr_netdesc_tensor_bytes(nd, nn->out) + tsr_netdesc_tensor_bytes(nd, nn->in[0]) +
                      (nn->in[1] >= 0 ? tsr_netdesc_tensor_bytes(nd, nn->in[1]) : 0);
        for (int k = 0; k < nkinds && !rc; k++) {
            tsr_op_plan_t pl;
            memset(&pl, 0, sizeof pl);
            if (def && def->kind == TSR_OPK_CONCAT) /* views of its output: no kernel, no cycles (tsr_concat.h) */
                continue;
            if (!def || (!def->plan && !def->plan_tensors)) {
                rc = tsr_err(TSR_EINVAL, "pipenet: node \"%s\": no operator to plan", nn->name);
                break;
            }
            if (!def->plan) {
                /* act, mul, gavg and softmax plan only over device tensors (tsr_graph): costed by their
                 * traffic, as plan_cycles does for a kind without an estimate; --calibrate measures them */
                const double cyc = given ? given[(size_t)i * (size_t)nkinds + (size_t)k]
                                         : (double)io / tsr_roofline_dram_bw(&cfgs[k], 0);
                cost[(size_t)i * (size_t)nkinds + (size_t)k] = cyc * cfgs[0].clock_mhz / cfgs[k].clock_mhz;
                continue;
            }
            /* the graph runtime runs a few-channel conv over a network input tap-packed (tsr_graph_plan):
             * cost what it runs (ResNet-18's stem: 2.6M cycles as given, 0.95M tap-packed on systemc) */
            const void *params = tsr_nd_node_params(nn);
            tsr_conv2d_params_t tp, cc;
            tsr_dense_params_t dd;
            if (nn->kind == TSR_ND_CONV) { /* as the graph plans it: float32 scales where the config has them */
                cc = tsr_conv2d_for_config(&cfgs[k], &nn->conv);
                params = &cc;
            } else if (nn->kind == TSR_ND_DENSE) {
                dd = nn->dense;
                if (!tsr_alu_op_available(&cfgs[k], TSR_ALU_FSCALE))
                    dd.fscale = NULL;
                params = &dd;
            }
            if (tap_packed(nd, i, &cfgs[k]) && !tsr_tappack_rewrite(&cc, NULL, &tp, NULL))
                params = &tp;
            if ((rc = def->plan(dev[k], params, &pl))) {
                tsr_err_prefix(rc, "pipenet: node \"%s\" on config %d: ", nn->name, k);
                break;
            }
            double cyc = plan_cycles(&cfgs[k], nn, &pl, io);
            if (given) /* measured (a calibration run): the kind's own cycles */
                cyc = given[(size_t)i * (size_t)nkinds + (size_t)k];
            /* cycles of kind 0's clock */
            cost[(size_t)i * (size_t)nkinds + (size_t)k] = cyc * cfgs[0].clock_mhz / cfgs[k].clock_mhz;
            if (!k) {
                tsr_op_figures_t f;
                memset(&f, 0, sizeof f);
                if (def->figures)
                    def->figures(&pl, &f);
                wbytes[i] = f.w_bytes + f.c_bytes;
            }
            def->plan_free(dev[k], &pl);
        }
    }
    if (!rc)
        rc = tsr_pp_create(nkinds, &pp);
    for (int t = 0; t <= nd->ntensors && !rc; t++)
        producer[t] = -1;
    /* the nodes first (node i is pp node i, host node h pp node nnodes + h), then the edges: a host node's
     * output is read by nodes before it in index order */
    for (int i = 0; i < nd->nnodes && !rc; i++) {
        const tsr_nd_node_t *nn = &nd->nodes[i];
        uint64_t ob = tsr_netdesc_tensor_bytes(nd, nn->out);
        int id;
        rc = tsr_pp_node(pp, nn->name, &cost[(size_t)i * (size_t)nkinds], INFINITY, wbytes[i] + ob, &id);
        if (!rc)
            rc = tsr_pp_node_macs(pp, id, node_macs(nn));
        producer[nn->out] = id;
    }
    int nh = host ? host->n : 0;
    for (int h = 0; h < nh && !rc; h++) {
        /* the host model (tsr_pipenet.h): on a host stage its time; merged into a device's stage its time and
         * the round trip of its input and output over the link */
        int a[2] = {host->in_t[h], host->in2_t ? host->in2_t[h] : -1};
        uint64_t ob = tsr_netdesc_tensor_bytes(nd, host->out_t[h]), in_host = 0;
        double merged = host->cycles[h] + link_lat + (double)ob / link_bw, dc[TSR_PP_MAX_KINDS];
        for (int j = 0; j < 2; j++)
            if (a[j] >= 0)
                merged += link_lat + (double)tsr_netdesc_tensor_bytes(nd, a[j]) / link_bw;
        for (int k = 0; k < nkinds; k++)
            dc[k] = merged;
        int id;
        rc = tsr_pp_node(pp, host->names[h], dc, host->cycles[h], 0, &id);
        for (int j = 0; j < 2 && !rc; j++) {
            if (a[j] < 0)
                continue;
            if (producer[a[j]] >= 0) /* (producers are nodes, and host nodes before h: a host node's inputs
                                        come from earlier nodes) */
                rc = tsr_pp_edge(pp, producer[a[j]], id, tsr_netdesc_tensor_bytes(nd, a[j]));
            else
                in_host += tsr_netdesc_tensor_bytes(nd, a[j]);
        }
        if (!rc && in_host)
            rc = tsr_pp_node_io(pp, id, in_host, 0);
        producer[host->out_t[h]] = id;
    }
    for (int i = 0; i < nd->nnodes && !rc; i++) {
        const tsr_nd_node_t *nn = &nd->nodes[i];
        uint64_t ob = tsr_netdesc_tensor_bytes(nd, nn->out);
        uint64_t in_host = 0;
        for (int j = 0; j < 2 && !rc; j++) {
            int t = nn->in[j];
            if (t < 0)
                continue;
            if (producer[t] >= 0)
                rc = tsr_pp_edge(pp, producer[t], i, tsr_netdesc_tensor_bytes(nd, t));
            else
                in_host += tsr_netdesc_tensor_bytes(nd, t);
        }
        if (!rc)
            rc = tsr_pp_node_io(pp, i, in_host, nn->out == nd->output ? ob : 0);
    }
    for (int k = 0; k < nkinds; k++)
        if (dev[k])
            tsr_device_close(dev[k]);
    free(cost), free(wbytes), free(producer);
    if (rc) {
        tsr_pp_free(pp);
        return rc;
    }
    if (plan_ms)
        *plan_ms = (double)(tsr_mono_ns() - t0) / 1e6;
    *out = pp;
    return TSR_OK;
}

/* ------------------------------------------------------------ intra-layer splits */

int tsr_pipenet_splittable(const tsr_netdesc_t *nd, int v, int r)
{
    if (!nd || v < 0 || v >= nd->nnodes)
        return tsr_err(TSR_EINVAL, "split: no node %d", v);
    const tsr_nd_node_t *nn = &nd->nodes[v];
    if (nn->kind != TSR_ND_CONV || nn->conv.groups != 1)
        return tsr_err(TSR_EINVAL, "split: node \"%s\" is not a conv with groups 1 (only those split by output "
                                   "channels)", nn->name);
    if (r < 2 || r > TSR_PP_MAX_SPLIT)
        return tsr_err(TSR_EINVAL, "split: node \"%s\" into %d parts, need 2..%d", nn->name, r, TSR_PP_MAX_SPLIT);
    if (r > nn->conv.c_out || nn->conv.c_out % r)
        return tsr_err(TSR_EINVAL, "split: node \"%s\" has %d output channels, not %d equal parts of one or more",
                       nn->name, nn->conv.c_out, r);
    for (int i = 0; i < nd->nnodes; i++)
        if (nd->nodes[i].kind == TSR_ND_ADD && (nd->nodes[i].in[0] == nn->out || nd->nodes[i].in[1] == nn->out))
            return tsr_err(TSR_EINVAL, "split: node \"%s\" feeds add \"%s\", which the graph runtime fuses into it",
                           nn->name, nd->nodes[i].name);
    return TSR_OK;
}

int tsr_pipenet_split_part(const tsr_netdesc_t *nd, int v, int r, int j, tsr_nd_node_t *part)
{
    if (!part)
        return tsr_err(TSR_EINVAL, "split: NULL part");
    int rc = tsr_pipenet_splittable(nd, v, r);
    if (rc)
        return rc;
    const tsr_nd_node_t *nn = &nd->nodes[v];
    if (j < 0 || j >= r)
        return tsr_err(TSR_EINVAL, "split: node \"%s\": part %d of %d", nn->name, j, r);
    int cp = nn->conv.c_out / r, c0 = j * cp;
    *part = *nn;
    snprintf(part->name, sizeof part->name, "%.38s/%d.%d", nn->name, j % 10, r % 10); /* j < r <= 8 */
    tsr_conv2d_params_t *p = &part->conv;
    p->c_out = cp;
    p->w_plan = NULL;
    if (nn->conv.w_zp_count == nn->conv.c_out) /* per-channel arrays: the part's slice */
        p->w_zp = nn->conv.w_zp + c0, p->w_zp_count = cp;
    if (nn->conv.rq_count == nn->conv.c_out) {
        p->mult = nn->conv.mult + c0;
        p->shift = nn->conv.shift + c0;
        if (nn->conv.fscale)
            p->fscale = nn->conv.fscale + c0;
        p->rq_count = cp;
    }
    /* OIHW weights of one byte (int8 / uint8): output channel o's rows start at o * C_in * KH * KW */
    part->w = nn->w ? (uint8_t *)nn->w + (size_t)c0 * (size_t)nn->conv.c_in * (size_t)nn->conv.kh * (size_t)nn->conv.kw
                    : NULL;
    part->bias = nn->bias ? nn->bias + c0 : NULL;
    return TSR_OK;
}

int tsr_pipenet_split_nodes(const tsr_netdesc_t *nd, const tsr_pp_t *pp, int heaviest, int *nodes)
{
    if (!nd || !pp || !nodes || heaviest < 0 || tsr_pp_nnodes(pp) != nd->nnodes)
        return tsr_err(TSR_EINVAL, "split: bad arguments");
    int n = 0;
    char *taken = calloc((size_t)nd->nnodes, 1);
    if (!taken)
        return tsr_err(TSR_ENOMEM, "out of memory");
    while (n < heaviest) {
        int best = -1;
        double bc = -1;
        for (int v = 0; v < nd->nnodes; v++) {
            if (taken[v] || tsr_pipenet_splittable(nd, v, 2))
                continue;
            double c = tsr_pp_node_cost(pp, v, 0);
            if (c > bc)
                bc = c, best = v;
        }
        if (best < 0)
            break;
        taken[best] = 1;
        nodes[n++] = best;
    }
    tsr_err_clear();
    free(taken);
    return n;
}

int tsr_pipenet_add_splits(tsr_pp_t *pp, const tsr_netdesc_t *nd, const tsr_config_t *cfgs, int nkinds,
                           int max_split, int nn, const int *nodes, const double *given)
{
    if (!pp || !nd || !cfgs || nkinds < 1 || nkinds > TSR_PP_MAX_KINDS || (nn && !nodes))
        return tsr_err(TSR_EINVAL, "split: bad arguments");
    if (max_split < 2 || max_split > TSR_PP_MAX_SPLIT)
        return tsr_err(TSR_EINVAL, "split: into up to %d parts, need 2..%d", max_split, TSR_PP_MAX_SPLIT);
    tsr_device_t *dev[TSR_PP_MAX_KINDS] = {0};
    const tsr_op_def_t *def = tsr_op_def(TSR_ND_CONV);
    int rc = def && def->plan ? TSR_OK : tsr_err(TSR_EINVAL, "split: no conv operator");
    for (int k = 0; k < nkinds && !rc && !given; k++)
        if ((rc = tsr_device_open("fsim", &cfgs[k], NULL, &dev[k])))
            tsr_err_prefix(rc, "split: config %d: ", k);
    for (int i = 0; i < nn && !rc; i++) {
        int v = nodes[i];
        for (int r = 2; r <= max_split && !rc; r++) {
            tsr_nd_node_t part;
            if (tsr_pipenet_split_part(nd, v, r, 0, &part)) {
                tsr_err_clear();
                continue; /* not into r parts (C_out not divisible): the planner does not get that split */
            }
            double cost[TSR_PP_MAX_KINDS];
            uint64_t ob = tsr_netdesc_tensor_bytes(nd, nd->nodes[v].out) / (uint64_t)r, wb = 0;
            /* the packed weights of a part: the whole's slice (the JIT's figure for the whole / r is close;
             * planned below when the JIT costs it) */
            for (int k = 0; k < nkinds && !rc; k++) {
                if (given) {
                    cost[k] = given[((size_t)i * (TSR_PP_MAX_SPLIT + 1) + (size_t)r) * (size_t)nkinds + (size_t)k];
                } else {
                    tsr_conv2d_params_t tp, cc = tsr_conv2d_for_config(&cfgs[k], &part.conv);
                    const void *params = &cc;
                    if (tap_packed(nd, v, &cfgs[k]) && !tsr_tappack_rewrite(&cc, NULL, &tp, NULL))
                        params = &tp;
                    tsr_op_plan_t pl;
                    memset(&pl, 0, sizeof pl);
                    if ((rc = def->plan(dev[k], params, &pl))) {
                        tsr_err_prefix(rc, "split: node \"%s\" in %d parts on config %d: ", nd->nodes[v].name, r, k);
                        break;
                    }
                    cost[k] = pl.conv.cost;
                    if (!k) {
                        tsr_op_figures_t f;
                        memset(&f, 0, sizeof f);
                        if (def->figures)
                            def->figures(&pl, &f);
                        wb = f.w_bytes + f.c_bytes;
                    }
                    def->plan_free(dev[k], &pl);
                }
                cost[k] *= (double)cfgs[0].clock_mhz / cfgs[k].clock_mhz; /* kind 0's clock */
            }
            if (!wb) /* measured costs: the part's weight bytes, unpacked */
                wb = (uint64_t)part.conv.c_out * (uint64_t)part.conv.c_in * (uint64_t)part.conv.kh *
                         (uint64_t)part.conv.kw + 12ull * (uint64_t)part.conv.c_out;
            if (!rc)
                rc = tsr_pp_node_split(pp, v, r, cost, wb + ob);
        }
    }
    for (int k = 0; k < nkinds; k++)
        if (dev[k])
            tsr_device_close(dev[k]);
    return rc;
}

/* ------------------------------------------------------------ shared boundary splits */

int tsr_pipenet_share_units(const tsr_netdesc_t *nd, int v, const tsr_config_t *cfgs, int nkinds, int max_units,
                            int *units)
{
    if (!nd || !cfgs || !units || v < 0 || v >= nd->nnodes || nkinds < 1 || max_units < 2)
        return tsr_err(TSR_EINVAL, "share: bad arguments");
    *units = 0;
    const tsr_nd_node_t *nn = &nd->nodes[v];
    if (nn->kind != TSR_ND_CONV || nn->conv.groups != 1 || nn->out == nd->output)
        return TSR_OK;
    int blk = 1; /* the least common multiple of the blocks (powers of two in practice) */
    for (int k = 0; k < nkinds; k++) {
        int b = cfgs[k].block_out, a = blk, r;
        if (b < 1)
            return TSR_OK;
        int x = a, y = b;
        while (y)
            r = x % y, x = y, y = r;
        blk = a / x * b;
    }
    int c = nn->conv.c_out;
    if (c % blk)
        return TSR_OK;
    int ch = blk;
    while (c / ch > max_units && c % (2 * ch) == 0)
        ch *= 2;
    if (c / ch >= 2 && c / ch <= max_units)
        *units = c / ch;
    return TSR_OK;
}

int tsr_pipenet_slice_part(const tsr_netdesc_t *nd, int v, int c0, int c1, tsr_nd_node_t *part)
{
    if (!nd || !part || v < 0 || v >= nd->nnodes)
        return tsr_err(TSR_EINVAL, "share: no node %d", v);
    const tsr_nd_node_t *nn = &nd->nodes[v];
    if (nn->kind != TSR_ND_CONV || nn->conv.groups != 1)
        return tsr_err(TSR_EINVAL, "share: node \"%s\" is not a conv with groups 1", nn->name);
    if (c0 < 0 || c1 <= c0 || c1 > nn->conv.c_out)
        return tsr_err(TSR_EINVAL, "share: node \"%s\": channels [%d, %d) of %d", nn->name, c0, c1, nn->conv.c_out);
    int cp = c1 - c0;
    *part = *nn;
    char nm[64];
    snprintf(nm, sizeof nm, "%.30s[%d:%d]", nn->name, c0 % 100000, c1 % 100000);
    memcpy(part->name, nm, sizeof part->name);
    part->name[sizeof part->name - 1] = 0;
    tsr_conv2d_params_t *p = &part->conv;
    p->c_out = cp;
    p->w_plan = NULL;
    if (nn->conv.w_zp_count == nn->conv.c_out) /* per-channel arrays: the part's slice */
        p->w_zp = nn->conv.w_zp + c0, p->w_zp_count = cp;
    if (nn->conv.rq_count == nn->conv.c_out) {
        p->mult = nn->conv.mult + c0;
        p->shift = nn->conv.shift + c0;
        if (nn->conv.fscale)
            p->fscale = nn->conv.fscale + c0;
        p->rq_count = cp;
    }
    /* OIHW weights of one byte: output channel o's rows start at o * C_in * KH * KW */
    part->w = nn->w ? (uint8_t *)nn->w + (size_t)c0 * (size_t)nn->conv.c_in * (size_t)nn->conv.kh * (size_t)nn->conv.kw
                    : NULL;
    part->bias = nn->bias ? nn->bias + c0 : NULL;
    return TSR_OK;
}

int tsr_pipenet_add_shares(tsr_pp_t *pp, const tsr_netdesc_t *nd, const tsr_config_t *cfgs, int nkinds,
                           int max_units, const double *alone)
{
    if (!pp || !nd || !cfgs || nkinds < 1 || nkinds > TSR_PP_MAX_KINDS || tsr_pp_nnodes(pp) != nd->nnodes)
        return tsr_err(TSR_EINVAL, "share: bad arguments");
    if (max_units < 2 || max_units > TSR_PP_MAX_UNITS)
        return tsr_err(TSR_EINVAL, "share: up to %d units, need 2..%d", max_units, TSR_PP_MAX_UNITS);
    int rc = TSR_OK;
    double *uc = malloc(sizeof(double) * (size_t)TSR_PP_MAX_UNITS * (size_t)nkinds);
    if (!uc)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int v = 0; v < nd->nnodes && !rc; v++) {
        int q;
        if ((rc = tsr_pipenet_share_units(nd, v, cfgs, nkinds, max_units, &q)) || !q)
            continue;
        int a = -1; /* the add it feeds, which the runtime would fuse into it */
        for (int i = 0; i < nd->nnodes && a < 0; i++)
            if (nd->nodes[i].kind == TSR_ND_ADD && (nd->nodes[i].in[0] == nd->nodes[v].out ||
                                                    nd->nodes[i].in[1] == nd->nodes[v].out))
                a = i;
        double extra[TSR_PP_MAX_KINDS];
        for (int k = 0; k < nkinds; k++) {
            double clk = (double)cfgs[0].clock_mhz / cfgs[k].clock_mhz;
            double whole = alone ? alone[(size_t)v * (size_t)nkinds + (size_t)k] * clk : tsr_pp_node_cost(pp, v, k);
            for (int u = 1; u < q; u++)
                uc[(size_t)(u - 1) * (size_t)nkinds + (size_t)k] = whole * u / q;
            extra[k] = 0;
            if (a >= 0 && alone)
                extra[k] = fmax(0, alone[(size_t)a * (size_t)nkinds + (size_t)k] * clk - tsr_pp_node_cost(pp, a, k));
        }
        rc = tsr_pp_node_share(pp, v, q, uc, extra);
    }
    free(uc);
    return rc;
}

/* ------------------------------------------------------------ random DAGs */

int tsr_pipenet_random_dag(int n, int window, int skip_pct, uint64_t seed, tsr_pp_t **out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "pipenet: NULL result");
    *out = NULL;
    if (n < 1 || n > TSR_PP_MAX_NODES || window < 1 || window > 16 || skip_pct < 0 || skip_pct > 100)
        return tsr_err(TSR_EINVAL, "pipenet: random DAG of %d nodes, %d branches, %d%% blocks: bad", n, window,
                       skip_pct);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
#define NEXT() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, s)
    tsr_pp_t *pp;
    int rc = tsr_pp_create(1, &pp), v = 0, last = -1;
    /* one node, named, costed, consuming `from` (-1: none) */
#define NODE(from)                                                                                                  \
    do {                                                                                                            \
        char nm[24];                                                                                                \
        snprintf(nm, sizeof nm, "v%d", v);                                                                          \
        double c = 1000 + (double)(NEXT() % 99001);                                                                 \
        if (!rc)                                                                                                    \
            rc = tsr_pp_node(pp, nm, &c, INFINITY, 1024 + NEXT() % 65536, NULL);                                   \
        if (!rc && (from) >= 0)                                                                                     \
            rc = tsr_pp_edge(pp, (from), v, 1024 + NEXT() % 65536);                                                \
        v++;                                                                                                        \
    } while (0)
    while (v < n && !rc) {
        int nb = window > 1 && (int)(NEXT() % 100) < skip_pct ? 2 + (int)(NEXT() % (uint64_t)(window - 1)) : 1;
        if (nb == 1 || last < 0 || n - v < 2 * nb + 1) { /* a node after the last */
            NODE(last);
            last = v - 1;
            continue;
        }
        /* a block: nb branches of 1..4 nodes from `last`, joined by one node */
        int ends[16], in = last;
        for (int b = 0; b < nb && !rc; b++) {
            int len = 1 + (int)(NEXT() % 4), from = in;
            for (int i = 0; i < len && v < n - 1; i++) {
                NODE(from);
                from = v - 1;
            }
            ends[b] = from;
        }
        NODE(ends[0]);
        for (int b = 1; b < nb && !rc; b++)
            if (ends[b] != ends[0])
                rc = tsr_pp_edge(pp, ends[b], v - 1, 1024 + NEXT() % 65536);
        last = v - 1;
    }
#undef NODE
#undef NEXT
    if (rc) {
        tsr_pp_free(pp);
        return rc;
    }
    *out = pp;
    return TSR_OK;
}
