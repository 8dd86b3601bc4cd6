/*
 * tessera: the command-line front end. Each subcommand is a thin wrapper
 * over libtessera (config, ISA tools, driver, JIT) so that everything the
 * CLI can do, a C program can do through the same API.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "tsr_asm.h"
#include "tsr_cli_fpga.h"
#include "tsr_cli_infer.h"
#include "tsr_cli_op.h"
#include "tsr_cli_run.h"
#include "tsr_config.h"
#include "tsr_conv2d.h"
#include "tsr_driver.h"
#include "tsr_emit.h"
#include "tsr_error.h"
#include "tsr_file.h"
#include "tsr_graph.h"
#include "tsr_isa.h"
#include "tsr_kcache.h"
#include "tsr_matmul.h"
#include "tsr_netdesc.h"
#include "tsr_oprun.h"
#include "tsr_regs.h"
#include "tsr_roofline.h"
#include "tsr_tappack.h"
#include "tsr_verify.h"

static const char *prog_name = "tessera";

/* Device options shared by every command that opens a device. */
static tsr_device_opts_t g_dev;

#define DEVICE_OPTIONS_HELP                                                                        \
    "device options (rtl backend; the DRAM ones also systemc):\n"                                                            \
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
    "                        transfers is larger is refused, an rtl run past it is stopped\n"

enum { OPT_DRAM_LAT = 1000, OPT_DRAM_BW, OPT_DRAM_OUT, OPT_TRACE, OPT_TRACE_START, OPT_TRACE_CYCLES,
       OPT_THREADS, OPT_WATCHDOG, OPT_PROFILE, OPT_PROFILE_WINDOW, OPT_RUN_BUDGET, OPT_TIMELINE,
       OPT_TIMELINE_MAX };

#define DEVICE_LONG_OPTIONS                                                                        \
    {"dram-latency", required_argument, 0, OPT_DRAM_LAT},                                          \
    {"dram-bw", required_argument, 0, OPT_DRAM_BW},                                                \
    {"dram-outstanding", required_argument, 0, OPT_DRAM_OUT},                                      \
    {"trace", required_argument, 0, OPT_TRACE},                                                    \
    {"trace-start", required_argument, 0, OPT_TRACE_START},                                        \
    {"trace-cycles", required_argument, 0, OPT_TRACE_CYCLES},                                      \
    {"threads", required_argument, 0, OPT_THREADS},                                                \
    {"watchdog", required_argument, 0, OPT_WATCHDOG},                                              \
    {"profile", required_argument, 0, OPT_PROFILE},                                                \
    {"profile-window", required_argument, 0, OPT_PROFILE_WINDOW},                                  \
    {"run-budget", required_argument, 0, OPT_RUN_BUDGET},                                          \
    {"timeline", required_argument, 0, OPT_TIMELINE},                                              \
    {"timeline-max", required_argument, 0, OPT_TIMELINE_MAX}

static int parse_long(const char *s, long lo, long hi, long *out);
static int parse_u64(const char *s, uint64_t *out);

/* Handles a device option; returns 1 if c was one, -1 on a bad value, 0 otherwise. */
static int device_option(int c, const char *arg)
{
    long v;
    uint64_t u;
    char *end;
    switch (c) {
    case OPT_DRAM_LAT:
        if (parse_long(arg, 1, 100000, &v)) return -1;
        g_dev.rtl.dram_latency = (uint32_t)v;
        return 1;
    case OPT_DRAM_BW:
        g_dev.rtl.dram_bytes_per_cycle = strtod(arg, &end);
        return (*end || g_dev.rtl.dram_bytes_per_cycle <= 0 || g_dev.rtl.dram_bytes_per_cycle > 1024) ? -1 : 1;
    case OPT_DRAM_OUT:
        if (parse_long(arg, 1, 32, &v)) return -1;
        g_dev.rtl.dram_outstanding = (uint32_t)v;
        return 1;
    case OPT_TRACE: g_dev.rtl.trace_path = arg; return 1;
    case OPT_TRACE_START:
        if (parse_u64(arg, &u)) return -1;
        g_dev.rtl.trace_start = u;
        return 1;
    case OPT_TRACE_CYCLES:
        if (parse_u64(arg, &u)) return -1;
        g_dev.rtl.trace_cycles = u;
        return 1;
    case OPT_THREADS:
        if (parse_long(arg, 1, 64, &v)) return -1;
        g_dev.rtl.threads = (int)v;
        return 1;
    case OPT_WATCHDOG:
        if (parse_u64(arg, &u) || !u) return -1;
        g_dev.rtl.watchdog_cycles = u;
        return 1;
    case OPT_PROFILE: g_dev.rtl.profile_path = arg; return 1;
    case OPT_PROFILE_WINDOW:
        if (parse_long(arg, 16, 1L << 30, &v)) return -1;
        g_dev.rtl.profile_window = (uint32_t)v;
        return 1;
    case OPT_TIMELINE: g_dev.rtl.timeline_path = arg; return 1;
    case OPT_TIMELINE_MAX:
        if (parse_long(arg, 1, 1L << 20, &v)) return -1;
        g_dev.rtl.timeline_max = (uint64_t)v << 20;
        return 1;
    case OPT_RUN_BUDGET:
        if (parse_u64(arg, &u) || !u) return -1;
        g_dev.run_budget = u;
        return 1;
    default: return 0;
    }
}

static int fail(int rc)
{
    fprintf(stderr, "%s: error: %s\n", prog_name, tsr_errmsg()[0] ? tsr_errmsg() : tsr_errname(rc));
    return 1;
}

static int usage_error(const char *cmd, const char *msg)
{
    fprintf(stderr, "%s %s: %s (see `%s %s --help`)\n", prog_name, cmd, msg, prog_name, cmd);
    return 2;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of the process (all threads): a noisy, shared machine inflates
 * wall time but not this. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 0);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s == '-')
        return -1;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static FILE *open_out(const char *path)
{
    if (!path || !strcmp(path, "-"))
        return stdout;
    FILE *f = fopen(path, "w");
    if (!f)
        tsr_err(TSR_EIO, "%s: cannot open for writing: %s", path, strerror(errno));
    return f;
}

static int close_out(FILE *f, const char *path)
{
    if (f == stdout)
        return fflush(f) ? tsr_err(TSR_EIO, "write error on stdout") : TSR_OK;
    if (fclose(f))
        return tsr_err(TSR_EIO, "%s: write error", path);
    return TSR_OK;
}

/* ---------------------------------------------------------------- config */

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

static int cmd_config(int argc, char **argv)
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
            return usage_error("config", "bad option");
    }
    if (optind != argc - 1)
        return usage_error("config", "expected exactly one CONFIG");
    tsr_config_t cfg;
    int rc = tsr_config_load(argv[optind], &cfg);
    if (rc)
        return fail(rc);
    if (!strcmp(sub, "show")) {
        tsr_config_print(&cfg, stdout);
        return 0;
    }
    if (!strcmp(sub, "emit-sv")) {
        FILE *f = open_out(out);
        if (!f)
            return fail(TSR_EIO);
        rc = tsr_emit_sv(&cfg, argv[optind], f);
        int rc2 = close_out(f, out);
        return rc || rc2 ? fail(rc ? rc : rc2) : 0;
    }
    if (!strcmp(sub, "emit-kernel-xml") || !strcmp(sub, "emit-regmap")) {
        FILE *f = open_out(out);
        if (!f)
            return fail(TSR_EIO);
        rc = sub[5] == 'k' ? tsr_emit_kernel_xml((unsigned)cfg.dram_bus_width, f) : tsr_regmap_doc(f);
        int rc2 = close_out(f, out);
        return rc || rc2 ? fail(rc ? rc : rc2) : 0;
    }
    return usage_error("config", "unknown subcommand (show, emit-sv, emit-kernel-xml, emit-regmap)");
}

/* ------------------------------------------------------------------- isa */

static const char *isa_help =
    "usage: tessera isa doc [--config CONFIG] [-o FILE]\n"
    "\n"
    "Write the instruction field reference (Markdown) generated from the\n"
    "field table for CONFIG (default: the default preset). isa/fields.md in\n"
    "the repository is this output for the default preset.\n";

static int cmd_isa(int argc, char **argv)
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
            return usage_error("isa", "bad option");
    }
    if (strcmp(argv[1], "doc") || optind != argc)
        return usage_error("isa", "expected `isa doc`");
    tsr_config_t cfg;
    int rc = tsr_config_load(cfgname, &cfg);
    if (rc)
        return fail(rc);
    FILE *f = open_out(out);
    if (!f)
        return fail(TSR_EIO);
    rc = tsr_emit_doc(&cfg, cfgname, f);
    int rc2 = close_out(f, out);
    return rc || rc2 ? fail(rc ? rc : rc2) : 0;
}

/* --------------------------------------------------- asm / disasm / verify */

static const char *asm_help =
    "usage: tessera asm PROGRAM.s [--config CONFIG] [-o OUT.bin]\n"
    "\n"
    "Assemble a program into its binary instruction stream (16 bytes per\n"
    "instruction, little-endian). Buffer declarations are resolved to their\n"
    "device addresses. The grammar is documented in isa/tsr_asm.h and README.\n"
    "  --config CONFIG   config file or preset (default: default)\n"
    "  -o OUT.bin        output (default: PROGRAM.bin next to the input)\n";

static const char *disasm_help =
    "usage: tessera disasm STREAM.bin [--config CONFIG] [-o OUT.s]\n"
    "\n"
    "Print each instruction in canonical assembly, one per line; assembling\n"
    "the output gives back the same bytes. Malformed instructions (bad opcode,\n"
    "memory type or nonzero reserved bits) are reported by index.\n"
    "  --config CONFIG   config file or preset (default: default)\n"
    "  -o OUT.s          output (default: stdout)\n";

static const char *verify_help =
    "usage: tessera verify PROGRAM.s [--config CONFIG]\n"
    "\n"
    "Statically check a program: dependency flags and token balance, deadlock\n"
    "(including full command and token queues), FINISH placement and ordering,\n"
    "on-chip ranges (on the uop contents the buffers get, filled as `run` fills\n"
    "them: uops, random SEED, file), data races between stages (accesses to the\n"
    "same on-chip rows that no token chain orders), STOREs into DRAM a uop LOAD\n"
    "reads, GEMM/ALU uop rows no earlier uop LOAD of the program wrote, and DRAM\n"
    "accesses against the declared buffers. Prints OK or the first error with\n"
    "its instruction index; exit status 0 or 1.\n"
    "  --config CONFIG   config file or preset (default: default)\n";

