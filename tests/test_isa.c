/*
 * test_isa: instruction field layout, encode/decode and uop packing
 * (isa/tsr_isa.c).
 *
 * The reference layout below is written out from the spec (header, then the
 * format's fields in table order, packed from bit 0, widths from the buffer
 * depths computed here from the raw LOG_* keys), and a separate bit packer
 * encodes instructions from it. The library's table, encoder and decoder are
 * all compared with that reference, never with each other alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_util.h"

#define M(member) offsetof(tsr_insn_t, member)

static void expect_has(const char *what, const char *needle)
{
    if (!strstr(tsr_errmsg(), needle))
        fail_msg("%s: message \"%s\" does not contain \"%s\"", what, tsr_errmsg(), needle);
}

static void load_cfg(const char *name, tsr_config_t *c)
{
    int rc = tsr_config_load(name, c);
    if (rc)
        fail_msg("load %s: %s", name, tsr_errmsg());
}

/* ---- reference layout ---- */

typedef struct {
    const char *name;
    size_t offset;
    int width;
    int is_signed;
    int lsb; /* filled by ref_layout */
} ref_field_t;

typedef struct {
    const char *name;
    int n;
    int total;
    ref_field_t f[TSR_MAX_FIELDS];
} ref_fmt_t;

static int ilog2(uint64_t v)
{
    int r = 0;
    while (v > 1) {
        v >>= 1;
        r++;
    }
    return r;
}

/* Index widths from the raw keys: log2(buffer bytes / row bytes). */
typedef struct {
    int U, I, W, A, S;
    int ud, us, uw; /* uop field widths */
} widths_t;

static widths_t ref_widths(const tsr_config_t *c)
{
    widths_t w;
    int inp_row = c->log_batch + c->log_block_in + c->log_inp_width - 3;
    int wgt_row = c->log_block_out + c->log_block_in + c->log_wgt_width - 3;
    int acc_row = c->log_batch + c->log_block_out + c->log_acc_width - 3;
    w.I = c->log_inp_buff_size - inp_row;
    w.W = c->log_wgt_buff_size - wgt_row;
    w.A = c->log_acc_buff_size - acc_row;
    w.ud = w.A;
    w.us = w.I > w.A ? w.I : w.A;
    w.uw = w.W;
    int uop_bytes = w.ud + w.us + w.uw <= 32 ? 4 : 8;
    w.U = c->log_uop_buff_size - ilog2((uint64_t)uop_bytes);
    w.S = w.U;
    if (w.I > w.S) w.S = w.I;
    if (w.W > w.S) w.S = w.W;
    if (w.A > w.S) w.S = w.A;
    return w;
}

static void add(ref_fmt_t *r, const char *name, size_t off, int width, int sgn)
{
    ref_field_t *f = &r->f[r->n++];
    f->name = name;
    f->offset = off;
    f->width = width;
    f->is_signed = sgn;
    f->lsb = r->total;
    r->total += width;
}

static void ref_layout(const tsr_config_t *c, uint32_t op, ref_fmt_t *r)
{
    widths_t w = ref_widths(c);
    memset(r, 0, sizeof *r);
    add(r, "opcode", M(opcode), 3, 0);
    add(r, "pop_prev", M(pop_prev), 1, 0);
    add(r, "pop_next", M(pop_next), 1, 0);
    add(r, "push_prev", M(push_prev), 1, 0);
    add(r, "push_next", M(push_next), 1, 0);
    switch (op) {
    case TSR_OP_LOAD:
    case TSR_OP_STORE:
        r->name = "MEM";
        add(r, "mem_type", M(mem_type), 3, 0);
        add(r, "sram_base", M(sram_base), w.S, 0);
        add(r, "dram_base", M(dram_base), 32, 0);
        add(r, "y_size", M(y_size), 16, 0);
        add(r, "x_size", M(x_size), 16, 0);
        add(r, "x_stride", M(x_stride), 16, 0);
        add(r, "y_pad0", M(y_pad0), 4, 0);
        add(r, "y_pad1", M(y_pad1), 4, 0);
        add(r, "x_pad0", M(x_pad0), 4, 0);
        add(r, "x_pad1", M(x_pad1), 4, 0);
        add(r, "pad_value", M(pad_value), 8, 1);
        break;
    case TSR_OP_GEMM:
    case TSR_OP_ALU:
        r->name = op == TSR_OP_GEMM ? "GEMM" : "ALU";
        add(r, "reset", M(reset), 1, 0);
        add(r, "uop_bgn", M(uop_bgn), w.U, 0);
        add(r, "uop_end", M(uop_end), w.U + 1, 0); /* must hold uop depth itself */
        add(r, "iter_out", M(iter_out), 14, 0);
        add(r, "iter_in", M(iter_in), 14, 0);
        add(r, "dst_factor_out", M(dst_factor_out), w.A, 0);
        add(r, "dst_factor_in", M(dst_factor_in), w.A, 0);
        if (op == TSR_OP_GEMM) {
            add(r, "src_factor_out", M(src_factor_out), w.I, 0);
            add(r, "src_factor_in", M(src_factor_in), w.I, 0);
            add(r, "wgt_factor_out", M(wgt_factor_out), w.W, 0);
            add(r, "wgt_factor_in", M(wgt_factor_in), w.W, 0);
            /* the depthwise mode's bit, last, only with its key (semantics.md) */
            if (c->depthwise > 0)
                add(r, "depthwise", M(depthwise), 1, 0);
        } else {
            /* ALU src is an accumulator row. */
            add(r, "src_factor_out", M(src_factor_out), w.A, 0);
            add(r, "src_factor_in", M(src_factor_in), w.A, 0);
            add(r, "alu_opcode", M(alu_opcode), 4, 0);
            add(r, "use_imm", M(use_imm), 1, 0);
            add(r, "imm", M(imm), 16, 1);
        }
        break;
    default:
        r->name = "FINISH";
        break;
    }
}

