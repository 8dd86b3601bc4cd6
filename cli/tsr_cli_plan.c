/* tsr_cli_plan: `tessera plan` (tsr_cli_plan.h). The network's costs come
 * from the library (tsr_pipenet_problem), the plan from the planner
 * (tsr_pp_solve_dp / _ilp / _baseline); this file parses flags and prints. */
#include "tsr_cli_plan.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_cli_common.h"
#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_jitutil.h"
#include "tsr_netdesc.h"
#include "tsr_pipenet.h"
#include "tsr_pipeplan.h"

static const char *plan_help =
    "usage: tessera plan --net resnet18|resnet50 [--devices K] [--configs A,B,..]\n"
    "                    [--batch N] [--dram MIB] [--link-bw BYTES] [--link-latency CYCLES]\n"
    "                    [--link p2p|shared] [--host-stages N] [--ilp [--ilp-time S]]\n"
    "                    [--split R [--split-nodes H]]\n"
    "       tessera plan --bench [--devices K]\n"
    "\n"
    "Place a network over K devices as a pipeline, the slowest stage as fast as\n"
    "possible (ties: the batch-1 latency), exactly for contiguous splits (DP over\n"
    "the graph's ideals, Tarnawski et al. NeurIPS 2020). Node costs are the JIT's\n"
    "estimates (every operator planned on an fsim device of each config, nothing\n"
    "run); transfers cost latency + bytes / bandwidth on both ends. Prints the\n"
    "plan (stages, per-stage predicted cycles, transfers), its throughput as a\n"
    "multiple of one device, and the baselines (equal-MAC split, greedy cycle fill).\n"
    "\n"
    "  --net NAME          resnet18 or resnet50 (ImageNet shapes)\n"
    "  --devices K         devices (default 2; more than 64 is refused)\n"
    "  --configs A,B,..    config (preset or file) of each device, or one for all\n"
    "                      (default: default); costs are cycles of the first one's clock\n"
    "  --batch N           batch (default 1)\n"
    "  --dram MIB          DRAM per device, MiB (default 1024)\n"
    "  --link-bw BYTES     link bytes per cycle (default 8)\n"
    "  --link-latency C    cycles per transfer (default 500)\n"
    "  --link KIND         p2p (default): a link per device; shared: one link for\n"
    "                      every device and the host, and the plan's period is\n"
    "                      also bounded by the sum of its transfers per input\n"
    "  --host-stages N     host threads that may run stages (default 1; these\n"
    "                      networks have no host-only node)\n"
    "  --ilp               also the non-contiguous optimum by ILP (small graphs only)\n"
    "  --ilp-time S        the ILP's time limit, seconds (default 60)\n"
    "  --split R           intra-layer splits: a conv alone in a stage may run as 2..R\n"
    "                      output-channel parts on as many devices (2..8, <= K)\n"
    "  --split-nodes H     the H heaviest splittable convs are candidates (default 4)\n"
    "  --bench             time the planner on ResNet-50 and on a random 1,000-node DAG\n";

typedef struct {
    const char *net;
    int devices, batch, host_stages, ilp, bench, split, split_nodes, link_shared;
    double ilp_time;
    char *configs;
    double dram_mib, link_bw, link_lat;
} plan_opts_t;

