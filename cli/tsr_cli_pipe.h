/* tsr_cli_pipe: `tessera net resnet18 --devices K`: the network split by the
 * optimal planner and pipelined over K devices (jit/tsr_pipeexec.h). */
#ifndef TSR_CLI_PIPE_H
#define TSR_CLI_PIPE_H

/* argv[0] is "net" and argv has --devices. Returns the exit status: 0 ok,
 * 1 failure or an output that differs from the single-device run, 2 usage error. */
int tsr_cli_net_devices(int argc, char **argv);
/* `tessera infer MODEL.onnx -i INPUT.npy --devices K`: the same over the
 * model's device operators (argv[0] is "infer"). */
int tsr_cli_infer_devices(int argc, char **argv);

#endif
