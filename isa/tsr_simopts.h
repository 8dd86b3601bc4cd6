/*
 * tsr_simopts: the options of a simulated device (DRAM timing, waveform,
 * profile, timeline, watchdog). Plain data at the bottom layer because
 * three layers share it: the simulators read it (sim/tsr_rtl.h, the
 * SystemC model), the driver's public API carries it in
 * tsr_device_opts_t, and the CLI fills it from flags -- without the
 * driver's users seeing the simulators' own headers.
 */
#ifndef TSR_SIMOPTS_H
#define TSR_SIMOPTS_H

#include <stdint.h>

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
    int timing_only;             /* systemc only: time streams without computing their data (outputs are
                                    not written; the cycles are the full model's); refused elsewhere */
} tsr_rtl_opts_t;

#endif
