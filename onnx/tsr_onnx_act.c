/*
 * tsr_onnx_act: quantized elementwise chains as device activation tables
 * (config key ACT_LUT; jit/tsr_act.h, the graph's act node). Runs after
 * lowering, before the segments, and only for a config with tables
 * (tsr_onnx_set_target): with ACT_LUT = 0 the lops stay exactly as lowered.
 *
 * What it recognizes, among the host lops: a quantized 8-bit value r (a
 * per-tensor uint8/int8 tensor: a device operator's output, a host
 * QuantizeLinear's, the graph input) read by host DequantizeLinear and
 * elementwise float kernels (Sigmoid, HardSigmoid, HardSwish, Tanh, Gelu,
 * Erf, LeakyRelu, Elu, Softplus, Clip, Relu, Exp; Add/Sub/Mul/Div whose
 * operands are both functions of r or one of them a constant scalar) and
 * the quantized Add/Mul kernel (ONNX Runtime's QLinearAdd/QLinearMul: both
 * operands functions of r, or a constant scalar) and the lookup tables of
 * QLinearSigmoid / QLinearLeakyRelu (QLinear models), ending in a quantized
 * 8-bit value y of r's elements (a host QuantizeLinear or that Add/Mul; the
 * shapes may differ by a relabelling: a transformer's [rows, C] device
 * values and their [1, rows, C] ONNX shapes, rows_layout). Every
 * element of y then depends on the same element of r only: y is one table
 * of 256 entries, and the whole chain becomes one device act lop r -> y.
 * SiLU in the QDQ form (y = QLinearMul(r, Q(Sigmoid(DQ(r))))) is such a
 * chain, through the Sigmoid's own QuantizeLinear.
 *
 * Why the table is bit-identical to the host path: it is computed BY
 * RUNNING THE IMPORTER'S OWN HOST KERNELS (tsr_ox_host_run, the very lops
 * the chain lowered to, with their parameters) on the 256 values of r's
 * type: the chain's values are given a [256] shape for the time of that
 * run, r holds 0..255 (or -128..127), and y's bytes become the table. So
 * whatever ONNX Runtime emulation those kernels do (float32 rounding of
 * DequantizeLinear, the float32 division and round-half-even of
 * QuantizeLinear, MLAS's fixed-point or AVX2 float forms of QLinearAdd,
 * QLinearMul's float32 product), the device bytes are the host path's
 * bytes, element for element; the device applies the table without
 * arithmetic of its own. The kernels are elementwise and position-free
 * (Sqrt is not: its Eigen packet form depends on the element's position,
 * so it is left out), and constants are scalars (one element broadcast to
 * all), so the [256] run computes exactly what the tensor run would.
 *
 * Taken only next to device work (r from a device operator, or y read by
 * one, also through an alias: a dense over rows): a table between host
 * operators would be a device segment of its own, one more round trip.
 *
 * Not recognized (the chain stays on the host as lowered): a per-channel
 * DequantizeLinear (a computed tensor's is refused at lowering anyway), a
 * type that is not 8-bit (int32 DequantizeLinear inputs), a second
 * non-constant input from another tensor, a constant that is not a scalar,
 * a shape change (a broadcast or a relabelling inside the chain), a chain
 * value read by anything outside the chain (it is then computed on the
 * host as before; y still becomes a table), a NaN for some input byte.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tsr_act.h"
#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_strsafe.h"

static int is_q8(const ox_val_t *v) { return v->elem == ET_UINT8 || v->elem == ET_INT8; }

/* Non-constant value u as an input of a chain: the root it is a function
 * of (root[] for chain values, u itself for a quantized 8-bit tensor), or
 * -1 when it is neither. Constants return -2 (the caller checks scalars). */
static int root_of_input(const tsr_onnx_t *m, const int *root, int u)
{
    if (u < 0)
        return -1;
    const ox_val_t *V = &m->vals[u];
    if (V->cdata)
        return -2;
    if (V->base != u) /* a relabelling inside the chain: left alone */
        return -1;
    if (root[u] >= 0)
        return root[u];
    if (is_q8(V) && V->view_of < 0 && V->ndim >= 1 && V->ndim <= 4)
        return u;
    return -1;
}

