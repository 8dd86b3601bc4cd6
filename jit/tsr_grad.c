/*
 * tsr_grad: backward operators of dense and conv2d (see tsr_grad.h and
 * jit/operators.md "Backward operators").
 *
 * Every operator is one or more exact int32 GEMMs on the array ("gemm32"
 * below), emitted through the one stream builder (jit/stream):
 *   dense  C[P][Q] = SUM_r A[P][R] * W[R][Q]            (GEMM ops of B x BI x BO)
 *   lanes  C[P][Q] = SUM_r A[Q][P][R] * W[R][Q]         (one channel per lane: depthwise,
 *                                                        GEMM depthwise mode when the config has it,
 *                                                        else diagonal weight rows)
 * with A, W int8 built on the host (transposes, im2col, zero insertion: data
 * movement only) and every multiply-accumulate on the device.
 *
 * Why a GEMM of its own rather than the forward conv2d/dense lowering: their
 * epilogue requantizes to 8 bits (STORE keeps the low 8 bits of each
 * accumulator, isa/semantics.md), and an exact int32 result needs the four
 * bytes of every accumulator. Here the tile's accumulators are stored as NP
 * byte planes: the GEMM's last write already left byte 0 in the out rows;
 * for plane k = 1..NP-1 an ALU mov copies plane k-1's accumulators into
 * plane k's rows and an ALU shr by 8 leaves byte k in its out rows; one
 * STORE per plane. NP (1..4) is the fewest bytes that hold every sum the
 * shape allows (|sum| <= R * 128 * 128), so small reductions store less.
 * The host joins the planes (low planes unsigned, the top one signed).
 *
 * Zero points (dW only): x - x_zp may leave int8, so the device multiplies
 * g = x - off (int8: off = 0 for int8, 128 for uint8) and padding holds
 * g = x_zp - off (contributing (x_zp - off) + (off - x_zp) = 0 below); the
 * host adds (off - x_zp) * SUM dy per output channel (the conv2d lowering's
 * zero-point fold, counted in host_macs: one product per channel).
 *
 * Schedule (as jit/tsr_matmul.c, with the reduction in chunks): a tile is
 * TP row blocks x TQ column blocks (lanes: one channel block), a step one
 * (tile, chunk of the reduction). Step s loads into half s%2 of the inp/wgt
 * buffers, tile t accumulates in half t%2 of the acc buffer (its NP plane
 * regions), so the loads of the next step and the stores of the previous
 * tile overlap this step's GEMMs. Tokens: load->compute "step loaded";
 * compute->load "half free" (popped by step s+2's first LOAD);
 * compute->store "tile t ready"; store->compute "acc half drained" (popped
 * by tile t+2's reset, and by FINISH after the last tile).
 */
#include "tsr_grad.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_stream.h"

#define MAXPROD 16384 /* |a * w| for int8 a, w */

/* Largest device footprint of one GEMM run (the default device has 1 GiB)
 * and largest tensor or host operand copy (elements; int32 results 256 MiB). */
#define GRAD_MAX_DEV_BYTES (UINT64_C(768) << 20)
#define GRAD_MAX_ELEMS (INT64_C(1) << 26)

/* Accumulator regions: NREG = 4, tile t in region t % 4, each a quarter of
 * the buffer, in the order (bank 0, bank 1, bank 0, bank 1) so that
 * consecutive tiles lie in different banks (the bank is the index MSB) and
 * a tile's epilogue and store overlap the next two tiles' GEMMs. */
#define NREG 4
static uint32_t reg_base(const tsr_config_t *c, int r)
{
    return (uint32_t)(r & 1) * (c->acc_depth / 2) + (uint32_t)(r >> 1) * (c->acc_depth / 4);
}


static int imin(int a, int b) { return a < b ? a : b; }
static int cdiv(int a, int b) { return (a + b - 1) / b; }
static void add_stats(tsr_grad_stats_t *st, uint64_t dev_macs, uint64_t host_macs, uint64_t cycles)
{
    if (!st)
        return;
    st->device_macs += dev_macs;
    st->host_macs += host_macs;
    st->cycles += cycles;
}

/* One int32 result from its np byte planes (plane k at hc[k * plane + off]):
 * the low planes unsigned, the top one signed. */
static int32_t join_planes(const uint8_t *hc, size_t plane, size_t off, int np)
{
    uint32_t v = 0;
    for (int k = 0; k < np; k++)
        v |= (uint32_t)hc[(size_t)k * plane + off] << (8 * k);
    if (np < 4 && (v >> (8 * np - 1)) & 1u)
        v |= ~UINT32_C(0) << (8 * np);
    return (int32_t)v;
}

/* ---- the exact int32 GEMM ---- */

typedef struct {
    int lanes;          /* 0: dense GEMM, 1: one channel per lane (depthwise) */
    int p, r, q;        /* C [P][Q]; reduction length R */
    const int8_t *a;    /* dense: [P][R]; lanes: [Q][P][R] */
    const int8_t *w;    /* [R][Q] */
    int64_t bound;      /* bound on |sum| (planes stored); 0: from the shape */
} gemm_t;

/* Geometry of one gemm32 run on a config. */
typedef struct {
    int pb, qb, ru;     /* row blocks, column blocks, reduction units */
    int kdw;            /* lanes in the GEMM depthwise mode: K taps per op (0: dense or diagonal weights) */
    int rp;             /* lanes: reduction rows per (channel block, row block) in DRAM (R rounded up to K) */
    int a_unit, w_unit; /* inp / wgt rows one reduction unit takes (per row block / per column block) */
    int np;             /* byte planes stored */
    int tp, tq, rc;     /* tile rows, tile columns (blocks), reduction units per chunk */
    uint64_t a_bytes, w_bytes, c_bytes;
    double cost;        /* the tiling's estimated cycles */
} ggeo_t;

/* Byte planes holding every sum of magnitude at most bound (a bound of
 * R * 2^14 from the shape alone, or a tighter one from the operands). */
static int planes_for(int64_t bound)
{
    for (int np = 1; np < 4; np++)
        if (bound <= ((int64_t)1 << (8 * np - 1)) - 1)
            return np;
    return 4;
}

/* A bound on |sum| from the operands (host additions over them, no
 * products): |SUM_r a_r w_r| <= min(max row |a| sum * max |w|, max column
 * |w| sum * max |a|). A run stores no more planes than that needs: small
 * gradients store fewer bytes. */
static int64_t operand_bound(int lanes, int p, int r, int q, const int8_t *a, const int8_t *w)
{
    int64_t amax = 0, wmax = 0, arow = 0, wcol = 0;
    int64_t *col = calloc((size_t)q, sizeof *col);
    if (!col)
        return (int64_t)r * MAXPROD;
    for (int i = 0; i < r; i++)
        for (int j = 0; j < q; j++) {
            const int v = abs(w[(size_t)i * (size_t)q + (size_t)j]);
            wmax = v > wmax ? v : wmax;
            col[j] += v;
        }
    for (int j = 0; j < q; j++)
        wcol = col[j] > wcol ? col[j] : wcol;
    free(col);
    const size_t rows = (size_t)p * (size_t)(lanes ? q : 1);
    for (size_t i = 0; i < rows; i++) {
        int64_t sum = 0;
        for (int k = 0; k < r; k++) {
            const int v = abs(a[i * (size_t)r + (size_t)k]);
            amax = v > amax ? v : amax;
            sum += v;
        }
        arow = sum > arow ? sum : arow;
    }
    const int64_t b1 = arow * wmax, b2 = wcol * amax;
    return b1 < b2 ? b1 : b2;
}

static int geo_init(const tsr_config_t *c, const gemm_t *g, ggeo_t *o)
{
    memset(o, 0, sizeof *o);
    o->pb = cdiv(g->p, c->batch);
    o->np = planes_for(g->bound > 0 ? g->bound : (int64_t)g->r * MAXPROD);
    if (!g->lanes) {
        o->qb = cdiv(g->q, c->block_out);
        o->ru = cdiv(g->r, c->block_in);
        o->a_unit = o->w_unit = 1;
        o->a_bytes = (uint64_t)o->pb * (uint64_t)o->ru * c->inp_bytes;
        o->w_bytes = (uint64_t)o->qb * (uint64_t)o->ru * c->wgt_bytes;
    } else {
        o->qb = cdiv(g->q, c->block_in);
        o->kdw = c->depthwise;
        const int k = o->kdw ? o->kdw : 1;
        o->ru = cdiv(g->r, k);
        o->rp = o->ru * k;
        o->a_unit = k;
        o->w_unit = 1;
        o->a_bytes = (uint64_t)o->qb * (uint64_t)o->pb * (uint64_t)o->rp * c->inp_bytes;
        o->w_bytes = (uint64_t)o->qb * (uint64_t)o->ru * c->wgt_bytes;
    }
    o->c_bytes = (uint64_t)o->np * (uint64_t)o->pb * (uint64_t)o->qb * c->out_bytes;
    /* the tiling: the fewest estimated cycles over a few tile shapes (DRAM
     * traffic at the bus width vs the GEMM ops, plus a per-instruction cost) */
    const int loop_max = (1 << TSR_LOOP_BITS) - 1, size_max = (1 << TSR_SIZE_BITS) - 1;
    /* (the depthwise mode: one tap group per weight row, named as group 0 of
     * the row, index row * G; the halves lie in the rows whose groups a
     * uop's wgt field reaches, isa/semantics.md) */
    const int inp_half = (int)c->inp_depth / 2, wgt_half = (int)c->wgt_depth / 2 / (o->kdw ? 1 << c->dw_group_bits : 1),
              acc_reg = (int)c->acc_depth / NREG;
    const int uop_rc = ((int)c->uop_depth - NREG * o->np) / (2 * NREG);
    const double bus = c->dram_bus_width / 8.0;
    const double gemm_ops = (double)o->pb * o->qb * o->ru;
    double best = -1;
    int cand[2][64], nc[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
        const int nbk = d ? (g->lanes ? 1 : o->qb) : o->pb;
        for (int v = 1; v <= nbk && nc[d] < 40; v *= 2)
            cand[d][nc[d]++] = v;
        for (int k = 1; k <= 16; k++)
            cand[d][nc[d]++] = cdiv(nbk, k);
    }
    for (int i = 0; i < nc[0]; i++)
        for (int j = 0; j < nc[1]; j++) {
            const int tp = imin(cand[0][i], loop_max), tq = imin(cand[1][j], imin(loop_max, size_max));
            if (o->np * tp * tq > acc_reg || tp * o->a_unit > inp_half || tq * o->w_unit > wgt_half)
                continue;
            int rc = imin(o->ru, imin(inp_half / (tp * o->a_unit), wgt_half / (tq * o->w_unit)));
            rc = imin(rc, imin(uop_rc, size_max / o->a_unit));
            if (rc < 1)
                continue;
            const double tiles = (double)cdiv(o->pb, tp) * cdiv(o->qb, tq), steps = tiles * cdiv(o->ru, rc);
            const double dram = ((double)o->a_bytes * cdiv(o->qb, tq) + (double)o->w_bytes * cdiv(o->pb, tp) +
                                 (double)o->c_bytes) / bus;
            const double cost = (dram > gemm_ops ? dram : gemm_ops) + 40.0 * (steps * 4 + tiles * (2 + 3 * o->np));
            if (best < 0 || cost < best) {
                best = cost;
                o->tp = tp;
                o->tq = tq;
                o->rc = rc;
            }
        }
    if (best < 0)
        return tsr_err(TSR_EINVAL, "grad: no tiling of a %d x %d x %d GEMM fits this config's buffers", g->p, g->r,
                       g->q);
    o->cost = best;
    if (o->a_bytes + o->w_bytes + o->c_bytes > GRAD_MAX_DEV_BYTES)
        return tsr_err(TSR_ENOMEM, "grad: a %d x %d x %d GEMM needs %llu MiB of device memory (at most %llu)", g->p,
                       g->r, g->q, (unsigned long long)((o->a_bytes + o->w_bytes + o->c_bytes) >> 20),
                       (unsigned long long)(GRAD_MAX_DEV_BYTES >> 20));
    return TSR_OK;
}

static void pack_a(const tsr_config_t *c, const gemm_t *g, const ggeo_t *o, uint8_t *dst)
{
    const int b_ = c->batch, bi = c->block_in;
    if (!g->lanes) {
        for (int p = 0; p < g->p; p++)
            for (int r = 0; r < g->r; r++) {
                size_t e = (size_t)(p / b_) * (size_t)o->ru + (size_t)(r / bi);
                dst[e * c->inp_bytes + (size_t)(p % b_) * (size_t)bi + (size_t)(r % bi)] =
                    (uint8_t)g->a[(size_t)p * (size_t)g->r + (size_t)r];
            }
        return;
    }
    for (int q = 0; q < g->q; q++)
        for (int p = 0; p < g->p; p++)
            for (int r = 0; r < g->r; r++) {
                size_t e = ((size_t)(q / bi) * (size_t)o->pb + (size_t)(p / b_)) * (size_t)o->rp + (size_t)r;
                dst[e * c->inp_bytes + (size_t)(p % b_) * (size_t)bi + (size_t)(q % bi)] =
                    (uint8_t)g->a[((size_t)q * (size_t)g->p + (size_t)p) * (size_t)g->r + (size_t)r];
            }
}

