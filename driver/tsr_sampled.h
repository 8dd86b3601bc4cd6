/*
 * tsr_sampled: the `sampled` backend (driver/tsr_backend_sampled.c): every
 * submission runs on the fast timed model (systemc), and chosen ones, the
 * windows, also run cycle-accurately on the Verilated RTL after a hand-off
 * of the device's state. From the windows the whole run's RTL cycles are
 * estimated with an error bound.
 *
 * The hand-off. Every submission starts with the device idle (tsr_submit),
 * so a submission boundary is a point where the device's state is its DRAM
 * and its on-chip buffers, nothing in flight. DRAM: every buffer is
 * allocated at the same address on both devices; the RTL device's copy of
 * a buffer is refreshed from the fast device's before a window when the
 * buffer may have changed since the last window (a host write, or a STORE
 * of a submission that ran on the fast device alone), and after a window
 * every buffer of the two devices must be equal byte for byte (else an
 * error naming the submission and the first differing address). On-chip
 * buffers are not handed over: a window whose stream reads an on-chip row
 * it did not write itself (isa/tsr_carryin.h) is refused naming the
 * instruction and the row, unless the RTL has run every submission since
 * the device was opened (it then holds what a plain rtl device would).
 *
 * Cycles only (opened with rtl.timing_only, `--timing-only`): the fast
 * model is the timing-only one (no data computed) and a window's RTL run
 * gets only what the host wrote (instructions, uops, inputs, host
 * operators' results), no STORE's bytes, no on-chip check and no DRAM
 * comparison after it: the design's cycles do not depend on the data
 * (docs/results.md, "Timing-only mode"), so each window's RTL cycles are
 * a plain rtl run's. The device's data is then not valid (tsr_mem_read
 * returns zeros, as on a timing-only systemc device).
 *
 * TESSERA_SAMPLED_TRACE=FILE writes one line per submission: its record
 * and its features (kind, instructions, GEMM and ALU iterations, loads,
 * stores, the cycle bound), for studying window designs offline.
 *
 * The estimate. With the windows s (n of the M submissions), y_i their RTL
 * cycles and x_i their fast-model cycles (pieces: the piece's cycles on the
 * RTL and on the second fast model), X the fast cycles of all M:
 * R = sum_s y / sum_s x, estimate Y = R X (= the windows' RTL cycles plus
 * R times the others' fast cycles), variance (1 - n/M) max(V_lin, V_jk):
 * V_lin = M^2 / n * sum_s (y_i - R x_i)^2 / (n - 1) (the ratio estimator
 * of simple random sampling by linearization), V_jk = X^2 (n - 1) / n *
 * sum_j (R_(j) - mean R_(.))^2 (the jackknife: R_(j) without window j;
 * larger where a few windows decide R), 95% interval Y +- t(0.975, n - 1) SE.
 * Pieces: the same R, SE^2 = X^2 (1 - n / (M K)) max(s_e^2 / (n xbar^2),
 * the jackknife's variance of R) with xbar the pieces' mean fast cycles (a piece's ratio stands for its neighbourhood in the
 * run: a model assumption the figures in docs/results.md check). With n = M the
 * estimate is the RTL's own count (bound 0); with n < 2 and n < M the bound
 * is unknown, and the line says so.
 */
#ifndef TSR_SAMPLED_H
#define TSR_SAMPLED_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"

/* Which submissions are windows, from the spec string (tsr_device_opts_t.sample):
 *   "all"        every submission (the RTL's cycles are then exact)
 *   "every:K"    submissions 0, K, 2K, ... (K >= 1)
 *   "random:P"   each submission with probability P (0 < P <= 1), seeded
 *                (tsr_device_opts_t.sample_seed); given their number, the
 *                windows are a simple random sample of the submissions
 *   "pieces:P:K" each submission with probability P contributes a piece of
 *                about 1/K of its instructions from a random place, cut at
 *                a tile start (isa/tsr_piece.h); the piece runs on the RTL
 *                and on a second fast model from the submission's starting
 *                DRAM, their DRAM compared after; the windows are the pieces
 *   "none"       no window: the estimate is the fast model's cycles, bound unknown */
typedef enum { TSR_SAMPLE_ALL, TSR_SAMPLE_EVERY, TSR_SAMPLE_RANDOM, TSR_SAMPLE_NONE, TSR_SAMPLE_PIECES } tsr_sample_mode_e;

