/*
 * tsr_ox_math: the standard float ops on the host, and the int64 shape
 * arithmetic folded at import (the kernels: tsr_onnx_hostf.c). Activations
 * (Sigmoid, HardSigmoid, HardSwish, Tanh, LeakyRelu, Elu, Clip, Erf, Gelu,
 * ...), math (Add/Sub/Mul/Div/Pow/Min/Max with broadcasting, Sqrt,
 * Reciprocal, ...), comparisons and Where, reductions, LayerNormalization,
 * MatMul of float tensors, and data movement (Gather, Slice, a Transpose
 * that moves data, Squeeze/Unsqueeze as relabellings, Expand). Shape
 * subgraphs (Shape, Size, Range, Concat of constants, and any of the ops
 * above whose inputs are all constants) fold at import: the same kernel
 * runs once at lowering and its output becomes a constant, so that the
 * Reshape after it sees a constant shape. In a QDQ model these ops sit
 * between a DequantizeLinear and a QuantizeLinear: the float input gets its
 * host dequantize (tsr_ox_need_real), the QuantizeLinear after runs on the
 * host; both show in the placement. Every work size is bounded before
 * anything is allocated (def_out: TSR_ONNX_MAX_ELEMS elements; folded
 * Range and constants: 2^20).
 */
#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"
#include "tsr_strsafe.h"

#define FOLD_MAX (1 << 20) /* elements a node folded at import may produce */

static int is_const(const tsr_onnx_t *m, int v)
{
    return v >= 0 && m->vals[v].cdata != NULL;
}

/* Append the kernel T for node ni with node inputs ins[0..nin) and output y:
 * folded at import when every input is a constant, else a host lop (float
 * views dequantized first). T's zpa/zpb become the lop's (or are freed). */
