/*
 * test_verify: the static verifier (isa/tsr_verify.c, via isa/tsr_pipe.c).
 *
 * Each rejection class gets a minimal stream with exactly one defect, built
 * by mutating a stream that verifies, so a failure points at that one rule.
 * The expected code, offending instruction index ("#K") and a distinctive
 * word of the reason are checked. Queue-capacity deadlocks are checked as
 * differentials: the same stream is accepted with one more queue entry.
 * GEMM/ALU index checks read real uop words from a local DRAM image.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sys/wait.h>

#include "tsr_asm.h"
#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_gen.h"
#include "tsr_isa.h"
#include "tsr_pipe.h"
#include "tsr_verify.h"

/* ---- configs ---- */

/* The tiny preset (1x4x4) with a chosen input buffer and queue depths. */
static void tiny_cfg(tsr_config_t *c, int log_inp_buff, int cmd_depth, int dep_depth)
{
    char json[512];
    snprintf(json, sizeof json,
             "{\"TARGET\":\"sim\",\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,"
             "\"LOG_BATCH\":0,\"LOG_BLOCK\":2,\"LOG_UOP_BUFF_SIZE\":10,\"LOG_INP_BUFF_SIZE\":%d,"
             "\"LOG_WGT_BUFF_SIZE\":10,\"LOG_ACC_BUFF_SIZE\":11,\"CMD_QUEUE_DEPTH\":%d,"
             "\"DEP_QUEUE_DEPTH\":%d}",
             log_inp_buff, cmd_depth, dep_depth);
    if (tsr_config_parse(json, "tiny-variant", c))
        fail_msg("config: %s", tsr_errmsg());
}

/* Buffer depths of tiny, by hand: inp 2^9/4 = 128, wgt 2^10/16 = 64, acc/out 2^11/16 = 128,
 * uop 2^10/4 = 256. With LOG_INP_BUFF_SIZE 8: inp 64. */
enum { INP_D = 128, WGT_D = 64, ACC_D = 128, UOP_D = 256 };

/* ---- DRAM image and regions ---- */

/* Byte layout of the test's device memory (element = one row of the type). */
enum {
    UOP_ADDR = 0x1000, /* 16 uops x 4 B */
    INP_ADDR = 0x2000, /* 16 rows x 4 B */
    WGT_ADDR = 0x3000, /* 16 rows x 16 B */
    OUT_ADDR = 0x4000, /* 16 rows x 4 B */
    DRAM_SIZE = 0x8000,
};
#define UOP_E (UOP_ADDR / 4)
#define INP_E (INP_ADDR / 4)
#define WGT_E (WGT_ADDR / 16)
#define OUT_E (OUT_ADDR / 4)

static uint8_t dram[DRAM_SIZE];
static int reads; /* how many times the verifier read DRAM */

static int dram_read(void *ctx, uint64_t addr, void *dst, size_t n)
{
    (void)ctx;
    reads++;
    if (addr > DRAM_SIZE || n > DRAM_SIZE - addr)
        return TSR_EFAULT;
    memcpy(dst, dram + addr, n);
    return TSR_OK;
}

static const tsr_region_t regions[] = {
    {UOP_ADDR, 16 * 4, "uops"},
    {INP_ADDR, 16 * 4, "inp"},
    {WGT_ADDR, 16 * 16, "wgt"},
    {OUT_ADDR, 16 * 4, "out"},
};

static tsr_verify_opts_t full_opts(void)
{
    tsr_verify_opts_t o = {regions, 4, 1, dram_read, NULL};
    return o;
}

/* Uop word for tiny: dst 7 bits at 0, src 7 bits at 7, wgt 6 bits at 14 (4 bytes, LE). */
static void put_uop(uint32_t elem, uint32_t dst, uint32_t src, uint32_t wgt)
{
    uint32_t w = dst | src << 7 | wgt << 14;
    for (int b = 0; b < 4; b++)
        dram[UOP_ADDR + 4 * elem + (uint32_t)b] = (uint8_t)(w >> (8 * b));
}

/* Every uop slot poisoned with large indices, except the ones a test sets. */
static void poison_uops(void)
{
    for (uint32_t e = 0; e < 16; e++)
        put_uop(e, 127, 63, 63);
}

/* ---- instruction builders ---- */

static tsr_insn_t mem(uint32_t op, uint32_t mt, uint32_t sram, uint32_t dram_base, uint32_t y,
                      uint32_t x, uint32_t stride)
{
    tsr_insn_t in;
    memset(&in, 0, sizeof in);
    in.opcode = op;
    in.mem_type = mt;
    in.sram_base = sram;
    in.dram_base = dram_base;
    in.y_size = y;
    in.x_size = x;
    in.x_stride = stride;
    return in;
}

static tsr_insn_t loop(uint32_t op, uint32_t bgn, uint32_t end, uint32_t io, uint32_t ii)
{
    tsr_insn_t in;
    memset(&in, 0, sizeof in);
    in.opcode = op;
    in.uop_bgn = bgn;
    in.uop_end = end;
    in.iter_out = io;
    in.iter_in = ii;
    return in;
}

static tsr_insn_t fin(void)
{
    tsr_insn_t in;
    memset(&in, 0, sizeof in);
    in.opcode = TSR_OP_FINISH;
    return in;
}

/* Flags: pop_prev, pop_next, push_prev, push_next. */
static tsr_insn_t fl(tsr_insn_t in, int pp, int pn, int up, int un)
{
    in.pop_prev = (uint32_t)pp;
    in.pop_next = (uint32_t)pn;
    in.push_prev = (uint32_t)up;
    in.push_next = (uint32_t)un;
    return in;
}

/* Compute-stage no-op: LOAD acc with x_size 0 (flags only). */
static tsr_insn_t cnop(void) { return mem(TSR_OP_LOAD, TSR_MEM_ACC, 0, 0, 0, 0, 0); }
/* Load-stage no-op. */
static tsr_insn_t lnop(void) { return mem(TSR_OP_LOAD, TSR_MEM_INP, 0, 0, 0, 0, 0); }

/* The base stream: uop, inp, wgt loads -> GEMM -> STORE -> FINISH, with the minimal tokens:
 * #2 -> #3 (load->compute), #3 -> #4 (compute->store), #4 -> #5 (store->compute). */
enum { BASE_N = 6 };
static void base_stream(tsr_insn_t s[BASE_N])
{
    s[0] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, UOP_E, 1, 1, 1);
    s[1] = mem(TSR_OP_LOAD, TSR_MEM_INP, 0, INP_E, 1, 1, 1);
    s[2] = fl(mem(TSR_OP_LOAD, TSR_MEM_WGT, 0, WGT_E, 1, 1, 1), 0, 0, 0, 1);
    s[3] = fl(loop(TSR_OP_GEMM, 0, 1, 1, 1), 1, 0, 0, 1);
    s[4] = fl(mem(TSR_OP_STORE, TSR_MEM_OUT, 0, OUT_E, 1, 1, 1), 1, 0, 1, 0);
    s[5] = fl(fin(), 0, 1, 0, 0);
    poison_uops();
    put_uop(0, 0, 0, 0);
}

/* ---- expectations ---- */

static void expect_ok(const char *what, int rc)
{
    if (rc != TSR_OK)
        fail_msg("%s: got %s, want OK (message: %s)", what, tsr_errname(rc), tsr_errmsg());
}

/* rc must be code and the message must contain every needle (NULL-terminated list). */
static void expect_err(const char *what, int rc, int code, ...)
{
    if (rc != code)
        fail_msg("%s: got %s, want %s (message: %s)", what, tsr_errname(rc), tsr_errname(code),
                 tsr_errmsg());
    va_list ap;
    va_start(ap, code);
    for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
        if (!strstr(tsr_errmsg(), s)) {
            va_end(ap);
            fail_msg("%s: message \"%s\" does not contain \"%s\"", what, tsr_errmsg(), s);
        }
    va_end(ap);
}

static int verify(const tsr_config_t *c, const tsr_insn_t *s, size_t n,
                  const tsr_verify_opts_t *o)
{
    tsr_err_clear();
    return tsr_verify(c, s, n, o);
}

/* ---- schedule independence (tsr_pipe with random schedules) ---- */

typedef struct {
    uint32_t order[256];
    size_t n;
} trace_t;

static int record(void *ctx, uint32_t index, const tsr_insn_t *insn)
{
    (void)insn;
    trace_t *t = ctx;
    if (t->n < 256)
        t->order[t->n++] = index;
    return TSR_OK;
}

/* Token queue an instruction's flag uses, by stage (-1 = none/illegal). */
static int flag_queue(const tsr_insn_t *in, int pop, int prev)
{
    int s = tsr_insn_stage(in);
    if (pop && prev) return s == TSR_STAGE_COMPUTE ? 0 : s == TSR_STAGE_STORE ? 2 : -1;
    if (pop) return s == TSR_STAGE_LOAD ? 1 : s == TSR_STAGE_COMPUTE ? 3 : -1;
    if (prev) return s == TSR_STAGE_COMPUTE ? 1 : s == TSR_STAGE_STORE ? 3 : -1;
    return s == TSR_STAGE_LOAD ? 0 : s == TSR_STAGE_COMPUTE ? 2 : -1;
}

/* Run the stream through tsr_pipe under many schedules: the verdict must be the verifier's
 * under every one, and an accepted stream must execute every instruction once, each stage in
 * stream order, FINISH last, and never pop a token before some executed instruction pushed
 * it. */
static void check_schedules(const char *what, const tsr_config_t *c, const tsr_insn_t *s,
                            size_t n, int want)
{
    for (uint64_t seed = 0; seed < 200; seed++) {
        trace_t t;
        t.n = 0;
        tsr_pipe_t *p = NULL;
        int done = 0;
        tsr_err_clear();
        int rc = tsr_pipe_create(c, s, n, record, &t, seed, &p);
        if (!rc)
            rc = tsr_pipe_run(p, 0, &done);
        tsr_pipe_destroy(p);
        if (rc != want)
            fail_msg("%s, schedule seed %llu: pipe returned %s, verifier %s (message: %s)", what,
                     (unsigned long long)seed, tsr_errname(rc), tsr_errname(want), tsr_errmsg());
        if (rc)
            continue;
        if (!done || t.n != n || t.order[n - 1] != n - 1)
            fail_msg("%s, seed %llu: done %d, executed %zu of %zu, last #%u", what,
                     (unsigned long long)seed, done, t.n, n, t.n ? t.order[t.n - 1] : 0);
        int last[TSR_STAGE_COUNT] = {-1, -1, -1};
        int tokens[4] = {0, 0, 0, 0};
        for (size_t i = 0; i < t.n; i++) {
            const tsr_insn_t *in = &s[t.order[i]];
            int st = tsr_insn_stage(in);
            if ((int)t.order[i] <= last[st])
                fail_msg("%s, seed %llu: %s stage ran #%u after #%d", what,
                         (unsigned long long)seed, tsr_stage_name(st), t.order[i], last[st]);
            last[st] = (int)t.order[i];
            for (int prev = 0; prev < 2; prev++)
                if (prev ? in->pop_prev : in->pop_next) {
                    int q = flag_queue(in, 1, prev);
                    if (q < 0 || --tokens[q] < 0)
                        fail_msg("%s, seed %llu: #%u popped %s before any push", what,
                                 (unsigned long long)seed, t.order[i], tsr_queue_name(q));
                }
            for (int prev = 0; prev < 2; prev++)
                if (prev ? in->push_prev : in->push_next)
                    tokens[flag_queue(in, 0, prev)]++;
        }
    }
}

/* ---- valid streams ---- */

