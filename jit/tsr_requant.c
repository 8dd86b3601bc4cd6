/* tsr_requant: the requantization fields' check (tsr_requant.h). */
#include "tsr_requant.h"

#include <math.h>

#include "tsr_dtype.h"
#include "tsr_error.h"

int tsr_requant_check(const char *op, const tsr_requant_t *rq, int channels, const char *chname)
{
    if (!rq->mult || !rq->shift || (rq->rq_count != 1 && rq->rq_count != channels))
        return tsr_err(TSR_EINVAL, "%s: requantization: need 1 or %s = %d (multiplier, shift) pairs, got %d%s", op,
                       chname, channels, rq->rq_count, rq->mult && rq->shift ? "" : " (NULL)");
    for (int i = 0; rq->fscale && i < rq->rq_count; i++)
        if (!(isnormal(rq->fscale[i]) && rq->fscale[i] > 0.0f)) /* (NaN fails too) */
            return tsr_err(TSR_EINVAL, "%s: float scale [%d] = %g is not a normal float32 > 0", op, i,
                           (double)rq->fscale[i]);
    for (int i = 0; i < rq->rq_count; i++) {
        if (rq->mult[i] < 0)
            return tsr_err(TSR_EINVAL, "%s: multiplier [%d] = %d is negative", op, i, rq->mult[i]);
        if (rq->shift[i] < -31 || rq->shift[i] > 30)
            return tsr_err(TSR_EINVAL, "%s: shift [%d] = %d outside [-31, 30]", op, i, rq->shift[i]);
    }
    if (rq->act_min > rq->act_max || rq->act_min < tsr_dt_min(rq->y_dtype) || rq->act_max > tsr_dt_max(rq->y_dtype))
        return tsr_err(TSR_EINVAL, "%s: activation range [%d, %d] is not a non-empty subrange of [%d, %d]", op,
                       rq->act_min, rq->act_max, tsr_dt_min(rq->y_dtype), tsr_dt_max(rq->y_dtype));
    return TSR_OK;
}
