/*
 * test_graph: the graph runtime (jit/tsr_graph.h) against the independent
 * plain-C reference of a whole network (tests/tsr_netref.c, built on
 * tests/tsr_opref.c, written from jit/operators.md and nothing in jit/).
 *
 *  - small ResNet-18 (tsr_netdesc_resnet18_small) on the test backend: every
 *    byte of every tensor (the graph planned with TSR_GRAPH_KEEP_ALL) equal
 *    to the reference; the first divergent tensor is named with the node
 *    that produced it (the stem runs tap-packed). Then the same graph planned
 *    with buffer reuse and the stem not tap-packed: the output still equal
 *    and the arena smaller than the sum of the tensors; and every layer in one
 *    submission (streams joined by token barriers): every tensor equal.
 *  - random small graphs (chains of conv incl. depthwise and strided, max /
 *    avg / global pools, clips, residual branches joined by add, a dense
 *    head; random shapes, dtypes and zero points) vs the reference, seed
 *    printed (TSR_GRAPH_SEED overrides it, TSR_GRAPH_COUNT the count).
 *  - full ResNet-18 (batch 1, ImageNet shape) on fsim: every tensor equal to
 *    the reference.
 *  - bad graphs (shape, dtype and zero-point mismatches, a cycle, two
 *    producers, parameters device tensors cannot hold) rejected with an
 *    error naming the node, and a failed plan leaving no device memory.
 *
 * How it can fail: any byte that differs (wrong layout contract, a wrong
 * re-centring of a producer, a buffer reused while still live, a missing
 * dependency between layers), a bad graph accepted, an error that does not
 * name the node, a plan that leaks device memory.
 * TSR_TEST_BACKEND=rtl runs the same cases (fewer random graphs) on RTL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tsr_error.h"
#include "tsr_graph.h"
#include "tsr_netdesc.h"
#include "tsr_netref.h"
#include "tsr_op.h"
#include "tsr_opref.h"
#include "tsr_oprun.h"
#include "tsr_quant.h"
#include "tsr_testenv.h"

static uint64_t seed(void) { return tsr_test_seed("TSR_GRAPH_SEED", 20261125u); }
static int is_rtl(void) { return !strcmp(tsr_test_backend(), "rtl"); }

/* Adds of nd the graph fuses into a conv by its rule (tsr_graph_plan): one
 * input is a conv's output that nothing else reads and that is not the
 * network's output (on the configs tested, every such conv has room). */
static int fusable_adds(const tsr_netdesc_t *nd)
{
    int n = 0;
    for (int i = 0; i < nd->nnodes; i++) {
        const tsr_nd_node_t *a = &nd->nodes[i];
        if (a->kind != TSR_ND_ADD || a->in[0] == a->in[1])
            continue;
        for (int k = 0; k < 2; k++) {
            const int t = a->in[k];
            int conv = 0, uses = 0;
            for (int j = 0; j < nd->nnodes; j++) {
                conv |= nd->nodes[j].out == t && nd->nodes[j].kind == TSR_ND_CONV;
                uses += (nd->nodes[j].in[0] == t) + (nd->nodes[j].in[1] == t);
            }
            if (conv && uses == 1 && t != nd->output) {
                n++;
                break;
            }
        }
    }
    return n;
}

/* Activation table nodes whose input a conv alone reads (not a graph
 * output, not fused into an add): the graph runs the table in the conv's
 * epilogue (fuse_acts in jit/tsr_graph.c) and the conv's output gets no
 * buffer, as a fused add's conv. */
static int fusable_acts(const tsr_netdesc_t *nd)
{
    int n = 0;
    for (int i = 0; i < nd->nnodes; i++) {
        const tsr_nd_node_t *a = &nd->nodes[i];
        if (a->kind != TSR_ND_ACT)
            continue;
        const int t = a->in[0];
        int conv = 0, uses = 0;
        for (int j = 0; j < nd->nnodes; j++) {
            conv |= nd->nodes[j].out == t && nd->nodes[j].kind == TSR_ND_CONV;
            uses += (nd->nodes[j].in[0] == t) + (nd->nodes[j].in[1] == t);
        }
        n += conv && uses == 1 && t != nd->output;
    }
    return n;
}

/* Build nd as a graph on dev, run it on a random input and compare every
 * tensor (KEEP_ALL; but the conv outputs an add fused into the conv
 * replaced, which never reach DRAM: their adds' outputs are compared) or
 * only the output with the reference. The plan must have fused want adds
 * (the conv+add layers in the report and the tensors without a buffer);
 * want < 0: every add fusable_adds counts, none with TSR_GRAPH_NO_FUSE.
 * Returns 0, or 1 after printing the first divergence. */
static int check_net_fused(tsr_device_t *dev, const tsr_netdesc_t *nd, uint64_t s, const char *label, unsigned flags,
                           tsr_graph_totals_t *tot, int want)
{
    tsr_graph_t *g = NULL;
    void *ref[512] = {0};
    assert_true(nd->ntensors <= 512);
    uint8_t *in = malloc(tsr_netdesc_tensor_bytes(nd, 0));
    assert_non_null(in);
    tsr_netdesc_random_input(nd, s, in);
    if (tsr_graph_from_netdesc(tsr_device_config(dev), nd, &g))
        fail_msg("%s (seed %llu): graph build: %s", label, (unsigned long long)s, tsr_errmsg());
    if (tsr_graph_plan(g, dev, flags))
        fail_msg("%s (seed %llu): graph plan: %s", label, (unsigned long long)s, tsr_errmsg());
    if (tsr_netref_run(nd, in, ref))
        fail_msg("%s (seed %llu): reference: %s", label, (unsigned long long)s, tsr_errmsg());
    uint8_t *out = malloc(tsr_netdesc_tensor_bytes(nd, nd->output));
    assert_non_null(out);
    const void *ins[1] = {in};
    void *outs[1] = {out};
    if (tsr_graph_exec(g, ins, outs))
        fail_msg("%s (seed %llu): exec: %s", label, (unsigned long long)s, tsr_errmsg());
    int fused = 0, layers = 0;
    for (int t = 0; t < nd->ntensors; t++)
        fused += tsr_graph_tensor_fused(g, t);
    for (int i = 0; tsr_graph_layer(g, i); i++) {
        const char *op = tsr_graph_layer(g, i)->op;
        layers += !strcmp(op, "conv+add") || !strcmp(op, "dwconv+add") || !strcmp(op, "conv+act") ||
                  !strcmp(op, "dwconv+act");
    }
    if (want < 0)
        want = (flags & TSR_GRAPH_NO_FUSE) ? 0 : fusable_adds(nd) + ((flags & TSR_GRAPH_NO_FUSE_ACT) ? 0 : fusable_acts(nd));
    if (fused != want || layers != want)
        fail_msg("%s (seed %llu): %d adds/acts fused (%d conv+add/act layers), expected %d", label,
                 (unsigned long long)s, fused, layers, want);
    int bad = 0;
    /* every tensor in node order (KEEP_ALL), else the output */
    for (int i = 0; i < nd->nnodes && !bad; i++) {
        const int t = nd->nodes[i].out;
        if ((!(flags & TSR_GRAPH_KEEP_ALL) && t != nd->output) || tsr_graph_tensor_fused(g, t))
            continue;
        const size_t nb = tsr_netdesc_tensor_bytes(nd, t);
        uint8_t *dv = t == nd->output ? out : malloc(nb);
        assert_non_null(dv);
        if (t != nd->output && tsr_graph_read_tensor(g, t, dv))
            fail_msg("%s: read tensor %d: %s", label, t, tsr_errmsg());
        const uint8_t *rv = ref[t];
        for (size_t k = 0; k < nb; k++)
            if (dv[k] != rv[k]) {
                const tsr_nd_tensor_t *d = &nd->tensors[t];
                size_t x = k % (size_t)d->w, y = k / (size_t)d->w % (size_t)d->h,
                       c = k / ((size_t)d->w * (size_t)d->h) % (size_t)d->c,
                       n = k / ((size_t)d->w * (size_t)d->h * (size_t)d->c);
                const int signed8 = d->dtype == TSR_DT_INT8;
                print_message("%s (seed %llu): first divergent tensor %d [%d,%d,%d,%d] produced by node \"%s\" "
                              "(node %d): at [%zu][%zu][%zu][%zu] (flat %zu of %zu) device %d, reference %d\n",
                              label, (unsigned long long)s, t, d->n, d->c, d->h, d->w, nd->nodes[i].name, i, n, c, y,
                              x, k, nb, signed8 ? (int)(int8_t)dv[k] : (int)dv[k],
                              signed8 ? (int)(int8_t)rv[k] : (int)rv[k]);
                bad = 1;
                break;
            }
        if (dv != out)
            free(dv);
    }
    if (tot)
        tsr_graph_totals(g, tot);
    tsr_netref_free(nd, ref);
    tsr_graph_free(g);
    free(in);
    free(out);
    return bad;
}

static int check_net(tsr_device_t *dev, const tsr_netdesc_t *nd, uint64_t s, const char *label, unsigned flags,
                     tsr_graph_totals_t *tot)
{
    return check_net_fused(dev, nd, s, label, flags, tot, -1);
}

