/*
 * fuzz_asm: assembler text -> tsr_asm_parse on the default preset. Any
 * program it accepts must encode, decode back to the same instructions,
 * disassemble to text that assembles to the same instructions, and go
 * through the static verifier (accept or reject, never crash) against the
 * buffers it declares.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tsr_asm.h"
#include "tsr_error.h"
#include "tsr_verify.h"

typedef struct {
    const tsr_config_t *cfg;
    const tsr_program_t *p;
} uop_ctx_t;

/* Uop contents of the declared .uops buffers (uop k is uop_bytes
 * little-endian bytes at k * uop_bytes, as `tessera run` fills them), for
 * the verifier's index checks. */
static int uop_read(void *ctx, uint64_t addr, void *dst, size_t n)
{
    const uop_ctx_t *u = ctx;
    const uint64_t ub = u->cfg->uop_bytes;
    for (size_t k = 0; k < u->p->nbufs; k++) {
        const tsr_asm_buffer_t *b = &u->p->bufs[k];
        if (b->init != TSR_INIT_UOPS || addr < b->addr || addr - b->addr + n > b->size)
            continue;
        uint8_t *d = dst;
        for (size_t i = 0; i < n; i++) {
            uint64_t off = addr - b->addr + i, w = off / ub;
            d[i] = w < b->nuops ? (uint8_t)(b->uops[w] >> (8 * (off % ub))) : 0;
        }
        return TSR_OK;
    }
    return TSR_EFAULT;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const tsr_config_t *cfg = fuzz_preset(0, NULL);
    char *text = malloc(size + 1);
    tsr_program_t p;
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    if (tsr_asm_parse(cfg, text, "fuzz.s", &p)) {
        free(text);
        return 0;
    }
    free(text);
    for (size_t i = 0; i < p.ninsns; i++) {
        tsr_insn_bits_t bits;
        tsr_insn_t back;
        if (tsr_insn_encode(cfg, &p.insns[i], &bits))
            fuzz_fail("encoding an assembled instruction");
        if (tsr_insn_decode(cfg, &bits, &back))
            fuzz_fail("decoding an encoded instruction");
        if (memcmp(&back, &p.insns[i], sizeof back))
            fuzz_fail("decode(encode(x)) differs from x");
        fuzz_check_text_roundtrip(cfg, &p.insns[i]);
    }
    tsr_region_t *regs = calloc(p.nbufs ? p.nbufs : 1, sizeof *regs);
    if (regs) {
        for (size_t k = 0; k < p.nbufs; k++)
            regs[k] = (tsr_region_t){p.bufs[k].addr, p.bufs[k].size, p.bufs[k].name};
        uop_ctx_t ctx = {cfg, &p};
        tsr_verify_opts_t vo = {regs, p.nbufs, 1, uop_read, &ctx};
        (void)tsr_verify(cfg, p.insns, p.ninsns, &vo);
        free(regs);
    }
    tsr_program_free(&p);
    return 0;
}
