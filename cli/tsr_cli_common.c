/* tsr_cli_common: what the subcommands share (tsr_cli_common.h). */
#include "tsr_cli_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_file.h"
#include "tsr_sampled.h"

tsr_device_opts_t tsr_cli_devopts;

const char *tsr_cli_errtext(int rc)
{
    return tsr_errmsg()[0] ? tsr_errmsg() : tsr_errname(rc);
}

int tsr_cli_fail(int rc)
{
    fprintf(stderr, "%s: error: %s\n", TSR_CLI_PROG, tsr_cli_errtext(rc));
    return 1;
}

int tsr_cli_usage(const char *cmd, const char *msg)
{
    fprintf(stderr, "%s %s: %s (see `%s %s --help`)\n", TSR_CLI_PROG, cmd, msg, TSR_CLI_PROG, cmd);
    return 2;
}

int tsr_cli_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 0);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int tsr_cli_parse_u64(const char *s, uint64_t *out)
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

FILE *tsr_cli_open_out(const char *path)
{
    if (!path || !strcmp(path, "-"))
        return stdout;
    FILE *f = fopen(path, "w");
    if (!f)
        tsr_err(TSR_EIO, "%s: cannot open for writing: %s", path, strerror(errno));
    return f;
}

int tsr_cli_close_out(FILE *f, const char *path)
{
    if (f == stdout)
        return fflush(f) ? tsr_err(TSR_EIO, "write error on stdout") : TSR_OK;
    if (fclose(f))
        return tsr_err(TSR_EIO, "%s: write error", path);
    return TSR_OK;
}

/* ------------------------------------------------------- device options */

/* The options that take a bounded integer: code, bounds, where it goes. */
static int device_long(int c, const char *arg)
{
    long v;
    tsr_rtl_opts_t *r = &tsr_cli_devopts.rtl;
    switch (c) {
    case TSR_CLI_OPT_DRAM_LAT:
        if (tsr_cli_parse_long(arg, 1, 100000, &v)) return -1;
        r->dram_latency = (uint32_t)v;
        return 1;
    case TSR_CLI_OPT_DRAM_OUT:
        if (tsr_cli_parse_long(arg, 1, 32, &v)) return -1;
        r->dram_outstanding = (uint32_t)v;
        return 1;
    case TSR_CLI_OPT_THREADS:
        if (tsr_cli_parse_long(arg, 1, 64, &v)) return -1;
        r->threads = (int)v;
        return 1;
    case TSR_CLI_OPT_PROFILE_WINDOW:
        if (tsr_cli_parse_long(arg, 16, 1L << 30, &v)) return -1;
        r->profile_window = (uint32_t)v;
        return 1;
    case TSR_CLI_OPT_TIMELINE_MAX:
        if (tsr_cli_parse_long(arg, 1, 1L << 20, &v)) return -1;
        r->timeline_max = (uint64_t)v << 20;
        return 1;
    default: return 0;
    }
}

/* The options that take a count (u64; watchdog and budget nonzero). */
static int device_u64(int c, const char *arg)
{
    uint64_t u;
    tsr_rtl_opts_t *r = &tsr_cli_devopts.rtl;
    int nonzero = c == TSR_CLI_OPT_WATCHDOG || c == TSR_CLI_OPT_RUN_BUDGET;
    if (c != TSR_CLI_OPT_TRACE_START && c != TSR_CLI_OPT_TRACE_CYCLES && !nonzero)
        return 0;
    if (tsr_cli_parse_u64(arg, &u) || (nonzero && !u))
        return -1;
    switch (c) {
    case TSR_CLI_OPT_TRACE_START: r->trace_start = u; break;
    case TSR_CLI_OPT_TRACE_CYCLES: r->trace_cycles = u; break;
    case TSR_CLI_OPT_WATCHDOG: r->watchdog_cycles = u; break;
    default: tsr_cli_devopts.run_budget = u; break;
    }
    return 1;
}