static void test_small_resnet(void **state)
{
    (void)state;
    tsr_device_t *dev = tsr_test_open("default", seed());
    tsr_netdesc_t nd;
    /* batch 2 (two batch blocks on default; 1 on rtl), 32x32 input, width 16, 10 classes */
    const int n = is_rtl() ? 1 : 2, hw = 32;
    if (tsr_netdesc_resnet18_small(seed(), n, hw, 16, 10, &nd))
        fail_msg("resnet18_small: %s", tsr_errmsg());
    if (check_net(dev, &nd, seed(), "small resnet, every tensor", TSR_GRAPH_KEEP_ALL, NULL))
        fail_msg("small resnet: a tensor differs from the reference (above)");
    tsr_graph_totals_t tot;
    if (check_net(dev, &nd, seed() + 1, "small resnet, buffers reused, stem not tap-packed", TSR_GRAPH_NO_TAPPACK,
                  &tot))
        fail_msg("small resnet with buffer reuse: the output differs from the reference (above)");
    if (check_net(dev, &nd, seed() + 2, "small resnet, one submission", TSR_GRAPH_KEEP_ALL | TSR_GRAPH_ONE_SUBMISSION,
                  NULL))
        fail_msg("small resnet in one submission: a tensor differs from the reference (above)");
    /* every add on its own (the eight adds are fused in the runs above) */
    if (fusable_adds(&nd) != 8)
        fail_msg("small resnet: %d fusable adds, expected 8", fusable_adds(&nd));
    if (check_net(dev, &nd, seed() + 3, "small resnet, adds not fused", TSR_GRAPH_KEEP_ALL | TSR_GRAPH_NO_FUSE, NULL))
        fail_msg("small resnet with the adds on their own: a tensor differs from the reference (above)");
    print_message("small resnet: %d layers, activations peak %llu B vs sum %llu B\n", tot.layers,
                  (unsigned long long)tot.peak_bytes, (unsigned long long)tot.tensor_bytes);
    if (tot.peak_bytes >= tot.tensor_bytes)
        fail_msg("buffer reuse: arena %llu B is not below the sum of the tensors %llu B",
                 (unsigned long long)tot.peak_bytes, (unsigned long long)tot.tensor_bytes);
    tsr_netdesc_free(&nd);
    tsr_device_close(dev);
}

/* Full ResNet-18 (ImageNet shape, batch 1) on fsim: every tensor equal to
 * the reference. (On RTL it is `tessera net resnet18 --backend rtl
 * --check`, which compares with fsim: too long for a test.) */
static void test_resnet18_full(void **state)
{
    (void)state;
    if (is_rtl()) {
        print_message("full ResNet-18: skipped on rtl (run `tessera net resnet18 --backend rtl --check`)\n");
        return;
    }
#ifdef __SANITIZE_ADDRESS__
    /* minutes under the sanitizers for the code paths the small network
     * already takes there; the release build runs it */
    print_message("full ResNet-18: skipped under AddressSanitizer (the release build runs it)\n");
    return;
#endif
    tsr_device_t *dev = tsr_test_open("default", seed());
    tsr_netdesc_t nd;
    if (tsr_netdesc_resnet18(seed(), 1, &nd))
        fail_msg("resnet18: %s", tsr_errmsg());
    if (check_net(dev, &nd, seed(), "ResNet-18, every tensor", TSR_GRAPH_KEEP_ALL, NULL))
        fail_msg("ResNet-18: a tensor differs from the reference (above)");
    tsr_netdesc_free(&nd);
    tsr_device_close(dev);
}

/* ------------------------------------------------------ random graphs */

typedef struct {
    tsr_netdesc_t nd;
    int capt, capn;
    uint64_t s;
} rg_t;

static int rg_tensor(rg_t *r, int n, int c, int h, int w, tsr_dtype_e dt, int32_t zp)
{
    if (r->nd.ntensors == r->capt) {
        r->capt = r->capt ? 2 * r->capt : 16;
        r->nd.tensors = realloc(r->nd.tensors, sizeof *r->nd.tensors * (size_t)r->capt);
        assert_non_null(r->nd.tensors);
    }
    r->nd.tensors[r->nd.ntensors] = (tsr_nd_tensor_t){.n = n, .c = c, .h = h, .w = w, .dtype = dt, .zp = zp,
                                                      .scale = 0.02 + 0.01 * (r->nd.ntensors % 5)};
    return r->nd.ntensors++;
}

