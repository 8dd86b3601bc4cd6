/*
 * tsr_verify: static verifier for task-instruction streams. Rejects, with
 * the instruction index and reason:
 *  - illegal dependency flags for the instruction's stage, token imbalance,
 *    streams that would deadlock, a missing or misplaced FINISH, and
 *    load/store work not ordered before FINISH (via tsr_pipe);
 *  - memory types not allowed for the opcode, padding on STORE/UOP loads;
 *  - SRAM rows, uop ranges and loop extents outside the configured buffers
 *    (GEMM/ALU indices are checked against the actual uop contents when
 *    the caller can read DRAM);
 *  - a GEMM/ALU reading a uop row that no earlier uop LOAD of the stream
 *    wrote (its contents would be whatever the device holds);
 *  - DRAM accesses outside the buffers the program declared;
 *  - self-modifying streams: a STORE into DRAM bytes that a uop LOAD of the
 *    stream reads (the indices were checked on the contents before the run);
 *  - data races: two accesses to the same inp/wgt/out row or DRAM byte, one
 *    a write, by instructions of different stages that no token chain
 *    orders (via tsr_hb, on the same dry run; GEMM/ALU footprints need the
 *    uop contents).
 * Cost: linear in the stream (uop rows loaded, instructions, rows touched).
 */
#ifndef TSR_VERIFY_H
#define TSR_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_isa.h"

/* A declared DRAM buffer: bytes [addr, addr + size). */
typedef struct tsr_region {
    uint64_t addr;           /* device byte address */
    uint64_t size;           /* bytes */
    const char *name;        /* for messages; may be NULL */
} tsr_region_t;

/* Read n bytes of device DRAM at addr into dst; TSR_OK or negative. */
typedef int (*tsr_mem_read_fn)(void *ctx, uint64_t addr, void *dst, size_t n);

typedef struct tsr_verify_opts {
    const tsr_region_t *regions; /* declared buffers */
    size_t nregions;             /* entries in regions */
    int check_dram;              /* 1: every DRAM access must lie in one region */
    tsr_mem_read_fn read;        /* reads uop contents for index checks; NULL skips them */
    void *read_ctx;              /* passed to read */
} tsr_verify_opts_t;

/* Returns TSR_OK or TSR_EVERIFY / TSR_EDEADLOCK with a message
 * "insn #N (op): reason". opts may be NULL (no DRAM or uop-content checks). */
int tsr_verify(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n,
               const tsr_verify_opts_t *opts);

#endif
