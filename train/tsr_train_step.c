/*
 * tsr_train_step: one training step of the trainable part (tsr_train.h):
 * forward on the device with the current int8 weights, softmax
 * cross-entropy on the host, backward with int8 gradients (the GEMMs on
 * the device, jit/tsr_grad.h, or on the host with host_backward), SGD with
 * momentum on the float32 master copy, re-quantization.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_dtype.h"
#include "tsr_error.h"
#include "tsr_strsafe.h"
#include "tsr_train_int.h"
#include "tsr_util.h"

/* Input k of layer j: the kept output of the part's layer it reads, or the batch's frozen features. */
static const uint8_t *layer_in(const tsr_trainer_t *tr, int j, int k)
{
    const int s = tr->c[j].src[k];
    return s >= 0 ? tr->c[s].y : tr->x0;
}

/* "node NAME (OP): " before a library error. */
static int node_err(int rc, const trl_t *l, const char *what)
{
    return tsr_err_prefix(rc, "node \"%s\" (%s): %s: ", TSR_SAFE(l->L.node), l->L.op, what);
}

/* The float32 requantization scales if this config applies them (EXACT_REQUANT), else NULL: the
 * one rule of tsr_conv2d_for_config, for dense too. */
static const float *cfg_fscale(const tsr_trainer_t *tr, const trl_t *l)
{
    tsr_conv2d_params_t p;
    memset(&p, 0, sizeof p);
    p.fscale = l->has_fscale ? l->fscale : NULL;
    return tsr_conv2d_for_config(&tr->cfg, &p).fscale;
}

static tsr_grad_conv_t grad_conv(const trl_t *l, int nb);

/* The forward of a trained conv or dense on 16-bit weights (weight_bits 16): the master copy as 256 wq +
 * wlo on w_scale / 256 (wq the int8 weights the tuned file gets, wlo the residual), each part's exact
 * int32 sums on the device (tsr_grad_conv_fwd / tsr_grad_dense_fwd: one GEMM of 2M outputs, or two), joined on the host in
 * int64 (256 hi + lo + the bias on x_scale * w_scale / 256: exact) and requantized there (the multiplier
 * x_scale * w_scale / 256 / y_scale in double, rounded half to even, the zero point, the clamp). */
static int forward_wide(tsr_trainer_t *tr, int j)
{
    trl_t *l = &tr->c[j];
    const int nb = tr->nb, M = l->M;
    const void *x = layer_in(tr, j, 0);
    const size_t ny = (size_t)nb * l->y_elems, S = l->y_elems / (size_t)M;
    /* one GEMM of both parts as 2M outputs (hi's then lo's: the input read once, the calls' overhead
       once) unless depthwise (C_out is C_in) or its int32 output (8 bytes an output) is over 1.5x the
       device-memory budget (the inference's high-water mark; the digits' conv2 at batch 16: 262,144 B,
       a step's peak 2.54x the inference's, 1.50x with two GEMMs) */
    const int conv = l->L.kind == TSR_OXL_CONV;
    const int two = (conv && l->L.conv.groups > 1) || (tr->dev_budget && 8 * ny > tr->dev_budget * 3 / 2);
    int rc = 0;
    if (!two) {
        tsr_grad_conv_t gp = grad_conv(l, nb);
        gp.c_out = 2 * M;
        rc = conv ? tsr_grad_conv_fwd(tr->dev, &gp, tr->dev_budget, x, l->x_dtype, l->x_zp, l->w2, tr->facc, NULL)
                  : tsr_grad_dense_fwd(tr->dev, nb, l->K, 2 * M, x, l->x_dtype, l->x_zp, l->w2, tr->facc, NULL);
    }
    for (int part = 0; two && part < 2 && !rc; part++) {
        const tsr_grad_conv_t gp = grad_conv(l, nb);
        rc = tsr_grad_conv_fwd(tr->dev, &gp, tr->dev_budget, x, l->x_dtype, l->x_zp, part ? l->wlo : l->wq,
                               tr->facc + (size_t)part * ny, NULL);
    }
    if (rc)
        return node_err(rc, l, "forward on 16-bit weights");
    for (size_t i = 0; i < ny; i++) {
        const int m = (int)(i / S % (size_t)M);
        /* hi and lo of output i: [N][2M][S] (one GEMM) or two [N][M][S] */
        const size_t ih = two ? i : i / l->y_elems * 2 * l->y_elems + i % l->y_elems;
        const size_t il = two ? ny + i : ih + l->y_elems;
        const int64_t a = 256 * (int64_t)tr->facc[ih] + tr->facc[il] + (l->has_bias ? l->b16[m] : 0);
        const double r = (double)l->L.x_scale * (double)l->ws[l->wc > 1 ? m : 0] / 256.0 / (double)l->L.y_scale;
        const double v = nearbyint((double)a * r) + l->y_zp;
        l->y[i] = (uint8_t)(int32_t)(v < l->act_min ? l->act_min : v > l->act_max ? l->act_max : v);
    }
    tr->fwd_macs += 2 * (uint64_t)nb * l->y_elems * (uint64_t)l->K;
    return 0;
}

