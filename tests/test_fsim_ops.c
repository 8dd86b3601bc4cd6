/*
 * test_fsim_ops: instruction semantics of the functional simulator, checked
 * against the independent reference model (tsr_ref.c, written from
 * isa/semantics.md) on random data, on the tiny and default presets and on
 * a few random valid configs.
 *
 * Every program is built by a small builder that runs the reference as it
 * appends instructions, records which on-chip rows each instruction reads
 * and writes, and then sets dependency flags so the stream is token-correct
 * for the pipe model and its result is the in-order result. Two flag modes:
 * SERIAL orders every instruction after its predecessor; RELAXED only adds
 * the tokens real row hazards need, so stages genuinely overlap and the
 * random stage interleavings (nonzero fsim seeds) have something to vary.
 *
 * All programs start with a prologue that loads every on-chip buffer from
 * DRAM (so the result never depends on the simulator's power-on state) and
 * end with an epilogue that dumps the output buffer, then every bit of
 * every accumulator (add 0, then repeated shr by the output width, storing
 * each time), so the final DRAM image exposes the whole on-chip state.
 * DRAM is split into one section per memory type; stores only write the out
 * section and loads never read it, so there are no DRAM hazards to order.
 *
 * Set TSR_TEST_SEED to vary the random configs and data, TSR_TEST_PROGRAMS
 * to change the number of random programs per config (default 100).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr_config.h"
#include "tsr_counters.h"
#include "tsr_dram.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_fsim.h"
#include "tsr_isa.h"
#include "tsr_ref.h"
#include "tsr_util.h"

/* ------------------------------------------------------------------ rng */

static uint64_t g_seed = 0x7e55e7a2024ull;

static uint64_t rng_u64(uint64_t *s)
{
    return tsr_splitmix64(s);
}

static uint32_t rnd(uint64_t *s, uint32_t n)
{
    return n ? (uint32_t)(rng_u64(s) % n) : 0;
}

/* Uniform signed W-bit value. */
static int32_t rnd_w(uint64_t *s, int W)
{
    return ref_wrap((int64_t)(rng_u64(s) >> 32), W);
}

/* -------------------------------------------------------------- configs */

typedef struct cfgcase {
    char name[64];
    char json[1024];
    tsr_config_t cfg;
} cfgcase_t;

#define MAX_CFG 8
static cfgcase_t g_cfgs[MAX_CFG];
static int g_ncfg;

static int make_random_config(uint64_t seed, int idx, int law, cfgcase_t *cc)
{
    uint64_t r = seed;
    char err[512] = "";
    for (int attempt = 0; attempt < 500; attempt++) {
        int lb = (int)rnd(&r, 3), lbi = 1 + (int)rnd(&r, 4), lbo = 1 + (int)rnd(&r, 4);
        int liw = 3 + (int)rnd(&r, 2), lww = 3 + (int)rnd(&r, 2);
        int inp_row = lb + lbi + liw - 3, wgt_row = lbo + lbi + lww - 3, acc_row = lb + lbo + law - 3;
        int ld_inp = 6 + (int)rnd(&r, 4), ld_wgt = 5 + (int)rnd(&r, 4), ld_acc = 6 + (int)rnd(&r, 4);
        int ld_uop = 6 + (int)rnd(&r, 4);
        int cmd = 4 << rnd(&r, 3), dep = 1 << rnd(&r, 3);
        snprintf(cc->json, sizeof cc->json,
                 "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": %d, \"LOG_WGT_WIDTH\": %d, "
                 "\"LOG_ACC_WIDTH\": %d, \"LOG_BATCH\": %d, \"LOG_BLOCK_IN\": %d, "
                 "\"LOG_BLOCK_OUT\": %d, \"LOG_UOP_BUFF_SIZE\": %d, \"LOG_INP_BUFF_SIZE\": %d, "
                 "\"LOG_WGT_BUFF_SIZE\": %d, \"LOG_ACC_BUFF_SIZE\": %d, \"CMD_QUEUE_DEPTH\": %d, "
                 "\"DEP_QUEUE_DEPTH\": %d, \"EXACT_REQUANT\": %d}",
                 liw, lww, law, lb, lbi, lbo, 2 + ld_uop, inp_row + ld_inp, wgt_row + ld_wgt,
                 acc_row + ld_acc, cmd, dep, law == 5 && idx % 2 == 0);
        snprintf(cc->name, sizeof cc->name, "random%d", idx);
        if (tsr_config_parse(cc->json, cc->name, &cc->cfg) == TSR_OK)
            return 0;
        snprintf(err, sizeof err, "%s", tsr_errmsg());
    }
    fprintf(stderr, "could not build an accepted random config (seed 0x%" PRIx64 "): last error: %s\n  %s\n",
            seed, err, cc->json);
    return -1;
}

static int group_setup(void **state)
{
    (void)state;
    const char *env = getenv("TSR_TEST_SEED");
    if (env && *env)
        g_seed = strtoull(env, NULL, 0);
    fprintf(stderr, "test_fsim_ops: seed 0x%" PRIx64 " (set TSR_TEST_SEED to change)\n", g_seed);
    static const char *presets[] = {"tiny", "default"};
    g_ncfg = 0;
    for (int i = 0; i < 2; i++) {
        cfgcase_t *cc = &g_cfgs[g_ncfg];
        if (tsr_config_load(presets[i], &cc->cfg) != TSR_OK) {
            fprintf(stderr, "cannot load preset %s: %s\n", presets[i], tsr_errmsg());
            return -1;
        }
        snprintf(cc->name, sizeof cc->name, "%s", presets[i]);
        snprintf(cc->json, sizeof cc->json, "(preset %s)", presets[i]);
        g_ncfg++;
    }
    /* three with 32-bit accumulators as VTA, one with 16-bit */
    for (int i = 0; i < 4; i++) {
        cfgcase_t *cc = &g_cfgs[g_ncfg];
        if (make_random_config(g_seed * 31 + (uint64_t)i + 1, i, i < 3 ? 5 : 4, cc) != 0)
            return -1;
        fprintf(stderr, "  %s: %s\n", cc->name, cc->json);
        g_ncfg++;
    }
    return 0;
}

/* ------------------------------------------------------- DRAM layout */

#define DATA_ADDR 0x100000ull
#define EXTRA_ELEMS 256 /* elements beyond the buffer depth in each section */
#define STORE_AREA 1024 /* out elements for test stores; the dumps follow */
#define NEDGE_ROWS 8    /* acc elements 0..7 hold edge values */

typedef struct layout {
    uint64_t data_addr, data_size, insn_addr;
    uint64_t sec_off[TSR_MEM_COUNT];   /* byte offset of each section in the data region */
    uint64_t sec_elems[TSR_MEM_COUNT]; /* elements in each section */
    uint32_t eb[TSR_MEM_COUNT];        /* element bytes */
    uint64_t scratch_uop;              /* first uop element free for test-specific uops */
    int ndumps;                        /* out-buffer dumps in the epilogue */
} layout_t;

static const char *mem_names[TSR_MEM_COUNT] = {"uop", "wgt", "inp", "acc", "out", "acc8"};

static void make_layout(const ref_machine_t *m, layout_t *L)
{
    static const uint32_t order[] = {TSR_MEM_UOP, TSR_MEM_WGT, TSR_MEM_INP,
                                     TSR_MEM_ACC, TSR_MEM_ACC8, TSR_MEM_OUT};
    memset(L, 0, sizeof *L);
    L->ndumps = 1 + m->acc_width / m->out_width;
    L->scratch_uop = m->uop_depth;
    uint64_t off = 0;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        uint32_t mem = order[k];
        uint32_t eb = ref_elem_bytes(m, mem);
        uint64_t n = mem == TSR_MEM_OUT ? STORE_AREA + (uint64_t)L->ndumps * m->acc_depth
                                        : ref_sram_depth(m, mem) + EXTRA_ELEMS;
        L->sec_off[mem] = off;
        L->sec_elems[mem] = n;
        L->eb[mem] = eb;
        assert_true(eb > 0 && 4096 % eb == 0);
        off = (off + n * eb + 4095) & ~4095ull;
    }
    L->data_addr = DATA_ADDR;
    L->data_size = off;
    L->insn_addr = DATA_ADDR + off + 4096;
}

/* DRAM element index (what LOAD/STORE dram_base holds) of element k of a section. */
static uint32_t elem_index(const layout_t *L, uint32_t mem, uint64_t k)
{
    return (uint32_t)((L->data_addr + L->sec_off[mem]) / L->eb[mem] + k);
}

/* ------------------------------------------------------ program builder */

enum { MODE_SERIAL = 0, MODE_RELAXED = 1 };
enum { ST_LOAD = 0, ST_COMPUTE = 1, ST_STORE = 2 };
enum { HZ_INP = 0, HZ_WGT = 1, HZ_OUT = 2, HZ_N = 3 };

typedef struct span {
    int64_t lo, hi; /* rows [lo, hi); empty if lo >= hi */
} span_t;

typedef struct hazard {
    span_t rd[HZ_N], wr[HZ_N];
} hazard_t;

typedef struct pb {
    const cfgcase_t *cc;
    const tsr_config_t *cfg;
    layout_t L;
    int mode;
    uint64_t seed;   /* for messages */
    uint8_t *init;   /* initial data-region bytes (what the simulator's DRAM gets) */
    ref_dram_t rd;   /* reference DRAM, updated by the reference's stores */
    ref_machine_t m; /* reference state, advanced as instructions are appended */
    tsr_insn_t *ins;
    hazard_t *hz;
    size_t n, cap;
    uint8_t *bin; /* encoded stream after pb_finish */
} pb_t;

static int stage_of(const tsr_insn_t *in)
{
    if (in->opcode == TSR_OP_LOAD)
        return (in->mem_type == TSR_MEM_INP || in->mem_type == TSR_MEM_WGT) ? ST_LOAD : ST_COMPUTE;
    if (in->opcode == TSR_OP_STORE)
        return ST_STORE;
    return ST_COMPUTE;
}

static void print_insn(FILE *f, size_t i, const tsr_insn_t *in)
{
    static const char *alu[] = {"min", "max", "add", "shr", "mul", "mov", "rshr", "mulhr"};
    fprintf(f, "  #%-3zu ", i);
    switch (in->opcode) {
    case TSR_OP_LOAD:
    case TSR_OP_STORE:
        fprintf(f, "%s %s sram=%u dram=%u y=%u x=%u stride=%u pad=%u,%u,%u,%u",
                in->opcode == TSR_OP_LOAD ? "load" : "store",
                in->mem_type < TSR_MEM_COUNT ? mem_names[in->mem_type] : "?", in->sram_base,
                in->dram_base, in->y_size, in->x_size, in->x_stride, in->y_pad0, in->y_pad1,
                in->x_pad0, in->x_pad1);
        break;
    case TSR_OP_GEMM:
        fprintf(f, "gemm reset=%u uop=%u:%u iter=%u,%u dst=%u,%u src=%u,%u wgt=%u,%u", in->reset,
                in->uop_bgn, in->uop_end, in->iter_out, in->iter_in, in->dst_factor_out,
                in->dst_factor_in, in->src_factor_out, in->src_factor_in, in->wgt_factor_out,
                in->wgt_factor_in);
        break;
    case TSR_OP_ALU:
        fprintf(f, "alu %s reset=%u uop=%u:%u iter=%u,%u dst=%u,%u src=%u,%u use_imm=%u imm=%d",
                in->alu_opcode < 8 ? alu[in->alu_opcode] : "?", in->reset, in->uop_bgn, in->uop_end,
                in->iter_out, in->iter_in, in->dst_factor_out, in->dst_factor_in,
                in->src_factor_out, in->src_factor_in, in->use_imm, in->imm);
        break;
    case TSR_OP_FINISH:
        fprintf(f, "finish");
        break;
    default:
        fprintf(f, "opcode %u", in->opcode);
    }
    fprintf(f, "%s%s%s%s\n", in->pop_prev ? " pop_prev" : "", in->pop_next ? " pop_next" : "",
            in->push_prev ? " push_prev" : "", in->push_next ? " push_next" : "");
}

static void pb_print(const pb_t *pb)
{
    fprintf(stderr, "program (config %s, %s flags, seed 0x%" PRIx64 ", %zu insns):\n", pb->cc->name,
            pb->mode == MODE_SERIAL ? "serial" : "relaxed", pb->seed, pb->n);
    for (size_t i = 0; i < pb->n; i++)
        print_insn(stderr, i, &pb->ins[i]);
}

