/*
 * test_sc_timing: the cycles of this design do not depend on the data, and
 * the SystemC model's timing-only mode (--timing-only) keeps every cycle
 * (issue 29).
 *
 * - Data independence: random programs of the differential generator on the
 *   config families tiny, default, tiny_lut (ACT_LUT), tiny_exact
 *   (EXACT_REQUANT, the fscale path), default_dw (DEPTHWISE 3) and random
 *   configs, each run twice with different DRAM data (every buffer but the
 *   uops redrawn: inputs, weights, accumulators, the LUT, the outputs'
 *   initial bytes): the same cycles and every hardware counter the same, on
 *   the full SystemC model and, with TSR_SCT_RTL=1 (the long command,
 *   docs/results.md), on the RTL, the design itself (the pipelined core's
 *   RTL has the activation tables: tiny_lut and the default preset, which
 *   has ACT_LUT 2, run there too). What the cycles do depend on is the
 *   program: the instructions and the uops (loop bodies, accumulator banks
 *   of the bank rule, depthwise runs), which the timing-only mode still
 *   loads. The data runs must differ in their outputs on some program (the
 *   redraw reached the data path).
 * - Timing-only: the same programs with the redrawn data give the full
 *   model's cycles and counters; a small ResNet-18 (the graph runtime, every
 *   layer's cycles) too. Checked to fail when the mode drops a cycle source:
 *   with the uop LOAD skipped in timing-only fsim (uops stay zero) the
 *   first program already differs (tiny seed 1: timing-only fewer cycles).
 * - No silent data: after a timing-only run tsr_device_data_valid is 0,
 *   tsr_mem_read returns zeros (not the stale bytes there), and the graph
 *   leaves its caller's output buffer alone; a full device stays valid.
 *
 * - The driver's memo of verified streams is exact (changed uops, a freed
 *   buffer: verified again and refused).
 *
 * TSR_SCT_COUNT programs per family (default 5), seeds from TSR_SCT_SEED
 * (default 1).
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_gen.h"
#include "tsr_graph.h"
#include "tsr_netbench.h"
#include "tsr_testenv.h"

static void family(const char *name, uint64_t seed, tsr_config_t *cfg)
{
    char json[1024];
    if (!strcmp(name, "random")) {
        assert_int_equal(tsr_gen_random_config(seed, json, sizeof json), TSR_OK);
        if (tsr_config_parse(json, "random", cfg))
            fail_msg("random config %" PRIu64 ": %s", seed, tsr_errmsg());
    } else if (!strcmp(name, "tiny_lut")) {
        tsr_test_preset_with("tiny", "ACT_LUT", 4, cfg);
    } else if (!strcmp(name, "tiny_exact")) {
        tsr_test_preset_with("tiny", "EXACT_REQUANT", 1, cfg);
    } else if (!strcmp(name, "default_dw")) {
        tsr_test_preset_with("default", "DEPTHWISE", 3, cfg);
    } else {
        assert_int_equal(tsr_config_load(name, cfg), TSR_OK);
    }
}

/* Run p on a fresh device; counters and (data devices) outputs back. */
static int run(const char *backend, const tsr_gen_prog_t *p, int timing_only, uint8_t *outs[TSR_GEN_MAX_BUFS],
               tsr_counters_t *ct)
{
    tsr_device_opts_t o = {0};
    o.rtl.timing_only = timing_only;
    tsr_device_t *dev = NULL;
    for (size_t i = 0; i < TSR_GEN_MAX_BUFS; i++)
        outs[i] = NULL;
    int rc = tsr_device_open(backend, &p->cfg, &o, &dev);
    if (rc)
        return rc;
    if (!(rc = tsr_gen_load(dev, p)) && !(rc = tsr_submit(dev, p->insns, p->ninsns)) && !(rc = tsr_wait(dev, -1)) &&
        !(rc = tsr_read_counters(dev, ct)) && !timing_only)
        rc = tsr_gen_read_outputs(dev, p, outs);
    tsr_device_close(dev);
    return rc;
}

