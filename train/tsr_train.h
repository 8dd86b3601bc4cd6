/*
 * tsr_train: on-device training (issue 27). Fine-tune the last layers of a
 * quantized QDQ ONNX model on the accelerator and write the tuned model.
 *
 * What runs where. The frozen prefix (every operator before the first
 * trainable layer) runs once per sample as inference through the importer
 * (tsr_onnx, on the device, the boundary tensor read with
 * TSR_ONNX_KEEP_ALL): its output does not change while training. The
 * trainable part (from the first trainable layer to the logits: conv
 * (groups 1 or depthwise, any stride), dense, max, average and global
 * average pool and add operators, a DAG whose layers read the part's one
 * input or the outputs of layers before them, then the host
 * DequantizeLinear and an optional Softmax) runs per batch: forward on the device with the
 * current int8 weights and ONNX Runtime's requantization as the importer
 * forms it (tsr_conv2d_run, tsr_dense_run, tsr_pool_run), activations kept
 * on the host; softmax cross-entropy on the host on the dequantized logits;
 * backward: each output gradient quantized per tensor to int8 (symmetric,
 * scale max|g| / 127), dW = dY^T X and dX = dY W as int8 GEMMs with exact
 * int32 sums on the device (jit/tsr_grad.h), dequantized with the scales;
 * ReLU/ReLU6 masks, max pool routing, average pools' even spread, a
 * residual add's gradient to both inputs (summed where branches meet) and
 * bias sums on the host (no MACs).
 * Update: SGD with momentum (torch's: v = mu v + g, w -= lr v) on a float32
 * master copy of the trainable weights and biases, then the weights
 * re-quantized on the file's own grid (symmetric int8, per tensor or per
 * output channel as the file has it, the file's scales kept, the master
 * copy clamped to the range they hold: [-128, 127.5] steps, as the device
 * update's), the biases to int32 at x_scale * w_scale, the
 * requantization multipliers formed again. With weight_bits 16 the
 * training forward of the trained convs and denses sees the master copy
 * on a 256x finer grid (two int8 parts, two exact int32 GEMMs on the
 * device, jit/tsr_grad.h tsr_grad_*_fwd), the tuned file the int8 part.
 *
 * Why a float32 master copy: one step changes a weight by lr * g, mostly
 * far below half a step of its int8 grid (digits fc: w_scale 3.4e-3, lr *
 * g ~ 1e-5..1e-4), so an update rounded to int8 every step is lost
 * (rounds to 0); the master copy accumulates it until it moves the int8
 * value. Lin et al. (NeurIPS 2022) instead scale the gradient
 * (quantization-aware scaling) and update int8 weights directly; see
 * docs/guide/train-on-device.md for what was measured.
 *
 * Refused before training, one message naming the node, op or parameter:
 * an unknown layer name, a layer without weights named trainable, a layer
 * of the trainable part with no backward here (anything but conv groups 1
 * or depthwise, dense, max/average pool, add; a layer reading a tensor
 * computed before the part other than its input), weights that are not symmetric int8
 * constants of a QDQ node, bad options (learning rate or momentum not
 * finite or negative, an update step that would overflow the int32 bias,
 * epochs 0 or over 1000, batch 0 or over the data), and bad data (shape or
 * dtype not the model's input, non-finite values, labels not one per
 * sample or out of range).
 */
#ifndef TSR_TRAIN_H
#define TSR_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "tsr_driver.h"
#include "tsr_npy.h"
#include "tsr_onnx.h"
#include "tsr_onnx_tune.h"

#define TSR_TRAIN_MAX_EPOCHS 1000
#define TSR_TRAIN_MAX_BATCH 1024
#define TSR_TRAIN_MAX_SAMPLES 1000000
#define TSR_TRAIN_WEIGHT_BITS_DEFAULT 8 /* tsr_train_opts_t.weight_bits 0 */

