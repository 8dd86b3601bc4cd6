/*
 * tsr_ox_eltwise: quantized adds on the device: com.microsoft QLinearAdd and
 * the QDQ Add (DequantizeLinear operands, [Relu | Clip], QuantizeLinear, or
 * the Relu/Clip kept between Q/DQ pairs, tsr_onnx_qdq.c), with
 * MLAS's fixed-point QLinearAdd arithmetic; and the QDQ Mul of a tensor
 * [N, C, H, W] by a per-channel vector [N, C, 1, 1] (a squeeze-and-excite
 * block's gate) with ONNX Runtime's QLinearMul arithmetic: lowered to the
 * host kernel (H_QADDC, the vector repeated over H*W), then moved to the
 * device (jit/tsr_mul.h, bit for bit the host kernel's bytes) when its
 * operands come from device operators (tsr_ox_promote_lop, run by the
 * segment pass: a gate made by activation tables is device work only once
 * tsr_onnx_act.c has run). An Add of two activations the host took because
 * an operand was a host value then moves to the device add likewise.
 */
#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"
#include "tsr_onnx_qadd.h"
#include "tsr_quant.h"

/* ONNX Runtime's QLinearAdd bytes on an x86-64 CPU with AVX2 for every pair of raw input bytes (t[256 * a + b],
 * a of the node's input 0): tsr_onnx_qadd.h, as the host kernel computes them. */
static void add_ort_table(const tsr_add_params_t *p, float r0, float r1, uint8_t *t)
{
    tsr_qadd_ort_t q;
    tsr_qadd_ort_init(&q, r0, r1, p->a.zp, p->b.zp, p->y.zp, p->y.dtype == TSR_DT_INT8);
    tsr_qadd_ort_table(&q, p->a.dtype == TSR_DT_INT8, p->b.dtype == TSR_DT_INT8, t);
}

/* Does the device's round_once add, RDBPOT(xa * MA + xb * MB + C, Sh) + zy saturated, give t for every pair?
 * With lim (not NULL): only the interval of C (*lim: lowest, highest) the pairs allow, RDBPOT taken as a floor
 * of acc + 2^(Sh-1) (the check proper decides the ties of negative sums). */
static int add_table_equal(const tsr_add_params_t *p, int32_t MA, int32_t MB, int32_t C, int Sh, const uint8_t *t,
                           int64_t *lim)
{
    const int ys8 = p->y.dtype == TSR_DT_INT8, lo = ys8 ? -128 : 0, hi = ys8 ? 127 : 255;
    const int64_t half = (int64_t)1 << (Sh - 1);
    if (lim)
        lim[0] = INT64_MIN, lim[1] = INT64_MAX;
    for (int a = 0; a < 256; a++)
        for (int b = 0; b < 256; b++) {
            const int32_t xa = (p->a.dtype == TSR_DT_INT8 ? (int8_t)a : a) - p->a.zp;
            const int32_t xb = (p->b.dtype == TSR_DT_INT8 ? (int8_t)b : b) - p->b.zp;
            const int64_t acc = (int64_t)xa * MA + (int64_t)xb * MB + C;
            const int32_t want = ys8 ? (int8_t)t[256 * a + b] : t[256 * a + b];
            if (lim) {
                const int64_t u = (int64_t)(want - p->y.zp) * ((int64_t)1 << Sh);
                if (want > lo && u - half - acc > lim[0])
                    lim[0] = u - half - acc;
                if (want < hi && u + half - 1 - acc < lim[1])
                    lim[1] = u + half - 1 - acc;
                continue;
            }
            int64_t q = (acc >= 0 ? (acc + half) >> Sh : -((-acc + half) >> Sh)) + p->y.zp;
            q = q < lo ? lo : q > hi ? hi : q;
            if (q != want)
                return 0;
        }
    return 1;
}