static void store_uop_bytes(uint8_t *p, uint64_t raw, uint32_t nbytes)
{
    for (uint32_t k = 0; k < nbytes; k++)
        p[k] = (uint8_t)(raw >> (8 * k));
}

/* Write value v (width 8/16/32) little-endian; used only to plant edge data. */
static void put_le(uint8_t *p, int width, int32_t v)
{
    uint32_t u = (uint32_t)v;
    for (int k = 0; k < width / 8; k++)
        p[k] = (uint8_t)(u >> (8 * k));
}

/* Little-endian signed value of bytes 1, 2 or 4. */
static int32_t rd_le_s(const uint8_t *p, int bytes)
{
    uint32_t u = 0;
    for (int k = 0; k < bytes; k++)
        u |= (uint32_t)p[k] << (8 * k);
    return ref_wrap((int64_t)u, 8 * bytes);
}

static const int32_t edges32[] = {INT32_MIN, INT32_MIN + 1, -1073741824, -65536, -32769, -32768,
                                  -257, -129, -128, -3, -2, -1, 0, 1, 2, 3, 127, 128, 255,
                                  32767, 32768, 65535, 1073741824, INT32_MAX - 1, INT32_MAX};
#define NEDGES32 ((int)(sizeof edges32 / sizeof edges32[0]))

static void pb_init(pb_t *pb, const cfgcase_t *cc, int mode, uint64_t seed)
{
    memset(pb, 0, sizeof *pb);
    pb->cc = cc;
    pb->cfg = &cc->cfg;
    pb->mode = mode;
    pb->seed = seed;
    if (ref_machine_init(&pb->m, pb->cfg) != 0)
        fail_msg("ref_machine_init: %s", ref_errmsg());
    make_layout(&pb->m, &pb->L);
    pb->init = malloc(pb->L.data_size);
    pb->rd.bytes = malloc(pb->L.data_size);
    pb->rd.base = pb->L.data_addr;
    pb->rd.size = pb->L.data_size;
    assert_non_null(pb->init);
    assert_non_null(pb->rd.bytes);

    uint64_t r = seed;
    for (uint64_t i = 0; i < pb->L.data_size; i += 8) {
        uint64_t v = rng_u64(&r);
        for (uint64_t k = 0; k < 8 && i + k < pb->L.data_size; k++)
            pb->init[i + k] = (uint8_t)(v >> (8 * k));
    }

    /* uop section: element 0 is the all-zero uop (dst = src = wgt = 0), the
     * rest random uops with every field below half its buffer depth, so
     * loops with small factors stay in range */
    const ref_machine_t *m = &pb->m;
    uint32_t half_src = (m->inp_depth < m->acc_depth ? m->inp_depth : m->acc_depth) / 2;
    uint8_t *usec = pb->init + pb->L.sec_off[TSR_MEM_UOP];
    for (uint64_t e = 0; e < pb->L.sec_elems[TSR_MEM_UOP]; e++) {
        tsr_uop_t u = {0, 0, 0};
        uint64_t raw = 0;
        if (e != 0) {
            u.dst = rnd(&r, m->acc_depth / 2);
            u.src = rnd(&r, half_src);
            u.wgt = rnd(&r, m->wgt_depth / 2);
        }
        if (tsr_uop_encode(pb->cfg, &u, &raw) != TSR_OK)
            fail_msg("tsr_uop_encode(%u,%u,%u): %s", u.dst, u.src, u.wgt, tsr_errmsg());
        store_uop_bytes(usec + e * m->uop_bytes, raw, m->uop_bytes);
    }

    /* acc elements 0..7: edge values in every lane arrangement; acc8 likewise */
    int lanes = m->batch * m->block_out;
    uint8_t *asec = pb->init + pb->L.sec_off[TSR_MEM_ACC];
    uint8_t *a8sec = pb->init + pb->L.sec_off[TSR_MEM_ACC8];
    static const int8_t edges8[] = {-128, -127, -1, 0, 1, 126, 127, -2};
    for (int e = 0; e < NEDGE_ROWS; e++) {
        for (int l = 0; l < lanes; l++) {
            int32_t v = ref_wrap(edges32[(e * 5 + l * 3) % NEDGES32], m->acc_width);
            put_le(asec + (size_t)e * m->acc_bytes + (size_t)l * (m->acc_width / 8), m->acc_width, v);
            a8sec[(size_t)e * m->acc8_bytes + l] = (uint8_t)edges8[(e + l) % 8];
        }
    }
    memcpy(pb->rd.bytes, pb->init, pb->L.data_size);
}

static void pb_free(pb_t *pb)
{
    ref_machine_free(&pb->m);
    free(pb->init);
    free(pb->rd.bytes);
    free(pb->ins);
    free(pb->hz);
    free(pb->bin);
    memset(pb, 0, sizeof *pb);
}

/* Place test-specific uops at scratch elements [first, first + n) of the uop section. */
static void pb_poke_uops(pb_t *pb, uint64_t first, const tsr_uop_t *u, size_t n)
{
    assert_true(first + n <= pb->L.sec_elems[TSR_MEM_UOP]);
    for (size_t i = 0; i < n; i++) {
        uint64_t raw = 0;
        if (tsr_uop_encode(pb->cfg, &u[i], &raw) != TSR_OK)
            fail_msg("tsr_uop_encode(%u,%u,%u): %s", u[i].dst, u[i].src, u[i].wgt, tsr_errmsg());
        uint64_t off = pb->L.sec_off[TSR_MEM_UOP] + (first + i) * pb->m.uop_bytes;
        store_uop_bytes(pb->init + off, raw, pb->m.uop_bytes);
        store_uop_bytes(pb->rd.bytes + off, raw, pb->m.uop_bytes);
    }
}

static void span_add(span_t *s, int64_t v)
{
    if (s->lo >= s->hi) {
        s->lo = v;
        s->hi = v + 1;
        return;
    }
    if (v < s->lo)
        s->lo = v;
    if (v + 1 > s->hi)
        s->hi = v + 1;
}

static int span_overlap(span_t a, span_t b)
{
    return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}

/* Rows of inp/wgt/out an instruction reads and writes, given the current
 * uop buffer (known exactly: uop loads run in order with GEMM/ALU). */
static void compute_hazard(const pb_t *pb, const tsr_insn_t *in, hazard_t *h)
{
    memset(h, 0, sizeof *h);
    const ref_machine_t *m = &pb->m;
    if (in->opcode == TSR_OP_LOAD && in->x_size > 0 &&
        (in->mem_type == TSR_MEM_INP || in->mem_type == TSR_MEM_WGT)) {
        int64_t rows = ((int64_t)in->y_pad0 + in->y_size + in->y_pad1) *
                       ((int64_t)in->x_pad0 + in->x_size + in->x_pad1);
        int k = in->mem_type == TSR_MEM_INP ? HZ_INP : HZ_WGT;
        h->wr[k].lo = in->sram_base;
        h->wr[k].hi = in->sram_base + rows;
    } else if (in->opcode == TSR_OP_STORE && in->x_size > 0) {
        h->rd[HZ_OUT].lo = in->sram_base;
        h->rd[HZ_OUT].hi = in->sram_base + (int64_t)in->y_size * in->x_size;
    } else if (in->opcode == TSR_OP_GEMM || in->opcode == TSR_OP_ALU) {
        for (int64_t i = 0; i < in->iter_out; i++)
            for (int64_t j = 0; j < in->iter_in; j++)
                for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
                    uint32_t d, s, w;
                    ref_uop_fields(m, m->uop[u], &d, &s, &w);
                    span_add(&h->wr[HZ_OUT], d + i * in->dst_factor_out + j * in->dst_factor_in);
                    if (in->opcode == TSR_OP_GEMM && !in->reset) {
                        span_add(&h->rd[HZ_INP], s + i * in->src_factor_out + j * in->src_factor_in);
                        span_add(&h->rd[HZ_WGT], w + i * in->wgt_factor_out + j * in->wgt_factor_in);
                    }
                }
    }
}

static int conflicts(const hazard_t *a, const hazard_t *b)
{
    for (int k = 0; k < HZ_N; k++)
        if (span_overlap(a->wr[k], b->rd[k]) || span_overlap(a->rd[k], b->wr[k]) ||
            span_overlap(a->wr[k], b->wr[k]))
            return 1;
    return 0;
}

static void pb_push(pb_t *pb, const tsr_insn_t *in)
{
    if (pb->n == pb->cap) {
        pb->cap = pb->cap ? pb->cap * 2 : 64;
        pb->ins = realloc(pb->ins, pb->cap * sizeof *pb->ins);
        pb->hz = realloc(pb->hz, pb->cap * sizeof *pb->hz);
        assert_non_null(pb->ins);
        assert_non_null(pb->hz);
    }
    compute_hazard(pb, in, &pb->hz[pb->n]);
    pb->ins[pb->n] = *in;
    pb->n++;
    if (ref_exec(&pb->m, in, &pb->rd) != 0) {
        pb_print(pb);
        fail_msg("reference rejected generated instruction #%zu: %s", pb->n - 1, ref_errmsg());
    }
}

static tsr_insn_t mk_load(uint32_t mem, uint32_t sram, uint32_t dram, uint32_t ys, uint32_t xs,
                          uint32_t stride, uint32_t y0, uint32_t y1, uint32_t x0, uint32_t x1)
{
    tsr_insn_t in;
    memset(&in, 0, sizeof in);
    in.opcode = TSR_OP_LOAD;
    in.mem_type = mem;
    in.sram_base = sram;
    in.dram_base = dram;
    in.y_size = ys;
    in.x_size = xs;
    in.x_stride = stride;
    in.y_pad0 = y0;
    in.y_pad1 = y1;
    in.x_pad0 = x0;
    in.x_pad1 = x1;
    return in;
}

static tsr_insn_t mk_store(uint32_t sram, uint32_t dram, uint32_t ys, uint32_t xs, uint32_t stride)
{
    tsr_insn_t in = mk_load(TSR_MEM_OUT, sram, dram, ys, xs, stride, 0, 0, 0, 0);
    in.opcode = TSR_OP_STORE;
    return in;
}

typedef struct loops {
    uint32_t bgn, end, io, ii, dfo, dfi, sfo, sfi, wfo, wfi;
} loops_t;

static tsr_insn_t mk_gemm(uint32_t reset, loops_t l)
{
    tsr_insn_t in;
    memset(&in, 0, sizeof in);
    in.opcode = TSR_OP_GEMM;
    in.reset = reset;
    in.uop_bgn = l.bgn;
    in.uop_end = l.end;
    in.iter_out = l.io;
    in.iter_in = l.ii;
    in.dst_factor_out = l.dfo;
    in.dst_factor_in = l.dfi;
    in.src_factor_out = l.sfo;
    in.src_factor_in = l.sfi;
    in.wgt_factor_out = l.wfo;
    in.wgt_factor_in = l.wfi;
    return in;
}

static tsr_insn_t mk_alu(uint32_t op, uint32_t reset, loops_t l, uint32_t use_imm, int32_t imm)
{
    tsr_insn_t in = mk_gemm(reset, l);
    in.opcode = TSR_OP_ALU;
    in.wgt_factor_out = in.wgt_factor_in = 0;
    in.alu_opcode = op;
    in.use_imm = use_imm;
    in.imm = imm;
    return in;
}

/* Append an instruction (flags are computed at pb_finish). In SERIAL mode a
 * compute no-op (uop load of nothing) bridges load->store / store->load,
 * since those stages share no token queue. */
static void pb_add(pb_t *pb, tsr_insn_t in)
{
    in.pop_prev = in.pop_next = in.push_prev = in.push_next = 0;
    if (pb->mode == MODE_SERIAL && pb->n > 0) {
        int a = stage_of(&pb->ins[pb->n - 1]), b = stage_of(&in);
        if ((a == ST_LOAD && b == ST_STORE) || (a == ST_STORE && b == ST_LOAD)) {
            tsr_insn_t nop = mk_load(TSR_MEM_UOP, 0, 0, 0, 0, 0, 0, 0, 0, 0);
            pb_push(pb, &nop);
        }
    }
    pb_push(pb, &in);
}

/* Append FINISH, set dependency flags, encode. For each instruction X and
 * each neighbouring stage T: if X must follow some earlier T-instruction
 * that is not yet known to precede X's stage, the last T-instruction before
 * X pushes a token toward X's stage and X pops it. Pushes and pops are then
 * paired in program order on every queue, each pop waits only for an
 * earlier instruction, and no token is left over. */
