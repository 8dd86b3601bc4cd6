/*
 * tsr_ox_shuffle: ShuffleNetV2's channel shuffle (Reshape [N, C, H, W] ->
 * [N, g, C/g, H, W], Transpose perm [0, 2, 1, 3, 4], Reshape back) and
 * channel Slice (torch's chunk) of quantized bytes on the device, as a 1x1
 * convolution with one-hot int8 weights: output channel j reads input
 * channel src[j] with weight 1 (weight scale 1, zero point 0, no bias) and
 * the output keeps the input's scale and zero point, so the conv's
 * requantization multiplier is x_scale * 1 / x_scale = 1.0 exactly and
 * (x - zp) * 1 + zp = x: the bytes are those of the host permutation /
 * slice (tsr_ox_transpose_q, tsr_ox_slice_q). A channel permutation or
 * selection needs no BLOCK-aligned offsets. The Concat before a shuffle
 * (ShuffleNetV2's 58 + 58, 116 + 116, 232 + 232 channels) becomes views
 * (ops/tsr_ox_concat.c) when its first input's channels are a multiple of
 * BLOCK: where they are not and that input is a device conv's output (a
 * one-hot slice, maybe through a depthwise requantize, or a branch's last
 * conv) read by nothing else, the conv is padded to a multiple of 32
 * channels (the largest preset BLOCK) holding y_zp (weights = w_zp, bias
 * 0) and the shuffle conv skips them, so the whole network is one device
 * segment. A one-hot conv would cost C_in x C_out MACs a pixel (on
 * ShuffleNetV2 x1.0 as many as the model's own), so three things keep it
 * near free: the conv lowering skips all-zero weight blocks (jit/tsr_conv2d.h
 * "Block skipping": an output block of the shuffle reads 2-3 input blocks,
 * not C/BLOCK); a Slice of a shuffle's output selects the shuffle's input
 * channels directly (one conv, not two: the shuffle's conv is dropped once
 * its last Slice is lowered); and a selection read only by a 1x1 conv is
 * composed into that conv's weights (tsr_ox_chansel_into_conv: w' over the
 * selection's input, w_zp elsewhere, the same sums), so a ShuffleNetV2 unit
 * keeps one selection (the half passed on) beside its own convs. Default
 * since issue 30; tessera infer --place shuffle=host keeps the host
 * permutation (docs/results.md: the measurement).
 */
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"

static int shuffle_off(const tsr_onnx_t *m)
{
    return m->opts.place[TSR_PLACE_SHUFFLE] == TSR_PLACE_HOST;
}

/* Value yv ([N, cout, H, W], the input's type) = the 4-D quantized value xb's
 * channels src[0..cout-1]: a device 1x1 conv with one-hot weights. */
static int chansel(tsr_onnx_t *m, int ni, int xb, float xs, int32_t xzp, const int64_t *src, int64_t cout,
                   int yv)
{
    const int64_t cin = m->vals[xb].dims[1];
    const int w = tsr_ox_new_val(m, "");
    if (w < 0)
        return w;
    ox_val_t *W = &m->vals[w];
    W->elem = ET_INT8, W->ndim = 4, W->defined = 1;
    W->dims[0] = cout, W->dims[1] = cin, W->dims[2] = W->dims[3] = 1;
    W->nbytes = (size_t)(cout * cin);
    if (!(W->cdata = calloc(W->nbytes ? W->nbytes : 1, 1)))
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int64_t j = 0; j < cout; j++) {
        if (src[j] < 0 || src[j] >= cin)
            return NERR(m, ni, "output channel %lld reads channel %lld of %lld", (long long)j, (long long)src[j],
                        (long long)cin);
        W->cdata[j * cin + src[j]] = 1;
    }
    static const float one = 1.0f;
    static const int32_t zero = 0;
    conv_desc_t cd;
    memset(&cd, 0, sizeof cd);
    cd.x = xb, cd.xs = xs, cd.xzp = xzp;
    cd.w = w, cd.ws = &one, cd.wzp = &zero, cd.wcnt = 1;
    cd.y.scale = xs, cd.y.zp = xzp, cd.y.elem = m->vals[xb].elem;
    cd.kshape[0] = cd.kshape[1] = 1;
    cd.strides[0] = cd.strides[1] = 1;
    cd.group = 1;
    return tsr_ox_lower_conv(m, ni, &cd, yv);
}

