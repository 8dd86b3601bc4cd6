/*
 * tsr_sgd: the SGD-with-momentum update on the device ALU (see tsr_sgd.h,
 * which defines it).
 *
 * Accumulator layout: two sets (tiles alternate between them) of NREG
 * regions of `tile` rows (g, v, w_m, the lr term, q, the acc8 loads of w_m's
 * and v's four planes, q's upper planes), then NCONST constant rows (every
 * lane the same value: the multipliers and clamp bounds, which do not fit
 * the ALU's 16-bit immediate), loaded once. A tile of rows: the compute
 * stage loads g_raw (acc) and the eight state planes (acc8), runs the ALU
 * sequence, and hands the out rows of the new planes (and q's) to the store
 * stage, which stores them while the compute stage works on the next tile
 * in the other set; tile t+2's compute waits for tile t's stores (its ALU
 * ops rewrite those rows), FINISH for the last tile's.
 * Every ALU op covers the tile's rows with one instruction (iter_out =
 * rows, dst +1 per row, src +1 or +0 for a constant row).
 *
 * Per-channel multipliers (chans > 1): the rows are channel groups of K rows
 * (a row's lanes are lanes channels, the same k: tsr_sgd.h), tiles lie within
 * a group, and each tile first loads its group's multiplier row over the
 * constant row of mg; every other instruction is the per-tensor stream's.
 */
#include "tsr_sgd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_stream.h"

enum { R_G, R_V, R_W, R_T, R_Q, R_PW0, R_PV0 = R_PW0 + 4, R_QS1 = R_PV0 + 4, NREG = R_QS1 + 3 };
enum { C_MG, C_GLO, C_GHI, C_SG, C_MMU, C_VLO, C_VHI, C_MLR, C_WLO, C_WHI, C_QLO, C_QHI, NCONST };
#define MAXUOPS 128
#define SGD_MAX_N (INT64_C(1) << 26)

static int nplanes(const tsr_sgd_params_t *p) { return p->planes ? p->planes : 4; }
static int32_t lim(const tsr_sgd_params_t *p) { return TSR_SGD_LIM_OF(nplanes(p)); }
static int in_lim(const tsr_sgd_params_t *p, int32_t v) { return v >= -lim(p) && v < lim(p); }

int tsr_sgd_check(const tsr_sgd_params_t *p)
{
    if (p->n < 1 || p->n > SGD_MAX_N)
        return tsr_err(TSR_EINVAL, "sgd: n %lld outside 1..%lld", (long long)p->n, (long long)SGD_MAX_N);
    if (p->planes != 0 && p->planes != 3 && p->planes != 4)
        return tsr_err(TSR_EINVAL, "sgd: planes %d (3 or 4)", p->planes);
    if (p->frac < 0 || p->frac > 30)
        return tsr_err(TSR_EINVAL, "sgd: frac %d outside 0..30", p->frac);
    if (p->mmu < 0 || p->mlr < 0)
        return tsr_err(TSR_EINVAL, "sgd: a negative multiplier (mmu %d, mlr %d)", (int)p->mmu, (int)p->mlr);
    if (p->slr < 0 || p->slr > 31)
        return tsr_err(TSR_EINVAL, "sgd: shift slr %d outside 0..31", p->slr);
    if (!in_lim(p, p->w_lo) || !in_lim(p, p->w_hi) || p->w_lo > p->w_hi)
        return tsr_err(TSR_EINVAL, "sgd: w_m clamp [%d, %d] empty or outside [%d, %d]", (int)p->w_lo, (int)p->w_hi,
                       (int)-lim(p), (int)(lim(p) - 1));
    if (p->chans < 0 || p->chans > p->n || (p->chans > 1 && p->n % p->chans))
        return tsr_err(TSR_EINVAL, "sgd: chans %lld does not divide n %lld", (long long)p->chans, (long long)p->n);
    if (p->q_bytes != 1 && p->q_bytes != 4)
        return tsr_err(TSR_EINVAL, "sgd: q_bytes %d (1 or 4)", p->q_bytes);
    const int32_t lo = p->q_bytes == 1 ? -128 : -lim(p), hi = p->q_bytes == 1 ? 127 : lim(p) - 1;
    if (p->q_lo < lo || p->q_hi > hi || p->q_lo > p->q_hi)
        return tsr_err(TSR_EINVAL, "sgd: q clamp [%d, %d] empty or outside [%d, %d]", (int)p->q_lo, (int)p->q_hi,
                       (int)lo, (int)hi);
    return TSR_OK;
}

