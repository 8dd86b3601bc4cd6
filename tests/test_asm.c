/*
 * test_asm: the assembler and disassembler (isa/tsr_asm.c).
 *
 * Expectations are written by hand here (field values of known lines,
 * buffer addresses, uop words, splitmix64 vectors) or checked through
 * properties that do not trust the code under test alone (asm(disasm(x))
 * must reproduce the encoder's bits for random instructions). Randomized
 * tests print their seed on failure; set TSR_SEED to replay one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tsr_asm.h"
#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_verify.h"

static const char *const presets[] = {"default", "tiny", "large"};
#define NPRESETS (sizeof presets / sizeof presets[0])

/* ------------------------------------------------------------ utilities */

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: independent of the splitmix64 under test */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static uint64_t test_seed(void)
{
    const char *e = getenv("TSR_SEED");
    if (e && *e)
        return strtoull(e, NULL, 0);
    return (uint64_t)time(NULL) * 2654435761u + (uint64_t)clock();
}

static void load_cfg(const char *name, tsr_config_t *cfg)
{
    int rc = tsr_config_load(name, cfg);
    if (rc)
        fail_msg("config %s: %s", name, tsr_errmsg());
}

/* Every member of tsr_insn_t, listed here independently of the field table. */
static const struct {
    const char *name;
    size_t off;
} members[] = {
#define M(x) {#x, offsetof(tsr_insn_t, x)}
    M(opcode),         M(pop_prev),       M(pop_next),       M(push_prev),     M(push_next),
    M(mem_type),       M(sram_base),      M(dram_base),      M(y_size),        M(x_size),
    M(x_stride),       M(y_pad0),         M(y_pad1),         M(x_pad0),        M(x_pad1),
    M(reset),          M(uop_bgn),        M(uop_end),        M(iter_out),      M(iter_in),
    M(dst_factor_out), M(dst_factor_in),  M(src_factor_out), M(src_factor_in), M(wgt_factor_out),
    M(wgt_factor_in),  M(alu_opcode),     M(use_imm),        M(imm),
#undef M
};

static uint32_t get_member(const tsr_insn_t *in, size_t off)
{
    uint32_t v;
    memcpy(&v, (const char *)in + off, sizeof v);
    return v;
}

static void set_member(tsr_insn_t *in, size_t off, uint32_t v)
{
    memcpy((char *)in + off, &v, sizeof v);
}

/* Name of the first member that differs, or NULL. */
static const char *first_diff(const tsr_insn_t *a, const tsr_insn_t *b, uint32_t *va, uint32_t *vb)
{
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
        *va = get_member(a, members[i].off);
        *vb = get_member(b, members[i].off);
        if (*va != *vb)
            return members[i].name;
    }
    return NULL;
}

/* Parse text that must succeed. */
static void parse_ok(const tsr_config_t *cfg, const char *text, tsr_program_t *p)
{
    int rc = tsr_asm_parse(cfg, text, "t.s", p);
    if (rc)
        fail_msg("parse failed (%s): %s\n--- text ---\n%s", tsr_errname(rc), tsr_errmsg(), text);
}

static int is_zeroed(const tsr_program_t *p)
{
    static const tsr_program_t z;
    return !memcmp(p, &z, sizeof z);
}

/* --------------------------------------------------------- round trips */

enum { FILL_RANDOM, FILL_MIN, FILL_MAX };

/* An instruction of opcode op with every field of its format in range. */
static void make_insn(const tsr_config_t *cfg, uint32_t op, int fill, uint64_t *rng, tsr_insn_t *in)
{
    tsr_format_t fmt;
    assert_int_equal(tsr_isa_format(cfg, op, &fmt), TSR_OK);
    memset(in, 0, sizeof *in);
    for (int i = 0; i < fmt.nfields; i++) {
        const tsr_field_t *f = &fmt.fields[i];
        uint64_t mask = f->width >= 32 ? 0xffffffffull : (1ull << f->width) - 1;
        uint64_t v = fill == FILL_MIN ? 0 : fill == FILL_MAX ? mask : rng_next(rng) & mask;
        if (f->offset == offsetof(tsr_insn_t, opcode))
            v = op;
        else if (f->offset == offsetof(tsr_insn_t, mem_type))
            v = fill == FILL_MAX ? TSR_MEM_COUNT - 1 : v % TSR_MEM_COUNT;
        else if (f->offset == offsetof(tsr_insn_t, alu_opcode)) /* the field is wider than the op list */
            v = fill == FILL_MAX ? TSR_ALU_COUNT - 1 : v % TSR_ALU_COUNT;
        if (f->is_signed && f->width < 32 && (v >> (f->width - 1)) & 1)
            v |= ~mask; /* sign-extend */
        set_member(in, f->offset, (uint32_t)v);
    }
}

static void check_roundtrip(const tsr_config_t *cfg, const char *preset, const tsr_insn_t *in,
                            uint64_t seed, int iter)
{
    tsr_insn_bits_t b1, b2;
    char text[256], text2[256];
    tsr_program_t p;
    uint32_t va, vb;
    const char *d;

    if (tsr_insn_encode(cfg, in, &b1))
        fail_msg("[%s seed=%llu iter=%d] test generated an unencodable insn: %s", preset,
                 (unsigned long long)seed, iter, tsr_errmsg());
    int n = tsr_disasm_insn(cfg, in, text, sizeof text);
    if (n <= 0 || (size_t)n != strlen(text))
        fail_msg("[%s seed=%llu iter=%d] disasm returned %d: %s", preset,
                 (unsigned long long)seed, iter, n, tsr_errmsg());
    if (tsr_asm_parse(cfg, text, "rt", &p))
        fail_msg("[%s seed=%llu iter=%d] canonical text rejected: %s\n  text: %s", preset,
                 (unsigned long long)seed, iter, tsr_errmsg(), text);
    if (p.ninsns != 1)
        fail_msg("[%s seed=%llu iter=%d] %zu insns from: %s", preset, (unsigned long long)seed,
                 iter, p.ninsns, text);
    if ((d = first_diff(in, &p.insns[0], &va, &vb)))
        fail_msg("[%s seed=%llu iter=%d] field %s: %u before, %u after asm\n  text: %s", preset,
                 (unsigned long long)seed, iter, d, va, vb, text);
    if (tsr_insn_encode(cfg, &p.insns[0], &b2))
        fail_msg("[%s seed=%llu iter=%d] re-encode: %s", preset, (unsigned long long)seed, iter,
                 tsr_errmsg());
    if (b1.w[0] != b2.w[0] || b1.w[1] != b2.w[1])
        fail_msg("[%s seed=%llu iter=%d] bits %016llx%016llx != %016llx%016llx\n  text: %s",
                 preset, (unsigned long long)seed, iter, (unsigned long long)b1.w[1],
                 (unsigned long long)b1.w[0], (unsigned long long)b2.w[1],
                 (unsigned long long)b2.w[0], text);
    assert_true(tsr_disasm_insn(cfg, &p.insns[0], text2, sizeof text2) > 0);
    if (strcmp(text, text2))
        fail_msg("[%s seed=%llu iter=%d] text changed:\n  %s\n  %s", preset,
                 (unsigned long long)seed, iter, text, text2);
    tsr_program_free(&p);
}

