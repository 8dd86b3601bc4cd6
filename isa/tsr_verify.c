/*
 * tsr_verify: static checks of a task-instruction stream (see tsr_verify.h).
 * Per-instruction checks run first, in stream order, so the first error
 * reported is the earliest bad instruction; then the stream is dry-run
 * through tsr_pipe for token, deadlock and FINISH-ordering errors.
 */
#include "tsr_verify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_pipe.h"

typedef struct {
    const tsr_config_t *cfg;
    const tsr_verify_opts_t *opts;
    tsr_uop_t *uops;     /* shadow of the uop buffer */
    uint8_t *known;      /* 1 if the shadow entry holds loaded contents */
} vstate_t;

static int bad(size_t i, const tsr_insn_t *in, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(size_t i, const tsr_insn_t *in, const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *op = tsr_opcode_name(in->opcode);
    if (in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE)
        return tsr_err(TSR_EVERIFY, "insn #%zu (%s %s): %s", i, op,
                       tsr_mem_name(in->mem_type) ? tsr_mem_name(in->mem_type) : "?", msg);
    return tsr_err(TSR_EVERIFY, "insn #%zu (%s): %s", i, op ? op : "?", msg);
}

/* The DRAM span of a 2-D transfer must lie inside one declared region. */
static int check_dram(vstate_t *v, size_t i, const tsr_insn_t *in)
{
    const tsr_verify_opts_t *o = v->opts;
    uint64_t eb = tsr_config_elem_bytes(v->cfg, (int)in->mem_type);
    uint64_t first = (uint64_t)in->dram_base * eb;
    uint64_t last_elem = (uint64_t)in->dram_base + (uint64_t)(in->y_size ? in->y_size - 1 : 0) * in->x_stride + in->x_size;
    uint64_t end = last_elem * eb;
    /* Rows may be laid out with a stride smaller than their length; the
     * span still covers every byte touched. */
    uint64_t row_end = ((uint64_t)in->dram_base + in->x_size) * eb;
    if (row_end > end)
        end = row_end;
    for (size_t r = 0; r < o->nregions; r++) {
        const tsr_region_t *g = &o->regions[r];
        if (first >= g->addr && end <= g->addr + g->size)
            return TSR_OK;
    }
    for (size_t r = 0; r < o->nregions; r++) {
        const tsr_region_t *g = &o->regions[r];
        if (first >= g->addr && first < g->addr + g->size)
            return bad(i, in,
                       "DRAM access [0x%llx, 0x%llx) runs past the end of buffer %s [0x%llx, 0x%llx)",
                       (unsigned long long)first, (unsigned long long)end,
                       g->name ? g->name : "", (unsigned long long)g->addr,
                       (unsigned long long)(g->addr + g->size));
    }
    return bad(i, in, "DRAM access [0x%llx, 0x%llx) is outside every declared buffer",
               (unsigned long long)first, (unsigned long long)end);
}

static int check_mem(vstate_t *v, size_t i, const tsr_insn_t *in)
{
    const tsr_config_t *c = v->cfg;
    int is_load = in->opcode == TSR_OP_LOAD;
    uint32_t m = in->mem_type;
    if (is_load && m == TSR_MEM_OUT)
        return bad(i, in, "LOAD into the out buffer is not allowed (load acc or acc8 instead)");
    if (!is_load && m != TSR_MEM_OUT)
        return bad(i, in, "STORE reads only the out buffer, not %s", tsr_mem_name(m));
    int padded = in->y_pad0 || in->y_pad1 || in->x_pad0 || in->x_pad1;
    if (padded && (!is_load || m == TSR_MEM_UOP))
        return bad(i, in, "padding is only allowed on LOADs of wgt, inp, acc and acc8");
    if (in->pad_value && !(is_load && m == TSR_MEM_INP))
        return bad(i, in, "pad_value %d is only allowed on LOADs of inp (must be 0 here)", in->pad_value);
    if (in->x_size == 0)
        return TSR_OK;
    uint64_t row = (uint64_t)in->x_pad0 + in->x_size + in->x_pad1;
    uint64_t rows = (uint64_t)in->y_pad0 + in->y_size + in->y_pad1;
    uint64_t depth = tsr_config_sram_depth(c, (int)m);
    uint64_t end = (uint64_t)in->sram_base + row * rows;
    if (end > depth)
        return bad(i, in, "on-chip rows [%u, %llu) are outside the %s buffer (%llu rows)",
                   in->sram_base, (unsigned long long)end, m == TSR_MEM_ACC8 ? "acc" : tsr_mem_name(m),
                   (unsigned long long)depth);
    if (v->opts && v->opts->check_dram && in->y_size) {
        int rc = check_dram(v, i, in);
        if (rc)
            return rc;
    }
    /* Track uop contents so GEMM/ALU indices can be checked exactly. */
    if (is_load && m == TSR_MEM_UOP) {
        for (uint64_t y = 0; y < in->y_size; y++)
            for (uint64_t x = 0; x < in->x_size; x++) {
                uint32_t slot = (uint32_t)(in->sram_base + y * in->x_size + x);
                v->known[slot] = 0;
                if (!v->opts || !v->opts->read)
                    continue;
                uint8_t raw[8] = {0};
                uint32_t nb = c->uop_bytes < sizeof raw ? c->uop_bytes : (uint32_t)sizeof raw;
                uint64_t addr = ((uint64_t)in->dram_base + y * in->x_stride + x) * c->uop_bytes;
                if (v->opts->read(v->opts->read_ctx, addr, raw, nb) != TSR_OK)
                    continue;
                uint64_t w = 0;
                for (uint32_t b = 0; b < nb; b++)
                    w |= (uint64_t)raw[b] << (8 * b);
                tsr_uop_decode(c, w, &v->uops[slot]);
                v->known[slot] = 1;
            }
    }
    return TSR_OK;
}

static int check_idx(size_t i, const tsr_insn_t *in, const char *what, uint32_t base,
                     uint32_t fo, uint32_t fi, uint32_t depth, uint32_t u)
{
    uint64_t max = base + (uint64_t)(in->iter_out - 1) * fo + (uint64_t)(in->iter_in - 1) * fi;
    if (max >= depth)
        return bad(i, in,
                   "%s index reaches %llu at uop %u (%u + %u*%u + %u*%u), outside the %u-row buffer",
                   what, (unsigned long long)max, u, base, in->iter_out - 1, fo, in->iter_in - 1, fi,
                   depth);
    return TSR_OK;
}

static int check_loop(vstate_t *v, size_t i, const tsr_insn_t *in)
{
    const tsr_config_t *c = v->cfg;
    int is_gemm = in->opcode == TSR_OP_GEMM;
    if (in->opcode == TSR_OP_ALU && in->alu_opcode >= TSR_ALU_COUNT)
        return bad(i, in, "invalid ALU opcode %u", in->alu_opcode);
    if (in->uop_bgn > in->uop_end)
        return bad(i, in, "uop range [%u, %u) is reversed", in->uop_bgn, in->uop_end);
    if (in->uop_end > c->uop_depth)
        return bad(i, in, "uop range [%u, %u) is outside the uop buffer (%u entries)", in->uop_bgn,
                   in->uop_end, c->uop_depth);
    if (!in->iter_out || !in->iter_in)
        return TSR_OK;
    for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
        if (!v->known[u])
            continue;
        const tsr_uop_t *uo = &v->uops[u];
        int rc = check_idx(i, in, "dst (acc)", uo->dst, in->dst_factor_out, in->dst_factor_in, c->acc_depth, u);
        if (rc)
            return rc;
        if (in->reset)
            continue;
        if (is_gemm) {
            if ((rc = check_idx(i, in, "src (inp)", uo->src, in->src_factor_out, in->src_factor_in, c->inp_depth, u)) ||
                (rc = check_idx(i, in, "wgt", uo->wgt, in->wgt_factor_out, in->wgt_factor_in, c->wgt_depth, u)))
                return rc;
        } else if (!in->use_imm) {
            if ((rc = check_idx(i, in, "src (acc)", uo->src, in->src_factor_out, in->src_factor_in, c->acc_depth, u)))
                return rc;
        }
    }
    return TSR_OK;
}

