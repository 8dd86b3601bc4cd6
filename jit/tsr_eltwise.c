/*
 * tsr_eltwise: elementwise add and clip/relu (see tsr_eltwise.h for the
 * values, layouts, per-row work and the schedule): the parameter checks,
 * packing, the kernel-cache signature, the plan and the device-side API.
 * The lowering itself is in jit/eltwise/ (geometry, emitter, tiling), as
 * conv2d's is in jit/conv2d/.
 */
#include "tsr_eltwise.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_cost.h"
#include "tsr_dtype.h"
#include "tsr_eltwise_emit.h"
#include "tsr_eltwise_geo.h"
#include "tsr_eltwise_tiling.h"
#include "tsr_error.h"
#include "tsr_jitutil.h"
#include "tsr_opplan.h"
#include "tsr_requant.h"
#include "tsr_stream.h"

/* ------------------------------------------------------------ checks */

static int check_desc(const char *op, const char *what, const tsr_eltwise_desc_t *d, int64_t *count)
{
    if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1)
        return tsr_err(TSR_EINVAL, "%s: %s shape [%d, %d, %d, %d] must be positive", op, what, d->n, d->c, d->h,
                       d->w);
    int64_t n = (int64_t)d->n * d->c * d->h * d->w;
    if (n > INT32_MAX)
        return tsr_err(TSR_EINVAL, "%s: %s has %lld elements, more than 2^31 - 1", op, what, (long long)n);
    if (!tsr_dt_ok(d->dtype))
        return tsr_err(TSR_EINVAL, "%s: %s dtype %d must be int8 or uint8", op, what, (int)d->dtype);
    if (d->zp < tsr_dt_min(d->dtype) || d->zp > tsr_dt_max(d->dtype))
        return tsr_err(TSR_EINVAL, "%s: %s zero point %d outside [%d, %d] (%s)", op, what, d->zp,
                       tsr_dt_min(d->dtype), tsr_dt_max(d->dtype), tsr_dtype_name(d->dtype));
    *count = n;
    return TSR_OK;
}

static int same_shape(const char *op, const char *what, const tsr_eltwise_desc_t *d, const tsr_eltwise_desc_t *ref,
                      const char *refname)
{
    if (d->n != ref->n || d->c != ref->c || d->h != ref->h || d->w != ref->w)
        return tsr_err(TSR_EINVAL, "%s: %s shape [%d, %d, %d, %d] differs from %s shape [%d, %d, %d, %d] (no "
                       "broadcasting)", op, what, d->n, d->c, d->h, d->w, refname, ref->n, ref->c, ref->h, ref->w);
    return TSR_OK;
}

int tsr_add_check(const tsr_add_params_t *p, int64_t *count)
{
    const char *op = "add";
    int64_t n = 0, nb = 0, ny = 0;
    int rc;
    if (!p)
        return tsr_err(TSR_EINVAL, "add: NULL parameters");
    if ((rc = check_desc(op, "input a", &p->a, &n)) || (rc = check_desc(op, "input b", &p->b, &nb)) ||
        (rc = check_desc(op, "output", &p->y, &ny)) || (rc = same_shape(op, "input b", &p->b, &p->a, "input a")) ||
        (rc = same_shape(op, "output", &p->y, &p->a, "input a")))
        return rc;
    if (p->left_shift < 0 || p->left_shift > 22)
        return tsr_err(TSR_EINVAL, "add: left_shift %d outside [0, 22]", p->left_shift);
    const int32_t m[3] = {p->mult_a, p->mult_b, p->mult_out};
    const int s[3] = {p->shift_a, p->shift_b, p->shift_out}, smax[3] = {0, 0, 30};
    const char *nm[3] = {"input a", "input b", "output"};
    for (int i = 0; i < 3; i++) {
        if (m[i] < 0)
            return tsr_err(TSR_EINVAL, "add: %s multiplier %d is negative (range [0, 2^31 - 1])", nm[i], m[i]);
        if (s[i] < -31 || s[i] > smax[i])
            return tsr_err(TSR_EINVAL, "add: %s shift %d outside [-31, %d]", nm[i], s[i], smax[i]);
    }
    if (p->round_once && (p->mult_out != 1 << 30 || p->shift_out > 0 || p->shift_out < -30))
        return tsr_err(TSR_EINVAL, "add: round_once needs output multiplier 2^30 and shift in [-30, 0] (got %d, %d)",
                       p->mult_out, p->shift_out);
    if (p->bias_once && (!p->round_once || p->bias_once < -16383 || p->bias_once > 16383))
        return tsr_err(TSR_EINVAL, "add: bias_once %d needs round_once and |bias_once| <= 16383", p->bias_once);
    if (p->act_min > p->act_max || p->act_min < tsr_dt_min(p->y.dtype) || p->act_max > tsr_dt_max(p->y.dtype))
        return tsr_err(TSR_EINVAL, "add: activation range [%d, %d] is not a non-empty subrange of [%d, %d] (%s)",
                       p->act_min, p->act_max, tsr_dt_min(p->y.dtype), tsr_dt_max(p->y.dtype),
                       tsr_dtype_name(p->y.dtype));
    if (count)
        *count = n;
    return TSR_OK;
}

