/*
 * tsr_cli_common: what the `tessera` subcommands share, written once: the
 * one-line error and usage messages, number parsing, output files, the
 * device options (DRAM timing, waveform, profile, --run-budget, ...) every
 * command that opens a device takes, and the options of the program
 * commands (asm, disasm, verify, run) and of the matmul commands (demo,
 * bench). Each subcommand is its own file (cli/tsr_cli_NAME.c); main() and
 * the command table are cli/tessera.c.
 */
#ifndef TSR_CLI_COMMON_H
#define TSR_CLI_COMMON_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "tsr_asm.h"
#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_onnx.h"

#define TSR_CLI_PROG "tessera"

/* The device options as a command hands them to another (op, infer). */
typedef struct tsr_cli_dev {
    const struct option *long_opts;           /* the device long options, terminated by a zero entry */
    int (*handle)(int code, const char *arg); /* parse one: 1 done, -1 bad value, 0 not a device option */
    const tsr_device_opts_t *opts;            /* where handle() stores what it parsed (read after parsing) */
    const char *help;                         /* help text of the device options */
} tsr_cli_dev_t;

/* "tessera: error: MESSAGE" (the last library error, else rc's name); returns 1. */
int tsr_cli_fail(int rc);
/* The MESSAGE tsr_cli_fail prints (for a command that reports errors another way). */
const char *tsr_cli_errtext(int rc);
/* "tessera CMD: MSG (see `tessera CMD --help`)"; returns 2. */
int tsr_cli_usage(const char *cmd, const char *msg);
/* Whole-string integers: 0, or -1 when s is not one (in [lo, hi]; u64: no sign). */
int tsr_cli_parse_long(const char *s, long lo, long hi, long *out);
int tsr_cli_parse_u64(const char *s, uint64_t *out);
/* path NULL or "-": stdout. NULL on error (message set). */
FILE *tsr_cli_open_out(const char *path);
int tsr_cli_close_out(FILE *f, const char *path);

/* ------------------------------------------------------- placement options */

/* --place of the commands that import an ONNX model (tsr_onnx_opts_t). */
#define TSR_CLI_PLACE_HELP                                                                          \
    "  --place KIND=device|host[,KIND=...]  where the ops with both forms go (repeatable):\n"       \
    "                    concat (Concat along channels as device views; default device),\n"     \
    "                    attn-matmul (MatMul of two activations; default device),\n"             \
    "                    shuffle (ShuffleNet's channel shuffle and chunk as 1x1 convs;\n"        \
    "                    default device), softmax (default: on the device only next to device\n"\
    "                    work, ACT_LUT >= 4; device: every one that fits; host: none), bias\n"  \
    "                    (a Linear's bias Add as an exact depthwise conv; default device).\n"   \
    "                    device needs the device form to exist; choices other than the\n"      \
    "                    defaults are printed with the placement\n"

/* Add --place's argument to o: 0, or 2 after "tessera CMD: --place: ..." naming the bad kind or value. */
int tsr_cli_place(const char *cmd, const char *arg, tsr_onnx_opts_t *o);

/* ------------------------------------------------------- device options */

#define TSR_CLI_DEVICE_OPTIONS_HELP                                                                \
    "device options (rtl backend; the DRAM ones also systemc):\n"                                  \
    "  --dram-latency N      cycles from request to first data / write response (32)\n"          \
    "  --dram-bw B           DRAM bytes per cycle, reads and writes together (8)\n"             \
    "  --dram-outstanding N  bursts in flight per direction (8)\n"                              \
    "  --trace FILE.fst      dump a waveform (FST; view in GTKWave or Surfer)\n"                 \
    "  --trace-start C       first cycle dumped (0)\n"                                           \
    "  --trace-cycles N      cycles dumped (0 = to the end)\n"                                   \
    "  --threads N           Verilator threads (1; more rarely helps on 2 cores)\n"              \
    "  --watchdog N          cycles without progress before a run is declared stuck (200000)\n"    \
    "  --profile FILE.csv    utilisation timeline: per window of every run, the GEMM/ALU/dual\n"  \
    "                        ops, DRAM bytes read/written and instructions each stage completed\n" \
    "  --profile-window N    cycles per profile line (256)\n"                                  \
    "  --timeline FILE.json  rtl and systemc: every run as a Perfetto/Chrome trace (open it in\n" \
    "                        ui.perfetto.dev): stage lanes with each instruction, token waits,\n" \
    "                        DRAM bursts, GEMM/ALU pipes, counter tracks; 1 ns = 1 cycle\n"     \
    "  --timeline-max MB     timeline size limit; later events are left out, with a note (256)\n" \
    "  --run-budget N        most work one run may take (any backend): fsim work units, rtl\n"   \
    "                        cycles (2^32); a stream whose bound derived from its loops and\n"   \
    "                        transfers is larger is refused, an rtl run past it is stopped\n"   \
    "  --timing-only         systemc: the cycles without computing the data (many times faster;\n" \
    "                        outputs are not written, so commands that save them refuse it);\n" \
    "                        sampled: cycles only (that model, RTL windows without data checks)\n" \
    "  --sample SPEC         sampled backend: the submissions that also run on the RTL after a\n"  \
    "                        hand-off of DRAM: all, every:K, random:P (default random:0.1),\n"    \
    "                        pieces:P:K (with probability P a piece of 1/K of a submission) or\n" \
    "                        none; the whole run's RTL cycles are estimated from them, with a\n"  \
    "                        95% bound (docs/guide/simulate.md, Sampled RTL)\n"                 \
    "  --sample-seed N       sampled backend: the seed of random:P (0)\n"

