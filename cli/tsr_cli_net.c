/* tsr_cli_net: `tessera net resnet18` (tsr_cli_net.h). The network is
 * built, planned, run and checked by the library (jit/tsr_netbench.h);
 * the per-layer table is tsr_graph_print_report. The bit-exact comparison
 * with the independent reference is tests/test_graph.c (the CLI cannot link
 * the tests' reference); --check here compares the device with fsim. */
#include "tsr_cli_net.h"

#include <stdio.h>
#include <string.h>

#include "tsr_cli_common.h"
#include "tsr_cli_pipe.h"
#include "tsr_error.h"
#include "tsr_sampled.h"
#include "tsr_graph.h"
#include "tsr_netbench.h"

static const char *net_help =
    "usage: tessera net resnet18 [--backend NAME] [--config CONFIG] [--seed N]\n"
    "                            [--batch N] [--small HW,WIDTH,CLASSES] [--runs N]\n"
    "                            [--check] [--no-tappack] [--no-fuse] [--one-submission]\n"
    "                            [device options]\n"
    "       tessera net resnet18|resnet50 --devices K ...   (pipelined over K devices: --devices --help)\n"
    "\n"
    "Build ResNet-18 (ImageNet shape, int8 weights, per-channel requantization,\n"
    "uint8 activations after ReLU, seeded random weights calibrated so no\n"
    "tensor saturates) as a graph, plan it (kernels from the JIT cache, weights\n"
    "uploaded, activations placed with lifetimes), run it on a seeded random\n"
    "image and print one row per layer and the network's totals.\n"
    "\n"
    "  --backend NAME    fsim, rtl, systemc or sampled (default fsim; sampled: --sample)\n"
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
    "in-memory kernel cache) and wall time per execution of the batch.\n" TSR_CLI_DEVICE_OPTIONS_HELP;

/* The options net has beyond config, backend, seed and the device's:
 * 1 handled, 0 not one of them, -1 bad value (usage message printed). */
static int net_option(int c, const char *arg, tsr_netbench_opts_t *o)
{
    long v;
    switch (c) {
    case 'n':
        if (tsr_cli_parse_long(arg, 1, 64, &v))
            return tsr_cli_usage("net", "--batch needs 1..64"), -1;
        o->batch = (int)v;
        return 1;
    case 'r':
        if (tsr_cli_parse_long(arg, 1, 1000, &v))
            return tsr_cli_usage("net", "--runs needs 1..1000"), -1;
        o->runs = (int)v;
        return 1;
    case 'S':
        if (sscanf(arg, "%d,%d,%d", &o->small_hw, &o->small_width, &o->small_classes) != 3 || o->small_hw < 1 ||
            o->small_width < 1 || o->small_classes < 1)
            return tsr_cli_usage("net", "--small needs H,WIDTH,CLASSES"), -1;
        o->small = 1;
        return 1;
    case 'C': o->check = 1; return 1;
    case 'T': o->flags |= TSR_GRAPH_NO_TAPPACK; return 1;
    case 'O': o->flags |= TSR_GRAPH_ONE_SUBMISSION; return 1;
    case 'F': o->flags |= TSR_GRAPH_NO_FUSE; return 1;
    default: return 0;
    }
}

/* 0, or -1 (usage error printed) / -2 (help printed). */
static int net_parse(int argc, char **argv, tsr_netbench_opts_t *o)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"backend", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 's'},   {"batch", required_argument, 0, 'n'},
        {"small", required_argument, 0, 'S'},  {"runs", required_argument, 0, 'r'},
        {"check", no_argument, 0, 'C'},        {"help", no_argument, 0, 'h'},
        {"no-tappack", no_argument, 0, 'T'},   {"one-submission", no_argument, 0, 'O'},
        {"no-fuse", no_argument, 0, 'F'},      TSR_CLI_DEVICE_LONG_OPTIONS,
        {0, 0, 0, 0}};
    tsr_cli_base_t b = {o->cfgname, o->backend, o->seed};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:b:s:h", opts, NULL)) != -1) {
        int r = tsr_cli_base_option("net", c, optarg, &b);
        if (!r)
            r = net_option(c, optarg, o);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        if (c == 'h') {
            fputs(net_help, stdout);
            return -2;
        }
        return tsr_cli_usage("net", "bad option"), -1;
    }
    if (optind != argc - 1 || strcmp(argv[optind], "resnet18"))
        return tsr_cli_usage("net", "expected the network name: resnet18"), -1;
    o->cfgname = b.cfgname;
    o->backend = b.backend;
    o->seed = b.seed;
    return 0;
}

