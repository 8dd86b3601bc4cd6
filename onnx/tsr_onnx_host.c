/*
 * tsr_onnx_host: the host kernels, one function per kind in one table
 * (kind, name for the placement table, run). They are plain C over the
 * values' bytes, with ONNX Runtime's formulas where rounding matters
 * (round half to even, saturate; float32 requantization of QLinearMatMul);
 * lowering has checked every shape and bounded the work before a kernel
 * is chosen, so a run cannot fail but on a NaN that has no quantized value.
 */
#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ir.h"

/* float -> uint8/int8: ONNX Runtime's formula (round half to even, saturate). */
static int run_quant(tsr_onnx_t *m, const ox_lop_t *L)
{
    const ox_val_t *X = &m->vals[L->in], *Y = &m->vals[L->out];
    const uint8_t *xb = tsr_ox_bytes(m, L->in);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const int64_t n = numel(X);
    const int lo = Y->elem == ET_UINT8 ? 0 : -128, hi = Y->elem == ET_UINT8 ? 255 : 127;
    for (int64_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, xb + 4 * i, 4);
        float q = nearbyintf(f / L->scale) + (float)L->zp; /* ORT: round half to even, then saturate */
        if (q != q)
            return NERR(m, L->node, "input element %lld is NaN: it has no quantized value", (long long)i);
        q = q < (float)lo ? (float)lo : q > (float)hi ? (float)hi : q;
        yb[i] = (uint8_t)(int)q;
    }
    return 0;
}

/* uint8/int8/int32 -> float. */
static int run_dequant(tsr_onnx_t *m, const ox_lop_t *L)
{
    const ox_val_t *X = &m->vals[L->in];
    const uint8_t *xb = tsr_ox_bytes(m, L->in);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const int64_t n = numel(X);
    for (int64_t i = 0; i < n; i++) {
        int32_t q = X->elem == ET_UINT8 ? xb[i] : X->elem == ET_INT8 ? (int8_t)xb[i] : 0;
        if (X->elem == ET_INT32)
            memcpy(&q, xb + 4 * i, 4);
        float f = (float)((int64_t)q - L->zp) * L->scale; /* int32 q - zp can overflow int32 */
        memcpy(yb + 4 * i, &f, 4);
    }
    return 0;
}

static int run_relu(tsr_onnx_t *m, const ox_lop_t *L)
{
    const ox_val_t *X = &m->vals[L->in];
    const uint8_t *xb = tsr_ox_bytes(m, L->in);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const int64_t n = numel(X);
    for (int64_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, xb + 4 * i, 4);
        f = f > 0 ? f : 0;
        memcpy(yb + 4 * i, &f, 4);
    }
    return 0;
}

/* Softmax and ArgMax along L->axis (one pass finds the maximum both need). */
static int run_softmax_argmax(tsr_onnx_t *m, const ox_lop_t *L)
{
    const ox_val_t *X = &m->vals[L->in];
    const uint8_t *xb = tsr_ox_bytes(m, L->in);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    int64_t outer = 1, len = X->dims[L->axis], inner = 1;
    for (int i = 0; i < L->axis; i++)
        outer *= X->dims[i];
    for (int i = L->axis + 1; i < X->ndim; i++)
        inner *= X->dims[i];
    const float *xf = (const float *)(const void *)xb;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const int64_t b = o * len * inner + in;
            int64_t best = 0;
            for (int64_t k = 1; k < len; k++)
                if (xf[b + k * inner] > xf[b + best * inner])
                    best = k;
            if (L->hkind == H_ARGMAX) {
                memcpy(yb + 8 * (o * inner + in), &best, 8);
                continue;
            }
            const float mx = xf[b + best * inner];
            double sum = 0;
            for (int64_t k = 0; k < len; k++)
                sum += exp((double)xf[b + k * inner] - mx);
            for (int64_t k = 0; k < len; k++) {
                float e = (float)(exp((double)xf[b + k * inner] - mx) / sum);
                memcpy(yb + 4 * (b + k * inner), &e, 4);
            }
        }
    return 0;
}

