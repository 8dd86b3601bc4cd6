/*
 * tsr_backend_rtl: the cycle-accurate Verilator model behind the driver's
 * backend interface. The model is one implementation of the register/DMA
 * layer (driver/tsr_regio.h): registers over its AXI4-Lite port, device
 * DRAM the same tsr_dram model the fsim uses, served to the RTL through the
 * AXI4 timing model in sim/tsr_rtl.c. The register sequence that starts,
 * waits for and resets runs is driver/tsr_regseq.c, the code the board
 * backends run. Counters: the stream's static counts (identical on every
 * backend) plus the cycle count and hardware counters read over AXI4-Lite.
 */
#include <string.h>

#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_regseq.h"
#include "tsr_rtl.h"

#define DRAM_BASE 0x1000ull
#define SLICE 4096 /* cycles between budget, watchdog and deadline checks */

static int m_read32(void *ctx, uint32_t off, uint32_t *v) { return tsr_rtl_reg_read(ctx, off, v); }
static int m_write32(void *ctx, uint32_t off, uint32_t v) { return tsr_rtl_reg_write(ctx, off, v); }
static int m_wait(void *ctx, uint64_t slice, int *fired) { return tsr_rtl_run(ctx, slice, fired); }
static int m_after_reset(void *ctx) { return tsr_rtl_bus_check(ctx); }
static void m_close(void *ctx) { tsr_rtl_destroy(ctx); }

/* The Verilated model as a register/DMA implementation (coherent: no syncs). */
static const tsr_regio_ops_t model_ops = {
    .name = "rtl",
    .read32 = m_read32,
    .write32 = m_write32,
    .wait_irq = m_wait,
    .after_reset = m_after_reset,
    .close = m_close,
};

static int r_open(const tsr_config_t *cfg, const tsr_device_opts_t *opts, void **state)
{
    tsr_regseq_t *s;
    tsr_rtl_t *rtl;
    int rc = tsr_regseq_new("rtl", cfg, opts, &s);
    if (rc)
        return rc;
    uint64_t size = opts->dram_size;
    if (size > 0xffffffffull - DRAM_BASE) /* the AXI port has 32 address bits */
        size = 0xffffffffull - DRAM_BASE;
    if ((rc = tsr_dram_create(DRAM_BASE, size, &s->io.dram)) ||
        (rc = tsr_rtl_create(cfg, s->io.dram, &opts->rtl, &rtl))) {
        tsr_regseq_close(s);
        return rc;
    }
    s->io.ops = &model_ops;
    s->io.ctx = rtl;
    s->io.slice = SLICE;
    s->io.slice_unit = "cycles";
    *state = s;
    return TSR_OK;
}

const tsr_backend_ops_t tsr_backend_rtl = {
    .name = "rtl",
    .open = r_open,
    .start = tsr_regseq_start,
    .wait = tsr_regseq_wait,
    TSR_REGSEQ_BACKEND_OPS,
};
