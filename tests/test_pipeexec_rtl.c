/*
 * test_pipeexec_rtl: the pipelined executor on rtl devices (issue 26), each
 * Verilated model in a child process of its own (backend rtlproc,
 * driver/tsr_rtlproc.h), on the scaled-down ResNet-18 (input 32x32, width 8,
 * 10 classes; the default config's model, cached):
 *  - 2 rtl devices and the rtl single-device reference in one process (it
 *    was refused: one process could hold one Verilated model): every output
 *    equal byte for byte to the reference's, each stage's measured cycles
 *    the RTL's (nonzero), the slowest within 10% of the JIT's prediction;
 *  - a child killed mid-run (TESSERA_RTLD_FAULT=kill:1:2, SIGKILL after
 *    device 1's second start): the pipeline stops with one line naming
 *    device 1 and how its process ended, without hanging (the CTest's
 *    timeout), and the other two devices run the network (over devices 0
 *    and 2) with outputs equal to one device's;
 *  - a child that hangs (SIGSTOP, a reply timeout of 2 s): the same, "did
 *    not answer in time";
 *  - `tessera net resnet18 --small 32,8,10 --devices 2 --backend rtl`: "outputs
 *    equal to the single-device run: yes"; with device 1's child killed, exit
 *    status 1 and one line on stderr naming device 1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_multidev.h"
#include "tsr_netdesc.h"
#include "tsr_pipeexec.h"
#include "tsr_pipenet.h"
#include "tsr_pipeplan.h"
#include "tsr_testenv.h"

typedef struct {
    tsr_config_t cfg;
    tsr_netdesc_t nd;
    tsr_pp_t *pp;
} net_t;

static void net_make(net_t *n, int k)
{
    assert_int_equal(tsr_config_load("default", &n->cfg), 0);
    assert_int_equal(tsr_netdesc_resnet18_small(3, 1, 32, 8, 10, &n->nd), 0);
    if (tsr_pipenet_problem(&n->nd, &n->cfg, 1, &n->pp, NULL))
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

static tsr_mdev_t *sys_open(int k, const tsr_config_t *cfg)
{
    tsr_config_t cfgs[TSR_MDEV_MAX];
    const char *b[TSR_MDEV_MAX];
    for (int d = 0; d < k; d++)
        cfgs[d] = *cfg, b[d] = "rtl";
    tsr_mdev_t *m = NULL;
    if (tsr_mdev_open(k, b, cfgs, NULL, 8, 500, &m))
        fail_msg("%s", tsr_errmsg());
    return m;
}

static void test_two_rtl(void **state)
{
    (void)state;
    net_t n;
    net_make(&n, 2);
    tsr_pp_plan_t plan;
    assert_int_equal(tsr_pp_solve_dp(n.pp, NULL, &plan), 0);
    assert_int_equal(plan.nstages, 2);
    tsr_mdev_t *m = sys_open(2, &n.cfg);
    tsr_pipex_opts_t o = {.ninputs = 3, .seed = 11};
    tsr_pipex_result_t r;
    if (tsr_pipex_run(m, &n.nd, n.pp, &plan, &o, &r))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r.checked, 3);
    assert_int_equal(r.equal, 3);
    assert_int_equal(r.failed_device, -1);
    assert_true(r.timed);
    for (int s = 0; s < r.nstages; s++) {
        printf("stage %d: predicted %.0f, measured %.0f cycles\n", s, r.st[s].predicted, r.st[s].measured);
        assert_true(r.st[s].measured > 0);
    }
    printf("slowest: predicted %.0f, measured %.0f\n", r.period_pred, r.period_meas);
    assert_true(r.period_meas > 0);
    assert_true(r.period_pred > 0.9 * r.period_meas && r.period_pred < 1.1 * r.period_meas);
    tsr_mdev_close(m);
    tsr_pp_plan_free(&plan);
    net_free(&n);
}

/* Device 1's child dies (kill) or hangs (stop) mid-run; the other two recover. */
static void run_fault(const char *fault, const char *why)
{
    net_t n;
    net_make(&n, 3);
    tsr_pp_plan_t plan, two;
    assert_int_equal(tsr_pp_solve_dp(n.pp, NULL, &plan), 0);
    assert_int_equal(plan.nstages, 3);
    setenv("TESSERA_RTLD_TIMEOUT_MS", "2000", 1);
    setenv("TESSERA_RTLD_FAULT", fault, 1);
    tsr_mdev_t *m = sys_open(3, &n.cfg);
    tsr_pipex_opts_t o = {.ninputs = 4, .seed = 2};
    tsr_pipex_result_t r;
    int rc = tsr_pipex_run(m, &n.nd, n.pp, &plan, &o, &r);
    unsetenv("TESSERA_RTLD_FAULT");
    assert_int_not_equal(rc, 0);
    assert_int_equal(r.failed_device, 1);
    const char *msg = tsr_errmsg();
    printf("%s\n", msg);
    assert_non_null(strstr(msg, "pipeline stopped: device 1 (rtl"));
    assert_non_null(strstr(msg, why));
    assert_non_null(strstr(msg, "the other devices were reset"));
    assert_null(strstr(msg, "reset with an error"));
    assert_null(strchr(msg, '\n'));
    /* device 1 is gone and says so */
    uint64_t a;
    assert_int_equal(tsr_mem_alloc(tsr_mdev_device(m, 1), 64, &a), TSR_EBACKEND);
    /* the other two recover: the network over devices 0 and 2 */
    int nn = tsr_pp_nnodes(n.pp), *slot = malloc(sizeof(int) * (size_t)nn);
    assert_non_null(slot);
    for (int v = 0; v < nn; v++)
        slot[v] = v < nn / 2 ? 0 : 2;
    assert_int_equal(tsr_pp_evaluate(n.pp, slot, &two), 0);
    assert_int_equal(two.nstages, 2);
    if (tsr_pipex_run(m, &n.nd, n.pp, &two, &o, &r))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(r.equal, 4);
    assert_int_equal(r.checked, 4);
    free(slot);
    tsr_mdev_close(m);
    unsetenv("TESSERA_RTLD_TIMEOUT_MS");
    tsr_pp_plan_free(&plan);
    tsr_pp_plan_free(&two);
    net_free(&n);
}