/* Why a command that writes data refuses --timing-only. */
#define TSR_CLI_TIMING_ONLY_MSG                                                                     \
    "--timing-only computes no data: it is for the cycles of net, bench and infer (without -o, "   \
    "--tensor, --labels)"

enum { TSR_CLI_OPT_DRAM_LAT = 1000, TSR_CLI_OPT_DRAM_BW, TSR_CLI_OPT_DRAM_OUT, TSR_CLI_OPT_TRACE,
       TSR_CLI_OPT_TRACE_START, TSR_CLI_OPT_TRACE_CYCLES, TSR_CLI_OPT_THREADS, TSR_CLI_OPT_WATCHDOG,
       TSR_CLI_OPT_PROFILE, TSR_CLI_OPT_PROFILE_WINDOW, TSR_CLI_OPT_RUN_BUDGET, TSR_CLI_OPT_TIMELINE,
       TSR_CLI_OPT_TIMELINE_MAX, TSR_CLI_OPT_TIMING_ONLY, TSR_CLI_OPT_SAMPLE, TSR_CLI_OPT_SAMPLE_SEED };

/* Entries of a getopt_long table. */
#define TSR_CLI_DEVICE_LONG_OPTIONS                                                                \
    {"dram-latency", required_argument, 0, TSR_CLI_OPT_DRAM_LAT},                                  \
    {"dram-bw", required_argument, 0, TSR_CLI_OPT_DRAM_BW},                                        \
    {"dram-outstanding", required_argument, 0, TSR_CLI_OPT_DRAM_OUT},                              \
    {"trace", required_argument, 0, TSR_CLI_OPT_TRACE},                                            \
    {"trace-start", required_argument, 0, TSR_CLI_OPT_TRACE_START},                                \
    {"trace-cycles", required_argument, 0, TSR_CLI_OPT_TRACE_CYCLES},                              \
    {"threads", required_argument, 0, TSR_CLI_OPT_THREADS},                                        \
    {"watchdog", required_argument, 0, TSR_CLI_OPT_WATCHDOG},                                      \
    {"profile", required_argument, 0, TSR_CLI_OPT_PROFILE},                                        \
    {"profile-window", required_argument, 0, TSR_CLI_OPT_PROFILE_WINDOW},                          \
    {"run-budget", required_argument, 0, TSR_CLI_OPT_RUN_BUDGET},                                  \
    {"timeline", required_argument, 0, TSR_CLI_OPT_TIMELINE},                                      \
    {"timeline-max", required_argument, 0, TSR_CLI_OPT_TIMELINE_MAX},                              \
    {"timing-only", no_argument, 0, TSR_CLI_OPT_TIMING_ONLY},                                      \
    {"sample", required_argument, 0, TSR_CLI_OPT_SAMPLE},                                          \
    {"sample-seed", required_argument, 0, TSR_CLI_OPT_SAMPLE_SEED}

/* What the device options parsed so far set (one process, one command). */
extern tsr_device_opts_t tsr_cli_devopts;
/* Handle getopt code c: 1 if it was a device option, -1 on a bad value, 0 otherwise. */
int tsr_cli_device_option(int c, const char *arg);
/* What was wrong with device option c's value (after tsr_cli_device_option returned -1). */
const char *tsr_cli_device_option_msg(int c);
/* The device options for op and infer. */
const tsr_cli_dev_t *tsr_cli_dev(void);

/* ------------------------------------------- config, backend, seed, device */

/* The options most device commands share, as getopt codes 'c', 'b', 's'. */
typedef struct tsr_cli_base {
    const char *cfgname; /* --config */
    const char *backend; /* --backend */
    uint64_t seed;       /* --seed */
} tsr_cli_base_t;

/* Handle getopt code c for command cmd: --config, --backend, --seed or a
 * device option. 1 handled, 0 not one of them, -1 bad value (usage message
 * printed). */
int tsr_cli_base_option(const char *cmd, int c, const char *arg, tsr_cli_base_t *b);

/* ------------------------------------------------- asm, disasm, verify, run */

typedef struct tsr_cli_prog_opts {
    tsr_cli_base_t b;
    const char *out;     /* -o */
    const char *out_dir; /* --out-dir */
    long timeout_ms;     /* --timeout */
    int quiet;           /* --quiet */
} tsr_cli_prog_opts_t;

/* Parse the program commands' options; the index of the first positional
 * argument, or -1 (usage error printed) / -2 (help printed). */
int tsr_cli_prog_parse(int argc, char **argv, const char *cmd, const char *help, tsr_cli_prog_opts_t *o);
/* A program's declared buffer contents as `run` fills them (zero, random
 * SEED, uops, file PATH relative to the program file base); dst holds
 * b->size bytes. Messages do not name the buffer (callers prefix it). */
int tsr_cli_fill_buffer(const tsr_config_t *cfg, const tsr_asm_buffer_t *b, const char *base, uint8_t *dst);

/* ------------------------------------------------------------ demo, bench */

typedef struct tsr_cli_mm_opts {
    tsr_cli_base_t b;
    long m, k, n, shift, reps;
    const char *kind; /* bench: matmul or gemm */
} tsr_cli_mm_opts_t;

/* Parse demo's and bench's options (no positional arguments): 0, or -1
 * (usage error printed) / -2 (help printed). */
int tsr_cli_mm_parse(int argc, char **argv, const char *cmd, const char *help, tsr_cli_mm_opts_t *mo);

#endif