static void roundtrip_opcode(uint32_t op)
{
    uint64_t seed = test_seed(), rng = seed | 1;
    for (size_t c = 0; c < NPRESETS; c++) {
        tsr_config_t cfg;
        tsr_insn_t in;
        load_cfg(presets[c], &cfg);
        make_insn(&cfg, op, FILL_MIN, &rng, &in);
        check_roundtrip(&cfg, presets[c], &in, seed, -1);
        make_insn(&cfg, op, FILL_MAX, &rng, &in);
        check_roundtrip(&cfg, presets[c], &in, seed, -2);
        for (int i = 0; i < 3000; i++) {
            make_insn(&cfg, op, FILL_RANDOM, &rng, &in);
            check_roundtrip(&cfg, presets[c], &in, seed, i);
        }
    }
}

static void test_roundtrip_load(void **state) { (void)state; roundtrip_opcode(TSR_OP_LOAD); }
static void test_roundtrip_store(void **state) { (void)state; roundtrip_opcode(TSR_OP_STORE); }
static void test_roundtrip_gemm(void **state) { (void)state; roundtrip_opcode(TSR_OP_GEMM); }
static void test_roundtrip_alu(void **state) { (void)state; roundtrip_opcode(TSR_OP_ALU); }
static void test_roundtrip_finish(void **state) { (void)state; roundtrip_opcode(TSR_OP_FINISH); }

/* The max-value text spelled out for the default preset, so that a wrong
 * width in both the encoder and the disassembler would still be caught. */
static void test_roundtrip_max_text_default(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_insn_t in;
    char text[256];
    uint64_t rng = 1;
    load_cfg("default", &cfg);
    /* default: uop 8192 rows (13 bits; uop_end 14), inp/acc 2048 (11), wgt 1024 (10) */
    make_insn(&cfg, TSR_OP_GEMM, FILL_MAX, &rng, &in);
    assert_true(tsr_disasm_insn(&cfg, &in, text, sizeof text) > 0);
    assert_string_equal(text, "gemm reset=1 uop=8191:16383 iter=16383,16383 dst=2047,2047 "
                              "src=2047,2047 wgt=1023,1023 depthwise pop_prev pop_next push_prev push_next");
    make_insn(&cfg, TSR_OP_ALU, FILL_MAX, &rng, &in);
    assert_true(tsr_disasm_insn(&cfg, &in, text, sizeof text) > 0);
    assert_string_equal(text, "alu lut reset=1 uop=8191:16383 iter=16383,16383 dst=2047,2047 "
                              "src=2047,2047 use_imm=1 imm=-1 pop_prev pop_next push_prev "
                              "push_next");
    make_insn(&cfg, TSR_OP_LOAD, FILL_MAX, &rng, &in);
    assert_true(tsr_disasm_insn(&cfg, &in, text, sizeof text) > 0);
    assert_string_equal(text, "load lut sram=8191 dram=4294967295 y=65535 x=65535 stride=65535 "
                              "pad=15,15,15,15 pad_value=-1 pop_prev pop_next push_prev push_next");
}

/* --------------------------------------------------- canonical text */

static void test_canonical_text(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "load inp sram=0 dram=256 y=1 x=16 stride=16 pad=0,0,0,0 pop_next push_next",
        "gemm reset=0 uop=0:4 iter=2,3 dst=1,0 src=2,0 wgt=0,1",
        "alu add reset=0 uop=0:1 iter=1,1 dst=0,0 src=0,0 use_imm=1 imm=-3",
        "alu max reset=0 uop=0:1 iter=1,1 dst=0,0 src=0,0 use_imm=0 imm=0",
        "alu shr reset=1 uop=2:3 iter=4,5 dst=6,7 src=8,9 use_imm=0 imm=-32768",
        "store out sram=5 dram=7 y=2 x=3 stride=4 pad=0,0,0,0 pop_prev push_prev",
        "finish",
        "finish pop_prev pop_next push_prev push_next",
    };
    tsr_config_t cfg;
    load_cfg("default", &cfg);
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        tsr_program_t p;
        char text[256];
        parse_ok(&cfg, lines[i], &p);
        assert_int_equal(p.ninsns, 1);
        assert_true(tsr_disasm_insn(&cfg, &p.insns[0], text, sizeof text) > 0);
        if (strcmp(text, lines[i]))
            fail_msg("line %zu:\n  in:  %s\n  out: %s", i, lines[i], text);
        tsr_program_free(&p);
    }
}

/* Flags are printed in a fixed order whatever order they were written in. */
static void test_canonical_flag_order(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    char text[256];
    load_cfg("default", &cfg);
    parse_ok(&cfg, "finish push_next pop_next push_prev pop_prev", &p);
    assert_true(tsr_disasm_insn(&cfg, &p.insns[0], text, sizeof text) > 0);
    assert_string_equal(text, "finish pop_prev pop_next push_prev push_next");
    tsr_program_free(&p);
    parse_ok(&cfg, "alu min pop_next uop=1:2 iter=1,1 src=0,0 dst=0,0 imm=0x10", &p);
    assert_true(tsr_disasm_insn(&cfg, &p.insns[0], text, sizeof text) > 0);
    assert_string_equal(text, "alu min reset=0 uop=1:2 iter=1,1 dst=0,0 src=0,0 use_imm=1 imm=16 "
                              "pop_next");
    tsr_program_free(&p);
}

/* ------------------------------------------------------ known lines */

static void test_known_gemm(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    load_cfg("default", &cfg);
    parse_ok(&cfg, "gemm reset=0 uop=3:7 iter=2,5 dst=1,2 src=3,4 wgt=5,6", &p);
    assert_int_equal(p.ninsns, 1);
    const tsr_insn_t *in = &p.insns[0];
    assert_int_equal(in->opcode, TSR_OP_GEMM);
    assert_int_equal(in->reset, 0);
    assert_int_equal(in->uop_bgn, 3);
    assert_int_equal(in->uop_end, 7);
    assert_int_equal(in->iter_out, 2);
    assert_int_equal(in->iter_in, 5);
    assert_int_equal(in->dst_factor_out, 1);
    assert_int_equal(in->dst_factor_in, 2);
    assert_int_equal(in->src_factor_out, 3);
    assert_int_equal(in->src_factor_in, 4);
    assert_int_equal(in->wgt_factor_out, 5);
    assert_int_equal(in->wgt_factor_in, 6);
    assert_int_equal(in->pop_prev | in->pop_next | in->push_prev | in->push_next, 0);
    tsr_program_free(&p);

    /* bare reset, keys in another order, hex */
    parse_ok(&cfg, "gemm wgt=0x10,0 src=0,1 reset dst=2,3 iter=0x3,1 uop=0:0x2 pop_prev", &p);
    in = &p.insns[0];
    assert_int_equal(in->reset, 1);
    assert_int_equal(in->uop_bgn, 0);
    assert_int_equal(in->uop_end, 2);
    assert_int_equal(in->iter_out, 3);
    assert_int_equal(in->iter_in, 1);
    assert_int_equal(in->dst_factor_out, 2);
    assert_int_equal(in->dst_factor_in, 3);
    assert_int_equal(in->src_factor_out, 0);
    assert_int_equal(in->src_factor_in, 1);
    assert_int_equal(in->wgt_factor_out, 16);
    assert_int_equal(in->wgt_factor_in, 0);
    assert_int_equal(in->pop_prev, 1);
    assert_int_equal(in->pop_next, 0);
    tsr_program_free(&p);
}

