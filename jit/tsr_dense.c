/*
 * tsr_dense: quantized dense lowering as a 1x1 conv2d over the batch rows
 * (see tsr_dense.h for the mapping and the weight split).
 */
#include "tsr_dense.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_dtype.h"
#include "tsr_error.h"

#define OP "dense"

static int cdiv(int a, int b) { return (a + b - 1) / b; }

/* int8 parts needed for every w - zp with w in the range of dt. */
static int parts_for(tsr_dtype_e dt, int32_t zp)
{
    int32_t lo = tsr_dt_min(dt) - zp, hi = tsr_dt_max(dt) - zp;
    if (lo >= -128 && hi <= 127)
        return 1;
    if (lo >= -256 && hi <= 254)
        return 2;
    return 3;
}

int tsr_dense_check(const tsr_dense_params_t *p, int *parts)
{
    if (!p)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters");
    if (p->n < 1 || p->k < 1 || p->m < 1)
        return tsr_err(TSR_EINVAL, OP ": sizes N %d, K %d, M %d must be positive", p->n, p->k, p->m);
    if (!tsr_dt_ok(p->x_dtype) || !tsr_dt_ok(p->w_dtype) || !tsr_dt_ok(p->y_dtype))
        return tsr_err(TSR_EINVAL, OP ": dtypes must be int8 or uint8 (input %s, weights %s, output %s)",
                       tsr_dtype_name(p->x_dtype), tsr_dtype_name(p->w_dtype), tsr_dtype_name(p->y_dtype));
    if (p->x_zp < tsr_dt_min(p->x_dtype) || p->x_zp > tsr_dt_max(p->x_dtype))
        return tsr_err(TSR_EINVAL, OP ": input zero point %d outside [%d, %d]", p->x_zp, tsr_dt_min(p->x_dtype),
                       tsr_dt_max(p->x_dtype));
    if (p->y_zp < tsr_dt_min(p->y_dtype) || p->y_zp > tsr_dt_max(p->y_dtype))
        return tsr_err(TSR_EINVAL, OP ": output zero point %d outside [%d, %d]", p->y_zp, tsr_dt_min(p->y_dtype),
                       tsr_dt_max(p->y_dtype));
    if (!p->w_zp || (p->w_zp_count != 1 && p->w_zp_count != p->m))
        return tsr_err(TSR_EINVAL, OP ": weight zero points: need 1 or M = %d values, got %d%s", p->m, p->w_zp_count,
                       p->w_zp ? "" : " (NULL)");
    int np = 1;
    for (int i = 0; i < p->w_zp_count; i++) {
        if (p->w_zp[i] < tsr_dt_min(p->w_dtype) || p->w_zp[i] > tsr_dt_max(p->w_dtype))
            return tsr_err(TSR_EINVAL, OP ": weight zero point [%d] = %d outside [%d, %d]", i, p->w_zp[i],
                           tsr_dt_min(p->w_dtype), tsr_dt_max(p->w_dtype));
        int q = parts_for(p->w_dtype, p->w_zp[i]);
        np = q > np ? q : np;
    }
    int rc = tsr_requant_check(OP, &p->rq, p->m, "M");
    if (rc)
        return rc;
    if ((int64_t)p->n * p->k > INT32_MAX || (int64_t)p->m * p->k * np > INT32_MAX ||
        (int64_t)p->n * p->m > INT32_MAX || (int64_t)p->n * p->k * np > INT32_MAX)
        return tsr_err(TSR_EINVAL, OP ": tensor too large (more than 2^31 - 1 elements)");
    if (parts)
        *parts = np;
    return TSR_OK;
}

int tsr_dense_plan(tsr_device_t *dev, const tsr_dense_params_t *params, tsr_dense_plan_t *pl)
{
    static const int32_t zero = 0;
    if (!pl)
        return tsr_err(TSR_EINVAL, OP ": NULL plan");
    memset(pl, 0, sizeof *pl);
    if (!dev)
        return tsr_err(TSR_EINVAL, OP ": NULL device");
    int parts = 0;
    int rc = tsr_dense_check(params, &parts);
    if (rc)
        return rc;
    const tsr_config_t *c = tsr_device_config(dev);
    pl->p = *params;
    pl->w_zp = malloc(sizeof(int32_t) * (size_t)params->w_zp_count);
    pl->mult = malloc(sizeof(int32_t) * (size_t)params->rq_count);
    pl->shift = malloc(sizeof(int32_t) * (size_t)params->rq_count);
    if (!pl->w_zp || !pl->mult || !pl->shift) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto fail;
    }
    memcpy(pl->w_zp, params->w_zp, sizeof(int32_t) * (size_t)params->w_zp_count);
    memcpy(pl->mult, params->mult, sizeof(int32_t) * (size_t)params->rq_count);
    memcpy(pl->shift, params->shift, sizeof(int32_t) * (size_t)params->rq_count);
    pl->p.w_zp = pl->w_zp;
    pl->p.mult = pl->mult;
    pl->p.shift = pl->shift;
    pl->parts = parts;
    pl->rows = cdiv(params->n, (int)c->batch);
    pl->lanes = cdiv(params->n, pl->rows);

    tsr_conv2d_params_t cp;
    memset(&cp, 0, sizeof cp);
    cp.n = pl->lanes;
    cp.c_in = parts * params->k;
    cp.h = pl->rows;
    cp.w = 1;
    cp.c_out = params->m;
    cp.kh = cp.kw = 1;
    cp.stride_h = cp.stride_w = 1;
    cp.groups = 1;
    cp.x_dtype = params->x_dtype;
    cp.x_zp = params->x_zp;
    if (parts > 1) {
        cp.w_dtype = TSR_DT_INT8; /* the parts of w - w_zp */
        cp.w_zp = &zero;
        cp.w_zp_count = 1;
    } else {
        cp.w_dtype = params->w_dtype;
        cp.w_zp = pl->w_zp;
        cp.w_zp_count = params->w_zp_count;
    }
    cp.rq = pl->p.rq; /* the arrays are the plan's copies */
    if ((rc = tsr_conv2d_plan(dev, &cp, &pl->conv))) {
        rc = tsr_err_prefix(rc, OP " [%d x %d] x [%d x %d]^T as a 1x1 conv2d: ", params->n, params->k, params->m,
                            params->k);
        goto fail;
    }
    pl->p.fscale = pl->conv.fscale; /* (the conv plan's copy; the caller's may go) */
    return TSR_OK;