int tsr_clip_check(const tsr_clip_params_t *p, int64_t *count)
{
    const char *op = "clip";
    int64_t n = 0, ny = 0;
    int rc;
    if (!p)
        return tsr_err(TSR_EINVAL, "clip: NULL parameters");
    if ((rc = check_desc(op, "input", &p->x, &n)) || (rc = check_desc(op, "output", &p->y, &ny)) ||
        (rc = same_shape(op, "output", &p->y, &p->x, "input")))
        return rc;
    if (p->y.dtype != p->x.dtype || p->y.zp != p->x.zp)
        return tsr_err(TSR_EINVAL, "clip: output quantization (%s, zero point %d) differs from the input's (%s, "
                       "zero point %d): relu/clip do not rescale", tsr_dtype_name(p->y.dtype), p->y.zp,
                       tsr_dtype_name(p->x.dtype), p->x.zp);
    if (p->lo > p->hi || p->lo < tsr_dt_min(p->x.dtype) || p->hi > tsr_dt_max(p->x.dtype))
        return tsr_err(TSR_EINVAL, "clip: bounds [%d, %d] are not a non-empty subrange of [%d, %d] (%s)", p->lo,
                       p->hi, tsr_dt_min(p->x.dtype), tsr_dt_max(p->x.dtype), tsr_dtype_name(p->x.dtype));
    if (count)
        *count = n;
    return TSR_OK;
}

int tsr_relu_params(const tsr_eltwise_desc_t *x, tsr_clip_params_t *out)
{
    if (!x || !out)
        return tsr_err(TSR_EINVAL, "relu: NULL tensor description or output");
    int64_t n;
    int rc = check_desc("relu", "input", x, &n);
    if (rc)
        return rc;
    const tsr_eltwise_desc_t d = *x; /* x may point into *out */
    memset(out, 0, sizeof *out);
    out->x = d;
    out->y = d;
    out->lo = d.zp;
    out->hi = tsr_dt_max(d.dtype);
    return TSR_OK;
}

/* ---------------------------------------------------------------- packing */

static const tsr_eltwise_desc_t *input_desc(const tsr_eltwise_plan_t *pl, int which)
{
    if (pl->kind == TSR_ELTWISE_ADD)
        return which ? &pl->add.b : &pl->add.a;
    return &pl->clip.x;
}

void tsr_eltwise_pack_input(const tsr_config_t *c, const tsr_eltwise_plan_t *pl, int which, const void *x,
                            uint8_t *dst)
{
    const tsr_eltwise_desc_t *d = input_desc(pl, which);
    const int32_t off = tsr_dt_off(d->dtype);
    const int L = c->batch * c->block_out, BI = c->block_in, BO = c->block_out;
    memset(dst, (uint8_t)(int8_t)(d->zp - off), pl->x_bytes);
    const uint8_t *u = x;
    for (int64_t e = 0; e < pl->count; e++) {
        int64_t R = e / L;
        int l = (int)(e % L), bb = l / BO, o = l % BO;
        int64_t pos;
        if (pl->kr > 1 || BI == BO)
            pos = (R / pl->kr) * c->inp_bytes + bb * BI + (R % pl->kr) * BO + o;
        else
            pos = (R * pl->ki + o / BI) * c->inp_bytes + bb * BI + o % BI;
        int32_t v = d->dtype == TSR_DT_UINT8 ? (int32_t)u[e] : (int32_t)(int8_t)u[e];
        dst[pos] = (uint8_t)(int8_t)(v - off);
    }
}

