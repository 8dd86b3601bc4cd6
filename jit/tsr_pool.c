/*
 * tsr_pool: quantized max / average / global average pool lowering (see
 * tsr_pool.h for the data path, the division proof, the layouts and the
 * schedule). This file keeps the structure of tsr_conv2d.c: validation,
 * a geometry derived once per plan, one stream builder that also runs dry
 * for the cost model, then packing and the device-side API.
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
#include "tsr_jitutil.h"
#include "tsr_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_dtype.h"
#include "tsr_error.h"
#include "tsr_opplan.h"
#include "tsr_stream.h"

#define OP "pool"

/* Largest count whose division is proved (every sum is evaluated). */
#define MAX_PROVED_COUNT 65536

static int imin(int a, int b) { return a < b ? a : b; }
static int cdiv(int a, int b) { return (a + b - 1) / b; }

static const char *kind_name(int k)
{
    return k == TSR_POOL_MAX ? "maxpool" : k == TSR_POOL_AVG ? "avgpool" : "global_avgpool";
}

int tsr_pool_check(const tsr_pool_params_t *p, int *oh, int *ow)
{
    if (!p)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters");
    if (p->kind != TSR_POOL_MAX && p->kind != TSR_POOL_AVG && p->kind != TSR_POOL_GLOBAL_AVG)
        return tsr_err(TSR_EINVAL, OP ": kind %d is not TSR_POOL_MAX, TSR_POOL_AVG or TSR_POOL_GLOBAL_AVG",
                       (int)p->kind);
    const char *k = kind_name(p->kind);
    if (p->n < 1 || p->c < 1 || p->h < 1 || p->w < 1)
        return tsr_err(TSR_EINVAL, OP ": %s: input shape [%d, %d, %d, %d] must be positive", k, p->n, p->c, p->h,
                       p->w);
    if (!tsr_dt_ok(p->dtype))
        return tsr_err(TSR_EINVAL, OP ": %s: dtype %d must be int8 or uint8", k, (int)p->dtype);
    if (p->zp < tsr_dt_min(p->dtype) || p->zp > tsr_dt_max(p->dtype))
        return tsr_err(TSR_EINVAL, OP ": %s: zero point %d outside [%d, %d]", k, p->zp, tsr_dt_min(p->dtype),
                       tsr_dt_max(p->dtype));
    if ((int64_t)p->n * p->c * p->h * p->w > INT32_MAX)
        return tsr_err(TSR_EINVAL, OP ": %s: tensor too large (more than 2^31 - 1 elements)", k);
    if (p->kind == TSR_POOL_GLOBAL_AVG) {
        if (oh)
            *oh = 1;
        if (ow)
            *ow = 1;
        return TSR_OK;
    }
    if (p->kh < 1 || p->kw < 1)
        return tsr_err(TSR_EINVAL, OP ": %s: kernel %dx%d must be at least 1x1", k, p->kh, p->kw);
    if (p->stride_h < 1 || p->stride_w < 1)
        return tsr_err(TSR_EINVAL, OP ": %s: strides (%d, %d) must be >= 1", k, p->stride_h, p->stride_w);
    const int pads[4] = {p->pad_top, p->pad_left, p->pad_bottom, p->pad_right};
    const int kern[4] = {p->kh, p->kw, p->kh, p->kw};
    const char *pn[4] = {"top", "left", "bottom", "right"};
    for (int i = 0; i < 4; i++) {
        if (pads[i] < 0 || pads[i] >= kern[i])
            return tsr_err(TSR_EINVAL, OP ": %s: %s padding %d must be >= 0 and smaller than the kernel (%d)", k,
                           pn[i], pads[i], kern[i]);
        if (pads[i] > 15)
            return tsr_err(TSR_EINVAL, OP ": %s: %s padding %d is more than 15 (the LOAD pad fields are 4 bits)", k,
                           pn[i], pads[i]);
    }
    if (p->kind == TSR_POOL_AVG && p->count_include_pad != 0 && p->count_include_pad != 1)
        return tsr_err(TSR_EINVAL, OP ": %s: count_include_pad %d is not 0 or 1", k, p->count_include_pad);
    int64_t sh = (int64_t)p->h + p->pad_top + p->pad_bottom - p->kh;
    int64_t sw = (int64_t)p->w + p->pad_left + p->pad_right - p->kw;
    if (sh < 0 || sw < 0)
        return tsr_err(TSR_EINVAL, OP ": %s: kernel %dx%d larger than the padded input %lldx%lld", k, p->kh, p->kw,
                       (long long)sh + p->kh, (long long)sw + p->kw);
    if (oh)
        *oh = (int)(sh / p->stride_h + 1);
    if (ow)
        *ow = (int)(sw / p->stride_w + 1);
    return TSR_OK;
}

/* ------------------------------------------------------------ division */

static int64_t round_half_away(int64_t s, int64_t c) { return s > 0 ? (s + c / 2) / c : (s - c / 2) / c; }

/* Sum range of count c for the dtype (raw values). */
static void sum_range(int uint8, int64_t c, int64_t *lo, int64_t *hi)
{
    *lo = uint8 ? 0 : -128 * c;
    *hi = uint8 ? 255 * c : 127 * c;
}

/* Does shr -k, mulhr m, rshr e (the ALU model) give round_half_away(S/c)
 * for every possible sum S? */
static int proves(int uint8, int64_t c, int k, int e, int32_t m)
{
    int64_t lo, hi;
    sum_range(uint8, c, &lo, &hi);
    for (int64_t s = lo; s <= hi; s++) {
        int32_t v = tsr_alu_apply(TSR_ALU_SHR, (int32_t)s, -k, 32);
        v = tsr_alu_apply(TSR_ALU_MULHR, v, m, 32);
        v = tsr_alu_apply(TSR_ALU_RSHR, v, e, 32);
        if (v != round_half_away(s, c))
            return 0;
    }
    return 1;
}