static tsr_nd_node_t *rg_node(rg_t *r, tsr_nd_kind_e kind, int a, int b)
{
    if (r->nd.nnodes == r->capn) {
        r->capn = r->capn ? 2 * r->capn : 16;
        r->nd.nodes = realloc(r->nd.nodes, sizeof *r->nd.nodes * (size_t)r->capn);
        assert_non_null(r->nd.nodes);
    }
    tsr_nd_node_t *n = &r->nd.nodes[r->nd.nnodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->in[0] = a;
    n->in[1] = b;
    snprintf(n->name, sizeof n->name, "n%d", r->nd.nnodes);
    r->nd.nnodes++;
    return n;
}

static int rnd(rg_t *r, int lo, int hi) { return tsr_test_rnd(&r->s, lo, hi); }

static void rnd_dtype(rg_t *r, tsr_dtype_e *dt, int32_t *zp)
{
    *dt = rnd(r, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    *zp = *dt == TSR_DT_UINT8 ? rnd(r, 0, 255) : rnd(r, -128, 127);
    if (rnd(r, 0, 2) == 0)
        *zp = *dt == TSR_DT_UINT8 ? 128 : 0;
}

/* Requantization arrays for K-term accumulators: outputs in range. */
static void rnd_requant(rg_t *r, int count, int kterms, int32_t **mult, int32_t **shift)
{
    *mult = malloc(sizeof(int32_t) * (size_t)count);
    *shift = malloc(sizeof(int32_t) * (size_t)count);
    assert_true(*mult && *shift);
    int sh = 0;
    for (double v = 100.0 * (kterms < 1 ? 1 : kterms); v > 1.0 && sh < 31; v /= 2)
        sh++;
    sh = sh / 2 + 4; /* |acc| ~ sqrt(K) * 100 * 70: a shift of about log2(sqrt(K) * 100) + 6, rounded down */
    for (int i = 0; i < count; i++) {
        (*mult)[i] = (int32_t)((1u << 30) + (uint32_t)(tsr_test_next(&r->s) % (1u << 30)));
        (*shift)[i] = -sh - rnd(r, 0, 2);
    }
}

static void rnd_act(rg_t *r, tsr_dtype_e dt, int32_t zp, int32_t *lo, int32_t *hi)
{
    const int32_t mn = dt == TSR_DT_UINT8 ? 0 : -128, mx = dt == TSR_DT_UINT8 ? 255 : 127;
    *lo = mn;
    *hi = mx;
    if (rnd(r, 0, 2) == 0)
        *lo = zp; /* fused relu */
}

static int rg_conv(rg_t *r, int x, int dw, int cout, int k, int stride, int pad)
{
    const tsr_nd_tensor_t X = r->nd.tensors[x];
    tsr_dtype_e ydt;
    int32_t yzp;
    rnd_dtype(r, &ydt, &yzp);
    const int oh = (X.h + 2 * pad - k) / stride + 1, ow = (X.w + 2 * pad - k) / stride + 1;
    if (dw)
        cout = X.c;
    tsr_conv2d_params_t p = {.n = X.n, .c_in = X.c, .h = X.h, .w = X.w, .c_out = cout, .kh = k, .kw = k,
                             .stride_h = stride, .stride_w = stride, .pad_top = pad, .pad_left = pad,
                             .pad_bottom = pad, .pad_right = pad, .groups = dw ? X.c : 1, .x_dtype = X.dtype,
                             .x_zp = X.zp, .y_dtype = ydt, .y_zp = yzp, .w_zp_count = 1, .rq_count = cout};
    const int wu8 = rnd(r, 0, 3) == 0; /* uint8 weights with zero point 128 (still one int8 part) */
    p.w_dtype = wu8 ? TSR_DT_UINT8 : TSR_DT_INT8;
    int32_t *wzp = malloc(sizeof *wzp);
    assert_non_null(wzp);
    *wzp = wu8 ? 128 : 0;
    p.w_zp = wzp;
    int32_t *mult, *shift;
    rnd_requant(r, cout, (dw ? 1 : X.c) * k * k, &mult, &shift);
    p.mult = mult;
    p.shift = shift;
    rnd_act(r, ydt, yzp, &p.act_min, &p.act_max);
    const size_t nw = (size_t)cout * (size_t)(dw ? 1 : X.c) * (size_t)(k * k);
    uint8_t *w = malloc(nw);
    int32_t *bias = malloc(sizeof(int32_t) * (size_t)cout);
    assert_true(w && bias);
    for (size_t i = 0; i < nw; i++)
        w[i] = (uint8_t)tsr_test_next(&r->s);
    for (int i = 0; i < cout; i++)
        bias[i] = rnd(r, -20000, 20000);
    int y = rg_tensor(r, X.n, cout, oh, ow, ydt, yzp);
    tsr_nd_node_t *n = rg_node(r, TSR_ND_CONV, x, -1);
    n->conv = p;
    n->w = w;
    n->bias = rnd(r, 0, 4) ? bias : (free(bias), NULL);
    n->out = y;
    return y;
}

static int rg_pool(rg_t *r, int x)
{
    const tsr_nd_tensor_t X = r->nd.tensors[x];
    tsr_pool_params_t p = {.n = X.n, .c = X.c, .h = X.h, .w = X.w, .dtype = X.dtype, .zp = X.zp};
    const int kind = rnd(r, 0, 2);
    int oh = 1, ow = 1;
    if (kind == 2) {
        p.kind = TSR_POOL_GLOBAL_AVG;
    } else {
        p.kind = kind == 0 ? TSR_POOL_MAX : TSR_POOL_AVG;
        const int k = rnd(r, 2, 3 < X.h && 3 < X.w ? 3 : 2);
        p.kh = p.kw = k;
        p.stride_h = p.stride_w = rnd(r, 1, 2);
        const int pad = rnd(r, 0, k - 1);
        p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad;
        p.count_include_pad = rnd(r, 0, 1);
        oh = (X.h + 2 * pad - k) / p.stride_h + 1;
        ow = (X.w + 2 * pad - k) / p.stride_w + 1;
    }
    int y = rg_tensor(r, X.n, X.c, oh, ow, X.dtype, X.zp);
    tsr_nd_node_t *n = rg_node(r, TSR_ND_POOL, x, -1);
    n->pool = p;
    n->out = y;
    return y;
}

static int rg_clip(rg_t *r, int x)
{
    const tsr_nd_tensor_t X = r->nd.tensors[x];
    const int32_t mn = X.dtype == TSR_DT_UINT8 ? 0 : -128, mx = X.dtype == TSR_DT_UINT8 ? 255 : 127;
    tsr_eltwise_desc_t d = {.n = X.n, .c = X.c, .h = X.h, .w = X.w, .dtype = X.dtype, .zp = X.zp};
    tsr_clip_params_t p = {.x = d, .y = d, .lo = rnd(r, mn, X.zp), .hi = rnd(r, X.zp, mx)};
    int y = rg_tensor(r, X.n, X.c, X.h, X.w, X.dtype, X.zp);
    tsr_nd_node_t *n = rg_node(r, TSR_ND_CLIP, x, -1);
    n->clip = p;
    n->out = y;
    return y;
}

static int rg_add(rg_t *r, int a, int b)
{
    const tsr_nd_tensor_t A = r->nd.tensors[a], B = r->nd.tensors[b];
    tsr_dtype_e ydt;
    int32_t yzp;
    rnd_dtype(r, &ydt, &yzp);
    const double sy = A.scale + B.scale;
    tsr_add_quant_t q;
    if (tsr_quant_add_params(A.scale, B.scale, sy, &q))
        fail_msg("add params: %s", tsr_errmsg());
    tsr_add_params_t p = {.a = {A.n, A.c, A.h, A.w, A.dtype, A.zp},
                          .b = {B.n, B.c, B.h, B.w, B.dtype, B.zp},
                          .y = {A.n, A.c, A.h, A.w, ydt, yzp},
                          .left_shift = q.left_shift, .mult_a = q.mult_a, .mult_b = q.mult_b,
                          .shift_a = (int)q.shift_a, .shift_b = (int)q.shift_b, .mult_out = q.mult_out,
                          .shift_out = (int)q.shift_out};
    rnd_act(r, ydt, yzp, &p.act_min, &p.act_max);
    int y = rg_tensor(r, A.n, A.c, A.h, A.w, ydt, yzp);
    tsr_nd_node_t *n = rg_node(r, TSR_ND_ADD, a, b);
    n->add = p;
    n->out = y;
    return y;
}

static int rg_dense(rg_t *r, int x, int m)
{
    const tsr_nd_tensor_t X = r->nd.tensors[x];
    tsr_dtype_e ydt;
    int32_t yzp;
    rnd_dtype(r, &ydt, &yzp);
    tsr_dense_params_t p = {.n = X.n, .k = X.c, .m = m, .x_dtype = X.dtype, .x_zp = X.zp, .w_dtype = TSR_DT_INT8,
                            .w_zp_count = 1, .y_dtype = ydt, .y_zp = yzp, .rq_count = m};
    int32_t *wzp = calloc(1, sizeof *wzp), *mult, *shift;
    assert_non_null(wzp);
    p.w_zp = wzp;
    rnd_requant(r, m, X.c, &mult, &shift);
    p.mult = mult;
    p.shift = shift;
    rnd_act(r, ydt, yzp, &p.act_min, &p.act_max);
    uint8_t *w = malloc((size_t)m * (size_t)X.c);
    assert_non_null(w);
    for (int i = 0; i < m * X.c; i++)
        w[i] = (uint8_t)tsr_test_next(&r->s);
    int y = rg_tensor(r, X.n, m, 1, 1, ydt, yzp);
    tsr_nd_node_t *n = rg_node(r, TSR_ND_DENSE, x, -1);
    n->dense = p;
    n->w = w;
    n->out = y;
    return y;
}

/* A random graph: a chain of 3..7 steps, each a conv (plain, strided or
 * depthwise), a pool, a clip, or a residual block (conv 3x3 s1 p1 keeping
 * the shape, optionally another, then add with the block's input); a dense
 * head after a global pool sometimes. */
static void rg_make(uint64_t s, tsr_netdesc_t *out)
{
    rg_t r;
    memset(&r, 0, sizeof r);
    r.s = s;
    snprintf(r.nd.name, sizeof r.nd.name, "random");
    tsr_dtype_e dt;
    int32_t zp;
    rnd_dtype(&r, &dt, &zp);
    int cur = rg_tensor(&r, rnd(&r, 1, 3), rnd(&r, 1, 24), rnd(&r, 4, 12), rnd(&r, 4, 12), dt, zp);
    const int steps = rnd(&r, 3, 7);
    for (int i = 0; i < steps; i++) {
        const tsr_nd_tensor_t X = r.nd.tensors[cur];
        const int small = X.h < 3 || X.w < 3;
        switch (rnd(&r, 0, 5)) {
        case 0: cur = rg_conv(&r, cur, 0, rnd(&r, 1, 40), small ? 1 : rnd(&r, 0, 1) * 2 + 1, 1, small ? 0 : rnd(&r, 0, 1)); break;
        case 1: cur = rg_conv(&r, cur, 0, rnd(&r, 1, 40), small ? 1 : 3, 2, small ? 0 : 1); break;
        case 2: cur = rg_conv(&r, cur, 1, 0, small ? 1 : 3, rnd(&r, 1, 2), small ? 0 : 1); break;
        case 3:
            if (!small)
                cur = rg_pool(&r, cur);
            break;
        case 4: cur = rg_clip(&r, cur); break;
        default: {
            int b = rg_conv(&r, cur, 0, X.c, small ? 1 : 3, 1, small ? 0 : 1);
            if (rnd(&r, 0, 1))
                b = rg_conv(&r, b, rnd(&r, 0, 1), X.c, small ? 1 : 3, 1, small ? 0 : 1);
            cur = rnd(&r, 0, 1) ? rg_add(&r, cur, b) : rg_add(&r, b, cur);
        }
        }
    }
    if (rnd(&r, 0, 1)) {
        const tsr_nd_tensor_t X = r.nd.tensors[cur];
        if (X.h * X.w > 1) {
            tsr_pool_params_t p = {.kind = TSR_POOL_GLOBAL_AVG, .n = X.n, .c = X.c, .h = X.h, .w = X.w,
                                   .dtype = X.dtype, .zp = X.zp};
            int y = rg_tensor(&r, X.n, X.c, 1, 1, X.dtype, X.zp);
            tsr_nd_node_t *n = rg_node(&r, TSR_ND_POOL, cur, -1);
            n->pool = p;
            n->out = y;
            cur = y;
        }
        cur = rg_dense(&r, cur, rnd(&r, 1, 20));
    }
    r.nd.output = cur;
    *out = r.nd;
}

static void test_random_graphs(void **state)
{
    (void)state;
    const uint64_t s0 = seed();
    int count = is_rtl() ? 12 : 40;
    const char *e = getenv("TSR_GRAPH_COUNT");
    if (e)
        count = atoi(e);
    print_message("random graphs: seed %llu (TSR_GRAPH_SEED), %d graphs\n", (unsigned long long)s0, count);
    tsr_device_t *dev = tsr_test_open("default", s0);
    int fails = 0, fusable = 0;
    for (int i = 0; i < count; i++) {
        const uint64_t s = s0 * 1000003u + (uint64_t)i;
        tsr_netdesc_t nd;
        rg_make(s, &nd);
        if (tsr_netdesc_validate(&nd))
            fail_msg("graph %d (seed %llu): the generator made an invalid desc: %s", i, (unsigned long long)s,
                     tsr_errmsg());
        char label[64];
        snprintf(label, sizeof label, "random graph %d (%d nodes)", i, nd.nnodes);
        /* residual blocks' adds run in their convs' epilogues (check_net
         * asserts they were fused); on fsim also each on its own */
        fusable += fusable_adds(&nd);
        fails += check_net(dev, &nd, s, label, TSR_GRAPH_KEEP_ALL, NULL);
        if (!is_rtl()) {
            snprintf(label, sizeof label, "random graph %d (%d nodes), not fused", i, nd.nnodes);
            fails += check_net(dev, &nd, s, label, TSR_GRAPH_KEEP_ALL | TSR_GRAPH_NO_FUSE, NULL);
        }
        tsr_netdesc_free(&nd);
    }
    tsr_device_close(dev);
    print_message("random graphs: %d adds fused into a conv's epilogue\n", fusable);
    if (!fusable)
        fail_msg("no random graph had an add to fuse (seed %llu): the fused path was not tested", (unsigned long long)s0);
    if (fails)
        fail_msg("%d of %d random graphs differ from the reference (above; seed %llu)", fails, count,
                 (unsigned long long)s0);
}

/* A conv whose epilogue has no room for the add (an accumulator buffer of
 * 8 rows: the smallest fused tile needs 2 + 3 constant + 4 add constant
 * rows) keeps the add on its own, with the same bytes; on default the
 * same graph fuses. */
static void test_fuse_fallback(void **state)
{
    (void)state;
    if (is_rtl()) {
        print_message("fuse fallback: fsim only (a config of its own)\n");
        return;
    }
    static const char *json = "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": 3, \"LOG_WGT_WIDTH\": 3, \"LOG_ACC_WIDTH\": 5, "
                              "\"LOG_BATCH\": 0, \"LOG_BLOCK\": 2, \"LOG_UOP_BUFF_SIZE\": 10, \"LOG_INP_BUFF_SIZE\": 9, "
                              "\"LOG_WGT_BUFF_SIZE\": 10, \"LOG_ACC_BUFF_SIZE\": 7, \"DRAM_BUS_WIDTH\": 64, "
                              "\"CLOCK_MHZ\": 50, \"CMD_QUEUE_DEPTH\": 16, \"DEP_QUEUE_DEPTH\": 4}";
    tsr_config_t cfg;
    if (tsr_config_parse(json, "acc8rows", &cfg))
        fail_msg("config: %s", tsr_errmsg());
    assert_int_equal(cfg.acc_depth, 8);
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = seed()};
    if (tsr_device_open("fsim", &cfg, &o, &dev))
        fail_msg("open: %s", tsr_errmsg());
    tsr_device_t *def = tsr_test_open("default", seed());
    for (int i = 0; i < 4; i++) {
        rg_t r;
        memset(&r, 0, sizeof r);
        r.s = seed() + (uint64_t)i;
        snprintf(r.nd.name, sizeof r.nd.name, "fallback");
        tsr_dtype_e dt;
        int32_t zp;
        rnd_dtype(&r, &dt, &zp);
        const int x = rg_tensor(&r, 1, 4 * (i + 1), 3, 3, dt, zp);
        const int b = rg_conv(&r, x, i == 3, 4 * (i + 1), i % 2 ? 3 : 1, 1, i % 2);
        r.nd.output = i % 2 ? rg_add(&r, b, x) : rg_add(&r, x, b);
        if (check_net_fused(dev, &r.nd, r.s, "no room for the fused add", TSR_GRAPH_KEEP_ALL, NULL, 0))
            fail_msg("conv + add without fusion: the output differs from the reference (above)");
        if (check_net_fused(def, &r.nd, r.s, "the same on default, fused", TSR_GRAPH_KEEP_ALL, NULL, 1))
            fail_msg("conv + add fused: the output differs from the reference (above)");
        tsr_netdesc_free(&r.nd);
    }
    tsr_device_close(def);
    tsr_device_close(dev);
}

/* ------------------------------------------------------------ bad graphs */

static void expect_err(int rc, const char *node, const char *what)
{
    if (rc != TSR_EINVAL)
        fail_msg("%s: accepted or wrong error %d (%s)", what, rc, rc ? tsr_errmsg() : "");
    if (!strstr(tsr_errmsg(), node))
        fail_msg("%s: error does not name node \"%s\": %s", what, node, tsr_errmsg());
}

/* ------------------------------------------------------ activation tables */

/* An act node x -> a new tensor of x's shape, the given type and zero point, with a random table. */
static int rg_act(rg_t *r, int x, tsr_dtype_e dt, int32_t zp)
{
    const tsr_nd_tensor_t X = r->nd.tensors[x];
    int32_t v[TSR_ACT_ENTRIES];
    for (int i = 0; i < TSR_ACT_ENTRIES; i++)
        v[i] = rnd(r, -128, 127);
    int y = rg_tensor(r, X.n, X.c, X.h, X.w, dt, zp);
    tsr_nd_node_t *n = rg_node(r, TSR_ND_ACT, x, -1);
    n->act = (tsr_op_act_t){.n = X.n, .c = X.c, .h = X.h, .w = X.w, .x_dtype = X.dtype, .x_zp = X.zp,
                            .y_dtype = dt, .y_zp = zp};
    if (tsr_act_table_from_values(v, &n->act.table))
        fail_msg("table: %s", tsr_errmsg());
    n->out = y;
    return y;
}

/* Activation table nodes in a graph (conv -> act -> act -> maxpool -> act,
 * every uint8/int8 pairing, channels that leave padding lanes, batch 2 on
 * the default preset + ACT_LUT 4) against the reference applying each table
 * on the host (tests/tsr_netref.c), every tensor and with buffers reused;
 * then what is refused: a config without ACT_LUT (naming the node and the
 * key, also from a netdesc), an output of another shape, no table. */
static void test_act_nodes(void **state)
{
    (void)state;
    rg_t r;
    memset(&r, 0, sizeof r);
    r.s = seed() ^ 0xac7;
    const int nb = is_rtl() ? 1 : 2;
    int x = rg_tensor(&r, nb, 24, 6, 7, TSR_DT_UINT8, 3);
    int c = rg_conv(&r, x, 0, 20, 3, 1, 1);
    int a1 = rg_act(&r, c, TSR_DT_INT8, -5);
    int a2 = rg_act(&r, a1, TSR_DT_UINT8, 200);
    int p = rg_pool(&r, a2);
    int a3 = rg_act(&r, p, TSR_DT_UINT8, 128);
    int a4 = rg_act(&r, a3, TSR_DT_INT8, 0);
    r.nd.output = a4;
    if (tsr_netdesc_validate(&r.nd))
        fail_msg("act netdesc: %s", tsr_errmsg());
    /* ACT_LUT = 0 (the default preset without its tables): refused when the graph is built,
     * naming the node and the key */
    tsr_config_t nolut;
    tsr_test_preset_with("default", "ACT_LUT", 0, &nolut);
    tsr_graph_t *g = NULL;
    expect_err(tsr_graph_from_netdesc(&nolut, &r.nd, &g), "n1", "act on ACT_LUT = 0");
    if (!strstr(tsr_errmsg(), "ACT_LUT"))
        fail_msg("act on ACT_LUT = 0 refused without naming the key: %s", tsr_errmsg());
    assert_null(g);
    assert_int_equal(tsr_graph_create(&nolut, &g), 0);
    int t0, t1;
    assert_int_equal(tsr_graph_tensor(g, 1, 8, 4, 4, TSR_DT_INT8, 0, &t0), 0);
    assert_int_equal(tsr_graph_tensor(g, 1, 8, 4, 4, TSR_DT_UINT8, 7, &t1), 0);
    tsr_act_table_t tab;
    memset(&tab, 0, sizeof tab);
    expect_err(tsr_graph_act(g, "sig", t0, t1, &tab), "sig", "tsr_graph_act on ACT_LUT = 0");
    if (!strstr(tsr_errmsg(), "ACT_LUT"))
        fail_msg("tsr_graph_act on ACT_LUT = 0 refused without naming the key: %s", tsr_errmsg());
    tsr_graph_free(g);
    if (is_rtl()) { /* (a default+ACT_LUT model would be one more RTL build in CI: the unit's RTL is
                       checked by tb_alu_lut and the soak_*lut_rtl soaks, the operator by test_act) */
        print_message("act nodes: run on fsim and systemc here\n");
        tsr_netdesc_free(&r.nd);
        return;
    }
    tsr_config_t cfg;
    tsr_test_preset_with("default", "ACT_LUT", 4, &cfg);
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = seed()};
    if (tsr_device_open(tsr_test_backend(), &cfg, &o, &dev))
        fail_msg("open default+ACT_LUT: %s", tsr_errmsg());
    if (check_net(dev, &r.nd, seed(), "act nodes, every tensor", TSR_GRAPH_KEEP_ALL | TSR_GRAPH_NO_FUSE_ACT, NULL))
        fail_msg("act nodes: a tensor differs from the host tables (above)");
    if (check_net(dev, &r.nd, seed() + 1, "act nodes, buffers reused, one submission",
                  TSR_GRAPH_ONE_SUBMISSION | TSR_GRAPH_NO_FUSE_ACT, NULL))
        fail_msg("act nodes in one submission: the output differs from the host tables (above)");
    /* the layer table names them */
    assert_int_equal(tsr_graph_from_netdesc(&cfg, &r.nd, &g), 0);
    assert_int_equal(tsr_graph_plan(g, dev, TSR_GRAPH_NO_FUSE_ACT), 0);
    int acts = 0;
    for (int i = 0; tsr_graph_layer(g, i); i++)
        acts += !strcmp(tsr_graph_layer(g, i)->op, "act");
    assert_int_equal(acts, 4);
    tsr_graph_free(g);
    /* by default the first table (its input only the conv reads)
     * runs in the conv's epilogue, every tensor as the host tables say
     * (the conv's output has no buffer), also in one submission */
    if (check_net(dev, &r.nd, seed(), "act nodes, fused, every tensor", TSR_GRAPH_KEEP_ALL,
                  NULL) ||
        check_net(dev, &r.nd, seed() + 1, "act nodes, fused, one submission",
                  TSR_GRAPH_ONE_SUBMISSION, NULL))
        fail_msg("act nodes fused into the conv: a tensor differs from the host tables (above)");
    assert_int_equal(tsr_graph_from_netdesc(&cfg, &r.nd, &g), 0);
    assert_int_equal(tsr_graph_plan(g, dev, 0), 0);
    int convacts = 0;
    acts = 0;
    for (int i = 0; tsr_graph_layer(g, i); i++) {
        acts += !strcmp(tsr_graph_layer(g, i)->op, "act");
        convacts += !strcmp(tsr_graph_layer(g, i)->op, "conv+act");
    }
    assert_int_equal(acts, 3); /* (the first runs in the conv's epilogue) */
    assert_int_equal(convacts, 1);
    /* its stream: the table LOADed once before the lut ops, one lut op per
     * output row of the conv (tsr_conv2d_plan_tensors_act) */
    for (int i = 0; tsr_graph_layer(g, i); i++) {
        if (strcmp(tsr_graph_layer(g, i)->op, "conv+act"))
            continue;
        size_t n = 0;
        const tsr_insn_t *v = tsr_graph_stream(g, i, &n);
        int loads = 0, early = 0;
        uint64_t ops = 0;
        for (size_t k = 0; k < n; k++) {
            if (v[k].opcode == TSR_OP_LOAD && v[k].mem_type == TSR_MEM_LUT && v[k].x_size)
                loads++;
            if (v[k].opcode == TSR_OP_ALU && v[k].alu_opcode == TSR_ALU_LUT) {
                early |= !loads;
                ops += (uint64_t)v[k].iter_out * v[k].iter_in * (v[k].uop_end - v[k].uop_bgn);
            }
        }
        /* rows: batch blocks x channel blocks x 6 x 7 pixels (20 channels: 2 blocks of 16) */
        const uint64_t rows = (uint64_t)((nb + (int)cfg.batch - 1) / (int)cfg.batch) * 2 * 6 * 7;
        if (loads != 1 || early || ops != rows)
            fail_msg("conv+act stream: %d table LOADs, lut before its LOAD %d, %llu lut ops (want %llu)", loads,
                     early, (unsigned long long)ops, (unsigned long long)rows);
    }
    tsr_graph_free(g);
    /* TSR_GRAPH_NO_FUSE wins: every act on its own */
    if (check_net(dev, &r.nd, seed(), "act nodes, not fused", TSR_GRAPH_KEEP_ALL | TSR_GRAPH_NO_FUSE_ACT,
                  NULL))
        fail_msg("act nodes, not fused: a tensor differs from the host tables (above)");
    /* refused on a config with tables: another shape, no table, an input that does not exist */
    assert_int_equal(tsr_graph_create(&cfg, &g), 0);
    int u0, u1, u2;
    assert_int_equal(tsr_graph_tensor(g, 1, 8, 4, 4, TSR_DT_INT8, 0, &u0), 0);
    assert_int_equal(tsr_graph_tensor(g, 1, 8, 4, 5, TSR_DT_UINT8, 7, &u1), 0);
    assert_int_equal(tsr_graph_tensor(g, 1, 8, 4, 4, TSR_DT_UINT8, 7, &u2), 0);
    expect_err(tsr_graph_act(g, "shape", u0, u1, &tab), "shape", "act to another shape");
    expect_err(tsr_graph_act(g, "notab", u0, u2, NULL), "notab", "act without a table");
    expect_err(tsr_graph_act(g, "noin", 9, u2, &tab), "noin", "act of a tensor that does not exist");
    assert_int_equal(tsr_graph_act(g, "ok", u0, u2, &tab), 0);
    assert_int_equal(tsr_graph_nnodes(g), 1);
    tsr_graph_free(g);
    tsr_netdesc_free(&r.nd);
    tsr_device_close(dev);
}

