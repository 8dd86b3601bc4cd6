/*
 * tsr_op: the JIT's operator registry. One enum names every operator
 * (tsr_op_kind_e; the network description, the graph runtime and the
 * one-operator runner all use it: tsr_nd_kind_e, tsr_graph_op_e and
 * tsr_oprun_e are aliases of it) and one table (tsr_op_def) says, per
 * operator, what the callers used to spell out in their own switches:
 * its name, inputs, whether it has weights, its parameter check with the
 * shapes its tensors must have, and its single-operator entry points
 * (plan, plan over device tensors, write, execute, read, free).
 *
 * Adding an operator: a kind here, a row in tsr_op.c, its lowering.
 */
#ifndef TSR_OP_H
#define TSR_OP_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_act.h"
#include "tsr_concat.h"
#include "tsr_conv2d.h"
#include "tsr_dense.h"
#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_eltwise.h"
#include "tsr_gavg.h"
#include "tsr_mul.h"
#include "tsr_npy.h"
#include "tsr_pool.h"
#include "tsr_softmax.h"

/* Every operator. The values are those of the network description's node
 * kinds (the first user), 0 is none. */
typedef enum tsr_op_kind {
    TSR_OPK_CONV = 1, /* conv2d (groups 1 or depthwise) + bias + requantization + clamp: tsr_conv2d_params_t */
    TSR_OPK_POOL,     /* max / avg / global-avg pool: tsr_pool_params_t */
    TSR_OPK_ADD,      /* quantized add of two tensors (TFLite ADD) + clamp: tsr_add_params_t */
    TSR_OPK_CLIP,     /* relu / clip: tsr_clip_params_t */
    TSR_OPK_DENSE,    /* fully connected + bias + requantization: tsr_dense_params_t */
    TSR_OPK_RESHAPE,  /* relabelling of the same bytes (graph only; no kernel, no parameters) */
    TSR_OPK_ACT,      /* activation table over a tensor (ACT_LUT; graph only): tsr_op_act_t */
    TSR_OPK_MUL,      /* a tensor times a per-channel vector (squeeze-and-excite; graph only): tsr_mul_params_t */
    TSR_OPK_GAVG,     /* global average into its own quantization, any window (graph only): tsr_gavg_params_t */
    TSR_OPK_SOFTMAX,  /* quantized softmax along w or over h*w (ACT_LUT >= 4; graph only): tsr_softmax_params_t */
    TSR_OPK_CONCAT,   /* two tensors along channels as views of the output (graph only; no kernel): tsr_concat_params_t */
} tsr_op_kind_e;
#define TSR_OPK_COUNT 12 /* one past the last kind */

/* An activation table node's parameters: the tensors' shape, types and
 * zero points (what the graph matches against; the table itself maps
 * device bytes to device bytes whatever they are, tsr_act.h) and the
 * table. Input and output have the same shape; types and zero points
 * may differ (a QDQ chain's DequantizeLinear and QuantizeLinear). */
typedef struct tsr_op_act {
    int n, c, h, w;        /* NCHW shape of x and y */
    tsr_dtype_e x_dtype;   /* TSR_DT_INT8 or TSR_DT_UINT8 */
    int32_t x_zp;          /* within x_dtype's range */
    tsr_dtype_e y_dtype;
    int32_t y_zp;
    tsr_act_table_t table; /* device terms: entry[(x - off_x) & 255] = y - off_y */
} tsr_op_act_t;

/* A tensor an operator reads or writes, as its parameters say it must be. */
typedef struct tsr_op_io {
    int n, c, h, w;        /* NCHW shape */
    tsr_dtype_e dtype;     /* TSR_DT_INT8 or TSR_DT_UINT8 */
    int32_t zp;            /* zero point */
} tsr_op_io_t;

/* The plan of any operator (what tsr_op_def_t's plan functions fill). */
typedef union tsr_op_plan {
    tsr_conv2d_plan_t conv;
    tsr_dense_plan_t dense;
    tsr_eltwise_plan_t elt;
    tsr_pool_plan_t pool;
    tsr_act_plan_t act;
    tsr_mul_plan_t mul;
    tsr_gavg_plan_t gavg;
    tsr_softmax_plan_t softmax;
} tsr_op_plan_t;

/* What a plan exposes the same way for every operator. */
typedef struct tsr_op_figures {
    const tsr_insn_t *insns; /* its stream (owned by the plan) */
    size_t ninsns;
    int kcache;              /* tsr_kc_status_e of its kernel */
    uint64_t w_bytes;        /* device DRAM of its weights ... */
    uint64_t c_bytes;        /* ... and constants */
} tsr_op_figures_t;

typedef struct tsr_op_def {
    tsr_op_kind_e kind;
    const char *name;          /* "conv", "pool", "add", "clip", "dense", "reshape", "act", "mul", "gavg", "softmax" */
    int n_inputs;              /* tensors read: 1, or 2 (add, mul) */
    int has_weights;           /* weights (and an optional int32 bias) come with the operator */
    int flat_input;            /* the input matches by N and C*H*W (dense over a flattened NCHW tensor) */
    const char *io_names[3];   /* the inputs' names then the output's, for errors ("input", "output") */
    size_t params_size;        /* sizeof its parameters (0: none) */
    /* Check the parameters (the operator's own check, its messages) and
     * give the tensors they need: io[0 .. n_inputs-1] the inputs,
     * io[n_inputs] the output. NULL for a reshape. */
    int (*check)(const void *params, tsr_op_io_t *io);
    /* One operator on a device with buffers of its own (tsr_oprun). */
    int (*plan)(tsr_device_t *dev, const void *params, tsr_op_plan_t *pl);
    /* The same over device tensors (x[0 .. n_inputs-1], y); NULL: none (dense, which the graph runs as a conv). */
    int (*plan_tensors)(tsr_device_t *dev, const void *params, const tsr_dtensor_t *const *x, const tsr_dtensor_t *y,
                        tsr_op_plan_t *pl);
    void (*plan_free)(tsr_device_t *dev, tsr_op_plan_t *pl);
    /* Host data in the operator's own layout: x (x[1]: add's b; else
     * NULL), weights w and bias (NULL without). */
    int (*write)(tsr_device_t *dev, const tsr_op_plan_t *pl, const void *const *x, const void *w,
                 const int32_t *bias);
    int (*exec)(tsr_device_t *dev, const tsr_op_plan_t *pl);
    int (*read)(tsr_device_t *dev, const tsr_op_plan_t *pl, void *y);
    void (*figures)(const tsr_op_plan_t *pl, tsr_op_figures_t *f);
} tsr_op_def_t;

/* The row of kind, or NULL for a value that names no operator. */
const tsr_op_def_t *tsr_op_def(int kind);
/* Its name, "?" for none. */
const char *tsr_op_name(int kind);

#endif
