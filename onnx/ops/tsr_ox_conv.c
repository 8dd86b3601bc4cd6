/*
 * tsr_ox_conv: convolutions and gemms on the device. Both forms end in one
 * conv_desc_t lowered by tsr_ox_lower_conv: QDQ (DequantizeLinear input
 * and weights -> Conv / Gemm / MatMul -> [Relu | Clip] -> QuantizeLinear,
 * the output side selected by tsr_onnx_qdq.c) and operator form
 * (QLinearConv, com.microsoft QGemm, 2-D QLinearMatMul). A gemm over an
 * [N,K] input is a device dense; over a flattened [N,C,H,W] tensor, the
 * conv whose kernel covers the whole input. Requantization follows ONNX
 * Runtime (tsr_ox_rq_params); constant weights whose w - w_zp fit int8
 * are recoded to int8 with zero point 0.
 */
#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"
#include "tsr_quant.h"
#include "tsr_strsafe.h"

/* The device conv's shape from the input X, weights W and geometry: p's
 * dtypes, sizes, kernel, strides, pads, groups and zero points. A gemm is
 * the conv whose kernel covers the input (its 4-D base's, if a flattened
 * one). */
static int conv_shape(tsr_onnx_t *m, int ni, const conv_desc_t *cd, tsr_conv2d_params_t *p)
{
    const ox_val_t *X = &m->vals[cd->x], *W = &m->vals[cd->w];
    const ox_val_t *XB = &m->vals[X->base];
    int64_t n, c, h, w, M;
    if (qdtype(X->elem, &p->x_dtype) || qdtype(W->elem, &p->w_dtype) || qdtype(cd->y.elem, &p->y_dtype))
        return NERR(m, ni, "input, weight and output must be int8 or uint8 (are %s, %s, %s)", ename(X->elem),
                    ename(W->elem), ename(cd->y.elem));
    if (!W->cdata)
        return NERR(m, ni, "the weights \"%s\" are not a constant", TSR_SAFE(W->name));
    if (cd->gemm) {
        if (X->ndim != 2 || W->ndim != 2)
            return NERR(m, ni, "a gemm needs 2-D A and B (are %d-D and %d-D)", X->ndim, W->ndim);
        const int64_t K = X->dims[1];
        M = cd->transb ? W->dims[0] : W->dims[1];
        if ((cd->transb ? W->dims[1] : W->dims[0]) != K)
            return NERR(m, ni, "A is [%lld,%lld] but B is [%lld,%lld]%s", (long long)X->dims[0], (long long)K,
                        (long long)W->dims[0], (long long)W->dims[1], cd->transb ? " (transB)" : "");
        n = X->dims[0];
        if (XB->ndim == 4 && XB->dims[0] == n && XB->dims[1] * XB->dims[2] * XB->dims[3] == K)
            c = XB->dims[1], h = XB->dims[2], w = XB->dims[3];
        else
            c = K, h = 1, w = 1;
        p->kh = (int)h;
        p->kw = (int)w;
        p->stride_h = p->stride_w = 1;
        p->groups = 1;
    } else {
        if (X->ndim != 4 || W->ndim != 4)
            return NERR(m, ni, "2-D convolution needs 4-D input and weights (are %d-D and %d-D)", X->ndim, W->ndim);
        n = X->dims[0], c = X->dims[1], h = X->dims[2], w = X->dims[3], M = W->dims[0];
        if (cd->kshape[0] != W->dims[2] || cd->kshape[1] != W->dims[3])
            return NERR(m, ni, "kernel_shape disagrees with the weights");
        if (cd->group < 1 || cd->group > c || c % cd->group || M % cd->group)
            return NERR(m, ni, "group %lld does not divide the %lld input and %lld output channels", (long long)cd->group,
                        (long long)c, (long long)M);
        if (W->dims[1] != c / cd->group)
            return NERR(m, ni, "weights have %lld input channels, the input %lld in %lld groups",
                        (long long)W->dims[1], (long long)c, (long long)cd->group);
        p->kh = (int)W->dims[2];
        p->kw = (int)W->dims[3];
        p->stride_h = (int)cd->strides[0];
        p->stride_w = (int)cd->strides[1];
        p->pad_top = (int)cd->pads[0];
        p->pad_left = (int)cd->pads[1];
        p->pad_bottom = (int)cd->pads[2];
        p->pad_right = (int)cd->pads[3];
        p->groups = (int)cd->group;
    }
    if (n > 65536 || c > 65536 || h > 65536 || w > 65536 || M > 65536)
        return NERR(m, ni, "shape too large");
    p->n = (int)n, p->c_in = (int)c, p->h = (int)h, p->w = (int)w, p->c_out = (int)M;
    if (cd->wcnt != 1 && cd->wcnt != M)
        return NERR(m, ni, "%d weight scales for %lld output channels", cd->wcnt, (long long)M);
    p->x_zp = cd->xzp;
    p->y_zp = cd->y.zp;
    return 0;
}

/* A grouped convolution with M != C (a depthwise one with a channel
 * multiplier), which the JIT's conv2d does not describe, as the groups-1
 * conv with block-diagonal weights: output channel o of group o / (M/G)
 * sees only its group's C/G input channels, every other weight is its
 * channel's zero point (contributing (x - x_zp) * 0). Exact, in one device
 * op; the device does G times the grouped conv's MACs. M == C (RegNet's
 * group widths, depthwise) goes to the JIT as it is: the graph runs it
 * grouped when C/G fits its blocks and expands it the same way itself when
 * not (tsr_conv2d_groups_fit; the block size is unknown here). *full: the
 * [M][C][KH][KW] bytes (the caller's), NULL when p stays as it is. */
