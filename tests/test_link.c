/*
 * test_link: the link between K devices and the host timed by the SystemC
 * interconnect (driver/tsr_link.h, sim/systemc/tsr_sc_link.cpp; issue 26,
 * `tessera net --link shared`):
 *  - p2p (a link per stage): the replay's hand-over times equal, for every
 *    stage and input, the executor's timeline rule computed here in plain C
 *    (start after the stage before hands the input over and the stage's own
 *    previous input; receives + compute + sends; the hand-over waits for
 *    room in the next queue), on random problems;
 *  - shared (one link, FIFO): two stages whose transfers overlap with tiny
 *    compute: the steady-state period equals the sum over one input's
 *    transfers of latency + bytes / bandwidth (the link is never idle), and
 *    is above the p2p period (the slowest stage's own time); on random
 *    problems the link carries every transfer once (busy = N x that sum)
 *    and the makespan is at least that and the p2p makespan;
 *  - the executor on 2 systemc devices (the small ResNet-18): the p2p
 *    replay's makespan is the executor's timeline's, a p2p system gives the
 *    same figures (no replay); on 4 devices with a link of 0.1 B/cycle the
 *    contended period is the sum of one input's link cycles (the link is
 *    the bottleneck), above the uncontended one;
 *  - refusals in one line: a bad mode, a bad window, a transfer of 4 GiB;
 *    `tessera net --link bogus` exits 2; `--link shared` prints the replay;
 *    `tessera plan --link shared` the sum of the plan's transfers per input
 *    (ResNet-18 on 4 devices at 1 B/cycle: 959,344 = 10 transfers x 500 +
 *    150,528 (the input) + 2 x (200,704 + 100,352 + 2 x 50,176) (both ends
 *    between stages) + 1,000 (the logits)).
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
#include "tsr_link.h"
#include "tsr_multidev.h"
#include "tsr_netdesc.h"
#include "tsr_pipeexec.h"
#include "tsr_pipenet.h"
#include "tsr_pipeplan.h"
#include "tsr_util.h"
#include "tsr_testenv.h"

static int have_systemc(void)
{
    if (tsr_link_available())
        return 1;
    printf("SKIPPED: built without SystemC\n");
    return 0;
}

static double xfer(double bw, double lat, uint64_t b) { return b ? lat + (double)b / bw : 0; }

/* The executor's timeline rule (jit/tsr_pipeexec.c, timeline), each stage's
 * transfers on a link of its own: fin[s * N + i]. */
static void ref_p2p(const tsr_link_problem_t *p, double *fin)
{
    int S = p->nstages, N = p->ninputs;
    double *start = calloc((size_t)S * (size_t)N, sizeof *start);
    assert_non_null(start);
    for (int i = 0; i < N; i++)
        for (int s = 0; s < S; s++) {
            const tsr_link_stage_t *st = &p->st[s];
            double t0 = s > 0 ? fin[(s - 1) * N + i] : 0;
            if (i > 0 && fin[s * N + i - 1] > t0)
                t0 = fin[s * N + i - 1];
            start[s * N + i] = t0;
            double f = t0 + st->compute[i];
            for (int k = 0; k < st->nrx; k++)
                f += xfer(p->bytes_per_cycle, p->latency, st->rx[k]);
            for (int k = 0; k < st->ntx; k++)
                f += xfer(p->bytes_per_cycle, p->latency, st->tx[k]);
            if (s < S - 1 && i >= p->depth && start[(s + 1) * N + i - p->depth] > f)
                f = start[(s + 1) * N + i - p->depth];
            fin[s * N + i] = f;
        }
    free(start);
}

/* One input's link cycles over every stage: the shared link's lower bound. */
static double floor_of(const tsr_link_problem_t *p)
{
    double t = 0;
    for (int s = 0; s < p->nstages; s++) {
        for (int k = 0; k < p->st[s].nrx; k++)
            t += xfer(p->bytes_per_cycle, p->latency, p->st[s].rx[k]);
        for (int k = 0; k < p->st[s].ntx; k++)
            t += xfer(p->bytes_per_cycle, p->latency, p->st[s].tx[k]);
    }
    return t;
}

