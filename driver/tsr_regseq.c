/*
 * tsr_regseq: the register sequence of the register-driven backends (see
 * tsr_regseq.h). Everything here goes through tsr_regio_t's read32/write32,
 * so the same code runs the Verilated model and a board; what only a
 * simulator can see (the DRAM slave's open bursts) stays in the model.
 */
#define _DEFAULT_SOURCE /* nanosleep */
#include "tsr_regseq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr_error.h"
#include "tsr_pipe.h"

#define POLL_NS 20000       /* board polling interval (no completion signal) */
#define WATCH_EVERY 16384   /* cycles between watchdog samples */
#define RESET_POLLS 200000  /* STATUS reads before a soft reset is declared stuck */
#define RESET_MS 10000      /* wall-clock limit of the same (a board whose bus hangs) */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int rd(tsr_regseq_t *rs, uint32_t off, uint32_t *v) { return rs->io.ops->read32(rs->io.ctx, off, v); }
static int wr(tsr_regseq_t *rs, uint32_t off, uint32_t v) { return rs->io.ops->write32(rs->io.ctx, off, v); }

int tsr_regseq_new(const char *name, const tsr_config_t *cfg, const tsr_device_opts_t *opts, tsr_regseq_t **out)
{
    tsr_regseq_t *rs = calloc(1, sizeof *rs);
    if (!rs)
        return tsr_err(TSR_ENOMEM, "out of memory");
    rs->name = name;
    rs->cfg = *cfg;
    rs->ro = opts->rtl;
    if (!rs->ro.watchdog_cycles)
        rs->ro.watchdog_cycles = 200000;
    *out = rs;
    return TSR_OK;
}

void tsr_regseq_close(void *st)
{
    tsr_regseq_t *rs = st;
    if (!rs)
        return;
    tsr_regio_close(&rs->io);
    free(rs->insns);
    free(rs);
}

int tsr_regseq_read_hw(tsr_regseq_t *rs, uint64_t hw[TSR_CNT_COUNT])
{
    for (int k = 0; k < TSR_CNT_COUNT; k++) {
        uint32_t lo, hi;
        int rc = rd(rs, tsr_cnt_offset(k), &lo); /* LO first: it latches HI */
        if (!rc)
            rc = rd(rs, tsr_cnt_offset(k) + 4, &hi);
        if (rc)
            return rc;
        hw[k] = (uint64_t)hi << 32 | lo;
    }
    return TSR_OK;
}

static int read_cnt(tsr_regseq_t *rs, int k, uint64_t *v)
{
    uint32_t lo, hi;
    int rc = rd(rs, tsr_cnt_offset(k), &lo);
    if (!rc)
        rc = rd(rs, tsr_cnt_offset(k) + 4, &hi);
    *v = rc ? 0 : (uint64_t)hi << 32 | lo;
    return rc;
}

int tsr_regseq_prepare(tsr_regseq_t *rs, uint64_t insn_addr, uint32_t count, uint64_t bound)
{
    int rc = TSR_OK;
    if (insn_addr + (uint64_t)count * TSR_INSN_BYTES > 0xffffffffull)
        return tsr_err(TSR_EINVAL, "%s: instructions at 0x%llx are beyond the 32-bit AXI address space", rs->name,
                       (unsigned long long)insn_addr);
    rs->bound = bound;
    free(rs->insns);
    rs->ninsns = 0;
    rs->insns = calloc(count ? count : 1, sizeof *rs->insns);
    uint8_t *bytes = malloc((size_t)count * TSR_INSN_BYTES + 1);
    if (!rs->insns || !bytes) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    /* The stream as the device will fetch it (after the host's sync). */
    if ((rc = tsr_regio_mem_read(&rs->io, insn_addr, bytes, (uint64_t)count * TSR_INSN_BYTES)))
        goto out;
    for (uint32_t i = 0; i < count; i++) {
        tsr_insn_bits_t b;
        tsr_insn_bits_load(bytes + (size_t)i * TSR_INSN_BYTES, &b);
        if ((rc = tsr_insn_decode(&rs->cfg, &b, &rs->insns[i])))
            goto out;
    }
    rs->ninsns = count;
    memset(&rs->run, 0, sizeof rs->run);
    tsr_counters_static(&rs->cfg, rs->insns, count, &rs->run);
    rc = rd(rs, TSR_REG_STAGE_INSNS, &rs->stage_base);
    rs->last_activity = 0;
    rs->last_change = 0;
    rs->last_sample = 0;
out:
    free(bytes);
    return rc;
}

