/*
 * tsr_backend_sampled: the fast timed model everywhere, the Verilated RTL
 * in chosen windows, the whole run's RTL cycles estimated with an error
 * bound (see tsr_sampled.h). Two backend states of the same config and
 * DRAM timing sit behind this one: the fast one (systemc) holds the
 * device's DRAM as the program sees it; the rtl one mirrors every
 * allocation at the same address and receives the changed buffers before
 * a window. Both are driven through their ops structs only, so the hand-off
 * is their mem_read/mem_write and nothing here knows their internals.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_carryin.h"
#include "tsr_error.h"
#include "tsr_piece.h"
#include "tsr_sampled.h"
#include "tsr_util.h"

/* The SystemC model is an optional library (see tsr_driver.c). */
extern const tsr_backend_ops_t tsr_backend_systemc __attribute__((weak));

#define CHUNK (1u << 20) /* bytes per hand-off copy or compare step */

/* The devices that mirror the fast one's DRAM: the RTL, and in pieces mode
 * a second fast model (the twin) that runs the same piece as the RTL. */
enum { T_RTL, T_TWIN, T_COUNT };

typedef struct {
    uint64_t addr, size;
    int dirty[T_COUNT]; /* may differ between the fast device and that one */
} region_t;

typedef struct {
    const tsr_backend_ops_t *fo, *ro; /* fast (systemc), rtl */
    void *f, *r;                      /* their states */
    void *t;                          /* pieces mode: the twin (fo's ops), else NULL */
    uint64_t piece_addr, piece_cap;   /* pieces mode: the piece's instruction buffer on the rtl and the twin */
    uint64_t dram_top;                /* one past the last DRAM byte (the backends' base + size) */
    uint64_t t_c0;                    /* the twin's cycles before a piece */
    int t_done;
    uint64_t piece_len, piece_pro;    /* the running piece's instructions and prologue */
    uint64_t piece_refused;           /* windows without a piece (no cut found) */
    char piece_why[256];              /* the last such refusal */
    tsr_config_t cfg;
    tsr_sample_spec_t spec;
    uint64_t rng;           /* random:P state */
    region_t *regs;         /* every allocation (the driver's instruction buffer too) */
    size_t nregs, capregs;
    tsr_sampled_sub_t *subs; /* submissions since open or reset_counters */
    size_t nsubs, capsubs;
    uint64_t index;         /* submissions since open (window choice, messages) */
    int synced;             /* the RTL has run every submission since open (its on-chip state is a plain rtl device's) */
    int cycles_only;        /* opened with rtl.timing_only: the fast model computes no data, the windows run for
                             * their cycles only (the design's cycles do not depend on the data): the hand-off
                             * carries what the host wrote (instructions, uops, inputs), nothing is compared */
    FILE *trace;            /* TESSERA_SAMPLED_TRACE=FILE: one line per submission (its record and features) */
    tsr_sub_feat_t feat;    /* the running submission's features */
    int break_stores;       /* fault injection (TESSERA_SAMPLED_BREAK=stores): forget what the submissions that ran
                             * on the fast model alone stored, so the test can see the check catch a stale hand-off */
    int running, window;    /* a submission is running; it is a window (or has a piece) */
    int piece;              /* its window is a piece (pieces mode) */
    int f_done, r_done;     /* which of the two has finished it */
    uint64_t f_c0, r_c0;    /* their cycle counters before it */
    uint8_t *a, *b;         /* CHUNK-byte scratch buffers */
    double rtl_s, fast_s, handoff_s;
    uint64_t handoff_bytes;
} smp_t;

/* ------------------------------------------------------------- the spec */

int tsr_sample_parse(const char *spec, tsr_sample_spec_t *out)
{
    memset(out, 0, sizeof *out);
    if (!spec)
        spec = TSR_SAMPLE_DEFAULT;
    char *end;
    if (!strcmp(spec, "all")) {
        out->mode = TSR_SAMPLE_ALL;
        return TSR_OK;
    }
    if (!strcmp(spec, "none")) {
        out->mode = TSR_SAMPLE_NONE;
        return TSR_OK;
    }
    if (!strncmp(spec, "every:", 6)) {
        const char *s = spec + 6;
        unsigned long long k = (*s >= '0' && *s <= '9') ? strtoull(s, &end, 10) : 0;
        if (!k || *end || k > (1ull << 40))
            return tsr_err(TSR_EINVAL, "sample spec \"%.40s\": every:K needs an integer K >= 1", spec);
        out->mode = TSR_SAMPLE_EVERY;
        out->every = k;
        return TSR_OK;
    }
    if (!strncmp(spec, "pieces:", 7)) {
        const char *s = spec + 7;
        double p = (*s >= '0' && *s <= '9') || *s == '.' ? strtod(s, &end) : -1;
        unsigned long long k = 0;
        if (p > 0 && p <= 1 && *end == ':' && end[1] >= '0' && end[1] <= '9')
            k = strtoull(end + 1, &end, 10);
        if (!(p > 0 && p <= 1) || !k || k > 4096 || *end)
            return tsr_err(TSR_EINVAL, "sample spec \"%.40s\": pieces:P:K needs a probability 0 < P <= 1 and "
                           "1 <= K <= 4096 pieces", spec);
        out->mode = TSR_SAMPLE_PIECES;
        out->p = p;
        out->every = k;
        return TSR_OK;
    }
    if (!strncmp(spec, "random:", 7)) {
        const char *s = spec + 7;
        double p = (*s >= '0' && *s <= '9') || *s == '.' ? strtod(s, &end) : -1;
        if (p <= 0 || p > 1 || *end || p != p)
            return tsr_err(TSR_EINVAL, "sample spec \"%.40s\": random:P needs a probability 0 < P <= 1", spec);
        out->mode = TSR_SAMPLE_RANDOM;
        out->p = p;
        return TSR_OK;
    }
    return tsr_err(TSR_EINVAL, "sample spec \"%.40s\": expected all, every:K, random:P, pieces:P:K or none", spec);
}

