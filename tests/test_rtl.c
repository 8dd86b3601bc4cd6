/*
 * test_rtl: behaviour specific to the RTL backend. Faults and stuck runs
 * must end with a clear error naming what went wrong (never a hang), the
 * hardware counters must agree with the stream, and the DRAM model's
 * latency and bandwidth must show up in the cycle count, and the
 * waveform and multithreading options must work without changing results.
 */
#define _DEFAULT_SOURCE /* mkstemps */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_regs.h"
#include "tsr_testenv.h"

static tsr_device_t *open_rtl_opts(const char *preset, tsr_device_opts_t *o)
{
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    assert_int_equal(tsr_config_load(preset, &cfg), TSR_OK);
    if (!o->rtl.watchdog_cycles)
        o->rtl.watchdog_cycles = 50000;
    if (tsr_device_open("rtl", &cfg, o, &dev))
        fail_msg("open rtl/%s: %s", preset, tsr_errmsg());
    return dev;
}

static tsr_device_t *open_rtl(const char *preset, int skip_verify, uint32_t latency)
{
    tsr_device_opts_t o = {.skip_verify = skip_verify};
    o.rtl.dram_latency = latency;
    return open_rtl_opts(preset, &o);
}

static void test_store_roundtrip_and_counters(void **state)
{
    (void)state;
    tsr_device_t *dev = open_rtl("tiny", 0, 0);
    const tsr_config_t *c = tsr_device_config(dev);
    uint64_t a;
    assert_int_equal(tsr_mem_alloc(dev, 64, &a), TSR_OK);
    uint8_t fill[64];
    memset(fill, 0x5a, sizeof fill);
    assert_int_equal(tsr_mem_write(dev, a, fill, sizeof fill), TSR_OK);
    tsr_insn_t s[4];
    tsr_test_mov_store(dev, s, a + c->out_bytes, -3); /* the second element of the buffer */
    assert_int_equal(tsr_submit(dev, s, 4), TSR_OK);
    if (tsr_wait(dev, -1))
        fail_msg("%s", tsr_errmsg());
    uint8_t back[64];
    assert_int_equal(tsr_mem_read(dev, a, back, sizeof back), TSR_OK);
    for (uint32_t i = 0; i < sizeof back; i++) {
        int in_elem = i >= c->out_bytes && i < 2 * c->out_bytes;
        if (back[i] != (in_elem ? 0xfd : 0x5a))
            fail_msg("byte %u = 0x%02x, want 0x%02x (strobes must spare neighbours)", i, back[i],
                     in_elem ? 0xfd : 0x5a);
    }
    tsr_counters_t ctr;
    assert_int_equal(tsr_read_counters(dev, &ctr), TSR_OK);
    assert_true(ctr.has_hw);
    assert_true(ctr.cycles > 0);
    assert_int_equal(ctr.hw[TSR_CNT_ALU_OPS], 1);
    assert_int_equal(ctr.hw[TSR_CNT_GEMM_OPS], 0);
    assert_true(ctr.hw[TSR_CNT_DRAM_WR_BYTES] >= c->out_bytes);
    assert_true(ctr.hw[TSR_CNT_DRAM_RD_BYTES] >= 3 * 16); /* the instructions */
    tsr_device_close(dev);
}

static void test_dram_latency_shows_in_cycles(void **state)
{
    (void)state;
    uint64_t cycles[2];
    uint32_t lat[2] = {4, 200};
    for (int k = 0; k < 2; k++) {
        tsr_device_t *dev = open_rtl("tiny", 0, lat[k]);
        uint64_t a;
        assert_int_equal(tsr_mem_alloc(dev, 64, &a), TSR_OK);
        tsr_insn_t s[4];
        tsr_test_mov_store(dev, s, a, 1);
        assert_int_equal(tsr_submit(dev, s, 4), TSR_OK);
        assert_int_equal(tsr_wait(dev, -1), TSR_OK);
        tsr_counters_t ctr;
        tsr_read_counters(dev, &ctr);
        cycles[k] = ctr.cycles;
        tsr_device_close(dev);
    }
    /* At least the instruction fetch and the store response pay the latency. */
    if (cycles[1] < cycles[0] + 2 * (lat[1] - lat[0]))
        fail_msg("latency 4: %llu cycles, latency 200: %llu cycles", (unsigned long long)cycles[0],
                 (unsigned long long)cycles[1]);
}