static void test_known_load_store(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    load_cfg("default", &cfg);
    parse_ok(&cfg, "load wgt sram=0x10 dram=256 y=2 x=16 stride=32 pad=1,2,3,4 pop_next push_next\n"
                   "store out stride=9 x=8 y=7 dram=6 sram=5 push_prev\n"
                   "load acc8 sram=0 dram=0 y=0 x=0 stride=0\n",
             &p);
    assert_int_equal(p.ninsns, 3);
    const tsr_insn_t *in = &p.insns[0];
    assert_int_equal(in->opcode, TSR_OP_LOAD);
    assert_int_equal(in->mem_type, TSR_MEM_WGT);
    assert_int_equal(in->sram_base, 16);
    assert_int_equal(in->dram_base, 256);
    assert_int_equal(in->y_size, 2);
    assert_int_equal(in->x_size, 16);
    assert_int_equal(in->x_stride, 32);
    assert_int_equal(in->y_pad0, 1);
    assert_int_equal(in->y_pad1, 2);
    assert_int_equal(in->x_pad0, 3);
    assert_int_equal(in->x_pad1, 4);
    assert_int_equal(in->pop_prev, 0);
    assert_int_equal(in->pop_next, 1);
    assert_int_equal(in->push_prev, 0);
    assert_int_equal(in->push_next, 1);
    in = &p.insns[1];
    assert_int_equal(in->opcode, TSR_OP_STORE);
    assert_int_equal(in->mem_type, TSR_MEM_OUT);
    assert_int_equal(in->sram_base, 5);
    assert_int_equal(in->dram_base, 6);
    assert_int_equal(in->y_size, 7);
    assert_int_equal(in->x_size, 8);
    assert_int_equal(in->x_stride, 9);
    assert_int_equal(in->y_pad0 | in->y_pad1 | in->x_pad0 | in->x_pad1, 0);
    assert_int_equal(in->push_prev, 1);
    assert_int_equal(p.insns[2].mem_type, TSR_MEM_ACC8);
    assert_int_equal(p.lines[0], 1);
    assert_int_equal(p.lines[1], 2);
    assert_int_equal(p.lines[2], 3);
    tsr_program_free(&p);
}

static void test_known_alu(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    load_cfg("default", &cfg);
    parse_ok(&cfg,
             "alu add uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=-3\n"       /* imm given -> use_imm 1 */
             "alu max src=1,2 dst=3,4 iter=5,6 uop=1:2\n"              /* no imm -> use_imm 0 */
             "alu shr reset uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=0x7fff use_imm=0\n"
             "alu mov uop=0:1 iter=1,1 dst=0,0 src=0,0 use_imm=1\n"   /* imm defaults to 0 */
             "alu rshr reset=1 uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=-32768\n"
             "alu mulhr uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=-0x10\n",
             &p);
    assert_int_equal(p.ninsns, 6);
    const tsr_insn_t *in = p.insns;
    assert_int_equal(in[0].opcode, TSR_OP_ALU);
    assert_int_equal(in[0].alu_opcode, TSR_ALU_ADD);
    assert_int_equal(in[0].use_imm, 1);
    assert_int_equal(in[0].imm, -3);
    assert_int_equal(in[1].alu_opcode, TSR_ALU_MAX);
    assert_int_equal(in[1].use_imm, 0);
    assert_int_equal(in[1].src_factor_out, 1);
    assert_int_equal(in[1].src_factor_in, 2);
    assert_int_equal(in[1].dst_factor_out, 3);
    assert_int_equal(in[1].dst_factor_in, 4);
    assert_int_equal(in[1].iter_out, 5);
    assert_int_equal(in[1].iter_in, 6);
    assert_int_equal(in[1].uop_bgn, 1);
    assert_int_equal(in[1].uop_end, 2);
    assert_int_equal(in[2].alu_opcode, TSR_ALU_SHR);
    assert_int_equal(in[2].reset, 1);
    assert_int_equal(in[2].use_imm, 0);
    assert_int_equal(in[2].imm, 32767);
    assert_int_equal(in[3].alu_opcode, TSR_ALU_MOV);
    assert_int_equal(in[3].use_imm, 1);
    assert_int_equal(in[3].imm, 0);
    assert_int_equal(in[4].alu_opcode, TSR_ALU_RSHR);
    assert_int_equal(in[4].reset, 1);
    assert_int_equal(in[4].imm, -32768);
    assert_int_equal(in[5].alu_opcode, TSR_ALU_MULHR);
    assert_int_equal(in[5].imm, -16);
    tsr_program_free(&p);
}

/* Comments, blank lines, tabs, CRLF and a last line without newline. */
static void test_known_layout(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    load_cfg("default", &cfg);
    parse_ok(&cfg,
             "# header comment\r\n"
             "\r\n"
             "   \t \n"
             "\tfinish\tpop_next # trailing comment\r\n"
             "#finish\n"
             "finish push_prev",
             &p);
    assert_int_equal(p.ninsns, 2);
    assert_int_equal(p.nbufs, 0);
    assert_int_equal(p.insns[0].opcode, TSR_OP_FINISH);
    assert_int_equal(p.insns[0].pop_next, 1);
    assert_int_equal(p.insns[0].push_prev, 0);
    assert_int_equal(p.insns[1].push_prev, 1);
    assert_int_equal(p.lines[0], 4);
    assert_int_equal(p.lines[1], 6);
    tsr_program_free(&p);

    parse_ok(&cfg, "", &p);
    assert_int_equal(p.ninsns, 0);
    tsr_program_free(&p);
}

/* ------------------------------------------------- buffers, symbols */

static void test_buffer_placement(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    load_cfg("default", &cfg);
    parse_ok(&cfg,
             ".buffer a 100\n"                  /* 0x100000 */
             ".buffer b 4097 random 7\n"        /* 0x101000 .. 0x102001 */
             ".buffer c 16 @0x103000\n"         /* fixed */
             ".buffer d 8192 zero\n"            /* 0x103000 taken by c -> 0x104000 */
             ".uops u 1,2,3 4,5,6\n"            /* 0x106000, 8 bytes */
             ".buffer e 1 @0x0 file in.bin\n"   /* fixed, below the base */
             ".buffer f 0x1000\n"               /* 0x107000 */
             ".output f\n"
             ".output a\n",
             &p);
    assert_int_equal(p.nbufs, 7);
    static const struct {
        const char *name;
        uint64_t addr, size;
        int init, line;
    } want[] = {
        {"a", 0x100000, 100, TSR_INIT_ZERO, 1},  {"b", 0x101000, 4097, TSR_INIT_RANDOM, 2},
        {"c", 0x103000, 16, TSR_INIT_ZERO, 3},   {"d", 0x104000, 8192, TSR_INIT_ZERO, 4},
        {"u", 0x106000, 8, TSR_INIT_UOPS, 5},    {"e", 0x0, 1, TSR_INIT_FILE, 6},
        {"f", 0x107000, 4096, TSR_INIT_ZERO, 7},
    };
    for (size_t i = 0; i < 7; i++) {
        const tsr_asm_buffer_t *b = &p.bufs[i];
        assert_string_equal(b->name, want[i].name);
        if (b->addr != want[i].addr)
            fail_msg("buffer %s at 0x%llx, want 0x%llx", b->name, (unsigned long long)b->addr,
                     (unsigned long long)want[i].addr);
        assert_int_equal(b->size, want[i].size);
        assert_int_equal(b->init, want[i].init);
        assert_int_equal(b->line, want[i].line);
        assert_int_equal(b->is_output, !strcmp(b->name, "a") || !strcmp(b->name, "f"));
    }
    assert_int_equal(p.bufs[1].seed, 7);
    assert_string_equal(p.bufs[5].path, "in.bin");
    assert_null(p.bufs[0].path);
    /* default uop: dst 11 bits, src 11 bits, wgt 10 bits */
    assert_int_equal(p.bufs[4].nuops, 2);
    assert_int_equal(p.bufs[4].uops[0], 1ull | 2ull << 11 | 3ull << 22);
    assert_int_equal(p.bufs[4].uops[1], 4ull | 5ull << 11 | 6ull << 22);
    tsr_program_free(&p);
    assert_true(is_zeroed(&p));
}