/* ------------------------------------------------------------ open/close */

static void s_close(void *st)
{
    smp_t *s = st;
    if (!s)
        return;
    if (s->r)
        s->ro->close(s->r);
    if (s->t)
        s->fo->close(s->t);
    if (s->f)
        s->fo->close(s->f);
    if (s->trace)
        fclose(s->trace);
    free(s->regs);
    free(s->subs);
    free(s->a);
    free(s->b);
    free(s);
}

static int s_open(const tsr_config_t *cfg, const tsr_device_opts_t *opts, void **state)
{
    tsr_sample_spec_t spec;
    int rc = tsr_sample_parse(opts->sample, &spec);
    if (rc)
        return tsr_err_prefix(rc, "sampled: ");
    if (!&tsr_backend_systemc)
        return tsr_err(TSR_EBACKEND, "sampled: needs the systemc backend as its fast model (tsr_systemc not linked)");
    smp_t *s = calloc(1, sizeof *s);
    if (!s || !(s->a = malloc(CHUNK)) || !(s->b = malloc(CHUNK))) {
        s_close(s);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    s->fo = &tsr_backend_systemc;
    s->ro = &tsr_backend_rtl;
    s->cfg = *cfg;
    s->spec = spec;
    s->rng = opts->sample_seed;
    s->synced = 1;
    s->cycles_only = opts->rtl.timing_only != 0;
    /* the rtl and systemc backends: DRAM at 0x1000, at most up to the 32-bit AXI address space's end */
    s->dram_top = 0x1000ull + (opts->dram_size < 0xffffffffull - 0x1000ull ? opts->dram_size : 0xffffffffull - 0x1000ull);
    const char *brk = getenv("TESSERA_SAMPLED_BREAK");
    s->break_stores = brk && !strcmp(brk, "stores");
    /* One waveform, profile or timeline file: the RTL's (the windows). */
    tsr_device_opts_t fo = *opts;
    fo.rtl.trace_path = NULL;
    fo.rtl.profile_path = NULL;
    fo.rtl.timeline_path = NULL;
    if ((rc = s->fo->open(cfg, &fo, &s->f))) {
        s->f = NULL;
        s_close(s);
        return tsr_err_prefix(rc, "sampled: the fast model (systemc) cannot hold this device: ");
    }
    tsr_device_opts_t ro = *opts; /* the RTL computes its data whatever: its cycles are the same */
    ro.rtl.timing_only = 0;
    if ((rc = s->ro->open(cfg, &ro, &s->r))) {
        s->r = NULL;
        s_close(s);
        return tsr_err_prefix(rc, "sampled: the RTL cannot hold this device: ");
    }
    if (spec.mode == TSR_SAMPLE_PIECES && (rc = s->fo->open(cfg, &fo, &s->t))) {
        s->t = NULL;
        s_close(s);
        return tsr_err_prefix(rc, "sampled: the second fast model of the pieces: ");
    }
    const char *tp = getenv("TESSERA_SAMPLED_TRACE");
    if (tp && *tp && !(s->trace = fopen(tp, "w"))) {
        s_close(s);
        return tsr_err(TSR_EIO, "sampled: cannot write the trace TESSERA_SAMPLED_TRACE=%.200s", tp);
    }
    *state = s;
    return TSR_OK;
}

/* ---------------------------------------------------------------- memory */

static int add_region(smp_t *s, uint64_t addr, uint64_t size)
{
    if (s->nregs == s->capregs) {
        size_t cap = s->capregs ? s->capregs * 2 : 64;
        region_t *r = realloc(s->regs, cap * sizeof *r);
        if (!r)
            return tsr_err(TSR_ENOMEM, "out of memory");
        s->regs = r;
        s->capregs = cap;
    }
    s->regs[s->nregs++] = (region_t){addr, size, {0, 0}}; /* new buffers read as zeros on all */
    return TSR_OK;
}

/* Buffer [addr, addr + size), just allocated on the fast device, at the
 * same address on the rtl device and the twin (tracked unless private). */
static int mirror(smp_t *s, uint64_t addr, uint64_t size, int private_buf)
{
    int rc = s->ro->mem_alloc_at(s->r, addr, size);
    if (rc) {
        s->fo->mem_free(s->f, addr);
        return tsr_err_prefix(rc, "sampled: the RTL device cannot mirror buffer 0x%llx: ", (unsigned long long)addr);
    }
    if (s->t && (rc = s->fo->mem_alloc_at(s->t, addr, size))) {
        s->ro->mem_free(s->r, addr);
        s->fo->mem_free(s->f, addr);
        return tsr_err_prefix(rc, "sampled: the twin cannot mirror buffer 0x%llx: ", (unsigned long long)addr);
    }
    if (!private_buf && (rc = add_region(s, addr, size))) {
        if (s->t)
            s->fo->mem_free(s->t, addr);
        s->ro->mem_free(s->r, addr);
        s->fo->mem_free(s->f, addr);
    }
    return rc;
}

static int s_mem_alloc(void *st, uint64_t size, uint64_t align, uint64_t *addr)
{
    smp_t *s = st;
    int rc = s->fo->mem_alloc(s->f, size, align, addr);
    return rc ? rc : mirror(s, *addr, size, 0);
}

static int s_mem_alloc_at(void *st, uint64_t addr, uint64_t size)
{
    smp_t *s = st;
    int rc = s->fo->mem_alloc_at(s->f, addr, size);
    return rc ? rc : mirror(s, addr, size, 0);
}

static int s_mem_free(void *st, uint64_t addr)
{
    smp_t *s = st;
    int rc = s->fo->mem_free(s->f, addr);
    if (rc)
        return rc;
    s->ro->mem_free(s->r, addr);
    if (s->t)
        s->fo->mem_free(s->t, addr);
    for (size_t i = 0; i < s->nregs; i++)
        if (s->regs[i].addr == addr) {
            s->regs[i] = s->regs[--s->nregs];
            break;
        }
    return TSR_OK;
}

/* Mark the regions overlapping [lo, hi) as changed on the fast device. */
static void dirty(smp_t *s, uint64_t lo, uint64_t hi)
{
    for (size_t i = 0; i < s->nregs; i++)
        if (lo < s->regs[i].addr + s->regs[i].size && s->regs[i].addr < hi)
            s->regs[i].dirty[T_RTL] = s->regs[i].dirty[T_TWIN] = 1;
}

static int s_mem_write(void *st, uint64_t addr, const void *src, uint64_t n)
{
    smp_t *s = st;
    dirty(s, addr, addr + n);
    return s->fo->mem_write(s->f, addr, src, n);
}

static int s_mem_read(void *st, uint64_t addr, void *dst, uint64_t n)
{
    smp_t *s = st;
    return s->fo->mem_read(s->f, addr, dst, n);
}

static int fast_read_cb(void *ctx, uint64_t addr, void *dst, size_t n)
{
    smp_t *s = ctx;
    return s->fo->mem_read(s->f, addr, dst, n);
}

/* The hand-off: every buffer that may have changed since the last window,
 * copied from the fast device into target T_RTL or T_TWIN. */
static int handoff(smp_t *s, int target)
{
    const tsr_backend_ops_t *to = target == T_RTL ? s->ro : s->fo;
    void *ts = target == T_RTL ? s->r : s->t;
    for (size_t i = 0; i < s->nregs; i++) {
        region_t *g = &s->regs[i];
        if (!g->dirty[target])
            continue;
        for (uint64_t off = 0; off < g->size; off += CHUNK) {
            uint64_t n = g->size - off < CHUNK ? g->size - off : CHUNK;
            int rc = s->fo->mem_read(s->f, g->addr + off, s->a, n);
            if (!rc)
                rc = to->mem_write(ts, g->addr + off, s->a, n);
            if (rc)
                return tsr_err_prefix(rc, "sampled: hand-off of buffer 0x%llx: ", (unsigned long long)g->addr);
            s->handoff_bytes += n;
        }
        g->dirty[target] = 0;
    }
    return TSR_OK;
}

/* After a window: the RTL's DRAM equal to the reference's (the fast device
 * after a whole submission, the twin after a piece) in every buffer. */
static int compare(smp_t *s, uint64_t sub, int piece)
{
    void *ref = piece ? s->t : s->f;
    for (size_t i = 0; i < s->nregs; i++) {
        const region_t *g = &s->regs[i];
        for (uint64_t off = 0; off < g->size; off += CHUNK) {
            uint64_t n = g->size - off < CHUNK ? g->size - off : CHUNK;
            int rc = s->fo->mem_read(ref, g->addr + off, s->a, n);
            if (!rc)
                rc = s->ro->mem_read(s->r, g->addr + off, s->b, n);
            if (rc)
                return tsr_err_prefix(rc, "sampled: comparing buffer 0x%llx: ", (unsigned long long)g->addr);
            if (memcmp(s->a, s->b, n)) {
                uint64_t k = 0;
                while (s->a[k] == s->b[k])
                    k++;
                return tsr_err(TSR_EBACKEND,
                               "sampled: submission #%llu: after its RTL window%s the RTL's DRAM differs from the "
                               "%s's at 0x%llx (buffer 0x%llx + %llu): rtl 0x%02x, %s 0x%02x",
                               (unsigned long long)sub, piece ? " (a piece)" : "",
                               piece ? "second fast model" : "fast model", (unsigned long long)(g->addr + off + k),
                               (unsigned long long)g->addr, (unsigned long long)(off + k), s->b[k],
                               piece ? "second fast model" : "fast model", s->a[k]);
            }
        }
    }
    return TSR_OK;
}

/* A submission on the fast device alone: the buffers its STOREs write may now differ. */
static void dirty_stores(smp_t *s, const tsr_insn_t *insns, uint32_t n)
{
    const uint64_t eb = tsr_config_elem_bytes(&s->cfg, TSR_MEM_OUT);
    for (uint32_t i = 0; i < n; i++) {
        const tsr_insn_t *in = &insns[i];
        if (in->opcode != TSR_OP_STORE || !in->x_size || !in->y_size)
            continue;
        uint64_t lo = (uint64_t)in->dram_base * eb;
        uint64_t hi = ((uint64_t)in->dram_base + (uint64_t)(in->y_size - 1) * in->x_stride + in->x_size) * eb;
        dirty(s, lo, hi);
    }
}

/* ------------------------------------------------------------------ runs */

void tsr_sub_features(const tsr_insn_t *insns, size_t n, tsr_sub_feat_t *f)
{
    memset(f, 0, sizeof *f);
    f->insns = n;
    int dw = 0;
    for (size_t i = 0; i < n; i++) {
        const tsr_insn_t *in = &insns[i];
        const uint64_t it = (uint64_t)(in->uop_end - in->uop_bgn) * in->iter_out * in->iter_in;
        if (in->opcode == TSR_OP_LOAD)
            f->loads++;
        else if (in->opcode == TSR_OP_STORE)
            f->stores++;
        else if (in->opcode == TSR_OP_GEMM && !in->reset) {
            f->gemm_iters += it;
            dw |= in->depthwise != 0;
        } else if (in->opcode == TSR_OP_ALU)
            f->alu_iters += it;
    }
    f->kind = dw ? TSR_SUB_DW : f->gemm_iters ? TSR_SUB_GEMM : f->alu_iters ? TSR_SUB_ALU : TSR_SUB_MOVE;
}

static int choose(smp_t *s, uint64_t i)
{
    switch (s->spec.mode) {
    case TSR_SAMPLE_ALL: return 1;
    case TSR_SAMPLE_EVERY: return i % s->spec.every == 0;
    case TSR_SAMPLE_RANDOM:
    case TSR_SAMPLE_PIECES: {
        uint64_t u = tsr_splitmix64(&s->rng);
        return (double)(u >> 11) * 0x1.0p-53 < s->spec.p;
    }
    default: return 0;
    }
}

static int decode(smp_t *s, uint64_t insn_addr, uint32_t count, tsr_insn_t **out)
{
    tsr_insn_t *insns = calloc(count ? count : 1, sizeof *insns);
    uint8_t *bytes = malloc((size_t)count * TSR_INSN_BYTES + 1);
    int rc = TSR_OK;
    *out = NULL;
    if (!insns || !bytes)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc)
        rc = s->fo->mem_read(s->f, insn_addr, bytes, (uint64_t)count * TSR_INSN_BYTES);
    for (uint32_t i = 0; i < count && !rc; i++) {
        tsr_insn_bits_t b;
        tsr_insn_bits_load(bytes + (size_t)i * TSR_INSN_BYTES, &b);
        rc = tsr_insn_decode(&s->cfg, &b, &insns[i]);
    }
    free(bytes);
    if (rc)
        free(insns);
    else
        *out = insns;
    return rc;
}

