/*
 * tsr_conv2d: quantized conv2d (see tsr_conv2d.h for the values, layouts
 * and tiling): parameter checks, host packing, the kernel (from the cache or
 * generated: jit/conv2d/tsr_conv2d_tiling picks the tiling,
 * tsr_conv2d_emit writes the stream and uops), plan, bind and run.
 */
#include "tsr_conv2d.h"

#include <pthread.h>
#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_conv2d_emit.h"
#include "tsr_conv2d_geo.h"
#include "tsr_conv2d_tiling.h"
#include "tsr_cost.h"
#include "tsr_dtype.h"
#include "tsr_error.h"
#include "tsr_jitutil.h"
#include "tsr_kcache.h"
#include "tsr_opplan.h"
#include "tsr_util.h"

#define OP "conv2d"

/* w - w_zp fits int8 for every weight only with zero point 0 (int8) or
 * 128 (uint8); otherwise it is split into 2 (or, when 255 can occur, 3)
 * int8 parts (groups 1: meeting copies of the input; exact, at 2-3x the
 * GEMM work). p's weight fields must be valid. */
static int wsplit_of(const tsr_conv2d_params_t *p)
{
    int32_t vmin = 0, vmax = 0;
    for (int i = 0; i < p->w_zp_count; i++) {
        vmin = imin(vmin, tsr_dt_min(p->w_dtype) - p->w_zp[i]);
        vmax = imax(vmax, tsr_dt_max(p->w_dtype) - p->w_zp[i]);
    }
    /* parts needed: each int8 part covers [-128, 127] */
    return (vmin >= -128 && vmax <= 127) ? 1 : (vmin >= -256 && vmax <= 254) ? 2 : 3;
}

int tsr_conv2d_groups_fit(const tsr_config_t *c, const tsr_conv2d_params_t *p)
{
    if (!c || !p || p->groups == 1)
        return 1;
    return p->groups > 1 && p->c_in % p->groups == 0 && p->c_out == p->c_in && c->block_in == c->block_out &&
           c->block_in % (p->c_in / p->groups) == 0;
}

int tsr_conv2d_expand_groups(const tsr_conv2d_params_t *p, const void *w, tsr_conv2d_params_t *u, uint8_t **full)
{
    *full = NULL;
    const int64_t G = p->groups, M = p->c_out, C = p->c_in, K = (int64_t)p->kh * p->kw;
    if (G < 1 || C < 1 || M < 1 || K < 1 || C % G || M % G)
        return tsr_err(TSR_EINVAL, "groups %lld does not divide the %lld input and %lld output channels",
                       (long long)G, (long long)C, (long long)M);
    if (!p->w_zp || (p->w_zp_count != 1 && p->w_zp_count != M))
        return tsr_err(TSR_EINVAL, "weight zero points: need 1 or C_out = %lld values, got %d", (long long)M,
                       p->w_zp_count);
    const int64_t cg = C / G, mg = M / G, bytes = M * C * K;
    if (bytes > ((int64_t)64 << 20))
        return tsr_err(TSR_EINVAL, "groups %lld: the block-diagonal weights would take %lld MB (at most 64)",
                       (long long)G, (long long)(bytes >> 20));
    uint8_t *f = malloc((size_t)bytes);
    if (!f)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int64_t o = 0; o < M; o++) {
        const uint8_t z = (uint8_t)p->w_zp[p->w_zp_count > 1 ? o : 0]; /* the zero point's byte in w's type */
        memset(f + o * C * K, z, (size_t)(C * K));
        memcpy(f + (o * C + (o / mg) * cg) * K, (const uint8_t *)w + o * cg * K, (size_t)(cg * K));
    }
    *u = *p;
    u->groups = 1;
    *full = f;
    return TSR_OK;
}

tsr_conv2d_params_t tsr_conv2d_for_config(const tsr_config_t *c, const tsr_conv2d_params_t *p)
{
    tsr_conv2d_params_t q = *p;
    if (!tsr_alu_op_available(c, TSR_ALU_FSCALE))
        q.fscale = NULL;
    return q;
}

int tsr_conv2d_input_copies(const tsr_conv2d_params_t *p)
{
    int oh, ow;
    if (!p || tsr_conv2d_check(p, &oh, &ow))
        return 0;
    return p->groups != 1 ? 1 : wsplit_of(p);
}

int tsr_conv2d_check(const tsr_conv2d_params_t *p, int *oh, int *ow)
{
    if (!p)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters");
    if (p->n < 1 || p->c_in < 1 || p->h < 1 || p->w < 1)
        return tsr_err(TSR_EINVAL, OP ": input shape [%d, %d, %d, %d] must be positive", p->n, p->c_in, p->h, p->w);
    if (p->c_out < 1 || p->kh < 1 || p->kw < 1)
        return tsr_err(TSR_EINVAL, OP ": weight shape (C_out %d, kernel %dx%d) must be positive", p->c_out, p->kh,
                       p->kw);
    if (p->stride_h < 1 || p->stride_w < 1)
        return tsr_err(TSR_EINVAL, OP ": strides (%d, %d) must be >= 1", p->stride_h, p->stride_w);
    const int pads[4] = {p->pad_top, p->pad_left, p->pad_bottom, p->pad_right};
    const char *pn[4] = {"top", "left", "bottom", "right"};
    for (int i = 0; i < 4; i++) {
        if (pads[i] < 0)
            return tsr_err(TSR_EINVAL, OP ": negative %s padding %d", pn[i], pads[i]);
        if (pads[i] > 15)
            return tsr_err(TSR_EINVAL, OP ": %s padding %d is more than 15 (the LOAD pad fields are 4 bits; "
                           "pad the input on the host)", pn[i], pads[i]);
    }
    if (p->groups != 1) {
        /* grouped (depthwise is groups == C_in): each output block meets
         * one input block, whose weight blocks are block-diagonal (the
         * config-dependent part, C_in/groups dividing BLOCK_IN, is
         * tsr_conv2d_groups_fit) */
        if (p->groups < 1 || p->c_in % p->groups)
            return tsr_err(TSR_EINVAL, OP ": groups %d does not divide the input channel count %d", p->groups,
                           p->c_in);
        if (p->c_out != p->c_in)
            return tsr_err(TSR_EINVAL, OP ": grouped/depthwise (groups %d) needs C_out == C_in, got C_out %d",
                           p->groups, p->c_out);
    }
    if (!tsr_dt_ok(p->x_dtype) || !tsr_dt_ok(p->w_dtype) || !tsr_dt_ok(p->y_dtype))
        return tsr_err(TSR_EINVAL, OP ": dtypes must be int8 or uint8 (input %d, weights %d, output %d)",
                       (int)p->x_dtype, (int)p->w_dtype, (int)p->y_dtype);
    if (p->x_zp < tsr_dt_min(p->x_dtype) || p->x_zp > tsr_dt_max(p->x_dtype))
        return tsr_err(TSR_EINVAL, OP ": input zero point %d outside [%d, %d]", p->x_zp, tsr_dt_min(p->x_dtype),
                       tsr_dt_max(p->x_dtype));
    if (p->y_zp < tsr_dt_min(p->y_dtype) || p->y_zp > tsr_dt_max(p->y_dtype))
        return tsr_err(TSR_EINVAL, OP ": output zero point %d outside [%d, %d]", p->y_zp, tsr_dt_min(p->y_dtype),
                       tsr_dt_max(p->y_dtype));
    if (!p->w_zp || (p->w_zp_count != 1 && p->w_zp_count != p->c_out))
        return tsr_err(TSR_EINVAL, OP ": weight zero points: need 1 or C_out = %d values, got %d%s", p->c_out,
                       p->w_zp_count, p->w_zp ? "" : " (NULL)");
    for (int i = 0; i < p->w_zp_count; i++)
        if (p->w_zp[i] < tsr_dt_min(p->w_dtype) || p->w_zp[i] > tsr_dt_max(p->w_dtype))
            return tsr_err(TSR_EINVAL, OP ": weight zero point [%d] = %d outside [%d, %d]", i, p->w_zp[i],
                           tsr_dt_min(p->w_dtype), tsr_dt_max(p->w_dtype));
    int rc = tsr_requant_check(OP, &p->rq, p->c_out, "C_out");
    if (rc)
        return rc;
    int64_t sh = (int64_t)p->h + p->pad_top + p->pad_bottom - p->kh;
    int64_t sw = (int64_t)p->w + p->pad_left + p->pad_right - p->kw;
    if (sh < 0 || sw < 0)
        return tsr_err(TSR_EINVAL, OP ": kernel %dx%d larger than the padded input %lldx%lld", p->kh, p->kw,
                       (long long)p->h + p->pad_top + p->pad_bottom, (long long)p->w + p->pad_left + p->pad_right);
    int64_t total = (int64_t)p->n * p->c_in * p->h * p->w;
    int64_t wtotal = (int64_t)p->c_out * (p->c_in / p->groups) * p->kh * p->kw;
    if (total > INT32_MAX || wtotal > INT32_MAX)
        return tsr_err(TSR_EINVAL, OP ": tensor too large (more than 2^31 - 1 elements)");
    if (oh)
        *oh = (int)(sh / p->stride_h + 1);
    if (ow)
        *ow = (int)(sw / p->stride_w + 1);
    return TSR_OK;
}

