/*
 * test_driver: the host driver API on the fsim backend. Bad inputs are
 * refused with a clear error and no side effects; a run can be waited for
 * in slices; and a full JIT-lowered matmul matches a naive host reference
 * on every preset and under random stage interleavings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_matmul.h"
#include "tsr_regs.h"
#include "tsr_testenv.h"

/* The backend under test: TSR_TEST_BACKEND (default fsim), so the same
 * tests run on the RTL (CTest registers both). */
static const char *backend(void)
{
    const char *b = getenv("TSR_TEST_BACKEND");
    return b && *b ? b : "fsim";
}

static tsr_device_t *open_dev(const char *preset, uint64_t seed)
{
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    assert_int_equal(tsr_config_load(preset, &cfg), TSR_OK);
    tsr_device_opts_t o = {.seed = seed};
    int rc = tsr_device_open(backend(), &cfg, &o, &dev);
    if (rc)
        fail_msg("open %s/%s: %s", backend(), preset, tsr_errmsg());
    return dev;
}

static void expect_msg(int rc, int want, const char *word)
{
    if (rc != want)
        fail_msg("got %s, want %s (message: %s)", tsr_errname(rc), tsr_errname(want), tsr_errmsg());
    if (word && !strstr(tsr_errmsg(), word))
        fail_msg("message \"%s\" lacks \"%s\"", tsr_errmsg(), word);
}

static void test_unknown_backend(void **state)
{
    (void)state;
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    assert_int_equal(tsr_config_load("tiny", &cfg), TSR_OK);
    expect_msg(tsr_device_open("nosuch", &cfg, NULL, &dev), TSR_EBACKEND, "nosuch");
    assert_null(dev);
}

static void test_copies_outside_buffers(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny", 0);
    uint64_t a;
    uint8_t buf[64] = {1, 2, 3};
    assert_int_equal(tsr_mem_alloc(dev, 32, &a), TSR_OK);
    expect_msg(tsr_mem_write(dev, a + 16, buf, 17), TSR_EFAULT, "outside");
    expect_msg(tsr_mem_read(dev, a - 1, buf, 2), TSR_EFAULT, "outside");
    expect_msg(tsr_mem_write(dev, a + 33, buf, 0), TSR_EFAULT, "outside");
    assert_int_equal(tsr_mem_write(dev, a, buf, 32), TSR_OK);
    uint8_t back[32];
    assert_int_equal(tsr_mem_read(dev, a, back, 32), TSR_OK);
    assert_memory_equal(back, buf, 32);
    expect_msg(tsr_mem_free(dev, a + 4), TSR_EINVAL, "not the start");
    assert_int_equal(tsr_mem_free(dev, a), TSR_OK);
    expect_msg(tsr_mem_read(dev, a, back, 1), TSR_EFAULT, "outside");
    tsr_device_close(dev);
}

static void test_alloc_at_overlap(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny", 0);
    assert_int_equal(tsr_mem_alloc_at(dev, 0x100000, 8192), TSR_OK);
    expect_msg(tsr_mem_alloc_at(dev, 0x101000, 16), TSR_EINVAL, "overlaps");
    expect_msg(tsr_mem_alloc_at(dev, 1ull << 40, 16), TSR_ENOMEM, "outside device memory");
    tsr_device_close(dev);
}

static void test_submit_checks_dram(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny", 0);
    const tsr_config_t *c = tsr_device_config(dev);
    uint64_t a;
    assert_int_equal(tsr_mem_alloc(dev, c->out_bytes, &a), TSR_OK);
    tsr_insn_t s[4];
    tsr_test_mov_store(dev, s, a + c->out_bytes, 7); /* one element past the buffer */
    expect_msg(tsr_submit(dev, s, 4), TSR_EVERIFY, "#2");
    expect_msg(tsr_wait(dev, 0), TSR_EINVAL, "nothing submitted");
    tsr_test_mov_store(dev, s, a, 7);
    assert_int_equal(tsr_submit(dev, s, 4), TSR_OK);
    expect_msg(tsr_submit(dev, s, 4), TSR_EINVAL, "already running");
    assert_int_equal(tsr_wait(dev, -1), TSR_OK);
    int8_t v[4];
    assert_int_equal(tsr_mem_read(dev, a, v, sizeof v), TSR_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(v[i], 7);
    tsr_device_close(dev);
}

static void test_submit_rejects_unencodable(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny", 0);
    const tsr_config_t *c = tsr_device_config(dev);
    uint64_t a;
    assert_int_equal(tsr_mem_alloc(dev, c->out_bytes, &a), TSR_OK);
    tsr_insn_t s[4];
    tsr_test_mov_store(dev, s, a, 7);
    s[1].imm = 40000; /* does not fit 16 signed bits */
    int rc = tsr_submit(dev, s, 4);
    expect_msg(rc, TSR_EBOUNDS, "imm");
    tsr_device_close(dev);
}

/* Naive reference: round half away from zero, saturate to int8. */
static void ref_matmul(const int8_t *a, const int8_t *b, int m, int k, int n, int shift, int8_t *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int64_t acc = 0;
            for (int q = 0; q < k; q++)
                acc += (int64_t)a[i * k + q] * b[q * n + j];
            if (shift) {
                int64_t d = (int64_t)1 << shift;
                acc = acc >= 0 ? (acc + d / 2) / d : -((-acc + d / 2) / d);
            }
            c[i * n + j] = (int8_t)(acc < -128 ? -128 : acc > 127 ? 127 : acc);
        }
}

