/*
 * tsr_matmul: int8 matmul + requantization lowering (see tsr_matmul.h).
 *
 * Schedule: tiles of TM x TN output blocks, full K per tile. Input, weight
 * and accumulator buffers are split in halves and tile t uses half t%2, so
 * the load of tile t+1 and the store of tile t-1 overlap the GEMM of tile
 * t. Tokens: load->compute "tile t loaded"; compute->load "half free
 * again" (pushed by tile t's GEMM, popped by tile t+2's load);
 * compute->store "tile t ready"; store->compute "out half drained"
 * (popped by tile t+2's reset, and by FINISH for the last tile).
 */
#include "tsr_matmul.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_stream.h"

uint64_t tsr_matmul_a_bytes(const tsr_config_t *c, int m, int k)
{
    return (uint64_t)(m / c->batch) * (uint64_t)(k / c->block_in) * c->inp_bytes;
}
uint64_t tsr_matmul_b_bytes(const tsr_config_t *c, int k, int n)
{
    return (uint64_t)(n / c->block_out) * (uint64_t)(k / c->block_in) * c->wgt_bytes;
}
uint64_t tsr_matmul_c_bytes(const tsr_config_t *c, int m, int n)
{
    return (uint64_t)(m / c->batch) * (uint64_t)(n / c->block_out) * c->out_bytes;
}

void tsr_pack_a(const tsr_config_t *c, const int8_t *a, int m, int k, uint8_t *dst)
{
    int kb = k / c->block_in;
    for (int r = 0; r < m; r++)
        for (int col = 0; col < k; col++) {
            size_t elem = (size_t)(r / c->batch) * (size_t)kb + (size_t)(col / c->block_in);
            size_t off = elem * c->inp_bytes + (size_t)(r % c->batch) * (size_t)c->block_in + (size_t)(col % c->block_in);
            dst[off] = (uint8_t)a[(size_t)r * (size_t)k + (size_t)col];
        }
}

void tsr_pack_b(const tsr_config_t *c, const int8_t *b, int k, int n, uint8_t *dst)
{
    int kb = k / c->block_in;
    for (int r = 0; r < k; r++)
        for (int col = 0; col < n; col++) {
            size_t elem = (size_t)(col / c->block_out) * (size_t)kb + (size_t)(r / c->block_in);
            size_t off = elem * c->wgt_bytes + (size_t)(col % c->block_out) * (size_t)c->block_in + (size_t)(r % c->block_in);
            dst[off] = (uint8_t)b[(size_t)r * (size_t)n + (size_t)col];
        }
}

void tsr_unpack_c(const tsr_config_t *c, const uint8_t *src, int m, int n, int8_t *out)
{
    int nb = n / c->block_out;
    for (int r = 0; r < m; r++)
        for (int col = 0; col < n; col++) {
            size_t elem = (size_t)(r / c->batch) * (size_t)nb + (size_t)(col / c->block_out);
            size_t off = elem * c->out_bytes + (size_t)(r % c->batch) * (size_t)c->block_out + (size_t)(col % c->block_out);
            out[(size_t)r * (size_t)n + (size_t)col] = (int8_t)src[off];
        }
}

static int imin(int a, int b) { return a < b ? a : b; }