static int same_timing(const tsr_counters_t *a, const tsr_counters_t *b)
{
    return a->cycles == b->cycles && a->gemm_ops == b->gemm_ops && a->alu_ops == b->alu_ops &&
           a->bytes_stored == b->bytes_stored && !memcmp(a->bytes_loaded, b->bytes_loaded, sizeof a->bytes_loaded) &&
           !memcmp(a->hw, b->hw, sizeof a->hw);
}

/* Every buffer but the uops (the program) gets new random bytes. */
static void redraw_data(tsr_gen_prog_t *p, uint64_t seed)
{
    uint64_t s = tsr_gen_mix(seed ^ 0x5eedda7aull);
    for (size_t b = 0; b < p->nbufs; b++)
        if (p->bufs[b].mem_type != TSR_MEM_UOP)
            for (uint64_t i = 0; i < p->bufs[b].size; i++)
                p->bufs[b].bytes[i] = (uint8_t)(tsr_test_next(&s) >> 24);
}

static void test_data_independence(void **state)
{
    (void)state;
    static const char *const fams[] = {"tiny", "default", "tiny_lut", "tiny_exact", "default_dw", "random"};
    const uint64_t count = tsr_test_seed("TSR_SCT_COUNT", 5), seed = tsr_test_seed("TSR_SCT_SEED", 1);
    const char *e = getenv("TSR_SCT_RTL");
    const int with_rtl = e && !strcmp(e, "1");
    int programs = 0, rtl_programs = 0, data_moved = 0;
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++)
        for (uint64_t ps = seed; ps < seed + count; ps++) {
            tsr_config_t cfg;
            family(fams[f], ps, &cfg);
            tsr_gen_prog_t p;
            if (tsr_gen_program(ps, &cfg, NULL, &p))
                fail_msg("%s seed %" PRIu64 ": generator: %s", fams[f], ps, tsr_errmsg());
            const char *bes[2] = {"systemc", "rtl"};
            for (int b = 0; b < (with_rtl ? 2 : 1); b++) {
                uint8_t *oa[TSR_GEN_MAX_BUFS], *ob[TSR_GEN_MAX_BUFS], *ot[TSR_GEN_MAX_BUFS];
                tsr_counters_t ca, cb, ctm;
                tsr_gen_prog_t q;
                /* (a fresh program from the same seed, then its data redrawn) */
                if (tsr_gen_program(ps, &cfg, NULL, &q))
                    fail_msg("generator: %s", tsr_errmsg());
                redraw_data(&q, ps);
                if (run(bes[b], &p, 0, oa, &ca) || run(bes[b], &q, 0, ob, &cb))
                    fail_msg("%s %s seed %" PRIu64 ": %s", bes[b], fams[f], ps, tsr_errmsg());
                if (!same_timing(&ca, &cb))
                    fail_msg("%s %s seed %" PRIu64 ": the cycles depend on the data: %" PRIu64 " cycles with the "
                             "generator's data, %" PRIu64 " with other data (or another counter differs)",
                             bes[b], fams[f], ps, ca.cycles, cb.cycles);
                tsr_gen_diff_t d;
                data_moved += tsr_gen_compare(&p, oa, ob, &d) != 0;
                if (b == 0) { /* timing-only on the other data: the full model's figures */
                    if (run("systemc", &q, 1, ot, &ctm))
                        fail_msg("timing-only %s seed %" PRIu64 ": %s", fams[f], ps, tsr_errmsg());
                    if (!same_timing(&ca, &ctm))
                        fail_msg("timing-only %s seed %" PRIu64 ": %" PRIu64 " cycles, the full model %" PRIu64
                                 " (or another counter differs)", fams[f], ps, ctm.cycles, ca.cycles);
                    programs++;
                } else {
                    rtl_programs++;
                }
                tsr_gen_outputs_free(oa);
                tsr_gen_outputs_free(ob);
                tsr_gen_free(&q);
            }
            tsr_gen_free(&p);
        }
    print_message("%d programs (6 families) on systemc, %d on the rtl: the same cycles and counters with other "
                  "data, timing-only the same; outputs differed on %d runs\n", programs, rtl_programs, data_moved);
    assert_true(data_moved > 0);
}

