/*
 * tsr_pool_emit: the pool stream and uops (tsr_pool_emit.h; the data path
 * is described in tsr_pool.h).
 *
 * On-chip layout (q = input half of tile/step, pa = accumulator region of
 * the tile, REGION = acc_depth / NBA, WR = (TOW-1)*SW + KW the on-chip
 * input row, XW = WR for max, TOW for avg):
 *   inp  q*INP_HALF + cl*ROWS_IN*WR + y*WR + x           (global: q*INP_HALF + cl*CHUNK + i)
 *   acc  region pa at pa*REGION: NCONST constants, MAP (TOH*TOW rows, map
 *        only), X (separable forms: cl*ROWS_IN*XW + y*XW + x), then
 *        O + cl*TOH*TOW + oy*TOW + ox                    (global: O + cl)
 *   wgt  row 0: the identity.
 * Tokens (as in conv2d): load->compute "tile/step loaded"; compute->load
 * "input half free" (pushed by the GEMM that consumes it, popped by the
 * first LOAD NBI steps later); compute->store "O half ready" (last compute
 * instruction of the tile); store->compute "O half drained" (last STORE,
 * popped by the first instruction writing that half NBA tiles later, or
 * by FINISH).
 */
#include "tsr_pool_emit.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_jitutil.h"

const char *tsr_pool_emit_id(void) { return "pool emit, built " __DATE__ " " __TIME__; }

/* One ALU or GEMM instruction with its loops (a factor is 0 when its loop
 * runs once, so it never has to fit its field needlessly). */
static tsr_insn_t *loop_op(ibuf_t *b, uint32_t opcode, uint32_t alu_op, int ubgn, int nu, int io, long dfo,
                           long sfo, int ii, long dfi, long sfi)
{
    tsr_insn_t *in = opcode == TSR_OP_GEMM ? tsr_stream_gemm(&b->s, (uint32_t)ubgn, (uint32_t)(ubgn + nu), 0)
                                           : tsr_stream_alu(&b->s, alu_op, (uint32_t)ubgn, (uint32_t)(ubgn + nu));
    tsr_stream_loops(in, (uint32_t)io, io > 1 ? (uint32_t)dfo : 0, io > 1 ? (uint32_t)sfo : 0, (uint32_t)ii,
                     ii > 1 ? (uint32_t)dfi : 0, ii > 1 ? (uint32_t)sfi : 0);
    b->ops += (uint64_t)io * (uint64_t)ii * (uint64_t)nu;
    if (opcode == TSR_OP_GEMM)
        b->gops += (uint64_t)io * (uint64_t)ii * (uint64_t)nu;
    return in;
}

static tsr_insn_t *alu_imm(ibuf_t *b, uint32_t op, int ubgn, int io, long dfo, int ii, int32_t imm)
{
    tsr_insn_t *in = loop_op(b, TSR_OP_ALU, op, ubgn, 1, io, dfo, 0, ii, 1, 0);
    in->use_imm = 1;
    in->imm = imm;
    return in;
}

/* Division of the O region pa (rows: io blocks of ii, block pitch dfo);
 * returns the last instruction, or NULL if the division is empty. */
static tsr_insn_t *emit_division(const geo_t *g, ibuf_t *b, int pa, int tco, int toh, int io, long dfo, int ii)
{
    tsr_insn_t *last = NULL;
    if (g->div_kind == 1)
        last = alu_imm(b, TSR_ALU_RSHR, g->u_imm + pa, io, dfo, ii, g->div_e);
    if (g->div_kind == 3) /* the raw sum times 2^-e (constant row 1), rounded half to even */
        last = loop_op(b, TSR_OP_ALU, TSR_ALU_FSCALE, g->u_mul + pa, 1, io, dfo, 0, ii, 1, 0);
    if (g->div_kind == 2) {
        if (g->div_k)
            last = alu_imm(b, TSR_ALU_SHR, g->u_imm + pa, io, dfo, ii, -g->div_k);
        if (g->use_map)
            last = loop_op(b, TSR_OP_ALU, TSR_ALU_MULHR, g->u_mul + pa * g->t.tco, tco, toh, g->t.tow, g->t.tow,
                           g->t.tow, 1, 1);
        else
            last = loop_op(b, TSR_OP_ALU, TSR_ALU_MULHR, g->u_mul + pa, 1, io, dfo, 0, ii, 1, 0);
        if (g->div_e)
            last = alu_imm(b, TSR_ALU_RSHR, g->u_imm + pa, io, dfo, ii, g->div_e);
    }
    if (g->y_off) /* the average of raw values, re-centred after the rounding (operators.md) */
        last = alu_imm(b, TSR_ALU_ADD, g->u_imm + pa, io, dfo, ii, -g->y_off);
    return last;
}

