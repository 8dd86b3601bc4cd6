/*
 * tsr_bound: the run budget's bounds of a stream, from the stream alone
 * (tsr_bound.h). Its own file because every backend's budget check needs
 * one of them: the fsim counts work units, the rtl backend, the register
 * sequence of the board backends (driver/tsr_regseq.c) and the systemc
 * backend count RTL cycles -- so none of them reaches into another
 * backend for it.
 */
#include "tsr_bound.h"

#include <string.h>

#include "tsr_counters.h"

uint64_t tsr_stream_work(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n)
{
    tsr_counters_t c;
    memset(&c, 0, sizeof c);
    tsr_counters_static(cfg, insns, n, &c);
    uint64_t w = c.gemm_ops + c.gemm_reset_ops + c.alu_ops + c.pad_rows_loaded + (uint64_t)n;
    for (int m = 0; m < TSR_MEM_COUNT; m++) {
        uint32_t eb = tsr_config_elem_bytes(cfg, m);
        w += eb ? c.bytes_loaded[m] / eb : 0;
    }
    return w + c.bytes_stored / (cfg->out_bytes ? cfg->out_bytes : 1);
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
