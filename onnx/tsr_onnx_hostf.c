/*
 * tsr_onnx_hostf: the host kernels of the standard float (and int64) ops
 * (tsr_onnx_ir.h: H_FUNARY ... H_FMATMUL), registered in tsr_onnx_host.c's
 * table. Why a file of their own: they are ONNX's float semantics (what a
 * QDQ model runs between a host DequantizeLinear and QuantizeLinear, and
 * the int64 shape arithmetic that lowering folds by running these same
 * kernels on constants), not the quantized kernels of tsr_onnx_host.c.
 * Float results are computed in double and rounded once to float32, so
 * +, -, *, / are float32's correctly rounded results (as ONNX Runtime's);
 * transcendental functions differ from ONNX Runtime's approximations by a
 * few float32 ulps. A kernel reads its node's own values (geo[0..3]: the
 * shapes as the node sees them) through tsr_ox_bytes (their bases' bytes).
 * Lowering checked every shape; what only the data can break (a Gather
 * index out of range, an integer division by zero) is a one-line error.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_onnx_qadd.h"

static double getd(const uint8_t *b, int e, int64_t i)
{
    switch (e) {
    case ET_FLOAT: { float f; memcpy(&f, b + 4 * i, 4); return f; }
    case ET_INT64: { int64_t v; memcpy(&v, b + 8 * i, 8); return (double)v; }
    case ET_INT32: { int32_t v; memcpy(&v, b + 4 * i, 4); return v; }
    case ET_INT8: return (int8_t)b[i];
    default: return b[i]; /* uint8, bool */
    }
}

static int64_t geti(const uint8_t *b, int e, int64_t i)
{
    switch (e) {
    case ET_FLOAT: { float f; memcpy(&f, b + 4 * i, 4); return (int64_t)f; } /* callers: integer inputs */
    case ET_INT64: { int64_t v; memcpy(&v, b + 8 * i, 8); return v; }
    case ET_INT32: { int32_t v; memcpy(&v, b + 4 * i, 4); return v; }
    case ET_INT8: return (int8_t)b[i];
    default: return b[i];
    }
}

static void setd(uint8_t *b, int e, int64_t i, double d)
{
    if (e == ET_FLOAT) {
        float f = (float)d;
        memcpy(b + 4 * i, &f, 4);
    } else if (e == ET_BOOL)
        b[i] = d != 0;
}

static void seti(uint8_t *b, int e, int64_t i, int64_t v)
{
    switch (e) {
    case ET_INT64: memcpy(b + 8 * i, &v, 8); break;
    case ET_INT32: { int32_t w = (int32_t)(uint32_t)(uint64_t)v; memcpy(b + 4 * i, &w, 4); break; }
    case ET_FLOAT: { float f = (float)v; memcpy(b + 4 * i, &f, 4); break; }
    case ET_BOOL: b[i] = v != 0; break;
    default: b[i] = (uint8_t)v; break;
    }
}

static double unary(int op, double x, float alpha, float beta)
{
    switch (op) {
    case FU_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case FU_HARDSIGMOID: { double y = alpha * x + beta; return y < 0 ? 0 : y > 1 ? 1 : y; }
    case FU_HARDSWISH: { double y = x / 6.0 + 0.5; return x * (y < 0 ? 0 : y > 1 ? 1 : y); }
    case FU_TANH: return tanh(x);
    case FU_LEAKYRELU: return x < 0 ? alpha * x : x;
    case FU_CLIP: return x < alpha ? alpha : x > beta ? beta : x; /* NaN passes through */
    case FU_ERF: return erf(x);
    case FU_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case FU_GELU_TANH: return 0.5 * x * (1.0 + tanh(0.7978845608028654 /* sqrt(2 / pi) */ * (x + 0.044715 * x * x * x)));
    case FU_SQRT: return sqrt(x);
    case FU_RECIP: return 1.0 / x;
    case FU_NEG: return -x;
    case FU_ABS: return fabs(x);
    case FU_EXP: return exp(x);
    case FU_LOG: return log(x);
    case FU_ELU: return x < 0 ? alpha * (exp(x) - 1.0) : x;
    case FU_SOFTPLUS: return log1p(exp(x));
    case FU_RELU: return x > 0 ? x : 0;
    case FU_SILU: return x / (1.0 + exp(-x));
    default: return x == 0; /* FU_NOT */
    }
}