static void pack_w(const tsr_config_t *c, const gemm_t *g, const ggeo_t *o, uint8_t *dst)
{
    const int bi = c->block_in, bo = c->block_out;
    for (int r = 0; r < g->r; r++)
        for (int q = 0; q < g->q; q++) {
            const uint8_t v = (uint8_t)g->w[(size_t)r * (size_t)g->q + (size_t)q];
            size_t e, off;
            if (!g->lanes) { /* [QB][RU] of [o][i] */
                e = (size_t)(q / bo) * (size_t)o->ru + (size_t)(r / bi);
                off = (size_t)(q % bo) * (size_t)bi + (size_t)(r % bi);
            } else if (o->kdw) { /* [QB][RU] of [k][c]: taps k of group r / K */
                e = (size_t)(q / bo) * (size_t)o->ru + (size_t)(r / o->kdw);
                off = (size_t)(r % o->kdw) * (size_t)bi + (size_t)(q % bo);
            } else { /* [QB][R] diagonal rows [c][c] */
                e = (size_t)(q / bo) * (size_t)o->ru + (size_t)r;
                off = (size_t)(q % bo) * (size_t)bi + (size_t)(q % bo);
            }
            dst[e * c->wgt_bytes + off] = v;
        }
}

/* A 2-D transfer whose rows are contiguous in DRAM (stride == row) as one
 * row: one DRAM burst instead of y (the rows' latency dominates short rows). */
static void load2d(tsr_stream_t *s, uint32_t mem, uint32_t sram, uint32_t dram, uint32_t y, uint32_t x, uint32_t stride)
{
    if (y > 1 && stride == x && (uint64_t)y * x < (1u << TSR_SIZE_BITS))
        tsr_stream_load(s, mem, sram, dram, 1, y * x, y * x);
    else
        tsr_stream_load(s, mem, sram, dram, y, x, stride);
}

static void store2d(tsr_stream_t *s, uint32_t sram, uint32_t dram, uint32_t y, uint32_t x, uint32_t stride)
{
    if (y > 1 && stride == x && (uint64_t)y * x < (1u << TSR_SIZE_BITS))
        tsr_stream_store(s, sram, dram, 1, y * x, y * x);
    else
        tsr_stream_store(s, sram, dram, y, x, stride);
}

/* A finished tile whose byte planes are still to be made and stored: its
 * epilogue is emitted behind the next tile's GEMMs, so that the ALU pipe
 * works on tile t (acc bank t%2) while the GEMM pipe works on tile t+1
 * (the other bank): the two compute pipes' bank rule, hw/ARCHITECTURE.md
 * (emitted before them, the next tile's GEMM that pushes a token would
 * wait for the whole epilogue). */
typedef struct {
    int t, tiles, np;
    uint32_t ube;                 /* the tile's reset/plane uops */
    uint32_t tr, tr_max;          /* accumulator rows of the tile, rows between planes */
    uint32_t sram0, dram0, plane; /* plane 0's rows, its DRAM element, elements between planes */
    uint32_t y, x, stride;        /* the STORE of one plane */
} epi_t;

static void emit_epi(tsr_stream_t *s, const epi_t *e)
{
    tsr_insn_t *in;
    /* plane k = (plane k-1) >> 8: its out rows hold byte k */
    for (int k = 1; k < e->np; k++) {
        in = tsr_stream_alu(s, TSR_ALU_MOV, e->ube + (uint32_t)k, e->ube + (uint32_t)k + 1);
        tsr_stream_loops(in, e->tr, 1, 1, 1, 0, 0);
        in = tsr_stream_alu(s, TSR_ALU_SHR, e->ube + (uint32_t)k, e->ube + (uint32_t)k + 1);
        in->use_imm = 1;
        in->imm = 8;
        tsr_stream_loops(in, e->tr, 1, 0, 1, 0, 0);
    }
    tsr_stream_signal(s, TSR_Q_CMP2ST);
    tsr_stream_wait(s, TSR_Q_CMP2ST);
    for (int k = 0; k < e->np; k++)
        store2d(s, e->sram0 + (uint32_t)k * e->tr_max, e->dram0 + (uint32_t)k * e->plane, e->y, e->x, e->stride);
    /* the store frees the tile's bank for tile t+2, or (last tile) for FINISH */
    if (e->t + NREG < e->tiles || e->t == e->tiles - 1)
        tsr_stream_signal(s, TSR_Q_ST2CMP);
}

/* Build the stream of one gemm32 run (buffers at element bases). */
static int build(const tsr_config_t *c, const gemm_t *g, const ggeo_t *o, uint64_t uop_addr, uint64_t a_addr,
                 uint64_t w_addr, uint64_t c_addr, uint8_t *uops, tsr_insn_t **insns, size_t *ninsns)
{
    /* depthwise mode: a GEMM's wgt index names tap group 0 of each row (geo_init) */
    const uint32_t wg = o->kdw ? 1u << c->dw_group_bits : 1;
    const uint32_t inp_half = c->inp_depth / 2, wgt_half = c->wgt_depth / 2 / wg;
    const int tr_max = o->tp * o->tq, nuops = 2 * NREG * o->rc + NREG * o->np;
    int rc = TSR_OK;
    /* uops: sets (inp/wgt half qi, acc half pa) of the reduction chunk, then per pa
     * the tile reset (plane 0) and the plane copies (plane k <- plane k-1) */
    for (int qi = 0; qi < 2; qi++)
        for (int pa = 0; pa < NREG; pa++)
            for (int u = 0; u < o->rc; u++) {
                tsr_uop_t uo = {reg_base(c, pa), qi * inp_half + (uint32_t)(u * o->a_unit),
                                (qi * wgt_half + (uint32_t)u) * wg};
                uint64_t raw;
                if ((rc = tsr_uop_encode(c, &uo, &raw)))
                    return rc;
                memcpy(uops + (size_t)((qi * NREG + pa) * o->rc + u) * c->uop_bytes, &raw, c->uop_bytes);
            }
    for (int pa = 0; pa < NREG; pa++)
        for (int k = 0; k < o->np; k++) {
            tsr_uop_t uo = {reg_base(c, pa) + (uint32_t)(k * tr_max), reg_base(c, pa) + (uint32_t)((k ? k - 1 : 0) * tr_max), 0};
            uint64_t raw;
            if ((rc = tsr_uop_encode(c, &uo, &raw)))
                return rc;
            memcpy(uops + (size_t)(2 * NREG * o->rc + pa * o->np + k) * c->uop_bytes, &raw, c->uop_bytes);
        }

    tsr_stream_t s;
    tsr_stream_init(&s, c, 0, 0);
    tsr_stream_uops(&s, (uint32_t)(uop_addr / c->uop_bytes), (uint32_t)nuops);
    const uint32_t a_el = (uint32_t)(a_addr / c->inp_bytes), w_el = (uint32_t)(w_addr / c->wgt_bytes);
    const uint32_t c_el = (uint32_t)(c_addr / c->out_bytes);
    const int tiles_p = cdiv(o->pb, o->tp), tiles_q = cdiv(o->qb, o->tq), tiles = tiles_p * tiles_q;
    const int chunks = cdiv(o->ru, o->rc), steps = tiles * chunks;
    epi_t pend = {0};
    tsr_insn_t *in;
    for (int t = 0, st = 0; t < tiles; t++) {
        const int tpi = t / tiles_q, tqi = t % tiles_q, pa = t % NREG;
        const int pb0 = tpi * o->tp, qb0 = tqi * o->tq;
        const int tp = imin(o->tp, o->pb - pb0), tq = imin(o->tq, o->qb - qb0), tr = tp * tq;
        const uint32_t ubase_e = (uint32_t)(2 * NREG * o->rc + pa * o->np);
        for (int ch = 0; ch < chunks; ch++, st++) {
            const int qi = st % 2, u0 = ch * o->rc, rcn = imin(o->rc, o->ru - u0);
            /* load stage: step st-2's GEMMs freed half qi */
            if (st >= 2)
                tsr_stream_wait(&s, TSR_Q_CMP2LD);
            if (!g->lanes) {
                load2d(&s, TSR_MEM_INP, qi * inp_half, a_el + (uint32_t)(pb0 * o->ru + u0), (uint32_t)tp,
                                (uint32_t)rcn, (uint32_t)o->ru);
                load2d(&s, TSR_MEM_WGT, qi * wgt_half, w_el + (uint32_t)(qb0 * o->ru + u0), (uint32_t)tq,
                                (uint32_t)rcn, (uint32_t)o->ru);
            } else {
                load2d(&s, TSR_MEM_INP, qi * inp_half,
                                a_el + (uint32_t)((qb0 * o->pb + pb0) * o->rp + u0 * o->a_unit), (uint32_t)tp,
                                (uint32_t)(rcn * o->a_unit), (uint32_t)o->rp);
                load2d(&s, TSR_MEM_WGT, qi * wgt_half, w_el + (uint32_t)(qb0 * o->ru + u0), 1,
                                (uint32_t)rcn, (uint32_t)rcn);
            }
            tsr_stream_signal(&s, TSR_Q_LD2CMP);
            /* compute stage */
            if (ch == 0) {
                if (t >= NREG)
                    tsr_stream_wait(&s, TSR_Q_ST2CMP);
                in = tsr_stream_gemm(&s, ubase_e, ubase_e + 1, 1);
                tsr_stream_loops(in, (uint32_t)tr, 1, 0, 1, 0, 0);
            }
            tsr_stream_wait(&s, TSR_Q_LD2CMP);
            const uint32_t ub = (uint32_t)((qi * NREG + pa) * o->rc);
            in = tsr_stream_gemm(&s, ub, ub + (uint32_t)rcn, 0);
            if (!g->lanes) {
                /* rows (dst +tq, src +rcn), columns (dst +1, wgt +rcn) */
                tsr_stream_loops(in, (uint32_t)tp, (uint32_t)tq, (uint32_t)rcn, (uint32_t)tq, 1, 0);
                in->wgt_factor_in = (uint32_t)rcn;
            } else {
                tsr_stream_loops(in, (uint32_t)tp, 1, (uint32_t)(rcn * o->a_unit), 1, 0, 0);
                in->depthwise = o->kdw ? 1 : 0;
            }
            if (st + 2 < steps)
                tsr_stream_signal(&s, TSR_Q_CMP2LD);
        }
        if (pend.tiles)
            emit_epi(&s, &pend);
        pend = (epi_t){t, tiles, o->np, ubase_e, (uint32_t)tr, (uint32_t)tr_max, reg_base(c, pa),
                       c_el + (uint32_t)(pb0 * o->qb + qb0), (uint32_t)(o->pb * o->qb), (uint32_t)tp, (uint32_t)tq,
                       (uint32_t)o->qb};
    }
    emit_epi(&s, &pend);
    if (!(rc = tsr_stream_finish(&s)) && !(rc = tsr_stream_check(&s, "grad")))
        tsr_stream_take(&s, insns, ninsns);
    tsr_stream_free(&s);
    return rc;
}


