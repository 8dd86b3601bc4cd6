/*
 * tsr_ox_matmul: QLinearMatMul (2-D: a device gemm; batched: a host kernel)
 * and the int32 operators the host runs: MatMulInteger and ConvInteger
 * (the device's results are requantized 8-bit, so int32 outputs stay on
 * the host; each kernel's work is bounded at import).
 */
#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"

/* Batch, M, K, N of a (batched) matmul of A [..., M, K] by B [..., K, N]:
 * B 2-D (shared) or with A's batch dimensions. */
static int mm_shape(tsr_onnx_t *m, int ni, const ox_val_t *A, const ox_val_t *B, int64_t *od, int *odn)
{
    if (A->ndim < 2 || B->ndim < 2)
        return NERR(m, ni, "operands must be at least 2-D (are %d-D and %d-D)", A->ndim, B->ndim);
    if (B->ndim != 2 && B->ndim != A->ndim)
        return NERR(m, ni, "B must be 2-D or have A's batch dimensions (broadcasting is not supported)");
    for (int i = 0; B->ndim > 2 && i < A->ndim - 2; i++)
        if (A->dims[i] != B->dims[i])
            return NERR(m, ni, "batch dimension %d differs (%lld and %lld; broadcasting is not supported)", i,
                        (long long)A->dims[i], (long long)B->dims[i]);
    if (A->dims[A->ndim - 1] != B->dims[B->ndim - 2])
        return NERR(m, ni, "A has K = %lld, B %lld", (long long)A->dims[A->ndim - 1], (long long)B->dims[B->ndim - 2]);
    memcpy(od, A->dims, sizeof(int64_t) * (size_t)A->ndim);
    od[A->ndim - 1] = B->dims[B->ndim - 1];
    *odn = A->ndim;
    return 0;
}


/* What the int32 ops' setups leave for the common tail (zero points owned until the lop takes them). */
typedef struct int_op {
    int64_t od[MAXD];
    int odn, yelem;
    int32_t *za, *zb;
    int nza, nzb;
    float mult;             /* QLinearMatMul: a_scale * b_scale / y_scale */
    int32_t yzp;
} int_op_t;

/* ConvInteger: geometry, zero points, the host lop with its geometry. */
static int convint_setup(tsr_onnx_t *m, int ni, const ox_val_t *A, const ox_val_t *B, int_op_t *io)
{
    conv_desc_t cd;
    memset(&cd, 0, sizeof cd);
    int rc;
    if ((rc = tsr_ox_conv_geometry(m, ni, &cd, A, B, io->od)))
        return rc;
    io->odn = 4;
    const int64_t *od = io->od;
    if (cd.group != 1)
        return NERR(m, ni, "group %lld: only 1 is supported", (long long)cd.group);
    if (B->dims[1] != A->dims[1])
        return NERR(m, ni, "weights have %lld input channels, the input %lld", (long long)B->dims[1],
                    (long long)A->dims[1]);
    if (cd.kshape[0] != B->dims[2] || cd.kshape[1] != B->dims[3])
        return NERR(m, ni, "kernel_shape disagrees with the weights");
    /* the host kernel's work, bounded (a few seconds at most) */
    if (od[0] * od[1] * od[2] * od[3] > (1LL << 32) / (A->dims[1] * cd.kshape[0] * cd.kshape[1]))
        return NERR(m, ni, "more than 2^32 multiply-adds: too much for the host kernel");
    rc = tsr_ox_int_zps(m, ni, tsr_ox_in_val(m, ni, 2), A->elem, 0, "x_zero_point", &io->za, &io->nza);
    if (!rc)
        rc = tsr_ox_int_zps(m, ni, tsr_ox_in_val(m, ni, 3), B->elem, B->dims[0], "w_zero_point", &io->zb, &io->nzb);
    if (rc)
        return rc;
    const int64_t g[16] = {cd.kshape[0], cd.kshape[1], cd.strides[0], cd.strides[1], cd.pads[0], cd.pads[1],
                           cd.pads[2], cd.pads[3], A->dims[0], A->dims[1], A->dims[2], A->dims[3], od[1],
                           od[2], od[3]};
    const int l = tsr_ox_new_lop(m, ni, SIDE_HOST);
    if (l < 0)
        return l;
    memcpy(m->lops[l].geo, g, sizeof g);
    return 0;
}