static void emit_prologue(const geo_t *g, ibuf_t *b)
{
    tsr_stream_uops(&b->s, g->uop_el, (uint32_t)g->nuops);
    for (int pa = 0; pa < g->t.nba && g->nconst; pa++) /* a copy of the constants in each region */
        tsr_stream_load(&b->s, TSR_MEM_ACC, (uint32_t)reg_base(g, pa), g->c_el, 1, (uint32_t)g->nconst,
                        (uint32_t)g->nconst);
}

static tsr_insn_t *emit_identity_load(const geo_t *g, ibuf_t *b)
{
    return tsr_stream_load(&b->s, TSR_MEM_WGT, 0, g->w_el, 1, 1, 1);
}

/* Store tco blocks of O region pa (each block rows x_size long, pitch
 * `pitch` on chip) to DRAM element dram (block stride plane). */
static void emit_store(const geo_t *g, ibuf_t *b, int t, int pa, int tco, int x_size, int pitch, uint32_t dram,
                       long plane)
{
    int one = tco == 1 || (x_size == pitch && plane <= 0xffff);
    int nst = one ? 1 : tco;
    tsr_stream_wait(&b->s, TSR_Q_CMP2ST);
    for (int k = 0; k < nst; k++) {
        const uint32_t y = (uint32_t)(one ? tco : 1);
        tsr_stream_store(&b->s, (uint32_t)(o_base(g, pa) + k * pitch), dram + (uint32_t)(k * plane), y,
                         (uint32_t)x_size, one && tco > 1 ? (uint32_t)plane : (uint32_t)x_size);
        b->sbytes += (uint64_t)y * (uint32_t)x_size * g->c->out_bytes;
    }
    if (t < g->tiles - g->t.nba || t == g->tiles - 1) /* frees region pa for tile t+NBA, or for FINISH */
        tsr_stream_signal(&b->s, TSR_Q_ST2CMP);
}

/* What a window tile needs after its loads (computed once per tile). */
typedef struct {
    int t, nb, rt, wt, ct, q, pa, cb0, tco, ox0;
    rowgeo_t r;
} wtile_t;

static void window_tile(const geo_t *g, int t, wtile_t *w)
{
    int i = t;
    w->t = t;
    w->ct = i % g->n_ct;
    i /= g->n_ct;
    int rw = i % (g->n_rt * g->n_wt);
    w->nb = i / (g->n_rt * g->n_wt);
    w->rt = rw / g->n_wt;
    w->wt = rw % g->n_wt;
    w->q = t % g->t.nbi;
    w->pa = t % g->t.nba;
    w->cb0 = w->ct * g->t.tco;
    w->tco = imin(g->t.tco, g->cb - w->cb0);
    w->ox0 = imin(w->wt * g->t.tow, g->ow - g->t.tow); /* the last column tile is shifted left */
    tsr_pool_row_tile(g, w->rt, &w->r);
}

/* Load stage of window tile w. */
static void emit_window_loads(const geo_t *g, ibuf_t *b, const wtile_t *w)
{
    const tsr_pool_params_t *p = g->p;
    const int RW = g->rows_in * g->wr;
    tsr_span_t cs;
    tsr_span(w->ox0 * p->stride_w - p->pad_left, g->wr, 1, p->w, &cs);
    const int cpad0 = cs.pad0, creal = cs.real, cpad1 = cs.pad1, cfirst = cs.first;
    if (w->t >= g->t.nbi) /* half q free again (tile t-NBI's GEMMs) */
        tsr_stream_wait(&b->s, TSR_Q_CMP2LD);
    if (w->t == 0)
        emit_identity_load(g, b);
    for (int cl = 0; cl < w->tco; cl++) {
        tsr_insn_t *in = tsr_stream_load(
            &b->s, TSR_MEM_INP, (uint32_t)(w->q * g->inp_half + cl * RW),
            g->x_el + (uint32_t)((((long)w->nb * g->cb + w->cb0 + cl) * p->h + w->r.iy_first) * p->w + cfirst),
            (uint32_t)w->r.real, (uint32_t)creal, (uint32_t)p->w);
        in->y_pad0 = (uint32_t)w->r.pad0;
        in->y_pad1 = (uint32_t)w->r.pad1;
        in->x_pad0 = (uint32_t)cpad0;
        in->x_pad1 = (uint32_t)cpad1;
        in->pad_value = g->pad_value;
    }
    tsr_stream_signal(&b->s, TSR_Q_LD2CMP);
}