int tsr_cli_device_option(int c, const char *arg)
{
    tsr_rtl_opts_t *r = &tsr_cli_devopts.rtl;
    char *end;
    switch (c) {
    case TSR_CLI_OPT_DRAM_BW:
        r->dram_bytes_per_cycle = strtod(arg, &end);
        return (*end || r->dram_bytes_per_cycle <= 0 || r->dram_bytes_per_cycle > 1024) ? -1 : 1;
    case TSR_CLI_OPT_TRACE: r->trace_path = arg; return 1;
    case TSR_CLI_OPT_PROFILE: r->profile_path = arg; return 1;
    case TSR_CLI_OPT_TIMELINE: r->timeline_path = arg; return 1;
    case TSR_CLI_OPT_TIMING_ONLY: r->timing_only = 1; return 1;
    case TSR_CLI_OPT_SAMPLE: {
        tsr_sample_spec_t sp;
        if (tsr_sample_parse(arg, &sp))
            return -1;
        tsr_cli_devopts.sample = arg;
        return 1;
    }
    case TSR_CLI_OPT_SAMPLE_SEED: return tsr_cli_parse_u64(arg, &tsr_cli_devopts.sample_seed) ? -1 : 1;
    default: {
        int d = device_long(c, arg);
        return d ? d : device_u64(c, arg);
    }
    }
}

const char *tsr_cli_device_option_msg(int c)
{
    /* the sample spec's own message names what is wrong with it */
    return c == TSR_CLI_OPT_SAMPLE || c == TSR_CLI_OPT_SAMPLE_SEED
               ? (c == TSR_CLI_OPT_SAMPLE ? tsr_errmsg() : "--sample-seed needs a non-negative integer")
               : "bad value for a device option";
}

const tsr_cli_dev_t *tsr_cli_dev(void)
{
    static const struct option dev_opts[] = {TSR_CLI_DEVICE_LONG_OPTIONS, {0, 0, 0, 0}};
    static const tsr_cli_dev_t d = {dev_opts, tsr_cli_device_option, &tsr_cli_devopts, TSR_CLI_DEVICE_OPTIONS_HELP};
    return &d;
}

int tsr_cli_base_option(const char *cmd, int c, const char *arg, tsr_cli_base_t *b)
{
    int d = tsr_cli_device_option(c, arg);
    if (d < 0) {
        tsr_cli_usage(cmd, tsr_cli_device_option_msg(c));
        return -1;
    }
    if (d > 0)
        return 1;
    switch (c) {
    case 'c': b->cfgname = arg; return 1;
    case 'b': b->backend = arg; return 1;
    case 's':
        if (tsr_cli_parse_u64(arg, &b->seed)) {
            tsr_cli_usage(cmd, "--seed needs a non-negative integer");
            return -1;
        }
        return 1;
    default: return 0;
    }
}

/* ------------------------------------------------- asm, disasm, verify, run */

int tsr_cli_prog_parse(int argc, char **argv, const char *cmd, const char *help, tsr_cli_prog_opts_t *o)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'},  {"output", required_argument, 0, 'o'},
        {"backend", required_argument, 0, 'b'}, {"seed", required_argument, 0, 's'},
        {"out-dir", required_argument, 0, 'd'}, {"timeout", required_argument, 0, 't'},
        {"quiet", no_argument, 0, 'q'},         {"help", no_argument, 0, 'h'},
        TSR_CLI_DEVICE_LONG_OPTIONS,            {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:o:b:s:d:t:qh", opts, NULL)) != -1) {
        int r = tsr_cli_base_option(cmd, c, optarg, &o->b);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        switch (c) {
        case 'o': o->out = optarg; break;
        case 'd': o->out_dir = optarg; break;
        case 'q': o->quiet = 1; break;
        case 't':
            if (tsr_cli_parse_long(optarg, -1, 86400000L, &o->timeout_ms)) {
                tsr_cli_usage(cmd, "--timeout needs milliseconds (-1 = none)");
                return -1;
            }
            break;
        case 'h': fputs(help, stdout); return -2;
        default: tsr_cli_usage(cmd, "bad option"); return -1;
        }
    }
    if (tsr_cli_devopts.rtl.timing_only) { /* (run writes every output buffer) */
        tsr_cli_usage(cmd, TSR_CLI_TIMING_ONLY_MSG);
        return -1;
    }
    return optind;
}

