/*
 * test_pipeexec: the pipelined executor over K devices (jit/tsr_pipeexec.h,
 * jit/tsr_multidev.h) on the scaled-down ResNet-18 (input 32x32, width 8,
 * 10 classes; a few ms per input on fsim):
 *  - 2 and 3 devices on fsim, planned by the DP: every output of a stream
 *    of inputs equal byte for byte to the single-device run, as many stages
 *    as devices, results in order (input i's output is compared with the
 *    reference's input i);
 *  - the check can fail: a broken transfer (a byte flipped on the way into
 *    stage 1) gives outputs that differ, and stages in a wrong order are
 *    refused before anything runs;
 *  - a device failing mid-pipeline (a run budget of 1 on device 1): the
 *    error names the device, the threads stop, and the other devices run
 *    the next pipeline (over devices 0 and 2) with outputs equal to one
 *    device's;
 *  - refusals, one line naming the culprit: K above 64, a plan for another
 *    number of devices, a stage whose footprint is over its device's DRAM, a
 *    host link of 0 bytes per cycle; a non-contiguous plan (nodes alternating
 *    between two devices) runs, its outputs equal to one device's;
 *  - with the systemc backend built: 2 devices, costs from a calibration
 *    run, the slowest stage predicted within 3% of the measured one and the
 *    speed-up over one device above 1.5x; then large + default (250 and
 *    100 MHz): every stage within 3% in the first device's clock;
 *  - the planner's cost of the stem is that of the tap-packed conv the graph
 *    runtime runs, not of the conv as given;
 *  - shared boundaries (a conv's output channels over two consecutive
 *    stages, the host joining the slices): three of them on 4 fsim devices
 *    (a conv alone, a conv whose add then runs on its own, 3 of 8 units),
 *    every output equal to one device's, each device's link charges the
 *    planner's; the shared planner's own plan too; refusals;
 *  - the ILP's non-contiguous plan on 2 systemc devices: outputs equal, each
 *    stage within 3% of its prediction, faster than the contiguous plan;
 *  - host nodes (issue 26: an imported model's host operators between its
 *    device segments): a copy on the host cut into the network, every
 *    output equal to the uncut network's on one device, for a cheap host
 *    node (merged into a device's stage), a slow one (a host stage between
 *    the device stages, its own thread) and one slower than any device
 *    stage (still run, reported as the bottleneck); skipping it makes the
 *    outputs differ; refusals naming it;
 *  - `tessera net resnet18 --devices 2 --small ...`: the plan, the stage
 *    table, "outputs equal to the single-device run: yes"; ResNet-50 (its
 *    shapes with seeded weights) on 2 devices, one input; --fail-device
 *    (exit 1, naming the device), too little DRAM (exit 1, naming the
 *    device), --devices 65 (exit 2).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <math.h>

#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_graph.h"
#include "tsr_multidev.h"
#include "tsr_netdesc.h"
#include "tsr_pipeexec.h"
#include "tsr_pipenet.h"
#include "tsr_pipeplan.h"
#include "tsr_tappack.h"
#include "tsr_testenv.h"

typedef struct {
    tsr_config_t cfg;
    tsr_netdesc_t nd;
    tsr_pp_t *pp;
} net_t;

/* The small network as a planner problem over k devices of the default
 * config (JIT costs, or measured ones when cost is given). */
static void net_make(net_t *n, int k, const double *cost)
{
    assert_int_equal(tsr_config_load("default", &n->cfg), 0);
    assert_int_equal(tsr_netdesc_resnet18_small(3, 1, 32, 8, 10, &n->nd), 0);
    int rc = cost ? tsr_pipenet_problem_costs(&n->nd, &n->cfg, 1, cost, &n->pp)
                  : tsr_pipenet_problem(&n->nd, &n->cfg, 1, &n->pp, NULL);
    if (rc)
        fail_msg("%s", tsr_errmsg());
    for (int d = 0; d < k; d++)
        assert_int_equal(tsr_pp_device(n->pp, NULL, 0, 1ull << 30, NULL), 0);
    assert_int_equal(tsr_pp_set_link(n->pp, 8, 500), 0);
    assert_int_equal(tsr_pp_set_host_stages(n->pp, 0), 0);
}

static void net_free(net_t *n)
{
    tsr_pp_free(n->pp);
    tsr_netdesc_free(&n->nd);
}

static tsr_mdev_t *sys_open(int k, const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *opts)
{
    tsr_config_t cfgs[TSR_MDEV_MAX];
    const char *b[TSR_MDEV_MAX];
    for (int d = 0; d < k; d++)
        cfgs[d] = *cfg, b[d] = backend;
    tsr_mdev_t *m = NULL;
    if (tsr_mdev_open(k, b, cfgs, opts, 8, 500, &m))
        fail_msg("%s", tsr_errmsg());
    return m;
}

static void run_equal(int k)
{
    net_t n;
    net_make(&n, k, NULL);
    tsr_pp_plan_t plan;
    assert_int_equal(tsr_pp_solve_dp(n.pp, NULL, &plan), 0);
    assert_int_equal(plan.nstages, k);
    tsr_mdev_t *m = sys_open(k, "fsim", &n.cfg, NULL);
    tsr_pipex_opts_t o = {.ninputs = 5, .seed = 11};
    tsr_pipex_result_t r;
    if (tsr_pipex_run(m, &n.nd, n.pp, &plan, &o, &r))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r.nstages, k);
    assert_int_equal(r.checked, 5);
    assert_int_equal(r.equal, 5);
    assert_int_equal(r.first_diff, -1);
    assert_int_equal(r.failed_device, -1);
    for (int s = 0; s + 1 < k; s++) /* every stage but the last sends something on */
        assert_true(r.st[s].bytes_out > 0 && r.st[s + 1].bytes_in > 0);
    /* the link's charges are the model's: both ends of every transfer */
    for (int s = 0; s < k; s++) {
        uint64_t bytes;
        double spent = tsr_mdev_link_spent(m, r.st[s].device, &bytes);
        assert_true(bytes == 5 * (r.st[s].bytes_in + r.st[s].bytes_out));
        assert_true(spent > 5 * r.st[s].link - 1e-6 && spent < 5 * r.st[s].link + 1e-6);
    }
    tsr_mdev_close(m);
    tsr_pp_plan_free(&plan);
    net_free(&n);
}

