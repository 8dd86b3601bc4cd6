/*
 * tsr_onnx_load: the model file to an unpacked protobuf and a value table:
 * the bounded read (tsr_file), the nesting pre-scan (tsr_onnx_wire.h)
 * before protobuf-c's recursive unpack, the opset and size limits, and
 * every tensor payload checked against its dims before it is read.
 * Lowering (tsr_onnx_lower.c) starts from what this leaves.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_file.h"
#include "tsr_onnx_ir.h"
#include "tsr_onnx_wire.h"
#include "tsr_strsafe.h"

/* Fill v's type and bytes from a TensorProto, with every size checked
 * against the dims before any payload is read. */
int tsr_ox_load_tensor(const char *ctx, const char *raw_name, const Onnx__TensorProto *t, ox_val_t *v)
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
int tsr_ox_read_file(const char *path, const char *what, uint8_t **buf, size_t *len)
{
    return tsr_file_read(path, TSR_ONNX_MAX_FILE, what, buf, len);
}

/* The limits every later pass relies on: counts, and the names and
 * outputs it reads present. */
static int check_limits(const tsr_onnx_t *m)
{
    const Onnx__GraphProto *g = m->gp;
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
    return 0;
}

/* Every initializer as a constant value (named, once). */
static int read_initializers(tsr_onnx_t *m)
{
    const Onnx__GraphProto *g = m->gp;
    int rc;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !t->name[0])
            return tsr_err(TSR_EINVAL, "%s: initializer %zu has no name", m->path, i);
        if (tsr_ox_find_val(m, t->name) >= 0)
            return tsr_err(TSR_EINVAL, "%s: initializer \"%s\" is defined twice", m->path, TSR_SAFE(t->name));
        int v = tsr_ox_new_val(m, t->name);
        if (v < 0)
            return v;
        if ((rc = tsr_ox_load_tensor(m->path, t->name, t, &m->vals[v])))
            return rc;
    }
    return 0;
}

/* The graph input vi: a tensor of a supported type with a concrete shape
 * (batch for a symbolic first dimension). Returns its value. */
static int read_input(tsr_onnx_t *m, const Onnx__ValueInfoProto *vi, int batch)
{
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    int v = tsr_ox_new_val(m, vi->name);
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
    return v;
}

/* The model's opsets, the limits, the initializers and the one graph
 * input. */
static int read_graph(tsr_onnx_t *m, int batch)
{
    Onnx__ModelProto *mp = m->mp;
    m->ms_opset = 1;
    if (!mp->graph)
        return tsr_err(TSR_EINVAL, "%s: no graph", m->path);
    m->gp = mp->graph;
    const Onnx__GraphProto *g = m->gp;
    int64_t opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        const char *d = o->domain ? o->domain : "";
        if (!d[0] || !strcmp(d, "ai.onnx"))
            opset = o->has_version ? o->version : -1;
        else if (!strcmp(d, "com.microsoft"))
            m->ms_opset = o->has_version ? o->version : 1;
    }
    m->opset = opset;
    if (opset < 10 || opset > 21)
        return tsr_err(TSR_EINVAL, "%s: ai.onnx opset %lld is not supported (10..21)", m->path, (long long)opset);
    int rc;
    if ((rc = check_limits(m)) || (rc = read_initializers(m)))
        return rc;
    m->in_val = -1;
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi->name || tsr_ox_find_val(m, vi->name) >= 0)
            continue; /* an initializer listed as an input (older exporters) */
        if (m->in_val >= 0)
            return tsr_err(TSR_EINVAL, "%s: more than one graph input (\"%s\"): one is supported", m->path,
                           TSR_SAFE(vi->name));
        if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type ||
            !vi->type->tensor_type->shape)
            return tsr_err(TSR_EINVAL, "%s: graph input \"%s\" is not a tensor with a shape", m->path,
                           TSR_SAFE(vi->name));
        const int v = read_input(m, vi, batch);
        if (v < 0)
            return v;
        m->in_val = v;
    }
    if (m->in_val < 0)
        return tsr_err(TSR_EINVAL, "%s: the graph has no input", m->path);
    if (g->n_output < 1)
        return tsr_err(TSR_EINVAL, "%s: the graph has no output", m->path);
    return 0;
}

/* The model file image buf[n] unpacked into m->mp and its graph read
 * (name: the file for messages, m->path its first 255 bytes). */
int tsr_ox_parse(tsr_onnx_t *m, const void *buf, size_t n, const char *name, int batch)
{
    /* nesting bounded before protobuf-c's recursive unpack (tsr_onnx_wire.h) */
    int rc = tsr_onnx_wire_check(buf, n, name);
    if (!rc && !(m->mp = onnx__model_proto__unpack(NULL, n, buf)))
        rc = tsr_err(TSR_EPARSE, "%s: not a valid ONNX protobuf (truncated or corrupt)", name);
    return rc ? rc : read_graph(m, batch);
}

int tsr_onnx_read_tensor_pb(const char *path, tsr_tensor_t *out)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf = NULL;
    size_t n = 0;
    int rc = tsr_ox_read_file(path, "TensorProto file", &buf, &n);
    if (rc)
        return rc;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, n, buf);
    free(buf);
    if (!t)
        return tsr_err(TSR_EPARSE, "%s: not a valid TensorProto", path);
    ox_val_t v;
    memset(&v, 0, sizeof v);
    rc = tsr_ox_load_tensor(path, t->name ? t->name : "", t, &v);
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