static int geo_init(const tsr_config_t *c, const tsr_conv2d_params_t *p, const tsr_add_params_t *fadd, geo_t *g)
{
    memset(g, 0, sizeof *g);
    g->fadd = fadd;
    g->fuse = fadd != NULL;
    int rc = tsr_conv2d_check(p, &g->oh, &g->ow);
    if (rc)
        return rc;
    if (c->inp_width != 8 || c->wgt_width != 8 || c->acc_width != 32)
        return tsr_err(TSR_EINVAL, OP ": needs int8 inputs and weights and int32 accumulators (config has "
                       "int%d/int%d/int%d)", c->inp_width, c->wgt_width, c->acc_width);
    g->c = c;
    g->p = p;
    g->dw = p->groups != 1;
    if (g->dw && c->block_in != c->block_out)
        return tsr_err(TSR_EINVAL, OP ": depthwise needs BLOCK_IN == BLOCK_OUT (config has %d and %d)",
                       c->block_in, c->block_out);
    if (g->dw && c->block_in % (p->c_in / p->groups))
        return tsr_err(TSR_EINVAL, OP ": groups %d: %d channels per group do not divide BLOCK_IN %d (a group "
                       "would span two blocks; tsr_conv2d_groups_fit)", p->groups, p->c_in / p->groups, c->block_in);
    g->nb = cdiv(p->n, c->batch);
    g->wsplit = wsplit_of(p);
    /* groups 1: the parts meet copies of the input (more input blocks);
     * depthwise: each block's parts meet the block itself (more uops) */
    g->cib = cdiv(p->c_in * (g->dw ? 1 : g->wsplit), c->block_in);
    g->cob = cdiv(p->c_out, c->block_out);
    g->kk = p->kh * p->kw;
    if (c->depthwise > 0 && g->dw && p->groups == p->c_in) {
        /* the GEMM depthwise mode (tsr_conv2d_geo.h): K taps of a kernel
         * row per op and weight row */
        g->dwk = c->depthwise;
        g->dwg = cdiv(p->kw, g->dwk);
        g->kk = p->kh * g->dwg;
    }
    /* (the mode: G tap groups per weight row; a block's KK groups in ceil(KK / G) rows) */
    g->wgpr = g->dwk ? 1 << c->dw_group_bits : 1;
    g->wkk = cdiv(g->kk, g->wgpr);
    g->h_pad = p->x_zp - tsr_dt_off(p->x_dtype);
    g->exact = p->fscale != NULL;
    if (g->exact && !tsr_alu_op_available(c, TSR_ALU_FSCALE))
        return tsr_err(TSR_EINVAL, OP ": exact (float32 scale) requantization needs the ALU op fscale, config key "
                       "EXACT_REQUANT = 1, which this config lacks");
    int any_pos = 0;
    for (int i = 0; !g->exact && i < p->rq_count; i++)
        any_pos |= p->shift[i] > 0;
    if (p->rq_count > 1)
        g->has_shl_row = any_pos;
    else if (!g->exact)
        g->shl_imm = imax(p->shift[0], 0);
    g->nconst = 3 + g->has_shl_row;
    return TSR_OK;
}

/* ------------------------------------------------------------- packing */

static uint64_t x_elems(const geo_t *g) { return (uint64_t)g->nb * g->cib * g->p->h * g->p->w; }
static uint64_t w_elems(const geo_t *g)
{
    if (g->wtight) /* every block's groups back to back */
        return (uint64_t)tsr_conv2d_dw_wrows(g, g->cob);
    return (uint64_t)(g->wshare ? 1 : g->cob) * (g->dw ? g->wsplit : g->cib) * g->wkk;
}
static uint64_t y_elems(const geo_t *g) { return (uint64_t)g->nb * g->cob * g->oh * g->ow; }
/* (a fused add's constant rows behind the conv's) */
static uint64_t c_elems(const geo_t *g) { return (uint64_t)g->cob * g->nconst + (g->fuse ? TSR_ADD_NCONST : 0); }

void tsr_conv2d_pack_input(const tsr_config_t *c, const tsr_conv2d_plan_t *pl, const void *x, uint8_t *dst)
{
    if (pl->tensors_owned) {
        tsr_dtensor_pack(&pl->xt, x, dst);
        return;
    }
    const tsr_conv2d_params_t *p = &pl->p;
    const int off = tsr_dt_off(p->x_dtype);
    memset(dst, (uint8_t)(int8_t)pl->h_pad, pl->x_bytes);
    /* with split weights (groups 1) the input channels appear wsplit times
     * (c, c_in + c, ...); depthwise parts all meet the one copy */
    const int copies = pl->depthwise ? 1 : pl->wsplit;
    for (int n = 0; n < p->n; n++)
        for (int ci = 0; ci < p->c_in * copies; ci++)
            for (int y = 0; y < p->h; y++)
                for (int xx = 0; xx < p->w; xx++) {
                    size_t i = (((size_t)n * p->c_in + (size_t)(ci % p->c_in)) * p->h + y) * p->w + xx;
                    size_t el = (((size_t)(n / c->batch) * pl->cib + (size_t)(ci / c->block_in)) * p->h + y) * p->w + xx;
                    size_t o = el * c->inp_bytes + (size_t)(n % c->batch) * c->block_in + (size_t)(ci % c->block_in);
                    dst[o] = (uint8_t)(int8_t)(tsr_dt_get(p->x_dtype, x, i) - off);
                }
}

/* 1 when every weight of the n at w minus zp fits int8 (the minimum and
 * maximum only: a loop the compiler vectorizes). */