static void test_two_devices(void **state)
{
    (void)state;
    run_equal(2);
}

static void test_three_devices(void **state)
{
    (void)state;
    run_equal(3);
}

/* A broken transfer and a wrong stage order must not pass. */
static void test_broken(void **state)
{
    (void)state;
    net_t n;
    net_make(&n, 2, NULL);
    tsr_pp_plan_t plan;
    assert_int_equal(tsr_pp_solve_dp(n.pp, NULL, &plan), 0);
    tsr_mdev_t *m = sys_open(2, "fsim", &n.cfg, NULL);
    tsr_pipex_opts_t o = {.ninputs = 3, .seed = 5, .corrupt_stage = 1};
    tsr_pipex_result_t r;
    if (tsr_pipex_run(m, &n.nd, n.pp, &plan, &o, &r))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r.checked, 3);
    assert_int_equal(r.equal, 0);
    assert_int_equal(r.first_diff, 0);
    /* the stages swapped: stage 0 would read what stage 1 produces */
    tsr_pp_stage_t t = plan.stages[0];
    plan.stages[0] = plan.stages[1];
    plan.stages[1] = t;
    o.corrupt_stage = 0;
    assert_int_equal(tsr_pipex_run(m, &n.nd, n.pp, &plan, &o, &r), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "not in a topological order"));
    t = plan.stages[0];
    plan.stages[0] = plan.stages[1];
    plan.stages[1] = t;
    tsr_mdev_close(m);
    tsr_pp_plan_free(&plan);
    net_free(&n);
}

/* Device 1 fails its first run; the others are reset and run the next pipeline. */
static void test_failure(void **state)
{
    (void)state;
    net_t n;
    net_make(&n, 3, NULL);
    tsr_pp_plan_t plan, two;
    assert_int_equal(tsr_pp_solve_dp(n.pp, NULL, &plan), 0);
    assert_int_equal(plan.nstages, 3);
    tsr_device_opts_t opts[3];
    memset(opts, 0, sizeof opts);
    opts[1].run_budget = 1;
    tsr_mdev_t *m = sys_open(3, "fsim", &n.cfg, opts);
    tsr_pipex_opts_t o = {.ninputs = 6, .seed = 2};
    tsr_pipex_result_t r;
    int rc = tsr_pipex_run(m, &n.nd, n.pp, &plan, &o, &r);
    assert_int_not_equal(rc, 0);
    assert_int_equal(r.failed_device, 1);
    const char *msg = tsr_errmsg();
    assert_non_null(strstr(msg, "pipeline stopped: device 1"));
    assert_non_null(strstr(msg, "run budget"));
    assert_null(strchr(msg, '\n'));
    /* the other two recover: the network over devices 0 and 2 */
    int nn = tsr_pp_nnodes(n.pp), *slot = malloc(sizeof(int) * (size_t)nn);
    assert_non_null(slot);
    for (int v = 0; v < nn; v++)
        slot[v] = v < nn / 2 ? 0 : 2;
    assert_int_equal(tsr_pp_evaluate(n.pp, slot, &two), 0);
    assert_int_equal(two.nstages, 2);
    if (tsr_pipex_run(m, &n.nd, n.pp, &two, &o, &r))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r.equal, 6);
    assert_int_equal(r.checked, 6);
    free(slot);
    tsr_mdev_close(m);
    tsr_pp_plan_free(&plan);
    tsr_pp_plan_free(&two);
    net_free(&n);
}

static void test_refusals(void **state)
{
    (void)state;
    net_t n;
    net_make(&n, 2, NULL);
    tsr_config_t cfgs[TSR_MDEV_MAX + 1];
    for (int d = 0; d <= TSR_MDEV_MAX; d++)
        cfgs[d] = n.cfg;
    tsr_mdev_t *m = NULL;
    /* K above the limit, a bad link */
    assert_int_equal(tsr_mdev_open(TSR_MDEV_MAX + 1, NULL, cfgs, NULL, 8, 0, &m), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "K = 65"));
    assert_null(m);
    assert_int_equal(tsr_mdev_open(2, NULL, cfgs, NULL, 0, 0, &m), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "link"));
    /* two rtl devices are no longer refused: each runs in a child process (test_pipeexec_rtl); two
     * sampled devices are (their RTL windows are in-process models: they crashed in SystemC, or hung) */
    const char *smp2[2] = {"sampled", "sampled"};
    assert_int_equal(tsr_mdev_open(2, smp2, cfgs, NULL, 8, 0, &m), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "2 devices on the sampled backend"));
    assert_null(m);
    tsr_pp_plan_t plan, alt;
    assert_int_equal(tsr_pp_solve_dp(n.pp, NULL, &plan), 0);
    tsr_pipex_opts_t o = {.ninputs = 2};
    tsr_pipex_result_t r;
    /* a plan for 2 devices on 3 */
    m = sys_open(3, "fsim", &n.cfg, NULL);
    assert_int_equal(tsr_pipex_run(m, &n.nd, n.pp, &plan, &o, &r), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "the plan is for 2 devices, the system has 3"));
    tsr_mdev_close(m);
    /* device 1 with 64 KiB of DRAM: its stage does not fit, refused before anything runs */
    tsr_device_opts_t opts[2];
    memset(opts, 0, sizeof opts);
    opts[1].dram_size = 64 << 10;
    m = sys_open(2, "fsim", &n.cfg, opts);
    assert_int_equal(tsr_pipex_run(m, &n.nd, n.pp, &plan, &o, &r), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "stage 1"));
    assert_non_null(strstr(tsr_errmsg(), "device 1 has 0.1 MiB"));
    tsr_mdev_close(m);
    /* a non-contiguous placement (nodes alternating between the devices) */
    int nn = tsr_pp_nnodes(n.pp), *slot = malloc(sizeof(int) * (size_t)nn);
    assert_non_null(slot);
    for (int v = 0; v < nn; v++)
        slot[v] = v & 1;
    assert_int_equal(tsr_pp_evaluate(n.pp, slot, &alt), 0);
    assert_false(alt.contiguous);
    m = sys_open(2, "fsim", &n.cfg, NULL);
    /* it runs (the stages a DAG of pieces: every node a piece, each waiting for the other device's) */
    if (tsr_pipex_run(m, &n.nd, n.pp, &alt, &o, &r))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r.nstages, 2);
    assert_int_equal(r.checked, 2);
    assert_int_equal(r.equal, 2);
    /* ... and its check can fail: the pipeline skipping nothing but with a broken piece order is caught by
     * the outputs (a plan whose stage lists a node twice is refused before anything runs) */
    int keep = alt.stages[0].nodes[1];
    alt.stages[0].nodes[1] = alt.stages[0].nodes[0];
    assert_int_equal(tsr_pipex_run(m, &n.nd, n.pp, &alt, &o, &r), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "in two stages or none"));
    alt.stages[0].nodes[1] = keep;
    /* inputs out of range */
    o.ninputs = TSR_PIPEX_MAX_INPUTS + 1;
    assert_int_equal(tsr_pipex_run(m, &n.nd, n.pp, &plan, &o, &r), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "inputs"));
    tsr_mdev_close(m);
    free(slot);
    tsr_pp_plan_free(&alt);
    tsr_pp_plan_free(&plan);
    net_free(&n);
}

