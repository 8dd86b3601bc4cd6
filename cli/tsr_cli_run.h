/* tsr_cli_run: `tessera run PROGRAM.s`: assemble a program, run it on a device, write its
 * output buffers and print the counters. */
#ifndef TSR_CLI_RUN_H
#define TSR_CLI_RUN_H

/* argv[0] is "run". Returns the exit status: 0 ok, 1 failure, 2 usage error. */
int tsr_cli_run(int argc, char **argv);

#endif
