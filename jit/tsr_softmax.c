/*
 * tsr_softmax: the quantized Softmax along w over device tensors (see
 * tsr_softmax.h for the values; jit/operators.md "softmax").
 *
 * A device tensor's rows are (nb, cb, h, w) with the BATCH x BLOCK lanes
 * (batch items, channels) in a row, so one softmax row of every lane is
 * the w consecutive rows of one group (nb, cb, h) (spatial: the h*w rows
 * of (nb, cb)): the reductions are ALU
 * ops whose loop steps src over a group's rows with dst factor 0.
 *
 * Accumulator rows: X [0, GL) the chunk (G groups of L rows), B and C two
 * copies for the table lookups, then per group M (max, then -max), S
 * (sum), NS (-S), Q (quotient), RM (remainder), TT (scratch), and the
 * rqfin row. Tables 0, 1, 2 hold the signed base-256 digits of E (low,
 * middle, high), indexed by (-d) & 255: X = h - m is -d, whose low byte
 * the lut op reads.
 *
 * Per tile of G groups (one pass when L = w; else three passes over the
 * chunks of the one group: max, sum, output):
 *   LOAD acc8 X; M = mov -128; max M, X; M = mul -1            (row max, negated)
 *   X = add X, M (-d); B = mov X; C = mov X; X = lut 2; X = shr -8;
 *   B = lut 1; X = add B; X = shr -8; C = lut 0; X = add C     (X = E(d))
 *   S = mov 0; add S, X                                         (row sum)
 *   NS = -S; RM = 1 << P; Q = 0; step; 30 x (RM <<= 1; Q <<= 1; step)
 *     step: TT = RM + NS; TT = min(max(TT + 1, 0), 1) (RM >= S);
 *           Q += TT; TT = TT * NS; RM += TT                     (Q = floor(2^(30+P) / S))
 *   X = mul ys; X = mulhr Q; X = rqfin                          (y - off_y)
 *   STORE X (the next tile's first LOAD waits for it: one buffer)
 */
#include "tsr_softmax.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_dtype.h"
#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_jitutil.h"
#include "tsr_stream.h"

#define SM_UOPS 48  /* room for the stream's distinct (dst, src) uops */
#define SM_VECS 6   /* per-group rows: M, S, NS, Q, RM, TT */
#define SM_PMAX 22  /* E(0) = 2^P in three signed base-256 digits */

/* ------------------------------------------------------------- form */

static int check_q(const char *what, tsr_dtype_e dt, float scale, int32_t zp)
{
    if (!tsr_dt_ok(dt))
        return tsr_err(TSR_EINVAL, "softmax: %s dtype %d must be int8 or uint8", what, (int)dt);
    if (!(scale > 0.0f) || !isfinite(scale) || !isnormal(scale))
        return tsr_err(TSR_EINVAL, "softmax: %s scale %g must be positive, normal and finite", what, (double)scale);
    if (zp < tsr_dt_min(dt) || zp > tsr_dt_max(dt))
        return tsr_err(TSR_EINVAL, "softmax: %s zero point %d outside [%d, %d]", what, (int)zp, (int)tsr_dt_min(dt),
                       (int)tsr_dt_max(dt));
    return TSR_OK;
}

