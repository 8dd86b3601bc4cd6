/* tsr_conv2d_geo: the geometry of a conv2d plan (tsr_conv2d_geo.h). */
#include "tsr_conv2d_geo.h"

#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_jitutil.h"

void tsr_conv2d_col_tile(const geo_t *g, int wt, colgeo_t *cg)
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

void tsr_conv2d_row_tile(const geo_t *g, int rt, rowgeo_t *r)
{
    const tsr_conv2d_params_t *p = g->p;
    tsr_row_tile(rt, g->t.toh, g->oh, p->kh, p->stride_h, p->pad_top, p->h, g->row_step, r);
}

/* Kernel (uop range) for GEMM of acc half pa, inp/wgt half q, block cl. */
/* Uop buffer: first the ALU uops of each acc region (1 + NCONST each), then
 * the GEMM kernels of the (inp slot, wgt slot, acc region) sets the stream
 * uses, numbered in order of first use. */
uint32_t tsr_conv2d_kern_base(const geo_t *g, ibuf_t *b, int qi, int qw, int pa, int cl)
{
    if (!b->set_map[qi][qw][pa])
        b->set_map[qi][qw][pa] = (int8_t)++b->n_sets;
    int set = b->set_map[qi][qw][pa] - 1;
    if (g->dwk)
        return (uint32_t)(g->t.nba * (1 + g->nconst) + tsr_conv2d_fuse_nuops(g) + set * tsr_conv2d_dw_set_uops(g));
    return (uint32_t)(g->t.nba * (1 + g->nconst) + tsr_conv2d_fuse_nuops(g) +
                      set * tsr_conv2d_kern_len(g, 0, g->t.tco) + tsr_conv2d_kern_len(g, 0, cl));
}
int tsr_conv2d_kern_len(const geo_t *g, int c0, int c1)
{
    return (g->wskip ? g->wpre[c1] - g->wpre[c0] : (c1 - c0) * g->nci) * g->kk;
}
int tsr_conv2d_in_used(const geo_t *g, int c0, int c1, int ib)
{
    for (int ob = c0; ob < c1; ob++)
        if (tsr_conv2d_wkeep(g, ob, ib))
            return 1;
    return 0;
}
int tsr_conv2d_res_keep(const geo_t *g, int c0, int c1, int ob, int ib)
{
    return tsr_conv2d_wkeep(g, ob, ib) || (ob == c0 && !tsr_conv2d_in_used(g, c0, c1, ib));
}
int tsr_conv2d_res_len(const geo_t *g, int c0, int c1, int cib0, int i0, int i1)
{
    if (!g->wskip)
        return (i1 - i0) * (c1 - c0) * g->kk;
    int n = 0;
    for (int i = i0; i < i1; i++)
        for (int ob = c0; ob < c1; ob++)
            n += tsr_conv2d_res_keep(g, c0, c1, ob, cib0 + i);
    return n * g->kk;
}
int tsr_conv2d_dw_set_uops(const geo_t *g) { return g->nci * g->dwg * g->t.toh * g->t.tow; }
uint32_t tsr_conv2d_dw_kern(const geo_t *g, ibuf_t *b, int qi, int qw, int pa, int ci, int gk)
{
    return tsr_conv2d_kern_base(g, b, qi, qw, pa, 0) + (uint32_t)((ci * g->dwg + gk) * g->t.toh * g->t.tow);
}
int tsr_conv2d_n_uops_sets(const geo_t *g, int sets)
{
    const int per_set = g->dwk ? tsr_conv2d_dw_set_uops(g) : tsr_conv2d_kern_len(g, 0, g->t.tco);
    return g->t.nba * (1 + g->nconst) + tsr_conv2d_fuse_nuops(g) + sets * per_set;
}
int tsr_conv2d_fuse_nuops(const geo_t *g) { return g->fuse ? FUSE_UOPS * g->t.nba : 0; }
uint32_t tsr_conv2d_fuse_uop(const geo_t *g, int pa, int j)
{
    return (uint32_t)((g->t.res ? 0 : g->t.nba * (1 + g->nconst)) + pa * FUSE_UOPS + j);
}
/* Behind the tile's rows (and, outside resident mode, behind the constant
 * rows a region may hold): the tiling fit check counts both. */