/* A .uops buffer grows until the end of the file: buffers declared after it
 * are placed after its final size, and references before the growth use
 * the final address. */
static void test_uops_grow_then_place(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    load_cfg("tiny", &cfg); /* tiny: 4-byte uops */
    assert_int_equal(cfg.uop_bytes, 4);
    char *text = malloc(64 * 1024);
    assert_non_null(text);
    int k = sprintf(text, "load uop sram=0 dram=k y=1 x=1 stride=1\n"
                          "load inp sram=0 dram=z y=1 x=1 stride=1\n"
                          ".uops k 0,0,0\n"
                          ".buffer z 16\n"
                          ".uops k");
    for (int i = 0; i < 1100; i++) /* 1101 uops: 4404 bytes, more than one page */
        k += sprintf(text + k, " %d,%d,%d", i % 128, i % 128, i % 64);
    sprintf(text + k, "\n");
    parse_ok(&cfg, text, &p);
    free(text);
    assert_int_equal(p.nbufs, 2);
    assert_string_equal(p.bufs[0].name, "k");
    assert_int_equal(p.bufs[0].addr, 0x100000);
    assert_int_equal(p.bufs[0].nuops, 1101);
    assert_int_equal(p.bufs[0].size, 4404);
    assert_int_equal(p.bufs[1].addr, 0x102000);
    assert_int_equal(p.insns[0].dram_base, 0x100000 / 4);
    assert_int_equal(p.insns[1].dram_base, 0x102000 / 4); /* tiny inp row: 1x4 int8 */
    tsr_program_free(&p);
}

static void test_symbolic_addresses(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    load_cfg("default", &cfg);
    /* default element bytes: uop 4, wgt 256, inp 16, acc 64, out 16, acc8 16 */
    parse_ok(&cfg,
             ".buffer i 64\n"                                    /* 0x100000 */
             ".buffer w 1024\n"                                  /* 0x101000 */
             "load inp sram=0 dram=i y=1 x=4 stride=4\n"
             "load inp sram=0 dram=i+3 y=1 x=1 stride=1\n"
             "load wgt sram=0 dram=w+0x2 y=1 x=1 stride=1\n"
             "load wgt sram=0 dram=w-1 y=1 x=1 stride=1\n"
             "load acc sram=0 dram=later y=1 x=1 stride=1\n"      /* forward reference */
             "load acc8 sram=0 dram=later+1 y=1 x=1 stride=1\n"
             "load uop sram=0 dram=w y=1 x=1 stride=1\n"
             "store out sram=0 dram=_o_1 y=1 x=1 stride=1\n"
             "load inp sram=0 dram=123 y=1 x=1 stride=1\n"
             ".buffer later 64\n"                                /* 0x102000 */
             ".buffer _o_1 16 @0x200000\n",
             &p);
    static const uint32_t want[] = {
        0x100000 / 16,     0x100000 / 16 + 3, 0x101000 / 256 + 2, 0x101000 / 256 - 1,
        0x102000 / 64,     0x102000 / 16 + 1, 0x101000 / 4,       0x200000 / 16,
        123,
    };
    assert_int_equal(p.ninsns, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < p.ninsns; i++)
        if (p.insns[i].dram_base != want[i])
            fail_msg("insn %zu (line %d): dram_base %u, want %u", i, p.lines[i],
                     p.insns[i].dram_base, want[i]);
    tsr_program_free(&p);
}

/* The activation tables (ACT_LUT): "load lut" and "alu lut" assemble to
 * their numbers, a symbolic address counts 256-byte elements, the text
 * round-trips; without the key a symbolic lut address is refused naming it. */
static void test_lut_text(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    const char *json = "{\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":0,"
                       "\"LOG_BLOCK\":2,\"LOG_UOP_BUFF_SIZE\":10,\"LOG_INP_BUFF_SIZE\":9,"
                       "\"LOG_WGT_BUFF_SIZE\":10,\"LOG_ACC_BUFF_SIZE\":11,\"ACT_LUT\":4}";
    if (tsr_config_parse(json, "lut", &cfg))
        fail_msg("config: %s", tsr_errmsg());
    static const char *const lines[] = {
        "load lut sram=1 dram=0 y=1 x=3 stride=3 pad=0,0,0,0",
        "alu lut reset=0 uop=0:1 iter=2,1 dst=1,0 src=1,0 use_imm=1 imm=3",
        "alu lut reset=0 uop=0:1 iter=1,1 dst=0,0 src=0,0 use_imm=0 imm=0",
    };
    char text[512] = ".buffer tab 1024\n";
    for (size_t i = 0; i < 3; i++) {
        strcat(text, i ? lines[i] : "load lut sram=1 dram=tab+1 y=1 x=3 stride=3");
        strcat(text, "\n");
    }
    parse_ok(&cfg, text, &p);
    assert_int_equal(p.ninsns, 3);
    assert_int_equal(p.insns[0].mem_type, TSR_MEM_LUT);
    assert_int_equal(p.insns[0].dram_base, 0x100000 / 256 + 1);
    assert_int_equal(p.insns[1].alu_opcode, TSR_ALU_LUT);
    assert_int_equal(p.insns[1].imm, 3);
    char out[256];
    p.insns[0].dram_base = 0;
    for (size_t i = 0; i < 3; i++) {
        assert_true(tsr_disasm_insn(&cfg, &p.insns[i], out, sizeof out) > 0);
        assert_string_equal(out, lines[i]);
    }
    tsr_program_free(&p);
    /* ACT_LUT = 0: the number still has a name (the verifier refuses it), a
     * buffer address needs the element size the key gives */
    load_cfg("tiny", &cfg);
    tsr_err_clear();
    assert_int_not_equal(tsr_asm_parse(&cfg, ".buffer tab 256\nload lut sram=0 dram=tab y=1 x=1 stride=1\n", "t.s", &p),
                         TSR_OK);
    assert_non_null(strstr(tsr_errmsg(), "memory type lut needs config key ACT_LUT > 0"));
}

static void test_misaligned_symbol(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    /* 64x64 16-bit weights: 8192-byte wgt elements, larger than the 4096-byte alignment */
    const char *json = "{\"TARGET\":\"sim\",\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":4,"
                       "\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":0,\"LOG_BLOCK\":6,"
                       "\"LOG_UOP_BUFF_SIZE\":10,\"LOG_INP_BUFF_SIZE\":10,"
                       "\"LOG_WGT_BUFF_SIZE\":15,\"LOG_ACC_BUFF_SIZE\":12}";
    if (tsr_config_parse(json, "big-wgt", &cfg))
        fail_msg("config: %s", tsr_errmsg());
    assert_int_equal(tsr_config_elem_bytes(&cfg, TSR_MEM_WGT), 8192);
    /* a at 0x100000 (multiple of 8192), w at 0x101000 (not) */
    parse_ok(&cfg, ".buffer a 16\n.buffer w 8192\nload wgt sram=0 dram=a y=1 x=1 stride=1\n", &p);
    assert_int_equal(p.insns[0].dram_base, 0x100000 / 8192);
    tsr_program_free(&p);
    const char *text = ".buffer a 16\n.buffer w 8192\n\nload wgt sram=0 dram=w y=1 x=1 stride=1\n";
    int rc = tsr_asm_parse(&cfg, text, "m.s", &p);
    assert_int_equal(rc, TSR_EPARSE);
    assert_non_null(strstr(tsr_errmsg(), "m.s:4:"));
    assert_non_null(strstr(tsr_errmsg(), "misaligned"));
    assert_true(is_zeroed(&p));
    /* the same buffer is fine for a memory type with small elements */
    parse_ok(&cfg, ".buffer a 16\n.buffer w 8192\nload inp sram=0 dram=w y=1 x=1 stride=1\n", &p);
    tsr_program_free(&p);
}