static int conv_ungroup(tsr_onnx_t *m, int ni, const conv_desc_t *cd, const ox_val_t *W, tsr_conv2d_params_t *p,
                        uint8_t **full)
{
    *full = NULL;
    const int64_t M = p->c_out, C = p->c_in, G = p->groups, K = (int64_t)p->kh * p->kw;
    if (G == 1 || M == C)
        return 0;
    if (G < 1 || C % G || (size_t)(M * (C / G) * K) != W->nbytes)
        return NERR(m, ni, "weights have %zu elements, expected %lld", W->nbytes,
                    (long long)(G > 0 && C % G == 0 ? M * (C / G) * K : -1));
    tsr_conv2d_params_t q = *p, u;
    q.w_zp = cd->wzp; /* (the zero points in W's type: the expansion's fill) */
    q.w_zp_count = cd->wcnt;
    if (tsr_conv2d_expand_groups(&q, W->cdata, &u, full))
        return NERR(m, ni, "%s", tsr_errmsg());
    p->groups = 1;
    return 0;
}

/* The device weights wq[wbytes] ([M][K] or OIHW) from the constant W, and
 * their zero points wzp[wcnt]. Constant weights whose w - w_zp all fit
 * int8 become int8 weights with zero point 0 (exact; device tensors hold
 * one copy of the input, so weights needing w - w_zp split into int8
 * parts are refused by the graph runtime). */
static void conv_weights(const conv_desc_t *cd, const ox_val_t *W, tsr_conv2d_params_t *p, uint8_t *wq,
                         int32_t *wzp, size_t wbytes)
{
    const int64_t M = p->c_out;
    memcpy(wzp, cd->wzp, sizeof(int32_t) * (size_t)cd->wcnt);
    if (cd->gemm && !cd->transb) { /* B [K][M] -> [M][K] */
        const int64_t K = (int64_t)wbytes / M;
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++)
                wq[i * K + k] = W->cdata[k * M + i];
    } else
        memcpy(wq, W->cdata, wbytes);
    /* wq is [M][K] or OIHW: output channel i / per (checked after the transposition: a
       per-column zero point of B [K][M] belongs to a column) */
    const int64_t per = (int64_t)wbytes / M;
    const int u8 = p->w_dtype == TSR_DT_UINT8;
    int fits = 1;
    for (int64_t r = 0; r < M && fits; r++) { /* row r: wq[r * per ..] */
        const int32_t z = wzp[cd->wcnt > 1 ? r : 0];
        const uint8_t *row = wq + r * per;
        int32_t lo = 0, hi = 0; /* (the row's extremes, then one check) */
        for (int64_t i = 0; i < per; i++) {
            const int32_t v = u8 ? (int32_t)row[i] : (int32_t)(int8_t)row[i];
            lo = i && lo < v ? lo : v;
            hi = i && hi > v ? hi : v;
        }
        fits = per == 0 || (lo - z >= -128 && hi - z <= 127);
    }
    if (!(fits && (u8 || wzp[0] != 0 || cd->wcnt > 1)))
        return;
    for (int64_t r = 0; r < M; r++) {
        const int32_t z = wzp[cd->wcnt > 1 ? r : 0];
        uint8_t *row = wq + r * per;
        for (int64_t i = 0; i < per; i++)
            ((int8_t *)row)[i] = (int8_t)((u8 ? (int32_t)row[i] : (int32_t)(int8_t)row[i]) - z);
    }
    for (int i = 0; i < cd->wcnt; i++)
        wzp[i] = 0;
    p->w_dtype = TSR_DT_INT8;
}

/* The int32 bias[M]: given, or a float bias quantized with x_scale * w_scale, or 0. */
static int conv_bias(tsr_onnx_t *m, int ni, const conv_desc_t *cd, int64_t M, int32_t *bias)
{
    for (int64_t i = 0; i < M; i++) {
        if (cd->bias)
            bias[i] = cd->bias[i];
        else if (cd->fbias) {
            const double q = nearbyint((double)cd->fbias[i] / ((double)cd->xs * cd->ws[cd->wcnt > 1 ? i : 0]));
            if (!(fabs(q) < 2147483647.0))
                return NERR(m, ni, "bias %lld does not fit int32 once quantized", (long long)i);
            bias[i] = (int32_t)q;
        } else
            bias[i] = 0;
    }
    return 0;
}

/* The output clamp: the type's range, narrowed by a fused Relu or Clip. */
static int conv_act_bounds(tsr_onnx_t *m, int ni, const conv_desc_t *cd, tsr_conv2d_params_t *p)
{
    p->act_min = p->y_dtype == TSR_DT_UINT8 ? 0 : -128;
    p->act_max = p->y_dtype == TSR_DT_UINT8 ? 255 : 127;
    if (cd->y.relu && p->act_min < cd->y.zp)
        p->act_min = cd->y.zp;
    if (cd->y.has_clip) {
        int32_t a, b;
        if (tsr_quantize_bound(cd->y.clip_lo, cd->y.scale, cd->y.zp, p->y_dtype, &a) ||
            tsr_quantize_bound(cd->y.clip_hi, cd->y.scale, cd->y.zp, p->y_dtype, &b))
            return NERR(m, ni, "Clip bounds: %s", tsr_errmsg());
        p->act_min = a > p->act_min ? a : p->act_min;
        p->act_max = b < p->act_max ? b : p->act_max;
    }
    return 0;
}

/* nd (kind CONV, params in nd->conv) as the device will take it. A gemm is
 * a dense operator when the device takes it as one (one int8 part): the
 * same arithmetic as the conv whose kernel covers the input, and a
 * per-output requantization of many outputs (ResNet-18's 1000) fits the
 * dense kernel's signature, not the conv's. The graph runtime's dense
 * takes [N][K] inputs only (H = W = 1, e.g. after a global pool): a gemm
 * over a spatial tensor stays the conv whose kernel covers it. */
