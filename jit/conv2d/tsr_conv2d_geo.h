/*
 * tsr_conv2d_geo: what the conv2d units share (private to jit/conv2d and
 * jit/tsr_conv2d.c): the geometry of a plan (geo_t: blocks, tiling, on-chip
 * layout), the tiling it is built with, the stream being emitted (ibuf_t:
 * the stream builder plus the kernel sets and resident kernels recorded on
 * the way), and the geometry functions every unit reads: row and column
 * tiles with their padding, the uop kernel numbering, accumulator regions
 * and banks, constant rows, the resident tile sequence, whether a tiling
 * fits. The units: tsr_conv2d_emit (stream and uops), tsr_conv2d_tiling
 * (timing model and tiling search), tsr_conv2d.c (checks, packing, plan,
 * bind, run).
 */
#ifndef TSR_CONV2D_GEO_H
#define TSR_CONV2D_GEO_H

#include <stdint.h>

#include "tsr_conv2d.h"
#include "tsr_jitutil.h"
#include "tsr_stream.h"

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int cdiv(int a, int b) { return (a + b - 1) / b; }

/* The stream builder (its tags: the accumulator bank each GEMM/ALU
 * instruction's work touches, -1 both; the timing model reads them) and
 * what the lowering records while it emits. */
typedef struct {
    tsr_stream_t s;
    int8_t set_map[2][2][4]; /* kernel sets used, as geo_t.set_map */
    int n_sets;
    /* resident mode: the kernels the stream uses, in uop-buffer order */
    struct res_kern *kern;
    int nkern, capk;
    int32_t khead[64];  /* those kernels by a hash of their fields: index + 1 of the newest (0: none),
                           chained by res_kern_t.next, so a lookup is not a scan of all of them */
    int nuops;          /* uops of those kernels */
    uint8_t fconst[4];  /* fused add: its constant rows loaded into region pa */
} ibuf_t;

/* A resident-mode kernel: GEMM (input slot, output blocks [c0, c1) of chunk
 * j, acc region pa) or ALU (region pa, constants of block c0). */
typedef struct res_kern {
    int16_t alu, pa, islot, c0, c1, j;
    int32_t base, n;    /* first uop, uops */
    int32_t next;       /* index + 1 of the previous kernel of the same hash (ibuf_t.khead) */
} res_kern_t;


typedef tsr_rowtile_t rowgeo_t; /* row geometry of a row tile (tsr_jitutil.h) */

typedef struct {
    int toh, tco, tci, co_inner;
    int res;      /* resident mode (build_res): weights and constants stay on chip, input blocks are
                     cached in slots, tiles may differ in output-channel blocks */
    int kq;       /* resident mode: load stage lookahead in steps (tokens) */
    int tail;     /* resident mode: the last row tile's channel tiles shrink by halves (short tail) */
    int rpre;     /* resident mode with a fused add: where tile t's residual LOAD (acc8) goes in the
                     stream: 0 first step of t's epilogue; 1 before t's first GEMM; 2 behind the add
                     of the two inputs in t-1's epilogue (t = 0: as 1). The LOAD holds the dispatcher
                     and waits for the pipes working in its bank (t's), so where it goes decides what
                     it overlaps: in 0, nothing (t's epilogue ALU steps, its bank, wait for it); in 1,
                     the ALU steps of t-1 (other bank) while the GEMM pipe waits; in 2, t-1's long
                     two-row add once t's GEMMs are done (tsr_conv2d_build_res; the search picks) */
    int tow;      /* output columns per tile (OW, or fewer when a row does not fit) */
    int nbi, nba; /* buffers in the inp/wgt rotation (2 = double buffering, or 1) and in the acc
                     rotation (4: requantization and stores both overlap the next GEMMs, 2, or 1) */
} tiling_t;