uint32_t tsr_conv2d_fuse_base(const geo_t *g, int pa)
{
    const int tile = g->t.tco * g->t.toh * g->t.tow;
    return tsr_conv2d_acc_base(g, pa) + (uint32_t)(tile + (g->t.res ? 0 : g->t.tco * g->nconst));
}
uint32_t tsr_conv2d_fuse_const(const geo_t *g, int pa)
{
    return tsr_conv2d_fuse_base(g, pa) + (uint32_t)(g->t.tco * g->t.toh * g->t.tow);
}
void tsr_conv2d_fuse_const_values(const tsr_conv2d_params_t *p, const tsr_add_params_t *a,
                                  int32_t v[TSR_ADD_NCONST])
{
    tsr_add_const_values(a, v);
    for (int k = 0; k < 2; k++) /* mult_a, mult_b: a mul's factor where it replaces shl + mulhr */
        if (tsr_conv2d_fuse_mul(a, v[k]))
            v[k] >>= 31 - a->left_shift;
    if (tsr_conv2d_fuse_fold_c(p, a)) { /* (modulo 2^32: the ALU's add and mul wrap) */
        int64_t cst = a->bias_once - (int64_t)a->b.zp * v[1];
        if (!tsr_conv2d_fuse_fold_zp(p, a))
            cst -= (int64_t)a->a.zp * v[0];
        v[2] = (int32_t)(uint32_t)(uint64_t)cst;
    }
}
int tsr_conv2d_n_uops(const geo_t *g) { return g->t.res ? g->nuops_res : tsr_conv2d_n_uops_sets(g, g->n_sets); }