static int conv_or_dense(tsr_onnx_t *m, int ni, const conv_desc_t *cd, tsr_nd_node_t *nd)
{
    const tsr_conv2d_params_t p = nd->conv;
    tsr_dense_params_t dp = {.n = p.n, .k = p.c_in * p.h * p.w, .m = p.c_out, .x_dtype = p.x_dtype, .x_zp = p.x_zp,
                             .w_dtype = p.w_dtype, .w_zp = p.w_zp, .w_zp_count = p.w_zp_count, .y_dtype = p.y_dtype,
                             .y_zp = p.y_zp, .mult = p.mult, .shift = p.shift, .rq_count = p.rq_count,
                             .act_min = p.act_min, .act_max = p.act_max, .fscale = p.fscale};
    int parts = 0;
    if (cd->gemm && p.h == 1 && p.w == 1 && !tsr_dense_check(&dp, &parts) && parts == 1) {
        memset(&nd->conv, 0, sizeof nd->conv);
        nd->kind = TSR_ND_DENSE;
        nd->dense = dp;
    } else if (tsr_conv2d_check(&p, &(int){0}, &(int){0}))
        return NERR(m, ni, "the device cannot run it (%s) and the host has no quantized conv", tsr_errmsg());
    return 0;
}

/* Lower a quantized conv / gemm onto a device CONV (or DENSE) node. x:
 * [N,C,H,W] (or [N,K]: a gemm over a flattened tensor becomes a conv with
 * the kernel covering the whole spatial extent), w: OIHW or [M][K]
 * constant. yv: the output value. */
int tsr_ox_lower_conv(tsr_onnx_t *m, int ni, const conv_desc_t *cd, int yv)
{
    const ox_val_t *X = &m->vals[cd->x], *W = &m->vals[cd->w];
    tsr_conv2d_params_t p;
    memset(&p, 0, sizeof p);
    int rc = conv_shape(m, ni, cd, &p);
    if (rc)
        return rc;
    const int64_t M = p.c_out;
    uint8_t *full = NULL;
    ox_val_t Wfull;
    if (!cd->gemm && (rc = conv_ungroup(m, ni, cd, W, &p, &full)))
        return rc;
    if (full) { /* the block-diagonal weights stand for W from here on */
        Wfull = *W;
        Wfull.cdata = full;
        Wfull.nbytes = (size_t)M * (size_t)p.c_in * (size_t)p.kh * (size_t)p.kw;
        W = &Wfull;
    }
    tsr_nd_node_t nd;
    memset(&nd, 0, sizeof nd);
    nd.kind = TSR_ND_CONV;
    int32_t *wzp = malloc(sizeof(int32_t) * (size_t)cd->wcnt), *mult = NULL, *shift = NULL;
    float *fscale = NULL;
    const size_t wbytes = (size_t)M * (size_t)(p.c_in / p.groups) * (size_t)p.kh * (size_t)p.kw;
    nd.w = malloc(wbytes);
    nd.bias = malloc(sizeof(int32_t) * (size_t)M);
    if (!wzp || !nd.w || !nd.bias)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc && wbytes != W->nbytes)
        rc = NERR(m, ni, "weights have %zu elements, expected %zu", W->nbytes, wbytes);
    if (!rc)
        rc = tsr_ox_rq_params(m, ni, cd->rq ? 1.0f : cd->xs, cd->rq ? cd->rq : cd->ws, cd->wcnt,
                              cd->rq ? 1.0f : cd->y.scale, &mult, &shift, &fscale);
    if (!rc) {
        conv_weights(cd, W, &p, nd.w, wzp, wbytes);
        rc = conv_bias(m, ni, cd, M, nd.bias);
    }
    if (!rc)
        rc = conv_act_bounds(m, ni, cd, &p);
    p.w_zp = wzp;
    p.w_zp_count = cd->wcnt;
    /* one weight zero point when all are equal (always after the int8 recode): the kernel cache
       signature holds every parameter, and 1000 equal zero points made ResNet-18's fc too long */
    while (!rc && p.w_zp_count > 1 && wzp[p.w_zp_count - 1] == wzp[0])
        p.w_zp_count--;
    if (p.w_zp_count > 1)
        p.w_zp_count = cd->wcnt;
    p.mult = mult;
    p.shift = shift;
    p.fscale = fscale;
    p.rq_count = cd->wcnt;
    nd.conv = p;
    if (!rc)
        rc = conv_or_dense(m, ni, cd, &nd);
    const int l = rc ? rc : tsr_ox_dev_lop(m, ni, &nd, X->base, -1, yv);
    free(full);
    if (l < 0) {
        free(wzp);
        free(mult);
        free(shift);
        free(fscale);
        free(nd.w);
        free(nd.bias);
        return l;
    }
    return tsr_ox_chansel_into_conv(m, ni, l); /* (its input a channel selection's: composed) */
}