static void pb_finish(pb_t *pb)
{
    tsr_insn_t fin;
    memset(&fin, 0, sizeof fin);
    fin.opcode = TSR_OP_FINISH;
    pb_push(pb, &fin);

    int64_t known[3][3];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            known[a][b] = -1;
    for (size_t x = 0; x < pb->n; x++) {
        tsr_insn_t *X = &pb->ins[x];
        int S = stage_of(X);
        int is_finish = X->opcode == TSR_OP_FINISH;
        for (int T = 0; T < 3; T++) {
            if (T == S || (S != ST_COMPUTE && T != ST_COMPUTE))
                continue;
            int64_t need = -1, last = -1;
            for (size_t y = 0; y < x; y++) {
                if (stage_of(&pb->ins[y]) != T)
                    continue;
                last = (int64_t)y;
                if (is_finish || pb->mode == MODE_SERIAL || conflicts(&pb->hz[x], &pb->hz[y]))
                    need = (int64_t)y;
            }
            if (need <= known[S][T])
                continue;
            tsr_insn_t *L = &pb->ins[last];
            uint32_t *push = (S > T) ? &L->push_next : &L->push_prev;
            uint32_t *pop = (S > T) ? &X->pop_prev : &X->pop_next;
            if (*push || *pop) {
                pb_print(pb);
                fail_msg("flag builder: insn %" PRId64 " already pushes toward insn %zu's stage", last, x);
            }
            *push = 1;
            *pop = 1;
            known[S][T] = last;
        }
    }

    pb->bin = malloc(pb->n * TSR_INSN_BYTES);
    assert_non_null(pb->bin);
    for (size_t i = 0; i < pb->n; i++) {
        tsr_insn_bits_t bits;
        if (tsr_insn_encode(pb->cfg, &pb->ins[i], &bits) != TSR_OK) {
            pb_print(pb);
            fail_msg("tsr_insn_encode(#%zu): %s", i, tsr_errmsg());
        }
        tsr_insn_bits_store(&bits, pb->bin + i * TSR_INSN_BYTES);
    }
}

/* Run the encoded program on a fresh DRAM + fsim. got receives the data
 * region afterwards. Returns TSR_OK or the error (message in errbuf). */
static int pb_run_fsim(const pb_t *pb, uint64_t seed, uint8_t *got, tsr_counters_t *ctr,
                       char *errbuf, size_t errlen)
{
    tsr_dram_t *d = NULL;
    tsr_fsim_t *s = NULL;
    const layout_t *L = &pb->L;
    uint64_t insn_bytes = pb->n * TSR_INSN_BYTES;
    const char *step = "tsr_dram_create";
    int rc = tsr_dram_create(L->data_addr, L->insn_addr - L->data_addr + insn_bytes + 4096, &d);
    if (rc != TSR_OK)
        goto out;
    step = "tsr_dram_alloc_at(data)";
    if ((rc = tsr_dram_alloc_at(d, L->data_addr, L->data_size)) != TSR_OK)
        goto out;
    step = "tsr_dram_alloc_at(insns)";
    if ((rc = tsr_dram_alloc_at(d, L->insn_addr, insn_bytes)) != TSR_OK)
        goto out;
    step = "tsr_dram_write";
    if ((rc = tsr_dram_write(d, L->data_addr, pb->init, L->data_size)) != TSR_OK)
        goto out;
    if ((rc = tsr_dram_write(d, L->insn_addr, pb->bin, insn_bytes)) != TSR_OK)
        goto out;
    step = "tsr_fsim_create";
    if ((rc = tsr_fsim_create(pb->cfg, d, &s)) != TSR_OK)
        goto out;
    step = "tsr_fsim_run";
    if ((rc = tsr_fsim_run(s, L->insn_addr, (uint32_t)pb->n, seed)) != TSR_OK)
        goto out;
    step = "tsr_dram_read";
    if ((rc = tsr_dram_read(d, L->data_addr, got, L->data_size)) != TSR_OK)
        goto out;
    if (ctr)
        *ctr = *tsr_fsim_counters(s);
out:
    if (rc != TSR_OK)
        snprintf(errbuf, errlen, "%s: %s (%s)", step, tsr_errmsg(), tsr_errname(rc));
    tsr_fsim_destroy(s);
    tsr_dram_destroy(d);
    return rc;
}

/* First difference between two data-region images, located by section. */
static int report_diff(const pb_t *pb, const uint8_t *got, const uint8_t *want, const char *gname,
                       const char *wname, const char *what)
{
    const layout_t *L = &pb->L;
    if (memcmp(got, want, L->data_size) == 0)
        return 0;
    uint64_t off = 0, ndiff = 0;
    while (got[off] == want[off])
        off++;
    for (uint64_t i = off; i < L->data_size; i++)
        ndiff += got[i] != want[i];
    uint32_t mem = TSR_MEM_COUNT;
    for (uint32_t k = 0; k < TSR_MEM_COUNT; k++)
        if (off >= L->sec_off[k] && off < L->sec_off[k] + L->sec_elems[k] * L->eb[k])
            mem = k;
    fprintf(stderr, "%s: config %s, data seed 0x%" PRIx64 ": %" PRIu64 " bytes differ; first at data byte 0x%" PRIx64
            " (device 0x%" PRIx64 ")",
            what, pb->cc->name, pb->seed, ndiff, off, L->data_addr + off);
    if (mem < TSR_MEM_COUNT) {
        uint64_t k = (off - L->sec_off[mem]) / L->eb[mem];
        uint64_t b = (off - L->sec_off[mem]) % L->eb[mem];
        fprintf(stderr, " = %s section element %" PRIu64 " byte %" PRIu64, mem_names[mem], k, b);
        if (mem == TSR_MEM_OUT && k >= STORE_AREA)
            fprintf(stderr, " (epilogue dump %" PRIu64 " of out/acc row %" PRIu64 ")",
                    (k - STORE_AREA) / pb->m.acc_depth, (k - STORE_AREA) % pb->m.acc_depth);
        fprintf(stderr, "\n  %s element:", gname);
        uint64_t e0 = L->sec_off[mem] + k * L->eb[mem];
        for (uint64_t i = 0; i < L->eb[mem] && i < 64; i++)
            fprintf(stderr, " %02x", got[e0 + i]);
        fprintf(stderr, "\n  %s element:", wname);
        for (uint64_t i = 0; i < L->eb[mem] && i < 64; i++)
            fprintf(stderr, " %02x", want[e0 + i]);
        fprintf(stderr, "\n  initial    :");
        for (uint64_t i = 0; i < L->eb[mem] && i < 64; i++)
            fprintf(stderr, " %02x", pb->init[e0 + i]);
    }
    fprintf(stderr, "\n  %s 0x%02x, %s 0x%02x\n", gname, got[off], wname, want[off]);
    pb_print(pb);
    return -1;
}

/* Run a finished program under each schedule seed; every result must equal
 * the reference (and hence each other). */
static void pb_check(const pb_t *pb, const uint64_t *seeds, int nseeds)
{
    uint8_t *got = malloc(pb->L.data_size);
    uint8_t *first = malloc(pb->L.data_size);
    assert_non_null(got);
    assert_non_null(first);
    for (int i = 0; i < nseeds; i++) {
        char err[1024], what[128];
        int rc = pb_run_fsim(pb, seeds[i], got, NULL, err, sizeof err);
        if (rc != TSR_OK) {
            pb_print(pb);
            fail_msg("config %s, schedule seed 0x%" PRIx64 ": %s", pb->cc->name, seeds[i], err);
        }
        if (i > 0) {
            snprintf(what, sizeof what, "fsim schedule 0x%" PRIx64 " vs schedule 0x%" PRIx64, seeds[i], seeds[0]);
            if (report_diff(pb, got, first, "seed-k", "seed-0", what) != 0)
                fail_msg("%s: DRAM differs between stage interleavings", what);
        } else {
            memcpy(first, got, pb->L.data_size);
        }
        snprintf(what, sizeof what, "fsim (schedule seed 0x%" PRIx64 ") vs reference", seeds[i]);
        if (report_diff(pb, got, pb->rd.bytes, "fsim", "ref ", what) != 0)
            fail_msg("%s: mismatch", what);
    }
    free(got);
    free(first);
}

static const uint64_t default_seeds[] = {0, 0x5eed1234ull};
#define CHECK(pb) pb_check((pb), default_seeds, 2)

/* ---------------------------------------------- prologue / epilogue */

/* Split n rows into y rows of x (x <= 32768) for a whole-buffer transfer. */
static void split_rows(uint32_t n, uint32_t *y, uint32_t *x)
{
    *x = n > 32768 ? 32768 : n;
    *y = n / *x;
}

static void load_all(pb_t *pb, uint32_t mem)
{
    uint32_t y, x;
    split_rows(ref_sram_depth(&pb->m, mem), &y, &x);
    pb_add(pb, mk_load(mem, 0, elem_index(&pb->L, mem, 0), y, x, x, 0, 0, 0, 0));
}

/* ALU op with an immediate over every accumulator row, through uop row 0
 * which the caller keeps as the all-zero uop. */
static void alu_all(pb_t *pb, uint32_t op, int32_t imm)
{
    uint32_t io = pb->m.acc_depth, ii = 1;
    while (io > 8192) {
        io /= 2;
        ii *= 2;
    }
    loops_t l = {0, 1, io, ii, ii, 1, ii, 1, 0, 0};
    pb_add(pb, mk_alu(op, 0, l, 1, imm));
}

static void store_dump(pb_t *pb, int k)
{
    uint32_t y, x;
    split_rows(pb->m.acc_depth, &y, &x);
    pb_add(pb, mk_store(0, elem_index(&pb->L, TSR_MEM_OUT, STORE_AREA + (uint64_t)k * pb->m.acc_depth), y, x, x));
}

static void pb_prologue(pb_t *pb)
{
    load_all(pb, TSR_MEM_UOP);
    load_all(pb, TSR_MEM_INP);
    load_all(pb, TSR_MEM_WGT);
    load_all(pb, TSR_MEM_ACC);
    alu_all(pb, TSR_ALU_ADD, 0); /* out = low bits of acc */
}

static void pb_epilogue(pb_t *pb)
{
    store_dump(pb, 0);
    pb_add(pb, mk_load(TSR_MEM_UOP, 0, elem_index(&pb->L, TSR_MEM_UOP, 0), 1, 1, 1, 0, 0, 0, 0));
    alu_all(pb, TSR_ALU_ADD, 0);
    store_dump(pb, 1);
    for (int k = 2; k < pb->L.ndumps; k++) {
        alu_all(pb, TSR_ALU_SHR, pb->m.out_width);
        store_dump(pb, k);
    }
}

/* --------------------------------------------------- random generators */

typedef struct loadopts {
    int pad_max;        /* 0: no padding */
    int stride_gt;      /* x_stride > x_size */
    uint32_t row_limit; /* rows usable (0 = whole buffer) */
    int allow_x0;       /* sometimes x_size = 0 */
} loadopts_t;

static void gen_load(pb_t *pb, uint64_t *r, uint32_t mem, const loadopts_t *o)
{
    uint32_t depth = o->row_limit ? o->row_limit : ref_sram_depth(&pb->m, mem);
    uint64_t nel = pb->L.sec_elems[mem];
    for (int attempt = 0; attempt < 10000; attempt++) {
        uint32_t xs = (o->allow_x0 && rnd(r, 8) == 0) ? 0 : 1 + rnd(r, 6);
        uint32_t ys = 1 + rnd(r, 4);
        uint32_t stride = xs + (o->stride_gt ? 1 : 0) + rnd(r, 6);
        uint32_t p[4] = {0, 0, 0, 0};
        if (mem != TSR_MEM_UOP && o->pad_max > 0)
            for (int k = 0; k < 4; k++)
                p[k] = rnd(r, (uint32_t)o->pad_max + 1);
        uint64_t rows = (uint64_t)(p[0] + ys + p[1]) * (p[2] + xs + p[3]);
        if (xs > 0 && rows > depth)
            continue;
        uint64_t span = (uint64_t)(ys - 1) * stride + xs;
        if (span > nel)
            continue;
        uint32_t sram = xs > 0 ? rnd(r, (uint32_t)(depth - rows + 1)) : rnd(r, depth);
        uint32_t dram = elem_index(&pb->L, mem, rnd(r, (uint32_t)(nel - span + 1)));
        tsr_insn_t in = mk_load(mem, sram, dram, ys, xs, stride, p[0], p[1], p[2], p[3]);
        /* inp pads hold pad_value: random, including the extremes */
        if (mem == TSR_MEM_INP && o->pad_max)
            in.pad_value = (int32_t)rnd(r, 256) - 128;
        pb_add(pb, in);
        return;
    }
    fail_msg("gen_load: no fitting load for %s", mem_names[mem]);
}

