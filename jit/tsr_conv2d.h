/*
 * tsr_conv2d: lowering of the quantized conv2d of jit/operators.md (NCHW,
 * int8/uint8 activations and weights with zero points, int32 bias, TFLite
 * requantization per tensor or per output channel, fused clamp; groups 1
 * or depthwise) into a task-instruction stream and micro-op kernels, for
 * any config with 8-bit inputs/weights and 32-bit accumulators.
 *
 * Hardware values. Inputs are re-centred to int8: h = x - off (off = 0 for
 * int8, 128 for uint8) and padding (spatial, and input channels beyond C_in)
 * holds h_pad = x_zp - off (the LOAD's pad_value). Weights are stored as
 * w' = w - w_zp[o]. That fits int8 for int8 weights with zero point 0 and
 * uint8 weights with zero point 128; for any other zero point w' is split
 * into 2 parts (3 when w' = 255 can occur), each int8. Groups 1: the input
 * is packed once per part (channels c, C_in + c, ...) so the GEMM sums
 * h * part0 + h * part1 (+ ...) = h w' exactly (2-3x the GEMM work).
 * Depthwise: each block's parts are consecutive weight blocks ([block]
 * [part][tap]) that all meet the block's input, one uop each, in one GEMM
 * or in chunks of parts when the taps of all parts do not fit the weight
 * buffer. Then, modulo 2^32,
 *   SUM (x - x_zp)(w - w_zp) = SUM (h - h_pad) w' = SUM h w' - h_pad SUM w',
 * so the GEMM core computes SUM h w' over the padded window and the bias
 * row holds bias'[o] = wrap32(bias[o] - h_pad * SUM_{i,ky,kx} w'[o][i][ky][kx]).
 *
 * Blocked DRAM layouts (one element = one on-chip row; B = BATCH, BI =
 * BLOCK_IN, BO = BLOCK_OUT; NB = ceil(N/B), CIB = ceil(C_in/BI), COB =
 * ceil(C_out/BO); padded batch rows are ignored, padded channels hold h_pad
 * (input) or 0 (weights, constants)):
 *   input   inp elements [NB][CIB][H][W],          each [b][i] = h(n = nb*B+b, c = cib*BI+i)
 *   weights wgt elements [COB][CIBW][KH][KW],      each [o][i] = w'(co = cob*BO+o, ci = cib*BI+i)
 *           (CIBW = CIB, which counts the split copies; depthwise: CIBW =
 *           the number of parts and each element is diagonal, [o][i] =
 *           (i == o) ? part p of w'(cob*BO+o, 0) : 0)
 *           (depthwise mode, config key DEPTHWISE = K > 0 and groups ==
 *           C_in: [COB][part][KH][G] with G = ceil(KW/K) tap groups, each
 *           element [k][c] = part p of w'(cob*BO+c, 0, ky, g*K+k), 0 for
 *           g*K+k >= KW and k >= K; shared weights, plan.wshare: the
 *           one block [part][KH][G] every block's GEMMs read)
 *   output  out elements [NB][COB][OH][OW],        each [b][o] = y(n, co = cob*BO+o)
 *   consts  acc elements [COB][NCONST],            each [b][o] = value for channel cob*BO+o:
 *           row 0 bias', row 1 M, then (per-channel only, if some S > 0) the
 *           left shift -max(S,0), then the rqfin row packing max(-S,0), y_zp,
 *           act_min, act_max (isa/semantics.md): requantizing a row is mulhr +
 *           rqfin (+ shr), so the ALU pipe keeps up with the GEMMs of the next
 *           tile even for 1x1 convolutions.
 *           Resident plans (plan.resident) keep each kind together instead:
 *           [bias' of every block][M][left shift][rqfin], a kind with one
 *           value for every channel (per-tensor requantization) as one row.
 *
 * Schedule. An output tile is (one batch block, TCO output-channel blocks,
 * TOH output rows, all OW columns, or TOW columns when an input row is too
 * long for the buffer); the input channels are reduced in
 * chunks of TCI blocks (depthwise: one chunk, the tile's own blocks). A
 * step is one (tile, chunk). Step s uses half s%2 of the inp and wgt
 * buffers, tile t half t%2 of the acc/out buffer, so loads of the next step
 * and the store of the previous tile overlap the compute of this one (see
 * the schedule comment in jit/conv2d/tsr_conv2d_emit.c). When no double-buffered tiling
 * fits (e.g. a 7x7 kernel over a wide row), the inp/wgt and then the acc
 * rotation fall back to one buffer (correct, but loads or stores no longer
 * overlap compute).
 * Depthwise mode (DEPTHWISE = K, depthwise convs): the same tiles, steps
 * and rotations; per step one GEMM per weight part and tap group whose uops
 * walk the tile's output pixels row by row (src = pixel's window start +
 * g*K; at stride 1 consecutive ops read consecutive windows, 1 cycle each,
 * else K), iter_in the kernel rows and iter_out the tile's blocks. The
 * on-chip input row is (TOW-1)*SW + G*K long, so the K rows each op reads
 * all lie in the loaded tile (taps past KW meet zero weights). The search
 * prefers four acc regions and also tries column tiles (the layers are
 * DRAM-bound; taller tiles reload fewer halo rows). If nothing of the mode
 * fits, the conv takes the block-diagonal path (plan.dwk = 0). A weight
 * row holds G tap groups (isa/semantics.md; G = 4 for K = 3 on 16 lanes), so
 * a block's KH*ceil(KW/K) groups take ceil(KH*ceil(KW/K) / G) rows (one for
 * 3x3: a quarter of the weight bytes of one group per row); the GEMMs name
 * groups, and the weight slots lie in the first WGT_DEPTH / G rows, the
 * groups a uop's wgt field reaches. When the
 * weights are known at plan time (p.w_plan) and every block's packed rows
 * are byte-identical (averages lowered as convs of weight 1), one copy is
 * packed and uploaded, a step loads its TCI*KK rows once instead of per
 * block, the GEMMs' wgt_factor_out is 0 (every block reads them), and with
 * one chunk the rows stay on chip for the whole kernel (plan.wshare; the
 * kernel cache signature and the search key include it).
 * Block skipping (groups 1, weights known at plan time): a weight block
 * (output block, input block) whose packed bytes are all zero adds 0 to
 * the accumulators; with one chunk and one channel tile (step mode) each
 * output block's uop kernel lists only its nonzero blocks' uops, and input
 * blocks none of them reads are not loaded (plan.wnz; one-hot channel
 * permutations and slices, block-sparse weights; signature and search key
 * include the bits). The values are the dense kernel's.
 * Resident mode (when all weights fit the weight buffer): every weight block
 * and constant row is loaded once and stays on chip, input blocks are cached
 * in slots, the load stage runs up to 6 steps ahead, the first tile's data
 * arrives in token-separated groups of input blocks, and the last row tile's
 * output-channel tiles shrink by halves so that little requantization is
 * left after the last GEMM (tsr_conv2d_build_res in jit/conv2d/tsr_conv2d_emit.c).
 * The tiling (sizes, rotations, mode) is the one a timing model of the
 * accelerator (jit/conv2d/tsr_conv2d_tiling.c: stages, two compute pipes under the bank
 * rule, a shared DRAM port) finds fastest; plan.cost is its estimate.
 */
