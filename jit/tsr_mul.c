/*
 * tsr_mul: a tensor times a per-channel vector over device tensors (see
 * tsr_mul.h for the values, the per-row ALU sequence and the schedule):
 * the parameter check, the search for the integer form, the plan and the
 * stream.
 *
 * On-chip rows: inp [0, TI) and [TI, 2TI) the halves x's rows are loaded
 * into; wgt 0 the identity block; acc [0, T) and [T, 2T) the two halves of
 * x's tiles, 2T the multiplier row (M, or scale's bits for fscale, in every
 * lane), 2T + 1 the rqfin row, 2T + 2 ... the tile's vector rows (one per
 * block).
 *
 * Stream, tile t of R rows in half p covering blocks k0 .. k0 + m - 1:
 *   LOAD uop (the eleven uops below), LOAD acc (the two constant rows), LOAD wgt (the identity)
 *   per tile: [when its blocks differ from the previous tile's]
 *             LOAD acc8 s rows k0 .. -> vector rows, [ALU add imm], [ALU shr imm]     (compute stage)
 *             [wait compute->load: tile t-2's GEMM has read input half p]
 *             LOAD inp x rows of the tile -> input half p (pushes "loaded")           (load stage)
 *             [wait store->compute: tile t-2's STORE has read half p]
 *             ALU mov imm -x_zp', GEMM (pops "loaded"; pushes "half free" for t+2),
 *             ALU mul (src: the block's vector row, factor 0 over its H*W rows),
 *             [ALU add imm D] ALU mulhr|fscale (src: row 2T) ALU rqfin (src: row 2T+1)  (pushes "done")
 *             STORE half p -> y rows (pops "done"; pushes "drained" for tile t+2, the last for FINISH)
 * A tile's vector rows are rewritten only after the previous tile's ops
 * that read them (one stage, program order).
 */
#include "tsr_mul.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_dtype.h"
#include "tsr_error.h"
#include "tsr_jitutil.h"
#include "tsr_isa.h"
#include "tsr_stream.h"

#define PMAX 65025 /* |(x - x_zp) * (s - s_zp)| <= 255 * 255 */
#define KSHIFT 15  /* the integer form's products p * 2^15: |p| * 2^15 + 2^15 < 2^31 */

/* ------------------------------------------------------------ checks */

static int check_desc(const char *what, const tsr_eltwise_desc_t *d)
{
    if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1)
        return tsr_err(TSR_EINVAL, "mul: %s shape [%d, %d, %d, %d] must be positive", what, d->n, d->c, d->h, d->w);
    if ((int64_t)d->n * d->c * d->h * d->w > INT32_MAX)
        return tsr_err(TSR_EINVAL, "mul: %s has more than 2^31 - 1 elements", what);
    if (!tsr_dt_ok(d->dtype))
        return tsr_err(TSR_EINVAL, "mul: %s dtype %d must be int8 or uint8", what, (int)d->dtype);
    if (d->zp < tsr_dt_min(d->dtype) || d->zp > tsr_dt_max(d->dtype))
        return tsr_err(TSR_EINVAL, "mul: %s zero point %d outside [%d, %d] (%s)", what, (int)d->zp,
                       (int)tsr_dt_min(d->dtype), (int)tsr_dt_max(d->dtype), tsr_dtype_name(d->dtype));
    return TSR_OK;
}