typedef struct {
    const char *cfgname;
    const char *out;
    const char *backend;
    const char *out_dir;
    uint64_t seed;
    long timeout_ms;
    int quiet;
} common_opts_t;

/* Parse the options shared by the program subcommands; returns the index of
 * the first positional argument, or -1 (usage error printed) / -2 (help printed). */
static int parse_common(int argc, char **argv, const char *cmd, const char *help, common_opts_t *o)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'},  {"output", required_argument, 0, 'o'},
        {"backend", required_argument, 0, 'b'}, {"seed", required_argument, 0, 's'},
        {"out-dir", required_argument, 0, 'd'}, {"timeout", required_argument, 0, 't'},
        {"quiet", no_argument, 0, 'q'},         {"help", no_argument, 0, 'h'},
        DEVICE_LONG_OPTIONS,                    {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:o:b:s:d:t:qh", opts, NULL)) != -1) {
        int d = device_option(c, optarg);
        if (d < 0) {
            usage_error(cmd, "bad value for a device option");
            return -1;
        }
        if (d > 0)
            continue;
        switch (c) {
        case 'c': o->cfgname = optarg; break;
        case 'o': o->out = optarg; break;
        case 'b': o->backend = optarg; break;
        case 'd': o->out_dir = optarg; break;
        case 'q': o->quiet = 1; break;
        case 's':
            if (parse_u64(optarg, &o->seed)) {
                usage_error(cmd, "--seed needs a non-negative integer");
                return -1;
            }
            break;
        case 't':
            if (parse_long(optarg, -1, 86400000L, &o->timeout_ms)) {
                usage_error(cmd, "--timeout needs milliseconds (-1 = none)");
                return -1;
            }
            break;
        case 'h': fputs(help, stdout); return -2;
        default: usage_error(cmd, "bad option"); return -1;
        }
    }
    return optind;
}

static int cmd_asm(int argc, char **argv)
{
    common_opts_t o = {.cfgname = "default"};
    int i = parse_common(argc, argv, "asm", asm_help, &o);
    if (i < 0)
        return i == -2 ? 0 : 2;
    if (i != argc - 1)
        return usage_error("asm", "expected one PROGRAM.s");
    tsr_config_t cfg;
    tsr_program_t p = {0};
    int rc = tsr_config_load(o.cfgname, &cfg);
    if (!rc)
        rc = tsr_asm_parse_file(&cfg, argv[i], &p);
    if (rc)
        return fail(rc);
    char defout[4096];
    if (!o.out) {
        const char *dot = strrchr(argv[i], '.');
        size_t stem = dot && !strchr(dot, '/') ? (size_t)(dot - argv[i]) : strlen(argv[i]);
        snprintf(defout, sizeof defout, "%.*s.bin", (int)stem, argv[i]);
        o.out = defout;
    }
    FILE *f = fopen(o.out, "wb");
    if (!f) {
        tsr_program_free(&p);
        return fail(tsr_err(TSR_EIO, "%s: cannot open for writing: %s", o.out, strerror(errno)));
    }
    for (size_t k = 0; k < p.ninsns && !rc; k++) {
        tsr_insn_bits_t b;
        uint8_t bytes[TSR_INSN_BYTES];
        if ((rc = tsr_insn_encode(&cfg, &p.insns[k], &b)))
            break;
        tsr_insn_bits_store(&b, bytes);
        if (fwrite(bytes, 1, sizeof bytes, f) != sizeof bytes)
            rc = tsr_err(TSR_EIO, "%s: write error", o.out);
    }
    if (fclose(f) && !rc)
        rc = tsr_err(TSR_EIO, "%s: write error", o.out);
    size_t n = p.ninsns;
    tsr_program_free(&p);
    if (rc) {
        remove(o.out);
        return fail(rc);
    }
    if (!o.quiet)
        fprintf(stderr, "%s: %zu instructions\n", o.out, n);
    return 0;
}

static int cmd_disasm(int argc, char **argv)
{
    common_opts_t o = {.cfgname = "default"};
    int i = parse_common(argc, argv, "disasm", disasm_help, &o);
    if (i < 0)
        return i == -2 ? 0 : 2;
    if (i != argc - 1)
        return usage_error("disasm", "expected one STREAM.bin");
    tsr_config_t cfg;
    uint8_t *data = NULL;
    size_t n = 0;
    int rc = tsr_config_load(o.cfgname, &cfg);
    if (!rc)
        rc = tsr_file_read(argv[i], TSR_ASM_MAX_FILE, "instruction stream", &data, &n);
    if (rc)
        return fail(rc);
    FILE *f = open_out(o.out);
    if (!f) {
        free(data);
        return fail(TSR_EIO);
    }
    rc = tsr_disasm_stream(&cfg, data, n, f);
    int rc2 = close_out(f, o.out);
    free(data);
    if (rc)
        return fail(tsr_err_prefix(rc, "%s: ", argv[i]));
    return rc2 ? fail(rc2) : 0;
}

/* `file PATH` is relative to the program's directory (base), so programs
 * can be run from anywhere. The file may not be larger than the buffer
 * (checked before reading it). Messages do not name the buffer: the caller
 * prefixes "buffer NAME: " once. */
static int fill_buffer(const tsr_config_t *cfg, const tsr_asm_buffer_t *b, const char *base,
                       uint8_t *dst)
{
    memset(dst, 0, (size_t)b->size);
    switch (b->init) {
    case TSR_INIT_RANDOM: tsr_asm_random_fill(b->seed, dst, (size_t)b->size); break;
    case TSR_INIT_UOPS:
        for (size_t k = 0; k < b->nuops; k++)
            for (uint32_t j = 0; j < cfg->uop_bytes; j++)
                dst[k * cfg->uop_bytes + j] = (uint8_t)(b->uops[k] >> (8 * j));
        break;
    case TSR_INIT_FILE: {
        tsr_file_t f;
        char path[4096];
        const char *slash = base ? strrchr(base, '/') : NULL;
        if (b->path[0] == '/' || !slash)
            snprintf(path, sizeof path, "%s", b->path);
        else
            snprintf(path, sizeof path, "%.*s/%s", (int)(slash - base), base, b->path);
        /* Straight into the buffer (no second copy): at most b->size bytes. */
        int rc = tsr_file_open(&f, path, b->size, "buffer file");
        if (!rc && !(rc = tsr_file_read_at(&f, 0, dst, (size_t)f.size, "contents")))
            rc = tsr_file_check_end(&f);
        tsr_file_close(&f);
        if (rc)
            return rc;
        break;
    }
    default: break;
    }
    return TSR_OK;
}

static int program_verify(const tsr_config_t *cfg, const tsr_program_t *p, const char *path);

static int cmd_verify(int argc, char **argv)
{
    common_opts_t o = {.cfgname = "default"};
    int i = parse_common(argc, argv, "verify", verify_help, &o);
    if (i < 0)
        return i == -2 ? 0 : 2;
    if (i != argc - 1)
        return usage_error("verify", "expected one PROGRAM.s");
    tsr_config_t cfg;
    tsr_program_t p = {0};
    int rc = tsr_config_load(o.cfgname, &cfg);
    if (!rc)
        rc = tsr_asm_parse_file(&cfg, argv[i], &p);
    /* Config and parse errors name their file already; verifier errors
     * name only the instruction. */
    if (!rc && (rc = program_verify(&cfg, &p, argv[i])))
        tsr_err_prefix(rc, "%s: ", argv[i]);
    tsr_program_free(&p);
    if (rc)
        return fail(rc);
    printf("%s: OK\n", argv[i]);
    return 0;
}

/* The declared buffers' contents, filled as `run` fills them (zero, random
 * SEED, uops, file) the first time the verifier reads one (it reads only
 * uop kernels), so the uop index checks see what a run would load. */
typedef struct {
    const tsr_config_t *cfg;
    const tsr_program_t *p;
    const char *path;            /* the program file (base of `file` paths) */
    uint8_t **bytes;             /* contents of each buffer, NULL until read */
    int err;                     /* first fill error, or TSR_OK */
    char msg[512];               /* its message */
} decl_image_t;

static int decl_read(void *ctx, uint64_t addr, void *dst, size_t n)
{
    decl_image_t *im = ctx;
    for (size_t k = 0; k < im->p->nbufs; k++) {
        const tsr_asm_buffer_t *b = &im->p->bufs[k];
        if (addr < b->addr || addr - b->addr > b->size || n > b->size - (addr - b->addr))
            continue;
        if (!im->bytes[k]) {
            int rc = TSR_OK;
            if (!(im->bytes[k] = malloc(b->size ? (size_t)b->size : 1)))
                rc = tsr_err(TSR_ENOMEM, "buffer %s: out of memory", b->name);
            else if ((rc = fill_buffer(im->cfg, b, im->path, im->bytes[k])))
                tsr_err_prefix(rc, "buffer %s: ", b->name);
            if (rc) {
                free(im->bytes[k]);
                im->bytes[k] = NULL;
                if (!im->err) {
                    im->err = rc;
                    snprintf(im->msg, sizeof im->msg, "%s", tsr_errmsg());
                }
                return rc;
            }
        }
        memcpy(dst, im->bytes[k] + (addr - b->addr), n);
        return TSR_OK;
    }
    return TSR_EFAULT;
}

static int program_verify(const tsr_config_t *cfg, const tsr_program_t *p, const char *path)
{
    int rc = TSR_OK;
    size_t nb = p->nbufs ? p->nbufs : 1;
    tsr_region_t *regs = calloc(nb, sizeof *regs);
    decl_image_t im = {cfg, p, path, calloc(nb, sizeof(uint8_t *)), TSR_OK, ""};
    if (!regs || !im.bytes) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < p->nbufs; k++)
        regs[k] = (tsr_region_t){p->bufs[k].addr, p->bufs[k].size, p->bufs[k].name};
    tsr_verify_opts_t vo = {regs, p->nbufs, 1, decl_read, &im};
    rc = tsr_verify(cfg, p->insns, p->ninsns, &vo);
    /* A kernel buffer that could not be filled fails `run` too, and its uops went unchecked. */
    if (!rc && im.err)
        rc = tsr_err(im.err, "%s", im.msg);
