/*
 * tsr_onnx: ONNX import, lowering to device segments and host kernels, and
 * the heterogeneous executor (tsr_onnx.h says what is supported). Why this
 * shape: a value table indexed by ONNX tensor name holds each value's
 * concrete shape, constant bytes and, for a DequantizeLinear output that
 * nobody needs in float, the quantized value it views; operators are
 * lowered in topological order onto "lops" (lowered operators), each on one
 * side; relabellings (Flatten, Reshape, Cast to the same type) only alias.
 */
#include "tsr_onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "tsr_onnx_wire.h"
#include "tsr_error.h"
#include "tsr_file.h"
#include "tsr_graph.h"
#include "tsr_netdesc.h"
#include "tsr_quant.h"
#include "tsr_strsafe.h"

enum { ET_FLOAT = 1, ET_UINT8 = 2, ET_INT8 = 3, ET_INT32 = 6, ET_INT64 = 7 };
enum { SIDE_NONE = 0, SIDE_DEV, SIDE_HOST };
enum { H_QUANT = 1, H_DEQUANT, H_SOFTMAX, H_ARGMAX, H_RELU, H_CONVINT, H_MATMULINT, H_QMATMUL, H_CONCAT };

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
    int64_t geo[16];        /* H_CONVINT: kh, kw, stride_h, stride_w, pad top, left, bottom, right, then
                               N, C, H, W, O, OH, OW; H_MATMULINT/H_QMATMUL: batch, M, K, N, B batched;
                               H_CONCAT: outer, bytes of in and of in2 per outer index (the shapes as
                               the node sees them: in/in2 are bases, possibly of another shape) */
    int32_t *zpa, *zpb;     /* H_CONVINT/H_MATMULINT/H_QMATMUL: zero points of in (zpa) and in2 (zpb), owned */
    int nzpa, nzpb;         /* their counts: 1 per tensor, else per row of in / per output column or channel */
    int32_t yzp;            /* H_QMATMUL: output zero point */
    float mult;             /* H_QMATMUL: a_scale * b_scale / y_scale (float32, as ONNX Runtime) */
} ox_lop_t;

typedef struct ox_seg {
    tsr_netdesc_t nd;       /* shallow: node arrays point into the lops' */
    int in_val, out_val;    /* external input and output values (bases) */
    int first, last;        /* lop range */
    tsr_graph_t *g;         /* planned graph (NULL when solo) */
    int solo;               /* one conv whose w - w_zp needs int8 parts (the input packed once per
                               part): device tensors hold one copy, so it runs alone by tsr_conv2d_run */
} ox_seg_t;

struct tsr_onnx {
    char path[256];         /* file name for messages */
    Onnx__ModelProto *mp;   /* unpacked model */
    Onnx__GraphProto *gp;
    int nvals, capvals;
    ox_val_t *vals;
    int *order;             /* nodes in topological order */
    int *placed;            /* per node: 0 unplaced, 1 constant, 2 alias, 3 lop, 4 folded, 5 view */
    int *node_lop;          /* per node: its lop (or the lop it is folded into), -1 */
    int nlops;
    ox_lop_t *lops;
    int nsegs;
    ox_seg_t *segs;
    int in_val, out_val;    /* graph input and first output */
    tsr_device_t *dev;
    unsigned flags;         /* tsr_onnx_prepare flags */
    int64_t opset;          /* ai.onnx opset of the model */
    int nexact;             /* operators whose requantization integers came from tessera.requant metadata */
};

/* ------------------------------------------------------------ helpers */

static size_t esize(int e)
{
    switch (e) {
    case ET_FLOAT: case ET_INT32: return 4;
    case ET_UINT8: case ET_INT8: return 1;
    case ET_INT64: return 8;
    default: return 0;
    }
}

static const char *ename(int e)
{
    switch (e) {
    case ET_FLOAT: return "float";
    case ET_UINT8: return "uint8";
    case ET_INT8: return "int8";
    case ET_INT32: return "int32";
    case ET_INT64: return "int64";
    default: return "unsupported type";
    }
}

static int64_t numel(const ox_val_t *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++)
        n *= v->dims[i];
    return n;
}

static const char *nname(const tsr_onnx_t *m, int ni)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    return n->name && n->name[0] ? n->name : (n->n_output ? n->output[0] : "?");
}

#define NERR(m, ni, ...) node_err(m, ni, __VA_ARGS__)
static int node_err(const tsr_onnx_t *m, int ni, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int node_err(const tsr_onnx_t *m, int ni, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tsr_err(TSR_EINVAL, "%s: node \"%s\" (%s): %s", m->path, TSR_SAFE(nname(m, ni)),
                   TSR_SAFE(m->gp->node[ni]->op_type), msg);
}

static int find_val(const tsr_onnx_t *m, const char *name)
{
    for (int i = 0; i < m->nvals; i++)
        if (!strcmp(m->vals[i].name, name))
            return i;
    return -1;
}

static int new_val(tsr_onnx_t *m, const char *name)
{
    if (m->nvals == m->capvals) {
        int cap = m->capvals ? m->capvals * 2 : 64;
        ox_val_t *nv = realloc(m->vals, sizeof *nv * (size_t)cap);
        if (!nv)
            return tsr_err(TSR_ENOMEM, "%s: out of memory", m->path);
        m->vals = nv;
        m->capvals = cap;
    }
    ox_val_t *v = &m->vals[m->nvals];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->base = m->nvals;
    v->view_of = -1;
    v->real_lop = -1;
    v->prod = -1;
    v->seg_tensor = -1;
    return m->nvals++;
}

static int new_lop(tsr_onnx_t *m, int node, int side)
{
    ox_lop_t *nl = realloc(m->lops, sizeof *nl * (size_t)(m->nlops + 1));
    if (!nl)
        return tsr_err(TSR_ENOMEM, "%s: out of memory", m->path);
    m->lops = nl;
    ox_lop_t *l = &m->lops[m->nlops];
    memset(l, 0, sizeof *l);
    l->node = node;
    l->side = side;
    l->in = l->in2 = l->out = -1;
    l->seg = -1;
    m->node_lop[node] = m->nlops;
    m->placed[node] = 3;
    return m->nlops++;
}

/* Fill v's type and bytes from a TensorProto, with every size checked
 * against the dims before any payload is read. */
static int load_tensor(const char *ctx, const char *raw_name, const Onnx__TensorProto *t, ox_val_t *v)
{
    const char *tname = TSR_SAFE(raw_name); /* for messages only */
    if (t->n_external_data || (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
        return tsr_err(TSR_EINVAL, "%s: tensor \"%s\": external data is not supported", ctx, tname);
    const int e = t->has_data_type ? t->data_type : 0;
    const size_t es = esize(e);
    if (!es)
        return tsr_err(TSR_EINVAL, "%s: tensor \"%s\": element type %d is not supported (float, uint8, int8, int32, int64)",
                       ctx, tname, e);
    if (t->n_dims > MAXD)
        return tsr_err(TSR_EINVAL, "%s: tensor \"%s\": %zu dimensions (at most %d)", ctx, tname, t->n_dims, MAXD);
    int64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > TSR_ONNX_MAX_ELEMS || (n *= t->dims[i]) > TSR_ONNX_MAX_ELEMS)
            return tsr_err(TSR_EINVAL, "%s: tensor \"%s\": dims give more than %lld elements or a negative one", ctx,
                           tname, (long long)TSR_ONNX_MAX_ELEMS);
        v->dims[i] = t->dims[i];
    }
    v->ndim = (int)t->n_dims;
    v->elem = e;
    v->nbytes = (size_t)n * es;
    size_t have;
    if (t->has_raw_data)
        have = t->raw_data.len;
    else if (e == ET_FLOAT)
        have = t->n_float_data * es;
    else if (e == ET_INT64)
        have = t->n_int64_data * es;
    else
        have = t->n_int32_data * es;
    if (have != v->nbytes)
        return tsr_err(TSR_EINVAL, "%s: tensor \"%s\": %zu data bytes for dims of %lld %s elements (%zu bytes)", ctx,
                       tname, have, (long long)n, ename(e), v->nbytes);
    v->cdata = malloc(v->nbytes ? v->nbytes : 1);
    if (!v->cdata)
        return tsr_err(TSR_ENOMEM, "%s: tensor \"%s\": out of memory", ctx, tname);
    if (!v->nbytes)
        ; /* empty: nothing to copy (the arrays may be NULL) */
    else if (t->has_raw_data)
        memcpy(v->cdata, t->raw_data.data, v->nbytes);
    else if (e == ET_FLOAT)
        memcpy(v->cdata, t->float_data, v->nbytes);
    else if (e == ET_INT64)
        memcpy(v->cdata, t->int64_data, v->nbytes);
    else
        for (int64_t i = 0; i < n; i++) {
            const int32_t x = t->int32_data[i];
            if (e == ET_INT32)
                memcpy(v->cdata + 4 * i, &x, 4);
            else
                v->cdata[i] = (uint8_t)x;
        }
    v->defined = 1;
    return 0;
}

/* The whole file through tsr_file (regular files only, opened without
 * blocking, size checked before allocating): a FIFO or a device given as
 * the model is refused instead of waiting for a writer forever. */
static int read_file(const char *path, const char *what, uint8_t **buf, size_t *len)
{
    return tsr_file_read(path, TSR_ONNX_MAX_FILE, what, buf, len);
}

/* ---------------------------------------------------------- attributes */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name))
            return n->attribute[i];
    return NULL;
}

static int64_t attr_i(const Onnx__NodeProto *n, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = attr(n, name);
    return a && a->has_i ? a->i : dflt;
}

/* ints attribute into dst[cnt] (dflt when absent); -1 when the count is wrong. */
static int attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *dst, size_t cnt, int64_t dflt)
{
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a) {
        for (size_t i = 0; i < cnt; i++)
            dst[i] = dflt;
        return 0;
    }
    if (a->n_ints != cnt)
        return -1;
    memcpy(dst, a->ints, cnt * sizeof *dst);
    return 0;
}

/* ------------------------------------------------------------ values */

static int in_val(tsr_onnx_t *m, int ni, size_t k)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    if (k >= n->n_input || !n->input[k][0])
        return -1;
    return find_val(m, n->input[k]);
}

/* A scalar constant as double (scales, zero points). */
static int const_scalar(const tsr_onnx_t *m, int ni, int v, const char *what, double *out)
{
    if (v < 0)
        return NERR(m, ni, "%s is missing", what);
    const ox_val_t *x = &m->vals[v];
    if (!x->cdata || numel(x) != 1)
        return NERR(m, ni, "%s (\"%s\") must be a constant scalar", what, TSR_SAFE(x->name));
    /* a zero point has the quantized (integer) type in ONNX; refusing a float one here keeps every
       later (int32_t) conversion of it exact and in range */
    if (x->elem == ET_FLOAT && strstr(what, "zero_point"))
        return NERR(m, ni, "%s (\"%s\") must be an integer (uint8/int8/int32), not float", what, TSR_SAFE(x->name));
    switch (x->elem) {
    case ET_FLOAT: { float f; memcpy(&f, x->cdata, 4); *out = f; break; }
    case ET_UINT8: *out = x->cdata[0]; break;
    case ET_INT8: *out = (int8_t)x->cdata[0]; break;
    case ET_INT32: { int32_t i; memcpy(&i, x->cdata, 4); *out = i; break; }
    default: return NERR(m, ni, "%s has type %s", what, ename(x->elem));
    }
    /* every scale divides or multiplies later (1/0, NaN, a negative scale have no quantization) */
    if (strstr(what, "scale") && !(isfinite(*out) && *out > 0))
        return NERR(m, ni, "%s (\"%s\") is %g: it must be finite and > 0", what, TSR_SAFE(x->name), *out);
    return 0;
}

/* Element i of a constant as int32 / float. */
static int32_t cget_i(const ox_val_t *x, int64_t i)
{
    switch (x->elem) {
    case ET_UINT8: return x->cdata[i];
    case ET_INT8: return (int8_t)x->cdata[i];
    case ET_INT32: { int32_t v; memcpy(&v, x->cdata + 4 * i, 4); return v; }
    case ET_INT64: { int64_t v; memcpy(&v, x->cdata + 8 * i, 8); return (int32_t)v; }
    default: return 0;
    }
}

static float cget_f(const ox_val_t *x, int64_t i)
{
    float f;
    memcpy(&f, x->cdata + 4 * i, 4);
    return f;
}

/* Define the output k of node ni with a type and shape (a new value). */
static int def_out(tsr_onnx_t *m, int ni, size_t k, int elem, int ndim, const int64_t *dims)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    if (k >= n->n_output || !n->output[k][0])
        return NERR(m, ni, "output %zu is missing", k);
    if (find_val(m, n->output[k]) >= 0)
        return NERR(m, ni, "output \"%s\" is produced twice", TSR_SAFE(n->output[k]));
    int64_t d[MAXD]; /* dims may point into m->vals, which new_val may move */
    if (ndim < 0 || ndim > MAXD)
        return NERR(m, ni, "%d output dimensions", ndim);
    memcpy(d, dims, sizeof(int64_t) * (size_t)ndim);
    dims = d;
    int v = new_val(m, n->output[k]);
    if (v < 0)
        return v;
    ox_val_t *x = &m->vals[v];
    x->elem = elem;
    x->ndim = ndim;
    int64_t cnt = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0 || (cnt *= dims[i]) > TSR_ONNX_MAX_ELEMS)
            return NERR(m, ni, "output shape has more than %lld elements or a negative dimension",
                        (long long)TSR_ONNX_MAX_ELEMS);
        x->dims[i] = dims[i];
    }
    x->nbytes = (size_t)cnt * esize(elem);
    x->defined = 1;
    return v;
}

/* Make x a float view of quantized value q with one scale and zero point
 * (the bytes stay q's; a consumer dequantizes on the host). */
static int set_view(ox_val_t *x, int q, float scale, int32_t zp)
{
    x->view_of = q;
    x->vcount = 1;
    x->vscale = malloc(sizeof(float));
    x->vzp = malloc(sizeof(int32_t));
    if (!x->vscale || !x->vzp)
        return tsr_err(TSR_ENOMEM, "out of memory");
    x->vscale[0] = scale;
    x->vzp[0] = zp;
    return 0;
}

/* An alias of value src with another shape (Flatten, Reshape, Cast to the same type). */
static int def_alias(tsr_onnx_t *m, int ni, int src, int ndim, const int64_t *dims)
{
    const ox_val_t s = m->vals[src];
    int v = def_out(m, ni, 0, s.elem, ndim, dims);
    if (v < 0)
        return v;
    ox_val_t *x = &m->vals[v];
    if (x->nbytes != s.nbytes)
        return NERR(m, ni, "the new shape has %zu bytes, its input %zu", x->nbytes, s.nbytes);
    x->base = s.base;
    if (s.cdata) {
        x->cdata = malloc(s.nbytes ? s.nbytes : 1);
        if (!x->cdata)
            return tsr_err(TSR_ENOMEM, "out of memory");
        memcpy(x->cdata, s.cdata, s.nbytes);
        x->base = v;
    }
    if (s.view_of >= 0) { /* a relabelled float view views a relabelled quantized value: the same bytes */
        int rc = set_view(x, s.view_of, s.vscale[0], s.vzp[0]);
        if (rc)
            return rc;
        if (s.vcount != 1)
            return NERR(m, ni, "a relabelled per-channel view is not supported");
    }
    m->placed[ni] = 2;
    return v;
}

/* ------------------------------------------------------------- lowering */

static int host_lop(tsr_onnx_t *m, int ni, int hk, int in, int out)
{
    int l = new_lop(m, ni, SIDE_HOST);
    if (l < 0)
        return l;
    m->lops[l].hkind = hk;
    m->lops[l].in = in;
    m->lops[l].out = out;
    m->vals[m->vals[out].base].prod = l;
    return l;
}

/* A device operator for node ni: nd (kind and parameters; arrays owned by
 * the lop from here on) gets the node's name; in/in2/out are values (bases). */
static int dev_lop(tsr_onnx_t *m, int ni, const tsr_nd_node_t *nd, int in, int in2, int out)
{
    int l = new_lop(m, ni, SIDE_DEV);
    if (l < 0)
        return l;
    ox_lop_t *L = &m->lops[l];
    L->nd = *nd;
    /* the device operator's name reaches the graph's messages and tables: made safe here, once */
    tsr_strsafe(nname(m, ni), L->nd.name, sizeof L->nd.name);
    L->in = in;
    L->in2 = in2;
    L->out = out;
    m->vals[m->vals[out].base].prod = l;
    return l;
}