static int plan_parse(int argc, char **argv, plan_opts_t *o)
{
    static const struct option opts[] = {
        {"net", required_argument, 0, 'n'},          {"devices", required_argument, 0, 'k'},
        {"configs", required_argument, 0, 'c'},      {"batch", required_argument, 0, 'b'},
        {"dram", required_argument, 0, 'd'},         {"link-bw", required_argument, 0, 'w'},
        {"link-latency", required_argument, 0, 'l'}, {"host-stages", required_argument, 0, 'H'},
        {"ilp", no_argument, 0, 'I'},                {"bench", no_argument, 0, 'B'},
        {"split", required_argument, 0, 'S'},        {"split-nodes", required_argument, 0, 'N'},
        {"ilp-time", required_argument, 0, 'T'},     {"link", required_argument, 0, 'L'},
        {"help", no_argument, 0, 'h'},               {0, 0, 0, 0}};
    int c;
    long v;
    char *end;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': o->net = optarg; break;
        case 'k':
            if (tsr_cli_parse_long(optarg, 1, 100000, &v))
                return tsr_cli_usage("plan", "--devices needs a count >= 1");
            o->devices = (int)v;
            break;
        case 'c': o->configs = optarg; break;
        case 'b':
            if (tsr_cli_parse_long(optarg, 1, 64, &v))
                return tsr_cli_usage("plan", "--batch needs 1..64");
            o->batch = (int)v;
            break;
        case 'H':
            if (tsr_cli_parse_long(optarg, 0, 8, &v))
                return tsr_cli_usage("plan", "--host-stages needs 0..8");
            o->host_stages = (int)v;
            break;
        case 'd':
        case 'w':
        case 'l': {
            double x = strtod(optarg, &end);
            if (end == optarg || *end || !isfinite(x) || x < 0 || (c != 'l' && x <= 0) || x > 1e12)
                return tsr_cli_usage("plan", c == 'd'   ? "--dram needs MiB > 0"
                                             : c == 'w' ? "--link-bw needs bytes per cycle > 0"
                                                        : "--link-latency needs cycles >= 0");
            *(c == 'd' ? &o->dram_mib : c == 'w' ? &o->link_bw : &o->link_lat) = x;
            break;
        }
        case 'I': o->ilp = 1; break;
        case 'L':
            if (strcmp(optarg, "p2p") && strcmp(optarg, "shared"))
                return tsr_cli_usage("plan", "--link needs p2p or shared");
            o->link_shared = !strcmp(optarg, "shared");
            break;
        case 'T':
            if (tsr_cli_parse_long(optarg, 1, 86400, &v))
                return tsr_cli_usage("plan", "--ilp-time needs seconds 1..86400");
            o->ilp_time = (double)v;
            break;
        case 'S':
            if (tsr_cli_parse_long(optarg, 2, TSR_PP_MAX_SPLIT, &v))
                return tsr_cli_usage("plan", "--split needs parts 2..8");
            o->split = (int)v;
            break;
        case 'N':
            if (tsr_cli_parse_long(optarg, 1, 64, &v))
                return tsr_cli_usage("plan", "--split-nodes needs 1..64");
            o->split_nodes = (int)v;
            break;
        case 'B': o->bench = 1; break;
        case 'h': fputs(plan_help, stdout); return -2;
        default: return tsr_cli_usage("plan", "bad option");
        }
    }
    if (optind != argc)
        return tsr_cli_usage("plan", "unexpected argument (the network is --net NAME)");
    if (!o->bench && !o->net)
        return tsr_cli_usage("plan", "expected --net resnet18|resnet50 or --bench");
    if (o->net && strcmp(o->net, "resnet18") && strcmp(o->net, "resnet50"))
        return tsr_cli_usage("plan", "--net needs resnet18 or resnet50");
    return 0;
}

