/* tsr_regs: names of the performance counters (see tsr_regs.h). */
#include "tsr_regs.h"

const char *tsr_cnt_name(int k)
{
    static const char *n[TSR_CNT_COUNT] = {
        "cycles",           "load_busy",     "load_stall_tok", "load_stall_mem",
        "compute_busy",     "compute_stall_tok", "compute_stall_mem", "store_busy",
        "store_stall_tok",  "store_stall_mem", "fetch_stall",  "dram_rd_bytes",
        "dram_wr_bytes",    "gemm_ops",      "alu_ops",        "dual_ops"};
    return k >= 0 && k < TSR_CNT_COUNT ? n[k] : 0;
}