/* The JIT costs the stem as the graph runtime runs it: tap-packed (a few-channel conv over the network
 * input), not as given (which, on ResNet-18, cost 2.6M cycles in the model against 0.95M run). */
static void test_stem_cost(void **state)
{
    (void)state;
    net_t n;
    net_make(&n, 2, NULL);
    const tsr_nd_node_t *c1 = &n.nd.nodes[0];
    assert_string_equal(c1->name, "conv1");
    assert_true(tsr_tappack_applies(&c1->conv, &n.cfg));
    /* conv1 alone on device 0: stage 0's compute is its cost */
    int nn = tsr_pp_nnodes(n.pp), *slot = malloc(sizeof(int) * (size_t)nn);
    assert_non_null(slot);
    for (int v = 0; v < nn; v++)
        slot[v] = v ? 1 : 0;
    tsr_pp_plan_t p;
    assert_int_equal(tsr_pp_evaluate(n.pp, slot, &p), 0);
    assert_int_equal(p.stages[0].nnodes, 1);
    tsr_device_t *dev;
    assert_int_equal(tsr_device_open("fsim", &n.cfg, NULL, &dev), 0);
    tsr_conv2d_params_t tp;
    tsr_conv2d_plan_t as_given, packed;
    assert_int_equal(tsr_tappack_rewrite(&c1->conv, NULL, &tp, NULL), 0);
    assert_int_equal(tsr_conv2d_plan(dev, &c1->conv, &as_given), 0);
    assert_int_equal(tsr_conv2d_plan(dev, &tp, &packed), 0);
    print_message("conv1: cost %.0f as given, %.0f tap-packed; the planner's %.0f\n", as_given.cost, packed.cost,
                  p.stages[0].compute);
    assert_true(packed.cost < as_given.cost);
    assert_true(p.stages[0].compute == packed.cost);
    tsr_conv2d_plan_free(dev, &as_given);
    tsr_conv2d_plan_free(dev, &packed);
    tsr_device_close(dev);
    free(slot);
    tsr_pp_plan_free(&p);
    net_free(&n);
}

static int node_id(const tsr_netdesc_t *nd, const char *name)
{
    for (int v = 0; v < nd->nnodes; v++)
        if (!strcmp(nd->nodes[v].name, name))
            return v;
    fail_msg("no node %s", name);
    return -1;
}

/* Run a hand-made split plan on k fsim devices: every output equal to one
 * device's (a slice put in the wrong place, or a part computing the wrong
 * channels, makes them differ). split[v] > 0: node v split in that many parts
 * on devices dev[v], dev[v] + 1, ...; else node v on device dev[v]. */
static void run_split(int k, const int *split, const int *dev, const char *what)
{
    net_t n;
    net_make(&n, k, NULL);
    int nn = n.nd.nnodes, parts[64], xs[64 * TSR_PP_MAX_SPLIT], cand[64], nc = 0;
    assert_true(nn <= 64);
    for (int v = 0; v < nn; v++) {
        parts[v] = split[v] > 1 ? split[v] : 1;
        for (int j = 1; j < parts[v]; j++)
            xs[v * TSR_PP_MAX_SPLIT + j - 1] = dev[v] + j;
        if (parts[v] > 1)
            cand[nc++] = v;
    }
    for (int i = 0; i < nc; i++)
        if (tsr_pipenet_add_splits(n.pp, &n.nd, &n.cfg, 1, parts[cand[i]], 1, &cand[i], NULL))
            fail_msg("%s", tsr_errmsg());
    tsr_pp_plan_t plan;
    if (tsr_pp_evaluate_split(n.pp, dev, parts, xs, &plan))
        fail_msg("%s: %s", what, tsr_errmsg());
    tsr_mdev_t *m = sys_open(k, "fsim", &n.cfg, NULL);
    tsr_pipex_opts_t o = {.ninputs = 3, .seed = 21};
    tsr_pipex_result_t r;
    if (tsr_pipex_run(m, &n.nd, n.pp, &plan, &o, &r))
        fail_msg("%s: %s", what, tsr_errmsg());
    print_message("%s: %d stages, outputs equal %d of %d\n", what, r.nstages, r.equal, r.checked);
    assert_int_equal(r.checked, 3);
    assert_int_equal(r.equal, 3);
    int seen = 0;
    for (int s = 0; s < r.nstages; s++)
        seen += r.st[s].parts > 1;
    assert_int_equal(seen, nc);
    /* each part's device paid the whole input and its slice: the model's link, per part device */
    for (int s = 0; s < plan.nstages; s++)
        for (int j = 0; j < plan.stages[s].parts; j++) {
            uint64_t bytes;
            double spent = tsr_mdev_link_spent(m, plan.stages[s].slots[j], &bytes);
            assert_true(bytes == 3 * (r.st[s].bytes_in + r.st[s].bytes_out));
            assert_true(spent > 3 * r.st[s].link - 1e-6 && spent < 3 * r.st[s].link + 1e-6);
        }
    tsr_mdev_close(m);
    tsr_pp_plan_free(&plan);
    net_free(&n);
}

