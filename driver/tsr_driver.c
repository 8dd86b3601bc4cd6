/*
 * tsr_driver: device handle, buffer bookkeeping and stream submission on
 * top of a backend ops struct (see tsr_driver.h). The driver keeps its own
 * list of the buffers the user allocated: that list is what "the program's
 * declared buffers" means to the verifier, so a stream can never read or
 * write the instruction buffer or memory it was not given.
 */
#include "tsr_driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_pipe.h"
#include "tsr_verify.h"
#include "tsr_util.h"

#define TSR_BUF_ALIGN 4096ull

typedef struct {
    uint64_t addr;  /* device address */
    uint64_t size;  /* bytes */
} dbuf_t;

struct tsr_device {
    const tsr_backend_ops_t *ops; /* backend */
    void *state;                  /* backend state */
    tsr_config_t cfg;             /* configuration */
    tsr_device_opts_t opts;       /* options given at open */
    dbuf_t *bufs;                 /* user buffers */
    size_t nbufs;                 /* entries in bufs */
    size_t capbufs;               /* capacity of bufs */
    uint64_t insn_addr;           /* instruction buffer (0 = none) */
    uint64_t insn_cap;            /* its size in bytes */
    int running;                  /* a submitted stream has not finished */
    int struct_rc;                /* skip_verify: the stream's structural verdict (tsr_pipe dry run) */
    char struct_msg[512];         /* its message */
    void *ext;                    /* host-side extension object (the JIT kernel cache), or NULL */
    void (*ext_dtor)(tsr_device_t *, void *); /* destroys ext at close, or NULL */
    uint64_t mem_in_use;          /* bytes of the user buffers and the instruction buffer now */
    uint64_t mem_peak;            /* their most since open or tsr_mem_reset_peak */
    int no_data;                  /* timing-only and a stream was submitted: DRAM holds no computed data */
    int no_data_warned;           /* the one warning about it was printed */
    struct vmemo *memo;           /* streams verified before (see vmemo_find) */
    size_t nmemo, memo_next;      /* entries used; the one replaced next */
    uint64_t memo_bytes;          /* heap the entries hold */
};

/* A stream verified before, with everything its verdict depended on: the
 * instructions, the buffer table, and the bytes the verifier read from
 * device DRAM (the uops); its encoding and run bound with them. The graph
 * runtime submits the same planned streams on every execution, and the
 * verifier (the race pass above all) was 40% of a timing-only ResNet-18
 * run: a stream equal in all of these gets the same verdict, so it is not
 * verified again. Exact: every input is compared in full (no hash decides). */
typedef struct {
    uint64_t addr, n, off; /* a read of n bytes at addr; its bytes at off in vmemo.rd */
    int failed;            /* the read failed (no bytes): it must fail again */
} vmemo_read_t;

struct vmemo {
    uint64_t key;               /* a hash of the instructions (finds the candidate) */
    tsr_insn_t *insns;          /* n instructions */
    size_t n;
    tsr_region_t *regs;         /* the buffer table it was verified against */
    size_t nregs;
    vmemo_read_t *reads;        /* the verifier's DRAM reads, in order */
    size_t nreads;
    uint8_t *rd;                /* their bytes */
    uint64_t rd_bytes;
    uint8_t *bytes;             /* the encoded stream (n * TSR_INSN_BYTES) */
    uint64_t bound;             /* d->ops->bound of the stream */
};

#define VMEMO_SLOTS 256                 /* streams remembered per device (a network's layers) */
#define VMEMO_MAX_INSNS (1u << 20)      /* longer streams are not remembered */
#define VMEMO_MAX_READ (1u << 20)       /* nor those whose verifier read more DRAM than this */
#define VMEMO_MAX_BYTES (256ull << 20)  /* heap of all entries of a device */

static uint64_t vmemo_size(const struct vmemo *m)
{
    return m->n * (sizeof *m->insns + TSR_INSN_BYTES) + m->nregs * sizeof *m->regs + m->nreads * sizeof *m->reads +
           m->rd_bytes;
}

static void vmemo_clear(struct vmemo *m)
{
    free(m->insns);
    free(m->regs);
    free(m->reads);
    free(m->rd);
    free(m->bytes);
    memset(m, 0, sizeof *m);
}