static int run_matmul(const char *preset, uint64_t seed, int m, int k, int n, int shift,
                      uint64_t data_seed)
{
    tsr_device_t *dev = open_dev(preset, seed);
    const tsr_config_t *c = tsr_device_config(dev);
    int8_t *a = malloc((size_t)m * k), *b = malloc((size_t)k * n);
    int8_t *got = malloc((size_t)m * n), *want = malloc((size_t)m * n);
    uint64_t na = tsr_matmul_a_bytes(c, m, k), nb = tsr_matmul_b_bytes(c, k, n), nc = tsr_matmul_c_bytes(c, m, n);
    uint8_t *pa = malloc(na), *pb = malloc(nb), *pc = malloc(nc);
    uint64_t s = data_seed * 2654435761u + 1;
    for (int i = 0; i < m * k; i++)
        a[i] = (int8_t)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 56);
    for (int i = 0; i < k * n; i++)
        b[i] = (int8_t)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 56);
    tsr_pack_a(c, a, m, k, pa);
    tsr_pack_b(c, b, k, n, pb);
    uint64_t da, db, dc;
    tsr_matmul_prog_t prog;
    assert_int_equal(tsr_mem_alloc(dev, na, &da), TSR_OK);
    assert_int_equal(tsr_mem_alloc(dev, nb, &db), TSR_OK);
    assert_int_equal(tsr_mem_alloc(dev, nc, &dc), TSR_OK);
    assert_int_equal(tsr_mem_write(dev, da, pa, na), TSR_OK);
    assert_int_equal(tsr_mem_write(dev, db, pb, nb), TSR_OK);
    int rc = tsr_matmul_build(dev, da, db, dc, m, k, n, shift, &prog);
    if (rc)
        fail_msg("build: %s", tsr_errmsg());
    rc = tsr_submit(dev, prog.insns, prog.ninsns);
    if (!rc)
        rc = tsr_wait(dev, -1);
    if (rc)
        fail_msg("run: %s", tsr_errmsg());
    assert_int_equal(tsr_mem_read(dev, dc, pc, nc), TSR_OK);
    tsr_unpack_c(c, pc, m, n, got);
    ref_matmul(a, b, m, k, n, shift, want);
    int bad = 0;
    for (int i = 0; i < m * n && !bad; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "%s %dx%dx%d shift %d seed %llu/%llu: first mismatch C[%d][%d] = %d, want %d\n",
                    preset, m, k, n, shift, (unsigned long long)seed, (unsigned long long)data_seed,
                    i / n, i % n, got[i], want[i]);
            bad = 1;
        }
    tsr_counters_t ctr;
    tsr_read_counters(dev, &ctr);
    /* Counters checked against the shape, computed here independently. */
    assert_int_equal(ctr.gemm_ops, (uint64_t)(m / c->batch) * (k / c->block_in) * (n / c->block_out));
    assert_int_equal(ctr.macs, (uint64_t)m * k * n);
    assert_int_equal(ctr.bytes_stored, (uint64_t)m * n);
    /* The backend's counts equal what the stream's fields imply; on a timed
     * backend the hardware's own op counters must agree too. */
    if (ctr.has_hw && (ctr.hw[TSR_CNT_GEMM_OPS] != ctr.gemm_ops || ctr.hw[TSR_CNT_ALU_OPS] != ctr.alu_ops)) {
        fprintf(stderr, "hardware op counters (gemm %llu, alu %llu) differ from the stream's (%llu, %llu)\n",
                (unsigned long long)ctr.hw[TSR_CNT_GEMM_OPS], (unsigned long long)ctr.hw[TSR_CNT_ALU_OPS],
                (unsigned long long)ctr.gemm_ops, (unsigned long long)ctr.alu_ops);
        bad = 1;
    }
    tsr_counters_t st;
    memset(&st, 0, sizeof st);
    tsr_counters_static(c, prog.insns, prog.ninsns, &st);
    st.cycles = ctr.cycles;
    st.has_hw = ctr.has_hw;
    memcpy(st.hw, ctr.hw, sizeof st.hw);
    if (memcmp(&st, &ctr, sizeof st)) {
        fprintf(stderr, "dynamic counters differ from static ones:\n--- static\n");
        tsr_counters_print(&st, stderr);
        fprintf(stderr, "--- dynamic\n");
        tsr_counters_print(&ctr, stderr);
        bad = 1;
    }
    tsr_matmul_free(dev, &prog);
    tsr_device_close(dev);
    free(a); free(b); free(got); free(want); free(pa); free(pb); free(pc);
    return bad;
}

