/* tsr_cli_disasm: `tessera disasm STREAM.bin` (tsr_cli_disasm.h). */
#include "tsr_cli_disasm.h"

#include <stdlib.h>

#include "tsr_asm.h"
#include "tsr_cli_common.h"
#include "tsr_error.h"
#include "tsr_file.h"

static const char *disasm_help =
    "usage: tessera disasm STREAM.bin [--config CONFIG] [-o OUT.s]\n"
    "\n"
    "Print each instruction in canonical assembly, one per line; assembling\n"
    "the output gives back the same bytes. Malformed instructions (bad opcode,\n"
    "memory type or nonzero reserved bits) are reported by index.\n"
    "  --config CONFIG   config file or preset (default: default)\n"
    "  -o OUT.s          output (default: stdout)\n";

int tsr_cli_disasm(int argc, char **argv)
{
    tsr_cli_prog_opts_t o = {.b = {.cfgname = "default"}};
    int i = tsr_cli_prog_parse(argc, argv, "disasm", disasm_help, &o);
    if (i < 0)
        return i == -2 ? 0 : 2;
    if (i != argc - 1)
        return tsr_cli_usage("disasm", "expected one STREAM.bin");
    tsr_config_t cfg;
    uint8_t *data = NULL;
    size_t n = 0;
    int rc = tsr_config_load(o.b.cfgname, &cfg);
    if (!rc)
        rc = tsr_file_read(argv[i], TSR_ASM_MAX_FILE, "instruction stream", &data, &n);
    if (rc)
        return tsr_cli_fail(rc);
    FILE *f = tsr_cli_open_out(o.out);
    if (!f) {
        free(data);
        return tsr_cli_fail(TSR_EIO);
    }
    rc = tsr_disasm_stream(&cfg, data, n, f);
    int rc2 = tsr_cli_close_out(f, o.out);
    free(data);
    if (rc)
        return tsr_cli_fail(tsr_err_prefix(rc, "%s: ", argv[i]));
    return rc2 ? tsr_cli_fail(rc2) : 0;
}