out:
    for (size_t k = 0; im.bytes && k < p->nbufs; k++)
        free(im.bytes[k]);
    free(im.bytes);
    free(regs);
    return rc;
}

/* ------------------------------------------------------------------- run */

static const char *run_help =
    "usage: tessera run PROGRAM.s [--config CONFIG] [--backend NAME] [--seed N]\n"
    "                  [--out-dir DIR] [--timeout MS] [--quiet]\n"
    "\n"
    "Allocate the program's buffers on a device, fill them (zero, random SEED,\n"
    "file PATH or uops), submit the stream (verified first), wait, write every\n"
    "`.output` buffer to DIR/NAME.bin and print the counters.\n"
    "  --config CONFIG   config file or preset (default: default)\n"
    "  --backend NAME    fsim (default), rtl (cycle-accurate Verilator model) or\n"
    "                    systemc (SystemC/TLM-2.0 timed model, cycles close to rtl)\n"
    "  --seed N          fsim stage interleaving: 0 = fixed order, else random\n"
    "  --out-dir DIR     where outputs go (default: current directory)\n"
    "  --timeout MS      give up waiting after MS milliseconds (default: none)\n"
    "  --quiet           do not print counters\n" DEVICE_OPTIONS_HELP;

static int cmd_run(int argc, char **argv)
{
    common_opts_t o = {.cfgname = "default", .backend = "fsim", .out_dir = ".", .timeout_ms = -1};
    int i = parse_common(argc, argv, "run", run_help, &o);
    if (i < 0)
        return i == -2 ? 0 : 2;
    if (i != argc - 1)
        return usage_error("run", "expected one PROGRAM.s");
    tsr_config_t cfg;
    tsr_program_t p = {0};
    tsr_device_t *dev = NULL;
    uint8_t *tmp = NULL;
    int rc = tsr_config_load(o.cfgname, &cfg);
    if (!rc)
        rc = tsr_asm_parse_file(&cfg, argv[i], &p);
    tsr_device_opts_t dopts = g_dev;
    dopts.seed = o.seed;
    dopts.rtl.verbose = 1;
    if (!rc)
        rc = tsr_device_open(o.backend, &cfg, &dopts, &dev);
    for (size_t k = 0; !rc && k < p.nbufs; k++) {
        const tsr_asm_buffer_t *b = &p.bufs[k];
        /* Device memory first: it bounds the buffer, so an absurd size is
         * refused before the host copy below is allocated. */
        rc = tsr_mem_alloc_at(dev, b->addr, b->size);
        free(tmp);
        tmp = NULL;
        if (!rc && !(tmp = malloc((size_t)b->size)))
            rc = tsr_err(TSR_ENOMEM, "out of memory for %llu bytes", (unsigned long long)b->size);
        if (!rc)
            rc = fill_buffer(&cfg, b, argv[i], tmp);
        if (!rc)
            rc = tsr_mem_write(dev, b->addr, tmp, b->size);
        if (rc)
            tsr_err_prefix(rc, "buffer %s: ", b->name);
    }
    double t0 = now_s();
    if (!rc)
        rc = tsr_submit(dev, p.insns, p.ninsns);
    if (!rc)
        rc = tsr_wait(dev, (int)o.timeout_ms);
    double t1 = now_s();
    for (size_t k = 0; !rc && k < p.nbufs; k++) {
        const tsr_asm_buffer_t *b = &p.bufs[k];
        if (!b->is_output)
            continue;
        free(tmp);
        tmp = malloc((size_t)b->size);
        if (!tmp) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            break;
        }
        if ((rc = tsr_mem_read(dev, b->addr, tmp, b->size)))
            break;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.bin", o.out_dir, b->name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(tmp, 1, (size_t)b->size, f) != b->size) {
            rc = tsr_err(TSR_EIO, "%s: cannot write: %s", path, strerror(errno));
            if (f)
                fclose(f);
            break;
        }
        if (fclose(f)) {
            rc = tsr_err(TSR_EIO, "%s: write error", path);
            break;
        }
        if (!o.quiet)
            printf("wrote %s (%llu bytes)\n", path, (unsigned long long)b->size);
    }
    if (!rc && !o.quiet) {
        tsr_counters_t ctr;
        tsr_read_counters(dev, &ctr);
        printf("%s: %zu instructions on %s in %.3f s\n", argv[i], p.ninsns, o.backend, t1 - t0);
        tsr_counters_print(&ctr, stdout);
    }
    free(tmp);
    tsr_device_close(dev);
    tsr_program_free(&p);
    return rc ? fail(rc) : 0;
}

/* ---------------------------------------------------- demo / bench (matmul) */

static const char *demo_help =
    "usage: tessera demo [--config CONFIG] [--backend NAME] [-m M] [-k K] [-n N]\n"
    "                    [--shift S] [--seed N]\n"
    "\n"
    "Run an int8 matrix multiply with requantization, C = clamp(round(A x B /\n"
    "2^S), -128, 127), on the device through the driver and the JIT, and\n"
    "compare every element with a plain C computation on the host. Prints\n"
    "the counters and PASS, or the first mismatching element and FAIL.\n"
    "  -m, -k, -n        matrix sizes (default 256, 256 or the longest K\n"
    "                    the buffers hold, 256; multiples of the config's\n"
    "                    BATCH, BLOCK_IN, BLOCK_OUT)\n"
    "  --shift S         requantization shift (default 8)\n"
    "  --seed N          random data seed (default 1)\n"
    "  --config, --backend as for `run`\n" DEVICE_OPTIONS_HELP;

static const char *bench_help =
    "usage: tessera bench [--config CONFIG] [--backend NAME] [--kind matmul|gemm|resnet18]\n"
    "                     [-m M] [-k K] [-n N] [--reps R]\n"
    "\n"
    "  --kind matmul  (default) the JIT's tiled, double-buffered int8 matmul\n"
    "                 (default 1024 x 1024 x 1024; DRAM traffic included)\n"
    "  --kind gemm    GEMM-bound: a first run loads the operands, a second run\n"
    "                 issues R GEMM instructions of K/BLOCK_IN-long reductions\n"
    "                 over the on-chip tile (default -m 256 -k 1024 -n 128\n"
    "                 --reps 8, clipped to the buffers); its cycles measure the\n"
    "                 GEMM core against 1 tensor op per cycle\n"
    "Prints instructions, tensor ops and MACs per second (wall and CPU time);\n"
    "on a timed backend (rtl) also cycles, tensor ops per cycle, MAC\n"
    "utilisation and simulated cycles per second.\n"
    "  --kind resnet18  the ResNet-18 convolution table (cycles, utilisation,\n"
    "                 roofline, DRAM bytes, JIT time per layer); its options:\n"
    "                 `tessera bench --kind resnet18 --help`\n" DEVICE_OPTIONS_HELP;

typedef struct {
    common_opts_t o;
    long m, k, n, shift, reps;
    const char *kind;
} mm_opts_t;

static int parse_mm(int argc, char **argv, const char *cmd, const char *help, mm_opts_t *mo)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"backend", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 's'},   {"shift", required_argument, 0, 'S'},
        {"kind", required_argument, 0, 'K'},   {"reps", required_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'},         DEVICE_LONG_OPTIONS, {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:b:s:m:k:n:h", opts, NULL)) != -1) {
        int d = device_option(c, optarg);
        if (d < 0)
            return usage_error(cmd, "bad value for a device option"), -1;
        if (d > 0)
            continue;
        long *dst = c == 'm' ? &mo->m : c == 'k' ? &mo->k : c == 'n' ? &mo->n : c == 'S' ? &mo->shift : NULL;
        switch (c) {
        case 'K':
            if (strcmp(optarg, "matmul") && strcmp(optarg, "gemm"))
                return usage_error(cmd, "--kind is matmul, gemm or resnet18"), -1;
            mo->kind = optarg;
            break;
        case 'R':
            if (parse_long(optarg, 1, 100000, &mo->reps))
                return usage_error(cmd, "--reps needs 1..100000"), -1;
            break;
        case 'c': mo->o.cfgname = optarg; break;
        case 'b': mo->o.backend = optarg; break;
        case 's':
            if (parse_u64(optarg, &mo->o.seed))
                return usage_error(cmd, "--seed needs a non-negative integer"), -1;
            break;
        case 'm': case 'k': case 'n': case 'S':
            if (parse_long(optarg, c == 'S' ? 0 : 1, c == 'S' ? 31 : 65536, dst))
                return usage_error(cmd, c == 'S' ? "--shift needs 0..31" : "sizes must be 1..65536"), -1;
            break;
        case 'h': fputs(help, stdout); return -2;
        default: return usage_error(cmd, "bad option"), -1;
        }
    }
    if (optind != argc)
        return usage_error(cmd, "unexpected argument"), -1;
    return 0;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Runs the matmul on the device; fills c_out (M x N) and timing. */
