/*
 * test_sampled_rtl: the sampled backend (driver/tsr_sampled.h) against a
 * plain rtl device, on the small ResNet-18 (32x32 input, width 16, 10
 * classes; 23 submissions, about 112 k RTL cycles).
 *
 *  - `all`: every submission runs on the RTL after a hand-off; each one's
 *    RTL cycles equal the plain rtl run's for the same layer, every tensor
 *    of the network (all kept: no buffer reuse) is byte-identical to the
 *    rtl run's, and the estimate is the rtl run's total with bound 0.
 *  - every:3 and random:0.3 (three seeds): each window's RTL cycles equal
 *    the plain run's for that submission (the hand-off leaves the RTL in
 *    the state the full run had: DRAM handed over, nothing on chip needed),
 *    the 95% interval is known and contains the plain run's total.
 *  - on-chip state: a window whose stream reads an accumulator row it did
 *    not write, after a submission the RTL did not run, is refused naming
 *    the submission and the row; under `all` the same stream runs and
 *    gives the rtl device's answer.
 *  - pieces: every cut of the small network's streams either builds a
 *    piece the verifier accepts, which runs on fsim and holds the range's
 *    instructions after its prologue, or is refused in one line; most cuts
 *    build. pieces:1:4 runs a piece of every submission on the RTL and a
 *    second fast model (their DRAM compared after each), leaves the
 *    program's data and the fast model's cycles as a plain run's, and its
 *    estimate (a model: pieces stand for their submissions) is within 2%.
 *  - cycles only (rtl.timing_only, the fast model without data): `all`
 *    and random:0.3 windows have the plain run's cycles, the data is
 *    marked invalid (reads return zeros).
 *  - a hand-off that forgets the buffers written while the RTL was not
 *    running (fault injection) is caught by the DRAM check after the next
 *    window, naming the submission and the address.
 *  - refusals, one line each: bad window specs, a config only the RTL can
 *    hold (SERIAL_CORE, the fast model times the pipelined core), the
 *    CLI's bad --sample value.
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
#include <sys/wait.h>

#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_graph.h"
#include "tsr_netbench.h"
#include "tsr_piece.h"
#include "tsr_sampled.h"
#include "tsr_testenv.h"

#define NLAYERS_MAX 64

/* The plain rtl run, once. */
static struct {
    int done;
    int nl;
    double cycles[NLAYERS_MAX];
    double total;
    int nt;
    uint8_t *tensors[256];
    uint64_t tbytes[256];
} ref;

static int have_systemc(void)
{
    for (const char *const *n = tsr_backend_names(); *n; n++)
        if (!strcmp(*n, "systemc"))
            return 1;
    return 0;
}

static tsr_netbench_opts_t net_opts(const char *backend, const tsr_device_opts_t *dev)
{
    tsr_netbench_opts_t o = {.cfgname = "default", .backend = backend, .dev = dev, .seed = 3, .batch = 1,
                             .runs = 1, .small = 1, .small_hw = 32, .small_width = 16, .small_classes = 10,
                             .flags = TSR_GRAPH_KEEP_ALL};
    return o;
}

/* Every tensor of the run that reached DRAM (NULL for a fused one). */
static void read_tensors(tsr_netbench_t *nb, uint8_t **t, uint64_t *bytes, int *nt)
{
    *nt = tsr_graph_ntensors(nb->g);
    assert_true(*nt <= 256);
    for (int i = 0; i < *nt; i++) {
        t[i] = NULL;
        bytes[i] = 0;
        if (tsr_graph_tensor_fused(nb->g, i))
            continue;
        const tsr_dtensor_t *d = tsr_graph_tensor_desc(nb->g, i);
        bytes[i] = (uint64_t)d->n * d->c * d->h * d->w;
        t[i] = malloc(bytes[i] ? bytes[i] : 1);
        assert_non_null(t[i]);
        if (tsr_graph_read_tensor(nb->g, i, t[i])) { /* the tap-packed input: not readable back */
            free(t[i]);
            t[i] = NULL;
        }
    }
}

