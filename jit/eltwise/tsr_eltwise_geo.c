/* tsr_eltwise_geo: the add/clip geometry (tsr_eltwise_geo.h). */
#include "tsr_eltwise_geo.h"

#include <string.h>

#include "tsr_dtype.h"
#include "tsr_error.h"

const char *tsr_eltwise_geo_id(void) { return "eltwise geometry, built " __DATE__ " " __TIME__; }

/* Is MBQM((x - zp) * 2^ls, M, S) exactly (x - zp) * 2^j for every input?
 * Yes when M = 2^m (m <= 30) and j = ls + m + S - 31 >= 0: the product
 * (x - zp) * 2^(ls + m) is a multiple of 2^31, so SRDHM divides exactly
 * (the nudge never crosses a multiple), and the quotient is a multiple of
 * 2^-S, so RDBPOT divides exactly too. */
static int linear_path(int ls, int32_t m, int s, int *j)
{
    if (m <= 0 || (m & (m - 1)))
        return 0;
    int lg = 0;
    while ((1 << lg) != m)
        lg++;
    *j = ls + lg + s - 31;
    return *j >= 0;
}

/* allow_linear: 0 forces the general add sequence (when the fast path's
 * extra weight block does not fit). */
int tsr_eltwise_geo_init(const tsr_config_t *c, tsr_eltwise_kind_e kind, const tsr_add_params_t *pa,
                    const tsr_clip_params_t *pc, int allow_linear, geo_t *g)
{
    const char *op = tsr_eltwise_op_name(kind);
    memset(g, 0, sizeof *g);
    int rc = kind == TSR_ELTWISE_ADD ? tsr_add_check(pa, &g->count) : tsr_clip_check(pc, &g->count);
    if (rc)
        return rc;
    if (c->inp_width != 8 || c->wgt_width != 8 || c->acc_width != 32)
        return tsr_err(TSR_EINVAL, "%s: needs int8 inputs and weights and int32 accumulators (config has "
                       "int%d/int%d/int%d)", op, c->inp_width, c->wgt_width, c->acc_width);
    g->c = c;
    g->kind = kind;
    g->pa = pa;
    g->pc = pc;
    g->inputs = kind == TSR_ELTWISE_ADD ? 2 : 1;
    g->kr = c->block_in >= c->block_out ? c->block_in / c->block_out : 1;
    g->ki = c->block_in < c->block_out ? c->block_out / c->block_in : 1;
    g->kw = g->kr > g->ki ? g->kr : g->ki;
    g->groups = 1;
    g->wsets = 1;
    g->lanes = c->batch * c->block_out;
    g->nconst = kind == TSR_ELTWISE_ADD ? TSR_ADD_NCONST : 0; /* M_a, M_b, M_o, the output's rqfin row */
    g->rows = (uint32_t)(cdiv64(cdiv64(g->count, g->lanes), g->kr) * g->kr);
    g->inp_rows = g->kr > 1 ? g->rows / (uint32_t)g->kr : g->rows * (uint32_t)g->ki;

    step_t *s = g->steps;
    int n = 0;
    int ja, jb;
    if (kind == TSR_ELTWISE_ADD && allow_linear && linear_path(pa->left_shift, pa->mult_a, pa->shift_a, &ja) &&
        linear_path(pa->left_shift, pa->mult_b, pa->shift_b, &jb) && ja - jb <= 6 && jb - ja <= 6) {
        /* raw = (da * 2^(ja-jm) + db * 2^(jb-jm)) << jm, jm = min(ja, jb): both
         * GEMMs accumulate into one row group with weights 2^(j-jm+f), the
         * fold f taking up to 6 - |ja - jb| of the final left shift */
        int jm = ja < jb ? ja : jb, d = ja > jb ? ja - jb : jb - ja, f = 6 - d < jm ? 6 - d : jm;
        g->linear = 1;
        g->wv[0] = 1 << (ja - jm + f);
        g->wv[1] = 1 << (jb - jm + f);
        g->wsets = g->wv[0] == g->wv[1] ? 1 : 2;
        int32_t init = -(pa->a.zp - tsr_dt_off(pa->a.dtype)) * g->wv[0] -
                       (pa->b.zp - tsr_dt_off(pa->b.dtype)) * g->wv[1];
        g->init[g->ninit++] = (step_t){TSR_ALU_MOV, GRP_A, SRC_IMM, init};
        if (jm > f)
            s[n++] = (step_t){TSR_ALU_SHR, GRP_A, SRC_IMM, -(jm - f)};
    } else if (kind == TSR_ELTWISE_ADD) {
        int ls = pa->left_shift, k = ls < 6 ? ls : 6;
        g->groups = 2;
        g->wv[0] = 1 << k;
        int32_t ia = -(pa->a.zp - tsr_dt_off(pa->a.dtype)) * g->wv[0],
                ib = -(pa->b.zp - tsr_dt_off(pa->b.dtype)) * g->wv[0];
        if (ia == ib)
            g->init[g->ninit++] = (step_t){TSR_ALU_MOV, GRP_AB, SRC_IMM, ia};
        else {
            g->init[g->ninit++] = (step_t){TSR_ALU_MOV, GRP_A, SRC_IMM, ia};
            g->init[g->ninit++] = (step_t){TSR_ALU_MOV, GRP_B, SRC_IMM, ib};
        }
        if (ls > k)
            s[n++] = (step_t){TSR_ALU_SHR, GRP_AB, SRC_IMM, -(ls - k)};
        s[n++] = (step_t){TSR_ALU_MULHR, GRP_A, 0, 0};
        s[n++] = (step_t){TSR_ALU_MULHR, GRP_B, 1, 0};
        if (pa->shift_a < 0 && pa->shift_a == pa->shift_b)
            s[n++] = (step_t){TSR_ALU_RSHR, GRP_AB, SRC_IMM, -pa->shift_a};
        else {
            if (pa->shift_a < 0)
                s[n++] = (step_t){TSR_ALU_RSHR, GRP_A, SRC_IMM, -pa->shift_a};
            if (pa->shift_b < 0)
                s[n++] = (step_t){TSR_ALU_RSHR, GRP_B, SRC_IMM, -pa->shift_b};
        }
        s[n++] = (step_t){TSR_ALU_ADD, GRP_A, SRC_B, 0};
    }
    if (kind == TSR_ELTWISE_ADD) {
        if (pa->bias_once) /* (round_once: the constant before the one rounding) */
            s[n++] = (step_t){TSR_ALU_ADD, GRP_A, SRC_IMM, pa->bias_once};
        if (pa->shift_out > 0)
            s[n++] = (step_t){TSR_ALU_SHR, GRP_A, SRC_IMM, -pa->shift_out};
        if (!pa->round_once) /* (round_once: rqfin's shift divides by 2^30 / 2^31 too) */
            s[n++] = (step_t){TSR_ALU_MULHR, GRP_A, 2, 0};
        /* RDBPOT by -S_o, + y_zp, clamp: one rqfin with constant row 3
         * (operators.md: exactly rshr, max, min, add) */
        s[n++] = (step_t){TSR_ALU_RQFIN, GRP_A, 3, 0};
    } else {
        g->wv[0] = 1;
        g->init[g->ninit++] = (step_t){TSR_ALU_MOV, GRP_A, SRC_IMM, tsr_dt_off(pc->x.dtype)};
        if (pc->lo > tsr_dt_min(pc->x.dtype))
            s[n++] = (step_t){TSR_ALU_MAX, GRP_A, SRC_IMM, pc->lo};
        if (pc->hi < tsr_dt_max(pc->x.dtype))
            s[n++] = (step_t){TSR_ALU_MIN, GRP_A, SRC_IMM, pc->hi};
    }
    g->nsteps = n;
    int ops = g->inputs * g->ki; /* GEMM ops per accumulator row */
    for (int i = 0; i < g->ninit; i++)
        ops += grp_rows(g->init[i].grp);
    for (int i = 0; i < n; i++)
        ops += grp_rows(s[i].grp);
    g->ops_per_row = ops;
    return TSR_OK;
}

