/*
 * tsr_pool_emit: the pool lowering proper: the instruction stream of a
 * tiling (window pools: separable or direct, double-buffered and
 * software-pipelined across accumulator regions; global average pool:
 * chunked reduction) emitted through the stream builder, and the uop
 * kernels it runs (tsr_pool_emit.c has the on-chip layout and token
 * contract).
 */
#ifndef TSR_POOL_EMIT_H
#define TSR_POOL_EMIT_H

#include "tsr_pool_geo.h"

/* The stream of g's tiling into b (also run dry by the cost model). */
void tsr_pool_build(const geo_t *g, ibuf_t *b);
/* The uop kernels of g's tiling, encoded (g->nuops entries of uop_bytes; *out is malloc'ed). */
int tsr_pool_encode_uops(geo_t *g, uint8_t **out);
/* Build identity of the lowering (part of every kernel-cache signature). */
const char *tsr_pool_emit_id(void);

#endif