int tsr_sgd_multiplier(double r, int smin, int32_t *m, int *s)
{
    if (!isfinite(r) || r < 0)
        return tsr_err(TSR_EINVAL, "sgd: multiplier %g not finite and >= 0", r);
    *m = 0;
    *s = 0;
    if (r == 0)
        return TSR_OK;
    int e;
    const double f = frexp(r, &e); /* r = f * 2^e, f in [0.5, 1) */
    int64_t q = llround(f * 2147483648.0);
    if (q == INT64_C(2147483648)) {
        q /= 2;
        e++;
    }
    if (-e > 31) /* below the smallest: m / 2^31 / 2^31 */
        return TSR_OK;
    if (-e < smin)
        return tsr_err(TSR_EINVAL, "sgd: multiplier %g too large (a shift of %d, at least %d)", r, -e, smin);
    *m = (int32_t)q;
    *s = -e;
    return TSR_OK;
}

/* ---- the host's form of the planes ---- */

static int64_t lanes_of(const tsr_sgd_t *g)
{
    const tsr_config_t *c = tsr_device_config(g->dev);
    return (int64_t)c->batch * c->block_out;
}

/* value i's place in the device's rows x lanes (tsr_sgd.h: chans > 1, channel groups) */
static int64_t pos_of(const tsr_sgd_t *g, int64_t lanes, int64_t i)
{
    if (g->p.chans <= 1)
        return i;
    const int64_t K = g->grows, c = i / K, k = i % K;
    return ((c / lanes) * K + k) * lanes + c % lanes;
}

static void split_host(const tsr_sgd_t *g, const int32_t *x, int64_t vals, int np, uint8_t *planes)
{
    const int64_t lanes = lanes_of(g);
    memset(planes, 0, (size_t)(np * vals));
    for (int64_t i = 0; i < g->p.n; i++) {
        int64_t v = x[i];
        const int64_t at = pos_of(g, lanes, i);
        for (int k = 0; k < np; k++) {
            planes[k * vals + at] = (uint8_t)(v & 255);
            v = (v + 128) >> 8;
        }
    }
}

static int32_t join_host(const uint8_t *planes, int64_t vals, int64_t i, int np)
{
    uint32_t v = 0;
    for (int k = np - 1; k >= 0; k--)
        v = (v << 8) + (uint32_t)(int32_t)(int8_t)planes[k * vals + i];
    return (int32_t)v;
}

/* ---- the stream ---- */

typedef struct {
    tsr_stream_t s;
    const tsr_sgd_t *g;
    uint32_t cbase;                /* first constant row */
    tsr_uop_t uops[MAXUOPS];
    int nuops;
    int rows;                      /* rows of the current tile */
    int set;                       /* its region set (tile parity) */
    int rc;
} bld_t;

static uint32_t reg(const bld_t *b, int r) { return (uint32_t)((b->set * NREG + r) * b->g->tile); }

static uint32_t uop_of(bld_t *b, uint32_t dst, uint32_t src)
{
    for (int i = 0; i < b->nuops; i++)
        if (b->uops[i].dst == dst && b->uops[i].src == src)
            return (uint32_t)i;
    if (b->nuops == MAXUOPS) {
        b->rc = tsr_err(TSR_EINVAL, "sgd: more than %d micro-ops", MAXUOPS);
        return 0;
    }
    b->uops[b->nuops] = (tsr_uop_t){dst, src, 0};
    return (uint32_t)b->nuops++;
}