static void test_store_outside_buffers_reports_error(void **state)
{
    (void)state;
    tsr_device_t *dev = open_rtl("tiny", 1, 0); /* verifier off: the hardware path must cope */
    uint64_t a;
    assert_int_equal(tsr_mem_alloc(dev, 64, &a), TSR_OK);
    tsr_insn_t s[4];
    tsr_test_mov_store(dev, s, a + (1ull << 24), 1); /* 16 MiB past the buffer: unmapped */
    assert_int_equal(tsr_submit(dev, s, 4), TSR_OK);
    int rc = tsr_wait(dev, 60000);
    if (rc != TSR_EBACKEND || !strstr(tsr_errmsg(), "error"))
        fail_msg("got %s: %s", tsr_errname(rc), tsr_errmsg());
    tsr_device_close(dev);
}

static void test_deadlock_hits_watchdog(void **state)
{
    (void)state;
    tsr_device_t *dev = open_rtl("tiny", 1, 0);
    tsr_insn_t s[2];
    memset(s, 0, sizeof s);
    s[0].opcode = TSR_OP_GEMM; /* waits for a load token that never comes */
    s[0].reset = 1;
    s[0].uop_end = 1;
    s[0].iter_out = s[0].iter_in = 1;
    s[0].pop_prev = 1;
    s[1].opcode = TSR_OP_FINISH;
    assert_int_equal(tsr_submit(dev, s, 2), TSR_OK);
    int rc = tsr_wait(dev, 60000);
    if (rc != TSR_EBACKEND || !strstr(tsr_errmsg(), "watchdog") || !strstr(tsr_errmsg(), "compute stage at #0"))
        fail_msg("got %s: %s", tsr_errname(rc), tsr_errmsg());
    tsr_device_close(dev);
}

/* A stream whose instruction fields are fine but whose micro-op sends the
 * accumulator index past the buffer: the compute stage must flag it. */
static void test_index_out_of_range_reports_error(void **state)
{
    (void)state;
    tsr_device_t *dev = open_rtl("tiny", 1, 0);
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_uop_t uo = {c->acc_depth - 1, 0, 0};
    uint64_t u = tsr_test_uops(dev, &uo, 1);
    tsr_insn_t s[3];
    memset(s, 0, sizeof s);
    s[0].opcode = TSR_OP_LOAD;
    s[0].mem_type = TSR_MEM_UOP;
    s[0].dram_base = (uint32_t)(u / c->uop_bytes);
    s[0].y_size = s[0].x_size = s[0].x_stride = 1;
    s[1].opcode = TSR_OP_ALU; /* dst = acc_depth-1 + 1 on the second iteration */
    s[1].alu_opcode = TSR_ALU_ADD;
    s[1].use_imm = 1;
    s[1].uop_end = 1;
    s[1].iter_out = 2;
    s[1].iter_in = 1;
    s[1].dst_factor_out = 1;
    s[2].opcode = TSR_OP_FINISH;
    assert_int_equal(tsr_submit(dev, s, 3), TSR_OK);
    int rc = tsr_wait(dev, 60000);
    if (rc != TSR_EBACKEND || !strstr(tsr_errmsg(), "error") || !strstr(tsr_errmsg(), "compute stage at #1"))
        fail_msg("got %s: %s", tsr_errname(rc), tsr_errmsg());
    tsr_device_close(dev);
}