/* QLinearMatMul's scalars: per tensor scales and zero points, the output type. */
static int qmatmul_params(tsr_onnx_t *m, int ni, int_op_t *io)
{
    double v[5];
    static const char *const what[5] = {"a_scale", "a_zero_point", "b_scale", "b_zero_point", "y_scale"};
    static const int idx[5] = {1, 2, 4, 5, 6};
    int rc = 0;
    for (int k = 0; k < 5 && !rc; k++)
        rc = tsr_ox_const_scalar(m, ni, tsr_ox_in_val(m, ni, (size_t)idx[k]), what[k], &v[k]);
    const int vyz = tsr_ox_in_val(m, ni, 7);
    double z = 0;
    if (!rc && vyz >= 0)
        rc = tsr_ox_const_scalar(m, ni, vyz, "y_zero_point", &z);
    if (!rc && !(v[0] > 0 && v[2] > 0 && v[4] > 0 && isfinite(v[0] * v[2] / v[4])))
        rc = NERR(m, ni, "scales must be finite and > 0 (per tensor)");
    io->yelem = vyz >= 0 ? m->vals[vyz].elem : ET_UINT8;
    if (!rc && io->yelem != ET_UINT8 && io->yelem != ET_INT8)
        rc = NERR(m, ni, "output type %s (uint8 and int8 are supported)", ename(io->yelem));
    if (!rc && (!(io->za = malloc(sizeof *io->za)) || !(io->zb = malloc(sizeof *io->zb))))
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (rc)
        return rc;
    io->za[0] = (int32_t)v[1], io->zb[0] = (int32_t)v[3], io->nza = io->nzb = 1;
    io->mult = (float)v[0] * (float)v[2] / (float)v[4];
    io->yzp = (int32_t)z;
    return 0;
}

/* MatMulInteger / QLinearMatMul (batched): shapes, zero points, the host lop. */
static int matmul_setup(tsr_onnx_t *m, int ni, int hk, const ox_val_t *A, const ox_val_t *B, int_op_t *io)
{
    int rc = mm_shape(m, ni, A, B, io->od, &io->odn);
    const int64_t M = A->dims[A->ndim - 2], N = B->dims[B->ndim - 1];
    if (!rc && N && numel(A) > (1LL << 32) / N)
        rc = NERR(m, ni, "more than 2^32 multiply-adds: too much for the host kernel");
    if (!rc && hk == H_MATMULINT) {
        rc = tsr_ox_int_zps(m, ni, tsr_ox_in_val(m, ni, 2), A->elem, M, "a_zero_point", &io->za, &io->nza);
        if (!rc)
            rc = tsr_ox_int_zps(m, ni, tsr_ox_in_val(m, ni, 3), B->elem, N, "b_zero_point", &io->zb, &io->nzb);
    } else if (!rc)
        rc = qmatmul_params(m, ni, io);
    if (rc)
        return rc;
    const int l = tsr_ox_new_lop(m, ni, SIDE_HOST);
    if (l < 0)
        return l;
    const int64_t g[5] = {numel(A) / (M * A->dims[A->ndim - 1]), M, A->dims[A->ndim - 1], N, B->ndim > 2};
    memcpy(m->lops[l].geo, g, sizeof g);
    return 0;
}

/* ConvInteger, MatMulInteger (int32 results) and QLinearMatMul of more than
 * 2-D operands (hk: the host kernel): host kernels (the device's results
 * are requantized 8-bit, and its dense takes one weight matrix, not one
 * per batch). */
