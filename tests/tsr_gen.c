/*
 * tsr_gen: random program generator and differential harness (see
 * tsr_gen.h).
 *
 * Race freedom by construction. The on-chip buffers that two stages share
 * are inp and wgt (written by load, read by compute) and out (written by
 * compute's GEMM/ALU as the mirror of acc, read by store). Their used rows
 * are split into regions, and every region has exactly one owner stage at a
 * time. A stage touches a region only while it owns it, and hands it over
 * only as the payload of a token it pushes (after the pushing instruction's
 * own accesses); the receiver owns it from the instruction that pops that
 * token. Tokens are FIFO, so the generator knows each token's payload. acc
 * and uop rows are touched by compute alone and need no ownership (LOADs of
 * acc/acc8 do not write out, so they may target rows the store stage owns).
 *
 * Program-order token accounting: every pop consumes a token pushed earlier
 * in program order and no queue ever holds more than DEP_QUEUE_DEPTH tokens
 * in program order, so running the stream one instruction at a time in
 * program order is a legal schedule; the pipe is a determinate network, so
 * no schedule deadlocks, and ownership makes every schedule's result equal
 * the in-order result that the reference machine computes.
 *
 * Every read of an on-chip row is of a row this program has written (loads,
 * including their zero padding, GEMM/ALU writes), so results never depend on
 * power-on SRAM contents, which an RTL backend does not zero.
 */
#include "tsr_gen.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_asm.h"
#include "tsr_error.h"
#include "tsr_pipe.h"
#include "tsr_ref.h"
#include "tsr_util.h"
#include "tsr_verify.h"

/* ------------------------------------------------------------------ rng */

typedef struct {
    uint64_t s;
} rng_t;

static uint64_t rnext(rng_t *r)
{
    return tsr_splitmix64(&r->s);
}

static uint32_t rbelow(rng_t *r, uint32_t n) { return n ? (uint32_t)(rnext(r) % n) : 0; }
/* Uniform in [lo, hi] (lo if hi < lo). */
static uint32_t rrange(rng_t *r, uint32_t lo, uint32_t hi)
{
    return hi <= lo ? lo : lo + rbelow(r, hi - lo + 1);
}
static int chance(rng_t *r, uint32_t pct) { return rbelow(r, 100) < pct; }
static uint32_t umin(uint32_t a, uint32_t b) { return a < b ? a : b; }
static uint32_t umax(uint32_t a, uint32_t b) { return a > b ? a : b; }

/* ------------------------------------------------------------ state */

enum { K_INP, K_WGT, K_ACC, K_COUNT };
enum { O_LOAD, O_COMPUTE, O_STORE, O_TRANSIT };
enum { B_INP, B_WGT, B_ACC, B_ACC8, B_OUT0, B_OUT1, B_UOP, B_COUNT };
/* The activation tables' buffer (ACT_LUT > 0 only): index B_COUNT, placed in
 * DRAM below the uop buffer (which grows), so the other buffers keep their
 * indices and addresses. */
enum { B_LUT = B_COUNT };

#define MAX_REG 6   /* regions per kind: payload masks fit 32 bits */
#define MAX_KERN 32 /* remembered uop kernels */
#define MAX_KUOPS 8 /* uops per new kernel */
#define QRING 256   /* > max DEP_QUEUE_DEPTH (255) */

typedef struct {
    int kind;
    uint32_t lo, hi; /* rows [lo, hi) */
    int owner;       /* O_* */
    int touched;     /* accessed by the owner since it got the region */
} region_t;

typedef struct {
    rng_t r;
    const tsr_config_t *c;
    tsr_gen_opts_t o;
    tsr_insn_t *ins;
    size_t n, cap;
    region_t reg[K_COUNT * MAX_REG];
    int nreg;
    int16_t *reg_of[K_COUNT];   /* row -> region id, -1 outside every region */
    uint32_t depth[K_COUNT];
    uint8_t *init[K_COUNT];     /* row written by this program */
    uint8_t *out_init;          /* out row written (by GEMM/ALU) */
    uint8_t *uop_init;
    uint8_t lut_init[8];        /* activation table loaded by this program (ACT_LUT <= 8) */
    tsr_uop_t *uop_sh;          /* uop buffer contents */
    struct {
        uint32_t bgn, end;
    } kern[MAX_KERN];           /* loaded kernels, still intact */
    int nkern;
    uint32_t qn[TSR_Q_COUNT], qhead[TSR_Q_COUNT];
    uint32_t qpay[TSR_Q_COUNT][QRING];
    uint32_t w_stage[TSR_STAGE_COUNT]; /* per-program stage weights */
    uint32_t p_pop[TSR_Q_COUNT], p_push[TSR_Q_COUNT];
    uint32_t max_ops;
    tsr_gen_buf_t *bufs;        /* the program's buffers (B_* order) */
    uint64_t nelem[B_COUNT + 1]; /* elements per buffer (B_LUT last) */
    uint64_t ebase[B_COUNT + 1]; /* element index of each buffer start */
    uint64_t uop_used, uop_cap; /* uop DRAM elements written / allocated */
    int err;                    /* sticky TSR_ENOMEM */
} gen_t;

static uint32_t field_max(int idx_bits) { return (1u << (idx_bits > 0 ? idx_bits : 1)) - 1; }

static tsr_insn_t *push_insn(gen_t *g, const tsr_insn_t *in)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 256;
        tsr_insn_t *p = realloc(g->ins, cap * sizeof *p);
        if (!p) {
            g->err = TSR_ENOMEM;
            return NULL;
        }
        g->ins = p;
        g->cap = cap;
    }
    g->ins[g->n] = *in;
    return &g->ins[g->n++];
}

/* --------------------------------------------------- tokens, ownership */

static void q_push(gen_t *g, int q, uint32_t payload)
{
    g->qpay[q][(g->qhead[q] + g->qn[q]) % QRING] = payload;
    g->qn[q]++;
}

static uint32_t q_pop(gen_t *g, int q)
{
    uint32_t p = g->qpay[q][g->qhead[q]];
    g->qhead[q] = (g->qhead[q] + 1) % QRING;
    g->qn[q]--;
    return p;
}

static int q_room(const gen_t *g, int q) { return g->qn[q] < (uint32_t)g->c->dep_queue_depth; }

static void gain(gen_t *g, uint32_t mask, int owner)
{
    for (int i = 0; i < g->nreg; i++)
        if (mask >> i & 1) {
            g->reg[i].owner = owner;
            g->reg[i].touched = 0;
        }
}

/* Maybe push a token on queue q (if it has room, with probability pct)
 * whose payload is a random subset of the regions `owner` holds among kinds
 * in kmask: touched ones with probability pt, others with pu. Tokens that
 * hand over nothing are pure synchronisation; they are kept rarer so that
 * regions do not queue up behind them. Returns 1 if pushed. */
static int release(gen_t *g, int q, uint32_t pct, int owner, unsigned kmask, uint32_t pt, uint32_t pu)
{
    uint32_t m = 0, held = 0;
    if (!q_room(g, q) || !chance(&g->r, pct))
        return 0;
    for (int i = 0; i < g->nreg; i++) {
        const region_t *rg = &g->reg[i];
        if (rg->owner != owner || !(kmask >> rg->kind & 1))
            continue;
        held |= 1u << i;
        if (chance(&g->r, rg->touched ? pt : pu))
            m |= 1u << i;
    }
    /* Compute usually keeps something to work on (more GEMM/ALU per program). */
    if (owner == O_COMPUTE && m && m == held && chance(&g->r, 60)) {
        uint32_t k = rbelow(&g->r, (uint32_t)__builtin_popcount(m));
        for (int i = 0; i < g->nreg; i++)
            if (m >> i & 1 && k-- == 0) {
                m &= ~(1u << i);
                break;
            }
    }
    if (!m && !chance(&g->r, 30))
        return 0;
    for (int i = 0; i < g->nreg; i++)
        if (m >> i & 1)
            g->reg[i].owner = O_TRANSIT;
    q_push(g, q, m);
    return 1;
}

static int count_owned(const gen_t *g, int owner, int kind, int touched_only)
{
    int k = 0;
    for (int i = 0; i < g->nreg; i++)
        k += g->reg[i].owner == owner && g->reg[i].kind == kind &&
             (!touched_only || g->reg[i].touched);
    return k;
}

/* A random region of `kind` held by owner (-1 if none). */
static int pick_region(gen_t *g, int kind, int owner)
{
    int ids[K_COUNT * MAX_REG], k = 0;
    for (int i = 0; i < g->nreg; i++)
        if (g->reg[i].kind == kind && (owner < 0 || g->reg[i].owner == owner))
            ids[k++] = i;
    return k ? ids[rbelow(&g->r, (uint32_t)k)] : -1;
}

/* A maximal run [*lo, *hi) of rows with flag set inside [a, b), around a
 * random set row. 0 if no row is set. */
static int flag_run(gen_t *g, const uint8_t *flag, uint32_t a, uint32_t b, uint32_t *lo, uint32_t *hi)
{
    uint32_t cnt = 0;
    for (uint32_t i = a; i < b; i++)
        cnt += flag[i] != 0;
    if (!cnt)
        return 0;
    uint32_t k = rbelow(&g->r, cnt), r = a;
    for (;; r++)
        if (flag[r] && k-- == 0)
            break;
    uint32_t l = r, h = r + 1;
    while (l > a && flag[l - 1])
        l--;
    while (h < b && flag[h])
        h++;
    *lo = l;
    *hi = h;
    return 1;
}

/* --------------------------------------------------------- regions */

static int make_regions(gen_t *g, int kind, uint32_t depth)
{
    rng_t *r = &g->r;
    uint32_t cap = kind == K_WGT ? 128 : 256;
    uint32_t span = umin(depth, cap);
    uint32_t start;
    uint32_t p = rbelow(r, kind == K_ACC ? 5 : 3);
    /* Small buffers are covered whole (their edges get touched); big ones
     * get a window at the bottom, at the top edge, or anywhere; the
     * accumulator's is often centred on its bank boundary (index MSB) so
     * that GEMM and ALU instructions on regions of different banks run side
     * by side in the RTL's two compute pipes. */
    start = p == 0 ? 0 : p == 1 ? depth - span : p == 2 ? rbelow(r, depth - span + 1)
                                                         : depth / 2 - span / 2;
    uint32_t nreg = rrange(r, 1, umin(chance(r, 30) ? MAX_REG : 3, span));
    uint32_t cuts[MAX_REG + 1];
    cuts[0] = start;
    cuts[nreg] = start + span;
    /* Distinct sorted cut points. */
    for (uint32_t i = 1; i < nreg; i++) {
        uint32_t lo = cuts[i - 1] + 1, hi = start + span - (nreg - i);
        uint32_t even = start + (uint32_t)((uint64_t)span * i / nreg);
        cuts[i] = chance(r, 50) ? umax(lo, umin(even, hi)) : rrange(r, lo, hi);
    }
    g->depth[kind] = depth;
    g->reg_of[kind] = malloc(sizeof(int16_t) * depth);
    g->init[kind] = calloc(depth, 1);
    if (!g->reg_of[kind] || !g->init[kind])
        return TSR_ENOMEM;
    for (uint32_t i = 0; i < depth; i++)
        g->reg_of[kind][i] = -1;
    for (uint32_t i = 0; i < nreg; i++) {
        region_t *rg = &g->reg[g->nreg];
        rg->kind = kind;
        rg->lo = cuts[i];
        rg->hi = cuts[i + 1];
        rg->owner = kind == K_ACC ? O_COMPUTE : O_LOAD;
        rg->touched = 0;
        for (uint32_t k = rg->lo; k < rg->hi; k++)
            g->reg_of[kind][k] = (int16_t)g->nreg;
        g->nreg++;
    }
    return TSR_OK;
}

