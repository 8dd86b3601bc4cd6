/* tsr_regs: the register-map table and the names of counters and units (see tsr_regs.h). */
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

const char *tsr_unit_name(int k)
{
    static const char *n[TSR_UNIT_COUNT] = {"fetch", "load", "compute", "store", "axi"};
    return k >= 0 && k < TSR_UNIT_COUNT ? n[k] : 0;
}

const tsr_reg_const_t *tsr_reg_consts(size_t *n)
{
    static const tsr_reg_const_t t[] = {
        {"REG_CTRL", TSR_REG_CTRL},
        {"REG_STATUS", TSR_REG_STATUS},
        {"REG_INSN_ADDR", TSR_REG_INSN_ADDR},
        {"REG_INSN_COUNT", TSR_REG_INSN_COUNT},
        {"REG_STAGE_INSNS", TSR_REG_STAGE_INSNS},
        {"REG_FETCHED", TSR_REG_FETCHED},
        {"REG_TOKENS", TSR_REG_TOKENS},
        {"REG_UNITS", TSR_REG_UNITS},
        {"REG_COUNTERS", TSR_REG_COUNTERS},
        /* bit numbers (the masks in tsr_regs.h are 1 << these) */
        {"CTRL_START_BIT", 0},
        {"CTRL_RESET_BIT", 1},
        {"STATUS_BUSY_BIT", 0},
        {"STATUS_DONE_BIT", 1},
        {"STATUS_ERR_BIT", 2},
        {"STATUS_RESETTING_BIT", 3},
        {"UNIT_FETCH", TSR_UNIT_FETCH},
        {"UNIT_LOAD", TSR_UNIT_LOAD},
        {"UNIT_COMPUTE", TSR_UNIT_COMPUTE},
        {"UNIT_STORE", TSR_UNIT_STORE},
        {"UNIT_AXI", TSR_UNIT_AXI},
        {"UNIT_COUNT", TSR_UNIT_COUNT},
    };
    _Static_assert(TSR_CTRL_START == 1u << 0 && TSR_CTRL_RESET == 1u << 1 && TSR_STATUS_BUSY == 1u << 0 &&
                       TSR_STATUS_DONE == 1u << 1 && TSR_STATUS_ERR == 1u << 2 && TSR_STATUS_RESETTING == 1u << 3,
                   "register bits and the table above must agree");
    *n = sizeof t / sizeof t[0];
    return t;
}
