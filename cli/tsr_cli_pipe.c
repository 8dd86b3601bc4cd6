/* tsr_cli_pipe: `tessera net resnet18 --devices K` (tsr_cli_pipe.h). The
 * plan comes from the planner (tsr_pipeplan.h; node costs from the JIT's
 * cost model, or with --calibrate from a run of the whole network on one
 * device of each config on the backend), the system and the pipeline from
 * the library (tsr_multidev.h, tsr_pipeexec.h); this file parses flags and
 * prints. */
#include "tsr_cli_pipe.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_cli_common.h"
#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_graph.h"
#include "tsr_multidev.h"
#include "tsr_netdesc.h"
#include "tsr_npy.h"
#include "tsr_onnx.h"
#include "tsr_onnx_pipe.h"
#include "tsr_pipeexec.h"
#include "tsr_pipenet.h"
#include "tsr_pipeplan.h"

static const char *pipe_help =
    "usage: tessera net resnet18|resnet50 --devices K [--configs A,B,..] [--backend NAME]\n"
    "                            [--inputs N] [--calibrate] [--small HW,WIDTH,CLASSES]\n"
    "                            [--link-bw BYTES] [--link-latency CYCLES] [--link p2p|shared]\n"
    "                            [--dram MIB]\n"
    "                            [--seed N] [--fail-device D] [--check-on BACKEND]\n"
    "                            [--split R [--split-nodes H]] [--share U]\n"
    "                            [device options]\n"
    "\n"
    "Split ResNet-18 (or ResNet-50: its shapes with seeded weights in -8..8 and\n"
    "per-tensor requantization) into pipeline stages over K devices with the optimal planner\n"
    "(`tessera plan`), open K devices (each its own backend instance and DRAM),\n"
    "and stream N inputs through the stages: one host thread per device, queues of\n"
    "two between stages, transfers host-mediated and charged to both ends by the\n"
    "link model (latency + bytes / bandwidth). Prints the plan, per stage the\n"
    "predicted and measured cycles (device counters + link), the slowest stage\n"
    "predicted vs measured, throughput, latency, the speed-up over one device, and\n"
    "whether every output equals the single-device run (exit status 1 if not).\n"
    "\n"
    "  --devices K        devices (1..64; the systemc backend has 32 slots, one\n"
    "                     taken by the single-device reference)\n"
    "  --configs A,B,..   config of each device, or one for all (default: default)\n"
    "  --backend NAME     fsim, rtl or systemc for every device (default fsim; fsim\n"
    "                     counts no cycles: outputs only)\n"
    "  --inputs N         inputs in the stream (default 8)\n"
    "  --calibrate        node costs from a run of the whole network on one device\n"
    "                     of each config on the backend (default: the JIT's cost\n"
    "                     model); the JIT's prediction of the same stages is printed too\n"
    "  --small H,W,K      the scaled-down ResNet-18 (input H x H, base width W, K classes)\n"
    "  --link-bw BYTES    link bytes per cycle (default 8)\n"
    "  --link-latency C   cycles per transfer (default 500)\n"
    "  --link KIND        p2p: a link per device, transfers charged by the model\n"
    "                     (default); shared: one link for every device and the\n"
    "                     host, the measured cycles replayed on a SystemC/TLM\n"
    "                     interconnect so overlapping transfers wait (the contended\n"
    "                     period is printed against the predicted one)\n"
    "  --dram MIB         DRAM per device, MiB (default 1024)\n"
    "  --seed N           weights and inputs (default 1)\n"
    "  --fail-device D    (fault injection) device D gets a run budget of 1 work unit,\n"
    "                     so it fails its first run mid-pipeline\n"
    "  --split R          also plan intra-layer splits: a conv alone in a stage may run\n"
    "                     as 2..R output-channel parts on as many devices (2..8, <= K)\n"
    "  --split-nodes H    the H heaviest splittable convs are candidates (default 4)\n"
    "  --share U          also plan shared boundaries: two consecutive stages may share\n"
    "                     one conv, each running some of its U (2..64) units of output\n"
    "                     channels (whole channel blocks); the host joins the slices.\n"
    "                     The better of this and the plan above runs\n"
    "  --check-on NAME    then run each stage alone on backend NAME (e.g. rtl), one\n"
    "                     device at a time, and set its cycles against the prediction\n"
    "  --host-scale S     (infer) the host model: host operators S times slower than\n"
    "                     measured here (e.g. an embedded core), in the plan and the\n"
    "                     measure (default 1)\n"
    "  --ilp              also the optimum over any placement (an integer program,\n"
    "                     GLPK; small networks): it runs when its period is shorter\n"
    "                     than the contiguous plan's, non-contiguous or not (not with\n"
    "                     --split, --share)\n"
    "  --ilp-time S       the ILP's time limit, seconds (default 60)\n"
    "  --skip-host        (fault injection) the pipeline skips its host nodes, so its\n"
    "                     outputs must differ from the single-device run's\n"
    "\n"
    "       tessera infer MODEL.onnx -i INPUT.npy --devices K [-o OUTPUT.npy] [--place KIND=device|host[,...]]\n"
    "                     [the options above]\n"
    "\n"
    "The same for an ONNX model: its device operators are the network split into\n"
    "stages; the host operators before and after them run on the host for each\n"
    "input. Host operators between device segments are host nodes of the pipeline,\n"
    "each timed on the host (its wall time x the first config's clock): the planner\n"
    "puts each on a host stage (a thread of its own) or into a device's stage (run\n"
    "on that stage's thread, plus the link to the host and back), whichever gives\n"
    "the faster pipeline (not with --calibrate, --split, --share, --check-on).\n"
    "The stream is INPUT's images, one per input (the model's batch is 1);\n"
    "OUTPUT gets the model's outputs, written only when every one was computed.\n"
    "\n" TSR_CLI_PLACE_HELP "\n" TSR_CLI_DEVICE_OPTIONS_HELP;

