/*
 * tsr_timeline: Chrome/Perfetto trace-event JSON of accelerator runs (see
 * tsr_timeline.h). The backends report raw events in any order (the
 * SystemC stages run ahead of each other in time); a run's events are
 * buffered, and at its end sorted, normalised (disjoint stage slices,
 * merged pipe activity, one lane per burst in flight) and written, with
 * the counter tracks derived from them. Doing this here, once, is what
 * makes the rtl and systemc files comparable.
 */
#include "tsr_timeline.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_pipe.h"

/* Lanes (tid). Bursts use TID_RD + slot / TID_WR + slot. */
enum { TID_RUN = 1, TID_FETCH, TID_STAGE0, TID_WAIT0 = TID_STAGE0 + TSR_STAGE_COUNT, TID_PIPE0 = TID_WAIT0 + TSR_STAGE_COUNT,
       TID_RD = 20, TID_WR = 60, MAX_SLOTS = 32 };
enum { EV_INSN, EV_WAIT, EV_BURST, EV_PIPE };
#define RUN_GAP 100.0 /* cycles between two runs on the time axis */
#define EV_BYTES 160  /* a generous estimate of one written event, for the memory bound */

typedef struct {
    uint8_t type;   /* EV_* */
    uint8_t lane;   /* stage, pipe or direction */
    double b, e;    /* cycles (backend time base) */
    uint64_t addr;  /* burst address / pipe ops */
    uint32_t bytes; /* burst bytes */
} ev_t;

struct tsr_tl {
    FILE *f;
    char *path;
    uint64_t max, written; /* size limit and bytes written */
    uint64_t dropped;      /* events not written (limit) */
    double dropped_at;     /* timeline time (cycles) of the first dropped event */
    int first;             /* no event written yet (comma handling) */
    /* current run */
    int open;
    uint32_t run;          /* runs begun */
    tsr_config_t cfg;
    tsr_insn_t *insns;
    uint32_t n;
    double start, offset;  /* run START in backend time; its position on the time axis */
    ev_t *ev;
    size_t nev, cap;
    double fetch_b, fetch_e; /* the fetch slice being merged */
    uint32_t fetch_i0, fetch_n;
};

static double ts(const tsr_tl_t *t, double c) { return (t->offset + c - t->start) / 1000.0; }