/* A small ResNet-18 through the graph runtime: every layer's cycles equal. */
static void test_network(void **state)
{
    (void)state;
    tsr_netbench_t nb[2];
    for (int k = 0; k < 2; k++) {
        tsr_device_opts_t dev = {0};
        dev.rtl.timing_only = k;
        tsr_netbench_opts_t o = {.cfgname = "tiny", .backend = "systemc", .dev = &dev, .seed = 3, .batch = 1,
                                 .runs = 1, .small = 1, .small_hw = 32, .small_width = 8, .small_classes = 10};
        if (tsr_netbench_run(&o, &nb[k]))
            fail_msg("net (timing-only %d): %s", k, tsr_errmsg());
    }
    tsr_graph_totals_t t[2];
    tsr_graph_totals(nb[0].g, &t[0]);
    tsr_graph_totals(nb[1].g, &t[1]);
    assert_int_equal(t[0].layers, t[1].layers);
    assert_true(t[0].cycles > 0);
    for (int i = 0; i < t[0].layers; i++) {
        const tsr_graph_layer_t *a = tsr_graph_layer(nb[0].g, i), *b = tsr_graph_layer(nb[1].g, i);
        if (a->cycles != b->cycles)
            fail_msg("layer %d (%s): full model %.0f cycles, timing-only %.0f", i, a->name, a->cycles, b->cycles);
    }
    assert_true(t[0].cycles == t[1].cycles);
    assert_int_equal(tsr_device_data_valid(nb[0].dev), 1);
    assert_int_equal(tsr_device_data_valid(nb[1].dev), 0);
    print_message("small ResNet-18 on tiny: %d layers, %.0f cycles on both\n", t[0].layers, t[0].cycles);
    tsr_netbench_close(&nb[0]);
    tsr_netbench_close(&nb[1]);
}

/* After a timing-only run no read returns bytes that could pass for a result. */
static void test_no_silent_data(void **state)
{
    (void)state;
    tsr_config_t cfg;
    family("tiny", 1, &cfg);
    tsr_gen_prog_t p;
    assert_int_equal(tsr_gen_program(1, &cfg, NULL, &p), TSR_OK);
    for (int timing_only = 0; timing_only < 2; timing_only++) {
        tsr_device_opts_t o = {0};
        o.rtl.timing_only = timing_only;
        tsr_device_t *dev = NULL;
        assert_int_equal(tsr_device_open("systemc", &cfg, &o, &dev), TSR_OK);
        assert_int_equal(tsr_device_timing_only(dev), timing_only);
        assert_int_equal(tsr_gen_load(dev, &p), TSR_OK);
        size_t ob = 0;
        while (!p.bufs[ob].is_output)
            ob++;
        const tsr_gen_buf_t *b = &p.bufs[ob];
        uint8_t *buf = malloc(b->size);
        assert_non_null(buf);
        /* before a run DRAM holds what the host wrote, on both */
        assert_int_equal(tsr_device_data_valid(dev), 1);
        assert_int_equal(tsr_mem_read(dev, b->addr, buf, b->size), TSR_OK);
        assert_memory_equal(buf, b->bytes, b->size);
        assert_int_equal(tsr_submit(dev, p.insns, p.ninsns), TSR_OK);
        assert_int_equal(tsr_wait(dev, -1), TSR_OK);
        assert_int_equal(tsr_device_data_valid(dev), !timing_only);
        assert_int_equal(tsr_mem_read(dev, b->addr, buf, b->size), TSR_OK);
        size_t nz = 0;
        for (uint64_t i = 0; i < b->size; i++)
            nz += buf[i] != 0;
        if (timing_only)
            assert_int_equal(nz, 0); /* zeros, not the stale initial bytes */
        else
            assert_true(nz > 0);
        free(buf);
        tsr_device_close(dev);
    }
    tsr_gen_free(&p);
    /* the graph leaves its caller's output alone on a timing-only device */
    tsr_device_opts_t dev = {0};
    dev.rtl.timing_only = 1;
    tsr_netbench_opts_t o = {.cfgname = "tiny", .backend = "systemc", .dev = &dev, .seed = 3, .batch = 1, .runs = 1,
                             .small = 1, .small_hw = 16, .small_width = 4, .small_classes = 10};
    tsr_netbench_t nb;
    if (tsr_netbench_run(&o, &nb))
        fail_msg("net: %s", tsr_errmsg());
    const uint64_t nout = tsr_netdesc_tensor_bytes(&nb.nd, nb.nd.output);
    memset(nb.out, 0xa5, nout);
    const void *ins[1] = {nb.in};
    void *outs[1] = {nb.out};
    assert_int_equal(tsr_graph_exec(nb.g, ins, outs), TSR_OK);
    for (uint64_t i = 0; i < nout; i++)
        assert_int_equal(nb.out[i], 0xa5);
    tsr_netbench_close(&nb);
}