static uint32_t getm(const tsr_insn_t *in, size_t off)
{
    uint32_t v;
    memcpy(&v, (const char *)in + off, sizeof v);
    return v;
}

static void setm(tsr_insn_t *in, size_t off, uint32_t v) { memcpy((char *)in + off, &v, sizeof v); }

/* Reference packer: bit by bit, independent of the library's. */
static tsr_insn_bits_t ref_encode(const ref_fmt_t *r, const tsr_insn_t *in)
{
    tsr_insn_bits_t b = {{0, 0}};
    for (int i = 0; i < r->n; i++) {
        uint32_t v = getm(in, r->f[i].offset);
        for (int k = 0; k < r->f[i].width; k++)
            if ((v >> k) & 1u) {
                int bit = r->f[i].lsb + k;
                b.w[bit / 64] |= 1ull << (bit % 64);
            }
    }
    return b;
}

static const uint32_t all_ops[] = {TSR_OP_LOAD, TSR_OP_STORE, TSR_OP_GEMM, TSR_OP_ALU,
                                   TSR_OP_FINISH};
static const char *const presets[] = {"default", "tiny", "large"};

/* Library table == reference table (names, offsets, widths, positions, signedness). */
static void compare_layout(const char *cname, const tsr_config_t *c, uint32_t op)
{
    ref_fmt_t r;
    tsr_format_t f;
    ref_layout(c, op, &r);
    int rc = tsr_isa_format(c, op, &f);
    if (rc)
        fail_msg("%s op %u: tsr_isa_format: %s", cname, op, tsr_errmsg());
    if (strcmp(f.name, r.name))
        fail_msg("%s op %u: format %s, want %s", cname, op, f.name, r.name);
    for (int i = 0; i < r.n && i < f.nfields; i++) {
        const tsr_field_t *g = &f.fields[i];
        const ref_field_t *e = &r.f[i];
        if (strcmp(g->name, e->name) || g->offset != e->offset || g->lsb != e->lsb ||
            g->width != e->width || !!g->is_signed != e->is_signed)
            fail_msg("%s %s field %d: got %s (struct offset %zu) lsb %d width %d signed %d, want "
                     "%s (offset %zu) lsb %d width %d signed %d",
                     cname, r.name, i, g->name, g->offset, g->lsb, g->width, g->is_signed,
                     e->name, e->offset, e->lsb, e->width, e->is_signed);
    }
    if (f.nfields != r.n)
        fail_msg("%s %s: %d fields, want %d", cname, r.name, f.nfields, r.n);
    if (f.total_bits != r.total)
        fail_msg("%s %s: total_bits %d, want %d", cname, r.name, f.total_bits, r.total);
}

