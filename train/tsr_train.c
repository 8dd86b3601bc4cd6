/*
 * tsr_train: the training session (tsr_train.h): the trainable part chosen
 * and checked, the data checked, the frozen features, the epochs, the
 * measures, the tuned model's file. One step is tsr_train_step.c.
 */
#include "tsr_train.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsr_dtype.h"
#include "tsr_error.h"
#include "tsr_file.h"
#include "tsr_onnx_report.h"
#include "tsr_strsafe.h"
#include "tsr_train_int.h"
#include "tsr_util.h"

/* ---------------------------------------------------------------- choosing the trainable part */

static int has_weights(const tsr_onnx_lowered_t *L)
{
    return L->device && (L->kind == TSR_OXL_CONV || L->kind == TSR_OXL_DENSE);
}

/* name names layer L: its node name (with or without the leading '/'), the first component of
 * its path ("fc" for "/fc/Gemm"), or its weight constant's name. */
static int names(const tsr_onnx_lowered_t *L, const char *name, size_t len)
{
    const char *n = L->node;
    if (strlen(n) == len && !strncmp(n, name, len))
        return 1;
    if (n[0] == '/')
        n++;
    if (strlen(n) == len && !strncmp(n, name, len))
        return 1;
    if (!strncmp(n, name, len) && n[len] == '/')
        return 1;
    return L->w_name && strlen(L->w_name) == len && !strncmp(L->w_name, name, len);
}

/* "conv1 (/conv1/Conv), ..." : the layers with weights, for messages */
static void weight_layers(const tsr_trainer_t *tr, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < tr->nls && k < n; i++)
        if (has_weights(&tr->ls[i]))
            k += (size_t)snprintf(buf + k, n - k, "%s%s (%s)", k ? ", " : "", TSR_SAFE(tr->ls[i].node),
                                  tr->ls[i].op);
}

/* mark[i] = 1 for the layers opts->trainable names. */
static int select_layers(tsr_trainer_t *tr, int *mark)
{
    const char *spec = tr->o.trainable;
    char list[1024];
    weight_layers(tr, list, sizeof list);
    if (!strncmp(spec, "last:", 5)) {
        char *end;
        errno = 0;
        const long k = strtol(spec + 5, &end, 10);
        int nw = 0;
        for (int i = 0; i < tr->nls; i++)
            nw += has_weights(&tr->ls[i]);
        if (errno || end == spec + 5 || *end || k < 1 || k > nw)
            return tsr_err(TSR_EINVAL, "--trainable \"%s\": last:K needs K in [1, %d] (the layers with weights: %s)",
                           TSR_SAFE(spec), nw, list);
        for (int i = tr->nls - 1, left = (int)k; i >= 0 && left; i--)
            if (has_weights(&tr->ls[i]))
                mark[i] = 1, left--;
        return 0;
    }
    const char *p = spec;
    while (1) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && (*p == ' ')) /* (spaces around the commas) */
            p++, len--;
        while (len && p[len - 1] == ' ')
            len--;
        if (!len)
            return tsr_err(TSR_EINVAL, "--trainable \"%s\": an empty layer name (the layers with weights: %s)",
                           TSR_SAFE(spec), list);
        int hit = -1, other = -1, nhit = 0;
        for (int i = 0; i < tr->nls; i++)
            if (names(&tr->ls[i], p, len)) {
                if (has_weights(&tr->ls[i]))
                    nhit += hit != i, hit = i;
                else
                    other = i;
            }
        char nm[256];
        snprintf(nm, sizeof nm, "%.*s", (int)(len < 200 ? len : 200), p);
        if (nhit > 1)
            return tsr_err(TSR_EINVAL, "--trainable: \"%s\" names %d layers (give the node name: %s)", TSR_SAFE(nm),
                           nhit, list);
        if (hit < 0 && other >= 0)
            return tsr_err(TSR_EINVAL, "--trainable: node \"%s\" (%s) has no weights to train (the layers with "
                           "weights: %s)", TSR_SAFE(tr->ls[other].node), tr->ls[other].op, list);
        if (hit < 0)
            return tsr_err(TSR_EINVAL, "--trainable: no layer \"%s\" in %s (the layers with weights: %s)",
                           TSR_SAFE(nm), tr->path, list);
        mark[hit] = 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

/* The part's layer that writes value v (-1: the part's input, the boundary value; -2: neither). */
static int part_src(const tsr_trainer_t *tr, const int *vmap, int v)
{
    if (v == tr->ls[tr->first].in)
        return -1;
    for (int j = 0; j < tr->nc; j++)
        if (vmap[j] == v)
            return j;
    return -2;
}

/* The part from the first trainable layer to the graph output, each layer checked: a DAG whose
 * layers read the part's input (the boundary value, one tensor) or the outputs of the part's
 * layers before them (a residual add reads two). */
