/*
 * test_train: on-device training's internals (train/tsr_train.h) on the
 * digits CNN the build trains (build/digits/digits_qdq.onnx, fine-tuned on
 * the rotated digits of build/digits/shifted).
 *
 *  - test_grads_vs_float: one step's gradients of conv2 and fc (trainable
 *    part conv2, relu, maxpool, fc) against a plain-C double reference
 *    written here from the formulas: the same quantized activations (the
 *    trainer's), the dequantized weights, exact softmax cross-entropy,
 *    backward without any quantization. The trainer quantizes each output
 *    gradient to int8 (per tensor, scale s = max|g| / 127): every gradient
 *    element must lie within the error those roundings allow (|e| <= s/2
 *    per element, carried through the sums), and the gradients must point
 *    the same way (cosine > 0.999 for fc, > 0.99 for conv2).
 *  - test_grads_split: --grad-bits 16 (grad_split): fc's dW within the
 *    rounding of the low part (s_dy / 254 / 2 per element, carried through
 *    the sums) of the same double reference; the 8-bit gradient is not.
 *  - test_weight_round: --weight-round stochastic: the master copy's
 *    re-quantization unbiased (a weight a quarter step past a grid point
 *    rounds up a quarter of the time; to nearest it never does), the tuned
 *    file's last one to nearest.
 *  - test_forward_wide: --weight-bits 16: conv2's and fc's forward outputs
 *    within the 16-bit grid's error of a double reference from the float
 *    master weights (moved off the int8 grid); the int8 forward is not.
 *  - test_loss_exact: --loss-logits exact's loss against a double reference
 *    from the fc's int8 weights and int32 bias.
 *  - test_device_equals_host: the device's backward GEMMs (jit/tsr_grad.h)
 *    and the host reference give the same gradients, bit for bit.
 *  - test_step_moves_loss: a few steps on one batch lower its loss
 *    (the update goes against the gradient), the tuned model's file loads
 *    and holds the new weights and scales.
 *  - test_host_update: one step of the host update (float32 master copy)
 *    against a plain reference: the file's scale kept, the master copy
 *    clamped to its grid's range, the int8 weights to nearest.
 *  - test_mem_usage: the driver's DRAM high-water mark (tsr_mem_usage).
 *  - test_refusals: bad options and data, each refused with its message.
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
#include "tsr_train_int.h"
#include "tsr_util.h"

#ifndef TSR_DIGITS_DIR
#error "TSR_DIGITS_DIR: the build's digits directory (scripts/train/tests.cmake)"
#endif
#define MODEL TSR_DIGITS_DIR "/digits_qdq.onnx"
#define DATA TSR_DIGITS_DIR "/shifted/train_x.npy"
#define LABELS TSR_DIGITS_DIR "/shifted/train_y.npy"

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

static void load_data(tsr_tensor_t *x, tsr_tensor_t *y)
{
    if (tsr_npy_read(DATA, x) || tsr_npy_read(LABELS, y))
        fail_msg("%s", tsr_errmsg());
}

/* The data, and its first 16 samples as their own tensors (one batch). */
static void load_first16(tsr_tensor_t *x, tsr_tensor_t *y, tsr_tensor_t *xs, tsr_tensor_t *ys)
{
    load_data(x, y);
    int64_t shx[4] = {16, 1, 8, 8}, shy[1] = {16};
    assert_int_equal(tsr_tensor_alloc(xs, TSR_DT_FLOAT32, 4, shx), 0);
    assert_int_equal(tsr_tensor_alloc(ys, TSR_DT_INT32, 1, shy), 0);
    memcpy(xs->data, x->data, 16 * 64 * sizeof(float));
    memcpy(ys->data, y->data, 16 * sizeof(int32_t));
}

static tsr_trainer_t *open_trainer(tsr_device_t *dev, const char *layers, int batch, int host)
{
    tsr_train_opts_t o = {.trainable = layers, .epochs = 1, .batch = batch, .lr = 0.01, .momentum = 0.9,
                          .seed = 1, .host_backward = host};
    tsr_trainer_t *tr = NULL;
    if (tsr_train_open(MODEL, dev, &o, &tr))
        fail_msg("tsr_train_open: %s", tsr_errmsg());
    return tr;
}

static double dq(const tsr_train_view_t *v, const uint8_t *p, size_t i, int x)
{
    return ((double)p[i] - (x ? v->x_zp : v->y_zp)) * (x ? v->x_scale : v->y_scale);
}

static double cosine(const float *a, const double *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++)
        ab += a[i] * b[i], aa += (double)a[i] * a[i], bb += b[i] * b[i];
    return ab / sqrt(aa * bb + 1e-300);
}

/* ------------------------------------------------------------------ the float reference */

