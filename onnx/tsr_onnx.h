/*
 * tsr_onnx: run a quantized ONNX model (a .onnx file) with the device doing
 * the quantized operators and the host doing the rest.
 *
 * Import: the file is read with size checks before anything is allocated
 * (regular file, at most TSR_ONNX_MAX_FILE bytes), its nesting bounded by
 * a non-recursive pre-scan (tsr_onnx_wire.h: subgraphs and types at most
 * 64 levels deep), unpacked by protobuf-c
 * (onnx.pb-c.c generated at build time from the onnx.proto of libonnx-dev),
 * validated (ai.onnx opsets 10..21, each op within the opset range its
 * handler implements (onnx/tsr_onnx_ops.c: QuantizeLinear and
 * DequantizeLinear to 20), com.microsoft ops as ONNX Runtime has them; inputs, outputs,
 * initializers and Constant nodes; tensor payloads against their dims and
 * dtype before being read; shapes agree; the nodes form a DAG; at most 4096
 * nodes) and lowered:
 *   - operator form: QLinearConv, QLinearMatMul (2-D), com.microsoft QGemm (transB 0/1),
 *     QLinearAdd and QLinearGlobalAveragePool, MaxPool on uint8/int8;
 *     QDQ form: DequantizeLinear -> Conv/Gemm/MatMul/Add [-> Relu/Clip] ->
 *     QuantizeLinear, MaxPool/Flatten/Reshape between DequantizeLinear and
 *     QuantizeLinear, AveragePool/GlobalAveragePool when the scale and zero
 *     point are kept: all become device operators (tsr_netdesc nodes).
 *     Requantization follows ONNX Runtime: the real multiplier x_scale *
 *     w_scale / y_scale in float32, applied with one rounding (see
 *     tsr_ox_rq_params); the add uses MLAS's fixed-point QLinearAdd arithmetic.
 *     Per-tensor and per-channel weight scales, int8 and uint8; constant
 *     weights whose w - w_zp fit int8 are recoded to int8 zero point 0.
 *     A Gemm over an [N,K] input is a device dense operator, and so is a
 *     QDQ MatMul of [..., K] by a constant [K, N] (a transformer's Linear:
 *     a dense over the rows, the output an alias in the N-D shape). A model may
 *     carry exact requantization integers in metadata
 *     "tessera.requant/<node>" (see tsr_ox_meta_ints in tsr_onnx_attr.c),
 *     used after a check that they are the scales' multipliers.
 *   - QuantizeLinear of a float tensor, DequantizeLinear of a result,
 *     Softmax, ArgMax and float Relu run on the host in plain C kernels
 *     (ONNX Runtime's formulas: round half to even, saturate); so do
 *     ConvInteger and MatMulInteger (int32 results; 2-D conv, group 1;
 *     batched matmul with B 2-D or of A's batch shape), QLinearMatMul of
 *     more than 2-D operands (float32 multiplier as ONNX Runtime), the QDQ
 *     MatMul of two activations (attention's Q.K^T, attention.V) with the
 *     same QLinearMatMul arithmetic, the QDQ Add and Mul of an activation
 *     and a constant (a bias, a position embedding, a LayerNorm weight) or
 *     of two activations of one shape (a Mul; an Add the device cannot
 *     take) with MLAS's QLinearAdd / QLinearMul arithmetic, and
 *     Concat of two inputs along any axis (QDQ: inputs with one shared
 *     scale and zero point, the quantized bytes concatenated);
 *   - the standard float ops run on the host too (onnx/ops/tsr_ox_math.c,
 *     kernels in tsr_onnx_hostf.c): activations (Sigmoid, HardSigmoid,
 *     HardSwish, Tanh, LeakyRelu, Elu, Softplus, Clip, Erf, Gelu), math with
 *     multidirectional broadcasting (Add, Sub, Mul, Div, Pow, Min, Max,
 *     Sqrt, Reciprocal, Neg, Abs, Exp, Log), comparisons and Where,
 *     ReduceMean/Sum/Max/Min over any axes, LayerNormalization, MatMul of
 *     two activations, Gather, Slice, Expand, and a Transpose that moves
 *     data; in a QDQ model between the host DequantizeLinear and
 *     QuantizeLinear. Add and MatMul/Gemm stay on the device where it can
 *     run them (two quantized views that share a segment; constant weights);
 *   - shape subgraphs fold at import (the shapes are known once the batch
 *     is): Shape, Size, Range, Concat of constants, Squeeze/Unsqueeze, and
 *     any op above whose inputs are all constants (int64 arithmetic,
 *     Equal/Where, Gather, Slice, Cast); a graph input may be int64 (token
 *     ids for a host Gather);
 *   - Constant, and Cast/ConstantOfShape/Identity/DequantizeLinear of
 *     constants, are folded at import; Flatten, Reshape, Cast to the same
 *     type, Squeeze/Unsqueeze and a Transpose that keeps the order of the
 *     dimensions > 1 only relabel.
 * A node neither side can run is an error naming the node, its op type and
 * why, before anything runs. Consecutive device operators with one input
 * from outside and one tensor read outside form a segment (a DAG: residual
 * branches stay inside), run as one tsr_graph (tsr_graph_from_netdesc); a
 * conv whose weights need several int8 parts runs alone (tsr_conv2d_run).
 */