static int wrange_fits(const uint8_t *w, size_t n, int u8, int32_t zp)
{
    int32_t lo = 255, hi = -128;
    if (u8)
        for (size_t i = 0; i < n; i++) {
            lo = w[i] < lo ? w[i] : lo;
            hi = w[i] > hi ? w[i] : hi;
        }
    else
        for (size_t i = 0; i < n; i++) {
            const int32_t v = (int8_t)w[i];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    return n == 0 || (lo - zp >= -128 && hi - zp <= 127);
}

/* One BLOCK_IN segment of a 1x1 conv's weight row: n consecutive weights
 * minus zp as int8 into row; their sum. */
static int64_t pack_seg1(uint8_t *restrict row, const uint8_t *restrict sr, int n, int32_t zp, int u8)
{
    int64_t sum = 0;
    if (u8)
        for (int ci = 0; ci < n; ci++) {
            const int32_t v = (int32_t)sr[ci] - zp;
            sum += v;
            row[ci] = (uint8_t)(int8_t)v;
        }
    else
        for (int ci = 0; ci < n; ci++) {
            const int32_t v = (int32_t)(int8_t)sr[ci] - zp;
            sum += v;
            row[ci] = (uint8_t)(int8_t)v;
        }
    return sum;
}

/* Output channel co's constant rows (bias - h_pad * sum of its w - w_zp,
 * the requantization) into cdst. */
static void pack_consts_co(const tsr_config_t *c, const tsr_conv2d_plan_t *pl, const int32_t *bias, int co, int64_t sum,
                           uint8_t *cdst)
{
    const tsr_conv2d_params_t *p = &pl->p;
    int r = p->rq_count == 1 ? 0 : co;
    int32_t vals[4];
    int nv = 0;
    int64_t bp = (bias ? (int64_t)bias[co] : 0) - (int64_t)pl->h_pad * sum;
    vals[nv++] = (int32_t)(uint32_t)(uint64_t)bp; /* wrap32 */
    vals[nv++] = p->fscale ? tsr_requant_fscale_bits(p->fscale[r]) : p->mult[r];
    if (pl->nconst > 3) /* per-channel left shifts (shr by a negative amount) */
        vals[nv++] = -imax(p->shift[r], 0);
    /* (a fused add's input a is this output: its zero point folded, tsr_conv2d_geo.h) */
    const int32_t fz = pl->fused && tsr_conv2d_fuse_fold_zp(p, &pl->fadd) ? p->y_zp : 0;
    vals[nv++] = tsr_requant_rqfin(p->fscale ? 0 : imax(-p->shift[r], 0), p->y_zp - fz, p->act_min - fz,
                                   p->act_max - fz);
    for (int k = 0; k < nv; k++)
        for (int b = 0; b < c->batch; b++) {
            /* resident plans keep each kind of row together (one burst per kind) */
            size_t el = pl->resident ? (size_t)tsr_conv2d_sec_off(p->rq_count, pl->cob, k) +
                                           (tsr_conv2d_sec_shared(p->rq_count, k) ? 0 : (size_t)(co / c->block_out))
                                     : (size_t)(co / c->block_out) * pl->nconst + k;
            size_t o = el * c->acc_bytes + ((size_t)b * c->block_out + (size_t)(co % c->block_out)) * 4;
            uint32_t u = (uint32_t)vals[k];
            for (int j = 0; j < 4; j++)
                cdst[o + j] = (uint8_t)(u >> (8 * j));
        }
}

/* A fused add's constant rows (every lane the same) behind the conv's. */
static void pack_consts_fused(const tsr_config_t *c, const tsr_conv2d_plan_t *pl, uint8_t *cdst)
{
    int32_t v[TSR_ADD_NCONST];
    tsr_conv2d_fuse_const_values(&pl->p, &pl->fadd, v);
    const size_t el0 = (size_t)pl->cob * (size_t)pl->nconst, lanes = (size_t)c->batch * c->block_out;
    for (int k = 0; k < TSR_ADD_NCONST; k++)
        for (size_t l = 0; l < lanes; l++)
            for (int j = 0; j < 4; j++)
                cdst[(el0 + (size_t)k) * c->acc_bytes + l * 4 + (size_t)j] = (uint8_t)((uint32_t)v[k] >> (8 * j));
}

/* Pack w and the constants in the unshared layout (every output-channel
 * block's weight rows, wbytes of them), whatever pl->wshare says. */
static int pack_weights_all(const tsr_config_t *c, const tsr_conv2d_plan_t *pl, const void *w, const int32_t *bias,
                            uint8_t *wdst, size_t wbytes, uint8_t *cdst)
{
    const tsr_conv2d_params_t *p = &pl->p;
    const int dw = pl->depthwise, kk = p->kh * p->kw, cin_g = p->c_in / p->groups;
    memset(wdst, 0, wbytes);
    memset(cdst, 0, pl->c_bytes);
    const int split = pl->wsplit; /* > 1: w - w_zp written as int8 parts (over copies of the input; depthwise:
                                     consecutive weight blocks that all meet the block's input) */
    /* (the layout's numbers as locals: a byte store may alias the structs,
     * so the per-weight arithmetic below reloaded and redivided them) */
    const size_t wgt_bytes = c->wgt_bytes, bin = c->block_in, bout = c->block_out, cib = pl->cib;
    const int kw = p->kw, dwk = pl->dwk, wtight = pl->wtight, c_in = p->c_in;
    const size_t G = (size_t)1 << c->dw_group_bits, dwg = dwk ? (size_t)((kw + dwk - 1) / dwk) : 0;
    const size_t kkg = (size_t)p->kh * dwg;
    for (int co = 0; co < p->c_out; co++) {
        int32_t zp = p->w_zp[p->w_zp_count == 1 ? 0 : co];
        int64_t sum = 0;
        if (split == 1 && !dw) {
            /* the common case (one int8 part, groups 1), with the block
             * arithmetic hoisted out of the tap loop: a network's weights
             * are packed once per plan, megabytes of them */
            const uint8_t *src = (const uint8_t *)w + (size_t)co * (size_t)cin_g * (size_t)kk;
            const int u8 = p->w_dtype == TSR_DT_UINT8;
            const size_t orow = (size_t)(co / c->block_out) * pl->cib, olane = (size_t)(co % c->block_out) * c->block_in;
            /* every w - w_zp of the dtype fits int8 (int8 with zp 0, uint8
             * with zp 128): no per-weight check; else this channel's
             * weights are checked first (their range; in [ci][k] order only
             * when one does not fit, so the error names the first one) */
            const int checked = (u8 ? 0 : -128) - zp < -128 || (u8 ? 255 : 127) - zp > 127 ?
                                    !wrange_fits(src, (size_t)cin_g * (size_t)kk, u8, zp) : 0;
            for (int i = 0; checked && i < cin_g * kk; i++) {
                const int32_t v = (u8 ? (int32_t)src[i] : (int32_t)(int8_t)src[i]) - zp;
                if (v < -128 || v > 127)
                    return tsr_err(TSR_EINVAL,
                                   OP ": weight w - w_zp = %d - %d = %d at [%d][%d][%d][%d] does not fit "
                                   "the plan (its weight zero points differ from these)",
                                   v + zp, zp, v, co, i / kk, i % kk / p->kw, i % kk % p->kw);
            }
            /* one BLOCK_IN-wide segment of an on-chip weight row at a
             * time: the writes run along it instead of striding a row per
             * tap, and no division per channel */
            const int bi = (int)c->block_in;
            for (int cb = 0, ci0 = 0; ci0 < cin_g; cb++, ci0 += bi) {
                const int nci = imin(bi, cin_g - ci0);
                uint8_t *row = wdst + (orow + (size_t)cb) * (size_t)kk * c->wgt_bytes + olane;
                const uint8_t *sr = src + (size_t)ci0 * kk;
                if (kk == 1) { /* (1x1: the channels' weights are consecutive) */
                    sum += pack_seg1(row, sr, nci, zp, u8);
                    continue;
                }
                for (int k = 0; k < kk; k++, row += c->wgt_bytes) {
                    if (u8)
                        for (int ci = 0; ci < nci; ci++) {
                            const int32_t v = (int32_t)sr[ci * kk + k] - zp;
                            sum += v;
                            row[ci] = (uint8_t)(int8_t)v;
                        }
                    else
                        for (int ci = 0; ci < nci; ci++) {
                            const int32_t v = (int32_t)(int8_t)sr[ci * kk + k] - zp;
                            sum += v;
                            row[ci] = (uint8_t)(int8_t)v;
                        }
                }
            }
        }
        for (int part = 0; part < split && !(split == 1 && !dw); part++)
            for (int ci = 0; ci < cin_g; ci++)
                for (int k = 0; k < kk; k++) {
                    const size_t i = ((size_t)co * cin_g + (size_t)ci) * kk + (size_t)k;
                    int32_t v = tsr_dt_get(p->w_dtype, w, i) - zp;
                    if (split > 1) {
                        /* v in [-255, 255] = sum of `split` int8 parts of
                         * about v / split each (part j meets copy j of the
                         * input): v/2 + (v - v/2), or v/3 + ... */
                        if (part == 0)
                            sum += v;
                        for (int j = 0; j <= part; j++) {
                            int32_t pj = v / (split - j);
                            if (j == part) {
                                v = j == split - 1 ? v : pj;
                                break;
                            }
                            v -= pj;
                        }
                    } else {
                        if (v < -128 || v > 127) /* the plan's split covers every weight the dtype allows */
                            return tsr_err(TSR_EINVAL,
                                           OP ": weight w - w_zp = %d - %d = %d at [%d][%d][%d][%d] does not fit "
                                           "the plan (its weight zero points differ from these)",
                                           v + zp, zp, v, co, ci, k / p->kw, k % p->kw);
                        sum += v;
                    }
                    const int cie = part * c_in + ci; /* channel of the (doubled) input */
                    size_t el, o;
                    if (dwk) {
                        /* depthwise mode: tap group gi = (ky, kx / K) of the block and part, G per
                         * weight row; the global group gg is at row gg / G, tap rows (gg mod G) * K ..,
                         * lane [tap][channel]. Each block and part starts a row (wkk rows), or with
                         * wtight (one part) the blocks' groups are back to back (block b's from b*KK). */
                        const int ky = k / kw, kx = k % kw;
                        const size_t bp = (size_t)co / bout * (size_t)split + (size_t)part;
                        const size_t gg = (wtight ? bp * kkg : bp * ((kkg + G - 1) / G) * G) +
                                          (size_t)ky * dwg + (size_t)(kx / dwk);
                        el = gg / G;
                        o = el * wgt_bytes + ((gg % G) * (size_t)dwk + (size_t)(kx % dwk)) * bin + (size_t)co % bin;
                    } else if (dw) {
                        el = ((size_t)co / bout * (size_t)split + (size_t)part) * kk + k;
                        /* the input channel (co / cin_g) * cin_g + ci of co's group lies in co's own
                         * block (cin_g divides BLOCK_IN == BLOCK_OUT, C_out == C_in): a block-diagonal
                         * weight block (diagonal when depthwise) */
                        o = el * wgt_bytes + (size_t)co % bout * bin + (size_t)(co / cin_g * cin_g + ci) % bin;
                    } else {
                        el = ((size_t)co / bout * cib + (size_t)cie / bin) * kk + k;
                        o = el * wgt_bytes + (size_t)co % bout * bin + (size_t)cie % bin;
                    }
                    wdst[o] = (uint8_t)(int8_t)v;
                }
        pack_consts_co(c, pl, bias, co, sum, cdst);
    }
    if (pl->fused)
        pack_consts_fused(c, pl, cdst);
    return TSR_OK;
}

static int all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

/* write_weights' check of block skipping: every skipped block of the
 * packed weights w is zero. */
static int skip_check(const tsr_config_t *c, const tsr_conv2d_plan_t *pl, const uint8_t *w)
{
    const size_t blk = (size_t)pl->p.kh * (size_t)pl->p.kw * c->wgt_bytes;
    for (int ob = 0; pl->wnz && ob < pl->cob; ob++)
        for (int ib = 0; ib < pl->cib; ib++) {
            const size_t i = (size_t)ob * (size_t)pl->cib + (size_t)ib;
            if (!((pl->wnz[i >> 3] >> (i & 7)) & 1) && !all_zero(w + i * blk, blk))
                return tsr_err(TSR_EINVAL, OP ": weight block (output block %d, input block %d) is not zero, but "
                               "the plan skips it (planned with other weights, tsr_conv2d_params_t.w_plan)", ob, ib);
        }
    return TSR_OK;
}

/* 1 when the nblk blocks of blk bytes at w all equal the first. */
static int blocks_same(const uint8_t *w, size_t nblk, size_t blk)
{
    for (size_t b = 1; b < nblk; b++)
        if (memcmp(w, w + b * blk, blk))
            return 0;
    return 1;
}

int tsr_conv2d_pack_weights(const tsr_config_t *c, const tsr_conv2d_plan_t *pl, const void *w,
                            const int32_t *bias, uint8_t *wdst, uint8_t *cdst)
{
    if (!pl->wshare) {
        const int rc = pack_weights_all(c, pl, w, bias, wdst, pl->w_bytes, cdst);
        return rc ? rc : skip_check(c, pl, wdst);
    }
    /* shared weight rows (one block's, pl->w_bytes): pack every block's and
     * check they are still the same, so weights other than those the plan
     * was made for cannot run silently wrong */
    const size_t all = pl->w_bytes * (size_t)pl->cob;
    uint8_t *tmp = malloc(all);
    if (!tmp)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = pack_weights_all(c, pl, w, bias, tmp, all, cdst);
    if (!rc && !blocks_same(tmp, (size_t)pl->cob, pl->w_bytes))
        rc = tsr_err(TSR_EINVAL, OP ": these weights differ between output-channel blocks, but the plan shares one "
                     "copy (planned with other weights, tsr_conv2d_params_t.w_plan)");
    if (!rc)
        memcpy(wdst, tmp, pl->w_bytes);
    free(tmp);
    return rc;
}

/* p->w_plan packed as write_weights would (the unshared layout) into *out
 * (malloc'ed, *wb weight bytes, then the constants), or *out NULL when the
 * plan cannot take those weights (write_weights says so later). */
static int pack_known(const tsr_config_t *c, const geo_t *g, const tsr_conv2d_params_t *p, uint8_t **out,
                      size_t *wb)
{
    *out = NULL;
    tsr_conv2d_plan_t *t = calloc(1, sizeof *t);
    *wb = w_elems(g) * c->wgt_bytes;
    const size_t cb = c_elems(g) * c->acc_bytes;
    uint8_t *buf = malloc(*wb + cb);
    int rc = t && buf ? TSR_OK : tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc) {
        t->p = *p;
        t->depthwise = g->dw;
        t->dwk = g->dwk;
        t->wsplit = g->wsplit;
        t->cib = g->cib;
        t->cob = g->cob;
        t->h_pad = g->h_pad;
        t->nconst = g->nconst;
        t->fused = g->fuse;
        if (g->fadd)
            t->fadd = *g->fadd;
        t->w_bytes = *wb;
        t->c_bytes = cb;
        if (pack_weights_all(c, t, p->w_plan, NULL, buf, *wb, buf + *wb))
            tsr_err_clear();
        else
            *out = buf, buf = NULL;
    }
    free(buf);
    free(t);
    return rc;
}

/* The memo key (tsr_kcache_memo_put) of what geo_share and geo_skip find in
 * the packed weight rows: every number those rows depend on, and the
 * weights and their zero points by a 64-bit hash of their bytes. The
 * presearch and the plan of a conv pack them once between them. A
 * collision cannot run wrong: write_weights checks that skipped blocks are
 * zero and shared blocks the same (and names the problem). */
