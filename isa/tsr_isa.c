/*
 * tsr_isa: the instruction field table, encoder/decoder, uop packing and
 * ALU semantics (see tsr_isa.h and isa/semantics.md).
 *
 * Formats are described as ordered field lists whose widths come from the
 * config; positions are assigned by packing from bit 0. This single table
 * drives encode, decode, the generated SystemVerilog package and the spec.
 */
#include "tsr_isa.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tsr_error.h"

#define F(member) offsetof(tsr_insn_t, member)

/* Width selectors, resolved against a config. */
enum { W_FIX, W_SRAM, W_UOP, W_UOP1, W_ACC, W_INP, W_WGT, W_DW };

typedef struct {
    const char *name;
    size_t offset;
    int wsel;      /* width selector */
    int fixed;     /* width for W_FIX */
    int is_signed;
    const char *desc;
} field_spec_t;

static const field_spec_t hdr[] = {
    {"opcode", F(opcode), W_FIX, 3, 0, "LOAD 0, STORE 1, GEMM 2, FINISH 3, ALU 4"},
    {"pop_prev", F(pop_prev), W_FIX, 1, 0, "wait for a token from the previous stage"},
    {"pop_next", F(pop_next), W_FIX, 1, 0, "wait for a token from the next stage"},
    {"push_prev", F(push_prev), W_FIX, 1, 0, "send a token to the previous stage when done"},
    {"push_next", F(push_next), W_FIX, 1, 0, "send a token to the next stage when done"},
};

static const field_spec_t mem_fields[] = {
    {"mem_type", F(mem_type), W_FIX, 3, 0, "uop 0, wgt 1, inp 2, acc 3, out 4, acc8 5, lut 6"},
    {"sram_base", F(sram_base), W_SRAM, 0, 0, "first on-chip row"},
    {"dram_base", F(dram_base), W_FIX, TSR_DRAM_BASE_BITS, 0,
     "first DRAM element (byte address / element bytes)"},
    {"y_size", F(y_size), W_FIX, TSR_SIZE_BITS, 0, "rows"},
    {"x_size", F(x_size), W_FIX, TSR_SIZE_BITS, 0, "elements per row (0: no transfer)"},
    {"x_stride", F(x_stride), W_FIX, TSR_SIZE_BITS, 0, "DRAM elements between row starts"},
    {"y_pad0", F(y_pad0), W_FIX, TSR_PAD_BITS, 0, "zero rows before (LOAD only)"},
    {"y_pad1", F(y_pad1), W_FIX, TSR_PAD_BITS, 0, "zero rows after (LOAD only)"},
    {"x_pad0", F(x_pad0), W_FIX, TSR_PAD_BITS, 0, "zero elements before each row (LOAD only)"},
    {"x_pad1", F(x_pad1), W_FIX, TSR_PAD_BITS, 0, "zero elements after each row (LOAD only)"},
    {"pad_value", F(pad_value), W_FIX, TSR_PAD_VALUE_BITS, 1,
     "value of each lane of a padded inp element (LOAD inp only; 0 otherwise)"},
};

#define LOOP_FIELDS                                                                                \
    {"reset", F(reset), W_FIX, 1, 0, "write zeros to acc[dst] instead of computing"},             \
    {"uop_bgn", F(uop_bgn), W_UOP, 0, 0, "first uop"},                                          \
    {"uop_end", F(uop_end), W_UOP1, 0, 0, "one past the last uop"},                             \
    {"iter_out", F(iter_out), W_FIX, TSR_LOOP_BITS, 0, "outer loop extent"},                    \
    {"iter_in", F(iter_in), W_FIX, TSR_LOOP_BITS, 0, "inner loop extent"},                      \
    {"dst_factor_out", F(dst_factor_out), W_ACC, 0, 0, "acc row step per outer iteration"},     \
    {"dst_factor_in", F(dst_factor_in), W_ACC, 0, 0, "acc row step per inner iteration"}

static const field_spec_t gemm_fields[] = {
    LOOP_FIELDS,
    {"src_factor_out", F(src_factor_out), W_INP, 0, 0, "inp row step per outer iteration"},
    {"src_factor_in", F(src_factor_in), W_INP, 0, 0, "inp row step per inner iteration"},
    {"wgt_factor_out", F(wgt_factor_out), W_WGT, 0, 0, "wgt row step per outer iteration"},
    {"wgt_factor_in", F(wgt_factor_in), W_WGT, 0, 0, "wgt row step per inner iteration"},
    /* last, and only with the key: every config without it keeps its layout */
    {"depthwise", F(depthwise), W_DW, 0, 0,
     "acc[dst][b][c] += sum over k < DEPTHWISE of inp[src+k][b][c] * wgt[wgt / G][(wgt mod G) * DEPTHWISE + k][c], "
     "G tap groups per weight row: the wgt index and factors count groups (config key DEPTHWISE > 0 only)"},
};

