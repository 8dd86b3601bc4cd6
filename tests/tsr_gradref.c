/*
 * tsr_gradref: the backward operators' reference (see tsr_gradref.h).
 */
#include "tsr_gradref.h"

#include <stdlib.h>
#include <string.h>

static int32_t wrap32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }

static int32_t xval(const void *x, int x_unsigned, size_t i)
{
    return x_unsigned ? (int32_t)((const uint8_t *)x)[i] : (int32_t)((const int8_t *)x)[i];
}

void gradref_dense_dx(int n, int k, int m, const int8_t *dy, const int8_t *w, int32_t *dx)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k; j++) {
            int64_t s = 0;
            for (int o = 0; o < m; o++)
                s += (int64_t)dy[(size_t)i * m + o] * w[(size_t)o * k + j];
            dx[(size_t)i * k + j] = wrap32(s);
        }
}

void gradref_dense_dw(int n, int k, int m, const int8_t *dy, const void *x, int x_unsigned, int32_t x_zp,
                      int32_t *dw)
{
    for (int o = 0; o < m; o++)
        for (int j = 0; j < k; j++) {
            int64_t s = 0;
            for (int i = 0; i < n; i++)
                s += (int64_t)dy[(size_t)i * m + o] * (xval(x, x_unsigned, (size_t)i * k + j) - x_zp);
            dw[(size_t)o * k + j] = wrap32(s);
        }
}

int gradref_conv_oh(const gradref_conv_t *p) { return (p->h + p->pt + p->pb - p->kh) / p->sh + 1; }
int gradref_conv_ow(const gradref_conv_t *p) { return (p->w + p->pl + p->pr - p->kw) / p->sw + 1; }

/* Visit every term (n, co, oy, ox, ci', ky, kx) whose input position is inside. */
#define FOR_TERMS(p, BODY)                                                                                             \
    do {                                                                                                               \
        const int oh_ = gradref_conv_oh(p), ow_ = gradref_conv_ow(p);                                                  \
        const int cig_ = (p)->c_in / (p)->groups, cog_ = (p)->c_out / (p)->groups;                                     \
        for (int n = 0; n < (p)->n; n++)                                                                               \
            for (int co = 0; co < (p)->c_out; co++)                                                                    \
                for (int oy = 0; oy < oh_; oy++)                                                                       \
                    for (int ox = 0; ox < ow_; ox++)                                                                   \
                        for (int cj = 0; cj < cig_; cj++)                                                              \
                            for (int ky = 0; ky < (p)->kh; ky++)                                                       \
                                for (int kx = 0; kx < (p)->kw; kx++) {                                                 \
                                    const int y = oy * (p)->sh + ky - (p)->pt, xx = ox * (p)->sw + kx - (p)->pl;       \
                                    if (y < 0 || y >= (p)->h || xx < 0 || xx >= (p)->w)                                \
                                        continue;                                                                      \
                                    const int ci = (co / cog_) * cig_ + cj;                                            \
                                    const size_t iy = (((size_t)n * (p)->c_out + co) * oh_ + oy) * ow_ + ox;           \
                                    const size_t iw = (((size_t)co * cig_ + cj) * (p)->kh + ky) * (p)->kw + kx;        \
                                    const size_t ix = (((size_t)n * (p)->c_in + ci) * (p)->h + y) * (p)->w + xx;       \
                                    BODY;                                                                              \
                                }                                                                                      \
    } while (0)

void gradref_conv_dx(const gradref_conv_t *p, const int8_t *dy, const int8_t *w, int32_t *dx)
{
    const size_t nx = (size_t)p->n * p->c_in * p->h * p->w;
    int64_t *s = calloc(nx, sizeof *s);
    if (!s)
        abort();
    FOR_TERMS(p, s[ix] += (int64_t)dy[iy] * w[iw]);
    for (size_t i = 0; i < nx; i++)
        dx[i] = wrap32(s[i]);
    free(s);
}

void gradref_conv_dw(const gradref_conv_t *p, const int8_t *dy, const void *x, int x_unsigned, int32_t x_zp,
                     int32_t *dw)
{
    const size_t nw = (size_t)p->c_out * (p->c_in / p->groups) * p->kh * p->kw;
    int64_t *s = calloc(nw, sizeof *s);
    if (!s)
        abort();
    FOR_TERMS(p, s[iw] += (int64_t)dy[iy] * (xval(x, x_unsigned, ix) - x_zp));
    for (size_t i = 0; i < nw; i++)
        dw[i] = wrap32(s[i]);
    free(s);
}

uint64_t gradref_conv_macs(const gradref_conv_t *p)
{
    uint64_t c = 0;
    FOR_TERMS(p, (void)iy; (void)iw; (void)ix; c++);
    return c;
}

void gradref_dense_fwd(int n, int k, int m, const void *x, int x_unsigned, int32_t x_zp, const int8_t *w, int32_t *y)
{
    for (int i = 0; i < n; i++)
        for (int o = 0; o < m; o++) {
            int64_t s = 0;
            for (int j = 0; j < k; j++)
                s += (int64_t)w[(size_t)o * k + j] * (xval(x, x_unsigned, (size_t)i * k + j) - x_zp);
            y[(size_t)i * m + o] = wrap32(s);
        }
}

void gradref_conv_fwd(const gradref_conv_t *p, const void *x, int x_unsigned, int32_t x_zp, const int8_t *w,
                      int32_t *y)
{
    const size_t ny = (size_t)p->n * p->c_out * gradref_conv_oh(p) * gradref_conv_ow(p);
    int64_t *s = calloc(ny, sizeof *s);
    if (!s)
        abort();
    FOR_TERMS(p, s[iy] += (int64_t)w[iw] * (xval(x, x_unsigned, ix) - x_zp));
    for (size_t i = 0; i < ny; i++)
        y[i] = wrap32(s[i]);
    free(s);
}