static void run_ref(void)
{
    if (ref.done)
        return;
    tsr_device_opts_t d = {0};
    tsr_netbench_opts_t o = net_opts("rtl", &d);
    tsr_netbench_t nb;
    if (tsr_netbench_run(&o, &nb))
        fail_msg("rtl run: %s", tsr_errmsg());
    const tsr_graph_layer_t *L;
    for (int i = 0; (L = tsr_graph_layer(nb.g, i)); i++) {
        if (!strcmp(L->op, "fused") || !strcmp(L->op, "reshape") || !strcmp(L->op, "concat")) /* no submission */
            continue;
        assert_true(ref.nl < NLAYERS_MAX);
        ref.cycles[ref.nl++] = L->cycles;
        ref.total += L->cycles;
    }
    read_tensors(&nb, ref.tensors, ref.tbytes, &ref.nt);
    tsr_netbench_close(&nb);
    ref.done = 1;
}

/* The small network on the sampled backend with spec and seed; the
 * per-submission records are checked against the plain run. */
static void run_sampled_opts(const char *spec, uint64_t seed, tsr_sampled_est_t *e, int check_tensors,
                             int timing_only)
{
    tsr_device_opts_t d = {.sample = spec, .sample_seed = seed, .rtl.timing_only = timing_only};
    tsr_netbench_opts_t o = net_opts("sampled", &d);
    tsr_netbench_t nb;
    if (tsr_netbench_run(&o, &nb))
        fail_msg("sampled %s: %s", spec, tsr_errmsg());
    assert_int_equal(tsr_sampled_estimate(nb.dev, e), TSR_OK);
    const tsr_sampled_sub_t *subs;
    size_t n;
    assert_int_equal(tsr_sampled_submissions(nb.dev, &subs, &n), TSR_OK);
    /* one submission per layer, in order (nothing else runs on the device) */
    assert_int_equal((int)n, ref.nl);
    for (size_t i = 0; i < n; i++)
        if (subs[i].window && !subs[i].piece && (double)subs[i].rtl_cycles != ref.cycles[i])
            fail_msg("%s: submission %zu: RTL window %llu cycles, the plain rtl run %.0f", spec, i,
                     (unsigned long long)subs[i].rtl_cycles, ref.cycles[i]);
    if (check_tensors) {
        uint8_t *t[256];
        uint64_t b[256];
        int nt;
        read_tensors(&nb, t, b, &nt);
        int compared = 0;
        assert_int_equal(nt, ref.nt);
        for (int i = 0; i < nt; i++) {
            assert_true(b[i] == ref.tbytes[i] && !t[i] == !ref.tensors[i]);
            if (t[i] && memcmp(t[i], ref.tensors[i], b[i]))
                fail_msg("%s: tensor %d differs from the plain rtl run's", spec, i);
            compared += t[i] != NULL;
            free(t[i]);
        }
        assert_true(compared >= 20); /* the network's tensors, not a few */
    }
    char line[512];
    printf("  %s (seed %llu): %s; plain rtl %.0f\n", spec, (unsigned long long)seed,
           tsr_sampled_format(e, line, sizeof line), ref.total);
    if (timing_only) /* cycles only: nothing read back passes for data */
        assert_int_equal(tsr_device_data_valid(nb.dev), 0);
    tsr_netbench_close(&nb);
}

static void run_sampled(const char *spec, uint64_t seed, tsr_sampled_est_t *e, int check_tensors)
{
    run_sampled_opts(spec, seed, e, check_tensors, 0);
}

/* Cycles only (rtl.timing_only): the fast model computes no data and the
 * windows get what the host wrote (instructions, uops, inputs), nothing
 * compared; the design's cycles do not depend on the data, so every
 * window's RTL cycles are the plain run's (run_sampled_opts checks each)
 * and `all` is its total exactly. Fails if a window misses its uops or
 * instructions (a hand-off that skips them: other cycles, or a hang). */