int tsr_mul_check(const tsr_mul_params_t *p, int64_t *count)
{
    if (!p)
        return tsr_err(TSR_EINVAL, "mul: NULL parameters");
    int rc;
    if ((rc = check_desc("x", &p->x)) || (rc = check_desc("s", &p->s)) || (rc = check_desc("output", &p->y)))
        return rc;
    if (p->s.n != p->x.n || p->s.c != p->x.c || p->s.h != 1 || p->s.w != 1)
        return tsr_err(TSR_EINVAL, "mul: s is [%d, %d, %d, %d], the per-channel vector of x [%d, %d, %d, %d] is "
                       "[%d, %d, 1, 1]", p->s.n, p->s.c, p->s.h, p->s.w, p->x.n, p->x.c, p->x.h, p->x.w, p->x.n,
                       p->x.c);
    if (p->y.n != p->x.n || p->y.c != p->x.c || p->y.h != p->x.h || p->y.w != p->x.w)
        return tsr_err(TSR_EINVAL, "mul: output shape [%d, %d, %d, %d] differs from x's [%d, %d, %d, %d]", p->y.n,
                       p->y.c, p->y.h, p->y.w, p->x.n, p->x.c, p->x.h, p->x.w);
    if (!(p->scale > 0.0f) || !isfinite(p->scale) || !isnormal(p->scale))
        return tsr_err(TSR_EINVAL, "mul: scale %g must be positive, normal and finite", (double)p->scale);
    if (p->act_min > p->act_max || p->act_min < tsr_dt_min(p->y.dtype) || p->act_max > tsr_dt_max(p->y.dtype))
        return tsr_err(TSR_EINVAL, "mul: clamp [%d, %d] not within %s's range in order", (int)p->act_min,
                       (int)p->act_max, tsr_dtype_name(p->y.dtype));
    if (count)
        *count = (int64_t)p->x.n * p->x.c * p->x.h * p->x.w;
    return TSR_OK;
}

/* --------------------------------------------------- the integer form */

/* The formula of tsr_mul.h for the product pr (the reference every form
 * must equal; the importer's host kernel computes the same): MLAS adds the
 * zero point in float32 before it rounds, so an odd y_zp turns a tie of
 * the product the other way. */
static int32_t target(const tsr_mul_params_t *p, int32_t pr)
{
    const float v = (float)pr * p->scale;
    const int64_t q = (int64_t)nearbyintf(v + (float)p->y.zp);
    return (int32_t)(q < p->act_min ? p->act_min : q > p->act_max ? p->act_max : q);
}

/* rqfin's operand: shift t, zero point, clamp (device terms: the output's offset taken off). */
static int32_t rq_row(const tsr_mul_params_t *p, int t)
{
    const int32_t off = tsr_dt_off(p->y.dtype);
    const uint32_t zp = (uint32_t)(p->y.zp - off) & 511u, lo = (uint32_t)(p->act_min - off) & 511u,
                   hi = (uint32_t)(p->act_max - off) & 511u;
    return (int32_t)((uint32_t)t | zp << 5 | lo << 14 | hi << 23);
}

/* ceil(a / b) for b > 0 */
static int64_t cdiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return q + (a % b > 0);
}

/* The smallest P with mulhr(P, mu) >= mm: mulhr rounds P*mu / 2^31 half up
 * (mu > 0), so P*mu >= (2 mm - 1) * 2^30. mm beyond mulhr's range: never
 * (or always). */
static int64_t p_for_m(int64_t mm, int64_t mu)
{
    if (mm > INT32_MAX)
        return INT64_MAX / 4;
    if (mm <= INT32_MIN)
        return INT64_MIN / 4;
    return cdiv((2 * mm - 1) * (INT64_C(1) << 30), mu);
}

/* The smallest m whose rounding shift by t (half away from zero) is >= j. */
static int64_t m_for_j(int64_t j, int t)
{
    if (!t)
        return j;
    const int64_t v = j * (INT64_C(1) << t) - (INT64_C(1) << (t - 1));
    return j > 0 ? v : v + 1;
}

/* What the integer form depends on (not the shapes): the key of the memo
 * below. */
typedef struct fixed_key {
    int32_t v[8];
    float scale;
} fixed_key_t;

/* The last forms found, per thread: the importer searches a Mul's form
 * when it moves the Mul to the device and the plan again (each search
 * checks every product, about 6 M instructions). */
#define FIXED_MEMO 16
static _Thread_local struct {
    fixed_key_t key[FIXED_MEMO];
    tsr_mul_fixed_t fx[FIXED_MEMO];
    int n, next;
} fixed_memo;

