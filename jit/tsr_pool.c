/*
 * tsr_pool: quantized max / average / global average pool lowering (see
 * tsr_pool.h for the data path, the division proof, the layouts and the
 * schedule): the parameter check, packing, the kernel-cache signature,
 * the plan and the device-side API. The lowering itself is in jit/pool/
 * (geometry, emitter, tiling), as conv2d's is in jit/conv2d/.
 */
#include "tsr_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_cost.h"
#include "tsr_dtype.h"
#include "tsr_error.h"
#include "tsr_jitutil.h"
#include "tsr_opplan.h"
#include "tsr_pool_emit.h"
#include "tsr_pool_geo.h"
#include "tsr_pool_tiling.h"
#include "tsr_stream.h"

int tsr_pool_check(const tsr_pool_params_t *p, int *oh, int *ow)
{
    if (!p)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters");
    if (p->kind != TSR_POOL_MAX && p->kind != TSR_POOL_AVG && p->kind != TSR_POOL_GLOBAL_AVG)
        return tsr_err(TSR_EINVAL, OP ": kind %d is not TSR_POOL_MAX, TSR_POOL_AVG or TSR_POOL_GLOBAL_AVG",
                       (int)p->kind);
    const char *k = tsr_pool_kind_name(p->kind);
    if (p->n < 1 || p->c < 1 || p->h < 1 || p->w < 1)
        return tsr_err(TSR_EINVAL, OP ": %s: input shape [%d, %d, %d, %d] must be positive", k, p->n, p->c, p->h,
                       p->w);
    if (!tsr_dt_ok(p->dtype))
        return tsr_err(TSR_EINVAL, OP ": %s: dtype %d must be int8 or uint8", k, (int)p->dtype);
    if (p->zp < tsr_dt_min(p->dtype) || p->zp > tsr_dt_max(p->dtype))
        return tsr_err(TSR_EINVAL, OP ": %s: zero point %d outside [%d, %d]", k, p->zp, tsr_dt_min(p->dtype),
                       tsr_dt_max(p->dtype));
    if ((int64_t)p->n * p->c * p->h * p->w > INT32_MAX)
        return tsr_err(TSR_EINVAL, OP ": %s: tensor too large (more than 2^31 - 1 elements)", k);
    if (p->kind == TSR_POOL_GLOBAL_AVG) {
        if (oh)
            *oh = 1;
        if (ow)
            *ow = 1;
        return TSR_OK;
    }
    if (p->kh < 1 || p->kw < 1)
        return tsr_err(TSR_EINVAL, OP ": %s: kernel %dx%d must be at least 1x1", k, p->kh, p->kw);
    if (p->stride_h < 1 || p->stride_w < 1)
        return tsr_err(TSR_EINVAL, OP ": %s: strides (%d, %d) must be >= 1", k, p->stride_h, p->stride_w);
    const int pads[4] = {p->pad_top, p->pad_left, p->pad_bottom, p->pad_right};
    const int kern[4] = {p->kh, p->kw, p->kh, p->kw};
    const char *pn[4] = {"top", "left", "bottom", "right"};
    for (int i = 0; i < 4; i++) {
        if (pads[i] < 0 || pads[i] >= kern[i])
            return tsr_err(TSR_EINVAL, OP ": %s: %s padding %d must be >= 0 and smaller than the kernel (%d)", k,
                           pn[i], pads[i], kern[i]);
        if (pads[i] > 15)
            return tsr_err(TSR_EINVAL, OP ": %s: %s padding %d is more than 15 (the LOAD pad fields are 4 bits)", k,
                           pn[i], pads[i]);
    }
    if (p->kind == TSR_POOL_AVG && p->count_include_pad != 0 && p->count_include_pad != 1)
        return tsr_err(TSR_EINVAL, OP ": %s: count_include_pad %d is not 0 or 1", k, p->count_include_pad);
    if (p->round_even != 0 && p->round_even != 1)
        return tsr_err(TSR_EINVAL, OP ": %s: round_even %d is not 0 or 1", k, p->round_even);
    int64_t sh = (int64_t)p->h + p->pad_top + p->pad_bottom - p->kh;
    int64_t sw = (int64_t)p->w + p->pad_left + p->pad_right - p->kw;
    if (sh < 0 || sw < 0)
        return tsr_err(TSR_EINVAL, OP ": %s: kernel %dx%d larger than the padded input %lldx%lld", k, p->kh, p->kw,
                       (long long)sh + p->kh, (long long)sw + p->kw);
    if (oh)
        *oh = (int)(sh / p->stride_h + 1);
    if (ow)
        *ow = (int)(sw / p->stride_w + 1);
    return TSR_OK;
}

