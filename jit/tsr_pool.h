/*
 * tsr_pool: lowering of the quantized pools of jit/operators.md (maxpool,
 * avgpool with count_include_pad 0/1, global average pool; NCHW, int8 or
 * uint8 with a zero point; any N/C/H/W, kernel, stride >= 1, asymmetric
 * padding 0 <= pad < kernel) into a task-instruction stream and micro-op
 * kernels, for any config with 8-bit inputs, 32-bit accumulators and
 * BLOCK_IN == BLOCK_OUT. Everything runs on the device; the host only
 * re-lays out the tensors (as for conv2d).
 *
 * Why this data path. The ALU works on accumulator rows only. Inputs are
 * LOADed as `inp` rows (load stage, so loads overlap compute, and with the
 * LOAD pad_value so borders are filled in hardware) and moved into the
 * accumulators by GEMM with one identity weight row (loaded once), as the
 * depthwise conv2d path does. (`acc8` loads would run in the compute stage
 * and pad with 0, which is wrong for max.) Inputs are re-centred to int8
 * when packing: h = x - off, off = 128 for uint8 and 0 for int8; the
 * accumulators then hold raw values again (below), so the rounding of the
 * average is the one of operators.md and STORE's low 8 bits are the output
 * byte for both dtypes.
 *
 *  - maxpool: GEMM reset of the tile's copy region X, GEMM X += h
 *    (padding is h = -128, the type minimum after re-centring, which never
 *    wins because every window holds a valid element), then separably:
 *    horizontal ALU max in place (uops over kx inside the loop over output
 *    columns, so every source is read before it is overwritten), vertical
 *    ALU mov + max into the compact output region O, and (uint8) ALU add
 *    128 to get the raw values back.
 *  - avgpool: padding holds h = x_zp - off (count_include_pad 1: the raw
 *    value x_zp) or h = -off (0: the raw value 0), so the sums below are
 *    the raw sums of operators.md. Direct form: O = ALU mov of the constant
 *    KH*KW*off, then GEMM sums the window into O (uops over the taps, loops
 *    over the outputs, as depthwise conv): KH*KW + 1 ops per output.
 *    Separable form (chosen by the cost model when cheaper, e.g. stride 1):
 *    GEMM reset of X, GEMM sums the KW taps of each row into X (one uop per
 *    kx), ALU mov + add of KH rows of X into O, ALU add of the constant
 *    KH*KW*off (uint8). Division: see below.
 *  - global average pool: the flattened H*W plane of TCO channel blocks is
 *    reduced in chunks that fit the input buffer (GEMM with loops over the
 *    chunk, one uop per channel block), then divided like avgpool.
 *
 * Division (avgpool, global): y = round_half_away(S / c). c = 1: nothing;
 * c = 2^j for every output: rshr j. Otherwise the ALU sequence
 *   shr -k (S * 2^k, exact), mulhr M_c, rshr e
 * with k, e uniform and M_c per count c. The plan proves it exact for every
 * count present and every possible sum (S in [-128c, 127c] for int8,
 * [0, 255c] for uint8) by evaluating the ALU model (tsr_alu_apply) on all
 * of them, and refuses (TSR_EINVAL) when no (k, M_c, e) passes. With one
 * count M_c is one constant row; with count_include_pad 0 and borders the
 * count varies with the position: M_c then comes from a per-position map
 * ([OH][OW] acc rows in DRAM, loaded per tile into a region that is
 * reused while consecutive tiles have the same border pattern).
 *
 * DRAM layouts (B = BATCH, BL = BLOCK_IN = BLOCK_OUT, NB = ceil(N/B), CB =
 * ceil(C/BL); padded lanes are ignored):
 *   input   inp elements [NB][CB][H][W]     each [b][i] = h(n = nb*B+b, c = cb*BL+i)
 *   output  out elements [NB][CB][OH][OW]   (global: [NB][CB])
 *   consts  acc elements: the initial value (KK*off), M_c per count, then
 *           (map only) [n_rt*TOH][OW] per-position multipliers
 *   weights one wgt element, the identity.
 *
 * Schedule. A tile is (batch block, TCO channel blocks, TOH output rows,
 * TOW output columns: all OW, or column tiles as in conv2d when a padded
 * row does not fit or taller tiles pay, the last one shifted left to stay
 * TOW wide); global:
 * (batch block, TCO blocks) reduced over chunks of the flattened plane.
 * Tile/step t loads into half t%2 of the input buffer and writes its
 * output in half t%2 of the output region, so loads of the next tile and
 * the store of the previous one overlap compute (tokens as in conv2d: the
 * GEMM that consumes an input half frees it, the last ALU hands the output
 * half to STORE, the STORE hands it back). The accumulator buffer is split
 * into NBA regions (with two, one per RTL accumulator bank), each with its
 * copy of the constants, its multiplier map, X and O; the separable forms
 * are software-pipelined across them (the GEMMs of tile t+1 are issued
 * before the ALU work of tile t), so the compute stage's GEMM and ALU
 * pipes work side by side under the RTL's bank rule. The
 * form (avgpool), TOH/TOW/TCO and the buffer counts come from a cost model
 * over the config's buffer depths: max(DRAM cycles at the bus width,
 * tensor ops) plus pipeline fill/drain, a per-step and a per-instruction
 * overhead, and the transfers a single-buffered rotation serialises. A
 * tiling must hold one window (KH x KW input rows; the separable forms
 * also KH x KW accumulator rows) and the uops (direct avgpool: KH*KW per
 * channel block): otherwise TSR_EINVAL ("no tiling fits").
 */
