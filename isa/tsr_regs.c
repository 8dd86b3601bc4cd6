/* tsr_regs: the register-map table and the names of counters and units (see tsr_regs.h). */
#include "tsr_regs.h"

#include "tsr_error.h"

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
        {"REG_AP_CTRL", TSR_REG_AP_CTRL,
         "ap_ctrl_hs: bit 0 ap_start (W1 starts; reads 1 until done), bit 1 ap_done (clear on read), "
         "bit 2 ap_idle, bit 3 ap_ready (clear on read), bit 7 auto_restart (RW)"},
        {"REG_GIE", TSR_REG_GIE, "RW: bit 0 global interrupt enable"},
        {"REG_IER", TSR_REG_IER, "RW: interrupt enable, bit 0 ap_done, bit 1 ap_ready"},
        {"REG_ISR", TSR_REG_ISR, "R, write 1 toggles: interrupt status, bit 0 ap_done, bit 1 ap_ready"},
        {"REG_INSN_ADDR", TSR_REG_INSN_ADDR, "RW: argument 0 `insns` (pointer): instruction stream address, LO word"},
        {"REG_INSN_ADDR_HI", TSR_REG_INSN_ADDR_HI,
         "RW: `insns` HI word; kept for the convention, the 32-bit AXI4 master ignores it (drivers refuse "
         "a stream at or above 4 GiB)"},
        {"REG_INSN_COUNT", TSR_REG_INSN_COUNT, "RW: argument 1 `count`: number of instructions"},
        {"REG_STATUS", TSR_REG_STATUS,
         "R: bit 0 BUSY, bit 1 DONE (level until the next start), bit 2 ERR, bit 3 RESETTING"},
        {"REG_SOFT_RESET", TSR_REG_SOFT_RESET,
         "W: bit 0 soft reset (stages, queues, error bits to idle; the AXI4 master drains); reads RESETTING"},
        {"REG_STAGE_INSNS", TSR_REG_STAGE_INSNS,
         "R: instructions completed, [9:0] load, [19:10] compute, [29:20] store (mod 1024)"},
        {"REG_FETCHED", TSR_REG_FETCHED, "R: instructions fetched"},
        {"REG_TOKENS", TSR_REG_TOKENS,
         "R: tokens held, 8 bits per queue: load->compute, compute->load, compute->store, store->compute"},
        {"REG_UNITS", TSR_REG_UNITS, "R: [4:0] busy, [12:8] error: fetch, load, compute, store, axi"},
        {"REG_COUNTERS", TSR_REG_COUNTERS,
         "R: 64-bit counter k at +8k (LO; reading it latches HI) and +8k+4 (HI), cleared at start"},
        /* bit numbers (the masks in tsr_regs.h are 1 << these) */
        {"AP_START_BIT", 0, 0},
        {"AP_DONE_BIT", 1, 0},
        {"AP_IDLE_BIT", 2, 0},
        {"AP_READY_BIT", 3, 0},
        {"AP_AUTO_RESTART_BIT", 7, 0},
        {"IRQ_DONE_BIT", 0, 0},
        {"IRQ_READY_BIT", 1, 0},
        {"SOFT_RESET_BIT", 0, 0},
        {"STATUS_BUSY_BIT", 0, 0},
        {"STATUS_DONE_BIT", 1, 0},
        {"STATUS_ERR_BIT", 2, 0},
        {"STATUS_RESETTING_BIT", 3, 0},
        {"UNIT_FETCH", TSR_UNIT_FETCH, 0},
        {"UNIT_LOAD", TSR_UNIT_LOAD, 0},
        {"UNIT_COMPUTE", TSR_UNIT_COMPUTE, 0},
        {"UNIT_STORE", TSR_UNIT_STORE, 0},
        {"UNIT_AXI", TSR_UNIT_AXI, 0},
        {"UNIT_COUNT", TSR_UNIT_COUNT, 0},
    };
    _Static_assert(TSR_AP_START == 1u << 0 && TSR_AP_DONE == 1u << 1 && TSR_AP_IDLE == 1u << 2 &&
                       TSR_AP_READY == 1u << 3 && TSR_AP_AUTO_RESTART == 1u << 7 && TSR_IRQ_DONE == 1u << 0 &&
                       TSR_IRQ_READY == 1u << 1 && TSR_SOFT_RESET == 1u << 0 && TSR_STATUS_BUSY == 1u << 0 &&
                       TSR_STATUS_DONE == 1u << 1 && TSR_STATUS_ERR == 1u << 2 && TSR_STATUS_RESETTING == 1u << 3,
                   "register bits and the table above must agree");
    _Static_assert(TSR_REG_COUNTERS + 8 * TSR_CNT_COUNT <= TSR_REG_MAP_BYTES, "counters beyond the 8-bit map");
    *n = sizeof t / sizeof t[0];
    return t;
}