static int emit(tsr_onnx_t *m, int ni, ox_lop_t *T, const int *ins, int nin, int y)
{
    int all = 1, rc = 0;
    for (int k = 0; k < nin; k++)
        all &= ins[k] < 0 || is_const(m, ins[k]);
    for (int k = 0; k < nin && k < 4; k++)
        T->geo[k] = ins[k];
    T->node = ni;
    T->side = SIDE_HOST;
    T->seg = -1;
    T->out = y;
    if (all) {
        ox_val_t *Y = &m->vals[y];
        if (numel(Y) > FOLD_MAX)
            rc = NERR(m, ni, "folding its constant inputs would make %lld elements (at most %d are folded at "
                      "import)", (long long)numel(Y), FOLD_MAX);
        else if (!(Y->cdata = calloc(1, Y->nbytes ? Y->nbytes : 1)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        else
            rc = tsr_ox_host_run(m, T);
        free(T->zpa);
        free(T->zpb);
        if (!rc)
            m->placed[ni] = OX_CONST;
        return rc;
    }
    int ncomp = 0;
    for (int k = 0; k < nin && !rc; k++) {
        if (ins[k] < 0 || is_const(m, ins[k]))
            continue;
        if (m->vals[ins[k]].elem == ET_FLOAT)
            rc = tsr_ox_need_real(m, ni, ins[k]);
        /* the segments see a lop's in and in2 only: a third computed input must not come from inside one */
        const int p = m->vals[m->vals[ins[k]].base].prod;
        if (!rc && ++ncomp > 2 && p >= 0 && m->lops[p].side == SIDE_DEV)
            rc = NERR(m, ni, "a third computed input from the device is not supported");
    }
    const int l = rc ? rc : tsr_ox_host_lop(m, ni, T->hkind, -1, y);
    if (l < 0) {
        free(T->zpa);
        free(T->zpb);
        return l;
    }
    ox_lop_t *L = &m->lops[l];
    const int hk = T->hkind;
    *L = *T;
    L->hkind = hk;
    L->in = L->in2 = -1;
    for (int k = 0; k < nin; k++)
        if (ins[k] >= 0 && !is_const(m, ins[k])) {
            const int b = m->vals[ins[k]].base;
            if (L->in < 0)
                L->in = b;
            else if (L->in2 < 0 && b != L->in)
                L->in2 = b;
        }
    if (L->in < 0) /* only constants but a computed... cannot happen: all would be set */
        L->in = m->vals[ins[0]].base;
    m->node_lop[ni] = l;
    m->placed[ni] = OX_LOP;
    return 0;
}

/* Axis attribute (or value) a normalized for rank r; -1 if out of range. */
static int norm_axis(int64_t a, int r)
{
    if (a < 0)
        a += r;
    return a < 0 || a >= r ? -1 : (int)a;
}

/* Integer elements of constant v (at most cap of them) into dst; their count, or a negative error. */
static int const_ints(tsr_onnx_t *m, int ni, int v, const char *what, int64_t *dst, int cap)
{
    if (v < 0 || !m->vals[v].cdata)
        return NERR(m, ni, "%s must be a constant (its value decides the shape)", what);
    const ox_val_t *V = &m->vals[v];
    if (V->elem != ET_INT64 && V->elem != ET_INT32)
        return NERR(m, ni, "%s has type %s (int64 or int32 expected)", what, ename(V->elem));
    if (numel(V) > cap)
        return NERR(m, ni, "%s has %lld elements (at most %d)", what, (long long)numel(V), cap);
    for (int64_t i = 0; i < numel(V); i++) {
        if (V->elem == ET_INT64)
            memcpy(&dst[i], V->cdata + 8 * i, 8);
        else
            dst[i] = cget_i(V, i);
    }
    return (int)numel(V);
}

/* ------------------------------------------------------------------ activations and unary math */

int tsr_ox_funary(tsr_onnx_t *m, int ni, int op)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    if (x < 0)
        return NERR(m, ni, "input missing");
    const ox_val_t X = m->vals[x];
    const int intok = op == FU_NEG || op == FU_ABS || op == FU_NOT;
    if (op == FU_NOT ? X.elem != ET_BOOL : X.elem != ET_FLOAT && !(intok && (X.elem == ET_INT64 || X.elem == ET_INT32)))
        return NERR(m, ni, "input type %s is not supported (float%s)", ename(X.elem), intok ? ", int64, int32" : "");
    ox_lop_t T;
    memset(&T, 0, sizeof T);
    T.hkind = H_FUNARY;
    T.axis = op;
    const Onnx__AttributeProto *a;
    switch (op) {
    case FU_HARDSIGMOID:
        T.scale = (a = attr(n, "alpha")) && a->has_f ? a->f : 0.2f;
        T.mult = (a = attr(n, "beta")) && a->has_f ? a->f : 0.5f;
        break;
    case FU_LEAKYRELU: T.scale = (a = attr(n, "alpha")) && a->has_f ? a->f : 0.01f; break;
    case FU_ELU: T.scale = (a = attr(n, "alpha")) && a->has_f ? a->f : 1.0f; break;
    case FU_GELU:
        if ((a = attr(n, "approximate")) && a->has_s && a->s.len == 4 && !memcmp(a->s.data, "tanh", 4))
            T.axis = FU_GELU_TANH;
        else if (a && a->has_s && !(a->s.len == 4 && !memcmp(a->s.data, "none", 4)))
            return NERR(m, ni, "approximate must be \"none\" or \"tanh\"");
        break;
    case FU_CLIP:
        T.scale = -INFINITY, T.mult = INFINITY;
        if (m->opset < 11) {
            T.scale = (a = attr(n, "min")) && a->has_f ? a->f : -INFINITY;
            T.mult = (a = attr(n, "max")) && a->has_f ? a->f : INFINITY;
        } else
            for (size_t k = 1; k <= 2; k++) {
                const int v = tsr_ox_in_val(m, ni, k);
                if (v < 0)
                    continue;
                if (!is_const(m, v) || numel(&m->vals[v]) != 1 || m->vals[v].elem != ET_FLOAT)
                    return NERR(m, ni, "%s must be a float constant scalar", k == 1 ? "min" : "max");
                *(k == 1 ? &T.scale : &T.mult) = cget_f(&m->vals[v], 0);
            }
        break;
    default: break;
    }
    const int y = tsr_ox_def_out(m, ni, 0, X.elem, X.ndim, X.dims);
    if (y < 0)
        return y;
    const int ins[1] = {x};
    return emit(m, ni, &T, ins, 1, y);
}

/* ------------------------------------------------------------------ elementwise with broadcasting */

/* The multidirectional broadcast of shapes a and b into d (rank *nd); -1 if incompatible. */
static int broadcast(const int64_t *a, int na, const int64_t *b, int nb, int64_t *d, int *nd)
{
    const int r = na > nb ? na : nb;
    for (int i = 0; i < r; i++) {
        const int64_t x = i - (r - na) >= 0 ? a[i - (r - na)] : 1, y = i - (r - nb) >= 0 ? b[i - (r - nb)] : 1;
        if (x != y && x != 1 && y != 1)
            return -1;
        d[i] = x == 1 ? y : x;
    }
    *nd = r;
    return 0;
}

int tsr_ox_fnary(tsr_onnx_t *m, int ni, int op)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int nin = op == FN_WHERE ? 3 : 2;
    int ins[3] = {-1, -1, -1};
    if (n->n_input < (size_t)nin || (op != FN_MIN && op != FN_MAX && n->n_input > (size_t)nin) ||
        ((op == FN_MIN || op == FN_MAX) && n->n_input != 2))
        return NERR(m, ni, "%zu inputs (%d supported)", n->n_input, nin);
    for (int k = 0; k < nin; k++)
        if ((ins[k] = tsr_ox_in_val(m, ni, (size_t)k)) < 0)
            return NERR(m, ni, "input %d missing", k);
    int64_t d[MAXD], e[MAXD];
    int nd = 0;
    ox_lop_t T;
    memset(&T, 0, sizeof T);
    T.hkind = H_FNARY;
    T.axis = op;
    if (op == FN_EXPAND) { /* the shape a constant, broadcast with the input's */
        int64_t s[MAXD];
        const int ns = const_ints(m, ni, ins[1], "shape", s, MAXD);
        if (ns < 0)
            return ns;
        const ox_val_t *X = &m->vals[ins[0]];
        if (broadcast(X->dims, X->ndim, s, ns, d, &nd))
            return NERR(m, ni, "the shape does not broadcast with the input's");
        const int y = tsr_ox_def_out(m, ni, 0, X->elem, nd, d);
        return y < 0 ? y : emit(m, ni, &T, ins, 1, y);
    }
    const ox_val_t *A = &m->vals[ins[0]], *B = &m->vals[ins[1]];
    int oelem = A->elem;
    if (op == FN_WHERE) {
        const ox_val_t *C = &m->vals[ins[2]];
        if (A->elem != ET_BOOL)
            return NERR(m, ni, "condition has type %s (bool expected)", ename(A->elem));
        if (B->elem != C->elem)
            return NERR(m, ni, "X and Y differ in type (%s, %s)", ename(B->elem), ename(C->elem));
        oelem = B->elem;
        if (broadcast(A->dims, A->ndim, B->dims, B->ndim, e, &nd) || broadcast(e, nd, C->dims, C->ndim, d, &nd))
            return NERR(m, ni, "the inputs' shapes do not broadcast");
    } else {
        if (A->elem != B->elem && op != FN_POW)
            return NERR(m, ni, "the inputs differ in type (%s, %s)", ename(A->elem), ename(B->elem));
        if (op == FN_POW && A->elem != B->elem && (A->elem != ET_FLOAT || B->elem == ET_BOOL))
            return NERR(m, ni, "Pow of %s by %s is not supported", ename(A->elem), ename(B->elem));
        if ((op == FN_AND || op == FN_OR) != (A->elem == ET_BOOL))
            return NERR(m, ni, "input type %s is not supported", ename(A->elem));
        if (A->elem != ET_FLOAT && A->elem != ET_INT64 && A->elem != ET_INT32 && A->elem != ET_BOOL)
            return NERR(m, ni, "input type %s is not supported (float, int64, int32)", ename(A->elem));
        if (op == FN_EQUAL || op == FN_LESS || op == FN_GREATER)
            oelem = ET_BOOL;
        if (broadcast(A->dims, A->ndim, B->dims, B->ndim, d, &nd))
            return NERR(m, ni, "the inputs' shapes do not broadcast");
    }
    const int y = tsr_ox_def_out(m, ni, 0, oelem, nd, d);
    return y < 0 ? y : emit(m, ni, &T, ins, nin, y);
}

