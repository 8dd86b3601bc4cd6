/*
 * tsr_driver: the host driver API. Open a device (a backend plus a config),
 * allocate device DRAM buffers, copy data in and out, submit an instruction
 * stream, wait for it with a timeout, read counters. One program runs
 * unchanged on every backend.
 *
 * Every submitted stream is decoded and run through the static verifier
 * against the buffers allocated on this device (and the uop contents in
 * them) before the backend sees it: a stream that would touch memory
 * outside its buffers, overrun an on-chip buffer or deadlock is refused
 * with the instruction index and reason.
 */
#ifndef TSR_DRIVER_H
#define TSR_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_counters.h"
#include "tsr_isa.h"
#include "tsr_bound.h"
#include "tsr_simopts.h"

typedef struct tsr_device tsr_device_t;
typedef struct tsr_backend_ops tsr_backend_ops_t;

/* Default run budget: 2^32 fsim work units (about an hour of simulation)
 * or 2^32 RTL cycles (43 s of a 100 MHz device); `--run-budget N` raises it. */
#define TSR_RUN_BUDGET_DEFAULT (1ull << 32)

typedef struct tsr_device_opts {
    uint64_t dram_size;      /* device DRAM bytes (0 = 1 GiB) */
    uint64_t seed;           /* fsim stage interleaving (0 = deterministic) */
    int skip_verify;         /* 1: do not verify before submit (for tests of the backends' own checks) */
    uint64_t run_budget;     /* most work one run may take: fsim work units (tensor ops + elements
                              * moved + instructions), rtl cycles. 0 = TSR_RUN_BUDGET_DEFAULT. A stream
                              * whose bound exceeds it is refused at submit; an rtl run that exceeds its
                              * stream-derived cycle bound is stopped with an error */
    tsr_rtl_opts_t rtl;      /* RTL backend: DRAM timing, waveform, threads, watchdog (systemc: DRAM timing,
                              * and rtl.timing_only: the cycles without the data, outputs not written) */
    const char *sample;      /* sampled backend: which submissions also run on the RTL (driver/tsr_sampled.h:
                              * "all", "every:K", "random:P", "none"; NULL = TSR_SAMPLE_DEFAULT) */
    uint64_t sample_seed;    /* sampled backend: the seed of random:P */
} tsr_device_opts_t;

/* Names of the available backends, NULL-terminated. */
const char *const *tsr_backend_names(void);
/* Open backend "fsim", "rtl", "rtlproc" (rtl in a child process), "systemc", "sampled", "zynq" or "xrt"
 * with a config; opts may be NULL. */
int tsr_device_open(const char *backend, const tsr_config_t *cfg,
                    const tsr_device_opts_t *opts, tsr_device_t **out);
void tsr_device_close(tsr_device_t *dev);
const tsr_config_t *tsr_device_config(const tsr_device_t *dev);
/* One host-side object tied to the device's lifetime (the JIT kernel cache,
 * jit/tsr_kcache.h): tsr_device_close first calls dtor(dev, ext), while the
 * device's buffers can still be freed. Setting a new one replaces the old
 * without destroying it; ext NULL clears the slot. */
void tsr_device_set_ext(tsr_device_t *dev, void *ext, void (*dtor)(tsr_device_t *dev, void *ext));
void *tsr_device_ext(const tsr_device_t *dev);
/* The backend state of dev if its backend is ops, else NULL: how a backend's
 * own query functions (driver/tsr_sampled.h) find their state. */
void *tsr_device_backend_state(const tsr_device_t *dev, const tsr_backend_ops_t *ops);

/* Device DRAM buffers. Addresses are device byte addresses. */
int tsr_mem_alloc(tsr_device_t *dev, uint64_t size, uint64_t *addr);
int tsr_mem_alloc_at(tsr_device_t *dev, uint64_t addr, uint64_t size);
int tsr_mem_free(tsr_device_t *dev, uint64_t addr);
int tsr_mem_write(tsr_device_t *dev, uint64_t addr, const void *src, uint64_t n);
int tsr_mem_read(tsr_device_t *dev, uint64_t addr, void *dst, uint64_t n);
/* 0 once a timing-only device (rtl.timing_only) has been given a stream:
 * its streams' data is never computed, so tsr_mem_read then returns zeros
 * (and warns once on stderr) instead of stale bytes; 1 otherwise. */