/* The multipliers nearest MLAS's (*MA, *MB, within 2) and a constant *C (0 where it can be, |C| <= 16383)
 * whose round_once add gives ONNX Runtime's AVX2 bytes for all 65,536 input pairs, in place; unchanged when
 * there are none (then within 1 LSB: where ORT's float32 rounding of fma(x1, r1, F) moves values across a
 * tie differently for different x1, no xa * A + xb * B + C of any precision orders the pairs as it does).
 * *found: 1 when they were found. 0, or an error. */
static int add_exact_multipliers(const tsr_add_params_t *p, float r0, float r1, int Sh, int32_t *MA, int32_t *MB,
                                 int32_t *C, int *found_out)
{
    uint8_t *t = malloc(65536);
    if (!t)
        return tsr_err(TSR_ENOMEM, "out of memory");
    add_ort_table(p, r0, r1, t);
    int found = 0;
    for (int d = 0; d <= 2 && !found; d++)
        for (int da = -d; da <= d && !found; da++)
            for (int db = -d; db <= d && !found; db++) {
                const int32_t a = *MA + da, b = *MB + db;
                int64_t lim[2];
                if ((da != -d && da != d && db != -d && db != d) || a < 1 || b < 1 || a >= 0x400000 || b >= 0x400000)
                    continue; /* (the ring at distance d only; the device's multipliers stay MLAS's range) */
                add_table_equal(p, a, b, 0, Sh, t, lim);
                if (lim[0] > lim[1] || lim[0] > 16383 || lim[1] < -16383)
                    continue;
                const int64_t c0 = lim[0] <= 0 && lim[1] >= 0 ? 0 : (lim[0] + lim[1]) / 2;
                if (c0 >= -16383 && c0 <= 16383 && add_table_equal(p, a, b, (int32_t)c0, Sh, t, NULL))
                    *MA = a, *MB = b, *C = (int32_t)c0, found = 1;
            }
    free(t);
    *found_out = found;
    return 0;
}

/* The add's fixed-point parameters from its scales (as, bs inputs, ys output); *exact: 1 when they give ONNX
 * Runtime's AVX2 bytes on every input pair. */
static int add_multipliers(tsr_onnx_t *m, int ni, float as, float bs, float ys, tsr_add_params_t *p, int *exact)
{
    /* ONNX Runtime's fixed-point QLinearAdd (MLAS without AVX2: its NEON kernels, the x86 ones
       before AVX2; an x86-64 CPU with AVX2 adds in float32 FMAs instead, tsr_onnx_hostf.c
       tsr_ox_run_qaddc, which this form matches within 1 LSB) computes y = RDBPOT(xa * MA + xb * MB, Sh) + zy with
       ra = fl32(as / ys), Sh = 21 - exponent(max(ra, rb)), MA = lrintf(ra * 2^Sh) (< 2^22), when
       its checks pass (float otherwise). On the device: left shift 22 and multipliers MA * 2^9 make
       each input exactly xa * MA (SRDHM of an exact product), and the output stage rounds the sum
       once by 2^Sh (round_once: rqfin's RDBPOT; SRDHM by 2^30 then a rounding shift by Sh - 1
       differed on odd sums exactly 1/2^Sh below a tie). TFLite's parameters rounded each input and
       the output twice (1 LSB off ORT on 6% of a residual test's sums). */
    const float ra = as / ys, rb = bs / ys, gr = ra > rb ? ra : rb;
    int mlas = 0;
    int32_t MA = 0, MB = 0, Sh = 0;
    if (ra >= 0x1p-14f && ra < 256.0f && rb >= 0x1p-14f && rb < 256.0f) {
        uint32_t bits;
        memcpy(&bits, &gr, 4);
        Sh = 21 - ((int32_t)(bits >> 23) - 127);
        if (Sh >= 13 && Sh <= 31) {
            const float mf = ldexpf(1.0f, Sh);
            MA = (int32_t)lrintf(ra * mf);
            MB = (int32_t)lrintf(rb * mf);
            mlas = MA < 0x400000 && MB < 0x400000 && (MA >= 0x200000 || MB >= 0x200000);
        }
    }
    int32_t C = 0;
    *exact = 0;
    if (mlas && add_exact_multipliers(p, ra, rb, Sh, &MA, &MB, &C, exact))
        return NERR(m, ni, "%s", tsr_errmsg());
    if (mlas) {
        p->left_shift = 22;
        p->mult_a = MA * 512, p->mult_b = MB * 512;
        p->shift_a = p->shift_b = 0;
        p->mult_out = 1 << 30;
        p->shift_out = -(Sh - 1);
        p->round_once = 1; /* RDBPOT(sum, Sh) once, as MLAS's fixed-point kernels: bit for bit */
        p->bias_once = C;  /* (and with C and the multipliers searched, as its AVX2 float32 kernel) */
    } else {
        tsr_add_quant_t q;
        if (tsr_quant_add_params(as, bs, ys, &q))
            return NERR(m, ni, "scales the quantized add cannot take: %s", tsr_errmsg());
        p->left_shift = q.left_shift;
        p->mult_a = q.mult_a, p->shift_a = q.shift_a, p->mult_b = q.mult_b, p->shift_b = q.shift_b;
        p->mult_out = q.mult_out, p->shift_out = q.shift_out;
    }
    return 0;
}