#ifndef TSR_POOL_H
#define TSR_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_kcache.h"
#include "tsr_npy.h"

typedef enum tsr_pool_kind {
    TSR_POOL_MAX = 0,        /* maxpool */
    TSR_POOL_AVG = 1,        /* avgpool */
    TSR_POOL_GLOBAL_AVG = 2, /* global average pool (kernel, stride, pads ignored) */
} tsr_pool_kind_e;

typedef struct tsr_pool_params {
    tsr_pool_kind_e kind;          /* which pool */
    int n, c, h, w;                /* input shape [N, C, H, W], each >= 1 */
    int kh, kw;                    /* kernel, >= 1 (not global) */
    int stride_h, stride_w;        /* >= 1 (not global) */
    int pad_top, pad_left;         /* padding, 0 <= pad < kernel and <= 15 (not global) */
    int pad_bottom, pad_right;
    int count_include_pad;         /* avgpool: 0 or 1 (ignored otherwise) */
    tsr_dtype_e dtype;             /* TSR_DT_INT8 or TSR_DT_UINT8, input and output */
    int32_t zp;                    /* zero point, within dtype's range (output has the same) */
    int round_even;                /* avgpool: 1 rounds a tie of the raw average to even (ONNX Runtime's
                                      QLinearAveragePool) where the config has EXACT_REQUANT and every window
                                      counts the same power of two (fscale by 2^-e); else, and with 0, half away
                                      from zero (TFLite) */
} tsr_pool_params_t;