static void test_bad_graphs(void **state)
{
    (void)state;
    tsr_device_t *dev = tsr_test_open("default", 1);
    const tsr_config_t *cfg = tsr_device_config(dev);
    tsr_netdesc_t nd;
    rg_t r;
    memset(&r, 0, sizeof r);
    r.s = 7;
    int x = rg_tensor(&r, 1, 8, 6, 6, TSR_DT_INT8, 0);
    int y = rg_conv(&r, x, 0, 8, 3, 1, 1);
    int z = rg_clip(&r, y);
    int p = rg_pool(&r, z);
    (void)p;
    r.nd.output = r.nd.nodes[r.nd.nnodes - 1].out;
    nd = r.nd;
    tsr_graph_t *g = NULL;

    /* shape mismatch: the conv's output tensor is declared one channel short */
    nd.tensors[y].c = 7;
    expect_err(tsr_graph_from_netdesc(cfg, &nd, &g), "n0", "shape mismatch");
    nd.tensors[y].c = 8;
    /* dtype / zero point mismatch between producer (conv) and the tensor */
    const tsr_dtype_e odt = nd.tensors[y].dtype;
    const int32_t ozp = nd.tensors[y].zp;
    nd.tensors[y].zp = ozp == 5 ? 6 : 5;
    expect_err(tsr_graph_from_netdesc(cfg, &nd, &g), "n0", "zero-point mismatch");
    nd.tensors[y].zp = ozp;
    nd.tensors[y].dtype = odt == TSR_DT_INT8 ? TSR_DT_UINT8 : TSR_DT_INT8;
    nd.tensors[y].zp = 100;
    expect_err(tsr_graph_from_netdesc(cfg, &nd, &g), "n0", "dtype mismatch");
    nd.tensors[y].dtype = odt;
    nd.tensors[y].zp = ozp;
    /* the clip's consumer-side view disagrees (its params say another zp) */
    nd.nodes[1].clip.x.zp += 1;
    nd.nodes[1].clip.y.zp += 1;
    expect_err(tsr_graph_from_netdesc(cfg, &nd, &g), "n1", "consumer zp mismatch");
    nd.nodes[1].clip.x.zp -= 1;
    nd.nodes[1].clip.y.zp -= 1;
    /* unsupported: weight zero point 3 on int8 weights needs the input twice */
    int32_t *wzp = (int32_t *)nd.nodes[0].conv.w_zp;
    const int32_t owzp = *wzp;
    *wzp = 3;
    expect_err(tsr_graph_from_netdesc(cfg, &nd, &g), "n0", "weight split");
    *wzp = owzp;
    /* the good graph builds, plans and leaves nothing behind when freed */
    if (tsr_graph_from_netdesc(cfg, &nd, &g))
        fail_msg("good graph: %s", tsr_errmsg());
    tsr_graph_free(g);
    g = NULL;

    /* a cycle: the conv reads the pool's output (built with the C API: the
     * desc format cannot express it in topological order) */
    tsr_graph_t *c = NULL;
    assert_int_equal(tsr_graph_create(cfg, &c), 0);
    int t[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(tsr_graph_tensor(c, 1, 8, 6, 6, TSR_DT_INT8, 0, &t[i]), 0);
    tsr_clip_params_t cp = {.x = {1, 8, 6, 6, TSR_DT_INT8, 0}, .y = {1, 8, 6, 6, TSR_DT_INT8, 0}, .lo = -10, .hi = 10};
    assert_int_equal(tsr_graph_clip(c, "first", t[0], t[1], &cp), 0);
    assert_int_equal(tsr_graph_clip(c, "second", t[1], t[2], &cp), 0);
    expect_err(tsr_graph_clip(c, "third", t[2], t[1], &cp), "third", "two producers");
    assert_int_equal(tsr_graph_clip(c, "loop", t[2], t[0], &cp), 0); /* t0 now produced by "loop": a cycle */
    expect_err(tsr_graph_plan(c, dev, 0), "first", "cycle");
    tsr_graph_free(c);

    /* a plan that fails (a pool whose window count has no exact division
     * would be device-dependent; use a dense over a spatial tensor instead,
     * refused when added) */
    assert_int_equal(tsr_graph_create(cfg, &c), 0);
    assert_int_equal(tsr_graph_tensor(c, 1, 4, 2, 2, TSR_DT_INT8, 0, &t[0]), 0);
    assert_int_equal(tsr_graph_tensor(c, 1, 3, 1, 1, TSR_DT_INT8, 0, &t[1]), 0);
    int32_t zero = 0, mult = 1 << 30, shift = -8;
    int8_t w[48] = {0};
    tsr_dense_params_t dp = {.n = 1, .k = 16, .m = 3, .x_dtype = TSR_DT_INT8, .w_dtype = TSR_DT_INT8, .w_zp = &zero,
                             .w_zp_count = 1, .y_dtype = TSR_DT_INT8, .mult = &mult, .shift = &shift, .rq_count = 1,
                             .act_min = -128, .act_max = 127};
    expect_err(tsr_graph_dense(c, "fc", t[0], t[1], &dp, w, NULL), "fc", "dense over a spatial tensor");
    tsr_graph_free(c);

    tsr_netdesc_free(&nd);
    tsr_device_close(dev);

    /* a config whose output rows cannot be the next input rows */
    tsr_config_t rect;
    assert_int_equal(tsr_test_config("rect", &rect), 0);
    assert_int_equal(tsr_graph_create(&rect, &c), TSR_EINVAL);
    if (!strstr(tsr_errmsg(), "BLOCK_IN"))
        fail_msg("BLOCK_IN != BLOCK_OUT refused without saying why: %s", tsr_errmsg());
}

/* A failed plan leaves no device memory behind: plan a graph whose last
 * node cannot be planned on this device (a pool window larger than the
 * tiny config's input buffer) and check the allocator. */
static void test_plan_failure_frees(void **state)
{
    (void)state;
    tsr_device_t *dev = tsr_test_open("tiny", 1);
    const tsr_config_t *cfg = tsr_device_config(dev);
    tsr_graph_t *g = NULL;
    assert_int_equal(tsr_graph_create(cfg, &g), 0);
    int a, b, c;
    assert_int_equal(tsr_graph_tensor(g, 1, 4, 12, 12, TSR_DT_INT8, 0, &a), 0);
    assert_int_equal(tsr_graph_tensor(g, 1, 4, 12, 12, TSR_DT_INT8, 0, &b), 0);
    assert_int_equal(tsr_graph_tensor(g, 1, 4, 1, 1, TSR_DT_INT8, 0, &c), 0);
    tsr_clip_params_t cp = {.x = {1, 4, 12, 12, TSR_DT_INT8, 0}, .y = {1, 4, 12, 12, TSR_DT_INT8, 0}, .lo = -10,
                            .hi = 10};
    assert_int_equal(tsr_graph_clip(g, "clip", a, b, &cp), 0);
    /* a 12x12 max window of 144 input rows: tiny's input buffer holds 128 */
    tsr_pool_params_t pp = {.kind = TSR_POOL_MAX, .n = 1, .c = 4, .h = 12, .w = 12, .kh = 12, .kw = 12, .stride_h = 1,
                            .stride_w = 1, .dtype = TSR_DT_INT8, .zp = 0};
    assert_int_equal(tsr_graph_pool(g, "bigpool", b, c, &pp), 0);
    uint64_t before = 0, after = 0;
    assert_int_equal(tsr_mem_alloc(dev, 64, &before), 0);
    assert_int_equal(tsr_mem_free(dev, before), 0);
    int rc = tsr_graph_plan(g, dev, 0);
    if (rc == 0)
        fail_msg("the 12x12 pool was planned on tiny: the test no longer exercises a failing plan");
    if (!strstr(tsr_errmsg(), "bigpool"))
        fail_msg("plan failure does not name the node: %s", tsr_errmsg());
    /* the allocator hands out the same first free address again: nothing leaked */
    assert_int_equal(tsr_mem_alloc(dev, 64, &after), 0);
    assert_int_equal(tsr_mem_free(dev, after), 0);
    if (after != before)
        fail_msg("a failed plan left device memory allocated (first free address 0x%llx, was 0x%llx)",
                 (unsigned long long)after, (unsigned long long)before);
    tsr_graph_free(g);
    tsr_device_close(dev);
}

/* Reshape relabels bytes: clip -> reshape [1,8,4,6] -> [1,8,6,4] -> clip
 * over uint8 values; the reference is two clamps of the NCHW bytes (the
 * reshape keeps them). A reshape that changes C is refused naming it. */
static void test_reshape(void **state)
{
    (void)state;
    tsr_device_t *dev = tsr_test_open("default", seed());
    tsr_graph_t *g = NULL;
    assert_int_equal(tsr_graph_create(tsr_device_config(dev), &g), 0);
    int t[4];
    assert_int_equal(tsr_graph_tensor(g, 1, 8, 4, 6, TSR_DT_UINT8, 100, &t[0]), 0);
    assert_int_equal(tsr_graph_tensor(g, 1, 8, 4, 6, TSR_DT_UINT8, 100, &t[1]), 0);
    assert_int_equal(tsr_graph_tensor(g, 1, 8, 6, 4, TSR_DT_UINT8, 100, &t[2]), 0);
    assert_int_equal(tsr_graph_tensor(g, 1, 8, 6, 4, TSR_DT_UINT8, 100, &t[3]), 0);
    tsr_clip_params_t c1 = {.x = {1, 8, 4, 6, TSR_DT_UINT8, 100}, .y = {1, 8, 4, 6, TSR_DT_UINT8, 100}, .lo = 30,
                            .hi = 200};
    tsr_clip_params_t c2 = {.x = {1, 8, 6, 4, TSR_DT_UINT8, 100}, .y = {1, 8, 6, 4, TSR_DT_UINT8, 100}, .lo = 60,
                            .hi = 220};
    int bad;
    assert_int_equal(tsr_graph_tensor(g, 1, 4, 12, 4, TSR_DT_UINT8, 100, &bad), 0);
    expect_err(tsr_graph_reshape(g, "badview", t[1], bad), "badview", "reshape changing C");
    /* missing arguments: named, and the node is not added (t[1] still has no producer) */
    expect_err(tsr_graph_clip(g, "nullclip", t[0], t[1], NULL), "nullclip", "clip without parameters");
    assert_non_null(strstr(tsr_errmsg(), "NULL parameters"));
    expect_err(tsr_graph_requantize(g, "nullrq", t[0], t[1], NULL), "nullrq", "requantize without parameters");
    assert_non_null(strstr(tsr_errmsg(), "NULL parameters"));
    assert_int_equal(tsr_graph_clip(g, "c1", t[0], t[1], &c1), 0);
    assert_int_equal(tsr_graph_reshape(g, "view", t[1], t[2]), 0);
    assert_int_equal(tsr_graph_clip(g, "c2", t[2], t[3], &c2), 0);
    assert_int_equal(tsr_graph_output(g, t[3]), 0);
    if (tsr_graph_plan(g, dev, 0))
        fail_msg("plan: %s", tsr_errmsg());
    uint8_t x[192], y[192];
    uint64_t s = seed();
    for (int i = 0; i < 192; i++)
        x[i] = (uint8_t)tsr_test_next(&s);
    const void *ins[1] = {x};
    void *outs[1] = {y};
    if (tsr_graph_exec(g, ins, outs))
        fail_msg("exec: %s", tsr_errmsg());
    for (int i = 0; i < 192; i++) {
        int v = x[i] < 30 ? 30 : x[i] > 200 ? 200 : x[i];
        v = v < 60 ? 60 : v > 220 ? 220 : v;
        if (y[i] != v)
            fail_msg("reshape graph: flat %d is %d, the reference %d (input %d)", i, y[i], v, x[i]);
    }
    tsr_graph_free(g);
    tsr_device_close(dev);
}

/* tsr_graph_requantize on its own: random shapes (1 and many channels),
 * dtypes, zero points, per-tensor and per-channel multipliers and shifts
 * and clamps, every output byte against the plain-C requantization
 * (tsr_opref.c) of x - x_zp; the layer table names it. */
static void test_requantize(void **state)
{
    (void)state;
    uint64_t s = seed() ^ 0x5eed;
    /* fsim: the default and tiny configs; the RTL: tiny, fewer cases */
    for (int ci = is_rtl(); ci < 2; ci++) {
        tsr_device_t *dev = tsr_test_open(ci ? "tiny" : "default", seed());
        const int cases = is_rtl() ? 4 : 12;
        for (int k = 0; k < cases; k++) {
            tsr_requant_params_t p;
            memset(&p, 0, sizeof p);
            static const int cs[] = {1, 3, 16, 37, 64};
            p.n = 1 + (int)(tsr_test_next(&s) % 2);
            p.c = cs[tsr_test_next(&s) % 5];
            p.h = 1 + (int)(tsr_test_next(&s) % 7);
            p.w = 1 + (int)(tsr_test_next(&s) % 9);
            p.x_dtype = tsr_test_next(&s) & 1 ? TSR_DT_UINT8 : TSR_DT_INT8;
            p.y_dtype = tsr_test_next(&s) & 1 ? TSR_DT_UINT8 : TSR_DT_INT8;
            const int xlo = p.x_dtype == TSR_DT_UINT8 ? 0 : -128, ylo = p.y_dtype == TSR_DT_UINT8 ? 0 : -128;
            p.x_zp = xlo + (int)(tsr_test_next(&s) % 256);
            p.y_zp = ylo + (int)(tsr_test_next(&s) % 256);
            p.rq_count = tsr_test_next(&s) & 1 ? p.c : 1;
            int32_t mult[64], shift[64];
            for (int i = 0; i < p.rq_count; i++) {
                mult[i] = (int32_t)((1u << 30) + (uint32_t)(tsr_test_next(&s) % (1u << 30)));
                shift[i] = (int32_t)(tsr_test_next(&s) % 9) - 6; /* [-6, 2]: scales about 1/64 .. 4 */
            }
            p.mult = mult;
            p.shift = shift;
            p.act_min = ylo + (int)(tsr_test_next(&s) % 40);
            p.act_max = ylo + 255 - (int)(tsr_test_next(&s) % 40);
            tsr_graph_t *g = NULL;
            assert_int_equal(tsr_graph_create(tsr_device_config(dev), &g), 0);
            int tx, ty;
            assert_int_equal(tsr_graph_tensor(g, p.n, p.c, p.h, p.w, p.x_dtype, p.x_zp, &tx), 0);
            assert_int_equal(tsr_graph_tensor(g, p.n, p.c, p.h, p.w, p.y_dtype, p.y_zp, &ty), 0);
            if (tsr_graph_requantize(g, "rq", tx, ty, &p))
                fail_msg("case %d: requantize: %s", k, tsr_errmsg());
            assert_int_equal(tsr_graph_output(g, ty), 0);
            if (tsr_graph_plan(g, dev, 0))
                fail_msg("case %d: plan: %s", k, tsr_errmsg());
            const size_t ne = (size_t)p.n * p.c * p.h * p.w;
            uint8_t *x = malloc(ne), *y = malloc(ne), *want = malloc(ne);
            int32_t *acc = malloc(ne * sizeof *acc);
            assert_true(x && y && want && acc);
            for (size_t i = 0; i < ne; i++) {
                x[i] = (uint8_t)tsr_test_next(&s);
                acc[i] = (p.x_dtype == TSR_DT_UINT8 ? (int32_t)x[i] : (int32_t)(int8_t)x[i]) - p.x_zp;
            }
            const void *ins[1] = {x};
            void *outs[1] = {y};
            if (tsr_graph_exec(g, ins, outs))
                fail_msg("case %d: exec: %s", k, tsr_errmsg());
            opref_acc_t a = {p.n, p.c, p.h, p.w, acc};
            opref_requant_t rq = {p.rq_count, mult, shift, p.act_min, p.act_max, NULL};
            opref_tensor_t yt = {p.y_dtype == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8, p.n, p.c, p.h, p.w, want, p.y_zp};
            if (opref_requantize(&a, &rq, &yt))
                fail_msg("case %d: reference: %s", k, tsr_errmsg());
            for (size_t i = 0; i < ne; i++)
                if (y[i] != want[i])
                    fail_msg("%s case %d (seed %llu): [%d,%d,%d,%d] x %s zp %d -> y %s zp %d, %s: element %zu is %d, "
                             "the reference %d (x %d)",
                             ci ? "tiny" : "default", k, (unsigned long long)seed(), p.n, p.c, p.h, p.w, p.x_dtype == TSR_DT_UINT8 ? "u8" : "i8",
                             (int)p.x_zp, p.y_dtype == TSR_DT_UINT8 ? "u8" : "i8", (int)p.y_zp,
                             p.rq_count > 1 ? "per channel" : "per tensor", i, y[i], want[i], x[i]);
            const tsr_graph_layer_t *L = tsr_graph_layer(g, 0);
            assert_non_null(L);
            assert_string_equal(L->op, "requant");
            free(x);
            free(y);
            free(want);
            free(acc);
            tsr_graph_free(g);
        }
        tsr_device_close(dev);
    }
}

/* One conv graph on dev: y = conv(x), p's weights w; the layer's op and
 * MACs into *op / *macs. Returns 0 or the error. */
static int grouped_graph_run(tsr_device_t *dev, const tsr_conv2d_params_t *p, const uint8_t *w, const int32_t *bias,
                             const uint8_t *x, uint8_t *y, char *op, size_t opn, double *macs)
{
    tsr_graph_t *g = NULL;
    int tx, ty, oh = 0, ow = 0, rc = tsr_conv2d_check(p, &oh, &ow);
    if (!rc)
        rc = tsr_graph_create(tsr_device_config(dev), &g);
    if (!rc)
        rc = tsr_graph_tensor(g, p->n, p->c_in, p->h, p->w, p->x_dtype, p->x_zp, &tx);
    if (!rc)
        rc = tsr_graph_tensor(g, p->n, p->c_out, oh, ow, p->y_dtype, p->y_zp, &ty);
    if (!rc)
        rc = tsr_graph_conv2d(g, "gc", tx, ty, p, w, bias);
    if (!rc)
        rc = tsr_graph_output(g, ty);
    if (!rc)
        rc = tsr_graph_plan(g, dev, 0);
    const void *ins[1] = {x};
    void *outs[1] = {y};
    if (!rc)
        rc = tsr_graph_exec(g, ins, outs);
    if (!rc) {
        const tsr_graph_layer_t *L = tsr_graph_layer(g, 0);
        snprintf(op, opn, "%s", L ? L->op : "?");
        *macs = L ? L->macs : 0;
    }
    tsr_graph_free(g);
    return rc;
}

/* A grouped conv in a graph on tiny (BLOCK 4): 2 groups of 4 channels run
 * grouped ("gconv", the grouped MACs); 2 groups of 12 channels (a group
 * spanning blocks) the graph expands into block-diagonal groups-1 weights
 * ("conv", twice the MACs). Both equal the groups-1 conv over weights
 * expanded here by hand (the zero point outside the group). */
static void test_grouped_conv(void **state)
{
    (void)state;
    tsr_device_t *dev = tsr_test_open("tiny", seed());
    uint64_t s = seed() ^ 0x6c0;
    static const int cs[2] = {8, 24};
    for (int t = 0; t < 2; t++) {
        const int C = cs[t], G = 2, cg = C / G, K = 9, H = 6, W = 5;
        int32_t wzp[24], mult[24], shift[24];
        for (int i = 0; i < C; i++) {
            wzp[i] = 128; /* uint8 weights: w - w_zp within int8 (groups 1 needs it in a graph) */
            mult[i] = (int32_t)((1u << 30) + (uint32_t)(tsr_test_next(&s) % (1u << 30)));
            shift[i] = -8;
        }
        tsr_conv2d_params_t p = {.n = 1, .c_in = C, .h = H, .w = W, .c_out = C, .kh = 3, .kw = 3, .stride_h = 1,
                                 .stride_w = 1, .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1,
                                 .groups = G, .x_dtype = TSR_DT_UINT8, .x_zp = 128, .w_dtype = TSR_DT_UINT8,
                                 .w_zp = wzp, .w_zp_count = C};
        p.y_dtype = TSR_DT_INT8;
        p.y_zp = 3;
        p.mult = mult;
        p.shift = shift;
        p.rq_count = C;
        p.act_min = -128;
        p.act_max = 127;
        const size_t nx = (size_t)C * H * W, nw = (size_t)C * cg * K;
        uint8_t x[24 * 30], w[24 * 12 * 9], wf[24 * 24 * 9], y[24 * 30], yf[24 * 30];
        int32_t bias[24];
        for (size_t i = 0; i < nx; i++)
            x[i] = (uint8_t)tsr_test_next(&s);
        for (size_t i = 0; i < nw; i++)
            w[i] = (uint8_t)(28 + (int)(tsr_test_next(&s) % 200));
        for (int i = 0; i < C; i++)
            bias[i] = (int32_t)(tsr_test_next(&s) % 4000) - 2000;
        for (int o = 0; o < C; o++)
            for (int i = 0; i < C; i++)
                for (int k = 0; k < K; k++)
                    wf[((size_t)o * C + i) * K + k] = i / cg == o / cg ? w[((size_t)o * cg + i % cg) * K + k]
                                                                         : (uint8_t)wzp[o];
        char op[32], opf[32];
        double macs = 0, macsf = 0;
        if (grouped_graph_run(dev, &p, w, bias, x, y, op, sizeof op, &macs))
            fail_msg("C %d groups %d: %s", C, G, tsr_errmsg());
        tsr_conv2d_params_t pf = p;
        pf.groups = 1;
        if (grouped_graph_run(dev, &pf, wf, bias, x, yf, opf, sizeof opf, &macsf))
            fail_msg("C %d expanded: %s", C, tsr_errmsg());
        for (size_t i = 0; i < nx; i++)
            if (y[i] != yf[i])
                fail_msg("C %d groups %d: element %zu is %d, the expanded conv %d", C, G, i, (int8_t)y[i],
                         (int8_t)yf[i]);
        const double grouped = (double)C * H * W * cg * K;
        printf("  C %d groups %d: layer %s, %.0f MACs (grouped %.0f)\n", C, G, op, macs, grouped);
        assert_string_equal(op, t == 0 ? "gconv" : "conv");
        assert_true(macs == (t == 0 ? grouped : G * grouped));
        assert_true(macsf == G * grouped);
    }
    tsr_device_close(dev);
}

/* A conv2d plan over device tensors rebound to other tensors (relocation
 * only) reads the new input and writes the new output: equal to the
 * one-shot API (itself checked against the reference by test_conv2d) on
 * the new data, and the old output untouched. */
static void test_conv_bind(void **state)
{
    (void)state;
    tsr_device_t *dev = tsr_test_open("default", seed());
    const tsr_config_t *cfg = tsr_device_config(dev);
    int32_t zp = 0, mult[24], shift[24];
    for (int i = 0; i < 24; i++) {
        mult[i] = 0x50000000 + i * 1000;
        shift[i] = -9;
    }
    tsr_conv2d_params_t p = {.n = 1, .c_in = 20, .h = 9, .w = 7, .c_out = 24, .kh = 3, .kw = 3, .stride_h = 2,
                             .stride_w = 1, .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .groups = 1,
                             .x_dtype = TSR_DT_UINT8, .x_zp = 120, .w_dtype = TSR_DT_INT8, .w_zp = &zp,
                             .w_zp_count = 1, .y_dtype = TSR_DT_UINT8, .y_zp = 10, .mult = mult, .shift = shift,
                             .rq_count = 24, .act_min = 10, .act_max = 255};
    int oh, ow;
    assert_int_equal(tsr_conv2d_check(&p, &oh, &ow), 0);
    tsr_dtensor_t x[2], y[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(tsr_dtensor_init(cfg, 1, 20, 9, 7, TSR_DT_UINT8, 120, &x[i]), 0);
        assert_int_equal(tsr_dtensor_init(cfg, 1, 24, oh, ow, TSR_DT_UINT8, 10, &y[i]), 0);
        assert_int_equal(tsr_dtensor_alloc(dev, &x[i]), 0);
        assert_int_equal(tsr_dtensor_alloc(dev, &y[i]), 0);
    }
    static uint8_t xd[2][20 * 63], yd[2][24 * 5 * 7], want[2][24 * 5 * 7];
    static int8_t w[24 * 20 * 9];
    uint64_t s = seed() + 5;
    for (size_t i = 0; i < sizeof w; i++)
        w[i] = (int8_t)tsr_test_next(&s);
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < sizeof xd[k]; i++)
            xd[k][i] = (uint8_t)tsr_test_next(&s);
        if (tsr_conv2d_run(dev, &p, xd[k], w, NULL, want[k]))
            fail_msg("one-shot conv: %s", tsr_errmsg());
        assert_int_equal(tsr_dtensor_write_nchw(dev, &x[k], xd[k]), 0);
    }
    tsr_conv2d_plan_t pl;
    if (tsr_conv2d_plan_tensors(dev, &p, &x[0], &y[0], &pl))
        fail_msg("plan over tensors: %s", tsr_errmsg());
    assert_int_equal(tsr_conv2d_write_weights(dev, &pl, w, NULL), 0);
    assert_int_equal(tsr_conv2d_exec(dev, &pl), 0);
    assert_int_equal(tsr_conv2d_bind(dev, &pl, &x[1], &y[1]), 0);
    assert_int_equal(tsr_conv2d_exec(dev, &pl), 0);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(tsr_dtensor_read_nchw(dev, &y[k], yd[k]), 0);
        for (size_t i = 0; i < sizeof yd[k]; i++)
            if (yd[k][i] != want[k][i])
                fail_msg("conv over tensors, %s: flat %zu is %d, the one-shot conv gives %d",
                         k ? "after rebinding" : "first binding", i, yd[k][i], want[k][i]);
    }
    /* a tensor of another layout is refused */
    tsr_dtensor_t small;
    assert_int_equal(tsr_dtensor_init(cfg, 1, 20, 8, 7, TSR_DT_UINT8, 120, &small), 0);
    small.addr = x[0].addr;
    assert_int_equal(tsr_conv2d_bind(dev, &pl, &small, &y[0]), TSR_EINVAL);
    tsr_conv2d_plan_free(dev, &pl);
    for (int i = 0; i < 2; i++) {
        tsr_dtensor_free(dev, &x[i]);
        tsr_dtensor_free(dev, &y[i]);
    }
    tsr_device_close(dev);
}

