/*
 * tsr_cli_infer: the `tessera infer` command (tsr_cli_infer.h). Why a
 * command of its own: a user arrives with a .onnx file and .npy inputs, not
 * with C calls; one command runs the model and says where each node ran.
 */
#include "tsr_cli_infer.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_file.h"
#include "tsr_sampled.h"
#include "tsr_npy.h"
#include "tsr_cli_pipe.h"
#include "tsr_onnx.h"

static const char *infer_help =
    "usage: tessera infer MODEL.onnx -i INPUT.npy [-o OUTPUT.npy] [--backend fsim|rtl]\n"
    "                     [--config CONFIG] [--labels LABELS.npy] [--tensor NAME=FILE.npy ...]\n"
    "                     [--placement-json FILE|-] [--place KIND=device|host[,...]] [--quiet]\n"
    "                     [device options]\n"
    "\n"
    "Import a quantized ONNX model (QLinear operator form or QDQ form), place\n"
    "every node on the device or the host, run it on INPUT (its first dimension\n"
    "is the batch when the model's is symbolic) and write the first graph\n"
    "output to OUTPUT. Prints the placement of every node and the per-layer\n"
    "table of each device segment (images/s count the batch's images).\n"
    "The input, labels and --tensor names are checked before the run; OUTPUT\n"
    "and the --tensor files are written only when all of them can be (staged\n"
    "next to each, then renamed): a failing run changes none of them.\n"
    "\n"
    "  --backend NAME    fsim or rtl (default fsim)\n"
    "  --config CONFIG   config file or preset (default: default)\n"
    "  --labels FILE     integer labels [N]: print the accuracy of the argmax of\n"
    "                    the output over its last axis\n"
    "  --tensor NAME=FILE  also write the value NAME (e.g. quantized logits, or a\n"
    "                    tensor inside a device segment: all are then kept) to\n"
    "                    FILE; repeatable (up to 64)\n"
    "  --placement-json FILE  also write where every node went as JSON (name in\n"
    "                    full, op, side, segment, host kernel, MACs, a host\n"
    "                    op's elements read + written; bytes to and from the\n"
    "                    segments per run) to FILE,\n"
    "                    with the outputs (all or nothing); '-': to stdout right\n"
    "                    after the import (with --quiet, the only thing on stdout)\n"
    TSR_CLI_PLACE_HELP
    "  --quiet           no placement and table\n";

/* Write out to out_path (if given) and tv[i] to tout[i], all or nothing:
 * each is first written whole to a staging file next to its destination
 * (tsr_npy_write: itself atomic), and only when all of them are written
 * are they renamed into place, so that a failure (a directory that does
 * not exist, a full disk) replaces none of the destinations. A device or
 * FIFO (-o /dev/null) is not staged: it is written in place, in the
 * second pass, since renaming over it would replace it with a file. */
static int write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return tsr_err(TSR_EIO, "%s: cannot create it: %s", path, strerror(errno));
    const int bad = fwrite(text, 1, len, f) != len;
    if (fclose(f) || bad)
        return tsr_err(TSR_EIO, "%s: write failed", path);
    return 0;
}

