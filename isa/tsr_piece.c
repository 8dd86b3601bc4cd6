/* tsr_piece: a range of a stream as a stream of its own (see tsr_piece.h). */
#include "tsr_piece.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_carryin.h"
#include "tsr_error.h"
#include "tsr_pipe.h"

#define NONE SIZE_MAX

/* The queue instruction in pushes on through flag f, or -1 (by stage). */
enum { F_POP_PREV, F_POP_NEXT, F_PUSH_PREV, F_PUSH_NEXT, F_COUNT };

static int flag_queue(const tsr_insn_t *in, int f)
{
    const int st = tsr_insn_stage(in);
    switch (f) {
    case F_PUSH_NEXT: return st == TSR_STAGE_LOAD ? TSR_Q_L2C : st == TSR_STAGE_COMPUTE ? TSR_Q_C2S : -1;
    case F_PUSH_PREV: return st == TSR_STAGE_COMPUTE ? TSR_Q_C2L : st == TSR_STAGE_STORE ? TSR_Q_S2C : -1;
    case F_POP_PREV: return st == TSR_STAGE_COMPUTE ? TSR_Q_L2C : st == TSR_STAGE_STORE ? TSR_Q_C2S : -1;
    case F_POP_NEXT: return st == TSR_STAGE_LOAD ? TSR_Q_C2L : st == TSR_STAGE_COMPUTE ? TSR_Q_S2C : -1;
    default: return -1;
    }
}

static uint32_t *flag_ptr(tsr_insn_t *in, int f)
{
    switch (f) {
    case F_POP_PREV: return &in->pop_prev;
    case F_POP_NEXT: return &in->pop_next;
    case F_PUSH_PREV: return &in->push_prev;
    default: return &in->push_next;
    }
}

/* partner[i * F_COUNT + f]: the instruction whose push or pop the token of
 * insns[i]'s flag f pairs with (the k-th pop of a queue with its k-th push). */