/* The model's exact integers for the add (tessera.requant metadata), if any,
 * replacing the scales' once checked against them (*exact then 1: the
 * model's own arithmetic, not ONNX Runtime's, is the reference). */
static int add_meta(tsr_onnx_t *m, int ni, float as, float bs, float ys, tsr_add_params_t *p, int *exact)
{
    int rc;
    int64_t mv[7];
    if ((rc = tsr_ox_meta_ints(m, ni, 7, mv)) < 0)
        return rc;
    if (rc == 1) { /* exact integers: each input's overall multiplier must be the scales' */
        const double out = ldexp(tsr_ox_fx_real(mv[5], mv[6]), (int)mv[0]);
        if (mv[0] < 0 || mv[0] > 22 || mv[1] < 0 || mv[3] < 0 || mv[5] < 0 || mv[2] < -31 || mv[2] > 0 ||
            mv[4] < -31 || mv[4] > 0 || mv[6] < -31 || mv[6] > 30 ||
            !tsr_ox_fx_agrees(tsr_ox_fx_real(mv[1], mv[2]) * out, (double)as / ys) ||
            !tsr_ox_fx_agrees(tsr_ox_fx_real(mv[3], mv[4]) * out, (double)bs / ys))
            return NERR(m, ni, "metadata tessera.requant: the add's integers are not the multipliers %.9g, %.9g of "
                        "the scales", (double)as / ys, (double)bs / ys);
        p->left_shift = (int)mv[0];
        p->mult_a = (int32_t)mv[1], p->shift_a = (int)mv[2], p->mult_b = (int32_t)mv[3], p->shift_b = (int)mv[4];
        p->mult_out = (int32_t)mv[5], p->shift_out = (int)mv[6];
        p->round_once = 0, p->bias_once = 0; /* (the model's integers are TFLite's two roundings) */
        m->nexact++;
        *exact = 1;
    }
    return 0;
}

/* The device add's parameters (*pp) for the quantized values a and b into
 * yv (MLAS's fixed-point QLinearAdd, else TFLite ADD arithmetic,
 * tsr_quant_add_params), with a fused Relu/Clip act (or NULL); *exact: 1
 * when its bytes are ONNX Runtime's on every input pair. */
