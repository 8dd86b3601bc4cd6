/*
 * tsr_onnx_tune: what on-device training (train/, issue 27) needs of a
 * loaded quantized model, without the importer's internals: its lowered
 * operators in run order as plain data (kind, the ONNX node, the quantized
 * values they read and write, the device parameters, the scales of a QDQ
 * conv or gemm and the names of the constants that hold its weights and
 * bias), the requantization of new weight scales as the importer forms it
 * (ONNX Runtime's float32 x_scale * w_scale / y_scale), and the model file
 * with some constants replaced, packed again.
 *
 * Why here: the layers are the importer's lowering (which node became which
 * device operator, which Relu and QuantizeLinear it folded, the zero points
 * the segments agreed), and the constants are protobuf fields; the trainer
 * sees neither.
 */
#ifndef TSR_ONNX_TUNE_H
#define TSR_ONNX_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_conv2d.h"
#include "tsr_dense.h"
#include "tsr_eltwise.h"
#include "tsr_onnx.h"
#include "tsr_pool.h"

typedef enum tsr_oxl_kind {
    TSR_OXL_CONV = 1,       /* device conv2d (a QDQ Conv, or a Gemm over a spatial tensor) */
    TSR_OXL_DENSE,          /* device dense (a Gemm/MatMul over [N, K]) */
    TSR_OXL_MAXPOOL,        /* device max pool */
    TSR_OXL_QUANT,          /* host QuantizeLinear of a float tensor */
    TSR_OXL_DEQUANT,        /* host DequantizeLinear of a per-tensor quantized tensor */
    TSR_OXL_SOFTMAX,        /* host Softmax */
    TSR_OXL_COPY,           /* host copy of a tensor's bytes in row-major order (a dense's own [N, K] input
                               when the tensor it relabels is a device tensor of another shape): the identity */
    TSR_OXL_ADD,            /* device add of two activations (in and in2; a residual add): .add */
    TSR_OXL_AVGPOOL,        /* device average or global-average pool (an AveragePool, GlobalAveragePool or
                               spatial ReduceMean): .pool, or, with avg_conv, the weight-1 depthwise conv
                               that averages and requantizes at once (.conv, .w, .bias; .pool the window) */
    TSR_OXL_OTHER,          /* anything else (device or host) */
} tsr_oxl_kind_e;

typedef struct tsr_onnx_lowered {
    tsr_oxl_kind_e kind;
    int device;             /* 1: a device operator, 0: a host kernel */
    const char *node;       /* the ONNX node's name (its first output when unnamed); the model's string */
    const char *op;         /* its op type ("Conv", "Gemm", "MaxPool", ...) */
    int node_index;         /* its index in the graph's nodes */
    int in, out;            /* ids of the values read and written (bases: an alias has its source's id) */
    const char *in_name, *out_name; /* their names, for tsr_onnx_read_value */
    int in2;                /* TSR_OXL_ADD: the second input's id (-1 otherwise) */
    const char *in2_name;
    int is_output;          /* out is the graph's first output */
    /* TSR_OXL_CONV and TSR_OXL_DENSE (a gemm whose input is a flattened [N,C,H,W] tensor and whose
       kernel covers it is given as TSR_OXL_DENSE with K = C*H*W: the same arithmetic): */
    tsr_conv2d_params_t conv; /* CONV: the device parameters (batch as loaded; arrays are the model's) */
    tsr_dense_params_t dense; /* DENSE: the same for dense */
    const void *w;          /* device weights (CONV OIHW, DENSE [M][K]) of conv.w_dtype / dense.w_dtype */
    const int32_t *bias;    /* [C_out] int32 at x_scale * w_scale, or NULL */
    float x_scale, y_scale; /* the input's and the output's scale (per tensor) */
    const float *w_scale;   /* w_count weight scales (per tensor or per output channel) */
    int w_count;
    int relu;               /* the output clamp's low end is above the type's minimum (a folded Relu/Clip) */
    int clip;               /* a Clip was folded (ReLU6): its high end bounds the output even where it is the
                               type's own maximum (the derivative is 0 there, not the saturation's 1) */
    /* The constants training rewrites (names of the file's initializers or Constant outputs), and
       why this layer cannot be trained (NULL when it can): not the QDQ form, weights other than
       symmetric int8 constants, a constant shared with other nodes, exact requantization metadata */
    const char *w_name, *ws_name, *b_name, *bs_name; /* weights, their scales, int32 bias, its scale (or NULL) */
    int w_transposed;       /* the file holds the weights as [K][M] (Gemm transB 0, MatMul) */
    const char *why_not;
    /* TSR_OXL_MAXPOOL, TSR_OXL_AVGPOOL */
    tsr_pool_params_t pool;
    int avg_conv;           /* TSR_OXL_AVGPOOL: runs as the conv .conv (the pool's window in .pool) */
    /* TSR_OXL_ADD */
    tsr_add_params_t add;
    /* TSR_OXL_QUANT / TSR_OXL_DEQUANT */
    float q_scale;
    int32_t q_zp;
    /* The constants of the output's quantization, for a trainer that moves the output's range (the
       logits' range, which the untuned model calibrated): CONV / DENSE: its output QuantizeLinear's
       scale and zero point; TSR_OXL_DEQUANT: its own. NULL unless both are plain constants (float32
       scale, 8-bit zero point) that only QuantizeLinear / DequantizeLinear nodes of this one tensor
       read. */
    const char *qs_name, *qzp_name;
} tsr_onnx_lowered_t;

/* Every lowered operator of m in run order (host and device), as layers.
 * *out is malloc'd (free it; strings and arrays point into m, valid while
 * m lives and unchanged by tsr_onnx_prepare). */
int tsr_onnx_lowered_ops(tsr_onnx_t *m, tsr_onnx_lowered_t **out, int *n);

/* The graph input as loaded: its element type (TSR_DT_FLOAT32, INT8, UINT8, INT32, INT64), rank and
 * concrete shape (the batch given at load first), its name. */
int tsr_onnx_input_info(const tsr_onnx_t *m, tsr_dtype_e *dtype, int *ndim, int64_t dims[8], const char **name);

/* The requantization of layer L (CONV or DENSE) with weight scales
 * w_scale[L->w_count], as the importer forms it for the file (ONNX
 * Runtime's float32 multiplier): mult/shift[w_count] and fscale[w_count]
 * (*has_fscale 0 when the float32 form does not apply; the fixed-point one
 * then does). */
int tsr_onnx_lowered_requant(tsr_onnx_t *m, const tsr_onnx_lowered_t *L, const float *w_scale, int32_t *mult,
                           int32_t *shift, float *fscale, int *has_fscale);

/* One constant to replace: its name, its new bytes (the same element type
 * and count as the file's: int8, uint8, int32 or float32). */
typedef struct tsr_onnx_const_update {
    const char *name;
    const void *data;
    size_t nbytes;
} tsr_onnx_const_update_t;

/* The model file src with the constants of u[0..n) replaced, packed again
 * (*buf malloc'd, *len bytes). Every name must be an initializer or a
 * Constant node's output of the same byte size, else TSR_EINVAL naming it;
 * nothing else of the file changes. */
int tsr_onnx_pack_updated(const char *src, const tsr_onnx_const_update_t *u, int n, uint8_t **buf, size_t *len);

#endif