enum { OPT_DEVICES = 2000, OPT_CONFIGS, OPT_INPUTS, OPT_CAL, OPT_SMALL, OPT_LBW, OPT_LLAT, OPT_DRAM, OPT_FAIL,
       OPT_CHECK_ON, OPT_SPLIT, OPT_SPLIT_NODES, OPT_SHARE, OPT_SKIP_HOST, OPT_HOST_SCALE, OPT_ILP, OPT_ILP_TIME, OPT_LINK,
       OPT_PLACE };

typedef struct {
    int devices, inputs, calibrate, small, hw, width, classes, fail, split, split_nodes, share, skip_host;
    const char *configs, *net, *check_on;
    const char *model, *in_path, *out_path; /* tessera infer --devices */
    tsr_onnx_opts_t place;                  /* its --place */
    int infer;
    double link_bw, link_lat, dram_mib, host_scale, ilp_time;
    int ilp;
    int link_shared;
    tsr_cli_base_t b;
} pipe_opts_t;

static int pipe_parse(int argc, char **argv, pipe_opts_t *o)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'},      {"backend", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 's'},        {"help", no_argument, 0, 'h'},
        {"devices", required_argument, 0, OPT_DEVICES}, {"configs", required_argument, 0, OPT_CONFIGS},
        {"inputs", required_argument, 0, OPT_INPUTS},   {"calibrate", no_argument, 0, OPT_CAL},
        {"small", required_argument, 0, OPT_SMALL},     {"link-bw", required_argument, 0, OPT_LBW},
        {"link-latency", required_argument, 0, OPT_LLAT}, {"dram", required_argument, 0, OPT_DRAM},
        {"fail-device", required_argument, 0, OPT_FAIL}, {"check-on", required_argument, 0, OPT_CHECK_ON},
        {"split", required_argument, 0, OPT_SPLIT},     {"split-nodes", required_argument, 0, OPT_SPLIT_NODES},
        {"share", required_argument, 0, OPT_SHARE},     {"skip-host", no_argument, 0, OPT_SKIP_HOST},
        {"host-scale", required_argument, 0, OPT_HOST_SCALE}, {"ilp", no_argument, 0, OPT_ILP},
        {"ilp-time", required_argument, 0, OPT_ILP_TIME}, {"link", required_argument, 0, OPT_LINK},
        {"place", required_argument, 0, OPT_PLACE},
        TSR_CLI_DEVICE_LONG_OPTIONS,
        {0, 0, 0, 0}};
    int c;
    long v;
    optind = 1;
    const char *cmd = o->infer ? "infer" : "net";
    while ((c = getopt_long(argc, argv, o->infer ? "c:b:s:hi:o:" : "c:b:s:h", opts, NULL)) != -1) {
        int r = tsr_cli_base_option(cmd, c, optarg, &o->b);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        switch (c) {
        case 'h': fputs(pipe_help, stdout); return -2;
        case 'i': o->in_path = optarg; break;
        case 'o': o->out_path = optarg; break;
        case OPT_DEVICES:
            if (tsr_cli_parse_long(optarg, 1, 1000000, &v))
                return tsr_cli_usage(cmd, "--devices needs a count >= 1");
            if (v > TSR_MDEV_MAX)
                return tsr_cli_usage(cmd, "--devices: at most 64 devices");
            o->devices = (int)v;
            break;
        case OPT_CONFIGS: o->configs = optarg; break;
        case OPT_INPUTS:
            if (tsr_cli_parse_long(optarg, 1, TSR_PIPEX_MAX_INPUTS, &v))
                return tsr_cli_usage(cmd, "--inputs needs 1..4096");
            o->inputs = (int)v;
            break;
        case OPT_CAL: o->calibrate = 1; break;
        case OPT_SPLIT:
            if (tsr_cli_parse_long(optarg, 2, TSR_PP_MAX_SPLIT, &v))
                return tsr_cli_usage(cmd, "--split needs parts 2..8");
            o->split = (int)v;
            break;
        case OPT_SPLIT_NODES:
            if (tsr_cli_parse_long(optarg, 1, 64, &v))
                return tsr_cli_usage(cmd, "--split-nodes needs 1..64");
            o->split_nodes = (int)v;
            break;
        case OPT_SHARE:
            if (tsr_cli_parse_long(optarg, 2, TSR_PP_MAX_UNITS, &v))
                return tsr_cli_usage(cmd, "--share needs units 2..64");
            o->share = (int)v;
            break;
        case OPT_CHECK_ON: o->check_on = optarg; break;
        case OPT_PLACE:
            if (!o->infer)
                return tsr_cli_usage(cmd, "--place is for an ONNX model (tessera infer)");
            if (tsr_cli_place(cmd, optarg, &o->place))
                return 2;
            break;
        case OPT_SKIP_HOST: o->skip_host = 1; break;
        case OPT_ILP: o->ilp = 1; break;
        case OPT_LINK:
            if (strcmp(optarg, "p2p") && strcmp(optarg, "shared"))
                return tsr_cli_usage(cmd, "--link needs p2p or shared");
            o->link_shared = !strcmp(optarg, "shared");
            break;
        case OPT_ILP_TIME: {
            char *end;
            double x = strtod(optarg, &end);
            if (end == optarg || *end || !isfinite(x) || x < 1 || x > 86400)
                return tsr_cli_usage(cmd, "--ilp-time needs seconds 1..86400");
            o->ilp_time = x;
            break;
        }
        case OPT_HOST_SCALE: {
            char *end;
            double x = strtod(optarg, &end);
            if (end == optarg || *end || !isfinite(x) || x <= 0 || x > 1e6)
                return tsr_cli_usage(cmd, "--host-scale needs a factor in (0, 1e6]");
            o->host_scale = x;
            break;
        }
        case OPT_SMALL:
            if (sscanf(optarg, "%d,%d,%d", &o->hw, &o->width, &o->classes) != 3 || o->hw < 1 || o->width < 1 ||
                o->classes < 1)
                return tsr_cli_usage(cmd, "--small needs H,WIDTH,CLASSES");
            o->small = 1;
            break;
        case OPT_FAIL:
            if (tsr_cli_parse_long(optarg, 0, TSR_MDEV_MAX - 1, &v))
                return tsr_cli_usage(cmd, "--fail-device needs a device index");
            o->fail = (int)v;
            break;
        case OPT_LBW:
        case OPT_LLAT:
        case OPT_DRAM: {
            char *end;
            double x = strtod(optarg, &end);
            if (end == optarg || *end || !isfinite(x) || x < 0 || (c != OPT_LLAT && x <= 0) || x > 1e12)
                return tsr_cli_usage(cmd, c == OPT_DRAM  ? "--dram needs MiB > 0"
                                            : c == OPT_LBW ? "--link-bw needs bytes per cycle > 0"
                                                           : "--link-latency needs cycles >= 0");
            *(c == OPT_DRAM ? &o->dram_mib : c == OPT_LBW ? &o->link_bw : &o->link_lat) = x;
            break;
        }
        default: return tsr_cli_usage(cmd, "bad option");
        }
    }
    if (o->infer) {
        if (optind != argc - 1 || !o->in_path)
            return tsr_cli_usage(cmd, "expected MODEL.onnx and -i INPUT.npy");
        o->model = argv[optind];
        o->net = "onnx";
        if (o->small)
            return tsr_cli_usage(cmd, "--small is a scaled-down resnet18, not a model");
    } else if (optind != argc - 1 || (strcmp(argv[optind], "resnet18") && strcmp(argv[optind], "resnet50")))
        return tsr_cli_usage(cmd, "expected the network name: resnet18 or resnet50");
    else
        o->net = argv[optind];
    if (o->small && strcmp(o->net, "resnet18"))
        return tsr_cli_usage(cmd, "--small is a scaled-down resnet18");
    if (o->fail >= o->devices)
        return tsr_cli_usage(cmd, "--fail-device names a device past --devices");
    if (tsr_cli_devopts.rtl.timing_only)
        return tsr_cli_usage(cmd, "--devices compares every output with the single-device run, which "
                                    "--timing-only does not compute");
    return 0;
}