static void gen_store(pb_t *pb, uint64_t *r, int allow_x0, int stride_gt)
{
    for (int attempt = 0; attempt < 1000; attempt++) {
        uint32_t xs = (allow_x0 && rnd(r, 8) == 0) ? 0 : 1 + rnd(r, 6);
        uint32_t ys = 1 + rnd(r, 4);
        uint32_t stride = xs + (stride_gt ? 1 : 0) + rnd(r, 6);
        uint64_t rows = (uint64_t)ys * xs;
        if (rows > pb->m.acc_depth)
            continue;
        uint64_t span = (uint64_t)(ys - 1) * stride + xs;
        uint32_t sram = rnd(r, (uint32_t)(pb->m.acc_depth - rows + (xs ? 1 : 0)));
        uint32_t dram = elem_index(&pb->L, TSR_MEM_OUT, rnd(r, (uint32_t)(STORE_AREA - span + 1)));
        pb_add(pb, mk_store(sram, dram, ys, xs, stride));
        return;
    }
    fail_msg("gen_store: no fitting store");
}

/* Do a kernel's indices stay in range for the current uop buffer? */
static int loops_fit(const pb_t *pb, const loops_t *l, int is_gemm)
{
    const ref_machine_t *m = &pb->m;
    if (l->end > m->uop_depth || l->bgn >= l->end)
        return 0;
    for (uint32_t u = l->bgn; u < l->end; u++) {
        uint32_t d, s, w;
        ref_uop_fields(m, m->uop[u], &d, &s, &w);
        uint64_t i = l->io - 1, j = l->ii - 1;
        if (d + i * l->dfo + j * l->dfi >= m->acc_depth)
            return 0;
        if (s + i * l->sfo + j * l->sfi >= (is_gemm ? m->inp_depth : m->acc_depth))
            return 0;
        if (is_gemm && w + i * l->wfo + j * l->wfi >= m->wgt_depth)
            return 0;
    }
    return 1;
}

static loops_t gen_loops(pb_t *pb, uint64_t *r, int is_gemm, int two_d)
{
    const ref_machine_t *m = &pb->m;
    for (int attempt = 0; attempt < 200; attempt++) {
        loops_t l;
        l.bgn = rnd(r, m->uop_depth);
        l.end = l.bgn + 1 + rnd(r, 4);
        if (l.end > m->uop_depth)
            l.end = m->uop_depth;
        l.io = (two_d ? 2 : 1) + rnd(r, 3);
        l.ii = (two_d ? 2 : 1) + rnd(r, 3);
        if (rnd(r, 8) == 0)
            l.io += rnd(r, 6);
        l.dfo = rnd(r, 4);
        l.dfi = rnd(r, 4);
        l.sfo = rnd(r, 4);
        l.sfi = rnd(r, 4);
        l.wfo = is_gemm ? rnd(r, 4) : 0;
        l.wfi = is_gemm ? rnd(r, 4) : 0;
        if (loops_fit(pb, &l, is_gemm))
            return l;
    }
    loops_t l = {0, 1, 1, 1, 0, 0, 0, 0, 0, 0}; /* uop row 0 is valid */
    if (!loops_fit(pb, &l, is_gemm)) {
        pb_print(pb);
        fail_msg("gen_loops: no valid kernel");
    }
    return l;
}

static void gen_gemm(pb_t *pb, uint64_t *r, int reset, int two_d)
{
    loops_t l = gen_loops(pb, r, 1, two_d);
    pb_add(pb, mk_gemm(reset >= 0 ? (uint32_t)reset : rnd(r, 8) == 0, l));
}

static int32_t pick_imm(uint64_t *r, uint32_t op)
{
    static const int32_t special[] = {0,   1,   -1,  2,   -2,  7,   -7,  8,   15,    16,    31,   32,
                                      33,  -31, -32, -33, 40,  -40, 127, -128, 255, 32767, -32768};
    if ((op == TSR_ALU_SHR || op == TSR_ALU_RSHR) && rnd(r, 4) != 0)
        return (int32_t)rnd(r, 81) - 40;
    if (rnd(r, 2))
        return special[rnd(r, sizeof special / sizeof special[0])];
    return (int32_t)rnd(r, 65536) - 32768;
}

static void gen_alu(pb_t *pb, uint64_t *r, int op, int use_imm, int reset, int two_d)
{
    uint32_t o = op >= 0 ? (uint32_t)op : rnd(r, 8);
    uint32_t ui = use_imm >= 0 ? (uint32_t)use_imm : rnd(r, 2);
    uint32_t rs = reset >= 0 ? (uint32_t)reset : rnd(r, 12) == 0;
    loops_t l = gen_loops(pb, r, 0, two_d);
    pb_add(pb, mk_alu(o, rs, l, ui, pick_imm(r, o)));
}

static void gen_random_body(pb_t *pb, uint64_t *r, int count)
{
    for (int k = 0; k < count; k++) {
        uint32_t w = rnd(r, 100);
        loadopts_t lo = {rnd(r, 4) == 0 ? 15 : 3, rnd(r, 2), 0, 1};
        if (w < 12)
            gen_load(pb, r, TSR_MEM_INP, &lo);
        else if (w < 22)
            gen_load(pb, r, TSR_MEM_WGT, &lo);
        else if (w < 30)
            gen_load(pb, r, TSR_MEM_UOP, &lo);
        else if (w < 36)
            gen_load(pb, r, TSR_MEM_ACC, &lo);
        else if (w < 42)
            gen_load(pb, r, TSR_MEM_ACC8, &lo);
        else if (w < 62)
            gen_gemm(pb, r, -1, rnd(r, 2));
        else if (w < 84)
            gen_alu(pb, r, -1, -1, -1, rnd(r, 2));
        else
            gen_store(pb, r, 1, rnd(r, 2));
    }
}

static void gen_random_program(pb_t *pb, uint64_t *r)
{
    pb_prologue(pb);
    gen_random_body(pb, r, 20 + (int)rnd(r, 41));
    pb_epilogue(pb);
    pb_finish(pb);
}

