/*
 * tsr_opref: reference implementation of jit/operators.md (see tsr_opref.h).
 * Every rule of the document appears here as a plain loop or expression;
 * all arithmetic is done in int64_t so that nothing can overflow before an
 * explicit wrap32() or clamp. Nothing here comes from jit/.
 */
#include "tsr_opref.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tsr_error.h"

/* ------------------------------------------------------------ basics */

int32_t opref_dtype_min(opref_dtype_t dt)
{
    return dt == OPREF_UINT8 ? 0 : -128;
}

int32_t opref_dtype_max(opref_dtype_t dt)
{
    return dt == OPREF_UINT8 ? 255 : 127;
}

static int dtype_ok(opref_dtype_t dt)
{
    return dt == OPREF_INT8 || dt == OPREF_UINT8;
}

static const char *dtype_name(opref_dtype_t dt)
{
    return dt == OPREF_UINT8 ? "uint8" : "int8";
}

/* Low 32 bits of v, as a signed value (two's complement wraparound). */
static int32_t wrap32(int64_t v)
{
    uint32_t u = (uint32_t)((uint64_t)v & 0xffffffffu);
    if (u >= 0x80000000u)
        return (int32_t)((int64_t)u - ((int64_t)1 << 32));
    return (int32_t)u;
}

/* floor(a / 2^s) for 0 <= s <= 62, without relying on >> of negatives. */
static int64_t floor_div_pow2(int64_t a, int s)
{
    int64_t p = (int64_t)1 << s;
    int64_t q = a / p; /* truncates toward zero */
    if (a % p != 0 && a < 0)
        q -= 1;
    return q;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

int32_t opref_get(const opref_tensor_t *t, int64_t i)
{
    const uint8_t *p = (const uint8_t *)t->data;
    if (t->dtype == OPREF_UINT8)
        return p[i];
    return (int32_t)(int8_t)p[i];
}

void opref_set(opref_tensor_t *t, int64_t i, int32_t v)
{
    uint8_t *p = (uint8_t *)t->data;
    if (t->dtype == OPREF_UINT8)
        p[i] = (uint8_t)v;
    else
        p[i] = (uint8_t)(int8_t)v; /* v in [-128, 127]: value-preserving */
}

static int32_t weight_get(const opref_weights_t *w, int64_t i)
{
    const uint8_t *p = (const uint8_t *)w->data;
    if (w->dtype == OPREF_UINT8)
        return p[i];
    return (int32_t)(int8_t)p[i];
}

/* --------------------------------------------------------- validation */

#define MAX_ELEMS INT32_MAX

static int check_dims(const char *what, int n, int c, int h, int w, int64_t *count)
{
    if (n < 1 || c < 1 || h < 1 || w < 1)
        return tsr_err(TSR_EINVAL, "%s: dimensions [%d,%d,%d,%d] must all be >= 1", what, n, c, h, w);
    int64_t e = (int64_t)n * c;
    if (e > MAX_ELEMS || (e *= h) > MAX_ELEMS || (e *= w) > MAX_ELEMS)
        return tsr_err(TSR_EINVAL, "%s: [%d,%d,%d,%d] has more than 2^31-1 elements", what, n, c, h, w);
    if (count)
        *count = e;
    return TSR_OK;
}

static int check_tensor(const char *op, const char *name, const opref_tensor_t *t)
{
    if (!t)
        return tsr_err(TSR_EINVAL, "%s: %s is NULL", op, name);
    if (!dtype_ok(t->dtype))
        return tsr_err(TSR_EINVAL, "%s: %s has unknown dtype %d", op, name, (int)t->dtype);
    int rc = check_dims(name, t->n, t->c, t->h, t->w, NULL);
    if (rc)
        return tsr_err_prefix(rc, "%s: ", op);
    if (!t->data)
        return tsr_err(TSR_EINVAL, "%s: %s has no data", op, name);
    if (t->zp < opref_dtype_min(t->dtype) || t->zp > opref_dtype_max(t->dtype))
        return tsr_err(TSR_EINVAL, "%s: %s zero point %d outside the %s range", op, name, (int)t->zp,
                       dtype_name(t->dtype));
    return TSR_OK;
}

static int check_acc(const char *op, const char *name, const opref_acc_t *a)
{
    if (!a)
        return tsr_err(TSR_EINVAL, "%s: %s is NULL", op, name);
    int rc = check_dims(name, a->n, a->c, a->h, a->w, NULL);
    if (rc)
        return tsr_err_prefix(rc, "%s: ", op);
    if (!a->data)
        return tsr_err(TSR_EINVAL, "%s: %s has no data", op, name);
    return TSR_OK;
}

static int check_weights(const char *op, const opref_weights_t *w)
{
    if (!w)
        return tsr_err(TSR_EINVAL, "%s: weights are NULL", op);
    if (!dtype_ok(w->dtype))
        return tsr_err(TSR_EINVAL, "%s: weights have unknown dtype %d", op, (int)w->dtype);
    int rc = check_dims("weights", w->o, w->i, w->kh, w->kw, NULL);
    if (rc)
        return tsr_err_prefix(rc, "%s: ", op);
    if (!w->data)
        return tsr_err(TSR_EINVAL, "%s: weights have no data", op);
    if (!w->zp || (w->zp_count != 1 && w->zp_count != w->o))
        return tsr_err(TSR_EINVAL, "%s: weights need 1 or %d (output channels) zero points, got %d%s", op, w->o,
                       w->zp_count, w->zp ? "" : " (NULL)");
    for (int k = 0; k < w->zp_count; k++)
        if (w->zp[k] < opref_dtype_min(w->dtype) || w->zp[k] > opref_dtype_max(w->dtype))
            return tsr_err(TSR_EINVAL, "%s: weight zero point [%d] = %d outside the %s range", op, k,
                           (int)w->zp[k], dtype_name(w->dtype));
    return TSR_OK;
}

static int check_shape_is(const char *op, const char *name, int n, int c, int h, int w, const opref_shape_t *s)
{
    if (n != s->n || c != s->c || h != s->h || w != s->w)
        return tsr_err(TSR_EINVAL, "%s: %s is [%d,%d,%d,%d], expected [%d,%d,%d,%d]", op, name, n, c, h, w, s->n,
                       s->c, s->h, s->w);
    return TSR_OK;
}

static int check_mult_shift(const char *op, const char *what, int64_t mult, int shift, int min_shift,
                            int max_shift)
{
    if (mult < 0 || mult > INT32_MAX)
        return tsr_err(TSR_EINVAL, "%s: %s multiplier %lld outside [0, 2^31-1]", op, what, (long long)mult);
    if (shift < min_shift || shift > max_shift)
        return tsr_err(TSR_EINVAL, "%s: %s shift %d outside [%d, %d]", op, what, shift, min_shift, max_shift);
    return TSR_OK;
}

static int check_act(const char *op, int32_t act_min, int32_t act_max, opref_dtype_t dt)
{
    if (act_min < opref_dtype_min(dt) || act_max > opref_dtype_max(dt) || act_min > act_max)
        return tsr_err(TSR_EINVAL, "%s: activation range [%d, %d] is not a non-empty subrange of %s [%d, %d]", op,
                       (int)act_min, (int)act_max, dtype_name(dt), (int)opref_dtype_min(dt),
                       (int)opref_dtype_max(dt));
    return TSR_OK;
}

/* ------------------------------------------------ fixed-point helpers */

int32_t opref_srdhm(int32_t a, int32_t b)
{
    /* gemmlowp, word for word: the one product that does not fit saturates. */
    if (a == INT32_MIN && b == INT32_MIN)
        return INT32_MAX;
    int64_t ab = (int64_t)a * (int64_t)b;
    int64_t nudge = ab >= 0 ? ((int64_t)1 << 30) : 1 - ((int64_t)1 << 30);
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31)); /* C division truncates toward zero */
}

