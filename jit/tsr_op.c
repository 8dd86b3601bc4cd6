/* tsr_op: the operator registry (tsr_op.h): one row per operator. */
#include "tsr_op.h"

#include "tsr_error.h"

static void io_of(tsr_op_io_t *io, int n, int c, int h, int w, tsr_dtype_e dt, int32_t zp)
{
    *io = (tsr_op_io_t){n, c, h, w, dt, zp};
}

static void io_desc(tsr_op_io_t *io, const tsr_eltwise_desc_t *d)
{
    io_of(io, d->n, d->c, d->h, d->w, d->dtype, d->zp);
}

/* ---------------------------------------------------------------- conv */

static int conv_check(const void *params, tsr_op_io_t *io)
{
    const tsr_conv2d_params_t *p = params;
    int oh, ow, rc = tsr_conv2d_check(p, &oh, &ow);
    if (rc)
        return rc;
    io_of(&io[0], p->n, p->c_in, p->h, p->w, p->x_dtype, p->x_zp);
    io_of(&io[1], p->n, p->c_out, oh, ow, p->y_dtype, p->y_zp);
    return TSR_OK;
}

static int conv_plan(tsr_device_t *dev, const void *p, tsr_op_plan_t *pl) { return tsr_conv2d_plan(dev, p, &pl->conv); }
static int conv_plan_t(tsr_device_t *dev, const void *p, const tsr_dtensor_t *const *x, const tsr_dtensor_t *y,
                       tsr_op_plan_t *pl)
{
    return tsr_conv2d_plan_tensors(dev, p, x[0], y, &pl->conv);
}
static void conv_free(tsr_device_t *dev, tsr_op_plan_t *pl) { tsr_conv2d_plan_free(dev, &pl->conv); }
static int conv_write(tsr_device_t *dev, const tsr_op_plan_t *pl, const void *const *x, const void *w,
                      const int32_t *bias)
{
    int rc = tsr_conv2d_write_weights(dev, &pl->conv, w, bias);
    return rc ? rc : tsr_conv2d_write_input(dev, &pl->conv, x[0]);
}
static int conv_exec(tsr_device_t *dev, const tsr_op_plan_t *pl) { return tsr_conv2d_exec(dev, &pl->conv); }
static int conv_read(tsr_device_t *dev, const tsr_op_plan_t *pl, void *y)
{
    return tsr_conv2d_read_output(dev, &pl->conv, y);
}
static void conv_fig_of(const tsr_conv2d_plan_t *c, tsr_op_figures_t *f)
{
    *f = (tsr_op_figures_t){c->insns, c->ninsns, c->kcache, c->w_bytes, c->c_bytes};
}
static void conv_fig(const tsr_op_plan_t *pl, tsr_op_figures_t *f) { conv_fig_of(&pl->conv, f); }

/* --------------------------------------------------------------- dense */

static int dense_check(const void *params, tsr_op_io_t *io)
{
    const tsr_dense_params_t *p = params;
    int rc = tsr_dense_check(p, NULL);
    if (rc)
        return rc;
    io_of(&io[0], p->n, p->k, 1, 1, p->x_dtype, p->x_zp); /* flat: any C*H*W == K */
    io_of(&io[1], p->n, p->m, 1, 1, p->y_dtype, p->y_zp);
    return TSR_OK;
}

static int dense_plan(tsr_device_t *dev, const void *p, tsr_op_plan_t *pl)
{
    return tsr_dense_plan(dev, p, &pl->dense);
}
static void dense_free(tsr_device_t *dev, tsr_op_plan_t *pl) { tsr_dense_plan_free(dev, &pl->dense); }
static int dense_write(tsr_device_t *dev, const tsr_op_plan_t *pl, const void *const *x, const void *w,
                       const int32_t *bias)
{
    int rc = tsr_dense_write_weights(dev, &pl->dense, w, bias);
    return rc ? rc : tsr_dense_write_input(dev, &pl->dense, x[0]);
}
static int dense_exec(tsr_device_t *dev, const tsr_op_plan_t *pl) { return tsr_dense_exec(dev, &pl->dense); }
static int dense_read(tsr_device_t *dev, const tsr_op_plan_t *pl, void *y)
{
    return tsr_dense_read_output(dev, &pl->dense, y);
}
static void dense_fig(const tsr_op_plan_t *pl, tsr_op_figures_t *f) { conv_fig_of(&pl->dense.conv, f); }

