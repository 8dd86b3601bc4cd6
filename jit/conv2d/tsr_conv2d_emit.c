/*
 * tsr_conv2d_emit: the conv2d stream and uops (tsr_conv2d_emit.h; values,
 * layouts and tiling in tsr_conv2d.h).
 *
 * Schedule (mirrors tsr_matmul.c). A step s = (tile t, chunk c) loads its
 * input and weight blocks into half s%2 of the inp/wgt buffers; tile t
 * accumulates in half t%2 of the acc buffer, whose tail holds the tile's
 * constant rows (bias', M, shifts; reloaded only when the half held another
 * output-channel tile). Per tile: on its first chunk, ALU mov initialises
 * the accumulators with bias' (instead of a reset + add); each chunk runs
 * one GEMM per output-channel block; after the last chunk the ALU
 * requantizes (shr, mulhr, rshr, max, min, add) and STORE writes the out
 * rows. Tokens: load->compute "step s loaded" (last LOAD of s pushes, first
 * GEMM of s pops); compute->load "inp/wgt half free again" (last GEMM of s
 * pushes, first LOAD of s+2 pops); compute->store "tile t ready" (last ALU
 * pushes, first STORE pops); store->compute "out half drained" (last STORE
 * of t pushes, popped by the mov of tile t+2, and by FINISH for the last
 * tile). With one chunk per tile, a step whose half still holds the same
 * input (or weight) blocks from step s-2 skips that load; a step that loads
 * nothing still carries its tokens on an empty LOAD. In the single-buffer
 * fallback (plan nbuf_inp / nbuf_acc = 1) every "2" above is a "1": step
 * s+1's loads wait for step s's GEMMs, tile t+1's mov for tile t's STORE.
 *
 * On-chip layout of a step (q = s % nbuf_inp, pa = t % nbuf_acc; WR = the
 * on-chip row length, TOW the tile's output columns):
 *   inp  q*INP_PART + j*ROWS_IN*WR + y*WR + x     (channel block j of the step)
 *   wgt  q*WGT_PART + (cl*TCI + ci)*KK + ky*KW + kx   (depthwise: cl*KK + ...)
 *   acc  pa*ACC_PART + cl*TOH*TOW + oy*TOW + ox   then TCO*NCONST constant rows
 * Block skipping (geo wskip, tsr_conv2d_geo.h): a block's uops list only
 * the input blocks whose weight block is nonzero, and input blocks no
 * listed uop reads are not loaded (step mode; in resident mode the loads
 * stay and a kernel keeps one uop per input block at least).
 * GEMM for block cl: uops (ci, ky, kx) -> dst cl*TOH*TOW, src ci*ROWS_IN*WR +
 * ky*WR + kx, wgt as above; loops iter_out = rows (dst +TOW, src +sh*WR, or
 * +WR when 1xK stride-sh kernels load only every sh-th row), iter_in = TOW
 * (dst +1, src +sw).
 * Depthwise mode (geo dwk = K; D = dwg groups per kernel row, KK = KH*D
 * groups per block and part, GR = wgpr groups per weight row, WKK =
 * ceil(KK/GR) rows): wgt rows q*WGT_PART + (cl*TCI + ci)*WKK (WGT_PART =
 * WGT_DEPTH/NBI/GR), a GEMM's wgt index naming group (row*GR + ky*D + g);
 * per (part ci, tap group g) one GEMM (emit_dw_gemms), uops (oy, ox) -> dst
 * oy*TOW + ox, src oy*sfo + ox*sw + g*K, wgt (q*WGT_PART + ci*WKK)*GR + g;
 * iter_in = KH (src +WR, wgt +D), iter_out = TCO (dst +TOH*TOW, src
 * +ROWS_IN*WR, wgt +TCI*WKK*GR). Shared weights (geo wshare): the same
 * rows q*WGT_PART + ci*WKK for every block (iter_out: wgt +0). Packed
 * groups (geo wtight: one part, channel tiles starting at row starts): the
 * tile's blocks' groups back to back from q*WGT_PART, block cl's group
 * (q*WGT_PART)*GR + cl*KK + ky*D + g (iter_out: wgt +KK).
 */
#include "tsr_conv2d_emit.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_jitutil.h"

const char *tsr_conv2d_emit_id(void) { return "conv2d emit, built " __DATE__ " " __TIME__; }

/* One requantization step: ALU op, constant row k (-1: immediate imm);
 * fu: 0 such a step of the conv, FU_STEP_LOAD the fused add's residual
 * LOAD, else 1 + the fused add's uop (tsr_conv2d_geo.h FU_*) of an ALU op
 * (FU_A / FU_B: immediate imm). */
typedef struct {
    uint32_t op;
    int k;
    int32_t imm;
    int fu;
} alu_step_t;

enum { FU_STEP_LOAD = -1, MAX_POST = 20 };

/* A finished output tile whose requantization and store are still to be
 * emitted (they are deferred behind the next tile's first GEMMs so that the
 * ALU pipe requantizes tile t while the GEMM pipe works on tile t+1). */
typedef struct {
    int valid;      /* a tile is pending */
    int t;          /* tile number */
    int pa;         /* its acc half */
    int tco;        /* its output-channel blocks */
    int cob0;       /* first output-channel block */
    int nb;         /* batch block */
    rowgeo_t r;     /* its rows */
    colgeo_t cg;    /* its columns */
} post_t;

/* Emit the requantization ALU sequence and the STOREs of tile pt. */
/* The loops of a conv GEMM over a tile of toh rows of ow outputs: rows
 * (dst +ow, src +sfo), columns (dst +1, src +sw); a loop that runs once
 * gets factor 0, so it never has to fit its field needlessly. */
static void conv_loops(tsr_insn_t *in, int toh, int ow, int sfo, int sw)
{
    tsr_stream_loops(in, (uint32_t)toh, toh > 1 ? (uint32_t)ow : 0, toh > 1 ? (uint32_t)sfo : 0, (uint32_t)ow,
                     ow > 1 ? 1 : 0, ow > 1 ? (uint32_t)sw : 0);
}

/* The requantization ALU steps: shr (left, if any shift is positive), mulhr
 * by M, then rqfin (rounding right shift, + y_zp, clamp) with its packed
 * row. With a fused add, the residual's LOAD first (into the second
 * region; it does not depend on the tile), and after the rqfin the add's
 * general sequence (operators.md "add") on h_a (the rqfin result, region A)
 * and h_b (region B): the same integers in the same order as the
 * standalone add, whose GEMM by 2^k and shr by -(ls - k) make the same
 * (h - zp) * 2^ls as the add imm and shr by -ls here. Returns their number. */
