/* tsr_concat: a concat along channels as views of one device tensor (tsr_concat.h). */
#include "tsr_concat.h"

#include "tsr_error.h"

int tsr_concat_check(const tsr_concat_params_t *p)
{
    if (!p)
        return tsr_err(TSR_EINVAL, "concat: NULL parameters");
    if (p->n < 1 || p->h < 1 || p->w < 1 || p->c_a < 1 || p->c_b < 1 || p->c_a > (1 << 20) || p->c_b > (1 << 20))
        return tsr_err(TSR_EINVAL, "concat: shape n %d, h %d, w %d, channels %d + %d out of range", p->n, p->h, p->w,
                       p->c_a, p->c_b);
    if (p->dtype != TSR_DT_INT8 && p->dtype != TSR_DT_UINT8)
        return tsr_err(TSR_EINVAL, "concat: type %s (int8 or uint8)", tsr_dtype_name(p->dtype));
    const int32_t lo = p->dtype == TSR_DT_UINT8 ? 0 : -128;
    if (p->zp < lo || p->zp > lo + 255)
        return tsr_err(TSR_EINVAL, "concat: zero point %d outside %s", (int)p->zp, tsr_dtype_name(p->dtype));
    return TSR_OK;
}

int tsr_concat_layout(const tsr_config_t *cfg, const tsr_concat_params_t *p)
{
    if (p->n > cfg->batch)
        return tsr_err(TSR_EINVAL, "concat: batch %d spans several batch blocks (BATCH %d): the inputs are no views "
                       "of the output", p->n, cfg->batch);
    if (p->c_a % cfg->block_out)
        return tsr_err(TSR_EINVAL, "concat: the second input starts at channel %d, not a multiple of BLOCK %d: it "
                       "is no view of the output", p->c_a, cfg->block_out);
    return TSR_OK;
}

uint64_t tsr_concat_b_offset(const tsr_config_t *cfg, const tsr_concat_params_t *p)
{
    const uint64_t row = (uint64_t)cfg->batch * (uint64_t)cfg->block_out;
    return (uint64_t)(p->c_a / cfg->block_out) * (uint64_t)p->h * (uint64_t)p->w * row;
}