double tsr_ox_unary(int op, double x, float alpha, float beta) { return unary(op, x, alpha, beta); }

static float ldf(const uint8_t *b, int64_t i)
{
    float f;
    memcpy(&f, b + 4 * i, 4);
    return f;
}

/* ONNX Runtime's float Sqrt is Eigen's cwiseSqrt: with EIGEN_FAST_MATH its SSE packets (4 floats;
 * the elements before the last n % 4 of a 64-byte aligned buffer) compute x * r, r = rsqrtps(x)
 * refined by one Newton step (not correctly rounded: 1 ulp off sqrtf in ViT-tiny's LayerNorm,
 * which moved a quantized value), tiny positive x flushed to 0; the tail takes sqrtf. The same
 * instruction on the same CPU gives the same approximation, so x86-64 uses it; elsewhere sqrtf. */
static float eigen_psqrt(float x)
{
#if defined(__SSE__) || defined(__x86_64__)
    const __m128 X = _mm_set1_ps(x), mhx = _mm_mul_ps(X, _mm_set1_ps(-0.5f));
    __m128 r = _mm_rsqrt_ps(X);
    r = _mm_mul_ps(r, _mm_add_ps(_mm_mul_ps(mhx, _mm_mul_ps(r, r)), _mm_set1_ps(1.5f)));
    return x < FLT_MIN && !(x < 0) ? 0.0f : _mm_cvtss_f32(_mm_mul_ps(X, r));
#else
    return sqrtf(x);
#endif
}

int tsr_ox_run_funary(tsr_onnx_t *m, const ox_lop_t *L)
{
    const int x = (int)L->geo[0];
    const ox_val_t *X = &m->vals[x], *Y = &m->vals[L->out];
    const uint8_t *xb = tsr_ox_bytes(m, x);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const int64_t n = numel(X);
    if (X->elem != ET_FLOAT) /* Neg, Abs, Not of integers: exact in int64 */
        for (int64_t i = 0; i < n; i++) {
            int64_t v = geti(xb, X->elem, i);
            seti(yb, Y->elem, i, L->axis == FU_NOT ? !v : L->axis == FU_ABS ? (v < 0 ? -v : v) : -v);
        }
    else if (L->axis == FU_SQRT && Y->elem == ET_FLOAT)
        for (int64_t i = 0; i < n; i++) {
            const float v = ldf(xb, i), r = i < n - n % 4 ? eigen_psqrt(v) : sqrtf(v);
            memcpy(yb + 4 * i, &r, 4);
        }
    else
        for (int64_t i = 0; i < n; i++)
            setd(yb, Y->elem, i, unary(L->axis, getd(xb, ET_FLOAT, i), L->scale, L->mult));
    return 0;
}

/* Strides of value v broadcast to out's shape (0 along broadcast dimensions). */
static void bstrides(const ox_val_t *V, const ox_val_t *O, int64_t *st)
{
    int64_t s = 1;
    for (int i = O->ndim - 1, j = V->ndim - 1; i >= 0; i--, j--) {
        st[i] = j >= 0 && V->dims[j] != 1 ? s : 0;
        if (j >= 0)
            s *= V->dims[j];
    }
}