/* Find uniform k, e and per-count multipliers m[i] for counts[0..n). */
static int find_division(int uint8, const int *counts, int n, int *k_out, int *e_out, int32_t *m)
{
    int cmax = 0, cmin = INT32_MAX;
    for (int i = 0; i < n; i++) {
        if (counts[i] > cmax)
            cmax = counts[i];
        if (counts[i] < cmin)
            cmin = counts[i];
    }
    if (cmax > MAX_PROVED_COUNT)
        return tsr_err(TSR_EINVAL, OP ": average over %d elements: counts above %d are not supported (the "
                       "division sequence could not be proved exact in reasonable time)", cmax, MAX_PROVED_COUNT);
    /* largest k with |S| * 2^k <= 2^31 - 1 for every sum */
    int64_t smax = (int64_t)(uint8 ? 255 : 128) * cmax;
    int k = 0;
    while ((smax << (k + 1)) <= INT32_MAX)
        k++;
    for (int e = 31; e >= 0; e--) {
        int ok = 1;
        for (int i = 0; i < n && ok; i++) {
            int sh = 31 + e - k; /* m ~ 2^sh / c */
            if (sh < 0 || sh > 62) {
                ok = 0;
                break;
            }
            int64_t num = (int64_t)1 << sh;
            int64_t cand[2] = {(num + counts[i] - 1) / counts[i], (num + counts[i] / 2) / counts[i]};
            int found = 0;
            for (int j = 0; j < 2 && !found; j++) {
                if (cand[j] > INT32_MAX || cand[j] < 1 || (j == 1 && cand[1] == cand[0]))
                    continue;
                if (proves(uint8, counts[i], k, e, (int32_t)cand[j])) {
                    m[i] = (int32_t)cand[j];
                    found = 1;
                }
            }
            ok = found;
        }
        if (ok) {
            *k_out = k;
            *e_out = e;
            return TSR_OK;
        }
    }
    return tsr_err(TSR_EINVAL, OP ": no exact ALU division sequence (shr, mulhr, rshr) found for window counts "
                   "%d..%d; refusing rather than rounding wrongly", cmin, cmax);
}

/* ---------------------------------------------------------------- stream */

/* The stream builder plus the counters of the cost model (cost_of). */
typedef struct {
    tsr_stream_t s;   /* the stream (bytes: DRAM bytes moved by LOAD/STORE) */
    uint64_t sbytes;  /* of which STORE */
    uint64_t ops;     /* tensor ops plus compute-stage load rows (cycle estimate of compute) */
    uint64_t gops;    /* of which GEMM ops (resets included) */
} ibuf_t;

typedef struct {
    int toh, tco; /* output rows, channel blocks per tile */
    int tow;      /* output columns per tile (OW or fewer; the last column tile is
                     shifted left to stay TOW wide) */
    int chunk;    /* global: elements of the flattened plane per step */
    int sep;      /* 1: separable (copy/row-sum region X, then vertical ALU), 0: direct GEMM window sums */
    int nbi, nba; /* input / output half rotation: 2 or 1 */
} tiling_t;

/* Everything the emitter needs, derived once per plan. */
typedef struct {
    const tsr_config_t *c;
    const tsr_pool_params_t *p;
    int kind, glob, oh, ow, nb, cb, kk, off, pad_value;
    int div_kind, div_k, div_e;  /* see tsr_pool_plan_t */
    int y_off;                   /* subtracted from the averages (128: uint8 written re-centred for a device tensor) */
    int ncounts;                 /* distinct window counts */
    int *counts;                 /* [ncounts] (owned) */
    int32_t *mults;              /* [ncounts] multipliers (div_kind 2) (owned) */
    int *vcount, *hcount;        /* [oh], [ow] valid rows / columns per output (cip 0) (owned) */
    int use_map, nconst;
    tiling_t t;
    int rows_in, wr, n_rt, n_wt, n_ct, tiles, chunks, steps, kern_sets;
    int xw;        /* row length of the X region (separable): WR (max), TOW (avg) */
    int inp_half;  /* input rows per input half */
    int region;    /* acc rows per region (acc_depth / NBA: with two, one accumulator bank each) */
    int map_off, x_off, o_off, region_used; /* offsets of MAP, X, O inside a region; rows used */
    /* uop offsets */
    int u_xinit, u_copy, u_h, u_vmov, u_vmax, u_init, u_sum, u_imm, u_c0, u_mul, nuops;
    uint32_t x_el, y_el, c_el, w_el, uop_el;
} geo_t;

typedef tsr_rowtile_t rowgeo_t; /* row geometry of a row tile (tsr_jitutil.h) */

static void row_tile(const geo_t *g, int rt, rowgeo_t *r)
{
    const tsr_pool_params_t *p = g->p;
    tsr_row_tile(rt, g->t.toh, g->oh, p->kh, p->stride_h, p->pad_top, p->h, 1, r);
}

/* Is every output row of row tile rt a full-height window (map reuse)? */
static int rows_interior(const geo_t *g, int rt)
{
    for (int oy = rt * g->t.toh; oy < imin((rt + 1) * g->t.toh, g->oh); oy++)
        if (g->vcount[oy] != g->p->kh)
            return 0;
    return 1;
}

/* Region pa of the accumulator buffer: constants, MAP, X, O. */
static int reg_base(const geo_t *g, int pa) { return pa * g->region; }
static int map_base(const geo_t *g, int pa) { return reg_base(g, pa) + g->map_off; }
static int x_base(const geo_t *g, int pa) { return reg_base(g, pa) + g->x_off; }
static int o_base(const geo_t *g, int pa) { return reg_base(g, pa) + g->o_off; }

/* GEMM uop set of input half q and region pa. */
static int kern_set(const geo_t *g, int q, int pa)
{
    return g->kern_sets == g->t.nbi * g->t.nba ? q * g->t.nba + pa : pa;
}

