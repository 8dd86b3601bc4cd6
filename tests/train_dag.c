/*
 * train_dag: on-device training of a trainable part that is a DAG with
 * the layer kinds of a zoo model's last block (issue 27), on the small
 * residual model scripts/train/make_resblock.py writes (conv0 -> [conv1 ->
 * relu -> conv2] + skip -> relu -> depthwise conv stride 2 -> relu6 ->
 * global average pool -> fc, QDQ by scripts/zoo/qdq.py; the directory in
 * TSR_RESBLOCK_DIR, the ctest fixture train_resblock_model makes it).
 *
 *  - test_dag_grads_vs_float: one step's weight gradients of every trainable
 *    layer (from conv0, the part's input the model's; and from conv1, whose
 *    input the residual add also reads) against a plain-C double reference
 *    written here from the formulas, layer kind by layer kind: the same
 *    quantized activations (the trainer's), the dequantized weights, exact
 *    softmax cross-entropy, the masks of the folded Relu/ReLU6 and of the
 *    add's clamp, max/average pool routing, the add's gradient to both of its
 *    inputs summed where the branches meet, backward without quantization.
 *    Every element within the error the trainer's int8 roundings allow (s/2
 *    per quantized gradient element, carried through the sums and the
 *    weights), and the gradients pointing the same way (cosine > 0.9999: with
 *    the skip branch's gradient lost at the add, conv0's is 0.99972).
 *    And the model with its ReLU6 kept as a Clip node (resblock_clip_qdq.onnx):
 *    the outputs on the Clip's 6, the uint8 type's 255, masked.
 *  - test_dag_device_equals_host: the device's backward (jit/tsr_grad.h:
 *    strided and depthwise convs) and the host reference, bit for bit.
 *  - test_dag_refusals: a part whose add reads a tensor computed before it.
 *  - test_dag_device_update_per_channel: --update device on qdq.py's per-channel
 *    weight scales, one step against the float update on each channel's scale.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_npy.h"
#include "tsr_testenv.h"
#include "tsr_train.h"

static char g_model[4096], g_clip_model[4096], g_data[4096], g_labels[4096];

static tsr_device_t *open_dev(void)
{
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    if (tsr_test_config("default", &cfg))
        fail_msg("config: %s", tsr_errmsg());
    if (tsr_device_open("fsim", &cfg, NULL, &dev))
        fail_msg("open: %s", tsr_errmsg());
    return dev;
}

static tsr_trainer_t *open_model(tsr_device_t *dev, const char *model, const char *layers, int batch, int host)
{
    tsr_train_opts_t o = {.trainable = layers, .epochs = 1, .batch = batch, .lr = 0.001, .momentum = 0.9,
                          .seed = 1, .host_backward = host};
    tsr_trainer_t *tr = NULL;
    if (tsr_train_open(model, dev, &o, &tr))
        fail_msg("tsr_train_open %s: %s", layers, tsr_errmsg());
    return tr;
}

static tsr_trainer_t *open_trainer(tsr_device_t *dev, const char *layers, int batch, int host)
{
    return open_model(dev, g_model, layers, batch, host);
}

static int32_t get(tsr_dtype_e d, const uint8_t *p, size_t i)
{
    return d == TSR_DT_INT8 ? (int32_t)(int8_t)p[i] : (int32_t)p[i];
}

static double cosine(const float *a, const double *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++)
        ab += a[i] * b[i], aa += (double)a[i] * a[i], bb += b[i] * b[i];
    return ab / sqrt(aa * bb + 1e-300);
}

/* The output dtype and the input dtype of a layer. */
static tsr_dtype_e ydt(const tsr_onnx_lowered_t *L)
{
    switch (L->kind) {
    case TSR_OXL_CONV: return L->conv.y_dtype;
    case TSR_OXL_DENSE: return L->dense.y_dtype;
    case TSR_OXL_ADD: return L->add.y.dtype;
    case TSR_OXL_AVGPOOL: return L->avg_conv ? L->conv.y_dtype : L->pool.dtype;
    default: return L->pool.dtype;
    }
}

