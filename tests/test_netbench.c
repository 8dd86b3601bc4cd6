/*
 * test_netbench: the benchmarks the CLI prints, through the library
 * (jit/tsr_netbench.h, jit/tsr_mmbench.h), on fsim.
 *  - layers: the ResNet-18 table (names found case-insensitively, the
 *    shapes' MACs), a layer run with the fsim check (checked, no
 *    difference, untimed on fsim, moved and compulsory bytes present), the
 *    totals add up, and bad indices are errors.
 *  - the CLI prints the library's numbers: `tessera bench --kind resnet18
 *    --layers C11 --backend fsim` has the row the library computes (MACs,
 *    bound, moved, compulsory) and a total line equal to it.
 *  - network: the small ResNet-18 runs, its check against fsim finds no
 *    difference and compares every tensor not fused away, the top class
 *    is the largest logit, and a second run with the same seed gives the
 *    same output; without check, tsr_netbench_check refuses.
 *  - matmul: a device matmul matches the host reference; a corrupted
 *    element is found at its place; sizes off the tensor op are refused;
 *    the GEMM-bound stream's tensor ops are reps x tile x reduction.
 * Failures name the figure that differs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_mmbench.h"
#include "tsr_netbench.h"

static void test_layer_table(void **state)
{
    (void)state;
    assert_int_equal(tsr_rn18_layer_find("C1"), 0);
    assert_int_equal(tsr_rn18_layer_find("c11"), 10);
    assert_int_equal(tsr_rn18_layer_find("C12"), -1);
    assert_int_equal(tsr_rn18_layer_find(""), -1);
    assert_null(tsr_rn18_layer(-1));
    assert_null(tsr_rn18_layer(TSR_RN18_LAYERS));
    const tsr_rn18_layer_t *L = tsr_rn18_layer(1);
    assert_non_null(L);
    assert_string_equal(L->name, "C2");
    assert_int_equal(L->hw, 56);
    assert_int_equal(L->cin, 64);
    assert_int_equal(L->cout, 64);
}

static void open_bench(tsr_lbench_t *b, int check)
{
    tsr_lbench_opts_t o = {.cfgname = "default", .backend = "fsim", .seed = 1, .check = check, .tappack = 1};
    int rc = tsr_lbench_open(&o, b);
    if (rc)
        fail_msg("tsr_lbench_open: %s", tsr_errmsg());
}

static void test_layer_run(void **state)
{
    (void)state;
    tsr_lbench_t b;
    open_bench(&b, 1);
    assert_true(b.peak == 256.0);
    assert_true(b.bw == 8.0);
    tsr_lbench_row_t r, r2;
    int rc = tsr_lbench_layer(&b, 10, &r); /* C11: 7x7, 512 -> 512, 3x3 */
    if (rc)
        fail_msg("C11: %s", tsr_errmsg());
    assert_string_equal(r.layer->name, "C11");
    assert_true(r.macs == 7.0 * 7 * 512 * 512 * 9);
    assert_true(r.checked);
    assert_false(r.differs);
    assert_false(r.timed); /* fsim counts no cycles */
    assert_false(r.tappacked);
    assert_true(r.bound >= r.macs / b.peak);
    assert_true(r.bound_rd <= r.bound);
    assert_true(r.compulsory >= 7.0 * 7 * 512 * 2 + 512.0 * 512 * 9);
    assert_true(r.moved > 0);
    if ((rc = tsr_lbench_layer(&b, 0, &r2))) /* C1: tap-packed */
        fail_msg("C1: %s", tsr_errmsg());
    assert_true(r2.tappacked);
    assert_int_equal(r2.tp.c_in, 21);
    assert_true(r2.checked && !r2.differs);
    tsr_lbench_total_t t;
    tsr_lbench_total_init(&t);
    tsr_lbench_total_add(&b, &t, &r);
    tsr_lbench_total_add(&b, &t, &r2);
    assert_int_equal(t.nrun, 2);
    assert_int_equal(t.ndiff, 0);
    assert_false(t.timed);
    assert_true(t.macs == r.macs + r2.macs);
    assert_true(t.moved == r.moved + r2.moved);
    assert_int_equal(tsr_lbench_layer(&b, TSR_RN18_LAYERS, &r), TSR_EINVAL);
    assert_int_equal(tsr_lbench_layer(&b, -1, &r), TSR_EINVAL);
    tsr_lbench_close(&b);
}

