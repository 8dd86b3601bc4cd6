/*
 * tsr_onnx_ir: the importer's internal representation (not installed; the
 * public API is tsr_onnx.h). Why this shape: a value table indexed by ONNX
 * tensor name holds each value's concrete shape, constant bytes and, for a
 * DequantizeLinear output that nobody needs in float, the quantized value
 * it views; operators are lowered in topological order onto "lops"
 * (lowered operators), each on one side; relabellings (Flatten, Reshape,
 * Cast to the same type) only alias. The passes, in order:
 *   tsr_onnx_load.c      protobuf parsing, limits, initializers, the graph input
 *   tsr_onnx_lower.c     topological order, then each node through the op registry
 *   tsr_onnx_qdq.c       (before lowering) the QDQ groups: the Q / Relu / Clip after a target node
 *   tsr_onnx_ops.c       the registry: (domain, op type, opset range) -> handler in ops/
 *   tsr_onnx_act.c       (configs with ACT_LUT) quantized elementwise chains as device activation tables
 *   tsr_onnx_segment.c   zero points agreed, device lops grouped into segments
 *   tsr_onnx_exec.c      planning segments, running device segments and host kernels
 *   tsr_onnx_host.c      the host kernels (a table by kind)
 * Helpers every pass shares are declared here, defined in tsr_onnx_val.c
 * (the value and lop tables) and tsr_onnx_attr.c (attributes, constants,
 * quantization parameters).
 */
#ifndef TSR_ONNX_IR_H
#define TSR_ONNX_IR_H

#include <stdint.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "tsr_bmm.h"
#include "tsr_graph.h"
#include "tsr_netdesc.h"
#include "tsr_onnx.h"
#include "tsr_strsafe.h" /* TSR_SAFE for names in messages */

/* ONNX TensorProto element types the importer handles (the others are refused at load). */
enum { ET_FLOAT = 1, ET_UINT8 = 2, ET_INT8 = 3, ET_INT32 = 6, ET_INT64 = 7 };
enum { ET_BOOL = 9 };       /* Equal/Less/Not results and Where's condition (one byte, 0 or 1) */
enum { SIDE_NONE = 0, SIDE_DEV, SIDE_HOST };
/* Host kernels (tsr_onnx_host.c has their table). */
enum { H_QUANT = 1, H_DEQUANT, H_SOFTMAX, H_ARGMAX, H_RELU, H_CONVINT, H_MATMULINT, H_QMATMUL, H_CONCAT,
       H_QLUTC /* a table of 256 entries per channel (zpa; geo[0] channels, geo[1] elements per channel and image):
                  a BatchNormalization without an exact device form on a config with EXACT_REQUANT */ };
/* Which kernels read values through geo[0..3] is their table row's geo_vals (tsr_ox_host_geo_vals), not
 * their number. */

/* The float and integer host kernels of tsr_onnx_hostf.c (numbered apart
 * from the kinds above so that additions there never collide): their node's
 * own value ids (not bases: the shapes as the node sees them) in geo[0..3]. */
enum { H_FUNARY = 64, H_FNARY, H_GATHER, H_SLICE, H_FTRANSPOSE, H_REDUCE, H_LAYERNORM, H_FMATMUL, H_QSOFTMAX,
       H_QADDC /* quantized Add with a constant operand (ONNX Runtime's QLinearAdd) */,
       H_QLUT /* a quantized unary op as a lookup table of 256 entries (zpa; QLinearSigmoid, QLinearLeakyRelu) */ };
/* H_FUNARY's operation (lop axis; alpha in scale, beta in mult) */
enum { FU_SIGMOID, FU_HARDSIGMOID, FU_HARDSWISH, FU_TANH, FU_LEAKYRELU, FU_CLIP, FU_ERF, FU_GELU, FU_GELU_TANH,
       FU_SQRT, FU_RECIP, FU_NEG, FU_ABS, FU_EXP, FU_LOG, FU_ELU, FU_SOFTPLUS, FU_NOT, FU_RELU, FU_SILU };
