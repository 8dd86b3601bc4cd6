/*
 * tsr_onnx_ops: the operator registry (internal). One table maps (domain,
 * op type, opset range) to the handler that lowers such a node, as ONNX
 * Runtime's NNAPI/CoreML execution providers register one op builder per
 * op type; the handlers live in ops/, one file per op family (tract's
 * layout). Lowering (tsr_onnx_lower.c) checks a node's inputs, finds its
 * entry and calls the handler; a node with no entry for the model's opset
 * is one error naming the node, the op, the domain and the opset.
 * Adding an operator: write its handler in the family's file under ops/
 * (or a new file there), declare it below, and add its row to the table in
 * tsr_onnx_ops.c with the opset versions whose semantics it implements.
 */
#ifndef TSR_ONNX_OPS_H
#define TSR_ONNX_OPS_H

#include "tsr_onnx_ir.h"

/* A handler lowers node ni (its inputs all defined): defines its outputs
 * and appends its lops, or returns a negative error (NERR). arg: the
 * table row's argument (one handler serving several ops). */
typedef int (*ox_handler_fn)(tsr_onnx_t *m, int ni, int arg);

/* flags */
#define OX_QDQ_OUT 1u       /* a QDQ target: its output group is selected before lowering (tsr_onnx_qdq.c) */

typedef struct ox_op {
    const char *domain;     /* "" = ai.onnx (also spelled "ai.onnx" in models), or "com.microsoft" */
    const char *op_type;
    int since, until;       /* the domain's opset versions the handler implements (until 0: open) */
    ox_handler_fn fn;
    int arg;
    unsigned flags;
} ox_op_t;

/* The table row for node ni in the model's opset, NULL if none; *other (if
 * given): a row of the op for other opsets, else NULL. */
const ox_op_t *tsr_ox_op_find(const tsr_onnx_t *m, int ni, const ox_op_t **other);
/* The model's opset of node ni's domain. */
int64_t tsr_ox_node_opset(const tsr_onnx_t *m, int ni);

