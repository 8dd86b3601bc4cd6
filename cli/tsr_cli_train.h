/*
 * tsr_cli_train: `tessera train MODEL.onnx --data X.npy --labels Y.npy
 * --epochs N --trainable LAYERS -o TUNED.onnx`: fine-tune a quantized QDQ
 * model's last layers on the device (train/tsr_train.h), a progress line
 * per epoch, the measures at the end, the tuned model written atomically.
 */
#ifndef TSR_CLI_TRAIN_H
#define TSR_CLI_TRAIN_H

#include "tsr_cli_common.h"

/* argv[0] is "train". Returns the exit status: 0 ok, 1 failure while training, 2 bad input
 * (refused before training; the output untouched). */
int tsr_cli_train(int argc, char **argv, const tsr_cli_dev_t *dev);

#endif