#ifndef TSR_CONV2D_H
#define TSR_CONV2D_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_act.h"
#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_eltwise.h"
#include "tsr_kcache.h"
#include "tsr_npy.h"
#include "tsr_requant.h"

typedef struct tsr_conv2d_params {
    int n, c_in, h, w;             /* input shape [N, C_in, H, W], each >= 1 */
    int c_out, kh, kw;             /* weights [C_out, C_in/groups, KH, KW], each >= 1 */
    int stride_h, stride_w;        /* >= 1 */
    int pad_top, pad_left;         /* zero padding (the real value 0 = x_zp), 0..15 each */
    int pad_bottom, pad_right;
    int groups;                    /* 1, or dividing C_in with C_out == C_in (weights [C][C/groups][KH][KW];
                                      depthwise: groups == C_in); see tsr_conv2d_groups_fit */
    tsr_dtype_e x_dtype;           /* TSR_DT_INT8 or TSR_DT_UINT8 */
    int32_t x_zp;                  /* input zero point, within x_dtype's range */
    tsr_dtype_e w_dtype;           /* TSR_DT_INT8 or TSR_DT_UINT8 */
    const int32_t *w_zp;           /* [w_zp_count] weight zero points, within w_dtype's range */
    int w_zp_count;                /* 1 (per tensor) or C_out (per output channel) */
    /* the output: y_dtype, y_zp, mult, shift, rq_count (1 per tensor or C_out per output channel),
     * act_min, act_max (tsr_requant.h), also as .rq */
    TSR_REQUANT_MEMBERS;
    const void *w_plan;            /* optional (NULL: unknown): the weights write_weights will get (OIHW bytes
                                      of w_dtype), known when planning. A depthwise-mode conv whose output-
                                      channel blocks' packed weight rows are then byte-identical (a pool
                                      lowered as a conv of weight 1) keeps one copy (plan.wshare), and a groups-1
                                      conv skips its all-zero weight blocks (plan.wnz); only read
                                      while planning (the plan's copy of p has it NULL) */
} tsr_conv2d_params_t;