static int post_seq(const geo_t *g, alu_step_t seq[MAX_POST])
{
    int ns = 0;
    if (g->fuse && !(g->t.res && g->t.rpre)) /* (else build_res places the residual's LOAD: tiling_t.rpre) */
        seq[ns++] = (alu_step_t){0, -1, 0, FU_STEP_LOAD};
    if (g->has_shl_row)
        seq[ns++] = (alu_step_t){TSR_ALU_SHR, 2, 0, 0};
    else if (g->shl_imm)
        seq[ns++] = (alu_step_t){TSR_ALU_SHR, -1, -g->shl_imm, 0};
    seq[ns++] = (alu_step_t){g->exact ? TSR_ALU_FSCALE : TSR_ALU_MULHR, 1, 0, 0};
    seq[ns++] = (alu_step_t){TSR_ALU_RQFIN, 2 + g->has_shl_row, 0, 0};
    /* a fused activation table: the byte the STORE would write (rqfin's
     * low 8 bits) indexes table 0, as the standalone act's LOAD acc8 + lut
     * (the plan refuses a table together with a fused add) */
    if (g->lut)
        seq[ns++] = (alu_step_t){TSR_ALU_LUT, -1, 0, 0};
    if (!g->fuse)
        return ns;
    const tsr_add_params_t *a = g->fadd;
    /* (the shortcuts of tsr_conv2d_geo.h: the rqfin row then has zero point
     * 0, the constant rows m >> (31 - left_shift), tsr_conv2d.c) */
    const int mul_a = tsr_conv2d_fuse_mul(a, a->mult_a), mul_b = tsr_conv2d_fuse_mul(a, a->mult_b);
    const int fold_c = tsr_conv2d_fuse_fold_c(g->p, a); /* (the zero points' adds and bias_once: one add of C) */
    if (a->a.zp && !tsr_conv2d_fuse_fold_zp(g->p, a) && !fold_c)
        seq[ns++] = (alu_step_t){TSR_ALU_ADD, -1, -a->a.zp, 1 + FU_A};
    if (a->b.zp && !fold_c)
        seq[ns++] = (alu_step_t){TSR_ALU_ADD, -1, -a->b.zp, 1 + FU_B};
    if (a->left_shift && !mul_a)
        seq[ns++] = (alu_step_t){TSR_ALU_SHR, -1, -a->left_shift, 1 + FU_A};
    if (a->left_shift && !mul_b)
        seq[ns++] = (alu_step_t){TSR_ALU_SHR, -1, -a->left_shift, 1 + FU_B};
    seq[ns++] = (alu_step_t){mul_a ? TSR_ALU_MUL : TSR_ALU_MULHR, 0, 0, 1 + FU_A_MA};
    seq[ns++] = (alu_step_t){mul_b ? TSR_ALU_MUL : TSR_ALU_MULHR, 1, 0, 1 + FU_B_MB};
    if (a->shift_a < 0)
        seq[ns++] = (alu_step_t){TSR_ALU_RSHR, -1, -a->shift_a, 1 + FU_A};
    if (a->shift_b < 0)
        seq[ns++] = (alu_step_t){TSR_ALU_RSHR, -1, -a->shift_b, 1 + FU_B};
    seq[ns++] = (alu_step_t){TSR_ALU_ADD, 0, 0, 1 + FU_A_B};
    if (fold_c) /* C, in M_o's row */
        seq[ns++] = (alu_step_t){TSR_ALU_ADD, 2, 0, 1 + FU_A_MO};
    else if (a->bias_once) /* (round_once: the constant before the one rounding) */
        seq[ns++] = (alu_step_t){TSR_ALU_ADD, -1, a->bias_once, 1 + FU_A};
    if (a->shift_out > 0)
        seq[ns++] = (alu_step_t){TSR_ALU_SHR, -1, -a->shift_out, 1 + FU_A};
    if (!a->round_once)
        seq[ns++] = (alu_step_t){TSR_ALU_MULHR, 2, 0, 1 + FU_A_MO};
    seq[ns++] = (alu_step_t){TSR_ALU_RQFIN, 3, 0, 1 + FU_A_FIN};
    return ns;
}

/* The transfers of tile pt's output rows (or, at the same places, of its
 * residual's): *n of them (one for all blocks when full rows make them one
 * strided run); transfer k goes to/from on-chip row sram0 + ..., DRAM
 * element dram0 + .... */
typedef struct {
    uint32_t sram, dram, y, x, stride;
} xfer_t;
static xfer_t tile_xfer(const geo_t *g, const post_t *pt, int k, uint32_t sram0, uint32_t dram0, int *n)
{
    const int TOH = g->t.toh, OW = g->t.tow, FULL_OW = g->ow;
    const int tco = pt->tco, cob0 = pt->cob0, nb = pt->nb;
    const rowgeo_t r = pt->r;
    const long plane = (long)g->oh * FULL_OW;
    const int full_rows = OW == FULL_OW;
    int one = full_rows && (r.toh == TOH || tco == 1);
    if (tco > 1 && plane > 0xffff)
        one = 0;
    *n = one ? 1 : tco;
    const uint32_t x = (uint32_t)(full_rows ? r.toh * OW : OW);
    return (xfer_t){sram0 + (uint32_t)(k * TOH * OW),
                    dram0 + (uint32_t)((((long)nb * g->cob + cob0 + k) * g->oh + r.oy0) * FULL_OW + pt->cg.ox0),
                    (uint32_t)(full_rows ? (one ? tco : 1) : r.toh), x,
                    full_rows ? (one && tco > 1 ? (uint32_t)plane : x) : (uint32_t)FULL_OW};
}

/* The fused add's residual rows of tile pt into region B of its acc region
 * (compute stage; B held the region's previous tile, whose steps are all
 * emitted before), and the add's constant rows before the region's first. */
static void emit_resid_load(const geo_t *g, ibuf_t *b, const post_t *pt)
{
    const int pa = pt->pa;
    if (!b->fconst[pa]) { /* the add's constant rows, once per region */
        tsr_stream_load(&b->s, TSR_MEM_ACC, tsr_conv2d_fuse_const(g, pa), g->c_el + (uint32_t)(g->cob * g->nconst), 1,
                        TSR_ADD_NCONST, TSR_ADD_NCONST);
        b->fconst[pa] = 1;
    }
    int nx = 1;
    for (int j = 0; j < nx; j++) {
        const xfer_t x = tile_xfer(g, pt, j, tsr_conv2d_fuse_base(g, pa), g->r_el, &nx);
        tsr_stream_load(&b->s, TSR_MEM_ACC8, x.sram, x.dram, x.y, x.x, x.stride);
    }
}

/* Emit requantization steps [k0, k1) of tile pt and, when k1 is the last,
 * the push to the store stage and its STOREs (a tile's steps may be spread
 * over the next tile's GEMMs); with push 0 neither: the caller signals
 * CMP2ST later and emits the STOREs (emit_post_store). */
