/*
 * tsr_emit: artifacts generated from the one definition of config and ISA:
 * the SystemVerilog package the hardware is parameterized by, and the
 * instruction-field reference page. Neither is edited by hand.
 */
#ifndef TSR_EMIT_H
#define TSR_EMIT_H

#include <stdio.h>

#include "tsr_config.h"

/* TSR_OK if the RTL (hw/rtl) implements every feature cfg asks for; else
 * TSR_ECONFIG with one line naming the key (ACT_LUT > 0: the RTL has no
 * activation table unit yet). tsr_emit_sv, which every RTL build (the rtl
 * backend, synthesis, testbenches, FPGA flows) goes through, refuses such a
 * config before writing anything, and the rtl backend checks it first. */
int tsr_emit_rtl_supported(const tsr_config_t *cfg);
/* SystemVerilog package `tsr_pkg` (constants only: yosys-compatible subset);
 * refuses a config the RTL cannot build (tsr_emit_rtl_supported). */
int tsr_emit_sv(const tsr_config_t *cfg, const char *source, FILE *f);
/* Markdown field reference for the given config. */
int tsr_emit_doc(const tsr_config_t *cfg, const char *source, FILE *f);

#endif