/* A new 4-D quantized value of xb's type and N, H, W with c channels. */
static int new_like(tsr_onnx_t *m, int xb, int64_t c)
{
    const int y = tsr_ox_new_val(m, "");
    if (y < 0)
        return y;
    ox_val_t *Y = &m->vals[y];
    const ox_val_t *X = &m->vals[xb];
    Y->elem = X->elem, Y->ndim = 4, Y->defined = 1;
    Y->dims[0] = X->dims[0], Y->dims[1] = c, Y->dims[2] = X->dims[2], Y->dims[3] = X->dims[3];
    Y->nbytes = (size_t)(Y->dims[0] * c * Y->dims[2] * Y->dims[3]);
    return y;
}

/* The 4-D quantized base of the float view x when x has its shape up to a split of channels
 * (dims [N, g, C/g, H, W] or [N, C, H, W]), else -1. */
static int base4(const tsr_onnx_t *m, const ox_val_t *X)
{
    if (X->view_of < 0 || X->vcount != 1 || X->cdata)
        return -1;
    const int b = m->vals[X->view_of].base;
    const ox_val_t *B = &m->vals[b];
    if (B->ndim != 4 || B->cdata || (B->elem != ET_UINT8 && B->elem != ET_INT8) || B->dims[1] < 1 ||
        B->dims[1] > 65536)
        return -1;
    if (X->ndim == 4)
        return X->dims[0] == B->dims[0] && X->dims[1] == B->dims[1] && X->dims[2] == B->dims[2] &&
                       X->dims[3] == B->dims[3] ? b : -1;
    return X->ndim == 5 && X->dims[0] == B->dims[0] && X->dims[1] * X->dims[2] == B->dims[1] &&
                   X->dims[3] == B->dims[2] && X->dims[4] == B->dims[3] ? b : -1;
}

/* Does anything but lop `only` read base value v's bytes: a lop so far, a later node (or node ni when
 * skip_ni is 0) through a name that is v or a view of it, or a graph output? (A false reader only
 * keeps the layout as it is.) */
static int refs(const tsr_onnx_t *m, int x, int v)
{
    return x >= 0 && (m->vals[x].base == v || (m->vals[x].view_of >= 0 && m->vals[m->vals[x].view_of].base == v));
}

static int read_elsewhere(tsr_onnx_t *m, int ni, int v, int only, int skip_ni)
{
    for (int j = 0; j < m->nlops; j++) {
        const ox_lop_t *L = &m->lops[j];
        if (j != only && (L->in == v || L->in2 == v))
            return 1;
        for (int k = 0; j != only && L->side == SIDE_HOST && k < 4; k++)
            if (L->geo[k] >= 0 && L->geo[k] < m->nvals && m->vals[L->geo[k]].base == v)
                return 1;
    }
    for (size_t k = (size_t)ni + (skip_ni ? 1 : 0); k < m->gp->n_node; k++)
        for (size_t i = 0; i < m->gp->node[k]->n_input; i++)
            if (m->gp->node[k]->input[i][0] && refs(m, tsr_ox_find_val(m, m->gp->node[k]->input[i]), v))
                return 1;
    for (size_t i = 0; i < m->gp->n_output; i++)
        if (refs(m, tsr_ox_find_val(m, m->gp->output[i]->name), v))
            return 1;
    return 0;
}

/* Conv lop L (groups 1) with p >= c_out output channels: the new ones' weights equal the weight zero
 * point (w - w_zp = 0), bias 0, so they hold y_zp (the real 0). */