static void emit_post_store(const geo_t *g, ibuf_t *b, const post_t *pt);
static void emit_post_steps(const geo_t *g, ibuf_t *b, const post_t *pt, int k0, int k1, int push)
{
    const int TOH = g->t.toh, OW = g->t.tow;
    const int pa = pt->pa, tco = pt->tco, cob0 = pt->cob0;
    const rowgeo_t r = pt->r;
    tsr_insn_t *in;
    b->s.cur_tag = tsr_conv2d_acc_bank(g, pa);
    alu_step_t seq[MAX_POST];
    const int ns = post_seq(g, seq);
    for (int k = k0; k < k1; k++) {
        if (seq[k].fu == FU_STEP_LOAD) {
            /* (in program order with the ALU steps that read the rows) */
            emit_resid_load(g, b, pt);
            continue;
        }
        const int fu = seq[k].fu - 1;
        const uint32_t u = fu >= 0 ? tsr_conv2d_fuse_uop(g, pa, fu) : tsr_conv2d_alu_uop_b(g, b, pa, cob0, seq[k].k);
        in = tsr_stream_alu(&b->s, seq[k].op, u, u + 1);
        in->iter_out = (uint32_t)tco;
        in->dst_factor_out = tco > 1 ? (uint32_t)(TOH * OW) : 0;
        if (fu == FU_A_B) { /* row by row of both regions */
            in->src_factor_out = in->dst_factor_out;
            in->src_factor_in = 1;
        } else
            in->src_factor_out = tco > 1 && fu < 0 && seq[k].k >= 0 ? tsr_conv2d_const_step(g, seq[k].k) : 0;
        in->iter_in = (uint32_t)(r.toh * OW);
        in->dst_factor_in = 1;
        in->use_imm = seq[k].k < 0;
        in->imm = seq[k].k < 0 ? seq[k].imm : 0;
        if (k == ns - 1 && push) /* the tile is ready for STORE */
            tsr_stream_signal(&b->s, TSR_Q_CMP2ST);
    }
    if (k1 == ns && push)
        emit_post_store(g, b, pt);
}

/* The store stage of tile pt: its STORE once the tile is ready (CMP2ST),
 * then "region drained" for the tile NBA later or FINISH. */
static void emit_post_store(const geo_t *g, ibuf_t *b, const post_t *pt)
{
    const int NBA = g->t.nba, pa = pt->pa, t = pt->t;
    tsr_stream_wait(&b->s, TSR_Q_CMP2ST);
    int nst = 1;
    for (int k = 0; k < nst; k++) {
        const xfer_t x = tile_xfer(g, pt, k, tsr_conv2d_acc_base(g, pa), g->y_el, &nst);
        tsr_stream_store(&b->s, x.sram, x.dram, x.y, x.x, x.stride);
    }
    if (t < g->tiles - NBA || t == g->tiles - 1) /* region pa drained, for tile t+NBA or FINISH */
        tsr_stream_signal(&b->s, TSR_Q_ST2CMP);
}

static void emit_post_part(const geo_t *g, ibuf_t *b, const post_t *pt, int k0, int k1)
{
    emit_post_steps(g, b, pt, k0, k1, 1);
}

static void emit_post(const geo_t *g, ibuf_t *b, const post_t *pt)
{
    alu_step_t seq[MAX_POST];
    emit_post_part(g, b, pt, 0, post_seq(g, seq));
}

/* LOADs of one input block (batch block x channel block `el_blk` of the
 * packed input) for row/column tile r/cg into on-chip rows from `sram`:
 * the window's DRAM rows with their zero padding, or, when the window lies
 * entirely in the left/right padding, pad rows only (y_size 0, at most 15
 * per LOAD). Returns the last LOAD. */
static tsr_insn_t *emit_inp_block(const geo_t *g, ibuf_t *b, uint32_t sram, long el_blk, const rowgeo_t *r,
                                  const colgeo_t *cg)
{
    const tsr_conv2d_params_t *p = g->p;
    const uint32_t blk = g->x_el + (uint32_t)(el_blk * p->h * p->w);
    tsr_insn_t *in = NULL;
    if (!cg->real) {
        for (int y = 0; y < r->rows; y += 15) {
            in = tsr_stream_load(&b->s, TSR_MEM_INP, sram + (uint32_t)(y * g->wr), blk, 0, (uint32_t)g->wr,
                                 (uint32_t)g->wr);
            in->y_pad0 = (uint32_t)imin(15, r->rows - y);
            in->pad_value = g->h_pad;
        }
        return in;
    }
    in = tsr_stream_load(&b->s, TSR_MEM_INP, sram, blk + (uint32_t)((long)r->iy_first * p->w + cg->ix_first),
                         (uint32_t)r->real, (uint32_t)cg->real, (uint32_t)(g->row_step * p->w));
    in->y_pad0 = (uint32_t)r->pad0;
    in->y_pad1 = (uint32_t)r->pad1;
    in->x_pad0 = (uint32_t)cg->pad0;
    in->x_pad1 = (uint32_t)cg->pad1;
    in->pad_value = g->h_pad;
    return in;
}

/* Initialise the accumulators of tile t (region pa, tco blocks, toh rows)
 * with the bias row: the MOV that opens a tile. */
static void emit_mov(const geo_t *g, ibuf_t *b, int t, int pa, int c0, int tco, int toh)
{
    const uint32_t u = tsr_conv2d_alu_uop_b(g, b, pa, c0, 0);
    if (t >= g->t.nba) /* region pa drained by tile t-NBA's STORE */
        tsr_stream_wait(&b->s, TSR_Q_ST2CMP);
    tsr_insn_t *in = tsr_stream_alu(&b->s, TSR_ALU_MOV, u, u + 1);
    in->iter_out = (uint32_t)tco;
    in->dst_factor_out = tco > 1 ? (uint32_t)(g->t.toh * g->t.tow) : 0;
    in->src_factor_out = tco > 1 ? tsr_conv2d_const_step(g, 0) : 0;
    in->iter_in = (uint32_t)(toh * g->t.tow);
    in->dst_factor_in = 1;
}

/* Output-channel tile, channel blocks and rows of tile t (loop order of tsr_conv2d_build()). */
static void tile_of(const geo_t *g, int t, int *ct, int *tco, int *toh)
{
    const int n_rw = g->n_rt * g->n_wt;
    const int inner_n = g->t.co_inner ? g->n_ct : n_rw;
    const int i1 = t % inner_n, o1 = t / inner_n % (g->t.co_inner ? n_rw : g->n_ct);
    const int rw = g->t.co_inner ? o1 : i1;
    *ct = g->t.co_inner ? i1 : o1;
    *tco = imin(g->t.tco, g->cob - *ct * g->t.tco);
    rowgeo_t r;
    tsr_conv2d_row_tile(g, rw / g->n_wt, &r);
    *toh = r.toh;
}

/* Depthwise mode: the GEMMs of one step (input slot qi, weight slot qw,
 * acc region pa, tco blocks of toh rows): one per weight part of the chunk
 * and tap group, each over the tile's pixels (uops, row by row: at stride 1
 * consecutive ops read consecutive windows), kernel rows (iter_in: src
 * +WR, wgt +dwg groups) and blocks (iter_out: dst +TOH*TOW, src
 * +ROWS_IN*WR, wgt +TCI*WKK*G groups). The first waits for the step's
 * data, the last frees its slots (free). */
