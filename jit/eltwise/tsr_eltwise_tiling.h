/*
 * tsr_eltwise_tiling: the add/clip tile-size search and the cost model it
 * minimises.
 */
#ifndef TSR_ELTWISE_TILING_H
#define TSR_ELTWISE_TILING_H

#include "tsr_eltwise_geo.h"

/* Estimated cycles of the pipelined run with tile size T and nbuf buffers. */
double tsr_eltwise_cost(const geo_t *g0, int T, int nbuf);
/* The cheapest tiling of g by the model (double buffers first), set into
 * g; TSR_EINVAL naming the limits when none fits. */
int tsr_eltwise_choose_tiling(geo_t *g);
/* Build identity of the search and model (part of every kernel-cache signature). */
const char *tsr_eltwise_tiling_id(void);

#endif
