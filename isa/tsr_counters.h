/*
 * tsr_counters: the activity counters every backend reports, in the same
 * units, so fsim and RTL numbers can be compared line by line.
 */
#ifndef TSR_COUNTERS_H
#define TSR_COUNTERS_H

#include <stdint.h>
#include <stdio.h>

#include "tsr_isa.h"

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
} tsr_counters_t;

/* Print counters, one per line, "name value". */
void tsr_counters_print(const tsr_counters_t *c, FILE *f);
/* Accumulate b into a. */
void tsr_counters_add(tsr_counters_t *a, const tsr_counters_t *b);

#endif