/* rdbpot for an exponent already known to be in [0, 31]. */
static int32_t rdbpot(int32_t x, int exponent)
{
    int64_t mask = ((int64_t)1 << exponent) - 1;
    int64_t remainder = (int64_t)((uint64_t)(int64_t)x & (uint64_t)mask); /* low bits, two's complement */
    int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (int32_t)(floor_div_pow2(x, exponent) + (remainder > threshold ? 1 : 0));
}

int opref_rdbpot(int32_t x, int exponent, int32_t *out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "rdbpot: out is NULL");
    if (exponent < 0 || exponent > 31)
        return tsr_err(TSR_EINVAL, "rdbpot: exponent %d outside [0, 31]", exponent);
    *out = rdbpot(x, exponent);
    return TSR_OK;
}

/* mbqm for already checked parameters. */
static int32_t mbqm(int32_t x, int32_t mult, int shift)
{
    int left = shift > 0 ? shift : 0;
    int right = shift > 0 ? 0 : -shift;
    int32_t shifted = wrap32((int64_t)x * ((int64_t)1 << left));
    return rdbpot(opref_srdhm(shifted, mult), right);
}

int opref_mbqm(int32_t x, int32_t mult, int shift, int32_t *out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "mbqm: out is NULL");
    int rc = check_mult_shift("mbqm", "the", mult, shift, -31, 30);
    if (rc)
        return rc;
    *out = mbqm(x, mult, shift);
    return TSR_OK;
}

int opref_quantize_multiplier(double real, int32_t *mult, int *shift)
{
    if (!mult || !shift)
        return tsr_err(TSR_EINVAL, "quantize_multiplier: NULL output");
    if (!isfinite(real) || real < 0)
        return tsr_err(TSR_EINVAL, "quantize_multiplier: scale %g is not a finite value >= 0", real);
    if (real == 0) {
        *mult = 0;
        *shift = 0;
        return TSR_OK;
    }
    int e = 0;
    double q = frexp(real, &e);                             /* real = q * 2^e, q in [0.5, 1) */
    int64_t q_fixed = (int64_t)round(q * 2147483648.0);     /* round half away from zero */
    if (q_fixed == ((int64_t)1 << 31)) {                     /* q rounded up to 1.0 */
        q_fixed /= 2;
        e += 1;
    }
    if (e < -31) { /* every bit would be shifted out: flush to zero */
        e = 0;
        q_fixed = 0;
    }
    if (e > 30)
        return tsr_err(TSR_EBOUNDS, "quantize_multiplier: scale %g needs shift %d > 30", real, e);
    *mult = (int32_t)q_fixed;
    *shift = e;
    return TSR_OK;
}