/* v is needed as real floats: a float view gets its host DequantizeLinear. */
static int need_real(tsr_onnx_t *m, int ni, int v)
{
    ox_val_t *x = &m->vals[v];
    if (x->view_of < 0 || x->cdata || x->real_lop >= 0)
        return 0;
    if (x->vcount != 1)
        return NERR(m, ni, "input \"%s\": a per-channel DequantizeLinear of a computed tensor is not supported",
                    TSR_SAFE(x->name));
    int dqn = -1; /* the DequantizeLinear node that made the view */
    for (size_t i = 0; i < m->gp->n_node; i++)
        for (size_t k = 0; k < m->gp->node[i]->n_output; k++)
            if (!strcmp(m->gp->node[i]->output[k], x->name))
                dqn = (int)i;
    if (dqn < 0)
        dqn = ni;
    int l = host_lop(m, dqn, H_DEQUANT, m->vals[x->view_of].base, x->base);
    if (l < 0)
        return l;
    m->lops[l].scale = x->vscale[0];
    m->lops[l].zp = x->vzp[0];
    x = &m->vals[v];
    x->real_lop = l;
    return 0;
}

/* The (only) consumer node of value name, -1 if none, -2 if several or a graph output. */
static int sole_consumer(const tsr_onnx_t *m, const char *name)
{
    int c = -1;
    for (size_t i = 0; i < m->gp->n_node; i++)
        for (size_t k = 0; k < m->gp->node[i]->n_input; k++)
            if (!strcmp(m->gp->node[i]->input[k], name)) {
                if (c >= 0 && c != (int)i)
                    return -2;
                c = (int)i;
            }
    for (size_t i = 0; i < m->gp->n_output; i++)
        if (!strcmp(m->gp->output[i]->name, name))
            return -2;
    return c;
}

static int qdtype(int elem, tsr_dtype_e *dt)
{
    if (elem == ET_INT8)
        *dt = TSR_DT_INT8;
    else if (elem == ET_UINT8)
        *dt = TSR_DT_UINT8;
    else
        return -1;
    return 0;
}

/* Exact requantization integers a model may carry for node ni: the
 * metadata entry "tessera.requant/<node name>" holds count integers
 * separated by commas or spaces (conv/gemm: mult0 shift0 mult1 shift1 ...
 * per output channel or one pair; add: left_shift mult_a shift_a mult_b
 * shift_b mult_out shift_out). Why: ONNX stores scales as float32, and a
 * network whose integers were derived in double (TFLite's QuantizeMultiplier
 * with two roundings, as jit/tsr_netdesc.c builds ResNet-18) cannot be
 * written in float32 scales exactly; the metadata carries the integers, the
 * scales stay what ONNX Runtime computes with, and the caller checks that
 * both describe the same multiplier. 1 when present (vals filled), 0 when
 * absent, negative on a malformed entry. */
static int meta_ints(tsr_onnx_t *m, int ni, int count, int64_t *vals)
{
    static const char pre[] = "tessera.requant/";
    const char *nm = m->gp->node[ni]->name;
    if (!nm || !nm[0])
        return 0;
    for (size_t i = 0; i < m->mp->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *e = m->mp->metadata_props[i];
        if (!e->key || strncmp(e->key, pre, sizeof pre - 1) || strcmp(e->key + sizeof pre - 1, nm))
            continue;
        const char *p = e->value ? e->value : "";
        for (int k = 0; k < count; k++) {
            while (*p == ' ' || *p == ',')
                p++;
            char *end;
            errno = 0;
            const long long v = strtoll(p, &end, 10);
            if (end == p || errno || v < INT32_MIN || v > INT32_MAX)
                return NERR(m, ni, "metadata \"%s\": integer %d of %d is missing or out of range",
                            TSR_SAFE(e->key), k + 1, count);
            vals[k] = v;
            p = end;
        }
        while (*p == ' ' || *p == ',')
            p++;
        if (*p)
            return NERR(m, ni, "metadata \"%s\": more than %d integers", TSR_SAFE(e->key), count);
        return 1;
    }
    return 0;
}

/* The real multiplier of a fixed-point (mult, shift) pair. */
static double fx_real(int64_t mult, int64_t shift)
{
    return ldexp((double)mult, (int)shift - 31);
}

/* |a - b| within 1e-5 of b: the metadata's integers and the float32 scales
 * describe the same requantization (float32 scales round at 6e-8 each). */
static int fx_agrees(double a, double b)
{
    return fabs(a - b) <= 1e-5 * fabs(b);
}

/* Requantization multipliers as ONNX Runtime forms them: float32
 * x_scale * w_scale / y_scale. */
static int rq_params(tsr_onnx_t *m, int ni, float xs, const float *ws, int cnt, float ys, int32_t **mult,
                     int32_t **shift)
{
    *mult = malloc(sizeof(int32_t) * (size_t)cnt);
    *shift = malloc(sizeof(int32_t) * (size_t)cnt);
    if (!*mult || !*shift)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int i = 0; i < cnt; i++) {
        float r = xs * ws[i] / ys;
        /* r < 1: (round(r * 2^31), 0), one rounding (SRDHM) instead of TFLite's two (SRDHM, then the
           rounding right shift of the normalized (M, S)): ONNX Runtime rounds acc * r once (in
           float32); the double rounding moves ties of the high product (e.g. 48.49996 -> 48.5 -> 49)
           and disagreed with it on 0.14% of the digits conv1 outputs, single rounding on none */
        if (r < 1.0f && r > 0x1p-20f) {
            (*mult)[i] = (int32_t)llround((double)r * 2147483648.0);
            (*shift)[i] = 0;
            continue;
        }
        int rc = tsr_quantize_multiplier((double)r, &(*mult)[i], &(*shift)[i]);
        if (rc)
            return NERR(m, ni, "requantization multiplier %g of channel %d: %s", (double)r, i, tsr_errmsg());
    }
    int64_t *mv = malloc(sizeof(int64_t) * 2 * (size_t)cnt);
    if (!mv)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = meta_ints(m, ni, 2 * cnt, mv);
    for (int i = 0; rc == 1 && i < cnt; i++) {
        const double r = (double)(xs * ws[i] / ys);
        if (mv[2 * i] < 0 || mv[2 * i + 1] < -31 || mv[2 * i + 1] > 30 || !fx_agrees(fx_real(mv[2 * i], mv[2 * i + 1]), r))
            rc = NERR(m, ni, "metadata tessera.requant: channel %d (%lld, %lld) is not the multiplier %.9g of the scales",
                      i, (long long)mv[2 * i], (long long)mv[2 * i + 1], r);
    }
    for (int i = 0; rc == 1 && i < cnt; i++) {
        (*mult)[i] = (int32_t)mv[2 * i];
        (*shift)[i] = (int32_t)mv[2 * i + 1];
    }
    free(mv);
    if (rc == 1)
        m->nexact++;
    return rc < 0 ? rc : 0;
}

/* Description of one quantized operand: value, scale(s), zero point(s). */
typedef struct qarg {
    int v;                  /* quantized value (base) */
    const float *sc;        /* scales (cnt) */
    const int32_t *zp;      /* zero points (cnt) */
    int cnt;
    float sc1;              /* storage for a scalar */
    int32_t zp1;
} qarg_t;

/* scale / zero point from value ids (constants, scalar or 1-D). */
static int qarg_consts(tsr_onnx_t *m, int ni, int vs, int vz, qarg_t *q, float **sbuf, int32_t **zbuf,
                       const char *what)
{
    if (vs < 0 || !m->vals[vs].cdata || m->vals[vs].elem != ET_FLOAT)
        return NERR(m, ni, "%s scale must be a float constant", what);
    const int64_t cnt = numel(&m->vals[vs]);
    if (cnt < 1 || cnt > 65536)
        return NERR(m, ni, "%s scale has %lld elements", what, (long long)cnt);
    if (vz >= 0 && (!m->vals[vz].cdata || numel(&m->vals[vz]) != cnt))
        return NERR(m, ni, "%s zero point must be a constant with as many elements as the scale", what);
    *sbuf = malloc(sizeof(float) * (size_t)cnt);
    *zbuf = malloc(sizeof(int32_t) * (size_t)cnt);
    if (!*sbuf || !*zbuf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int64_t i = 0; i < cnt; i++) {
        (*sbuf)[i] = cget_f(&m->vals[vs], i);
        (*zbuf)[i] = vz >= 0 ? cget_i(&m->vals[vz], i) : 0;
        if (!isfinite((*sbuf)[i]) || (*sbuf)[i] <= 0)
            return NERR(m, ni, "%s scale %lld is %g (must be finite and > 0)", what, (long long)i, (double)(*sbuf)[i]);
    }
    q->sc = *sbuf;
    q->zp = *zbuf;
    q->cnt = (int)cnt;
    return 0;
}

/* Lower a quantized conv / gemm onto a device CONV node. x: [N,C,H,W] (or
 * [N,K]: a gemm over a flattened tensor becomes a conv with the kernel
 * covering the whole spatial extent), w: OIHW or [M][K] constant. */
typedef struct conv_desc {
    int x;                  /* quantized input value */
    float xs; int32_t xzp;
    int w;                  /* constant weight value */
    const float *ws; const int32_t *wzp; int wcnt;
    const int32_t *bias;    /* [M] or NULL */
    float *fbias;           /* float bias to quantize, or NULL */
    float ys; int32_t yzp; int yelem;
    int gemm;               /* 1: w is [M][K] (trans applied), x flattened */
    int transb;             /* gemm: B given as [K][M] (0) or [M][K] (1) */
    int64_t kshape[2], pads[4], strides[2], group;
    int relu;               /* fused Relu */
    int has_clip; float clip_lo, clip_hi;
} conv_desc_t;

static int lower_conv(tsr_onnx_t *m, int ni, const conv_desc_t *cd, int yv)
{
    const ox_val_t *X = &m->vals[cd->x], *W = &m->vals[cd->w];
    const ox_val_t *XB = &m->vals[X->base];
    tsr_conv2d_params_t p;
    memset(&p, 0, sizeof p);
    int64_t n, c, h, w, M;
    if (qdtype(X->elem, &p.x_dtype) || qdtype(W->elem, &p.w_dtype) || qdtype(cd->yelem, &p.y_dtype))
        return NERR(m, ni, "input, weight and output must be int8 or uint8 (are %s, %s, %s)", ename(X->elem),
                    ename(W->elem), ename(cd->yelem));
    if (!W->cdata)
        return NERR(m, ni, "the weights \"%s\" are not a constant", TSR_SAFE(W->name));
    if (cd->gemm) {
        if (X->ndim != 2 || W->ndim != 2)
            return NERR(m, ni, "a gemm needs 2-D A and B (are %d-D and %d-D)", X->ndim, W->ndim);
        const int64_t K = X->dims[1];
        M = cd->transb ? W->dims[0] : W->dims[1];
        if ((cd->transb ? W->dims[1] : W->dims[0]) != K)
            return NERR(m, ni, "A is [%lld,%lld] but B is [%lld,%lld]%s", (long long)X->dims[0], (long long)K,
                        (long long)W->dims[0], (long long)W->dims[1], cd->transb ? " (transB)" : "");
        n = X->dims[0];
        if (XB->ndim == 4 && XB->dims[0] == n && XB->dims[1] * XB->dims[2] * XB->dims[3] == K)
            c = XB->dims[1], h = XB->dims[2], w = XB->dims[3];
        else
            c = K, h = 1, w = 1;
        p.kh = (int)h;
        p.kw = (int)w;
        p.stride_h = p.stride_w = 1;
        p.groups = 1;
    } else {
        if (X->ndim != 4 || W->ndim != 4)
            return NERR(m, ni, "2-D convolution needs 4-D input and weights (are %d-D and %d-D)", X->ndim, W->ndim);
        n = X->dims[0], c = X->dims[1], h = X->dims[2], w = X->dims[3], M = W->dims[0];
        if (cd->kshape[0] != W->dims[2] || cd->kshape[1] != W->dims[3])
            return NERR(m, ni, "kernel_shape disagrees with the weights");
        if (cd->group != 1 && !(cd->group == c && M == c && W->dims[1] == 1))
            return NERR(m, ni, "group %lld: only 1 and depthwise are supported", (long long)cd->group);
        if (cd->group == 1 && W->dims[1] != c)
            return NERR(m, ni, "weights have %lld input channels, the input %lld", (long long)W->dims[1], (long long)c);
        p.kh = (int)W->dims[2];
        p.kw = (int)W->dims[3];
        p.stride_h = (int)cd->strides[0];
        p.stride_w = (int)cd->strides[1];
        p.pad_top = (int)cd->pads[0];
        p.pad_left = (int)cd->pads[1];
        p.pad_bottom = (int)cd->pads[2];
        p.pad_right = (int)cd->pads[3];
        p.groups = (int)cd->group;
    }
    if (n > 65536 || c > 65536 || h > 65536 || w > 65536 || M > 65536)
        return NERR(m, ni, "shape too large");
    p.n = (int)n, p.c_in = (int)c, p.h = (int)h, p.w = (int)w, p.c_out = (int)M;
    if (cd->wcnt != 1 && cd->wcnt != M)
        return NERR(m, ni, "%d weight scales for %lld output channels", cd->wcnt, (long long)M);
    p.x_zp = cd->xzp;
    p.y_zp = cd->yzp;
    tsr_nd_node_t nd;
    memset(&nd, 0, sizeof nd);
    nd.kind = TSR_ND_CONV;
    int32_t *wzp = malloc(sizeof(int32_t) * (size_t)cd->wcnt), *mult = NULL, *shift = NULL;
    const size_t wbytes = (size_t)M * (size_t)(p.c_in / p.groups) * (size_t)p.kh * (size_t)p.kw;
    nd.w = malloc(wbytes);
    nd.bias = malloc(sizeof(int32_t) * (size_t)M);
    int rc = 0;
    if (!wzp || !nd.w || !nd.bias)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc && wbytes != W->nbytes)
        rc = NERR(m, ni, "weights have %zu elements, expected %zu", W->nbytes, wbytes);
    if (!rc)
        rc = rq_params(m, ni, cd->xs, cd->ws, cd->wcnt, cd->ys, &mult, &shift);
    if (!rc) {
        memcpy(wzp, cd->wzp, sizeof(int32_t) * (size_t)cd->wcnt);
        /* Constant weights whose w - w_zp all fit int8 become int8 weights with zero point 0 (exact;
           device tensors hold one copy of the input, so weights needing w - w_zp split into int8
           parts are refused by the graph runtime) */
        if (cd->gemm && !cd->transb) { /* B [K][M] -> [M][K] */
            const int64_t K = (int64_t)wbytes / M;
            for (int64_t i = 0; i < M; i++)
                for (int64_t k = 0; k < K; k++)
                    ((uint8_t *)nd.w)[i * K + k] = W->cdata[k * M + i];
        } else
            memcpy(nd.w, W->cdata, wbytes);
        /* nd.w is [M][K] or OIHW: output channel i / per (checked after the transposition: a
           per-column zero point of B [K][M] belongs to a column) */
        const int64_t per = (int64_t)wbytes / M;
        const uint8_t *wq = nd.w;
        int fits = 1;
        for (int64_t i = 0; i < (int64_t)wbytes && fits; i++) {
            const int32_t z = wzp[cd->wcnt > 1 ? i / per : 0];
            const int32_t d = (p.w_dtype == TSR_DT_UINT8 ? (int32_t)wq[i] : (int32_t)(int8_t)wq[i]) - z;
            fits = d >= -128 && d <= 127;
        }
        const int recode = fits && (p.w_dtype == TSR_DT_UINT8 || wzp[0] != 0 || cd->wcnt > 1);
        if (recode) {
            const int64_t K = (int64_t)wbytes / M;
            for (int64_t i = 0; i < (int64_t)wbytes; i++) { /* nd.w is [M][K] or OIHW: row i / K */
                const int32_t z = wzp[cd->wcnt > 1 ? i / K : 0];
                const uint8_t b = ((uint8_t *)nd.w)[i];
                ((int8_t *)nd.w)[i] = (int8_t)((p.w_dtype == TSR_DT_UINT8 ? (int32_t)b : (int32_t)(int8_t)b) - z);
            }
            for (int i = 0; i < cd->wcnt; i++)
                wzp[i] = 0;
            p.w_dtype = TSR_DT_INT8;
        }
        for (int64_t i = 0; i < M; i++) {
            if (cd->bias)
                nd.bias[i] = cd->bias[i];
            else if (cd->fbias) {
                const double q = nearbyint((double)cd->fbias[i] / ((double)cd->xs * cd->ws[cd->wcnt > 1 ? i : 0]));
                if (!(fabs(q) < 2147483647.0)) {
                    rc = NERR(m, ni, "bias %lld does not fit int32 once quantized", (long long)i);
                    break;
                }
                nd.bias[i] = (int32_t)q;
            } else
                nd.bias[i] = 0;
        }
    }
    const int32_t lo = p.y_dtype == TSR_DT_UINT8 ? 0 : -128, hi = p.y_dtype == TSR_DT_UINT8 ? 255 : 127;
    p.act_min = lo;
    p.act_max = hi;
    if (!rc && cd->relu && p.act_min < cd->yzp)
        p.act_min = cd->yzp;
    if (!rc && cd->has_clip) {
        int32_t a, b;
        if ((rc = tsr_quantize_bound(cd->clip_lo, cd->ys, cd->yzp, p.y_dtype, &a)) ||
            (rc = tsr_quantize_bound(cd->clip_hi, cd->ys, cd->yzp, p.y_dtype, &b)))
            rc = NERR(m, ni, "Clip bounds: %s", tsr_errmsg());
        else {
            p.act_min = a > p.act_min ? a : p.act_min;
            p.act_max = b < p.act_max ? b : p.act_max;
        }
    }
    p.w_zp = wzp;
    p.w_zp_count = cd->wcnt;
    /* one weight zero point when all are equal (always after the int8 recode): the kernel cache
       signature holds every parameter, and 1000 equal zero points made ResNet-18's fc too long */
    while (!rc && p.w_zp_count > 1 && wzp[p.w_zp_count - 1] == wzp[0])
        p.w_zp_count--;
    if (p.w_zp_count > 1)
        p.w_zp_count = cd->wcnt;
    p.mult = mult;
    p.shift = shift;
    p.rq_count = cd->wcnt;
    nd.conv = p;
    /* A gemm is a dense operator when the device takes it as one (one int8 part): the same
       arithmetic as the conv whose kernel covers the input, and a per-output requantization of
       many outputs (ResNet-18's 1000) fits the dense kernel's signature, not the conv's. The graph
       runtime's dense takes [N][K] inputs only (H = W = 1, e.g. after a global pool): a gemm over
       a spatial tensor stays the conv whose kernel covers it */
    tsr_dense_params_t dp = {.n = p.n, .k = p.c_in * p.h * p.w, .m = p.c_out, .x_dtype = p.x_dtype, .x_zp = p.x_zp,
                             .w_dtype = p.w_dtype, .w_zp = p.w_zp, .w_zp_count = p.w_zp_count, .y_dtype = p.y_dtype,
                             .y_zp = p.y_zp, .mult = p.mult, .shift = p.shift, .rq_count = p.rq_count,
                             .act_min = p.act_min, .act_max = p.act_max};
    int parts = 0;
    if (!rc && cd->gemm && p.h == 1 && p.w == 1 && !tsr_dense_check(&dp, &parts) && parts == 1) {
        memset(&nd.conv, 0, sizeof nd.conv);
        nd.kind = TSR_ND_DENSE;
        nd.dense = dp;
    } else if (!rc && (rc = tsr_conv2d_check(&p, &(int){0}, &(int){0})))
        rc = NERR(m, ni, "the device cannot run it (%s) and the host has no quantized conv", tsr_errmsg());
    int l = rc ? rc : dev_lop(m, ni, &nd, X->base, -1, yv);
    if (l < 0) {
        free(wzp);
        free(mult);
        free(shift);
        free(nd.w);
        free(nd.bias);
        return l;
    }
    return 0;
}

