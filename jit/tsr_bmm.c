/*
 * tsr_bmm: the batched matmul of two activations as one dense plan run
 * once per batch with that batch's B^T as its weights (tsr_bmm.h).
 */
#include "tsr_bmm.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_dtype.h"
#include "tsr_error.h"
#include "tsr_isa.h"

#define OP "matmul of two activations"

int tsr_bmm_check(const tsr_bmm_params_t *p)
{
    if (!p)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters");
    if (p->batch < 1 || p->m < 1 || p->k < 1 || p->n < 1)
        return tsr_err(TSR_EINVAL, OP ": sizes batch %d, M %d, K %d, N %d must be positive", p->batch, p->m, p->k,
                       p->n);
    if (!tsr_dt_ok(p->a_dtype) || !tsr_dt_ok(p->b_dtype))
        return tsr_err(TSR_EINVAL, OP ": operands must be int8 or uint8 (are %s and %s)",
                       tsr_dtype_name(p->a_dtype), tsr_dtype_name(p->b_dtype));
    if (p->b_zp < tsr_dt_min(p->b_dtype) || p->b_zp > tsr_dt_max(p->b_dtype))
        return tsr_err(TSR_EINVAL, OP ": B's zero point %d outside [%d, %d]", p->b_zp, tsr_dt_min(p->b_dtype),
                       tsr_dt_max(p->b_dtype));
    if (p->rq_count != 1)
        return tsr_err(TSR_EINVAL, OP ": the requantization must be per tensor (rq_count %d)", p->rq_count);
    if ((int64_t)p->batch * p->m * p->k > INT32_MAX || (int64_t)p->batch * p->k * p->n > INT32_MAX ||
        (int64_t)p->batch * p->m * p->n > INT32_MAX)
        return tsr_err(TSR_EINVAL, OP ": tensor too large (more than 2^31 - 1 elements)");
    return TSR_OK;
}

/* The dense that runs one batch: A's rows by B^T (the plan's copies of the arrays). */
static tsr_dense_params_t dense_of(const tsr_bmm_plan_t *pl)
{
    tsr_dense_params_t d;
    memset(&d, 0, sizeof d);
    d.n = pl->p.m, d.k = pl->p.k, d.m = pl->p.n;
    d.x_dtype = pl->p.a_dtype, d.x_zp = pl->p.a_zp;
    d.w_dtype = pl->p.b_dtype, d.w_zp = &pl->b_zp, d.w_zp_count = 1;
    d.rq = pl->p.rq;
    return d;
}

int tsr_bmm_plan(tsr_device_t *dev, const tsr_bmm_params_t *p, tsr_bmm_plan_t *pl)
{
    if (!pl)
        return tsr_err(TSR_EINVAL, OP ": NULL plan");
    memset(pl, 0, sizeof *pl);
    if (!dev)
        return tsr_err(TSR_EINVAL, OP ": NULL device");
    int rc = tsr_bmm_check(p);
    if (rc)
        return rc;
    if (!p->mult || !p->shift)
        return tsr_err(TSR_EINVAL, OP ": NULL multiplier or shift");
    pl->p = *p;
    pl->mult = p->mult[0], pl->shift = p->shift[0], pl->b_zp = p->b_zp;
    pl->p.mult = &pl->mult, pl->p.shift = &pl->shift;
    pl->p.fscale = NULL;
    if (p->fscale && tsr_alu_op_available(tsr_device_config(dev), TSR_ALU_FSCALE)) {
        pl->fscale = p->fscale[0];
        pl->p.fscale = &pl->fscale;
    }
    if (!(pl->bt = malloc((size_t)p->n * (size_t)p->k)))
        return tsr_err(TSR_ENOMEM, "out of memory");
    const tsr_dense_params_t d = dense_of(pl);
    if ((rc = tsr_dense_plan(dev, &d, &pl->dense))) {
        free(pl->bt);
        pl->bt = NULL;
        return tsr_err_prefix(rc, OP " [%d x %d] x [%d x %d]: ", p->m, p->k, p->k, p->n);
    }
    return TSR_OK;
}

void tsr_bmm_plan_free(tsr_device_t *dev, tsr_bmm_plan_t *pl)
{
    if (!pl)
        return;
    tsr_dense_plan_free(dev, &pl->dense);
    free(pl->bt);
    memset(pl, 0, sizeof *pl);
}

/* B[b] [K][N] -> bt [N][K] (bytes). */
static void transpose(const uint8_t *src, int k, int n, uint8_t *dst)
{
    for (int i = 0; i < k; i++)
        for (int j = 0; j < n; j++)
            dst[(size_t)j * (size_t)k + (size_t)i] = src[(size_t)i * (size_t)n + (size_t)j];
}

int tsr_bmm_exec(tsr_device_t *dev, tsr_bmm_plan_t *pl, const void *a, const void *b, void *y)
{
    if (!dev || !pl || !pl->bt || !a || !b || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL device, plan or data");
    const tsr_bmm_params_t *p = &pl->p;
    const size_t mk = (size_t)p->m * (size_t)p->k, kn = (size_t)p->k * (size_t)p->n, mn = (size_t)p->m * (size_t)p->n;
    int rc = TSR_OK;
    for (int i = 0; i < p->batch && !rc; i++) {
        if (i == 0 || !p->b_shared) {
            transpose((const uint8_t *)b + (p->b_shared ? 0 : (size_t)i * kn), p->k, p->n, pl->bt);
            rc = tsr_dense_write_weights(dev, &pl->dense, pl->bt, NULL);
        }
        if (!rc)
            rc = tsr_dense_write_input(dev, &pl->dense, (const uint8_t *)a + (size_t)i * mk);
        if (!rc)
            rc = tsr_dense_exec(dev, &pl->dense);
        if (!rc)
            rc = tsr_dense_read_output(dev, &pl->dense, (uint8_t *)y + (size_t)i * mn);
    }
    return rc;
}

int tsr_bmm_run(tsr_device_t *dev, const tsr_bmm_params_t *p, const void *a, const void *b, void *y)
{
    tsr_bmm_plan_t pl;
    int rc = tsr_bmm_plan(dev, p, &pl);
    if (!rc)
        rc = tsr_bmm_exec(dev, &pl, a, b, y);
    tsr_bmm_plan_free(dev, &pl);
    return rc;
}
