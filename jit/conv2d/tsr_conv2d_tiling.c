/* tsr_conv2d_tiling: tiling search and timing model (tsr_conv2d_tiling.h). */
#include "tsr_conv2d_tiling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_conv2d_emit.h"
#include "tsr_error.h"
#include "tsr_jitutil.h"

#define OP "conv2d"

const char *tsr_conv2d_tiling_id(void) { return "conv2d tiling, built " __DATE__ " " __TIME__; }

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

/* max of two times (never NaN): inline, where fmax is a libm call that
 * honours NaNs, in the loop a search runs millions of times */
static inline double dmax(double a, double b) { return a > b ? a : b; }

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
        start = dmax(start, d->iv[i][1]);
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

/* DRAM port time of a LOAD/STORE in the model (bytes: its bytes, st: its
 * stage as in estimate): every row of a load-stage LOAD is its own burst of
 * at least EST_ROW cycles (the port's outstanding requests over the
 * latency), a long one its transfer time. */
static double dram_time(const tsr_insn_t *in, int st, double bytes, double bw)
{
    const double rows = in->opcode == TSR_OP_LOAD && st == 0 ? (double)in->y_size : 0;
    return rows > 0 ? rows * dmax(bytes / rows / bw, EST_ROW) : bytes / bw;
}

static int est_stage(const tsr_insn_t *in)
{
    return in->opcode == TSR_OP_STORE                                                                     ? 2
           : in->opcode == TSR_OP_LOAD && (in->mem_type == TSR_MEM_INP || in->mem_type == TSR_MEM_WGT) ? 0
                                                                                                         : 1;
}

/* Whether lower bound lb of an estimate already exceeds limit, with a
 * margin far above the rounding of the model's sums: a candidate is given up
 * only when its estimate could not be below limit. */
static int over(double lb, double limit) { return lb > limit + 1e-9 * fabs(limit) + 1e-6; }

double tsr_conv2d_estimate_cycles(const geo_t *g, const ibuf_t *b) { return tsr_conv2d_estimate_below(g, b, INFINITY); }

