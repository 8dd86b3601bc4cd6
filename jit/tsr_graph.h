/*
 * tsr_graph: the graph runtime. A network is built as operators over
 * tensors (conv2d incl. depthwise and strided, dense, max/avg/global pool,
 * add, relu/clip, activation tables, the multiply by a per-channel vector,
 * the global average into its own quantization, reshape as a relabelling,
 * concat along channels as views),
 * validated as it is built,
 * planned once for a device (every kernel generated or taken from the
 * kernel cache, every weight packed and uploaded, all activations placed in
 * one DRAM arena with lifetimes so buffers are reused between layers) and
 * executed many times on new inputs. Activations stay on the device in the
 * blocked layout of tsr_dtensor.h from the first layer to the last: the
 * host packs the inputs and unpacks the outputs, nothing in between (one
 * submission per layer, or with TSR_GRAPH_ONE_SUBMISSION one for the whole
 * network; no host computation or round trip between layers).
 *
 * Errors name the node: a producer/consumer shape, dtype or zero-point
 * mismatch, a tensor with two producers, a cycle, a consumer of a tensor
 * nobody produces, parameters device tensors cannot hold (weight zero
 * points that need the input packed once per int8 part, a dense over a
 * tensor whose blocked layout is not [N][K]) are refused when the node is
 * added or when the graph is planned; a failed plan frees everything it
 * allocated.
 *
 * Every execution leaves a per-layer report (tsr_graph_stats): operator,
 * shape, cycles (counter deltas on timed backends), MACs, DRAM bytes moved
 * vs compulsory, roofline bound (tsr_roofline.h); tsr_graph_print_report
 * prints it with the whole network's totals.
 */
#ifndef TSR_GRAPH_H
#define TSR_GRAPH_H

#include <stdint.h>
#include <stdio.h>

#include "tsr_conv2d.h"
#include "tsr_dense.h"
#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_eltwise.h"
#include "tsr_gavg.h"
#include "tsr_mul.h"
#include "tsr_netdesc.h"
#include "tsr_op.h"
#include "tsr_pool.h"
#include "tsr_requant.h"

typedef struct tsr_graph tsr_graph_t;

/* A node's operator: the JIT's operator kinds (tsr_op.h) under the graph's names. */
typedef tsr_op_kind_e tsr_graph_op_e;
#define TSR_GOP_CONV TSR_OPK_CONV       /* conv2d + bias + requantization + clamp (groups 1 or depthwise) */
#define TSR_GOP_DENSE TSR_OPK_DENSE     /* fully connected over an [N, K, 1, 1] tensor (run as a 1x1 conv2d) */
#define TSR_GOP_POOL TSR_OPK_POOL       /* max / avg / global-avg pool */
#define TSR_GOP_ADD TSR_OPK_ADD         /* quantized add */
#define TSR_GOP_CLIP TSR_OPK_CLIP       /* relu / clip */
#define TSR_GOP_RESHAPE TSR_OPK_RESHAPE /* relabelling of the same bytes (no kernel) */
#define TSR_GOP_ACT TSR_OPK_ACT         /* activation table (ACT_LUT) */
#define TSR_GOP_MUL TSR_OPK_MUL         /* a tensor times a per-channel vector (squeeze-and-excite) */
#define TSR_GOP_GAVG TSR_OPK_GAVG       /* global average into its own quantization (any window) */
#define TSR_GOP_CONCAT TSR_OPK_CONCAT   /* two tensors along channels, the inputs views of the output (no kernel) */

/* Plan flags. */
#define TSR_GRAPH_KEEP_ALL 1u    /* every tensor keeps its own buffer (readable after exec; no reuse), but a
                                    fused conv's output, which has none (add TSR_GRAPH_NO_FUSE for it) */
#define TSR_GRAPH_NO_TAPPACK 2u  /* never run a stem conv tap-packed (tsr_tappack.h) over its graph input */
#define TSR_GRAPH_ONE_SUBMISSION 4u /* run every layer in one submission, the streams joined by token barriers
                                       (a layer's loads wait for the previous layer's last store); the report
                                       then has whole-network counters only */
