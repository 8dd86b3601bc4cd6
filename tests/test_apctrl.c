/*
 * test_apctrl: the ap_ctrl_hs block of the RTL control slave, register by
 * register, on the Verilated model (tiny preset) with raw AXI4-Lite
 * accesses: what the driver's register sequence does not look at (XRT and
 * Vivado-built designs do). Expected values are the Vitis RTL-kernel
 * convention as written in isa/tsr_regs.h: ap_idle after reset; ap_start
 * starts; ap_done and ap_ready set at the end and clear on read; ISR set
 * only for enabled events and toggled by a write of 1; auto_restart runs
 * the stream again until it is cleared; SOFT_RESET reads RESETTING and
 * leaves AP_CTRL idle with ISR clear. The stream is a single FINISH.
 * test_run_stats: the harness's speed counters (tsr_rtl_stats).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tsr_error.h"
#include "tsr_rtl.h"
#include "tsr_testenv.h"

#define BASE 0x1000ull

static uint32_t rd(tsr_rtl_t *r, uint32_t off)
{
    uint32_t v = 0xdeadbeef;
    if (tsr_rtl_reg_read(r, off, &v))
        fail_msg("read 0x%x: %s", off, tsr_errmsg());
    return v;
}

static void wr(tsr_rtl_t *r, uint32_t off, uint32_t v)
{
    if (tsr_rtl_reg_write(r, off, v))
        fail_msg("write 0x%x: %s", off, tsr_errmsg());
}

static void test_ap_ctrl_hs(void **st)
{
    (void)st;
    tsr_config_t cfg;
    tsr_dram_t *d;
    tsr_rtl_t *r;
    assert_int_equal(tsr_test_config("tiny", &cfg), 0);
    assert_int_equal(tsr_dram_create(BASE, 1 << 20, &d), 0);
    assert_int_equal(tsr_dram_alloc_at(d, BASE, 4096), 0);
    tsr_insn_t fin;
    memset(&fin, 0, sizeof fin);
    fin.opcode = TSR_OP_FINISH;
    tsr_insn_bits_t b;
    uint8_t bytes[TSR_INSN_BYTES];
    assert_int_equal(tsr_insn_encode(&cfg, &fin, &b), 0);
    tsr_insn_bits_store(&b, bytes);
    assert_int_equal(tsr_dram_write(d, BASE, bytes, sizeof bytes), 0);
    tsr_rtl_opts_t o;
    memset(&o, 0, sizeof o);
    if (tsr_rtl_create(&cfg, d, &o, &r))
        fail_msg("model: %s", tsr_errmsg());

    assert_int_equal(rd(r, TSR_REG_AP_CTRL), TSR_AP_IDLE);
    wr(r, TSR_REG_GIE, 1);
    wr(r, TSR_REG_IER, TSR_IRQ_DONE); /* ap_ready not enabled: its ISR bit must stay 0 */
    wr(r, TSR_REG_INSN_ADDR, (uint32_t)BASE);
    wr(r, TSR_REG_INSN_ADDR_HI, 0);
    wr(r, TSR_REG_INSN_COUNT, 1);
    assert_int_equal(rd(r, TSR_REG_INSN_ADDR), (uint32_t)BASE);
    assert_int_equal(rd(r, TSR_REG_INSN_COUNT), 1);
    assert_int_equal(rd(r, TSR_REG_ISR), 0);
    wr(r, TSR_REG_AP_CTRL, TSR_AP_START);
    int done = 0;
    assert_int_equal(tsr_rtl_run(r, 10000, &done), 0);
    assert_int_equal(done, 1);
    assert_int_equal(rd(r, TSR_REG_ISR), TSR_IRQ_DONE);
    assert_int_equal(rd(r, TSR_REG_AP_CTRL), TSR_AP_DONE | TSR_AP_READY | TSR_AP_IDLE);
    assert_int_equal(rd(r, TSR_REG_AP_CTRL), TSR_AP_IDLE); /* clear on read */
    assert_true(rd(r, TSR_REG_STATUS) & TSR_STATUS_DONE);  /* the level stays */
    wr(r, TSR_REG_ISR, TSR_IRQ_DONE);                      /* toggle on write */
    assert_int_equal(rd(r, TSR_REG_ISR), 0);

    /* auto_restart: the stream runs again and again; ap_start reads 1 and
     * ap_done records the completions; clearing the bit lets the current
     * run be the last. */
    wr(r, TSR_REG_AP_CTRL, TSR_AP_START | TSR_AP_AUTO_RESTART);
    assert_int_equal(tsr_rtl_run(r, 2000, &done), 0);
    assert_int_equal(done, 0);
    uint32_t ap = rd(r, TSR_REG_AP_CTRL);
    printf("auto_restart: AP_CTRL 0x%x after 2000 cycles, ISR 0x%x\n", ap, rd(r, TSR_REG_ISR));
    assert_int_equal(ap & (TSR_AP_START | TSR_AP_AUTO_RESTART | TSR_AP_IDLE), TSR_AP_START | TSR_AP_AUTO_RESTART);
    assert_true(ap & TSR_AP_DONE);
    assert_int_equal(rd(r, TSR_REG_ISR), TSR_IRQ_DONE);
    wr(r, TSR_REG_AP_CTRL, 0);
    assert_int_equal(tsr_rtl_run(r, 10000, &done), 0);
    assert_int_equal(done, 1);
    assert_int_equal(rd(r, TSR_REG_AP_CTRL) & (TSR_AP_START | TSR_AP_AUTO_RESTART | TSR_AP_IDLE), TSR_AP_IDLE);

    /* Soft reset: SOFT_RESET reads RESETTING until the master is idle. */
    wr(r, TSR_REG_SOFT_RESET, TSR_SOFT_RESET);
    int polls = 0;
    while ((rd(r, TSR_REG_SOFT_RESET) & 1) && polls < 1000)
        polls++;
    assert_true(polls < 1000);
    assert_int_equal(rd(r, TSR_REG_AP_CTRL), TSR_AP_IDLE);
    assert_int_equal(rd(r, TSR_REG_ISR), 0);
    assert_int_equal(rd(r, TSR_REG_STATUS), 0);
    assert_int_equal(tsr_rtl_bus_check(r), 0);
    tsr_rtl_destroy(r);
    tsr_dram_destroy(d);
}

