/*
 * tsr_netdesc: a quantized CNN as plain data (tsr_netdesc.h), and the
 * ResNet-18 generator.
 *
 * Quantization of the generated network (all zero points of weights 0):
 *   input              uint8, zero point 128, scale 1/128 (real [-1, 1))
 *   conv + relu        uint8, zero point 0, clamp [0, 255] (relu = the clamp
 *                      at the real zero); stem conv1 and every block's conv1
 *   conv without relu  int8, zero point 0, clamp [-128, 127]; every block's
 *                      conv2 and downsample conv (they feed the residual add)
 *   add + relu         uint8, zero point 0, act_min 0 = y_zp (relu fused as
 *                      the add's clamp), TFLite ADD parameters from scales
 *   maxpool, avgpool   the input's dtype, zero point and scale (pools do not
 *                      rescale)
 *   fc                 int8, zero point 0, full range (logits)
 * Weights int8, symmetric per output channel; biases int32 in units of
 * x_scale * w_scale[o]; requantization per output channel.
 *
 * Weights. A layer with fan-in K draws real weights uniformly from
 * [-a, a] * g_o, a = sqrt(6 / K) (He: variance 2 / K, what keeps the
 * magnitude of relu activations from layer to layer) and g_o in [0.7, 1.3]
 * per output channel (a folded batch-norm gain, so channels differ and the
 * per-channel requantization matters). w_scale[o] = max_k |w_real| / 127
 * and w_q = round(w_real / w_scale[o]) (TFLite's symmetric per-channel
 * quantization). The real bias is uniform in [-0.5, 0.5] times the
 * channel's standard deviation (below) and quantized to
 * round(b / (x_scale * w_scale[o])).
 *
 * Calibration (why outputs neither saturate nor waste the range). There is
 * no float model to measure, so every tensor carries a statistical model of
 * its real values, per channel: a Gaussian N(m, s^2) and whether a relu
 * follows it (then the values are max(0, N(m, s^2)), whose mean and second
 * moment have closed forms, relu_moments). Propagation, for random
 * weights independent of the data:
 *   conv/fc  mean_o = b_o + SUM_{c,taps} w_real * mean_c,
 *            var_o = SUM_{c,taps} w_real^2 * var_c (cross terms average out
 *            over random weights), over the taps inside the input at the
 *            best-covered output position (padding is the real 0: a 3x3
 *            conv over a 1x1 input sees one tap in nine).
 *   add      means and variances add (branch and shortcut nearly
 *            uncorrelated under random weights), then relu.
 *   maxpool  3x3: the max of 9 neighbours of N(m, s^2) is modelled as
 *            N(m + 1.2 s, (0.6 s)^2) (between the iid order statistic,
 *            m + 1.49 s, and fully correlated neighbours, m), then relu.
 *   avgpool  mean kept, variance / (H*W) (positions nearly independent).
 * The input is the uniform random image of tsr_netdesc_random_input: real
 * mean 0, variance 1/3. A conv/fc/add output scale is then chosen so that
 * the largest channel's m + 4 s (|m| + 4 s for signed outputs) is the top
 * of the range: 4 standard deviations fit (a Gaussian exceeds that with
 * probability 3e-5; the margin covers the model's error where few channels
 * or taps make the random-weight averages loose, as in the small
 * networks), and channels with a large mean do not clip.
 * Requantization (mult, shift) = QuantizeMultiplier(x_scale * w_scale[o] /
 * y_scale) (tsr_quant_requant_params); add parameters from the three scales
 * (tsr_quant_add_params). tests/test_netref.c measures the result on the
 * reference: few values at a clamp bound, none of the tensors constant.
 */
#include "tsr_netdesc.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_quant.h"

/* Standard deviations that fit between a channel's mean and the top of the
 * range (the calibration above). */
#define ND_SIGMAS 4.0

/* Statistical model of one channel: N(m, s^2), relu'd when relu is 1. */
typedef struct nd_stat {
    double m, s;
    int relu;
} nd_stat_t;

