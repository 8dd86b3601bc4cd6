/*
 * tsr_gavg: the global average pool into its own quantization on the
 * accelerator, over any window (jit/operators.md, "global average into
 * its own quantization") -- the squeeze of a squeeze-and-excite block over
 * a large map, whose output scale is not its input's -- over device
 * tensors (jit/tsr_dtensor.h):
 *
 *   S[n][c] = sum over h, w of (x[n][c][h][w] - x_zp)            exact (int32)
 *   y[n][c] = clamp(requant(S[n][c]) + y_zp, act_min, act_max)
 *
 * with requant the conv2d output stage (operators.md "Requantization"):
 * MBQM(S, mult, shift), or with config key EXACT_REQUANT and fscale > 0
 * round_half_even(float32(S) * fscale). An importer gives it the
 * multiplier x_scale / (H*W * y_scale) as it gives a depthwise conv of
 * weight 1 over the window, so both forms compute the same bytes; the
 * conv form needs the window's H*W input rows on chip, this one does not.
 *
 * Lowering: the sums are one accumulator row per channel block (the rows
 * of x's block k = nb*CB + cb are the H*W consecutive rows from k*H*W,
 * tsr_dtensor.h), started at -H*W*(x_zp - off) by an ALU mov from a
 * constant row (h = x - off is what device tensors hold). x's rows are
 * LOADed as inp rows in the load stage (whole blocks at a time, or chunks
 * of one block, alternating between the halves of the input buffer) and a
 * GEMM through the identity weight block adds each row into its block's
 * sum row (a loop with dst factor 0), one tensor op per row while the next
 * piece loads. Then per group of sum rows: [shr imm -shift], mulhr by mult
 * (or fscale by the scale's bits), rqfin (rounding shift, y_zp, clamp),
 * STORE to y's rows; two regions of sum rows alternate so that a group's
 * STORE overlaps the next group's work (tokens as jit/eltwise: loaded,
 * half free, done, drained). DRAM-bound: one row of BATCH x BLOCK bytes
 * read per GEMM op.
 */
#ifndef TSR_GAVG_H
#define TSR_GAVG_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_npy.h"

typedef struct tsr_gavg_params {
    int n, c, h, w;                /* x [N, C, H, W]; y [N, C, 1, 1] */
    tsr_dtype_e x_dtype;           /* TSR_DT_INT8 or TSR_DT_UINT8 */
    int32_t x_zp;
    tsr_dtype_e y_dtype;
    int32_t y_zp;
    int32_t mult;                  /* fixed-point requantization of S: MBQM(S, mult, shift), mult in [0, 2^31) */
    int shift;                     /* [-31, 30]; a left shift must not overflow any possible S */
    float fscale;                  /* > 0 (normal): used instead on a config with EXACT_REQUANT; 0: none */
    int32_t act_min, act_max;      /* output clamp, within y_dtype's range */
} tsr_gavg_params_t;

int tsr_gavg_check(const tsr_gavg_params_t *p);

typedef struct tsr_gavg_plan {
    int exact;                     /* 1: fscale (EXACT_REQUANT and fscale > 0) */
    uint32_t hw, blocks;           /* rows per channel block, channel blocks (NB*CB) */
    uint32_t stage_rows;           /* rows per input piece (a whole number of blocks, or a chunk of one) */
    uint32_t group;                /* sum rows per group (blocks per piece; 1 when chunked) */
    int groups;
    uint64_t x_addr, y_addr;       /* the device tensors' buffers (not owned) */
    uint64_t c_addr, c_bytes;      /* owned: three constant rows, then the uops */
    tsr_insn_t *insns;
    size_t ninsns;
    uint64_t gemm_ops, alu_ops, dram_bytes;
} tsr_gavg_plan_t;

/* Plan p over device tensors x [N, C, H, W] and y [N, C, 1, 1] (shapes,
 * dtypes and zero points p's). Refused: a NULL argument, a config whose
 * accumulators are not 32-bit, tensors without buffers. */
int tsr_gavg_plan_tensors(tsr_device_t *dev, const tsr_gavg_params_t *p, const tsr_dtensor_t *x,
                          const tsr_dtensor_t *y, tsr_gavg_plan_t *plan);
int tsr_gavg_exec(tsr_device_t *dev, const tsr_gavg_plan_t *plan);
void tsr_gavg_plan_free(tsr_device_t *dev, tsr_gavg_plan_t *plan);
/* One call on host NCHW bytes: device tensors, plan, run, read y, free. */
int tsr_gavg_run(tsr_device_t *dev, const tsr_gavg_params_t *p, const void *x, void *y);

#endif
