/*
 * tsr_mmbench: the matrix-multiply measurements behind `tessera demo` and
 * `tessera bench` (--kind matmul and gemm): the JIT's tiled int8 matmul on
 * a device with its host reference, and a GEMM-bound stream that measures
 * the GEMM core with its operands on chip. In the library so a C program
 * gets the same figures as the CLI, which only parses flags and prints.
 */
#ifndef TSR_MMBENCH_H
#define TSR_MMBENCH_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_matmul.h"

typedef struct tsr_mmbench_opts {
    const char *cfgname, *backend;
    const tsr_device_opts_t *dev; /* device options (NULL: defaults); rtl.verbose is set */
    int m, k, n;                  /* matmul sizes; gemm: the tile and reduction asked for */
    int shift;                    /* requantization shift */
    long reps;                    /* gemm: GEMM instructions */
    uint64_t seed;                /* gemm: operand data */
} tsr_mmbench_opts_t;

/* A matmul run. */
typedef struct tsr_mmbench_result {
    double secs;             /* wall time of submit + wait */
    tsr_counters_t ctr;      /* the device's counters */
    tsr_matmul_prog_t info;  /* the stream's shape (insns NULL: freed) */
    uint64_t macs_per_op;    /* the config's peak MACs per cycle */
} tsr_mmbench_result_t;

/* Fill a (na bytes) then b (nb bytes) from seed (splitmix64). */
void tsr_mmbench_random(uint64_t seed, int8_t *a, size_t na, int8_t *b, size_t nb);

/* C = clamp(round(A x B / 2^shift)) on a device (A m x k, B k x n, row
 * major); c gets m x n. */
int tsr_mmbench_matmul(const tsr_mmbench_opts_t *o, const int8_t *a, const int8_t *b, int8_t *c,
                       tsr_mmbench_result_t *r);

/* Compare c with the host reference (naive loops, round half away from
 * zero, saturate): the number of differing elements; the first one's
 * place and reference value in *fi, *fj, *ref. */
size_t tsr_mmbench_check(const int8_t *a, const int8_t *b, const int8_t *c, size_t m, size_t k, size_t n, int shift,
                         size_t *fi, size_t *fj, int64_t *ref);

/* A GEMM-bound run: tile and reduction clipped to the buffers and fields. */
typedef struct tsr_mmbench_gemm {
    long tm, tn, kb;        /* tile in blocks, reduction in blocks */
    tsr_counters_t load;    /* the run that loads the operands */
    tsr_counters_t ctr;     /* the GEMM run */
    double load_s;          /* wall time of the load run */
    double secs, cpu_s;     /* wall and process CPU time of the GEMM run */
} tsr_mmbench_gemm_t;

/* Run 1 loads inputs and weights (on-chip buffers keep their contents
 * between runs); run 2 issues o->reps GEMMs over the tile, the loop nest
 * the matmul JIT emits, so its cycles measure the GEMM core alone. */
int tsr_mmbench_gemm(const tsr_mmbench_opts_t *o, tsr_mmbench_gemm_t *g);

#endif