static void test_layout_default_by_hand(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_format_t f;
    load_cfg("default", &c);
    /* Positions worked out by hand for the default preset (U 13, I 11, W 10, A 11, S 13). */
    static const struct {
        uint32_t op;
        const char *field;
        int lsb, width;
    } hand[] = {
        {TSR_OP_LOAD, "opcode", 0, 3},         {TSR_OP_LOAD, "pop_prev", 3, 1},
        {TSR_OP_LOAD, "pop_next", 4, 1},       {TSR_OP_LOAD, "push_prev", 5, 1},
        {TSR_OP_LOAD, "push_next", 6, 1},      {TSR_OP_LOAD, "mem_type", 7, 3},
        {TSR_OP_LOAD, "sram_base", 10, 13},    {TSR_OP_LOAD, "dram_base", 23, 32},
        {TSR_OP_LOAD, "y_size", 55, 16},       {TSR_OP_LOAD, "x_size", 71, 16},
        {TSR_OP_LOAD, "x_stride", 87, 16},     {TSR_OP_LOAD, "y_pad0", 103, 4},
        {TSR_OP_LOAD, "y_pad1", 107, 4},       {TSR_OP_LOAD, "x_pad0", 111, 4},
        {TSR_OP_LOAD, "x_pad1", 115, 4},      {TSR_OP_LOAD, "pad_value", 119, 8},
        {TSR_OP_GEMM, "reset", 7, 1},          {TSR_OP_GEMM, "uop_bgn", 8, 13},
        {TSR_OP_GEMM, "uop_end", 21, 14},      {TSR_OP_GEMM, "iter_out", 35, 14},
        {TSR_OP_GEMM, "iter_in", 49, 14},      {TSR_OP_GEMM, "dst_factor_out", 63, 11},
        {TSR_OP_GEMM, "dst_factor_in", 74, 11}, {TSR_OP_GEMM, "src_factor_out", 85, 11},
        {TSR_OP_GEMM, "src_factor_in", 96, 11}, {TSR_OP_GEMM, "wgt_factor_out", 107, 10},
        {TSR_OP_GEMM, "wgt_factor_in", 117, 10}, {TSR_OP_GEMM, "depthwise", 127, 1},
        {TSR_OP_ALU, "reset", 7, 1},           {TSR_OP_ALU, "uop_bgn", 8, 13},
        {TSR_OP_ALU, "uop_end", 21, 14},       {TSR_OP_ALU, "iter_out", 35, 14},
        {TSR_OP_ALU, "iter_in", 49, 14},       {TSR_OP_ALU, "dst_factor_out", 63, 11},
        {TSR_OP_ALU, "dst_factor_in", 74, 11}, {TSR_OP_ALU, "src_factor_out", 85, 11},
        {TSR_OP_ALU, "src_factor_in", 96, 11}, {TSR_OP_ALU, "alu_opcode", 107, 4},
        {TSR_OP_ALU, "use_imm", 111, 1},       {TSR_OP_ALU, "imm", 112, 16},
    };
    for (size_t i = 0; i < sizeof hand / sizeof hand[0]; i++) {
        assert_int_equal(tsr_isa_format(&c, hand[i].op, &f), TSR_OK);
        int found = 0;
        for (int k = 0; k < f.nfields; k++)
            if (!strcmp(f.fields[k].name, hand[i].field)) {
                found = 1;
                if (f.fields[k].lsb != hand[i].lsb || f.fields[k].width != hand[i].width)
                    fail_msg("default %s.%s: lsb %d width %d, want lsb %d width %d", f.name,
                             hand[i].field, f.fields[k].lsb, f.fields[k].width, hand[i].lsb,
                             hand[i].width);
            }
        if (!found)
            fail_msg("default %s: no field %s", f.name, hand[i].field);
    }
    /* Totals: MEM 7+3+13+32+48+16+8 = 127; GEMM 7+1+13+14+28+22+22+20+1 = 128 (DEPTHWISE 3);
     * ALU 7+1+13+14+28+22+22+4+1+16 = 128; FINISH 7. */
    static const struct {
        uint32_t op;
        int total;
    } tot[] = {{TSR_OP_LOAD, 127}, {TSR_OP_STORE, 127}, {TSR_OP_GEMM, 128}, {TSR_OP_ALU, 128},
               {TSR_OP_FINISH, 7}};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(tsr_isa_format(&c, tot[i].op, &f), TSR_OK);
        if (f.total_bits != tot[i].total)
            fail_msg("default %s: total_bits %d, want %d", f.name, f.total_bits, tot[i].total);
    }
    assert_int_equal(tsr_isa_format(&c, TSR_OP_ALU, &f), TSR_OK);
    for (int k = 0; k < f.nfields; k++)
        if (f.fields[k].is_signed != !strcmp(f.fields[k].name, "imm"))
            fail_msg("ALU.%s: is_signed %d", f.fields[k].name, f.fields[k].is_signed);
    /* Field maxima follow the hand layout above (dst_factor_out 11 bits, wgt_factor_in 10). */
    assert_int_equal(tsr_isa_field_max(&c, TSR_OP_GEMM, "dst_factor_out"), 2047);
    assert_int_equal(tsr_isa_field_max(&c, TSR_OP_GEMM, "wgt_factor_in"), 1023);
    assert_int_equal(tsr_isa_field_max(&c, TSR_OP_LOAD, "y_size"), 65535);
    assert_int_equal(tsr_isa_field_max(&c, TSR_OP_GEMM, "no_such_field"), 0);
    assert_int_equal(tsr_isa_field_max(&c, 7, "opcode"), 0);
    tsr_err_clear();
    assert_int_equal(tsr_isa_format(&c, 5, &f), TSR_EINVAL);
    assert_int_equal(tsr_isa_format(&c, 7, &f), TSR_EINVAL);
    assert_int_equal(tsr_isa_check_config(&c), TSR_OK);
}

static void test_layout_all_presets(void **state)
{
    (void)state;
    for (size_t p = 0; p < 3; p++) {
        tsr_config_t c;
        load_cfg(presets[p], &c);
        for (size_t o = 0; o < 5; o++)
            compare_layout(presets[p], &c, all_ops[o]);
    }
    /* Uneven buffers: 8-byte uops and inp/acc of different depths (GEMM src factors take the
     * inp width, ALU src factors the acc width). */
    static const char *const odd =
        "{\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":0,"
        "\"LOG_BLOCK_IN\":4,\"LOG_BLOCK_OUT\":3,\"LOG_UOP_BUFF_SIZE\":14,"
        "\"LOG_INP_BUFF_SIZE\":16,\"LOG_WGT_BUFF_SIZE\":16,\"LOG_ACC_BUFF_SIZE\":14}";
    tsr_config_t c;
    if (tsr_config_parse(odd, "odd", &c))
        fail_msg("odd: %s", tsr_errmsg());
    /* inp row 16 B -> 4096 rows (12); wgt row 8*16 = 128 B -> 512 (9); acc row 8*4 = 32 B ->
     * 512 (9); uop 9+12+9 = 30 bits -> 4 B, 2^14/4 = 4096 (12). */
    widths_t w = ref_widths(&c);
    assert_int_equal(w.I, 12);
    assert_int_equal(w.W, 9);
    assert_int_equal(w.A, 9);
    assert_int_equal(w.U, 12);
    for (size_t o = 0; o < 5; o++)
        compare_layout("odd", &c, all_ops[o]);
}

/* ---- encode / decode ---- */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    return tsr_splitmix64(&rng_state);
}

static uint64_t seed_from_env(void)
{
    const char *s = getenv("TSR_SEED");
    return s ? strtoull(s, NULL, 0) : 0x7e55e7a2024ull;
}