static int pad_conv(ox_lop_t *L, int p)
{
    tsr_conv2d_params_t *q = &L->nd.conv;
    const int c = q->c_out;
    const size_t row = (size_t)(q->c_in / q->groups) * (size_t)q->kh * (size_t)q->kw;
    uint8_t *w = realloc(L->nd.w, row * (size_t)p);
    if (w)
        L->nd.w = w;
    int32_t *bias = realloc(L->nd.bias, sizeof *bias * (size_t)p);
    if (bias)
        L->nd.bias = bias;
    int32_t *wzp = q->w_zp_count > 1 ? realloc((void *)q->w_zp, sizeof *wzp * (size_t)p) : (int32_t *)q->w_zp;
    if (wzp)
        q->w_zp = wzp;
    int32_t *mult = q->rq_count > 1 ? realloc((void *)q->mult, sizeof *mult * (size_t)p) : (int32_t *)q->mult;
    if (mult)
        q->mult = mult;
    int32_t *shift = q->rq_count > 1 ? realloc((void *)q->shift, sizeof *shift * (size_t)p) : (int32_t *)q->shift;
    if (shift)
        q->shift = shift;
    float *fs = q->rq_count > 1 && q->fscale ? realloc((void *)q->fscale, sizeof *fs * (size_t)p) : (float *)q->fscale;
    if (fs)
        q->fscale = fs;
    if (!w || !bias || !wzp || !mult || !shift || (q->fscale && !fs))
        return tsr_err(TSR_ENOMEM, "out of memory");
    memset(w + row * (size_t)c, (uint8_t)wzp[0], row * (size_t)(p - c));
    for (int j = c; j < p; j++) {
        bias[j] = 0;
        if (q->w_zp_count > 1)
            wzp[j] = wzp[0];
        if (q->rq_count > 1) {
            mult[j] = mult[0], shift[j] = shift[0];
            if (fs)
                fs[j] = fs[0];
        }
    }
    if (q->w_zp_count > 1)
        q->w_zp_count = p;
    if (q->rq_count > 1)
        q->rq_count = p;
    if (q->groups > 1) /* depthwise: its input padded too */
        q->c_in = q->groups = p;
    q->c_out = p;
    return 0;
}

/* Value a (4-D, c channels), the output of device conv lop la read only by lop `only`, padded to p
 * channels: a conv of groups 1 gets the new output channels; a depthwise conv (a Concat input's
 * requantize) gets them and its input the same, recursively. 1 done, 0 not possible, < 0 an error. */
static int pad_value(tsr_onnx_t *m, int ni, int a, int only, int64_t p)
{
    ox_val_t *A = &m->vals[a];
    const int la = A->prod;
    const int64_t c = A->dims[1];
    if (A->ndim != 4 || A->base != a || la < 0 || la >= only || m->lops[la].out != a ||
        m->lops[la].side != SIDE_DEV || m->lops[la].nd.kind != TSR_ND_CONV || m->lops[la].nd.conv.c_out != c ||
        read_elsewhere(m, ni, a, only, 0))
        return 0;
    const tsr_conv2d_params_t *q = &m->lops[la].nd.conv;
    if (q->groups > 1) {
        const int x = m->lops[la].in;
        if (q->groups != c || q->c_in != c || x < 0 || m->vals[x].dims[1] != c || m->vals[x].dims[2] != A->dims[2] ||
            m->vals[x].dims[3] != A->dims[3] || q->stride_h != 1 || q->stride_w != 1 || q->kh != 1 || q->kw != 1)
            return 0;
        const int rc = pad_value(m, ni, x, la, p);
        if (rc != 1)
            return rc;
    }
    const int rc = pad_conv(&m->lops[la], (int)p);
    if (rc)
        return rc;
    A->dims[1] = p, A->nbytes = (size_t)(A->dims[0] * p * A->dims[2] * A->dims[3]);
    A->padded = 1;
    return 1;
}

/* The shuffle's input b, a host concat of two 4-D values whose first (a device conv's output, read by
 * nothing else) has channels that are not a multiple of PAD: that conv padded to a multiple of PAD
 * channels (of y_zp), so the concat can be views on any BLOCK up to PAD (ops/tsr_ox_concat.c). *ca: the
 * first input's channels before, *pa after; 1 if padded, 0 if not, < 0 an error. */
#define PAD 32 /* the largest BLOCK of the configs/ presets */
static int pad_first(tsr_onnx_t *m, int ni, int b, int64_t *ca, int64_t *pa)
{
    const int lc = m->vals[b].prod;
    if (lc < 0 || m->lops[lc].side != SIDE_HOST || m->lops[lc].hkind != H_CONCAT || m->lops[lc].out != b ||
        m->lops[lc].in < 0 || m->lops[lc].in2 < 0)
        return 0;
    ox_lop_t *C = &m->lops[lc];
    const int a = C->in;
    ox_val_t *A = &m->vals[a], *B = &m->vals[b];
    const int64_t c = A->dims[1], p = (c + PAD - 1) / PAD * PAD, hw = B->dims[2] * B->dims[3];
    if (A->ndim != 4 || A->base != a || A->elem != B->elem || A->dims[0] != B->dims[0] || A->dims[2] != B->dims[2] ||
        A->dims[3] != B->dims[3] || c % PAD == 0 || C->geo[0] != B->dims[0] || C->geo[1] != c * hw)
        return 0;
    if (read_elsewhere(m, ni, b, -1, 1))
        return 0;
    const int rc = pad_value(m, ni, a, lc, p);
    if (rc != 1)
        return rc;
    B->padded = 1;
    B->dims[1] += p - c, B->nbytes = (size_t)(B->dims[0] * B->dims[1] * hw);
    C->geo[1] = p * hw;
    *ca = c, *pa = p;
    return 1;
}

