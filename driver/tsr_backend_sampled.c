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
#include "tsr_sampled.h"
#include "tsr_util.h"

/* The SystemC model is an optional library (see tsr_driver.c). */
extern const tsr_backend_ops_t tsr_backend_systemc __attribute__((weak));

#define CHUNK (1u << 20) /* bytes per hand-off copy or compare step */

typedef struct {
    uint64_t addr, size;
    int dirty; /* may differ between the two devices */
} region_t;

typedef struct {
    const tsr_backend_ops_t *fo, *ro; /* fast (systemc), rtl */
    void *f, *r;                      /* their states */
    tsr_config_t cfg;
    tsr_sample_spec_t spec;
    uint64_t rng;           /* random:P state */
    region_t *regs;         /* every allocation (the driver's instruction buffer too) */
    size_t nregs, capregs;
    tsr_sampled_sub_t *subs; /* submissions since open or reset_counters */
    size_t nsubs, capsubs;
    uint64_t index;         /* submissions since open (window choice, messages) */
    int synced;             /* the RTL has run every submission since open (its on-chip state is a plain rtl device's) */
    int break_stores;       /* fault injection (TESSERA_SAMPLED_BREAK=stores): forget what the submissions that ran
                             * on the fast model alone stored, so the test can see the check catch a stale hand-off */
    int running, window;    /* a submission is running; it is a window */
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
    if (!strncmp(spec, "random:", 7)) {
        const char *s = spec + 7;
        double p = (*s >= '0' && *s <= '9') || *s == '.' ? strtod(s, &end) : -1;
        if (p <= 0 || p > 1 || *end || p != p)
            return tsr_err(TSR_EINVAL, "sample spec \"%.40s\": random:P needs a probability 0 < P <= 1", spec);
        out->mode = TSR_SAMPLE_RANDOM;
        out->p = p;
        return TSR_OK;
    }
    return tsr_err(TSR_EINVAL, "sample spec \"%.40s\": expected all, every:K, random:P or none", spec);
}

/* ------------------------------------------------------------ open/close */

