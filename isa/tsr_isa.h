/*
 * tsr_isa: Tessera's two-level ISA.
 *
 * Task instructions are 128 bits. Their layout is an explicit field table
 * (name, lsb, width, meaning) built from the config: fields are packed from
 * bit 0 in table order, with widths derived from buffer depths. Encoding and
 * decoding walk that table; nothing uses C bitfields. The same table
 * generates the SystemVerilog package and the ISA spec page, so software,
 * hardware and documentation cannot drift.
 *
 * The ALU semantics live here too (tsr_alu_apply) so every C-side backend
 * computes exactly the same thing; the RTL is checked against it.
 */
#ifndef TSR_ISA_H
#define TSR_ISA_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"

#define TSR_INSN_BITS 128
#define TSR_INSN_BYTES 16
#define TSR_LOOP_BITS 14     /* iter_out / iter_in width */
#define TSR_DRAM_BASE_BITS 32
#define TSR_SIZE_BITS 16     /* y_size, x_size, x_stride */
#define TSR_PAD_BITS 4
#define TSR_PAD_VALUE_BITS 8  /* LOAD inp pad value (int8, sign-extended to the input width) */
#define TSR_IMM_BITS 16
#define TSR_ALU_OP_BITS 4

typedef enum {
    TSR_OP_LOAD = 0,
    TSR_OP_STORE = 1,
    TSR_OP_GEMM = 2,
    TSR_OP_FINISH = 3,
    TSR_OP_ALU = 4,
    TSR_OP_COUNT = 5
} tsr_opcode_e;

typedef enum {
    TSR_MEM_UOP = 0,
    TSR_MEM_WGT = 1,
    TSR_MEM_INP = 2,
    TSR_MEM_ACC = 3,
    TSR_MEM_OUT = 4,
    TSR_MEM_ACC8 = 5,  /* int8 in DRAM, sign-extended into the accumulator */
    TSR_MEM_LUT = 6,   /* one activation table of 256 int8 entries per element (ACT_LUT; compute stage) */
    TSR_MEM_COUNT = 7
} tsr_mem_e;

typedef enum {
    TSR_ALU_MIN = 0,   /* min(a, b) */
    TSR_ALU_MAX = 1,   /* max(a, b) */
    TSR_ALU_ADD = 2,   /* a + b, wrapping */
    TSR_ALU_SHR = 3,   /* a >> b arithmetic; b < 0 shifts left; |b| clamped to W-1 */
    TSR_ALU_MUL = 4,   /* a * b, low W bits */
    TSR_ALU_MOV = 5,   /* b */
    TSR_ALU_RSHR = 6,  /* a >> b rounding half away from zero; b <= 0 as SHR */
    TSR_ALU_MULHR = 7, /* saturating rounding doubling high multiply */
    TSR_ALU_RQFIN = 8, /* requantization finish: rounding shift, + zero point, clamp (b packs all four) */
    TSR_ALU_FSCALE = 9, /* round_half_even(float32(a) * float32 bits of b), saturated (EXACT_REQUANT) */
    TSR_ALU_LUT = 10,   /* sign-extended table[b & (ACT_LUT - 1)][a & 255] (ACT_LUT) */
    TSR_ALU_COUNT = 11
} tsr_alu_e;

/* The three execution stages, joined by token queues load <-> compute <-> store. */
typedef enum {
    TSR_STAGE_LOAD = 0,
    TSR_STAGE_COMPUTE = 1,
    TSR_STAGE_STORE = 2,
    TSR_STAGE_COUNT = 3
} tsr_stage_e;

/* A decoded task instruction. Every field is a plain integer; which ones
 * are meaningful depends on the opcode (see the field table). */