static fixed_key_t fixed_key(const tsr_mul_params_t *p)
{
    fixed_key_t k;
    memset(&k, 0, sizeof k);
    const int32_t v[8] = {(int32_t)p->x.dtype, p->x.zp, (int32_t)p->s.dtype, p->s.zp,
                          (int32_t)p->y.dtype, p->y.zp, p->act_min,          p->act_max};
    memcpy(k.v, v, sizeof v);
    k.scale = p->scale;
    return k;
}

static int fixed_search(const tsr_mul_params_t *p, tsr_mul_fixed_t *fx);

int tsr_mul_fixed(const tsr_mul_params_t *p, tsr_mul_fixed_t *fx)
{
    int rc = tsr_mul_check(p, NULL);
    if (rc)
        return rc;
    if (!fx)
        return tsr_err(TSR_EINVAL, "mul: NULL result");
    const fixed_key_t k = fixed_key(p);
    for (int i = 0; i < fixed_memo.n; i++)
        if (!memcmp(&fixed_memo.key[i], &k, sizeof k)) {
            *fx = fixed_memo.fx[i];
            return TSR_OK;
        }
    if ((rc = fixed_search(p, fx))) /* (a refusal is not kept: searched again, its message made again) */
        return rc;
    const int slot = fixed_memo.next;
    fixed_memo.key[slot] = k;
    fixed_memo.fx[slot] = *fx;
    fixed_memo.next = (slot + 1) % FIXED_MEMO;
    fixed_memo.n += fixed_memo.n < FIXED_MEMO;
    return TSR_OK;
}

/* Every product the operand types of p allow, once, in *ps (ascending), its
 * target in *tg (both allocated, 2 * PMAX + 1 entries); their number. */