/* Add: the device's quantized add when both operands are computed per-tensor
 * DequantizeLinear views of one shape that can share a device segment
 * (ops/tsr_ox_eltwise.c), else float on the host. */
/* QDQ Add of an activation and a constant (a Linear's bias, a position
 * embedding), closed by a QuantizeLinear: ONNX Runtime's QLinearAdd on the
 * host in its integer form (tsr_ox_run_qaddc), not a float add of
 * dequantized values. The device add reads two device tensors, and a
 * segment takes one input from outside: the constant has no place there.
 * The constant must repeat along A's leading dimensions (its dimensions,
 * leading 1s dropped, are A's last ones); B may also be an activation of
 * A's shape (a residual Add the device could not take). mul: the same for
 * a Mul, as ONNX Runtime's QLinearMul. Returns 1 when the node is not such
 * an Add (Mul). */
static int qadd_const(tsr_onnx_t *m, int ni, int a, int b, int mul)
{
    int swapped = 0; /* ONNX Runtime's float QLinearAdd is not symmetric in its rounding */
    if (m->vals[a].cdata && !m->vals[b].cdata) { /* the sum is symmetric: the activation first */
        const int t = a;
        swapped = 1;
        a = b, b = t;
    }
    const ox_val_t *A = &m->vals[a], *B = &m->vals[b];
    int same = A->ndim == B->ndim; /* two activations of one shape (a residual Add off the device, GELU's Mul) */
    for (int i = 0; same && i < A->ndim; i++)
        same = A->dims[i] == B->dims[i];
    if (A->cdata || (!B->cdata && !same) || A->view_of < 0 || B->view_of < 0 || A->vcount != 1 ||
        B->vcount != 1 || (!m->vals[B->view_of].cdata && !same) || m->qsel[ni].status != OX_SEL_OK ||
        m->qsel[ni].act >= 0 ||
        (A->elem != ET_FLOAT) || (m->vals[A->view_of].elem != ET_UINT8 && m->vals[A->view_of].elem != ET_INT8) ||
        (m->vals[B->view_of].elem != ET_UINT8 && m->vals[B->view_of].elem != ET_INT8))
        return 1;
    int lead = 0;
    while (lead < B->ndim && B->dims[lead] == 1)
        lead++;
    if (B->ndim - lead > A->ndim)
        return 1;
    for (int i = lead; i < B->ndim; i++)
        if (B->dims[i] != A->dims[A->ndim - (B->ndim - i)])
            return 1;
    if (B->ndim > A->ndim && lead < B->ndim - A->ndim)
        return 1;
    ox_qout_t o;
    const int qn = tsr_ox_qdq_output(m, ni, &o);
    if (qn < 0)
        return qn;
    if ((o.elem != ET_UINT8 && o.elem != ET_INT8) || !(o.scale > 0))
        return 1;
    /* MLAS's parameters (MlasCalcQLinearAddParameters), else its float form */
    const float as = A->vscale[0], bs = B->vscale[0], ra = as / o.scale, rb = bs / o.scale, gr = ra > rb ? ra : rb;
    int64_t MA = 0, MB = 0, Sh = 0;
    if (ra >= 0x1p-14f && ra < 256.0f && rb >= 0x1p-14f && rb < 256.0f) {
        uint32_t bits;
        memcpy(&bits, &gr, 4);
        const int32_t sh = 21 - ((int32_t)(bits >> 23) - 127);
        if (sh >= 13 && sh <= 31) {
            MA = lrintf(ra * ldexpf(1.0f, sh)), MB = lrintf(rb * ldexpf(1.0f, sh));
            if (MA < 0x400000 && MB < 0x400000 && (MA >= 0x200000 || MB >= 0x200000))
                Sh = sh;
        }
    }
    const int qa = m->vals[A->view_of].base, qb = m->vals[B->view_of].base;
    const int32_t za = A->vzp[0], zb = B->vzp[0];
    const int64_t n = numel(A), per = numel(B);
    int64_t od[MAXD];
    memcpy(od, A->dims, sizeof od);
    const int nd = A->ndim;
    const int y = tsr_ox_def_out(m, qn, 0, o.elem, nd, od);
    if (y < 0)
        return y;
    const int l = tsr_ox_host_lop(m, ni, H_QADDC, qa, y);
    if (l < 0)
        return l;
    ox_lop_t *L = &m->lops[l];
    uint32_t ysb;
    memcpy(&ysb, &o.scale, 4);
    const int64_t g[8] = {n, per ? per : 1, MA, MB, Sh, za, zb, ysb};
    memcpy(L->geo, g, sizeof g);
    L->in2 = qb;
    L->scale = as, L->mult = bs, L->yzp = o.zp;
    L->axis = mul;
    if (!mul) { /* the AVX2 float form (tsr_ox_run_qaddc): ratios in the node's input order */
        const float r0 = swapped ? rb : ra, r1 = swapped ? ra : rb;
        L->geo[8] = 1 | (swapped << 1);
        memcpy(&L->geo[9], &r0, 4), memcpy(&L->geo[10], &r1, 4);
    }
    if (mul) /* MLAS's QLinearMul (x86): nearbyintf(float((a - za)(b - zb)) * fl32(as * bs / ys) + zy) */
        L->scale = as * bs / o.scale;
    tsr_ox_qdq_fold(m, ni);
    return 0;
}