/* ------------------------------------------------------------- packing */

static uint64_t x_elems(const geo_t *g) { return (uint64_t)g->nb * g->cb * g->p->h * g->p->w; }
static uint64_t y_elems(const geo_t *g) { return (uint64_t)g->nb * g->cb * g->oh * g->ow; }
static uint64_t c_elems(const geo_t *g)
{
    return (uint64_t)g->nconst + (g->use_map ? (uint64_t)g->n_rt * g->t.toh * g->ow : 0); /* map: full OW rows */
}

void tsr_pool_pack_input(const tsr_config_t *c, const tsr_pool_plan_t *pl, const void *x, uint8_t *dst)
{
    (void)c;
    tsr_dtensor_pack(&pl->xt, x, dst);
}

void tsr_pool_unpack_output(const tsr_config_t *c, const tsr_pool_plan_t *pl, const uint8_t *src, void *y)
{
    (void)c;
    tsr_dtensor_unpack(&pl->yt, src, y);
}

/* Constant rows (every lane the same value) and the identity weight. */
static int write_consts(tsr_device_t *dev, const geo_t *g, tsr_pool_plan_t *pl)
{
    const tsr_config_t *c = g->c;
    int rc = TSR_OK;
    if (pl->c_bytes) {
        uint64_t rows = c_elems(g);
        uint8_t *buf = calloc(rows, c->acc_bytes);
        if (!buf)
            return tsr_err(TSR_ENOMEM, "out of memory");
        for (uint64_t r = 0; r < rows; r++) {
            int32_t v;
            if (r == 0)
                v = g->kk * g->off;
            else if (r < (uint64_t)g->nconst)
                v = g->mults[0];
            else {
                uint64_t m = r - (uint64_t)g->nconst;
                int oy = (int)(m / (uint64_t)g->ow), ox = (int)(m % (uint64_t)g->ow);
                /* rows past OH (last tile) repeat the interior pattern */
                int ci = 0;
                if (oy < g->oh)
                    ci = tsr_pool_count_index(g, oy, ox);
                else {
                    int cnt = g->p->kh * g->hcount[ox];
                    for (int i = 0; i < g->ncounts; i++)
                        if (g->counts[i] == cnt)
                            ci = i;
                }
                v = g->mults[ci];
            }
            for (uint32_t l = 0; l < c->acc_bytes / 4; l++)
                for (int j = 0; j < 4; j++)
                    buf[r * c->acc_bytes + l * 4 + j] = (uint8_t)((uint32_t)v >> (8 * j));
        }
        rc = tsr_mem_write(dev, pl->c_addr, buf, rows * c->acc_bytes);
        free(buf);
        if (rc)
            return rc;
    }
    uint8_t *w = calloc(1, c->wgt_bytes);
    if (!w)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int o = 0; o < c->block_out; o++)
        w[(size_t)o * c->block_in + (size_t)o] = 1;
    rc = tsr_mem_write(dev, pl->w_addr, w, c->wgt_bytes);
    free(w);
    return rc;
}

#define GEN_ID OP " lowering v1, built " __DATE__ " " __TIME__

/* The kernel cache signature: every parameter (they all shape the stream,
 * the uops or the tiling), the output re-centring and the division's kind
 * (round_even's fscale depends on the config's EXACT_REQUANT, which the
 * cache's config hash does not hold). */
static size_t pool_sig(const tsr_pool_params_t *p, int y_off, int div_kind, uint8_t *sig)
{
    size_t n = tsr_kcache_sig_bytes(sig, 0, GEN_ID, sizeof GEN_ID);
    /* the units that shape the kernel are built separately: each one's identity */
    const char *id[5] = {tsr_pool_geo_id(), tsr_pool_emit_id(), tsr_pool_tiling_id(), tsr_cost_id(), tsr_stream_id()};
    for (int i = 0; i < 5; i++)
        n = tsr_kcache_sig_bytes(sig, n, id[i], strlen(id[i]) + 1);
    const int32_t v[] = {(int32_t)p->kind, p->n,        p->c,         p->h,        p->w,
                         p->kh,            p->kw,       p->stride_h,  p->stride_w, p->pad_top,
                         p->pad_left,      p->pad_bottom, p->pad_right, p->count_include_pad, (int32_t)p->dtype,
                         p->zp,            y_off,       div_kind};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        n = tsr_kcache_sig_i32(sig, n, v[i]);
    return n;
}

/* The lowering-specific part of a cached kernel. */
typedef struct {
    tiling_t t;     /* the chosen tiling */
    double cost;    /* the cost model's value for it */
    int32_t nuops;  /* uops in the kernel buffer */
} pool_meta_t;