/* The operator registry (tsr_op.h): the network description's, the
 * graph's and the runner's kinds are its values, every row answers for
 * its kind, and a kind that names no node operator is refused by name. */
/* ------------------------------------------------------------ concat */

/* A conv from x to cout channels of type dt and zero point zp (whole range: no clamp). */
static int rg_conv_to(rg_t *r, int x, int cout, int k, tsr_dtype_e dt, int32_t zp)
{
    const int y = rg_conv(r, x, 0, cout, k, 1, k / 2);
    tsr_nd_node_t *n = &r->nd.nodes[r->nd.nnodes - 1];
    n->conv.y_dtype = r->nd.tensors[y].dtype = dt;
    n->conv.y_zp = r->nd.tensors[y].zp = zp;
    n->conv.act_min = dt == TSR_DT_UINT8 ? 0 : -128;
    n->conv.act_max = n->conv.act_min + 255;
    return y;
}

static int rg_concat(rg_t *r, int a, int b)
{
    const tsr_nd_tensor_t A = r->nd.tensors[a], B = r->nd.tensors[b];
    const int y = rg_tensor(r, A.n, A.c + B.c, A.h, A.w, A.dtype, A.zp);
    tsr_nd_node_t *n = rg_node(r, TSR_ND_CONCAT, a, b);
    n->concat = (tsr_concat_params_t){A.n, A.h, A.w, A.c, B.c, A.dtype, A.zp};
    n->out = y;
    return y;
}