static int write_outputs(const char *out_path, const tsr_tensor_t *out, int nt, char *const *tout,
                         const tsr_tensor_t *tv, const char *json_path, const char *json, size_t json_len)
{
    const char *dst[66];
    const tsr_tensor_t *src[66];
    char *stage[66] = {0};
    int n = 0, rc = 0;
    if (out_path)
        dst[n] = out_path, src[n++] = out;
    for (int i = 0; i < nt; i++)
        dst[n] = tout[i], src[n++] = &tv[i];
    if (json_path)
        dst[n] = json_path, src[n++] = NULL; /* the placement JSON (text) */
    for (int i = 0; i < n && !rc; i++) {
        if (tsr_file_is_special(dst[i]))
            continue; /* a device or FIFO: written in place below, never renamed over */
        const size_t len = strlen(dst[i]) + 48;
        if (!(stage[i] = malloc(len)))
            rc = tsr_err(TSR_ENOMEM, "%s: out of memory", dst[i]);
        else {
            snprintf(stage[i], len, "%s.part.%ld.%d", dst[i], (long)getpid(), i);
            if ((rc = src[i] ? tsr_npy_write(stage[i], src[i]) : write_text(stage[i], json, json_len))) {
                /* the message names the destination the user gave, not the staging file */
                char msg[1024];
                const size_t sl = strlen(stage[i]);
                snprintf(msg, sizeof msg, "%s", tsr_errmsg());
                const char *why = strncmp(msg, stage[i], sl) || strncmp(msg + sl, ": ", 2) ? msg : msg + sl + 2;
                rc = tsr_err(rc, "%s: %s", dst[i], why);
            }
        }
    }
    for (int i = 0; i < n && !rc; i++) {
        if (!stage[i])
            rc = src[i] ? tsr_npy_write(dst[i], src[i]) : write_text(dst[i], json, json_len);
        else if (rename(stage[i], dst[i]))
            rc = tsr_err(TSR_EIO, "%s: cannot replace it: %s", dst[i], strerror(errno));
    }
    for (int i = 0; i < n; i++) {
        if (rc && stage[i])
            unlink(stage[i]); /* (already renamed: no such file, harmless) */
        free(stage[i]);
    }
    return rc;
}

/* The command line. */
typedef struct {
    const char *in_path, *out_path, *backend, *cfgname, *labels, *model;
    const char *json_path;      /* --placement-json: a file, or "-" for stdout */
    char *tname[64], *tout[64]; /* --tensor NAME=FILE */
    int ntensors, quiet;
    tsr_onnx_opts_t place;      /* --place */
} infer_args_t;

/* What a run holds (freed by infer_free). */
typedef struct {
    tsr_tensor_t in, out, lab, tv[64];
    tsr_onnx_t *m;
    tsr_device_t *d;
    char *json;                 /* the placement JSON, for a --placement-json file */
    size_t json_len;
} infer_state_t;

/* codes above the device options (1000..) */
enum { O_BACKEND = 3000, O_CONFIG, O_LABELS, O_TENSOR, O_QUIET, O_HELP, O_PJSON, O_PLACE };

/* --tensor NAME=FILE (arg is argv's, split in place): 0, or the exit status. */
static int add_tensor(char *arg, infer_args_t *a)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1] || a->ntensors == 64) {
        fprintf(stderr, "tessera infer: --tensor needs NAME=FILE (at most 64)\n");
        return 2;
    }
    *eq = 0;
    a->tname[a->ntensors] = arg;
    a->tout[a->ntensors++] = eq + 1;
    return 0;
}

/* One option other than a device option: 0, or the exit status (help: 0 via -1). */
static int infer_option(int c, char *arg, const tsr_cli_dev_t *dev, infer_args_t *a)
{
    switch (c) {
    case 'i': a->in_path = arg; return 0;
    case 'o': a->out_path = arg; return 0;
    case O_BACKEND: a->backend = arg; return 0;
    case O_CONFIG: a->cfgname = arg; return 0;
    case O_LABELS: a->labels = arg; return 0;
    case O_TENSOR: return add_tensor(arg, a);
    case O_QUIET: a->quiet = 1; return 0;
    case O_PJSON: a->json_path = arg; return 0;
    case O_PLACE: return tsr_cli_place("infer", arg, &a->place);
    case 'h':
    case O_HELP: fputs(infer_help, stdout); fputs(dev->help, stdout); return -1;
    default: fputs(infer_help, stderr); return 2;
    }
}