/* A constant scalar operand (one element, the kernel's own type). */
static int const_scalar(const tsr_onnx_t *m, int u)
{
    return u >= 0 && m->vals[u].cdata && numel(&m->vals[u]) == 1;
}

/* The root of lop L's output if L is an elementwise host kernel of the
 * chains this pass takes, all of whose non-constant inputs are functions
 * of one root; else -1. */
static int lop_root(const tsr_onnx_t *m, const int *root, const ox_lop_t *L)
{
    if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_ACT)
        return root[L->out]; /* one this pass made (its root kept) */
    if (L->side != SIDE_HOST || L->out < 0 || m->vals[L->out].base != L->out)
        return -1;
    const ox_val_t *Y = &m->vals[L->out];
    int ins[2] = {-1, -1}, nin = 0;
    switch (L->hkind) {
    case H_DEQUANT:
        if (!is_q8(&m->vals[L->in]) || Y->elem != ET_FLOAT)
            return -1;
        ins[nin++] = L->in;
        break;
    case H_QUANT:
        if (!is_q8(Y) || m->vals[L->in].elem != ET_FLOAT)
            return -1;
        ins[nin++] = L->in;
        break;
    case H_QLUT: /* QLinearSigmoid, QLinearLeakyRelu: already a table */
        if (!is_q8(Y) || !is_q8(&m->vals[L->in]))
            return -1;
        ins[nin++] = L->in;
        break;
    case H_RELU:
        if (Y->elem != ET_FLOAT)
            return -1;
        ins[nin++] = L->in;
        break;
    case H_FUNARY:
        switch (L->axis) {
        case FU_SIGMOID: case FU_HARDSIGMOID: case FU_HARDSWISH: case FU_TANH: case FU_LEAKYRELU: case FU_CLIP:
        case FU_ERF: case FU_GELU: case FU_GELU_TANH: case FU_EXP: case FU_ELU: case FU_SOFTPLUS: case FU_RELU:
        case FU_SILU:
            break;
        default:
            return -1; /* Sqrt (position-dependent packets), Log, Reciprocal, Not, Neg, Abs: not taken */
        }
        if (Y->elem != ET_FLOAT || m->vals[L->geo[0]].elem != ET_FLOAT)
            return -1;
        ins[nin++] = (int)L->geo[0];
        break;
    case H_FNARY:
        if (L->axis != FN_ADD && L->axis != FN_SUB && L->axis != FN_MUL && L->axis != FN_DIV)
            return -1;
        if (Y->elem != ET_FLOAT)
            return -1;
        ins[nin++] = (int)L->geo[0];
        ins[nin++] = (int)L->geo[1];
        for (int k = 0; k < 2; k++)
            if (m->vals[ins[k]].elem != ET_FLOAT)
                return -1;
        break;
    case H_QADDC:
        if (!is_q8(Y) || !is_q8(&m->vals[L->in]) || !is_q8(&m->vals[L->in2]))
            return -1;
        /* the second operand: a constant scalar (repeated every element) or an activation of the first's
           shape (repeated every numel elements) */
        if (m->vals[L->in2].cdata ? L->geo[1] != 1 : L->geo[1] != L->geo[0])
            return -1;
        ins[nin++] = L->in;
        ins[nin++] = L->in2;
        break;
    default:
        return -1;
    }
    int r = -1;
    for (int k = 0; k < nin; k++) {
        const int q = root_of_input(m, root, ins[k]);
        if (q == -2) {
            if (!const_scalar(m, ins[k]))
                return -1;
            continue;
        }
        if (q < 0 || (r >= 0 && q != r))
            return -1;
        r = q;
        if (numel(&m->vals[ins[k]]) != numel(Y)) /* no broadcast of the chain's values (a relabelling of
                                                    the same row-major elements is the same elementwise op) */
            return -1;
    }
    return r;
}