int tsr_ox_run_fnary(tsr_onnx_t *m, const ox_lop_t *L)
{
    const ox_val_t *Y = &m->vals[L->out];
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const int nin = L->axis == FN_WHERE ? 3 : L->axis == FN_EXPAND ? 1 : 2;
    const ox_val_t *I[3];
    const uint8_t *ib[3];
    int64_t st[3][MAXD], off[3] = {0, 0, 0}, idx[MAXD] = {0};
    for (int k = 0; k < nin; k++) {
        I[k] = &m->vals[L->geo[k]];
        ib[k] = tsr_ox_bytes(m, (int)L->geo[k]);
        bstrides(I[k], Y, st[k]);
    }
    const int ie = I[nin == 3 ? 1 : 0]->elem; /* the operands' type (Where: of x) */
    const int fl = ie == ET_FLOAT;
    const size_t es = esize(Y->elem);
    const int64_t n = numel(Y);
    for (int64_t o = 0; o < n; o++) {
        switch (L->axis) {
        case FN_EXPAND: memcpy(yb + (size_t)o * es, ib[0] + (size_t)off[0] * es, es); break;
        case FN_WHERE: {
            const int k = ib[0][off[0]] ? 1 : 2;
            memcpy(yb + (size_t)o * es, ib[k] + (size_t)off[k] * es, es);
            break;
        }
        default:
            if (fl) {
                const double a = getd(ib[0], ie, off[0]), b = getd(ib[1], ie, off[1]);
                double r;
                switch (L->axis) {
                case FN_ADD: r = a + b; break;
                case FN_SUB: r = a - b; break;
                case FN_MUL: r = a * b; break;
                case FN_DIV: r = a / b; break;
                case FN_POW: r = pow(a, b); break;
                case FN_MIN: r = a < b || a != a ? a : b; break;
                case FN_MAX: r = a > b || a != a ? a : b; break;
                case FN_EQUAL: r = a == b; break;
                case FN_LESS: r = a < b; break;
                case FN_GREATER: r = a > b; break;
                case FN_AND: r = a != 0 && b != 0; break;
                default: r = a != 0 || b != 0; break;
                }
                setd(yb, Y->elem, o, r);
            } else {
                const int64_t a = geti(ib[0], ie, off[0]), b = geti(ib[1], ie, off[1]);
                int64_t r;
                switch (L->axis) {
                case FN_ADD: r = (int64_t)((uint64_t)a + (uint64_t)b); break; /* wraps as numpy's */
                case FN_SUB: r = (int64_t)((uint64_t)a - (uint64_t)b); break;
                case FN_MUL: r = (int64_t)((uint64_t)a * (uint64_t)b); break;
                case FN_DIV:
                    if (b == 0 || (a == INT64_MIN && b == -1))
                        return tsr_ox_node_err(m, L->node, "integer division of %lld by %lld", (long long)a,
                                               (long long)b);
                    r = a / b; /* truncates toward zero, as ONNX Runtime's */
                    break;
                case FN_POW: {
                    r = 1;
                    for (int64_t e = 0; e < b && e < 64; e++)
                        r = (int64_t)((uint64_t)r * (uint64_t)a);
                    break;
                }
                case FN_MIN: r = a < b ? a : b; break;
                case FN_MAX: r = a > b ? a : b; break;
                case FN_EQUAL: r = a == b; break;
                case FN_LESS: r = a < b; break;
                case FN_GREATER: r = a > b; break;
                case FN_AND: r = a && b; break;
                default: r = a || b; break;
                }
                seti(yb, Y->elem, o, r);
            }
        }
        /* next output index: the odometer, and each operand's offset with it */
        for (int d = Y->ndim - 1; d >= 0; d--) {
            for (int k = 0; k < nin; k++)
                off[k] += st[k][d];
            if (++idx[d] < Y->dims[d])
                break;
            for (int k = 0; k < nin; k++)
                off[k] -= st[k][d] * Y->dims[d];
            idx[d] = 0;
        }
    }
    return 0;
}

/* Gather along axis: out = data[:axis] + indices + data[axis+1:]. */
int tsr_ox_run_gather(tsr_onnx_t *m, const ox_lop_t *L)
{
    const int d = (int)L->geo[0], ix = (int)L->geo[1];
    const ox_val_t *D = &m->vals[d], *X = &m->vals[ix];
    const uint8_t *db = tsr_ox_bytes(m, d), *xb = tsr_ox_bytes(m, ix);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    int64_t outer = 1, inner = 1;
    const int64_t len = D->dims[L->axis], ni = numel(X);
    for (int i = 0; i < L->axis; i++)
        outer *= D->dims[i];
    for (int i = L->axis + 1; i < D->ndim; i++)
        inner *= D->dims[i];
    const size_t row = (size_t)inner * esize(D->elem);
    for (int64_t j = 0; j < ni; j++) {
        int64_t k = geti(xb, X->elem, j);
        if (k < -len || k >= len)
            return tsr_ox_node_err(m, L->node, "index %lld (element %lld of the indices) is out of range for "
                                   "a dimension of %lld", (long long)k, (long long)j, (long long)len);
        if (k < 0)
            k += len;
        for (int64_t o = 0; o < outer; o++)
            memcpy(yb + ((size_t)o * (size_t)ni + (size_t)j) * row, db + ((size_t)o * (size_t)len + (size_t)k) * row,
                   row);
    }
    return 0;
}