const tsr_kernel_arg_t *tsr_kernel_args(size_t *n)
{
    static const tsr_kernel_arg_t a[] = {
        {"insns", "uint64_t*", TSR_REG_INSN_ADDR, 8, 1},
        {"count", "uint", TSR_REG_INSN_COUNT, 4, 0},
    };
    _Static_assert(TSR_REG_INSN_ADDR_HI == TSR_REG_INSN_ADDR + 4 && TSR_REG_INSN_ADDR >= 0x10 &&
                       TSR_REG_INSN_COUNT >= TSR_REG_INSN_ADDR + 8 && TSR_REG_STATUS >= TSR_REG_INSN_COUNT + 4,
                   "arguments from 0x10, a pointer as two words, Tessera's registers after them");
    *n = sizeof a / sizeof a[0];
    return a;
}

int tsr_regmap_doc(FILE *f)
{
    size_t n;
    const tsr_reg_const_t *t = tsr_reg_consts(&n);
    fprintf(f, "| Offset | Register | Access and bits |\n|---|---|---|\n");
    for (size_t i = 0; i < n; i++)
        if (t[i].doc)
            fprintf(f, "| 0x%02X | %s | %s |\n", (unsigned)t[i].value, t[i].name + 4, t[i].doc);
    fprintf(f, "\nCounters (64-bit, LO at the offset, HI at +4):\n\n| Offset | Counter |\n|---|---|\n");
    for (int k = 0; k < TSR_CNT_COUNT; k++)
        fprintf(f, "| 0x%02X | %s |\n", (unsigned)tsr_cnt_offset(k), tsr_cnt_name(k));
    return ferror(f) ? tsr_err(TSR_EIO, "write error") : TSR_OK;
}

int tsr_emit_kernel_xml(unsigned dram_bus_bits, FILE *f)
{
    size_t n;
    const tsr_kernel_arg_t *a = tsr_kernel_args(&n);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<!-- Generated by `tessera config emit-kernel-xml` from isa/tsr_regs.c: do not edit. -->\n"
               "<root versionMajor=\"1\" versionMinor=\"6\">\n"
               "  <kernel name=\"%s\" language=\"ip_c\" vlnv=\"tessera:kernel:%s:1.0\" attributes=\"\" "
               "preferredWorkGroupSizeMultiple=\"0\" workGroupSize=\"1\" interrupt=\"true\" "
               "hwControlProtocol=\"ap_ctrl_hs\">\n"
               "    <ports>\n"
               "      <port name=\"s_axi_control\" mode=\"slave\" range=\"0x1000\" dataWidth=\"32\" "
               "portType=\"addressable\" base=\"0x0\"/>\n"
               "      <port name=\"m_axi_gmem\" mode=\"master\" range=\"0xFFFFFFFF\" dataWidth=\"%u\" "
               "portType=\"addressable\" base=\"0x0\"/>\n"
               "    </ports>\n    <args>\n",
            TSR_KERNEL_NAME, TSR_KERNEL_NAME, dram_bus_bits);
    for (size_t i = 0; i < n; i++)
        fprintf(f,
                "      <arg name=\"%s\" addressQualifier=\"%d\" id=\"%zu\" port=\"%s\" size=\"0x%x\" "
                "offset=\"0x%x\" type=\"%s\" hostOffset=\"0x0\" hostSize=\"0x%x\"/>\n",
                a[i].name, a[i].is_pointer, i, a[i].is_pointer ? "m_axi_gmem" : "s_axi_control", (unsigned)a[i].size,
                (unsigned)a[i].offset, a[i].type, (unsigned)a[i].size);
    fprintf(f, "    </args>\n  </kernel>\n</root>\n");
    return ferror(f) ? tsr_err(TSR_EIO, "write error") : TSR_OK;
}
