/*
 * tsr_fsim: the functional golden model. Executes a task-instruction stream
 * read from device DRAM bit-exactly: on-chip buffers, GEMM, the ALU
 * (tsr_alu_apply), padded/strided loads and stores, ordered by the token
 * semantics of tsr_pipe. Untimed; counts activity in tsr_counters_t.
 * On-chip buffers keep their contents between runs, as in hardware.
 */
#ifndef TSR_FSIM_H
#define TSR_FSIM_H

#include <stdint.h>

#include "tsr_config.h"
#include "tsr_counters.h"
#include "tsr_dram.h"
#include "tsr_isa.h"

typedef struct tsr_fsim tsr_fsim_t;

/* dram must outlive the simulator. */
int tsr_fsim_create(const tsr_config_t *cfg, tsr_dram_t *dram, tsr_fsim_t **out);
void tsr_fsim_destroy(tsr_fsim_t *s);
/* Fetch and decode count instructions at insn_addr and prepare to run.
 * seed selects the stage interleaving (0 = fast deterministic order). */
int tsr_fsim_start(tsr_fsim_t *s, uint64_t insn_addr, uint32_t count, uint64_t seed);
/* Execute up to budget instructions (0 = all); *done = 1 after FINISH. */
int tsr_fsim_step(tsr_fsim_t *s, uint64_t budget, int *done);
/* Drop the current run (after an error or when the caller gives up). */
void tsr_fsim_abort(tsr_fsim_t *s);
/* start + step to completion. */
int tsr_fsim_run(tsr_fsim_t *s, uint64_t insn_addr, uint32_t count, uint64_t seed);
/* Counters accumulated since creation or the last reset. */
const tsr_counters_t *tsr_fsim_counters(const tsr_fsim_t *s);
void tsr_fsim_reset_counters(tsr_fsim_t *s);
/* Execute the data semantics of one instruction now, to completion,
 * outside any run (no ordering, no tokens): what a timed model calls when
 * its schedule reaches the instruction, so its output bytes come from this
 * one implementation. Counts into the fsim counters; errors as in a run. */
int tsr_fsim_exec(tsr_fsim_t *s, const tsr_insn_t *in);
/* The decoded uop buffer (uop_depth entries), e.g. for footprints. */
/* Timing only (the SystemC model's fast mode): instructions keep their
 * checks that need no data and their activity counts, uop LOADs load (the
 * loops and issue times depend on the uops), but no other data moves or is
 * computed: the on-chip buffers and the DRAM outputs are left as they
 * were. For streams the verifier has accepted (it checks every index and
 * DRAM span that a data run would), whose timing does not depend on data. */
void tsr_fsim_set_timing_only(tsr_fsim_t *s, int on);
const tsr_uop_t *tsr_fsim_uops(const tsr_fsim_t *s);

#endif