#define TSR_GRAPH_NO_FUSE 8u     /* never fuse an add into the epilogue of the conv that feeds it (below) */
#define TSR_GRAPH_NO_FUSE_ACT 16u /* by default an activation table whose input only a conv writes and only it
                                    reads (not a graph output) runs in that conv's epilogue ("conv+act"
                                    layers, the conv's output gets no buffer, no DRAM pass of its own);
                                    this flag (or TSR_GRAPH_NO_FUSE) keeps the tables as "act" layers */

/* One layer of the last execution. */
typedef struct tsr_graph_layer {
    const char *name;       /* node name */
    const char *op;         /* "conv", "dwconv", "dense", "maxpool", "avgpool", "gap", "add", "clip", "act", "mul", "gavg", "reshape",
                               "conv+add" / "dwconv+add" (an add fused into its conv; the conv's own entry is
                               then "fused", runs nothing and is left out of the table and totals; "reshape" and
                               "concat" run nothing either),
                               "conv+act" / "dwconv+act" likewise for an activation table (TSR_GRAPH_NO_FUSE_ACT) */
    char shape[64];         /* e.g. "56x56,64->64,3x3,s1" */
    double macs;            /* unpadded multiply-accumulates */
    double cycles;          /* device cycles (0 on untimed backends) */
    double moved;           /* DRAM bytes moved (counters; instruction fetch included) */
    double compulsory;      /* inputs + weights + 4-byte bias + outputs, real sizes, each once */
    double bound;           /* roofline bound, cycles (tsr_roofline_bound) */
    int memory_bound;       /* 1 if the memory term binds */
    double wall_ms;         /* host wall time of the submission (submit + wait) */
    double plan_ms;         /* time its plan took (kernel, buffers, stream; weights excluded; a conv's
                               tiling search runs before, in the totals' search_ms) */
    double upload_ms;       /* time packing and uploading its weights and constants took */
    int kcache;             /* tsr_kc_status_e of its kernel, -1 for a reshape */
} tsr_graph_layer_t;

/* Whole-network figures of the last execution and of the plan. */
typedef struct tsr_graph_totals {
    int layers;             /* nodes that ran a kernel */
    double macs, cycles, moved, compulsory, bound; /* sums over layers */
    double exec_ms;         /* wall time of the last tsr_graph_exec (inputs written to outputs read) */
    double plan_ms;         /* wall time of tsr_graph_plan */
    double plan_cpu_ms;     /* CPU time of tsr_graph_plan (all its threads; what a busy machine does not add) */
    double jit_ms;          /* of which planning the operators (kernels from the cache or generated) */
    double search_ms;       /* of which the convs' tiling searches, run ahead on search_threads threads
                               ($TESSERA_JIT_THREADS, default one per CPU); not in the layers' plan_ms */
    int search_threads;
    double upload_ms;       /* of which packing and uploading weights */
    uint64_t peak_bytes;    /* activation arena: device DRAM for all activations (lifetimes reused) */
    uint64_t tensor_bytes;  /* sum of all activation tensors' bytes (no reuse) */
    uint64_t weight_bytes;  /* device DRAM of weights, constants and identity rows */
    int kc_hits, kc_misses; /* kernels from the cache (memory or disk) / generated */
} tsr_graph_totals_t;

/* An empty graph for cfg (TSR_EINVAL for configs device tensors cannot use). */
int tsr_graph_create(const tsr_config_t *cfg, tsr_graph_t **out);
void tsr_graph_free(tsr_graph_t *g); /* also frees a plan (the device must still be open) */

/* Declare a tensor; *id gets its index (0, 1, ...). Tensors nobody
 * produces and some node reads are the graph's inputs. */
int tsr_graph_tensor(tsr_graph_t *g, int n, int c, int h, int w, tsr_dtype_e dt, int32_t zp, int *id);
/* Mark a tensor as an output (kept until the end; readable after exec). */
int tsr_graph_output(tsr_graph_t *g, int t);

/* Operators: x/a/b inputs, y output (tensor ids). Parameters, weights and
 * bias are copied. The parameters must agree with the tensors (shapes,
 * dtypes, zero points): otherwise TSR_EINVAL naming the node. */
int tsr_graph_conv2d(tsr_graph_t *g, const char *name, int x, int y, const tsr_conv2d_params_t *p, const void *w,
                     const int32_t *bias);
int tsr_graph_dense(tsr_graph_t *g, const char *name, int x, int y, const tsr_dense_params_t *p, const void *w,
                    const int32_t *bias);