/* H_FNARY's operation (lop axis): elementwise with multidirectional broadcasting */
enum { FN_ADD, FN_SUB, FN_MUL, FN_DIV, FN_POW, FN_MIN, FN_MAX, FN_EQUAL, FN_LESS, FN_GREATER, FN_AND, FN_OR,
       FN_WHERE, FN_EXPAND };
/* H_REDUCE's operation (lop axis) */
enum { RD_MEAN, RD_SUM, RD_MAX, RD_MIN };

/* Where a node went (m->placed[node]); the placement table prints it. */
typedef enum ox_placed {
    OX_UNPLACED = 0,        /* not lowered yet */
    OX_CONST,               /* folded into a constant at import */
    OX_ALIAS,               /* a relabelling: its output aliases its input's bytes */
    OX_LOP,                 /* a lowered operator of its own (node_lop) */
    OX_FOLDED,              /* part of another node's lop (a QDQ group's Q, Relu, Clip) */
    OX_VIEW,                /* a DequantizeLinear its consumers read as quantized bytes */
} ox_placed_e;

#define MAXD 8

typedef struct ox_val {
    const char *name;       /* ONNX name (points into the unpacked model) */
    int elem;               /* ONNX element type */
    int ndim;               /* rank, dims: concrete shape */
    int64_t dims[MAXD];
    int defined;            /* 1 once produced (input, initializer, node output) */
    uint8_t *cdata;         /* constant bytes (owned), NULL if computed at run time */
    size_t nbytes;          /* bytes of the value */
    int base;               /* value holding the bytes (itself unless an alias) */
    int view_of;            /* DequantizeLinear not materialized: the quantized value it views, else -1 */
    float *vscale;          /* the view's scales (owned copy), vcount of them */
    int32_t *vzp;           /* the view's zero points (owned copy) */
    int vcount;             /* 1 per tensor, or per channel along axis 0/1 */
    int vaxis;              /* channel axis of a per-channel view */
    int real_lop;           /* lop that materializes the float (host DQ), -1 */
    int prod;               /* lop producing the base's bytes, -1 for inputs and constants */
    int32_t zp;             /* quantized values: zero point the device operators agree on (has_zp) */
    int has_zp;
    int seg_tensor;         /* tensor id inside its device segment while building it */
    uint8_t *rt;            /* run-time bytes (owned by the base) */
    int in_act;             /* computed inside a device activation table only (tsr_onnx_act.c): never materialized */
    int padded;             /* held with padding channels on the device (ops/tsr_ox_shuffle.c): not readable */
} ox_val_t;