static int run_matmul(const mm_opts_t *mo, const int8_t *a, const int8_t *b, int8_t *c_out,
                      double *secs, tsr_counters_t *ctr, tsr_matmul_prog_t *info)
{
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    tsr_matmul_prog_t prog = {0};
    uint8_t *pa = NULL, *pb = NULL, *pc = NULL;
    uint64_t da = 0, db = 0, dc = 0;
    int m = (int)mo->m, k = (int)mo->k, n = (int)mo->n;
    tsr_device_opts_t dopts = g_dev;
    dopts.rtl.verbose = 1;
    int rc = tsr_config_load(mo->o.cfgname, &cfg);
    if (!rc)
        rc = tsr_device_open(mo->o.backend, &cfg, &dopts, &dev);
    if (rc)
        return rc;
    if (m % cfg.batch || k % cfg.block_in || n % cfg.block_out) {
        rc = tsr_err(TSR_EINVAL, "sizes %dx%dx%d must be multiples of %dx%dx%d for this config", m, k,
                     n, cfg.batch, cfg.block_in, cfg.block_out);
        goto out;
    }
    uint64_t na = tsr_matmul_a_bytes(&cfg, m, k), nb = tsr_matmul_b_bytes(&cfg, k, n);
    uint64_t nc = tsr_matmul_c_bytes(&cfg, m, n);
    pa = malloc(na);
    pb = malloc(nb);
    pc = malloc(nc);
    if (!pa || !pb || !pc) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    tsr_pack_a(&cfg, a, m, k, pa);
    tsr_pack_b(&cfg, b, k, n, pb);
    if ((rc = tsr_mem_alloc(dev, na, &da)) || (rc = tsr_mem_alloc(dev, nb, &db)) ||
        (rc = tsr_mem_alloc(dev, nc, &dc)) || (rc = tsr_mem_write(dev, da, pa, na)) ||
        (rc = tsr_mem_write(dev, db, pb, nb)))
        goto out;
    if ((rc = tsr_matmul_build(dev, da, db, dc, m, k, n, (int)mo->shift, &prog)))
        goto out;
    double t0 = now_s();
    if ((rc = tsr_submit(dev, prog.insns, prog.ninsns)) || (rc = tsr_wait(dev, -1)))
        goto out;
    *secs = now_s() - t0;
    if ((rc = tsr_mem_read(dev, dc, pc, nc)))
        goto out;
    tsr_unpack_c(&cfg, pc, m, n, c_out);
    tsr_read_counters(dev, ctr);
    *info = prog;
    info->insns = NULL;
out:
    tsr_matmul_free(dev, &prog);
    free(pa);
    free(pb);
    free(pc);
    tsr_device_close(dev);
    return rc;
}

static void random_matrices(uint64_t seed, int8_t *a, size_t na, int8_t *b, size_t nb)
{
    uint64_t s = seed;
    for (size_t i = 0; i < na; i++)
        a[i] = (int8_t)(splitmix(&s) & 0xff);
    for (size_t i = 0; i < nb; i++)
        b[i] = (int8_t)(splitmix(&s) & 0xff);
}

static int cmd_demo(int argc, char **argv)
{
    mm_opts_t mo = {.o = {.cfgname = "default", .backend = "fsim", .seed = 1}, .m = 256, .k = 0, .n = 256, .shift = 8};
    int r = parse_mm(argc, argv, "demo", demo_help, &mo);
    if (r)
        return r == -2 ? 0 : 2;
    if (!mo.k) {
        /* Default K 256, or the longest reduction the matmul lowering keeps
         * on chip for this config (half the input and weight buffers). */
        tsr_config_t cfg;
        if (tsr_config_load(mo.o.cfgname, &cfg))
            return fail(TSR_ECONFIG);
        uint32_t rows = (cfg.inp_depth < cfg.wgt_depth ? cfg.inp_depth : cfg.wgt_depth) / 2;
        mo.k = 256 < (long)rows * cfg.block_in ? 256 : (long)rows * cfg.block_in;
    }
    size_t m = (size_t)mo.m, k = (size_t)mo.k, n = (size_t)mo.n;
    int8_t *a = malloc(m * k), *b = malloc(k * n), *c = malloc(m * n);
    int rc = TSR_OK, status = 0;
    double secs = 0;
    tsr_counters_t ctr;
    tsr_matmul_prog_t info;
    if (!a || !b || !c) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    random_matrices(mo.o.seed, a, m * k, b, k * n);
    printf("tessera demo: C = clamp(round(A x B / 2^%ld)), A %zux%zu, B %zux%zu, int8, config %s, backend %s\n",
           mo.shift, m, k, k, n, mo.o.cfgname, mo.o.backend);
    if ((rc = run_matmul(&mo, a, b, c, &secs, &ctr, &info)))
        goto out;
    /* Host reference: naive loops, round half away from zero, saturate. */
    size_t bad = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            int64_t acc = 0;
            for (size_t q = 0; q < k; q++)
                acc += (int64_t)a[i * k + q] * b[q * n + j];
            int64_t v = acc;
            if (mo.shift > 0) {
                int64_t d = (int64_t)1 << mo.shift;
                v = acc >= 0 ? (acc + d / 2) / d : -((-acc + d / 2) / d);
            }
            v = v < -128 ? -128 : v > 127 ? 127 : v;
            if (c[i * n + j] != v && bad++ == 0)
                printf("first mismatch at C[%zu][%zu]: device %d, reference %lld\n", i, j,
                       c[i * n + j], (long long)v);
        }
    printf("%zu instructions, %llu tensor ops (%llu MACs), tiles of %dx%d blocks, %.3f s\n",
           info.ninsns, (unsigned long long)ctr.gemm_ops, (unsigned long long)ctr.macs, info.tile_m,
           info.tile_n, secs);
    tsr_counters_print(&ctr, stdout);
    if (bad) {
        printf("FAIL: %zu of %zu elements differ from the host reference\n", bad, m * n);
        status = 1;
    } else {
        printf("PASS: all %zu elements match the host reference\n", m * n);
    }
out:
    free(a);
    free(b);
    free(c);
    return rc ? fail(rc) : status;
}

/* GEMM-bound stream: inputs and weights loaded once; then `reps`
 * GEMMs over a tm x tn tile with a kb-long reduction per output row, the
 * same loop nest the matmul JIT emits. */
static int bench_gemm(const mm_opts_t *mo)
{
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    tsr_insn_t *insns = NULL;
    uint8_t *buf = NULL;
    uint64_t du = 0, di = 0, dw = 0;
    tsr_device_opts_t dopts = g_dev;
    dopts.rtl.verbose = 1;
    int rc = tsr_config_load(mo->o.cfgname, &cfg);
    if (!rc)
        rc = tsr_device_open(mo->o.backend, &cfg, &dopts, &dev);
    if (rc)
        return rc;
    long kb = mo->k / cfg.block_in, tm = mo->m / cfg.batch, tn = mo->n / cfg.block_out;
    if (kb < 1) kb = 1;
    if (kb > (long)cfg.uop_depth) kb = cfg.uop_depth;
    if (kb > (long)cfg.inp_depth) kb = cfg.inp_depth;
    if (kb > (long)cfg.wgt_depth) kb = cfg.wgt_depth;
    if (tm < 1) tm = 1;
    if (tn < 1) tn = 1;
    if (tm * kb > (long)cfg.inp_depth) tm = (long)cfg.inp_depth / kb;
    if (tn * kb > (long)cfg.wgt_depth) tn = (long)cfg.wgt_depth / kb;
    if (tm * tn > (long)cfg.acc_depth) tn = (long)cfg.acc_depth / tm;
    /* The loop factors must fit their (config-derived) fields. */
    long fmax_k = tsr_isa_field_max(&cfg, TSR_OP_GEMM, "src_factor_out"), fmax_w = tsr_isa_field_max(&cfg, TSR_OP_GEMM, "wgt_factor_in");
    if (kb > fmax_k) kb = fmax_k;
    if (kb > fmax_w) kb = fmax_w;
    if (tn > tsr_isa_field_max(&cfg, TSR_OP_GEMM, "dst_factor_out")) tn = tsr_isa_field_max(&cfg, TSR_OP_GEMM, "dst_factor_out");
    if (tm > 16383) tm = 16383;
    if (tn > 16383) tn = 16383;
    uint64_t nu = (uint64_t)kb * cfg.uop_bytes, ni = (uint64_t)tm * kb * cfg.inp_bytes, nw = (uint64_t)tn * kb * cfg.wgt_bytes;
    size_t ninsns = 6 + (size_t)mo->reps;
    insns = calloc(ninsns, sizeof *insns);
    buf = malloc(ni > nw ? (ni > nu ? ni : nu) : (nw > nu ? nw : nu));
    if (!insns || !buf) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = tsr_mem_alloc(dev, nu, &du)) || (rc = tsr_mem_alloc(dev, ni, &di)) || (rc = tsr_mem_alloc(dev, nw, &dw)))
        goto out;
    for (long i = 0; i < kb; i++) {
        tsr_uop_t u = {0, (uint32_t)i, (uint32_t)i};
        uint64_t raw;
        if ((rc = tsr_uop_encode(&cfg, &u, &raw)))
            goto out;
        for (uint32_t b = 0; b < cfg.uop_bytes; b++)
            buf[(size_t)i * cfg.uop_bytes + b] = (uint8_t)(raw >> (8 * b));
    }
    if ((rc = tsr_mem_write(dev, du, buf, nu)))
        goto out;
    uint64_t s = mo->o.seed + 1;
    for (uint64_t i = 0; i < ni; i++)
        buf[i] = (uint8_t)splitmix(&s);
    if ((rc = tsr_mem_write(dev, di, buf, ni)))
        goto out;
    for (uint64_t i = 0; i < nw; i++)
        buf[i] = (uint8_t)splitmix(&s);
    if ((rc = tsr_mem_write(dev, dw, buf, nw)))
        goto out;
    /* Run 1 loads the operands (on-chip buffers keep their contents
     * between runs); run 2 is the GEMM work alone, so its cycles measure the
     * GEMM core with data on chip. Run 2 loads its kb uops itself (a few
     * cycles): a stream may only read uop rows it loaded, which the
     * verifier checks. */
    tsr_insn_t *in = insns;
    in->opcode = TSR_OP_LOAD; in->mem_type = TSR_MEM_INP; in->dram_base = (uint32_t)(di / cfg.inp_bytes);
    in->y_size = 1; in->x_size = in->x_stride = (uint32_t)(tm * kb); in++;
    in->opcode = TSR_OP_LOAD; in->mem_type = TSR_MEM_WGT; in->dram_base = (uint32_t)(dw / cfg.wgt_bytes);
    in->y_size = 1; in->x_size = in->x_stride = (uint32_t)(tn * kb); in->push_next = 1; in++;
    in->opcode = TSR_OP_ALU; /* a no-op taking the loads' token */
    in->pop_prev = 1; in++;
    in->opcode = TSR_OP_FINISH; in++;
    size_t nload = (size_t)(in - insns);
    tsr_insn_t *gemm0 = in;
    in->opcode = TSR_OP_LOAD; in->mem_type = TSR_MEM_UOP; in->dram_base = (uint32_t)(du / cfg.uop_bytes);
    in->y_size = 1; in->x_size = in->x_stride = (uint32_t)kb; in++;
    for (long r = 0; r < mo->reps; r++, in++) {
        in->opcode = TSR_OP_GEMM;
        in->uop_end = (uint32_t)kb;
        in->iter_out = (uint32_t)tm;
        in->iter_in = (uint32_t)tn;
        in->dst_factor_out = (uint32_t)tn;
        in->dst_factor_in = 1;
        in->src_factor_out = (uint32_t)kb;
        in->wgt_factor_in = (uint32_t)kb;
    }
    in->opcode = TSR_OP_FINISH; in++;
    size_t ngemm = (size_t)(in - gemm0);
    double t0 = now_s();
    tsr_counters_t ld, ctr;
    if ((rc = tsr_submit(dev, insns, nload)) || (rc = tsr_wait(dev, -1)) ||
        (rc = tsr_read_counters(dev, &ld)) || (rc = tsr_reset_counters(dev)))
        goto out;
    double t1 = now_s(), c1 = cpu_s();
    if ((rc = tsr_submit(dev, gemm0, ngemm)) || (rc = tsr_wait(dev, -1)) || (rc = tsr_read_counters(dev, &ctr)))
        goto out;
    double secs = now_s() - t1, cpu = cpu_s() - c1;
    printf("bench: GEMM-bound, tile %ld x %ld blocks, reduction %ld, %ld GEMM instructions, config %s, backend %s\n",
           tm, tn, kb, mo->reps, mo->o.cfgname, mo->o.backend);
    printf("  gemm tensor ops    %llu\n", (unsigned long long)ctr.gemm_ops);
    printf("  MACs               %llu\n", (unsigned long long)ctr.macs);
    printf("  wall / CPU time    %.3f s / %.3f s (GEMM run)\n", secs, cpu);
    printf("  tensor ops/s       %.3e (simulator speed, per CPU second)\n", ctr.gemm_ops / cpu);
    if (ctr.cycles) {
        uint64_t busy = ctr.has_hw ? ctr.hw[TSR_CNT_COMPUTE_BUSY] : ctr.cycles;
        printf("  load run           %llu cycles (%.3f s)\n", (unsigned long long)ld.cycles, t1 - t0);
        printf("  GEMM run           %llu cycles (compute busy %llu)\n", (unsigned long long)ctr.cycles,
               (unsigned long long)busy);
        printf("  tensor ops/cycle   %.4f of 1 (GEMM run, data on chip, incl. fetch and drain)\n",
               (double)ctr.gemm_ops / (double)ctr.cycles);
        printf("  simulated cycles/s %.3e per CPU second (%.3e per wall second)\n", ctr.cycles / cpu,
               ctr.cycles / secs);
    }
