/* tsr_cli_verify: `tessera verify PROGRAM.s`: statically check a program (isa/tsr_verify.h) on
 * the buffer contents `run` would give it. */
#ifndef TSR_CLI_VERIFY_H
#define TSR_CLI_VERIFY_H

/* argv[0] is "verify". Returns the exit status: 0 ok, 1 failure, 2 usage error. */
int tsr_cli_verify(int argc, char **argv);

#endif