static void pack_weights(const tsr_config_t *c, const geo_t *g, uint8_t *w)
{
    const int BI = c->block_in, BO = c->block_out;
    memset(w, 0, (size_t)wgt_rows(g) * c->wgt_bytes);
    for (int k = 0; k < wgt_rows(g); k++)
        for (int o = 0; o < BO; o++)
            for (int i = 0; i < BI; i++) {
                int kk = k % g->kw, on = g->kr > 1 || BI == BO ? i == kk * BO + o : o == kk * BI + i;
                if (on)
                    w[(size_t)k * c->wgt_bytes + (size_t)o * BI + i] = (uint8_t)(int8_t)g->wv[k / g->kw];
            }
}

void tsr_add_const_values(const tsr_add_params_t *pa, int32_t v[TSR_ADD_NCONST])
{
    /* round_once: the rqfin shift takes mult_out's 2^-1 too (no mulhr runs) */
    const int32_t rs = pa->round_once ? 1 - pa->shift_out : pa->shift_out < 0 ? -pa->shift_out : 0;
    const int32_t fin = tsr_requant_rqfin(rs, pa->y.zp, pa->act_min, pa->act_max);
    v[0] = pa->mult_a;
    v[1] = pa->mult_b;
    v[2] = pa->mult_out;
    v[3] = fin;
}

static void pack_consts(const tsr_config_t *c, const geo_t *g, uint8_t *dst)
{
    int32_t v[TSR_ADD_NCONST];
    tsr_add_const_values(g->pa, v);
    for (int k = 0; k < g->nconst; k++)
        for (int l = 0; l < g->lanes; l++) {
            uint32_t u = (uint32_t)v[k];
            for (int j = 0; j < 4; j++)
                dst[(size_t)k * c->acc_bytes + (size_t)l * 4 + j] = (uint8_t)(u >> (8 * j));
        }
}

/* ------------------------------------------------------------------ plan */

static void plan_free(tsr_device_t *dev, tsr_eltwise_plan_t *pl)
{
    uint64_t *bufs[5] = {&pl->w_addr, &pl->c_addr, &pl->x_addr[0], &pl->x_addr[1], &pl->y_addr};
    for (int i = 0; i < 5; i++)
        if (*bufs[i] && (pl->io_owned || i < 2)) /* tensors' buffers belong to the tensors, uops to the cache */
            tsr_mem_free(dev, *bufs[i]);
    tsr_kcache_release(pl->kref);
    free(pl->insns);
    memset(pl, 0, sizeof *pl);
}

#define GEN_ID "eltwise lowering v1, built " __DATE__ " " __TIME__

/* The kernel cache signature: the kind and every parameter (all of them
 * reach the stream, its tiling or the fast-path choice; multipliers only
 * reach constant rows but decide the power-of-two path). */
static size_t eltwise_sig(tsr_eltwise_kind_e kind, const tsr_add_params_t *pa, const tsr_clip_params_t *pc,
                          uint8_t *sig)
{
    size_t n = tsr_kcache_sig_bytes(sig, 0, GEN_ID, sizeof GEN_ID);
    /* the units that shape the kernel are built separately: each one's identity */
    const char *id[5] = {tsr_eltwise_geo_id(), tsr_eltwise_emit_id(), tsr_eltwise_tiling_id(), tsr_cost_id(),
                         tsr_stream_id()};
    for (int i = 0; i < 5; i++)
        n = tsr_kcache_sig_bytes(sig, n, id[i], strlen(id[i]) + 1);
    n = tsr_kcache_sig_i32(sig, n, (int32_t)kind);
    const tsr_eltwise_desc_t *d[3] = {kind == TSR_ELTWISE_ADD ? &pa->a : &pc->x, kind == TSR_ELTWISE_ADD ? &pa->b : NULL,
                                      kind == TSR_ELTWISE_ADD ? &pa->y : &pc->y};
    for (int k = 0; k < 3; k++)
        if (d[k]) {
            const int32_t v[6] = {d[k]->n, d[k]->c, d[k]->h, d[k]->w, (int32_t)d[k]->dtype, d[k]->zp};
            for (int i = 0; i < 6; i++)
                n = tsr_kcache_sig_i32(sig, n, v[i]);
        }
    if (kind == TSR_ELTWISE_ADD) {
        const int32_t v[11] = {pa->left_shift, pa->mult_a,    pa->mult_b,  pa->shift_a,  pa->shift_b,
                               pa->mult_out,   pa->shift_out, pa->act_min, pa->act_max, pa->round_once,
                               pa->bias_once};
        for (int i = 0; i < 11; i++)
            n = tsr_kcache_sig_i32(sig, n, v[i]);
    } else {
        n = tsr_kcache_sig_i32(sig, n, pc->lo);
        n = tsr_kcache_sig_i32(sig, n, pc->hi);
    }
    return n;
}

