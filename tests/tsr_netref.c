/*
 * tsr_netref: the plain-C reference of a whole network (tsr_netref.h).
 * Every node is computed by tests/tsr_opref.c, written from
 * jit/operators.md independently of the JIT; from the desc only the data
 * is used (shapes, parameters, weights), converted field by field into
 * opref structs. Nothing here calls a jit/ lowering.
 */
#include "tsr_netref.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_opref.h"

static opref_dtype_t odt(tsr_dtype_e dt)
{
    return dt == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8;
}

/* The opref view of tensor t over its buffer. */
static opref_tensor_t view(const tsr_netdesc_t *nd, int t, void *data)
{
    const tsr_nd_tensor_t *x = &nd->tensors[t];
    return (opref_tensor_t){.dtype = odt(x->dtype), .n = x->n, .c = x->c, .h = x->h, .w = x->w, .data = data,
                            .zp = x->zp};
}

static int run_node(const tsr_netdesc_t *nd, const tsr_nd_node_t *nn, void **outs)
{
    opref_tensor_t x = view(nd, nn->in[0], outs[nn->in[0]]), y = view(nd, nn->out, outs[nn->out]);
    switch (nn->kind) {
    case TSR_ND_CONV: {
        const tsr_conv2d_params_t *p = &nn->conv;
        opref_weights_t w = {.dtype = odt(p->w_dtype), .o = p->c_out, .i = p->c_in / p->groups, .kh = p->kh,
                             .kw = p->kw, .data = nn->w, .zp = p->w_zp, .zp_count = p->w_zp_count};
        opref_conv_params_t cp = {.stride_h = p->stride_h, .stride_w = p->stride_w, .pad_top = p->pad_top,
                                  .pad_left = p->pad_left, .pad_bottom = p->pad_bottom, .pad_right = p->pad_right,
                                  .groups = p->groups};
        opref_requant_t rq = {.count = p->rq_count, .mult = p->mult, .shift = p->shift, .act_min = p->act_min,
                              .act_max = p->act_max};
        if (x.dtype != odt(p->x_dtype) || x.zp != p->x_zp || y.dtype != odt(p->y_dtype) || y.zp != p->y_zp)
            return tsr_err(TSR_EINVAL, "conv2d: tensor quantization differs from the node's parameters");
        return opref_conv2d(&x, &w, nn->bias, &cp, &rq, &y);
    }
    case TSR_ND_DENSE: {
        const tsr_dense_params_t *p = &nn->dense;
        opref_weights_t w = {.dtype = odt(p->w_dtype), .o = p->m, .i = p->k, .kh = 1, .kw = 1, .data = nn->w,
                             .zp = p->w_zp, .zp_count = p->w_zp_count};
        opref_requant_t rq = {.count = p->rq_count, .mult = p->mult, .shift = p->shift, .act_min = p->act_min,
                              .act_max = p->act_max};
        if (x.dtype != odt(p->x_dtype) || x.zp != p->x_zp || y.dtype != odt(p->y_dtype) || y.zp != p->y_zp)
            return tsr_err(TSR_EINVAL, "dense: tensor quantization differs from the node's parameters");
        return opref_dense(&x, &w, nn->bias, &rq, &y);
    }
    case TSR_ND_POOL: {
        const tsr_pool_params_t *p = &nn->pool;
        opref_pool_params_t pp = {.kh = p->kh, .kw = p->kw, .stride_h = p->stride_h, .stride_w = p->stride_w,
                                  .pad_top = p->pad_top, .pad_left = p->pad_left, .pad_bottom = p->pad_bottom,
                                  .pad_right = p->pad_right, .count_include_pad = p->count_include_pad};
        if (x.dtype != odt(p->dtype) || x.zp != p->zp)
            return tsr_err(TSR_EINVAL, "pool: tensor quantization differs from the node's parameters");
        if (p->kind == TSR_POOL_MAX)
            return opref_maxpool(&x, &pp, &y);
        if (p->kind == TSR_POOL_AVG)
            return opref_avgpool(&x, &pp, &y);
        if (p->kind == TSR_POOL_GLOBAL_AVG)
            return opref_global_avgpool(&x, &y);
        return tsr_err(TSR_EINVAL, "pool: unknown kind %d", (int)p->kind);
    }
    case TSR_ND_ADD: {
        const tsr_add_params_t *p = &nn->add;
        opref_tensor_t b = view(nd, nn->in[1], outs[nn->in[1]]);
        opref_add_params_t ap = {.left_shift = p->left_shift, .mult_a = p->mult_a, .mult_b = p->mult_b,
                                 .shift_a = p->shift_a, .shift_b = p->shift_b, .mult_out = p->mult_out,
                                 .shift_out = p->shift_out, .act_min = p->act_min, .act_max = p->act_max,
                                 .round_once = p->round_once};
        if (x.zp != p->a.zp || b.zp != p->b.zp || y.zp != p->y.zp || x.dtype != odt(p->a.dtype) ||
            b.dtype != odt(p->b.dtype) || y.dtype != odt(p->y.dtype))
            return tsr_err(TSR_EINVAL, "add: tensor quantization differs from the node's parameters");
        return opref_add(&x, &b, &ap, &y);
    }
    case TSR_ND_CLIP:
        if (x.zp != nn->clip.x.zp || x.dtype != odt(nn->clip.x.dtype))
            return tsr_err(TSR_EINVAL, "clip: tensor quantization differs from the node's parameters");
        return opref_clip(&x, nn->clip.lo, nn->clip.hi, &y);
    case TSR_ND_MUL: {
        const tsr_mul_params_t *p = &nn->mul;
        opref_tensor_t sv = view(nd, nn->in[1], outs[nn->in[1]]);
        if (x.zp != p->x.zp || sv.zp != p->s.zp || y.zp != p->y.zp || x.dtype != odt(p->x.dtype) ||
            sv.dtype != odt(p->s.dtype) || y.dtype != odt(p->y.dtype))
            return tsr_err(TSR_EINVAL, "mul: tensor quantization differs from the node's parameters");
        return opref_mul(&x, &sv, p->scale, p->act_min, p->act_max, &y);
    }
    case TSR_ND_GAVG: { /* (fixed point: the configs a netdesc runs on need not have EXACT_REQUANT) */
        const tsr_gavg_params_t *p = &nn->gavg;
        if (x.zp != p->x_zp || x.dtype != odt(p->x_dtype) || y.zp != p->y_zp || y.dtype != odt(p->y_dtype))
            return tsr_err(TSR_EINVAL, "gavg: tensor quantization differs from the node's parameters");
        const int32_t mult = p->mult, shift = p->shift;
        opref_requant_t rq = {.count = 1, .mult = &mult, .shift = &shift, .act_min = p->act_min,
                              .act_max = p->act_max};
        return opref_gavg(&x, &rq, &y);
    }
    case TSR_ND_SOFTMAX: { /* over h*w: the rows of [N, C, 1, H*W] */
        const tsr_softmax_params_t *p = &nn->softmax;
        if (x.zp != p->x_zp || x.dtype != odt(p->x_dtype) || y.zp != p->y_zp || y.dtype != odt(p->y_dtype))
            return tsr_err(TSR_EINVAL, "softmax: tensor quantization differs from the node's parameters");
        if (p->spatial) {
            x.w *= x.h, y.w *= y.h;
            x.h = y.h = 1;
        }
        return opref_softmax(&x, p->x_scale, p->y_scale, &y);
    }
    case TSR_ND_ACT: { /* the table on the host, in its own terms: entry[(x - off_x) & 255] = y - off_y */
        const tsr_op_act_t *p = &nn->act;
        if (x.zp != p->x_zp || x.dtype != odt(p->x_dtype) || y.zp != p->y_zp || y.dtype != odt(p->y_dtype))
            return tsr_err(TSR_EINVAL, "act: tensor quantization differs from the node's parameters");
        const int offx = x.dtype == OPREF_UINT8 ? 128 : 0, offy = y.dtype == OPREF_UINT8 ? 128 : 0;
        const int64_t cnt = (int64_t)x.n * x.c * x.h * x.w;
        for (int64_t i = 0; i < cnt; i++) {
            const uint8_t b = ((const uint8_t *)x.data)[i];
            const int xv = x.dtype == OPREF_UINT8 ? b : (int8_t)b;
            const int yv = p->table.v[(xv - offx) & 255] + offy;
            ((uint8_t *)y.data)[i] = (uint8_t)yv;
        }
        return TSR_OK;
    }
    case TSR_ND_CONCAT: { /* NCHW bytes: per batch item a's C*H*W, then b's */
        const opref_tensor_t b = view(nd, nn->in[1], outs[nn->in[1]]);
        if (x.zp != y.zp || b.zp != y.zp || x.dtype != y.dtype || b.dtype != y.dtype || x.c + b.c != y.c)
            return tsr_err(TSR_EINVAL, "concat: tensors differ from the node's parameters");
        const size_t ea = (size_t)x.c * x.h * x.w, eb = (size_t)b.c * b.h * b.w;
        for (int n = 0; n < y.n; n++) {
            memcpy((uint8_t *)y.data + n * (ea + eb), (const uint8_t *)x.data + n * ea, ea);
            memcpy((uint8_t *)y.data + n * (ea + eb) + ea, (const uint8_t *)b.data + n * eb, eb);
        }
        return TSR_OK;
    }
    }
    return tsr_err(TSR_EINVAL, "unknown node kind %d", (int)nn->kind);
}

