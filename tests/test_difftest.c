/*
 * test_difftest: differential testing of backends on random programs
 * (tests/tsr_gen), and tests of the generator itself.
 *
 * Each generated program runs on fsim with the fixed schedule (seed 0), on
 * a second backend with a random stage interleaving, and in program order on
 * the independent reference machine (tests/tsr_ref); every output byte must
 * agree. A mismatch prints seed, config, buffer, first differing byte and
 * both values, then the first diverging STORE (bisected over prefixes).
 *
 * The generator is checked independently of its own bookkeeping: every
 * stream passes tsr_verify against its buffers (whose race check,
 * isa/tsr_hb, proves every pair of conflicting on-chip accesses in
 * different stages ordered by tokens), and a walk on the reference machine
 * checks that tokens are only popped after being pushed in program order
 * and that no on-chip row is read before the program wrote it. A coverage test counts opcodes,
 * ALU ops, memory types, pad/stride cases, no-ops and token depths.
 *
 * Environment: TSR_DIFF_BACKEND (second backend, default "fsim"),
 * TSR_DIFF_COUNT (default 300: a third of it each on the default preset, the
 * tiny preset, random configs and tiny_dw, tiny with the GEMM depthwise
 * mode), TSR_DIFF_SEED (base seed),
 * TSR_DIFF_CONFIGS (how many distinct random configs; default: a fresh one
 * per program on fsim, 2 on other backends since each RTL config is a model
 * build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_asm.h"
#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_gen.h"
#include "tsr_isa.h"
#include "tsr_pipe.h"
#include "tsr_ref.h"
#include "tsr_util.h"
#include "tsr_verify.h"

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : def;
}

static const char *diff_backend(void)
{
    const char *v = getenv("TSR_DIFF_BACKEND");
    return v && *v ? v : "fsim";
}

/* Backends that run the activation tables (ACT_LUT): every one (the RTL's
 * pipelined core has the table unit; random configs never pick the serial
 * core, which refuses the key). */
static int runs_act_lut(const char *backend)
{
    (void)backend;
    return 1;
}

/* Config for program i of a config family: a preset, "random" (with
 * ACT_LUT drawn too when act_lut is set), or "tiny_dw": tiny with the GEMM
 * depthwise mode, DSP_PACK 0 and DEPTHWISE 3 (tests/rtl/tiny_dw.json). */
static void family_config(const char *family, uint64_t seed, tsr_config_t *cfg, char *json, size_t n, int act_lut)
{
    if (!strcmp(family, "tiny_dw")) {
        assert_int_equal(tsr_config_load("tiny", cfg), TSR_OK);
        cfg->dsp_pack = 0;
        cfg->depthwise = 3;
        assert_int_equal(tsr_gen_config_json(cfg, json, n), TSR_OK);
        if (tsr_config_parse(json, "tiny_dw", cfg))
            fail_msg("tiny_dw config rejected: %s\n%s", tsr_errmsg(), json);
    } else if (!strcmp(family, "random")) {
        assert_int_equal(tsr_gen_random_config(seed, json, n), TSR_OK);
        if (tsr_config_parse(json, "random", cfg))
            fail_msg("random config (seed %" PRIu64 ") rejected: %s\n%s", seed, tsr_errmsg(), json);
        if (act_lut && tsr_gen_add_act_lut(seed, cfg, json, n))
            fail_msg("random config (seed %" PRIu64 ") with ACT_LUT rejected: %s\n%s", seed, tsr_errmsg(), json);
    } else {
        assert_int_equal(tsr_config_load(family, cfg), TSR_OK);
        tsr_gen_config_json(cfg, json, n);
    }
}

/* ------------------------------------------- independent stream checks */

/* Coverage of one stream, filled by the analysis. */
typedef struct {
    uint32_t max_q[TSR_Q_COUNT];     /* program-order token occupancy peak */
    int dst_edge, src_edge, wgt_edge; /* a GEMM/ALU index reached depth - 1 */
    int load_edge;                    /* a LOAD wrote its buffer's last row */
    uint64_t dw_slide, dw_fresh;      /* depthwise GEMM ops whose src follows the previous
                                         op's in their instruction, and the others */
} walk_cov_t;

typedef struct {
    const tsr_gen_prog_t *p;
    ref_machine_t m;
    ref_dram_t d;
    uint8_t *written[6]; /* inp, wgt, acc, out, uop, lut rows written */
    char *msg;
    size_t msgn;
    size_t idx;
    int bad;
} walk_t;