/* Field value in range for decode to accept (mem_type < 6, opcode fixed). */
static uint32_t rand_field(const ref_field_t *f, uint32_t op)
{
    if (!strcmp(f->name, "opcode"))
        return op;
    if (!strcmp(f->name, "mem_type"))
        return (uint32_t)(rnd() % TSR_MEM_COUNT);
    if (!strcmp(f->name, "alu_opcode"))
        return (uint32_t)(rnd() % TSR_ALU_COUNT);
    uint64_t v = rnd();
    /* Bias towards the extremes, where packing bugs show. */
    switch (v % 4) {
    case 0: v = 0; break;
    case 1: v = ~0ull; break;
    default: v = rnd(); break;
    }
    v &= f->width >= 64 ? ~0ull : (1ull << f->width) - 1;
    if (f->is_signed && f->width < 32 && (v >> (f->width - 1)) & 1)
        v |= ~0ull << f->width; /* sign-extend into int32 */
    return (uint32_t)v;
}

static void compare_insn(const char *what, const ref_fmt_t *r, const tsr_insn_t *want,
                         const tsr_insn_t *got)
{
    for (int i = 0; i < r->n; i++) {
        uint32_t a = getm(want, r->f[i].offset), b = getm(got, r->f[i].offset);
        if (a != b)
            fail_msg("%s: %s field %s decoded as %u (0x%x), want %u (0x%x)", what, r->name,
                     r->f[i].name, b, b, a, a);
    }
    /* Fields outside the format decode as zero. */
    tsr_insn_t z;
    memset(&z, 0, sizeof z);
    for (int i = 0; i < r->n; i++)
        setm(&z, r->f[i].offset, getm(got, r->f[i].offset));
    if (memcmp(&z, got, sizeof z))
        fail_msg("%s: decode set fields outside the %s format", what, r->name);
}

/* Encode in, check bits against the reference packer, decode back, compare. */
static void roundtrip(const char *what, const tsr_config_t *c, const ref_fmt_t *r,
                      const tsr_insn_t *in)
{
    tsr_insn_bits_t bits, want = ref_encode(r, in);
    tsr_insn_t out;
    int rc = tsr_insn_encode(c, in, &bits);
    if (rc)
        fail_msg("%s: encode: %s", what, tsr_errmsg());
    if (bits.w[0] != want.w[0] || bits.w[1] != want.w[1]) {
        /* Name the first field whose bits differ. */
        for (int i = 0; i < r->n; i++)
            for (int k = 0; k < r->f[i].width; k++) {
                int bit = r->f[i].lsb + k;
                if (((bits.w[bit / 64] ^ want.w[bit / 64]) >> (bit % 64)) & 1)
                    fail_msg("%s: %s bit %d (field %s bit %d) is %d, want %d; got %016llx%016llx "
                             "want %016llx%016llx",
                             what, r->name, bit, r->f[i].name, k,
                             (int)((bits.w[bit / 64] >> (bit % 64)) & 1),
                             (int)((want.w[bit / 64] >> (bit % 64)) & 1),
                             (unsigned long long)bits.w[1], (unsigned long long)bits.w[0],
                             (unsigned long long)want.w[1], (unsigned long long)want.w[0]);
            }
        fail_msg("%s: reserved bits set: got %016llx%016llx want %016llx%016llx", what,
                 (unsigned long long)bits.w[1], (unsigned long long)bits.w[0],
                 (unsigned long long)want.w[1], (unsigned long long)want.w[0]);
    }
    memset(&out, 0xa5, sizeof out);
    rc = tsr_insn_decode(c, &bits, &out);
    if (rc)
        fail_msg("%s: decode: %s", what, tsr_errmsg());
    compare_insn(what, r, in, &out);
    /* Byte serialisation round trip. */
    uint8_t bytes[TSR_INSN_BYTES];
    tsr_insn_bits_t back;
    tsr_insn_bits_store(&bits, bytes);
    for (int i = 0; i < TSR_INSN_BYTES; i++)
        if (bytes[i] != (uint8_t)(bits.w[i / 8] >> (8 * (i % 8))))
            fail_msg("%s: byte %d not little-endian", what, i);
    tsr_insn_bits_load(bytes, &back);
    if (back.w[0] != bits.w[0] || back.w[1] != bits.w[1])
        fail_msg("%s: bits_load(bits_store(x)) != x", what);
}

static void test_roundtrip(void **state)
{
    (void)state;
    uint64_t seed = seed_from_env();
    rng_state = seed;
    for (size_t p = 0; p < 3; p++) {
        tsr_config_t c;
        load_cfg(presets[p], &c);
        for (size_t o = 0; o < 5; o++) {
            uint32_t op = all_ops[o];
            ref_fmt_t r;
            ref_layout(&c, op, &r);
            char what[160];
            tsr_insn_t in;

            memset(&in, 0, sizeof in);
            in.opcode = op;
            snprintf(what, sizeof what, "%s %s all-zero", presets[p], r.name);
            roundtrip(what, &c, &r, &in);

            /* All fields at max (imm at max, then min; mem_type and alu_opcode at their
             * largest valid values). */
            for (int variant = 0; variant < 2; variant++) {
                memset(&in, 0, sizeof in);
                for (int i = 0; i < r.n; i++) {
                    const ref_field_t *f = &r.f[i];
                    uint32_t v = f->width >= 32 ? 0xffffffffu : (1u << f->width) - 1;
                    if (f->is_signed)
                        v = variant ? (uint32_t)(-(1 << (f->width - 1)))
                                    : (uint32_t)((1 << (f->width - 1)) - 1);
                    setm(&in, f->offset, v);
                }
                in.opcode = op;
                if (op == TSR_OP_LOAD || op == TSR_OP_STORE)
                    in.mem_type = TSR_MEM_ACC8;
                if (op == TSR_OP_ALU)
                    in.alu_opcode = TSR_ALU_COUNT - 1;
                snprintf(what, sizeof what, "%s %s all-max%s", presets[p], r.name,
                         variant ? " (imm min)" : "");
                roundtrip(what, &c, &r, &in);
            }

            for (int n = 0; n < 2000; n++) {
                memset(&in, 0, sizeof in);
                for (int i = 0; i < r.n; i++)
                    setm(&in, r.f[i].offset, rand_field(&r.f[i], op));
                snprintf(what, sizeof what, "%s %s random #%d (seed 0x%llx, TSR_SEED to replay)",
                         presets[p], r.name, n, (unsigned long long)seed);
                roundtrip(what, &c, &r, &in);
            }
        }
    }
}

