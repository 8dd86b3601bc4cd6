/*
 * tsr_cli_train: the `tessera train` command (tsr_cli_train.h). The work is
 * train/tsr_train.c; this file parses the flags, refuses bad input before
 * anything runs (exit 2, one line, the output untouched), prints the
 * progress and the measures and writes the tuned model.
 */
#include "tsr_cli_train.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_npy.h"
#include "tsr_train.h"

static const char *train_help =
    "usage: tessera train MODEL.onnx --data X.npy --labels Y.npy --epochs N --trainable LAYERS\n"
    "                     -o TUNED.onnx [--lr F] [--momentum F] [--batch B] [--seed S]\n"
    "                     [--backend fsim|systemc|rtl] [--config CONFIG] [--backward device|host]\n"
    "                     [--update master|int8|device] [--grad-round nearest|stochastic]\n"
    "                     [--grad-bits 8|16] [--weight-bits 8|16] [--weight-round nearest|stochastic]\n"
    "                     [--logits-range observe|fixed] [--loss-logits exact|quantized]\n"
    "                     [--weight-scale file|refit]\n"
    "                     [--place KIND=device|host[,...]] [--quiet] [device options]\n"
    "\n"
    "Fine-tune a quantized QDQ ONNX model on the device (on-device training,\n"
    "docs/guide/train-on-device.md): the layers before the first trainable one\n"
    "run once per sample as inference; the trainable part (conv, dense and max\n"
    "pool layers up to the logits) runs forward on the device with int8 weights,\n"
    "softmax cross-entropy on the host, backward with int8 gradients as GEMMs\n"
    "on the device, SGD with momentum on a float32 master copy, the weights\n"
    "re-quantized as the model's are (symmetric int8, per tensor or channel).\n"
    "Prints a line per epoch and the measures (backward MACs on the device,\n"
    "cycles of a training step vs an inference, peak device memory, wall time)\n"
    "and writes TUNED.onnx (temporary file beside it, then renamed), a QDQ\n"
    "model that `tessera infer` and ONNX Runtime run. Bad input is refused\n"
    "before training (exit 2) and leaves TUNED.onnx as it was.\n"
    "\n"
    "  --data FILE       float32 samples [N, ...] of the model's input shape\n"
    "  --labels FILE     int32 or int64 labels [N] in [0, classes)\n"
    "  --epochs N        passes over the data (1..1000)\n"
    "  --trainable L     layers to train: node names (/fc/Gemm), their first\n"
    "                    path component (fc), weight names, comma separated;\n"
    "                    or last:K (the last K layers with weights)\n"
    "  -o FILE           the tuned model (not the input model)\n"
    "  --lr F            learning rate (0.01)\n"
    "  --momentum F      SGD momentum in [0, 1) (0.9)\n"
    "  --batch B         samples per step (16; at most the samples)\n"
    "  --seed S          the order of the samples (1)\n"
    "  --backend NAME    fsim, systemc or rtl (default fsim; cycles need a timed one)\n"
    "  --config CONFIG   config file or preset (default: default)\n"
    "  --backward WHERE  device (default) or host: the backward GEMMs in plain C\n"
    "                    on the host (the reference the device's are checked against)\n"
    "  --update HOW      master (default): SGD on a float32 copy of the weights,\n"
    "                    re-quantized after each step; int8: the int8 weights\n"
    "                    updated in place on their fixed grid (quantization-aware\n"
    "                    scaling; an experiment: most updates round to 0);\n"
    "                    device: on the device ALU, exact in int32: the master\n"
    "                    copy as fixed point on the int8 grid (2^15 a step) and\n"
    "                    its momentum in device DRAM (per-tensor scales only)\n"
    "  --grad-round HOW  the int8 gradients' rounding: nearest (default) or\n"
    "                    stochastic (unbiased; seeded by --seed)\n"
    "  --grad-bits N     8 (default): each gradient one int8 tensor (scale\n"
    "                    max|g| / 127); 16: two, its residual on that scale / 254\n"
    "                    (~15 bits), each backward GEMM twice on the device\n"
    "  --weight-bits N   the training forward's weights of the trained convs and\n"
    "                    denses: 16: the master copy on a 256x finer grid as two\n"
    "                    int8 parts, two exact GEMMs on the device joined on the\n"
    "                    host; 8: the int8 weights (the tuned file's are int8 either way)\n"
    "  --weight-round HOW  the training forward's int8 weights from the master\n"
    "                    copy: nearest (default) or stochastic (unbiased: changes\n"
    "                    below half a step count in expectation; seeded by\n"
    "                    --seed); the tuned file's to nearest\n"
    "  --weight-scale HOW  file (default): the trained weights keep the file's\n"
    "                    scales, the master copy clamped to the range they hold\n"
    "                    (as --update device); refit: each step re-fits them to\n"
    "                    max|w| / 127.5 of the master copy (the rule before 115d2f1)\n"
    "  --logits-range HOW  observe (default): when a batch's logits saturate the\n"
    "                    range the file's quantizer calibrated (a new head's is\n"
    "                    that of random outputs), widen it to hold them (a MinMax\n"
    "                    observer; the tuned file gets the new scale and zero\n"
    "                    point); fixed: keep the file's range\n"
    "  --loss-logits HOW quantized (default): the loss on the 8-bit logits the\n"
    "                    device writes; exact: where the last layer is a dense with\n"
    "                    no Relu/Clip, on its exact outputs (its int32 sums, on the\n"
    "                    host), as float training sees them\n"
    TSR_CLI_PLACE_HELP
    "  --quiet           no trainable-part table and no progress lines\n";

