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
#include "tsr_npy.h"
#include "tsr_onnx.h"

static const char *infer_help =
    "usage: tessera infer MODEL.onnx -i INPUT.npy [-o OUTPUT.npy] [--backend fsim|rtl]\n"
    "                     [--config CONFIG] [--labels LABELS.npy] [--tensor NAME=FILE.npy ...]\n"
    "                     [--quiet] [device options]\n"
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
    "  --quiet           no placement and table\n";

/* Write out to out_path (if given) and tv[i] to tout[i], all or nothing:
 * each is first written whole to a staging file next to its destination
 * (tsr_npy_write: itself atomic), and only when all of them are written
 * are they renamed into place, so that a failure (a directory that does
 * not exist, a full disk) replaces none of the destinations. */
static int write_outputs(const char *out_path, const tsr_tensor_t *out, int nt, char *const *tout,
                         const tsr_tensor_t *tv)
{
    const char *dst[65];
    const tsr_tensor_t *src[65];
    char *stage[65] = {0};
    int n = 0, rc = 0;
    if (out_path)
        dst[n] = out_path, src[n++] = out;
    for (int i = 0; i < nt; i++)
        dst[n] = tout[i], src[n++] = &tv[i];
    for (int i = 0; i < n && !rc; i++) {
        const size_t len = strlen(dst[i]) + 48;
        if (!(stage[i] = malloc(len)))
            rc = tsr_err(TSR_ENOMEM, "%s: out of memory", dst[i]);
        else {
            snprintf(stage[i], len, "%s.part.%ld.%d", dst[i], (long)getpid(), i);
            if ((rc = tsr_npy_write(stage[i], src[i]))) {
                /* the message names the destination the user gave, not the staging file */
                char msg[1024];
                const size_t sl = strlen(stage[i]);
                snprintf(msg, sizeof msg, "%s", tsr_errmsg());
                const char *why = strncmp(msg, stage[i], sl) || strncmp(msg + sl, ": ", 2) ? msg : msg + sl + 2;
                rc = tsr_err(rc, "%s: %s", dst[i], why);
            }
        }
    }
    for (int i = 0; i < n && !rc; i++)
        if (rename(stage[i], dst[i]))
            rc = tsr_err(TSR_EIO, "%s: cannot replace it: %s", dst[i], strerror(errno));
    for (int i = 0; i < n; i++) {
        if (rc && stage[i])
            unlink(stage[i]); /* (already renamed: no such file, harmless) */
        free(stage[i]);
    }
    return rc;
}

