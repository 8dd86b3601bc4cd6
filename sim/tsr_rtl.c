/*
 * tsr_rtl: Verilator harness for tsr_top (see tsr_rtl.h).
 *
 * Model build: the SystemVerilog package for the config is generated in
 * memory; a hash of it, the RTL sources, the shim and the build script
 * names a cache directory holding libtsrv.so. A miss runs
 * scripts/build_rtl_model.sh under a lock, so concurrent tests share one
 * build. The library is dlopen()ed and used through tsr_vtop_api_t.
 * With TESSERA_RTL_NETLIST=ice40 the model is built from the gate-level
 * netlist of yosys synth_ice40 instead (cache directory gl-ice40-*), so the
 * same driver-level tests run on what goes into the iCE40 bitstream.
 *
 * DRAM model (AXI4 slave): read and write bursts are accepted while fewer
 * than `outstanding` are in flight per direction; a burst's first beat is
 * available `latency` cycles after its address was accepted; beats of all
 * bursts share a token bucket refilled by `bytes_per_cycle`, so sustained
 * bandwidth is bounded and reads and writes compete for it. Accesses
 * outside every allocated buffer answer SLVERR (a read beat only when none
 * of its bytes is in a buffer; a write when any enabled byte is outside),
 * which the RTL reports.
 */
#define _DEFAULT_SOURCE /* flock, mkdtemp */
#include "tsr_rtl.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tsr_emit.h"
#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_pipe.h"
#include "tsr_timeline.h"
#include "rtl/tsr_vtop.h"

#ifndef TSR_SOURCE_DIR
#define TSR_SOURCE_DIR "."
#endif

#define RD_MAX 64  /* burst queue capacity (>= any outstanding limit) */

typedef struct {
    uint64_t addr;      /* next beat's byte address */
    uint32_t beats;     /* beats left */
    uint32_t id;        /* AXI ID */
    uint64_t ready_at;  /* cycle the next beat may go */
    int err;            /* a beat fell outside every buffer: answer SLVERR */
    uint64_t t0;        /* cycle the address was accepted (timeline) */
    uint64_t addr0;     /* first byte address (timeline) */
    uint32_t bytes;     /* bytes of the burst (timeline) */
} burst_t;

typedef struct {
    burst_t q[RD_MAX];
    int head, count;
} bq_t;

/* Counters a profile line reports (deltas over its window). */
static const int prof_cnt[] = {TSR_CNT_GEMM_OPS, TSR_CNT_ALU_OPS, TSR_CNT_DUAL_OPS, TSR_CNT_DRAM_RD_BYTES,
                               TSR_CNT_DRAM_WR_BYTES};
#define PROF_N (sizeof prof_cnt / sizeof prof_cnt[0] + 1) /* + the stage instruction counts */

struct tsr_rtl {
    tsr_config_t cfg;
    tsr_dram_t *dram;
    tsr_rtl_opts_t o;
    void *lib;                 /* dlopen handle */
    const tsr_vtop_api_t *api; /* the model's functions */
    void *m;                   /* model instance */
    int bus;                   /* bytes per beat */
    uint64_t cycle;            /* cycles since reset */
    double bucket;             /* DRAM bandwidth tokens (bytes) */
    bq_t rd;                   /* read bursts in flight */
    bq_t aw;                   /* write bursts awaiting data */
    bq_t b;                    /* write responses pending (ready_at) */
    int rd_err, wr_err;        /* SLVERR pending on the current burst */
    uint8_t *beat;             /* one beat of data */
    uint64_t run_start;        /* cycle of the last ap_start write */
    int tracing;
    /* profile */
    FILE *prof;                /* open timeline, or NULL */
    uint64_t prof_next;        /* cycle of the next sample (0: no run being profiled) */
    uint32_t prof_last[PROF_N];/* counter values (low words) at the last sample */
    uint32_t prof_run;         /* runs started */
    /* timeline (sim/tsr_timeline.h) */
    tsr_tl_t *tl;              /* open timeline, or NULL */
    uint32_t vp[TSR_VP_COUNT]; /* probed signals at the previous cycle */
    uint32_t vp_mask;          /* signals the model exposes */
    uint64_t st_begin[TSR_STAGE_COUNT]; /* cycle a stage's current instruction began (UINT64_MAX: idle) */
    uint64_t wait_begin[TSR_STAGE_COUNT]; /* cycle a token wait began (UINT64_MAX: none) */
    uint64_t op_begin[2];      /* cycle a run of GEMM / ALU ops began (UINT64_MAX: none) */
    uint64_t op_n[2];          /* ops in that run */
    int running;               /* a timeline run is open (ap_start seen, done not yet) */
    uint32_t tl_addr, tl_count;/* INSN_ADDR / INSN_COUNT as last written (the timeline decodes the stream) */
    tsr_insn_t *insns;         /* the running stream, decoded for the timeline's slice names */
    /* simulation speed of tsr_rtl_run (the runs, not the register accesses
     * around them): tsr_rtl_stats; with TESSERA_RTL_STATS set, printed when
     * the model is destroyed */
    int stats;
    uint64_t stat_cycles;      /* cycles simulated inside tsr_rtl_run */
    double stat_cpu;           /* thread CPU seconds spent there */
};