/* ---------------------------------------------------------------- pool */

static int pool_check(const void *params, tsr_op_io_t *io)
{
    const tsr_pool_params_t *p = params;
    int oh, ow, rc = tsr_pool_check(p, &oh, &ow);
    if (rc)
        return rc;
    io_of(&io[0], p->n, p->c, p->h, p->w, p->dtype, p->zp);
    io_of(&io[1], p->n, p->c, oh, ow, p->dtype, p->zp);
    return TSR_OK;
}

static int pool_plan(tsr_device_t *dev, const void *p, tsr_op_plan_t *pl) { return tsr_pool_plan(dev, p, &pl->pool); }
static int pool_plan_t(tsr_device_t *dev, const void *p, const tsr_dtensor_t *const *x, const tsr_dtensor_t *y,
                       tsr_op_plan_t *pl)
{
    return tsr_pool_plan_tensors(dev, p, x[0], y, &pl->pool);
}
static void pool_free(tsr_device_t *dev, tsr_op_plan_t *pl) { tsr_pool_plan_free(dev, &pl->pool); }
static int pool_write(tsr_device_t *dev, const tsr_op_plan_t *pl, const void *const *x, const void *w,
                      const int32_t *bias)
{
    (void)w;
    (void)bias;
    return tsr_pool_write_input(dev, &pl->pool, x[0]);
}
static int pool_exec(tsr_device_t *dev, const tsr_op_plan_t *pl) { return tsr_pool_exec(dev, &pl->pool); }
static int pool_read(tsr_device_t *dev, const tsr_op_plan_t *pl, void *y)
{
    return tsr_pool_read_output(dev, &pl->pool, y);
}
static void pool_fig(const tsr_op_plan_t *pl, tsr_op_figures_t *f)
{
    const tsr_pool_plan_t *p = &pl->pool;
    *f = (tsr_op_figures_t){p->insns, p->ninsns, p->kcache, p->w_bytes, p->c_bytes};
}

/* ----------------------------------------------------------- add, clip */

static int add_check(const void *params, tsr_op_io_t *io)
{
    const tsr_add_params_t *p = params;
    int rc = tsr_add_check(p, NULL);
    if (rc)
        return rc;
    io_desc(&io[0], &p->a);
    io_desc(&io[1], &p->b);
    io_desc(&io[2], &p->y);
    return TSR_OK;
}

static int clip_check(const void *params, tsr_op_io_t *io)
{
    const tsr_clip_params_t *p = params;
    int rc = tsr_clip_check(p, NULL);
    if (rc)
        return rc;
    io_desc(&io[0], &p->x);
    io_desc(&io[1], &p->y);
    return TSR_OK;
}

static int add_plan(tsr_device_t *dev, const void *p, tsr_op_plan_t *pl) { return tsr_add_plan(dev, p, &pl->elt); }
static int add_plan_t(tsr_device_t *dev, const void *p, const tsr_dtensor_t *const *x, const tsr_dtensor_t *y,
                      tsr_op_plan_t *pl)
{
    return tsr_add_plan_tensors(dev, p, x[0], x[1], y, &pl->elt);
}
static void add_free(tsr_device_t *dev, tsr_op_plan_t *pl) { tsr_add_plan_free(dev, &pl->elt); }
static int add_write(tsr_device_t *dev, const tsr_op_plan_t *pl, const void *const *x, const void *w,
                     const int32_t *bias)
{
    (void)w;
    (void)bias;
    return tsr_add_write_inputs(dev, &pl->elt, x[0], x[1]);
}
static int add_exec(tsr_device_t *dev, const tsr_op_plan_t *pl) { return tsr_add_exec(dev, &pl->elt); }
static int add_read(tsr_device_t *dev, const tsr_op_plan_t *pl, void *y)
{
    return tsr_add_read_output(dev, &pl->elt, y);
}

