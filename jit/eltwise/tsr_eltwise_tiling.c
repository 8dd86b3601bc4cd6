/*
 * tsr_eltwise_tiling: the add/clip tile-size search and its cost model
 * (tsr_eltwise_tiling.h).
 *
 * The tile size T minimises a cost model of the pipelined run: per row,
 * DRAM cycles D (bytes in and out over the configured bus width) and
 * compute cycles C (tensor ops, one per cycle); per tile a fixed overhead
 * (DRAM latency, instruction issue); the steady state runs at max(D, C)
 * per row plus the fill/drain min(D, C) * T that cannot overlap.
 */
#include "tsr_eltwise_tiling.h"

#include "tsr_cost.h"
#include "tsr_error.h"

const char *tsr_eltwise_tiling_id(void) { return "eltwise tiling, built " __DATE__ " " __TIME__; }

/* Cost-model overheads in cycles: per tile (DRAM latency of a transfer
 * plus the handover between stages) and per compute instruction (issue
 * and pipeline fill). */
#define COST_TILE 80.0
#define COST_INSN 6.0

/* Estimated cycles of the pipelined run with tile size T. */
double tsr_eltwise_cost(const geo_t *g0, int T, int nbuf)
{
    geo_t g = *g0;
    tsr_eltwise_set_tiling(&g, T, nbuf);
    const tsr_config_t *c = g.c;
    const double bus = tsr_cost_dram_bw(c);
    const double in_per_row = g.kr > 1 ? (double)c->inp_bytes / g.kr : (double)c->inp_bytes * g.ki;
    const double D = (g.inputs * in_per_row + c->out_bytes) / bus, C = g.ops_per_row; /* per row */
    const double rows = (double)g.rows, lo = D > C ? C : D;
    /* double buffered: rows at max(D, C) plus the fill/drain of one tile of
     * the shorter side; single: nothing overlaps. (Bus widths and block
     * ratios are powers of two, so every term is a dyadic rational far
     * inside double precision and the sums are exact in any order.) */
    const tsr_cost_terms_t terms = {.mem = rows * D, .comp = rows * C,
                                    .fill = nbuf == 1 ? rows * lo : lo * (T < (int)g.rows ? T : (int)g.rows),
                                    .steps = g.tiles, .per_step = COST_TILE,
                                    .insns = (double)g.tiles * (g.ninit + g.inputs + g.nsteps), .per_insn = COST_INSN};
    return tsr_cost_pipelined(&terms);
}

int tsr_eltwise_choose_tiling(geo_t *g)
{
    const char *op = tsr_eltwise_op_name(g->kind);
    for (int nbuf = 2; nbuf >= 1; nbuf--) {
        int best_t = 0;
        double best = 0;
        long tmax = (long)g->rows; /* a multiple of kr: one tile holds the whole tensor */
        for (long T = g->kr; T <= tmax; T += g->kr) {
            if (!tsr_eltwise_tiling_fits(g, (int)T, nbuf))
                break; /* every constraint is monotone in T */
            double m = tsr_eltwise_cost(g, (int)T, nbuf);
            if (!best_t || m <= best) {
                best = m;
                best_t = (int)T;
            }
        }
        if (best_t) {
            tsr_eltwise_set_tiling(g, best_t, nbuf);
            return TSR_OK;
        }
    }
    return tsr_err(TSR_EINVAL, "%s: no tiling fits the buffers: %d inputs of %d inp rows and %d accumulator "
                   "rows each (+%d constant rows) need inp depth %u, acc depth %u, %d weight rows (depth %u), %d "
                   "uops (depth %u)", op, g->inputs, g->kr > 1 ? 1 : g->ki, g->kr, g->nconst, g->c->inp_depth,
                   g->c->acc_depth, wgt_rows(g), g->c->wgt_depth, g->inputs * g->kw + U_CONST + 2 * g->nconst,
                   g->c->uop_depth);
}