/* The C11 row and the total line of the CLI's table, as numbers. */
static void cli_row(const char *cmd, const char *name, double v[4])
{
    FILE *p = popen(cmd, "r");
    char line[1024];
    int found = 0;
    assert_non_null(p);
    while (fgets(line, sizeof line, p)) {
        char nm[16], shape[64], cyc[32], util[16], ratio[16], ratio_rd[16], limit[16];
        double t[4];
        if (sscanf(line, "%15s %63s %lf %31s %15s %lf %15s %15s %15s %lf %lf", nm, shape, &t[0], cyc, util, &t[1],
                   ratio, ratio_rd, limit, &t[2], &t[3]) == 11 &&
            !strcmp(nm, name)) {
            memcpy(v, t, sizeof t);
            found = 1;
        }
    }
    assert_int_equal(pclose(p), 0);
    if (!found)
        fail_msg("no %s row in the output of %s", name, cmd);
}

static void test_cli_prints_library(void **state)
{
    (void)state;
    char cmd[1024];
    double row[4], tot[4];
    snprintf(cmd, sizeof cmd, "%s bench --kind resnet18 --layers C11 --backend fsim 2>/dev/null", TSR_CLI);
    cli_row(cmd, "C11", row);
    cli_row(cmd, "total", tot);
    tsr_lbench_t b;
    tsr_lbench_row_t r;
    open_bench(&b, 0);
    if (tsr_lbench_layer(&b, 10, &r))
        fail_msg("C11: %s", tsr_errmsg());
    tsr_lbench_close(&b);
    const double lib[4] = {r.macs, r.bound, r.moved, r.compulsory};
    static const char *what[4] = {"MACs", "bound", "moved", "compulsory"};
    /* and, independently of the library, by hand for C11 (7x7, 512 -> 512, 3x3, int8): MACs
     * 7*7*512*512*9; bound = MACs / 256 MACs a cycle (compute-bound: compulsory / 8 B a cycle is
     * 301,440); compulsory = input 7*7*512 + weights 512*512*9 + output 7*7*512 + int32 bias 512*4.
     * (moved depends on the plan: the library's figure only.) */
    static const double hand[4] = {115605504.0, 451584.0, -1.0, 25088.0 + 2359296.0 + 25088.0 + 2048.0};
    for (int i = 0; i < 4; i++) {
        if (hand[i] >= 0 && row[i] != hand[i])
            fail_msg("C11 %s: the CLI prints %.0f, by hand %.0f", what[i], row[i], hand[i]);
        if (fabs(row[i] - round(lib[i])) > 0.5)
            fail_msg("C11 %s: the CLI prints %.0f, the library computes %.1f", what[i], row[i], lib[i]);
        if (row[i] != tot[i])
            fail_msg("total %s %.0f is not the one row's %.0f", what[i], tot[i], row[i]);
    }
}

