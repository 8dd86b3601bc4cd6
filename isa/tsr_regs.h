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
    TSR_REG_CTRL = 0x00,        /* W: bit 0 START (self-clearing) */
    TSR_REG_STATUS = 0x04,      /* R: bit 0 BUSY, bit 1 DONE (until next START) */
    TSR_REG_INSN_ADDR = 0x08,   /* RW: byte address of the instruction stream */
    TSR_REG_INSN_COUNT = 0x0C,  /* RW: number of instructions */
    TSR_REG_STAGE_INSNS = 0x10, /* R: instructions completed: [9:0] load, [19:10] compute, [29:20] store (mod 1024) */
    TSR_REG_FETCHED = 0x14,     /* R: instructions fetched so far */
    TSR_REG_COUNTERS = 0x20     /* first counter; counter k at 0x20 + 8k (LO), +4 (HI) */
};

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