static void test_valid_streams(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[64];
    tiny_cfg(&c, 9, 16, 4);

    base_stream(s);
    expect_ok("base, no opts", verify(&c, s, BASE_N, NULL));
    check_schedules("base", &c, s, BASE_N, TSR_OK);
    tsr_verify_opts_t o = full_opts();
    reads = 0;
    expect_ok("base, DRAM + uop checks", verify(&c, s, BASE_N, &o));
    if (reads == 0)
        fail_msg("base: the verifier never read the loaded uop through opts.read");

    /* The embedded tiny preset behaves the same. */
    tsr_config_t t;
    assert_int_equal(tsr_config_load("tiny", &t), TSR_OK);
    expect_ok("base on the tiny preset", verify(&t, s, BASE_N, &o));

    /* x_size = 0 instructions carry only their flags: no DRAM access even with no regions. */
    size_t n = 0;
    s[n++] = fl(lnop(), 0, 0, 0, 1);
    s[n++] = fl(cnop(), 1, 0, 0, 1);
    s[n++] = fl(mem(TSR_OP_STORE, TSR_MEM_OUT, 0, 0, 0, 0, 0), 1, 0, 1, 0);
    s[n++] = fl(fin(), 0, 1, 0, 0);
    tsr_verify_opts_t none = {NULL, 0, 1, dram_read, NULL};
    expect_ok("flag-only no-ops", verify(&c, s, n, &none));
    check_schedules("flag-only no-ops", &c, s, n, TSR_OK);

    /* Double buffering: two input buffers, two tokens in flight (load runs two ahead). */
    const int N = 6;
    n = 0;
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, UOP_E, 1, 2, 2);
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_WGT, 0, WGT_E, 1, 1, 1);
    for (int i = 0; i < N; i++) {
        /* Load i waits for compute i-2 to free its buffer. */
        s[n++] = fl(mem(TSR_OP_LOAD, TSR_MEM_INP, (uint32_t)(i % 2) * 2, INP_E + (uint32_t)i * 2,
                        1, 2, 2),
                    0, i >= 2, 0, 1);
        if (i >= 1) {
            int k = i - 1;
            tsr_insn_t g = loop(TSR_OP_GEMM, (uint32_t)(k % 2), (uint32_t)(k % 2) + 1, 1, 2);
            g.src_factor_in = 1;
            s[n++] = fl(g, 1, 0, k + 2 < N, 0);
        }
    }
    tsr_insn_t g = loop(TSR_OP_GEMM, (N - 1) % 2, (N - 1) % 2 + 1, 1, 2);
    g.src_factor_in = 1;
    s[n++] = fl(g, 1, 0, 0, 1);
    s[n++] = fl(mem(TSR_OP_STORE, TSR_MEM_OUT, 0, OUT_E, 1, 1, 1), 1, 0, 1, 0);
    s[n++] = fl(fin(), 0, 1, 0, 0);
    poison_uops();
    put_uop(0, 0, 0, 0);
    put_uop(1, 0, 2, 0);
    expect_ok("double buffered", verify(&c, s, n, &o));
    check_schedules("double buffered", &c, s, n, TSR_OK);
    /* Same stream with the token that frees buffer 0 for load #2 taken away from compute:
     * load 2 now waits forever. (Sanity check that the stream above really uses tokens.) */
    for (size_t i = 0; i < n; i++)
        if (s[i].opcode == TSR_OP_GEMM && s[i].push_prev) {
            s[i].push_prev = 0;
            break;
        }
    expect_err("double buffered without the first free token", verify(&c, s, n, &o),
               TSR_EDEADLOCK, "deadlock", (char *)NULL);
    check_schedules("double buffered without the first free token", &c, s, n, TSR_EDEADLOCK);
}

/* ---- flags and tokens ---- */