int opref_quantize_bound(double real, double scale, int32_t zp, opref_dtype_t dt, int32_t *q)
{
    if (!q)
        return tsr_err(TSR_EINVAL, "quantize_bound: q is NULL");
    if (!dtype_ok(dt))
        return tsr_err(TSR_EINVAL, "quantize_bound: unknown dtype %d", (int)dt);
    if (!(scale > 0) || !isfinite(scale))
        return tsr_err(TSR_EINVAL, "quantize_bound: scale %g is not a finite value > 0", scale);
    if (isnan(real))
        return tsr_err(TSR_EINVAL, "quantize_bound: bound is NaN");
    if (zp < opref_dtype_min(dt) || zp > opref_dtype_max(dt))
        return tsr_err(TSR_EINVAL, "quantize_bound: zero point %d outside the %s range", (int)zp, dtype_name(dt));
    double v = (double)zp + round(real / scale); /* exact for every value that is not clamped */
    if (v < opref_dtype_min(dt))
        v = opref_dtype_min(dt);
    if (v > opref_dtype_max(dt))
        v = opref_dtype_max(dt);
    *q = (int32_t)v;
    return TSR_OK;
}

/* TFLite QuantizeMultiplierSmallerThanOneExp: 0 < real < 1 and shift <= 0. */
static int quantize_smaller_than_one(const char *what, double real, int32_t *mult, int *shift)
{
    if (!(real > 0 && real < 1))
        return tsr_err(TSR_EBOUNDS, "add_params_from_scales: %s multiplier %g not in (0, 1)", what, real);
    int rc = opref_quantize_multiplier(real, mult, shift);
    if (rc)
        return rc;
    if (*shift > 0)
        return tsr_err(TSR_EBOUNDS, "add_params_from_scales: %s multiplier %g rounds to shift %d > 0", what, real,
                       *shift);
    return TSR_OK;
}

int opref_add_params_from_scales(double scale_a, double scale_b, double scale_out, opref_dtype_t out_dtype,
                                 opref_add_params_t *p)
{
    if (!p)
        return tsr_err(TSR_EINVAL, "add_params_from_scales: p is NULL");
    if (!dtype_ok(out_dtype))
        return tsr_err(TSR_EINVAL, "add_params_from_scales: unknown dtype %d", (int)out_dtype);
    if (!(scale_a > 0) || !(scale_b > 0) || !(scale_out > 0) || !isfinite(scale_a) || !isfinite(scale_b) ||
        !isfinite(scale_out))
        return tsr_err(TSR_EINVAL, "add_params_from_scales: scales %g, %g, %g must be finite and > 0", scale_a,
                       scale_b, scale_out);
    p->left_shift = 20;
    p->round_once = 0;
    double twice_max = 2 * (scale_a > scale_b ? scale_a : scale_b);
    int rc = quantize_smaller_than_one("input a", scale_a / twice_max, &p->mult_a, &p->shift_a);
    if (!rc)
        rc = quantize_smaller_than_one("input b", scale_b / twice_max, &p->mult_b, &p->shift_b);
    if (!rc)
        rc = quantize_smaller_than_one("output", twice_max / ((double)(1 << p->left_shift) * scale_out),
                                       &p->mult_out, &p->shift_out);
    if (rc)
        return rc;
    p->act_min = opref_dtype_min(out_dtype);
    p->act_max = opref_dtype_max(out_dtype);
    return TSR_OK;
}

/* --------------------------------------------------- requantization */

static int check_requant(const char *op, const opref_requant_t *rq, int channels, const opref_tensor_t *y)
{
    if (!rq)
        return tsr_err(TSR_EINVAL, "%s: requant parameters are NULL", op);
    if (rq->count != 1 && rq->count != channels)
        return tsr_err(TSR_EINVAL, "%s: requant needs 1 or %d (output channels) multipliers, got %d", op, channels,
                       rq->count);
    if (!rq->mult || !rq->shift)
        return tsr_err(TSR_EINVAL, "%s: requant multiplier or shift array is NULL", op);
    for (int k = 0; k < rq->count; k++) {
        int rc = check_mult_shift(op, "requant", rq->mult[k], rq->shift[k], -31, 30);
        if (rc)
            return tsr_err_prefix(rc, "channel %d: ", k);
    }
    return check_act(op, rq->act_min, rq->act_max, y->dtype);
}

/* The requantization of one accumulator: exact arithmetic after mbqm. */
static int32_t requant_one(int32_t acc, int32_t mult, int shift, int32_t zp, int32_t act_min, int32_t act_max)
{
    int64_t v = (int64_t)mbqm(acc, mult, shift) + zp;
    return (int32_t)clamp64(v, act_min, act_max); /* act range lies inside the dtype range */
}

/* ONNX Runtime's: the product in float32 (C float, round to nearest even),
 * clamped in float to the output range less the zero point, rounded to
 * nearest even (MLAS: max, min, then _mm_cvtps_epi32), plus the zero point. */
static int32_t requant_one_f(int32_t acc, float scale, int32_t zp, int32_t act_min, int32_t act_max)
{
    float v = (float)acc * scale;
    v = fmaxf(v, (float)(act_min - zp));
    v = fminf(v, (float)(act_max - zp));
    return (int32_t)nearbyintf(v) + zp;
}

static int32_t requant_any(int32_t acc, const opref_requant_t *rq, int k, int32_t zp)
{
    if (rq->fscale)
        return requant_one_f(acc, rq->fscale[k], zp, rq->act_min, rq->act_max);
    return requant_one(acc, rq->mult[k], rq->shift[k], zp, rq->act_min, rq->act_max);
}