/* The configs of the devices and their kinds (same name, same kind). */
static int pipe_configs(const pipe_opts_t *o, tsr_config_t *cfgs, int *kind_of, tsr_config_t *kinds, int *nkinds,
                        char names[][128])
{
    char list[TSR_MDEV_MAX][128];
    int n = 0;
    const char *p = o->configs ? o->configs : o->b.cfgname;
    while (*p) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (!len || len >= sizeof list[0] || n == TSR_MDEV_MAX)
            return tsr_err(TSR_EINVAL, "net: --configs has an empty or too long name, or more than %d", TSR_MDEV_MAX);
        memcpy(list[n], p, len);
        list[n++][len] = 0;
        p = q ? q + 1 : p + len;
    }
    if (n != 1 && n != o->devices)
        return tsr_err(TSR_EINVAL, "net: --configs names %d configs for %d devices (give one, or one per device)", n,
                       o->devices);
    *nkinds = 0;
    for (int d = 0; d < o->devices; d++) {
        const char *nm = list[n == 1 ? 0 : d];
        int k = 0;
        while (k < *nkinds && strcmp(names[k], nm))
            k++;
        if (k == *nkinds) {
            if (k == TSR_PP_MAX_KINDS)
                return tsr_err(TSR_EINVAL, "net: more than %d distinct configs", TSR_PP_MAX_KINDS);
            int rc = tsr_config_load(nm, &kinds[k]);
            if (rc)
                return tsr_err_prefix(rc, "net: config \"%s\": ", nm);
            snprintf(names[k], 128, "%.127s", nm);
            (*nkinds)++;
        }
        kind_of[d] = k;
        cfgs[d] = kinds[k];
    }
    return TSR_OK;
}

