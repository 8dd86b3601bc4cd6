/*
 * tsr_roofline: the roofline bound of a layer and the DRAM traffic a run
 * moved, shared by `tessera bench --kind resnet18` and the graph runtime's
 * per-layer report (before, the bench computed it privately in the CLI).
 *
 * bound = max(MACs / peak, compulsory bytes / DRAM bytes per cycle), with
 * peak = BATCH x BLOCK_IN x BLOCK_OUT MACs per cycle and the compulsory
 * bytes those every correct run must move once (input, weights, 4-byte
 * bias, output; real sizes, no padding). MACs are unpadded.
 */
#ifndef TSR_ROOFLINE_H
#define TSR_ROOFLINE_H

#include <stdint.h>

#include "tsr_config.h"
#include "tsr_conv2d.h"
#include "tsr_counters.h"

typedef struct tsr_roofline {
    double t_compute;      /* MACs / peak (cycles) */
    double t_memory;       /* compulsory bytes / DRAM bytes per cycle (cycles) */
    double bound;          /* max of the two */
    int memory_bound;      /* 1 if t_memory > t_compute */
} tsr_roofline_t;

/* DRAM bytes per cycle of the bound: requested (<= 0: 8, the 64-bit port)
 * capped at twice the bus width in bytes (one read and one write beat per
 * cycle). */
double tsr_roofline_dram_bw(const tsr_config_t *cfg, double requested);
/* The bound of a layer with macs MACs and compulsory DRAM bytes. */
tsr_roofline_t tsr_roofline_bound(const tsr_config_t *cfg, double macs, double compulsory, double bw);
/* DRAM bytes a run moved from counter deltas: AXI read + write counters on
 * hardware backends (instruction fetch included), else LOAD + STORE +
 * fetch bytes. */
double tsr_roofline_moved(const tsr_counters_t *ctr);
/* Counter difference b - a (every field; has_hw from b). */
void tsr_counters_delta(const tsr_counters_t *a, const tsr_counters_t *b, tsr_counters_t *out);

/* conv2d: unpadded MACs, and compulsory bytes (read_only: only input
 * elements some window reads, e.g. not the rows and columns a strided 1x1
 * kernel skips). p must be valid (tsr_conv2d_check). */
double tsr_roofline_conv2d_macs(const tsr_conv2d_params_t *p);
double tsr_roofline_conv2d_compulsory(const tsr_conv2d_params_t *p, int read_only);

#endif