static void bq_push(bq_t *q, burst_t b) { q->q[(q->head + q->count++) % RD_MAX] = b; }
static burst_t *bq_front(bq_t *q) { return q->count ? &q->q[q->head] : NULL; }
static void bq_pop(bq_t *q) { q->head = (q->head + 1) % RD_MAX; q->count--; }

/* yosys's simulation models of the iCE40 cells (Debian's yosys package) */
#define TSR_ICE40_CELLS "/usr/share/yosys/ice40/cells_sim.v"

static const char *root_dir(void)
{
    const char *r = getenv("TESSERA_ROOT");
    return r && *r ? r : TSR_SOURCE_DIR;
}

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int hash_file(uint64_t *h, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tsr_err(TSR_EIO, "cannot read %s: %s", path, strerror(errno));
    uint8_t buf[65536];
    size_t n;
    *h = fnv(*h, path, strlen(path));
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        *h = fnv(*h, buf, n);
    fclose(f);
    return TSR_OK;
}

static int mkdirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    if (mkdir(tmp, 0755) && errno != EEXIST)
        return tsr_err(TSR_EIO, "cannot create %s: %s", path, strerror(errno));
    return TSR_OK;
}

/* Find or build the model library; writes its path. */
static int model_path(const tsr_config_t *cfg, const tsr_rtl_opts_t *o, char *lib, size_t n)
{
    char *pkg = NULL, cache[512], dir[1024], path[1100];
    size_t pkglen = 0;
    int rc = TSR_OK, lockfd = -1;
    FILE *mf = open_memstream(&pkg, &pkglen);
    if (!mf)
        return tsr_err(TSR_ENOMEM, "out of memory");
    rc = tsr_emit_sv(cfg, "rtl-backend", mf);
    fclose(mf);
    if (rc)
        goto out;
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, pkg, pkglen);
    int trace = o->trace_path != NULL, threads = o->threads > 1 ? o->threads : 1;
    h = fnv(h, &trace, sizeof trace);
    h = fnv(h, &threads, sizeof threads);
    int timeline = o->timeline_path != NULL;
    if (timeline)
        h = fnv(h, &timeline, sizeof timeline);
    const char *root = root_dir();
    /* TESSERA_RTL_NETLIST=ice40: build the model from the gate-level netlist
     * that yosys synth_ice40 makes of the RTL (scripts/fpga/ice40_synth.sh)
     * and yosys's iCE40 cell models, instead of from the RTL itself. */
    const char *kind = getenv("TESSERA_RTL_NETLIST");
    if (kind && *kind && strcmp(kind, "ice40")) {
        rc = tsr_err(TSR_EINVAL, "rtl: TESSERA_RTL_NETLIST = \"%s\" is unknown: allowed ice40 (or unset for the RTL)",
                     kind);
        goto out;
    }
    int netlist = kind && *kind;
    static const char *const extra[] = {"sim/rtl/tsr_vshim.cpp", "sim/rtl/tsr_vtop.h",
                                        "scripts/build_rtl_model.sh", "hw/rtl/lint_waivers.vlt",
                                        "hw/rtl/tsr_assert.svh", "hw/rtl/tsr_axi.svh",
                                        "sim/rtl/tsr_timeline.vlt"};
    if (netlist) {
        /* the synthesis script and the cell models are sources of this model */
        snprintf(path, sizeof path, "%s/scripts/fpga/ice40_synth.sh", root);
        if ((rc = hash_file(&h, path)) || (rc = hash_file(&h, TSR_ICE40_CELLS)))
            goto out;
        if (timeline) {
            rc = tsr_err(TSR_EINVAL, "rtl: --timeline needs the RTL model's stage signals, which the iCE40 netlist "
                                     "(TESSERA_RTL_NETLIST=ice40) does not keep");
            goto out;
        }
    }
    glob_t g;
    snprintf(path, sizeof path, "%s/hw/rtl/*.sv", root);
    if (glob(path, 0, NULL, &g) != 0) {
        rc = tsr_err(TSR_EBACKEND, "rtl: no RTL sources at %s (set TESSERA_ROOT to the source tree)", path);
        goto out;
    }
    for (size_t i = 0; i < g.gl_pathc && !rc; i++)
        rc = hash_file(&h, g.gl_pathv[i]);
    globfree(&g);
    for (size_t i = 0; i < sizeof extra / sizeof extra[0] && !rc; i++) {
        snprintf(path, sizeof path, "%s/%s", root, extra[i]);
        rc = hash_file(&h, path);
    }
    if (rc)
        goto out;
    snprintf(dir, sizeof dir, "%s/%s-%016llx", tsr_cache_dir(cache, sizeof cache),
             netlist ? "gl-ice40" : "rtl", (unsigned long long)h);
    snprintf(lib, n, "%s/libtsrv.so", dir);
    if (access(lib, R_OK) == 0)
        goto out;
    if ((rc = mkdirs(dir)))
        goto out;
    /* One builder per model; others wait on the lock and then find the library. */
    snprintf(path, sizeof path, "%s/lock", dir);
    lockfd = open(path, O_CREAT | O_RDWR, 0644);
    if (lockfd < 0 || flock(lockfd, LOCK_EX)) {
        rc = tsr_err(TSR_EIO, "rtl: cannot lock %s: %s", path, strerror(errno));
        goto out;
    }
    if (access(lib, R_OK) == 0)
        goto out;
    snprintf(path, sizeof path, "%s/tsr_pkg.sv", dir);
    FILE *pf = fopen(path, "w");
    if (!pf || fwrite(pkg, 1, pkglen, pf) != pkglen) {
        if (pf)
            fclose(pf);
        rc = tsr_err(TSR_EIO, "rtl: cannot write %s", path);
        goto out;
    }
    fclose(pf);
    if (o->verbose)
        tsr_notice("building the RTL model for this config in %s ...", dir);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/scripts/build_rtl_model.sh' '%s' '%s' %d %d %d %d %s > '%s/build.log' 2>&1",
             root, dir, path, cfg->dram_bus_width / 8, trace, threads, timeline, netlist ? "ice40" : "rtl", dir);
    if (system(cmd) != 0 || access(lib, R_OK) != 0)
        rc = tsr_err(TSR_EBACKEND, "rtl: building the Verilator model%s failed; see %s/build.log",
                     netlist ? " from the iCE40 netlist" : "", dir);