static void emit_dw_gemms(const geo_t *g, ibuf_t *b, int qi, int qw, int pa, int tco, int toh, int free)
{
    const tsr_conv2d_params_t *p = g->p;
    tsr_stream_wait(&b->s, TSR_Q_LD2CMP);
    for (int ci = 0; ci < g->nci; ci++)
        for (int gk = 0; gk < g->dwg; gk++) {
            const uint32_t kb = tsr_conv2d_dw_kern(g, b, qi, qw, pa, ci, gk);
            tsr_insn_t *in = tsr_stream_gemm(&b->s, kb, kb + (uint32_t)(toh * g->t.tow), 0);
            in->depthwise = 1;
            tsr_stream_loops(in, (uint32_t)tco, tco > 1 ? (uint32_t)(g->t.toh * g->t.tow) : 0,
                             tco > 1 ? (uint32_t)(g->rows_in * g->wr) : 0, (uint32_t)p->kh, 0,
                             p->kh > 1 ? (uint32_t)(g->row_step * g->wr) : 0);
            in->wgt_factor_out = tco > 1 && !g->wshare ? (uint32_t)tsr_conv2d_dw_blk_groups(g) : 0; /* (shared: one copy) */
            in->wgt_factor_in = p->kh > 1 ? (uint32_t)g->dwg : 0;
            if (free && ci == g->nci - 1 && gk == g->dwg - 1)
                tsr_stream_signal(&b->s, TSR_Q_CMP2LD);
        }
}

/* Emit the whole stream for g's tiling. */
void tsr_conv2d_build(const geo_t *g, ibuf_t *b)
{
    const tsr_config_t *c = g->c;
    const tsr_conv2d_params_t *p = g->p;
    const int TCO = g->t.tco, TCI = g->t.tci, OW = g->t.tow;
    tsr_insn_t *in;
    /* The inp and wgt buffers each rotate over NBI slots when their contents
     * change (not every step): data a later step needs again stays. Safe
     * with the per-step tokens: a slot is refilled at step s only for the
     * second key after the one it holds, whose last step is <= s - 2. */
    long cur_ikey = -1, cur_wkey = -1, const_key[4] = {-1, -1, -1, -1};
    const int NBI = g->t.nbi, NBA = g->t.nba;
    int islot = NBI - 1, wslot = NBI - 1;
    int mov_done = -1; /* tile whose MOV was emitted ahead */
    post_t pend = {0};

    const size_t uop_load = tsr_stream_uops(&b->s, g->uop_el, 1); /* length set once the kernel sets in use are known */
    if (g->lut) /* the activation table, once (compute stage, before every ALU lut) */
        tsr_stream_load(&b->s, TSR_MEM_LUT, 0, g->l_el, 1, 1, 1);

    const int sfo = g->row_step == 1 ? p->stride_h * g->wr : g->wr;
    int s = 0;
    const int n_rw = g->n_rt * g->n_wt; /* row x column tiles */
    const int outer_n = g->t.co_inner ? n_rw : g->n_ct, inner_n = g->t.co_inner ? g->n_ct : n_rw;
    int t = 0;
    for (int nb = 0; nb < g->nb; nb++)
        for (int o1 = 0; o1 < outer_n; o1++)
            for (int i1 = 0; i1 < inner_n; i1++, t++) {
                const int rw = g->t.co_inner ? o1 : i1, ct = g->t.co_inner ? i1 : o1;
                const int rt = rw / g->n_wt, wt = rw % g->n_wt;
                const int pa = t % g->t.nba;
                const int cob0 = ct * TCO, tco = imin(TCO, g->cob - cob0);
                rowgeo_t r;
                colgeo_t cg;
                tsr_conv2d_row_tile(g, rt, &r);
                tsr_conv2d_col_tile(g, wt, &cg);
                for (int ch = 0; ch < g->chunks; ch++, s++) {

                    const int cib0 = g->dw ? cob0 : ch * TCI;
                    const int nin = g->dw ? tco : imin(TCI, g->cib - cib0);
                    /* The first step's weights arrive in groups of output blocks,
                     * each with its own token, so the first GEMMs start on the
                     * first group instead of waiting for all of them. */
                    const int ngrp = s == 0 && !g->dw && tco > 1 ? imax(1, imin(imin(tco, 4), c->dep_queue_depth - 2)) : 1;
                    /* ---- load stage: into slots step s-NBI's GEMMs freed ---- */
                    if (s >= NBI)
                        tsr_stream_wait(&b->s, TSR_Q_CMP2LD);
                    long ikey = ((long)nb * n_rw + rw) * (g->dw ? g->n_ct : 1) + (g->dw ? ct : 0);
                    long wkey = g->wshare ? 0 : ct; /* (shared weights: the same rows for every channel tile) */
                    int reuse = g->chunks == 1;
                    if (!(reuse && cur_ikey == ikey)) {
                        islot = (islot + 1) % NBI;
                        for (int j = 0; j < nin; j++)
                            if (tsr_conv2d_in_used(g, cob0, cob0 + tco, cib0 + j)) /* (block skipping) */
                                emit_inp_block(g, b, (uint32_t)(islot * g->inp_half + j * g->rows_in * g->wr),
                                           nb * g->cib + cib0 + j, &r, &cg);
                        cur_ikey = ikey;
                    }
                    if (!(reuse && cur_wkey == wkey)) {
                        wslot = (wslot + 1) % NBI;
                        const int wq = wslot;
                        if (g->wshare) {
                            /* one copy [part][tap] for every block: the chunk's parts */
                            tsr_stream_load(&b->s, TSR_MEM_WGT, (uint32_t)(wq * g->wgt_half),
                                            g->w_el + (uint32_t)(ch * TCI * g->wkk), 1, (uint32_t)(TCI * g->wkk),
                                            (uint32_t)(TCI * g->wkk));
                        } else if (g->wtight) {
                            /* the tile's blocks' groups, back to back from a row start */
                            const int n = tsr_conv2d_dw_wrows(g, tco);
                            tsr_stream_load(&b->s, TSR_MEM_WGT, (uint32_t)(wq * g->wgt_half),
                                            g->w_el + (uint32_t)(cob0 * g->kk / g->wgpr), 1, (uint32_t)n, (uint32_t)n);
                        } else if (g->dw) {
                            /* the chunk's weight parts of each block (DRAM
                             * [block][part][tap]; TCI divides the parts) */
                            tsr_stream_load(&b->s, TSR_MEM_WGT, (uint32_t)(wq * g->wgt_half),
                                            g->w_el + (uint32_t)((cob0 * g->wsplit + ch * TCI) * g->wkk), (uint32_t)tco,
                                            (uint32_t)(TCI * g->wkk), (uint32_t)(g->wsplit * g->wkk));
                        } else {
                            /* rows of consecutive output blocks are contiguous
                             * on chip only with a full chunk; groups (first
                             * step only) each end with a token of their own */
                            int per_row = nin != TCI && tco > 1;
                            for (int gi = 0; gi < ngrp; gi++) {
                                const int c0 = gi * tco / ngrp, c1 = (gi + 1) * tco / ngrp;
                                for (int k = c0; k < (per_row ? c1 : c0 + 1); k++)
                                    tsr_stream_load(&b->s, TSR_MEM_WGT, (uint32_t)(wq * g->wgt_half + k * TCI * g->kk),
                                                    g->w_el + (uint32_t)(((cob0 + k) * g->cib + cib0) * g->kk),
                                                    (uint32_t)(per_row ? 1 : c1 - c0), (uint32_t)(nin * g->kk),
                                                    (uint32_t)(g->cib * g->kk));
                                if (gi < ngrp - 1)
                                    tsr_stream_signal(&b->s, TSR_Q_LD2CMP);
                            }
                        }
                        cur_wkey = wkey;
                    }
                    /* step s loaded (a token-only LOAD if it loads nothing) */
                    tsr_stream_signal(&b->s, TSR_Q_LD2CMP);
                    /* ---- compute stage ---- */
                    b->s.cur_tag = tsr_conv2d_acc_bank(g, pa);
                    if (ch == 0) {
                        if (const_key[tsr_conv2d_const_slot(g, pa)] != ct) {
                            tsr_stream_load(&b->s, TSR_MEM_ACC, tsr_conv2d_const_base(g, pa), g->c_el + (uint32_t)(cob0 * g->nconst),
                                            1, (uint32_t)(tco * g->nconst), (uint32_t)(tco * g->nconst));
                            const_key[tsr_conv2d_const_slot(g, pa)] = ct;
                        }
                        if (mov_done != t)
                            emit_mov(g, b, t, pa, cob0, tco, r.toh);
                    }
                    if (g->dwk)
                        emit_dw_gemms(g, b, islot, wslot, pa, tco, r.toh, s < g->steps - NBI);
                    /* The kernels of the tile's output blocks are contiguous
                     * in the uop buffer: with a full chunk one GEMM covers
                     * them all (one long instruction the ALU pipe can run
                     * beside), else one GEMM per block. */
                    const int per_blk = (g->dw ? g->nci : nin) * g->kk;
                    const int one_gemm = g->dw || nin == g->nci;
                    /* with weight groups: one GEMM per group (or per block), and
                     * each group's first pops its token */
                    const int ngemm = g->dwk ? 0 : one_gemm ? ngrp : tco; /* (the depthwise mode's: above) */
                    for (int cl = 0; cl < ngemm; cl++) {
                        const int c0 = one_gemm ? cl * tco / ngrp : cl, c1 = one_gemm ? (cl + 1) * tco / ngrp : cl + 1;
                        int grp_start = one_gemm;
                        for (int gi = 0; gi < ngrp && !grp_start; gi++)
                            grp_start = cl == gi * tco / ngrp;
                        if (grp_start) /* the (group's) data is in */
                            tsr_stream_wait(&b->s, TSR_Q_LD2CMP);
                        const uint32_t kb = tsr_conv2d_kern_base(g, b, islot, wslot, pa, c0);
                        const int len = g->wskip ? tsr_conv2d_kern_len(g, c0, c1) : per_blk * (c1 - c0);
                        in = tsr_stream_gemm(&b->s, kb, kb + (uint32_t)len, 0);
                        conv_loops(in, r.toh, OW, sfo, p->stride_w);
                        if (cl == ngemm - 1 && s < g->steps - NBI) /* the step's slots are free again */
                            tsr_stream_signal(&b->s, TSR_Q_CMP2LD);
                    }
                    if (ch == 0 && NBA == 4 && t + 1 < g->tiles) {
                        /* Open the next tile now (its region was stored three
                         * tiles ago), so its MOV runs before the ALU pipe
                         * waits in the previous tile's final push; only when
                         * its constants are already on chip. In the
                         * depthwise mode also when they are not: the
                         * previous tile (same bank, the constants' slot)
                         * is requantized first, then the next tile's
                         * constants are loaded and its region MOVed, and
                         * only then the previous tile's push to STORE (which
                         * waits for this tile's GEMMs) follows, on the MOV:
                         * the next GEMMs find their tile open instead of
                         * waiting behind that push for the LOAD and MOV
                         * (7x7x960 layers: 1101 -> ~990 cycles per tile). */
                        int nct, ntco, ntoh;
                        tile_of(g, t + 1, &nct, &ntco, &ntoh);
                        const int npa = (t + 1) % NBA, nks = tsr_conv2d_const_slot(g, npa);
                        const int early = g->dwk && const_key[nks] != nct && pend.valid;
                        if (early) {
                            alu_step_t seq[MAX_POST];
                            emit_post_steps(g, b, &pend, 0, post_seq(g, seq), 0);
                            b->s.cur_tag = tsr_conv2d_acc_bank(g, npa);
                            tsr_stream_load(&b->s, TSR_MEM_ACC, tsr_conv2d_const_base(g, npa),
                                            g->c_el + (uint32_t)(nct * TCO * g->nconst), 1, (uint32_t)(ntco * g->nconst),
                                            (uint32_t)(ntco * g->nconst));
                            const_key[nks] = nct;
                        }
                        if (const_key[nks] == nct) {
                            b->s.cur_tag = tsr_conv2d_acc_bank(g, npa);
                            emit_mov(g, b, t + 1, npa, nct * TCO, ntco, ntoh);
                            mov_done = t + 1;
                        }
                        if (early) { /* the previous tile is ready for STORE */
                            tsr_stream_signal(&b->s, TSR_Q_CMP2ST);
                            emit_post_store(g, b, &pend);
                            pend.valid = 0;
                        }
                    }
                    if (ch == 0 && pend.valid) {
                        /* requantize and store the previous tile behind
                         * this tile's first GEMMs (other acc half) */
                        emit_post(g, b, &pend);
                        pend.valid = 0;
                    }
                    if (ch != g->chunks - 1)
                        continue;
                    post_t cur = {1, t, pa, tco, cob0, nb, r, cg};
                    if (NBA >= 2)
                        pend = cur;
                    else
                        emit_post(g, b, &cur);
                }
            }
    if (pend.valid)
        emit_post(g, b, &pend);
    tsr_stream_set_uops(&b->s, uop_load, (uint32_t)tsr_conv2d_n_uops_sets(g, b->n_sets));
    tsr_stream_finish(&b->s);
}