static int products(const tsr_mul_params_t *p, int32_t **ps, int32_t **tg, int *np)
{
    const int32_t a0 = tsr_dt_min(p->x.dtype) - p->x.zp, b0 = tsr_dt_min(p->s.dtype) - p->s.zp;
    uint8_t *seen = calloc(2 * PMAX + 1, 1);
    *ps = malloc(sizeof **ps * (2 * PMAX + 1)), *tg = malloc(sizeof **tg * (2 * PMAX + 1));
    if (!seen || !*ps || !*tg) {
        free(seen), free(*ps), free(*tg);
        *ps = *tg = NULL;
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    for (int32_t a = a0; a < a0 + 256; a++)
        for (int32_t b = b0; b < b0 + 256; b++)
            seen[a * b + PMAX] = 1;
    *np = 0;
    for (int32_t q = -PMAX; q <= PMAX; q++)
        if (seen[q + PMAX]) {
            (*ps)[*np] = q;
            (*tg)[(*np)++] = target(p, q);
        }
    free(seen);
    return TSR_OK;
}

int tsr_mul_fscale_exact(const tsr_mul_params_t *p)
{
    int32_t *ps, *tg, bits;
    int np, ok = 1;
    if (tsr_mul_check(p, NULL) || products(p, &ps, &tg, &np))
        return -1;
    memcpy(&bits, &p->scale, 4);
    const int32_t off = tsr_dt_off(p->y.dtype), rq = rq_row(p, 0);
    for (int i = 0; i < np && ok; i++) /* (the ALU's own semantics: fscale, then rqfin with shift 0) */
        ok = tsr_alu_apply(TSR_ALU_RQFIN, tsr_alu_apply(TSR_ALU_FSCALE, ps[i], bits, 32), rq, 32) + off == tg[i];
    free(ps), free(tg);
    return ok;
}

/* The search of tsr_mul_fixed (p checked). */
static int fixed_search(const tsr_mul_params_t *p, tsr_mul_fixed_t *fx)
{
    int32_t *ps, *tg;
    int np;
    int rc = products(p, &ps, &tg, &np);
    if (rc)
        return rc;
    const int32_t yz = p->y.zp;
    int found = 0;
    int tmax = 31;
    while (tmax >= 0 && ldexp((double)p->scale, 16 + tmax) >= 2147483647.0)
        tmax--;
    for (int t = tmax; t >= 0 && t >= tmax - 2 && !found; t--) {
        const int64_t mu0 = llround(ldexp((double)p->scale, 16 + t));
        for (int k = 0; k <= 2 * 512 && !found; k++) {
            const int64_t mu = mu0 + (k & 1 ? (k + 1) / 2 : -(k / 2));
            if (mu <= 0 || mu > INT32_MAX)
                continue;
            /* the offsets D for which every product gives its target: result(D) is nondecreasing in D
               (mulhr and the rounding shift are monotone), so each product bounds D from below (reach
               its target) and from above (not the next value), unless its target is a clamp bound */
            int64_t dlo = -(1 << 15), dhi = (1 << 15) - 1;
            for (int i = 0; i < np && dlo <= dhi; i++) {
                const int64_t P0 = (int64_t)ps[i] * (INT64_C(1) << KSHIFT); /* (no left shift of a negative) */
                if (tg[i] > p->act_min) {
                    const int64_t d = p_for_m(m_for_j((int64_t)tg[i] - yz, t), mu) - P0;
                    dlo = d > dlo ? d : dlo;
                }
                if (tg[i] < p->act_max) {
                    const int64_t d = p_for_m(m_for_j((int64_t)tg[i] + 1 - yz, t), mu) - 1 - P0;
                    dhi = d < dhi ? d : dhi;
                }
            }
            if (dlo > dhi)
                continue;
            fx->mult = (int32_t)mu;
            fx->shift = t;
            fx->offset = (int32_t)(dlo <= 0 && dhi >= 0 ? 0 : dlo > 0 ? dlo : dhi);
            found = 1;
        }
    }
    /* the ALU's own semantics on every product: what the device will compute (a check of the bounds above),
       as the device's rows compute it (mulhr, then rqfin, each with its operand as the immediate: in place,
       over all products at once) */
    const int32_t off = tsr_dt_off(p->y.dtype), rq = found ? rq_row(p, fx->shift) : 0;
    for (int i = 0; i < np && found; i++)
        ps[i] = (int32_t)((int64_t)ps[i] * (INT64_C(1) << KSHIFT) + fx->offset);
    if (found) {
        tsr_alu_apply_row(TSR_ALU_MULHR, ps, NULL, fx->mult, (uint32_t)np, 32);
        tsr_alu_apply_row(TSR_ALU_RQFIN, ps, NULL, rq, (uint32_t)np, 32);
    }
    for (int i = 0; i < np && found; i++)
        if (ps[i] + off != tg[i])
            found = 0;
    free(ps), free(tg);
    if (!found)
        return tsr_err(TSR_EINVAL, "mul: no exact integer form for scale %a (%.9g) with zero points %d, %d: the "
                       "float32 product's roundings need the ALU op fscale (config key EXACT_REQUANT)",
                       (double)p->scale, (double)p->scale, (int)p->x.zp, (int)p->s.zp);
    return TSR_OK;
}

/* -------------------------------------------------------------- plan */

void tsr_mul_plan_free(tsr_device_t *dev, tsr_mul_plan_t *pl)
{
    if (!pl)
        return;
    if (pl->c_addr && dev)
        tsr_mem_free(dev, pl->c_addr);
    free(pl->insns);
    memset(pl, 0, sizeof *pl);
}

static int match(const char *what, const tsr_eltwise_desc_t *d, const tsr_dtensor_t *t)
{
    if (!t->addr)
        return tsr_err(TSR_EINVAL, "mul: %s tensor without a buffer", what);
    if (t->n != d->n || t->c != d->c || t->h != d->h || t->w != d->w || t->dtype != d->dtype || t->zp != d->zp)
        return tsr_err(TSR_EINVAL, "mul: %s tensor [%d,%d,%d,%d] %s zp %d does not match the parameters "
                       "[%d,%d,%d,%d] %s zp %d", what, t->n, t->c, t->h, t->w, tsr_dtype_name(t->dtype), (int)t->zp,
                       d->n, d->c, d->h, d->w, tsr_dtype_name(d->dtype), (int)d->zp);
    return TSR_OK;
}

/* The uops: the halves' ops reading the vector rows, the multiplier row,
 * the rqfin row, and none (immediates); then the vector rows' own. */
enum { U_VEC = 0, U_MUL = 2, U_RQ = 4, U_IMM = 6, U_SETUP = 8, U_GEMM = 9, U_COUNT = 11 };

int tsr_mul_plan_tensors(tsr_device_t *dev, const tsr_mul_params_t *p, const tsr_dtensor_t *x,
                         const tsr_dtensor_t *s, const tsr_dtensor_t *y, tsr_mul_plan_t *pl)
{
    if (!pl)
        return tsr_err(TSR_EINVAL, "mul: NULL plan");
    memset(pl, 0, sizeof *pl);
    if (!dev || !p || !x || !s || !y)
        return tsr_err(TSR_EINVAL, "mul: NULL device, parameters or tensor");
    int rc = tsr_mul_check(p, NULL);
    if (rc)
        return rc;
    if ((rc = match("x", &p->x, x)) || (rc = match("s", &p->s, s)) || (rc = match("output", &p->y, y)))
        return rc;
    const tsr_config_t *c = tsr_device_config(dev);
    if (c->acc_width != 32)
        return tsr_err(TSR_EINVAL, "mul: needs 32-bit accumulators (this config's are %d-bit)", c->acc_width);
    if (c->acc8_bytes != (uint32_t)(x->batch * x->block) || c->out_bytes != c->acc8_bytes)
        return tsr_err(TSR_EINVAL, "mul: the tensors' %d-byte rows are not this config's %u-byte acc8 rows",
                       x->batch * x->block, c->acc8_bytes);
    const uint32_t rb = c->acc8_bytes;
    const uint64_t hw = (uint64_t)x->h * (uint64_t)x->w, blocks = (uint64_t)x->nb * (uint64_t)x->cb;
    if (x->bytes != blocks * hw * rb || s->bytes != blocks * rb || y->bytes != x->bytes)
        return tsr_err(TSR_EINVAL, "mul: tensor buffers are not [NB][CB][H][W] rows of this config");
    if (x->addr % rb || s->addr % rb || y->addr % rb)
        return tsr_err(TSR_EINVAL, "mul: tensor buffers not aligned to their rows");
    if ((x->addr + x->bytes) / rb > UINT32_MAX || (s->addr + s->bytes) / rb > UINT32_MAX ||
        (y->addr + y->bytes) / rb > UINT32_MAX)
        return tsr_err(TSR_EINVAL, "mul: tensor beyond the DRAM the instruction fields address");
    /* fscale where it gives every product's bytes (not where the zero point, which MLAS adds before the
       rounding, turns a tie: then the integer form) */
    pl->exact = c->exact_requant && tsr_mul_fscale_exact(p) == 1;
    if (!pl->exact && (rc = tsr_mul_fixed(p, &pl->fx)))
        return c->exact_requant ? tsr_err(rc, "mul: no exact integer form for scale %a (%.9g) with zero points %d, "
                                          "%d, %d, and fscale is not exact either (it rounds before the output "
                                          "zero point is added; MLAS adds it in float32 first)", (double)p->scale,
                                          (double)p->scale, (int)p->x.zp, (int)p->s.zp, (int)p->y.zp)
                                : rc;

    /* tiles: whole blocks when one fits (T = m*H*W input rows in half the input buffer, 2T + 2 + m
       accumulator rows), else chunks of one block */
    if (c->block_in != c->block_out || c->inp_bytes != rb)
        return tsr_err(TSR_EINVAL, "mul: needs BLOCK_IN == BLOCK_OUT (device tensors' rows as inp rows)");
    const uint64_t depth = c->acc_depth, loop_max = (1u << TSR_LOOP_BITS) - 1, size_max = (1u << TSR_SIZE_BITS) - 1;
    uint64_t TI = c->inp_depth / 2;
    TI = TI > size_max ? size_max : TI;
    if (depth < 6 || TI < 1)
        return tsr_err(TSR_EINVAL, "mul: buffers too small (%u accumulator, %u input rows)", c->acc_depth,
                       c->inp_depth);
    uint64_t m = (depth - 2) / (2 * hw + 1), T;
    if (m > TI / hw)
        m = TI / hw;
    if (m > loop_max / hw)
        m = loop_max / hw;
    if (m > blocks)
        m = blocks;
    if (m >= 1) {
        T = m * hw;
        pl->tiles = (int)((blocks + m - 1) / m);
    } else {
        T = (depth - 3) / 2;
        T = T > loop_max ? loop_max : T;
        T = T > TI ? TI : T;
        const uint64_t chunks = (hw + T - 1) / T;
        if (chunks * blocks > INT32_MAX)
            return tsr_err(TSR_EINVAL, "mul: too many tiles");
        pl->tiles = (int)(chunks * blocks);
    }
    pl->nbuf = 2;
    pl->rows = blocks * hw;
    pl->hw = (uint32_t)hw;
    pl->blocks = (uint32_t)blocks;
    pl->tile_rows = (uint32_t)T;
    pl->tile_blocks = (uint32_t)m;
    pl->x_addr = x->addr, pl->s_addr = s->addr, pl->y_addr = y->addr;
    const uint32_t h0 = 0, h1 = (uint32_t)T, cmul = (uint32_t)(2 * T), crq = cmul + 1, vec = cmul + 2,
                   i1 = (uint32_t)TI;

    /* device terms: every tensor holds v - off */
    const int32_t xz = p->x.zp - tsr_dt_off(p->x.dtype), sz = p->s.zp - tsr_dt_off(p->s.dtype);
    const int k = pl->exact ? 0 : KSHIFT;
    const int32_t dofs = pl->exact ? 0 : pl->fx.offset;
    int32_t mrow, rqrow;
    if (pl->exact)
        memcpy(&mrow, &p->scale, 4);
    else
        mrow = pl->fx.mult;
    rqrow = rq_row(p, pl->exact ? 0 : pl->fx.shift);
    pl->ops_per_row = 5 + (dofs != 0); /* mov, GEMM, mul, [add], mulhr|fscale, rqfin */

    /* constants: the identity block, the two rows (every lane), the uops; each part aligned to all three
       sizes */
    const uint64_t ab = c->acc_bytes, ub = c->uop_bytes, wb = c->wgt_bytes;
    uint64_t al = ab > ub ? ab : ub;
    al = al > wb ? al : wb;
    const uint64_t o_acc = (wb + al - 1) / al * al, o_uop = o_acc + (2 * ab + al - 1) / al * al;
    pl->c_bytes = o_uop + U_COUNT * ub;
    if ((rc = tsr_mem_alloc(dev, pl->c_bytes, &pl->c_addr)))
        return rc;
    uint8_t *cb = calloc(1, pl->c_bytes);
    if (!cb) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto fail;
    }
    for (int o = 0; o < c->block_out; o++) /* w[o][i] = 1 if o == i (int8) */
        cb[(uint64_t)o * (uint64_t)c->block_in + (uint64_t)o] = 1;
    for (uint64_t l = 0; l < ab / 4; l++) {
        memcpy(cb + o_acc + 4 * l, &mrow, 4);
        memcpy(cb + o_acc + ab + 4 * l, &rqrow, 4);
    }
    const tsr_uop_t uops[U_COUNT] = {{h0, vec, 0}, {h1, vec, 0}, {h0, cmul, 0}, {h1, cmul, 0}, {h0, crq, 0},
                                     {h1, crq, 0}, {h0, 0, 0},   {h1, 0, 0},    {vec, 0, 0},  {h0, 0, 0},
                                     {h1, i1, 0}};
    for (int u = 0; u < U_COUNT && !rc; u++) {
        uint64_t raw = 0;
        rc = tsr_uop_encode(c, &uops[u], &raw);
        for (uint64_t i = 0; i < ub; i++)
            cb[o_uop + (uint64_t)u * ub + i] = (uint8_t)(raw >> (8 * i));
    }
    if (!rc)
        rc = tsr_mem_write(dev, pl->c_addr, cb, pl->c_bytes);
    free(cb);
    if (rc)
        goto fail;

    tsr_stream_t b;
    tsr_stream_init(&b, c, 0, 0);
    tsr_stream_uops(&b, (uint32_t)((pl->c_addr + o_uop) / ub), U_COUNT);
    tsr_stream_load(&b, TSR_MEM_ACC, cmul, (uint32_t)((pl->c_addr + o_acc) / ab), 1, 2, 2);
    tsr_stream_load(&b, TSR_MEM_WGT, 0, (uint32_t)(pl->c_addr / wb), 1, 1, 1);
    const uint32_t xe = (uint32_t)(x->addr / rb), se = (uint32_t)(s->addr / rb), ye = (uint32_t)(y->addr / rb);
    const double bus = c->dram_bus_width / 8.0, two = c->acc_single_copy ? 2.0 : 1.0;
    uint64_t vec_block = UINT64_MAX; /* the first block whose vector rows are loaded */
    for (int t = 0; t < pl->tiles; t++) {
        const uint32_t hp = (uint32_t)(t % 2) * (uint32_t)T;
        uint64_t k0, mk, r0, R;
        if (m >= 1) {
            k0 = (uint64_t)t * m;
            mk = blocks - k0 < m ? blocks - k0 : m;
            r0 = k0 * hw;
            R = mk * hw;
        } else {
            const uint64_t chunks = (hw + T - 1) / T, ch = (uint64_t)t % chunks;
            k0 = (uint64_t)t / chunks;
            mk = 1;
            r0 = k0 * hw + ch * T;
            R = hw - ch * T < T ? hw - ch * T : T;
        }
        if (k0 != vec_block) { /* this tile's vector rows: b * 2^k, one row per block */
            tsr_stream_load(&b, TSR_MEM_ACC8, vec, se + (uint32_t)k0, 1, (uint32_t)mk, (uint32_t)mk);
            if (sz) {
                tsr_insn_t *in = tsr_stream_alu(&b, TSR_ALU_ADD, U_SETUP, U_SETUP + 1);
                tsr_stream_loops(in, (uint32_t)mk, 1, 0, 1, 0, 0);
                in->use_imm = 1, in->imm = -sz;
            }
            if (k) {
                tsr_insn_t *in = tsr_stream_alu(&b, TSR_ALU_SHR, U_SETUP, U_SETUP + 1);
                tsr_stream_loops(in, (uint32_t)mk, 1, 0, 1, 0, 0);
                in->use_imm = 1, in->imm = -k;
            }
            pl->alu_ops += mk * (uint64_t)((sz != 0) + (k != 0));
            pl->est_cycles += (double)(mk * rb) / bus + (double)(mk * (uint64_t)((sz != 0) + (k != 0)));
            vec_block = k0;
        }
        const uint32_t half = (uint32_t)(t % 2);
        /* load stage: x's rows into input half `half`, once tile t-2's GEMM has read it */
        if (t >= 2)
            tsr_stream_wait(&b, TSR_Q_CMP2LD);
        tsr_stream_load(&b, TSR_MEM_INP, half * i1, xe + (uint32_t)r0, 1, (uint32_t)R, (uint32_t)R);
        tsr_stream_signal(&b, TSR_Q_LD2CMP);
        /* a = h - x_zp': mov the start value (once tile t-2's STORE has read half p), then the GEMM adds h
           through the identity block */
        if (t >= 2)
            tsr_stream_wait(&b, TSR_Q_ST2CMP);
        tsr_insn_t *in = tsr_stream_alu(&b, TSR_ALU_MOV, U_IMM + half, U_IMM + half + 1);
        tsr_stream_loops(in, (uint32_t)R, 1, 0, 1, 0, 0);
        in->use_imm = 1, in->imm = -xz;
        tsr_stream_wait(&b, TSR_Q_LD2CMP);
        in = tsr_stream_gemm(&b, U_GEMM + half, U_GEMM + half + 1, 0);
        tsr_stream_loops(in, 1, 0, 0, (uint32_t)R, 1, 1);
        if (t + 2 < pl->tiles)
            tsr_stream_signal(&b, TSR_Q_CMP2LD);
        /* a * b * 2^k: the block's vector row for each of its rows */
        in = tsr_stream_alu(&b, TSR_ALU_MUL, U_VEC + half, U_VEC + half + 1);
        if (m >= 1)
            tsr_stream_loops(in, (uint32_t)mk, (uint32_t)hw, 1, (uint32_t)hw, 1, 0);
        else
            tsr_stream_loops(in, 1, 0, 0, (uint32_t)R, 1, 0);
        if (dofs) {
            in = tsr_stream_alu(&b, TSR_ALU_ADD, U_IMM + half, U_IMM + half + 1);
            tsr_stream_loops(in, (uint32_t)R, 1, 0, 1, 0, 0);
            in->use_imm = 1, in->imm = dofs;
        }
        in = tsr_stream_alu(&b, pl->exact ? TSR_ALU_FSCALE : TSR_ALU_MULHR, U_MUL + half, U_MUL + half + 1);
        tsr_stream_loops(in, (uint32_t)R, 1, 0, 1, 0, 0);
        in = tsr_stream_alu(&b, TSR_ALU_RQFIN, U_RQ + half, U_RQ + half + 1);
        tsr_stream_loops(in, (uint32_t)R, 1, 0, 1, 0, 0);
        pl->alu_ops += R * (uint64_t)pl->ops_per_row;
        pl->est_cycles += (double)R * (2.0 + (dofs != 0) + 3.0 * two); /* (the loads overlap in the load stage) */
        tsr_stream_signal(&b, TSR_Q_CMP2ST);
        tsr_stream_wait(&b, TSR_Q_CMP2ST);
        tsr_stream_store(&b, hp, ye + (uint32_t)r0, 1, (uint32_t)R, (uint32_t)R);
        if (t + 2 < pl->tiles || t == pl->tiles - 1)
            tsr_stream_signal(&b, TSR_Q_ST2CMP);
    }
    if (!(rc = tsr_stream_finish(&b)))
        rc = tsr_stream_check(&b, "mul");
    /* (the builder counts acc8 rows at the accumulator's width: the real bytes here) */
    pl->dram_bytes = (2 * pl->rows + blocks) * rb + 2 * ab + U_COUNT * ub;
    tsr_stream_take(&b, &pl->insns, &pl->ninsns);
    tsr_stream_free(&b);
    if (rc)
        goto fail;
    return TSR_OK;
fail:
    tsr_mul_plan_free(dev, pl);
    return rc;
}