out:
    if (lockfd >= 0)
        close(lockfd);
    free(pkg);
    return rc;
}

/* ---- timeline: the probed stage signals, one sample per cycle ---- */

/* Turn this cycle's signal levels into timeline events: completions
 * (counter steps), busy starts, token-wait and pipe-activity runs. */
static void tl_sample(tsr_rtl_t *r)
{
    uint32_t v[TSR_VP_COUNT];
    r->api->probe(r->m, v);
    const double c = (double)r->cycle;
    /* (a counter that went back was cleared by START: count from 0) */
    uint32_t nf = v[TSR_VP_FETCHED] >= r->vp[TSR_VP_FETCHED] ? v[TSR_VP_FETCHED] - r->vp[TSR_VP_FETCHED] : v[TSR_VP_FETCHED];
    for (uint32_t k = 0; k < nf && k < 8; k++)
        tsr_tl_fetch(r->tl, c);
    for (int s = 0; s < TSR_STAGE_COUNT; s++) {
        uint32_t now_n = v[TSR_VP_LOAD_INSNS + s], was = r->vp[TSR_VP_LOAD_INSNS + s];
        uint32_t done = now_n >= was ? now_n - was : now_n;
        for (uint32_t k = 0; k < done && k < 4; k++) {
            uint64_t b = r->st_begin[s] == UINT64_MAX ? r->cycle : r->st_begin[s];
            tsr_tl_insn(r->tl, s, (double)b, c);
            r->st_begin[s] = UINT64_MAX;
        }
        int busy = v[TSR_VP_LOAD_BUSY + s] != 0, wait = v[TSR_VP_LOAD_STALL_TOK + s] != 0;
        if (busy && r->st_begin[s] == UINT64_MAX)
            r->st_begin[s] = r->cycle;
        if (wait && r->wait_begin[s] == UINT64_MAX)
            r->wait_begin[s] = r->cycle;
        if (!wait && r->wait_begin[s] != UINT64_MAX) {
            tsr_tl_wait(r->tl, s, (double)r->wait_begin[s], c);
            r->wait_begin[s] = UINT64_MAX;
        }
    }
    for (int p = 0; p < 2; p++) {
        int op = v[TSR_VP_GEMM_OP + p] != 0;
        if (op) {
            if (r->op_begin[p] == UINT64_MAX)
                r->op_begin[p] = r->cycle;
            r->op_n[p]++;
        } else if (r->op_begin[p] != UINT64_MAX) {
            tsr_tl_pipe(r->tl, p, (double)r->op_begin[p], c, r->op_n[p]);
            r->op_begin[p] = UINT64_MAX;
            r->op_n[p] = 0;
        }
    }
    memcpy(r->vp, v, sizeof v);
}