/* region d op= region s (row by row) */
static void op_rr(bld_t *b, uint32_t op, int d, int s)
{
    const uint32_t u = uop_of(b, reg(b, d), reg(b, s));
    tsr_stream_loops(tsr_stream_alu(&b->s, op, u, u + 1), (uint32_t)b->rows, 1, 1, 1, 0, 0);
}

/* region d op= constant row c */
static void op_rc(bld_t *b, uint32_t op, int d, int c)
{
    const uint32_t u = uop_of(b, reg(b, d), b->cbase + (uint32_t)c);
    tsr_stream_loops(tsr_stream_alu(&b->s, op, u, u + 1), (uint32_t)b->rows, 1, 0, 1, 0, 0);
}

/* region d op= imm */
static void op_ri(bld_t *b, uint32_t op, int d, int imm)
{
    const uint32_t u = uop_of(b, reg(b, d), reg(b, d));
    tsr_insn_t *in = tsr_stream_alu(&b->s, op, u, u + 1);
    in->use_imm = 1;
    in->imm = (uint32_t)imm;
    tsr_stream_loops(in, (uint32_t)b->rows, 1, 0, 1, 0, 0);
}

/* x = the np acc8 planes in regions p0..p0+np-1 joined */
static void join(bld_t *b, int x, int p0, int np)
{
    op_rr(b, TSR_ALU_MOV, x, p0 + np - 1);
    for (int k = np - 2; k >= 0; k--) {
        op_ri(b, TSR_ALU_SHR, x, -8);
        op_rr(b, TSR_ALU_ADD, x, p0 + k);
    }
}

/* regions s1..s1+np-2 = x_1..x_(np-1) (their out rows: digits 1..; x's own out rows hold digit 0) */
static void split(bld_t *b, int x, int s1, int np)
{
    for (int k = 0; k < np - 1; k++) {
        op_rr(b, TSR_ALU_MOV, s1 + k, k ? s1 + k - 1 : x);
        op_ri(b, TSR_ALU_ADD, s1 + k, 128);
        op_ri(b, TSR_ALU_SHR, s1 + k, 8);
    }
}

static void alu_seq(bld_t *b)
{
    const tsr_sgd_params_t *p = &b->g->p;
    const int np = b->g->np;
    op_rc(b, TSR_ALU_MULHR, R_G, C_MG);
    op_rc(b, TSR_ALU_MAX, R_G, C_GLO);
    op_rc(b, TSR_ALU_MIN, R_G, C_GHI);
    op_rc(b, TSR_ALU_RSHR, R_G, C_SG);
    join(b, R_V, R_PV0, 4);
    op_rc(b, TSR_ALU_MULHR, R_V, C_MMU);
    op_rr(b, TSR_ALU_ADD, R_V, R_G);
    op_rc(b, TSR_ALU_MAX, R_V, C_VLO);
    op_rc(b, TSR_ALU_MIN, R_V, C_VHI);
    join(b, R_W, R_PW0, np);
    op_rr(b, TSR_ALU_MOV, R_T, R_V);
    op_rc(b, TSR_ALU_MULHR, R_T, C_MLR);
    op_ri(b, TSR_ALU_RSHR, R_T, p->slr);
    op_ri(b, TSR_ALU_MUL, R_T, -1);
    op_rr(b, TSR_ALU_ADD, R_W, R_T);
    op_rc(b, TSR_ALU_MAX, R_W, C_WLO);
    op_rc(b, TSR_ALU_MIN, R_W, C_WHI);
    op_rr(b, TSR_ALU_MOV, R_Q, R_W);
    op_ri(b, TSR_ALU_RSHR, R_Q, p->frac);
    op_rc(b, TSR_ALU_MAX, R_Q, C_QLO);
    op_rc(b, TSR_ALU_MIN, R_Q, C_QHI);
    split(b, R_W, R_PW0 + 1, np);
    split(b, R_V, R_PV0 + 1, 4);
    if (p->q_bytes == 4)
        split(b, R_Q, R_QS1, 4);
}

