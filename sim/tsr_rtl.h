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

#include "tsr_config.h"
#include "tsr_dram.h"
#include "tsr_regs.h"

typedef struct tsr_rtl_opts {
    uint32_t dram_latency;       /* cycles from address accepted to first data / write response (0 = 32) */
    double dram_bytes_per_cycle; /* sustained DRAM bandwidth shared by reads and writes (0 = 8) */
    uint32_t dram_outstanding;   /* bursts in flight per direction (0 = 8) */
    const char *trace_path;      /* FST waveform file, or NULL */
    uint64_t trace_start;        /* first cycle dumped */
    uint64_t trace_cycles;       /* cycles dumped (0 = to the end) */
    int threads;                 /* Verilator threads (0/1 = single-threaded) */
    uint64_t watchdog_cycles;    /* cycles without any activity before a run is declared stuck (0 = 200000) */
    int verbose;                 /* print model builds to stderr */
    const char *profile_path;    /* utilisation timeline (CSV, one line per window of every run), or NULL */
    uint32_t profile_window;     /* cycles per profile line (0 = 256) */
    const char *timeline_path;   /* Perfetto/Chrome trace-event JSON of every run (sim/tsr_timeline.h), or NULL;
                                    the rtl backend then uses a model whose stage signals are public */
    uint64_t timeline_max;       /* timeline size limit in bytes (0 = TSR_TL_DEFAULT_MAX) */
} tsr_rtl_opts_t;

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
/* Directory of the model cache ($TESSERA_CACHE, else ~/.cache/tessera). */
const char *tsr_rtl_cache_dir(char *buf, int n);

#endif