typedef struct tsr_conv2d_plan {
    tsr_conv2d_params_t p;         /* copy of the parameters (arrays point into the plan's own copies) */
    int32_t *w_zp, *mult, *shift;  /* owned copies of the parameter arrays */
    float *fscale;                 /* (and of the float32 scales, exact requantization) */
    int oh, ow;                    /* output height and width */
    int nb, cib, cob;              /* batch, input-channel and output-channel blocks */
    int wsplit;                    /* int8 parts of w - w_zp (1..3); the input is packed that many times */
    int depthwise;                 /* groups > 1: grouped, one input block per output block (depthwise
                                      when groups == C_in) */
    int dwk;                       /* depthwise in the GEMM depthwise mode: its taps K (config key DEPTHWISE),
                                      weights [COB][part][ceil(KH*ceil(KW/K) / G)] rows, each G tap groups
                                      (config's dw_group_bits) of [tap k][channel c], group ky*ceil(KW/K) +
                                      kx/K at (row, slot) = divmod(group, G); 0: the block-diagonal path below */
    int wtight;                    /* depthwise mode with one weight part: the blocks' tap groups packed back to
                                      back, block b's group g at (row, slot) = divmod(b*KH*ceil(KW/K) + g, G)
                                      (the tiling keeps each channel tile's first group at a row start) */
    int wshare;                    /* depthwise mode: every output-channel block's packed weight rows are the
                                      same (p.w_plan said so): one copy [part][rows] in DRAM, loaded once per
                                      step (once per kernel with one chunk) and read by every block's GEMMs;
                                      write_weights refuses weights that break the sharing */
    uint8_t *wnz;                  /* block skipping (owned; NULL: none): groups 1 with the weights known at plan
                                      time (p.w_plan), some packed weight block [cob][cib] all zero, and a tiling
                                      of one chunk and one channel tile: bit ob*cib + ib set when output block
                                      ob's GEMM meets input block ib; the others are neither multiplied nor
                                      (read by no output block) loaded; write_weights refuses weights nonzero
                                      in a skipped block */
    int toh, tco, tci;             /* tile: output rows, output-channel blocks, input-channel blocks per chunk
                                      (depthwise: weight parts per chunk) */
    int rows_in;                   /* input rows per channel block on chip per tile */
    int row_step;                  /* input rows between consecutive loaded rows (sh for 1xK stride-sh kernels) */
    int tow;                       /* output columns per tile (OW unless a row does not fit; the last
                                      column tile is shifted left to stay TOW wide) */
    int wp;                        /* on-chip input row length (TOW-1)*stride_w + KW */
    int nconst;                    /* constant acc rows per output-channel block */
    int co_inner;                  /* loop order: 1 = output-channel tiles innermost, 0 = row tiles */
    int tiles, chunks;             /* output tiles, input-channel chunks per tile */
    int nbuf_inp, nbuf_acc;        /* 2: double-buffered inp/wgt (acc) buffers; 1: whole buffer per step (tile), serialised */
    int resident;                  /* resident mode: weights and constants loaded once and kept on chip, input
                                      blocks cached in slots, the last tiles shrinking (tsr_conv2d_build_res) */
    int h_pad;                     /* pad value h_pad = x_zp - off */
    int fused;                     /* 1: a residual add runs in the epilogue (tsr_conv2d_plan_tensors_add) */
    tsr_add_params_t fadd;         /* its parameters, device view (fused only) */
    uint64_t r_addr;               /* its residual input's buffer (a device tensor's; fused only) */
    int act;                       /* 1: an activation table runs in the epilogue (tsr_conv2d_plan_tensors_act) */
    uint64_t l_addr;               /* its table's buffer (one lut element, 256 bytes; owned; act only) */
    tsr_insn_t *insns;             /* the instruction stream (owned) */
    size_t ninsns;                 /* its length */
    size_t nuops;                  /* uops in the kernel buffer */
    uint64_t uop_addr;             /* device buffer of the uop kernels (owned by the cache entry kref) */
    uint64_t x_addr, w_addr, y_addr, c_addr; /* device buffers: packed input, weights, output, constants (owned) */
    uint64_t x_bytes, w_bytes, y_bytes, c_bytes; /* their sizes */
    int io_owned;                  /* 1: x_addr and y_addr are the plan's own buffers in this lowering's layout
                                      (tsr_conv2d_plan when no device tensor can hold the input); 0: those of
                                      device tensors, which the plan does not free */
    tsr_dtensor_t xt, yt;          /* tsr_conv2d_plan over device tensors of its own: input and output */
    int tensors_owned;             /* 1: xt, yt are the plan's own (freed with it; packing goes through them) */
    uint64_t gemm_ops;             /* GEMM tensor ops (non-reset) the stream performs */
    uint64_t alu_ops;              /* ALU tensor ops */
    uint64_t dram_bytes;           /* DRAM bytes the stream loads and stores (instructions excluded) */
    double cost;                   /* estimated cycles of the chosen tiling (the timing model the search minimises) */
    tsr_kcache_ref_t *kref;        /* the kernel (tiling, relocatable stream, uop buffer) in the device's
                                      kernel cache; released by tsr_conv2d_plan_free */
    int kcache;                    /* tsr_kc_status_e: generated (miss / cache disabled) or cached (hit / disk) */
    uint64_t jit_ns;               /* wall time tsr_conv2d_plan took, nanoseconds */
} tsr_conv2d_plan_t;