/* The intra-layer split: a conv's output channels over several devices,
 * concatenated by the host, equal to the unsplit conv's output. */
static void test_split(void **state)
{
    (void)state;
    net_t n;
    net_make(&n, 1, NULL);
    int nn = n.nd.nnodes, split[64] = {0}, dev[64];
    int c1 = node_id(&n.nd, "conv1"), mp = node_id(&n.nd, "maxpool"), l1 = node_id(&n.nd, "layer1.0.conv1");
    /* refusals: parts not dividing C_out (8), more parts than channels, a conv feeding an add, not a conv */
    assert_int_equal(n.nd.nodes[c1].conv.c_out, 8);
    assert_int_equal(tsr_pipenet_splittable(&n.nd, c1, 3), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "not 3 equal parts"));
    assert_int_equal(tsr_pipenet_splittable(&n.nd, l1, 2), 0);
    assert_int_equal(tsr_pipenet_splittable(&n.nd, node_id(&n.nd, "layer1.0.conv2"), 2), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "layer1.0.add"));
    assert_int_equal(tsr_pipenet_splittable(&n.nd, node_id(&n.nd, "fc"), 2), TSR_EINVAL);
    assert_int_equal(tsr_pipenet_splittable(&n.nd, c1, TSR_PP_MAX_SPLIT + 1), TSR_EINVAL);
    net_free(&n);
    /* the stem in 4 parts (2 channels each) on devices 0..3, the rest on device 4 */
    for (int v = 0; v < nn; v++)
        dev[v] = 4;
    split[c1] = 4, dev[c1] = 0;
    run_split(5, split, dev, "conv1 in 4 parts");
    /* the stem + maxpool on 0, layer1.0.conv1 in 2 parts on 1 and 2, the rest on 3 */
    memset(split, 0, sizeof split);
    for (int v = 0; v < nn; v++)
        dev[v] = v <= mp ? 0 : 3;
    split[l1] = 2, dev[l1] = 1;
    run_split(4, split, dev, "layer1.0.conv1 in 2 parts");
}

/* The shared boundary split: a conv's output channels over two consecutive
 * stages, the host joining the slices; outputs equal to one device's, the
 * link charged as the model says. The small network at width 16 (channels
 * 16..128: units of one 16-channel block). */
static void test_shared(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_netdesc_t nd;
    tsr_pp_t *pp = NULL;
    tsr_test_small_resnet_problem(4, 8, &cfg, &nd, &pp);
    assert_int_equal(tsr_pp_set_host_stages(pp, 0), 0);
    assert_int_equal(tsr_pipenet_add_shares(pp, &nd, &cfg, 1, 8, NULL), 0);
    int a = node_id(&nd, "layer3.0.conv1"), b = node_id(&nd, "layer3.1.conv2"), c = node_id(&nd, "layer4.1.conv1");
    assert_int_equal(tsr_pp_node_units(pp, a), 4);  /* 64 channels */
    assert_int_equal(tsr_pp_node_units(pp, c), 8);  /* 128 channels */
    assert_int_equal(tsr_pp_node_units(pp, node_id(&nd, "conv1")), 1); /* 16: one block */
    assert_int_equal(tsr_pp_node_units(pp, node_id(&nd, "fc")), 1);
    /* three shared boundaries: a conv alone (a), a conv feeding an add (b: the add runs on its own in the
     * later stage), a part of 3 of 8 units (c) */
    tsr_pp_cut_t cuts[3] = {{a, 1}, {b, 2}, {c, 3}};
    tsr_pp_plan_t plan;
    if (tsr_pp_evaluate_shared(pp, cuts, 3, &plan))
        fail_msg("%s", tsr_errmsg());
    assert_true(plan.shared && plan.nstages == 4);
    tsr_mdev_t *m = sys_open(4, "fsim", &cfg, NULL);
    tsr_pipex_opts_t o = {.ninputs = 5, .seed = 11};
    tsr_pipex_result_t r;
    if (tsr_pipex_run(m, &nd, pp, &plan, &o, &r))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r.checked, 5);
    assert_int_equal(r.equal, 5);
    for (int s = 0; s < 4; s++) { /* the link's charges: the model's, and what the devices were charged */
        uint64_t bytes;
        double spent = tsr_mdev_link_spent(m, r.st[s].device, &bytes);
        double model = plan.stages[s].comm_in + plan.stages[s].comm_out;
        if (fabs(r.st[s].link - model) > 1e-6 || fabs(spent - 5 * r.st[s].link) > 1e-6)
            fail_msg("stage %d: link %.3f, the model %.3f, charged %.3f for 5 inputs", s, r.st[s].link, model, spent);
        assert_true(bytes == 5 * (r.st[s].bytes_in + r.st[s].bytes_out));
    }
    /* the planner's own plan runs too */
    tsr_pp_plan_t sp;
    assert_int_equal(tsr_pp_solve_shared(pp, NULL, &sp), 0);
    tsr_mdev_clear_link(m);
    if (tsr_pipex_run(m, &nd, pp, &sp, &o, &r))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r.equal, 5);
    tsr_pp_plan_free(&sp);
    /* refused: a stage that shares its last node's units with a stage that does not run the rest */
    plan.stages[0].tail = 2;
    assert_int_equal(tsr_pipex_run(m, &nd, pp, &plan, &o, &r), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "does not run the rest"));
    plan.stages[0].tail = 1;
    plan.stages[2].nodes[0] = node_id(&nd, "layer3.1.add"); /* a head that is not the shared node */
    assert_int_equal(tsr_pipex_run(m, &nd, pp, &plan, &o, &r), TSR_EINVAL);
    plan.stages[2].nodes[0] = b;
    tsr_mdev_close(m);
    tsr_pp_plan_free(&plan);
    tsr_pp_free(pp);
    tsr_netdesc_free(&nd);
}

