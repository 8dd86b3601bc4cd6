/*
 * tsr_regs: the accelerator's AXI4-Lite register map, defined once. The
 * driver's register sequence (driver/tsr_regseq.c: rtl, zynq, xrt) uses
 * these offsets; `tessera config emit-sv` writes the same table into
 * tsr_pkg as REG_* constants for the RTL, `tessera config emit-kernel-xml`
 * the Vitis kernel description, `tessera config emit-regmap` the document.
 * All registers are 32 bits; 64-bit counters are LO/HI pairs (read LO
 * first: it latches HI so the pair is consistent).
 */
#ifndef TSR_REGS_H
#define TSR_REGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The map follows the Vitis RTL-kernel convention (ap_ctrl_hs), so the
 * same RTL is a standard Vitis kernel and a standard Zynq IP:
 *   0x00 AP_CTRL   bit 0 ap_start (W1: start; reads 1 until the run is done),
 *                  bit 1 ap_done (clear on read), bit 2 ap_idle, bit 3 ap_ready
 *                  (clear on read; set with ap_done: one run at a time),
 *                  bit 7 auto_restart (RW: start again after each run)
 *   0x04 GIE       bit 0 global interrupt enable
 *   0x08 IER       bit 0 ap_done, bit 1 ap_ready interrupt enable
 *   0x0C ISR       bit 0 ap_done, bit 1 ap_ready (set when enabled; write 1 toggles)
 *   0x10 ..        kernel arguments (tsr_kernel_args): a 64-bit pointer is
 *                  two 32-bit words, LO first
 * then Tessera's own registers. The interrupt line is GIE & |(IER & ISR). */
enum {
    TSR_REG_AP_CTRL = 0x00,     /* ap_ctrl_hs, above */
    TSR_REG_GIE = 0x04,         /* RW: global interrupt enable */
    TSR_REG_IER = 0x08,         /* RW: interrupt enable per event */
    TSR_REG_ISR = 0x0C,         /* R/TOW: interrupt status per event */
    TSR_REG_INSN_ADDR = 0x10,   /* RW: argument `insns` (pointer): byte address of the instruction stream, LO */
    TSR_REG_INSN_ADDR_HI = 0x14,/* RW: its HI word; ignored: the AXI4 master has 32 address bits (drivers check) */
    TSR_REG_INSN_COUNT = 0x18,  /* RW: argument `count`: number of instructions */
    TSR_REG_STATUS = 0x20,      /* R: bit 0 BUSY, bit 1 DONE (level, until the next start), bit 2 ERR,
                                 * bit 3 RESETTING */
    TSR_REG_SOFT_RESET = 0x24,  /* W: bit 0 soft reset (below); reads RESETTING */
    TSR_REG_STAGE_INSNS = 0x28, /* R: instructions completed: [9:0] load, [19:10] compute, [29:20] store (mod 1024) */
    TSR_REG_FETCHED = 0x2C,     /* R: instructions fetched so far */
    TSR_REG_TOKENS = 0x30,      /* R: tokens held, 8 bits per queue: [7:0] load->compute, [15:8] compute->load,
                                 * [23:16] compute->store, [31:24] store->compute (tsr_queue_e order) */
    TSR_REG_UNITS = 0x34,       /* R: bits [4:0] busy (TSR_UNIT_* order), bits [12:8] error, same order */
    TSR_REG_COUNTERS = 0x40,    /* first counter; counter k at 0x40 + 8k (LO), +4 (HI) */
    TSR_REG_MAP_BYTES = 0x100   /* size of the AXI4-Lite window (8 address bits) */
};

/* Register bits. Soft reset (SOFT_RESET bit 0): every stage, the fetch
 * unit, the token queues and the error bits return to idle; the AXI4
 * master issues no new request and completes what it started (R beats and
 * B responses are taken, write bursts whose address went out get their
 * remaining beats with WSTRB = 0), so DRAM sees no protocol violation and
 * no partial write; STATUS.RESETTING stays set until then. On-chip
 * buffers, the arguments and the counters keep their values; ap_start,
 * ap_done, auto_restart and ISR clear. ap_start is ignored while RESETTING
 * or busy. */