int tsr_ox_host_int(tsr_onnx_t *m, int ni, int hk)
{
    const int ia = 0, ib = hk == H_QMATMUL ? 3 : 1;
    const int a = tsr_ox_in_val(m, ni, ia), b = tsr_ox_in_val(m, ni, (size_t)ib);
    if (a < 0 || b < 0)
        return NERR(m, ni, "an operand is missing");
    const ox_val_t *A = &m->vals[a], *B = &m->vals[b];
    if ((A->elem != ET_UINT8 && A->elem != ET_INT8) || (B->elem != ET_UINT8 && B->elem != ET_INT8))
        return NERR(m, ni, "operands must be int8 or uint8 (are %s and %s)", ename(A->elem), ename(B->elem));
    if (A->view_of >= 0 || B->view_of >= 0)
        return NERR(m, ni, "operands are quantized tensors, not DequantizeLinear outputs");
    int_op_t io;
    memset(&io, 0, sizeof io);
    io.yelem = ET_INT32;
    const int rc = hk == H_CONVINT ? convint_setup(m, ni, A, B, &io) : matmul_setup(m, ni, hk, A, B, &io);
    if (rc) {
        free(io.za);
        free(io.zb);
        return rc;
    }
    ox_lop_t *L = &m->lops[m->nlops - 1];
    L->hkind = hk;
    L->in = A->base, L->in2 = B->base;
    L->zpa = io.za, L->nzpa = io.nza, L->zpb = io.zb, L->nzpb = io.nzb;
    L->mult = io.mult, L->yzp = io.yzp;
    const int y = tsr_ox_def_out(m, ni, 0, io.yelem, io.odn, io.od);
    if (y < 0)
        return y;
    L = &m->lops[m->nlops - 1];
    L->out = y;
    m->vals[y].prod = m->nlops - 1;
    return 0;
}

/* QLinearMatMul: 2-D on the device (as a gemm), batched on the host. */
int tsr_ox_qlinear_matmul(tsr_onnx_t *m, int ni, int arg)
{
    const int x = tsr_ox_in_val(m, ni, 0), b = tsr_ox_in_val(m, ni, 3);
    (void)arg;
    if (x >= 0 && b >= 0 && (m->vals[x].ndim > 2 || m->vals[b].ndim > 2))
        return tsr_ox_host_int(m, ni, H_QMATMUL);
    return tsr_ox_qlinear(m, ni, 2);
}

/* Whether the matmul of two activations lop l runs on the device
 * (jit/tsr_bmm.h, in a segment of its own): unless placed on the host
 * (--place attn-matmul=host, tsr_onnx_opts_t), when its shapes fit the operator (tsr_bmm_check; the plan at
 * prepare sees the config). */
static int bmm_fits(const tsr_onnx_t *m, const ox_lop_t *L)
{
    if (m->opts.place[TSR_PLACE_ATTN_MATMUL] == TSR_PLACE_HOST)
        return 0;
    int32_t one = 1 << 30, sh = 0;
    tsr_bmm_params_t p = {.a_dtype = m->vals[L->in].elem == ET_UINT8 ? TSR_DT_UINT8 : TSR_DT_INT8,
                          .b_dtype = m->vals[L->in2].elem == ET_UINT8 ? TSR_DT_UINT8 : TSR_DT_INT8,
                          .a_zp = L->zpa[0], .b_zp = L->zpb[0], .mult = &one, .shift = &sh, .rq_count = 1};
    for (int i = 0; i < 4; i++)
        if (L->geo[i] < 1 || L->geo[i] > INT32_MAX)
            return 0;
    p.batch = (int)L->geo[0], p.m = (int)L->geo[1], p.k = (int)L->geo[2], p.n = (int)L->geo[3];
    const int ok = !tsr_bmm_check(&p);
    tsr_err_clear();
    return ok;
}

/* QDQ MatMul of two quantized activations (attention's Q.K^T and
 * attention.V, batched over heads): DequantizeLinear views in,
 * QuantizeLinear out, as ONNX Runtime fuses it into a QLinearMatMul. ORT's
 * arithmetic: the int32 sum of (a - a_zp)(b - b_zp), times float32 a_scale
 * * b_scale / y_scale, rounded half to even, saturated (H_QMATMUL). On the
 * device when it fits (bmm_fits): jit/tsr_bmm.h, each batch's B written as
 * the weights of one dense plan (the requantization in fixed point within
 * 1 LSB, exact with EXACT_REQUANT; two int8 activations, which ORT runs as
 * a float32 SGEMM, within 1 LSB); else on the host, bit for bit. */