/* Slice: output index i along dimension a reads start[a] + i * step[a] (zpa: starts, zpb: steps). */
int tsr_ox_run_slice(tsr_onnx_t *m, const ox_lop_t *L)
{
    const int x = (int)L->geo[0];
    const ox_val_t *X = &m->vals[x], *Y = &m->vals[L->out];
    const uint8_t *xb = tsr_ox_bytes(m, x);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const size_t es = esize(X->elem);
    int64_t xs[MAXD], idx[MAXD] = {0}, s = 1;
    for (int i = X->ndim - 1; i >= 0; i--)
        xs[i] = s, s *= X->dims[i];
    const int64_t n = numel(Y);
    for (int64_t o = 0; o < n; o++) {
        int64_t off = 0;
        for (int i = 0; i < X->ndim; i++)
            off += ((int64_t)L->zpa[i] + idx[i] * (int64_t)L->zpb[i]) * xs[i];
        memcpy(yb + (size_t)o * es, xb + (size_t)off * es, es);
        for (int d = Y->ndim - 1; d >= 0; d--) {
            if (++idx[d] < Y->dims[d])
                break;
            idx[d] = 0;
        }
    }
    return 0;
}

/* Transpose that moves data: output dimension i is input dimension perm[i] (geo[4 + i]). */
int tsr_ox_run_ftranspose(tsr_onnx_t *m, const ox_lop_t *L)
{
    const int x = (int)L->geo[0];
    const ox_val_t *X = &m->vals[x], *Y = &m->vals[L->out];
    const uint8_t *xb = tsr_ox_bytes(m, x);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const size_t es = esize(X->elem);
    int64_t xs[MAXD], ps[MAXD], idx[MAXD] = {0}, s = 1, off = 0;
    for (int i = X->ndim - 1; i >= 0; i--)
        xs[i] = s, s *= X->dims[i];
    for (int i = 0; i < Y->ndim; i++)
        ps[i] = xs[L->geo[4 + i]];
    const int64_t n = numel(Y);
    for (int64_t o = 0; o < n; o++) {
        memcpy(yb + (size_t)o * es, xb + (size_t)off * es, es);
        for (int d = Y->ndim - 1; d >= 0; d--) {
            off += ps[d];
            if (++idx[d] < Y->dims[d])
                break;
            off -= ps[d] * Y->dims[d];
            idx[d] = 0;
        }
    }
    return 0;
}

/* The float32 sum of a[0..n) in the order of Eigen's vectorized redux with SSE packets (4 floats,
 * two accumulators, then (p0 + p2) + (p1 + p3)), which ONNX Runtime's ReduceMean/ReduceSum use on a
 * row of trailing reduced axes (FastReduceKR); head: the elements before the row's first 16-byte
 * boundary in ORT's (64-byte aligned) buffer, added after the packets, as Eigen does. */
static float eigen_sum(const uint8_t *b, int64_t n, int64_t head)
{
#define a(i) ldf(b, i)
    if (head > n)
        head = n;
    const int64_t al = (n - head) / 4 * 4, end = head + al, end2 = head + (n - head) / 8 * 8;
    float r = 0;
    if (!al) {
        for (int64_t i = 0; i < n; i++)
            r = i ? r + a(i) : a(i);
        return r;
    }
    float p0[4], p1[4];
    for (int j = 0; j < 4; j++)
        p0[j] = a(head + j);
    if (al > 4) {
        for (int j = 0; j < 4; j++)
            p1[j] = a(head + 4 + j);
        for (int64_t i = head + 8; i < end2; i += 8)
            for (int j = 0; j < 4; j++)
                p0[j] += a(i + j), p1[j] += a(i + 4 + j);
        for (int j = 0; j < 4; j++)
            p0[j] += p1[j];
        if (end > end2)
            for (int j = 0; j < 4; j++)
                p0[j] += a(end2 + j);
    }
    r = (p0[0] + p0[2]) + (p0[1] + p0[3]);
    for (int64_t i = 0; i < head; i++)
        r += a(i);
    for (int64_t i = end; i < n; i++)
        r += a(i);
#undef a
    return r;
}