int tsr_regseq_start(void *st, uint64_t insn_addr, uint32_t count, uint64_t bound)
{
    tsr_regseq_t *rs = st;
    uint32_t ap = 0;
    int rc;
    if ((rc = tsr_regseq_prepare(rs, insn_addr, count, bound)) ||
        (rc = rd(rs, TSR_REG_AP_CTRL, &ap))) /* also clears a stale ap_done */
        return rc;
    if (!(ap & TSR_AP_IDLE))
        return tsr_err(TSR_EBACKEND, "%s: the accelerator is not idle (AP_CTRL 0x%x): reset it first", rs->name, ap);
    /* The arguments in tsr_kernel_args order, then ap_start. */
    if ((rc = wr(rs, TSR_REG_INSN_ADDR, (uint32_t)insn_addr)) ||
        (rc = wr(rs, TSR_REG_INSN_ADDR_HI, (uint32_t)(insn_addr >> 32))) || (rc = wr(rs, TSR_REG_INSN_COUNT, count)) ||
        (rc = wr(rs, TSR_REG_AP_CTRL, TSR_AP_START)))
        return rc;
    rs->started = 1;
    return TSR_OK;
}

/* Index of the n-th (0-based) instruction of a stage, or -1. */
static long nth_of_stage(const tsr_regseq_t *rs, int stage, uint32_t n)
{
    for (uint32_t i = 0; i < rs->ninsns; i++)
        if ((int)tsr_insn_stage(&rs->insns[i]) == stage && n-- == 0)
            return (long)i;
    return -1;
}

/* Where each stage is, from FETCHED and STAGE_INSNS: the error of a stuck
 * or failed run. */
static int stuck_report(tsr_regseq_t *rs, const char *why)
{
    uint32_t st = 0, fetched = 0;
    uint64_t cyc = 0;
    rd(rs, TSR_REG_STAGE_INSNS, &st);
    rd(rs, TSR_REG_FETCHED, &fetched);
    read_cnt(rs, TSR_CNT_CYCLES, &cyc);
    char msg[700];
    int len = snprintf(msg, sizeof msg, "%s: %s at cycle %llu of the run: fetched %u of %u instructions;", rs->name,
                       why, (unsigned long long)cyc, fetched, rs->ninsns);
    for (int s = 0; s < TSR_STAGE_COUNT && len > 0 && len < (int)sizeof msg; s++) {
        uint32_t done = ((st >> (10 * s)) - (rs->stage_base >> (10 * s))) & 0x3ff; /* this run's, modulo 1024 */
        long total = 0;
        for (uint32_t i = 0; i < rs->ninsns; i++)
            total += (int)tsr_insn_stage(&rs->insns[i]) == s;
        /* The completed count is mod 1024: find the candidate consistent with fetch. */
        long next = -1;
        for (uint32_t n = done; n < (uint32_t)total; n += 1024) {
            long idx = nth_of_stage(rs, s, n);
            if (idx >= 0 && (uint32_t)idx < fetched) {
                next = idx;
                break;
            }
        }
        if (next >= 0) {
            const tsr_insn_t *in = &rs->insns[next];
            len += snprintf(msg + len, sizeof msg - (size_t)len, " %s stage at #%ld (%s%s%s)%s%s;", tsr_stage_name(s),
                            next, tsr_opcode_name(in->opcode), in->opcode <= TSR_OP_STORE ? " " : "",
                            in->opcode <= TSR_OP_STORE ? tsr_mem_name(in->mem_type) : "",
                            in->pop_prev || in->pop_next ? " waiting on " : "",
                            in->pop_prev && in->pop_next ? "both token queues"
                            : in->pop_prev               ? "pop_prev"
                            : in->pop_next               ? "pop_next"
                                                         : "");
        } else {
            len += snprintf(msg + len, sizeof msg - (size_t)len, " %s stage idle (%u done);", tsr_stage_name(s), done);
        }
    }
    return tsr_err(TSR_EBACKEND, "%s", msg);
}

/* Names of the units whose bits are set in mask (REG_UNITS layout). */
static void unit_list(uint32_t mask, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < TSR_UNIT_COUNT; k++)
        if ((mask >> k) & 1) {
            int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", tsr_unit_name(k));
            if (w > 0 && (size_t)w < n - len)
                len += (size_t)w;
        }
}

