/* tsr_cli_asm: `tessera asm PROGRAM.s` (tsr_cli_asm.h). */
#include "tsr_cli_asm.h"

#include <errno.h>
#include <string.h>

#include "tsr_asm.h"
#include "tsr_cli_common.h"
#include "tsr_error.h"
#include "tsr_isa.h"

static const char *asm_help =
    "usage: tessera asm PROGRAM.s [--config CONFIG] [-o OUT.bin]\n"
    "\n"
    "Assemble a program into its binary instruction stream (16 bytes per\n"
    "instruction, little-endian). Buffer declarations are resolved to their\n"
    "device addresses. The grammar is documented in isa/tsr_asm.h and docs/guide/simulate.md.\n"
    "  --config CONFIG   config file or preset (default: default)\n"
    "  -o OUT.bin        output (default: PROGRAM.bin next to the input)\n";

/* Encode every instruction of p into path; on error the file is removed. */
static int write_stream(const tsr_config_t *cfg, const tsr_program_t *p, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return tsr_err(TSR_EIO, "%s: cannot open for writing: %s", path, strerror(errno));
    int rc = TSR_OK;
    for (size_t k = 0; k < p->ninsns && !rc; k++) {
        tsr_insn_bits_t b;
        uint8_t bytes[TSR_INSN_BYTES];
        if ((rc = tsr_insn_encode(cfg, &p->insns[k], &b)))
            break;
        tsr_insn_bits_store(&b, bytes);
        if (fwrite(bytes, 1, sizeof bytes, f) != sizeof bytes)
            rc = tsr_err(TSR_EIO, "%s: write error", path);
    }
    if (fclose(f) && !rc)
        rc = tsr_err(TSR_EIO, "%s: write error", path);
    if (rc)
        remove(path);
    return rc;
}

int tsr_cli_asm(int argc, char **argv)
{
    tsr_cli_prog_opts_t o = {.b = {.cfgname = "default"}};
    int i = tsr_cli_prog_parse(argc, argv, "asm", asm_help, &o);
    if (i < 0)
        return i == -2 ? 0 : 2;
    if (i != argc - 1)
        return tsr_cli_usage("asm", "expected one PROGRAM.s");
    tsr_config_t cfg;
    tsr_program_t p = {0};
    int rc = tsr_config_load(o.b.cfgname, &cfg);
    if (!rc)
        rc = tsr_asm_parse_file(&cfg, argv[i], &p);
    if (rc)
        return tsr_cli_fail(rc);
    char defout[4096];
    if (!o.out) {
        const char *dot = strrchr(argv[i], '.');
        size_t stem = dot && !strchr(dot, '/') ? (size_t)(dot - argv[i]) : strlen(argv[i]);
        snprintf(defout, sizeof defout, "%.*s.bin", (int)stem, argv[i]);
        o.out = defout;
    }
    rc = write_stream(&cfg, &p, o.out);
    size_t n = p.ninsns;
    tsr_program_free(&p);
    if (rc)
        return tsr_cli_fail(rc);
    if (!o.quiet)
        fprintf(stderr, "%s: %zu instructions\n", o.out, n);
    return 0;
}
