/* tsr_cli_demo: `tessera demo`: an int8 matmul with requantization on a device, checked
 * element by element against the host (jit/tsr_mmbench.h). */
#ifndef TSR_CLI_DEMO_H
#define TSR_CLI_DEMO_H

/* argv[0] is "demo". Returns the exit status: 0 ok, 1 failure, 2 usage error. */
int tsr_cli_demo(int argc, char **argv);

#endif