/* C [P][Q] int32 = the gemm, on the device. cycles += the run's. */
static int gemm32(tsr_device_t *dev, const gemm_t *g0, int32_t *out, uint64_t *cycles)
{
    const tsr_config_t *c = tsr_device_config(dev);
    gemm_t gb = *g0;
    const gemm_t *g = &gb;
    gb.bound = operand_bound(g->lanes, g->p, g->r, g->q, g->a, g->w);
    if (gb.bound < 1)
        gb.bound = 1;
    ggeo_t o;
    int rc = geo_init(c, g, &o);
    if (rc)
        return rc;
    const uint64_t uop_bytes = (uint64_t)(2 * NREG * o.rc + NREG * o.np) * c->uop_bytes;
    if (o.a_bytes + o.w_bytes + o.c_bytes + uop_bytes > GRAD_MAX_DEV_BYTES)
        return tsr_err(TSR_ENOMEM, "grad: a %d x %d x %d GEMM needs %llu MiB of device memory (at most %llu)", g->p,
                       g->r, g->q, (unsigned long long)((o.a_bytes + o.w_bytes + o.c_bytes) >> 20),
                       (unsigned long long)(GRAD_MAX_DEV_BYTES >> 20));
    uint8_t *ha = calloc(1, o.a_bytes), *hw = calloc(1, o.w_bytes), *hc = malloc(o.c_bytes),
            *hu = calloc(1, uop_bytes);
    uint64_t ua = 0, aa = 0, wa = 0, ca = 0;
    tsr_insn_t *insns = NULL;
    size_t ninsns = 0;
    tsr_counters_t c0, c1;
    if (!ha || !hw || !hc || !hu) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    pack_a(c, g, &o, ha);
    pack_w(c, g, &o, hw);
    if ((rc = tsr_mem_alloc(dev, uop_bytes, &ua)) || (rc = tsr_mem_alloc(dev, o.a_bytes, &aa)) ||
        (rc = tsr_mem_alloc(dev, o.w_bytes, &wa)) || (rc = tsr_mem_alloc(dev, o.c_bytes, &ca)))
        goto out;
    if ((rc = build(c, g, &o, ua, aa, wa, ca, hu, &insns, &ninsns)))
        goto out;
    if ((rc = tsr_mem_write(dev, ua, hu, uop_bytes)) || (rc = tsr_mem_write(dev, aa, ha, o.a_bytes)) ||
        (rc = tsr_mem_write(dev, wa, hw, o.w_bytes)) || (rc = tsr_read_counters(dev, &c0)) ||
        (rc = tsr_submit(dev, insns, ninsns)) || (rc = tsr_wait(dev, -1)) || (rc = tsr_read_counters(dev, &c1)) ||
        (rc = tsr_mem_read(dev, ca, hc, o.c_bytes)))
        goto out;
    if (cycles)
        *cycles += c1.cycles - c0.cycles;
    /* join the planes: low planes unsigned, the top one signed */
    const size_t plane = (size_t)o.pb * (size_t)o.qb * c->out_bytes;
    const int lane_q = g->lanes ? c->block_in : c->block_out;
    for (int p = 0; p < g->p; p++)
        for (int q = 0; q < g->q; q++) {
            const size_t off = ((size_t)(p / c->batch) * (size_t)o.qb + (size_t)(q / lane_q)) * c->out_bytes +
                               (size_t)(p % c->batch) * (size_t)c->block_out + (size_t)(q % lane_q);
            out[(size_t)p * (size_t)g->q + (size_t)q] = join_planes(hc, plane, off, o.np);
        }
out:
    free(insns);
    if (ca)
        tsr_mem_free(dev, ca);
    if (wa)
        tsr_mem_free(dev, wa);
    if (aa)
        tsr_mem_free(dev, aa);
    if (ua)
        tsr_mem_free(dev, ua);
    free(ha);
    free(hw);
    free(hc);
    free(hu);
    return rc;
}

/* ---- the exact int32 convolution GEMM (stride 1, gathered on chip) ----
 *
 *   C[n][y][x][q] = SUM_(c, ty, tx) D[n][c][y + ty][x + tx] * W[(c, ty, tx)][q]
 *
 * over y < OY, x < OX, taps TY x TX: the im2col happens on chip, as in the
 * forward conv2d lowering: a step loads ROWS = TYM + TY - 1 image rows of
 * each of its RC channel blocks once and the uops (one per channel block,
 * tap and output-channel block) read them at the tap's offset, so DRAM
 * carries the image once per tile instead of TY*TX copies. D in DRAM:
 * [NB][CBP][DY][DX] inp elements ([b][i]: image n = nb*B + b, channel
 * cb*BI + i), zero past the image (the host pads rows to whole row tiles
 * and channel blocks to whole chunks, so every step has the same on-chip
 * layout and the uops do not depend on the tile); W: [QB][CBP][T] wgt
 * elements; C: NP planes of [NB][OY][OX][QB] out elements. Tile = (batch
 * block, TYM output rows, TQ output-channel blocks); the accumulators of
 * pixel pix and block ql at pix*tq + ql. */

typedef struct {
    int n, cr, q;          /* images, reduction channels, output channels */
    int oy, ox, ty, tx;    /* output size, taps */
    const int8_t *d;       /* [N][CR][OY + TY - 1][OX + TX - 1] */
    const int8_t *w;       /* [(c, ty, tx)][Q] */
    int64_t bound;         /* bound on |sum| (planes stored); 0: from the shape */
} cgemm_t;

typedef struct {
    int nb, cb, qb, t, np;
    int tym, tq, rc, nch, cbp, nrt, rows, dy, dx;
    int wres;           /* all weights stay on chip (at wgt row 0), loaded by the first step */
    uint64_t a_bytes, w_bytes, c_bytes;
    double cost;        /* the tiling's estimated cycles */
} cgeo_t;

static int cgeo_init(const tsr_config_t *c, const cgemm_t *g, cgeo_t *o)
{
    memset(o, 0, sizeof *o);
    o->nb = cdiv(g->n, c->batch);
    o->cb = cdiv(g->cr, c->block_in);
    o->qb = cdiv(g->q, c->block_out);
    o->t = g->ty * g->tx;
    o->np = planes_for(g->bound > 0 ? g->bound : (int64_t)g->cr * o->t * MAXPROD);
    o->dx = g->ox + g->tx - 1;
    const int loop_max = (1 << TSR_LOOP_BITS) - 1, size_max = (1 << TSR_SIZE_BITS) - 1;
    const int inp_half = (int)c->inp_depth / 2, wgt_half = (int)c->wgt_depth / 2, acc_reg = (int)c->acc_depth / NREG;
    const double bus = c->dram_bus_width / 8.0;
    double best = -1;
    if (g->ox > loop_max)
        return tsr_err(TSR_EINVAL, "grad: output rows of %d pixels (at most %d)", g->ox, loop_max);
    int qc[64], nq = 0;
    for (int v = 1; v <= o->qb && nq < 40; v *= 2)
        qc[nq++] = v;
    for (int k = 1; k <= 16; k++)
        qc[nq++] = cdiv(o->qb, k);
    for (int dv = 1, prev = 0; dv <= imin(g->oy, 256); dv++) {
        const int tym = imin(cdiv(g->oy, dv), loop_max);
        if (tym == prev)
            continue;
        prev = tym;
        const int rows = tym + g->ty - 1;
        if ((int64_t)rows * o->dx > inp_half || (int64_t)rows * o->dx > size_max)
            continue;
        for (int i = 0; i < 2 * nq; i++) {
            /* wres: all weights on chip at once, loaded by the first step (one column tile, one chunk) */
            const int wres = i >= nq, tq = wres ? o->qb : qc[i];
            const int wcap = wres ? (int)c->wgt_depth : wgt_half;
            if ((int64_t)o->np * tym * g->ox * tq > acc_reg || tq * o->t > wcap || (wres && i > nq))
                continue;
            int rc = imin(o->cb, imin(inp_half / (rows * o->dx), wcap / (tq * o->t)));
            rc = imin(rc, imin(((int)c->uop_depth - NREG * o->np) / (2 * NREG * tq * o->t), size_max / o->t));
            if (rc < 1 || (wres && rc < o->cb))
                continue;
            const int nch = cdiv(o->cb, rc);
            rc = cdiv(o->cb, nch);
            const int nrt = cdiv(g->oy, tym);
            const double tiles = (double)o->nb * nrt * cdiv(o->qb, tq), steps = tiles * nch;
            const double gemm = (double)o->nb * nrt * tym * g->ox * o->qb * nch * rc * o->t;
            /* a step whose weight half still holds its blocks skips the load (one chunk, at most two
             * column tiles: step s and s-2 read the same blocks) */
            const double wloads = wres ? 1 : nch == 1 && cdiv(o->qb, tq) <= 2 ? (steps < 4 ? steps : 4) : steps;
            const double dram = (steps * (double)rc * rows * o->dx * c->inp_bytes + wloads * tq * rc * o->t * c->wgt_bytes +
                                 (double)o->np * o->nb * g->oy * g->ox * o->qb * c->out_bytes) / bus;
            const double cost = (dram > gemm ? dram : gemm) + 40.0 * (steps * 4 + tiles * (2 + 3 * o->np));
            if (best < 0 || cost < best) {
                best = cost;
                o->tym = tym;
                o->tq = tq;
                o->rc = rc;
                o->nch = nch;
                o->wres = wres;
            }
        }
    }
    if (best < 0)
        return tsr_err(TSR_EINVAL, "grad: no tiling of a %dx%d convolution GEMM (%d taps, %d channels) fits this config",
                       g->oy, g->ox, o->t, g->cr);
    o->cost = best;
    o->cbp = o->nch * o->rc;
    o->nrt = cdiv(g->oy, o->tym);
    o->rows = o->tym + g->ty - 1;
    o->dy = o->nrt * o->tym + g->ty - 1;
    o->a_bytes = (uint64_t)o->nb * o->cbp * o->dy * o->dx * c->inp_bytes;
    o->w_bytes = (uint64_t)o->qb * o->cbp * o->t * c->wgt_bytes;
    o->c_bytes = (uint64_t)o->np * o->nb * g->oy * g->ox * o->qb * c->out_bytes;
    if (o->a_bytes + o->w_bytes + o->c_bytes > GRAD_MAX_DEV_BYTES)
        return tsr_err(TSR_ENOMEM, "grad: a convolution GEMM needs %llu MiB of device memory (at most %llu)",
                       (unsigned long long)((o->a_bytes + o->w_bytes + o->c_bytes) >> 20),
                       (unsigned long long)(GRAD_MAX_DEV_BYTES >> 20));
    return TSR_OK;
}

static void cpack(const tsr_config_t *c, const cgemm_t *g, const cgeo_t *o, uint8_t *da, uint8_t *dw)
{
    const int b_ = c->batch, bi = c->block_in, bo = c->block_out, hy = g->oy + g->ty - 1;
    for (int n = 0; n < g->n; n++)
        for (int ch = 0; ch < g->cr; ch++)
            for (int y = 0; y < hy; y++)
                for (int x = 0; x < o->dx; x++) {
                    const size_t e = (((size_t)(n / b_) * (size_t)o->cbp + (size_t)(ch / bi)) * (size_t)o->dy + (size_t)y) *
                                         (size_t)o->dx + (size_t)x;
                    da[e * c->inp_bytes + (size_t)(n % b_) * (size_t)bi + (size_t)(ch % bi)] =
                        (uint8_t)g->d[(((size_t)n * (size_t)g->cr + (size_t)ch) * (size_t)hy + (size_t)y) * (size_t)o->dx +
                                      (size_t)x];
                }
    for (int ch = 0; ch < g->cr; ch++)
        for (int t = 0; t < o->t; t++)
            for (int q = 0; q < g->q; q++) {
                const size_t e = ((size_t)(q / bo) * (size_t)o->cbp + (size_t)(ch / bi)) * (size_t)o->t + (size_t)t;
                dw[e * c->wgt_bytes + (size_t)(q % bo) * (size_t)bi + (size_t)(ch % bi)] =
                    (uint8_t)g->w[((size_t)ch * (size_t)o->t + (size_t)t) * (size_t)g->q + (size_t)q];
            }
}

