/*
 * tsr_regseq: the register sequence that runs an instruction stream on the
 * accelerator through its AXI4-Lite map (isa/tsr_regs.h, ap_ctrl_hs), over
 * any tsr_regio_t implementation. One code path for the simulated device
 * (`rtl`) and the boards (`zynq`):
 *
 *   start   INSN_ADDR, INSN_ADDR_HI = 0, INSN_COUNT, then AP_CTRL = ap_start
 *   wait    the implementation's completion signal (or polling), confirmed
 *           by AP_CTRL.ap_done (clear on read); between slices the run
 *           budget (CNT_CYCLES against the stream's cycle bound) and a
 *           progress watchdog (activity counters and STAGE_INSNS)
 *   finish  STATUS.ERR clear, TOKENS all zero, UNITS not busy; anything
 *           else an error naming the units, queues and instructions
 *   reset   SOFT_RESET = 1, then SOFT_RESET (it reads STATUS.RESETTING)
 *           polled until the AXI4 master has drained
 *   count   the 64-bit counters (LO latches HI)
 *
 * A backend's state is a tsr_regseq_t (its first member the tsr_regio_t);
 * the functions below are its tsr_backend_ops_t entries.
 */
#ifndef TSR_REGSEQ_H
#define TSR_REGSEQ_H

#include "tsr_driver.h"
#include "tsr_regio.h"

typedef struct tsr_regseq {
    tsr_regio_t io;          /* first: tsr_regio_mem_* take the state as a tsr_regio_t */
    const char *name;        /* backend name, prefixes error messages */
    tsr_config_t cfg;        /* configuration */
    tsr_rtl_opts_t ro;       /* DRAM timing the cycle bound assumes; watchdog_cycles */
    tsr_counters_t ctr;      /* accumulated counters */
    tsr_counters_t run;      /* static counters of the running stream */
    int started;             /* a run is in progress */
    uint64_t bound;          /* cycle bound of the running stream (its run budget) */
    tsr_insn_t *insns;       /* the running stream, decoded (for reports) */
    uint32_t ninsns;         /* its length */
    uint32_t stage_base;     /* STAGE_INSNS at the start (the counts run on across runs) */
    uint64_t last_activity;  /* watchdog: activity sum at the last change */
    uint64_t last_change;    /* watchdog: CNT_CYCLES at the last change */
    uint64_t last_sample;    /* watchdog: CNT_CYCLES at the last sample (0: none yet) */
} tsr_regseq_t;

/* A zeroed state for backend name; the caller then fills rs->io. */
int tsr_regseq_new(const char *name, const tsr_config_t *cfg, const tsr_device_opts_t *opts, tsr_regseq_t **out);
/* tsr_backend_ops_t entries (state = tsr_regseq_t *). */
void tsr_regseq_close(void *st);
int tsr_regseq_start(void *st, uint64_t insn_addr, uint32_t count, uint64_t bound);
int tsr_regseq_wait(void *st, int timeout_ms);
int tsr_regseq_counters(void *st, tsr_counters_t *out);
int tsr_regseq_reset_counters(void *st);
int tsr_regseq_reset(void *st);
uint64_t tsr_regseq_bound(void *st, const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n);
/* The tsr_backend_ops_t entries every register-sequence backend shares
 * (rtl, zynq, xrt): device DRAM through tsr_regio_mem_*, counters, reset and
 * the cycle bound through the register sequence. A backend adds .name,
 * .open, .start and .wait. */
#define TSR_REGSEQ_BACKEND_OPS                                                                               \
    .close = tsr_regseq_close, .mem_alloc = tsr_regio_mem_alloc, .mem_alloc_at = tsr_regio_mem_alloc_at,     \
    .mem_free = tsr_regio_mem_free, .mem_write = tsr_regio_mem_write, .mem_read = tsr_regio_mem_read,        \
    .counters = tsr_regseq_counters, .reset_counters = tsr_regseq_reset_counters, .reset = tsr_regseq_reset, \
    .bound = tsr_regseq_bound, .budget_unit = "cycles"

/* The parts, for a backend that starts and waits through its own runtime
 * (xrt): decode the stream and take its static counters and the stage
 * base (no register written); between waits, the run budget and the
 * watchdog; once the run is complete, the end-of-run checks and counters. */
int tsr_regseq_prepare(tsr_regseq_t *rs, uint64_t insn_addr, uint32_t count, uint64_t bound);
int tsr_regseq_check_progress(tsr_regseq_t *rs);
int tsr_regseq_finish(tsr_regseq_t *rs);
/* The hardware counters (tsr_cnt_e order). */
int tsr_regseq_read_hw(tsr_regseq_t *rs, uint64_t hw[TSR_CNT_COUNT]);

#endif