int tsr_ox_add_any(tsr_onnx_t *m, int ni, int arg)
{
    const int a = tsr_ox_in_val(m, ni, 0), b = tsr_ox_in_val(m, ni, 1);
    if (a >= 0 && b >= 0) {
        const ox_val_t *A = &m->vals[a], *B = &m->vals[b];
        int q = A->view_of >= 0 && B->view_of >= 0 && !A->cdata && !B->cdata && A->ndim == B->ndim;
        for (int i = 0; q && i < A->ndim; i++)
            q = A->dims[i] == B->dims[i];
        /* a device segment takes one input: both operands must come from device operators with no host
           operator after the first of them (else they cannot share a segment), or it runs on the host */
        const int pa = q ? m->vals[m->vals[A->view_of].base].prod : -1,
                  pb = q ? m->vals[m->vals[B->view_of].base].prod : -1;
        const int first = pa < pb ? pa : pb;
        q = q && pa >= 0 && pb >= 0 && tsr_ox_in_graph(&m->lops[pa]) && tsr_ox_in_graph(&m->lops[pb]);
        for (int l = first + 1; q && l < m->nlops; l++)
            q = tsr_ox_in_graph(&m->lops[l]);
        if (q)
            return tsr_ox_qdq_add(m, ni, arg);
        const int rc = qadd_const(m, ni, a, b, 0);
        if (rc != 1) { /* a dense's bias: on the device when it has an exact form (ops/tsr_ox_bias.c) */
            const int l = m->nlops - 1, d = rc || m->lops[l].node != ni ? 0 : tsr_ox_bias_device(m, l);
            return rc ? rc : d < 0 ? d : 0;
        }
    }
    return tsr_ox_fnary(m, ni, FN_ADD);
}

/* Mul: a QDQ Mul of an activation and a constant or of two activations of
 * one shape, or of [N, C, H, W] by [N, C, 1, 1], as ONNX Runtime's
 * QLinearMul on the host (tsr_ox_run_qaddc; the last moves to the device
 * next to device work, ops/tsr_ox_eltwise.c), else float on the host. */
int tsr_ox_mul_any(tsr_onnx_t *m, int ni, int arg)
{
    const int a = tsr_ox_in_val(m, ni, 0), b = tsr_ox_in_val(m, ni, 1);
    if (a >= 0 && b >= 0) {
        int rc = tsr_ox_qdq_mul_bcast(m, ni); /* by a per-channel vector (ops/tsr_ox_eltwise.c) */
        if (rc != 1)
            return rc;
        rc = qadd_const(m, ni, a, b, 1);
        if (rc != 1)
            return rc;
    }
    return tsr_ox_fnary(m, ni, arg);
}

/* The device dense reads its input's bytes as their producer laid them out
 * (a device tensor [N, C, H, W], blocked): a 2-D input that relabels a
 * tensor of another shape (a ViT's heads [17, 3, 64] -> [17, 192]) gets its
 * own bytes first, a host copy in row-major order. */
