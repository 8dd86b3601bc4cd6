/*
 * fuzz_decode_verify: binary instruction words -> decoder -> verifier.
 * Byte 0 picks the preset (default, tiny, large); the rest is a stream of
 * 16-byte little-endian instruction words. Every word that decodes must
 * encode back to the same bits and survive a disassemble/assemble round
 * trip; a stream that decodes completely goes through tsr_verify against a
 * fixed buffer set whose uop buffer holds deterministic pseudo-random uops.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tsr_asm.h"
#include "tsr_error.h"
#include "tsr_verify.h"

#define MAX_INSNS 4096 /* keeps one input well under a millisecond */

/* A fixed device memory map: one buffer per memory type. */
static const tsr_region_t regions[] = {
    {0x100000, 0x10000, "uop"}, {0x200000, 0x100000, "wgt"}, {0x400000, 0x100000, "inp"},
    {0x600000, 0x100000, "acc"}, {0x800000, 0x100000, "out"},
};

/* The uop buffer's contents: the deterministic bytes of `random 7`. */
static int uop_read(void *ctx, uint64_t addr, void *dst, size_t n)
{
    static uint8_t uops[0x10000];
    static int filled;
    (void)ctx;
    if (!filled) {
        tsr_asm_random_fill(7, uops, sizeof uops);
        filled = 1;
    }
    if (addr < regions[0].addr || addr - regions[0].addr + n > sizeof uops)
        return TSR_EFAULT;
    memcpy(dst, uops + (addr - regions[0].addr), n);
    return TSR_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const tsr_config_t *cfg = fuzz_preset(data[0], NULL);
    size_t n = (size - 1) / TSR_INSN_BYTES;
    if (n > MAX_INSNS)
        n = MAX_INSNS;
    tsr_insn_t *insns = calloc(n ? n : 1, sizeof *insns);
    if (!insns)
        return 0;
    size_t ok = 0;
    for (; ok < n; ok++) {
        tsr_insn_bits_t bits, again;
        tsr_insn_bits_load(data + 1 + ok * TSR_INSN_BYTES, &bits);
        if (tsr_insn_decode(cfg, &bits, &insns[ok]))
            break;
        if (tsr_insn_encode(cfg, &insns[ok], &again))
            fuzz_fail("encoding a decoded instruction");
        if (memcmp(&bits, &again, sizeof bits))
            fuzz_fail("encode(decode(bits)) differs from bits");
        fuzz_check_text_roundtrip(cfg, &insns[ok]);
    }
    /* A stream that stops decoding part-way is still verified up to there:
     * the verifier must cope with any prefix. */
    tsr_verify_opts_t vo = {regions, sizeof regions / sizeof regions[0], 1, uop_read, NULL};
    (void)tsr_verify(cfg, insns, ok, &vo);
    (void)tsr_verify(cfg, insns, ok, NULL);
    free(insns);
    return 0;
}