static void test_kill(void **state)
{
    (void)state;
    run_fault("kill:1:2", "killed by signal 9");
}

static void test_hang(void **state)
{
    (void)state;
    run_fault("stop:1:2", "did not answer in time");
}

/* Run the CLI with a shell prefix; its stdout+stderr (or stderr alone) into buf; the exit status. */
static int run_cli(const char *env, const char *args, const char *redir, char *buf, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s %s %s", env, TSR_CLI, args, redir);
    return tsr_test_run_cmd(cmd, buf, cap);
}

static void test_cli(void **state)
{
    (void)state;
    static char out[1 << 16];
    const char *args = "net resnet18 --small 32,8,10 --devices 2 --backend rtl --inputs 3";
    assert_int_equal(run_cli("", args, "2>&1", out, sizeof out), 0);
    assert_non_null(strstr(out, "outputs equal to the single-device run: yes (3 of 3)"));
    assert_non_null(strstr(out, "slowest stage: predicted"));
    assert_int_equal(run_cli("TESSERA_RTLD_FAULT=kill:1:2", args, "2>&1 >/dev/null", out, sizeof out), 1);
    printf("%s", out);
    assert_non_null(strstr(out, "pipeline stopped: device 1 (rtl"));
    assert_non_null(strstr(out, "killed by signal 9"));
    char *nl = strchr(out, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], 0); /* one line */
}

/* A sampled device in a pipeline: its RTL windows are an in-process Verilated model, and the
 * single-device reference on the same backend was a second one that hung closing (Verilator's
 * scopeErase): the reference runs on systemc now. timeout turns a hang into exit 124. Two sampled
 * devices are refused in one line. */
static void test_cli_sampled(void **state)
{
    (void)state;
    static char out[1 << 16];
    assert_int_equal(run_cli("timeout 300", "net resnet18 --small 32,8,10 --devices 1 --backend sampled --sample all "
                                             "--inputs 3 < /dev/null", "2>&1", out, sizeof out), 0);
    assert_non_null(strstr(out, "outputs equal to the single-device run: yes (3 of 3)"));
    assert_int_not_equal(run_cli("timeout 300", "net resnet18 --small 32,8,10 --devices 2 --backend sampled < /dev/null",
                                 "2>&1 >/dev/null", out, sizeof out), 0);
    assert_non_null(strstr(out, "sampled backend"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_rtl),
        cmocka_unit_test(test_kill),
        cmocka_unit_test(test_hang),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_cli_sampled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