static void test_cycles_only(void **st)
{
    (void)st;
    if (!have_systemc())
        skip();
    run_ref();
    tsr_sampled_est_t e;
    run_sampled_opts("all", 0, &e, 0, 1);
    assert_int_equal((int)e.windows, ref.nl);
    assert_true(e.estimate == ref.total && e.half95 == 0);
    run_sampled_opts("random:0.3", 1, &e, 0, 1);
    assert_true(e.windows >= 2 && e.windows < e.submissions && e.half95 > 0);
    if (fabs(e.estimate - ref.total) > e.half95)
        fail_msg("cycles only, random:0.3: %.0f +- %.0f does not contain the rtl run's %.0f", e.estimate, e.half95,
                 ref.total);
}

/* A hand-off that forgets what the submissions run on the fast model
 * alone stored (fault injection): the window after one reads stale inputs
 * on the RTL, and the DRAM check after it names the submission and the
 * first differing address. */
static void test_stale_handoff_caught(void **st)
{
    (void)st;
    if (!have_systemc())
        skip();
    setenv("TESSERA_SAMPLED_BREAK", "stores", 1);
    tsr_device_opts_t d = {.sample = "every:3"};
    tsr_netbench_opts_t o = net_opts("sampled", &d);
    tsr_netbench_t nb;
    int rc = tsr_netbench_run(&o, &nb);
    unsetenv("TESSERA_SAMPLED_BREAK");
    assert_int_not_equal(rc, TSR_OK);
    const char *m = tsr_errmsg();
    if (!strstr(m, "after its RTL window the RTL's DRAM differs from the fast model's at 0x") ||
        !strstr(m, "submission #"))
        fail_msg("stale hand-off: %s", m);
    tsr_netbench_close(&nb);
}

static void test_all_equals_rtl(void **st)
{
    (void)st;
    if (!have_systemc())
        skip();
    run_ref();
    tsr_sampled_est_t e;
    run_sampled("all", 0, &e, 1);
    assert_int_equal((int)e.windows, ref.nl);
    assert_int_equal((int)e.submissions, ref.nl);
    assert_true(e.estimate == ref.total);
    assert_true(e.half95 == 0 && e.se == 0);
}

static void test_interval_contains_rtl(void **st)
{
    (void)st;
    if (!have_systemc())
        skip();
    run_ref();
    static const struct {
        const char *spec;
        uint64_t seed;
    } cases[] = {{"every:3", 0}, {"random:0.3", 1}, {"random:0.3", 2}, {"random:0.3", 3}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tsr_sampled_est_t e;
        run_sampled(cases[k].spec, cases[k].seed, &e, 0);
        assert_true(e.windows >= 2 && e.windows < e.submissions);
        assert_true(e.half95 > 0);
        /* a bound that is honest but useless would pass: it must be tight too */
        assert_true(e.half95 < 0.05 * e.estimate);
        if (fabs(e.estimate - ref.total) > e.half95)
            fail_msg("%s seed %llu: estimate %.0f +- %.0f does not contain the rtl run's %.0f", cases[k].spec,
                     (unsigned long long)cases[k].seed, e.estimate, e.half95, ref.total);
    }
}

/* out[0] = acc[0] + imm (an ALU add: it reads acc row 0), stored at addr. */
static void add_store(tsr_device_t *dev, tsr_insn_t s[4], uint64_t addr, int imm)
{
    tsr_test_mov_store(dev, s, addr, imm);
    s[1].alu_opcode = TSR_ALU_ADD;
}

static int run4(tsr_device_t *dev, const tsr_insn_t *s)
{
    int rc = tsr_submit(dev, s, 4);
    return rc ? rc : tsr_wait(dev, -1);
}

