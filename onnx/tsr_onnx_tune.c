/*
 * tsr_onnx_tune: a loaded model's lowered operators as layers for training,
 * the requantization of new weight scales, and the file with new constants
 * (see tsr_onnx_tune.h).
 */
#include "tsr_onnx_tune.h"

#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_onnx_wire.h"
#include "tsr_strsafe.h"

/* The TensorProto holding constant `name`: an initializer, or the value of
 * the Constant node that outputs it; NULL if neither. */
static Onnx__TensorProto *find_const(Onnx__GraphProto *g, const char *name)
{
    if (!name || !name[0])
        return NULL;
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && !strcmp(g->initializer[i]->name, name))
            return g->initializer[i];
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (strcmp(n->op_type, "Constant") || n->n_output != 1 || strcmp(n->output[0], name))
            continue;
        for (size_t k = 0; k < n->n_attribute; k++)
            if (n->attribute[k]->name && !strcmp(n->attribute[k]->name, "value") && n->attribute[k]->t)
                return n->attribute[k]->t;
        return NULL;
    }
    return NULL;
}

/* How many node inputs (and graph outputs) read value `name`. */
static int readers(const Onnx__GraphProto *g, const char *name)
{
    int c = 0;
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_input; k++)
            c += !strcmp(g->node[i]->input[k], name);
    for (size_t i = 0; i < g->n_output; i++)
        c += g->output[i]->name && !strcmp(g->output[i]->name, name);
    return c;
}

/* The node that outputs `name`, -1. */
static int producer(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_output; k++)
            if (!strcmp(g->node[i]->output[k], name))
                return (int)i;
    return -1;
}

/* The DequantizeLinear node that made view v and the constant it reads:
 * *qname (its input 0, a plain constant read by it only) and *sname (its
 * scale, likewise). NULL on success, else why not. */
static const char *dq_consts(const tsr_onnx_t *m, int v, const char **qname, const char **sname)
{
    const Onnx__GraphProto *g = m->gp;
    const int d = producer(g, m->vals[v].name);
    if (d < 0 || strcmp(g->node[d]->op_type, "DequantizeLinear") || g->node[d]->n_input < 2)
        return "not the output of a DequantizeLinear";
    const Onnx__NodeProto *n = g->node[d];
    *qname = n->input[0];
    *sname = n->input[1];
    if (!find_const(m->gp, *qname) || !find_const(m->gp, *sname))
        return "its DequantizeLinear does not read a constant and a constant scale directly (e.g. through a Cast)";
    if (readers(g, *qname) != 1 || readers(g, *sname) != 1)
        return "its quantized constant or its scale is shared with other nodes";
    return NULL;
}

/* The scale and zero point constants of the QuantizeLinear or DequantizeLinear node qi: set only when
 * both are plain constants (float32 scalar scale, 8-bit scalar zero point) read by nothing but the
 * QuantizeLinear / DequantizeLinear nodes of the tensor qi quantizes or dequantizes (ONNX Runtime's
 * quantizer shares one pair between a tensor's Q and DQ; torch's export gives each its own). */