/* Lay out the uop buffer (offsets into g; the uops into out if not NULL). */
static int layout_uops(geo_t *g, tsr_uop_t *out)
{
    const tsr_pool_params_t *p = g->p;
    const int TCO = g->t.tco, RW = g->rows_in * g->wr, TO = g->t.toh * g->t.tow, NBA = g->t.nba;
    const int is_max = g->kind == TSR_POOL_MAX, RX = g->rows_in * g->xw;
    int n = 0;
#define U(d, s, w)                                                                                                   \
    do {                                                                                                             \
        if (out)                                                                                                     \
            out[n] = (tsr_uop_t){(uint32_t)(d), (uint32_t)(s), (uint32_t)(w)};                                       \
        n++;                                                                                                         \
    } while (0)
    g->u_xinit = g->u_copy = g->u_h = g->u_vmov = g->u_vmax = -1;
    g->u_init = g->u_sum = g->u_imm = g->u_c0 = g->u_mul = -1;
    const int full = g->kern_sets == g->t.nbi * NBA;
    if (g->t.sep) {
        /* X reset (GEMM); copy (max: whole rows) or horizontal sums (avg: one uop per kx) */
        g->u_xinit = n;
        for (int pa = 0; pa < NBA; pa++)
            for (int cl = 0; cl < TCO; cl++)
                U(x_base(g, pa) + cl * RX, 0, 0);
        g->u_copy = n;
        for (int set = 0; set < g->kern_sets; set++) {
            int q = full ? set / NBA : set, pa = full ? set % NBA : set;
            for (int cl = 0; cl < TCO; cl++)
                for (int kx = 0; kx < (is_max ? 1 : p->kw); kx++)
                    U(x_base(g, pa) + cl * RX, q * g->inp_half + cl * RW + kx, 0);
        }
        g->u_h = n;
        for (int pa = 0; pa < NBA && is_max; pa++)
            for (int cl = 0; cl < TCO; cl++)
                for (int kx = 1; kx < p->kw; kx++)
                    U(x_base(g, pa) + cl * RX, x_base(g, pa) + cl * RX + kx, 0);
        g->u_vmov = n;
        for (int pa = 0; pa < NBA; pa++)
            for (int cl = 0; cl < TCO; cl++)
                U(o_base(g, pa) + cl * TO, x_base(g, pa) + cl * RX, 0);
        g->u_vmax = n;
        for (int pa = 0; pa < NBA; pa++)
            for (int cl = 0; cl < TCO; cl++)
                for (int ky = 1; ky < p->kh; ky++)
                    U(o_base(g, pa) + cl * TO, x_base(g, pa) + cl * RX + ky * g->xw, 0);
    } else {
        g->u_init = n;
        for (int pa = 0; pa < NBA; pa++)
            U(o_base(g, pa), reg_base(g, pa), 0);
        g->u_sum = n;
        for (int set = 0; set < g->kern_sets; set++) {
            int q = full ? set / NBA : set, pa = full ? set % NBA : set;
            for (int cl = 0; cl < TCO; cl++) {
                if (g->glob) {
                    U(o_base(g, pa) + cl, q * g->inp_half + cl * g->t.chunk, 0);
                    continue;
                }
                for (int ky = 0; ky < p->kh; ky++)
                    for (int kx = 0; kx < p->kw; kx++)
                        U(o_base(g, pa) + cl * TO, q * g->inp_half + cl * RW + ky * g->wr + kx, 0);
            }
        }
    }
    g->u_imm = n; /* O with an immediate or itself */
    for (int pa = 0; pa < NBA; pa++)
        U(o_base(g, pa), o_base(g, pa), 0);
    g->u_c0 = n; /* O with constant row 0 */
    for (int pa = 0; pa < NBA; pa++)
        U(o_base(g, pa), reg_base(g, pa), 0);
    g->u_mul = n;
    if (g->use_map)
        for (int pa = 0; pa < NBA; pa++)
            for (int cl = 0; cl < TCO; cl++)
                U(o_base(g, pa) + cl * TO, map_base(g, pa), 0);
    else
        for (int pa = 0; pa < NBA; pa++)
            U(o_base(g, pa), reg_base(g, pa) + 1, 0);
#undef U
    return n;
}

static void set_tiling(geo_t *g, const tiling_t *t)
{
    const tsr_pool_params_t *p = g->p;
    const tsr_config_t *c = g->c;
    g->t = *t;
    g->n_ct = cdiv(g->cb, t->tco);
    if (g->glob) {
        g->rows_in = t->chunk;
        g->wr = 1;
        g->xw = 1;
        g->n_rt = 1;
        g->n_wt = 1;
        g->chunks = cdiv(p->h * p->w, t->chunk);
    } else {
        g->rows_in = (t->toh - 1) * p->stride_h + p->kh;
        g->wr = (t->tow - 1) * p->stride_w + p->kw;
        g->xw = g->kind == TSR_POOL_MAX ? g->wr : t->tow;
        g->n_rt = cdiv(g->oh, t->toh);
        g->n_wt = cdiv(g->ow, t->tow);
        g->chunks = 1;
    }
    g->tiles = g->nb * g->n_rt * g->n_wt * g->n_ct;
    g->steps = g->tiles * g->chunks;
    g->kern_sets = g->chunks == 1 && t->nbi == t->nba ? t->nba : t->nbi * t->nba;
    g->inp_half = (int)c->inp_depth / t->nbi;
    g->region = (int)c->acc_depth / t->nba;
    g->map_off = g->nconst;
    g->x_off = g->map_off + (g->use_map ? t->toh * t->tow : 0);
    g->o_off = g->x_off + (t->sep ? t->tco * g->rows_in * g->xw : 0);
    g->region_used = g->o_off + (g->glob ? t->tco : t->tco * t->toh * t->tow);
    g->nuops = layout_uops(g, NULL);
}

static int fmax_ok(const tsr_config_t *c, uint32_t op, const char *name, long v)
{
    return v <= tsr_isa_field_max(c, op, name);
}