/* ReduceMean/Sum/Max/Min over the axes in the bit mask geo[4] (double accumulators). geo[5]: a
 * ReduceMean/ReduceSum node: float32 over trailing axes sums as ONNX Runtime does (eigen_sum, then
 * the mean divided by the count in float32): the double sum rounded once differed from ORT's in the
 * last bit of 153 of 197 of ViT-tiny's LayerNorm means, which now and then moved a quantized value. */
int tsr_ox_run_reduce(tsr_onnx_t *m, const ox_lop_t *L)
{
    const int x = (int)L->geo[0];
    const ox_val_t *X = &m->vals[x], *Y = &m->vals[L->out];
    const uint8_t *xb = tsr_ox_bytes(m, x);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const int64_t ny = numel(Y), nx = numel(X);
    int k = X->ndim;
    while (k > 0 && ((L->geo[4] >> (k - 1)) & 1))
        k--;
    if (L->geo[5] && (L->axis == RD_MEAN || L->axis == RD_SUM) && X->elem == ET_FLOAT && Y->elem == ET_FLOAT &&
        k < X->ndim && !(L->geo[4] & ((1LL << k) - 1)) && ny > 0) { /* reduced axes: a trailing block */
        const int64_t inner = nx / ny;
        for (int64_t r = 0; r < ny; r++) {
            float v = eigen_sum(xb + 4 * r * inner, inner, (4 - (r * inner) % 4) % 4);
            if (L->axis == RD_MEAN)
                v /= (float)inner;
            memcpy(yb + 4 * r, &v, 4);
        }
        return 0;
    }
    double *acc = malloc(sizeof(double) * (size_t)(ny ? ny : 1));
    if (!acc)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int64_t ys[MAXD], idx[MAXD] = {0}, s = 1, off = 0;
    for (int i = X->ndim - 1; i >= 0; i--) { /* the output's strides along the input's dimensions */
        const int red = (int)((L->geo[4] >> i) & 1);
        ys[i] = red ? 0 : s;
        if (!red)
            s *= X->dims[i];
    }
    for (int64_t i = 0; i < ny; i++)
        acc[i] = L->axis == RD_MAX ? -INFINITY : L->axis == RD_MIN ? INFINITY : 0;
    for (int64_t i = 0; i < nx; i++) {
        const double v = getd(xb, X->elem, i);
        double *a = &acc[off];
        *a = L->axis == RD_MAX ? (v > *a || v != v ? v : *a) : L->axis == RD_MIN ? (v < *a || v != v ? v : *a) : *a + v;
        for (int d = X->ndim - 1; d >= 0; d--) {
            off += ys[d];
            if (++idx[d] < X->dims[d])
                break;
            off -= ys[d] * X->dims[d];
            idx[d] = 0;
        }
    }
    const double cnt = ny ? (double)nx / (double)ny : 1;
    for (int64_t i = 0; i < ny; i++)
        setd(yb, Y->elem, i, L->axis == RD_MEAN ? acc[i] / cnt : acc[i]);
    free(acc);
    return 0;
}

/* LayerNormalization over the dimensions from axis on: (x - mean) / sqrt(var + epsilon) * scale + bias
 * (scale geo[1], bias geo[2] or -1: each the normalized part's size, or one element). */