static int conv_geometry(tsr_onnx_t *m, int ni, conv_desc_t *cd, const ox_val_t *X, const ox_val_t *W,
                         int64_t *odims)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const Onnx__AttributeProto *ap = attr(n, "auto_pad");
    if (ap && ap->has_s && !(ap->s.len == 6 && !memcmp(ap->s.data, "NOTSET", 6)))
        return NERR(m, ni, "auto_pad is not supported (give pads)");
    if (X->ndim != 4 || W->ndim != 4)
        return NERR(m, ni, "needs a 4-D input and 4-D weights");
    int64_t dil[2];
    if (attr_ints(n, "kernel_shape", cd->kshape, 2, 0) || attr_ints(n, "pads", cd->pads, 4, 0) ||
        attr_ints(n, "strides", cd->strides, 2, 1) || attr_ints(n, "dilations", dil, 2, 1))
        return NERR(m, ni, "kernel_shape/strides/dilations need 2 values, pads 4");
    if (!attr(n, "kernel_shape"))
        cd->kshape[0] = W->dims[2], cd->kshape[1] = W->dims[3];
    if (dil[0] != 1 || dil[1] != 1)
        return NERR(m, ni, "dilations other than 1 are not supported");
    cd->group = attr_i(n, "group", 1);
    for (int i = 0; i < 2; i++)
        if (cd->strides[i] < 1 || cd->strides[i] > 64 || cd->kshape[i] < 1 || cd->kshape[i] > 64 || cd->pads[i] < 0 ||
            cd->pads[i + 2] < 0 || cd->pads[i] > 64 || cd->pads[i + 2] > 64)
            return NERR(m, ni, "kernel, stride or pad out of range");
    odims[0] = X->dims[0];
    odims[1] = W->dims[0];
    for (int i = 0; i < 2; i++) {
        int64_t e = X->dims[2 + i] + cd->pads[i] + cd->pads[i + 2] - cd->kshape[i];
        if (e < 0)
            return NERR(m, ni, "kernel larger than the padded input");
        odims[2 + i] = e / cd->strides[i] + 1;
    }
    return 0;
}

/* Output k of ni is consumed only by a QuantizeLinear, perhaps through one
 * Relu or Clip: fills the output quantization, marks those nodes folded,
 * returns the QuantizeLinear node or a negative error. */
static int qdq_tail(tsr_onnx_t *m, int ni, conv_desc_t *cd, int *folded, int *nfolded)
{
    const char *cur = m->gp->node[ni]->output[0];
    *nfolded = 0;
    for (int step = 0; step < 2; step++) {
        int c = sole_consumer(m, cur);
        if (c < 0)
            return NERR(m, ni, "a float %s is only supported when its single consumer is a QuantizeLinear "
                        "(possibly after one Relu/Clip): the host has no float %s", TSR_SAFE(m->gp->node[ni]->op_type),
                        TSR_SAFE(m->gp->node[ni]->op_type));
        const Onnx__NodeProto *cn = m->gp->node[c];
        if (!strcmp(cn->op_type, "QuantizeLinear")) {
            double s, z = 0;
            int rc = const_scalar(m, c, in_val(m, c, 1), "y_scale", &s);
            int vz = in_val(m, c, 2);
            if (!rc && vz >= 0)
                rc = const_scalar(m, c, vz, "y_zero_point", &z);
            if (rc)
                return rc;
            cd->ys = (float)s;
            cd->yzp = (int32_t)z;
            cd->yelem = vz >= 0 ? m->vals[vz].elem : ET_UINT8;
            folded[(*nfolded)++] = c;
            return c;
        }
        if (step == 0 && !strcmp(cn->op_type, "Relu")) {
            cd->relu = 1;
        } else if (step == 0 && !strcmp(cn->op_type, "Clip")) {
            double lo = -INFINITY, hi = INFINITY;
            int vlo = in_val(m, c, 1), vhi = in_val(m, c, 2), rc = 0;
            if (attr(cn, "min") || attr(cn, "max"))
                return NERR(m, c, "Clip with min/max attributes (opset < 11) is not supported: give them as inputs");
            if (vlo >= 0)
                rc = const_scalar(m, c, vlo, "min", &lo);
            if (!rc && vhi >= 0)
                rc = const_scalar(m, c, vhi, "max", &hi);
            if (rc)
                return rc;
            cd->has_clip = 1;
            cd->clip_lo = (float)lo;
            cd->clip_hi = (float)hi;
        } else
            return NERR(m, ni, "its float output feeds %s \"%s\": only Relu/Clip then QuantizeLinear can follow",
                        TSR_SAFE(cn->op_type), TSR_SAFE(nname(m, c)));
        folded[(*nfolded)++] = c;
        cur = cn->output[0];
    }
    return NERR(m, ni, "no QuantizeLinear after its Relu/Clip");
}

/* Operand from a float view (a DequantizeLinear output). */
static int view_arg(tsr_onnx_t *m, int ni, int v, const char *what, int *qv, const float **sc, const int32_t **zp,
                    int *cnt)
{
    if (v < 0)
        return NERR(m, ni, "%s is missing", what);
    const ox_val_t *x = &m->vals[v];
    if (x->view_of < 0)
        return NERR(m, ni, "%s \"%s\" is a float tensor that is not a DequantizeLinear output: the device needs "
                    "quantized operands and the host has no float %s", what,
                    TSR_SAFE(x->name), TSR_SAFE(m->gp->node[ni]->op_type));
    *qv = x->view_of;
    *sc = x->vscale;
    *zp = x->vzp;
    *cnt = x->vcount;
    return 0;
}

static int lower_qdq_conv(tsr_onnx_t *m, int ni, int gemm)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    conv_desc_t cd;
    memset(&cd, 0, sizeof cd);
    const float *xs = NULL, *ws = NULL, *bs = NULL;
    const int32_t *xz = NULL, *wz = NULL, *bz = NULL;
    int xc = 0, bc = 0, qb = -1;
    int rc = view_arg(m, ni, in_val(m, ni, 0), "input", &cd.x, &xs, &xz, &xc);
    if (!rc)
        rc = view_arg(m, ni, in_val(m, ni, 1), "weight", &cd.w, &ws, &wz, &cd.wcnt);
    if (rc)
        return rc;
    if (xc != 1)
        return NERR(m, ni, "per-channel activations are not supported");
    cd.xs = xs[0];
    cd.xzp = xz[0];
    cd.ws = ws;
    cd.wzp = wz;
    const int vb = in_val(m, ni, 2);
    if (vb >= 0) {
        const ox_val_t *B = &m->vals[vb];
        if (B->view_of >= 0 && m->vals[B->view_of].cdata && m->vals[B->view_of].elem == ET_INT32) {
            view_arg(m, ni, vb, "bias", &qb, &bs, &bz, &bc);
            cd.bias = (const int32_t *)m->vals[qb].cdata; /* as ORT's QLinearConv fusion: the int32 bias as is */
        } else if (B->cdata && B->elem == ET_FLOAT)
            cd.fbias = (float *)B->cdata;
        else
            return NERR(m, ni, "bias must be a DequantizeLinear of an int32 constant or a float constant");
    }
    int folded[2], nf;
    int64_t od[4] = {0};
    int odn = 4;
    if (gemm) {
        const int isgemm = !strcmp(n->op_type, "Gemm");
        if (isgemm && (attr_i(n, "transA", 0) || fabsf(attr(n, "alpha") ? attr(n, "alpha")->f : 1.f) != 1.f ||
                       (vb >= 0 && (attr(n, "beta") ? attr(n, "beta")->f : 1.f) != 1.f)))
            return NERR(m, ni, "transA, alpha or beta other than the defaults");
        cd.gemm = 1;
        cd.transb = isgemm ? (int)attr_i(n, "transB", 0) : 0;
        const ox_val_t *X = &m->vals[in_val(m, ni, 0)], *W = &m->vals[cd.w];
        if (X->ndim != 2 || W->ndim != 2)
            return NERR(m, ni, "only 2-D operands are supported");
        od[0] = X->dims[0];
        od[1] = cd.transb ? W->dims[0] : W->dims[1];
        odn = 2;
        if (vb >= 0 && numel(&m->vals[vb]) != od[1])
            return NERR(m, ni, "bias has %lld elements for %lld outputs", (long long)numel(&m->vals[vb]), (long long)od[1]);
    } else {
        rc = conv_geometry(m, ni, &cd, &m->vals[in_val(m, ni, 0)], &m->vals[cd.w], od);
        if (rc)
            return rc;
        if (vb >= 0 && numel(&m->vals[vb]) != od[1])
            return NERR(m, ni, "bias has %lld elements for %lld outputs", (long long)numel(&m->vals[vb]), (long long)od[1]);
    }
    int qn = qdq_tail(m, ni, &cd, folded, &nf);
    if (qn < 0)
        return qn;
    /* the output value is the QuantizeLinear's output */
    int y = def_out(m, qn, 0, cd.yelem, odn, od);
    if (y < 0)
        return y;
    /* the view x is over a quantized tensor; lower_conv reads shapes from the view (same shape) */
    conv_desc_t c2 = cd;
    c2.x = in_val(m, ni, 0);
    c2.x = cd.x; /* lower_conv wants X's elem to be the quantized type: the quantized value */
    const ox_val_t *XV = &m->vals[in_val(m, ni, 0)];
    if (XV->ndim != m->vals[cd.x].ndim || memcmp(XV->dims, m->vals[cd.x].dims, sizeof(int64_t) * (size_t)XV->ndim)) {
        /* a relabelled view (Flatten/Reshape of the DequantizeLinear output): the quantized bytes
           with the view's shape */
        const int q = new_val(m, "");
        if (q < 0)
            return q;
        ox_val_t *Q = &m->vals[q];
        XV = &m->vals[in_val(m, ni, 0)];
        Q->elem = m->vals[cd.x].elem;
        Q->ndim = XV->ndim;
        memcpy(Q->dims, XV->dims, sizeof Q->dims);
        Q->nbytes = m->vals[cd.x].nbytes;
        Q->base = m->vals[cd.x].base;
        Q->defined = 1;
        c2.x = q;
    }
    if ((rc = lower_conv(m, ni, &c2, y)))
        return rc;
    for (int i = 0; i < nf; i++) {
        m->placed[folded[i]] = 4;
        m->node_lop[folded[i]] = m->nlops - 1;
    }
    return 0;
}

/* QLinearConv / QGemm / QLinearMatMul (operator form). */
static int lower_qlinear(tsr_onnx_t *m, int ni, int kind /* 0 conv, 1 qgemm, 2 qlinearmatmul */)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    conv_desc_t cd;
    memset(&cd, 0, sizeof cd);
    float *xs = NULL, *ws = NULL, *ys = NULL;
    int32_t *xz = NULL, *wz = NULL, *yz = NULL;
    qarg_t qx, qw, qy;
    int iy = kind == 1 ? 7 : 6, iyz = iy + 1, ib = kind == 0 ? 8 : kind == 1 ? 6 : -1;
    int rc = 0;
    cd.x = in_val(m, ni, 0);
    cd.w = in_val(m, ni, 3);
    if (cd.x < 0 || cd.w < 0)
        rc = NERR(m, ni, "input or weight missing");
    if (!rc)
        rc = qarg_consts(m, ni, in_val(m, ni, 1), in_val(m, ni, 2), &qx, &xs, &xz, "x");
    if (!rc)
        rc = qarg_consts(m, ni, in_val(m, ni, 4), in_val(m, ni, 5), &qw, &ws, &wz, "w");
    if (!rc)
        rc = qarg_consts(m, ni, in_val(m, ni, iy), in_val(m, ni, iyz), &qy, &ys, &yz, "y");
    if (!rc && (qx.cnt != 1 || qy.cnt != 1))
        rc = NERR(m, ni, "x and y quantization must be per tensor");
    int64_t od[4];
    int odn = 4;
    if (!rc) {
        const ox_val_t *X = &m->vals[cd.x], *W = &m->vals[cd.w];
        cd.xs = xs[0], cd.xzp = xz[0], cd.ws = ws, cd.wzp = wz, cd.wcnt = qw.cnt, cd.ys = ys[0], cd.yzp = yz[0];
        cd.yelem = in_val(m, ni, iyz) >= 0 ? m->vals[in_val(m, ni, iyz)].elem : ET_UINT8;
        if (kind == 0)
            rc = conv_geometry(m, ni, &cd, X, W, od);
        else {
            cd.gemm = 1;
            cd.transb = kind == 1 ? (int)attr_i(n, "transB", 0) : 0;
            if (kind == 1 && (attr_i(n, "transA", 0) || (attr(n, "alpha") && attr(n, "alpha")->f != 1.f)))
                rc = NERR(m, ni, "transA or alpha other than the defaults");
            else if (X->ndim != 2 || W->ndim != 2)
                rc = NERR(m, ni, "only 2-D operands are supported (batched MatMul is not)");
            od[0] = X->dims[0];
            od[1] = W->ndim == 2 ? (cd.transb ? W->dims[0] : W->dims[1]) : 0;
            odn = 2;
        }
    }
    int vb = ib >= 0 ? in_val(m, ni, (size_t)ib) : -1;
    if (!rc && vb >= 0) {
        const ox_val_t *B = &m->vals[vb];
        if (!B->cdata || B->elem != ET_INT32 || numel(B) != od[1])
            rc = NERR(m, ni, "bias must be an int32 constant of %lld elements", (long long)od[1]);
        else
            cd.bias = (const int32_t *)B->cdata;
    }
    int y = rc ? rc : def_out(m, ni, 0, cd.yelem, odn, od);
    if (y < 0)
        rc = y;
    if (!rc)
        rc = lower_conv(m, ni, &cd, y);
    free(xs), free(ws), free(ys), free(xz), free(wz), free(yz);
    return rc;
}

/* A pool of kind TSR_POOL_MAX / AVG / GLOBAL_AVG over the quantized value
 * src (zp: its zero point, needed by average pools: input and output
 * share scale and zero point). yv_or_neg -1: output shape only. */