static int clip_plan(tsr_device_t *dev, const void *p, tsr_op_plan_t *pl) { return tsr_clip_plan(dev, p, &pl->elt); }
static int clip_plan_t(tsr_device_t *dev, const void *p, const tsr_dtensor_t *const *x, const tsr_dtensor_t *y,
                       tsr_op_plan_t *pl)
{
    return tsr_clip_plan_tensors(dev, p, x[0], y, &pl->elt);
}
static void clip_free(tsr_device_t *dev, tsr_op_plan_t *pl) { tsr_clip_plan_free(dev, &pl->elt); }
static int clip_write(tsr_device_t *dev, const tsr_op_plan_t *pl, const void *const *x, const void *w,
                      const int32_t *bias)
{
    (void)w;
    (void)bias;
    return tsr_clip_write_input(dev, &pl->elt, x[0]);
}
static int clip_exec(tsr_device_t *dev, const tsr_op_plan_t *pl) { return tsr_clip_exec(dev, &pl->elt); }
static int clip_read(tsr_device_t *dev, const tsr_op_plan_t *pl, void *y)
{
    return tsr_clip_read_output(dev, &pl->elt, y);
}
static void elt_fig(const tsr_op_plan_t *pl, tsr_op_figures_t *f)
{
    const tsr_eltwise_plan_t *e = &pl->elt;
    *f = (tsr_op_figures_t){e->insns, e->ninsns, e->kcache, e->w_bytes, e->c_bytes};
}

/* ----------------------------------------------------------------- act */

static int act_check(const void *params, tsr_op_io_t *io)
{
    const tsr_op_act_t *p = params;
    if (p->n < 1 || p->c < 1 || p->h < 1 || p->w < 1)
        return tsr_err(TSR_EINVAL, "act: shape [%d,%d,%d,%d] must be positive", p->n, p->c, p->h, p->w);
    const tsr_dtype_e dt[2] = {p->x_dtype, p->y_dtype};
    const int32_t zp[2] = {p->x_zp, p->y_zp};
    for (int k = 0; k < 2; k++) {
        if (dt[k] != TSR_DT_INT8 && dt[k] != TSR_DT_UINT8)
            return tsr_err(TSR_EINVAL, "act: %s type %s (int8 or uint8)", k ? "output" : "input", tsr_dtype_name(dt[k]));
        const int32_t lo = dt[k] == TSR_DT_UINT8 ? 0 : -128;
        if (zp[k] < lo || zp[k] > lo + 255)
            return tsr_err(TSR_EINVAL, "act: %s zero point %d outside %s", k ? "output" : "input", (int)zp[k],
                           tsr_dtype_name(dt[k]));
    }
    io_of(&io[0], p->n, p->c, p->h, p->w, p->x_dtype, p->x_zp);
    io_of(&io[1], p->n, p->c, p->h, p->w, p->y_dtype, p->y_zp);
    return TSR_OK;
}

static int act_plan_t(tsr_device_t *dev, const void *p, const tsr_dtensor_t *const *x, const tsr_dtensor_t *y,
                      tsr_op_plan_t *pl)
{
    return tsr_act_plan_tensors(dev, &((const tsr_op_act_t *)p)->table, x[0], y, &pl->act);
}
static void act_free(tsr_device_t *dev, tsr_op_plan_t *pl) { tsr_act_plan_free(dev, &pl->act); }
static void act_fig(const tsr_op_plan_t *pl, tsr_op_figures_t *f)
{
    /* no kernel cache (the stream is the plan's own); the table and two uops are its constants */
    *f = (tsr_op_figures_t){pl->act.insns, pl->act.ninsns, 0, 0, pl->act.insns ? TSR_ACT_ENTRIES : 0};
}

/* ----------------------------------------------------------------- mul */

static int mul_check(const void *params, tsr_op_io_t *io)
{
    const tsr_mul_params_t *p = params;
    int rc = tsr_mul_check(p, NULL);
    if (rc)
        return rc;
    io_desc(&io[0], &p->x);
    io_desc(&io[1], &p->s);
    io_desc(&io[2], &p->y);
    return TSR_OK;
}