typedef struct ox_lop {
    int node;               /* ONNX node it stands for (the last one folded into it) */
    int side;               /* SIDE_DEV or SIDE_HOST */
    int hkind;              /* host kernel (H_*) */
    int in, in2, out;       /* value ids (in2 = -1 unless two inputs) */
    tsr_nd_node_t nd;       /* device operator (tensor ids filled per segment; arrays owned) */
    float scale;            /* host Q/DQ scale */
    int32_t zp;             /* host Q/DQ zero point */
    int axis;               /* Softmax/ArgMax axis (normalized) */
    int keepdims;           /* ArgMax */
    int seg;                /* device segment, -1 for host */
    int name_node;          /* device: the ONNX node nd.name comes from (its own, or an activation table's
                               chain's first node), for the report's rows (tsr_onnx_report.c) */
    int64_t geo[16];        /* H_CONVINT: kh, kw, stride_h, stride_w, pad top, left, bottom, right, then
                               N, C, H, W, O, OH, OW; H_MATMULINT/H_QMATMUL: batch, M, K, N, B batched;
                               H_CONCAT: outer, bytes of in and of in2 per outer index (the shapes as
                               the node sees them: in/in2 are bases, possibly of another shape) */
    int32_t *zpa, *zpb;     /* H_CONVINT/H_MATMULINT/H_QMATMUL: zero points of in (zpa) and in2 (zpb), owned */
    int nzpa, nzpb;         /* their counts: 1 per tensor, else per row of in / per output column or channel */
    int32_t yzp;            /* H_QMATMUL: output zero point */
    float mult;             /* H_QMATMUL: a_scale * b_scale / y_scale (float32, as ONNX Runtime) */
    int cat_rq;             /* device: a Concat input's requantize (scale, zp: the input's; mult, yzp: the
                               output's), which an activation table replaces exactly with ACT_LUT
                               (ops/tsr_ox_concat.c tsr_ox_concat_tables) */
    int ort_host;           /* a quantized Add or BatchNormalization whose device form is not ONNX Runtime's
                               bytes (no exact integer form, ops/tsr_ox_eltwise.c, ops/tsr_ox_conv.c): 1 on the
                               device (the host kernel takes it on a config with EXACT_REQUANT: an Add's scale,
                               mult, geo[7] keep its scales, a BN's zpa holds ORT's bytes per channel), 2 on the
                               host for that reason (the placement says so) */
    int64_t host_ns;        /* host: its kernel's CPU time in the last tsr_onnx_run (the report's host table:
                               what the DSE's host-time model is calibrated on, scripts/dse/README.md) */
} ox_lop_t;

typedef struct ox_seg {
    tsr_netdesc_t nd;       /* shallow: node arrays point into the lops' */
    int in_val, out_val;    /* external input and output values (bases) */
    int first, last;        /* lop range */
    tsr_graph_t *g;         /* planned graph (NULL when solo) */
    int solo;               /* one conv whose w - w_zp needs int8 parts (the input packed once per
                               part): device tensors hold one copy, so it runs alone by tsr_conv2d_run */
    int bmm;                /* one matmul of two activations (tsr_ox_is_bmm): no netdesc (nd.nnodes 0), run
                               alone by jit/tsr_bmm.h with its two operands (in_val, the lop's in2) */
    tsr_bmm_plan_t *bp;     /* its plan (prepare), NULL otherwise */
    double bmm_cycles, bmm_moved; /* its counters' deltas in the last run (cycles 0 on untimed backends) */
} ox_seg_t;

/* A QDQ group's output side, selected before lowering (tsr_onnx_qdq.c): the
 * float output of a target node (Conv, Gemm, MatMul, Add, AveragePool,
 * GlobalAveragePool) consumed only by a QuantizeLinear, perhaps through one
 * Relu or Clip. The walk records what it found and where it stopped; the
 * handler reads the members' parameters when it gets there, so that every
 * error comes at the same point of lowering as it would by looking ahead. */
enum { OX_SEL_NONE = 0, OX_SEL_OK, OX_SEL_NOT_SOLE, OX_SEL_BAD_OP };
typedef struct ox_qdq_sel {
    int status;             /* OX_SEL_*: NONE for nodes that are no target */
    int act;                /* the Relu or Clip between the node and the QuantizeLinear, -1 */
    int q;                  /* the QuantizeLinear closing the group, -1 */
    int stop_step;          /* a broken walk: 0 right after the node, 1 after its Relu/Clip */
    int stop_node;          /* OX_SEL_BAD_OP: the consumer that is neither Relu/Clip nor QuantizeLinear */
    int q0, dq0;            /* a Relu/Clip kept between Q/DQ pairs (node -> q0 -> dq0 -> act -> q, the
                               int8-symmetric form): the inner QuantizeLinear and DequantizeLinear, -1 */
} ox_qdq_sel_t;