static const field_spec_t alu_fields[] = {
    LOOP_FIELDS,
    {"src_factor_out", F(src_factor_out), W_ACC, 0, 0, "acc src row step per outer iteration"},
    {"src_factor_in", F(src_factor_in), W_ACC, 0, 0, "acc src row step per inner iteration"},
    {"alu_opcode", F(alu_opcode), W_FIX, TSR_ALU_OP_BITS, 0,
     "min 0, max 1, add 2, shr 3, mul 4, mov 5, rshr 6, mulhr 7, rqfin 8, fscale 9, lut 10"},
    {"use_imm", F(use_imm), W_FIX, 1, 0, "operand b is imm instead of acc[src]"},
    {"imm", F(imm), W_FIX, TSR_IMM_BITS, 1, "signed immediate operand"},
};

static int nz(int bits) { return bits > 0 ? bits : 1; }

static int resolve_width(const tsr_config_t *c, const field_spec_t *s)
{
    switch (s->wsel) {
    case W_SRAM: return c->sram_base_bits;
    case W_UOP: return nz(c->uop_idx_bits);
    case W_UOP1: return c->uop_idx_bits + 1;
    case W_ACC: return nz(c->acc_idx_bits);
    case W_INP: return nz(c->inp_idx_bits);
    case W_WGT: return nz(c->wgt_idx_bits);
    case W_DW: return c->depthwise > 0; /* 0: the field does not exist */
    default: return s->fixed;
    }
}

static void append(const tsr_config_t *c, tsr_format_t *fmt, const field_spec_t *specs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!resolve_width(c, &specs[i]))
            continue; /* an optional field its config key leaves out */
        tsr_field_t *f = &fmt->fields[fmt->nfields++];
        f->name = specs[i].name;
        f->offset = specs[i].offset;
        f->width = resolve_width(c, &specs[i]);
        f->lsb = fmt->total_bits;
        f->is_signed = specs[i].is_signed;
        f->derived = specs[i].wsel != W_FIX;
        f->desc = specs[i].desc;
        fmt->total_bits += f->width;
    }
}

int tsr_isa_format(const tsr_config_t *cfg, uint32_t opcode, tsr_format_t *fmt)
{
    memset(fmt, 0, sizeof *fmt);
    append(cfg, fmt, hdr, sizeof hdr / sizeof hdr[0]);
    switch (opcode) {
    case TSR_OP_LOAD:
    case TSR_OP_STORE:
        fmt->name = "MEM";
        append(cfg, fmt, mem_fields, sizeof mem_fields / sizeof mem_fields[0]);
        break;
    case TSR_OP_GEMM:
        fmt->name = "GEMM";
        append(cfg, fmt, gemm_fields, sizeof gemm_fields / sizeof gemm_fields[0]);
        break;
    case TSR_OP_ALU:
        fmt->name = "ALU";
        append(cfg, fmt, alu_fields, sizeof alu_fields / sizeof alu_fields[0]);
        break;
    case TSR_OP_FINISH:
        fmt->name = "FINISH";
        break;
    default:
        return tsr_err(TSR_EINVAL, "invalid opcode %u", opcode);
    }
    if (fmt->total_bits > TSR_INSN_BITS)
        return tsr_err(TSR_ECONFIG,
                       "inconsistent buffer sizes: the %s instruction format needs %d bits, more "
                       "than %d (reduce the buffer depths)",
                       fmt->name, fmt->total_bits, TSR_INSN_BITS);
    return TSR_OK;
}

long tsr_isa_field_max(const tsr_config_t *cfg, uint32_t opcode, const char *name)
{
    tsr_format_t f;
    if (tsr_isa_format(cfg, opcode, &f))
        return 0;
    for (int i = 0; i < f.nfields; i++)
        if (!strcmp(f.fields[i].name, name))
            return f.fields[i].width >= 31 ? 0x7fffffffL : (1L << f.fields[i].width) - 1;
    return 0;
}

int tsr_isa_check_config(const tsr_config_t *cfg)
{
    static const uint32_t ops[] = {TSR_OP_LOAD, TSR_OP_GEMM, TSR_OP_ALU, TSR_OP_FINISH};
    tsr_format_t fmt;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int rc = tsr_isa_format(cfg, ops[i], &fmt);
        if (rc)
            return rc;
    }
    return TSR_OK;
}

/* Bits [lsb, lsb + width) of b, width <= 64 (one or two words, not bit by bit:
 * encode and decode run once per instruction of every submission). */
static uint64_t get_bits(const tsr_insn_bits_t *b, int lsb, int width)
{
    const int w = lsb >> 6, s = lsb & 63;
    uint64_t v = b->w[w] >> s;
    if (s && s + width > 64)
        v |= b->w[w + 1] << (64 - s);
    return width < 64 ? v & ((1ull << width) - 1) : v;
}

static void set_bits(tsr_insn_bits_t *b, int lsb, int width, uint64_t v)
{
    const int w = lsb >> 6, s = lsb & 63;
    if (width < 64)
        v &= (1ull << width) - 1;
    b->w[w] |= v << s;
    if (s && s + width > 64)
        b->w[w + 1] |= v >> (64 - s);
}

/* The formats of the last config seen by this thread: a format depends on
 * the config only through these widths, so a config with the same ones
 * reuses them (building one was most of an encode or decode). */