static void s_close(void *st)
{
    smp_t *s = st;
    if (!s)
        return;
    if (s->r)
        s->ro->close(s->r);
    if (s->f)
        s->fo->close(s->f);
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
    if ((rc = s->ro->open(cfg, opts, &s->r))) {
        s->r = NULL;
        s_close(s);
        return tsr_err_prefix(rc, "sampled: the RTL cannot hold this device: ");
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
    s->regs[s->nregs++] = (region_t){addr, size, 0}; /* new buffers read as zeros on both */
    return TSR_OK;
}

static int s_mem_alloc(void *st, uint64_t size, uint64_t align, uint64_t *addr)
{
    smp_t *s = st;
    int rc = s->fo->mem_alloc(s->f, size, align, addr);
    if (rc)
        return rc;
    if ((rc = s->ro->mem_alloc_at(s->r, *addr, size))) {
        s->fo->mem_free(s->f, *addr);
        return tsr_err_prefix(rc, "sampled: the RTL device cannot mirror buffer 0x%llx: ", (unsigned long long)*addr);
    }
    if ((rc = add_region(s, *addr, size))) {
        s->ro->mem_free(s->r, *addr);
        s->fo->mem_free(s->f, *addr);
    }
    return rc;
}

static int s_mem_alloc_at(void *st, uint64_t addr, uint64_t size)
{
    smp_t *s = st;
    int rc = s->fo->mem_alloc_at(s->f, addr, size);
    if (rc)
        return rc;
    if ((rc = s->ro->mem_alloc_at(s->r, addr, size))) {
        s->fo->mem_free(s->f, addr);
        return tsr_err_prefix(rc, "sampled: the RTL device cannot mirror buffer 0x%llx: ", (unsigned long long)addr);
    }
    if ((rc = add_region(s, addr, size))) {
        s->ro->mem_free(s->r, addr);
        s->fo->mem_free(s->f, addr);
    }
    return rc;
}

static int s_mem_free(void *st, uint64_t addr)
{
    smp_t *s = st;
    int rc = s->fo->mem_free(s->f, addr);
    if (rc)
        return rc;
    s->ro->mem_free(s->r, addr);
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
            s->regs[i].dirty = 1;
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
 * copied from the fast device into the RTL device. */
static int handoff(smp_t *s)
{
    for (size_t i = 0; i < s->nregs; i++) {
        region_t *g = &s->regs[i];
        if (!g->dirty)
            continue;
        for (uint64_t off = 0; off < g->size; off += CHUNK) {
            uint64_t n = g->size - off < CHUNK ? g->size - off : CHUNK;
            int rc = s->fo->mem_read(s->f, g->addr + off, s->a, n);
            if (!rc)
                rc = s->ro->mem_write(s->r, g->addr + off, s->a, n);
            if (rc)
                return tsr_err_prefix(rc, "sampled: hand-off of buffer 0x%llx: ", (unsigned long long)g->addr);
            s->handoff_bytes += n;
        }
        g->dirty = 0;
    }
    return TSR_OK;
}

/* After a window: the two devices' DRAM equal in every buffer. */
static int compare(smp_t *s, uint64_t sub)
{
    for (size_t i = 0; i < s->nregs; i++) {
        const region_t *g = &s->regs[i];
        for (uint64_t off = 0; off < g->size; off += CHUNK) {
            uint64_t n = g->size - off < CHUNK ? g->size - off : CHUNK;
            int rc = s->fo->mem_read(s->f, g->addr + off, s->a, n);
            if (!rc)
                rc = s->ro->mem_read(s->r, g->addr + off, s->b, n);
            if (rc)
                return tsr_err_prefix(rc, "sampled: comparing buffer 0x%llx: ", (unsigned long long)g->addr);
            if (memcmp(s->a, s->b, n)) {
                uint64_t k = 0;
                while (s->a[k] == s->b[k])
                    k++;
                return tsr_err(TSR_EBACKEND,
                               "sampled: submission #%llu: after its RTL window the RTL's DRAM differs from the "
                               "fast model's at 0x%llx (buffer 0x%llx + %llu): rtl 0x%02x, fast model 0x%02x",
                               (unsigned long long)sub, (unsigned long long)(g->addr + off + k),
                               (unsigned long long)g->addr, (unsigned long long)(off + k), s->b[k], s->a[k]);
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

static int choose(smp_t *s, uint64_t i)
{
    switch (s->spec.mode) {
    case TSR_SAMPLE_ALL: return 1;
    case TSR_SAMPLE_EVERY: return i % s->spec.every == 0;
    case TSR_SAMPLE_RANDOM: {
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

static int s_start(void *st, uint64_t insn_addr, uint32_t count, uint64_t bound)
{
    smp_t *s = st;
    tsr_insn_t *insns = NULL;
    if (s->running)
        return tsr_err(TSR_EINVAL, "sampled: cannot hand off to the RTL mid-run: submission #%llu has not finished",
                       (unsigned long long)(s->index - 1));
    const uint64_t sub = s->index;
    int window = choose(s, sub);
    int rc = decode(s, insn_addr, count, &insns);
    if (rc)
        return rc;
    const double t0 = tsr_now_s();
    if (window && !s->synced) {
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
    if (window && (rc = handoff(s)))
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
        if (window)
            s->ro->reset(s->r);
        goto out;
    }
    if (!window) {
        s->synced = 0;
        if (!s->break_stores)
            dirty_stores(s, insns, count);
    }
    s->index++;
    s->running = 1;
    s->window = window;
    s->f_done = 0;
    s->r_done = !window;
out:
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
    if (!s->r_done) {
        int left = timeout_ms;
        if (timeout_ms >= 0) {
            double ms = (deadline - tsr_now_s()) * 1e3;
            left = ms < 0 ? 0 : (int)ms;
        }
        const double t0 = tsr_now_s();
        rc = s->ro->wait(s->r, left);
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
    tsr_sampled_sub_t rec = {0, 0, s->window};
    rec.fast_cycles = cycles_of(s->fo, s->f, &rc) - s->f_c0;
    if (s->window)
        rec.rtl_cycles = cycles_of(s->ro, s->r, &rc) - s->r_c0;
    if (!rc && s->window) {
        const double t0 = tsr_now_s();
        rc = compare(s, sub);
        s->handoff_s += tsr_now_s() - t0;
        if (rc) /* nothing on the RTL side can be trusted now: hand every buffer over again */
            for (size_t i = 0; i < s->nregs; i++)
                s->regs[i].dirty = 1;
    }
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
        s->regs[i].dirty = 1;
    int rc = s->fo->reset(s->f);
    int rr = s->ro->reset(s->r);
    return rc ? rc : rr;
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

int tsr_sampled_estimate(tsr_device_t *dev, tsr_sampled_est_t *e)
{
    smp_t *s = state_of(dev);
    memset(e, 0, sizeof *e);
    if (!s)
        return tsr_err(TSR_EINVAL, "not a sampled device");
    double sx = 0, sy = 0, X = 0;
    for (size_t i = 0; i < s->nsubs; i++) {
        X += (double)s->subs[i].fast_cycles;
        e->fast_cycles += s->subs[i].fast_cycles;
        if (s->subs[i].window) {
            e->windows++;
            e->win_fast += s->subs[i].fast_cycles;
            e->win_rtl += s->subs[i].rtl_cycles;
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
        const double var = (double)M * (double)M * (1.0 - (double)n / (double)M) / (double)n * ss / (double)(n - 1);
        e->se = sqrt(var);
        e->half95 = t975(n - 1) * e->se;
    }
    return TSR_OK;
}

const char *tsr_sampled_format(const tsr_sampled_est_t *e, char *buf, size_t n)
{
    char bound[200];
    if (e->half95 > 0 || (e->half95 == 0 && e->windows < e->submissions))
        snprintf(bound, sizeof bound, "+- %.0f (95%%, %.3f%%)", e->half95,
                 e->estimate > 0 ? 100.0 * e->half95 / e->estimate : 0.0);
    else if (e->half95 == 0)
        snprintf(bound, sizeof bound, "+- 0 (%s)", e->why);
    else
        snprintf(bound, sizeof bound, "+- ? (%s)", e->why);
    snprintf(buf, n,
             "rtl cycles (sampled estimate): %.0f %s, %llu of %llu submissions on the RTL, fast model %llu "
             "(ratio %.5f; wall: RTL %.3f s, fast model %.3f s, hand-off %.3f s)",
             e->estimate, bound, (unsigned long long)e->windows, (unsigned long long)e->submissions,
             (unsigned long long)e->fast_cycles, e->ratio, e->rtl_s, e->fast_s, e->handoff_s);
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
