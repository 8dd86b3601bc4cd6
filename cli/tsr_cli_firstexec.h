/* tsr_cli_firstexec: `tessera bench --kind first-exec`: a network's first
 * execution, timing-only SystemC against fsim, each in a fresh process. */
#ifndef TSR_CLI_FIRSTEXEC_H
#define TSR_CLI_FIRSTEXEC_H

/* argv[0] is "bench". Returns the exit status: 0 ok, 1 failure, 2 usage error. */
int tsr_cli_bench_firstexec(int argc, char **argv);

#endif
