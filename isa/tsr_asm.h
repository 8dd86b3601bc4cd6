/*
 * tsr_asm: the text assembly format, its assembler and disassembler.
 *
 * A program is a list of buffer declarations (device DRAM regions with
 * optional initial contents) and task instructions. Buffers are placed at
 * fixed device addresses (declared with @ADDR or assigned in declaration
 * order from TSR_ASM_BASE_ADDR), so the assembled binary is fully resolved
 * and `disasm` of it reproduces the canonical text exactly.
 *
 * Grammar (one statement per line, '#' starts a comment):
 *   .buffer NAME SIZE [@ADDR] [zero | random SEED | file PATH]
 *                                     (file PATH: a regular file of at most
 *                                      SIZE bytes, relative to the program;
 *                                      `tessera run` refuses a buffer outside
 *                                      device DRAM before allocating it)
 *   .uops NAME D,S,W [D,S,W ...]      (appends uops to buffer NAME,
 *                                      declaring it on first use)
 *   .output NAME                      (dump NAME after `tessera run`)
 *   load MEM sram=N dram=EXPR y=N x=N stride=N [pad=Y0,Y1,X0,X1] FLAGS
 *   store MEM sram=N dram=EXPR y=N x=N stride=N [pad=...] FLAGS
 *   gemm [reset] uop=B:E iter=O,I dst=FO,FI src=FO,FI wgt=FO,FI FLAGS
 *   alu OP [reset] uop=B:E iter=O,I dst=FO,FI src=FO,FI [imm=V] [use_imm=0|1] FLAGS
 *   finish FLAGS
 * MEM: uop wgt inp acc out acc8. OP: min max add shr mul mov rshr mulhr.
 * FLAGS: any of pop_prev pop_next push_prev push_next.
 * EXPR: a number, NAME or NAME+N / NAME-N: NAME's address in elements of MEM.
 * Numbers: decimal or 0x hex, optionally negative for imm.
 * See tsr_disasm_insn for the canonical form.
 */
#ifndef TSR_ASM_H
#define TSR_ASM_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_isa.h"

#define TSR_ASM_BASE_ADDR 0x100000ull /* first automatically placed buffer */
#define TSR_ASM_ALIGN 4096ull         /* minimum buffer alignment */
#define TSR_ASM_NAME_MAX 64
/* Largest assembly file or binary instruction stream read from a path
 * (16 Mi instructions of binary; text at ~60 bytes a line is a few Mi). */
#define TSR_ASM_MAX_FILE (256ull << 20)

typedef enum {
    TSR_INIT_ZERO = 0,   /* zero-filled */
    TSR_INIT_RANDOM = 1, /* bytes from tsr_asm_random_fill(seed) */
    TSR_INIT_FILE = 2,   /* raw bytes of a file (rest zero) */
    TSR_INIT_UOPS = 3    /* the uops listed with .uops */
} tsr_init_e;

typedef struct tsr_asm_buffer {
    char name[TSR_ASM_NAME_MAX]; /* identifier */
    uint64_t addr;               /* device byte address */
    uint64_t size;               /* bytes */
    int init;                    /* tsr_init_e */
    uint64_t seed;               /* TSR_INIT_RANDOM seed */
    char *path;                  /* TSR_INIT_FILE path (owned), else NULL */
    uint64_t *uops;              /* TSR_INIT_UOPS raw uop words (owned) */
    size_t nuops;                /* entries in uops */
    int is_output;               /* named by .output */
    int line;                    /* source line of the declaration */
} tsr_asm_buffer_t;

typedef struct tsr_program {
    tsr_insn_t *insns;           /* instructions (owned) */
    int *lines;                  /* source line of each instruction (owned) */
    size_t ninsns;               /* number of instructions */
    tsr_asm_buffer_t *bufs;      /* buffers (owned) */
    size_t nbufs;                /* number of buffers */
} tsr_program_t;

/* Assemble text. Errors are TSR_EPARSE "NAME:LINE: message". */
int tsr_asm_parse(const tsr_config_t *cfg, const char *text, const char *name, tsr_program_t *prog);
/* Read a file (a regular file of at most TSR_ASM_MAX_FILE bytes) and assemble it. */
int tsr_asm_parse_file(const tsr_config_t *cfg, const char *path, tsr_program_t *prog);
void tsr_program_free(tsr_program_t *prog);

/* Canonical text of one instruction (no newline), every field explicit:
 *   load inp sram=0 dram=256 y=1 x=16 stride=16 pad=0,0,0,0 pop_next push_next
 *   gemm reset=0 uop=0:4 iter=2,3 dst=1,0 src=2,0 wgt=0,1
 *   alu add reset=0 uop=0:1 iter=1,1 dst=0,0 src=0,0 use_imm=1 imm=-3
 *   finish
 * Returns the length written, or a negative code if buf is too small. */
int tsr_disasm_insn(const tsr_config_t *cfg, const tsr_insn_t *in, char *buf, size_t n);
/* Write every instruction of a binary stream (16 bytes each) as text,
 * one per line; decoding errors are reported with the instruction index. */
int tsr_disasm_stream(const tsr_config_t *cfg, const uint8_t *bytes, size_t nbytes, void *file /* FILE* */);
/* Fill a buffer with the deterministic bytes of `.buffer ... random SEED`. */
void tsr_asm_random_fill(uint64_t seed, uint8_t *dst, size_t n);

#endif