static void q_consts(const tsr_onnx_t *m, int qi, const char **sname, const char **zname)
{
    const Onnx__GraphProto *g = m->gp;
    *sname = *zname = NULL;
    if (qi < 0 || g->node[qi]->n_input < 3)
        return;
    const Onnx__NodeProto *q = g->node[qi];
    const int isq = !strcmp(q->op_type, "QuantizeLinear");
    if (!isq && strcmp(q->op_type, "DequantizeLinear"))
        return;
    /* the quantized tensor: the Q's output, or the DQ's input */
    const char *qt = isq ? q->output[0] : q->input[0];
    const Onnx__TensorProto *s = find_const((Onnx__GraphProto *)g, q->input[1]);
    const Onnx__TensorProto *z = find_const((Onnx__GraphProto *)g, q->input[2]);
    if (!s || !z || s->n_dims || z->n_dims || (s->has_data_type && s->data_type != ET_FLOAT) ||
        (z->data_type != ET_UINT8 && z->data_type != ET_INT8))
        return;
    for (int k = 1; k <= 2; k++) {
        const char *c = q->input[k];
        for (size_t i = 0; i < g->n_node; i++) {
            const Onnx__NodeProto *n = g->node[i];
            for (size_t a = 0; a < n->n_input; a++) {
                if (strcmp(n->input[a], c))
                    continue;
                const int ok = (!strcmp(n->op_type, "QuantizeLinear") && n->n_output && !strcmp(n->output[0], qt)) ||
                               (!strcmp(n->op_type, "DequantizeLinear") && !strcmp(n->input[0], qt));
                if (!ok || a == 0)
                    return;
            }
        }
        for (size_t i = 0; i < g->n_output; i++)
            if (g->output[i]->name && !strcmp(g->output[i]->name, c))
                return;
    }
    *sname = q->input[1];
    *zname = q->input[2];
}

/* The quantization of a QDQ Conv/Gemm/MatMul node ni (lowered into L) for
 * training: scales, constants' names, or why_not. */
static void qdq_layer(tsr_onnx_t *m, int ni, tsr_onnx_lowered_t *L)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int xv = tsr_ox_in_val(m, ni, 0), wv = tsr_ox_in_val(m, ni, 1), bv = tsr_ox_in_val(m, ni, 2);
    if (strcmp(n->op_type, "Conv") && strcmp(n->op_type, "Gemm") && strcmp(n->op_type, "MatMul")) {
        L->why_not = "an operator-form node (training rewrites the weights of QDQ Conv, Gemm and MatMul)";
        return;
    }
    if (xv < 0 || wv < 0 || m->vals[xv].view_of < 0 || m->vals[wv].view_of < 0 || m->vals[xv].vcount != 1) {
        L->why_not = "its input and weights are not per-tensor DequantizeLinear outputs";
        return;
    }
    const ox_val_t *X = &m->vals[xv], *W = &m->vals[wv], *WQ = &m->vals[W->view_of];
    L->x_scale = X->vscale[0];
    L->w_scale = W->vscale;
    L->w_count = W->vcount;
    ox_qout_t o;
    if (tsr_ox_qdq_output(m, ni, &o) < 0) {
        L->why_not = "its output is not one QuantizeLinear";
        return;
    }
    L->y_scale = o.scale;
    L->relu = o.relu || o.has_clip;
    L->clip = o.has_clip && isfinite(o.clip_hi);
    /* A ReLU6 that ONNX Runtime's quantizer removed: its range is the Clip output's calibrated one, and
       when the calibration reached the Clip's 6 it is exactly [0, 6] (uint8, zero point 0, scale the
       float32 of 6 / 255), a range no unclamped tensor calibrates to. The 255 is then the ReLU6's 6,
       whose derivative is 0, not a saturation's 1 (make_resblock.py's model: the gradient passed there
       and the deep parts learnt 7-19 points more than the float model with its ReLU6 does; float with
       the gradient passing at 6 matched the device within 1 point). A range below 6 (the calibration
       never reached the clamp) needs nothing: there the float model passes the gradient too. */
    if (!o.has_clip && o.elem == ET_UINT8 && o.zp == 0 && o.scale == (float)(6.0 / 255.0))
        L->relu = L->clip = 1;
    if (!strcmp(n->op_type, "MatMul") || (!strcmp(n->op_type, "Gemm") && !attr_i(n, "transB", 0)))
        L->w_transposed = 1;
    if (WQ->elem != ET_INT8 || !WQ->cdata) {
        L->why_not = "its weights are not an int8 constant (training keeps symmetric int8 weights)";
        return;
    }
    for (int i = 0; i < W->vcount; i++)
        if (W->vzp[i] != 0) {
            L->why_not = "its weight zero point is not 0 (training keeps symmetric int8 weights)";
            return;
        }
    const char *why = dq_consts(m, wv, &L->w_name, &L->ws_name);
    if (why) {
        L->why_not = why;
        return;
    }
    if (bv >= 0) {
        const ox_val_t *B = &m->vals[bv];
        if (B->view_of < 0 || m->vals[B->view_of].elem != ET_INT32 || B->vcount != W->vcount) {
            L->why_not = "its bias is not a DequantizeLinear of an int32 constant with one scale per weight scale";
            return;
        }
        if ((why = dq_consts(m, bv, &L->b_name, &L->bs_name))) {
            L->why_not = why;
            return;
        }
    }
    int64_t mv[2];
    if (tsr_ox_meta_ints(m, ni, 2 * L->w_count, mv) != 0) /* (2 slots suffice to see that it is there) */
        L->why_not = "it carries exact requantization integers (metadata tessera.requant), which new weights "
                     "would contradict";
}