int tsr_ox_conv_geometry(tsr_onnx_t *m, int ni, conv_desc_t *cd, const ox_val_t *X, const ox_val_t *W,
                         int64_t *odims)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const Onnx__AttributeProto *ap = attr(n, "auto_pad");
    if (ap && ap->has_s && !(ap->s.len == 6 && !memcmp(ap->s.data, "NOTSET", 6)))
        return NERR(m, ni, "auto_pad is not supported (give pads)");
    if (X->ndim != 4 || W->ndim != 4)
        return NERR(m, ni, "needs a 4-D input and 4-D weights");
    int64_t dil[2];
    if (tsr_ox_attr_ints(n, "kernel_shape", cd->kshape, 2, 0) || tsr_ox_attr_ints(n, "pads", cd->pads, 4, 0) ||
        tsr_ox_attr_ints(n, "strides", cd->strides, 2, 1) || tsr_ox_attr_ints(n, "dilations", dil, 2, 1))
        return NERR(m, ni, "kernel_shape/strides/dilations need 2 values, pads 4");
    if (!attr(n, "kernel_shape"))
        cd->kshape[0] = W->dims[2], cd->kshape[1] = W->dims[3];
    if (dil[0] != 1 || dil[1] != 1)
        return NERR(m, ni, "dilations other than 1 are not supported");
    cd->group = attr_i(n, "group", 1);
    for (int i = 0; i < 2; i++)
        if (cd->strides[i] < 1 || cd->strides[i] > 64 || cd->kshape[i] < 1 || cd->kshape[i] > 64 || cd->pads[i] < 0 ||
            cd->pads[i + 2] < 0 || cd->pads[i] > 64 || cd->pads[i + 2] > 64)
            return NERR(m, ni, "kernel, stride or pad out of range");
    odims[0] = X->dims[0];
    odims[1] = W->dims[0];
    for (int i = 0; i < 2; i++) {
        int64_t e = X->dims[2 + i] + cd->pads[i] + cd->pads[i + 2] - cd->kshape[i];
        if (e < 0)
            return NERR(m, ni, "kernel larger than the padded input");
        odims[2 + i] = e / cd->strides[i] + 1;
    }
    return 0;
}


/* The QDQ conv's inputs: x and w from their DequantizeLinear views, the
 * bias (a DequantizeLinear of an int32 constant, taken as is as ORT's
 * QLinearConv fusion does, or a float constant, quantized later). *vb: the
 * bias value, -1. */
static int qdq_conv_inputs(tsr_onnx_t *m, int ni, conv_desc_t *cd, int *vb)
{
    const float *xs = NULL, *ws = NULL, *bs = NULL;
    const int32_t *xz = NULL, *wz = NULL, *bz = NULL;
    int xc = 0, bc = 0, qb = -1;
    int rc = tsr_ox_view_arg(m, ni, tsr_ox_in_val(m, ni, 0), "input", &cd->x, &xs, &xz, &xc);
    if (!rc)
        rc = tsr_ox_view_arg(m, ni, tsr_ox_in_val(m, ni, 1), "weight", &cd->w, &ws, &wz, &cd->wcnt);
    if (rc)
        return rc;
    if (xc != 1)
        return NERR(m, ni, "per-channel activations are not supported");
    cd->xs = xs[0];
    cd->xzp = xz[0];
    cd->ws = ws;
    cd->wzp = wz;
    *vb = tsr_ox_in_val(m, ni, 2);
    if (*vb < 0)
        return 0;
    const ox_val_t *B = &m->vals[*vb];
    if (B->view_of >= 0 && m->vals[B->view_of].cdata && m->vals[B->view_of].elem == ET_INT32) {
        tsr_ox_view_arg(m, ni, *vb, "bias", &qb, &bs, &bz, &bc);
        cd->bias = (const int32_t *)m->vals[qb].cdata;
    } else if (B->cdata && B->elem == ET_FLOAT)
        cd->fbias = (float *)B->cdata;
    else
        return NERR(m, ni, "bias must be a DequantizeLinear of an int32 constant or a float constant");
    return 0;
}

/* A QDQ Gemm / MatMul's attributes and output shape od[2]. */
static int qdq_gemm_shape(tsr_onnx_t *m, int ni, conv_desc_t *cd, int vb, int64_t *od)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int isgemm = !strcmp(n->op_type, "Gemm");
    if (isgemm && (attr_i(n, "transA", 0) || fabsf(attr(n, "alpha") ? attr(n, "alpha")->f : 1.f) != 1.f ||
                   (vb >= 0 && (attr(n, "beta") ? attr(n, "beta")->f : 1.f) != 1.f)))
        return NERR(m, ni, "transA, alpha or beta other than the defaults");
    cd->gemm = 1;
    cd->transb = isgemm ? (int)attr_i(n, "transB", 0) : 0;
    const ox_val_t *X = &m->vals[tsr_ox_in_val(m, ni, 0)], *W = &m->vals[cd->w];
    /* a MatMul of [..., K] by a constant [K, N] (a transformer's Linear) is a dense over the rows:
       od is [rows, N] here; the caller (tsr_ox_matmul_any) gives the output its N-D shape */
    const int rows = !isgemm && X->ndim > 2 && X->dims[X->ndim - 1] > 0;
    if ((X->ndim != 2 && !rows) || W->ndim != 2)
        return NERR(m, ni, "only 2-D operands are supported");
    od[0] = rows ? numel(X) / X->dims[X->ndim - 1] : X->dims[0];
    od[1] = cd->transb ? W->dims[0] : W->dims[1];
    return 0;
}

/* The quantized input as the conv reads it: the view's quantized value, or
 * for a relabelled view (Flatten/Reshape of the DequantizeLinear output)
 * a new value with the quantized bytes and the view's shape. */