/* Resident mode: the LOAD of bank bk's constant copy (the constants of
 * every output block, in the packed section layout). Bank 0's opens the
 * stream; bank 1's is issued before the first MOV into bank 1, behind a
 * GEMM in bank 0, which an acc LOAD without pushes runs beside. */
static tsr_insn_t *res_const_rows(const geo_t *g, ibuf_t *b, int bk, int from, int to)
{
    return tsr_stream_load(&b->s, TSR_MEM_ACC, (uint32_t)(bk * (int)(g->c->acc_depth / 2) + g->const_off + from),
                           g->c_el + (uint32_t)from, 1, (uint32_t)(to - from), (uint32_t)(to - from));
}
/* Make the constant rows a MOV (need 1: the bias section) or a
 * requantization (need 2: all) of bank bk reads present; cst[bk] is what is
 * loaded (0 nothing, 1 bias, 2 all). */
static void res_consts(const geo_t *g, ibuf_t *b, int *cst, int bk, int need)
{
    const int nbias = tsr_conv2d_res_sec_off(g, 1), all = tsr_conv2d_res_sec_off(g, g->nconst);
    if (cst[bk] >= need)
        return;
    res_const_rows(g, b, bk, cst[bk] >= 1 ? nbias : 0, all);
    cst[bk] = 2;
}

/* Resident mode: open tile t ahead of its first GEMM (its bank's bias rows,
 * then the MOV of its region); returns t. */