/* Choose the tiling, build the relocatable stream (every buffer at 0) and
 * the uops, and insert them into kc. */
static int generate(tsr_kcache_t *kc, geo_t *g, const uint8_t *sig, size_t sig_len, tsr_kcache_ref_t **ref)
{
    const uint64_t t0 = tsr_mono_ns();
    uint8_t *uops = NULL;
    ibuf_t b;
    memset(&b, 0, sizeof b);
    tsr_stream_init(&b.s, g->c, 0, 0);
    int rc = tsr_pool_choose_tiling(g);
    if (rc)
        return rc;
    g->x_el = g->y_el = g->c_el = g->w_el = g->uop_el = 0;
    tsr_pool_build(g, &b);
    if ((rc = tsr_stream_check(&b.s, OP)))
        goto out;
    if ((rc = tsr_pool_encode_uops(g, &uops)))
        goto out;
    pool_meta_t meta;
    memset(&meta, 0, sizeof meta);
    meta.t = g->t;
    meta.cost = tsr_pool_cost(g, &g->t);
    meta.nuops = g->nuops;
    tsr_kernel_t k = {&meta, sizeof meta, b.s.v, b.s.n, uops, (size_t)g->nuops, tsr_mono_ns() - t0};
    rc = tsr_kcache_insert(kc, sig, sig_len, &k, ref);
out:
    tsr_stream_free(&b.s);
    free(uops);
    return rc;
}

/* ---------------------------------------------------------------- plan */

/* The plan, reading x and writing y (device tensors, not owned). */
/* tsr_kcache_fetch's callbacks: a cached kernel is kept if its tiling
 * still fits (the signature makes this always true), adopting it. */
typedef struct {
    geo_t *g;
    const uint8_t *sig;
    size_t sig_len;
} pool_kctx_t;

static int kernel_fits(const tsr_kernel_t *k, void *ctx)
{
    geo_t *g = ((pool_kctx_t *)ctx)->g;
    pool_meta_t meta;
    if (k->meta_len != sizeof meta)
        return 0;
    memcpy(&meta, k->meta, sizeof meta);
    if (!tsr_pool_tiling_fits(g, &meta.t))
        return 0;
    tsr_pool_set_tiling(g, &meta.t);
    return meta.nuops == g->nuops && k->nuops == (size_t)g->nuops;
}

static int kernel_gen(tsr_kcache_t *kc, void *ctx, tsr_kcache_ref_t **ref)
{
    pool_kctx_t *x = ctx;
    return generate(kc, x->g, x->sig, x->sig_len, ref);
}

/* The plan's figures from its geometry (tiling adopted or chosen). */
static void plan_fields(const tsr_config_t *c, const geo_t *g, tsr_pool_plan_t *pl)
{
    pl->oh = g->oh;
    pl->ow = g->ow;
    pl->nb = g->nb;
    pl->cb = g->cb;
    pl->toh = g->t.toh;
    pl->tow = g->glob ? 1 : g->t.tow;
    pl->sep = g->t.sep;
    pl->tco = g->t.tco;
    pl->rows_in = g->rows_in;
    pl->wr = g->wr;
    pl->tiles = g->tiles;
    pl->chunks = g->chunks;
    pl->nbuf_inp = g->t.nbi;
    pl->nbuf_acc = g->t.nba;
    pl->pad_value = g->pad_value;
    pl->off = g->off;
    pl->div_kind = g->div_kind;
    pl->div_k = g->div_k;
    pl->div_e = g->div_e;
    pl->ncounts = g->ncounts;
    pl->use_map = g->use_map;
    pl->nconst = g->nconst;
    pl->x_bytes = x_elems(g) * c->inp_bytes;
    pl->y_bytes = y_elems(g) * c->out_bytes;
    pl->c_bytes = c_elems(g) * c->acc_bytes;
    pl->w_bytes = c->wgt_bytes;
}

/* This plan's stream: the kernel's, relocated to its buffers (checked
 * field by field when it was generated; relocation checks dram_base). */
static int plan_bind(const tsr_config_t *c, tsr_pool_plan_t *pl)
{
    uint64_t base[1][TSR_MEM_COUNT] = {{0}};
    base[0][TSR_MEM_UOP] = pl->uop_addr;
    base[0][TSR_MEM_INP] = pl->x_addr;
    base[0][TSR_MEM_WGT] = pl->w_addr;
    base[0][TSR_MEM_ACC] = pl->c_addr;
    base[0][TSR_MEM_OUT] = pl->y_addr;
    tsr_opplan_stream_t st;
    int rc = tsr_opplan_bind(c, OP, pl->kref, NULL, 1, (const uint64_t(*)[TSR_MEM_COUNT])base, 0, &st);
    return tsr_opplan_take(rc, &st, &pl->insns, &pl->ninsns, &pl->gemm_ops, &pl->alu_ops, &pl->dram_bytes);
}