int opref_requantize(const opref_acc_t *acc, const opref_requant_t *rq, opref_tensor_t *y)
{
    const char *op = "requantize";
    int rc = check_acc(op, "acc", acc);
    if (!rc)
        rc = check_tensor(op, "output", y);
    if (rc)
        return rc;
    opref_shape_t s = {acc->n, acc->c, acc->h, acc->w};
    if ((rc = check_shape_is(op, "output", y->n, y->c, y->h, y->w, &s)) ||
        (rc = check_requant(op, rq, acc->c, y)))
        return rc;
    for (int n = 0; n < acc->n; n++)
        for (int c = 0; c < acc->c; c++) {
            int k = rq->count == 1 ? 0 : c;
            for (int h = 0; h < acc->h; h++)
                for (int w = 0; w < acc->w; w++) {
                    int64_t i = (((int64_t)n * acc->c + c) * acc->h + h) * acc->w + w;
                    opref_set(y, i, requant_any(acc->data[i], rq, k, y->zp));
                }
        }
    return TSR_OK;
}

/* ------------------------------------------------------------- conv2d */

/* floor((in + pad0 + pad1 - k) / stride) + 1, or an error if < 1. */
static int out_dim(const char *op, const char *axis, int in, int pad0, int pad1, int k, int stride, int *out)
{
    int64_t span = (int64_t)in + pad0 + pad1 - k;
    if (span < 0)
        return tsr_err(TSR_EINVAL, "%s: kernel %s %d larger than the padded input (%d + %d + %d)", op, axis, k, in,
                       pad0, pad1);
    *out = (int)(span / stride + 1);
    return TSR_OK;
}

int opref_conv2d_out_shape(const opref_tensor_t *x, const opref_weights_t *w, const opref_conv_params_t *p,
                           opref_shape_t *out)
{
    const char *op = "conv2d";
    int rc = check_tensor(op, "input", x);
    if (!rc)
        rc = check_weights(op, w);
    if (rc)
        return rc;
    if (!p || !out)
        return tsr_err(TSR_EINVAL, "%s: NULL parameters or output shape", op);
    if (p->stride_h < 1 || p->stride_w < 1)
        return tsr_err(TSR_EINVAL, "%s: strides (%d, %d) must be >= 1", op, p->stride_h, p->stride_w);
    if (p->pad_top < 0 || p->pad_left < 0 || p->pad_bottom < 0 || p->pad_right < 0)
        return tsr_err(TSR_EINVAL, "%s: negative padding (%d, %d, %d, %d)", op, p->pad_top, p->pad_left,
                       p->pad_bottom, p->pad_right);
    if (p->groups == 1) {
        if (w->i != x->c)
            return tsr_err(TSR_EINVAL, "%s: weights have %d input channels, input has %d", op, w->i, x->c);
    } else if (p->groups == x->c && p->groups > 1) {
        if (w->o != x->c || w->i != 1)
            return tsr_err(TSR_EINVAL, "%s: depthwise (groups %d) needs weights [%d][1][KH][KW], got [%d][%d]", op,
                           p->groups, x->c, w->o, w->i);
    } else {
        return tsr_err(TSR_EINVAL, "%s: groups %d is neither 1 nor the input channel count %d (depthwise)", op,
                       p->groups, x->c);
    }
    out->n = x->n;
    out->c = w->o;
    if ((rc = out_dim(op, "height", x->h, p->pad_top, p->pad_bottom, w->kh, p->stride_h, &out->h)) ||
        (rc = out_dim(op, "width", x->w, p->pad_left, p->pad_right, w->kw, p->stride_w, &out->w)))
        return rc;
    return check_dims("conv2d output", out->n, out->c, out->h, out->w, NULL);
}