enum { O_DATA = 3000, O_LABELS, O_EPOCHS, O_TRAINABLE, O_LR, O_MOMENTUM, O_BATCH, O_SEED, O_BACKEND, O_CONFIG,
       O_BACKWARD, O_UPDATE, O_GRAD_ROUND, O_GRAD_BITS, O_WEIGHT_BITS, O_WEIGHT_ROUND, O_LOGITS_RANGE, O_LOSS_LOGITS, O_WEIGHT_SCALE,
       O_QUIET, O_HELP, O_PLACE };

typedef struct {
    const char *model, *data, *labels, *out, *backend, *cfgname, *trainable;
    tsr_train_opts_t o;
    int have_epochs, quiet;
} train_args_t;

static int bad(const char *msg) { return tsr_cli_usage("train", msg); }

/* A whole-string finite-or-not double (the library says what is wrong with its value). */
static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return !s[0] || *end || errno == ERANGE ? -1 : 0;
}

static int parse_int(const char *s, int *out)
{
    long v;
    if (tsr_cli_parse_long(s, INT_MIN, INT_MAX, &v))
        return -1;
    *out = (int)v;
    return 0;
}

/* One option other than a device option: 0, -1 help printed, else the exit status. */
static int train_option(int c, char *arg, const tsr_cli_dev_t *dev, train_args_t *a)
{
    char msg[256];
    switch (c) {
    case O_DATA: a->data = arg; return 0;
    case O_LABELS: a->labels = arg; return 0;
    case 'o': a->out = arg; return 0;
    case O_TRAINABLE: a->o.trainable = arg; return 0;
    case O_BACKEND: a->backend = arg; return 0;
    case O_CONFIG: a->cfgname = arg; return 0;
    case O_QUIET: a->quiet = 1; return 0;
    case O_EPOCHS:
        a->have_epochs = 1;
        if (parse_int(arg, &a->o.epochs))
            return snprintf(msg, sizeof msg, "--epochs \"%.64s\": expected an integer in [1, %d]", arg,
                            TSR_TRAIN_MAX_EPOCHS), bad(msg);
        return 0;
    case O_BATCH:
        if (parse_int(arg, &a->o.batch))
            return snprintf(msg, sizeof msg, "--batch \"%.64s\": expected an integer in [1, %d]", arg,
                            TSR_TRAIN_MAX_BATCH), bad(msg);
        return 0;
    case O_LR:
        if (parse_double(arg, &a->o.lr))
            return snprintf(msg, sizeof msg, "--lr \"%.64s\": expected a number", arg), bad(msg);
        return 0;
    case O_MOMENTUM:
        if (parse_double(arg, &a->o.momentum))
            return snprintf(msg, sizeof msg, "--momentum \"%.64s\": expected a number", arg), bad(msg);
        return 0;
    case O_SEED:
        if (tsr_cli_parse_u64(arg, &a->o.seed))
            return bad("--seed needs a non-negative integer");
        return 0;
    case O_BACKWARD:
        if (!strcmp(arg, "device") || !strcmp(arg, "host")) {
            a->o.host_backward = !strcmp(arg, "host");
            return 0;
        }
        return snprintf(msg, sizeof msg, "--backward \"%.64s\": device or host", arg), bad(msg);
    case O_UPDATE:
        if (!strcmp(arg, "master") || !strcmp(arg, "int8") || !strcmp(arg, "device")) {
            a->o.int8_update = !strcmp(arg, "int8");
            a->o.device_update = !strcmp(arg, "device");
            return 0;
        }
        return snprintf(msg, sizeof msg, "--update \"%.64s\": master, int8 or device", arg), bad(msg);
    case O_GRAD_ROUND:
        if (!strcmp(arg, "nearest") || !strcmp(arg, "stochastic")) {
            a->o.grad_stochastic = !strcmp(arg, "stochastic");
            return 0;
        }
        return snprintf(msg, sizeof msg, "--grad-round \"%.64s\": nearest or stochastic", arg), bad(msg);
    case O_GRAD_BITS:
        if (!strcmp(arg, "8") || !strcmp(arg, "16")) {
            a->o.grad_split = !strcmp(arg, "16");
            return 0;
        }
        return snprintf(msg, sizeof msg, "--grad-bits \"%.64s\": 8 or 16", arg), bad(msg);
    case O_WEIGHT_BITS:
        if (!strcmp(arg, "8") || !strcmp(arg, "16")) {
            a->o.weight_bits = atoi(arg);
            return 0;
        }
        return snprintf(msg, sizeof msg, "--weight-bits \"%.64s\": 8 or 16", arg), bad(msg);
    case O_WEIGHT_ROUND:
        if (!strcmp(arg, "nearest") || !strcmp(arg, "stochastic")) {
            a->o.weight_stochastic = !strcmp(arg, "stochastic");
            return 0;
        }
        return snprintf(msg, sizeof msg, "--weight-round \"%.64s\": nearest or stochastic", arg), bad(msg);
    case O_LOGITS_RANGE:
        if (!strcmp(arg, "observe") || !strcmp(arg, "fixed")) {
            a->o.logits_fixed = !strcmp(arg, "fixed");
            return 0;
        }
        return snprintf(msg, sizeof msg, "--logits-range \"%.64s\": observe or fixed", arg), bad(msg);
    case O_WEIGHT_SCALE:
        if (!strcmp(arg, "file") || !strcmp(arg, "refit")) {
            a->o.weight_refit = !strcmp(arg, "refit");
            return 0;
        }
        return snprintf(msg, sizeof msg, "--weight-scale \"%.64s\": file or refit", arg), bad(msg);
    case O_LOSS_LOGITS:
        if (!strcmp(arg, "exact") || !strcmp(arg, "quantized")) {
            a->o.loss_exact = !strcmp(arg, "exact");
            return 0;
        }
        return snprintf(msg, sizeof msg, "--loss-logits \"%.64s\": exact or quantized", arg), bad(msg);
    case O_PLACE: return tsr_cli_place("train", arg, &a->o.place);
    case 'h':
    case O_HELP: fputs(train_help, stdout); fputs(dev->help, stdout); return -1;
    default: fputs(train_help, stderr); return 2;
    }
}

