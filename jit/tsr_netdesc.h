/*
 * tsr_netdesc: a quantized CNN as plain data — tensors, nodes in
 * topological order, weights and requantization — with no device and no
 * JIT state. The graph runtime builds a device graph from it; the
 * independent plain-C reference (tests/tsr_netref.c) computes the same
 * network with tests/tsr_opref.c. tsr_netdesc_resnet18 generates ResNet-18
 * (ImageNet shape) with seeded random weights and requantization calibrated
 * so activations use the int8/uint8 range without saturating.
 *
 * CONTRACT shared by two branches (h/netref owns it, h/graph copies it):
 * change only additively, and say so in your report.
 */
#ifndef TSR_NETDESC_H
#define TSR_NETDESC_H

#include <stdint.h>

#include "tsr_conv2d.h"
#include "tsr_dense.h"
#include "tsr_eltwise.h"
#include "tsr_npy.h"
#include "tsr_op.h"
#include "tsr_pool.h"

/* A node's operator: the JIT's operator kinds (tsr_op.h) a node can have,
 * under the names this description has always used (same values; a
 * reshape is not a node kind, so switches over this type stay exhaustive).
 * The node's parameter member is the one the kind names. */
typedef enum tsr_nd_kind {
    TSR_ND_CONV = TSR_OPK_CONV,   /* conv2d (groups 1 or depthwise) + bias + requant + clamp: .conv, .w, .bias */
    TSR_ND_POOL = TSR_OPK_POOL,   /* max / avg / global-avg pool: .pool */
    TSR_ND_ADD = TSR_OPK_ADD,     /* quantized add of in[0] and in[1] (TFLite ADD) + clamp: .add */
    TSR_ND_CLIP = TSR_OPK_CLIP,   /* relu / clip: .clip */
    TSR_ND_DENSE = TSR_OPK_DENSE, /* fully connected over the flattened NCHW input + bias + requant: .dense, .w,
                                     .bias */
    TSR_ND_ACT = TSR_OPK_ACT,     /* (additive) activation table, needs ACT_LUT: .act */
    TSR_ND_MUL = TSR_OPK_MUL,     /* (additive) in[0] [N,C,H,W] times the per-channel vector in[1] [N,C,1,1]: .mul */
    TSR_ND_GAVG = TSR_OPK_GAVG,   /* (additive) global average into its own quantization: .gavg */
    TSR_ND_SOFTMAX = TSR_OPK_SOFTMAX, /* (additive) softmax along w or over h*w, needs ACT_LUT >= 4: .softmax */
    TSR_ND_CONCAT = TSR_OPK_CONCAT,   /* (additive) in[0] and in[1] along channels, no kernel (tsr_concat.h): .concat */
} tsr_nd_kind_e;

typedef struct tsr_nd_tensor {
    int n, c, h, w;        /* NCHW shape */
    tsr_dtype_e dtype;     /* TSR_DT_INT8 or TSR_DT_UINT8 */
    int32_t zp;            /* zero point */
    double scale;          /* real value = scale * (q - zp) (calibration; informational for the runtime) */
} tsr_nd_tensor_t;

typedef struct tsr_nd_node {
    tsr_nd_kind_e kind;    /* which operator */
    char name[48];         /* "conv1", "layer1.0.conv2", "layer1.0.add", "maxpool", "avgpool", "fc" */
    int in[2];             /* input tensor ids (in[1] = -1 unless TSR_ND_ADD, TSR_ND_MUL or TSR_ND_CONCAT) */
    int out;               /* output tensor id (every tensor except 0 has exactly one producer) */
    tsr_conv2d_params_t conv;  /* TSR_ND_CONV: shapes/dtypes/zps agree with the tensors; arrays owned by the desc */
    tsr_dense_params_t dense;  /* TSR_ND_DENSE */
    tsr_pool_params_t pool;    /* TSR_ND_POOL */
    tsr_add_params_t add;      /* TSR_ND_ADD */
    tsr_clip_params_t clip;    /* TSR_ND_CLIP */
    tsr_op_act_t act;          /* TSR_ND_ACT (additive): shape, types, zero points and the table */
    tsr_mul_params_t mul;      /* TSR_ND_MUL (additive) */
    tsr_gavg_params_t gavg;    /* TSR_ND_GAVG (additive) */
    tsr_softmax_params_t softmax; /* TSR_ND_SOFTMAX (additive) */
    tsr_concat_params_t concat;   /* TSR_ND_CONCAT (additive) */
    void *w;               /* CONV: OIHW weights, DENSE: [M][K] weights, bytes of the weight dtype (owned) */
    int32_t *bias;         /* CONV / DENSE: [C_out] or [M] int32 (owned), may be NULL */
} tsr_nd_node_t;