/* ----------------------------------------------------------- errors */

#define LD "load inp sram=0 dram=0 y=1 x=1 stride=1"
#define GM "gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0"
#define AL "alu add uop=0:1 iter=1,1 dst=0,0 src=0,0"

static const struct {
    const char *text;
    int line;
    const char *word;
} bad[] = {
    /* unknown mnemonic */
    {"frob 1 2", 1, "unknown mnemonic"},
    {"\n\n.bufer a 16", 3, "unknown mnemonic"},
    {"LOAD inp sram=0 dram=0 y=1 x=1 stride=1", 1, "unknown mnemonic"},
    {"finish\n=", 2, "unknown mnemonic"},
    /* unknown key / key not valid for the opcode */
    {GM " bogus=1", 1, "unknown key"},
    {"finish sram=0", 1, "unknown key"},
    {LD " wgt=0,0", 1, "unknown key"},
    {GM " imm=3", 1, "unknown key"},
    {AL " wgt=0,0", 1, "unknown key"},
    {LD " reset", 1, "unknown key"},
    {LD " =3", 1, "unknown key"},
    {"finish pop", 1, "unknown key"},
    /* duplicate key */
    {"load inp sram=0 sram=1 dram=0 y=1 x=1 stride=1", 1, "duplicate key"},
    {"finish pop_next pop_next", 1, "duplicate key"},
    {"gemm reset reset=1 uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0", 1, "duplicate key"},
    {AL " imm=1 imm=2", 1, "duplicate key"},
    /* memory type / ALU op */
    {"load foo sram=0 dram=0 y=1 x=1 stride=1", 1, "unknown memory type"},
    {"load sram=0 dram=0 y=1 x=1 stride=1", 1, "unknown memory type"},
    {"store", 1, "missing memory type"},
    {"alu div uop=0:1 iter=1,1 dst=0,0 src=0,0", 1, "unknown ALU op"},
    {"alu", 1, "missing ALU op"},
    /* missing required key */
    {"load inp sram=0 dram=0 y=1 x=1", 1, "missing required key (stride)"},
    {"store out dram=0 y=1 x=1 stride=1", 1, "missing required key (sram)"},
    {"gemm uop=0:1 iter=1,1 dst=0,0 src=0,0", 1, "missing required key (wgt)"},
    {"alu add iter=1,1 dst=0,0 src=0,0", 1, "missing required key (uop)"},
    {"load inp sram dram=0 y=1 x=1 stride=1", 1, "missing value"},
    /* malformed numbers and values */
    {"load inp sram=12x dram=0 y=1 x=1 stride=1", 1, "malformed"},
    {"load inp sram=0x dram=0 y=1 x=1 stride=1", 1, "malformed"},
    {"load inp sram= dram=0 y=1 x=1 stride=1", 1, "malformed"},
    {"load inp sram=+1 dram=0 y=1 x=1 stride=1", 1, "malformed"},
    {"load inp sram=0 dram=0 y=1 x=1 stride=1 pad=1,2,3", 1, "malformed"},
    {"load inp sram=0 dram=0 y=1 x=1 stride=1 pad=1,2,3,4,5", 1, "malformed"},
    {"gemm uop=0:1 iter=1 dst=0,0 src=0,0 wgt=0,0", 1, "malformed"},
    {"gemm uop=0:1 iter=1,2,3 dst=0,0 src=0,0 wgt=0,0", 1, "malformed"},
    {"gemm uop=0,1 iter=1,1 dst=0,0 src=0,0 wgt=0,0", 1, "malformed"},
    {"gemm uop=0:1 iter=1,1 dst=,0 src=0,0 wgt=0,0", 1, "malformed"},
    {AL " imm=1.5", 1, "malformed"},
    {AL " imm=--1", 1, "malformed"},
    {AL " imm=-", 1, "malformed"},
    {"load inp sram=-1 dram=0 y=1 x=1 stride=1", 1, "negative"},
    {"load inp sram=0 dram=-5 y=1 x=1 stride=1", 1, "negative"},
    /* values that do not fit (parser range and field widths of default) */
    {"load inp sram=0 dram=0 y=1 x=0x100000000 stride=1", 1, "does not fit"},
    {"load inp sram=0 dram=0 y=1 x=99999999999999999999999 stride=1", 1, "does not fit"},
    {"load inp sram=0 dram=0 y=0x10000 x=1 stride=1", 1, "does not fit"},
    {"load inp sram=8192 dram=0 y=1 x=1 stride=1", 1, "does not fit"},
    {LD " pad=16,0,0,0", 1, "does not fit"},
    {"gemm uop=8192:8192 iter=1,1 dst=0,0 src=0,0 wgt=0,0", 1, "does not fit"},
    {"gemm uop=0:1 iter=16384,1 dst=0,0 src=0,0 wgt=0,0", 1, "does not fit"},
    {"gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,1024", 1, "does not fit"},
    {AL " imm=32768", 1, "does not fit"},
    {AL " imm=-32769", 1, "does not fit"},
    {AL " imm=0x80000000", 1, "does not fit"},
    {"gemm reset=2 uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0", 1, "0 or 1"},
    {AL " use_imm=yes", 1, "0 or 1"},
    {"finish pop_next=1", 1, "flag takes no value"},
    {"# c\n\n  finish\n" LD " push_next=", 4, "flag takes no value"},
    /* symbolic addresses */
    {"load inp sram=0 dram=nosuch y=1 x=1 stride=1", 1, "unknown buffer"},
    {".buffer a 16\n" LD "\nload inp sram=0 dram=b y=1 x=1 stride=1", 3, "unknown buffer"},
    {".buffer a 16\nload inp sram=0 dram=a+ y=1 x=1 stride=1", 2, "malformed"},
    {".buffer a 16\nload inp sram=0 dram=a*2 y=1 x=1 stride=1", 2, "malformed address"},
    {".buffer a 16\nload inp sram=0 dram=a-65537 y=1 x=1 stride=1", 2, "out of range"},
    {".buffer a 16 @0xfffff000000\nload uop sram=0 dram=a y=1 x=1 stride=1", 2, "out of range"},
    /* buffer declarations */
    {".buffer a 16\n.buffer a 32", 2, "duplicate buffer"},
    {".uops a 0,0,0\n.buffer a 16", 2, "duplicate buffer"},
    {".buffer a 16\n.uops a 0,0,0", 2, "not a .uops buffer"},
    {".buffer a 16 @0x100", 1, "not aligned"},
    {".buffer a 8192 @0x200000\n.buffer b 16 @0x201000", 2, "overlaps"},
    {".buffer a 16 @0\n.buffer b 16 @0x0", 2, "overlaps"},
    {".buffer a 0", 1, "must be positive"},
    {".buffer a -1", 1, "negative"},
    {".buffer a 0x", 1, "malformed"},
    {".buffer a 16 @", 1, "malformed address"},
    {".buffer a 0x2000 @0xfffffffffffff000", 1, "address space"},
    {".buffer a 0xffffffffffffffff", 1, "address space"},
    {".buffer 1a 16", 1, "bad buffer name"},
    {".buffer a-b 16", 1, "bad buffer name"},
    {".buffer a0123456789012345678901234567890123456789012345678901234567890123 16", 1,
     "longer than"},
    {".buffer", 1, "missing buffer name"},
    {".buffer a", 1, "missing buffer size"},
    {".buffer a 16 random", 1, "missing seed"},
    {".buffer a 16 random x", 1, "malformed"},
    {".buffer a 16 file", 1, "missing path"},
    {".buffer a 16 bogus", 1, "unexpected token"},
    {".buffer a 16 zero extra", 1, "unexpected token"},
    {".buffer a 16 @0x200000 @0x300000", 1, "unexpected token"},
    /* .uops */
    {".uops u 1,2", 1, "bad uop triple"},
    {".uops u 1,2,3,4", 1, "bad uop triple"},
    {".uops u 1,x,3", 1, "bad uop triple"},
    {".uops u 1,,3", 1, "bad uop triple"},
    {".uops u 0,0,0\n.uops u 0,0,0 -1,0,0", 2, "bad uop triple"},
    {".uops u", 1, "missing uop triple"},
    {".uops", 1, "missing buffer name"},
    {".uops 9 0,0,0", 1, "bad buffer name"},
    {".uops u 2048,0,0", 1, "does not fit"},   /* dst: 11 bits */
    {".uops u 0,2048,0", 1, "does not fit"},   /* src: 11 bits */
    {".uops u 0,0,1024", 1, "does not fit"},   /* wgt: 10 bits */
    {".uops u 0,0,0x100000000", 1, "does not fit"},
    /* .output */
    {".output zz", 1, "unknown buffer"},
    {".buffer a 16\n\n.output b\n.buffer c 16", 3, "unknown buffer"},
    {".output", 1, "missing buffer name"},
    {".buffer a 16\n.output a b", 2, "unexpected token"},
};

