/*
 * tsr_dtensor: device tensors in the blocked, re-centred layout (see
 * tsr_dtensor.h); the only place that packs host NCHW into that layout and
 * back.
 */
#include "tsr_dtensor.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_dtype.h"
#include "tsr_error.h"

int tsr_dtensor_off(tsr_dtype_e dt) { return tsr_dt_off(dt); }

int tsr_dtensor_init(const tsr_config_t *cfg, int n, int c, int h, int w, tsr_dtype_e dt, int32_t zp,
                     tsr_dtensor_t *t)
{
    if (!cfg || !t)
        return tsr_err(TSR_EINVAL, "dtensor: NULL config or tensor");
    memset(t, 0, sizeof *t);
    if (n < 1 || c < 1 || h < 1 || w < 1)
        return tsr_err(TSR_EINVAL, "dtensor: shape [%d,%d,%d,%d] has a dimension < 1", n, c, h, w);
    if ((int64_t)n * c * h * w > INT32_MAX)
        return tsr_err(TSR_EINVAL, "dtensor: shape [%d,%d,%d,%d] has more than 2^31 - 1 elements", n, c, h, w);
    if (dt != TSR_DT_INT8 && dt != TSR_DT_UINT8)
        return tsr_err(TSR_EINVAL, "dtensor: dtype must be int8 or uint8");
    if (zp < tsr_dt_min(dt) || zp > tsr_dt_max(dt))
        return tsr_err(TSR_EINVAL, "dtensor: zero point %d outside the %s range", (int)zp,
                       dt == TSR_DT_UINT8 ? "uint8" : "int8");
    if (cfg->block_in != cfg->block_out)
        return tsr_err(TSR_EINVAL,
                       "dtensor: config has BLOCK_IN %d != BLOCK_OUT %d: an operator's output rows cannot be "
                       "the next operator's input rows (device tensors need equal blocks)",
                       cfg->block_in, cfg->block_out);
    if (cfg->inp_bytes != (uint32_t)(cfg->batch * cfg->block_in) || cfg->out_bytes != cfg->inp_bytes)
        return tsr_err(TSR_EINVAL, "dtensor: device tensors need 8-bit inputs and outputs");
    t->n = n;
    t->c = c;
    t->h = h;
    t->w = w;
    t->dtype = dt;
    t->zp = zp;
    t->batch = cfg->batch;
    t->block = cfg->block_in;
    t->nb = (n + t->batch - 1) / t->batch;
    t->cb = (c + t->block - 1) / t->block;
    t->bytes = (uint64_t)t->nb * t->cb * h * w * cfg->inp_bytes;
    return TSR_OK;
}

int tsr_dtensor_alloc(tsr_device_t *dev, tsr_dtensor_t *t)
{
    if (!dev || !t || !t->bytes)
        return tsr_err(TSR_EINVAL, "dtensor: NULL device or undescribed tensor");
    if (t->addr)
        return tsr_err(TSR_EINVAL, "dtensor: tensor already has a buffer");
    int rc = tsr_mem_alloc(dev, t->bytes, &t->addr);
    if (rc)
        return rc;
    t->owned = 1;
    return TSR_OK;
}

void tsr_dtensor_free(tsr_device_t *dev, tsr_dtensor_t *t)
{
    if (!t)
        return;
    if (t->owned && t->addr && dev)
        tsr_mem_free(dev, t->addr);
    t->addr = 0;
    t->owned = 0;
}

void tsr_dtensor_view(const tsr_dtensor_t *t, tsr_dtype_e *dt, int32_t *zp)
{
    *dt = TSR_DT_INT8;
    *zp = t->zp - tsr_dtensor_off(t->dtype);
}

int tsr_dtensor_same(const tsr_dtensor_t *a, const tsr_dtensor_t *b)
{
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->dtype == b->dtype && a->zp == b->zp;
}

/* Byte offset of element (n, c, y, x) in the blocked layout. */
static size_t boff(const tsr_dtensor_t *t, int n, int c, int y, int x)
{
    size_t row = (((size_t)(n / t->batch) * (size_t)t->cb + (size_t)(c / t->block)) * (size_t)t->h + (size_t)y) *
                     (size_t)t->w + (size_t)x;
    return row * (size_t)t->batch * (size_t)t->block + (size_t)(n % t->batch) * (size_t)t->block +
           (size_t)(c % t->block);
}

void tsr_dtensor_pack(const tsr_dtensor_t *t, const void *x, uint8_t *dst)
{
    const int off = tsr_dtensor_off(t->dtype);
    memset(dst, (uint8_t)(int8_t)(t->zp - off), t->bytes); /* padded lanes: the device-view zero point */
    const uint8_t *src = x;
    size_t i = 0;
    for (int n = 0; n < t->n; n++)
        for (int c = 0; c < t->c; c++)
            for (int y = 0; y < t->h; y++)
                for (int xx = 0; xx < t->w; xx++, i++) {
                    int32_t v = t->dtype == TSR_DT_UINT8 ? (int32_t)src[i] : (int32_t)(int8_t)src[i];
                    dst[boff(t, n, c, y, xx)] = (uint8_t)(int8_t)(v - off);
                }
}

void tsr_dtensor_unpack(const tsr_dtensor_t *t, const uint8_t *src, void *y)
{
    const int off = tsr_dtensor_off(t->dtype);
    uint8_t *dst = y;
    size_t i = 0;
    for (int n = 0; n < t->n; n++)
        for (int c = 0; c < t->c; c++)
            for (int yy = 0; yy < t->h; yy++)
                for (int xx = 0; xx < t->w; xx++, i++)
                    dst[i] = (uint8_t)((int32_t)(int8_t)src[boff(t, n, c, yy, xx)] + off);
}

int tsr_dtensor_write_nchw(tsr_device_t *dev, const tsr_dtensor_t *t, const void *x)
{
    if (!dev || !t || !x || !t->addr)
        return tsr_err(TSR_EINVAL, "dtensor: NULL device or data, or a tensor without a buffer");
    uint8_t *buf = malloc(t->bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    tsr_dtensor_pack(t, x, buf);
    int rc = tsr_mem_write(dev, t->addr, buf, t->bytes);
    free(buf);
    return rc;
}

int tsr_dtensor_read_nchw(tsr_device_t *dev, const tsr_dtensor_t *t, void *y)
{
    if (!dev || !t || !y || !t->addr)
        return tsr_err(TSR_EINVAL, "dtensor: NULL device or data, or a tensor without a buffer");
    uint8_t *buf = malloc(t->bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = tsr_mem_read(dev, t->addr, buf, t->bytes);
    if (!rc)
        tsr_dtensor_unpack(t, buf, y);
    free(buf);
    return rc;
}
