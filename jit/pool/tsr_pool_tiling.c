/* tsr_pool_tiling: the pool tiling search and its cost model (tsr_pool_tiling.h). */
#include "tsr_pool_tiling.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_cost.h"
#include "tsr_error.h"
#include "tsr_pool_emit.h"

const char *tsr_pool_tiling_id(void) { return "pool tiling, built " __DATE__ " " __TIME__; }

/* Overheads of the cost model, in cycles: per instruction, and per step
 * (DRAM latency and token hand-offs; measured on the RTL default preset:
 * global avgpool 1x512x7x7 runs in 4220 cycles with 2 steps and 4529 with 8). */
#define COST_PER_INSN 8.0
#define COST_PER_STEP 100.0

double tsr_pool_cost(const geo_t *g, const tiling_t *t)
{
    geo_t gg = *g;
    tsr_pool_set_tiling(&gg, t);
    ibuf_t b;
    memset(&b, 0, sizeof b);
    tsr_stream_init(&b.s, g->c, 1, 0);
    tsr_pool_build(&gg, &b);
    const double bus = tsr_cost_dram_bw(g->c);
    const double mem = (double)b.s.bytes / bus, st = (double)b.sbytes / bus;
    double comp = (double)b.ops;
    if (gg.t.sep && gg.t.nba == 2) { /* GEMM and ALU pipes overlap (software-pipelined tiles) */
        double ga = (double)b.gops, al = (double)(b.ops - b.gops);
        comp = ga > al ? ga : al;
    }
    /* overlapped, plus the pipeline fill or drain (one step of the shorter
     * side), plus what a single-buffered rotation serialises: the loads
     * with one input half, the stores with one output region */
    const tsr_cost_terms_t terms = {.mem = mem, .comp = comp, .fill = -1,
                                    .serial = {t->nbi == 1 ? mem - st : 0, t->nba == 1 ? st : 0},
                                    .steps = gg.steps, .per_step = COST_PER_STEP,
                                    .insns = (double)b.s.n, .per_insn = COST_PER_INSN};
    return tsr_cost_pipelined(&terms);
}

int tsr_pool_choose_tiling(geo_t *g)
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
                        if (!tsr_pool_tiling_fits(g, &t))
                            continue;
                    } else {
                        /* only the tallest fitting tile for each width and channel count */
                        int e = n_oh - 1;
                        for (; e >= 0; e--) {
                            t.toh = c_oh[e];
                            if (tsr_pool_tiling_fits(g, &t))
                                break;
                        }
                        if (e < 0)
                            continue;
                    }
                    double cost = tsr_pool_cost(g, &t);
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
                           tsr_pool_kind_name(g->kind), c->acc_depth, c->uop_depth);
        return tsr_err(TSR_EINVAL,
                       OP ": %s: no tiling fits the buffers: one output of one channel block needs a %dx%d input "
                       "window on chip (the input buffer holds %u rows), %d accumulator rows (buffer %u) and "
                       "%d uops (buffer %u)",
                       tsr_pool_kind_name(g->kind), p->kh, p->kw, c->inp_depth,
                       g->nconst + (g->kind == TSR_POOL_MAX ? g->kk : 0) + (g->use_map ? 1 : 0) + 1, c->acc_depth,
                       g->kind == TSR_POOL_MAX ? 3 + p->kw + p->kh : 3 + g->kk, c->uop_depth);
    }
    tsr_pool_set_tiling(g, &bt);
    return TSR_OK;
}