static void test_illegal_flags(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[BASE_N];
    tiny_cfg(&c, 9, 16, 4);
    static const struct {
        int idx;
        const char *flag;
    } cases[] = {
        {1, "pop_prev"}, {1, "push_prev"}, {2, "pop_prev"}, {2, "push_prev"},
        {4, "pop_next"}, {4, "push_next"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        base_stream(s);
        tsr_insn_t *in = &s[cases[k].idx];
        if (!strcmp(cases[k].flag, "pop_prev")) in->pop_prev = 1;
        if (!strcmp(cases[k].flag, "push_prev")) in->push_prev = 1;
        if (!strcmp(cases[k].flag, "pop_next")) in->pop_next = 1;
        if (!strcmp(cases[k].flag, "push_next")) in->push_next = 1;
        char what[64], idx[8];
        snprintf(what, sizeof what, "%s on #%d", cases[k].flag, cases[k].idx);
        snprintf(idx, sizeof idx, "#%d", cases[k].idx);
        expect_err(what, verify(&c, s, BASE_N, NULL), TSR_EVERIFY, idx, cases[k].flag,
                   "illegal", (char *)NULL);
    }
}

static void test_deadlocks(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[64];
    tiny_cfg(&c, 9, 16, 4);

    /* A pop with no matching push: FINISH also waits on load->compute, whose only token
     * GEMM #3 took. */
    base_stream(s);
    s[5].pop_prev = 1;
    expect_err("pop without push", verify(&c, s, BASE_N, NULL), TSR_EDEADLOCK, "deadlock",
               "#5", "compute", "load->compute", (char *)NULL);
    check_schedules("pop without push", &c, s, BASE_N, TSR_EDEADLOCK);

    /* The store stage waits for a compute token that is never pushed. */
    base_stream(s);
    s[3].push_next = 0;
    expect_err("store pop without push", verify(&c, s, BASE_N, NULL), TSR_EDEADLOCK,
               "deadlock", "#4", "store", "compute->store", (char *)NULL);
    check_schedules("store pop without push", &c, s, BASE_N, TSR_EDEADLOCK);

    /* Circular wait: GEMM #3 waits for the store, the store #4 waits for GEMM. */
    base_stream(s);
    s[3].pop_next = 1;
    s[5].pop_next = 0;
    expect_err("circular wait", verify(&c, s, BASE_N, NULL), TSR_EDEADLOCK, "deadlock", "#3",
               "#4", "compute", "store", (char *)NULL);
    check_schedules("circular wait", &c, s, BASE_N, TSR_EDEADLOCK);
}

/* Pushes beyond DEP_QUEUE_DEPTH before the consumer gets to its pops: each side fills the
 * other's queue and then blocks pushing. Accepted with one more token slot. */
static size_t dep_overflow_stream(tsr_insn_t *s, int k)
{
    size_t n = 0;
    for (int i = 0; i < k; i++)
        s[n++] = fl(lnop(), 0, 0, 0, 1);              /* #0..#k-1 push load->compute */
    for (int i = 0; i < k; i++)
        s[n++] = fl(lnop(), 0, 1, 0, i == k - 1);     /* pop compute->load */
    for (int i = 0; i < k; i++)
        s[n++] = fl(cnop(), 0, 0, 1, 0);              /* push compute->load */
    for (int i = 0; i < k; i++)
        s[n++] = fl(cnop(), 1, 0, 0, 0);              /* pop load->compute */
    s[n++] = fl(fin(), 1, 0, 0, 0);                   /* last load's token */
    return n;
}

static void test_token_queue_overflow(void **state)
{
    (void)state;
    tsr_config_t c4, c5;
    tsr_insn_t s[64];
    tiny_cfg(&c4, 9, 16, 4);
    tiny_cfg(&c5, 9, 16, 5);
    size_t n = dep_overflow_stream(s, 5);
    expect_ok("5 tokens in flight, DEP_QUEUE_DEPTH 5", verify(&c5, s, n, NULL));
    check_schedules("5 tokens in flight, DEP_QUEUE_DEPTH 5", &c5, s, n, TSR_OK);
    check_schedules("5 tokens in flight, DEP_QUEUE_DEPTH 4", &c4, s, n, TSR_EDEADLOCK);
    /* With 4 slots: load blocks pushing its 5th token (#4), compute blocks pushing its 5th
     * (#14), and neither gets to its pops. */
    expect_err("5 tokens in flight, DEP_QUEUE_DEPTH 4", verify(&c4, s, n, NULL), TSR_EDEADLOCK,
               "deadlock", "#4", "#14", "full", (char *)NULL);
    tsr_config_t t;
    assert_int_equal(tsr_config_load("tiny", &t), TSR_OK);
    expect_err("tiny preset (DEP_QUEUE_DEPTH 4)", verify(&t, s, n, NULL), TSR_EDEADLOCK,
               "deadlock", (char *)NULL);
    n = dep_overflow_stream(s, 4);
    expect_ok("4 tokens in flight, DEP_QUEUE_DEPTH 4", verify(&c4, s, n, NULL));
}

/* 20 load-stage instructions waiting for compute tokens, dispatched before the compute
 * instructions that produce them: with 16 command slots fetch stalls on the load queue and
 * never reaches compute. Accepted with 32 slots. */
static void test_command_queue_block(void **state)
{
    (void)state;
    tsr_config_t c16, c32;
    tsr_insn_t s[64];
    tiny_cfg(&c16, 9, 16, 4);
    tiny_cfg(&c32, 9, 32, 4);
    size_t n = 0;
    for (int i = 0; i < 20; i++)
        s[n++] = fl(lnop(), 0, 1, 0, i == 19);
    for (int i = 0; i < 20; i++)
        s[n++] = fl(cnop(), 0, 0, 1, 0);
    s[n++] = fl(fin(), 1, 0, 0, 0);
    expect_ok("CMD_QUEUE_DEPTH 32", verify(&c32, s, n, NULL));
    check_schedules("CMD_QUEUE_DEPTH 32", &c32, s, n, TSR_OK);
    check_schedules("CMD_QUEUE_DEPTH 16", &c16, s, n, TSR_EDEADLOCK);
    expect_err("CMD_QUEUE_DEPTH 16", verify(&c16, s, n, NULL), TSR_EDEADLOCK, "deadlock",
               "fetch", "#0", (char *)NULL);
    /* The stage blocks on #0; the message also says which instruction fetch is stuck at
     * (#17: #0 in the stage, #1..#16 in the queue). */
    expect_err("CMD_QUEUE_DEPTH 16 (fetch position)", verify(&c16, s, n, NULL), TSR_EDEADLOCK,
               "#17", (char *)NULL);
}

static void test_token_imbalance(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[BASE_N];
    tiny_cfg(&c, 9, 16, 4);
    /* GEMM #3 also signals the load stage, which never pops. */
    base_stream(s);
    s[3].push_prev = 1;
    expect_err("push never popped (compute->load)", verify(&c, s, BASE_N, NULL), TSR_EVERIFY,
               "token", "#3", "compute->load", (char *)NULL);
    check_schedules("push never popped", &c, s, BASE_N, TSR_EVERIFY);
    /* Two load->compute pushes, one pop: #1's token is taken by GEMM (FIFO), #2's is left. */
    base_stream(s);
    s[1].push_next = 1;
    expect_err("push never popped (load->compute)", verify(&c, s, BASE_N, NULL), TSR_EVERIFY,
               "token", "#2", "load->compute", (char *)NULL);
    /* FINISH pushing a token nobody can pop. */
    base_stream(s);
    s[5].push_prev = 1;
    expect_err("FINISH pushes", verify(&c, s, BASE_N, NULL), TSR_EVERIFY, "token", "#5",
               (char *)NULL);
}

static void test_finish_rules(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[BASE_N + 2];
    tiny_cfg(&c, 9, 16, 4);

    /* Missing FINISH (and the store's token that FINISH would pop with it). */
    base_stream(s);
    s[4].push_prev = 0;
    expect_err("no FINISH", verify(&c, s, BASE_N - 1, NULL), TSR_EVERIFY, "FINISH",
               (char *)NULL);
    expect_err("empty stream", verify(&c, s, 0, NULL), TSR_EVERIFY, "FINISH", (char *)NULL);

    /* An instruction after FINISH. */
    base_stream(s);
    s[6] = loop(TSR_OP_GEMM, 0, 1, 1, 1);
    expect_err("insn after FINISH", verify(&c, s, BASE_N + 1, NULL), TSR_EVERIFY, "#6",
               "after FINISH", (char *)NULL);
    base_stream(s);
    s[6] = fin();
    expect_err("two FINISH", verify(&c, s, BASE_N + 1, NULL), TSR_EVERIFY, "#6", "FINISH",
               (char *)NULL);

    /* STORE #4 pops GEMM's token but signals nothing: FINISH may complete before it. */
    base_stream(s);
    s[4].push_prev = 0;
    s[5].pop_next = 0;
    expect_err("store not ordered", verify(&c, s, BASE_N, NULL), TSR_EVERIFY, "#4",
               "before FINISH", (char *)NULL);
    check_schedules("store not ordered", &c, s, BASE_N, TSR_EVERIFY);

    /* A load-stage instruction after the last token to compute: not ordered either. */
    base_stream(s);
    s[6] = s[5];
    s[5] = mem(TSR_OP_LOAD, TSR_MEM_INP, 1, INP_E, 1, 1, 1);
    expect_err("load not ordered", verify(&c, s, BASE_N + 1, NULL), TSR_EVERIFY, "#5",
               "before FINISH", (char *)NULL);
}

/* ---- memory types, SRAM ranges, padding ---- */

static void test_sram_and_types(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[BASE_N];
    tiny_cfg(&c, 9, 16, 4);
    char what[128];

#define MUT(idx, stmt, want_ok, ...)                                                               \
    do {                                                                                           \
        base_stream(s);                                                                            \
        tsr_insn_t *in = &s[idx];                                                                  \
        stmt;                                                                                      \
        snprintf(what, sizeof what, "#%d: %s", idx, #stmt);                                        \
        if (want_ok)                                                                               \
            expect_ok(what, verify(&c, s, BASE_N, NULL));                                          \
        else                                                                                       \
            expect_err(what, verify(&c, s, BASE_N, NULL), TSR_EVERIFY, __VA_ARGS__, (char *)NULL); \
    } while (0)

    /* LOAD inp (#1) rows against the 128-row input buffer; padding rows count. */
    MUT(1, (in->sram_base = INP_D - 2, in->x_size = 2), 1, "");
    MUT(1, (in->sram_base = INP_D - 1, in->x_size = 2), 0, "#1", "inp");
    MUT(1, (in->sram_base = INP_D - 1, in->y_size = 2, in->x_stride = 1), 0, "#1", "inp");
    MUT(1, (in->sram_base = INP_D - 2, in->x_pad1 = 1), 1, "");
    MUT(1, (in->sram_base = INP_D - 2, in->x_pad0 = 1, in->x_pad1 = 1), 0, "#1", "inp");
    MUT(1, (in->sram_base = INP_D - 2, in->y_pad1 = 1), 1, "");
    MUT(1, (in->sram_base = INP_D - 2, in->y_pad0 = 1, in->x_pad0 = 1), 0, "#1", "inp");
    MUT(1, (in->sram_base = 0, in->y_pad0 = 15, in->y_pad1 = 15, in->x_pad0 = 2, in->x_pad1 = 1),
        1, ""); /* 31 rows x 4 = 124 <= 128 */
    MUT(1, (in->sram_base = 0, in->y_pad0 = 15, in->y_pad1 = 15, in->x_pad0 = 2, in->x_pad1 = 2),
        0, "#1", "inp"); /* 31 x 5 = 155 */
    /* LOAD wgt (#2) against 64 rows. */
    MUT(2, (in->sram_base = WGT_D - 1), 1, "");
    MUT(2, (in->sram_base = WGT_D), 0, "#2", "wgt");
    /* LOAD uop (#0) against 256 entries (the GEMM reads the slot it fills). */
    MUT(0, (in->sram_base = UOP_D - 1, s[3].uop_bgn = UOP_D - 1, s[3].uop_end = UOP_D), 1, "");
    MUT(0, (in->sram_base = UOP_D - 1, in->x_size = 2), 0, "#0", "uop");
    /* LOAD acc / acc8 into the accumulator buffer (128 rows); no uop is loaded then, so the
     * GEMM reads none (an empty range). */
    MUT(0, (in->mem_type = TSR_MEM_ACC, in->sram_base = ACC_D - 1, s[3].uop_end = 0), 1, "");
    MUT(0, (in->mem_type = TSR_MEM_ACC, in->sram_base = ACC_D - 1, in->x_size = 2), 0, "#0",
        "acc");
    MUT(0, (in->mem_type = TSR_MEM_ACC8, in->sram_base = ACC_D - 1, in->x_size = 2), 0, "#0",
        "acc");
    /* STORE (#4) rows against the 128-row output buffer. */
    MUT(4, (in->sram_base = ACC_D - 2, in->x_size = 2), 1, "");
    MUT(4, (in->sram_base = ACC_D - 1, in->x_size = 2), 0, "#4", "out");
    MUT(4, (in->sram_base = ACC_D - 1, in->y_size = 2), 0, "#4", "out");

    /* Padding where it is not allowed. */
    MUT(4, in->x_pad0 = 1, 0, "#4", "padding");
    MUT(4, in->y_pad1 = 1, 0, "#4", "padding");
    MUT(0, in->y_pad0 = 1, 0, "#0", "padding");
    MUT(0, in->x_pad1 = 1, 0, "#0", "padding");
    /* ... and allowed on acc/acc8 loads. */
    MUT(0, (in->mem_type = TSR_MEM_ACC, in->x_pad0 = 1, s[3].uop_end = 0), 1, "");

    /* Memory types. */
    MUT(4, in->mem_type = TSR_MEM_INP, 0, "#4", "out");
    MUT(4, in->mem_type = TSR_MEM_ACC, 0, "#4", "out");
    MUT(1, in->mem_type = TSR_MEM_OUT, 0, "#1", "out");
    MUT(1, in->mem_type = 7, 0, "#1", "memory type");
#undef MUT
}

static void test_uop_ranges(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[BASE_N];
    tiny_cfg(&c, 9, 16, 4);
    static const uint32_t ops[] = {TSR_OP_GEMM, TSR_OP_ALU};
    for (int k = 0; k < 2; k++) {
        const char *name = ops[k] == TSR_OP_GEMM ? "gemm" : "alu";
        char what[96];
        base_stream(s);
        s[0].x_size = s[0].x_stride = UOP_D; /* every slot loaded (no DRAM checks here) */
        s[3].opcode = ops[k];
        s[3].uop_bgn = 0;
        s[3].uop_end = UOP_D;
        snprintf(what, sizeof what, "%s uop_end = depth", name);
        expect_ok(what, verify(&c, s, BASE_N, NULL));
        s[3].uop_end = UOP_D + 1;
        snprintf(what, sizeof what, "%s uop_end = depth + 1", name);
        expect_err(what, verify(&c, s, BASE_N, NULL), TSR_EVERIFY, "#3", "uop", (char *)NULL);
        s[3].uop_bgn = UOP_D;
        s[3].uop_end = UOP_D;
        snprintf(what, sizeof what, "%s empty range at depth", name);
        expect_ok(what, verify(&c, s, BASE_N, NULL));
        s[3].uop_bgn = 2;
        s[3].uop_end = 1;
        snprintf(what, sizeof what, "%s uop_bgn > uop_end", name);
        expect_err(what, verify(&c, s, BASE_N, NULL), TSR_EVERIFY, "#3", "uop", (char *)NULL);
    }
}

/* ---- GEMM / ALU indices from uop contents ---- */

typedef struct {
    const char *what;
    uint32_t op;
    uint32_t dst, src, wgt;   /* uop at DRAM element 4 (loaded into uop slot 6) */
    uint32_t io, ii;
    uint32_t dfo, dfi, sfo, sfi, wfo, wfi;
    const char *word;         /* distinctive word of the rejection */
} idx_case_t;

/* tiny with a 64-row input buffer: acc 128, inp 64, wgt 64 rows. Each case is accepted as
 * given and rejected with the last nonzero factor one larger. */
static const idx_case_t idx_cases[] = {
    /* dst = 100 + 1*27 = 127 < 128 */
    {"gemm dst (outer)", TSR_OP_GEMM, 100, 0, 0, 2, 1, 27, 0, 0, 0, 0, 0, "dst"},
    /* dst = 100 + 1*10 + 2*8 = 126; +1 on dfi -> 128 */
    {"gemm dst (inner)", TSR_OP_GEMM, 100, 0, 0, 2, 3, 10, 8, 0, 0, 0, 0, "dst"},
    /* src = 40 + 2*11 = 62 < 64 (inp); 12 -> 64 */
    {"gemm src", TSR_OP_GEMM, 0, 40, 0, 1, 3, 0, 0, 0, 11, 0, 0, "src"},
    /* wgt = 60 + 1*3 = 63 < 64; 4 -> 64 */
    {"gemm wgt", TSR_OP_GEMM, 0, 0, 60, 2, 1, 0, 0, 0, 0, 3, 0, "wgt"},
    {"gemm wgt (inner)", TSR_OP_GEMM, 0, 0, 30, 1, 12, 0, 0, 0, 0, 0, 3, "wgt"},
    /* ALU dst against acc */
    {"alu dst", TSR_OP_ALU, 100, 0, 0, 2, 1, 27, 0, 0, 0, 0, 0, "dst"},
    /* ALU src against acc (128 rows, not inp's 64): 100 + 27 = 127; 28 -> 128 */
    {"alu src", TSR_OP_ALU, 0, 100, 0, 2, 1, 0, 0, 27, 0, 0, 0, "src"},
    {"alu src (inner)", TSR_OP_ALU, 0, 60, 0, 1, 3, 0, 0, 0, 33, 0, 0, "src"},
};

static size_t idx_stream(tsr_insn_t *s, const idx_case_t *k, int bump)
{
    poison_uops();
    put_uop(3, 10, 0, 0);
    put_uop(4, k->dst, k->src, k->wgt);
    size_t n = 0;
    /* DRAM elements 3 and 4 -> uop slots 5 and 6. */
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 5, UOP_E + 3, 1, 2, 2);
    tsr_insn_t g = loop(k->op, 5, 7, k->io, k->ii);
    g.dst_factor_out = k->dfo;
    g.dst_factor_in = k->dfi;
    g.src_factor_out = k->sfo;
    g.src_factor_in = k->sfi;
    g.wgt_factor_out = k->wfo;
    g.wgt_factor_in = k->wfi;
    if (bump) {
        uint32_t *last = k->wfi ? &g.wgt_factor_in : k->wfo ? &g.wgt_factor_out
                       : k->sfi ? &g.src_factor_in : k->sfo ? &g.src_factor_out
                       : k->dfi ? &g.dst_factor_in : &g.dst_factor_out;
        (*last)++;
    }
    s[n++] = g;
    s[n++] = fin();
    return n;
}

static void test_uop_indices(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[8];
    tiny_cfg(&c, 8, 16, 4);
    assert_int_equal(c.inp_depth, 64);
    tsr_verify_opts_t o = full_opts();
    for (size_t i = 0; i < sizeof idx_cases / sizeof idx_cases[0]; i++) {
        const idx_case_t *k = &idx_cases[i];
        char what[96];
        size_t n = idx_stream(s, k, 0);
        snprintf(what, sizeof what, "%s at the last row", k->what);
        expect_ok(what, verify(&c, s, n, &o));
        n = idx_stream(s, k, 1);
        snprintf(what, sizeof what, "%s one row past", k->what);
        expect_err(what, verify(&c, s, n, &o), TSR_EVERIFY, "#1", k->word, (char *)NULL);
        /* Without a way to read the uops the same stream cannot be judged: accepted. */
        snprintf(what, sizeof what, "%s one row past, no read callback", k->what);
        expect_ok(what, verify(&c, s, n, NULL));
    }
    /* GEMM src is an input row (64), ALU src an accumulator row (128): src 100 is fine for
     * ALU (above) but not for GEMM. */
    idx_case_t g = {"gemm src 100", TSR_OP_GEMM, 0, 100, 0, 1, 1, 0, 0, 0, 0, 0, 0, "src"};
    size_t n = idx_stream(s, &g, 0);
    expect_err("gemm src 100 (inp has 64 rows)", verify(&c, s, n, &o), TSR_EVERIFY, "#1", "src",
               (char *)NULL);
    /* Reset GEMM only writes acc[dst]: src/wgt are not used. */
    s[1].reset = 1;
    expect_ok("reset gemm ignores src", verify(&c, s, n, &o));
    /* ALU with an immediate does not read acc[src]. */
    idx_case_t a = {"alu imm", TSR_OP_ALU, 0, 50, 0, 2, 1, 0, 0, 100, 0, 0, 0, "src"};
    n = idx_stream(s, &a, 0);
    expect_err("alu src 50 + 1*100", verify(&c, s, n, &o), TSR_EVERIFY, "#1", "src",
               (char *)NULL);
    s[1].use_imm = 1;
    expect_ok("alu use_imm ignores src", verify(&c, s, n, &o));
}

/* ---- uop rows no LOAD of the stream wrote ---- */

/* A GEMM/ALU may read only uop rows that a uop LOAD earlier in the stream wrote: any other row
 * holds whatever the device had (zeros on fsim, the last stream's kernel on the RTL). The rule
 * is structural, so it holds with and without a read callback. */
static void expect_unloaded(const char *what, const tsr_config_t *c, const tsr_insn_t *s, size_t n,
                            const char *insn, const char *row)
{
    char w[128];
    tsr_verify_opts_t o = full_opts();
    snprintf(w, sizeof w, "%s (uop contents read)", what);
    expect_err(w, verify(c, s, n, &o), TSR_EVERIFY, insn, row, "no earlier uop LOAD", (char *)NULL);
    snprintf(w, sizeof w, "%s (no read callback)", what);
    expect_err(w, verify(c, s, n, NULL), TSR_EVERIFY, insn, row, "no earlier uop LOAD", (char *)NULL);
}

/* ---- activation tables (ACT_LUT; isa/semantics.md, lut) ---- */

enum { LUT_ADDR = 0x5000 }; /* 4 tables x 256 B */
#define LUT_E (LUT_ADDR / 256)

/* tiny with ACT_LUT = n. */
static void lut_cfg(tsr_config_t *c, int n)
{
    char json[512];
    snprintf(json, sizeof json,
             "{\"TARGET\":\"sim\",\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,"
             "\"LOG_BATCH\":0,\"LOG_BLOCK\":2,\"LOG_UOP_BUFF_SIZE\":10,\"LOG_INP_BUFF_SIZE\":9,"
             "\"LOG_WGT_BUFF_SIZE\":10,\"LOG_ACC_BUFF_SIZE\":11,\"ACT_LUT\":%d}",
             n);
    if (tsr_config_parse(json, "tiny-lut", c))
        fail_msg("config: %s", tsr_errmsg());
}

/* uop LOAD, LOAD lut of tables [0, ntab), ALU lut (imm table 1) over uop 0, FINISH:
 * all in the compute stage, no tokens. */
enum { LUT_N = 4 };
static void lut_stream(tsr_insn_t s[LUT_N], uint32_t ntab)
{
    s[0] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, UOP_E, 1, 1, 1);
    s[1] = mem(TSR_OP_LOAD, TSR_MEM_LUT, 0, LUT_E, 1, ntab, ntab);
    s[2] = loop(TSR_OP_ALU, 0, 1, 1, 1);
    s[2].alu_opcode = TSR_ALU_LUT;
    s[2].use_imm = 1;
    s[2].imm = 1;
    s[3] = fin();
    poison_uops();
    put_uop(0, 0, 0, 0);
}