/* element indices of the buffers */
typedef struct {
    uint32_t g, w, v, q, c, u, m;
} els_t;

/* tile t (rows from r0, within channel group grp) */
static void tile_insns(bld_t *b, const els_t *e, int t, int tiles, uint32_t r0, uint32_t grp)
{
    const tsr_sgd_t *g = b->g;
    const uint32_t rows = (uint32_t)b->rows, pl = (uint32_t)g->rows;
    b->set = t % 2;
    if (t >= 2) /* tile t-2's stores are done with this set's rows */
        tsr_stream_wait(&b->s, TSR_Q_ST2CMP);
    tsr_stream_load(&b->s, TSR_MEM_ACC, reg(b, R_G), e->g + r0, 1, rows, rows);
    for (int k = 0; k < 4; k++) {
        if (k < g->np)
            tsr_stream_load(&b->s, TSR_MEM_ACC8, reg(b, R_PW0 + k), e->w + (uint32_t)k * pl + r0, 1, rows, rows);
        tsr_stream_load(&b->s, TSR_MEM_ACC8, reg(b, R_PV0 + k), e->v + (uint32_t)k * pl + r0, 1, rows, rows);
    }
    if (g->p.chans > 1) /* the group's multipliers (the previous tile's ALU ops are done with the row) */
        tsr_stream_load(&b->s, TSR_MEM_ACC, b->cbase + C_MG, e->m + grp, 1, 1, 1);
    alu_seq(b);
    tsr_stream_signal(&b->s, TSR_Q_CMP2ST);
    tsr_stream_wait(&b->s, TSR_Q_CMP2ST);
    for (int k = 0; k < 4; k++) {
        if (k < g->np)
            tsr_stream_store(&b->s, reg(b, k ? R_PW0 + k : R_W), e->w + (uint32_t)k * pl + r0, 1, rows, rows);
        tsr_stream_store(&b->s, reg(b, k ? R_PV0 + k : R_V), e->v + (uint32_t)k * pl + r0, 1, rows, rows);
    }
    for (int k = 0; k < g->p.q_bytes; k++)
        tsr_stream_store(&b->s, reg(b, k ? R_QS1 + k - 1 : R_Q), e->q + (uint32_t)k * pl + r0, 1, rows, rows);
    if (t + 2 < tiles || t == tiles - 1) /* for tile t+2, or (the last) for FINISH */
        tsr_stream_signal(&b->s, TSR_Q_ST2CMP);
}

