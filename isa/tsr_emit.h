/*
 * tsr_emit: artifacts generated from the one definition of config and ISA:
 * the SystemVerilog package the hardware is parameterized by, and the
 * instruction-field reference page. Neither is edited by hand.
 */
#ifndef TSR_EMIT_H
#define TSR_EMIT_H

#include <stdio.h>

#include "tsr_config.h"

/* SystemVerilog package `tsr_pkg` (constants only: yosys-compatible subset). */
int tsr_emit_sv(const tsr_config_t *cfg, const char *source, FILE *f);
/* Markdown field reference for the given config. */
int tsr_emit_doc(const tsr_config_t *cfg, const char *source, FILE *f);

#endif