static uint64_t case_seed(const char *test, int cfg, int k)
{
    uint64_t h = g_seed ^ 0xcbf29ce484222325ull;
    for (const char *p = test; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    return h ^ ((uint64_t)cfg << 40) ^ ((uint64_t)k << 8);
}

/* ======================================================== ALU unit tests */

static void alu_compare(uint32_t op, int32_t a, int32_t b, int W)
{
    int32_t want = ref_alu(op, a, b, W);
    int32_t got = tsr_alu_apply(op, a, b, W);
    if (want != got)
        fail_msg("tsr_alu_apply(op=%u %s, a=%" PRId32 ", b=%" PRId32 ", W=%d) = %" PRId32 ", reference %" PRId32,
                 op, tsr_alu_name(op) ? tsr_alu_name(op) : "?", a, b, W, got, want);
}

static void test_alu_unit(void **state)
{
    (void)state;
    static const int widths[] = {32, 16};
    for (int wi = 0; wi < 2; wi++) {
        int W = widths[wi];
        int32_t vals[NEDGES32 + 81 + 8];
        int nv = 0;
        for (int i = 0; i < NEDGES32; i++)
            vals[nv++] = ref_wrap(edges32[i], W);
        for (int s = -40; s <= 40; s++)
            vals[nv++] = s;
        int64_t lim = (int64_t)1 << (W - 1);
        vals[nv++] = (int32_t)-lim;
        vals[nv++] = (int32_t)(-lim + 1);
        vals[nv++] = (int32_t)(lim - 1);
        vals[nv++] = (int32_t)(lim - 2);
        vals[nv++] = (int32_t)(lim / 2);
        vals[nv++] = (int32_t)(-lim / 2);
        vals[nv++] = (int32_t)(lim / 2 + 1);
        vals[nv++] = (int32_t)(-lim / 2 - 1);
        for (uint32_t op = 0; op < TSR_ALU_COUNT; op++)
            for (int i = 0; i < nv && op != TSR_ALU_LUT; i++) /* (lut reads tables: test_alu_lut) */
                for (int j = 0; j < nv; j++)
                    alu_compare(op, vals[i], vals[j], W);
        uint64_t r = case_seed("alu_unit", W, 0);
        for (int k = 0; k < 200000; k++) {
            uint32_t op = rnd(&r, TSR_ALU_COUNT);
            if (op == TSR_ALU_LUT)
                op = TSR_ALU_MIN;
            int32_t a = rnd_w(&r, W);
            int32_t b = rnd(&r, 3) == 0 ? (int32_t)rnd(&r, 81) - 40 : rnd_w(&r, W);
            if (rnd(&r, 16) == 0)
                a = vals[rnd(&r, (uint32_t)nv)];
            alu_compare(op, a, b, W);
        }
    }
}

/* fscale: fsim's float32 arithmetic (tsr_alu_apply) against the reference's
 * integer-only rounding chain (tests/tsr_ref.c, the RTL's way) on the
 * cases where the two roundings matter: |a| above 2^24 (int -> float32
 * rounds, ties included), products that land on .5 exactly (ties to even,
 * both ways), scales from 2^-40 to 2^10 (requantization scales are 2^-20 ..
 * 1), saturation, and the non-normal scales (0). 2 million random pairs on
 * top. */
static void test_alu_fscale(void **state)
{
    (void)state;
    const uint32_t F = TSR_ALU_FSCALE;
    static const int32_t as[] = {0, 1, -1, 2, 3, -3, 127, -128, 255, 16777216, 16777217, 16777218, 16777219,
                                 -16777217, -16777219, 33554431, 33554433, 33554435, 2147483647, -2147483647 - 1,
                                 2147483520, 2147483584, 2147483583, -2147483584, 1073741825, 12345678};
    static const uint32_t bs[] = {0x3f000000u /* 0.5 */, 0x3e800000u /* 0.25 */, 0x3f800000u /* 1 */,
                                  0x3fc00000u /* 1.5 */, 0x40000000u /* 2 */, 0xbf000000u /* -0.5 */,
                                  0x3f800001u, 0x3f7fffffu, 0x00000000u, 0x80000000u, 0x00000001u /* subnormal */,
                                  0x007fffffu, 0x7f800000u /* inf */, 0x7fc00000u /* NaN */, 0xff800000u,
                                  0x4f000000u /* 2^31 */, 0x5f000000u, 0x00800000u /* smallest normal */,
                                  0x3a83126fu /* 0.001 */, 0x38d1b717u /* 1e-4 */};
    for (size_t i = 0; i < sizeof as / sizeof as[0]; i++)
        for (size_t j = 0; j < sizeof bs / sizeof bs[0]; j++)
            alu_compare(F, as[i], (int32_t)bs[j], 32);
    /* ties: a * 2^-k for odd a lands on .5 when k = 1 */
    for (int32_t a = -1000; a <= 1000; a++) {
        alu_compare(F, a, 0x3f000000, 32);  /* a/2 */
        alu_compare(F, a, 0x3e800000, 32);  /* a/4 */
        alu_compare(F, a, 0x3eaaaaabu, 32); /* ~a/3 */
    }
    uint64_t r = case_seed("alu_fscale", 32, 0);
    for (int k = 0; k < 2000000; k++) {
        /* a: any int32, or near a power of two, or small */
        int32_t a = (int32_t)(uint32_t)rnd_w(&r, 32);
        uint32_t kind = rnd(&r, 4);
        if (kind == 1)
            a >>= rnd(&r, 31);
        else if (kind == 2)
            a = (int32_t)((1u << rnd(&r, 31)) + rnd(&r, 5) - 2) * (rnd(&r, 2) ? 1 : -1);
        /* b: exponent 87..137 (2^-40 .. 2^10), any significand and sign; or any bits */
        uint32_t b = ((87u + rnd(&r, 51)) << 23) | (uint32_t)rnd(&r, 1u << 23) | (rnd(&r, 8) == 0 ? 0x80000000u : 0);
        if (rnd(&r, 32) == 0)
            b = (uint32_t)rnd_w(&r, 32);
        else if (rnd(&r, 8) == 0)
            b &= ~0x7fffu; /* short significands: exact products and ties */
        alu_compare(F, a, (int32_t)b, 32);
    }
}

/* A stream with an ALU op the config lacks (fscale without EXACT_REQUANT):
 * the verifier names the instruction and the key; fsim, when the stream
 * bypasses the verifier, stops with an error when the op starts. */
static void test_alu_unavailable(void **state)
{
    (void)state;
    tsr_config_t cfg;
    assert_int_equal(tsr_config_load("default", &cfg), TSR_OK);
    assert_int_equal(cfg.exact_requant, 0);
    assert_int_equal(tsr_alu_op_available(&cfg, TSR_ALU_FSCALE), 0);
    assert_string_equal(tsr_alu_op_key(TSR_ALU_FSCALE), "EXACT_REQUANT");
    assert_int_equal(tsr_alu_op_available(&cfg, TSR_ALU_RQFIN), 1);
    cfg.exact_requant = 1;
    assert_int_equal(tsr_alu_op_available(&cfg, TSR_ALU_FSCALE), 1);
    assert_int_equal(tsr_alu_op_available(&cfg, TSR_ALU_COUNT), 0);
}

/* The lut op (ACT_LUT) end to end, on configs with 1, 2, 4 and 8 tables,
 * 32- and 16-bit accumulators, batch 1 and 2: random tables, random
 * accumulator rows (edge values among them), an immediate table and a
 * register operand (any value: its low bits pick the table). fsim runs the
 * instructions one by one (tsr_fsim_exec); the reference machine runs them
 * too; and each output lane is also computed here from the formula of
 * isa/semantics.md. Then the refusals on a config without ACT_LUT. */
static void test_alu_lut(void **state)
{
    (void)state;
    static const struct {
        int n, law, lb;
    } cases[] = {{1, 5, 0}, {2, 5, 1}, {4, 5, 0}, {8, 5, 1}, {2, 4, 0}, {8, 4, 1}};
    enum { R = 16 };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":%d,\"LOG_BATCH\":%d,"
                 "\"LOG_BLOCK\":2,\"LOG_UOP_BUFF_SIZE\":10,\"LOG_INP_BUFF_SIZE\":9,\"LOG_WGT_BUFF_SIZE\":10,"
                 "\"LOG_ACC_BUFF_SIZE\":11,\"ACT_LUT\":%d}",
                 cases[ci].law, cases[ci].lb, cases[ci].n);
        tsr_config_t c;
        if (tsr_config_parse(json, "lut", &c))
            fail_msg("%s: %s", json, tsr_errmsg());
        const uint32_t nt = (uint32_t)c.act_lut, lanes = (uint32_t)(c.batch * c.block_out);
        const int W = c.acc_width, ab = W / 8, ob = c.out_width / 8;
        uint64_t r = case_seed("alu_lut", (int)ci, cases[ci].n);
        /* DRAM: uops, tables, accumulators, outputs */
        const uint64_t base = 0x100000, size = 0x40000, a_uop = base, a_lut = base + 0x1000,
                       a_acc = base + 0x3000, a_out = base + 0x20000;
        uint8_t *img = calloc(size, 1);
        assert_non_null(img);
        for (uint64_t i = 0x1000; i < 0x20000; i++)
            img[i] = (uint8_t)rng_u64(&r);
        for (uint32_t row = 0; row < 2 * R; row++) /* some edge values (low bytes 0x00, 0xff, 0x80, 0x7f) */
            for (uint32_t l = 0; l < lanes; l++)
                if (rnd(&r, 4) == 0)
                    put_le(img + 0x3000 + ((size_t)row * lanes + l) * (size_t)ab, W,
                           ref_wrap(edges32[rnd(&r, NEDGES32)], W));
        const uint32_t t_imm = rnd(&r, nt);
        tsr_uop_t u[2] = {{0, 0, 0}, {R / 2, R + R / 2, 0}};
        for (int k = 0; k < 2; k++) {
            uint64_t raw;
            assert_int_equal(tsr_uop_encode(&c, &u[k], &raw), TSR_OK);
            store_uop_bytes(img + (size_t)k * c.uop_bytes, raw, c.uop_bytes);
        }
        tsr_insn_t s[7];
        memset(s, 0, sizeof s);
        s[0].opcode = s[1].opcode = s[2].opcode = TSR_OP_LOAD;
        s[0].mem_type = TSR_MEM_UOP, s[0].dram_base = (uint32_t)(a_uop / c.uop_bytes), s[0].y_size = 1;
        s[0].x_size = s[0].x_stride = 2;
        s[1].mem_type = TSR_MEM_LUT, s[1].dram_base = (uint32_t)(a_lut / 256), s[1].y_size = 1;
        s[1].x_size = s[1].x_stride = nt;
        s[2].mem_type = TSR_MEM_ACC, s[2].dram_base = (uint32_t)(a_acc / c.acc_bytes), s[2].y_size = 1;
        s[2].x_size = s[2].x_stride = 2 * R;
        for (int k = 3; k < 5; k++) {
            s[k].opcode = TSR_OP_ALU;
            s[k].alu_opcode = TSR_ALU_LUT;
            s[k].uop_bgn = (uint32_t)(k - 3);
            s[k].uop_end = (uint32_t)(k - 2);
            s[k].iter_out = R / 2;
            s[k].iter_in = 1;
            s[k].dst_factor_out = s[k].src_factor_out = 1;
        }
        s[3].use_imm = 1;
        s[3].imm = (int32_t)t_imm;
        s[5].opcode = TSR_OP_STORE;
        s[5].mem_type = TSR_MEM_OUT, s[5].dram_base = (uint32_t)(a_out / c.out_bytes), s[5].y_size = 1;
        s[5].x_size = s[5].x_stride = R;
        s[6].opcode = TSR_OP_FINISH;
        assert_int_equal(c.acc_bytes * 2 * R <= 0x1d000, 1);

        tsr_dram_t *d = NULL;
        tsr_fsim_t *f = NULL;
        assert_int_equal(tsr_dram_create(base, size, &d), TSR_OK);
        assert_int_equal(tsr_dram_alloc_at(d, base, size), TSR_OK);
        assert_int_equal(tsr_dram_write(d, base, img, size), TSR_OK);
        assert_int_equal(tsr_fsim_create(&c, d, &f), TSR_OK);
        ref_machine_t m;
        assert_int_equal(ref_machine_init(&m, &c), 0);
        ref_dram_t rd = {malloc(size), base, size};
        assert_non_null(rd.bytes);
        memcpy(rd.bytes, img, size);
        for (int k = 0; k < 7; k++) {
            if (tsr_fsim_exec(f, &s[k]) != TSR_OK)
                fail_msg("%s: fsim insn #%d: %s", json, k, tsr_errmsg());
            if (ref_exec(&m, &s[k], &rd))
                fail_msg("%s: reference insn #%d: %s", json, k, ref_errmsg());
        }
        /* counters: the lut LOAD by memory type, and printed (only) when there is one */
        const tsr_counters_t *ct = tsr_fsim_counters(f);
        assert_int_equal(ct->loads[TSR_MEM_LUT], 1);
        assert_int_equal(ct->bytes_loaded[TSR_MEM_LUT], 256u * nt);
        char *txt = NULL;
        size_t tl = 0;
        FILE *mf = open_memstream(&txt, &tl);
        assert_non_null(mf);
        tsr_counters_print(ct, mf);
        tsr_counters_t none;
        memset(&none, 0, sizeof none);
        fputs("--\n", mf);
        tsr_counters_print(&none, mf);
        fclose(mf);
        char want[64];
        snprintf(want, sizeof want, "load_lut    insns      1  bytes %u\n", 256u * nt);
        assert_non_null(strstr(txt, want));
        assert_null(strstr(strstr(txt, "--\n"), "load_lut"));
        free(txt);
        uint8_t *got = malloc((size_t)R * c.out_bytes);
        assert_non_null(got);
        assert_int_equal(tsr_dram_read(d, a_out, got, (uint64_t)R * c.out_bytes), TSR_OK);
        for (uint32_t row = 0; row < R; row++)
            for (uint32_t l = 0; l < lanes; l++) {
                /* the formula: entry [b & (n - 1)][a & 255] of the tables as loaded, sign-extended */
                const uint8_t *acc = img + 0x3000;
                int32_t a = ref_wrap((int64_t)rd_le_s(acc + ((size_t)row * lanes + l) * (size_t)ab, ab), W);
                int32_t b = row < R / 2 ? (int32_t)t_imm
                                        : rd_le_s(acc + ((size_t)(row + R) * lanes + l) * (size_t)ab, ab);
                int32_t want = (int8_t)img[0x1000 + ((uint32_t)b & (nt - 1)) * 256 + ((uint32_t)a & 255)];
                const size_t o = ((size_t)row * lanes + l) * (size_t)ob;
                int32_t g = rd_le_s(got + o, ob), rf = rd_le_s(rd.bytes + (a_out - base) + o, ob);
                if (g != want || rf != want)
                    fail_msg("%s: row %u lane %u (a=%d, b=%d): fsim %d, reference %d, formula %d", json, row, l, a,
                             b, g, rf, want);
            }
        free(got);
        ref_machine_free(&m);
        free(rd.bytes);
        tsr_fsim_destroy(f);
        tsr_dram_destroy(d);
        free(img);
    }

    /* without ACT_LUT: the op, a LOAD and a flag-only LOAD of lut stop fsim, naming the key */
    tsr_config_t c0;
    assert_int_equal(tsr_config_load("tiny", &c0), TSR_OK);
    tsr_dram_t *d = NULL;
    tsr_fsim_t *f = NULL;
    assert_int_equal(tsr_dram_create(0x100000, 0x10000, &d), TSR_OK);
    assert_int_equal(tsr_fsim_create(&c0, d, &f), TSR_OK);
    tsr_insn_t in;
    memset(&in, 0, sizeof in);
    in.opcode = TSR_OP_ALU;
    in.alu_opcode = TSR_ALU_LUT;
    in.uop_end = 1;
    in.iter_out = in.iter_in = 1;
    assert_int_equal(tsr_fsim_exec(f, &in), TSR_EINVAL);
    assert_string_equal(tsr_errmsg(), "ALU op lut needs config key ACT_LUT > 0");
    memset(&in, 0, sizeof in);
    in.opcode = TSR_OP_LOAD;
    in.mem_type = TSR_MEM_LUT;
    assert_int_equal(tsr_fsim_exec(f, &in), TSR_EINVAL);
    assert_string_equal(tsr_errmsg(), "LOAD of lut needs config key ACT_LUT > 0");
    in.opcode = TSR_OP_STORE;
    assert_int_equal(tsr_fsim_exec(f, &in), TSR_EINVAL);
    tsr_fsim_destroy(f);
    tsr_dram_destroy(d);
}

/* tsr_alu_apply_row (the row form fsim runs, with its own lane loops for
 * the common operators) lane by lane against the reference machine's ALU:
 * every operator at both widths, an immediate, a second row, and the row
 * itself as the second operand (each lane must read the old value). */
static void test_alu_row(void **state)
{
    (void)state;
    static const int widths[] = {32, 16};
    enum { N = 37 };
    for (int wi = 0; wi < 2; wi++) {
        const int W = widths[wi];
        uint64_t r = case_seed("alu_row", W, 0);
        for (int k = 0; k < 20000; k++) {
            uint32_t op = rnd(&r, TSR_ALU_COUNT);
            const uint32_t n = 1 + rnd(&r, N), mode = rnd(&r, 3);
            if (op == TSR_ALU_LUT) /* (reads tables: test_alu_lut) */
                op = TSR_ALU_MAX;
            int32_t a[N], b[N], a0[N], b0[N];
            for (uint32_t l = 0; l < n; l++) {
                /* (small values too, so equal and neighbouring operands occur) */
                a[l] = a0[l] = rnd(&r, 3) == 0 ? (int32_t)rnd(&r, 81) - 40 : rnd_w(&r, W);
                b[l] = b0[l] = rnd(&r, 3) == 0 ? (int32_t)rnd(&r, 81) - 40 : rnd_w(&r, W);
            }
            const int32_t imm = rnd(&r, 2) ? (int32_t)rnd(&r, 81) - 40 : rnd_w(&r, W);
            const int32_t *src = mode == 0 ? NULL : mode == 1 ? b : a;
            tsr_alu_apply_row(op, a, src, imm, n, W);
            for (uint32_t l = 0; l < n; l++) {
                int32_t y = mode == 0 ? imm : mode == 1 ? b0[l] : a0[l];
                int32_t want = ref_alu(op, a0[l], y, W);
                if (a[l] != want)
                    fail_msg("tsr_alu_apply_row(op=%u %s, W=%d, %s) lane %u of %u: a=%" PRId32 ", b=%" PRId32
                             " gives %" PRId32 ", reference %" PRId32 " (seed %" PRIu64 ")",
                             op, tsr_alu_name(op), W, mode == 0 ? "imm" : mode == 1 ? "row" : "row == dst", l, n,
                             a0[l], y, a[l], want, g_seed);
            }
        }
    }
}

/* Hand-computed values, so that the reference and the simulator cannot be
 * wrong together without a third witness. */
