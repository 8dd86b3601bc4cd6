/* tsr_cost: the lowerings' cost model (tsr_cost.h). */
#include "tsr_cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *tsr_cost_id(void) { return "cost model, built " __DATE__ " " __TIME__; }

double tsr_cost_dram_bw(const tsr_config_t *c) { return c->dram_bus_width / 8.0; }

double tsr_cost_pipelined(const tsr_cost_terms_t *t)
{
    const double hi = t->mem > t->comp ? t->mem : t->comp, lo = t->mem > t->comp ? t->comp : t->mem;
    /* (the order of the sums is part of the model: the searches compare
     * these values, and a different rounding could pick another tiling) */
    double cost = hi + (t->fill < 0 ? lo / t->steps : t->fill) + t->per_step * t->steps;
    cost += t->serial[0];
    cost += t->serial[1];
    return cost + t->per_insn * t->insns;
}

/* ------------------------------------------------------ stream estimate */

/* Cycles the stream takes on the accelerator, estimated in one pass in
 * program order (every token a stream pops was pushed by an earlier
 * instruction): the load and store stages and the compute stage's two pipes
 * each keep a clock, a shared DRAM port moves `bw` bytes per cycle with
 * `lat` cycles of latency, GEMM/ALU take one cycle per tensor op, a GEMM and
 * an ALU instruction overlap when they use different accumulator banks
 * (hw/ARCHITECTURE.md), pushes wait for every older compute instruction.
 * It is the cost conv2d's tiling search minimises: a model, not a promise
 * (the bench prints the measured cycles beside it). */
#define EST_LAT 32.0
#define EST_PIPE 6.0
#define EST_ROW 32.0

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

/* Bytes a LOAD/STORE moves (eb: element bytes per memory type). */
static double insn_bytes(const tsr_config_t *c, const double *eb, const tsr_insn_t *in)
{
    return (double)in->y_size * in->x_size *
           (in->mem_type < TSR_MEM_COUNT ? eb[in->mem_type] : tsr_config_elem_bytes(c, (int)in->mem_type));
}

/* The uops a tensor instruction's issue cycles are computed with: those of
 * a depthwise GEMM (whose ops cost 1 or K cycles by their src sequence)
 * when the caller gave them and they cover its range; else NULL (every
 * other instruction keeps the estimate it had before uops could be given). */
static const tsr_uop_t *issue_uops(const tsr_insn_t *in, const tsr_uop_t *uops, size_t nuops)
{
    return uops && in->opcode == TSR_OP_GEMM && in->depthwise && in->uop_end <= nuops && in->uop_bgn < in->uop_end
               ? uops
               : NULL;
}

/* The work each of the GEMM pipe, the ALU pipe and the DRAM port has to do
 * (each serves its instructions one at a time, so the estimate is at
 * least each one's total). */
static void pipe_work(const tsr_config_t *c, const double *eb, double bw, const tsr_insn_t *v, size_t n,
                      const tsr_uop_t *uops, size_t nuops, double work[3])
{
    for (size_t i = 0; i < n; i++) {
        const tsr_insn_t *in = &v[i];
        if (in->opcode == TSR_OP_GEMM || in->opcode == TSR_OP_ALU)
            work[in->opcode == TSR_OP_ALU] += tsr_insn_issue_cycles(c, in, issue_uops(in, uops, nuops)) + EST_PIPE;
        else if (in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE)
            work[2] += dram_time(in, est_stage(in), insn_bytes(c, eb, in), bw);
    }
}

/* The pass's state: the stages' and pipes' clocks, the token queues, the
 * DRAM port. */
enum { L2C, C2L, C2S, S2C, NQ };
typedef struct {
    const tsr_config_t *c;
    double bw;
    dram_t dr;
    tokq_t q[NQ];
    double tl, ts, disp, older, total;
    double pipe[2], last_bank[2][2]; /* [GEMM, ALU] pipe clocks, and per accumulator bank */
    const tsr_uop_t *uops;           /* the uop buffer's contents, or NULL (tsr_cost_stream_uops) */
    size_t nuops;
} est_t;

/* A LOAD or STORE of stage st ready at `ready`: its end and push times. */
static void est_transfer(est_t *e, const tsr_insn_t *in, int st, double bytes, double ready, double *end, double *push)
{
    double start = ready;
    /* compute loads wait for both pipes, an acc LOAD without pushes only
     * for the banks it writes */
    const int acc_nb = st == 1 && bytes > 0 && !in->push_prev && !in->push_next &&
                       (in->mem_type == TSR_MEM_ACC || in->mem_type == TSR_MEM_ACC8);
    int lbk[2] = {1, 1};
    if (acc_nb) {
        const uint32_t half = e->c->acc_depth / 2,
                       last = in->sram_base + (in->y_pad0 + in->y_size + in->y_pad1) *
                                                 (in->x_pad0 + in->x_size + in->x_pad1) - 1;
        lbk[0] = in->sram_base < half;
        lbk[1] = last >= half;
        for (int k = 0; k < 2; k++)
            if (lbk[k])
                start = dmax(start, dmax(e->last_bank[0][k], e->last_bank[1][k]));
    } else if (st == 1) {
        start = dmax(start, dmax(e->pipe[0], e->pipe[1]));
    }
    const double dram = dram_book(&e->dr, start, dram_time(in, st, bytes, e->bw));
    *end = bytes > 0 ? dram + EST_LAT : start;
    *push = *end;
    if (st == 0) {
        e->tl = bytes > 0 ? dram : start;
    } else if (st == 2) {
        e->ts = *end; /* a STORE waits for its write responses */
    } else {
        e->disp = *end;
        if (acc_nb) {
            for (int k = 0; k < 2; k++)
                if (lbk[k])
                    e->last_bank[0][k] = e->last_bank[1][k] = *end;
        } else {
            e->pipe[0] = e->pipe[1] = *end;
        }
        e->older = dmax(e->older, *end);
    }
}