int tsr_cli_infer(int argc, char **argv, const tsr_cli_dev_t *dev)
{
    /* codes above the device options (1000..) */
    enum { O_BACKEND = 3000, O_CONFIG, O_LABELS, O_TENSOR, O_QUIET, O_HELP };
    struct option opts[64];
    static const struct option own[] = {
        {"input", required_argument, 0, 'i'},       {"output", required_argument, 0, 'o'},
        {"backend", required_argument, 0, O_BACKEND}, {"config", required_argument, 0, O_CONFIG},
        {"labels", required_argument, 0, O_LABELS}, {"tensor", required_argument, 0, O_TENSOR},
        {"quiet", no_argument, 0, O_QUIET},
        {"help", no_argument, 0, O_HELP}};
    size_t no = 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        opts[no++] = own[i];
    for (size_t i = 0; dev->long_opts[i].name && no < 63; i++)
        opts[no++] = dev->long_opts[i];
    memset(&opts[no], 0, sizeof opts[no]);
    const char *in_path = NULL, *out_path = NULL, *backend = "fsim", *cfgname = "default", *labels = NULL;
    char *tname[64], *tout[64];
    int ntensors = 0, quiet = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "i:o:h", opts, NULL)) != -1) {
        int dv = dev->handle(c, optarg);
        if (dv < 0) {
            fprintf(stderr, "tessera infer: bad value for a device option\n");
            return 2;
        }
        if (dv > 0)
            continue;
        switch (c) {
        case 'i': in_path = optarg; break;
        case 'o': out_path = optarg; break;
        case O_BACKEND: backend = optarg; break;
        case O_CONFIG: cfgname = optarg; break;
        case O_LABELS: labels = optarg; break;
        case O_TENSOR: {
            char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || !eq[1] || ntensors == 64) {
                fprintf(stderr, "tessera infer: --tensor needs NAME=FILE (at most 64)\n");
                return 2;
            }
            *eq = 0;
            tname[ntensors] = optarg;
            tout[ntensors++] = eq + 1;
            break;
        }
        case O_QUIET: quiet = 1; break;
        case 'h':
        case O_HELP: fputs(infer_help, stdout); fputs(dev->help, stdout); return 0;
        default: fputs(infer_help, stderr); return 2;
        }
    }
    if (optind != argc - 1 || !in_path) {
        fprintf(stderr, "tessera infer: expected MODEL.onnx and -i INPUT.npy\n%s", infer_help);
        return 2;
    }
    tsr_tensor_t in, out, lab, tv[64];
    memset(&in, 0, sizeof in), memset(&out, 0, sizeof out), memset(&lab, 0, sizeof lab), memset(tv, 0, sizeof tv);
    tsr_onnx_t *m = NULL;
    tsr_device_t *d = NULL;
    tsr_config_t cfg;
    const unsigned pflags = ntensors ? TSR_ONNX_KEEP_ALL : 0;
    /* Everything a run can be refused for is checked before it runs, and
     * every result is in memory before the first output file is written:
     * a failing command leaves OUT and the --tensor files as they were. */
    int rc = tsr_npy_read(in_path, &in);
    if (!rc && (in.ndim < 1 || in.shape[0] < 1 || in.shape[0] > 65536))
        rc = tsr_err(TSR_EINVAL, "%s: the input needs a batch dimension of 1..65536", in_path);
    if (!rc && labels && !(rc = tsr_npy_read(labels, &lab)) &&
        (lab.dtype != TSR_DT_INT32 || lab.ndim != 1 || lab.shape[0] != in.shape[0]))
        rc = tsr_err(TSR_EINVAL, "%s: labels must be int32 [%lld], one per input in the batch", labels,
                     (long long)in.shape[0]);
    if (!rc)
        rc = tsr_onnx_load(argv[optind], (int)in.shape[0], &m);
    for (int i = 0; i < ntensors && !rc; i++)
        rc = tsr_onnx_check_value(m, tname[i], pflags);
    if (!rc && !quiet)
        tsr_onnx_print_placement(m, stdout);
    if (!rc)
        rc = tsr_config_load(cfgname, &cfg);
    tsr_device_opts_t dopts = *dev->opts;
    if (!rc)
        rc = tsr_device_open(backend, &cfg, &dopts, &d);
    if (!rc)
        rc = tsr_onnx_prepare(m, &cfg, d, pflags);
    if (!rc)
        rc = tsr_onnx_run(m, &in, &out);
    if (!rc && !quiet)
        tsr_onnx_print_report(m, stdout);
    const int64_t n = out.ndim >= 1 ? out.shape[0] : 0, k = n ? (int64_t)(tsr_tensor_numel(&out) / n) : 0;
    if (!rc && labels && (out.dtype != TSR_DT_FLOAT32 || n != lab.shape[0] || k < 1))
        rc = tsr_err(TSR_EINVAL, "%s: --labels needs the output to be float [%lld, classes]", argv[optind],
                     (long long)lab.shape[0]);
    for (int i = 0; i < ntensors && !rc; i++)
        rc = tsr_onnx_read_value(m, tname[i], &tv[i]);
    if (!rc)
        rc = write_outputs(out_path, &out, ntensors, tout, tv);
    if (!rc && labels) {
        int64_t right = 0;
        for (int64_t i = 0; i < n; i++) {
            const float *row = (const float *)out.data + i * k;
            int64_t best = 0;
            for (int64_t j = 1; j < k; j++)
                if (row[j] > row[best])
                    best = j;
            right += best == ((const int32_t *)lab.data)[i];
        }
        printf("accuracy: %lld of %lld = %.2f%% (%s, backend %s)\n", (long long)right, (long long)n,
               100.0 * (double)right / (double)n, argv[optind], backend);
    }
    if (rc)
        fprintf(stderr, "tessera infer: %s\n", tsr_errmsg());
    tsr_tensor_free(&in);
    tsr_tensor_free(&out);
    tsr_tensor_free(&lab);
    for (int i = 0; i < ntensors; i++)
        tsr_tensor_free(&tv[i]);
    tsr_onnx_free(m);
    tsr_device_close(d);
    return rc ? 1 : 0;
}