static void test_onchip_state(void **st)
{
    (void)st;
    if (!have_systemc())
        skip();
    tsr_config_t cfg;
    assert_int_equal(tsr_config_load("default", &cfg), TSR_OK);
    static const char *const specs[] = {"every:2", "all"};
    for (int k = 0; k < 2; k++) {
        tsr_device_opts_t o = {.sample = specs[k]};
        tsr_device_t *dev = NULL;
        uint64_t out;
        tsr_insn_t a[4], b[4], c[4];
        if (tsr_device_open("sampled", &cfg, &o, &dev))
            fail_msg("open: %s", tsr_errmsg());
        assert_int_equal(tsr_mem_alloc(dev, 4096, &out), TSR_OK);
        tsr_test_mov_store(dev, a, out, 5); /* acc[0] = 5: submission 0, a window either way */
        tsr_test_mov_store(dev, b, out, 7); /* acc[0] = 7: submission 1, on the fast model alone under every:2 */
        add_store(dev, c, out, 3);          /* acc[0] + 3: submission 2, a window; reads acc row 0 */
        assert_int_equal(run4(dev, a), TSR_OK);
        assert_int_equal(run4(dev, b), TSR_OK);
        int rc = run4(dev, c);
        if (k == 0) {
            assert_int_equal(rc, TSR_EVERIFY);
            const char *m = tsr_errmsg();
            if (!strstr(m, "submission #2") || !strstr(m, "acc row 0") || strchr(m, '\n'))
                fail_msg("refusal does not name the submission and the row: %s", m);
            /* the device goes on: a refused submission did not run (the next is #2 again, a window), and
             * the same stream as #3 is not a window: it runs on the fast model, acc[0] 7 + 3 */
            assert_int_equal(run4(dev, b), TSR_OK);
            assert_int_equal(run4(dev, c), TSR_OK);
            int8_t v = 0;
            assert_int_equal(tsr_mem_read(dev, out, &v, 1), TSR_OK);
            assert_int_equal(v, 10);
        } else {
            assert_int_equal(rc, TSR_OK);
            int8_t v = 0;
            assert_int_equal(tsr_mem_read(dev, out, &v, 1), TSR_OK);
            assert_int_equal(v, 10);
        }
        tsr_device_close(dev);
    }
}

static void test_refusals(void **st)
{
    (void)st;
    if (!have_systemc())
        skip();
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    assert_int_equal(tsr_config_load("default", &cfg), TSR_OK);
    static const char *const bad[] = {"every:0", "every:", "every:-1", "random:0", "random:1.5", "random:x",
                                      "random:nan", "some", "", "ALL", "every:3x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tsr_device_opts_t o = {.sample = bad[i]};
        assert_int_equal(tsr_device_open("sampled", &cfg, &o, &dev), TSR_EINVAL);
        assert_null(dev);
        const char *m = tsr_errmsg();
        if (!strstr(m, "sample spec") || strchr(m, '\n'))
            fail_msg("spec \"%s\": %s", bad[i], m);
    }
    /* a config the RTL holds and the fast model does not: refused before any model is built */
    tsr_config_t serial;
    assert_int_equal(tsr_config_load("ice40", &serial), TSR_OK);
    assert_true(serial.serial_core);
    assert_int_not_equal(tsr_device_open("sampled", &serial, NULL, &dev), TSR_OK);
    assert_null(dev);
    if (!strstr(tsr_errmsg(), "fast model (systemc) cannot hold") || !strstr(tsr_errmsg(), "SERIAL_CORE"))
        fail_msg("serial core: %s", tsr_errmsg());
    /* timing-only is the systemc backend's and sampled's (cycles only), not the rtl's */
    tsr_device_opts_t to = {.rtl.timing_only = 1};
    assert_int_not_equal(tsr_device_open("rtl", &cfg, &to, &dev), TSR_OK);
    assert_non_null(strstr(tsr_errmsg(), "timing-only"));
    /* the CLI: one line, exit 2 */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s net resnet18 --backend sampled --sample every:0 --small 8,4,2 2>&1", TSR_CLI);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int status = pclose(p);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2);
    if (!strstr(out, "every:K needs an integer K >= 1") || strchr(out, '\n') != out + n - 1)
        fail_msg("CLI: %s", out);
}

static int dev_read(void *ctx, uint64_t addr, void *dst, size_t n) { return tsr_mem_read(ctx, addr, dst, n); }