typedef struct tsr_insn {
    uint32_t opcode;         /* tsr_opcode_e */
    uint32_t pop_prev;       /* wait for a token from the previous stage */
    uint32_t pop_next;       /* wait for a token from the next stage */
    uint32_t push_prev;      /* signal the previous stage when done */
    uint32_t push_next;      /* signal the next stage when done */
    /* LOAD / STORE */
    uint32_t mem_type;       /* tsr_mem_e */
    uint32_t sram_base;      /* first on-chip row */
    uint32_t dram_base;      /* first DRAM element, in units of the element size */
    uint32_t y_size;         /* rows */
    uint32_t x_size;         /* elements per row; 0 = no transfer (flags only) */
    uint32_t x_stride;       /* DRAM elements between row starts */
    uint32_t y_pad0;         /* zero rows before */
    uint32_t y_pad1;         /* zero rows after */
    uint32_t x_pad0;         /* zero elements before each row */
    uint32_t x_pad1;         /* zero elements after each row */
    int32_t pad_value;       /* value of every lane of padded inp elements (LOAD inp; else 0) */
    /* GEMM / ALU */
    uint32_t reset;          /* write zeros to acc[dst] instead of computing */
    uint32_t uop_bgn;        /* first uop of the kernel */
    uint32_t uop_end;        /* one past the last uop */
    uint32_t iter_out;       /* outer loop extent */
    uint32_t iter_in;        /* inner loop extent */
    uint32_t dst_factor_out; /* acc index step per outer iteration */
    uint32_t dst_factor_in;  /* acc index step per inner iteration */
    uint32_t src_factor_out; /* inp (GEMM) / acc (ALU) index step, outer */
    uint32_t src_factor_in;  /* inp (GEMM) / acc (ALU) index step, inner */
    uint32_t wgt_factor_out; /* wgt index step, outer (GEMM) */
    uint32_t wgt_factor_in;  /* wgt index step, inner (GEMM) */
    uint32_t depthwise;      /* GEMM depthwise mode (config key DEPTHWISE > 0 only) */
    uint32_t alu_opcode;     /* tsr_alu_e (ALU) */
    uint32_t use_imm;        /* ALU operand b is imm instead of acc[src] */
    int32_t imm;             /* signed immediate (ALU) */
} tsr_insn_t;

/* 128 bits, little-endian: w[0] holds bits 63..0. */
typedef struct tsr_insn_bits {
    uint64_t w[2];
} tsr_insn_bits_t;

/* One field of an instruction format. */
typedef struct tsr_field {
    const char *name;        /* field name as in docs, asm and SV */
    size_t offset;           /* offsetof(tsr_insn_t, member) */
    int lsb;                 /* position of bit 0 of the field */
    int width;               /* bits */
    int is_signed;           /* sign-extended on decode */
    int derived;             /* width depends on the config (buffer depths) */
    const char *desc;        /* meaning */
} tsr_field_t;

#define TSR_MAX_FIELDS 32

/* The layout of one instruction format under a given config. */
typedef struct tsr_format {
    const char *name;        /* "MEM", "GEMM", "ALU", "FINISH" */
    int nfields;             /* entries used in fields[] */
    int total_bits;          /* bits used; bits above are reserved zero */
    tsr_field_t fields[TSR_MAX_FIELDS]; /* in bit order */
} tsr_format_t;

/* Decoded micro-op. */
typedef struct tsr_uop {
    uint32_t dst;            /* accumulator row */
    uint32_t src;            /* input row (GEMM) or accumulator row (ALU) */
    uint32_t wgt;            /* weight row (GEMM) */
} tsr_uop_t;

/* Layout of the format used by an opcode (LOAD and STORE share MEM).
 * Returns TSR_OK, TSR_EINVAL for a bad opcode, or TSR_ECONFIG if the
 * format does not fit 128 bits under cfg. */
int tsr_isa_format(const tsr_config_t *cfg, uint32_t opcode, tsr_format_t *fmt);
/* Largest value unsigned field `name` of opcode's format holds under cfg (0 if the
 * format or field does not exist), for lowering code that must respect the
 * config-derived field widths. */
long tsr_isa_field_max(const tsr_config_t *cfg, uint32_t opcode, const char *name);
/* Check every format fits 128 bits (called by config validation). */
int tsr_isa_check_config(const tsr_config_t *cfg);

/* Encode: every field must fit its width (TSR_EBOUNDS naming the field). */
int tsr_insn_encode(const tsr_config_t *cfg, const tsr_insn_t *in, tsr_insn_bits_t *out);
/* Decode: rejects bad opcodes, memory types, ALU ops and nonzero reserved bits. */
int tsr_insn_decode(const tsr_config_t *cfg, const tsr_insn_bits_t *in, tsr_insn_t *out);
/* Little-endian byte (de)serialisation of an encoded instruction. */
void tsr_insn_bits_store(const tsr_insn_bits_t *in, uint8_t out[TSR_INSN_BYTES]);
void tsr_insn_bits_load(const uint8_t in[TSR_INSN_BYTES], tsr_insn_bits_t *out);