fail:
    tsr_dense_plan_free(dev, pl);
    return rc;
}

void tsr_dense_plan_free(tsr_device_t *dev, tsr_dense_plan_t *pl)
{
    if (!pl)
        return;
    tsr_conv2d_plan_free(dev, &pl->conv); /* safe on a zeroed conv plan */
    free(pl->w_zp);
    free(pl->mult);
    free(pl->shift);
    memset(pl, 0, sizeof *pl);
}

int tsr_dense_write_input(tsr_device_t *dev, const tsr_dense_plan_t *pl, const void *x)
{
    if (!dev || !pl || !x)
        return tsr_err(TSR_EINVAL, OP ": NULL device, plan or input");
    const tsr_dense_params_t *p = &pl->p;
    const size_t K = (size_t)p->k, KP = K * (size_t)pl->parts, R = (size_t)pl->rows;
    uint8_t *xc = malloc((size_t)pl->lanes * KP * R);
    if (!xc)
        return tsr_err(TSR_ENOMEM, "out of memory");
    const uint8_t *xb = x;
    /* conv input [L][K'][R][1]: element (l, c, r) = x[l*R + r][c % K] */
    for (size_t l = 0; l < (size_t)pl->lanes; l++)
        for (size_t cc = 0; cc < KP; cc++) {
            uint8_t *dst = xc + (l * KP + cc) * R;
            for (size_t r = 0; r < R; r++) {
                size_t n = l * R + r;
                dst[r] = n < (size_t)p->n ? xb[n * K + cc % K] : (uint8_t)p->x_zp;
            }
        }
    int rc = tsr_conv2d_write_input(dev, &pl->conv, xc);
    free(xc);
    return rc;
}

int tsr_dense_write_weights(tsr_device_t *dev, const tsr_dense_plan_t *pl, const void *w, const int32_t *bias)
{
    if (!dev || !pl || !w)
        return tsr_err(TSR_EINVAL, OP ": NULL device, plan or weights");
    const tsr_dense_params_t *p = &pl->p;
    if (pl->parts == 1) /* [M][K] is the conv's [M][K][1][1] */
        return tsr_conv2d_write_weights(dev, &pl->conv, w, bias);
    const size_t K = (size_t)p->k, KP = K * (size_t)pl->parts;
    int8_t *wc = malloc((size_t)p->m * KP);
    if (!wc)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (size_t m = 0; m < (size_t)p->m; m++) {
        int32_t zp = p->w_zp[p->w_zp_count == 1 ? 0 : m];
        for (size_t k = 0; k < K; k++) {
            int32_t v = tsr_dt_get(p->w_dtype, w, m * K + k) - zp;
            for (int j = 0; j < pl->parts; j++) {
                int32_t a = v < -128 ? -128 : v > 127 ? 127 : v;
                wc[m * KP + (size_t)j * K + k] = (int8_t)a;
                v -= a;
            }
            /* v == 0 here: parts_for() covers every value of the dtype */
        }
    }
    int rc = tsr_conv2d_write_weights(dev, &pl->conv, wc, bias);
    free(wc);
    return rc;
}

int tsr_dense_exec(tsr_device_t *dev, const tsr_dense_plan_t *pl)
{
    if (!dev || !pl)
        return tsr_err(TSR_EINVAL, OP ": NULL device or plan");
    return tsr_conv2d_exec(dev, &pl->conv);
}

int tsr_dense_read_output(tsr_device_t *dev, const tsr_dense_plan_t *pl, void *y)
{
    if (!dev || !pl || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL device, plan or output");
    const tsr_dense_params_t *p = &pl->p;
    const size_t M = (size_t)p->m, R = (size_t)pl->rows;
    uint8_t *yc = malloc((size_t)pl->lanes * M * R);
    if (!yc)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = tsr_conv2d_read_output(dev, &pl->conv, yc);
    if (!rc) {
        uint8_t *yb = y;
        /* conv output [L][M][R][1]: y[n][m] = (l = n / R, m, r = n % R) */
        for (size_t n = 0; n < (size_t)p->n; n++)
            for (size_t m = 0; m < M; m++)
                yb[n * M + m] = yc[((n / R) * M + m) * R + n % R];
    }
    free(yc);
    return rc;
}

int tsr_dense_run(tsr_device_t *dev, const tsr_dense_params_t *p, const void *x, const void *w, const int32_t *bias,
                  void *y)
{
    if (!x || !w || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL input, weight or output data");
    tsr_dense_plan_t pl;
    int rc = tsr_dense_plan(dev, p, &pl);
    if (rc)
        return rc;
    if (!(rc = tsr_dense_write_weights(dev, &pl, w, bias)) && !(rc = tsr_dense_write_input(dev, &pl, x)) &&
        !(rc = tsr_dense_exec(dev, &pl)))
        rc = tsr_dense_read_output(dev, &pl, y);
    tsr_dense_plan_free(dev, &pl);
    return rc;
}
