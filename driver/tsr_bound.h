/*
 * tsr_bound: upper bounds of what one run of a stream may cost, computed
 * from the stream before it runs: the run budget refuses a stream whose
 * bound exceeds it, and a run that goes past its bound is stopped.
 */
#ifndef TSR_BOUND_H
#define TSR_BOUND_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_isa.h"
#include "tsr_simopts.h"

/* Work bound of a stream: tensor ops + DRAM elements and pad rows moved +
 * instructions (what the fsim run budget counts). */
uint64_t tsr_stream_work(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n);
/* The rtl backend's cycle bound of a stream under DRAM timing ro (also the
 * board backends' and the systemc backend's run budget). */
uint64_t tsr_rtl_cycle_bound(const tsr_rtl_opts_t *ro, const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n);

#endif