/* Does tiling t fit the buffers, the uop buffer and the loop fields? */
static int tiling_fits(const geo_t *g0, const tiling_t *t)
{
    geo_t g = *g0;
    set_tiling(&g, t);
    const tsr_config_t *c = g.c;
    const tsr_pool_params_t *p = g.p;
    const long RW = (long)g.rows_in * g.wr, TO = (long)t->toh * t->tow;
    const long loop_max = (1L << TSR_LOOP_BITS) - 1;
    if ((long)t->tco * RW > g.inp_half)
        return 0;
    if (g.region_used > g.region)
        return 0;
    if (g.nuops > (int)c->uop_depth)
        return 0;
    if (t->tco > loop_max)
        return 0;
    if (g.glob)
        return t->chunk <= loop_max;
    if (g.rows_in > loop_max || g.wr > loop_max || TO > loop_max)
        return 0;
    const uint32_t A = TSR_OP_ALU, G = TSR_OP_GEMM;
    if (!fmax_ok(c, A, "dst_factor_in", p->stride_w) || !fmax_ok(c, A, "src_factor_in", p->stride_w) ||
        !fmax_ok(c, G, "dst_factor_in", 1) || !fmax_ok(c, G, "src_factor_in", p->stride_w))
        return 0;
    if (t->tco > 1 && !fmax_ok(c, A, "dst_factor_out", TO))
        return 0;
    if (t->sep) {
        if (!fmax_ok(c, A, "dst_factor_out", g.wr) || !fmax_ok(c, A, "src_factor_out", g.wr) ||
            !fmax_ok(c, G, "dst_factor_out", g.xw) || !fmax_ok(c, G, "src_factor_out", g.wr))
            return 0;
        if (t->toh > 1 &&
            (!fmax_ok(c, A, "dst_factor_out", t->tow) || !fmax_ok(c, A, "src_factor_out", (long)p->stride_h * g.xw)))
            return 0;
        if (g.use_map && t->toh > 1 && !fmax_ok(c, A, "src_factor_out", t->tow))
            return 0;
    } else if (t->toh > 1) {
        if (!fmax_ok(c, G, "dst_factor_out", t->tow) || !fmax_ok(c, G, "src_factor_out", (long)p->stride_h * g.wr))
            return 0;
        if (g.use_map && (!fmax_ok(c, A, "dst_factor_out", t->tow) || !fmax_ok(c, A, "src_factor_out", t->tow)))
            return 0;
    }
    return 1;
}

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
    row_tile(g, w->rt, &w->r);
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
    long key = (long)(rows_interior(g, w->rt) ? g->n_rt : w->rt) * g->n_wt + w->wt;
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

static void build(const geo_t *g, ibuf_t *b)
{
    if (g->glob)
        build_global(g, b);
    else
        build_window(g, b);
}

/* Overheads of the cost model, in cycles: per instruction, and per step
 * (DRAM latency and token hand-offs; measured on the RTL default preset:
 * global avgpool 1x512x7x7 runs in 4220 cycles with 2 steps and 4529 with 8). */
#define COST_PER_INSN 8.0
#define COST_PER_STEP 100.0

static double cost_of(const geo_t *g, const tiling_t *t)
{
    geo_t gg = *g;
    set_tiling(&gg, t);
    ibuf_t b;
    memset(&b, 0, sizeof b);
    tsr_stream_init(&b.s, g->c, 1, 0);
    build(&gg, &b);
    const double bus = (double)(g->c->dram_bus_width / 8);
    double mem = (double)b.s.bytes / bus, st = (double)b.sbytes / bus;
    double comp = (double)b.ops;
    if (gg.t.sep && gg.t.nba == 2) { /* GEMM and ALU pipes overlap (software-pipelined tiles) */
        double ga = (double)b.gops, al = (double)(b.ops - b.gops);
        comp = ga > al ? ga : al;
    }
    /* overlapped, plus the pipeline fill or drain (one step of the shorter
     * side), plus what a single-buffered rotation serialises */
    double cost = (mem > comp ? mem + comp / gg.steps : comp + mem / gg.steps) + COST_PER_STEP * gg.steps;
    if (t->nbi == 1)
        cost += mem - st;
    if (t->nba == 1)
        cost += st;
    return cost + COST_PER_INSN * (double)b.s.n;
}

static int choose_tiling(geo_t *g)
{
    const tsr_config_t *c = g->c;
    int *cand = malloc(sizeof(int) * (size_t)(g->cb + g->oh + g->ow + 3));
    if (!cand)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int *c_co = cand, *c_oh = cand + g->cb + 1, *c_ow = c_oh + g->oh + 1;
    int n_co = tsr_tile_candidates(g->cb, c_co), n_oh = tsr_tile_candidates(g->oh, c_oh);
    int n_ow = tsr_tile_candidates(g->ow, c_ow);
    static const int nbs[4][2] = {{2, 2}, {1, 2}, {2, 1}, {1, 1}};
    const long loop_max = (1L << TSR_LOOP_BITS) - 1;
    double best = -1;
    tiling_t bt = {0, 0, 0, 0, 0, 0, 0};
    /* Every buffer rotation (the cost model charges single buffering for
     * the transfers it serialises), form and width: column tiles also pay
     * when they allow taller tiles (fewer halo rows, e.g. maxpool 3x3 s2). */
    for (int wpass = 0; wpass < (g->glob ? 1 : 2); wpass++)
        for (int nbo = 0; nbo < 4; nbo++)
            for (int d = n_ow - 1; d >= 0; d--) {
                if ((c_ow[d] == g->ow) != (wpass == 0))
                    continue;
                for (int a = n_co - 1; a >= 0; a--)
                for (int sep = 0; sep < 2; sep++) {
                    /* max is always separable, global never; avg either (by cost) */
                    if ((g->kind == TSR_POOL_MAX && !sep) || (g->glob && sep))
                        continue;
                    tiling_t t = {1, c_co[a], c_ow[d], 0, sep, nbs[nbo][0], nbs[nbo][1]};
                    if (g->glob) {
                        long ch = (long)c->inp_depth / t.nbi / t.tco;
                        if (ch > loop_max)
                            ch = loop_max;
                        if (ch > (long)g->p->h * g->p->w)
                            ch = (long)g->p->h * g->p->w;
                        if (ch < 1)
                            continue;
                        t.chunk = (int)ch;
                        if (!tiling_fits(g, &t))
                            continue;
                    } else {
                        /* only the tallest fitting tile for each width and channel count */
                        int e = n_oh - 1;
                        for (; e >= 0; e--) {
                            t.toh = c_oh[e];
                            if (tiling_fits(g, &t))
                                break;
                        }
                        if (e < 0)
                            continue;
                    }
                    double cost = cost_of(g, &t);
                    if (best < 0 || cost < best) {
                        best = cost;
                        bt = t;
                    }
                }
            }
    free(cand);
    if (best < 0) {
        const tsr_pool_params_t *p = g->p;
        if (g->glob)
            return tsr_err(TSR_EINVAL, OP ": %s: no tiling fits the buffers (acc %u rows, uop %u)",
                           kind_name(g->kind), c->acc_depth, c->uop_depth);
        return tsr_err(TSR_EINVAL,
                       OP ": %s: no tiling fits the buffers: one output of one channel block needs a %dx%d input "
                       "window on chip (the input buffer holds %u rows), %d accumulator rows (buffer %u) and "
                       "%d uops (buffer %u)",
                       kind_name(g->kind), p->kh, p->kw, c->inp_depth,
                       g->nconst + (g->kind == TSR_POOL_MAX ? g->kk : 0) + (g->use_map ? 1 : 0) + 1, c->acc_depth,
                       g->kind == TSR_POOL_MAX ? 3 + p->kw + p->kh : 3 + g->kk, c->uop_depth);
    }
    set_tiling(g, &bt);
    return TSR_OK;
}