/* Generator state: the desc under construction and per-tensor statistics. */
typedef struct nd_gen {
    tsr_netdesc_t *nd;
    int cap_t, cap_n;     /* allocated tensors / nodes */
    nd_stat_t **st;       /* [tensor][channel] */
    uint64_t rng;         /* xorshift64* state */
} nd_gen_t;

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64* (Vigna); the state is never 0 (seeded through nd_seed) */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static uint64_t nd_seed(uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    return s ? s : 1;
}

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* Mean and variance of the values a channel model describes. */
static void stat_moments(const nd_stat_t *st, double *mean, double *var)
{
    if (!st->relu) {
        *mean = st->m;
        *var = st->s * st->s;
        return;
    }
    /* max(0, Z), Z ~ N(m, s^2): E = m Phi(a) + s phi(a), E2 = (m^2 + s^2) Phi(a) + m s phi(a), a = m / s */
    double s = st->s > 1e-12 ? st->s : 1e-12, a = st->m / s;
    double phi = exp(-0.5 * a * a) / sqrt(2.0 * 3.14159265358979323846), Phi = 0.5 * erfc(-a / sqrt(2.0));
    double e1 = st->m * Phi + s * phi, e2 = (st->m * st->m + s * s) * Phi + st->m * s * phi;
    *mean = e1;
    *var = e2 - e1 * e1 > 0 ? e2 - e1 * e1 : 0;
}

static int add_tensor(nd_gen_t *g, int n, int c, int h, int w, tsr_dtype_e dt, int32_t zp, double scale)
{
    tsr_netdesc_t *nd = g->nd;
    if (nd->ntensors == g->cap_t) {
        int cap = g->cap_t ? 2 * g->cap_t : 16;
        tsr_nd_tensor_t *t = realloc(nd->tensors, sizeof *t * (size_t)cap);
        if (!t)
            return tsr_err(TSR_ENOMEM, "netdesc: out of memory (tensors)");
        nd->tensors = t;
        nd_stat_t **st = realloc(g->st, sizeof *st * (size_t)cap);
        if (!st)
            return tsr_err(TSR_ENOMEM, "netdesc: out of memory (statistics)");
        g->st = st;
        g->cap_t = cap;
    }
    nd_stat_t *s = calloc((size_t)c, sizeof *s);
    if (!s)
        return tsr_err(TSR_ENOMEM, "netdesc: out of memory (statistics)");
    int id = nd->ntensors++;
    g->st[id] = s;
    nd->tensors[id] = (tsr_nd_tensor_t){.n = n, .c = c, .h = h, .w = w, .dtype = dt, .zp = zp, .scale = scale};
    return id;
}

tsr_nd_node_t *tsr_netdesc_add_node(tsr_netdesc_t *nd, int *cap, tsr_nd_kind_e kind, const char *name, int in0,
                                    int in1)
{
    if (nd->nnodes == *cap) {
        int c = *cap ? 2 * *cap : 16;
        tsr_nd_node_t *p = realloc(nd->nodes, sizeof *p * (size_t)c);
        if (!p) {
            tsr_err(TSR_ENOMEM, "netdesc: out of memory (nodes)");
            return NULL;
        }
        nd->nodes = p;
        *cap = c;
    }
    tsr_nd_node_t *nn = &nd->nodes[nd->nnodes++];
    memset(nn, 0, sizeof *nn);
    nn->kind = kind;
    snprintf(nn->name, sizeof nn->name, "%s", name);
    nn->in[0] = in0;
    nn->in[1] = in1;
    nn->out = -1;
    return nn;
}

static tsr_nd_node_t *add_node(nd_gen_t *g, tsr_nd_kind_e kind, const char *name, int in0, int in1)
{
    return tsr_netdesc_add_node(g->nd, &g->cap_n, kind, name, in0, in1);
}

static double dt_top(tsr_dtype_e dt)
{
    return dt == TSR_DT_UINT8 ? 255.0 : 127.0;
}

/* Weighted layer (conv or fc): random weights for cout outputs of fan-in
 * k_in, where reduction index k reads input channel k / taps; bias and
 * output statistics; output scale; requantization. relu: output uint8
 * clamp at 0, else int8 full range. The node's w/bias are set; *y_scale,
 * mult/shift (cout each, malloc'd) and the output statistics are returned. */