typedef struct wmemo_key {
    char tag[4];
    int32_t v[17];
    uint64_t hw, hz;
} wmemo_key_t;

static wmemo_key_t wmemo_key(const char *tag, const geo_t *g, const tsr_conv2d_params_t *p)
{
    wmemo_key_t k;
    memset(&k, 0, sizeof k);
    memcpy(k.tag, tag, sizeof k.tag);
    const int32_t v[17] = {g->dw,     g->dwk,   g->wsplit, g->cib,    g->cob,   g->kk,
                           g->wkk,    g->wgpr,  g->nci,    g->wtight, p->c_out, p->c_in,
                           p->groups, p->kh,    p->kw,     (int32_t)p->w_dtype, p->w_zp_count};
    memcpy(k.v, v, sizeof v);
    k.hw = tsr_hash64(p->w_plan, (size_t)p->c_out * (size_t)(p->c_in / p->groups) * (size_t)p->kh * (size_t)p->kw);
    k.hz = tsr_hash64(p->w_zp, sizeof *p->w_zp * (size_t)p->w_zp_count);
    return k;
}

/* The memo key of a groups-1, one-part conv's packed weight rows (tag
 * "wimg", skip_bits keeps them): the layout's numbers, w and the zero points. */
static wmemo_key_t wimg_key(int cib, int cob, const tsr_conv2d_params_t *p, const void *w)
{
    wmemo_key_t k;
    memset(&k, 0, sizeof k);
    memcpy(k.tag, "wimg", sizeof k.tag);
    const int32_t v[9] = {cib, cob, p->c_out, p->c_in, p->groups, p->kh, p->kw, (int32_t)p->w_dtype, p->w_zp_count};
    memcpy(k.v, v, sizeof v);
    k.hw = tsr_hash64(w, (size_t)p->c_out * (size_t)(p->c_in / p->groups) * (size_t)p->kh * (size_t)p->kw);
    k.hz = tsr_hash64(p->w_zp, sizeof *p->w_zp * (size_t)p->w_zp_count);
    return k;
}

/* wimg_key followed by the weights and zero points themselves: the memo
 * compares whole keys, so a packed image is taken only for these very
 * weights (two convs whose weights merely hash alike - a crafted model -
 * must not share rows; nothing downstream would notice). malloc'd, NULL
 * when out of memory (then no memo: the rows are packed again). */
static uint8_t *wimg_keybuf(int cib, int cob, const tsr_conv2d_params_t *p, const void *w, size_t *len)
{
    const wmemo_key_t k = wimg_key(cib, cob, p, w);
    const size_t nw = (size_t)p->c_out * (size_t)(p->c_in / p->groups) * (size_t)p->kh * (size_t)p->kw;
    const size_t nz = sizeof *p->w_zp * (size_t)p->w_zp_count;
    uint8_t *b = malloc(sizeof k + nw + nz);
    if (!b)
        return NULL;
    memcpy(b, &k, sizeof k);
    memcpy(b + sizeof k, w, nw);
    if (nz)
        memcpy(b + sizeof k + nw, p->w_zp, nz);
    *len = sizeof k + nw + nz;
    return b;
}

/* Shared weights (plan.wshare): with the weights known (p->w_plan), a
 * depthwise-mode conv of more than one block whose blocks' packed weight
 * rows are byte-identical keeps one copy. The rows are packed as
 * write_weights would (the detection is the layout's, not the pool's). */
static int geo_share(const tsr_config_t *c, tsr_kcache_t *kc, geo_t *g, const tsr_conv2d_params_t *p)
{
    g->wshare = 0;
    if (!g->dwk || g->cob < 2 || !p->w_plan)
        return TSR_OK;
    const wmemo_key_t key = wmemo_key("shar", g, p);
    uint8_t share = 0;
    if (tsr_kcache_memo_get(kc, &key, sizeof key, &share, 1)) {
        g->wshare = share;
        return TSR_OK;
    }
    uint8_t *buf;
    size_t wb;
    const int rc = pack_known(c, g, p, &buf, &wb);
    if (buf)
        g->wshare = blocks_same(buf, (size_t)g->cob, wb / (size_t)g->cob);
    free(buf);
    share = (uint8_t)g->wshare;
    if (!rc && tsr_kcache_memo_put(kc, &key, sizeof key, &share, 1))
        tsr_err_clear(); /* (not kept: packed again next time) */
    return rc;
}

/* The bytes of the block-skipping bits (geo_t.wnz) and where the prefix counts follow them. */
static size_t wnz_bytes(const geo_t *g) { return ((size_t)g->cob * (size_t)g->cib + 7) / 8; }
static size_t wnz_pre_off(const geo_t *g) { return (wnz_bytes(g) + 7) & ~(size_t)7; }

/* The bits of geo_skip from the packed weights: *out (malloc'ed, wnz_pre_off
 * bytes of bits then cob + 1 prefix counts), or *out NULL when every block is
 * kept or the plan cannot take the weights. */
