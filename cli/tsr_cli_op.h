/*
 * tsr_cli_op: the `tessera op OPERATOR ...` command. It runs one quantized
 * operator of jit/operators.md on a device (fsim or rtl) with operands read
 * from NumPy .npy files and writes the result as .npy, so that a layer can
 * be checked against a framework (NumPy, TFLite, onnxruntime) without
 * writing C. Kept out of cli/tessera.c because it is the largest command
 * and grows with every operator the JIT learns.
 *
 * The host program owns the device options (--dram-latency etc., shared by
 * every command that opens a device); it hands them over in tsr_cli_dev_t
 * so `op` accepts exactly the same flags as `run` and `bench`.
 */
#ifndef TSR_CLI_OP_H
#define TSR_CLI_OP_H

#include <getopt.h>

#include "tsr_driver.h"

typedef struct tsr_cli_dev {
    const struct option *long_opts;         /* the device long options, terminated by a zero entry */
    int (*handle)(int code, const char *arg); /* parse one: 1 done, -1 bad value, 0 not a device option */
    const tsr_device_opts_t *opts;          /* where handle() stores what it parsed (read after parsing) */
    const char *help;                       /* help text of the device options */
} tsr_cli_dev_t;

/* argv[0] is "op", argv[1] the operator. Returns the exit status: 0 ok,
 * 1 run-time error (file, shape, parameter, device), 2 usage error. Every
 * error is one line on stderr; the output file is written only on success
 * (atomically). */
int tsr_cli_op(int argc, char **argv, const tsr_cli_dev_t *dev);

#endif
