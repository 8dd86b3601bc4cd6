/*
 * tsr_testenv: what the operator tests share to pick the backend, open a
 * device for a named config and draw random numbers, so every test file
 * opens devices and seeds its cases the same way.
 */
#ifndef TSR_TESTENV_H
#define TSR_TESTENV_H

#include <stdint.h>

#include "tsr_config.h"
#include "tsr_driver.h"

/* TSR_TEST_BACKEND, or "fsim". */
const char *tsr_test_backend(void);
/* The seed in environment variable env (decimal or 0x hex), else dflt. */
uint64_t tsr_test_seed(const char *env, uint64_t dflt);
/* Config by name: "b2" (BATCH 2, 4x4 blocks), "rect" (BLOCK_IN 8 x
 * BLOCK_OUT 4), else a preset or JSON file. Returns a tsr error code. */
int tsr_test_config(const char *name, tsr_config_t *cfg);
/* A device on tsr_test_backend() for config name; fsim interleaves the
 * stages randomly with seed (a missing token shows as a wrong result).
 * Fails the running cmocka test on error. */
tsr_device_t *tsr_test_open(const char *name, uint64_t seed);
/* splitmix64 step, and a uniform integer in [lo, hi]. */
uint64_t tsr_test_next(uint64_t *s);
int tsr_test_rnd(uint64_t *s, int lo, int hi);

#endif
