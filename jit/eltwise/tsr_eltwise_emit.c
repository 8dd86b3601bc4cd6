/*
 * tsr_eltwise_emit: the add/clip stream and uops (tsr_eltwise_emit.h; the
 * values and per-row work are described in tsr_eltwise.h).
 *
 * On-chip layout (p = t % NBUF, T = tile rows per input, TI = inp rows per
 * input per tile, AH / IH = rows of one accumulator / inp half):
 *   acc  rows [0, NCONST)              constants (add: M_a, M_b, M_o; every lane)
 *        NCONST + p*AH + [0, T)        tile rows of a (clip: x); results, stored from here
 *        NCONST + p*AH + T + [0, T)    tile rows of b (add)
 *   inp  p*IH + j*TI + [0, TI)         packed rows of input j of the tile
 *   wgt  [0, KW)                       the identity blocks (loaded once)
 * Stream: LOAD uop and (add) LOAD acc constants in compute, LOAD wgt in the
 * load stage, then per tile: LOAD inp per input (first pops "inp half
 * free" from tile t-NBUF's GEMMs, last pushes "loaded"); ALU mov init (pops
 * "out half drained" from tile t-NBUF's STORE), GEMM per input (first pops
 * "loaded", last pushes "inp half free" unless no later tile needs it), the
 * ALU steps (the last compute instruction pushes "done"); STORE (pops
 * "done", pushes "drained" for tile t+NBUF, and on the last tile for
 * FINISH, which pops it).
 *
 */
#include "tsr_eltwise_emit.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_jitutil.h"

const char *tsr_eltwise_emit_id(void) { return "eltwise emit, built " __DATE__ " " __TIME__; }

/* --------------------------------------------------------------- stream */

static tsr_insn_t *emit_alu(tsr_stream_t *b, const geo_t *g, int p, const step_t *s, int R)
{
    const uint32_t u = alu_uop(g, p, s->grp, s->src);
    tsr_insn_t *in = tsr_stream_alu(b, s->op, u, u + 1);
    tsr_stream_loops(in, (uint32_t)grp_rows(s->grp), s->grp == GRP_AB ? (uint32_t)g->T : 0, 0, (uint32_t)R,
                     R > 1, s->src == SRC_B && R > 1);
    in->use_imm = s->src == SRC_IMM;
    in->imm = s->src == SRC_IMM ? s->imm : 0;
    return in;
}

void tsr_eltwise_build(const geo_t *g, tsr_stream_t *b)
{
    const int NB = g->nbuf;
    tsr_insn_t *in;
    tsr_stream_uops(b, g->uop_el, (uint32_t)n_uops(g));
    if (g->nconst)
        tsr_stream_load(b, TSR_MEM_ACC, 0, g->c_el, 1, (uint32_t)g->nconst, (uint32_t)g->nconst);
    tsr_stream_load(b, TSR_MEM_WGT, 0, g->w_el, 1, (uint32_t)wgt_rows(g), (uint32_t)wgt_rows(g));
    for (int t = 0; t < g->tiles; t++) {
        const int p = t % NB;
        const int R = imin(g->T, (int)(g->rows - (uint32_t)t * (uint32_t)g->T));
        const int RI = g->kr > 1 ? R / g->kr : R * g->ki;
        /* ---- load: into half p once tile t-NB's GEMMs have read it ---- */
        if (t >= NB)
            tsr_stream_wait(b, TSR_Q_CMP2LD);
        for (int j = 0; j < g->inputs; j++)
            tsr_stream_load(b, TSR_MEM_INP, inp_base(g, p, j), g->x_el[j] + (uint32_t)t * (uint32_t)g->TI, 1,
                            (uint32_t)RI, (uint32_t)RI);
        tsr_stream_signal(b, TSR_Q_LD2CMP);
        /* ---- compute: the init ALU waits for tile t-NB's STORE ---- */
        if (t >= NB)
            tsr_stream_wait(b, TSR_Q_ST2CMP);
        for (int i = 0; i < g->ninit; i++)
            emit_alu(b, g, p, &g->init[i], R);
        tsr_stream_wait(b, TSR_Q_LD2CMP);
        for (int j = 0; j < g->inputs; j++) {
            in = tsr_stream_gemm(b, gemm_uop(g, p, j), gemm_uop(g, p, j) + (uint32_t)g->kw, 0);
            if (g->kr > 1)
                tsr_stream_loops(in, 1, 0, 0, (uint32_t)RI, RI > 1 ? (uint32_t)g->kr : 0, RI > 1);
            else
                tsr_stream_loops(in, 1, 0, 0, (uint32_t)R, R > 1, R > 1 ? (uint32_t)g->ki : 0);
        }
        if (t < g->tiles - NB)
            tsr_stream_signal(b, TSR_Q_CMP2LD);
        for (int i = 0; i < g->nsteps; i++)
            emit_alu(b, g, p, &g->steps[i], R);
        tsr_stream_signal(b, TSR_Q_CMP2ST); /* the last compute instruction of the tile */
        /* ---- store ---- */
        tsr_stream_wait(b, TSR_Q_CMP2ST);
        tsr_stream_store(b, a_base(g, p), g->y_el + (uint32_t)t * (uint32_t)g->T, 1, (uint32_t)R, (uint32_t)R);
        if (t < g->tiles - NB || t == g->tiles - 1)
            tsr_stream_signal(b, TSR_Q_ST2CMP);
    }
}

/* Encode g's uops into a host buffer (*out: n_uops(g) * uop_bytes, malloc'ed). */
int tsr_eltwise_encode_uops(const geo_t *g, uint8_t **out)
{
    size_t n = (size_t)n_uops(g);
    tsr_uop_t *u = calloc(n, sizeof *u);
    *out = NULL;
    if (!u)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int p = 0; p < g->nbuf; p++) {
        for (int j = 0; j < g->inputs; j++)
            for (int k = 0; k < g->kw; k++) {
                tsr_uop_t *x = &u[gemm_uop(g, p, j) + (uint32_t)k];
                const uint32_t grp = g->groups > 1 ? (uint32_t)(j * g->T) : 0; /* linear add: both into a's rows */
                if (g->kr > 1) {
                    x->dst = a_base(g, p) + grp + (uint32_t)k;
                    x->src = inp_base(g, p, j);
                } else {
                    x->dst = a_base(g, p) + grp;
                    x->src = inp_base(g, p, j) + (uint32_t)k;
                }
                x->wgt = (uint32_t)((g->wsets > 1 ? j * g->kw : 0) + k);
            }
        const uint32_t A = a_base(g, p), B = A + (uint32_t)g->T;
        u[alu_uop(g, p, GRP_A, SRC_IMM)] = (tsr_uop_t){A, 0, 0};
        u[alu_uop(g, p, GRP_B, SRC_IMM)] = (tsr_uop_t){g->groups > 1 ? B : A, 0, 0};
        u[alu_uop(g, p, GRP_A, SRC_B)] = (tsr_uop_t){A, g->groups > 1 ? B : A, 0};
        for (int k = 0; k < g->nconst; k++) {
            u[alu_uop(g, p, GRP_A, k)] = (tsr_uop_t){A, (uint32_t)k, 0};
            u[alu_uop(g, p, GRP_B, k)] = (tsr_uop_t){g->groups > 1 ? B : A, (uint32_t)k, 0};
        }
    }
    int rc = tsr_jit_pack_uops(g->c, u, n, out);
    free(u);
    return rc;
}

