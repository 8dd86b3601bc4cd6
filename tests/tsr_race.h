/*
 * tsr_race: an exact data-race check of a stream against the DRAM image of
 * a generated program, for classifying hostile-soak results. Two
 * instructions of different stages race when one writes an on-chip row
 * (inp, wgt, out) or DRAM byte the other reads or writes and neither is
 * ordered before the other by the tokens (happens-before: program order
 * within a stage, a push before the pop that takes that token). Such a
 * stream's result depends on the schedule by the ISA's definition: fsim,
 * the RTL, or the RTL with another DRAM latency may all differ.
 * GEMM/ALU row sets come from the uop buffer as the compute stage loads it
 * from the program's initial DRAM image (a uop LOAD that a STORE might have
 * rewritten is reported as unanalysable). Compiled into the tests only.
 */
#ifndef TSR_RACE_H
#define TSR_RACE_H

#include <stddef.h>

#include "tsr_gen.h"

enum { TSR_RACE_NONE = 0, TSR_RACE_FOUND = 1, TSR_RACE_UNKNOWN = 2 };

/* TSR_RACE_NONE, TSR_RACE_FOUND (why names the two instructions and the
 * resource) or TSR_RACE_UNKNOWN (why says what could not be analysed). */
int tsr_race_check(const tsr_gen_prog_t *p, const tsr_insn_t *insns, size_t n, char *why, size_t nwhy);

#endif
