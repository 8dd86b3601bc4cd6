/* tsr_oprun: one operator run on a device, start to end (tsr_oprun.h). */
#include "tsr_oprun.h"

#include <string.h>

#include "tsr_conv2d.h"
#include "tsr_dense.h"
#include "tsr_eltwise.h"
#include "tsr_error.h"
#include "tsr_jitutil.h"
#include "tsr_pool.h"

/* The plan of any operator. */
typedef union {
    tsr_conv2d_plan_t conv;
    tsr_dense_plan_t dense;
    tsr_eltwise_plan_t elt;
    tsr_pool_plan_t pool;
} any_plan_t;

static int plan(tsr_device_t *dev, tsr_oprun_e op, const void *params, any_plan_t *pl)
{
    switch (op) {
    case TSR_OPRUN_CONV2D: return tsr_conv2d_plan(dev, params, &pl->conv);
    case TSR_OPRUN_DENSE: return tsr_dense_plan(dev, params, &pl->dense);
    case TSR_OPRUN_ADD: return tsr_add_plan(dev, params, &pl->elt);
    case TSR_OPRUN_CLIP: return tsr_clip_plan(dev, params, &pl->elt);
    case TSR_OPRUN_POOL: return tsr_pool_plan(dev, params, &pl->pool);
    }
    return tsr_err(TSR_EINVAL, "oprun: unknown operator %d", (int)op);
}

static void plan_free(tsr_device_t *dev, tsr_oprun_e op, any_plan_t *pl)
{
    switch (op) {
    case TSR_OPRUN_CONV2D: tsr_conv2d_plan_free(dev, &pl->conv); break;
    case TSR_OPRUN_DENSE: tsr_dense_plan_free(dev, &pl->dense); break;
    case TSR_OPRUN_ADD: tsr_add_plan_free(dev, &pl->elt); break;
    case TSR_OPRUN_CLIP: tsr_clip_plan_free(dev, &pl->elt); break;
    case TSR_OPRUN_POOL: tsr_pool_plan_free(dev, &pl->pool); break;
    }
}

static int write_in(tsr_device_t *dev, tsr_oprun_e op, const any_plan_t *pl, const void *x, const void *w,
                    const int32_t *bias)
{
    int rc;
    switch (op) {
    case TSR_OPRUN_CONV2D:
        if ((rc = tsr_conv2d_write_weights(dev, &pl->conv, w, bias)))
            return rc;
        return tsr_conv2d_write_input(dev, &pl->conv, x);
    case TSR_OPRUN_DENSE:
        if ((rc = tsr_dense_write_weights(dev, &pl->dense, w, bias)))
            return rc;
        return tsr_dense_write_input(dev, &pl->dense, x);
    case TSR_OPRUN_ADD: return tsr_add_write_inputs(dev, &pl->elt, x, w);
    case TSR_OPRUN_CLIP: return tsr_clip_write_input(dev, &pl->elt, x);
    case TSR_OPRUN_POOL: return tsr_pool_write_input(dev, &pl->pool, x);
    }
    return TSR_EINVAL;
}

static int exec(tsr_device_t *dev, tsr_oprun_e op, const any_plan_t *pl)
{
    switch (op) {
    case TSR_OPRUN_CONV2D: return tsr_conv2d_exec(dev, &pl->conv);
    case TSR_OPRUN_DENSE: return tsr_dense_exec(dev, &pl->dense);
    case TSR_OPRUN_ADD: return tsr_add_exec(dev, &pl->elt);
    case TSR_OPRUN_CLIP: return tsr_clip_exec(dev, &pl->elt);
    case TSR_OPRUN_POOL: return tsr_pool_exec(dev, &pl->pool);
    }
    return TSR_EINVAL;
}

static int read_out(tsr_device_t *dev, tsr_oprun_e op, const any_plan_t *pl, void *y)
{
    switch (op) {
    case TSR_OPRUN_CONV2D: return tsr_conv2d_read_output(dev, &pl->conv, y);
    case TSR_OPRUN_DENSE: return tsr_dense_read_output(dev, &pl->dense, y);
    case TSR_OPRUN_ADD: return tsr_add_read_output(dev, &pl->elt, y);
    case TSR_OPRUN_CLIP: return tsr_clip_read_output(dev, &pl->elt, y);
    case TSR_OPRUN_POOL: return tsr_pool_read_output(dev, &pl->pool, y);
    }
    return TSR_EINVAL;
}

/* Stream length and kernel-cache status of a plan. */
static void plan_figures(tsr_oprun_e op, const any_plan_t *pl, tsr_oprun_info_t *info)
{
    const tsr_conv2d_plan_t *c = op == TSR_OPRUN_CONV2D ? &pl->conv : op == TSR_OPRUN_DENSE ? &pl->dense.conv : NULL;
    if (c) {
        info->ninsns = c->ninsns;
        info->kcache = c->kcache;
    } else if (op == TSR_OPRUN_POOL) {
        info->ninsns = pl->pool.ninsns;
        info->kcache = pl->pool.kcache;
    } else {
        info->ninsns = pl->elt.ninsns;
        info->kcache = pl->elt.kcache;
    }
}

int tsr_oprun(tsr_device_t *dev, tsr_oprun_e op, const void *params, const void *x, const void *w,
              const int32_t *bias, void *y, tsr_oprun_info_t *info)
{
    tsr_oprun_info_t scratch;
    if (!info)
        info = &scratch;
    memset(info, 0, sizeof *info);
    if (!dev || !params || !x || !y || ((op == TSR_OPRUN_CONV2D || op == TSR_OPRUN_DENSE || op == TSR_OPRUN_ADD) && !w))
        return tsr_err(TSR_EINVAL, "oprun: NULL device, parameters, input, weight or output");
    any_plan_t pl;
    memset(&pl, 0, sizeof pl);
    uint64_t t0 = tsr_mono_ns();
    int rc = plan(dev, op, params, &pl);
    if (rc)
        return rc;
    info->plan_ms = (double)(tsr_mono_ns() - t0) * 1e-6;
    plan_figures(op, &pl, info);
    if (!(rc = write_in(dev, op, &pl, x, w, bias)) && !(rc = tsr_reset_counters(dev))) {
        t0 = tsr_mono_ns();
        rc = exec(dev, op, &pl);
        info->exec_s = (double)(tsr_mono_ns() - t0) * 1e-9;
        if (!rc && !(rc = tsr_read_counters(dev, &info->ctr)))
            rc = read_out(dev, op, &pl, y);
    }
    plan_free(dev, op, &pl);
    return rc;
}