static tsr_dtype_e xdt(const tsr_onnx_lowered_t *L)
{
    return L->kind == TSR_OXL_CONV ? L->conv.x_dtype : L->kind == TSR_OXL_DENSE ? L->dense.x_dtype : L->pool.dtype;
}

/* One step of the part named by layers; every trainable layer's dW against the reference. With
 * want_clip: a layer with a folded Clip whose outputs sit on its high end in this batch. */
static void check_grads(const char *model, const char *layers, int expect_layers, int want_clip)
{
    tsr_device_t *dev = open_dev();
    const int n = 16;
    tsr_trainer_t *tr = open_model(dev, model, layers, n, 0);
    int clip_hits = 0;
    tsr_tensor_t x = {0}, y = {0};
    if (tsr_npy_read(g_data, &x) || tsr_npy_read(g_labels, &y))
        fail_msg("%s", tsr_errmsg());
    double loss = 0;
    if (tsr_train_grads(tr, &x, &y, n, &loss))
        fail_msg("tsr_train_grads: %s", tsr_errmsg());
    const int nl = tsr_train_nlayers(tr);
    assert_int_equal(nl, expect_layers);
    tsr_train_view_t *v = calloc((size_t)nl, sizeof *v);
    double **G = calloc((size_t)nl, sizeof *G), **E = calloc((size_t)nl, sizeof *E);
    int kinds = 0;
    for (int j = 0; j < nl; j++) {
        assert_int_equal(tsr_train_view(tr, j, &v[j]), 0);
        G[j] = calloc((size_t)n * v[j].y_elems, sizeof **G);
        E[j] = calloc((size_t)n * v[j].y_elems, sizeof **E);
        kinds |= 1 << v[j].L->kind;
    }
    /* the model's kinds are all there: conv (groups 1 and depthwise), dense, add, average pool */
    assert_true(kinds & (1 << TSR_OXL_ADD));
    assert_true(kinds & (1 << TSR_OXL_AVGPOOL));
    float osc;
    int32_t ozp;
    tsr_train_logits_q(tr, &osc, &ozp);
    const tsr_train_view_t *vl = &v[nl - 1];
    const int C = (int)vl->y_elems;
    double rloss = 0;
    for (int s = 0; s < n; s++) {
        double z[64], mx = -1e300, sum = 0;
        assert_true(C <= 64);
        for (int c = 0; c < C; c++)
            z[c] = ((double)get(ydt(vl->L), vl->y, (size_t)s * C + c) - ozp) * osc, mx = fmax(mx, z[c]);
        for (int c = 0; c < C; c++)
            sum += exp(z[c] - mx);
        const int lab = y.dtype == TSR_DT_INT32 ? ((const int32_t *)y.data)[s] : (int)((const int64_t *)y.data)[s];
        rloss += -(z[lab] - mx - log(sum)) / n;
        for (int c = 0; c < C; c++)
            G[nl - 1][s * C + c] = (exp(z[c] - mx) / sum - (c == lab)) / n;
    }
    assert_true(fabs(rloss - loss) < 1e-4);
    int bad = 0, checked = 0, dw_seen = 0;
    for (int j = nl - 1; j >= 0; j--) {
        const tsr_train_view_t *V = &v[j];
        const tsr_onnx_lowered_t *L = V->L;
        double *g = G[j], *e = E[j];
        const size_t ny = (size_t)n * V->y_elems;
        /* the folded activation's mask (an add's clamp is a Relu when its low end is real 0) */
        const tsr_dtype_e yd = ydt(L);
        const int32_t tmin = yd == TSR_DT_UINT8 ? 0 : -128, tmax = yd == TSR_DT_UINT8 ? 255 : 127;
        /* a Relu: folded, or removed by the quantizer where the output's range starts at real 0 (the
           float model's Relu after conv0, conv1 and the add: uint8 with zero point 0) */
        const int relu = L->kind == TSR_OXL_MAXPOOL   ? 0
                         : L->kind == TSR_OXL_AVGPOOL ? L->avg_conv && L->relu /* (an average of inputs >= 0 that
                                                                                  rounds to 0 is no clamp) */
                                                      : L->relu || V->act_min > tmin ||
                                                            (double)(V->act_min - V->y_zp) * V->y_scale == 0;
        int at_hi = 0; /* outputs on a folded Clip's high bound (ReLU6's 6: the type's maximum here) */
        for (size_t i = 0; (relu || L->clip) && i < ny; i++) {
            const int32_t q = get(yd, V->y, i);
            if ((relu && q <= V->act_min) || ((L->clip || V->act_max < tmax) && q >= V->act_max))
                g[i] = 0, e[i] = 0, at_hi += q >= V->act_max;
        }
        clip_hits += at_hi;
        if (L->clip)
            print_message("%s: a folded Clip, %d of %zu outputs on its high bound %d\n", L->node, at_hi, ny,
                          V->act_max);
        double *gx = V->src[0] >= 0 ? G[V->src[0]] : NULL, *ex = V->src[0] >= 0 ? E[V->src[0]] : NULL;
        if (L->kind == TSR_OXL_ADD) {
            for (int k = 0; k < 2; k++)
                if (V->src[k] >= 0)
                    for (size_t i = 0; i < ny; i++)
                        G[V->src[k]][i] += g[i], E[V->src[k]][i] += e[i];
            continue;
        }
        if (L->kind == TSR_OXL_MAXPOOL || L->kind == TSR_OXL_AVGPOOL) {
            const tsr_pool_params_t *p = &L->pool;
            const int glob = p->kind == TSR_POOL_GLOBAL_AVG, H = p->h, W = p->w, PC = p->c;
            const int kh = glob ? H : p->kh, kw = glob ? W : p->kw, sh = glob ? 1 : p->stride_h,
                      sw = glob ? 1 : p->stride_w, pt = glob ? 0 : p->pad_top, pl = glob ? 0 : p->pad_left;
            const int OH = glob ? 1 : (H + p->pad_top + p->pad_bottom - kh) / sh + 1;
            const int OW = glob ? 1 : (W + p->pad_left + p->pad_right - kw) / sw + 1;
            assert_int_equal((size_t)PC * OH * OW, V->y_elems);
            if (!gx)
                continue;
            for (int s = 0; s < n; s++)
                for (int c = 0; c < PC; c++)
                    for (int oy = 0; oy < OH; oy++)
                        for (int ox = 0; ox < OW; ox++) {
                            const size_t o = (((size_t)s * PC + c) * OH + oy) * OW + ox;
                            int cnt = 0, best = INT32_MIN;
                            size_t at = 0;
                            for (int ky = 0; ky < kh; ky++)
                                for (int kx = 0; kx < kw; kx++) {
                                    const int iy = oy * sh + ky - pt, ix = ox * sw + kx - pl;
                                    if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                        continue;
                                    const size_t i = (((size_t)s * PC + c) * H + iy) * W + ix;
                                    const int32_t q = get(p->dtype, V->x, i);
                                    cnt++;
                                    if (q > best)
                                        best = q, at = i;
                                }
                            if (L->kind == TSR_OXL_MAXPOOL) {
                                gx[at] += g[o], ex[at] += e[o];
                                continue;
                            }
                            if (glob || p->count_include_pad)
                                cnt = kh * kw;
                            for (int ky = 0; ky < kh; ky++)
                                for (int kx = 0; kx < kw; kx++) {
                                    const int iy = oy * sh + ky - pt, ix = ox * sw + kx - pl;
                                    if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                        continue;
                                    const size_t i = (((size_t)s * PC + c) * H + iy) * W + ix;
                                    gx[i] += g[o] / cnt, ex[i] += e[o] / cnt;
                                }
                        }
            continue;
        }
        /* conv (any groups, stride, padding) and dense (a 1x1 conv over a 1x1 input of K channels) */
        const int dense = L->kind == TSR_OXL_DENSE;
        const tsr_conv2d_params_t *cp = &L->conv;
        const int O = V->m, CI = dense ? V->k : cp->c_in, KH = dense ? 1 : cp->kh, KW = dense ? 1 : cp->kw;
        const int IH = dense ? 1 : cp->h, IW = dense ? 1 : cp->w, G_ = dense ? 1 : cp->groups;
        const int sh = dense ? 1 : cp->stride_h, sw = dense ? 1 : cp->stride_w;
        const int pt = dense ? 0 : cp->pad_top, pl = dense ? 0 : cp->pad_left;
        const int OH = dense ? 1 : (IH + cp->pad_top + cp->pad_bottom - KH) / sh + 1;
        const int OW = dense ? 1 : (IW + cp->pad_left + cp->pad_right - KW) / sw + 1;
        const int CG = CI / G_, OG = O / G_;
        assert_int_equal(V->k, CG * KH * KW);
        assert_int_equal((size_t)O * OH * OW, V->y_elems);
        dw_seen |= G_ > 1;
        const size_t nw = (size_t)O * V->k;
        double *gw = calloc(nw, sizeof *gw), *bw = calloc(nw, sizeof *bw);
        const tsr_dtype_e xd = xdt(L);
        for (int s = 0; s < n; s++)
            for (int o = 0; o < O; o++)
                for (int oy = 0; oy < OH; oy++)
                    for (int ox = 0; ox < OW; ox++) {
                        const size_t yi = (((size_t)s * O + o) * OH + oy) * OW + ox;
                        if (!g[yi] && !e[yi])
                            continue;
                        const double ws = L->w_count > 1 ? L->w_scale[o] : L->w_scale[0];
                        for (int c = o / OG * CG; c < (o / OG + 1) * CG; c++)
                            for (int ky = 0; ky < KH; ky++)
                                for (int kx = 0; kx < KW; kx++) {
                                    const int iy = oy * sh + ky - pt, ix = ox * sw + kx - pl;
                                    if (iy < 0 || iy >= IH || ix < 0 || ix >= IW)
                                        continue;
                                    const size_t xi = (((size_t)s * CI + c) * IH + iy) * IW + ix;
                                    const size_t wi = (((size_t)o * CG + c % CG) * KH + ky) * KW + kx;
                                    const double xr = ((double)get(xd, V->x, xi) - V->x_zp) * V->x_scale;
                                    gw[wi] += g[yi] * xr;
                                    bw[wi] += (e[yi] + V->s_dy / 2) * fabs(xr);
                                    if (gx) { /* dX: the device's own error through the weights, plus the
                                                 rounding of dY (per tensor) or of dY * w_scale (per channel) */
                                        const double w = V->w[wi];
                                        gx[xi] += g[yi] * w;
                                        ex[xi] += fabs(w) * e[yi] +
                                                  (L->w_count > 1 ? fabs(w) / ws : fabs(w)) * V->s_dx / 2;
                                    }
                                }
                    }
        if (V->trainable) {
            double bn = 0, gn = 0;
            for (size_t i = 0; i < nw; i++) {
                bn += bw[i] * bw[i], gn += gw[i] * gw[i];
                if (fabs(gw[i] - V->gw[i]) > bw[i] * 1.001 + 1e-7 && bad++ < 10)
                    print_error("%s dW[%zu] %g, reference %g, bound %g\n", L->node, i, (double)V->gw[i], gw[i],
                                bw[i]);
            }
            const double cs = cosine(V->gw, gw, nw);
            print_message("%s (%s): dW cosine %.6f with the float reference, bound / gradient norm %.3f\n", L->node,
                          layers, cs, sqrt(bn / (gn + 1e-300)));
            /* (a lost skip gradient: conv0 0.99972, and 0.9947 with the removed ReLU6's mask; the first
               layer, whose bound carries every rounding after it, 0.99988 with that mask: the int8
               gradients of the 910 of 2048 dw outputs it zeroes no longer average out) */
            assert_true(cs > (j > 0 ? 0.9999 : 0.9998));
            assert_true(gn > 0);
            if (j > 0) /* the bounds are not vacuous (the first layer's carry every rounding after it) */
                assert_true(sqrt(bn / gn) < 0.5);
            checked++;
        }
        free(gw), free(bw);
    }
    assert_int_equal(bad, 0);
    assert_true(dw_seen);
    if (want_clip)
        assert_true(clip_hits > 0);
    assert_true(checked >= 4);
    for (int j = 0; j < nl; j++)
        free(G[j]), free(E[j]);
    free(G), free(E), free(v);
    tsr_tensor_free(&x), tsr_tensor_free(&y);
    tsr_train_free(tr);
    tsr_device_close(dev);
}

