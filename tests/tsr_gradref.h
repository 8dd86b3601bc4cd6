/*
 * tsr_gradref: plain-C reference of the backward operators (jit/tsr_grad.h),
 * written from the formulas alone (naive loops, int64 sums, wrapped to
 * int32 at the end; no jit/ code), and the count of each formula's
 * multiply-accumulates (terms not zeroed by padding).
 */
#ifndef TSR_GRADREF_H
#define TSR_GRADREF_H

#include <stdint.h>

/* dx[n][k] = SUM_m dy[n][m] * w[m][k] */
void gradref_dense_dx(int n, int k, int m, const int8_t *dy, const int8_t *w, int32_t *dx);
/* dw[m][k] = SUM_n dy[n][m] * (x[n][k] - x_zp); x_unsigned: x holds uint8 */
void gradref_dense_dw(int n, int k, int m, const int8_t *dy, const void *x, int x_unsigned, int32_t x_zp,
                      int32_t *dw);

typedef struct {
    int n, c_in, h, w, c_out, kh, kw, sh, sw, pt, pl, pb, pr, groups;
} gradref_conv_t;

int gradref_conv_oh(const gradref_conv_t *p);
int gradref_conv_ow(const gradref_conv_t *p);
/* dx [N][C_in][H][W] (the transposed convolution) */
void gradref_conv_dx(const gradref_conv_t *p, const int8_t *dy, const int8_t *w, int32_t *dx);
/* dw [C_out][C_in/groups][KH][KW]; padding contributes 0 */
void gradref_conv_dw(const gradref_conv_t *p, const int8_t *dy, const void *x, int x_unsigned, int32_t x_zp,
                     int32_t *dw);
/* the forward's sums: y[n][m] = SUM_k w[m][k] * (x[n][k] - x_zp) */
void gradref_dense_fwd(int n, int k, int m, const void *x, int x_unsigned, int32_t x_zp, const int8_t *w, int32_t *y);
/* y [N][C_out][OH][OW] = the convolution of x - x_zp with w; padding contributes 0 */
void gradref_conv_fwd(const gradref_conv_t *p, const void *x, int x_unsigned, int32_t x_zp, const int8_t *w,
                      int32_t *y);
/* terms of either formula whose input position lies inside the input */
uint64_t gradref_conv_macs(const gradref_conv_t *p);

#endif
