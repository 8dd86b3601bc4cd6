/*
 * tsr_cli_infer: `tessera infer MODEL.onnx -i IN.npy -o OUT.npy`, running a
 * quantized ONNX model (onnx/tsr_onnx.h) with the device doing the
 * quantized operators and the host the rest; prints the placement of every
 * node and the per-layer table of the device part.
 */
#ifndef TSR_CLI_INFER_H
#define TSR_CLI_INFER_H

#include "tsr_cli_op.h"

/* argv[0] is "infer". Returns the exit status: 0 ok, 1 failure, 2 usage. */
int tsr_cli_infer(int argc, char **argv, const tsr_cli_dev_t *dev);

#endif