/* ------------------------------------------------------- LOAD shapes */

/* Rows a LOAD writes (0 for a no-op). */
static uint32_t load_rows(const tsr_insn_t *in)
{
    if (!in->x_size)
        return 0;
    return (in->y_pad0 + in->y_size + in->y_pad1) * (in->x_pad0 + in->x_size + in->x_pad1);
}

/* Pads and sizes of a 2-D LOAD writing at most room (>= 1) rows. */
static void pick_shape(gen_t *g, uint32_t room, int pad_ok, tsr_insn_t *in)
{
    rng_t *r = &g->r;
    uint32_t L = chance(r, 20) ? umin(room, 24) : rrange(r, 1, umin(room, 24));
    uint32_t ymax = umin(room / L, 32);
    uint32_t Y = chance(r, 40) ? ymax : rrange(r, 1, ymax);
    uint32_t xp0 = 0, xp1 = 0, yp0 = 0, yp1 = 0, ys;
    if (pad_ok) {
        if (L > 1 && chance(r, 30))
            xp0 = rrange(r, 1, umin(15, L - 1));
        if (L - xp0 > 1 && chance(r, 30))
            xp1 = rrange(r, 1, umin(15, L - 1 - xp0));
        if (Y > 1 && chance(r, 30))
            yp0 = rrange(r, 1, umin(15, Y - 1));
        if (Y - yp0 > 1 && chance(r, 30))
            yp1 = rrange(r, 1, umin(15, Y - 1 - yp0));
    }
    ys = Y - yp0 - yp1;
    if (pad_ok && Y <= 30 && chance(r, 3)) {
        /* All padding: y_size 0 reads no DRAM but still zeroes its rows. */
        yp0 = rrange(r, Y > 15 ? Y - 15 : 0, umin(Y, 15));
        yp1 = Y - yp0;
        ys = 0;
    }
    in->x_pad0 = xp0;
    in->x_pad1 = xp1;
    in->x_size = L - xp0 - xp1;
    in->y_pad0 = yp0;
    in->y_pad1 = yp1;
    in->y_size = ys;
}

/* DRAM side of a transfer with in->x_size/y_size set, in buffer b: stride
 * (overlapping rows only if overlap_ok) and base; shrinks y_size to fit. */
static void pick_dram(gen_t *g, int b, tsr_insn_t *in, int overlap_ok)
{
    rng_t *r = &g->r;
    uint64_t N = g->nelem[b];
    uint32_t x = in->x_size, y = in->y_size, stride;
    if (y <= 1) {
        stride = rbelow(r, x + 9); /* unused by the transfer: any value is legal */
    } else {
        uint32_t p = rbelow(r, 100);
        if (p < 6 && overlap_ok)
            stride = 0;
        else if (p < 16 && overlap_ok && x > 1)
            stride = rrange(r, 1, x - 1);
        else if (p < 60)
            stride = x;
        else
            stride = x + rrange(r, 1, 8);
    }
    while (y > 1 && (uint64_t)(y - 1) * stride + x > N)
        y--;
    in->y_size = y;
    in->x_stride = stride;
    uint64_t span = y ? (uint64_t)(y - 1) * stride + x : x;
    uint64_t off;
    uint32_t p = rbelow(r, 100);
    if (p < 25)
        off = N - span; /* ends at the buffer's last element */
    else if (p < 40)
        off = 0;
    else
        off = rnext(r) % (N - span + 1);
    in->dram_base = (uint32_t)(g->ebase[b] + off);
}

static int mem_kind(uint32_t m)
{
    return m == TSR_MEM_INP ? K_INP : m == TSR_MEM_WGT ? K_WGT : K_ACC;
}

static int mem_buf(uint32_t m)
{
    switch (m) {
    case TSR_MEM_INP: return B_INP;
    case TSR_MEM_WGT: return B_WGT;
    case TSR_MEM_ACC: return B_ACC;
    case TSR_MEM_ACC8: return B_ACC8;
    case TSR_MEM_LUT: return B_LUT;
    default: return B_UOP;
    }
}

/* A LOAD of inp/wgt/acc/acc8 into rows of [lo, hi); with fill, starting at
 * the first unwritten row so regions become fully initialised quickly. */
static void make_load(gen_t *g, uint32_t m, uint32_t lo, uint32_t hi, int fill, tsr_insn_t *in)
{
    rng_t *r = &g->r;
    uint8_t *init = g->init[mem_kind(m)];
    uint32_t a = lo;
    if (fill) {
        while (a < hi && init[a])
            a++;
        if (a == hi) {
            fill = 0;
            a = lo;
        }
    }
    memset(in, 0, sizeof *in);
    in->opcode = TSR_OP_LOAD;
    in->mem_type = m;
    pick_shape(g, hi - a, 1, in);
    pick_dram(g, mem_buf(m), in, 1);
    if (m == TSR_MEM_INP && chance(r, 50))
        in->pad_value = (int32_t)rbelow(r, 256) - 128;
    uint32_t total = load_rows(in);
    if (fill)
        in->sram_base = a;
    else {
        uint32_t p = rbelow(r, 100);
        in->sram_base = p < 30 ? hi - total : p < 45 ? lo : rrange(r, lo, hi - total);
    }
    for (uint32_t k = 0; k < total; k++)
        init[in->sram_base + k] = 1;
}

/* An x_size == 0 transfer of memory type m: a no-op that only carries its
 * flags. Its other fields are random junk (within their field widths) unless
 * disabled, so a backend that acts on them is caught. */
static void make_noop(gen_t *g, uint32_t opcode, uint32_t m, tsr_insn_t *in)
{
    rng_t *r = &g->r;
    memset(in, 0, sizeof *in);
    in->opcode = opcode;
    in->mem_type = m;
    if (g->o.no_noop_junk || chance(r, 40))
        return;
    in->sram_base = rbelow(r, tsr_config_sram_depth(g->c, (int)m));
    in->dram_base = (uint32_t)rnext(r);
    in->y_size = rbelow(r, 6);
    in->x_stride = rbelow(r, 100);
    if (opcode == TSR_OP_LOAD && m == TSR_MEM_INP)
        in->pad_value = (int32_t)rbelow(r, 256) - 128;
    if (opcode == TSR_OP_LOAD && m != TSR_MEM_UOP) {
        in->y_pad0 = rbelow(r, 16);
        in->y_pad1 = rbelow(r, 16);
        in->x_pad0 = rbelow(r, 16);
        in->x_pad1 = rbelow(r, 16);
    }
}

/* ---------------------------------------------------------------- uops */

static int uop_append(gen_t *g, uint64_t elems)
{
    if (g->uop_used + elems <= g->uop_cap)
        return TSR_OK;
    uint64_t cap = g->uop_cap ? g->uop_cap : 256;
    while (cap < g->uop_used + elems)
        cap *= 2;
    uint8_t *p = realloc(g->bufs[B_UOP].bytes, cap * g->c->uop_bytes);
    if (!p)
        return g->err = TSR_ENOMEM;
    g->bufs[B_UOP].bytes = p;
    g->uop_cap = cap;
    return TSR_OK;
}

static void uop_put(gen_t *g, uint64_t elem, const tsr_uop_t *u)
{
    uint64_t raw = 0;
    /* Values are generated inside the field widths, so this cannot fail. */
    (void)tsr_uop_encode(g->c, u, &raw);
    uint8_t *p = g->bufs[B_UOP].bytes + elem * g->c->uop_bytes;
    for (uint32_t i = 0; i < g->c->uop_bytes; i++)
        p[i] = (uint8_t)(raw >> (8 * i));
}

static void random_uop(gen_t *g, tsr_uop_t *u)
{
    const tsr_config_t *c = g->c;
    u->dst = rbelow(&g->r, c->acc_depth);
    u->src = rbelow(&g->r, umax(c->inp_depth, c->acc_depth));
    u->wgt = rbelow(&g->r, c->wgt_depth);
}

/* A LOAD uop placing uops k[0..nu) at on-chip rows [bgn, bgn + nu), laid out
 * in DRAM as y rows of x with a stride >= x (gaps get random uops). */
static int make_uop_load(gen_t *g, const tsr_uop_t *k, uint32_t nu, uint32_t bgn, tsr_insn_t *in)
{
    rng_t *r = &g->r;
    uint32_t y = 1, x = nu, stride;
    if (nu > 1 && chance(r, 35)) {
        uint32_t d = rrange(r, 2, nu);
        while (nu % d)
            d--;
        y = d;
        x = nu / d;
    }
    stride = y > 1 ? x + (chance(r, 50) ? 0 : rrange(r, 1, 3)) : rbelow(r, x + 4);
    uint64_t span = (uint64_t)(y - 1) * stride + x;
    if (uop_append(g, span))
        return g->err;
    uint64_t start = g->uop_used;
    for (uint64_t e = 0; e < span; e++) {
        tsr_uop_t junk;
        random_uop(g, &junk);
        uop_put(g, start + e, &junk);
    }
    for (uint32_t i = 0; i < nu; i++)
        uop_put(g, start + (uint64_t)(i / x) * stride + i % x, &k[i]);
    g->uop_used += span;
    memset(in, 0, sizeof *in);
    in->opcode = TSR_OP_LOAD;
    in->mem_type = TSR_MEM_UOP;
    in->sram_base = bgn;
    in->dram_base = (uint32_t)(g->ebase[B_UOP] + start);
    in->y_size = y;
    in->x_size = x;
    in->x_stride = stride;
    /* Shadow and kernel list: drop kernels this load overwrites. */
    for (uint32_t i = 0; i < nu; i++) {
        g->uop_sh[bgn + i] = k[i];
        g->uop_init[bgn + i] = 1;
    }
    int w = 0;
    for (int i = 0; i < g->nkern; i++)
        if (g->kern[i].end <= bgn || g->kern[i].bgn >= bgn + nu)
            g->kern[w++] = g->kern[i];
    g->nkern = w;
    if (g->nkern < MAX_KERN) {
        g->kern[g->nkern].bgn = bgn;
        g->kern[g->nkern].end = bgn + nu;
        g->nkern++;
    }
    return TSR_OK;
}

