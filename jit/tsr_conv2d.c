/*
 * tsr_conv2d: quantized conv2d lowering (see tsr_conv2d.h for the values,
 * layouts and tiling).
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
 * GEMM for block cl: uops (ci, ky, kx) -> dst cl*TOH*TOW, src ci*ROWS_IN*WR +
 * ky*WR + kx, wgt as above; loops iter_out = rows (dst +TOW, src +sh*WR, or
 * +WR when 1xK stride-sh kernels load only every sh-th row), iter_in = TOW
 * (dst +1, src +sw).
 */
#include "tsr_conv2d.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr_error.h"
#include "tsr_jitutil.h"
#include "tsr_kcache.h"
#include "tsr_stream.h"

#define OP "conv2d"

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }
static int cdiv(int a, int b) { return (a + b - 1) / b; }

static int dt_ok(tsr_dtype_e d) { return d == TSR_DT_INT8 || d == TSR_DT_UINT8; }
static int32_t dt_min(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 0 : -128; }
static int32_t dt_max(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 255 : 127; }
static int32_t dt_get(tsr_dtype_e d, const void *base, size_t i)
{
    return d == TSR_DT_UINT8 ? (int32_t)((const uint8_t *)base)[i] : (int32_t)((const int8_t *)base)[i];
}

/* w - w_zp fits int8 for every weight only with zero point 0 (int8) or
 * 128 (uint8); otherwise it is split into 2 (or, when 255 can occur, 3)
 * int8 parts (groups 1: meeting copies of the input; exact, at 2-3x the
 * GEMM work). p's weight fields must be valid. */
static int wsplit_of(const tsr_conv2d_params_t *p)
{
    int32_t vmin = 0, vmax = 0;
    for (int i = 0; i < p->w_zp_count; i++) {
        vmin = imin(vmin, dt_min(p->w_dtype) - p->w_zp[i]);
        vmax = imax(vmax, dt_max(p->w_dtype) - p->w_zp[i]);
    }
    /* parts needed: each int8 part covers [-128, 127] */
    return (vmin >= -128 && vmax <= 127) ? 1 : (vmin >= -256 && vmax <= 254) ? 2 : 3;
}

int tsr_conv2d_input_copies(const tsr_conv2d_params_t *p)
{
    int oh, ow;
    if (!p || tsr_conv2d_check(p, &oh, &ow))
        return 0;
    return p->groups != 1 ? 1 : wsplit_of(p);
}

int tsr_conv2d_check(const tsr_conv2d_params_t *p, int *oh, int *ow)
{
    if (!p)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters");
    if (p->n < 1 || p->c_in < 1 || p->h < 1 || p->w < 1)
        return tsr_err(TSR_EINVAL, OP ": input shape [%d, %d, %d, %d] must be positive", p->n, p->c_in, p->h, p->w);
    if (p->c_out < 1 || p->kh < 1 || p->kw < 1)
        return tsr_err(TSR_EINVAL, OP ": weight shape (C_out %d, kernel %dx%d) must be positive", p->c_out, p->kh,
                       p->kw);
    if (p->stride_h < 1 || p->stride_w < 1)
        return tsr_err(TSR_EINVAL, OP ": strides (%d, %d) must be >= 1", p->stride_h, p->stride_w);
    const int pads[4] = {p->pad_top, p->pad_left, p->pad_bottom, p->pad_right};
    const char *pn[4] = {"top", "left", "bottom", "right"};
    for (int i = 0; i < 4; i++) {
        if (pads[i] < 0)
            return tsr_err(TSR_EINVAL, OP ": negative %s padding %d", pn[i], pads[i]);
        if (pads[i] > 15)
            return tsr_err(TSR_EINVAL, OP ": %s padding %d is more than 15 (the LOAD pad fields are 4 bits; "
                           "pad the input on the host)", pn[i], pads[i]);
    }
    if (p->groups != 1) {
        if (p->groups != p->c_in || p->c_in < 2)
            return tsr_err(TSR_EINVAL, OP ": groups %d is neither 1 nor the input channel count %d (depthwise)",
                           p->groups, p->c_in);
        if (p->c_out != p->c_in)
            return tsr_err(TSR_EINVAL, OP ": depthwise (groups %d) needs C_out == C_in, got C_out %d", p->groups,
                           p->c_out);
    }
    if (!dt_ok(p->x_dtype) || !dt_ok(p->w_dtype) || !dt_ok(p->y_dtype))
        return tsr_err(TSR_EINVAL, OP ": dtypes must be int8 or uint8 (input %d, weights %d, output %d)",
                       (int)p->x_dtype, (int)p->w_dtype, (int)p->y_dtype);
    if (p->x_zp < dt_min(p->x_dtype) || p->x_zp > dt_max(p->x_dtype))
        return tsr_err(TSR_EINVAL, OP ": input zero point %d outside [%d, %d]", p->x_zp, dt_min(p->x_dtype),
                       dt_max(p->x_dtype));
    if (p->y_zp < dt_min(p->y_dtype) || p->y_zp > dt_max(p->y_dtype))
        return tsr_err(TSR_EINVAL, OP ": output zero point %d outside [%d, %d]", p->y_zp, dt_min(p->y_dtype),
                       dt_max(p->y_dtype));
    if (!p->w_zp || (p->w_zp_count != 1 && p->w_zp_count != p->c_out))
        return tsr_err(TSR_EINVAL, OP ": weight zero points: need 1 or C_out = %d values, got %d%s", p->c_out,
                       p->w_zp_count, p->w_zp ? "" : " (NULL)");
    for (int i = 0; i < p->w_zp_count; i++)
        if (p->w_zp[i] < dt_min(p->w_dtype) || p->w_zp[i] > dt_max(p->w_dtype))
            return tsr_err(TSR_EINVAL, OP ": weight zero point [%d] = %d outside [%d, %d]", i, p->w_zp[i],
                           dt_min(p->w_dtype), dt_max(p->w_dtype));
    if (!p->mult || !p->shift || (p->rq_count != 1 && p->rq_count != p->c_out))
        return tsr_err(TSR_EINVAL, OP ": requantization: need 1 or C_out = %d (multiplier, shift) pairs, got %d%s",
                       p->c_out, p->rq_count, p->mult && p->shift ? "" : " (NULL)");
    for (int i = 0; i < p->rq_count; i++) {
        if (p->mult[i] < 0)
            return tsr_err(TSR_EINVAL, OP ": multiplier [%d] = %d is negative", i, p->mult[i]);
        if (p->shift[i] < -31 || p->shift[i] > 30)
            return tsr_err(TSR_EINVAL, OP ": shift [%d] = %d outside [-31, 30]", i, p->shift[i]);
    }
    if (p->act_min > p->act_max || p->act_min < dt_min(p->y_dtype) || p->act_max > dt_max(p->y_dtype))
        return tsr_err(TSR_EINVAL, OP ": activation range [%d, %d] is not a non-empty subrange of [%d, %d]",
                       p->act_min, p->act_max, dt_min(p->y_dtype), dt_max(p->y_dtype));
    int64_t sh = (int64_t)p->h + p->pad_top + p->pad_bottom - p->kh;
    int64_t sw = (int64_t)p->w + p->pad_left + p->pad_right - p->kw;
    if (sh < 0 || sw < 0)
        return tsr_err(TSR_EINVAL, OP ": kernel %dx%d larger than the padded input %lldx%lld", p->kh, p->kw,
                       (long long)p->h + p->pad_top + p->pad_bottom, (long long)p->w + p->pad_left + p->pad_right);
    int64_t total = (int64_t)p->n * p->c_in * p->h * p->w;
    int64_t wtotal = (int64_t)p->c_out * (p->groups == 1 ? p->c_in : 1) * p->kh * p->kw;
    if (total > INT32_MAX || wtotal > INT32_MAX)
        return tsr_err(TSR_EINVAL, OP ": tensor too large (more than 2^31 - 1 elements)");
    if (oh)
        *oh = (int)(sh / p->stride_h + 1);
    if (ow)
        *ow = (int)(sw / p->stride_w + 1);
    return TSR_OK;
}

/* ---------------------------------------------------------------- stream */

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
    int nuops;          /* uops of those kernels */
} ibuf_t;

/* A resident-mode kernel: GEMM (input slot, output blocks [c0, c1) of chunk
 * j, acc region pa) or ALU (region pa, constants of block c0). */
typedef struct res_kern {
    int16_t alu, pa, islot, c0, c1, j;
    int32_t base, n;    /* first uop, uops */
} res_kern_t;


/* Row geometry of a row tile. */
typedef struct {
    int oy0, toh;            /* first output row, rows in this tile */
    int rows;                /* on-chip input rows per channel block (pads included) */
    int pad0, real, pad1;    /* rows of top padding, DRAM rows, bottom padding */
    int iy_first;            /* first DRAM input row loaded */
} rowgeo_t;

typedef struct {
    int toh, tco, tci, co_inner;
    int res;      /* resident mode (build_res): weights and constants stay on chip, input blocks are
                     cached in slots, tiles may differ in output-channel blocks */
    int kq;       /* resident mode: load stage lookahead in steps (tokens) */
    int tail;     /* resident mode: the last row tile's channel tiles shrink by halves (short tail) */
    int tow;      /* output columns per tile (OW, or fewer when a row does not fit) */
    int nbi, nba; /* buffers in the inp/wgt rotation (2 = double buffering, or 1) and in the acc
                     rotation (4: requantization and stores both overlap the next GEMMs, 2, or 1) */
} tiling_t;

/* Everything the emitter needs, derived once per plan. */
typedef struct {
    const tsr_config_t *c;
    const tsr_conv2d_params_t *p;
    int oh, ow, nb, cib, cob, dw, kk, nconst;
    int has_shl_row;
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
    uint32_t x_el, w_el, y_el, c_el, uop_el;
} geo_t;

/* Column geometry of a column tile: the last one is shifted left to keep
 * TOW columns (it recomputes a few columns of its neighbour, and stores
 * the same values again), so every tile's on-chip row is WR long. */
typedef struct {
    int ox0;                 /* first output column */
    int pad0, real, pad1;    /* elements of left padding, DRAM elements, right padding */
    int ix_first;            /* first DRAM input column loaded */
} colgeo_t;

static void col_tile(const geo_t *g, int wt, colgeo_t *cg)
{
    const tsr_conv2d_params_t *p = g->p;
    cg->ox0 = imin(wt * g->t.tow, g->ow - g->t.tow);
    tsr_span_t sp;
    tsr_span(cg->ox0 * p->stride_w - p->pad_left, g->wr, 1, p->w, &sp);
    cg->pad0 = sp.pad0;
    cg->real = sp.real;
    cg->pad1 = sp.pad1;
    cg->ix_first = sp.first;
}