typedef struct tsr_pool_plan {
    tsr_pool_params_t p;           /* copy of the parameters */
    int oh, ow;                    /* output height and width (1, 1 for global) */
    int nb, cb;                    /* batch blocks, channel blocks */
    int toh, tco;                  /* tile: output rows, channel blocks (global: toh = 1) */
    int tow;                       /* tile: output columns (OW, or fewer by the cost model; the last
                                      column tile is shifted left to stay TOW wide) */
    int rows_in, wr;               /* on-chip input rows and row length per channel block (global: chunk length, 1) */
    int tiles, chunks;             /* tiles, reduction chunks per tile (1 unless global) */
    int nbuf_inp, nbuf_acc;        /* 2: double-buffered input / output halves, 1: single */
    int pad_value;                 /* the LOAD pad_value (re-centred) */
    int off;                       /* re-centring offset: 128 for uint8, 0 for int8 */
    int sep;                       /* 1: separable (maxpool always; avgpool when cheaper: GEMM row sums
                                      into X, ALU column sums into O), 0: direct GEMM window sums */
    int div_kind;                  /* 0: no division, 1: rshr only, 2: shr/mulhr/rshr, 3: fscale (round_even) */
    int div_k, div_e;              /* left shift k, rounding right shift e (rshr amount when div_kind 1) */
    int ncounts;                   /* distinct window counts */
    int use_map;                   /* 1: per-position multiplier map (count_include_pad 0 with borders) */
    int nconst;                    /* constant acc rows (before the map) */
    tsr_insn_t *insns;             /* the instruction stream (owned) */
    size_t ninsns;                 /* its length */
    size_t nuops;                  /* uops in the kernel buffer */
    uint64_t uop_addr;             /* device buffer of the uop kernels (owned by the cache entry kref) */
    uint64_t x_addr, y_addr;       /* device buffers: packed input, output (owned) */
    uint64_t c_addr, w_addr;       /* device buffers: constants (+ map), identity weight (owned) */
    uint64_t x_bytes, y_bytes;     /* their sizes */
    uint64_t c_bytes, w_bytes;
    tsr_dtensor_t xt, yt;          /* tsr_pool_plan: the plan's own input and output device tensors */
    int io_owned;                  /* 1: xt, yt are the plan's own (tsr_pool_plan; freed with it); 0: x_addr,
                                      y_addr are those of the caller's tensors (tsr_pool_plan_tensors) */
    uint64_t gemm_ops;             /* GEMM tensor ops (non-reset) the stream performs */
    uint64_t alu_ops;              /* ALU tensor ops */
    uint64_t dram_bytes;           /* DRAM bytes the stream loads and stores (instructions excluded) */
    double cost;                   /* the cost model's value for the chosen tiling */
    tsr_kcache_ref_t *kref;        /* the kernel (tiling, relocatable stream, uops) in the device's kernel cache */
    int kcache;                    /* tsr_kc_status_e: generated or cached */
} tsr_pool_plan_t;

/* Output shape of a valid parameter set (everything that does not depend
 * on the config). */
int tsr_pool_check(const tsr_pool_params_t *p, int *oh, int *ow);

/* Validate, prove the division, get the kernel (tiling, relocatable
 * stream, uops) from the device's kernel cache (tsr_kcache.h; signature:
 * every parameter) or choose the tiling for dev's config and generate it,
 * allocate the constant buffers and write them, relocate the stream.
 * A thin wrapper over tsr_pool_plan_tensors with input and output device
 * tensors of its own (the host packs and unpacks them). */
int tsr_pool_plan(tsr_device_t *dev, const tsr_pool_params_t *p, tsr_pool_plan_t *plan);
void tsr_pool_plan_free(tsr_device_t *dev, tsr_pool_plan_t *plan);
/* Plan over device tensors (tsr_dtensor.h): p in the tensors' logical dtype
 * and zero point (both must match it, and the shapes), reading x and
 * writing y directly. Max pools are planned on the device view (int8, zp -
 * off); average pools of uint8 tensors (rounded on raw values) on the
 * logical dtype with one more ALU add per output row that re-centres the
 * rounded average. */
int tsr_pool_plan_tensors(tsr_device_t *dev, const tsr_pool_params_t *p, const tsr_dtensor_t *x,
                          const tsr_dtensor_t *y, tsr_pool_plan_t *plan);

/* Host packing into / unpacking from the plan's device tensors
 * (tsr_dtensor_pack / tsr_dtensor_unpack). x: NCHW bytes of dtype, dst:
 * x_bytes. src: y_bytes of the output tensor (re-centred), y: NCHW bytes
 * ([N, C, OH, OW]). */
void tsr_pool_pack_input(const tsr_config_t *cfg, const tsr_pool_plan_t *plan, const void *x, uint8_t *dst);
void tsr_pool_unpack_output(const tsr_config_t *cfg, const tsr_pool_plan_t *plan, const uint8_t *src, void *y);

/* Pack and copy to the plan's device buffers / run / read back. */
int tsr_pool_write_input(tsr_device_t *dev, const tsr_pool_plan_t *plan, const void *x);
int tsr_pool_exec(tsr_device_t *dev, const tsr_pool_plan_t *plan); /* tsr_submit (verifies) + tsr_wait */
int tsr_pool_read_output(tsr_device_t *dev, const tsr_pool_plan_t *plan, void *y);

/* One call: plan, pack, run, unpack, free. */
int tsr_pool_run(tsr_device_t *dev, const tsr_pool_params_t *p, const void *x, void *y);

#endif