/* The lowering-specific part of a cached kernel, followed by the slot map
 * (one byte per instruction: 1 for LOADs of input b, else 0). */
typedef struct {
    int32_t T, nbuf, linear; /* tile rows, buffers, power-of-two path */
    int32_t nuops;           /* uops in the kernel buffer */
    double est;              /* the cost model's estimate */
} elt_meta_t;

/* Slot 1 (input b) is built at this element offset and moved to its own
 * offset space afterwards (relocatable streams count from 0 per slot). */
#define SLOT1_MARK 0x80000000u

/* Choose the tiling (with the power-of-two path when it fits), build the
 * relocatable stream and the uops, and insert them into kc. */
static int generate(tsr_kcache_t *kc, geo_t *g, tsr_eltwise_kind_e kind, const tsr_add_params_t *pa,
                    const tsr_clip_params_t *pc, const uint8_t *sig, size_t sig_len, tsr_kcache_ref_t **ref)
{
    const uint64_t t0 = tsr_mono_ns();
    const tsr_config_t *c = g->c;
    const char *op = tsr_eltwise_op_name(kind);
    int rc;
    if (g->linear && tsr_eltwise_choose_tiling(g)) {
        tsr_err_clear();
        const tsr_add_params_t *keep = g->pa;
        if ((rc = tsr_eltwise_geo_init(c, kind, pa, pc, 0, g)))
            return rc;
        g->pa = keep;
    }
    if ((rc = tsr_eltwise_choose_tiling(g)))
        return rc;
    uint8_t *uops = NULL, *meta = NULL;
    tsr_stream_t b;
    tsr_stream_init(&b, c, 0, 0);
    g->uop_el = g->w_el = g->c_el = g->y_el = g->x_el[0] = 0;
    g->x_el[1] = SLOT1_MARK;
    tsr_eltwise_build(g, &b);
    if ((rc = tsr_stream_finish(&b)))
        goto out;
    meta = calloc(1, sizeof(elt_meta_t) + b.n + 1);
    if (!meta) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    uint8_t *slot = meta + sizeof(elt_meta_t);
    for (size_t i = 0; i < b.n; i++)
        if (b.v[i].opcode == TSR_OP_LOAD && b.v[i].mem_type == TSR_MEM_INP && b.v[i].dram_base >= SLOT1_MARK) {
            b.v[i].dram_base -= SLOT1_MARK;
            slot[i] = 1;
        }
    if ((rc = tsr_stream_check(&b, op)))
        goto out;
    if ((rc = tsr_eltwise_encode_uops(g, &uops)))
        goto out;
    elt_meta_t m = {g->T, g->nbuf, g->linear, n_uops(g), tsr_eltwise_cost(g, g->T, g->nbuf)};
    memcpy(meta, &m, sizeof m);
    tsr_kernel_t k = {meta, sizeof m + b.n, b.v, b.n, uops, (size_t)n_uops(g), tsr_mono_ns() - t0};
    rc = tsr_kcache_insert(kc, sig, sig_len, &k, ref);
out:
    tsr_stream_free(&b);
    free(meta);
    free(uops);
    return rc;
}

/* ext: NULL (the plan allocates its inputs and output) or the device
 * tensors to read (ext[0], ext[1] for add's b) and write (ext[2]). */
/* tsr_kcache_fetch's callbacks: a cached kernel is kept if its tiling
 * still fits (the signature makes this always true), adopting it (and the
 * general path, if it was generated on that one). */
typedef struct {
    geo_t *g;
    tsr_eltwise_kind_e kind;
    const tsr_add_params_t *pa;
    const tsr_clip_params_t *pc;
    const uint8_t *sig;
    size_t sig_len;
} elt_kctx_t;