static int lower_pool(tsr_onnx_t *m, int ni, int src, int yv_or_neg, int64_t *odims, tsr_pool_kind_e kind, int32_t zp)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const ox_val_t *X = &m->vals[src];
    tsr_pool_params_t p;
    memset(&p, 0, sizeof p);
    if (qdtype(X->elem, &p.dtype))
        return NERR(m, ni, "input must be int8 or uint8 (is %s)", ename(X->elem));
    if (X->ndim != 4)
        return NERR(m, ni, "needs a 4-D input");
    if (kind == TSR_POOL_GLOBAL_AVG) {
        p.kind = kind;
        p.n = (int)X->dims[0], p.c = (int)X->dims[1], p.h = (int)X->dims[2], p.w = (int)X->dims[3];
        p.kh = p.kw = p.stride_h = p.stride_w = 1;
        p.zp = zp;
        int poh, pow_;
        if (tsr_pool_check(&p, &poh, &pow_))
            return NERR(m, ni, "the device cannot run it (%s) and the host has no quantized pool", tsr_errmsg());
        odims[0] = X->dims[0], odims[1] = X->dims[1], odims[2] = odims[3] = 1;
        goto emit;
    }
    int64_t k[2], s[2], pd[4], dil[2];
    if (attr_ints(n, "kernel_shape", k, 2, 0) || attr_ints(n, "strides", s, 2, 1) || attr_ints(n, "pads", pd, 4, 0) ||
        attr_ints(n, "dilations", dil, 2, 1))
        return NERR(m, ni, "kernel_shape/strides/dilations need 2 values, pads 4");
    if (attr_i(n, "ceil_mode", 0) || dil[0] != 1 || dil[1] != 1 || attr_i(n, "storage_order", 0))
        return NERR(m, ni, "ceil_mode, dilations and storage_order are not supported");
    const Onnx__AttributeProto *ap = attr(n, "auto_pad");
    if (ap && ap->has_s && !(ap->s.len == 6 && !memcmp(ap->s.data, "NOTSET", 6)))
        return NERR(m, ni, "auto_pad is not supported (give pads)");
    if (n->n_output > 1 && n->output[1][0])
        return NERR(m, ni, "the Indices output is not supported");
    p.kind = kind;
    p.count_include_pad = kind == TSR_POOL_AVG ? (int)attr_i(n, "count_include_pad", 0) : 0;
    p.n = (int)X->dims[0], p.c = (int)X->dims[1], p.h = (int)X->dims[2], p.w = (int)X->dims[3];
    p.kh = (int)k[0], p.kw = (int)k[1], p.stride_h = (int)s[0], p.stride_w = (int)s[1];
    p.pad_top = (int)pd[0], p.pad_left = (int)pd[1], p.pad_bottom = (int)pd[2], p.pad_right = (int)pd[3];
    /* max pool padding never wins (the device pads with the type minimum): any zp gives the same bytes */
    p.zp = kind == TSR_POOL_MAX ? (p.dtype == TSR_DT_UINT8 ? 0 : -128) : zp;
    if (k[0] < 1 || k[1] < 1 || k[0] > 64 || k[1] > 64 || s[0] < 1 || s[1] < 1 || s[0] > 64 || s[1] > 64)
        return NERR(m, ni, "kernel or stride out of range");
    int poh, pow_, rc = tsr_pool_check(&p, &poh, &pow_);
    if (rc)
        return NERR(m, ni, "the device cannot run it (%s) and the host has no quantized pool", tsr_errmsg());
    odims[0] = X->dims[0], odims[1] = X->dims[1];
    odims[2] = (X->dims[2] + pd[0] + pd[2] - k[0]) / s[0] + 1;
    odims[3] = (X->dims[3] + pd[1] + pd[3] - k[1]) / s[1] + 1;
emit:
    if (yv_or_neg == -1)
        return 0; /* shape only */
    const tsr_nd_node_t nd = {.kind = TSR_ND_POOL, .pool = p};
    const int l = dev_lop(m, ni, &nd, X->base, -1, yv_or_neg);
    return l < 0 ? l : 0;
}

/* A quantized add (TFLite ADD arithmetic, tsr_quant_add_params) of the
 * quantized values a and b into the new value yv. */
static int lower_add(tsr_onnx_t *m, int ni, int a, float as, int32_t az, int b, float bs, int32_t bz, float ys,
                     int32_t yz, int relu, int yv)
{
    const ox_val_t *A = &m->vals[a], *B = &m->vals[b], *Y = &m->vals[yv];
    tsr_add_params_t p;
    memset(&p, 0, sizeof p);
    if (qdtype(A->elem, &p.a.dtype) || qdtype(B->elem, &p.b.dtype) || qdtype(Y->elem, &p.y.dtype))
        return NERR(m, ni, "operands must be int8 or uint8");
    int same = A->ndim == B->ndim && A->ndim >= 1 && A->ndim <= 4;
    for (int i = 0; same && i < A->ndim; i++)
        same = A->dims[i] == B->dims[i];
    if (!same)
        return NERR(m, ni, "the operands' shapes differ or are not 1..4-D (broadcasting is not supported)");
    int64_t d[4] = {1, 1, 1, 1};
    for (int i = 0; i < A->ndim; i++)
        d[i] = A->dims[i];
    if (d[0] > 65536 || d[1] > 65536 || d[2] > 65536 || d[3] > 65536)
        return NERR(m, ni, "shape too large");
    tsr_eltwise_desc_t *ds[3] = {&p.a, &p.b, &p.y};
    const int32_t zps[3] = {az, bz, yz};
    for (int k = 0; k < 3; k++)
        ds[k]->n = (int)d[0], ds[k]->c = (int)d[1], ds[k]->h = (int)d[2], ds[k]->w = (int)d[3], ds[k]->zp = zps[k];
    /* ONNX Runtime (MLAS QLinearAdd) computes y = RDBPOT(xa * MA + xb * MB, Sh) + zy with
       ra = fl32(as / ys), Sh = 21 - exponent(max(ra, rb)), MA = lrintf(ra * 2^Sh) (< 2^22), when
       its checks pass (float otherwise). On the device: left shift 22 and multipliers MA * 2^9 make
       each input exactly xa * MA (SRDHM of an exact product), and the output stage SRDHM by 2^30
       then a rounding shift by Sh - 1 rounds the sum: equal to one rounding except for odd sums
       exactly 1/2^Sh below a tie (about 2^-Sh of them). TFLite's parameters rounded each input and
       the output twice (1 LSB off ORT on 6% of a residual test's sums). */
    const float ra = as / ys, rb = bs / ys, gr = ra > rb ? ra : rb;
    int rc, mlas = 0;
    int32_t MA = 0, MB = 0, Sh = 0;
    if (ra >= 0x1p-14f && ra < 256.0f && rb >= 0x1p-14f && rb < 256.0f) {
        uint32_t bits;
        memcpy(&bits, &gr, 4);
        Sh = 21 - ((int32_t)(bits >> 23) - 127);
        if (Sh >= 13 && Sh <= 31) {
            const float mf = ldexpf(1.0f, Sh);
            MA = (int32_t)lrintf(ra * mf);
            MB = (int32_t)lrintf(rb * mf);
            mlas = MA < 0x400000 && MB < 0x400000 && (MA >= 0x200000 || MB >= 0x200000);
        }
    }
    if (mlas) {
        p.left_shift = 22;
        p.mult_a = MA * 512, p.mult_b = MB * 512;
        p.shift_a = p.shift_b = 0;
        p.mult_out = 1 << 30;
        p.shift_out = -(Sh - 1);
    } else {
        tsr_add_quant_t q;
        if ((rc = tsr_quant_add_params(as, bs, ys, &q)))
            return NERR(m, ni, "scales the quantized add cannot take: %s", tsr_errmsg());
        p.left_shift = q.left_shift;
        p.mult_a = q.mult_a, p.shift_a = q.shift_a, p.mult_b = q.mult_b, p.shift_b = q.shift_b;
        p.mult_out = q.mult_out, p.shift_out = q.shift_out;
    }
    int64_t mv[7];
    if ((rc = meta_ints(m, ni, 7, mv)) < 0)
        return rc;
    if (rc == 1) { /* exact integers: each input's overall multiplier must be the scales' */
        const double out = ldexp(fx_real(mv[5], mv[6]), (int)mv[0]);
        if (mv[0] < 0 || mv[0] > 22 || mv[1] < 0 || mv[3] < 0 || mv[5] < 0 || mv[2] < -31 || mv[2] > 0 ||
            mv[4] < -31 || mv[4] > 0 || mv[6] < -31 || mv[6] > 30 ||
            !fx_agrees(fx_real(mv[1], mv[2]) * out, (double)as / ys) ||
            !fx_agrees(fx_real(mv[3], mv[4]) * out, (double)bs / ys))
            return NERR(m, ni, "metadata tessera.requant: the add's integers are not the multipliers %.9g, %.9g of "
                        "the scales", (double)as / ys, (double)bs / ys);
        p.left_shift = (int)mv[0];
        p.mult_a = (int32_t)mv[1], p.shift_a = (int)mv[2], p.mult_b = (int32_t)mv[3], p.shift_b = (int)mv[4];
        p.mult_out = (int32_t)mv[5], p.shift_out = (int)mv[6];
        m->nexact++;
    }
    p.act_min = p.y.dtype == TSR_DT_UINT8 ? 0 : -128;
    p.act_max = p.y.dtype == TSR_DT_UINT8 ? 255 : 127;
    if (relu && p.act_min < yz)
        p.act_min = yz;
    int64_t cnt;
    if ((rc = tsr_add_check(&p, &cnt)))
        return NERR(m, ni, "the device cannot run it (%s) and the host has no quantized add", tsr_errmsg());
    const tsr_nd_node_t nd = {.kind = TSR_ND_ADD, .add = p};
    const int l = dev_lop(m, ni, &nd, A->base, B->base, yv);
    return l < 0 ? l : 0;
}

/* Reshape target shape (0 copies, -1 infers). */
static int reshape_dims(tsr_onnx_t *m, int ni, const ox_val_t *X, int vs, int *nd, int64_t *d)
{
    if (vs < 0 || !m->vals[vs].cdata || m->vals[vs].elem != ET_INT64 || m->vals[vs].ndim != 1)
        return NERR(m, ni, "the shape must be a 1-D int64 constant");
    const ox_val_t *S = &m->vals[vs];
    int64_t cnt = numel(S), known = 1, neg = -1;
    if (cnt > MAXD)
        return NERR(m, ni, "more than %d dimensions", MAXD);
    for (int64_t i = 0; i < cnt; i++) {
        int64_t v;
        memcpy(&v, S->cdata + 8 * i, 8);
        if (v == 0 && !attr_i(m->gp->node[ni], "allowzero", 0)) {
            if (i >= X->ndim)
                return NERR(m, ni, "0 copies a dimension the input does not have");
            v = X->dims[i];
        }
        if (v == -1) {
            if (neg >= 0)
                return NERR(m, ni, "two -1 dimensions");
            neg = i;
            v = 1;
        } else if (v < 0 || v > TSR_ONNX_MAX_ELEMS)
            return NERR(m, ni, "dimension %lld out of range", (long long)v);
        d[i] = v;
        known *= v;
        if (known > TSR_ONNX_MAX_ELEMS)
            return NERR(m, ni, "too many elements");
    }
    if (neg >= 0) {
        if (!known || numel(X) % known)
            return NERR(m, ni, "cannot infer the -1 dimension");
        d[neg] = numel(X) / known;
    }
    *nd = (int)cnt;
    return 0;
}

/* Zero points of an integer operand: a constant scalar or 1-D of want
 * elements (want 0: scalar only); absent = 0. */
static int int_zps(tsr_onnx_t *m, int ni, int v, int elem, int64_t want, const char *what, int32_t **zp, int *cnt)
{
    *cnt = 1;
    if (!(*zp = calloc((size_t)(want > 1 ? want : 1), sizeof(int32_t))))
        return tsr_err(TSR_ENOMEM, "out of memory");
    if (v < 0)
        return 0;
    const ox_val_t *Z = &m->vals[v];
    const int64_t c = numel(Z);
    if (!Z->cdata || Z->elem != elem || !(c == 1 || (want > 1 && c == want && Z->ndim == 1)))
        return NERR(m, ni, "%s must be a constant %s scalar%s", what, ename(elem),
                    want > 1 ? " or 1-D with one per row/column/channel" : "");
    for (int64_t i = 0; i < c; i++)
        (*zp)[i] = cget_i(Z, i);
    *cnt = (int)c;
    return 0;
}

/* Batch, M, K, N of a (batched) matmul of A [..., M, K] by B [..., K, N]:
 * B 2-D (shared) or with A's batch dimensions. */
static int mm_shape(tsr_onnx_t *m, int ni, const ox_val_t *A, const ox_val_t *B, int64_t *od, int *odn)
{
    if (A->ndim < 2 || B->ndim < 2)
        return NERR(m, ni, "operands must be at least 2-D (are %d-D and %d-D)", A->ndim, B->ndim);
    if (B->ndim != 2 && B->ndim != A->ndim)
        return NERR(m, ni, "B must be 2-D or have A's batch dimensions (broadcasting is not supported)");
    for (int i = 0; B->ndim > 2 && i < A->ndim - 2; i++)
        if (A->dims[i] != B->dims[i])
            return NERR(m, ni, "batch dimension %d differs (%lld and %lld; broadcasting is not supported)", i,
                        (long long)A->dims[i], (long long)B->dims[i]);
    if (A->dims[A->ndim - 1] != B->dims[B->ndim - 2])
        return NERR(m, ni, "A has K = %lld, B %lld", (long long)A->dims[A->ndim - 1], (long long)B->dims[B->ndim - 2]);
    memcpy(od, A->dims, sizeof(int64_t) * (size_t)A->ndim);
    od[A->ndim - 1] = B->dims[B->ndim - 1];
    *odn = A->ndim;
    return 0;
}

/* ConvInteger, MatMulInteger (int32 results) and QLinearMatMul of more than
 * 2-D operands: host kernels (the device's results are requantized 8-bit,
 * and its dense takes one weight matrix, not one per batch). */
static int lower_host_int(tsr_onnx_t *m, int ni, int hk)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int ia = 0, ib = hk == H_QMATMUL ? 3 : 1;
    const int a = in_val(m, ni, ia), b = in_val(m, ni, (size_t)ib);
    if (a < 0 || b < 0)
        return NERR(m, ni, "an operand is missing");
    const ox_val_t *A = &m->vals[a], *B = &m->vals[b];
    if ((A->elem != ET_UINT8 && A->elem != ET_INT8) || (B->elem != ET_UINT8 && B->elem != ET_INT8))
        return NERR(m, ni, "operands must be int8 or uint8 (are %s and %s)", ename(A->elem), ename(B->elem));
    if (A->view_of >= 0 || B->view_of >= 0)
        return NERR(m, ni, "operands are quantized tensors, not DequantizeLinear outputs");
    int64_t od[MAXD];
    int odn = 0, rc;
    int32_t *za = NULL, *zb = NULL;
    int nza = 0, nzb = 0, yelem = ET_INT32;
    float mult = 0;
    int32_t yzp = 0;
    if (hk == H_CONVINT) {
        conv_desc_t cd;
        memset(&cd, 0, sizeof cd);
        if ((rc = conv_geometry(m, ni, &cd, A, B, od)))
            return rc;
        odn = 4;
        if (cd.group != 1)
            return NERR(m, ni, "group %lld: only 1 is supported", (long long)cd.group);
        if (B->dims[1] != A->dims[1])
            return NERR(m, ni, "weights have %lld input channels, the input %lld", (long long)B->dims[1],
                        (long long)A->dims[1]);
        if (cd.kshape[0] != B->dims[2] || cd.kshape[1] != B->dims[3])
            return NERR(m, ni, "kernel_shape disagrees with the weights");
        /* the host kernel's work, bounded (a few seconds at most) */
        if (od[0] * od[1] * od[2] * od[3] > (1LL << 32) / (A->dims[1] * cd.kshape[0] * cd.kshape[1]))
            return NERR(m, ni, "more than 2^32 multiply-adds: too much for the host kernel");
        rc = int_zps(m, ni, in_val(m, ni, 2), A->elem, 0, "x_zero_point", &za, &nza);
        if (!rc)
            rc = int_zps(m, ni, in_val(m, ni, 3), B->elem, B->dims[0], "w_zero_point", &zb, &nzb);
        if (!rc) {
            const int64_t g[16] = {cd.kshape[0], cd.kshape[1], cd.strides[0], cd.strides[1], cd.pads[0], cd.pads[1],
                                   cd.pads[2], cd.pads[3], A->dims[0], A->dims[1], A->dims[2], A->dims[3], od[1],
                                   od[2], od[3]};
            int l = new_lop(m, ni, SIDE_HOST);
            if (l < 0)
                rc = l;
            else
                memcpy(m->lops[l].geo, g, sizeof g);
        }
    } else {
        rc = mm_shape(m, ni, A, B, od, &odn);
        const int64_t M = A->dims[A->ndim - 2], N = B->dims[B->ndim - 1];
        if (!rc && N && numel(A) > (1LL << 32) / N)
            rc = NERR(m, ni, "more than 2^32 multiply-adds: too much for the host kernel");
        if (!rc && hk == H_MATMULINT) {
            rc = int_zps(m, ni, in_val(m, ni, 2), A->elem, M, "a_zero_point", &za, &nza);
            if (!rc)
                rc = int_zps(m, ni, in_val(m, ni, 3), B->elem, N, "b_zero_point", &zb, &nzb);
        } else if (!rc) {
            double v[5];
            static const char *const what[5] = {"a_scale", "a_zero_point", "b_scale", "b_zero_point", "y_scale"};
            static const int idx[5] = {1, 2, 4, 5, 6};
            for (int k = 0; k < 5 && !rc; k++)
                rc = const_scalar(m, ni, in_val(m, ni, (size_t)idx[k]), what[k], &v[k]);
            const int vyz = in_val(m, ni, 7);
            double z = 0;
            if (!rc && vyz >= 0)
                rc = const_scalar(m, ni, vyz, "y_zero_point", &z);
            if (!rc && !(v[0] > 0 && v[2] > 0 && v[4] > 0 && isfinite(v[0] * v[2] / v[4])))
                rc = NERR(m, ni, "scales must be finite and > 0 (per tensor)");
            yelem = vyz >= 0 ? m->vals[vyz].elem : ET_UINT8;
            if (!rc && yelem != ET_UINT8 && yelem != ET_INT8)
                rc = NERR(m, ni, "output type %s (uint8 and int8 are supported)", ename(yelem));
            if (!rc && (!(za = malloc(sizeof *za)) || !(zb = malloc(sizeof *zb))))
                rc = tsr_err(TSR_ENOMEM, "out of memory");
            if (!rc) {
                za[0] = (int32_t)v[1], zb[0] = (int32_t)v[3], nza = nzb = 1;
                mult = (float)v[0] * (float)v[2] / (float)v[4];
                yzp = (int32_t)z;
            }
        }
        if (!rc) {
            int l = new_lop(m, ni, SIDE_HOST);
            rc = l < 0 ? l : 0;
            if (!rc) {
                const int64_t g[5] = {numel(A) / (M * A->dims[A->ndim - 1]), M, A->dims[A->ndim - 1], N, B->ndim > 2};
                memcpy(m->lops[l].geo, g, sizeof g);
            }
        }
    }
    if (rc) {
        free(za);
        free(zb);
        return rc;
    }
    ox_lop_t *L = &m->lops[m->nlops - 1];
    L->hkind = hk;
    L->in = A->base, L->in2 = B->base;
    L->zpa = za, L->nzpa = nza, L->zpb = zb, L->nzpb = nzb;
    L->mult = mult, L->yzp = yzp;
    const int y = def_out(m, ni, 0, yelem, odn, od);
    if (y < 0)
        return y;
    L = &m->lops[m->nlops - 1];
    L->out = y;
    m->vals[y].prod = m->nlops - 1;
    (void)n;
    return 0;
}

