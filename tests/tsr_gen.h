/*
 * tsr_gen: random program generator and differential-test harness.
 *
 * tsr_gen_program() builds a legal, token-correct, race-free random task
 * stream plus the DRAM image it runs on (input buffers with random bytes,
 * output buffers with random initial bytes, a uop buffer), deterministically
 * from a 64-bit seed. Every stream passes tsr_verify against its buffers;
 * the token protocol makes every legal stage interleaving produce the
 * in-order (reference) result, and no instruction reads an on-chip row that
 * the program has not written first (so a backend's power-on SRAM contents
 * never matter).
 *
 * The harness half runs a generated program on named executors (a driver
 * backend such as "fsim" or "rtl", or "ref" for the independent in-order
 * reference machine of tsr_ref.h), compares every output byte and, on a
 * mismatch, bisects over STORE-terminated prefixes of the stream to name the
 * first STORE whose output diverges.
 *
 * Compiled into the tests (never into libtessera) together with tsr_ref.c.
 */
#ifndef TSR_GEN_H
#define TSR_GEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_isa.h"

#define TSR_GEN_MAX_BUFS 8
#define TSR_GEN_BASE_ADDR 0x100000ull /* first buffer's device address */

/* Generation knobs; a zeroed struct (or NULL) means the defaults. */
typedef struct tsr_gen_opts {
    uint32_t min_insns;    /* shortest body before the closing sequence (0 = 24) */
    uint32_t max_insns;    /* longest body (0 = 140) */
    uint32_t max_loop_ops; /* cap on iter_out * iter_in * uops of one GEMM/ALU (0 = 256) */
    int no_empty_loops;    /* 1: no GEMM/ALU with an empty loop (iter 0 or uop_bgn == uop_end) */
    int no_noop_junk;      /* 1: x_size == 0 no-ops carry zeros in their other fields */
    int round_sizes;       /* 1: buffer sizes are multiples of 64 bytes (transfers still end
                              at element boundaries; for isolating bus-beat over-reads) */
} tsr_gen_opts_t;

/* One DRAM buffer of a generated program. */
typedef struct tsr_gen_buf {
    char name[8];       /* "inp", "wgt", "acc", "acc8", "out0", "out1", "uop" */
    uint32_t mem_type;  /* element type (TSR_MEM_*) the program addresses it as */
    uint64_t addr;      /* device byte address (4 KiB- and element-aligned) */
    uint64_t size;      /* bytes */
    uint8_t *bytes;     /* initial contents (owned) */
    int is_output;      /* written by STOREs; compared after a run */
} tsr_gen_buf_t;

typedef struct tsr_gen_prog {
    tsr_config_t cfg;             /* configuration it was generated for */
    uint64_t seed;                /* generator seed */
    tsr_insn_t *insns;            /* instructions, FINISH last (owned) */
    size_t ninsns;                /* entries in insns */
    size_t nbody;                 /* instructions before the closing sequence */
    tsr_gen_buf_t bufs[TSR_GEN_MAX_BUFS];
    size_t nbufs;                 /* entries used in bufs */
} tsr_gen_prog_t;

/* Generate a program. Returns TSR_OK, or a negative code with a message
 * (including TSR_EVERIFY if the generated stream failed tsr_verify, which
 * is a generator bug). opts may be NULL. Free with tsr_gen_free. */
int tsr_gen_program(uint64_t seed, const tsr_config_t *cfg, tsr_gen_opts_t *opts,
                    tsr_gen_prog_t *out);
void tsr_gen_free(tsr_gen_prog_t *p);
/* tsr_verify a stream over p's buffers (DRAM bounds against them, uop
 * indices and race footprints from their initial contents). */
int tsr_gen_verify(const tsr_gen_prog_t *p, const tsr_insn_t *insns, size_t n);

/* A random valid config as JSON text for tsr_config_parse: LOG_BATCH 0..1,
 * LOG_BLOCK_IN/OUT 1..4, 8/16-bit inputs and weights, 32-bit accumulators,
 * small buffers, DEP_QUEUE_DEPTH 1..8, CMD_QUEUE_DEPTH 2..32, and with
 * square blocks now and then DEPTHWISE (drawn last: a seed's other keys are
 * what they were before the key existed). On a config with DEPTHWISE most
 * generated GEMMs use the depthwise mode, with runs of consecutive src
 * (window reuse) and jumps. Returns TSR_OK or TSR_EINVAL if n is too small. */
int tsr_gen_random_config(uint64_t seed, char *json, size_t n);

/* cfg with ACT_LUT drawn from seed (0, 1, 2, 4 or 8, each a fifth of the
 * time) and json its tsr_gen_config_json text. The RTL has no activation
 * table unit and refuses such configs (tsr_emit_rtl_supported), so
 * tsr_gen_random_config never draws the key: callers whose backend runs it
 * (fsim, SystemC, the reference machine) add it with this. */
