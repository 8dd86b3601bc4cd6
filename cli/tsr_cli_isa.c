/* tsr_cli_isa: `tessera isa doc` (tsr_cli_isa.h). */
#include "tsr_cli_isa.h"

#include <string.h>

#include "tsr_cli_common.h"
#include "tsr_config.h"
#include "tsr_emit.h"
#include "tsr_error.h"

static const char *isa_help =
    "usage: tessera isa doc [--config CONFIG] [-o FILE]\n"
    "\n"
    "Write the instruction field reference (Markdown) generated from the\n"
    "field table for CONFIG (default: the default preset). isa/fields.md in\n"
    "the repository is this output for the default preset.\n";

int tsr_cli_isa(int argc, char **argv)
{
    const char *cfgname = "default", *out = NULL;
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(isa_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    static const struct option opts[] = {{"config", required_argument, 0, 'c'}, {"output", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "c:o:h", opts, NULL)) != -1) {
        if (c == 'c')
            cfgname = optarg;
        else if (c == 'o')
            out = optarg;
        else if (c == 'h') {
            fputs(isa_help, stdout);
            return 0;
        } else
            return tsr_cli_usage("isa", "bad option");
    }
    if (strcmp(argv[1], "doc") || optind != argc)
        return tsr_cli_usage("isa", "expected `isa doc`");
    tsr_config_t cfg;
    int rc = tsr_config_load(cfgname, &cfg);
    if (rc)
        return tsr_cli_fail(rc);
    FILE *f = tsr_cli_open_out(out);
    if (!f)
        return tsr_cli_fail(TSR_EIO);
    rc = tsr_emit_doc(&cfg, cfgname, f);
    int rc2 = tsr_cli_close_out(f, out);
    return rc || rc2 ? tsr_cli_fail(rc ? rc : rc2) : 0;
}