/* A field as encode and decode use it: the member, the word and shift of
 * its bit 0, its mask, a second word's shift when it straddles the 64-bit
 * boundary (0: it does not), and its sign bit (0: unsigned). */
typedef struct {
    uint32_t offset;
    uint8_t word, shift, hi_shift;
    uint64_t mask, sign;
} cfield_t;

typedef struct {
    int n;
    uint64_t reserved[2]; /* the bits above total_bits (must be zero) */
    cfield_t f[TSR_MAX_FIELDS];
} cformat_t;

typedef struct {
    int key[6];                    /* the widths resolve_width reads */
    int valid;                     /* the entries below are for key */
    int rc[TSR_OP_COUNT];          /* tsr_isa_format's result per opcode */
    tsr_format_t fmt[TSR_OP_COUNT];
    cformat_t cf[TSR_OP_COUNT];    /* fmt[k] compiled (where rc[k] is 0) */
} fmt_cache_t;

static _Thread_local fmt_cache_t fcache;

static void compile_format(const tsr_format_t *fmt, cformat_t *cf)
{
    cf->n = fmt->nfields;
    for (int i = 0; i < fmt->nfields; i++) {
        const tsr_field_t *f = &fmt->fields[i];
        cfield_t *c = &cf->f[i];
        c->offset = (uint32_t)f->offset;
        c->word = (uint8_t)(f->lsb >> 6);
        c->shift = (uint8_t)(f->lsb & 63);
        c->hi_shift = c->shift && c->shift + f->width > 64 ? (uint8_t)(64 - c->shift) : 0;
        c->mask = f->width < 64 ? (1ull << f->width) - 1 : ~0ull;
        c->sign = f->is_signed ? 1ull << (f->width - 1) : 0;
    }
    cf->reserved[0] = fmt->total_bits >= 64 ? 0 : ~0ull << fmt->total_bits;
    cf->reserved[1] = fmt->total_bits <= 64 ? ~0ull : fmt->total_bits >= 128 ? 0 : ~0ull << (fmt->total_bits - 64);
}

/* The format of opcode op under cfg (op < TSR_OP_COUNT) in *out, or the
 * error tsr_isa_format gives. */
static int format_of(const tsr_config_t *cfg, uint32_t op, const tsr_format_t **out)
{
    const int key[6] = {cfg->sram_base_bits, cfg->uop_idx_bits, cfg->acc_idx_bits, cfg->inp_idx_bits,
                        cfg->wgt_idx_bits, cfg->depthwise > 0};
    if (!fcache.valid || memcmp(fcache.key, key, sizeof key)) {
        for (uint32_t k = 0; k < TSR_OP_COUNT; k++)
            if (!(fcache.rc[k] = tsr_isa_format(cfg, k, &fcache.fmt[k])))
                compile_format(&fcache.fmt[k], &fcache.cf[k]);
        memcpy(fcache.key, key, sizeof key);
        fcache.valid = 1;
    }
    if (fcache.rc[op]) {
        tsr_format_t f;
        return tsr_isa_format(cfg, op, &f); /* (its message) */
    }
    *out = &fcache.fmt[op];
    return TSR_OK;
}

static uint32_t *member(tsr_insn_t *in, size_t off) { return (uint32_t *)((char *)in + off); }
static const uint32_t *cmember(const tsr_insn_t *in, size_t off)
{
    return (const uint32_t *)((const char *)in + off);
}

/* The encoder field by field, with its range checks' messages: what the
 * fast one below falls back to when a check fails. */
static int encode_slow(const tsr_config_t *cfg, const tsr_insn_t *in, tsr_insn_bits_t *out)
{
    memset(out, 0, sizeof *out);
    if (in->opcode >= TSR_OP_COUNT)
        return tsr_err(TSR_EINVAL, "invalid opcode %u", in->opcode);
    const tsr_format_t *fmt = NULL;
    int rc = format_of(cfg, in->opcode, &fmt);
    if (rc)
        return rc;
    /* (the one optional field: without its key the format has no bit for it) */
    if (in->opcode == TSR_OP_GEMM && in->depthwise && !cfg->depthwise)
        return tsr_err(TSR_EBOUNDS, "gemm: depthwise mode needs config key DEPTHWISE > 0, which this config lacks");
    for (int i = 0; i < fmt->nfields; i++) {
        const tsr_field_t *f = &fmt->fields[i];
        uint64_t v;
        if (f->is_signed) {
            int64_t s = (int32_t)*cmember(in, f->offset);
            int64_t lo = -(1ll << (f->width - 1)), hi = (1ll << (f->width - 1)) - 1;
            if (s < lo || s > hi)
                return tsr_err(TSR_EBOUNDS, "%s: field %s = %lld does not fit %d signed bits [%lld, %lld]",
                               tsr_opcode_name(in->opcode), f->name, (long long)s, f->width,
                               (long long)lo, (long long)hi);
            v = (uint64_t)s & ((1ull << f->width) - 1);
        } else {
            v = *cmember(in, f->offset);
            if (f->width < 64 && v >> f->width)
                return tsr_err(TSR_EBOUNDS, "%s: field %s = %llu does not fit %d bits (max %llu)",
                               tsr_opcode_name(in->opcode), f->name, (unsigned long long)v,
                               f->width, (unsigned long long)((1ull << f->width) - 1));
        }
        set_bits(out, f->lsb, f->width, v);
    }
    if ((in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE) && in->mem_type >= TSR_MEM_COUNT)
        return tsr_err(TSR_EBOUNDS, "%s: field mem_type = %u is not a memory type (0..%d)",
                       tsr_opcode_name(in->opcode), in->mem_type, TSR_MEM_COUNT - 1);
    if (in->opcode == TSR_OP_ALU && in->alu_opcode >= TSR_ALU_COUNT)
        return tsr_err(TSR_EBOUNDS, "alu: field alu_opcode = %u is not an ALU op (0..%d)",
                       in->alu_opcode, TSR_ALU_COUNT - 1);
    return TSR_OK;
}

