/* tsr_conv2d_tiling: tiling search and timing model (tsr_conv2d_tiling.h). */
#include "tsr_conv2d_tiling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_conv2d_emit.h"
#include "tsr_cost.h"
#include "tsr_error.h"
#include "tsr_jitutil.h"

#define OP "conv2d"

const char *tsr_conv2d_tiling_id(void) { return "conv2d tiling, built " __DATE__ " " __TIME__; }

/* Cycles a DRAM byte costs in the tiling search beyond its time: among
 * near-equal schedules prefer the one that moves less data. */
#define BYTE_WEIGHT 0.01

double tsr_conv2d_estimate_cycles(const geo_t *g, const ibuf_t *b) { return tsr_conv2d_estimate_below(g, b, INFINITY); }

double tsr_conv2d_estimate_below(const geo_t *g, const ibuf_t *b, double limit)
{
    if (!g->dwk)
        return tsr_cost_stream(g->c, b->s.v, b->s.n, b->s.tag, limit);
    /* the depthwise mode's GEMMs cost by their uops' windows: decode them */
    const size_t nu = (size_t)tsr_conv2d_n_uops_sets(g, b->n_sets);
    tsr_uop_t *u = calloc(nu ? nu : 1, sizeof *u);
    if (!u)
        return 1e30;
    tsr_conv2d_dw_uops(g, b->set_map, u);
    const double est = tsr_cost_stream_uops(g->c, b->s.v, b->s.n, b->s.tag, u, nu, limit);
    free(u);
    return est;
}

/* The search's state: the best tiling so far and its cost (-1: none yet),
 * and one stream buffer every candidate is built into. */
typedef struct {
    double best;
    tiling_t bt;
    ibuf_t b;
} search_t;

/* S->b emptied for the next candidate, keeping its memory. */
static void reset_buf(ibuf_t *b)
{
    tsr_stream_reset(&b->s);
    memset(b->set_map, 0, sizeof b->set_map);
    b->n_sets = 0;
    b->nkern = 0;
    memset(b->khead, 0, sizeof b->khead);
    b->nuops = 0;
    memset(b->fconst, 0, sizeof b->fconst);
}

/* Build tiling t's stream, estimate it and keep t in S if it is the
 * cheapest so far (the first of equal ones). */
static void consider(const geo_t *g, const tiling_t *t0, search_t *S)
{
    tiling_t tt = *t0;
    const tiling_t *t = &tt;
    geo_t gg = *g;
    ibuf_t *b = &S->b;
    reset_buf(b);
    if (t->res) {
        /* A deep lookahead (6 steps) evens out the first tile's loads; but
         * when the DRAM is the bottleneck it only lets reads run ahead of
         * the stores, which the memory then serves last, and the stores
         * free the accumulator regions: there, 2 steps. (The timing model
         * does not see this read priority, so the rule is explicit.) */
        tt.kq = imax(2, imin(6, (int)g->c->dep_queue_depth / 2 - 2));
        tsr_conv2d_set_tiling(&gg, t);
        tsr_conv2d_build_res(&gg, b);
        double ops = 0;
        for (size_t i = 0; i < b->s.n && !b->s.rc; i++)
            if (b->s.v[i].opcode == TSR_OP_GEMM)
                ops += (double)b->s.v[i].iter_out * b->s.v[i].iter_in * (b->s.v[i].uop_end - b->s.v[i].uop_bgn);
        if (!b->s.rc && tt.kq > 2 && (double)b->s.bytes / (g->c->dram_bus_width / 8.0) > ops) {
            reset_buf(b);
            tt.kq = 2;
            gg = *g;
            tsr_conv2d_set_tiling(&gg, t);
            tsr_conv2d_build_res(&gg, b);
        }
    } else {
        tsr_conv2d_set_tiling(&gg, t);
        /* With one row-and-column tile, or one output-channel tile, both
         * loop orders visit the tiles in the same order: the stream with
         * co_inner is the one without it, considered just before (the
         * heights do not depend on the order), and the first of equal
         * costs is kept anyway. */
        if (t->co_inner && (gg.n_rt * gg.n_wt == 1 || gg.n_ct == 1))
            return;
        tsr_conv2d_build(&gg, b);
    }
    double cost = 1e30;
    if (!b->s.rc && b->nuops <= (int)g->c->uop_depth) {
        /* (the depthwise mode: a byte at the bus's rate. Those layers are
         * DRAM-bound, and the estimate, whose per-row load cost is many
         * times a byte's, ranks their tilings' bytes too little: on
         * MobileNetV2's depthwise layers it picked tilings moving 6-13% more
         * bytes that ran up to 15% slower) */
        const double bw = g->dwk ? 1.0 / tsr_cost_dram_bw(g->c) : BYTE_WEIGHT;
        const double extra = bw * (double)b->s.bytes;
        cost = tsr_conv2d_estimate_below(&gg, b, S->best < 0 ? INFINITY : S->best - extra) + extra;
    }
    if (t->res && cost >= 1e30)
        return; /* too many uops (or out of memory): the other modes remain */
    if (S->best < 0 || cost < S->best) {
        S->best = cost;
        S->bt = *t;
    }
}

/* Tiling t with the tallest fitting tile height among the n_oh candidates
 * c_oh (ascending), and with one of about half that height, through
 * consider(); nothing if no height fits. */