static void walk_fail(walk_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void walk_fail(walk_t *w, const char *fmt, ...)
{
    if (w->bad)
        return;
    char t[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    char d[300] = "";
    tsr_disasm_insn(&w->p->cfg, &w->p->insns[w->idx], d, sizeof d);
    snprintf(w->msg, w->msgn, "insn #%zu (%s): %s", w->idx, d, t);
    w->bad = 1;
}

enum { WR_INP, WR_WGT, WR_ACC, WR_OUT, WR_UOP, WR_LUT };

static void need_written(walk_t *w, int k, uint64_t row)
{
    static const char *names[] = {"inp", "wgt", "acc", "out", "uop", "lut"};
    if (!w->written[k][row])
        walk_fail(w, "reads %s row %" PRIu64 " that the program never wrote", names[k], row);
}

/* Footprint of one instruction, from the reference machine's state before
 * it executes: every row it reads must have been written; records the rows
 * it writes. (Ordering between stages is tsr_verify's race check.) */
static void footprint(walk_t *w, const tsr_insn_t *in, walk_cov_t *cov)
{
    ref_machine_t *m = &w->m;
    if (in->opcode == TSR_OP_LOAD && in->x_size) {
        uint64_t rows = (uint64_t)(in->y_pad0 + in->y_size + in->y_pad1) * (in->x_pad0 + in->x_size + in->x_pad1);
        int wk = in->mem_type == TSR_MEM_INP ? WR_INP : in->mem_type == TSR_MEM_WGT ? WR_WGT
               : in->mem_type == TSR_MEM_UOP ? WR_UOP : in->mem_type == TSR_MEM_LUT ? WR_LUT : WR_ACC;
        if (in->sram_base + rows == ref_sram_depth(m, in->mem_type))
            cov->load_edge = 1;
        for (uint64_t k = 0; k < rows; k++)
            w->written[wk][in->sram_base + k] = 1;
    } else if (in->opcode == TSR_OP_STORE && in->x_size) {
        for (uint64_t k = 0; k < (uint64_t)in->y_size * in->x_size && !w->bad; k++) {
            uint64_t row = in->sram_base + k;
            if (row >= m->acc_depth)
                walk_fail(w, "out row %" PRIu64 " outside the buffer", row);
            else
                need_written(w, WR_OUT, row);
        }
    } else if (in->opcode == TSR_OP_GEMM || in->opcode == TSR_OP_ALU) {
        int gemm = in->opcode == TSR_OP_GEMM;
        int rs = !in->reset && (gemm || !in->use_imm);
        int rd = !in->reset && (gemm || in->alu_opcode != TSR_ALU_MOV);
        /* a lut op reads one table (imm) or any (a register operand) */
        if (!gemm && in->alu_opcode == TSR_ALU_LUT && !in->reset && in->iter_out && in->iter_in &&
            in->uop_bgn < in->uop_end)
            for (uint32_t t = in->use_imm ? (uint32_t)in->imm : 0;
                 t < (in->use_imm ? (uint32_t)in->imm + 1 : m->lut_count) && !w->bad; t++) {
                if (t >= m->lut_count)
                    walk_fail(w, "lut table %u outside the %u tables", t, m->lut_count);
                else
                    need_written(w, WR_LUT, t);
            }
        /* a depthwise GEMM reads input rows src .. src + taps - 1 */
        const uint64_t taps = gemm && rs && in->depthwise ? (uint64_t)w->p->cfg.depthwise : 1;
        uint64_t prev_src = UINT64_MAX;
        for (uint64_t i = 0; i < in->iter_out; i++)
            for (uint64_t j = 0; j < in->iter_in; j++)
                for (uint32_t u = in->uop_bgn; u < in->uop_end && !w->bad; u++) {
                    need_written(w, WR_UOP, u);
                    uint32_t ud, us, uw;
                    ref_uop_fields(m, m->uop[u], &ud, &us, &uw);
                    uint64_t dst = ud + i * in->dst_factor_out + j * in->dst_factor_in;
                    uint64_t src = us + i * in->src_factor_out + j * in->src_factor_in;
                    /* (a depthwise op's wgt index names a tap group: row wgt / groups) */
                    uint64_t wgt = (uw + i * in->wgt_factor_out + j * in->wgt_factor_in) /
                                   (gemm && in->depthwise ? m->dw_groups : 1);
                    if (dst >= m->acc_depth) {
                        walk_fail(w, "dst %" PRIu64 " outside acc", dst);
                        break;
                    }
                    if (rd)
                        need_written(w, WR_ACC, dst);
                    if (gemm && rs) {
                        if (src + taps - 1 >= m->inp_depth || wgt >= m->wgt_depth)
                            walk_fail(w, "src %" PRIu64 " (+ %" PRIu64 " taps) or wgt %" PRIu64
                                      " outside its buffer", src, taps - 1, wgt);
                        else {
                            for (uint64_t t = 0; t < taps; t++)
                                need_written(w, WR_INP, src + t);
                            need_written(w, WR_WGT, wgt);
                        }
                        if (in->depthwise) {
                            if (prev_src != UINT64_MAX && src == prev_src + 1)
                                cov->dw_slide++;
                            else
                                cov->dw_fresh++;
                            prev_src = src;
                        }
                    } else if (rs) {
                        if (src >= m->acc_depth)
                            walk_fail(w, "src %" PRIu64 " outside acc", src);
                        else
                            need_written(w, WR_ACC, src);
                    }
                    cov->dst_edge |= dst == m->acc_depth - 1;
                    cov->src_edge |= rs && src == (gemm ? m->inp_depth : m->acc_depth) - 1;
                    cov->wgt_edge |= gemm && rs && wgt == m->wgt_depth - 1;
                }
        /* Written after the whole loop: the reads above see the rows as they were. */
        for (uint64_t i = 0; i < in->iter_out && !w->bad; i++)
            for (uint64_t j = 0; j < in->iter_in; j++)
                for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
                    uint32_t ud, us, uw;
                    ref_uop_fields(m, m->uop[u], &ud, &us, &uw);
                    uint64_t dst = ud + i * in->dst_factor_out + j * in->dst_factor_in;
                    w->written[WR_ACC][dst] = w->written[WR_OUT][dst] = 1;
                }
    }
}

/* Independent analysis of a generated stream; 0 if clean, else msg set:
 * tokens are popped only after being pushed in program order and never
 * overfill a queue in program order, and no on-chip row is read before the
 * program wrote it. */
static int analyse_stream(const tsr_gen_prog_t *p, char *msg, size_t msgn, walk_cov_t *cov)
{
    walk_t w;
    memset(&w, 0, sizeof w);
    memset(cov, 0, sizeof *cov);
    w.p = p;
    w.msg = msg;
    w.msgn = msgn;
    msg[0] = 0;
    assert_int_equal(ref_machine_init(&w.m, &p->cfg), 0);
    uint32_t wd[6] = {w.m.inp_depth, w.m.wgt_depth, w.m.acc_depth, w.m.acc_depth, w.m.uop_depth, 8};
    for (int k = 0; k < 6; k++)
        assert_non_null(w.written[k] = calloc(wd[k], 1));
    w.d.base = TSR_GEN_BASE_ADDR;
    for (size_t i = 0; i < p->nbufs; i++)
        if (p->bufs[i].addr + p->bufs[i].size > w.d.base + w.d.size)
            w.d.size = p->bufs[i].addr + p->bufs[i].size - w.d.base;
    assert_non_null(w.d.bytes = calloc(w.d.size, 1));
    for (size_t i = 0; i < p->nbufs; i++)
        memcpy(w.d.bytes + (p->bufs[i].addr - w.d.base), p->bufs[i].bytes, p->bufs[i].size);

    /* Program-order token counts per queue. */
    size_t pushed[TSR_Q_COUNT] = {0}, popped[TSR_Q_COUNT] = {0};
    for (size_t i = 0; i < p->ninsns && !w.bad; i++) {
        const tsr_insn_t *in = &p->insns[i];
        int s = tsr_insn_stage(in);
        int qpp = s == TSR_STAGE_COMPUTE ? TSR_Q_L2C : TSR_Q_C2S;
        int qpn = s == TSR_STAGE_LOAD ? TSR_Q_C2L : TSR_Q_S2C;
        int qsp = s == TSR_STAGE_COMPUTE ? TSR_Q_C2L : TSR_Q_S2C;
        int qsn = s == TSR_STAGE_LOAD ? TSR_Q_L2C : TSR_Q_C2S;
        w.idx = i;
        int pops[2] = {in->pop_prev ? qpp : -1, in->pop_next ? qpn : -1};
        for (int k = 0; k < 2; k++) {
            int q = pops[k];
            if (q < 0)
                continue;
            if (popped[q] == pushed[q]) {
                walk_fail(&w, "pops %s with no token pushed earlier in program order", tsr_queue_name(q));
                break;
            }
            popped[q]++;
        }
        if (w.bad)
            break;
        footprint(&w, in, cov);
        if (w.bad)
            break;
        if (ref_exec(&w.m, in, &w.d)) {
            walk_fail(&w, "reference machine: %s", ref_errmsg());
            break;
        }
        int pushes[2] = {in->push_prev ? qsp : -1, in->push_next ? qsn : -1};
        for (int k = 0; k < 2; k++)
            if (pushes[k] >= 0) {
                int q = pushes[k];
                pushed[q]++;
                if (pushed[q] - popped[q] > (size_t)p->cfg.dep_queue_depth)
                    walk_fail(&w, "queue %s holds more than DEP_QUEUE_DEPTH tokens in program order",
                              tsr_queue_name(q));
                if (pushed[q] - popped[q] > cov->max_q[q])
                    cov->max_q[q] = (uint32_t)(pushed[q] - popped[q]);
            }
    }
    int rc = w.bad;
    for (int k = 0; k < 6; k++)
        free(w.written[k]);
    free(w.d.bytes);
    ref_machine_free(&w.m);
    return rc;
}

/* ------------------------------------------------------ the difftest */

static void run_family(const char *family, uint64_t salt)
{
    uint64_t total = env_u64("TSR_DIFF_COUNT", 300);
    uint64_t count = (total + 2) / 3;
    uint64_t base = env_u64("TSR_DIFF_SEED", 1);
    const char *backend = diff_backend();
    const uint64_t dual0 = tsr_gen_dual_ops;
    uint64_t nconf = env_u64("TSR_DIFF_CONFIGS", strcmp(backend, "fsim") ? 2 : 0);
    uint64_t mismatches = 0, errors = 0, insns = 0;
    double t0 = tsr_now_s();
    for (uint64_t i = 0; i < count; i++) {
        uint64_t seed = tsr_gen_mix(base * 1000003u + salt * 7919u + i);
        tsr_config_t cfg;
        char json[1024];
        /* Random configs cycle through a pool of nconf (each RTL config is
         * a Verilator model build), or are fresh per program when 0. */
        uint64_t cseed = nconf ? tsr_gen_mix(salt * 31u + base + i % nconf) : seed;
        family_config(family, cseed, &cfg, json, sizeof json, runs_act_lut(backend));
        tsr_gen_prog_t p;
        int rc = tsr_gen_program(seed, &cfg, NULL, &p);
        if (rc)
            fail_msg("generator failed: program seed %" PRIu64 ", config %s: %s", seed, json, tsr_errmsg());
        insns += p.ninsns;
        /* The generator's guarantees, checked from the outside. */
        if (tsr_gen_verify(&p, p.insns, p.ninsns))
            fail_msg("program seed %" PRIu64 " (config %s) fails tsr_verify: %s", seed, json, tsr_errmsg());
        char msg[800];
        walk_cov_t cov;
        if (analyse_stream(&p, msg, sizeof msg, &cov))
            fail_msg("program seed %" PRIu64 " (config %s): generator produced a bad stream: %s",
                     seed, json, msg);
        tsr_gen_exec_t ex[3] = {{"fsim", 0, NULL, NULL}, {backend, tsr_gen_mix(seed) | 1, NULL, NULL},
                                {"ref", 0, NULL, NULL}};
        rc = tsr_gen_difftest(&p, ex, 3, stdout);
        if (rc > 0)
            mismatches++;
        else if (rc < 0)
            errors++;
        tsr_gen_free(&p);
    }
    printf("difftest %s: %" PRIu64 " programs (%" PRIu64 " instructions), fsim(seed 0) vs %s(random "
           "seed) vs ref: %" PRIu64 " mismatches, %" PRIu64 " run errors, %" PRIu64 " dual-issue cycles, %.2f s\n",
           family, count, insns, backend, mismatches, errors, tsr_gen_dual_ops - dual0, tsr_now_s() - t0);
    /* On the RTL the GEMM and ALU pipes must have run side by side (the
     * bank-rule path), or this test would not cover it. Only the default
     * family's accumulator is large enough for the generator to place
     * regions in both banks routinely (tiny and random configs do rarely). */
    if (!strcmp(backend, "rtl") && !strcmp(family, "default") && count >= 50 && tsr_gen_dual_ops == dual0)
        fail_msg("%s: no cycle with GEMM and ALU ops issued together in %" PRIu64 " programs", family, count);
    if (mismatches || errors)
        fail_msg("%s: %" PRIu64 " mismatches, %" PRIu64 " run errors (details above; reproduce "
                 "one with: tsr_soak --seed SEED --count 1 --config %s --backend %s; for a random "
                 "config, save the printed config JSON to a file and pass that file as --config)",
                 family, mismatches, errors, family, backend);
}

static void test_difftest_default(void **state)
{
    (void)state;
    run_family("default", 1);
}

static void test_difftest_tiny(void **state)
{
    (void)state;
    run_family("tiny", 2);
}

static void test_difftest_random(void **state)
{
    (void)state;
    run_family("random", 3);
}

/* The GEMM depthwise mode on a config that has it (random configs draw
 * DEPTHWISE only now and then, and most of their GEMMs are not depthwise). */
static void test_difftest_tiny_dw(void **state)
{
    (void)state;
    run_family("tiny_dw", 4);
}

/* ------------------------------------------------- generator self-tests */

static void test_random_configs_valid(void **state)
{
    (void)state;
    int seen_batch2 = 0, seen_16 = 0, seen_dep1 = 0, seen_dep8 = 0, seen_exact = 0, seen_dw = 0,
        seen_dw_pack = 0;
    for (uint64_t s = 0; s < 500; s++) {
        char json[1024];
        tsr_config_t c;
        assert_int_equal(tsr_gen_random_config(s, json, sizeof json), TSR_OK);
        if (tsr_config_parse(json, "random", &c))
            fail_msg("seed %" PRIu64 ": %s\n%s", s, tsr_errmsg(), json);
        assert_true(c.log_batch >= 0 && c.log_batch <= 1);
        assert_true(c.log_block_in >= 1 && c.log_block_in <= 4);
        assert_true(c.log_block_out >= 1 && c.log_block_out <= 4);
        assert_true(c.log_inp_width >= 3 && c.log_inp_width <= 4);
        assert_true(c.log_wgt_width >= 3 && c.log_wgt_width <= 4);
        assert_int_equal(c.log_acc_width, 5);
        assert_true(c.dep_queue_depth >= 1 && c.dep_queue_depth <= 8);
        assert_true(c.cmd_queue_depth >= 2 && c.cmd_queue_depth <= 32);
        assert_true(c.inp_depth <= 256 && c.acc_depth <= 256 && c.wgt_depth <= 128);
        seen_batch2 |= c.batch == 2;
        seen_16 |= c.inp_width == 16 || c.wgt_width == 16;
        seen_dep1 |= c.dep_queue_depth == 1;
        seen_dep8 |= c.dep_queue_depth == 8;
        seen_exact |= c.exact_requant; /* fscale on every backend */
        seen_dw |= c.depthwise > 1;     /* the GEMM depthwise mode (with a window) */
        seen_dw_pack |= c.depthwise > 1 && c.dsp_pack;
        /* tsr_gen_config_json reproduces the config. */
        char back[1024];
        tsr_config_t c2;
        assert_int_equal(tsr_gen_config_json(&c, back, sizeof back), TSR_OK);
        assert_int_equal(tsr_config_parse(back, "back", &c2), TSR_OK);
        assert_memory_equal(&c, &c2, sizeof c);
    }
    assert_true(seen_batch2 && seen_16 && seen_dep1 && seen_dep8 && seen_exact && seen_dw && seen_dw_pack);
}

/* Same seed, same program; different seed, different program. */
static void test_deterministic(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_gen_prog_t a, b, c;
    assert_int_equal(tsr_config_load("tiny", &cfg), TSR_OK);
    assert_int_equal(tsr_gen_program(42, &cfg, NULL, &a), TSR_OK);
    assert_int_equal(tsr_gen_program(42, &cfg, NULL, &b), TSR_OK);
    assert_int_equal(tsr_gen_program(43, &cfg, NULL, &c), TSR_OK);
    assert_int_equal(a.ninsns, b.ninsns);
    assert_memory_equal(a.insns, b.insns, a.ninsns * sizeof *a.insns);
    assert_int_equal(a.nbufs, b.nbufs);
    for (size_t i = 0; i < a.nbufs; i++) {
        assert_int_equal(a.bufs[i].addr, b.bufs[i].addr);
        assert_int_equal(a.bufs[i].size, b.bufs[i].size);
        assert_memory_equal(a.bufs[i].bytes, b.bufs[i].bytes, a.bufs[i].size);
        /* 4 KiB- and element-aligned, non-overlapping, above the base. */
        assert_true(a.bufs[i].addr >= TSR_GEN_BASE_ADDR && a.bufs[i].addr % 4096 == 0);
        assert_true(a.bufs[i].addr % tsr_config_elem_bytes(&cfg, (int)a.bufs[i].mem_type) == 0);
        if (i)
            assert_true(a.bufs[i].addr >= a.bufs[i - 1].addr + a.bufs[i - 1].size);
    }
    assert_false(a.ninsns == c.ninsns && !memcmp(a.insns, c.insns, a.ninsns * sizeof *a.insns));
    tsr_gen_free(&a);
    tsr_gen_free(&b);
    tsr_gen_free(&c);
}

/* Every prefix of a body, closed, is a legal stream (this is what the
 * bisection runs). */
static void test_close_stream(void **state)
{
    (void)state;
    const char *fam[] = {"tiny", "default", "random", "tiny_dw"};
    for (uint64_t s = 0; s < 32; s++) {
        tsr_config_t cfg;
        char json[1024];
        family_config(fam[s % 4], s, &cfg, json, sizeof json, 1);
        tsr_gen_prog_t p;
        assert_int_equal(tsr_gen_program(s, &cfg, NULL, &p), TSR_OK);
        for (size_t cut = 0; cut <= p.nbody; cut += 1 + cut / 8) {
            tsr_insn_t *out = NULL;
            size_t n = 0;
            if (tsr_gen_close_stream(&cfg, p.insns, cut, &out, &n))
                fail_msg("seed %" PRIu64 " cut %zu: close failed: %s", s, cut, tsr_errmsg());
            assert_memory_equal(out, p.insns, cut * sizeof *out);
            if (tsr_gen_verify(&p, out, n))
                fail_msg("seed %" PRIu64 " cut %zu (config %s): closed prefix fails verify: %s", s,
                         cut, json, tsr_errmsg());
            free(out);
        }
        tsr_gen_free(&p);
    }
    /* A stream that pops before anything was pushed is not a valid prefix. */
    tsr_config_t cfg;
    assert_int_equal(tsr_config_load("tiny", &cfg), TSR_OK);
    tsr_insn_t bad[1];
    memset(bad, 0, sizeof bad);
    bad[0].opcode = TSR_OP_LOAD;
    bad[0].mem_type = TSR_MEM_INP;
    bad[0].pop_next = 1;
    tsr_insn_t *out = NULL;
    size_t n = 0;
    assert_int_equal(tsr_gen_close_stream(&cfg, bad, 1, &out, &n), TSR_EINVAL);
    assert_null(out);
}

/* A runner that executes on the reference machine with one instruction
 * changed: STORE #drop becomes a no-op. */
typedef struct {
    size_t drop;
} drop_ctx_t;

static int run_ref_dropping(void *ctx, const tsr_gen_prog_t *p, const tsr_insn_t *insns, size_t n,
                            uint8_t *outs[TSR_GEN_MAX_BUFS])
{
    const drop_ctx_t *c = ctx;
    tsr_insn_t *copy = malloc(n * sizeof *copy);
    if (!copy)
        return TSR_ENOMEM;
    memcpy(copy, insns, n * sizeof *copy);
    if (c->drop < n)
        copy[c->drop].x_size = 0;
    tsr_gen_exec_t ref = {"ref", 0, NULL, NULL};
    int rc = tsr_gen_run(&ref, p, copy, n, outs);
    free(copy);
    return rc;
}

/* The harness must find a planted divergence and name exactly its STORE. */
static void test_bisect_finds_planted_store(void **state)
{
    (void)state;
    int tried = 0;
    for (uint64_t s = 100; s < 140 && tried < 6; s++) {
        tsr_config_t cfg;
        char json[1024];
        family_config(s % 2 ? "tiny" : "random", s, &cfg, json, sizeof json, 1);
        tsr_gen_prog_t p;
        assert_int_equal(tsr_gen_program(s, &cfg, NULL, &p), TSR_OK);
        size_t stores[512], ns = 0;
        for (size_t i = 0; i < p.nbody && ns < 512; i++)
            if (p.insns[i].opcode == TSR_OP_STORE && p.insns[i].x_size)
                stores[ns++] = i;
        if (ns < 3) {
            tsr_gen_free(&p);
            continue;
        }
        drop_ctx_t dc = {stores[ns / 2]};
        tsr_gen_exec_t a = {"ref", 0, NULL, NULL};
        tsr_gen_exec_t b = {"ref-dropping", 0, run_ref_dropping, &dc};
        /* Only meaningful if dropping that STORE changes its own prefix. */
        tsr_insn_t *pre = NULL;
        size_t np = 0;
        uint8_t *oa[TSR_GEN_MAX_BUFS], *ob[TSR_GEN_MAX_BUFS];
        tsr_gen_diff_t d;
        assert_int_equal(tsr_gen_close_stream(&cfg, p.insns, dc.drop + 1, &pre, &np), TSR_OK);
        assert_int_equal(tsr_gen_run(&a, &p, pre, np, oa), TSR_OK);
        assert_int_equal(tsr_gen_run(&b, &p, pre, np, ob), TSR_OK);
        int visible = tsr_gen_compare(&p, oa, ob, &d);
        tsr_gen_outputs_free(oa);
        tsr_gen_outputs_free(ob);
        free(pre);
        if (visible) {
            tried++;
            size_t found;
            assert_int_equal(tsr_gen_bisect(&p, &a, &b, &found, &d), TSR_OK);
            if (found != dc.drop)
                fail_msg("seed %" PRIu64 ": planted divergence at STORE #%zu, bisection found #%zu",
                         s, dc.drop, found);
            assert_true(d.nbytes > 0);
            /* The report path agrees with a direct comparison of the full
             * program (a later STORE may hide the planted difference). */
            assert_int_equal(tsr_gen_run(&a, &p, p.insns, p.ninsns, oa), TSR_OK);
            assert_int_equal(tsr_gen_run(&b, &p, p.insns, p.ninsns, ob), TSR_OK);
            int full = tsr_gen_compare(&p, oa, ob, &d);
            tsr_gen_outputs_free(oa);
            tsr_gen_outputs_free(ob);
            tsr_gen_exec_t ex[2] = {a, b};
            FILE *devnull = fopen("/dev/null", "w");
            assert_non_null(devnull);
            assert_int_equal(tsr_gen_difftest(&p, ex, 2, devnull), full);
            fclose(devnull);
        }
        tsr_gen_free(&p);
    }
    assert_true(tried >= 3);
}

/* Generated programs exercise every opcode, ALU op (with immediate and
 * register operand), memory type, pad and stride case, no-ops with flags
 * and deep token queues: counted over 100 seeds. */
static void test_generator_coverage(void **state)
{
    (void)state;
    enum {
        C_LOAD, C_STORE, C_GEMM, C_ALU, C_FINISH,
        C_M_UOP, C_M_WGT, C_M_INP, C_M_ACC, C_M_ACC8, C_M_LUT,
        C_YPAD0, C_YPAD1, C_XPAD0, C_XPAD1, C_ALLPAD,
        C_LSTR0, C_LSTR_LT, C_LSTR_EQ, C_LSTR_GT,
        C_S2D, C_SSTR_EQ, C_SSTR_GT,
        C_NOOP_LOAD, C_NOOP_STORE, C_NOOP_COMPUTE, C_EMPTY_LOOP,
        C_GEMM_RESET, C_ALU_RESET, C_MULTI_UOP, C_2D_LOOP,
        C_UOP_2D, C_DST_EDGE, C_SRC_EDGE, C_WGT_EDGE, C_LOAD_EDGE,
        C_Q_FULL_L2C, C_Q_FULL_C2L, C_Q_FULL_C2S, C_Q_FULL_S2C, C_Q_MULTI,
        C_DW_GEMM, C_DW_RESET, C_DW_SLIDE, C_DW_FRESH,
        C_COUNT
    };
    static const char *names[C_COUNT] = {
        "load", "store", "gemm", "alu", "finish",
        "load uop", "load wgt", "load inp", "load acc", "load acc8", "load lut (ACT_LUT)",
        "y_pad0", "y_pad1", "x_pad0", "x_pad1", "all-pad load (y_size 0)",
        "load stride 0", "load stride < x", "load stride == x", "load stride > x",
        "store y > 1", "store stride == x", "store stride > x",
        "load-stage no-op with flags", "store no-op with flags", "compute no-op with flags",
        "empty GEMM/ALU loop", "gemm reset", "alu reset", "multi-uop kernel", "2-D loop with factors",
        "strided uop load", "dst index at acc edge", "src index at edge", "wgt index at edge",
        "load reaches buffer end",
        "programs filling load->compute", "programs filling compute->load",
        "programs filling compute->store", "programs filling store->compute",
        "programs with >= 2 tokens in flight",
        "depthwise gemm (DEPTHWISE)", "depthwise gemm reset", "depthwise op, src + 1 (slide)",
        "depthwise op, first or jump (fresh)",
    };
    uint64_t cnt[C_COUNT] = {0}, alu[TSR_ALU_COUNT][2] = {{0}};
    int avail[TSR_ALU_COUNT] = {0}; /* op implemented by one of the configs drawn */
    const char *fam[] = {"tiny", "default", "random", "tiny_dw"};
    for (uint64_t s = 0; s < 100; s++) {
        tsr_config_t cfg;
        char json[1024];
        family_config(fam[s % 4], tsr_gen_mix(s + 77), &cfg, json, sizeof json, 1);
        tsr_gen_prog_t p;
        assert_int_equal(tsr_gen_program(tsr_gen_mix(s + 77), &cfg, NULL, &p), TSR_OK);
        for (uint32_t op = 0; op < TSR_ALU_COUNT; op++)
            avail[op] |= tsr_alu_op_available(&cfg, op);
        for (size_t i = 0; i < p.ninsns; i++) {
            const tsr_insn_t *in = &p.insns[i];
            int flags = in->pop_prev || in->pop_next || in->push_prev || in->push_next;
            switch (in->opcode) {
            case TSR_OP_LOAD:
                cnt[C_LOAD]++;
                if (!in->x_size) {
                    if (flags)
                        cnt[tsr_insn_stage(in) == TSR_STAGE_LOAD ? C_NOOP_LOAD : C_NOOP_COMPUTE]++;
                    break;
                }
                cnt[in->mem_type == TSR_MEM_UOP ? C_M_UOP : in->mem_type == TSR_MEM_WGT ? C_M_WGT
                    : in->mem_type == TSR_MEM_INP ? C_M_INP : in->mem_type == TSR_MEM_ACC ? C_M_ACC
                    : in->mem_type == TSR_MEM_LUT ? C_M_LUT : C_M_ACC8]++;
                cnt[C_YPAD0] += in->y_pad0 != 0;
                cnt[C_YPAD1] += in->y_pad1 != 0;
                cnt[C_XPAD0] += in->x_pad0 != 0;
                cnt[C_XPAD1] += in->x_pad1 != 0;
                cnt[C_ALLPAD] += in->y_size == 0;
                if (in->y_size > 1) {
                    cnt[in->x_stride == 0 ? C_LSTR0 : in->x_stride < in->x_size ? C_LSTR_LT
                        : in->x_stride == in->x_size ? C_LSTR_EQ : C_LSTR_GT]++;
                    cnt[C_UOP_2D] += in->mem_type == TSR_MEM_UOP;
                }
                break;
            case TSR_OP_STORE:
                cnt[C_STORE]++;
                if (!in->x_size) {
                    cnt[C_NOOP_STORE] += flags;
                } else if (in->y_size > 1) {
                    cnt[C_S2D]++;
                    cnt[in->x_stride == in->x_size ? C_SSTR_EQ : C_SSTR_GT] += in->x_stride >= in->x_size;
                }
                break;
            case TSR_OP_GEMM:
            case TSR_OP_ALU:
                cnt[in->opcode == TSR_OP_GEMM ? C_GEMM : C_ALU]++;
                if (!in->iter_out || !in->iter_in || in->uop_bgn == in->uop_end) {
                    cnt[C_EMPTY_LOOP]++;
                    break;
                }
                if (in->opcode == TSR_OP_ALU)
                    alu[in->alu_opcode][in->use_imm ? 1 : 0]++;
                cnt[C_GEMM_RESET] += in->opcode == TSR_OP_GEMM && in->reset;
                cnt[C_DW_GEMM] += in->opcode == TSR_OP_GEMM && in->depthwise;
                cnt[C_DW_RESET] += in->opcode == TSR_OP_GEMM && in->depthwise && in->reset;
                cnt[C_ALU_RESET] += in->opcode == TSR_OP_ALU && in->reset;
                cnt[C_MULTI_UOP] += in->uop_end - in->uop_bgn > 1;
                cnt[C_2D_LOOP] += in->iter_out > 1 && in->iter_in > 1 &&
                                  (in->dst_factor_out || in->src_factor_out) &&
                                  (in->dst_factor_in || in->src_factor_in);
                break;
            case TSR_OP_FINISH: cnt[C_FINISH]++; break;
            default: break;
            }
        }
        char msg[800];
        walk_cov_t cov;
        if (analyse_stream(&p, msg, sizeof msg, &cov))
            fail_msg("seed %" PRIu64 ": %s", tsr_gen_mix(s + 77), msg);
        cnt[C_DST_EDGE] += cov.dst_edge;
        cnt[C_SRC_EDGE] += cov.src_edge;
        cnt[C_WGT_EDGE] += cov.wgt_edge;
        cnt[C_LOAD_EDGE] += cov.load_edge;
        cnt[C_DW_SLIDE] += cov.dw_slide;
        cnt[C_DW_FRESH] += cov.dw_fresh;
        uint32_t D = (uint32_t)cfg.dep_queue_depth;
        cnt[C_Q_FULL_L2C] += cov.max_q[TSR_Q_L2C] == D;
        cnt[C_Q_FULL_C2L] += cov.max_q[TSR_Q_C2L] == D;
        cnt[C_Q_FULL_C2S] += cov.max_q[TSR_Q_C2S] == D;
        cnt[C_Q_FULL_S2C] += cov.max_q[TSR_Q_S2C] == D;
        cnt[C_Q_MULTI] += cov.max_q[TSR_Q_L2C] >= 2 || cov.max_q[TSR_Q_C2S] >= 2;
        tsr_gen_free(&p);
    }
    int missing = 0;
    printf("generator coverage over 100 programs:\n");
    for (int k = 0; k < C_COUNT; k++) {
        printf("  %-38s %8" PRIu64 "\n", names[k], cnt[k]);
        missing += cnt[k] == 0;
    }
    for (int op = 0; op < TSR_ALU_COUNT; op++) {
        printf("  alu %-6s imm %6" PRIu64 "  reg %6" PRIu64 "\n", tsr_alu_name((uint32_t)op),
               alu[op][1], alu[op][0]);
        missing += avail[op] && (!alu[op][0] || !alu[op][1]);
    }
    if (missing)
        fail_msg("%d coverage item(s) never generated (see the table above)", missing);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_configs_valid),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_close_stream),
        cmocka_unit_test(test_generator_coverage),
        cmocka_unit_test(test_bisect_finds_planted_store),
        cmocka_unit_test(test_difftest_tiny),
        cmocka_unit_test(test_difftest_random),
        cmocka_unit_test(test_difftest_tiny_dw),
        cmocka_unit_test(test_difftest_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