/* Two stages: host -> stage 0 (4,096 B), stage 0 -> stage 1 (20,000 B: sent
 * and received), stage 1 -> host (8,000 B); 100 cycles of compute each. */
static void test_two_stages(void **state)
{
    (void)state;
    if (!have_systemc())
        skip();
    enum { N = 200 };
    double c[N];
    for (int i = 0; i < N; i++)
        c[i] = 100;
    tsr_link_stage_t st[2] = {{.nrx = 1, .rx = {4096}, .ntx = 1, .tx = {20000}, .compute = c},
                              {.nrx = 1, .rx = {20000}, .ntx = 1, .tx = {8000}, .compute = c}};
    tsr_link_problem_t p = {.mode = TSR_LINK_SHARED, .bytes_per_cycle = 8, .latency = 500, .nstages = 2,
                            .ninputs = N, .depth = 2, .win0 = 50, .win1 = 150, .st = st};
    tsr_link_result_t sh = {0}, pp = {0};
    if (tsr_link_replay(&p, &sh))
        fail_msg("%s", tsr_errmsg());
    p.mode = TSR_LINK_P2P;
    if (tsr_link_replay(&p, &pp))
        fail_msg("%s", tsr_errmsg());
    /* by hand: 4 transfers of 500 cycles latency, 52,096 bytes at 8 B/cycle */
    double analytic = 4 * 500 + (4096 + 20000 + 20000 + 8000) / 8.0; /* 8,512 */
    double p2p = 100 + 500 + 20000 / 8.0 + 500 + 8000 / 8.0;         /* stage 1: 4,600 */
    printf("shared period %.3f (analytic %.3f), p2p %.3f (analytic %.3f), link busy %.0f of %.0f\n", sh.period,
           analytic, pp.period, p2p, sh.busy, sh.makespan);
    assert_true(fabs(sh.period - analytic) < 0.01);
    assert_true(fabs(pp.period - p2p) < 0.01);
    assert_true(sh.period > pp.period + 1000);
    /* the shared link carried every transfer once */
    assert_true(fabs(sh.busy - N * analytic) < 1);
    assert_true(sh.wait[0] + sh.wait[1] > 0 && pp.wait[0] == 0 && pp.wait[1] == 0);
}

static void random_problem(uint64_t *seed, tsr_link_problem_t *p, tsr_link_stage_t *st, double *cyc, int maxn)
{
    memset(st, 0, sizeof *st * 5);
    p->nstages = 1 + (int)(tsr_splitmix64(seed) % 5);
    p->ninputs = 1 + (int)(tsr_splitmix64(seed) % (uint64_t)maxn);
    p->depth = 1 + (int)(tsr_splitmix64(seed) % 3);
    p->bytes_per_cycle = (double)(1 + tsr_splitmix64(seed) % 16) / 2;
    p->latency = (double)(tsr_splitmix64(seed) % 1000);
    p->win0 = p->win1 = 0;
    p->st = st;
    for (int s = 0; s < p->nstages; s++) {
        st[s].nrx = (int)(tsr_splitmix64(seed) % 3);
        st[s].ntx = (int)(tsr_splitmix64(seed) % 3);
        for (int k = 0; k < st[s].nrx; k++)
            st[s].rx[k] = tsr_splitmix64(seed) % 50000;
        for (int k = 0; k < st[s].ntx; k++)
            st[s].tx[k] = tsr_splitmix64(seed) % 50000;
        for (int i = 0; i < p->ninputs; i++)
            cyc[s * maxn + i] = (double)(tsr_splitmix64(seed) % 20000) + 0.25 * (double)(i % 4);
        st[s].compute = cyc + s * maxn;
    }
}