static int qdq_conv_input(tsr_onnx_t *m, int ni, int qx)
{
    const ox_val_t *XV = &m->vals[tsr_ox_in_val(m, ni, 0)];
    const int rows = XV->ndim > 2 && strcmp(m->gp->node[ni]->op_type, "Conv"); /* MatMul over rows: [rows, K] */
    if (!rows && XV->ndim == m->vals[qx].ndim &&
        !memcmp(XV->dims, m->vals[qx].dims, sizeof(int64_t) * (size_t)XV->ndim))
        return qx;
    const int q = tsr_ox_new_val(m, "");
    if (q < 0)
        return q;
    ox_val_t *Q = &m->vals[q];
    XV = &m->vals[tsr_ox_in_val(m, ni, 0)];
    Q->elem = m->vals[qx].elem;
    Q->ndim = XV->ndim;
    memcpy(Q->dims, XV->dims, sizeof Q->dims);
    if (rows)
        Q->ndim = 2, Q->dims[0] = numel(XV) / XV->dims[XV->ndim - 1], Q->dims[1] = XV->dims[XV->ndim - 1];
    Q->nbytes = m->vals[qx].nbytes;
    Q->base = m->vals[qx].base;
    Q->defined = 1;
    return q;
}

/* QDQ Conv (gemm 0), Gemm and MatMul (gemm 1): DequantizeLinear input and
 * weights, the QDQ group selected for the output. */
int tsr_ox_qdq_conv(tsr_onnx_t *m, int ni, int gemm)
{
    conv_desc_t cd;
    memset(&cd, 0, sizeof cd);
    int vb = -1, rc = qdq_conv_inputs(m, ni, &cd, &vb);
    if (rc)
        return rc;
    int64_t od[4] = {0};
    const int odn = gemm ? 2 : 4;
    if (gemm)
        rc = qdq_gemm_shape(m, ni, &cd, vb, od);
    else
        rc = tsr_ox_conv_geometry(m, ni, &cd, &m->vals[tsr_ox_in_val(m, ni, 0)], &m->vals[cd.w], od);
    if (rc)
        return rc;
    if (vb >= 0 && numel(&m->vals[vb]) != od[1])
        return NERR(m, ni, "bias has %lld elements for %lld outputs", (long long)numel(&m->vals[vb]), (long long)od[1]);
    const int qn = tsr_ox_qdq_output(m, ni, &cd.y);
    if (qn < 0)
        return qn;
    /* the output value is the QuantizeLinear's output */
    const int y = tsr_ox_def_out(m, qn, 0, cd.y.elem, odn, od);
    if (y < 0)
        return y;
    /* tsr_ox_lower_conv wants X's elem to be the quantized type: the quantized value */
    if ((cd.x = qdq_conv_input(m, ni, cd.x)) < 0)
        return cd.x;
    if ((rc = tsr_ox_lower_conv(m, ni, &cd, y)))
        return rc;
    tsr_ox_qdq_fold(m, ni);
    return 0;
}

/* QLinearConv / QGemm / QLinearMatMul (operator form). */
int tsr_ox_qlinear(tsr_onnx_t *m, int ni, int kind /* 0 conv, 1 qgemm, 2 qlinearmatmul */)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    conv_desc_t cd;
    memset(&cd, 0, sizeof cd);
    float *xs = NULL, *ws = NULL, *ys = NULL;
    int32_t *xz = NULL, *wz = NULL, *yz = NULL;
    qarg_t qx, qw, qy;
    int iy = kind == 1 ? 7 : 6, iyz = iy + 1, ib = kind == 0 ? 8 : kind == 1 ? 6 : -1;
    int rc = 0;
    cd.x = tsr_ox_in_val(m, ni, 0);
    cd.w = tsr_ox_in_val(m, ni, 3);
    if (cd.x < 0 || cd.w < 0)
        rc = NERR(m, ni, "input or weight missing");
    if (!rc)
        rc = tsr_ox_qarg_consts(m, ni, tsr_ox_in_val(m, ni, 1), tsr_ox_in_val(m, ni, 2), &qx, &xs, &xz, "x");
    if (!rc)
        rc = tsr_ox_qarg_consts(m, ni, tsr_ox_in_val(m, ni, 4), tsr_ox_in_val(m, ni, 5), &qw, &ws, &wz, "w");
    if (!rc)
        rc = tsr_ox_qarg_consts(m, ni, tsr_ox_in_val(m, ni, iy), tsr_ox_in_val(m, ni, iyz), &qy, &ys, &yz, "y");
    if (!rc && (qx.cnt != 1 || qy.cnt != 1))
        rc = NERR(m, ni, "x and y quantization must be per tensor");
    int64_t od[4];
    int odn = 4;
    if (!rc) {
        const ox_val_t *X = &m->vals[cd.x], *W = &m->vals[cd.w];
        cd.xs = xs[0], cd.xzp = xz[0], cd.ws = ws, cd.wzp = wz, cd.wcnt = qw.cnt, cd.y.scale = ys[0], cd.y.zp = yz[0];
        cd.y.elem = tsr_ox_in_val(m, ni, iyz) >= 0 ? m->vals[tsr_ox_in_val(m, ni, iyz)].elem : ET_UINT8;
        if (kind == 0)
            rc = tsr_ox_conv_geometry(m, ni, &cd, X, W, od);
        else {
            cd.gemm = 1;
            cd.transb = kind == 1 ? (int)attr_i(n, "transB", 0) : 0;
            if (kind == 1 && (attr_i(n, "transA", 0) || (attr(n, "alpha") && attr(n, "alpha")->f != 1.f)))
                rc = NERR(m, ni, "transA or alpha other than the defaults");
            else if (X->ndim != 2 || W->ndim != 2)
                rc = NERR(m, ni, "only 2-D operands are supported (batched MatMul is not)");
            od[0] = X->dims[0];
            od[1] = W->ndim == 2 ? (cd.transb ? W->dims[0] : W->dims[1]) : 0;
            odn = 2;
        }
    }
    int vb = ib >= 0 ? tsr_ox_in_val(m, ni, (size_t)ib) : -1;
    if (!rc && vb >= 0) {
        const ox_val_t *B = &m->vals[vb];
        if (!B->cdata || B->elem != ET_INT32 || numel(B) != od[1])
            rc = NERR(m, ni, "bias must be an int32 constant of %lld elements", (long long)od[1]);
        else
            cd.bias = (const int32_t *)B->cdata;
    }
    int y = rc ? rc : tsr_ox_def_out(m, ni, 0, cd.y.elem, odn, od);
    if (y < 0)
        rc = y;
    if (!rc)
        rc = tsr_ox_lower_conv(m, ni, &cd, y);
    free(xs), free(ws), free(ys), free(xz), free(wz), free(yz);
    return rc;
}