int tsr_graph_pool(tsr_graph_t *g, const char *name, int x, int y, const tsr_pool_params_t *p);
int tsr_graph_add(tsr_graph_t *g, const char *name, int a, int b, int y, const tsr_add_params_t *p);
int tsr_graph_clip(tsr_graph_t *g, const char *name, int x, int y, const tsr_clip_params_t *p);
/* Requantization of a tensor on its own (operators.md "Requantization",
 * the output stage of conv2d and dense): y = clamp(requant(x - x_zp) +
 * y_zp, act_min, act_max), per tensor or per channel, e.g. to move a tensor
 * to another scale and zero point between operators (ONNX's
 * DequantizeLinear -> QuantizeLinear pair). It runs on the device as a
 * depthwise 1x1 conv with unit weights and no bias, whose output stage is
 * exactly this; the layer table names it "requant". */
typedef struct tsr_requant_params {
    int n, c, h, w;                /* shape of x and y */
    tsr_dtype_e x_dtype;           /* TSR_DT_INT8 or TSR_DT_UINT8 */
    int32_t x_zp;                  /* within x_dtype's range */
    /* the output: y_dtype, y_zp, mult, shift, rq_count (1 per tensor or C per channel), act_min,
     * act_max (tsr_requant.h), also as .rq */
    TSR_REQUANT_MEMBERS;
} tsr_requant_params_t;
int tsr_graph_requantize(tsr_graph_t *g, const char *name, int x, int y, const tsr_requant_params_t *p);
/* An activation table (tsr_act.h, operators.md "Activation tables") from
 * x to y: every byte of y is t's entry for the byte of x (device terms:
 * entry[(x - off_x) & 255] = y - off_y), so x and y have one shape and any
 * int8/uint8 types and zero points. Needs a config with activation tables:
 * ACT_LUT = 0 is refused here, naming the node and the key. Planned by
 * tsr_act_plan_tensors; the layer table names it "act". */
int tsr_graph_act(tsr_graph_t *g, const char *name, int x, int y, const tsr_act_table_t *t);
/* The quantized multiply of x [N, C, H, W] by the per-channel vector s
 * [N, C, 1, 1] into y of x's shape (tsr_mul.h, operators.md "mul by a
 * per-channel vector": ONNX Runtime's QLinearMul with the vector broadcast
 * over H, W; a squeeze-and-excite block's gate). Planned by
 * tsr_mul_plan_tensors (refused there, naming the node, when the config has
 * no EXACT_REQUANT and the scales have no exact integer form,
 * tsr_mul_fixed); the layer table names it "mul". */
int tsr_graph_mul(tsr_graph_t *g, const char *name, int x, int s, int y, const tsr_mul_params_t *p);
/* The global average of x [N, C, H, W] into y [N, C, 1, 1] with y's own
 * quantization (tsr_gavg.h: the window sum of x - x_zp, then the conv's
 * requantization), over any H*W (a depthwise conv of weight 1 needs the
 * window's rows on chip); the layer table names it "gavg". */
int tsr_graph_gavg(tsr_graph_t *g, const char *name, int x, int y, const tsr_gavg_params_t *p);
/* y = the quantized softmax of x along w (or over h*w with p->spatial;
 * tsr_softmax.h: integers on the device, ACT_LUT >= 4 for the exponent's
 * tables, refused at plan without); the layer table names it "softmax". */
int tsr_graph_softmax(tsr_graph_t *g, const char *name, int x, int y, const tsr_softmax_params_t *p);
/* y = a and b along channels (tsr_concat.h): y [N, Ca + Cb, H, W], all
 * three of one dtype and zero point; no kernel runs. The plan makes a and
 * b views of y's buffer (their producers write their channel slices in
 * place, y lives from the first producer to the last reader), copying on
 * the device first (an identity requantize, "requant" in the report) an
 * input that cannot be a view: a graph input, an input already a slice of
 * another concat, or b = a. Refused here, naming the node, when the layout
 * does not allow views (N > BATCH, Ca not a multiple of BLOCK). More
 * inputs: a chain (concat(concat(a, b), c) ...), the intermediates views too. */