static void test_network(void **state)
{
    (void)state;
    tsr_netbench_opts_t o = {.cfgname = "default", .backend = "fsim", .seed = 3, .batch = 2, .runs = 1,
                             .check = 1, .small = 1, .small_hw = 32, .small_width = 16, .small_classes = 10};
    tsr_netbench_t nb;
    tsr_netbench_check_t ck;
    int rc = tsr_netbench_run(&o, &nb);
    if (rc)
        fail_msg("tsr_netbench_run: %s", tsr_errmsg());
    assert_non_null(nb.g);
    assert_true(nb.again.kc_hits > 0); /* the second plan finds every kernel in memory */
    if ((rc = tsr_netbench_check(&nb, NULL, NULL, &ck)))
        fail_msg("tsr_netbench_check: %s", tsr_errmsg());
    assert_int_equal(ck.diffs, 0);
    assert_int_equal(ck.compared + ck.fused, nb.nd.nnodes);
    assert_true(ck.compared > 0);
    const int classes = nb.nd.tensors[nb.nd.output].c;
    assert_int_equal(classes, 10);
    for (int i = 0; i < classes; i++)
        assert_true((int8_t)nb.out[i] <= nb.top_logit);
    assert_int_equal((int8_t)nb.out[nb.top], nb.top_logit);
    uint8_t first[20];
    memcpy(first, nb.out, sizeof first); /* batch 2 x 10 classes */
    tsr_netbench_close(&nb);

    o.check = 0;
    if ((rc = tsr_netbench_run(&o, &nb)))
        fail_msg("tsr_netbench_run again: %s", tsr_errmsg());
    assert_memory_equal(nb.out, first, sizeof first);
    assert_int_equal(tsr_netbench_check(&nb, NULL, NULL, &ck), TSR_EINVAL);
    tsr_netbench_close(&nb);

    o.batch = 0;
    assert_int_equal(tsr_netbench_run(&o, &nb), TSR_EINVAL);
    tsr_netbench_close(&nb);
}

static void test_matmul(void **state)
{
    (void)state;
    enum { M = 64, K = 64, N = 32 };
    static int8_t a[M * K], b[K * N], c[M * N];
    tsr_mmbench_opts_t o = {.cfgname = "default", .backend = "fsim", .m = M, .k = K, .n = N, .shift = 6};
    tsr_mmbench_result_t r;
    tsr_mmbench_random(7, a, sizeof a, b, sizeof b);
    int rc = tsr_mmbench_matmul(&o, a, b, c, &r);
    if (rc)
        fail_msg("tsr_mmbench_matmul: %s", tsr_errmsg());
    size_t fi = 99, fj = 99;
    int64_t ref = 0;
    assert_int_equal(tsr_mmbench_check(a, b, c, M, K, N, 6, &fi, &fj, &ref), 0);
    assert_true(r.ctr.macs == (uint64_t)M * K * N);
    assert_int_equal(r.macs_per_op, 256);
    assert_null(r.info.insns);
    c[5 * N + 7] = (int8_t)(c[5 * N + 7] ^ 1);
    assert_int_equal(tsr_mmbench_check(a, b, c, M, K, N, 6, &fi, &fj, &ref), 1);
    assert_int_equal(fi, 5);
    assert_int_equal(fj, 7);
    assert_int_equal(ref, c[5 * N + 7] ^ 1);
    o.n = 24; /* not a multiple of BLOCK_OUT 16 */
    assert_int_equal(tsr_mmbench_matmul(&o, a, b, c, &r), TSR_EINVAL);
}

static void test_gemm(void **state)
{
    (void)state;
    tsr_mmbench_opts_t o = {.cfgname = "default", .backend = "fsim", .m = 256, .k = 1024, .n = 128, .reps = 3,
                            .seed = 1};
    tsr_mmbench_gemm_t g;
    int rc = tsr_mmbench_gemm(&o, &g);
    if (rc)
        fail_msg("tsr_mmbench_gemm: %s", tsr_errmsg());
    assert_true(g.tm >= 1 && g.tn >= 1 && g.kb >= 1);
    assert_true(g.kb <= 1024 / 16);
    assert_true(g.ctr.gemm_ops == (uint64_t)(3 * g.tm * g.tn * g.kb));
    assert_true(g.load.gemm_ops == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_table),     cmocka_unit_test(test_layer_run),
        cmocka_unit_test(test_cli_prints_library), cmocka_unit_test(test_network),
        cmocka_unit_test(test_matmul),          cmocka_unit_test(test_gemm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