static int own_2d_bytes(tsr_onnx_t *m, int ni, int a)
{
    const int q = m->vals[a].view_of >= 0 ? m->vals[a].view_of : a, b = m->vals[q].base;
    const ox_val_t *B = &m->vals[b];
    int flat = B->ndim <= 2;
    for (int i = 2; !flat && i < B->ndim; i++)
        flat = B->dims[i] == 1; /* [N, K, 1, 1] is read as [N][K] already */
    if (b == q || flat || m->vals[q].cdata || m->vals[q].ndim != 2)
        return 0;
    const int l = tsr_ox_host_lop(m, ni, H_CONCAT, b, q); /* concat of one input: a copy */
    if (l < 0)
        return l;
    m->vals[q].base = q;
    m->vals[q].prod = l;
    m->lops[l].in2 = b;
    m->lops[l].geo[0] = 1;
    m->lops[l].geo[1] = (int64_t)m->vals[q].nbytes;
    m->lops[l].geo[2] = 0;
    return 0;
}

/* Gemm: the device dense (ops/tsr_ox_conv.c), its input given bytes of its own if it relabels another shape. */
int tsr_ox_gemm_any(tsr_onnx_t *m, int ni, int arg)
{
    const int a = tsr_ox_in_val(m, ni, 0);
    int rc;
    if (a >= 0 && (rc = own_2d_bytes(m, ni, a)))
        return rc;
    return tsr_ox_qdq_conv(m, ni, arg);
}

/* Whether the quantized bytes under the float view a ([..., K]) can be read
 * by the device as [rows, K]: their base is 2-D (a dense's output), or it
 * comes from the host or the model's input (copied into the segment as
 * [rows, K, 1, 1]; a device tensor of another shape has another layout). */
static int rows_on_device(tsr_onnx_t *m, int a)
{
    const ox_val_t *QB = &m->vals[m->vals[m->vals[a].view_of].base];
    const int64_t K = m->vals[a].dims[m->vals[a].ndim - 1];
    return !QB->cdata && K > 0 &&
           ((QB->ndim == 2 && QB->dims[1] == K) || QB->prod < 0 || m->lops[QB->prod].side == SIDE_HOST);
}

/* QDQ MatMul of A [..., K] by a constant B [K, N] (a transformer's Linear):
 * the device dense over A's rows (ops/tsr_ox_conv.c reads A as [rows, K]).
 * The dense writes a [rows, N] value of its own; the QuantizeLinear's output
 * is [..., N], an alias of it. The dense reads A's bytes as [rows, K, 1, 1]
 * (a value of that shape over A's base) unless A's base is [rows, K]
 * already (another dense's output, in the same segment). */
static int matmul_rows(tsr_onnx_t *m, int ni, int a)
{
    int64_t od[MAXD];
    const int nd = m->vals[a].ndim;
    memcpy(od, m->vals[a].dims, sizeof od);
    const int l0 = m->nlops, rc = tsr_ox_qdq_conv(m, ni, 1);
    if (rc)
        return rc;
    if (m->nlops != l0 + 1 || m->lops[l0].side != SIDE_DEV)
        return NERR(m, ni, "internal: the dense over the rows was not made");
    ox_lop_t *L = &m->lops[l0];
    const int y = m->vals[L->out].base, y2 = tsr_ox_new_val(m, "");
    if (y2 < 0)
        return y2;
    ox_val_t *Y = &m->vals[y], *Y2 = &m->vals[y2];
    od[nd - 1] = Y->dims[1];
    *Y2 = *Y; /* the [rows, N] bytes */
    Y2->name = "";
    Y2->base = y2;
    Y->ndim = nd; /* the QuantizeLinear's output: [..., N] over them */
    memcpy(Y->dims, od, sizeof Y->dims);
    Y->base = y2;
    Y->prod = -1;
    L->out = y2;
    const int qb = L->in;
    const int64_t K = m->vals[a].dims[nd - 1]; /* A's rows, not its base's (after a reshape) */
    if (m->vals[qb].ndim != 2 || m->vals[qb].dims[1] != K) {
        const int r = tsr_ox_new_val(m, "");
        if (r < 0)
            return r;
        ox_val_t *R = &m->vals[r], *QB = &m->vals[qb];
        R->elem = QB->elem;
        R->ndim = 4;
        R->dims[0] = numel(QB) / K, R->dims[1] = K;
        R->dims[2] = R->dims[3] = 1;
        R->nbytes = QB->nbytes;
        R->base = qb;
        R->defined = 1;
        m->lops[l0].in = r;
    }
    return 0;
}

/* MatMul: a device dense operator when B is a constant (DequantizeLinear of
 * weights) and A 2-D (ops/tsr_ox_conv.c), else float on the host (attention's
 * Q.K^T and attention.V, batched projections). */