/* Open runs of waits and ops end with the run. */
static void tl_run_end(tsr_rtl_t *r)
{
    const double c = (double)r->cycle;
    tl_sample(r); /* what the last edge completed */
    /* DONE rises as FINISH leaves the dispatcher, before the stage counts
     * it: an instruction still in a stage ends with the run. */
    for (int s = 0; s < TSR_STAGE_COUNT; s++)
        if (r->st_begin[s] != UINT64_MAX)
            tsr_tl_insn(r->tl, s, (double)r->st_begin[s], c);
    for (int s = 0; s < TSR_STAGE_COUNT; s++)
        if (r->wait_begin[s] != UINT64_MAX)
            tsr_tl_wait(r->tl, s, (double)r->wait_begin[s], c);
    for (int p = 0; p < 2; p++)
        if (r->op_begin[p] != UINT64_MAX)
            tsr_tl_pipe(r->tl, p, (double)r->op_begin[p], c, r->op_n[p]);
    tsr_tl_run_end(r->tl, c);
}

/* ---- one clock cycle: DRAM model + model evaluation ---- */

static void cycle(tsr_rtl_t *r)
{
    const tsr_vtop_api_t *a = r->api;
    void *m = r->m;
    int bus = r->bus;
    double cap = 4.0 * bus;
    r->bucket += r->o.dram_bytes_per_cycle;
    if (r->bucket > cap)
        r->bucket = cap;

    /* Drive slave outputs for this cycle. */
    burst_t *rb = bq_front(&r->rd);
    int rvalid = rb && r->cycle >= rb->ready_at && r->bucket >= bus;
    int rerr = 0;
    if (rvalid) {
        if (tsr_dram_read(r->dram, rb->addr, r->beat, (uint64_t)bus) != TSR_OK) {
            /* A beat that straddles a buffer's end: the hardware reads whole
             * beats, so bytes beside a buffer read as 0; only a beat with no
             * byte in any buffer is an error. */
            rerr = 1;
            for (int i = 0; i < bus; i++) {
                const uint8_t *q = tsr_dram_ptr(r->dram, rb->addr + (uint64_t)i, 1);
                r->beat[i] = q ? *q : 0;
                if (q)
                    rerr = 0;
            }
        }
        a->set_rdata(m, r->beat);
    }
    a->set(m, TSR_V_RVALID, (uint64_t)rvalid);
    a->set(m, TSR_V_RLAST, (uint64_t)(rvalid && rb->beats == 1));
    a->set(m, TSR_V_RID, rvalid ? rb->id : 0);
    a->set(m, TSR_V_RRESP, rerr ? 2 : 0);
    /* The ready levels driven now decide this edge's AR/AW handshakes (a
     * burst that completes at this edge frees its slot for the next cycle). */
    int arready = r->rd.count < (int)r->o.dram_outstanding;
    int awready = r->aw.count + r->b.count < (int)r->o.dram_outstanding;
    a->set(m, TSR_V_ARREADY, (uint64_t)arready);
    a->set(m, TSR_V_AWREADY, (uint64_t)awready);
    burst_t *wb = bq_front(&r->aw);
    int wready = wb && r->bucket >= bus * (rvalid ? 2 : 1);
    a->set(m, TSR_V_WREADY, (uint64_t)wready);
    burst_t *bb = bq_front(&r->b);
    int bvalid = bb && r->cycle >= bb->ready_at;
    a->set(m, TSR_V_BVALID, (uint64_t)bvalid);
    a->set(m, TSR_V_BID, bvalid ? bb->id : 0);
    a->set(m, TSR_V_BRESP, bvalid && bb->err ? 2 : 0);
    a->eval(m);

    /* Handshakes seen at this edge. */
    if (rvalid && a->get(m, TSR_V_RREADY)) {
        r->bucket -= bus;
        rb->addr += (uint64_t)bus;
        if (--rb->beats == 0) {
            tsr_tl_burst(r->tl, TSR_TL_RD, (double)rb->t0, (double)r->cycle + 1, rb->addr0, rb->bytes);
            bq_pop(&r->rd);
        }
    }
    if (arready && a->get(m, TSR_V_ARVALID)) {
        uint64_t ad = a->get(m, TSR_V_ARADDR);
        uint32_t nbeats = (uint32_t)a->get(m, TSR_V_ARLEN) + 1;
        burst_t nb = {ad, nbeats, (uint32_t)a->get(m, TSR_V_ARID), r->cycle + r->o.dram_latency, 0,
                      r->cycle, ad, nbeats * (uint32_t)bus};
        bq_push(&r->rd, nb);
    }
    if (wready && a->get(m, TSR_V_WVALID)) {
        uint64_t strb = a->get(m, TSR_V_WSTRB);
        uint8_t *p = tsr_dram_ptr(r->dram, wb->addr, (uint64_t)bus);
        r->bucket -= bus;
        a->get_wdata(m, r->beat);
        /* Writes are strobed: every enabled byte must lie in a buffer. */
        for (int i = 0; i < bus; i++) {
            if (!((strb >> i) & 1))
                continue;
            uint8_t *q = p ? p + i : tsr_dram_ptr(r->dram, wb->addr + (uint64_t)i, 1);
            if (q)
                *q = r->beat[i];
            else
                wb->err = 1;
        }
        wb->addr += (uint64_t)bus;
        if (--wb->beats == 0) {
            burst_t resp = {0, 0, wb->id, r->cycle + r->o.dram_latency, wb->err, wb->t0, wb->addr0, wb->bytes};
            bq_pop(&r->aw);
            bq_push(&r->b, resp);
        }
    }
    if (awready && a->get(m, TSR_V_AWVALID)) {
        uint64_t ad = a->get(m, TSR_V_AWADDR);
        uint32_t nbeats = (uint32_t)a->get(m, TSR_V_AWLEN) + 1;
        burst_t nb = {ad, nbeats, (uint32_t)a->get(m, TSR_V_AWID), 0, 0, r->cycle, ad, nbeats * (uint32_t)bus};
        bq_push(&r->aw, nb);
    }
    if (bvalid && a->get(m, TSR_V_BREADY)) {
        tsr_tl_burst(r->tl, TSR_TL_WR, (double)bb->t0, (double)r->cycle + 1, bb->addr0, bb->bytes);
        bq_pop(&r->b);
    }
    if (r->tl && r->running)
        tl_sample(r);

    if (r->o.trace_path) {
        int on = r->cycle >= r->o.trace_start &&
                 (!r->o.trace_cycles || r->cycle < r->o.trace_start + r->o.trace_cycles);
        if (on != r->tracing)
            a->trace(m, on);
        r->tracing = on;
    }
    a->tick(m);
    r->cycle++;
}