static int mul_plan_t(tsr_device_t *dev, const void *p, const tsr_dtensor_t *const *x, const tsr_dtensor_t *y,
                      tsr_op_plan_t *pl)
{
    return tsr_mul_plan_tensors(dev, p, x[0], x[1], y, &pl->mul);
}
static void mul_free(tsr_device_t *dev, tsr_op_plan_t *pl) { tsr_mul_plan_free(dev, &pl->mul); }
static void mul_fig(const tsr_op_plan_t *pl, tsr_op_figures_t *f)
{
    /* no kernel cache (the stream is the plan's own); the two constant rows and the uops are its constants */
    *f = (tsr_op_figures_t){pl->mul.insns, pl->mul.ninsns, 0, 0, pl->mul.c_bytes};
}

/* ---------------------------------------------------------------- gavg */

static int gavg_check(const void *params, tsr_op_io_t *io)
{
    const tsr_gavg_params_t *p = params;
    int rc = tsr_gavg_check(p);
    if (rc)
        return rc;
    io_of(&io[0], p->n, p->c, p->h, p->w, p->x_dtype, p->x_zp);
    io_of(&io[1], p->n, p->c, 1, 1, p->y_dtype, p->y_zp);
    return TSR_OK;
}

static int gavg_plan_t(tsr_device_t *dev, const void *p, const tsr_dtensor_t *const *x, const tsr_dtensor_t *y,
                       tsr_op_plan_t *pl)
{
    return tsr_gavg_plan_tensors(dev, p, x[0], y, &pl->gavg);
}
static void gavg_free(tsr_device_t *dev, tsr_op_plan_t *pl) { tsr_gavg_plan_free(dev, &pl->gavg); }
static void gavg_fig(const tsr_op_plan_t *pl, tsr_op_figures_t *f)
{
    *f = (tsr_op_figures_t){pl->gavg.insns, pl->gavg.ninsns, 0, 0, pl->gavg.c_bytes};
}

/* ------------------------------------------------------------- softmax */

static int softmax_check(const void *params, tsr_op_io_t *io)
{
    const tsr_softmax_params_t *p = params;
    tsr_softmax_form_t f;
    int rc = tsr_softmax_form(p, &f);
    if (rc)
        return rc;
    io_of(&io[0], p->n, p->c, p->h, p->w, p->x_dtype, p->x_zp);
    io_of(&io[1], p->n, p->c, p->h, p->w, p->y_dtype, p->y_zp);
    return TSR_OK;
}

static int softmax_plan_t(tsr_device_t *dev, const void *p, const tsr_dtensor_t *const *x, const tsr_dtensor_t *y,
                          tsr_op_plan_t *pl)
{
    return tsr_softmax_plan_tensors(dev, p, x[0], y, &pl->softmax);
}
static void softmax_free(tsr_device_t *dev, tsr_op_plan_t *pl) { tsr_softmax_plan_free(dev, &pl->softmax); }
static void softmax_fig(const tsr_op_plan_t *pl, tsr_op_figures_t *f)
{
    /* the three tables, the rqfin row and the uops are its constants */
    *f = (tsr_op_figures_t){pl->softmax.insns, pl->softmax.ninsns, 0, 0, pl->softmax.insns ? 3 * 256 : 0};
}

/* -------------------------------------------------------------- concat */

static int concat_check(const void *params, tsr_op_io_t *io)
{
    const tsr_concat_params_t *p = params;
    int rc = tsr_concat_check(p);
    if (rc)
        return rc;
    io_of(&io[0], p->n, p->c_a, p->h, p->w, p->dtype, p->zp);
    io_of(&io[1], p->n, p->c_b, p->h, p->w, p->dtype, p->zp);
    io_of(&io[2], p->n, p->c_a + p->c_b, p->h, p->w, p->dtype, p->zp);
    return TSR_OK;
}

/* --------------------------------------------------------------- table */