/* Build the step's stream and write its uops (the uop buffer holds MAXUOPS rows). */
static int build(tsr_sgd_t *g)
{
    const tsr_config_t *c = tsr_device_config(g->dev);
    bld_t *b = calloc(1, sizeof *b);
    if (!b)
        return tsr_err(TSR_ENOMEM, "out of memory");
    b->g = g;
    b->cbase = (uint32_t)(2 * NREG * g->tile);
    const els_t e = {(uint32_t)(g->ga / c->acc_bytes), (uint32_t)(g->wa / c->out_bytes),
                     (uint32_t)(g->va / c->out_bytes), (uint32_t)(g->qa / c->out_bytes),
                     (uint32_t)(g->ca / c->acc_bytes), (uint32_t)(g->ua / c->uop_bytes),
                     (uint32_t)(g->ma / c->acc_bytes)};
    tsr_stream_init(&b->s, c, 0, 0);
    const size_t ui = tsr_stream_uops(&b->s, e.u, 0);
    tsr_stream_load(&b->s, TSR_MEM_ACC, b->cbase, e.c, 1, NCONST, NCONST);
    const int64_t per = (g->grows + g->tile - 1) / g->tile; /* tiles of a group */
    const int tiles = (int)(per * g->groups);
    for (int t = 0; t < tiles; t++) {
        const int64_t grp = t / per, c0 = (t % per) * g->tile, left = g->grows - c0;
        b->rows = (int)(left < g->tile ? left : g->tile);
        tile_insns(b, &e, t, tiles, (uint32_t)(grp * g->grows + c0), (uint32_t)grp);
    }
    tsr_stream_set_uops(&b->s, ui, (uint32_t)b->nuops);
    int rc = b->rc;
    free(g->hu);
    free(g->insns);
    g->insns = NULL;
    g->ninsns = 0;
    /* the old stream is gone: a failed build must not leave it looking current to the next step */
    memset(g->built, 0, sizeof g->built);
    uint8_t *hu = g->hu = calloc(MAXUOPS, c->uop_bytes);
    if (!rc && !hu)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < b->nuops; i++) {
        uint64_t raw;
        if (!(rc = tsr_uop_encode(c, &b->uops[i], &raw)))
            memcpy(hu + (size_t)i * c->uop_bytes, &raw, c->uop_bytes);
    }
    if (!rc && !(rc = tsr_mem_write(g->dev, g->ua, hu, (uint64_t)MAXUOPS * c->uop_bytes)) &&
        !(rc = tsr_stream_finish(&b->s)) && !(rc = tsr_stream_check(&b->s, "sgd"))) {
        g->alu_ops = 0;
        tsr_stream_take(&b->s, &g->insns, &g->ninsns);
        for (size_t i = 0; i < g->ninsns; i++)
            if (g->insns[i].opcode == TSR_OP_ALU)
                g->alu_ops += (uint64_t)g->insns[i].iter_out * g->insns[i].iter_in;
        const uint64_t at[5] = {g->ua, g->ca, g->ga, g->qa, g->ma};
        memcpy(g->built, at, sizeof at);
    }
    tsr_stream_free(&b->s);
    free(b);
    return rc;
}

/* ---- buffers and runs ---- */

/* the smallest log2 of bytes holding `need` rows of `bytes` */
static int log2_for(uint64_t need, uint32_t bytes)
{
    int k = 0;
    while ((UINT64_C(1) << k) < need * bytes)
        k++;
    return k;
}

int tsr_sgd_config_check(const tsr_config_t *c)
{
    if (c->acc_width != 32 || c->inp_width != 8)
        return tsr_err(TSR_ECONFIG, "sgd: needs 32-bit accumulators and 8-bit inputs (config has %d and %d)",
                       c->acc_width, c->inp_width);
    if (c->uop_depth < MAXUOPS)
        return tsr_err(TSR_ECONFIG, "sgd: the uop buffer holds %u micro-ops (LOG_UOP_BUFF_SIZE %d), the update "
                       "needs %d (LOG_UOP_BUFF_SIZE >= %d)", c->uop_depth, c->log_uop_buff_size, MAXUOPS,
                       log2_for(MAXUOPS, c->uop_bytes));
    const uint64_t need = NCONST + 2 * NREG; /* the constants and two tiles of one row */
    if (c->acc_depth < need)
        return tsr_err(TSR_ECONFIG, "sgd: the accumulator buffer holds %u rows (LOG_ACC_BUFF_SIZE %d), the "
                       "update needs %llu (LOG_ACC_BUFF_SIZE >= %d)", c->acc_depth, c->log_acc_buff_size,
                       (unsigned long long)need, log2_for(need, c->acc_bytes));
    return TSR_OK;
}

int64_t tsr_sgd_rows(const tsr_config_t *c, const tsr_sgd_params_t *p)
{
    const int64_t lanes = (int64_t)c->batch * c->block_out;
    if (p->chans > 1)
        return p->n / p->chans * ((p->chans + lanes - 1) / lanes);
    return (p->n + lanes - 1) / lanes;
}

