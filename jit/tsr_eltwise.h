/*
 * tsr_eltwise: lowering of the elementwise quantized operators of
 * jit/operators.md -- "add" (TFLite int8/uint8 ADD) and "relu and clip" --
 * into a task-instruction stream that runs entirely on the accelerator,
 * bit exact, for any config with 8-bit inputs/weights and 32-bit
 * accumulators. Elementwise operators ignore the tensor shape: the
 * N*C*H*W values are treated as one flat vector.
 *
 * Why GEMM and not LOAD acc8. The ALU works on accumulator rows. LOAD acc8
 * would fill them directly but runs in the compute stage (so it does not
 * overlap ALU work) and sign-extends int8 only. Instead the inputs are
 * LOADed as inp rows in the load stage (overlapping compute) and moved into
 * accumulator rows by a GEMM with a constant "identity" weight block
 * (one tensor op per accumulator row). uint8 values are re-centred when
 * packing, h = x - 128 (int8 values: h = x), and the offsets folded into
 * the immediate that initialises the accumulators before the GEMM.
 *
 * Layouts (B = BATCH, BI = BLOCK_IN, BO = BLOCK_OUT; L = B*BO lanes):
 *   flat element e lives in accumulator/output row R = e / L, lane
 *   l = e % L = b*BO + o. The output (out elements, one per row) is thus the
 *   flat vector itself, zero-padded to whole rows (rows are a multiple of
 *   KR, below).
 *   Inputs (inp elements [b][i]): with BI >= BO, KR = BI/BO accumulator rows
 *   share one inp row: row R is inp row R/KR, lanes [b][(R%KR)*BO + o].
 *   With BI < BO, KI = BO/BI inp rows make one accumulator row: row R lane
 *   [b][o] is inp row R*KI + o/BI, lane [b][o%BI]. Padding lanes hold the
 *   re-centred zero point. Weight row k (k < max(KR, KI)) is the shifted
 *   identity w[o][i] = WV if i == k*BO + o (BI >= BO) / o == k*BI + i
 *   (BI < BO), else 0, with WV = 2^min(left_shift, 6) for add (the first
 *   part of the left shift, exact in int8) and 1 for clip.
 *
 * Work per accumulator row (one tensor op = one compute cycle):
 *   add:  for a and b: mov (init to -h_zp*WV), GEMM, shr by -(left_shift -
 *         log2 WV) (if > 0), mulhr by M from a constant row, rshr by -S
 *         (if S < 0); then add, [shr -S_o], mulhr M_o, and rqfin (RDBPOT
 *         by -S_o, + y_zp and the clamp in one op, its operands packed in
 *         a constant row) -- exactly the ALU mapping of operators.md.
 *         About 13 ops per row for TFLite's parameters (left_shift 20):
 *         the ALU, not DRAM, bounds add (about 0.8 cycles per element on
 *         default vs a DRAM bound of 0.375).
 *   add, power-of-two fast path: when M_a and M_b are powers of two and
 *         left_shift is large enough that MBQM((x - zp) * 2^left_shift, M, S)
 *         is exactly (x - zp) * 2^j (j >= 0; TFLite's parameters for equal
 *         input scales or scales in a power-of-two ratio, |j_a - j_b| <= 6),
 *         both GEMMs accumulate into one row (weights 2^(j - min j)): mov
 *         init, GEMM a, GEMM b, [shr], then the output steps: 6 ops per row.
 *         Falls back to the general sequence if its second weight block
 *         does not fit the weight buffer.
 *   clip: mov (init to the re-centring offset), GEMM, [max lo], [min hi]
 *         (bounds equal to the type's range are no-ops and skipped): DRAM
 *         bound (relu within 5% of it on default).
 *   STORE keeps the low 8 bits (exact for int8 and uint8 values).
 *
 * Schedule. The rows are cut into tiles of T accumulator rows per input
 * (T from a cost model over the config's buffer depths and DRAM bus: fewer,
 * larger tiles cost less per-tile overhead, smaller ones less pipeline
 * fill). Tile t uses half t%2 of the inp buffer and of the accumulator
 * buffer, so the loads of tile t+1 and the store of tile t-1 overlap the
 * compute of tile t (tokens as in jit/conv2d/tsr_conv2d_emit.c: load->compute "tile
 * loaded", compute->load "inp half free", compute->store "tile done",
 * store->compute "out half drained"). When not even the smallest tile
 * fits twice, one buffer is used (correct, serialised).
 */
#ifndef TSR_ELTWISE_H
#define TSR_ELTWISE_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_kcache.h"
#include "tsr_npy.h"

