/*
 * tsr_grad: backward operators of dense and conv2d (see tsr_grad.h).
 * First commit: the API only; every function reports "not implemented yet".
 */
#include "tsr_grad.h"

#include "tsr_error.h"

int tsr_grad_dense_dx(tsr_device_t *dev, int n, int k, int m, const int8_t *dy, const int8_t *w, int32_t *dx,
                      tsr_grad_stats_t *st)
{
    (void)dev, (void)n, (void)k, (void)m, (void)dy, (void)w, (void)dx, (void)st;
    return tsr_err(TSR_EINVAL, "grad dense dx: not implemented yet");
}

int tsr_grad_dense_dw(tsr_device_t *dev, int n, int k, int m, const int8_t *dy, const void *x, tsr_dtype_e x_dtype,
                      int32_t x_zp, int32_t *dw, tsr_grad_stats_t *st)
{
    (void)dev, (void)n, (void)k, (void)m, (void)dy, (void)x, (void)x_dtype, (void)x_zp, (void)dw, (void)st;
    return tsr_err(TSR_EINVAL, "grad dense dw: not implemented yet");
}

int tsr_grad_conv_dx(tsr_device_t *dev, const tsr_grad_conv_t *p, const int8_t *dy, const int8_t *w, int32_t *dx,
                     tsr_grad_stats_t *st)
{
    (void)dev, (void)p, (void)dy, (void)w, (void)dx, (void)st;
    return tsr_err(TSR_EINVAL, "grad conv dx: not implemented yet");
}

int tsr_grad_conv_dw(tsr_device_t *dev, const tsr_grad_conv_t *p, const int8_t *dy, const void *x, tsr_dtype_e x_dtype,
                     int32_t x_zp, int32_t *dw, tsr_grad_stats_t *st)
{
    (void)dev, (void)p, (void)dy, (void)x, (void)x_dtype, (void)x_zp, (void)dw, (void)st;
    return tsr_err(TSR_EINVAL, "grad conv dw: not implemented yet");
}
