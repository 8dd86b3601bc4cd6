/*
 * tsr_ox_bias: the QDQ Add of a per-channel constant vector to a device
 * dense's output (a transformer Linear's bias: torch exports MatMul + Add,
 * the quantizer writes DequantizeLinear(matmul output) + DequantizeLinear(
 * bias, 8-bit per tensor) -> Add -> QuantizeLinear) on the device, bit for
 * bit the host kernel's bytes (ops/tsr_ox_math.c qadd_const ->
 * tsr_ox_run_qaddc: ONNX Runtime's QLinearAdd, on x86-64 with AVX2
 * nearbyintf(fmaf(x0, r0, fmaf(x1, r1, F))), else MLAS's fixed point).
 *
 * With b[c] constant, output channel c is a function f_c of one input byte
 * x: 256 values per channel. The device form is a depthwise 1x1 conv over
 * the dense's [rows, C] output, weight w_c, bias B_c and a multiplier M_c
 * per channel, no shift (jit/operators.md "Requantization", fixed point on
 * every config):
 *   y = clamp(SRDHM(w_c (x - x_zp) + B_c, M_c) + y_zp)
 * one rounding, floor(v + 1/2), the same for either sign (a right shift
 * after it would round again, ties away from zero: the two disagree on the
 * sign of v by 2^-t, more than the room some channels have). The targets
 * f_c(x) come from running the host kernel itself on all 256 x C (byte,
 * channel) pairs. Per channel: the slope a whose real relaxation round(a
 * (x - x_zp) + b) leaves b the widest interval (a ternary search: the
 * float form's rounding points need not lie on a line of the scales' ratio
 * r); then for w = 127 down to 16 and multipliers M around a 2^31 / w the
 * result is nondecreasing in B_c, so each byte bounds B_c from below (reach
 * its target) and above (not the next value); any B_c in the intersection
 * will do. The offsets B_c / w the weights reach together are the fractions
 * of denominators up to 127 (gaps of about 1/5000 of an input step, but up
 * to 1/127 next to an integer). The chosen form is checked again on every
 * byte with the ALU's own ops. A channel without one keeps the whole Add on
 * the host: none of the zoo's transformers' (their biases are initialised
 * at 0, BERT's, or 1e-6, torchvision's ViT), about 1 in 200 channels of
 * random biases (onnx_op_ffn's s8 block: one of 96), whose interval sits
 * within 1/127 above a whole offset; an ALU form with a finer offset (as
 * jit/tsr_mul.h's 2^-15) would take those.
 *
 * The Add's lop then moves to right after the dense's (its inputs are the
 * dense's output and a constant; the lops in between come earlier in
 * topological order and cannot read its output), so that Q, K and V's
 * dense + bias pairs make a segment each. Its output is a [rows, C] value
 * of its own (the dense's layout); the Add's [..., C] output aliases it.
 * --place bias=host (tsr_onnx_opts_t) keeps the host kernel (for comparisons).
 */
#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_onnx_ops.h"
#include "tsr_strsafe.h"

#define BIAS_W 127   /* the largest weight (int8) */
#define BIAS_WMIN 16 /* the smallest weight tried */
#define BIAS_SPAN 4  /* multipliers tried on each side of the nearest */
#define BIAS_CMAX 4096 /* the most channels searched (a hostile file's wide dense stays on the host: the search
                          is up to 112 x 9 x 256 steps a channel) */

/* ceil(a / b), b > 0 */
static int64_t cdiv(int64_t a, int64_t b)
{
    const int64_t q = a / b;
    return q + (a % b > 0);
}

/* The smallest P with SRDHM(P, mu) >= j (mu > 0): P mu >= (2 j - 1) 2^30. */
static int64_t p_min(int64_t j, int64_t mu)
{
    return cdiv((2 * j - 1) * (INT64_C(1) << 30), mu);
}

/* The conv's output for byte offset d = x - x_zp (the ALU's op, isa/tsr_isa.c). */
static int32_t conv_out(int32_t w, int32_t d, int32_t B, int32_t mu, int32_t yz, int32_t lo, int32_t hi)
{
    const int64_t y = (int64_t)tsr_alu_apply(TSR_ALU_MULHR, w * d + B, mu, 32) + yz;
    return (int32_t)(y < lo ? lo : y > hi ? hi : y);
}