static int geometry(tsr_sgd_t *g, const tsr_config_t *c)
{
    int rc = tsr_sgd_config_check(c);
    if (rc)
        return rc;
    const int64_t lanes = (int64_t)c->batch * c->block_out;
    g->rows = tsr_sgd_rows(c, &g->p);
    g->groups = g->p.chans > 1 ? (g->p.chans + lanes - 1) / lanes : 1;
    g->grows = g->rows / g->groups;
    int64_t tile = ((int64_t)c->acc_depth - NCONST) / (2 * NREG);
    const int64_t lim = (1 << TSR_LOOP_BITS) - 1;
    tile = tile < lim ? tile : lim;
    tile = tile < g->grows ? tile : g->grows;
    g->tile = (int)tile;
    return TSR_OK;
}

static int write_consts(tsr_sgd_t *g, const tsr_config_t *c, int32_t mg, int sg)
{
    const tsr_sgd_params_t *p = &g->p;
    if (mg < 0 || sg < -30 || sg > 31)
        return tsr_err(TSR_EINVAL, "sgd: gradient multiplier %d outside 0..2^31-1 or shift %d outside -30..31",
                       (int)mg, sg);
    /* the clamp before the shift: g within L after it (L << sg over int32: 2^31 - 1, which rshr brings to L) */
    const int64_t L = TSR_SGD_LIM;
    const int32_t gl = sg < 0 ? (int32_t)(L >> -sg) : (int32_t)(L << sg > INT32_MAX ? INT32_MAX : L << sg);
    const int32_t v[NCONST] = {mg, -gl, gl, sg, p->mmu, -(TSR_SGD_LIM - 1), TSR_SGD_LIM - 1, p->mlr,
                               p->w_lo, p->w_hi, p->q_lo, p->q_hi};
    const int lanes = c->batch * c->block_out;
    int32_t *h = malloc((size_t)NCONST * c->acc_bytes);
    if (!h)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int k = 0; k < NCONST; k++)
        for (int l = 0; l < lanes; l++)
            h[k * lanes + l] = v[k];
    const int rc = tsr_mem_write(g->dev, g->ca, h, (uint64_t)NCONST * c->acc_bytes);
    free(h);
    return rc;
}

static int write_state(tsr_sgd_t *g, const int32_t *w_m0, int64_t vals)
{
    const int np = g->np;
    uint8_t *pl = malloc((size_t)(np * vals));
    int32_t *z = calloc((size_t)g->p.n, sizeof *z);
    int rc = TSR_OK;
    if (!pl || !z)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc) {
        split_host(g, w_m0, vals, np, pl);
        rc = tsr_mem_write(g->dev, g->wa, pl, (uint64_t)(np * vals));
    }
    if (!rc) {
        uint8_t *pv = np == 4 ? pl : malloc((size_t)(4 * vals));
        if (!pv)
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        else {
            split_host(g, z, vals, 4, pv);
            rc = tsr_mem_write(g->dev, g->va, pv, (uint64_t)(4 * vals));
        }
        if (pv != pl)
            free(pv);
    }
    free(pl);
    free(z);
    return rc;
}

/* the buffers of a step besides the state: uops, constants, own g and q, the multiplier rows */
static void scratch_free(tsr_sgd_t *g)
{
    uint64_t *a[5] = {&g->ma, g->own_q ? &g->qa : NULL, g->own_g ? &g->ga : NULL, &g->ca, &g->ua};
    for (int i = 0; i < 5; i++)
        if (a[i] && *a[i]) {
            tsr_mem_free(g->dev, *a[i]);
            *a[i] = 0;
        }
}

static int scratch_alloc(tsr_sgd_t *g)
{
    const tsr_config_t *c = tsr_device_config(g->dev);
    const int64_t vals = g->rows * c->batch * c->block_out;
    int rc;
    if ((rc = tsr_mem_alloc(g->dev, (uint64_t)MAXUOPS * c->uop_bytes, &g->ua)) ||
        (rc = tsr_mem_alloc(g->dev, (uint64_t)NCONST * c->acc_bytes, &g->ca)) ||
        (g->own_g && (rc = tsr_mem_alloc(g->dev, (uint64_t)g->rows * c->acc_bytes, &g->ga))) ||
        (g->own_q && (rc = tsr_mem_alloc(g->dev, (uint64_t)(g->p.q_bytes * vals), &g->qa))) ||
        (g->p.chans > 1 && (rc = tsr_mem_alloc(g->dev, (uint64_t)g->groups * c->acc_bytes, &g->ma))))
        scratch_free(g);
    return rc;
}