/* The lut rules: the key (for the op and for the memory type, flag-only
 * LOADs too), imm within the tables, tables loaded earlier in the stream
 * (one with imm, all without), no padding, no STORE, rows within ACT_LUT. */
static void test_lut_rules(void **state)
{
    (void)state;
    tsr_config_t c, c0;
    tsr_insn_t s[LUT_N];
    lut_cfg(&c, 4);
    tiny_cfg(&c0, 9, 16, 4);
    const tsr_region_t regs[] = {regions[0], regions[1], regions[2], regions[3], {LUT_ADDR, 4 * 256, "lut"}};
    tsr_verify_opts_t o = {regs, 5, 1, dram_read, NULL};

    lut_stream(s, 2);
    expect_ok("lut op on a loaded table", verify(&c, s, LUT_N, &o));
    s[2].imm = 2;
    expect_err("lut op on table 2, tables 0..1 loaded", verify(&c, s, LUT_N, &o), TSR_EVERIFY, "insn #2 (alu)",
               "activation table 2", "no earlier LOAD of lut", NULL);
    s[2].imm = 4;
    expect_err("lut imm 4 with ACT_LUT 4", verify(&c, s, LUT_N, &o), TSR_EVERIFY, "insn #2 (alu)",
               "imm = 4 is outside [0, 4)", NULL);
    s[2].imm = -1;
    expect_err("lut imm -1", verify(&c, s, LUT_N, &o), TSR_EVERIFY, "imm = -1 is outside", NULL);
    /* (imm is checked even when the loop runs nothing) */
    s[2].iter_out = 0;
    expect_err("lut imm -1, no iteration", verify(&c, s, LUT_N, &o), TSR_EVERIFY, "imm = -1", NULL);
    /* a register operand may select any table: all must be loaded */
    lut_stream(s, 2);
    s[2].use_imm = 0;
    expect_err("lut op by register, tables 0..1 of 4 loaded", verify(&c, s, LUT_N, &o), TSR_EVERIFY,
               "activation table 2", NULL);
    lut_stream(s, 4);
    s[2].use_imm = 0;
    expect_ok("lut op by register, every table loaded", verify(&c, s, LUT_N, &o));
    /* the LOAD after the op does not count; a reset or empty loop reads no table */
    lut_stream(s, 2);
    tsr_insn_t t = s[1];
    s[1] = s[2];
    s[2] = t;
    expect_err("lut load after the op", verify(&c, s, LUT_N, &o), TSR_EVERIFY, "insn #1 (alu)", "activation table 1",
               NULL);
    s[1].reset = 1;
    expect_ok("reset lut op before the load", verify(&c, s, LUT_N, &o));
    s[1].reset = 0;
    s[1].uop_end = 0;
    expect_ok("empty lut op before the load", verify(&c, s, LUT_N, &o));
    /* a LOAD of no rows loads nothing */
    lut_stream(s, 2);
    s[1].x_size = 0;
    expect_err("lut load of no rows", verify(&c, s, LUT_N, &o), TSR_EVERIFY, "activation table 1", NULL);
    /* rows beyond ACT_LUT, padding, STORE */
    lut_stream(s, 2);
    s[1].sram_base = 3;
    expect_err("lut rows [3, 5)", verify(&c, s, LUT_N, &o), TSR_EVERIFY, "insn #1 (load lut)",
               "[3, 5) are outside the lut buffer (4 rows)", NULL);
    lut_stream(s, 2);
    s[1].x_pad1 = 1;
    expect_err("padded lut load", verify(&c, s, LUT_N, &o), TSR_EVERIFY, "insn #1 (load lut)", "padding", NULL);
    lut_stream(s, 2);
    s[1].opcode = TSR_OP_STORE;
    expect_err("store of lut", verify(&c, s, LUT_N, &o), TSR_EVERIFY, "insn #1 (store lut)", "only the out buffer",
               NULL);
    /* DRAM: the tables' bytes lie in a declared buffer */
    lut_stream(s, 2);
    s[1].dram_base = LUT_E + 3;
    expect_err("lut load past its buffer", verify(&c, s, LUT_N, &o), TSR_EVERIFY, "runs past the end of buffer lut",
               NULL);

    /* ACT_LUT = 0: the op and the memory type are refused naming the key */
    lut_stream(s, 2);
    expect_err("lut load without ACT_LUT", verify(&c0, s, LUT_N, &o), TSR_EVERIFY, "insn #1 (load lut)",
               "needs config key ACT_LUT > 0", NULL);
    s[1].x_size = 0;
    expect_err("flag-only lut load without ACT_LUT", verify(&c0, s, LUT_N, &o), TSR_EVERIFY, "insn #1 (load lut)",
               "ACT_LUT", NULL);
    s[1] = cnop();
    expect_err("lut op without ACT_LUT", verify(&c0, s, LUT_N, &o), TSR_EVERIFY, "insn #2 (alu)",
               "ALU op lut needs config key ACT_LUT > 0", NULL);
}

static void test_unloaded_uops(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[BASE_N];
    tiny_cfg(&c, 9, 16, 4);
    tsr_verify_opts_t o = full_opts();

    /* The base stream without its uop LOAD (a flag-only compute no-op in its place). */
    base_stream(s);
    s[0] = cnop();
    expect_unloaded("gemm, no uop load", &c, s, BASE_N, "insn #3 (gemm)", "uop row 0,");
    s[3].opcode = TSR_OP_ALU;
    expect_unloaded("alu, no uop load", &c, s, BASE_N, "insn #3 (alu)", "uop row 0,");
    /* A uop LOAD with x_size 0 writes nothing. */
    base_stream(s);
    s[0].x_size = 0;
    expect_unloaded("uop load of no rows", &c, s, BASE_N, "insn #3 (gemm)", "uop row 0,");
    /* No iteration reads no uop: accepted. */
    base_stream(s);
    s[0] = cnop();
    s[3].iter_out = 0;
    expect_ok("zero-iteration gemm over unloaded uops", verify(&c, s, BASE_N, &o));

    /* A reset GEMM, then the LOAD: ordered after, so it does not count. */
    tsr_insn_t r[3];
    poison_uops();
    put_uop(0, 1, 0, 0);
    put_uop(1, 2, 0, 0);
    r[0] = loop(TSR_OP_GEMM, 0, 1, 1, 1);
    r[0].reset = 1;
    r[1] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, UOP_E, 1, 1, 1);
    r[2] = fin();
    expect_unloaded("uop load after the gemm", &c, r, 3, "insn #0 (gemm)", "uop row 0,");
    tsr_insn_t t = r[0];
    r[0] = r[1];
    r[1] = t;
    expect_ok("uop load before the gemm", verify(&c, r, 3, &o));
    expect_ok("uop load before the gemm, no read callback", verify(&c, r, 3, NULL));
    /* Two rows laid out 2-D (DRAM stride 2) fill slots 4 and 5: [4, 6) reads loaded rows only,
     * [3, 6) and [4, 7) do not; the first unloaded row is named. */
    r[0] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 4, UOP_E, 2, 1, 2);
    r[1].uop_bgn = 4;
    r[1].uop_end = 6;
    expect_ok("gemm over the two loaded rows", verify(&c, r, 3, &o));
    r[1].uop_bgn = 3;
    expect_unloaded("gemm from the row before them", &c, r, 3, "insn #1 (gemm)", "uop row 3,");
    r[1].uop_bgn = 4;
    r[1].uop_end = 7;
    expect_unloaded("gemm past the loaded rows", &c, r, 3, "insn #1 (gemm)", "uop row 6,");
}