static int add_devices(tsr_pp_t *pp, const pipe_opts_t *o, const int *kind_of, char names[][128])
{
    int rc = TSR_OK;
    for (int d = 0; d < o->devices && !rc; d++) {
        char dn[160];
        snprintf(dn, sizeof dn, "%d:%.120s", d, names[kind_of[d]]);
        rc = tsr_pp_device(pp, dn, kind_of[d], (uint64_t)(o->dram_mib * 1048576.0), NULL);
    }
    if (!rc)
        rc = tsr_pp_set_link(pp, o->link_bw, o->link_lat);
    if (!rc)
        rc = tsr_pp_set_host_stages(pp, 0);
    return rc;
}

/* The plan's splits as tsr_pp_evaluate_split takes them. */
static void plan_parts(const tsr_pp_plan_t *pl, int *parts, int *xslots)
{
    for (int k = 0; k < pl->nstages; k++)
        for (int i = 0; i < pl->stages[k].nnodes; i++) {
            int v = pl->stages[k].nodes[i];
            parts[v] = pl->stages[k].parts > 1 ? pl->stages[k].parts : 1;
            for (int j = 1; j < parts[v]; j++)
                xslots[v * TSR_PP_MAX_SPLIT + j - 1] = pl->stages[k].slots[j];
        }
}

/* Split candidates into pp (and the JIT's problem): the heaviest
 * splittable convs, their parts' costs measured on the backend with
 * --calibrate, else the JIT's. */
static int add_splits(const pipe_opts_t *o, const tsr_netdesc_t *nd, const tsr_config_t *kinds, int nkinds,
                      tsr_pp_t *pp, tsr_pp_t *pp_jit)
{
    int nodes[64];
    int n = tsr_pipenet_split_nodes(nd, pp, o->split_nodes ? o->split_nodes : 4, nodes);
    if (n < 0)
        return n;
    int rc = TSR_OK;
    if (pp_jit)
        rc = tsr_pipenet_add_splits(pp_jit, nd, kinds, nkinds, o->split, n, nodes, NULL);
    if (rc || !o->calibrate)
        return rc ? rc : tsr_pipenet_add_splits(pp, nd, kinds, nkinds, o->split, n, nodes, NULL);
    double *given = calloc((size_t)n * (TSR_PP_MAX_SPLIT + 1) * (size_t)nkinds, sizeof *given);
    if (!given)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int i = 0; i < n && !rc; i++)
        for (int r = 2; r <= o->split && !rc; r++) {
            if (tsr_pipenet_splittable(nd, nodes[i], r)) {
                tsr_err_clear();
                continue;
            }
            for (int k = 0; k < nkinds && !rc; k++)
                rc = tsr_pipex_calibrate_split(o->b.backend, &kinds[k], &tsr_cli_devopts, nd, nodes[i], r, 0,
                                               o->b.seed + 7777,
                                               &given[((size_t)i * (TSR_PP_MAX_SPLIT + 1) + (size_t)r) * (size_t)nkinds +
                                                      (size_t)k]);
        }
    if (!rc)
        rc = tsr_pipenet_add_splits(pp, nd, kinds, nkinds, o->split, n, nodes, given);
    free(given);
    return rc;
}

/* Shared boundaries (--share): every shareable conv gets units into pp
 * (and pp_jit); with --calibrate their costs come from a run of the whole
 * network with every add on its own (the conv's cycles without its add, the
 * add's alone). Then the shared planner; its plan replaces *plan when its
 * period is lower. Its shared nodes' parts are then measured (--calibrate)
 * and the plan evaluated again with them: that is the prediction. */