static int kernel_fits(const tsr_kernel_t *k, void *ctx)
{
    elt_kctx_t *x = ctx;
    geo_t *g = x->g;
    elt_meta_t m;
    if (k->meta_len != sizeof m + k->ninsns)
        return 0;
    memcpy(&m, k->meta, sizeof m);
    if (!m.linear && g->linear) { /* generated on the general path */
        const tsr_add_params_t *keep = g->pa;
        int rc = tsr_eltwise_geo_init(g->c, x->kind, x->pa, x->pc, 0, g);
        if (rc)
            return rc;
        g->pa = keep;
    }
    if (m.linear != g->linear || !tsr_eltwise_tiling_fits(g, m.T, m.nbuf))
        return 0;
    tsr_eltwise_set_tiling(g, m.T, m.nbuf);
    return m.nuops == n_uops(g) && k->nuops == (size_t)n_uops(g);
}

static int kernel_gen(tsr_kcache_t *kc, void *ctx, tsr_kcache_ref_t **ref)
{
    elt_kctx_t *x = ctx;
    return generate(kc, x->g, x->kind, x->pa, x->pc, x->sig, x->sig_len, ref);
}

/* The plan's figures from its geometry (tiling adopted or chosen). */
static void plan_fields(const tsr_config_t *c, const geo_t *g, tsr_eltwise_plan_t *pl)
{
    pl->inputs = g->inputs;
    pl->count = g->count;
    pl->rows = g->rows;
    pl->inp_rows = g->inp_rows;
    pl->kr = g->kr;
    pl->ki = g->ki;
    pl->tile_rows = g->T;
    pl->tiles = g->tiles;
    pl->nbuf = g->nbuf;
    pl->nconst = g->nconst;
    pl->ops_per_row = g->ops_per_row;
    pl->linear = g->linear;
    pl->x_bytes = (uint64_t)g->inp_rows * c->inp_bytes;
    pl->y_bytes = (uint64_t)g->rows * c->out_bytes;
    pl->w_bytes = (uint64_t)wgt_rows(g) * c->wgt_bytes;
    pl->c_bytes = (uint64_t)g->nconst * c->acc_bytes;
}

/* The identity weight blocks and (add) the constant rows, to the plan's buffers. */
static int write_consts(tsr_device_t *dev, const geo_t *g, tsr_eltwise_plan_t *pl)
{
    const tsr_config_t *c = g->c;
    uint8_t *wb = malloc(pl->w_bytes), *cb = malloc(pl->c_bytes ? pl->c_bytes : 1);
    int rc = TSR_OK;
    if (!wb || !cb)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc) {
        pack_weights(c, g, wb);
        rc = tsr_mem_write(dev, pl->w_addr, wb, pl->w_bytes);
    }
    if (!rc && g->nconst) {
        pack_consts(c, g, cb);
        rc = tsr_mem_write(dev, pl->c_addr, cb, pl->c_bytes);
    }
    free(wb);
    free(cb);
    return rc;
}

/* This plan's stream: the kernel's, relocated by slot (a, b) to its
 * buffers (checked field by field when generated; relocation checks
 * dram_base) */
static int plan_bind(const tsr_config_t *c, const char *op, const uint8_t *slot, tsr_eltwise_plan_t *pl)
{
    uint64_t base[2][TSR_MEM_COUNT] = {{0}};
    base[0][TSR_MEM_UOP] = pl->uop_addr;
    base[0][TSR_MEM_INP] = pl->x_addr[0];
    base[0][TSR_MEM_WGT] = pl->w_addr;
    base[0][TSR_MEM_ACC] = pl->c_addr;
    base[0][TSR_MEM_OUT] = pl->y_addr;
    memcpy(base[1], base[0], sizeof base[0]);
    base[1][TSR_MEM_INP] = pl->x_addr[1];
    tsr_opplan_stream_t st;
    int rc = tsr_opplan_bind(c, op, pl->kref, slot, 2, (const uint64_t(*)[TSR_MEM_COUNT])base, 0, &st);
    return tsr_opplan_take(rc, &st, &pl->insns, &pl->ninsns, &pl->gemm_ops, &pl->alu_ops, &pl->dram_bytes);
}