static void geo_free(geo_t *g)
{
    free(g->counts);
    free(g->mults);
    free(g->vcount);
    free(g->hcount);
    g->counts = g->vcount = g->hcount = NULL;
    g->mults = NULL;
}

static int add_count(geo_t *g, int cnt)
{
    for (int i = 0; i < g->ncounts; i++)
        if (g->counts[i] == cnt)
            return i;
    g->counts[g->ncounts] = cnt;
    return g->ncounts++;
}

/* Count index of output (oy, ox) (division kind 2). */
static int count_index(const geo_t *g, int oy, int ox)
{
    int cnt = g->glob ? g->kk
                      : (g->p->kind == TSR_POOL_AVG && !g->p->count_include_pad ? g->vcount[oy] * g->hcount[ox]
                                                                                 : g->kk);
    for (int i = 0; i < g->ncounts; i++)
        if (g->counts[i] == cnt)
            return i;
    return 0;
}

static int geo_init(const tsr_config_t *c, const tsr_pool_params_t *p, geo_t *g)
{
    memset(g, 0, sizeof *g);
    int rc = tsr_pool_check(p, &g->oh, &g->ow);
    if (rc)
        return rc;
    if (c->inp_width != 8 || c->wgt_width != 8 || c->acc_width != 32)
        return tsr_err(TSR_EINVAL, OP ": needs int8 inputs and weights and int32 accumulators (config has "
                       "int%d/int%d/int%d)", c->inp_width, c->wgt_width, c->acc_width);
    if (c->block_in != c->block_out)
        return tsr_err(TSR_EINVAL, OP ": needs BLOCK_IN == BLOCK_OUT for the identity weight (config has %d and %d)",
                       c->block_in, c->block_out);
    g->c = c;
    g->p = p;
    g->kind = p->kind;
    g->glob = p->kind == TSR_POOL_GLOBAL_AVG;
    g->nb = cdiv(p->n, c->batch);
    g->cb = cdiv(p->c, c->block_in);
    g->kk = g->glob ? p->h * p->w : p->kh * p->kw;
    g->off = tsr_dt_off(p->dtype);
    if (g->kind == TSR_POOL_MAX)
        g->pad_value = -128; /* the type minimum after re-centring: never wins */
    else if (g->kind == TSR_POOL_AVG)
        g->pad_value = p->count_include_pad ? p->zp - g->off : -g->off; /* raw x_zp, or raw 0 */
    if (g->kind == TSR_POOL_MAX)
        return TSR_OK;
    if ((int64_t)g->kk * 255 > INT32_MAX)
        return tsr_err(TSR_EINVAL, OP ": %s: window of %d elements: its sum may not fit the 32-bit accumulator",
                       kind_name(g->kind), g->kk);
    /* window counts */
    g->vcount = calloc((size_t)g->oh, sizeof(int));
    g->hcount = calloc((size_t)g->ow, sizeof(int));
    int nmax = g->glob ? 1 : p->kh * p->kw;
    g->counts = calloc((size_t)nmax + 1, sizeof(int));
    g->mults = calloc((size_t)nmax + 1, sizeof(int32_t));
    if (!g->vcount || !g->hcount || !g->counts || !g->mults) {
        geo_free(g);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    if (g->glob || p->count_include_pad) {
        add_count(g, g->kk);
    } else {
        for (int oy = 0; oy < g->oh; oy++)
            for (int ky = 0; ky < p->kh; ky++) {
                int iy = oy * p->stride_h - p->pad_top + ky;
                g->vcount[oy] += iy >= 0 && iy < p->h;
            }
        for (int ox = 0; ox < g->ow; ox++)
            for (int kx = 0; kx < p->kw; kx++) {
                int ix = ox * p->stride_w - p->pad_left + kx;
                g->hcount[ox] += ix >= 0 && ix < p->w;
            }
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                add_count(g, g->vcount[oy] * g->hcount[ox]);
    }
    if (g->ncounts == 1 && g->counts[0] == 1) {
        g->div_kind = 0;
    } else if (g->ncounts == 1 && (g->counts[0] & (g->counts[0] - 1)) == 0) {
        g->div_kind = 1;
        while ((1 << g->div_e) < g->counts[0])
            g->div_e++;
    } else {
        g->div_kind = 2;
        if ((rc = find_division(g->off != 0, g->counts, g->ncounts, &g->div_k, &g->div_e, g->mults))) {
            geo_free(g);
            return tsr_err_prefix(rc, "%s: ", kind_name(g->kind));
        }
        g->use_map = g->ncounts > 1;
    }
    /* constants: the initial value (KK*off), then the multipliers */
    g->nconst = 1 + (g->div_kind == 2 && !g->use_map ? 1 : 0);
    return TSR_OK;
}

/* ------------------------------------------------------------- packing */

static uint64_t x_elems(const geo_t *g) { return (uint64_t)g->nb * g->cb * g->p->h * g->p->w; }
static uint64_t y_elems(const geo_t *g) { return (uint64_t)g->nb * g->cb * g->oh * g->ow; }
static uint64_t c_elems(const geo_t *g)
{
    return (uint64_t)g->nconst + (g->use_map ? (uint64_t)g->n_rt * g->t.toh * g->ow : 0); /* map: full OW rows */
}

void tsr_pool_pack_input(const tsr_config_t *c, const tsr_pool_plan_t *pl, const void *x, uint8_t *dst)
{
    (void)c;
    tsr_dtensor_pack(&pl->xt, x, dst);
}

void tsr_pool_unpack_output(const tsr_config_t *c, const tsr_pool_plan_t *pl, const uint8_t *src, void *y)
{
    (void)c;
    tsr_dtensor_unpack(&pl->yt, src, y);
}

/* Constant rows (every lane the same value) and the identity weight. */
static int write_consts(tsr_device_t *dev, const geo_t *g, tsr_pool_plan_t *pl)
{
    const tsr_config_t *c = g->c;
    int rc = TSR_OK;
    if (pl->c_bytes) {
        uint64_t rows = c_elems(g);
        uint8_t *buf = calloc(rows, c->acc_bytes);
        if (!buf)
            return tsr_err(TSR_ENOMEM, "out of memory");
        for (uint64_t r = 0; r < rows; r++) {
            int32_t v;
            if (r == 0)
                v = g->kk * g->off;
            else if (r < (uint64_t)g->nconst)
                v = g->mults[0];
            else {
                uint64_t m = r - (uint64_t)g->nconst;
                int oy = (int)(m / (uint64_t)g->ow), ox = (int)(m % (uint64_t)g->ow);
                /* rows past OH (last tile) repeat the interior pattern */
                int ci = 0;
                if (oy < g->oh)
                    ci = count_index(g, oy, ox);
                else {
                    int cnt = g->p->kh * g->hcount[ox];
                    for (int i = 0; i < g->ncounts; i++)
                        if (g->counts[i] == cnt)
                            ci = i;
                }
                v = g->mults[ci];
            }
            for (uint32_t l = 0; l < c->acc_bytes / 4; l++)
                for (int j = 0; j < 4; j++)
                    buf[r * c->acc_bytes + l * 4 + j] = (uint8_t)((uint32_t)v >> (8 * j));
        }
        rc = tsr_mem_write(dev, pl->c_addr, buf, rows * c->acc_bytes);
        free(buf);
        if (rc)
            return rc;
    }
    uint8_t *w = calloc(1, c->wgt_bytes);
    if (!w)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int o = 0; o < c->block_out; o++)
        w[(size_t)o * c->block_in + (size_t)o] = 1;
    rc = tsr_mem_write(dev, pl->w_addr, w, c->wgt_bytes);
    free(w);
    return rc;
}

