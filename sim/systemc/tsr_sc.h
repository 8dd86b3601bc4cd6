/*
 * tsr_sc: the SystemC/TLM-2.0 timed model of the accelerator
 * (sim/systemc/), behind a C interface shaped like tsr_rtl's so the
 * driver's systemc backend mirrors the rtl one. Functionally exact (data
 * from the fsim's per-instruction code); cycles approximate the RTL's
 * (the error is measured: `tsr_sccal`, tests/test_systemc.c).
 *
 * One SystemC kernel per process: it can elaborate only once, so the
 * first tsr_sc_create elaborates TSR_SC_SLOTS accelerator instances (each
 * with its DRAM timing model) and every create claims a free one,
 * reconfiguring it for its config; destroy returns it. Simulated time is
 * shared: cycles are counted from each run's START.
 */
#ifndef TSR_SC_H
#define TSR_SC_H

#include <stdint.h>

#include "tsr_config.h"
#include "tsr_dram.h"
#include "tsr_isa.h"
#include "tsr_regs.h"
#include "tsr_simopts.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Devices a process may have open on the systemc backend at once. */
#define TSR_SC_SLOTS 32

typedef struct tsr_sc tsr_sc_t;

/* opts: the DRAM timing fields of the RTL backend's options (latency,
 * bytes per cycle, outstanding bursts; 0 = the same defaults). */
int tsr_sc_create(const tsr_config_t *cfg, tsr_dram_t *dram, const tsr_rtl_opts_t *opts, tsr_sc_t **out);
void tsr_sc_destroy(tsr_sc_t *s);
/* Program INSN_ADDR/INSN_COUNT and write CTRL.START through the register socket. */
int tsr_sc_start(tsr_sc_t *s, uint64_t insn_addr, uint32_t count);
/* The stream the last START decoded (count instructions), or NULL when
 * that decode failed (the run then ends in its error). Valid until the
 * next START, reset or destroy. */
const tsr_insn_t *tsr_sc_decoded(const tsr_sc_t *s, uint32_t count);
/* Simulate up to max_cycles (0 = until done); *done = 1 at DONE without
 * error. Errors: what the failing instruction's data semantics reported
 * (prefixed with the stage and index), TSR_EVERIFY for tokens left at
 * FINISH, TSR_EDEADLOCK when no stage can move. After an error the device
 * needs tsr_sc_reset. */
int tsr_sc_step(tsr_sc_t *s, uint64_t max_cycles, int *done);
/* Soft reset (CTRL.RESET): any run abandoned, stages and queues idle. */
int tsr_sc_reset(tsr_sc_t *s);
/* Cycles since the last START (until DONE). */
uint64_t tsr_sc_run_cycles(const tsr_sc_t *s);
/* Hardware counters of the last run (tsr_cnt_e order), read over the register socket. */
int tsr_sc_read_counters(tsr_sc_t *s, uint64_t hw[TSR_CNT_COUNT]);

#ifdef __cplusplus
}
#endif

#endif
