/*
 * tessera: the command-line front end. Each subcommand is a thin wrapper
 * over libtessera (config, ISA tools, driver, JIT, ONNX) in its own file,
 * cli/tsr_cli_NAME.c, so that everything the CLI can do, a C program can do
 * through the same API; what they share (messages, device options) is
 * cli/tsr_cli_common.c. This file is the command table and main().
 */
#include <stdio.h>
#include <string.h>

#include "tsr_cli_asm.h"
#include "tsr_cli_bench.h"
#include "tsr_cli_common.h"
#include "tsr_cli_config.h"
#include "tsr_cli_demo.h"
#include "tsr_cli_disasm.h"
#include "tsr_cli_fpga.h"
#include "tsr_cli_infer.h"
#include "tsr_cli_isa.h"
#include "tsr_cli_net.h"
#include "tsr_cli_op.h"
#include "tsr_cli_plan.h"
#include "tsr_cli_run.h"
#include "tsr_cli_train.h"
#include "tsr_cli_verify.h"

/* op, infer and train take the device options as an argument. */
static int cmd_op(int argc, char **argv) { return tsr_cli_op(argc, argv, tsr_cli_dev()); }
static int cmd_infer(int argc, char **argv) { return tsr_cli_infer(argc, argv, tsr_cli_dev()); }
static int cmd_train(int argc, char **argv) { return tsr_cli_train(argc, argv, tsr_cli_dev()); }

typedef struct tsr_cli_cmd {
    const char *name;
    int (*fn)(int argc, char **argv); /* argv[0] is the name; returns the exit status */
    const char *summary;              /* its line in `tessera --help` */
} tsr_cli_cmd_t;

/* In the order `tessera --help` lists them. */
static const tsr_cli_cmd_t cmds[] = {
    {"demo", tsr_cli_demo, "run an int8 matmul + requantization on a device and check it"},
    {"op", cmd_op, "run one quantized operator (conv2d, dense, pools, add, relu, clip) on .npy files"},
    {"run", tsr_cli_run, "assemble and run a program (.s) on a device"},
    {"net", tsr_cli_net, "run a whole network (ResNet-18) on a device: per-layer table and totals"},
    {"infer", cmd_infer, "run a quantized ONNX model on .npy inputs (device + host, placement printed)"},
    {"train", cmd_train, "fine-tune a quantized ONNX model's last layers on the device (on-device training)"},
    {"plan", tsr_cli_plan, "place a network over K devices as a pipeline (optimal planner, JIT costs)"},
    {"bench", tsr_cli_bench, "measure simulator throughput on a GEMM-heavy stream"},
    {"asm", tsr_cli_asm, "assemble a program into a binary instruction stream"},
    {"disasm", tsr_cli_disasm, "print a binary stream as canonical assembly"},
    {"verify", tsr_cli_verify, "statically check a program"},
    {"config", tsr_cli_config, "show a config's derived values, or emit the SystemVerilog package"},
    {"isa", tsr_cli_isa, "generate the instruction field reference"},
    {"fpga", tsr_cli_fpga, "check that a config fits an FPGA board (yosys estimate), list boards"},
};
#define NCMDS (sizeof cmds / sizeof cmds[0])

static void print_help(FILE *f)
{
    fputs("usage: tessera COMMAND [ARGS] (each command takes --help)\n\n", f);
    for (size_t i = 0; i < NCMDS; i++)
        fprintf(f, "  %-9s %s\n", cmds[i].name, cmds[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        print_help(stdout);
        return 0;
    }
    for (size_t i = 0; i < NCMDS; i++)
        if (!strcmp(argv[1], cmds[i].name))
            return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown command \"%s\"\n\n", TSR_CLI_PROG, argv[1]);
    print_help(stderr);
    return 2;
}