static int match_tokens(const tsr_insn_t *insns, size_t n, size_t *partner)
{
    size_t *push[TSR_Q_COUNT], *pop[TSR_Q_COUNT], npush[TSR_Q_COUNT] = {0}, npop[TSR_Q_COUNT] = {0};
    int rc = TSR_OK;
    for (int q = 0; q < TSR_Q_COUNT; q++) {
        push[q] = malloc((n + 1) * sizeof *push[q]);
        pop[q] = malloc((n + 1) * sizeof *pop[q]);
        if (!push[q] || !pop[q])
            rc = tsr_err(TSR_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n * F_COUNT; i++)
        partner[i] = NONE;
    for (size_t i = 0; i < n && !rc; i++)
        for (int f = 0; f < F_COUNT; f++) {
            int q = flag_queue(&insns[i], f);
            if (q < 0 || !*flag_ptr((tsr_insn_t *)&insns[i], f))
                continue;
            if (f == F_PUSH_PREV || f == F_PUSH_NEXT)
                push[q][npush[q]++] = i * F_COUNT + (size_t)f;
            else
                pop[q][npop[q]++] = i * F_COUNT + (size_t)f;
        }
    for (int q = 0; q < TSR_Q_COUNT && !rc; q++)
        for (size_t k = 0; k < npush[q] && k < npop[q]; k++) {
            partner[push[q][k]] = pop[q][k] / F_COUNT;
            partner[pop[q][k]] = push[q][k] / F_COUNT;
        }
    for (int q = 0; q < TSR_Q_COUNT; q++) {
        free(push[q]);
        free(pop[q]);
    }
    return rc;
}

/* The rows LOAD in writes in buffer b (a TSR_CARRY_* index), as [lo, lo + n). */
static int load_rows(const tsr_insn_t *in, int *b, uint64_t *lo, uint64_t *n)
{
    if (in->opcode != TSR_OP_LOAD || !in->x_size)
        return 0;
    switch (in->mem_type) {
    case TSR_MEM_INP: *b = TSR_CARRY_INP; break;
    case TSR_MEM_WGT: *b = TSR_CARRY_WGT; break;
    case TSR_MEM_UOP: *b = TSR_CARRY_UOP; break;
    case TSR_MEM_LUT: *b = TSR_CARRY_LUT; break;
    default: return 0;
    }
    *lo = in->sram_base;
    *n = (uint64_t)(in->y_pad0 + in->y_size + in->y_pad1) * (in->x_pad0 + in->x_size + in->x_pad1);
    return 1;
}

#define W_NONE (-1)     /* acc row never written before the cut */
#define W_COMPUTED (-2) /* last written by a GEMM/ALU */

/* The uop buffer's contents after insns[0..a), and who last wrote each acc
 * row: a LOAD (its index), a GEMM/ALU (W_COMPUTED) or nothing (W_NONE);
 * compute stage, so program order is execution order. */
static int state_at(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t a, tsr_mem_read_fn read, void *ctx,
                    tsr_uop_t *uops, long *acc_writer)
{
    for (uint32_t r = 0; r < cfg->acc_depth; r++)
        acc_writer[r] = W_NONE;
    const uint32_t ub = cfg->uop_bytes, nb = ub < 8 ? ub : 8;
    uint8_t *raw = malloc((size_t)cfg->uop_depth * ub + 8);
    if (!raw)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = TSR_OK;
    for (size_t i = 0; i < a && !rc; i++) {
        const tsr_insn_t *in = &insns[i];
        if (in->opcode == TSR_OP_LOAD && (in->mem_type == TSR_MEM_ACC || in->mem_type == TSR_MEM_ACC8) && in->x_size) {
            const uint64_t lo = in->sram_base,
                           cnt = (uint64_t)(in->y_pad0 + in->y_size + in->y_pad1) * (in->x_pad0 + in->x_size + in->x_pad1);
            for (uint64_t r = lo; r < lo + cnt && r < cfg->acc_depth; r++)
                acc_writer[r] = (long)i;
            continue;
        }
        if ((in->opcode == TSR_OP_GEMM || in->opcode == TSR_OP_ALU) && in->uop_bgn < in->uop_end) {
            for (uint64_t x = 0; x < in->iter_out; x++)
                for (uint64_t y = 0; y < in->iter_in; y++)
                    for (uint32_t u = in->uop_bgn; u < in->uop_end && u < cfg->uop_depth; u++) {
                        uint64_t d = uops[u].dst + x * in->dst_factor_out + y * in->dst_factor_in;
                        if (d < cfg->acc_depth)
                            acc_writer[d] = W_COMPUTED;
                    }
            continue;
        }
        if (in->opcode != TSR_OP_LOAD || in->mem_type != TSR_MEM_UOP || !in->x_size)
            continue;
        for (uint64_t y = 0; y < in->y_size && !rc; y++) {
            const uint64_t slot0 = in->sram_base + y * in->x_size;
            if (slot0 >= cfg->uop_depth)
                break;
            uint64_t nx = in->x_size;
            if (nx > cfg->uop_depth - slot0)
                nx = cfg->uop_depth - slot0;
            if ((rc = read(ctx, ((uint64_t)in->dram_base + y * in->x_stride) * ub, raw, (size_t)nx * ub)))
                break;
            for (uint64_t x = 0; x < nx; x++) {
                uint64_t w = 0;
                for (uint32_t k = 0; k < nb; k++)
                    w |= (uint64_t)raw[x * ub + k] << (8 * k);
                tsr_uop_decode(cfg, w, &uops[slot0 + x]);
            }
        }
    }
    free(raw);
    return rc;
}

/* ALU mov imm 0 over every run [lo, hi) of junk rows, addressed through a uop
 * the prologue loads (the one with the smallest dst d0 <= lo: two outer
 * iterations write [d0, d0 + n) and [lo, hi); the first run is overwritten
 * later by the acc loads if it held constants). */
static int zero_rows(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t a, const uint8_t *need,
                     const tsr_uop_t *uops0, const uint8_t *junk, tsr_insn_t *q, size_t *np)
{
    uint32_t u = UINT32_MAX;
    for (size_t i = 0; i < a; i++) { /* uop rows the prologue's uop loads write hold uops0's contents */
        const tsr_insn_t *in = &insns[i];
        if (!need[i] || in->opcode != TSR_OP_LOAD || in->mem_type != TSR_MEM_UOP)
            continue;
        for (uint64_t r = in->sram_base; r < in->sram_base + (uint64_t)in->y_size * in->x_size && r < cfg->uop_depth; r++)
            if (u == UINT32_MAX || uops0[r].dst < uops0[u].dst)
                u = (uint32_t)r;
    }
    for (uint32_t lo = 0; lo < cfg->acc_depth;) {
        if (!junk[lo]) {
            lo++;
            continue;
        }
        uint32_t hi = lo;
        while (hi < cfg->acc_depth && junk[hi])
            hi++;
        if (u == UINT32_MAX || uops0[u].dst > lo)
            return tsr_err(TSR_EVERIFY, "the piece reads acc rows [%u, %u), a result in progress at the cut, and no "
                           "loaded uop can address them", lo, hi);
        tsr_insn_t z;
        memset(&z, 0, sizeof z);
        z.opcode = TSR_OP_ALU;
        z.alu_opcode = TSR_ALU_MOV;
        z.use_imm = 1;
        z.uop_bgn = u;
        z.uop_end = u + 1;
        z.iter_out = lo > uops0[u].dst ? 2 : 1;
        z.dst_factor_out = lo - uops0[u].dst;
        z.iter_in = hi - lo;
        z.dst_factor_in = 1;
        q[(*np)++] = z;
        lo = hi;
    }
    return TSR_OK;
}

int tsr_piece_build(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n, size_t a, size_t b,
                    tsr_mem_read_fn read, void *ctx, tsr_insn_t **out, size_t *nout, size_t *npro)
{
    *out = NULL;
    *nout = *npro = 0;
    if (!n || a >= b || b > n - 1 || insns[n - 1].opcode != TSR_OP_FINISH)
        return tsr_err(TSR_EINVAL, "piece [%zu, %zu) of a stream of %zu instructions ending in FINISH", a, b, n);
    int rc = TSR_OK;
    size_t *partner = malloc(n * F_COUNT * sizeof *partner);
    uint8_t *need = calloc(a + 1, 1); /* prologue: insns[i] (i < a) re-issued */
    uint8_t *carried[TSR_CARRY_COUNT] = {0};
    tsr_uop_t *uops0 = calloc(cfg->uop_depth + 1, sizeof *uops0);
    long *acc_writer = malloc((cfg->acc_depth + 1) * sizeof *acc_writer);
    uint8_t *junk = calloc(cfg->acc_depth + 1, 1); /* computed acc rows the piece reads: rewritten (zeros) */
    tsr_insn_t *p = malloc((a + (b - a) + 3) * sizeof *p);
    if (!partner || !need || !uops0 || !p || !acc_writer || !junk)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    for (int k = 0; k < TSR_CARRY_COUNT && !rc; k++)
        if (!(carried[k] = calloc(tsr_carryin_depth(cfg, k) + 1, 1)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc)
        rc = match_tokens(insns, n, partner);
    /* the range with the tokens that pair inside it, then a FINISH ordered after its last load and store */
    size_t m = 0;
    size_t last[TSR_STAGE_COUNT] = {NONE, NONE, NONE};
    for (size_t i = a; i < b && !rc; i++) {
        tsr_insn_t in = insns[i];
        for (int f = 0; f < F_COUNT; f++) {
            size_t j = partner[i * F_COUNT + (size_t)f];
            if (*flag_ptr(&in, f) && (j == NONE || j < a || j >= b))
                *flag_ptr(&in, f) = 0;
        }
        last[tsr_insn_stage(&in)] = m;
        p[m++] = in;
    }
    tsr_insn_t fin;
    memset(&fin, 0, sizeof fin);
    fin.opcode = TSR_OP_FINISH;
    if (!rc && last[TSR_STAGE_LOAD] != NONE && !p[last[TSR_STAGE_LOAD]].push_next) {
        p[last[TSR_STAGE_LOAD]].push_next = 1;
        fin.pop_prev = 1;
    }
    if (!rc && last[TSR_STAGE_STORE] != NONE && !p[last[TSR_STAGE_STORE]].push_prev) {
        p[last[TSR_STAGE_STORE]].push_prev = 1;
        fin.pop_next = 1;
    }
    if (!rc)
        p[m++] = fin;
    /* what the range reads that instructions before a wrote */
    if (!rc && !(rc = state_at(cfg, insns, a, read, ctx, uops0, acc_writer)))
        rc = tsr_carryin_rows(cfg, p, m, read, ctx, uops0, carried);
    /* a STORE of output rows computed before the cut (the previous tile's, stored late) stores nothing
     * here: it keeps its tokens; the rows' data would be whatever each simulator holds */
    int dropped = 0;
    for (size_t i = 0; i < m && !rc; i++) {
        tsr_insn_t *in = &p[i];
        if (in->opcode != TSR_OP_STORE || !in->x_size)
            continue;
        const uint64_t lo = in->sram_base, hi = lo + (uint64_t)in->y_size * in->x_size;
        for (uint64_t r = lo; r < hi && r < tsr_carryin_depth(cfg, TSR_CARRY_OUT); r++)
            if (carried[TSR_CARRY_OUT][r]) {
                in->x_size = in->y_size = 0;
                dropped = 1;
                break;
            }
    }
    if (!rc && dropped) {
        for (int k = 0; k < TSR_CARRY_COUNT; k++)
            memset(carried[k], 0, tsr_carryin_depth(cfg, k) + 1);
        rc = tsr_carryin_rows(cfg, p, m, read, ctx, uops0, carried);
    }
    /* acc rows: a constant a LOAD put there is loaded again; a result in progress at the cut (the other
     * bank of a double-buffered tile loop) is rewritten with zeros: its data is not the run's, its timing is */
    for (uint32_t r = 0; r < cfg->acc_depth && !rc; r++)
        if (carried[TSR_CARRY_ACC][r]) {
            if (acc_writer[r] >= 0)
                need[acc_writer[r]] = 1;
            else if (acc_writer[r] == W_COMPUTED)
                junk[r] = 1;
            else
                rc = tsr_err(TSR_EVERIFY, "the piece reads acc row %u, which no instruction of the stream before it "
                             "wrote", r);
            carried[TSR_CARRY_ACC][r] = 0;
        }
    for (uint32_t r = 0; r < tsr_carryin_depth(cfg, TSR_CARRY_OUT) && !rc; r++)
        if (carried[TSR_CARRY_OUT][r])
            rc = tsr_err(TSR_EVERIFY, "the piece reads out row %u before writing it", r);
    /* the last LOAD before a of every carried uop, lut, inp and wgt row */
    for (size_t i = a; i-- > 0 && !rc;) {
        int bf;
        uint64_t lo, cnt;
        if (!load_rows(&insns[i], &bf, &lo, &cnt))
            continue;
        const uint32_t d = tsr_carryin_depth(cfg, bf);
        for (uint64_t r = lo; r < lo + cnt && r < d; r++)
            if (carried[bf][r]) {
                carried[bf][r] = 0;
                need[i] = 1;
            }
    }
    for (int k = 0; k < TSR_CARRY_COUNT && !rc; k++)
        for (uint32_t r = 0; r < tsr_carryin_depth(cfg, k); r++)
            if (carried[k][r]) {
                rc = tsr_err(TSR_EVERIFY, "the piece reads %s row %u, which no instruction of the stream before it "
                             "wrote", tsr_carryin_name(k), r);
                break;
            }
    /* prologue: uop and lut loads, the zeroing of results in progress, acc loads, the load-stage loads (the
     * last pushing to compute), the no-op that waits for it */
    tsr_insn_t *q = NULL;
    size_t np = 0, lastload = NONE;
    if (!rc && !(q = malloc((a + m + 2 + cfg->acc_depth) * sizeof *q)))
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    for (int pass = 0; pass < 4 && !rc; pass++) {
        if (pass == 1)
            rc = zero_rows(cfg, insns, a, need, uops0, junk, q, &np);
        for (size_t i = 0; i < a && !rc && pass != 1; i++) {
            if (!need[i])
                continue;
            const int st = tsr_insn_stage(&insns[i]);
            const int acc = insns[i].mem_type == TSR_MEM_ACC || insns[i].mem_type == TSR_MEM_ACC8;
            if ((pass == 0 && (st != TSR_STAGE_COMPUTE || acc)) || (pass == 2 && (st != TSR_STAGE_COMPUTE || !acc)) ||
                (pass == 3 && st != TSR_STAGE_LOAD))
                continue;
            q[np] = insns[i];
            q[np].pop_prev = q[np].pop_next = q[np].push_prev = q[np].push_next = 0;
            if (st == TSR_STAGE_LOAD)
                lastload = np;
            np++;
        }
    }
    if (!rc && lastload != NONE) {
        q[lastload].push_next = 1;
        memset(&q[np], 0, sizeof q[np]);
        q[np].opcode = TSR_OP_LOAD;
        q[np].mem_type = TSR_MEM_ACC; /* compute stage, no transfer: it carries the pop */
        q[np].pop_prev = 1;
        np++;
    }
    if (!rc) {
        memcpy(q + np, p, m * sizeof *p);
        /* the whole piece must be a stream the verifier accepts (a dropped token may have ordered two accesses) */
        tsr_verify_opts_t vo = {NULL, 0, 0, read, ctx};
        if (!(rc = tsr_verify(cfg, q, np + m, &vo)))
            rc = tsr_carryin_check(cfg, q, np + m, read, ctx);
        if (rc) {
            char why[512];
            snprintf(why, sizeof why, "%s", tsr_errmsg());
            rc = tsr_err(rc, "the piece as a stream: %s", why);
        }
    }
    if (!rc) {
        *out = q;
        *nout = np + m;
        *npro = np;
        q = NULL;
    }
    free(q);
    free(p);
    free(partner);
    free(need);
    free(uops0);
    free(acc_writer);
    free(junk);
    for (int k = 0; k < TSR_CARRY_COUNT; k++)
        free(carried[k]);
    return rc;
}