static uint64_t cycles_of(const tsr_backend_ops_t *o, void *st, int *rc)
{
    tsr_counters_t c;
    memset(&c, 0, sizeof c);
    if (!*rc)
        *rc = o->counters(st, &c);
    return c.cycles;
}

/* A piece of about 1/K of the stream from a random place, cut at a tile
 * start (a GEMM reset) where the stream has them: up to 8 cuts are tried
 * (tsr_piece.h refuses a cut with a partial sum in flight). */
static int make_piece(smp_t *s, const tsr_insn_t *insns, size_t n, tsr_insn_t **piece, size_t *np, size_t *npro)
{
    const size_t body = n - 1, k = (size_t)s->spec.every;
    size_t len = body / k ? body / k : 1;
    const size_t a0 = (size_t)(tsr_splitmix64(&s->rng) % k) * len % body;
    int resets = 0, rc = TSR_EVERIFY;
    for (size_t i = 0; i < body && !resets; i++)
        resets = insns[i].opcode == TSR_OP_GEMM && insns[i].reset;
    snprintf(s->piece_why, sizeof s->piece_why, "no cut tried");
    for (size_t i = 0, tries = 0; i < body && tries < 8; i++) {
        const size_t a = (a0 + (resets ? i : i * (len / 8 + 1))) % body;
        if (resets && !(insns[a].opcode == TSR_OP_GEMM && insns[a].reset))
            continue;
        size_t b = a + len < body ? a + len : body;
        while (resets && b < body && !(insns[b].opcode == TSR_OP_GEMM && insns[b].reset))
            b++;
        tries++;
        if (!(rc = tsr_piece_build(&s->cfg, insns, n, a, b, fast_read_cb, s, piece, np, npro)))
            return TSR_OK;
        snprintf(s->piece_why, sizeof s->piece_why, "%s", tsr_errmsg());
    }
    return rc;
}