/* A random network of concats: branches (convs, a max pool, an act table)
 * of a conv over the input joined in chains of 2 to 4 inputs (channel
 * counts multiples of BLOCK but the last's), a feature reused by a later
 * concat (DenseNet), sometimes the graph input itself or one tensor twice
 * as a concat's input (both copied on the device first), convs reading the
 * concats. */
static void rg_concat_net(uint64_t s, int block, tsr_netdesc_t *out)
{
    rg_t r;
    memset(&r, 0, sizeof r);
    r.s = s;
    tsr_dtype_e dt;
    int32_t zp;
    rnd_dtype(&r, &dt, &zp);
    const int h = rnd(&r, 3, 9), w = rnd(&r, 3, 9), cin = block * rnd(&r, 1, 2);
    const int x = rg_tensor(&r, 1, cin, h, w, dt, zp);
    const int stem = rg_conv_to(&r, x, block * rnd(&r, 1, 2), 1, dt, zp);
    int feat = stem, prev = -1;
    for (int blk = 0; blk < 2; blk++) {
        const int nin = rnd(&r, 2, 4);
        int cat = -1;
        for (int i = 0; i < nin; i++) {
            const int last = i == nin - 1;
            const int c = last ? rnd(&r, 1, 2 * block + 3) : block * rnd(&r, 1, 2);
            int b;
            const int kind = rnd(&r, 0, 9);
            if (kind == 0 && r.nd.tensors[x].c % block == 0 && !last)
                b = x; /* the graph input: copied */
            else if (kind == 1 && prev >= 0 && (r.nd.tensors[prev].c % block == 0 || last))
                b = prev; /* a slice of the previous concat already: copied */
            else if (kind == 2 && r.nd.tensors[feat].c % block == 0)
                b = feat;
            else {
                b = rg_conv_to(&r, feat, c, rnd(&r, 0, 1) ? 1 : 3, dt, zp);
                if (kind == 3) { /* through a max pool that keeps the shape */
                    tsr_nd_node_t *n = rg_node(&r, TSR_ND_POOL, b, -1);
                    const tsr_nd_tensor_t B = r.nd.tensors[b];
                    n->pool = (tsr_pool_params_t){.kind = TSR_POOL_MAX, .n = 1, .c = B.c, .h = B.h, .w = B.w, .kh = 3,
                                                  .kw = 3, .stride_h = 1, .stride_w = 1, .pad_top = 1, .pad_left = 1,
                                                  .pad_bottom = 1, .pad_right = 1, .dtype = dt, .zp = zp};
                    n->out = b = rg_tensor(&r, 1, B.c, B.h, B.w, dt, zp);
                }
            }
            cat = cat < 0 ? b : rg_concat(&r, cat, b);
            if (kind == 4 && cat != b && !last && r.nd.tensors[cat].c % block == 0)
                cat = rg_concat(&r, cat, cat); /* one tensor twice */
        }
        prev = cat;
        feat = rg_conv_to(&r, cat, block * rnd(&r, 1, 2), 1, dt, zp);
    }
    r.nd.output = rg_conv_to(&r, prev, rnd(&r, 1, 20), 3, dt, zp);
    snprintf(r.nd.name, sizeof r.nd.name, "concat");
    *out = r.nd;
}