typedef struct tsr_train_opts {
    const char *trainable;  /* "fc,conv2" (node names, their first path component, weight names) or "last:K" */
    int epochs;             /* 1..TSR_TRAIN_MAX_EPOCHS */
    int batch;              /* 1..TSR_TRAIN_MAX_BATCH, at most the samples */
    double lr;              /* learning rate, finite and > 0 */
    double momentum;        /* [0, 1) */
    uint64_t seed;          /* the order of the samples (splitmix64 Fisher-Yates per epoch) */
    int host_backward;      /* 1: the backward GEMMs on the host (plain C, the reference), not the device */
    int int8_update;        /* 1: no float32 master copy: the int8 weights updated in place on their fixed grid
                               (w_q -= round(lr v / w_scale): Lin et al.'s quantization-aware scaling, the
                               gradient of w_q times w_scale^-2), the int32 bias likewise; the measurement of
                               why the master copy is there */
    int device_update;      /* 1: the update on the device ALU, exact in int32 (jit/tsr_sgd.h): per trained layer
                               the master copy as int32 fixed point on the int8 grid (w / w_scale * 2^15, the
                               scales fixed as with int8_update) and its momentum, resident in device DRAM; per
                               step g = the exact int32 dW sums times a per-tensor multiplier (s_dy * x_scale /
                               w_scale * 2^15), v = mu v + g, w_m -= lr v, the int8 weights round(w_m / 2^15); the
                               bias likewise over its x_scale * w_scale grid (its gradient the int8 dy's sums).
                               Per-tensor weight scales only; not with weight_bits 16, weight_stochastic or
                               grad_split */
    int grad_stochastic;    /* 1: the int8 gradients rounded stochastically (floor(g / s + u), u uniform in [0, 1)
                               from splitmix64 seeded by seed: unbiased, as Lin et al. suggest), 0: to nearest */
    int grad_split;         /* 1: each gradient as two int8 tensors, hi on max|g| / 127 and the residual lo on
                               that / 254 (~15 bits), each backward GEMM done twice on the device (twice the
                               backward MACs); 0 (default): one int8 tensor */
    int weight_stochastic;  /* 1: the master copy re-quantized for the training forward with stochastic rounding
                               (floor(w / s + u), u uniform in [0, 1) from splitmix64 seeded by seed; unbiased:
                               a change of the master below half a step of the int8 grid moves the forward in
                               expectation), the tuned file's weights to nearest at the end; 0: to nearest */
    int weight_bits;        /* the training forward's weights of the trained convs and denses: 8 (the int8 weights
                               the tuned file gets), 16: the master copy on a 256x finer grid, w_scale / 256, as
                               two int8 parts (hi: the int8 weights, lo: the residual) run as two exact int32
                               GEMMs on the device (jit/tsr_grad.h, tsr_grad_*_fwd) joined on the host in int64
                               and requantized there; the tuned file's weights are hi. 0: the default (8: on the
                               zoo's ResNet-18 16 gains 0.21 +- 0.54 points over 12 seeds, docs/results.md) */
    int weight_refit;       /* 1: each step re-fits the trained weights' scales to max|w| / 127.5 of the master copy
                               (the rule before 115d2f1); 0 (default): the file's scales kept, the master copy
                               clamped to the range they hold, [-128, 127.5] steps (as device_update) */
    int logits_fixed;       /* 1: the logits keep the file's quantization range; 0 (default): a MinMax observer
                               widens it when a batch's logits saturate it (see tsr_train_step.c) */
    int loss_exact;         /* 0 (default): the loss on the dequantized 8-bit logits the device writes; 1: where
                               the last layer is a dense with no folded Relu/Clip, on its exact real outputs
                               (its int32 sums on the host, M*K MACs a sample), as float training sees them.
                               Measured on the zoo's ResNet-18 (docs/results.md): no gain over six seeds */
    FILE *progress;         /* a line per epoch (NULL: none) */
    tsr_onnx_opts_t place;  /* the importer's placement options (tessera train --place; zero: the defaults) */
} tsr_train_opts_t;

/* What a run measured (tsr_train_run fills it). */
typedef struct tsr_train_stats {
    int epochs;
    double loss[TSR_TRAIN_MAX_EPOCHS];      /* mean loss of each epoch */
    double accuracy[TSR_TRAIN_MAX_EPOCHS];  /* accuracy on the training data during each epoch */
    uint64_t epoch_cycles[TSR_TRAIN_MAX_EPOCHS]; /* device cycles of each epoch (0 on fsim: untimed) */
    double epoch_wall[TSR_TRAIN_MAX_EPOCHS];     /* wall seconds of each epoch */
    uint64_t bwd_device_macs, bwd_host_macs;     /* backward GEMM MACs on the device and on the host */
    uint64_t fwd_device_macs;                    /* forward MACs of the trainable part on the device */
    uint64_t feat_cycles;                        /* the frozen prefix, all samples once (inference) */
    uint64_t step_cycles;                        /* one training step of a full batch: forward + backward of the
                                                    trainable part (mean over the full batches of the last epoch) */
    uint64_t step_fwd_cycles, step_bwd_cycles;   /* its two parts */
    uint64_t infer_cycles;                       /* one inference of the whole model on a full batch */
    uint64_t infer_prefix_cycles;                /* the frozen layers' share of it (their rows of the report) */
    uint64_t peak_infer;                         /* device DRAM high-water mark: the whole model's inference */
    uint64_t peak_train;                         /* ... the training steps (the features excluded: inference) */
    uint64_t mem_held;                           /* of it, held when the steps start (the kernel cache's uop
                                                    buffers of the kernels planned before) */
    uint64_t host_act_bytes;                     /* host bytes of the activations kept for the backward pass */
    uint64_t feat_bytes;                         /* host bytes of the frozen features of all samples */
    double feat_wall;                            /* wall seconds of the features */
    uint64_t upd_n, upd_moved;                   /* int8_update, device_update: weight updates, those that moved an
                                                    int8 value */
    uint64_t upd_cycles;                         /* device_update: device cycles of one step's update (mean over
                                                    the steps of the last epoch) */
    int range_obs;                               /* the logits' range observer is on (0: fixed, or not possible) */
    int range_moves;                             /* times it widened the range */
    float range_lo0, range_hi0, range_lo, range_hi; /* the logits' real range: the file's, and the tuned one's */
    int loss_exact;                              /* the loss on the exact logits (tsr_train_opts_t.loss_quantized) */
    uint64_t loss_host_macs;                     /* their host MACs */
    uint64_t range_host_macs;                    /* the observer's MACs on the host (exact int32 logits of the
                                                    batches that saturated) */
} tsr_train_stats_t;

