/*
 * tsr_pool_tiling: the pool tiling search and the cost model it minimises.
 */
#ifndef TSR_POOL_TILING_H
#define TSR_POOL_TILING_H

#include "tsr_pool_geo.h"

/* The cost model's value of tiling t for g (the stream built dry). */
double tsr_pool_cost(const geo_t *g, const tiling_t *t);
/* The cheapest tiling of g by the model, set into g; TSR_EINVAL naming the
 * limits when none fits. */
int tsr_pool_choose_tiling(geo_t *g);
/* Build identity of the search and model (part of every kernel-cache signature). */
const char *tsr_pool_tiling_id(void);

#endif