static int make_weights(nd_gen_t *g, tsr_nd_node_t *nn, int in, int cout, int k_in, int taps, const double *tapf,
                        int relu, double *y_scale, int32_t **mult, int32_t **shift, nd_stat_t *ost)
{
    const tsr_nd_tensor_t *x = &g->nd->tensors[in];
    const nd_stat_t *ist = g->st[in];
    int8_t *w = malloc((size_t)cout * (size_t)k_in);
    int32_t *bias = malloc(sizeof *bias * (size_t)cout);
    double *wr = malloc(sizeof *wr * (size_t)k_in), *ws = malloc(sizeof *ws * (size_t)cout);
    double *im = malloc(sizeof *im * (size_t)x->c), *iv = malloc(sizeof *iv * (size_t)x->c);
    *mult = malloc(sizeof **mult * (size_t)cout);
    *shift = malloc(sizeof **shift * (size_t)cout);
    nn->w = w;
    nn->bias = bias;
    int rc = TSR_OK;
    if (!w || !bias || !wr || !ws || !im || !iv || !*mult || !*shift) {
        rc = tsr_err(TSR_ENOMEM, "netdesc: %s: out of memory (weights)", nn->name);
        goto out;
    }
    for (int c = 0; c < x->c; c++)
        stat_moments(&ist[c], &im[c], &iv[c]);
    const double a = sqrt(6.0 / k_in);
    double bound = 0;
    for (int o = 0; o < cout; o++) {
        double gain = 0.7 + 0.6 * rng_unit(&g->rng), mx = 0;
        for (int k = 0; k < k_in; k++) {
            wr[k] = gain * a * (2.0 * rng_unit(&g->rng) - 1.0);
            mx = fabs(wr[k]) > mx ? fabs(wr[k]) : mx;
        }
        ws[o] = mx > 0 ? mx / 127.0 : 1.0;
        double m = 0, v = 0;
        for (int k = 0; k < k_in; k++) {
            long q = lround(wr[k] / ws[o]);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            w[(size_t)o * k_in + k] = (int8_t)q;
            double wreal = ws[o] * (double)q, f = tapf ? tapf[k % taps] : 1.0;
            m += f * wreal * im[k / taps];
            v += f * wreal * wreal * iv[k / taps];
        }
        double s = sqrt(v), bq = lround((rng_unit(&g->rng) - 0.5) * s / (x->scale * ws[o]));
        bias[o] = (int32_t)bq;
        m += bq * x->scale * ws[o];
        ost[o] = (nd_stat_t){.m = m, .s = s, .relu = relu};
        double top = relu ? m + ND_SIGMAS * s : fabs(m) + ND_SIGMAS * s;
        bound = top > bound ? top : bound;
    }
    *y_scale = (bound > 0 ? bound : 1.0) / dt_top(relu ? TSR_DT_UINT8 : TSR_DT_INT8);
    rc = tsr_quant_requant_params(x->scale, ws, cout, *y_scale, *mult, *shift);
    if (rc)
        tsr_err_prefix(rc, "netdesc: %s: ", nn->name);
out:
    free(wr);
    free(ws);
    free(im);
    free(iv);
    return rc;
}

/* f[ky*k + kx]: 1 if tap (ky, kx) falls inside the input at the output
 * position that sees the most taps, else 0. Padding is the real 0, which
 * matters for the small spatial sizes of the last stages (a 3x3 conv over
 * a 1x1 input sees one tap in nine); the best-covered position, not the
 * average, because the scale must hold the widest distribution. */
static void conv_tap_fraction(int h, int w, int k, int stride, int pad, double *f)
{
    int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1, by = 0, bx = 0, best = -1;
    for (int o = 0; o < oh; o++) { /* the row with the most taps inside */
        int c = 0;
        for (int ky = 0; ky < k; ky++)
            c += o * stride - pad + ky >= 0 && o * stride - pad + ky < h;
        if (c > best) {
            best = c;
            by = o;
        }
    }
    best = -1;
    for (int o = 0; o < ow; o++) {
        int c = 0;
        for (int kx = 0; kx < k; kx++)
            c += o * stride - pad + kx >= 0 && o * stride - pad + kx < w;
        if (c > best) {
            best = c;
            bx = o;
        }
    }
    for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) {
            int iy = by * stride - pad + ky, ix = bx * stride - pad + kx;
            f[ky * k + kx] = iy >= 0 && iy < h && ix >= 0 && ix < w ? 1.0 : 0.0;
        }
}

/* The rest of a conv or fc node whose parameters are set but for the
 * arrays: weights, bias, zero point, requantization (make_weights), the
 * operator's own check, the output tensor and its statistics. Returns the
 * output tensor id or a negative error. */