/* Output shape of a valid parameter set (checks everything the plan does
 * that does not depend on the config). */
int tsr_conv2d_check(const tsr_conv2d_params_t *p, int *oh, int *ow);
/* 1 when this config runs p's groups as they are: groups 1, or grouped
 * with C_out == C_in, BLOCK_IN == BLOCK_OUT and C_in/groups dividing
 * BLOCK_IN (each output block then meets one input block through
 * block-diagonal weight blocks, as depthwise does with diagonal ones).
 * 0 otherwise: the graph (tsr_graph_conv2d) then runs the conv as groups 1
 * with block-diagonal weights (G times the MACs); the plan refuses it. */
int tsr_conv2d_groups_fit(const tsr_config_t *c, const tsr_conv2d_params_t *p);
/* p as this config runs it: its float32 scales (exact requantization) kept
 * when the config has the ALU op fscale (EXACT_REQUANT), else dropped (the
 * fixed-point mult/shift every caller gives too, within 1 LSB). The one
 * place that choice is made, for the graph and for single convs. */
tsr_conv2d_params_t tsr_conv2d_for_config(const tsr_config_t *c, const tsr_conv2d_params_t *p);
/* A grouped conv as the groups-1 conv with block-diagonal weights: output
 * channel o of group o / (M/G) sees only its group's C/G input channels,
 * every other weight is its channel's zero point (contributing
 * (x - x_zp) * 0). Exact; the device does G times the grouped MACs. w is
 * p's [M][C/G][KH][KW] weight bytes; *full gets the [M][C][KH][KW] bytes
 * (malloc'd, the caller frees), *u p with groups 1. Refused (one line, no
 * allocation): groups not dividing the channels, bad weight zero points,
 * more than 64 MB of expanded weights. */