static int res_open(const geo_t *g, ibuf_t *b, int *cst, const res_tile_t *tl, int t)
{
    const int pa = t % g->t.nba;
    rowgeo_t r;
    tsr_conv2d_row_tile(g, tl[t].rw / g->n_wt, &r);
    b->s.cur_tag = tsr_conv2d_acc_bank(g, pa);
    res_consts(g, b, cst, pa % 2, 1);
    emit_mov(g, b, t, pa, tl[t].c0, tl[t].c1 - tl[t].c0, r.toh);
    return t;
}

/* Emit the stream of a resident-mode tiling. Every weight block gets a
 * fixed place on chip (chunk j, output block co at (j*COB + co)*TCI*KK) and
 * is loaded once, on first use; each bank keeps one copy of all constant
 * rows, loaded before its first tile; input blocks of a (row tile, chunk)
 * are cached in NI slots, refilled least recently used first. Tiles may
 * differ in their output blocks (res_tiles), so the requantization left at
 * the end is that of a one-block tile.
 * Tokens: load->compute one per step (per weight group in step 0);
 * compute->load one per step, pushed by its last GEMM. The load stage pops
 * them in step order, at least up to step s-KQ before step s (a lookahead of
 * KQ steps keeps both queues within their depth) and, before it overwrites
 * a slot, up to the last step that read it. Only tokens it pops are pushed. */
void tsr_conv2d_build_res(const geo_t *g, ibuf_t *b)
{
    const tsr_config_t *c = g->c;
    const tsr_conv2d_params_t *p = g->p;
    const int TCI = g->t.tci, OW = g->t.tow, NBA = g->t.nba, NI = g->n_islot, KQ = g->kq;
    const int n_rw = g->n_rt * g->n_wt;
    tsr_insn_t *in;
    res_tile_t *tl = malloc(sizeof *tl * (size_t)(g->tiles > 0 ? g->tiles : 1));
    long *skey = malloc(sizeof *skey * (size_t)NI);
    int *slast = malloc(sizeof *slast * (size_t)NI);
    uint8_t *wdone = calloc((size_t)g->chunks * (size_t)g->cob, 1);
    size_t *glast = malloc(sizeof *glast * (size_t)(g->steps > 0 ? g->steps : 1));
    int *runs = malloc(sizeof *runs * 2 * (size_t)g->cob);
    if (!tl || !skey || !slast || !wdone || !glast || !runs) {
        b->s.rc = TSR_ENOMEM;
        goto out;
    }
    tsr_conv2d_res_tiles(g, tl);
    for (int x = 0; x < NI; x++) {
        skey[x] = -1;
        slast[x] = -1;
    }
    int popped = 0, mov_done = -1, cst[2] = {0, 0};
    int grp_budget = (int)c->dep_queue_depth - 1 - KQ; /* extra load->compute tokens within any KQ steps */
    post_t pend = {0};

    b->nuops = tsr_conv2d_fuse_nuops(g); /* the fused add's uops open the buffer */
    const size_t uop_load = tsr_stream_uops(&b->s, g->uop_el, 1); /* length set once the kernels in use are known */
    if (g->lut) /* the activation table, once (compute stage, before every ALU lut) */
        tsr_stream_load(&b->s, TSR_MEM_LUT, 0, g->l_el, 1, 1, 1);

    /* bank 0's bias rows (the first MOV's operand) next; the rest of the
     * constants is not needed before the first requantization and loads
     * later, beside GEMMs of the other bank */
    res_const_rows(g, b, 0, 0, tsr_conv2d_res_sec_off(g, 1));
    cst[0] = 1;
    /* the load stage starts once the uops are in, so that the first
     * instructions' uops are not queued behind input and weights */
    tsr_stream_signal_at(&b->s, uop_load, TSR_Q_CMP2LD);
    tsr_stream_wait(&b->s, TSR_Q_CMP2LD);
    tsr_stream_carrier(&b->s, TSR_STAGE_LOAD);
    const int sfo = g->row_step == 1 ? p->stride_h * g->wr : g->wr;
    int s = 0;
    for (int t = 0; t < g->tiles; t++) {
        const int nb = tl[t].nb, rw = tl[t].rw, cob0 = tl[t].c0, tco = tl[t].c1 - tl[t].c0;
        const int pa = t % NBA;
        rowgeo_t r;
        colgeo_t cg;
        tsr_conv2d_row_tile(g, rw / g->n_wt, &r);
        tsr_conv2d_col_tile(g, rw % g->n_wt, &cg);
        for (int ch = 0; ch < g->chunks; ch++, s++) {
            const int cib0 = ch * TCI, nin = imin(TCI, g->cib - cib0);
            /* the first tile's steps (the load stage is then the bottleneck)
             * hand over their data in groups of input blocks, each with its
             * own token, within the queue depth the lookahead leaves */
            const int ngrp = t == 0 ? imax(1, imin(imin(nin, 4), 1 + grp_budget)) : 1;
            grp_budget -= ngrp - 1;
            /* ---- load stage ---- */
            const long ikey = ((long)nb * n_rw + rw) * g->chunks + ch;
            int islot = -1, need = 0, load_in = 0;
            for (int x = 0; x < NI && islot < 0; x++)
                if (skey[x] == ikey)
                    islot = x;
            if (islot < 0) {
                islot = 0;
                for (int x = 1; x < NI; x++)
                    if (slast[x] < slast[islot])
                        islot = x;
                need = slast[islot] + 1;
                skey[islot] = ikey;
                load_in = 1;
            }
            slast[islot] = s;
            const int npop = imax(0, imax(s - KQ + 1, need) - popped);
            for (int k = 1; k < npop; k++) { /* one pop per instruction: carriers for all but the last */
                tsr_stream_wait(&b->s, TSR_Q_CMP2LD);
                tsr_stream_carrier(&b->s, TSR_STAGE_LOAD);
            }
            if (npop > 0)
                tsr_stream_wait(&b->s, TSR_Q_CMP2LD);
            popped += npop;
            /* output blocks of the tile whose weights of this chunk are not
             * on chip yet, as runs */
            int nrun = 0;
            for (int co = cob0; co < cob0 + tco;) {
                if (wdone[(size_t)ch * g->cob + co]) {
                    co++;
                    continue;
                }
                int e = co;
                while (e < cob0 + tco && !wdone[(size_t)ch * g->cob + e])
                    wdone[(size_t)ch * g->cob + e++] = 1;
                runs[2 * nrun] = co;
                runs[2 * nrun + 1] = e;
                nrun++;
                co = e;
            }
            /* per input block of the chunk: its input, then its weights
             * (on chip [chunk][block][output block], one LOAD per run);
             * groups of blocks end with a token of their own */
            const uint32_t wbase = (uint32_t)(ch * g->cob * TCI * g->kk);
            for (int gi = 0; gi < ngrp; gi++) {
                const int i0 = gi * nin / ngrp, i1 = (gi + 1) * nin / ngrp;
                for (int j = i0; j < i1; j++) {
                    if (load_in)
                        emit_inp_block(g, b, (uint32_t)(islot * g->islot_sz + j * g->rows_in * g->wr),
                                       nb * g->cib + cib0 + j, &r, &cg);
                    for (int k = 0; k < nrun; k++) {
                        const int c0 = runs[2 * k], c1 = runs[2 * k + 1];
                        tsr_stream_load(&b->s, TSR_MEM_WGT, wbase + (uint32_t)((j * g->cob + c0) * g->kk),
                                        g->w_el + (uint32_t)(((long)c0 * g->cib + cib0 + j) * g->kk),
                                        (uint32_t)(c1 - c0), (uint32_t)g->kk, (uint32_t)(g->cib * g->kk));
                    }
                }
                if (gi < ngrp - 1) /* (a token-only LOAD if the group's data was on chip) */
                    tsr_stream_signal(&b->s, TSR_Q_LD2CMP);
            }
            tsr_stream_signal(&b->s, TSR_Q_LD2CMP);
            /* ---- compute stage ---- */
            b->s.cur_tag = tsr_conv2d_acc_bank(g, pa);
            const post_t cur = {1, t, pa, tco, cob0, nb, r, cg};
            if (ch == 0 && g->fuse && (g->t.rpre == 1 || (g->t.rpre == 2 && !pend.valid)))
                emit_resid_load(g, b, &cur); /* (tiling_t.rpre) */
            if (ch == 0) {
                if (mov_done != t) {
                    res_consts(g, b, cst, pa % 2, 1);
                    emit_mov(g, b, t, pa, cob0, tco, r.toh);
                }
            }
            /* the kernel runs input block by input block (all output blocks
             * each), so a group of blocks is a uop range */
            /* (block skipping: each input block's kept pairs, tsr_conv2d_res_len) */
            const int c1 = cob0 + tco;
            const uint32_t kb =
                tsr_conv2d_res_kernel(b, 0, pa, islot, cob0, c1, ch, tsr_conv2d_res_len(g, cob0, c1, cib0, 0, nin));
            for (int gi = 0; gi < ngrp; gi++) {
                const int i0 = gi * nin / ngrp, i1 = (gi + 1) * nin / ngrp;
                tsr_stream_wait(&b->s, TSR_Q_LD2CMP);
                in = tsr_stream_gemm(&b->s, kb + (uint32_t)tsr_conv2d_res_len(g, cob0, c1, cib0, 0, i0),
                                     kb + (uint32_t)tsr_conv2d_res_len(g, cob0, c1, cib0, 0, i1), 0);
                conv_loops(in, r.toh, OW, sfo, p->stride_w);
            }
            glast[s] = b->s.n - 1;
            if (t == 0 && ch == imin(1, g->chunks - 1) && g->tiles > 1) {
                /* bank 1's constants, beside a long GEMM of the first tile
                 * (not the first one, while the load stage is busiest) */
                res_consts(g, b, cst, 1, 1);
            }
            if (ch == (t == 0 ? g->chunks - 1 : 0) && NBA == 4 && t + 1 < g->tiles) {
                /* open the next tile now (see build); behind the first
                 * tile's last GEMM, not its first, which the load stage
                 * still feeds (the MOV needs bank 1's constants) */
                mov_done = res_open(g, b, cst, tl, t + 1);
            }
            if (pend.valid) {
                /* the previous tile's requantization, one step behind each
                 * of this tile's first GEMMs: the dispatcher holds a GEMM
                 * behind an ALU step that waits for the ALU pipe, so a
                 * block of steps would stall the GEMM pipe */
                alu_step_t seq[MAX_POST];
                const int ns = post_seq(g, seq);
                if (ch == 0)
                    res_consts(g, b, cst, pend.pa % 2, 2);
                const int k0 = imin(ch, ns), k1 = ch == g->chunks - 1 ? ns : imin(ch + 1, ns);
                /* rpre 2: this tile's residual behind the previous tile's
                 * add of its two inputs (never its last step) */
                int kab = -1;
                for (int k = 0; k < ns && g->fuse && g->t.rpre == 2; k++)
                    if (seq[k].fu == 1 + FU_A_B)
                        kab = k;
                if (kab >= k0 && kab < k1) {
                    emit_post_part(g, b, &pend, k0, kab + 1);
                    emit_resid_load(g, b, &cur);
                    emit_post_part(g, b, &pend, kab + 1, k1);
                } else if (k1 > k0)
                    emit_post_part(g, b, &pend, k0, k1);
                if (k1 == ns)
                    pend.valid = 0;
            }
            if (ch == g->chunks - 1) {
                pend = (post_t){1, t, pa, tco, cob0, nb, r, cg};
                if (NBA == 2 && t + 1 < g->tiles && mov_done != t + 1) {
                    /* with two regions, open the next tile behind this
                     * tile's last GEMM and the previous requantization (its
                     * MOV waits for that tile's store): the MOV runs beside
                     * the last GEMM instead of after it */
                    mov_done = res_open(g, b, cst, tl, t + 1);
                }
            }
        }
    }
    if (pend.valid) {
        res_consts(g, b, cst, pend.pa % 2, 2);
        emit_post(g, b, &pend);
    }
    /* a step's GEMMs free its slots for the load stage only if it pops the token */
    for (int k = 0; k < popped; k++)
        tsr_stream_signal_at(&b->s, glast[k], TSR_Q_CMP2LD);
    tsr_stream_set_uops(&b->s, uop_load, (uint32_t)(b->nuops > 0 ? b->nuops : 1));
    tsr_stream_finish(&b->s);
out:
    free(tl);
    free(skey);
    free(slast);
    free(wdone);
    free(glast);
    free(runs);
}