/* ---- AXI4-Lite register access (a few cycles each, DRAM model running) ---- */

#define LITE_TIMEOUT 1000

static int reg_write(tsr_rtl_t *r, uint32_t addr, uint32_t val)
{
    const tsr_vtop_api_t *a = r->api;
    int i;
    a->set(r->m, TSR_V_AXIL_AWADDR, addr);
    a->set(r->m, TSR_V_AXIL_WDATA, val);
    a->set(r->m, TSR_V_AXIL_WSTRB, 0xf);
    a->set(r->m, TSR_V_AXIL_AWVALID, 1);
    a->set(r->m, TSR_V_AXIL_WVALID, 1);
    a->set(r->m, TSR_V_AXIL_BREADY, 1);
    for (i = 0; i < LITE_TIMEOUT; i++) {
        a->eval(r->m);
        int acc = a->get(r->m, TSR_V_AXIL_AWREADY) && a->get(r->m, TSR_V_AXIL_WREADY);
        cycle(r);
        if (acc)
            break;
    }
    a->set(r->m, TSR_V_AXIL_AWVALID, 0);
    a->set(r->m, TSR_V_AXIL_WVALID, 0);
    for (; i < LITE_TIMEOUT; i++) {
        a->eval(r->m);
        int b = (int)a->get(r->m, TSR_V_AXIL_BVALID);
        cycle(r);
        if (b)
            break;
    }
    a->set(r->m, TSR_V_AXIL_BREADY, 0);
    if (i >= LITE_TIMEOUT)
        return tsr_err(TSR_EBACKEND, "rtl: AXI4-Lite write to 0x%02x got no response", addr);
    return TSR_OK;
}