/* Each field set to 1 alone flips exactly bit lsb (positions without the decoder). */
static void test_single_bit(void **state)
{
    (void)state;
    for (size_t p = 0; p < 3; p++) {
        tsr_config_t c;
        load_cfg(presets[p], &c);
        for (size_t o = 0; o < 5; o++) {
            uint32_t op = all_ops[o];
            ref_fmt_t r;
            ref_layout(&c, op, &r);
            tsr_insn_t base;
            tsr_insn_bits_t b0, b1;
            memset(&base, 0, sizeof base);
            base.opcode = op;
            assert_int_equal(tsr_insn_encode(&c, &base, &b0), TSR_OK);
            for (int i = 0; i < r.n; i++) {
                tsr_insn_t in = base;
                if (!strcmp(r.f[i].name, "opcode")) {
                    /* Only LOAD (0) -> STORE (1) keeps the format; compare against bit 0. */
                    if (op != TSR_OP_LOAD)
                        continue;
                    in.opcode = TSR_OP_STORE;
                } else {
                    setm(&in, r.f[i].offset, 1);
                }
                if (tsr_insn_encode(&c, &in, &b1))
                    fail_msg("%s %s.%s = 1: %s", presets[p], r.name, r.f[i].name, tsr_errmsg());
                uint64_t d0 = b0.w[0] ^ b1.w[0], d1 = b0.w[1] ^ b1.w[1];
                int lsb = r.f[i].lsb;
                uint64_t e0 = lsb < 64 ? 1ull << lsb : 0, e1 = lsb >= 64 ? 1ull << (lsb - 64) : 0;
                if (d0 != e0 || d1 != e1)
                    fail_msg("%s %s.%s = 1 flips %016llx%016llx, want only bit %d", presets[p],
                             r.name, r.f[i].name, (unsigned long long)d1, (unsigned long long)d0,
                             lsb);
            }
        }
    }
}

static void test_encode_bounds(void **state)
{
    (void)state;
    for (size_t p = 0; p < 3; p++) {
        tsr_config_t c;
        load_cfg(presets[p], &c);
        for (size_t o = 0; o < 5; o++) {
            uint32_t op = all_ops[o];
            ref_fmt_t r;
            ref_layout(&c, op, &r);
            tsr_insn_bits_t b;
            for (int i = 0; i < r.n; i++) {
                const ref_field_t *f = &r.f[i];
                if (!strcmp(f->name, "opcode") || f->width >= 32)
                    continue;
                int nv = f->is_signed ? 2 : 1;
                for (int k = 0; k < nv; k++) {
                    tsr_insn_t in;
                    memset(&in, 0, sizeof in);
                    in.opcode = op;
                    uint32_t v = f->is_signed ? (k ? (uint32_t)(-(1 << (f->width - 1)) - 1)
                                                   : (uint32_t)(1u << (f->width - 1)))
                                              : 1u << f->width;
                    setm(&in, f->offset, v);
                    tsr_err_clear();
                    int rc = tsr_insn_encode(&c, &in, &b);
                    if (rc != TSR_EBOUNDS)
                        fail_msg("%s %s.%s = %d: got %s, want EBOUNDS", presets[p], r.name,
                                 f->name, (int)v, tsr_errname(rc));
                    char what[96];
                    snprintf(what, sizeof what, "%s %s.%s out of range", presets[p], r.name,
                             f->name);
                    expect_has(what, f->name);
                    /* One below is fine (unsigned max / signed min and max). */
                    setm(&in, f->offset,
                         f->is_signed ? (k ? (uint32_t)(-(1 << (f->width - 1)))
                                           : (uint32_t)((1u << (f->width - 1)) - 1))
                                      : (1u << f->width) - 1);
                    if (!strcmp(f->name, "mem_type") || !strcmp(f->name, "alu_opcode"))
                        continue; /* the field's max is not a valid value; test_decode_rejects */
                    if (tsr_insn_encode(&c, &in, &b))
                        fail_msg("%s: max value rejected: %s", what, tsr_errmsg());
                }
            }
        }
    }
    /* Bad opcode. */
    tsr_config_t c;
    load_cfg("default", &c);
    tsr_insn_t in;
    tsr_insn_bits_t b;
    memset(&in, 0, sizeof in);
    in.opcode = 5;
    assert_true(tsr_insn_encode(&c, &in, &b) < 0);
}

