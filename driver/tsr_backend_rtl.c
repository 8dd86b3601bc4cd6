/*
 * tsr_backend_rtl: the cycle-accurate Verilator model behind the driver's
 * backend interface. Device DRAM is the same tsr_dram model the fsim uses,
 * served to the RTL through the AXI4 timing model in sim/tsr_rtl.c.
 * Counters: the stream's static counts (identical on every backend) plus
 * the cycle count and hardware counters read over AXI4-Lite.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_rtl.h"

#define DRAM_BASE 0x1000ull
#define SLICE 4096 /* cycles between deadline checks */

typedef struct {
    tsr_config_t cfg;    /* configuration */
    tsr_dram_t *dram;    /* device memory */
    tsr_rtl_t *rtl;      /* the model */
    tsr_counters_t ctr;  /* accumulated counters */
    tsr_counters_t run;  /* static counters of the running stream */
    int started;         /* a run is in progress */
    uint64_t bound;      /* cycle bound of the running stream (its run budget) */
    tsr_rtl_opts_t ro;   /* DRAM timing the bound assumes */
} rtl_state_t;

static int r_open(const tsr_config_t *cfg, const tsr_device_opts_t *opts, void **state)
{
    rtl_state_t *s = calloc(1, sizeof *s);
    int rc;
    if (!s)
        return tsr_err(TSR_ENOMEM, "out of memory");
    s->cfg = *cfg;
    s->ro = opts->rtl;
    uint64_t size = opts->dram_size;
    if (size > 0xffffffffull - DRAM_BASE) /* the AXI port has 32 address bits */
        size = 0xffffffffull - DRAM_BASE;
    if ((rc = tsr_dram_create(DRAM_BASE, size, &s->dram)) ||
        (rc = tsr_rtl_create(cfg, s->dram, &opts->rtl, &s->rtl))) {
        tsr_dram_destroy(s->dram);
        free(s);
        return rc;
    }
    *state = s;
    return TSR_OK;
}

static void r_close(void *st)
{
    rtl_state_t *s = st;
    tsr_rtl_destroy(s->rtl);
    tsr_dram_destroy(s->dram);
    free(s);
}

static int r_alloc(void *st, uint64_t size, uint64_t align, uint64_t *addr)
{
    return tsr_dram_alloc(((rtl_state_t *)st)->dram, size, align, addr);
}
static int r_alloc_at(void *st, uint64_t addr, uint64_t size)
{
    return tsr_dram_alloc_at(((rtl_state_t *)st)->dram, addr, size);
}
static int r_free(void *st, uint64_t addr) { return tsr_dram_free(((rtl_state_t *)st)->dram, addr); }
static int r_write(void *st, uint64_t addr, const void *src, uint64_t n)
{
    return tsr_dram_write(((rtl_state_t *)st)->dram, addr, src, n);
}
static int r_read(void *st, uint64_t addr, void *dst, uint64_t n)
{
    return tsr_dram_read(((rtl_state_t *)st)->dram, addr, dst, n);
}

static int r_start(void *st, uint64_t insn_addr, uint32_t count, uint64_t bound)
{
    rtl_state_t *s = st;
    s->bound = bound;
    tsr_insn_t *insns = calloc(count ? count : 1, sizeof *insns);
    uint8_t *bytes = malloc((size_t)count * TSR_INSN_BYTES);
    int rc = TSR_OK;
    if (!insns || !bytes) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = tsr_dram_read(s->dram, insn_addr, bytes, (uint64_t)count * TSR_INSN_BYTES)))
        goto out;
    for (uint32_t i = 0; i < count; i++) {
        tsr_insn_bits_t b;
        tsr_insn_bits_load(bytes + (size_t)i * TSR_INSN_BYTES, &b);
        if ((rc = tsr_insn_decode(&s->cfg, &b, &insns[i])))
            goto out;
    }
    memset(&s->run, 0, sizeof s->run);
    tsr_counters_static(&s->cfg, insns, count, &s->run);
    if ((rc = tsr_rtl_start(s->rtl, insn_addr, count)))
        goto out;
    s->started = 1;
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