static void test_grads_vs_float(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    tsr_trainer_t *tr = open_trainer(dev, "conv2,fc", 8, 1);
    tsr_tensor_t x = {0}, y = {0};
    load_data(&x, &y);
    double loss = 0;
    const int n = 8;
    if (tsr_train_grads(tr, &x, &y, n, &loss))
        fail_msg("tsr_train_grads: %s", tsr_errmsg());
    assert_int_equal(tsr_train_nlayers(tr), 3);
    tsr_train_view_t vc, vp, vf;
    assert_int_equal(tsr_train_view(tr, 0, &vc), 0);
    assert_int_equal(tsr_train_view(tr, 1, &vp), 0);
    assert_int_equal(tsr_train_view(tr, 2, &vf), 0);
    assert_int_equal(vc.L->kind, TSR_OXL_CONV);
    assert_int_equal(vp.L->kind, TSR_OXL_MAXPOOL);
    assert_int_equal(vf.L->kind, TSR_OXL_DENSE);
    const int C = vf.m, K = vf.k; /* 10, 512 */
    float osc;
    int32_t ozp;
    tsr_train_logits_q(tr, &osc, &ozp);

    /* softmax cross-entropy of the logits the trainer's forward produced */
    double *dz = calloc((size_t)n * C, sizeof *dz), rloss = 0;
    for (int s = 0; s < n; s++) {
        double z[16] = {0}, mx = -1e300, sum = 0;
        for (int c = 0; c < C; c++)
            z[c] = ((double)vf.y[s * C + c] - ozp) * osc, mx = fmax(mx, z[c]);
        for (int c = 0; c < C; c++)
            sum += exp(z[c] - mx);
        const int lab = ((const int32_t *)y.data)[s];
        rloss += -(z[lab] - mx - log(sum)) / n;
        for (int c = 0; c < C; c++)
            dz[s * C + c] = (exp(z[c] - mx) / sum - (c == lab)) / n;
    }
    assert_true(fabs(rloss - loss) < 1e-4);

    /* fc: dW = dz^T x, db = sum dz, dX = dz W; bounds from the rounding of dz (s_dy / 2 each) */
    double *gw = calloc((size_t)C * K, sizeof *gw), *gx = calloc((size_t)n * K, sizeof *gx);
    double *ex = calloc((size_t)n * K, sizeof *ex);
    int bad = 0;
    for (int m = 0; m < C; m++) {
        double gb = 0;
        for (int s = 0; s < n; s++)
            gb += dz[s * C + m];
        if (fabs(gb - vf.gb[m]) > 1e-6)
            bad++, print_error("fc db[%d] %g, reference %g\n", m, (double)vf.gb[m], gb);
        for (int k = 0; k < K; k++) {
            double g = 0, bound = 0;
            for (int s = 0; s < n; s++) {
                const double xr = dq(&vf, vf.x, (size_t)s * K + k, 1);
                g += dz[s * C + m] * xr;
                bound += fabs(xr) * vf.s_dy / 2;
            }
            gw[m * K + k] = g;
            if (fabs(g - vf.gw[m * K + k]) > bound * 1.001 + 1e-7)
                bad++, print_error("fc dW[%d][%d] %g, reference %g, bound %g\n", m, k, (double)vf.gw[m * K + k], g,
                                   bound);
        }
    }
    const double cf = cosine(vf.gw, gw, (size_t)C * K);
    print_message("fc: dW cosine %.6f with the float reference, dz scale %g\n", cf, (double)vf.s_dy);
    assert_true(cf > 0.999);
    for (int s = 0; s < n; s++)
        for (int k = 0; k < K; k++)
            for (int m = 0; m < C; m++) {
                gx[s * K + k] += dz[s * C + m] * vf.w[m * K + k];
                ex[s * K + k] += fabs(vf.w[m * K + k]) * vf.s_dy / 2; /* (per-tensor weights: dX uses dz's rounding) */
            }

    /* max pool: each output's gradient to the first largest input of its 2x2 window; then conv2's relu */
    const tsr_pool_params_t *pp = &vp.L->pool;
    const int PC = pp->c, H = pp->h, W = pp->w, OH = H / 2, OW = W / 2;
    assert_int_equal((int)vp.y_elems, K);
    const size_t ny = vc.y_elems; /* 32 * 8 * 8 */
    double *gy = calloc((size_t)n * ny, sizeof *gy), *ey = calloc((size_t)n * ny, sizeof *ey);
    for (int s = 0; s < n; s++)
        for (int c = 0; c < PC; c++)
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    int best = -1;
                    size_t at = 0;
                    for (int ky = 0; ky < 2; ky++)
                        for (int kx = 0; kx < 2; kx++) {
                            const size_t i = (((size_t)s * PC + c) * H + oy * 2 + ky) * W + ox * 2 + kx;
                            if (vp.x[i] > best)
                                best = vp.x[i], at = i;
                        }
                    const size_t o = (((size_t)s * PC + c) * OH + oy) * OW + ox;
                    gy[at] += gx[o];
                    ey[at] += ex[o];
                }
    for (size_t i = 0; i < (size_t)n * ny; i++)
        if (vc.y[i] <= vc.act_min)
            gy[i] = 0, ey[i] = 0;
    /* conv2: dW[o][c][ky][kx] = sum dY[s][o][y][x] * x[s][c][y+ky-1][x+kx-1]; bound: the dY error (carried
       from fc) plus conv2's own rounding of dY (s_dy / 2), times |x| */
    const tsr_conv2d_params_t *cp = &vc.L->conv;
    const int O = cp->c_out, CI = cp->c_in, KH = cp->kh, KW = cp->kw, IH = cp->h, IW = cp->w;
    const size_t nw = (size_t)O * CI * KH * KW;
    double *gc = calloc(nw, sizeof *gc), *bc = calloc(nw, sizeof *bc);
    for (int s = 0; s < n; s++)
        for (int o = 0; o < O; o++)
            for (int yy = 0; yy < IH; yy++)
                for (int xx = 0; xx < IW; xx++) {
                    const size_t yi = (((size_t)s * O + o) * IH + yy) * IW + xx;
                    if (!gy[yi] && !ey[yi])
                        continue;
                    for (int c = 0; c < CI; c++)
                        for (int ky = 0; ky < KH; ky++)
                            for (int kx = 0; kx < KW; kx++) {
                                const int iy = yy + ky - cp->pad_top, ix = xx + kx - cp->pad_left;
                                if (iy < 0 || iy >= IH || ix < 0 || ix >= IW)
                                    continue;
                                const double xr = dq(&vc, vc.x, (((size_t)s * CI + c) * IH + iy) * IW + ix, 1);
                                const size_t wi = (((size_t)o * CI + c) * KH + ky) * KW + kx;
                                gc[wi] += gy[yi] * xr;
                                bc[wi] += (ey[yi] + vc.s_dy / 2) * fabs(xr);
                            }
                }
    for (size_t i = 0; i < nw; i++)
        if (fabs(gc[i] - vc.gw[i]) > bc[i] * 1.001 + 1e-7)
            bad++, print_error("conv2 dW[%zu] %g, reference %g, bound %g\n", i, (double)vc.gw[i], gc[i], bc[i]);
    const double cc = cosine(vc.gw, gc, nw);
    double bnorm = 0, gnorm = 0;
    for (size_t i = 0; i < nw; i++)
        bnorm += bc[i] * bc[i], gnorm += gc[i] * gc[i];
    print_message("conv2: dW cosine %.6f with the float reference, bound / gradient norm %.3f\n", cc,
                  sqrt(bnorm / gnorm));
    assert_true(cc > 0.99);
    assert_true(sqrt(bnorm / gnorm) < 1.0); /* the bounds are not vacuous */
    assert_int_equal(bad, 0);
    free(dz), free(gw), free(gx), free(ex), free(gy), free(ey), free(gc), free(bc);
    tsr_tensor_free(&x), tsr_tensor_free(&y);
    tsr_train_free(tr);
    tsr_device_close(dev);
}