int tsr_ox_matmul_any(tsr_onnx_t *m, int ni, int arg)
{
    const int a = tsr_ox_in_val(m, ni, 0), b = tsr_ox_in_val(m, ni, 1);
    if (a < 0 || b < 0)
        return NERR(m, ni, "an input is missing");
    const ox_val_t A = m->vals[a], B = m->vals[b];
    if (B.cdata && B.view_of >= 0 && A.ndim == 2 && A.view_of >= 0)
        return tsr_ox_gemm_any(m, ni, arg);
    if (B.cdata && B.view_of >= 0 && B.ndim == 2 && A.ndim > 2 && A.view_of >= 0 && rows_on_device(m, a))
        return matmul_rows(m, ni, a);
    /* two quantized activations closed by a QuantizeLinear: ORT's QLinearMatMul on the host */
    if (!B.cdata && !A.cdata && A.view_of >= 0 && B.view_of >= 0 && A.vcount == 1 && B.vcount == 1 &&
        m->qsel[ni].status == OX_SEL_OK && m->qsel[ni].act < 0)
        return tsr_ox_qdq_matmul_host(m, ni);
    if (A.elem != ET_FLOAT || B.elem != ET_FLOAT)
        return NERR(m, ni, "inputs of type %s and %s (the host multiplies float)", ename(A.elem), ename(B.elem));
    if (A.ndim < 2 || B.ndim < 2)
        return NERR(m, ni, "a 1-D operand is not supported");
    int64_t d[MAXD];
    int nd;
    if (A.dims[A.ndim - 1] != B.dims[B.ndim - 2])
        return NERR(m, ni, "inner dimensions differ (%lld, %lld)", (long long)A.dims[A.ndim - 1],
                    (long long)B.dims[B.ndim - 2]);
    if (broadcast(A.dims, A.ndim - 2, B.dims, B.ndim - 2, d, &nd))
        return NERR(m, ni, "the batch dimensions do not broadcast");
    const int64_t M = A.dims[A.ndim - 2], K = A.dims[A.ndim - 1], N = B.dims[B.ndim - 1];
    d[nd] = M, d[nd + 1] = N;
    const int y = tsr_ox_def_out(m, ni, 0, ET_FLOAT, nd + 2, d);
    if (y < 0)
        return y;
    if ((double)numel(&m->vals[y]) * (double)K > 4e12)
        return NERR(m, ni, "too much work for the host");
    ox_lop_t T;
    memset(&T, 0, sizeof T);
    T.hkind = H_FMATMUL;
    T.geo[4] = M, T.geo[5] = K, T.geo[6] = N;
    const int ins[2] = {a, b};
    return emit(m, ni, &T, ins, 2, y);
}

/* ------------------------------------------------------------------ reductions and normalization */

/* ReduceMean/Sum/Max/Min over any axes (attribute, or input 1 since opset 18 / ReduceSum 13). */
int tsr_ox_reduce(tsr_onnx_t *m, int ni, int op)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    if (x < 0)
        return NERR(m, ni, "input missing");
    const ox_val_t X = m->vals[x];
    if (X.elem != ET_FLOAT && X.elem != ET_INT64 && X.elem != ET_INT32)
        return NERR(m, ni, "input type %s is not supported", ename(X.elem));
    int64_t ax[MAXD];
    int na = 0;
    const int axes_input = m->opset >= 18 || (op == RD_SUM && m->opset >= 13);
    if (axes_input && tsr_ox_in_val(m, ni, 1) >= 0) {
        if ((na = const_ints(m, ni, tsr_ox_in_val(m, ni, 1), "axes", ax, MAXD)) < 0)
            return na;
    } else if (!axes_input) {
        const Onnx__AttributeProto *a = attr(n, "axes");
        if (a && a->n_ints > MAXD)
            return NERR(m, ni, "too many axes");
        for (size_t i = 0; a && i < a->n_ints; i++)
            ax[na++] = a->ints[i];
    }
    int64_t mask = 0;
    if (!na && !(axes_input && attr_i(n, "noop_with_empty_axes", 0)))
        mask = (1 << X.ndim) - 1;
    for (int i = 0; i < na; i++) {
        const int k = norm_axis(ax[i], X.ndim);
        if (k < 0)
            return NERR(m, ni, "axis %lld out of range", (long long)ax[i]);
        mask |= 1 << k;
    }
    const int keep = (int)attr_i(n, "keepdims", 1);
    int64_t d[MAXD];
    int nd = 0;
    for (int i = 0; i < X.ndim; i++)
        if (!((mask >> i) & 1))
            d[nd++] = X.dims[i];
        else if (keep)
            d[nd++] = 1;
    const int y = tsr_ox_def_out(m, ni, 0, X.elem, nd, d);
    if (y < 0)
        return y;
    ox_lop_t T;
    memset(&T, 0, sizeof T);
    T.hkind = H_REDUCE;
    T.axis = op;
    T.geo[4] = mask;
    T.geo[5] = 1; /* a ReduceMean/Sum node: ONNX Runtime's float32 summation order */
    const int ins[1] = {x};
    return emit(m, ni, &T, ins, 1, y);
}

/* LayerNormalization (opset 17): over the dimensions from axis on. */
int tsr_ox_layernorm(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    (void)arg;
    const int x = tsr_ox_in_val(m, ni, 0), s = tsr_ox_in_val(m, ni, 1), b = tsr_ox_in_val(m, ni, 2);
    if (x < 0 || s < 0)
        return NERR(m, ni, "input X or Scale missing");
    for (size_t k = 1; k < n->n_output; k++)
        if (n->output[k][0])
            return NERR(m, ni, "the Mean and InvStdDev outputs are not supported");
    const ox_val_t X = m->vals[x];
    if (X.elem != ET_FLOAT || m->vals[s].elem != ET_FLOAT || (b >= 0 && m->vals[b].elem != ET_FLOAT))
        return NERR(m, ni, "float inputs expected");
    const int axis = norm_axis(attr_i(n, "axis", -1), X.ndim);
    if (axis < 0)
        return NERR(m, ni, "axis out of range");
    int64_t inner = 1;
    for (int i = axis; i < X.ndim; i++)
        inner *= X.dims[i];
    if ((numel(&m->vals[s]) != inner && numel(&m->vals[s]) != 1) ||
        (b >= 0 && numel(&m->vals[b]) != inner && numel(&m->vals[b]) != 1))
        return NERR(m, ni, "Scale and B must have the normalized part's %lld elements", (long long)inner);
    const Onnx__AttributeProto *ea = attr(n, "epsilon");
    const int y = tsr_ox_def_out(m, ni, 0, ET_FLOAT, X.ndim, X.dims);
    if (y < 0)
        return y;
    ox_lop_t T;
    memset(&T, 0, sizeof T);
    T.hkind = H_LAYERNORM;
    T.axis = axis;
    T.scale = ea && ea->has_f ? ea->f : 1e-5f;
    const int ins[3] = {x, s, b};
    return emit(m, ni, &T, ins, 3, y);
}

