/* tsr_oprun: one operator run on a device, start to end (tsr_oprun.h),
 * through the operator registry (tsr_op.h). */
#include "tsr_oprun.h"

#include <string.h>

#include "tsr_error.h"
#include "tsr_jitutil.h"

int tsr_oprun(tsr_device_t *dev, tsr_oprun_e op, const void *params, const void *x, const void *w,
              const int32_t *bias, void *y, tsr_oprun_info_t *info)
{
    tsr_oprun_info_t scratch;
    if (!info)
        info = &scratch;
    memset(info, 0, sizeof *info);
    const tsr_op_def_t *d = tsr_op_def(op);
    if (!d || !d->plan)
        return tsr_err(TSR_EINVAL, "oprun: unknown operator %d", (int)op);
    /* add's second input comes in w */
    if (!dev || !params || !x || !y || ((d->has_weights || d->n_inputs == 2) && !w))
        return tsr_err(TSR_EINVAL, "oprun: NULL device, parameters, input, weight or output");
    const void *in[2] = {x, d->n_inputs == 2 ? w : NULL};
    tsr_op_plan_t pl;
    memset(&pl, 0, sizeof pl);
    uint64_t t0 = tsr_mono_ns();
    int rc = d->plan(dev, params, &pl);
    if (rc)
        return rc;
    info->plan_ms = (double)(tsr_mono_ns() - t0) * 1e-6;
    tsr_op_figures_t f;
    d->figures(&pl, &f);
    info->ninsns = f.ninsns;
    info->kcache = f.kcache;
    if (!(rc = d->write(dev, &pl, in, d->has_weights ? w : NULL, bias)) && !(rc = tsr_reset_counters(dev))) {
        t0 = tsr_mono_ns();
        rc = d->exec(dev, &pl);
        info->exec_s = (double)(tsr_mono_ns() - t0) * 1e-9;
        if (!rc && !(rc = tsr_read_counters(dev, &info->ctr)))
            rc = d->read(dev, &pl, y);
    }
    d->plan_free(dev, &pl);
    return rc;
}