static int cbuild(const tsr_config_t *c, const cgemm_t *g, const cgeo_t *o, uint64_t uop_addr, uint64_t a_addr,
                  uint64_t w_addr, uint64_t c_addr, uint8_t *uops, tsr_insn_t **insns, size_t *ninsns)
{
    const uint32_t inp_half = c->inp_depth / 2, wgt_half = c->wgt_depth / 2;
    const int tr_max = o->tym * g->ox * o->tq, per_set = o->tq * o->rc * o->t;
    int rc = TSR_OK;
    for (int qi = 0; qi < 2; qi++)
        for (int pa = 0; pa < NREG; pa++)
            for (int ql = 0; ql < o->tq; ql++)
                for (int cl = 0; cl < o->rc; cl++)
                    for (int t = 0; t < o->t; t++) {
                        const int ty = t / g->tx, tx = t % g->tx;
                        tsr_uop_t uo = {reg_base(c, pa) + (uint32_t)ql,
                                        qi * inp_half + (uint32_t)(cl * o->rows * o->dx + ty * o->dx + tx),
                                        (o->wres ? 0 : qi) * wgt_half + (uint32_t)((ql * o->rc + cl) * o->t + t)};
                        uint64_t raw;
                        if ((rc = tsr_uop_encode(c, &uo, &raw)))
                            return rc;
                        const size_t u = (size_t)(qi * NREG + pa) * (size_t)per_set + (size_t)((ql * o->rc + cl) * o->t + t);
                        memcpy(uops + u * c->uop_bytes, &raw, c->uop_bytes);
                    }
    for (int pa = 0; pa < NREG; pa++)
        for (int k = 0; k < o->np; k++) {
            tsr_uop_t uo = {reg_base(c, pa) + (uint32_t)(k * tr_max), reg_base(c, pa) + (uint32_t)((k ? k - 1 : 0) * tr_max), 0};
            uint64_t raw;
            if ((rc = tsr_uop_encode(c, &uo, &raw)))
                return rc;
            memcpy(uops + (size_t)(2 * NREG * per_set + pa * o->np + k) * c->uop_bytes, &raw, c->uop_bytes);
        }
    tsr_stream_t s;
    tsr_stream_init(&s, c, 0, 0);
    tsr_stream_uops(&s, (uint32_t)(uop_addr / c->uop_bytes), (uint32_t)(2 * NREG * per_set + NREG * o->np));
    const uint32_t a_el = (uint32_t)(a_addr / c->inp_bytes), w_el = (uint32_t)(w_addr / c->wgt_bytes);
    const uint32_t c_el = (uint32_t)(c_addr / c->out_bytes);
    const uint32_t plane = (uint32_t)(o->nb * g->oy * g->ox * o->qb);
    const int tiles_q = cdiv(o->qb, o->tq), tiles = o->nb * o->nrt * tiles_q, steps = tiles * o->nch;
    int64_t whalf[2] = {-1, -1};
    epi_t pend = {0};
    tsr_insn_t *in;
    for (int t = 0, st = 0; t < tiles; t++) {
        const int nb = t / (o->nrt * tiles_q), rt = t / tiles_q % o->nrt, qb0 = t % tiles_q * o->tq, pa = t % NREG;
        const int y0 = rt * o->tym, tyr = imin(o->tym, g->oy - y0), tq = imin(o->tq, o->qb - qb0);
        const int tr = tyr * g->ox * tq;
        const uint32_t ube = (uint32_t)(2 * NREG * per_set + pa * o->np);
        for (int ch = 0; ch < o->nch; ch++, st++) {
            const int qi = st % 2, c0 = ch * o->rc;
            if (st >= 2)
                tsr_stream_wait(&s, TSR_Q_CMP2LD);
            load2d(&s, TSR_MEM_INP, qi * inp_half,
                            a_el + (uint32_t)((((size_t)nb * o->cbp + c0) * o->dy + y0) * o->dx), (uint32_t)o->rc,
                            (uint32_t)(o->rows * o->dx), (uint32_t)(o->dy * o->dx));
            /* the weight half still holding these blocks (from step st-2) is not loaded again */
            const int64_t wkey = ((int64_t)qb0 * o->cbp + c0) * 65536 + tq;
            const int wq = o->wres ? 0 : qi;
            if (wkey != whalf[wq]) {
                load2d(&s, TSR_MEM_WGT, wq * wgt_half, w_el + (uint32_t)((qb0 * o->cbp + c0) * o->t),
                                (uint32_t)tq, (uint32_t)(o->rc * o->t), (uint32_t)(o->cbp * o->t));
                whalf[wq] = wkey;
            }
            tsr_stream_signal(&s, TSR_Q_LD2CMP);
            if (ch == 0) {
                if (t >= NREG)
                    tsr_stream_wait(&s, TSR_Q_ST2CMP);
                in = tsr_stream_gemm(&s, ube, ube + 1, 1);
                tsr_stream_loops(in, (uint32_t)tr, 1, 0, 1, 0, 0);
            }
            tsr_stream_wait(&s, TSR_Q_LD2CMP);
            const uint32_t ub = (uint32_t)((qi * NREG + pa) * per_set);
            in = tsr_stream_gemm(&s, ub, ub + (uint32_t)(tq * o->rc * o->t), 0);
            /* rows (dst +OX*tq, src +DX), columns (dst +tq, src +1) */
            tsr_stream_loops(in, (uint32_t)tyr, (uint32_t)(g->ox * tq), (uint32_t)o->dx, (uint32_t)g->ox, (uint32_t)tq, 1);
            if (st + 2 < steps)
                tsr_stream_signal(&s, TSR_Q_CMP2LD);
        }
        if (pend.tiles)
            emit_epi(&s, &pend);
        pend = (epi_t){t, tiles, o->np, ube, (uint32_t)tr, (uint32_t)tr_max, reg_base(c, pa),
                       c_el + (uint32_t)(((nb * g->oy + y0) * g->ox) * o->qb + qb0), plane, (uint32_t)(tyr * g->ox),
                       (uint32_t)tq, (uint32_t)o->qb};
    }
    emit_epi(&s, &pend);
    if (!(rc = tsr_stream_finish(&s)) && !(rc = tsr_stream_check(&s, "grad")))
        tsr_stream_take(&s, insns, ninsns);
    tsr_stream_free(&s);
    return rc;
}

/* out [N][OY][OX][Q] int32 = the convolution GEMM, on the device. */
static int cgemm32(tsr_device_t *dev, const cgemm_t *g0, int32_t *out, uint64_t *cycles)
{
    const tsr_config_t *c = tsr_device_config(dev);
    cgemm_t gb = *g0;
    const cgemm_t *g = &gb;
    {
        /* |sum| <= max |D| * (the largest output channel's |W| sum), or the shape's bound */
        const int t = g->ty * g->tx;
        const size_t nd = (size_t)g->n * (size_t)g->cr * (size_t)(g->oy + g->ty - 1) * (size_t)(g->ox + g->tx - 1);
        int64_t dmax = 0;
        for (size_t i = 0; i < nd; i++)
            dmax = abs(g->d[i]) > dmax ? abs(g->d[i]) : dmax;
        int64_t wcol = 0;
        for (int q = 0; q < g->q; q++) {
            int64_t sum = 0;
            for (int r = 0; r < g->cr * t; r++)
                sum += abs(g->w[(size_t)r * (size_t)g->q + (size_t)q]);
            wcol = sum > wcol ? sum : wcol;
        }
        gb.bound = dmax * wcol < 1 ? 1 : dmax * wcol;
    }
    cgeo_t o;
    int rc = cgeo_init(c, g, &o);
    if (rc)
        return rc;
    const uint64_t uop_bytes = (uint64_t)(2 * NREG * o.tq * o.rc * o.t + NREG * o.np) * c->uop_bytes;
    if (o.a_bytes + o.w_bytes + o.c_bytes + uop_bytes > GRAD_MAX_DEV_BYTES)
        return tsr_err(TSR_ENOMEM, "grad: a convolution GEMM needs %llu MiB of device memory (at most %llu)",
                       (unsigned long long)((o.a_bytes + o.w_bytes + o.c_bytes) >> 20),
                       (unsigned long long)(GRAD_MAX_DEV_BYTES >> 20));
    uint8_t *ha = calloc(1, o.a_bytes), *hw = calloc(1, o.w_bytes), *hc = malloc(o.c_bytes), *hu = calloc(1, uop_bytes);
    uint64_t ua = 0, aa = 0, wa = 0, ca = 0;
    tsr_insn_t *insns = NULL;
    size_t ninsns = 0;
    tsr_counters_t c0, c1;
    if (!ha || !hw || !hc || !hu) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    cpack(c, g, &o, ha, hw);
    if ((rc = tsr_mem_alloc(dev, uop_bytes, &ua)) || (rc = tsr_mem_alloc(dev, o.a_bytes, &aa)) ||
        (rc = tsr_mem_alloc(dev, o.w_bytes, &wa)) || (rc = tsr_mem_alloc(dev, o.c_bytes, &ca)))
        goto out;
    if ((rc = cbuild(c, g, &o, ua, aa, wa, ca, hu, &insns, &ninsns)))
        goto out;
    if ((rc = tsr_mem_write(dev, ua, hu, uop_bytes)) || (rc = tsr_mem_write(dev, aa, ha, o.a_bytes)) ||
        (rc = tsr_mem_write(dev, wa, hw, o.w_bytes)) || (rc = tsr_read_counters(dev, &c0)) ||
        (rc = tsr_submit(dev, insns, ninsns)) || (rc = tsr_wait(dev, -1)) || (rc = tsr_read_counters(dev, &c1)) ||
        (rc = tsr_mem_read(dev, ca, hc, o.c_bytes)))
        goto out;
    if (cycles)
        *cycles += c1.cycles - c0.cycles;
    const size_t plane = (size_t)o.nb * (size_t)g->oy * (size_t)g->ox * (size_t)o.qb * c->out_bytes;
    for (int n = 0; n < g->n; n++)
        for (int pix = 0; pix < g->oy * g->ox; pix++)
            for (int q = 0; q < g->q; q++) {
                const size_t off = (((size_t)(n / c->batch) * (size_t)g->oy * (size_t)g->ox + (size_t)pix) * (size_t)o.qb +
                                    (size_t)(q / c->block_out)) * c->out_bytes +
                                   (size_t)(n % c->batch) * (size_t)c->block_out + (size_t)(q % c->block_out);
                out[((size_t)n * (size_t)g->oy * (size_t)g->ox + (size_t)pix) * (size_t)g->q + (size_t)q] =
                    join_planes(hc, plane, off, o.np);
            }
out:
    free(insns);
    if (ca)
        tsr_mem_free(dev, ca);
    if (wa)
        tsr_mem_free(dev, wa);
    if (aa)
        tsr_mem_free(dev, aa);
    if (ua)
        tsr_mem_free(dev, ua);
    free(ha);
    free(hw);
    free(hc);
    free(hu);
    return rc;
}

/* ---- checks ---- */


static int check_dev(const char *op, tsr_device_t *dev)
{
    if (!dev)
        return tsr_err(TSR_EINVAL, "%s: NULL device", op);
    const tsr_config_t *c = tsr_device_config(dev);
    if (c->inp_width != 8 || c->wgt_width != 8 || c->acc_width != 32)
        return tsr_err(TSR_EINVAL, "%s: needs int8 inputs and weights and int32 accumulators (config has %d/%d/%d bits)",
                       op, c->inp_width, c->wgt_width, c->acc_width);
    return TSR_OK;
}

/* |sum| of `terms` products of at most maxprod each must fit int32. */
static int check_sum(const char *op, int64_t terms, int64_t maxprod)
{
    if (terms > INT32_MAX / maxprod)
        return tsr_err(TSR_EINVAL, "%s: a sum of %lld products could overflow int32 (at most %lld terms)", op,
                       (long long)terms, (long long)(INT32_MAX / maxprod));
    return TSR_OK;
}

static int check_dense(const char *op, tsr_device_t *dev, int n, int k, int m, const void *a, const void *b,
                       const void *out)
{
    if (n < 1)
        return tsr_err(TSR_EINVAL, "%s: n = %d must be >= 1", op, n);
    if (k < 1)
        return tsr_err(TSR_EINVAL, "%s: k = %d must be >= 1", op, k);
    if (m < 1)
        return tsr_err(TSR_EINVAL, "%s: m = %d must be >= 1", op, m);
    if (!a || !b || !out)
        return tsr_err(TSR_EINVAL, "%s: NULL %s", op, !a ? "dy" : !b ? (strstr(op, "dx") ? "w" : "x") : "output");
    if ((int64_t)n * k > GRAD_MAX_ELEMS || (int64_t)n * m > GRAD_MAX_ELEMS || (int64_t)m * k > GRAD_MAX_ELEMS)
        return tsr_err(TSR_EINVAL, "%s: tensors of N %d, K %d, M %d too large (more than 2^26 elements)", op, n, k, m);
    return check_dev(op, dev);
}

static int check_x(const char *op, tsr_dtype_e dt, int32_t zp)
{
    if (!tsr_dt_ok(dt))
        return tsr_err(TSR_EINVAL, "%s: x_dtype %d must be int8 or uint8", op, (int)dt);
    if (zp < tsr_dt_min(dt) || zp > tsr_dt_max(dt))
        return tsr_err(TSR_EINVAL, "%s: x_zp %d outside [%d, %d]", op, zp, tsr_dt_min(dt), tsr_dt_max(dt));
    return TSR_OK;
}

/* Pick the GEMM's orientation: C or C^T, whichever takes fewer GEMM ops. */
static int transposed_is_cheaper(const tsr_config_t *c, int p, int r, int q)
{
    const int64_t rb = cdiv(r, c->block_in);
    const int64_t a = (int64_t)cdiv(p, c->batch) * cdiv(q, c->block_out) * rb;
    const int64_t b = (int64_t)cdiv(q, c->batch) * cdiv(p, c->block_out) * rb;
    return b < a;
}

/* C [P][Q] = X [P][R] * Y [R][Q] on the device, in whichever orientation is
 * cheaper (C^T = Y^T X^T). x(i, j), y(i, j) read the operands. */
