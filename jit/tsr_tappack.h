/*
 * tsr_tappack: an exact rewrite of a convolution with few input channels
 * (the ResNet stem: 3 channels, 7x7, stride 2) into one whose channel
 * dimension holds the horizontal kernel taps, so the GEMM core's input
 * blocks are filled: with BLOCK_IN 16 the stem wastes 13/16 of every input
 * block (3 real channels), the rewrite uses 21/32.
 *
 * conv(C_in, KH x KW, stride (sh, sw), pads (t, l, b, r)) on x [N,C_in,H,W]
 * equals conv(C_in*KW, KH x 1, stride (sh, 1), pads (t, 0, b, 0)) on the
 * host-packed input
 *   x'[n][kx*C_in + c][y][ox] = x[n][c][y][ox*sw + kx - l]   (x_zp outside [0, W))
 * of shape [N, C_in*KW, H, OW], with weights
 *   w'[o][kx*C_in + c][ky][0] = w[o][c][ky][kx]
 * and the same bias, zero points, requantization and clamp. Exact: each
 * output sums the same products (x - x_zp)(w - w_zp[o]) — a padding column
 * holds x_zp, which contributes 0 exactly like the original padding — so
 * the int32 accumulator and everything after it are identical. The
 * packing is a host re-layout at the graph edge (the network input), where
 * the host touches the data anyway; it costs KW/sw times the input bytes.
 */
#ifndef TSR_TAPPACK_H
#define TSR_TAPPACK_H

#include <stdint.h>

#include "tsr_config.h"
#include "tsr_conv2d.h"

/* At most this many BLOCK_IN blocks of packed channels (C_in*KW): beyond,
 * the packed input grows KW-fold for little gain. */
#define TSR_TAPPACK_MAX_BLOCKS 4

/* 1 when the rewrite applies to p (valid, groups 1, KW > 1, C_in*KW <=
 * TSR_TAPPACK_MAX_BLOCKS * BLOCK_IN) and saves GEMM work on cfg
 * (ceil(C_in*KW / BLOCK_IN) < KW * ceil(C_in / BLOCK_IN)); else 0. */
int tsr_tappack_applies(const tsr_conv2d_params_t *p, const tsr_config_t *cfg);

/* The rewritten parameters (*out; its w_zp/mult/shift point to p's arrays)
 * and, if w and wout are not NULL, the rewritten OIHW weights (wout: the
 * same C_out*C_in*KH*KW bytes as w). TSR_EINVAL for parameters the rewrite
 * does not cover (invalid, groups != 1, or a packed input beyond 2^31-1
 * elements). */
int tsr_tappack_rewrite(const tsr_conv2d_params_t *p, const void *w, tsr_conv2d_params_t *out, void *wout);

/* Bytes of the packed input of p: N * C_in*KW * H * OW (0 if p is invalid). */
uint64_t tsr_tappack_input_bytes(const tsr_conv2d_params_t *p);

/* x: NCHW bytes of p's input; xout: tsr_tappack_input_bytes(p) bytes.
 * p must have passed tsr_tappack_rewrite. */
void tsr_tappack_pack_input(const tsr_conv2d_params_t *p, const void *x, void *xout);

#endif
