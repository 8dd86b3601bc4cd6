/* tsr_carryin: reads of on-chip rows a stream did not write itself (see tsr_carryin.h). */
#include "tsr_carryin.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_pipe.h"

enum { B_INP = TSR_CARRY_INP, B_WGT = TSR_CARRY_WGT, B_ACC = TSR_CARRY_ACC, B_OUT = TSR_CARRY_OUT,
       B_UOP = TSR_CARRY_UOP, B_LUT = TSR_CARRY_LUT, B_COUNT = TSR_CARRY_COUNT };
static const char *const buf_name[B_COUNT] = {"inp", "wgt", "acc", "out", "uop", "lut"};

typedef struct {
    const tsr_config_t *cfg;
    tsr_mem_read_fn read;
    void *ctx;
    uint8_t *w[B_COUNT];   /* 1: the row was written by an instruction executed before */
    uint32_t depth[B_COUNT];
    tsr_uop_t *uops;       /* uop buffer contents as loaded by this stream (or given) */
    uint8_t *raw;          /* one uop LOAD row of DRAM bytes */
    uint8_t **carried;     /* collect mode: every row read before written, instead of the first as an error */
} cstate_t;

uint32_t tsr_carryin_depth(const tsr_config_t *cfg, int buf)
{
    switch (buf) {
    case B_INP: return cfg->inp_depth;
    case B_WGT: return cfg->wgt_depth;
    case B_ACC: return cfg->acc_depth;
    case B_OUT: return cfg->out_depth > cfg->acc_depth ? cfg->out_depth : cfg->acc_depth;
    case B_UOP: return cfg->uop_depth;
    case B_LUT: return (uint32_t)(cfg->act_lut > 0 ? cfg->act_lut : 0);
    default: return 0;
    }
}

const char *tsr_carryin_name(int buf) { return buf >= 0 && buf < B_COUNT ? buf_name[buf] : "?"; }

/* Mark rows [lo, lo + n) of b written (clipped to the buffer). */
static void mark(cstate_t *s, int b, uint64_t lo, uint64_t n)
{
    if (lo >= s->depth[b])
        return;
    if (n > s->depth[b] - lo)
        n = s->depth[b] - lo;
    memset(s->w[b] + lo, 1, (size_t)n);
}

/* Error unless rows [lo, lo + n) of b (the part in range) were written. */
static int need(const cstate_t *s, int b, uint64_t lo, uint64_t n)
{
    for (uint64_t r = lo; r < lo + n && r < s->depth[b]; r++)
        if (!s->w[b][r] && s->carried)
            s->carried[b][r] = 1;
        else if (!s->w[b][r])
            return tsr_err(TSR_EVERIFY, "reads %s row %llu, which no earlier instruction of this stream wrote (it "
                           "would read what the device held before the stream started)",
                           buf_name[b], (unsigned long long)r);
    return TSR_OK;
}

static int buf_of_mem(uint32_t m)
{
    switch (m) {
    case TSR_MEM_INP: return B_INP;
    case TSR_MEM_WGT: return B_WGT;
    case TSR_MEM_ACC:
    case TSR_MEM_ACC8: return B_ACC;
    case TSR_MEM_UOP: return B_UOP;
    case TSR_MEM_LUT: return B_LUT;
    default: return -1;
    }
}

/* A uop LOAD: the rows it writes and their contents (for the GEMM/ALU footprints). */
static int load_uops(cstate_t *s, const tsr_insn_t *in)
{
    const uint32_t ub = s->cfg->uop_bytes, nb = ub < 8 ? ub : 8;
    for (uint64_t y = 0; y < in->y_size; y++) {
        const uint64_t slot0 = in->sram_base + y * in->x_size;
        if (slot0 >= s->cfg->uop_depth)
            break;
        uint64_t nx = in->x_size;
        if (nx > s->cfg->uop_depth - slot0)
            nx = s->cfg->uop_depth - slot0;
        const uint64_t addr = ((uint64_t)in->dram_base + y * in->x_stride) * ub;
        int rc = s->read(s->ctx, addr, s->raw, (size_t)nx * ub);
        if (rc)
            return rc;
        for (uint64_t x = 0; x < nx; x++) {
            uint64_t w = 0;
            for (uint32_t b = 0; b < nb; b++)
                w |= (uint64_t)s->raw[x * ub + b] << (8 * b);
            tsr_uop_decode(s->cfg, w, &s->uops[slot0 + x]);
        }
        mark(s, B_UOP, slot0, nx);
    }
    return TSR_OK;
}

static int exec_mem(cstate_t *s, const tsr_insn_t *in)
{
    if (!in->x_size)
        return TSR_OK;
    if (in->opcode == TSR_OP_STORE)
        return need(s, B_OUT, in->sram_base, (uint64_t)in->y_size * in->x_size);
    int b = buf_of_mem(in->mem_type);
    if (b < 0)
        return TSR_OK;
    if (b == B_UOP)
        return load_uops(s, in);
    const uint64_t rows = (uint64_t)(in->y_pad0 + in->y_size + in->y_pad1) * (in->x_pad0 + in->x_size + in->x_pad1);
    mark(s, b, in->sram_base, rows);
    return TSR_OK;
}