typedef int8_t (*getter_t)(const void *ctx, int i, int j);
static int gemm_any(tsr_device_t *dev, int p, int r, int q, getter_t xg, const void *xc, getter_t yg, const void *yc,
                    int32_t *out, uint64_t *cycles)
{
    const tsr_config_t *c = tsr_device_config(dev);
    const int tr = transposed_is_cheaper(c, p, r, q);
    /* A [P'][R], W [R][Q'] with (P', Q') = (P, Q), or (Q, P) transposed */
    const size_t pp = (size_t)(tr ? q : p), qq = (size_t)(tr ? p : q);
    {
        /* a tiling and the device footprint, before any allocation */
        const gemm_t g0 = {0, (int)pp, r, (int)qq, NULL, NULL, 0};
        ggeo_t o0;
        int rc0 = geo_init(c, &g0, &o0);
        if (rc0)
            return rc0;
    }
    int8_t *a = malloc(pp * (size_t)r), *w = malloc((size_t)r * qq);
    int32_t *t = tr ? malloc((size_t)p * (size_t)q * sizeof *t) : NULL;
    int rc;
    if (!a || !w || (tr && !t)) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    gemm_t g = {0, tr ? q : p, r, tr ? p : q, a, w, 0};
    for (int i = 0; i < p; i++)
        for (int j = 0; j < r; j++) {
            const int8_t v = xg(xc, i, j);
            if (tr) /* W [R][P] = X^T */
                w[(size_t)j * (size_t)p + (size_t)i] = v;
            else
                a[(size_t)i * (size_t)r + (size_t)j] = v;
        }
    for (int i = 0; i < r; i++)
        for (int j = 0; j < q; j++) {
            const int8_t v = yg(yc, i, j);
            if (tr) /* A [Q][R] = Y^T */
                a[(size_t)j * (size_t)r + (size_t)i] = v;
            else
                w[(size_t)i * (size_t)q + (size_t)j] = v;
        }
    rc = gemm32(dev, &g, tr ? t : out, cycles);
    if (!rc && tr)
        for (int i = 0; i < p; i++)
            for (int j = 0; j < q; j++)
                out[(size_t)i * (size_t)q + (size_t)j] = t[(size_t)j * (size_t)p + (size_t)i];
out:
    free(a);
    free(w);
    free(t);
    return rc;
}

/* Estimated cycles of a dense GEMM in the orientation gemm_any takes (-1: no tiling); *bytes (if
 * not NULL) its device buffers (operands, result, uops) as gemm32 allocates them. */
static double est_gemm(const tsr_config_t *c, int p, int r, int q, uint64_t *bytes)
{
    const int tr = transposed_is_cheaper(c, p, r, q);
    gemm_t g = {0, tr ? q : p, r, tr ? p : q, NULL, NULL, 0};
    ggeo_t o;
    const int bad = geo_init(c, &g, &o) != TSR_OK;
    const double v = bad ? -1 : o.cost;
    if (bytes)
        *bytes = bad ? 0 : o.a_bytes + o.w_bytes + o.c_bytes + (uint64_t)(2 * NREG * o.rc + NREG * o.np) * c->uop_bytes;
    tsr_err_clear();
    return v;
}

/* ---- dense ---- */

typedef struct {
    const void *base;
    int ld;             /* row length */
    int trans;          /* read [j][i] */
    int kind;           /* 0 int8; 1 x - off of x_dtype */
    tsr_dtype_e dt;
} mat_t;

static int8_t mat_get(const void *ctx, int i, int j)
{
    const mat_t *m = ctx;
    const size_t idx = m->trans ? (size_t)j * (size_t)m->ld + (size_t)i : (size_t)i * (size_t)m->ld + (size_t)j;
    if (m->kind == 0)
        return ((const int8_t *)m->base)[idx];
    return (int8_t)(tsr_dt_get(m->dt, m->base, idx) - tsr_dt_off(m->dt));
}

int tsr_grad_dense_dx(tsr_device_t *dev, int n, int k, int m, const int8_t *dy, const int8_t *w, int32_t *dx,
                      tsr_grad_stats_t *st)
{
    const char *op = "grad dense dx";
    int rc = check_dense(op, dev, n, k, m, dy, w, dx);
    if (rc || (rc = check_sum(op, m, MAXPROD)))
        return rc;
    /* dx [N][K] = dy [N][M] * w [M][K] */
    mat_t x = {dy, m, 0, 0, TSR_DT_INT8}, y = {w, k, 0, 0, TSR_DT_INT8};
    uint64_t cyc = 0;
    if ((rc = gemm_any(dev, n, m, k, mat_get, &x, mat_get, &y, dx, &cyc)))
        return tsr_err_prefix(rc, "%s [%d x %d] x [%d x %d]: ", op, n, m, m, k);
    add_stats(st, (uint64_t)n * (uint64_t)m * (uint64_t)k, 0, cyc);
    return TSR_OK;
}

/* The zero-point fold of a dense GEMM on offset inputs: for each of m lines j, every element of out's
 * line j (no of them, o_step apart; lines o_line apart) gains cz * SUM of v's line j (nv int8 values,
 * v_step apart; lines v_line apart), modulo 2^32 as the device's int32 accumulators wrap. */
static void dense_zp_fold(int m, int32_t cz, const int8_t *v, size_t v_line, size_t v_step, int nv, int32_t *out,
                          size_t o_line, size_t o_step, int no)
{
    for (int j = 0; cz && j < m; j++) {
        int64_t s = 0;
        for (int i = 0; i < nv; i++)
            s += v[(size_t)j * v_line + (size_t)i * v_step];
        const uint32_t fold = (uint32_t)(int32_t)(s * cz);
        for (int i = 0; i < no; i++) {
            int32_t *o = &out[(size_t)j * o_line + (size_t)i * o_step];
            *o = (int32_t)((uint32_t)*o + fold);
        }
    }
}

int tsr_grad_dense_dw(tsr_device_t *dev, int n, int k, int m, const int8_t *dy, const void *x, tsr_dtype_e x_dtype,
                      int32_t x_zp, int32_t *dw, tsr_grad_stats_t *st)
{
    const char *op = "grad dense dw";
    int rc = check_dense(op, dev, n, k, m, dy, x, dw);
    if (rc || (rc = check_x(op, x_dtype, x_zp)) || (rc = check_sum(op, n, 128 * 255)))
        return rc;
    /* dw [M][K] = dy^T [M][N] * g [N][K], g = x - off; then + (off - x_zp) * SUM_n dy[n][m] */
    mat_t a = {dy, m, 1, 0, TSR_DT_INT8}, b = {x, k, 0, 1, x_dtype};
    uint64_t cyc = 0;
    if ((rc = gemm_any(dev, m, n, k, mat_get, &a, mat_get, &b, dw, &cyc)))
        return tsr_err_prefix(rc, "%s [%d x %d]^T x [%d x %d]: ", op, n, m, n, k);
    const int32_t cz = tsr_dt_off(x_dtype) - x_zp;
    dense_zp_fold(m, cz, dy, 1, (size_t)m, n, dw, (size_t)k, 1, k); /* dw[mm][*] += cz * SUM_n dy[n][mm] */
    add_stats(st, (uint64_t)n * (uint64_t)m * (uint64_t)k, cz ? (uint64_t)m : 0, cyc);
    return TSR_OK;
}

/* ---- conv2d ---- */

/* Strides and pads above these are refused (the forward conv2d takes pads up to 15). */
#define GRAD_MAX_STRIDE 15
#define GRAD_MAX_PAD 15

/* a * b for a, b >= 0, saturating at INT64_MAX (sizes checked before anything is allocated) */
static int64_t smul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* is_dw: 0 dX (dy, w), 1 dW (dy, x), 2 the forward's sums (x, w). */
static int check_conv(const char *op, tsr_device_t *dev, const tsr_grad_conv_t *p, const void *dy, const void *b,
                      const void *out, int is_dw, int *oh, int *ow)
{
    if (!p)
        return tsr_err(TSR_EINVAL, "%s: NULL parameters", op);
    const struct { const char *name; int v, lo, hi; } f[] = {
        {"n", p->n, 1, INT_MAX},          {"c_in", p->c_in, 1, INT_MAX},     {"h", p->h, 1, INT_MAX},
        {"w", p->w, 1, INT_MAX},          {"c_out", p->c_out, 1, INT_MAX},   {"kh", p->kh, 1, INT_MAX},
        {"kw", p->kw, 1, INT_MAX},        {"stride_h", p->stride_h, 1, GRAD_MAX_STRIDE},
        {"stride_w", p->stride_w, 1, GRAD_MAX_STRIDE},
        {"pad_top", p->pad_top, 0, GRAD_MAX_PAD},       {"pad_left", p->pad_left, 0, GRAD_MAX_PAD},
        {"pad_bottom", p->pad_bottom, 0, GRAD_MAX_PAD}, {"pad_right", p->pad_right, 0, GRAD_MAX_PAD},
        {"groups", p->groups, 1, INT_MAX}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < f[i].lo || f[i].v > f[i].hi) {
            if (f[i].hi == INT_MAX)
                return tsr_err(TSR_EINVAL, "%s: %s = %d must be >= %d", op, f[i].name, f[i].v, f[i].lo);
            return tsr_err(TSR_EINVAL, "%s: %s = %d outside [%d, %d]", op, f[i].name, f[i].v, f[i].lo, f[i].hi);
        }
    if (p->groups != 1 && !(p->groups == p->c_in && p->groups == p->c_out))
        return tsr_err(TSR_EINVAL, "%s: groups = %d: only 1 or depthwise (c_in == c_out == groups; here %d, %d)", op,
                       p->groups, p->c_in, p->c_out);
    const int64_t hp = (int64_t)p->h + p->pad_top + p->pad_bottom, wp = (int64_t)p->w + p->pad_left + p->pad_right;
    if (p->kh > hp)
        return tsr_err(TSR_EINVAL, "%s: kh = %d larger than the padded input height %lld", op, p->kh, (long long)hp);
    if (p->kw > wp)
        return tsr_err(TSR_EINVAL, "%s: kw = %d larger than the padded input width %lld", op, p->kw, (long long)wp);
    const int64_t oh64 = (hp - p->kh) / p->stride_h + 1, ow64 = (wp - p->kw) / p->stride_w + 1;
    *oh = (int)(oh64 < INT_MAX ? oh64 : INT_MAX); /* (an output that large is refused below) */
    *ow = (int)(ow64 < INT_MAX ? ow64 : INT_MAX);
    if (!dy || !b || !out)
        return tsr_err(TSR_EINVAL, "%s: NULL %s", op, !dy ? (is_dw == 2 ? "x" : "dy") : !b ? (is_dw == 1 ? "x" : "w")
                                                                                       : "output");
    /* the longest sum: dX's taps meeting one input pixel, dW's output pixels */
    const int64_t cog = p->c_out / p->groups, cig = p->c_in / p->groups, g = p->groups > 1 ? p->groups : 1;
    const int64_t taps = smul((p->kh + p->stride_h - 1) / p->stride_h, (p->kw + p->stride_w - 1) / p->stride_w);
    const int64_t opix = smul(oh64, ow64), kk = smul(p->kh, p->kw);
    /* (the forward's, is_dw 2: a channel group's taps) */
    int rc = is_dw == 2 ? check_sum(op, smul(cig, kk), 128 * 255)
             : is_dw    ? check_sum(op, smul(p->n, opix), 128 * 255)
                        : check_sum(op, smul(cog, taps), MAXPROD);
    if (rc)
        return rc;
    /* the host copies: tensors, and dX's / dW's GEMM operands (at most the im2col of x or dy) */
    const int64_t ipix = smul(p->h, p->w);
    const int64_t sizes[] = {smul(smul(p->n, p->c_in), ipix), smul(smul(p->n, p->c_out), opix),
                             smul(smul(p->c_out, cig), kk), smul(smul(smul(p->n, ipix), smul(cog, taps)), g),
                             smul(smul(smul(p->n, opix), smul(cig, kk)), g)};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] > GRAD_MAX_ELEMS)
            return tsr_err(TSR_EINVAL, "%s: tensors of [%d, %d, %d, %d] with %dx%d kernels too large (an operand of "
                           "%lld elements or more; at most 2^26)", op, p->n, p->c_in, p->h, p->w, p->kh, p->kw,
                           (long long)sizes[i]);
    if ((rc = check_dev(op, dev)))
        return rc;
    const tsr_config_t *c = tsr_device_config(dev);
    if (p->groups > 1 && c->block_in != c->block_out)
        return tsr_err(TSR_EINVAL, "%s: depthwise needs BLOCK_IN == BLOCK_OUT (config has %d, %d)", op, c->block_in,
                       c->block_out);
    return TSR_OK;
}

/* Terms of the formula (input position inside the input): for every
 * (n, c_out, c_in/groups), the (oy, ky) pairs inside times the (ox, kx) pairs. */