/* The decoder field by field, with its checks' messages (the fast one
 * below falls back to it on a malformed instruction). */
static int decode_slow(const tsr_config_t *cfg, const tsr_insn_bits_t *in, tsr_insn_t *out)
{
    uint32_t op = (uint32_t)(in->w[0] & 7u);
    memset(out, 0, sizeof *out);
    if (op >= TSR_OP_COUNT)
        return tsr_err(TSR_EINVAL, "malformed instruction: opcode %u is not LOAD/STORE/GEMM/FINISH/ALU",
                       op);
    const tsr_format_t *fmt = NULL;
    int rc = format_of(cfg, op, &fmt);
    if (rc)
        return rc;
    for (int i = 0; i < fmt->nfields; i++) {
        const tsr_field_t *f = &fmt->fields[i];
        uint64_t v = get_bits(in, f->lsb, f->width);
        if (f->is_signed && (v >> (f->width - 1)) & 1)
            v |= ~0ull << f->width;
        *member(out, f->offset) = (uint32_t)v;
    }
    /* Reserved bits must be zero: a stray bit means the producer and this
     * decoder disagree about the layout. */
    for (int bit = fmt->total_bits; bit < TSR_INSN_BITS; bit++)
        if (!(bit & 63) && !in->w[bit >> 6])
            bit += 63; /* (a clear word) */
        else if ((in->w[bit >> 6] >> (bit & 63)) & 1)
            return tsr_err(TSR_EINVAL,
                           "malformed %s instruction: reserved bit %d is set (format uses bits "
                           "0..%d)",
                           tsr_opcode_name(op), bit, fmt->total_bits - 1);
    if ((op == TSR_OP_LOAD || op == TSR_OP_STORE) && out->mem_type >= TSR_MEM_COUNT)
        return tsr_err(TSR_EINVAL, "malformed %s instruction: memory type %u is not 0..%d",
                       tsr_opcode_name(op), out->mem_type, TSR_MEM_COUNT - 1);
    /* The 4-bit field holds more values than there are ALU ops. */
    if (op == TSR_OP_ALU && out->alu_opcode >= TSR_ALU_COUNT)
        return tsr_err(TSR_EINVAL, "malformed alu instruction: ALU op %u is not 0..%d",
                       out->alu_opcode, TSR_ALU_COUNT - 1);
    return TSR_OK;
}

/* Encode and decode run once per instruction of every submission (a
 * ResNet-50 first execution: 60 k of each). The fast paths below use the
 * compiled format and check every field at once; any failed check (or a
 * config whose format fails) takes the field-by-field path, which gives
 * the same result and names the problem. */
int tsr_insn_encode(const tsr_config_t *cfg, const tsr_insn_t *in, tsr_insn_bits_t *out)
{
    const tsr_format_t *fmt = NULL;
    if (in->opcode >= TSR_OP_COUNT || format_of(cfg, in->opcode, &fmt) ||
        (in->opcode == TSR_OP_GEMM && in->depthwise && !cfg->depthwise))
        return encode_slow(cfg, in, out);
    const cformat_t *cf = &fcache.cf[in->opcode];
    uint64_t w[2] = {0, 0}, bad = 0;
    for (int i = 0; i < cf->n; i++) {
        const cfield_t *c = &cf->f[i];
        uint64_t v = *cmember(in, c->offset);
        if (c->sign) /* fits: s + 2^(width-1) in [0, 2^width) */
            v = (uint64_t)(int64_t)(int32_t)v;
        bad |= (v + c->sign) & ~c->mask;
        v &= c->mask;
        w[c->word] |= v << c->shift;
        if (c->hi_shift)
            w[1] |= v >> c->hi_shift;
    }
    if (bad || ((in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE) && in->mem_type >= TSR_MEM_COUNT) ||
        (in->opcode == TSR_OP_ALU && in->alu_opcode >= TSR_ALU_COUNT))
        return encode_slow(cfg, in, out);
    out->w[0] = w[0];
    out->w[1] = w[1];
    return TSR_OK;
}