/* Concat of two computed tensors of the same type (any axis): a host copy.
 * Float views (QDQ) with equal per-tensor scale and zero point concatenate
 * their quantized bytes, the output a view of the result. */
static int lower_concat(tsr_onnx_t *m, int ni)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    if (n->n_input != 2)
        return NERR(m, ni, "%zu inputs: two are supported", n->n_input);
    int a = in_val(m, ni, 0), b = in_val(m, ni, 1);
    if (a < 0 || b < 0)
        return NERR(m, ni, "an input is missing");
    const ox_val_t *A = &m->vals[a], *B = &m->vals[b];
    int view = 0;
    if (A->view_of >= 0 || B->view_of >= 0) {
        if (A->view_of < 0 || B->view_of < 0 || A->cdata || B->cdata || A->vcount != 1 || B->vcount != 1 ||
            A->vscale[0] != B->vscale[0] || A->vzp[0] != B->vzp[0] ||
            m->vals[A->view_of].elem != m->vals[B->view_of].elem)
            return NERR(m, ni, "DequantizeLinear inputs must share one per-tensor scale, zero point and type (the "
                        "host concatenates the quantized bytes)");
        view = 1;
    }
    if (A->elem != B->elem || A->ndim != B->ndim)
        return NERR(m, ni, "inputs differ in type or rank");
    int64_t axis = attr_i(n, "axis", 1);
    if (axis < 0)
        axis += A->ndim;
    if (axis < 0 || axis >= A->ndim)
        return NERR(m, ni, "axis out of range");
    int64_t od[MAXD];
    for (int i = 0; i < A->ndim; i++) {
        if (i != axis && A->dims[i] != B->dims[i])
            return NERR(m, ni, "dimension %d differs (%lld and %lld)", i, (long long)A->dims[i], (long long)B->dims[i]);
        od[i] = i == axis ? A->dims[i] + B->dims[i] : A->dims[i];
    }
    const int qa = view ? A->view_of : a, qb = view ? B->view_of : b;
    const float sc = view ? A->vscale[0] : 0;
    const int32_t zp = view ? A->vzp[0] : 0;
    int q;
    if (view) { /* the concatenated quantized bytes (no ONNX name) */
        if ((q = new_val(m, "")) < 0)
            return q;
        ox_val_t *Q = &m->vals[q];
        Q->elem = m->vals[qa].elem, Q->ndim = A->ndim, Q->defined = 1;
        memcpy(Q->dims, od, sizeof od);
        Q->nbytes = (size_t)numel(Q) * esize(Q->elem);
    } else if ((q = def_out(m, ni, 0, A->elem, A->ndim, od)) < 0)
        return q;
    const int l = host_lop(m, ni, H_CONCAT, m->vals[qa].base, q);
    if (l < 0)
        return l;
    m->lops[l].in2 = m->vals[qb].base;
    int64_t outer = 1;
    for (int i = 0; i < axis; i++)
        outer *= od[i];
    m->lops[l].geo[0] = outer;
    m->lops[l].geo[1] = outer ? (int64_t)m->vals[qa].nbytes / outer : 0;
    m->lops[l].geo[2] = outer ? (int64_t)m->vals[qb].nbytes / outer : 0;
    if (view) {
        const int y = def_out(m, ni, 0, ET_FLOAT, A->ndim, od);
        if (y < 0)
            return y;
        int rc = set_view(&m->vals[y], q, sc, zp);
        if (rc)
            return rc;
    }
    return 0;
}

/* Transpose that only relabels: the dimensions it moves are 1 except one, so
 * the bytes keep their order. Anything else moves data: refused. */
static int lower_transpose(tsr_onnx_t *m, int ni, int x)
{
    const ox_val_t X = m->vals[x];
    int64_t perm[MAXD], od[MAXD];
    const Onnx__AttributeProto *pa = attr(m->gp->node[ni], "perm");
    if (pa && pa->n_ints != (size_t)X.ndim)
        return NERR(m, ni, "perm has %zu entries for a %d-D input", pa->n_ints, X.ndim);
    int seen[MAXD] = {0};
    for (int i = 0; i < X.ndim; i++) {
        perm[i] = pa ? pa->ints[i] : X.ndim - 1 - i;
        if (perm[i] < 0 || perm[i] >= X.ndim || seen[perm[i]]++)
            return NERR(m, ni, "perm is not a permutation");
        od[i] = X.dims[perm[i]];
    }
    /* the order of the non-1 dimensions must be kept */
    int64_t last = -1;
    for (int i = 0; i < X.ndim; i++) {
        if (X.dims[perm[i]] == 1)
            continue;
        if (perm[i] < last)
            return NERR(m, ni, "it moves data (dimensions of size > 1 change order): only a Transpose that "
                        "relabels is supported");
        last = perm[i];
    }
    return def_alias(m, ni, x, X.ndim, od) < 0 ? -1 : 0;
}