static int train_parse(int argc, char **argv, const tsr_cli_dev_t *dev, train_args_t *a)
{
    struct option opts[64];
    static const struct option own[] = {
        {"data", required_argument, 0, O_DATA},         {"labels", required_argument, 0, O_LABELS},
        {"epochs", required_argument, 0, O_EPOCHS},     {"trainable", required_argument, 0, O_TRAINABLE},
        {"output", required_argument, 0, 'o'},          {"lr", required_argument, 0, O_LR},
        {"momentum", required_argument, 0, O_MOMENTUM}, {"batch", required_argument, 0, O_BATCH},
        {"seed", required_argument, 0, O_SEED},         {"backend", required_argument, 0, O_BACKEND},
        {"config", required_argument, 0, O_CONFIG},     {"backward", required_argument, 0, O_BACKWARD},
        {"update", required_argument, 0, O_UPDATE}, {"grad-round", required_argument, 0, O_GRAD_ROUND},
        {"grad-bits", required_argument, 0, O_GRAD_BITS}, {"weight-bits", required_argument, 0, O_WEIGHT_BITS},
        {"weight-round", required_argument, 0, O_WEIGHT_ROUND},     {"quiet", no_argument, 0, O_QUIET},
        {"logits-range", required_argument, 0, O_LOGITS_RANGE},
        {"loss-logits", required_argument, 0, O_LOSS_LOGITS},
        {"weight-scale", required_argument, 0, O_WEIGHT_SCALE},
        {"place", required_argument, 0, O_PLACE},
        {"help", no_argument, 0, O_HELP}};
    size_t no = 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        opts[no++] = own[i];
    for (size_t i = 0; dev->long_opts[i].name && no < 63; i++)
        opts[no++] = dev->long_opts[i];
    memset(&opts[no], 0, sizeof opts[no]);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        int dv = dev->handle(c, optarg), r;
        if (dv < 0)
            return bad("bad value for a device option");
        if (!dv && (r = train_option(c, optarg, dev, a)))
            return r < 0 ? 0 : r;
    }
    if (optind != argc - 1)
        return bad("expected one MODEL.onnx");
    a->model = argv[optind];
    if (!a->data || !a->labels)
        return bad("--data X.npy and --labels Y.npy are required");
    if (!a->have_epochs)
        return bad("--epochs N is required");
    if (!a->o.trainable)
        return bad("--trainable LAYERS is required (names, or last:K)");
    if (!a->out)
        return bad("-o TUNED.onnx is required");
    return -1;
}