/* Write one event (a complete JSON object) unless the limit is reached. */
static void put(tsr_tl_t *t, double at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(tsr_tl_t *t, double at, const char *fmt, ...)
{
    if (t->written + 1024 > t->max) {
        if (!t->dropped++)
            t->dropped_at = t->offset + at - t->start;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = fprintf(t->f, "%s\n", t->first ? "" : ",");
    n += vfprintf(t->f, fmt, ap);
    va_end(ap);
    t->first = 0;
    if (n > 0)
        t->written += (uint64_t)n;
}

static void lane_name(tsr_tl_t *t, int tid, const char *name)
{
    put(t, t->start, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", tid, name);
    put(t, t->start, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":%d,\"args\":{\"sort_index\":%d}}", tid,
        tid);
}

int tsr_tl_open(const char *path, const char *backend, uint64_t max_bytes, tsr_tl_t **out)
{
    *out = NULL;
    tsr_tl_t *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    t->f = fopen(path, "w");
    if (!t->f) {
        int rc = tsr_err(TSR_EIO, "timeline: cannot write %s: %s", path, strerror(errno));
        free(t->path);
        free(t);
        return rc;
    }
    t->max = max_bytes ? max_bytes : TSR_TL_DEFAULT_MAX;
    if (t->max < 4096)
        t->max = 4096;
    t->first = 1;
    t->written = (uint64_t)fprintf(t->f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"backend\":\"%s\","
                                         "\"time\":\"1 ns = 1 accelerator cycle\"},\"traceEvents\":[",
                                   backend);
    put(t, 0, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":\"tessera %s\"}}", backend);
    static const char *const lanes[] = {"runs", "fetch", "load", "compute", "store", "load token wait",
                                        "compute token wait", "store token wait", "gemm pipe", "alu pipe"};
    for (int i = 0; i < (int)(sizeof lanes / sizeof lanes[0]); i++)
        lane_name(t, TID_RUN + i, lanes[i]);
    *out = t;
    return TSR_OK;
}

static void push_ev(tsr_tl_t *t, ev_t e)
{
    if (!t || !t->open)
        return;
    /* Memory stays within the file's limit: what would not fit is dropped. */
    if (t->written + (uint64_t)(t->nev + 1) * EV_BYTES > t->max) {
        if (!t->dropped++)
            t->dropped_at = t->offset + e.b - t->start;
        return;
    }
    if (t->nev == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 4096;
        ev_t *p = realloc(t->ev, nc * sizeof *p);
        if (!p) {
            t->dropped++;
            return;
        }
        t->ev = p;
        t->cap = nc;
    }
    t->ev[t->nev++] = e;
}

void tsr_tl_insn(tsr_tl_t *t, int stage, double begin, double end)
{
    push_ev(t, (ev_t){EV_INSN, (uint8_t)stage, begin, end, 0, 0});
}

void tsr_tl_wait(tsr_tl_t *t, int stage, double begin, double end)
{
    if (end > begin)
        push_ev(t, (ev_t){EV_WAIT, (uint8_t)stage, begin, end, 0, 0});
}

void tsr_tl_burst(tsr_tl_t *t, int dir, double begin, double end, uint64_t addr, uint32_t bytes)
{
    push_ev(t, (ev_t){EV_BURST, (uint8_t)dir, begin, end, addr, bytes});
}

void tsr_tl_pipe(tsr_tl_t *t, int pipe, double begin, double end, uint64_t ops)
{
    if (end > begin)
        push_ev(t, (ev_t){EV_PIPE, (uint8_t)pipe, begin, end, ops, 0});
}

static void fetch_flush(tsr_tl_t *t)
{
    if (!t->fetch_n)
        return;
    put(t, t->fetch_b,
        "{\"ph\":\"X\",\"name\":\"fetch #%u..#%u\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
        "\"args\":{\"first\":%u,\"count\":%u}}",
        t->fetch_i0, t->fetch_i0 + t->fetch_n - 1, TID_FETCH, ts(t, t->fetch_b), (t->fetch_e - t->fetch_b) / 1000.0,
        t->fetch_i0, t->fetch_n);
    t->fetch_i0 += t->fetch_n;
    t->fetch_n = 0;
}

void tsr_tl_fetch(tsr_tl_t *t, double at)
{
    if (!t || !t->open)
        return;
    /* Dispatches of consecutive cycles make one slice (bounded output). */
    if (t->fetch_n && at <= t->fetch_e + 1) {
        t->fetch_e = at + 1;
        t->fetch_n++;
        return;
    }
    fetch_flush(t);
    t->fetch_b = at;
    t->fetch_e = at + 1;
    t->fetch_n = 1;
}

int tsr_tl_run_begin(tsr_tl_t *t, const tsr_config_t *cfg, const tsr_insn_t *insns, uint32_t n, double start)
{
    if (!t)
        return TSR_OK;
    if (t->open)
        tsr_tl_run_end(t, start);
    free(t->insns);
    t->insns = malloc((n ? n : 1) * sizeof *insns);
    if (!t->insns)
        return tsr_err(TSR_ENOMEM, "out of memory");
    if (n)
        memcpy(t->insns, insns, n * sizeof *insns);
    t->n = n;
    t->cfg = *cfg;
    t->start = start;
    t->nev = 0;
    t->fetch_n = 0;
    t->fetch_i0 = 0;
    t->open = 1;
    t->run++;
    return TSR_OK;
}

static int cmp_end(const void *a, const void *b)
{
    const ev_t *x = a, *y = b;
    if (x->type != y->type)
        return x->type - y->type;
    if (x->lane != y->lane)
        return x->lane - y->lane;
    double kx = x->type == EV_INSN ? x->e : x->b, ky = y->type == EV_INSN ? y->e : y->b;
    return kx < ky ? -1 : kx > ky ? 1 : (x->e < y->e ? -1 : x->e > y->e);
}

typedef struct {
    double at;
    int q, d; /* queue, +1 push / -1 pop */
} tok_t;

static int cmp_tok(const void *a, const void *b)
{
    const tok_t *x = a, *y = b;
    return x->at < y->at ? -1 : x->at > y->at ? 1 : y->d - x->d; /* pushes first */
}

/* Token queues an instruction of a stage pops / pushes (isa/semantics.md). */
static int pop_q(int st, int next)
{
    return st == TSR_STAGE_LOAD ? TSR_Q_C2L : st == TSR_STAGE_STORE ? TSR_Q_C2S : next ? TSR_Q_S2C : TSR_Q_L2C;
}
static int push_q(int st, int next)
{
    return st == TSR_STAGE_LOAD ? TSR_Q_L2C : st == TSR_STAGE_STORE ? TSR_Q_S2C : next ? TSR_Q_C2S : TSR_Q_C2L;
}

/* Slice name and decoded fields of an instruction. */
static void insn_slice(tsr_tl_t *t, int st, uint32_t idx, double b, double e)
{
    const tsr_insn_t *in = &t->insns[idx];
    const char *op = tsr_opcode_name(in->opcode) ? tsr_opcode_name(in->opcode) : "?";
    char name[48], args[400];
    int k = snprintf(args, sizeof args, "\"idx\":%u,\"pop_prev\":%u,\"pop_next\":%u,\"push_prev\":%u,\"push_next\":%u",
                     idx, in->pop_prev, in->pop_next, in->push_prev, in->push_next);
    if (in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE) {
        const char *m = tsr_mem_name(in->mem_type);
        snprintf(name, sizeof name, "%s %s", op, m ? m : "?");
        snprintf(args + k, sizeof args - (size_t)k,
                 ",\"sram_base\":%u,\"dram_base\":%u,\"y_size\":%u,\"x_size\":%u,\"x_stride\":%u,\"y_pad\":[%u,%u],"
                 "\"x_pad\":[%u,%u]",
                 in->sram_base, in->dram_base, in->y_size, in->x_size, in->x_stride, in->y_pad0, in->y_pad1, in->x_pad0,
                 in->x_pad1);
    } else if (in->opcode == TSR_OP_GEMM || in->opcode == TSR_OP_ALU) {
        const char *a = in->opcode == TSR_OP_ALU ? tsr_alu_name(in->alu_opcode) : NULL;
        snprintf(name, sizeof name, "%s%s%s%s", op, a ? " " : "", a ? a : "", in->reset ? " reset" : "");
        snprintf(args + k, sizeof args - (size_t)k,
                 ",\"uop\":[%u,%u],\"iter\":[%u,%u],\"dst_factor\":[%u,%u],\"src_factor\":[%u,%u],\"reset\":%u,"
                 "\"use_imm\":%u,\"imm\":%d",
                 in->uop_bgn, in->uop_end, in->iter_out, in->iter_in, in->dst_factor_out, in->dst_factor_in,
                 in->src_factor_out, in->src_factor_in, in->reset, in->use_imm, in->imm);
    } else {
        snprintf(name, sizeof name, "%s", op);
    }
    put(t, b, "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{%s}}",
        name, tsr_stage_name(st), TID_STAGE0 + st, ts(t, b), (e - b) / 1000.0, args);
}

int tsr_tl_run_end(tsr_tl_t *t, double end)
{
    if (!t || !t->open)
        return TSR_OK;
    t->open = 0;
    fetch_flush(t);
    qsort(t->ev, t->nev, sizeof *t->ev, cmp_end);
    size_t ntok = 0, cap_tok = 2 * (size_t)t->n + 1;
    tok_t *tok = malloc(cap_tok * sizeof *tok);
    double lane_end[TSR_STAGE_COUNT] = {0};
    uint32_t next[TSR_STAGE_COUNT] = {0}; /* next program-order index per stage */
    double slot_free[2][MAX_SLOTS];
    int slots_named[2] = {0, 0};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < MAX_SLOTS; k++)
            slot_free[d][k] = -1e300;
    for (int s = 0; s < TSR_STAGE_COUNT; s++)
        lane_end[s] = t->start;
    put(t, t->start, "{\"ph\":\"X\",\"name\":\"run %u\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                     "\"args\":{\"run\":%u,\"instructions\":%u,\"cycles\":%.0f}}",
        t->run, TID_RUN, ts(t, t->start), (end - t->start) / 1000.0, t->run, t->n, end - t->start);
    size_t w0 = 0; /* first wait event (they sort after the instructions) */
    while (w0 < t->nev && t->ev[w0].type == EV_INSN)
        w0++;
    size_t wcur[TSR_STAGE_COUNT];
    for (int s = 0; s < TSR_STAGE_COUNT; s++) {
        wcur[s] = w0;
        while (wcur[s] < t->nev && t->ev[wcur[s]].type == EV_WAIT && t->ev[wcur[s]].lane < s)
            wcur[s]++;
    }
    uint64_t rd_bytes = 0, wr_bytes = 0;
    for (size_t i = 0; i < t->nev; i++) {
        ev_t *e = &t->ev[i];
        if (e->type == EV_INSN) {
            int s = e->lane;
            while (next[s] < t->n && (int)tsr_insn_stage(&t->insns[next[s]]) != s)
                next[s]++;
            if (next[s] >= t->n)
                continue; /* more completions than instructions: not labelled */
            uint32_t idx = next[s]++;
            double b = e->b > lane_end[s] ? e->b : lane_end[s];
            if (b > e->e)
                b = e->e;
            lane_end[s] = e->e;
            insn_slice(t, s, idx, b, e->e);
            /* Token counters: the pop when the first wait inside the slice
             * ends (else at its start), the push at its end. */
            const tsr_insn_t *in = &t->insns[idx];
            double pop_at = b;
            size_t w = wcur[s];
            while (w < t->nev && t->ev[w].type == EV_WAIT && t->ev[w].lane == s && t->ev[w].e < b)
                w++;
            wcur[s] = w;
            if (w < t->nev && t->ev[w].type == EV_WAIT && t->ev[w].lane == s && t->ev[w].b <= e->e)
                pop_at = t->ev[w].e;
            if (tok && ntok + 4 <= cap_tok) {
                if (in->pop_prev)
                    tok[ntok++] = (tok_t){pop_at, pop_q(s, 0), -1};
                if (in->pop_next)
                    tok[ntok++] = (tok_t){pop_at, pop_q(s, 1), -1};
                if (in->push_prev)
                    tok[ntok++] = (tok_t){e->e, push_q(s, 0), +1};
                if (in->push_next)
                    tok[ntok++] = (tok_t){e->e, push_q(s, 1), +1};
            }
        } else if (e->type == EV_WAIT) {
            put(t, e->b, "{\"ph\":\"X\",\"name\":\"token wait\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}",
                TID_WAIT0 + e->lane, ts(t, e->b), (e->e - e->b) / 1000.0);
        } else if (e->type == EV_PIPE) {
            /* Merge activity of consecutive cycles (the RTL reports cycles,
             * the SystemC model instructions). */
            double b = e->b, en = e->e;
            uint64_t ops = e->addr;
            while (i + 1 < t->nev && t->ev[i + 1].type == EV_PIPE && t->ev[i + 1].lane == e->lane &&
                   t->ev[i + 1].b <= en + 1) {
                i++;
                if (t->ev[i].e > en)
                    en = t->ev[i].e;
                ops += t->ev[i].addr;
            }
            put(t, b, "{\"ph\":\"X\",\"name\":\"%s ops\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"ops\":%llu}}",
                e->lane == TSR_TL_GEMM ? "gemm" : "alu", TID_PIPE0 + e->lane, ts(t, b), (en - b) / 1000.0,
                (unsigned long long)ops);
        } else { /* EV_BURST: the lowest lane free at its start */
            int d = e->lane, k = 0;
            while (k < MAX_SLOTS - 1 && slot_free[d][k] > e->b)
                k++;
            slot_free[d][k] = e->e;
            if (k >= slots_named[d]) {
                for (int j = slots_named[d]; j <= k; j++) {
                    char nm[32];
                    snprintf(nm, sizeof nm, "dram %s %d", d == TSR_TL_RD ? "read" : "write", j);
                    lane_name(t, (d == TSR_TL_RD ? TID_RD : TID_WR) + j, nm);
                }
                slots_named[d] = k + 1;
            }
            put(t, e->b,
                "{\"ph\":\"X\",\"name\":\"%s %u B\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                "\"args\":{\"addr\":\"0x%llx\",\"bytes\":%u}}",
                d == TSR_TL_RD ? "read" : "write", e->bytes, (d == TSR_TL_RD ? TID_RD : TID_WR) + k, ts(t, e->b),
                (e->e - e->b) / 1000.0, (unsigned long long)e->addr, e->bytes);
            if (d == TSR_TL_RD)
                rd_bytes += e->bytes;
            else
                wr_bytes += e->bytes;
            put(t, e->e, "{\"ph\":\"C\",\"name\":\"dram bytes\",\"pid\":1,\"ts\":%.3f,\"args\":{\"read\":%llu,\"written\":%llu}}",
                ts(t, e->e), (unsigned long long)rd_bytes, (unsigned long long)wr_bytes);
        }
    }
    /* DRAM bursts in flight (a sweep over starts and ends). */
    {
        size_t nb = 0;
        for (size_t i = 0; i < t->nev; i++)
            nb += t->ev[i].type == EV_BURST;
        tok_t *bx = malloc((2 * nb + 1) * sizeof *bx);
        if (bx) {
            size_t m = 0;
            for (size_t i = 0; i < t->nev; i++)
                if (t->ev[i].type == EV_BURST) {
                    bx[m++] = (tok_t){t->ev[i].b, t->ev[i].lane, +1};
                    bx[m++] = (tok_t){t->ev[i].e, t->ev[i].lane, -1};
                }
            qsort(bx, m, sizeof *bx, cmp_tok);
            int fl[2] = {0, 0};
            for (size_t i = 0; i < m; i++) {
                fl[bx[i].q] += bx[i].d;
                if (i + 1 == m || bx[i + 1].at != bx[i].at)
                    put(t, bx[i].at, "{\"ph\":\"C\",\"name\":\"dram bursts in flight\",\"pid\":1,\"ts\":%.3f,"
                                     "\"args\":{\"read\":%d,\"write\":%d}}",
                        ts(t, bx[i].at), fl[0], fl[1]);
            }
            free(bx);
        }
    }
    if (tok) {
        qsort(tok, ntok, sizeof *tok, cmp_tok);
        int occ[TSR_Q_COUNT] = {0};
        for (size_t i = 0; i < ntok; i++) {
            occ[tok[i].q] += tok[i].d;
            if (i + 1 == ntok || tok[i + 1].at != tok[i].at)
                put(t, tok[i].at,
                    "{\"ph\":\"C\",\"name\":\"token queues\",\"pid\":1,\"ts\":%.3f,\"args\":{\"l2c\":%d,\"c2l\":%d,"
                    "\"c2s\":%d,\"s2c\":%d}}",
                    ts(t, tok[i].at), occ[TSR_Q_L2C], occ[TSR_Q_C2L], occ[TSR_Q_C2S], occ[TSR_Q_S2C]);
        }
        free(tok);
    }
    t->offset += end - t->start + RUN_GAP;
    t->nev = 0;
    return TSR_OK;
}

int tsr_tl_close(tsr_tl_t *t)
{
    if (!t)
        return TSR_OK;
    if (t->open)
        tsr_tl_run_end(t, t->start + 1); /* an unfinished run: what was seen */
    const uint64_t limit = t->max;
    if (t->dropped) {
        t->max = UINT64_MAX; /* the note itself always goes in */
        put(t, t->start, "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"timeline truncated: %llu events dropped\",\"pid\":1,"
                         "\"tid\":%d,\"ts\":%.3f}",
            (unsigned long long)t->dropped, TID_RUN, t->dropped_at / 1000.0);
    }
    fprintf(t->f, "\n]}\n");
    int rc = TSR_OK;
    if (fclose(t->f) != 0)
        rc = tsr_err(TSR_EIO, "timeline: writing %s failed", t->path);
    if (t->dropped)
        tsr_notice("timeline %s reached its size limit (%llu KiB): %llu events from cycle %.0f on were left "
                   "out (raise it with --timeline-max MB, or record a shorter run)",
                t->path, (unsigned long long)(limit >> 10), (unsigned long long)t->dropped,
                t->dropped_at);
    free(t->path);
    free(t->insns);
    free(t->ev);
    free(t);
    return rc;
}