static uint64_t vmemo_key(const tsr_insn_t *insns, size_t n) { return tsr_hash64(insns, n * sizeof *insns); }

/* Simulators first; the board backends (zynq; xrt when built with libxrt)
 * fail at open without their device. The systemc backend lives in its own
 * optional library (tsr_systemc: C++, libsystemc, Boost.Context): the
 * reference is weak, so a program that does not link that library (the
 * fuzzers, a bare-metal build) neither needs SystemC nor offers the
 * backend, and one that links it gets it without registering anything. */
extern const tsr_backend_ops_t tsr_backend_systemc __attribute__((weak));

static const tsr_backend_ops_t *const backends[] = {&tsr_backend_fsim, &tsr_backend_rtl, &tsr_backend_systemc,
                                                    &tsr_backend_sampled, &tsr_backend_rtlproc, &tsr_backend_zynq,
#ifdef TSR_HAVE_XRT
                                                    &tsr_backend_xrt,
#endif
};
#define N_BACKENDS (sizeof backends / sizeof backends[0])

const char *const *tsr_backend_names(void)
{
    static const char *names[N_BACKENDS + 1];
    size_t k = 0;
    for (size_t i = 0; i < N_BACKENDS; i++)
        if (backends[i])
            names[k++] = backends[i]->name;
    names[k] = NULL;
    return names;
}

/* "fsim, rtl, systemc, zynq" of this build. */
static const char *backend_list(char *buf, size_t n)
{
    const char *const *names = tsr_backend_names();
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; names[i] && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "", names[i]);
    return buf;
}

int tsr_device_open(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *opts,
                    tsr_device_t **out)
{
    const tsr_backend_ops_t *ops = NULL;
    *out = NULL;
    for (size_t i = 0; i < N_BACKENDS; i++)
        if (backend && backends[i] && !strcmp(backends[i]->name, backend))
            ops = backends[i];
    if (!ops) {
        char list[128];
        return tsr_err(TSR_EBACKEND, "unknown backend \"%s\" (available: %s%s%s)", backend ? backend : "",
                       backend_list(list, sizeof list),
#ifdef TSR_HAVE_XRT
                       "",
#else
                       "; xrt: not built, libxrt-dev was not found",
#endif
                       &tsr_backend_systemc ? "" : "; systemc: not built (tsr_systemc not linked)");
    }
    /* timing only skips the data path, so every check a data run makes must
     * have been made before: the verifier's (it is also the model's option) */
    if (opts && opts->rtl.timing_only && strcmp(ops->name, "systemc") && strcmp(ops->name, "sampled"))
        return tsr_err(TSR_EINVAL, "timing-only is an option of the systemc backend (and of sampled: "
                       "cycles only), not of %s", ops->name);
    if (opts && opts->rtl.timing_only && opts->skip_verify)
        return tsr_err(TSR_EINVAL, "timing-only needs verified streams (skip_verify is set)");
    tsr_device_t *d = calloc(1, sizeof *d);
    if (!d)
        return tsr_err(TSR_ENOMEM, "out of memory");
    d->ops = ops;
    d->cfg = *cfg;
    if (opts)
        d->opts = *opts;
    if (!d->opts.dram_size)
        d->opts.dram_size = 1ull << 30;
    int rc = ops->open(&d->cfg, &d->opts, &d->state);
    if (rc) {
        free(d);
        return rc;
    }
    *out = d;
    return TSR_OK;
}

void tsr_device_close(tsr_device_t *d)
{
    if (!d)
        return;
    if (d->ext && d->ext_dtor) {
        void *ext = d->ext;
        d->ext = NULL; /* the dtor may call tsr_device_set_ext */
        d->ext_dtor(d, ext);
    }
    d->ops->close(d->state);
    for (size_t k = 0; k < d->nmemo; k++)
        vmemo_clear(&d->memo[k]);
    free(d->memo);
    free(d->bufs);
    free(d);
}

const tsr_config_t *tsr_device_config(const tsr_device_t *d) { return &d->cfg; }

void tsr_device_set_ext(tsr_device_t *d, void *ext, void (*dtor)(tsr_device_t *dev, void *ext))
{
    d->ext = ext;
    d->ext_dtor = dtor;
}

void *tsr_device_ext(const tsr_device_t *d) { return d->ext; }