/* Everything the emitter needs, derived once per plan. */
typedef struct {
    const tsr_config_t *c;
    const tsr_conv2d_params_t *p;
    int oh, ow, nb, cib, cob, dw, kk, nconst;
    /* The GEMM depthwise mode (config key DEPTHWISE = K > 0, a depthwise
     * conv: groups == C_in == C_out): dwk = K, else 0 (the block-diagonal
     * path). Each kernel row's taps are split in dwg = ceil(KW/K) groups of K
     * (taps beyond KW have zero weights); one weight row holds a group's
     * taps, [k][c] = tap k of channel c, so kk = KH * dwg weight rows per
     * block and part. One op per (output pixel, ky, group) sums K taps of
     * every lane; consecutive output columns are consecutive ops (uops over
     * the tile's pixels), so at stride 1 most ops reuse the input window.
     * A weight row holds wgpr = G tap groups (isa/semantics.md: the op's
     * wgt index names a group, row = wgt / G), so a block and part take
     * wkk = ceil(KK / G) rows; the uops and wgt factors count groups. */
    int dwk, dwg;
    int wgpr, wkk;              /* tap groups per weight row (1 off the mode) and weight rows per block and part
                                   (= kk off the mode) */
    int wtight;                 /* depthwise mode, one weight part, no shared copy, and every channel tile's
                                   first group at a row start (one channel tile, or TCO*KK a multiple of G):
                                   the blocks' groups packed back to back, block b's group k the global
                                   group b*KK + k (row, slot) = divmod(., G); a step loads the rows of its
                                   blocks' groups at once. Else each block and part starts a row (wkk rows).
                                   Set with the tiling (tsr_conv2d_set_tiling); plan.wtight */
    int lut;                    /* an activation table in the epilogue (operators.md "activation tables"):
                                   table 0, LOADed once at the start, one ALU lut per output row after the
                                   requantization's last step, before the STORE */
    int wshare;                 /* depthwise mode: every block's weight rows are the same, one copy (plan.wshare):
                                   a step loads TCI*KK rows, every block's GEMM reads them (wgt_factor_out 0) */
    /* Block skipping (groups 1, weights known at plan time: tsr_conv2d.c
     * geo_skip): wnz holds cob * cib bits, bit ob * cib + ib set when the
     * GEMM of output block ob meets input block ib (its packed weight block
     * has a nonzero byte; an output block without one keeps input block 0,
     * a GEMM of zeros, so no GEMM is empty); NULL when every block is kept.
     * wpre[ob]: the kept blocks of output blocks before ob (cob + 1 values);
     * wnz_hash: a hash of the bits (the tiling memo's key). wskip: the
     * tiling applies it (tsr_conv2d_set_tiling): in the step mode with one
     * chunk and one channel tile the uop kernel of block ob lists only its
     * kept input blocks, and input blocks no kept pair reads are not
     * loaded; in the resident mode a kernel (blocks [c0, c1), a chunk)
     * lists, input block by input block, the kept pairs, or (c0, ib) when
     * none of [c0, c1) meets ib (a group of input blocks is then never an
     * empty uop range; its loads stay). A
     * skipped block's accumulation is 0, so the values are the dense ones. */
    const uint8_t *wnz;
    const int32_t *wpre;
    uint64_t wnz_hash;
    int wskip;
    int has_shl_row;
    int exact;                  /* requantization by fscale (p->fscale, EXACT_REQUANT): the scale's bits
                                   replace M, no shift rows, rqfin shifts by 0 */
    int inp_half, wgt_half, acc_half;
    int wsplit;                 /* int8 parts of w - w_zp (1..3), each meeting its own copy of the input
                                   (depthwise: the block itself, one uop per part) */
    int h_pad;
    int32_t shl_imm;            /* per tensor: left shift amount (>0) */
    /* tiling */
    tiling_t t;
    int row_step, rows_in, n_rt, n_ct, chunks, steps, tiles, nci, kern_sets;
    int8_t set_map[2][2][4];    /* kernel set (+1, 0 = unused) of (inp slot, wgt slot, acc region) */
    int n_sets;                 /* kernel sets in use (set by build) */
    int wr, n_wt; /* on-chip row length (TOW-1)*sw + KW, column tiles */
    /* resident mode */
    int n_islot, islot_sz;      /* input slots and their size (elements) */
    int region_rows;            /* acc rows of one region (below the constant area) */
    int const_off;              /* bank-relative first row of the bank's constant copy */
    int kq;                     /* load stage lookahead in steps (tokens) */
    int nuops_res;              /* uops of the kernels the stream uses (set by build_res) */
    const res_kern_t *kern;     /* those kernels (encode_uops) */
    int nkern;
    /* residual add in the epilogue (operators.md "Residual add in the conv
     * epilogue"): after the requantization, the tile's residual rows are
     * LOADed (acc8) into a second region and the add's ALU sequence runs on
     * both; fuse = 1 iff fadd (its parameters, device view) is set */
    const tsr_add_params_t *fadd;
    int fuse;
    uint32_t x_el, w_el, y_el, c_el, uop_el, l_el; /* (l_el: the activation table, lut elements) */
    uint32_t r_el;              /* residual (fused add's other input) DRAM element base, acc8 elements */
} geo_t;

