/* tsr_pool_geo: the pool geometry and the proof of its division (tsr_pool_geo.h). */
#include "tsr_pool_geo.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_dtype.h"
#include "tsr_error.h"

const char *tsr_pool_geo_id(void) { return "pool geometry, built " __DATE__ " " __TIME__; }

/* Largest count whose division is proved (every sum is evaluated). */
#define MAX_PROVED_COUNT 65536

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

void tsr_pool_row_tile(const geo_t *g, int rt, rowgeo_t *r)
{
    const tsr_pool_params_t *p = g->p;
    tsr_row_tile(rt, g->t.toh, g->oh, p->kh, p->stride_h, p->pad_top, p->h, 1, r);
}

/* Is every output row of row tile rt a full-height window (map reuse)? */
int tsr_pool_rows_interior(const geo_t *g, int rt)
{
    for (int oy = rt * g->t.toh; oy < imin((rt + 1) * g->t.toh, g->oh); oy++)
        if (g->vcount[oy] != g->p->kh)
            return 0;
    return 1;
}

/* Lay out the uop buffer (offsets into g; the uops into out if not NULL). */
int tsr_pool_layout_uops(geo_t *g, tsr_uop_t *out)
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

void tsr_pool_set_tiling(geo_t *g, const tiling_t *t)
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
    g->nuops = tsr_pool_layout_uops(g, NULL);
}

static int fmax_ok(const tsr_config_t *c, uint32_t op, const char *name, long v)
{
    return v <= tsr_isa_field_max(c, op, name);
}

/* Does tiling t fit the buffers, the uop buffer and the loop fields? */
int tsr_pool_tiling_fits(const geo_t *g0, const tiling_t *t)
{
    geo_t g = *g0;
    tsr_pool_set_tiling(&g, t);
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

void tsr_pool_geo_free(geo_t *g)
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
int tsr_pool_count_index(const geo_t *g, int oy, int ox)
{
    int cnt = g->glob ? g->kk
                      : (g->p->kind == TSR_POOL_AVG && !g->p->count_include_pad ? g->vcount[oy] * g->hcount[ox]
                                                                                 : g->kk);
    for (int i = 0; i < g->ncounts; i++)
        if (g->counts[i] == cnt)
            return i;
    return 0;
}

int tsr_pool_geo_init(const tsr_config_t *c, const tsr_pool_params_t *p, geo_t *g)
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
                       tsr_pool_kind_name(g->kind), g->kk);
    /* window counts */
    g->vcount = calloc((size_t)g->oh, sizeof(int));
    g->hcount = calloc((size_t)g->ow, sizeof(int));
    int nmax = g->glob ? 1 : p->kh * p->kw;
    g->counts = calloc((size_t)nmax + 1, sizeof(int));
    g->mults = calloc((size_t)nmax + 1, sizeof(int32_t));
    if (!g->vcount || !g->hcount || !g->counts || !g->mults) {
        tsr_pool_geo_free(g);
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
        if (p->round_even && c->exact_requant && g->kind == TSR_POOL_AVG) { /* fscale by 2^-e: half to even */
            g->div_kind = 3; /* the binary32 bits of 2^-e */
            g->mults[0] = (int32_t)((uint32_t)(127 - g->div_e) << 23);
        }
    } else {
        g->div_kind = 2;
        if ((rc = find_division(g->off != 0, g->counts, g->ncounts, &g->div_k, &g->div_e, g->mults))) {
            tsr_pool_geo_free(g);
            return tsr_err_prefix(rc, "%s: ", tsr_pool_kind_name(g->kind));
        }
        g->use_map = g->ncounts > 1;
    }
    /* constants: the initial value (KK*off), then the multipliers */
    g->nconst = 1 + ((g->div_kind == 2 && !g->use_map) || g->div_kind == 3 ? 1 : 0);
    return TSR_OK;
}