int tsr_ox_run_layernorm(tsr_onnx_t *m, const ox_lop_t *L)
{
    const int x = (int)L->geo[0], sv = (int)L->geo[1], bv = (int)L->geo[2];
    const ox_val_t *X = &m->vals[x];
    const uint8_t *xb = tsr_ox_bytes(m, x), *sb = tsr_ox_bytes(m, sv), *bb = bv >= 0 ? tsr_ox_bytes(m, bv) : NULL;
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    int64_t inner = 1;
    for (int i = L->axis; i < X->ndim; i++)
        inner *= X->dims[i];
    const int64_t outer = inner ? numel(X) / inner : 0, ns = numel(&m->vals[sv]),
                  nb = bv >= 0 ? numel(&m->vals[bv]) : 0;
    for (int64_t o = 0; o < outer; o++) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < inner; i++)
            mean += getd(xb, ET_FLOAT, o * inner + i);
        mean /= (double)inner;
        for (int64_t i = 0; i < inner; i++) {
            const double d = getd(xb, ET_FLOAT, o * inner + i) - mean;
            var += d * d;
        }
        var /= (double)inner;
        const double inv = 1.0 / sqrt(var + (double)L->scale);
        for (int64_t i = 0; i < inner; i++) {
            const double sc = getd(sb, ET_FLOAT, ns == 1 ? 0 : i), bi = bb ? getd(bb, ET_FLOAT, nb == 1 ? 0 : i) : 0;
            setd(yb, ET_FLOAT, o * inner + i, (getd(xb, ET_FLOAT, o * inner + i) - mean) * inv * sc + bi);
        }
    }
    return 0;
}

/* MatMul of float tensors [..., M, K] x [..., K, N] (batch dimensions broadcast; geo[4..6]: M, K, N). */
int tsr_ox_run_fmatmul(tsr_onnx_t *m, const ox_lop_t *L)
{
    const int a = (int)L->geo[0], b = (int)L->geo[1];
    const ox_val_t *A = &m->vals[a], *B = &m->vals[b], *Y = &m->vals[L->out];
    const float *ab = (const float *)(const void *)tsr_ox_bytes(m, a),
                *bb = (const float *)(const void *)tsr_ox_bytes(m, b);
    float *yb = (float *)(void *)tsr_ox_bytes(m, L->out);
    const int64_t M = L->geo[4], K = L->geo[5], N = L->geo[6];
    const int nb = Y->ndim - 2; /* batch dimensions of the output */
    int64_t sa[MAXD] = {0}, sb[MAXD] = {0}, idx[MAXD] = {0}, batch = 1, oa = 0, ob = 0;
    for (int i = nb - 1, ja = A->ndim - 3, jb = B->ndim - 3, pa = M * K, pb = K * N; i >= 0; i--, ja--, jb--) {
        sa[i] = ja >= 0 && A->dims[ja] != 1 ? pa : 0;
        sb[i] = jb >= 0 && B->dims[jb] != 1 ? pb : 0;
        if (ja >= 0)
            pa *= A->dims[ja];
        if (jb >= 0)
            pb *= B->dims[jb];
        batch *= Y->dims[i];
    }
    double *acc = malloc(sizeof(double) * (size_t)(N ? N : 1)); /* one output row, k outermost: B read in rows */
    if (!acc)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int64_t p = 0; p < batch; p++) {
        for (int64_t i = 0; i < M; i++) {
            for (int64_t j = 0; j < N; j++)
                acc[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                const double a = ab[oa + i * K + k];
                const float *br = bb + ob + k * N;
                for (int64_t j = 0; j < N; j++)
                    acc[j] += a * (double)br[j];
            }
            for (int64_t j = 0; j < N; j++)
                yb[(p * M + i) * N + j] = (float)acc[j];
        }
        for (int d = nb - 1; d >= 0; d--) {
            oa += sa[d], ob += sb[d];
            if (++idx[d] < Y->dims[d])
                break;
            oa -= sa[d] * Y->dims[d], ob -= sb[d] * Y->dims[d];
            idx[d] = 0;
        }
    }
    free(acc);
    return 0;
}

/* DequantizeLinear -> Softmax -> QuantizeLinear as ONNX Runtime runs it once its QDQ transformer has
 * made it a com.microsoft QLinearSoftmax (contrib_ops/cpu/quantization/qlinear_softmax.cc, float
 * lookup table): exp of (x - 255 + shift) * x_scale per input byte (shift from logf(FLT_MAX / len),
 * both in float32 as ORT computes them), the row's sum in float, each
 * output nearbyintf(table * floor(1 / y_scale) / sum) + zero point. (L: scale x_scale, mult y_scale,
 * zp its zero point, axis; geo[0] the quantized input.) */