/* A LOAD of activation tables [lo, hi) (ACT_LUT configs): from anywhere in
 * the lut buffer, as one row or as rows of a strided 2-D transfer (no
 * padding: the memory type has none). */
static void make_lut_load(gen_t *g, uint32_t lo, uint32_t hi, tsr_insn_t *in)
{
    rng_t *r = &g->r;
    uint32_t n = hi - lo, y = 1, x = n;
    if (n > 1 && chance(r, 30)) {
        y = rrange(r, 2, n);
        while (n % y)
            y--;
        x = n / y;
    }
    memset(in, 0, sizeof *in);
    in->opcode = TSR_OP_LOAD;
    in->mem_type = TSR_MEM_LUT;
    in->sram_base = lo;
    in->x_size = x;
    in->y_size = y;
    pick_dram(g, B_LUT, in, 1);
    if (in->y_size != y) { /* shortened to fit the buffer: one row of them all instead */
        in->x_size = n;
        in->y_size = 1;
        pick_dram(g, B_LUT, in, 1);
    }
    for (uint32_t k = lo; k < hi; k++)
        g->lut_init[k] = 1;
}

/* A lut op's table operand and, when a table it may read is not loaded
 * yet, a LOAD of the tables into list[*nl] first (the op reads one table
 * with imm, any with a register operand; a reset reads none). */
static void lut_fixup(gen_t *g, tsr_insn_t *op, tsr_insn_t *list, int *nl)
{
    const uint32_t n = (uint32_t)g->c->act_lut;
    if (op->opcode != TSR_OP_ALU || op->alu_opcode != TSR_ALU_LUT)
        return;
    if (op->use_imm)
        op->imm = (int32_t)rbelow(&g->r, n);
    if (op->reset || !op->iter_out || !op->iter_in || op->uop_bgn == op->uop_end)
        return;
    uint32_t lo = op->use_imm ? (uint32_t)op->imm : 0, hi = op->use_imm ? lo + 1 : n, k = lo;
    while (k < hi && g->lut_init[k])
        k++;
    if (k == hi)
        return;
    /* sometimes every table, else exactly the ones needed */
    if (chance(&g->r, 40)) {
        lo = 0;
        hi = n;
    }
    make_lut_load(g, lo, hi, &list[(*nl)++]);
}

/* ------------------------------------------------------------ GEMM / ALU */

static int reads_src(const tsr_insn_t *in)
{
    return !in->reset && (in->opcode == TSR_OP_GEMM || !in->use_imm);
}

/* mov's result does not depend on the old accumulator, so it may
 * initialise rows. */
static int reads_dst(const tsr_insn_t *in)
{
    return !in->reset && (in->opcode == TSR_OP_GEMM || in->alu_opcode != TSR_ALU_MOV);
}

static int owned_by(const gen_t *g, int kind, uint64_t row, int owner)
{
    int id = g->reg_of[kind][row];
    return id >= 0 && g->reg[id].owner == owner;
}

/* Check every index of the loops (exactly as semantics.md enumerates them)
 * against buffer depths, ownership and initialisation; with apply, record
 * the writes. ov, if non-NULL, holds the uops of [uop_bgn, uop_end) about
 * to be loaded. */
static int loop_check(gen_t *g, const tsr_insn_t *in, const tsr_uop_t *ov, int apply)
{
    const tsr_config_t *c = g->c;
    int gemm = in->opcode == TSR_OP_GEMM;
    int rs = reads_src(in), rd = reads_dst(in);
    /* a depthwise GEMM reads input rows src .. src + taps - 1, and its wgt
     * index names a tap group: row wgt >> dw_group_bits */
    const uint32_t taps = gemm && rs && in->depthwise ? (uint32_t)c->depthwise : 1;
    const int wshift = gemm && in->depthwise ? c->dw_group_bits : 0;
    for (uint32_t i = 0; i < in->iter_out; i++)
        for (uint32_t j = 0; j < in->iter_in; j++)
            for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
                const tsr_uop_t *uo = ov ? &ov[u - in->uop_bgn] : &g->uop_sh[u];
                if (!ov && !g->uop_init[u])
                    return 0;
                uint64_t dst = uo->dst + (uint64_t)i * in->dst_factor_out + (uint64_t)j * in->dst_factor_in;
                uint64_t src = uo->src + (uint64_t)i * in->src_factor_out + (uint64_t)j * in->src_factor_in;
                uint64_t wgt = (uo->wgt + (uint64_t)i * in->wgt_factor_out + (uint64_t)j * in->wgt_factor_in) >> wshift;
                if (apply) {
                    g->init[K_ACC][dst] = 1;
                    g->out_init[dst] = 1;
                    g->reg[g->reg_of[K_ACC][dst]].touched = 1;
                    if (gemm && rs) {
                        for (uint32_t t = 0; t < taps; t++)
                            g->reg[g->reg_of[K_INP][src + t]].touched = 1;
                        g->reg[g->reg_of[K_WGT][wgt]].touched = 1;
                    }
                    continue;
                }
                /* Every index stays inside its buffer, used or not: the
                 * reference machine checks unused ones too. */
                if (dst >= c->acc_depth || !owned_by(g, K_ACC, dst, O_COMPUTE) ||
                    (rd && !g->init[K_ACC][dst]))
                    return 0;
                if (gemm) {
                    if (src + taps - 1 >= c->inp_depth || wgt >= c->wgt_depth)
                        return 0;
                    if (rs && (!owned_by(g, K_WGT, wgt, O_COMPUTE) || !g->init[K_WGT][wgt]))
                        return 0;
                    for (uint32_t t = 0; rs && t < taps; t++)
                        if (!owned_by(g, K_INP, src + t, O_COMPUTE) || !g->init[K_INP][src + t])
                            return 0;
                } else {
                    if (src >= c->acc_depth || (rs && !g->init[K_ACC][src]))
                        return 0;
                }
            }
    return 1;
}

static uint32_t pick3(rng_t *r, uint32_t m)
{
    uint32_t p = rbelow(r, 100);
    return p < 35 ? 0 : p < 65 ? m : rbelow(r, m + 1);
}

/* Loop factors for one index over rows [lo, hi) with the given extents, and
 * the resulting extra reach ext = (io-1)*fo + (ii-1)*fi <= hi-lo-1. A factor
 * whose loop has extent 1 is never multiplied, so it is any field value. */
static void pick_factors(gen_t *g, uint32_t len, uint32_t io, uint32_t ii, uint32_t fmax,
                         uint32_t *fo, uint32_t *fi, uint32_t *ext)
{
    rng_t *r = &g->r;
    uint32_t room = len - 1;
    int inner_first = chance(r, 50);
    for (int k = 0; k < 2; k++) {
        int outer = (k == 0) != inner_first;
        uint32_t it = outer ? io : ii;
        uint32_t *f = outer ? fo : fi;
        if (it <= 1) {
            *f = chance(r, 50) ? 0 : rbelow(r, fmax + 1);
            continue;
        }
        *f = umin(pick3(r, room / (it - 1)), fmax);
        room -= (it - 1) * *f;
    }
    *ext = (len - 1) - room;
}

/* uop base in [lo, hi - 1 - ext], often at either end. */
static uint32_t pick_base(rng_t *r, uint32_t lo, uint32_t hi, uint32_t ext)
{
    uint32_t top = hi - 1 - ext, p = rbelow(r, 100);
    return p < 30 ? top : p < 45 ? lo : rrange(r, lo, top);
}

static int32_t pick_imm(rng_t *r)
{
    static const int32_t special[] = {-32768, 32767, -1, 0, 1, 31, -31, 32, -32, 15, 16, -16};
    uint32_t p = rbelow(r, 100);
    if (p < 25)
        return (int32_t)rbelow(r, 81) - 40; /* shift amounts, including clamped ones */
    if (p < 45)
        return (int32_t)rbelow(r, 17) - 8;
    if (p < 60)
        return special[rbelow(r, sizeof special / sizeof special[0])];
    return (int16_t)(uint16_t)rnext(r);
}

/* Loop extents with iter_out * iter_in * nu <= max_ops. */
static void pick_extents(gen_t *g, uint32_t *nu, uint32_t *io, uint32_t *ii)
{
    rng_t *r = &g->r;
    *io = chance(r, 30) ? 1 : chance(r, 10) ? rrange(r, 1, 16) : rrange(r, 1, 6);
    *ii = chance(r, 30) ? 1 : chance(r, 10) ? rrange(r, 1, 16) : rrange(r, 1, 6);
    while (*nu * *io * *ii > g->max_ops) {
        if (*io > 1)
            (*io)--;
        else if (*ii > 1)
            (*ii)--;
        else
            (*nu)--;
    }
}

/* An ALU op the config implements, uniformly: with every optional op off
 * the draw is the one it always was (rbelow over the base ops), so old
 * seeds give the same streams. */
static uint32_t pick_alu_op(rng_t *r, const tsr_config_t *c)
{
    uint32_t ops[TSR_ALU_COUNT], n = 0;
    for (uint32_t op = 0; op < TSR_ALU_COUNT; op++)
        if (tsr_alu_op_available(c, op))
            ops[n++] = op;
    return ops[rbelow(r, n)];
}

/* A GEMM or ALU with an empty loop: a compute-stage no-op. */
static void make_empty_loop(gen_t *g, int gemm, tsr_insn_t *in)
{
    rng_t *r = &g->r;
    const tsr_config_t *c = g->c;
    memset(in, 0, sizeof *in);
    in->opcode = gemm ? TSR_OP_GEMM : TSR_OP_ALU;
    in->uop_bgn = rbelow(r, c->uop_depth); /* uop_bgn's field holds at most depth - 1 */
    in->uop_end = rrange(r, in->uop_bgn, c->uop_depth);
    in->iter_out = rbelow(r, 4);
    in->iter_in = rbelow(r, 4);
    switch (rbelow(r, 3)) {
    case 0: in->iter_out = 0; break;
    case 1: in->iter_in = 0; break;
    default: in->uop_end = in->uop_bgn; break;
    }
    in->reset = chance(r, 20);
    if (gemm && c->depthwise) /* (drawn only then: other configs' streams stay as they were) */
        in->depthwise = chance(r, 50);
    in->dst_factor_out = rbelow(r, field_max(c->acc_idx_bits) + 1);
    in->dst_factor_in = rbelow(r, field_max(c->acc_idx_bits) + 1);
    if (gemm) {
        in->src_factor_out = rbelow(r, field_max(c->inp_idx_bits) + 1);
        in->src_factor_in = rbelow(r, field_max(c->inp_idx_bits) + 1);
        in->wgt_factor_out = rbelow(r, field_max(c->wgt_idx_bits) + 1);
        in->wgt_factor_in = rbelow(r, field_max(c->wgt_idx_bits) + 1);
    } else {
        in->src_factor_out = rbelow(r, field_max(c->acc_idx_bits) + 1);
        in->src_factor_in = rbelow(r, field_max(c->acc_idx_bits) + 1);
        in->alu_opcode = pick_alu_op(r, c);
        in->use_imm = chance(r, 50);
        in->imm = pick_imm(r);
        if (in->alu_opcode == TSR_ALU_LUT && in->use_imm) /* (imm must name a table) */
            in->imm = (int32_t)rbelow(r, (uint32_t)c->act_lut);
    }
}