/* Forward of layer j of the part on the current batch (its output kept in c[j].y). */
static int forward_layer(tsr_trainer_t *tr, int j)
{
    if (tr->c[j].wlo)
        return forward_wide(tr, j);
    const int nb = tr->nb;
    trl_t *l = &tr->c[j];
    const void *x = layer_in(tr, j, 0);
    int rc = 0;
    if (l->L.kind == TSR_OXL_ADD) {
        tsr_add_params_t p = l->L.add;
        p.a.n = p.b.n = p.y.n = nb;
        rc = tsr_add_run(tr->dev, &p, x, layer_in(tr, j, 1), l->y);
    } else if (l->L.kind == TSR_OXL_AVGPOOL && l->L.avg_conv) { /* the model's own weight-1 conv */
        tsr_conv2d_params_t p = l->L.conv;
        p.n = nb;
        p.w_plan = NULL;
        p.fscale = tsr_conv2d_for_config(&tr->cfg, &p).fscale;
        rc = tsr_conv2d_run(tr->dev, &p, x, l->L.w, l->L.bias, l->y);
    } else if (l->L.kind == TSR_OXL_CONV) {
        tsr_conv2d_params_t p = l->L.conv;
        p.n = nb;
        p.w_dtype = TSR_DT_INT8;
        p.w_zp = l->wzp;
        p.w_zp_count = 1;
        p.mult = l->mult;
        p.shift = l->shift;
        p.rq_count = l->wc;
        p.fscale = cfg_fscale(tr, l);
        p.w_plan = NULL;
        rc = tsr_conv2d_run(tr->dev, &p, x, l->wq, l->has_bias ? l->bq : NULL, l->y);
        tr->fwd_macs += (uint64_t)nb * l->y_elems * (uint64_t)l->K;
    } else if (l->L.kind == TSR_OXL_DENSE) {
        tsr_dense_params_t p = l->L.dense;
        p.n = nb;
        p.w_dtype = TSR_DT_INT8;
        p.w_zp = l->wzp;
        p.w_zp_count = 1;
        p.mult = l->mult;
        p.shift = l->shift;
        p.rq_count = l->wc;
        p.fscale = cfg_fscale(tr, l);
        rc = tsr_dense_run(tr->dev, &p, x, l->wq, l->has_bias ? l->bq : NULL, l->y);
        tr->fwd_macs += (uint64_t)nb * (uint64_t)l->M * (uint64_t)l->K;
    } else {
        tsr_pool_params_t p = l->L.pool;
        p.n = nb;
        rc = tsr_pool_run(tr->dev, &p, x, l->y);
    }
    return rc ? node_err(rc, l, "forward") : 0;
}

/* The logits' quantization set to hold the real range [lo, hi] by ONNX Runtime's rule (compute_scale_zp:
 * float32 bounds widened to include 0, their difference in float32, the scale in double then float32,
 * the zero point rounded half to even; uint8 asymmetric, int8 with zero point 0 symmetric), the last
 * layer's requantization formed again. */
int tsr_train_set_logits_range(tsr_trainer_t *tr, double lo, double hi)
{
    trl_t *l = &tr->c[tr->nc - 1];
    const int32_t qmin = tsr_dt_min(l->y_dtype), qmax = tsr_dt_max(l->y_dtype);
    const float rmin = (float)fmin(lo, 0.0), rmax = (float)fmax(hi, 0.0);
    double scale;
    int32_t zp;
    if (l->y_dtype == TSR_DT_INT8 && tr->out_zp0 == 0) { /* symmetric (ActivationSymmetric): -127..127 */
        const float amax = fmaxf(-rmin, rmax);
        scale = (double)(amax - -amax) / 254.0;
        zp = 0;
    } else {
        scale = (double)(rmax - rmin) / (double)(qmax - qmin);
        const double z = nearbyint((double)qmin - (double)rmin / scale);
        zp = (int32_t)(z < qmin ? qmin : z > qmax ? qmax : z);
    }
    if (!(scale > 0) || !isfinite(scale))
        return node_err(TSR_EINVAL, l, "the logits' range");
    tr->out_scale = (float)scale;
    tr->out_zp = zp;
    l->L.y_scale = (float)scale;
    l->L.dense.y_zp = zp;
    l->y_zp = zp;
    int rc = tsr_onnx_lowered_requant(tr->m, &l->L, l->ws, l->mult, l->shift, l->fscale, &l->has_fscale);
    return rc ? node_err(rc, l, "requantization of the logits' new range") : 0;
}

/* The logits' range observer. The model's quantizer calibrated the logits' range on the untuned
 * model: for a new head (a zoo model given a task's classes) it is that of random outputs (ResNet-18
 * with a new fc: [-5.6, 5.8]), and fine-tuning drives the logits far past it. Saturated logits are no
 * longer the model's: the loss sees the clamp, the gradient passes it (a saturation is no Relu), and
 * training goes astray (the fc of the zoo's ResNet-18 on the digits: 30.28% held-out against float's
 * 80.56%; float torch with the same clamp on its logits: 39.44%). So, as a MinMax observer of
 * quantization-aware training does: when a batch's logits saturate, their real values are formed on
 * the host (exact int32 sums of the last dense layer, its weights and the batch's kept input: M*K MACs
 * a sample, only for such batches), the range widened to hold them (never narrowed: setting it to
 * each epoch's range instead was tried on the ResNet-18 below and gained nothing, its logits stay wide),
 * and the layer run again. The tuned file gets the new scale and zero point. A file whose logits never
 * saturate keeps its range. */
/* The real value of output m of sample n of the dense layer j before its requantization: its exact
 * int32 sum (bias included) on the host, times x_scale * w_scale. */
static double dense_real(const tsr_trainer_t *tr, int j, int n, int m)
{
    const trl_t *l = &tr->c[j];
    const void *x = layer_in(tr, j, 0);
    const int64_t f = l->wlo ? 256 : 1; /* (16-bit weights: 256 wq + wlo on w_scale / 256) */
    int64_t acc = l->has_bias ? (l->wlo ? l->b16[m] : l->bq[m]) : 0;
    for (int k = 0; k < l->K; k++) {
        const size_t i = (size_t)m * l->K + k;
        acc += (int64_t)(tsr_dt_get(l->x_dtype, x, (size_t)n * l->K + k) - l->x_zp) *
               (f * l->wq[i] + (l->wlo ? l->wlo[i] : 0));
    }
    return (double)acc * (double)(l->L.x_scale * l->ws[l->wc > 1 ? m : 0]) / (double)f;
}

static int logits_range(tsr_trainer_t *tr)
{
    const int j = tr->nc - 1, nb = tr->nb;
    trl_t *l = &tr->c[j];
    const int32_t qmin = tsr_dt_min(l->y_dtype), qmax = tsr_dt_max(l->y_dtype);
    int sat = 0;
    for (size_t i = 0; !sat && i < (size_t)nb * l->y_elems; i++) {
        const int32_t v = tsr_dt_get(l->y_dtype, l->y, i);
        sat = v <= qmin || v >= qmax;
    }
    const double lo = (double)(qmin - tr->out_zp) * tr->out_scale, hi = (double)(qmax - tr->out_zp) * tr->out_scale;
    if (sat) {
        double bmin = INFINITY, bmax = -INFINITY;
        for (int n = 0; n < nb; n++)
            for (int m = 0; m < l->M; m++) {
                const double v = dense_real(tr, j, n, m);
                bmin = v < bmin ? v : bmin;
                bmax = v > bmax ? v : bmax;
            }
        tr->range_macs += (uint64_t)nb * (uint64_t)l->M * (uint64_t)l->K;
        if (bmin < lo || bmax > hi) { /* (on the bounds, not past them: nothing to do) */
            int rc = tsr_train_set_logits_range(tr, fmin(lo, bmin), fmax(hi, bmax));
            if (!rc)
                rc = forward_layer(tr, j);
            if (rc)
                return rc;
            tr->range_moves++;
        }
    }
    return 0;
}