/* `file PATH` is relative to the program's directory (base), so programs
 * can be run from anywhere. The file may not be larger than the buffer
 * (checked before reading it). */
static int fill_file(const tsr_asm_buffer_t *b, const char *base, uint8_t *dst)
{
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
    return rc;
}

int tsr_cli_fill_buffer(const tsr_config_t *cfg, const tsr_asm_buffer_t *b, const char *base, uint8_t *dst)
{
    memset(dst, 0, (size_t)b->size);
    switch (b->init) {
    case TSR_INIT_RANDOM: tsr_asm_random_fill(b->seed, dst, (size_t)b->size); break;
    case TSR_INIT_UOPS:
        for (size_t k = 0; k < b->nuops; k++)
            for (uint32_t j = 0; j < cfg->uop_bytes; j++)
                dst[k * cfg->uop_bytes + j] = (uint8_t)(b->uops[k] >> (8 * j));
        break;
    case TSR_INIT_FILE: return fill_file(b, base, dst);
    default: break;
    }
    return TSR_OK;
}

/* ------------------------------------------------------------ demo, bench */

/* --kind, --reps and the sizes; 1 handled, 0 not one of them, -1 bad value. */
static int mm_option(const char *cmd, int c, const char *arg, tsr_cli_mm_opts_t *mo)
{
    long *dst = c == 'm' ? &mo->m : c == 'k' ? &mo->k : c == 'n' ? &mo->n : c == 'S' ? &mo->shift : NULL;
    switch (c) {
    case 'K':
        if (strcmp(arg, "matmul") && strcmp(arg, "gemm"))
            return tsr_cli_usage(cmd, "--kind is matmul, gemm or resnet18"), -1;
        mo->kind = arg;
        return 1;
    case 'R':
        if (tsr_cli_parse_long(arg, 1, 100000, &mo->reps))
            return tsr_cli_usage(cmd, "--reps needs 1..100000"), -1;
        return 1;
    case 'm': case 'k': case 'n': case 'S':
        if (tsr_cli_parse_long(arg, c == 'S' ? 0 : 1, c == 'S' ? 31 : 65536, dst))
            return tsr_cli_usage(cmd, c == 'S' ? "--shift needs 0..31" : "sizes must be 1..65536"), -1;
        return 1;
    default: return 0;
    }
}

int tsr_cli_mm_parse(int argc, char **argv, const char *cmd, const char *help, tsr_cli_mm_opts_t *mo)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"backend", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 's'},   {"shift", required_argument, 0, 'S'},
        {"kind", required_argument, 0, 'K'},   {"reps", required_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'},         TSR_CLI_DEVICE_LONG_OPTIONS, {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:b:s:m:k:n:h", opts, NULL)) != -1) {
        int r = tsr_cli_base_option(cmd, c, optarg, &mo->b);
        if (!r)
            r = mm_option(cmd, c, optarg, mo);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        if (c == 'h') {
            fputs(help, stdout);
            return -2;
        }
        return tsr_cli_usage(cmd, "bad option"), -1;
    }
    if (optind != argc)
        return tsr_cli_usage(cmd, "unexpected argument"), -1;
    return 0;
}

int tsr_cli_place(const char *cmd, const char *arg, tsr_onnx_opts_t *o)
{
    if (!tsr_onnx_parse_place(arg, o))
        return 0;
    fprintf(stderr, "%s %s: %s\n", TSR_CLI_PROG, cmd, tsr_errmsg());
    tsr_err_clear();
    return 2;
}
