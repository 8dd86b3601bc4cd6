/*
 * tsr_cli_op: the `tessera op OPERATOR ...` command. It runs one quantized
 * operator of jit/operators.md on a device (fsim or rtl) with operands read
 * from NumPy .npy files and writes the result as .npy, so that a layer can
 * be checked against a framework (NumPy, TFLite, onnxruntime) without
 * writing C.
 *
 * The device options (--dram-latency etc., shared by every command that
 * opens a device, cli/tsr_cli_common.c) come in tsr_cli_dev_t, so `op`
 * accepts exactly the same flags as `run` and `bench`.
 */
#ifndef TSR_CLI_OP_H
#define TSR_CLI_OP_H

#include "tsr_cli_common.h" /* tsr_cli_dev_t: the device options */

/* argv[0] is "op", argv[1] the operator. Returns the exit status: 0 ok,
 * 1 run-time error (file, shape, parameter, device), 2 usage error. Every
 * error is one line on stderr; the output file is written only on success
 * (atomically). */
int tsr_cli_op(int argc, char **argv, const tsr_cli_dev_t *dev);

#endif