int tsr_ox_qdq_matmul_host(tsr_onnx_t *m, int ni)
{
    const int a = tsr_ox_in_val(m, ni, 0), b = tsr_ox_in_val(m, ni, 1);
    if (a < 0 || b < 0)
        return NERR(m, ni, "an input is missing");
    const ox_val_t *A = &m->vals[a], *B = &m->vals[b];
    if (A->view_of < 0 || B->view_of < 0 || A->vcount != 1 || B->vcount != 1)
        return NERR(m, ni, "both inputs must be per-tensor DequantizeLinear outputs");
    int_op_t io;
    memset(&io, 0, sizeof io);
    int rc = mm_shape(m, ni, A, B, io.od, &io.odn);
    if (rc)
        return rc;
    const int64_t M = A->dims[A->ndim - 2], K = A->dims[A->ndim - 1], N = B->dims[B->ndim - 1];
    if (N && numel(A) > (1LL << 32) / N)
        return NERR(m, ni, "more than 2^32 multiply-adds: too much for the host kernel");
    ox_qout_t o;
    const int qn = tsr_ox_qdq_output(m, ni, &o);
    if (qn < 0)
        return qn;
    if (o.relu || o.has_clip)
        return NERR(m, ni, "a Relu or Clip after a MatMul of two activations is not supported");
    if (o.elem != ET_UINT8 && o.elem != ET_INT8)
        return NERR(m, ni, "output type %s (uint8 and int8 are supported)", ename(o.elem));
    const float mult = A->vscale[0] * B->vscale[0] / o.scale; /* float32, as ORT's QLinearMatMul */
    if (!(A->vscale[0] > 0 && B->vscale[0] > 0 && o.scale > 0 && isfinite(mult)))
        return NERR(m, ni, "scales must be finite and > 0");
    if (!(io.za = malloc(sizeof *io.za)) || !(io.zb = malloc(sizeof *io.zb))) {
        free(io.za);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    io.za[0] = A->vzp[0], io.zb[0] = B->vzp[0];
    const int qa = m->vals[A->view_of].base, qb = m->vals[B->view_of].base;
    const int y = tsr_ox_def_out(m, qn, 0, o.elem, io.odn, io.od);
    const int l = y < 0 ? y : tsr_ox_new_lop(m, ni, SIDE_HOST);
    if (l < 0) {
        free(io.za), free(io.zb);
        return l;
    }
    ox_lop_t *L = &m->lops[l];
    const int64_t g[5] = {numel(A) / (M * K), M, K, N, B->ndim > 2};
    memcpy(L->geo, g, sizeof g);
    /* two int8 activations: ONNX Runtime (x86-64) fuses no QLinearMatMul but runs DQ -> float
       MatMul -> Q (checked on ViT-tiny s8's Q.K^T: its float32 SGEMM, not the integer form, bit
       for bit); the host kernel then does the same (run_matmul, geo[5..8]) */
    if (m->vals[qa].elem == ET_INT8 && m->vals[qb].elem == ET_INT8) {
        const float sab[3] = {A->vscale[0], B->vscale[0], o.scale};
        L->geo[5] = 1;
        for (int i = 0; i < 3; i++)
            memcpy(&L->geo[6 + i], &sab[i], 4);
    }
    L->hkind = H_QMATMUL;
    L->in = qa, L->in2 = qb, L->out = y;
    L->zpa = io.za, L->nzpa = 1, L->zpb = io.zb, L->nzpb = 1;
    L->mult = mult, L->yzp = o.zp;
    m->vals[m->vals[y].base].prod = l;
    if (bmm_fits(m, L)) { /* a device lop of no netdesc kind (tsr_ox_is_bmm) */
        L->side = SIDE_DEV;
        tsr_strsafe(nname(m, ni), L->nd.name, sizeof L->nd.name);
        L->name_node = ni;
    }
    tsr_ox_qdq_fold(m, ni);
    return 0;
}