/* Concats as views on the device: random concat networks against the
 * plain-C reference (tsr_netref.c), every tensor (KEEP_ALL: each input
 * read back from its slice) and with buffers reused between layers (the
 * output only: a slice's producer must not overwrite a live tensor, nor a
 * later tensor the concat's output); the report runs no layer for a
 * concat; a channel offset that is not a multiple of BLOCK and a batch of
 * several batch blocks are refused naming the node. */
static void test_concat(void **state)
{
    (void)state;
    const uint64_t s0 = seed();
    const char *cfgs[2] = {"default", "tiny"};
    int fails = 0, count = is_rtl() ? 4 : 30;
    for (int c = 0; c < 2; c++) {
        tsr_device_t *dev = tsr_test_open(cfgs[c], s0);
        const int block = tsr_device_config(dev)->block_out;
        for (int i = 0; i < count; i++) {
            const uint64_t s = s0 * 7919u + (uint64_t)i;
            tsr_netdesc_t nd;
            rg_concat_net(s, block, &nd);
            if (tsr_netdesc_validate(&nd))
                fail_msg("concat net %d: invalid desc: %s", i, tsr_errmsg());
            char label[64];
            snprintf(label, sizeof label, "%s concat net %d (%d nodes)", cfgs[c], i, nd.nnodes);
            fails += check_net(dev, &nd, s, label, TSR_GRAPH_KEEP_ALL, NULL);
            tsr_graph_totals_t tot;
            fails += check_net(dev, &nd, s, label, 0, &tot);
            int cats = 0, convs = 0;
            for (int k = 0; k < nd.nnodes; k++)
                cats += nd.nodes[k].kind == TSR_ND_CONCAT, convs += nd.nodes[k].kind != TSR_ND_CONCAT;
            if (tot.layers < convs || !cats)
                fail_msg("%s: %d layers for %d kernels (the concats run nothing, copies add layers)", label,
                         tot.layers, convs);
            tsr_netdesc_free(&nd);
        }
        tsr_graph_t *g = NULL;
        assert_int_equal(tsr_graph_create(tsr_device_config(dev), &g), 0);
        int t[6];
        assert_int_equal(tsr_graph_tensor(g, 1, block + 1, 4, 4, TSR_DT_INT8, 0, &t[0]), 0);
        assert_int_equal(tsr_graph_tensor(g, 1, 3, 4, 4, TSR_DT_INT8, 0, &t[1]), 0);
        assert_int_equal(tsr_graph_tensor(g, 1, block + 4, 4, 4, TSR_DT_INT8, 0, &t[2]), 0);
        expect_err(tsr_graph_concat(g, "unaligned", t[0], t[1], t[2]), "unaligned", "a concat at channel BLOCK + 1");
        assert_non_null(strstr(tsr_errmsg(), "not a multiple of BLOCK"));
        assert_int_equal(tsr_graph_tensor(g, 1, block, 4, 4, TSR_DT_INT8, 0, &t[3]), 0);
        assert_int_equal(tsr_graph_tensor(g, 1, block + 3, 4, 4, TSR_DT_INT8, 1, &t[4]), 0);
        expect_err(tsr_graph_concat(g, "zp", t[3], t[1], t[4]), "zp", "a concat changing the zero point");
        assert_int_equal(tsr_graph_tensor(g, 2, block, 4, 4, TSR_DT_INT8, 0, &t[5]), 0);
        if (tsr_device_config(dev)->batch < 2)
            expect_err(tsr_graph_concat(g, "batch", t[5], t[5], t[0]), "batch", "a concat of batch 2");
        tsr_graph_free(g);
        tsr_device_close(dev);
    }
    if (fails)
        fail_msg("%d concat networks differ from the reference (above; seed %llu)", fails, (unsigned long long)s0);
}