static int add_params(tsr_onnx_t *m, int ni, int a, float as, int32_t az, int b, float bs, int32_t bz, float ys,
                      int32_t yz, const ox_qout_t *act, int yv, tsr_add_params_t *pp, int *exact)
{
    const ox_val_t *A = &m->vals[a], *B = &m->vals[b], *Y = &m->vals[yv];
    tsr_add_params_t p;
    memset(&p, 0, sizeof p);
    if (qdtype(A->elem, &p.a.dtype) || qdtype(B->elem, &p.b.dtype) || qdtype(Y->elem, &p.y.dtype))
        return NERR(m, ni, "operands must be int8 or uint8");
    int same = A->ndim == B->ndim && A->ndim >= 1 && A->ndim <= 4;
    for (int i = 0; same && i < A->ndim; i++)
        same = A->dims[i] == B->dims[i];
    if (!same)
        return NERR(m, ni, "the operands' shapes differ or are not 1..4-D (broadcasting is not supported)");
    int64_t d[4] = {1, 1, 1, 1};
    for (int i = 0; i < A->ndim; i++)
        d[i] = A->dims[i];
    if (d[0] > 65536 || d[1] > 65536 || d[2] > 65536 || d[3] > 65536)
        return NERR(m, ni, "shape too large");
    tsr_eltwise_desc_t *ds[3] = {&p.a, &p.b, &p.y};
    const int32_t zps[3] = {az, bz, yz};
    for (int k = 0; k < 3; k++)
        ds[k]->n = (int)d[0], ds[k]->c = (int)d[1], ds[k]->h = (int)d[2], ds[k]->w = (int)d[3], ds[k]->zp = zps[k];
    int rc;
    if ((rc = add_multipliers(m, ni, as, bs, ys, &p, exact)) || (rc = add_meta(m, ni, as, bs, ys, &p, exact)))
        return rc;
    p.act_min = p.y.dtype == TSR_DT_UINT8 ? 0 : -128;
    p.act_max = p.y.dtype == TSR_DT_UINT8 ? 255 : 127;
    /* a fused Relu or Clip: the output clamp (Add + Relu is one device op, one segment) */
    if (act && act->relu && p.act_min < yz)
        p.act_min = yz;
    if (act && act->has_clip) {
        int32_t lo, hi;
        if (tsr_quantize_bound(act->clip_lo, ys, yz, p.y.dtype, &lo) ||
            tsr_quantize_bound(act->clip_hi, ys, yz, p.y.dtype, &hi))
            return NERR(m, ni, "Clip bounds: %s", tsr_errmsg());
        p.act_min = lo > p.act_min ? lo : p.act_min;
        p.act_max = hi < p.act_max ? hi : p.act_max;
        if (p.act_min > p.act_max)
            return NERR(m, ni, "Clip bounds [%g, %g] leave no output value", (double)act->clip_lo,
                        (double)act->clip_hi);
    }
    int64_t cnt;
    if ((rc = tsr_add_check(&p, &cnt)))
        return NERR(m, ni, "the device cannot run it (%s) and the host has no quantized add", tsr_errmsg());
    *pp = p;
    return 0;
}

/* A quantized add (add_params) of the quantized values a and b into the new value yv. One whose bytes are
 * not ONNX Runtime's keeps its scales (scale, mult, geo[7] ys's bits) and ort_host 1: the host kernel takes it
 * on a config with EXACT_REQUANT (tsr_ox_exact_to_host). */
static int lower_add(tsr_onnx_t *m, int ni, int a, float as, int32_t az, int b, float bs, int32_t bz, float ys,
                     int32_t yz, const ox_qout_t *act, int yv)
{
    tsr_nd_node_t nd = {.kind = TSR_ND_ADD};
    int exact;
    int rc = add_params(m, ni, a, as, az, b, bs, bz, ys, yz, act, yv, &nd.add, &exact);
    if (rc)
        return rc;
    const int l = tsr_ox_dev_lop(m, ni, &nd, m->vals[a].base, m->vals[b].base, yv);
    if (l < 0)
        return l;
    ox_lop_t *L = &m->lops[l];
    uint32_t ysb;
    memcpy(&ysb, &ys, 4);
    L->scale = as, L->mult = bs, L->geo[7] = ysb;
    L->ort_host = !exact;
    return 0;
}