/* ------------------------------------------------------------------ data movement */

int tsr_ox_gather(tsr_onnx_t *m, int ni, int arg)
{
    (void)arg;
    const int dv = tsr_ox_in_val(m, ni, 0), iv = tsr_ox_in_val(m, ni, 1);
    if (dv < 0 || iv < 0)
        return NERR(m, ni, "an input is missing");
    const ox_val_t D = m->vals[dv], I = m->vals[iv];
    if (I.elem != ET_INT64 && I.elem != ET_INT32)
        return NERR(m, ni, "indices of type %s (int64 or int32 expected)", ename(I.elem));
    if (D.ndim < 1)
        return NERR(m, ni, "data is a scalar");
    const int axis = norm_axis(attr_i(m->gp->node[ni], "axis", 0), D.ndim);
    if (axis < 0)
        return NERR(m, ni, "axis out of range");
    if (D.ndim + I.ndim - 1 > MAXD)
        return NERR(m, ni, "the output would have more than %d dimensions", MAXD);
    if (I.cdata) /* constant indices: checked here, before anything runs */
        for (int64_t j = 0; j < numel(&I); j++) {
            int64_t k = I.elem == ET_INT64 ? 0 : cget_i(&I, j);
            if (I.elem == ET_INT64)
                memcpy(&k, I.cdata + 8 * j, 8);
            if (k < -D.dims[axis] || k >= D.dims[axis])
                return NERR(m, ni, "index %lld (element %lld of the indices) is out of range for a dimension of "
                            "%lld", (long long)k, (long long)j, (long long)D.dims[axis]);
        }
    int64_t d[MAXD];
    int nd = 0;
    for (int i = 0; i < axis; i++)
        d[nd++] = D.dims[i];
    for (int i = 0; i < I.ndim; i++)
        d[nd++] = I.dims[i];
    for (int i = axis + 1; i < D.ndim; i++)
        d[nd++] = D.dims[i];
    const int y = tsr_ox_def_out(m, ni, 0, D.elem, nd, d);
    if (y < 0)
        return y;
    ox_lop_t T;
    memset(&T, 0, sizeof T);
    T.hkind = H_GATHER;
    T.axis = axis;
    const int ins[2] = {dv, iv};
    return emit(m, ni, &T, ins, 2, y);
}

/* Slice (starts/ends/axes/steps: attributes before opset 10, constant inputs since). */
int tsr_ox_slice(tsr_onnx_t *m, int ni, int arg)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    (void)arg;
    const int x = tsr_ox_in_val(m, ni, 0);
    if (x < 0)
        return NERR(m, ni, "input missing");
    const ox_val_t X = m->vals[x];
    int64_t st[MAXD], en[MAXD], ax[MAXD], sp[MAXD];
    int ns, ne, na = -1, np = -1;
    if (m->opset < 10) {
        ns = tsr_ox_attr_ints(n, "starts", st, MAXD, 0);
        ne = tsr_ox_attr_ints(n, "ends", en, MAXD, 0);
        const Onnx__AttributeProto *a = attr(n, "starts"), *e = attr(n, "ends"), *aa = attr(n, "axes");
        if (!a || !e || a->n_ints != e->n_ints || a->n_ints > MAXD || (aa && aa->n_ints != a->n_ints))
            return NERR(m, ni, "starts and ends must have the same count (at most %d)", MAXD);
        ns = ne = (int)a->n_ints;
        if (aa)
            na = ns, tsr_ox_attr_ints(n, "axes", ax, (size_t)ns, 0);
    } else {
        if ((ns = const_ints(m, ni, tsr_ox_in_val(m, ni, 1), "starts", st, MAXD)) < 0)
            return ns;
        if ((ne = const_ints(m, ni, tsr_ox_in_val(m, ni, 2), "ends", en, MAXD)) < 0)
            return ne;
        if (tsr_ox_in_val(m, ni, 3) >= 0 && (na = const_ints(m, ni, tsr_ox_in_val(m, ni, 3), "axes", ax, MAXD)) < 0)
            return na;
        if (tsr_ox_in_val(m, ni, 4) >= 0 && (np = const_ints(m, ni, tsr_ox_in_val(m, ni, 4), "steps", sp, MAXD)) < 0)
            return np;
        if (ns != ne || (na >= 0 && na != ns) || (np >= 0 && np != ns))
            return NERR(m, ni, "starts, ends, axes and steps differ in length");
    }
    int32_t *zs = malloc(sizeof(int32_t) * MAXD), *zt = malloc(sizeof(int32_t) * MAXD);
    if (!zs || !zt) {
        free(zs);
        free(zt);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    int64_t d[MAXD];
    int seen[MAXD] = {0}, rc = 0;
    for (int i = 0; i < X.ndim; i++)
        zs[i] = 0, zt[i] = 1, d[i] = X.dims[i];
    for (int k = 0; k < ns && !rc; k++) {
        const int a = norm_axis(na >= 0 ? ax[k] : k, X.ndim);
        const int64_t step = np >= 0 ? sp[k] : 1, dim = X.dims[a < 0 ? 0 : a];
        if (a < 0 || seen[a]++)
            rc = NERR(m, ni, "axis %lld out of range or repeated", (long long)(na >= 0 ? ax[k] : k));
        else if (step == 0 || step > INT32_MAX || step < -INT32_MAX)
            rc = NERR(m, ni, "step %lld is not supported", (long long)step);
        else {
            /* ONNX's clamping: negative values count from the end; starts clamp to [0, dim] (steps > 0)
               or [0, dim - 1] (steps < 0), ends to [0, dim] or [-1, dim - 1] */
            int64_t s = st[k], e = en[k];
            s = s < 0 ? (s < -dim ? 0 : s + dim) : s;
            e = e < 0 ? (e < -dim ? (step > 0 ? 0 : -1) : e + dim) : e;
            if (step > 0) {
                s = s > dim ? dim : s, e = e > dim ? dim : e;
                d[a] = e > s ? (e - s + step - 1) / step : 0;
            } else {
                s = s > dim - 1 ? dim - 1 : s, e = e > dim - 1 ? dim - 1 : e;
                d[a] = s > e ? (s - e + (-step) - 1) / (-step) : 0;
            }
            zs[a] = (int32_t)s, zt[a] = (int32_t)step;
        }
    }
    const int y = rc ? rc : tsr_ox_def_out(m, ni, 0, X.elem, X.ndim, d);
    if (y < 0) {
        free(zs);
        free(zt);
        return y;
    }
    ox_lop_t T;
    memset(&T, 0, sizeof T);
    T.hkind = H_SLICE;
    T.zpa = zs, T.zpb = zt, T.nzpa = T.nzpb = MAXD;
    const int ins[1] = {x};
    return emit(m, ni, &T, ins, 1, y);
}