/* Multiplier map of tile w into MAP(pa), if that region holds another one. */
static void emit_map_load(const geo_t *g, ibuf_t *b, const wtile_t *w, long *map_key)
{
    if (!g->use_map)
        return;
    long key = (long)(tsr_pool_rows_interior(g, w->rt) ? g->n_rt : w->rt) * g->n_wt + w->wt;
    if (map_key[w->pa] == key)
        return;
    const tsr_config_t *c = g->c;
    tsr_stream_load(&b->s, TSR_MEM_ACC, (uint32_t)map_base(g, w->pa),
                    g->c_el + (uint32_t)(g->nconst + (long)w->r.oy0 * g->ow + w->ox0), (uint32_t)g->t.toh,
                    (uint32_t)g->t.tow, (uint32_t)g->ow);
    b->ops += (uint64_t)g->t.toh * g->t.tow * c->acc_bytes / (uint64_t)(c->dram_bus_width / 8);
    map_key[w->pa] = key;
}

/* Store stage of window tile w. */
static void emit_window_store(const geo_t *g, ibuf_t *b, const wtile_t *w)
{
    const int TOH = g->t.toh, OW = g->t.tow, FULL_OW = g->ow;
    const uint32_t ydram =
        g->y_el + (uint32_t)((((long)w->nb * g->cb + w->cb0) * g->oh + w->r.oy0) * FULL_OW + w->ox0);
    if (OW == FULL_OW) {
        emit_store(g, b, w->t, w->pa, w->tco, w->r.toh * OW, TOH * OW, ydram, (long)g->oh * OW);
        return;
    }
    tsr_stream_wait(&b->s, TSR_Q_CMP2ST);
    for (int k = 0; k < w->tco; k++) { /* column tiles: r.toh rows of OW per block */
        tsr_stream_store(&b->s, (uint32_t)(o_base(g, w->pa) + k * TOH * OW),
                         ydram + (uint32_t)((long)k * g->oh * FULL_OW), (uint32_t)w->r.toh, (uint32_t)OW,
                         (uint32_t)FULL_OW);
        b->sbytes += (uint64_t)w->r.toh * OW * g->c->out_bytes;
    }
    if (w->t < g->tiles - g->t.nba || w->t == g->tiles - 1)
        tsr_stream_signal(&b->s, TSR_Q_ST2CMP);
}

/* Separable forms, GEMM part of tile w: X = 0, then X += the input rows
 * (max) or the KW taps of each output column (avg). Its GEMM frees the
 * input half. */
static void emit_sep_gemm(const geo_t *g, ibuf_t *b, const wtile_t *w)
{
    const tsr_pool_params_t *p = g->p;
    const int TCO = g->t.tco, XW = g->xw, is_max = g->kind == TSR_POOL_MAX, nk = is_max ? 1 : p->kw;
    tsr_insn_t *in = loop_op(b, TSR_OP_GEMM, 0, g->u_xinit + w->pa * TCO, w->tco, w->r.rows, XW, 0, XW, 1, 0);
    in->reset = 1;
    tsr_stream_wait(&b->s, TSR_Q_LD2CMP);
    loop_op(b, TSR_OP_GEMM, 0, g->u_copy + kern_set(g, w->q, w->pa) * TCO * nk, w->tco * nk, w->r.rows, XW, g->wr,
            is_max ? g->wr : g->t.tow, 1, is_max ? 1 : p->stride_w);
    if (w->t < g->tiles - g->t.nbi)
        tsr_stream_signal(&b->s, TSR_Q_CMP2LD);
}

/* Separable forms, ALU part of tile w: (max) horizontal max in place,
 * vertical mov + max/add into O, the offset (uint8), the division (avg).
 * Hands O to STORE. */