int tsr_train_forward(tsr_trainer_t *tr)
{
    for (int j = 0; j < tr->nc; j++) {
        int rc = forward_layer(tr, j);
        if (rc)
            return rc;
    }
    return tr->range_obs ? logits_range(tr) : 0;
}

/* ------------------------------------------------ host backward GEMMs (host_backward: the reference) */

static void host_dense_dw(int n, int k, int m, const int8_t *dy, const void *x, tsr_dtype_e xd, int32_t xzp,
                          int32_t *dw)
{
    for (int o = 0; o < m; o++)
        for (int i = 0; i < k; i++) {
            int64_t s = 0;
            for (int r = 0; r < n; r++)
                s += (int64_t)dy[(size_t)r * m + o] * (tsr_dt_get(xd, x, (size_t)r * k + i) - xzp);
            dw[(size_t)o * k + i] = (int32_t)(uint32_t)s;
        }
}

static void host_dense_dx(int n, int k, int m, const int8_t *dy, const int8_t *w, int32_t *dx)
{
    for (int r = 0; r < n; r++)
        for (int i = 0; i < k; i++) {
            int64_t s = 0;
            for (int o = 0; o < m; o++)
                s += (int64_t)dy[(size_t)r * m + o] * w[(size_t)o * k + i];
            dx[(size_t)r * k + i] = (int32_t)(uint32_t)s;
        }
}

/* conv, groups 1: the output positions each input position meets, walked from the output side */
static void host_conv(const tsr_grad_conv_t *p, int oh, int ow, const int8_t *dy, const void *x, tsr_dtype_e xd,
                      int32_t xzp, const int8_t *w, int32_t *dw, int32_t *dx)
{
    const int C = p->c_in, O = p->c_out, KH = p->kh, KW = p->kw, H = p->h, W = p->w;
    const int G = p->groups > 1 ? p->groups : 1, CG = C / G, OG = O / G; /* channels per group in and out */
    int64_t *aw = dw ? calloc((size_t)O * CG * KH * KW, sizeof *aw) : NULL;
    int64_t *ax = dx ? calloc((size_t)p->n * C * H * W, sizeof *ax) : NULL;
    if ((dw && !aw) || (dx && !ax)) {
        free(aw), free(ax);
        return;
    }
    for (int n = 0; n < p->n; n++)
        for (int o = 0; o < O; o++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    const int g = dy[(((size_t)n * O + o) * oh + oy) * ow + ox];
                    if (!g)
                        continue;
                    for (int c = o / OG * CG; c < (o / OG + 1) * CG; c++)
                        for (int ky = 0; ky < KH; ky++) {
                            const int iy = oy * p->stride_h + ky - p->pad_top;
                            if (iy < 0 || iy >= H)
                                continue;
                            for (int kx = 0; kx < KW; kx++) {
                                const int ix = ox * p->stride_w + kx - p->pad_left;
                                if (ix < 0 || ix >= W)
                                    continue;
                                const size_t xi = (((size_t)n * C + c) * H + iy) * W + ix;
                                const size_t wi = (((size_t)o * CG + c % CG) * KH + ky) * KW + kx;
                                if (aw)
                                    aw[wi] += (int64_t)g * (tsr_dt_get(xd, x, xi) - xzp);
                                if (ax)
                                    ax[xi] += (int64_t)g * w[wi];
                            }
                        }
                }
    for (size_t i = 0; aw && i < (size_t)O * CG * KH * KW; i++)
        dw[i] = (int32_t)(uint32_t)aw[i];
    for (size_t i = 0; ax && i < (size_t)p->n * C * H * W; i++)
        dx[i] = (int32_t)(uint32_t)ax[i];
    free(aw), free(ax);
}

/* ------------------------------------------------------------------------ backward */

/* Quantize g[n] per tensor to int8 (symmetric, zero point 0): the scale max|g| / 127 (0: g is all 0).
 * Rounded to nearest, or stochastically (grad_stochastic: floor(g / s + u), u uniform in [0, 1), so the
 * rounding is unbiased in expectation: small gradients are not all lost to 0 as to nearest). */