int tsr_ox_shuffle_q(tsr_onnx_t *m, int ni, int x, const int64_t *perm, const int64_t *d)
{
    const ox_val_t X = m->vals[x];
    const int b = base4(m, &X);
    if (shuffle_off(m) || b < 0 || X.ndim != 5 || perm[0] != 0 || perm[1] != 2 || perm[2] != 1 || perm[3] != 3 ||
        perm[4] != 4)
        return 1;
    const int64_t g = X.dims[1], cpg = X.dims[2], c = g * cpg;
    int64_t ca = c, pa = c; /* the concat's first input's channels, padded */
    const int padded = pad_first(m, ni, b, &ca, &pa);
    if (padded < 0)
        return padded;
    int64_t *src = malloc(sizeof *src * (size_t)c);
    if (!src)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int64_t j = 0; j < c; j++) { /* out [n, i, k] = in [n, k, i]: channel i * g + k reads k * cpg + i */
        src[j] = (j % g) * cpg + j / g;
        src[j] += src[j] < ca ? 0 : pa - ca;
    }
    const int y4 = new_like(m, b, c);
    int rc = y4 < 0 ? y4 : chansel(m, ni, b, X.vscale[0], X.vzp[0], src, c, y4);
    free(src);
    if (rc)
        return rc;
    const int q = tsr_ox_new_val(m, ""); /* the permuted bytes in the Transpose's 5-D shape */
    if (q < 0)
        return q;
    ox_val_t *Q = &m->vals[q];
    Q->elem = m->vals[y4].elem, Q->ndim = 5, Q->defined = 1;
    memcpy(Q->dims, d, 5 * sizeof *d);
    Q->nbytes = m->vals[y4].nbytes;
    Q->base = y4;
    const int y = tsr_ox_def_out(m, ni, 0, ET_FLOAT, 5, d);
    return y < 0 ? y : tsr_ox_set_view(&m->vals[y], q, X.vscale[0], X.vzp[0]);
}

/* The channel selection lop producing base value b (a device one-hot conv of a Transpose or Slice node:
 * tsr_ox_shuffle_q, tsr_ox_chslice_q), else -1. */
static int chansel_lop(const tsr_onnx_t *m, int b)
{
    const int l = m->vals[b].prod;
    if (l < 0 || l >= m->nlops)
        return -1;
    const ox_lop_t *L = &m->lops[l];
    const char *op = L->node >= 0 ? m->gp->node[L->node]->op_type : "";
    return L->side == SIDE_DEV && L->nd.kind == TSR_ND_CONV && L->out == b &&
                   (!strcmp(op, "Transpose") || !strcmp(op, "Slice")) ? l : -1;
}

/* Channels [s0, s0 + n) of selection lop l's output as channels of its input: src[j] = the channel row
 * s0 + j's one weight 1 reads; 0 if a row is not one-hot (then nothing is composed). */
static int chansel_src(const tsr_onnx_t *m, int l, int64_t s0, int64_t n, int64_t *src)
{
    const tsr_conv2d_params_t *q = &m->lops[l].nd.conv;
    const int8_t *w = m->lops[l].nd.w;
    if (q->kh != 1 || q->kw != 1 || q->groups != 1 || q->w_zp_count != 1 || q->w_zp[0] || s0 + n > q->c_out || !w)
        return 0;
    for (int64_t j = 0; j < n; j++) {
        src[j] = -1;
        for (int64_t c = 0; c < q->c_in; c++) {
            const int8_t v = w[(s0 + j) * q->c_in + c];
            if (v && (v != 1 || src[j] >= 0))
                return 0;
            src[j] = v ? c : src[j];
        }
        if (src[j] < 0)
            return 0;
    }
    return 1;
}

/* Remove device lop d, whose output nothing reads any more; the nodes it stood for are folded into lop
 * `into` (> d); every lop index follows (as tsr_ox_bias.c's move_lop). */