int tsr_conv2d_expand_groups(const tsr_conv2d_params_t *p, const void *w, tsr_conv2d_params_t *u, uint8_t **full);
/* How many copies of the input the lowering packs: 1, or for groups 1 the
 * int8 parts of w - w_zp (2-3 when the weight zero points let w - w_zp
 * leave int8). A device tensor holds one copy. 0 if p is invalid. */
int tsr_conv2d_input_copies(const tsr_conv2d_params_t *p);

/* Validate, allocate the device buffers and get the kernel (tiling, uop
 * kernels in a device buffer, stream) from the device's kernel cache
 * (tsr_kcache_get): a plan with the same signature as an earlier one (on
 * this device, or on any device of the same config through the on-disk
 * cache) skips the tiling search, stream generation and uop upload; else
 * choose the tiling, build and insert. The plan's stream is the kernel's,
 * relocated to the plan's buffers. When a device tensor can hold the input
 * (one copy, BLOCK_IN == BLOCK_OUT) this is a thin wrapper over
 * tsr_conv2d_plan_tensors with input and output tensors of its own, and
 * the write/read functions pack into and unpack from them. */
int tsr_conv2d_plan(tsr_device_t *dev, const tsr_conv2d_params_t *p, tsr_conv2d_plan_t *plan);
void tsr_conv2d_plan_free(tsr_device_t *dev, tsr_conv2d_plan_t *plan);

/* Plan over device tensors (tsr_dtensor.h): p is expressed in x's and y's
 * logical dtypes and zero points, which must match the tensors, as must
 * the shapes; the plan is made on the device view (int8 in, re-centred
 * int8 out: y_zp and the clamp move by y's offset) and its stream reads x
 * and writes y directly. Refused (TSR_EINVAL) when the weight zero points
 * need the input packed more than once (groups 1 with wsplit > 1). */
int tsr_conv2d_plan_tensors(tsr_device_t *dev, const tsr_conv2d_params_t *p, const tsr_dtensor_t *x,
                            const tsr_dtensor_t *y, tsr_conv2d_plan_t *plan);
/* The same with a residual add fused into the epilogue (operators.md
 * "Residual add in the conv epilogue"): y = add(conv(x), r), add in the
 * logical dtypes with add->a the conv's output (p's y: shape, dtype, zero
 * point) and add->b the residual r, add->y y. The conv's output never
 * reaches DRAM; the epilogue loads r's rows (LOAD acc8) beside each tile
 * and runs the add's general sequence on the accumulator rows: every byte
 * equal to tsr_add over the unfused conv's output. TSR_EINVAL if no tiling
 * leaves room for the residual's region (tsr_conv2d_add_fits says so
 * before): run the add on its own then. */
int tsr_conv2d_plan_tensors_add(tsr_device_t *dev, const tsr_conv2d_params_t *p, const tsr_add_params_t *add,
                                const tsr_dtensor_t *x, const tsr_dtensor_t *r, const tsr_dtensor_t *y,
                                tsr_conv2d_plan_t *plan);
/* The same with an activation table fused into the epilogue (config key
 * ACT_LUT; jit/tsr_act.h): y = act(conv(x)), y of the conv's output shape
 * in the table's output dtype and zero point (any: the table says what the
 * bytes become), p's y_dtype and y_zp those of the conv's output, which
 * never reaches DRAM. After the requantization's last ALU step each output
 * row goes through one ALU lut (table 0, LOADed once at the start of the
 * stream), then the STORE: every byte equal to tsr_act over the unfused
 * conv's output. Refused: a config without ACT_LUT, and (not yet) a
 * fused add as well. */
