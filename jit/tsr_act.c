/*
 * tsr_act: activation tables and their operator over device tensors (see
 * tsr_act.h for the table convention, the ONNX Runtime-style builder and
 * the lowering).
 *
 * Stream, with T rows per tile and p = t % NB the accumulator half:
 *   LOAD uop (two uops: dst 0 and dst T, the halves' first rows)
 *   LOAD lut table 0 (compute stage, before every ALU op that reads it)
 *   per tile t of R <= T rows:
 *     LOAD acc8 rows p*T + [0, R) from x's rows t*T + [0, R)   (compute; waits for
 *                                                          tile t-NB's STORE: "out half drained")
 *     ALU lut imm 0 over uop p, R iterations of dst + 1   (pushes "done")
 *     STORE out rows p*T + [0, R) to y's rows t*T + [0, R)  (pops "done"; pushes "drained"
 *                                                          for tile t+NB, and on the last tile for FINISH)
 * A LOAD acc8 writes no out row, but it overwrites the accumulator rows the
 * ALU of tile t-NB wrote; those were mirrored to out by that ALU already,
 * and its STORE reads out only: the wait is for the ALU's out writes,
 * which the LOAD precedes in the compute stage, so the token is popped by
 * the LOAD (the first compute instruction of the tile).
 */
#include "tsr_act.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_dtype.h"
#include "tsr_error.h"
#include "tsr_jitutil.h"
#include "tsr_stream.h"

/* ------------------------------------------------------------- tables */

int tsr_act_table_from_values(const int32_t values[TSR_ACT_ENTRIES], tsr_act_table_t *t)
{
    if (!values || !t)
        return tsr_err(TSR_EINVAL, "act: NULL table values or table");
    for (int i = 0; i < TSR_ACT_ENTRIES; i++)
        if (values[i] < -128 || values[i] > 127)
            return tsr_err(TSR_EINVAL, "act: table value %d at index %d is outside [-128, 127]", (int)values[i], i);
    for (int i = 0; i < TSR_ACT_ENTRIES; i++)
        t->v[i] = (int8_t)values[i];
    return TSR_OK;
}

static int check_q(const char *what, tsr_dtype_e dt, float scale, int32_t zp)
{
    if (!tsr_dt_ok(dt))
        return tsr_err(TSR_EINVAL, "act: %s dtype %d must be int8 or uint8", what, (int)dt);
    if (!(scale > 0.0f) || !isfinite(scale))
        return tsr_err(TSR_EINVAL, "act: %s scale %g must be positive and finite", what, (double)scale);
    if (zp < tsr_dt_min(dt) || zp > tsr_dt_max(dt))
        return tsr_err(TSR_EINVAL, "act: %s zero point %d outside [%d, %d]", what, (int)zp, (int)tsr_dt_min(dt),
                       (int)tsr_dt_max(dt));
    return TSR_OK;
}

int tsr_act_table_from_function(const tsr_act_quant_t *q, double (*f)(double), tsr_act_table_t *t)
{
    if (!q || !f || !t)
        return tsr_err(TSR_EINVAL, "act: NULL quantization, function or table");
    int rc;
    if ((rc = check_q("input", q->x_dtype, q->x_scale, q->x_zp)) ||
        (rc = check_q("output", q->y_dtype, q->y_scale, q->y_zp)))
        return rc;
    const int32_t xo = tsr_dt_off(q->x_dtype), yo = tsr_dt_off(q->y_dtype);
    const float lo = (float)tsr_dt_min(q->y_dtype), hi = (float)tsr_dt_max(q->y_dtype);
    int8_t v[TSR_ACT_ENTRIES];
    for (int32_t x = tsr_dt_min(q->x_dtype); x <= tsr_dt_max(q->x_dtype); x++) {
        /* float32 throughout, each operation rounded to float32 (tsr_act.h) */
        const float xf = (float)(x - q->x_zp) * q->x_scale;
        const double fd = f((double)xf);
        if (isnan(fd))
            return tsr_err(TSR_EINVAL, "act: the function gives NaN at input %d (real %g)", (int)x, (double)xf);
        const float yf = (float)fd;
        float r = nearbyintf(yf / q->y_scale) + (float)q->y_zp;
        r = r < lo ? lo : r > hi ? hi : r; /* (infinities too) */
        v[(uint32_t)(x - xo) & 255u] = (int8_t)((int32_t)r - yo);
    }
    memcpy(t->v, v, sizeof v);
    return TSR_OK;
}