static void row_tile(const geo_t *g, int rt, rowgeo_t *r)
{
    const tsr_conv2d_params_t *p = g->p;
    r->oy0 = rt * g->t.toh;
    r->toh = imin(g->t.toh, g->oh - r->oy0);
    r->rows = g->row_step == 1 ? (r->toh - 1) * p->stride_h + p->kh : r->toh;
    tsr_span_t sp;
    tsr_span(r->oy0 * p->stride_h - p->pad_top, r->rows, g->row_step, p->h, &sp);
    r->pad0 = sp.pad0;
    r->real = sp.real;
    r->pad1 = sp.pad1;
    r->iy_first = sp.first;
}

/* Kernel (uop range) for GEMM of acc half pa, inp/wgt half q, block cl. */
/* Uop buffer: first the ALU uops of each acc region (1 + NCONST each), then
 * the GEMM kernels of the (inp slot, wgt slot, acc region) sets the stream
 * uses, numbered in order of first use. */
static uint32_t kern_base(const geo_t *g, ibuf_t *b, int qi, int qw, int pa, int cl)
{
    if (!b->set_map[qi][qw][pa])
        b->set_map[qi][qw][pa] = (int8_t)++b->n_sets;
    int set = b->set_map[qi][qw][pa] - 1;
    return (uint32_t)(g->t.nba * (1 + g->nconst) + (set * g->t.tco + cl) * g->nci * g->kk);
}
static int n_uops_sets(const geo_t *g, int sets)
{
    return g->t.nba * (1 + g->nconst) + sets * g->t.tco * g->nci * g->kk;
}
static int n_uops(const geo_t *g) { return g->t.res ? g->nuops_res : n_uops_sets(g, g->n_sets); }

/* Resident mode: uop base of a kernel, appended on first use. */
static uint32_t res_kernel(ibuf_t *b, int alu, int pa, int islot, int c0, int c1, int j, int n)
{
    for (int i = 0; i < b->nkern; i++) {
        const res_kern_t *k = &b->kern[i];
        if (k->alu == alu && k->pa == pa && k->islot == islot && k->c0 == c0 && k->c1 == c1 && k->j == j)
            return (uint32_t)k->base;
    }
    if (b->nkern == b->capk) {
        int cap = b->capk ? b->capk * 2 : 64;
        res_kern_t *v = realloc(b->kern, (size_t)cap * sizeof *v);
        if (!v) {
            b->s.rc = TSR_ENOMEM;
            return 0;
        }
        b->kern = v;
        b->capk = cap;
    }
    b->kern[b->nkern++] = (res_kern_t){(int16_t)alu, (int16_t)pa, (int16_t)islot, (int16_t)c0, (int16_t)c1,
                                       (int16_t)j, b->nuops, n};
    b->nuops += n;
    return (uint32_t)(b->nuops - n);
}

/* Resident mode: each bank's constant copy is split in sections, one per
 * constant row kind k (bias, M, rqfin[, shifts]), each holding the rows of
 * all output blocks in block order, or a single row when the value is the
 * same for every channel (per-tensor requantization: only the bias differs). */
static int sec_shared(int rq_count, int k) { return k > 0 && rq_count == 1; }
static int sec_off(int rq_count, int cob, int k)
{
    int o = 0;
    for (int i = 0; i < k; i++)
        o += sec_shared(rq_count, i) ? 1 : cob;
    return o;
}
static int res_shared(const geo_t *g, int k) { return sec_shared(g->p->rq_count, k); }
static int res_sec_off(const geo_t *g, int k) { return sec_off(g->p->rq_count, g->cob, k); }
/* source row step per output block of constant row k (0 when shared) */
static uint32_t const_step(const geo_t *g, int k)
{
    return g->t.res ? (uint32_t)!res_shared(g, k) : (uint32_t)g->nconst;
}

/* ALU uop of region pa: k = -1 the imm uop, else constant row k (of output
 * block c0 in resident mode, whose constants live in the bank's copy). */
static uint32_t alu_uop_b(const geo_t *g, ibuf_t *b, int pa, int c0, int k)
{
    if (!g->t.res)
        return (uint32_t)(pa * (1 + g->nconst) + 1 + k);
    return res_kernel(b, 1, pa, 0, c0, c0, 0, 1 + g->nconst) + (uint32_t)(1 + k);
}
/* Accumulator bank (index MSB) region pa lies in, -1 if it spans both. */
static int acc_bank(const geo_t *g, int pa)
{
    return g->t.nba == 4 ? pa % 2 : g->t.nba == 2 ? pa : -1;
}
/* Accumulator region pa. With four regions, consecutive tiles alternate
 * between the two accumulator banks (index MSB): region pa lies in bank
 * pa % 2, so the GEMMs of tile t+1 and the requantization of tile t always
 * use different banks and the compute stage runs them at once. */
static uint32_t acc_base(const geo_t *g, int pa)
{
    if (g->t.res)
        return (uint32_t)((pa % 2) * (int)(g->c->acc_depth / 2) + (pa / 2) * g->region_rows);
    if (g->t.nba == 4)
        return (uint32_t)((pa % 2) * (int)(g->c->acc_depth / 2) + (pa / 2) * g->acc_half);
    return (uint32_t)(pa * g->acc_half);
}
/* Constant rows of region pa. With four regions the two regions of a bank
 * share one copy (loaded once per bank, not per region). */
static int const_slot(const geo_t *g, int pa) { return g->t.nba == 4 ? pa % 2 : pa; }
static uint32_t const_base(const geo_t *g, int pa)
{
    return acc_base(g, const_slot(g, pa)) + (uint32_t)(g->t.tco * g->t.toh * g->t.tow);
}


/* Resident mode: one tile (batch block, row x column tile, output blocks
 * [c0, c1)) of the tile sequence. */
typedef struct {
    int nb, rw, c0, c1;
} res_tile_t;

/* The resident-mode tile sequence (into out unless NULL); returns its length.
 * Per row tile, output-channel tiles of TCO blocks; with t.tail the last
 * row tile ends in tiles of halving size (8, 4, 2, 1, 1 blocks), so that
 * the requantization and store left after the last GEMM are short. */
static int res_tiles(const geo_t *g, res_tile_t *out)
{
    const int n_rw = g->n_rt * g->n_wt, tco = g->t.tco;
    int n = 0;
    for (int nb = 0; nb < g->nb; nb++)
        for (int rw = 0; rw < n_rw; rw++) {
            const int last = g->t.tail && nb == g->nb - 1 && rw == n_rw - 1;
            int c = 0;
            while (c < g->cob) {
                int rem = g->cob - c, sz = imin(tco, rem);
                if (last && rem <= tco)
                    sz = rem > 1 ? (rem + 1) / 2 : 1;
                if (out)
                    out[n] = (res_tile_t){nb, rw, c, c + sz};
                n++;
                c += sz;
            }
        }
    return n;
}

static void set_tiling(geo_t *g, const tiling_t *t)
{
    const tsr_conv2d_params_t *p = g->p;
    g->t = *t;
    g->row_step = (p->kh == 1 && p->stride_h > 1) ? p->stride_h : 1;
    g->rows_in = g->row_step == 1 ? (t->toh - 1) * p->stride_h + p->kh : t->toh;
    g->n_rt = cdiv(g->oh, t->toh);
    g->n_wt = cdiv(g->ow, t->tow);
    g->wr = (t->tow - 1) * p->stride_w + p->kw;
    g->n_ct = cdiv(g->cob, t->tco);
    g->chunks = cdiv(g->dw ? g->wsplit : g->cib, t->tci); /* depthwise: chunks of weight parts */
    g->tiles = g->nb * g->n_rt * g->n_wt * g->n_ct;
    g->steps = g->tiles * g->chunks;
    g->nci = t->tci; /* uops per output block and tap: input blocks, or (depthwise) weight parts */
    /* With one chunk per tile and equal rotations, step s = tile t: the
     * inp/wgt buffer and the acc buffer always agree. */
    /* one kernel per (input slot, weight slot, acc region): the input and
     * weight buffers rotate independently, each when its contents change */
    g->kern_sets = t->nbi * t->nbi * t->nba;
    g->inp_half = (int)g->c->inp_depth / t->nbi;
    g->wgt_half = (int)g->c->wgt_depth / t->nbi;
    g->acc_half = (int)g->c->acc_depth / t->nba;
    if (t->res) {
        g->islot_sz = t->tci * g->rows_in * g->wr;
        g->n_islot = g->islot_sz > 0 ? (int)g->c->inp_depth / g->islot_sz : 0;
        if (g->n_islot > 64)
            g->n_islot = 64;
        g->const_off = (int)g->c->acc_depth / 2 - res_sec_off(g, g->nconst);
        g->region_rows = g->const_off / (t->nba / 2 > 0 ? t->nba / 2 : 1);
        g->kq = t->kq ? t->kq : 2;
        g->tiles = res_tiles(g, NULL);
        g->steps = g->tiles * g->chunks;
    }
}

/* Does tiling t fit the buffers, the uop buffer and the loop fields? */
static int tiling_fits(const geo_t *g0, const tiling_t *t)
{
    geo_t g = *g0;
    set_tiling(&g, t);
    const tsr_config_t *c = g.c;
    const tsr_conv2d_params_t *p = g.p;
    long in_blocks = g.dw ? t->tco : t->tci;
    const long tow = t->tow;
    if (t->res) {
        /* weights of every chunk on chip at once, >= 2 input slots, a tile
         * in a region below the bank's constant copy (the uop count is
         * checked after the stream is built) */
        if (g.dw || (t->nba != 2 && t->nba != 4) || c->dep_queue_depth < 4 || g.n_islot < 2 ||
            g.region_rows <= 0 || (long)g.chunks * g.cob * t->tci * g.kk > (long)c->wgt_depth ||
            (long)t->tco * t->toh * tow > g.region_rows)
            return 0;
    } else {
        if (in_blocks * g.rows_in * (long)g.wr > g.inp_half)
            return 0;
        if ((long)t->tco * g.nci * g.kk > g.wgt_half)
            return 0;
        if ((long)t->tco * (t->toh * tow + g.nconst) > g.acc_half)
            return 0;
        long nuops = n_uops_sets(&g, g.kern_sets); /* at most every set */
        if (nuops > (long)c->uop_depth)
            return 0;
    }
    const long loop_max = (1L << TSR_LOOP_BITS) - 1;
    if (t->toh > loop_max || tow > loop_max || (long)t->toh * tow > loop_max || t->tco > loop_max)
        return 0;
    long sfo = g.row_step == 1 ? (long)p->stride_h * g.wr : g.wr;
    if (t->toh > 1 && (tow > tsr_isa_field_max(c, TSR_OP_GEMM, "dst_factor_out") ||
                       sfo > tsr_isa_field_max(c, TSR_OP_GEMM, "src_factor_out")))
        return 0;
    if (tow > 1 && (p->stride_w > tsr_isa_field_max(c, TSR_OP_GEMM, "src_factor_in") ||
                     1 > tsr_isa_field_max(c, TSR_OP_GEMM, "dst_factor_in")))
        return 0;
    if (t->tco > 1 && ((long)t->toh * tow > tsr_isa_field_max(c, TSR_OP_ALU, "dst_factor_out") ||
                       g.nconst > tsr_isa_field_max(c, TSR_OP_ALU, "src_factor_out")))
        return 0;
    return 1;
}