static int have_backend(const char *name)
{
    for (const char *const *b = tsr_backend_names(); *b; b++)
        if (!strcmp(*b, name))
            return 1;
    return 0;
}

/* systemc: a plan with shared boundaries runs, and each stage alone (the later
 * part, the join's output seeded, the stage's graph) takes the cycles it took
 * in the pipeline: the path `--check-on rtl` uses. */
static void test_shared_systemc(void **state)
{
    (void)state;
    if (!have_backend("systemc")) {
        printf("test_shared_systemc: SKIPPED, built without SystemC\n");
        skip();
    }
    tsr_config_t cfg;
    tsr_netdesc_t nd;
    tsr_pp_t *pp = NULL;
    assert_int_equal(tsr_config_load("default", &cfg), 0);
    assert_int_equal(tsr_netdesc_resnet18_small(3, 1, 32, 16, 10, &nd), 0);
    if (tsr_pipenet_problem(&nd, &cfg, 1, &pp, NULL))
        fail_msg("%s", tsr_errmsg());
    for (int d = 0; d < 3; d++)
        assert_int_equal(tsr_pp_device(pp, NULL, 0, 1ull << 30, NULL), 0);
    assert_int_equal(tsr_pp_set_link(pp, 8, 500), 0);
    assert_int_equal(tsr_pp_set_host_stages(pp, 0), 0);
    assert_int_equal(tsr_pipenet_add_shares(pp, &nd, &cfg, 1, 8, NULL), 0);
    tsr_pp_cut_t cuts[2] = {{node_id(&nd, "layer3.1.conv2"), 1}, {node_id(&nd, "layer4.1.conv1"), 5}};
    tsr_pp_plan_t plan;
    if (tsr_pp_evaluate_shared(pp, cuts, 2, &plan))
        fail_msg("%s", tsr_errmsg());
    tsr_mdev_t *m = sys_open(3, "systemc", &cfg, NULL);
    tsr_pipex_opts_t o = {.ninputs = 2, .seed = 5};
    tsr_pipex_result_t r;
    if (tsr_pipex_run(m, &nd, pp, &plan, &o, &r))
        fail_msg("%s", tsr_errmsg());
    tsr_mdev_close(m);
    assert_int_equal(r.equal, 2);
    for (int s = 0; s < 3; s++) {
        double alone = 0;
        if (tsr_pipex_stage_alone_pp("systemc", &cfg, NULL, &nd, pp, &plan, s, 0, 4, &alone))
            fail_msg("%s", tsr_errmsg());
        if (fabs(alone - r.st[s].compute) > 0.5)
            fail_msg("stage %d: %.0f cycles alone, %.0f in the pipeline", s, alone, r.st[s].compute);
    }
    /* without the problem, a shared stage is refused in one line */
    double c;
    assert_int_equal(tsr_pipex_stage_alone("systemc", &cfg, NULL, &nd, &plan, 1, 0, 4, &c), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "shares a node"));
    tsr_pp_plan_free(&plan);
    tsr_pp_free(pp);
    tsr_netdesc_free(&nd);
}