/* The network's problem with devices: kinds from --configs (same name, same kind). */
static int plan_problem(const plan_opts_t *o, const char *net, int devices, tsr_pp_t **pp, double *jit_ms,
                        char kinds[][128], int *nkinds)
{
    char names[TSR_PP_MAX_DEVICES][128];
    int kind_of[TSR_PP_MAX_DEVICES], ncfg = 0;
    tsr_config_t cfgs[TSR_PP_MAX_KINDS];
    const char *list = o->configs ? o->configs : "default";
    *nkinds = 0;
    /* split the list */
    for (const char *p = list; *p && ncfg < TSR_PP_MAX_DEVICES;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (!len || len >= sizeof names[0])
            return tsr_err(TSR_EINVAL, "plan: --configs has an empty or too long name");
        memcpy(names[ncfg], p, len);
        names[ncfg++][len] = 0;
        p = q ? q + 1 : p + len;
    }
    if (ncfg != 1 && ncfg != devices)
        return tsr_err(TSR_EINVAL, "plan: --configs names %d configs for %d devices (give one, or one per device)",
                       ncfg, devices);
    int ndev = devices > TSR_PP_MAX_DEVICES ? TSR_PP_MAX_DEVICES : devices; /* the planner refuses more */
    for (int d = 0; d < ndev; d++) {
        const char *nm = names[ncfg == 1 ? 0 : d];
        int k = 0;
        while (k < *nkinds && strcmp(kinds[k], nm))
            k++;
        if (k == *nkinds) {
            if (k == TSR_PP_MAX_KINDS)
                return tsr_err(TSR_EINVAL, "plan: more than %d distinct configs", TSR_PP_MAX_KINDS);
            int rc = tsr_config_load(nm, &cfgs[k]);
            if (rc)
                return tsr_err_prefix(rc, "plan: config \"%s\": ", nm);
            snprintf(kinds[k], 128, "%.120s", nm);
            (*nkinds)++;
        }
        kind_of[d] = k;
    }
    tsr_netdesc_t nd;
    int rc = !strcmp(net, "resnet18") ? tsr_netdesc_resnet18(1, o->batch, &nd) : tsr_pipenet_resnet50_desc(o->batch, &nd);
    if (rc)
        return rc;
    rc = tsr_pipenet_problem(&nd, cfgs, *nkinds, pp, jit_ms);
    if (!rc && o->split) { /* the heaviest splittable convs get their parts (the JIT's costs) */
        int nodes[64], n = tsr_pipenet_split_nodes(&nd, *pp, o->split_nodes ? o->split_nodes : 4, nodes);
        rc = n < 0 ? n : tsr_pipenet_add_splits(*pp, &nd, cfgs, *nkinds, o->split, n, nodes, NULL);
        if (rc) {
            tsr_pp_free(*pp);
            *pp = NULL;
        }
    }
    if (!strcmp(net, "resnet18"))
        tsr_netdesc_free(&nd);
    else
        tsr_pipenet_desc_free(&nd);
    if (rc)
        return rc;
    uint64_t dram = (uint64_t)(o->dram_mib * 1048576.0);
    for (int d = 0; d < devices && !rc; d++) {
        char dn[160];
        snprintf(dn, sizeof dn, "%d:%.120s", d, names[ncfg == 1 ? 0 : d]);
        rc = tsr_pp_device(*pp, dn, d < ndev ? kind_of[d] : 0, dram, NULL);
    }
    if (!rc)
        rc = tsr_pp_set_link(*pp, o->link_bw, o->link_lat);
    if (!rc)
        rc = tsr_pp_set_host_stages(*pp, o->host_stages);
    if (rc) {
        tsr_pp_free(*pp);
        *pp = NULL;
    }
    return rc;
}

static void row(const char *what, const tsr_pp_plan_t *p, double single)
{
    printf("  %-12s period %12.0f  latency %12.0f  stages %2d  throughput %6.3fx one device  (%.1f ms)\n", what,
           p->period, p->latency, p->nstages, single / p->period, p->solve_ms);
}

static int plan_net(const plan_opts_t *o)
{
    tsr_pp_t *pp = NULL;
    double jit_ms = 0;
    char kinds[TSR_PP_MAX_KINDS][128];
    int nkinds;
    int rc = plan_problem(o, o->net, o->devices, &pp, &jit_ms, kinds, &nkinds);
    if (rc)
        return tsr_cli_fail(rc);
    tsr_pp_plan_t dp, single, eq, gr, ilp;
    memset(&ilp, 0, sizeof ilp);
    tsr_pp_opts_t popts = {.max_split = o->split};
    if ((rc = tsr_pp_solve_dp(pp, &popts, &dp))) {
        tsr_pp_free(pp);
        return tsr_cli_fail(rc);
    }
    rc = tsr_pp_solve_baseline(pp, TSR_PP_SINGLE, &single);
    if (!rc)
        rc = tsr_pp_solve_baseline(pp, TSR_PP_EQUAL_MACS, &eq);
    if (!rc)
        rc = tsr_pp_solve_baseline(pp, TSR_PP_GREEDY, &gr);
    if (rc) {
        tsr_pp_plan_free(&dp);
        tsr_pp_free(pp);
        return tsr_cli_fail(rc);
    }
    printf("plan: %s, batch %d, %d devices (", o->net, o->batch, o->devices);
    for (int k = 0; k < nkinds; k++)
        printf("%s%s", k ? ", " : "", kinds[k]);
    printf("), DRAM %.0f MiB each, link %.4g B/cycle + %.4g cycles per transfer; %d nodes, %llu ideals; JIT "
           "costs %.0f ms, planner %.1f ms\n",
           o->dram_mib, o->link_bw, o->link_lat, tsr_pp_nnodes(pp), (unsigned long long)dp.ideals, jit_ms,
           dp.solve_ms);
    tsr_pp_print(pp, &dp, single.period, stdout);
    if (o->link_shared) {
        double lb = tsr_pp_shared_link_bound(&dp);
        printf("  shared link: one input's transfers take %.0f cycles on the one link, so the period with contention "
               "is at least %.0f (the plan's %.0f has none)\n", lb, lb > dp.period ? lb : dp.period, dp.period);
    }
    printf("against one device and the baselines (cycles of %s's clock):\n", kinds[0]);
    row("one device", &single, single.period);
    row("equal-MAC", &eq, single.period);
    row("greedy", &gr, single.period);
    row("optimal (dp)", &dp, single.period);
    if (o->ilp) {
        tsr_pp_opts_t io = {.time_limit_s = o->ilp_time};
        rc = tsr_pp_solve_ilp(pp, &io, &ilp);
        if (rc)
            printf("  ilp          %s\n", tsr_errmsg());
        else
            row(ilp.contiguous ? "ilp" : "ilp (non-c.)", &ilp, single.period);
        rc = 0;
    }
    tsr_pp_plan_free(&dp), tsr_pp_plan_free(&single), tsr_pp_plan_free(&eq), tsr_pp_plan_free(&gr);
    tsr_pp_plan_free(&ilp);
    tsr_pp_free(pp);
    return 0;
}