/* Halving the DRAM bandwidth must slow a load-bound stream down. */
static void test_dram_bandwidth_shows_in_cycles(void **state)
{
    (void)state;
    uint64_t cycles[2];
    double bw[2] = {8, 2};
    for (int k = 0; k < 2; k++) {
        tsr_device_opts_t o = {0};
        o.rtl.dram_bytes_per_cycle = bw[k];
        tsr_device_t *dev = open_rtl_opts("tiny", &o);
        const tsr_config_t *c = tsr_device_config(dev);
        uint32_t rows = c->wgt_depth;
        uint64_t n = (uint64_t)rows * c->wgt_bytes, a;
        assert_int_equal(tsr_mem_alloc(dev, n, &a), TSR_OK);
        tsr_insn_t s[3];
        memset(s, 0, sizeof s);
        s[0].opcode = TSR_OP_LOAD;
        s[0].mem_type = TSR_MEM_WGT;
        s[0].dram_base = (uint32_t)(a / c->wgt_bytes);
        s[0].y_size = 1;
        s[0].x_size = s[0].x_stride = rows;
        s[0].push_next = 1;
        s[1].opcode = TSR_OP_GEMM; /* empty loop taking the token */
        s[1].pop_prev = 1;
        s[2].opcode = TSR_OP_FINISH;
        assert_int_equal(tsr_submit(dev, s, 3), TSR_OK);
        assert_int_equal(tsr_wait(dev, -1), TSR_OK);
        tsr_counters_t ctr;
        tsr_read_counters(dev, &ctr);
        cycles[k] = ctr.cycles;
        if (ctr.hw[TSR_CNT_DRAM_RD_BYTES] < n)
            fail_msg("read %llu bytes, the load alone is %llu", (unsigned long long)ctr.hw[TSR_CNT_DRAM_RD_BYTES],
                     (unsigned long long)n);
        /* The bandwidth bound: no run beats bytes / bytes-per-cycle. */
        if (ctr.cycles < (uint64_t)(n / bw[k]))
            fail_msg("%llu bytes at %.0f B/cycle in %llu cycles", (unsigned long long)n, bw[k],
                     (unsigned long long)ctr.cycles);
        tsr_device_close(dev);
    }
    if (cycles[1] < cycles[0] + cycles[0] / 2)
        fail_msg("8 B/cycle: %llu cycles, 2 B/cycle: %llu cycles", (unsigned long long)cycles[0],
                 (unsigned long long)cycles[1]);
}

/* The FST option writes a waveform; a threaded model gives the same bytes
 * and the same cycle count as the single-threaded one. */
static void run_mov_store(tsr_device_opts_t *o, int8_t *out, uint64_t *cycles)
{
    tsr_device_t *dev = open_rtl_opts("tiny", o);
    uint64_t a;
    assert_int_equal(tsr_mem_alloc(dev, 64, &a), TSR_OK);
    tsr_insn_t s[4];
    tsr_test_mov_store(dev, s, a, -77);
    assert_int_equal(tsr_submit(dev, s, 4), TSR_OK);
    if (tsr_wait(dev, -1))
        fail_msg("%s", tsr_errmsg());
    assert_int_equal(tsr_mem_read(dev, a, out, 1), TSR_OK);
    tsr_counters_t ctr;
    tsr_read_counters(dev, &ctr);
    *cycles = ctr.cycles;
    tsr_device_close(dev);
}

static void test_trace_and_threads(void **state)
{
    (void)state;
    char path[] = "/tmp/tsr_test_rtl_XXXXXX.fst";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    close(fd);
    int8_t v[3];
    uint64_t cyc[3];
    tsr_device_opts_t plain = {0}, traced = {0}, threaded = {0};
    traced.rtl.trace_path = path;
    threaded.rtl.threads = 2;
    run_mov_store(&plain, &v[0], &cyc[0]);
    run_mov_store(&traced, &v[1], &cyc[1]);
    run_mov_store(&threaded, &v[2], &cyc[2]);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    unlink(path);
    if (size < 100)
        fail_msg("waveform %s has %ld bytes", path, size);
    for (int k = 0; k < 3; k++)
        if (v[k] != -77 || cyc[k] != cyc[0])
            fail_msg("run %d (plain, traced, 2 threads): value %d after %llu cycles; plain: %d after %llu", k,
                     v[k], (unsigned long long)cyc[k], v[0], (unsigned long long)cyc[0]);
}

/* The profile: one CSV line per window of every run; its deltas add up to
 * the hardware counters, its cycles increase, profiling changes no cycle
 * count, and a file that cannot be written is an error at open. */