/* ------------------------------------------------------------------ device == host */

static void grads_of(const char *layers, int host, float **gw, size_t *nw)
{
    tsr_device_t *dev = open_dev();
    tsr_trainer_t *tr = open_trainer(dev, layers, 16, host);
    tsr_tensor_t x = {0}, y = {0};
    load_data(&x, &y);
    double loss;
    if (tsr_train_grads(tr, &x, &y, 16, &loss))
        fail_msg("tsr_train_grads (%s backward): %s", host ? "host" : "device", tsr_errmsg());
    size_t tot = 0;
    for (int j = 0; j < tsr_train_nlayers(tr); j++) {
        tsr_train_view_t v;
        tsr_train_view(tr, j, &v);
        tot += v.trainable ? (size_t)v.m * v.k + (size_t)v.m : 0;
    }
    *gw = malloc(sizeof(float) * tot);
    *nw = 0;
    for (int j = 0; j < tsr_train_nlayers(tr); j++) {
        tsr_train_view_t v;
        tsr_train_view(tr, j, &v);
        if (!v.trainable)
            continue;
        memcpy(*gw + *nw, v.gw, sizeof(float) * (size_t)v.m * v.k);
        memcpy(*gw + *nw + (size_t)v.m * v.k, v.gb, sizeof(float) * (size_t)v.m);
        *nw += (size_t)v.m * v.k + (size_t)v.m;
    }
    tsr_tensor_free(&x), tsr_tensor_free(&y);
    tsr_train_free(tr);
    tsr_device_close(dev);
}

/* A trainer of fc alone (batch 8, the given option set on top of the defaults) after one tsr_train_grads on
 * the first 8 samples, whose data x and labels y it leaves for the caller to free. */
static tsr_trainer_t *fc_grads(tsr_device_t *dev, tsr_train_opts_t o, tsr_tensor_t *x, tsr_tensor_t *y, double *loss)
{
    o.trainable = "fc", o.epochs = 1, o.batch = 8, o.lr = 0.01, o.momentum = 0.9, o.seed = 1;
    tsr_trainer_t *tr = NULL;
    if (tsr_train_open(MODEL, dev, &o, &tr))
        fail_msg("tsr_train_open: %s", tsr_errmsg());
    load_data(x, y);
    if (tsr_train_grads(tr, x, y, 8, loss))
        fail_msg("tsr_train_grads: %s", tsr_errmsg());
    return tr;
}

/* --loss-logits exact: the loss of the fc's exact outputs, against a plain double reference from the
   same quantized input and the fc's int8 weights and int32 bias (round(w / w_scale), as the forward
   uses them); the default's loss (the 8-bit logits) is further from it by their rounding */
static double fc_loss(tsr_device_t *dev, int exact, double *ref)
{
    tsr_tensor_t x = {0}, y = {0};
    double loss = 0;
    const int n = 8;
    tsr_trainer_t *tr = fc_grads(dev, (tsr_train_opts_t){.loss_exact = exact}, &x, &y, &loss);
    tsr_train_view_t v;
    assert_int_equal(tsr_train_view(tr, tsr_train_nlayers(tr) - 1, &v), 0);
    assert_int_equal(v.L->kind, TSR_OXL_DENSE);
    const int C = v.m, K = v.k;
    *ref = 0;
    for (int s = 0; s < n; s++) {
        double z[64], mx = -1e300, sum = 0;
        assert_true(C <= 64);
        for (int c = 0; c < C; c++) {
            const double ws = v.L->w_scale[v.L->w_count > 1 ? c : 0], bs = (double)v.x_scale * ws;
            double acc = v.b ? nearbyint(v.b[c] / bs) : 0;
            for (int k = 0; k < K; k++)
                acc += ((double)v.x[(size_t)s * K + k] - v.x_zp) * fmax(-127, fmin(127, nearbyint(v.w[c * K + k] / ws)));
            z[c] = acc * bs;
            mx = fmax(mx, z[c]);
        }
        for (int c = 0; c < C; c++)
            sum += exp(z[c] - mx);
        *ref += -(z[((const int32_t *)y.data)[s]] - mx - log(sum)) / n;
    }
    tsr_train_free(tr);
    tsr_tensor_free(&x), tsr_tensor_free(&y);
    return loss;
}

static void test_loss_exact(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    double ref_e, ref_q;
    const double le = fc_loss(dev, 1, &ref_e), lq = fc_loss(dev, 0, &ref_q);
    print_message("fc loss on 8 samples: exact logits %.6f, 8-bit logits %.6f, reference %.6f\n", le, lq, ref_e);
    assert_true(fabs(ref_e - ref_q) < 1e-12); /* the same step */
    assert_true(fabs(le - ref_e) < 1e-4); /* (the trainer keeps the logits in float) */
    assert_true(fabs(lq - ref_e) > fabs(le - ref_e));
    tsr_device_close(dev);
}

/* fc's dW of one step on 8 samples (trainable fc alone, device backward) against the double reference from
 * the trainer's own logits and input: the number of elements past the split's bound (s_dy / 508 per |x|). */