/* ---- DRAM regions ---- */

static void test_dram_regions(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[BASE_N];
    tiny_cfg(&c, 9, 16, 4);
    tsr_verify_opts_t o = full_opts();
    tsr_verify_opts_t nocheck = o;
    nocheck.check_dram = 0;

    /* One element past the 16-row inp region. */
    base_stream(s);
    s[1].dram_base = INP_E + 16;
    expect_err("inp outside regions", verify(&c, s, BASE_N, &o), TSR_EVERIFY, "#1", "DRAM",
               (char *)NULL);
    expect_ok("inp outside regions, check_dram 0", verify(&c, s, BASE_N, &nocheck));
    base_stream(s);
    s[1].dram_base = INP_E + 15;
    expect_ok("inp last element", verify(&c, s, BASE_N, &o));
    base_stream(s);
    s[1].dram_base = INP_E - 1;
    expect_err("inp one before region", verify(&c, s, BASE_N, &o), TSR_EVERIFY, "#1", "DRAM",
               (char *)NULL);

    /* 2-D: rows at 0..3 and 12..15 fit; with stride 13 the last row is 13..16. */
    base_stream(s);
    s[1].y_size = 2;
    s[1].x_size = 4;
    s[1].x_stride = 12;
    expect_ok("2-D inside", verify(&c, s, BASE_N, &o));
    s[1].x_stride = 13;
    expect_err("2-D last row crosses the end", verify(&c, s, BASE_N, &o), TSR_EVERIFY, "#1",
               "DRAM", (char *)NULL);

    /* Padding is generated on chip: only the y_size x x_size elements come from DRAM. */
    base_stream(s);
    s[1].dram_base = INP_E + 8;
    s[1].y_size = 2;
    s[1].x_size = 4;
    s[1].x_stride = 4;
    s[1].y_pad0 = s[1].y_pad1 = s[1].x_pad0 = s[1].x_pad1 = 2;
    expect_ok("padded load, data exactly at the region end", verify(&c, s, BASE_N, &o));
    /* Stride 0 re-reads one row: the span is one row. */
    base_stream(s);
    s[1].y_size = 4;
    s[1].x_size = 16;
    s[1].x_stride = 0;
    expect_ok("stride 0, one row = whole region", verify(&c, s, BASE_N, &o));
    s[1].dram_base = INP_E + 1;
    expect_err("stride 0, row one past", verify(&c, s, BASE_N, &o), TSR_EVERIFY, "#1", "DRAM",
               (char *)NULL);

    /* STORE and uop loads are checked too. */
    base_stream(s);
    s[4].dram_base = OUT_E + 16;
    expect_err("store outside", verify(&c, s, BASE_N, &o), TSR_EVERIFY, "#4", "DRAM",
               (char *)NULL);
    base_stream(s);
    s[0].dram_base = UOP_E + 16;
    expect_err("uop load outside", verify(&c, s, BASE_N, &o), TSR_EVERIFY, "#0", "DRAM",
               (char *)NULL);
    /* A region of another type still counts as declared (regions are untyped buffers):
     * wgt element 0x200 = byte 0x2000, the inp region, 16 bytes of it. */
    base_stream(s);
    s[2].dram_base = INP_ADDR / 16;
    expect_ok("wgt row inside the inp region", verify(&c, s, BASE_N, &o));

    /* 32-bit wrap-around: wgt element WGT_E + 2^28 is byte WGT_ADDR + 2^32, which a 32-bit
     * computation would see as WGT_ADDR (inside). */
    base_stream(s);
    s[2].dram_base = WGT_E + (1u << 28);
    expect_err("wgt address wraps 32 bits", verify(&c, s, BASE_N, &o), TSR_EVERIFY, "#2", "DRAM",
               (char *)NULL);
    /* Same for the end of a 2-D access: inp row 1 starts at element INP_E + 65535, byte
     * INP_ADDR + 262140; not a wrap, but far outside. And dram_base near 2^32 elements. */
    base_stream(s);
    s[1].dram_base = 0xffffffffu;
    expect_err("inp dram_base 2^32-1", verify(&c, s, BASE_N, &o), TSR_EVERIFY, "#1", "DRAM",
               (char *)NULL);
    base_stream(s);
    s[1].dram_base = INP_E + (1u << 30); /* byte INP_ADDR + 2^32 */
    expect_err("inp address wraps 32 bits", verify(&c, s, BASE_N, &o), TSR_EVERIFY, "#1", "DRAM",
               (char *)NULL);

    /* A buffer above 4 GiB: inside when computed in 64 bits, although the byte address
     * overflows 32-bit arithmetic. */
    tsr_region_t high[5];
    memcpy(high, regions, sizeof regions);
    high[4].addr = (1ull << 32) + WGT_ADDR;
    high[4].size = 16 * 16;
    high[4].name = "high wgt";
    tsr_verify_opts_t ho = o;
    ho.regions = high;
    ho.nregions = 5;
    base_stream(s);
    s[2].dram_base = (1u << 28) + WGT_E;
    expect_ok("wgt buffer above 4 GiB", verify(&c, s, BASE_N, &ho));
    s[2].dram_base = (1u << 28) + WGT_E + 16;
    expect_err("one past the buffer above 4 GiB", verify(&c, s, BASE_N, &ho), TSR_EVERIFY, "#2",
               "DRAM", (char *)NULL);
}

/* ---- tsr_pipe: bounded runs, exec errors ---- */

static int fail_at_3(void *ctx, uint32_t index, const tsr_insn_t *insn)
{
    (void)ctx;
    (void)insn;
    if (index == 3)
        return tsr_err(TSR_EFAULT, "simulated fault in the datapath");
    return TSR_OK;
}

static void test_pipe_runs(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[BASE_N];
    tiny_cfg(&c, 9, 16, 4);
    base_stream(s);

    /* One instruction per call: executes the stream one at a time, then reports done. */
    for (uint64_t seed = 0; seed < 20; seed++) {
        tsr_pipe_t *p = NULL;
        assert_int_equal(tsr_pipe_create(&c, s, BASE_N, NULL, NULL, seed, &p), TSR_OK);
        int done = 0;
        uint64_t calls = 0;
        while (!done) {
            uint64_t before = tsr_pipe_executed(p);
            int rc = tsr_pipe_run(p, 1, &done);
            if (rc)
                fail_msg("seed %llu call %llu: %s", (unsigned long long)seed,
                         (unsigned long long)calls, tsr_errmsg());
            uint64_t after = tsr_pipe_executed(p);
            if (after > before + 1)
                fail_msg("seed %llu: run(max 1) executed %llu instructions", (unsigned long long)seed,
                         (unsigned long long)(after - before));
            if (++calls > 100)
                fail_msg("seed %llu: no completion after 100 bounded runs", (unsigned long long)seed);
        }
        assert_int_equal(tsr_pipe_executed(p), BASE_N);
        tsr_pipe_destroy(p);
    }

    /* A deadlocking stream under bounded runs still ends in EDEADLOCK, and stays there. */
    s[5].pop_prev = 1;
    tsr_pipe_t *p = NULL;
    assert_int_equal(tsr_pipe_create(&c, s, BASE_N, NULL, NULL, 0, &p), TSR_OK);
    int done = 0, rc = TSR_OK;
    for (int i = 0; i < 100 && rc == TSR_OK; i++)
        rc = tsr_pipe_run(p, 1, &done);
    expect_err("bounded runs of a deadlock", rc, TSR_EDEADLOCK, "deadlock", (char *)NULL);
    assert_int_equal(tsr_pipe_run(p, 0, &done), TSR_EDEADLOCK);
    assert_int_equal(done, 0);
    tsr_pipe_destroy(p);

    /* An exec error stops the run with exec's code, prefixed with the instruction index. */
    base_stream(s);
    assert_int_equal(tsr_pipe_create(&c, s, BASE_N, fail_at_3, NULL, 0, &p), TSR_OK);
    tsr_err_clear();
    rc = tsr_pipe_run(p, 0, &done);
    expect_err("exec error", rc, TSR_EFAULT, "#3", "simulated fault", (char *)NULL);
    assert_int_equal(done, 0);
    tsr_pipe_destroy(p);

    /* Static errors are reported by create (or the first run). */
    base_stream(s);
    s[1].pop_prev = 1;
    p = NULL;
    tsr_err_clear();
    rc = tsr_pipe_create(&c, s, BASE_N, NULL, NULL, 0, &p);
    if (!rc)
        rc = tsr_pipe_run(p, 0, &done);
    tsr_pipe_destroy(p);
    expect_err("pipe: illegal flag", rc, TSR_EVERIFY, "#1", "pop_prev", (char *)NULL);
}

/* ---- data races (tsr_hb through tsr_verify) ---- */

/* A racy stream and its fix differ in one token pair; check_schedules
 * confirms both are otherwise legal (tokens, deadlock, FINISH). */