int tsr_insn_decode(const tsr_config_t *cfg, const tsr_insn_bits_t *in, tsr_insn_t *out)
{
    const uint32_t op = (uint32_t)(in->w[0] & 7u);
    const tsr_format_t *fmt = NULL;
    if (op >= TSR_OP_COUNT || format_of(cfg, op, &fmt))
        return decode_slow(cfg, in, out);
    const cformat_t *cf = &fcache.cf[op];
    if ((in->w[0] & cf->reserved[0]) | (in->w[1] & cf->reserved[1]))
        return decode_slow(cfg, in, out);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < cf->n; i++) {
        const cfield_t *c = &cf->f[i];
        uint64_t v = in->w[c->word] >> c->shift;
        if (c->hi_shift)
            v |= in->w[1] << c->hi_shift;
        v &= c->mask;
        *member(out, c->offset) = (uint32_t)((v ^ c->sign) - c->sign);
    }
    if (((op == TSR_OP_LOAD || op == TSR_OP_STORE) && out->mem_type >= TSR_MEM_COUNT) ||
        (op == TSR_OP_ALU && out->alu_opcode >= TSR_ALU_COUNT))
        return decode_slow(cfg, in, out);
    return TSR_OK;
}

/* (Little-endian words: on a little-endian host the bytes as they are.) */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TSR_ISA_LE 1
#else
#define TSR_ISA_LE 0
#endif

void tsr_insn_bits_store(const tsr_insn_bits_t *in, uint8_t out[TSR_INSN_BYTES])
{
    if (TSR_ISA_LE) {
        memcpy(out, in->w, TSR_INSN_BYTES);
        return;
    }
    for (int i = 0; i < TSR_INSN_BYTES; i++)
        out[i] = (uint8_t)(in->w[i >> 3] >> ((i & 7) * 8));
}

void tsr_insn_bits_load(const uint8_t in[TSR_INSN_BYTES], tsr_insn_bits_t *out)
{
    if (TSR_ISA_LE) {
        memcpy(out->w, in, TSR_INSN_BYTES);
        return;
    }
    out->w[0] = out->w[1] = 0;
    for (int i = 0; i < TSR_INSN_BYTES; i++)
        out->w[i >> 3] |= (uint64_t)in[i] << ((i & 7) * 8);
}

int tsr_uop_encode(const tsr_config_t *cfg, const tsr_uop_t *u, uint64_t *raw)
{
    const struct {
        const char *name;
        uint32_t v;
        int bits;
    } f[3] = {{"dst", u->dst, cfg->uop_dst_bits},
              {"src", u->src, cfg->uop_src_bits},
              {"wgt", u->wgt, cfg->uop_wgt_bits}};
    for (int i = 0; i < 3; i++)
        if ((uint64_t)f[i].v >> f[i].bits)
            return tsr_err(TSR_EBOUNDS, "uop field %s = %u does not fit %d bits (max %u)",
                           f[i].name, f[i].v, f[i].bits, (1u << f[i].bits) - 1);
    *raw = (uint64_t)u->dst | (uint64_t)u->src << cfg->uop_dst_bits |
           (uint64_t)u->wgt << (cfg->uop_dst_bits + cfg->uop_src_bits);
    return TSR_OK;
}

void tsr_uop_decode(const tsr_config_t *cfg, uint64_t raw, tsr_uop_t *u)
{
    u->dst = (uint32_t)(raw & ((1ull << cfg->uop_dst_bits) - 1));
    raw >>= cfg->uop_dst_bits;
    u->src = (uint32_t)(raw & ((1ull << cfg->uop_src_bits) - 1));
    raw >>= cfg->uop_src_bits;
    u->wgt = (uint32_t)(raw & ((1ull << cfg->uop_wgt_bits) - 1));
}

tsr_stage_e tsr_insn_stage(const tsr_insn_t *in)
{
    switch (in->opcode) {
    case TSR_OP_LOAD:
        /* uop, acc, acc8 and lut rows are the compute stage's alone */
        return (in->mem_type == TSR_MEM_INP || in->mem_type == TSR_MEM_WGT) ? TSR_STAGE_LOAD
                                                                            : TSR_STAGE_COMPUTE;
    case TSR_OP_STORE: return TSR_STAGE_STORE;
    default: return TSR_STAGE_COMPUTE;
    }
}

uint64_t tsr_insn_macs_per_op(const tsr_config_t *cfg, const tsr_insn_t *in)
{
    return in->depthwise ? (uint64_t)cfg->batch * (uint64_t)cfg->block_in * (uint64_t)cfg->depthwise
                         : cfg->macs_per_op;
}

/* Issue cycles of a depthwise GEMM: an op reads its K input rows src..src+K-1
 * (K cycles) unless the op just ahead in the same instruction had src - d
 * with 1 <= d < K: then its last K-d rows are in the window already and the
 * op reads the d new ones (d cycles; a stride-s layer slides by s). dw_step
 * is that cost for a src step of d. As for the ALU's src reads below: within
 * a pass over the uops the offsets cancel; between passes src moves by
 * (first uop's src - last uop's src) + the loop step. Without uops every op
 * is taken as fresh. */