static int fc_split_bad(tsr_device_t *dev, int split)
{
    tsr_tensor_t x = {0}, y = {0};
    double loss = 0;
    const int n = 8;
    tsr_trainer_t *tr = fc_grads(dev, (tsr_train_opts_t){.grad_split = split}, &x, &y, &loss);
    tsr_train_view_t vf;
    assert_int_equal(tsr_train_view(tr, tsr_train_nlayers(tr) - 1, &vf), 0);
    const int C = vf.m, K = vf.k;
    float osc;
    int32_t ozp;
    tsr_train_logits_q(tr, &osc, &ozp);
    int bad = 0;
    for (int m = 0; m < C; m++)
        for (int k = 0; k < K; k++) {
            double g = 0, bound = 0;
            for (int s = 0; s < n; s++) {
                double z[16] = {0}, mx = -1e300, sum = 0;
                for (int c = 0; c < C; c++)
                    z[c] = ((double)vf.y[s * C + c] - ozp) * osc, mx = fmax(mx, z[c]);
                for (int c = 0; c < C; c++)
                    sum += exp(z[c] - mx);
                const double dz = (exp(z[m] - mx) / sum - (m == ((const int32_t *)y.data)[s])) / n;
                const double xr = dq(&vf, vf.x, (size_t)s * K + k, 1);
                g += dz * xr;
                bound += fabs(xr) * vf.s_dy / 254 / 2;
            }
            bad += fabs(g - vf.gw[m * K + k]) > bound * 1.001 + 1e-9;
        }
    tsr_tensor_free(&x), tsr_tensor_free(&y);
    tsr_train_free(tr);
    return bad;
}

static void test_grads_split(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    const int b16 = fc_split_bad(dev, 1), b8 = fc_split_bad(dev, 0);
    print_message("fc dW past the 16-bit split's bound: %d with --grad-bits 16, %d with 8\n", b16, b8);
    assert_int_equal(b16, 0);
    assert_true(b8 > 100); /* the bound is tight enough to tell */
    tsr_device_close(dev);
}

static void test_weight_round(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    tsr_train_opts_t o = {.trainable = "fc", .epochs = 1, .batch = 8, .lr = 0.01, .momentum = 0.9, .seed = 1,
                          .weight_stochastic = 1};
    tsr_trainer_t *tr = NULL;
    if (tsr_train_open(MODEL, dev, &o, &tr))
        fail_msg("tsr_train_open: %s", tsr_errmsg());
    trl_t *l = &tr->c[tr->nc - 1];
    assert_true(l->trainable && l->L.kind == TSR_OXL_DENSE);
    const size_t n = (size_t)l->M * l->K, per = n / (size_t)l->wc;
    for (int c = 0; c < l->wc; c++) /* the scale 1: w / s = w exactly */
        l->ws[c] = 1;
    for (size_t i = 0; i < n; i++)
        l->w[i] = i % per ? (float)((int)(i % 7) - 3) + 0.25f : 127.5f;
    const int R = 1000;
    double *up = calloc(n, sizeof *up);
    for (int r = 0; r < R; r++) {
        assert_int_equal(tsr_train_requantize(tr, l), 0);
        for (size_t i = 0; i < n; i++)
            up[i] += l->wq[i] - floorf(l->w[i]);
    }
    double mean = 0, worst = 0;
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++)
        if (i % per)
            mean += up[i] / R, worst = fmax(worst, fabs(up[i] / R - 0.25)), cnt++;
    mean /= (double)cnt;
    print_message("stochastic: a weight 0.25 past a grid point rounds up %.4f of the time (worst of %zu: %.4f "
                  "off)\n", mean, cnt, worst);
    assert_true(fabs(mean - 0.25) < 0.005);
    assert_true(worst < 0.07); /* (5.1 standard deviations of 1000 draws) */
    tr->wround_final = 1;
    assert_int_equal(tsr_train_requantize(tr, l), 0);
    for (size_t i = 0; i < n; i++)
        if (i % per && l->wq[i] != (int8_t)lrintf(l->w[i]))
            fail_msg("final weight %zu: %d, not %g to nearest", i, l->wq[i], (double)l->w[i]);
    free(up);
    tsr_train_free(tr);
    tsr_device_close(dev);
}

/* --weight-bits 16: conv2's and fc's forward outputs (trainable conv2, relu, maxpool, fc) against a plain
 * double reference from the float32 master weights themselves, moved off the int8 grid by up to 0.45 of a
 * step: sum over the layer's kept input of (x - x_zp) x_scale w + b, over y_scale, rounded, the zero point,
 * the clamp. The 16-bit grid (w_scale / 256) puts every output within its error bound of the reference
 * (x_scale SUM |x - x_zp| w_scale / 512 + the bias's, over y_scale, + 1/2 for the output's rounding); the int8
 * forward (--weight-bits 8) is not. Returns the outputs past the bound, of *total. */
