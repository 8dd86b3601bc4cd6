/*
 * tsr_counters: the activity counters every backend reports, in the same
 * units, so fsim and RTL numbers can be compared line by line.
 */
#ifndef TSR_COUNTERS_H
#define TSR_COUNTERS_H

#include <stdint.h>
#include <stdio.h>

#include "tsr_isa.h"
#include "tsr_regs.h"

typedef struct tsr_counters {
    uint64_t insns[TSR_OP_COUNT];        /* instructions executed, by opcode */
    uint64_t loads[TSR_MEM_COUNT];       /* LOAD instructions, by memory type */
    uint64_t bytes_loaded[TSR_MEM_COUNT];/* DRAM bytes read by LOADs, by memory type */
    uint64_t pad_rows_loaded;            /* SRAM rows filled with zero padding */
    uint64_t bytes_stored;               /* DRAM bytes written by STOREs */
    uint64_t insn_bytes_fetched;         /* DRAM bytes read by fetch */
    uint64_t gemm_ops;                   /* GEMM tensor ops (uop iterations, not reset) */
    uint64_t gemm_reset_ops;             /* accumulator rows zeroed by GEMM reset */
    uint64_t macs;                       /* multiply-accumulates = gemm_ops x BATCH x BLOCK_IN x BLOCK_OUT */
    uint64_t alu_ops;                    /* ALU tensor ops (uop iterations, incl. reset) */
    uint64_t alu_lanes;                  /* ALU element operations = alu_ops x BATCH x BLOCK_OUT */
    uint64_t cycles;                     /* clock cycles (0 on the untimed functional model) */
    uint64_t has_hw;                     /* 1 if hw[] holds hardware counters (RTL, board) */
    uint64_t hw[TSR_CNT_COUNT];          /* hardware performance counters, tsr_cnt_e order */
} tsr_counters_t;

/* Print counters, one per line, "name value". */
void tsr_counters_print(const tsr_counters_t *c, FILE *f);
/* Accumulate b into a. */
void tsr_counters_add(tsr_counters_t *a, const tsr_counters_t *b);
/* c->hw[] was just read from a timed backend (RTL, SystemC, board): mark it
 * (has_hw) and take the cycles from it; with_ops also takes the GEMM/ALU op
 * counts (a mid-run read, before the per-instruction static counts exist). */
void tsr_counters_from_hw(tsr_counters_t *c, int with_ops);
/* Add the counts a stream implies by its fields alone (everything except
 * cycles and hw[]): what every correct backend must report for it. */
void tsr_counters_static(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n,
                         tsr_counters_t *out);

#endif