/* One quantized tensor of an elementwise operator. */
typedef struct tsr_eltwise_desc {
    int n, c, h, w;                /* NCHW shape, each >= 1, at most 2^31 - 1 elements */
    tsr_dtype_e dtype;             /* TSR_DT_INT8 or TSR_DT_UINT8 */
    int32_t zp;                    /* zero point, within dtype's range */
} tsr_eltwise_desc_t;

/* TFLite int8/uint8 ADD (operators.md "add"); a, b and y have the same
 * shape (no broadcasting), each its own dtype and zero point. */
typedef struct tsr_add_params {
    tsr_eltwise_desc_t a, b, y;    /* inputs and output */
    int left_shift;                /* [0, 22] (TFLite: 20) */
    int32_t mult_a, mult_b;        /* input multipliers, [0, 2^31 - 1] */
    int shift_a, shift_b;          /* input shifts, [-31, 0] */
    int32_t mult_out;              /* output multiplier, [0, 2^31 - 1] */
    int shift_out;                 /* output shift, [-31, 30] (> 0 shifts left) */
    int32_t act_min, act_max;      /* output clamp, within y's dtype range, act_min <= act_max */
    int round_once;                /* 1: mult_out is 2^30 and the output stage rounds once:
                                      RDBPOT(sum, 1 - shift_out) instead of SRDHM by 2^30 then
                                      RDBPOT by -shift_out (ONNX Runtime's QLinearAdd, MLAS) */
    int32_t bias_once;             /* round_once: added to the sum before its rounding, |.| <= 16383
                                      (the importer's exact form of ORT's float32 QLinearAdd); 0 else */
} tsr_add_params_t;

/* clip / relu (operators.md "relu and clip"): same shape, dtype and zero
 * point in and out. */
typedef struct tsr_clip_params {
    tsr_eltwise_desc_t x, y;       /* input and output */
    int32_t lo, hi;                /* bounds, lo <= hi, within the dtype's range */
} tsr_clip_params_t;

typedef enum tsr_eltwise_kind {
    TSR_ELTWISE_ADD = 1,           /* tsr_add_* */
    TSR_ELTWISE_CLIP = 2,          /* tsr_clip_* / tsr_relu_* */
} tsr_eltwise_kind_e;

typedef struct tsr_eltwise_plan {
    tsr_eltwise_kind_e kind;       /* which operator the plan runs */
    tsr_add_params_t add;          /* copy of the parameters (kind ADD) */
    tsr_clip_params_t clip;        /* copy of the parameters (kind CLIP) */
    int inputs;                    /* input tensors: 2 (add) or 1 (clip) */
    int64_t count;                 /* elements per tensor, N*C*H*W */
    uint32_t rows;                 /* accumulator/output rows (count padded to whole rows, multiple of KR) */
    uint32_t inp_rows;             /* inp rows per packed input tensor */
    int kr, ki;                    /* accumulator rows per inp row (BI >= BO), inp rows per accumulator row (BI < BO) */
    int tile_rows;                 /* T: accumulator rows per input per tile (a multiple of kr) */
    int tiles;                     /* number of tiles, ceil(rows / T) */
    int nbuf;                      /* 2: double-buffered inp/acc halves; 1: one buffer, serialised */
    int nconst;                    /* constant accumulator rows (add: M_a, M_b, M_o, rqfin; clip: 0) */
    int ops_per_row;               /* tensor ops (GEMM + ALU) per accumulator row of a full tile */
    int linear;                    /* add: power-of-two fast path (both inputs accumulate into one row) */
    tsr_insn_t *insns;             /* the instruction stream (owned) */
    size_t ninsns;                 /* its length */
    size_t nuops;                  /* uops in the kernel buffer */
    uint64_t uop_addr, w_addr, c_addr; /* device buffers: uops (owned by the cache entry kref), identity weights,
                                          constants (owned; c_addr 0 if none) */
    uint64_t x_addr[2];            /* device buffers of the packed inputs (a, b; clip: x only) */
    uint64_t y_addr;               /* device buffer of the output rows */
    uint64_t x_bytes, y_bytes, w_bytes, c_bytes; /* sizes: one packed input, output, weights, constants */
    int io_owned;                  /* 1: x_addr, y_addr are the plan's own buffers; 0: device tensors' (not freed) */
    uint64_t gemm_ops;             /* GEMM tensor ops (non-reset) the stream performs */
    uint64_t alu_ops;              /* ALU tensor ops */
    uint64_t dram_bytes;           /* DRAM bytes the stream loads and stores (instructions excluded) */
    double est_cycles;             /* the cost model's estimate for the chosen tile size */
    tsr_kcache_ref_t *kref;        /* the kernel (tiling, relocatable stream + slot map, uops) in the device's
                                      kernel cache */
    int kcache;                    /* tsr_kc_status_e: generated or cached */
} tsr_eltwise_plan_t;

/* Element count (N*C*H*W) of a valid parameter set; checks everything the
 * plan does that does not depend on the config. */