static void test_errors(void **state)
{
    (void)state;
    tsr_config_t cfg;
    load_cfg("default", &cfg);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tsr_program_t p;
        char where[32];
        memset(&p, 0xa5, sizeof p); /* the parser must not rely on a zeroed output */
        int rc = tsr_asm_parse(&cfg, bad[i].text, "bad.s", &p);
        snprintf(where, sizeof where, "bad.s:%d: ", bad[i].line);
        if (rc != TSR_EPARSE || !strstr(tsr_errmsg(), where) || !strstr(tsr_errmsg(), bad[i].word))
            fail_msg("case %zu: rc %s, message \"%s\"; want EPARSE, \"%s\" and \"%s\"\n  text: %s",
                     i, tsr_errname(rc), tsr_errmsg(), where, bad[i].word, bad[i].text);
        if (!is_zeroed(&p))
            fail_msg("case %zu: program not zeroed after a failed parse", i);
        tsr_program_free(&p); /* safe on the zeroed struct */
    }
}

/* The offending token appears in the message. */
static void test_error_names_token(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    load_cfg("default", &cfg);
    assert_int_equal(tsr_asm_parse(&cfg, GM " zorglub=4", "x.s", &p), TSR_EPARSE);
    assert_non_null(strstr(tsr_errmsg(), "zorglub=4"));
    assert_int_equal(tsr_asm_parse(&cfg, "load inp sram=0 dram=0 y=1 x=1 stride=0x1g", "x.s", &p),
                     TSR_EPARSE);
    assert_non_null(strstr(tsr_errmsg(), "stride=0x1g"));
    assert_int_equal(tsr_asm_parse(&cfg, ".uops u 1,2,3 7,8", "x.s", &p), TSR_EPARSE);
    assert_non_null(strstr(tsr_errmsg(), "7,8"));
    /* a very long token is quoted only in part */
    char line[4096];
    memset(line, 'q', sizeof line);
    memcpy(line, "frob", 4);
    line[sizeof line - 1] = '\0';
    assert_int_equal(tsr_asm_parse(&cfg, line, "x.s", &p), TSR_EPARSE);
    assert_true(strlen(tsr_errmsg()) < 200);
}

/* Random bytes and mutated valid programs: never crash; a failure leaves a
 * zeroed program and a message; a success disassembles and reassembles to
 * the same bits. */
static const char *const corpus[] = {
    ".buffer inp 128 random 1\n.buffer out 64 @0x200000\n.uops k 0,0,0 0,1,1\n.output out\n"
    "load uop sram=0 dram=k y=1 x=2 stride=2\n"
    "gemm reset uop=0:1 iter=1,4 dst=0,1 src=0,0 wgt=0,0\n"
    "load inp sram=0 dram=inp+2 y=2 x=4 stride=4 pad=1,1,0,0 push_next\n"
    "gemm uop=0:2 iter=2,2 dst=2,1 src=2,0 wgt=0,2 pop_prev\n"
    "alu max uop=0:1 iter=1,4 dst=0,1 src=0,1 imm=0 push_next # relu\n"
    "store out sram=0 dram=out y=1 x=4 stride=4 pop_prev push_prev\n"
    "finish pop_next\n",
    "alu mulhr reset=0 uop=0:1 iter=1,1 dst=0,0 src=0,0 use_imm=1 imm=-3\n"
    "load acc8 sram=3 dram=0x40 y=1 x=16 stride=16 pad=0,0,0,0 pop_prev pop_next\n",
};

static const char *const vocab[] = {
    "load", "store", "gemm", "alu", "finish", ".buffer", ".uops", ".output", "inp", "wgt", "uop",
    "acc", "out", "acc8", "add", "max", "shr", "sram=", "dram=", "y=", "x=", "stride=", "pad=",
    "reset", "reset=", "uop=", "iter=", "dst=", "src=", "wgt=", "imm=", "use_imm=", "pop_prev",
    "pop_next", "push_prev", "push_next", "0", "1", "-1", "0x", "0xffffffff", "65535",
    "99999999999999999999999", ",", ":", "+", "-", "=", "@", "@0x1000", "#", " ", " ", "\t", "\n",
    "\r", "random", "file", "zero", "a", "b", "a+1", "b-2", "1,2,3", "0,0,0",
};

static void fuzz_one(const tsr_config_t *cfg, const char *text, uint64_t seed, int iter)
{
    tsr_program_t p;
    int rc = tsr_asm_parse(cfg, text, "fz", &p);
    if (rc) {
        if (rc != TSR_EPARSE || strncmp(tsr_errmsg(), "fz:", 3))
            fail_msg("[seed=%llu iter=%d] rc %s, message \"%s\"", (unsigned long long)seed, iter,
                     tsr_errname(rc), tsr_errmsg());
        if (!is_zeroed(&p))
            fail_msg("[seed=%llu iter=%d] program not zeroed after failure",
                     (unsigned long long)seed, iter);
        return;
    }
    for (size_t i = 0; i < p.ninsns; i++) {
        char line[256];
        tsr_program_t q;
        tsr_insn_bits_t b1, b2;
        if (tsr_disasm_insn(cfg, &p.insns[i], line, sizeof line) <= 0)
            fail_msg("[seed=%llu iter=%d] disasm of insn %zu: %s", (unsigned long long)seed, iter,
                     i, tsr_errmsg());
        if (tsr_asm_parse(cfg, line, "fz2", &q))
            fail_msg("[seed=%llu iter=%d] reparse of \"%s\": %s", (unsigned long long)seed, iter,
                     line, tsr_errmsg());
        assert_int_equal(q.ninsns, 1);
        assert_int_equal(tsr_insn_encode(cfg, &p.insns[i], &b1), TSR_OK);
        assert_int_equal(tsr_insn_encode(cfg, &q.insns[0], &b2), TSR_OK);
        if (b1.w[0] != b2.w[0] || b1.w[1] != b2.w[1])
            fail_msg("[seed=%llu iter=%d] \"%s\" reassembles to other bits",
                     (unsigned long long)seed, iter, line);
        tsr_program_free(&q);
    }
    tsr_program_free(&p);
}