static int add_shares(const pipe_opts_t *o, const tsr_netdesc_t *nd, const tsr_config_t *kinds, int nkinds,
                      tsr_pp_t *pp, tsr_pp_t *pp_jit, tsr_pp_plan_t *plan)
{
    double *alone = NULL;
    int rc = TSR_OK;
    if (o->calibrate) {
        double *one = calloc((size_t)nd->nnodes, sizeof *one);
        alone = calloc((size_t)nd->nnodes * (size_t)nkinds, sizeof *alone);
        rc = one && alone ? TSR_OK : tsr_err(TSR_ENOMEM, "out of memory");
        for (int k = 0; k < nkinds && !rc; k++) {
            rc = tsr_pipex_calibrate(o->b.backend, &kinds[k], &tsr_cli_devopts, nd, TSR_GRAPH_NO_FUSE,
                                     o->b.seed + 7777, one);
            for (int v = 0; v < nd->nnodes && !rc; v++)
                alone[(size_t)v * (size_t)nkinds + (size_t)k] = one[v];
        }
        free(one);
    }
    if (!rc)
        rc = tsr_pipenet_add_shares(pp, nd, kinds, nkinds, o->share, alone);
    if (!rc && pp_jit)
        rc = tsr_pipenet_add_shares(pp_jit, nd, kinds, nkinds, o->share, NULL);
    tsr_pp_plan_t sp;
    memset(&sp, 0, sizeof sp);
    if (!rc)
        rc = tsr_pp_solve_shared(pp, NULL, &sp);
    if (!rc)
        printf("shared planner: period %.0f cycles (%s), %.1f ms; the plan without shared boundaries: %.0f\n",
               sp.period, sp.shared ? "shares a node" : "no node shared", sp.solve_ms, plan->period);
    if (!rc && sp.shared && sp.period < plan->period * (1 - 1e-9)) {
        tsr_pp_cut_t cuts[TSR_MDEV_MAX];
        int nc = sp.nstages - 1;
        for (int s = 0; s < nc; s++)
            cuts[s] = (tsr_pp_cut_t){sp.stages[s + 1].nodes[0], sp.stages[s + 1].head};
        /* the shared nodes' parts as they run, measured */
        for (int s = 0; s < nc && !rc && o->calibrate; s++) {
            int v = cuts[s].node, u = cuts[s].units, q = tsr_pp_node_units(pp, v);
            if (!u)
                continue;
            double *uc = malloc(sizeof(double) * (size_t)(q - 1) * (size_t)nkinds);
            double extra[TSR_PP_MAX_KINDS];
            rc = uc ? TSR_OK : tsr_err(TSR_ENOMEM, "out of memory");
            int c = nd->nodes[v].conv.c_out;
            for (int w = 1; w < q && !rc; w++)
                for (int k = 0; k < nkinds && !rc; k++) {
                    double clk = (double)kinds[0].clock_mhz / kinds[k].clock_mhz;
                    uc[(size_t)(w - 1) * (size_t)nkinds + (size_t)k] =
                        alone[(size_t)v * (size_t)nkinds + (size_t)k] * clk * w / q;
                    if (w != u && w != q - u)
                        continue;
                    double cyc;
                    rc = w == u ? tsr_pipex_calibrate_slice(o->b.backend, &kinds[k], &tsr_cli_devopts, nd, v, 0,
                                                            c / q * w, 0, o->b.seed + 7777, &cyc)
                                : tsr_pipex_calibrate_slice(o->b.backend, &kinds[k], &tsr_cli_devopts, nd, v,
                                                            c / q * u, c, 0, o->b.seed + 7777, &cyc);
                    if (!rc)
                        uc[(size_t)(w - 1) * (size_t)nkinds + (size_t)k] = cyc * clk;
                }
            int a = -1;
            for (int i = 0; i < nd->nnodes && a < 0; i++)
                if (nd->nodes[i].kind == TSR_ND_ADD &&
                    (nd->nodes[i].in[0] == nd->nodes[v].out || nd->nodes[i].in[1] == nd->nodes[v].out))
                    a = i;
            for (int k = 0; k < nkinds; k++) {
                double clk = (double)kinds[0].clock_mhz / kinds[k].clock_mhz;
                extra[k] = a >= 0 ? fmax(0, alone[(size_t)a * (size_t)nkinds + (size_t)k] * clk -
                                                tsr_pp_node_cost(pp, a, k))
                                  : 0;
            }
            if (!rc)
                rc = tsr_pp_node_share(pp, v, q, uc, extra);
            free(uc);
        }
        tsr_pp_plan_t ev;
        memset(&ev, 0, sizeof ev);
        if (!rc)
            rc = tsr_pp_evaluate_shared(pp, cuts, nc, &ev);
        if (!rc) {
            snprintf(ev.method, sizeof ev.method, "shared");
            ev.solve_ms = sp.solve_ms;
            tsr_pp_plan_free(plan);
            *plan = ev;
        }
    }
    tsr_pp_plan_free(&sp);
    free(alone);
    return rc;
}

/* tessera infer --devices: the model (batch 1) and its device operators as
 * one network (tsr_onnx_pipe.h); INPUT's images one by one through the
 * host operators before them: ins[i] the network's input bytes of image i,
 * outs[i] room for its output. */
