/*
 * tsr_jitutil: geometry shared by the operator lowerings. A LOAD brings a
 * run of on-chip rows whose source positions may fall before or after the
 * tensor (padding); every lowering splits such a run the same way, so the
 * split is written once here. Also the clock the lowerings time
 * themselves with, and the packing of a kernel's uops into device words.
 */
#ifndef TSR_JITUTIL_H
#define TSR_JITUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_isa.h"

/* The positions i0, i0 + step, ..., i0 + (n-1)*step against a tensor
 * dimension [0, size): leading pads, positions inside, trailing pads. */
typedef struct tsr_span {
    int pad0;  /* positions below 0 */
    int real;  /* positions inside [0, size) */
    int pad1;  /* positions at or above size */
    int first; /* first inside position (0 if none) */
} tsr_span_t;

void tsr_span(int i0, int n, int step, int size, tsr_span_t *s);

/* Row geometry of a row tile of a windowed operator (conv2d, pools): the
 * output rows it computes and the input rows (halo and padding included)
 * it needs on chip, split into top padding, DRAM rows and bottom padding. */
typedef struct tsr_rowtile {
    int oy0, toh;         /* first output row, rows in this tile */
    int rows;             /* on-chip input rows per channel block (pads included) */
    int pad0, real, pad1; /* rows of top padding, DRAM rows, bottom padding */
    int iy_first;         /* first DRAM input row loaded */
} tsr_rowtile_t;

/* Row tile rt of TOH output rows (the last one shorter) over an output of
 * oh rows: window kh, stride sh, top padding pad_top, input height h.
 * row_step 1 loads every input row of the window span; row_step sh (1xK
 * kernels with stride sh) only the rows the outputs read. */
void tsr_row_tile(int rt, int toh, int oh, int kh, int sh, int pad_top, int h, int row_step, tsr_rowtile_t *r);

/* Candidate values v of a tile size along a dimension of n (blocks, rows,
 * columns): the smallest v for each distinct count ceil(n / v), ascending,
 * into out (room for n); returns their number. The tiling searches try
 * only these (a larger v with the same count only adds work). */
int tsr_tile_candidates(int n, int *out);

/* Monotonic clock in nanoseconds (plan and generation times). */
uint64_t tsr_mono_ns(void);
/* CPU time of the process (all its threads: a plan's search threads too) in nanoseconds: a plan
 * time that other processes on a shared machine do not inflate. */
uint64_t tsr_process_cpu_ns(void);
/* Threads the JIT may use for independent work (tiling searches): $TESSERA_JIT_THREADS if set
 * (1 = none besides the caller), else one per online CPU; 1..64. */
int tsr_jit_threads(void);

/* Encode the n uops u into a new buffer of n * c->uop_bytes bytes (*out,
 * malloc'ed; NULL on error). */
int tsr_jit_pack_uops(const tsr_config_t *c, const tsr_uop_t *u, size_t n, uint8_t **out);

/* Run a planned operator's stream: tsr_submit (which verifies) and tsr_wait.
 * A plan without a stream (not built, or freed) or a NULL device is refused
 * naming op. */
int tsr_jit_run_stream(tsr_device_t *dev, const char *op, const tsr_insn_t *insns, size_t n);

#endif
