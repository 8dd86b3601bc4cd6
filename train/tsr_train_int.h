/*
 * tsr_train_int: the trainer's internal state, shared by the session
 * (tsr_train.c: setup, refusals, the loop, the measures, the file) and the
 * step (tsr_train_step.c: forward, loss, backward, update). Not installed.
 */
#ifndef TSR_TRAIN_INT_H
#define TSR_TRAIN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_grad.h"
#include "tsr_sgd.h"
#include "tsr_train.h"

/* One layer of the trainable part. */
typedef struct trl {
    tsr_onnx_lowered_t L;        /* as the importer lowered it (kind, node, parameters, scales, names) */
    int trainable;             /* its weights and bias are updated */
    int need_dx;               /* a layer before it in the part: its input gradient is needed */
    int src[2];                /* the part's layers it reads (in, and in2 of an add): their index in c, -1
                                  for the part's input (the frozen features) or no second input */
    tsr_dtype_e x_dtype, y_dtype;
    int32_t x_zp, y_zp, act_min, act_max;
    size_t x_elems, y_elems;   /* per sample */
    /* CONV / DENSE */
    int M, K;                  /* weights [M][K] (conv: K = C_in / groups * KH * KW) */
    int wc;                    /* weight scales: 1 (per tensor) or M (per output channel) */
    int has_bias;              /* the model has a bias (trained with the weights) */
    int8_t *wq;                /* current int8 weights (device layout) */
    int32_t *bq;               /* current int32 bias */
    float *ws;                 /* current weight scales */
    int32_t *mult, *shift, *wzp; /* requantization, zero weight zero points [M] */
    float *fscale;
    int has_fscale;
    float *w, *b, *vw, *vb;    /* float32 master copy and momentum (trainable) */
    int8_t *wlo;               /* 16-bit weights (trainable, weight_bits 16): the master copy's residual after wq on
                                  w_scale / 256, so that w ~ (256 wq + wlo) * w_scale / 256 (NULL: 8-bit forward) */
    int64_t *b16;              /* ... and the bias on x_scale * w_scale / 256 */
    int8_t *w2;                /* ... wq and wlo as one weight tensor of 2M outputs (one forward GEMM) */
    float *gw, *gb;            /* gradients of the last step */
    tsr_sgd_t *sgd_w, *sgd_b;  /* device_update: the weights' and the bias's state on the device (NULL: none) */
    int32_t *gwi, *gbi;        /* device_update: the last step's exact int32 dW sums [M][K] and the int8 dy's sums
                                  per output channel [M] (their scale s_dy) */
    int fb;                    /* device_update: fractional bits of the bias's master copy */
    float s_dy, s_dx;          /* the last step's gradient quantization scales */
    /* per step */
    uint8_t *y;                /* kept output activations [batch][y_elems] */
    float *gy;                 /* the gradient of its real output [batch][y_elems], summed over its readers */
} trl_t;

struct tsr_trainer {
    char path[4096];
    tsr_onnx_t *m;
    tsr_onnx_lowered_t *ls;
    int nls;
    tsr_device_t *dev;
    tsr_config_t cfg;
    tsr_train_opts_t o;
    int first;                 /* lop index of the first layer of the trainable part */
    trl_t *c;                  /* the trainable part, in order */
    int nc;
    float out_scale;           /* the logits' DequantizeLinear */
    int32_t out_zp;
    int classes;
    tsr_dtype_e feat_dtype;    /* the boundary tensor (the part's input) */
    size_t feat_elems;
    uint8_t *x0;               /* the part's input of the current batch [batch][feat_elems] */
    int nb;                    /* the current batch */
    float *g, *g2;             /* gradient buffers (largest activation of a batch) */
    int8_t *q;                 /* quantized gradient */
    int8_t *q2;                /* its low part (grad_split) */
    int32_t *acc;              /* int32 results of the backward GEMMs */
    int32_t *facc;             /* the forward sums of both parts (16-bit weights; [2][batch][largest output]) */
    int wide;                  /* the trained convs and denses run their forward on 16-bit weights */
    size_t gcap;
    float *probs;              /* softmax of the batch [batch][classes] */
    tsr_grad_stats_t gst;      /* backward MACs on the device (and cycles) */
    uint64_t host_macs;        /* backward MACs done on the host */
    uint64_t fwd_macs;         /* forward MACs of the part */
    uint64_t upd_n, upd_moved; /* int8_update, device_update: weight updates, and those that moved the int8 value */
    uint64_t upd_cycles;       /* device_update: device cycles of the updates (summed) */
    uint64_t dev_budget;       /* the backward convs' device-memory budget (tsr_grad_conv_*_budget): the
                                  inference's high-water mark once measured (0 before: none) */
    uint64_t round_state;      /* grad_stochastic: the rounding's splitmix64 state (from the seed, its own stream) */
    uint64_t wround_state;     /* weight_stochastic: the weights' rounding stream */
    int wround_final;          /* weight_stochastic: the last re-quantization (the tuned file's) is to nearest */
    int dq;                    /* lop index of the logits' DequantizeLinear */
    float out_scale0;          /* the file's logits quantization (before the observer moved it) */
    int32_t out_zp0;
    int range_obs;             /* the logits' range observer is on */
    int range_moves;           /* times it widened the range */
    uint64_t range_macs;       /* its host MACs */
    int loss_exact;            /* the loss on the last dense's exact real outputs, not its 8-bit ones */
    uint64_t loss_macs;        /* their host MACs */
};

/* tsr_train_step.c */
/* Forward of the part on tr->x0 (tr->nb samples): outputs kept in c[j].y. */
int tsr_train_forward(tsr_trainer_t *tr);
/* Loss and gradients of the current batch for labels lab[nb]: *loss the sum of the samples' cross-entropy,
 * *right the samples whose argmax is their label. */
int tsr_train_backward(tsr_trainer_t *tr, const int32_t *lab, double *loss, int *right);
/* SGD with momentum on the master copies, then re-quantization (device_update: on the device ALU). */
int tsr_train_update(tsr_trainer_t *tr);
/* device_update: the refusals (per-channel scales, an lr the ALU's multiplier cannot hold, a bias too large for
 * its fixed point; tsr_train_step.c). Each trained layer's state goes to the device at its first update. */
int tsr_train_device_update_init(tsr_trainer_t *tr);
/* The logits' quantization set to hold the real range [lo, hi] (ONNX Runtime's rule). */
int tsr_train_set_logits_range(tsr_trainer_t *tr, double lo, double hi);
/* Weights, scales, bias and requantization of layer l from its master copy (ws recomputed). */
int tsr_train_requantize(tsr_trainer_t *tr, trl_t *l);

#endif