/* Encode g's uops into a host buffer (*out, g->nuops * uop_bytes; malloc'ed). */
static int encode_uops(geo_t *g, uint8_t **out)
{
    const tsr_config_t *c = g->c;
    size_t n = (size_t)g->nuops;
    tsr_uop_t *u = calloc(n ? n : 1, sizeof *u);
    uint8_t *u8 = calloc(n ? n : 1, c->uop_bytes);
    int rc = TSR_OK;
    *out = NULL;
    if (!u || !u8) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    layout_uops(g, u);
    for (size_t k = 0; k < n; k++) {
        uint64_t raw;
        if ((rc = tsr_uop_encode(c, &u[k], &raw)))
            goto out;
        memcpy(u8 + k * c->uop_bytes, &raw, c->uop_bytes);
    }
    *out = u8;
    u8 = NULL;
out:
    free(u);
    free(u8);
    return rc;
}

#define GEN_ID OP " lowering v1, built " __DATE__ " " __TIME__

/* The kernel cache signature: every parameter (they all shape the stream,
 * the uops or the tiling) and the output re-centring. */
static size_t pool_sig(const tsr_pool_params_t *p, int y_off, uint8_t *sig)
{
    size_t n = tsr_kcache_sig_bytes(sig, 0, GEN_ID, sizeof GEN_ID);
    n = tsr_kcache_sig_bytes(sig, n, tsr_stream_id(), strlen(tsr_stream_id()) + 1); /* the builder, built apart */
    const int32_t v[] = {(int32_t)p->kind, p->n,        p->c,         p->h,        p->w,
                         p->kh,            p->kw,       p->stride_h,  p->stride_w, p->pad_top,
                         p->pad_left,      p->pad_bottom, p->pad_right, p->count_include_pad, (int32_t)p->dtype,
                         p->zp,            y_off};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        n = tsr_kcache_sig_i32(sig, n, v[i]);
    return n;
}

/* The lowering-specific part of a cached kernel. */
typedef struct {
    tiling_t t;     /* the chosen tiling */
    double cost;    /* the cost model's value for it */
    int32_t nuops;  /* uops in the kernel buffer */
} pool_meta_t;

/* Choose the tiling, build the relocatable stream (every buffer at 0) and
 * the uops, and insert them into kc. */
static int generate(tsr_kcache_t *kc, geo_t *g, const uint8_t *sig, size_t sig_len, tsr_kcache_ref_t **ref)
{
    const uint64_t t0 = tsr_mono_ns();
    uint8_t *uops = NULL;
    ibuf_t b;
    memset(&b, 0, sizeof b);
    tsr_stream_init(&b.s, g->c, 0, 0);
    int rc = choose_tiling(g);
    if (rc)
        return rc;
    g->x_el = g->y_el = g->c_el = g->w_el = g->uop_el = 0;
    build(g, &b);
    if ((rc = tsr_stream_check(&b.s, OP)))
        goto out;
    if ((rc = encode_uops(g, &uops)))
        goto out;
    pool_meta_t meta;
    memset(&meta, 0, sizeof meta);
    meta.t = g->t;
    meta.cost = cost_of(g, &g->t);
    meta.nuops = g->nuops;
    tsr_kernel_t k = {&meta, sizeof meta, b.s.v, b.s.n, uops, (size_t)g->nuops, tsr_mono_ns() - t0};
    rc = tsr_kcache_insert(kc, sig, sig_len, &k, ref);
out:
    tsr_stream_free(&b.s);
    free(uops);
    return rc;
}