static void test_alu_constants(void **state)
{
    (void)state;
    static const struct {
        uint32_t op;
        int32_t a, b;
        int W;
        int32_t want;
    } t[] = {
        {TSR_ALU_RSHR, 5, 1, 32, 3},
        {TSR_ALU_RSHR, -5, 1, 32, -3},
        {TSR_ALU_RSHR, 4, 1, 32, 2},
        {TSR_ALU_RSHR, -4, 1, 32, -2},
        {TSR_ALU_RSHR, 3, 1, 32, 2},
        {TSR_ALU_RSHR, -3, 1, 32, -2},
        {TSR_ALU_RSHR, 6, 2, 32, 2},    /* 1.5 -> 2 */
        {TSR_ALU_RSHR, -6, 2, 32, -2},  /* -1.5 -> -2 */
        {TSR_ALU_RSHR, 5, 2, 32, 1},    /* 1.25 -> 1 */
        {TSR_ALU_RSHR, -5, 2, 32, -1},
        {TSR_ALU_RSHR, 7, 2, 32, 2},    /* 1.75 -> 2 */
        {TSR_ALU_RSHR, -7, 2, 32, -2},
        {TSR_ALU_RSHR, 7, 0, 32, 7},
        {TSR_ALU_RSHR, 7, -2, 32, 28},  /* s <= 0: as shr, i.e. left shift */
        {TSR_ALU_RSHR, 1 << 30, 31, 32, 1},     /* 0.5 -> 1 */
        {TSR_ALU_RSHR, -(1 << 30), 31, 32, -1}, /* -0.5 -> -1 */
        {TSR_ALU_RSHR, INT32_MIN, 40, 32, -1},  /* clamped to 31: exactly -1 */
        {TSR_ALU_RSHR, INT32_MAX, 40, 32, 1},   /* (2^31-1)/2^31 -> 1 */
        {TSR_ALU_RSHR, 100, 3, 16, 13},         /* 12.5 -> 13 */
        {TSR_ALU_RSHR, -100, 3, 16, -13},
        {TSR_ALU_SHR, -1, 1, 32, -1},
        {TSR_ALU_SHR, -7, 1, 32, -4},            /* arithmetic: floor */
        {TSR_ALU_SHR, -8, 2, 32, -2},
        {TSR_ALU_SHR, 1, -3, 32, 8},
        {TSR_ALU_SHR, 1, -31, 32, INT32_MIN},
        {TSR_ALU_SHR, 1, -40, 32, INT32_MIN},    /* clamped to -31 */
        {TSR_ALU_SHR, 3, -31, 32, INT32_MIN},    /* wrap */
        {TSR_ALU_SHR, 3, -30, 32, -1073741824},
        {TSR_ALU_SHR, INT32_MIN, 40, 32, -1},
        {TSR_ALU_SHR, INT32_MAX, 40, 32, 0},
        {TSR_ALU_SHR, 1, -15, 16, -32768},
        {TSR_ALU_SHR, 1, -20, 16, -32768},
        {TSR_ALU_SHR, -32768, 20, 16, -1},
        {TSR_ALU_SHR, 0x1234, -4, 16, 0x2340},
        {TSR_ALU_ADD, INT32_MAX, 1, 32, INT32_MIN},
        {TSR_ALU_ADD, INT32_MIN, -1, 32, INT32_MAX},
        {TSR_ALU_ADD, 32767, 1, 16, -32768},
        {TSR_ALU_ADD, -5, 3, 32, -2},
        {TSR_ALU_MUL, 65536, 65536, 32, 0},
        {TSR_ALU_MUL, INT32_MIN, -1, 32, INT32_MIN},
        {TSR_ALU_MUL, 46341, 46341, 32, -2147479015},
        {TSR_ALU_MUL, -3, 7, 32, -21},
        {TSR_ALU_MUL, 200, 200, 16, -25536},
        {TSR_ALU_MUL, 181, 181, 16, 32761},
        {TSR_ALU_MULHR, INT32_MIN, INT32_MIN, 32, INT32_MAX},
        {TSR_ALU_MULHR, 1 << 30, 1 << 30, 32, 1 << 29},
        {TSR_ALU_MULHR, INT32_MIN, INT32_MAX, 32, -2147483647},
        {TSR_ALU_MULHR, INT32_MAX, INT32_MAX, 32, 2147483646},
        {TSR_ALU_MULHR, 3, 1 << 30, 32, 2},   /* 1.5 -> 2 */
        {TSR_ALU_MULHR, -3, 1 << 30, 32, -1}, /* (-3*2^30 + 1 - 2^30) / 2^31 truncated */
        {TSR_ALU_MULHR, -5, 1 << 30, 32, -2},
        {TSR_ALU_MULHR, INT32_MIN, -1, 32, 1},  /* 2^31 + 2^30 over 2^31 */
        {TSR_ALU_MULHR, INT32_MIN, 1, 32, -1},
        {TSR_ALU_MULHR, -32768, -32768, 16, 32767},
        {TSR_ALU_MULHR, 16384, 16384, 16, 8192},
        {TSR_ALU_MIN, INT32_MIN, INT32_MAX, 32, INT32_MIN},
        {TSR_ALU_MIN, -1, 0, 32, -1},
        {TSR_ALU_MAX, INT32_MIN, INT32_MAX, 32, INT32_MAX},
        {TSR_ALU_MAX, -1, -2, 16, -1},
        {TSR_ALU_MOV, 12345, -7, 32, -7},
        {TSR_ALU_MOV, 1, -32768, 16, -32768},
        /* rqfin, b = shift | zp << 5 | lo << 14 | hi << 23 */
        {TSR_ALU_RQFIN, 5, 1071644673, 32, 3}, /* 5/2 = 2.5 -> 3 */
        {TSR_ALU_RQFIN, -5, 1071644673, 32, -3}, /* -2.5 -> -3 (away from zero) */
        {TSR_ALU_RQFIN, -4, 1071644673, 32, -2},
        {TSR_ALU_RQFIN, 1000, 1071656962, 32, 122}, /* 250 - 128 */
        {TSR_ALU_RQFIN, INT32_MAX, 2139103200, 32, 255}, /* the zero-point add does not wrap */
        {TSR_ALU_RQFIN, INT32_MIN, 2143297536, 32, -256},
        {TSR_ALU_RQFIN, 7, 1071644675, 32, 1}, /* 0.875 -> 1 */
        {TSR_ALU_RQFIN, -32768, 2143289375, 16, -1}, /* shift clamped to 15 */
        {TSR_ALU_RQFIN, 0, 42106880, 32, 5}, /* lo > hi: max first, then min */
        {TSR_ALU_RQFIN, 300, 1071644672, 32, 127}, /* saturates */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int32_t r = ref_alu(t[i].op, t[i].a, t[i].b, t[i].W);
        if (r != t[i].want)
            fail_msg("reference: op %u (%" PRId32 ", %" PRId32 ") W=%d = %" PRId32 ", hand value %" PRId32,
                     t[i].op, t[i].a, t[i].b, t[i].W, r, t[i].want);
        int32_t s = tsr_alu_apply(t[i].op, t[i].a, t[i].b, t[i].W);
        if (s != t[i].want)
            fail_msg("tsr_alu_apply: op %u (%" PRId32 ", %" PRId32 ") W=%d = %" PRId32 ", hand value %" PRId32,
                     t[i].op, t[i].a, t[i].b, t[i].W, s, t[i].want);
    }
}

/* The reference derives its geometry itself; it must agree with the config. */
static void test_config_geometry(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        const tsr_config_t *cfg = &g_cfgs[c].cfg;
        ref_machine_t m;
        assert_int_equal(ref_machine_init(&m, cfg), 0);
        struct {
            const char *what;
            uint64_t ref, cfg;
        } t[] = {
            {"batch", (uint64_t)m.batch, (uint64_t)cfg->batch},
            {"block_in", (uint64_t)m.block_in, (uint64_t)cfg->block_in},
            {"block_out", (uint64_t)m.block_out, (uint64_t)cfg->block_out},
            {"acc_width", (uint64_t)m.acc_width, (uint64_t)cfg->acc_width},
            {"out_width", (uint64_t)m.out_width, (uint64_t)cfg->out_width},
            {"inp_bytes", m.inp_bytes, cfg->inp_bytes},
            {"wgt_bytes", m.wgt_bytes, cfg->wgt_bytes},
            {"acc_bytes", m.acc_bytes, cfg->acc_bytes},
            {"acc8_bytes", m.acc8_bytes, cfg->acc8_bytes},
            {"out_bytes", m.out_bytes, cfg->out_bytes},
            {"uop_depth", m.uop_depth, cfg->uop_depth},
            {"inp_depth", m.inp_depth, cfg->inp_depth},
            {"wgt_depth", m.wgt_depth, cfg->wgt_depth},
            {"acc_depth", m.acc_depth, cfg->acc_depth},
            {"out_depth", m.acc_depth, cfg->out_depth},
            {"elem_bytes(acc8)", m.acc8_bytes, tsr_config_elem_bytes(cfg, TSR_MEM_ACC8)},
            {"elem_bytes(out)", m.out_bytes, tsr_config_elem_bytes(cfg, TSR_MEM_OUT)},
            {"sram_depth(acc8)", m.acc_depth, tsr_config_sram_depth(cfg, TSR_MEM_ACC8)},
        };
        ref_machine_free(&m);
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            if (t[i].ref != t[i].cfg)
                fail_msg("config %s: %s: reference derives %" PRIu64 ", config says %" PRIu64, g_cfgs[c].name,
                         t[i].what, t[i].ref, t[i].cfg);
    }
}

/* ============================================================ GEMM tests */

/* Signed little-endian value of width 8/16/32 bits: a decoder separate from
 * the reference's, for the direct matmul check. */
static int64_t le_val(const uint8_t *p, int idx, int width)
{
    int nb = width / 8;
    uint64_t u = 0;
    for (int k = 0; k < nb; k++)
        u |= (uint64_t)p[idx * nb + k] << (8 * k);
    if (u >> (width - 1))
        return (int64_t)u - ((int64_t)1 << width);
    return (int64_t)u;
}

/* A tiled matmul C[m][n] = sum_k X[m][k] W[n][k]^T with 2-D uop loops,
 * checked against the reference and against a direct matmul computed from
 * the DRAM bytes. */
static void test_gemm_matmul(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        pb_t pb;
        pb_init(&pb, &g_cfgs[c], MODE_SERIAL, case_seed("gemm_matmul", c, 0));
        const ref_machine_t *m = &pb.m;
        uint32_t MT = 3, KT = 2, NT = 2;
        uint32_t xe = 16, we = 16, ue = (uint32_t)pb.L.scratch_uop; /* DRAM elements used */
        tsr_uop_t u[2];
        for (uint32_t k = 0; k < KT; k++) {
            u[k].dst = 0;
            u[k].src = k;
            u[k].wgt = k;
        }
        pb_poke_uops(&pb, ue, u, KT);
        pb_prologue(&pb);
        pb_add(&pb, mk_load(TSR_MEM_INP, 0, elem_index(&pb.L, TSR_MEM_INP, xe), 1, MT * KT, MT * KT, 0, 0, 0, 0));
        pb_add(&pb, mk_load(TSR_MEM_WGT, 0, elem_index(&pb.L, TSR_MEM_WGT, we), 1, NT * KT, NT * KT, 0, 0, 0, 0));
        pb_add(&pb, mk_load(TSR_MEM_UOP, 0, elem_index(&pb.L, TSR_MEM_UOP, ue), 1, KT, KT, 0, 0, 0, 0));
        loops_t lr = {0, 1, MT, NT, NT, 1, 0, 0, 0, 0};
        pb_add(&pb, mk_gemm(1, lr));
        loops_t lg = {0, KT, MT, NT, NT, 1, KT, 0, 0, KT};
        pb_add(&pb, mk_gemm(0, lg));
        /* store C with a row stride wider than a row */
        uint32_t se = 8;
        pb_add(&pb, mk_store(0, elem_index(&pb.L, TSR_MEM_OUT, se), MT, NT, NT + 3));
        pb_epilogue(&pb);
        pb_finish(&pb);
        CHECK(&pb);

        /* direct matmul from the initial DRAM bytes vs the stored result */
        uint8_t *got = malloc(pb.L.data_size);
        char err[1024];
        assert_non_null(got);
        if (pb_run_fsim(&pb, 0, got, NULL, err, sizeof err) != TSR_OK)
            fail_msg("%s", err);
        int B = m->batch, BI = m->block_in, BO = m->block_out;
        for (uint32_t mi = 0; mi < MT; mi++)
            for (uint32_t ni = 0; ni < NT; ni++)
                for (int b = 0; b < B; b++)
                    for (int o = 0; o < BO; o++) {
                        int64_t sum = 0;
                        for (uint32_t k = 0; k < KT; k++) {
                            const uint8_t *xp = pb.init + pb.L.sec_off[TSR_MEM_INP] + (uint64_t)(xe + mi * KT + k) * m->inp_bytes;
                            const uint8_t *wp = pb.init + pb.L.sec_off[TSR_MEM_WGT] + (uint64_t)(we + ni * KT + k) * m->wgt_bytes;
                            for (int i = 0; i < BI; i++)
                                sum += le_val(xp, b * BI + i, m->inp_width) * le_val(wp, o * BI + i, m->wgt_width);
                        }
                        /* low out_width bits of the W-bit accumulator = low out_width bits of sum */
                        int64_t want = ref_wrap(sum, m->out_width);
                        const uint8_t *op = got + pb.L.sec_off[TSR_MEM_OUT] + (uint64_t)(se + mi * (NT + 3) + ni) * m->out_bytes;
                        int64_t have = le_val(op, b * BO + o, m->out_width);
                        if (have != want)
                            fail_msg("config %s: C[%u][%u] lane b=%d o=%d: fsim %" PRId64 ", direct matmul %" PRId64,
                                     pb.cc->name, mi, ni, b, o, have, want);
                    }
        free(got);
        pb_free(&pb);
    }
}

