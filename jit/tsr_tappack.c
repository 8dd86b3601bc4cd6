/*
 * tsr_tappack: horizontal kernel taps packed into the channel dimension
 * (tsr_tappack.h says what and why). Host-side only: parameter rewrite,
 * weight permutation and input packing; the rewritten convolution runs
 * through tsr_conv2d unchanged.
 */
#include "tsr_tappack.h"

#include <stddef.h>

#include "tsr_error.h"

int tsr_tappack_applies(const tsr_conv2d_params_t *p, const tsr_config_t *cfg)
{
    int oh, ow;
    if (!p || !cfg || cfg->block_in < 1 || p->groups != 1 || p->kw < 2)
        return 0;
    if (tsr_conv2d_check(p, &oh, &ow)) {
        tsr_err_clear();
        return 0;
    }
    int64_t packed = (int64_t)p->c_in * p->kw, bi = cfg->block_in;
    if (packed > (int64_t)TSR_TAPPACK_MAX_BLOCKS * bi)
        return 0;
    /* GEMM work per output row and output-channel block: KH*KW*ceil(C_in/BI)
     * before, KH*ceil(C_in*KW/BI) after */
    return (packed + bi - 1) / bi < (int64_t)p->kw * ((p->c_in + bi - 1) / bi);
}

uint64_t tsr_tappack_input_bytes(const tsr_conv2d_params_t *p)
{
    int oh, ow;
    if (!p || tsr_conv2d_check(p, &oh, &ow))
        return 0;
    return (uint64_t)p->n * (uint64_t)p->c_in * (uint64_t)p->kw * (uint64_t)p->h * (uint64_t)ow;
}

int tsr_tappack_rewrite(const tsr_conv2d_params_t *p, const void *w, tsr_conv2d_params_t *out, void *wout)
{
    int oh, ow, rc;
    if (!p || !out)
        return tsr_err(TSR_EINVAL, "tappack: NULL parameters");
    if ((rc = tsr_conv2d_check(p, &oh, &ow)))
        return tsr_err_prefix(rc, "tappack: ");
    if (p->groups != 1)
        return tsr_err(TSR_EINVAL, "tappack: groups %d (only groups 1 packs taps into channels)", p->groups);
    int64_t cp = (int64_t)p->c_in * p->kw;
    if (cp * p->h * ow * p->n > INT32_MAX || cp > INT32_MAX)
        return tsr_err(TSR_EINVAL, "tappack: packed input [%d, %lld, %d, %d] has more than 2^31-1 elements", p->n,
                       (long long)cp, p->h, ow);
    tsr_conv2d_params_t q = *p;
    q.c_in = (int)cp;
    q.w = ow;
    q.kw = 1;
    q.stride_w = 1;
    q.pad_left = q.pad_right = 0;
    if ((rc = tsr_conv2d_check(&q, &oh, &ow)))
        return tsr_err_prefix(rc, "tappack: rewritten conv: ");
    *out = q;
    if (w && wout) {
        const uint8_t *src = w;
        uint8_t *dst = wout;
        for (int o = 0; o < p->c_out; o++)
            for (int c = 0; c < p->c_in; c++)
                for (int ky = 0; ky < p->kh; ky++)
                    for (int kx = 0; kx < p->kw; kx++)
                        dst[(((size_t)o * q.c_in + (size_t)kx * p->c_in + c) * p->kh + ky)] =
                            src[(((size_t)o * p->c_in + c) * p->kh + ky) * p->kw + kx];
    }
    return TSR_OK;
}

void tsr_tappack_pack_input(const tsr_conv2d_params_t *p, const void *x, void *xout)
{
    int oh, ow;
    if (!p || !x || !xout || tsr_conv2d_check(p, &oh, &ow))
        return;
    const uint8_t *src = x;
    uint8_t *dst = xout;
    const uint8_t pad = (uint8_t)p->x_zp; /* the byte of x_zp in x_dtype (int8 two's complement or uint8) */
    const size_t cp = (size_t)p->c_in * p->kw;
    for (int n = 0; n < p->n; n++)
        for (int kx = 0; kx < p->kw; kx++)
            for (int c = 0; c < p->c_in; c++) {
                const uint8_t *s = src + ((size_t)n * p->c_in + c) * p->h * p->w;
                uint8_t *d = dst + ((size_t)n * cp + (size_t)kx * p->c_in + c) * p->h * ow;
                for (int y = 0; y < p->h; y++)
                    for (int ox = 0; ox < ow; ox++) {
                        int ix = ox * p->stride_w + kx - p->pad_left;
                        d[(size_t)y * ow + ox] = ix >= 0 && ix < p->w ? s[(size_t)y * p->w + ix] : pad;
                    }
            }
}