static void emit_sep_alu(const geo_t *g, ibuf_t *b, const wtile_t *w, long *map_key)
{
    const tsr_pool_params_t *p = g->p;
    const int TCO = g->t.tco, TOH = g->t.toh, OW = g->t.tow, XW = g->xw, is_max = g->kind == TSR_POOL_MAX;
    const int sw = p->stride_w, sh = p->stride_h, pa = w->pa, tco = w->tco;
    emit_map_load(g, b, w, map_key);
    if (is_max && p->kw > 1) /* in place: every source is read before it is overwritten */
        loop_op(b, TSR_OP_ALU, TSR_ALU_MAX, g->u_h + pa * TCO * (p->kw - 1), tco * (p->kw - 1), w->r.rows, XW, XW,
                OW, sw, sw);
    const int vsi = is_max ? sw : 1;
    if (w->t >= g->t.nba) /* O(pa) drained by tile t-NBA's STORE */
        tsr_stream_wait(&b->s, TSR_Q_ST2CMP);
    loop_op(b, TSR_OP_ALU, TSR_ALU_MOV, g->u_vmov + pa * TCO, tco, w->r.toh, OW, (long)sh * XW, OW, 1, vsi);
    if (p->kh > 1)
        loop_op(b, TSR_OP_ALU, is_max ? TSR_ALU_MAX : TSR_ALU_ADD, g->u_vmax + pa * TCO * (p->kh - 1),
                       tco * (p->kh - 1), w->r.toh, OW, (long)sh * XW, OW, 1, vsi);
    if (g->off) { /* back to raw values: + off (max), + KH*KW*off (avg, constant row 0) */
        if (is_max)
            alu_imm(b, TSR_ALU_ADD, g->u_imm + pa, tco, (long)TOH * OW, w->r.toh * OW, g->off);
        else
            loop_op(b, TSR_OP_ALU, TSR_ALU_ADD, g->u_c0 + pa, 1, tco, (long)TOH * OW, 0, w->r.toh * OW, 1, 0);
    }
    if (!is_max)
        emit_division(g, b, pa, tco, w->r.toh, tco, (long)TOH * OW, w->r.toh * OW);
    tsr_stream_signal(&b->s, TSR_Q_CMP2ST);
}

/* Direct avgpool, compute of tile w: O = KH*KW*off, GEMM window sums,
 * division. */
static void emit_direct(const geo_t *g, ibuf_t *b, const wtile_t *w, long *map_key)
{
    const tsr_pool_params_t *p = g->p;
    const int TCO = g->t.tco, TOH = g->t.toh, OW = g->t.tow, pa = w->pa, tco = w->tco;
    emit_map_load(g, b, w, map_key);
    if (w->t >= g->t.nba)
        tsr_stream_wait(&b->s, TSR_Q_ST2CMP);
    loop_op(b, TSR_OP_ALU, TSR_ALU_MOV, g->u_init + pa, 1, tco, (long)TOH * OW, 0, w->r.toh * OW, 1, 0);
    tsr_stream_wait(&b->s, TSR_Q_LD2CMP);
    loop_op(b, TSR_OP_GEMM, 0, g->u_sum + kern_set(g, w->q, pa) * TCO * g->kk, tco * g->kk, w->r.toh, OW,
            (long)p->stride_h * g->wr, OW, 1, p->stride_w);
    if (w->t < g->tiles - g->t.nbi)
        tsr_stream_signal(&b->s, TSR_Q_CMP2LD);
    emit_division(g, b, pa, tco, w->r.toh, tco, (long)TOH * OW, w->r.toh * OW);
    tsr_stream_signal(&b->s, TSR_Q_CMP2ST);
}

/* maxpool / avgpool: one step per tile. With two accumulator regions (one
 * bank each) the separable forms are software-pipelined: the GEMMs of tile
 * t+1 are issued before the ALU work of tile t, so the compute stage's GEMM
 * pipe fills X(t+1) while its ALU pipe reduces X(t) (the RTL's bank rule;
 * the semantics are in order either way, and the regions are disjoint). */
