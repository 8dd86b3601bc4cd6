/*
 * tsr_conv2d_emit: the conv2d lowering proper: the instruction stream of a
 * tiling (double-buffered schedule, or resident mode) emitted through the
 * stream builder, and the uop kernels it runs (tsr_conv2d_emit.c has the
 * schedule and token contract).
 */
#ifndef TSR_CONV2D_EMIT_H
#define TSR_CONV2D_EMIT_H

#include "tsr_conv2d_geo.h"

/* The stream of g's tiling (double-buffered schedule; resident mode) into b. */
void tsr_conv2d_build(const geo_t *g, ibuf_t *b);
void tsr_conv2d_build_res(const geo_t *g, ibuf_t *b);
/* The uop kernels of g's tiling, encoded (tsr_conv2d_n_uops(g) entries of
 * uop_bytes; *out is malloc'ed). */
int tsr_conv2d_encode_uops(const geo_t *g, uint8_t **out);
/* Depthwise mode: the same uops decoded (tsr_conv2d_n_uops_sets(g, sets in
 * set_map) entries), for the encoder and the cost model's issue cycles. */
void tsr_conv2d_dw_uops(const geo_t *g, const int8_t set_map[2][2][4], tsr_uop_t *u);
/* Build identity of the lowering (part of every kernel-cache signature). */
const char *tsr_conv2d_emit_id(void);

#endif