/* A draw that leaves r's stream as it was: a choice added with it changes a
 * program only where it fires, so the existing seeds' programs stay as they
 * were elsewhere. salt tells choices apart. */
static uint64_t rpeek(const rng_t *r, uint64_t salt)
{
    uint64_t s = r->s ^ salt;
    return tsr_splitmix64(&s);
}

/* Depthwise GEMMs: an op whose src is the previous op's + d with d < taps
 * reuses its window (d input rows read instead of taps: isa/tsr_isa.c's
 * issue cycles, the RTL's fill cycles), so programs need runs of src
 * stepping by 1 and by 2 (a stride-2 layer) as well as jumps. Half the time
 * the whole loop nest is one run (uop srcs base + s*u, the inner loop
 * stepping by s*nu, the outer by s*nu*iter_in: a convolution row), when it
 * fits [slo, shi), with s = 2 a third of the time; else some uops continue
 * the previous uop's src, a quarter of them by 2. src bases lie in
 * [slo, shi - sext). The stride choices are peeked (rpeek), so the draws
 * are those of the generator before stride 2 was added. */
static void dw_slides(gen_t *g, tsr_insn_t *op, tsr_uop_t *k, uint32_t nu, uint32_t slo, uint32_t shi,
                      uint32_t sext)
{
    rng_t *r = &g->r;
    const uint64_t h = rpeek(r, 0x7473725f64773273ull);
    const uint32_t len = shi - slo, fmax = field_max(g->c->inp_idx_bits);
    const uint32_t run = nu * op->iter_in * op->iter_out;
    uint32_t st = 1; /* src step of the run */
    if (h % 3 == 0 && 2 * run - 1 <= len && 2 * nu <= fmax && 2 * nu * op->iter_in <= fmax)
        st = 2;
    const uint32_t span = st * (run - 1) + 1, fi = st * nu, fo = st * nu * op->iter_in;
    if (chance(r, 50) && span <= len && fi <= fmax && fo <= fmax) {
        const uint32_t base = slo + rbelow(r, len - span + 1);
        for (uint32_t u = 0; u < nu; u++)
            k[u].src = base + st * u;
        op->src_factor_in = fi;
        op->src_factor_out = fo;
        return;
    }
    for (uint32_t u = 1; u < nu; u++)
        if (chance(r, 60)) {
            const uint32_t su = ((h >> (8 + u)) & 3) == 0 ? 2 : 1;
            if (k[u - 1].src + su < shi - sext)
                k[u].src = k[u - 1].src + su;
            else if (k[u - 1].src + 1 < shi - sext)
                k[u].src = k[u - 1].src + 1;
        }
}

/* Try to append a GEMM (or ALU) on regions compute owns, preceded by the
 * LOAD of a new uop kernel unless a loaded one is reused. Appends to
 * list[*nl]. Returns 1 on success. */
