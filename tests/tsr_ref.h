/*
 * tsr_ref: an independent, deliberately naive plain-C reference model of the
 * Tessera instruction semantics, written from isa/semantics.md only. It is
 * compiled into the tests (never into libtessera) so that the functional
 * simulator is checked against a second implementation rather than itself.
 *
 * It takes nothing from libtessera that computes semantics: from the config
 * it reads only the log2 keys (from which it derives its own geometry) and
 * the uop field layout; tsr_isa.h is used for the plain tsr_insn_t struct and
 * the opcode / memory-type / ALU-op numbers.
 *
 * Instructions are applied one at a time in program order; dependency flags
 * are ignored (the tests only build token-correct streams whose result is
 * the in-order result). Errors return -1 with a message in ref_errmsg().
 */
#ifndef TSR_REF_H
#define TSR_REF_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_isa.h"

/* Wrap v to a signed width-bit value (width 1..32). */
int32_t ref_wrap(int64_t v, int width);
/* One ALU operation on W-bit values a, b (W = 16 or 32), per semantics.md.
 * lut reads the machine's tables: ref_alu_insn does it (here it gives 0). */
int32_t ref_alu(uint32_t op, int32_t a, int32_t b, int W);

/* Device DRAM as one flat byte array covering [base, base + size). */
typedef struct ref_dram {
    uint8_t *bytes;
    uint64_t base;
    uint64_t size;
} ref_dram_t;

/* The on-chip state. Values are held one per int32_t, already sign-extended
 * from their width, in the row-major orders of semantics.md. */
typedef struct ref_machine {
    /* geometry, derived here from the log2 config keys */
    int batch, block_in, block_out;
    int inp_width, wgt_width, acc_width, out_width;
    uint32_t inp_bytes, wgt_bytes, acc_bytes, acc8_bytes, out_bytes;
    uint32_t uop_depth, inp_depth, wgt_depth, acc_depth;
    /* uop layout (dst at bit 0, then src, then wgt), taken from the config */
    uint32_t uop_bytes;
    int uop_dst_bits, uop_src_bits, uop_wgt_bits;
    /* buffers */
    uint64_t *uop; /* [uop_depth] raw little-endian uop words */
    int32_t *inp;  /* [inp_depth][batch][block_in] */
    int32_t *wgt;  /* [wgt_depth][block_out][block_in] */
    int32_t *acc;  /* [acc_depth][batch][block_out], acc_width bits */
    int32_t *out;  /* [acc_depth][batch][block_out], out_width bits */
    /* activation tables (the config key ACT_LUT: their count, 0 = none) */
    uint32_t lut_count;
    int32_t lut[8][256]; /* entries, sign-extended from int8 */
    /* taps of the GEMM depthwise mode (the config key DEPTHWISE: 0 = none) */
    int dw_taps;
    uint32_t dw_groups; /* tap groups per weight row: the largest power of two with groups * taps <= block_out */
} ref_machine_t;

/* Zero-initialised machine for cfg. Returns 0 or -1. */
int ref_machine_init(ref_machine_t *m, const tsr_config_t *cfg);
void ref_machine_free(ref_machine_t *m);
/* Deep copy (dst must not be initialised). Returns 0 or -1. */
int ref_machine_copy(ref_machine_t *dst, const ref_machine_t *src);

/* Bytes of one DRAM element of a memory type (0 if the type has none). */
uint32_t ref_elem_bytes(const ref_machine_t *m, uint32_t mem_type);
/* Rows of the on-chip buffer a memory type addresses (0 if none). */
uint32_t ref_sram_depth(const ref_machine_t *m, uint32_t mem_type);
/* Split a raw uop into its fields. */
void ref_uop_fields(const ref_machine_t *m, uint64_t raw, uint32_t *dst, uint32_t *src, uint32_t *wgt);

/* Apply one instruction. */
int ref_load(ref_machine_t *m, const tsr_insn_t *in, const ref_dram_t *d);
int ref_store(ref_machine_t *m, const tsr_insn_t *in, ref_dram_t *d);
int ref_gemm(ref_machine_t *m, const tsr_insn_t *in);
int ref_alu_insn(ref_machine_t *m, const tsr_insn_t *in);
/* Dispatch on opcode (FINISH does nothing). */
int ref_exec(ref_machine_t *m, const tsr_insn_t *in, ref_dram_t *d);

/* Message of the last failure. */
const char *ref_errmsg(void);

#endif
