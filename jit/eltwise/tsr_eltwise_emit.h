/*
 * tsr_eltwise_emit: the add/clip lowering proper: the instruction stream
 * of a tiling (tiles double- or single-buffered through the on-chip
 * halves) and the uop kernels it runs (tsr_eltwise_emit.c has the on-chip
 * layout and token contract).
 */
#ifndef TSR_ELTWISE_EMIT_H
#define TSR_ELTWISE_EMIT_H

#include "tsr_eltwise_geo.h"

/* The stream of g's tiling into b. */
void tsr_eltwise_build(const geo_t *g, tsr_stream_t *b);
/* g's uops, encoded (n_uops(g) entries of uop_bytes; *out is malloc'ed). */
int tsr_eltwise_encode_uops(const geo_t *g, uint8_t **out);
/* Build identity of the lowering (part of every kernel-cache signature). */
const char *tsr_eltwise_emit_id(void);

#endif