static int lower_node(tsr_onnx_t *m, int ni)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const char *op = n->op_type;
    const char *dom = n->domain && n->domain[0] ? n->domain : "";
    if (m->placed[ni])
        return 0; /* folded into an earlier operator */
    for (size_t k = 0; k < n->n_input; k++)
        if (n->input[k][0] && find_val(m, n->input[k]) < 0)
            return NERR(m, ni, "input \"%s\" is neither a graph input, an initializer nor a node output",
                        TSR_SAFE(n->input[k]));
    if (strcmp(dom, "") && strcmp(dom, "ai.onnx") && strcmp(dom, "com.microsoft"))
        return NERR(m, ni, "domain \"%s\" is not supported", TSR_SAFE(dom));
    int x = in_val(m, ni, 0);
    int rc;
    if (!strcmp(op, "Constant")) {
        const Onnx__AttributeProto *a = attr(n, "value");
        if (!a || !a->t || n->n_output != 1)
            return NERR(m, ni, "only a tensor 'value' attribute is supported");
        int v = new_val(m, n->output[0]);
        if (v < 0)
            return v;
        m->placed[ni] = 1;
        return load_tensor(m->path, n->output[0], a->t, &m->vals[v]);
    }
    if (!strcmp(op, "Identity") || !strcmp(op, "Cast")) {
        if (x < 0)
            return NERR(m, ni, "input missing");
        const ox_val_t X = m->vals[x];
        int to = !strcmp(op, "Cast") ? (int)attr_i(n, "to", 0) : X.elem;
        if (to == X.elem)
            return def_alias(m, ni, x, X.ndim, X.dims) < 0 ? -1 : 0;
        if (X.cdata && esize(to) && X.view_of < 0) { /* fold */
            int v = def_out(m, ni, 0, to, X.ndim, X.dims);
            if (v < 0)
                return v;
            ox_val_t *y = &m->vals[v];
            y->cdata = calloc(1, y->nbytes ? y->nbytes : 1);
            if (!y->cdata)
                return tsr_err(TSR_ENOMEM, "out of memory");
            for (int64_t i = 0; i < numel(y); i++) {
                /* integers go through int64 (an int64 constant must not be cut to int32 first) and
                   wrap into narrower types like numpy's astype; a float must truncate to a value
                   int64 holds (converting NaN or a value outside it is undefined in C) */
                int64_t q = 0;
                float f;
                if (X.elem == ET_FLOAT) {
                    f = cget_f(&X, i);
                    if (to != ET_FLOAT && !(f > -0x1p63f && f < 0x1p63f))
                        return NERR(m, ni, "Cast of element %lld (%g) to %s: out of range", (long long)i,
                                    (double)f, ename(to));
                    if (to != ET_FLOAT)
                        q = (int64_t)f;
                } else {
                    if (X.elem == ET_INT64)
                        memcpy(&q, X.cdata + 8 * i, 8);
                    else
                        q = cget_i(&X, i);
                    f = (float)q;
                }
                switch (to) {
                case ET_FLOAT: memcpy(y->cdata + 4 * i, &f, 4); break;
                case ET_UINT8: y->cdata[i] = (uint8_t)q; break;
                case ET_INT8: y->cdata[i] = (uint8_t)q; break;
                case ET_INT32: { int32_t w = (int32_t)(uint32_t)q; memcpy(y->cdata + 4 * i, &w, 4); break; }
                default: memcpy(y->cdata + 8 * i, &q, 8); break;
                }
            }
            m->placed[ni] = 1;
            return 0;
        }
        return NERR(m, ni, "Cast from %s to %s of a computed tensor is not supported", ename(X.elem), ename(to));
    }
    if (!strcmp(op, "ConstantOfShape")) {
        if (x < 0 || !m->vals[x].cdata || m->vals[x].elem != ET_INT64 || m->vals[x].ndim != 1 || numel(&m->vals[x]) > MAXD)
            return NERR(m, ni, "the shape must be a 1-D int64 constant");
        int64_t d[MAXD];
        for (int64_t i = 0; i < numel(&m->vals[x]); i++)
            memcpy(&d[i], m->vals[x].cdata + 8 * i, 8);
        const Onnx__AttributeProto *a = attr(n, "value");
        ox_val_t fill;
        memset(&fill, 0, sizeof fill);
        if (a && a->t && (rc = load_tensor(m->path, "value", a->t, &fill)))
            return rc;
        if (a && a->t && numel(&fill) != 1) {
            free(fill.cdata);
            return NERR(m, ni, "value must have one element");
        }
        int64_t cnt = 1;
        for (int64_t i = 0; i < numel(&m->vals[x]); i++)
            if (d[i] < 0 || (cnt *= d[i]) > (1 << 20)) {
                free(fill.cdata);
                return NERR(m, ni, "more than %d elements or a negative dimension (a constant this large is not "
                            "expanded at import)", 1 << 20);
            }
        int v = def_out(m, ni, 0, a && a->t ? fill.elem : ET_FLOAT, (int)numel(&m->vals[x]), d);
        if (v < 0) {
            free(fill.cdata);
            return v;
        }
        ox_val_t *y = &m->vals[v];
        y->cdata = calloc(1, y->nbytes ? y->nbytes : 1);
        if (!y->cdata) {
            free(fill.cdata);
            return tsr_err(TSR_ENOMEM, "out of memory");
        }
        const size_t es = esize(y->elem);
        if (fill.cdata)
            for (int64_t i = 0; i < numel(y); i++)
                memcpy(y->cdata + (size_t)i * es, fill.cdata, es);
        free(fill.cdata);
        m->placed[ni] = 1;
        return 0;
    }
    if (!strcmp(op, "DequantizeLinear")) {
        if (x < 0)
            return NERR(m, ni, "input missing");
        float *sc = NULL;
        int32_t *zp = NULL;
        qarg_t q;
        rc = qarg_consts(m, ni, in_val(m, ni, 1), in_val(m, ni, 2), &q, &sc, &zp, "x");
        const ox_val_t X = m->vals[x];
        int axis = (int)attr_i(n, "axis", 1);
        if (!rc && X.elem != ET_UINT8 && X.elem != ET_INT8 && X.elem != ET_INT32)
            rc = NERR(m, ni, "input has type %s", ename(X.elem));
        if (!rc && q.cnt > 1) {
            if (axis < 0)
                axis += X.ndim;
            if (axis < 0 || axis >= X.ndim || X.dims[axis] != q.cnt)
                rc = NERR(m, ni, "%d scales do not match axis %d of the input", q.cnt, axis);
        }
        int v = rc ? rc : def_out(m, ni, 0, ET_FLOAT, X.ndim, X.dims);
        if (v < 0) {
            free(sc);
            free(zp);
            return v;
        }
        ox_val_t *y = &m->vals[v];
        y->view_of = x; /* keeps the shape: a relabelled view's bytes are at .base */
        y->vscale = sc;
        y->vzp = zp;
        y->vcount = q.cnt;
        y->vaxis = axis;
        m->placed[ni] = 5;
        if (X.cdata) { /* also the float constant, for consumers that want floats */
            y->cdata = malloc(y->nbytes ? y->nbytes : 1);
            if (!y->cdata)
                return tsr_err(TSR_ENOMEM, "out of memory");
            int64_t inner = 1;
            for (int i = axis + 1; i < X.ndim; i++)
                inner *= X.dims[i];
            for (int64_t i = 0; i < numel(y); i++) {
                int c = q.cnt > 1 ? (int)((i / inner) % q.cnt) : 0;
                float f = (float)(cget_i(&X, i) - zp[c]) * sc[c];
                memcpy(y->cdata + 4 * i, &f, 4);
            }
            y->view_of = x;
            m->placed[ni] = 1;
        }
        return 0;
    }
    if (!strcmp(op, "QuantizeLinear")) {
        if (x < 0)
            return NERR(m, ni, "input missing");
        double s, z = 0;
        int vz = in_val(m, ni, 2);
        if ((rc = const_scalar(m, ni, in_val(m, ni, 1), "y_scale", &s)) ||
            (vz >= 0 && (rc = const_scalar(m, ni, vz, "y_zero_point", &z))))
            return rc;
        const int elem = vz >= 0 ? m->vals[vz].elem : ET_UINT8;
        const ox_val_t X = m->vals[x];
        if (elem != ET_UINT8 && elem != ET_INT8)
            return NERR(m, ni, "output type %s (uint8 and int8 are supported)", ename(elem));
        if (X.elem != ET_FLOAT)
            return NERR(m, ni, "input has type %s (float expected)", ename(X.elem));
        if (X.view_of >= 0 && !X.cdata && X.vcount == 1 && X.vscale[0] == (float)s && X.vzp[0] == (int32_t)z &&
            m->vals[X.view_of].elem == elem) {
            /* Q(DQ(q)) with the same parameters is q: an alias */
            return def_alias(m, ni, X.view_of, X.ndim, X.dims) < 0 ? -1 : 0;
        }
        if ((rc = need_real(m, ni, x)))
            return rc;
        int v = def_out(m, ni, 0, elem, X.ndim, X.dims);
        if (v < 0)
            return v;
        int l = host_lop(m, ni, H_QUANT, m->vals[x].base, v);
        if (l < 0)
            return l;
        m->lops[l].scale = (float)s;
        m->lops[l].zp = (int32_t)z;
        return 0;
    }
    if (!strcmp(op, "Conv"))
        return lower_qdq_conv(m, ni, 0);
    if (!strcmp(op, "Gemm") || !strcmp(op, "MatMul"))
        return lower_qdq_conv(m, ni, 1);
    if (!strcmp(op, "QLinearConv"))
        return lower_qlinear(m, ni, 0);
    if (!strcmp(op, "QLinearAdd") && !strcmp(dom, "com.microsoft")) {
        double v[6];
        static const char *const what[6] = {"A_scale", "A_zero_point", "B_scale", "B_zero_point", "C_scale",
                                            "C_zero_point"};
        static const int idx[6] = {1, 2, 4, 5, 6, 7};
        for (int k = 0; k < 6; k++)
            if ((rc = const_scalar(m, ni, in_val(m, ni, (size_t)idx[k]), what[k], &v[k])))
                return rc;
        int a = x, b = in_val(m, ni, 3);
        if (a < 0 || b < 0)
            return NERR(m, ni, "an operand is missing");
        int y = def_out(m, ni, 0, m->vals[in_val(m, ni, 7)].elem, m->vals[a].ndim, m->vals[a].dims);
        if (y < 0)
            return y;
        return lower_add(m, ni, a, (float)v[0], (int32_t)v[1], b, (float)v[2], (int32_t)v[3], (float)v[4],
                         (int32_t)v[5], 0, y);
    }
    if (!strcmp(op, "Add")) { /* QDQ: DequantizeLinear operands, [Relu], QuantizeLinear */
        int qa, qb, ca, cb;
        const float *sa, *sb;
        const int32_t *za, *zb;
        if ((rc = view_arg(m, ni, x, "input A", &qa, &sa, &za, &ca)) ||
            (rc = view_arg(m, ni, in_val(m, ni, 1), "input B", &qb, &sb, &zb, &cb)))
            return rc;
        if (ca != 1 || cb != 1 || m->vals[qa].cdata || m->vals[qb].cdata)
            return NERR(m, ni, "operands must be computed per-tensor quantized tensors");
        conv_desc_t cd;
        memset(&cd, 0, sizeof cd);
        int folded[2], nf;
        int qn = qdq_tail(m, ni, &cd, folded, &nf);
        if (qn < 0)
            return qn;
        if (cd.has_clip)
            return NERR(m, ni, "Clip after a quantized add is not supported (Relu is)");
        int y = def_out(m, qn, 0, cd.yelem, m->vals[qa].ndim, m->vals[qa].dims);
        if (y < 0)
            return y;
        if ((rc = lower_add(m, ni, qa, sa[0], za[0], qb, sb[0], zb[0], cd.ys, cd.yzp, cd.relu, y)))
            return rc;
        for (int i = 0; i < nf; i++) {
            m->placed[folded[i]] = 4;
            m->node_lop[folded[i]] = m->nlops - 1;
        }
        return 0;
    }
    if (!strcmp(op, "QGemm") && !strcmp(dom, "com.microsoft"))
        return lower_qlinear(m, ni, 1);
    if (!strcmp(op, "QLinearMatMul")) {
        const int b = in_val(m, ni, 3);
        if (x >= 0 && b >= 0 && (m->vals[x].ndim > 2 || m->vals[b].ndim > 2))
            return lower_host_int(m, ni, H_QMATMUL);
        return lower_qlinear(m, ni, 2);
    }
    if (!strcmp(op, "ConvInteger"))
        return lower_host_int(m, ni, H_CONVINT);
    if (!strcmp(op, "MatMulInteger"))
        return lower_host_int(m, ni, H_MATMULINT);
    if (!strcmp(op, "Concat"))
        return lower_concat(m, ni);
    if (!strcmp(op, "Transpose")) {
        if (x < 0)
            return NERR(m, ni, "input missing");
        return lower_transpose(m, ni, x);
    }
    if (!strcmp(op, "MaxPool")) {
        if (x < 0)
            return NERR(m, ni, "input missing");
        int64_t od[4];
        const ox_val_t X = m->vals[x];
        if (X.view_of >= 0 && !X.cdata) { /* max commutes with a monotone DequantizeLinear: pool the bytes */
            if (X.vcount != 1)
                return NERR(m, ni, "per-channel input views are not supported");
            int qv = X.view_of;
            if ((rc = lower_pool(m, ni, qv, -1, od, TSR_POOL_MAX, 0)))
                return rc;
            int q = new_val(m, ""); /* the pooled quantized bytes (no ONNX name) */
            if (q < 0)
                return q;
            ox_val_t *Q = &m->vals[q];
            Q->elem = m->vals[qv].elem, Q->ndim = 4, Q->defined = 1;
            memcpy(Q->dims, od, sizeof od);
            Q->nbytes = (size_t)numel(Q);
            if ((rc = lower_pool(m, ni, qv, q, od, TSR_POOL_MAX, 0)))
                return rc;
            int y = def_out(m, ni, 0, ET_FLOAT, 4, od); /* the float output: a view of the pooled bytes */
            if (y < 0)
                return y;
            return set_view(&m->vals[y], q, X.vscale[0], X.vzp[0]);
        }
        if ((rc = lower_pool(m, ni, x, -1, od, TSR_POOL_MAX, 0)))
            return rc;
        int y = def_out(m, ni, 0, X.elem, 4, od);
        return y < 0 ? y : lower_pool(m, ni, x, y, od, TSR_POOL_MAX, 0);
    }
    if (!strcmp(op, "AveragePool") || !strcmp(op, "GlobalAveragePool")) {
        /* QDQ: DequantizeLinear -> pool -> QuantizeLinear with the same scale and zero point */
        const tsr_pool_kind_e kind = op[0] == 'G' ? TSR_POOL_GLOBAL_AVG : TSR_POOL_AVG;
        int qv, cnt;
        const float *sc;
        const int32_t *zp;
        if ((rc = view_arg(m, ni, x, "input", &qv, &sc, &zp, &cnt)))
            return rc;
        conv_desc_t cd;
        memset(&cd, 0, sizeof cd);
        int folded[2], nf;
        int qn = qdq_tail(m, ni, &cd, folded, &nf);
        if (qn < 0)
            return qn;
        if (cnt != 1 || cd.relu || cd.has_clip || cd.ys != sc[0] || cd.yzp != zp[0] || cd.yelem != m->vals[qv].elem)
            return NERR(m, ni, "the device averages in the input's quantization: the QuantizeLinear after it must "
                        "have the DequantizeLinear's scale, zero point and type (and no Relu/Clip between)");
        int64_t od[4];
        if ((rc = lower_pool(m, ni, qv, -1, od, kind, zp[0])))
            return rc;
        int y = def_out(m, qn, 0, cd.yelem, 4, od);
        if (y < 0 || (rc = lower_pool(m, ni, qv, y, od, kind, zp[0])))
            return y < 0 ? y : rc;
        for (int i = 0; i < nf; i++) {
            m->placed[folded[i]] = 4;
            m->node_lop[folded[i]] = m->nlops - 1;
        }
        return 0;
    }
    if (!strcmp(op, "QLinearGlobalAveragePool") && !strcmp(dom, "com.microsoft")) {
        double v[4];
        static const char *const what[4] = {"x_scale", "x_zero_point", "y_scale", "y_zero_point"};
        for (int k = 0; k < 4; k++)
            if ((rc = const_scalar(m, ni, in_val(m, ni, (size_t)k + 1), what[k], &v[k])))
                return rc;
        if (attr_i(n, "channels_last", 0))
            return NERR(m, ni, "channels_last is not supported");
        if (x < 0 || (float)v[0] != (float)v[2] || v[1] != v[3])
            return NERR(m, ni, "the device averages in the input's quantization: x and y scale and zero point must "
                        "be equal");
        int64_t od[4];
        if ((rc = lower_pool(m, ni, x, -1, od, TSR_POOL_GLOBAL_AVG, (int32_t)v[1])))
            return rc;
        int y = def_out(m, ni, 0, m->vals[x].elem, 4, od);
        return y < 0 ? y : lower_pool(m, ni, x, y, od, TSR_POOL_GLOBAL_AVG, (int32_t)v[1]);
    }
    if (!strcmp(op, "Flatten") || !strcmp(op, "Reshape")) {
        if (x < 0)
            return NERR(m, ni, "input missing");
        const ox_val_t X = m->vals[x];
        int64_t d[MAXD];
        int nd = 0;
        if (!strcmp(op, "Flatten")) {
            int64_t axis = attr_i(n, "axis", 1), a = 1, b = 1;
            if (axis < 0)
                axis += X.ndim;
            if (axis < 0 || axis > X.ndim)
                return NERR(m, ni, "axis out of range");
            for (int i = 0; i < X.ndim; i++)
                *(i < axis ? &a : &b) *= X.dims[i];
            d[0] = a, d[1] = b, nd = 2;
        } else if ((rc = reshape_dims(m, ni, &X, in_val(m, ni, 1), &nd, d)))
            return rc;
        return def_alias(m, ni, x, nd, d) < 0 ? -1 : 0;
    }
    if (!strcmp(op, "Relu") || !strcmp(op, "Softmax") || !strcmp(op, "ArgMax")) {
        if (x < 0)
            return NERR(m, ni, "input missing");
        if (m->vals[x].elem != ET_FLOAT)
            return NERR(m, ni, "input type %s: the host runs it on float only", ename(m->vals[x].elem));
        if ((rc = need_real(m, ni, x)))
            return rc;
        const ox_val_t X = m->vals[x];
        int64_t d[MAXD];
        memcpy(d, X.dims, sizeof d);
        int hk = !strcmp(op, "Relu") ? H_RELU : !strcmp(op, "Softmax") ? H_SOFTMAX : H_ARGMAX;
        int64_t axis = attr_i(n, "axis", hk == H_SOFTMAX ? (m->opset < 13 ? 1 : -1) : 0);
        if (axis < 0)
            axis += X.ndim;
        if (hk == H_SOFTMAX && m->opset < 13 && axis != X.ndim - 1)
            return NERR(m, ni, "before opset 13 Softmax flattens from its axis: only the last axis is supported");
        if (hk != H_RELU && (axis < 0 || axis >= X.ndim))
            return NERR(m, ni, "axis out of range");
        int nd = X.ndim, keep = (int)attr_i(n, "keepdims", 1);
        if (hk == H_ARGMAX) {
            if (attr_i(n, "select_last_index", 0))
                return NERR(m, ni, "select_last_index is not supported");
            if (keep)
                d[axis] = 1;
            else {
                for (int i = (int)axis; i + 1 < nd; i++)
                    d[i] = d[i + 1];
                nd--;
            }
        }
        int v = def_out(m, ni, 0, hk == H_ARGMAX ? ET_INT64 : ET_FLOAT, nd, d);
        if (v < 0)
            return v;
        int l = host_lop(m, ni, hk, X.base, v);
        if (l < 0)
            return l;
        m->lops[l].axis = (int)axis;
        return 0;
    }
    return NERR(m, ni, "op type not supported on the device or the host");
}

/* -------------------------------------------------------------- import */

/* Producers are resolved once (prod[k] for the k-th node input overall:
 * a node index, or -1 for a graph input / initializer / empty name), then
 * nodes are taken in passes as their producers are placed: O(nodes^2)
 * at worst, bounded by the node limit. */
static int topo_sort(tsr_onnx_t *m)
{
    const size_t nn = m->gp->n_node;
    size_t nin = 0;
    for (size_t i = 0; i < nn; i++)
        nin += m->gp->node[i]->n_input;
    int *done = calloc(nn + 1, sizeof(int)), *prod = malloc(sizeof(int) * (nin + 1));
    m->order = malloc(sizeof(int) * (nn + 1));
    if (!done || !prod || !m->order) {
        free(done);
        free(prod);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    int rc = 0;
    for (size_t i = 0, k0 = 0; i < nn && !rc; k0 += m->gp->node[i]->n_input, i++) {
        const Onnx__NodeProto *n = m->gp->node[i];
        for (size_t k = 0; k < n->n_input && !rc; k++) {
            const char *nm = n->input[k];
            int found = !nm[0], p = -1;
            for (size_t g = 0; g < m->gp->n_input && !found; g++)
                found = m->gp->input[g]->name && !strcmp(m->gp->input[g]->name, nm);
            for (size_t g = 0; g < m->gp->n_initializer && !found; g++)
                found = m->gp->initializer[g]->name && !strcmp(m->gp->initializer[g]->name, nm);
            for (size_t j = 0; j < nn && !found && p < 0; j++)
                for (size_t o = 0; o < m->gp->node[j]->n_output; o++)
                    if (!strcmp(m->gp->node[j]->output[o], nm))
                        p = (int)j;
            if (!found && p < 0)
                rc = NERR(m, (int)i, "input \"%s\" is neither a graph input, an initializer nor a node output "
                          "(a missing initializer?)", TSR_SAFE(nm));
            prod[k0 + k] = p;
        }
    }
    size_t placed = 0;
    int progress = 1;
    /* Constants first: a folded pattern reads the scales of nodes after it */
    for (size_t i = 0; i < nn && !rc; i++)
        if (m->gp->node[i]->n_input == 0) {
            done[i] = 1;
            m->order[placed++] = (int)i;
        }
    while (!rc && placed < nn && progress) {
        progress = 0;
        for (size_t i = 0, k0 = 0; i < nn; k0 += m->gp->node[i]->n_input, i++) {
            if (done[i])
                continue;
            int ready = 1;
            for (size_t k = 0; k < m->gp->node[i]->n_input && ready; k++)
                ready = prod[k0 + k] < 0 || done[prod[k0 + k]];
            if (ready) {
                done[i] = 1;
                m->order[placed++] = (int)i;
                progress = 1;
            }
        }
    }
    if (!rc && placed < nn) {
        for (size_t i = 0; i < nn; i++)
            if (!done[i]) {
                rc = NERR(m, (int)i, "the graph has a cycle through this node");
                break;
            }
    }
    free(done);
    free(prod);
    return rc;
}

static int import_graph(tsr_onnx_t *m, int batch)
{
    Onnx__ModelProto *mp = m->mp;
    if (!mp->graph)
        return tsr_err(TSR_EINVAL, "%s: no graph", m->path);
    m->gp = mp->graph;
    Onnx__GraphProto *g = m->gp;
    int64_t opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        const char *d = o->domain ? o->domain : "";
        if (!d[0] || !strcmp(d, "ai.onnx"))
            opset = o->has_version ? o->version : -1;
    }
    m->opset = opset;
    if (opset < 10 || opset > 21)
        return tsr_err(TSR_EINVAL, "%s: ai.onnx opset %lld is not supported (10..21)", m->path, (long long)opset);
    /* limits that keep the name lookups (linear) and the topological sort (quadratic) in milliseconds */
    if (g->n_node > 4096 || g->n_initializer > 8192 || g->n_input > 64 || g->n_output > 64)
        return tsr_err(TSR_EINVAL, "%s: %zu nodes, %zu initializers, %zu inputs, %zu outputs (at most 4096, 8192, "
                       "64, 64)", m->path, g->n_node, g->n_initializer, g->n_input, g->n_output);
    for (size_t i = 0; i < g->n_node; i++)
        if (g->node[i]->n_input > 64 || g->node[i]->n_output > 16)
            return tsr_err(TSR_EINVAL, "%s: node %zu has %zu inputs and %zu outputs (at most 64 and 16)", m->path, i,
                           g->node[i]->n_input, g->node[i]->n_output);
    /* proto2 strings that are absent are NULL in protobuf-c: every name read later is checked here */
    for (size_t i = 0; i < g->n_node; i++)
        if (!g->node[i]->op_type || !g->node[i]->op_type[0])
            return tsr_err(TSR_EINVAL, "%s: node %zu has no op type", m->path, i);
    /* every operator lowered here names its first output (a fuzzer finding: a node with none) */
    for (size_t i = 0; i < g->n_node; i++)
        if (g->node[i]->n_output < 1)
            return tsr_err(TSR_EINVAL, "%s: node %zu (%s) has no outputs", m->path, i, TSR_SAFE(g->node[i]->op_type));
    for (size_t i = 0; i < g->n_output; i++)
        if (!g->output[i]->name || !g->output[i]->name[0])
            return tsr_err(TSR_EINVAL, "%s: graph output %zu has no name", m->path, i);
    m->placed = calloc(g->n_node + 1, sizeof(int));
    m->node_lop = malloc(sizeof(int) * (g->n_node + 1));
    if (!m->placed || !m->node_lop)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (size_t i = 0; i < g->n_node; i++)
        m->node_lop[i] = -1;
    int rc;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !t->name[0])
            return tsr_err(TSR_EINVAL, "%s: initializer %zu has no name", m->path, i);
        if (find_val(m, t->name) >= 0)
            return tsr_err(TSR_EINVAL, "%s: initializer \"%s\" is defined twice", m->path, TSR_SAFE(t->name));
        int v = new_val(m, t->name);
        if (v < 0)
            return v;
        if ((rc = load_tensor(m->path, t->name, t, &m->vals[v])))
            return rc;
    }
    m->in_val = -1;
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi->name || find_val(m, vi->name) >= 0)
            continue; /* an initializer listed as an input (older exporters) */
        if (m->in_val >= 0)
            return tsr_err(TSR_EINVAL, "%s: more than one graph input (\"%s\"): one is supported", m->path,
                           TSR_SAFE(vi->name));
        if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type ||
            !vi->type->tensor_type->shape)
            return tsr_err(TSR_EINVAL, "%s: graph input \"%s\" is not a tensor with a shape", m->path,
                           TSR_SAFE(vi->name));
        const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
        int v = new_val(m, vi->name);
        if (v < 0)
            return v;
        ox_val_t *x = &m->vals[v];
        x->elem = tt->elem_type;
        if (!esize(x->elem))
            return tsr_err(TSR_EINVAL, "%s: graph input \"%s\": element type %d is not supported", m->path,
                           TSR_SAFE(vi->name), x->elem);
        if (tt->shape->n_dim > MAXD)
            return tsr_err(TSR_EINVAL, "%s: graph input \"%s\": too many dimensions", m->path, TSR_SAFE(vi->name));
        x->ndim = (int)tt->shape->n_dim;
        int64_t cnt = 1;
        for (int d = 0; d < x->ndim; d++) {
            const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[d];
            int64_t e = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? dm->dim_value : -1;
            if (e < 0 && d == 0)
                e = batch;
            if (e < 0)
                return tsr_err(TSR_EINVAL, "%s: graph input \"%s\": dimension %d is symbolic (only the first may be)",
                               m->path, TSR_SAFE(vi->name), d);
            if (e > TSR_ONNX_MAX_ELEMS || (cnt *= e) > TSR_ONNX_MAX_ELEMS)
                return tsr_err(TSR_EINVAL, "%s: graph input \"%s\": more than %lld elements", m->path,
                               TSR_SAFE(vi->name), (long long)TSR_ONNX_MAX_ELEMS);
            x->dims[d] = e;
        }
        x->nbytes = (size_t)cnt * esize(x->elem);
        x->defined = 1;
        m->in_val = v;
    }
    if (m->in_val < 0)
        return tsr_err(TSR_EINVAL, "%s: the graph has no input", m->path);
    if (g->n_output < 1)
        return tsr_err(TSR_EINVAL, "%s: the graph has no output", m->path);
    if ((rc = topo_sort(m)))
        return rc;
    for (size_t i = 0; i < g->n_node; i++)
        if ((rc = lower_node(m, m->order[i])))
            return rc < 0 ? rc : TSR_EINVAL;
    m->out_val = find_val(m, g->output[0]->name);
    if (m->out_val < 0)
        return tsr_err(TSR_EINVAL, "%s: graph output \"%s\" is produced by no node", m->path,
                       TSR_SAFE(g->output[0]->name));
    if ((rc = need_real(m, m->order[g->n_node ? g->n_node - 1 : 0], m->out_val)))
        return rc;
    if (m->vals[m->out_val].cdata)
        return tsr_err(TSR_EINVAL, "%s: the graph output is a constant", m->path);
    return 0;
}