/* Resident mode: uop base of a kernel, appended on first use. */
uint32_t tsr_conv2d_res_kernel(ibuf_t *b, int alu, int pa, int islot, int c0, int c1, int j, int n)
{
    const uint32_t h = ((uint32_t)alu * 0x9e3779b1u ^ (uint32_t)pa * 0x85ebca77u ^ (uint32_t)islot * 0xc2b2ae3du ^
                        (uint32_t)c0 * 0x27d4eb2fu ^ (uint32_t)c1 * 0x165667b1u ^ (uint32_t)j * 0xd3a2646cu) >> 26;
    for (int32_t i = b->khead[h]; i > 0; i = b->kern[i - 1].next) {
        const res_kern_t *k = &b->kern[i - 1];
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
    b->kern[b->nkern] = (res_kern_t){(int16_t)alu, (int16_t)pa, (int16_t)islot, (int16_t)c0, (int16_t)c1,
                                     (int16_t)j, b->nuops, n, b->khead[h]};
    b->khead[h] = ++b->nkern;
    b->nuops += n;
    return (uint32_t)(b->nuops - n);
}

/* Resident mode: each bank's constant copy is split in sections, one per
 * constant row kind k (bias, M, rqfin[, shifts]), each holding the rows of
 * all output blocks in block order, or a single row when the value is the
 * same for every channel (per-tensor requantization: only the bias differs). */
int tsr_conv2d_sec_shared(int rq_count, int k) { return k > 0 && rq_count == 1; }
int tsr_conv2d_sec_off(int rq_count, int cob, int k)
{
    int o = 0;
    for (int i = 0; i < k; i++)
        o += tsr_conv2d_sec_shared(rq_count, i) ? 1 : cob;
    return o;
}
int tsr_conv2d_res_shared(const geo_t *g, int k) { return tsr_conv2d_sec_shared(g->p->rq_count, k); }
int tsr_conv2d_res_sec_off(const geo_t *g, int k) { return tsr_conv2d_sec_off(g->p->rq_count, g->cob, k); }
/* source row step per output block of constant row k (0 when shared) */
uint32_t tsr_conv2d_const_step(const geo_t *g, int k)
{
    return g->t.res ? (uint32_t)!tsr_conv2d_res_shared(g, k) : (uint32_t)g->nconst;
}

/* ALU uop of region pa: k = -1 the imm uop, else constant row k (of output
 * block c0 in resident mode, whose constants live in the bank's copy). */
uint32_t tsr_conv2d_alu_uop_b(const geo_t *g, ibuf_t *b, int pa, int c0, int k)
{
    if (!g->t.res)
        return (uint32_t)(pa * (1 + g->nconst) + 1 + k);
    return tsr_conv2d_res_kernel(b, 1, pa, 0, c0, c0, 0, 1 + g->nconst) + (uint32_t)(1 + k);
}
/* Accumulator bank (index MSB) region pa lies in, -1 if it spans both. */
int tsr_conv2d_acc_bank(const geo_t *g, int pa)
{
    return g->t.nba == 4 ? pa % 2 : g->t.nba == 2 ? pa : -1;
}
/* Accumulator region pa. With four regions, consecutive tiles alternate
 * between the two accumulator banks (index MSB): region pa lies in bank
 * pa % 2, so the GEMMs of tile t+1 and the requantization of tile t always
 * use different banks and the compute stage runs them at once. */
uint32_t tsr_conv2d_acc_base(const geo_t *g, int pa)
{
    if (g->t.res)
        return (uint32_t)((pa % 2) * (int)(g->c->acc_depth / 2) + (pa / 2) * g->region_rows);
    if (g->t.nba == 4)
        return (uint32_t)((pa % 2) * (int)(g->c->acc_depth / 2) + (pa / 2) * g->acc_half);
    return (uint32_t)(pa * g->acc_half);
}
/* Constant rows of region pa. With four regions the two regions of a bank
 * share one copy (loaded once per bank, not per region). */
int tsr_conv2d_const_slot(const geo_t *g, int pa) { return g->t.nba == 4 ? pa % 2 : pa; }
uint32_t tsr_conv2d_const_base(const geo_t *g, int pa)
{
    return tsr_conv2d_acc_base(g, tsr_conv2d_const_slot(g, pa)) + (uint32_t)(g->t.tco * g->t.toh * g->t.tow);
}



/* The resident-mode tile sequence (into out unless NULL); returns its length.
 * Per row tile, output-channel tiles of TCO blocks; with t.tail the last
 * row tile ends in tiles of halving size (8, 4, 2, 1, 1 blocks), so that
 * the requantization and store left after the last GEMM are short. */
int tsr_conv2d_res_tiles(const geo_t *g, res_tile_t *out)
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

void tsr_conv2d_dw_off(geo_t *g)
{
    g->dwk = g->dwg = 0;
    g->wshare = 0; /* (the block-diagonal path packs every block) */
    g->kk = g->p->kh * g->p->kw;
    g->wgpr = 1;
    g->wkk = g->kk;
    g->wtight = 0;
}

int tsr_conv2d_dw_wrows(const geo_t *g, int nblk)
{
    return g->wtight ? cdiv(nblk * g->kk, g->wgpr) : nblk * g->nci * g->wkk;
}
int tsr_conv2d_dw_part_groups(const geo_t *g) { return g->wtight ? g->kk : g->wkk * g->wgpr; }
int tsr_conv2d_dw_blk_groups(const geo_t *g) { return g->nci * tsr_conv2d_dw_part_groups(g); }

void tsr_conv2d_set_tiling(geo_t *g, const tiling_t *t)
{
    const tsr_conv2d_params_t *p = g->p;
    g->t = *t;
    g->row_step = (p->kh == 1 && p->stride_h > 1) ? p->stride_h : 1;
    g->rows_in = g->row_step == 1 ? (t->toh - 1) * p->stride_h + p->kh : t->toh;
    g->n_rt = cdiv(g->oh, t->toh);
    g->n_wt = cdiv(g->ow, t->tow);
    /* (depthwise mode: the last group's K taps may pass KW; the row holds
     * every column an op reads, the ones past KW meeting zero weights) */
    g->wr = (t->tow - 1) * p->stride_w + (g->dwk ? g->dwg * g->dwk : p->kw);
    g->n_ct = cdiv(g->cob, t->tco);
    g->wtight = g->dwk && g->wgpr > 1 && g->wsplit == 1 && !g->wshare &&
                (g->n_ct == 1 || (t->tco * g->kk) % g->wgpr == 0);
    g->chunks = cdiv(g->dw ? g->wsplit : g->cib, t->tci); /* depthwise: chunks of weight parts */
    g->tiles = g->nb * g->n_rt * g->n_wt * g->n_ct;
    g->steps = g->tiles * g->chunks;
    g->nci = t->tci; /* uops per output block and tap: input blocks, or (depthwise) weight parts */
    g->wskip = g->wnz && !g->dw && !g->dwk && (t->res || (g->chunks == 1 && g->n_ct == 1));
    /* With one chunk per tile and equal rotations, step s = tile t: the
     * inp/wgt buffer and the acc buffer always agree. */
    /* one kernel per (input slot, weight slot, acc region): the input and
     * weight buffers rotate independently, each when its contents change */
    g->kern_sets = t->nbi * t->nbi * t->nba;
    g->inp_half = (int)g->c->inp_depth / t->nbi;
    /* (depthwise mode: slots in the first WGT_DEPTH / G rows, whose groups a
     * uop's wgt field, WGT_IDX_BITS wide, names; as many groups as rows before) */
    g->wgt_half = (int)g->c->wgt_depth / t->nbi / g->wgpr;
    g->acc_half = (int)g->c->acc_depth / t->nba;
    if (t->res) {
        g->islot_sz = t->tci * g->rows_in * g->wr;
        g->n_islot = g->islot_sz > 0 ? (int)g->c->inp_depth / g->islot_sz : 0;
        if (g->n_islot > 64)
            g->n_islot = 64;
        g->const_off = (int)g->c->acc_depth / 2 - tsr_conv2d_res_sec_off(g, g->nconst);
        g->region_rows = g->const_off / (t->nba / 2 > 0 ? t->nba / 2 : 1);
        g->kq = t->kq ? t->kq : 2;
        g->tiles = tsr_conv2d_res_tiles(g, NULL);
        g->steps = g->tiles * g->chunks;
    }
}

/* Does tiling t fit the buffers, the uop buffer and the loop fields? */
int tsr_conv2d_tiling_fits(const geo_t *g0, const tiling_t *t)
{
    geo_t g = *g0;
    tsr_conv2d_set_tiling(&g, t);
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
            (long)t->tco * t->toh * tow * (g.fuse ? 2 : 1) + (g.fuse ? TSR_ADD_NCONST : 0) > g.region_rows)
            return 0;
    } else {
        if (in_blocks * g.rows_in * (long)g.wr > g.inp_half)
            return 0;
        if ((long)(g.dwk ? tsr_conv2d_dw_wrows(&g, g.wshare ? 1 : t->tco) : (long)t->tco * g.nci * g.kk) > g.wgt_half)
            return 0;
        /* (a fused add: the residual region and its constant rows too) */
        if ((long)t->tco * (t->toh * tow * (g.fuse ? 2 : 1) + g.nconst) + (g.fuse ? TSR_ADD_NCONST : 0) > g.acc_half)
            return 0;
        long nuops = tsr_conv2d_n_uops_sets(&g, g.kern_sets); /* at most every set */
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
    /* depthwise mode: GEMMs loop over blocks (dst +TOH*TOW, src +ROWS_IN*WR,
     * wgt +TCI*WKK*G groups) and kernel rows (src +WR, wgt +dwg), uops over pixels */
    if (g.dwk && ((t->tco > 1 && ((long)t->toh * tow > tsr_isa_field_max(c, TSR_OP_GEMM, "dst_factor_out") ||
                                  (long)g.rows_in * g.wr > tsr_isa_field_max(c, TSR_OP_GEMM, "src_factor_out") ||
                                  (!g.wshare && tsr_conv2d_dw_blk_groups(&g) > tsr_isa_field_max(c, TSR_OP_GEMM, "wgt_factor_out")))) ||
                  (p->kh > 1 && ((long)g.row_step * g.wr > tsr_isa_field_max(c, TSR_OP_GEMM, "src_factor_in") ||
                                 g.dwg > tsr_isa_field_max(c, TSR_OP_GEMM, "wgt_factor_in"))) ||
                  p->kh > loop_max))
        return 0;
    if (t->tco > 1 && ((long)t->toh * tow > tsr_isa_field_max(c, TSR_OP_ALU, "dst_factor_out") ||
                       g.nconst > tsr_isa_field_max(c, TSR_OP_ALU, "src_factor_out")))
        return 0;
    /* the fused add's row-to-row ALU add steps through both regions */
    if (g.fuse && t->tco > 1 && (long)t->toh * tow > tsr_isa_field_max(c, TSR_OP_ALU, "src_factor_out"))
        return 0;
    return 1;
}