static void test_dag_grads_vs_float(void **state)
{
    (void)state;
    check_grads(g_model, "conv0,conv1,conv2,dw,fc", 7, 0); /* the part's input is the model's (quantized) */
    check_grads(g_model, "conv1,conv2,dw,fc", 6, 0);       /* ... is conv0's output, read by conv1 and the add */
    /* a ReLU6 kept as a Clip whose 6 is the uint8 output's 255: masked there (not the saturation's 1) */
    check_grads(g_clip_model, "conv1,conv2,dw,fc", 6, 1);
}

static void grads_of(const char *layers, int host, float **gw, size_t *nw)
{
    tsr_device_t *dev = open_dev();
    tsr_trainer_t *tr = open_trainer(dev, layers, 16, host);
    tsr_tensor_t x = {0}, y = {0};
    if (tsr_npy_read(g_data, &x) || tsr_npy_read(g_labels, &y))
        fail_msg("%s", tsr_errmsg());
    double loss;
    if (tsr_train_grads(tr, &x, &y, 16, &loss))
        fail_msg("tsr_train_grads: %s", tsr_errmsg());
    *nw = 0;
    for (int j = 0; j < tsr_train_nlayers(tr); j++) {
        tsr_train_view_t v;
        assert_int_equal(tsr_train_view(tr, j, &v), 0);
        if (!v.trainable)
            continue;
        *gw = realloc(*gw, sizeof(float) * (*nw + (size_t)v.m * v.k));
        memcpy(*gw + *nw, v.gw, sizeof(float) * (size_t)v.m * v.k);
        *nw += (size_t)v.m * v.k;
    }
    tsr_tensor_free(&x), tsr_tensor_free(&y);
    tsr_train_free(tr);
    tsr_device_close(dev);
}