static void test_piece_cuts(void **st)
{
    (void)st;
    tsr_device_opts_t d = {0};
    tsr_netbench_opts_t o = net_opts("fsim", &d);
    tsr_netbench_t nb;
    if (tsr_netbench_run(&o, &nb))
        fail_msg("fsim run: %s", tsr_errmsg());
    const tsr_config_t *cfg = tsr_device_config(nb.dev);
    int built = 0, refused = 0, ran = 0;
    const tsr_graph_layer_t *L;
    for (int li = 0; (L = tsr_graph_layer(nb.g, li)); li++) {
        size_t n = 0;
        const tsr_insn_t *s = tsr_graph_stream(nb.g, li, &n);
        if (!s || n < 3)
            continue;
        const size_t len = (n - 1) / 6 ? (n - 1) / 6 : 1;
        for (size_t a = 0; a + 1 < n; a++) {
            const size_t b = a + len < n - 1 ? a + len : n - 1;
            tsr_insn_t *p = NULL;
            size_t np = 0, npro = 0;
            int rc = tsr_piece_build(cfg, s, n, a, b, dev_read, nb.dev, &p, &np, &npro);
            if (rc) {
                const char *m = tsr_errmsg();
                if (rc != TSR_EVERIFY || strchr(m, '\n') || !*m)
                    fail_msg("layer %s cut [%zu, %zu): %d %s", L->name, a, b, rc, m);
                refused++;
                continue;
            }
            built++;
            assert_int_equal((int)np, (int)(npro + (b - a) + 1));
            assert_int_equal(p[np - 1].opcode, TSR_OP_FINISH);
            for (size_t i = a; i < b; i++) /* the range itself, a dropped STORE aside */
                if (p[npro + i - a].opcode != s[i].opcode || p[npro + i - a].mem_type != s[i].mem_type)
                    fail_msg("layer %s cut [%zu, %zu): instruction %zu is not the range's", L->name, a, b, i);
            if (a % 7 == 0) { /* and it runs (the device's own checks; every tenth or so, for time) */
                if (tsr_submit(nb.dev, p, np) || tsr_wait(nb.dev, -1))
                    fail_msg("layer %s cut [%zu, %zu): the piece does not run: %s", L->name, a, b, tsr_errmsg());
                ran++;
            }
            free(p);
        }
    }
    printf("  pieces: %d cuts built (%d run on fsim), %d refused\n", built, ran, refused);
    assert_true(built > 3 * refused);
    assert_true(ran > 20);
    tsr_netbench_close(&nb);
}

static void test_pieces_mode(void **st)
{
    (void)st;
    if (!have_systemc())
        skip();
    run_ref();
    /* the plain fast model's cycles */
    tsr_device_opts_t d0 = {0};
    tsr_netbench_opts_t o0 = net_opts("systemc", &d0);
    tsr_netbench_t nb0;
    if (tsr_netbench_run(&o0, &nb0))
        fail_msg("systemc run: %s", tsr_errmsg());
    tsr_graph_totals_t t0;
    tsr_graph_totals(nb0.g, &t0);
    tsr_netbench_close(&nb0);

    tsr_sampled_est_t e;
    run_sampled("pieces:1:4", 5, &e, 1);
    assert_true(e.pieces && e.piece_k == 4);
    assert_true(e.windows >= 2 && e.half95 > 0);
    assert_true((double)e.fast_cycles == t0.cycles); /* the pieces' buffer does not move the program's */
    if (fabs(e.estimate - ref.total) > 0.02 * ref.total)
        fail_msg("pieces: estimate %.0f, the rtl run's %.0f", e.estimate, ref.total);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_onchip_state),
        cmocka_unit_test(test_stale_handoff_caught),
        cmocka_unit_test(test_all_equals_rtl),
        cmocka_unit_test(test_cycles_only),
        cmocka_unit_test(test_interval_contains_rtl),
        cmocka_unit_test(test_piece_cuts),
        cmocka_unit_test(test_pieces_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