static int wide_bad(tsr_device_t *dev, int bits, int *total)
{
    tsr_train_opts_t o = {.trainable = "conv2,fc", .epochs = 1, .batch = 8, .lr = 0.01, .momentum = 0.9,
                          .seed = 1, .weight_bits = bits};
    tsr_trainer_t *tr = NULL;
    if (tsr_train_open(MODEL, dev, &o, &tr))
        fail_msg("tsr_train_open: %s", tsr_errmsg());
    uint64_t rs = 12345;
    for (int j = 0; j < tr->nc; j++) {
        trl_t *l = &tr->c[j];
        if (!l->trainable)
            continue;
        const size_t per = (size_t)l->M / (size_t)l->wc * (size_t)l->K;
        for (size_t i = 0; i < (size_t)l->M * l->K; i++) {
            const double u = (double)(tsr_splitmix64(&rs) >> 11) / 9007199254740992.0;
            l->w[i] += (float)((u - 0.5) * 0.9 * l->ws[i / per]);
        }
        for (int m = 0; m < l->M; m++)
            l->b[m] *= 1.01f;
        assert_int_equal(tsr_train_requantize(tr, l), 0);
    }
    tsr_tensor_t x = {0}, y = {0};
    load_data(&x, &y);
    double loss;
    if (tsr_train_grads(tr, &x, &y, 8, &loss))
        fail_msg("tsr_train_grads: %s", tsr_errmsg());
    int bad = 0;
    *total = 0;
    for (int j = 0; j < tr->nc; j++) {
        const trl_t *l = &tr->c[j];
        if (!l->trainable)
            continue;
        assert_true(bits == 16 ? l->wlo != NULL : l->wlo == NULL);
        tsr_train_view_t v;
        assert_int_equal(tsr_train_view(tr, j, &v), 0);
        const int conv = l->L.kind == TSR_OXL_CONV;
        const tsr_conv2d_params_t *c = &l->L.conv;
        const int C = conv ? c->c_in : l->K, H = conv ? c->h : 1, W = conv ? c->w : 1;
        const int KH = conv ? c->kh : 1, KW = conv ? c->kw : 1, OH = conv ? (H + c->pad_top + c->pad_bottom - KH) / c->stride_h + 1 : 1;
        const int OW = conv ? (W + c->pad_left + c->pad_right - KW) / c->stride_w + 1 : 1;
        for (int n = 0; n < v.n; n++)
            for (int m = 0; m < v.m; m++)
                for (int oy = 0; oy < OH; oy++)
                    for (int ox = 0; ox < OW; ox++) {
                        const double ws = l->ws[l->wc > 1 ? m : 0];
                        double acc = v.b[m] / v.x_scale, ax = 0;
                        for (int ci = 0; ci < C; ci++)
                            for (int ky = 0; ky < KH; ky++)
                                for (int kx = 0; kx < KW; kx++) {
                                    const int iy = conv ? oy * c->stride_h + ky - c->pad_top : 0;
                                    const int ix = conv ? ox * c->stride_w + kx - c->pad_left : 0;
                                    if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                        continue;
                                    const double xv =
                                        (double)v.x[(size_t)n * v.x_elems + ((size_t)ci * H + iy) * W + ix] - v.x_zp;
                                    acc += xv * v.w[(((size_t)m * C + ci) * KH + ky) * KW + kx];
                                    ax += fabs(xv);
                                }
                        const double r = acc * v.x_scale / v.y_scale + v.y_zp;
                        const double bound = ((ax + 1) * ws / 512) * v.x_scale / v.y_scale + 0.5 + 1e-6;
                        const double got = v.y[(size_t)n * v.y_elems + ((size_t)m * OH + oy) * OW + ox];
                        const double want = fmin(fmax(r, v.act_min), v.act_max);
                        bad += fabs(got - want) > bound;
                        ++*total;
                    }
    }
    tsr_tensor_free(&x), tsr_tensor_free(&y);
    tsr_train_free(tr);
    return bad;
}

static void test_forward_wide(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    int n16, n8;
    const int b16 = wide_bad(dev, 16, &n16), b8 = wide_bad(dev, 8, &n8);
    print_message("conv2 and fc outputs past the 16-bit grid's bound of the float weights: %d of %d with "
                  "--weight-bits 16, %d of %d with 8\n", b16, n16, b8, n8);
    assert_true(n16 > 1000);
    assert_int_equal(b16, 0);
    assert_true(b8 > n8 / 100); /* the bound is tight enough to tell */
    tsr_device_close(dev);
}

static void test_device_equals_host(void **state)
{
    (void)state;
    /* fc alone (dense dW), and conv2 with fc (dense dX, conv dW) */
    const char *sets[2] = {"fc", "conv2,fc"};
    for (int i = 0; i < 2; i++) {
        float *a, *b;
        size_t na, nb;
        grads_of(sets[i], 0, &a, &na);
        grads_of(sets[i], 1, &b, &nb);
        assert_int_equal(na, nb);
        assert_true(na > 5000);
        size_t nz = 0;
        for (size_t k = 0; k < na; k++) {
            if (memcmp(&a[k], &b[k], sizeof(float)))
                fail_msg("%s: gradient %zu: device %g, host %g", sets[i], k, (double)a[k], (double)b[k]);
            nz += a[k] != 0;
        }
        assert_true(nz > na / 2); /* (not all zero) */
        free(a), free(b);
    }
}

/* ------------------------------------------------------------------ steps, the file */

static void test_step_moves_loss(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    tsr_trainer_t *tr = open_trainer(dev, "fc", 16, 0);
    /* 16 samples, 5 epochs of one step each: the loss of that batch falls */
    tsr_tensor_t x = {0}, y = {0}, xs = {0}, ys = {0};
    load_first16(&x, &y, &xs, &ys);
    tsr_train_free(tr);
    tsr_train_opts_t o = {.trainable = "fc", .epochs = 5, .batch = 16, .lr = 0.02, .momentum = 0.5, .seed = 3};
    assert_int_equal(tsr_train_open(MODEL, dev, &o, &tr), 0);
    tsr_train_stats_t *st = calloc(1, sizeof *st);
    if (tsr_train_run(tr, &xs, &ys, st))
        fail_msg("tsr_train_run: %s", tsr_errmsg());
    assert_int_equal(st->epochs, 5);
    print_message("loss by epoch: %.4f %.4f %.4f %.4f %.4f\n", st->loss[0], st->loss[1], st->loss[2], st->loss[3],
                  st->loss[4]);
    assert_true(st->loss[4] < 0.7 * st->loss[0]);
    assert_true(st->bwd_device_macs > 0);
    assert_true(st->bwd_device_macs >= 9 * st->bwd_host_macs); /* >= 90% on the device */
    assert_true(st->peak_train > 0 && st->peak_infer > 0);
    /* the file: loads, and its fc is the trainer's */
    uint8_t *buf = NULL;
    size_t len = 0;
    if (tsr_train_pack(tr, &buf, &len))
        fail_msg("pack: %s", tsr_errmsg());
    tsr_onnx_t *m = NULL;
    if (tsr_onnx_load_buffer(buf, len, "tuned", 4, &m))
        fail_msg("load tuned: %s", tsr_errmsg());
    tsr_onnx_lowered_t *ls;
    int nls;
    assert_int_equal(tsr_onnx_lowered_ops(m, &ls, &nls), 0);
    tsr_train_view_t v;
    tsr_train_view(tr, 0, &v);
    int found = 0;
    for (int i = 0; i < nls; i++)
        if (ls[i].kind == TSR_OXL_DENSE) {
            found = 1;
            assert_int_equal(ls[i].w_count, 1);
            /* the master copy re-quantized on the input file's scale is what the file holds */
            const float ws = ls[i].w_scale[0];
            assert_true(ws == v.L->w_scale[0]);
            for (int k = 0; k < v.m * v.k; k++) {
                const long q = lrintf(v.w[k] / ws);
                assert_int_equal(((const int8_t *)ls[i].w)[k], q > 127 ? 127 : q < -128 ? -128 : q);
            }
        }
    assert_true(found);
    free(ls);
    tsr_onnx_free(m);
    free(buf);
    free(st);
    tsr_tensor_free(&x), tsr_tensor_free(&y), tsr_tensor_free(&xs), tsr_tensor_free(&ys);
    tsr_train_free(tr);
    tsr_device_close(dev);
}

