/*
 * tsr_onnx_ops: the operator registry (tsr_onnx_ops.h). The opset ranges
 * are ONNX's versions of each op whose semantics the handler implements
 * (onnx.defs since_version; the operator changelog for versions after the
 * installed onnx): a later version that only adds element types the
 * handler refuses by type anyway keeps the range open; one that changes
 * what the node means closes it. QuantizeLinear and DequantizeLinear 21
 * add block quantization (block_size) and QuantizeLinear 21 an
 * output_dtype that sets the output type without a zero point: the
 * handlers implement neither, so their rows end at 20. com.microsoft ops
 * (ONNX Runtime's contrib operators) have one version, 1.
 */
#include <string.h>

#include "tsr_onnx_ops.h"

static const ox_op_t ops[] = {
    /* constants and relabellings folded at import (ops/tsr_ox_const.c, ops/tsr_ox_shape.c) */
    {"", "Constant", 1, 0, tsr_ox_constant, 0, 0},
    {"", "Identity", 1, 0, tsr_ox_cast, 0, 0},
    {"", "Cast", 6, 0, tsr_ox_cast, 0, 0},                 /* 'to' an integer since 6 */
    {"", "ConstantOfShape", 9, 0, tsr_ox_constant_of_shape, 0, 0},
    {"", "Flatten", 1, 0, tsr_ox_reshape, 1, 0},
    {"", "Reshape", 5, 0, tsr_ox_reshape, 0, 0},           /* the shape an input since 5 */
    {"", "Transpose", 1, 0, tsr_ox_transpose_q, 0, 0},     /* ops/tsr_ox_shape.c: quantized bytes, else a host copy */
    {"", "Concat", 1, 0, tsr_ox_concat_fold, 0, OX_QDQ_OUT}, /* constants folded (ops/tsr_ox_fold.c), else shape.c;
                                                               a QDQ target when a QuantizeLinear follows */
    /* quantization (ops/tsr_ox_qdq.c) */
    {"", "DequantizeLinear", 10, 20, tsr_ox_dequantize, 0, 0},
    {"", "QuantizeLinear", 10, 20, tsr_ox_quantize, 0, 0},
    {"com.microsoft", "DequantizeLinear", 1, 0, tsr_ox_dequantize, 0, 0},
    {"com.microsoft", "QuantizeLinear", 1, 0, tsr_ox_quantize, 0, 0},
    /* convolutions and gemms on the device (ops/tsr_ox_conv.c) */
    {"", "Conv", 1, 0, tsr_ox_qdq_conv, 0, OX_QDQ_OUT},
    {"", "Gemm", 7, 0, tsr_ox_gemm_any, 1, OX_QDQ_OUT},    /* C broadcast one way since 7; ops/tsr_ox_math.c */
    {"", "MatMul", 1, 0, tsr_ox_matmul_any, 1, OX_QDQ_OUT}, /* ops/tsr_ox_math.c: else float on the host */
    {"", "QLinearConv", 10, 0, tsr_ox_qlinear, 0, 0},
    {"com.microsoft", "QGemm", 1, 0, tsr_ox_qlinear, 1, 0},
    {"", "BatchNormalization", 9, 0, tsr_ox_qdq_batchnorm, 0, OX_QDQ_OUT}, /* no 'spatial' since 9 */
    /* matmuls and int32 ops (ops/tsr_ox_matmul.c) */
    {"", "QLinearMatMul", 10, 0, tsr_ox_qlinear_matmul, 0, 0},
    {"", "ConvInteger", 10, 0, tsr_ox_host_int, H_CONVINT, 0},
    {"", "MatMulInteger", 10, 0, tsr_ox_host_int, H_MATMULINT, 0},
    /* pools (ops/tsr_ox_pool.c) */
    {"", "MaxPool", 1, 0, tsr_ox_maxpool, 0, 0},
    {"", "AveragePool", 1, 0, tsr_ox_qdq_avgpool, TSR_POOL_AVG, OX_QDQ_OUT},
    {"", "GlobalAveragePool", 1, 0, tsr_ox_qdq_avgpool, TSR_POOL_GLOBAL_AVG, OX_QDQ_OUT},
    {"com.microsoft", "QLinearGlobalAveragePool", 1, 0, tsr_ox_qlinear_pool, TSR_POOL_GLOBAL_AVG, 0},
    {"com.microsoft", "QLinearAveragePool", 1, 0, tsr_ox_qlinear_pool, TSR_POOL_AVG, 0},
    {"com.microsoft", "QLinearConcat", 1, 0, tsr_ox_qlinear_concat, 0, 0},   /* ops/tsr_ox_shape.c */
    {"", "ReduceMean", 1, 0, tsr_ox_qdq_reducemean, 0, OX_QDQ_OUT}, /* axes an input since 18 */
    {"", "Pad", 2, 0, tsr_ox_pad, 0, 0},                     /* zero pads only; pads an input since 11 */
    /* adds (ops/tsr_ox_eltwise.c) */
    {"", "Add", 7, 0, tsr_ox_add_any, 0, OX_QDQ_OUT},      /* multidirectional broadcast since 7; ops/tsr_ox_math.c:
                                                               float on the host unless two quantized views */
    {"com.microsoft", "QLinearAdd", 1, 0, tsr_ox_qlinear_add, 0, 0},
    {"com.microsoft", "QLinearSigmoid", 1, 0, tsr_ox_qlinear_unary, FU_SIGMOID, 0},   /* ops/tsr_ox_float.c */
    {"com.microsoft", "QLinearLeakyRelu", 1, 0, tsr_ox_qlinear_unary, FU_LEAKYRELU, 0},
    /* float operators on the host (ops/tsr_ox_float.c) */
    {"", "Relu", 6, 0, tsr_ox_host_float, H_RELU, 0},
    {"", "Softmax", 1, 0, tsr_ox_host_float, H_SOFTMAX, 0}, /* 1..12 (flattening) and 13 (one axis) */
    {"", "ArgMax", 1, 0, tsr_ox_host_float, H_ARGMAX, 0},
    /* standard float ops on the host, int64 shape arithmetic folded (ops/tsr_ox_math.c, ops/tsr_ox_fold.c) */
    {"", "Sigmoid", 6, 0, tsr_ox_funary, FU_SIGMOID, 0},
    {"", "HardSigmoid", 6, 0, tsr_ox_funary, FU_HARDSIGMOID, 0},
    {"", "HardSwish", 14, 0, tsr_ox_funary, FU_HARDSWISH, 0},
    {"", "Tanh", 6, 0, tsr_ox_funary, FU_TANH, 0},
    {"", "LeakyRelu", 6, 0, tsr_ox_funary, FU_LEAKYRELU, 0},
    {"", "Elu", 6, 0, tsr_ox_funary, FU_ELU, 0},
    {"", "Softplus", 1, 0, tsr_ox_funary, FU_SOFTPLUS, 0},
    {"", "Clip", 6, 0, tsr_ox_funary, FU_CLIP, 0},           /* min/max attributes to 10, inputs since 11 */
    {"", "Erf", 9, 0, tsr_ox_funary, FU_ERF, 0},
    {"", "Gelu", 20, 0, tsr_ox_funary, FU_GELU, 0},
    {"", "Sqrt", 6, 0, tsr_ox_funary, FU_SQRT, 0},
    {"", "Reciprocal", 6, 0, tsr_ox_funary, FU_RECIP, 0},
    {"", "Neg", 6, 0, tsr_ox_funary, FU_NEG, 0},
    {"", "Abs", 6, 0, tsr_ox_funary, FU_ABS, 0},
    {"", "Exp", 6, 0, tsr_ox_funary, FU_EXP, 0},
    {"", "Log", 6, 0, tsr_ox_funary, FU_LOG, 0},
    {"", "Not", 1, 0, tsr_ox_funary, FU_NOT, 0},
    {"", "Sub", 7, 0, tsr_ox_fnary, FN_SUB, 0},              /* broadcasting since 7 */
    {"", "Mul", 7, 0, tsr_ox_mul_any, FN_MUL, OX_QDQ_OUT}, /* QDQ: QLinearMul (ops/tsr_ox_math.c) */
    {"", "Div", 7, 0, tsr_ox_fnary, FN_DIV, 0},
    {"", "Pow", 7, 0, tsr_ox_fnary, FN_POW, 0},
    {"", "Min", 8, 0, tsr_ox_fnary, FN_MIN, 0},              /* two inputs */
    {"", "Max", 8, 0, tsr_ox_fnary, FN_MAX, 0},
    {"", "Equal", 7, 0, tsr_ox_fnary, FN_EQUAL, 0},
    {"", "Less", 7, 0, tsr_ox_fnary, FN_LESS, 0},
    {"", "Greater", 7, 0, tsr_ox_fnary, FN_GREATER, 0},
    {"", "And", 7, 0, tsr_ox_fnary, FN_AND, 0},
    {"", "Or", 7, 0, tsr_ox_fnary, FN_OR, 0},
    {"", "Where", 9, 0, tsr_ox_fnary, FN_WHERE, 0},
    {"", "Expand", 8, 0, tsr_ox_fnary, FN_EXPAND, 0},
    {"", "ReduceSum", 1, 0, tsr_ox_reduce, RD_SUM, 0},       /* axes an input since 13 */
    {"", "ReduceMax", 1, 0, tsr_ox_reduce, RD_MAX, 0},       /* axes an input since 18 */
    {"", "ReduceMin", 1, 0, tsr_ox_reduce, RD_MIN, 0},
    {"", "LayerNormalization", 17, 0, tsr_ox_layernorm, 0, 0},
    {"", "Gather", 1, 0, tsr_ox_gather, 0, 0},
    {"", "Split", 1, 0, tsr_ox_split, 0, 0},                 /* split an input since 13, num_outputs 18 */
    {"", "Slice", 1, 0, tsr_ox_slice_q, 0, 0},               /* attributes to 9, inputs since 10; views: shape.c */
    {"", "Squeeze", 1, 0, tsr_ox_squeeze, 0, 0},             /* axes an input since 13 */
    {"", "Unsqueeze", 1, 0, tsr_ox_squeeze, 1, 0},
    {"", "Shape", 1, 0, tsr_ox_shape_of, 0, 0},              /* start/end since 15 */
    {"", "Size", 1, 0, tsr_ox_shape_of, 1, 0},
    {"", "Range", 11, 0, tsr_ox_range, 0, 0},
};

/* "" for ai.onnx (a model may spell it out), else the domain as given. */
static const char *node_domain(const tsr_onnx_t *m, int ni)
{
    const char *d = m->gp->node[ni]->domain;
    return !d || !strcmp(d, "ai.onnx") ? "" : d;
}

int64_t tsr_ox_node_opset(const tsr_onnx_t *m, int ni)
{
    const char *dom = node_domain(m, ni);
    return !dom[0] ? m->opset : !strcmp(dom, "com.microsoft") ? m->ms_opset : -1;
}

const ox_op_t *tsr_ox_op_find(const tsr_onnx_t *m, int ni, const ox_op_t **other)
{
    const char *dom = node_domain(m, ni), *op = m->gp->node[ni]->op_type;
    const int64_t v = tsr_ox_node_opset(m, ni);
    if (other)
        *other = NULL;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (strcmp(ops[i].domain, dom) || strcmp(ops[i].op_type, op))
            continue;
        if (v >= ops[i].since && (!ops[i].until || v <= ops[i].until))
            return &ops[i];
        if (other)
            *other = &ops[i];
    }
    return NULL;
}