/* A GEMM or ALU instruction (accumulator bank bk, -1 both) ready at
 * `ready`: its end and push times; its cycles leave the work still to come. */
static void est_tensor(est_t *e, const tsr_insn_t *in, int bk, double ready, double *work, double *end, double *push)
{
    const int u = in->opcode == TSR_OP_ALU;
    double start = dmax(ready, e->pipe[u]);
    if (bk < 0)
        start = dmax(start, e->pipe[1 - u]);
    else
        start = dmax(start, e->last_bank[1 - u][bk]);
    const double ops = tsr_insn_issue_cycles(e->c, in, issue_uops(in, e->uops, e->nuops));
    *end = start + ops + EST_PIPE;
    work[u] -= ops + EST_PIPE; /* (unused when limit is infinite) */
    *push = dmax(*end, e->older);
    e->older = dmax(e->older, *end);
    const int busy = in->push_prev || in->push_next;
    e->pipe[u] = busy ? *push : *end;
    for (int k = 0; k < 2; k++)
        if (bk < 0 || bk == k)
            e->last_bank[u][k] = *end;
    e->disp = start;
}

/* When instruction in of stage st may start: its stage's clock and the
 * tokens it pops (0, or 1 for a token never pushed). */
static int est_ready(est_t *e, const tsr_insn_t *in, int st, double *ready)
{
    *ready = st == 0 ? e->tl : st == 2 ? e->ts : e->disp;
    const int qp = st == 0 ? -1 : st == 1 ? L2C : C2S, qn = st == 0 ? C2L : st == 1 ? S2C : -1;
    const int pop[2] = {in->pop_prev && qp >= 0, in->pop_next && qn >= 0}, qs[2] = {qp, qn};
    for (int k = 0; k < 2; k++) {
        if (!pop[k])
            continue;
        tokq_t *q = &e->q[qs[k]];
        if (q->next >= q->n)
            return 1;
        *ready = dmax(*ready, q->t[q->next++]);
    }
    return 0;
}

/* The tokens instruction in of stage st pushes, at time push (nonzero: out of memory). */
static int est_push(est_t *e, const tsr_insn_t *in, int st, double push)
{
    if (in->push_prev && st > 0 && tq_push(&e->q[st == 1 ? C2L : S2C], push))
        return 1;
    if (in->push_next && st < 2 && tq_push(&e->q[st == 0 ? L2C : C2S], push))
        return 1;
    return 0;
}

double tsr_cost_stream(const tsr_config_t *c, const tsr_insn_t *v, size_t n, const int8_t *tags, double limit)
{
    return tsr_cost_stream_uops(c, v, n, tags, NULL, 0, limit);
}

double tsr_cost_stream_uops(const tsr_config_t *c, const tsr_insn_t *v, size_t n, const int8_t *tags,
                            const tsr_uop_t *uops, size_t nuops, double limit)
{
    double eb[TSR_MEM_COUNT]; /* element bytes per memory type, looked up once */
    for (int m = 0; m < TSR_MEM_COUNT; m++)
        eb[m] = tsr_config_elem_bytes(c, m);
    est_t e;
    memset(&e, 0, sizeof e);
    e.c = c;
    e.bw = tsr_cost_dram_bw(c);
    e.uops = uops;
    e.nuops = nuops;
    /* Lower bounds of the estimate, cheap beside it: each pipe's and the
     * port's total work; and at any point of the pass, the time so far, or
     * the GEMM pipe's time plus the GEMM work still to come. */
    double work[3] = {0, 0, 0}; /* GEMM, ALU, DRAM */
    if (limit < INFINITY) {
        pipe_work(c, eb, e.bw, v, n, uops, nuops, work);
        const double lb = dmax(work[0], dmax(work[1], work[2]));
        if (over(lb, limit))
            return lb;
    }
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        const tsr_insn_t *in = &v[i];
        const int st = est_stage(in);
        double ready, end, push;
        if ((bad = est_ready(&e, in, st, &ready)))
            break;
        end = push = ready;
        if (in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE)
            est_transfer(&e, in, st, insn_bytes(c, eb, in), ready, &end, &push);
        else if (in->opcode == TSR_OP_GEMM || in->opcode == TSR_OP_ALU)
            est_tensor(&e, in, tags ? tags[i] : -1, ready, work, &end, &push);
        else /* FINISH */
            e.disp = end = dmax(ready, e.older);
        e.total = dmax(e.total, end);
        if (limit < INFINITY && (i & 63) == 63 && over(dmax(e.total, e.pipe[0] + work[0]), limit)) {
            bad = -1;
            break;
        }
        bad = est_push(&e, in, st, push);
    }
    for (int k = 0; k < NQ; k++)
        free(e.q[k].t);
    free(e.dr.iv);
    if (bad < 0)
        return dmax(e.total, e.pipe[0] + work[0]);
    return bad || e.dr.oom ? 1e30 : e.total;
}
