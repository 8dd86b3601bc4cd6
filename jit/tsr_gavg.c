/*
 * tsr_gavg: the global average into its own quantization over device
 * tensors (see tsr_gavg.h for the values and the lowering).
 *
 * On-chip rows: inp [0, TI) and [TI, 2TI) the two halves x's rows are
 * loaded into; wgt 0 the identity block (w[o][i] = 1 if o == i); acc [0, G)
 * and [G, 2G) the two regions of sum rows, then three constant rows (the
 * start value -H*W*(x_zp - off), the multiplier or the scale's bits, the
 * rqfin row), each value in every lane.
 *
 * Stream (piece q: one load of at most TI rows, in half q % 2; group g: m
 * blocks whose sums are region g % 2):
 *   LOAD uop (twelve uops), LOAD acc (the constant rows)  -- compute stage
 *   LOAD wgt (the identity)                               -- load stage
 *   per group: [wait store->compute: group g-2's STORE has read region r]
 *              ALU mov (region r's rows <- the start row)
 *              per piece: [wait compute->load: piece q-2's GEMM has read half q%2]
 *                         LOAD inp (pushes "loaded")
 *                         GEMM (pops "loaded"; the block's sum row += each of its rows through the
 *                               identity: a loop with dst factor 0; pushes "half free" for piece q+2)
 *              [ALU shr imm -shift] ALU mulhr|fscale ALU rqfin     (pushes "done")
 *              STORE region r -> y's rows (pops "done"; pushes "drained" for g+2, the last for FINISH)
 * The loads run in the load stage, beside the GEMMs of the previous piece:
 * one GEMM op per input row against the bus's bytes per row, so the
 * operator is bound by DRAM.
 */
#include "tsr_gavg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_dtype.h"
#include "tsr_error.h"
#include "tsr_jitutil.h"
#include "tsr_isa.h"
#include "tsr_requant.h"
#include "tsr_stream.h"

int tsr_gavg_check(const tsr_gavg_params_t *p)
{
    if (!p)
        return tsr_err(TSR_EINVAL, "gavg: NULL parameters");
    if (p->n < 1 || p->c < 1 || p->h < 1 || p->w < 1)
        return tsr_err(TSR_EINVAL, "gavg: shape [%d, %d, %d, %d] must be positive", p->n, p->c, p->h, p->w);
    const int64_t hw = (int64_t)p->h * p->w;
    if ((int64_t)p->n * p->c * hw > INT32_MAX)
        return tsr_err(TSR_EINVAL, "gavg: more than 2^31 - 1 elements");
    const tsr_dtype_e dt[2] = {p->x_dtype, p->y_dtype};
    const int32_t zp[2] = {p->x_zp, p->y_zp};
    for (int k = 0; k < 2; k++) {
        if (!tsr_dt_ok(dt[k]))
            return tsr_err(TSR_EINVAL, "gavg: %s dtype %d must be int8 or uint8", k ? "output" : "input", (int)dt[k]);
        if (zp[k] < tsr_dt_min(dt[k]) || zp[k] > tsr_dt_max(dt[k]))
            return tsr_err(TSR_EINVAL, "gavg: %s zero point %d outside %s", k ? "output" : "input", (int)zp[k],
                           tsr_dtype_name(dt[k]));
    }
    if (p->mult < 0 || p->shift < -31 || p->shift > 30)
        return tsr_err(TSR_EINVAL, "gavg: multiplier %d / shift %d out of range ([0, 2^31), [-31, 30])", (int)p->mult,
                       p->shift);
    /* the sum stays exact: |S| <= 255 * H*W, and a left shift must not wrap it */
    if (p->shift > 0 && ((255 * hw) << p->shift) > INT32_MAX)
        return tsr_err(TSR_EINVAL, "gavg: shift %d would overflow a sum over %lld elements", p->shift, (long long)hw);
    if (p->fscale != 0.0f && !(p->fscale > 0.0f && isnormal(p->fscale)))
        return tsr_err(TSR_EINVAL, "gavg: fscale %g must be 0 (none) or positive and normal", (double)p->fscale);
    if (p->act_min > p->act_max || p->act_min < tsr_dt_min(p->y_dtype) || p->act_max > tsr_dt_max(p->y_dtype))
        return tsr_err(TSR_EINVAL, "gavg: clamp [%d, %d] not within %s's range in order", (int)p->act_min,
                       (int)p->act_max, tsr_dtype_name(p->y_dtype));
    return TSR_OK;
}