int tsr_softmax_form(const tsr_softmax_params_t *p, tsr_softmax_form_t *f)
{
    if (!p || !f)
        return tsr_err(TSR_EINVAL, "softmax: NULL parameters or form");
    if (p->n < 1 || p->c < 1 || p->h < 1 || p->w < 1)
        return tsr_err(TSR_EINVAL, "softmax: shape [%d, %d, %d, %d] must be positive", p->n, p->c, p->h, p->w);
    if ((int64_t)p->n * p->c * p->h * p->w > INT32_MAX)
        return tsr_err(TSR_EINVAL, "softmax: more than 2^31 - 1 elements");
    int rc;
    if ((rc = check_q("input", p->x_dtype, p->x_scale, p->x_zp)) ||
        (rc = check_q("output", p->y_dtype, p->y_scale, p->y_zp)))
        return rc;
    const float ysf = floorf(1.0f / p->y_scale); /* ONNX Runtime's floor(1.0F / y_scale), float32 */
    if (!(ysf >= 1.0f && ysf <= 32767.0f))
        return tsr_err(TSR_EINVAL, "softmax: floor(1 / output scale) = %g is outside [1, 32767]", (double)ysf);
    const int32_t ys = (int32_t)ysf;
    /* P: E(0) = 2^P in three table digits; the sum w * 2^P <= 2^30 (the division's remainder doubles in
       int32); E * ys < 2^31 (the product before mulhr) */
    const int64_t len = p->spatial ? (int64_t)p->h * p->w : p->w;
    int lw = 0;
    while (((int64_t)1 << lw) < len)
        lw++;
    int P = SM_PMAX;
    if (30 - lw < P)
        P = 30 - lw;
    while (P > 0 && ((int64_t)ys << P) > INT32_MAX)
        P--;
    if (P < 8)
        return tsr_err(TSR_EINVAL, "softmax: rows of %lld with floor(1 / output scale) = %d leave %d bits for the "
                       "exponent (8 needed)", (long long)len, (int)ys, P);
    f->p = P;
    f->ys = ys;
    for (int d = 0; d < 256; d++)
        f->e[d] = (int32_t)floor(ldexp(exp(-(double)d * (double)p->x_scale), P) + 0.5);
    return TSR_OK;
}

/* ------------------------------------------------------------- the plan */

void tsr_softmax_plan_free(tsr_device_t *dev, tsr_softmax_plan_t *pl)
{
    if (!pl)
        return;
    if (pl->c_addr && dev)
        tsr_mem_free(dev, pl->c_addr);
    free(pl->insns);
    memset(pl, 0, sizeof *pl);
}

/* The stream under construction and its uop table. */
typedef struct sm_ctx {
    tsr_stream_t b;
    const tsr_config_t *c;
    tsr_uop_t u[SM_UOPS];
    int nu;
    int rc;
    uint64_t alu_ops;
} sm_ctx_t;

static uint32_t uop(sm_ctx_t *s, uint32_t dst, uint32_t src)
{
    for (int i = 0; i < s->nu; i++)
        if (s->u[i].dst == dst && s->u[i].src == src)
            return (uint32_t)i;
    if (s->nu == SM_UOPS) {
        if (!s->rc)
            s->rc = tsr_err(TSR_EINVAL, "softmax: more than %d uops", SM_UOPS);
        return 0;
    }
    s->u[s->nu] = (tsr_uop_t){dst, src, 0};
    return (uint32_t)s->nu++;
}

/* One ALU instruction: rows dst + i*dfo + j*dfi (and src likewise) for i < io, j < ii; imm when
   src < 0. */
static void alu(sm_ctx_t *s, uint32_t op, uint32_t dst, int64_t src, int32_t imm, uint32_t io, uint32_t dfo,
                uint32_t sfo, uint32_t ii, uint32_t dfi, uint32_t sfi)
{
    const uint32_t k = uop(s, dst, src < 0 ? 0 : (uint32_t)src);
    tsr_insn_t *in = tsr_stream_alu(&s->b, op, k, k + 1);
    tsr_stream_loops(in, io, dfo, src < 0 ? 0 : sfo, ii, dfi, src < 0 ? 0 : sfi);
    if (src < 0)
        in->use_imm = 1, in->imm = imm;
    s->alu_ops += (uint64_t)io * ii;
}

/* Over n rows from dst (with src rows from src when src >= 0, stepping alike): io x ii = n */
static void alu_rows(sm_ctx_t *s, uint32_t op, uint32_t dst, int64_t src, int32_t imm, uint32_t g, uint32_t l)
{
    alu(s, op, dst, src, imm, g, l, l, l, 1, 1);
}

/* E(d) into X's g x l rows from X = -d (B, C scratch). */
static void emit_exp(sm_ctx_t *s, uint32_t X, uint32_t B, uint32_t C, uint32_t g, uint32_t l)
{
    alu_rows(s, TSR_ALU_MOV, B, X, 0, g, l);
    alu_rows(s, TSR_ALU_MOV, C, X, 0, g, l);
    alu_rows(s, TSR_ALU_LUT, X, -1, 2, g, l);
    alu_rows(s, TSR_ALU_SHR, X, -1, -8, g, l);
    alu_rows(s, TSR_ALU_LUT, B, -1, 1, g, l);
    alu_rows(s, TSR_ALU_ADD, X, B, 0, g, l);
    alu_rows(s, TSR_ALU_SHR, X, -1, -8, g, l);
    alu_rows(s, TSR_ALU_LUT, C, -1, 0, g, l);
    alu_rows(s, TSR_ALU_ADD, X, C, 0, g, l);
}