/* --update device (jit/tsr_sgd.h): one step of 16 samples moves the int8 weights where the float update
 * w - lr g (v = g at the first step) moves them, to within the fixed point's last rounding: fails when
 * the step's gradient does not reach the device (no weight moves) or is scaled wrongly */
static void test_device_update(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    tsr_tensor_t x = {0}, y = {0}, xs = {0}, ys = {0};
    load_first16(&x, &y, &xs, &ys);
    const double lr = 0.3;
    tsr_train_opts_t o = {.trainable = "fc", .epochs = 1, .batch = 16, .lr = lr, .momentum = 0.9, .seed = 3,
                          .device_update = 1, .logits_fixed = 1};
    tsr_trainer_t *tr = NULL;
    if (tsr_train_open(MODEL, dev, &o, &tr))
        fail_msg("open: %s", tsr_errmsg());
    double loss;
    assert_int_equal(tsr_train_grads(tr, &xs, &ys, 16, &loss), 0);
    tsr_train_view_t v;
    tsr_train_view(tr, 0, &v);
    const int nw = v.m * v.k;
    const double ws = v.L->w_scale[0], bs = (double)v.L->x_scale * ws, sdy = v.s_dy;
    double *want = malloc(sizeof(double) * (size_t)(nw + v.m));
    for (int i = 0; i < nw; i++)
        want[i] = (double)v.w[i] / ws - lr * v.gw[i] / ws;
    for (int m = 0; m < v.m; m++)
        want[nw + m] = (double)v.b[m] / bs - lr * v.gb[m] / bs;
    tsr_train_stats_t *st = calloc(1, sizeof *st);
    if (tsr_train_run(tr, &xs, &ys, st))
        fail_msg("run: %s", tsr_errmsg());
    tsr_train_view(tr, 0, &v);
    int moved = 0, off = 0;
    for (int i = 0; i < nw; i++) {
        const long q = lrint(fmin(fmax(want[i], -128), 127)), got = lrint(v.w[i] / ws);
        off += got != q;
        if (labs(got - q) > 1)
            fail_msg("weight %d: %ld, the float update %.4f", i, got, want[i]);
    }
    for (int i = 0; i < nw; i++)
        moved += lrint(v.w[i] / ws) != lrint(want[i] + lr * v.gw[i] / ws);
    /* the bias's gradient is the int8 dy's sums: within 16 samples' half steps of s_dy */
    for (int m = 0; m < v.m; m++)
        if (fabs(v.b[m] / bs - want[nw + m]) > lr * 8 * sdy / bs + 1)
            fail_msg("bias %d: %.1f, the float update %.1f", m, v.b[m] / bs, want[nw + m]);
    print_message("--update device, one step: %d of %d weights moved, %d off the float update by 1\n", moved, nw,
                  off);
    assert_true(moved >= 100 && off * 100 <= nw);
    free(want), free(st);
    tsr_tensor_free(&x), tsr_tensor_free(&y), tsr_tensor_free(&xs), tsr_tensor_free(&ys);
    tsr_train_free(tr);
    tsr_device_close(dev);
}

/* The host update (the float32 master copy, the default): one step of 16 samples against a plain reference,
 * SGD's first step w - lr g in double, clamped to the range the file's int8 grid holds ([-128, 127.5] steps
 * of its scale, which stays the file's), the int8 weights that rounded to nearest. A fifth of fc's weights are
 * set 0.3 of a step inside either end of the range first, so the step pushes some past it. Fails when the
 * update re-fits the scale to max|w| / 127.5 (it did: the scale moved, a step with no gradient changed the
 * model) or leaves the master copy past the range the forward sees. */
