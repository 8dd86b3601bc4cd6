/* tsr_cli_net: `tessera net resnet18`: a whole network planned and run on a device
 * (jit/tsr_netbench.h): the per-layer table and the totals. */
#ifndef TSR_CLI_NET_H
#define TSR_CLI_NET_H

/* argv[0] is "net". Returns the exit status: 0 ok, 1 failure, 2 usage error. */
int tsr_cli_net(int argc, char **argv);

#endif