static void test_races(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[16];
    tiny_cfg(&c, 9, 16, 4);
    tsr_verify_opts_t o = full_opts();
    size_t n;

    /* Read after write: the GEMM reads inp row 0 that LOAD #1 writes; the token #2 pushes is
     * popped by the GEMM but #1 comes after #2 in the load stage, so nothing orders #1 before
     * #3. */
    poison_uops();
    put_uop(0, 0, 0, 0);
    n = 0;
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, UOP_E, 1, 1, 1);
    s[n++] = fl(mem(TSR_OP_LOAD, TSR_MEM_WGT, 0, WGT_E, 1, 1, 1), 0, 0, 0, 1);
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_INP, 0, INP_E, 1, 1, 1);
    s[n++] = fl(loop(TSR_OP_GEMM, 0, 1, 1, 1), 1, 0, 0, 1);
    s[n++] = fl(mem(TSR_OP_STORE, TSR_MEM_OUT, 0, OUT_E, 1, 1, 1), 1, 0, 1, 0);
    s[n++] = fl(lnop(), 0, 0, 0, 1);
    s[n++] = fl(fin(), 1, 1, 0, 0);
    check_schedules("raw race", &c, s, n, TSR_OK);
    expect_err("raw race", verify(&c, s, n, &o), TSR_EVERIFY, "insn #3 (gemm)", "race on inp rows [0, 1)",
               "reads them", "insn #2 (load inp) in the load stage writes", (char *)NULL);
    /* The fix: #2 (not #1) pushes the token the GEMM pops. */
    s[1].push_next = 0;
    s[2].push_next = 1;
    check_schedules("raw race fixed", &c, s, n, TSR_OK);
    expect_ok("raw race fixed", verify(&c, s, n, &o));
    /* Without uop contents the GEMM footprint is unknown: not judged (documented). */
    s[1].push_next = 1;
    s[2].push_next = 0;
    expect_ok("raw race, no uop contents", verify(&c, s, n, NULL));

    /* Write after read: LOAD #4 overwrites the inp row the GEMM #3 reads, without waiting
     * for a compute->load token. */
    n = 0;
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, UOP_E, 1, 1, 1);
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_INP, 0, INP_E, 1, 1, 1);
    s[n++] = fl(mem(TSR_OP_LOAD, TSR_MEM_WGT, 0, WGT_E, 1, 1, 1), 0, 0, 0, 1);
    s[n++] = fl(loop(TSR_OP_GEMM, 0, 1, 1, 1), 1, 0, 0, 0);
    s[n++] = fl(mem(TSR_OP_LOAD, TSR_MEM_INP, 0, INP_E + 1, 1, 1, 1), 0, 0, 0, 1);
    s[n++] = fl(cnop(), 1, 0, 0, 1);
    s[n++] = fl(mem(TSR_OP_STORE, TSR_MEM_OUT, 0, OUT_E, 1, 1, 1), 1, 0, 1, 0);
    s[n++] = fl(fin(), 0, 1, 0, 0);
    check_schedules("war race", &c, s, n, TSR_OK);
    expect_err("war race", verify(&c, s, n, &o), TSR_EVERIFY, "race on inp rows [0, 1)", "#3 (gemm)",
               "#4 (load inp)", (char *)NULL);
    s[3].push_prev = 1;
    s[4].pop_next = 1;
    check_schedules("war race fixed", &c, s, n, TSR_OK);
    expect_ok("war race fixed", verify(&c, s, n, &o));
    /* The same defect where the dry run executes the read first: LOAD #5 waits for a token
     * from #3, which precedes the GEMM #4 that reads the row #5 overwrites. */
    n = 0;
    tsr_insn_t w[9];
    w[n++] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, UOP_E, 1, 1, 1);
    w[n++] = mem(TSR_OP_LOAD, TSR_MEM_INP, 0, INP_E, 1, 1, 1);
    w[n++] = fl(mem(TSR_OP_LOAD, TSR_MEM_WGT, 0, WGT_E, 1, 1, 1), 0, 0, 0, 1);
    w[n++] = fl(cnop(), 1, 0, 1, 0);
    w[n++] = loop(TSR_OP_GEMM, 0, 1, 1, 1);
    w[n++] = fl(mem(TSR_OP_LOAD, TSR_MEM_INP, 0, INP_E + 1, 1, 1, 1), 0, 1, 0, 1);
    w[n++] = fl(cnop(), 1, 0, 0, 1);
    w[n++] = fl(mem(TSR_OP_STORE, TSR_MEM_OUT, 0, OUT_E, 1, 1, 1), 1, 0, 1, 0);
    w[n++] = fl(fin(), 0, 1, 0, 0);
    check_schedules("war race, read first", &c, w, n, TSR_OK);
    expect_err("war race, read first", verify(&c, w, n, &o), TSR_EVERIFY, "insn #5 (load inp)",
               "race on inp rows [0, 1)", "writes them", "insn #4 (gemm) in the compute stage reads",
               (char *)NULL);
    w[3].push_prev = 0;
    w[4].push_prev = 1;
    check_schedules("war race, read first, fixed", &c, w, n, TSR_OK);
    expect_ok("war race, read first, fixed", verify(&c, w, n, &o));
    n = 8;
    /* A load into other rows needs no token. */
    s[3].push_prev = 0;
    s[4].pop_next = 0;
    s[4].sram_base = 1;
    expect_ok("load beside a running gemm", verify(&c, s, n, &o));
    /* Padding counts: one pad row before puts row 0 back in the footprint. */
    s[4].sram_base = 0;
    s[4].y_pad0 = 0;
    s[4].x_pad0 = 1;
    s[4].sram_base = 0;
    expect_err("padding row", verify(&c, s, n, &o), TSR_EVERIFY, "race on inp rows [0, 1)", (char *)NULL);
    s[4].x_pad0 = 0;
    s[4].sram_base = 1;

    /* The wgt buffer the same way (a GEMM reads wgt[0]). */
    s[4] = fl(mem(TSR_OP_LOAD, TSR_MEM_WGT, 0, WGT_E + 1, 1, 1, 1), 0, 0, 0, 1);
    expect_err("wgt war race", verify(&c, s, n, &o), TSR_EVERIFY, "race on wgt rows [0, 1)",
               "#4 (load wgt)", (char *)NULL);
    /* A reset GEMM reads neither inp nor wgt. */
    s[3].reset = 1;
    expect_ok("reset gemm reads no wgt", verify(&c, s, n, &o));

    /* out: a STORE popping a token pushed before the GEMM that writes its row. The GEMM's
     * footprint is uop dst 0 + {0, 8} (outer) + {0, 2, 4} (inner) = {0, 2, 4, 8, 10, 12}. */
    poison_uops();
    put_uop(0, 0, 0, 0);
    n = 0;
    s[n++] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, UOP_E, 1, 1, 1);
    s[n++] = fl(cnop(), 0, 0, 0, 1);
    tsr_insn_t g = loop(TSR_OP_GEMM, 0, 1, 2, 3);
    g.reset = 1;
    g.dst_factor_out = 8;
    g.dst_factor_in = 2;
    s[n++] = g;
    s[n++] = fl(mem(TSR_OP_STORE, TSR_MEM_OUT, 0, OUT_E, 1, 1, 1), 1, 0, 1, 0);
    s[n++] = fl(fin(), 0, 1, 0, 0);
    static const struct {
        uint32_t row, x;
        const char *want; /* NULL = no race */
    } rows[] = {{1, 1, NULL}, {6, 1, NULL}, {14, 2, NULL}, {5, 3, NULL}, {10, 1, "out rows [10, 11)"},
                {12, 1, "out rows [12, 13)"}, {1, 4, "out rows [2, 3)"}, {8, 3, "out rows [8, 9)"}};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        char what[64];
        s[3].sram_base = rows[k].row;
        s[3].x_size = s[3].x_stride = rows[k].x;
        snprintf(what, sizeof what, "store out rows [%u, %u) beside the gemm", rows[k].row,
                 rows[k].row + rows[k].x);
        if (rows[k].want)
            expect_err(what, verify(&c, s, n, &o), TSR_EVERIFY, "insn #3 (store out)", rows[k].want,
                       "insn #2 (gemm) in the compute stage writes", (char *)NULL);
        else
            expect_ok(what, verify(&c, s, n, &o));
    }
    /* Ordered by pushing from the GEMM instead: no race anywhere. */
    s[1].push_next = 0;
    s[2].push_next = 1;
    s[3].sram_base = 0;
    s[3].x_size = s[3].x_stride = 16;
    expect_ok("store after the gemm's token", verify(&c, s, n, &o));
    /* An ALU writes out too. */
    s[1].push_next = 1;
    s[2].push_next = 0;
    s[2].opcode = TSR_OP_ALU;
    s[2].use_imm = 1;
    expect_err("alu vs store", verify(&c, s, n, &o), TSR_EVERIFY, "race on out rows [0, 1)",
               "#2 (alu min)", (char *)NULL);
}

/* DRAM: a STORE and a LOAD of the same bytes in different stages need a token chain too. */
static void test_dram_races(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[8];
    tiny_cfg(&c, 9, 16, 4);
    tsr_verify_opts_t o = full_opts();
    base_stream(s);
    s[3].push_next = 1;
    s[5] = fl(mem(TSR_OP_LOAD, TSR_MEM_INP, 1, OUT_E, 1, 1, 1), 0, 0, 0, 1);
    s[6] = fl(fin(), 1, 1, 0, 0);
    check_schedules("load of stored bytes", &c, s, 7, TSR_OK);
    expect_err("load of stored bytes", verify(&c, s, 7, &o), TSR_EVERIFY, "insn #4 (store out)",
               "race on DRAM bytes [0x4000, 0x4004)", "insn #5 (load inp) in the load stage reads",
               (char *)NULL);
    /* Bytes next to the stored ones: no conflict. */
    s[5].dram_base = OUT_E + 1;
    expect_ok("load beside stored bytes", verify(&c, s, 7, &o));
    /* Ordered: compute waits for the STORE's token, then hands one to the load stage. */
    s[5] = fl(cnop(), 0, 1, 1, 0);
    s[6] = fl(mem(TSR_OP_LOAD, TSR_MEM_INP, 1, OUT_E, 1, 1, 1), 0, 1, 0, 1);
    s[7] = fl(fin(), 1, 0, 0, 0);
    check_schedules("load after the store's token", &c, s, 8, TSR_OK);
    expect_ok("load after the store's token", verify(&c, s, 8, &o));
    /* A LOAD acc (compute stage) of stored bytes, unordered: the STORE's token comes after. */
    s[5] = fl(mem(TSR_OP_LOAD, TSR_MEM_ACC, 1, OUT_E / 4, 1, 1, 1), 0, 0, 0, 0);
    s[6] = fl(fin(), 0, 1, 0, 0);
    check_schedules("acc load of stored bytes", &c, s, 7, TSR_OK);
    expect_err("acc load of stored bytes", verify(&c, s, 7, &o), TSR_EVERIFY, "race on DRAM bytes",
               "insn #5 (load acc)", (char *)NULL);
    /* Stores to elements 0 and 7 that an earlier, ordered LOAD reads (their bytes bound the race pass's
       segments), a store to element 2 no LOAD reads, and an unordered LOAD of element 4, between: bytes
       no store writes, in the same segment [0x4004, 0x401c) as element 2's. No race (there was one,
       reported on that segment: the SGD update's per-channel stream met it); a LOAD of element 2 races. */
    tsr_insn_t t[9];
    base_stream(t);
    t[1] = mem(TSR_OP_LOAD, TSR_MEM_INP, 0, OUT_E, 2, 1, 7);
    t[4] = fl(mem(TSR_OP_STORE, TSR_MEM_OUT, 0, OUT_E, 1, 1, 1), 1, 0, 0, 0);
    t[5] = mem(TSR_OP_STORE, TSR_MEM_OUT, 0, OUT_E + 7, 1, 1, 1);
    t[6] = fl(mem(TSR_OP_STORE, TSR_MEM_OUT, 0, OUT_E + 2, 1, 1, 1), 0, 0, 1, 0);
    t[7] = fl(mem(TSR_OP_LOAD, TSR_MEM_INP, 2, OUT_E + 4, 1, 1, 1), 0, 0, 0, 1);
    t[8] = fl(fin(), 1, 1, 0, 0);
    expect_ok("a load beside a store no load reads, in one segment", verify(&c, t, 9, &o));
    t[7].dram_base = OUT_E + 2;
    expect_err("a load of that store's bytes", verify(&c, t, 9, &o), TSR_EVERIFY, "insn #6 (store out)",
               "race on DRAM bytes [0x4008, 0x400c)", "insn #7 (load inp)", (char *)NULL);
}

/* ---- self-modifying streams ---- */

static void test_self_modify(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_insn_t s[BASE_N + 2];
    tiny_cfg(&c, 9, 16, 4);
    tsr_region_t r[] = {{UOP_ADDR, 16 * 4, "uops"}, {INP_ADDR, 16 * 4, "inp"},
                        {WGT_ADDR, 16 * 16, "wgt"}, {OUT_ADDR, 16 * 4, "out"}};
    tsr_verify_opts_t o = {r, 4, 1, dram_read, NULL};
    /* The STORE writes one out element (4 bytes) over uop element 3 of the kernel #0 loads
     * (uops 0..3); after the uop LOAD, so the index checks have already passed. */
    base_stream(s);
    s[0].x_size = s[0].x_stride = 4;
    for (uint32_t e = 0; e < 4; e++)
        put_uop(e, 0, 0, 0);
    s[4].dram_base = UOP_E + 3;
    expect_err("store over the loaded kernel", verify(&c, s, BASE_N, &o), TSR_EVERIFY,
               "insn #4 (store out)", "[0x100c, 0x1010)", "insn #0 (load uop)", "micro-ops", (char *)NULL);
    /* One element past the kernel: fine. */
    s[4].dram_base = UOP_E + 4;
    expect_ok("store just past the kernel", verify(&c, s, BASE_N, &o));
    /* Before the kernel's load in the stream: rejected all the same (a later LOAD would bring
     * back unchecked indices). A second kernel load at element 8 is added. */
    s[4].dram_base = UOP_E + 9;
    s[5] = fl(mem(TSR_OP_LOAD, TSR_MEM_UOP, 4, UOP_E + 8, 2, 1, 2), 0, 1, 0, 0);
    s[6] = fin();
    put_uop(8, 0, 0, 0);
    put_uop(10, 0, 0, 0);
    expect_ok("store into the stride gap", verify(&c, s, BASE_N + 1, &o));
    s[4].dram_base = UOP_E + 10;
    expect_err("store before the uop load that reads it", verify(&c, s, BASE_N + 1, &o), TSR_EVERIFY,
               "insn #4 (store out)", "insn #5 (load uop)", (char *)NULL);
}

