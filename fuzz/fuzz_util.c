/* fuzz_util: shared helpers of the fuzz targets (see fuzz_util.h). */
#include "fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_asm.h"
#include "tsr_error.h"

void fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz: %s: %s\n", what, tsr_errmsg());
    abort();
}

const tsr_config_t *fuzz_preset(uint8_t sel, const char **name)
{
    static const char *const names[3] = {"default", "tiny", "large"};
    static tsr_config_t cfgs[3];
    static int loaded;
    if (!loaded) {
        for (int i = 0; i < 3; i++)
            if (tsr_config_load(names[i], &cfgs[i]))
                fuzz_fail("loading a preset");
        loaded = 1;
    }
    if (name)
        *name = names[sel % 3];
    return &cfgs[sel % 3];
}

void fuzz_check_text_roundtrip(const tsr_config_t *cfg, const tsr_insn_t *in)
{
    char text[512];
    tsr_program_t p;
    if (tsr_disasm_insn(cfg, in, text, sizeof text) < 0)
        fuzz_fail("disassembling a valid instruction");
    if (tsr_asm_parse(cfg, text, "<disasm>", &p))
        fuzz_fail(text);
    if (p.ninsns != 1 || memcmp(&p.insns[0], in, sizeof *in)) {
        fprintf(stderr, "fuzz: text %s assembles to another instruction\n", text);
        abort();
    }
    tsr_program_free(&p);
}