static void test_matmul_presets(void **state)
{
    (void)state;
    assert_int_equal(run_matmul("default", 0, 64, 64, 64, 6, 1), 0);
    assert_int_equal(run_matmul("default", 0, 48, 96, 160, 7, 2), 0);
    assert_int_equal(run_matmul("tiny", 0, 36, 20, 44, 4, 3), 0);
    assert_int_equal(run_matmul("tiny", 0, 64, 128, 64, 9, 4), 0); /* many tiles */
    assert_int_equal(run_matmul("large", 0, 32, 256, 96, 8, 5), 0);
}

static void test_matmul_interleavings(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 8; seed++)
        assert_int_equal(run_matmul("tiny", seed, 32, 32, 48, 5, 10 + seed), 0);
}

static void test_wait_timeout_resumes(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny", 0);
    const tsr_config_t *c = tsr_device_config(dev);
    int m = 256, k = 128, n = 256;
    uint64_t da, db, dc;
    tsr_matmul_prog_t prog;
    assert_int_equal(tsr_mem_alloc(dev, tsr_matmul_a_bytes(c, m, k), &da), TSR_OK);
    assert_int_equal(tsr_mem_alloc(dev, tsr_matmul_b_bytes(c, k, n), &db), TSR_OK);
    assert_int_equal(tsr_mem_alloc(dev, tsr_matmul_c_bytes(c, m, n), &dc), TSR_OK);
    assert_int_equal(tsr_matmul_build(dev, da, db, dc, m, k, n, 0, &prog), TSR_OK);
    assert_true(prog.ninsns > 1000);
    assert_int_equal(tsr_submit(dev, prog.insns, prog.ninsns), TSR_OK);
    expect_msg(tsr_wait(dev, 0), TSR_ETIMEOUT, "in progress");
    expect_msg(tsr_mem_free(dev, da), TSR_EINVAL, "running");
    assert_int_equal(tsr_wait(dev, -1), TSR_OK);
    tsr_counters_t ctr;
    assert_int_equal(tsr_read_counters(dev, &ctr), TSR_OK);
    assert_int_equal(ctr.insns[TSR_OP_FINISH], 1);
    tsr_matmul_free(dev, &prog);
    tsr_device_close(dev);
}

/* One GEMM of 16383 x 16383 tensor ops: a wait with a timeout must return
 * while it is part-way through, and closing the device must not hang. */
static void test_timeout_inside_one_instruction(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny", 0);
    const tsr_config_t *c = tsr_device_config(dev);
    const tsr_uop_t z = {0, 0, 0};
    uint64_t u = tsr_test_uops(dev, &z, 1);
    tsr_insn_t s[3];
    memset(s, 0, sizeof s);
    s[0].opcode = TSR_OP_LOAD;
    s[0].mem_type = TSR_MEM_UOP;
    s[0].dram_base = (uint32_t)(u / c->uop_bytes);
    s[0].y_size = s[0].x_size = s[0].x_stride = 1;
    s[1].opcode = TSR_OP_GEMM;
    s[1].uop_end = 1;
    s[1].iter_out = s[1].iter_in = 16383;
    s[2].opcode = TSR_OP_FINISH;
    assert_int_equal(tsr_submit(dev, s, 3), TSR_OK);
    expect_msg(tsr_wait(dev, 20), TSR_ETIMEOUT, "in progress");
    tsr_counters_t ctr;
    assert_int_equal(tsr_read_counters(dev, &ctr), TSR_OK);
    assert_true(ctr.gemm_ops > 0 && ctr.gemm_ops < 16383ull * 16383ull);
    tsr_device_close(dev);
}

static void test_matmul_bad_shapes(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("default", 0);
    tsr_matmul_prog_t prog;
    expect_msg(tsr_matmul_build(dev, 0x1000, 0x2000, 0x3000, 16, 17, 16, 0, &prog), TSR_EINVAL, "multiples");
    expect_msg(tsr_matmul_build(dev, 0x1000, 0x2000, 0x3000, 16, 16, 16, 40, &prog), TSR_EINVAL, "shift");
    expect_msg(tsr_matmul_build(dev, 0x1000, 0x2000, 0x3000, 16, 1 << 16, 16, 0, &prog), TSR_EINVAL, "K");
    tsr_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_backend),
        cmocka_unit_test(test_copies_outside_buffers),
        cmocka_unit_test(test_alloc_at_overlap),
        cmocka_unit_test(test_submit_checks_dram),
        cmocka_unit_test(test_submit_rejects_unencodable),
        cmocka_unit_test(test_matmul_presets),
        cmocka_unit_test(test_matmul_interleavings),
        cmocka_unit_test(test_wait_timeout_resumes),
        cmocka_unit_test(test_timeout_inside_one_instruction),
        cmocka_unit_test(test_matmul_bad_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