static void test_fuzz(void **state)
{
    (void)state;
    uint64_t seed = test_seed(), rng = seed | 1;
    tsr_config_t cfg;
    char text[2048];
    load_cfg("tiny", &cfg);
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = 0;
        switch (iter % 3) {
        case 0: /* random bytes (no NUL: the input is a C string) */
            n = rng_next(&rng) % 300;
            for (size_t i = 0; i < n; i++)
                text[i] = (char)(1 + rng_next(&rng) % 255);
            break;
        case 1: /* random sequences of grammar fragments */
            for (int k = (int)(rng_next(&rng) % 40); k > 0; k--) {
                const char *w = vocab[rng_next(&rng) % (sizeof vocab / sizeof vocab[0])];
                size_t l = strlen(w);
                if (n + l >= sizeof text - 1)
                    break;
                memcpy(text + n, w, l);
                n += l;
            }
            break;
        default: { /* mutations of a valid program */
            const char *c = corpus[rng_next(&rng) % (sizeof corpus / sizeof corpus[0])];
            n = strlen(c);
            memcpy(text, c, n);
            for (int k = 1 + (int)(rng_next(&rng) % 4); k > 0 && n > 0; k--) {
                size_t at = rng_next(&rng) % n;
                switch (rng_next(&rng) % 4) {
                case 0: text[at] = (char)(1 + rng_next(&rng) % 255); break;
                case 1: memmove(text + at, text + at + 1, n - at - 1); n--; break;
                case 2: n = at; break; /* truncate */
                default:
                    if (n + 1 < sizeof text - 1) {
                        memmove(text + at + 1, text + at, n - at);
                        text[at] = "0123456789,:=+-# \nxa"[rng_next(&rng) % 20];
                        n++;
                    }
                }
            }
        }
        }
        text[n] = '\0';
        fuzz_one(&cfg, text, seed, iter);
    }
}

/* ---------------------------------------------------------- example */

/* Queue a token travels on when an instruction of this stage pushes or pops
 * in direction prev/next: load<->compute and compute<->store. */
enum { L2C, C2L, C2S, S2C };

static int stage_of(const tsr_insn_t *in)
{
    if (in->opcode == TSR_OP_LOAD && (in->mem_type == TSR_MEM_INP || in->mem_type == TSR_MEM_WGT))
        return 0;
    return in->opcode == TSR_OP_STORE ? 2 : 1;
}

static void test_example_gemm_relu(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    load_cfg("default", &cfg);
    int rc = tsr_asm_parse_file(&cfg, TSR_SOURCE_DIR "/isa/examples/gemm_relu.s", &p);
    if (rc)
        fail_msg("gemm_relu.s: %s", tsr_errmsg());
    assert_true(p.ninsns > 0);

    /* exactly one FINISH, last */
    for (size_t i = 0; i + 1 < p.ninsns; i++)
        assert_int_not_equal(p.insns[i].opcode, TSR_OP_FINISH);
    assert_int_equal(p.insns[p.ninsns - 1].opcode, TSR_OP_FINISH);

    /* tokens balanced on each of the four queues */
    long bal[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < p.ninsns; i++) {
        const tsr_insn_t *in = &p.insns[i];
        switch (stage_of(in)) {
        case 0:
            assert_int_equal(in->pop_prev | in->push_prev, 0);
            bal[L2C] += in->push_next;
            bal[C2L] -= in->pop_next;
            break;
        case 1:
            bal[L2C] -= in->pop_prev;
            bal[C2L] += in->push_prev;
            bal[C2S] += in->push_next;
            bal[S2C] -= in->pop_next;
            break;
        default:
            assert_int_equal(in->pop_next | in->push_next, 0);
            bal[C2S] -= in->pop_prev;
            bal[S2C] += in->push_prev;
        }
    }
    for (int q = 0; q < 4; q++)
        if (bal[q])
            fail_msg("queue %d unbalanced by %ld", q, bal[q]);

    /* the last STORE pushes to compute and FINISH pops it */
    const tsr_insn_t *fin = &p.insns[p.ninsns - 1];
    assert_int_equal(fin->pop_next, 1);
    size_t last_store = p.ninsns;
    for (size_t i = 0; i < p.ninsns; i++)
        if (p.insns[i].opcode == TSR_OP_STORE)
            last_store = i;
    assert_true(last_store < p.ninsns);
    assert_int_equal(p.insns[last_store].push_prev, 1);

    /* uses GEMM, ALU max imm 0 and shr; one output buffer and one uop buffer */
    int has_relu = 0, has_shr = 0, has_gemm2d = 0, has_reset = 0, nout = 0, nuops = 0;
    for (size_t i = 0; i < p.ninsns; i++) {
        const tsr_insn_t *in = &p.insns[i];
        if (in->opcode == TSR_OP_ALU && in->alu_opcode == TSR_ALU_MAX && in->use_imm && !in->imm)
            has_relu = 1;
        if (in->opcode == TSR_OP_ALU && in->alu_opcode == TSR_ALU_SHR)
            has_shr = 1;
        if (in->opcode == TSR_OP_GEMM && in->reset)
            has_reset = 1;
        if (in->opcode == TSR_OP_GEMM && !in->reset && in->iter_out > 1 && in->iter_in > 1)
            has_gemm2d = 1;
    }
    for (size_t b = 0; b < p.nbufs; b++) {
        nout += p.bufs[b].is_output;
        nuops += p.bufs[b].init == TSR_INIT_UOPS;
    }
    assert_true(has_relu && has_shr && has_gemm2d && has_reset);
    assert_int_equal(nout, 1);
    assert_int_equal(nuops, 1);

    /* the static verifier accepts it, DRAM accesses checked against the buffers */
    tsr_region_t regions[16];
    assert_true(p.nbufs <= 16);
    for (size_t b = 0; b < p.nbufs; b++)
        regions[b] = (tsr_region_t){p.bufs[b].addr, p.bufs[b].size, p.bufs[b].name};
    tsr_verify_opts_t vo = {.regions = regions, .nregions = p.nbufs, .check_dram = 1};
    if (tsr_verify(&cfg, p.insns, p.ninsns, &vo))
        fail_msg("gemm_relu.s rejected by the verifier: %s", tsr_errmsg());

    /* every transfer stays inside one declared buffer */
    for (size_t i = 0; i < p.ninsns; i++) {
        const tsr_insn_t *in = &p.insns[i];
        if ((in->opcode != TSR_OP_LOAD && in->opcode != TSR_OP_STORE) || !in->x_size)
            continue;
        uint64_t eb = tsr_config_elem_bytes(&cfg, (int)in->mem_type);
        uint64_t lo = in->dram_base * eb;
        uint64_t hi = ((uint64_t)in->dram_base + (uint64_t)(in->y_size - 1) * in->x_stride +
                       in->x_size) * eb;
        int inside = 0;
        for (size_t b = 0; b < p.nbufs; b++)
            inside |= lo >= p.bufs[b].addr && hi <= p.bufs[b].addr + p.bufs[b].size;
        if (!inside)
            fail_msg("line %d: bytes [0x%llx, 0x%llx) outside every buffer", p.lines[i],
                     (unsigned long long)lo, (unsigned long long)hi);
    }
    tsr_program_free(&p);
}