static int plan_common(tsr_device_t *dev, tsr_eltwise_kind_e kind, const tsr_add_params_t *pa,
                       const tsr_clip_params_t *pc, const tsr_dtensor_t *const *ext, tsr_eltwise_plan_t *pl)
{
    const char *op = tsr_eltwise_op_name(kind);
    if (!pl)
        return tsr_err(TSR_EINVAL, "%s: NULL plan", op);
    memset(pl, 0, sizeof *pl);
    if (!dev)
        return tsr_err(TSR_EINVAL, "%s: NULL device", op);
    const tsr_config_t *c = tsr_device_config(dev);
    geo_t g;
    int rc = tsr_eltwise_geo_init(c, kind, pa, pc, 1, &g);
    if (rc)
        return rc;
    pl->kind = kind;
    if (kind == TSR_ELTWISE_ADD) {
        pl->add = *pa;
        g.pa = &pl->add;
    } else {
        pl->clip = *pc;
        g.pc = &pl->clip;
    }
    /* the kernel (tiling, relocatable stream with its slot map, uops): from
     * the device's cache, else generated and inserted */
    uint8_t sig[512];
    const size_t sig_len = eltwise_sig(kind, pa, pc, sig);
    elt_kctx_t kx = {&g, kind, pa, pc, sig, sig_len};
    const tsr_opplan_kernel_t kk = {sig, sig_len, kernel_fits, kernel_gen, &kx};
    if ((rc = tsr_opplan_fetch(dev, &kk, &pl->kref, &pl->kcache)))
        goto fail;
    const tsr_kernel_t *kern = tsr_kcache_kernel(pl->kref);
    elt_meta_t kmeta;
    memcpy(&kmeta, kern->meta, sizeof kmeta);
    const uint8_t *slot = (const uint8_t *)kern->meta + sizeof kmeta;
    plan_fields(c, &g, pl);
    pl->est_cycles = kmeta.est;
    pl->io_owned = !ext;
    const int two = g.inputs == 2;
    const tsr_opbuf_t bufs[] = {{pl->x_bytes, ext ? ext[0] : NULL, &pl->x_addr[0]},
                                {two ? pl->x_bytes : 0, ext && two ? ext[1] : NULL, &pl->x_addr[1]},
                                {pl->y_bytes, ext ? ext[2] : NULL, &pl->y_addr},
                                {pl->w_bytes, NULL, &pl->w_addr},
                                {pl->c_bytes, NULL, &pl->c_addr}};
    if ((rc = tsr_opplan_buffers(dev, op, bufs, 5)))
        goto fail;
    pl->nuops = kern->nuops;
    pl->uop_addr = tsr_kcache_uop_addr(pl->kref); /* owned by the cache entry */
    if ((rc = write_consts(dev, &g, pl)))
        goto fail;
    if ((rc = plan_bind(c, op, slot, pl)))
        goto fail;
    return TSR_OK;
fail:
    plan_free(dev, pl);
    return rc;
}

int tsr_add_plan(tsr_device_t *dev, const tsr_add_params_t *p, tsr_eltwise_plan_t *plan)
{
    return plan_common(dev, TSR_ELTWISE_ADD, p, NULL, NULL, plan);
}

int tsr_clip_plan(tsr_device_t *dev, const tsr_clip_params_t *p, tsr_eltwise_plan_t *plan)
{
    return plan_common(dev, TSR_ELTWISE_CLIP, NULL, p, NULL, plan);
}

void tsr_add_params_device_view(const tsr_add_params_t *p, tsr_add_params_t *v)
{
    *v = *p;
    tsr_eltwise_desc_t *d[3] = {&v->a, &v->b, &v->y};
    for (int i = 0; i < 3; i++) {
        d[i]->zp -= tsr_dtensor_off(d[i]->dtype);
        d[i]->dtype = TSR_DT_INT8;
    }
    const int yo = tsr_dtensor_off(p->y.dtype);
    v->act_min -= yo;
    v->act_max -= yo;
}

/* The device view of tensor t as a flat elementwise operand: all its rows
 * (padded lanes included: elementwise, they only meet padded lanes) as
 * int8 values with zero point zp - off. */