static void consider_heights(const geo_t *g, tiling_t *t, const int *c_oh, int n_oh, search_t *S)
{
    int a = n_oh - 1;
    for (; a >= 0; a--) {
        t->toh = c_oh[a];
        if (tsr_conv2d_tiling_fits(g, t))
            break;
    }
    if (a < 0)
        return;
    const int tall = t->toh;
    consider(g, t, S);
    int b2 = a;
    while (b2 > 0 && c_oh[b2] > (tall + 1) / 2)
        b2--;
    t->toh = c_oh[b2];
    if (c_oh[b2] != tall && tsr_conv2d_tiling_fits(g, t))
        consider(g, t, S);
}

int tsr_conv2d_choose_tiling(geo_t *g)
{
    int *ch = malloc(sizeof(int) * (size_t)(g->oh + g->cob + g->cib + 3));
    if (!ch)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int *c_oh = ch, *c_co = ch + g->oh + 1, *c_ci = c_co + g->cob + 1;
    int n_oh = tsr_tile_candidates(g->oh, c_oh), n_co = tsr_tile_candidates(g->cob, c_co);
    int n_ci = g->dw ? 1 : tsr_tile_candidates(g->cib, c_ci);
    if (g->dw) { /* weight parts per chunk: all, or one at a time */
        c_ci[0] = g->wsplit;
        if (g->wsplit > 1)
            c_ci[n_ci++] = 1;
    }
    search_t S = {.best = -1, .bt = {.nbi = 2, .nba = 2}};
    tsr_stream_init(&S.b.s, g->c, 0, 1);
    /* Double buffering of both rotations if any tiling allows it; else
     * single-buffer the inputs/weights, then the accumulators, then both
     * (loads or stores then serialise with compute, but the tile fits). */
    static const int nbs[5][2] = {{2, 4}, {2, 2}, {1, 2}, {2, 1}, {1, 1}};
    int *c_ow = malloc(sizeof(int) * (size_t)(g->ow + 1));
    if (!c_ow) {
        free(ch);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    int n_ow = tsr_tile_candidates(g->ow, c_ow);
    /* Every buffering choice is evaluated: the estimate decides whether
     * four acc regions (requantization and stores off the critical path)
     * are worth their smaller tiles. */
    for (int nbo = 0; nbo < 5; nbo++) {
        if (nbs[nbo][1] == 4 && g->c->dep_queue_depth < 4)
            continue;
        if (nbo >= 2 && S.best >= 0)
            break; /* single-buffered fallbacks only when nothing else fits */
        if (nbo == 1 && g->dwk && S.best >= 0)
            break; /* depthwise mode: four acc regions when they fit (below) */
        /* full rows first, then column tiles (depthwise mode: both; its
         * bound is the DRAM, and over wide rows column tiles let a tile
         * be taller, reloading fewer rows between row tiles) */
        for (int wpass = 0; wpass < 2 && (wpass == 0 || S.best < 0 || g->dwk); wpass++)
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
                            consider_heights(g, &t, c_oh, n_oh, &S);
                        }
            }
    }
    /* resident mode (full rows): every chunk/channel-tile size, both
     * acc rotations, with and without the shrinking last tiles, and with a
     * fused add each place of the residual's LOAD (tiling_t.rpre: in
     * ResNet-50's layer1/layer2 conv+add the ALU bounds the layer, and the
     * LOAD in the epilogue left it idle for the LOAD's whole transfer, a
     * fifth of the layer's time); not when
     * the best so far is within 0.5% of the GEMM work (nothing to gain,
     * and large layers would pay for many more stream builds) */
    const double pairs = g->wnz ? (double)g->wpre[g->cob] : (double)g->cob * (g->dw ? 1 : g->cib); /* (kept) */
    const double gemm_ops = (double)g->nb * g->oh * g->ow * pairs * g->kk;
    const int try_res = !g->dw && !(S.best >= 0 && S.best < 1.005 * gemm_ops);
    for (int nba = 4; nba >= 2 && try_res; nba -= 2)
        for (int tail = 1; tail >= 0; tail--)
            for (int bco = n_co - 1; bco >= 0; bco--)
                for (int cci = n_ci - 1; cci >= 0; cci--)
                    for (int rpre = 0; rpre <= (g->fuse ? 2 : 0); rpre++) {
                        tiling_t t = {.tco = c_co[bco], .tci = c_ci[cci], .co_inner = 1, .res = 1, .tail = tail,
                                      .tow = g->ow, .nbi = 2, .nba = nba, .rpre = rpre};
                        consider_heights(g, &t, c_oh, n_oh, &S);
                    }
    free(c_ow);
    free(ch);
    tsr_stream_free(&S.b.s);
    free(S.b.kern);
    if (S.best < 0 && g->dwk) {
        /* nothing of the depthwise mode fits: the block-diagonal path */
        tsr_conv2d_dw_off(g);
        return tsr_conv2d_choose_tiling(g);
    }
    if (S.best < 0) {
        const tsr_conv2d_params_t *p = g->p;
        return tsr_err(TSR_EINVAL,
                       OP ": no tiling fits the buffers: one output element needs %d input rows of %d elements "
                       "(%d on-chip rows, the input buffer holds %u), %d weight rows (buffer %u), "
                       "%d accumulator rows (buffer %u), within %u uops; tiling along W is not supported yet",
                       p->kh, p->kw, p->kh * p->kw, g->c->inp_depth, g->kk, g->c->wgt_depth, g->ow + g->nconst,
                       g->c->acc_depth, g->c->uop_depth);
    }
    tsr_conv2d_set_tiling(g, &S.bt);
    return TSR_OK;
}