/* A BatchNormalization parameter (scale, B, mean, var) as C floats: a float
 * constant, or a DequantizeLinear view of a constant (as quantize_static
 * writes scale and B), dequantized as ORT's DequantizeLinear does. */
static int bn_param(tsr_onnx_t *m, int ni, int v, const char *what, int64_t C, float *out)
{
    if (v < 0)
        return NERR(m, ni, "%s is missing", what);
    const ox_val_t *P = &m->vals[v];
    if (numel(P) != C)
        return NERR(m, ni, "%s has %lld elements for %lld channels", what, (long long)numel(P), (long long)C);
    if (P->cdata && P->elem == ET_FLOAT) {
        memcpy(out, P->cdata, sizeof(float) * (size_t)C);
        return 0;
    }
    const ox_val_t *Q = P->view_of >= 0 ? &m->vals[P->view_of] : NULL;
    if (!Q || !Q->cdata || (Q->elem != ET_INT8 && Q->elem != ET_UINT8 && Q->elem != ET_INT32) ||
        (P->vcount != 1 && P->vcount != C))
        return NERR(m, ni, "%s must be a float constant or a DequantizeLinear of a constant", what);
    for (int64_t i = 0; i < C; i++) {
        const int k = P->vcount > 1 ? (int)i : 0;
        int32_t q;
        if (Q->elem == ET_INT32)
            memcpy(&q, Q->cdata + 4 * i, 4);
        else
            q = Q->elem == ET_INT8 ? (int32_t)(int8_t)Q->cdata[i] : (int32_t)Q->cdata[i];
        out[i] = (float)(q - P->vzp[k]) * P->vscale[k];
    }
    return 0;
}

/* One channel of a BatchNormalization after a DequantizeLinear, before a
 * QuantizeLinear, as the device conv of weight w, int32 bias and
 * requantization multiplier r takes it. */
typedef struct {
    float xs, ys;         /* input and output scales */
    int32_t xz, yz;       /* zero points */
    int xs8;              /* the input is int8 */
    int lo, hi;           /* the output clamp (the type's, narrowed by a fused Relu) */
} bn_chan_t;

/* ONNX Runtime's output byte of the channel (new scale ns, new bias nb as
 * its kernel forms them) for every input byte v: DequantizeLinear's float,
 * x * ns + nb (no FMA), then QuantizeLinear (divide, clamp, round half to
 * even), then the fused Relu's clamp. */
static void bn_table(const bn_chan_t *c, float ns, float nb, int32_t *t)
{
    for (int v = 0; v < 256; v++) {
        const int32_t x = c->xs8 ? (int32_t)(int8_t)(uint8_t)v : v;
        const float xf = (float)(x - c->xz) * c->xs;
        const float p = xf * ns;
        const float yf = p + nb;
        float q = yf / c->ys;
        q = fmaxf(q, (float)(c->lo - c->yz));
        q = fminf(q, (float)(c->hi - c->yz));
        t[v] = (int32_t)nearbyintf(q) + c->yz;
    }
}

/* Does the device conv (w, bias, r) give t for every input byte, in both of
 * its requantizations: the fixed point (r < 1: SRDHM by round(r * 2^31),
 * tsr_ox_rq_params) and fscale (round_half_even(float32(acc) * r))? */
static int bn_dev_equal(const bn_chan_t *c, const int32_t *t, int w, int64_t bias, float r)
{
    if (!(r > 0x1p-20f && r < 1.0f) || bias < -(1 << 30) || bias > (1 << 30))
        return 0;
    const int64_t M = llround((double)r * 2147483648.0);
    for (int v = 0; v < 256; v++) {
        const int32_t x = c->xs8 ? (int32_t)(int8_t)(uint8_t)v : v;
        const int64_t acc = (int64_t)w * (x - c->xz) + bias;
        int64_t qf = ((acc * M + ((int64_t)1 << 30)) >> 31) + c->yz;
        int64_t qe = (int64_t)nearbyintf((float)((double)(float)acc * (double)r)) + c->yz;
        qf = qf < c->lo ? c->lo : qf > c->hi ? c->hi : qf;
        qe = qe < c->lo ? c->lo : qe > c->hi ? c->hi : qe;
        if (qf != t[v] || qe != t[v])
            return 0;
    }
    return 1;
}

/* How many bytes nearest a tie bn_r_range tries first. */
#define BN_NEAR 8

/* The multipliers r for which round(r * acc) + yz stays in [t - 0.5, t + 0.5]
 * (one-sided at the clamp bounds) for every input byte: [*rl, *rh]. The
 * bytes in the order ord (nearest a tie first: the interval closes soonest). */
static void bn_r_range(const bn_chan_t *c, const int32_t *t, const uint8_t *ord, int w, int64_t bias, double *rl,
                       double *rh)
{
    *rl = 0, *rh = INFINITY;
    for (int k = 0; k < BN_NEAR + 256 && *rl <= *rh; k++) {
        const int v = ord[k];
        const int32_t x = c->xs8 ? (int32_t)(int8_t)(uint8_t)v : v;
        const double acc = (double)((int64_t)w * (x - c->xz) + bias);
        const double L = t[v] <= c->lo ? -INFINITY : t[v] - c->yz - 0.5;
        const double H = t[v] >= c->hi ? INFINITY : t[v] - c->yz + 0.5;
        if (acc > 0)
            *rl = fmax(*rl, L / acc), *rh = fmin(*rh, H / acc);
        else if (acc < 0)
            *rl = fmax(*rl, H / acc), *rh = fmin(*rh, L / acc);
        else if (L > 0 || H < 0)
            *rl = INFINITY;
    }
}