/* Squeeze and Unsqueeze (unsq = 1): relabellings (axes an attribute before opset 13, an input since). */
int tsr_ox_squeeze(tsr_onnx_t *m, int ni, int unsq)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const int x = tsr_ox_in_val(m, ni, 0);
    if (x < 0)
        return NERR(m, ni, "input missing");
    const ox_val_t X = m->vals[x];
    int64_t ax[MAXD];
    int na = 0;
    if (m->opset >= 13) {
        if (tsr_ox_in_val(m, ni, 1) >= 0 && (na = const_ints(m, ni, tsr_ox_in_val(m, ni, 1), "axes", ax, MAXD)) < 0)
            return na;
    } else {
        const Onnx__AttributeProto *a = attr(n, "axes");
        if (a && a->n_ints > MAXD)
            return NERR(m, ni, "too many axes");
        for (size_t i = 0; a && i < a->n_ints; i++)
            ax[na++] = a->ints[i];
    }
    int64_t d[MAXD];
    int nd = 0, mark[MAXD] = {0};
    if (unsq) {
        const int r = X.ndim + na;
        if (!na || r > MAXD)
            return NERR(m, ni, "axes missing or more than %d dimensions", MAXD);
        for (int i = 0; i < na; i++) {
            const int k = norm_axis(ax[i], r);
            if (k < 0 || mark[k]++)
                return NERR(m, ni, "axis %lld out of range or repeated", (long long)ax[i]);
        }
        for (int i = 0, j = 0; i < r; i++)
            d[nd++] = mark[i] ? 1 : X.dims[j++];
    } else {
        for (int i = 0; i < na; i++) {
            const int k = norm_axis(ax[i], X.ndim);
            if (k < 0 || X.dims[k] != 1)
                return NERR(m, ni, "axis %lld out of range or not of size 1", (long long)ax[i]);
            mark[k] = 1;
        }
        for (int i = 0; i < X.ndim; i++)
            if (!(na ? mark[i] : X.dims[i] == 1))
                d[nd++] = X.dims[i];
    }
    return tsr_ox_def_alias(m, ni, x, nd, d) < 0 ? -1 : 0;
}

/* Transpose: a relabelling where the bytes keep their order (ops/tsr_ox_shape.c), else a host copy. */
int tsr_ox_transpose_any(tsr_onnx_t *m, int ni, int arg)
{
    const int x = tsr_ox_in_val(m, ni, 0);
    if (x < 0)
        return NERR(m, ni, "input missing");
    const ox_val_t X = m->vals[x];
    int64_t perm[MAXD], d[MAXD];
    int moves, rc;
    if ((rc = tsr_ox_perm(m, ni, &X, perm, d, &moves)))
        return rc;
    if (!moves && !X.cdata)
        return tsr_ox_transpose(m, ni, arg);
    const int y = tsr_ox_def_out(m, ni, 0, X.elem, X.ndim, d);
    if (y < 0)
        return y;
    ox_lop_t T;
    memset(&T, 0, sizeof T);
    T.hkind = H_FTRANSPOSE;
    for (int i = 0; i < X.ndim; i++)
        T.geo[4 + i] = perm[i];
    const int ins[1] = {x};
    return emit(m, ni, &T, ins, 1, y);
}