/* Parse argv into a: -1 to go on, else the exit status. */
static int infer_parse(int argc, char **argv, const tsr_cli_dev_t *dev, infer_args_t *a)
{
    struct option opts[64];
    static const struct option own[] = {
        {"input", required_argument, 0, 'i'},       {"output", required_argument, 0, 'o'},
        {"backend", required_argument, 0, O_BACKEND}, {"config", required_argument, 0, O_CONFIG},
        {"labels", required_argument, 0, O_LABELS}, {"tensor", required_argument, 0, O_TENSOR},
        {"quiet", no_argument, 0, O_QUIET},         {"placement-json", required_argument, 0, O_PJSON},
        {"place", required_argument, 0, O_PLACE},   {"help", no_argument, 0, O_HELP}};
    size_t no = 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        opts[no++] = own[i];
    for (size_t i = 0; dev->long_opts[i].name && no < 63; i++)
        opts[no++] = dev->long_opts[i];
    memset(&opts[no], 0, sizeof opts[no]);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "i:o:h", opts, NULL)) != -1) {
        int dv = dev->handle(c, optarg), r;
        if (dv < 0) {
            fprintf(stderr, "tessera infer: %s\n", tsr_cli_device_option_msg(c));
            return 2;
        }
        if (!dv && (r = infer_option(c, optarg, dev, a)))
            return r < 0 ? 0 : r;
    }
    if (optind != argc - 1 || !a->in_path) {
        fprintf(stderr, "tessera infer: expected MODEL.onnx and -i INPUT.npy\n%s", infer_help);
        return 2;
    }
    a->model = argv[optind];
    return -1;
}

/* Everything a run can be refused for before the device: the input, the
 * labels, the model and the --tensor names; then the placement is printed. */
static int infer_load(const infer_args_t *a, unsigned pflags, infer_state_t *s)
{
    int rc = tsr_npy_read(a->in_path, &s->in);
    if (!rc && (s->in.ndim < 1 || s->in.shape[0] < 1 || s->in.shape[0] > 65536))
        rc = tsr_err(TSR_EINVAL, "%s: the input needs a batch dimension of 1..65536", a->in_path);
    if (!rc && a->labels && !(rc = tsr_npy_read(a->labels, &s->lab)) &&
        (s->lab.dtype != TSR_DT_INT32 || s->lab.ndim != 1 || s->lab.shape[0] != s->in.shape[0]))
        rc = tsr_err(TSR_EINVAL, "%s: labels must be int32 [%lld], one per input in the batch", a->labels,
                     (long long)s->in.shape[0]);
    if (!rc)
        rc = tsr_onnx_load_opts(a->model, (int)s->in.shape[0], &a->place, &s->m);
    if (!rc) { /* the placement printed is the config's (activation tables on ACT_LUT configs) */
        tsr_config_t cfg;
        if (!(rc = tsr_config_load(a->cfgname, &cfg)))
            rc = tsr_onnx_set_target(s->m, &cfg);
    }
    for (int i = 0; i < a->ntensors && !rc; i++)
        rc = tsr_onnx_check_value(s->m, a->tname[i], pflags);
    if (!rc && !a->quiet)
        tsr_onnx_print_placement(s->m, stdout);
    if (!rc && a->json_path && !strcmp(a->json_path, "-"))
        rc = tsr_onnx_write_placement_json(s->m, stdout);
    else if (!rc && a->json_path) { /* kept in memory: written with the outputs, all or nothing */
        FILE *f = open_memstream(&s->json, &s->json_len);
        if (!f)
            return tsr_err(TSR_ENOMEM, "out of memory");
        rc = tsr_onnx_write_placement_json(s->m, f);
        if (fclose(f) && !rc)
            rc = tsr_err(TSR_ENOMEM, "out of memory");
    }
    return rc;
}

/* Open the device, prepare and run the model; the per-layer table. */
static int infer_exec(const infer_args_t *a, const tsr_cli_dev_t *dev, unsigned pflags, infer_state_t *s)
{
    tsr_config_t cfg;
    int rc = tsr_config_load(a->cfgname, &cfg);
    tsr_device_opts_t dopts = *dev->opts;
    if (!rc)
        rc = tsr_device_open(a->backend, &cfg, &dopts, &s->d);
    if (!rc)
        rc = tsr_onnx_prepare(s->m, &cfg, s->d, pflags);
    if (!rc)
        rc = tsr_onnx_run(s->m, &s->in, &s->out);
    if (!rc && !a->quiet)
        tsr_onnx_print_report(s->m, stdout);
    if (!rc) /* a sampled device's estimate and its bound: never left out, even with --quiet */
        tsr_sampled_print(s->d, a->quiet ? stderr : stdout);
    return rc;
}