static int weighted_node(nd_gen_t *g, tsr_nd_node_t *nn, int cout, int k_in, int taps, const double *tapf, int relu)
{
    int conv = nn->kind == TSR_ND_CONV, in = nn->in[0], oh = 1, ow = 1;
    int32_t *zp = malloc(sizeof *zp), *mult = NULL, *shift = NULL; /* owned, freed by tsr_netdesc_free */
    nd_stat_t *ost = calloc((size_t)cout, sizeof *ost);
    double ys = 0;
    int rc = !zp || !ost ? tsr_err(TSR_ENOMEM, "netdesc: %s: out of memory", nn->name) : TSR_OK;
    if (zp)
        *zp = 0;
    if (!rc)
        rc = make_weights(g, nn, in, cout, k_in, taps, tapf, relu, &ys, &mult, &shift, ost);
    if (conv) {
        nn->conv.w_zp = zp;
        nn->conv.mult = mult;
        nn->conv.shift = shift;
    } else {
        nn->dense.w_zp = zp;
        nn->dense.mult = mult;
        nn->dense.shift = shift;
    }
    if (!rc && (rc = conv ? tsr_conv2d_check(&nn->conv, &oh, &ow) : tsr_dense_check(&nn->dense, NULL)))
        tsr_err_prefix(rc, "netdesc: %s: ", nn->name);
    const tsr_nd_tensor_t *x = &g->nd->tensors[in];
    int id = rc ? rc
                : add_tensor(g, x->n, cout, oh, ow, relu ? TSR_DT_UINT8 : TSR_DT_INT8, 0, ys);
    if (id >= 0) {
        nn->out = id;
        memcpy(g->st[id], ost, sizeof *ost * (size_t)cout);
    }
    free(ost);
    return id;
}

/* conv KxK / stride / pad (groups 1) on tensor in; relu: uint8 output
 * clamped at its zero point 0, else int8. Returns the output tensor id or
 * a negative error. */
static int add_conv(nd_gen_t *g, const char *name, int in, int cout, int k, int stride, int pad, int relu)
{
    tsr_nd_node_t *nn = add_node(g, TSR_ND_CONV, name, in, -1);
    if (!nn)
        return TSR_ENOMEM;
    const tsr_nd_tensor_t x = g->nd->tensors[in];
    nn->conv = (tsr_conv2d_params_t){.n = x.n, .c_in = x.c, .h = x.h, .w = x.w, .c_out = cout, .kh = k, .kw = k,
                                     .stride_h = stride, .stride_w = stride, .pad_top = pad, .pad_left = pad,
                                     .pad_bottom = pad, .pad_right = pad, .groups = 1, .x_dtype = x.dtype,
                                     .x_zp = x.zp, .w_dtype = TSR_DT_INT8, .w_zp_count = 1,
                                     .y_dtype = relu ? TSR_DT_UINT8 : TSR_DT_INT8, .y_zp = 0, .rq_count = cout,
                                     .act_min = relu ? 0 : -128, .act_max = relu ? 255 : 127};
    double *tapf = malloc(sizeof *tapf * (size_t)k * (size_t)k);
    if (!tapf)
        return tsr_err(TSR_ENOMEM, "netdesc: %s: out of memory", name);
    conv_tap_fraction(x.h, x.w, k, stride, pad, tapf);
    int id = weighted_node(g, nn, cout, x.c * k * k, k * k, tapf, relu);
    free(tapf);
    return id;
}

/* fc over the flattened input; int8 logits. */
static int add_fc(nd_gen_t *g, const char *name, int in, int m)
{
    tsr_nd_node_t *nn = add_node(g, TSR_ND_DENSE, name, in, -1);
    if (!nn)
        return TSR_ENOMEM;
    const tsr_nd_tensor_t x = g->nd->tensors[in];
    int k = x.c * x.h * x.w;
    nn->dense = (tsr_dense_params_t){.n = x.n, .k = k, .m = m, .x_dtype = x.dtype, .x_zp = x.zp,
                                     .w_dtype = TSR_DT_INT8, .w_zp_count = 1, .y_dtype = TSR_DT_INT8, .y_zp = 0,
                                     .rq_count = m, .act_min = -128, .act_max = 127};
    return weighted_node(g, nn, m, k, x.h * x.w, NULL, 0);
}

