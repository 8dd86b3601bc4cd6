/*
 * tsr_timeline: a run timeline as Chrome/Perfetto trace-event JSON (opens
 * in ui.perfetto.dev and chrome://tracing), written by the rtl and systemc
 * backends (`--timeline FILE.json`). Both feed the same primitive events
 * (instruction completions per stage, token waits, DRAM bursts, GEMM/ALU
 * pipe activity, fetch dispatches), so their timelines have the same lanes
 * and the same meaning and can be compared event by event.
 *
 * Time: ts is in microseconds with 1 cycle = 1 ns (a nominal 1 GHz clock);
 * each run starts where the previous one ended plus a small gap, and its
 * times are counted from its START, so two backends' files line up.
 *
 * Lanes (tid): runs, fetch, load, compute, store, a token-wait lane per
 * stage, the GEMM and ALU pipes, and DRAM read/write lanes (one per burst
 * in flight). Stage slices are in completion order labelled in program
 * order of that stage (the n-th completion is the n-th instruction; on
 * the RTL two overlapping GEMM/ALU instructions may retire out of order,
 * then two adjacent compute labels are swapped - the same rule on both
 * backends). Counter tracks: token-queue occupancy, DRAM bursts in flight
 * and DRAM bytes moved.
 *
 * Bounded: events are buffered per run and written at the run's end; when
 * the file would pass its size limit, later events are dropped, the file
 * still closes as valid JSON, and tsr_tl_close says so on stderr.
 */
#ifndef TSR_TIMELINE_H
#define TSR_TIMELINE_H

#include <stdint.h>

#include "tsr_config.h"
#include "tsr_isa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default size limit of a timeline file (bytes). */
#define TSR_TL_DEFAULT_MAX (256ull << 20)

enum { TSR_TL_RD = 0, TSR_TL_WR = 1 };     /* burst direction */
enum { TSR_TL_GEMM = 0, TSR_TL_ALU = 1 };  /* compute pipe */

typedef struct tsr_tl tsr_tl_t;

/* Create path (truncating it); backend names the source in the metadata;
 * max_bytes 0 = TSR_TL_DEFAULT_MAX. */
int tsr_tl_open(const char *path, const char *backend, uint64_t max_bytes, tsr_tl_t **out);
/* Finish the file (a run still open is written as it stands). Prints a
 * note on stderr when events were dropped at the size limit. NULL ok. */
int tsr_tl_close(tsr_tl_t *t);
/* A run starts at cycle `start` (any time base; later events use the same)
 * with the decoded stream insns[0..n) (copied). */
int tsr_tl_run_begin(tsr_tl_t *t, const tsr_config_t *cfg, const tsr_insn_t *insns, uint32_t n, double start);
/* The run ended at cycle `end`: its events are written. */
int tsr_tl_run_end(tsr_tl_t *t, double end);
/* One instruction of stage (tsr_stage_e) left the stage at end; begin is
 * when the stage took it (the writer keeps slices of a stage disjoint). */
void tsr_tl_insn(tsr_tl_t *t, int stage, double begin, double end);
/* Fetch dispatched the next instruction at cycle at. */
void tsr_tl_fetch(tsr_tl_t *t, double at);
/* Stage waited for a token (pop) or for room in a token queue (push). */
void tsr_tl_wait(tsr_tl_t *t, int stage, double begin, double end);
/* A DRAM burst: address accepted at begin, last beat (read) or write response at end. */
void tsr_tl_burst(tsr_tl_t *t, int dir, double begin, double end, uint64_t addr, uint32_t bytes);
/* A pipe issued ops ops in [begin, end). */
void tsr_tl_pipe(tsr_tl_t *t, int pipe, double begin, double end, uint64_t ops);

#ifdef __cplusplus
}
#endif

#endif