static int plan_impl(tsr_device_t *dev, const tsr_pool_params_t *params, const tsr_dtensor_t *x,
                     const tsr_dtensor_t *y, int y_off, tsr_pool_plan_t *pl)
{
    if (!pl)
        return tsr_err(TSR_EINVAL, OP ": NULL plan");
    memset(pl, 0, sizeof *pl);
    if (!dev)
        return tsr_err(TSR_EINVAL, OP ": NULL device");
    const tsr_config_t *c = tsr_device_config(dev);
    geo_t g;
    int rc = tsr_pool_geo_init(c, params, &g);
    if (rc)
        return rc;
    pl->p = *params;
    g.p = &pl->p;
    g.y_off = y_off;
    /* the kernel (tiling, relocatable stream, uops): from the device's
     * cache, else generated and inserted */
    uint8_t sig[512];
    pool_kctx_t kx = {&g, sig, pool_sig(&pl->p, y_off, g.div_kind, sig)};
    const tsr_opplan_kernel_t kk = {sig, kx.sig_len, kernel_fits, kernel_gen, &kx};
    if ((rc = tsr_opplan_fetch(dev, &kk, &pl->kref, &pl->kcache)))
        goto fail;
    const tsr_kernel_t *kern = tsr_kcache_kernel(pl->kref);
    pool_meta_t kmeta;
    memcpy(&kmeta, kern->meta, sizeof kmeta);
    plan_fields(c, &g, pl);
    const tsr_opbuf_t bufs[] = {{pl->x_bytes, x, &pl->x_addr}, {pl->y_bytes, y, &pl->y_addr},
                                {pl->c_bytes, NULL, &pl->c_addr}, {pl->w_bytes, NULL, &pl->w_addr}};
    if ((rc = tsr_opplan_buffers(dev, OP, bufs, 4)))
        goto fail;
    pl->nuops = (size_t)g.nuops;
    pl->uop_addr = tsr_kcache_uop_addr(pl->kref); /* owned by the cache entry */
    if ((rc = write_consts(dev, &g, pl)))
        goto fail;
    if ((rc = plan_bind(c, pl)))
        goto fail;
    pl->cost = kmeta.cost;
    tsr_pool_geo_free(&g);
    return TSR_OK;
fail:
    tsr_pool_geo_free(&g);
    tsr_pool_plan_free(dev, pl);
    return rc;
}

void tsr_pool_plan_free(tsr_device_t *dev, tsr_pool_plan_t *pl)
{
    if (!pl)
        return;
    uint64_t *bufs[2] = {&pl->c_addr, &pl->w_addr}; /* x and y belong to the tensors, the uops to the cache */
    for (int i = 0; i < 2 && dev; i++)
        if (*bufs[i])
            tsr_mem_free(dev, *bufs[i]);
    tsr_kcache_release(pl->kref);
    if (pl->io_owned) {
        tsr_dtensor_free(dev, &pl->xt);
        tsr_dtensor_free(dev, &pl->yt);
    }
    free(pl->insns);
    memset(pl, 0, sizeof *pl);
}

int tsr_pool_plan(tsr_device_t *dev, const tsr_pool_params_t *params, tsr_pool_plan_t *pl)
{
    /* a thin wrapper: the plan over device tensors of its own (the host
     * packs into and unpacks from them) */
    if (!pl)
        return tsr_err(TSR_EINVAL, OP ": NULL plan");
    memset(pl, 0, sizeof *pl);
    if (!dev || !params)
        return tsr_err(TSR_EINVAL, OP ": NULL device or parameters");
    int oh, ow, rc = tsr_pool_check(params, &oh, &ow);
    if (rc)
        return rc;
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_dtensor_t x, y;
    memset(&y, 0, sizeof y);
    if ((rc = tsr_dtensor_init(c, params->n, params->c, params->h, params->w, params->dtype, params->zp, &x)) ||
        (rc = tsr_dtensor_init(c, params->n, params->c, oh, ow, params->dtype, params->zp, &y))) {
        if (c->block_in != c->block_out)
            return tsr_err(TSR_EINVAL, OP ": needs BLOCK_IN == BLOCK_OUT (config has %d and %d)", c->block_in,
                           c->block_out);
        return tsr_err_prefix(rc, OP ": ");
    }
    if ((rc = tsr_dtensor_alloc(dev, &x)) || (rc = tsr_dtensor_alloc(dev, &y)) ||
        (rc = tsr_pool_plan_tensors(dev, params, &x, &y, pl))) {
        tsr_dtensor_free(dev, &x);
        tsr_dtensor_free(dev, &y);
        return rc;
    }
    pl->xt = x;
    pl->yt = y;
    pl->io_owned = 1;
    return TSR_OK;
}

