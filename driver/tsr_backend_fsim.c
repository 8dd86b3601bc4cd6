/*
 * tsr_backend_fsim: the functional simulator behind the driver's backend
 * interface. The run executes inside wait(), in slices, so a timeout is
 * honoured and a later wait() continues where the previous one stopped.
 */
#include <stdlib.h>
#include <time.h>

#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_fsim.h"

#define DRAM_BASE 0x1000ull /* address 0 stays unmapped so a null address faults */
#define SLICE 64            /* instructions between deadline checks */

typedef struct {
    tsr_dram_t *dram;  /* device memory */
    tsr_fsim_t *sim;   /* golden model */
    uint64_t seed;     /* stage interleaving */
    int started;       /* a run is in progress */
} fsim_state_t;

static int f_open(const tsr_config_t *cfg, const tsr_device_opts_t *opts, void **state)
{
    fsim_state_t *s = calloc(1, sizeof *s);
    int rc;
    if (!s)
        return tsr_err(TSR_ENOMEM, "out of memory");
    s->seed = opts->seed;
    if ((rc = tsr_dram_create(DRAM_BASE, opts->dram_size, &s->dram)) ||
        (rc = tsr_fsim_create(cfg, s->dram, &s->sim))) {
        tsr_dram_destroy(s->dram);
        free(s);
        return rc;
    }
    *state = s;
    return TSR_OK;
}

static void f_close(void *state)
{
    fsim_state_t *s = state;
    tsr_fsim_destroy(s->sim);
    tsr_dram_destroy(s->dram);
    free(s);
}

static int f_alloc(void *st, uint64_t size, uint64_t align, uint64_t *addr)
{
    return tsr_dram_alloc(((fsim_state_t *)st)->dram, size, align, addr);
}
static int f_alloc_at(void *st, uint64_t addr, uint64_t size)
{
    return tsr_dram_alloc_at(((fsim_state_t *)st)->dram, addr, size);
}
static int f_free(void *st, uint64_t addr) { return tsr_dram_free(((fsim_state_t *)st)->dram, addr); }
static int f_write(void *st, uint64_t addr, const void *src, uint64_t n)
{
    return tsr_dram_write(((fsim_state_t *)st)->dram, addr, src, n);
}
static int f_read(void *st, uint64_t addr, void *dst, uint64_t n)
{
    return tsr_dram_read(((fsim_state_t *)st)->dram, addr, dst, n);
}

static int f_start(void *st, uint64_t insn_addr, uint32_t count, uint64_t bound)
{
    fsim_state_t *s = st;
    (void)bound; /* exact for the functional model: it cannot run past it */
    int rc = tsr_fsim_start(s->sim, insn_addr, count, s->seed);
    s->started = rc == TSR_OK;
    return rc;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int f_wait(void *st, int timeout_ms)
{
    fsim_state_t *s = st;
    double deadline = now_ms() + timeout_ms;
    int done = 0;
    if (!s->started)
        return tsr_err(TSR_EINVAL, "nothing started");
    for (;;) {
        int rc = tsr_fsim_step(s->sim, SLICE, &done);
        if (rc) {
            s->started = 0;
            return rc;
        }
        if (done) {
            s->started = 0;
            return TSR_OK;
        }
        if (timeout_ms >= 0 && now_ms() >= deadline)
            return tsr_err(TSR_ETIMEOUT, "run still in progress after %d ms", timeout_ms);
    }
}

/* Back to idle: the run (if any) is dropped; on-chip buffers are kept, as in hardware. */
static int f_reset(void *st)
{
    fsim_state_t *s = st;
    s->started = 0;
    tsr_fsim_abort(s->sim);
    return TSR_OK;
}

static uint64_t f_bound(void *st, const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n)
{
    (void)st;
    return tsr_stream_work(cfg, insns, n);
}

static int f_counters(void *st, tsr_counters_t *out)
{
    *out = *tsr_fsim_counters(((fsim_state_t *)st)->sim);
    return TSR_OK;
}

static int f_reset_counters(void *st)
{
    tsr_fsim_reset_counters(((fsim_state_t *)st)->sim);
    return TSR_OK;
}

const tsr_backend_ops_t tsr_backend_fsim = {
    .name = "fsim",
    .open = f_open,
    .close = f_close,
    .mem_alloc = f_alloc,
    .mem_alloc_at = f_alloc_at,
    .mem_free = f_free,
    .mem_write = f_write,
    .mem_read = f_read,
    .start = f_start,
    .wait = f_wait,
    .counters = f_counters,
    .reset_counters = f_reset_counters,
    .reset = f_reset,
    .bound = f_bound,
    .budget_unit = "work units",
};