/* The driver's memo of verified streams (the graph's streams are not
 * verified again on every execution) is exact: a stream is submitted
 * unverified only if its instructions, the buffer table and the uop bytes
 * the verifier read are all what they were. Changed uops or a freed buffer
 * are refused as on the first submission (checked to fail with the uop
 * comparison left out of the memo's lookup). */
static void test_verify_memo(void **state)
{
    (void)state;
    static const char *const bes[] = {"fsim", "systemc"};
    for (int b = 0; b < 2; b++) {
        tsr_config_t cfg;
        family("tiny", 1, &cfg);
        tsr_gen_prog_t p;
        assert_int_equal(tsr_gen_program(1, &cfg, NULL, &p), TSR_OK);
        tsr_device_t *dev = NULL;
        assert_int_equal(tsr_device_open(bes[b], &cfg, NULL, &dev), TSR_OK);
        assert_int_equal(tsr_gen_load(dev, &p), TSR_OK);
        for (int k = 0; k < 2; k++) { /* verified, then from the memo */
            assert_int_equal(tsr_submit(dev, p.insns, p.ninsns), TSR_OK);
            assert_int_equal(tsr_wait(dev, -1), TSR_OK);
        }
        size_t ub = 0;
        while (p.bufs[ub].mem_type != TSR_MEM_UOP)
            ub++;
        uint8_t *bad = malloc(p.bufs[ub].size);
        assert_non_null(bad);
        memset(bad, 0xff, p.bufs[ub].size); /* every uop index out of range */
        assert_int_equal(tsr_mem_write(dev, p.bufs[ub].addr, bad, p.bufs[ub].size), TSR_OK);
        if (tsr_submit(dev, p.insns, p.ninsns) != TSR_EVERIFY)
            fail_msg("%s: a stream whose uops changed to out-of-range indices was not verified again (%s)",
                     bes[b], tsr_errmsg());
        free(bad);
        assert_int_equal(tsr_mem_write(dev, p.bufs[ub].addr, p.bufs[ub].bytes, p.bufs[ub].size), TSR_OK);
        assert_int_equal(tsr_submit(dev, p.insns, p.ninsns), TSR_OK);
        assert_int_equal(tsr_wait(dev, -1), TSR_OK);
        size_t ob = 0;
        while (!p.bufs[ob].is_output)
            ob++;
        assert_int_equal(tsr_mem_free(dev, p.bufs[ob].addr), TSR_OK);
        if (tsr_submit(dev, p.insns, p.ninsns) == TSR_OK)
            fail_msg("%s: a stream storing into a freed buffer was accepted", bes[b]);
        tsr_device_close(dev);
        tsr_gen_free(&p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_independence),
        cmocka_unit_test(test_network),
        cmocka_unit_test(test_no_silent_data),
        cmocka_unit_test(test_verify_memo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