/* The values and lops of the chain ending at lop c (root r): in[] marks
 * the lops (walking back from c through the producers of each
 * non-constant input down to r). */
static void mark_chain(const tsr_onnx_t *m, int c, int r, char *inl)
{
    inl[c] = 1;
    for (int j = c; j >= 0; j--) {
        if (!inl[j])
            continue;
        const ox_lop_t *L = &m->lops[j];
        int ins[2] = {L->in, L->in2};
        if (L->hkind == H_FUNARY)
            ins[0] = (int)L->geo[0], ins[1] = -1;
        if (L->hkind == H_FNARY)
            ins[0] = (int)L->geo[0], ins[1] = (int)L->geo[1];
        for (int k = 0; k < 2; k++) {
            const int u = ins[k];
            if (u < 0 || u == r || m->vals[u].cdata)
                continue;
            const int p = m->vals[u].prod;
            if (p >= 0 && p < j)
                inl[p] = 1;
        }
    }
}

/* Run the chain's lops (inl) on the 256 values of r's type and fill the
 * table (device terms). The values involved get a [256] shape and bytes of
 * their own for the run and are restored after. 0, or nonzero when some
 * input has no quantized result (a NaN): the chain then stays as it is. */
static int chain_table(tsr_onnx_t *m, int c, int r, const char *inl, tsr_act_table_t *t)
{
    int nv = 0, rc = 0;
    int *vs = malloc(sizeof *vs * (size_t)(m->nlops + 1));
    ox_val_t *saved = malloc(sizeof *saved * (size_t)(m->nlops + 1));
    int64_t (*geo)[2] = malloc(sizeof *geo * (size_t)(m->nlops + 1));
    if (!vs || !saved || !geo) {
        free(vs), free(saved), free(geo);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    vs[nv++] = r;
    for (int j = 0; j <= c; j++)
        if (inl[j])
            vs[nv++] = m->lops[j].out;
    for (int i = 0; i < nv; i++) {
        ox_val_t *V = &m->vals[vs[i]];
        saved[i] = *V;
        V->ndim = 1;
        V->dims[0] = 256;
        V->nbytes = 256 * esize(V->elem);
        if (!(V->rt = calloc(1, V->nbytes)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
    }
    for (int j = 0; j <= c; j++)
        if (inl[j] && m->lops[j].hkind == H_QADDC) {
            geo[j][0] = m->lops[j].geo[0], geo[j][1] = m->lops[j].geo[1];
            m->lops[j].geo[0] = 256;
            m->lops[j].geo[1] = m->vals[m->lops[j].in2].cdata ? 1 : 256;
        }
    const int s8 = m->vals[r].elem == ET_INT8, ys8 = m->vals[m->lops[c].out].elem == ET_INT8;
    if (!rc) {
        for (int k = 0; k < 256; k++) /* r's bytes: every value of its type */
            m->vals[r].rt[k] = (uint8_t)(s8 ? k - 128 : k);
        for (int j = 0; j <= c && !rc; j++) {
            const ox_lop_t *L = &m->lops[j];
            if (!inl[j])
                continue;
            if (L->side == SIDE_DEV) { /* an earlier chain's table (of r): applied as the device will */
                const int xs8 = m->vals[L->in].elem == ET_INT8, os8 = m->vals[L->out].elem == ET_INT8;
                for (int k = 0; k < 256; k++) { /* (its input may be an alias of r: rows_layout) */
                    const uint8_t b = m->vals[m->vals[L->in].base].rt[k];
                    const int x = xs8 ? (int8_t)b : b;
                    m->vals[L->out].rt[k] = (uint8_t)(L->nd.act.table.v[(x - (xs8 ? 0 : 128)) & 255] +
                                                      (os8 ? 0 : 128));
                }
            } else
                rc = tsr_ox_host_run(m, L);
        }
    }
    if (!rc) {
        int32_t v[TSR_ACT_ENTRIES];
        const uint8_t *yb = m->vals[m->lops[c].out].rt;
        for (int k = 0; k < 256; k++) {
            const int x = s8 ? k - 128 : k, y = ys8 ? (int8_t)yb[k] : yb[k];
            v[(x - (s8 ? 0 : 128)) & 255] = y - (ys8 ? 0 : 128); /* entry[(x - off_x) & 255] = y - off_y */
        }
        rc = tsr_act_table_from_values(v, t);
    }
    for (int j = 0; j <= c; j++)
        if (inl[j] && m->lops[j].hkind == H_QADDC)
            m->lops[j].geo[0] = geo[j][0], m->lops[j].geo[1] = geo[j][1];
    for (int i = nv - 1; i >= 0; i--) { /* restore (a value listed twice: the first save is the original) */
        ox_val_t *V = &m->vals[vs[i]];
        free(V->rt);
        *V = saved[i];
    }
    free(vs), free(saved), free(geo);
    return rc;
}

/* Is value v (a base) read by a live lop or the graph output? A lop reads
 * its in and in2 (bases; views are read through their base's lop), and the
 * standard-op kernels their node's own value ids in geo[0..3] (Where's third
 * input; an unused slot may name value 0: a false reader only keeps a lop). */
static int value_read(const tsr_onnx_t *m, int v, const char *dead)
{
    if (v == m->vals[m->out_val].base)
        return 1;
    for (int j = 0; j < m->nlops; j++) {
        const ox_lop_t *L = &m->lops[j];
        if (dead[j])
            continue;
        if (L->in == v || L->in2 == v)
            return 1;
        if (L->side == SIDE_HOST && tsr_ox_host_geo_vals(L->hkind))
            for (int k = 0; k < 4; k++)
                if (L->geo[k] >= 0 && L->geo[k] < m->nvals && m->vals[L->geo[k]].base == v)
                    return 1;
    }
    return 0;
}

/* The 4-D shape a device segment gives value v (its dims, 1s appended). */
static void dims4(const ox_val_t *v, int64_t *d)
{
    for (int i = 0; i < 4; i++)
        d[i] = i < v->ndim ? v->dims[i] : 1;
}

static int same4(const ox_val_t *a, const ox_val_t *b)
{
    int64_t da[4], db[4];
    dims4(a, da), dims4(b, db);
    return !memcmp(da, db, sizeof da);
}

/* A device reader of the table c's output y through an alias of another
 * shape (a dense over rows, ops/tsr_ox_math.c matmul_rows: [rows, C, 1, 1]
 * over a [1, rows, C] y), or -1. */
static int rows_reader(const tsr_onnx_t *m, int c, int nl)
{
    const int y = m->lops[c].out;
    for (int j = c + 1; j < nl; j++) {
        const ox_lop_t *J = &m->lops[j];
        const int ins[2] = {J->in, J->in2};
        for (int k = 0; k < 2; k++)
            if (J->side == SIDE_DEV && ins[k] >= 0 && ins[k] != y && m->vals[ins[k]].base == y &&
                numel(&m->vals[ins[k]]) == numel(&m->vals[y]) && m->vals[ins[k]].ndim <= 4 &&
                !same4(&m->vals[ins[k]], &m->vals[y]))
                return ins[k];
    }
    return -1;
}

/* A new quantized value of elem with src's shape over the bytes of base (base < 0: its own). */
static int shaped_val(tsr_onnx_t *m, int elem, int src, int base)
{
    const int v = tsr_ox_new_val(m, "");
    if (v < 0)
        return v;
    ox_val_t *X = &m->vals[v];
    X->elem = elem;
    X->ndim = m->vals[src].ndim;
    memcpy(X->dims, m->vals[src].dims, sizeof X->dims);
    X->nbytes = (size_t)numel(X);
    X->base = base < 0 ? v : base;
    X->defined = 1;
    return v;
}

/* A segment's tensors are values, not bases, in the device layout of their
 * own shape: the table c (r -> y) writes the layout its device reader
 * reads (an alias R of y of another shape, rows_reader), else r's when y's
 * differs ([1, rows, C] after a bias Add on the device writing [rows, C]).
 * Then R holds the bytes (made by c), y and its other aliases alias R,
 * readers of y read R, and c reads r through an alias of R's shape when
 * r's differs (a table maps bytes to bytes: the row-major bytes are the
 * same in any of these shapes). Returns R, 0 when nothing changes, < 0 out
 * of memory. */
static int rows_layout(tsr_onnx_t *m, int c, int r, int nl)
{
    const int y = m->lops[c].out;
    int R = rows_reader(m, c, nl);
    if (R < 0 && same4(&m->vals[r], &m->vals[y]))
        return 0;
    if (R < 0 && (R = shaped_val(m, m->vals[y].elem, r, -1)) < 0)
        return R;
    if (!same4(&m->vals[r], &m->vals[R])) {
        const int r2 = shaped_val(m, m->vals[r].elem, R, m->vals[r].base);
        if (r2 < 0)
            return r2;
        m->lops[c].in = r2;
    }
    for (int v = 0; v < m->nvals; v++)
        if (m->vals[v].base == y)
            m->vals[v].base = R;
    m->vals[R].base = R;
    m->vals[R].prod = c;
    m->vals[y].prod = -1;
    for (int j = 0; j < m->nlops; j++) {
        ox_lop_t *J = &m->lops[j];
        J->in = J->in == y ? R : J->in;
        J->in2 = J->in2 == y ? R : J->in2;
    }
    m->lops[c].out = R;
    return R;
}

int tsr_ox_act_tables(tsr_onnx_t *m)
{
    const int nl = m->nlops;
    if (nl < 1)
        return 0;
    /* (rows_layout adds at most two values per table) */
    int *root = malloc(sizeof *root * (size_t)(m->nvals + 2 * nl + 1));
    int *act_of = malloc(sizeof *act_of * (size_t)(nl + 1)); /* absorbed lop -> the act lop it went into */
    char *inl = calloc((size_t)nl + 1, 1), *dead = calloc((size_t)nl + 1, 1);
    int *map = malloc(sizeof *map * (size_t)(nl + 1));
    int rc = 0;
    if (!root || !act_of || !inl || !dead || !map) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    for (int v = 0; v < m->nvals + 2 * nl + 1; v++)
        root[v] = -1;
    for (int j = 0; j < nl; j++)
        act_of[j] = -1;
    int nact = 0;
    for (int c = 0; c < nl && !rc; c++) {
        ox_lop_t *L = &m->lops[c];
        const int r = lop_root(m, root, L);
        if (r < 0)
            continue;
        root[L->out] = r;
        /* a chain ends in a quantized 8-bit value of r's shape */
        if (!is_q8(&m->vals[L->out]) || numel(&m->vals[L->out]) != numel(&m->vals[r]))
            continue;
        /* only next to device work: r from a device operator, or y read by one. A table between host
           operators would be a device segment of its own (a submission and a round trip for what the
           host does in a few microseconds: the LayerNorm epsilon Add and attention scale of a
           transformer); it stays on the host, and a later chain through y may still take it */
        const int pr = m->vals[r].prod;
        int near = pr >= 0 && m->lops[pr].side == SIDE_DEV;
        for (int j = c + 1; j < nl && !near; j++) /* (a dense over rows reads y through an alias) */
            near = m->lops[j].side == SIDE_DEV && ((m->lops[j].in >= 0 && m->vals[m->lops[j].in].base == L->out) ||
                                                   (m->lops[j].in2 >= 0 && m->vals[m->lops[j].in2].base == L->out));
        if (!near)
            continue;
        memset(inl, 0, (size_t)nl);
        mark_chain(m, c, r, inl);
        tsr_act_table_t t;
        const int trc = chain_table(m, c, r, inl, &t);
        if (trc == TSR_ENOMEM) {
            rc = trc;
            break;
        }
        if (trc) { /* a NaN for some input: stays on the host (its error, if any run meets it, then) */
            tsr_err_clear();
            continue;
        }
        /* the act lop takes c's place; the other lops of the chain are absorbed into it */
        int first = c; /* the chain's first operator after its DequantizeLinear names the device node */
        for (int j = 0; j < c; j++)
            if (inl[j] && m->lops[j].hkind != H_DEQUANT) {
                first = j;
                break;
            }
        tsr_nd_node_t nd;
        memset(&nd, 0, sizeof nd);
        nd.kind = TSR_ND_ACT;
        nd.in[1] = -1;
        qdtype(m->vals[r].elem, &nd.act.x_dtype);
        qdtype(m->vals[L->out].elem, &nd.act.y_dtype);
        nd.act.y_zp = L->hkind == H_QUANT ? L->zp : L->yzp; /* the output's zero point (assign_zps) */
        nd.act.table = t;
        if (m->lops[first].side == SIDE_DEV) /* an earlier table (SiLU's Sigmoid): its name */
            memcpy(nd.name, m->lops[first].nd.name, sizeof nd.name);
        else
            tsr_strsafe(nname(m, m->lops[first].node), nd.name, sizeof nd.name);
        free(L->zpa);
        free(L->zpb);
        const int node = L->node, out = L->out;
        const int name_node = m->lops[first].side == SIDE_DEV ? m->lops[first].name_node : m->lops[first].node;
        memset(L, 0, sizeof *L);
        L->node = node;
        L->name_node = name_node;
        L->side = SIDE_DEV;
        L->in = r;
        L->in2 = -1;
        L->out = out;
        L->seg = -1;
        L->nd = nd;
        for (int j = 0; j < c; j++)
            if (inl[j]) {
                act_of[j] = c;
                dead[j] = 1; /* tentatively: kept below if something else reads its output */
            }
        /* its output stays a function of r: a later chain through it (SiLU's QLinearMul of r and
           the Sigmoid's table) composes, applying this table on the host in chain_table */
        root[out] = r;
        const int rv = rows_layout(m, c, r, nl);
        if (rv < 0) {
            rc = rv;
            break;
        }
        if (rv > 0)
            root[rv] = r;
        nact++;
    }
    if (rc || !nact)
        goto out;
    /* keep the absorbed lops whose output something else reads, to a fixed point */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int j = nl - 1; j >= 0; j--) {
            if (!dead[j])
                continue;
            if (value_read(m, m->lops[j].out, dead)) {
                dead[j] = 0;
                act_of[j] = -1;
                changed = 1;
            }
        }
    }
    for (int j = 0; j < nl; j++) /* an absorbed lop's outputs: never computed (tsr_onnx_read_value says so) */
        if (dead[j])
            m->vals[m->lops[j].out].in_act = 1;
    /* compact the lops; nodes and values follow */
    int n = 0;
    for (int j = 0; j < nl; j++) {
        map[j] = dead[j] ? -1 : n;
        if (!dead[j])
            m->lops[n++] = m->lops[j];
    }
    for (size_t i = 0; i < m->gp->n_node; i++) {
        const int l = m->node_lop[i];
        if (l < 0 || l >= nl)
            continue;
        if (dead[l]) {
            int a = act_of[l]; /* the act lop it went into, or the one that act lop went into */
            while (dead[a])
                a = act_of[a];
            m->node_lop[i] = map[a];
            m->placed[i] = OX_FOLDED;
        } else
            m->node_lop[i] = map[l];
    }
    for (int v = 0; v < m->nvals; v++) {
        ox_val_t *V = &m->vals[v];
        if (V->prod >= 0 && V->prod < nl)
            V->prod = map[V->prod];
        if (V->real_lop >= 0 && V->real_lop < nl)
            V->real_lop = map[V->real_lop];
    }
    m->nlops = n;
out:
    free(root), free(act_of), free(inl), free(dead), free(map);
    return rc;
}