void *tsr_device_backend_state(const tsr_device_t *d, const tsr_backend_ops_t *ops)
{
    return d && d->ops == ops ? d->state : NULL;
}

/* The high-water mark of the device's DRAM (tsr_mem_usage). */
static void mem_add(tsr_device_t *d, uint64_t size)
{
    d->mem_in_use += size;
    if (d->mem_in_use > d->mem_peak)
        d->mem_peak = d->mem_in_use;
}

int tsr_mem_usage(const tsr_device_t *d, tsr_mem_usage_t *out)
{
    out->in_use = d->mem_in_use;
    out->peak = d->mem_peak;
    out->buffers = d->nbufs;
    return TSR_OK;
}

void tsr_mem_reset_peak(tsr_device_t *d) { d->mem_peak = d->mem_in_use; }

static int track(tsr_device_t *d, uint64_t addr, uint64_t size)
{
    if (d->nbufs == d->capbufs) {
        size_t cap = d->capbufs ? d->capbufs * 2 : 16;
        dbuf_t *b = realloc(d->bufs, cap * sizeof *b);
        if (!b)
            return tsr_err(TSR_ENOMEM, "out of memory");
        d->bufs = b;
        d->capbufs = cap;
    }
    d->bufs[d->nbufs++] = (dbuf_t){addr, size};
    mem_add(d, size);
    return TSR_OK;
}

int tsr_mem_alloc(tsr_device_t *d, uint64_t size, uint64_t *addr)
{
    /* Align to at least one element of every memory type, so any buffer can
     * be addressed in element units. */
    uint64_t align = TSR_BUF_ALIGN;
    while (align < d->cfg.wgt_bytes)
        align <<= 1;
    int rc = d->ops->mem_alloc(d->state, size, align, addr);
    if (!rc && (rc = track(d, *addr, size)))
        d->ops->mem_free(d->state, *addr);
    return rc;
}

int tsr_mem_alloc_at(tsr_device_t *d, uint64_t addr, uint64_t size)
{
    int rc = d->ops->mem_alloc_at(d->state, addr, size);
    if (!rc && (rc = track(d, addr, size)))
        d->ops->mem_free(d->state, addr);
    return rc;
}

static dbuf_t *find(tsr_device_t *d, uint64_t addr, uint64_t n)
{
    for (size_t i = 0; i < d->nbufs; i++)
        if (addr >= d->bufs[i].addr && addr - d->bufs[i].addr <= d->bufs[i].size &&
            n <= d->bufs[i].size - (addr - d->bufs[i].addr))
            return &d->bufs[i];
    return NULL;
}

int tsr_mem_free(tsr_device_t *d, uint64_t addr)
{
    for (size_t i = 0; i < d->nbufs; i++)
        if (d->bufs[i].addr == addr) {
            if (d->running)
                return tsr_err(TSR_EINVAL, "cannot free buffer 0x%llx while a stream is running",
                               (unsigned long long)addr);
            int rc = d->ops->mem_free(d->state, addr);
            if (!rc) {
                d->mem_in_use -= d->bufs[i].size;
                d->bufs[i] = d->bufs[--d->nbufs];
            }
            return rc;
        }
    return tsr_err(TSR_EINVAL, "0x%llx is not the start of a buffer allocated on this device",
                   (unsigned long long)addr);
}

int tsr_mem_write(tsr_device_t *d, uint64_t addr, const void *src, uint64_t n)
{
    if (!find(d, addr, n))
        return tsr_err(TSR_EFAULT, "write of %llu bytes at 0x%llx is outside every allocated buffer",
                       (unsigned long long)n, (unsigned long long)addr);
    return d->ops->mem_write(d->state, addr, src, n);
}

int tsr_mem_read(tsr_device_t *d, uint64_t addr, void *dst, uint64_t n)
{
    if (!find(d, addr, n))
        return tsr_err(TSR_EFAULT, "read of %llu bytes at 0x%llx is outside every allocated buffer",
                       (unsigned long long)n, (unsigned long long)addr);
    /* A timing-only device never computed what its streams wrote: the bytes
     * there are stale (inputs, earlier runs) and could pass for a result.
     * Zeros instead, with one warning per device, so a host op between
     * device segments (an ONNX model's) still runs for the cycles while no
     * caller mistakes the read for data; tsr_device_data_valid says so. */
    if (d->no_data) {
        if (!d->no_data_warned) {
            d->no_data_warned = 1;
            fprintf(stderr, "warning: timing-only device: DRAM reads after a run return zeros (the data is not "
                            "computed, only the cycles)\n");
        }
        memset(dst, 0, (size_t)n);
        return TSR_OK;
    }
    return d->ops->mem_read(d->state, addr, dst, n);
}