int tsr_matmul_build(tsr_device_t *dev, uint64_t a, uint64_t b, uint64_t cbuf, int m, int k, int n,
                     int shift, tsr_matmul_prog_t *prog)
{
    const tsr_config_t *c = tsr_device_config(dev);
    int rc = TSR_OK;
    tsr_stream_t ib;
    uint8_t *uops = NULL;
    memset(prog, 0, sizeof *prog);
    tsr_stream_init(&ib, c, 0, 0);
    if (c->inp_width != 8 || c->wgt_width != 8)
        return tsr_err(TSR_EINVAL, "matmul: needs int8 inputs and weights (config has int%d/int%d)",
                       c->inp_width, c->wgt_width);
    if (m <= 0 || k <= 0 || n <= 0 || m % c->batch || k % c->block_in || n % c->block_out)
        return tsr_err(TSR_EINVAL,
                       "matmul: shape %dx%dx%d must be positive multiples of BATCH x BLOCK_IN x "
                       "BLOCK_OUT = %dx%dx%d",
                       m, k, n, c->batch, c->block_in, c->block_out);
    if (shift < 0 || shift > c->acc_width - 1)
        return tsr_err(TSR_EINVAL, "matmul: shift %d out of range [0, %d]", shift, c->acc_width - 1);
    const int mb = m / c->batch, kb = k / c->block_in, nb = n / c->block_out;
    const int inp_half = (int)c->inp_depth / 2, wgt_half = (int)c->wgt_depth / 2;
    const int acc_half = (int)c->acc_depth / 2;
    if (kb > inp_half || kb > wgt_half)
        return tsr_err(TSR_EINVAL,
                       "matmul: K = %d needs %d rows per tile row, more than half the input (%d) or "
                       "weight (%d) buffer; splitting K is not supported yet",
                       k, kb, inp_half, wgt_half);
    if ((uint32_t)(2 * kb + 2) > c->uop_depth)
        return tsr_err(TSR_EINVAL, "matmul: K = %d needs %d uops, more than the uop buffer (%u)", k,
                       2 * kb + 2, c->uop_depth);
    const int tm = imin(imin(mb, inp_half / kb), imin(acc_half, (1 << TSR_LOOP_BITS) - 1));
    const int tn = imin(imin(nb, wgt_half / kb), imin(acc_half, (1 << TSR_LOOP_BITS) - 1) / tm);
    const int tiles_m = (mb + tm - 1) / tm, tiles_n = (nb + tn - 1) / tn;
    const int tiles = tiles_m * tiles_n;

    /* Uop kernels: per half p, the K reduction (dst p*acc_half, src/wgt
     * walk K) and one uop addressing the accumulator tile for reset/ALU. */
    const int nuops = 2 * kb + 2;
    uops = calloc((size_t)nuops, c->uop_bytes);
    if (!uops)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int p = 0; p < 2; p++) {
        for (int i = 0; i < kb; i++) {
            tsr_uop_t u = {(uint32_t)(p * acc_half), (uint32_t)(p * inp_half + i), (uint32_t)(p * wgt_half + i)};
            uint64_t raw;
            if ((rc = tsr_uop_encode(c, &u, &raw)))
                goto out;
            memcpy(uops + (size_t)(p * kb + i) * c->uop_bytes, &raw, c->uop_bytes);
        }
        tsr_uop_t u = {(uint32_t)(p * acc_half), (uint32_t)(p * acc_half), 0};
        uint64_t raw;
        if ((rc = tsr_uop_encode(c, &u, &raw)))
            goto out;
        memcpy(uops + (size_t)(2 * kb + p) * c->uop_bytes, &raw, c->uop_bytes);
    }
    if ((rc = tsr_mem_alloc(dev, (uint64_t)nuops * c->uop_bytes, &prog->uop_addr)) ||
        (rc = tsr_mem_write(dev, prog->uop_addr, uops, (uint64_t)nuops * c->uop_bytes)))
        goto out;

    tsr_insn_t *in;
    tsr_stream_uops(&ib, (uint32_t)(prog->uop_addr / c->uop_bytes), (uint32_t)nuops);

    const uint32_t a_el = (uint32_t)(a / c->inp_bytes), b_el = (uint32_t)(b / c->wgt_bytes);
    const uint32_t c_el = (uint32_t)(cbuf / c->out_bytes);
    for (int t = 0; t < tiles; t++) {
        const int p = t % 2, ti = t / tiles_n, tj = t % tiles_n;
        const int sm = imin(tm, mb - ti * tm), sn = imin(tn, nb - tj * tn);
        const uint32_t kern = (uint32_t)(2 * kb + p);
        /* load stage: waits for the GEMMs of tile t-2 to free half p */
        if (t >= 2)
            tsr_stream_wait(&ib, TSR_Q_CMP2LD);
        tsr_stream_load(&ib, TSR_MEM_INP, (uint32_t)(p * inp_half), a_el + (uint32_t)(ti * tm * kb), (uint32_t)sm,
                        (uint32_t)kb, (uint32_t)kb);
        tsr_stream_load(&ib, TSR_MEM_WGT, (uint32_t)(p * wgt_half), b_el + (uint32_t)(tj * tn * kb), (uint32_t)sn,
                        (uint32_t)kb, (uint32_t)kb);
        tsr_stream_signal(&ib, TSR_Q_LD2CMP);
        /* compute stage: zero the tile (once tile t-2's STORE drained it),
         * reduce over K, requantize */
        if (t >= 2)
            tsr_stream_wait(&ib, TSR_Q_ST2CMP);
        in = tsr_stream_gemm(&ib, kern, kern + 1, 1);
        tsr_stream_loops(in, (uint32_t)(sm * sn), 1, 0, 1, 0, 0);
        tsr_stream_wait(&ib, TSR_Q_LD2CMP);
        in = tsr_stream_gemm(&ib, (uint32_t)(p * kb), (uint32_t)(p * kb + kb), 0);
        tsr_stream_loops(in, (uint32_t)sm, (uint32_t)sn, (uint32_t)kb, (uint32_t)sn, 1, 0);
        in->wgt_factor_in = (uint32_t)kb;
        if (t < tiles - 2)
            tsr_stream_signal(&ib, TSR_Q_CMP2LD);
        /* round(acc / 2^shift), then clamp to int8; STORE keeps the low 8 bits. */
        const struct { uint32_t op; int imm; } alu[3] = {
            {TSR_ALU_RSHR, shift}, {TSR_ALU_MAX, -128}, {TSR_ALU_MIN, 127}};
        for (int s = 0; s < 3; s++) {
            in = tsr_stream_alu(&ib, alu[s].op, kern, kern + 1);
            in->use_imm = 1;
            in->imm = alu[s].imm;
            tsr_stream_loops(in, (uint32_t)(sm * sn), 1, 1, 1, 0, 0);
        }
        tsr_stream_signal(&ib, TSR_Q_CMP2ST);
        /* store stage */
        tsr_stream_wait(&ib, TSR_Q_CMP2ST);
        tsr_stream_store(&ib, (uint32_t)(p * acc_half), c_el + (uint32_t)(ti * tm * nb + tj * tn), (uint32_t)sm,
                         (uint32_t)sn, (uint32_t)nb);
        /* the store frees half p for tile t+2, or (last tile) for FINISH */
        if (t < tiles - 2 || t == tiles - 1)
            tsr_stream_signal(&ib, TSR_Q_ST2CMP);
    }
    if ((rc = tsr_stream_finish(&ib)))
        goto out;
    tsr_stream_take(&ib, &prog->insns, &prog->ninsns);
    prog->gemm_ops = (uint64_t)mb * (uint64_t)nb * (uint64_t)kb;
    prog->tile_m = tm;
    prog->tile_n = tn;
out:
    free(uops);
    tsr_stream_free(&ib);
    if (rc && prog->uop_addr) {
        tsr_mem_free(dev, prog->uop_addr);
        prog->uop_addr = 0;
    }
    return rc;
}

void tsr_matmul_free(tsr_device_t *dev, tsr_matmul_prog_t *prog)
{
    if (prog->uop_addr)
        tsr_mem_free(dev, prog->uop_addr);
    free(prog->insns);
    memset(prog, 0, sizeof *prog);
}