void tsr_ox_add_to_host(tsr_onnx_t *m, int l)
{
    ox_lop_t *L = &m->lops[l];
    const tsr_add_params_t p = L->nd.add;
    uint32_t ysb = (uint32_t)L->geo[7];
    float ys;
    memcpy(&ys, &ysb, 4);
    const float r0 = L->scale / ys, r1 = L->mult / ys;
    tsr_ox_lop_to_host(L, H_QADDC);
    L->geo[0] = L->geo[1] = numel(&m->vals[L->in]);
    L->geo[5] = p.a.zp, L->geo[6] = p.b.zp, L->geo[7] = ysb;
    L->geo[8] = 1 | 4; /* ORT's AVX2 form, in the node's order (the operands are its inputs 0, 1), clamped */
    memcpy(&L->geo[9], &r0, 4), memcpy(&L->geo[10], &r1, 4);
    L->geo[12] = p.act_min, L->geo[13] = p.act_max;
    L->yzp = p.y.zp;
    L->axis = 0;
}

/* com.microsoft QLinearAdd (scales and zero points constant scalars). */
int tsr_ox_qlinear_add(tsr_onnx_t *m, int ni, int arg)
{
    const int x = tsr_ox_in_val(m, ni, 0);
    int rc;
    (void)arg;
    double v[6];
    static const char *const what[6] = {"A_scale", "A_zero_point", "B_scale", "B_zero_point", "C_scale",
                                        "C_zero_point"};
    static const int idx[6] = {1, 2, 4, 5, 6, 7};
    for (int k = 0; k < 6; k++)
        if ((rc = tsr_ox_const_scalar(m, ni, tsr_ox_in_val(m, ni, (size_t)idx[k]), what[k], &v[k])))
            return rc;
    int a = x, b = tsr_ox_in_val(m, ni, 3);
    if (a < 0 || b < 0)
        return NERR(m, ni, "an operand is missing");
    int y = tsr_ox_def_out(m, ni, 0, m->vals[tsr_ox_in_val(m, ni, 7)].elem, m->vals[a].ndim, m->vals[a].dims);
    if (y < 0)
        return y;
    return lower_add(m, ni, a, (float)v[0], (int32_t)v[1], b, (float)v[2], (int32_t)v[3], (float)v[4],
                     (int32_t)v[5], NULL, y);
}

/* QDQ Add: DequantizeLinear operands (computed, per tensor), [Relu], QuantizeLinear. */
int tsr_ox_qdq_add(tsr_onnx_t *m, int ni, int arg)
{
    const int x = tsr_ox_in_val(m, ni, 0);
    int rc;
    (void)arg;
    int qa, qb, ca, cb;
    const float *sa, *sb;
    const int32_t *za, *zb;
    if ((rc = tsr_ox_view_arg(m, ni, x, "input A", &qa, &sa, &za, &ca)) ||
        (rc = tsr_ox_view_arg(m, ni, tsr_ox_in_val(m, ni, 1), "input B", &qb, &sb, &zb, &cb)))
        return rc;
    if (ca != 1 || cb != 1 || m->vals[qa].cdata || m->vals[qb].cdata)
        return NERR(m, ni, "operands must be computed per-tensor quantized tensors");
    ox_qout_t o;
    const int qn = tsr_ox_qdq_output(m, ni, &o);
    if (qn < 0)
        return qn;
    int y = tsr_ox_def_out(m, qn, 0, o.elem, m->vals[qa].ndim, m->vals[qa].dims);
    if (y < 0)
        return y;
    if ((rc = lower_add(m, ni, qa, sa[0], za[0], qb, sb[0], zb[0], o.scale, o.zp, &o, y)))
        return rc;
    tsr_ox_qdq_fold(m, ni);
    return 0;
}

/* ------------------------------------------- the squeeze-and-excite Mul */

/* QDQ Mul of x [N, C, H, W] by s [N, C, 1, 1] (either input order; both
 * computed per-tensor 8-bit quantized views, no Relu/Clip before the
 * QuantizeLinear): the host's QLinearMul kernel (tsr_ox_run_qaddc) with
 * s's element n*C + c for every element of x's plane (n, c). Returns 1
 * when the node is not such a Mul. */