/* The output quantization a QDQ group gives its target node. */
typedef struct ox_qout {
    float scale;
    int32_t zp;
    int elem;               /* ET_UINT8 or the QuantizeLinear's zero point type */
    int relu;               /* a Relu folded in */
    int has_clip;           /* a Clip folded in, bounds in float */
    float clip_lo, clip_hi;
} ox_qout_t;

/* A table of names owned elsewhere (the model's strings), each once with
 * an int (tsr_onnx_val.c): open addressing, at most half full. */
typedef struct ox_names {
    const char **key;       /* NULL: a free slot */
    int *val;
    uint32_t cap;           /* a power of 2 (0: none) */
} ox_names_t;

struct tsr_onnx {
    char path[256];         /* file name for messages */
    Onnx__ModelProto *mp;   /* unpacked model */
    Onnx__GraphProto *gp;
    int nvals, capvals;
    ox_val_t *vals;
    int *vidx;              /* values by name (tsr_onnx_val.c): open addressing, the lowest id of each non-empty
                               name, -1 free; vidx_cap a power of 2 (0: none, tsr_ox_find_val scans) */
    int vidx_cap, vidx_n;
    ox_names_t cons;        /* per input name: tsr_ox_sole_consumer's answer (built at its first call) */
    int cons_built;         /* 1: cons is built (cap 0: no memory for it, scans) */
    int *order;             /* nodes in topological order */
    int *placed;            /* per node: ox_placed_e */
    int *node_lop;          /* per node: its lop (or the lop it is folded into), -1 */
    ox_qdq_sel_t *qsel;     /* per node: its QDQ group (tsr_onnx_qdq.c) */
    int nlops;
    ox_lop_t *lops;
    int nsegs;
    ox_seg_t *segs;
    int in_val, out_val;    /* graph input and first output */
    tsr_device_t *dev;
    unsigned flags;         /* tsr_onnx_prepare flags */
    int64_t opset;          /* ai.onnx opset of the model */
    int64_t ms_opset;       /* com.microsoft opset of the model (1 when not imported: ONNX Runtime's
                               contrib operators have one version) */
    int nexact;             /* operators whose requantization integers came from tessera.requant metadata */
    int act_lut;            /* the lops were set up for a config with activation tables (tsr_onnx_set_target) */
    int exact_rq;           /* ... for a config with EXACT_REQUANT: Adds without an exact device form on the host */
    int cat_block, cat_batch; /* the target's BLOCK and BATCH Concats were placed for (0: no target yet, on the
                               host; ops/tsr_ox_concat.c) */
    tsr_onnx_opts_t opts;   /* placement options (tsr_onnx_load_opts): the op handlers read opts.place */
};

/* ------------------------------------------------------- small helpers */

static inline size_t esize(int e)
{
    switch (e) {
    case ET_FLOAT: case ET_INT32: return 4;
    case ET_UINT8: case ET_INT8: return 1;
    case ET_INT64: return 8;
    case ET_BOOL: return 1;
    default: return 0;
    }
}

static inline const char *ename(int e)
{
    switch (e) {
    case ET_FLOAT: return "float";
    case ET_UINT8: return "uint8";
    case ET_INT8: return "int8";
    case ET_INT32: return "int32";
    case ET_INT64: return "int64";
    case ET_BOOL: return "bool";
    default: return "unsupported type";
    }
}

static inline int64_t numel(const ox_val_t *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++)
        n *= v->dims[i];
    return n;
}

/* Elements a host lop reads and writes (its inputs' and its output's, batch
 * included): the size its cost scales with in the DSE's host-time model
 * (placement JSON "elements", the report's host table). */
static inline int64_t host_elements(const tsr_onnx_t *m, const ox_lop_t *L)
{
    return (L->in >= 0 ? numel(&m->vals[L->in]) : 0) + (L->in2 >= 0 ? numel(&m->vals[L->in2]) : 0) +
           (L->out >= 0 ? numel(&m->vals[L->out]) : 0);
}