typedef struct tsr_netdesc {
    char name[32];         /* "resnet18" */
    int ntensors;          /* tensor 0 is the network input */
    tsr_nd_tensor_t *tensors;
    int nnodes;            /* topological order: a node's inputs are tensor 0 or outputs of earlier nodes */
    tsr_nd_node_t *nodes;
    int output;            /* tensor id of the network output (the FC logits) */
} tsr_netdesc_t;

/* ResNet-18, batch n, input [n,3,224,224] (uint8 image, zp 128 or similar),
 * int8 weights (per-output-channel requantization), stem conv 7x7/2 + relu,
 * maxpool 3x3/2 pad 1, 4 stages x 2 basic blocks (3x3 convs, 1x1/2
 * downsample convs on stage entry), residual adds with relu, global average
 * pool, FC 512 -> 1000. Weights and biases from the seed; requantization
 * calibrated (tsr_netdesc.c says how). 0 or a negative error code. */
int tsr_netdesc_resnet18(uint64_t seed, int n, tsr_netdesc_t *out);
/* Same generator on a scaled-down shape for fast tests: input HxW and a
 * channel width multiplier (base channels 64 -> width), classes outputs. */
int tsr_netdesc_resnet18_small(uint64_t seed, int n, int hw, int width, int classes, tsr_netdesc_t *out);
/* Bytes of tensor t (n*c*h*w). */
uint64_t tsr_netdesc_tensor_bytes(const tsr_netdesc_t *nd, int t);
/* A seeded random input for tensor 0 (dst: tsr_netdesc_tensor_bytes(nd, 0) bytes). */
void tsr_netdesc_random_input(const tsr_netdesc_t *nd, uint64_t seed, void *dst);
void tsr_netdesc_free(tsr_netdesc_t *nd);
/* Append a zeroed node of kind with name and inputs in0/in1 (-1: none) and
 * out -1 (its arrays are filled by the caller), growing nd->nodes; *cap is
 * the caller's count of allocated nodes. NULL on ENOMEM (message set). */
tsr_nd_node_t *tsr_netdesc_add_node(tsr_netdesc_t *nd, int *cap, tsr_nd_kind_e kind, const char *name, int in0,
                                    int in1);
/* (Added by h/onnx, additive.) Free what one node owns (CONV/DENSE
 * parameter arrays, weights, bias), as tsr_netdesc_free does for each node:
 * for nodes kept outside a desc (the ONNX importer's device operators). */
void tsr_nd_node_free(tsr_nd_node_t *nn);
/* (Added by the operator registry, additive.) The parameters of a node's
 * kind (&nn->conv for a CONV, ...), NULL for a kind a node cannot have. */
const void *tsr_nd_node_params(const tsr_nd_node_t *nn);

/* (Added by h/netref, additive.) Check a desc: every node's parameters pass
 * the operator's own check (tsr_conv2d_check, tsr_pool_check,
 * tsr_add_check, tsr_clip_check, tsr_dense_check), its input and output
 * tensors exist and agree with the parameters (shape, dtype, zero point),
 * nodes are in topological order, every tensor but 0 has exactly one
 * producer, CONV/DENSE nodes have weights. 0 or TSR_EINVAL naming the
 * node. The generators call it on what they build. */
int tsr_netdesc_validate(const tsr_netdesc_t *nd);

#endif