void tsr_gavg_plan_free(tsr_device_t *dev, tsr_gavg_plan_t *pl)
{
    if (!pl)
        return;
    if (pl->c_addr && dev)
        tsr_mem_free(dev, pl->c_addr);
    free(pl->insns);
    memset(pl, 0, sizeof *pl);
}

/* uops, each for sum region 0 then 1: the start mov, immediates, the multiplier, the rqfin row; then the
   GEMMs: input half 0 (regions 0, 1), input half 1 (regions 0, 1) */
enum { U_INIT = 0, U_IMM = 2, U_MUL = 4, U_RQ = 6, U_GEMM = 8, U_COUNT = 12 };

int tsr_gavg_plan_tensors(tsr_device_t *dev, const tsr_gavg_params_t *p, const tsr_dtensor_t *x,
                          const tsr_dtensor_t *y, tsr_gavg_plan_t *pl)
{
    if (!pl)
        return tsr_err(TSR_EINVAL, "gavg: NULL plan");
    memset(pl, 0, sizeof *pl);
    if (!dev || !p || !x || !y)
        return tsr_err(TSR_EINVAL, "gavg: NULL device, parameters or tensor");
    int rc = tsr_gavg_check(p);
    if (rc)
        return rc;
    if (!x->addr || !y->addr)
        return tsr_err(TSR_EINVAL, "gavg: a tensor without a buffer");
    if (x->n != p->n || x->c != p->c || x->h != p->h || x->w != p->w || x->dtype != p->x_dtype || x->zp != p->x_zp ||
        y->n != p->n || y->c != p->c || y->h != 1 || y->w != 1 || y->dtype != p->y_dtype || y->zp != p->y_zp)
        return tsr_err(TSR_EINVAL, "gavg: tensors [%d,%d,%d,%d] zp %d -> [%d,%d,%d,%d] zp %d do not match the "
                       "parameters [%d,%d,%d,%d] zp %d -> zp %d (or their dtypes differ)", x->n, x->c, x->h, x->w,
                       (int)x->zp, y->n, y->c, y->h, y->w, (int)y->zp, p->n, p->c, p->h, p->w, (int)p->x_zp,
                       (int)p->y_zp);
    const tsr_config_t *c = tsr_device_config(dev);
    if (c->acc_width != 32)
        return tsr_err(TSR_EINVAL, "gavg: needs 32-bit accumulators (this config's are %d-bit)", c->acc_width);
    const uint32_t rb = c->acc8_bytes;
    if (rb != (uint32_t)(x->batch * x->block) || c->out_bytes != rb)
        return tsr_err(TSR_EINVAL, "gavg: the tensors' %d-byte rows are not this config's %u-byte acc8 rows",
                       x->batch * x->block, rb);
    const uint64_t hw = (uint64_t)p->h * (uint64_t)p->w, blocks = (uint64_t)x->nb * (uint64_t)x->cb;
    if (x->bytes != blocks * hw * rb || y->bytes != blocks * rb || x->addr % rb || y->addr % rb ||
        (x->addr + x->bytes) / rb > UINT32_MAX || (y->addr + y->bytes) / rb > UINT32_MAX)
        return tsr_err(TSR_EINVAL, "gavg: tensor buffers are not [NB][CB][H][W] rows of this config (or beyond the "
                       "DRAM the instruction fields address)");
    pl->exact = c->exact_requant && p->fscale > 0.0f;
    if (c->block_in != c->block_out || c->inp_bytes != rb)
        return tsr_err(TSR_EINVAL, "gavg: needs BLOCK_IN == BLOCK_OUT (device tensors' rows as inp rows)");

    /* pieces of at most TI rows (half the input buffer); groups: whole blocks per piece when one fits
       (2m + 3 accumulator rows), else one block per group in several pieces */
    const uint64_t depth = c->acc_depth, loop_max = (1u << TSR_LOOP_BITS) - 1, size_max = (1u << TSR_SIZE_BITS) - 1;
    uint64_t TI = c->inp_depth / 2;
    TI = TI > size_max ? size_max : TI;
    if (depth < 5 || TI < 1)
        return tsr_err(TSR_EINVAL, "gavg: buffers too small (%u accumulator, %u input rows)", c->acc_depth,
                       c->inp_depth);
    uint64_t m = hw <= TI ? TI / hw : 0;
    if (m > (depth - 3) / 2)
        m = (depth - 3) / 2;
    if (m > loop_max)
        m = loop_max;
    if (m > blocks)
        m = blocks;
    const uint64_t piece = m >= 1 ? m * hw : (TI > loop_max ? loop_max : TI); /* rows per full piece */
    const uint64_t per_block = m >= 1 ? 1 : (hw + piece - 1) / piece;      /* pieces per block (chunked) */
    pl->group = m >= 1 ? (uint32_t)m : 1;
    pl->groups = (int)(m >= 1 ? (blocks + m - 1) / m : blocks);
    const uint64_t npieces = m >= 1 ? (uint64_t)pl->groups : blocks * per_block;
    const uint32_t G = pl->group, cinit = 2 * G, cmul = cinit + 1, crq = cinit + 2, ti = (uint32_t)TI;
    pl->hw = (uint32_t)hw;
    pl->blocks = (uint32_t)blocks;
    pl->stage_rows = (uint32_t)piece;
    pl->x_addr = x->addr, pl->y_addr = y->addr;

    /* device terms: x holds h = x - off; rqfin clamps y - off_y */
    const int32_t xz = p->x_zp - tsr_dt_off(p->x_dtype), yo = tsr_dt_off(p->y_dtype);
    const int32_t vinit = (int32_t)(-(int64_t)hw * xz);
    const int32_t vmul = pl->exact ? tsr_requant_fscale_bits(p->fscale) : p->mult;
    const int32_t vrq = tsr_requant_rqfin(pl->exact || p->shift > 0 ? 0 : -p->shift, p->y_zp - yo, p->act_min - yo,
                                          p->act_max - yo);
    /* the constant buffer: the identity block, the three rows, the uops, each part aligned to all three sizes */
    const uint64_t ab = c->acc_bytes, ub = c->uop_bytes, wb = c->wgt_bytes;
    uint64_t al = ab > ub ? ab : ub;
    al = al > wb ? al : wb;
    const uint64_t o_acc = (wb + al - 1) / al * al, o_uop = o_acc + (3 * ab + al - 1) / al * al;
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
        memcpy(cb + o_acc + 4 * l, &vinit, 4);
        memcpy(cb + o_acc + ab + 4 * l, &vmul, 4);
        memcpy(cb + o_acc + 2 * ab + 4 * l, &vrq, 4);
    }
    const tsr_uop_t uops[U_COUNT] = {{0, cinit, 0}, {G, cinit, 0}, {0, 0, 0},  {G, 0, 0},     {0, cmul, 0},
                                     {G, cmul, 0},  {0, crq, 0},   {G, crq, 0}, {0, 0, 0},    {G, 0, 0},
                                     {0, ti, 0},    {G, ti, 0}};
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
    tsr_stream_load(&b, TSR_MEM_ACC, cinit, (uint32_t)((pl->c_addr + o_acc) / ab), 1, 3, 3);
    tsr_stream_load(&b, TSR_MEM_WGT, 0, (uint32_t)(pl->c_addr / wb), 1, 1, 1);
    const uint32_t xe = (uint32_t)(x->addr / rb), ye = (uint32_t)(y->addr / rb);
    uint64_t q = 0; /* pieces so far */
    for (int g = 0; g < pl->groups; g++) {
        const uint32_t r = (uint32_t)(g % 2);
        const uint64_t k0 = (uint64_t)g * G, mg = blocks - k0 < G ? blocks - k0 : G;
        if (g >= 2)
            tsr_stream_wait(&b, TSR_Q_ST2CMP);
        tsr_insn_t *in = tsr_stream_alu(&b, TSR_ALU_MOV, U_INIT + r, U_INIT + r + 1);
        tsr_stream_loops(in, (uint32_t)mg, 1, 0, 1, 0, 0);
        for (uint64_t r0 = 0; r0 < (m >= 1 ? mg * hw : hw); r0 += piece, q++) {
            const uint64_t total = m >= 1 ? mg * hw : hw, R = total - r0 < piece ? total - r0 : piece;
            const uint32_t h = (uint32_t)(q % 2);
            if (q >= 2)
                tsr_stream_wait(&b, TSR_Q_CMP2LD);
            tsr_stream_load(&b, TSR_MEM_INP, h * ti, xe + (uint32_t)(k0 * hw + r0), 1, (uint32_t)R, (uint32_t)R);
            tsr_stream_signal(&b, TSR_Q_LD2CMP);
            tsr_stream_wait(&b, TSR_Q_LD2CMP);
            in = tsr_stream_gemm(&b, U_GEMM + 2 * h + r, U_GEMM + 2 * h + r + 1, 0);
            if (m >= 1) /* each block's rows into its sum row */
                tsr_stream_loops(in, (uint32_t)mg, 1, (uint32_t)hw, (uint32_t)hw, 0, 1);
            else
                tsr_stream_loops(in, 1, 0, 0, (uint32_t)R, 0, 1);
            if (q + 2 < npieces)
                tsr_stream_signal(&b, TSR_Q_CMP2LD);
            pl->gemm_ops += R;
        }
        pl->alu_ops += mg;
        if (!pl->exact && p->shift > 0) {
            in = tsr_stream_alu(&b, TSR_ALU_SHR, U_IMM + r, U_IMM + r + 1);
            tsr_stream_loops(in, (uint32_t)mg, 1, 0, 1, 0, 0);
            in->use_imm = 1, in->imm = -p->shift;
            pl->alu_ops += mg;
        }
        in = tsr_stream_alu(&b, pl->exact ? TSR_ALU_FSCALE : TSR_ALU_MULHR, U_MUL + r, U_MUL + r + 1);
        tsr_stream_loops(in, (uint32_t)mg, 1, 0, 1, 0, 0);
        in = tsr_stream_alu(&b, TSR_ALU_RQFIN, U_RQ + r, U_RQ + r + 1);
        tsr_stream_loops(in, (uint32_t)mg, 1, 0, 1, 0, 0);
        pl->alu_ops += 2 * mg;
        tsr_stream_signal(&b, TSR_Q_CMP2ST);
        tsr_stream_wait(&b, TSR_Q_CMP2ST);
        tsr_stream_store(&b, r * G, ye + (uint32_t)k0, 1, (uint32_t)mg, (uint32_t)mg);
        if (g + 2 < pl->groups || g == pl->groups - 1)
            tsr_stream_signal(&b, TSR_Q_ST2CMP);
    }
    if (!(rc = tsr_stream_finish(&b)))
        rc = tsr_stream_check(&b, "gavg");
    pl->dram_bytes = (blocks * hw + blocks) * rb + 3 * ab + wb + U_COUNT * ub;
    tsr_stream_take(&b, &pl->insns, &pl->ninsns);
    tsr_stream_free(&b);
    if (rc)
        goto fail;
    return TSR_OK;