/* One requantization step: ALU op, constant row k (-1: immediate imm). */
typedef struct {
    uint32_t op;
    int k;
    int32_t imm;
} alu_step_t;

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
/* The requantization ALU steps: shr (left, if any shift is positive), mulhr
 * by M, then rqfin (rounding right shift, + y_zp, clamp) with its packed
 * row. Returns their number. */
static int post_seq(const geo_t *g, alu_step_t seq[3])
{
    int ns = 0;
    if (g->has_shl_row)
        seq[ns++] = (alu_step_t){TSR_ALU_SHR, 2, 0};
    else if (g->shl_imm)
        seq[ns++] = (alu_step_t){TSR_ALU_SHR, -1, -g->shl_imm};
    seq[ns++] = (alu_step_t){TSR_ALU_MULHR, 1, 0};
    seq[ns++] = (alu_step_t){TSR_ALU_RQFIN, 2 + g->has_shl_row, 0};
    return ns;
}

/* Emit requantization steps [k0, k1) of tile pt and, when k1 is the last,
 * its STOREs (a tile's steps may be spread over the next tile's GEMMs). */
static void emit_post_part(const geo_t *g, ibuf_t *b, const post_t *pt, int k0, int k1)
{
    const int TOH = g->t.toh, OW = g->t.tow, FULL_OW = g->ow, NBA = g->t.nba;
    const int pa = pt->pa, tco = pt->tco, cob0 = pt->cob0, nb = pt->nb, t = pt->t;
    const rowgeo_t r = pt->r;
    const colgeo_t cg = pt->cg;
    tsr_insn_t *in;
    b->s.cur_tag = acc_bank(g, pa);
    alu_step_t seq[3];
    const int ns = post_seq(g, seq);
    for (int k = k0; k < k1; k++) {
        const uint32_t u = alu_uop_b(g, b, pa, cob0, seq[k].k);
        in = tsr_stream_alu(&b->s, seq[k].op, u, u + 1);
        in->iter_out = (uint32_t)tco;
        in->dst_factor_out = tco > 1 ? (uint32_t)(TOH * OW) : 0;
        in->src_factor_out = tco > 1 && seq[k].k >= 0 ? const_step(g, seq[k].k) : 0;
        in->iter_in = (uint32_t)(r.toh * OW);
        in->dst_factor_in = 1;
        in->use_imm = seq[k].k < 0;
        in->imm = seq[k].k < 0 ? seq[k].imm : 0;
        if (k == ns - 1) /* the tile is ready for STORE */
            tsr_stream_signal(&b->s, TSR_Q_CMP2ST);
    }
    if (k1 < ns)
        return;
    /* ---- store stage ---- */
    const long plane = (long)g->oh * FULL_OW;
    const int full_rows = OW == FULL_OW;
    int one = full_rows && (r.toh == TOH || tco == 1);
    if (tco > 1 && plane > 0xffff)
        one = 0;
    int nst = one ? 1 : tco;
    tsr_stream_wait(&b->s, TSR_Q_CMP2ST);
    for (int k = 0; k < nst; k++) {
        const uint32_t x = (uint32_t)(full_rows ? r.toh * OW : OW);
        tsr_stream_store(&b->s, acc_base(g, pa) + (uint32_t)(k * TOH * OW),
                         g->y_el + (uint32_t)((((long)nb * g->cob + cob0 + k) * g->oh + r.oy0) * FULL_OW + cg.ox0),
                         (uint32_t)(full_rows ? (one ? tco : 1) : r.toh), x,
                         full_rows ? (one && tco > 1 ? (uint32_t)plane : x) : (uint32_t)FULL_OW);
    }
    if (t < g->tiles - NBA || t == g->tiles - 1) /* region pa drained, for tile t+NBA or FINISH */
        tsr_stream_signal(&b->s, TSR_Q_ST2CMP);
}

static void emit_post(const geo_t *g, ibuf_t *b, const post_t *pt)
{
    alu_step_t seq[3];
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
    const uint32_t u = alu_uop_b(g, b, pa, c0, 0);
    if (t >= g->t.nba) /* region pa drained by tile t-NBA's STORE */
        tsr_stream_wait(&b->s, TSR_Q_ST2CMP);
    tsr_insn_t *in = tsr_stream_alu(&b->s, TSR_ALU_MOV, u, u + 1);
    in->iter_out = (uint32_t)tco;
    in->dst_factor_out = tco > 1 ? (uint32_t)(g->t.toh * g->t.tow) : 0;
    in->src_factor_out = tco > 1 ? const_step(g, 0) : 0;
    in->iter_in = (uint32_t)(toh * g->t.tow);
    in->dst_factor_in = 1;
}

/* Output-channel tile, channel blocks and rows of tile t (loop order of build()). */
static void tile_of(const geo_t *g, int t, int *ct, int *tco, int *toh)
{
    const int n_rw = g->n_rt * g->n_wt;
    const int inner_n = g->t.co_inner ? g->n_ct : n_rw;
    const int i1 = t % inner_n, o1 = t / inner_n % (g->t.co_inner ? n_rw : g->n_ct);
    const int rw = g->t.co_inner ? o1 : i1;
    *ct = g->t.co_inner ? i1 : o1;
    *tco = imin(g->t.tco, g->cob - *ct * g->t.tco);
    rowgeo_t r;
    row_tile(g, rw / g->n_wt, &r);
    *toh = r.toh;
}