/* ---- the hostile-stream reproducers (issue 16), as programs ---- */

/* race_raw.s: the GEMM #4 reads inp rows the load-stage LOAD #3 writes, no token between. */
static const char race_raw_s[] =
    ".buffer inp 4096 random 1\n"
    ".buffer wid 256 file wid.bin\n"
    ".buffer out 1024\n"
    ".output out\n"
    ".uops k 0,0,0\n"
    "load uop sram=0 dram=k y=1 x=1 stride=1\n"
    "load wgt sram=0 dram=wid y=1 x=1 stride=1 push_next\n"
    "gemm reset uop=0:1 iter=1,64 dst=0,1 src=0,0 wgt=0,0 pop_prev\n"
    "load inp sram=0 dram=inp y=1 x=64 stride=64%s\n"
    "gemm uop=0:1 iter=1,64 dst=0,1 src=0,1 wgt=0,0 push_next%s\n"
    "store out sram=0 dram=out y=1 x=64 stride=64 pop_prev push_prev\n"
    "load inp sram=100 dram=inp y=1 x=1 stride=1 push_next\n"
    "finish pop_prev pop_next\n";

/* bypass_uop_oob.s: STORE #3 rewrites the kernel that LOAD #4 brings back. */
static const char bypass_uop_oob_s[] =
    ".buffer out 1024\n"
    ".output out\n"
    ".uops k 0,0,0 0,0,0 0,0,0 0,0,0\n"
    "load uop sram=0 dram=k y=1 x=4 stride=4\n"
    "gemm reset uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
    "alu add uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=5 push_next\n"
    "store out sram=0 dram=k y=1 x=1 stride=1 pop_prev push_prev\n"
    "load uop sram=0 dram=k y=1 x=4 stride=4 pop_next\n"
    "alu add uop=0:1 iter=1,1000 dst=0,1 src=0,1 imm=1 push_next\n"
    "store out sram=0 dram=out y=1 x=1 stride=1 pop_prev push_prev\n"
    "finish pop_next\n";

/* verify_vs_run.s: the kernel is `random`, so only its actual contents can be checked. */
static const char verify_vs_run_s[] =
    ".buffer k 16 random 7\n"
    ".buffer out 1024\n"
    "load uop sram=0 dram=k y=1 x=4 stride=4\n"
    "alu add uop=0:4 iter=1,2 dst=0,600 src=0,0 imm=1\n"
    "finish\n";

/* wid.bin: a 16x16 identity weight block (row o has a 1 at column o). */
static void wid_bin(uint8_t w[256])
{
    memset(w, 0, 256);
    for (int o = 0; o < 16; o++)
        w[o * 16 + o] = 1;
}

/* An assembled program with its buffers filled as `tessera run` fills them (written here
 * independently of the CLI); `file` buffers get wid.bin. */
typedef struct {
    tsr_config_t cfg;
    tsr_program_t p;
    uint8_t *bytes[8];
    tsr_region_t regs[8];
} prog_t;

static void prog_open(prog_t *g, const char *text)
{
    memset(g, 0, sizeof *g);
    assert_int_equal(tsr_config_load("default", &g->cfg), TSR_OK);
    if (tsr_asm_parse(&g->cfg, text, "t.s", &g->p))
        fail_msg("assembling: %s", tsr_errmsg());
    assert_true(g->p.nbufs <= 8);
    for (size_t k = 0; k < g->p.nbufs; k++) {
        const tsr_asm_buffer_t *b = &g->p.bufs[k];
        assert_non_null(g->bytes[k] = calloc(1, (size_t)b->size));
        if (b->init == TSR_INIT_RANDOM)
            tsr_asm_random_fill(b->seed, g->bytes[k], (size_t)b->size);
        else if (b->init == TSR_INIT_FILE)
            wid_bin(g->bytes[k]);
        else if (b->init == TSR_INIT_UOPS)
            for (size_t u = 0; u < b->nuops; u++)
                for (uint32_t j = 0; j < g->cfg.uop_bytes; j++)
                    g->bytes[k][u * g->cfg.uop_bytes + j] = (uint8_t)(b->uops[u] >> (8 * j));
        g->regs[k] = (tsr_region_t){b->addr, b->size, b->name};
    }
}

static void prog_close(prog_t *g)
{
    for (size_t k = 0; k < g->p.nbufs; k++)
        free(g->bytes[k]);
    tsr_program_free(&g->p);
}

static int prog_read(void *ctx, uint64_t addr, void *dst, size_t n)
{
    const prog_t *g = ctx;
    for (size_t k = 0; k < g->p.nbufs; k++) {
        const tsr_asm_buffer_t *b = &g->p.bufs[k];
        if (addr >= b->addr && addr + n <= b->addr + b->size) {
            memcpy(dst, g->bytes[k] + (addr - b->addr), n);
            return TSR_OK;
        }
    }
    return TSR_EFAULT;
}

static int prog_verify(prog_t *g)
{
    tsr_verify_opts_t o = {g->regs, g->p.nbufs, 1, prog_read, g};
    return verify(&g->cfg, g->p.insns, g->p.ninsns, &o);
}

/* Run on fsim with stage-interleaving seed `seed`, verification skipped; returns the
 * output buffer's first 64 rows (1024 bytes) in out. */
static void prog_run_fsim(prog_t *g, uint64_t seed, uint8_t out[1024])
{
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o;
    memset(&o, 0, sizeof o);
    o.seed = seed;
    o.skip_verify = 1;
    assert_int_equal(tsr_device_open("fsim", &g->cfg, &o, &dev), TSR_OK);
    size_t ob = 0;
    for (size_t k = 0; k < g->p.nbufs; k++) {
        const tsr_asm_buffer_t *b = &g->p.bufs[k];
        assert_int_equal(tsr_mem_alloc_at(dev, b->addr, b->size), TSR_OK);
        assert_int_equal(tsr_mem_write(dev, b->addr, g->bytes[k], b->size), TSR_OK);
        if (b->is_output)
            ob = k;
    }
    if (tsr_submit(dev, g->p.insns, g->p.ninsns) || tsr_wait(dev, 60000))
        fail_msg("fsim seed %llu: %s", (unsigned long long)seed, tsr_errmsg());
    assert_int_equal(tsr_mem_read(dev, g->p.bufs[ob].addr, out, 1024), TSR_OK);
    tsr_device_close(dev);
}

static void test_repro_race_raw(void **state)
{
    (void)state;
    char text[2048];
    prog_t g;
    snprintf(text, sizeof text, race_raw_s, "", "");
    prog_open(&g, text);
    expect_err("race_raw.s", prog_verify(&g), TSR_EVERIFY, "insn #4 (gemm)", "race on inp rows [0, 64)",
               "insn #3 (load inp) in the load stage writes", (char *)NULL);
    /* The verdict is not a false alarm: the outputs really depend on the schedule. */
    uint8_t first[1024], out[1024];
    int differs = 0;
    prog_run_fsim(&g, 0, first);
    for (uint64_t seed = 1; seed <= 16 && !differs; seed++) {
        prog_run_fsim(&g, seed, out);
        differs = memcmp(first, out, sizeof out) != 0;
    }
    if (!differs)
        fail_msg("race_raw.s gave the same output under 17 fsim schedules; the reproducer no "
                 "longer shows a race");
    prog_close(&g);

    /* With the token (#3 pushes, #4 pops) it verifies, and every schedule agrees. */
    snprintf(text, sizeof text, race_raw_s, " push_next", " pop_prev");
    prog_open(&g, text);
    expect_ok("race_raw.s with the token", prog_verify(&g));
    prog_run_fsim(&g, 0, first);
    for (uint64_t seed = 1; seed <= 16; seed++) {
        prog_run_fsim(&g, seed, out);
        if (memcmp(first, out, sizeof out))
            fail_msg("race_raw.s with the token: fsim seed %llu differs from seed 0", (unsigned long long)seed);
    }
    prog_close(&g);
}

static void test_repro_bypass(void **state)
{
    (void)state;
    prog_t g;
    prog_open(&g, bypass_uop_oob_s);
    expect_err("bypass_uop_oob.s", prog_verify(&g), TSR_EVERIFY, "insn #3 (store out)",
               "insn #0 (load uop)", "micro-ops", (char *)NULL);
    prog_close(&g);
}

/* ---- the CLI's verify path: same buffer contents as run ---- */

static char cli_err[4096];