static int try_loop(gen_t *g, int gemm, tsr_insn_t *list, int *nl)
{
    rng_t *r = &g->r;
    const tsr_config_t *c = g->c;
    for (int attempt = 0; attempt < 8; attempt++) {
        tsr_insn_t op;
        memset(&op, 0, sizeof op);
        op.opcode = gemm ? TSR_OP_GEMM : TSR_OP_ALU;
        op.reset = chance(r, gemm ? 10 : 6);
        /* Depthwise mode on configs with the key (drawn only then, so other
         * configs' streams stay as they were); reset GEMMs may carry it too. */
        if (gemm && c->depthwise)
            op.depthwise = chance(r, 60);
        if (!gemm) {
            op.alu_opcode = pick_alu_op(r, c);
            op.use_imm = chance(r, 45);
            op.imm = pick_imm(r);
        }
        if (g->nkern && chance(r, 30)) {
            /* Reuse (part of) a loaded kernel with new loop parameters. */
            int k = (int)rbelow(r, (uint32_t)g->nkern);
            op.uop_bgn = rrange(r, g->kern[k].bgn, g->kern[k].end - 1);
            op.uop_end = rrange(r, op.uop_bgn + 1, g->kern[k].end);
            uint32_t nu = op.uop_end - op.uop_bgn;
            pick_extents(g, &nu, &op.iter_out, &op.iter_in);
            if (nu != op.uop_end - op.uop_bgn)
                continue;
            uint32_t *fs[6] = {&op.dst_factor_out, &op.dst_factor_in, &op.src_factor_out,
                               &op.src_factor_in, &op.wgt_factor_out, &op.wgt_factor_in};
            uint32_t fm[6] = {field_max(c->acc_idx_bits), field_max(c->acc_idx_bits),
                              field_max(gemm ? c->inp_idx_bits : c->acc_idx_bits),
                              field_max(gemm ? c->inp_idx_bits : c->acc_idx_bits),
                              field_max(c->wgt_idx_bits), field_max(c->wgt_idx_bits)};
            for (int f = 0; f < (gemm ? 6 : 4); f++)
                *fs[f] = chance(r, 60) ? 0 : umin(rrange(r, 1, 3), fm[f]);
            if (!loop_check(g, &op, NULL, 0))
                continue;
            loop_check(g, &op, NULL, 1);
            lut_fixup(g, &op, list, nl);
            list[(*nl)++] = op;
            return 1;
        }
        /* New kernel over owned regions. */
        int A = pick_region(g, K_ACC, O_COMPUTE);
        if (A < 0)
            return 0;
        uint32_t dlo = g->reg[A].lo, dhi = g->reg[A].hi;
        if (reads_dst(&op) && !flag_run(g, g->init[K_ACC], dlo, dhi, &dlo, &dhi)) {
            /* Nothing written there yet: a reset (or mov) writes it. */
            if (chance(r, 50))
                continue;
            if (gemm)
                op.reset = 1;
            else
                op.alu_opcode = TSR_ALU_MOV;
        }
        uint32_t slo, shi, wlo = 0, whi = c->wgt_depth;
        if (gemm) {
            int I = pick_region(g, K_INP, O_COMPUTE), W = pick_region(g, K_WGT, O_COMPUTE);
            if (op.reset) {
                /* Unused indices: anywhere in the buffers. */
                slo = 0;
                shi = c->inp_depth;
            } else {
                if (I < 0 || W < 0)
                    return 0;
                if (!flag_run(g, g->init[K_INP], g->reg[I].lo, g->reg[I].hi, &slo, &shi) ||
                    !flag_run(g, g->init[K_WGT], g->reg[W].lo, g->reg[W].hi, &wlo, &whi))
                    continue;
            }
        } else {
            int S = pick_region(g, K_ACC, -1); /* acc rows are compute's alone */
            slo = g->reg[S].lo;
            shi = g->reg[S].hi;
            if (reads_src(&op) && !flag_run(g, g->init[K_ACC], slo, shi, &slo, &shi))
                continue;
        }
        /* A depthwise op reads src .. src + taps - 1: its src stays taps - 1
         * rows below the end of the run. */
        const uint32_t tx = gemm && reads_src(&op) && op.depthwise ? (uint32_t)c->depthwise - 1 : 0;
        if (shi - slo <= tx)
            continue;
        shi -= tx;
        uint32_t nu = rrange(r, 1, umin(MAX_KUOPS, c->uop_depth));
        pick_extents(g, &nu, &op.iter_out, &op.iter_in);
        uint32_t dext, sext, wext = 0;
        pick_factors(g, dhi - dlo, op.iter_out, op.iter_in, field_max(c->acc_idx_bits),
                     &op.dst_factor_out, &op.dst_factor_in, &dext);
        pick_factors(g, shi - slo, op.iter_out, op.iter_in,
                     field_max(gemm ? c->inp_idx_bits : c->acc_idx_bits), &op.src_factor_out,
                     &op.src_factor_in, &sext);
        /* A depthwise op's wgt index names a tap group (G per row): the run's
         * groups are [wlo*G, whi*G), which the loops may reach beyond the
         * uop field's WGT_DEPTH - 1 (the uop itself must stay below it). */
        const int gb = gemm && op.depthwise ? c->dw_group_bits : 0;
        const uint32_t glo = wlo << gb, ghi = whi << gb;
        if (gemm)
            pick_factors(g, ghi - glo, op.iter_out, op.iter_in, field_max(c->wgt_idx_bits),
                         &op.wgt_factor_out, &op.wgt_factor_in, &wext);
        if (gemm && glo + wext >= umin(ghi, c->wgt_depth + wext)) /* (no uop value reaches the run) */
            continue;
        tsr_uop_t k[MAX_KUOPS];
        for (uint32_t u = 0; u < nu; u++) {
            k[u].dst = pick_base(r, dlo, dhi, dext);
            k[u].src = pick_base(r, slo, shi, sext);
            k[u].wgt = gemm ? pick_base(r, glo, umin(ghi, c->wgt_depth + wext), wext) : rbelow(r, c->wgt_depth);
        }
        if (gemm && op.depthwise && !op.reset)
            dw_slides(g, &op, k, nu, slo, shi, sext);
        uint32_t p = rbelow(r, 100);
        op.uop_bgn = p < 25 ? c->uop_depth - nu : p < 40 ? 0 : rbelow(r, c->uop_depth - nu + 1);
        op.uop_end = op.uop_bgn + nu;
        if (!loop_check(g, &op, k, 0))
            continue;
        if (make_uop_load(g, k, nu, op.uop_bgn, &list[*nl]))
            return 0;
        (*nl)++;
        loop_check(g, &op, NULL, 1);
        lut_fixup(g, &op, list, nl);
        list[(*nl)++] = op;
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- STORE */

static int try_store(gen_t *g, tsr_insn_t *in)
{
    rng_t *r = &g->r;
    int ids[MAX_REG], k = 0;
    for (int i = 0; i < g->nreg; i++) {
        const region_t *rg = &g->reg[i];
        if (rg->kind != K_ACC || rg->owner != O_STORE)
            continue;
        for (uint32_t row = rg->lo; row < rg->hi; row++)
            if (g->out_init[row]) {
                ids[k++] = i;
                break;
            }
    }
    if (!k)
        return 0;
    region_t *rg = &g->reg[ids[rbelow(r, (uint32_t)k)]];
    uint32_t lo, hi;
    flag_run(g, g->out_init, rg->lo, rg->hi, &lo, &hi);
    uint32_t s = chance(r, 40) ? lo : rrange(r, lo, hi - 1);
    uint32_t T = hi - s;
    memset(in, 0, sizeof *in);
    in->opcode = TSR_OP_STORE;
    in->mem_type = TSR_MEM_OUT;
    in->sram_base = s;
    uint32_t p0 = rbelow(r, 100);
    in->x_size = p0 < 20 ? umin(T, 16) : p0 < 60 ? rrange(r, 1, umax(1, umin(T, 16) / 3))
                                                  : rrange(r, 1, umin(T, 16));
    uint32_t ymax = umin(T / in->x_size, 16);
    in->y_size = chance(r, 30) ? ymax : rrange(r, 1, ymax);
    /* Never overlapping DRAM rows: the order of overlapping writes within
     * one STORE is not specified. */
    int b = chance(r, 50) ? B_OUT0 : B_OUT1;
    uint64_t N = g->nelem[b];
    uint32_t x = in->x_size, y = in->y_size;
    uint32_t stride = y > 1 ? x + (chance(r, 50) ? 0 : rrange(r, 1, 6)) : rbelow(r, x + 6);
    while (y > 1 && (uint64_t)(y - 1) * stride + x > N)
        y--;
    in->y_size = y;
    in->x_stride = stride;
    uint64_t span = (uint64_t)(y - 1) * stride + x;
    uint32_t p = rbelow(r, 100);
    uint64_t off = p < 25 ? N - span : p < 40 ? 0 : rnext(r) % (N - span + 1);
    in->dram_base = (uint32_t)(g->ebase[b] + off);
    rg->touched = 1;
    return 1;
}

/* ---------------------------------------------------------------- steps */

/* Flags go on the first (pops) and last (pushes) instruction of a step. */
static void emit_list(gen_t *g, tsr_insn_t *list, int nl, int pp, int pn, int sp, int sn)
{
    list[0].pop_prev = (uint32_t)pp;
    list[0].pop_next = (uint32_t)pn;
    list[nl - 1].push_prev = (uint32_t)sp;
    list[nl - 1].push_next = (uint32_t)sn;
    for (int i = 0; i < nl; i++)
        push_insn(g, &list[i]);
}

static void step_load(gen_t *g)
{
    rng_t *r = &g->r;
    tsr_insn_t list[4];
    int nl = 0, pn = 0, sn = 0;
    int owned = count_owned(g, O_LOAD, K_INP, 0) + count_owned(g, O_LOAD, K_WGT, 0);
    if (g->qn[TSR_Q_C2L] && chance(r, owned ? g->p_pop[TSR_Q_C2L] : 90)) {
        gain(g, q_pop(g, TSR_Q_C2L), O_LOAD);
        pn = 1;
    }
    int k = chance(r, 8) ? 0 : (int)rrange(r, 1, 3);
    for (int t = 0; t < k; t++) {
        int kind = chance(r, 50) ? K_INP : K_WGT;
        int id = pick_region(g, kind, O_LOAD);
        if (id < 0)
            id = pick_region(g, kind == K_INP ? K_WGT : K_INP, O_LOAD);
        if (id < 0)
            break;
        region_t *rg = &g->reg[id];
        make_load(g, rg->kind == K_INP ? TSR_MEM_INP : TSR_MEM_WGT, rg->lo, rg->hi, chance(r, 70),
                  &list[nl++]);
        rg->touched = 1;
    }
    if (!nl)
        make_noop(g, TSR_OP_LOAD, chance(r, 50) ? TSR_MEM_INP : TSR_MEM_WGT, &list[nl++]);
    int touched = count_owned(g, O_LOAD, K_INP, 1) + count_owned(g, O_LOAD, K_WGT, 1);
    /* Hand over eagerly when compute has nothing to work on, so the
     * pipeline keeps flowing whatever this program's temperament. */
    int starving = !count_owned(g, O_COMPUTE, K_INP, 0) || !count_owned(g, O_COMPUTE, K_WGT, 0);
    sn = release(g, TSR_Q_L2C,
                 starving && touched ? 90 : umin(100, g->p_push[TSR_Q_L2C] + (touched ? 20 : 0)),
                 O_LOAD, 1u << K_INP | 1u << K_WGT, 80, 10);
    emit_list(g, list, nl, 0, pn, 0, sn);
}

static void step_compute(gen_t *g)
{
    rng_t *r = &g->r;
    const tsr_config_t *c = g->c;
    tsr_insn_t list[8]; /* (2 steps of at most a uop LOAD, a lut LOAD and the op) */
    int nl = 0, pp = 0, pn = 0, sp = 0, sn = 0;
    int need_iw = !count_owned(g, O_COMPUTE, K_INP, 0) || !count_owned(g, O_COMPUTE, K_WGT, 0);
    if (g->qn[TSR_Q_L2C] && chance(r, need_iw ? 85 : g->p_pop[TSR_Q_L2C])) {
        gain(g, q_pop(g, TSR_Q_L2C), O_COMPUTE);
        pp = 1;
    }
    if (g->qn[TSR_Q_S2C] && chance(r, !count_owned(g, O_COMPUTE, K_ACC, 0) ? 85 : g->p_pop[TSR_Q_S2C])) {
        gain(g, q_pop(g, TSR_Q_S2C), O_COMPUTE);
        pn = 1;
    }
    int k = (int)rrange(r, 1, 2);
    for (int t = 0; t < k && !g->err; t++) {
        /* (ACT_LUT configs only, so other configs draw as they always did) */
        if (c->act_lut && chance(r, 6)) {
            uint32_t lo = rbelow(r, (uint32_t)c->act_lut);
            make_lut_load(g, lo, rrange(r, lo + 1, (uint32_t)c->act_lut), &list[nl++]);
            continue;
        }
        uint32_t w = rbelow(r, 100);
        /* A GEMM that cannot be built (regions elsewhere, rows unwritten)
         * falls back to an ALU, then to an acc load that writes rows. */
        if (w < 45 && try_loop(g, 1, list, &nl))
            continue;
        if (w < 80 && try_loop(g, 0, list, &nl))
            continue;
        if (w < 92) {
            int id = pick_region(g, K_ACC, chance(r, 70) ? O_COMPUTE : -1);
            if (id < 0)
                id = pick_region(g, K_ACC, -1);
            make_load(g, chance(r, 80) ? TSR_MEM_ACC : TSR_MEM_ACC8, g->reg[id].lo, g->reg[id].hi,
                      chance(r, 60), &list[nl++]);
        } else if (w < 95) {
            /* A stand-alone kernel of random uops (maybe reused if it fits). */
            tsr_uop_t ku[MAX_KUOPS];
            uint32_t nu = rrange(r, 1, umin(MAX_KUOPS, c->uop_depth));
            for (uint32_t u = 0; u < nu; u++)
                random_uop(g, &ku[u]);
            if (make_uop_load(g, ku, nu, rbelow(r, c->uop_depth - nu + 1), &list[nl]) == TSR_OK)
                nl++;
        } else if (w < 97 && !g->o.no_empty_loops) {
            make_empty_loop(g, chance(r, 50), &list[nl++]);
        }
    }
    if (!nl) {
        static const uint32_t m[] = {TSR_MEM_UOP, TSR_MEM_ACC, TSR_MEM_ACC8};
        make_noop(g, TSR_OP_LOAD, m[rbelow(r, 3)], &list[nl++]);
    }
    int used = count_owned(g, O_COMPUTE, K_INP, 1) + count_owned(g, O_COMPUTE, K_WGT, 1);
    int load_idle = !count_owned(g, O_LOAD, K_INP, 0) && !count_owned(g, O_LOAD, K_WGT, 0);
    sp = release(g, TSR_Q_C2L,
                 load_idle && used ? 80 : umin(100, g->p_push[TSR_Q_C2L] + (used ? 25 : 0)),
                 O_COMPUTE, 1u << K_INP | 1u << K_WGT, 75, 15);
    int dirty = count_owned(g, O_COMPUTE, K_ACC, 1);
    int store_idle = !count_owned(g, O_STORE, K_ACC, 0);
    sn = release(g, TSR_Q_C2S,
                 store_idle && dirty ? 80 : umin(100, g->p_push[TSR_Q_C2S] + (dirty ? 25 : 0)),
                 O_COMPUTE, 1u << K_ACC, 75, 10);
    emit_list(g, list, nl, pp, pn, sp, sn);
}

static void step_store(gen_t *g)
{
    rng_t *r = &g->r;
    tsr_insn_t list[4];
    int nl = 0, pp = 0, sp = 0;
    int eager = !count_owned(g, O_STORE, K_ACC, 0) || !count_owned(g, O_COMPUTE, K_ACC, 0);
    if (g->qn[TSR_Q_C2S] && chance(r, eager ? 90 : g->p_pop[TSR_Q_C2S])) {
        gain(g, q_pop(g, TSR_Q_C2S), O_STORE);
        pp = 1;
    }
    int k = chance(r, 8) ? 0 : (int)rrange(r, 1, 2);
    for (int t = 0; t < k; t++)
        if (try_store(g, &list[nl]))
            nl++;
    if (!nl)
        make_noop(g, TSR_OP_STORE, TSR_MEM_OUT, &list[nl++]);
    int stored = count_owned(g, O_STORE, K_ACC, 1);
    int compute_idle = !count_owned(g, O_COMPUTE, K_ACC, 0);
    sp = release(g, TSR_Q_S2C,
                 compute_idle && stored ? 95 : umin(100, g->p_push[TSR_Q_S2C] + (stored ? 25 : 0)),
                 O_STORE, 1u << K_ACC, 85, 15);
    emit_list(g, list, nl, pp, 0, sp, 0);
}

/* ------------------------------------------------------- closing a stream */

static void noop(tsr_insn_t *in, uint32_t opcode, uint32_t m)
{
    memset(in, 0, sizeof *in);
    in->opcode = opcode;
    in->mem_type = m;
}

typedef struct {
    tsr_insn_t *v;
    size_t n, cap;
} ivec_t;

static int ivec_push(ivec_t *v, const tsr_insn_t *in)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        tsr_insn_t *p = realloc(v->v, cap * sizeof *p);
        if (!p)
            return TSR_ENOMEM;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = *in;
    return TSR_OK;
}

/* Program-order token counts of a stream prefix; TSR_EINVAL if it is not
 * program-order valid. */
static int po_counts(const tsr_config_t *cfg, const tsr_insn_t *s, size_t n, uint32_t cnt[TSR_Q_COUNT])
{
    memset(cnt, 0, sizeof(uint32_t) * TSR_Q_COUNT);
    for (size_t i = 0; i < n; i++) {
        const tsr_insn_t *in = &s[i];
        int st = tsr_insn_stage(in);
        int qp = st == TSR_STAGE_COMPUTE ? TSR_Q_L2C : st == TSR_STAGE_STORE ? TSR_Q_C2S : -1;
        int qn = st == TSR_STAGE_LOAD ? TSR_Q_C2L : st == TSR_STAGE_COMPUTE ? TSR_Q_S2C : -1;
        int sp = st == TSR_STAGE_COMPUTE ? TSR_Q_C2L : st == TSR_STAGE_STORE ? TSR_Q_S2C : -1;
        int sn = st == TSR_STAGE_LOAD ? TSR_Q_L2C : st == TSR_STAGE_COMPUTE ? TSR_Q_C2S : -1;
        if (in->opcode == TSR_OP_FINISH)
            return tsr_err(TSR_EINVAL, "close: prefix contains FINISH at #%zu", i);
        if ((in->pop_prev && qp < 0) || (in->pop_next && qn < 0) || (in->push_prev && sp < 0) ||
            (in->push_next && sn < 0))
            return tsr_err(TSR_EINVAL, "close: insn #%zu has a flag illegal in its stage", i);
        if ((in->pop_prev && !cnt[qp]--) || (in->pop_next && !cnt[qn]--))
            return tsr_err(TSR_EINVAL, "close: insn #%zu pops a token not pushed before it", i);
        if ((in->push_prev && ++cnt[sp] > (uint32_t)cfg->dep_queue_depth) ||
            (in->push_next && ++cnt[sn] > (uint32_t)cfg->dep_queue_depth))
            return tsr_err(TSR_EINVAL, "close: insn #%zu overfills a token queue", i);
    }
    return TSR_OK;
}

/* Appends the closing sequence to v (see tsr_gen_close_stream). With an rng
 * the last tokens are popped by FINISH or by no-ops before it, at random. */
static int close_into(const tsr_config_t *cfg, ivec_t *v, rng_t *r)
{
    uint32_t c[TSR_Q_COUNT];
    tsr_insn_t in;
    int rc = po_counts(cfg, v->v, v->n, c);
    uint32_t D = (uint32_t)cfg->dep_queue_depth;
    for (; !rc && c[TSR_Q_C2L]; c[TSR_Q_C2L]--) {
        noop(&in, TSR_OP_LOAD, TSR_MEM_INP);
        in.pop_next = 1;
        rc = ivec_push(v, &in);
    }
    for (; !rc && c[TSR_Q_C2S]; c[TSR_Q_C2S]--) {
        noop(&in, TSR_OP_STORE, TSR_MEM_OUT);
        in.pop_prev = 1;
        rc = ivec_push(v, &in);
    }
    for (; !rc && c[TSR_Q_L2C] >= D; c[TSR_Q_L2C]--) {
        noop(&in, TSR_OP_LOAD, TSR_MEM_UOP);
        in.pop_prev = 1;
        rc = ivec_push(v, &in);
    }
    if (!rc) {
        /* The last load-stage instruction: its token orders it before FINISH. */
        noop(&in, TSR_OP_LOAD, TSR_MEM_WGT);
        in.push_next = 1;
        c[TSR_Q_L2C]++;
        rc = ivec_push(v, &in);
    }
    for (; !rc && c[TSR_Q_S2C] >= D; c[TSR_Q_S2C]--) {
        noop(&in, TSR_OP_LOAD, TSR_MEM_ACC);
        in.pop_next = 1;
        rc = ivec_push(v, &in);
    }
    if (!rc) {
        noop(&in, TSR_OP_STORE, TSR_MEM_OUT);
        in.push_prev = 1;
        c[TSR_Q_S2C]++;
        rc = ivec_push(v, &in);
    }
    uint32_t keep = r && chance(r, 50) ? 0 : 1; /* tokens left for FINISH to pop */
    while (!rc && (c[TSR_Q_L2C] > keep || c[TSR_Q_S2C] > keep)) {
        noop(&in, TSR_OP_LOAD, TSR_MEM_UOP);
        if (c[TSR_Q_L2C] > keep) {
            in.pop_prev = 1;
            c[TSR_Q_L2C]--;
        }
        if (c[TSR_Q_S2C] > keep) {
            in.pop_next = 1;
            c[TSR_Q_S2C]--;
        }
        rc = ivec_push(v, &in);
    }
    if (!rc) {
        memset(&in, 0, sizeof in);
        in.opcode = TSR_OP_FINISH;
        in.pop_prev = c[TSR_Q_L2C] != 0;
        in.pop_next = c[TSR_Q_S2C] != 0;
        rc = ivec_push(v, &in);
    }
    return rc == TSR_ENOMEM ? tsr_err(TSR_ENOMEM, "out of memory") : rc;
}

int tsr_gen_close_stream(const tsr_config_t *cfg, const tsr_insn_t *prefix, size_t n,
                         tsr_insn_t **out, size_t *nout)
{
    ivec_t v = {NULL, 0, 0};
    int rc = TSR_OK;
    *out = NULL;
    *nout = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = ivec_push(&v, &prefix[i]);
    if (rc) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = close_into(cfg, &v, NULL)))
        goto out;
    *out = v.v;
    *nout = v.n;
    v.v = NULL;