#define IO1 {"input", "output"}
static const tsr_op_def_t table[TSR_OPK_COUNT] = {
    [TSR_OPK_CONV] = {.kind = TSR_OPK_CONV, .name = "conv", .n_inputs = 1, .has_weights = 1, .io_names = IO1,
                      .params_size = sizeof(tsr_conv2d_params_t), .check = conv_check, .plan = conv_plan,
                      .plan_tensors = conv_plan_t, .plan_free = conv_free, .write = conv_write, .exec = conv_exec,
                      .read = conv_read, .figures = conv_fig},
    [TSR_OPK_POOL] = {.kind = TSR_OPK_POOL, .name = "pool", .n_inputs = 1, .io_names = IO1,
                      .params_size = sizeof(tsr_pool_params_t), .check = pool_check, .plan = pool_plan,
                      .plan_tensors = pool_plan_t, .plan_free = pool_free, .write = pool_write, .exec = pool_exec,
                      .read = pool_read, .figures = pool_fig},
    [TSR_OPK_ADD] = {.kind = TSR_OPK_ADD, .name = "add", .n_inputs = 2, .io_names = {"input a", "input b", "output"},
                     .params_size = sizeof(tsr_add_params_t), .check = add_check, .plan = add_plan,
                     .plan_tensors = add_plan_t, .plan_free = add_free, .write = add_write, .exec = add_exec,
                     .read = add_read, .figures = elt_fig},
    [TSR_OPK_CLIP] = {.kind = TSR_OPK_CLIP, .name = "clip", .n_inputs = 1, .io_names = IO1,
                      .params_size = sizeof(tsr_clip_params_t), .check = clip_check, .plan = clip_plan,
                      .plan_tensors = clip_plan_t, .plan_free = clip_free, .write = clip_write, .exec = clip_exec,
                      .read = clip_read, .figures = elt_fig},
    /* dense has no plan over tensors: the graph runs it as a 1x1 conv */
    [TSR_OPK_DENSE] = {.kind = TSR_OPK_DENSE, .name = "dense", .n_inputs = 1, .has_weights = 1, .flat_input = 1,
                       .io_names = IO1, .params_size = sizeof(tsr_dense_params_t), .check = dense_check,
                       .plan = dense_plan, .plan_free = dense_free, .write = dense_write, .exec = dense_exec,
                       .read = dense_read, .figures = dense_fig},
    /* a reshape runs nothing: the graph relabels its input's bytes */
    [TSR_OPK_RESHAPE] = {.kind = TSR_OPK_RESHAPE, .name = "reshape", .n_inputs = 1, .io_names = IO1},
    /* an activation table runs over device tensors only (graph; tsr_act_run for a single one) */
    [TSR_OPK_ACT] = {.kind = TSR_OPK_ACT, .name = "act", .n_inputs = 1, .io_names = IO1,
                     .params_size = sizeof(tsr_op_act_t), .check = act_check, .plan_tensors = act_plan_t,
                     .plan_free = act_free, .figures = act_fig},
    /* the multiply by a per-channel vector likewise (tsr_mul_run for a single one) */
    [TSR_OPK_MUL] = {.kind = TSR_OPK_MUL, .name = "mul", .n_inputs = 2, .io_names = {"input x", "input s", "output"},
                     .params_size = sizeof(tsr_mul_params_t), .check = mul_check, .plan_tensors = mul_plan_t,
                     .plan_free = mul_free, .figures = mul_fig},
    /* the global average into its own quantization likewise (tsr_gavg_run for a single one) */
    [TSR_OPK_GAVG] = {.kind = TSR_OPK_GAVG, .name = "gavg", .n_inputs = 1, .io_names = IO1,
                      .params_size = sizeof(tsr_gavg_params_t), .check = gavg_check, .plan_tensors = gavg_plan_t,
                      .plan_free = gavg_free, .figures = gavg_fig},
    /* the softmax likewise (tsr_softmax_run for a single one) */
    [TSR_OPK_SOFTMAX] = {.kind = TSR_OPK_SOFTMAX, .name = "softmax", .n_inputs = 1, .io_names = IO1,
                         .params_size = sizeof(tsr_softmax_params_t), .check = softmax_check,
                         .plan_tensors = softmax_plan_t, .plan_free = softmax_free, .figures = softmax_fig},
    /* a concat runs nothing: the graph makes its inputs views of its output (tsr_concat.h) */
    [TSR_OPK_CONCAT] = {.kind = TSR_OPK_CONCAT, .name = "concat", .n_inputs = 2,
                        .io_names = {"input a", "input b", "output"}, .params_size = sizeof(tsr_concat_params_t),
                        .check = concat_check},
};
#undef IO1

const tsr_op_def_t *tsr_op_def(int kind)
{
    return kind > 0 && kind < TSR_OPK_COUNT ? &table[kind] : NULL;
}

const char *tsr_op_name(int kind)
{
    const tsr_op_def_t *d = tsr_op_def(kind);
    return d ? d->name : "?";
}