static uint64_t conv_macs(const tsr_grad_conv_t *p, int oh, int ow)
{
    uint64_t vy = 0, vx = 0;
    for (int oy = 0; oy < oh; oy++)
        for (int ky = 0; ky < p->kh; ky++) {
            const int y = oy * p->stride_h + ky - p->pad_top;
            vy += y >= 0 && y < p->h;
        }
    for (int ox = 0; ox < ow; ox++)
        for (int kx = 0; kx < p->kw; kx++) {
            const int x = ox * p->stride_w + kx - p->pad_left;
            vx += x >= 0 && x < p->w;
        }
    return (uint64_t)p->n * (uint64_t)p->c_out * (uint64_t)(p->c_in / p->groups) * vy * vx;
}

/* Split sums over huge reductions: a lanes GEMM's rows in DRAM hold R
 * (rounded up) elements, a 16-bit stride; longer ones run in parts whose
 * int32 results the host adds (additions, no products). */
#define LANES_MAX_R 16384

/* lanes GEMM with R split in parts of at most LANES_MAX_R (a: [Q][P][R], w: [R][Q]). */
static int gemm_lanes(tsr_device_t *dev, int pn, int r, int qn, const int8_t *a, const int8_t *w, int32_t *out,
                      uint64_t *cycles)
{
    if (r <= LANES_MAX_R) {
        gemm_t g = {1, pn, r, qn, a, w, 0};
        return gemm32(dev, &g, out, cycles);
    }
    const int part = LANES_MAX_R;
    int8_t *pa = malloc((size_t)qn * (size_t)pn * (size_t)part);
    int32_t *po = malloc((size_t)pn * (size_t)qn * sizeof *po);
    int rc = TSR_OK;
    if (!pa || !po) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    memset(out, 0, (size_t)pn * (size_t)qn * sizeof *out);
    for (int r0 = 0; r0 < r && !rc; r0 += part) {
        const int rn = imin(part, r - r0);
        for (size_t qp = 0; qp < (size_t)qn * (size_t)pn; qp++)
            memcpy(pa + qp * (size_t)rn, a + qp * (size_t)r + (size_t)r0, (size_t)rn);
        gemm_t g = {1, pn, rn, qn, pa, w + (size_t)r0 * (size_t)qn, 0};
        if (!(rc = gemm32(dev, &g, po, cycles)))
            for (size_t i = 0; i < (size_t)pn * (size_t)qn; i++)
                out[i] = (int32_t)((uint32_t)out[i] + (uint32_t)po[i]);
    }
out:
    free(pa);
    free(po);
    return rc;
}

/* The lowering of groups-1 conv dX/dW: by estimate (0), or as environment
 * variable TESSERA_GRAD_LOWERING says: "gather" (1: on chip, where a tiling
 * fits) or "im2col" (2: the im2col GEMM). Both give the same integers; the
 * tests run each. */
static int lowering_forced(void)
{
    const char *e = getenv("TESSERA_GRAD_LOWERING");
    return !e ? 0 : !strcmp(e, "gather") ? 1 : !strcmp(e, "im2col") ? 2 : 0;
}

/* ec, eg: the estimated cycles gathered on chip and as the im2col GEMM (-1: no tiling); gbytes the
 * im2col GEMM's device buffers, budget the caller's limit on them (0: none). Over the budget the
 * gathered lowering is taken whatever the estimate (its buffers hold the operands once, not a
 * KH*KW-fold copy of the input). */
static int take_gather(double ec, double eg, uint64_t gbytes, uint64_t budget)
{
    const int f = lowering_forced();
    if (ec < 0)
        return 0;
    return f == 1 || eg < 0 || (f == 0 && (ec <= eg || (budget && gbytes > budget)));
}

/* One phase of dX (groups 1) as a convolution GEMM gathered on chip: with
 * c0 = (ys[0] + pt - kys[0]) / sh the pixel (iy, ix) meets tap (ty, tx) at
 * oy = iy + c0 - ty, so over the taps flipped (ty' = nky-1-ty) it reads
 * D[iy + ty'] with D[r] = dy[r + c0 - (nky-1)] (0 outside [0, OH)), a
 * stride-1 correlation: D [N][C_out][ny+nky-1][nx+nkx-1], W [(co, ty', tx')][ci].
 * out: [pixel (n, iy, ix)][ci]. */
static int conv_dx_phase(tsr_device_t *dev, const tsr_grad_conv_t *p, const int8_t *dy, const int8_t *w, int oh,
                         int ow, const int *ys, int ny, const int *xs, int nx, const int *kys, int nky, const int *kxs,
                         int nkx, int32_t *out, uint64_t *cycles)
{
    const int cout = p->c_out, cin = p->c_in, hy = ny + nky - 1, hx = nx + nkx - 1, nt = nky * nkx;
    const int oy0 = (ys[0] + p->pad_top - kys[0]) / p->stride_h - (nky - 1);
    const int ox0 = (xs[0] + p->pad_left - kxs[0]) / p->stride_w - (nkx - 1);
    int8_t *d = malloc((size_t)p->n * (size_t)cout * (size_t)hy * (size_t)hx), *wm = malloc((size_t)cout * (size_t)nt * (size_t)cin);
    int rc;
    if (!d || !wm) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    for (int n = 0; n < p->n; n++)
        for (int co = 0; co < cout; co++)
            for (int r = 0; r < hy; r++)
                for (int q = 0; q < hx; q++) {
                    const int yy = r + oy0, xx = q + ox0;
                    d[(((size_t)n * (size_t)cout + (size_t)co) * (size_t)hy + (size_t)r) * (size_t)hx + (size_t)q] =
                        yy >= 0 && yy < oh && xx >= 0 && xx < ow
                            ? dy[(((size_t)n * (size_t)cout + (size_t)co) * (size_t)oh + (size_t)yy) * (size_t)ow + (size_t)xx]
                            : 0;
                }
    for (int co = 0; co < cout; co++)
        for (int ty = 0; ty < nky; ty++)
            for (int tx = 0; tx < nkx; tx++)
                for (int ci = 0; ci < cin; ci++)
                    wm[((size_t)co * (size_t)nt + (size_t)(ty * nkx + tx)) * (size_t)cin + (size_t)ci] =
                        w[(((size_t)co * (size_t)cin + (size_t)ci) * (size_t)p->kh + (size_t)kys[nky - 1 - ty]) *
                              (size_t)p->kw + (size_t)kxs[nkx - 1 - tx]];
    cgemm_t g = {p->n, cout, cin, ny, nx, nky, nkx, d, wm, 0};
    rc = cgemm32(dev, &g, out, cycles);
out:
    free(d);
    free(wm);
    return rc;
}

/* dX: per phase (a, b) = ((y + pt) % sh, (x + pl) % sw) the input pixels of
 * that phase meet only the taps ky % sh == a, kx % sw == b, each at one
 * output pixel oy = (y + pt - ky) / sh (when inside [0, OH)): a stride-1
 * GEMM over those taps (the transposed convolution as sh * sw sub-convs,
 * no zero-inserted rows). Groups 1: A [pixels][(co, ky, kx)] of dy, W
 * [(co, ky, kx)][ci] of w; depthwise: lanes, A [c][pixels][(ky, kx)],
 * W [(ky, kx)][c]. */
static int conv_dx(tsr_device_t *dev, const tsr_grad_conv_t *p, uint64_t budget, const int8_t *dy, const int8_t *w,
                   int32_t *dx, tsr_grad_stats_t *st);
int tsr_grad_conv_dx(tsr_device_t *dev, const tsr_grad_conv_t *p, const int8_t *dy, const int8_t *w, int32_t *dx,
                     tsr_grad_stats_t *st)
{
    return conv_dx(dev, p, 0, dy, w, dx, st);
}
int tsr_grad_conv_dx_budget(tsr_device_t *dev, const tsr_grad_conv_t *p, uint64_t dev_budget, const int8_t *dy,
                            const int8_t *w, int32_t *dx, tsr_grad_stats_t *st)
{
    return conv_dx(dev, p, dev_budget, dy, w, dx, st);
}
static int conv_dx(tsr_device_t *dev, const tsr_grad_conv_t *p, uint64_t budget, const int8_t *dy, const int8_t *w,
                   int32_t *dx, tsr_grad_stats_t *st)
{
    const char *op = "grad conv dx";
    int oh, ow, rc = check_conv(op, dev, p, dy, w, dx, 0, &oh, &ow);
    if (rc)
        return rc;
    const int sh = p->stride_h, sw = p->stride_w, kh = p->kh, kw = p->kw, dwise = p->groups > 1;
    const int cin = p->c_in, cout = p->c_out, cig = cin / p->groups;
    const size_t hw = (size_t)p->h * (size_t)p->w;
    int *ys = malloc(sizeof(int) * (size_t)p->h), *xs = malloc(sizeof(int) * (size_t)p->w);
    int *kys = malloc(sizeof(int) * (size_t)kh), *kxs = malloc(sizeof(int) * (size_t)kw);
    int8_t *a = NULL, *wm = NULL;
    int32_t *o = NULL;
    uint64_t cyc = 0;
    if (!ys || !xs || !kys || !kxs) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    memset(dx, 0, (size_t)p->n * (size_t)cin * hw * sizeof *dx);
    for (int pa_ = 0; pa_ < sh && !rc; pa_++)
        for (int pb_ = 0; pb_ < sw && !rc; pb_++) {
            int ny = 0, nx = 0, nky = 0, nkx = 0;
            for (int y = 0; y < p->h; y++)
                if ((y + p->pad_top) % sh == pa_)
                    ys[ny++] = y;
            for (int x = 0; x < p->w; x++)
                if ((x + p->pad_left) % sw == pb_)
                    xs[nx++] = x;
            for (int ky = pa_; ky < kh; ky += sh)
                kys[nky++] = ky;
            for (int kx = pb_; kx < kw; kx += sw)
                kxs[nkx++] = kx;
            if (!ny || !nx || !nky || !nkx)
                continue; /* no pixel of this phase, or no tap meets it: dx stays 0 */
            const int np_ = p->n * ny * nx, nt = nky * nkx, r = dwise ? nt : cout * nt, q = dwise ? cout : cin;
            free(a);
            free(wm);
            free(o);
            a = NULL;
            wm = NULL;
            o = malloc((size_t)np_ * (size_t)q * sizeof *o);
            if (!o) {
                rc = tsr_err(TSR_ENOMEM, "out of memory");
                goto out;
            }
            /* groups 1: gathered on chip, unless the im2col GEMM is estimated faster (few
             * channels: C_in = 1 has one output lane of BLOCK_OUT used) or no such tiling fits */
            if (!dwise) {
                const cgemm_t cg = {p->n, cout, cin, ny, nx, nky, nkx, NULL, NULL, 0};
                cgeo_t cgo;
                const double ec = cgeo_init(tsr_device_config(dev), &cg, &cgo) ? -1 : cgo.cost;
                uint64_t gb = 0;
                const double eg = est_gemm(tsr_device_config(dev), np_, r, q, &gb);
                if (take_gather(ec, eg, gb, budget)) {
                    if ((rc = conv_dx_phase(dev, p, dy, w, oh, ow, ys, ny, xs, nx, kys, nky, kxs, nkx, o, &cyc)))
                        goto phase_err;
                    goto unpack;
                }
            }
            a = malloc((size_t)np_ * (size_t)r * (dwise ? (size_t)q : 1));
            wm = malloc((size_t)r * (size_t)q);
            if (!a || !wm) {
                rc = tsr_err(TSR_ENOMEM, "out of memory");
                goto out;
            }
            /* the dy value pixel pi of the phase meets at tap t of channel co (0 outside) */
#define DY_AT(n_, co_, y_, x_, ky_, kx_, dst)                                                                          \
    do {                                                                                                               \
        const int oy_ = ((y_) + p->pad_top - (ky_)) / sh, ox_ = ((x_) + p->pad_left - (kx_)) / sw;                     \
        const int in_ = (y_) + p->pad_top - (ky_) >= 0 && oy_ < oh && (x_) + p->pad_left - (kx_) >= 0 && ox_ < ow;     \
        dst = in_ ? dy[(((size_t)(n_) * (size_t)cout + (size_t)(co_)) * (size_t)oh + (size_t)oy_) * (size_t)ow +       \
                       (size_t)ox_]                                                                                    \
                  : 0;                                                                                                 \
    } while (0)
            for (int n = 0; n < p->n; n++)
                for (int iy = 0; iy < ny; iy++)
                    for (int ix = 0; ix < nx; ix++) {
                        const size_t pi = ((size_t)n * (size_t)ny + (size_t)iy) * (size_t)nx + (size_t)ix;
                        for (int co = 0; co < cout; co++)
                            for (int ty = 0; ty < nky; ty++)
                                for (int tx = 0; tx < nkx; tx++) {
                                    int8_t v;
                                    DY_AT(n, co, ys[iy], xs[ix], kys[ty], kxs[tx], v);
                                    const size_t t = (size_t)ty * (size_t)nkx + (size_t)tx;
                                    if (dwise) /* A [c][pixel][tap] */
                                        a[((size_t)co * (size_t)np_ + pi) * (size_t)nt + t] = v;
                                    else /* A [pixel][(co, tap)] */
                                        a[pi * (size_t)r + (size_t)co * (size_t)nt + t] = v;
                                }
                    }
#undef DY_AT
            for (int co = 0; co < cout; co++)
                for (int cj = 0; cj < cig; cj++)
                    for (int ty = 0; ty < nky; ty++)
                        for (int tx = 0; tx < nkx; tx++) {
                            const int8_t v = w[(((size_t)co * (size_t)cig + (size_t)cj) * (size_t)kh + (size_t)kys[ty]) *
                                                   (size_t)kw + (size_t)kxs[tx]];
                            const size_t t = (size_t)ty * (size_t)nkx + (size_t)tx;
                            if (dwise) /* W [tap][c] */
                                wm[t * (size_t)q + (size_t)co] = v;
                            else /* W [(co, tap)][ci] */
                                wm[((size_t)co * (size_t)nt + t) * (size_t)q + (size_t)cj] = v;
                        }
            if (dwise)
                rc = gemm_lanes(dev, np_, r, q, a, wm, o, &cyc);
            else {
                mat_t ma = {a, r, 0, 0, TSR_DT_INT8}, mw = {wm, q, 0, 0, TSR_DT_INT8};
                rc = gemm_any(dev, np_, r, q, mat_get, &ma, mat_get, &mw, o, &cyc);
            }
            if (rc) {
            phase_err:
                rc = tsr_err_prefix(rc, "%s (phase %d,%d): ", op, pa_, pb_);
                goto out;
            }
        unpack:
            for (int n = 0; n < p->n; n++)
                for (int iy = 0; iy < ny; iy++)
                    for (int ix = 0; ix < nx; ix++) {
                        const size_t pi = ((size_t)n * (size_t)ny + (size_t)iy) * (size_t)nx + (size_t)ix;
                        for (int ci = 0; ci < cin; ci++)
                            dx[((size_t)n * (size_t)cin + (size_t)ci) * hw + (size_t)ys[iy] * (size_t)p->w +
                               (size_t)xs[ix]] = o[pi * (size_t)q + (size_t)ci];
                    }
        }
    if (!rc)
        add_stats(st, conv_macs(p, oh, ow), 0, cyc);
out:
    free(ys);
    free(xs);
    free(kys);
    free(kxs);
    free(a);
    free(wm);
    free(o);
    return rc;
}