int tsr_ox_qdq_mul_bcast(tsr_onnx_t *m, int ni)
{
    int a = tsr_ox_in_val(m, ni, 0), b = tsr_ox_in_val(m, ni, 1);
    if (a < 0 || b < 0)
        return 1;
    if (m->vals[a].ndim == 4 && m->vals[b].ndim == 4 && m->vals[a].dims[2] * m->vals[a].dims[3] == 1) {
        const int t = a; /* the vector second */
        a = b, b = t;
    }
    const ox_val_t *A = &m->vals[a], *B = &m->vals[b];
    if (A->ndim != 4 || B->ndim != 4 || A->dims[0] != B->dims[0] || A->dims[1] != B->dims[1] || B->dims[2] != 1 ||
        B->dims[3] != 1 || A->dims[2] * A->dims[3] < 2)
        return 1;
    if (A->cdata || B->cdata || A->view_of < 0 || B->view_of < 0 || A->vcount != 1 || B->vcount != 1 ||
        A->elem != ET_FLOAT || B->elem != ET_FLOAT || m->vals[A->view_of].cdata || m->vals[B->view_of].cdata)
        return 1;
    const int ea = m->vals[A->view_of].elem, eb = m->vals[B->view_of].elem;
    if ((ea != ET_UINT8 && ea != ET_INT8) || (eb != ET_UINT8 && eb != ET_INT8) || m->qsel[ni].status != OX_SEL_OK ||
        m->qsel[ni].act >= 0)
        return 1;
    ox_qout_t o;
    const int qn = tsr_ox_qdq_output(m, ni, &o);
    if (qn < 0)
        return qn;
    if ((o.elem != ET_UINT8 && o.elem != ET_INT8) || !(o.scale > 0))
        return 1;
    /* (the value table may move when the output is defined: what is needed of A and B, first) */
    int64_t d[MAXD];
    memcpy(d, A->dims, sizeof d);
    const int qa = m->vals[A->view_of].base, qb = m->vals[B->view_of].base;
    const float as = A->vscale[0], bs = B->vscale[0];
    const int64_t g[12] = {numel(A), numel(B), 0, 0, 0, A->vzp[0], B->vzp[0], 0, 0, 0, 0, d[2] * d[3]};
    const int y = tsr_ox_def_out(m, qn, 0, o.elem, 4, d);
    if (y < 0)
        return y;
    const int l = tsr_ox_host_lop(m, ni, H_QADDC, qa, y);
    if (l < 0)
        return l;
    ox_lop_t *L = &m->lops[l];
    uint32_t ysb;
    memcpy(&ysb, &o.scale, 4);
    memcpy(L->geo, g, sizeof g);
    L->geo[7] = ysb;
    L->in2 = qb;
    L->scale = as * bs / o.scale; /* MLAS's QLinearMul: fl32(fl32(as * bs) / ys) */
    L->mult = bs;
    L->yzp = o.zp;
    L->axis = 1;
    tsr_ox_qdq_fold(m, ni);
    return 0;
}

/* Values a's and b's producers are device lops, and so is every lop after
 * the earlier of the two up to lop l (else they cannot share one device
 * segment with l, which takes one input from outside). */
int tsr_ox_device_operands(const tsr_onnx_t *m, int l, int a, int b)
{
    const int pa = m->vals[a].prod, pb = m->vals[b].prod;
    if (pa < 0 || pb < 0 || pa >= l || pb >= l || !tsr_ox_in_graph(&m->lops[pa]) || !tsr_ox_in_graph(&m->lops[pb]))
        return 0;
    for (int j = (pa < pb ? pa : pb) + 1; j < l; j++)
        if (!tsr_ox_in_graph(&m->lops[j]))
            return 0;
    return 1;
}

/* Host lop l made a device lop with operator nd (its inputs and output kept). */
static void make_device(tsr_onnx_t *m, int l, const tsr_nd_node_t *nd)
{
    ox_lop_t *L = &m->lops[l];
    const int node = L->node, in = L->in, in2 = L->in2, out = L->out;
    free(L->zpa);
    free(L->zpb);
    memset(L, 0, sizeof *L);
    L->node = L->name_node = node;
    L->side = SIDE_DEV;
    L->in = in, L->in2 = in2, L->out = out;
    L->seg = -1;
    L->nd = *nd;
    tsr_strsafe(nname(m, node), L->nd.name, sizeof L->nd.name);
}