int tsr_pool_plan_tensors(tsr_device_t *dev, const tsr_pool_params_t *params, const tsr_dtensor_t *x,
                          const tsr_dtensor_t *y, tsr_pool_plan_t *pl)
{
    if (pl)
        memset(pl, 0, sizeof *pl);
    if (!params || !x || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters or tensor");
    int oh, ow, rc = tsr_pool_check(params, &oh, &ow);
    if (rc)
        return rc;
    const tsr_pool_params_t *p = params;
    if (x->n != p->n || x->c != p->c || x->h != p->h || x->w != p->w || x->dtype != p->dtype || x->zp != p->zp)
        return tsr_err(TSR_EINVAL, OP ": input tensor [%d,%d,%d,%d] zp %d does not match the parameters "
                       "[%d,%d,%d,%d] zp %d (or its dtype differs)",
                       x->n, x->c, x->h, x->w, (int)x->zp, p->n, p->c, p->h, p->w, (int)p->zp);
    if (y->n != p->n || y->c != p->c || y->h != oh || y->w != ow || y->dtype != p->dtype || y->zp != p->zp)
        return tsr_err(TSR_EINVAL, OP ": output tensor [%d,%d,%d,%d] zp %d does not match [%d,%d,%d,%d] zp %d "
                       "(or its dtype differs)",
                       y->n, y->c, y->h, y->w, (int)y->zp, p->n, p->c, oh, ow, (int)p->zp);
    /* max over h = x - off is the max of x minus off: planned on the device
     * view (int8, zp - off). Averages are rounded on raw values
     * (operators.md), which h does not give at ties for uint8: planned on
     * the logical dtype (the input packing of a uint8 pool is already
     * h = x - 128 and the sums are raw), the rounded average then
     * re-centred by one ALU add (y_off). */
    if (p->dtype == TSR_DT_UINT8 && p->kind != TSR_POOL_MAX)
        return plan_impl(dev, p, x, y, tsr_dtensor_off(p->dtype), pl);
    tsr_pool_params_t v = *p;
    v.dtype = TSR_DT_INT8;
    v.zp -= tsr_dtensor_off(p->dtype);
    return plan_impl(dev, &v, x, y, 0, pl);
}

int tsr_pool_write_input(tsr_device_t *dev, const tsr_pool_plan_t *pl, const void *x)
{
    if (!dev || !pl || !x)
        return tsr_err(TSR_EINVAL, OP ": NULL device, plan or input data");
    uint8_t *buf = malloc(pl->x_bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    tsr_pool_pack_input(tsr_device_config(dev), pl, x, buf);
    int rc = tsr_mem_write(dev, pl->x_addr, buf, pl->x_bytes);
    free(buf);
    return rc;
}

int tsr_pool_exec(tsr_device_t *dev, const tsr_pool_plan_t *pl)
{
    if (!dev || !pl || !pl->insns)
        return tsr_err(TSR_EINVAL, OP ": NULL device or plan");
    int rc = tsr_submit(dev, pl->insns, pl->ninsns);
    if (!rc)
        rc = tsr_wait(dev, -1);
    return rc;
}

int tsr_pool_read_output(tsr_device_t *dev, const tsr_pool_plan_t *pl, void *y)
{
    if (!dev || !pl || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL device, plan or output data");
    uint8_t *buf = malloc(pl->y_bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = tsr_mem_read(dev, pl->y_addr, buf, pl->y_bytes);
    if (!rc)
        tsr_pool_unpack_output(tsr_device_config(dev), pl, buf, y);
    free(buf);
    return rc;
}

int tsr_pool_run(tsr_device_t *dev, const tsr_pool_params_t *p, const void *x, void *y)
{
    if (!dev)
        return tsr_err(TSR_EINVAL, OP ": NULL device");
    if (!x || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL input or output data");
    tsr_pool_plan_t pl;
    int rc = tsr_pool_plan(dev, p, &pl);
    if (rc)
        return rc;
    if (!(rc = tsr_pool_write_input(dev, &pl, x)) && !(rc = tsr_pool_exec(dev, &pl)))
        rc = tsr_pool_read_output(dev, &pl, y);
    tsr_pool_plan_free(dev, &pl);
    return rc;
}