typedef struct tsr_sample_spec {
    int mode;       /* tsr_sample_mode_e */
    uint64_t every; /* K of every:K and pieces:P:K */
    double p;       /* P of random:P and pieces:P:K */
} tsr_sample_spec_t;

#define TSR_SAMPLE_DEFAULT "random:0.1"

/* Parse a spec (NULL = TSR_SAMPLE_DEFAULT): TSR_OK or TSR_EINVAL with one line naming the problem. */
int tsr_sample_parse(const char *spec, tsr_sample_spec_t *out);

/* What a submission's stream is, known before it runs: the window choice's
 * strata (a depthwise conv, a dense conv or matmul, ALU work alone, data
 * movement alone) and its size. */
typedef enum { TSR_SUB_MOVE, TSR_SUB_ALU, TSR_SUB_GEMM, TSR_SUB_DW, TSR_SUB_KINDS } tsr_sub_kind_e;

typedef struct tsr_sub_feat {
    int kind;            /* tsr_sub_kind_e: DW if a GEMM is depthwise, else GEMM if one computes, else ALU if any */
    uint64_t insns;      /* instructions */
    uint64_t gemm_iters; /* sum over computing GEMMs of uops x iter_out x iter_in */
    uint64_t alu_iters;  /* the same over ALU instructions */
    uint64_t loads, stores; /* LOAD and STORE instructions */
    uint64_t bound;      /* the cycle bound the driver passed */
} tsr_sub_feat_t;

/* The features of a stream of n instructions (the bound set by the caller). */
void tsr_sub_features(const tsr_insn_t *insns, size_t n, tsr_sub_feat_t *f);

/* One submission as the sampled device ran it. */
typedef struct tsr_sampled_sub {
    uint64_t fast_cycles;       /* the fast model's cycles */
    uint64_t rtl_cycles;        /* the RTL's, if a window (of its piece, if a piece; else 0) */
    int window;                 /* 1 if it (or its piece) ran on the RTL */
    int piece;                  /* 1 if the window is a piece */
    uint64_t piece_fast_cycles; /* the piece's cycles on the second fast model */
    uint64_t piece_insns;       /* the piece's instructions (prologue and FINISH included) */
    tsr_sub_feat_t feat;        /* what its stream is */
} tsr_sampled_sub_t;

/* The estimate over every submission since the device was opened (a
 * counter reset does not restart it: a benchmark that resets the counters
 * per layer still gets the whole run's estimate). */
typedef struct tsr_sampled_est {
    uint64_t submissions; /* M */
    uint64_t windows;     /* n (pieces in pieces mode) */
    int pieces;           /* 1 if the windows are pieces */
    uint64_t piece_k;     /* K of pieces:P:K */
    uint64_t piece_refused; /* windows drawn that found no cut (their submission counted without a piece) */
    uint64_t fast_cycles; /* X: the fast model's cycles of all M */
    uint64_t win_fast;    /* sum_s x */
    uint64_t win_rtl;     /* sum_s y */
    double ratio;         /* R (1 without windows) */
    double estimate;      /* Y: whole-run RTL cycles */
    double se;            /* standard error (0 when exact; < 0 when unknown) */
    double half95;        /* half width of the 95% interval (< 0 when unknown) */
    char why[160];        /* when the bound is unknown or exact: why */
    double rtl_s;         /* wall seconds in RTL windows */
    double fast_s;        /* wall seconds on the fast model */
    double handoff_s;     /* wall seconds copying and comparing DRAM */
    uint64_t handoff_bytes; /* bytes copied into the RTL device */
} tsr_sampled_est_t;

/* TSR_OK, or TSR_EINVAL if dev is not a sampled device. */
int tsr_sampled_estimate(tsr_device_t *dev, tsr_sampled_est_t *out);
/* The submissions the estimate covers (valid until the next submit or reset). */
int tsr_sampled_submissions(tsr_device_t *dev, const tsr_sampled_sub_t **subs, size_t *n);
/* "rtl cycles (sampled estimate): Y +- B (95%), n of M submissions on the RTL, fast model X",
 * the bound or why it is unknown never left out; no newline. */
const char *tsr_sampled_format(const tsr_sampled_est_t *e, char *buf, size_t n);
/* Print that line (and a newline) to f if dev is a sampled device; nothing otherwise. */
void tsr_sampled_print(tsr_device_t *dev, void *f);

extern const tsr_backend_ops_t tsr_backend_sampled;

#endif