static void test_profile(void **state)
{
    (void)state;
    char path[] = "/tmp/tsr_test_rtl_XXXXXX.csv";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    close(fd);
    uint64_t cyc[2];
    uint64_t hw_alu = 0, hw_wr = 0;
    for (int k = 0; k < 2; k++) {
        tsr_device_opts_t o = {0};
        if (k) {
            o.rtl.profile_path = path;
            o.rtl.profile_window = 16;
        }
        tsr_device_t *dev = open_rtl_opts("tiny", &o);
        const tsr_config_t *c = tsr_device_config(dev);
        uint64_t a;
        assert_int_equal(tsr_mem_alloc(dev, 4096, &a), TSR_OK);
        tsr_insn_t s[4];
        tsr_test_mov_store(dev, s, a, 5);
        s[1].iter_out = 32; /* 32 x 8 ALU ops over rows 0..255 (dst +8, +1) */
        s[1].iter_in = 8;
        s[1].dst_factor_out = 8;
        s[1].dst_factor_in = 1;
        s[2].y_size = 1;
        s[2].x_size = s[2].x_stride = 256 < c->acc_depth ? 256 : c->acc_depth;
        if (c->acc_depth < 256) {
            s[1].iter_out = c->acc_depth / 8;
        }
        for (int run = 0; run < 2; run++) { /* two runs: two groups of lines */
            assert_int_equal(tsr_submit(dev, s, 4), TSR_OK);
            if (tsr_wait(dev, -1))
                fail_msg("%s", tsr_errmsg());
        }
        tsr_counters_t ctr;
        assert_int_equal(tsr_read_counters(dev, &ctr), TSR_OK);
        cyc[k] = ctr.cycles;
        hw_alu = ctr.hw[TSR_CNT_ALU_OPS];
        hw_wr = ctr.hw[TSR_CNT_DRAM_WR_BYTES];
        tsr_device_close(dev);
    }
    assert_true(cyc[0] == cyc[1]);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "run,cycle,gemm_ops,alu_ops,dual_ops,dram_rd_bytes,dram_wr_bytes,load_insns,"
                              "compute_insns,store_insns\n");
    unsigned long long sum_alu = 0, sum_wr = 0, sum_c = 0, sum_s = 0, sum_l = 0, last_cyc = 0;
    unsigned run, g, al, du, rd, wr, li, ci, si, runs_seen = 0, lines = 0;
    unsigned long long cy;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%u,%llu,%u,%u,%u,%u,%u,%u,%u,%u", &run, &cy, &g, &al, &du, &rd, &wr, &li, &ci, &si) != 10)
            fail_msg("bad profile line: %s", line);
        if (cy <= last_cyc)
            fail_msg("profile cycles do not increase: %llu after %llu", cy, last_cyc);
        last_cyc = cy;
        runs_seen = run > runs_seen ? run : runs_seen;
        sum_alu += al;
        sum_wr += wr;
        sum_c += ci;
        sum_s += si;
        sum_l += li;
        lines++;
    }
    fclose(f);
    unlink(path);
    assert_int_equal(runs_seen, 2);
    assert_true(lines > 4);
    if (sum_alu != hw_alu || sum_wr != hw_wr)
        fail_msg("profile sums: %llu ALU ops, %llu bytes written; counters %llu, %llu", sum_alu, sum_wr,
                 (unsigned long long)hw_alu, (unsigned long long)hw_wr);
    /* per run the compute stage completes the uop LOAD, the ALU op and
     * FINISH, the store stage the STORE */
    if (sum_c != 6 || sum_s != 2 || sum_l != 0)
        fail_msg("profile: %llu compute, %llu store, %llu load instructions; want 6, 2, 0", sum_c, sum_s, sum_l);
    tsr_device_opts_t bad = {0};
    bad.rtl.profile_path = "/nonexistent-dir/p.csv";
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    assert_int_equal(tsr_config_load("tiny", &cfg), TSR_OK);
    assert_int_equal(tsr_device_open("rtl", &cfg, &bad, &dev), TSR_EIO);
    assert_non_null(strstr(tsr_errmsg(), "/nonexistent-dir/p.csv"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_roundtrip_and_counters),
        cmocka_unit_test(test_dram_latency_shows_in_cycles),
        cmocka_unit_test(test_store_outside_buffers_reports_error),
        cmocka_unit_test(test_deadlock_hits_watchdog),
        cmocka_unit_test(test_index_out_of_range_reports_error),
        cmocka_unit_test(test_dram_bandwidth_shows_in_cycles),
        cmocka_unit_test(test_trace_and_threads),
        cmocka_unit_test(test_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