/* systemc: calibrated costs predict the slowest stage within 3%. */
static void test_systemc(void **state)
{
    (void)state;
    if (!have_backend("systemc")) {
        print_message("skipped: built without the systemc backend\n");
        return;
    }
    net_t n;
    tsr_config_t cfg;
    tsr_netdesc_t nd;
    assert_int_equal(tsr_config_load("default", &cfg), 0);
    assert_int_equal(tsr_netdesc_resnet18_small(3, 1, 32, 8, 10, &nd), 0);
    double *cost = calloc((size_t)nd.nnodes, sizeof *cost);
    assert_non_null(cost);
    if (tsr_pipex_calibrate("systemc", &cfg, NULL, &nd, 0, 99, cost))
        fail_msg("%s", tsr_errmsg());
    tsr_netdesc_free(&nd);
    net_make(&n, 2, cost);
    tsr_pp_plan_t plan;
    assert_int_equal(tsr_pp_solve_dp(n.pp, NULL, &plan), 0);
    tsr_mdev_t *m = sys_open(2, "systemc", &n.cfg, NULL);
    tsr_pipex_opts_t o = {.ninputs = 4, .seed = 8};
    tsr_pipex_result_t r;
    if (tsr_pipex_run(m, &n.nd, n.pp, &plan, &o, &r))
        fail_msg("%s", tsr_errmsg());
    assert_true(r.timed);
    assert_int_equal(r.equal, 4);
    double err = (r.period_pred - r.period_meas) / r.period_meas;
    print_message("systemc, 2 devices: slowest stage predicted %.0f, measured %.0f (%+.2f%%), speed-up %.3fx\n",
                  r.period_pred, r.period_meas, 100 * err, r.speedup);
    assert_true(err < 0.03 && err > -0.03);
    assert_true(r.speedup > 1.5);
    /* the replayed timeline: N inputs take the latency plus N - 1 periods at least */
    assert_true(r.makespan >= r.latency + 3 * r.period_meas - 1);
    /* a stage alone on a device of its own runs in the cycles it ran in the pipeline */
    for (int s = 0; s < r.nstages; s++) {
        double alone;
        if (tsr_pipex_stage_alone("systemc", &n.cfg, NULL, &n.nd, &plan, s, 0, 4, &alone))
            fail_msg("%s", tsr_errmsg());
        assert_true(alone == r.st[s].compute);
    }
    tsr_mdev_close(m);
    tsr_pp_plan_free(&plan);
    net_free(&n);
    free(cost);

    /* mixed configs, mixed clocks (large 250 MHz, default 100 MHz): every stage's measured cycles in the
     * first device's clock, as the plan's; each within 3% of its prediction (a device's own cycles would be
     * 2.5x off) */
    tsr_config_t kinds[2];
    assert_int_equal(tsr_config_load("large", &kinds[0]), 0);
    assert_int_equal(tsr_config_load("default", &kinds[1]), 0);
    assert_int_not_equal(kinds[0].clock_mhz, kinds[1].clock_mhz);
    assert_int_equal(tsr_netdesc_resnet18_small(3, 1, 32, 8, 10, &nd), 0);
    double *one = calloc((size_t)nd.nnodes, sizeof *one), *cost2 = calloc((size_t)nd.nnodes * 2, sizeof *cost2);
    assert_true(one && cost2);
    for (int k = 0; k < 2; k++) {
        if (tsr_pipex_calibrate("systemc", &kinds[k], NULL, &nd, 0, 99, one))
            fail_msg("%s", tsr_errmsg());
        for (int v = 0; v < nd.nnodes; v++)
            cost2[2 * v + k] = one[v];
    }
    tsr_pp_t *pp;
    assert_int_equal(tsr_pipenet_problem_costs(&nd, kinds, 2, cost2, &pp), 0);
    assert_int_equal(tsr_pp_device(pp, NULL, 0, 1ull << 30, NULL), 0);
    assert_int_equal(tsr_pp_device(pp, NULL, 1, 1ull << 30, NULL), 0);
    assert_int_equal(tsr_pp_set_link(pp, 8, 500), 0);
    assert_int_equal(tsr_pp_set_host_stages(pp, 0), 0);
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &plan), 0);
    assert_int_equal(plan.nstages, 2);
    const char *b[2] = {"systemc", "systemc"};
    assert_int_equal(tsr_mdev_open(2, b, kinds, NULL, 8, 500, &m), 0);
    o.ninputs = 3;
    if (tsr_pipex_run(m, &nd, pp, &plan, &o, &r))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r.equal, 3);
    for (int s = 0; s < r.nstages; s++) {
        err = (r.st[s].predicted - r.st[s].measured) / r.st[s].measured;
        print_message("large,default stage %d: predicted %.0f, measured %.0f (%+.2f%%)\n", s, r.st[s].predicted,
                      r.st[s].measured, 100 * err);
        assert_true(err < 0.03 && err > -0.03);
    }
    tsr_mdev_close(m);
    tsr_pp_plan_free(&plan);
    tsr_pp_free(pp);
    tsr_netdesc_free(&nd);
    free(one);
    free(cost2);
}

/* Run `tessera ARGS` (stderr joined); its output in buf, its exit status returned. */
static int run_cli(const char *args, char *buf, size_t cap)
{
    return tsr_test_run_cli(TSR_CLI, args, buf, cap);
}

static void test_cli(void **state)
{
    (void)state;
    static char out[65536];
    int rc = run_cli("net resnet18 --devices 2 --small 32,8,10 --inputs 3", out, sizeof out);
    if (rc)
        fail_msg("exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "plan (dp, contiguous): 2 stages"));
    assert_non_null(strstr(out, "pred cycles"));
    assert_non_null(strstr(out, "outputs equal to the single-device run: yes (3 of 3)"));
    rc = run_cli("net resnet18 --devices 3 --small 32,8,10 --inputs 3 --fail-device 1", out, sizeof out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "pipeline stopped: device 1"));
    /* 0.2 MiB per device: the planner's footprints fit, the device's DRAM does not (instruction buffers,
     * the arena): refused when the stage is planned on its device, before any input runs */
    rc = run_cli("net resnet18 --devices 2 --small 32,8,10 --inputs 2 --dram 0.2", out, sizeof out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "on device 1 (fsim)"));
    assert_non_null(strstr(out, "DRAM"));
    assert_null(strstr(out, "outputs equal"));
    /* ResNet-50's shapes with seeded weights run too (one input on fsim: a few seconds) */
    rc = run_cli("net resnet50 --devices 2 --inputs 1", out, sizeof out);
    if (rc)
        fail_msg("exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "net: resnet50 on 2 devices"));
    assert_non_null(strstr(out, "outputs equal to the single-device run: yes (1 of 1)"));
    rc = run_cli("net resnet50 --devices 2 --small 32,8,10", out, sizeof out);
    assert_int_equal(rc, 2);
    /* each stage alone on another backend (fsim: untimed, the path only) */
    rc = run_cli("net resnet18 --devices 2 --small 32,8,10 --inputs 1 --check-on fsim", out, sizeof out);
    if (rc)
        fail_msg("exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "stage 1 alone on fsim: ran, untimed"));
    /* --split: runs (a split is chosen or not: outputs equal either way); refusals */
    rc = run_cli("net resnet18 --devices 3 --small 32,8,10 --inputs 2 --split 2 --split-nodes 8", out, sizeof out);
    if (rc)
        fail_msg("exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "outputs equal to the single-device run: yes (2 of 2)"));
    rc = run_cli("net resnet18 --devices 3 --small 32,8,10 --split 9", out, sizeof out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "--split needs parts 2..8"));
    rc = run_cli("net resnet18 --devices 2 --small 32,8,10 --split 3", out, sizeof out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "only 2 devices"));
    /* --share: the shared planner beats the whole-layer plan on the small network at width 16 (JIT costs) and
     * its plan runs, outputs equal; usage */
    rc = run_cli("net resnet18 --devices 4 --small 32,16,10 --inputs 2 --share 8", out, sizeof out);
    if (rc)
        fail_msg("exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "plan (shared, contiguous): 4 stages"));
    assert_non_null(strstr(out, "shared boundary"));
    assert_non_null(strstr(out, "outputs equal to the single-device run: yes (2 of 2)"));
    rc = run_cli("net resnet18 --devices 3 --small 32,8,10 --share 1", out, sizeof out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "--share needs units 2..64"));
    rc = run_cli("net resnet18 --devices 65", out, sizeof out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "at most 64 devices"));
    rc = run_cli("net resnet18 --devices 2 --configs default,default,default", out, sizeof out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "3 configs for 2 devices"));
}