void tsr_conv2d_dw_uops(const geo_t *g, const int8_t set_map[2][2][4], tsr_uop_t *u)
{
    const tsr_conv2d_params_t *p = g->p;
    const int sfo = g->row_step == 1 ? p->stride_h * g->wr : g->wr;
    size_t k = 0;
    for (int pa = 0; pa < g->t.nba; pa++)
        for (int j = -1; j < g->nconst; j++, k++)
            u[k] = (tsr_uop_t){tsr_conv2d_acc_base(g, pa),
                               j < 0 ? tsr_conv2d_acc_base(g, pa) : tsr_conv2d_const_base(g, pa) + (uint32_t)j, 0};
    for (int pa = 0; pa < g->t.nba && g->fuse; pa++) {
        const uint32_t A = tsr_conv2d_acc_base(g, pa), B = tsr_conv2d_fuse_base(g, pa), K = tsr_conv2d_fuse_const(g, pa);
        const uint32_t dst[FUSE_UOPS] = {A, B, A, B, A, A, A}, src[FUSE_UOPS] = {A, B, K, K + 1, B, K + 2, K + 3};
        for (int j = 0; j < FUSE_UOPS; j++)
            u[tsr_conv2d_fuse_uop(g, pa, j)] = (tsr_uop_t){dst[j], src[j], 0};
    }
    for (int qi = 0; qi < g->t.nbi; qi++)
        for (int qw = 0; qw < g->t.nbi; qw++)
            for (int pa = 0; pa < g->t.nba; pa++) {
                if (!set_map[qi][qw][pa])
                    continue;
                k = (size_t)tsr_conv2d_n_uops_sets(g, set_map[qi][qw][pa] - 1);
                for (int ci = 0; ci < g->nci; ci++)
                    for (int gk = 0; gk < g->dwg; gk++)
                        for (int oy = 0; oy < g->t.toh; oy++)
                            for (int ox = 0; ox < g->t.tow; ox++, k++)
                                u[k] = (tsr_uop_t){
                                    tsr_conv2d_acc_base(g, pa) + (uint32_t)(oy * g->t.tow + ox),
                                    (uint32_t)(qi * g->inp_half + oy * sfo + ox * p->stride_w + gk * g->dwk),
                                    (uint32_t)(qw * g->wgt_half * g->wgpr + ci * tsr_conv2d_dw_part_groups(g) + gk)};
            }
}