/* The accuracy of the argmax over the last axis against the labels. */
static void print_accuracy(const infer_args_t *a, const infer_state_t *s, int64_t n, int64_t k)
{
    int64_t right = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *row = (const float *)s->out.data + i * k;
        int64_t best = 0;
        for (int64_t j = 1; j < k; j++)
            if (row[j] > row[best])
                best = j;
        right += best == ((const int32_t *)s->lab.data)[i];
    }
    printf("accuracy: %lld of %lld = %.2f%% (%s, backend %s)\n", (long long)right, (long long)n,
           100.0 * (double)right / (double)n, a->model, a->backend);
}

/* Check the output against --labels, read the --tensor values, write
 * every file (all or nothing), then the accuracy. */
static int infer_finish(const infer_args_t *a, infer_state_t *s)
{
    const tsr_tensor_t *out = &s->out;
    const int64_t n = out->ndim >= 1 ? out->shape[0] : 0, k = n ? (int64_t)(tsr_tensor_numel(out) / n) : 0;
    int rc = TSR_OK;
    if (a->labels && (out->dtype != TSR_DT_FLOAT32 || n != s->lab.shape[0] || k < 1))
        rc = tsr_err(TSR_EINVAL, "%s: --labels needs the output to be float [%lld, classes]", a->model,
                     (long long)s->lab.shape[0]);
    for (int i = 0; i < a->ntensors && !rc; i++)
        rc = tsr_onnx_read_value(s->m, a->tname[i], &s->tv[i]);
    if (!rc)
        rc = write_outputs(a->out_path, out, a->ntensors, a->tout, s->tv,
                           a->json_path && strcmp(a->json_path, "-") ? a->json_path : NULL, s->json, s->json_len);
    if (!rc && a->labels)
        print_accuracy(a, s, n, k);
    return rc;
}

static void infer_free(const infer_args_t *a, infer_state_t *s)
{
    tsr_tensor_free(&s->in);
    tsr_tensor_free(&s->out);
    tsr_tensor_free(&s->lab);
    for (int i = 0; i < a->ntensors; i++)
        tsr_tensor_free(&s->tv[i]);
    tsr_onnx_free(s->m);
    tsr_device_close(s->d);
    free(s->json);
}

int tsr_cli_infer(int argc, char **argv, const tsr_cli_dev_t *dev)
{
    for (int i = 1; i < argc; i++) /* several devices: the pipelined run (tsr_cli_pipe.c) has its own options */
        if (!strcmp(argv[i], "--devices") || !strncmp(argv[i], "--devices=", 10))
            return tsr_cli_infer_devices(argc, argv);
    infer_args_t a = {.backend = "fsim", .cfgname = "default"};
    int st = infer_parse(argc, argv, dev, &a);
    if (st >= 0)
        return st;
    if (tsr_cli_devopts.rtl.timing_only && (a.out_path || a.ntensors || a.labels))
        return tsr_cli_usage("infer", TSR_CLI_TIMING_ONLY_MSG);
    infer_state_t s;
    memset(&s, 0, sizeof s);
    const unsigned pflags = a.ntensors ? TSR_ONNX_KEEP_ALL : 0;
    /* Everything a run can be refused for is checked before it runs, and
     * every result is in memory before the first output file is written:
     * a failing command leaves OUT and the --tensor files as they were. */
    int rc = infer_load(&a, pflags, &s);
    if (!rc)
        rc = infer_exec(&a, dev, pflags, &s);
    if (!rc)
        rc = infer_finish(&a, &s);
    if (rc)
        fprintf(stderr, "tessera infer: %s\n", tsr_errmsg());
    infer_free(&a, &s);
    return rc ? 1 : 0;
}
