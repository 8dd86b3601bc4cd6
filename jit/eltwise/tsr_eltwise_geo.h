/*
 * tsr_eltwise_geo: what the add/clip units share (private to jit/eltwise
 * and jit/tsr_eltwise.c): the geometry of a plan (geo_t: row blocking,
 * the per-row ALU steps, the fast power-of-two add path, the tiling and
 * on-chip halves), the uop and buffer numbering every unit reads, and
 * whether a tiling fits. The units: tsr_eltwise_geo (geometry),
 * tsr_eltwise_emit (stream and uops), tsr_eltwise_tiling (cost model and
 * tile-size search), tsr_eltwise.c (checks, packing, plan, run).
 */
#ifndef TSR_ELTWISE_GEO_H
#define TSR_ELTWISE_GEO_H

#include <stdint.h>

#include "tsr_eltwise.h"
#include "tsr_stream.h"

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int64_t cdiv64(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline const char *tsr_eltwise_op_name(tsr_eltwise_kind_e kind)
{
    return kind == TSR_ELTWISE_ADD ? "add" : "clip";
}

enum { GRP_A = 0, GRP_B = 1, GRP_AB = 2 };
enum { SRC_IMM = -1, SRC_B = -2 }; /* else: constant row index */

/* One ALU instruction per tile: op on the rows of group grp. */
typedef struct {
    uint32_t op;
    int grp;
    int src;
    int32_t imm;
} step_t;

typedef struct {
    const tsr_config_t *c;
    tsr_eltwise_kind_e kind;
    const tsr_add_params_t *pa;
    const tsr_clip_params_t *pc;
    int inputs, kr, ki, kw, nconst, lanes;
    int linear;           /* add: both input paths are exact power-of-two scalings (one acc row group) */
    int groups;           /* accumulator row groups per tile: 2 (add: a and b) or 1 */
    int wsets;            /* identity weight blocks: 1, or 2 (linear add: one per input) */
    int64_t count;
    uint32_t rows, inp_rows;
    int32_t wv[2];        /* identity weight value per weight block */
    step_t init[2];       /* mov initialisations before the GEMMs */
    int ninit;
    step_t steps[16];     /* ALU steps after the GEMMs */
    int nsteps;
    int ops_per_row;
    /* tiling */
    int T, TI, nbuf, tiles, acc_half, inp_half;
    uint32_t x_el[2], y_el, w_el, c_el, uop_el;
} geo_t;

static inline int grp_rows(int grp) { return grp == GRP_AB ? 2 : 1; }

/* uops: per half p, the GEMM kernels (KW per input), then the ALU uops. */
enum { U_A_IMM = 0, U_B_IMM, U_A_B, U_CONST }; /* U_CONST + k: A rows, const k; + nconst + k: B rows */
static inline int uops_per_half(const geo_t *g) { return g->inputs * g->kw + U_CONST + 2 * g->nconst; }
static inline int wgt_rows(const geo_t *g) { return g->wsets * g->kw; }
static inline int n_uops(const geo_t *g) { return g->nbuf * uops_per_half(g); }
static inline uint32_t gemm_uop(const geo_t *g, int p, int j) { return (uint32_t)(p * uops_per_half(g) + j * g->kw); }
static inline uint32_t alu_uop(const geo_t *g, int p, int grp, int src)
{
    int k;
    if (src == SRC_IMM)
        k = grp == GRP_B ? U_B_IMM : U_A_IMM;
    else if (src == SRC_B)
        k = U_A_B;
    else
        k = U_CONST + (grp == GRP_B ? g->nconst : 0) + src;
    return (uint32_t)(p * uops_per_half(g) + g->inputs * g->kw + k);
}
static inline uint32_t a_base(const geo_t *g, int p) { return (uint32_t)(g->nconst + p * g->acc_half); }
static inline uint32_t inp_base(const geo_t *g, int p, int j) { return (uint32_t)(p * g->inp_half + j * g->TI); }

/* The geometry of add (pa) or clip (pc) on config c, tiling not chosen
 * yet. allow_linear: 0 forces the general add sequence (when the fast
 * path's extra weight block does not fit). */
int tsr_eltwise_geo_init(const tsr_config_t *c, tsr_eltwise_kind_e kind, const tsr_add_params_t *pa,
                         const tsr_clip_params_t *pc, int allow_linear, geo_t *g);
/* Tile size T (accumulator rows per input) and buffer count nbuf into g. */
void tsr_eltwise_set_tiling(geo_t *g, int T, int nbuf);
/* Does that tiling fit the buffers, the uop buffer and the fields? */
int tsr_eltwise_tiling_fits(const geo_t *g0, int T, int nbuf);
/* Build identity of the geometry (part of every kernel-cache signature). */
const char *tsr_eltwise_geo_id(void);

#endif