/* Encode the uop kernels of g's tiling (host memory, tsr_conv2d_n_uops(g) entries of
 * uop_bytes; *out is malloc'ed). Uops hold on-chip indices only. */
int tsr_conv2d_encode_uops(const geo_t *g, uint8_t **out)
{
    const tsr_config_t *c = g->c;
    const tsr_conv2d_params_t *p = g->p;
    size_t n = (size_t)tsr_conv2d_n_uops(g);
    uint8_t *u8 = calloc(n, c->uop_bytes);
    *out = NULL;
    if (!u8)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = TSR_OK;
    size_t k = 0;
    if (g->dwk) {
        tsr_uop_t *du = calloc(n, sizeof *du);
        if (!du) {
            free(u8);
            return tsr_err(TSR_ENOMEM, "out of memory");
        }
        tsr_conv2d_dw_uops(g, g->set_map, du);
        for (k = 0; k < n && !rc; k++) {
            uint64_t raw;
            if (!(rc = tsr_uop_encode(c, &du[k], &raw)))
                memcpy(u8 + k * c->uop_bytes, &raw, c->uop_bytes);
        }
        free(du);
        if (rc)
            goto fail;
        *out = u8;
        return TSR_OK;
    }
    for (int pa = 0; pa < g->t.nba && g->fuse; pa++) {
        /* the fused add's uops of region pa: (dst, src) per FU_* */
        const uint32_t A = tsr_conv2d_acc_base(g, pa), B = tsr_conv2d_fuse_base(g, pa), K = tsr_conv2d_fuse_const(g, pa);
        const uint32_t dst[FUSE_UOPS] = {A, B, A, B, A, A, A}, src[FUSE_UOPS] = {A, B, K, K + 1, B, K + 2, K + 3};
        for (int j = 0; j < FUSE_UOPS; j++) {
            tsr_uop_t u = {dst[j], src[j], 0};
            uint64_t raw;
            if ((rc = tsr_uop_encode(c, &u, &raw)))
                goto fail;
            memcpy(u8 + tsr_conv2d_fuse_uop(g, pa, j) * c->uop_bytes, &raw, c->uop_bytes);
        }
    }
    if (g->t.res) {
        for (int i = 0; i < g->nkern; i++) {
            const res_kern_t *kn = &g->kern[i];
            k = (size_t)kn->base;
            const uint32_t dst0 = tsr_conv2d_acc_base(g, kn->pa);
            if (kn->alu) {
                const uint32_t cst = (uint32_t)((kn->pa % 2) * (int)(c->acc_depth / 2) + g->const_off);
                for (int j = -1; j < g->nconst; j++, k++) {
                    const uint32_t src = j < 0 ? dst0
                                               : cst + (uint32_t)(tsr_conv2d_res_sec_off(g, j) + (tsr_conv2d_res_shared(g, j) ? 0 : kn->c0));
                    tsr_uop_t u = {dst0, src, 0};
                    uint64_t raw;
                    if ((rc = tsr_uop_encode(c, &u, &raw)))
                        goto fail;
                    memcpy(u8 + k * c->uop_bytes, &raw, c->uop_bytes);
                }
                continue;
            }
            const int nin = imin(g->t.tci, g->cib - kn->j * g->t.tci);
            const uint32_t wbase = (uint32_t)(kn->j * g->cob * g->t.tci * g->kk);
            for (int ci = 0; ci < nin; ci++)
                for (int cl = kn->c0; cl < kn->c1; cl++)
                    for (int ky = 0; ky < p->kh && tsr_conv2d_res_keep(g, kn->c0, kn->c1, cl, kn->j * g->t.tci + ci);
                         ky++)
                        for (int kx = 0; kx < p->kw; kx++, k++) {
                            tsr_uop_t u;
                            u.dst = dst0 + (uint32_t)((cl - kn->c0) * g->t.toh * g->t.tow);
                            u.src = (uint32_t)(kn->islot * g->islot_sz + ci * g->rows_in * g->wr + ky * g->wr + kx);
                            u.wgt = wbase + (uint32_t)((ci * g->cob + cl) * g->kk + ky * p->kw + kx);
                            uint64_t raw;
                            if ((rc = tsr_uop_encode(c, &u, &raw)))
                                goto fail;
                            memcpy(u8 + k * c->uop_bytes, &raw, c->uop_bytes);
                        }
        }
        *out = u8;
        return TSR_OK;
    }
    for (int pa = 0; pa < g->t.nba; pa++)
        for (int j = -1; j < g->nconst; j++, k++) {
            tsr_uop_t u = {tsr_conv2d_acc_base(g, pa), j < 0 ? tsr_conv2d_acc_base(g, pa) : tsr_conv2d_const_base(g, pa) + (uint32_t)j, 0};
            uint64_t raw;
            if ((rc = tsr_uop_encode(c, &u, &raw)))
                goto fail;
            memcpy(u8 + k * c->uop_bytes, &raw, c->uop_bytes);
        }
    for (int qi = 0; qi < g->t.nbi; qi++)
        for (int qw = 0; qw < g->t.nbi; qw++)
            for (int pa = 0; pa < g->t.nba; pa++) {
                if (!g->set_map[qi][qw][pa])
                    continue;
                k = (size_t)g->t.nba * (1 + g->nconst) + (size_t)tsr_conv2d_fuse_nuops(g) +
                    (size_t)(g->set_map[qi][qw][pa] - 1) * (size_t)tsr_conv2d_kern_len(g, 0, g->t.tco);
                for (int cl = 0; cl < g->t.tco; cl++)
                    for (int ci = 0; ci < g->nci; ci++)
                        for (int ky = 0; ky < p->kh && tsr_conv2d_wkeep(g, cl, ci); ky++)
                            for (int kx = 0; kx < p->kw; kx++, k++) {
                                int blk = g->dw ? cl : ci;
                                tsr_uop_t u;
                                u.dst = tsr_conv2d_acc_base(g, pa) + (uint32_t)(cl * g->t.toh * g->t.tow);
                                u.src = (uint32_t)(qi * g->inp_half + blk * g->rows_in * g->wr + ky * g->wr + kx);
                                u.wgt = (uint32_t)(qw * g->wgt_half + (g->dw ? cl * g->nci + ci : cl * g->t.tci + ci) * g->kk +
                                                   ky * p->kw + kx);
                                uint64_t raw;
                                if ((rc = tsr_uop_encode(c, &u, &raw)))
                                    goto fail;
                                memcpy(u8 + k * c->uop_bytes, &raw, c->uop_bytes);
                            }
            }
    *out = u8;
    return TSR_OK;
fail:
    free(u8);
    return rc;
}