int tsr_onnx_lowered_ops(tsr_onnx_t *m, tsr_onnx_lowered_t **out, int *n)
{
    *out = NULL;
    *n = 0;
    tsr_onnx_lowered_t *ls = calloc((size_t)(m->nlops ? m->nlops : 1), sizeof *ls);
    if (!ls)
        return tsr_err(TSR_ENOMEM, "out of memory");
    const int yb = m->vals[m->out_val].base;
    for (int i = 0; i < m->nlops; i++) {
        const ox_lop_t *P = &m->lops[i];
        tsr_onnx_lowered_t *L = &ls[i];
        L->node_index = P->node;
        L->node = nname(m, P->node);
        L->op = m->gp->node[P->node]->op_type;
        L->device = P->side == SIDE_DEV;
        L->in = P->in >= 0 ? m->vals[P->in].base : -1;
        L->out = P->out >= 0 ? m->vals[P->out].base : -1;
        L->in_name = L->in >= 0 ? m->vals[L->in].name : "";
        L->in2 = P->in2 >= 0 ? m->vals[P->in2].base : -1;
        L->in2_name = L->in2 >= 0 ? m->vals[L->in2].name : "";
        L->out_name = L->out >= 0 ? m->vals[L->out].name : "";
        L->is_output = L->out == yb;
        L->kind = TSR_OXL_OTHER;
        if (!L->device) {
            if (P->hkind == H_QUANT || P->hkind == H_DEQUANT) {
                L->kind = P->hkind == H_QUANT ? TSR_OXL_QUANT : TSR_OXL_DEQUANT;
                L->q_scale = P->scale;
                L->q_zp = P->zp;
                q_consts(m, P->node, &L->qs_name, &L->qzp_name);
            } else if (P->hkind == H_SOFTMAX)
                L->kind = TSR_OXL_SOFTMAX;
            else if (P->hkind == H_CONCAT && P->in2 == P->in && P->geo[0] == 1 && P->geo[2] == 0)
                L->kind = TSR_OXL_COPY; /* a concat of one input (tsr_ox_math.c own_2d_bytes) */
            continue;
        }
        if (P->nd.kind == TSR_ND_POOL && P->nd.pool.kind == TSR_POOL_MAX) {
            L->kind = TSR_OXL_MAXPOOL;
            L->pool = P->nd.pool;
            continue;
        }
        if (P->nd.kind == TSR_ND_POOL &&
            (P->nd.pool.kind == TSR_POOL_AVG || P->nd.pool.kind == TSR_POOL_GLOBAL_AVG)) {
            L->kind = TSR_OXL_AVGPOOL;
            L->pool = P->nd.pool;
            continue;
        }
        if (P->nd.kind == TSR_ND_ADD && P->in2 >= 0) {
            L->kind = TSR_OXL_ADD;
            L->add = P->nd.add;
            continue;
        }
        if (P->nd.kind != TSR_ND_CONV && P->nd.kind != TSR_ND_DENSE)
            continue;
        if (!strcmp(L->op, "Add")) /* a dense's bias as a depthwise conv (ops/tsr_ox_bias.c): no weights to train */
            continue;
        /* an average (or its requantization) as a weight-1 depthwise conv (ops/tsr_ox_pool.c): the
           window sum of x - x_zp and a multiplier x_scale / (count * y_scale); its backward is the
           average's, not a trained conv's */
        if (P->nd.kind == TSR_ND_CONV && (!strcmp(L->op, "AveragePool") || !strcmp(L->op, "GlobalAveragePool") ||
                                          !strcmp(L->op, "ReduceMean") || !strcmp(L->op, "QLinearAveragePool") ||
                                          !strcmp(L->op, "QLinearGlobalAveragePool"))) {
            const tsr_conv2d_params_t *c = &P->nd.conv;
            L->kind = TSR_OXL_AVGPOOL;
            L->avg_conv = 1;
            L->conv = *c;
            L->w = P->nd.w;
            L->bias = P->nd.bias;
            L->pool = (tsr_pool_params_t){.kind = TSR_POOL_AVG, .n = c->n, .c = c->c_in, .h = c->h, .w = c->w,
                                          .kh = c->kh, .kw = c->kw, .stride_h = c->stride_h,
                                          .stride_w = c->stride_w, .pad_top = c->pad_top, .pad_left = c->pad_left,
                                          .pad_bottom = c->pad_bottom, .pad_right = c->pad_right,
                                          .count_include_pad = 1, .dtype = c->x_dtype, .zp = c->x_zp};
            continue;
        }
        L->w = P->nd.w;
        L->bias = P->nd.bias;
        if (P->nd.kind == TSR_ND_DENSE) {
            L->kind = TSR_OXL_DENSE;
            L->dense = P->nd.dense;
        } else {
            const tsr_conv2d_params_t *c = &P->nd.conv;
            L->conv = *c;
            L->kind = TSR_OXL_CONV;
            /* a gemm over a flattened tensor: the conv whose kernel covers it, i.e. a dense over C*H*W */
            if (strcmp(L->op, "Conv") && c->kh == c->h && c->kw == c->w && c->stride_h == 1 && c->stride_w == 1 &&
                !c->pad_top && !c->pad_left && !c->pad_bottom && !c->pad_right && c->groups == 1) {
                L->kind = TSR_OXL_DENSE;
                L->dense = (tsr_dense_params_t){.n = c->n, .k = c->c_in * c->h * c->w, .m = c->c_out,
                                                .x_dtype = c->x_dtype, .x_zp = c->x_zp, .w_dtype = c->w_dtype,
                                                .w_zp = c->w_zp, .w_zp_count = c->w_zp_count};
                L->dense.rq = c->rq;
            }
        }
        qdq_layer(m, P->node, L);
        if (L->out >= 0) /* the QuantizeLinear the layer's output came from (folded into it) */
            q_consts(m, producer(m->gp, m->vals[L->out].name), &L->qs_name, &L->qzp_name);
        if (!L->why_not && (L->kind == TSR_OXL_CONV ? L->conv.w_dtype : L->dense.w_dtype) != TSR_DT_INT8)
            L->why_not = "its device weights are not int8";
    }
    *out = ls;
    *n = m->nlops;
    return 0;
}