int opref_conv2d_acc(const opref_tensor_t *x, const opref_weights_t *w, const int32_t *bias,
                     const opref_conv_params_t *p, opref_acc_t *acc)
{
    const char *op = "conv2d";
    opref_shape_t s = {0, 0, 0, 0};
    int rc = opref_conv2d_out_shape(x, w, p, &s);
    if (!rc)
        rc = check_acc(op, "accumulator output", acc);
    if (!rc)
        rc = check_shape_is(op, "accumulator output", acc->n, acc->c, acc->h, acc->w, &s);
    if (rc)
        return rc;

    /* Centred operands, once: xc = x - x_zp, wc = w - w_zp[o]. A padded
     * position holds the real value 0 (x = x_zp), so its product is 0 and
     * the window loops below simply skip it: the same sum as visiting every
     * tap, fast enough that whole networks (tests/tsr_netref.c) run in
     * seconds. */
    int64_t nx = (int64_t)x->n * x->c * x->h * x->w, kk = (int64_t)w->kh * w->kw, per_o = (int64_t)w->i * kk;
    int32_t *xc = malloc(sizeof *xc * (size_t)nx), *wc = malloc(sizeof *wc * (size_t)(per_o * w->o));
    if (!xc || !wc) {
        free(xc);
        free(wc);
        return tsr_err(TSR_ENOMEM, "%s: cannot allocate the centred operands", op);
    }
    for (int64_t i = 0; i < nx; i++)
        xc[i] = opref_get(x, i) - x->zp;
    for (int o = 0; o < w->o; o++)
        for (int64_t j = 0; j < per_o; j++)
            wc[o * per_o + j] = weight_get(w, o * per_o + j) - w->zp[w->zp_count == 1 ? 0 : o];

    int cin_per_group = x->c / p->groups; /* 1 for depthwise */
    int cout_per_group = w->o / p->groups;
    for (int n = 0; n < s.n; n++)
        for (int o = 0; o < s.c; o++) {
            int group = o / cout_per_group;
            for (int oy = 0; oy < s.h; oy++) {
                /* taps ky with iy = oy*sh - pt + ky inside [0, H) */
                int64_t y0 = (int64_t)oy * p->stride_h - p->pad_top;
                int ky0 = y0 < 0 ? (int)-y0 : 0, ky1 = y0 + w->kh > x->h ? (int)(x->h - y0) : w->kh;
                for (int ox = 0; ox < s.w; ox++) {
                    int64_t x0 = (int64_t)ox * p->stride_w - p->pad_left;
                    int kx0 = x0 < 0 ? (int)-x0 : 0, kx1 = x0 + w->kw > x->w ? (int)(x->w - x0) : w->kw;
                    int64_t sum = 0;
                    for (int i = 0; i < w->i; i++) {
                        int c = group * cin_per_group + i;
                        /* element (iy, ix) = (y0 + ky, x0 + kx) of channel c, and weight (o, i, ky, kx) */
                        int64_t xb = (((int64_t)n * x->c + c) * x->h + y0) * x->w + x0, wb = o * per_o + i * kk;
                        for (int ky = ky0; ky < ky1; ky++)
                            for (int kx = kx0; kx < kx1; kx++)
                                sum += (int64_t)xc[xb + (int64_t)ky * x->w + kx] * wc[wb + ky * w->kw + kx];
                    }
                    if (bias)
                        sum += bias[o];
                    acc->data[(((int64_t)n * s.c + o) * s.h + oy) * s.w + ox] = wrap32(sum);
                }
            }
        }
    free(xc);
    free(wc);
    return TSR_OK;
}

/* Allocate an accumulator of shape s. */
static int acc_alloc(const char *op, const opref_shape_t *s, opref_acc_t *a)
{
    int64_t count = 0;
    int rc = check_dims(op, s->n, s->c, s->h, s->w, &count);
    if (rc)
        return rc;
    a->n = s->n;
    a->c = s->c;
    a->h = s->h;
    a->w = s->w;
    a->data = malloc((size_t)count * sizeof(int32_t));
    if (!a->data)
        return tsr_err(TSR_ENOMEM, "%s: cannot allocate %lld accumulators", op, (long long)count);
    return TSR_OK;
}

int opref_conv2d(const opref_tensor_t *x, const opref_weights_t *w, const int32_t *bias,
                 const opref_conv_params_t *p, const opref_requant_t *rq, opref_tensor_t *y)
{
    const char *op = "conv2d";
    opref_shape_t s = {0, 0, 0, 0};
    int rc = opref_conv2d_out_shape(x, w, p, &s);
    if (!rc)
        rc = check_tensor(op, "output", y);
    if (!rc)
        rc = check_shape_is(op, "output", y->n, y->c, y->h, y->w, &s);
    if (!rc)
        rc = check_requant(op, rq, s.c, y);
    if (rc)
        return rc;
    opref_acc_t acc;
    if ((rc = acc_alloc(op, &s, &acc)))
        return rc;
    rc = opref_conv2d_acc(x, w, bias, p, &acc);
    if (!rc)
        rc = opref_requantize(&acc, rq, y);
    free(acc.data);
    return rc;
}

/* -------------------------------------------------------------- dense */

int opref_dense_out_shape(const opref_tensor_t *x, const opref_weights_t *w, opref_shape_t *out)
{
    const char *op = "dense";
    int rc = check_tensor(op, "input", x);
    if (!rc)
        rc = check_weights(op, w);
    if (rc)
        return rc;
    if (!out)
        return tsr_err(TSR_EINVAL, "%s: NULL output shape", op);
    int64_t k = (int64_t)x->c * x->h * x->w;
    if (w->kh != 1 || w->kw != 1 || w->i != k)
        return tsr_err(TSR_EINVAL, "%s: weights [%d][%d][%d][%d] are not [M][K] with K = C*H*W = %lld", op, w->o,
                       w->i, w->kh, w->kw, (long long)k);
    out->n = x->n;
    out->c = w->o;
    out->h = 1;
    out->w = 1;
    return TSR_OK;
}

int opref_dense_acc(const opref_tensor_t *x, const opref_weights_t *w, const int32_t *bias, opref_acc_t *acc)
{
    const char *op = "dense";
    opref_shape_t s = {0, 0, 0, 0};
    int rc = opref_dense_out_shape(x, w, &s);
    if (!rc)
        rc = check_acc(op, "accumulator output", acc);
    if (!rc)
        rc = check_shape_is(op, "accumulator output", acc->n, acc->c, acc->h, acc->w, &s);
    if (rc)
        return rc;
    int64_t K = w->i;
    for (int n = 0; n < s.n; n++)
        for (int m = 0; m < s.c; m++) {
            int64_t w_zp = w->zp[w->zp_count == 1 ? 0 : m];
            int64_t sum = 0;
            for (int64_t k = 0; k < K; k++) {
                int64_t xv = opref_get(x, (int64_t)n * K + k);
                int64_t wv = weight_get(w, (int64_t)m * K + k);
                sum += (xv - x->zp) * (wv - w_zp);
            }
            if (bias)
                sum += bias[m];
            acc->data[(int64_t)n * s.c + m] = wrap32(sum);
        }
    return TSR_OK;
}