int tsr_device_data_valid(const tsr_device_t *dev);
/* 1 if dev was opened with rtl.timing_only (the systemc backend's cycles-only mode). */
int tsr_device_timing_only(const tsr_device_t *dev);
/* Device DRAM in use: the bytes of the allocated buffers and of the
 * driver's instruction buffer now, and their high-water mark since open or
 * the last tsr_mem_reset_peak (sizes as asked, before alignment): what a
 * run needs of the device's memory (training vs inference, issue 27). */
typedef struct tsr_mem_usage {
    uint64_t in_use;   /* bytes now */
    uint64_t peak;     /* most bytes at once */
    uint64_t buffers;  /* user buffers now */
} tsr_mem_usage_t;
int tsr_mem_usage(const tsr_device_t *dev, tsr_mem_usage_t *out);
/* Start a new high-water mark from what is in use now. */
void tsr_mem_reset_peak(tsr_device_t *dev);

/* Verify, copy into an instruction buffer and start n instructions. */
int tsr_submit(tsr_device_t *dev, const tsr_insn_t *insns, size_t n);
/* Wait for the submitted stream to finish. timeout_ms < 0 waits forever.
 * TSR_ETIMEOUT leaves the run in progress (call again to keep waiting, or
 * tsr_device_reset to give up). Any other error (a fault, an index error,
 * the watchdog, the run budget, tokens left at FINISH) has already reset
 * the device, so the next submit starts clean. */
int tsr_wait(tsr_device_t *dev, int timeout_ms);
/* Abandon any run and return the device to idle: stages, token queues and
 * error bits cleared (the RTL waits for its DRAM transactions to drain).
 * DRAM buffers and on-chip buffer contents are kept. */
int tsr_device_reset(tsr_device_t *dev);
/* Counters accumulated since open (or the last reset). */
int tsr_read_counters(tsr_device_t *dev, tsr_counters_t *out);
int tsr_reset_counters(tsr_device_t *dev);

/* ---- backend interface (one ops struct per backend) ---- */
struct tsr_backend_ops {
    const char *name;                                      /* "fsim" */
    int (*open)(const tsr_config_t *cfg, const tsr_device_opts_t *opts, void **state);
    void (*close)(void *state);
    int (*mem_alloc)(void *state, uint64_t size, uint64_t align, uint64_t *addr);
    int (*mem_alloc_at)(void *state, uint64_t addr, uint64_t size);
    int (*mem_free)(void *state, uint64_t addr);
    int (*mem_write)(void *state, uint64_t addr, const void *src, uint64_t n);
    int (*mem_read)(void *state, uint64_t addr, void *dst, uint64_t n);
    int (*start)(void *state, uint64_t insn_addr, uint32_t count, uint64_t bound); /* bound: from .bound */
    int (*wait)(void *state, int timeout_ms);              /* TSR_OK when finished */
    int (*counters)(void *state, tsr_counters_t *out);
    int (*reset_counters)(void *state);
    int (*reset)(void *state);                             /* abandon any run, back to idle */
    /* Upper bound of the run's cost in budget_unit, from the stream alone. */
    uint64_t (*bound)(void *state, const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n);
    const char *budget_unit;                               /* "work units", "cycles" */
};

extern const tsr_backend_ops_t tsr_backend_fsim;
extern const tsr_backend_ops_t tsr_backend_rtl;
extern const tsr_backend_ops_t tsr_backend_systemc;
extern const tsr_backend_ops_t tsr_backend_zynq;  /* Linux UIO + u-dma-buf (driver/tsr_backend_zynq.c) */
extern const tsr_backend_ops_t tsr_backend_xrt;   /* XRT (driver/tsr_backend_xrt.c, built with libxrt) */
extern const tsr_backend_ops_t tsr_backend_sampled; /* systemc + RTL windows (driver/tsr_sampled.h) */
extern const tsr_backend_ops_t tsr_backend_rtlproc; /* rtl in a child process (driver/tsr_rtlproc.h) */

#endif