static void test_decode_rejects(void **state)
{
    (void)state;
    for (size_t p = 0; p < 3; p++) {
        tsr_config_t c;
        load_cfg(presets[p], &c);
        tsr_insn_t out;
        tsr_insn_bits_t b;
        char what[96];
        for (uint32_t op = 5; op < 8; op++) {
            b.w[0] = op;
            b.w[1] = 0;
            tsr_err_clear();
            int rc = tsr_insn_decode(&c, &b, &out);
            if (rc != TSR_EINVAL || !tsr_errmsg()[0])
                fail_msg("%s: opcode %u: got %s \"%s\", want EINVAL with a message", presets[p],
                         op, tsr_errname(rc), tsr_errmsg());
        }
        ref_fmt_t r;
        ref_layout(&c, TSR_OP_LOAD, &r);
        for (uint32_t op = 0; op < 2; op++)
            for (uint32_t mt = 0; mt < 8; mt++) {
                b.w[0] = op | (uint64_t)mt << 7;
                b.w[1] = 0;
                tsr_err_clear();
                int rc = tsr_insn_decode(&c, &b, &out);
                int want = mt < TSR_MEM_COUNT ? TSR_OK : TSR_EINVAL;
                if (rc != want || (rc && !tsr_errmsg()[0]))
                    fail_msg("%s: opcode %u mem_type %u: got %s \"%s\", want %s", presets[p], op,
                             mt, tsr_errname(rc), tsr_errmsg(), tsr_errname(want));
                if (!rc && out.mem_type != mt)
                    fail_msg("%s: mem_type %u decoded as %u", presets[p], mt, out.mem_type);
            }
        /* ALU ops past the last one: the 4-bit field holds 16 values, 9 are ops
         * (the fuzz_decode_verify finding: op 13 decoded, then disasm failed). */
        ref_layout(&c, TSR_OP_ALU, &r);
        for (uint32_t aop = 0; aop < 16; aop++) {
            tsr_insn_t in;
            memset(&in, 0, sizeof in);
            in.opcode = TSR_OP_ALU;
            in.alu_opcode = aop;
            b = ref_encode(&r, &in);
            tsr_err_clear();
            int rc = tsr_insn_decode(&c, &b, &out);
            int want = aop < TSR_ALU_COUNT ? TSR_OK : TSR_EINVAL;
            if (rc != want || (rc && !strstr(tsr_errmsg(), "ALU op")))
                fail_msg("%s: ALU op %u: decode got %s \"%s\", want %s", presets[p], aop,
                         tsr_errname(rc), tsr_errmsg(), tsr_errname(want));
            tsr_insn_bits_t e;
            rc = tsr_insn_encode(&c, &in, &e);
            want = aop < TSR_ALU_COUNT ? TSR_OK : TSR_EBOUNDS;
            if (rc != want)
                fail_msg("%s: ALU op %u: encode got %s \"%s\", want %s", presets[p], aop,
                         tsr_errname(rc), tsr_errmsg(), tsr_errname(want));
        }
        /* Every reserved bit above total_bits, for every format. */
        for (size_t o = 0; o < 5; o++) {
            ref_layout(&c, all_ops[o], &r);
            for (int bit = r.total; bit < 128; bit++) {
                b.w[0] = all_ops[o];
                b.w[1] = 0;
                b.w[bit / 64] |= 1ull << (bit % 64);
                tsr_err_clear();
                int rc = tsr_insn_decode(&c, &b, &out);
                snprintf(what, sizeof what, "%s %s reserved bit %d", presets[p], r.name, bit);
                if (rc != TSR_EINVAL || !tsr_errmsg()[0])
                    fail_msg("%s: got %s \"%s\", want EINVAL with a message", what,
                             tsr_errname(rc), tsr_errmsg());
            }
            /* The highest used bit is not reserved. */
            b.w[0] = all_ops[o];
            b.w[1] = 0;
            if (r.total > 7) {
                int bit = r.total - 1;
                b.w[bit / 64] |= 1ull << (bit % 64);
                if (tsr_insn_decode(&c, &b, &out))
                    fail_msg("%s %s: top field bit %d rejected: %s", presets[p], r.name, bit,
                             tsr_errmsg());
            }
        }
    }
}

/* ---- uops ---- */

/* Field f of b, bit by bit (sign-extended into 32 bits where signed). */
static uint32_t ref_get(const tsr_insn_bits_t *b, const ref_field_t *f)
{
    uint64_t v = 0;
    for (int k = 0; k < f->width; k++) {
        int bit = f->lsb + k;
        v |= ((b->w[bit / 64] >> (bit % 64)) & 1) << k;
    }
    if (f->is_signed && (v >> (f->width - 1)) & 1)
        v |= ~0ull << f->width;
    return (uint32_t)v;
}

/* Whether encode must take in (op's format r): every field fits its bits,
 * the memory type and ALU op exist, no depthwise bit without the key. */
static int ref_fits(const tsr_config_t *c, const ref_fmt_t *r, const tsr_insn_t *in)
{
    for (int i = 0; i < r->n; i++) {
        const ref_field_t *f = &r->f[i];
        uint32_t v = getm(in, f->offset);
        if (f->is_signed) {
            int64_t s = (int32_t)v;
            if (s < -(1ll << (f->width - 1)) || s >= (1ll << (f->width - 1)))
                return 0;
        } else if (f->width < 32 && v >> f->width) {
            return 0;
        }
    }
    if ((in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE) && in->mem_type >= TSR_MEM_COUNT)
        return 0;
    if (in->opcode == TSR_OP_ALU && in->alu_opcode >= TSR_ALU_COUNT)
        return 0;
    return !(in->opcode == TSR_OP_GEMM && in->depthwise && !c->depthwise);
}