int tsr_device_data_valid(const tsr_device_t *d) { return !d->no_data; }
int tsr_device_timing_only(const tsr_device_t *d) { return d->opts.rtl.timing_only != 0; }

/* The verifier's reads, recorded for the memo (ok 0: too many, or out of memory). */
typedef struct {
    tsr_device_t *d;
    vmemo_read_t *reads;
    size_t nreads, cap;
    uint8_t *rd;
    uint64_t rd_bytes, rd_cap;
    int ok;
} vrec_t;

static int rec_read_cb(void *ctx, uint64_t addr, void *dst, size_t n)
{
    vrec_t *r = ctx;
    int rc = r->d->ops->mem_read(r->d->state, addr, dst, n);
    if (!r->ok)
        return rc;
    if (r->rd_bytes + n > VMEMO_MAX_READ) { /* (a failed read too: its size is read again) */
        r->ok = 0;
        return rc;
    }
    if (r->nreads == r->cap) {
        size_t c = r->cap ? 2 * r->cap : 16;
        vmemo_read_t *t = realloc(r->reads, c * sizeof *t);
        if (!t) {
            r->ok = 0;
            return rc;
        }
        r->reads = t;
        r->cap = c;
    }
    if (rc) { /* (what the verifier concluded from a failed read holds while it fails) */
        r->reads[r->nreads++] = (vmemo_read_t){addr, n, 0, 1};
        return rc;
    }
    if (r->rd_bytes + n > r->rd_cap) {
        uint64_t c = r->rd_cap ? r->rd_cap : 256;
        while (c < r->rd_bytes + n)
            c *= 2;
        uint8_t *t = realloc(r->rd, (size_t)c);
        if (!t) {
            r->ok = 0;
            return rc;
        }
        r->rd = t;
        r->rd_cap = c;
    }
    r->reads[r->nreads++] = (vmemo_read_t){addr, n, r->rd_bytes, 0};
    memcpy(r->rd + r->rd_bytes, dst, n);
    r->rd_bytes += n;
    return rc;
}

/* The memo entry of a stream equal to insns[0..n) in everything its
 * verdict depends on, or NULL. */
static struct vmemo *vmemo_find(tsr_device_t *d, const tsr_insn_t *insns, size_t n, const tsr_region_t *regs,
                                uint64_t key)
{
    uint8_t *tmp = NULL;
    uint64_t tcap = 0;
    struct vmemo *hit = NULL;
    for (size_t k = 0; k < d->nmemo && !hit; k++) {
        struct vmemo *m = &d->memo[k];
        if (m->key != key || m->n != n || m->nregs != d->nbufs || memcmp(m->insns, insns, n * sizeof *insns) ||
            (d->nbufs && memcmp(m->regs, regs, d->nbufs * sizeof *regs)))
            continue;
        int same = 1;
        for (size_t i = 0; i < m->nreads && same; i++) {
            const vmemo_read_t *r = &m->reads[i];
            if (r->n > tcap) {
                uint8_t *t = realloc(tmp, (size_t)r->n);
                if (!t) {
                    same = 0;
                    break;
                }
                tmp = t;
                tcap = r->n;
            }
            const int rc = d->ops->mem_read(d->state, r->addr, tmp, (size_t)r->n);
            /* a failed read must fail again; a good one give the same bytes */
            same = r->failed ? rc != TSR_OK : rc == TSR_OK && !memcmp(tmp, m->rd + r->off, (size_t)r->n);
        }
        if (same)
            hit = m;
    }
    free(tmp);
    return hit;
}