/* maxpool k/stride/pad, or (kind GLOBAL_AVG) global average pool. */
static int add_pool(nd_gen_t *g, const char *name, int in, tsr_pool_kind_e kind, int k, int stride, int pad)
{
    tsr_nd_node_t *nn = add_node(g, TSR_ND_POOL, name, in, -1);
    if (!nn)
        return TSR_ENOMEM;
    const tsr_nd_tensor_t x = g->nd->tensors[in];
    tsr_pool_params_t *p = &nn->pool;
    *p = (tsr_pool_params_t){.kind = kind, .n = x.n, .c = x.c, .h = x.h, .w = x.w, .kh = k, .kw = k,
                             .stride_h = stride, .stride_w = stride, .pad_top = pad, .pad_left = pad,
                             .pad_bottom = pad, .pad_right = pad, .dtype = x.dtype, .zp = x.zp};
    int oh = 0, ow = 0, rc = tsr_pool_check(p, &oh, &ow);
    if (rc)
        return tsr_err_prefix(rc, "netdesc: %s: ", name);
    int id = add_tensor(g, x.n, x.c, oh, ow, x.dtype, x.zp, x.scale);
    if (id < 0)
        return id;
    nn->out = id;
    for (int c = 0; c < x.c; c++) {
        nd_stat_t s = g->st[in][c];
        if (kind == TSR_POOL_MAX) {
            s.m += 1.2 * s.s;
            s.s *= 0.6;
        } else {
            double mean, var;
            stat_moments(&s, &mean, &var);
            s = (nd_stat_t){.m = mean, .s = sqrt(var / ((double)x.h * x.w)), .relu = 0};
        }
        g->st[id][c] = s;
    }
    return id;
}

/* a + b with relu fused (act_min = y_zp = 0), uint8 output. */
static int add_add(nd_gen_t *g, const char *name, int a, int b)
{
    tsr_nd_node_t *nn = add_node(g, TSR_ND_ADD, name, a, b);
    if (!nn)
        return TSR_ENOMEM;
    const tsr_nd_tensor_t ta = g->nd->tensors[a], tb = g->nd->tensors[b];
    if (ta.n != tb.n || ta.c != tb.c || ta.h != tb.h || ta.w != tb.w)
        return tsr_err(TSR_EINVAL, "netdesc: %s: inputs [%d,%d,%d,%d] and [%d,%d,%d,%d] differ", name, ta.n, ta.c,
                       ta.h, ta.w, tb.n, tb.c, tb.h, tb.w);
    nd_stat_t *ost = calloc((size_t)ta.c, sizeof *ost);
    if (!ost)
        return tsr_err(TSR_ENOMEM, "netdesc: %s: out of memory", name);
    double bound = 0;
    for (int c = 0; c < ta.c; c++) {
        double ma, va, mb, vb;
        stat_moments(&g->st[a][c], &ma, &va);
        stat_moments(&g->st[b][c], &mb, &vb);
        ost[c] = (nd_stat_t){.m = ma + mb, .s = sqrt(va + vb), .relu = 1};
        double top = ost[c].m + ND_SIGMAS * ost[c].s;
        bound = top > bound ? top : bound;
    }
    double ys = (bound > 0 ? bound : 1.0) / 255.0;
    tsr_add_quant_t q;
    int rc = tsr_quant_add_params(ta.scale, tb.scale, ys, &q);
    int id = rc ? tsr_err_prefix(rc, "netdesc: %s: ", name) : add_tensor(g, ta.n, ta.c, ta.h, ta.w, TSR_DT_UINT8, 0, ys);
    if (id >= 0) {
        nn->out = id;
        memcpy(g->st[id], ost, sizeof *ost * (size_t)ta.c);
        nn->add = (tsr_add_params_t){
            .a = {.n = ta.n, .c = ta.c, .h = ta.h, .w = ta.w, .dtype = ta.dtype, .zp = ta.zp},
            .b = {.n = tb.n, .c = tb.c, .h = tb.h, .w = tb.w, .dtype = tb.dtype, .zp = tb.zp},
            .y = {.n = ta.n, .c = ta.c, .h = ta.h, .w = ta.w, .dtype = TSR_DT_UINT8, .zp = 0},
            .left_shift = q.left_shift, .mult_a = q.mult_a, .mult_b = q.mult_b, .shift_a = q.shift_a,
            .shift_b = q.shift_b, .mult_out = q.mult_out, .shift_out = q.shift_out, .act_min = 0, .act_max = 255};
        if ((rc = tsr_add_check(&nn->add, NULL)))
            id = tsr_err_prefix(rc, "netdesc: %s: ", name);
    }
    free(ost);
    return id;
}