/* Any 32-bit value in any member (also the members outside the format,
 * which encode ignores): encode succeeds exactly when ref_fits, with the
 * reference packer's bits, else fails EBOUNDS naming it; decode of any 128
 * bits succeeds exactly when the bits above the format are clear and the
 * memory type / ALU op exist, with the fields unpacked bit by bit, else
 * fails EINVAL naming it. (The library's fast paths fall back to the
 * field-by-field ones on a failed check: this holds both to the reference.) */
static void test_any_words(void **state)
{
    (void)state;
    rng_state = seed_from_env() ^ 0x5eedull;
    for (size_t p = 0; p < 4; p++) {
        tsr_config_t c;
        load_cfg(presets[p % 3], &c);
        if (p == 3)
            c.depthwise = 3; /* (the format's optional last field) */
        int ok_enc = 0, ok_dec = 0;
        for (int n = 0; n < 20000; n++) {
            const uint32_t op = (uint32_t)(rnd() % TSR_OP_COUNT);
            ref_fmt_t r;
            ref_layout(&c, op, &r);
            tsr_insn_t in;
            for (size_t k = 0; k + 4 <= sizeof in; k += 4)
                setm(&in, k, (uint32_t)rnd());
            for (int i = 0; i < r.n; i++)
                if (rnd() % 16)
                    setm(&in, r.f[i].offset, rand_field(&r.f[i], op));
            in.opcode = op;
            if (rnd() % 4)
                in.depthwise = 0;
            char what[160];
            snprintf(what, sizeof what, "%s%s %s #%d (seed 0x%llx)", presets[p % 3], p == 3 ? "+dw" : "", r.name,
                     n, (unsigned long long)seed_from_env());
            tsr_insn_bits_t bits;
            tsr_err_clear();
            int rc = tsr_insn_encode(&c, &in, &bits);
            if (ref_fits(&c, &r, &in)) {
                tsr_insn_bits_t want = ref_encode(&r, &in);
                if (rc || bits.w[0] != want.w[0] || bits.w[1] != want.w[1])
                    fail_msg("%s: encode rc %d (%s), bits %016llx%016llx, want %016llx%016llx", what, rc,
                             tsr_errmsg(), (unsigned long long)bits.w[1], (unsigned long long)bits.w[0],
                             (unsigned long long)want.w[1], (unsigned long long)want.w[0]);
                ok_enc++;
            } else if (rc != TSR_EBOUNDS || !tsr_errmsg()[0]) {
                fail_msg("%s: encode of a value that does not fit: rc %d \"%s\", want EBOUNDS", what, rc,
                         tsr_errmsg());
            }
            tsr_insn_bits_t b = {{rnd(), rnd()}};
            b.w[0] = (b.w[0] & ~7ull) | op;
            if (rnd() % 2) { /* clear the reserved bits */
                for (int bit = r.total; bit < TSR_INSN_BITS; bit++)
                    b.w[bit / 64] &= ~(1ull << (bit % 64));
            }
            int reserved = 0;
            for (int bit = r.total; bit < TSR_INSN_BITS; bit++)
                reserved |= (int)((b.w[bit / 64] >> (bit % 64)) & 1);
            tsr_insn_t want, out;
            memset(&want, 0, sizeof want);
            for (int i = 0; i < r.n; i++)
                setm(&want, r.f[i].offset, ref_get(&b, &r.f[i]));
            const int valid = !reserved &&
                              !((op == TSR_OP_LOAD || op == TSR_OP_STORE) && want.mem_type >= TSR_MEM_COUNT) &&
                              !(op == TSR_OP_ALU && want.alu_opcode >= TSR_ALU_COUNT);
            tsr_err_clear();
            rc = tsr_insn_decode(&c, &b, &out);
            if (valid) {
                if (rc)
                    fail_msg("%s: decode of %016llx%016llx: %s", what, (unsigned long long)b.w[1],
                             (unsigned long long)b.w[0], tsr_errmsg());
                compare_insn(what, &r, &want, &out);
                ok_dec++;
            } else if (rc != TSR_EINVAL || !tsr_errmsg()[0]) {
                fail_msg("%s: decode of malformed %016llx%016llx: rc %d, want EINVAL", what,
                         (unsigned long long)b.w[1], (unsigned long long)b.w[0], rc);
            }
        }
        /* (both outcomes drawn often) */
        assert_true(ok_enc > 2000 && ok_enc < 18000);
        assert_true(ok_dec > 2000 && ok_dec < 18000);
    }
}

