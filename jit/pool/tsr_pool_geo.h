/*
 * tsr_pool_geo: what the pool units share (private to jit/pool and
 * jit/tsr_pool.c): the geometry of a plan (geo_t: blocks, window counts
 * and the proved division, tiling, on-chip layout, uop offsets), the
 * tiling it is built with, the stream being emitted (ibuf_t: the stream
 * builder plus the counts the cost model reads), and the geometry
 * functions every unit reads: row tiles, accumulator regions, uop kernel
 * sets, whether a tiling fits. The units: tsr_pool_geo (geometry and the
 * division proof), tsr_pool_emit (stream and uops), tsr_pool_tiling (cost
 * model and tiling search), tsr_pool.c (checks, packing, plan, run).
 */
#ifndef TSR_POOL_GEO_H
#define TSR_POOL_GEO_H

#include <stdint.h>

#include "tsr_jitutil.h"
#include "tsr_pool.h"
#include "tsr_stream.h"

#define OP "pool"

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int cdiv(int a, int b) { return (a + b - 1) / b; }

static inline const char *tsr_pool_kind_name(int k)
{
    return k == TSR_POOL_MAX ? "maxpool" : k == TSR_POOL_AVG ? "avgpool" : "global_avgpool";
}

/* The stream builder plus the counters of the cost model (tsr_pool_cost). */
typedef struct {
    tsr_stream_t s;   /* the stream (bytes: DRAM bytes moved by LOAD/STORE) */
    uint64_t sbytes;  /* of which STORE */
    uint64_t ops;     /* tensor ops plus compute-stage load rows (cycle estimate of compute) */
    uint64_t gops;    /* of which GEMM ops (resets included) */
} ibuf_t;

typedef struct {
    int toh, tco; /* output rows, channel blocks per tile */
    int tow;      /* output columns per tile (OW or fewer; the last column tile is
                     shifted left to stay TOW wide) */
    int chunk;    /* global: elements of the flattened plane per step */
    int sep;      /* 1: separable (copy/row-sum region X, then vertical ALU), 0: direct GEMM window sums */
    int nbi, nba; /* input / output half rotation: 2 or 1 */
} tiling_t;

/* Everything the emitter needs, derived once per plan. */
typedef struct {
    const tsr_config_t *c;
    const tsr_pool_params_t *p;
    int kind, glob, oh, ow, nb, cb, kk, off, pad_value;
    int div_kind, div_k, div_e;  /* see tsr_pool_plan_t */
    int y_off;                   /* subtracted from the averages (128: uint8 written re-centred for a device tensor) */
    int ncounts;                 /* distinct window counts */
    int *counts;                 /* [ncounts] (owned) */
    int32_t *mults;              /* [ncounts] multipliers (div_kind 2) (owned) */
    int *vcount, *hcount;        /* [oh], [ow] valid rows / columns per output (cip 0) (owned) */
    int use_map, nconst;
    tiling_t t;
    int rows_in, wr, n_rt, n_wt, n_ct, tiles, chunks, steps, kern_sets;
    int xw;        /* row length of the X region (separable): WR (max), TOW (avg) */
    int inp_half;  /* input rows per input half */
    int region;    /* acc rows per region (acc_depth / NBA: with two, one accumulator bank each) */
    int map_off, x_off, o_off, region_used; /* offsets of MAP, X, O inside a region; rows used */
    /* uop offsets */
    int u_xinit, u_copy, u_h, u_vmov, u_vmax, u_init, u_sum, u_imm, u_c0, u_mul, nuops;
    uint32_t x_el, y_el, c_el, w_el, uop_el;
} geo_t;

typedef tsr_rowtile_t rowgeo_t; /* row geometry of a row tile (tsr_jitutil.h) */

/* Region pa of the accumulator buffer: constants, MAP, X, O. */
static inline int reg_base(const geo_t *g, int pa) { return pa * g->region; }
static inline int map_base(const geo_t *g, int pa) { return reg_base(g, pa) + g->map_off; }
static inline int x_base(const geo_t *g, int pa) { return reg_base(g, pa) + g->x_off; }
static inline int o_base(const geo_t *g, int pa) { return reg_base(g, pa) + g->o_off; }

/* GEMM uop set of input half q and region pa. */
static inline int kern_set(const geo_t *g, int q, int pa)
{
    return g->kern_sets == g->t.nbi * g->t.nba ? q * g->t.nba + pa : pa;
}

/* Geometry of p on config c (validated; window counts and the division
 * proved); TSR_EINVAL naming the problem. Free with tsr_pool_geo_free. */
int tsr_pool_geo_init(const tsr_config_t *c, const tsr_pool_params_t *p, geo_t *g);
void tsr_pool_geo_free(geo_t *g);
/* Set tiling t into g (derived sizes, region offsets, uop offsets). */
void tsr_pool_set_tiling(geo_t *g, const tiling_t *t);
/* Does tiling t fit the buffers, the uop buffer and the loop fields? */
int tsr_pool_tiling_fits(const geo_t *g0, const tiling_t *t);
/* Lay out the uop buffer (offsets into g; the uops into out if not NULL); returns their number. */
int tsr_pool_layout_uops(geo_t *g, tsr_uop_t *out);
/* Row geometry of row tile rt. */
void tsr_pool_row_tile(const geo_t *g, int rt, rowgeo_t *r);
/* Is every output row of row tile rt a full-height window (map reuse)? */
int tsr_pool_rows_interior(const geo_t *g, int rt);
/* Count index of output (oy, ox) (division kind 2). */
int tsr_pool_count_index(const geo_t *g, int oy, int ox);
/* Build identity of the geometry (part of every kernel-cache signature). */
const char *tsr_pool_geo_id(void);

#endif