static int build_resnet18(uint64_t seed, int n, int hw, int width, int classes, const char *name, tsr_netdesc_t *out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "netdesc: NULL output");
    memset(out, 0, sizeof *out);
    if (n < 1 || n > 4096 || hw < 1 || hw > 4096 || width < 1 || width > 1024 || classes < 1 || classes > 65536)
        return tsr_err(TSR_EINVAL,
                       "netdesc: resnet18 batch %d, input %dx%d, width %d, classes %d: each must be >= 1 (batch, "
                       "input size <= 4096, width <= 1024, classes <= 65536)",
                       n, hw, hw, width, classes);
    nd_gen_t g = {.nd = out, .rng = nd_seed(seed)};
    snprintf(out->name, sizeof out->name, "%s", name);
    int t = add_tensor(&g, n, 3, hw, hw, TSR_DT_UINT8, 128, 1.0 / 128.0);
    if (t >= 0)
        for (int c = 0; c < 3; c++)
            g.st[t][c] = (nd_stat_t){.m = 0, .s = sqrt(1.0 / 3.0), .relu = 0}; /* uniform [-1, 1) */
    if (t >= 0)
        t = add_conv(&g, "conv1", t, width, 7, 2, 3, 1);
    if (t >= 0)
        t = add_pool(&g, "maxpool", t, TSR_POOL_MAX, 3, 2, 1);
    int cin = width;
    for (int s = 0; s < 4 && t >= 0; s++) {
        int cout = width << s;
        for (int b = 0; b < 2 && t >= 0; b++) {
            int stride = s > 0 && b == 0 ? 2 : 1, x = t, br, sc = t;
            char nm[48];
            snprintf(nm, sizeof nm, "layer%d.%d.conv1", s + 1, b);
            br = add_conv(&g, nm, x, cout, 3, stride, 1, 1);
            snprintf(nm, sizeof nm, "layer%d.%d.conv2", s + 1, b);
            if (br >= 0)
                br = add_conv(&g, nm, br, cout, 3, 1, 1, 0);
            if (br >= 0 && (stride != 1 || cin != cout)) {
                snprintf(nm, sizeof nm, "layer%d.%d.downsample", s + 1, b);
                sc = add_conv(&g, nm, x, cout, 1, stride, 0, 0);
            }
            snprintf(nm, sizeof nm, "layer%d.%d.add", s + 1, b);
            t = br < 0 ? br : sc < 0 ? sc : add_add(&g, nm, br, sc);
            cin = cout;
        }
    }
    if (t >= 0)
        t = add_pool(&g, "avgpool", t, TSR_POOL_GLOBAL_AVG, 1, 1, 0);
    if (t >= 0)
        t = add_fc(&g, "fc", t, classes);
    out->output = t;
    int rc = t < 0 ? t : tsr_netdesc_validate(out);
    for (int i = 0; i < out->ntensors; i++)
        free(g.st[i]);
    free(g.st);
    if (rc)
        tsr_netdesc_free(out);
    return rc;
}

int tsr_netdesc_resnet18(uint64_t seed, int n, tsr_netdesc_t *out)
{
    return build_resnet18(seed, n, 224, 64, 1000, "resnet18", out);
}

int tsr_netdesc_resnet18_small(uint64_t seed, int n, int hw, int width, int classes, tsr_netdesc_t *out)
{
    return build_resnet18(seed, n, hw, width, classes, "resnet18_small", out);
}

uint64_t tsr_netdesc_tensor_bytes(const tsr_netdesc_t *nd, int t)
{
    if (!nd || t < 0 || t >= nd->ntensors)
        return 0;
    const tsr_nd_tensor_t *x = &nd->tensors[t];
    return (uint64_t)x->n * (uint64_t)x->c * (uint64_t)x->h * (uint64_t)x->w;
}

void tsr_netdesc_random_input(const tsr_netdesc_t *nd, uint64_t seed, void *dst)
{
    uint64_t s = nd_seed(seed ^ 0xD1B54A32D192ED03ull), n = tsr_netdesc_tensor_bytes(nd, 0);
    uint8_t *p = dst;
    for (uint64_t i = 0; i < n; i++)
        p[i] = (uint8_t)(rng_next(&s) >> 56);
}