typedef struct tsr_trainer tsr_trainer_t;

/* Load the model (batch opts->batch) and choose the trainable part on dev
 * (its config): every refusal about the model and the options is here. */
int tsr_train_open(const char *model_path, tsr_device_t *dev, const tsr_train_opts_t *opts, tsr_trainer_t **out);
void tsr_train_free(tsr_trainer_t *tr);
/* One line per layer of the trainable part (node, op, trainable or frozen, shapes, parameters). */
void tsr_train_print_plan(const tsr_trainer_t *tr, FILE *f);
/* The data: x the model's input dtype and shape with N >= opts->batch samples (first dimension), y
 * int32 or int64 [N] in [0, classes). Refusals name the file given as xname / yname. */
int tsr_train_check_data(const tsr_trainer_t *tr, const tsr_tensor_t *x, const char *xname, const tsr_tensor_t *y,
                         const char *yname);
/* Train (data checked first); stats may be NULL. */
int tsr_train_run(tsr_trainer_t *tr, const tsr_tensor_t *x, const tsr_tensor_t *y, tsr_train_stats_t *stats);
/* The tuned model as a file image (the loaded file with the trained layers' weights, weight scales,
 * biases and bias scales replaced): *buf malloc'd. */
int tsr_train_pack(const tsr_trainer_t *tr, uint8_t **buf, size_t *len);
/* Write it to path atomically: a temporary file in the same directory, renamed over path when
 * complete (a failure leaves path as it was). */
int tsr_train_write_file(const char *path, const uint8_t *buf, size_t len);

/* ---- for tests: one step's gradients and what a reference needs to recompute them ---- */

typedef struct tsr_train_view {
    const tsr_onnx_lowered_t *L; /* the layer as lowered (kind, node, params, scales) */
    int trainable;
    int m, k;                  /* CONV/DENSE: weights [m][k] (conv: k = C_in * KH * KW) */
    const float *w, *b;        /* float master weights [m][k] and bias [m] (before the step) */
    const float *gw, *gb;      /* the last tsr_train_grads' gradients of the weights and bias (trainable) */
    float s_dy, s_dx;          /* the gradient quantization scales of that step: dY for dW (and dX, per-tensor
                                  weights), dY * w_scale for dX (per-channel weights) */
    const uint8_t *x, *y;      /* that step's input and output activations (quantized bytes, [n][...]) */
    int src[2];                /* the layers (view indices) whose outputs it reads: x is src[0]'s (-1: the part's
                                  input, the frozen features); an add's second input is src[1]'s (-1 otherwise) */
    int n;                     /* its batch */
    size_t x_elems, y_elems;   /* per sample */
    int32_t x_zp, y_zp, act_min, act_max;
    float x_scale, y_scale;
} tsr_train_view_t;

/* Layers of the trainable part; view j of them after tsr_train_grads. */
int tsr_train_nlayers(const tsr_trainer_t *tr);
int tsr_train_view(const tsr_trainer_t *tr, int j, tsr_train_view_t *v);
/* The logits' dequantization (the host DequantizeLinear after the last layer). */
void tsr_train_logits_q(const tsr_trainer_t *tr, float *scale, int32_t *zp);
/* Forward and backward of the first n (<= batch) samples of x with labels y, no update: *loss the
 * mean cross-entropy, the gradients in the views. */
int tsr_train_grads(tsr_trainer_t *tr, const tsr_tensor_t *x, const tsr_tensor_t *y, int n, double *loss);

#endif