static void test_dag_device_equals_host(void **state)
{
    (void)state;
    float *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    grads_of("conv0,conv1,conv2,dw,fc", 0, &a, &na);
    grads_of("conv0,conv1,conv2,dw,fc", 1, &b, &nb);
    assert_int_equal(na, nb);
    assert_true(na > 1000);
    assert_memory_equal(a, b, sizeof(float) * na);
    free(a), free(b);
}

/* The bias's reference of one --update device step (momentum 0 at the first: v = g): channel m's int32 bias,
 * on its own scale bs = x_scale * w_scale[m], becomes b/bs - lr gb/bs, rounded to nearest; the device's within
 * 1 count of it, as the weights' check allows. gb is the float sum of the real output gradient (the device sums
 * the int8 dy of scale s_dy, each within s_dy / 2 of it): a sixth of the channels land 1 off (the weights' 1%
 * is not asked); a layer's median step is up to ~160 counts, so a channel's multiplier or bias scale taken from
 * another channel (channel 0's) lands tens to hundreds of counts off. */
typedef struct bias_ref {
    int m;
    double *want, *step;
} bias_ref_t;

typedef struct bias_stat {
    int n, layers, moved, off;
    double maxerr, med;
} bias_stat_t;

static double bias_scale(const tsr_train_view_t *v, int m)
{
    return (double)v->L->x_scale * v->L->w_scale[m];
}

