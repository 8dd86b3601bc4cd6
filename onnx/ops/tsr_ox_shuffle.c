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
 * selection needs no BLOCK-aligned offsets, unlike views
 * (ops/tsr_ox_concat.c), but costs C_in x C_out MACs a pixel: on
 * ShuffleNetV2 x1.0 as many as the model's own, so it is opt-in
 * (TESSERA_SHUFFLE=device) and the host permutation stays the default
 * (docs/results.md: the measurement).
 */
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"

static int shuffle_off(void)
{
    const char *env = getenv("TESSERA_SHUFFLE");
    return !env || strcmp(env, "device");
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

int tsr_ox_shuffle_q(tsr_onnx_t *m, int ni, int x, const int64_t *perm, const int64_t *d)
{
    const ox_val_t X = m->vals[x];
    const int b = base4(m, &X);
    if (shuffle_off() || b < 0 || X.ndim != 5 || perm[0] != 0 || perm[1] != 2 || perm[2] != 1 || perm[3] != 3 ||
        perm[4] != 4)
        return 1;
    const int64_t g = X.dims[1], cpg = X.dims[2], c = g * cpg;
    int64_t *src = malloc(sizeof *src * (size_t)c);
    if (!src)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int64_t j = 0; j < c; j++) /* out [n, i, k] = in [n, k, i]: channel i * g + k reads k * cpg + i */
        src[j] = (j % g) * cpg + j / g;
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

int tsr_ox_chslice_q(tsr_onnx_t *m, int ni, int x, const int32_t *st, const int64_t *d)
{
    const ox_val_t X = m->vals[x];
    const int b = base4(m, &X);
    if (shuffle_off() || b < 0 || X.ndim != 4 || st[0] || st[2] || st[3] || d[0] != X.dims[0] || d[2] != X.dims[2] ||
        d[3] != X.dims[3] || d[1] < 1 || d[1] == X.dims[1])
        return 1;
    int64_t *src = malloc(sizeof *src * (size_t)d[1]);
    if (!src)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int64_t j = 0; j < d[1]; j++)
        src[j] = st[1] + j;
    const int y4 = new_like(m, b, d[1]);
    int rc = y4 < 0 ? y4 : chansel(m, ni, b, X.vscale[0], X.vzp[0], src, d[1], y4);
    free(src);
    if (rc)
        return rc;
    const int y = tsr_ox_def_out(m, ni, 0, ET_FLOAT, 4, d);
    return y < 0 ? y : tsr_ox_set_view(&m->vals[y], y4, X.vscale[0], X.vzp[0]);
}