/* ------------------------------------------------------------ segments */

static int nd_tensor(tsr_onnx_t *m, ox_seg_t *s, int v)
{
    ox_val_t *x = &m->vals[v];
    if (x->seg_tensor >= 0)
        return x->seg_tensor;
    tsr_nd_tensor_t *nt = realloc(s->nd.tensors, sizeof *nt * (size_t)(s->nd.ntensors + 1));
    if (!nt)
        return tsr_err(TSR_ENOMEM, "out of memory");
    s->nd.tensors = nt;
    tsr_nd_tensor_t *t = &nt[s->nd.ntensors];
    memset(t, 0, sizeof *t);
    int64_t d[4] = {1, 1, 1, 1};
    if (x->ndim > 4 || x->ndim < 1)
        return tsr_err(TSR_EINVAL, "%s: tensor \"%s\" has %d dimensions (the device takes 1..4)", m->path,
                       TSR_SAFE(x->name), x->ndim);
    for (int i = 0; i < x->ndim; i++)
        d[i] = x->dims[i];
    t->n = (int)d[0], t->c = (int)d[1], t->h = (int)d[2], t->w = (int)d[3];
    qdtype(x->elem, &t->dtype);
    t->scale = 1;
    x->seg_tensor = s->nd.ntensors;
    return s->nd.ntensors++;
}

/* Zero points of quantized values: a conv fixes its input's and output's,
 * a host QuantizeLinear its output's, a max pool passes its input's on
 * (either way; padding never wins a max, so any zero point is exact). Two
 * conv readers with different input zero points would need a copy: refused. */
static int assign_zps(tsr_onnx_t *m)
{
    for (int i = 0; i < m->nlops; i++) {
        const ox_lop_t *L = &m->lops[i];
        int32_t zin = 0, zout = 0, fin = 0, fout = 0;
        if (L->side == SIDE_HOST && L->hkind == H_QUANT)
            zout = L->zp, fout = 1;
        if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_CONV)
            zin = L->nd.conv.x_zp, fin = 1, zout = L->nd.conv.y_zp, fout = 1;
        if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_DENSE)
            zin = L->nd.dense.x_zp, fin = 1, zout = L->nd.dense.y_zp, fout = 1;
        if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_POOL && L->nd.pool.kind != TSR_POOL_MAX)
            zin = zout = L->nd.pool.zp, fin = fout = 1;
        if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_ADD) {
            zin = L->nd.add.a.zp, fin = 1, zout = L->nd.add.y.zp, fout = 1;
            ox_val_t *I2 = &m->vals[L->in2];
            if (I2->has_zp && I2->zp != L->nd.add.b.zp)
                return tsr_err(TSR_EINVAL, "%s: node \"%s\": input zero point %d, but \"%s\" has %d", m->path,
                               TSR_SAFE(nname(m, L->node)), L->nd.add.b.zp, TSR_SAFE(I2->name), I2->zp);
            I2->zp = L->nd.add.b.zp, I2->has_zp = 1;
        }
        ox_val_t *I = L->in >= 0 ? &m->vals[L->in] : NULL, *O = &m->vals[L->out];
        if (fin && I) {
            if (I->has_zp && I->zp != zin)
                return tsr_err(TSR_EINVAL, "%s: node \"%s\": input zero point %d, but \"%s\" has %d", m->path,
                               TSR_SAFE(nname(m, L->node)), zin, TSR_SAFE(I->name), I->zp);
            I->zp = zin, I->has_zp = 1;
        }
        if (fout)
            O->zp = zout, O->has_zp = 1;
    }
    for (int pass = 0; pass < 4; pass++)
        for (int i = 0; i < m->nlops; i++) {
            const ox_lop_t *L = &m->lops[i];
            if (L->side != SIDE_DEV || L->nd.kind != TSR_ND_POOL || L->nd.pool.kind != TSR_POOL_MAX)
                continue;
            ox_val_t *I = &m->vals[L->in], *O = &m->vals[L->out];
            if (I->has_zp && !O->has_zp)
                O->zp = I->zp, O->has_zp = 1;
            else if (O->has_zp && !I->has_zp)
                I->zp = O->zp, I->has_zp = 1;
            else if (!I->has_zp && !O->has_zp)
                I->zp = O->zp = I->elem == ET_UINT8 ? 0 : -128, I->has_zp = O->has_zp = 1;
            else if (I->zp != O->zp)
                return tsr_err(TSR_EINVAL, "%s: node \"%s\": its input and output zero points differ", m->path,
                               TSR_SAFE(nname(m, L->node)));
        }
    return 0;
}

/* Lops [i, end) as one device graph: one external input (tensor 0 of the
 * netdesc) and at most one tensor read after it (or the graph output). */
static int seg_valid(const tsr_onnx_t *m, int i, int end, int *in_val, int *out_val)
{
    int nin = 0, nout = 0;
    *in_val = *out_val = -1;
    for (int k = i; k < end; k++) {
        const int ins[2] = {m->lops[k].in, m->lops[k].in2};
        for (int q = 0; q < 2; q++) {
            if (ins[q] < 0)
                continue;
            int inside = 0;
            for (int j = i; j < k && !inside; j++)
                inside = m->lops[j].out == ins[q];
            if (!inside && ins[q] != *in_val) {
                if (nin++)
                    return 0;
                *in_val = ins[q];
            }
        }
        const int o = m->lops[k].out;
        int read = o == m->vals[m->out_val].base;
        for (int j = end; j < m->nlops && !read; j++)
            read = m->lops[j].in == o || m->lops[j].in2 == o;
        if (read) {
            if (nout++)
                return 0;
            *out_val = o;
        }
    }
    if (!nout)
        *out_val = m->lops[end - 1].out;
    return nin == 1;
}

static int build_segments(tsr_onnx_t *m)
{
    int rc = assign_zps(m);
    if (rc)
        return rc;
    for (int i = 0; i < m->nlops;) {
        if (m->lops[i].side != SIDE_DEV) {
            i++;
            continue;
        }
        /* the longest run of device operators that is a valid device graph; a conv whose weights need
           int8 parts runs alone (device tensors hold one copy of its input) */
        int e = i, solo = 0;
        while (e < m->nlops && m->lops[e].side == SIDE_DEV) {
            const int split = m->lops[e].nd.kind == TSR_ND_CONV && tsr_conv2d_input_copies(&m->lops[e].nd.conv) > 1;
            if (split && e > i)
                break;
            e++;
            if (split) {
                solo = 1;
                break;
            }
        }
        int end = e, in_val = -1, out_val = -1;
        while (end > i && !seg_valid(m, i, end, &in_val, &out_val))
            end--;
        if (end == i)
            return tsr_err(TSR_EINVAL, "%s: node \"%s\" (%s): its inputs come from two places outside the device "
                           "(a device graph takes one input): not supported yet", m->path,
                           TSR_SAFE(nname(m, m->lops[i].node)), TSR_SAFE(m->gp->node[m->lops[i].node]->op_type));
        ox_seg_t *ns = realloc(m->segs, sizeof *ns * (size_t)(m->nsegs + 1));
        if (!ns)
            return tsr_err(TSR_ENOMEM, "out of memory");
        m->segs = ns;
        ox_seg_t *s = &ns[m->nsegs];
        memset(s, 0, sizeof *s);
        for (int v = 0; v < m->nvals; v++)
            m->vals[v].seg_tensor = -1;
        s->in_val = in_val;
        s->out_val = out_val;
        s->first = i;
        s->last = end - 1;
        s->solo = solo && end - i == 1;
        s->nd.nodes = calloc((size_t)(end - i), sizeof *s->nd.nodes);
        if (!s->nd.nodes)
            return tsr_err(TSR_ENOMEM, "out of memory");
        if ((rc = nd_tensor(m, s, in_val)) < 0)
            return rc;
        s->nd.tensors[rc].zp = m->vals[in_val].zp;
        for (int j = i; j < end; j++) {
            ox_lop_t *L = &m->lops[j];
            tsr_nd_node_t *nn = &s->nd.nodes[s->nd.nnodes];
            *nn = L->nd;
            int ti = nd_tensor(m, s, L->in), t2 = ti < 0 || L->in2 < 0 ? -1 : nd_tensor(m, s, L->in2);
            int to = ti < 0 ? ti : nd_tensor(m, s, L->out);
            if (ti < 0 || to < 0 || (L->in2 >= 0 && t2 < 0))
                return ti < 0 ? ti : to < 0 ? to : t2;
            nn->in[0] = ti;
            nn->in[1] = t2;
            nn->out = to;
            s->nd.tensors[ti].zp = m->vals[L->in].zp;
            if (t2 >= 0)
                s->nd.tensors[t2].zp = m->vals[L->in2].zp;
            s->nd.tensors[to].zp = m->vals[L->out].zp;
            if (L->nd.kind == TSR_ND_POOL)
                nn->pool.zp = m->vals[L->in].zp;
            L->seg = m->nsegs;
            s->nd.nnodes++;
        }
        s->nd.output = m->vals[out_val].seg_tensor;
        snprintf(s->nd.name, sizeof s->nd.name, "segment%d", m->nsegs);
        m->nsegs++;
        if ((rc = tsr_netdesc_validate(&s->nd)))
            return tsr_err_prefix(rc, "%s: device segment %d: ", m->path, m->nsegs - 1);
        i = end;
    }
    return 0;
}

/* -------------------------------------------------------------- public */