/* ord: the BN_NEAR input bytes whose alpha * (x - xz) + beta is nearest a
 * tie, then all 256 (bn_r_range's order). */
static void bn_tie_order(const bn_chan_t *c, double alpha, double beta, uint8_t *ord)
{
    double d[BN_NEAR];
    int n = 0;
    for (int v = 0; v < 256; v++) {
        const int32_t x = c->xs8 ? (int32_t)(int8_t)(uint8_t)v : v;
        const double y = alpha * (x - c->xz) + beta, e = fabs(y - floor(y) - 0.5);
        int k = n < BN_NEAR ? n++ : BN_NEAR;
        for (; k > 0 && d[k - 1] > e; k--)
            if (k < BN_NEAR)
                d[k] = d[k - 1], ord[k] = ord[k - 1];
        if (k < BN_NEAR)
            d[k] = e, ord[k] = (uint8_t)v;
    }
    for (int v = 0; v < 256; v++)
        ord[BN_NEAR + v] = (uint8_t)v;
}

/* A device conv (*w, *bias, *r) whose bytes are ONNX Runtime's table t for
 * every input byte (alpha, beta: the channel's real slope on x - xz and
 * offset, in output LSBs); 0 when none is found. */
static int bn_exact(const bn_chan_t *c, const int32_t *t, double alpha, double beta, int8_t *w, int32_t *bias,
                    float *r)
{
    uint8_t ord[BN_NEAR + 256];
    bn_tie_order(c, alpha, beta, ord);
    for (int k = 127; alpha != 0 && k >= 64; k--) {
        const int wk = alpha > 0 ? k : -k;
        const double b0 = beta * wk / alpha;
        if (!(fabs(b0) < 1e9))
            return 0;
        for (int db = -2; db <= 2; db++) {
            const int64_t b = llround(b0) + db;
            double rl, rh;
            bn_r_range(c, t, ord, wk, b, &rl, &rh);
            if (!(rl <= rh))
                continue;
            const float cand[3] = {(float)((rl + rh) / 2), (float)rl, (float)rh};
            for (int i = 0; i < 3; i++)
                if (bn_dev_equal(c, t, wk, b, cand[i])) {
                    *w = (int8_t)wk, *bias = (int32_t)b, *r = cand[i];
                    return 1;
                }
        }
    }
    return 0;
}

/* The previous form of a channel (within 1 LSB of ORT), where bn_exact
 * finds none: weight +-w (64..127) with the scale |a| / w, a = scale /
 * sqrt(var + eps), and the shift b = B - mean * a rounded to the int32 bias on
 * the x_scale * w_scale grid, w chosen to round it least (with w = 127
 * always, 0.27% of DenseNet's outputs were 1 LSB off). */
static int bn_near(const bn_chan_t *c, const float *p4, int8_t *w, int32_t *bias, float *r)
{
    const float a = p4[0] / sqrtf(p4[3] + p4[4]), fb = p4[1] - p4[2] * a;
    if (!isfinite(a) || !isfinite(fb))
        return -1;
    int best = 127;
    double berr = INFINITY;
    for (int k = 127; a != 0 && k >= 64; k--) {
        const double g = (double)c->xs * (double)(fabsf(a) / (float)k);
        const double e = fabs((double)fb - nearbyint((double)fb / g) * g);
        if (e < berr)
            berr = e, best = k;
    }
    const float ws = a != 0 ? fabsf(a) / (float)best : 1.0f;
    const double q = nearbyint((double)fb / ((double)c->xs * ws));
    if (!(fabs(q) < 2147483647.0))
        return -1;
    *w = (int8_t)(a > 0 ? best : a < 0 ? -best : 0);
    *bias = (int32_t)q;
    *r = c->xs * ws / c->ys;
    return 0;
}

/* Every channel's device conv (w, bias, r; par: scale, B, mean, var by
 * channel): ONNX Runtime's bytes for every input byte where bn_exact finds
 * such a conv (a fused Clip excepted), else bn_near's. tab: ORT's bytes,
 * 256 per channel; *nx: the channels without an exact conv that have them
 * (0 with a fused Clip: no table then). */
static int bn_channels(tsr_onnx_t *m, int ni, const ox_qout_t *y, float xs, int32_t xz, int xs8, float eps,
                       const float *par, int64_t C, int8_t *w, int32_t *bias, float *r, int32_t *tab, int64_t *nx)
{
    bn_chan_t c = {.xs = xs, .ys = y->scale, .xz = xz, .yz = y->zp, .xs8 = xs8};
    c.lo = y->elem == ET_INT8 ? -128 : 0;
    c.hi = y->elem == ET_INT8 ? 127 : 255;
    if (y->relu && c.lo < y->zp)
        c.lo = y->zp;
    *nx = 0;
    for (int64_t i = 0; i < C; i++) {
        const float sc = par[i], B = par[C + i], mean = par[2 * C + i], var = par[3 * C + i];
        const float inv = 1.0f / sqrtf(var + eps), ns = inv * sc, mp = mean * ns, nb = B - mp;
        int32_t *t = tab + 256 * i;
        if (isfinite(ns) && isfinite(nb) && !y->has_clip) {
            bn_table(&c, ns, nb, t);
            if (bn_exact(&c, t, (double)xs * ns / c.ys, (double)nb / c.ys, &w[i], &bias[i], &r[i]))
                continue;
            ++*nx;
        }
        const float p4[5] = {sc, B, mean, var, eps};
        if (bn_near(&c, p4, &w[i], &bias[i], &r[i]))
            return NERR(m, ni, "channel %lld: the scale or shift is not finite", (long long)i);
    }
    return 0;
}