int tsr_verify(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n,
               const tsr_verify_opts_t *opts)
{
    int rc = TSR_OK;
    tsr_pipe_t *pipe = NULL;
    vstate_t v = {cfg, opts, calloc(cfg->uop_depth, sizeof(tsr_uop_t)), calloc(cfg->uop_depth, 1)};
    if (!v.uops || !v.known) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        const tsr_insn_t *in = &insns[i];
        switch (in->opcode) {
        case TSR_OP_LOAD:
        case TSR_OP_STORE:
            if (in->mem_type >= TSR_MEM_COUNT)
                rc = bad(i, in, "invalid memory type %u", in->mem_type);
            else
                rc = check_mem(&v, i, in);
            break;
        case TSR_OP_GEMM:
        case TSR_OP_ALU: rc = check_loop(&v, i, in); break;
        case TSR_OP_FINISH: break;
        default: rc = tsr_err(TSR_EVERIFY, "insn #%zu: invalid opcode %u", i, in->opcode); break;
        }
    }
    if (rc)
        goto out;
    /* Ordering: tokens, deadlock, FINISH. */
    int done = 0;
    if ((rc = tsr_pipe_create(cfg, insns, n, NULL, NULL, 0, &pipe)))
        goto out;
    rc = tsr_pipe_run(pipe, 0, &done);
out:
    tsr_pipe_destroy(pipe);
    free(v.uops);
    free(v.known);
    return rc;
}