int tsr_mul_exec(tsr_device_t *dev, const tsr_mul_plan_t *pl)
{
    return tsr_jit_run_stream(dev, "mul", pl ? pl->insns : NULL, pl ? pl->ninsns : 0);
}

int tsr_mul_run(tsr_device_t *dev, const tsr_mul_params_t *p, const void *x, const void *s, void *y)
{
    if (!dev || !p || !x || !s || !y)
        return tsr_err(TSR_EINVAL, "mul: NULL device, parameters or data");
    int rc = tsr_mul_check(p, NULL);
    if (rc)
        return rc;
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_dtensor_t t[3];
    const tsr_eltwise_desc_t *d[3] = {&p->x, &p->s, &p->y};
    memset(t, 0, sizeof t);
    for (int i = 0; i < 3 && !rc; i++)
        if (!(rc = tsr_dtensor_init(c, d[i]->n, d[i]->c, d[i]->h, d[i]->w, d[i]->dtype, d[i]->zp, &t[i])))
            rc = tsr_dtensor_alloc(dev, &t[i]);
    if (!rc)
        rc = tsr_dtensor_write_nchw(dev, &t[0], x);
    if (!rc)
        rc = tsr_dtensor_write_nchw(dev, &t[1], s);
    tsr_mul_plan_t pl;
    memset(&pl, 0, sizeof pl);
    if (!rc)
        rc = tsr_mul_plan_tensors(dev, p, &t[0], &t[1], &t[2], &pl);
    if (!rc)
        rc = tsr_mul_exec(dev, &pl);
    if (!rc)
        rc = tsr_dtensor_read_nchw(dev, &t[2], y);
    tsr_mul_plan_free(dev, &pl);
    for (int i = 0; i < 3; i++)
        tsr_dtensor_free(dev, &t[i]);
    return rc;
}