int tsr_add_check(const tsr_add_params_t *p, int64_t *count);
int tsr_clip_check(const tsr_clip_params_t *p, int64_t *count);
/* relu parameters for x: lo = x.zp (the real 0), hi = the type maximum, y = x. */
int tsr_relu_params(const tsr_eltwise_desc_t *x, tsr_clip_params_t *out);

/* Validate, get the kernel (tiling, relocatable stream, uops) from the
 * device's kernel cache (tsr_kcache.h; signature: every parameter; add's
 * inputs a and b are two relocation slots of the inp memory type,
 * tsr_kcache_relocate_slots) or choose the tiling and generate it, allocate
 * the device buffers, write weights and constants, relocate the stream. */
int tsr_add_plan(tsr_device_t *dev, const tsr_add_params_t *p, tsr_eltwise_plan_t *plan);
int tsr_clip_plan(tsr_device_t *dev, const tsr_clip_params_t *p, tsr_eltwise_plan_t *plan);
/* Plan over device tensors (tsr_dtensor.h): p in the tensors' logical
 * dtypes and zero points (which, with the shapes, must match them). A
 * device tensor's rows are one flat vector of int8 values (x - off) whose
 * lanes are the flat elements of this lowering (BLOCK_IN == BLOCK_OUT), so
 * the plan runs on that vector (padded lanes included, harmlessly) with
 * zero points zp - off and clamp bounds moved by the output's offset:
 * exactly the operator on the real elements, written re-centred. */
int tsr_add_plan_tensors(tsr_device_t *dev, const tsr_add_params_t *p, const tsr_dtensor_t *a,
                         const tsr_dtensor_t *b, const tsr_dtensor_t *y, tsr_eltwise_plan_t *plan);
int tsr_clip_plan_tensors(tsr_device_t *dev, const tsr_clip_params_t *p, const tsr_dtensor_t *x,
                          const tsr_dtensor_t *y, tsr_eltwise_plan_t *plan);
/* The device view of add parameters p (operands as device tensors hold
 * them, tsr_dtensor.h): every dtype int8, zero points zp - off, the clamp
 * moved by the output's offset. The shapes are kept. tsr_add_plan_tensors
 * plans on it, and so does a conv whose epilogue does the add
 * (tsr_conv2d_plan_tensors_add). */
void tsr_add_params_device_view(const tsr_add_params_t *p, tsr_add_params_t *v);
/* The add's constant accumulator rows, one value for every lane: M_a, M_b,
 * M_o, and the output's rqfin row (shift -S_o if S_o < 0, y_zp, act_min,
 * act_max packed as isa/semantics.md says). */
#define TSR_ADD_NCONST 4
void tsr_add_const_values(const tsr_add_params_t *p, int32_t v[TSR_ADD_NCONST]);

/* Free the device buffers and the stream (safe on a zeroed or failed plan). */
void tsr_add_plan_free(tsr_device_t *dev, tsr_eltwise_plan_t *plan);
void tsr_clip_plan_free(tsr_device_t *dev, tsr_eltwise_plan_t *plan);

/* Host packing of one input (flat bytes of the tensor's dtype, count
 * values) into x_bytes of the inp layout. which: 0 = a (or x), 1 = b. */
void tsr_eltwise_pack_input(const tsr_config_t *cfg, const tsr_eltwise_plan_t *plan, int which, const void *x,
                            uint8_t *dst);

/* Pack and copy the inputs to the plan's device buffers / run (tsr_submit,
 * which verifies, + tsr_wait) / read back count bytes of y's dtype. A plan
 * of the other kind is TSR_EINVAL. */
int tsr_add_write_inputs(tsr_device_t *dev, const tsr_eltwise_plan_t *plan, const void *a, const void *b);
int tsr_clip_write_input(tsr_device_t *dev, const tsr_eltwise_plan_t *plan, const void *x);
int tsr_add_exec(tsr_device_t *dev, const tsr_eltwise_plan_t *plan);
int tsr_clip_exec(tsr_device_t *dev, const tsr_eltwise_plan_t *plan);
int tsr_add_read_output(tsr_device_t *dev, const tsr_eltwise_plan_t *plan, void *y);
int tsr_clip_read_output(tsr_device_t *dev, const tsr_eltwise_plan_t *plan, void *y);

/* One call: plan, pack, run, read back, free. */
int tsr_add_run(tsr_device_t *dev, const tsr_add_params_t *p, const void *a, const void *b, void *y);
int tsr_clip_run(tsr_device_t *dev, const tsr_clip_params_t *p, const void *x, void *y);
/* relu: clip with tsr_relu_params(x); y has x's shape, dtype and zero point. */
int tsr_relu_run(tsr_device_t *dev, const tsr_eltwise_desc_t *x, const void *xd, void *y);

#endif