/* ------------------------------------------------------------- the plan */

static int same_shape(const tsr_dtensor_t *x, const tsr_dtensor_t *y)
{
    return x->n == y->n && x->c == y->c && x->h == y->h && x->w == y->w && x->bytes == y->bytes &&
           x->batch == y->batch && x->block == y->block;
}

void tsr_act_plan_free(tsr_device_t *dev, tsr_act_plan_t *pl)
{
    if (!pl)
        return;
    if (pl->c_addr && dev)
        tsr_mem_free(dev, pl->c_addr);
    free(pl->insns);
    memset(pl, 0, sizeof *pl);
}

int tsr_act_plan_tensors(tsr_device_t *dev, const tsr_act_table_t *t, const tsr_dtensor_t *x, const tsr_dtensor_t *y,
                         tsr_act_plan_t *pl)
{
    if (!pl)
        return tsr_err(TSR_EINVAL, "act: NULL plan");
    memset(pl, 0, sizeof *pl);
    if (!dev || !t || !x || !y)
        return tsr_err(TSR_EINVAL, "act: NULL device, table or tensor");
    const tsr_config_t *c = tsr_device_config(dev);
    if (!c->act_lut)
        return tsr_err(TSR_EINVAL, "act: the config has no activation tables (ACT_LUT = 0)");
    if (!x->addr || !y->addr)
        return tsr_err(TSR_EINVAL, "act: a tensor without a buffer");
    if (!same_shape(x, y))
        return tsr_err(TSR_EINVAL, "act: input [%d, %d, %d, %d] and output [%d, %d, %d, %d] differ in shape", x->n,
                       x->c, x->h, x->w, y->n, y->c, y->h, y->w);
    /* a device tensor's row is one acc8 element (BATCH x BLOCK_OUT int8) */
    if (c->acc8_bytes != (uint32_t)(x->batch * x->block) || c->out_bytes != c->acc8_bytes)
        return tsr_err(TSR_EINVAL, "act: the tensors' %d-byte rows are not this config's %u-byte acc8 rows",
                       x->batch * x->block, c->acc8_bytes);
    const uint64_t rows = x->bytes / c->acc8_bytes;
    if (x->addr % c->acc8_bytes || y->addr % c->out_bytes || rows == 0)
        return tsr_err(TSR_EINVAL, "act: tensor buffers not aligned to their rows (or empty)");
    /* tiles: half the accumulator buffer each (so a STORE overlaps the next
     * tile), at most the loop field's extent; one buffer of one row can
     * only serialise */
    const int nb = c->acc_depth >= 2 ? 2 : 1;
    uint64_t T = c->acc_depth / (uint32_t)nb;
    const uint64_t loop_max = (1u << TSR_LOOP_BITS) - 1;
    if (T > loop_max)
        T = loop_max;
    if (T > rows)
        T = rows;
    const uint64_t tiles = (rows + T - 1) / T;
    /* DRAM element indices of the tensors' rows must fit the 32-bit field */
    if ((x->addr + x->bytes) / c->acc8_bytes > UINT32_MAX || (y->addr + y->bytes) / c->out_bytes > UINT32_MAX ||
        tiles > INT32_MAX)
        return tsr_err(TSR_EINVAL, "act: tensor beyond the DRAM the instruction fields address");
    pl->rows = rows;
    pl->tile_rows = (uint32_t)T;
    pl->tiles = (int)tiles;
    pl->nbuf = nb;
    pl->x_addr = x->addr;
    pl->y_addr = y->addr;

    /* constants: the table (one 256-byte lut element), then the uops */
    const uint64_t ub = c->uop_bytes, cbytes = TSR_ACT_ENTRIES + 2 * ub;
    int rc = tsr_mem_alloc(dev, cbytes, &pl->c_addr);
    if (rc)
        return rc;
    if (pl->c_addr % TSR_ACT_ENTRIES) { /* (the driver aligns buffers to 4 KiB) */
        rc = tsr_err(TSR_EINVAL, "act: constant buffer at 0x%llx is not 256-byte aligned",
                     (unsigned long long)pl->c_addr);
        goto fail;
    }
    uint8_t cb[TSR_ACT_ENTRIES + 16];
    memcpy(cb, t->v, TSR_ACT_ENTRIES);
    for (int k = 0; k < 2; k++) {
        tsr_uop_t u = {k ? (uint32_t)T : 0u, 0, 0};
        uint64_t raw = 0;
        if (k < nb && (rc = tsr_uop_encode(c, &u, &raw)))
            goto fail;
        for (uint64_t i = 0; i < ub; i++)
            cb[TSR_ACT_ENTRIES + (uint64_t)k * ub + i] = (uint8_t)(raw >> (8 * i));
    }
    if ((rc = tsr_mem_write(dev, pl->c_addr, cb, cbytes)))
        goto fail;

    tsr_stream_t b;
    tsr_stream_init(&b, c, 0, 0);
    tsr_stream_uops(&b, (uint32_t)((pl->c_addr + TSR_ACT_ENTRIES) / ub), (uint32_t)nb);
    tsr_stream_load(&b, TSR_MEM_LUT, 0, (uint32_t)(pl->c_addr / TSR_ACT_ENTRIES), 1, 1, 1);
    const uint32_t xe = (uint32_t)(x->addr / c->acc8_bytes), ye = (uint32_t)(y->addr / c->out_bytes);
    for (uint64_t k = 0; k < tiles; k++) {
        const uint32_t p = (uint32_t)(k % (uint64_t)nb), r0 = (uint32_t)(k * T);
        const uint32_t R = (uint32_t)(rows - k * T < T ? rows - k * T : T);
        if (k >= (uint64_t)nb)
            tsr_stream_wait(&b, TSR_Q_ST2CMP);
        tsr_stream_load(&b, TSR_MEM_ACC8, p * (uint32_t)T, xe + r0, 1, R, R);
        tsr_insn_t *in = tsr_stream_alu(&b, TSR_ALU_LUT, p, p + 1);
        tsr_stream_loops(in, R, 1, 0, 1, 0, 0);
        in->use_imm = 1;
        in->imm = 0;
        pl->alu_ops += R;
        tsr_stream_signal(&b, TSR_Q_CMP2ST);
        tsr_stream_wait(&b, TSR_Q_CMP2ST);
        tsr_stream_store(&b, p * (uint32_t)T, ye + r0, 1, R, R);
        if (k + (uint64_t)nb < tiles || k == tiles - 1)
            tsr_stream_signal(&b, TSR_Q_ST2CMP);
    }
    if (!(rc = tsr_stream_finish(&b)))
        rc = tsr_stream_check(&b, "act");
    pl->dram_bytes = b.bytes;
    tsr_stream_take(&b, &pl->insns, &pl->ninsns);
    tsr_stream_free(&b);
    if (rc)
        goto fail;
    return TSR_OK;
fail:
    tsr_act_plan_free(dev, pl);
    return rc;
}

int tsr_act_exec(tsr_device_t *dev, const tsr_act_plan_t *pl)
{
    return tsr_jit_run_stream(dev, "act", pl ? pl->insns : NULL, pl ? pl->ninsns : 0);
}

int tsr_act_run(tsr_device_t *dev, const tsr_act_table_t *t, const tsr_dtensor_t *x, const tsr_dtensor_t *y)
{
    tsr_act_plan_t pl;
    int rc = tsr_act_plan_tensors(dev, t, x, y, &pl);
    if (!rc)
        rc = tsr_act_exec(dev, &pl);
    tsr_act_plan_free(dev, &pl);
    return rc;
}
