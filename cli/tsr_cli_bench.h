/* tsr_cli_bench: `tessera bench`: the matmul, GEMM-bound and ResNet-18 layer measurements
 * (jit/tsr_mmbench.h, jit/tsr_netbench.h), printed as tables. */
#ifndef TSR_CLI_BENCH_H
#define TSR_CLI_BENCH_H

/* argv[0] is "bench". Returns the exit status: 0 ok, 1 failure, 2 usage error. */
int tsr_cli_bench(int argc, char **argv);

#endif