int opref_dense(const opref_tensor_t *x, const opref_weights_t *w, const int32_t *bias, const opref_requant_t *rq,
                opref_tensor_t *y)
{
    const char *op = "dense";
    opref_shape_t s = {0, 0, 0, 0};
    int rc = opref_dense_out_shape(x, w, &s);
    if (!rc)
        rc = check_tensor(op, "output", y);
    if (!rc)
        rc = check_shape_is(op, "output", y->n, y->c, y->h, y->w, &s);
    if (!rc)
        rc = check_requant(op, rq, s.c, y);
    if (rc)
        return rc;
    opref_acc_t acc;
    if ((rc = acc_alloc(op, &s, &acc)))
        return rc;
    rc = opref_dense_acc(x, w, bias, &acc);
    if (!rc)
        rc = opref_requantize(&acc, rq, y);
    free(acc.data);
    return rc;
}

/* -------------------------------------------------------------- pools */

int opref_pool_out_shape(const opref_tensor_t *x, const opref_pool_params_t *p, opref_shape_t *out)
{
    const char *op = "pool";
    int rc = check_tensor(op, "input", x);
    if (rc)
        return rc;
    if (!p || !out)
        return tsr_err(TSR_EINVAL, "%s: NULL parameters or output shape", op);
    if (p->kh < 1 || p->kw < 1)
        return tsr_err(TSR_EINVAL, "%s: kernel %dx%d must be at least 1x1", op, p->kh, p->kw);
    if (p->stride_h < 1 || p->stride_w < 1)
        return tsr_err(TSR_EINVAL, "%s: strides (%d, %d) must be >= 1", op, p->stride_h, p->stride_w);
    if (p->pad_top < 0 || p->pad_bottom < 0 || p->pad_top >= p->kh || p->pad_bottom >= p->kh || p->pad_left < 0 ||
        p->pad_right < 0 || p->pad_left >= p->kw || p->pad_right >= p->kw)
        return tsr_err(TSR_EINVAL, "%s: padding (%d, %d, %d, %d) must be >= 0 and smaller than the kernel %dx%d",
                       op, p->pad_top, p->pad_left, p->pad_bottom, p->pad_right, p->kh, p->kw);
    if (p->count_include_pad != 0 && p->count_include_pad != 1)
        return tsr_err(TSR_EINVAL, "%s: count_include_pad %d is not 0 or 1", op, p->count_include_pad);
    out->n = x->n;
    out->c = x->c;
    if ((rc = out_dim(op, "height", x->h, p->pad_top, p->pad_bottom, p->kh, p->stride_h, &out->h)) ||
        (rc = out_dim(op, "width", x->w, p->pad_left, p->pad_right, p->kw, p->stride_w, &out->w)))
        return rc;
    return TSR_OK;
}

/* y must be a tensor of shape s with x's dtype and zero point. */
static int check_same_quant_output(const char *op, const opref_tensor_t *x, const opref_tensor_t *y,
                                   const opref_shape_t *s)
{
    int rc = check_tensor(op, "output", y);
    if (!rc)
        rc = check_shape_is(op, "output", y->n, y->c, y->h, y->w, s);
    if (rc)
        return rc;
    if (y->dtype != x->dtype || y->zp != x->zp)
        return tsr_err(TSR_EINVAL, "%s: output (%s, zp %d) must have the input's dtype and zero point (%s, zp %d)",
                       op, dtype_name(y->dtype), (int)y->zp, dtype_name(x->dtype), (int)x->zp);
    return TSR_OK;
}

/* Round sum / count half away from zero (count >= 1), as TFLite's int8
 * average pool: C division truncates toward zero. */
static int64_t div_round_half_away(int64_t sum, int64_t count)
{
    return sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
}

static int pool(const char *op, const opref_tensor_t *x, const opref_pool_params_t *p, opref_tensor_t *y,
                int is_max)
{
    opref_shape_t s = {0, 0, 0, 0};
    int rc = opref_pool_out_shape(x, p, &s);
    if (!rc)
        rc = check_same_quant_output(op, x, y, &s);
    if (rc)
        return rc;
    for (int n = 0; n < s.n; n++)
        for (int c = 0; c < s.c; c++)
            for (int oy = 0; oy < s.h; oy++)
                for (int ox = 0; ox < s.w; ox++) {
                    int64_t best = INT64_MIN, sum = 0, valid = 0;
                    for (int ky = 0; ky < p->kh; ky++)
                        for (int kx = 0; kx < p->kw; kx++) {
                            int64_t iy = (int64_t)oy * p->stride_h - p->pad_top + ky;
                            int64_t ix = (int64_t)ox * p->stride_w - p->pad_left + kx;
                            if (iy < 0 || iy >= x->h || ix < 0 || ix >= x->w)
                                continue; /* padding: never a candidate for max, not summed */
                            int64_t v = opref_get(x, (((int64_t)n * x->c + c) * x->h + iy) * x->w + ix);
                            if (v > best)
                                best = v;
                            sum += v;
                            valid++;
                        }
                    /* valid >= 1: every pad is smaller than the kernel */
                    int64_t result;
                    if (is_max) {
                        result = best;
                    } else {
                        int64_t count = valid;
                        if (p->count_include_pad) {
                            int64_t padded = (int64_t)p->kh * p->kw - valid;
                            sum += padded * x->zp; /* padding holds the real value 0 */
                            count = (int64_t)p->kh * p->kw;
                        }
                        result = div_round_half_away(sum, count);
                    }
                    opref_set(y, (((int64_t)n * s.c + c) * s.h + oy) * s.w + ox, (int32_t)result);
                }
    return TSR_OK;
}