int tsr_conv2d_plan_tensors_act(tsr_device_t *dev, const tsr_conv2d_params_t *p, const tsr_act_table_t *act,
                                const tsr_dtensor_t *x, const tsr_dtensor_t *y, tsr_conv2d_plan_t *plan);
/* One conv of a graph whose tiling search may run ahead of its plan: the
 * arguments tsr_conv2d_plan_tensors (add, r NULL) or
 * tsr_conv2d_plan_tensors_add will get. */
typedef struct {
    const tsr_conv2d_params_t *p; /* its parameters */
    const tsr_add_params_t *add;  /* the fused add's, or NULL */
    const tsr_dtensor_t *x, *r, *y; /* input, residual (fused add only), output */
    const tsr_act_table_t *act;     /* a fused activation table (tsr_conv2d_plan_tensors_act), or NULL */
} tsr_conv2d_job_t;
/* Run the tiling searches of these convs on up to nthreads threads (0:
 * tsr_jit_threads()), skipping convs whose
 * kernel the device's cache already holds or whose search it remembers, and
 * shapes that repeat; the results go to the cache's search memo, so that
 * planning the convs afterwards only builds the chosen streams. The same
 * tilings as planning them one by one: each search is the same function on
 * the same input. A conv whose search fails (bad parameters, no tiling) is
 * skipped here and fails with its message when it is planned. */
int tsr_conv2d_presearch(tsr_device_t *dev, const tsr_conv2d_job_t *jobs, int n, int nthreads);
/* 1 if the fused plan above can be made on cfg (some tiling fits the
 * buffers with the residual's region and the add's uops), 0 if not or if
 * the parameters are invalid. */
int tsr_conv2d_add_fits(const tsr_config_t *cfg, const tsr_conv2d_params_t *p, const tsr_add_params_t *add);
/* Re-bind a tensor plan to other tensors of the same layout: the cached
 * stream relocated again (no generation). */
int tsr_conv2d_bind(tsr_device_t *dev, tsr_conv2d_plan_t *plan, const tsr_dtensor_t *x, const tsr_dtensor_t *y);

/* Host packing (once per tensor). x: NCHW bytes of x_dtype, dst: x_bytes. */
void tsr_conv2d_pack_input(const tsr_config_t *cfg, const tsr_conv2d_plan_t *plan, const void *x, uint8_t *dst);
/* w: OIHW bytes of w_dtype, bias: [C_out] or NULL; wdst: w_bytes, cdst:
 * c_bytes. TSR_EINVAL if some w - w_zp does not fit int8. */
int tsr_conv2d_pack_weights(const tsr_config_t *cfg, const tsr_conv2d_plan_t *plan, const void *w,
                            const int32_t *bias, uint8_t *wdst, uint8_t *cdst);
/* src: y_bytes of the output layout; y: NCHW bytes of y_dtype. */
void tsr_conv2d_unpack_output(const tsr_config_t *cfg, const tsr_conv2d_plan_t *plan, const uint8_t *src, void *y);

/* Pack and copy to the plan's device buffers / run / read back. */
int tsr_conv2d_write_input(tsr_device_t *dev, const tsr_conv2d_plan_t *plan, const void *x);
int tsr_conv2d_write_weights(tsr_device_t *dev, const tsr_conv2d_plan_t *plan, const void *w, const int32_t *bias);
/* The same through the caller's buffer of w_bytes + c_bytes (a graph packs
 * every layer through one buffer: its pages are touched once, not per layer). */
int tsr_conv2d_write_weights_buf(tsr_device_t *dev, const tsr_conv2d_plan_t *plan, const void *w, const int32_t *bias,
                                 uint8_t *buf);
int tsr_conv2d_exec(tsr_device_t *dev, const tsr_conv2d_plan_t *plan);  /* tsr_submit (verifies) + tsr_wait */
int tsr_conv2d_read_output(tsr_device_t *dev, const tsr_conv2d_plan_t *plan, void *y);

/* One call: plan, pack, run, unpack, free. bias may be NULL. */
int tsr_conv2d_run(tsr_device_t *dev, const tsr_conv2d_params_t *p, const void *x, const void *w,
                   const int32_t *bias, void *y);

#endif