/* Checks at ap_done (FINISH executed or a unit failed): no error bit, every
 * token queue empty, no stage, fetch or DRAM transaction still busy.
 * Anything else is an error naming what is left; the driver resets. */
static int end_checks(tsr_regseq_t *rs)
{
    uint32_t status = 0, tokens = 0, units = 0;
    int rc;
    char names[96];
    if ((rc = rd(rs, TSR_REG_STATUS, &status)) || (rc = rd(rs, TSR_REG_TOKENS, &tokens)) ||
        (rc = rd(rs, TSR_REG_UNITS, &units)))
        return rc;
    if (!(status & TSR_STATUS_DONE))
        return tsr_err(TSR_EBACKEND, "%s: AP_CTRL.ap_done is set but STATUS.DONE is not (STATUS 0x%x)", rs->name,
                       status);
    if (status & TSR_STATUS_ERR) {
        unit_list(units >> 8, names, sizeof names);
        char why[sizeof names + 160];
        snprintf(why, sizeof why,
                 "%s reported an error (DRAM SLVERR, address beyond 32 bits, out-of-range index, reserved "
                 "ALU opcode or malformed instruction)",
                 names[0] ? names : "a unit");
        return stuck_report(rs, why);
    }
    for (int q = 0; q < 4; q++) {
        uint32_t n = (tokens >> (8 * q)) & 0xff;
        if (n)
            return tsr_err(TSR_EVERIFY, "%s: token imbalance: %u token(s) left in queue %s at FINISH", rs->name, n,
                           tsr_queue_name(q));
    }
    if (units & 0x1f) {
        unit_list(units & 0x1f, names, sizeof names);
        return tsr_err(TSR_EVERIFY, "%s: %s still busy at FINISH (work not ordered before FINISH)", rs->name, names);
    }
    return TSR_OK;
}

/* Between slices: the run budget and the progress watchdog (some counter
 * other than cycles must move; the budget bounds a run that keeps moving
 * without finishing). */
int tsr_regseq_check_progress(tsr_regseq_t *rs)
{
    uint64_t cyc = 0, v, act = 0;
    int rc = read_cnt(rs, TSR_CNT_CYCLES, &cyc);
    if (rc)
        return rc;
    if (cyc > rs->bound)
        return tsr_err(TSR_EBACKEND,
                       "%s: run budget exceeded: no FINISH after %llu cycles, the bound derived from the "
                       "stream (its loop extents, transfers and the DRAM timing); raise it with "
                       "tsr_device_opts_t.run_budget (tessera: --run-budget N) only if the stream is "
                       "known to be slower",
                       rs->name, (unsigned long long)cyc);
    /* Sample every WATCH_EVERY cycles of the device's own clock (a device
     * whose cycle counter does not move is left to the caller's timeout). */
    if (rs->last_sample && cyc < rs->last_sample + WATCH_EVERY)
        return TSR_OK;
    rs->last_sample = cyc ? cyc : 1;
    static const int watched[] = {TSR_CNT_DRAM_RD_BYTES, TSR_CNT_DRAM_WR_BYTES, TSR_CNT_GEMM_OPS, TSR_CNT_ALU_OPS};
    for (size_t k = 0; k < sizeof watched / sizeof watched[0]; k++) {
        if ((rc = read_cnt(rs, watched[k], &v)))
            return rc;
        act += v;
    }
    /* Compute cycles spent neither waiting on tokens nor on DRAM: GEMM
     * reset loops count no op but are progress. */
    uint64_t busy = 0, tok = 0, mem = 0;
    uint32_t st = 0;
    if ((rc = read_cnt(rs, TSR_CNT_COMPUTE_BUSY, &busy)) || (rc = read_cnt(rs, TSR_CNT_COMPUTE_STALL_TOK, &tok)) ||
        (rc = read_cnt(rs, TSR_CNT_COMPUTE_STALL_MEM, &mem)) || (rc = rd(rs, TSR_REG_STAGE_INSNS, &st)))
        return rc;
    act += busy - tok - mem + st;
    if (act != rs->last_activity || !rs->last_change) {
        rs->last_activity = act;
        rs->last_change = rs->last_sample;
    } else if (rs->last_sample - rs->last_change >= rs->ro.watchdog_cycles) {
        return stuck_report(rs, "watchdog: no progress for many cycles");
    }
    return TSR_OK;
}

