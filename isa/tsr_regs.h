/*
 * tsr_regs: the accelerator's AXI4-Lite register map, defined once. The
 * driver's RTL/board backends use these offsets; `tessera config emit-sv`
 * writes the same table into tsr_pkg as REG_* constants for the RTL.
 * All registers are 32 bits; 64-bit counters are LO/HI pairs (read LO
 * first: it latches HI so the pair is consistent).
 */
#ifndef TSR_REGS_H
#define TSR_REGS_H

#include <stddef.h>
#include <stdint.h>

enum {
    TSR_REG_CTRL = 0x00,        /* W: bit 0 START (self-clearing), bit 1 RESET (soft reset, below) */
    TSR_REG_STATUS = 0x04,      /* R: bit 0 BUSY, bit 1 DONE (until next START), bit 2 ERR, bit 3 RESETTING */
    TSR_REG_INSN_ADDR = 0x08,   /* RW: byte address of the instruction stream */
    TSR_REG_INSN_COUNT = 0x0C,  /* RW: number of instructions */
    TSR_REG_STAGE_INSNS = 0x10, /* R: instructions completed: [9:0] load, [19:10] compute, [29:20] store (mod 1024) */
    TSR_REG_FETCHED = 0x14,     /* R: instructions fetched so far */
    TSR_REG_TOKENS = 0x18,      /* R: tokens held, 8 bits per queue: [7:0] load->compute, [15:8] compute->load,
                                 * [23:16] compute->store, [31:24] store->compute (tsr_queue_e order) */
    TSR_REG_UNITS = 0x1C,       /* R: bits [4:0] busy (TSR_UNIT_* order), bits [12:8] error, same order */
    TSR_REG_COUNTERS = 0x20     /* first counter; counter k at 0x20 + 8k (LO), +4 (HI) */
};

/* Register bits. Soft reset (CTRL.RESET): every stage, the fetch unit,
 * the token queues and the error bits return to idle; the AXI4 master
 * issues no new request and completes what it started (R beats and B
 * responses are taken, write bursts whose address went out get their
 * remaining beats with WSTRB = 0), so DRAM sees no protocol violation and
 * no partial write; STATUS.RESETTING stays set until then. On-chip
 * buffers, INSN_ADDR/INSN_COUNT and the counters keep their values.
 * START is ignored while RESETTING. */
enum {
    TSR_CTRL_START = 1u << 0,
    TSR_CTRL_RESET = 1u << 1,
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
    const char *name;  /* SV name, e.g. "REG_CTRL" */
    uint32_t value;    /* offset, bit index or count */
} tsr_reg_const_t;

/* The register-map table; *n gets its length. */
const tsr_reg_const_t *tsr_reg_consts(size_t *n);
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