/* QDQ BatchNormalization that follows no Conv (DenseNet's norm1 after a
 * Concat; a BatchNormalization after a Conv is folded by the exporter):
 * y = x * a + b per channel (in float32, as ONNX Runtime's kernel), run as
 * a depthwise 1x1 conv on the device: weight w, int32 bias and
 * requantization multiplier r per channel, chosen so that the device's
 * bytes equal ORT's float DQ -> BatchNormalization -> Q for all 256 input
 * bytes of the channel (bn_exact, in both the fixed-point and the fscale
 * requantization), else within 1 LSB of them (bn_near); a BN with such a
 * channel keeps ORT's bytes of every channel (zpa, ort_host 1), which a
 * config with EXACT_REQUANT runs on the host instead (tsr_ox_exact_to_host).
 * Folding forward into the next conv is not done: DenseNet's next node is
 * a Relu. */
int tsr_ox_qdq_batchnorm(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    (void)arg;
    if (attr_i(n, "training_mode", 0))
        return NERR(m, ni, "training_mode 1 is not supported (inference only)");
    if (n->n_output > 1)
        return NERR(m, ni, "the running mean/var outputs (training) are not supported");
    const float *xs;
    const int32_t *xz;
    int qx, xc;
    int rc = tsr_ox_view_arg(m, ni, tsr_ox_in_val(m, ni, 0), "input", &qx, &xs, &xz, &xc);
    if (rc)
        return rc;
    if (xc != 1)
        return NERR(m, ni, "per-channel activations are not supported");
    const ox_val_t *X = &m->vals[qx];
    if (X->ndim != 4)
        return NERR(m, ni, "needs a 4-D input (is %d-D)", X->ndim);
    const int64_t C = X->dims[1];
    if (C < 1 || C > 65536)
        return NERR(m, ni, "%lld channels", (long long)C);
    const Onnx__AttributeProto *ea = attr(n, "epsilon");
    const float eps = ea ? ea->f : 1e-5f;
    conv_desc_t cd;
    memset(&cd, 0, sizeof cd);
    const int qn = tsr_ox_qdq_output(m, ni, &cd.y);
    if (qn < 0)
        return qn;
    float *par = malloc(sizeof(float) * 5 * (size_t)C); /* scale, B, mean, var, then r */
    int32_t *wzp = calloc((size_t)C, sizeof(int32_t)), *bias = malloc(sizeof(int32_t) * (size_t)C);
    int32_t *tab = malloc(sizeof(int32_t) * 256 * (size_t)C);
    uint8_t *wq = malloc((size_t)C);
    int64_t nx = 0;
    if (!par || !wzp || !wq || !bias || !tab) {
        free(par), free(wzp), free(wq), free(bias), free(tab);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    static const char *const what[4] = {"scale", "B", "input_mean", "input_var"};
    for (int k = 0; k < 4 && !rc; k++)
        rc = bn_param(m, ni, tsr_ox_in_val(m, ni, (size_t)k + 1), what[k], C, par + k * C);
    float *rq = par + 4 * C;
    if (!rc)
        rc = bn_channels(m, ni, &cd.y, xs[0], xz[0], X->elem == ET_INT8, eps, par, C, (int8_t *)wq, bias, rq, tab,
                         &nx);
    int wv = -1, y = -1;
    if (!rc && (wv = tsr_ox_new_val(m, "")) < 0)
        rc = wv;
    if (!rc) {
        ox_val_t *W = &m->vals[wv];
        W->elem = ET_INT8;
        W->ndim = 4;
        W->dims[0] = C, W->dims[1] = W->dims[2] = W->dims[3] = 1;
        W->nbytes = (size_t)C;
        W->cdata = wq; /* owned by the value from here */
        W->defined = 1;
        wq = NULL;
        cd.x = qx, cd.w = wv, cd.xs = xs[0], cd.xzp = xz[0], cd.ws = rq, cd.wzp = wzp, cd.wcnt = (int)C;
        cd.bias = bias, cd.rq = rq;
        cd.group = C;
        cd.kshape[0] = cd.kshape[1] = 1;
        cd.strides[0] = cd.strides[1] = 1;
        if ((y = tsr_ox_def_out(m, qn, 0, cd.y.elem, 4, m->vals[qx].dims)) < 0)
            rc = y;
    }
    if (!rc)
        rc = tsr_ox_lower_conv(m, ni, &cd, y);
    if (!rc && nx > 0) { /* ORT's bytes for the host, on a config with EXACT_REQUANT (tsr_ox_exact_to_host) */
        ox_lop_t *L = &m->lops[m->vals[m->vals[y].base].prod];
        L->zpa = tab, L->nzpa = (int)(256 * C), L->ort_host = 1;
        tab = NULL;
    }
    if (!rc)
        tsr_ox_qdq_fold(m, ni);
    free(par), free(wzp), free(wq), free(bias), free(tab);
    return rc;
}

void tsr_ox_bn_to_host(tsr_onnx_t *m, int l)
{
    ox_lop_t *L = &m->lops[l];
    const ox_val_t *X = &m->vals[L->in];
    tsr_ox_lop_to_host(L, H_QLUTC);
    L->geo[0] = X->dims[1], L->geo[1] = X->dims[2] * X->dims[3];
}