/* A device lop that is no netdesc node: a QDQ matmul of two activations
 * (hkind H_QMATMUL, nd.kind 0, ops/tsr_ox_matmul.c) run by jit/tsr_bmm.h
 * in a device segment of its own (ox_seg_t.bmm). */
static inline int tsr_ox_is_bmm(const ox_lop_t *L)
{
    return L->side == SIDE_DEV && L->hkind == H_QMATMUL;
}

/* A device lop that joins its neighbours in one device graph (not a bmm). */
static inline int tsr_ox_in_graph(const ox_lop_t *L)
{
    return L->side == SIDE_DEV && !tsr_ox_is_bmm(L);
}

/* A node's name for messages: its name, else its first output. */
static inline const char *nname(const tsr_onnx_t *m, int ni)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    return n->name && n->name[0] ? n->name : (n->n_output ? n->output[0] : "?");
}

/* Element i of a constant as int32 / float. */
static inline int32_t cget_i(const ox_val_t *x, int64_t i)
{
    switch (x->elem) {
    case ET_UINT8: return x->cdata[i];
    case ET_INT8: return (int8_t)x->cdata[i];
    case ET_INT32: { int32_t v; memcpy(&v, x->cdata + 4 * i, 4); return v; }
    case ET_INT64: { int64_t v; memcpy(&v, x->cdata + 8 * i, 8); return (int32_t)v; }
    default: return 0;
    }
}

static inline float cget_f(const ox_val_t *x, int64_t i)
{
    float f;
    memcpy(&f, x->cdata + 4 * i, 4);
    return f;
}

static inline int qdtype(int elem, tsr_dtype_e *dt)
{
    if (elem == ET_INT8)
        *dt = TSR_DT_INT8;
    else if (elem == ET_UINT8)
        *dt = TSR_DT_UINT8;
    else
        return -1;
    return 0;
}

static inline const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name))
            return n->attribute[i];
    return NULL;
}

static inline int64_t attr_i(const Onnx__NodeProto *n, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = attr(n, name);
    return a && a->has_i ? a->i : dflt;
}

/* ------------------------------------------ the value and lop tables (tsr_onnx_val.c) */

/* One line naming the file, the node and its op type, then the message; returns TSR_EINVAL. */
#define NERR(m, ni, ...) tsr_ox_node_err(m, ni, __VA_ARGS__)
int tsr_ox_node_err(const tsr_onnx_t *m, int ni, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int tsr_ox_find_val(const tsr_onnx_t *m, const char *name);
int tsr_ox_new_val(tsr_onnx_t *m, const char *name);
/* Value of node ni's input k, -1 when absent or empty. */
int tsr_ox_in_val(tsr_onnx_t *m, int ni, size_t k);
int tsr_ox_new_lop(tsr_onnx_t *m, int node, int side);
int tsr_ox_def_out(tsr_onnx_t *m, int ni, size_t k, int elem, int ndim, const int64_t *dims);
int tsr_ox_set_view(ox_val_t *x, int q, float scale, int32_t zp);
int tsr_ox_def_alias(tsr_onnx_t *m, int ni, int src, int ndim, const int64_t *dims);
int tsr_ox_host_lop(tsr_onnx_t *m, int ni, int hk, int in, int out);
int tsr_ox_dev_lop(tsr_onnx_t *m, int ni, const tsr_nd_node_t *nd, int in, int in2, int out);
int tsr_ox_need_real(tsr_onnx_t *m, int ni, int v);
int tsr_ox_sole_consumer(const tsr_onnx_t *m, const char *name);
/* A table for n names (TSR_ENOMEM without the memory); the int of name
 * (added with *added set and the int 0 when new); the int of name or NULL. */
int tsr_ox_names_init(ox_names_t *t, size_t n);
int *tsr_ox_names_put(ox_names_t *t, const char *name, int *added);
const int *tsr_ox_names_get(const ox_names_t *t, const char *name);
void tsr_ox_names_free(ox_names_t *t);

/* ----------------------- attributes, constants, quantization parameters (tsr_onnx_attr.c) */

/* Description of one quantized operand: value, scale(s), zero point(s). */
typedef struct qarg {
    int v;                  /* quantized value (base) */
    const float *sc;        /* scales (cnt) */
    const int32_t *zp;      /* zero points (cnt) */
    int cnt;
    float sc1;              /* storage for a scalar */
    int32_t zp1;
} qarg_t;

int tsr_ox_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *dst, size_t cnt, int64_t dflt);
int tsr_ox_const_scalar(const tsr_onnx_t *m, int ni, int v, const char *what, double *out);
int tsr_ox_qarg_consts(tsr_onnx_t *m, int ni, int vs, int vz, qarg_t *q, float **sbuf, int32_t **zbuf,
                       const char *what);