out:
    free(insns);
    free(buf);
    tsr_device_close(dev);
    return rc;
}

/* ------------------------------------------------ bench --kind resnet18 */

/* Why: the headline number of the accelerator is how close real layers get
 * to their roofline, not a synthetic GEMM loop. Each ResNet-18 convolution
 * runs through the conv2d JIT (plan with the kernel cache, pack, exec) on
 * random int8 data with per-channel requantization; the table sets the
 * device's cycles against max(compute, compulsory DRAM traffic). */

static const char *bench_rn_help =
    "usage: tessera bench --kind resnet18 [--layers C2,C5] [--config CONFIG]\n"
    "                     [--backend NAME] [--check] [--seed N] [--no-jit-cache]\n"
    "                     [--no-tappack] [device options]\n"
    "\n"
    "Run the convolution layers of ResNet-18 (batch 1, int8 activations with\n"
    "zero point -128, int8 weights, int32 bias, per-channel requantization,\n"
    "ReLU) through tsr_conv2d on the device and print one row per layer:\n"
    "  C1 224x224 3->64 7x7 p3 s2    C2 56x56 64->64 3x3 p1 s1\n"
    "  C3 56x56 64->128 3x3 p1 s2    C4 56x56 64->128 1x1 p0 s2\n"
    "  C5 28x28 128->128 3x3 p1 s1   C6 28x28 128->256 3x3 p1 s2\n"
    "  C7 28x28 128->256 1x1 p0 s2   C8 14x14 256->256 3x3 p1 s1\n"
    "  C9 14x14 256->512 3x3 p1 s2   C10 14x14 256->512 1x1 p0 s2\n"
    "  C11 7x7 512->512 3x3 p1 s1    (input H x W, C_in -> C_out, kernel, pad, stride)\n"
    "\n"
    "  --layers LIST     comma-separated subset, e.g. C2,C5 (default: all)\n"
    "  --config CONFIG   config file or preset (default: default)\n"
    "  --backend NAME    fsim, rtl (default: the headline; fsim is untimed) or\n"
    "                    systemc (timed model, cycles close to rtl, ~1000x faster)\n"
    "  --check           also run every layer on fsim (random stage interleaving)\n"
    "                    and compare the output bytes exactly; a difference is\n"
    "                    reported (first differing element) and the exit status is 1\n"
    "  --seed N          random data seed (default 1)\n"
    "  --no-jit-cache    plan without the kernel cache (JIT ms = full generation)\n"
    "  --no-tappack      run C1 as the original 3-channel 7x7 conv (default: the\n"
    "                    exact tap-packed rewrite, jit/tsr_tappack.h: 21 channels,\n"
    "                    7x1 kernel over an input the host packs outside the\n"
    "                    device cycles; MACs, bound and compulsory bytes stay\n"
    "                    the original layer's; --check compares with fsim of the\n"
    "                    original conv)\n"
    "\n"
    "Columns: MACs of the layer (real tensor sizes, no padding); cycles (device\n"
    "counter); util = MACs / (cycles x peak), peak = BATCH x BLOCK_IN x BLOCK_OUT\n"
    "MACs per cycle; bound = roofline cycles = max(MACs / peak, compulsory /\n"
    "DRAM bytes per cycle); ratio = bound / cycles; limit = which term binds;\n"
    "moved = DRAM bytes the device moved (rtl: AXI read + write counters,\n"
    "instruction fetch included; fsim: LOAD + STORE + fetch bytes); compulsory\n"
    "= input + weights + 4-byte bias + output bytes, each moved once (real\n"
    "sizes, no padding); ratio_rd = the ratio with a stricter bound that leaves\n"
    "out input bytes no window reads (the rows and columns a strided 1x1 kernel\n"
    "skips: three quarters of its input; ratio can pass 1 there); JIT ms = plan\n"
    "time and jit =\n"
    "how the kernel was obtained (miss: generated, hit: device cache, disk:\n"
    "on-disk kernel cache, off: no cache); check = ok / DIFF / -. The on-disk\n"
    "cache is $TESSERA_JIT_CACHE_DIR, else $TESSERA_CACHE/jit, else\n"
    "~/.cache/tessera/jit (TESSERA_JIT_CACHE=off disables it, =mem keeps\n"
    "kernels in memory only).\n"
    "DRAM bytes per cycle is --dram-bw (8 by default, the 64-bit port), at most\n"
    "twice the bus width in bytes (one read and one write beat per cycle). Then a\n"
    "total line, the wall time of the whole table and the kernel cache counters.\n"
    DEVICE_OPTIONS_HELP;

typedef struct {
    const char *name;
    int hw, cin, cout, k, pad, stride;
} rn_layer_t;

static const rn_layer_t rn_layers[] = {
    {"C1", 224, 3, 64, 7, 3, 2},     {"C2", 56, 64, 64, 3, 1, 1},     {"C3", 56, 64, 128, 3, 1, 2},
    {"C4", 56, 64, 128, 1, 0, 2},    {"C5", 28, 128, 128, 3, 1, 1},   {"C6", 28, 128, 256, 3, 1, 2},
    {"C7", 28, 128, 256, 1, 0, 2},   {"C8", 14, 256, 256, 3, 1, 1},   {"C9", 14, 256, 512, 3, 1, 2},
    {"C10", 14, 256, 512, 1, 0, 2},  {"C11", 7, 512, 512, 3, 1, 1},
};
#define RN_COUNT ((int)(sizeof rn_layers / sizeof rn_layers[0]))

typedef struct {
    const char *cfgname, *backend;
    uint64_t seed;
    int check, no_cache;
    int no_tappack; /* 1: run few-channel layers (C1) unrewritten */
    int sel[RN_COUNT]; /* 1 = run this layer */
} rn_opts_t;

/* Layer data and parameters, from the seed. */
typedef struct {
    tsr_conv2d_params_t p;
    int32_t w_zp, *mult, *shift, *bias;
    int8_t *x, *w;
    size_t nx, nw, ny;
    int oh, ow;
} rn_data_t;

static void rn_free(rn_data_t *d)
{
    free(d->mult);
    free(d->shift);
    free(d->bias);
    free(d->x);
    free(d->w);
}