static void bias_ref(const tsr_train_view_t *v, double lr, bias_ref_t *r)
{
    if (!v->b || !v->L->bias)
        return;
    r->m = v->m;
    r->want = malloc(sizeof(double) * 2 * (size_t)v->m);
    assert_non_null(r->want);
    r->step = r->want + v->m;
    for (int m = 0; m < v->m; m++) {
        const double bs = bias_scale(v, m);
        r->step[m] = lr * v->gb[m] / bs;
        r->want[m] = (double)lrint(v->b[m] / bs) - r->step[m];
    }
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void bias_check(const tsr_train_view_t *v, int j, bias_ref_t *r, bias_stat_t *st)
{
    if (!r->want)
        return;
    st->layers++;
    for (int m = 0; m < r->m; m++, st->n++) {
        const double bs = bias_scale(v, m);
        const long got = lrint(v->b[m] / bs), q = lrint(r->want[m]);
        st->moved += got != lrint(r->want[m] + r->step[m]);
        st->off += got != q;
        st->maxerr = fmax(st->maxerr, fabs((double)got - r->want[m]));
        if (labs(got - q) > 1)
            fail_msg("layer %d bias %d: %ld counts, the float update %.3f (its step %.3f)", j, m, got, r->want[m],
                     r->step[m]);
        r->step[m] = fabs(r->step[m]);
    }
    qsort(r->step, (size_t)r->m, sizeof(double), cmp_double);
    st->med = fmax(st->med, r->step[r->m / 2]);
    free(r->want);
}

/* --update device on per-channel weight scales (qdq.py's, different per output channel): one step of 16
 * samples moves every layer's int8 weights where the float update w - lr g (v = g at the first step) on
 * the channel's own scale moves them, to within the fixed point's last rounding; fails when a channel's
 * multiplier is not its own (a per-tensor multiplier, or the channels' order crossed) */
static void test_dag_device_update_per_channel(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    tsr_tensor_t x = {0}, y = {0}, xs = {0}, ys = {0};
    if (tsr_npy_read(g_data, &x) || tsr_npy_read(g_labels, &y))
        fail_msg("%s", tsr_errmsg());
    int64_t shx[TSR_TENSOR_MAX_DIMS], shy[1] = {16};
    memcpy(shx, x.shape, sizeof(int64_t) * (size_t)x.ndim);
    shx[0] = 16;
    assert_int_equal(tsr_tensor_alloc(&xs, TSR_DT_FLOAT32, x.ndim, shx), 0);
    assert_int_equal(tsr_tensor_alloc(&ys, y.dtype, 1, shy), 0);
    memcpy(xs.data, x.data, xs.nbytes);
    memcpy(ys.data, y.data, ys.nbytes);
    const double lr = 0.05;
    tsr_train_opts_t o = {.trainable = "conv0,conv1,conv2,dw,fc", .epochs = 1, .batch = 16, .lr = lr,
                          .momentum = 0.9, .seed = 3, .device_update = 1, .logits_fixed = 1};
    tsr_trainer_t *tr = NULL;
    if (tsr_train_open(g_model, dev, &o, &tr))
        fail_msg("open: %s", tsr_errmsg());
    double loss;
    assert_int_equal(tsr_train_grads(tr, &xs, &ys, 16, &loss), 0);
    const int nl = tsr_train_nlayers(tr);
    double **want = calloc((size_t)nl, sizeof *want);
    bias_ref_t *wantb = calloc((size_t)nl, sizeof *wantb);
    tsr_train_view_t v;
    for (int j = 0; j < nl; j++) {
        tsr_train_view(tr, j, &v);
        if (!v.trainable)
            continue;
        assert_int_equal(v.L->w_count, v.m); /* per output channel */
        want[j] = malloc(sizeof(double) * (size_t)v.m * (size_t)v.k);
        for (size_t i = 0; i < (size_t)v.m * (size_t)v.k; i++) {
            const double ws = v.L->w_scale[i / (size_t)v.k];
            want[j][i] = (double)v.w[i] / ws - lr * v.gw[i] / ws;
        }
        bias_ref(&v, lr, &wantb[j]);
    }
    tsr_train_stats_t *st = calloc(1, sizeof *st);
    if (tsr_train_run(tr, &xs, &ys, st))
        fail_msg("run: %s", tsr_errmsg());
    int moved = 0, off = 0, n = 0, layers = 0;
    bias_stat_t bstat = {0};
    for (int j = 0; j < nl; j++) {
        if (!want[j])
            continue;
        tsr_train_view(tr, j, &v);
        layers++;
        for (size_t i = 0; i < (size_t)v.m * (size_t)v.k; i++, n++) {
            const double ws = v.L->w_scale[i / (size_t)v.k];
            const long q = lrint(fmin(fmax(want[j][i], -128), 127)), got = lrint(v.w[i] / ws);
            off += got != q;
            moved += got != lrint(want[j][i] + lr * v.gw[i] / ws);
            if (labs(got - q) > 1)
                fail_msg("layer %d weight %zu: %ld, the float update %.4f", j, i, got, want[j][i]);
        }
        free(want[j]);
        bias_check(&v, j, &wantb[j], &bstat);
    }
    print_message("--update device, per-channel scales, one step: %d layers, %d of %d weights moved, %d off the "
                  "float update by 1\n", layers, moved, n, off);
    assert_true(layers == 5 && moved >= 100 && off * 100 <= n);
    print_message("bias: %d channels of %d layers, %d moved (a layer's median step up to %.1f counts), %d off the float "
                  "update by 1 (at most %.2f counts from it)\n", bstat.n, bstat.layers, bstat.moved, bstat.med,
                  bstat.off, bstat.maxerr);
    assert_true(bstat.layers == 5 && bstat.moved * 10 >= bstat.n * 9);
    free(want), free(wantb), free(st);
    tsr_tensor_free(&x), tsr_tensor_free(&y), tsr_tensor_free(&xs), tsr_tensor_free(&ys);
    tsr_train_free(tr);
    tsr_device_close(dev);
}

static void test_dag_refusals(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    tsr_train_opts_t o = {.trainable = "conv2,dw,fc", .epochs = 1, .batch = 16, .lr = 0.001, .seed = 1};
    tsr_trainer_t *tr = NULL;
    assert_int_not_equal(tsr_train_open(g_model, dev, &o, &tr), 0);
    assert_null(tr);
    print_message("refused: %s\n", tsr_errmsg());
    assert_non_null(strstr(tsr_errmsg(), "\"/Add\" (Add) reads"));
    assert_non_null(strstr(tsr_errmsg(), "train from an earlier layer"));
    tsr_device_close(dev);
}

int main(void)
{
    const char *d = getenv("TSR_RESBLOCK_DIR");
    if (!d || !d[0]) {
        fprintf(stderr, "train_dag: set TSR_RESBLOCK_DIR to scripts/train/make_resblock.py's directory "
                        "(ctest's fixture train_resblock_model does)\n");
        return 1;
    }
    snprintf(g_model, sizeof g_model, "%s/resblock_qdq.onnx", d);
    snprintf(g_clip_model, sizeof g_clip_model, "%s/resblock_clip_qdq.onnx", d);
    snprintf(g_data, sizeof g_data, "%s/train_x.npy", d);
    snprintf(g_labels, sizeof g_labels, "%s/train_y.npy", d);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dag_grads_vs_float),
        cmocka_unit_test(test_dag_device_equals_host),
        cmocka_unit_test(test_dag_refusals),
        cmocka_unit_test(test_dag_device_update_per_channel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