int tsr_ox_run_qsoftmax(tsr_onnx_t *m, const ox_lop_t *L)
{
    const int x = (int)L->geo[0];
    const ox_val_t *X = &m->vals[x];
    const uint8_t *xb = tsr_ox_bytes(m, x);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const int sgn = X->elem == ET_INT8;
    int64_t outer = 1, len = X->dims[L->axis], inner = 1;
    for (int i = 0; i < L->axis; i++)
        outer *= X->dims[i];
    for (int i = L->axis + 1; i < X->ndim; i++)
        inner *= X->dims[i];
    if (len < 1)
        return 0;
    float table[256];
    /* the sum stays below FLT_MAX; ORT divides in float32 (numeric_limits<float>::max() / reduce_len) and takes
       the float log of that: in double, a table a few ulps off turns a tie now and then (vit_tiny at 224x224,
       197 keys: 3 of 116,427 bytes of layer 10's Softmax) */
    double shift = (double)logf(FLT_MAX / (float)len) - 5.0;
    shift = (shift > 0 ? shift : 0) / (double)L->scale;
    for (int i = 0; i < 256; i++)
        table[(uint8_t)(sgn ? i - 128 : i)] = (float)exp(((double)i - 255 + shift) * (double)L->scale);
    const float ys = floorf(1.0f / L->mult);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const int64_t b = o * len * inner + in;
            int xmax = sgn ? -128 : 0;
            for (int64_t k = 0; k < len; k++) {
                const int v = sgn ? (int8_t)xb[b + k * inner] : xb[b + k * inner];
                xmax = v > xmax ? v : xmax;
            }
            /* the table index of x: uint8 x + 255 - xmax; int8 (uint8)(x + 127 - xmax) */
            float sum = 0;
            for (int64_t k = 0; k < len; k++) {
                const int v = sgn ? (int8_t)xb[b + k * inner] : xb[b + k * inner];
                sum += sgn ? table[(uint8_t)(v + 127 - xmax)] : table[v + 255 - xmax];
            }
            if (sum == 0)
                continue;
            for (int64_t k = 0; k < len; k++) {
                const int v = sgn ? (int8_t)xb[b + k * inner] : xb[b + k * inner];
                const float t = sgn ? table[(uint8_t)(v + 127 - xmax)] : table[v + 255 - xmax];
                if (sgn) { /* ORT: int32, then only values above 255 clamped, then cast to int8 */
                    const int32_t q = (int32_t)nearbyintf((t * ys) / sum) + L->zp;
                    yb[b + k * inner] = (uint8_t)(q > 255 ? 255 : q);
                } else {
                    const uint32_t q = (uint32_t)nearbyintf((t * ys) / sum) + (uint32_t)L->zp;
                    yb[b + k * inner] = (uint8_t)(q > 255 ? 255 : q);
                }
            }
        }
    return 0;
}

/* A quantized Add of an activation and a constant (a Linear's bias, a
 * position embedding) as ONNX Runtime's QLinearAdd (MLAS, x86-64): with
 * MA, MB, Sh from the scale ratios (MlasCalcQLinearAddParameters, the
 * device add's; tsr_ox_eltwise.c), y = RDBPOT((a - za) MA + (b - zb) MB, Sh)
 * + zy (rounding half away from zero), saturated; when those checks fail,
 * MLAS's float form nearbyintf((as (a - za) + bs (b - zb)) / ys) + zy.
 * (L: in the activation's bytes, in2 the constant's, repeated every
 * geo[1] elements of the geo[0]; geo[2..4] MA, MB, Sh (Sh 0: the float
 * form); geo[5], geo[6] za, zb; scale as, mult bs, geo[7] ys's bits; yzp.)
 * axis 1: a Mul as ONNX Runtime's QLinearMul (MLAS, x86), in2 the constant
 * or an activation of in's shape: nearbyintf(float((a - za)(b - zb)) * scale
 * + zy) (the zero point added in float32 before the rounding, as MLAS's
 * SSE2 kernel does), saturated, scale = fl32(as * bs / ys). Add: in2 may be such an
 * activation too. geo[8] bit 0 (set for every Add since the ViT check): ORT's
 * AVX2 float form instead (x86-64 CPUs with AVX2 run that kernel, the
 * fixed-point one only without AVX2), bit 1 the node's inputs swapped,
 * geo[9], geo[10] the float bits of its r0, r1; bit 2 the output clamped
 * to [geo[12], geo[13]] (a fused Relu/Clip). geo[11] > 0 (a Mul by a
 * per-channel vector, in [N, C, H, W] by in2 [N, C, 1, 1]): in2's element
 * (i / geo[11]) % geo[1] for element i, i.e. each of in2's elements for
 * geo[11] = H*W consecutive ones. */