static int reg_read(tsr_rtl_t *r, uint32_t addr, uint32_t *val)
{
    const tsr_vtop_api_t *a = r->api;
    int i;
    a->set(r->m, TSR_V_AXIL_ARADDR, addr);
    a->set(r->m, TSR_V_AXIL_ARVALID, 1);
    a->set(r->m, TSR_V_AXIL_RREADY, 1);
    for (i = 0; i < LITE_TIMEOUT; i++) {
        a->eval(r->m);
        int acc = (int)a->get(r->m, TSR_V_AXIL_ARREADY);
        cycle(r);
        if (acc)
            break;
    }
    a->set(r->m, TSR_V_AXIL_ARVALID, 0);
    for (; i < LITE_TIMEOUT; i++) {
        a->eval(r->m);
        int v = (int)a->get(r->m, TSR_V_AXIL_RVALID);
        *val = (uint32_t)a->get(r->m, TSR_V_AXIL_RDATA);
        cycle(r);
        if (v)
            break;
    }
    a->set(r->m, TSR_V_AXIL_RREADY, 0);
    if (i >= LITE_TIMEOUT)
        return tsr_err(TSR_EBACKEND, "rtl: AXI4-Lite read of 0x%02x got no response", addr);
    return TSR_OK;
}

/* Profile: read the counters (AXI4-Lite, a few cycles each; the
 * accelerator runs on meanwhile) and, with emit, write the line of the
 * window that ends now: counter deltas and the instructions each stage
 * completed. */
static void prof_sample(tsr_rtl_t *r, int emit)
{
    uint32_t v[PROF_N] = {0};
    uint64_t t0 = r->cycle;
    for (size_t k = 0; k + 1 < PROF_N; k++)
        reg_read(r, tsr_cnt_offset(prof_cnt[k]), &v[k]);
    reg_read(r, TSR_REG_STAGE_INSNS, &v[PROF_N - 1]);
    if (emit) {
        const uint32_t st = v[PROF_N - 1], st0 = r->prof_last[PROF_N - 1];
        fprintf(r->prof, "%u,%llu", r->prof_run, (unsigned long long)t0);
        for (size_t k = 0; k + 1 < PROF_N; k++)
            fprintf(r->prof, ",%u", v[k] - r->prof_last[k]);
        for (int sh = 0; sh < 30; sh += 10)
            fprintf(r->prof, ",%u", ((st >> sh) - (st0 >> sh)) & 1023u);
        fputc('\n', r->prof);
    }
    memcpy(r->prof_last, v, sizeof v);
    r->prof_next = t0 + (r->o.profile_window ? r->o.profile_window : 256);
}

uint64_t tsr_rtl_cycles(const tsr_rtl_t *r) { return r->cycle; }