/* The output: not the model (same name or the same file), a directory that exists and can be
 * written (the temporary file goes beside it), not a directory itself. */
static int check_output(const train_args_t *a)
{
    struct stat sm, so;
    if (!strcmp(a->out, a->model) ||
        (!stat(a->model, &sm) && !stat(a->out, &so) && sm.st_dev == so.st_dev && sm.st_ino == so.st_ino))
        return tsr_err(TSR_EINVAL, "-o %s is the model file: the input model is never overwritten (give another "
                       "name)", a->out);
    if (!stat(a->out, &so) && S_ISDIR(so.st_mode))
        return tsr_err(TSR_EINVAL, "-o %s is a directory", a->out);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", a->out);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    if (access(dir, W_OK | X_OK))
        return tsr_err(TSR_EIO, "-o %s: its directory %s cannot be written (%s)", a->out, dir, strerror(errno));
    return 0;
}

static void print_measures(const train_args_t *a, const tsr_train_stats_t *st)
{
    const uint64_t tot = st->bwd_device_macs + st->bwd_host_macs;
    printf("measures (backend %s, config %s, batch %d):\n", a->backend, a->cfgname, a->o.batch);
    printf("  backward MACs: %llu on the device, %llu on the host (%.1f%% on the device)\n",
           (unsigned long long)st->bwd_device_macs, (unsigned long long)st->bwd_host_macs,
           tot ? 100.0 * (double)st->bwd_device_macs / (double)tot : 0.0);
    if (st->step_cycles && st->infer_cycles) {
        const uint64_t with = st->step_cycles + st->infer_prefix_cycles;
        printf("  one training step: %llu cycles (forward %llu + backward %llu of the trainable part) vs one "
               "inference of the whole model on the same batch %llu cycles: %.2fx; with the frozen layers run "
               "every step (their share of the inference; not done: their features are computed once) %llu "
               "cycles: %.2fx\n",
               (unsigned long long)st->step_cycles, (unsigned long long)st->step_fwd_cycles,
               (unsigned long long)st->step_bwd_cycles, (unsigned long long)st->infer_cycles,
               (double)st->step_cycles / (double)st->infer_cycles, (unsigned long long)with,
               (double)with / (double)st->infer_cycles);
        printf("  frozen features: %llu cycles for all samples once\n", (unsigned long long)st->feat_cycles);
    } else
        printf("  cycles: - (backend %s is untimed: --backend systemc or rtl for cycles)\n", a->backend);
    printf("  peak device memory: training %llu B (%llu B of it held before the steps: kernels cached) vs "
           "inference %llu B: %.2fx; host: %llu B of activations kept for the backward pass, %llu B of frozen "
           "features\n",
           (unsigned long long)st->peak_train, (unsigned long long)st->mem_held, (unsigned long long)st->peak_infer,
           st->peak_infer ? (double)st->peak_train / (double)st->peak_infer : 0.0,
           (unsigned long long)st->host_act_bytes, (unsigned long long)st->feat_bytes);
    if (a->o.device_update) {
        printf("  device update: %llu of %llu weight updates moved an int8 value (%.1f%%)",
               (unsigned long long)st->upd_moved, (unsigned long long)st->upd_n, st->upd_n ? 100.0 * (double)st->upd_moved / (double)st->upd_n : 0.0);
        if (st->upd_cycles)
            printf("; %llu cycles a step on the ALU (%.2fx the step's forward + backward)",
                   (unsigned long long)st->upd_cycles,
                   st->step_cycles ? (double)st->upd_cycles / (double)st->step_cycles : 0.0);
        printf("\n");
    }
    if (a->o.int8_update)
        printf("  int8 update: %llu of %llu weight updates moved an int8 value (%.1f%%; the rest rounded to 0)\n",
               (unsigned long long)st->upd_moved, (unsigned long long)st->upd_n,
               st->upd_n ? 100.0 * (double)st->upd_moved / (double)st->upd_n : 0.0);
    if (st->range_moves)
        printf("  logits' range: [%g, %g] in the file, widened %d times to [%g, %g] (the observer's exact logits "
               "of the saturated batches: %llu MACs on the host)\n",
               (double)st->range_lo0, (double)st->range_hi0, st->range_moves, (double)st->range_lo,
               (double)st->range_hi, (unsigned long long)st->range_host_macs);
    else
        printf("  logits' range: [%g, %g] as in the file (%s)\n", (double)st->range_lo0, (double)st->range_hi0,
               a->o.logits_fixed ? "--logits-range fixed" : st->range_obs ? "never saturated" : "no observer: the "
               "last layer is not a dense whose output quantization the file lets rewrite");
    if (st->loss_exact)
        printf("  loss: on the last dense layer's exact outputs (its int32 sums: %llu MACs on the host)\n",
               (unsigned long long)st->loss_host_macs);
    else
        printf("  loss: on the 8-bit logits%s\n", a->o.loss_exact ? " (not --loss-logits exact: the last layer is "
               "not a dense without Relu/Clip)" : "");
    double w = 0;
    for (int e = 0; e < st->epochs; e++)
        w += st->epoch_wall[e];
    printf("  wall time per epoch: %.3f s (mean of %d; frozen features once: %.3f s)\n",
           st->epochs ? w / st->epochs : 0.0, st->epochs, st->feat_wall);
}