/* Remember a verified stream (nothing when memory is short: the memo is an optimisation). */
static void vmemo_add(tsr_device_t *d, const tsr_insn_t *insns, size_t n, const tsr_region_t *regs, uint64_t key,
                      vrec_t *rec, const uint8_t *bytes, uint64_t bound)
{
    if (!rec->ok || n > VMEMO_MAX_INSNS)
        return;
    if (!d->memo && !(d->memo = calloc(VMEMO_SLOTS, sizeof *d->memo)))
        return;
    struct vmemo *m = &d->memo[d->memo_next];
    d->memo_bytes -= vmemo_size(m);
    vmemo_clear(m);
    const uint64_t need = n * (sizeof *insns + TSR_INSN_BYTES) + d->nbufs * sizeof *regs +
                          rec->nreads * sizeof *rec->reads + rec->rd_bytes;
    if (d->memo_bytes + need > VMEMO_MAX_BYTES)
        return;
    m->insns = malloc(n * sizeof *insns);
    m->regs = malloc((d->nbufs ? d->nbufs : 1) * sizeof *regs);
    m->bytes = malloc(n * TSR_INSN_BYTES);
    if (!m->insns || !m->regs || !m->bytes) {
        vmemo_clear(m);
        return;
    }
    memcpy(m->insns, insns, n * sizeof *insns);
    if (d->nbufs)
        memcpy(m->regs, regs, d->nbufs * sizeof *regs);
    memcpy(m->bytes, bytes, n * TSR_INSN_BYTES);
    m->key = key;
    m->n = n;
    m->nregs = d->nbufs;
    m->reads = rec->reads; /* (the record's arrays move into the entry) */
    m->nreads = rec->nreads;
    m->rd = rec->rd;
    m->rd_bytes = rec->rd_bytes;
    rec->reads = NULL;
    rec->rd = NULL;
    m->bound = bound;
    d->memo_bytes += vmemo_size(m);
    d->memo_next = (d->memo_next + 1) % VMEMO_SLOTS;
    if (d->nmemo < VMEMO_SLOTS)
        d->nmemo++;
}

/* With verification skipped the backends still get one verdict on the
 * stream's structure, which depends on no data: the pipe model
 * (isa/tsr_pipe.h) without execution. A malformed stream (bad opcode or
 * flag, FINISH missing or not last) is refused here; deadlock, tokens left
 * at FINISH and work not ordered before FINISH are kept as the run's
 * verdict: the stream still runs (the backends' own checks, watchdog and
 * reset are exercised) and tsr_wait reports the error if the backend did
 * not fail first. The RTL cannot see every ordering defect (unordered work
 * may finish before FINISH by chance of timing); this makes fsim and RTL
 * agree by design. */
static int structure(tsr_device_t *d, const tsr_insn_t *insns, size_t n)
{
    tsr_pipe_t *p = NULL;
    int done = 0, rc = tsr_pipe_create(&d->cfg, insns, n, NULL, NULL, 0, &p);
    if (rc)
        return tsr_err_prefix(rc, "submit rejected: ");
    rc = tsr_pipe_run(p, 0, &done);
    tsr_pipe_destroy(p);
    if (rc) {
        d->struct_rc = rc;
        snprintf(d->struct_msg, sizeof d->struct_msg, "%s", tsr_errmsg());
    }
    return TSR_OK;
}