int tsr_rtl_create(const tsr_config_t *cfg, tsr_dram_t *dram, const tsr_rtl_opts_t *opts,
                   tsr_rtl_t **out)
{
    char lib[1200];
    int rc;
    *out = NULL;
    /* a feature the RTL lacks: refused before any model is looked for or built */
    if ((rc = tsr_emit_rtl_supported(cfg)))
        return rc;
    tsr_rtl_t *r = calloc(1, sizeof *r);
    if (!r)
        return tsr_err(TSR_ENOMEM, "out of memory");
    r->cfg = *cfg;
    r->dram = dram;
    if (opts)
        r->o = *opts;
    if (!r->o.dram_latency)
        r->o.dram_latency = 32;
    if (r->o.dram_bytes_per_cycle <= 0)
        r->o.dram_bytes_per_cycle = 8;
    if (!r->o.dram_outstanding)
        r->o.dram_outstanding = 8;
    if (r->o.dram_outstanding > RD_MAX / 2)
        r->o.dram_outstanding = RD_MAX / 2;
    if (!r->o.watchdog_cycles)
        r->o.watchdog_cycles = 200000;
    const char *st = getenv("TESSERA_RTL_STATS");
    r->stats = st && *st && strcmp(st, "0");
    r->bus = cfg->dram_bus_width / 8;
    r->beat = calloc(1, (size_t)r->bus);
    if (!r->beat) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = model_path(cfg, &r->o, lib, sizeof lib)))
        goto fail;
    r->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!r->lib) {
        rc = tsr_err(TSR_EBACKEND, "rtl: cannot load %s: %s", lib, dlerror());
        goto fail;
    }
    r->api = dlsym(r->lib, "tsr_vtop_api");
    if (!r->api || r->api->version != TSR_VTOP_API_VERSION || r->api->bus_bytes != r->bus) {
        rc = tsr_err(TSR_EBACKEND, "rtl: %s is not a compatible model (delete the cache directory)", lib);
        goto fail;
    }
    if (r->o.profile_path) {
        r->prof = fopen(r->o.profile_path, "w");
        if (!r->prof) {
            rc = tsr_err(TSR_EIO, "rtl: cannot write the profile %s: %s", r->o.profile_path, strerror(errno));
            goto fail;
        }
        fprintf(r->prof, "run,cycle,gemm_ops,alu_ops,dual_ops,dram_rd_bytes,dram_wr_bytes,load_insns,compute_insns,"
                         "store_insns\n");
    }
    r->m = r->api->create(r->o.trace_path);
    if (!r->m) {
        rc = tsr_err(TSR_EBACKEND, "rtl: model creation failed");
        goto fail;
    }
    if (r->o.timeline_path) {
        if ((rc = tsr_tl_open(r->o.timeline_path, "rtl", r->o.timeline_max, &r->tl)))
            goto fail;
        r->vp_mask = r->api->probe(r->m, r->vp);
        if (r->vp_mask != (1u << TSR_VP_COUNT) - 1) {
            static const char *const names[TSR_VP_COUNT] = TSR_VP_NAMES;
            char missing[512] = "";
            size_t n = 0;
            for (int k = 0; k < TSR_VP_COUNT && n < sizeof missing; k++)
                if (!((r->vp_mask >> k) & 1))
                    n += (size_t)snprintf(missing + n, sizeof missing - n, " %s", names[k]);
            tsr_notice("rtl timeline: tsr_top has no signal%s (renamed? update sim/rtl/tsr_timeline.vlt and "
                       "tsr_vtop.h): those lanes stay empty",
                       missing);
        }
    }
    r->api->set(r->m, TSR_V_RST_N, 0);
    for (int i = 0; i < 8; i++)
        cycle(r);
    r->api->set(r->m, TSR_V_RST_N, 1);
    cycle(r);
    *out = r;
    return TSR_OK;
fail:
    tsr_rtl_destroy(r);
    return rc;
}

void tsr_rtl_destroy(tsr_rtl_t *r)
{
    if (!r)
        return;
    if (r->stats && r->stat_cycles)
        fprintf(stderr, "rtl stats: %llu cycles in %.4f s CPU: %.0f cycles/s\n", (unsigned long long)r->stat_cycles,
                r->stat_cpu, r->stat_cpu > 0 ? (double)r->stat_cycles / r->stat_cpu : 0.0);
    if (r->m)
        r->api->destroy(r->m);
    /* The library stays loaded: Verilator's runtime keeps global state that
     * must not be unmapped while the process lives. */
    if (r->prof)
        fclose(r->prof);
    tsr_tl_close(r->tl);
    free(r->insns);
    free(r->beat);
    free(r);
}

/* A --timeline run opens on the ap_start write: the stream is decoded from
 * device DRAM (INSN_ADDR / INSN_COUNT as the driver wrote them) so slices
 * carry each instruction's kind and fields. */