static void build_window(const geo_t *g, ibuf_t *b)
{
    long map_key[2] = {-1, -1};
    const int pipelined = g->t.sep && g->t.nba == 2;
    emit_prologue(g, b);
    wtile_t prev, cur;
    for (int t = 0; t < g->tiles; t++) {
        window_tile(g, t, &cur);
        emit_window_loads(g, b, &cur);
        if (!g->t.sep) {
            emit_direct(g, b, &cur, map_key);
            emit_window_store(g, b, &cur);
            continue;
        }
        emit_sep_gemm(g, b, &cur);
        if (!pipelined) {
            emit_sep_alu(g, b, &cur, map_key);
            emit_window_store(g, b, &cur);
            continue;
        }
        if (t > 0) {
            emit_sep_alu(g, b, &prev, map_key);
            emit_window_store(g, b, &prev);
        }
        prev = cur;
    }
    if (pipelined) {
        emit_sep_alu(g, b, &prev, map_key);
        emit_window_store(g, b, &prev);
    }
    tsr_stream_finish(&b->s);
}

/* global average pool: steps = tiles x chunks of the flattened plane. */
static void build_global(const geo_t *g, ibuf_t *b)
{
    const tsr_pool_params_t *p = g->p;
    const int TCO = g->t.tco, NBI = g->t.nbi, NBA = g->t.nba, HW = p->h * p->w, CH = g->t.chunk;
    emit_prologue(g, b);
    int t = 0, s = 0;
    for (int nb = 0; nb < g->nb; nb++)
        for (int ct = 0; ct < g->n_ct; ct++, t++) {
            const int pa = t % NBA, cb0 = ct * TCO, tco = imin(TCO, g->cb - cb0);
            for (int ch = 0; ch < g->chunks; ch++, s++) {
                const int q = s % NBI, e0 = ch * CH, len = imin(CH, HW - e0);
                /* ---- load stage ---- */
                if (s >= NBI) /* half q free again */
                    tsr_stream_wait(&b->s, TSR_Q_CMP2LD);
                if (s == 0)
                    emit_identity_load(g, b);
                /* one LOAD for all blocks, unless the last chunk is short (the
                 * on-chip pitch must stay CH) or the plane is too long for x_stride */
                const int per_block = (len != CH || HW > 0xffff) && tco > 1;
                for (int k = 0; k < (per_block ? tco : 1); k++) {
                    const uint32_t y = (uint32_t)(per_block ? 1 : tco);
                    tsr_stream_load(&b->s, TSR_MEM_INP, (uint32_t)(q * g->inp_half + k * CH),
                                    g->x_el + (uint32_t)(((long)nb * g->cb + cb0 + k) * HW + e0), y, (uint32_t)len,
                                    y == 1 ? (uint32_t)len : (uint32_t)HW);
                }
                tsr_stream_signal(&b->s, TSR_Q_LD2CMP);
                /* ---- compute stage ---- */
                if (ch == 0) {
                    if (t >= NBA)
                        tsr_stream_wait(&b->s, TSR_Q_ST2CMP);
                    loop_op(b, TSR_OP_ALU, TSR_ALU_MOV, g->u_init + pa, 1, 1, 0, 0, tco, 1, 0);
                }
                tsr_stream_wait(&b->s, TSR_Q_LD2CMP);
                loop_op(b, TSR_OP_GEMM, 0, g->u_sum + kern_set(g, q, pa) * TCO, tco, 1, 0, 0, len, 0, 1);
                if (s < g->steps - NBI)
                    tsr_stream_signal(&b->s, TSR_Q_CMP2LD);
                if (ch != g->chunks - 1)
                    continue;
                emit_division(g, b, pa, tco, 1, 1, 0, tco);
                tsr_stream_signal(&b->s, TSR_Q_CMP2ST);
                emit_store(g, b, t, pa, 1, tco, tco, g->y_el + (uint32_t)((long)nb * g->cb + cb0), 0);
            }
        }
    tsr_stream_finish(&b->s);
}

void tsr_pool_build(const geo_t *g, ibuf_t *b)
{
    if (g->glob)
        build_global(g, b);
    else
        build_window(g, b);
}

/* Encode g's uops into a host buffer (*out, g->nuops * uop_bytes; malloc'ed). */
int tsr_pool_encode_uops(geo_t *g, uint8_t **out)
{
    size_t n = (size_t)g->nuops;
    tsr_uop_t *u = calloc(n ? n : 1, sizeof *u);
    *out = NULL;
    if (!u)
        return tsr_err(TSR_ENOMEM, "out of memory");
    tsr_pool_layout_uops(g, u);
    int rc = tsr_jit_pack_uops(g->c, u, n, out);
    free(u);
    return rc;
}

