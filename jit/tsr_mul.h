/*
 * tsr_mul: the quantized multiply of a tensor by a per-channel vector on
 * the accelerator -- the Mul of a squeeze-and-excite block, x [N, C, H, W]
 * times its gate s [N, C, 1, 1] (jit/operators.md, "mul by a per-channel
 * vector") -- over device tensors (jit/tsr_dtensor.h), as ONNX Runtime's
 * QLinearMul computes it on x86 (MLAS; the importer's host kernel,
 * onnx/tsr_onnx_hostf.c tsr_ox_run_qaddc, is the same formula):
 *
 *   p = (x[n][c][h][w] - x_zp) * (s[n][c] - s_zp)          exact, |p| <= 65025
 *   y[n][c][h][w] = clamp(nearbyintf(float32(float32(float32(p) * scale) + y_zp)), act_min, act_max)
 *
 * with scale = float32(float32(x_scale * s_scale) / y_scale) and every
 * rounding to nearest, ties to even (float32's product, its sum with the
 * zero point - MLAS's SSE2 kernel adds y_zp in float32 before it converts,
 * so an odd y_zp turns a tie of the product up where it would go down -
 * then the integer).
 *
 * Layout. A device tensor's rows are [NB][CB][H][W] of BATCH x BLOCK lanes,
 * so the x rows of channel block k = nb*CB + cb are the H*W consecutive
 * rows k*H*W ..., and s's row k holds the same lanes' vector entries: the
 * vector is one accumulator row per block, broadcast over the block's H*W
 * rows by an ALU op whose src is that row for every dst row (a loop with
 * src factor 0).
 *
 * Per accumulator row (one tensor op each; h = x - off, the device byte):
 *   ALU mov imm -(x_zp - off), GEMM of x's inp row through the identity
 *   weight block (x's rows are LOADed as inp rows in the load stage,
 *   beside the previous tile's compute) -> a = h - x_zp',
 *   mul by the block's vector row -> a * b * 2^k, [add imm D],
 *   then either (config key EXACT_REQUANT, where it gives the formula's
 *   bytes for every product: tsr_mul_fscale_exact) fscale by scale's bits
 *   (k = 0): round_half_even(float32(float32(p) * scale)), y_zp added
 *   after the rounding; or (any config) mulhr by an integer multiplier M (k = 15: |p| * 2^15 <
 *   2^31), which together with the rounding shift t of the last op
 *   computes round(p * M / 2^(16 + t)) -- with (M, t, D) chosen at plan
 *   time so that the result equals the formula for EVERY product p the
 *   operand types allow (at most 65,536 of them, all checked; the float32
 *   product's rounding and its ties to even are what a plain multiplier
 *   misses: the offset D and a search around round(scale * 2^(16+t)) find
 *   one that does, or the operator is refused: tsr_mul_fixed);
 *   then rqfin: rounding shift (t, or 0 after fscale), + y_zp, the clamp.
 * The vector rows are made once per tile: LOAD acc8 of the tile's blocks'
 * s rows, [add imm -(s_zp - off)] -> b, [shr imm -k]. STORE keeps the low
 * 8 bits (the device byte of y).
 *
 * Schedule: tiles of whole blocks (or, when one block's H*W rows do not
 * fit, chunks of one block), two halves of the input and accumulator
 * buffers alternating so that a tile's LOAD and STORE overlap the compute
 * of its neighbours (tokens as jit/eltwise: loaded, half free, done,
 * drained).
 */
#ifndef TSR_MUL_H
#define TSR_MUL_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_eltwise.h"
#include "tsr_npy.h"

/* Operands: x [N, C, H, W], s [N, C, 1, 1], y of x's shape; each its own
 * dtype (int8 or uint8) and zero point. */
typedef struct tsr_mul_params {
    tsr_eltwise_desc_t x, s, y;
    float scale;                   /* float32(float32(x_scale * s_scale) / y_scale): positive, normal, finite */
    int32_t act_min, act_max;      /* output clamp, within y's dtype, act_min <= act_max */
} tsr_mul_params_t;