/* tsr_rtl_stats counts exactly the cycles tsr_rtl_run simulated (not the
 * register accesses between runs) and the CPU time they took. */
static void test_run_stats(void **st)
{
    (void)st;
    tsr_config_t cfg;
    tsr_dram_t *d;
    tsr_rtl_t *r;
    assert_int_equal(tsr_test_config("tiny", &cfg), 0);
    assert_int_equal(tsr_dram_create(BASE, 1 << 20, &d), 0);
    assert_int_equal(tsr_dram_alloc_at(d, BASE, 4096), 0);
    tsr_rtl_opts_t o;
    memset(&o, 0, sizeof o);
    if (tsr_rtl_create(&cfg, d, &o, &r))
        fail_msg("model: %s", tsr_errmsg());
    uint64_t c = 1;
    double cpu = 1;
    tsr_rtl_stats(r, &c, &cpu);
    assert_int_equal(c, 0); /* the reset cycles of create are not a run */
    assert_true(cpu == 0);
    uint64_t ran = 0;
    for (int k = 0; k < 3; k++) {
        wr(r, TSR_REG_GIE, (uint32_t)k & 1); /* register accesses between the runs */
        uint64_t t0 = tsr_rtl_cycles(r);
        int done = 1;
        assert_int_equal(tsr_rtl_run(r, 1000 + 500 * (uint64_t)k, &done), 0);
        assert_int_equal(done, 0); /* never started: every cycle asked for runs */
        ran += tsr_rtl_cycles(r) - t0;
    }
    assert_int_equal(ran, 1000 + 1500 + 2000);
    tsr_rtl_stats(r, &c, &cpu);
    assert_int_equal(c, ran);
    assert_true(cpu > 0 && cpu < 60);
    tsr_rtl_destroy(r);
    tsr_dram_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ap_ctrl_hs), cmocka_unit_test(test_run_stats)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