void tsr_nd_node_free(tsr_nd_node_t *nn)
{
    if (nn->kind == TSR_ND_CONV) {
        free((void *)nn->conv.w_zp);
        free((void *)nn->conv.mult);
        free((void *)nn->conv.shift);
        free((void *)nn->conv.fscale);
    } else if (nn->kind == TSR_ND_DENSE) {
        free((void *)nn->dense.w_zp);
        free((void *)nn->dense.mult);
        free((void *)nn->dense.shift);
        free((void *)nn->dense.fscale);
    }
    free(nn->w);
    free(nn->bias);
    nn->w = NULL;
    nn->bias = NULL;
}

void tsr_netdesc_free(tsr_netdesc_t *nd)
{
    if (!nd)
        return;
    for (int i = 0; i < nd->nnodes; i++)
        tsr_nd_node_free(&nd->nodes[i]);
    free(nd->nodes);
    free(nd->tensors);
    memset(nd, 0, sizeof *nd);
}

/* ----------------------------------------------------------- validation */

static int expect_tensor(const tsr_netdesc_t *nd, const tsr_nd_node_t *nn, const char *what, int t, int n, int c,
                         int h, int w, tsr_dtype_e dt, int32_t zp)
{
    const tsr_nd_tensor_t *x = &nd->tensors[t];
    if (x->n != n || x->c != c || x->h != h || x->w != w)
        return tsr_err(TSR_EINVAL, "netdesc: node %s: %s tensor %d is [%d,%d,%d,%d], the parameters say [%d,%d,%d,%d]",
                       nn->name, what, t, x->n, x->c, x->h, x->w, n, c, h, w);
    if (x->dtype != dt || x->zp != zp)
        return tsr_err(TSR_EINVAL, "netdesc: node %s: %s tensor %d is %s zero point %d, the parameters say %s %d",
                       nn->name, what, t, tsr_dtype_name(x->dtype), (int)x->zp, tsr_dtype_name(dt), (int)zp);
    return TSR_OK;
}

/* A dense node's input: any tensor whose C*H*W is K (flattened NCHW). */
static int expect_flat(const tsr_netdesc_t *nd, const tsr_nd_node_t *nn, int t, const tsr_op_io_t *io)
{
    const tsr_nd_tensor_t *x = &nd->tensors[t];
    if (x->n != io->n || (int64_t)x->c * x->h * x->w != io->c || x->dtype != io->dtype || x->zp != io->zp)
        return tsr_err(TSR_EINVAL, "netdesc: node %s: input tensor %d [%d,%d,%d,%d] %s zp %d is not [%d, K=%d] %s "
                       "zp %d", nn->name, t, x->n, x->c, x->h, x->w, tsr_dtype_name(x->dtype), (int)x->zp, io->n,
                       io->c, tsr_dtype_name(io->dtype), (int)io->zp);
    return TSR_OK;
}

/* Where each kind keeps its parameters in a node (offset + 1; 0: none). */
static const size_t params_at[TSR_OPK_COUNT] = {
    [TSR_OPK_CONV] = offsetof(tsr_nd_node_t, conv) + 1, [TSR_OPK_DENSE] = offsetof(tsr_nd_node_t, dense) + 1,
    [TSR_OPK_POOL] = offsetof(tsr_nd_node_t, pool) + 1, [TSR_OPK_ADD] = offsetof(tsr_nd_node_t, add) + 1,
    [TSR_OPK_CLIP] = offsetof(tsr_nd_node_t, clip) + 1, [TSR_OPK_ACT] = offsetof(tsr_nd_node_t, act) + 1,
    [TSR_OPK_MUL] = offsetof(tsr_nd_node_t, mul) + 1, [TSR_OPK_GAVG] = offsetof(tsr_nd_node_t, gavg) + 1,
    [TSR_OPK_SOFTMAX] = offsetof(tsr_nd_node_t, softmax) + 1, [TSR_OPK_CONCAT] = offsetof(tsr_nd_node_t, concat) + 1,
};

const void *tsr_nd_node_params(const tsr_nd_node_t *nn)
{
    const int k = (int)nn->kind;
    if (k <= 0 || k >= TSR_OPK_COUNT || !params_at[k])
        return NULL;
    return (const char *)nn + params_at[k] - 1;
}