fail:
    tsr_gavg_plan_free(dev, pl);
    return rc;
}

int tsr_gavg_exec(tsr_device_t *dev, const tsr_gavg_plan_t *pl)
{
    return tsr_jit_run_stream(dev, "gavg", pl ? pl->insns : NULL, pl ? pl->ninsns : 0);
}

int tsr_gavg_run(tsr_device_t *dev, const tsr_gavg_params_t *p, const void *x, void *y)
{
    if (!dev || !p || !x || !y)
        return tsr_err(TSR_EINVAL, "gavg: NULL device, parameters or data");
    int rc = tsr_gavg_check(p);
    if (rc)
        return rc;
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_dtensor_t tx, ty;
    memset(&tx, 0, sizeof tx);
    memset(&ty, 0, sizeof ty);
    if (!(rc = tsr_dtensor_init(c, p->n, p->c, p->h, p->w, p->x_dtype, p->x_zp, &tx)) &&
        !(rc = tsr_dtensor_init(c, p->n, p->c, 1, 1, p->y_dtype, p->y_zp, &ty)) && !(rc = tsr_dtensor_alloc(dev, &tx)))
        rc = tsr_dtensor_alloc(dev, &ty);
    if (!rc)
        rc = tsr_dtensor_write_nchw(dev, &tx, x);
    tsr_gavg_plan_t pl;
    memset(&pl, 0, sizeof pl);
    if (!rc)
        rc = tsr_gavg_plan_tensors(dev, p, &tx, &ty, &pl);
    if (!rc)
        rc = tsr_gavg_exec(dev, &pl);
    if (!rc)
        rc = tsr_dtensor_read_nchw(dev, &ty, y);
    tsr_gavg_plan_free(dev, &pl);
    tsr_dtensor_free(dev, &tx);
    tsr_dtensor_free(dev, &ty);
    return rc;
}