/* Column geometry of a column tile: the last one is shifted left to keep
 * TOW columns (it recomputes a few columns of its neighbour, and stores
 * the same values again), so every tile's on-chip row is WR long. */
typedef struct {
    int ox0;                 /* first output column */
    int pad0, real, pad1;    /* elements of left padding, DRAM elements, right padding */
    int ix_first;            /* first DRAM input column loaded */
} colgeo_t;

/* Resident mode: one tile (batch block, row x column tile, output blocks
 * [c0, c1)) of the tile sequence. */
typedef struct {
    int nb, rw, c0, c1;
} res_tile_t;

void tsr_conv2d_col_tile(const geo_t *g, int wt, colgeo_t *cg);
void tsr_conv2d_row_tile(const geo_t *g, int rt, rowgeo_t *r);
uint32_t tsr_conv2d_kern_base(const geo_t *g, ibuf_t *b, int qi, int qw, int pa, int cl);
int tsr_conv2d_n_uops_sets(const geo_t *g, int sets);
int tsr_conv2d_n_uops(const geo_t *g);
uint32_t tsr_conv2d_res_kernel(ibuf_t *b, int alu, int pa, int islot, int c0, int c1, int j, int n);
int tsr_conv2d_sec_shared(int rq_count, int k);
int tsr_conv2d_sec_off(int rq_count, int cob, int k);
int tsr_conv2d_res_shared(const geo_t *g, int k);
int tsr_conv2d_res_sec_off(const geo_t *g, int k);
uint32_t tsr_conv2d_const_step(const geo_t *g, int k);
uint32_t tsr_conv2d_alu_uop_b(const geo_t *g, ibuf_t *b, int pa, int c0, int k);
int tsr_conv2d_acc_bank(const geo_t *g, int pa);
uint32_t tsr_conv2d_acc_base(const geo_t *g, int pa);
int tsr_conv2d_const_slot(const geo_t *g, int pa);
uint32_t tsr_conv2d_const_base(const geo_t *g, int pa);
int tsr_conv2d_res_tiles(const geo_t *g, res_tile_t *out);
/* The fused add's uops: FUSE_UOPS per acc region, at the start of the uop
 * buffer in resident mode, after the requantization uops otherwise (none
 * without fusion, so unfused kernels are unchanged). */
enum { FU_A = 0, FU_B, FU_A_MA, FU_B_MB, FU_A_B, FU_A_MO, FU_A_FIN, FUSE_UOPS };
int tsr_conv2d_fuse_nuops(const geo_t *g);
uint32_t tsr_conv2d_fuse_uop(const geo_t *g, int pa, int j);
/* Region pa's second region (the residual), and the fused add's
 * TSR_ADD_NCONST constant rows behind it. */
uint32_t tsr_conv2d_fuse_base(const geo_t *g, int pa);
uint32_t tsr_conv2d_fuse_const(const geo_t *g, int pa);
/* Exact shortcuts of the fused add's ALU sequence, each one ALU op less per
 * accumulator row (the same integers; the add's ALU work, up to a dozen ops
 * per row, is what bounds ResNet's conv+add layers, not their GEMMs):
 * - fold_zp: input a is the conv's own output (a.zp == y_zp, checked at
 *   plan time), whose rqfin adds y_zp and clamps, and whose add step then
 *   subtracts it again; an rqfin with zero point 0 and the clamp bounds moved
 *   by -y_zp gives min(max(r, lo - zp), hi - zp) == min(max(r + zp, lo), hi)
 *   - zp, when the moved bounds fit rqfin's signed 9-bit fields;
 * - mul (input a or b, multiplier m): the shift left by left_shift and the
 *   mulhr by m make x * m / 2^(31 - left_shift) rounded; when m is a
 *   multiple of 2^(31 - left_shift) (ONNX Runtime's parameters: left_shift
 *   22, m = MA * 512) that is exactly x * (m >> (31 - left_shift)), one mul.
 *   |x| <= 510 (an 8-bit value less an 8-bit zero point) and m < 2^31, so
 *   neither x << left_shift (<= 22) nor the product wraps. */
