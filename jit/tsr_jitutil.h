/*
 * tsr_jitutil: geometry shared by the operator lowerings. A LOAD brings a
 * run of on-chip rows whose source positions may fall before or after the
 * tensor (padding); every lowering splits such a run the same way, so the
 * split is written once here. Also the clock the lowerings time
 * themselves with.
 */
#ifndef TSR_JITUTIL_H
#define TSR_JITUTIL_H

#include <stdint.h>

/* The positions i0, i0 + step, ..., i0 + (n-1)*step against a tensor
 * dimension [0, size): leading pads, positions inside, trailing pads. */
typedef struct tsr_span {
    int pad0;  /* positions below 0 */
    int real;  /* positions inside [0, size) */
    int pad1;  /* positions at or above size */
    int first; /* first inside position (0 if none) */
} tsr_span_t;

void tsr_span(int i0, int n, int step, int size, tsr_span_t *s);

/* Candidate values v of a tile size along a dimension of n (blocks, rows,
 * columns): the smallest v for each distinct count ceil(n / v), ascending,
 * into out (room for n); returns their number. The tiling searches try
 * only these (a larger v with the same count only adds work). */
int tsr_tile_candidates(int n, int *out);

/* Monotonic clock in nanoseconds (plan and generation times). */
uint64_t tsr_mono_ns(void);

#endif