static int rn_make(const rn_layer_t *L, uint64_t seed, rn_data_t *d)
{
    memset(d, 0, sizeof *d);
    tsr_conv2d_params_t *p = &d->p;
    p->n = 1;
    p->c_in = L->cin;
    p->h = p->w = L->hw;
    p->c_out = L->cout;
    p->kh = p->kw = L->k;
    p->stride_h = p->stride_w = L->stride;
    p->pad_top = p->pad_left = p->pad_bottom = p->pad_right = L->pad;
    p->groups = 1;
    p->x_dtype = p->w_dtype = p->y_dtype = TSR_DT_INT8;
    p->x_zp = -128; /* post-ReLU activations, TFLite int8 style */
    p->y_zp = -128;
    p->act_min = -128; /* ReLU: clamp at the zero point */
    p->act_max = 127;
    p->w_zp = &d->w_zp;
    p->w_zp_count = 1;
    p->rq_count = L->cout;
    d->oh = (L->hw + 2 * L->pad - L->k) / L->stride + 1;
    d->ow = d->oh;
    d->nx = (size_t)L->cin * L->hw * L->hw;
    d->nw = (size_t)L->cout * L->cin * L->k * L->k;
    d->ny = (size_t)L->cout * d->oh * d->ow;
    d->mult = malloc(sizeof(int32_t) * (size_t)L->cout);
    d->shift = malloc(sizeof(int32_t) * (size_t)L->cout);
    d->bias = malloc(sizeof(int32_t) * (size_t)L->cout);
    d->x = malloc(d->nx);
    d->w = malloc(d->nw);
    if (!d->mult || !d->shift || !d->bias || !d->x || !d->w) {
        rn_free(d);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    p->mult = d->mult;
    p->shift = d->shift;
    uint64_t s = seed * 0x100000001b3ull + (uint64_t)(L - rn_layers);
    for (size_t i = 0; i < d->nx; i++)
        d->x[i] = (int8_t)splitmix(&s);
    for (size_t i = 0; i < d->nw; i++)
        d->w[i] = (int8_t)splitmix(&s);
    /* Accumulators have an rms of about sqrt(K) * 147 * 74; a multiplier in
     * [0.5, 1) and a right shift of log2(sqrt(K) * 128) put the outputs in
     * the int8 range without saturating most of them. */
    int kterms = L->cin * L->k * L->k;
    int sh = (int)lround(log2(sqrt((double)kterms) * 128.0));
    for (int o = 0; o < L->cout; o++) {
        d->mult[o] = (int32_t)((1u << 30) + (uint32_t)(splitmix(&s) % (1u << 30)));
        d->shift[o] = -sh - (int)(splitmix(&s) % 2);
        d->bias[o] = (int32_t)(splitmix(&s) % 32768) - 16384;
    }
    int rc = tsr_conv2d_check(p, &d->oh, &d->ow);
    if (rc)
        rn_free(d);
    return rc;
}

/* Plan (timed), pack, run and read one layer on dev (the library's runner). */
static int rn_run(tsr_device_t *dev, const tsr_conv2d_params_t *p, const void *x, const void *w,
                  const int32_t *bias, int8_t *y, double *jit_ms, int *kc_status, tsr_counters_t *ctr)
{
    tsr_oprun_info_t oi;
    int rc = tsr_oprun(dev, TSR_OPRUN_CONV2D, p, x, w, bias, y, &oi);
    if (jit_ms)
        *jit_ms = oi.plan_ms;
    if (kc_status)
        *kc_status = oi.kcache;
    *ctr = oi.ctr;
    return rc;
}

static int rn_parse(int argc, char **argv, rn_opts_t *o)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"backend", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 's'},   {"kind", required_argument, 0, 'K'},
        {"layers", required_argument, 0, 'L'}, {"check", no_argument, 0, 'C'},
        {"no-jit-cache", no_argument, 0, 'N'}, {"help", no_argument, 0, 'h'},
        {"no-tappack", no_argument, 0, 'T'},
        DEVICE_LONG_OPTIONS,                   {0, 0, 0, 0}};
    int c, any = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:b:s:h", opts, NULL)) != -1) {
        int dv = device_option(c, optarg);
        if (dv < 0)
            return usage_error("bench", "bad value for a device option"), -1;
        if (dv > 0)
            continue;
        switch (c) {
        case 'c': o->cfgname = optarg; break;
        case 'b': o->backend = optarg; break;
        case 'K':
            if (strcmp(optarg, "resnet18"))
                return usage_error("bench", "--kind is matmul, gemm or resnet18"), -1;
            break;
        case 's':
            if (parse_u64(optarg, &o->seed))
                return usage_error("bench", "--seed needs a non-negative integer"), -1;
            break;
        case 'C': o->check = 1; break;
        case 'N': o->no_cache = 1; break;
        case 'T': o->no_tappack = 1; break;
        case 'L': {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
                int k = -1;
                for (int i = 0; i < RN_COUNT; i++)
                    if (!strcasecmp(t, rn_layers[i].name))
                        k = i;
                if (k < 0) {
                    fprintf(stderr, "%s bench: unknown layer \"%s\" (C1..C11)\n", prog_name, t);
                    return usage_error("bench", "bad --layers"), -1;
                }
                o->sel[k] = 1;
                any = 1;
            }
            if (!any)
                return usage_error("bench", "--layers needs at least one of C1..C11"), -1;
            break;
        }
        case 'h': fputs(bench_rn_help, stdout); return -2;
        default: return usage_error("bench", "bad option"), -1;
        }
    }
    if (optind != argc)
        return usage_error("bench", "unexpected argument"), -1;
    if (!any)
        for (int i = 0; i < RN_COUNT; i++)
            o->sel[i] = 1;
    return 0;
}

static int bench_resnet18(int argc, char **argv)
{
    rn_opts_t o = {.cfgname = "default", .backend = "rtl", .seed = 1};
    int r = rn_parse(argc, argv, &o);
    if (r)
        return r == -2 ? 0 : 2;
    const double t_start = now_s();
    tsr_config_t cfg;
    tsr_device_t *dev = NULL, *chk = NULL;
    int8_t *y = NULL, *yc = NULL;
    int rc = tsr_config_load(o.cfgname, &cfg), diffs = 0;
    if (!rc)
        rc = tsr_cli_open_devices(o.backend, &cfg, &g_dev, o.check, o.seed, &dev, &chk);
    if (!rc && o.no_cache) {
        tsr_kcache_opts_t ko = {.disabled = 1};
        tsr_kcache_t *kc;
        rc = tsr_kcache_create(dev, &ko, &kc);
    }
    if (rc)
        goto out;
    const double peak = (double)cfg.macs_per_op;
    const double bw = tsr_roofline_dram_bw(&cfg, g_dev.rtl.dram_bytes_per_cycle);
    printf("bench: ResNet-18 convolutions, batch 1, int8, per-channel requantization; config %s (%dx%dx%d, peak %.0f "
           "MACs/cycle), backend %s, DRAM %.4g B/cycle, seed %llu%s\n",
           o.cfgname, cfg.batch, cfg.block_in, cfg.block_out, peak, o.backend, bw, (unsigned long long)o.seed,
           o.check ? ", checked against fsim" : "");
    printf("%-5s %-26s %11s %11s %6s %11s %6s %8s %-7s %11s %11s %8s %-4s %s\n", "layer", "shape", "MACs", "cycles",
           "util", "bound", "ratio", "ratio_rd", "limit", "moved", "compulsory", "JIT_ms", "jit", "check");
    fflush(stdout);
    char tp_notes[1024] = "";
    size_t tp_notes_len = 0;
    double tot_macs = 0, tot_cycles = 0, tot_bound = 0, tot_bound_rd = 0, tot_moved = 0, tot_comp = 0, tot_jit = 0;
    int timed = 1, nrun = 0;
    for (int li = 0; li < RN_COUNT; li++) {
        if (!o.sel[li])
            continue;
        const rn_layer_t *L = &rn_layers[li];
        rn_data_t d;
        if ((rc = rn_make(L, o.seed, &d))) {
            tsr_err_prefix(rc, "%s: ", L->name);
            goto out;
        }
        free(y);
        free(yc);
        y = malloc(d.ny);
        yc = malloc(d.ny);
        if (!y || !yc) {
            rn_free(&d);
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            goto out;
        }
        double jit_ms = 0;
        int kcs = 0;
        tsr_counters_t ctr, cc;
        memset(&ctr, 0, sizeof ctr);
        /* Few input channels (C1): run the exact tap-packed rewrite; the
         * host packing happens here, before the device counters start. */
        tsr_conv2d_params_t tp;
        uint8_t *x2 = NULL, *w2 = NULL;
        if (!o.no_tappack && tsr_tappack_applies(&d.p, &cfg)) {
            double tp0 = now_s();
            uint64_t nx2 = tsr_tappack_input_bytes(&d.p);
            x2 = malloc(nx2 ? (size_t)nx2 : 1);
            w2 = malloc(d.nw);
            rc = !x2 || !w2 ? tsr_err(TSR_ENOMEM, "out of memory") : tsr_tappack_rewrite(&d.p, d.w, &tp, w2);
            if (!rc)
                tsr_tappack_pack_input(&d.p, d.x, x2);
            if (!rc && tp_notes_len < sizeof tp_notes)
                tp_notes_len += (size_t)snprintf(
                    tp_notes + tp_notes_len, sizeof tp_notes - tp_notes_len,
                    "%s: tap-packed (jit/tsr_tappack.h): conv %d->%d %dx%d s%dx%d over the host-packed input "
                    "[%d,%d,%d,%d] (%llu bytes, packing %.2f ms on the host, not in the cycles); --no-tappack runs "
                    "the original\n",
                    L->name, tp.c_in, tp.c_out, tp.kh, tp.kw, tp.stride_h, tp.stride_w, tp.n, tp.c_in, tp.h, tp.w,
                    (unsigned long long)nx2, (now_s() - tp0) * 1e3);
        }
        if (!rc)
            rc = x2 ? rn_run(dev, &tp, x2, w2, d.bias, y, &jit_ms, &kcs, &ctr)
                    : rn_run(dev, &d.p, d.x, d.w, d.bias, y, &jit_ms, &kcs, &ctr);
        free(x2);
        free(w2);
        const char *check = "-";
        if (!rc && chk && !(rc = rn_run(chk, &d.p, d.x, d.w, d.bias, yc, NULL, NULL, &cc))) {
            check = "ok";
            for (size_t i = 0; i < d.ny; i++)
                if (y[i] != yc[i]) {
                    size_t ox = i % (size_t)d.ow, oy = i / d.ow % (size_t)d.oh, co = i / ((size_t)d.ow * d.oh);
                    fprintf(stderr, "%s: output differs from fsim at [0][%zu][%zu][%zu] (flat %zu of %zu): %s %d, fsim %d\n",
                            L->name, co, oy, ox, i, d.ny, o.backend, y[i], yc[i]);
                    check = "DIFF";
                    diffs++;
                    break;
                }
        }
        if (rc) {
            tsr_err_prefix(rc, "%s: ", L->name);
            rn_free(&d);
            goto out;
        }
        const double macs = tsr_roofline_conv2d_macs(&d.p);
        const double comp = tsr_roofline_conv2d_compulsory(&d.p, 0), comp_rd = tsr_roofline_conv2d_compulsory(&d.p, 1);
        const double moved = tsr_roofline_moved(&ctr);
        const tsr_roofline_t rl = tsr_roofline_bound(&cfg, macs, comp, bw);
        const double bound = rl.bound, bound_rd = tsr_roofline_bound(&cfg, macs, comp_rd, bw).bound;
        double cycles = (double)ctr.cycles;
        char shape[64], cyc[32], util[16], ratio[16], ratio_rd[16];
        snprintf(shape, sizeof shape, "%dx%d,%d->%d,%dx%d,s%d,p%d", L->hw, L->hw, L->cin, L->cout, L->k, L->k,
                 L->stride, L->pad);
        if (cycles > 0) {
            snprintf(cyc, sizeof cyc, "%.0f", cycles);
            snprintf(util, sizeof util, "%.3f", macs / (cycles * peak));
            snprintf(ratio, sizeof ratio, "%.3f", bound / cycles);
            snprintf(ratio_rd, sizeof ratio_rd, "%.3f", bound_rd / cycles);
        } else {
            timed = 0;
            snprintf(cyc, sizeof cyc, "-");
            snprintf(util, sizeof util, "-");
            snprintf(ratio, sizeof ratio, "-");
            snprintf(ratio_rd, sizeof ratio_rd, "-");
        }
        static const char *kcn[] = {"off", "miss", "hit", "disk"};
        printf("%-5s %-26s %11.0f %11s %6s %11.0f %6s %8s %-7s %11.0f %11.0f %8.2f %-4s %s\n", L->name, shape, macs,
               cyc, util, bound, ratio, ratio_rd, rl.memory_bound ? "memory" : "compute", moved, comp, jit_ms,
               kcs >= 0 && kcs < 4 ? kcn[kcs] : "?", check);
        fflush(stdout);
        tot_macs += macs;
        tot_cycles += cycles;
        tot_bound += bound;
        tot_bound_rd += bound_rd;
        tot_moved += moved;
        tot_comp += comp;
        tot_jit += jit_ms;
        nrun++;
        rn_free(&d);
    }
    char cyc[32] = "-", util[16] = "-", ratio[16] = "-", ratio_rd[16] = "-";
    if (timed && tot_cycles > 0) {
        snprintf(cyc, sizeof cyc, "%.0f", tot_cycles);
        snprintf(util, sizeof util, "%.3f", tot_macs / (tot_cycles * peak));
        snprintf(ratio, sizeof ratio, "%.3f", tot_bound / tot_cycles);
        snprintf(ratio_rd, sizeof ratio_rd, "%.3f", tot_bound_rd / tot_cycles);
    }
    printf("%-5s %-26s %11.0f %11s %6s %11.0f %6s %8s %-7s %11.0f %11.0f %8.2f %-4s %s\n", "total", "-", tot_macs,
           cyc, util, tot_bound, ratio, ratio_rd, "-", tot_moved, tot_comp, tot_jit, "-",
           !chk ? "-" : diffs ? "DIFF" : "ok");
    tsr_kcache_stats_t ks;
    memset(&ks, 0, sizeof ks);
    tsr_kcache_stats(tsr_kcache_get(dev), &ks);
    printf("wall time %.2f s for %d layers (data, plans, packing, runs%s); jit cache: %llu misses, %llu hits, %llu "
           "from disk, %.1f ms generating, %.1f ms saved\n",
           now_s() - t_start, nrun, chk ? ", fsim check runs" : "", (unsigned long long)ks.misses,
           (unsigned long long)ks.hits, (unsigned long long)ks.disk_hits, ks.gen_ns / 1e6, ks.saved_ns / 1e6);
    fputs(tp_notes, stdout);
out:
    free(y);
    free(yc);
    tsr_device_close(chk);
    tsr_device_close(dev);
    if (rc)
        return fail(rc);
    if (diffs) {
        fprintf(stderr, "%s bench: %d layer(s) differ from fsim\n", prog_name, diffs);
        return 1;
    }
    return 0;
}

