/*
 * fuzz_util: helpers shared by the libFuzzer targets in fuzz/. A finding
 * must stop the fuzzer, so a broken property calls fuzz_fail (abort with
 * the reason) rather than returning an error.
 */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_isa.h"

/* Print "fuzz: <what>: <tsr_errmsg()>" and abort (libFuzzer saves the input). */
void fuzz_fail(const char *what) __attribute__((noreturn));
/* The preset named by a selector byte (default, tiny, large), loaded once. */
const tsr_config_t *fuzz_preset(uint8_t sel, const char **name);
/* Disassemble in, assemble the text again and demand the same instruction
 * (the canonical text must name every field). */
void fuzz_check_text_roundtrip(const tsr_config_t *cfg, const tsr_insn_t *in);

#endif