static int r_wait(void *st, int timeout_ms)
{
    rtl_state_t *s = st;
    double deadline = now_ms() + timeout_ms;
    int done = 0;
    if (!s->started)
        return tsr_err(TSR_EINVAL, "nothing started");
    for (;;) {
        int rc = tsr_rtl_step(s->rtl, SLICE, &done);
        if (rc) {
            s->started = 0;
            return rc;
        }
        if (!done && tsr_rtl_run_cycles(s->rtl) > s->bound) {
            s->started = 0;
            return tsr_err(TSR_EBACKEND,
                           "rtl: run budget exceeded: no FINISH after %llu cycles, the bound derived from the "
                           "stream (its loop extents, transfers and the DRAM timing); raise it with "
                           "tsr_device_opts_t.run_budget (tessera: --run-budget N) only if the stream is "
                           "known to be slower",
                           (unsigned long long)tsr_rtl_run_cycles(s->rtl));
        }
        if (done) {
            s->started = 0;
            tsr_counters_t c = s->run;
            if ((rc = tsr_rtl_read_counters(s->rtl, c.hw)))
                return rc;
            c.has_hw = 1;
            c.cycles = c.hw[TSR_CNT_CYCLES];
            tsr_counters_add(&s->ctr, &c);
            return TSR_OK;
        }
        if (timeout_ms >= 0 && now_ms() >= deadline)
            return tsr_err(TSR_ETIMEOUT, "run still in progress after %d ms", timeout_ms);
    }
}

static int r_counters(void *st, tsr_counters_t *out)
{
    rtl_state_t *s = st;
    *out = s->ctr;
    if (s->started) {
        /* Mid-run (after a wait timeout): add what the hardware counted so
         * far; the per-instruction static counts exist only for whole runs. */
        tsr_counters_t live;
        memset(&live, 0, sizeof live);
        int rc = tsr_rtl_read_counters(s->rtl, live.hw);
        if (rc)
            return rc;
        live.has_hw = 1;
        live.cycles = live.hw[TSR_CNT_CYCLES];
        live.gemm_ops = live.hw[TSR_CNT_GEMM_OPS];
        live.alu_ops = live.hw[TSR_CNT_ALU_OPS];
        tsr_counters_add(out, &live);
    }
    return TSR_OK;
}

static int r_reset(void *st)
{
    rtl_state_t *s = st;
    s->started = 0;
    return tsr_rtl_reset(s->rtl);
}

/* Cycle bound of a run: every tensor op one cycle, every DRAM byte at the
 * modelled bandwidth, every transfer row and instruction a full DRAM
 * latency, times 4, plus a constant. The RTL overlaps all of these, so a
 * correct stream stays well below (resnet18 layers: under a quarter). */
uint64_t tsr_rtl_cycle_bound(const tsr_rtl_opts_t *ro, const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n)
{
    tsr_counters_t c;
    memset(&c, 0, sizeof c);
    tsr_counters_static(cfg, insns, n, &c);
    double lat = ro->dram_latency ? ro->dram_latency : 32;
    double bw = ro->dram_bytes_per_cycle > 0 ? ro->dram_bytes_per_cycle : 8;
    double bytes = (double)c.bytes_stored + (double)n * TSR_INSN_BYTES, rows = 0;
    for (int m = 0; m < TSR_MEM_COUNT; m++)
        bytes += (double)c.bytes_loaded[m];
    for (size_t i = 0; i < n; i++)
        if (insns[i].opcode == TSR_OP_LOAD || insns[i].opcode == TSR_OP_STORE)
            rows += (double)insns[i].y_size + insns[i].y_pad0 + insns[i].y_pad1;
    double ops = (double)(c.gemm_ops + c.gemm_reset_ops + c.alu_ops + c.pad_rows_loaded);
    double b = 4.0 * (ops + bytes / bw + (rows + (double)n) * (lat + 32)) + 100000;
    return b >= 1.8e19 ? UINT64_MAX : (uint64_t)b;
}

static uint64_t r_bound(void *st, const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n)
{
    return tsr_rtl_cycle_bound(&((rtl_state_t *)st)->ro, cfg, insns, n);
}

static int r_reset_counters(void *st)
{
    memset(&((rtl_state_t *)st)->ctr, 0, sizeof(tsr_counters_t));
    return TSR_OK;
}

const tsr_backend_ops_t tsr_backend_rtl = {
    .name = "rtl",
    .open = r_open,
    .close = r_close,
    .mem_alloc = r_alloc,
    .mem_alloc_at = r_alloc_at,
    .mem_free = r_free,
    .mem_write = r_write,
    .mem_read = r_read,
    .start = r_start,
    .wait = r_wait,
    .counters = r_counters,
    .reset_counters = r_reset_counters,
    .reset = r_reset,
    .bound = r_bound,
    .budget_unit = "cycles",
};