out:
    free(v.v);
    return rc;
}

/* ---------------------------------------------------------- the program */

static const char *const buf_names[B_COUNT] = {"inp", "wgt", "acc", "acc8", "out0", "out1", "uop"};
static const uint32_t buf_mem[B_COUNT] = {TSR_MEM_INP, TSR_MEM_WGT, TSR_MEM_ACC, TSR_MEM_ACC8,
                                          TSR_MEM_OUT, TSR_MEM_OUT, TSR_MEM_UOP};

static int prog_read_cb(void *ctx, uint64_t addr, void *dst, size_t n)
{
    const tsr_gen_prog_t *p = ctx;
    for (size_t i = 0; i < p->nbufs; i++) {
        const tsr_gen_buf_t *b = &p->bufs[i];
        if (addr >= b->addr && addr - b->addr <= b->size && n <= b->size - (addr - b->addr)) {
            memcpy(dst, b->bytes + (addr - b->addr), n);
            return TSR_OK;
        }
    }
    return tsr_err(TSR_EFAULT, "read outside the program's buffers");
}

int tsr_gen_verify(const tsr_gen_prog_t *p, const tsr_insn_t *insns, size_t n)
{
    tsr_region_t regs[TSR_GEN_MAX_BUFS];
    for (size_t i = 0; i < p->nbufs; i++)
        regs[i] = (tsr_region_t){p->bufs[i].addr, p->bufs[i].size, p->bufs[i].name};
    tsr_verify_opts_t vo = {regs, p->nbufs, 1, prog_read_cb, (void *)p};
    return tsr_verify(&p->cfg, insns, n, &vo);
}

static void fill_random(rng_t *r, uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t z = rnext(r);
        for (uint64_t j = 0; j < 8 && i + j < n; j++)
            p[i + j] = (uint8_t)(z >> (8 * j));
    }
}

/* Lay out and fill the DRAM buffers (uop last: it grows during generation). */
static int setup_buffers(gen_t *g, tsr_gen_prog_t *p)
{
    const tsr_config_t *c = g->c;
    rng_t *r = &g->r;
    uint64_t align = 4096;
    for (int m = 0; m < TSR_MEM_COUNT; m++)
        while (align < tsr_config_elem_bytes(c, m))
            align <<= 1;
    uint32_t span_i = umin(c->inp_depth, 256), span_w = umin(c->wgt_depth, 128);
    uint32_t span_a = umin(c->acc_depth, 256);
    g->nelem[B_INP] = umax(64, 2 * span_i) + rbelow(r, 32);
    g->nelem[B_WGT] = umax(64, 2 * span_w) + rbelow(r, 32);
    g->nelem[B_ACC] = umax(64, 2 * span_a) + rbelow(r, 32);
    g->nelem[B_ACC8] = umax(64, 2 * span_a) + rbelow(r, 32);
    g->nelem[B_OUT0] = umax(64, 2 * span_a) + rbelow(r, 32);
    g->nelem[B_OUT1] = umax(64, span_a) + rbelow(r, 32);
    g->nelem[B_UOP] = 0;
    uint64_t addr = TSR_GEN_BASE_ADDR;
    p->nbufs = B_COUNT + (c->act_lut ? 1 : 0);
    for (int k = 0; k < (int)p->nbufs; k++) {
        /* in address order: the tables (ACT_LUT) before the uops, which grow */
        int b = k < B_UOP ? k : k == B_UOP && c->act_lut ? B_LUT : B_UOP;
        if (b == B_LUT) /* (drawn only for ACT_LUT configs) */
            g->nelem[B_LUT] = (uint64_t)c->act_lut + rbelow(r, 4);
        tsr_gen_buf_t *gb = &p->bufs[b];
        uint32_t eb = tsr_config_elem_bytes(c, (int)(b == B_LUT ? TSR_MEM_LUT : buf_mem[b]));
        addr = (addr + align - 1) & ~(align - 1);
        snprintf(gb->name, sizeof gb->name, "%s", b == B_LUT ? "lut" : buf_names[b]);
        gb->mem_type = b == B_LUT ? TSR_MEM_LUT : buf_mem[b];
        gb->addr = addr;
        gb->size = g->nelem[b] * eb;
        if (g->o.round_sizes)
            gb->size = (gb->size + 63) & ~63ull;
        gb->is_output = b == B_OUT0 || b == B_OUT1;
        g->ebase[b] = addr / eb;
        if (b != B_UOP) {
            gb->bytes = malloc(gb->size);
            if (!gb->bytes)
                return TSR_ENOMEM;
            fill_random(r, gb->bytes, gb->size);
        }
        /* One unused alignment unit between buffers: a stray DMA faults
         * instead of landing in a neighbour. */
        addr += gb->size + align;
    }
    /* Accumulators: sprinkle the values where ALU corner cases live. */
    static const int32_t special[] = {INT32_MIN, INT32_MAX, 0, -1, 1, INT32_MIN + 1, 65535, -65536};
    uint64_t words = p->bufs[B_ACC].size / 4;
    for (uint64_t i = 0; i < words; i++)
        if (chance(r, 12)) {
            uint32_t v = (uint32_t)special[rbelow(r, sizeof special / sizeof special[0])];
            uint8_t *q = p->bufs[B_ACC].bytes + 4 * i;
            for (int k = 0; k < 4; k++)
                q[k] = (uint8_t)(v >> (8 * k));
        }
    g->bufs = p->bufs;
    return TSR_OK;
}

void tsr_gen_free(tsr_gen_prog_t *p)
{
    if (!p)
        return;
    free(p->insns);
    for (size_t i = 0; i < TSR_GEN_MAX_BUFS; i++)
        free(p->bufs[i].bytes);
    memset(p, 0, sizeof *p);
}