int tsr_regseq_finish(tsr_regseq_t *rs)
{
    rs->started = 0;
    tsr_counters_t c = rs->run;
    int rc;
    if ((rc = end_checks(rs)) || (rc = tsr_regseq_read_hw(rs, c.hw)))
        return rc;
    tsr_counters_from_hw(&c, 0);
    tsr_counters_add(&rs->ctr, &c);
    return TSR_OK;
}

int tsr_regseq_wait(void *st, int timeout_ms)
{
    tsr_regseq_t *rs = st;
    double deadline = now_ms() + timeout_ms;
    if (!rs->started)
        return tsr_err(TSR_EINVAL, "nothing started");
    for (;;) {
        int fired = 0, rc;
        uint32_t ap = 0;
        if (rs->io.ops->wait_irq)
            rc = rs->io.ops->wait_irq(rs->io.ctx, rs->io.slice, &fired);
        else
        {
            nanosleep(&(struct timespec){0, POLL_NS}, NULL); /* a signal cutting it short only polls earlier */
            rc = TSR_OK;
        }
        /* ap_done is the completion, whatever signalled it (clear on read:
         * this is its only reader). */
        if (!rc)
            rc = rd(rs, TSR_REG_AP_CTRL, &ap);
        if (!rc && fired && !(ap & TSR_AP_DONE))
            rc = tsr_err(TSR_EBACKEND, "%s: the completion signal rose but AP_CTRL.ap_done is clear (AP_CTRL 0x%x)",
                         rs->name, ap);
        if (!rc && (ap & TSR_AP_DONE))
            return tsr_regseq_finish(rs);
        if (!rc)
            rc = tsr_regseq_check_progress(rs);
        if (rc) {
            rs->started = 0;
            return rc;
        }
        if (timeout_ms >= 0 && now_ms() >= deadline)
            return tsr_err(TSR_ETIMEOUT, "run still in progress after %d ms", timeout_ms);
    }
}

int tsr_regseq_counters(void *st, tsr_counters_t *out)
{
    tsr_regseq_t *rs = st;
    *out = rs->ctr;
    if (rs->started) {
        /* Mid-run (after a wait timeout): add what the hardware counted so
         * far; the per-instruction static counts exist only for whole runs. */
        tsr_counters_t live;
        memset(&live, 0, sizeof live);
        int rc = tsr_regseq_read_hw(rs, live.hw);
        if (rc)
            return rc;
        tsr_counters_from_hw(&live, 1);
        tsr_counters_add(out, &live);
    }
    return TSR_OK;
}

int tsr_regseq_reset_counters(void *st)
{
    memset(&((tsr_regseq_t *)st)->ctr, 0, sizeof(tsr_counters_t));
    return TSR_OK;
}

int tsr_regseq_reset(void *st)
{
    tsr_regseq_t *rs = st;
    uint32_t resetting = 1, ap = 0;
    rs->started = 0;
    int rc = wr(rs, TSR_REG_SOFT_RESET, TSR_SOFT_RESET);
    /* The AXI4 master drains what it started (bounded by the DRAM's latency
     * and the bursts in flight). */
    double limit = now_ms() + RESET_MS;
    for (int i = 0; !rc && (resetting & 1) && i < RESET_POLLS && now_ms() < limit; i++)
        rc = rd(rs, TSR_REG_SOFT_RESET, &resetting); /* reads STATUS.RESETTING */
    if (!rc && (resetting & 1))
        rc = tsr_err(TSR_EBACKEND, "%s: soft reset did not complete (DRAM transactions still outstanding)", rs->name);
    if (!rc && rs->io.ops->after_reset)
        rc = rs->io.ops->after_reset(rs->io.ctx);
    if (!rc)
        rc = rd(rs, TSR_REG_AP_CTRL, &ap);
    if (!rc && (ap & (TSR_AP_START | TSR_AP_DONE)) != 0)
        rc = tsr_err(TSR_EBACKEND, "%s: after a soft reset AP_CTRL is 0x%x (ap_start or ap_done still set)", rs->name,
                     ap);
    return rc;
}

uint64_t tsr_regseq_bound(void *st, const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n)
{
    return tsr_rtl_cycle_bound(&((tsr_regseq_t *)st)->ro, cfg, insns, n);
}