/* p2p equals the timeline rule exactly; shared is at least the bounds. */
static void test_random(void **state)
{
    (void)state;
    if (!have_systemc())
        skip();
    enum { MAXN = 40 };
    uint64_t seed = 26;
    tsr_link_stage_t st[5];
    double cyc[5 * MAXN], fin[5 * MAXN], ref[5 * MAXN];
    for (int t = 0; t < 200; t++) {
        tsr_link_problem_t p = {.mode = TSR_LINK_P2P};
        random_problem(&seed, &p, st, cyc, MAXN);
        tsr_link_result_t r = {.fin = fin};
        if (tsr_link_replay(&p, &r))
            fail_msg("%s", tsr_errmsg());
        ref_p2p(&p, ref);
        for (int k = 0; k < p.nstages * p.ninputs; k++)
            if (fabs(fin[k] - ref[k]) > 0.01 + 1e-7 * ref[k]) /* (SystemC time: 1 ps steps of 1 ns cycles) */
                fail_msg("problem %d: stage %d input %d: p2p replay %.3f, the timeline rule %.3f", t, k / p.ninputs,
                         k % p.ninputs, fin[k], ref[k]);
        double p2p_period = r.period;
        p.mode = TSR_LINK_SHARED;
        r.fin = NULL;
        if (tsr_link_replay(&p, &r))
            fail_msg("%s", tsr_errmsg());
        /* one link carries every transfer once, one at a time */
        double all = floor_of(&p) * p.ninputs;
        double tol = 0.01 + 1e-7 * r.makespan;
        if (fabs(r.busy - all) > 0.01 * p.ninputs || r.makespan < all - tol)
            fail_msg("problem %d: the link busy %.3f, makespan %.3f; the transfers take %.3f", t, r.busy, r.makespan,
                     all);
        if (r.makespan < ref[p.nstages * p.ninputs - 1] - tol)
            fail_msg("problem %d: shared makespan %.3f below p2p %.3f", t, r.makespan, ref[p.nstages * p.ninputs - 1]);
        (void)p2p_period;
    }
}

static void test_refusals(void **state)
{
    (void)state;
    double c[4] = {1, 2, 3, 4};
    tsr_link_stage_t st[1] = {{.nrx = 1, .rx = {1ull << 32}, .compute = c}};
    tsr_link_problem_t p = {.mode = TSR_LINK_SHARED, .bytes_per_cycle = 8, .nstages = 1, .ninputs = 4, .depth = 2,
                            .st = st};
    tsr_link_result_t r;
    assert_int_equal(tsr_link_replay(&p, &r), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "4 GiB"));
    st[0].rx[0] = 100;
    p.win0 = 3, p.win1 = 2;
    assert_int_equal(tsr_link_replay(&p, &r), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "window"));
    p.win0 = p.win1 = 0;
    p.mode = (tsr_link_mode_t)7;
    assert_int_equal(tsr_link_replay(&p, &r), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "mode"));
    p.mode = TSR_LINK_SHARED;
    p.ninputs = TSR_LINK_MAX_INPUTS + 1;
    assert_int_equal(tsr_link_replay(&p, &r), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "inputs"));
    p.ninputs = 4;
    p.bytes_per_cycle = 0;
    assert_int_equal(tsr_link_replay(&p, &r), TSR_EINVAL);
    assert_null(strchr(tsr_errmsg(), '\n'));
}

/* The small ResNet-18 on k systemc devices, planned by the DP with a link of
 * bw bytes per cycle (500 cycles latency); shared or p2p. */