int opref_maxpool(const opref_tensor_t *x, const opref_pool_params_t *p, opref_tensor_t *y)
{
    return pool("maxpool", x, p, y, 1);
}

int opref_avgpool(const opref_tensor_t *x, const opref_pool_params_t *p, opref_tensor_t *y)
{
    return pool("avgpool", x, p, y, 0);
}

int opref_global_avgpool(const opref_tensor_t *x, opref_tensor_t *y)
{
    const char *op = "global_avgpool";
    int rc = check_tensor(op, "input", x);
    if (rc)
        return rc;
    opref_shape_t s = {x->n, x->c, 1, 1};
    if ((rc = check_same_quant_output(op, x, y, &s)))
        return rc;
    int64_t count = (int64_t)x->h * x->w;
    for (int n = 0; n < x->n; n++)
        for (int c = 0; c < x->c; c++) {
            int64_t sum = 0;
            for (int64_t k = 0; k < count; k++)
                sum += opref_get(x, ((int64_t)n * x->c + c) * count + k);
            opref_set(y, (int64_t)n * x->c + c, (int32_t)div_round_half_away(sum, count));
        }
    return TSR_OK;
}

/* ------------------------------------------------------- elementwise */

int opref_add(const opref_tensor_t *a, const opref_tensor_t *b, const opref_add_params_t *p, opref_tensor_t *y)
{
    const char *op = "add";
    int rc = check_tensor(op, "input a", a);
    if (!rc)
        rc = check_tensor(op, "input b", b);
    if (!rc)
        rc = check_tensor(op, "output", y);
    if (rc)
        return rc;
    opref_shape_t s = {a->n, a->c, a->h, a->w};
    if ((rc = check_shape_is(op, "input b", b->n, b->c, b->h, b->w, &s)) ||
        (rc = check_shape_is(op, "output", y->n, y->c, y->h, y->w, &s)))
        return rc;
    if (!p)
        return tsr_err(TSR_EINVAL, "%s: parameters are NULL", op);
    if (p->left_shift < 0 || p->left_shift > 22)
        return tsr_err(TSR_EINVAL, "%s: left_shift %d outside [0, 22]", op, p->left_shift);
    if ((rc = check_mult_shift(op, "input a", p->mult_a, p->shift_a, -31, 0)) ||
        (rc = check_mult_shift(op, "input b", p->mult_b, p->shift_b, -31, 0)) ||
        (rc = check_mult_shift(op, "output", p->mult_out, p->shift_out, -31, 30)) ||
        (rc = check_act(op, p->act_min, p->act_max, y->dtype)))
        return rc;
    if (p->round_once && (p->mult_out != 1 << 30 || p->shift_out > 0 || p->shift_out < -30))
        return tsr_err(TSR_EINVAL, "%s: round_once needs output multiplier 2^30 and shift in [-30, 0]", op);
    int64_t count = (int64_t)s.n * s.c * s.h * s.w;
    for (int64_t i = 0; i < count; i++) {
        /* |x - zp| <= 255 and left_shift <= 22: the shifted value fits int32 */
        int32_t va = (int32_t)((opref_get(a, i) - a->zp) * ((int64_t)1 << p->left_shift));
        int32_t vb = (int32_t)((opref_get(b, i) - b->zp) * ((int64_t)1 << p->left_shift));
        /* shifts <= 0: |scaled| <= |shifted| < 2^30, so the sum fits int32 */
        int32_t sa = mbqm(va, p->mult_a, p->shift_a);
        int32_t sb = mbqm(vb, p->mult_b, p->shift_b);
        int32_t raw = sa + sb;
        if (p->round_once) { /* sum / 2^(1 - shift_out), rounded half away from zero, once */
            int32_t r = 0;
            if ((rc = opref_rdbpot(raw, 1 - p->shift_out, &r)))
                return rc;
            opref_set(y, i, (int32_t)clamp64((int64_t)r + y->zp, p->act_min, p->act_max));
        } else {
            opref_set(y, i, requant_one(raw, p->mult_out, p->shift_out, y->zp, p->act_min, p->act_max));
        }
    }
    return TSR_OK;
}

static int unary(const char *op, const opref_tensor_t *x, int32_t lo, int32_t hi, opref_tensor_t *y)
{
    int rc = check_tensor(op, "input", x);
    if (rc)
        return rc;
    opref_shape_t s = {x->n, x->c, x->h, x->w};
    if ((rc = check_same_quant_output(op, x, y, &s)))
        return rc;
    if ((rc = check_act(op, lo, hi, x->dtype)))
        return rc;
    int64_t count = (int64_t)s.n * s.c * s.h * s.w;
    for (int64_t i = 0; i < count; i++)
        opref_set(y, i, (int32_t)clamp64(opref_get(x, i), lo, hi));
    return TSR_OK;
}

int opref_relu(const opref_tensor_t *x, opref_tensor_t *y)
{
    if (!x)
        return tsr_err(TSR_EINVAL, "relu: input is NULL");
    return unary("relu", x, x->zp, opref_dtype_max(x->dtype), y);
}