int tsr_gen_program(uint64_t seed, const tsr_config_t *cfg, tsr_gen_opts_t *opts, tsr_gen_prog_t *out)
{
    int rc = TSR_OK;
    gen_t g;
    ivec_t v = {NULL, 0, 0};
    memset(&g, 0, sizeof g);
    memset(out, 0, sizeof *out);
    out->cfg = *cfg;
    out->seed = seed;
    g.r.s = seed ^ 0x7e55e4a6e2ull;
    g.c = &out->cfg;
    if (opts)
        g.o = *opts;
    uint32_t lo = g.o.min_insns ? g.o.min_insns : 24;
    uint32_t hi = g.o.max_insns ? g.o.max_insns : 140;
    g.max_ops = g.o.max_loop_ops ? g.o.max_loop_ops : 256;
    if (hi < lo)
        hi = lo;

    g.uop_init = calloc(cfg->uop_depth, 1);
    g.uop_sh = calloc(cfg->uop_depth, sizeof *g.uop_sh);
    g.out_init = calloc(cfg->acc_depth, 1);
    if (!g.uop_init || !g.uop_sh || !g.out_init || make_regions(&g, K_INP, cfg->inp_depth) ||
        make_regions(&g, K_WGT, cfg->wgt_depth) || make_regions(&g, K_ACC, cfg->acc_depth) ||
        setup_buffers(&g, out)) {
        rc = tsr_err(TSR_ENOMEM, "generator: out of memory");
        goto out;
    }
    /* Per-program temperament: how eagerly each side hands over and takes
     * tokens decides how many are in flight. */
    g.w_stage[TSR_STAGE_LOAD] = rrange(&g.r, 15, 40);
    g.w_stage[TSR_STAGE_COMPUTE] = rrange(&g.r, 30, 60);
    g.w_stage[TSR_STAGE_STORE] = rrange(&g.r, 10, 30);
    for (int q = 0; q < TSR_Q_COUNT; q++) {
        g.p_pop[q] = rrange(&g.r, 5, 95);
        g.p_push[q] = rrange(&g.r, 10, 95);
    }
    uint32_t target = rrange(&g.r, lo, hi);
    while (g.n < target && !g.err) {
        /* A stage holding what compute is starved of gets more turns, so
         * regions circulate instead of parking in token queues. */
        uint32_t w[TSR_STAGE_COUNT];
        memcpy(w, g.w_stage, sizeof w);
        if (!count_owned(&g, O_COMPUTE, K_ACC, 0))
            w[TSR_STAGE_STORE] *= 3;
        if (!count_owned(&g, O_COMPUTE, K_INP, 0) || !count_owned(&g, O_COMPUTE, K_WGT, 0))
            w[TSR_STAGE_LOAD] *= 2;
        uint32_t x = rbelow(&g.r, w[0] + w[1] + w[2]);
        if (x < w[TSR_STAGE_LOAD])
            step_load(&g);
        else if (x < w[TSR_STAGE_LOAD] + w[TSR_STAGE_COMPUTE])
            step_compute(&g);
        else
            step_store(&g);
    }
    if (g.err) {
        rc = tsr_err(g.err, "generator: out of memory");
        goto out;
    }
    out->nbody = g.n;
    v.v = g.ins;
    v.n = g.n;
    v.cap = g.cap;
    g.ins = NULL;
    if ((rc = close_into(g.c, &v, &g.r)))
        goto out;
    out->insns = v.v;
    out->ninsns = v.n;
    v.v = NULL;

    /* The uop buffer is as long as what was written (at least one element). */
    uint64_t uop_elems = g.uop_used ? g.uop_used : 1;
    if (g.o.round_sizes)
        uop_elems = (uop_elems * cfg->uop_bytes + 63) / 64 * 64 / cfg->uop_bytes;
    if (uop_append(&g, uop_elems - g.uop_used)) {
        rc = tsr_err(TSR_ENOMEM, "generator: out of memory");
        goto out;
    }
    /* Elements past the last uop written (padding) are zero. */
    memset(out->bufs[B_UOP].bytes + g.uop_used * cfg->uop_bytes, 0,
           (uop_elems - g.uop_used) * cfg->uop_bytes);
    out->bufs[B_UOP].size = uop_elems * cfg->uop_bytes;

    /* The generator's own guarantee, checked: the stream verifies against
     * exactly its buffers, with uop contents. */
    if ((rc = tsr_gen_verify(out, out->insns, out->ninsns)))
        tsr_err_prefix(rc, "generator bug (seed %llu): generated stream fails tsr_verify: ",
                       (unsigned long long)seed);
out:
    free(v.v);
    free(g.ins);
    free(g.uop_init);
    free(g.uop_sh);
    free(g.out_init);
    for (int k = 0; k < K_COUNT; k++) {
        free(g.reg_of[k]);
        free(g.init[k]);
    }
    if (rc)
        tsr_gen_free(out);
    return rc;
}

/* -------------------------------------------------------------- configs */

int tsr_gen_random_config(uint64_t seed, char *json, size_t n)
{
    rng_t r = {seed ^ 0xc0f1c0f1ull};
    uint32_t lb = rbelow(&r, 2), bi = rrange(&r, 1, 4), bo = rrange(&r, 1, 4);
    uint32_t iw = rrange(&r, 3, 4), ww = rrange(&r, 3, 4);
    /* log2 of the row sizes in bytes, then a few to a few hundred rows each. */
    uint32_t inp_row = lb + bi + iw - 3, wgt_row = bo + bi + ww - 3, acc_row = lb + bo + 5 - 3;
    uint32_t inp_idx = rrange(&r, 3, 8), wgt_idx = rrange(&r, 1, 7), acc_idx = rrange(&r, 3, 8);
    uint32_t uop_idx = rrange(&r, 3, 8);
    /* uop fields: dst acc, src max(inp, acc), wgt: at most 23 bits, 4 bytes. */
    uint32_t uop_row = 2;
    char blk[64];
    if (bi == bo && chance(&r, 30))
        snprintf(blk, sizeof blk, "\"LOG_BLOCK\": %u", bi);
    else
        snprintf(blk, sizeof blk, "\"LOG_BLOCK_IN\": %u, \"LOG_BLOCK_OUT\": %u", bi, bo);
    /* Queue depths and the RTL area options (which must not change any
     * result or cycle count), drawn in a fixed order. */
    uint32_t cq = rrange(&r, 2, 32), dq = rrange(&r, 1, 8);
    int pack = iw == 3 && ww == 3 && chance(&r, 50), lutram = chance(&r, 50);
    /* ACC_SINGLE_COPY changes cycles (not results): drawn last, so the
     * configs drawn before it stay the same */
    int single = chance(&r, 50);
    /* EXACT_REQUANT (ALU op fscale; every config here has the 32-bit
     * accumulators it needs): drawn after everything else, so the other
     * keys of a seed stay what they were */
    int exact = chance(&r, 50);
    /* DEPTHWISE (the GEMM depthwise mode: each lane one channel, so only
     * with BLOCK_IN == BLOCK_OUT, and K taps within the output columns, or
     * the column pairs with DSP_PACK): drawn after every other key, so the
     * others of a seed stay what they were */
    int dw = 0;
    if (bi == bo && chance(&r, 40))
        dw = (int)rrange(&r, 1, umin(8, (1u << bo) >> (pack ? 1 : 0)));
    int k = snprintf(json, n,
                     "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": %u, \"LOG_WGT_WIDTH\": %u, "
                     "\"LOG_ACC_WIDTH\": 5, \"LOG_BATCH\": %u, %s, \"LOG_UOP_BUFF_SIZE\": %u, "
                     "\"LOG_INP_BUFF_SIZE\": %u, \"LOG_WGT_BUFF_SIZE\": %u, "
                     "\"LOG_ACC_BUFF_SIZE\": %u, \"CMD_QUEUE_DEPTH\": %u, \"DEP_QUEUE_DEPTH\": %u, "
                     "\"DSP_PACK\": %d, \"OUT_BUFF_LUTRAM\": %d, \"ACC_SINGLE_COPY\": %d, "
                     "\"EXACT_REQUANT\": %d, \"DEPTHWISE\": %d}",
                     iw, ww, lb, blk, uop_row + uop_idx, inp_row + inp_idx, wgt_row + wgt_idx,
                     acc_row + acc_idx, cq, dq, pack, lutram, single, exact, dw);
    if (k < 0 || (size_t)k >= n)
        return tsr_err(TSR_EINVAL, "random config: buffer of %zu bytes is too small", n);
    return TSR_OK;
}

int tsr_gen_add_act_lut(uint64_t seed, tsr_config_t *cfg, char *json, size_t n)
{
    rng_t r = {seed ^ 0xac7107ull};
    static const int counts[] = {0, 1, 2, 4, 8};
    tsr_config_t c = *cfg;
    c.act_lut = counts[rbelow(&r, 5)];
    int rc = tsr_gen_config_json(&c, json, n);
    if (!rc)
        rc = tsr_config_parse(json, "random+ACT_LUT", cfg);
    return rc;
}

int tsr_gen_config_json(const tsr_config_t *c, char *json, size_t n)
{
    int k = snprintf(json, n,
                     "{\"TARGET\": \"%s\", \"LOG_INP_WIDTH\": %d, \"LOG_WGT_WIDTH\": %d, "
                     "\"LOG_ACC_WIDTH\": %d, \"LOG_BATCH\": %d, \"LOG_BLOCK_IN\": %d, "
                     "\"LOG_BLOCK_OUT\": %d, \"LOG_UOP_BUFF_SIZE\": %d, \"LOG_INP_BUFF_SIZE\": %d, "
                     "\"LOG_WGT_BUFF_SIZE\": %d, \"LOG_ACC_BUFF_SIZE\": %d, \"DRAM_BUS_WIDTH\": %d, "
                     "\"CLOCK_MHZ\": %d, \"CMD_QUEUE_DEPTH\": %d, \"DEP_QUEUE_DEPTH\": %d, "
                     "\"DSP_PACK\": %d, \"OUT_BUFF_LUTRAM\": %d, \"ACC_SINGLE_COPY\": %d, \"ACT_LUT\": %d, "
                     "\"EXACT_REQUANT\": %d, \"DEPTHWISE\": %d}",
                     c->target, c->log_inp_width, c->log_wgt_width, c->log_acc_width, c->log_batch,
                     c->log_block_in, c->log_block_out, c->log_uop_buff_size, c->log_inp_buff_size,
                     c->log_wgt_buff_size, c->log_acc_buff_size, c->dram_bus_width, c->clock_mhz,
                     c->cmd_queue_depth, c->dep_queue_depth, c->dsp_pack, c->out_buff_lutram,
                     c->acc_single_copy, c->act_lut, c->exact_requant, c->depthwise);
    if (k < 0 || (size_t)k >= n)
        return tsr_err(TSR_EINVAL, "config json: buffer of %zu bytes is too small", n);
    return TSR_OK;
}

/* ----------------------------------------------------------- devices */

int tsr_gen_load(tsr_device_t *dev, const tsr_gen_prog_t *p)
{
    for (size_t i = 0; i < p->nbufs; i++) {
        const tsr_gen_buf_t *b = &p->bufs[i];
        int rc = tsr_mem_alloc_at(dev, b->addr, b->size);
        if (!rc)
            rc = tsr_mem_write(dev, b->addr, b->bytes, b->size);
        if (rc)
            return tsr_err_prefix(rc, "loading buffer %s: ", b->name);
    }
    return TSR_OK;
}

void tsr_gen_outputs_free(uint8_t *outs[TSR_GEN_MAX_BUFS])
{
    for (size_t i = 0; i < TSR_GEN_MAX_BUFS; i++) {
        free(outs[i]);
        outs[i] = NULL;
    }
}