/* g = x - off of channel ci of image n at input position (yy, xx); padding: x_zp - off. */
typedef struct {
    const tsr_grad_conv_t *p;
    const void *x;
    tsr_dtype_e dt;
    int32_t off;
    int8_t gpad;
} gsrc_t;

static int8_t g_at(const gsrc_t *g, int n, int ci, int yy, int xx)
{
    const tsr_grad_conv_t *p = g->p;
    if (yy < 0 || yy >= p->h || xx < 0 || xx >= p->w)
        return g->gpad;
    return (int8_t)(tsr_dt_get(g->dt, g->x,
                               (((size_t)n * (size_t)p->c_in + (size_t)ci) * (size_t)p->h + (size_t)yy) * (size_t)p->w +
                                   (size_t)xx) -
                    g->off);
}

/* The phases of dW as convolution GEMMs (groups 1): taps ky = a + sh*j,
 * kx = b + sw*i meet x at oy*sh + ky - pt = sh*(oy + j) + a - pt, so with
 * Xa[n][ci][r][t] = g(x[n][ci][sh*r + a - pt][sw*t + b - pl]) dW[co][ci][ky][kx]
 * = SUM_(n, oy, ox) Xa[n][ci][oy + j][ox + i] * dy[n][co][oy][ox]: a stride-1
 * correlation whose "images" are the input channels, whose reduction
 * channels are the batch (in the BLOCK_IN lanes) and whose taps are the
 * output pixels: D [ci][n][nj + OH - 1][ni + OW - 1], W [(n, oy, ox)][co],
 * out [ci][j][i][co]. est: only the estimated cycles (-1: no tiling), no run.
 * o: [co][ci*KH*KW]. */
static int conv_dw_phases(tsr_device_t *dev, const tsr_grad_conv_t *p, const int8_t *dy, const gsrc_t *gs, int oh,
                          int ow, int32_t *o, uint64_t *cycles, double *est)
{
    const tsr_config_t *c = tsr_device_config(dev);
    const int sh = p->stride_h, sw = p->stride_w, cin = p->c_in, cout = p->c_out, kk = p->kh * p->kw;
    int rc = TSR_OK;
    if (est)
        *est = 0;
    for (int a = 0; a < sh && a < p->kh; a++)
        for (int b = 0; b < sw && b < p->kw; b++) {
            const int nj = (p->kh - a + sh - 1) / sh, ni = (p->kw - b + sw - 1) / sw;
            const int hy = nj + oh - 1, hx = ni + ow - 1;
            cgemm_t g = {cin, p->n, cout, nj, ni, oh, ow, NULL, NULL, 0};
            if (est) {
                cgeo_t cg;
                if (cgeo_init(c, &g, &cg)) {
                    tsr_err_clear();
                    *est = -1;
                    return TSR_OK;
                }
                *est += cg.cost;
                continue;
            }
            int8_t *d = malloc((size_t)cin * (size_t)p->n * (size_t)hy * (size_t)hx);
            int8_t *wm = malloc((size_t)p->n * (size_t)oh * (size_t)ow * (size_t)cout);
            int32_t *r = malloc((size_t)cin * (size_t)nj * (size_t)ni * (size_t)cout * sizeof *r);
            if (!d || !wm || !r)
                rc = tsr_err(TSR_ENOMEM, "out of memory");
            if (!rc) {
                for (int ci = 0; ci < cin; ci++)
                    for (int n = 0; n < p->n; n++)
                        for (int y = 0; y < hy; y++)
                            for (int xx = 0; xx < hx; xx++)
                                d[(((size_t)ci * (size_t)p->n + (size_t)n) * (size_t)hy + (size_t)y) * (size_t)hx + (size_t)xx] =
                                    g_at(gs, n, ci, sh * y + a - p->pad_top, sw * xx + b - p->pad_left);
                for (int n = 0; n < p->n; n++)
                    for (int co = 0; co < cout; co++)
                        for (int t = 0; t < oh * ow; t++)
                            wm[((size_t)n * (size_t)oh * (size_t)ow + (size_t)t) * (size_t)cout + (size_t)co] =
                                dy[((size_t)n * (size_t)cout + (size_t)co) * (size_t)oh * (size_t)ow + (size_t)t];
                g.d = d;
                g.w = wm;
                rc = cgemm32(dev, &g, r, cycles);
            }
            if (!rc)
                for (int ci = 0; ci < cin; ci++)
                    for (int j = 0; j < nj; j++)
                        for (int i = 0; i < ni; i++)
                            for (int co = 0; co < cout; co++)
                                o[(size_t)co * (size_t)cin * (size_t)kk + (size_t)ci * (size_t)kk +
                                  (size_t)(a + sh * j) * (size_t)p->kw + (size_t)(b + sw * i)] =
                                    r[(((size_t)ci * (size_t)nj + (size_t)j) * (size_t)ni + (size_t)i) * (size_t)cout + (size_t)co];
            free(d);
            free(wm);
            free(r);
            if (rc)
                return rc;
        }
    return rc;
}

/* dW: a GEMM over (n, oy, ox). Groups 1: the phases as convolution GEMMs
 * gathered on chip (conv_dw_phases) when their estimate is lower, else A
 * [co][(n, oy, ox)] of dy, W [(n, oy, ox)][(ci, ky, kx)] the im2col of g = x
 * - off (padding: x_zp - off); depthwise: lanes, A [c][(ky, kx)][(n, oy,
 * ox)] of g, W [(n, oy, ox)][c] of dy. Then the zero-point fold per output
 * channel. */
static int conv_dw(tsr_device_t *dev, const tsr_grad_conv_t *p, uint64_t budget, const int8_t *dy, const void *x,
                   tsr_dtype_e x_dtype, int32_t x_zp, int32_t *dw, tsr_grad_stats_t *st);
int tsr_grad_conv_dw(tsr_device_t *dev, const tsr_grad_conv_t *p, const int8_t *dy, const void *x, tsr_dtype_e x_dtype,
                     int32_t x_zp, int32_t *dw, tsr_grad_stats_t *st)
{
    return conv_dw(dev, p, 0, dy, x, x_dtype, x_zp, dw, st);
}
int tsr_grad_conv_dw_budget(tsr_device_t *dev, const tsr_grad_conv_t *p, uint64_t dev_budget, const int8_t *dy,
                            const void *x, tsr_dtype_e x_dtype, int32_t x_zp, int32_t *dw, tsr_grad_stats_t *st)
{
    return conv_dw(dev, p, dev_budget, dy, x, x_dtype, x_zp, dw, st);
}
static int conv_dw(tsr_device_t *dev, const tsr_grad_conv_t *p, uint64_t budget, const int8_t *dy, const void *x,
                   tsr_dtype_e x_dtype, int32_t x_zp, int32_t *dw, tsr_grad_stats_t *st)
{
    const char *op = "grad conv dw";
    int oh, ow, rc = check_conv(op, dev, p, dy, x, dw, 1, &oh, &ow);
    if (rc || (rc = check_x(op, x_dtype, x_zp)))
        return rc;
    const int dwise = p->groups > 1, cin = p->c_in, cout = p->c_out, cig = cin / p->groups;
    const int kh = p->kh, kw = p->kw, kk = kh * kw, r = p->n * oh * ow;
    const int32_t off = tsr_dt_off(x_dtype);
    const gsrc_t gs = {p, x, x_dtype, off, (int8_t)(x_zp - off)};
    const int pn = dwise ? kk : cout, q = dwise ? cout : cig * kk;
    int8_t *a = NULL, *wm = NULL;
    int32_t *o = malloc((size_t)pn * (size_t)q * sizeof *o);
    uint64_t cyc = 0;
    if (!o) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    if (!dwise) {
        double ec = -1;
        conv_dw_phases(dev, p, dy, &gs, oh, ow, NULL, NULL, &ec);
        uint64_t gb = 0;
        const double eg = est_gemm(tsr_device_config(dev), cout, r, cig * kk, &gb);
        if (take_gather(ec, eg, gb, budget)) {
            if ((rc = conv_dw_phases(dev, p, dy, &gs, oh, ow, o, &cyc, NULL)))
                goto fail;
            goto fold;
        }
    }
    a = malloc((size_t)pn * (size_t)r * (dwise ? (size_t)q : 1));
    wm = malloc((size_t)r * (size_t)q);
    if (!a || !wm) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    for (int n = 0; n < p->n; n++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                const size_t j = ((size_t)n * (size_t)oh + (size_t)oy) * (size_t)ow + (size_t)ox;
                for (int co = 0; co < cout; co++) {
                    const int8_t d = dy[(((size_t)n * (size_t)cout + (size_t)co) * (size_t)oh + (size_t)oy) *
                                           (size_t)ow + (size_t)ox];
                    if (dwise)
                        wm[j * (size_t)q + (size_t)co] = d;
                    else
                        a[(size_t)co * (size_t)r + j] = d;
                }
                for (int ci = 0; ci < cin; ci++)
                    for (int ky = 0; ky < kh; ky++)
                        for (int kx = 0; kx < kw; kx++) {
                            const int8_t g = g_at(&gs, n, ci, oy * p->stride_h + ky - p->pad_top,
                                                  ox * p->stride_w + kx - p->pad_left);
                            const size_t t = (size_t)ky * (size_t)kw + (size_t)kx;
                            if (dwise) /* A [c][tap][j] */
                                a[((size_t)ci * (size_t)kk + t) * (size_t)r + j] = g;
                            else /* W [j][(ci, tap)] */
                                wm[j * (size_t)q + (size_t)ci * (size_t)kk + t] = g;
                        }
            }
    if (dwise)
        rc = gemm_lanes(dev, pn, r, q, a, wm, o, &cyc);
    else {
        mat_t ma = {a, r, 0, 0, TSR_DT_INT8}, mw = {wm, q, 0, 0, TSR_DT_INT8};
        rc = gemm_any(dev, pn, r, q, mat_get, &ma, mat_get, &mw, o, &cyc);
    }
    if (rc)
        goto fail;
fold:;
    const int32_t cz = off - x_zp;
    for (int co = 0; co < cout; co++) {
        int64_t sdy = 0;
        if (cz)
            for (int n = 0; n < p->n; n++)
                for (int i = 0; i < oh * ow; i++)
                    sdy += dy[((size_t)n * (size_t)cout + (size_t)co) * (size_t)oh * (size_t)ow + (size_t)i];
        const uint32_t fold = (uint32_t)(int32_t)(sdy * cz);
        for (int t = 0; t < cig * kk; t++) {
            const int32_t v = dwise ? o[(size_t)t * (size_t)q + (size_t)co] : o[(size_t)co * (size_t)q + (size_t)t];
            dw[(size_t)co * (size_t)cig * (size_t)kk + (size_t)t] = (int32_t)((uint32_t)v + fold);
        }
    }
    add_stats(st, conv_macs(p, oh, ow), cz ? (uint64_t)cout : 0, cyc);
    goto out;
fail:
    rc = tsr_err_prefix(rc, "%s: ", op);
out:
    free(a);
    free(wm);
    free(o);
    return rc;
}

