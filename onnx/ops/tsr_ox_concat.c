/*
 * tsr_ox_concat: Concat along channels on the device. The Concat handler
 * (ops/tsr_ox_shape.c) lowers a Concat of n inputs to a chain of binary
 * host concats (H_CONCAT) through intermediates of shape [N, C so far, H,
 * W], each input first requantized on the device to the output's
 * parameters where they differ (quantize_static's form). Once the target
 * is known (tsr_onnx_set_target records its BLOCK and BATCH), the segment
 * pass moves each such concat to the device (jit/tsr_concat.h: no kernel,
 * its inputs become views of its output, their producers write their
 * channel slices in place) when it is 4-D along axis 1, its layout allows
 * views (N <= BATCH, the first input's channels a multiple of BLOCK) and
 * both operands come from device operators with only device operators
 * between (else the segment would take two inputs from outside). Without a
 * target, or otherwise, or with --place concat=host, it stays the host
 * copy. The bytes are the same either way: a concat copies, nothing is
 * rounded. The inputs' requantizes (a device conv epilogue, within 1 LSB
 * of ONNX Runtime's float DequantizeLinear/QuantizeLinear) become
 * activation tables on configs with ACT_LUT: the host kernels' own
 * function of the 256 input values, bit for bit.
 */
#include <math.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ops.h"
#include "tsr_strsafe.h"

/* Lop l's concat parameters (zero point 0: the segment sets it), 0 if it is no 4-D concat along channels. */
static int concat_params(const tsr_onnx_t *m, const ox_lop_t *L, tsr_concat_params_t *p)
{
    if (L->hkind != H_CONCAT || L->in < 0 || L->in2 < 0 || L->geo[1] <= 0 || L->geo[2] <= 0)
        return 0;
    const ox_val_t *A = &m->vals[L->in], *B = &m->vals[L->in2], *Y = &m->vals[L->out];
    if (A->ndim != 4 || B->ndim != 4 || Y->ndim != 4 || A->elem != Y->elem || B->elem != Y->elem ||
        qdtype(Y->elem, &p->dtype))
        return 0;
    if (A->dims[0] != Y->dims[0] || B->dims[0] != Y->dims[0] || L->geo[0] != Y->dims[0] ||
        A->dims[2] != Y->dims[2] || B->dims[2] != Y->dims[2] || A->dims[3] != Y->dims[3] ||
        B->dims[3] != Y->dims[3] || A->dims[1] + B->dims[1] != Y->dims[1] || Y->dims[1] > (1 << 20))
        return 0;
    p->n = (int)Y->dims[0], p->h = (int)Y->dims[2], p->w = (int)Y->dims[3];
    p->c_a = (int)A->dims[1], p->c_b = (int)B->dims[1];
    p->zp = 0;
    return 1;
}

int tsr_ox_concat_place(tsr_onnx_t *m, int l)
{
    ox_lop_t *L = &m->lops[l];
    if (L->hkind != H_CONCAT)
        return 0;
    if (L->side == SIDE_DEV) { /* back to the host copy first (the target may have changed) */
        memset(&L->nd, 0, sizeof L->nd);
        L->side = SIDE_HOST;
    }
    tsr_concat_params_t p;
    /* --place concat=host: every concat the host copy (tests compare the two) */
    if (m->opts.place[TSR_PLACE_CONCAT] == TSR_PLACE_HOST || !m->cat_block || !concat_params(m, L, &p) || p.n > m->cat_batch || p.c_a % m->cat_block ||
        !tsr_ox_device_operands(m, l, L->in, L->in2))
        return 0;
    L->side = SIDE_DEV;
    L->seg = -1;
    L->nd.kind = TSR_ND_CONCAT;
    L->nd.in[0] = L->nd.in[1] = L->nd.out = -1;
    L->nd.concat = p;
    tsr_strsafe(nname(m, L->node), L->nd.name, sizeof L->nd.name);
    return 1;
}