static int cmd_bench(int argc, char **argv)
{
    mm_opts_t mo = {.o = {.cfgname = "default", .backend = "fsim", .seed = 1}, .m = 0, .k = 0, .n = 0,
                    .shift = 10, .reps = 8, .kind = "matmul"};
    for (int i = 1; i < argc; i++) /* --kind resnet18 has its own options */
        if ((!strcmp(argv[i], "--kind") && i + 1 < argc && !strcmp(argv[i + 1], "resnet18")) ||
            !strcmp(argv[i], "--kind=resnet18"))
            return bench_resnet18(argc, argv);
    int r = parse_mm(argc, argv, "bench", bench_help, &mo);
    if (r)
        return r == -2 ? 0 : 2;
    int gemm = !strcmp(mo.kind, "gemm");
    if (!mo.m) mo.m = gemm ? 256 : 1024;
    if (!mo.k) mo.k = 1024;
    if (!mo.n) mo.n = gemm ? 128 : 1024;
    if (gemm) {
        int rc = bench_gemm(&mo);
        return rc ? fail(rc) : 0;
    }
    size_t m = (size_t)mo.m, k = (size_t)mo.k, n = (size_t)mo.n;
    int8_t *a = malloc(m * k), *b = malloc(k * n), *c = malloc(m * n);
    int rc = TSR_OK;
    double secs = 0;
    tsr_counters_t ctr;
    tsr_matmul_prog_t info;
    if (!a || !b || !c) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    random_matrices(mo.o.seed, a, m * k, b, k * n);
    if ((rc = run_matmul(&mo, a, b, c, &secs, &ctr, &info)))
        goto out;
    uint64_t insns = 0;
    for (int i = 0; i < TSR_OP_COUNT; i++)
        insns += ctr.insns[i];
    printf("bench: matmul %zux%zux%zu, config %s, backend %s\n", m, k, n, mo.o.cfgname, mo.o.backend);
    printf("  instructions       %llu\n", (unsigned long long)insns);
    printf("  gemm tensor ops    %llu\n", (unsigned long long)ctr.gemm_ops);
    printf("  alu tensor ops     %llu\n", (unsigned long long)ctr.alu_ops);
    printf("  MACs               %llu\n", (unsigned long long)ctr.macs);
    printf("  DRAM bytes         %llu loaded, %llu stored\n",
           (unsigned long long)(ctr.bytes_loaded[TSR_MEM_INP] + ctr.bytes_loaded[TSR_MEM_WGT] + ctr.bytes_loaded[TSR_MEM_UOP]),
           (unsigned long long)ctr.bytes_stored);
    printf("  wall time          %.3f s\n", secs);
    printf("  tensor ops/s       %.3e\n", ctr.gemm_ops / secs);
    printf("  MACs/s             %.3e\n", ctr.macs / secs);
    printf("  instructions/s     %.3e\n", insns / secs);
    if (ctr.cycles) {
        tsr_config_t cfg;
        tsr_config_load(mo.o.cfgname, &cfg);
        printf("  cycles             %llu\n", (unsigned long long)ctr.cycles);
        printf("  MAC utilisation    %.1f%% (MACs / (cycles x %llu))\n",
               100.0 * (double)ctr.macs / ((double)ctr.cycles * (double)cfg.macs_per_op),
               (unsigned long long)cfg.macs_per_op);
        printf("  simulated cycles/s %.3e\n", ctr.cycles / secs);
        if (ctr.has_hw)
            for (int k = 0; k < TSR_CNT_COUNT; k++)
                printf("  hw %-16s %llu\n", tsr_cnt_name(k), (unsigned long long)ctr.hw[k]);
    }
out:
    free(a);
    free(b);
    free(c);
    return rc ? fail(rc) : 0;
}

/* -------------------------------------------------------------------- op */

/* `tessera op`: cli/tsr_cli_op.c, with this file's device options. */
static int cmd_op(int argc, char **argv)
{
    static const struct option dev_opts[] = {DEVICE_LONG_OPTIONS, {0, 0, 0, 0}};
    const tsr_cli_dev_t d = {dev_opts, device_option, &g_dev, DEVICE_OPTIONS_HELP};
    return tsr_cli_op(argc, argv, &d);
}

static int cmd_infer(int argc, char **argv)
{
    static const struct option dev_opts[] = {DEVICE_LONG_OPTIONS, {0, 0, 0, 0}};
    const tsr_cli_dev_t d = {dev_opts, device_option, &g_dev, DEVICE_OPTIONS_HELP};
    return tsr_cli_infer(argc, argv, &d);
}

/* ------------------------------------------------------------------ main */

/* ------------------------------------------------------------ net */

/* Why: the accelerator's job is a whole network, not one layer. `net`
 * builds ResNet-18 (jit/tsr_netdesc) as a graph (jit/tsr_graph), plans it
 * once and runs it end to end on the device, activations staying in device
 * DRAM from the first layer to the last, and prints the per-layer table
 * and the whole-network figures. The bit-exact comparison with the
 * independent reference is tests/test_graph.c (the CLI cannot link the
 * tests' reference); --check here compares the device with fsim. */

static const char *net_help =
    "usage: tessera net resnet18 [--backend NAME] [--config CONFIG] [--seed N]\n"
    "                            [--batch N] [--small HW,WIDTH,CLASSES] [--runs N]\n"
    "                            [--check] [--no-tappack] [--no-fuse] [--one-submission]\n"
    "                            [device options]\n"
    "\n"
    "Build ResNet-18 (ImageNet shape, int8 weights, per-channel requantization,\n"
    "uint8 activations after ReLU, seeded random weights calibrated so no\n"
    "tensor saturates) as a graph, plan it (kernels from the JIT cache, weights\n"
    "uploaded, activations placed with lifetimes), run it on a seeded random\n"
    "image and print one row per layer and the network's totals.\n"
    "\n"
    "  --backend NAME    fsim or rtl (default fsim)\n"
    "  --config CONFIG   config file or preset (default: default)\n"
    "  --seed N          weights and input seed (default 1)\n"
    "  --batch N         batch size (default 1)\n"
    "  --small H,W,K     the scaled-down network: input H x H, base width W\n"
    "                    (64 in ResNet-18), K classes\n"
    "  --runs N          executions timed (default 1; wall time is their mean)\n"
    "  --check           also run on fsim (random stage interleaving) with every add\n"
    "                    on its own (not fused) and compare every byte of every\n"
    "                    tensor both have (both keep all tensors, no buffer reuse;\n"
    "                    the output of a conv with a fused add never reaches DRAM);\n"
    "                    exit status 1 on a difference\n"
    "  --no-tappack      run the stem conv as it is (not tap-packed, jit/tsr_tappack.h)\n"
    "  --no-fuse         run every residual add on its own (default: in the epilogue\n"
    "                    of the conv that feeds it, table op conv+add)\n"
    "  --one-submission  every layer in one submission (streams joined by token\n"
    "                    barriers): whole-network counters only\n"
    "\n"
    "Columns as for `bench --kind resnet18`: MACs (unpadded), cycles (device\n"
    "counter deltas; - on fsim), util, bound = max(MACs / peak, compulsory /\n"
    "DRAM bytes per cycle), ratio = bound / cycles, moved = DRAM bytes moved\n"
    "(counters, instruction fetch included), compulsory = inputs + weights +\n"
    "bias + outputs once, plan_ms and how the kernel was obtained. Then the\n"
    "totals: cycles vs the sum of the bounds, images/s at the config's clock\n"
    "(the batch's images per execution, not executions per second),\n"
    "moved vs compulsory, the activation arena vs the sum of all tensors, plan\n"
    "time (first plan, then a second plan of the same network from the\n"
    "in-memory kernel cache) and wall time per execution of the batch.\n" DEVICE_OPTIONS_HELP;