/* GEMMs with 2-D uop loops and nonzero factors on random uops, a reset in
 * the middle, then more accumulation. */
static void test_gemm_loops_reset(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        for (int k = 0; k < 3; k++) {
            pb_t pb;
            uint64_t r = case_seed("gemm_loops", c, k);
            pb_init(&pb, &g_cfgs[c], MODE_SERIAL, r);
            pb_prologue(&pb);
            for (int g = 0; g < 4; g++)
                gen_gemm(&pb, &r, 0, 1);
            gen_gemm(&pb, &r, 1, 1);
            for (int g = 0; g < 4; g++)
                gen_gemm(&pb, &r, 0, 1);
            gen_gemm(&pb, &r, 1, 0);
            gen_gemm(&pb, &r, 0, 0);
            pb_epilogue(&pb);
            pb_finish(&pb);
            CHECK(&pb);
            pb_free(&pb);
        }
    }
}

/* ============================================================= ALU tests */


/* Each op with an immediate; every immediate acts on a fresh copy of the
 * edge rows (acc elements 0..7) in its own 8-row block, so the epilogue
 * sees each result in full. */
static void test_alu_imm(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        for (uint32_t op = 0; op < TSR_ALU_COUNT; op++) {
            if (!tsr_alu_op_available(&g_cfgs[c].cfg, op))
                continue; /* (refused: test_alu_unavailable) */
            int32_t imms[96];
            int nimm = 0;
            uint64_t r = case_seed("alu_imm", c, (int)op);
            if (op == TSR_ALU_SHR || op == TSR_ALU_RSHR) {
                for (int s = -40; s <= 40; s++)
                    imms[nimm++] = s;
            } else {
                static const int32_t sp[] = {0, 1, -1, 2, -2, 3, 127, -128, 255, 256, 32767, -32768, 12345, -12345};
                for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++)
                    imms[nimm++] = sp[i];
                for (int i = 0; i < 8; i++)
                    imms[nimm++] = (int32_t)rnd(&r, 65536) - 32768;
            }
            uint32_t chunk = g_cfgs[c].cfg.acc_depth / 8;
            if (chunk > 48)
                chunk = 48;
            for (int start = 0; start < nimm; start += (int)chunk) {
                int cnt = nimm - start < (int)chunk ? nimm - start : (int)chunk;
                pb_t pb;
                pb_init(&pb, &g_cfgs[c], MODE_SERIAL, r + (uint64_t)start);
                tsr_uop_t u[64];
                for (int i = 0; i < cnt; i++) {
                    u[i].dst = 8u * (uint32_t)i;
                    u[i].src = 8u * (uint32_t)i;
                    u[i].wgt = 0;
                }
                pb_poke_uops(&pb, pb.L.scratch_uop, u, (size_t)cnt);
                pb_prologue(&pb);
                pb_add(&pb, mk_load(TSR_MEM_UOP, 1, elem_index(&pb.L, TSR_MEM_UOP, pb.L.scratch_uop), 1,
                                    (uint32_t)cnt, (uint32_t)cnt, 0, 0, 0, 0));
                for (int i = 0; i < cnt; i++) {
                    pb_add(&pb, mk_load(TSR_MEM_ACC, 8u * (uint32_t)i, elem_index(&pb.L, TSR_MEM_ACC, 0), 1,
                                        NEDGE_ROWS, NEDGE_ROWS, 0, 0, 0, 0));
                    loops_t l = {1u + (uint32_t)i, 2u + (uint32_t)i, 8, 1, 1, 0, 1, 0, 0, 0};
                    pb_add(&pb, mk_alu(op, 0, l, 1, imms[start + i]));
                }
                pb_epilogue(&pb);
                pb_finish(&pb);
                print_message("  alu %s imm: config %s, imms %d..%d\n", tsr_alu_name(op), g_cfgs[c].name,
                              imms[start], imms[start + cnt - 1]);
                CHECK(&pb);
                pb_free(&pb);
            }
        }
    }
}

/* Each op with a register operand: src == dst (edge rows, so mulhr sees
 * INT_MIN * INT_MIN), src != dst both ways, a chain where each uop reads the
 * row the previous uop just wrote, 2-D loops, and random kernels. */
static void test_alu_reg(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        for (uint32_t op = 0; op < TSR_ALU_COUNT; op++) {
            if (!tsr_alu_op_available(&g_cfgs[c].cfg, op))
                continue;
            uint64_t r = case_seed("alu_reg", c, (int)op);
            pb_t pb;
            pb_init(&pb, &g_cfgs[c], MODE_SERIAL, r);
            tsr_uop_t u[31];
            for (uint32_t i = 0; i < 8; i++) {
                u[i] = (tsr_uop_t){i, i, 0};           /* src == dst */
                u[8 + i] = (tsr_uop_t){8 + i, i, 0};   /* b = edge row */
                u[16 + i] = (tsr_uop_t){i, 8 + i, 0};  /* a = edge row */
            }
            for (uint32_t i = 0; i < 7; i++)
                u[24 + i] = (tsr_uop_t){17 + i, 16 + i, 0}; /* reads the previous uop's result */
            pb_poke_uops(&pb, pb.L.scratch_uop, u, 31);
            pb_prologue(&pb); /* acc rows 0..7 = edge rows */
            pb_add(&pb, mk_load(TSR_MEM_UOP, 0, elem_index(&pb.L, TSR_MEM_UOP, pb.L.scratch_uop), 1, 31, 31, 0, 0, 0, 0));
            loops_t l1 = {0, 8, 1, 1, 0, 0, 0, 0, 0, 0};
            pb_add(&pb, mk_alu(op, 0, l1, 0, 0));
            loops_t l2 = {8, 16, 1, 1, 0, 0, 0, 0, 0, 0};
            pb_add(&pb, mk_alu(op, 0, l2, 0, 0));
            loops_t l3 = {16, 24, 1, 1, 0, 0, 0, 0, 0, 0};
            pb_add(&pb, mk_alu(op, 0, l3, 0, 0));
            loops_t l4 = {24, 31, 1, 1, 0, 0, 0, 0, 0, 0};
            pb_add(&pb, mk_alu(op, 0, l4, 0, 0));
            loops_t l5 = {0, 2, 2, 3, 4, 1, 3, 2, 0, 0};
            pb_add(&pb, mk_alu(op, 0, l5, 0, 0));
            /* fresh edge rows, then src == dst across loop iterations */
            pb_add(&pb, mk_load(TSR_MEM_ACC, 32, elem_index(&pb.L, TSR_MEM_ACC, 0), 1, NEDGE_ROWS, NEDGE_ROWS, 0, 0, 0, 0));
            /* uop (32, 32) at uop row 40; dst = src = 32 + 2i + j covers rows 32..39 */
            tsr_uop_t ub = {32, 32, 0};
            pb_poke_uops(&pb, pb.L.scratch_uop + 31, &ub, 1);
            pb_add(&pb, mk_load(TSR_MEM_UOP, 40, elem_index(&pb.L, TSR_MEM_UOP, pb.L.scratch_uop + 31), 1, 1, 1, 0, 0, 0, 0));
            loops_t l6 = {40, 41, 4, 2, 2, 1, 2, 1, 0, 0};
            pb_add(&pb, mk_alu(op, 0, l6, 0, 0));
            for (int k = 0; k < 4; k++)
                gen_alu(&pb, &r, (int)op, 0, 0, k & 1);
            gen_alu(&pb, &r, (int)op, 0, 1, 1); /* reset */
            gen_alu(&pb, &r, (int)op, 1, 1, 0); /* reset with use_imm */
            pb_epilogue(&pb);
            pb_finish(&pb);
            print_message("  alu %s reg: config %s\n", tsr_alu_name(op), g_cfgs[c].name);
            CHECK(&pb);
            pb_free(&pb);
        }
    }
}

/* =========================================================== LOAD/STORE */

/* inp or wgt loads with random padding on all four sides and x_stride >
 * x_size into every row but a reserved probe row, then a GEMM over every
 * loaded row against the probe (random data) exposes each row. */
static void load_pad_test(uint32_t mem, const char *name)
{
    for (int c = 0; c < g_ncfg; c++) {
        for (int k = 0; k < 4; k++) {
            uint64_t r = case_seed(name, c, k);
            pb_t pb;
            pb_init(&pb, &g_cfgs[c], MODE_SERIAL, r);
            const ref_machine_t *m = &pb.m;
            uint32_t depth = ref_sram_depth(m, mem);
            uint32_t probe_inp = m->inp_depth - 1, probe_wgt = m->wgt_depth - 1;
            tsr_uop_t u = mem == TSR_MEM_INP ? (tsr_uop_t){0, 0, probe_wgt} : (tsr_uop_t){0, probe_inp, 0};
            pb_poke_uops(&pb, pb.L.scratch_uop, &u, 1);
            pb_prologue(&pb);
            for (int i = 0; i < 10; i++) {
                loadopts_t lo = {i % 3 == 0 ? 15 : 3, 1, depth - 1, 0};
                gen_load(&pb, &r, mem, &lo);
            }
            pb_add(&pb, mk_load(TSR_MEM_UOP, 1, elem_index(&pb.L, TSR_MEM_UOP, pb.L.scratch_uop), 1, 1, 1, 0, 0, 0, 0));
            uint32_t rows = depth - 1 < m->acc_depth ? depth - 1 : m->acc_depth;
            loops_t l = {1, 2, rows, 1, 1, 0, 0, 0, 0, 0};
            if (mem == TSR_MEM_INP)
                l.sfo = 1;
            else
                l.wfo = 1;
            pb_add(&pb, mk_gemm(0, l));
            pb_epilogue(&pb);
            pb_finish(&pb);
            CHECK(&pb);
            pb_free(&pb);
        }
    }
}

static void test_load_inp_pad(void **state)
{
    (void)state;
    load_pad_test(TSR_MEM_INP, "load_inp_pad");
}

static void test_load_wgt_pad(void **state)
{
    (void)state;
    load_pad_test(TSR_MEM_WGT, "load_wgt_pad");
}

/* acc and acc8 loads (padding, strides); the epilogue's first dump shows
 * the output buffer was not touched, the later ones every accumulator bit. */
static void test_load_acc_acc8(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        for (int k = 0; k < 4; k++) {
            uint64_t r = case_seed("load_acc", c, k);
            pb_t pb;
            pb_init(&pb, &g_cfgs[c], MODE_SERIAL, r);
            pb_prologue(&pb);
            /* the edge rows, plain and as acc8 */
            pb_add(&pb, mk_load(TSR_MEM_ACC8, 8, elem_index(&pb.L, TSR_MEM_ACC8, 0), 1, NEDGE_ROWS, NEDGE_ROWS, 0, 0, 0, 0));
            for (int i = 0; i < 12; i++) {
                loadopts_t lo = {i % 3 == 0 ? 15 : 3, 1, 0, 0};
                gen_load(&pb, &r, (i & 1) ? TSR_MEM_ACC8 : TSR_MEM_ACC, &lo);
            }
            pb_epilogue(&pb);
            pb_finish(&pb);
            CHECK(&pb);
            pb_free(&pb);
        }
    }
}

