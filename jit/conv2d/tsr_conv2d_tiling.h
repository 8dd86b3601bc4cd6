/*
 * tsr_conv2d_tiling: the conv2d tiling search and the timing model it
 * minimises (tsr_cost.h's one-pass estimate of a stream's cycles on the
 * accelerator).
 */
#ifndef TSR_CONV2D_TILING_H
#define TSR_CONV2D_TILING_H

#include "tsr_conv2d_geo.h"

/* Estimated cycles of the stream in b (built for g): the one cost model's
 * stream estimate (tsr_cost_stream) with b's accumulator-bank tags. */
double tsr_conv2d_estimate_cycles(const geo_t *g, const ibuf_t *b);
/* The same when it is below limit; else some value above limit, often
 * found without the whole pass (the tiling search only needs to know that
 * a candidate does not beat the best so far). */
double tsr_conv2d_estimate_below(const geo_t *g, const ibuf_t *b, double limit);
/* The fastest tiling of g by the model, set into g; TSR_EINVAL naming the
 * limits when none fits. */
int tsr_conv2d_choose_tiling(geo_t *g);
/* Build identity of the search and model (part of every kernel-cache signature). */
const char *tsr_conv2d_tiling_id(void);

#endif