/* Micro-op packing: dst at bit 0, then src, then wgt; cfg->uop_bytes wide. */
int tsr_uop_encode(const tsr_config_t *cfg, const tsr_uop_t *u, uint64_t *raw);
void tsr_uop_decode(const tsr_config_t *cfg, uint64_t raw, tsr_uop_t *u);

/* Stage that executes an instruction (LOAD of UOP/ACC/ACC8/LUT runs in compute). */
tsr_stage_e tsr_insn_stage(const tsr_insn_t *in);
/* Cycles a GEMM/ALU instruction's tensor ops occupy its pipe's issue slot: one per op, except
 * that with ACC_SINGLE_COPY an ALU op that reads a src row issues two cycles behind the op ahead,
 * and it reads one unless its src row is the previous op's (same instruction; the pipe keeps
 * that row): ops + the reading ops after the first. uops: the uop buffer (entries
 * [uop_bgn, uop_end) are read), or NULL when they are not known yet; then an instruction of
 * one uop is still exact (its src rows follow from the loop factors) and one of several counts
 * every op as reading (an upper bound). 0 for no ops or another opcode. The one issue rule of
 * the timed models (SystemC, the JIT's tiling estimate), taken from hw/rtl/tsr_compute_pipe.sv. */
/* Multiply-accumulates one non-reset GEMM tensor op does: B*BI*BO, or
 * B*BI*DEPTHWISE in the depthwise mode. */
uint64_t tsr_insn_macs_per_op(const tsr_config_t *cfg, const tsr_insn_t *in);
double tsr_insn_issue_cycles(const tsr_config_t *cfg, const tsr_insn_t *in, const tsr_uop_t *uops);
/* Short mnemonic for messages ("load inp", "alu add", "gemm") written to buf; returns buf. */
const char *tsr_insn_desc(const tsr_insn_t *in, char *buf, size_t n);

/* Names */
const char *tsr_opcode_name(uint32_t op);   /* "load", ... or NULL */
const char *tsr_mem_name(uint32_t mem);     /* "uop", "wgt", ... or NULL */
const char *tsr_alu_name(uint32_t op);      /* "min", ... or NULL */
/* The config key an ALU op needs (e.g. "EXACT_REQUANT" for fscale), or NULL
 * when every config has it. */
const char *tsr_alu_op_key(uint32_t op);
/* 1 if the config implements ALU op `op` (a defined op whose key, if any, is
 * set); an instruction carrying an op the config lacks is an error. */
int tsr_alu_op_available(const struct tsr_config *cfg, uint32_t op);
/* What the key of an ALU op must be set to, for messages: "= 1" (a switch)
 * or "> 0" (a count, ACT_LUT). */
const char *tsr_alu_op_key_value(uint32_t op);
const char *tsr_stage_name(int stage);      /* "load", "compute", "store" */

/* The ALU, defined once. a and b are W-bit two's complement values held in
 * int32_t (W = acc_width, 16 or 32); the result is wrapped to W bits.
 * lut reads the activation tables, which these two do not have: for it
 * they leave a unchanged; use tsr_alu_lut / tsr_alu_lut_row. */
int32_t tsr_alu_apply(uint32_t op, int32_t a, int32_t b, int acc_width);
/* One ALU op on n lanes: a[l] = tsr_alu_apply(op, a[l], b ? b[l] : imm, w),
 * lane l reading b[l] before writing a[l] (b may be a). One call per row:
 * the op's case is chosen once, not per lane. */
void tsr_alu_apply_row(uint32_t op, int32_t *a, const int32_t *b, int32_t imm, uint32_t n, int acc_width);
/* Bytes of one activation table (the lut memory type's element). */
#define TSR_LUT_ENTRIES 256
/* The lut ALU op: tables holds ntables (ACT_LUT, a power of two) tables of
 * TSR_LUT_ENTRIES int8 entries, table t at t * TSR_LUT_ENTRIES; the result
 * is the sign-extended entry [b & (ntables - 1)][a & 255] (fits every W). */
int32_t tsr_alu_lut(int32_t a, int32_t b, const int8_t *tables, uint32_t ntables);
/* The lut op on n lanes, b and imm as in tsr_alu_apply_row. */
void tsr_alu_lut_row(int32_t *a, const int32_t *b, int32_t imm, uint32_t n, const int8_t *tables, uint32_t ntables);
/* Wrap a 64-bit value to a signed W-bit value. */
int32_t tsr_wrap(int64_t v, int width);

#endif