static double dw_step(int64_t d, int K) { return d >= 1 && d < K ? (double)d : (double)K; }
static double dw_issue_cycles(const tsr_config_t *cfg, const tsr_insn_t *in, const tsr_uop_t *uops, double ops)
{
    const int K = cfg->depthwise;
    const double no = in->iter_out, ni = in->iter_in;
    if (!uops)
        return ops * K;
    double in_pass = 0; /* cycles of a pass's ops after its first */
    for (uint32_t u = in->uop_bgn + 1; u < in->uop_end; u++)
        in_pass += dw_step((int64_t)uops[u].src - (int64_t)uops[u - 1].src, K);
    const int64_t back = (int64_t)uops[in->uop_bgn].src - uops[in->uop_end - 1].src;
    const int64_t sfo = in->src_factor_out, sfi = in->src_factor_in;
    const double next_i = (ni - 1) * no * dw_step(back + sfi, K);
    const double next_o = (no - 1) * dw_step(back + sfo - (int64_t)(in->iter_in - 1) * sfi, K);
    return K + no * ni * in_pass + next_i + next_o;
}

double tsr_insn_issue_cycles(const tsr_config_t *cfg, const tsr_insn_t *in, const tsr_uop_t *uops)
{
    if (in->opcode != TSR_OP_GEMM && in->opcode != TSR_OP_ALU)
        return 0;
    const uint32_t nu = in->uop_end > in->uop_bgn ? in->uop_end - in->uop_bgn : 0;
    const double no = in->iter_out, ni = in->iter_in, ops = no * ni * nu;
    if (ops > 0 && in->opcode == TSR_OP_GEMM && in->depthwise && !in->reset && cfg->depthwise > 1)
        return dw_issue_cycles(cfg, in, uops, ops);
    if (ops == 0 || in->opcode != TSR_OP_ALU || !cfg->acc_single_copy || in->reset || in->use_imm)
        return ops;
    /* Ops run as for o, for i, for u; op (o, i, u) reads src row uop[u].src + o*sfo + i*sfi.
     * A src read waits for the write of the op ahead (one bank port for both), so every op
     * after the first whose src row differs from the previous op's costs one cycle more.
     * Within a pass over the uops the offsets cancel; between passes the row moves by
     * (first uop's src - last uop's src) + the loop step. */
    double in_pass = 0; /* reads per pass after its first uop */
    int64_t back = 0;   /* uop[bgn].src - uop[end-1].src */
    if (nu > 1) {
        if (!uops)
            return 2 * ops - 1;
        for (uint32_t u = in->uop_bgn + 1; u < in->uop_end; u++)
            in_pass += uops[u].src != uops[u - 1].src;
        back = (int64_t)uops[in->uop_bgn].src - uops[in->uop_end - 1].src;
    }
    const int64_t sfo = in->src_factor_out, sfi = in->src_factor_in;
    const double next_i = back + sfi != 0 ? (ni - 1) * no : 0;
    const double next_o = back + sfo - (int64_t)(in->iter_in - 1) * sfi != 0 ? no - 1 : 0;
    return ops + no * ni * in_pass + next_i + next_o;
}

const char *tsr_insn_desc(const tsr_insn_t *in, char *buf, size_t n)
{
    const char *op = tsr_opcode_name(in->opcode);
    if (in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE)
        snprintf(buf, n, "%s %s", op ? op : "?", tsr_mem_name(in->mem_type) ? tsr_mem_name(in->mem_type) : "?");
    else if (in->opcode == TSR_OP_ALU)
        snprintf(buf, n, "alu %s", tsr_alu_name(in->alu_opcode) ? tsr_alu_name(in->alu_opcode) : "?");
    else
        snprintf(buf, n, "%s", op ? op : "?");
    return buf;
}

const char *tsr_opcode_name(uint32_t op)
{
    static const char *n[] = {"load", "store", "gemm", "finish", "alu"};
    return op < TSR_OP_COUNT ? n[op] : NULL;
}

const char *tsr_mem_name(uint32_t m)
{
    static const char *n[] = {"uop", "wgt", "inp", "acc", "out", "acc8", "lut"};
    return m < TSR_MEM_COUNT ? n[m] : NULL;
}

/* The ALU ops: name, and for an optional op the config key that turns it
 * on (its member: the op exists when it is > 0) and how messages state that.
 * The one table the names, the keys and the availability come from. */
static const struct {
    const char *name, *key, *key_value;
    size_t member; /* offsetof in tsr_config_t (with key) */
} alu_ops[TSR_ALU_COUNT] = {
    [TSR_ALU_MIN] = {"min", NULL, NULL, 0},       [TSR_ALU_MAX] = {"max", NULL, NULL, 0},
    [TSR_ALU_ADD] = {"add", NULL, NULL, 0},       [TSR_ALU_SHR] = {"shr", NULL, NULL, 0},
    [TSR_ALU_MUL] = {"mul", NULL, NULL, 0},       [TSR_ALU_MOV] = {"mov", NULL, NULL, 0},
    [TSR_ALU_RSHR] = {"rshr", NULL, NULL, 0},     [TSR_ALU_MULHR] = {"mulhr", NULL, NULL, 0},
    [TSR_ALU_RQFIN] = {"rqfin", NULL, NULL, 0},
    [TSR_ALU_FSCALE] = {"fscale", "EXACT_REQUANT", "= 1", offsetof(tsr_config_t, exact_requant)},
    [TSR_ALU_LUT] = {"lut", "ACT_LUT", "> 0", offsetof(tsr_config_t, act_lut)},
};