/* B's interval [*blo, *bhi] for weight w and multiplier mu: each byte bounds it (see the top). */
static void b_range(const int32_t *tg, int32_t x0, int32_t xz, int32_t yz, int32_t lo, int32_t hi, int32_t w,
                    int64_t mu, int64_t *blo, int64_t *bhi)
{
    *blo = -(INT64_C(1) << 30), *bhi = INT64_C(1) << 30;
    for (int i = 0; i < 256 && *blo <= *bhi; i++) {
        const int64_t P0 = (int64_t)w * (x0 + i - xz);
        if (tg[i] > lo && p_min((int64_t)tg[i] - yz, mu) - P0 > *blo)
            *blo = p_min((int64_t)tg[i] - yz, mu) - P0;
        if (tg[i] < hi && p_min((int64_t)tg[i] + 1 - yz, mu) - 1 - P0 < *bhi)
            *bhi = p_min((int64_t)tg[i] + 1 - yz, mu) - 1 - P0;
    }
}

/* The form (mu, B) for weight w and slope a, or -1. */
static int form_for_w(const int32_t *tg, int32_t x0, int32_t xz, double a, int32_t yz, int32_t lo, int32_t hi,
                      int32_t w, int32_t *mu_out, int32_t *b_out)
{
    const int64_t mu0 = llround(a / w * ldexp(1.0, 31));
    for (int k = 0; k <= 2 * BIAS_SPAN; k++) {
        const int64_t mu = mu0 + (k & 1 ? (k + 1) / 2 : -(k / 2));
        int64_t blo, bhi;
        if (mu <= 0 || mu > INT32_MAX)
            continue;
        b_range(tg, x0, xz, yz, lo, hi, w, mu, &blo, &bhi);
        if (blo > bhi)
            continue;
        const int32_t B = (int32_t)(blo <= 0 && bhi >= 0 ? 0 : blo > 0 ? blo : bhi);
        int ok = 1;
        for (int i = 0; i < 256 && ok; i++)
            ok = conv_out(w, x0 + i - xz, B, (int32_t)mu, yz, lo, hi) == tg[i];
        if (ok) {
            *mu_out = (int32_t)mu, *b_out = B;
            return 0;
        }
    }
    return -1;
}

/* The real relaxation y = round(a (x - x_zp) + b) + y_zp of the 256 targets: each byte bounds b
 * between two lines in a, so the width of b's interval is concave in a; the slope a of the widest
 * (ternary search around r, the scales' ratio), where the integer forms are looked for. The float
 * form's rounding points need not lie on a line of slope r: the widest interval can be at another. */
static double best_slope(const int32_t *tg, int32_t x0, int32_t xz, double r, int32_t yz, int32_t lo, int32_t hi)
{
    double a0 = r * 0.9, a1 = r * 1.1;
    for (int it = 0; it < 100; it++) {
        const double m1 = a0 + (a1 - a0) / 3, m2 = a1 - (a1 - a0) / 3;
        double w[2];
        for (int k = 0; k < 2; k++) {
            const double a = k ? m2 : m1;
            double blo = -1e30, bhi = 1e30;
            for (int i = 0; i < 256; i++) {
                const double q = (double)(x0 + i - xz), v = (double)tg[i] - yz;
                if (tg[i] > lo && v - 0.5 - a * q > blo)
                    blo = v - 0.5 - a * q;
                if (tg[i] < hi && v + 0.5 - a * q < bhi)
                    bhi = v + 0.5 - a * q;
            }
            w[k] = bhi - blo;
        }
        if (w[0] < w[1])
            a0 = m1;
        else
            a1 = m2;
    }
    return (a0 + a1) / 2;
}

/* One channel's form: the 256 targets tg[k] for bytes x0 + k. Weights 127 down to BIAS_WMIN: the
 * offsets B / w they reach together are the fractions of denominators up to 127 (gaps of about 1/5000
 * of an input step, against 1/127 for one weight). 0 and (*w, *mu, *t, *B), or -1 when there is none. */
static int channel_form(const int32_t *tg, int32_t x0, int32_t xz, double r, int32_t yz, int32_t lo, int32_t hi,
                        int8_t *w_out, int32_t *mu_out, int32_t *b_out)
{
    const double a = best_slope(tg, x0, xz, r, yz, lo, hi);
    for (int32_t w = BIAS_W; w >= BIAS_WMIN; w--)
        if (!form_for_w(tg, x0, xz, a, yz, lo, hi, w, mu_out, b_out)) {
            *w_out = (int8_t)w;
            return 0;
        }
    return -1;
}