int opref_clip(const opref_tensor_t *x, int32_t lo, int32_t hi, opref_tensor_t *y)
{
    return unary("clip", x, lo, hi, y);
}

int opref_mul(const opref_tensor_t *x, const opref_tensor_t *s, float scale, int32_t act_min, int32_t act_max,
              opref_tensor_t *y)
{
    int rc;
    if ((rc = check_tensor("mul", "x", x)) || (rc = check_tensor("mul", "s", s)) ||
        (rc = check_tensor("mul", "output", y)))
        return rc;
    if (s->n != x->n || s->c != x->c || s->h != 1 || s->w != 1 || y->n != x->n || y->c != x->c || y->h != x->h ||
        y->w != x->w)
        return tsr_err(TSR_EINVAL, "mul: s must be [N,C,1,1] and the output x's shape");
    if ((rc = check_act("mul", act_min, act_max, y->dtype)))
        return rc;
    if (!(scale > 0.0f) || !isfinite(scale))
        return tsr_err(TSR_EINVAL, "mul: scale %g must be positive and finite", (double)scale);
    const int64_t hw = (int64_t)x->h * x->w, count = (int64_t)x->n * x->c * hw;
    for (int64_t i = 0; i < count; i++) {
        /* the product is exact in float32 (|p| <= 255 * 255 < 2^24); one float32 multiply, the zero point
           added in float32, then the integer */
        const int64_t pr = (int64_t)(opref_get(x, i) - x->zp) * (opref_get(s, i / hw) - s->zp);
        const float v = (float)pr * scale;
        opref_set(y, i, (int32_t)clamp64((int64_t)nearbyintf(v + (float)y->zp), act_min, act_max));
    }
    return TSR_OK;
}

int opref_gavg(const opref_tensor_t *x, const opref_requant_t *rq, opref_tensor_t *y)
{
    int rc;
    if ((rc = check_tensor("gavg", "input", x)) || (rc = check_tensor("gavg", "output", y)))
        return rc;
    if (y->n != x->n || y->c != x->c || y->h != 1 || y->w != 1 || !rq || rq->count != 1)
        return tsr_err(TSR_EINVAL, "gavg: output must be [N,C,1,1] with one requantization");
    const int64_t hw = (int64_t)x->h * x->w, nc = (int64_t)x->n * x->c;
    int32_t *s = malloc(sizeof *s * (size_t)nc);
    if (!s)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int64_t k = 0; k < nc; k++) {
        int64_t sum = 0;
        for (int64_t i = 0; i < hw; i++)
            sum += opref_get(x, k * hw + i) - x->zp;
        s[k] = (int32_t)sum;
    }
    opref_acc_t acc = {x->n, x->c, 1, 1, s};
    rc = opref_requantize(&acc, rq, y);
    free(s);
    return rc;
}

int opref_softmax(const opref_tensor_t *x, float x_scale, float y_scale, opref_tensor_t *y)
{
    int rc;
    if ((rc = check_tensor("softmax", "input", x)) || (rc = check_tensor("softmax", "output", y)))
        return rc;
    if (y->n != x->n || y->c != x->c || y->h != x->h || y->w != x->w)
        return tsr_err(TSR_EINVAL, "softmax: output shape differs from the input's");
    if (!(x_scale > 0.0f) || !(y_scale > 0.0f))
        return tsr_err(TSR_EINVAL, "softmax: scales must be positive");
    const float ysf = floorf(1.0f / y_scale); /* float32 reciprocal, then floor */
    if (!(ysf >= 1.0f && ysf <= 32767.0f))
        return tsr_err(TSR_EINVAL, "softmax: floor(1 / y_scale) outside [1, 32767]");
    const int64_t ys = (int64_t)ysf;
    int P = 22;
    while (P > 0 && ((int64_t)1 << (30 - P)) < x->w) /* w * 2^P <= 2^30 */
        P--;
    while (P > 0 && (ys << P) > INT32_MAX)
        P--;
    if (P < 8)
        return tsr_err(TSR_EINVAL, "softmax: P = %d < 8", P);
    const int64_t rows = (int64_t)x->n * x->c * x->h, w = x->w;
    int32_t *e = malloc(sizeof *e * (size_t)w);
    if (!e)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int64_t r = 0; r < rows; r++) {
        int32_t m = INT32_MIN;
        for (int64_t k = 0; k < w; k++)
            m = opref_get(x, r * w + k) > m ? opref_get(x, r * w + k) : m;
        int64_t sum = 0;
        for (int64_t k = 0; k < w; k++) {
            const int32_t d = m - opref_get(x, r * w + k); /* in [0, 255] */
            e[k] = (int32_t)floor(exp(-(double)d * (double)x_scale) * (double)((int64_t)1 << P) + 0.5);
            sum += e[k];
        }
        const int32_t R = (int32_t)((((int64_t)1) << (30 + P)) / sum); /* sum in [2^P, 2^30] */
        for (int64_t k = 0; k < w; k++) {
            int64_t q = (int64_t)rdbpot(opref_srdhm((int32_t)(e[k] * ys), R), P - 1) + y->zp;
            q = q > 255 ? 255 : q;
            ((uint8_t *)y->data)[r * w + k] = (uint8_t)(q & 255); /* the low 8 bits: an int8 over 127 wraps */
        }
    }
    free(e);
    return TSR_OK;
}