const char *tsr_alu_name(uint32_t op) { return op < TSR_ALU_COUNT ? alu_ops[op].name : NULL; }

const char *tsr_alu_op_key(uint32_t op) { return op < TSR_ALU_COUNT ? alu_ops[op].key : NULL; }

const char *tsr_alu_op_key_value(uint32_t op)
{
    return op < TSR_ALU_COUNT && alu_ops[op].key_value ? alu_ops[op].key_value : "= 1";
}

int tsr_alu_op_available(const tsr_config_t *cfg, uint32_t op)
{
    if (op >= TSR_ALU_COUNT)
        return 0;
    if (!alu_ops[op].key)
        return 1;
    int v;
    memcpy(&v, (const char *)cfg + alu_ops[op].member, sizeof v);
    return v > 0;
}

const char *tsr_stage_name(int s)
{
    static const char *n[] = {"load", "compute", "store"};
    return s >= 0 && s < TSR_STAGE_COUNT ? n[s] : "?";
}

int32_t tsr_wrap(int64_t v, int width)
{
    uint64_t m = width >= 64 ? ~0ull : (1ull << width) - 1;
    uint64_t u = (uint64_t)v & m;
    if (width < 64 && (u >> (width - 1)) & 1)
        u |= ~m;
    return (int32_t)(int64_t)u;
}

/* fscale (isa/semantics.md): ONNX Runtime's requantizing multiply, done with
 * the host's IEEE float32 arithmetic (round to nearest even, the C default;
 * the build does not use -ffast-math), so that the integer datapath of the
 * RTL and of tests/tsr_ref.c is checked against real float32 arithmetic. A
 * scale that is zero, subnormal, infinite or NaN gives 0: a subnormal scale
 * times |a| < 2^31 rounds to 0 anyway, and inf/NaN are not scales (the JIT
 * refuses them). The result saturates to the W-bit range (the config allows
 * the op only with W = 32). */
static int32_t fscale_apply(int32_t a, int32_t b, int w)
{
    uint32_t bits = (uint32_t)b;
    uint32_t ex = (bits >> 23) & 0xffu;
    if (ex == 0 || ex == 0xffu)
        return 0;
    float sc;
    memcpy(&sc, &bits, sizeof sc);
    float p = (float)a * sc; /* two roundings: int32 -> float32, the product */
    float lim = ldexpf(1.0f, w - 1);
    if (p >= lim)
        return (int32_t)((1ll << (w - 1)) - 1);
    if (p <= -lim)
        return (int32_t)-(1ll << (w - 1));
    return (int32_t)nearbyintf(p); /* half to even in the default mode */
}

/* (static inline: tsr_alu_apply_row's lane loop has it inlined, so the
 * compiler hoists the op's case out of the loop) */
static inline int32_t alu_apply(uint32_t op, int32_t a, int32_t b, int w)
{
    int64_t A = a, B = b;
    int64_t s = B < -(w - 1) ? -(w - 1) : B > w - 1 ? w - 1 : B;
    switch (op) {
    case TSR_ALU_MIN: return a < b ? a : b;
    case TSR_ALU_MAX: return a > b ? a : b;
    case TSR_ALU_ADD: return tsr_wrap(A + B, w);
    case TSR_ALU_MUL: return tsr_wrap((int64_t)((uint64_t)A * (uint64_t)B), w);
    case TSR_ALU_MOV: return b;
    case TSR_ALU_SHR:
    case TSR_ALU_RSHR:
        if (s <= 0)
            return tsr_wrap((int64_t)((uint64_t)A << -s), w);
        if (op == TSR_ALU_SHR)
            return (int32_t)(A >> s);
        {
            int64_t mask = (1ll << s) - 1;
            int64_t rem = A & mask;
            int64_t thr = (mask >> 1) + (A < 0 ? 1 : 0);
            return tsr_wrap((A >> s) + (rem > thr ? 1 : 0), w);
        }
    case TSR_ALU_MULHR: {
        int64_t lim = 1ll << (w - 1);
        if (A == -lim && B == -lim)
            return (int32_t)(lim - 1);
        int64_t p = A * B;
        int64_t nudge = p >= 0 ? (1ll << (w - 2)) : 1 - (1ll << (w - 2));
        return tsr_wrap((p + nudge) / lim, w);
    }
    case TSR_ALU_RQFIN: {
        /* b packs, in its low 32 bits (b sign-extended first): shift [4:0],
         * zero point [13:5], lo [22:14], hi [31:23] (the last three signed). */
        uint32_t p32 = (uint32_t)B;
        int64_t sh = p32 & 31u;
        int64_t zp = (int64_t)((int32_t)(p32 << 18) >> 23);
        int64_t lo = (int64_t)((int32_t)(p32 << 9) >> 23);
        int64_t hi = (int64_t)((int32_t)p32 >> 23);
        if (sh > w - 1)
            sh = w - 1;
        int64_t r = A;
        if (sh > 0) {
            int64_t mask = (1ll << sh) - 1;
            int64_t rem = A & mask;
            int64_t thr = (mask >> 1) + (A < 0 ? 1 : 0);
            r = (A >> sh) + (rem > thr ? 1 : 0);
        }
        int64_t v = r + zp;
        v = v < lo ? lo : v;
        v = v > hi ? hi : v;
        return tsr_wrap(v, w);
    }
    case TSR_ALU_FSCALE: return fscale_apply(a, b, w);
    default: return a; /* (lut: tsr_alu_lut, which has the tables) */
    }
}