int tsr_ox_view_arg(tsr_onnx_t *m, int ni, int v, const char *what, int *qv, const float **sc, const int32_t **zp,
                    int *cnt);
int tsr_ox_int_zps(tsr_onnx_t *m, int ni, int v, int elem, int64_t want, const char *what, int32_t **zp, int *cnt);
int tsr_ox_meta_ints(tsr_onnx_t *m, int ni, int count, int64_t *vals);
double tsr_ox_fx_real(int64_t mult, int64_t shift);
int tsr_ox_fx_agrees(double a, double b);
int tsr_ox_rq_params(tsr_onnx_t *m, int ni, float xs, const float *ws, int cnt, float ys, int32_t **mult,
                     int32_t **shift, float **fscale);

/* -------------------------------------------------------------- the passes */

/* tsr_onnx_load.c */
int tsr_ox_load_tensor(const char *ctx, const char *raw_name, const Onnx__TensorProto *t, ox_val_t *v);
int tsr_ox_read_file(const char *path, const char *what, uint8_t **buf, size_t *len);
int tsr_ox_parse(tsr_onnx_t *m, const void *buf, size_t n, const char *name, int batch);
/* tsr_onnx_qdq.c */
int tsr_ox_qdq_select(tsr_onnx_t *m);
int tsr_ox_qdq_output(tsr_onnx_t *m, int ni, ox_qout_t *o);
void tsr_ox_qdq_fold(tsr_onnx_t *m, int ni);
/* tsr_onnx_lower.c */
int tsr_ox_lower_graph(tsr_onnx_t *m);
/* tsr_onnx_act.c: chains of host lops whose output is a table of one quantized input, as device act lops */
int tsr_ox_act_tables(tsr_onnx_t *m);
/* The quantized softmaxes (host QLinearSoftmax lops) on the device for a config with act_lut >= 4
 * activation tables (ops/tsr_ox_float.c). */
int tsr_ox_softmax_device(tsr_onnx_t *m, int act_lut);
/* ops/tsr_ox_eltwise.c: host lop l (a quantized Mul by a per-channel
 * vector, or an Add of two activations) as a device lop when both its
 * operands come from device lops with only device lops between them and l
 * and the device form is bit-exact with the host kernel (the Mul) or the
 * device add's own (the Add). 1 if it moved, 0 if not. */
int tsr_ox_promote_lop(tsr_onnx_t *m, int l);
/* On a config with EXACT_REQUANT (tsr_onnx_set_target): every device lop whose bytes are not ONNX
 * Runtime's (ort_host 1: an Add with no exact integer form, a BatchNormalization with a channel no
 * device conv gives) becomes the host kernel of ORT's bytes, by its kind's converter below. How many
 * moved (tsr_onnx.c). */
int tsr_ox_exact_to_host(tsr_onnx_t *m);
/* What every such move shares: L's device node freed, L a host lop of kind hkind (no segment, geo
 * cleared, ort_host 2: ORT's bytes on the host). The converter fills geo after it. */