static int tl_run_begin(tsr_rtl_t *r)
{
    uint32_t count = r->tl_count;
    free(r->insns);
    r->insns = calloc(count ? count : 1, sizeof *r->insns);
    if (!r->insns)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        uint8_t b[TSR_INSN_BYTES];
        tsr_insn_bits_t bits;
        if (tsr_dram_read(r->dram, (uint64_t)r->tl_addr + (uint64_t)i * TSR_INSN_BYTES, b, sizeof b) == TSR_OK) {
            tsr_insn_bits_load(b, &bits);
            tsr_insn_decode(&r->cfg, &bits, &r->insns[i]);
        }
    }
    int rc = tsr_tl_run_begin(r->tl, &r->cfg, r->insns, count, (double)r->cycle);
    if (rc)
        return rc;
    r->running = 1;
    r->api->probe(r->m, r->vp);
    for (int s = 0; s < TSR_STAGE_COUNT; s++)
        r->st_begin[s] = r->wait_begin[s] = UINT64_MAX;
    r->op_begin[0] = r->op_begin[1] = UINT64_MAX;
    r->op_n[0] = r->op_n[1] = 0;
    return TSR_OK;
}

int tsr_rtl_reg_write(tsr_rtl_t *r, uint32_t off, uint32_t v)
{
    int rc = reg_write(r, off, v);
    /* The harness watches the bus like a monitor: a write of ap_start
     * opens the profile's next run (the device ignores it when busy). */
    if (!rc && off == TSR_REG_AP_CTRL && (v & TSR_AP_START)) {
        r->run_start = r->cycle;
        if (r->prof) {
            r->prof_run++;
            prof_sample(r, 0);
        }
    }
    if (!rc && off == TSR_REG_INSN_ADDR)
        r->tl_addr = v;
    if (!rc && off == TSR_REG_INSN_COUNT)
        r->tl_count = v;
    if (!rc && off == TSR_REG_SOFT_RESET && (v & TSR_SOFT_RESET))
        r->running = 0;
    if (!rc && r->tl && off == TSR_REG_AP_CTRL && (v & TSR_AP_START))
        rc = tl_run_begin(r);
    return rc;
}

int tsr_rtl_reg_read(tsr_rtl_t *r, uint32_t off, uint32_t *v) { return reg_read(r, off, v); }

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run_cycles(tsr_rtl_t *r, uint64_t max_cycles, int *done);

/* Two clock reads per call: the driver runs slices of thousands of cycles,
 * each several milliseconds of simulation. */
int tsr_rtl_run(tsr_rtl_t *r, uint64_t max_cycles, int *done)
{
    uint64_t c0 = r->cycle;
    double t0 = thread_cpu();
    int rc = run_cycles(r, max_cycles, done);
    r->stat_cpu += thread_cpu() - t0;
    r->stat_cycles += r->cycle - c0;
    return rc;
}

static int run_cycles(tsr_rtl_t *r, uint64_t max_cycles, int *done)
{
    *done = 0;
    uint64_t end = max_cycles ? r->cycle + max_cycles : UINT64_MAX;
    while (r->cycle < end) {
        /* DONE is a register (tsr_ctrl's done_q): its value after the last
         * rising edge is final, no evaluation needed before reading it. */
        if (r->api->get(r->m, TSR_V_DONE)) {
            if (r->prof && r->prof_next) {
                prof_sample(r, 1); /* the last (partial) window */
                fflush(r->prof);
                r->prof_next = 0;
            }
            if (r->tl && r->running)
                tl_run_end(r);
            r->running = 0;
            *done = 1;
            return TSR_OK;
        }
        cycle(r);
        if (r->prof && r->prof_next && r->cycle >= r->prof_next)
            prof_sample(r, 1);
    }
    return TSR_OK;
}

int tsr_rtl_bus_check(tsr_rtl_t *r)
{
    /* The slave's view: every burst the master started has completed (no
     * read beats owed, no write burst short of beats, no response pending). */
    if (r->rd.count || r->aw.count || r->b.count)
        return tsr_err(TSR_EBACKEND,
                       "rtl: soft reset reported done with DRAM bursts still open: %d read, %d write awaiting data, "
                       "%d write responses",
                       r->rd.count, r->aw.count, r->b.count);
    if (r->prof)
        r->prof_next = 0; /* the abandoned run's profile ends */
    return TSR_OK;
}

uint64_t tsr_rtl_run_cycles(const tsr_rtl_t *r) { return r->cycle - r->run_start; }

void tsr_rtl_stats(const tsr_rtl_t *r, uint64_t *cycles, double *cpu_s)
{
    *cycles = r->stat_cycles;
    *cpu_s = r->stat_cpu;
}