int tsr_submit(tsr_device_t *d, const tsr_insn_t *insns, size_t n)
{
    int rc = TSR_OK;
    uint8_t *bytes = NULL;
    tsr_region_t *regs = NULL;
    if (d->running)
        return tsr_err(TSR_EINVAL, "a stream is already running: call tsr_wait first");
    if (!n || n > UINT32_MAX)
        return tsr_err(TSR_EINVAL, "cannot submit %zu instructions", n);
    if (d->opts.rtl.timing_only) /* from now on DRAM is not what the stream computes */
        d->no_data = 1;
    vrec_t rec = {d, NULL, 0, 0, NULL, 0, 0, 1};
    struct vmemo *hit = NULL;
    uint64_t key = 0;
    if (!d->opts.skip_verify) {
        regs = malloc((d->nbufs ? d->nbufs : 1) * sizeof *regs);
        if (!regs)
            return tsr_err(TSR_ENOMEM, "out of memory");
        for (size_t i = 0; i < d->nbufs; i++)
            regs[i] = (tsr_region_t){d->bufs[i].addr, d->bufs[i].size, NULL};
        key = vmemo_key(insns, n);
        hit = vmemo_find(d, insns, n, regs, key);
        tsr_verify_opts_t vo = {regs, d->nbufs, 1, rec_read_cb, &rec};
        if (!hit && (rc = tsr_verify(&d->cfg, insns, n, &vo))) {
            tsr_err_prefix(rc, "submit rejected: ");
            goto out;
        }
    }
    d->struct_rc = TSR_OK;
    if (d->opts.skip_verify && (rc = structure(d, insns, n)))
        goto out;
    bytes = malloc(n * TSR_INSN_BYTES);
    if (!bytes) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    if (hit)
        memcpy(bytes, hit->bytes, n * TSR_INSN_BYTES);
    for (size_t i = 0; i < n && !hit; i++) {
        tsr_insn_bits_t b;
        if ((rc = tsr_insn_encode(&d->cfg, &insns[i], &b))) {
            tsr_err_prefix(rc, "submit rejected: insn #%zu: ", i);
            goto out;
        }
        tsr_insn_bits_store(&b, bytes + i * TSR_INSN_BYTES);
    }
    /* The instruction buffer is the driver's, not in the user's list. */
    if (d->insn_cap < n * TSR_INSN_BYTES) {
        if (d->insn_addr) {
            d->ops->mem_free(d->state, d->insn_addr);
            d->mem_in_use -= d->insn_cap;
        }
        d->insn_addr = 0;
        d->insn_cap = 0;
        uint64_t cap = 4096;
        while (cap < n * TSR_INSN_BYTES)
            cap <<= 1;
        if ((rc = d->ops->mem_alloc(d->state, cap, 4096, &d->insn_addr)))
            goto out;
        d->insn_cap = cap;
        mem_add(d, cap);
    }
    if ((rc = d->ops->mem_write(d->state, d->insn_addr, bytes, n * TSR_INSN_BYTES)))
        goto out;
    /* Bounded work: a stream that could run for days is refused up front. */
    uint64_t cap = d->opts.run_budget ? d->opts.run_budget : TSR_RUN_BUDGET_DEFAULT;
    uint64_t bound = hit ? hit->bound : d->ops->bound(d->state, &d->cfg, insns, n);
    if (!hit && !d->opts.skip_verify)
        vmemo_add(d, insns, n, regs, key, &rec, bytes, bound);
    if (bound > cap) {
        rc = tsr_err(TSR_EBOUNDS,
                     "submit rejected: run budget: this stream may take up to %llu %s (a bound derived from "
                     "its loop extents and transfers), over the budget of %llu; raise it with "
                     "tsr_device_opts_t.run_budget (tessera: --run-budget N)",
                     (unsigned long long)bound, d->ops->budget_unit, (unsigned long long)cap);
        goto out;
    }
    if ((rc = d->ops->start(d->state, d->insn_addr, (uint32_t)n, bound)))
        goto out;
    d->running = 1;
out:
    free(rec.reads);
    free(rec.rd);
    free(regs);
    free(bytes);
    return rc;
}

int tsr_wait(tsr_device_t *d, int timeout_ms)
{
    if (!d->running)
        return tsr_err(TSR_EINVAL, "nothing submitted");
    int rc = d->ops->wait(d->state, timeout_ms);
    if (rc == TSR_ETIMEOUT)
        return rc;
    d->running = 0;
    if (!rc && d->struct_rc) /* the backend completed a stream that is malformed */
        rc = tsr_err(d->struct_rc, "%s", d->struct_msg);
    if (rc) {
        /* A failed run leaves the device clean for the next stream; the
         * run's own error is the one reported. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tsr_errmsg());
        int rr = d->ops->reset(d->state);
        if (rr) { /* copied first: tsr_err must not format from the buffer it writes */
            char why[512];
            snprintf(why, sizeof why, "%s", tsr_errmsg());
            return tsr_err(rc, "%s; then the reset failed: %s", msg, why);
        }
        tsr_err(rc, "%s", msg);
    }
    return rc;
}

int tsr_device_reset(tsr_device_t *d)
{
    d->running = 0;
    return d->ops->reset(d->state);
}

int tsr_read_counters(tsr_device_t *d, tsr_counters_t *out) { return d->ops->counters(d->state, out); }
int tsr_reset_counters(tsr_device_t *d) { return d->ops->reset_counters(d->state); }