static int exec_loop(cstate_t *s, const tsr_insn_t *in)
{
    const tsr_config_t *c = s->cfg;
    const int gemm = in->opcode == TSR_OP_GEMM;
    if (!in->iter_out || !in->iter_in || in->uop_bgn >= in->uop_end)
        return TSR_OK;
    int rc = need(s, B_UOP, in->uop_bgn, in->uop_end - in->uop_bgn);
    if (rc)
        return rc;
    if (!gemm && in->alu_opcode == TSR_ALU_LUT && !in->reset) {
        if (in->use_imm)
            rc = in->imm >= 0 ? need(s, B_LUT, (uint64_t)in->imm, 1) : TSR_OK;
        else
            rc = need(s, B_LUT, 0, (uint64_t)c->act_lut);
        if (rc)
            return rc;
    }
    const uint64_t k = gemm && in->depthwise && c->depthwise ? (uint64_t)c->depthwise : 1;
    /* a depthwise op's wgt index names a tap group: row index >> dw_group_bits (isa/semantics.md) */
    const int wsh = gemm && in->depthwise ? c->dw_group_bits : 0;
    const int reads_dst = !in->reset && (gemm || in->alu_opcode != TSR_ALU_MOV);
    const int reads_src = !in->reset && (gemm || !in->use_imm);
    for (uint64_t i = 0; i < in->iter_out; i++)
        for (uint64_t j = 0; j < in->iter_in; j++)
            for (uint32_t u = in->uop_bgn; u < in->uop_end && u < c->uop_depth; u++) {
                const tsr_uop_t *uo = &s->uops[u];
                const uint64_t dst = uo->dst + i * in->dst_factor_out + j * in->dst_factor_in;
                const uint64_t src = uo->src + i * in->src_factor_out + j * in->src_factor_in;
                if (reads_dst && (rc = need(s, B_ACC, dst, 1)))
                    return rc;
                if (reads_src && (rc = need(s, gemm ? B_INP : B_ACC, src, k)))
                    return rc;
                if (gemm && !in->reset &&
                    (rc = need(s, B_WGT, (uo->wgt + i * in->wgt_factor_out + j * in->wgt_factor_in) >> wsh, 1)))
                    return rc;
                mark(s, B_ACC, dst, 1);
                mark(s, B_OUT, dst, 1);
            }
    return TSR_OK;
}

static int exec_cb(void *ctx, uint32_t index, const tsr_insn_t *in)
{
    cstate_t *s = ctx;
    (void)index; /* the pipe prefixes errors with "insn #N (op): " */
    switch (in->opcode) {
    case TSR_OP_LOAD:
    case TSR_OP_STORE: return exec_mem(s, in);
    case TSR_OP_GEMM:
    case TSR_OP_ALU: return exec_loop(s, in);
    default: return TSR_OK;
    }
}

static int run(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n, tsr_mem_read_fn read, void *ctx,
               const tsr_uop_t *uops0, uint8_t **carried)
{
    cstate_t s;
    memset(&s, 0, sizeof s);
    s.cfg = cfg;
    s.read = read;
    s.ctx = ctx;
    s.carried = carried;
    for (int b = 0; b < B_COUNT; b++)
        s.depth[b] = tsr_carryin_depth(cfg, b);
    int rc = TSR_OK, done = 0;
    for (int b = 0; b < B_COUNT && !rc; b++)
        if (!(s.w[b] = calloc(s.depth[b] + 1, 1)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
    s.uops = calloc(cfg->uop_depth + 1, sizeof *s.uops);
    s.raw = malloc((size_t)cfg->uop_depth * cfg->uop_bytes + 8);
    if (!rc && (!s.uops || !s.raw))
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc && uops0)
        memcpy(s.uops, uops0, cfg->uop_depth * sizeof *s.uops);
    tsr_pipe_t *p = NULL;
    if (!rc && !(rc = tsr_pipe_create(cfg, insns, n, exec_cb, &s, 0, &p)))
        rc = tsr_pipe_run(p, 0, &done);
    tsr_pipe_destroy(p);
    for (int b = 0; b < B_COUNT; b++)
        free(s.w[b]);
    free(s.uops);
    free(s.raw);
    return rc;
}

int tsr_carryin_check(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n, tsr_mem_read_fn read, void *ctx)
{
    return run(cfg, insns, n, read, ctx, NULL, NULL);
}

int tsr_carryin_rows(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n, tsr_mem_read_fn read, void *ctx,
                     const tsr_uop_t *uops0, uint8_t *carried[TSR_CARRY_COUNT])
{
    return run(cfg, insns, n, read, ctx, uops0, carried);
}