void tsr_ox_lop_to_host(ox_lop_t *L, int hkind);
/* The converters: an Add's lop as the host kernel's ORT form with its output clamp (H_QADDC,
 * tsr_ox_run_qaddc; ops/tsr_ox_eltwise.c); a BatchNormalization's device conv as the per-channel lookup
 * table of ORT's bytes (H_QLUTC; ops/tsr_ox_conv.c). */
void tsr_ox_add_to_host(tsr_onnx_t *m, int l);
void tsr_ox_bn_to_host(tsr_onnx_t *m, int l);
/* Values a's and b's producers are device graph lops before l, and so is every lop after the earlier of
 * them up to l: the condition for l to take both from one device segment (ops/tsr_ox_eltwise.c). */
int tsr_ox_device_operands(const tsr_onnx_t *m, int l, int a, int b);
/* ops/tsr_ox_concat.c: host concat lop l (H_CONCAT) as a device concat when the target's layout makes
 * its inputs views of its output and both come from device lops with only device lops between them
 * and l; a device concat back to the host otherwise (run again for each target). 1 if on the device. */
int tsr_ox_concat_place(tsr_onnx_t *m, int l);
/* Lop l, a device concat, back to the host copy (the segment pass: its operands come from two
 * segments, a device graph takes one input). 1 if it was one. */
int tsr_ox_concat_demote(tsr_onnx_t *m, int l);
/* With activation tables (tsr_onnx_set_target): each Concat input's device requantize (ox_lop_t.cat_rq)
 * becomes the table of the host kernels' QuantizeLinear(DequantizeLinear(x)), bit for bit. */
int tsr_ox_concat_tables(tsr_onnx_t *m);
/* The device concats' inputs and output agree on one zero point (after the other lops fixed theirs). */
int tsr_ox_concat_zps(tsr_onnx_t *m);
/* tsr_onnx_segment.c (host lops promoted first: tsr_ox_promote_lop) */
int tsr_ox_build_segments(tsr_onnx_t *m);
void tsr_ox_free_segments(tsr_onnx_t *m);
/* tsr_onnx_host.c */
const char *tsr_ox_host_name(int hkind);
/* 1 when host kernel hkind's geo[0..3] are the node's own value ids (a value is read through them), as
 * its row of the kernel table says; 0 for the kinds whose geo holds sizes or parameters. */
int tsr_ox_host_geo_vals(int hkind);
int tsr_ox_host_run(tsr_onnx_t *m, const ox_lop_t *L);
/* tsr_onnx_hostf.c: the float and integer host kernels (H_FUNARY ...), also
 * run at import to fold nodes whose inputs are all constants */
int tsr_ox_run_funary(tsr_onnx_t *m, const ox_lop_t *L);
int tsr_ox_run_fnary(tsr_onnx_t *m, const ox_lop_t *L);
int tsr_ox_run_gather(tsr_onnx_t *m, const ox_lop_t *L);
int tsr_ox_run_slice(tsr_onnx_t *m, const ox_lop_t *L);
int tsr_ox_run_ftranspose(tsr_onnx_t *m, const ox_lop_t *L);
int tsr_ox_run_reduce(tsr_onnx_t *m, const ox_lop_t *L);
int tsr_ox_run_layernorm(tsr_onnx_t *m, const ox_lop_t *L);
int tsr_ox_run_fmatmul(tsr_onnx_t *m, const ox_lop_t *L);
int tsr_ox_run_qsoftmax(tsr_onnx_t *m, const ox_lop_t *L);
int tsr_ox_run_qaddc(tsr_onnx_t *m, const ox_lop_t *L);
/* H_FUNARY's function (op FU_*, alpha, beta) of one value, in double: what its kernel rounds to float32 */
double tsr_ox_unary(int op, double x, float alpha, float beta);
/* tsr_onnx_exec.c */
uint8_t *tsr_ox_bytes(tsr_onnx_t *m, int v);

#endif