static int cmd_net(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"backend", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 's'},   {"batch", required_argument, 0, 'n'},
        {"small", required_argument, 0, 'S'},  {"runs", required_argument, 0, 'r'},
        {"check", no_argument, 0, 'C'},        {"help", no_argument, 0, 'h'},
        {"no-tappack", no_argument, 0, 'T'},   {"one-submission", no_argument, 0, 'O'},
        {"no-fuse", no_argument, 0, 'F'},      DEVICE_LONG_OPTIONS,
        {0, 0, 0, 0}};
    const char *cfgname = "default", *backend = "fsim";
    unsigned flags = 0;
    uint64_t seed = 1;
    long batch = 1, runs = 1;
    int check = 0, small = 0, shw = 0, swidth = 0, sclasses = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:b:s:h", opts, NULL)) != -1) {
        int dv = device_option(c, optarg);
        if (dv < 0)
            return usage_error("net", "bad value for a device option");
        if (dv > 0)
            continue;
        switch (c) {
        case 'c': cfgname = optarg; break;
        case 'b': backend = optarg; break;
        case 's':
            if (parse_u64(optarg, &seed))
                return usage_error("net", "--seed needs a non-negative integer");
            break;
        case 'n':
            if (parse_long(optarg, 1, 64, &batch))
                return usage_error("net", "--batch needs 1..64");
            break;
        case 'r':
            if (parse_long(optarg, 1, 1000, &runs))
                return usage_error("net", "--runs needs 1..1000");
            break;
        case 'S':
            if (sscanf(optarg, "%d,%d,%d", &shw, &swidth, &sclasses) != 3 || shw < 1 || swidth < 1 || sclasses < 1)
                return usage_error("net", "--small needs H,WIDTH,CLASSES");
            small = 1;
            break;
        case 'C': check = 1; break;
        case 'T': flags |= TSR_GRAPH_NO_TAPPACK; break;
        case 'O': flags |= TSR_GRAPH_ONE_SUBMISSION; break;
        case 'F': flags |= TSR_GRAPH_NO_FUSE; break;
        case 'h': fputs(net_help, stdout); return 0;
        default: return usage_error("net", "bad option");
        }
    }
    if (optind != argc - 1 || strcmp(argv[optind], "resnet18"))
        return usage_error("net", "expected the network name: resnet18");
    tsr_config_t cfg;
    tsr_device_t *dev = NULL, *chk = NULL;
    tsr_netdesc_t nd;
    memset(&nd, 0, sizeof nd);
    tsr_graph_t *g = NULL, *g2 = NULL, *gc = NULL;
    uint8_t *in = NULL, *out = NULL, *a = NULL, *b = NULL;
    int diffs = 0, unfused = 0;
    if (check)
        flags |= TSR_GRAPH_KEEP_ALL;
    int rc = tsr_config_load(cfgname, &cfg);
    if (!rc)
        rc = tsr_cli_open_devices(backend, &cfg, &g_dev, check, seed, &dev, &chk);
    const double t_desc = now_s();
    if (!rc)
        rc = small ? tsr_netdesc_resnet18_small(seed, (int)batch, shw, swidth, sclasses, &nd)
                   : tsr_netdesc_resnet18(seed, (int)batch, &nd);
    const double desc_ms = (now_s() - t_desc) * 1e3;
    if (!rc)
        rc = tsr_graph_from_netdesc(&cfg, &nd, &g);
    if (rc)
        goto out;
    tsr_graph_set_dram_bw(g, g_dev.rtl.dram_bytes_per_cycle);
    if ((rc = tsr_graph_plan(g, dev, flags)))
        goto out;
    /* the same network planned again: every kernel from the in-memory cache */
    if ((rc = tsr_graph_from_netdesc(&cfg, &nd, &g2)) || (rc = tsr_graph_plan(g2, dev, flags)))
        goto out;
    tsr_graph_totals_t t2;
    tsr_graph_totals(g2, &t2);
    tsr_graph_free(g2);
    g2 = NULL;
    const uint64_t nin = tsr_netdesc_tensor_bytes(&nd, 0), nout = tsr_netdesc_tensor_bytes(&nd, nd.output);
    in = malloc(nin);
    out = malloc(nout);
    if (!in || !out) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    tsr_netdesc_random_input(&nd, seed, in);
    const void *ins[1] = {in};
    void *outs[1] = {out};
    double wall = 0;
    for (long r = 0; r < runs; r++) {
        const double t0 = now_s();
        if ((rc = tsr_graph_exec(g, ins, outs)))
            goto out;
        wall += now_s() - t0;
    }
    printf("net: %s, batch %ld, config %s (%dx%dx%d, %d MHz), backend %s, DRAM %.4g B/cycle, seed %llu%s\n", nd.name,
           batch, cfgname, cfg.batch, cfg.block_in, cfg.block_out, cfg.clock_mhz, backend,
           tsr_roofline_dram_bw(&cfg, g_dev.rtl.dram_bytes_per_cycle), (unsigned long long)seed,
           check ? ", every tensor kept and checked against fsim" : "");
    tsr_graph_print_report(g, stdout);
    printf("plan again from the in-memory kernel cache %.1f ms wall, %.1f ms CPU (operators %.1f ms, %d hits; weights "
           "%.1f ms); network description %.1f ms; wall time per execution (batch of %ld) %.3f s (%s, mean of %ld)\n",
           t2.plan_ms, t2.plan_cpu_ms, t2.jit_ms, t2.kc_hits, t2.upload_ms, desc_ms, batch, wall / (double)runs, backend,
           runs);
    int top = 0;
    for (uint64_t i = 1; i < nout && i < (uint64_t)nd.tensors[nd.output].c; i++)
        if ((int8_t)out[i] > (int8_t)out[top])
            top = (int)i;
    printf("output: tensor %d [%d,%d,%d,%d], class %d of the first image has the largest logit (%d)\n", nd.output,
           nd.tensors[nd.output].n, nd.tensors[nd.output].c, nd.tensors[nd.output].h, nd.tensors[nd.output].w, top,
           (int)(int8_t)out[top]);
    if (check) {
        /* the reference run has every add on its own: the fused epilogues
         * are checked byte for byte against the standalone adds */
        if ((rc = tsr_graph_from_netdesc(&cfg, &nd, &gc)) || (rc = tsr_graph_plan(gc, chk, flags | TSR_GRAPH_NO_FUSE)) ||
            (rc = tsr_graph_exec(gc, ins, NULL)))
            goto out;
        for (int i = 0; i < nd.nnodes && !rc; i++) {
            const int t = nd.nodes[i].out;
            if (tsr_graph_tensor_fused(g, t)) { /* (never in DRAM: the add's output is compared) */
                unfused++;
                continue;
            }
            const uint64_t n = tsr_netdesc_tensor_bytes(&nd, t);
            free(a);
            free(b);
            a = malloc(n);
            b = malloc(n);
            if (!a || !b) {
                rc = tsr_err(TSR_ENOMEM, "out of memory");
                break;
            }
            if ((rc = tsr_graph_read_tensor(g, t, a)) || (rc = tsr_graph_read_tensor(gc, t, b)))
                break;
            for (uint64_t k = 0; k < n; k++)
                if (a[k] != b[k]) {
                    fprintf(stderr, "net: tensor %d (output of node \"%s\") differs from fsim at flat %llu of %llu: "
                            "%s %d, fsim %d\n", t, nd.nodes[i].name, (unsigned long long)k, (unsigned long long)n,
                            backend, a[k], b[k]);
                    diffs++;
                    break;
                }
        }
        if (!rc)
            printf("check: %d of %d tensors differ from fsim with every add on its own (%d conv outputs fused "
                   "away, not compared)\n", diffs, nd.nnodes - unfused, unfused);
    }
out:
    free(in);
    free(out);
    free(a);
    free(b);
    tsr_graph_free(gc);
    tsr_graph_free(g2);
    tsr_graph_free(g);
    tsr_netdesc_free(&nd);
    tsr_device_close(chk);
    tsr_device_close(dev);
    if (rc)
        return fail(rc);
    return diffs ? 1 : 0;
}

static const char *main_help =
    "usage: tessera COMMAND [ARGS] (each command takes --help)\n"
    "\n"
    "  demo      run an int8 matmul + requantization on a device and check it\n"
    "  op        run one quantized operator (conv2d, dense, pools, add, relu, clip) on .npy files\n"
    "  run       assemble and run a program (.s) on a device\n"
    "  net       run a whole network (ResNet-18) on a device: per-layer table and totals\n"
    "  infer     run a quantized ONNX model on .npy inputs (device + host, placement printed)\n"
    "  bench     measure simulator throughput on a GEMM-heavy stream\n"
    "  asm       assemble a program into a binary instruction stream\n"
    "  disasm    print a binary stream as canonical assembly\n"
    "  verify    statically check a program\n"
    "  config    show a config's derived values, or emit the SystemVerilog package\n"
    "  isa       generate the instruction field reference\n"
    "  fpga      check that a config fits an FPGA board (yosys estimate), list boards\n";

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"demo", cmd_demo},     {"run", cmd_run},       {"bench", cmd_bench},
                {"asm", cmd_asm},       {"disasm", cmd_disasm}, {"verify", cmd_verify},
                {"config", cmd_config}, {"isa", cmd_isa},       {"op", cmd_op},
                {"net", cmd_net},       {"infer", cmd_infer},   {"fpga", tsr_cli_fpga}};
    if (argc < 2) {
        fputs(main_help, stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(main_help, stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name))
            return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown command \"%s\"\n\n%s", prog_name, argv[1], main_help);
    return 2;
}