int tsr_gen_read_outputs(tsr_device_t *dev, const tsr_gen_prog_t *p, uint8_t *outs[TSR_GEN_MAX_BUFS])
{
    int rc = TSR_OK;
    for (size_t i = 0; i < TSR_GEN_MAX_BUFS; i++)
        outs[i] = NULL;
    for (size_t i = 0; i < p->nbufs && !rc; i++) {
        if (!p->bufs[i].is_output)
            continue;
        outs[i] = malloc(p->bufs[i].size);
        if (!outs[i])
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        else if ((rc = tsr_mem_read(dev, p->bufs[i].addr, outs[i], p->bufs[i].size)))
            tsr_err_prefix(rc, "reading buffer %s: ", p->bufs[i].name);
    }
    if (rc)
        tsr_gen_outputs_free(outs);
    return rc;
}

uint64_t tsr_gen_dual_ops;

static int run_device(const char *backend, uint64_t seed, const tsr_gen_prog_t *p,
                      const tsr_insn_t *insns, size_t n, uint8_t *outs[TSR_GEN_MAX_BUFS])
{
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o;
    memset(&o, 0, sizeof o);
    o.seed = seed;
    int rc = tsr_device_open(backend, &p->cfg, &o, &dev);
    if (rc)
        return rc;
    if ((rc = tsr_gen_load(dev, p)) || (rc = tsr_submit(dev, insns, n)) ||
        (rc = tsr_wait(dev, 600000)) || (rc = tsr_gen_read_outputs(dev, p, outs)))
        goto out;
    tsr_counters_t ct;
    if (tsr_read_counters(dev, &ct) == TSR_OK && ct.has_hw)
        tsr_gen_dual_ops += ct.hw[TSR_CNT_DUAL_OPS];
out:
    tsr_device_close(dev);
    return rc;
}

/* The stream in program order on the reference machine, over a flat DRAM
 * image of the program's buffers. */
static int run_ref(const tsr_gen_prog_t *p, const tsr_insn_t *insns, size_t n,
                   uint8_t *outs[TSR_GEN_MAX_BUFS])
{
    int rc = TSR_OK;
    ref_machine_t m;
    ref_dram_t d = {NULL, TSR_GEN_BASE_ADDR, 0};
    for (size_t i = 0; i < TSR_GEN_MAX_BUFS; i++)
        outs[i] = NULL;
    if (ref_machine_init(&m, &p->cfg))
        return tsr_err(TSR_EBACKEND, "ref: %s", ref_errmsg());
    for (size_t i = 0; i < p->nbufs; i++)
        if (p->bufs[i].addr + p->bufs[i].size > d.base + d.size)
            d.size = p->bufs[i].addr + p->bufs[i].size - d.base;
    d.bytes = calloc(d.size ? d.size : 1, 1);
    if (!d.bytes) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < p->nbufs; i++)
        memcpy(d.bytes + (p->bufs[i].addr - d.base), p->bufs[i].bytes, p->bufs[i].size);
    for (size_t i = 0; i < n; i++)
        if (ref_exec(&m, &insns[i], &d)) {
            rc = tsr_err(TSR_EBACKEND, "ref: insn #%zu: %s", i, ref_errmsg());
            goto out;
        }
    for (size_t i = 0; i < p->nbufs; i++) {
        if (!p->bufs[i].is_output)
            continue;
        outs[i] = malloc(p->bufs[i].size);
        if (!outs[i]) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            goto out;
        }
        memcpy(outs[i], d.bytes + (p->bufs[i].addr - d.base), p->bufs[i].size);
    }
out:
    if (rc)
        tsr_gen_outputs_free(outs);
    free(d.bytes);
    ref_machine_free(&m);
    return rc;
}

int tsr_gen_run(const tsr_gen_exec_t *e, const tsr_gen_prog_t *p, const tsr_insn_t *insns,
                size_t n, uint8_t *outs[TSR_GEN_MAX_BUFS])
{
    int rc;
    for (size_t i = 0; i < TSR_GEN_MAX_BUFS; i++)
        outs[i] = NULL;
    if (e->run)
        rc = e->run(e->ctx, p, insns, n, outs);
    else if (!strcmp(e->name, "ref"))
        rc = run_ref(p, insns, n, outs);
    else
        rc = run_device(e->name, e->seed, p, insns, n, outs);
    if (rc)
        tsr_gen_outputs_free(outs);
    return rc;
}

int tsr_gen_compare(const tsr_gen_prog_t *p, uint8_t *const a[TSR_GEN_MAX_BUFS],
                    uint8_t *const b[TSR_GEN_MAX_BUFS], tsr_gen_diff_t *d)
{
    int found = 0;
    memset(d, 0, sizeof *d);
    for (size_t i = 0; i < p->nbufs; i++) {
        if (!p->bufs[i].is_output || !memcmp(a[i], b[i], p->bufs[i].size))
            continue;
        for (uint64_t k = 0; k < p->bufs[i].size; k++)
            if (a[i][k] != b[i][k]) {
                if (!found) {
                    d->buf = i;
                    d->offset = k;
                    d->a = a[i][k];
                    d->b = b[i][k];
                    found = 1;
                }
                d->nbytes++;
            }
    }
    return found;
}

/* Outputs of the prefix through insns[last], closed. 1 differs, 0 same, <0 error. */
static int prefix_differs(const tsr_gen_prog_t *p, const tsr_gen_exec_t *a, const tsr_gen_exec_t *b,
                          size_t last, tsr_gen_diff_t *d)
{
    tsr_insn_t *s = NULL;
    size_t n = 0;
    uint8_t *oa[TSR_GEN_MAX_BUFS] = {0}, *ob[TSR_GEN_MAX_BUFS] = {0};
    int rc = tsr_gen_close_stream(&p->cfg, p->insns, last + 1, &s, &n);
    if (!rc && !(rc = tsr_gen_run(a, p, s, n, oa)) && !(rc = tsr_gen_run(b, p, s, n, ob)))
        rc = tsr_gen_compare(p, oa, ob, d);
    tsr_gen_outputs_free(oa);
    tsr_gen_outputs_free(ob);
    free(s);
    return rc;
}

int tsr_gen_bisect(const tsr_gen_prog_t *p, const tsr_gen_exec_t *a, const tsr_gen_exec_t *b,
                   size_t *store_idx, tsr_gen_diff_t *d)
{
    int rc = TSR_OK;
    size_t ns = 0;
    size_t *st = malloc((p->nbody ? p->nbody : 1) * sizeof *st);
    *store_idx = (size_t)-1;
    memset(d, 0, sizeof *d);
    if (!st)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (size_t i = 0; i < p->nbody; i++)
        if (p->insns[i].opcode == TSR_OP_STORE && p->insns[i].x_size)
            st[ns++] = i;
    /* Invariant: the prefix through store lo agrees (lo = -1: no store yet,
     * outputs untouched), the one through store hi differs (hi = ns: the
     * whole program, which differs by assumption). */
    long lo = -1, hi = (long)ns;
    tsr_gen_diff_t hid;
    memset(&hid, 0, sizeof hid);
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        tsr_gen_diff_t md;
        rc = prefix_differs(p, a, b, st[mid], &md);
        if (rc < 0)
            goto out;
        if (rc) {
            hi = mid;
            hid = md;
        } else {
            lo = mid;
        }
    }
    rc = TSR_OK;
    if (hi < (long)ns) {
        *store_idx = st[hi];
        *d = hid;
    }
out:
    free(st);
    return rc;
}

static void print_diff(FILE *log, const tsr_gen_prog_t *p, const tsr_gen_diff_t *d, const char *na,
                       const char *nb)
{
    const tsr_gen_buf_t *b = &p->bufs[d->buf];
    uint32_t eb = tsr_config_elem_bytes(&p->cfg, (int)b->mem_type);
    fprintf(log,
            "  buffer %s (addr 0x%llx, %llu bytes): first difference at byte offset %llu "
            "(element %llu, byte %llu of it): %s 0x%02x, %s 0x%02x; %llu byte(s) differ in all\n",
            b->name, (unsigned long long)b->addr, (unsigned long long)b->size,
            (unsigned long long)d->offset, (unsigned long long)(d->offset / eb),
            (unsigned long long)(d->offset % eb), na, d->a, nb, d->b, (unsigned long long)d->nbytes);
}

static const char *exec_label(const tsr_gen_exec_t *e, char *buf, size_t n)
{
    if (e->name && !strcmp(e->name, "ref") && !e->run)
        snprintf(buf, n, "ref");
    else
        snprintf(buf, n, "%s(seed %llu)", e->name ? e->name : "custom", (unsigned long long)e->seed);
    return buf;
}

int tsr_gen_difftest(const tsr_gen_prog_t *p, const tsr_gen_exec_t *execs, size_t n, FILE *log)
{
    int rc = TSR_OK, mismatch = 0;
    uint8_t *outs[8][TSR_GEN_MAX_BUFS];
    char cfgjs[1024], la[64], lb[64];
    if (n > 8)
        return tsr_err(TSR_EINVAL, "difftest: at most 8 executors");
    memset(outs, 0, sizeof outs);
    tsr_gen_config_json(&p->cfg, cfgjs, sizeof cfgjs);
    for (size_t k = 0; k < n; k++)
        if ((rc = tsr_gen_run(&execs[k], p, p->insns, p->ninsns, outs[k]))) {
            if (log)
                fprintf(log, "difftest: program seed %llu, config %s: %s failed: %s (%s)\n",
                        (unsigned long long)p->seed, cfgjs, exec_label(&execs[k], la, sizeof la),
                        tsr_errname(rc), tsr_errmsg());
            goto out;
        }
    for (size_t k = 1; k < n; k++) {
        tsr_gen_diff_t d;
        if (!tsr_gen_compare(p, outs[0], outs[k], &d))
            continue;
        mismatch = 1;
        if (!log)
            continue;
        exec_label(&execs[0], la, sizeof la);
        exec_label(&execs[k], lb, sizeof lb);
        fprintf(log, "MISMATCH: program seed %llu (%zu instructions), %s vs %s\n  config %s\n",
                (unsigned long long)p->seed, p->ninsns, la, lb, cfgjs);
        print_diff(log, p, &d, la, lb);
        size_t si;
        tsr_gen_diff_t sd;
        int brc = tsr_gen_bisect(p, &execs[0], &execs[k], &si, &sd);
        if (brc) {
            fprintf(log, "  bisection failed: %s (%s)\n", tsr_errname(brc), tsr_errmsg());
        } else if (si == (size_t)-1) {
            fprintf(log, "  bisection: no STORE-terminated prefix differs; only the full stream\n");
        } else {
            char text[512];
            if (tsr_disasm_insn(&p->cfg, &p->insns[si], text, sizeof text) < 0)
                snprintf(text, sizeof text, "(disassembly failed: %s)", tsr_errmsg());
            fprintf(log, "  first diverging STORE: insn #%zu: %s\n", si, text);
            print_diff(log, p, &sd, la, lb);
        }
    }
out:
    for (size_t k = 0; k < n; k++)
        tsr_gen_outputs_free(outs[k]);
    return rc ? rc : mismatch;
}

uint64_t tsr_gen_mix(uint64_t x)
{
    return tsr_splitmix64(&x); /* one step from state x: the finaliser of x + gamma */
}