/* (Issue 26: host nodes.) The small network with a host node cut into it:
 * node v's output X is read through a host node that copies it (X -> X'), so
 * the network's outputs are the uncut network's. *nd2 gets the cut
 * description (its own tensors and nodes arrays; the nodes' parameter arrays
 * are nd's). */
static int host_copy(void *ctx, int h, const void *in, const void *in2, void *out)
{
    (void)h, (void)in2;
    memcpy(out, in, *(const uint64_t *)ctx);
    return 0;
}

static void host_cut(const tsr_netdesc_t *nd, int v, tsr_netdesc_t *nd2, int *x, int *x2)
{
    *nd2 = *nd;
    nd2->tensors = malloc(sizeof *nd2->tensors * (size_t)(nd->ntensors + 1));
    nd2->nodes = malloc(sizeof *nd2->nodes * (size_t)nd->nnodes);
    assert_non_null(nd2->tensors);
    assert_non_null(nd2->nodes);
    memcpy(nd2->tensors, nd->tensors, sizeof *nd->tensors * (size_t)nd->ntensors);
    memcpy(nd2->nodes, nd->nodes, sizeof *nd->nodes * (size_t)nd->nnodes);
    *x = nd->nodes[v].out;
    *x2 = nd2->ntensors++;
    nd2->tensors[*x2] = nd->tensors[*x];
    int readers = 0;
    for (int j = v + 1; j < nd->nnodes; j++)
        for (int k = 0; k < 2; k++)
            if (nd2->nodes[j].in[k] == *x)
                nd2->nodes[j].in[k] = *x2, readers++;
    assert_true(readers > 0);
}

/* One run of the cut network on k fsim devices, the host node costing
 * host_cyc: the plan's host stages (slot >= k) counted into *hstages; every
 * output equal to the uncut network's on one device (ref), unless skip. */
static void run_host_cut(const net_t *n, const tsr_netdesc_t *nd2, tsr_pipenet_host_t *H, int k, int skip,
                         uint8_t **ref, int *hstages, tsr_pipex_result_t *r)
{
    tsr_pp_t *pp = NULL;
    if (tsr_pipenet_problem_host(nd2, H, 8, 500, &n->cfg, 1, NULL, &pp))
        fail_msg("%s", tsr_errmsg());
    for (int d = 0; d < k; d++)
        assert_int_equal(tsr_pp_device(pp, NULL, 0, 1ull << 30, NULL), 0);
    assert_int_equal(tsr_pp_set_link(pp, 8, 500), 0);
    assert_int_equal(tsr_pp_set_host_stages(pp, 1), 0);
    tsr_pp_plan_t plan;
    if (tsr_pp_solve_dp(pp, NULL, &plan))
        fail_msg("%s", tsr_errmsg());
    *hstages = 0;
    for (int s = 0; s < plan.nstages; s++)
        *hstages += plan.stages[s].slot >= k;
    tsr_mdev_t *m = sys_open(k, "fsim", &n->cfg, NULL);
    uint64_t ob = tsr_netdesc_tensor_bytes(nd2, nd2->output);
    uint8_t *outs[4];
    for (int i = 0; i < 4; i++)
        assert_non_null(outs[i] = calloc(1, ob));
    tsr_pipex_opts_t o = {.ninputs = 4, .seed = 11, .host = H, .skip_host = skip, .outputs = (void *const *)outs};
    if (tsr_pipex_run(m, nd2, pp, &plan, &o, r))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r->checked, 4);
    int same = 0; /* against the uncut network: the host node ran, in its place, for the right input */
    for (int i = 0; i < 4; i++)
        same += !memcmp(outs[i], ref[i], ob);
    assert_int_equal(same, skip ? 0 : 4);
    if (skip)
        assert_true(r->equal < r->checked);
    else
        assert_int_equal(r->equal, 4);
    for (int i = 0; i < 4; i++)
        free(outs[i]);
    tsr_mdev_close(m);
    tsr_pp_plan_free(&plan);
    tsr_pp_free(pp);
}