#ifndef TSR_ONNX_H
#define TSR_ONNX_H

#include <stddef.h>
#include <stdio.h>

#include "tsr_driver.h"
#include "tsr_npy.h"

/* Largest .onnx file accepted (bytes) and largest tensor (elements).
 * 256 MiB: the file is read whole (tsr_file: regular files only, so a FIFO
 * or a device is refused instead of blocking), then protobuf-c copies it
 * and the importer copies the constants again, about 3x the file in
 * memory. External data is not supported, so every weight is in the file;
 * the quantized models the device runs are far smaller (ResNet-50 int8
 * ~26 MB, VGG-16 int8 ~140 MB); protobuf's own 2 GiB limit would allow a
 * 6 GiB peak for a file Tessera could not place on the device anyway. */
#define TSR_ONNX_MAX_FILE (256u << 20)
#define TSR_ONNX_MAX_ELEMS (1LL << 26)

typedef struct tsr_onnx tsr_onnx_t;

/* Ops with a device form and a host form whose default a user may change
 * (tessera infer --place KIND=device|host): the Concat along channels as
 * device views (default: device where the config allows), the QDQ MatMul of
 * two activations (default: device where it fits), ShuffleNet's channel
 * shuffle and chunk as one-hot 1x1 convs (default: device), QLinearSoftmax
 * (default: device only next to device work, ACT_LUT >= 4; device: every
 * one that fits; host: none) and the bias Add of a device dense (default:
 * device where an exact form exists). "device" still needs the device form
 * to exist; "host" keeps every one of them on the host. */
enum { TSR_PLACE_CONCAT, TSR_PLACE_ATTN_MATMUL, TSR_PLACE_SHUFFLE, TSR_PLACE_SOFTMAX, TSR_PLACE_BIAS,
       TSR_PLACE_NKINDS };
enum { TSR_PLACE_DEFAULT = 0, TSR_PLACE_DEVICE, TSR_PLACE_HOST };
typedef struct {
    unsigned char place[TSR_PLACE_NKINDS]; /* TSR_PLACE_DEFAULT, _DEVICE or _HOST per kind */
} tsr_onnx_opts_t;
/* Add "KIND=device|host[,KIND=...]" (KIND: concat, attn-matmul, shuffle,
 * softmax, bias) to o; a value equal to the kind's default is stored as
 * TSR_PLACE_DEFAULT. TSR_EINVAL naming the unknown kind or value. */
int tsr_onnx_parse_place(const char *arg, tsr_onnx_opts_t *o);
/* The choices of o that differ from the defaults as "KIND=VALUE,..." into
 * buf ("" when none). */
void tsr_onnx_place_str(const tsr_onnx_opts_t *o, char *buf, size_t n);

/* Import path; batch is the size given to a symbolic first input dimension
 * (>= 1). Errors (tsr_errmsg) name the file, and the node or tensor.
 * Placement options as all defaults. */
int tsr_onnx_load(const char *path, int batch, tsr_onnx_t **out);
/* Same from a file image in memory (name used in messages). */
int tsr_onnx_load_buffer(const void *buf, size_t n, const char *name, int batch, tsr_onnx_t **out);
/* The two with placement options (NULL: the defaults). */
int tsr_onnx_load_opts(const char *path, int batch, const tsr_onnx_opts_t *o, tsr_onnx_t **out);
int tsr_onnx_load_buffer_opts(const void *buf, size_t n, const char *name, int batch, const tsr_onnx_opts_t *o,
                              tsr_onnx_t **out);
