/*
 * tsr_quant: real scales to integer requantization parameters and
 * activation bounds (see tsr_quant.h and jit/operators.md).
 */
#include "tsr_quant.h"

#include <math.h>

#include "tsr_dtype.h"
#include "tsr_error.h"

int tsr_quantize_multiplier(double real, int32_t *mult, int32_t *shift)
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
    double q = frexp(real, &e);                   /* real = q * 2^e, q in [0.5, 1) */
    int64_t m = (int64_t)round(q * 2147483648.0); /* q * 2^31 is exact; round half away from zero */
    if (m == ((int64_t)1 << 31)) {                /* q rounded up to 1.0 */
        m = (int64_t)1 << 30;
        e += 1;
    }
    if (e < -31) { /* every bit would be shifted out */
        *mult = 0;
        *shift = 0;
        return TSR_OK;
    }
    if (e > 30)
        return tsr_err(TSR_EBOUNDS, "quantize_multiplier: scale %g needs a left shift of %d (at most 30)", real, e);
    *mult = (int32_t)m;
    *shift = e;
    return TSR_OK;
}

int tsr_quant_requant_params(double x_scale, const double *w_scale, int count, double y_scale, int32_t *mult,
                             int32_t *shift)
{
    if (!w_scale || !mult || !shift || count < 1)
        return tsr_err(TSR_EINVAL, "requantization scales: NULL array or count %d < 1", count);
    if (!isfinite(x_scale) || !(x_scale > 0))
        return tsr_err(TSR_EINVAL, "requantization scales: input scale %g is not a finite value > 0", x_scale);
    if (!isfinite(y_scale) || !(y_scale > 0))
        return tsr_err(TSR_EINVAL, "requantization scales: output scale %g is not a finite value > 0", y_scale);
    for (int i = 0; i < count; i++) {
        if (!isfinite(w_scale[i]) || !(w_scale[i] >= 0))
            return tsr_err(TSR_EINVAL, "requantization scales: weight scale [%d] = %g is not a finite value >= 0", i,
                           w_scale[i]);
        double r = x_scale * w_scale[i] / y_scale;
        int rc = tsr_quantize_multiplier(r, &mult[i], &shift[i]);
        if (rc)
            return tsr_err_prefix(rc, "requantization scale [%d] = %g * %g / %g: ", i, x_scale, w_scale[i], y_scale);
    }
    return TSR_OK;
}

int tsr_quantize_bound(double real, double scale, int32_t zp, tsr_dtype_e dt, int32_t *q)
{
    if (!q)
        return tsr_err(TSR_EINVAL, "quantize_bound: NULL output");
    if (dt != TSR_DT_INT8 && dt != TSR_DT_UINT8)
        return tsr_err(TSR_EINVAL, "quantize_bound: dtype %s is not int8 or uint8", tsr_dtype_name(dt));
    const int32_t lo = tsr_dt_min(dt), hi = tsr_dt_max(dt);
    if (!isfinite(scale) || !(scale > 0))
        return tsr_err(TSR_EINVAL, "quantize_bound: scale %g is not a finite value > 0", scale);
    if (isnan(real))
        return tsr_err(TSR_EINVAL, "quantize_bound: bound is NaN");
    if (zp < lo || zp > hi)
        return tsr_err(TSR_EINVAL, "quantize_bound: zero point %d outside [%d, %d]", zp, lo, hi);
    double v = (double)zp + round(real / scale); /* exact wherever the result is not clamped */
    *q = v < lo ? lo : v > hi ? hi : (int32_t)v;
    return TSR_OK;
}

/* QuantizeMultiplierSmallerThanOneExp: 0 < real < 1 and shift <= 0. */
static int smaller_than_one(const char *what, double real, int32_t *mult, int32_t *shift)
{
    if (!(real > 0 && real < 1))
        return tsr_err(TSR_EBOUNDS, "add scales: %s multiplier %g is not in (0, 1)", what, real);
    int rc = tsr_quantize_multiplier(real, mult, shift);
    if (rc)
        return tsr_err_prefix(rc, "add scales: %s multiplier: ", what);
    if (*shift > 0)
        return tsr_err(TSR_EBOUNDS, "add scales: %s multiplier %g rounds to shift %d > 0", what, real, *shift);
    return TSR_OK;
}

int tsr_quant_add_params(double scale_a, double scale_b, double scale_y, tsr_add_quant_t *out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "add scales: NULL output");
    const double s[3] = {scale_a, scale_b, scale_y};
    const char *name[3] = {"input a", "input b", "output"};
    for (int i = 0; i < 3; i++)
        if (!isfinite(s[i]) || !(s[i] > 0))
            return tsr_err(TSR_EINVAL, "add scales: %s scale %g is not a finite value > 0", name[i], s[i]);
    out->left_shift = 20;
    double twice_max = 2 * (scale_a > scale_b ? scale_a : scale_b);
    int rc = smaller_than_one("input a", scale_a / twice_max, &out->mult_a, &out->shift_a);
    if (!rc)
        rc = smaller_than_one("input b", scale_b / twice_max, &out->mult_b, &out->shift_b);
    if (!rc)
        rc = smaller_than_one("output", twice_max / ((double)(1 << out->left_shift) * scale_y), &out->mult_out,
                              &out->shift_out);
    return rc;
}