static void test_host_update(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    tsr_tensor_t x = {0}, y = {0}, xs = {0}, ys = {0};
    load_first16(&x, &y, &xs, &ys);
    const double lr = 0.3;
    tsr_train_opts_t o = {.trainable = "fc", .epochs = 1, .batch = 16, .lr = lr, .momentum = 0.9, .seed = 3,
                          .logits_fixed = 1};
    tsr_trainer_t *tr = NULL;
    if (tsr_train_open(MODEL, dev, &o, &tr))
        fail_msg("open: %s", tsr_errmsg());
    trl_t *l = &tr->c[tr->nc - 1];
    assert_true(l->trainable && l->wc == 1);
    const double ws = l->ws[0];
    for (size_t i = 0; i < (size_t)l->M * l->K; i += 5)
        l->w[i] = (float)((i / 5 % 2 ? 127.2 : -127.7) * ws);
    assert_int_equal(tsr_train_requantize(tr, l), 0);
    assert_true(l->ws[0] == (float)ws); /* nothing moved yet: the scale is the file's */
    double loss;
    assert_int_equal(tsr_train_grads(tr, &xs, &ys, 16, &loss), 0);
    tsr_train_view_t v;
    tsr_train_view(tr, 0, &v);
    const int nw = v.m * v.k;
    double *want = malloc(sizeof(double) * (size_t)nw);
    int clamped = 0;
    for (int i = 0; i < nw; i++) {
        const double r = (double)v.w[i] - lr * v.gw[i];
        want[i] = fmin(fmax(r, -128 * ws), 127.5 * ws);
        clamped += want[i] != r;
    }
    tsr_train_stats_t *st = calloc(1, sizeof *st);
    if (tsr_train_run(tr, &xs, &ys, st))
        fail_msg("run: %s", tsr_errmsg());
    tsr_train_view(tr, 0, &v);
    if (l->ws[0] != (float)ws)
        fail_msg("the weight scale moved: %g, the file's %g", (double)l->ws[0], ws);
    int moved = 0;
    for (int i = 0; i < nw; i++) {
        if (fabs(v.w[i] - want[i]) > 1e-4 * ws)
            fail_msg("master weight %d: %.6f steps, the reference %.6f", i, v.w[i] / ws, want[i] / ws);
        const long q = lrint(want[i] / ws);
        if (fabs(want[i] / ws - (double)q) < 0.49 && l->wq[i] != (q > 127 ? 127 : q))
            fail_msg("int8 weight %d: %d, the reference %.4f steps", i, l->wq[i], want[i] / ws);
        moved += l->wq[i] != (int8_t)lrint(fmin(fmax((want[i] + lr * v.gw[i]) / ws, -128), 127));
    }
    print_message("host update, one step: %d of %d weights moved, %d clamped to the grid's range\n", moved, nw,
                  clamped);
    assert_true(moved >= 100 && clamped >= 10);
    free(want), free(st);
    tsr_train_free(tr);
    /* --weight-scale refit (the rule before): the scale re-fitted to max|w| / 127.5, the master not clamped */
    o.weight_refit = 1;
    if (tsr_train_open(MODEL, dev, &o, &tr))
        fail_msg("open: %s", tsr_errmsg());
    l = &tr->c[tr->nc - 1];
    l->w[0] = (float)(130.0 * ws);
    assert_int_equal(tsr_train_requantize(tr, l), 0);
    assert_true(l->w[0] == (float)(130.0 * ws) && l->ws[0] == (float)(130.0 * ws) / 127.5f && l->wq[0] == 127);
    tsr_tensor_free(&x), tsr_tensor_free(&y), tsr_tensor_free(&xs), tsr_tensor_free(&ys);
    tsr_train_free(tr);
    tsr_device_close(dev);
}

/* ------------------------------------------------------------------ the driver's high-water mark */

static void test_mem_usage(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    tsr_mem_usage_t u;
    assert_int_equal(tsr_mem_usage(dev, &u), 0);
    assert_int_equal(u.in_use, 0);
    assert_int_equal(u.peak, 0);
    uint64_t a, b, c;
    assert_int_equal(tsr_mem_alloc(dev, 1000, &a), 0);
    assert_int_equal(tsr_mem_alloc(dev, 5000, &b), 0);
    tsr_mem_usage(dev, &u);
    assert_int_equal(u.in_use, 6000);
    assert_int_equal(u.peak, 6000);
    assert_int_equal(u.buffers, 2);
    assert_int_equal(tsr_mem_free(dev, b), 0);
    assert_int_equal(tsr_mem_alloc(dev, 2000, &c), 0);
    tsr_mem_usage(dev, &u);
    assert_int_equal(u.in_use, 3000);
    assert_int_equal(u.peak, 6000);
    tsr_mem_reset_peak(dev);
    tsr_mem_usage(dev, &u);
    assert_int_equal(u.peak, 3000);
    assert_int_not_equal(tsr_mem_free(dev, c + 8), 0); /* not a buffer: refused, nothing counted */
    tsr_mem_usage(dev, &u);
    assert_int_equal(u.in_use, 3000);
    /* a submitted stream's instruction buffer counts too (4096 bytes at least) */
    tsr_insn_t fin;
    memset(&fin, 0, sizeof fin);
    fin.opcode = TSR_OP_FINISH;
    assert_int_equal(tsr_submit(dev, &fin, 1), 0);
    assert_int_equal(tsr_wait(dev, -1), 0);
    tsr_mem_usage(dev, &u);
    assert_int_equal(u.in_use, 3000 + 4096);
    assert_int_equal(tsr_mem_free(dev, a), 0);
    assert_int_equal(tsr_mem_free(dev, c), 0);
    tsr_mem_usage(dev, &u);
    assert_int_equal(u.in_use, 4096);
    assert_int_equal(u.peak, 3000 + 4096);
    tsr_device_close(dev);
}

/* ------------------------------------------------------------------ refusals */

static void refused(tsr_device_t *dev, const char *layers, int batch, double lr, double mu, int epochs,
                    const char *want)
{
    tsr_train_opts_t o = {.trainable = layers, .epochs = epochs, .batch = batch, .lr = lr, .momentum = mu};
    tsr_trainer_t *tr = NULL;
    const int rc = tsr_train_open(MODEL, dev, &o, &tr);
    if (!rc)
        fail_msg("%s (lr %g, momentum %g, epochs %d, batch %d) was accepted", layers, lr, mu, epochs, batch);
    if (!strstr(tsr_errmsg(), want))
        fail_msg("%s: message \"%s\" does not say \"%s\"", layers, tsr_errmsg(), want);
    assert_null(tr);
}