static void test_parse_file_missing(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    load_cfg("default", &cfg);
    assert_int_equal(tsr_asm_parse_file(&cfg, "/nonexistent/x.s", &p), TSR_EIO);
    assert_non_null(strstr(tsr_errmsg(), "/nonexistent/x.s"));
    assert_true(is_zeroed(&p));
}

/* ----------------------------------------------------------- disasm */

static void test_disasm_stream(void **state)
{
    (void)state;
    static const char *const want =
        "load inp sram=0 dram=256 y=1 x=16 stride=16 pad=0,0,0,0 pop_next push_next\n"
        "gemm reset=0 uop=0:4 iter=2,3 dst=1,0 src=2,0 wgt=0,1\n"
        "finish pop_next\n";
    tsr_config_t cfg;
    tsr_program_t p;
    uint8_t bytes[3 * TSR_INSN_BYTES];
    char *out = NULL;
    size_t outlen = 0;
    load_cfg("default", &cfg);
    parse_ok(&cfg, want, &p);
    assert_int_equal(p.ninsns, 3);
    for (size_t i = 0; i < 3; i++) {
        tsr_insn_bits_t b;
        assert_int_equal(tsr_insn_encode(&cfg, &p.insns[i], &b), TSR_OK);
        tsr_insn_bits_store(&b, bytes + i * TSR_INSN_BYTES);
    }
    tsr_program_free(&p);
    /* finish pop_next is opcode 3 with pop_next (bit 4): byte 0 = 0x13 */
    assert_int_equal(bytes[32], 0x13);

    FILE *f = open_memstream(&out, &outlen);
    assert_non_null(f);
    assert_int_equal(tsr_disasm_stream(&cfg, bytes, sizeof bytes, f), TSR_OK);
    fclose(f);
    assert_string_equal(out, want);
    free(out);

    /* trailing partial instruction: the complete ones are printed, index 2 named */
    f = open_memstream(&out, &outlen);
    assert_int_equal(tsr_disasm_stream(&cfg, bytes, 2 * TSR_INSN_BYTES + 5, f), TSR_EINVAL);
    fclose(f);
    assert_non_null(strstr(tsr_errmsg(), "instruction 2"));
    assert_non_null(strstr(tsr_errmsg(), "truncated"));
    assert_int_equal(strncmp(out, want, strlen(out)), 0);
    free(out);

    /* undecodable instruction 1: opcode 7 */
    bytes[16] = 0x07;
    f = open_memstream(&out, &outlen);
    assert_true(tsr_disasm_stream(&cfg, bytes, sizeof bytes, f) < 0);
    fclose(f);
    free(out);
    assert_non_null(strstr(tsr_errmsg(), "instruction 1"));

    /* empty stream: nothing printed */
    f = open_memstream(&out, &outlen);
    assert_int_equal(tsr_disasm_stream(&cfg, bytes, 0, f), TSR_OK);
    fclose(f);
    assert_int_equal(outlen, 0);
    free(out);
}

static void test_disasm_small_buffer(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_insn_t in;
    char buf[16];
    load_cfg("default", &cfg);
    memset(&in, 0, sizeof in);
    in.opcode = TSR_OP_FINISH;
    memset(buf, 'x', sizeof buf);
    assert_true(tsr_disasm_insn(&cfg, &in, buf, 6) < 0); /* "finish" + NUL = 7 */
    assert_int_equal(tsr_disasm_insn(&cfg, &in, buf, 7), 6);
    assert_string_equal(buf, "finish");
    in.opcode = 6; /* no such opcode */
    assert_true(tsr_disasm_insn(&cfg, &in, buf, sizeof buf) < 0);
    in.opcode = TSR_OP_LOAD;
    in.mem_type = 7;
    assert_true(tsr_disasm_insn(&cfg, &in, buf, sizeof buf) < 0);
}

/* ------------------------------------------------------------ misc */

static void test_random_fill(void **state)
{
    (void)state;
    /* published splitmix64 outputs: seed 0 -> e220a8397b1dcdaf 6e789e6aa1b965f4 ...,
     * seed 1234567 -> 6457827717110365317 3203168211198807973 ... */
    static const uint8_t seed0[12] = {0xaf, 0xcd, 0x1d, 0x7b, 0x39, 0xa8, 0x20, 0xe2,
                                      0xf4, 0x65, 0xb9, 0xa1};
    uint8_t b[16];
    memset(b, 0xee, sizeof b);
    tsr_asm_random_fill(0, b, 12);
    assert_memory_equal(b, seed0, 12);
    assert_int_equal(b[12], 0xee); /* nothing written past n */

    uint64_t w[2];
    tsr_asm_random_fill(1234567, b, 16);
    for (int k = 0; k < 2; k++) {
        w[k] = 0;
        for (int i = 7; i >= 0; i--)
            w[k] = w[k] << 8 | b[8 * k + i];
    }
    assert_true(w[0] == 6457827717110365317ull);
    assert_true(w[1] == 3203168211198807973ull);

    /* a shorter fill is a prefix of a longer one */
    uint8_t c[5];
    tsr_asm_random_fill(1234567, c, 5);
    assert_memory_equal(c, b, 5);
}

static void test_program_free(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_program_t p;
    memset(&p, 0, sizeof p);
    tsr_program_free(&p);
    tsr_program_free(NULL);
    assert_true(is_zeroed(&p));
    load_cfg("default", &cfg);
    parse_ok(&cfg, ".buffer a 16 file x.bin\n.uops u 0,0,0\n" LD "\n", &p);
    tsr_program_free(&p);
    assert_true(is_zeroed(&p));
    tsr_program_free(&p); /* twice is fine */
    /* a parse that fails after allocating buffers, uops and instructions */
    assert_int_equal(tsr_asm_parse(&cfg, ".buffer a 16 file x.bin\n.uops u 0,0,0\n" LD "\nbad",
                                   "t.s", &p),
                     TSR_EPARSE);
    assert_true(is_zeroed(&p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lut_text),
        cmocka_unit_test(test_roundtrip_load),
        cmocka_unit_test(test_roundtrip_store),
        cmocka_unit_test(test_roundtrip_gemm),
        cmocka_unit_test(test_roundtrip_alu),
        cmocka_unit_test(test_roundtrip_finish),
        cmocka_unit_test(test_roundtrip_max_text_default),
        cmocka_unit_test(test_canonical_text),
        cmocka_unit_test(test_canonical_flag_order),
        cmocka_unit_test(test_known_gemm),
        cmocka_unit_test(test_known_load_store),
        cmocka_unit_test(test_known_alu),
        cmocka_unit_test(test_known_layout),
        cmocka_unit_test(test_buffer_placement),
        cmocka_unit_test(test_uops_grow_then_place),
        cmocka_unit_test(test_symbolic_addresses),
        cmocka_unit_test(test_misaligned_symbol),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_error_names_token),
        cmocka_unit_test(test_fuzz),
        cmocka_unit_test(test_example_gemm_relu),
        cmocka_unit_test(test_parse_file_missing),
        cmocka_unit_test(test_disasm_stream),
        cmocka_unit_test(test_disasm_small_buffer),
        cmocka_unit_test(test_random_fill),
        cmocka_unit_test(test_program_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