int tsr_ox_concat_demote(tsr_onnx_t *m, int l)
{
    ox_lop_t *L = &m->lops[l];
    if (L->side != SIDE_DEV || L->hkind != H_CONCAT)
        return 0;
    memset(&L->nd, 0, sizeof L->nd);
    L->side = SIDE_HOST;
    L->seg = -1;
    return 1;
}

/* The table of lop L (a Concat input's requantize): entry (x - off_x) & 255 = y - off_y, y what the host
 * kernels give for x: DequantizeLinear (tsr_onnx_host.c run_dequant: float32 (x - zp) * scale), then
 * QuantizeLinear (run_quant: nearbyintf(f / y_scale) + y_zp, saturated) - the same expressions. */
static int requant_table(const tsr_onnx_t *m, const ox_lop_t *L, tsr_act_table_t *t)
{
    const int xe = m->vals[L->in].elem, ye = m->vals[L->out].elem;
    const int offx = xe == ET_UINT8 ? 128 : 0, offy = ye == ET_UINT8 ? 128 : 0;
    const int lo = ye == ET_UINT8 ? 0 : -128, hi = ye == ET_UINT8 ? 255 : 127;
    int32_t v[TSR_ACT_ENTRIES];
    for (int i = 0; i < TSR_ACT_ENTRIES; i++) {
        const int32_t q = (int8_t)(uint8_t)i + offx;
        const float f = (float)((int64_t)q - L->zp) * L->scale;
        float r = nearbyintf(f / L->mult) + (float)L->yzp;
        r = r < (float)lo ? (float)lo : r > (float)hi ? (float)hi : r;
        v[i] = (int32_t)r - offy;
    }
    return tsr_act_table_from_values(v, t);
}

int tsr_ox_concat_tables(tsr_onnx_t *m)
{
    for (int i = 0; i < m->nlops; i++) {
        ox_lop_t *L = &m->lops[i];
        if (!L->cat_rq || L->side != SIDE_DEV || L->nd.kind != TSR_ND_CONV)
            continue;
        tsr_nd_node_t nd;
        memset(&nd, 0, sizeof nd);
        int rc = requant_table(m, L, &nd.act.table);
        if (rc || qdtype(m->vals[L->in].elem, &nd.act.x_dtype) || qdtype(m->vals[L->out].elem, &nd.act.y_dtype))
            return rc ? rc : tsr_err(TSR_EINVAL, "%s: node \"%s\": a requantize of a non-8-bit value", m->path,
                                     TSR_SAFE(nname(m, L->node)));
        nd.kind = TSR_ND_ACT;
        nd.in[1] = -1;
        nd.act.x_zp = L->zp, nd.act.y_zp = L->yzp;
        memcpy(nd.name, L->nd.name, sizeof nd.name);
        tsr_nd_node_free(&L->nd);
        L->nd = nd;
    }
    return 0;
}

int tsr_ox_concat_zps(tsr_onnx_t *m)
{
    for (int i = 0; i < m->nlops; i++) {
        const ox_lop_t *L = &m->lops[i];
        if (L->side != SIDE_DEV || L->nd.kind != TSR_ND_CONCAT)
            continue;
        ox_val_t *v[3] = {&m->vals[L->out], &m->vals[L->in], &m->vals[L->in2]};
        int32_t zp = v[0]->elem == ET_UINT8 ? 0 : -128;
        int known = 0;
        for (int k = 0; k < 3; k++) {
            if (!v[k]->has_zp)
                continue;
            if (known && v[k]->zp != zp)
                return tsr_err(TSR_EINVAL, "%s: node \"%s\": its inputs' and output's zero points differ (%d and %d)",
                               m->path, TSR_SAFE(nname(m, L->node)), (int)zp, (int)v[k]->zp);
            zp = v[k]->zp, known = 1;
        }
        for (int k = 0; k < 3; k++)
            v[k]->zp = zp, v[k]->has_zp = 1;
    }
    return 0;
}