static int build_part(tsr_trainer_t *tr, const int *mark)
{
    tr->first = -1;
    for (int i = 0; i < tr->nls && tr->first < 0; i++)
        if (mark[i])
            tr->first = i;
    if (!(tr->c = calloc((size_t)tr->nls, sizeof *tr->c)))
        return tsr_err(TSR_ENOMEM, "out of memory");
    int *vmap = malloc(sizeof(int) * (size_t)tr->nls); /* the value each part layer writes (a host copy: its own) */
    if (!vmap)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int prev_out = -1, dq = -1, end = -1, rc = 0;
    for (int i = tr->first; i < tr->nls && !rc; i++) {
        const tsr_onnx_lowered_t *L = &tr->ls[i];
        const char *nm = TSR_SAFE(L->node);
        if (dq >= 0) { /* after the logits' DequantizeLinear: an optional Softmax, then nothing */
            if (L->in != prev_out)
                rc = tsr_err(TSR_EINVAL, "node \"%s\" (%s) does not read the output of the layer before it: the "
                             "trainable part ends in the logits (no branches after them)", nm, L->op);
            else if (L->kind != TSR_OXL_SOFTMAX || end >= 0)
                rc = tsr_err(TSR_EINVAL, "node \"%s\" (%s) after the logits has no backward here (the trainable "
                             "part ends in a DequantizeLinear and at most a Softmax)", nm, L->op);
            end = i;
            prev_out = L->out;
            continue;
        }
        const int s0 = part_src(tr, vmap, L->in), s1 = L->kind == TSR_OXL_ADD ? part_src(tr, vmap, L->in2) : -1;
        if (s0 == -2 || s1 == -2) {
            const char *v = s0 == -2 ? L->in_name : L->in2_name;
            rc = tsr_err(TSR_EINVAL, "node \"%s\" (%s) reads \"%s\", which is neither the trainable part's input "
                         "(\"%s\") nor written in the part: a branch that leaves the part (train from an earlier "
                         "layer, so that the part has one input)", nm, L->op, TSR_SAFE(v),
                         TSR_SAFE(tr->ls[tr->first].in_name));
            break;
        }
        if (!L->device && L->kind == TSR_OXL_COPY && i > tr->first && s0 >= 0) { /* the same bytes */
            vmap[s0] = L->out; /* (the copy's value stands for its source's from here on) */
            prev_out = L->out;
            continue;
        }
        if (!L->device) {
            if (L->kind != TSR_OXL_DEQUANT || !tr->nc || s0 != tr->nc - 1) {
                rc = tsr_err(TSR_EINVAL, "node \"%s\" (%s) runs on the host and has no backward here (the "
                             "trainable part: conv, dense, max and average pools and adds on the device, then the "
                             "logits' DequantizeLinear)", nm, L->op);
                break;
            }
            dq = end = i;
            prev_out = L->out;
            continue;
        }
        /* (an average pool, a BatchNormalization, a requantizing Concat also become device convs) */
        static const char *const convs[] = {"Conv", "QLinearConv", "Gemm", "QGemm", "MatMul", "QLinearMatMul"};
        int conv_node = 0;
        for (size_t k = 0; k < sizeof convs / sizeof convs[0]; k++)
            conv_node |= !strcmp(L->op, convs[k]);
        if (L->kind == TSR_OXL_OTHER || (has_weights(L) && !conv_node)) {
            rc = tsr_err(TSR_EINVAL, "node \"%s\" (%s) has no backward here (supported in the trainable part: "
                         "Conv with group 1 or depthwise, Gemm/MatMul, MaxPool, AveragePool, GlobalAveragePool, "
                         "Add; train later layers only)", nm, L->op);
            break;
        }
        if (L->kind == TSR_OXL_CONV && L->conv.groups != 1 &&
            !(L->conv.groups == L->conv.c_in && L->conv.groups == L->conv.c_out)) {
            rc = tsr_err(TSR_EINVAL, "node \"%s\" (%s): a grouped conv (group %d of %d channels) has no backward "
                         "here (group 1 and depthwise do; train later layers only)", nm, L->op, L->conv.groups,
                         L->conv.c_in);
            break;
        }
        if (mark[i] && L->why_not) {
            rc = tsr_err(TSR_EINVAL, "node \"%s\" (%s) cannot be trained: %s", nm, L->op, L->why_not);
            break;
        }
        if (has_weights(L) && i > tr->first && (!L->w_scale || L->x_scale <= 0)) {
            rc = tsr_err(TSR_EINVAL, "node \"%s\" (%s): its input gradient needs its weight scales, which only "
                         "a QDQ node gives (%s)", nm, L->op, L->why_not ? L->why_not : "?");
            break;
        }
        trl_t *l = &tr->c[tr->nc];
        vmap[tr->nc++] = L->out;
        l->L = *L;
        l->trainable = mark[i];
        l->src[0] = s0;
        l->src[1] = s1;
        l->need_dx = s0 >= 0;
        prev_out = L->out;
    }
    free(vmap);
    if (rc)
        return rc;
    if (dq < 0 || !tr->ls[end].is_output)
        return tsr_err(TSR_EINVAL, "%s: the trainable part does not end in the graph output through the logits' "
                       "DequantizeLinear (the last layer's output is \"%s\")", tr->path,
                       TSR_SAFE(tr->ls[end >= 0 ? end : tr->nls - 1].out_name));
    tr->out_scale = tr->ls[dq].q_scale;
    tr->out_zp = tr->ls[dq].q_zp;
    tr->dq = dq;
    tr->out_scale0 = tr->out_scale;
    tr->out_zp0 = tr->out_zp;
    return 0;
}

