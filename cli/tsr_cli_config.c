/* tsr_cli_config: `tessera config ...` (tsr_cli_config.h). */
#include "tsr_cli_config.h"

#include <string.h>

#include "tsr_cli_common.h"
#include "tsr_config.h"
#include "tsr_emit.h"
#include "tsr_error.h"
#include "tsr_regs.h"

static const char *config_help =
    "usage: tessera config show CONFIG\n"
    "       tessera config emit-sv CONFIG [-o FILE]\n"
    "       tessera config emit-kernel-xml CONFIG [-o FILE]\n"
    "       tessera config emit-regmap CONFIG [-o FILE]\n"
    "\n"
    "CONFIG is a JSON file (VTA's vta_config.json keys plus Tessera's) or a\n"
    "preset name: default, tiny, large.\n"
    "  show      print every key and derived value (buffer depths, field widths)\n"
    "  emit-sv   write the SystemVerilog package tsr_pkg for this config\n"
    "  emit-kernel-xml  write the Vitis RTL kernel description (kernel.xml):\n"
    "            ap_ctrl_hs, the arguments at their register offsets\n"
    "  emit-regmap      write the AXI4-Lite register map as a Markdown table\n"
    "  -o FILE   output file (default: stdout)\n";

/* Write one of the generated files of cfg (named cfgname) to out. */
static int emit(const char *sub, const tsr_config_t *cfg, const char *cfgname, const char *out)
{
    FILE *f = tsr_cli_open_out(out);
    if (!f)
        return tsr_cli_fail(TSR_EIO);
    int rc = !strcmp(sub, "emit-sv")           ? tsr_emit_sv(cfg, cfgname, f)
             : !strcmp(sub, "emit-kernel-xml") ? tsr_emit_kernel_xml((unsigned)cfg->dram_bus_width, f)
                                               : tsr_regmap_doc(f);
    int rc2 = tsr_cli_close_out(f, out);
    return rc || rc2 ? tsr_cli_fail(rc ? rc : rc2) : 0;
}

int tsr_cli_config(int argc, char **argv)
{
    const char *out = NULL;
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(config_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    static const struct option opts[] = {{"output", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        if (c == 'o')
            out = optarg;
        else if (c == 'h') {
            fputs(config_help, stdout);
            return 0;
        } else
            return tsr_cli_usage("config", "bad option");
    }
    if (optind != argc - 1)
        return tsr_cli_usage("config", "expected exactly one CONFIG");
    tsr_config_t cfg;
    int rc = tsr_config_load(argv[optind], &cfg);
    if (rc)
        return tsr_cli_fail(rc);
    if (!strcmp(sub, "show")) {
        tsr_config_print(&cfg, stdout);
        return 0;
    }
    if (!strcmp(sub, "emit-sv") || !strcmp(sub, "emit-kernel-xml") || !strcmp(sub, "emit-regmap"))
        return emit(sub, &cfg, argv[optind], out);
    return tsr_cli_usage("config", "unknown subcommand (show, emit-sv, emit-kernel-xml, emit-regmap)");
}