int tsr_netref_run(const tsr_netdesc_t *nd, const void *input, void **outs)
{
    if (!nd || !input || !outs || nd->ntensors < 1 || !nd->tensors || (nd->nnodes > 0 && !nd->nodes))
        return tsr_err(TSR_EINVAL, "netref: NULL or empty network, input or outputs");
    memset(outs, 0, sizeof *outs * (size_t)nd->ntensors);
    int rc = TSR_OK;
    for (int t = 0; t < nd->ntensors && !rc; t++) {
        uint64_t bytes = tsr_netdesc_tensor_bytes(nd, t);
        if (bytes == 0 || bytes > INT32_MAX)
            rc = tsr_err(TSR_EINVAL, "netref: tensor %d has %llu elements (1 .. 2^31-1)", t,
                         (unsigned long long)bytes);
        else if (!(outs[t] = calloc(1, (size_t)bytes)))
            rc = tsr_err(TSR_ENOMEM, "netref: cannot allocate tensor %d (%llu bytes)", t, (unsigned long long)bytes);
    }
    if (!rc)
        memcpy(outs[0], input, (size_t)tsr_netdesc_tensor_bytes(nd, 0));
    /* done[t]: tensor t holds its value (the input, or its producer ran):
     * a node may only read those and write each tensor once. */
    char *done = rc ? NULL : calloc((size_t)nd->ntensors, 1);
    if (!rc && !done)
        rc = tsr_err(TSR_ENOMEM, "netref: out of memory");
    if (!rc)
        done[0] = 1;
    for (int i = 0; i < nd->nnodes && !rc; i++) {
        const tsr_nd_node_t *nn = &nd->nodes[i];
        int nin = nn->kind == TSR_ND_ADD ? 2 : 1;
        for (int j = 0; j < nin && !rc; j++)
            if (nn->in[j] < 0 || nn->in[j] >= nd->ntensors || !done[nn->in[j]])
                rc = tsr_err(TSR_EINVAL, "netref: node %d (%s): input tensor %d out of range or not computed yet", i,
                             nn->name, nn->in[j]);
        if (!rc && (nn->out <= 0 || nn->out >= nd->ntensors || done[nn->out]))
            rc = tsr_err(TSR_EINVAL, "netref: node %d (%s): output tensor %d out of range or already computed", i,
                         nn->name, nn->out);
        if (!rc && (rc = run_node(nd, nn, outs)))
            tsr_err_prefix(rc, "netref: node %d (%s): ", i, nn->name);
        if (!rc)
            done[nn->out] = 1;
    }
    free(done);
    if (rc)
        tsr_netref_free(nd, outs);
    return rc;
}

void tsr_netref_free(const tsr_netdesc_t *nd, void **outs)
{
    if (!nd || !outs)
        return;
    for (int t = 0; t < nd->ntensors; t++) {
        free(outs[t]);
        outs[t] = NULL;
    }
}