static void write_text(const char *dir, const char *name, const void *data, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* `tessera ARGS` run in directory cwd; returns the exit status, stderr in cli_err. */
static int cli(const char *cwd, const char *args)
{
    char cmd[2048], path[600];
    snprintf(path, sizeof path, "%s/.stderr", cwd);
    snprintf(cmd, sizeof cmd, "cd %s && %s %s >/dev/null 2>%s", cwd, TSR_CLI, args, path);
    int st = system(cmd);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(cli_err, 1, sizeof cli_err - 1, f) : 0;
    cli_err[n] = 0;
    if (f)
        fclose(f);
    if (st == -1 || !WIFEXITED(st))
        fail_msg("%s: did not exit normally", cmd);
    return WEXITSTATUS(st);
}

static void expect_cli_err(const char *cwd, const char *args, const char *needle)
{
    int st = cli(cwd, args);
    if (st != 1 || !strstr(cli_err, needle))
        fail_msg("tessera %s: exit %d, stderr \"%s\"; want exit 1 and \"%s\"", args, st, cli_err, needle);
}

static void test_cli_verify(void **state)
{
    (void)state;
    char dir[] = "/tmp/tsr_test_verify_XXXXXX";
    assert_non_null(mkdtemp(dir));
    uint8_t wid[256];
    wid_bin(wid);
    char text[2048];
    snprintf(text, sizeof text, race_raw_s, "", "");
    write_text(dir, "race_raw.s", text, strlen(text));
    write_text(dir, "wid.bin", wid, sizeof wid);
    write_text(dir, "bypass_uop_oob.s", bypass_uop_oob_s, strlen(bypass_uop_oob_s));
    write_text(dir, "verify_vs_run.s", verify_vs_run_s, strlen(verify_vs_run_s));
    const char *idx = "insn #1 (alu): dst (acc) index reaches 2095 at uop 0";
    expect_cli_err(dir, "verify verify_vs_run.s", idx);
    expect_cli_err(dir, "run verify_vs_run.s", idx);
    /* `file wid.bin` is found next to the program from any directory. */
    char args[700];
    snprintf(args, sizeof args, "verify %s/race_raw.s", dir);
    expect_cli_err("/", args, "insn #4 (gemm): race on inp rows [0, 64)");
    expect_cli_err(dir, "run race_raw.s", "insn #4 (gemm): race on inp rows [0, 64)");
    expect_cli_err(dir, "verify bypass_uop_oob.s", "insn #3 (store out): writes DRAM bytes");
    expect_cli_err(dir, "run bypass_uop_oob.s", "insn #3 (store out): writes DRAM bytes");
    /* A kernel that cannot be filled is an error, as in run, not an unchecked OK. */
    static const char nofile[] = ".buffer k 16 file nothere.bin\n.buffer out 1024\n"
                                 "load uop sram=0 dram=k y=1 x=4 stride=4\n"
                                 "alu add uop=0:4 iter=1,2 dst=0,600 src=0,0 imm=1\nfinish\n";
    write_text(dir, "nofile.s", nofile, strlen(nofile));
    expect_cli_err(dir, "verify nofile.s", "nothere.bin");
    /* A fixed stream passes both. */
    snprintf(text, sizeof text, race_raw_s, " push_next", " pop_prev");
    write_text(dir, "race_fixed.s", text, strlen(text));
    if (cli(dir, "verify race_fixed.s") || cli(dir, "run race_fixed.s"))
        fail_msg("race_fixed.s rejected: %s", cli_err);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* The fuzzer's reproducer: a GEMM reading uop row 0 that nothing in the stream loads. fsim
 * read zeros and stopped at dst 2048 while `verify` said OK (the row's contents were unknown
 * to it). Now verify and run reject it on the unloaded row; with the row loaded, the same
 * loop is judged on its contents: out of range in both, and in range (1024 iterations)
 * accepted by both. */
static const char unloaded_uop_s[] =
    ".buffer inp 4096\n"
    "gemm reset=1 uop=0:1 iter=1100,1 dst=2,0 src=0,0 wgt=0,0\n"
    "finish\n";

static const char loaded_uop_s[] =
    ".buffer inp 4096\n"
    ".uops k 0,0,0\n"
    "load uop sram=0 dram=k y=1 x=1 stride=1\n"
    "gemm reset=1 uop=0:1 iter=%u,1 dst=2,0 src=0,0 wgt=0,0\n"
    "finish\n";

static void test_repro_unloaded_uop(void **state)
{
    (void)state;
    prog_t g;
    prog_open(&g, unloaded_uop_s);
    expect_err("unloaded_uop.s", prog_verify(&g), TSR_EVERIFY, "insn #0 (gemm)",
               "uop range [0, 1) reads uop row 0,", "no earlier uop LOAD", (char *)NULL);
    prog_close(&g);
    char text[512];
    snprintf(text, sizeof text, loaded_uop_s, 1100u);
    prog_open(&g, text);
    expect_err("loaded_uop.s, 1100 iterations", prog_verify(&g), TSR_EVERIFY, "insn #1 (gemm)",
               "dst (acc) index reaches 2198", (char *)NULL);
    prog_close(&g);
    snprintf(text, sizeof text, loaded_uop_s, 1024u);
    prog_open(&g, text);
    expect_ok("loaded_uop.s, 1024 iterations", prog_verify(&g));
    prog_close(&g);

    char dir[] = "/tmp/tsr_test_verify_XXXXXX";
    assert_non_null(mkdtemp(dir));
    write_text(dir, "unloaded.s", unloaded_uop_s, strlen(unloaded_uop_s));
    const char *msg = "insn #0 (gemm): uop range [0, 1) reads uop row 0,";
    expect_cli_err(dir, "verify unloaded.s", msg);
    expect_cli_err(dir, "run unloaded.s", msg);
    snprintf(text, sizeof text, loaded_uop_s, 1100u);
    write_text(dir, "loaded_oob.s", text, strlen(text));
    expect_cli_err(dir, "verify loaded_oob.s", "insn #1 (gemm): dst (acc) index reaches 2198");
    expect_cli_err(dir, "run loaded_oob.s", "insn #1 (gemm): dst (acc) index reaches 2198");
    snprintf(text, sizeof text, loaded_uop_s, 1024u);
    write_text(dir, "loaded.s", text, strlen(text));
    if (cli(dir, "verify loaded.s") || cli(dir, "run loaded.s"))
        fail_msg("loaded.s rejected: %s", cli_err);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- mutations of generated streams ---- */

/* Every token pair of a generated program (the k-th push and the k-th pop of one queue:
 * queues are FIFO) is removed in turn. The generator hands row ownership over only with
 * tokens, so some removals must leave a race; a removal the verifier accepts must still be
 * schedule independent, which fsim under random interleavings is checked against the
 * in-order reference machine for. */
static void test_generated_mutations(void **state)
{
    (void)state;
    static const char *const cfgs[] = {"tiny", "default"};
    uint64_t races = 0, accepted = 0, other = 0;
    for (size_t ci = 0; ci < 2; ci++) {
        tsr_config_t cfg;
        assert_int_equal(tsr_config_load(cfgs[ci], &cfg), TSR_OK);
        for (uint64_t i = 0; i < 6; i++) {
            uint64_t seed = tsr_gen_mix(0x16u * 1000 + ci * 100 + i);
            tsr_gen_prog_t p;
            if (tsr_gen_program(seed, &cfg, NULL, &p))
                fail_msg("generator (seed %llu, %s): %s", (unsigned long long)seed, cfgs[ci], tsr_errmsg());
            tsr_insn_t *m = malloc(p.ninsns * sizeof *m);
            assert_non_null(m);
            uint64_t prog_races = 0;
            for (int q = 0; q < 4; q++)
                for (size_t k = 0;; k++) {
                    /* The k-th push and pop on queue q. */
                    size_t push = p.ninsns, pop = p.ninsns, np = 0, nq = 0;
                    int push_prev = 0, pop_prev = 0;
                    for (size_t j = 0; j < p.ninsns; j++) {
                        const tsr_insn_t *in = &p.insns[j];
                        for (int prev = 0; prev < 2; prev++) {
                            if ((prev ? in->push_prev : in->push_next) && flag_queue(in, 0, prev) == q &&
                                np++ == k) {
                                push = j;
                                push_prev = prev;
                            }
                            if ((prev ? in->pop_prev : in->pop_next) && flag_queue(in, 1, prev) == q &&
                                nq++ == k) {
                                pop = j;
                                pop_prev = prev;
                            }
                        }
                    }
                    if (push == p.ninsns || pop == p.ninsns)
                        break;
                    memcpy(m, p.insns, p.ninsns * sizeof *m);
                    *(push_prev ? &m[push].push_prev : &m[push].push_next) = 0;
                    *(pop_prev ? &m[pop].pop_prev : &m[pop].pop_next) = 0;
                    tsr_err_clear();
                    int rc = tsr_gen_verify(&p, m, p.ninsns);
                    if (rc == TSR_EVERIFY && strstr(tsr_errmsg(), "race on")) {
                        prog_races++;
                        continue;
                    }
                    if (rc) {
                        other++;
                        continue;
                    }
                    accepted++;
                    uint8_t *ref[TSR_GEN_MAX_BUFS], *got[TSR_GEN_MAX_BUFS];
                    tsr_gen_exec_t er = {"ref", 0, NULL, NULL};
                    if (tsr_gen_run(&er, &p, m, p.ninsns, ref))
                        fail_msg("ref run of an accepted mutation: %s", tsr_errmsg());
                    for (uint64_t s = 1; s <= 3; s++) {
                        tsr_gen_exec_t ef = {"fsim", tsr_gen_mix(seed + s) | 1, NULL, NULL};
                        if (tsr_gen_run(&ef, &p, m, p.ninsns, got))
                            fail_msg("fsim run of an accepted mutation: %s", tsr_errmsg());
                        tsr_gen_diff_t d;
                        if (tsr_gen_compare(&p, ref, got, &d))
                            fail_msg("program seed %llu (%s) without token pair #%zu on %s (push #%zu, "
                                     "pop #%zu) verifies, yet fsim schedule %llu differs from the "
                                     "in-order result (buffer %s byte %llu): a missed race",
                                     (unsigned long long)seed, cfgs[ci], k, tsr_queue_name(q), push, pop,
                                     (unsigned long long)s, p.bufs[d.buf].name, (unsigned long long)d.offset);
                        tsr_gen_outputs_free(got);
                    }
                    tsr_gen_outputs_free(ref);
                }
            races += prog_races;
            free(m);
            tsr_gen_free(&p);
        }
    }
    printf("token-pair removals: %llu races, %llu accepted (schedule independent on fsim), %llu other "
           "errors\n", (unsigned long long)races, (unsigned long long)accepted, (unsigned long long)other);
    if (!races)
        fail_msg("no token-pair removal in 12 generated programs was rejected as a race");
}

/* ---- a long kernel loaded many times: verification stays linear ---- */

typedef struct {
    const uint8_t *bytes; /* device bytes from address 0 */
    uint64_t size;        /* bytes */
} blob_t;

static int blob_read(void *ctx, uint64_t addr, void *dst, size_t n)
{
    const blob_t *b = ctx;
    if (addr > b->size || n > b->size - addr)
        return TSR_EFAULT;
    memcpy(dst, b->bytes + addr, n);
    return TSR_OK;
}

/* 700 loads of a uop_depth-long kernel, each followed by a reset GEMM over all of it (the
 * pattern that once took minutes to verify: every uop load re-read the kernel per entry).
 * The last load brings a copy with one bad uop, which must be named. */
static void test_long_kernel(void **state)
{
    (void)state;
    tsr_config_t c;
    assert_int_equal(tsr_config_load("default", &c), TSR_OK);
    const uint32_t nu = c.uop_depth, reps = 700;
    uint64_t kb = (uint64_t)nu * c.uop_bytes;
    uint8_t *img = calloc(2, kb);
    assert_non_null(img);
    for (uint32_t u = 0; u < 2 * nu; u++) {
        tsr_uop_t uo = {(u % nu) % (c.acc_depth - 1), 0, 0};
        if (u == nu + 5000 % nu)
            uo.dst = c.acc_depth - 1; /* + 1 from the inner loop: one past the end */
        uint64_t w;
        assert_int_equal(tsr_uop_encode(&c, &uo, &w), TSR_OK);
        for (uint32_t b = 0; b < c.uop_bytes; b++)
            img[(uint64_t)u * c.uop_bytes + b] = (uint8_t)(w >> (8 * b));
    }
    tsr_insn_t *s = calloc(2 * reps + 1, sizeof *s);
    assert_non_null(s);
    size_t n = 0;
    for (uint32_t r = 0; r < reps; r++) {
        s[n++] = mem(TSR_OP_LOAD, TSR_MEM_UOP, 0, 0, 1, nu, nu);
        tsr_insn_t g = loop(TSR_OP_GEMM, 0, nu, 1, 2);
        g.reset = 1;
        g.dst_factor_in = 1;
        s[n++] = g;
    }
    s[n++] = fin();
    tsr_region_t reg = {0, 2 * kb, "kernels"};
    blob_t blob = {img, 2 * kb};
    tsr_verify_opts_t o = {&reg, 1, 1, blob_read, &blob};
    expect_ok("700 loads of the good kernel", verify(&c, s, n, &o));
    s[2 * (reps - 1)].dram_base = nu;
    char want[64];
    snprintf(want, sizeof want, "insn #%u (gemm)", 2 * (reps - 1) + 1);
    expect_err("the bad copy last", verify(&c, s, n, &o), TSR_EVERIFY, want, "at uop 5000", (char *)NULL);
    free(s);
    free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_streams),
        cmocka_unit_test(test_illegal_flags),
        cmocka_unit_test(test_deadlocks),
        cmocka_unit_test(test_token_queue_overflow),
        cmocka_unit_test(test_command_queue_block),
        cmocka_unit_test(test_token_imbalance),
        cmocka_unit_test(test_finish_rules),
        cmocka_unit_test(test_sram_and_types),
        cmocka_unit_test(test_uop_ranges),
        cmocka_unit_test(test_uop_indices),
        cmocka_unit_test(test_unloaded_uops),
        cmocka_unit_test(test_lut_rules),
        cmocka_unit_test(test_dram_regions),
        cmocka_unit_test(test_pipe_runs),
        cmocka_unit_test(test_races),
        cmocka_unit_test(test_dram_races),
        cmocka_unit_test(test_self_modify),
        cmocka_unit_test(test_repro_race_raw),
        cmocka_unit_test(test_repro_bypass),
        cmocka_unit_test(test_cli_verify),
        cmocka_unit_test(test_repro_unloaded_uop),
        cmocka_unit_test(test_generated_mutations),
        cmocka_unit_test(test_long_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