static void run_net(int k, double bw, int shared, tsr_pipex_result_t *r)
{
    tsr_config_t cfg, cfgs[4];
    tsr_netdesc_t nd;
    tsr_pp_t *pp = NULL;
    tsr_test_small_resnet_problem(k, bw, &cfg, &nd, &pp);
    tsr_pp_plan_t plan;
    if (tsr_pp_solve_dp(pp, NULL, &plan))
        fail_msg("%s", tsr_errmsg());
    const char *b[4];
    for (int d = 0; d < k; d++)
        cfgs[d] = cfg, b[d] = "systemc";
    tsr_mdev_t *m = NULL;
    if (tsr_mdev_open(k, b, cfgs, NULL, bw, 500, &m) ||
        (shared && tsr_mdev_set_link_mode(m, TSR_LINK_SHARED)))
        fail_msg("%s", tsr_errmsg());
    tsr_pipex_opts_t o = {.ninputs = 6, .seed = 5};
    if (tsr_pipex_run(m, &nd, pp, &plan, &o, r))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r->equal, 6);
    tsr_mdev_close(m);
    tsr_pp_plan_free(&plan);
    tsr_pp_free(pp);
    tsr_netdesc_free(&nd);
}

static void test_pipeline(void **state)
{
    (void)state;
    if (!have_systemc())
        skip();
    tsr_pipex_result_t *p2p = malloc(sizeof *p2p), *sh = malloc(sizeof *sh), *slow = malloc(sizeof *slow);
    assert_true(p2p && sh && slow);
    run_net(2, 8, 0, p2p);
    run_net(2, 8, 1, sh);
    /* p2p: no replay; the shared system's own figures are the same run's */
    assert_int_equal(p2p->link_shared, 0);
    assert_true(p2p->period_link == 0 && p2p->makespan_link == 0);
    assert_int_equal(sh->link_shared, 1);
    assert_true(fabs(sh->period_meas - p2p->period_meas) < 1e-6 && fabs(sh->makespan - p2p->makespan) < 1e-6);
    /* the p2p replay is the executor's timeline; the shared link is never faster */
    assert_true(fabs(sh->makespan_p2p - sh->makespan) < 0.5);
    assert_true(sh->period_link >= sh->period_p2p - 0.01 && sh->makespan_link >= sh->makespan - 0.5);
    /* 4 devices on a slow link (0.1 B/cycle): the link is the bottleneck, the period its cycles per input */
    run_net(4, 0.1, 1, slow);
    double fl = 0;
    for (int s = 0; s < slow->nstages; s++)
        fl += slow->st[s].link;
    printf("0.1 B/cycle: link cycles per input %.1f (executor %.1f), period shared %.1f, p2p %.1f\n", fl,
           slow->link_floor, slow->period_link, slow->period_p2p);
    assert_true(fabs(fl - slow->link_floor) < 1e-6);
    assert_true(fl > slow->period_p2p * 1.05);
    assert_true(fabs(slow->period_link - fl) < 0.01 * fl);
    assert_true(slow->period_link >= fl - 0.01);
    free(p2p), free(sh), free(slow);
}

/* Run `tessera ARGS` (stderr joined); its output in buf, its exit status returned. */
static int run_cli(const char *args, char *buf, size_t cap)
{
    return tsr_test_run_cli(TSR_CLI, args, buf, cap);
}

static void test_cli(void **state)
{
    (void)state;
    static char out[1 << 16];
    assert_int_equal(run_cli("net resnet18 --small 32,8,10 --devices 2 --link bogus", out, sizeof out), 2);
    assert_non_null(strstr(out, "--link needs p2p or shared"));
    if (!have_systemc())
        return;
    assert_int_equal(run_cli("net resnet18 --small 32,8,10 --devices 2 --backend systemc --inputs 4 --link shared "
                             "--link-bw 1", out, sizeof out), 0);
    assert_non_null(strstr(out, "(shared by every device and the host)"));
    assert_non_null(strstr(out, "shared link (one link for every device and the host"));
    assert_non_null(strstr(out, "outputs equal to the single-device run: yes (4 of 4)"));
    /* the planner's bound: the sum of the plan's transfers (comm in + out) per input */
    assert_int_equal(run_cli("plan --net resnet18 --devices 4 --link shared --link-bw 1", out, sizeof out), 0);
    assert_non_null(strstr(out, "shared link: one input's transfers take 959344 cycles"));
    assert_int_equal(run_cli("plan --net resnet18 --link foo", out, sizeof out), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_stages), cmocka_unit_test(test_random), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_pipeline),   cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