int tsr_gen_add_act_lut(uint64_t seed, tsr_config_t *cfg, char *json, size_t n);

/* The seed mixer (splitmix64 finaliser) test_difftest and tsr_soak share, so
 * a seed printed by one reproduces the same program and interleaving in the
 * other. */
uint64_t tsr_gen_mix(uint64_t x);
/* The JSON keys of cfg (reproduces it through tsr_config_parse). */
int tsr_gen_config_json(const tsr_config_t *cfg, char *json, size_t n);

/* Allocate every buffer at its address on dev and write its initial bytes. */
int tsr_gen_load(tsr_device_t *dev, const tsr_gen_prog_t *p);
/* Read every output buffer back: outs[i] is malloc'ed for output buffers,
 * NULL for the others. Free with tsr_gen_outputs_free. */
int tsr_gen_read_outputs(tsr_device_t *dev, const tsr_gen_prog_t *p,
                         uint8_t *outs[TSR_GEN_MAX_BUFS]);
void tsr_gen_outputs_free(uint8_t *outs[TSR_GEN_MAX_BUFS]);

/* Append to a program-order-valid prefix (every pop matched by an earlier
 * push, no queue above DEP_QUEUE_DEPTH, no FINISH) the no-op instructions
 * that drain every token queue, order the last load- and store-stage
 * instruction before FINISH, and end with FINISH. *out is malloc'ed. */
int tsr_gen_close_stream(const tsr_config_t *cfg, const tsr_insn_t *prefix, size_t n,
                         tsr_insn_t **out, size_t *nout);

/* ---- differential harness ---- */

/* Runs insns (a stream over p's buffers) on one executor and returns the
 * output buffers as tsr_gen_read_outputs does. */
typedef int (*tsr_gen_runner_fn)(void *ctx, const tsr_gen_prog_t *p, const tsr_insn_t *insns,
                                 size_t n, uint8_t *outs[TSR_GEN_MAX_BUFS]);

/* An executor: a driver backend with an fsim interleaving seed, "ref" for
 * the in-order reference machine, or a custom runner (tests). */
typedef struct tsr_gen_exec {
    const char *name;          /* backend name, or "ref"; label in reports */
    uint64_t seed;             /* tsr_device_opts_t.seed */
    tsr_gen_runner_fn run;     /* non-NULL overrides name-based dispatch */
    void *ctx;                 /* passed to run */
} tsr_gen_exec_t;

/* Cycles in which the compute stage's GEMM and ALU pipes both issued an op,
 * summed over every run on a backend with hardware counters (coverage of the
 * dual-issue path). */
extern uint64_t tsr_gen_dual_ops;

int tsr_gen_run(const tsr_gen_exec_t *e, const tsr_gen_prog_t *p, const tsr_insn_t *insns,
                size_t n, uint8_t *outs[TSR_GEN_MAX_BUFS]);

/* First differing output byte of two runs. */
typedef struct tsr_gen_diff {
    size_t buf;          /* index into p->bufs */
    uint64_t offset;     /* byte offset in that buffer */
    uint8_t a, b;        /* the two values */
    uint64_t nbytes;     /* how many bytes of all outputs differ */
} tsr_gen_diff_t;

/* 0 if every output byte agrees, 1 (and *d filled) otherwise. */
int tsr_gen_compare(const tsr_gen_prog_t *p, uint8_t *const a[TSR_GEN_MAX_BUFS],
                    uint8_t *const b[TSR_GEN_MAX_BUFS], tsr_gen_diff_t *d);

/* Bisect over prefixes of p's body that end at a STORE (each closed with
 * tsr_gen_close_stream) for the first STORE whose prefix output differs
 * between a and b, assuming the full program differs. *store_idx is its
 * instruction index, or (size_t)-1 if no STORE prefix differs (the
 * divergence is only visible in the full program). *d is the diff of that
 * prefix. Returns TSR_OK or a run error. */
int tsr_gen_bisect(const tsr_gen_prog_t *p, const tsr_gen_exec_t *a, const tsr_gen_exec_t *b,
                   size_t *store_idx, tsr_gen_diff_t *d);

/* Run p on every executor in execs[0..n) and compare each with execs[0].
 * On a mismatch print to log (if non-NULL) the seed, config, buffer, first
 * differing byte with both values, then bisect and print the first
 * diverging STORE with its disassembly. Returns 0 if all agree, 1 on a
 * mismatch, or a negative code if a run failed (message printed too). */
int tsr_gen_difftest(const tsr_gen_prog_t *p, const tsr_gen_exec_t *execs, size_t n, FILE *log);

#endif