/* ConvInteger: int32 results, zero points per tensor (x) and per output channel (w). */
static int run_convint(tsr_onnx_t *m, const ox_lop_t *L)
{
    const ox_val_t *X = &m->vals[L->in];
    const uint8_t *xb = tsr_ox_bytes(m, L->in);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const ox_val_t *W = &m->vals[L->in2];
    const uint8_t *wb = tsr_ox_bytes(m, L->in2);
    const int64_t N = L->geo[8], C = L->geo[9], H = L->geo[10], Wd = L->geo[11], O = L->geo[12],
                  OH = L->geo[13], OW = L->geo[14], KH = L->geo[0], KW = L->geo[1];
    const int xs = X->elem == ET_INT8, ws = W->elem == ET_INT8;
    int32_t *yo = (int32_t *)(void *)yb;
    for (int64_t b = 0; b < N; b++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t acc = 0; /* padding is the zero point: it adds nothing */
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                const int64_t ih = oh * L->geo[2] + kh - L->geo[4],
                                              iw = ow * L->geo[3] + kw - L->geo[5];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= Wd)
                                    continue;
                                const uint8_t xv = xb[((b * C + c) * H + ih) * Wd + iw],
                                              wv = wb[((o * C + c) * KH + kh) * KW + kw];
                                acc += ((xs ? (int8_t)xv : xv) - L->zpa[0]) *
                                       ((ws ? (int8_t)wv : wv) - L->zpb[L->nzpb > 1 ? o : 0]);
                            }
                    yo[((b * O + o) * OH + oh) * OW + ow] = (int32_t)(uint32_t)(uint64_t)acc; /* int32 wraps */
                }
    return 0;
}

/* MatMulInteger (int32 results) and QLinearMatMul of batched operands (requantized as ONNX Runtime). */
static int run_matmul(tsr_onnx_t *m, const ox_lop_t *L)
{
    const ox_val_t *X = &m->vals[L->in], *Y = &m->vals[L->out];
    const uint8_t *xb = tsr_ox_bytes(m, L->in);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const ox_val_t *B = &m->vals[L->in2];
    const uint8_t *bb = tsr_ox_bytes(m, L->in2);
    const int64_t batch = L->geo[0], M = L->geo[1], K = L->geo[2], N = L->geo[3];
    const int as = X->elem == ET_INT8, bs = B->elem == ET_INT8;
    const int lo = Y->elem == ET_UINT8 ? 0 : -128, hi = Y->elem == ET_UINT8 ? 255 : 127;
    /* geo[5]: ONNX Runtime's unfused form (it takes no QLinearMatMul of two int8 activations on this
       CPU class): DQ in float32, MLAS SGEMM's fma chain over k from 0 in blocks of StrideK (its
       blocking: 128, halved while K fits in half and N >= K, else doubled while N fits in half of
       StrideN), the blocks' sums added, then Q: divided by y_scale, rounded half to even. */
    int64_t strk = 128, strn = 128;
    if (N >= K)
        while (strk / 2 >= K && strk > 1)
            strk /= 2, strn *= 2;
    else
        while (strn > 16 && strn / 2 >= N)
            strk *= 2, strn /= 2;
    float fa, fb, fy;
    memcpy(&fa, &L->geo[6], 4), memcpy(&fb, &L->geo[7], 4), memcpy(&fy, &L->geo[8], 4);
    for (int64_t p = 0; p < batch; p++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                const uint8_t *ar = xb + (p * M + i) * K, *bc = bb + (L->geo[4] ? p * K * N : 0) + j;
                if (L->geo[5] && L->hkind == H_QMATMUL) {
                    float c = 0;
                    for (int64_t k0 = 0; k0 < K; k0 += strk) {
                        float blk = 0;
                        for (int64_t k = k0; k < K && k < k0 + strk; k++)
                            blk = fmaf((float)((as ? (int8_t)ar[k] : ar[k]) - L->zpa[0]) * fa,
                                       (float)((bs ? (int8_t)bc[k * N] : bc[k * N]) - L->zpb[0]) * fb, blk);
                        c = k0 ? c + blk : blk;
                    }
                    float q = nearbyintf(c / fy) + (float)L->yzp;
                    q = q < (float)lo ? (float)lo : q > (float)hi ? (float)hi : q;
                    yb[(p * M + i) * N + j] = (uint8_t)(int)q;
                    continue;
                }
                int64_t acc64 = 0;
                for (int64_t k = 0; k < K; k++)
                    acc64 += ((as ? (int8_t)ar[k] : ar[k]) - L->zpa[L->nzpa > 1 ? i : 0]) *
                             ((bs ? (int8_t)bc[k * N] : bc[k * N]) - L->zpb[L->nzpb > 1 ? j : 0]);
                const int32_t acc = (int32_t)(uint32_t)(uint64_t)acc64; /* int32 wraps */
                const int64_t o = (p * M + i) * N + j;
                if (L->hkind == H_MATMULINT) {
                    memcpy(yb + 4 * o, &acc, 4);
                    continue;
                }
                /* ONNX Runtime: float32 acc * (a_scale * b_scale / y_scale), round half to even,
                   + zero point, saturate */
                float q = nearbyintf((float)acc * L->mult) + (float)L->yzp;
                q = q < (float)lo ? (float)lo : q > (float)hi ? (float)hi : q;
                yb[o] = (uint8_t)(int)q;
            }
    return 0;
}