int tsr_onnx_load_buffer(const void *buf, size_t n, const char *name, int batch, tsr_onnx_t **out)
{
    *out = NULL;
    if (batch < 1 || batch > 65536)
        return tsr_err(TSR_EINVAL, "%s: batch %d out of range", name, batch);
    tsr_onnx_t *m = calloc(1, sizeof *m);
    if (!m)
        return tsr_err(TSR_ENOMEM, "out of memory");
    snprintf(m->path, sizeof m->path, "%s", name);
    /* nesting bounded before protobuf-c's recursive unpack (tsr_onnx_wire.h) */
    int rc = tsr_onnx_wire_check(buf, n, name);
    if (!rc && !(m->mp = onnx__model_proto__unpack(NULL, n, buf)))
        rc = tsr_err(TSR_EPARSE, "%s: not a valid ONNX protobuf (truncated or corrupt)", name);
    if (!rc)
        rc = import_graph(m, batch);
    if (!rc)
        rc = build_segments(m);
    if (rc) {
        tsr_onnx_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int tsr_onnx_load(const char *path, int batch, tsr_onnx_t **out)
{
    uint8_t *buf = NULL;
    size_t n = 0;
    *out = NULL;
    int rc = read_file(path, "ONNX model", &buf, &n);
    if (rc)
        return rc;
    rc = tsr_onnx_load_buffer(buf, n, path, batch, out);
    free(buf);
    return rc;
}

void tsr_onnx_free(tsr_onnx_t *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nsegs; i++) {
        tsr_graph_free(m->segs[i].g);
        free(m->segs[i].nd.nodes);
        free(m->segs[i].nd.tensors);
    }
    free(m->segs);
    for (int i = 0; i < m->nlops; i++)
        if (m->lops[i].side == SIDE_DEV)
            tsr_nd_node_free(&m->lops[i].nd);
        else {
            free(m->lops[i].zpa);
            free(m->lops[i].zpb);
        }
    free(m->lops);
    for (int i = 0; i < m->nvals; i++) {
        free(m->vals[i].cdata);
        free(m->vals[i].vscale);
        free(m->vals[i].vzp);
        if (m->vals[i].base == i)
            free(m->vals[i].rt);
    }
    free(m->vals);
    free(m->order);
    free(m->placed);
    free(m->node_lop);
    if (m->mp)
        onnx__model_proto__free_unpacked(m->mp, NULL);
    free(m);
}

int tsr_onnx_device_ops(const tsr_onnx_t *m)
{
    int c = 0;
    for (int i = 0; i < m->nlops; i++)
        c += m->lops[i].side == SIDE_DEV;
    return c;
}

int tsr_onnx_host_ops(const tsr_onnx_t *m)
{
    return m->nlops - tsr_onnx_device_ops(m);
}

static const char *hk_name(int k)
{
    switch (k) {
    case H_QUANT: return "quantize";
    case H_DEQUANT: return "dequantize";
    case H_SOFTMAX: return "softmax";
    case H_ARGMAX: return "argmax";
    case H_RELU: return "relu";
    case H_CONVINT: return "int32 conv";
    case H_MATMULINT: return "int32 matmul";
    case H_QMATMUL: return "quantized batched matmul";
    case H_CONCAT: return "concat";
    default: return "?";
    }
}

void tsr_onnx_print_placement(const tsr_onnx_t *m, FILE *f)
{
    fprintf(f, "placement: %zu ONNX nodes -> %d device operators in %d segment%s, %d host operators\n", m->gp->n_node,
            tsr_onnx_device_ops(m), m->nsegs, m->nsegs == 1 ? "" : "s", tsr_onnx_host_ops(m));
    int nconst = 0;
    for (size_t k = 0; k < m->gp->n_node; k++)
        nconst += m->placed[k] == 1;
    if (nconst)
        fprintf(f, "  (%d constant node%s folded at import, not listed)\n", nconst, nconst == 1 ? "" : "s");
    if (m->nexact)
        fprintf(f, "requantization: the integers of %d operator%s from the model's tessera.requant metadata (checked "
                "against the scales)\n", m->nexact, m->nexact == 1 ? "" : "s");
    for (size_t k = 0; k < m->gp->n_node; k++) {
        const int i = m->order[k];
        const int l = m->node_lop[i];
        char where[96];
        if (m->placed[i] == 1)
            continue; /* constants: counted above */
        switch (m->placed[i]) {
        case 1: snprintf(where, sizeof where, "constant (folded at import)"); break;
        case 2: snprintf(where, sizeof where, "relabel (no data movement)"); break;
        case 5: snprintf(where, sizeof where, "folded into its consumers (quantized view)"); break;
        case 4: snprintf(where, sizeof where, "folded into device op \"%s\"", m->lops[l].nd.name); break;
        case 3:
            if (m->lops[l].side == SIDE_DEV)
                snprintf(where, sizeof where, "device, segment %d (%s)", m->lops[l].seg,
                         m->lops[l].nd.kind == TSR_ND_CONV ? (m->lops[l].nd.conv.kh * m->lops[l].nd.conv.kw > 1 &&
                                                              m->lops[l].nd.conv.h == m->lops[l].nd.conv.kh &&
                                                              m->lops[l].nd.conv.w == m->lops[l].nd.conv.kw
                                                              ? "conv over the whole input = dense" : "conv")
                                                           : m->lops[l].nd.kind == TSR_ND_ADD ? "add"
                                                           : m->lops[l].nd.kind == TSR_ND_DENSE ? "dense"
                                                           : m->lops[l].nd.pool.kind == TSR_POOL_MAX ? "maxpool"
                                                           : "avgpool");
            else
                snprintf(where, sizeof where, "host (%s)", hk_name(m->lops[l].hkind));
            break;
        default: snprintf(where, sizeof where, "?"); break;
        }
        char nm[29], op[19]; /* the column widths, cut with "..." */
        fprintf(f, "  %-28s %-18s %s\n", tsr_strsafe(nname(m, i), nm, sizeof nm),
                tsr_strsafe(m->gp->node[i]->op_type, op, sizeof op), where);
    }
}

int tsr_onnx_prepare(tsr_onnx_t *m, const tsr_config_t *cfg, tsr_device_t *dev, unsigned flags)
{
    m->flags = flags;
    for (int i = 0; i < m->nvals; i++) {
        ox_val_t *x = &m->vals[i];
        if (x->base != i || x->cdata || !x->defined)
            continue;
        free(x->rt);
        if (!(x->rt = calloc(1, x->nbytes ? x->nbytes : 1)))
            return tsr_err(TSR_ENOMEM, "out of memory");
    }
    m->dev = dev;
    for (int s = 0; s < m->nsegs; s++) {
        if (m->segs[s].solo)
            continue;
        int rc = tsr_graph_from_netdesc(cfg, &m->segs[s].nd, &m->segs[s].g);
        if (!rc)
            rc = tsr_graph_plan(m->segs[s].g, dev, /* every tensor readable: none fused away */
                                flags & TSR_ONNX_KEEP_ALL ? TSR_GRAPH_KEEP_ALL | TSR_GRAPH_NO_FUSE : 0);
        if (rc)
            return tsr_err_prefix(rc, "%s: device segment %d: ", m->path, s);
    }
    return 0;
}

static uint8_t *bytes(tsr_onnx_t *m, int v)
{
    const ox_val_t *x = &m->vals[m->vals[v].base];
    return x->cdata ? x->cdata : x->rt;
}

static int run_host(tsr_onnx_t *m, const ox_lop_t *L)
{
    const ox_val_t *X = &m->vals[L->in], *Y = &m->vals[L->out];
    const uint8_t *xb = bytes(m, L->in);
    uint8_t *yb = bytes(m, L->out);
    const int64_t n = numel(X);
    switch (L->hkind) {
    case H_QUANT: {
        const int lo = Y->elem == ET_UINT8 ? 0 : -128, hi = Y->elem == ET_UINT8 ? 255 : 127;
        for (int64_t i = 0; i < n; i++) {
            float f;
            memcpy(&f, xb + 4 * i, 4);
            float q = nearbyintf(f / L->scale) + (float)L->zp; /* ORT: round half to even, then saturate */
            if (q != q)
                return NERR(m, L->node, "input element %lld is NaN: it has no quantized value", (long long)i);
            q = q < (float)lo ? (float)lo : q > (float)hi ? (float)hi : q;
            yb[i] = (uint8_t)(int)q;
        }
        return 0;
    }
    case H_DEQUANT:
        for (int64_t i = 0; i < n; i++) {
            int32_t q = X->elem == ET_UINT8 ? xb[i] : X->elem == ET_INT8 ? (int8_t)xb[i] : 0;
            if (X->elem == ET_INT32)
                memcpy(&q, xb + 4 * i, 4);
            float f = (float)((int64_t)q - L->zp) * L->scale; /* int32 q - zp can overflow int32 */
            memcpy(yb + 4 * i, &f, 4);
        }
        return 0;
    case H_RELU:
        for (int64_t i = 0; i < n; i++) {
            float f;
            memcpy(&f, xb + 4 * i, 4);
            f = f > 0 ? f : 0;
            memcpy(yb + 4 * i, &f, 4);
        }
        return 0;
    case H_SOFTMAX:
    case H_ARGMAX: {
        int64_t outer = 1, len = X->dims[L->axis], inner = 1;
        for (int i = 0; i < L->axis; i++)
            outer *= X->dims[i];
        for (int i = L->axis + 1; i < X->ndim; i++)
            inner *= X->dims[i];
        const float *xf = (const float *)(const void *)xb;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t in = 0; in < inner; in++) {
                const int64_t b = o * len * inner + in;
                int64_t best = 0;
                for (int64_t k = 1; k < len; k++)
                    if (xf[b + k * inner] > xf[b + best * inner])
                        best = k;
                if (L->hkind == H_ARGMAX) {
                    memcpy(yb + 8 * (o * inner + in), &best, 8);
                    continue;
                }
                const float mx = xf[b + best * inner];
                double sum = 0;
                for (int64_t k = 0; k < len; k++)
                    sum += exp((double)xf[b + k * inner] - mx);
                for (int64_t k = 0; k < len; k++) {
                    float e = (float)(exp((double)xf[b + k * inner] - mx) / sum);
                    memcpy(yb + 4 * (b + k * inner), &e, 4);
                }
            }
        return 0;
    }
    case H_CONVINT: {
        const ox_val_t *W = &m->vals[L->in2];
        const uint8_t *wb = bytes(m, L->in2);
        const int64_t N = L->geo[8], C = L->geo[9], H = L->geo[10], Wd = L->geo[11], O = L->geo[12],
                      OH = L->geo[13], OW = L->geo[14], KH = L->geo[0], KW = L->geo[1];
        const int xs = X->elem == ET_INT8, ws = W->elem == ET_INT8;
        int32_t *yo = (int32_t *)(void *)yb;
        for (int64_t b = 0; b < N; b++)
            for (int64_t o = 0; o < O; o++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t acc = 0; /* padding is the zero point: it adds nothing */
                        for (int64_t c = 0; c < C; c++)
                            for (int64_t kh = 0; kh < KH; kh++)
                                for (int64_t kw = 0; kw < KW; kw++) {
                                    const int64_t ih = oh * L->geo[2] + kh - L->geo[4],
                                                  iw = ow * L->geo[3] + kw - L->geo[5];
                                    if (ih < 0 || ih >= H || iw < 0 || iw >= Wd)
                                        continue;
                                    const uint8_t xv = xb[((b * C + c) * H + ih) * Wd + iw],
                                                  wv = wb[((o * C + c) * KH + kh) * KW + kw];
                                    acc += ((xs ? (int8_t)xv : xv) - L->zpa[0]) *
                                           ((ws ? (int8_t)wv : wv) - L->zpb[L->nzpb > 1 ? o : 0]);
                                }
                        yo[((b * O + o) * OH + oh) * OW + ow] = (int32_t)(uint32_t)(uint64_t)acc; /* int32 wraps */
                    }
        return 0;
    }
    case H_MATMULINT:
    case H_QMATMUL: {
        const ox_val_t *B = &m->vals[L->in2];
        const uint8_t *bb = bytes(m, L->in2);
        const int64_t batch = L->geo[0], M = L->geo[1], K = L->geo[2], N = L->geo[3];
        const int as = X->elem == ET_INT8, bs = B->elem == ET_INT8;
        const int lo = Y->elem == ET_UINT8 ? 0 : -128, hi = Y->elem == ET_UINT8 ? 255 : 127;
        for (int64_t p = 0; p < batch; p++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    const uint8_t *ar = xb + (p * M + i) * K, *bc = bb + (L->geo[4] ? p * K * N : 0) + j;
                    int64_t acc64 = 0;
                    for (int64_t k = 0; k < K; k++)
                        acc64 += ((as ? (int8_t)ar[k] : ar[k]) - L->zpa[L->nzpa > 1 ? i : 0]) *
                                 ((bs ? (int8_t)bc[k * N] : bc[k * N]) - L->zpb[L->nzpb > 1 ? j : 0]);
                    const int32_t acc = (int32_t)(uint32_t)(uint64_t)acc64; /* int32 wraps */
                    const int64_t o = (p * M + i) * N + j;
                    if (L->hkind == H_MATMULINT) {
                        memcpy(yb + 4 * o, &acc, 4);
                        continue;
                    }
                    /* ONNX Runtime: float32 acc * (a_scale * b_scale / y_scale), round half to even,
                       + zero point, saturate */
                    float q = nearbyintf((float)acc * L->mult) + (float)L->yzp;
                    q = q < (float)lo ? (float)lo : q > (float)hi ? (float)hi : q;
                    yb[o] = (uint8_t)(int)q;
                }
        return 0;
    }
    case H_CONCAT: {
        const uint8_t *bb = bytes(m, L->in2);
        const int64_t outer = L->geo[0];
        const size_t ca = (size_t)L->geo[1], cb = (size_t)L->geo[2];
        for (int64_t o = 0; o < outer; o++) {
            memcpy(yb + (size_t)o * (ca + cb), xb + (size_t)o * ca, ca);
            memcpy(yb + (size_t)o * (ca + cb) + ca, bb + (size_t)o * cb, cb);
        }
        return 0;
    }
    default: return tsr_err(TSR_EINVAL, "bad host kernel");
    }
}

static int value_tensor(const tsr_onnx_t *m, int v, tsr_tensor_t *out)
{
    const ox_val_t *Y = &m->vals[v];
    const tsr_dtype_e dt = Y->elem == ET_FLOAT ? TSR_DT_FLOAT32 : Y->elem == ET_UINT8 ? TSR_DT_UINT8
                         : Y->elem == ET_INT8 ? TSR_DT_INT8 : TSR_DT_INT32;
    int rc = tsr_tensor_alloc(out, dt, Y->ndim, Y->dims);
    if (rc)
        return rc;
    const ox_val_t *B = &m->vals[Y->base];
    const uint8_t *yb = B->cdata ? B->cdata : B->rt;
    if (Y->elem == ET_INT64)
        for (int64_t i = 0; i < numel(Y); i++) {
            int64_t x;
            memcpy(&x, yb + 8 * i, 8);
            ((int32_t *)out->data)[i] = (int32_t)x;
        }
    else
        memcpy(out->data, yb, Y->nbytes);
    return 0;
}

/* Whether value name can be read after a run prepared with flags: its
 * index in *vp, else the error tsr_onnx_read_value would give. */
static int value_check(const tsr_onnx_t *m, const char *name, unsigned flags, int *vp)
{
    int v = name && name[0] ? find_val(m, name) : -1;
    if (v < 0)
        return tsr_err(TSR_EINVAL, "%s: no value called \"%s\"", m->path, TSR_SAFE(name));
    const ox_val_t *Y = &m->vals[v];
    if (Y->view_of >= 0 && !Y->cdata && Y->real_lop < 0)
        return tsr_err(TSR_EINVAL, "%s: \"%s\" is a DequantizeLinear folded into the device operators (never "
                       "computed in float): ask for \"%s\"", m->path, TSR_SAFE(name),
                       TSR_SAFE(m->vals[Y->view_of].name));
    const int b = Y->base;
    for (int s = 0; s < m->nsegs; s++)
        for (int i = m->segs[s].first; i <= m->segs[s].last; i++)
            if (m->lops[i].out == b && b != m->segs[s].out_val &&
                (!(flags & TSR_ONNX_KEEP_ALL) || m->segs[s].solo))
                return tsr_err(TSR_EINVAL, "%s: \"%s\" stays inside device segment %d (only its output comes "
                               "back; keep all tensors to read it)", m->path, TSR_SAFE(name), s);
    *vp = v;
    return 0;
}

int tsr_onnx_check_value(const tsr_onnx_t *m, const char *name, unsigned flags)
{
    int v;
    return value_check(m, name, flags, &v);
}

int tsr_onnx_read_value(const tsr_onnx_t *m, const char *name, tsr_tensor_t *out)
{
    memset(out, 0, sizeof *out);
    int v, rc = value_check(m, name, m->flags, &v);
    if (rc)
        return rc;
    const int b = m->vals[v].base;
    for (int s = 0; s < m->nsegs; s++)
        for (int i = m->segs[s].first; i <= m->segs[s].last; i++)
            if (m->lops[i].out == b && b != m->segs[s].out_val) {
                if (!m->segs[s].g)
                    return tsr_err(TSR_EINVAL, "%s: \"%s\": prepare the model first", m->path, TSR_SAFE(name));
                if ((rc = tsr_graph_read_tensor(m->segs[s].g, m->segs[s].nd.nodes[i - m->segs[s].first].out,
                                                m->vals[b].rt)))
                    return rc;
            }
    if (!m->vals[b].cdata && !m->vals[b].rt)
        return tsr_err(TSR_EINVAL, "%s: run the model first", m->path);
    return value_tensor(m, v, out);
}

int tsr_onnx_run(tsr_onnx_t *m, const tsr_tensor_t *in, tsr_tensor_t *out)
{
    memset(out, 0, sizeof *out);
    const ox_val_t *X = &m->vals[m->in_val];
    const int want = X->elem == ET_FLOAT ? TSR_DT_FLOAT32 : X->elem == ET_UINT8 ? TSR_DT_UINT8
                   : X->elem == ET_INT8 ? TSR_DT_INT8 : X->elem == ET_INT32 ? TSR_DT_INT32 : -1;
    int same = (int)in->dtype == want && in->ndim == X->ndim;
    for (int i = 0; same && i < X->ndim; i++)
        same = in->shape[i] == X->dims[i];
    if (!same) {
        char s[128] = "";
        for (int i = 0; i < X->ndim; i++)
            snprintf(s + strlen(s), sizeof s - strlen(s), "%s%lld", i ? "," : "", (long long)X->dims[i]);
        return tsr_err(TSR_EINVAL, "%s: input \"%s\" must be %s [%s]", m->path, TSR_SAFE(X->name), ename(X->elem), s);
    }
    memcpy(bytes(m, m->in_val), in->data, X->nbytes);
    int rc = 0;
    for (int i = 0; i < m->nlops && !rc;) {
        const ox_lop_t *L = &m->lops[i];
        if (L->side == SIDE_HOST) {
            rc = run_host(m, L);
            i++;
            continue;
        }
        const ox_seg_t *s = &m->segs[L->seg];
        const void *ins[1] = {bytes(m, s->in_val)};
        void *outs[1] = {bytes(m, s->out_val)};
        if (s->solo)
            rc = tsr_conv2d_run(m->dev, &L->nd.conv, ins[0], L->nd.w, L->nd.bias, outs[0]);
        else
            rc = tsr_graph_exec(s->g, ins, outs);
        if (rc)
            rc = tsr_err_prefix(rc, "%s: device segment %d: ", m->path, L->seg);
        i = s->last + 1;
    }
    if (rc)
        return rc;
    return value_tensor(m, m->out_val, out);
}

void tsr_onnx_print_report(const tsr_onnx_t *m, FILE *f)
{
    for (int s = 0; s < m->nsegs; s++) {
        if (m->segs[s].solo) {
            fprintf(f, "device segment %d: conv \"%s\" run alone (w - w_zp in %d int8 parts, the input packed "
                    "once per part; no per-layer counters)\n", s, m->segs[s].nd.nodes[0].name,
                    tsr_conv2d_input_copies(&m->segs[s].nd.nodes[0].conv));
            continue;
        }
        fprintf(f, "device segment %d (%d operators):\n", s, m->segs[s].nd.nnodes);
        if (m->segs[s].g)
            tsr_graph_print_report(m->segs[s].g, f);
    }
}

int tsr_onnx_read_tensor_pb(const char *path, tsr_tensor_t *out)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf = NULL;
    size_t n = 0;
    int rc = read_file(path, "TensorProto file", &buf, &n);
    if (rc)
        return rc;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, n, buf);
    free(buf);
    if (!t)
        return tsr_err(TSR_EPARSE, "%s: not a valid TensorProto", path);
    ox_val_t v;
    memset(&v, 0, sizeof v);
    rc = load_tensor(path, t->name ? t->name : "", t, &v);
    onnx__tensor_proto__free_unpacked(t, NULL);
    if (rc)
        return rc;
    tsr_dtype_e dt = v.elem == ET_FLOAT ? TSR_DT_FLOAT32 : v.elem == ET_UINT8 ? TSR_DT_UINT8
                   : v.elem == ET_INT8 ? TSR_DT_INT8 : TSR_DT_INT32;
    if (!(rc = tsr_tensor_alloc(out, dt, v.ndim, v.dims))) {
        if (v.elem == ET_INT64)
            for (int64_t i = 0; i < numel(&v); i++)
                ((int32_t *)out->data)[i] = cget_i(&v, i);
        else
            memcpy(out->data, v.cdata, v.nbytes);
    }
    free(v.cdata);
    return rc;
}