/* One node against its tensors (ids already range-checked): the
 * operator's check (tsr_op.h) gives the tensors its parameters need. */
static int validate_node(const tsr_netdesc_t *nd, const tsr_nd_node_t *nn)
{
    const tsr_op_def_t *d = tsr_op_def(nn->kind);
    const void *p = tsr_nd_node_params(nn);
    if (!d || !p)
        return tsr_err(TSR_EINVAL, "netdesc: node %s: unknown kind %d", nn->name, (int)nn->kind);
    tsr_op_io_t io[3];
    int rc = d->check(p, io);
    if (rc)
        return tsr_err_prefix(rc, "netdesc: node %s: ", nn->name);
    for (int k = 0; k <= d->n_inputs && !rc; k++) {
        const int t = k < d->n_inputs ? nn->in[k] : nn->out;
        if (k < d->n_inputs && d->flat_input)
            rc = expect_flat(nd, nn, t, &io[k]);
        else
            rc = expect_tensor(nd, nn, d->io_names[k], t, io[k].n, io[k].c, io[k].h, io[k].w, io[k].dtype, io[k].zp);
    }
    if (!rc && d->has_weights && !nn->w)
        rc = tsr_err(TSR_EINVAL, "netdesc: node %s: no weights", nn->name);
    return rc;
}

int tsr_netdesc_validate(const tsr_netdesc_t *nd)
{
    if (!nd || nd->ntensors < 2 || nd->nnodes < 1 || !nd->tensors || !nd->nodes)
        return tsr_err(TSR_EINVAL, "netdesc: empty or NULL description");
    int *producer = malloc(sizeof *producer * (size_t)nd->ntensors);
    if (!producer)
        return tsr_err(TSR_ENOMEM, "netdesc: out of memory");
    for (int t = 0; t < nd->ntensors; t++)
        producer[t] = -1;
    int rc = TSR_OK;
    for (int i = 0; i < nd->nnodes && !rc; i++) {
        const tsr_nd_node_t *nn = &nd->nodes[i];
        const tsr_op_def_t *d = tsr_op_def(nn->kind);
        int nin = d ? d->n_inputs : 1;
        for (int j = 0; j < nin && !rc; j++) {
            int t = nn->in[j];
            if (t < 0 || t >= nd->ntensors || (t != 0 && producer[t] < 0))
                rc = tsr_err(TSR_EINVAL, "netdesc: node %d (%s): input %d is tensor %d, which is %s", i, nn->name, j,
                             t, t < 0 || t >= nd->ntensors ? "out of range" : "not produced by an earlier node");
        }
        if (!rc && nin == 1 && nn->in[1] != -1)
            rc = tsr_err(TSR_EINVAL, "netdesc: node %d (%s): in[1] is %d, must be -1 (one input)", i, nn->name,
                         nn->in[1]);
        if (!rc && (nn->out <= 0 || nn->out >= nd->ntensors || producer[nn->out] >= 0))
            rc = tsr_err(TSR_EINVAL, "netdesc: node %d (%s): output tensor %d is %s", i, nn->name, nn->out,
                         nn->out <= 0 || nn->out >= nd->ntensors ? "out of range (or the input)" :
                                                                    "already produced by an earlier node");
        if (!rc)
            rc = validate_node(nd, nn);
        if (!rc)
            producer[nn->out] = i;
    }
    for (int t = 1; t < nd->ntensors && !rc; t++)
        if (producer[t] < 0)
            rc = tsr_err(TSR_EINVAL, "netdesc: tensor %d has no producer", t);
    if (!rc && (nd->output <= 0 || nd->output >= nd->ntensors))
        rc = tsr_err(TSR_EINVAL, "netdesc: output tensor %d out of range", nd->output);
    for (int t = 0; t < nd->ntensors && !rc; t++) {
        const tsr_nd_tensor_t *x = &nd->tensors[t];
        if (x->n < 1 || x->c < 1 || x->h < 1 || x->w < 1 ||
            (x->dtype != TSR_DT_INT8 && x->dtype != TSR_DT_UINT8))
            rc = tsr_err(TSR_EINVAL, "netdesc: tensor %d: shape [%d,%d,%d,%d] or dtype %s invalid", t, x->n, x->c,
                         x->h, x->w, tsr_dtype_name(x->dtype));
    }
    free(producer);
    return rc;
}