/* uop loads with y > 1 and strides, used by ALU (register) and GEMM kernels
 * so every field of every loaded uop shows up in the result. */
static void test_load_uop(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        for (int k = 0; k < 3; k++) {
            uint64_t r = case_seed("load_uop", c, k);
            pb_t pb;
            pb_init(&pb, &g_cfgs[c], MODE_SERIAL, r);
            pb_prologue(&pb);
            for (int i = 0; i < 6; i++) {
                uint32_t ys = 2 + rnd(&r, 2), xs = 2 + rnd(&r, 3), stride = xs + 1 + rnd(&r, 4);
                uint32_t sram = 1 + rnd(&r, pb.m.uop_depth - ys * xs - 1);
                uint32_t e = 1 + rnd(&r, (uint32_t)pb.L.sec_elems[TSR_MEM_UOP] - 1 - (ys - 1) * stride - xs);
                pb_add(&pb, mk_load(TSR_MEM_UOP, sram, elem_index(&pb.L, TSR_MEM_UOP, e), ys, xs, stride, 0, 0, 0, 0));
                loops_t l = {sram, sram + ys * xs, 1, 1, 0, 0, 0, 0, 0, 0};
                pb_add(&pb, mk_alu(TSR_ALU_ADD, 0, l, 0, 0));
                pb_add(&pb, mk_gemm(0, l));
            }
            pb_epilogue(&pb);
            pb_finish(&pb);
            CHECK(&pb);
            pb_free(&pb);
        }
    }
}

/* Stores with x_stride > x_size, several rows, arbitrary sram_base, and
 * x_size == 0 stores that must write nothing. */
static void test_store_strides(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        for (int k = 0; k < 4; k++) {
            uint64_t r = case_seed("store", c, k);
            pb_t pb;
            pb_init(&pb, &g_cfgs[c], MODE_SERIAL, r);
            pb_prologue(&pb);
            for (int i = 0; i < 4; i++)
                gen_alu(&pb, &r, -1, -1, 0, 1);
            for (int i = 0; i < 12; i++)
                gen_store(&pb, &r, 1, 1);
            pb_add(&pb, mk_store(3, elem_index(&pb.L, TSR_MEM_OUT, 5), 2, 0, 4));
            pb_finish(&pb);
            CHECK(&pb);
            pb_free(&pb);
        }
    }
}

/* x_size == 0 transfers nothing, for every memory type, even with nonzero
 * y_size, sram_base, dram_base and (where allowed) padding. */
static void test_xsize_zero(void **state)
{
    (void)state;
    static const uint32_t mems[] = {TSR_MEM_INP, TSR_MEM_WGT, TSR_MEM_ACC, TSR_MEM_ACC8};
    for (int c = 0; c < g_ncfg; c++) {
        pb_t pb;
        pb_init(&pb, &g_cfgs[c], MODE_SERIAL, case_seed("xsize0", c, 0));
        pb_prologue(&pb);
        for (size_t i = 0; i < 4; i++)
            pb_add(&pb, mk_load(mems[i], 2, elem_index(&pb.L, mems[i], 3), 2, 0, 4, 1, 1, 1, 1));
        pb_add(&pb, mk_load(TSR_MEM_UOP, 0, elem_index(&pb.L, TSR_MEM_UOP, 5), 3, 0, 2, 0, 0, 0, 0));
        pb_add(&pb, mk_store(1, elem_index(&pb.L, TSR_MEM_OUT, 0), 4, 0, 3));
        pb_epilogue(&pb);
        pb_finish(&pb);
        CHECK(&pb);
        pb_free(&pb);
    }
}

/* ================================================= randomized programs */

static const uint64_t interleave_seeds[] = {0, 1, 2, 3, 0xdeadbeefull, 0x123456789abcdefull, 77};

/* Same program, many stage interleavings: identical DRAM, equal to the
 * reference. RELAXED flags so the stages really overlap. */
static void test_interleaving(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        for (int k = 0; k < 8; k++) {
            uint64_t r = case_seed("interleave", c, k);
            pb_t pb;
            pb_init(&pb, &g_cfgs[c], MODE_RELAXED, r);
            gen_random_program(&pb, &r);
            pb_check(&pb, interleave_seeds, (int)(sizeof interleave_seeds / sizeof interleave_seeds[0]));
            pb_free(&pb);
        }
    }
}

/* programs per config; TSR_TEST_PROGRAMS overrides (for soak runs) */
static int nrandom(void)
{
    const char *env = getenv("TSR_TEST_PROGRAMS");
    return env && *env ? atoi(env) : 100;
}

static void test_random_differential(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        clock_t t0 = clock();
        int nprog = nrandom();
        for (int k = 0; k < nprog; k++) {
            uint64_t r = case_seed("random", c, k);
            pb_t pb;
            pb_init(&pb, &g_cfgs[c], (k & 1) ? MODE_RELAXED : MODE_SERIAL, r);
            gen_random_program(&pb, &r);
            uint64_t seeds[2] = {0, r | 1};
            pb_check(&pb, seeds, 2);
            pb_free(&pb);
        }
        print_message("  random: config %s: %d programs in %.2f s\n", g_cfgs[c].name, nprog,
                      (double)(clock() - t0) / CLOCKS_PER_SEC);
    }
}

static void check_counters(const pb_t *pb, const tsr_counters_t *got);

/* The same random programs through the driver API: the driver verifies
 * each stream first, so this also checks the verifier accepts the streams
 * the builder makes (both flag modes). */
static void test_driver_path(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        for (int k = 0; k < 4; k++) {
            uint64_t r = case_seed("driver", c, k);
            pb_t pb;
            pb_init(&pb, &g_cfgs[c], k & 1 ? MODE_RELAXED : MODE_SERIAL, r);
            gen_random_program(&pb, &r);
            tsr_device_opts_t o;
            memset(&o, 0, sizeof o);
            o.seed = k < 2 ? 0 : r;
            tsr_device_t *dev = NULL;
            uint8_t *got = malloc(pb.L.data_size);
            tsr_counters_t ctr;
            assert_non_null(got);
            const char *step = "tsr_device_open";
            int rc = tsr_device_open("fsim", pb.cfg, &o, &dev);
            if (rc == TSR_OK && (step = "tsr_mem_alloc_at", rc = tsr_mem_alloc_at(dev, pb.L.data_addr, pb.L.data_size)) == TSR_OK &&
                (step = "tsr_mem_write", rc = tsr_mem_write(dev, pb.L.data_addr, pb.init, pb.L.data_size)) == TSR_OK &&
                (step = "tsr_submit", rc = tsr_submit(dev, pb.ins, pb.n)) == TSR_OK &&
                (step = "tsr_wait", rc = tsr_wait(dev, -1)) == TSR_OK &&
                (step = "tsr_mem_read", rc = tsr_mem_read(dev, pb.L.data_addr, got, pb.L.data_size)) == TSR_OK)
                step = "tsr_read_counters", rc = tsr_read_counters(dev, &ctr);
            if (rc != TSR_OK) {
                pb_print(&pb);
                fail_msg("config %s: %s: %s (%s)", pb.cc->name, step, tsr_errmsg(), tsr_errname(rc));
            }
            tsr_device_close(dev);
            if (report_diff(&pb, got, pb.rd.bytes, "driver", "ref   ", "driver/fsim vs reference") != 0)
                fail_msg("config %s: driver result differs from the reference", pb.cc->name);
            check_counters(&pb, &ctr);
            free(got);
            pb_free(&pb);
        }
    }
}

/* ============================================================== counters */

static void expected_counters(const pb_t *pb, tsr_counters_t *e)
{
    const ref_machine_t *m = &pb->m;
    memset(e, 0, sizeof *e);
    for (size_t i = 0; i < pb->n; i++) {
        const tsr_insn_t *in = &pb->ins[i];
        e->insns[in->opcode]++;
        uint64_t iters = (uint64_t)in->iter_out * in->iter_in * (in->uop_end - in->uop_bgn);
        switch (in->opcode) {
        case TSR_OP_LOAD:
            e->loads[in->mem_type]++;
            if (in->x_size) {
                uint64_t data = (uint64_t)in->y_size * in->x_size;
                uint64_t rows = ((uint64_t)in->y_pad0 + in->y_size + in->y_pad1) *
                                ((uint64_t)in->x_pad0 + in->x_size + in->x_pad1);
                e->bytes_loaded[in->mem_type] += data * ref_elem_bytes(m, in->mem_type);
                e->pad_rows_loaded += rows - data;
            }
            break;
        case TSR_OP_STORE:
            e->bytes_stored += (uint64_t)in->y_size * in->x_size * m->out_bytes;
            break;
        case TSR_OP_GEMM:
            if (in->reset) {
                e->gemm_reset_ops += iters;
            } else {
                e->gemm_ops += iters;
                e->macs += iters * (uint64_t)m->batch * m->block_in * m->block_out;
            }
            break;
        case TSR_OP_ALU:
            e->alu_ops += iters;
            e->alu_lanes += iters * (uint64_t)m->batch * m->block_out;
            break;
        default:
            break;
        }
    }
    e->insn_bytes_fetched = pb->n * TSR_INSN_BYTES;
}

static void check_counters(const pb_t *pb, const tsr_counters_t *got)
{
    tsr_counters_t e;
    expected_counters(pb, &e);
    char name[64];
#define CMPC(field, label)                                                                           \
    do {                                                                                             \
        if (got->field != e.field) {                                                                 \
            pb_print(pb);                                                                            \
            fail_msg("config %s, seed 0x%" PRIx64 ": counter %s = %" PRIu64 ", expected %" PRIu64, \
                     pb->cc->name, pb->seed, label, (uint64_t)got->field, (uint64_t)e.field);       \
        }                                                                                            \
    } while (0)
    for (int op = 0; op < TSR_OP_COUNT; op++) {
        snprintf(name, sizeof name, "insns[%s]", tsr_opcode_name((uint32_t)op) ? tsr_opcode_name((uint32_t)op) : "?");
        CMPC(insns[op], name);
    }
    for (int mem = 0; mem < TSR_MEM_COUNT; mem++) {
        snprintf(name, sizeof name, "bytes_loaded[%s]", mem_names[mem]);
        CMPC(bytes_loaded[mem], name);
        snprintf(name, sizeof name, "loads[%s]", mem_names[mem]);
        CMPC(loads[mem], name);
    }
    CMPC(bytes_stored, "bytes_stored");
    CMPC(gemm_ops, "gemm_ops");
    CMPC(gemm_reset_ops, "gemm_reset_ops");
    CMPC(macs, "macs");
    CMPC(alu_ops, "alu_ops");
    CMPC(alu_lanes, "alu_lanes");
    CMPC(pad_rows_loaded, "pad_rows_loaded");
    CMPC(insn_bytes_fetched, "insn_bytes_fetched");
    CMPC(cycles, "cycles");
#undef CMPC
}

static void test_counters(void **state)
{
    (void)state;
    for (int c = 0; c < g_ncfg; c++) {
        for (int k = 0; k < 10; k++) {
            uint64_t r = case_seed("counters", c, k);
            pb_t pb;
            pb_init(&pb, &g_cfgs[c], k & 1 ? MODE_RELAXED : MODE_SERIAL, r);
            gen_random_program(&pb, &r);
            uint8_t *got = malloc(pb.L.data_size);
            tsr_counters_t ctr;
            char err[1024];
            assert_non_null(got);
            if (pb_run_fsim(&pb, k & 1 ? r : 0, got, &ctr, err, sizeof err) != TSR_OK) {
                pb_print(&pb);
                fail_msg("%s", err);
            }
            check_counters(&pb, &ctr);
            free(got);
            pb_free(&pb);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alu_constants),
        cmocka_unit_test(test_alu_unit),
        cmocka_unit_test(test_alu_fscale),
        cmocka_unit_test(test_alu_unavailable),
        cmocka_unit_test(test_alu_lut),
        cmocka_unit_test(test_alu_row),
        cmocka_unit_test(test_config_geometry),
        cmocka_unit_test(test_gemm_matmul),
        cmocka_unit_test(test_gemm_loops_reset),
        cmocka_unit_test(test_alu_imm),
        cmocka_unit_test(test_alu_reg),
        cmocka_unit_test(test_load_inp_pad),
        cmocka_unit_test(test_load_wgt_pad),
        cmocka_unit_test(test_load_acc_acc8),
        cmocka_unit_test(test_load_uop),
        cmocka_unit_test(test_store_strides),
        cmocka_unit_test(test_xsize_zero),
        cmocka_unit_test(test_interleaving),
        cmocka_unit_test(test_random_differential),
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_driver_path),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