void tsr_eltwise_set_tiling(geo_t *g, int T, int nbuf)
{
    g->T = T;
    g->nbuf = nbuf;
    g->TI = g->kr > 1 ? T / g->kr : T * g->ki;
    g->tiles = (int)cdiv64(g->rows, T);
    g->acc_half = ((int)g->c->acc_depth - g->nconst) / nbuf;
    g->inp_half = (int)g->c->inp_depth / nbuf;
}

int tsr_eltwise_tiling_fits(const geo_t *g0, int T, int nbuf)
{
    geo_t g = *g0;
    tsr_eltwise_set_tiling(&g, T, nbuf);
    const tsr_config_t *c = g.c;
    const long loop_max = (1L << TSR_LOOP_BITS) - 1;
    if ((long)g.groups * T > g.acc_half || (long)g.inputs * g.TI > g.inp_half)
        return 0;
    if (T > loop_max || g.TI > loop_max)
        return 0;
    if (wgt_rows(&g) > (int)c->wgt_depth || n_uops(&g) > (long)c->uop_depth)
        return 0;
    if (g.kr > tsr_isa_field_max(c, TSR_OP_GEMM, "dst_factor_in") ||
        g.ki > tsr_isa_field_max(c, TSR_OP_GEMM, "src_factor_in"))
        return 0;
    if (g.groups > 1 && T > tsr_isa_field_max(c, TSR_OP_ALU, "dst_factor_out"))
        return 0;
    return 1;
}