/* ops/tsr_ox_const.c: constants folded at import */
int tsr_ox_constant(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_cast(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_constant_of_shape(tsr_onnx_t *m, int ni, int arg);
/* ops/tsr_ox_qdq.c: QuantizeLinear, DequantizeLinear */
int tsr_ox_dequantize(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_quantize(tsr_onnx_t *m, int ni, int arg);
/* ops/tsr_ox_conv.c: convolutions and gemms on the device */
int tsr_ox_qdq_conv(tsr_onnx_t *m, int ni, int gemm);
int tsr_ox_qlinear(tsr_onnx_t *m, int ni, int kind);
int tsr_ox_qdq_batchnorm(tsr_onnx_t *m, int ni, int arg);
/* ops/tsr_ox_matmul.c: QLinearMatMul, and the int32 ops on the host */
int tsr_ox_qlinear_matmul(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_host_int(tsr_onnx_t *m, int ni, int hk);
int tsr_ox_qdq_matmul_host(tsr_onnx_t *m, int ni); /* QDQ MatMul of two activations (H_QMATMUL) */
/* ops/tsr_ox_pool.c */
int tsr_ox_maxpool(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_qdq_avgpool(tsr_onnx_t *m, int ni, int kind);
int tsr_ox_qlinear_pool(tsr_onnx_t *m, int ni, int kind); /* QLinearGlobalAveragePool, QLinearAveragePool */
int tsr_ox_qdq_reducemean(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_pad(tsr_onnx_t *m, int ni, int arg);
/* The device requantize (of the pools and Concat): the depthwise conv of
 * weight 1 over k windows (strides s, pads pd: top, left, bottom, right)
 * of the 4-D quantized xq (scale xs, zero point xzp) into yv, with y's
 * quantization and clamp and the multiplier xs / (count * y->scale):
 * k = s = 1, count 1 is a plain requantize. */
int tsr_ox_sum_requant(tsr_onnx_t *m, int ni, int xq, float xs, int32_t xzp, const int64_t *k, const int64_t *s,
                       const int64_t *pd, int64_t count, const ox_qout_t *y, int yv);
/* ops/tsr_ox_eltwise.c: quantized adds, and the Mul by a per-channel vector */
int tsr_ox_qlinear_add(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_qdq_add(tsr_onnx_t *m, int ni, int arg);
/* QDQ Mul of [N, C, H, W] by [N, C, 1, 1] (a squeeze-and-excite gate): the
 * host's QLinearMul kernel, the vector broadcast; 1 when not such a Mul. */
int tsr_ox_qdq_mul_bcast(tsr_onnx_t *m, int ni);
/* ops/tsr_ox_bias.c: host lop l, a QDQ Add of a per-channel constant to a device dense's output, as a
 * device depthwise conv bit-exact with it on every byte (moved next to the dense). 1 if it moved, 0 if
 * not, < 0 on an error. */
int tsr_ox_bias_device(tsr_onnx_t *m, int l);
/* ops/tsr_ox_float.c: float operators on the host */
int tsr_ox_host_float(tsr_onnx_t *m, int ni, int hk);
int tsr_ox_qlinear_unary(tsr_onnx_t *m, int ni, int op); /* QLinearSigmoid, QLinearLeakyRelu (FU_*) */
/* ops/tsr_ox_shape.c: relabellings and Concat */
int tsr_ox_reshape(tsr_onnx_t *m, int ni, int flatten);
int tsr_ox_transpose(tsr_onnx_t *m, int ni, int arg);
/* A Transpose's perm checked against X; odims its output, *moves 1 when bytes move. */
int tsr_ox_perm(tsr_onnx_t *m, int ni, const ox_val_t *X, int64_t *perm, int64_t *odims, int *moves);
int tsr_ox_transpose_q(tsr_onnx_t *m, int ni, int arg); /* of a quantized view: the bytes permuted */
int tsr_ox_slice_q(tsr_onnx_t *m, int ni, int arg); /* of a quantized view: the bytes sliced */
/* ops/tsr_ox_shuffle.c: a channel shuffle (x a 5-D view [N, g, C/g, H, W] of 4-D bytes, perm [0, 2, 1, 3, 4])
 * or a channel slice (starts st, output dims d) of a quantized view as a device 1x1 conv with one-hot
 * weights and an identity requantization; 1 when it does not apply (nothing made). */
int tsr_ox_shuffle_q(tsr_onnx_t *m, int ni, int x, const int64_t *perm, const int64_t *d);
int tsr_ox_chslice_q(tsr_onnx_t *m, int ni, int x, const int32_t *st, const int64_t *d);
/* Device 1x1 conv lop l (the last) of node ni reading a channel selection's output that nothing else
 * reads: the selection composed into its weights (it reads the selection's input), the selection's
 * lop gone. 0 (done or not applicable) or an error. */
int tsr_ox_chansel_into_conv(tsr_onnx_t *m, int ni, int l);
int tsr_ox_concat(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_split(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_qlinear_concat(tsr_onnx_t *m, int ni, int arg);

/* ops/tsr_ox_math.c: standard float (and int64) ops on the host, folded when all inputs are constant
 * (op: FU_* / FN_* / RD_* of tsr_onnx_ir.h) */
int tsr_ox_funary(tsr_onnx_t *m, int ni, int op);
int tsr_ox_fnary(tsr_onnx_t *m, int ni, int op);
int tsr_ox_add_any(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_matmul_any(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_mul_any(tsr_onnx_t *m, int ni, int arg); /* QDQ: QLinearMul on the host, else float */
int tsr_ox_gemm_any(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_reduce(tsr_onnx_t *m, int ni, int op);
int tsr_ox_layernorm(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_gather(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_slice(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_squeeze(tsr_onnx_t *m, int ni, int unsq);
int tsr_ox_transpose_any(tsr_onnx_t *m, int ni, int arg);
/* ops/tsr_ox_fold.c: shape subgraphs folded at import */
int tsr_ox_shape_of(tsr_onnx_t *m, int ni, int size);
int tsr_ox_range(tsr_onnx_t *m, int ni, int arg);
int tsr_ox_concat_fold(tsr_onnx_t *m, int ni, int arg);

/* Shared by the conv and matmul families (ops/tsr_ox_conv.c). */
typedef struct conv_desc {
    int x;                  /* quantized input value */
    float xs; int32_t xzp;
    int w;                  /* constant weight value */
    const float *ws; const int32_t *wzp; int wcnt;
    const int32_t *bias;    /* [M] or NULL */
    float *fbias;           /* float bias to quantize, or NULL */
    const float *rq;        /* [wcnt] requantization multipliers as given, or NULL: x_scale * w_scale / y_scale */
    ox_qout_t y;            /* output quantization, fused Relu/Clip */
    int gemm;               /* 1: w is [M][K] (trans applied), x flattened */
    int transb;             /* gemm: B given as [K][M] (0) or [M][K] (1) */
    int64_t kshape[2], pads[4], strides[2], group;
} conv_desc_t;

int tsr_ox_conv_geometry(tsr_onnx_t *m, int ni, conv_desc_t *cd, const ox_val_t *X, const ox_val_t *W,
                         int64_t *odims);
int tsr_ox_lower_conv(tsr_onnx_t *m, int ni, const conv_desc_t *cd, int yv);

#endif