int tsr_graph_concat(tsr_graph_t *g, const char *name, int a, int b, int y);
/* y relabels x's bytes: same N, C, dtype and zero point and H*W (the
 * blocked layout is then identical), e.g. [N,C,1,1] -> [N,C,1,1] views. */
int tsr_graph_reshape(tsr_graph_t *g, const char *name, int x, int y);

/* Build a graph from a network description (tsr_netdesc.h); the netdesc's
 * output is marked as the graph's output. */
int tsr_graph_from_netdesc(const tsr_config_t *cfg, const tsr_netdesc_t *nd, tsr_graph_t **out);

/* Plan for dev: order the nodes (a cycle is an error naming a node on it),
 * place the activations, plan every operator and upload its weights. On
 * failure nothing stays allocated on the device. A conv with few input
 * channels (the stem) that is the only reader of a graph input runs
 * tap-packed (tsr_tappack.h): that input is then held in the packed layout,
 * packed on the host at the edge (TSR_GRAPH_NO_TAPPACK: never). An add
 * one of whose inputs is a conv's output that nothing else reads (not a
 * graph output) runs in that conv's epilogue (tsr_conv2d_plan_tensors_add:
 * the conv's output never reaches DRAM), when the conv's parameters leave
 * room for it on the device (else the add runs on its own); the report
 * shows one layer, op "conv+add", named after the conv, and the conv's
 * output tensor has no buffer (tsr_graph_tensor_fused; even with
 * TSR_GRAPH_KEEP_ALL, which keeps every tensor that has one. With
 * TSR_GRAPH_NO_FUSE: never). */
int tsr_graph_plan(tsr_graph_t *g, tsr_device_t *dev, unsigned flags);
/* Run once: inputs[i] holds the NCHW bytes of the i-th input tensor (in
 * id order; the inputs array must have one entry per input), outputs[j]
 * receives those of the j-th marked output (NULL entries are skipped; on a
 * timing-only device, whose data is never computed, none is written:
 * tsr_device_data_valid; nor are the inputs packed into device DRAM, only
 * checked to be there). */
int tsr_graph_exec(tsr_graph_t *g, const void *const *inputs, void *const *outputs);
/* NCHW bytes of tensor t after exec (an output, or any tensor with
 * TSR_GRAPH_KEEP_ALL; a graph input held tap-packed is refused). */
int tsr_graph_read_tensor(tsr_graph_t *g, int t, void *dst);

/* Queries. */
int tsr_graph_ntensors(const tsr_graph_t *g);
int tsr_graph_nnodes(const tsr_graph_t *g);
const tsr_dtensor_t *tsr_graph_tensor_desc(const tsr_graph_t *g, int t);
/* 1 if tensor t is a conv's output that an add fused into the conv
 * replaced in the plan (it never reaches DRAM: tsr_graph_read_tensor refuses it). */
int tsr_graph_tensor_fused(const tsr_graph_t *g, int t);
/* The node producing tensor t ("" if an input). */
const char *tsr_graph_producer(const tsr_graph_t *g, int t);
/* Layer i of the last execution, in execution order (NULL past the end). */
const tsr_graph_layer_t *tsr_graph_layer(const tsr_graph_t *g, int i);
/* The node layer i is named after, as its index in the order the nodes
 * were added (= the netdesc's node index for tsr_graph_from_netdesc): its
 * own, or for a "conv+add" layer the conv's; -1 past the end or before a
 * plan. Lets a caller join a layer to what it built the node from. */
int tsr_graph_layer_node(const tsr_graph_t *g, int i);
/* The instruction stream planned for layer i (tsr_graph_layer's order; NULL and *n = 0 for a node that runs
 * nothing, a reshape), or with i = -1 the joined stream of TSR_GRAPH_ONE_SUBMISSION (NULL without it).
 * Valid until the plan is freed (stream comparisons, disassembly). */
const tsr_insn_t *tsr_graph_stream(const tsr_graph_t *g, int i, size_t *n);
void tsr_graph_totals(const tsr_graph_t *g, tsr_graph_totals_t *out);
/* DRAM bytes per cycle of the bounds (default 8, see tsr_roofline_dram_bw). */
void tsr_graph_set_dram_bw(tsr_graph_t *g, double bytes_per_cycle);
/* The per-layer table and the totals. */
void tsr_graph_print_report(const tsr_graph_t *g, FILE *f);

#endif