static void test_registry(void **state)
{
    (void)state;
    const int same[5][4] = {{TSR_ND_CONV, TSR_GOP_CONV, TSR_OPRUN_CONV2D, TSR_OPK_CONV},
                            {TSR_ND_DENSE, TSR_GOP_DENSE, TSR_OPRUN_DENSE, TSR_OPK_DENSE},
                            {TSR_ND_POOL, TSR_GOP_POOL, TSR_OPRUN_POOL, TSR_OPK_POOL},
                            {TSR_ND_ADD, TSR_GOP_ADD, TSR_OPRUN_ADD, TSR_OPK_ADD},
                            {TSR_ND_CLIP, TSR_GOP_CLIP, TSR_OPRUN_CLIP, TSR_OPK_CLIP}};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++)
            assert_int_equal(same[i][j], same[i][3]);
    assert_int_equal(TSR_GOP_RESHAPE, TSR_OPK_RESHAPE);
    assert_int_equal(TSR_ND_ACT, TSR_OPK_ACT);
    assert_int_equal(TSR_GOP_ACT, TSR_OPK_ACT);
    assert_string_equal(tsr_op_name(TSR_OPK_ACT), "act");
    assert_null(tsr_op_def(0));
    assert_null(tsr_op_def(TSR_OPK_COUNT));
    assert_string_equal(tsr_op_name(-1), "?");
    for (int k = 1; k < TSR_OPK_COUNT; k++) {
        const tsr_op_def_t *d = tsr_op_def(k);
        assert_non_null(d);
        assert_int_equal(d->kind, k);
        assert_true(d->n_inputs == (k == TSR_OPK_ADD || k == TSR_OPK_MUL || k == TSR_OPK_CONCAT ? 2 : 1)); /* (gavg: 1) */
        assert_true(d->has_weights == (k == TSR_OPK_CONV || k == TSR_OPK_DENSE));
        assert_true(!d->check == (k == TSR_OPK_RESHAPE));
    }
    assert_string_equal(tsr_op_name(TSR_OPK_ADD), "add");

    /* a desc node of a kind no node can have: refused, naming the node */
    tsr_device_t *dev = tsr_test_open("default", 1);
    rg_t r;
    memset(&r, 0, sizeof r);
    r.s = 11;
    int x = rg_tensor(&r, 1, 8, 6, 6, TSR_DT_INT8, 0);
    int y = rg_clip(&r, x);
    r.nd.output = y;
    assert_int_equal(tsr_netdesc_validate(&r.nd), 0);
    const int bad[3] = {0, TSR_OPK_RESHAPE, 99};
    for (int i = 0; i < 3; i++) {
        r.nd.nodes[0].kind = (tsr_nd_kind_e)bad[i];
        tsr_graph_t *g = NULL;
        expect_err(tsr_netdesc_validate(&r.nd), "n0", "netdesc: unknown kind");
        expect_err(tsr_graph_from_netdesc(tsr_device_config(dev), &r.nd, &g), "n0", "graph: unknown kind");
        assert_null(g);
        if (!strstr(tsr_errmsg(), "unknown kind"))
            fail_msg("kind %d refused without saying why: %s", bad[i], tsr_errmsg());
    }
    r.nd.nodes[0].kind = TSR_ND_CLIP;
    /* the runner refuses an operator that runs no kernel */
    uint8_t in[4] = {0}, out[4];
    assert_int_equal(tsr_oprun(dev, TSR_GOP_RESHAPE, &r.nd.nodes[0].clip, in, NULL, NULL, out, NULL), TSR_EINVAL);
    if (!strstr(tsr_errmsg(), "unknown operator"))
        fail_msg("reshape run without saying why: %s", tsr_errmsg());
    tsr_netdesc_free(&r.nd);
    tsr_device_close(dev);
}

int main(void)
{
    printf("test_graph seed %llu (TSR_GRAPH_SEED), backend %s\n", (unsigned long long)seed(), tsr_test_backend());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_act_nodes),
        cmocka_unit_test(test_bad_graphs),
        cmocka_unit_test(test_plan_failure_frees),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_requantize),
        cmocka_unit_test(test_conv_bind),
        cmocka_unit_test(test_grouped_conv),
        cmocka_unit_test(test_small_resnet),
        cmocka_unit_test(test_random_graphs),
        cmocka_unit_test(test_fuse_fallback),
        cmocka_unit_test(test_resnet18_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