int tsr_sgd_init(tsr_sgd_t *g, tsr_device_t *dev, const tsr_sgd_params_t *p, const int32_t *w_m0)
{
    memset(g, 0, sizeof *g);
    int rc = tsr_sgd_check(p);
    if (rc)
        return rc;
    for (int64_t i = 0; i < p->n; i++)
        if (w_m0[i] < p->w_lo || w_m0[i] > p->w_hi)
            return tsr_err(TSR_EINVAL, "sgd: initial w_m[%lld] = %d outside [%d, %d]", (long long)i, (int)w_m0[i],
                           (int)p->w_lo, (int)p->w_hi);
    const tsr_config_t *c = tsr_device_config(dev);
    g->dev = dev;
    g->p = *p;
    g->np = nplanes(p);
    g->own_g = !p->g_buf;
    g->own_q = !p->q_buf;
    g->ga = p->g_buf;
    g->qa = p->q_buf;
    if ((rc = geometry(g, c)))
        return rc;
    const int64_t vals = g->rows * c->batch * c->block_out;
    if ((rc = tsr_mem_alloc(dev, (uint64_t)(g->np * vals), &g->wa)) ||
        (rc = tsr_mem_alloc(dev, (uint64_t)(4 * vals), &g->va)) || (rc = scratch_alloc(g)) ||
        (rc = write_consts(g, c, 0, 0)) || (rc = write_state(g, w_m0, vals)) || (rc = build(g))) {
        tsr_sgd_free(g);
        return rc;
    }
    if (p->transient)
        scratch_free(g);
    return TSR_OK;
}

/* the groups' multiplier rows (chans > 1) */
static int write_mults(tsr_sgd_t *g, const tsr_config_t *c, const int32_t *mg)
{
    const int64_t lanes = lanes_of(g);
    for (int64_t ch = 0; ch < g->p.chans; ch++)
        if (mg[ch] < 0)
            return tsr_err(TSR_EINVAL, "sgd: gradient multiplier %d of channel %lld outside 0..2^31-1", (int)mg[ch],
                           (long long)ch);
    int32_t *h = calloc((size_t)(g->groups * lanes), sizeof *h);
    if (!h)
        return tsr_err(TSR_ENOMEM, "out of memory");
    memcpy(h, mg, (size_t)g->p.chans * sizeof *h);
    const int rc = tsr_mem_write(g->dev, g->ma, h, (uint64_t)g->groups * c->acc_bytes);
    free(h);
    return rc;
}

int tsr_sgd_step(tsr_sgd_t *g, const int32_t *g_raw, int32_t mg, int sg, void *q, uint64_t *cycles)
{
    if (g->p.chans <= 1)
        return tsr_sgd_step_ch(g, g_raw, &mg, sg, q, cycles);
    int32_t *m = malloc((size_t)g->p.chans * sizeof *m);
    if (!m)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int64_t ch = 0; ch < g->p.chans; ch++)
        m[ch] = mg;
    const int rc = tsr_sgd_step_ch(g, g_raw, m, sg, q, cycles);
    free(m);
    return rc;
}

static int run_step(tsr_sgd_t *g, const int32_t *g_raw, const int32_t *mg, int sg, void *q, uint64_t *cycles);