/* f_c(x) for every byte and channel, by the host lop L itself: tg[c * 256 + k] for byte x0 + k. */
static int bias_targets(tsr_onnx_t *m, ox_lop_t *L, int64_t C, int32_t x0, int32_t *tg)
{
    const int64_t n = 256 * C;
    uint8_t *xb = malloc((size_t)n), *yb = malloc((size_t)n);
    if (!xb || !yb) {
        free(xb), free(yb);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    for (int64_t i = 0; i < n; i++) /* element i: channel i % C (the kernel's b index), byte i / C */
        xb[i] = (uint8_t)(x0 + (int32_t)(i / C));
    ox_val_t *X = &m->vals[L->in], *Y = &m->vals[L->out];
    uint8_t *xs = X->rt, *ys = Y->rt;
    const int64_t n0 = L->geo[0];
    X->rt = xb, Y->rt = yb, L->geo[0] = n;
    const int rc = tsr_ox_run_qaddc(m, L);
    X->rt = xs, Y->rt = ys, L->geo[0] = n0;
    const int ys8 = Y->elem == ET_INT8;
    for (int64_t i = 0; i < n && !rc; i++)
        tg[(i % C) * 256 + i / C] = ys8 ? (int8_t)yb[i] : yb[i];
    free(xb), free(yb);
    return rc;
}

/* Lop l (rows x C) as the depthwise conv of the forms w, mu, t, B (mu, sh, B owned by the lop from here). */
static int make_conv(tsr_onnx_t *m, int l, int64_t rows, int64_t C, const int8_t *w, int32_t *mu, int32_t *sh,
                     int32_t *B)
{
    ox_lop_t *L = &m->lops[l];
    const ox_val_t *X = &m->vals[L->in], *Y = &m->vals[L->out];
    tsr_nd_node_t nd;
    memset(&nd, 0, sizeof nd);
    nd.kind = TSR_ND_CONV;
    tsr_conv2d_params_t *p = &nd.conv;
    int32_t *wzp = calloc(1, sizeof *wzp);
    nd.w = malloc((size_t)C);
    if (!wzp || !nd.w) {
        free(wzp), free(nd.w);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    memcpy(nd.w, w, (size_t)C);
    qdtype(X->elem, &p->x_dtype);
    qdtype(Y->elem, &p->y_dtype);
    p->n = (int)rows, p->c_in = p->c_out = (int)C, p->h = p->w = p->kh = p->kw = 1;
    p->stride_h = p->stride_w = 1;
    p->groups = (int)C;
    p->x_zp = (int32_t)L->geo[5];
    p->w_dtype = TSR_DT_INT8;
    p->w_zp = wzp, p->w_zp_count = 1;
    p->y_zp = L->yzp;
    p->mult = mu, p->shift = sh, p->rq_count = (int)C;
    p->act_min = p->y_dtype == TSR_DT_UINT8 ? 0 : -128;
    p->act_max = p->y_dtype == TSR_DT_UINT8 ? 255 : 127;
    nd.bias = B;
    if (tsr_conv2d_check(p, &(int){0}, &(int){0})) {
        free(wzp), free(nd.w);
        tsr_err_clear();
        return 1;
    }
    const int node = L->node, in = L->in, out = L->out;
    free(L->zpa), free(L->zpb);
    memset(L, 0, sizeof *L);
    L->node = L->name_node = node;
    L->side = SIDE_DEV;
    L->in = in, L->in2 = -1, L->out = out;
    L->seg = -1;
    L->nd = nd;
    tsr_strsafe(nname(m, node), L->nd.name, sizeof L->nd.name);
    return 0;
}

/* Move lop l to position p + 1 (p < l), the lops between one up; every lop index follows. */
static void move_lop(tsr_onnx_t *m, int l, int p)
{
    const ox_lop_t t = m->lops[l];
    memmove(&m->lops[p + 2], &m->lops[p + 1], sizeof t * (size_t)(l - p - 1));
    m->lops[p + 1] = t;
#define REMAP(x) ((x) == l ? p + 1 : (x) > p && (x) < l ? (x) + 1 : (x))
    for (size_t i = 0; i < m->gp->n_node; i++)
        m->node_lop[i] = REMAP(m->node_lop[i]);
    for (int v = 0; v < m->nvals; v++) {
        m->vals[v].prod = REMAP(m->vals[v].prod);
        m->vals[v].real_lop = REMAP(m->vals[v].real_lop);
    }
#undef REMAP
}

/* Is host lop l an Add of a per-channel constant to a device dense's [rows, C] output? C, or 0. */
static int64_t bias_shape(const tsr_onnx_t *m, const ox_lop_t *L)
{
    if (L->side != SIDE_HOST || L->hkind != H_QADDC || L->axis || L->in < 0 || L->in2 < 0 || L->geo[11])
        return 0;
    const ox_val_t *X = &m->vals[L->in], *B = &m->vals[L->in2], *Y = &m->vals[L->out];
    if (X->cdata || !B->cdata || X->base != L->in || X->ndim != 2 || X->prod < 0 || Y->base != L->out)
        return 0;
    const ox_lop_t *P = &m->lops[X->prod];
    const int64_t C = X->dims[1];
    if (!tsr_ox_in_graph(P) || P->nd.kind != TSR_ND_DENSE || L->geo[1] != C || L->geo[0] != numel(X) ||
        numel(Y) != numel(X) || Y->ndim < 1 || Y->dims[Y->ndim - 1] != C || C < 1 || C > BIAS_CMAX)
        return 0;
    return C;
}

int tsr_ox_bias_device(tsr_onnx_t *m, int l)
{
    if (m->opts.place[TSR_PLACE_BIAS] == TSR_PLACE_HOST) /* --place bias=host */
        return 0;
    ox_lop_t *L = &m->lops[l];
    const int64_t C = bias_shape(m, L);
    if (!C)
        return 0;
    const ox_val_t *X = &m->vals[L->in];
    const int64_t rows = X->dims[0];
    const int32_t x0 = X->elem == ET_INT8 ? -128 : 0, xz = (int32_t)L->geo[5], yz = L->yzp;
    const int32_t lo = m->vals[L->out].elem == ET_INT8 ? -128 : 0, hi = lo + 255;
    uint32_t ysb = (uint32_t)L->geo[7];
    float ys;
    memcpy(&ys, &ysb, 4);
    const double r = (double)L->scale / (double)ys; /* the activation's scale over the output's */
    int32_t *tg = malloc(sizeof *tg * (size_t)(256 * C)), *mu = malloc(sizeof *mu * (size_t)C),
            *sh = malloc(sizeof *sh * (size_t)C), *B = malloc(sizeof *B * (size_t)C);
    int8_t *w = malloc((size_t)C);
    int rc = !tg || !mu || !sh || !B || !w ? tsr_err(TSR_ENOMEM, "out of memory") : 0;
    if (!rc && !(r > 0 && r < 1e6))
        rc = 1;
    if (!rc)
        rc = bias_targets(m, L, C, x0, tg);
    for (int64_t c = 0; c < C && !rc; c++) {
        if (channel_form(tg + c * 256, x0, xz, r, yz, lo, hi, &w[c], &mu[c], &B[c]))
            rc = 1; /* no form for this channel: the host kernel */
        sh[c] = 0;
    }
    free(tg);
    if (!rc)
        rc = make_conv(m, l, rows, C, w, mu, sh, B);
    free(w);
    if (rc) {
        free(mu), free(sh), free(B);
        if (rc == 1)
            tsr_err_clear();
        return rc == 1 ? 0 : rc;
    }
    /* the output: a [rows, C] value of its own (the dense's layout), the Add's output an alias of it */
    const int yv = m->lops[l].out, y2 = tsr_ox_new_val(m, "");
    if (y2 < 0)
        return y2;
    ox_val_t *Y2 = &m->vals[y2];
    Y2->elem = m->vals[yv].elem;
    Y2->ndim = 2, Y2->dims[0] = rows, Y2->dims[1] = C;
    Y2->nbytes = (size_t)(rows * C);
    Y2->defined = 1;
    for (int v = 0; v < m->nvals; v++)
        if (m->vals[v].base == yv)
            m->vals[v].base = y2;
    m->vals[yv].prod = -1;
    m->lops[l].out = y2;
    const int p = m->vals[m->lops[l].in].prod;
    Y2->prod = l;
    if (p < l - 1)
        move_lop(m, l, p);
    return 1;
}