static int flat_view(const char *op, const char *what, const tsr_eltwise_desc_t *d, const tsr_dtensor_t *t,
                     tsr_eltwise_desc_t *v)
{
    if (!t || !t->addr)
        return tsr_err(TSR_EINVAL, "%s: NULL %s tensor or one without a buffer", op, what);
    if (t->n != d->n || t->c != d->c || t->h != d->h || t->w != d->w || t->dtype != d->dtype || t->zp != d->zp)
        return tsr_err(TSR_EINVAL, "%s: %s tensor [%d,%d,%d,%d] zp %d does not match the parameters [%d,%d,%d,%d] "
                       "zp %d (or its dtype differs)",
                       op, what, t->n, t->c, t->h, t->w, (int)t->zp, d->n, d->c, d->h, d->w, (int)d->zp);
    uint64_t lanes = (uint64_t)t->batch * (uint64_t)t->block;
    if (t->bytes / lanes > INT32_MAX || t->bytes > INT32_MAX)
        return tsr_err(TSR_EINVAL, "%s: %s tensor too large", op, what);
    v->n = (int)(t->bytes / lanes);
    v->c = (int)lanes;
    v->h = v->w = 1;
    v->dtype = TSR_DT_INT8;
    v->zp = t->zp - tsr_dtensor_off(t->dtype);
    return TSR_OK;
}

int tsr_add_plan_tensors(tsr_device_t *dev, const tsr_add_params_t *p, const tsr_dtensor_t *a,
                         const tsr_dtensor_t *b, const tsr_dtensor_t *y, tsr_eltwise_plan_t *plan)
{
    if (plan)
        memset(plan, 0, sizeof *plan);
    if (!p)
        return tsr_err(TSR_EINVAL, "add: NULL parameters");
    int64_t count;
    int rc = tsr_add_check(p, &count);
    if (rc)
        return rc;
    tsr_add_params_t v;
    tsr_add_params_device_view(p, &v);
    if ((rc = flat_view("add", "a", &p->a, a, &v.a)) || (rc = flat_view("add", "b", &p->b, b, &v.b)) ||
        (rc = flat_view("add", "output", &p->y, y, &v.y)))
        return rc;
    const tsr_dtensor_t *ext[3] = {a, b, y};
    return plan_common(dev, TSR_ELTWISE_ADD, &v, NULL, ext, plan);
}

int tsr_clip_plan_tensors(tsr_device_t *dev, const tsr_clip_params_t *p, const tsr_dtensor_t *x,
                          const tsr_dtensor_t *y, tsr_eltwise_plan_t *plan)
{
    if (plan)
        memset(plan, 0, sizeof *plan);
    if (!p)
        return tsr_err(TSR_EINVAL, "clip: NULL parameters");
    int64_t count;
    int rc = tsr_clip_check(p, &count);
    if (rc)
        return rc;
    tsr_clip_params_t v = *p;
    if ((rc = flat_view("clip", "input", &p->x, x, &v.x)) || (rc = flat_view("clip", "output", &p->y, y, &v.y)))
        return rc;
    const int off = tsr_dtensor_off(p->x.dtype);
    v.lo -= off;
    v.hi -= off;
    const tsr_dtensor_t *ext[3] = {x, NULL, y};
    return plan_common(dev, TSR_ELTWISE_CLIP, NULL, &v, ext, plan);
}

void tsr_add_plan_free(tsr_device_t *dev, tsr_eltwise_plan_t *plan)
{
    if (plan)
        plan_free(dev, plan);
}

void tsr_clip_plan_free(tsr_device_t *dev, tsr_eltwise_plan_t *plan)
{
    if (plan)
        plan_free(dev, plan);
}

/* ------------------------------------------------------------- execution */

static int check_plan(const char *fn, const tsr_eltwise_plan_t *pl, tsr_eltwise_kind_e kind)
{
    if (!pl || pl->kind != kind || !pl->insns)
        return tsr_err(TSR_EINVAL, "%s: %s", fn,
                       !pl ? "NULL plan" : !pl->insns ? "plan not built (or freed)" : "plan is of the other operator");
    return TSR_OK;
}