/* ---------------------------------------------------------------- plan */

/* The plan, reading x and writing y (device tensors, not owned). */
/* tsr_kcache_fetch's callbacks: a cached kernel is kept if its tiling
 * still fits (the signature makes this always true), adopting it. */
typedef struct {
    geo_t *g;
    const uint8_t *sig;
    size_t sig_len;
} pool_kctx_t;

static int kernel_fits(const tsr_kernel_t *k, void *ctx)
{
    geo_t *g = ((pool_kctx_t *)ctx)->g;
    pool_meta_t meta;
    if (k->meta_len != sizeof meta)
        return 0;
    memcpy(&meta, k->meta, sizeof meta);
    if (!tiling_fits(g, &meta.t))
        return 0;
    set_tiling(g, &meta.t);
    return meta.nuops == g->nuops && k->nuops == (size_t)g->nuops;
}

static int kernel_gen(tsr_kcache_t *kc, void *ctx, tsr_kcache_ref_t **ref)
{
    pool_kctx_t *x = ctx;
    return generate(kc, x->g, x->sig, x->sig_len, ref);
}

static int plan_impl(tsr_device_t *dev, const tsr_pool_params_t *params, const tsr_dtensor_t *x,
                     const tsr_dtensor_t *y, int y_off, tsr_pool_plan_t *pl)
{
    if (!pl)
        return tsr_err(TSR_EINVAL, OP ": NULL plan");
    memset(pl, 0, sizeof *pl);
    if (!dev)
        return tsr_err(TSR_EINVAL, OP ": NULL device");
    const tsr_config_t *c = tsr_device_config(dev);
    geo_t g;
    int rc = geo_init(c, params, &g);
    if (rc)
        return rc;
    pl->p = *params;
    g.p = &pl->p;
    g.y_off = y_off;
    /* the kernel (tiling, relocatable stream, uops): from the device's
     * cache, else generated and inserted */
    uint8_t sig[512];
    pool_kctx_t kx = {&g, sig, pool_sig(&pl->p, y_off, sig)};
    const tsr_opplan_kernel_t kk = {sig, kx.sig_len, kernel_fits, kernel_gen, &kx};
    if ((rc = tsr_opplan_fetch(dev, &kk, &pl->kref, &pl->kcache)))
        goto fail;
    const tsr_kernel_t *kern = tsr_kcache_kernel(pl->kref);
    pool_meta_t kmeta;
    memcpy(&kmeta, kern->meta, sizeof kmeta);
    pl->oh = g.oh;
    pl->ow = g.ow;
    pl->nb = g.nb;
    pl->cb = g.cb;
    pl->toh = g.t.toh;
    pl->tow = g.glob ? 1 : g.t.tow;
    pl->sep = g.t.sep;
    pl->tco = g.t.tco;
    pl->rows_in = g.rows_in;
    pl->wr = g.wr;
    pl->tiles = g.tiles;
    pl->chunks = g.chunks;
    pl->nbuf_inp = g.t.nbi;
    pl->nbuf_acc = g.t.nba;
    pl->pad_value = g.pad_value;
    pl->off = g.off;
    pl->div_kind = g.div_kind;
    pl->div_k = g.div_k;
    pl->div_e = g.div_e;
    pl->ncounts = g.ncounts;
    pl->use_map = g.use_map;
    pl->nconst = g.nconst;
    pl->x_bytes = x_elems(&g) * c->inp_bytes;
    pl->y_bytes = y_elems(&g) * c->out_bytes;
    pl->c_bytes = c_elems(&g) * c->acc_bytes;
    pl->w_bytes = c->wgt_bytes;
    const tsr_opbuf_t bufs[] = {{pl->x_bytes, x, &pl->x_addr}, {pl->y_bytes, y, &pl->y_addr},
                                {pl->c_bytes, NULL, &pl->c_addr}, {pl->w_bytes, NULL, &pl->w_addr}};
    if ((rc = tsr_opplan_buffers(dev, OP, bufs, 4)))
        goto fail;
    pl->nuops = (size_t)g.nuops;
    pl->uop_addr = tsr_kcache_uop_addr(pl->kref); /* owned by the cache entry */
    if ((rc = write_consts(dev, &g, pl)))
        goto fail;
    /* this plan's stream: the kernel's, relocated to its buffers (checked
     * field by field when it was generated; relocation checks dram_base) */
    uint64_t base[1][TSR_MEM_COUNT] = {{0}};
    base[0][TSR_MEM_UOP] = pl->uop_addr;
    base[0][TSR_MEM_INP] = pl->x_addr;
    base[0][TSR_MEM_WGT] = pl->w_addr;
    base[0][TSR_MEM_ACC] = pl->c_addr;
    base[0][TSR_MEM_OUT] = pl->y_addr;
    tsr_opplan_stream_t st;
    rc = tsr_opplan_bind(c, OP, pl->kref, NULL, 1, (const uint64_t(*)[TSR_MEM_COUNT])base, 0, &st);
    pl->insns = st.insns;
    pl->ninsns = st.ninsns;
    if (rc)
        goto fail;
    pl->gemm_ops = st.gemm_ops;
    pl->alu_ops = st.alu_ops;
    pl->dram_bytes = st.dram_bytes;
    pl->cost = kmeta.cost;
    geo_free(&g);
    return TSR_OK;
fail:
    geo_free(&g);
    tsr_pool_plan_free(dev, pl);
    return rc;
}

void tsr_pool_plan_free(tsr_device_t *dev, tsr_pool_plan_t *pl)
{
    if (!pl)
        return;
    uint64_t *bufs[2] = {&pl->c_addr, &pl->w_addr}; /* x and y belong to the tensors, the uops to the cache */
    for (int i = 0; i < 2 && dev; i++)
        if (*bufs[i])
            tsr_mem_free(dev, *bufs[i]);
    tsr_kcache_release(pl->kref);
    if (pl->io_owned) {
        tsr_dtensor_free(dev, &pl->xt);
        tsr_dtensor_free(dev, &pl->yt);
    }
    free(pl->insns);
    memset(pl, 0, sizeof *pl);
}