int tsr_onnx_input_info(const tsr_onnx_t *m, tsr_dtype_e *dtype, int *ndim, int64_t dims[8], const char **name)
{
    const ox_val_t *X = &m->vals[m->in_val];
    switch (X->elem) {
    case ET_FLOAT: *dtype = TSR_DT_FLOAT32; break;
    case ET_INT8: *dtype = TSR_DT_INT8; break;
    case ET_UINT8: *dtype = TSR_DT_UINT8; break;
    case ET_INT32: *dtype = TSR_DT_INT32; break;
    case ET_INT64: *dtype = TSR_DT_INT64; break;
    default: return tsr_err(TSR_EINVAL, "%s: the graph input has element type %s", m->path, ename(X->elem));
    }
    *ndim = X->ndim;
    memcpy(dims, X->dims, sizeof(int64_t) * (size_t)X->ndim);
    *name = X->name;
    return 0;
}

int tsr_onnx_lowered_requant(tsr_onnx_t *m, const tsr_onnx_lowered_t *L, const float *w_scale, int32_t *mult,
                           int32_t *shift, float *fscale, int *has_fscale)
{
    int32_t *mu = NULL, *sh = NULL;
    float *fs = NULL;
    int rc = tsr_ox_rq_params(m, L->node_index, L->x_scale, w_scale, L->w_count, L->y_scale, &mu, &sh, &fs);
    if (!rc) {
        memcpy(mult, mu, sizeof(int32_t) * (size_t)L->w_count);
        memcpy(shift, sh, sizeof(int32_t) * (size_t)L->w_count);
        *has_fscale = fs != NULL;
        if (fs)
            memcpy(fscale, fs, sizeof(float) * (size_t)L->w_count);
    }
    free(mu), free(sh), free(fs);
    return rc;
}

