/* tsr_cli_demo: `tessera demo` (tsr_cli_demo.h). */
#include "tsr_cli_demo.h"

#include <stdlib.h>

#include "tsr_cli_common.h"
#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_mmbench.h"

static const char *demo_help =
    "usage: tessera demo [--config CONFIG] [--backend NAME] [-m M] [-k K] [-n N]\n"
    "                    [--shift S] [--seed N]\n"
    "\n"
    "Run an int8 matrix multiply with requantization, C = clamp(round(A x B /\n"
    "2^S), -128, 127), on the device through the driver and the JIT, and\n"
    "compare every element with a plain C computation on the host. Prints\n"
    "the counters and PASS, or the first mismatching element and FAIL.\n"
    "  -m, -k, -n        matrix sizes (default 256, 256 or the longest K\n"
    "                    the buffers hold, 256; multiples of the config's\n"
    "                    BATCH, BLOCK_IN, BLOCK_OUT)\n"
    "  --shift S         requantization shift (default 8)\n"
    "  --seed N          random data seed (default 1)\n"
    "  --config, --backend as for `run`\n" TSR_CLI_DEVICE_OPTIONS_HELP;

/* Default K: 256, or the longest reduction the matmul lowering keeps on
 * chip for this config (half the input and weight buffers). */
static int default_k(tsr_cli_mm_opts_t *mo)
{
    tsr_config_t cfg;
    if (tsr_config_load(mo->b.cfgname, &cfg))
        return -1;
    uint32_t rows = (cfg.inp_depth < cfg.wgt_depth ? cfg.inp_depth : cfg.wgt_depth) / 2;
    mo->k = 256 < (long)rows * cfg.block_in ? 256 : (long)rows * cfg.block_in;
    return 0;
}

/* Run, compare and print; the exit status. */
static int demo(const tsr_cli_mm_opts_t *mo, int8_t *a, int8_t *b, int8_t *c)
{
    size_t m = (size_t)mo->m, k = (size_t)mo->k, n = (size_t)mo->n;
    tsr_mmbench_opts_t o = {mo->b.cfgname, mo->b.backend, &tsr_cli_devopts, (int)m, (int)k, (int)n, (int)mo->shift,
                            0, 0};
    tsr_mmbench_result_t r;
    tsr_mmbench_random(mo->b.seed, a, m * k, b, k * n);
    printf("tessera demo: C = clamp(round(A x B / 2^%ld)), A %zux%zu, B %zux%zu, int8, config %s, backend %s\n",
           mo->shift, m, k, k, n, mo->b.cfgname, mo->b.backend);
    int rc = tsr_mmbench_matmul(&o, a, b, c, &r);
    if (rc)
        return tsr_cli_fail(rc);
    size_t fi = 0, fj = 0;
    int64_t ref = 0;
    size_t bad = tsr_mmbench_check(a, b, c, m, k, n, (int)mo->shift, &fi, &fj, &ref);
    if (bad)
        printf("first mismatch at C[%zu][%zu]: device %d, reference %lld\n", fi, fj, c[fi * n + fj], (long long)ref);
    printf("%zu instructions, %llu tensor ops (%llu MACs), tiles of %dx%d blocks, %.3f s\n", r.info.ninsns,
           (unsigned long long)r.ctr.gemm_ops, (unsigned long long)r.ctr.macs, r.info.tile_m, r.info.tile_n, r.secs);
    tsr_counters_print(&r.ctr, stdout);
    if (bad) {
        printf("FAIL: %zu of %zu elements differ from the host reference\n", bad, m * n);
        return 1;
    }
    printf("PASS: all %zu elements match the host reference\n", m * n);
    return 0;
}

int tsr_cli_demo(int argc, char **argv)
{
    tsr_cli_mm_opts_t mo = {.b = {.cfgname = "default", .backend = "fsim", .seed = 1}, .m = 256, .k = 0, .n = 256,
                            .shift = 8};
    int r = tsr_cli_mm_parse(argc, argv, "demo", demo_help, &mo);
    if (r)
        return r == -2 ? 0 : 2;
    if (!mo.k && default_k(&mo))
        return tsr_cli_fail(TSR_ECONFIG);
    size_t m = (size_t)mo.m, k = (size_t)mo.k, n = (size_t)mo.n;
    int8_t *a = malloc(m * k), *b = malloc(k * n), *c = malloc(m * n);
    int status = a && b && c ? demo(&mo, a, b, c) : tsr_cli_fail(tsr_err(TSR_ENOMEM, "out of memory"));
    free(a);
    free(b);
    free(c);
    return status;
}