int tsr_cli_train(int argc, char **argv, const tsr_cli_dev_t *dev)
{
    train_args_t a = {.backend = "fsim", .cfgname = "default",
                      .o = {.lr = 0.01, .momentum = 0.9, .batch = 16, .seed = 1}};
    int st = train_parse(argc, argv, dev, &a);
    if (st >= 0)
        return st;
    if (tsr_cli_devopts.rtl.timing_only)
        return bad("--timing-only computes no data: training needs it");
    if (!a.quiet)
        a.o.progress = stdout;
    tsr_tensor_t x = {0}, y = {0};
    tsr_config_t cfg;
    tsr_device_t *d = NULL;
    tsr_trainer_t *tr = NULL;
    tsr_train_stats_t *stats = calloc(1, sizeof *stats);
    uint8_t *buf = NULL;
    size_t len = 0;
    /* bad input first (exit 2), before the device runs anything */
    int rc = stats ? check_output(&a) : tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc)
        rc = tsr_npy_read(a.data, &x);
    if (!rc)
        rc = tsr_npy_read(a.labels, &y);
    if (!rc)
        rc = tsr_config_load(a.cfgname, &cfg);
    if (!rc) {
        tsr_device_opts_t dopts = *dev->opts;
        rc = tsr_device_open(a.backend, &cfg, &dopts, &d);
    }
    if (!rc)
        rc = tsr_train_open(a.model, d, &a.o, &tr);
    if (!rc)
        rc = tsr_train_check_data(tr, &x, a.data, &y, a.labels);
    if (rc) {
        fprintf(stderr, "tessera train: %s\n", tsr_errmsg());
        st = 2;
        goto out;
    }
    if (!a.quiet)
        tsr_train_print_plan(tr, stdout);
    rc = tsr_train_run(tr, &x, &y, stats);
    if (!rc)
        rc = tsr_train_pack(tr, &buf, &len);
    if (!rc)
        rc = tsr_train_write_file(a.out, buf, len);
    if (rc) {
        fprintf(stderr, "tessera train: %s\n", tsr_errmsg());
        st = 1;
        goto out;
    }
    print_measures(&a, stats);
    printf("wrote %s (%zu bytes)\n", a.out, len);
    st = 0;
out:
    free(buf);
    free(stats);
    tsr_train_free(tr);
    tsr_device_close(d);
    tsr_tensor_free(&x);
    tsr_tensor_free(&y);
    return st;
}
