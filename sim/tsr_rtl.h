/*
 * tsr_rtl: the cycle-accurate RTL simulator. Builds (once per config, then
 * cached) a Verilator model of hw/rtl/tsr_top, loads it, and runs it
 * against a DRAM model with configurable latency, bandwidth and
 * outstanding requests behind the AXI4 port. The driver's register
 * sequence (driver/tsr_regseq.c) drives it through the AXI4-Lite registers
 * below, the same code that drives a board.
 */
#ifndef TSR_RTL_H
#define TSR_RTL_H

#include <stdint.h>

#include "tsr_cachedir.h"
#include "tsr_config.h"
#include "tsr_dram.h"
#include "tsr_regs.h"
#include "tsr_simopts.h"

typedef struct tsr_rtl tsr_rtl_t;

/* Build or load the model for cfg (may take a minute on a cache miss). */
int tsr_rtl_create(const tsr_config_t *cfg, tsr_dram_t *dram, const tsr_rtl_opts_t *opts,
                   tsr_rtl_t **out);
void tsr_rtl_destroy(tsr_rtl_t *r);
/* One AXI4-Lite access at byte offset off (a few cycles, the DRAM model
 * running): the register/DMA layer's read32/write32 (driver/tsr_regio.h). */
int tsr_rtl_reg_write(tsr_rtl_t *r, uint32_t off, uint32_t v);
int tsr_rtl_reg_read(tsr_rtl_t *r, uint32_t off, uint32_t *v);
/* Run up to max_cycles (0 = no limit) or until the completion line
 * (STATUS.DONE, the model's interrupt) is high; *done = 1 then. */
int tsr_rtl_run(tsr_rtl_t *r, uint64_t max_cycles, int *done);
/* After a soft reset: error unless every DRAM burst the master started has
 * completed (what only the simulated slave can see). */
int tsr_rtl_bus_check(tsr_rtl_t *r);
/* Cycles since the last ap_start write. */
uint64_t tsr_rtl_run_cycles(const tsr_rtl_t *r);
/* Simulated cycles since the model was created. */
uint64_t tsr_rtl_cycles(const tsr_rtl_t *r);
/* Simulation speed: the cycles simulated inside tsr_rtl_run and the thread
 * CPU seconds that took (register accesses not included). With the
 * environment variable TESSERA_RTL_STATS set (not 0), tsr_rtl_destroy
 * prints them as one line, "rtl stats: C cycles in S s CPU: R cycles/s",
 * on stderr: the RTL's speed for any command that runs it. */
void tsr_rtl_stats(const tsr_rtl_t *r, uint64_t *cycles, double *cpu_s);

#endif