enum {
    TSR_AP_START = 1u << 0,
    TSR_AP_DONE = 1u << 1,
    TSR_AP_IDLE = 1u << 2,
    TSR_AP_READY = 1u << 3,
    TSR_AP_AUTO_RESTART = 1u << 7,
    TSR_IRQ_DONE = 1u << 0,     /* IER / ISR bit of ap_done */
    TSR_IRQ_READY = 1u << 1,    /* IER / ISR bit of ap_ready */
    TSR_SOFT_RESET = 1u << 0,
    TSR_STATUS_BUSY = 1u << 0,
    TSR_STATUS_DONE = 1u << 1,
    TSR_STATUS_ERR = 1u << 2,
    TSR_STATUS_RESETTING = 1u << 3
};

/* Units in REG_UNITS (bit k busy, bit 8 + k error). */
typedef enum {
    TSR_UNIT_FETCH = 0,
    TSR_UNIT_LOAD,
    TSR_UNIT_COMPUTE,
    TSR_UNIT_STORE,
    TSR_UNIT_AXI, /* busy: DRAM transactions outstanding; error: SLVERR/DECERR response */
    TSR_UNIT_COUNT
} tsr_unit_e;

/* One named constant of the register map: the table that the driver's
 * constants above are checked against and `tessera config emit-sv`
 * writes into tsr_pkg (REG_*, CTRL_*, STATUS_*, UNIT_*). */
typedef struct {
    const char *name;  /* SV name, e.g. "REG_AP_CTRL" */
    uint32_t value;    /* offset, bit index or count */
    const char *doc;   /* one line for the register-map document (registers only, else NULL) */
} tsr_reg_const_t;

/* The register-map table; *n gets its length. */
const tsr_reg_const_t *tsr_reg_consts(size_t *n);

/* One kernel argument, in register-map order (what XRT's xrtRunSetArg
 * index k means, and what kernel.xml declares). */
typedef struct {
    const char *name;    /* "insns" */
    const char *type;    /* C type for kernel.xml: "uint64_t*", "uint" */
    uint32_t offset;     /* byte offset of the (LO) word */
    uint32_t size;       /* bytes: 8 for a pointer (two words), 4 for a scalar */
    int is_pointer;      /* 1: a device-memory address on the kernel's AXI4 master */
} tsr_kernel_arg_t;

/* The kernel arguments; *n gets their number. */
const tsr_kernel_arg_t *tsr_kernel_args(size_t *n);
/* Markdown table of the register map (`tessera config emit-regmap`). */
int tsr_regmap_doc(FILE *f);

/* The Vitis RTL kernel's name (kernel.xml, xrtPLKernelOpen). */
#define TSR_KERNEL_NAME "tessera"
/* The Vitis kernel description (kernel.xml) of tsr_kernel (hw/fpga): the
 * ap_ctrl_hs control port, the AXI4 master of dram_bus_bits data bits and
 * the arguments at their register offsets. */
int tsr_emit_kernel_xml(unsigned dram_bus_bits, FILE *f);
/* Name of a unit ("compute"), NULL if out of range. */
const char *tsr_unit_name(int k);

/* Performance counters (reset by START). */
typedef enum {
    TSR_CNT_CYCLES = 0,
    TSR_CNT_LOAD_BUSY,
    TSR_CNT_LOAD_STALL_TOK,
    TSR_CNT_LOAD_STALL_MEM,
    TSR_CNT_COMPUTE_BUSY,
    TSR_CNT_COMPUTE_STALL_TOK,
    TSR_CNT_COMPUTE_STALL_MEM,
    TSR_CNT_STORE_BUSY,
    TSR_CNT_STORE_STALL_TOK,
    TSR_CNT_STORE_STALL_MEM,
    TSR_CNT_FETCH_STALL,        /* cycles fetch waited for a full command queue */
    TSR_CNT_DRAM_RD_BYTES,
    TSR_CNT_DRAM_WR_BYTES,
    TSR_CNT_GEMM_OPS,
    TSR_CNT_ALU_OPS,
    TSR_CNT_DUAL_OPS,           /* cycles in which the GEMM and the ALU pipe both issued an op */
    TSR_CNT_COUNT
} tsr_cnt_e;

/* Name of a counter in lower case ("load_stall_tok"), NULL if out of range. */
const char *tsr_cnt_name(int k);
/* Byte offset of counter k's LO word. */
static inline uint32_t tsr_cnt_offset(int k) { return (uint32_t)(TSR_REG_COUNTERS + 8 * k); }

#endif