/* Per group (g rows from v): dst = op(dst, src row of the group) over the group's l rows of X. */
static void reduce(sm_ctx_t *s, uint32_t op, uint32_t v, uint32_t X, uint32_t g, uint32_t l)
{
    alu(s, op, v, X, 0, g, 1, l, l, 0, 1);
}

/* X's rows op= the group's vector row v (src factor 0 over the group's rows). */
static void bcast(sm_ctx_t *s, uint32_t op, uint32_t X, uint32_t v, uint32_t g, uint32_t l)
{
    alu(s, op, X, v, 0, g, l, 1, l, 1, 0);
}

/* Q = floor(2^(30+P) / S) over g groups (rows of S, NS, Q, RM, TT). */
static void emit_div(sm_ctx_t *s, int P, uint32_t S, uint32_t NS, uint32_t Q, uint32_t RM, uint32_t TT, uint32_t g)
{
    alu(s, TSR_ALU_MOV, NS, S, 0, g, 1, 1, 1, 0, 0);
    alu(s, TSR_ALU_MUL, NS, -1, -1, g, 1, 0, 1, 0, 0);
    alu(s, TSR_ALU_MOV, RM, -1, 1, g, 1, 0, 1, 0, 0);
    alu(s, TSR_ALU_SHR, RM, -1, -P, g, 1, 0, 1, 0, 0);
    alu(s, TSR_ALU_MOV, Q, -1, 0, g, 1, 0, 1, 0, 0);
    for (int j = 0; j <= 30; j++) {
        if (j) {
            alu(s, TSR_ALU_SHR, RM, -1, -1, g, 1, 0, 1, 0, 0);
            alu(s, TSR_ALU_SHR, Q, -1, -1, g, 1, 0, 1, 0, 0);
        }
        /* TT = [RM >= S]: RM - S + 1 > 0 (|RM - S| < 2^30: no wrap) */
        alu(s, TSR_ALU_MOV, TT, RM, 0, g, 1, 1, 1, 0, 0);
        alu(s, TSR_ALU_ADD, TT, NS, 0, g, 1, 1, 1, 0, 0);
        alu(s, TSR_ALU_ADD, TT, -1, 1, g, 1, 0, 1, 0, 0);
        alu(s, TSR_ALU_MAX, TT, -1, 0, g, 1, 0, 1, 0, 0);
        alu(s, TSR_ALU_MIN, TT, -1, 1, g, 1, 0, 1, 0, 0);
        alu(s, TSR_ALU_ADD, Q, TT, 0, g, 1, 1, 1, 0, 0);
        alu(s, TSR_ALU_MUL, TT, NS, 0, g, 1, 1, 1, 0, 0);
        alu(s, TSR_ALU_ADD, RM, TT, 0, g, 1, 1, 1, 0, 0);
    }
}

