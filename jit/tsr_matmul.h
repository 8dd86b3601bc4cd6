/*
 * tsr_matmul: lowering of an int8 matrix multiply with requantization
 * (C = clamp(round(A x B / 2^shift), -128, 127)) into a task-instruction
 * stream, tiled to the configured buffers and double-buffered through the
 * dependency tokens so loads, compute and stores overlap. This is the
 * first JIT operator; conv2d and the others build on the same packing.
 *
 * Blocked DRAM layouts (one element = one on-chip row):
 *   A (M x K)  -> inp elements [M/BATCH][K/BLOCK_IN],    each [b][i]
 *   B (K x N)  -> wgt elements [N/BLOCK_OUT][K/BLOCK_IN], each [o][i] = B[k][n]
 *   C (M x N)  <- out elements [M/BATCH][N/BLOCK_OUT],   each [b][o]
 */
#ifndef TSR_MATMUL_H
#define TSR_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"

/* Bytes of the packed layouts. */
uint64_t tsr_matmul_a_bytes(const tsr_config_t *cfg, int m, int k);
uint64_t tsr_matmul_b_bytes(const tsr_config_t *cfg, int k, int n);
uint64_t tsr_matmul_c_bytes(const tsr_config_t *cfg, int m, int n);
/* Pack row-major int8 matrices into / out of the blocked layouts. */
void tsr_pack_a(const tsr_config_t *cfg, const int8_t *a, int m, int k, uint8_t *dst);
void tsr_pack_b(const tsr_config_t *cfg, const int8_t *b, int k, int n, uint8_t *dst);
void tsr_unpack_c(const tsr_config_t *cfg, const uint8_t *src, int m, int n, int8_t *c);

typedef struct tsr_matmul_prog {
    tsr_insn_t *insns;       /* instruction stream (owned) */
    size_t ninsns;           /* its length */
    uint64_t uop_addr;       /* device buffer holding the uop kernels (owned) */
    uint64_t gemm_ops;       /* tensor ops the stream performs */
    int tile_m, tile_n;      /* tile size in blocks */
} tsr_matmul_prog_t;

/* Check shapes (multiples of the tensor op; 8-bit config), build the
 * stream for device buffers a, b, c holding the packed layouts. */
int tsr_matmul_build(tsr_device_t *dev, uint64_t a, uint64_t b, uint64_t c, int m, int k, int n,
                     int shift, tsr_matmul_prog_t *prog);
void tsr_matmul_free(tsr_device_t *dev, tsr_matmul_prog_t *prog);

#endif