/* Sizes, buffers, the master copies and the requantization of each layer of the part. */
static int init_part(tsr_trainer_t *tr)
{
    const int B = tr->o.batch;
    size_t gmax = 0, amax = 0;
    for (int j = 0; j < tr->nc; j++) {
        trl_t *l = &tr->c[j];
        const tsr_onnx_lowered_t *L = &l->L;
        if (L->kind == TSR_OXL_CONV) {
            int oh, ow;
            if (tsr_conv2d_check(&L->conv, &oh, &ow))
                return tsr_err_prefix(TSR_EINVAL, "node \"%s\": ", TSR_SAFE(L->node));
            l->x_dtype = L->conv.x_dtype, l->y_dtype = L->conv.y_dtype;
            l->x_zp = L->conv.x_zp, l->y_zp = L->conv.y_zp;
            l->act_min = L->conv.act_min, l->act_max = L->conv.act_max;
            l->x_elems = (size_t)L->conv.c_in * L->conv.h * L->conv.w;
            l->y_elems = (size_t)L->conv.c_out * oh * ow;
            l->M = L->conv.c_out;
            l->K = L->conv.c_in / L->conv.groups * L->conv.kh * L->conv.kw;
        } else if (L->kind == TSR_OXL_ADD) {
            const tsr_add_params_t *a = &L->add;
            l->x_dtype = a->a.dtype, l->y_dtype = a->y.dtype;
            l->x_zp = a->a.zp, l->y_zp = a->y.zp;
            l->act_min = a->act_min, l->act_max = a->act_max;
            l->x_elems = l->y_elems = (size_t)a->y.c * a->y.h * a->y.w;
        } else if (L->kind == TSR_OXL_AVGPOOL && L->avg_conv) {
            int oh, ow;
            if (tsr_conv2d_check(&L->conv, &oh, &ow))
                return tsr_err_prefix(TSR_EINVAL, "node \"%s\": ", TSR_SAFE(L->node));
            l->x_dtype = L->conv.x_dtype, l->y_dtype = L->conv.y_dtype;
            l->x_zp = L->conv.x_zp, l->y_zp = L->conv.y_zp;
            l->act_min = L->conv.act_min, l->act_max = L->conv.act_max;
            l->x_elems = (size_t)L->conv.c_in * L->conv.h * L->conv.w;
            l->y_elems = (size_t)L->conv.c_out * oh * ow;
        } else if (L->kind == TSR_OXL_DENSE) {
            l->x_dtype = L->dense.x_dtype, l->y_dtype = L->dense.y_dtype;
            l->x_zp = L->dense.x_zp, l->y_zp = L->dense.y_zp;
            l->act_min = L->dense.act_min, l->act_max = L->dense.act_max;
            l->x_elems = (size_t)L->dense.k;
            l->y_elems = (size_t)L->dense.m;
            l->M = L->dense.m;
            l->K = L->dense.k;
        } else {
            int oh, ow;
            if (tsr_pool_check(&L->pool, &oh, &ow))
                return tsr_err_prefix(TSR_EINVAL, "node \"%s\": ", TSR_SAFE(L->node));
            l->x_dtype = l->y_dtype = L->pool.dtype;
            l->x_zp = l->y_zp = L->pool.zp;
            l->act_min = tsr_dt_min(l->y_dtype), l->act_max = tsr_dt_max(l->y_dtype);
            l->x_elems = (size_t)L->pool.c * L->pool.h * L->pool.w;
            l->y_elems = (size_t)L->pool.c * oh * ow;
        }
        for (int k = 0; k < 2; k++)
            if (l->src[k] >= 0 && l->x_elems != tr->c[l->src[k]].y_elems)
                return tsr_err(TSR_EINVAL, "node \"%s\" (%s) reads %zu values per sample, node \"%s\" writes %zu",
                               TSR_SAFE(L->node), L->op, l->x_elems, TSR_SAFE(tr->c[l->src[k]].L.node),
                               tr->c[l->src[k]].y_elems);
        if (!j && (l->src[0] != -1 || (L->kind == TSR_OXL_ADD && l->src[1] != -1)))
            return tsr_err(TSR_EINVAL, "node \"%s\" (%s): the part's first layer reads its input", TSR_SAFE(L->node),
                           L->op);
        gmax = gmax > l->x_elems ? gmax : l->x_elems;
        gmax = gmax > l->y_elems ? gmax : l->y_elems;
        if (!(l->y = malloc((size_t)B * l->y_elems)) || !(l->gy = malloc(sizeof(float) * (size_t)B * l->y_elems)))
            return tsr_err(TSR_ENOMEM, "out of memory");
        if (!l->M)
            continue;
        const size_t nw = (size_t)l->M * l->K;
        amax = amax > nw ? amax : nw;
        l->wc = L->w_count > 0 ? L->w_count : 1;
        l->has_bias = L->bias != NULL;
        l->wq = malloc(nw);
        l->bq = calloc((size_t)l->M, sizeof *l->bq);
        l->ws = malloc(sizeof(float) * (size_t)l->wc);
        l->mult = malloc(sizeof(int32_t) * (size_t)l->wc);
        l->shift = malloc(sizeof(int32_t) * (size_t)l->wc);
        l->fscale = malloc(sizeof(float) * (size_t)l->wc);
        l->wzp = calloc((size_t)l->M, sizeof(int32_t));
        l->w = malloc(sizeof(float) * nw);
        l->b = calloc((size_t)l->M, sizeof(float));
        l->vw = calloc(nw, sizeof(float));
        l->vb = calloc((size_t)l->M, sizeof(float));
        l->gw = calloc(nw, sizeof(float));
        l->gb = calloc((size_t)l->M, sizeof(float));
        if (!l->wq || !l->bq || !l->ws || !l->mult || !l->shift || !l->fscale || !l->wzp || !l->w || !l->b ||
            !l->vw || !l->vb || !l->gw || !l->gb)
            return tsr_err(TSR_ENOMEM, "out of memory");
        memcpy(l->wq, L->w, nw);
        if (l->has_bias)
            memcpy(l->bq, L->bias, sizeof(int32_t) * (size_t)l->M);
        if (L->w_scale)
            memcpy(l->ws, L->w_scale, sizeof(float) * (size_t)l->wc);
        else
            l->ws[0] = 1;
        /* the master copy: what the file's int8 values mean */
        for (size_t i = 0; i < nw; i++)
            l->w[i] = (float)l->wq[i] * l->ws[l->wc > 1 ? i / (size_t)l->K : 0];
        for (int m = 0; m < l->M; m++)
            l->b[m] = (float)l->bq[m] * (L->x_scale * l->ws[l->wc > 1 ? m : 0]);
        if (tr->wide && l->trainable) { /* 16-bit weights: the file's are the master copy, lo 0 */
            l->wlo = calloc(nw, 1);
            l->b16 = malloc(sizeof(int64_t) * (size_t)l->M);
            l->w2 = calloc(2 * nw, 1);
            if (!l->wlo || !l->b16 || !l->w2)
                return tsr_err(TSR_ENOMEM, "out of memory");
            memcpy(l->w2, l->wq, nw);
            for (int m = 0; m < l->M; m++)
                l->b16[m] = 256 * (int64_t)l->bq[m];
        }
        if (L->w_scale) {
            int rc = tsr_onnx_lowered_requant(tr->m, L, l->ws, l->mult, l->shift, l->fscale, &l->has_fscale);
            if (rc)
                return rc;
        } else { /* a frozen operator-form layer: the importer's own requantization */
            const tsr_requant_t *rq = L->kind == TSR_OXL_CONV ? &L->conv.rq : &L->dense.rq;
            if (rq->rq_count != l->wc)
                return tsr_err(TSR_EINVAL, "node \"%s\": %d requantization scales", TSR_SAFE(L->node),
                               rq->rq_count);
            memcpy(l->mult, rq->mult, sizeof(int32_t) * (size_t)l->wc);
            memcpy(l->shift, rq->shift, sizeof(int32_t) * (size_t)l->wc);
            l->has_fscale = rq->fscale != NULL;
            if (rq->fscale)
                memcpy(l->fscale, rq->fscale, sizeof(float) * (size_t)l->wc);
        }
    }
    /* The logits' range observer (tsr_train_step.c): a last layer that is a dense without a folded
       Relu/Clip, its output the logits' DequantizeLinear reads with the same quantization, all of whose
       constants the tuned file can rewrite */
    const trl_t *last = &tr->c[tr->nc - 1];
    const tsr_onnx_lowered_t *dq = &tr->ls[tr->dq];
    tr->range_obs = !tr->o.logits_fixed && last->L.kind == TSR_OXL_DENSE && !last->L.relu && !last->L.clip &&
                    last->act_min == tsr_dt_min(last->y_dtype) && last->act_max == tsr_dt_max(last->y_dtype) &&
                    last->L.w_scale && last->L.qs_name && last->L.qzp_name && dq->qs_name && dq->qzp_name &&
                    last->L.y_scale == dq->q_scale && last->y_zp == dq->q_zp &&
                    (last->y_dtype == TSR_DT_UINT8 || last->y_dtype == TSR_DT_INT8);
    tr->loss_exact = tr->o.loss_exact && last->L.kind == TSR_OXL_DENSE && !last->L.relu && !last->L.clip &&
                     last->L.w_scale;
    tr->classes = (int)tr->c[tr->nc - 1].y_elems;
    if (tr->classes < 2 || tr->classes > 4096)
        return tsr_err(TSR_EINVAL, "%s: the logits have %d values per sample (2..4096 classes)", tr->path, tr->classes);
    tr->feat_dtype = tr->c[0].x_dtype;
    tr->feat_elems = tr->c[0].x_elems;
    tr->gcap = (size_t)B * gmax;
    const size_t accn = tr->gcap > amax ? tr->gcap : amax;
    tr->g = malloc(sizeof(float) * tr->gcap);
    tr->g2 = malloc(sizeof(float) * tr->gcap);
    tr->q = malloc(tr->gcap);
    tr->q2 = tr->o.grad_split ? malloc(tr->gcap) : NULL;
    tr->acc = malloc(sizeof(int32_t) * accn);
    tr->facc = tr->wide ? malloc(sizeof(int32_t) * 2 * tr->gcap) : NULL;
    tr->probs = malloc(sizeof(float) * (size_t)B * (size_t)tr->classes);
    tr->x0 = malloc((size_t)B * tr->feat_elems);
    if (!tr->g || !tr->g2 || !tr->q || (tr->o.grad_split && !tr->q2) || !tr->acc || (tr->wide && !tr->facc) ||
        !tr->probs || !tr->x0)
        return tsr_err(TSR_ENOMEM, "out of memory");
    return 0;
}

