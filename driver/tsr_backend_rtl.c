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
    if (cfg->serial_core) {
        /* The serial core overlaps nothing: a byte per cycle plus an
         * element's bookkeeping, a DRAM round trip per bus word, per row and
         * per instruction header, a tensor op in a few cycles plus one per
         * ALU lane, and the span checks' shift-and-add products. */
        double bb = cfg->dram_bus_width / 8, lanes = (double)cfg->batch * cfg->block_out;
        double words = bytes / bb + rows + (double)n * (1 + TSR_INSN_BYTES / bb);
        b = 4.0 * (ops * (8 + lanes) + 3.0 * (double)c.pad_rows_loaded + 2.0 * bytes + words * (lat + 8) +
                   80.0 * (double)n) +
            100000;
    }
    return b >= 1.8e19 ? UINT64_MAX : (uint64_t)b;
}

const tsr_backend_ops_t tsr_backend_rtl = {
    .name = "rtl",
    .open = r_open,
    .start = tsr_regseq_start,
    .wait = tsr_regseq_wait,
    TSR_REGSEQ_BACKEND_OPS,
};