static void test_refusals(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev();
    refused(dev, "fc9", 16, 0.01, 0.9, 1, "no layer \"fc9\"");
    refused(dev, "pool", 16, 0.01, 0.9, 1, "/pool/MaxPool\" (MaxPool) has no weights");
    refused(dev, "last:4", 16, 0.01, 0.9, 1, "last:K needs K in [1, 3]");
    refused(dev, "fc,", 16, 0.01, 0.9, 1, "an empty layer name");
    refused(dev, "fc", 16, NAN, 0.9, 1, "--lr nan");
    refused(dev, "fc", 16, -0.1, 0.9, 1, "--lr -0.1");
    refused(dev, "fc", 16, 1e9, 0.9, 1, "would overflow");
    refused(dev, "fc", 16, 0.01, 1.0, 1, "--momentum 1");
    refused(dev, "fc", 16, 0.01, 0.9, 0, "--epochs 0");
    refused(dev, "fc", 16, 0.01, 0.9, 1001, "--epochs 1001");
    refused(dev, "fc", 0, 0.01, 0.9, 1, "--batch 0");
    const struct { tsr_train_opts_t o; const char *want; } bo[] = {
        {{.weight_bits = 12}, "--weight-bits 12: 8 or 16"},
        {{.weight_bits = 16, .int8_update = 1}, "not with --update int8"},
        {{.weight_bits = 16, .weight_stochastic = 1}, "choose one"},
        {{.device_update = 1, .grad_split = 1}, "--grad-bits 16"},
        {{.device_update = 1, .lr = 1.5}, "--lr 1.5: the device update of node \"/fc/Gemm\" (Gemm) needs"}};
    for (size_t i = 0; i < sizeof bo / sizeof bo[0]; i++) {
        tsr_train_opts_t o = bo[i].o;
        o.trainable = "fc", o.epochs = 1, o.batch = 16, o.lr = o.lr ? o.lr : 0.01, o.momentum = 0.9;
        tsr_trainer_t *t = NULL;
        assert_int_not_equal(tsr_train_open(MODEL, dev, &o, &t), 0);
        if (!strstr(tsr_errmsg(), bo[i].want))
            fail_msg("message \"%s\" does not say \"%s\"", tsr_errmsg(), bo[i].want);
        assert_null(t);
    }
    /* a config the device update cannot run on: refused at open, before any step (it was refused at the
       first update, after the first batch's forward and backward), the buffer and the size it needs named */
    const struct { const char *key; int v; const char *want; } cf[] = {
        {"LOG_UOP_BUFF_SIZE", 8, "--update device: sgd: the uop buffer holds 64 micro-ops (LOG_UOP_BUFF_SIZE 8), "
                                 "the update needs 128 (LOG_UOP_BUFF_SIZE >= 9)"},
        {"LOG_ACC_BUFF_SIZE", 10, "--update device: sgd: the accumulator buffer holds 16 rows (LOG_ACC_BUFF_SIZE "
                                  "10), the update needs 44 (LOG_ACC_BUFF_SIZE >= 12)"}};
    for (size_t i = 0; i < sizeof cf / sizeof cf[0]; i++) {
        tsr_config_t small;
        tsr_device_t *sd = NULL;
        if (tsr_config_load_with("default", cf[i].key, cf[i].v, &small) || tsr_device_open("fsim", &small, NULL, &sd))
            fail_msg("config %s %d: %s", cf[i].key, cf[i].v, tsr_errmsg());
        tsr_train_opts_t o = {.trainable = "fc", .epochs = 1, .batch = 16, .lr = 0.01, .momentum = 0.9,
                              .device_update = 1};
        tsr_trainer_t *t = NULL;
        assert_int_not_equal(tsr_train_open(MODEL, sd, &o, &t), 0);
        if (strcmp(tsr_errmsg(), cf[i].want))
            fail_msg("message \"%s\", want \"%s\"", tsr_errmsg(), cf[i].want);
        assert_null(t);
        tsr_device_close(sd);
    }
    /* data: the trainer is fine, the data is not */
    tsr_trainer_t *tr = open_trainer(dev, "fc", 16, 0);
    tsr_tensor_t x = {0}, y = {0}, bx = {0}, by = {0};
    load_data(&x, &y);
    int64_t s4[4] = {20, 1, 8, 9}, s1[1] = {20};
    assert_int_equal(tsr_tensor_alloc(&bx, TSR_DT_FLOAT32, 4, s4), 0);
    assert_int_not_equal(tsr_train_check_data(tr, &bx, "bx", &y, "y"), 0);
    assert_non_null(strstr(tsr_errmsg(), "float32 [N,1,8,8]"));
    tsr_tensor_free(&bx);
    assert_int_equal(tsr_tensor_alloc(&by, TSR_DT_INT32, 1, s1), 0);
    assert_int_not_equal(tsr_train_check_data(tr, &x, "x", &by, "by"), 0);
    assert_non_null(strstr(tsr_errmsg(), "one per sample"));
    tsr_tensor_free(&by);
    ((int32_t *)y.data)[7] = 10;
    assert_int_not_equal(tsr_train_check_data(tr, &x, "x", &y, "y"), 0);
    assert_non_null(strstr(tsr_errmsg(), "label 10 of sample 7 is out of range"));
    ((int32_t *)y.data)[7] = 1;
    ((float *)x.data)[70] = NAN;
    assert_int_not_equal(tsr_train_check_data(tr, &x, "x", &y, "y"), 0);
    assert_non_null(strstr(tsr_errmsg(), "element 70 (sample 1) is not finite"));
    ((float *)x.data)[70] = 0;
    assert_int_equal(tsr_train_check_data(tr, &x, "x", &y, "y"), 0);
    tsr_tensor_free(&x), tsr_tensor_free(&y);
    tsr_train_free(tr);
    tsr_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_usage),   cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_grads_vs_float), cmocka_unit_test(test_grads_split),
        cmocka_unit_test(test_weight_round), cmocka_unit_test(test_loss_exact), cmocka_unit_test(test_forward_wide),
        cmocka_unit_test(test_device_equals_host),
        cmocka_unit_test(test_step_moves_loss), cmocka_unit_test(test_device_update), cmocka_unit_test(test_host_update),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