static int infer_inputs(const pipe_opts_t *o, const tsr_config_t *cfg, tsr_onnx_t **model, tsr_onnx_pipe_t **op,
                        tsr_tensor_t *x, uint8_t ***ins, uint8_t ***outs, int *nimg, const tsr_netdesc_t **ndp)
{
    int rc = tsr_npy_read(o->in_path, x);
    if (!rc && (x->ndim < 1 || x->shape[0] < 1 || x->shape[0] > TSR_PIPEX_MAX_INPUTS))
        rc = tsr_err(TSR_EINVAL, "%s: the input needs a first dimension of 1..%d images", o->in_path,
                     TSR_PIPEX_MAX_INPUTS);
    if (!rc)
        rc = tsr_onnx_load_opts(o->model, 1, &o->place, model);
    if (!rc)
        rc = tsr_onnx_pipe_open(*model, cfg, op);
    if (rc)
        return rc;
    const tsr_netdesc_t *nd = tsr_onnx_pipe_net(*op);
    int n = (int)x->shape[0];
    uint64_t ib = tsr_netdesc_tensor_bytes(nd, 0), ob = tsr_netdesc_tensor_bytes(nd, nd->output);
    *ins = calloc((size_t)n, sizeof **ins);
    *outs = calloc((size_t)n, sizeof **outs);
    if (!*ins || !*outs)
        return tsr_err(TSR_ENOMEM, "out of memory");
    *nimg = n;
    tsr_tensor_t one = *x; /* image i: a view of [1, ...] into x */
    one.shape[0] = 1;
    one.nbytes = x->nbytes / (size_t)n;
    for (int i = 0; i < n && !rc; i++) {
        one.data = (uint8_t *)x->data + (size_t)i * one.nbytes;
        if (!((*ins)[i] = malloc(ib)) || !((*outs)[i] = malloc(ob)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        else if ((rc = tsr_onnx_pipe_before(*op, &one, (*ins)[i])))
            tsr_err_prefix(rc, "%s: image %d: ", o->in_path, i);
    }
    int hb, dv, ha, ns, hm;
    tsr_onnx_pipe_counts(*op, &hb, &dv, &ha, &ns, &hm);
    const tsr_pipenet_host_t *H = tsr_onnx_pipe_host(*op);
    if (!rc)
        printf("model: %s: %d device operators in %d segment%s as one network, host operators %d before and %d "
               "after (on the host); %d images\n",
               o->model, dv, ns, ns == 1 ? "" : "s", hb, ha, n);
    if (!rc && H)
        printf("host nodes: %d (the %d host operators between device segments), each a pipeline node on the host\n",
               H->n, hm);
    *ndp = nd;
    return rc;
}

/* The host operators after the device operators for every image; the
 * outputs stacked along the first dimension, written to OUTPUT. */
static int infer_outputs(const pipe_opts_t *o, tsr_onnx_pipe_t *op, uint8_t **outs, int n, tsr_tensor_t *y)
{
    int rc = TSR_OK;
    for (int i = 0; i < n && !rc; i++) {
        tsr_tensor_t one;
        memset(&one, 0, sizeof one);
        if ((rc = tsr_onnx_pipe_after(op, outs[i], &one)))
            break;
        if (!i) {
            int64_t shape[TSR_TENSOR_MAX_DIMS];
            for (int d = 0; d < one.ndim; d++)
                shape[d] = one.shape[d];
            if (one.ndim < 1 || one.shape[0] != 1)
                rc = tsr_err(TSR_EINVAL, "%s: the model's output has no batch dimension of 1", o->model);
            shape[0] = n;
            if (!rc)
                rc = tsr_tensor_alloc(y, one.dtype, one.ndim, shape);
        }
        if (!rc)
            memcpy((uint8_t *)y->data + (size_t)i * one.nbytes, one.data, one.nbytes);
        tsr_tensor_free(&one);
    }
    if (!rc && o->out_path)
        rc = tsr_npy_write(o->out_path, y);
    if (!rc && o->out_path)
        printf("wrote %s: the model's outputs of the %d images\n", o->out_path, n);
    return rc;
}

static int pipe_main(int argc, char **argv, int infer)
{
    pipe_opts_t o = {.devices = 0, .inputs = 8, .fail = -1, .link_bw = 8, .link_lat = 500, .dram_mib = 1024, .host_scale = 1,
                     .b = {"default", "fsim", 1}, .infer = infer};
    int r = pipe_parse(argc, argv, &o);
    if (r)
        return r == -2 ? 0 : 2;
    static tsr_config_t cfgs[TSR_MDEV_MAX], kinds[TSR_PP_MAX_KINDS];
    static char names[TSR_PP_MAX_KINDS][128];
    static tsr_device_opts_t dopts[TSR_MDEV_MAX];
    int kind_of[TSR_MDEV_MAX], nkinds = 0;
    tsr_netdesc_t nd;
    memset(&nd, 0, sizeof nd);
    const tsr_netdesc_t *ndp = &nd;
    tsr_onnx_t *model = NULL;
    tsr_onnx_pipe_t *op = NULL;
    tsr_tensor_t xin, yout;
    memset(&xin, 0, sizeof xin), memset(&yout, 0, sizeof yout);
    uint8_t **ins = NULL, **outs = NULL;
    int nimg = 0;
    tsr_pp_t *pp = NULL, *pp_jit = NULL;
    tsr_pp_plan_t plan, single, other;
    memset(&plan, 0, sizeof plan), memset(&single, 0, sizeof single), memset(&other, 0, sizeof other);
    tsr_mdev_t *m = NULL;
    double *cost = NULL;
    int rn50 = !strcmp(o.net, "resnet50");
    int rc = pipe_configs(&o, cfgs, kind_of, kinds, &nkinds, names);
    if (!rc && infer) { /* the model's device operators as the network; its inputs through the host operators */
        tsr_config_t tgt = kinds[0]; /* Concats as views need every device's layout: the largest BLOCK, the
                                        smallest BATCH (onnx/ops/tsr_ox_concat.c) */
        for (int k = 1; k < nkinds; k++) {
            tgt.block_out = kinds[k].block_out > tgt.block_out ? kinds[k].block_out : tgt.block_out;
            tgt.batch = kinds[k].batch < tgt.batch ? kinds[k].batch : tgt.batch;
        }
        rc = infer_inputs(&o, &tgt, &model, &op, &xin, &ins, &outs, &nimg, &ndp);
        o.inputs = nimg;
    }
    else if (!rc)
        rc = rn50 ? tsr_pipenet_resnet50_desc(1, &nd)
             : o.small ? tsr_netdesc_resnet18_small(o.b.seed, 1, o.hw, o.width, o.classes, &nd)
                       : tsr_netdesc_resnet18(o.b.seed, 1, &nd);
    if (!rc && rn50)
        rc = tsr_pipenet_resnet50_weights(&nd, o.b.seed);
    const tsr_pipenet_host_t *host = op ? tsr_onnx_pipe_host(op) : NULL;
    if (!rc && host && (o.calibrate || o.split || o.share || o.check_on))
        rc = tsr_err(TSR_EINVAL, "infer: %s: --%s is not available with host operators between device segments (%d "
                                 "host nodes)", o.model, o.calibrate ? "calibrate" : o.split ? "split" : o.share ? "share"
                                                                                                   : "check-on",
                     host->n);
    if (!rc && host) { /* the host model: each host node's wall time (median of 7) at the first config's clock */
        rc = tsr_onnx_pipe_time_host(op, kinds[0].clock_mhz, 7, o.host_scale);
        for (int h = 0; h < host->n && !rc; h++)
            printf("host node %d: %s: %.0f cycles (%.1f us at %d MHz%s)\n", h, host->names[h], host->cycles[h],
                   host->cycles[h] / kinds[0].clock_mhz, kinds[0].clock_mhz, o.host_scale != 1 ? ", --host-scale" : "");
    }
    if (!rc)
        rc = host ? tsr_pipenet_problem_host(ndp, host, o.link_bw, o.link_lat, kinds, nkinds, NULL, &pp_jit)
                  : tsr_pipenet_problem(ndp, kinds, nkinds, &pp_jit, NULL);
    if (!rc)
        rc = add_devices(pp_jit, &o, kind_of, names);
    if (!rc && host) /* a host stage per host node at most (the planner's limit) */
        rc = tsr_pp_set_host_stages(pp_jit, host->n < TSR_PP_MAX_HOST_STAGES ? host->n : TSR_PP_MAX_HOST_STAGES);
    if (!rc && o.calibrate) {
        /* per kind: the whole network once on the backend, per-layer cycles */
        if (!(cost = calloc((size_t)ndp->nnodes * (size_t)nkinds, sizeof *cost)))
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        double *one = rc ? NULL : calloc((size_t)ndp->nnodes, sizeof *one);
        if (!rc && !one)
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        for (int k = 0; k < nkinds && !rc; k++) {
            rc = tsr_pipex_calibrate(o.b.backend, &kinds[k], &tsr_cli_devopts, ndp, 0, o.b.seed + 7777, one);
            for (int v = 0; v < ndp->nnodes && !rc; v++)
                cost[(size_t)v * (size_t)nkinds + (size_t)k] = one[v];
        }
        free(one);
        if (!rc)
            rc = tsr_pipenet_problem_costs(ndp, kinds, nkinds, cost, &pp);
        if (!rc)
            rc = add_devices(pp, &o, kind_of, names);
    } else if (!rc) {
        pp = pp_jit;
        pp_jit = NULL;
    }
    if (!rc && o.split)
        rc = add_splits(&o, ndp, kinds, nkinds, pp, pp_jit);
    tsr_pp_opts_t popts = {.max_split = o.split};
    if (!rc)
        rc = tsr_pp_solve_dp(pp, &popts, &plan);
    if (!rc && o.ilp && (o.split || o.share))
        rc = tsr_err(TSR_EINVAL, "net: --ilp plans whole nodes: not with --split or --share");
    if (!rc && o.ilp) { /* the optimum over every placement: it runs when it beats the contiguous one */
        tsr_pp_plan_t ilp;
        memset(&ilp, 0, sizeof ilp);
        tsr_pp_opts_t io = {.time_limit_s = o.ilp_time};
        rc = tsr_pp_solve_ilp(pp, &io, &ilp);
        if (!rc) {
            int better = ilp.period < plan.period * (1 - 1e-12);
            printf("ilp: period %.0f cycles (%s, %.1f s), the contiguous DP's %.0f: %s\n", ilp.period,
                   ilp.contiguous ? "contiguous" : "non-contiguous", ilp.solve_ms / 1000, plan.period,
                   better ? "the ILP's plan runs" : "the DP's plan runs");
            if (better) {
                tsr_pp_plan_free(&plan);
                plan = ilp;
                memset(&ilp, 0, sizeof ilp);
            }
        }
        tsr_pp_plan_free(&ilp);
    }
    if (!rc && o.share)
        rc = add_shares(&o, ndp, kinds, nkinds, pp, pp_jit, &plan);
    if (!rc)
        rc = tsr_pp_solve_baseline(pp, TSR_PP_SINGLE, &single);
    if (!rc && pp_jit && plan.shared) {
        tsr_pp_cut_t cuts[TSR_MDEV_MAX];
        for (int s = 0; s + 1 < plan.nstages; s++)
            cuts[s] = (tsr_pp_cut_t){plan.stages[s + 1].nodes[0], plan.stages[s + 1].head};
        rc = tsr_pp_evaluate_shared(pp_jit, cuts, plan.nstages - 1, &other);
    } else if (!rc && pp_jit) {
        int *parts = malloc(sizeof(int) * (size_t)ndp->nnodes),
            *xs = malloc(sizeof(int) * (size_t)ndp->nnodes * TSR_PP_MAX_SPLIT);
        if (parts && xs) {
            plan_parts(&plan, parts, xs);
            rc = tsr_pp_evaluate_split(pp_jit, plan.slot, parts, xs, &other);
        } else
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        free(parts), free(xs);
    }
    if (rc)
        goto out;
    printf("net: %s on %d devices (", ndp->name, o.devices);
    for (int d = 0; d < o.devices; d++)
        printf("%s%s", d ? "," : "", names[kind_of[d]]);
    printf("), backend %s, %d inputs, link %.4g B/cycle + %.4g cycles per transfer%s, costs from %s\n", o.b.backend,
           o.inputs, o.link_bw, o.link_lat, o.link_shared ? " (shared by every device and the host)" : "",
           o.calibrate ? "a calibration run on the backend" : "the JIT's cost model");
    tsr_pp_print(pp, &plan, single.period, stdout);
    if (o.link_shared) {
        double lb = tsr_pp_shared_link_bound(&plan);
        printf("  shared link: one input's transfers take %.0f cycles on the one link, so the period with contention "
               "is at least %.0f (the plan's %.0f has none)\n", lb, lb > plan.period ? lb : plan.period, plan.period);
    }
    for (int d = 0; d < o.devices; d++) {
        dopts[d] = tsr_cli_devopts;
        if (d == o.fail)
            dopts[d].run_budget = 1;
    }
    const char *backs[TSR_MDEV_MAX];
    for (int d = 0; d < o.devices; d++)
        backs[d] = o.b.backend;
    for (int d = 0; d < o.devices; d++)
        dopts[d].dram_size = (uint64_t)(o.dram_mib * 1048576.0);
    if ((rc = tsr_mdev_open(o.devices, backs, cfgs, dopts, o.link_bw, o.link_lat, &m)) ||
        (o.link_shared && (rc = tsr_mdev_set_link_mode(m, TSR_LINK_SHARED))))
        goto out;
    tsr_pipex_opts_t po = {.ninputs = infer ? nimg : o.inputs, .seed = o.b.seed + 1000,
                           .inputs = infer ? (const void *const *)ins : NULL, .outputs = infer ? (void *const *)outs : NULL,
                           .host = host, .skip_host = o.skip_host};
    tsr_pipex_result_t res;
    rc = tsr_pipex_run(m, ndp, pp, &plan, &po, &res);
    if (rc)
        goto out;
    printf("pipeline (measured: device counters + the link's cycles by the model):\n");
    tsr_pipex_print(&res, stdout);
    if (o.link_shared && !res.timed)
        printf("shared link: not replayed (the devices count no cycles)\n");
    if (pp_jit && res.timed) {
        printf("the JIT cost model's prediction of the same stages:");
        double worst = 0;
        for (int s = 0; s < other.nstages; s++) {
            printf(" %.0f", other.stages[s].load);
            if (other.stages[s].load > worst)
                worst = other.stages[s].load;
        }
        printf("; slowest %.0f vs measured %.0f: %+.2f%%\n", worst, res.period_meas,
               100.0 * (worst - res.period_meas) / res.period_meas);
    }
    if (res.equal != res.checked)
        rc = 1;
    if (!rc && infer) /* the host operators after the device operators; OUTPUT only when all are computed */
        rc = infer_outputs(&o, op, outs, nimg, &yout);
    if (o.check_on) {
        /* each stage alone on the other backend: the prediction against it too */
        double worst_pred = 0, worst = 0;
        for (int s = 0; s < res.nstages && !rc; s++) {
            int d = res.st[s].device;
            double cyc;
            if ((rc = tsr_pipex_stage_alone_pp(o.check_on, &cfgs[d], &tsr_cli_devopts, ndp, pp, &plan, s, 0, o.b.seed + 5,
                                            &cyc)))
                break;
            if (cyc <= 0) {
                printf("stage %d alone on %s: ran, untimed (no cycles)\n", s, o.check_on);
                continue;
            }
            cyc = cyc * cfgs[0].clock_mhz / cfgs[d].clock_mhz + res.st[s].link;
            printf("stage %d alone on %s: %.0f cycles (link included), predicted %.0f: %+.2f%%; on %s %.0f: "
                   "%+.2f%%\n", s, o.check_on, cyc, res.st[s].predicted,
                   100.0 * (res.st[s].predicted - cyc) / cyc, o.b.backend, res.st[s].measured,
                   100.0 * (res.st[s].measured - cyc) / cyc);
            if (cyc > worst)
                worst = cyc;
            if (res.st[s].predicted > worst_pred)
                worst_pred = res.st[s].predicted;
        }
        if (!rc && worst > 0)
            printf("slowest stage on %s: %.0f cycles, predicted %.0f: %+.2f%%\n", o.check_on, worst, worst_pred,
                   100.0 * (worst_pred - worst) / worst);
    }
out:
    tsr_mdev_close(m);
    tsr_pp_plan_free(&plan), tsr_pp_plan_free(&single), tsr_pp_plan_free(&other);
    tsr_pp_free(pp), tsr_pp_free(pp_jit);
    free(cost);
    if (rn50)
        tsr_pipenet_desc_free(&nd);
    else if (!infer)
        tsr_netdesc_free(&nd);
    for (int i = 0; i < nimg; i++) {
        free(ins ? ins[i] : NULL);
        free(outs ? outs[i] : NULL);
    }
    free(ins), free(outs);
    tsr_tensor_free(&xin), tsr_tensor_free(&yout);
    tsr_onnx_pipe_free(op);
    tsr_onnx_free(model);
    if (rc == 1) {
        fprintf(stderr, "tessera: %s: an output differs from the single-device run\n", infer ? "infer" : "net");
        return 1;
    }
    return rc ? tsr_cli_fail(rc) : 0;
}

int tsr_cli_net_devices(int argc, char **argv) { return pipe_main(argc, argv, 0); }

int tsr_cli_infer_devices(int argc, char **argv) { return pipe_main(argc, argv, 1); }