static void net_print(const tsr_netbench_opts_t *o, const tsr_netbench_t *nb)
{
    const tsr_config_t *cfg = &nb->cfg;
    const tsr_graph_totals_t *t2 = &nb->again;
    const tsr_nd_tensor_t *out = &nb->nd.tensors[nb->nd.output];
    printf("net: %s, batch %d, config %s (%dx%dx%d, %d MHz), backend %s, DRAM %.4g B/cycle, seed %llu%s\n",
           nb->nd.name, o->batch, o->cfgname, cfg->batch, cfg->block_in, cfg->block_out, cfg->clock_mhz, o->backend,
           nb->dram_bw, (unsigned long long)o->seed, o->check ? ", every tensor kept and checked against fsim" : "");
    tsr_graph_print_report(nb->g, stdout);
    tsr_sampled_print(nb->dev, stdout); /* a sampled device's RTL estimate and its bound */
    printf("plan again from the in-memory kernel cache %.1f ms wall, %.1f ms CPU (operators %.1f ms, %d hits; weights "
           "%.1f ms); network description %.1f ms; wall time per execution (batch of %d) %.3f s (%s, mean of %d)\n",
           t2->plan_ms, t2->plan_cpu_ms, t2->jit_ms, t2->kc_hits, t2->upload_ms, nb->desc_ms, o->batch, nb->wall_s,
           o->backend, o->runs);
    if (o->dev && o->dev->rtl.timing_only)
        printf("output: tensor %d [%d,%d,%d,%d], not computed (--timing-only: cycles only)\n", nb->nd.output, out->n,
               out->c, out->h, out->w);
    else
        printf("output: tensor %d [%d,%d,%d,%d], class %d of the first image has the largest logit (%d)\n",
               nb->nd.output, out->n, out->c, out->h, out->w, nb->top, nb->top_logit);
}

static void net_diff(const tsr_netbench_diff_t *d, void *ctx)
{
    fprintf(stderr, "net: tensor %d (output of node \"%s\") differs from fsim at flat %llu of %llu: %s %d, fsim %d\n",
            d->tensor, d->node, (unsigned long long)d->flat, (unsigned long long)d->n, (const char *)ctx, d->dev,
            d->ref);
}

int tsr_cli_net(int argc, char **argv)
{
    tsr_netbench_opts_t o = {.cfgname = "default", .backend = "fsim", .dev = &tsr_cli_devopts, .seed = 1, .batch = 1,
                             .runs = 1};
    for (int i = 1; i < argc; i++) /* several devices: the pipelined run has its own options */
        if (!strcmp(argv[i], "--devices") || !strncmp(argv[i], "--devices=", 10))
            return tsr_cli_net_devices(argc, argv);
    int r = net_parse(argc, argv, &o);
    if (r)
        return r == -2 ? 0 : 2;
    if (o.check && tsr_cli_devopts.rtl.timing_only)
        return tsr_cli_usage("net", "--check compares data, which --timing-only does not compute");
    tsr_netbench_t nb;
    tsr_netbench_check_t chk = {0, 0, 0};
    int rc = tsr_netbench_run(&o, &nb);
    if (!rc)
        net_print(&o, &nb);
    if (!rc && o.check && !(rc = tsr_netbench_check(&nb, net_diff, (void *)o.backend, &chk)))
        printf("check: %d of %d tensors differ from fsim with every add on its own (%d conv outputs fused "
               "away, not compared)\n", chk.diffs, chk.compared, chk.fused);
    tsr_netbench_close(&nb);
    if (rc)
        return tsr_cli_fail(rc);
    return chk.diffs ? 1 : 0;
}