static float quantize_grad(tsr_trainer_t *tr, const float *g, size_t n, int8_t *q)
{
    float amax = 0;
    for (size_t i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(g[i]));
    if (!(amax > 0)) {
        memset(q, 0, n);
        return 0;
    }
    const float s = amax / 127.0f;
    for (size_t i = 0; i < n; i++) {
        long v;
        if (tr->o.grad_stochastic) {
            const float u = (float)(tsr_splitmix64(&tr->round_state) >> 40) * (1.0f / 16777216.0f);
            v = (long)floorf(g[i] / s + u);
        } else
            v = lrintf(g[i] / s);
        q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    return s;
}

static tsr_grad_conv_t grad_conv(const trl_t *l, int nb)
{
    const tsr_conv2d_params_t *c = &l->L.conv;
    return (tsr_grad_conv_t){.n = nb, .c_in = c->c_in, .h = c->h, .w = c->w, .c_out = c->c_out, .kh = c->kh,
                             .kw = c->kw, .stride_h = c->stride_h, .stride_w = c->stride_w, .pad_top = c->pad_top,
                             .pad_left = c->pad_left, .pad_bottom = c->pad_bottom, .pad_right = c->pad_right,
                             .groups = c->groups};
}

/* The residual of g after its int8 part hi (scale s) quantized to int8 on s / 254 (grad_split: dY as two int8
 * tensors, hi * s + lo * s / 254, ~15 bits; each backward GEMM done twice on the device). */
static float quantize_lo(const float *g, size_t n, const int8_t *hi, float s, int8_t *lo)
{
    const float sl = s / 254.0f;
    for (size_t i = 0; i < n; i++) {
        const long v = lrintf((g[i] - (float)hi[i] * s) / sl);
        lo[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    return sl;
}

/* dW's int32 sums of the int8 gradient q and the layer's input x into tr->acc (device, or host_backward). */
static int dw_gemm(tsr_trainer_t *tr, const trl_t *l, const tsr_grad_conv_t *gp, int oh, size_t S, const int8_t *q,
                   const void *x)
{
    const int nb = tr->nb, M = l->M, K = l->K;
    if (tr->o.host_backward) {
        if (l->L.kind == TSR_OXL_CONV)
            host_conv(gp, oh, (int)(S / (size_t)oh), q, x, l->x_dtype, l->x_zp, NULL, tr->acc, NULL);
        else
            host_dense_dw(nb, K, M, q, x, l->x_dtype, l->x_zp, tr->acc);
        tr->host_macs += (uint64_t)nb * l->y_elems * (uint64_t)K;
        return 0;
    }
    if (l->L.kind == TSR_OXL_CONV)
        return tsr_grad_conv_dw_budget(tr->dev, gp, tr->dev_budget, q, x, l->x_dtype, l->x_zp, tr->acc, &tr->gst);
    return tsr_grad_dense_dw(tr->dev, nb, K, M, q, x, l->x_dtype, l->x_zp, tr->acc, &tr->gst);
}

/* dX's int32 sums of the int8 gradient q and the layer's int8 weights into tr->acc. */
static int dx_gemm(tsr_trainer_t *tr, const trl_t *l, const tsr_grad_conv_t *gp, int oh, size_t S, const int8_t *q,
                   const void *x)
{
    const int nb = tr->nb, M = l->M, K = l->K;
    if (tr->o.host_backward) {
        if (l->L.kind == TSR_OXL_CONV)
            host_conv(gp, oh, (int)(S / (size_t)oh), q, x, l->x_dtype, l->x_zp, l->wq, NULL, tr->acc);
        else
            host_dense_dx(nb, K, M, q, l->wq, tr->acc);
        tr->host_macs += (uint64_t)nb * l->y_elems * (uint64_t)K;
        return 0;
    }
    if (l->L.kind == TSR_OXL_CONV)
        return tsr_grad_conv_dx_budget(tr->dev, gp, tr->dev_budget, q, l->wq, tr->acc, &tr->gst);
    return tsr_grad_dense_dx(tr->dev, nb, K, M, q, l->wq, tr->acc, &tr->gst);
}

/* dW (trainable) and dX (gin, when needed) of a conv or dense from g, the gradient of its real output. */
/* device_update: the exact int32 dW sums and the int8 dy's sums per output channel (the bias's gradient on
   the scale s_dy), for the update on the device */
static void keep_int_grads(tsr_trainer_t *tr, trl_t *l, size_t S)
{
    memcpy(l->gwi, tr->acc, sizeof(int32_t) * (size_t)l->M * (size_t)l->K);
    for (int m = 0; m < l->M; m++) {
        int64_t s = 0;
        for (int n = 0; n < tr->nb && l->s_dy != 0; n++)
            for (size_t i = 0; i < S; i++)
                s += tr->q[((size_t)n * (size_t)l->M + (size_t)m) * S + i];
        l->gbi[m] = (int32_t)(s > INT32_MAX ? INT32_MAX : s < INT32_MIN ? INT32_MIN : s); /* (the update clamps) */
    }
}

static int weight_backward(tsr_trainer_t *tr, trl_t *l, const void *x, const float *g, float *gin)
{
    const int nb = tr->nb, M = l->M, K = l->K, split = tr->o.grad_split;
    const size_t ny = (size_t)nb * l->y_elems, S = l->y_elems / (size_t)M; /* output positions per channel */
    const int conv = l->L.kind == TSR_OXL_CONV;
    const tsr_grad_conv_t gp = grad_conv(l, nb);
    const int oh = conv ? (gp.h + gp.pad_top + gp.pad_bottom - gp.kh) / gp.stride_h + 1 : 1; /* (conv output
                                                                                                [N, M, OH, OW]) */
    int rc = 0;
    if (l->trainable) {
        for (int m = 0; m < M; m++) {
            double s = 0;
            for (int n = 0; n < nb; n++)
                for (size_t i = 0; i < S; i++)
                    s += g[((size_t)n * M + m) * S + i];
            l->gb[m] = (float)s;
        }
    }
    const float s = quantize_grad(tr, g, ny, tr->q);
    const float sl = split && s != 0 ? quantize_lo(g, ny, tr->q, s, tr->q2) : 0;
    l->s_dy = s;
    l->s_dx = 0;
    if (l->trainable) {
        if (s == 0)
            memset(tr->acc, 0, sizeof(int32_t) * (size_t)M * K);
        else
            rc = dw_gemm(tr, l, &gp, oh, S, tr->q, x);
        if (rc)
            return node_err(rc, l, "backward dW");
        const float f = s * l->L.x_scale;
        for (size_t i = 0; i < (size_t)M * K; i++)
            l->gw[i] = (float)tr->acc[i] * f;
        if (l->gwi)
            keep_int_grads(tr, l, S);
        if (sl != 0) { /* the low part: a second GEMM, added */
            if ((rc = dw_gemm(tr, l, &gp, oh, S, tr->q2, x)) != 0)
                return node_err(rc, l, "backward dW (low part)");
            const float fl = sl * l->L.x_scale;
            for (size_t i = 0; i < (size_t)M * K; i++)
                l->gw[i] += (float)tr->acc[i] * fl;
        }
    }
    if (!gin)
        return 0;
    /* dX = dY W with W = w_scale * wq: one scale per tensor factors out of the sum; per-channel
       scales are folded into dY first (dY * w_scale, quantized again) */
    float sx = s * l->ws[0], sxl = sl * l->ws[0];
    if (l->wc > 1) {
        for (int n = 0; n < nb; n++)
            for (int m = 0; m < M; m++)
                for (size_t i = 0; i < S; i++) {
                    const size_t k = ((size_t)n * M + m) * S + i;
                    gin[k] = g[k] * l->ws[m]; /* (gin as scratch: dX is written after) */
                }
        sx = quantize_grad(tr, gin, ny, tr->q);
        sxl = split && sx != 0 ? quantize_lo(gin, ny, tr->q, sx, tr->q2) : 0;
    }
    l->s_dx = l->wc > 1 ? sx : s;
    const size_t nx = (size_t)nb * l->x_elems;
    if (sx == 0) {
        memset(gin, 0, sizeof(float) * nx);
        return 0;
    }
    if ((rc = dx_gemm(tr, l, &gp, oh, S, tr->q, x)) != 0)
        return node_err(rc, l, "backward dX");
    for (size_t i = 0; i < nx; i++)
        gin[i] = (float)tr->acc[i] * sx;
    if (sxl != 0) {
        if ((rc = dx_gemm(tr, l, &gp, oh, S, tr->q2, x)) != 0)
            return node_err(rc, l, "backward dX (low part)");
        for (size_t i = 0; i < nx; i++)
            gin[i] += (float)tr->acc[i] * sxl;
    }
    return 0;
}

/* Max pool: each output's gradient to the first largest input of its window (scan order, as torch). */
static void pool_backward(const trl_t *l, int nb, const void *x, const float *g, float *gin)
{
    const tsr_pool_params_t *p = &l->L.pool;
    const int C = p->c, H = p->h, W = p->w;
    const int OH = (H + p->pad_top + p->pad_bottom - p->kh) / p->stride_h + 1;
    const int OW = (W + p->pad_left + p->pad_right - p->kw) / p->stride_w + 1;
    memset(gin, 0, sizeof(float) * (size_t)nb * l->x_elems);
    for (int n = 0; n < nb; n++)
        for (int c = 0; c < C; c++) {
            const size_t base = ((size_t)n * C + c) * H * W;
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    int32_t best = INT32_MIN;
                    size_t at = 0;
                    for (int ky = 0; ky < p->kh; ky++)
                        for (int kx = 0; kx < p->kw; kx++) {
                            const int iy = oy * p->stride_h + ky - p->pad_top, ix = ox * p->stride_w + kx - p->pad_left;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                continue;
                            const int32_t v = tsr_dt_get(p->dtype, x, base + (size_t)iy * W + ix);
                            if (v > best)
                                best = v, at = base + (size_t)iy * W + ix;
                        }
                    if (best != INT32_MIN)
                        gin[at] += g[(((size_t)n * C + c) * OH + oy) * OW + ox];
                }
        }
}

/* Average pool (or its weight-1 conv form): each output's gradient spread evenly over the inputs its
 * window counted (count_include_pad 1: the window's taps, padding included; 0: the ones inside). */
static void avg_backward(const trl_t *l, int nb, const float *g, float *gin)
{
    const tsr_pool_params_t *p = &l->L.pool;
    const int C = p->c, H = p->h, W = p->w, glob = p->kind == TSR_POOL_GLOBAL_AVG;
    const int kh = glob ? H : p->kh, kw = glob ? W : p->kw, sh = glob ? 1 : p->stride_h, sw = glob ? 1 : p->stride_w;
    const int pt = glob ? 0 : p->pad_top, pl = glob ? 0 : p->pad_left;
    const int OH = glob ? 1 : (H + p->pad_top + p->pad_bottom - kh) / sh + 1;
    const int OW = glob ? 1 : (W + p->pad_left + p->pad_right - kw) / sw + 1;
    memset(gin, 0, sizeof(float) * (size_t)nb * l->x_elems);
    for (int n = 0; n < nb; n++)
        for (int c = 0; c < C; c++) {
            const size_t base = ((size_t)n * C + c) * H * W;
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    const int y0 = oy * sh - pt, x0 = ox * sw - pl;
                    const int ya = y0 < 0 ? 0 : y0, yb = y0 + kh > H ? H : y0 + kh;
                    const int xa = x0 < 0 ? 0 : x0, xb = x0 + kw > W ? W : x0 + kw;
                    const int cnt = glob || p->count_include_pad ? kh * kw : (yb - ya) * (xb - xa);
                    if (cnt <= 0)
                        continue;
                    const float v = g[(((size_t)n * C + c) * OH + oy) * OW + ox] / (float)cnt;
                    for (int iy = ya; iy < yb; iy++)
                        for (int ix = xa; ix < xb; ix++)
                            gin[base + (size_t)iy * W + ix] += v;
                }
        }
}

/* A folded Relu or Clip's derivative: 0 where the output sits on its bound (the low one may be the
 * type's own, uint8 with zero point 0: a Relu's); without one the type's saturation passes the
 * gradient straight through. The high bound is masked where it is below the type's own maximum, and
 * where a Clip (ReLU6) was folded even when it is that maximum (ReLU6 quantized to [0, 6] by its
 * calibration: 6 is 255). A clamp whose low end is real 0 (the output zero point) is a Relu too, folded
 * or not: ONNX Runtime's quantizer removes a Relu (and a ReLU6) whose output range its quantization
 * already is (uint8 with zero point 0), and its saturation at 0 is then the Relu's. */
static void act_mask(const trl_t *l, int nb, float *g)
{
    const int relu = l->L.relu || l->act_min > tsr_dt_min(l->y_dtype) || l->act_min == l->y_zp;
    const int lo = relu, hi = (relu && l->act_max < tsr_dt_max(l->y_dtype)) || l->L.clip;
    for (size_t i = 0; (lo || hi) && i < (size_t)nb * l->y_elems; i++) {
        const int32_t v = tsr_dt_get(l->y_dtype, l->y, i);
        if ((lo && v <= l->act_min) || (hi && v >= l->act_max))
            g[i] = 0;
    }
}

int tsr_train_backward(tsr_trainer_t *tr, const int32_t *lab, double *loss, int *right)
{
    const int nb = tr->nb, C = tr->classes;
    const trl_t *last = &tr->c[tr->nc - 1];
    for (int j = 0; j < tr->nc; j++)
        memset(tr->c[j].gy, 0, sizeof(float) * (size_t)nb * tr->c[j].y_elems);
    float *g = tr->c[tr->nc - 1].gy, *gin = tr->g2;
    *loss = 0;
    *right = 0;
    if (tr->loss_exact)
        tr->loss_macs += (uint64_t)nb * (uint64_t)last->M * (uint64_t)last->K;
    for (int n = 0; n < nb; n++) {
        float *z = tr->probs + (size_t)n * C; /* the dequantized logits, then their softmax */
        double mx = -INFINITY, sum = 0;
        int arg = 0;
        for (int c = 0; c < C; c++) {
            z[c] = tr->loss_exact ? (float)dense_real(tr, tr->nc - 1, n, c)
                                  : (float)(tsr_dt_get(last->y_dtype, last->y, (size_t)n * C + c) - tr->out_zp) *
                                        tr->out_scale;
            if (z[c] > mx)
                mx = z[c], arg = c;
        }
        for (int c = 0; c < C; c++)
            sum += exp(z[c] - mx);
        *loss += -(z[lab[n]] - mx - log(sum));
        *right += arg == lab[n];
        for (int c = 0; c < C; c++) {
            const double p = exp(z[c] - mx) / sum;
            z[c] = (float)p;
            g[(size_t)n * C + c] = (float)((p - (c == lab[n])) / nb);
        }
    }
    /* in reverse order: every reader of a layer's output comes after it, so its gradient is complete
       (summed over the readers: a residual's two branches) when its turn comes */
    for (int j = tr->nc - 1; j >= 0; j--) {
        trl_t *l = &tr->c[j];
        const void *x = layer_in(tr, j, 0);
        g = l->gy;
        const size_t nx = (size_t)nb * l->x_elems;
        if (l->L.kind == TSR_OXL_MAXPOOL) {
            if (l->need_dx)
                pool_backward(l, nb, x, g, gin);
        } else if (l->L.kind == TSR_OXL_AVGPOOL) {
            /* only a Relu folded into a requantizing average: an average of inputs >= 0 that rounds
               to 0 sits on the zero point without a clamp (its gradient is 1 / count, not 0) */
            if (l->L.avg_conv && l->L.relu)
                act_mask(l, nb, g);
            if (l->need_dx)
                avg_backward(l, nb, g, gin);
        } else if (l->L.kind == TSR_OXL_ADD) {
            /* y = a + b in real values (each input through its own scale to the output's): the same
               gradient to both inputs, masked by the add's clamp */
            act_mask(l, nb, g);
            for (int k = 0; k < 2; k++)
                if (l->src[k] >= 0) {
                    float *d = tr->c[l->src[k]].gy;
                    for (size_t i = 0; i < nx; i++)
                        d[i] += g[i];
                }
            continue;
        } else {
            act_mask(l, nb, g);
            int rc = weight_backward(tr, l, x, g, l->need_dx ? gin : NULL);
            if (rc)
                return rc;
        }
        if (l->need_dx) {
            float *d = tr->c[l->src[0]].gy;
            for (size_t i = 0; i < nx; i++)
                d[i] += gin[i];
        }
    }
    return 0;
}

/* The weight scales stay the file's (as --update device keeps them), and the master copy is clamped to
 * the range their int8 grid holds, [-128, 127.5] steps. Re-fitting each scale to max|w| / 127.5 every
 * step (before this) moved weights no gradient moved: the file's scales are its float weights' max / 127.5,
 * a positive maximum stored as 127, so the first re-fit shrank each such channel by 127 / 127.5 (zoo
 * ResNet-18 last:3, step 1: the convs' centre taps moved by a norm of 0.112 and 0.151 against the gradient's
 * 0.031 and 0); and a head whose weights grow (the zoo's new fc: its scales 3.3x in 3 epochs) coarsened its
 * own grid. The clamp bounds them instead, as a max-norm constraint (docs/results.md). */
int tsr_train_requantize(tsr_trainer_t *tr, trl_t *l)
{
    const size_t per = (size_t)l->M / (size_t)l->wc * (size_t)l->K; /* weights per scale */
    for (int c = 0; c < l->wc; c++) {
        float amax = 0;
        for (size_t i = 0; i < per; i++) {
            const float w = l->w[c * per + i];
            if (!isfinite(w))
                return tsr_err(TSR_EINVAL, "node \"%s\" (%s): the weights are no longer finite (the learning rate "
                               "is too large)", TSR_SAFE(l->L.node), l->L.op);
            amax = fmaxf(amax, fabsf(w));
        }
        if (tr->o.weight_refit && amax > 0) /* (all 0: the old scale stays; any positive scale holds zeros) */
            l->ws[c] = amax / 127.5f;
        const float lo = -128.0f * l->ws[c], hi = 127.5f * l->ws[c];
        for (size_t i = 0; i < per && !tr->o.weight_refit; i++) {
            float *w = &l->w[c * per + i];
            *w = *w < lo ? lo : *w > hi ? hi : *w;
        }
        const int stoch = tr->o.weight_stochastic && !tr->wround_final;
        for (size_t i = 0; i < per; i++) {
            const float u = stoch ? (float)(tsr_splitmix64(&tr->wround_state) >> 40) * (1.0f / 16777216.0f) : 0;
            const float r = l->w[c * per + i] / l->ws[c];
            const long v = stoch ? (long)floorf(r + u) : lrintf(r);
            l->wq[c * per + i] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
            if (l->wlo) { /* the residual on w_scale / 256: |r - wq| <= 1/2 (but at a clamp), lo in [-128, 127] */
                const long lo = lrint(((double)r - l->wq[c * per + i]) * 256.0);
                l->wlo[c * per + i] = (int8_t)(lo > 127 ? 127 : lo < -128 ? -128 : lo);
            }
        }
    }
    if (l->wlo) { /* both parts as one weight tensor of 2M outputs (wq's then wlo's) */
        const size_t nw = (size_t)l->M * l->K;
        memcpy(l->w2, l->wq, nw);
        memcpy(l->w2 + nw, l->wlo, nw);
    }
    for (int m = 0; m < l->M && l->has_bias; m++) {
        const double bs = (double)(l->L.x_scale * l->ws[l->wc > 1 ? m : 0]);
        const double v = nearbyint((double)l->b[m] / bs);
        if (!(fabs(v) <= 2147483647.0))
            return tsr_err(TSR_EBOUNDS, "node \"%s\" (%s): bias %d (%g) does not fit int32 at x_scale * w_scale = "
                           "%g: the fixed-point update overflowed (lower --lr)", TSR_SAFE(l->L.node), l->L.op, m,
                           (double)l->b[m], bs);
        l->bq[m] = (int32_t)v;
        if (l->b16)
            l->b16[m] = (int64_t)nearbyint((double)l->b[m] / (bs / 256.0));
    }
    int rc = tsr_onnx_lowered_requant(tr->m, &l->L, l->ws, l->mult, l->shift, l->fscale, &l->has_fscale);
    return rc ? node_err(rc, l, "requantization of the new weights") : 0;
}

/* ---- the update on the device ALU (device_update; jit/tsr_sgd.h) ---- */

#define DEV_FRAC 15  /* fractional bits of the weights' master copy: |w_m| <= 128 * 2^15 = 2^22, three planes */
#define BIAS_FRAC 20 /* at most, for a bias (four planes) */

/* One tensor's gradient multiplier r >= 0 as (mg, sg) for tsr_sgd_step. */
static int dev_mult(const trl_t *l, double r, int32_t *mg, int *sg, const char *what)
{
    int rc = tsr_sgd_multiplier(r, -30, mg, sg);
    return rc ? tsr_err(TSR_EBOUNDS, "node \"%s\" (%s): the %s gradient's multiplier %g needs more than 30 bits of "
                        "left shift (the device update)", TSR_SAFE(l->L.node), l->L.op, what, r) : 0;
}

static int dev_init_layer(tsr_trainer_t *tr, trl_t *l);

/* Per-channel multipliers r [n] >= 0 as mg [n] on one shift sg: the largest's (mg < 2^31), the others on it
   (mg_c = round(r_c * 2^31 * 2^sg): the bits a smaller scale's multiplier has fewer, it keeps 31 - log2 of the
   ratio) */
static int dev_mults(const trl_t *l, const double *r, int n, int32_t *mg, int *sg, const char *what)
{
    double rmax = 0;
    for (int c = 0; c < n; c++)
        rmax = r[c] > rmax ? r[c] : rmax;
    int32_t m0;
    int rc = dev_mult(l, rmax, &m0, sg, what);
    for (int c = 0; c < n && !rc; c++) {
        const long long v = m0 ? llround(ldexp(r[c], 31 + *sg)) : 0;
        mg[c] = (int32_t)(v > INT32_MAX ? INT32_MAX : v);
    }
    return rc;
}

/* One update of a tensor's state: its gradient multipliers r [l->wc] (one per tensor or per output channel)
   on the device, the new int8 values into q. */
static int dev_step(tsr_trainer_t *tr, const trl_t *l, tsr_sgd_t *g, const int32_t *graw, const double *r,
                    int32_t *mg, const char *what, void *q)
{
    int sg, rc;
    if (l->wc == 1)
        return (rc = dev_mult(l, r[0], &mg[0], &sg, what)) ? rc
                                                           : tsr_sgd_step(g, graw, mg[0], sg, q, &tr->upd_cycles);
    return (rc = dev_mults(l, r, l->wc, mg, &sg, what)) ? rc : tsr_sgd_step_ch(g, graw, mg, sg, q, &tr->upd_cycles);
}

/* The step's update of layer l on the device: the weights over their scales (one per tensor, or one per
   output channel, wc == M, each channel's multipliers over its own w_scale[m]), then the bias. */
static int dev_update(tsr_trainer_t *tr, trl_t *l)
{
    int rc;
    /* (at the first step: the inference measured before is not charged with the state) */
    if (!l->sgd_w && (rc = dev_init_layer(tr, l)))
        return rc;
    const size_t nw = (size_t)l->M * (size_t)l->K;
    const int n = l->wc;
    double *r = malloc(sizeof *r * (size_t)n);
    int32_t *mg = malloc(sizeof *mg * (size_t)n);
    int8_t *nq = malloc(nw);
    rc = r && mg && nq ? 0 : tsr_err(TSR_ENOMEM, "out of memory");
    for (int c = 0; c < n && !rc; c++)
        r[c] = (double)l->s_dy * l->L.x_scale / l->ws[c] * (double)(1 << DEV_FRAC);
    if (!rc)
        rc = dev_step(tr, l, l->sgd_w, l->gwi, r, mg, "weight", nq);
    for (size_t i = 0; i < nw && !rc; i++) {
        tr->upd_n++;
        tr->upd_moved += nq[i] != l->wq[i];
        l->wq[i] = nq[i];
        l->w[i] = (float)(nq[i] * (double)l->ws[n > 1 ? i / (size_t)l->K : 0]);
    }
    for (int c = 0; c < n && !rc && l->sgd_b; c++)
        r[c] = (double)l->s_dy / ((double)l->L.x_scale * l->ws[c]) * ldexp(1.0, l->fb);
    if (!rc && l->sgd_b && !(rc = dev_step(tr, l, l->sgd_b, l->gbi, r, mg, "bias", l->bq)))
        for (int m = 0; m < l->M; m++)
            l->b[m] = (float)((double)l->bq[m] * ((double)l->L.x_scale * l->ws[n > 1 ? m : 0]));
    free(r), free(mg), free(nq);
    return rc ? node_err(rc, l, "the update on the device") : 0;
}

/* The bias's fractional bits: its int32 values (the file's, with 16x room to grow) within 2^(30 - fb), at most
   BIAS_FRAC; -1 when even fb 0 leaves no room. */
static int bias_frac(const trl_t *l)
{
    int64_t amax = 1 << 12;
    for (int m = 0; m < l->M; m++)
        amax = llabs((long long)l->bq[m]) * 16 > amax ? llabs((long long)l->bq[m]) * 16 : amax;
    int fb = BIAS_FRAC;
    while (fb >= 0 && amax > (INT64_C(1) << (30 - fb)) - 1)
        fb--;
    return fb;
}

/* The parameters of the layer's weights' (bias 0) or bias's (1) update. */
static int dev_params(const tsr_trainer_t *tr, const trl_t *l, int bias, tsr_sgd_params_t *p)
{
    int32_t mlr, mmu = (int32_t)fmin(llround(tr->o.momentum * 2147483648.0), 2147483647.0);
    int slr;
    if (tsr_sgd_multiplier(tr->o.lr, 0, &mlr, &slr))
        return node_err(TSR_EINVAL, l, "the device update's learning rate");
    const int64_t chans = l->wc > 1 ? l->M : 0; /* per-channel scales: a multiplier per output channel */
    if (!bias)
        *p = (tsr_sgd_params_t){.n = (int64_t)l->M * l->K, .frac = DEV_FRAC, .mmu = mmu, .mlr = mlr, .slr = slr,
                                .w_lo = -(128 << DEV_FRAC), .w_hi = (127 << DEV_FRAC) + (1 << (DEV_FRAC - 1)) - 1,
                                .q_lo = -128, .q_hi = 127, .q_bytes = 1, .planes = 3, .chans = chans,
                                .transient = 1};
    else
        *p = (tsr_sgd_params_t){.n = l->M, .frac = l->fb, .mmu = mmu, .mlr = mlr, .slr = slr, .w_lo = -TSR_SGD_LIM,
                                .w_hi = TSR_SGD_LIM - 1, .q_lo = -(TSR_SGD_LIM >> l->fb),
                                .q_hi = (TSR_SGD_LIM >> l->fb) - 1, .q_bytes = 4, .planes = 4, .chans = chans,
                                .transient = 1};
    return 0;
}

/* The layer's state on the device: the master copy from the current int8 weights and bias, momentum 0. */
static int dev_init_layer(tsr_trainer_t *tr, trl_t *l)
{
    const size_t nw = (size_t)l->M * (size_t)l->K;
    tsr_sgd_params_t p;
    int rc = dev_params(tr, l, 0, &p);
    if (rc)
        return rc;
    l->sgd_w = calloc(1, sizeof *l->sgd_w);
    int32_t *w0 = malloc(sizeof(int32_t) * (nw > (size_t)l->M ? nw : (size_t)l->M));
    if (!l->sgd_w || !w0)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    for (size_t i = 0; i < nw && !rc; i++)
        w0[i] = (int32_t)l->wq[i] * (1 << DEV_FRAC);
    if (!rc && (rc = tsr_sgd_init(l->sgd_w, tr->dev, &p, w0)))
        free(l->sgd_w), l->sgd_w = NULL;
    if (!rc && l->has_bias && !(rc = dev_params(tr, l, 1, &p))) {
        for (int m = 0; m < l->M; m++)
            w0[m] = l->bq[m] * (1 << l->fb);
        if (!(l->sgd_b = calloc(1, sizeof *l->sgd_b)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        else if ((rc = tsr_sgd_init(l->sgd_b, tr->dev, &p, w0)))
            free(l->sgd_b), l->sgd_b = NULL;
    }
    free(w0);
    return rc ? node_err(rc, l, "the device update's state") : 0;
}

int tsr_train_device_update_init(tsr_trainer_t *tr)
{
    int32_t mlr;
    int slr;
    /* what the operator would refuse at the first update, refused before any step */
    if (tsr_sgd_config_check(&tr->cfg))
        return tsr_err_prefix(TSR_ECONFIG, "--update device: ");
    for (int j = 0; j < tr->nc; j++) {
        trl_t *l = &tr->c[j];
        if (!l->trainable)
            continue;
        if (l->wc > 1 && l->wc != l->M)
            return tsr_err(TSR_EINVAL, "--update device: node \"%s\" (%s) has %d weight scales for %d output "
                           "channels; the device update takes one per tensor or one per output channel",
                           TSR_SAFE(l->L.node), l->L.op, l->wc, l->M);
        if (tsr_sgd_multiplier(tr->o.lr, 0, &mlr, &slr) || mlr == 0)
            return tsr_err(TSR_EINVAL, "--lr %g: the device update of node \"%s\" (%s) needs 2^-32 <= lr < 1 (a "
                           "multiplier below 1: v up to 2^30 times lr must stay in int32)", tr->o.lr,
                           TSR_SAFE(l->L.node), l->L.op);
        if (l->has_bias && (l->fb = bias_frac(l)) < 0)
            return tsr_err(TSR_EINVAL, "--update device: node \"%s\" (%s): its int32 bias is too large for the "
                           "device update's fixed point (|b| * 16 over 2^30)", TSR_SAFE(l->L.node), l->L.op);
        tsr_sgd_params_t p;
        int rc = dev_params(tr, l, 0, &p);
        if (!rc && !(rc = tsr_sgd_check(&p)) && l->has_bias && !(rc = dev_params(tr, l, 1, &p)))
            rc = tsr_sgd_check(&p);
        if (rc)
            return tsr_err_prefix(rc, "--update device: node \"%s\" (%s): ", TSR_SAFE(l->L.node), l->L.op);
        /* the integer gradients the backward keeps for the update (the state itself at the first update) */
        l->gwi = calloc((size_t)l->M * (size_t)l->K, sizeof *l->gwi);
        l->gbi = calloc((size_t)l->M, sizeof *l->gbi);
        if (!l->gwi || !l->gbi)
            return tsr_err(TSR_ENOMEM, "out of memory");
    }
    return 0;
}

int tsr_train_update(tsr_trainer_t *tr)
{
    const float lr = (float)tr->o.lr, mu = (float)tr->o.momentum;
    for (int j = 0; j < tr->nc; j++) {
        trl_t *l = &tr->c[j];
        if (!l->trainable)
            continue;
        if (tr->o.device_update) {
            int rc = dev_update(tr, l);
            if (rc)
                return rc;
            continue;
        }
        if (tr->o.int8_update) { /* the int8 values themselves, their scales fixed */
            for (size_t i = 0; i < (size_t)l->M * l->K; i++) {
                const float ws = l->ws[l->wc > 1 ? i / (size_t)l->K : 0];
                l->vw[i] = mu * l->vw[i] + l->gw[i];
                const float nw = (float)l->wq[i] - lr * l->vw[i] / ws;
                if (!isfinite(nw))
                    return tsr_err(TSR_EINVAL, "node \"%s\" (%s): the weights are no longer finite (the learning "
                                   "rate is too large)", TSR_SAFE(l->L.node), l->L.op);
                const long q = lrintf(fmaxf(fminf(nw, 127.0f), -128.0f));
                const int8_t nq = (int8_t)(q > 127 ? 127 : q < -128 ? -128 : q);
                tr->upd_n++;
                tr->upd_moved += nq != l->wq[i];
                l->wq[i] = nq;
                l->w[i] = (float)l->wq[i] * ws;
            }
            for (int m = 0; m < l->M && l->has_bias; m++) {
                const double bs = (double)(l->L.x_scale * l->ws[l->wc > 1 ? m : 0]);
                l->vb[m] = mu * l->vb[m] + l->gb[m];
                const double q = nearbyint((double)l->bq[m] - (double)lr * l->vb[m] / bs);
                if (!(fabs(q) <= 2147483647.0))
                    return tsr_err(TSR_EBOUNDS, "node \"%s\" (%s): bias %d does not fit int32: the fixed-point "
                                   "update overflowed (lower --lr)", TSR_SAFE(l->L.node), l->L.op, m);
                l->bq[m] = (int32_t)q;
                l->b[m] = (float)((double)l->bq[m] * bs);
            }
            continue;
        }
        for (size_t i = 0; i < (size_t)l->M * l->K; i++) {
            l->vw[i] = mu * l->vw[i] + l->gw[i];
            l->w[i] -= lr * l->vw[i];
        }
        for (int m = 0; m < l->M && l->has_bias; m++) {
            l->vb[m] = mu * l->vb[m] + l->gb[m];
            l->b[m] -= lr * l->vb[m];
        }
        int rc = tsr_train_requantize(tr, l);
        if (rc)
            return rc;
    }
    return 0;
}