static int skip_bits(const tsr_config_t *c, tsr_kcache_t *kc, const geo_t *g, const tsr_conv2d_params_t *p,
                     uint8_t **out)
{
    *out = NULL;
    uint8_t *buf;
    size_t wb;
    int rc = pack_known(c, g, p, &buf, &wb);
    if (rc || !buf)
        return rc;
    if (g->wsplit == 1) { /* (the rows write_weights packs again: pack_from_memo) */
        size_t klen = 0;
        uint8_t *key = wimg_keybuf(g->cib, g->cob, p, p->w_plan, &klen);
        if (key && tsr_kcache_memo_put(kc, key, klen, buf, wb))
            tsr_err_clear(); /* (not kept: packed again) */
        free(key);
    }
    const size_t blk = (size_t)g->kk * c->wgt_bytes, nblk = (size_t)g->cob * (size_t)g->cib;
    uint8_t *m = calloc(wnz_pre_off(g) + sizeof(int32_t) * (size_t)(g->cob + 1), 1);
    if (!m) {
        free(buf);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    int32_t *pre = (int32_t *)(void *)(m + wnz_pre_off(g));
    for (int ob = 0; ob < g->cob; ob++) {
        int n = 0;
        for (int ib = 0; ib <= g->cib; ib++) {
            /* (ib == cib: an output block without a nonzero block keeps input block 0) */
            const size_t i = (size_t)ob * (size_t)g->cib + (size_t)(ib < g->cib ? ib : 0);
            if ((ib < g->cib && !all_zero(buf + i * blk, blk)) || (ib == g->cib && !n)) {
                m[i >> 3] |= (uint8_t)(1u << (i & 7));
                n++;
            }
        }
        pre[ob + 1] = pre[ob] + n;
    }
    free(buf);
    if ((size_t)pre[g->cob] == nblk)
        free(m);
    else
        *out = m;
    return TSR_OK;
}

/* Block skipping (geo_t.wnz): with the weights known (p->w_plan), a groups-1
 * conv whose packed weights have an all-zero (output block, input block)
 * gets the bits of the kept pairs and their prefix counts in *mem
 * (malloc'ed, the caller frees it after the plan's search); nothing to
 * skip, or weights the plan cannot take: *mem NULL and g->wnz NULL. The
 * bits are kept in the memo (a status byte, then skip_bits' bytes). */
static int geo_skip(const tsr_config_t *c, tsr_kcache_t *kc, geo_t *g, const tsr_conv2d_params_t *p, uint8_t **mem)
{
    *mem = NULL;
    g->wnz = NULL, g->wpre = NULL, g->wnz_hash = 0;
    if (g->dw || !p->w_plan)
        return TSR_OK;
    const size_t msz = wnz_pre_off(g) + sizeof(int32_t) * (size_t)(g->cob + 1);
    const wmemo_key_t key = wmemo_key("skip", g, p);
    uint8_t *val = calloc(1 + msz, 1), *m = NULL;
    if (!val)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = TSR_OK;
    if (tsr_kcache_memo_get(kc, &key, sizeof key, val, 1 + msz)) {
        if (val[0] && !(m = malloc(msz)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        if (m)
            memcpy(m, val + 1, msz);
    } else if (!(rc = skip_bits(c, kc, g, p, &m))) {
        val[0] = m != NULL;
        if (m)
            memcpy(val + 1, m, msz);
        if (tsr_kcache_memo_put(kc, &key, sizeof key, val, 1 + msz))
            tsr_err_clear(); /* (not kept: packed again next time) */
    }
    free(val);
    if (rc || !m) {
        free(m);
        return rc;
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the bits */
    for (size_t i = 0; i < wnz_bytes(g); i++)
        h = (h ^ m[i]) * 1099511628211ull;
    g->wnz = m, g->wpre = (int32_t *)(void *)(m + wnz_pre_off(g)), g->wnz_hash = h;
    *mem = m;
    return TSR_OK;
}

void tsr_conv2d_unpack_output(const tsr_config_t *c, const tsr_conv2d_plan_t *pl, const uint8_t *src, void *y)
{
    if (pl->tensors_owned) {
        tsr_dtensor_unpack(&pl->yt, src, y);
        return;
    }
    const tsr_conv2d_params_t *p = &pl->p;
    uint8_t *out = y;
    size_t i = 0;
    for (int n = 0; n < p->n; n++)
        for (int co = 0; co < p->c_out; co++)
            for (int oy = 0; oy < pl->oh; oy++)
                for (int ox = 0; ox < pl->ow; ox++, i++) {
                    size_t el = (((size_t)(n / c->batch) * pl->cob + (size_t)(co / c->block_out)) * pl->oh + oy) * pl->ow + ox;
                    out[i] = src[el * c->out_bytes + (size_t)(n % c->batch) * c->block_out + (size_t)(co % c->block_out)];
                }
}

/* Generator identity, part of every signature: it changes whenever this
 * file is recompiled, so a cache file written by another build of the
 * lowering (whose tsr_conv2d_build() or tiling may differ) is never used. */
#define GEN_ID OP " lowering v1, built " __DATE__ " " __TIME__

/* The kernel cache signature of p: every parameter tsr_conv2d_build(), the tiling and
 * the uops read. Multipliers and per-channel shift values only reach the
 * constant rows (packed with the weights), so they are left out (layers
 * that differ only in them share one kernel); the signs of per-channel
 * shifts select ALU steps, so they are in. Weight zero points are in (the
 * stream does not read them today; a zero-point correction would). If the
 * lowering starts to depend on another value, add it here. */
static size_t conv2d_sig(const tsr_conv2d_params_t *p, const tsr_add_params_t *fadd, int dwk, int wshare, int lut,
                         const geo_t *g, uint8_t *sig)
{
    size_t n = tsr_kcache_sig_bytes(sig, 0, GEN_ID, sizeof GEN_ID);
    /* the units that shape the kernel are built separately: each one's identity */
    const char *id[4] = {tsr_conv2d_emit_id(), tsr_conv2d_tiling_id(), tsr_cost_id(), tsr_stream_id()};
    for (int i = 0; i < 4; i++)
        n = tsr_kcache_sig_bytes(sig, n, id[i], strlen(id[i]) + 1);
    const int32_t v[] = {p->n,          p->c_in,      p->h,          p->w,         p->c_out,        p->kh,
                         p->kw,         p->stride_h,  p->stride_w,   p->pad_top,   p->pad_left,     p->pad_bottom,
                         p->pad_right,  p->groups,    (int32_t)p->x_dtype, p->x_zp, (int32_t)p->w_dtype,
                         (int32_t)p->y_dtype, p->y_zp, p->act_min,   p->act_max,   p->w_zp_count,   p->rq_count};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        n = tsr_kcache_sig_i32(sig, n, v[i]);
    for (int i = 0; i < p->w_zp_count; i++)
        n = tsr_kcache_sig_i32(sig, n, p->w_zp[i]);
    /* exact requantization: fscale in mulhr's place, no shift rows */
    n = tsr_kcache_sig_i32(sig, n, p->fscale != NULL);
    if (p->fscale) {
    } else if (p->rq_count == 1) {
        n = tsr_kcache_sig_i32(sig, n, p->shift[0]);
    } else {
        int any_pos = 0, any_neg = 0;
        for (int i = 0; i < p->rq_count; i++) {
            any_pos |= p->shift[i] > 0;
            any_neg |= p->shift[i] < 0;
        }
        n = tsr_kcache_sig_i32(sig, n, any_pos);
        n = tsr_kcache_sig_i32(sig, n, any_neg);
    }
    /* a fused add: its zero points and shifts select and fill ALU steps
     * (multipliers and its rqfin row are constants, in for simplicity) */
    /* the depthwise mode's taps (0: the block-diagonal path): one conv, two
     * kernels, whose weight layouts differ too */
    n = tsr_kcache_sig_i32(sig, n, dwk);
    /* shared weight rows: other weight loads and GEMM weight strides */
    n = tsr_kcache_sig_i32(sig, n, wshare);
    /* an activation table in the epilogue (its values are data: a LOAD) */
    n = tsr_kcache_sig_i32(sig, n, lut);
    /* block skipping: the kept pairs shape the uop kernels and loads */
    n = tsr_kcache_sig_i32(sig, n, g->wnz != NULL);
    if (g->wnz)
        n = tsr_kcache_sig_bytes(sig, n, g->wnz, wnz_bytes(g));
    n = tsr_kcache_sig_i32(sig, n, fadd != NULL);
    if (fadd) {
        const int32_t f[] = {fadd->a.zp,    fadd->b.zp,    fadd->y.zp,   fadd->left_shift, fadd->mult_a,
                             fadd->shift_a, fadd->mult_b,  fadd->shift_b, fadd->mult_out,  fadd->shift_out,
                             fadd->act_min, fadd->act_max, fadd->round_once, fadd->bias_once};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            n = tsr_kcache_sig_i32(sig, n, f[i]);
    }
    return n;
}

/* The lowering-specific part of a cached kernel. */
typedef struct {
    tiling_t t;              /* the chosen tiling */
    double cost;             /* the cost model's value for it */
    int8_t set_map[2][2][4]; /* kernel sets the stream uses (geo_t.set_map) */
    int32_t n_sets;          /* how many */
    int32_t nuops;           /* uops in the kernel buffer */
    int32_t dwk;             /* the depthwise mode's taps, 0 when off (also when no tiling of it fit) */
} conv_meta_t;

/* The tiling search reads the geometry and the shape parameters, never
 * the requantization values or weight zero points (they reach it only
 * through geo_t's derived fields, part of the key): layers of one shape
 * share one search. */
typedef struct {
    geo_t g;
    int32_t p[18];
} search_key_t;

static void search_key(const geo_t *g, search_key_t *key)
{
    memset(key, 0, sizeof *key);
    memcpy(&key->g, g, sizeof key->g); /* (geo_init zeroed it, padding included) */
    key->g.c = NULL;
    key->g.p = NULL;
    key->g.kern = NULL;
    key->g.fadd = NULL; /* (key.g.fuse says whether there is one; its values do not shape the tiling) */
    key->g.wnz = NULL;  /* (key.g.wnz_hash stands for the skipped blocks) */
    key->g.wpre = NULL;
    const tsr_conv2d_params_t *p = g->p;
    const int32_t pv[18] = {p->n,       p->c_in,     p->h,       p->w,         p->c_out,    p->kh,
                            p->kw,      p->stride_h, p->stride_w, p->pad_top,  p->pad_left, p->pad_bottom,
                            p->pad_right, p->groups, (int32_t)p->x_dtype, (int32_t)p->w_dtype, (int32_t)p->y_dtype,
                            p->rq_count};
    memcpy(key->p, pv, sizeof key->p);
}

/* Generate the kernel for g (tiling, uops, relocatable stream) and insert
 * it into kc; *ref gets the reference. */
static int generate(tsr_kcache_t *kc, geo_t *g, const uint8_t *sig, size_t sig_len, tsr_kcache_ref_t **ref)
{
    const uint64_t t0 = tsr_mono_ns();
    uint8_t *uops = NULL;
    ibuf_t b = {0};
    tsr_stream_init(&b.s, g->c, 0, 1);
    int rc;
    search_key_t key;
    search_key(g, &key);
    tiling_t memo;
    if (tsr_kcache_memo_get(kc, &key, sizeof key, &memo, sizeof memo) && tsr_conv2d_tiling_fits(g, &memo))
        tsr_conv2d_set_tiling(g, &memo);
    else if ((rc = tsr_conv2d_choose_tiling(g)))
        goto out;
    else
        (void)tsr_kcache_memo_put(kc, &key, sizeof key, &g->t, sizeof g->t);
    g->x_el = g->w_el = g->y_el = g->c_el = g->uop_el = g->r_el = g->l_el = 0; /* relocatable: every buffer at 0 */
    if (g->t.res)
        tsr_conv2d_build_res(g, &b);
    else
        tsr_conv2d_build(g, &b);
    if ((rc = tsr_stream_status(&b.s))) /* (plan_impl checks every field once relocated) */
        goto out;
    memcpy(g->set_map, b.set_map, sizeof g->set_map);
    g->n_sets = b.n_sets;
    g->nuops_res = b.nuops;
    g->kern = b.kern;
    g->nkern = b.nkern;
    if ((rc = tsr_conv2d_encode_uops(g, &uops)))
        goto out;
    conv_meta_t meta;
    memset(&meta, 0, sizeof meta);
    meta.t = g->t;
    memcpy(meta.set_map, g->set_map, sizeof meta.set_map);
    meta.n_sets = g->n_sets;
    meta.nuops = tsr_conv2d_n_uops(g);
    meta.dwk = g->dwk;
    meta.cost = tsr_conv2d_estimate_cycles(g, &b); /* estimated cycles */
    tsr_kernel_t k = {&meta, sizeof meta, b.s.v, b.s.n, uops, (size_t)tsr_conv2d_n_uops(g), tsr_mono_ns() - t0};
    rc = tsr_kcache_insert(kc, sig, sig_len, &k, ref);
out:
    tsr_stream_free(&b.s);
    free(b.kern);
    g->kern = NULL;
    g->nkern = 0;
    free(uops);
    return rc;
}

/* The plan: the kernel from the cache (or generated), the weight and
 * constant buffers, and the stream relocated to x and y (device tensors,
 * not owned) or, when x is NULL, to input and output buffers of its own. */
/* tsr_kcache_fetch's callbacks: a cached kernel of this signature is kept
 * if its tiling still fits (defence in depth: the signature makes this
 * always true), adopting its tiling and kernel sets; else generate. */
typedef struct {
    geo_t *g;
    const uint8_t *sig;
    size_t sig_len;
} conv_kctx_t;

static int kernel_fits(const tsr_kernel_t *k, void *ctx)
{
    geo_t *g = ((conv_kctx_t *)ctx)->g;
    conv_meta_t meta;
    if (k->meta_len != sizeof meta)
        return 0;
    memcpy(&meta, k->meta, sizeof meta);
    if (meta.dwk != g->dwk) { /* a depthwise conv the mode could not tile */
        if (meta.dwk)
            return 0;
        tsr_conv2d_dw_off(g);
    }
    if (!tsr_conv2d_tiling_fits(g, &meta.t))
        return 0;
    tsr_conv2d_set_tiling(g, &meta.t);
    memcpy(g->set_map, meta.set_map, sizeof g->set_map);
    g->n_sets = meta.n_sets;
    g->nuops_res = meta.nuops;
    return meta.n_sets >= 0 && meta.n_sets <= g->kern_sets && k->nuops == (size_t)tsr_conv2d_n_uops(g) &&
           meta.nuops == tsr_conv2d_n_uops(g) && meta.nuops <= (int32_t)g->c->uop_depth;
}

static int kernel_gen(tsr_kcache_t *kc, void *ctx, tsr_kcache_ref_t **ref)
{
    conv_kctx_t *x = ctx;
    return generate(kc, x->g, x->sig, x->sig_len, ref);
}

/* The plan's buffers by memory type, x and y those given (a fused add's
 * residual is the one acc8 buffer). */
static void conv_base(const tsr_conv2d_plan_t *pl, uint64_t x_addr, uint64_t y_addr, uint64_t base[TSR_MEM_COUNT])
{
    memset(base, 0, sizeof(uint64_t) * TSR_MEM_COUNT);
    base[TSR_MEM_UOP] = pl->uop_addr;
    base[TSR_MEM_INP] = x_addr;
    base[TSR_MEM_WGT] = pl->w_addr;
    base[TSR_MEM_ACC] = pl->c_addr;
    base[TSR_MEM_OUT] = y_addr;
    base[TSR_MEM_ACC8] = pl->r_addr;
    base[TSR_MEM_LUT] = pl->l_addr;
}

/* Rebind: the plan's stream, the cached kernel's relocated again to x, y. */
static int conv_bind(const tsr_config_t *c, tsr_conv2d_plan_t *pl, uint64_t x_addr, uint64_t y_addr)
{
    const tsr_kernel_t *k = tsr_kcache_kernel(pl->kref);
    memcpy(pl->insns, k->insns, k->ninsns * sizeof *pl->insns);
    uint64_t base[TSR_MEM_COUNT];
    conv_base(pl, x_addr, y_addr, base);
    return tsr_kcache_relocate(c, pl->insns, k->ninsns, base);
}

/* The plan's own copy of the parameters and their arrays. */
static int own_params(const tsr_conv2d_params_t *params, tsr_conv2d_plan_t *pl)
{
    pl->w_zp = malloc(sizeof(int32_t) * (size_t)params->w_zp_count);
    pl->mult = malloc(sizeof(int32_t) * (size_t)params->rq_count);
    pl->shift = malloc(sizeof(int32_t) * (size_t)params->rq_count);
    pl->fscale = params->fscale ? malloc(sizeof(float) * (size_t)params->rq_count) : NULL;
    if (!pl->w_zp || !pl->mult || !pl->shift || (params->fscale && !pl->fscale))
        return tsr_err(TSR_ENOMEM, "out of memory");
    if (params->fscale)
        memcpy(pl->fscale, params->fscale, sizeof(float) * (size_t)params->rq_count);
    pl->p.fscale = pl->fscale;
    memcpy(pl->w_zp, params->w_zp, sizeof(int32_t) * (size_t)params->w_zp_count);
    memcpy(pl->mult, params->mult, sizeof(int32_t) * (size_t)params->rq_count);
    memcpy(pl->shift, params->shift, sizeof(int32_t) * (size_t)params->rq_count);
    pl->p.w_zp = pl->w_zp;
    pl->p.mult = pl->mult;
    pl->p.shift = pl->shift;
    return TSR_OK;
}

/* The plan's figures from its geometry (tiling adopted or chosen) and kernel k. */
static void plan_fields(const tsr_config_t *c, const geo_t *g, const tsr_kernel_t *k, tsr_conv2d_plan_t *pl)
{
    pl->oh = g->oh;
    pl->ow = g->ow;
    pl->nb = g->nb;
    pl->cib = g->cib;
    pl->wsplit = g->wsplit;
    pl->cob = g->cob;
    pl->depthwise = g->dw;
    pl->dwk = g->dwk;
    pl->wshare = g->wshare;
    pl->wtight = g->wtight;
    pl->toh = g->t.toh;
    pl->tco = g->t.tco;
    pl->tci = g->t.tci;
    pl->rows_in = g->rows_in;
    pl->row_step = g->row_step;
    pl->wp = g->wr;
    pl->tow = g->t.tow;
    pl->nconst = g->nconst;
    pl->co_inner = g->t.co_inner;
    pl->nbuf_inp = g->t.nbi;
    pl->nbuf_acc = g->t.nba;
    pl->resident = g->t.res;
    pl->tiles = g->tiles;
    pl->chunks = g->chunks;
    pl->h_pad = g->h_pad;
    pl->nuops = k->nuops;
    pl->uop_addr = tsr_kcache_uop_addr(pl->kref);
    pl->x_bytes = x_elems(g) * c->inp_bytes;
    pl->w_bytes = w_elems(g) * c->wgt_bytes;
    pl->y_bytes = y_elems(g) * c->out_bytes;
    pl->c_bytes = c_elems(g) * c->acc_bytes;
}

/* This plan's stream: the cached one, relocated to its buffers. A new
 * stream is checked field by field. A cached one is not again (that
 * was half the time of a hit): relocation changed only dram_base and
 * checked it against its field, and every other field is that of a
 * stream that passed this check when it was generated (memory) or was
 * decoded from bits (disk). The driver encodes every stream it submits. */
static int plan_bind(const tsr_config_t *c, tsr_conv2d_plan_t *pl)
{
    uint64_t base[1][TSR_MEM_COUNT];
    conv_base(pl, pl->x_addr, pl->y_addr, base[0]);
    tsr_opplan_stream_t st;
    int rc = tsr_opplan_bind(c, OP, pl->kref, NULL, 1, (const uint64_t(*)[TSR_MEM_COUNT])base,
                             pl->kcache == TSR_KC_MISS || pl->kcache == TSR_KC_NONE, &st);
    return tsr_opplan_take(rc, &st, &pl->insns, &pl->ninsns, &pl->gemm_ops, &pl->alu_ops, &pl->dram_bytes);
}

static int plan_impl(tsr_device_t *dev, const tsr_conv2d_params_t *params, const tsr_add_params_t *fadd,
                     const tsr_act_table_t *act, const tsr_dtensor_t *x, const tsr_dtensor_t *r,
                     const tsr_dtensor_t *y, tsr_conv2d_plan_t *pl)
{
    const uint64_t t0 = tsr_mono_ns();
    if (!dev || !pl)
        return tsr_err(TSR_EINVAL, OP ": NULL device or plan");
    const tsr_config_t *c = tsr_device_config(dev);
    memset(pl, 0, sizeof *pl);
    geo_t g;
    uint8_t *sig = NULL;
    int rc = geo_init(c, params, fadd, &g);
    if (rc)
        return rc;
    pl->p = *params;
    if (fadd) {
        pl->fused = 1;
        pl->fadd = *fadd;
        pl->r_addr = r->addr;
        g.fadd = &pl->fadd;
    }
    if (act) {
        if (!c->act_lut)
            return tsr_err(TSR_EINVAL, OP ": a fused activation table needs config key ACT_LUT > 0");
        if (fadd)
            return tsr_err(TSR_EINVAL, OP ": an activation table and a residual add in one epilogue are not "
                           "supported");
        pl->act = 1;
        g.lut = 1;
    }
    sig = malloc(TSR_KCACHE_MAX_SIG);
    if (!sig || (rc = own_params(params, pl))) {
        rc = sig ? rc : tsr_err(TSR_ENOMEM, "out of memory");
        goto fail;
    }
    g.p = &pl->p;
    tsr_kcache_t *kc = tsr_kcache_get(dev);
    if ((rc = geo_share(c, kc, &g, &pl->p)) || (rc = geo_skip(c, kc, &g, &pl->p, &pl->wnz)))
        goto fail;
    pl->p.w_plan = NULL; /* (the caller's; read only here) */
    /* The kernel: from the device's cache, else generated and inserted. */
    size_t sig_len = conv2d_sig(&pl->p, g.fadd, g.dwk, g.wshare, g.lut, &g, sig);
    if (sig_len > TSR_KCACHE_MAX_SIG && pl->wnz) { /* (too many blocks to name: none skipped) */
        free(pl->wnz);
        pl->wnz = NULL;
        g.wnz = NULL, g.wpre = NULL, g.wnz_hash = 0;
        sig_len = conv2d_sig(&pl->p, g.fadd, g.dwk, g.wshare, g.lut, &g, sig);
    }
    if (sig_len > TSR_KCACHE_MAX_SIG) {
        rc = tsr_err(TSR_EINVAL, OP ": parameters too long for a kernel cache signature (%zu bytes)", sig_len);
        goto fail;
    }
    conv_kctx_t kx = {&g, sig, sig_len};
    const tsr_opplan_kernel_t kk = {sig, sig_len, kernel_fits, kernel_gen, &kx};
    if ((rc = tsr_opplan_fetch(dev, &kk, &pl->kref, &pl->kcache)))
        goto fail;
    const tsr_kernel_t *k = tsr_kcache_kernel(pl->kref);
    conv_meta_t meta;
    memcpy(&meta, k->meta, sizeof meta);
    plan_fields(c, &g, k, pl);
    if (!g.wskip) { /* (a tiling that does not skip: nothing for write_weights to check) */
        free(pl->wnz);
        pl->wnz = NULL;
    }
    /* over device tensors, the plan's input and output are exactly theirs
     * (wsplit 1, the tensors' blocked layout); else its own */
    if (x && pl->wsplit > 1 && !pl->depthwise) {
        rc = tsr_err(TSR_EINVAL,
                     OP ": weight zero points that do not fit int8 (w - w_zp split into %d parts) need the "
                     "input packed %d times, which a device tensor does not hold",
                     pl->wsplit, pl->wsplit);
        goto fail;
    }
    pl->io_owned = !x;
    const tsr_opbuf_t bufs[] = {{pl->x_bytes, x, &pl->x_addr}, {pl->y_bytes, y, &pl->y_addr},
                                {pl->w_bytes, NULL, &pl->w_addr}, {pl->c_bytes, NULL, &pl->c_addr},
                                {act ? TSR_ACT_ENTRIES : 0, NULL, &pl->l_addr}};
    if ((rc = tsr_opplan_buffers(dev, OP, bufs, 5)))
        goto fail;
    if (act && (rc = tsr_mem_write(dev, pl->l_addr, act->v, TSR_ACT_ENTRIES)))
        goto fail;
    if ((rc = plan_bind(c, pl)))
        goto fail;
    pl->cost = meta.cost;
    pl->jit_ns = tsr_mono_ns() - t0;
    free(sig);
    return TSR_OK;
fail:
    free(sig);
    tsr_conv2d_plan_free(dev, pl);
    return rc;
}

void tsr_conv2d_plan_free(tsr_device_t *dev, tsr_conv2d_plan_t *pl)
{
    if (!pl)
        return;
    uint64_t *bufs[5] = {&pl->x_addr, &pl->w_addr, &pl->y_addr, &pl->c_addr, &pl->l_addr};
    for (int i = 0; i < 5; i++)
        if (*bufs[i] && (pl->io_owned || (i != 0 && i != 2))) /* tensors' buffers belong to the tensors */
            tsr_mem_free(dev, *bufs[i]);
    if (pl->tensors_owned) {
        tsr_dtensor_free(dev, &pl->xt);
        tsr_dtensor_free(dev, &pl->yt);
    }
    tsr_kcache_release(pl->kref); /* the uop buffer belongs to the cache entry */
    free(pl->insns);
    free(pl->w_zp);
    free(pl->mult);
    free(pl->shift);
    free(pl->fscale);
    free(pl->wnz);
    memset(pl, 0, sizeof *pl);
}

int tsr_conv2d_plan(tsr_device_t *dev, const tsr_conv2d_params_t *params, tsr_conv2d_plan_t *pl)
{
    /* A thin wrapper over tsr_conv2d_plan_tensors with device tensors of its
     * own, whenever a device tensor can hold the input: one copy of it
     * (tsr_conv2d_input_copies) on a config that can chain (BLOCK_IN ==
     * BLOCK_OUT, 8-bit). Else the input is packed as this lowering needs it
     * (copies per weight part; rows of BLOCK_IN) into buffers of the plan. */
    if (!dev || !pl || !params)
        return plan_impl(dev, params, NULL, NULL, NULL, NULL, NULL, pl);
    const tsr_config_t *c = tsr_device_config(dev);
    int oh, ow, rc = tsr_conv2d_check(params, &oh, &ow);
    tsr_dtensor_t x, y;
    if (rc || tsr_conv2d_input_copies(params) != 1 ||
        tsr_dtensor_init(c, params->n, params->c_in, params->h, params->w, params->x_dtype, params->x_zp, &x) ||
        tsr_dtensor_init(c, params->n, params->c_out, oh, ow, params->y_dtype, params->y_zp, &y)) {
        tsr_err_clear();
        return plan_impl(dev, params, NULL, NULL, NULL, NULL, NULL, pl);
    }
    if ((rc = tsr_dtensor_alloc(dev, &x)) || (rc = tsr_dtensor_alloc(dev, &y)) ||
        (rc = tsr_conv2d_plan_tensors(dev, params, &x, &y, pl))) {
        tsr_dtensor_free(dev, &x);
        tsr_dtensor_free(dev, &y);
        return rc;
    }
    pl->xt = x;
    pl->yt = y;
    pl->tensors_owned = 1;
    return TSR_OK;
}

/* Input tensor x and output shape/dtype checks of a tensor plan, and the
 * device view v of p: int8 values h = x - off in, re-centred y - off out
 * (the requantization's zero point and clamp move with it). */
static int tensor_view(const tsr_conv2d_params_t *p, const tsr_dtensor_t *x, tsr_conv2d_params_t *v, int *oh,
                       int *ow)
{
    int rc = tsr_conv2d_check(p, oh, ow);
    if (rc)
        return rc;
    if (x->n != p->n || x->c != p->c_in || x->h != p->h || x->w != p->w || x->dtype != p->x_dtype ||
        x->zp != p->x_zp)
        return tsr_err(TSR_EINVAL, OP ": input tensor [%d,%d,%d,%d] zp %d does not match the parameters "
                       "[%d,%d,%d,%d] zp %d (or its dtype differs)",
                       x->n, x->c, x->h, x->w, (int)x->zp, p->n, p->c_in, p->h, p->w, (int)p->x_zp);
    *v = *p;
    const int xo = tsr_dtensor_off(p->x_dtype), yo = tsr_dtensor_off(p->y_dtype);
    v->x_dtype = v->y_dtype = TSR_DT_INT8;
    v->x_zp -= xo;
    v->y_zp -= yo;
    v->act_min -= yo;
    v->act_max -= yo;
    return TSR_OK;
}

static int tensor_is(const char *what, const tsr_dtensor_t *t, int n, int c, int h, int w, tsr_dtype_e dt, int32_t zp)
{
    if (t->n != n || t->c != c || t->h != h || t->w != w || t->dtype != dt || t->zp != zp)
        return tsr_err(TSR_EINVAL, OP ": %s tensor [%d,%d,%d,%d] zp %d does not match the parameters "
                       "[%d,%d,%d,%d] zp %d (or its dtype differs)",
                       what, t->n, t->c, t->h, t->w, (int)t->zp, n, c, h, w, (int)zp);
    return TSR_OK;
}

/* The add's a must be exactly the conv's output (shape, dtype, zero point). */
static int add_matches(const tsr_conv2d_params_t *p, const tsr_add_params_t *add, int oh, int ow)
{
    int64_t count;
    int rc = tsr_add_check(add, &count);
    if (rc)
        return rc;
    const tsr_eltwise_desc_t *a = &add->a;
    if (a->n != p->n || a->c != p->c_out || a->h != oh || a->w != ow || a->dtype != p->y_dtype || a->zp != p->y_zp)
        return tsr_err(TSR_EINVAL, OP ": fused add: its input a [%d,%d,%d,%d] zp %d is not the conv's output "
                       "[%d,%d,%d,%d] zp %d (or its dtype differs)",
                       a->n, a->c, a->h, a->w, (int)a->zp, p->n, p->c_out, oh, ow, (int)p->y_zp);
    return TSR_OK;
}

/* The checks of a plan over tensors (add NULL: no fused add) and the device
 * views it plans with: *v of the conv's parameters, *fv of the add's. The
 * plans and tsr_conv2d_presearch both take their arguments from here. */
static int tensor_args(const tsr_conv2d_params_t *p, const tsr_add_params_t *add, const tsr_dtensor_t *x,
                       const tsr_dtensor_t *r, const tsr_dtensor_t *y, tsr_conv2d_params_t *v, tsr_add_params_t *fv)
{
    int oh, ow, rc = tensor_view(p, x, v, &oh, &ow);
    if (rc)
        return rc;
    if (!add)
        return tensor_is("output", y, p->n, p->c_out, oh, ow, p->y_dtype, p->y_zp);
    if ((rc = add_matches(p, add, oh, ow)) ||
        (rc = tensor_is("residual", r, add->b.n, add->b.c, add->b.h, add->b.w, add->b.dtype, add->b.zp)) ||
        (rc = tensor_is("output", y, add->y.n, add->y.c, add->y.h, add->y.w, add->y.dtype, add->y.zp)))
        return rc;
    if (!r->addr || r->bytes != y->bytes)
        return tsr_err(TSR_EINVAL, OP ": fused add: residual tensor without a buffer or of another layout");
    tsr_add_params_device_view(add, fv);
    return TSR_OK;
}

/* The checks and device view of a plan with a fused activation table: the
 * output is the conv's shape in the table's dtype and zero point (any). */
static int act_args(const tsr_conv2d_params_t *p, const tsr_dtensor_t *x, const tsr_dtensor_t *y,
                    tsr_conv2d_params_t *v)
{
    int oh, ow, rc = tensor_view(p, x, v, &oh, &ow);
    return rc ? rc : tensor_is("output", y, p->n, p->c_out, oh, ow, y->dtype, y->zp);
}

int tsr_conv2d_plan_tensors(tsr_device_t *dev, const tsr_conv2d_params_t *params, const tsr_dtensor_t *x,
                            const tsr_dtensor_t *y, tsr_conv2d_plan_t *pl)
{
    if (pl)
        memset(pl, 0, sizeof *pl);
    if (!params || !x || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters or tensor");
    tsr_conv2d_params_t v;
    int rc = tensor_args(params, NULL, x, NULL, y, &v, NULL);
    return rc ? rc : plan_impl(dev, &v, NULL, NULL, x, NULL, y, pl);
}

int tsr_conv2d_plan_tensors_act(tsr_device_t *dev, const tsr_conv2d_params_t *params, const tsr_act_table_t *act,
                                const tsr_dtensor_t *x, const tsr_dtensor_t *y, tsr_conv2d_plan_t *pl)
{
    if (pl)
        memset(pl, 0, sizeof *pl);
    if (!params || !act || !x || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters, table or tensor");
    tsr_conv2d_params_t v;
    int rc = act_args(params, x, y, &v);
    return rc ? rc : plan_impl(dev, &v, NULL, act, x, NULL, y, pl);
}

int tsr_conv2d_plan_tensors_add(tsr_device_t *dev, const tsr_conv2d_params_t *params, const tsr_add_params_t *add,
                                const tsr_dtensor_t *x, const tsr_dtensor_t *r, const tsr_dtensor_t *y,
                                tsr_conv2d_plan_t *pl)
{
    if (pl)
        memset(pl, 0, sizeof *pl);
    if (!params || !add || !x || !r || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL parameters or tensor");
    tsr_conv2d_params_t v;
    tsr_add_params_t fv;
    int rc = tensor_args(params, add, x, r, y, &v, &fv);
    return rc ? rc : plan_impl(dev, &v, &fv, NULL, x, r, y, pl);
}

/* One search of tsr_conv2d_presearch: its own copies of what the search
 * reads, and its result. */
typedef struct {
    tsr_conv2d_params_t v; /* device view of the parameters */
    tsr_add_params_t fv;   /* device view of the fused add */
    geo_t g;               /* geometry; the chosen tiling in g.t */
    search_key_t key;      /* memo key */
    uint8_t *wnz;          /* block skipping's bits (g.wnz; owned) */
    int rc;                /* the search's result */
} presearch_t;

typedef struct {
    presearch_t *s;
    int n;
    atomic_int next; /* next search to take */
} presearch_pool_t;

static void *presearch_worker(void *arg)
{
    presearch_pool_t *pool = arg;
    for (int i; (i = atomic_fetch_add(&pool->next, 1)) < pool->n;) {
        presearch_t *ps = &pool->s[i];
        ps->rc = tsr_conv2d_choose_tiling(&ps->g);
    }
    return NULL;
}

int tsr_conv2d_presearch(tsr_device_t *dev, const tsr_conv2d_job_t *jobs, int n, int nthreads)
{
    if (!dev || (n > 0 && !jobs) || n < 0)
        return tsr_err(TSR_EINVAL, OP ": presearch: NULL device or jobs");
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_kcache_t *kc = tsr_kcache_get(dev);
    if (!kc || n == 0)
        return TSR_OK; /* (no memo to fill: every plan searches for itself) */
    presearch_t *s = calloc((size_t)n, sizeof *s);
    uint8_t *sig = malloc(TSR_KCACHE_MAX_SIG);
    if (!s || !sig) {
        free(s);
        free(sig);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        const tsr_conv2d_job_t *j = &jobs[i];
        presearch_t *ps = &s[m];
        /* the checks of the plan functions; a conv that fails them is left
         * to its plan, which names the problem */
        if (!j->p || !j->x || !j->y || (j->add && !j->r) || (j->act && (j->add || !c->act_lut)) ||
            (j->act ? act_args(j->p, j->x, j->y, &ps->v) : tensor_args(j->p, j->add, j->x, j->r, j->y, &ps->v, &ps->fv)) ||
            geo_init(c, &ps->v, j->add ? &ps->fv : NULL, &ps->g)) {
            tsr_err_clear();
            continue;
        }
        ps->g.lut = j->act != NULL;
        ps->g.p = &ps->v;
        ps->g.fadd = j->add ? &ps->fv : NULL;
        free(ps->wnz); /* (a slot taken again) */
        ps->wnz = NULL;
        if (geo_share(c, kc, &ps->g, &ps->v) || geo_skip(c, kc, &ps->g, &ps->v, &ps->wnz)) {
            tsr_err_clear();
            continue;
        }
        ps->v.w_plan = NULL; /* (the search never reads it) */
        const size_t sig_len = conv2d_sig(&ps->v, ps->g.fadd, ps->g.dwk, ps->g.wshare, ps->g.lut, &ps->g, sig);
        if (sig_len > TSR_KCACHE_MAX_SIG || tsr_kcache_has(kc, sig, sig_len))
            continue; /* its plan takes the cached kernel (or plans without skipping) */
        search_key(&ps->g, &ps->key);
        tiling_t t;
        int dup = tsr_kcache_memo_get(kc, &ps->key, sizeof ps->key, &t, sizeof t);
        for (int k = 0; k < m && !dup; k++)
            dup = !memcmp(&s[k].key, &ps->key, sizeof ps->key);
        if (!dup)
            m++;
    }
    free(sig);
    if (nthreads <= 0)
        nthreads = tsr_jit_threads();
    if (nthreads > m)
        nthreads = m;
    if (nthreads < 1)
        nthreads = 1;
    if (nthreads > 64)
        nthreads = 64;
    presearch_pool_t pool = {s, m, 0};
    pthread_t th[64];
    int started = 0;
    for (; started < nthreads - 1; started++)
        if (pthread_create(&th[started], NULL, presearch_worker, &pool))
            break; /* fewer threads: the others take the work */
    presearch_worker(&pool);
    for (int k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    int rc = TSR_OK;
    for (int k = 0; k < m && !rc; k++)
        if (s[k].rc == TSR_OK)
            rc = tsr_kcache_memo_put(kc, &s[k].key, sizeof s[k].key, &s[k].g.t, sizeof s[k].g.t);
    tsr_err_clear(); /* (a failed search's message: its plan says it again) */
    for (int k = 0; k <= m && k < n; k++)
        free(s[k].wnz);
    free(s);
    return rc;
}

int tsr_conv2d_add_fits(const tsr_config_t *cfg, const tsr_conv2d_params_t *p, const tsr_add_params_t *add)
{
    int oh, ow;
    tsr_add_params_t fv;
    geo_t g;
    if (!cfg || !p || !add || tsr_conv2d_check(p, &oh, &ow) || add_matches(p, add, oh, ow)) {
        tsr_err_clear();
        return 0;
    }
    tsr_add_params_device_view(add, &fv);
    if (geo_init(cfg, p, &fv, &g)) {
        tsr_err_clear();
        return 0;
    }
    /* the smallest tile (one output row and column, one block each way,
     * single buffers): the search considers it, so if it fits the search
     * finds a tiling */
    const tiling_t t = {.toh = 1, .tco = 1, .tci = g.dw ? g.wsplit : 1, .tow = 1, .nbi = 1, .nba = 1};
    return tsr_conv2d_tiling_fits(&g, &t);
}

int tsr_conv2d_bind(tsr_device_t *dev, tsr_conv2d_plan_t *pl, const tsr_dtensor_t *x, const tsr_dtensor_t *y)
{
    if (!dev || !pl || !pl->kref || !x || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL device, plan or tensor");
    if (pl->io_owned)
        return tsr_err(TSR_EINVAL, OP ": the plan owns its input and output buffers (plan it over tensors)");
    if (x->bytes != pl->x_bytes || y->bytes != pl->y_bytes || !x->addr || !y->addr)
        return tsr_err(TSR_EINVAL, OP ": device tensors do not match the plan's input/output layout");
    const tsr_config_t *c = tsr_device_config(dev);
    int rc = conv_bind(c, pl, x->addr, y->addr);
    if (rc)
        return tsr_err_prefix(rc, OP ": ");
    pl->x_addr = x->addr;
    pl->y_addr = y->addr;
    return TSR_OK;
}

int tsr_conv2d_write_input(tsr_device_t *dev, const tsr_conv2d_plan_t *pl, const void *x)
{
    uint8_t *buf = malloc(pl->x_bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    tsr_conv2d_pack_input(tsr_device_config(dev), pl, x, buf);
    int rc = tsr_mem_write(dev, pl->x_addr, buf, pl->x_bytes);
    free(buf);
    return rc;
}

/* write_weights' pack from the memo: a groups-1 conv with one weight part
 * whose weights (the very bytes: wimg_keybuf) skip_bits packed at plan time takes those
 * rows; the constants from the weights' sums, the skipped blocks checked.
 * 1 when taken (*rc the check's result), 0: pack them. */
static int pack_from_memo(tsr_device_t *dev, const tsr_conv2d_plan_t *pl, const void *w, const int32_t *bias,
                          uint8_t *wdst, uint8_t *cdst, int *rc)
{
    const tsr_conv2d_params_t *p = &pl->p;
    if (!w || pl->wshare || pl->depthwise || pl->wsplit != 1 || p->groups != 1 || !tsr_dt_ok(p->w_dtype))
        return 0;
    size_t klen = 0;
    uint8_t *key = wimg_keybuf(pl->cib, pl->cob, p, w, &klen);
    const int hit = key && tsr_kcache_memo_get(tsr_kcache_get(dev), key, klen, wdst, pl->w_bytes);
    free(key);
    if (!hit)
        return 0;
    const tsr_config_t *c = tsr_device_config(dev);
    const uint8_t *src = w;
    const size_t n = (size_t)p->c_in * (size_t)p->kh * (size_t)p->kw;
    const int u8 = p->w_dtype == TSR_DT_UINT8;
    memset(cdst, 0, pl->c_bytes);
    for (int co = 0; co < p->c_out; co++, src += n) {
        int64_t sum = 0;
        if (u8)
            for (size_t i = 0; i < n; i++)
                sum += src[i];
        else
            for (size_t i = 0; i < n; i++)
                sum += (int8_t)src[i];
        pack_consts_co(c, pl, bias, co, sum - (int64_t)p->w_zp[p->w_zp_count == 1 ? 0 : co] * (int64_t)n, cdst);
    }
    if (pl->fused)
        pack_consts_fused(c, pl, cdst);
    *rc = skip_check(c, pl, wdst);
    return 1;
}

int tsr_conv2d_write_weights_buf(tsr_device_t *dev, const tsr_conv2d_plan_t *pl, const void *w, const int32_t *bias,
                                 uint8_t *buf)
{
    int rc = TSR_OK;
    if (!pack_from_memo(dev, pl, w, bias, buf, buf + pl->w_bytes, &rc))
        rc = tsr_conv2d_pack_weights(tsr_device_config(dev), pl, w, bias, buf, buf + pl->w_bytes);
    if (!rc && !(rc = tsr_mem_write(dev, pl->w_addr, buf, pl->w_bytes)))
        rc = tsr_mem_write(dev, pl->c_addr, buf + pl->w_bytes, pl->c_bytes);
    return rc;
}

int tsr_conv2d_write_weights(tsr_device_t *dev, const tsr_conv2d_plan_t *pl, const void *w, const int32_t *bias)
{
    uint8_t *buf = malloc(pl->w_bytes + pl->c_bytes);
    int rc = buf ? tsr_conv2d_write_weights_buf(dev, pl, w, bias, buf) : tsr_err(TSR_ENOMEM, "out of memory");
    free(buf);
    return rc;
}

int tsr_conv2d_exec(tsr_device_t *dev, const tsr_conv2d_plan_t *pl)
{
    int rc = tsr_submit(dev, pl->insns, pl->ninsns);
    if (!rc)
        rc = tsr_wait(dev, -1);
    return rc;
}

int tsr_conv2d_read_output(tsr_device_t *dev, const tsr_conv2d_plan_t *pl, void *y)
{
    uint8_t *buf = malloc(pl->y_bytes);
    if (!buf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = tsr_mem_read(dev, pl->y_addr, buf, pl->y_bytes);
    if (!rc)
        tsr_conv2d_unpack_output(tsr_device_config(dev), pl, buf, y);
    free(buf);
    return rc;
}

int tsr_conv2d_run(tsr_device_t *dev, const tsr_conv2d_params_t *p, const void *x, const void *w,
                   const int32_t *bias, void *y)
{
    if (!x || !w || !y)
        return tsr_err(TSR_EINVAL, OP ": NULL input, weight or output data");
    tsr_conv2d_plan_t pl;
    tsr_conv2d_params_t pw;
    if (p) {
        pw = *p;
        pw.w_plan = w; /* (the weights are known: identical blocks can share one copy) */
    }
    int rc = tsr_conv2d_plan(dev, p ? &pw : NULL, &pl);
    if (rc)
        return rc;
    if (!(rc = tsr_conv2d_write_weights(dev, &pl, w, bias)) && !(rc = tsr_conv2d_write_input(dev, &pl, x)) &&
        !(rc = tsr_conv2d_exec(dev, &pl)))
        rc = tsr_conv2d_read_output(dev, &pl, y);
    tsr_conv2d_plan_free(dev, &pl);
    return rc;
}