void tsr_onnx_free(tsr_onnx_t *m);

/* One line per ONNX node: where it runs (device segment, host, folded
 * into which device operator, constant). */
void tsr_onnx_print_placement(const tsr_onnx_t *m, FILE *f);
/* The same placement as JSON, for scripts (the zoo table): one object
 * {"model", "nodes", "device_ops", "segments", "host_ops", "placement":
 * [per ONNX node in graph order: {"index", "name" (in full), "op",
 * "side": "device" | "host" | "folded" | "alias" | "view" | "constant",
 * "segment" (device: its segment, else -1), "kernel" (host: the kernel's
 * name; device: the operator kind; folded: the device operator it is part
 * of; else ""), "macs" (multiply-accumulates of a conv, dense or matmul
 * lop, batch included; 0 otherwise)}]}. Names are made safe by
 * tsr_strsafe (control and non-UTF-8 bytes as \xNN, written "\\xNN" in
 * JSON) and not cut. TSR_OK or TSR_EIO when f fails. */
int tsr_onnx_write_placement_json(const tsr_onnx_t *m, FILE *f);
/* Set the model up for a config before prepare, so that the placement
 * printed is the one that runs: on a config with activation tables
 * (ACT_LUT > 0) the quantized elementwise chains (DequantizeLinear ->
 * Sigmoid, HardSwish, SiLU, GELU, ... -> QuantizeLinear) become device
 * activation tables, bit-identical to the host path (tsr_onnx_act.c), and
 * the segments are formed again; ACT_LUT = 0 changes nothing. On a config
 * with EXACT_REQUANT the quantized Adds whose device form is not ONNX
 * Runtime's bytes (no exact integer form) become host kernels that are
 * (the placement says so). Once set up with tables or EXACT_REQUANT, a
 * config without them is refused (load the model again).
 * tsr_onnx_prepare calls it. */
int tsr_onnx_set_target(tsr_onnx_t *m, const tsr_config_t *cfg);
/* Device nodes and host nodes after lowering. */
int tsr_onnx_device_ops(const tsr_onnx_t *m);
int tsr_onnx_host_ops(const tsr_onnx_t *m);

/* Build and plan every device segment on dev (cfg: dev's config).
 * TSR_ONNX_KEEP_ALL: every device tensor keeps its buffer, so that
 * tsr_onnx_read_value can read tensors inside segments (no reuse). */
#define TSR_ONNX_KEEP_ALL 1u
/* (tsr_onnx_set_target first: prepare calls it with its config.) */
int tsr_onnx_prepare(tsr_onnx_t *m, const tsr_config_t *cfg, tsr_device_t *dev, unsigned flags);
/* Run: in is the (single) graph input, its dtype and shape as declared;
 * out receives the first graph output (allocated; int64 results are
 * written as int32). */
int tsr_onnx_run(tsr_onnx_t *m, const tsr_tensor_t *in, tsr_tensor_t *out);
/* After a run: the bytes of the value called name (a host tensor, a
 * device segment's output, or with TSR_ONNX_KEEP_ALL a tensor inside a
 * segment; otherwise TSR_EINVAL saying it stays on the device). int64
 * values are narrowed to int32. */
int tsr_onnx_read_value(const tsr_onnx_t *m, const char *name, tsr_tensor_t *out);
/* Before preparing: TSR_OK if tsr_onnx_read_value(m, name) will succeed
 * after a run prepared with flags, else the error it would give (no such
 * value, a folded DequantizeLinear, inside a segment without
 * TSR_ONNX_KEEP_ALL), so that a command can refuse a bad name before it
 * runs anything or writes any output. */
int tsr_onnx_check_value(const tsr_onnx_t *m, const char *name, unsigned flags);
/* Per-layer table of every device segment of the last run. */
void tsr_onnx_print_report(const tsr_onnx_t *m, FILE *f);

/* Read a serialized TensorProto (.pb, as the ONNX node tests ship) into a
 * host tensor (int8, uint8, int32, float32; int64 narrowed to int32 when it fits). */
int tsr_onnx_read_tensor_pb(const char *path, tsr_tensor_t *out);

#endif