static void drop_lop(tsr_onnx_t *m, int d, int into)
{
    tsr_nd_node_free(&m->lops[d].nd);
    m->vals[m->vals[m->lops[d].out].base].prod = -1;
    memmove(&m->lops[d], &m->lops[d + 1], sizeof *m->lops * (size_t)(m->nlops - d - 1));
    m->nlops--;
#define REMAP(x) ((x) == d ? into - 1 : (x) > d ? (x) - 1 : (x))
    for (size_t i = 0; i < m->gp->n_node; i++) {
        if (m->node_lop[i] == d)
            m->placed[i] = OX_FOLDED;
        m->node_lop[i] = REMAP(m->node_lop[i]);
    }
    for (int v = 0; v < m->nvals; v++) {
        m->vals[v].prod = REMAP(m->vals[v].prod);
        m->vals[v].real_lop = REMAP(m->vals[v].real_lop);
    }
#undef REMAP
}

int tsr_ox_chansel_into_conv(tsr_onnx_t *m, int ni, int l)
{
    ox_lop_t *L = &m->lops[l];
    const int x = L->in, lc = x >= 0 && !shuffle_off(m) ? chansel_lop(m, x) : -1;
    tsr_conv2d_params_t *q = &L->nd.conv;
    if (lc < 0 || lc >= l || l != m->nlops - 1 || L->nd.kind != TSR_ND_CONV || q->groups != 1 || q->kh != 1 ||
        q->kw != 1 || q->stride_h != 1 || q->stride_w != 1 || q->pad_top || q->pad_left || q->pad_bottom ||
        q->pad_right || m->vals[x].padded || q->c_in != m->lops[lc].nd.conv.c_out || read_elsewhere(m, ni, x, l, 1))
        return 0;
    const int64_t cin = q->c_in, cin2 = m->lops[lc].nd.conv.c_in, M = q->c_out;
    int64_t *src = malloc(sizeof *src * (size_t)cin);
    uint8_t *w2 = malloc((size_t)(M * cin2));
    if (!src || !w2 || !chansel_src(m, lc, 0, cin, src)) {
        free(src), free(w2);
        return src && w2 ? 0 : tsr_err(TSR_ENOMEM, "out of memory");
    }
    /* w'[o][src[j]] = w[o][j], the other channels w - w_zp = 0: the same sums over the selection's input */
    const uint8_t *w = L->nd.w;
    for (int64_t o = 0; o < M; o++) {
        memset(w2 + o * cin2, (uint8_t)q->w_zp[q->w_zp_count > 1 ? o : 0], (size_t)cin2);
        for (int64_t j = 0; j < cin; j++)
            w2[o * cin2 + src[j]] = w[o * cin + j];
    }
    free(src);
    free(L->nd.w);
    L->nd.w = w2;
    q->c_in = (int)cin2;
    L->in = m->lops[lc].in;
    drop_lop(m, lc, l);
    return 0;
}

int tsr_ox_chslice_q(tsr_onnx_t *m, int ni, int x, const int32_t *st, const int64_t *d)
{
    const ox_val_t X = m->vals[x];
    int b = base4(m, &X);
    if (shuffle_off(m) || b < 0 || X.ndim != 4 || st[0] || st[2] || st[3] || d[0] != X.dims[0] || d[2] != X.dims[2] ||
        d[3] != X.dims[3] || d[1] < 1 || d[1] == X.dims[1])
        return 1;
    int64_t *src = malloc(sizeof *src * (size_t)d[1]);
    if (!src)
        return tsr_err(TSR_ENOMEM, "out of memory");
    /* a slice of a shuffle's output: the shuffle's channels of its input (one conv, not two) */
    const int ls = chansel_lop(m, b), sb = b;
    if (ls >= 0 && !strcmp(m->gp->node[m->lops[ls].node]->op_type, "Transpose") && chansel_src(m, ls, st[1], d[1], src))
        b = m->lops[ls].in;
    else
        for (int64_t j = 0; j < d[1]; j++)
            src[j] = st[1] + j;
    const int y4 = new_like(m, b, d[1]);
    int rc = y4 < 0 ? y4 : chansel(m, ni, b, X.vscale[0], X.vzp[0], src, d[1], y4);
    free(src);
    if (rc)
        return rc;
    if (b != sb && !read_elsewhere(m, ni, sb, -1, 1)) /* the shuffle's conv is gone, its Transpose in this lop */
        drop_lop(m, ls, m->nlops - 1);
    const int y = tsr_ox_def_out(m, ni, 0, ET_FLOAT, 4, d);
    return y < 0 ? y : tsr_ox_set_view(&m->vals[y], y4, X.vscale[0], X.vzp[0]);
}
