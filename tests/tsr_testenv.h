/*
 * tsr_testenv: what the operator tests share to pick the backend, open a
 * device for a named config and draw random numbers, so every test file
 * opens devices and seeds its cases the same way.
 */
#ifndef TSR_TESTENV_H
#define TSR_TESTENV_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_conv2d.h"
#include "tsr_driver.h"
#include "tsr_isa.h"
#include "tsr_netdesc.h"
#include "tsr_pipeplan.h"

/* Run `CLI ARGS` through the shell (stderr joined to stdout): its output in buf (cap bytes, NUL-terminated,
 * cut at cap - 1), its exit status returned (-1 when it did not exit). Fails the running cmocka test when
 * the command cannot be started. */
int tsr_test_run_cli(const char *cli, const char *args, char *buf, size_t cap);
/* The planning problem of the small ResNet-18 (tsr_netdesc_resnet18_small(3, 1, 32, 16, 10)) on k
 * devices of the default config (1 GiB DRAM each) and a link of bw bytes per cycle plus 500 cycles, with
 * the JIT's costs: *cfg, *nd and *pp set; fails the running cmocka test on error. */
void tsr_test_small_resnet_problem(int k, double bw, tsr_config_t *cfg, tsr_netdesc_t *nd, tsr_pp_t **pp);
/* The same for a whole shell command line (its own redirections). */
int tsr_test_run_cmd(const char *cmd, char *buf, size_t cap);
/* TSR_TEST_BACKEND, or "fsim". */
const char *tsr_test_backend(void);
/* The seed in environment variable env (decimal or 0x hex), else dflt. */
uint64_t tsr_test_seed(const char *env, uint64_t dflt);
/* Config by name: "b2" (BATCH 2, 4x4 blocks), "rect" (BLOCK_IN 8 x
 * BLOCK_OUT 4), "PRESET+exact" (the preset with EXACT_REQUANT = 1),
 * "PRESET+lutN" (the preset with ACT_LUT = N: "default+lut0" is the default
 * without its activation tables), else a preset or JSON file. Returns a tsr
 * error code. */
int tsr_test_config(const char *name, tsr_config_t *cfg);
/* A preset with one more integer key (e.g. "ACT_LUT", 4); fails the test
 * naming both when the config is refused. */
void tsr_test_preset_with(const char *preset, const char *key, int value, tsr_config_t *cfg);
/* A device on tsr_test_backend() for config name; fsim interleaves the
 * stages randomly with seed (a missing token shows as a wrong result).
 * Fails the running cmocka test on error. */
tsr_device_t *tsr_test_open(const char *name, uint64_t seed);
/* A device buffer holding uops[0..n) encoded (what a stream's uop LOAD
 * reads: the verifier rejects GEMM/ALU uop rows the stream did not load).
 * Returns its address; fails the running cmocka test on error. */
uint64_t tsr_test_uops(tsr_device_t *dev, const tsr_uop_t *uops, size_t n);
/* s[0..4): out[0] = v (ALU mov with an immediate over one loaded all-zero
 * uop), stored to DRAM element addr / out_bytes, the STORE ordered before
 * FINISH: LOAD uop, ALU, STORE, FINISH. Allocates the uop buffer on dev. */
void tsr_test_mov_store(tsr_device_t *dev, tsr_insn_t s[4], uint64_t addr, int v);
/* Plan the convolution p on a fresh device of backend, write its weights
 * w and bias and an all-zero input (timing does not depend on values),
 * run it: *cost is the JIT's estimate (plan.cost), *cycles the device's,
 * *cpu_s (if not NULL) the process CPU seconds of the run alone.
 * Returns a tsr error code (message set). */
int tsr_test_conv_cycles(const char *backend, const tsr_config_t *cfg, const tsr_conv2d_params_t *p, const void *w,
                         const int32_t *bias, double *cost, uint64_t *cycles, double *cpu_s);
/* A LOAD or STORE (op) of memory type m: one row of n elements from DRAM
 * byte address addr (elements of `bytes` bytes) at on-chip row sram, no
 * padding or flags. */
tsr_insn_t tsr_test_mem_insn(uint32_t op, uint32_t m, uint32_t sram, uint64_t addr, uint32_t bytes, uint32_t n);
/* splitmix64 step, and a uniform integer in [lo, hi]. */
uint64_t tsr_test_next(uint64_t *s);
int tsr_test_rnd(uint64_t *s, int lo, int hi);
/* Run nd (one input of in_bytes, random from *rs; its output of out_bytes)
 * as a graph planned on dev and compare every output byte with the
 * independent reference tsr_netref_run; a layer of op must be in the plan
 * (the operator under test really ran). Fails the test (what: the case). */
void tsr_test_graph_vs_netref(tsr_device_t *dev, const tsr_netdesc_t *nd, size_t in_bytes, size_t out_bytes,
                              uint64_t *rs, const char *op, const char *what);

#endif