static int write_input(tsr_device_t *dev, const tsr_eltwise_plan_t *pl, int which, const void *x)
{
    uint8_t *buf = malloc(pl->x_bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    tsr_eltwise_pack_input(tsr_device_config(dev), pl, which, x, buf);
    int rc = tsr_mem_write(dev, pl->x_addr[which], buf, pl->x_bytes);
    free(buf);
    return rc;
}

int tsr_add_write_inputs(tsr_device_t *dev, const tsr_eltwise_plan_t *pl, const void *a, const void *b)
{
    int rc = check_plan("tsr_add_write_inputs", pl, TSR_ELTWISE_ADD);
    if (rc)
        return rc;
    if (!a || !b)
        return tsr_err(TSR_EINVAL, "add: NULL input data");
    if (!(rc = write_input(dev, pl, 0, a)))
        rc = write_input(dev, pl, 1, b);
    return rc;
}

int tsr_clip_write_input(tsr_device_t *dev, const tsr_eltwise_plan_t *pl, const void *x)
{
    int rc = check_plan("tsr_clip_write_input", pl, TSR_ELTWISE_CLIP);
    if (rc)
        return rc;
    if (!x)
        return tsr_err(TSR_EINVAL, "clip: NULL input data");
    return write_input(dev, pl, 0, x);
}

static int exec_plan(tsr_device_t *dev, const tsr_eltwise_plan_t *pl)
{
    int rc = tsr_submit(dev, pl->insns, pl->ninsns);
    if (!rc)
        rc = tsr_wait(dev, -1);
    return rc;
}

int tsr_add_exec(tsr_device_t *dev, const tsr_eltwise_plan_t *pl)
{
    int rc = check_plan("tsr_add_exec", pl, TSR_ELTWISE_ADD);
    return rc ? rc : exec_plan(dev, pl);
}

int tsr_clip_exec(tsr_device_t *dev, const tsr_eltwise_plan_t *pl)
{
    int rc = check_plan("tsr_clip_exec", pl, TSR_ELTWISE_CLIP);
    return rc ? rc : exec_plan(dev, pl);
}

/* The output rows are the flat vector: its first count bytes are y (STORE
 * keeps the low 8 bits, which are the int8 or uint8 value). */
static int read_output(tsr_device_t *dev, const tsr_eltwise_plan_t *pl, void *y)
{
    if (!y)
        return tsr_err(TSR_EINVAL, "%s: NULL output data", tsr_eltwise_op_name(pl->kind));
    return tsr_mem_read(dev, pl->y_addr, y, (uint64_t)pl->count);
}

int tsr_add_read_output(tsr_device_t *dev, const tsr_eltwise_plan_t *pl, void *y)
{
    int rc = check_plan("tsr_add_read_output", pl, TSR_ELTWISE_ADD);
    return rc ? rc : read_output(dev, pl, y);
}

int tsr_clip_read_output(tsr_device_t *dev, const tsr_eltwise_plan_t *pl, void *y)
{
    int rc = check_plan("tsr_clip_read_output", pl, TSR_ELTWISE_CLIP);
    return rc ? rc : read_output(dev, pl, y);
}

int tsr_add_run(tsr_device_t *dev, const tsr_add_params_t *p, const void *a, const void *b, void *y)
{
    if (!a || !b || !y)
        return tsr_err(TSR_EINVAL, "add: NULL input or output data");
    tsr_eltwise_plan_t pl;
    int rc = tsr_add_plan(dev, p, &pl);
    if (rc)
        return rc;
    if (!(rc = tsr_add_write_inputs(dev, &pl, a, b)) && !(rc = tsr_add_exec(dev, &pl)))
        rc = tsr_add_read_output(dev, &pl, y);
    tsr_add_plan_free(dev, &pl);
    return rc;
}

int tsr_clip_run(tsr_device_t *dev, const tsr_clip_params_t *p, const void *x, void *y)
{
    if (!x || !y)
        return tsr_err(TSR_EINVAL, "clip: NULL input or output data");
    tsr_eltwise_plan_t pl;
    int rc = tsr_clip_plan(dev, p, &pl);
    if (rc)
        return rc;
    if (!(rc = tsr_clip_write_input(dev, &pl, x)) && !(rc = tsr_clip_exec(dev, &pl)))
        rc = tsr_clip_read_output(dev, &pl, y);
    tsr_clip_plan_free(dev, &pl);
    return rc;
}

int tsr_relu_run(tsr_device_t *dev, const tsr_eltwise_desc_t *x, const void *xd, void *y)
{
    tsr_clip_params_t p;
    int rc = tsr_relu_params(x, &p);
    return rc ? rc : tsr_clip_run(dev, &p, xd, y);
}