/* ---- the forward's exact int32 sums (a training forward on weights wider than int8, as int8 parts) ---- */

int tsr_grad_dense_fwd(tsr_device_t *dev, int n, int k, int m, const void *x, tsr_dtype_e x_dtype, int32_t x_zp,
                       const int8_t *w, int32_t *y, tsr_grad_stats_t *st)
{
    const char *op = "grad dense fwd";
    int rc = check_dense(op, dev, n, k, m, x, w, y);
    if (rc || (rc = check_x(op, x_dtype, x_zp)) || (rc = check_sum(op, k, 128 * 255)))
        return rc;
    /* y [N][M] = g [N][K] * w^T [K][M], g = x - off; then + (off - x_zp) * SUM_k w[m][k] */
    mat_t a = {x, k, 0, 1, x_dtype}, b = {w, k, 1, 0, TSR_DT_INT8};
    uint64_t cyc = 0;
    if ((rc = gemm_any(dev, n, k, m, mat_get, &a, mat_get, &b, y, &cyc)))
        return tsr_err_prefix(rc, "%s [%d x %d] x [%d x %d]^T: ", op, n, k, m, k);
    const int32_t cz = tsr_dt_off(x_dtype) - x_zp;
    dense_zp_fold(m, cz, w, (size_t)k, 1, k, y, 1, (size_t)m, n); /* y[*][mm] += cz * SUM_k w[mm][k] */
    add_stats(st, (uint64_t)n * (uint64_t)m * (uint64_t)k, cz ? (uint64_t)m : 0, cyc);
    return TSR_OK;
}

/* The kernel's rows [*k0, *k1] that meet the input for some output row (the others meet only padding,
 * whose real value is 0: skipped), along one axis. */
static void fwd_crop(int in, int out, int k, int s, int pad, int *k0, int *k1)
{
    *k0 = k, *k1 = -1;
    for (int t = 0; t < k; t++)
        for (int o = 0; o < out; o++) {
            const int i = o * s + t - pad;
            if (i >= 0 && i < in) {
                *k0 = t < *k0 ? t : *k0;
                *k1 = t > *k1 ? t : *k1;
                break;
            }
        }
}

/* The forward (groups 1) as one stride-1 convolution GEMM gathered on chip: the stride's phases as
 * channels (space to depth): with taps ky = ky0 + sh*j + a (a < min(sh, KHc)), input row oy*sh + ky - pt
 * = sh*(oy + j) + a + ky0 - pt, so D[n][(ci, a, b)][r][t] = g(x[n][ci][sh*r + a + ky0 - pt][sw*t + b +
 * kx0 - pl]) and W[((ci, a, b), j, i)][co] = w[co][ci][ky0 + sh*j + a][kx0 + sw*i + b] (0 past the
 * kernel). est: only the estimated cycles (-1: no tiling). out [N][OH][OW][C_out]. */
static int conv_fwd_gather(tsr_device_t *dev, const tsr_grad_conv_t *p, const gsrc_t *gs, const int8_t *w, int oh,
                           int ow, const int kc[4], int32_t *out, uint64_t *cycles, double *est)
{
    const int sh = p->stride_h, sw = p->stride_w, cin = p->c_in, cout = p->c_out;
    const int khc = kc[1] - kc[0] + 1, kwc = kc[3] - kc[2] + 1;
    const int pa = imin(sh, khc), pb = imin(sw, kwc), nj = cdiv(khc, sh), ni = cdiv(kwc, sw);
    const int cr = cin * pa * pb, hy = oh + nj - 1, hx = ow + ni - 1, nt = nj * ni;
    cgemm_t g = {p->n, cr, cout, oh, ow, nj, ni, NULL, NULL, 0};
    if (est) {
        cgeo_t cg;
        *est = cgeo_init(tsr_device_config(dev), &g, &cg) ? -1 : cg.cost;
        tsr_err_clear();
        return TSR_OK;
    }
    int8_t *d = malloc((size_t)p->n * (size_t)cr * (size_t)hy * (size_t)hx);
    int8_t *wm = calloc((size_t)cr * (size_t)nt * (size_t)cout, 1);
    int rc = TSR_OK;
    if (!d || !wm)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    for (int n = 0; !rc && n < p->n; n++)
        for (int ci = 0; ci < cin; ci++)
            for (int a = 0; a < pa; a++)
                for (int b = 0; b < pb; b++)
                    for (int r = 0; r < hy; r++)
                        for (int t = 0; t < hx; t++)
                            d[((((size_t)n * (size_t)cin + (size_t)ci) * (size_t)(pa * pb) + (size_t)(a * pb + b)) *
                                   (size_t)hy + (size_t)r) * (size_t)hx + (size_t)t] =
                                g_at(gs, n, ci, sh * r + a + kc[0] - p->pad_top, sw * t + b + kc[2] - p->pad_left);
    for (int ci = 0; !rc && ci < cin; ci++)
        for (int a = 0; a < pa; a++)
            for (int b = 0; b < pb; b++)
                for (int j = 0; j < nj; j++)
                    for (int i = 0; i < ni; i++) {
                        const int ky = sh * j + a, kx = sw * i + b;
                        if (ky >= khc || kx >= kwc)
                            continue;
                        const size_t row = ((size_t)(ci * pa * pb + a * pb + b) * (size_t)nt + (size_t)(j * ni + i));
                        for (int co = 0; co < cout; co++)
                            wm[row * (size_t)cout + (size_t)co] =
                                w[(((size_t)co * (size_t)cin + (size_t)ci) * (size_t)p->kh + (size_t)(kc[0] + ky)) *
                                      (size_t)p->kw + (size_t)(kc[2] + kx)];
                    }
    if (!rc) {
        g.d = d;
        g.w = wm;
        rc = cgemm32(dev, &g, out, cycles);
    }
    free(d);
    free(wm);
    return rc;
}

/* The forward as the im2col GEMM (groups 1: A [pixel][(ci, tap)] of g, W [(ci, tap)][co]) or, depthwise,
 * lanes (A [c][pixel][tap], W [tap][c]); the kept taps kc. out [pixel][C_out]. */
static int conv_fwd_im2col(tsr_device_t *dev, const tsr_grad_conv_t *p, const gsrc_t *gs, const int8_t *w, int oh,
                           int ow, const int kc[4], int32_t *out, uint64_t *cycles)
{
    const int dwise = p->groups > 1, cin = p->c_in, cout = p->c_out, cig = cin / p->groups;
    const int khc = kc[1] - kc[0] + 1, kwc = kc[3] - kc[2] + 1, nt = khc * kwc;
    const int np_ = p->n * oh * ow, r = cig * nt, q = cout;
    int8_t *a = malloc((size_t)np_ * (size_t)r * (dwise ? (size_t)q : 1)), *wm = malloc((size_t)r * (size_t)q);
    int rc = TSR_OK;
    if (!a || !wm)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    for (int n = 0; !rc && n < p->n; n++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                const size_t pi = ((size_t)n * (size_t)oh + (size_t)oy) * (size_t)ow + (size_t)ox;
                for (int ci = 0; ci < cin; ci++)
                    for (int ty = 0; ty < khc; ty++)
                        for (int tx = 0; tx < kwc; tx++) {
                            const int8_t v = g_at(gs, n, ci, oy * p->stride_h + kc[0] + ty - p->pad_top,
                                                  ox * p->stride_w + kc[2] + tx - p->pad_left);
                            const size_t t = (size_t)ty * (size_t)kwc + (size_t)tx;
                            if (dwise)
                                a[((size_t)ci * (size_t)np_ + pi) * (size_t)nt + t] = v;
                            else
                                a[pi * (size_t)r + (size_t)ci * (size_t)nt + t] = v;
                        }
            }
    for (int co = 0; !rc && co < cout; co++)
        for (int cj = 0; cj < cig; cj++)
            for (int ty = 0; ty < khc; ty++)
                for (int tx = 0; tx < kwc; tx++) {
                    const int8_t v = w[(((size_t)co * (size_t)cig + (size_t)cj) * (size_t)p->kh + (size_t)(kc[0] + ty)) *
                                           (size_t)p->kw + (size_t)(kc[2] + tx)];
                    const size_t t = (size_t)ty * (size_t)kwc + (size_t)tx;
                    wm[(dwise ? t : (size_t)cj * (size_t)nt + t) * (size_t)q + (size_t)co] = v;
                }
    if (!rc && dwise)
        rc = gemm_lanes(dev, np_, r, q, a, wm, out, cycles);
    else if (!rc) {
        mat_t ma = {a, r, 0, 0, TSR_DT_INT8}, mw = {wm, q, 0, 0, TSR_DT_INT8};
        rc = gemm_any(dev, np_, r, q, mat_get, &ma, mat_get, &mw, out, cycles);
    }
    free(a);
    free(wm);
    return rc;
}

int tsr_grad_conv_fwd(tsr_device_t *dev, const tsr_grad_conv_t *p, uint64_t dev_budget, const void *x,
                      tsr_dtype_e x_dtype, int32_t x_zp, const int8_t *w, int32_t *y, tsr_grad_stats_t *st)
{
    const char *op = "grad conv fwd";
    int oh, ow, rc = check_conv(op, dev, p, x, w, y, 2, &oh, &ow);
    if (rc || (rc = check_x(op, x_dtype, x_zp)))
        return rc;
    const int dwise = p->groups > 1, cout = p->c_out, cig = p->c_in / p->groups;
    const int32_t off = tsr_dt_off(x_dtype);
    const gsrc_t gs = {p, x, x_dtype, off, (int8_t)(x_zp - off)};
    int kc[4];
    fwd_crop(p->h, oh, p->kh, p->stride_h, p->pad_top, &kc[0], &kc[1]);
    fwd_crop(p->w, ow, p->kw, p->stride_w, p->pad_left, &kc[2], &kc[3]);
    const size_t opix = (size_t)oh * (size_t)ow, np_ = (size_t)p->n * opix;
    if (kc[1] < 0 || kc[3] < 0) { /* every tap on padding: the sums are 0 */
        memset(y, 0, np_ * (size_t)cout * sizeof *y);
        return TSR_OK;
    }
    int32_t *o = malloc(np_ * (size_t)cout * sizeof *o);
    uint64_t cyc = 0;
    if (!o)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int gather = 0;
    if (!dwise) {
        double ec = -1;
        conv_fwd_gather(dev, p, &gs, w, oh, ow, kc, NULL, NULL, &ec);
        uint64_t gb = 0;
        const int nt = (kc[1] - kc[0] + 1) * (kc[3] - kc[2] + 1);
        const double eg = est_gemm(tsr_device_config(dev), (int)np_, cig * nt, cout, &gb);
        gather = take_gather(ec, eg, gb, dev_budget);
    }
    rc = gather ? conv_fwd_gather(dev, p, &gs, w, oh, ow, kc, o, &cyc, NULL)
                : conv_fwd_im2col(dev, p, &gs, w, oh, ow, kc, o, &cyc);
    if (rc) {
        free(o);
        return tsr_err_prefix(rc, "%s: ", op);
    }
    /* [pixel][co] -> [n][co][pixel], plus the zero-point fold over the kept taps */
    const int32_t cz = off - x_zp;
    for (int co = 0; co < cout; co++) {
        int64_t sw_ = 0;
        for (int cj = 0; cz && cj < cig; cj++)
            for (int ky = kc[0]; ky <= kc[1]; ky++)
                for (int kx = kc[2]; kx <= kc[3]; kx++)
                    sw_ += w[(((size_t)co * (size_t)cig + (size_t)cj) * (size_t)p->kh + (size_t)ky) * (size_t)p->kw +
                             (size_t)kx];
        const uint32_t fold = (uint32_t)(int32_t)(sw_ * cz);
        for (int n = 0; n < p->n; n++)
            for (size_t i = 0; i < opix; i++)
                y[((size_t)n * (size_t)cout + (size_t)co) * opix + i] =
                    (int32_t)((uint32_t)o[((size_t)n * opix + i) * (size_t)cout + (size_t)co] + fold);
    }
    free(o);
    add_stats(st, conv_macs(p, oh, ow), cz ? (uint64_t)cout : 0, cyc);
    return TSR_OK;
}