int tsr_ox_promote_lop(tsr_onnx_t *m, int l)
{
    const ox_lop_t *L = &m->lops[l];
    if (L->side != SIDE_HOST || L->hkind != H_QADDC || L->in2 < 0 || m->vals[L->in2].cdata ||
        !tsr_ox_device_operands(m, l, L->in, L->in2))
        return 0;
    const ox_val_t *A = &m->vals[L->in], *B = &m->vals[L->in2], *Y = &m->vals[L->out];
    uint32_t ysb = (uint32_t)L->geo[7];
    float ys;
    memcpy(&ys, &ysb, 4);
    tsr_nd_node_t nd;
    memset(&nd, 0, sizeof nd);
    int exact = 1;
    /* the Mul by a per-channel vector: [N, C, H, W] by [N, C, 1, 1] (tsr_ox_qdq_mul_bcast), or two
       [N, C, 1, 1] (a gate over a 1x1 feature map, lowered as a Mul of one shape by qadd_const) */
    const int vec_mul = L->axis == 1 && (L->geo[11] > 0 || (L->geo[1] == L->geo[0] && A->ndim == 4 && B->ndim == 4 &&
                                                           A->dims[2] * A->dims[3] == 1 && B->dims[0] == A->dims[0] &&
                                                           B->dims[1] == A->dims[1] && B->dims[2] * B->dims[3] == 1));
    if (vec_mul) {
        tsr_mul_params_t *p = &nd.mul;
        nd.kind = TSR_ND_MUL;
        if (qdtype(A->elem, &p->x.dtype) || qdtype(B->elem, &p->s.dtype) || qdtype(Y->elem, &p->y.dtype) ||
            A->ndim != 4 || B->ndim != 4 || Y->ndim != 4)
            return 0;
        p->x = (tsr_eltwise_desc_t){(int)A->dims[0], (int)A->dims[1], (int)A->dims[2], (int)A->dims[3], p->x.dtype,
                                    (int32_t)L->geo[5]};
        p->s = (tsr_eltwise_desc_t){(int)B->dims[0], (int)B->dims[1], 1, 1, p->s.dtype, (int32_t)L->geo[6]};
        p->y = (tsr_eltwise_desc_t){(int)Y->dims[0], (int)Y->dims[1], (int)Y->dims[2], (int)Y->dims[3], p->y.dtype,
                                    L->yzp};
        p->scale = L->scale;
        p->act_min = p->y.dtype == TSR_DT_UINT8 ? 0 : -128;
        p->act_max = p->y.dtype == TSR_DT_UINT8 ? 255 : 127;
        tsr_mul_fixed_t fx;
        if (tsr_mul_fixed(p, &fx)) { /* no integer form: stays on the host (a config with EXACT_REQUANT could run
                                        it; placement does not depend on the config) */
            tsr_err_clear();
            return 0;
        }
    } else if (L->axis == 0 && L->geo[1] == L->geo[0] && A->ndim == Y->ndim && B->ndim == Y->ndim) {
        /* an Add of two activations of one shape (the residual after a gate): the device add */
        nd.kind = TSR_ND_ADD;
        const int rc = add_params(m, L->node, L->in, L->scale, (int32_t)L->geo[5], L->in2, L->mult,
                                  (int32_t)L->geo[6], ys, L->yzp, NULL, L->out, &nd.add, &exact);
        if (rc) {
            tsr_err_clear();
            return 0;
        }
        if (!exact && m->exact_rq) { /* a config with EXACT_REQUANT: ORT's bytes on the host */
            m->lops[l].ort_host = 2;
            return 0;
        }
    } else
        return 0;
    const float as = L->scale, bs = L->mult;
    make_device(m, l, &nd);
    if (nd.kind == TSR_ND_ADD) { /* (as lower_add's) */
        m->lops[l].scale = as, m->lops[l].mult = bs, m->lops[l].geo[7] = ysb;
        m->lops[l].ort_host = !exact;
    }
    return 1;
}