static void test_uop(void **state)
{
    (void)state;
    uint64_t seed = seed_from_env();
    rng_state = seed ^ 0x55;
    for (size_t p = 0; p < 3; p++) {
        tsr_config_t c;
        load_cfg(presets[p], &c);
        widths_t w = ref_widths(&c);
        uint64_t lim = c.uop_bytes == 4 ? 0xffffffffull : ~0ull;
        for (int n = 0; n < 5000; n++) {
            tsr_uop_t u, v;
            u.dst = (uint32_t)(n == 0 ? 0 : n == 1 ? ~0u : rnd()) & ((1u << w.ud) - 1);
            u.src = (uint32_t)(n == 0 ? 0 : n == 1 ? ~0u : rnd()) & ((1u << w.us) - 1);
            u.wgt = (uint32_t)(n == 0 ? 0 : n == 1 ? ~0u : rnd()) & ((1u << w.uw) - 1);
            uint64_t raw = 0;
            uint64_t want = u.dst | (uint64_t)u.src << w.ud | (uint64_t)u.wgt << (w.ud + w.us);
            if (tsr_uop_encode(&c, &u, &raw))
                fail_msg("%s uop %d: %s", presets[p], n, tsr_errmsg());
            if (raw != want || raw > lim)
                fail_msg("%s uop {%u,%u,%u}: raw 0x%llx, want 0x%llx (seed 0x%llx)", presets[p],
                         u.dst, u.src, u.wgt, (unsigned long long)raw, (unsigned long long)want,
                         (unsigned long long)seed);
            tsr_uop_decode(&c, raw, &v);
            if (v.dst != u.dst || v.src != u.src || v.wgt != u.wgt)
                fail_msg("%s uop {%u,%u,%u} decoded {%u,%u,%u}", presets[p], u.dst, u.src, u.wgt,
                         v.dst, v.src, v.wgt);
        }
        static const char *const names[] = {"dst", "src", "wgt"};
        int widths[3] = {w.ud, w.us, w.uw};
        for (int k = 0; k < 3; k++) {
            tsr_uop_t u = {0, 0, 0};
            uint32_t *fld = k == 0 ? &u.dst : k == 1 ? &u.src : &u.wgt;
            *fld = 1u << widths[k];
            uint64_t raw;
            tsr_err_clear();
            int rc = tsr_uop_encode(&c, &u, &raw);
            if (rc != TSR_EBOUNDS)
                fail_msg("%s uop %s = %u: got %s, want EBOUNDS", presets[p], names[k], *fld,
                         tsr_errname(rc));
            char what[64];
            snprintf(what, sizeof what, "%s uop %s out of range", presets[p], names[k]);
            expect_has(what, names[k]);
            *fld = 0xffffffffu;
            if (tsr_uop_encode(&c, &u, &raw) != TSR_EBOUNDS)
                fail_msg("%s uop %s = 0xffffffff accepted", presets[p], names[k]);
        }
    }
}

static void test_stage_and_names(void **state)
{
    (void)state;
    tsr_insn_t in;
    memset(&in, 0, sizeof in);
    static const struct {
        uint32_t op, mem;
        int stage;
    } st[] = {
        {TSR_OP_LOAD, TSR_MEM_INP, TSR_STAGE_LOAD},     {TSR_OP_LOAD, TSR_MEM_WGT, TSR_STAGE_LOAD},
        {TSR_OP_LOAD, TSR_MEM_UOP, TSR_STAGE_COMPUTE},  {TSR_OP_LOAD, TSR_MEM_ACC, TSR_STAGE_COMPUTE},
        {TSR_OP_LOAD, TSR_MEM_ACC8, TSR_STAGE_COMPUTE}, {TSR_OP_LOAD, TSR_MEM_LUT, TSR_STAGE_COMPUTE},
        {TSR_OP_GEMM, 0, TSR_STAGE_COMPUTE},
        {TSR_OP_ALU, 0, TSR_STAGE_COMPUTE},             {TSR_OP_FINISH, 0, TSR_STAGE_COMPUTE},
        {TSR_OP_STORE, TSR_MEM_OUT, TSR_STAGE_STORE},
    };
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        in.opcode = st[i].op;
        in.mem_type = st[i].mem;
        if ((int)tsr_insn_stage(&in) != st[i].stage)
            fail_msg("stage of op %u mem %u: %d, want %d", st[i].op, st[i].mem,
                     (int)tsr_insn_stage(&in), st[i].stage);
    }
    static const char *const ops[] = {"load", "store", "gemm", "finish", "alu"};
    for (uint32_t i = 0; i < 5; i++)
        assert_string_equal(tsr_opcode_name(i), ops[i]);
    assert_null(tsr_opcode_name(5));
    static const char *const mems[] = {"uop", "wgt", "inp", "acc", "out", "acc8", "lut"};
    for (uint32_t i = 0; i < 7; i++)
        assert_string_equal(tsr_mem_name(i), mems[i]);
    assert_null(tsr_mem_name(7));
    static const char *const alus[] = {"min", "max", "add", "shr", "mul", "mov", "rshr", "mulhr", "rqfin", "fscale",
                                       "lut"};
    for (uint32_t i = 0; i < 11; i++)
        assert_string_equal(tsr_alu_name(i), alus[i]);
    assert_null(tsr_alu_name(11));
    /* the alu_opcode field's description (isa/fields.md) names every op with its id */
    {
        tsr_config_t dc;
        tsr_format_t fm;
        assert_int_equal(tsr_config_load("default", &dc), TSR_OK);
        assert_int_equal(tsr_isa_format(&dc, TSR_OP_ALU, &fm), TSR_OK);
        const char *desc = NULL;
        for (int i = 0; i < fm.nfields; i++)
            if (!strcmp(fm.fields[i].name, "alu_opcode"))
                desc = fm.fields[i].desc;
        assert_non_null(desc);
        for (uint32_t op = 0; op < TSR_ALU_COUNT; op++) {
            char want[32];
            snprintf(want, sizeof want, "%s %u", tsr_alu_name(op), op);
            if (!strstr(desc, want))
                fail_msg("alu_opcode's description \"%s\" lacks \"%s\"", desc, want);
        }
    }
    assert_string_equal(tsr_stage_name(0), "load");
    assert_string_equal(tsr_stage_name(1), "compute");
    assert_string_equal(tsr_stage_name(2), "store");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_default_by_hand),
        cmocka_unit_test(test_layout_all_presets),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_single_bit),
        cmocka_unit_test(test_encode_bounds),
        cmocka_unit_test(test_decode_rejects),
        cmocka_unit_test(test_any_words),
        cmocka_unit_test(test_uop),
        cmocka_unit_test(test_stage_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