int tsr_pool_plan(tsr_device_t *dev, const tsr_pool_params_t *params, tsr_pool_plan_t *pl)
{
    /* a thin wrapper: the plan over device tensors of its own (the host
     * packs into and unpacks from them) */
    if (!pl)
        return tsr_err(TSR_EINVAL, OP ": NULL plan");
    memset(pl, 0, sizeof *pl);
    if (!dev || !params)
        return tsr_err(TSR_EINVAL, OP ": NULL device or parameters");
    int oh, ow, rc = tsr_pool_check(params, &oh, &ow);
    if (rc)
        return rc;
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_dtensor_t x, y;
    memset(&y, 0, sizeof y);
    if ((rc = tsr_dtensor_init(c, params->n, params->c, params->h, params->w, params->dtype, params->zp, &x)) ||
        (rc = tsr_dtensor_init(c, params->n, params->c, oh, ow, params->dtype, params->zp, &y))) {
        if (c->block_in != c->block_out)
            return tsr_err(TSR_EINVAL, OP ": needs BLOCK_IN == BLOCK_OUT (config has %d and %d)", c->block_in,
                           c->block_out);
        return tsr_err_prefix(rc, OP ": ");
    }
    if ((rc = tsr_dtensor_alloc(dev, &x)) || (rc = tsr_dtensor_alloc(dev, &y)) ||
        (rc = tsr_pool_plan_tensors(dev, params, &x, &y, pl))) {
        tsr_dtensor_free(dev, &x);
        tsr_dtensor_free(dev, &y);
        return rc;
    }
    pl->xt = x;
    pl->yt = y;
    pl->io_owned = 1;
    return TSR_OK;
}

int tsr_pool_plan_tensors(tsr_device_t *dev, const tsr_pool_params_t *params, const tsr_dtensor_t *x,
                          const tsr_dtensor_t *y, tsr_pool_plan_t *pl)
{
    if (pl)
        memset(pl, 0, sizeof *pl);
    if (!params || !x || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters or tensor");
    int oh, ow, rc = tsr_pool_check(params, &oh, &ow);
    if (rc)
        return rc;
    const tsr_pool_params_t *p = params;
    if (x->n != p->n || x->c != p->c || x->h != p->h || x->w != p->w || x->dtype != p->dtype || x->zp != p->zp)
        return tsr_err(TSR_EINVAL, OP ": input tensor [%d,%d,%d,%d] zp %d does not match the parameters "
                       "[%d,%d,%d,%d] zp %d (or its dtype differs)",
                       x->n, x->c, x->h, x->w, (int)x->zp, p->n, p->c, p->h, p->w, (int)p->zp);
    if (y->n != p->n || y->c != p->c || y->h != oh || y->w != ow || y->dtype != p->dtype || y->zp != p->zp)
        return tsr_err(TSR_EINVAL, OP ": output tensor [%d,%d,%d,%d] zp %d does not match [%d,%d,%d,%d] zp %d "
                       "(or its dtype differs)",
                       y->n, y->c, y->h, y->w, (int)y->zp, p->n, p->c, oh, ow, (int)p->zp);
    /* max over h = x - off is the max of x minus off: planned on the device
     * view (int8, zp - off). Averages are rounded on raw values
     * (operators.md), which h does not give at ties for uint8: planned on
     * the logical dtype (the input packing of a uint8 pool is already
     * h = x - 128 and the sums are raw), the rounded average then
     * re-centred by one ALU add (y_off). */
    if (p->dtype == TSR_DT_UINT8 && p->kind != TSR_POOL_MAX)
        return plan_impl(dev, p, x, y, tsr_dtensor_off(p->dtype), pl);
    tsr_pool_params_t v = *p;
    v.dtype = TSR_DT_INT8;
    v.zp -= tsr_dtensor_off(p->dtype);
    return plan_impl(dev, &v, x, y, 0, pl);
}

int tsr_pool_write_input(tsr_device_t *dev, const tsr_pool_plan_t *pl, const void *x)
{
    if (!dev || !pl || !x)
        return tsr_err(TSR_EINVAL, OP ": NULL device, plan or input data");
    uint8_t *buf = malloc(pl->x_bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    tsr_pool_pack_input(tsr_device_config(dev), pl, x, buf);
    int rc = tsr_mem_write(dev, pl->x_addr, buf, pl->x_bytes);
    free(buf);
    return rc;
}

int tsr_pool_exec(tsr_device_t *dev, const tsr_pool_plan_t *pl)
{
    if (!dev || !pl || !pl->insns)
        return tsr_err(TSR_EINVAL, OP ": NULL device or plan");
    int rc = tsr_submit(dev, pl->insns, pl->ninsns);
    if (!rc)
        rc = tsr_wait(dev, -1);
    return rc;
}

int tsr_pool_read_output(tsr_device_t *dev, const tsr_pool_plan_t *pl, void *y)
{
    if (!dev || !pl || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL device, plan or output data");
    uint8_t *buf = malloc(pl->y_bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = tsr_mem_read(dev, pl->y_addr, buf, pl->y_bytes);
    if (!rc)
        tsr_pool_unpack_output(tsr_device_config(dev), pl, buf, y);
    free(buf);
    return rc;
}

int tsr_pool_run(tsr_device_t *dev, const tsr_pool_params_t *p, const void *x, void *y)
{
    if (!dev)
        return tsr_err(TSR_EINVAL, OP ": NULL device");
    if (!x || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL input or output data");
    tsr_pool_plan_t pl;
    int rc = tsr_pool_plan(dev, p, &pl);
    if (rc)
        return rc;
    if (!(rc = tsr_pool_write_input(dev, &pl, x)) && !(rc = tsr_pool_exec(dev, &pl)))
        rc = tsr_pool_read_output(dev, &pl, y);
    tsr_pool_plan_free(dev, &pl);
    return rc;
}
