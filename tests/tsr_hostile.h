/*
 * tsr_hostile: the hostile mode of tsr_soak (tsr_soak --hostile): mutated
 * generator streams, verification off, on one long-lived fsim device and
 * one long-lived device of another backend (the RTL), comparing verdict
 * and output bytes. Also the mutation and the on-chip scrub it uses.
 * Compiled into the tests only.
 */
#ifndef TSR_HOSTILE_H
#define TSR_HOSTILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_isa.h"

/* Mutate insns[0..*n) (capacity cap >= *n + 3) 1-3 times with the seed;
 * describes what was done in desc. */
void tsr_hostile_mutate(const tsr_config_t *cfg, uint64_t seed, tsr_insn_t *insns, size_t *n, size_t cap,
                        char *desc, size_t ndesc);
/* Zero every on-chip buffer of dev (uop, inp, wgt, acc, out) with a short
 * valid stream over a driver-allocated zero element. */
int tsr_hostile_scrub(tsr_device_t *dev);
/* A soak's share of the programs: program i (seed S + i) of [0, count) is
 * this shard's when i % count == index (tsr_soak --shard I/N). Striding keeps
 * every program's seed, and its random config, what the serial run gives it,
 * so N shards run exactly the serial soak's programs between them. */
typedef struct tsr_shard {
    uint64_t index, count; /* index < count; {0, 1} is the whole soak */
} tsr_shard_t;

/* Streams i of [0, count) in shard, seed + i each, on config cfg: fsim vs
 * backend. Prints the first disagreements and "N streams, M disagreements"
 * (N: the shard's streams); returns 0 if none. */
int tsr_hostile_soak(const tsr_config_t *cfg, const char *backend, uint64_t seed, uint64_t count,
                     const tsr_shard_t *shard, int quiet, FILE *log);

#endif
