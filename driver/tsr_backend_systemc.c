/*
 * tsr_backend_systemc: the SystemC/TLM-2.0 timed model (sim/tsr_sc.h)
 * behind the driver's backend interface, shaped like the rtl backend:
 * device DRAM is a tsr_dram model (32-bit AXI address space), the stream
 * is started and observed through the register map, counters are the
 * stream's static counts plus the model's hardware counters (cycles,
 * per-stage busy/stalls, DRAM bytes, GEMM/ALU ops) read like the RTL's.
 * Run budget: the rtl backend's cycle bound (the model's cycles track the
 * RTL's), checked against the model's cycles.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_regio.h"
#include "tsr_sc.h"

#define DRAM_BASE 0x1000ull
#define SLICE (1u << 20) /* most cycles between deadline checks (the first slices are shorter) */

typedef struct {
    tsr_regio_t io;      /* first: device memory (io.dram) for the tsr_regio_mem_* entry points; no registers */
    tsr_sc_t *sc;        /* the model (a slot of the process's kernel) */
    tsr_counters_t ctr;  /* accumulated counters */
    tsr_counters_t run;  /* static counters of the running stream */
    int started;         /* a run is in progress */
    uint64_t bound;      /* cycle bound of the running stream */
    tsr_rtl_opts_t ro;   /* DRAM timing */
    tsr_config_t cfg;    /* configuration */
} sc_state_t;

static int s_open(const tsr_config_t *cfg, const tsr_device_opts_t *opts, void **state)
{
    /* The model times tsr_top's pipelined stages; the serial core takes
     * 13-16x its cycles, so its figures would mislead rather than inform. */
    if (cfg->serial_core)
        return tsr_err(TSR_EINVAL,
                       "systemc: the model times the pipelined core; this config sets SERIAL_CORE = 1 (the "
                       "serial core): use the rtl backend for its cycles or fsim for its results");
    sc_state_t *s = calloc(1, sizeof *s);
    int rc;
    if (!s)
        return tsr_err(TSR_ENOMEM, "out of memory");
    s->cfg = *cfg;
    s->ro = opts->rtl;
    uint64_t size = opts->dram_size;
    if (size > 0xffffffffull - DRAM_BASE) /* the AXI port has 32 address bits, as on the RTL */
        size = 0xffffffffull - DRAM_BASE;
    if ((rc = tsr_dram_create(DRAM_BASE, size, &s->io.dram)) || (rc = tsr_sc_create(cfg, s->io.dram, &opts->rtl, &s->sc))) {
        tsr_dram_destroy(s->io.dram);
        free(s);
        return rc;
    }
    *state = s;
    return TSR_OK;
}

static void s_close(void *st)
{
    sc_state_t *s = st;
    tsr_sc_destroy(s->sc);
    tsr_dram_destroy(s->io.dram);
    free(s);
}

static int s_start(void *st, uint64_t insn_addr, uint32_t count, uint64_t bound)
{
    sc_state_t *s = st;
    s->bound = bound;
    memset(&s->run, 0, sizeof s->run);
    /* The static counters from the model's own decode of the stream (it
     * decodes at START, from a cache when the stream was seen before: a
     * second decode here was 4% of a timing-only ResNet-18). If the model
     * could not decode it (a run error now), the stream is decoded here for
     * the error's message, as before. */
    int rc = tsr_sc_start(s->sc, insn_addr, count);
    if (rc)
        return rc;
    const tsr_insn_t *di = tsr_sc_decoded(s->sc, count);
    if (di) {
        tsr_counters_static(&s->cfg, di, count, &s->run);
        s->started = 1;
        return TSR_OK;
    }
    tsr_insn_t *insns = calloc(count ? count : 1, sizeof *insns);
    uint8_t *bytes = malloc((size_t)count * TSR_INSN_BYTES + 1);
    if (!insns || !bytes) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = tsr_dram_read(s->io.dram, insn_addr, bytes, (uint64_t)count * TSR_INSN_BYTES)))
        goto out;
    for (uint32_t i = 0; i < count; i++) {
        tsr_insn_bits_t b;
        tsr_insn_bits_load(bytes + (size_t)i * TSR_INSN_BYTES, &b);
        if ((rc = tsr_insn_decode(&s->cfg, &b, &insns[i])))
            goto out;
    }
    rc = tsr_err(TSR_EBACKEND, "systemc: the model did not decode the stream it was started with");
out:
    free(insns);
    free(bytes);
    return rc;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int s_wait(void *st, int timeout_ms)
{
    sc_state_t *s = st;
    double deadline = now_ms() + timeout_ms;
    int done = 0;
    uint64_t slice = 4096; /* grows to SLICE: a short timeout returns after a short slice */
    if (!s->started)
        return tsr_err(TSR_EINVAL, "nothing started");
    for (;;) {
        int rc = tsr_sc_step(s->sc, slice, &done);
        slice = slice < SLICE ? slice * 2 : SLICE;
        if (rc) {
            s->started = 0;
            return rc;
        }
        if (!done && tsr_sc_run_cycles(s->sc) > s->bound) {
            s->started = 0;
            return tsr_err(TSR_EBACKEND,
                           "systemc: run budget exceeded: no FINISH after %llu cycles, the bound derived from "
                           "the stream; raise it with tsr_device_opts_t.run_budget (tessera: --run-budget N) "
                           "only if the stream is known to be slower",
                           (unsigned long long)tsr_sc_run_cycles(s->sc));
        }
        if (done) {
            s->started = 0;
            tsr_counters_t c = s->run;
            if ((rc = tsr_sc_read_counters(s->sc, c.hw)))
                return rc;
            tsr_counters_from_hw(&c, 0);
            tsr_counters_add(&s->ctr, &c);
            return TSR_OK;
        }
        if (timeout_ms >= 0 && now_ms() >= deadline)
            return tsr_err(TSR_ETIMEOUT, "run still in progress after %d ms", timeout_ms);
    }
}

static int s_counters(void *st, tsr_counters_t *out)
{
    sc_state_t *s = st;
    *out = s->ctr;
    if (s->started) { /* mid-run: what the model counted so far */
        tsr_counters_t live;
        memset(&live, 0, sizeof live);
        int rc = tsr_sc_read_counters(s->sc, live.hw);
        if (rc)
            return rc;
        tsr_counters_from_hw(&live, 1);
        tsr_counters_add(out, &live);
    }
    return TSR_OK;
}

static int s_reset(void *st)
{
    sc_state_t *s = st;
    s->started = 0;
    return tsr_sc_reset(s->sc);
}

static int s_reset_counters(void *st)
{
    memset(&((sc_state_t *)st)->ctr, 0, sizeof(tsr_counters_t));
    return TSR_OK;
}

/* The rtl backend's cycle bound: the model follows the RTL's cycles. */
static uint64_t s_bound(void *st, const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n)
{
    return tsr_rtl_cycle_bound(&((sc_state_t *)st)->ro, cfg, insns, n);
}

const tsr_backend_ops_t tsr_backend_systemc = {
    .name = "systemc",
    .open = s_open,
    .close = s_close,
    .mem_alloc = tsr_regio_mem_alloc,
    .mem_alloc_at = tsr_regio_mem_alloc_at,
    .mem_free = tsr_regio_mem_free,
    .mem_write = tsr_regio_mem_write,
    .mem_read = tsr_regio_mem_read,
    .start = s_start,
    .wait = s_wait,
    .counters = s_counters,
    .reset_counters = s_reset_counters,
    .reset = s_reset,
    .bound = s_bound,
    .budget_unit = "cycles",
};