/* Emit the whole stream for g's tiling. */
static void build(const geo_t *g, ibuf_t *b)
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
                row_tile(g, rt, &r);
                col_tile(g, wt, &cg);
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
                    long wkey = ct;
                    int reuse = g->chunks == 1;
                    if (!(reuse && cur_ikey == ikey)) {
                        islot = (islot + 1) % NBI;
                        for (int j = 0; j < nin; j++)
                            emit_inp_block(g, b, (uint32_t)(islot * g->inp_half + j * g->rows_in * g->wr),
                                           nb * g->cib + cib0 + j, &r, &cg);
                        cur_ikey = ikey;
                    }
                    if (!(reuse && cur_wkey == wkey)) {
                        wslot = (wslot + 1) % NBI;
                        const int wq = wslot;
                        if (g->dw) {
                            /* the chunk's weight parts of each block (DRAM
                             * [block][part][tap]; TCI divides the parts) */
                            tsr_stream_load(&b->s, TSR_MEM_WGT, (uint32_t)(wq * g->wgt_half),
                                            g->w_el + (uint32_t)((cob0 * g->wsplit + ch * TCI) * g->kk), (uint32_t)tco,
                                            (uint32_t)(TCI * g->kk), (uint32_t)(g->wsplit * g->kk));
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
                    b->s.cur_tag = acc_bank(g, pa);
                    if (ch == 0) {
                        if (const_key[const_slot(g, pa)] != ct) {
                            tsr_stream_load(&b->s, TSR_MEM_ACC, const_base(g, pa), g->c_el + (uint32_t)(cob0 * g->nconst),
                                            1, (uint32_t)(tco * g->nconst), (uint32_t)(tco * g->nconst));
                            const_key[const_slot(g, pa)] = ct;
                        }
                        if (mov_done != t)
                            emit_mov(g, b, t, pa, cob0, tco, r.toh);
                    }
                    /* The kernels of the tile's output blocks are contiguous
                     * in the uop buffer: with a full chunk one GEMM covers
                     * them all (one long instruction the ALU pipe can run
                     * beside), else one GEMM per block. */
                    const int per_blk = (g->dw ? g->nci : nin) * g->kk;
                    const int one_gemm = g->dw || nin == g->nci;
                    /* with weight groups: one GEMM per group (or per block), and
                     * each group's first pops its token */
                    const int ngemm = one_gemm ? ngrp : tco;
                    for (int cl = 0; cl < ngemm; cl++) {
                        const int c0 = one_gemm ? cl * tco / ngrp : cl, c1 = one_gemm ? (cl + 1) * tco / ngrp : cl + 1;
                        int grp_start = one_gemm;
                        for (int gi = 0; gi < ngrp && !grp_start; gi++)
                            grp_start = cl == gi * tco / ngrp;
                        if (grp_start) /* the (group's) data is in */
                            tsr_stream_wait(&b->s, TSR_Q_LD2CMP);
                        const uint32_t kb = kern_base(g, b, islot, wslot, pa, c0);
                        in = tsr_stream_gemm(&b->s, kb, kb + (uint32_t)(per_blk * (c1 - c0)), 0);
                        in->iter_out = (uint32_t)r.toh;
                        in->dst_factor_out = r.toh > 1 ? (uint32_t)OW : 0;
                        in->src_factor_out = r.toh > 1 ? (uint32_t)sfo : 0;
                        in->iter_in = (uint32_t)OW;
                        in->dst_factor_in = OW > 1 ? 1 : 0;
                        in->src_factor_in = OW > 1 ? (uint32_t)p->stride_w : 0;
                        if (cl == ngemm - 1 && s < g->steps - NBI) /* the step's slots are free again */
                            tsr_stream_signal(&b->s, TSR_Q_CMP2LD);
                    }
                    if (ch == 0 && NBA == 4 && t + 1 < g->tiles) {
                        /* Open the next tile now (its region was stored three
                         * tiles ago), so its MOV runs before the ALU pipe
                         * waits in the previous tile's final push; only when
                         * its constants are already on chip. */
                        int nct, ntco, ntoh;
                        tile_of(g, t + 1, &nct, &ntco, &ntoh);
                        const int npa = (t + 1) % NBA;
                        if (const_key[const_slot(g, npa)] == nct) {
                            b->s.cur_tag = acc_bank(g, npa);
                            emit_mov(g, b, t + 1, npa, nct * TCO, ntco, ntoh);
                            mov_done = t + 1;
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
    tsr_stream_set_uops(&b->s, uop_load, (uint32_t)n_uops_sets(g, b->n_sets));
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
    const int nbias = res_sec_off(g, 1), all = res_sec_off(g, g->nconst);
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
    row_tile(g, tl[t].rw / g->n_wt, &r);
    b->s.cur_tag = acc_bank(g, pa);
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
static void build_res(const geo_t *g, ibuf_t *b)
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
    res_tiles(g, tl);
    for (int x = 0; x < NI; x++) {
        skey[x] = -1;
        slast[x] = -1;
    }
    int popped = 0, mov_done = -1, cst[2] = {0, 0};
    int grp_budget = (int)c->dep_queue_depth - 1 - KQ; /* extra load->compute tokens within any KQ steps */
    post_t pend = {0};

    const size_t uop_load = tsr_stream_uops(&b->s, g->uop_el, 1); /* length set once the kernels in use are known */

    /* bank 0's bias rows (the first MOV's operand) next; the rest of the
     * constants is not needed before the first requantization and loads
     * later, beside GEMMs of the other bank */
    res_const_rows(g, b, 0, 0, res_sec_off(g, 1));
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
        row_tile(g, rw / g->n_wt, &r);
        col_tile(g, rw % g->n_wt, &cg);
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
            b->s.cur_tag = acc_bank(g, pa);
            if (ch == 0) {
                if (mov_done != t) {
                    res_consts(g, b, cst, pa % 2, 1);
                    emit_mov(g, b, t, pa, cob0, tco, r.toh);
                }
            }
            /* the kernel runs input block by input block (all output blocks
             * each), so a group of blocks is a uop range */
            const int per_in = tco * g->kk;
            const uint32_t kb = res_kernel(b, 0, pa, islot, cob0, cob0 + tco, ch, nin * per_in);
            for (int gi = 0; gi < ngrp; gi++) {
                const int i0 = gi * nin / ngrp, i1 = (gi + 1) * nin / ngrp;
                tsr_stream_wait(&b->s, TSR_Q_LD2CMP);
                in = tsr_stream_gemm(&b->s, kb + (uint32_t)(i0 * per_in), kb + (uint32_t)(i1 * per_in), 0);
                in->iter_out = (uint32_t)r.toh;
                in->dst_factor_out = r.toh > 1 ? (uint32_t)OW : 0;
                in->src_factor_out = r.toh > 1 ? (uint32_t)sfo : 0;
                in->iter_in = (uint32_t)OW;
                in->dst_factor_in = OW > 1 ? 1 : 0;
                in->src_factor_in = OW > 1 ? (uint32_t)p->stride_w : 0;
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
                alu_step_t seq[3];
                const int ns = post_seq(g, seq);
                if (ch == 0)
                    res_consts(g, b, cst, pend.pa % 2, 2);
                const int k0 = imin(ch, ns), k1 = ch == g->chunks - 1 ? ns : imin(ch + 1, ns);
                if (k1 > k0)
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

/* ------------------------------------------------------ timing estimate */

/* Cycles the stream takes on the accelerator, estimated in one pass in
 * program order (every token a stream pops was pushed by an earlier
 * instruction): the load and store stages and the compute stage's two pipes
 * each keep a clock, a shared DRAM port moves `bw` bytes per cycle with
 * `lat` cycles of latency, GEMM/ALU take one cycle per tensor op, a GEMM and
 * an ALU instruction overlap when they use different accumulator banks
 * (hw/ARCHITECTURE.md), pushes wait for every older compute instruction.
 * It is the cost the tiling search minimises: a model, not a promise (the
 * bench prints the measured cycles beside it). */
#define EST_LAT 32.0
#define EST_PIPE 6.0
#define EST_ROW 32.0
/* Cycles a DRAM byte costs in the tiling search beyond its time: among
 * near-equal schedules prefer the one that moves less data. */
#define BYTE_WEIGHT 0.01

typedef struct {
    double *t;
    size_t n, cap, next;
} tokq_t;

static int tq_push(tokq_t *q, double t)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        double *v = realloc(q->t, cap * sizeof *v);
        if (!v)
            return -1;
        q->t = v;
        q->cap = cap;
    }
    q->t[q->n++] = t;
    return 0;
}

/* The DRAM port's busy intervals, sorted and merged: a transfer requested at
 * t0 takes the first gap from t0 on that is long enough, so a load issued
 * early is not queued behind a store that program order put first. */
typedef struct {
    double (*iv)[2];
    size_t n, cap;
    int oom;
} dram_t;

static double dram_book(dram_t *d, double t0, double len)
{
    if (len <= 0)
        return t0;
    size_t i = 0;
    /* skip intervals that end before t0 (binary search on the sorted ends) */
    size_t lo = 0, hi = d->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (d->iv[mid][1] <= t0)
            lo = mid + 1;
        else
            hi = mid;
    }
    i = lo;
    double start = t0;
    while (i < d->n && d->iv[i][0] < start + len) {
        start = fmax(start, d->iv[i][1]);
        i++;
    }
    /* [start, start+len) goes before interval i; merge with neighbours */
    double e = start + len;
    if (i > 0 && d->iv[i - 1][1] >= start) {
        d->iv[i - 1][1] = e;
        if (i < d->n && d->iv[i][0] <= e) {
            d->iv[i - 1][1] = d->iv[i][1];
            memmove(&d->iv[i], &d->iv[i + 1], (d->n - i - 1) * sizeof d->iv[0]);
            d->n--;
        }
        return e;
    }
    if (i < d->n && d->iv[i][0] <= e) {
        d->iv[i][0] = start;
        return e;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        double(*v)[2] = realloc(d->iv, cap * sizeof *v);
        if (!v) {
            d->oom = 1;
            return e;
        }
        d->iv = v;
        d->cap = cap;
    }
    memmove(&d->iv[i + 1], &d->iv[i], (d->n - i) * sizeof d->iv[0]);
    d->iv[i][0] = start;
    d->iv[i][1] = e;
    d->n++;
    return e;
}

static double estimate_cycles(const geo_t *g, const ibuf_t *b)
{
    dram_t dr = {0};
    const tsr_config_t *c = g->c;
    const double bw = c->dram_bus_width / 8.0;
    enum { L2C, C2L, C2S, S2C, NQ };
    tokq_t q[NQ];
    memset(q, 0, sizeof q);
    double tl = 0, ts = 0, disp = 0, dram = 0, older = 0, total = 0;
    double pipe[2] = {0, 0}, last_bank[2][2] = {{0, 0}, {0, 0}};
    int bad = 0;
    for (size_t i = 0; i < b->s.n && !bad; i++) {
        const tsr_insn_t *in = &b->s.v[i];
        const int st = in->opcode == TSR_OP_STORE ? 2
                       : in->opcode == TSR_OP_LOAD && (in->mem_type == TSR_MEM_INP || in->mem_type == TSR_MEM_WGT) ? 0
                                                                                                                  : 1;
        double ready = st == 0 ? tl : st == 2 ? ts : disp;
        const int qp = st == 0 ? -1 : st == 1 ? L2C : C2S, qn = st == 0 ? C2L : st == 1 ? S2C : -1;
        if (in->pop_prev && qp >= 0) {
            if (q[qp].next >= q[qp].n) { bad = 1; break; }
            ready = fmax(ready, q[qp].t[q[qp].next++]);
        }
        if (in->pop_next && qn >= 0) {
            if (q[qn].next >= q[qn].n) { bad = 1; break; }
            ready = fmax(ready, q[qn].t[q[qn].next++]);
        }
        double end = ready, push = ready;
        if (in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE) {
            double bytes = (double)in->y_size * in->x_size * tsr_config_elem_bytes(c, (int)in->mem_type);
            double start = ready;
            /* compute loads wait for both pipes, an acc LOAD without pushes
             * only for the banks it writes */
            const int acc_nb = st == 1 && bytes > 0 && !in->push_prev && !in->push_next &&
                               (in->mem_type == TSR_MEM_ACC || in->mem_type == TSR_MEM_ACC8);
            int lbk[2] = {1, 1};
            if (acc_nb) {
                const uint32_t half = c->acc_depth / 2,
                               last = in->sram_base + (in->y_pad0 + in->y_size + in->y_pad1) *
                                                         (in->x_pad0 + in->x_size + in->x_pad1) - 1;
                lbk[0] = in->sram_base < half;
                lbk[1] = last >= half;
                for (int k = 0; k < 2; k++)
                    if (lbk[k])
                        start = fmax(start, fmax(last_bank[0][k], last_bank[1][k]));
            } else if (st == 1) {
                start = fmax(start, fmax(pipe[0], pipe[1]));
            }
            /* every row of a LOAD is its own burst: a row takes at least
             * EST_ROW cycles (the port's outstanding requests over the
             * latency), a long one its transfer time */
            const double rows = in->opcode == TSR_OP_LOAD && st == 0 ? (double)in->y_size : 0;
            const double dt = rows > 0 ? rows * fmax(bytes / rows / bw, EST_ROW) : bytes / bw;
            dram = dram_book(&dr, start, dt);
            end = bytes > 0 ? dram + EST_LAT : start;
            if (st == 0) {
                tl = bytes > 0 ? dram : start;
                push = end;
            } else if (st == 2) {
                ts = end; /* a STORE waits for its write responses */
                push = end;
            } else {
                disp = end;
                if (acc_nb) {
                    for (int k = 0; k < 2; k++)
                        if (lbk[k])
                            last_bank[0][k] = last_bank[1][k] = end;
                } else {
                    pipe[0] = pipe[1] = end;
                }
                older = fmax(older, end);
                push = end;
            }
        } else if (in->opcode == TSR_OP_GEMM || in->opcode == TSR_OP_ALU) {
            const int u = in->opcode == TSR_OP_ALU;
            const int bk = b->s.tag ? b->s.tag[i] : -1;
            double start = fmax(ready, pipe[u]);
            if (bk < 0)
                start = fmax(start, pipe[1 - u]);
            else
                start = fmax(start, last_bank[1 - u][bk]);
            double ops = (double)in->iter_out * in->iter_in * (double)(in->uop_end - in->uop_bgn);
            end = start + ops + EST_PIPE;
            push = fmax(end, older);
            older = fmax(older, end);
            const int busy = in->push_prev || in->push_next;
            pipe[u] = busy ? push : end;
            for (int k = 0; k < 2; k++)
                if (bk < 0 || bk == k)
                    last_bank[u][k] = end;
            disp = start;
        } else { /* FINISH */
            end = fmax(ready, older);
            disp = end;
        }
        total = fmax(total, end);
        if (in->push_prev && st > 0 && tq_push(&q[st == 1 ? C2L : S2C], push))
            bad = 1;
        if (in->push_next && st < 2 && tq_push(&q[st == 0 ? L2C : C2S], push))
            bad = 1;
    }
    for (int k = 0; k < NQ; k++)
        free(q[k].t);
    free(dr.iv);
    return bad || dr.oom ? 1e30 : total;
}

/* Candidate values v of a tile size along a dimension of n blocks: the
 * smallest v for each distinct count ceil(n / v). */
static int candidates(int n, int *out)
{
    int k = 0;
    for (int v = 1; v <= n; v++)
        if (v == 1 || cdiv(n, v) != cdiv(n, v - 1))
            out[k++] = v;
    return k;
}

/* Per-instruction overhead of the cost model, in DRAM-byte equivalents
 * (16 bytes of fetch plus issue and DRAM latency of short transfers). */

/* Build tiling t's stream, estimate it and keep it in *bt if it is the
 * cheapest so far. */
static void consider(const geo_t *g, const tiling_t *t0, double *best, tiling_t *bt)
{
    tiling_t tt = *t0;
    const tiling_t *t = &tt;
    geo_t gg = *g;
    ibuf_t b = {0};
    tsr_stream_init(&b.s, g->c, 0, 1);
    if (t->res) {
        /* A deep lookahead (6 steps) evens out the first tile's loads; but
         * when the DRAM is the bottleneck it only lets reads run ahead of
         * the stores, which the memory then serves last, and the stores
         * free the accumulator regions: there, 2 steps. (The timing model
         * does not see this read priority, so the rule is explicit.) */
        tt.kq = imax(2, imin(6, (int)g->c->dep_queue_depth / 2 - 2));
        set_tiling(&gg, t);
        build_res(&gg, &b);
        double ops = 0;
        for (size_t i = 0; i < b.s.n && !b.s.rc; i++)
            if (b.s.v[i].opcode == TSR_OP_GEMM)
                ops += (double)b.s.v[i].iter_out * b.s.v[i].iter_in * (b.s.v[i].uop_end - b.s.v[i].uop_bgn);
        if (!b.s.rc && tt.kq > 2 && (double)b.s.bytes / (g->c->dram_bus_width / 8.0) > ops) {
            tsr_stream_free(&b.s);
            free(b.kern);
            memset(&b, 0, sizeof b);
            tsr_stream_init(&b.s, g->c, 0, 1);
            tt.kq = 2;
            gg = *g;
            set_tiling(&gg, t);
            build_res(&gg, &b);
        }
    } else {
        set_tiling(&gg, t);
        build(&gg, &b);
    }
    double cost = b.s.rc || b.nuops > (int)g->c->uop_depth
                      ? 1e30
                      : estimate_cycles(&gg, &b) + BYTE_WEIGHT * (double)b.s.bytes;
    tsr_stream_free(&b.s);
    free(b.kern);
    if (t->res && cost >= 1e30)
        return; /* too many uops (or out of memory): the other modes remain */
    if (*best < 0 || cost < *best) {
        *best = cost;
        *bt = *t;
    }
}

/* Tiling t with the tallest fitting tile height among the n_oh candidates
 * c_oh (ascending), and with one of about half that height, through
 * consider(); nothing if no height fits. */
static void consider_heights(const geo_t *g, tiling_t *t, const int *c_oh, int n_oh, double *best, tiling_t *bt)
{
    int a = n_oh - 1;
    for (; a >= 0; a--) {
        t->toh = c_oh[a];
        if (tiling_fits(g, t))
            break;
    }
    if (a < 0)
        return;
    const int tall = t->toh;
    consider(g, t, best, bt);
    int b2 = a;
    while (b2 > 0 && c_oh[b2] > (tall + 1) / 2)
        b2--;
    t->toh = c_oh[b2];
    if (c_oh[b2] != tall && tiling_fits(g, t))
        consider(g, t, best, bt);
}

static int choose_tiling(geo_t *g)
{
    int *ch = malloc(sizeof(int) * (size_t)(g->oh + g->cob + g->cib + 3));
    if (!ch)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int *c_oh = ch, *c_co = ch + g->oh + 1, *c_ci = c_co + g->cob + 1;
    int n_oh = candidates(g->oh, c_oh), n_co = candidates(g->cob, c_co);
    int n_ci = g->dw ? 1 : candidates(g->cib, c_ci);
    if (g->dw) { /* weight parts per chunk: all, or one at a time */
        c_ci[0] = g->wsplit;
        if (g->wsplit > 1)
            c_ci[n_ci++] = 1;
    }
    double best = -1;
    tiling_t bt = {.nbi = 2, .nba = 2};
    /* Double buffering of both rotations if any tiling allows it; else
     * single-buffer the inputs/weights, then the accumulators, then both
     * (loads or stores then serialise with compute, but the tile fits). */
    static const int nbs[5][2] = {{2, 4}, {2, 2}, {1, 2}, {2, 1}, {1, 1}};
    int *c_ow = malloc(sizeof(int) * (size_t)(g->ow + 1));
    if (!c_ow) {
        free(ch);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    int n_ow = candidates(g->ow, c_ow);
    /* Every buffering choice is evaluated: the estimate decides whether
     * four acc regions (requantization and stores off the critical path)
     * are worth their smaller tiles. */
    for (int nbo = 0; nbo < 5; nbo++) {
        if (nbs[nbo][1] == 4 && g->c->dep_queue_depth < 4)
            continue;
        if (nbo >= 2 && best >= 0)
            break; /* single-buffered fallbacks only when nothing else fits */
        for (int wpass = 0; wpass < 2 && (wpass == 0 || best < 0); wpass++) /* full rows first, then column tiles */
            for (int d = n_ow - 1; d >= 0; d--) {
                if ((c_ow[d] == g->ow) != (wpass == 0))
                    continue;
                /* for each of the other sizes the tallest fitting tile and
                 * one of about half its height are evaluated */
                for (int bco = n_co - 1; bco >= 0; bco--)
                    for (int cci = n_ci - 1; cci >= 0; cci--)
                        for (int order = 0; order < 2; order++) {
                            tiling_t t = {.tco = c_co[bco], .tci = c_ci[cci], .co_inner = order, .tow = c_ow[d],
                                          .nbi = nbs[nbo][0], .nba = nbs[nbo][1]};
                            consider_heights(g, &t, c_oh, n_oh, &best, &bt);
                        }
            }
    }
    /* resident mode (full rows): every chunk/channel-tile size, both
     * acc rotations, with and without the shrinking last tiles; not when
     * the best so far is within 0.5% of the GEMM work (nothing to gain,
     * and large layers would pay for many more stream builds) */
    const double gemm_ops = (double)g->nb * g->oh * g->ow * g->cob * (g->dw ? 1 : g->cib) * g->kk;
    const int try_res = !g->dw && !(best >= 0 && best < 1.005 * gemm_ops);
    for (int nba = 4; nba >= 2 && try_res; nba -= 2)
        for (int tail = 1; tail >= 0; tail--)
            for (int bco = n_co - 1; bco >= 0; bco--)
                for (int cci = n_ci - 1; cci >= 0; cci--) {
                    tiling_t t = {.tco = c_co[bco], .tci = c_ci[cci], .co_inner = 1, .res = 1, .tail = tail,
                                  .tow = g->ow, .nbi = 2, .nba = nba};
                    consider_heights(g, &t, c_oh, n_oh, &best, &bt);
                }
    free(c_ow);
    free(ch);
    if (best < 0) {
        const tsr_conv2d_params_t *p = g->p;
        return tsr_err(TSR_EINVAL,
                       OP ": no tiling fits the buffers: one output element needs %d input rows of %d elements "
                       "(%d on-chip rows, the input buffer holds %u), %d weight rows (buffer %u), "
                       "%d accumulator rows (buffer %u), within %u uops; tiling along W is not supported yet",
                       p->kh, p->kw, p->kh * p->kw, g->c->inp_depth, g->kk, g->c->wgt_depth, g->ow + g->nconst,
                       g->c->acc_depth, g->c->uop_depth);
    }
    set_tiling(g, &bt);
    return TSR_OK;
}

static int geo_init(const tsr_config_t *c, const tsr_conv2d_params_t *p, geo_t *g)
{
    memset(g, 0, sizeof *g);
    int rc = tsr_conv2d_check(p, &g->oh, &g->ow);
    if (rc)
        return rc;
    if (c->inp_width != 8 || c->wgt_width != 8 || c->acc_width != 32)
        return tsr_err(TSR_EINVAL, OP ": needs int8 inputs and weights and int32 accumulators (config has "
                       "int%d/int%d/int%d)", c->inp_width, c->wgt_width, c->acc_width);
    g->c = c;
    g->p = p;
    g->dw = p->groups != 1;
    if (g->dw && c->block_in != c->block_out)
        return tsr_err(TSR_EINVAL, OP ": depthwise needs BLOCK_IN == BLOCK_OUT (config has %d and %d)",
                       c->block_in, c->block_out);
    g->nb = cdiv(p->n, c->batch);
    g->wsplit = wsplit_of(p);
    /* groups 1: the parts meet copies of the input (more input blocks);
     * depthwise: each block's parts meet the block itself (more uops) */
    g->cib = cdiv(p->c_in * (g->dw ? 1 : g->wsplit), c->block_in);
    g->cob = cdiv(p->c_out, c->block_out);
    g->kk = p->kh * p->kw;
    g->h_pad = p->x_zp - (p->x_dtype == TSR_DT_UINT8 ? 128 : 0);
    int any_pos = 0;
    for (int i = 0; i < p->rq_count; i++)
        any_pos |= p->shift[i] > 0;
    if (p->rq_count > 1)
        g->has_shl_row = any_pos;
    else
        g->shl_imm = imax(p->shift[0], 0);
    g->nconst = 3 + g->has_shl_row;
    return TSR_OK;
}

/* ------------------------------------------------------------- packing */

static uint64_t x_elems(const geo_t *g) { return (uint64_t)g->nb * g->cib * g->p->h * g->p->w; }
static uint64_t w_elems(const geo_t *g) { return (uint64_t)g->cob * (g->dw ? g->wsplit : g->cib) * g->kk; }
static uint64_t y_elems(const geo_t *g) { return (uint64_t)g->nb * g->cob * g->oh * g->ow; }
static uint64_t c_elems(const geo_t *g) { return (uint64_t)g->cob * g->nconst; }

void tsr_conv2d_pack_input(const tsr_config_t *c, const tsr_conv2d_plan_t *pl, const void *x, uint8_t *dst)
{
    if (pl->tensors_owned) {
        tsr_dtensor_pack(&pl->xt, x, dst);
        return;
    }
    const tsr_conv2d_params_t *p = &pl->p;
    const int off = p->x_dtype == TSR_DT_UINT8 ? 128 : 0;
    memset(dst, (uint8_t)(int8_t)pl->h_pad, pl->x_bytes);
    /* with split weights (groups 1) the input channels appear wsplit times
     * (c, c_in + c, ...); depthwise parts all meet the one copy */
    const int copies = pl->depthwise ? 1 : pl->wsplit;
    for (int n = 0; n < p->n; n++)
        for (int ci = 0; ci < p->c_in * copies; ci++)
            for (int y = 0; y < p->h; y++)
                for (int xx = 0; xx < p->w; xx++) {
                    size_t i = (((size_t)n * p->c_in + (size_t)(ci % p->c_in)) * p->h + y) * p->w + xx;
                    size_t el = (((size_t)(n / c->batch) * pl->cib + (size_t)(ci / c->block_in)) * p->h + y) * p->w + xx;
                    size_t o = el * c->inp_bytes + (size_t)(n % c->batch) * c->block_in + (size_t)(ci % c->block_in);
                    dst[o] = (uint8_t)(int8_t)(dt_get(p->x_dtype, x, i) - off);
                }
}

int tsr_conv2d_pack_weights(const tsr_config_t *c, const tsr_conv2d_plan_t *pl, const void *w,
                            const int32_t *bias, uint8_t *wdst, uint8_t *cdst)
{
    const tsr_conv2d_params_t *p = &pl->p;
    const int dw = pl->depthwise, kk = p->kh * p->kw, cin_g = dw ? 1 : p->c_in;
    memset(wdst, 0, pl->w_bytes);
    memset(cdst, 0, pl->c_bytes);
    const int split = pl->wsplit; /* > 1: w - w_zp written as int8 parts (over copies of the input; depthwise:
                                     consecutive weight blocks that all meet the block's input) */
    for (int co = 0; co < p->c_out; co++) {
        int32_t zp = p->w_zp[p->w_zp_count == 1 ? 0 : co];
        int64_t sum = 0;
        if (split == 1 && !dw) {
            /* the common case (one int8 part, groups 1), with the block
             * arithmetic hoisted out of the tap loop: a network's weights
             * are packed once per plan, megabytes of them */
            const uint8_t *src = (const uint8_t *)w + (size_t)co * (size_t)cin_g * (size_t)kk;
            const int u8 = p->w_dtype == TSR_DT_UINT8;
            const size_t orow = (size_t)(co / c->block_out) * pl->cib, olane = (size_t)(co % c->block_out) * c->block_in;
            for (int ci = 0; ci < cin_g; ci++) {
                uint8_t *d = wdst + ((orow + (size_t)(ci / c->block_in)) * (size_t)kk) * c->wgt_bytes + olane +
                             (size_t)(ci % c->block_in);
                for (int k = 0; k < kk; k++) {
                    const int32_t v = (u8 ? (int32_t)src[(size_t)ci * kk + k] : (int32_t)(int8_t)src[(size_t)ci * kk + k]) - zp;
                    if (v < -128 || v > 127)
                        return tsr_err(TSR_EINVAL,
                                       OP ": weight w - w_zp = %d - %d = %d at [%d][%d][%d][%d] does not fit "
                                       "the plan (its weight zero points differ from these)",
                                       v + zp, zp, v, co, ci, k / p->kw, k % p->kw);
                    sum += v;
                    d[(size_t)k * c->wgt_bytes] = (uint8_t)(int8_t)v;
                }
            }
        }
        for (int part = 0; part < split && !(split == 1 && !dw); part++)
            for (int ci = 0; ci < cin_g; ci++)
                for (int k = 0; k < kk; k++) {
                    const size_t i = ((size_t)co * cin_g + (size_t)ci) * kk + (size_t)k;
                    int32_t v = dt_get(p->w_dtype, w, i) - zp;
                    if (split > 1) {
                        /* v in [-255, 255] = sum of `split` int8 parts of
                         * about v / split each (part j meets copy j of the
                         * input): v/2 + (v - v/2), or v/3 + ... */
                        if (part == 0)
                            sum += v;
                        for (int j = 0; j <= part; j++) {
                            int32_t pj = v / (split - j);
                            if (j == part) {
                                v = j == split - 1 ? v : pj;
                                break;
                            }
                            v -= pj;
                        }
                    } else {
                        if (v < -128 || v > 127) /* the plan's split covers every weight the dtype allows */
                            return tsr_err(TSR_EINVAL,
                                           OP ": weight w - w_zp = %d - %d = %d at [%d][%d][%d][%d] does not fit "
                                           "the plan (its weight zero points differ from these)",
                                           v + zp, zp, v, co, ci, k / p->kw, k % p->kw);
                        sum += v;
                    }
                    const int cie = part * p->c_in + ci; /* channel of the (doubled) input */
                    size_t el, o;
                    if (dw) {
                        el = ((size_t)(co / c->block_out) * (size_t)split + (size_t)part) * kk + k;
                        o = el * c->wgt_bytes + (size_t)(co % c->block_out) * c->block_in + (size_t)(co % c->block_out);
                    } else {
                        el = ((size_t)(co / c->block_out) * pl->cib + (size_t)(cie / c->block_in)) * kk + k;
                        o = el * c->wgt_bytes + (size_t)(co % c->block_out) * c->block_in + (size_t)(cie % c->block_in);
                    }
                    wdst[o] = (uint8_t)(int8_t)v;
                }
        int r = p->rq_count == 1 ? 0 : co;
        int32_t vals[4];
        int nv = 0;
        int64_t bp = (bias ? (int64_t)bias[co] : 0) - (int64_t)pl->h_pad * sum;
        vals[nv++] = (int32_t)(uint32_t)(uint64_t)bp; /* wrap32 */
        vals[nv++] = p->mult[r];
        if (pl->nconst > 3) /* per-channel left shifts (shr by a negative amount) */
            vals[nv++] = -imax(p->shift[r], 0);
        /* rqfin: right shift [4:0], y_zp [13:5], act_min [22:14], act_max [31:23] */
        vals[nv++] = (int32_t)((uint32_t)imax(-p->shift[r], 0) | ((uint32_t)p->y_zp & 511u) << 5 |
                               ((uint32_t)p->act_min & 511u) << 14 | ((uint32_t)p->act_max & 511u) << 23);
        for (int k = 0; k < nv; k++)
            for (int b = 0; b < c->batch; b++) {
                /* resident plans keep each kind of row together (one burst per kind) */
                size_t el = pl->resident ? (size_t)sec_off(p->rq_count, pl->cob, k) +
                                               (sec_shared(p->rq_count, k) ? 0 : (size_t)(co / c->block_out))
                                         : (size_t)(co / c->block_out) * pl->nconst + k;
                size_t o = el * c->acc_bytes + ((size_t)b * c->block_out + (size_t)(co % c->block_out)) * 4;
                uint32_t u = (uint32_t)vals[k];
                for (int j = 0; j < 4; j++)
                    cdst[o + j] = (uint8_t)(u >> (8 * j));
            }
    }
    return TSR_OK;
}

void tsr_conv2d_unpack_output(const tsr_config_t *c, const tsr_conv2d_plan_t *pl, const uint8_t *src, void *y)
{
    if (pl->tensors_owned) {
        tsr_dtensor_unpack(&pl->yt, src, y);
        return;
    }
    const tsr_conv2d_params_t *p = &pl->p;
    uint8_t *out = y;
    size_t i = 0;
    for (int n = 0; n < p->n; n++)
        for (int co = 0; co < p->c_out; co++)
            for (int oy = 0; oy < pl->oh; oy++)
                for (int ox = 0; ox < pl->ow; ox++, i++) {
                    size_t el = (((size_t)(n / c->batch) * pl->cob + (size_t)(co / c->block_out)) * pl->oh + oy) * pl->ow + ox;
                    out[i] = src[el * c->out_bytes + (size_t)(n % c->batch) * c->block_out + (size_t)(co % c->block_out)];
                }
}

/* ---------------------------------------------------------------- plan */

/* Encode the uop kernels of g's tiling (host memory, n_uops(g) entries of
 * uop_bytes; *out is malloc'ed). Uops hold on-chip indices only. */
static int encode_uops(const geo_t *g, uint8_t **out)
{
    const tsr_config_t *c = g->c;
    const tsr_conv2d_params_t *p = g->p;
    size_t n = (size_t)n_uops(g);
    uint8_t *u8 = calloc(n, c->uop_bytes);
    *out = NULL;
    if (!u8)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = TSR_OK;
    size_t k = 0;
    if (g->t.res) {
        for (int i = 0; i < g->nkern; i++) {
            const res_kern_t *kn = &g->kern[i];
            k = (size_t)kn->base;
            const uint32_t dst0 = acc_base(g, kn->pa);
            if (kn->alu) {
                const uint32_t cst = (uint32_t)((kn->pa % 2) * (int)(c->acc_depth / 2) + g->const_off);
                for (int j = -1; j < g->nconst; j++, k++) {
                    const uint32_t src = j < 0 ? dst0
                                               : cst + (uint32_t)(res_sec_off(g, j) + (res_shared(g, j) ? 0 : kn->c0));
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
                    for (int ky = 0; ky < p->kh; ky++)
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
            tsr_uop_t u = {acc_base(g, pa), j < 0 ? acc_base(g, pa) : const_base(g, pa) + (uint32_t)j, 0};
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
                k = (size_t)g->t.nba * (1 + g->nconst) +
                    (size_t)(g->set_map[qi][qw][pa] - 1) * g->t.tco * g->nci * g->kk;
                for (int cl = 0; cl < g->t.tco; cl++)
                    for (int ci = 0; ci < g->nci; ci++)
                        for (int ky = 0; ky < p->kh; ky++)
                            for (int kx = 0; kx < p->kw; kx++, k++) {
                                int blk = g->dw ? cl : ci;
                                tsr_uop_t u;
                                u.dst = acc_base(g, pa) + (uint32_t)(cl * g->t.toh * g->t.tow);
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

/* Generator identity, part of every signature: it changes whenever this
 * file is recompiled, so a cache file written by another build of the
 * lowering (whose build() or tiling may differ) is never used. */
#define GEN_ID OP " lowering v1, built " __DATE__ " " __TIME__

/* The kernel cache signature of p: every parameter build(), the tiling and
 * the uops read. Multipliers and per-channel shift values only reach the
 * constant rows (packed with the weights), so they are left out (layers
 * that differ only in them share one kernel); the signs of per-channel
 * shifts select ALU steps, so they are in. Weight zero points are in (the
 * stream does not read them today; a zero-point correction would). If the
 * lowering starts to depend on another value, add it here. */
static size_t conv2d_sig(const tsr_conv2d_params_t *p, uint8_t *sig)
{
    size_t n = tsr_kcache_sig_bytes(sig, 0, GEN_ID, sizeof GEN_ID);
    const int32_t v[] = {p->n,          p->c_in,      p->h,          p->w,         p->c_out,        p->kh,
                         p->kw,         p->stride_h,  p->stride_w,   p->pad_top,   p->pad_left,     p->pad_bottom,
                         p->pad_right,  p->groups,    (int32_t)p->x_dtype, p->x_zp, (int32_t)p->w_dtype,
                         (int32_t)p->y_dtype, p->y_zp, p->act_min,   p->act_max,   p->w_zp_count,   p->rq_count};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        n = tsr_kcache_sig_i32(sig, n, v[i]);
    for (int i = 0; i < p->w_zp_count; i++)
        n = tsr_kcache_sig_i32(sig, n, p->w_zp[i]);
    if (p->rq_count == 1) {
        n = tsr_kcache_sig_i32(sig, n, p->shift[0]);
    } else {
        int any_pos = 0, any_neg = 0;
        for (int i = 0; i < p->rq_count; i++) {
            any_pos |= p->shift[i] > 0;
            any_neg |= p->shift[i] < 0;
        }
        n = tsr_kcache_sig_i32(sig, n, any_pos);
        n = tsr_kcache_sig_i32(sig, n, any_neg);
    }
    return n;
}

/* The lowering-specific part of a cached kernel. */
typedef struct {
    tiling_t t;              /* the chosen tiling */
    double cost;             /* the cost model's value for it */
    int8_t set_map[2][2][4]; /* kernel sets the stream uses (geo_t.set_map) */
    int32_t n_sets;          /* how many */
    int32_t nuops;           /* uops in the kernel buffer */
} conv_meta_t;

/* Generate the kernel for g (tiling, uops, relocatable stream) and insert
 * it into kc; *ref gets the reference. */
static int generate(tsr_kcache_t *kc, geo_t *g, const uint8_t *sig, size_t sig_len, tsr_kcache_ref_t **ref)
{
    const uint64_t t0 = tsr_mono_ns();
    uint8_t *uops = NULL;
    ibuf_t b = {0};
    tsr_stream_init(&b.s, g->c, 0, 1);
    int rc;
    if ((rc = choose_tiling(g)))
        goto out;
    g->x_el = g->w_el = g->y_el = g->c_el = g->uop_el = 0; /* relocatable: every buffer at 0 */
    if (g->t.res)
        build_res(g, &b);
    else
        build(g, &b);
    if ((rc = tsr_stream_status(&b.s))) /* (plan_impl checks every field once relocated) */
        goto out;
    memcpy(g->set_map, b.set_map, sizeof g->set_map);
    g->n_sets = b.n_sets;
    g->nuops_res = b.nuops;
    g->kern = b.kern;
    g->nkern = b.nkern;
    if ((rc = encode_uops(g, &uops)))
        goto out;
    conv_meta_t meta;
    memset(&meta, 0, sizeof meta);
    meta.t = g->t;
    memcpy(meta.set_map, g->set_map, sizeof meta.set_map);
    meta.n_sets = g->n_sets;
    meta.nuops = n_uops(g);
    meta.cost = estimate_cycles(g, &b); /* estimated cycles */
    tsr_kernel_t k = {&meta, sizeof meta, b.s.v, b.s.n, uops, (size_t)n_uops(g), tsr_mono_ns() - t0};
    rc = tsr_kcache_insert(kc, sig, sig_len, &k, ref);
out:
    tsr_stream_free(&b.s);
    free(b.kern);
    g->kern = NULL;
    g->nkern = 0;
    free(uops);
    return rc;
}

/* The plan: the kernel from the cache (or generated), the weight and
 * constant buffers, and the stream relocated to x and y (device tensors,
 * not owned) or, when x is NULL, to input and output buffers of its own. */
/* tsr_kcache_fetch's callbacks: a cached kernel of this signature is kept
 * if its tiling still fits (defence in depth: the signature makes this
 * always true), adopting its tiling and kernel sets; else generate. */
typedef struct {
    tsr_kcache_t *kc;
    geo_t *g;
    const uint8_t *sig;
    size_t sig_len;
} conv_kctx_t;

static int kernel_fits(const tsr_kernel_t *k, void *ctx)
{
    geo_t *g = ((conv_kctx_t *)ctx)->g;
    conv_meta_t meta;
    if (k->meta_len != sizeof meta)
        return 0;
    memcpy(&meta, k->meta, sizeof meta);
    if (!tiling_fits(g, &meta.t))
        return 0;
    set_tiling(g, &meta.t);
    memcpy(g->set_map, meta.set_map, sizeof g->set_map);
    g->n_sets = meta.n_sets;
    g->nuops_res = meta.nuops;
    return meta.n_sets >= 0 && meta.n_sets <= g->kern_sets && k->nuops == (size_t)n_uops(g) &&
           meta.nuops == n_uops(g) && meta.nuops <= (int32_t)g->c->uop_depth;
}

static int kernel_gen(void *ctx, tsr_kcache_ref_t **ref)
{
    conv_kctx_t *x = ctx;
    return generate(x->kc, x->g, x->sig, x->sig_len, ref);
}

static int plan_impl(tsr_device_t *dev, const tsr_conv2d_params_t *params, const tsr_dtensor_t *x,
                     const tsr_dtensor_t *y, tsr_conv2d_plan_t *pl)
{
    const uint64_t t0 = tsr_mono_ns();
    if (!dev || !pl)
        return tsr_err(TSR_EINVAL, OP ": NULL device or plan");
    const tsr_config_t *c = tsr_device_config(dev);
    memset(pl, 0, sizeof *pl);
    geo_t g;
    uint8_t *sig = NULL;
    int rc = geo_init(c, params, &g);
    if (rc)
        return rc;
    pl->p = *params;
    pl->w_zp = malloc(sizeof(int32_t) * (size_t)params->w_zp_count);
    pl->mult = malloc(sizeof(int32_t) * (size_t)params->rq_count);
    pl->shift = malloc(sizeof(int32_t) * (size_t)params->rq_count);
    sig = malloc(TSR_KCACHE_MAX_SIG);
    if (!pl->w_zp || !pl->mult || !pl->shift || !sig) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto fail;
    }
    memcpy(pl->w_zp, params->w_zp, sizeof(int32_t) * (size_t)params->w_zp_count);
    memcpy(pl->mult, params->mult, sizeof(int32_t) * (size_t)params->rq_count);
    memcpy(pl->shift, params->shift, sizeof(int32_t) * (size_t)params->rq_count);
    pl->p.w_zp = pl->w_zp;
    pl->p.mult = pl->mult;
    pl->p.shift = pl->shift;
    g.p = &pl->p;

    /* The kernel: from the device's cache, else generated and inserted. */
    tsr_kcache_t *kc = tsr_kcache_get(dev);
    if (!kc) {
        rc = TSR_ENOMEM;
        goto fail;
    }
    size_t sig_len = conv2d_sig(&pl->p, sig);
    if (sig_len > TSR_KCACHE_MAX_SIG) {
        rc = tsr_err(TSR_EINVAL, OP ": parameters too long for a kernel cache signature (%zu bytes)", sig_len);
        goto fail;
    }
    conv_kctx_t kx = {kc, &g, sig, sig_len};
    if ((rc = tsr_kcache_fetch(kc, sig, sig_len, kernel_fits, kernel_gen, &kx, &pl->kref, &pl->kcache)))
        goto fail;
    const tsr_kernel_t *k = tsr_kcache_kernel(pl->kref);
    conv_meta_t meta;
    memcpy(&meta, k->meta, sizeof meta);

    pl->oh = g.oh;
    pl->ow = g.ow;
    pl->nb = g.nb;
    pl->cib = g.cib;
    pl->wsplit = g.wsplit;
    pl->cob = g.cob;
    pl->depthwise = g.dw;
    pl->toh = g.t.toh;
    pl->tco = g.t.tco;
    pl->tci = g.t.tci;
    pl->rows_in = g.rows_in;
    pl->row_step = g.row_step;
    pl->wp = g.wr;
    pl->tow = g.t.tow;
    pl->nconst = g.nconst;
    pl->co_inner = g.t.co_inner;
    pl->nbuf_inp = g.t.nbi;
    pl->nbuf_acc = g.t.nba;
    pl->resident = g.t.res;
    pl->tiles = g.tiles;
    pl->chunks = g.chunks;
    pl->h_pad = g.h_pad;
    pl->nuops = k->nuops;
    pl->uop_addr = tsr_kcache_uop_addr(pl->kref);
    pl->x_bytes = x_elems(&g) * c->inp_bytes;
    pl->w_bytes = w_elems(&g) * c->wgt_bytes;
    pl->y_bytes = y_elems(&g) * c->out_bytes;
    pl->c_bytes = c_elems(&g) * c->acc_bytes;
    if (x) {
        /* over device tensors: the plan's input and output are exactly
         * theirs (wsplit 1, the tensors' blocked layout) */
        if (pl->wsplit > 1 && !pl->depthwise) {
            rc = tsr_err(TSR_EINVAL,
                         OP ": weight zero points that do not fit int8 (w - w_zp split into %d parts) need the "
                         "input packed %d times, which a device tensor does not hold",
                         pl->wsplit, pl->wsplit);
            goto fail;
        }
        if (x->bytes != pl->x_bytes || y->bytes != pl->y_bytes || !x->addr || !y->addr) {
            rc = tsr_err(TSR_EINVAL, OP ": device tensors do not match the plan's input/output layout");
            goto fail;
        }
        pl->x_addr = x->addr;
        pl->y_addr = y->addr;
    } else {
        pl->io_owned = 1;
        if ((rc = tsr_mem_alloc(dev, pl->x_bytes, &pl->x_addr)) || (rc = tsr_mem_alloc(dev, pl->y_bytes, &pl->y_addr)))
            goto fail;
    }
    if ((rc = tsr_mem_alloc(dev, pl->w_bytes, &pl->w_addr)) || (rc = tsr_mem_alloc(dev, pl->c_bytes, &pl->c_addr)))
        goto fail;
    if (pl->x_addr % c->inp_bytes || pl->w_addr % c->wgt_bytes || pl->y_addr % c->out_bytes ||
        pl->c_addr % c->acc_bytes || pl->uop_addr % c->uop_bytes) {
        rc = tsr_err(TSR_EINVAL, OP ": device buffers not aligned to their element sizes");
        goto fail;
    }
    /* This plan's stream: the cached one, relocated to its buffers. */
    pl->insns = malloc((k->ninsns ? k->ninsns : 1) * sizeof *pl->insns);
    if (!pl->insns) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto fail;
    }
    pl->ninsns = k->ninsns;
    if ((rc = tsr_kcache_bind(c, pl->kref, pl->insns, pl->uop_addr, pl->x_addr, pl->w_addr, pl->c_addr, pl->y_addr))) {
        tsr_err_prefix(rc, OP ": ");
        goto fail;
    }
    /* A new stream is checked field by field. A cached one is not again
     * (that was half the time of a hit): relocation changed only dram_base
     * and checked it against its field, and every other field is that of a
     * stream that passed this check when it was generated (memory) or was
     * decoded from bits (disk). The driver encodes every stream it submits. */
    for (size_t i = 0; (pl->kcache == TSR_KC_MISS || pl->kcache == TSR_KC_NONE) && i < pl->ninsns; i++) {
        tsr_insn_bits_t bits;
        if ((rc = tsr_insn_encode(c, &pl->insns[i], &bits))) {
            rc = tsr_err_prefix(rc, OP ": instruction %zu of the generated stream: ", i);
            goto fail;
        }
    }
    tsr_counters_t ct;
    memset(&ct, 0, sizeof ct);
    tsr_counters_static(c, pl->insns, pl->ninsns, &ct);
    pl->gemm_ops = ct.gemm_ops;
    pl->alu_ops = ct.alu_ops;
    pl->dram_bytes = ct.bytes_stored;
    for (int m = 0; m < TSR_MEM_COUNT; m++)
        pl->dram_bytes += ct.bytes_loaded[m];
    pl->cost = meta.cost;
    pl->jit_ns = tsr_mono_ns() - t0;
    free(sig);
    return TSR_OK;
fail:
    free(sig);
    tsr_conv2d_plan_free(dev, pl);
    return rc;
}

void tsr_conv2d_plan_free(tsr_device_t *dev, tsr_conv2d_plan_t *pl)
{
    if (!pl)
        return;
    uint64_t *bufs[4] = {&pl->x_addr, &pl->w_addr, &pl->y_addr, &pl->c_addr};
    for (int i = 0; i < 4; i++)
        if (*bufs[i] && (pl->io_owned || (i != 0 && i != 2))) /* tensors' buffers belong to the tensors */
            tsr_mem_free(dev, *bufs[i]);
    if (pl->tensors_owned) {
        tsr_dtensor_free(dev, &pl->xt);
        tsr_dtensor_free(dev, &pl->yt);
    }
    tsr_kcache_release(pl->kref); /* the uop buffer belongs to the cache entry */
    free(pl->insns);
    free(pl->w_zp);
    free(pl->mult);
    free(pl->shift);
    memset(pl, 0, sizeof *pl);
}

int tsr_conv2d_plan(tsr_device_t *dev, const tsr_conv2d_params_t *params, tsr_conv2d_plan_t *pl)
{
    /* A thin wrapper over tsr_conv2d_plan_tensors with device tensors of its
     * own, whenever a device tensor can hold the input: one copy of it
     * (tsr_conv2d_input_copies) on a config that can chain (BLOCK_IN ==
     * BLOCK_OUT, 8-bit). Else the input is packed as this lowering needs it
     * (copies per weight part; rows of BLOCK_IN) into buffers of the plan. */
    if (!dev || !pl || !params)
        return plan_impl(dev, params, NULL, NULL, pl);
    const tsr_config_t *c = tsr_device_config(dev);
    int oh, ow, rc = tsr_conv2d_check(params, &oh, &ow);
    tsr_dtensor_t x, y;
    if (rc || tsr_conv2d_input_copies(params) != 1 ||
        tsr_dtensor_init(c, params->n, params->c_in, params->h, params->w, params->x_dtype, params->x_zp, &x) ||
        tsr_dtensor_init(c, params->n, params->c_out, oh, ow, params->y_dtype, params->y_zp, &y)) {
        tsr_err_clear();
        return plan_impl(dev, params, NULL, NULL, pl);
    }
    if ((rc = tsr_dtensor_alloc(dev, &x)) || (rc = tsr_dtensor_alloc(dev, &y)) ||
        (rc = tsr_conv2d_plan_tensors(dev, params, &x, &y, pl))) {
        tsr_dtensor_free(dev, &x);
        tsr_dtensor_free(dev, &y);
        return rc;
    }
    pl->xt = x;
    pl->yt = y;
    pl->tensors_owned = 1;
    return TSR_OK;
}

int tsr_conv2d_plan_tensors(tsr_device_t *dev, const tsr_conv2d_params_t *params, const tsr_dtensor_t *x,
                            const tsr_dtensor_t *y, tsr_conv2d_plan_t *pl)
{
    if (pl)
        memset(pl, 0, sizeof *pl);
    if (!params || !x || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters or tensor");
    int oh, ow, rc = tsr_conv2d_check(params, &oh, &ow);
    if (rc)
        return rc;
    const tsr_conv2d_params_t *p = params;
    if (x->n != p->n || x->c != p->c_in || x->h != p->h || x->w != p->w || x->dtype != p->x_dtype ||
        x->zp != p->x_zp)
        return tsr_err(TSR_EINVAL, OP ": input tensor [%d,%d,%d,%d] zp %d does not match the parameters "
                       "[%d,%d,%d,%d] zp %d (or its dtype differs)",
                       x->n, x->c, x->h, x->w, (int)x->zp, p->n, p->c_in, p->h, p->w, (int)p->x_zp);
    if (y->n != p->n || y->c != p->c_out || y->h != oh || y->w != ow || y->dtype != p->y_dtype || y->zp != p->y_zp)
        return tsr_err(TSR_EINVAL, OP ": output tensor [%d,%d,%d,%d] zp %d does not match the parameters "
                       "[%d,%d,%d,%d] zp %d (or its dtype differs)",
                       y->n, y->c, y->h, y->w, (int)y->zp, p->n, p->c_out, oh, ow, (int)p->y_zp);
    /* the device view: int8 values h = x - off in, re-centred y - off out
     * (the requantization's zero point and clamp move with it) */
    tsr_conv2d_params_t v = *p;
    const int xo = tsr_dtensor_off(p->x_dtype), yo = tsr_dtensor_off(p->y_dtype);
    v.x_dtype = v.y_dtype = TSR_DT_INT8;
    v.x_zp -= xo;
    v.y_zp -= yo;
    v.act_min -= yo;
    v.act_max -= yo;
    return plan_impl(dev, &v, x, y, pl);
}

int tsr_conv2d_bind(tsr_device_t *dev, tsr_conv2d_plan_t *pl, const tsr_dtensor_t *x, const tsr_dtensor_t *y)
{
    if (!dev || !pl || !pl->kref || !x || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL device, plan or tensor");
    if (pl->io_owned)
        return tsr_err(TSR_EINVAL, OP ": the plan owns its input and output buffers (plan it over tensors)");
    if (x->bytes != pl->x_bytes || y->bytes != pl->y_bytes || !x->addr || !y->addr)
        return tsr_err(TSR_EINVAL, OP ": device tensors do not match the plan's input/output layout");
    const tsr_config_t *c = tsr_device_config(dev);
    int rc = tsr_kcache_bind(c, pl->kref, pl->insns, pl->uop_addr, x->addr, pl->w_addr, pl->c_addr, y->addr);
    if (rc)
        return tsr_err_prefix(rc, OP ": ");
    pl->x_addr = x->addr;
    pl->y_addr = y->addr;
    return TSR_OK;
}

int tsr_conv2d_write_input(tsr_device_t *dev, const tsr_conv2d_plan_t *pl, const void *x)
{
    uint8_t *buf = malloc(pl->x_bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    tsr_conv2d_pack_input(tsr_device_config(dev), pl, x, buf);
    int rc = tsr_mem_write(dev, pl->x_addr, buf, pl->x_bytes);
    free(buf);
    return rc;
}

int tsr_conv2d_write_weights(tsr_device_t *dev, const tsr_conv2d_plan_t *pl, const void *w, const int32_t *bias)
{
    uint8_t *wb = malloc(pl->w_bytes), *cb = malloc(pl->c_bytes);
    int rc;
    if (!wb || !cb)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    else if (!(rc = tsr_conv2d_pack_weights(tsr_device_config(dev), pl, w, bias, wb, cb)) &&
             !(rc = tsr_mem_write(dev, pl->w_addr, wb, pl->w_bytes)))
        rc = tsr_mem_write(dev, pl->c_addr, cb, pl->c_bytes);
    free(wb);
    free(cb);
    return rc;
}

int tsr_conv2d_exec(tsr_device_t *dev, const tsr_conv2d_plan_t *pl)
{
    int rc = tsr_submit(dev, pl->insns, pl->ninsns);
    if (!rc)
        rc = tsr_wait(dev, -1);
    return rc;
}

int tsr_conv2d_read_output(tsr_device_t *dev, const tsr_conv2d_plan_t *pl, void *y)
{
    uint8_t *buf = malloc(pl->y_bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = tsr_mem_read(dev, pl->y_addr, buf, pl->y_bytes);
    if (!rc)
        tsr_conv2d_unpack_output(tsr_device_config(dev), pl, buf, y);
    free(buf);
    return rc;
}

int tsr_conv2d_run(tsr_device_t *dev, const tsr_conv2d_params_t *p, const void *x, const void *w,
                   const int32_t *bias, void *y)
{
    if (!x || !w || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL input, weight or output data");
    tsr_conv2d_plan_t pl;
    int rc = tsr_conv2d_plan(dev, p, &pl);
    if (rc)
        return rc;
    if (!(rc = tsr_conv2d_write_weights(dev, &pl, w, bias)) && !(rc = tsr_conv2d_write_input(dev, &pl, x)) &&
        !(rc = tsr_conv2d_exec(dev, &pl)))
        rc = tsr_conv2d_read_output(dev, &pl, y);
    tsr_conv2d_plan_free(dev, &pl);
    return rc;
}