/* The options a run can be refused for before the model is read. */
static int check_opts(const tsr_train_opts_t *o)
{
    if (!o->trainable || !o->trainable[0])
        return tsr_err(TSR_EINVAL, "--trainable: give the layers to train (names, or last:K)");
    if (o->epochs < 1 || o->epochs > TSR_TRAIN_MAX_EPOCHS)
        return tsr_err(TSR_EINVAL, "--epochs %d: must be in [1, %d]", o->epochs, TSR_TRAIN_MAX_EPOCHS);
    if (o->batch < 1 || o->batch > TSR_TRAIN_MAX_BATCH)
        return tsr_err(TSR_EINVAL, "--batch %d: must be in [1, %d]", o->batch, TSR_TRAIN_MAX_BATCH);
    if (!isfinite(o->lr) || !(o->lr > 0))
        return tsr_err(TSR_EINVAL, "--lr %g: the learning rate must be finite and > 0", o->lr);
    if (!isfinite(o->momentum) || o->momentum < 0 || o->momentum >= 1)
        return tsr_err(TSR_EINVAL, "--momentum %g: must be in [0, 1)", o->momentum);
    if (o->weight_stochastic && o->int8_update)
        return tsr_err(TSR_EINVAL, "--weight-round stochastic rounds the master copy: not with --update int8");
    if (o->weight_bits != 0 && o->weight_bits != 8 && o->weight_bits != 16)
        return tsr_err(TSR_EINVAL, "--weight-bits %d: 8 or 16", o->weight_bits);
    if (o->weight_bits == 16 && o->int8_update)
        return tsr_err(TSR_EINVAL, "--weight-bits 16 runs the forward on the master copy: not with --update int8");
    if (o->weight_refit && (o->int8_update || o->device_update))
        return tsr_err(TSR_EINVAL, "--weight-scale refit re-fits the master copy's scales: not with --update int8 or "
                       "device (their scales are the file's)");
    if (o->device_update && (o->int8_update || o->weight_stochastic || o->weight_bits == 16 || o->grad_split))
        return tsr_err(TSR_EINVAL, "--update device keeps the master copy on the int8 grid's fixed point with one "
                       "gradient scale a step: not with --update int8, --weight-round stochastic, --weight-bits 16 "
                       "or --grad-bits 16");
    if (o->weight_bits == 16 && o->weight_stochastic)
        return tsr_err(TSR_EINVAL, "--weight-bits 16 and --weight-round stochastic: two ways to see the master "
                       "copy's changes below the int8 grid; choose one");
    return 0;
}

/* An update that cannot fit the int32 bias: with momentum mu a constant unit gradient moves a bias
 * by up to lr / (1 - mu) per step; that many steps of its x_scale * w_scale grid must fit int32
 * (by a factor of 2: the bias itself is there too). Refused before training, naming the layer. */
static int check_lr(const tsr_trainer_t *tr)
{
    const double step = tr->o.lr / (1.0 - tr->o.momentum);
    for (int j = 0; j < tr->nc; j++) {
        const trl_t *l = &tr->c[j];
        if (!l->trainable || !l->has_bias)
            continue;
        for (int c = 0; c < l->wc; c++) {
            const double grid = (double)l->L.x_scale * l->ws[c];
            if (!(step / grid < 1073741824.0))
                return tsr_err(TSR_EINVAL, "--lr %g (momentum %g): one update of a unit gradient would move the "
                               "int32 bias of node \"%s\" by %.3g steps of its grid x_scale * w_scale = %.3g, past "
                               "int32: the fixed-point update would overflow", tr->o.lr, tr->o.momentum,
                               TSR_SAFE(l->L.node), step / grid, grid);
        }
    }
    return 0;
}

/* With the file's weight scales kept (the default, --update int8 and device), a trained channel's weights
 * stay within [-128, 127.5] steps of its scale. A channel the file stores all zero may carry a placeholder
 * scale (torch's observer writes eps, 1.2e-7), on which it could never grow: training would leave it at
 * zero without a word. Such a channel (all zero, its scale below a thousandth of the layer's largest, or
 * below 1e-6 when the layer has one scale) is refused before training, naming the layer and the way out. */
static int check_scales(const tsr_trainer_t *tr)
{
    if (tr->o.weight_refit)
        return 0;
    for (int j = 0; j < tr->nc; j++) {
        const trl_t *l = &tr->c[j];
        if (!l->trainable)
            continue;
        const size_t per = (size_t)l->M / (size_t)l->wc * (size_t)l->K;
        float smax = 0;
        for (int c = 0; c < l->wc; c++)
            smax = fmaxf(smax, l->ws[c]);
        const float floor = l->wc > 1 ? smax * 1e-3f : 1e-6f;
        for (int c = 0; c < l->wc; c++) {
            size_t i = 0;
            while (i < per && l->wq[c * per + i] == 0)
                i++;
            if (i == per && l->ws[c] < floor)
                return tsr_err(TSR_EINVAL, "node \"%s\" (%s): weight %s %d is all zero in the file with scale %.3g "
                               "(the layer's largest %.3g): its int8 grid holds |w| <= %.3g, so training cannot move "
                               "it; give it nonzero initial weights%s", TSR_SAFE(l->L.node), l->L.op,
                               l->wc > 1 ? "channel" : "tensor", c, (double)l->ws[c], (double)smax,
                               128.0 * l->ws[c],
                               tr->o.int8_update || tr->o.device_update ? "" : " or use --weight-scale refit");
        }
    }
    return 0;
}

int tsr_train_open(const char *path, tsr_device_t *dev, const tsr_train_opts_t *opts, tsr_trainer_t **out)
{
    *out = NULL;
    int rc = check_opts(opts);
    if (rc)
        return rc;
    if (strlen(path) >= sizeof ((tsr_trainer_t *)0)->path)
        return tsr_err(TSR_EINVAL, "model path too long");
    tsr_trainer_t *tr = calloc(1, sizeof *tr);
    int *mark = NULL;
    if (!tr)
        return tsr_err(TSR_ENOMEM, "out of memory");
    snprintf(tr->path, sizeof tr->path, "%s", path);
    tr->o = *opts;
    /* 16-bit forward weights unless 8 asked for (or implied: no master copy, or its stochastic rounding) */
    const int no_master = opts->int8_update || opts->device_update || opts->weight_stochastic;
    const int wb = opts->weight_bits ? opts->weight_bits : no_master ? 8 : TSR_TRAIN_WEIGHT_BITS_DEFAULT;
    tr->o.weight_bits = wb;
    tr->wide = wb == 16;
    tr->round_state = opts->seed ^ 0x5eed0f6a3d1e2b7cULL; /* not the shuffle's stream */
    tr->wround_state = opts->seed ^ 0x3c6ef372fe94f82bULL; /* nor the gradients' */
    tr->dev = dev;
    tr->cfg = *tsr_device_config(dev);
    if (!(rc = tsr_onnx_load_opts(path, opts->batch, &opts->place, &tr->m)) && !(rc = tsr_onnx_set_target(tr->m, &tr->cfg)))
        rc = tsr_onnx_lowered_ops(tr->m, &tr->ls, &tr->nls);
    if (!rc && !(mark = calloc((size_t)tr->nls + 1, sizeof *mark)))
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc)
        rc = select_layers(tr, mark);
    if (!rc)
        rc = build_part(tr, mark);
    if (!rc && (rc = tsr_onnx_check_value(tr->m, tr->ls[tr->first].in_name, TSR_ONNX_KEEP_ALL)))
        rc = tsr_err_prefix(rc, "the input of the trainable part (node \"%s\"): ", TSR_SAFE(tr->ls[tr->first].node));
    if (!rc)
        rc = init_part(tr);
    if (!rc)
        rc = check_lr(tr);
    if (!rc)
        rc = check_scales(tr);
    if (!rc && opts->device_update)
        rc = tsr_train_device_update_init(tr);
    free(mark);
    if (rc) {
        tsr_train_free(tr);
        return rc;
    }
    *out = tr;
    return 0;
}