/* Replace t's payload by data[nbytes] (raw, little-endian as the importer reads it). */
static int set_payload(Onnx__TensorProto *t, const char *name, const void *data, size_t nbytes)
{
    const int e = t->has_data_type ? t->data_type : 0;
    int64_t cnt = 1;
    for (size_t i = 0; i < t->n_dims; i++)
        cnt *= t->dims[i];
    if ((e != ET_INT8 && e != ET_UINT8 && e != ET_INT32 && e != ET_FLOAT) || (size_t)cnt * esize(e) != nbytes)
        return tsr_err(TSR_EINVAL, "constant \"%s\" is %s [%lld elements]: %zu bytes do not replace it",
                       TSR_SAFE(name), ename(e), (long long)cnt, nbytes);
    uint8_t *b = malloc(nbytes ? nbytes : 1);
    if (!b)
        return tsr_err(TSR_ENOMEM, "out of memory");
    memcpy(b, data, nbytes);
    /* the typed arrays emptied (protobuf-c frees what the struct points to with free(): the default
       allocator the model was unpacked with) */
    free(t->raw_data.data);
    free(t->int32_data), t->int32_data = NULL, t->n_int32_data = 0;
    free(t->float_data), t->float_data = NULL, t->n_float_data = 0;
    t->raw_data.data = b;
    t->raw_data.len = nbytes;
    t->has_raw_data = 1;
    return 0;
}

int tsr_onnx_pack_updated(const char *src, const tsr_onnx_const_update_t *u, int n, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    uint8_t *in = NULL;
    size_t inlen = 0;
    int rc = tsr_ox_read_file(src, "ONNX model", &in, &inlen);
    if (rc)
        return rc;
    Onnx__ModelProto *mp = NULL;
    if (!(rc = tsr_onnx_wire_check(in, inlen, src)) && !(mp = onnx__model_proto__unpack(NULL, inlen, in)))
        rc = tsr_err(TSR_EPARSE, "%s: not a valid ONNX protobuf (truncated or corrupt)", src);
    free(in);
    if (!rc && !mp->graph)
        rc = tsr_err(TSR_EINVAL, "%s: no graph", src);
    for (int i = 0; i < n && !rc; i++) {
        Onnx__TensorProto *t = find_const(mp->graph, u[i].name);
        if (!t)
            rc = tsr_err(TSR_EINVAL, "%s: no constant \"%s\" (an initializer or a Constant node's output)", src,
                         TSR_SAFE(u[i].name));
        else
            rc = set_payload(t, u[i].name, u[i].data, u[i].nbytes);
    }
    if (!rc) {
        *len = onnx__model_proto__get_packed_size(mp);
        if (!(*buf = malloc(*len ? *len : 1)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        else
            onnx__model_proto__pack(mp, *buf);
    }
    if (mp)
        onnx__model_proto__free_unpacked(mp, NULL);
    if (rc)
        *len = 0;
    return rc;
}