int32_t tsr_alu_apply(uint32_t op, int32_t a, int32_t b, int w) { return alu_apply(op, a, b, w); }

/* The common operators are written out so the lane loop has neither a call
 * nor an operator switch per lane (on small configs that call was a large
 * part of an ALU instruction). They equal alu_apply: MIN, MAX and MOV do not
 * wrap; at 32 bits tsr_wrap keeps the low 32 bits, so ADD and MUL are the
 * unsigned 32-bit sum and product and a left SHR the 32-bit shift, and a
 * right SHR of an int32 by at most 31 is the int64's. The other operators,
 * and ADD/MUL/SHR at 16 bits, run alu_apply itself, its case chosen once
 * per row. Lane l reads only b[l] before writing a[l], so b == a sees the
 * old values. */
void tsr_alu_apply_row(uint32_t op, int32_t *a, const int32_t *b, int32_t imm, uint32_t n, int w)
{
    switch (op) {
    case TSR_ALU_MIN:
        for (uint32_t l = 0; l < n; l++) {
            int32_t y = b ? b[l] : imm;
            a[l] = a[l] < y ? a[l] : y;
        }
        return;
    case TSR_ALU_MAX:
        for (uint32_t l = 0; l < n; l++) {
            int32_t y = b ? b[l] : imm;
            a[l] = a[l] > y ? a[l] : y;
        }
        return;
    case TSR_ALU_MOV:
        for (uint32_t l = 0; l < n; l++)
            a[l] = b ? b[l] : imm;
        return;
    case TSR_ALU_ADD:
        if (w != 32)
            break;
        for (uint32_t l = 0; l < n; l++)
            a[l] = (int32_t)((uint32_t)a[l] + (uint32_t)(b ? b[l] : imm));
        return;
    case TSR_ALU_MUL: /* tsr_wrap(a * b, 32): the low 32 bits of the product */
        if (w != 32)
            break;
        for (uint32_t l = 0; l < n; l++)
            a[l] = (int32_t)((uint32_t)a[l] * (uint32_t)(b ? b[l] : imm));
        return;
    case TSR_ALU_SHR: /* |b| clamped to 31; b <= 0 shifts left, wrapping to 32 bits */
        if (w != 32)
            break;
        for (uint32_t l = 0; l < n; l++) {
            int32_t y = b ? b[l] : imm;
            int sh = y < -31 ? -31 : y > 31 ? 31 : y;
            a[l] = sh <= 0 ? (int32_t)((uint32_t)a[l] << -sh) : a[l] >> sh;
        }
        return;
    default: break;
    }
#define TSR_ALU_ROW_CASE(OP)                                                                  \
    case OP:                                                                                  \
        for (uint32_t l = 0; l < n; l++)                                                      \
            a[l] = alu_apply(OP, a[l], b ? b[l] : imm, w);                                    \
        return;
    switch (op) {
        TSR_ALU_ROW_CASE(TSR_ALU_ADD) /* (16 bits) */
        TSR_ALU_ROW_CASE(TSR_ALU_MUL)
        TSR_ALU_ROW_CASE(TSR_ALU_SHR)
        TSR_ALU_ROW_CASE(TSR_ALU_RSHR)
        TSR_ALU_ROW_CASE(TSR_ALU_MULHR)
        TSR_ALU_ROW_CASE(TSR_ALU_RQFIN)
        TSR_ALU_ROW_CASE(TSR_ALU_FSCALE)
    case TSR_ALU_LUT: return; /* needs the tables: tsr_alu_lut_row */
    default:
        for (uint32_t l = 0; l < n; l++)
            a[l] = alu_apply(op, a[l], b ? b[l] : imm, w);
        return;
    }
#undef TSR_ALU_ROW_CASE
}

/* lut (isa/semantics.md): the table index is the low bits of b (ACT_LUT is
 * a power of two, so any b selects a table, as the hardware's index mux
 * would), the entry the low 8 bits of a, i.e. the byte an int8 STORE of a
 * would write; entries are int8, sign-extended. */
int32_t tsr_alu_lut(int32_t a, int32_t b, const int8_t *tables, uint32_t ntables)
{
    uint32_t t = (uint32_t)b & (ntables - 1u);
    return tables[(size_t)t * TSR_LUT_ENTRIES + ((uint32_t)a & 0xffu)];
}

void tsr_alu_lut_row(int32_t *a, const int32_t *b, int32_t imm, uint32_t n, const int8_t *tables, uint32_t ntables)
{
    for (uint32_t l = 0; l < n; l++)
        a[l] = tsr_alu_lut(a[l], b ? b[l] : imm, tables, ntables);
}