int tsr_sgd_step_ch(tsr_sgd_t *g, const int32_t *g_raw, const int32_t *mg, int sg, void *q, uint64_t *cycles)
{
    if (!g->p.transient)
        return run_step(g, g_raw, mg, sg, q, cycles);
    const tsr_config_t *c = tsr_device_config(g->dev);
    int rc = scratch_alloc(g);
    if (rc)
        return rc;
    const uint64_t at[5] = {g->ua, g->ca, g->ga, g->qa, g->ma};
    if (memcmp(at, g->built, sizeof at)) /* elsewhere than the stream's: built again (it writes the uops) */
        rc = build(g);
    else
        rc = tsr_mem_write(g->dev, g->ua, g->hu, (uint64_t)MAXUOPS * c->uop_bytes);
    if (!rc)
        rc = run_step(g, g_raw, mg, sg, q, cycles);
    scratch_free(g);
    return rc;
}

static int run_step(tsr_sgd_t *g, const int32_t *g_raw, const int32_t *mg, int sg, void *q, uint64_t *cycles)
{
    const tsr_config_t *c = tsr_device_config(g->dev);
    if (!g->insns || !g->hu)
        return tsr_err(TSR_EINVAL, "sgd: no update stream (an earlier build failed)");
    int rc = write_consts(g, c, mg[0], sg);
    if (rc || (g->p.chans > 1 && (rc = write_mults(g, c, mg))))
        return rc;
    const int64_t vals = g->rows * c->batch * c->block_out, lanes = lanes_of(g);
    int32_t *hg = calloc((size_t)vals, sizeof *hg);
    uint8_t *hq = malloc((size_t)(g->p.q_bytes * vals));
    tsr_counters_t c0, c1;
    if (!hg || !hq)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc) {
        if (g->p.chans > 1)
            for (int64_t i = 0; i < g->p.n; i++)
                hg[pos_of(g, lanes, i)] = g_raw[i];
        else
            memcpy(hg, g_raw, (size_t)g->p.n * sizeof *hg);
        if (!(rc = tsr_mem_write(g->dev, g->ga, hg, (uint64_t)vals * 4)) && !(rc = tsr_read_counters(g->dev, &c0)) &&
            !(rc = tsr_submit(g->dev, g->insns, g->ninsns)) && !(rc = tsr_wait(g->dev, -1)) &&
            !(rc = tsr_read_counters(g->dev, &c1)))
            rc = tsr_mem_read(g->dev, g->qa, hq, (uint64_t)(g->p.q_bytes * vals));
    }
    if (!rc) {
        if (cycles)
            *cycles += c1.cycles - c0.cycles;
        for (int64_t i = 0; i < g->p.n; i++) {
            const int64_t at = pos_of(g, lanes, i);
            if (g->p.q_bytes == 1)
                ((int8_t *)q)[i] = (int8_t)hq[at];
            else
                ((int32_t *)q)[i] = join_host(hq, vals, at, 4);
        }
    }
    free(hg);
    free(hq);
    return rc;
}

int tsr_sgd_read_state(const tsr_sgd_t *g, int32_t *w_m, int32_t *v)
{
    const tsr_config_t *c = tsr_device_config(g->dev);
    const int64_t vals = g->rows * c->batch * c->block_out;
    uint8_t *pl = malloc((size_t)(4 * vals));
    int rc = pl ? TSR_OK : tsr_err(TSR_ENOMEM, "out of memory");
    for (int k = 0; k < 2 && !rc; k++) {
        int32_t *dst = k ? v : w_m;
        const int np = k ? 4 : g->np;
        if (!dst || (rc = tsr_mem_read(g->dev, k ? g->va : g->wa, pl, (uint64_t)(np * vals))))
            continue;
        for (int64_t i = 0; i < g->p.n; i++)
            dst[i] = join_host(pl, vals, pos_of(g, lanes_of(g), i), np);
    }
    free(pl);
    return rc;
}

void tsr_sgd_free(tsr_sgd_t *g)
{
    if (g->dev)
        scratch_free(g);
    const uint64_t a[2] = {g->va, g->wa};
    for (int i = 0; i < 2; i++)
        if (a[i])
            tsr_mem_free(g->dev, a[i]);
    free(g->insns);
    free(g->hu);
    memset(g, 0, sizeof *g);
}