int tsr_ox_run_qaddc(tsr_onnx_t *m, const ox_lop_t *L)
{
    const uint8_t *ab = tsr_ox_bytes(m, L->in), *bb = tsr_ox_bytes(m, L->in2);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const int as = m->vals[L->in].elem == ET_INT8, bs = m->vals[L->in2].elem == ET_INT8;
    const int ys8 = m->vals[L->out].elem == ET_INT8;
    const int64_t n = L->geo[0], per = L->geo[1], MA = L->geo[2], MB = L->geo[3], Sh = L->geo[4];
    const int64_t inner = L->geo[11]; /* > 0: in2 element j is repeated for `inner` consecutive elements */
    const int32_t za = (int32_t)L->geo[5], zb = (int32_t)L->geo[6];
    const int32_t lo = ys8 ? -128 : 0, hi = ys8 ? 127 : 255;
    uint32_t ysb = (uint32_t)L->geo[7];
    float ysc;
    memcpy(&ysc, &ysb, 4);
    /* ONNX Runtime on an x86-64 CPU with AVX2 adds in float32 FMAs, not in the fixed-point form below (which
       rounds half away from zero: 1 LSB off on the exact ties of ViT-tiny's residual Adds, 2 of 37824
       elements, which then spread): the node's inputs in order (bit 1: input 0 is in2), but a scalar
       operand (per 1) is always MLAS's B */
    const int sw = (int)(L->geo[8] >> 1) & 1, ort_swap = sw && per != 1;
    tsr_qadd_ort_t ort = {0};
    if (L->geo[8] & 1) {
        float r0, r1;
        memcpy(&r0, &L->geo[9], 4), memcpy(&r1, &L->geo[10], 4);
        if (ort_swap)
            tsr_qadd_ort_init(&ort, r0, r1, zb, za, L->yzp, ys8);
        else /* (r0, r1 are in the node's order) */
            tsr_qadd_ort_init(&ort, sw ? r1 : r0, sw ? r0 : r1, za, zb, L->yzp, ys8);
    }
    for (int64_t i = 0; i < n; i++) {
        const int32_t a = (as ? (int8_t)ab[i] : ab[i]) - za;
        const int64_t bi = inner ? i / inner % per : i % per;
        const int32_t b = (bs ? (int8_t)bb[bi] : bb[bi]) - zb;
        int64_t q;
        if (L->axis) { /* Mul: MLAS (SSE2) adds the zero point in float32, before it rounds */
            const float v = (float)(a * b) * L->scale;
            q = (int64_t)nearbyintf(v + (float)L->yzp) - L->yzp;
        } else if (L->geo[8] & 1) { /* ONNX Runtime's AVX2 float form (tsr_onnx_qadd.h), operands as set up */
            int32_t y = ort_swap ? tsr_qadd_ort(&ort, b + zb, a + za) : tsr_qadd_ort(&ort, a + za, b + zb);
            if (L->geo[8] & 4) /* a fused Relu/Clip's clamp (a device add moved here, tsr_ox_exact_to_host) */
                y = y < L->geo[12] ? (int32_t)L->geo[12] : y > L->geo[13] ? (int32_t)L->geo[13] : y;
            yb[i] = (uint8_t)y;
            continue;
        } else if (Sh) {
            const int64_t acc = (int64_t)a * MA + (int64_t)b * MB, half = (int64_t)1 << (Sh - 1);
            q = acc >= 0 ? (acc + half) >> Sh : -((-acc + half) >> Sh);
        } else
            q = (int64_t)nearbyintf((L->scale * (float)a + L->mult * (float)b) / ysc);
        q += L->yzp;
        q = q < lo ? lo : q > hi ? hi : q;
        yb[i] = (uint8_t)(int32_t)q;
    }
    return 0;
}