static inline int tsr_conv2d_fuse_fold_zp(const tsr_conv2d_params_t *p, const tsr_add_params_t *a)
{
    return a && a->a.zp == p->y_zp && p->y_zp != 0 && p->act_min - p->y_zp >= -256 && p->act_max - p->y_zp <= 255;
}
static inline int tsr_conv2d_fuse_mul(const tsr_add_params_t *a, int32_t m)
{
    return a && a->left_shift > 0 && a->left_shift <= 22 && m >= 0 &&
           (m & ((INT32_C(1) << (31 - a->left_shift)) - 1)) == 0;
}
/* - fold_c (round_once, where the mul shortcut makes each zero point's step
 *   a ring step: (h - z) * m = h * m - z * m modulo 2^32, and mul, add and a
 *   shift left all wrap modulo 2^32, so their order does not change the
 *   32-bit sum the rounding reads): the zero points' products and bias_once
 *   as one constant C = bias_once - z_b * m_b (- z_a * m_a) in the constant
 *   row of M_o (round_once runs no mulhr by M_o), one ALU add of that row
 *   after the add of the two inputs instead of an add per zero point and
 *   one of bias_once; taken when it leaves out at least one op. (Inline
 *   here, as the shortcuts above, so that a change reaches the emitter's
 *   build identity in the kernel cache's signature.) */
static inline int tsr_conv2d_fuse_fold_c(const tsr_conv2d_params_t *p, const tsr_add_params_t *a)
{
    if (!a || !a->round_once)
        return 0;
    const int za = a->a.zp && !tsr_conv2d_fuse_fold_zp(p, a), zb = a->b.zp != 0;
    if (za && !(tsr_conv2d_fuse_mul(a, a->mult_a) && a->shift_a == 0))
        return 0;
    if (zb && !(tsr_conv2d_fuse_mul(a, a->mult_b) && a->shift_b == 0))
        return 0;
    return za + zb + (a->bias_once != 0) >= 2;
}
/* The fused add's TSR_ADD_NCONST constant rows (every lane the same value),
 * with the shortcuts above: M_a, M_b (or their mul factors), M_o (or C),
 * the rqfin row. */
void tsr_conv2d_fuse_const_values(const tsr_conv2d_params_t *p, const tsr_add_params_t *a,
                                  int32_t v[TSR_ADD_NCONST]);
void tsr_conv2d_set_tiling(geo_t *g, const tiling_t *t);
/* Depthwise mode: weight rows of nblk blocks' groups (a step's, from a
 * channel tile's first block), and the group index step from one block to
 * the next (the GEMMs' wgt_factor_out) and from one weight part to the next
 * within a block. */
int tsr_conv2d_dw_wrows(const geo_t *g, int nblk);
int tsr_conv2d_dw_blk_groups(const geo_t *g);
int tsr_conv2d_dw_part_groups(const geo_t *g);
/* Leave the depthwise mode: the block-diagonal path's geometry (when no
 * tiling of the mode fits: its rows are up to K-1 columns longer and each
 * op reads K rows). */
void tsr_conv2d_dw_off(geo_t *g);
/* Depthwise mode: GEMM uops per kernel set (every part of the chunk and tap
 * group, TOH*TOW pixels each), and the uops of set `set`, part ci, group
 * gk: pixel (oy, ox) at + oy*TOW + ox. */
int tsr_conv2d_dw_set_uops(const geo_t *g);
uint32_t tsr_conv2d_dw_kern(const geo_t *g, ibuf_t *b, int qi, int qw, int pa, int ci, int gk);
int tsr_conv2d_tiling_fits(const geo_t *g0, const tiling_t *t);
/* Block skipping (geo_t.wnz): does output block ob's GEMM meet input block
 * ib (1 when nothing is skipped), and the uops of output blocks [c0, c1)'s
 * kernels in the step mode. */
static inline int tsr_conv2d_wkeep(const geo_t *g, int ob, int ib)
{
    const int i = ob * g->cib + ib;
    return !g->wskip || ((g->wnz[i >> 3] >> (i & 7)) & 1);
}
int tsr_conv2d_kern_len(const geo_t *g, int c0, int c1);
/* Resident mode: does the kernel of output blocks [c0, c1) list the pair
 * (ob, ib), and the uops of its input blocks [cib0 + i0, cib0 + i1). */
int tsr_conv2d_res_keep(const geo_t *g, int c0, int c1, int ob, int ib);
int tsr_conv2d_res_len(const geo_t *g, int c0, int c1, int cib0, int i0, int i1);
/* Step mode: does any kept pair of the tile's output blocks [c0, c1) read
 * input block ib? */
int tsr_conv2d_in_used(const geo_t *g, int c0, int c1, int ib);

#endif