/* Concat of two tensors' bytes (geo: outer count, bytes of each input per outer index). */
static int run_concat(tsr_onnx_t *m, const ox_lop_t *L)
{
    const uint8_t *xb = tsr_ox_bytes(m, L->in);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const uint8_t *bb = tsr_ox_bytes(m, L->in2);
    const int64_t outer = L->geo[0];
    const size_t ca = (size_t)L->geo[1], cb = (size_t)L->geo[2];
    for (int64_t o = 0; o < outer; o++) {
        memcpy(yb + (size_t)o * (ca + cb), xb + (size_t)o * ca, ca);
        memcpy(yb + (size_t)o * (ca + cb) + ca, bb + (size_t)o * cb, cb);
    }
    return 0;
}

/* A lookup table (H_QLUT): output byte = zpa[input byte] (256 entries, built at lowering). */
static int run_qlut(tsr_onnx_t *m, const ox_lop_t *L)
{
    const uint8_t *xb = tsr_ox_bytes(m, L->in);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const int64_t n = numel(&m->vals[L->in]);
    for (int64_t i = 0; i < n; i++)
        yb[i] = (uint8_t)L->zpa[xb[i]];
    return 0;
}

/* A table per channel (H_QLUTC): output byte = zpa[256 c + input byte] for an element of channel c, in
 * [N, C, inner] order (geo[0] = C, geo[1] = inner; ORT's BatchNormalization bytes, ops/tsr_ox_conv.c). */
static int run_qlutc(tsr_onnx_t *m, const ox_lop_t *L)
{
    const uint8_t *xb = tsr_ox_bytes(m, L->in);
    uint8_t *yb = tsr_ox_bytes(m, L->out);
    const int64_t n = numel(&m->vals[L->in]), C = L->geo[0], inner = L->geo[1];
    if (C < 1 || inner < 1 || n % (C * inner) || L->nzpa != 256 * C)
        return tsr_err(TSR_EINVAL, "per-channel table: %lld elements for %lld channels of %lld", (long long)n,
                       (long long)C, (long long)inner);
    for (int64_t i = 0; i < n; i++)
        yb[i] = (uint8_t)L->zpa[256 * ((i / inner) % C) + xb[i]];
    return 0;
}

typedef struct ox_host_kernel {
    int kind;               /* H_* */
    const char *name;       /* in the placement table: "host (name)" */
    int (*run)(tsr_onnx_t *m, const ox_lop_t *L);
    int geo_vals;           /* 1: geo[0..3] hold the node's own value ids (tsr_onnx_hostf.c's float kernels);
                               0: sizes, counts or parameters */
} ox_host_kernel_t;

static const ox_host_kernel_t kernels[] = {
    {H_QUANT, "quantize", run_quant, 0},
    {H_DEQUANT, "dequantize", run_dequant, 0},
    {H_SOFTMAX, "softmax", run_softmax_argmax, 0},
    {H_ARGMAX, "argmax", run_softmax_argmax, 0},
    {H_RELU, "relu", run_relu, 0},
    {H_CONVINT, "int32 conv", run_convint, 0},
    {H_MATMULINT, "int32 matmul", run_matmul, 0},
    {H_QMATMUL, "quantized batched matmul", run_matmul, 0},
    {H_CONCAT, "concat", run_concat, 0},
    /* the float and int64 kernels of the standard ops (tsr_onnx_hostf.c) */
    {H_FUNARY, "float elementwise", tsr_ox_run_funary, 1},
    {H_FNARY, "float broadcast", tsr_ox_run_fnary, 1},
    {H_GATHER, "gather", tsr_ox_run_gather, 1},
    {H_SLICE, "slice", tsr_ox_run_slice, 1},
    {H_FTRANSPOSE, "transpose", tsr_ox_run_ftranspose, 1},
    {H_REDUCE, "float reduce", tsr_ox_run_reduce, 1},
    {H_LAYERNORM, "float layernorm", tsr_ox_run_layernorm, 1},
    {H_FMATMUL, "float matmul", tsr_ox_run_fmatmul, 1},
    {H_QSOFTMAX, "quantized softmax", tsr_ox_run_qsoftmax, 1},
    {H_QADDC, "quantized add or mul", tsr_ox_run_qaddc, 0},
    {H_QLUT, "quantized lookup table", run_qlut, 0},
    {H_QLUTC, "quantized per-channel lookup table", run_qlutc, 0},
};

static const ox_host_kernel_t *kernel(int kind)
{
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (kernels[i].kind == kind)
            return &kernels[i];
    return NULL;
}

int tsr_ox_host_geo_vals(int hkind)
{
    const ox_host_kernel_t *k = kernel(hkind);
    return k && k->geo_vals;
}

const char *tsr_ox_host_name(int hkind)
{
    const ox_host_kernel_t *k = kernel(hkind);
    return k ? k->name : "?";
}

int tsr_ox_host_run(tsr_onnx_t *m, const ox_lop_t *L)
{
    const ox_host_kernel_t *k = kernel(L->hkind);
    return k ? k->run(m, L) : tsr_err(TSR_EINVAL, "bad host kernel");
}