/* The integer form (no EXACT_REQUANT): y = clamp(RDBPOT(mulhr(p * 2^15 +
 * offset, mult), shift) + y_zp, act_min, act_max) (isa/semantics.md's
 * mulhr and rounding shift) equals the formula above for every product p
 * of the operands' types. */
typedef struct tsr_mul_fixed {
    int32_t mult;                  /* M, in (0, 2^31) */
    int shift;                     /* t, in [0, 31] */
    int32_t offset;                /* D, in [-2^15, 2^15) */
} tsr_mul_fixed_t;

/* Elements of x (N*C*H*W) of a valid parameter set. */
int tsr_mul_check(const tsr_mul_params_t *p, int64_t *count);

/* The integer form of p (above), searched at most over the shifts t of the
 * three largest that keep M below 2^31 and 1,025 multipliers around
 * round(scale * 2^(16+t)) each, every product checked. TSR_EINVAL
 * ("no exact integer form") when none matches every product -- about 2
 * in 1,000 random scale sets, and scales whose float32 products hit
 * exact ties of both parities (e.g. scale 0.5); such a Mul needs
 * EXACT_REQUANT (or the host). */
int tsr_mul_fixed(const tsr_mul_params_t *p, tsr_mul_fixed_t *fx);

/* 1 when fscale by p's scale, then y_zp and the clamp (the EXACT_REQUANT
 * form), equals the formula for every product p's operand types allow:
 * not when y_zp is odd and a product's float32 value is a tie, or when
 * adding y_zp rounds the float32 sum; 0 then; -1 on invalid p (message
 * set). */
int tsr_mul_fscale_exact(const tsr_mul_params_t *p);

typedef struct tsr_mul_plan {
    int exact;                     /* 1: fscale (EXACT_REQUANT); 0: the integer form fx */
    tsr_mul_fixed_t fx;
    uint64_t rows;                 /* x's accumulator rows (NB*CB*H*W) */
    uint32_t hw;                   /* rows per channel block (H*W) */
    uint32_t blocks;               /* channel blocks (NB*CB): s's rows */
    uint32_t tile_rows;            /* T: rows per accumulator half */
    uint32_t tile_blocks;          /* blocks per tile (0: a block spans several tiles, chunks of T rows) */
    int tiles;
    int nbuf;                      /* 2: alternating halves; 1: one (a small accumulator buffer) */
    int ops_per_row;               /* ALU ops per x row */
    uint64_t x_addr, s_addr, y_addr; /* the device tensors' buffers (not owned) */
    uint64_t c_addr;               /* owned: two constant accumulator rows, then the uops */
    uint64_t c_bytes;
    tsr_insn_t *insns;             /* the stream (owned) */
    size_t ninsns;
    uint64_t alu_ops;              /* ALU tensor ops of the stream */
    uint64_t dram_bytes;           /* DRAM bytes its LOADs and STOREs move (real row sizes) */
    double est_cycles;             /* compute-stage estimate: one cycle per tensor op (two when an ALU op reads
                                      a second accumulator row under ACC_SINGLE_COPY), the vector rows' acc8
                                      loads at the bus width */
} tsr_mul_plan_t;

/* Plan p over device tensors x, s, y (their shapes, dtypes and zero points
 * must be p's). With EXACT_REQUANT the fscale form where it is exact
 * (tsr_mul_fscale_exact), else the integer form
 * (tsr_mul_fixed's refusal is this one's). Refused: a NULL argument, a
 * config whose accumulators are not 32-bit, tensors without buffers. */
int tsr_mul_plan_tensors(tsr_device_t *dev, const tsr_mul_params_t *p, const tsr_dtensor_t *x,
                         const tsr_dtensor_t *s, const tsr_dtensor_t *y, tsr_mul_plan_t *plan);
/* Run the plan (tsr_submit, which verifies, + tsr_wait). */
int tsr_mul_exec(tsr_device_t *dev, const tsr_mul_plan_t *plan);
/* Free the stream and the constant buffer (safe on a zeroed or failed plan). */
void tsr_mul_plan_free(tsr_device_t *dev, tsr_mul_plan_t *plan);
/* One call on host NCHW bytes: device tensors, plan, run, read y, free. */
int tsr_mul_run(tsr_device_t *dev, const tsr_mul_params_t *p, const void *x, const void *s, void *y);

#endif