int tsr_softmax_plan_tensors(tsr_device_t *dev, const tsr_softmax_params_t *p, const tsr_dtensor_t *x,
                             const tsr_dtensor_t *y, tsr_softmax_plan_t *pl)
{
    if (!pl)
        return tsr_err(TSR_EINVAL, "softmax: NULL plan");
    memset(pl, 0, sizeof *pl);
    if (!dev || !p || !x || !y)
        return tsr_err(TSR_EINVAL, "softmax: NULL device, parameters or tensor");
    int rc = tsr_softmax_form(p, &pl->form);
    if (rc)
        return rc;
    const tsr_config_t *c = tsr_device_config(dev);
    if (c->act_lut < 4)
        return tsr_err(TSR_EINVAL, "softmax: the exponent needs three activation tables (config key ACT_LUT >= 4; "
                       "this config has %d)", c->act_lut);
    if (c->acc_width != 32)
        return tsr_err(TSR_EINVAL, "softmax: needs 32-bit accumulators (this config's are %d bits)", c->acc_width);
    if (!x->addr || !y->addr)
        return tsr_err(TSR_EINVAL, "softmax: a tensor without a buffer");
    const tsr_dtensor_t *t2[2] = {x, y};
    const tsr_dtype_e dt[2] = {p->x_dtype, p->y_dtype};
    const int32_t zp[2] = {p->x_zp, p->y_zp};
    for (int i = 0; i < 2; i++)
        if (t2[i]->n != p->n || t2[i]->c != p->c || t2[i]->h != p->h || t2[i]->w != p->w || t2[i]->dtype != dt[i] ||
            t2[i]->zp != zp[i])
            return tsr_err(TSR_EINVAL, "softmax: %s tensor [%d, %d, %d, %d] %s zp %d is not the parameters' [%d, %d, "
                           "%d, %d] %s zp %d", i ? "output" : "input", t2[i]->n, t2[i]->c, t2[i]->h, t2[i]->w,
                           tsr_dtype_name(t2[i]->dtype), (int)t2[i]->zp, p->n, p->c, p->h, p->w,
                           tsr_dtype_name(dt[i]), (int)zp[i]);
    const uint64_t rb = c->acc8_bytes;
    if (rb != (uint64_t)(x->batch * x->block) || c->out_bytes != rb || x->bytes != y->bytes)
        return tsr_err(TSR_EINVAL, "softmax: the tensors' rows are not this config's %u-byte acc8 rows",
                       c->acc8_bytes);
    const uint64_t rows = x->bytes / rb, W = p->spatial ? (uint64_t)p->h * (uint64_t)p->w : (uint64_t)p->w,
                   groups = rows / W;
    if (x->addr % rb || y->addr % rb || groups * W != rows ||
        (x->addr + x->bytes) / rb > UINT32_MAX || (y->addr + y->bytes) / rb > UINT32_MAX)
        return tsr_err(TSR_EINVAL, "softmax: tensor buffers not aligned to their rows or beyond the DRAM the "
                       "instruction fields address");
    /* the tile: G groups of L rows, 3 GL + 6 G + 1 accumulator rows */
    const uint64_t depth = c->acc_depth, loop_max = (1u << TSR_LOOP_BITS) - 1;
    uint64_t G, L;
    if (3 * W + SM_VECS + 1 <= depth && W <= loop_max) {
        L = W;
        G = (depth - 1) / (3 * W + SM_VECS);
        G = G > groups ? groups : G;
        G = G > loop_max ? loop_max : G;
    } else {
        G = 1;
        L = (depth - 1 - SM_VECS) / 3;
        L = L > loop_max ? loop_max : L;
        if (depth < 1 + SM_VECS + 3 * 1 || L < 1)
            return tsr_err(TSR_EINVAL, "softmax: the accumulator buffer (%u rows) is too small", c->acc_depth);
    }
    const uint64_t nch = (W + L - 1) / L, tiles = (groups + G - 1) / G;
    if (tiles > INT32_MAX)
        return tsr_err(TSR_EINVAL, "softmax: too many tiles");
    pl->groups = (uint32_t)groups, pl->len = (uint32_t)W, pl->tile_groups = (uint32_t)G, pl->chunk = (uint32_t)L;
    pl->tiles = (int)tiles;
    const uint32_t X = 0, B = (uint32_t)(G * L), C = (uint32_t)(2 * G * L), M = (uint32_t)(3 * G * L),
                   S = M + (uint32_t)G, NS = S + (uint32_t)G, Q = NS + (uint32_t)G, RM = Q + (uint32_t)G,
                   TT = RM + (uint32_t)G, CQ = TT + (uint32_t)G;
    const int P = pl->form.p;
    const int32_t offy = tsr_dt_off(p->y_dtype);

    /* constants: three tables (256 B each), the rqfin row, the uops */
    const uint64_t ab = c->acc_bytes, ub = c->uop_bytes;
    uint64_t al = ab > ub ? ab : ub;
    al = al > 256 ? al : 256;
    const uint64_t o_acc = (3 * 256 + al - 1) / al * al, o_uop = o_acc + (ab + al - 1) / al * al;
    const uint64_t cbytes = o_uop + SM_UOPS * ub;
    if ((rc = tsr_mem_alloc(dev, cbytes, &pl->c_addr)))
        return rc;
    if (pl->c_addr % al) {
        rc = tsr_err(TSR_EINVAL, "softmax: constant buffer at 0x%llx is not aligned", (unsigned long long)pl->c_addr);
        goto fail;
    }
    uint8_t *cb = calloc(1, cbytes);
    if (!cb) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto fail;
    }
    for (int d = 0; d < 256; d++) { /* signed base-256 digits of E(d) at index (-d) & 255 */
        int32_t e = pl->form.e[d];
        const int i = (256 - d) & 255;
        for (int k = 0; k < 3; k++) {
            const int32_t dg = ((e + 128) & 255) - 128;
            cb[256 * k + i] = (uint8_t)(int8_t)dg;
            e = (e - dg) / 256;
        }
    }
    {
        /* rqfin: shift P - 1, + (y_zp - off_y), no lower bound (q >= 0), the upper at 255 - off_y */
        const uint32_t rq = (uint32_t)(P - 1) | ((uint32_t)(p->y_zp - offy) & 511u) << 5 | (256u << 14) |
                            ((uint32_t)(255 - offy) & 511u) << 23;
        for (uint64_t l = 0; l < ab / 4; l++)
            memcpy(cb + o_acc + 4 * l, &rq, 4);
    }

    sm_ctx_t s;
    memset(&s, 0, sizeof s);
    s.c = c;
    tsr_stream_init(&s.b, c, 0, 0);
    const size_t ui = tsr_stream_uops(&s.b, (uint32_t)((pl->c_addr + o_uop) / ub), 0);
    tsr_stream_load(&s.b, TSR_MEM_LUT, 0, (uint32_t)(pl->c_addr / 256), 1, 3, 3);
    tsr_stream_load(&s.b, TSR_MEM_ACC, CQ, (uint32_t)((pl->c_addr + o_acc) / ab), 1, 1, 1);
    const uint32_t xe = (uint32_t)(x->addr / rb), ye = (uint32_t)(y->addr / rb);
    int stored = 0; /* a STORE of X's out rows is pending: the next X LOAD waits for it */
    for (uint64_t t = 0; t < tiles; t++) {
        const uint64_t g0 = t * G, g = groups - g0 < G ? groups - g0 : G;
        const uint32_t gg = (uint32_t)g;
        for (int pass = nch == 1 ? 2 : 0; pass < 3; pass++) {
            /* nch == 1: one pass does it all; else pass 0 the max, 1 the sum, 2 the output */
            if (pass == 0 || nch == 1)
                alu(&s, TSR_ALU_MOV, M, -1, -128, gg, 1, 0, 1, 0, 0);
            if (pass == 1 || nch == 1)
                alu(&s, TSR_ALU_MOV, S, -1, 0, gg, 1, 0, 1, 0, 0);
            for (uint64_t ch = 0; ch < nch; ch++) {
                const uint64_t r0 = g0 * W + ch * L, l = W - ch * L < L ? W - ch * L : L;
                const uint32_t ll = (uint32_t)l;
                if (stored)
                    tsr_stream_wait(&s.b, TSR_Q_ST2CMP);
                stored = 0;
                /* g groups of l rows: contiguous when the whole row is on chip (l = W) or g = 1 */
                tsr_stream_load(&s.b, TSR_MEM_ACC8, X, xe + (uint32_t)r0, 1, (uint32_t)(g * l), (uint32_t)(g * l));
                if (pass == 0 || nch == 1)
                    reduce(&s, TSR_ALU_MAX, M, X, gg, ll);
                if (pass == 0)
                    continue;
                if (nch == 1)
                    alu(&s, TSR_ALU_MUL, M, -1, -1, gg, 1, 0, 1, 0, 0);
                bcast(&s, TSR_ALU_ADD, X, M, gg, ll); /* -d */
                emit_exp(&s, X, B, C, gg, ll);
                if (pass == 1 || nch == 1)
                    reduce(&s, TSR_ALU_ADD, S, X, gg, ll);
                if (nch == 1)
                    emit_div(&s, P, S, NS, Q, RM, TT, gg);
                if (pass == 1)
                    continue;
                alu_rows(&s, TSR_ALU_MUL, X, -1, pl->form.ys, gg, ll);
                bcast(&s, TSR_ALU_MULHR, X, Q, gg, ll);
                alu(&s, TSR_ALU_RQFIN, X, CQ, 0, gg, ll, 0, ll, 1, 0);
                tsr_stream_signal(&s.b, TSR_Q_CMP2ST);
                tsr_stream_wait(&s.b, TSR_Q_CMP2ST);
                tsr_stream_store(&s.b, X, ye + (uint32_t)r0, 1, (uint32_t)(g * l), (uint32_t)(g * l));
                tsr_stream_signal(&s.b, TSR_Q_ST2CMP);
                stored = 1;
                pl->dram_bytes += 2 * g * l * rb;
            }
            if (pass == 0)
                alu(&s, TSR_ALU_MUL, M, -1, -1, gg, 1, 0, 1, 0, 0);
            if (pass == 1)
                emit_div(&s, P, S, NS, Q, RM, TT, gg);
        }
        if (nch > 1)
            pl->dram_bytes += 2 * g * W * rb; /* the max and sum passes' loads */
    }
    if (s.rc)
        rc = s.rc;
    else if ((uint64_t)s.nu > c->uop_depth)
        rc = tsr_err(TSR_EINVAL, "softmax: %d uops do not fit the uop buffer (%u)", s.nu, c->uop_depth);
    tsr_stream_set_uops(&s.b, ui, (uint32_t)s.nu);
    for (int k = 0; k < s.nu && !rc; k++) {
        uint64_t raw = 0;
        rc = tsr_uop_encode(c, &s.u[k], &raw);
        for (uint64_t i = 0; i < ub; i++)
            cb[o_uop + (uint64_t)k * ub + i] = (uint8_t)(raw >> (8 * i));
    }
    if (!rc)
        rc = tsr_mem_write(dev, pl->c_addr, cb, cbytes);
    free(cb);
    if (!rc && !(rc = tsr_stream_finish(&s.b)))
        rc = tsr_stream_check(&s.b, "softmax");
    pl->alu_ops = s.alu_ops;
    tsr_stream_take(&s.b, &pl->insns, &pl->ninsns);
    tsr_stream_free(&s.b);
    if (rc)
        goto fail;
    return TSR_OK;
