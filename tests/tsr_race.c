/*
 * tsr_race: happens-before race check of a stream (see tsr_race.h).
 * Vector clocks: vc[i][s] = how many stage-s instructions are known
 * complete when instruction i starts; i is ordered before j (of another
 * stage) iff vc[j][stage(i)] > pos(i). Clocks follow the token protocol:
 * the k-th pop of a queue takes the k-th push (tokens are FIFO and all
 * pushes to one queue come from one stage, in program order).
 */
#include "tsr_race.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NRES 3          /* on-chip resources tracked across stages: inp, wgt, out */
#define MAX_ITERS 4000000ull /* GEMM/ALU iterations analysed per stream */

typedef struct {
    uint64_t *rd[NRES], *wr[NRES]; /* row bitmaps */
    uint64_t (*dr)[2];             /* DRAM byte ranges read [lo, hi) */
    size_t ndr;
    uint64_t (*dw)[2];             /* DRAM byte ranges written */
    size_t ndw;
} fp_t;

/* Token queue of a flag (tsr_queue_e: 0 load->compute, 1 compute->load, 2 compute->store,
 * 3 store->compute), -1 if the stage has none. */
static int q_of(int stage, int pop, int prev)
{
    if (stage == TSR_STAGE_LOAD)
        return pop ? (prev ? -1 : 1) : (prev ? -1 : 0);
    if (stage == TSR_STAGE_COMPUTE)
        return pop ? (prev ? 0 : 3) : (prev ? 1 : 2);
    return pop ? (prev ? 2 : -1) : (prev ? 3 : -1);
}

static void set_rows(uint64_t *bm, uint64_t lo, uint64_t hi, uint64_t depth)
{
    if (hi > depth)
        hi = depth;
    for (uint64_t r = lo; r < hi; r++)
        bm[r / 64] |= 1ull << (r % 64);
}

static int add_range(uint64_t (**v)[2], size_t *n, uint64_t lo, uint64_t hi)
{
    uint64_t (*nv)[2] = realloc(*v, (*n + 1) * sizeof **v);
    if (!nv)
        return -1;
    nv[*n][0] = lo;
    nv[*n][1] = hi;
    *v = nv;
    (*n)++;
    return 0;
}

/* Bytes of the program's initial image at [addr, addr + n), or NULL. */
static const uint8_t *image(const tsr_gen_prog_t *p, uint64_t addr, uint64_t n)
{
    for (size_t b = 0; b < p->nbufs; b++)
        if (addr >= p->bufs[b].addr && addr - p->bufs[b].addr <= p->bufs[b].size &&
            n <= p->bufs[b].size - (addr - p->bufs[b].addr))
            return p->bufs[b].bytes + (addr - p->bufs[b].addr);
    return NULL;
}

static int overlaps(uint64_t (*a)[2], size_t na, uint64_t (*b)[2], size_t nb, uint64_t *at)
{
    for (size_t i = 0; i < na; i++)
        for (size_t j = 0; j < nb; j++)
            if (a[i][0] < b[j][1] && b[j][0] < a[i][1]) {
                *at = a[i][0] > b[j][0] ? a[i][0] : b[j][0];
                return 1;
            }
    return 0;
}

static int bm_and(const uint64_t *a, const uint64_t *b, size_t words, uint64_t *row)
{
    for (size_t w = 0; w < words; w++)
        if (a[w] & b[w]) {
            *row = w * 64 + (uint64_t)__builtin_ctzll(a[w] & b[w]);
            return 1;
        }
    return 0;
}