static int plan_bench(const plan_opts_t *o)
{
    tsr_pp_t *pp = NULL;
    double jit_ms = 0;
    char kinds[TSR_PP_MAX_KINDS][128];
    int nkinds, rc;
    printf("planner benchmark (%d devices, link %.4g B/cycle + %.4g cycles):\n", o->devices, o->link_bw,
           o->link_lat);
    if ((rc = plan_problem(o, "resnet50", o->devices, &pp, &jit_ms, kinds, &nkinds)))
        return tsr_cli_fail(rc);
    tsr_pp_plan_t p;
    uint64_t t0 = tsr_mono_ns();
    rc = tsr_pp_solve_dp(pp, NULL, &p);
    double ms = (double)(tsr_mono_ns() - t0) / 1e6;
    if (rc) {
        tsr_pp_free(pp);
        return tsr_cli_fail(rc);
    }
    printf("  resnet50: %d nodes, %llu ideals, DP %.1f ms wall (JIT costs %.0f ms before it), period %.0f\n",
           tsr_pp_nnodes(pp), (unsigned long long)p.ideals, ms, jit_ms, p.period);
    tsr_pp_plan_free(&p);
    tsr_pp_free(pp);
    static const struct {
        int n, window, skip;
    } dags[] = {{1000, 2, 50}, {1000, 3, 50}, {1000, 4, 50}};
    for (size_t i = 0; i < sizeof dags / sizeof dags[0]; i++) {
        if ((rc = tsr_pipenet_random_dag(dags[i].n, dags[i].window, dags[i].skip, 26 + i, &pp)))
            return tsr_cli_fail(rc);
        for (int d = 0; d < o->devices && !rc; d++)
            rc = tsr_pp_device(pp, NULL, 0, (uint64_t)(o->dram_mib * 1048576.0), NULL);
        if (!rc)
            rc = tsr_pp_set_link(pp, o->link_bw, o->link_lat);
        t0 = tsr_mono_ns();
        if (!rc)
            rc = tsr_pp_solve_dp(pp, NULL, &p);
        ms = (double)(tsr_mono_ns() - t0) / 1e6;
        if (rc) {
            printf("  random DAG %d nodes, up to %d branches: %s\n", dags[i].n, dags[i].window, tsr_errmsg());
            tsr_pp_free(pp);
            continue;
        }
        printf("  random DAG: %d nodes, blocks of up to %d branches (%d%%): %llu ideals, DP %.1f ms wall, period %.0f, %d "
               "stages\n",
               dags[i].n, dags[i].window, dags[i].skip, (unsigned long long)p.ideals, ms, p.period, p.nstages);
        tsr_pp_plan_free(&p);
        tsr_pp_free(pp);
    }
    return 0;
}

int tsr_cli_plan(int argc, char **argv)
{
    plan_opts_t o = {.devices = 2, .batch = 1, .host_stages = 1, .dram_mib = 1024, .link_bw = 8, .link_lat = 500};
    int r = plan_parse(argc, argv, &o);
    if (r)
        return r == -2 ? 0 : 2;
    return o.bench ? plan_bench(&o) : plan_net(&o);
}