double tsr_conv2d_estimate_below(const geo_t *g, const ibuf_t *b, double limit)
{
    const tsr_config_t *c = g->c;
    const double bw = c->dram_bus_width / 8.0;
    double eb[TSR_MEM_COUNT]; /* element bytes per memory type, looked up once */
    for (int m = 0; m < TSR_MEM_COUNT; m++)
        eb[m] = tsr_config_elem_bytes(c, m);
    /* Lower bounds of the estimate, cheap beside it: the GEMM pipe, the ALU
     * pipe and the DRAM port each serve their instructions one at a time,
     * so the estimate is at least each one's total work; and at any point
     * of the pass, the time so far, or the GEMM pipe's time plus the GEMM
     * work still to come. */
    double work[3] = {0, 0, 0}; /* GEMM, ALU, DRAM */
    if (limit < INFINITY) {
        for (size_t i = 0; i < b->s.n; i++) {
            const tsr_insn_t *in = &b->s.v[i];
            if (in->opcode == TSR_OP_GEMM || in->opcode == TSR_OP_ALU)
                work[in->opcode == TSR_OP_ALU] += tsr_insn_issue_cycles(c, in, NULL) + EST_PIPE;
            else if (in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE)
                work[2] += dram_time(in, est_stage(in),
                                     (double)in->y_size * in->x_size * (in->mem_type < TSR_MEM_COUNT ? eb[in->mem_type] : tsr_config_elem_bytes(c, (int)in->mem_type)), bw);
        }
        const double lb = dmax(work[0], dmax(work[1], work[2]));
        if (over(lb, limit))
            return lb;
    }
    dram_t dr = {0};
    enum { L2C, C2L, C2S, S2C, NQ };
    tokq_t q[NQ];
    memset(q, 0, sizeof q);
    double tl = 0, ts = 0, disp = 0, dram = 0, older = 0, total = 0;
    double pipe[2] = {0, 0}, last_bank[2][2] = {{0, 0}, {0, 0}};
    int bad = 0;
    for (size_t i = 0; i < b->s.n && !bad; i++) {
        const tsr_insn_t *in = &b->s.v[i];
        const int st = est_stage(in);
        double ready = st == 0 ? tl : st == 2 ? ts : disp;
        const int qp = st == 0 ? -1 : st == 1 ? L2C : C2S, qn = st == 0 ? C2L : st == 1 ? S2C : -1;
        if (in->pop_prev && qp >= 0) {
            if (q[qp].next >= q[qp].n) { bad = 1; break; }
            ready = dmax(ready, q[qp].t[q[qp].next++]);
        }
        if (in->pop_next && qn >= 0) {
            if (q[qn].next >= q[qn].n) { bad = 1; break; }
            ready = dmax(ready, q[qn].t[q[qn].next++]);
        }
        double end = ready, push = ready;
        if (in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE) {
            double bytes = (double)in->y_size * in->x_size *
                           (in->mem_type < TSR_MEM_COUNT ? eb[in->mem_type] : tsr_config_elem_bytes(c, (int)in->mem_type));
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
                        start = dmax(start, dmax(last_bank[0][k], last_bank[1][k]));
            } else if (st == 1) {
                start = dmax(start, dmax(pipe[0], pipe[1]));
            }
            const double dt = dram_time(in, st, bytes, bw);
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
                older = dmax(older, end);
                push = end;
            }
        } else if (in->opcode == TSR_OP_GEMM || in->opcode == TSR_OP_ALU) {
            const int u = in->opcode == TSR_OP_ALU;
            const int bk = b->s.tag ? b->s.tag[i] : -1;
            double start = dmax(ready, pipe[u]);
            if (bk < 0)
                start = dmax(start, pipe[1 - u]);
            else
                start = dmax(start, last_bank[1 - u][bk]);
            double ops = tsr_insn_issue_cycles(c, in, NULL);
            end = start + ops + EST_PIPE;
            work[u] -= ops + EST_PIPE; /* (unused when limit is infinite) */
            push = dmax(end, older);
            older = dmax(older, end);
            const int busy = in->push_prev || in->push_next;
            pipe[u] = busy ? push : end;
            for (int k = 0; k < 2; k++)
                if (bk < 0 || bk == k)
                    last_bank[u][k] = end;
            disp = start;
        } else { /* FINISH */
            end = dmax(ready, older);
            disp = end;
        }
        total = dmax(total, end);
        if (limit < INFINITY && (i & 63) == 63 && over(dmax(total, pipe[0] + work[0]), limit)) {
            bad = -1;
            break;
        }
        if (in->push_prev && st > 0 && tq_push(&q[st == 1 ? C2L : S2C], push))
            bad = 1;
        if (in->push_next && st < 2 && tq_push(&q[st == 0 ? L2C : C2S], push))
            bad = 1;
    }
    for (int k = 0; k < NQ; k++)
        free(q[k].t);
    free(dr.iv);
    if (bad < 0)
        return dmax(total, pipe[0] + work[0]);
    return bad || dr.oom ? 1e30 : total;
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
        const double extra = BYTE_WEIGHT * (double)b->s.bytes;
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
        for (int wpass = 0; wpass < 2 && (wpass == 0 || S.best < 0); wpass++) /* full rows first, then column tiles */
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
     * acc rotations, with and without the shrinking last tiles; not when
     * the best so far is within 0.5% of the GEMM work (nothing to gain,
     * and large layers would pay for many more stream builds) */
    const double gemm_ops = (double)g->nb * g->oh * g->ow * g->cob * (g->dw ? 1 : g->cib) * g->kk;
    const int try_res = !g->dw && !(S.best >= 0 && S.best < 1.005 * gemm_ops);
    for (int nba = 4; nba >= 2 && try_res; nba -= 2)
        for (int tail = 1; tail >= 0; tail--)
            for (int bco = n_co - 1; bco >= 0; bco--)
                for (int cci = n_ci - 1; cci >= 0; cci--) {
                    tiling_t t = {.tco = c_co[bco], .tci = c_ci[cci], .co_inner = 1, .res = 1, .tail = tail,
                                  .tow = g->ow, .nbi = 2, .nba = nba};
                    consider_heights(g, &t, c_oh, n_oh, &S);
                }
    free(c_ow);
    free(ch);
    tsr_stream_free(&S.b.s);
    free(S.b.kern);
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