void tsr_train_free(tsr_trainer_t *tr)
{
    if (!tr)
        return;
    for (int j = 0; tr->c && j < tr->nc; j++) {
        trl_t *l = &tr->c[j];
        free(l->y), free(l->gy), free(l->wq), free(l->bq), free(l->ws), free(l->mult), free(l->shift), free(l->fscale);
        free(l->wzp), free(l->w), free(l->b), free(l->vw), free(l->vb), free(l->gw), free(l->gb);
        free(l->wlo), free(l->b16), free(l->w2), free(l->gwi), free(l->gbi);
        if (l->sgd_w)
            tsr_sgd_free(l->sgd_w);
        if (l->sgd_b)
            tsr_sgd_free(l->sgd_b);
        free(l->sgd_w), free(l->sgd_b);
    }
    free(tr->c);
    free(tr->g), free(tr->g2), free(tr->q), free(tr->q2), free(tr->acc), free(tr->facc), free(tr->probs), free(tr->x0);
    free(tr->ls);
    tsr_onnx_free(tr->m);
    free(tr);
}

void tsr_train_print_plan(const tsr_trainer_t *tr, FILE *f)
{
    int before = 0;
    for (int i = 0; i < tr->first; i++)
        before += tr->ls[i].device;
    fprintf(f, "trainable part of %s (%d layer%s; the %d device operator%s before it run once per sample as "
            "inference):\n", tr->path, tr->nc, tr->nc == 1 ? "" : "s", before, before == 1 ? "" : "s");
    for (int j = 0; j < tr->nc; j++) {
        const trl_t *l = &tr->c[j];
        const tsr_oxl_kind_e k = l->L.kind;
        const char *kind = k == TSR_OXL_CONV ? (l->L.conv.groups > 1 ? "dwconv" : "conv")
                           : k == TSR_OXL_DENSE ? "dense" : k == TSR_OXL_ADD ? "add"
                           : k == TSR_OXL_AVGPOOL ? (l->L.pool.kind == TSR_POOL_GLOBAL_AVG ? "gavgpool" : "avgpool")
                                                  : "maxpool";
        fprintf(f, "  %-20s %-8s %-7s %-9s", TSR_SAFE(l->L.node), l->L.op, kind,
                l->M ? (l->trainable ? "trained" : "frozen") : "-");
        if (l->L.kind == TSR_OXL_CONV)
            fprintf(f, " %dx%d,%d->%d,%dx%d", l->L.conv.h, l->L.conv.w, l->L.conv.c_in, l->L.conv.c_out, l->L.conv.kh,
                    l->L.conv.kw);
        else if (l->L.kind == TSR_OXL_DENSE)
            fprintf(f, " %d->%d", l->K, l->M);
        else if (l->L.kind == TSR_OXL_ADD)
            fprintf(f, " %dx%d,%d, %s + %s", l->L.add.y.h, l->L.add.y.w, l->L.add.y.c,
                    l->src[0] >= 0 ? TSR_SAFE(tr->c[l->src[0]].L.node) : "input",
                    l->src[1] >= 0 ? TSR_SAFE(tr->c[l->src[1]].L.node) : "input");
        else if (l->L.pool.kind == TSR_POOL_GLOBAL_AVG)
            fprintf(f, " %dx%d,%d", l->L.pool.h, l->L.pool.w, l->L.pool.c);
        else
            fprintf(f, " %dx%d,%d,%dx%d,s%d%s", l->L.pool.h, l->L.pool.w, l->L.pool.c, l->L.pool.kh, l->L.pool.kw,
                    l->L.pool.stride_h, l->L.avg_conv ? " (a weight-1 conv)" : "");
        if (l->trainable)
            fprintf(f, ", %d weights + %d biases, %s int8 scales%s", l->M * l->K, l->has_bias ? l->M : 0,
                    l->wc > 1 ? "per-channel" : "per-tensor",
                    l->wlo ? "; forward on 16-bit weights (two int8 parts, two GEMMs)" : "");
        fputc('\n', f);
    }
    fprintf(f, "  logits: DequantizeLinear scale %g zero point %d, %d classes; softmax cross-entropy on the host\n",
            (double)tr->out_scale, tr->out_zp, tr->classes);
}

/* ---------------------------------------------------------------- data */