int tsr_race_check(const tsr_gen_prog_t *p, const tsr_insn_t *in, size_t n, char *why, size_t nwhy)
{
    const tsr_config_t *c = &p->cfg;
    const uint64_t depth[NRES] = {c->inp_depth, c->wgt_depth, c->acc_depth};
    static const char *const rname[NRES] = {"inp", "wgt", "out"};
    size_t words[NRES];
    int ret = TSR_RACE_NONE;
    uint32_t (*vc)[3] = calloc(n ? n : 1, sizeof *vc);
    uint32_t *pos = calloc(n ? n : 1, sizeof *pos);
    int *done = calloc(n ? n : 1, sizeof *done);
    size_t *order = calloc(n ? n : 1, sizeof *order); /* per stage lists, concatenated */
    size_t *push[4], npush[4] = {0, 0, 0, 0}, popped[4] = {0, 0, 0, 0};
    fp_t *fp = calloc(n ? n : 1, sizeof *fp);
    tsr_uop_t *uop = calloc(c->uop_depth, sizeof *uop);
    for (int q = 0; q < 4; q++)
        push[q] = calloc(n ? n : 1, sizeof(size_t));
    why[0] = '\0';
    if (!vc || !pos || !done || !order || !fp || !uop || !push[0] || !push[1] || !push[2] || !push[3]) {
        snprintf(why, nwhy, "out of memory");
        ret = TSR_RACE_UNKNOWN;
        goto out;
    }
    for (int r = 0; r < NRES; r++)
        words[r] = (size_t)(depth[r] + 63) / 64;
    /* stage lists and push lists */
    size_t start[4] = {0}, cnt[3] = {0};
    for (size_t i = 0; i < n; i++)
        cnt[tsr_insn_stage(&in[i])]++;
    start[1] = cnt[0];
    start[2] = cnt[0] + cnt[1];
    size_t fill[3] = {start[0], start[1], start[2]};
    for (size_t i = 0; i < n; i++) {
        int s = tsr_insn_stage(&in[i]);
        pos[i] = (uint32_t)(fill[s] - start[s]);
        order[fill[s]++] = i;
        int qp = in[i].push_prev ? q_of(s, 0, 1) : -1, qn = in[i].push_next ? q_of(s, 0, 0) : -1;
        if (qp >= 0)
            push[qp][npush[qp]++] = i;
        if (qn >= 0)
            push[qn][npush[qn]++] = i;
    }
    /* vector clocks: advance any stage whose next instruction's tokens exist */
    size_t ptr[3] = {0, 0, 0}, left = n;
    for (int progress = 1; progress && left;) {
        progress = 0;
        for (int s = 0; s < 3; s++)
            while (ptr[s] < cnt[s]) {
                size_t i = order[start[s] + ptr[s]];
                int qs[2] = {in[i].pop_prev ? q_of(s, 1, 1) : -1, in[i].pop_next ? q_of(s, 1, 0) : -1};
                int ok = 1;
                for (int k = 0; k < 2; k++)
                    if (qs[k] >= 0 && (popped[qs[k]] >= npush[qs[k]] || !done[push[qs[k]][popped[qs[k]]]]))
                        ok = 0;
                if (!ok)
                    break;
                if (ptr[s]) {
                    size_t prev = order[start[s] + ptr[s] - 1];
                    memcpy(vc[i], vc[prev], sizeof vc[i]);
                    vc[i][s] = pos[prev] + 1;
                }
                for (int k = 0; k < 2; k++)
                    if (qs[k] >= 0) {
                        size_t from = push[qs[k]][popped[qs[k]]++];
                        int fs = tsr_insn_stage(&in[from]);
                        for (int t = 0; t < 3; t++) {
                            uint32_t v = t == fs ? pos[from] + 1 : vc[from][t];
                            if (v > vc[i][t])
                                vc[i][t] = v;
                        }
                    }
                done[i] = 1;
                ptr[s]++;
                left--;
                progress = 1;
            }
    }
    if (left) {
        snprintf(why, nwhy, "the stream deadlocks");
        ret = TSR_RACE_UNKNOWN;
        goto out;
    }
    /* footprints; the compute stage's uop buffer is followed in its order */
    uint64_t iters = 0;
    for (size_t i = 0; i < n && ret == TSR_RACE_NONE; i++) {
        const tsr_insn_t *x = &in[i];
        fp_t *f = &fp[i];
        for (int r = 0; r < NRES; r++) {
            f->rd[r] = calloc(words[r], sizeof(uint64_t));
            f->wr[r] = calloc(words[r], sizeof(uint64_t));
            if (!f->rd[r] || !f->wr[r]) {
                snprintf(why, nwhy, "out of memory");
                ret = TSR_RACE_UNKNOWN;
            }
        }
        if (ret)
            break;
        if ((x->opcode == TSR_OP_LOAD || x->opcode == TSR_OP_STORE) && x->x_size && x->mem_type < TSR_MEM_COUNT) {
            uint64_t eb = tsr_config_elem_bytes(c, (int)x->mem_type);
            uint64_t row = (uint64_t)x->x_pad0 + x->x_size + x->x_pad1, rows = (uint64_t)x->y_pad0 + x->y_size + x->y_pad1;
            for (uint32_t y = 0; y < x->y_size; y++) {
                uint64_t a = ((uint64_t)x->dram_base + (uint64_t)y * x->x_stride) * eb;
                if (add_range(x->opcode == TSR_OP_LOAD ? &f->dr : &f->dw, x->opcode == TSR_OP_LOAD ? &f->ndr : &f->ndw,
                              a, a + x->x_size * eb))
                    ret = TSR_RACE_UNKNOWN;
            }
            if (x->opcode == TSR_OP_STORE)
                set_rows(f->rd[2], x->sram_base, x->sram_base + (uint64_t)x->y_size * x->x_size, depth[2]);
            else if (x->mem_type == TSR_MEM_INP || x->mem_type == TSR_MEM_WGT)
                set_rows(f->wr[x->mem_type == TSR_MEM_INP ? 0 : 1], x->sram_base, x->sram_base + row * rows,
                         depth[x->mem_type == TSR_MEM_INP ? 0 : 1]);
            else if (x->mem_type == TSR_MEM_UOP) {
                uint64_t r = x->sram_base;
                for (uint64_t yy = 0; yy < rows; yy++)
                    for (uint64_t xx = 0; xx < row; xx++, r++) {
                        int pad = yy < x->y_pad0 || yy >= (uint64_t)x->y_pad0 + x->y_size || xx < x->x_pad0 ||
                                  xx >= (uint64_t)x->x_pad0 + x->x_size;
                        uint64_t raw = 0;
                        if (!pad) {
                            uint64_t a = ((uint64_t)x->dram_base + (yy - x->y_pad0) * x->x_stride + (xx - x->x_pad0)) * eb;
                            const uint8_t *b = image(p, a, eb);
                            for (uint64_t k = 0; b && k < eb && k < 8; k++)
                                raw |= (uint64_t)b[k] << (8 * k);
                        }
                        if (r < c->uop_depth)
                            tsr_uop_decode(c, raw, &uop[r]);
                    }
            }
        } else if ((x->opcode == TSR_OP_GEMM || x->opcode == TSR_OP_ALU) && x->uop_bgn < x->uop_end &&
                   x->uop_end <= c->uop_depth) {
            for (uint32_t a = 0; a < x->iter_out && !ret; a++)
                for (uint32_t b = 0; b < x->iter_in && !ret; b++)
                    for (uint32_t u = x->uop_bgn; u < x->uop_end; u++) {
                        if (++iters > MAX_ITERS) {
                            snprintf(why, nwhy, "more than %llu loop iterations", (unsigned long long)MAX_ITERS);
                            ret = TSR_RACE_UNKNOWN;
                            break;
                        }
                        uint64_t d = uop[u].dst + (uint64_t)a * x->dst_factor_out + (uint64_t)b * x->dst_factor_in;
                        uint64_t sr = uop[u].src + (uint64_t)a * x->src_factor_out + (uint64_t)b * x->src_factor_in;
                        uint64_t w = uop[u].wgt + (uint64_t)a * x->wgt_factor_out + (uint64_t)b * x->wgt_factor_in;
                        set_rows(f->wr[2], d, d + 1, depth[2]);
                        if (x->opcode == TSR_OP_GEMM && !x->reset && x->depthwise) {
                            /* depthwise mode: K input rows, and w names a tap group of row w >> bits */
                            set_rows(f->rd[0], sr, sr + (uint64_t)c->depthwise, depth[0]);
                            w >>= c->dw_group_bits;
                            set_rows(f->rd[1], w, w + 1, depth[1]);
                        } else if (x->opcode == TSR_OP_GEMM && !x->reset) {
                            set_rows(f->rd[0], sr, sr + 1, depth[0]);
                            set_rows(f->rd[1], w, w + 1, depth[1]);
                        }
                    }
        }
    }
    /* a uop LOAD reading DRAM that some STORE writes: its contents are not the image's */
    for (size_t i = 0; i < n && !ret; i++) {
        if (in[i].opcode != TSR_OP_LOAD || in[i].mem_type != TSR_MEM_UOP)
            continue;
        for (size_t j = 0; j < n; j++) {
            uint64_t at;
            if (fp[j].ndw && overlaps(fp[i].dr, fp[i].ndr, fp[j].dw, fp[j].ndw, &at)) {
                snprintf(why, nwhy, "uop LOAD #%zu reads DRAM 0x%llx that STORE #%zu writes", i,
                         (unsigned long long)at, j);
                ret = TSR_RACE_UNKNOWN;
                break;
            }
        }
    }
    /* conflicting pairs of different stages with no order between them */
    for (size_t i = 0; i < n && !ret; i++)
        for (size_t j = i + 1; j < n && !ret; j++) {
            int si = tsr_insn_stage(&in[i]), sj = tsr_insn_stage(&in[j]);
            if (si == sj || vc[j][si] > pos[i] || vc[i][sj] > pos[j])
                continue;
            uint64_t at;
            for (int r = 0; r < NRES && !ret; r++)
                if (bm_and(fp[i].wr[r], fp[j].rd[r], words[r], &at) || bm_and(fp[i].wr[r], fp[j].wr[r], words[r], &at) ||
                    bm_and(fp[i].rd[r], fp[j].wr[r], words[r], &at)) {
                    snprintf(why, nwhy, "#%zu and #%zu both use %s row %llu, unordered", i, j, rname[r],
                             (unsigned long long)at);
                    ret = TSR_RACE_FOUND;
                }
            if (!ret && (overlaps(fp[i].dw, fp[i].ndw, fp[j].dr, fp[j].ndr, &at) ||
                         overlaps(fp[i].dw, fp[i].ndw, fp[j].dw, fp[j].ndw, &at) ||
                         overlaps(fp[i].dr, fp[i].ndr, fp[j].dw, fp[j].ndw, &at))) {
                snprintf(why, nwhy, "#%zu and #%zu both use DRAM byte 0x%llx, unordered", i, j, (unsigned long long)at);
                ret = TSR_RACE_FOUND;
            }
        }
out:
    for (size_t i = 0; fp && i < n; i++) {
        for (int r = 0; r < NRES; r++) {
            free(fp[i].rd[r]);
            free(fp[i].wr[r]);
        }
        free(fp[i].dr);
        free(fp[i].dw);
    }
    for (int q = 0; q < 4; q++)
        free(push[q]);
    free(fp);
    free(uop);
    free(vc);
    free(pos);
    free(done);
    free(order);
    return ret;
}