/* Put the piece into its instruction buffer on the rtl device and the twin. */
static int load_piece(smp_t *s, const tsr_insn_t *piece, size_t np)
{
    const uint64_t bytes = (uint64_t)np * TSR_INSN_BYTES;
    int rc = TSR_OK;
    if (s->piece_cap < bytes) {
        if (s->piece_addr) {
            s->fo->mem_free(s->t, s->piece_addr);
            s->ro->mem_free(s->r, s->piece_addr);
            s->fo->mem_free(s->f, s->piece_addr);
            s->piece_addr = s->piece_cap = 0;
        }
        uint64_t cap = 4096;
        while (cap < bytes)
            cap <<= 1;
        /* At the top of DRAM, where the program's buffers come last: taken from the allocator in the middle
         * of the run, it would move the buffers allocated after it and with them the fast model's cycles.
         * Reserved on the fast device too, so no buffer of the program can take it there. */
        if (cap > s->dram_top / 2)
            return tsr_err(TSR_ENOMEM, "sampled: a piece of %zu instructions does not fit the device DRAM", np);
        const uint64_t at = (s->dram_top - cap) & ~4095ull;
        if ((rc = s->fo->mem_alloc_at(s->f, at, cap)))
            return tsr_err_prefix(rc, "sampled: the pieces' instruction buffer at the top of DRAM: ");
        if ((rc = mirror(s, at, cap, 1)))
            return rc;
        s->piece_addr = at;
        s->piece_cap = cap;
    }
    uint8_t *buf = malloc(bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (size_t i = 0; i < np && !rc; i++) {
        tsr_insn_bits_t b;
        if (!(rc = tsr_insn_encode(&s->cfg, &piece[i], &b)))
            tsr_insn_bits_store(&b, buf + i * TSR_INSN_BYTES);
    }
    if (!rc && !(rc = s->ro->mem_write(s->r, s->piece_addr, buf, bytes)))
        rc = s->fo->mem_write(s->t, s->piece_addr, buf, bytes);
    free(buf);
    return rc;
}

/* Start the piece of submission sub on the rtl device and the twin. */
static int start_piece(smp_t *s, uint64_t sub, const tsr_insn_t *piece, size_t np)
{
    int rc = handoff(s, T_RTL);
    if (!rc)
        rc = handoff(s, T_TWIN);
    if (!rc)
        rc = load_piece(s, piece, np);
    const uint64_t bound = s->ro->bound(s->r, &s->cfg, piece, np);
    s->r_c0 = cycles_of(s->ro, s->r, &rc);
    s->t_c0 = cycles_of(s->fo, s->t, &rc);
    if (!rc && (rc = s->ro->start(s->r, s->piece_addr, (uint32_t)np, bound)))
        return tsr_err_prefix(rc, "sampled: submission #%llu, its piece on the RTL: ", (unsigned long long)sub);
    if (!rc && (rc = s->fo->start(s->t, s->piece_addr, (uint32_t)np, bound))) {
        s->ro->reset(s->r);
        return tsr_err_prefix(rc, "sampled: submission #%llu, its piece on the second fast model: ",
                              (unsigned long long)sub);
    }
    return rc;
}

static int s_start(void *st, uint64_t insn_addr, uint32_t count, uint64_t bound)
{
    smp_t *s = st;
    tsr_insn_t *insns = NULL;
    if (s->running)
        return tsr_err(TSR_EINVAL, "sampled: cannot hand off to the RTL mid-run: submission #%llu has not finished",
                       (unsigned long long)(s->index - 1));
    const uint64_t sub = s->index;
    int window = choose(s, sub), piece = 0;
    int rc = decode(s, insn_addr, count, &insns);
    if (rc)
        return rc;
    const double t0 = tsr_now_s();
    tsr_insn_t *pc = NULL;
    size_t np = 0, npro = 0;
    if (window && s->spec.mode == TSR_SAMPLE_PIECES) {
        window = 0; /* the whole submission is not a window; its piece may be */
        if (count >= 2 && !make_piece(s, insns, count, &pc, &np, &npro)) {
            if ((rc = start_piece(s, sub, pc, np)))
                goto out;
            piece = 1;
            s->piece_len = np;
            s->piece_pro = npro;
        } else
            s->piece_refused++;
    }
    if (window && !s->synced && !s->cycles_only) {
        /* The RTL's on-chip buffers hold what its last window left, not what
         * the fast model's hold now: refuse a stream that would read them. */
        if ((rc = tsr_carryin_check(&s->cfg, insns, count, fast_read_cb, s))) {
            char why[512];
            snprintf(why, sizeof why, "%s", tsr_errmsg());
            rc = tsr_err(rc, "sampled: submission #%llu cannot be an RTL window: %s; on-chip buffers are not handed "
                         "over, and the RTL has not run every submission before it (use --sample all)",
                         (unsigned long long)sub, why);
            goto out;
        }
    }
    if (window && (rc = handoff(s, T_RTL)))
        goto out;
    s->handoff_s += tsr_now_s() - t0;
    s->f_c0 = cycles_of(s->fo, s->f, &rc);
    if (window)
        s->r_c0 = cycles_of(s->ro, s->r, &rc);
    if (rc)
        goto out;
    if (window && (rc = s->ro->start(s->r, insn_addr, count, bound))) {
        rc = tsr_err_prefix(rc, "sampled: submission #%llu on the RTL: ", (unsigned long long)sub);
        goto out;
    }
    if ((rc = s->fo->start(s->f, insn_addr, count, bound))) {
        if (window || piece)
            s->ro->reset(s->r);
        if (piece)
            s->fo->reset(s->t);
        goto out;
    }
    tsr_sub_features(insns, count, &s->feat);
    s->feat.bound = bound;
    if (!window) {
        s->synced = 0;
        if (!s->break_stores && !s->cycles_only) /* (cycles only: the fast model stored nothing) */
            dirty_stores(s, insns, count); /* the fast device's stores, and the piece's on the other two */
        if (piece)
            dirty_stores(s, pc, (uint32_t)np);
    }
    s->index++;
    s->running = 1;
    s->window = window || piece;
    s->piece = piece;
    s->f_done = 0;
    s->r_done = !window && !piece;
    s->t_done = !piece;
out:
    free(pc);
    free(insns);
    return rc;
}

static int add_sub(smp_t *s, tsr_sampled_sub_t sub)
{
    if (s->nsubs == s->capsubs) {
        size_t cap = s->capsubs ? s->capsubs * 2 : 64;
        tsr_sampled_sub_t *p = realloc(s->subs, cap * sizeof *p);
        if (!p)
            return tsr_err(TSR_ENOMEM, "out of memory");
        s->subs = p;
        s->capsubs = cap;
    }
    s->subs[s->nsubs++] = sub;
    return TSR_OK;
}

/* TESSERA_SAMPLED_TRACE: a submission's record, one line (the header once). */
static void trace_sub(smp_t *s, uint64_t sub, const tsr_sampled_sub_t *r)
{
    static const char *const kinds[] = {"move", "alu", "gemm", "dw"};
    if (!sub)
        fprintf(s->trace, "sub kind fast rtl window piece piece_fast insns gemm_iters alu_iters loads stores bound\n");
    fprintf(s->trace, "%llu %s %llu %llu %d %d %llu %llu %llu %llu %llu %llu %llu\n", (unsigned long long)sub,
            kinds[r->feat.kind], (unsigned long long)r->fast_cycles, (unsigned long long)r->rtl_cycles, r->window,
            r->piece, (unsigned long long)r->piece_fast_cycles, (unsigned long long)r->feat.insns,
            (unsigned long long)r->feat.gemm_iters, (unsigned long long)r->feat.alu_iters,
            (unsigned long long)r->feat.loads, (unsigned long long)r->feat.stores, (unsigned long long)r->feat.bound);
    fflush(s->trace);
}

/* What is left of a wait's timeout (< 0: forever). */
static int left_ms(double deadline, int timeout_ms)
{
    if (timeout_ms < 0)
        return -1;
    double ms = (deadline - tsr_now_s()) * 1e3;
    return ms < 0 ? 0 : (int)ms;
}

static int s_wait(void *st, int timeout_ms)
{
    smp_t *s = st;
    const uint64_t sub = s->index - 1;
    const double deadline = tsr_now_s() + timeout_ms / 1e3;
    int rc = TSR_OK;
    if (!s->running)
        return tsr_err(TSR_EINVAL, "nothing started");
    if (!s->f_done) {
        const double t0 = tsr_now_s();
        rc = s->fo->wait(s->f, timeout_ms);
        s->fast_s += tsr_now_s() - t0;
        if (rc == TSR_ETIMEOUT)
            return rc;
        if (rc) {
            s->running = 0;
            return rc;
        }
        s->f_done = 1;
    }
    if (!s->t_done) {
        const double t0 = tsr_now_s();
        rc = s->fo->wait(s->t, left_ms(deadline, timeout_ms));
        s->fast_s += tsr_now_s() - t0;
        if (rc == TSR_ETIMEOUT)
            return rc;
        if (rc) {
            s->running = 0;
            return tsr_err_prefix(rc, "sampled: submission #%llu, its piece on the second fast model: ",
                                  (unsigned long long)sub);
        }
        s->t_done = 1;
    }
    if (!s->r_done) {
        const double t0 = tsr_now_s();
        rc = s->ro->wait(s->r, left_ms(deadline, timeout_ms));
        s->rtl_s += tsr_now_s() - t0;
        if (rc == TSR_ETIMEOUT)
            return rc;
        if (rc) {
            s->running = 0;
            return tsr_err_prefix(rc, "sampled: submission #%llu, its RTL window: ", (unsigned long long)sub);
        }
        s->r_done = 1;
    }
    s->running = 0;
    tsr_sampled_sub_t rec = {0, 0, s->window, s->piece, 0, 0, s->feat};
    rec.fast_cycles = cycles_of(s->fo, s->f, &rc) - s->f_c0;
    if (s->window)
        rec.rtl_cycles = cycles_of(s->ro, s->r, &rc) - s->r_c0;
    if (s->piece) {
        rec.piece_fast_cycles = cycles_of(s->fo, s->t, &rc) - s->t_c0;
        rec.piece_insns = s->piece_len;
    }
    if (!rc && s->window && !s->cycles_only) {
        const double t0 = tsr_now_s();
        rc = compare(s, sub, s->piece);
        s->handoff_s += tsr_now_s() - t0;
        if (rc) /* nothing on the RTL side can be trusted now: hand every buffer over again */
            for (size_t i = 0; i < s->nregs; i++)
                s->regs[i].dirty[T_RTL] = s->regs[i].dirty[T_TWIN] = 1;
    }
    if (!rc && s->trace)
        trace_sub(s, sub, &rec);
    return rc ? rc : add_sub(s, rec);
}

static int s_counters(void *st, tsr_counters_t *out)
{
    smp_t *s = st;
    return s->fo->counters(s->f, out);
}

static int s_reset_counters(void *st)
{
    smp_t *s = st; /* the estimate keeps covering every submission since open */
    int rc = s->fo->reset_counters(s->f);
    int rr = s->ro->reset_counters(s->r);
    return rc ? rc : rr;
}

static int s_reset(void *st)
{
    smp_t *s = st;
    s->running = 0;
    /* an abandoned run leaves either device's DRAM half written */
    for (size_t i = 0; i < s->nregs; i++)
        s->regs[i].dirty[T_RTL] = s->regs[i].dirty[T_TWIN] = 1;
    int rc = s->fo->reset(s->f);
    int rr = s->ro->reset(s->r);
    int rt = s->t ? s->fo->reset(s->t) : TSR_OK;
    return rc ? rc : rr ? rr : rt;
}

static uint64_t s_bound(void *st, const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n)
{
    smp_t *s = st;
    return s->fo->bound(s->f, cfg, insns, n);
}

const tsr_backend_ops_t tsr_backend_sampled = {
    .name = "sampled",
    .open = s_open,
    .close = s_close,
    .mem_alloc = s_mem_alloc,
    .mem_alloc_at = s_mem_alloc_at,
    .mem_free = s_mem_free,
    .mem_write = s_mem_write,
    .mem_read = s_mem_read,
    .start = s_start,
    .wait = s_wait,
    .counters = s_counters,
    .reset_counters = s_reset_counters,
    .reset = s_reset,
    .bound = s_bound,
    .budget_unit = "cycles",
};

/* ------------------------------------------------------------- estimate */

/* t(0.975, df): the 95% two-sided quantile of Student's t. */
static double t975(uint64_t df)
{
    static const double t[31] = {0,      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                 2.201,  2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080,
                                 2.074,  2.069,  2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    if (df <= 30)
        return t[df];
    const double z = 1.959964; /* Cornish-Fisher: within 0.001 of the table from df 30 on */
    return z + (z * z * z + z) / (4.0 * (double)df);
}

static smp_t *state_of(tsr_device_t *dev) { return tsr_device_backend_state(dev, &tsr_backend_sampled); }

int tsr_sampled_submissions(tsr_device_t *dev, const tsr_sampled_sub_t **subs, size_t *n)
{
    smp_t *s = state_of(dev);
    if (!s)
        return tsr_err(TSR_EINVAL, "not a sampled device");
    *subs = s->subs;
    *n = s->nsubs;
    return TSR_OK;
}

/* The jackknife variance of the ratio R = sy / sx over the n windows
 * (each left out in turn), before the finite-population correction and
 * the factor X^2: (n - 1) / n * sum (R_(j) - mean)^2. */
static double jk_ratio(const tsr_sampled_sub_t *u, double sx, double sy)
{
    const double x = (double)(u->piece ? u->piece_fast_cycles : u->fast_cycles);
    return sx - x > 0 ? (sy - (double)u->rtl_cycles) / (sx - x) : sy / sx;
}

static double jk_ratio_var(const smp_t *s, uint64_t n, double sx, double sy)
{
    double mean = 0, ss = 0;
    for (size_t i = 0; i < s->nsubs; i++)
        if (s->subs[i].window)
            mean += jk_ratio(&s->subs[i], sx, sy) / (double)n;
    for (size_t i = 0; i < s->nsubs; i++)
        if (s->subs[i].window) {
            const double d = jk_ratio(&s->subs[i], sx, sy) - mean;
            ss += d * d;
        }
    return (double)(n - 1) / (double)n * ss;
}

int tsr_sampled_estimate(tsr_device_t *dev, tsr_sampled_est_t *e)
{
    smp_t *s = state_of(dev);
    memset(e, 0, sizeof *e);
    if (!s)
        return tsr_err(TSR_EINVAL, "not a sampled device");
    double sx = 0, sy = 0, X = 0;
    e->pieces = s->spec.mode == TSR_SAMPLE_PIECES;
    e->piece_k = e->pieces ? s->spec.every : 0;
    e->piece_refused = s->piece_refused;
    for (size_t i = 0; i < s->nsubs; i++) {
        const tsr_sampled_sub_t *u = &s->subs[i];
        X += (double)u->fast_cycles;
        e->fast_cycles += u->fast_cycles;
        if (u->window) {
            e->windows++;
            e->win_fast += u->piece ? u->piece_fast_cycles : u->fast_cycles;
            e->win_rtl += u->rtl_cycles;
        }
    }
    sx = (double)e->win_fast;
    sy = (double)e->win_rtl;
    e->submissions = s->nsubs;
    e->rtl_s = s->rtl_s;
    e->fast_s = s->fast_s;
    e->handoff_s = s->handoff_s;
    e->handoff_bytes = s->handoff_bytes;
    const uint64_t n = e->windows, M = e->submissions;
    e->ratio = sx > 0 ? sy / sx : 1.0;
    e->estimate = e->ratio * X;
    e->se = e->half95 = -1;
    if (M == 0) {
        snprintf(e->why, sizeof e->why, "no submission yet");
    } else if (e->pieces && n >= 2) {
        double ss = 0;
        for (size_t i = 0; i < s->nsubs; i++)
            if (s->subs[i].window) {
                double r = (double)s->subs[i].rtl_cycles - e->ratio * (double)s->subs[i].piece_fast_cycles;
                ss += r * r;
            }
        const double xbar = sx / (double)n, f = (double)n / ((double)M * (double)e->piece_k);
        const double lin = ss / (double)(n - 1) / ((double)n * xbar * xbar), jk = jk_ratio_var(s, n, sx, sy);
        e->se = X * sqrt((f < 1 ? 1 - f : 0) * (jk > lin ? jk : lin));
        e->half95 = t975(n - 1) * e->se;
    } else if (e->pieces) {
        snprintf(e->why, sizeof e->why, "bound unknown: %s (2 needed for a variance)",
                 n ? "one piece ran on the RTL" : "no piece ran on the RTL, the estimate is the fast model's");
    } else if (n == M) {
        e->estimate = sy; /* every submission measured: the RTL's own count */
        e->se = e->half95 = 0;
        snprintf(e->why, sizeof e->why, "exact: every submission ran on the RTL");
    } else if (n == 0) {
        snprintf(e->why, sizeof e->why, "bound unknown: no submission ran on the RTL, the estimate is the fast model's");
    } else if (n == 1) {
        snprintf(e->why, sizeof e->why, "bound unknown: one window gives no variance (2 needed)");
    } else {
        double ss = 0;
        for (size_t i = 0; i < s->nsubs; i++)
            if (s->subs[i].window) {
                double r = (double)s->subs[i].rtl_cycles - e->ratio * (double)s->subs[i].fast_cycles;
                ss += r * r;
            }
        /* the larger of the linearization's and the jackknife's variance: the first alone held in 72-88%
         * of 2,000 draws per network at P 0.03-0.3, with the jackknife 79-94% (docs/results.md) */
        const double lin = (double)M * (double)M / (double)n * ss / (double)(n - 1);
        const double jk = X * X * jk_ratio_var(s, n, sx, sy);
        e->se = sqrt((1.0 - (double)n / (double)M) * (jk > lin ? jk : lin));
        e->half95 = t975(n - 1) * e->se;
    }
    return TSR_OK;
}

const char *tsr_sampled_format(const tsr_sampled_est_t *e, char *buf, size_t n)
{
    char bound[200];
    if (e->half95 > 0 || (e->half95 == 0 && (e->pieces || e->windows < e->submissions)))
        snprintf(bound, sizeof bound, "+- %.0f (95%%, %.3f%%)", e->half95,
                 e->estimate > 0 ? 100.0 * e->half95 / e->estimate : 0.0);
    else if (e->half95 == 0)
        snprintf(bound, sizeof bound, "+- 0 (%s)", e->why);
    else
        snprintf(bound, sizeof bound, "+- ? (%s)", e->why);
    char what[160];
    if (e->pieces)
        snprintf(what, sizeof what, "%llu pieces (about 1/%llu of a submission each%s) of %llu submissions",
                 (unsigned long long)e->windows, (unsigned long long)e->piece_k,
                 e->piece_refused ? "; some drawn found no cut" : "", (unsigned long long)e->submissions);
    else
        snprintf(what, sizeof what, "%llu of %llu submissions", (unsigned long long)e->windows,
                 (unsigned long long)e->submissions);
    snprintf(buf, n,
             "rtl cycles (sampled estimate): %.0f %s, %s on the RTL, fast model %llu "
             "(ratio %.5f; wall: RTL %.3f s, fast model %.3f s, hand-off %.3f s)",
             e->estimate, bound, what, (unsigned long long)e->fast_cycles, e->ratio, e->rtl_s, e->fast_s,
             e->handoff_s);
    return buf;
}

void tsr_sampled_print(tsr_device_t *dev, void *f)
{
    tsr_sampled_est_t e;
    char line[512];
    if (!dev || !state_of(dev) || tsr_sampled_estimate(dev, &e))
        return;
    fprintf((FILE *)f, "%s\n", tsr_sampled_format(&e, line, sizeof line));
}