static void test_host_nodes(void **state)
{
    (void)state;
    net_t n;
    net_make(&n, 1, NULL);
    /* the uncut network's outputs on one device: what every pipelined output must be */
    tsr_device_t *dev = NULL;
    tsr_graph_t *g = NULL;
    assert_int_equal(tsr_device_open("fsim", &n.cfg, NULL, &dev), 0);
    assert_int_equal(tsr_graph_from_netdesc(&n.cfg, &n.nd, &g), 0);
    assert_int_equal(tsr_graph_plan(g, dev, 0), 0);
    uint64_t xb = tsr_netdesc_tensor_bytes(&n.nd, 0), ob = tsr_netdesc_tensor_bytes(&n.nd, n.nd.output);
    uint8_t *x = malloc(xb), *ref[4];
    for (int i = 0; i < 4; i++) {
        assert_non_null(ref[i] = malloc(ob));
        tsr_netdesc_random_input(&n.nd, 11 + (uint64_t)i, x);
        const void *in[1] = {x};
        void *out[1] = {ref[i]};
        assert_int_equal(tsr_graph_exec(g, in, out), 0);
    }
    for (int i = 1; i < 4; i++) /* distinct outputs: a reordered stream shows */
        assert_true(memcmp(ref[i], ref[0], ob) != 0);
    tsr_graph_free(g);
    tsr_device_close(dev);
    free(x);
    tsr_netdesc_t nd2;
    int v = n.nd.nnodes / 2, tx, tx2;
    host_cut(&n.nd, v, &nd2, &tx, &tx2);
    uint64_t xbytes = tsr_netdesc_tensor_bytes(&n.nd, tx);
    const char *names[1] = {"host:copy"};
    int in_t[1] = {tx}, out_t[1] = {tx2};
    double cyc[1] = {100};
    tsr_pipenet_host_t H = {.n = 1, .names = names, .in_t = in_t, .out_t = out_t, .cycles = cyc, .run = host_copy,
                            .ctx = &xbytes};
    tsr_pipex_result_t r;
    int hs;
    /* a cheap host node: merged into a device's stage (no extra stage and its link) */
    run_host_cut(&n, &nd2, &H, 2, 0, ref, &hs, &r);
    assert_int_equal(hs, 0);
    assert_int_equal(r.nstages, 2);
    assert_int_equal(r.st[0].host_nodes + r.st[1].host_nodes, 1);
    /* a slow host node (cost on the order of a stage): a host stage of its own, on its own thread */
    double total = 0;
    for (int u = 0; u < n.nd.nnodes; u++)
        total += tsr_pp_node_cost(n.pp, u, 0);
    cyc[0] = total / 3;
    run_host_cut(&n, &nd2, &H, 2, 0, ref, &hs, &r);
    assert_int_equal(hs, 1);
    assert_int_equal(r.nstages, 3);
    int hstage = -1;
    for (int s = 0; s < r.nstages; s++)
        if (r.st[s].device < 0)
            hstage = s;
    assert_true(hstage > 0 && hstage < 2); /* between the device stages */
    assert_int_equal(r.st[hstage].host_nodes, 1);
    /* a host stage slower than any device stage: still a valid plan, run, and reported as the bottleneck */
    cyc[0] = total * 2;
    run_host_cut(&n, &nd2, &H, 2, 0, ref, &hs, &r);
    assert_int_equal(hs, 1);
    assert_int_equal(r.st[r.slowest_pred].device, -1);
    /* the check can fail: the pipeline skipping its host node gives outputs that differ */
    cyc[0] = 100;
    run_host_cut(&n, &nd2, &H, 2, 1, ref, &hs, &r);
    cyc[0] = total / 3;
    run_host_cut(&n, &nd2, &H, 3, 1, ref, &hs, &r);
    /* refusals naming the host node: it writes a tensor a node makes; it reads its own output */
    tsr_pp_t *pp = NULL;
    out_t[0] = tx;
    assert_int_equal(tsr_pipenet_problem_host(&nd2, &H, 8, 500, &n.cfg, 1, NULL, &pp), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "host:copy"));
    out_t[0] = tx2, in_t[0] = tx2;
    assert_int_equal(tsr_pipenet_problem_host(&nd2, &H, 8, 500, &n.cfg, 1, NULL, &pp), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "host:copy"));
    assert_null(pp);
    free(nd2.tensors), free(nd2.nodes);
    for (int i = 0; i < 4; i++)
        free(ref[i]);
    net_free(&n);
}

/* The ILP's non-contiguous plan on 2 systemc devices (small network, JIT
 * costs): it runs, every output equal to one device's, each stage's
 * measured load within 3% of its prediction, the period shorter than the
 * contiguous DP's plan measured the same way. */
static void test_noncontiguous_systemc(void **state)
{
    (void)state;
    if (!have_backend("systemc") || !tsr_pp_have_ilp())
        skip();
    net_t n;
    net_make(&n, 2, NULL);
    tsr_pp_plan_t ilp, dp;
    tsr_pp_opts_t io = {.time_limit_s = 120};
    if (tsr_pp_solve_ilp(n.pp, &io, &ilp))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(tsr_pp_solve_dp(n.pp, NULL, &dp), 0);
    assert_false(ilp.contiguous);
    assert_true(ilp.period < dp.period);
    tsr_mdev_t *m = sys_open(2, "systemc", &n.cfg, NULL);
    tsr_pipex_opts_t o = {.ninputs = 4, .seed = 3};
    tsr_pipex_result_t r, rd;
    if (tsr_pipex_run(m, &n.nd, n.pp, &ilp, &o, &r) || tsr_pipex_run(m, &n.nd, n.pp, &dp, &o, &rd))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r.equal, 4);
    assert_int_equal(rd.equal, 4);
    assert_true(r.timed);
    for (int s = 0; s < r.nstages; s++)
        assert_true(fabs(r.st[s].predicted - r.st[s].measured) < 0.03 * r.st[s].measured);
    assert_true(r.period_meas < rd.period_meas);
    /* the replay's stream: at least one input per slowest stage, at most the stages one after another */
    assert_true(r.makespan >= 4 * r.period_meas - 1e-6);
    assert_true(r.makespan <= 4 * (r.st[0].measured + r.st[1].measured) + 1e-6);
    tsr_mdev_close(m);
    tsr_pp_plan_free(&ilp);
    tsr_pp_plan_free(&dp);
    net_free(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_devices), cmocka_unit_test(test_three_devices), cmocka_unit_test(test_broken),
        cmocka_unit_test(test_failure),     cmocka_unit_test(test_refusals),      cmocka_unit_test(test_systemc),
        cmocka_unit_test(test_stem_cost),   cmocka_unit_test(test_cli), cmocka_unit_test(test_split),
        cmocka_unit_test(test_shared),      cmocka_unit_test(test_shared_systemc), cmocka_unit_test(test_host_nodes),
        cmocka_unit_test(test_noncontiguous_systemc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