static const char *shape_str(const tsr_tensor_t *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s [", tsr_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

int tsr_train_check_data(const tsr_trainer_t *tr, const tsr_tensor_t *x, const char *xname, const tsr_tensor_t *y,
                         const char *yname)
{
    tsr_dtype_e dt;
    int nd;
    int64_t dims[8];
    const char *iname;
    int rc = tsr_onnx_input_info(tr->m, &dt, &nd, dims, &iname);
    if (rc)
        return rc;
    char want[160], have[160];
    size_t k = (size_t)snprintf(want, sizeof want, "%s [N", tsr_dtype_name(dt));
    for (int i = 1; i < nd && k < sizeof want; i++)
        k += (size_t)snprintf(want + k, sizeof want - k, ",%lld", (long long)dims[i]);
    if (k < sizeof want)
        snprintf(want + k, sizeof want - k, "]");
    int same = x->dtype == dt && x->ndim == nd;
    for (int i = 1; same && i < nd; i++)
        same = x->shape[i] == dims[i];
    if (!same)
        return tsr_err(TSR_EINVAL, "%s: the data must be %s (the model's input \"%s\"), not %s", xname, want,
                       TSR_SAFE(iname), shape_str(x, have, sizeof have));
    const int64_t N = x->shape[0];
    if (N < tr->o.batch || N > TSR_TRAIN_MAX_SAMPLES)
        return tsr_err(TSR_EINVAL, "%s: %lld samples: need at least the batch (%d) and at most %d", xname,
                       (long long)N, tr->o.batch, TSR_TRAIN_MAX_SAMPLES);
    if (x->dtype == TSR_DT_FLOAT32) {
        const float *f = x->data;
        for (size_t i = 0; i < (size_t)tsr_tensor_numel(x); i++)
            if (!isfinite(f[i]))
                return tsr_err(TSR_EINVAL, "%s: element %zu (sample %lld) is not finite (%g)", xname, i,
                               (long long)(i / ((size_t)tsr_tensor_numel(x) / (size_t)N)), (double)f[i]);
    }
    if ((y->dtype != TSR_DT_INT32 && y->dtype != TSR_DT_INT64) || y->ndim != 1 || y->shape[0] != N)
        return tsr_err(TSR_EINVAL, "%s: the labels must be int32 or int64 [%lld], one per sample of %s, not %s", yname,
                       (long long)N, xname, shape_str(y, have, sizeof have));
    for (int64_t i = 0; i < N; i++) {
        const int64_t v = y->dtype == TSR_DT_INT32 ? ((const int32_t *)y->data)[i] : ((const int64_t *)y->data)[i];
        if (v < 0 || v >= tr->classes)
            return tsr_err(TSR_EINVAL, "%s: label %lld of sample %lld is out of range (the model has %d classes: 0..%d)",
                           yname, (long long)v, (long long)i, tr->classes, tr->classes - 1);
    }
    return 0;
}

/* ---------------------------------------------------------------- the run */

static uint64_t cycles_now(tsr_device_t *dev)
{
    tsr_counters_t c;
    return tsr_read_counters(dev, &c) ? 0 : c.cycles;
}

/* Rows [r0, r0 + B) of x (the last rows repeated past the end) as a model input of batch B. */
static int batch_input(const tsr_tensor_t *x, int64_t r0, int B, tsr_tensor_t *in)
{
    int64_t shape[8];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[0] = B;
    int rc = tsr_tensor_alloc(in, x->dtype, x->ndim, shape);
    if (rc)
        return rc;
    const size_t row = (size_t)tsr_tensor_numel(x) / (size_t)x->shape[0] * tsr_dtype_size(x->dtype);
    for (int i = 0; i < B; i++) {
        const int64_t r = r0 + i < x->shape[0] ? r0 + i : x->shape[0] - 1;
        memcpy((uint8_t *)in->data + (size_t)i * row, (const uint8_t *)x->data + (size_t)r * row, row);
    }
    return 0;
}

/* The batch a model loaded with tsr_onnx_load(..., B) runs: B when the file's first input dimension
 * is symbolic, else the file's (a model exported for one image, as torch.onnx.export writes the zoo's
 * models without dynamic axes: [1,3,H,W]). The frozen prefix and the inference then run in chunks of
 * it; the trainable part, lowered per sample, still trains on batches of B. */
static int model_batch(const tsr_onnx_t *m, int *mb)
{
    tsr_dtype_e dt;
    int nd;
    int64_t dims[8];
    const char *iname;
    int rc = tsr_onnx_input_info(m, &dt, &nd, dims, &iname);
    if (rc)
        return rc;
    if (nd < 1 || dims[0] < 1 || dims[0] > TSR_TRAIN_MAX_BATCH)
        return tsr_err(TSR_EINVAL, "the model's input \"%s\" has no batch dimension of 1..%d", TSR_SAFE(iname),
                       TSR_TRAIN_MAX_BATCH);
    *mb = (int)dims[0];
    return 0;
}

/* Inference of the whole model on the first batch (a model loaded for it, prepared as `tessera
 * infer` does; a model of a fixed smaller batch run on the batch's samples chunk by chunk, its
 * cycles summed): its cycles and the device memory high-water mark. */
static int measure_inference(tsr_trainer_t *tr, const tsr_tensor_t *x, tsr_train_stats_t *st)
{
    tsr_onnx_t *mi = NULL;
    tsr_tensor_t in = {0}, out = {0};
    int mb = 0;
    tsr_mem_reset_peak(tr->dev);
    int rc = tsr_onnx_load_opts(tr->path, tr->o.batch, &tr->o.place, &mi);
    if (!rc)
        rc = model_batch(mi, &mb);
    if (!rc)
        rc = tsr_onnx_prepare(mi, &tr->cfg, tr->dev, 0);
    st->infer_cycles = 0;
    for (int r0 = 0; !rc && r0 < tr->o.batch; r0 += mb) {
        tsr_tensor_free(&in), tsr_tensor_free(&out);
        rc = batch_input(x, r0, mb, &in);
        const uint64_t c0 = cycles_now(tr->dev);
        if (!rc)
            rc = tsr_onnx_run(mi, &in, &out);
        st->infer_cycles += cycles_now(tr->dev) - c0;
    }
    tsr_mem_usage_t u;
    tsr_mem_usage(tr->dev, &u);
    st->peak_infer = u.peak;
    /* the frozen layers' share: the report's rows of the nodes lowered before the trainable part */
    for (int i = 0; !rc && i < tsr_onnx_report_rows(mi); i++) {
        tsr_onnx_layer_t row;
        if (tsr_onnx_report_row(mi, i, &row))
            continue;
        for (int j = 0; j < tr->first; j++)
            if (tr->ls[j].device && tr->ls[j].node_index == row.node) {
                /* (the report is of the last run: each chunk's the same work) */
                st->infer_prefix_cycles += (uint64_t)row.cycles * (uint64_t)((tr->o.batch + mb - 1) / mb);
                break;
            }
    }
    tsr_tensor_free(&in);
    tsr_tensor_free(&out);
    tsr_onnx_free(mi);
    return rc;
}

/* The frozen prefix once per sample: the part's input of every sample, *feat malloc'd. */
static int features(tsr_trainer_t *tr, const tsr_tensor_t *x, uint8_t **feat, tsr_train_stats_t *st)
{
    const int B = tr->o.batch;
    const int64_t N = x->shape[0];
    tsr_onnx_t *mf = NULL;
    *feat = malloc((size_t)N * tr->feat_elems);
    if (!*feat)
        return tsr_err(TSR_ENOMEM, "out of memory");
    const double t0 = tsr_now_s();
    const uint64_t c0 = cycles_now(tr->dev);
    int mb = B;
    int rc = tsr_onnx_load_opts(tr->path, B, &tr->o.place, &mf);
    if (!rc)
        rc = model_batch(mf, &mb);
    if (!rc)
        rc = tsr_onnx_prepare(mf, &tr->cfg, tr->dev, TSR_ONNX_KEEP_ALL);
    const char *bname = tr->ls[tr->first].in_name;
    for (int64_t r0 = 0; r0 < N && !rc; r0 += mb) {
        tsr_tensor_t in = {0}, out = {0}, f = {0};
        rc = batch_input(x, r0, mb, &in);
        if (!rc)
            rc = tsr_onnx_run(mf, &in, &out);
        if (!rc)
            rc = tsr_onnx_read_value(mf, bname, &f);
        if (!rc && (size_t)tsr_tensor_numel(&f) != (size_t)mb * tr->feat_elems)
            rc = tsr_err(TSR_EINVAL, "%s: the trainable part's input \"%s\" has %zu values, expected %zu", tr->path,
                         TSR_SAFE(bname), (size_t)tsr_tensor_numel(&f), (size_t)mb * tr->feat_elems);
        if (!rc) {
            const int64_t nb = N - r0 < mb ? N - r0 : mb;
            memcpy(*feat + (size_t)r0 * tr->feat_elems, f.data, (size_t)nb * tr->feat_elems);
        }
        tsr_tensor_free(&in), tsr_tensor_free(&out), tsr_tensor_free(&f);
    }
    st->feat_cycles = cycles_now(tr->dev) - c0;
    st->feat_wall = tsr_now_s() - t0;
    tsr_onnx_free(mf);
    if (rc)
        return tsr_err_prefix(rc, "the frozen layers (inference before the trainable part): ");
    return 0;
}

/* One epoch's order: 0..N-1 shuffled by Fisher-Yates (j = splitmix64 mod (i + 1), i from N-1 down). */
static void epoch_order(int64_t n, uint64_t *state, int64_t *order)
{
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        const int64_t j = (int64_t)(tsr_splitmix64(state) % (uint64_t)(i + 1));
        const int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

int tsr_train_run(tsr_trainer_t *tr, const tsr_tensor_t *x, const tsr_tensor_t *y, tsr_train_stats_t *stats)
{
    tsr_train_stats_t local;
    tsr_train_stats_t *st = stats ? stats : &local;
    memset(st, 0, sizeof *st);
    int rc = tsr_train_check_data(tr, x, "data", y, "labels");
    if (rc)
        return rc;
    const int64_t N = x->shape[0];
    const int B = tr->o.batch;
    int32_t *lab = malloc(sizeof(int32_t) * (size_t)N), *blab = malloc(sizeof(int32_t) * (size_t)B);
    int64_t *order = malloc(sizeof(int64_t) * (size_t)N);
    uint8_t *feat = NULL;
    if (!lab || !blab || !order) {
        free(lab), free(blab), free(order);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    for (int64_t i = 0; i < N; i++)
        lab[i] = y->dtype == TSR_DT_INT32 ? ((const int32_t *)y->data)[i] : (int32_t)((const int64_t *)y->data)[i];
    rc = measure_inference(tr, x, st);
    /* each backward conv's device buffers at most the inference's high-water mark: with the kernel
       cache held, a step's peak stays within twice the inference's (the goal) */
    tr->dev_budget = st->peak_infer;
    if (!rc) {
        tsr_mem_reset_peak(tr->dev);
        rc = features(tr, x, &feat, st);
    }
    st->feat_bytes = (uint64_t)N * tr->feat_elems;
    for (int j = 0; j < tr->nc; j++)
        st->host_act_bytes += (uint64_t)B * tr->c[j].y_elems;
    st->host_act_bytes += (uint64_t)B * tr->feat_elems;
    tsr_mem_reset_peak(tr->dev);
    tsr_mem_usage_t u0;
    tsr_mem_usage(tr->dev, &u0);
    st->mem_held = u0.in_use;
    uint64_t state = tr->o.seed;
    for (int e = 0; e < tr->o.epochs && !rc; e++) {
        const double t0 = tsr_now_s();
        const uint64_t c0 = cycles_now(tr->dev);
        uint64_t sf = 0, sb = 0, su = 0, nfull = 0;
        double loss = 0;
        int64_t right = 0;
        epoch_order(N, &state, order);
        for (int64_t r0 = 0; r0 < N && !rc; r0 += B) {
            tr->nb = (int)(N - r0 < B ? N - r0 : B);
            for (int i = 0; i < tr->nb; i++) {
                memcpy(tr->x0 + (size_t)i * tr->feat_elems, feat + (size_t)order[r0 + i] * tr->feat_elems,
                       tr->feat_elems);
                blab[i] = lab[order[r0 + i]];
            }
            const uint64_t a = cycles_now(tr->dev);
            rc = tsr_train_forward(tr);
            const uint64_t b = cycles_now(tr->dev);
            double bl = 0;
            int br = 0;
            if (!rc)
                rc = tsr_train_backward(tr, blab, &bl, &br);
            const uint64_t c = cycles_now(tr->dev);
            if (!rc)
                rc = tsr_train_update(tr);
            const uint64_t d = cycles_now(tr->dev);
            loss += bl;
            right += br;
            if (tr->nb == B)
                sf += b - a, sb += c - b, su += d - c, nfull++;
        }
        if (!rc && tr->o.weight_stochastic && e == tr->o.epochs - 1) { /* the tuned file's weights: to nearest */
            tr->wround_final = 1;
            for (int j = 0; j < tr->nc && !rc; j++)
                if (tr->c[j].trainable)
                    rc = tsr_train_requantize(tr, &tr->c[j]);
        }
        if (rc)
            break;
        st->epochs = e + 1;
        st->loss[e] = loss / (double)N;
        st->accuracy[e] = (double)right / (double)N;
        st->epoch_cycles[e] = cycles_now(tr->dev) - c0;
        st->epoch_wall[e] = tsr_now_s() - t0;
        if (nfull) {
            st->step_fwd_cycles = sf / nfull;
            st->step_bwd_cycles = sb / nfull;
            st->step_cycles = st->step_fwd_cycles + st->step_bwd_cycles;
            st->upd_cycles = tr->o.device_update ? su / nfull : 0;
        }
        if (tr->o.progress) {
            fprintf(tr->o.progress, "epoch %d/%d: loss %.4f, accuracy on the training data %.2f%% (%lld of %lld), ",
                    e + 1, tr->o.epochs, st->loss[e], 100.0 * st->accuracy[e], (long long)right, (long long)N);
            if (st->epoch_cycles[e])
                fprintf(tr->o.progress, "device cycles %llu", (unsigned long long)st->epoch_cycles[e]);
            else
                fprintf(tr->o.progress, "device cycles - (untimed backend)");
            fprintf(tr->o.progress, ", %.2f s\n", st->epoch_wall[e]);
            fflush(tr->o.progress);
        }
    }
    tsr_mem_usage_t u;
    tsr_mem_usage(tr->dev, &u);
    st->peak_train = u.peak;
    st->bwd_device_macs = tr->gst.device_macs;
    st->bwd_host_macs = tr->gst.host_macs + tr->host_macs;
    st->fwd_device_macs = tr->fwd_macs;
    st->upd_n = tr->upd_n;
    st->upd_moved = tr->upd_moved;
    const tsr_dtype_e ydt = tr->c[tr->nc - 1].y_dtype;
    st->range_obs = tr->range_obs;
    st->range_moves = tr->range_moves;
    st->range_host_macs = tr->range_macs;
    st->loss_exact = tr->loss_exact;
    st->loss_host_macs = tr->loss_macs;
    st->range_lo0 = (float)(tsr_dt_min(ydt) - tr->out_zp0) * tr->out_scale0;
    st->range_hi0 = (float)(tsr_dt_max(ydt) - tr->out_zp0) * tr->out_scale0;
    st->range_lo = (float)(tsr_dt_min(ydt) - tr->out_zp) * tr->out_scale;
    st->range_hi = (float)(tsr_dt_max(ydt) - tr->out_zp) * tr->out_scale;
    free(lab), free(blab), free(order), free(feat);
    return rc;
}

/* ---------------------------------------------------------------- the tuned model */

int tsr_train_pack(const tsr_trainer_t *tr, uint8_t **buf, size_t *len)
{
    int n = 4; /* (the logits' scale and zero point, in the QuantizeLinear and the DequantizeLinear) */
    for (int j = 0; j < tr->nc; j++)
        n += tr->c[j].trainable ? 4 : 0;
    tsr_onnx_const_update_t *u = calloc((size_t)n + 1, sizeof *u);
    void **own = calloc((size_t)n + 1, sizeof *own);
    int k = 0, rc = 0;
    if (!u || !own)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    for (int j = 0; j < tr->nc && !rc; j++) {
        const trl_t *l = &tr->c[j];
        if (!l->trainable)
            continue;
        const size_t nw = (size_t)l->M * l->K;
        int8_t *w = malloc(nw);
        float *bs = malloc(sizeof(float) * (size_t)l->wc);
        own[k] = w, own[k + 1] = bs;
        if (!w || !bs) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            break;
        }
        if (l->L.w_transposed) /* the file's [K][M] */
            for (int m = 0; m < l->M; m++)
                for (int i = 0; i < l->K; i++)
                    w[(size_t)i * l->M + m] = l->wq[(size_t)m * l->K + i];
        else
            memcpy(w, l->wq, nw);
        for (int c = 0; c < l->wc; c++)
            bs[c] = l->L.x_scale * l->ws[c]; /* (float32, the product the importer and ORT form) */
        u[k++] = (tsr_onnx_const_update_t){l->L.w_name, w, nw};
        u[k++] = (tsr_onnx_const_update_t){l->L.ws_name, l->ws, sizeof(float) * (size_t)l->wc};
        if (l->has_bias && l->L.b_name) {
            u[k++] = (tsr_onnx_const_update_t){l->L.b_name, l->bq, sizeof(int32_t) * (size_t)l->M};
            u[k++] = (tsr_onnx_const_update_t){l->L.bs_name, bs, sizeof(float) * (size_t)l->wc};
        }
    }
    /* a range the observer moved: the output QuantizeLinear's and the DequantizeLinear's constants (one
       pair when they share it, as ONNX Runtime's quantizer writes them) */
    const trl_t *last = &tr->c[tr->nc - 1];
    const tsr_onnx_lowered_t *dq = &tr->ls[tr->dq];
    const uint8_t zp8 = (uint8_t)(tr->out_zp & 0xff); /* (the zero point's byte, uint8 or int8) */
    if (!rc && tr->range_moves) {
        u[k++] = (tsr_onnx_const_update_t){last->L.qs_name, &tr->out_scale, sizeof(float)};
        u[k++] = (tsr_onnx_const_update_t){last->L.qzp_name, &zp8, 1};
        if (strcmp(dq->qs_name, last->L.qs_name))
            u[k++] = (tsr_onnx_const_update_t){dq->qs_name, &tr->out_scale, sizeof(float)};
        if (strcmp(dq->qzp_name, last->L.qzp_name))
            u[k++] = (tsr_onnx_const_update_t){dq->qzp_name, &zp8, 1};
    }
    if (!rc)
        rc = tsr_onnx_pack_updated(tr->path, u, k, buf, len);
    for (int i = 0; own && i < n; i++)
        free(own[i]);
    free(own), free(u);
    return rc;
}

int tsr_train_write_file(const char *path, const uint8_t *buf, size_t len)
{
    if (tsr_file_is_special(path)) /* -o /dev/null: in place, a rename would replace the device */
        return tsr_file_write_special(path, buf, len, NULL, 0);
    const size_t pl = strlen(path);
    char *tmp = malloc(pl + 32);
    if (!tmp)
        return tsr_err(TSR_ENOMEM, "out of memory");
    /* the temporary file beside path: the rename stays in one file system, so it is atomic */
    snprintf(tmp, pl + 32, "%s.part.XXXXXX", path);
    const int fd = mkstemp(tmp);
    if (fd < 0) {
        const int e = errno;
        free(tmp);
        return tsr_err(TSR_EIO, "%s: cannot create a file beside it: %s", path, strerror(e));
    }
    int rc = 0;
    for (size_t off = 0; off < len && !rc;) {
        const ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = tsr_err(TSR_EIO, "%s: write failed: %s", path, strerror(errno));
        else
            off += (size_t)w;
    }
    if (!rc && fsync(fd))
        rc = tsr_err(TSR_EIO, "%s: write failed: %s", path, strerror(errno));
    if (close(fd) && !rc)
        rc = tsr_err(TSR_EIO, "%s: write failed: %s", path, strerror(errno));
    /* mkstemp's 0600 as a normal file's mode (umask applied) */
    const mode_t um = umask(0);
    umask(um);
    if (!rc && chmod(tmp, 0666 & ~um))
        rc = tsr_err(TSR_EIO, "%s: %s", path, strerror(errno));
    if (!rc && rename(tmp, path))
        rc = tsr_err(TSR_EIO, "%s: cannot replace it: %s", path, strerror(errno));
    if (rc)
        unlink(tmp);
    free(tmp);
    return rc;
}

/* ---------------------------------------------------------------- for tests */

int tsr_train_nlayers(const tsr_trainer_t *tr) { return tr->nc; }

int tsr_train_view(const tsr_trainer_t *tr, int j, tsr_train_view_t *v)
{
    if (j < 0 || j >= tr->nc)
        return tsr_err(TSR_EINVAL, "layer %d of %d", j, tr->nc);
    const trl_t *l = &tr->c[j];
    *v = (tsr_train_view_t){.L = &l->L, .trainable = l->trainable, .m = l->M, .k = l->K, .w = l->w, .b = l->b,
                            .gw = l->gw, .gb = l->gb, .s_dy = l->s_dy, .s_dx = l->s_dx,
                            .x = l->src[0] >= 0 ? tr->c[l->src[0]].y : tr->x0, .y = l->y, .src = {l->src[0], l->src[1]}, .n = tr->nb, .x_elems = l->x_elems,
                            .y_elems = l->y_elems, .x_zp = l->x_zp, .y_zp = l->y_zp, .act_min = l->act_min,
                            .act_max = l->act_max, .x_scale = l->L.x_scale, .y_scale = l->L.y_scale};
    return 0;
}

void tsr_train_logits_q(const tsr_trainer_t *tr, float *scale, int32_t *zp)
{
    *scale = tr->out_scale;
    *zp = tr->out_zp;
}

int tsr_train_grads(tsr_trainer_t *tr, const tsr_tensor_t *x, const tsr_tensor_t *y, int n, double *loss)
{
    if (n < 1 || n > tr->o.batch || n > x->shape[0])
        return tsr_err(TSR_EINVAL, "tsr_train_grads: %d samples (batch %d)", n, tr->o.batch);
    int rc = tsr_train_check_data(tr, x, "data", y, "labels");
    tsr_train_stats_t st;
    uint8_t *feat = NULL;
    int32_t lab[TSR_TRAIN_MAX_BATCH];
    if (!rc)
        rc = features(tr, x, &feat, &st);
    if (!rc) {
        tr->nb = n;
        memcpy(tr->x0, feat, (size_t)n * tr->feat_elems);
        for (int i = 0; i < n; i++)
            lab[i] = y->dtype == TSR_DT_INT32 ? ((const int32_t *)y->data)[i] : (int32_t)((const int64_t *)y->data)[i];
        rc = tsr_train_forward(tr);
    }
    int right;
    if (!rc)
        rc = tsr_train_backward(tr, lab, loss, &right);
    if (!rc)
        *loss /= n;
    free(feat);
    return rc;
}