fail:
    tsr_softmax_plan_free(dev, pl);
    return rc;
}

int tsr_softmax_exec(tsr_device_t *dev, const tsr_softmax_plan_t *pl)
{
    return tsr_jit_run_stream(dev, "softmax", pl ? pl->insns : NULL, pl ? pl->ninsns : 0);
}

int tsr_softmax_run(tsr_device_t *dev, const tsr_softmax_params_t *p, const void *x, void *y)
{
    if (!dev || !p || !x || !y)
        return tsr_err(TSR_EINVAL, "softmax: NULL device, parameters or data");
    tsr_softmax_form_t f;
    int rc = tsr_softmax_form(p, &f);
    if (rc)
        return rc;
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_dtensor_t t[2];
    memset(t, 0, sizeof t);
    if (!(rc = tsr_dtensor_init(c, p->n, p->c, p->h, p->w, p->x_dtype, p->x_zp, &t[0])))
        rc = tsr_dtensor_alloc(dev, &t[0]);
    if (!rc && !(rc = tsr_dtensor_init(c, p->n, p->c, p->h, p->w, p->y_dtype, p->y_zp, &t[1])))
        rc = tsr_dtensor_alloc(dev, &t[1]);
    if (!rc)
        rc = tsr_dtensor_write_nchw(dev, &t[0], x);
    tsr_softmax_plan_t pl;
    memset(&pl, 0, sizeof pl);
    if (!rc)
        rc = tsr_softmax_plan_tensors(dev, p, &t[0], &t[1], &pl);
    if (!rc)
        rc = tsr_softmax_exec(dev, &pl);
    if (!rc)
        rc = tsr_dtensor_read_nchw(dev, &t[1], y);
    tsr_softmax_plan_free(dev, &pl);
    for (int i = 0; i < 2; i++)
        tsr_dtensor_free(dev, &t[i]);
    return rc;
}
