/*
 * tsr_sccal: calibration of the SystemC timed model against the RTL on
 * random programs of the differential generator (tsr_gen). Each program
 * runs on systemc, fsim and rtl (one device each, opened per program; per
 * block of 25 programs one pass per backend, so each simulator's speed is
 * measured over its own runs back to back); every output byte of systemc
 * must equal fsim's,
 * and the cycle error
 * (systemc - rtl) / rtl is collected. Prints one line per program with
 * --verbose, then: mean |error|, mean signed error, max, the distribution,
 * percentiles, the error by class (how busy the DRAM port is), the worst
 * programs with their shape (instructions, tensor ops, DRAM bytes) and
 * simulated cycles per second of both backends.
 *
 *   tsr_sccal [--count N] [--seed S] [--config PRESET|random|FILE] [--configs K]
 *             [--dram-latency N] [--dram-bw B] [--dram-outstanding N]
 *             [--random-dram] [--verbose]
 *
 * --max-err PCT fails the run (exit 1, naming the programs) when any
 * program's |error| is above PCT percent (the CTest tests sccal_*_rtl).
 *
 * Program i uses generator seed S + i (random configs cycle through seeds
 * S .. S+K-1 with --configs K: every new config is an RTL model build).
 * --only P runs the one program that a run with the same options prints
 * as "seed P" (S <= P < S + N), with the config and DRAM timing the whole
 * run draws for it: its cycles are that line's.
 * --random-dram draws the DRAM timing per program (latency 8..96, 2..16
 * bytes per cycle, 1..16 outstanding). --min-insns/--max-insns set the
 * generator's program length (default 24..140 instructions before the
 * closing sequence): long programs show each simulator's rate once its
 * code and data are in the caches. Exit status 1 on an output
 * mismatch or a run error.
 *
 * --rtl-cycles LOG takes the RTL's cycles from the --verbose output of an
 * earlier run with the same options (the RTL does not change when the
 * model does: iterating on the model then costs the model's time only);
 * programs not in LOG run on the RTL. --timeline PREFIX writes each
 * program's rtl and systemc timelines (PREFIX-SEED-BACKEND.json).
 * --counters adds to each --verbose line one "cnt seed S:" line with the
 * model's 16 hardware counters (tsr_cnt_e order): diffing those lines of
 * two builds shows whether a change to the model moved any cycle (a
 * speed-only change must leave them equal; a log whose seeds claim
 * "rtl 1" skips the RTL when only the model is compared).
 *
 *   tsr_sccal --jit-resnet18 [--rtl] [--config C]
 *
 * instead compares the JIT's tiling cost model (tsr_conv2d_plan's cost,
 * the estimate its tiling search minimises) with the systemc cycles (and
 * with --rtl the RTL's) for every convolution of ResNet-18
 * (tsr_netdesc_resnet18; conv1 planned as it is, not tap-packed).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr_config.h"
#include "tsr_conv2d.h"
#include "tsr_error.h"
#include "tsr_gen.h"
#include "tsr_netdesc.h"
#include "tsr_testenv.h"
#include "tsr_util.h"

typedef struct {
    uint64_t seed;   /* program seed */
    double err;      /* (systemc - rtl) / rtl */
    uint64_t rtl, sc;/* cycles */
    uint64_t ops;    /* GEMM + ALU ops */
    uint64_t bytes;  /* DRAM bytes (rtl counters) */
    size_t ninsns;   /* instructions */
    double util;     /* DRAM bytes per rtl cycle / bytes per cycle available */
    double bw;       /* DRAM bytes per cycle of the run (0: the backend's default, 8) */
    uint32_t lat, out; /* DRAM latency and outstanding bursts of the run (0: the backend's default) */
} sample_t;

/* Run p on a backend; outputs and counters back, wall seconds added to *t. */
static const char *tl_prefix; /* --timeline PREFIX: PREFIX-SEED-BACKEND.json per program */

static int run_on(const char *backend, const tsr_gen_prog_t *p, const tsr_rtl_opts_t *ro,
                  uint8_t *outs[TSR_GEN_MAX_BUFS], tsr_counters_t *ct, double *t)
{
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o;
    char tl[512];
    memset(&o, 0, sizeof o);
    o.rtl = *ro;
    if (tl_prefix && strcmp(backend, "fsim")) {
        snprintf(tl, sizeof tl, "%s-%" PRIu64 "-%s.json", tl_prefix, p->seed, backend);
        o.rtl.timeline_path = tl;
    }
    for (size_t i = 0; i < TSR_GEN_MAX_BUFS; i++)
        outs[i] = NULL;
    int rc = tsr_device_open(backend, &p->cfg, &o, &dev);
    if (rc)
        return rc;
    if ((rc = tsr_gen_load(dev, p)))
        goto out;
    /* (the simulation only: submit's verification is the driver's, the same on every backend) */
    if ((rc = tsr_submit(dev, p->insns, p->ninsns)))
        goto out;
    /* CPU time, not wall: the machine is shared, wall time would measure the
     * other jobs (single-threaded backends: CPU time is the simulation's cost). */
    double t0 = tsr_cpu_s();
    if ((rc = tsr_wait(dev, -1)))
        goto out;
    *t += tsr_cpu_s() - t0;
    if ((rc = tsr_read_counters(dev, ct)) || (rc = tsr_gen_read_outputs(dev, p, outs)))
        goto out;
out:
    tsr_device_close(dev);
    return rc;
}

static int jit_resnet18(const tsr_config_t *cfg, int with_rtl)
{
    tsr_netdesc_t nd;
    int rc = tsr_netdesc_resnet18(1, 1, &nd);
    if (rc) {
        fprintf(stderr, "tsr_sccal: %s\n", tsr_errmsg());
        return 1;
    }
    printf("ResNet-18 convolutions: the JIT's cost model (plan.cost) vs systemc%s cycles\n", with_rtl ? " and rtl" : "");
    printf("%-18s %-22s %10s %10s %8s%s\n", "layer", "shape", "jit_est", "systemc", "est/sc", with_rtl ? "        rtl  sc/rtl" : "");
    double se = 0, ss = 0, sr = 0, worst = 1, cpu_sc = 0, cpu_rt = 0;
    int n = 0;
    for (int i = 0; i < nd.nnodes && !rc; i++) {
        const tsr_nd_node_t *c = &nd.nodes[i];
        if (c->kind != TSR_ND_CONV)
            continue;
        double cost = 0, tsc = 0, trt = 0;
        uint64_t sc = 0, rt = 0;
        if ((rc = tsr_test_conv_cycles("systemc", cfg, &c->conv, c->w, c->bias, &cost, &sc, &tsc)) || (with_rtl && (rc = tsr_test_conv_cycles("rtl", cfg, &c->conv, c->w, c->bias, &cost, &rt, &trt)))) {
            fprintf(stderr, "tsr_sccal: %s: %s\n", c->name, tsr_errmsg());
            break;
        }
        char shape[64];
        snprintf(shape, sizeof shape, "%dx%d,%d->%d,%dx%d,s%d", c->conv.h, c->conv.w, c->conv.c_in, c->conv.c_out,
                 c->conv.kh, c->conv.kw, c->conv.stride_h);
        double ratio = sc ? cost / (double)sc : 0;
        printf("%-18s %-22s %10.0f %10" PRIu64 " %7.3fx", c->name, shape, cost, sc, ratio);
        if (with_rtl)
            printf(" %10" PRIu64 " %+6.2f%%", rt, rt ? 100.0 * ((double)sc - (double)rt) / (double)rt : 0);
        printf("\n");
        se += cost;
        cpu_sc += tsc;
        cpu_rt += trt;
        ss += (double)sc;
        sr += (double)rt;
        worst = fabs(ratio - 1) > fabs(worst - 1) ? ratio : worst;
        n++;
    }
    if (!rc && n)
        printf("total (%d convolutions): jit_est %.0f, systemc %.0f (est/sc %.3fx)%s; worst layer est/sc %.3fx\n", n, se,
               ss, ss > 0 ? se / ss : 0, with_rtl ? "" : "", worst);
    if (!rc && n && with_rtl)
        printf("systemc vs rtl over the convolutions: %+.2f%%; speed (CPU time of the runs): systemc %.0f cycles/s, "
               "rtl %.0f cycles/s (%.0fx)\n",
               100 * (ss - sr) / sr, ss / cpu_sc, sr / cpu_rt, (ss / cpu_sc) / (sr / cpu_rt));
    else if (!rc && n)
        printf("speed (CPU time of the runs): systemc %.0f cycles/s\n", ss / cpu_sc);
    tsr_netdesc_free(&nd);
    return rc ? 1 : 0;
}

/* RTL cycles per seed from a --verbose log ("seed S: rtl C systemc ..."). */
typedef struct {
    uint64_t seed, rtl;
} rtl_known_t;

static int load_rtl_log(const char *path, rtl_known_t **out, size_t *n)
{
    FILE *f = fopen(path, "r");
    char line[512];
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    if (!f) {
        fprintf(stderr, "tsr_sccal: cannot open %s\n", path);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        uint64_t sd, c;
        if (sscanf(line, "seed %" SCNu64 ": rtl %" SCNu64 " systemc", &sd, &c) != 2)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            rtl_known_t *p = realloc(*out, cap * sizeof *p);
            if (!p) {
                fclose(f);
                return -1;
            }
            *out = p;
        }
        (*out)[(*n)++] = (rtl_known_t){sd, c};
    }
    fclose(f);
    return 0;
}

static int rtl_lookup(const rtl_known_t *k, size_t n, uint64_t seed, uint64_t *cycles)
{
    for (size_t i = 0; i < n; i++)
        if (k[i].seed == seed) {
            *cycles = k[i].rtl;
            return 1;
        }
    return 0;
}

static int cmp_abs(const void *a, const void *b)
{
    double x = fabs(((const sample_t *)a)->err), y = fabs(((const sample_t *)b)->err);
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Simulated cycles and CPU seconds of the runs (speeds: cycles per second). */
typedef struct {
    uint64_t rtl_cyc, sc_cyc;
    double rtl_t, sc_t, fs_t;
} speeds_t;

/* The report over the kept samples s[0..n) (sorts s). */
static void summarize(sample_t *s, uint64_t n, uint64_t bad, uint64_t count, const char *config, const char *rtl_log,
                      uint64_t reused, const speeds_t *sp)
{
    double sum = 0, sabs = 0, mx = 0;
    static const double edges[] = {0.01, 0.02, 0.05, 0.10, 0.20};
    uint64_t hist[6] = {0};
    for (uint64_t i = 0; i < n; i++) {
        double e = fabs(s[i].err);
        sum += s[i].err;
        sabs += e;
        mx = e > mx ? e : mx;
        int b = 0;
        while (b < 5 && e >= edges[b])
            b++;
        hist[b]++;
    }
    printf("programs %" PRIu64 " (config %s), compared %" PRIu64 ", failed %" PRIu64 "\n", count, config, n, bad);
    if (reused)
        printf("rtl cycles of %" PRIu64 " programs from %s (not run; the rtl speed below is over the rest)\n", reused,
               rtl_log);
    if (n) {
        printf("cycle error systemc vs rtl: mean |err| %.2f%%, mean %+.2f%%, max |err| %.2f%%\n", 100 * sabs / n,
               100 * sum / n, 100 * mx);
        printf("distribution: <1%% %" PRIu64 ", 1-2%% %" PRIu64 ", 2-5%% %" PRIu64 ", 5-10%% %" PRIu64
               ", 10-20%% %" PRIu64 ", >=20%% %" PRIu64 "\n",
               hist[0], hist[1], hist[2], hist[3], hist[4], hist[5]);
        qsort(s, n, sizeof *s, cmp_abs);
        /* sorted by |err| descending: percentiles from the end */
        printf("percentiles of |err|: p50 %.2f%%, p90 %.2f%%, p99 %.2f%%\n", 100 * fabs(s[n - 1 - (n - 1) * 50 / 100].err),
               100 * fabs(s[n - 1 - (n - 1) * 90 / 100].err), 100 * fabs(s[n - 1 - (n - 1) * 99 / 100].err));
        /* classes: how busy the DRAM port is (RTL bytes per cycle over the
         * bandwidth): the model's DRAM approximations show where it is busy */
        static const double ub[] = {0.25, 0.5, 0.75, 1e9};
        static const char *const un[] = {"<25%", "25-50%", "50-75%", ">=75%"};
        for (int c = 0; c < 4; c++) {
            double cs = 0, cm = 0, cx = 0;
            uint64_t cn = 0;
            for (uint64_t i = 0; i < n; i++)
                if (s[i].util < ub[c] && (c == 0 || s[i].util >= ub[c - 1])) {
                    cn++;
                    cs += fabs(s[i].err);
                    cm += s[i].err;
                    cx = fabs(s[i].err) > cx ? fabs(s[i].err) : cx;
                }
            if (cn)
                printf("DRAM busy %-6s: %4" PRIu64 " programs, mean |err| %.2f%%, mean %+.2f%%, max %.2f%%\n", un[c], cn,
                       100 * cs / cn, 100 * cm / cn, 100 * cx);
        }
        printf("worst:\n");
        for (uint64_t i = 0; i < n && i < 8; i++)
            printf("  seed %" PRIu64 ": rtl %" PRIu64 " systemc %" PRIu64 " (%+.1f%%), %zu insns, %" PRIu64
                   " ops, %" PRIu64 " DRAM bytes (DRAM busy %.0f%%)\n",
                   s[i].seed, s[i].rtl, s[i].sc, 100 * s[i].err, s[i].ninsns, s[i].ops, s[i].bytes, 100 * s[i].util);
        double sc_speed = sp->sc_cyc / (sp->sc_t > 0 ? sp->sc_t : 1e-9);
        if (sp->rtl_t > 0)
            printf("speed (CPU time): rtl %.0f cycles/s, systemc %.0f cycles/s (%.0fx)\n", sp->rtl_cyc / sp->rtl_t, sc_speed,
                   sc_speed / (sp->rtl_cyc / sp->rtl_t));
        else
            printf("speed (CPU time): systemc %.0f cycles/s\n", sc_speed);
        /* The model computes its data with fsim's per-instruction code: fsim's
         * own rate over the same programs (their systemc cycles over fsim's
         * untimed run) bounds what any model that does so can reach. */
        if (sp->fs_t > 0)
            printf("fsim alone (the data path, no timing): %.0f systemc-cycles/s%s", sp->sc_cyc / sp->fs_t,
                   sp->rtl_t > 0 ? "" : "\n");
        if (sp->fs_t > 0 && sp->rtl_t > 0)
            printf(" (%.0fx the rtl)\n", (sp->sc_cyc / sp->fs_t) / (sp->rtl_cyc / sp->rtl_t));
    }
}

/* What the programs share: the config (or random configs), the DRAM options. */
static struct {
    tsr_config_t fixed;  /* the config unless random */
    int random_cfg;      /* random configs, cycling through nconf seeds from seed */
    uint64_t seed, nconf;
    int random_dram;     /* DRAM timing drawn per program */
    tsr_rtl_opts_t ro;   /* the DRAM timing otherwise */
    tsr_gen_opts_t go;   /* program length (--min-insns/--max-insns) */
} g;

/* Program i (seed ps): its config, DRAM options and stream; both passes
 * derive the same program from the seed. Prints why and returns -1 if it
 * cannot be made. */
static int prep(uint64_t ps, uint64_t i, tsr_gen_prog_t *p, tsr_rtl_opts_t *r)
{
    tsr_config_t cfg = g.fixed;
    char json[1024];
    if (g.random_cfg && (tsr_gen_random_config(g.nconf ? g.seed + i % g.nconf : ps, json, sizeof json) ||
                         tsr_config_parse(json, "random", &cfg))) {
        fprintf(stderr, "seed %" PRIu64 ": bad random config: %s\n", ps, tsr_errmsg());
        return -1;
    }
    *r = g.ro;
    if (g.random_dram) {
        uint64_t h = tsr_gen_mix(ps ^ 0xd7a3);
        r->dram_latency = 8 + (uint32_t)(h % 89);
        r->dram_bytes_per_cycle = (double)(2 + (h >> 8) % 15);
        r->dram_outstanding = 1 + (uint32_t)((h >> 16) % 16);
    }
    tsr_gen_opts_t go = g.go;
    if (tsr_gen_program(ps, &cfg, &go, p)) {
        fprintf(stderr, "seed %" PRIu64 ": %s\n", ps, tsr_errmsg());
        return -1;
    }
    return 0;
}

/* A whole decimal or 0x number, else a one-line error. */
static int parse_u64(const char *opt, const char *v, uint64_t *out)
{
    char *end;
    if (!*v || *v == '-' || (errno = 0, *out = strtoull(v, &end, 0), errno) || *end) {
        fprintf(stderr, "tsr_sccal: %s wants a non-negative integer, got '%s'\n", opt, v);
        return -1;
    }
    return 0;
}

/* --merge: the report over the --samples outputs of a run's shards (psoak.py
 * --tool sccal), as one run over all their programs would print it (the
 * speeds: the shards' cycles over their summed CPU time). */
static int merge(int nfiles, char **files)
{
    sample_t *s = NULL;
    size_t n = 0, cap = 0;
    uint64_t count = 0, bad = 0, reused = 0;
    speeds_t sp = {0, 0, 0, 0, 0};
    char config[512] = "";
    int rc = 0;
    for (int k = 0; k < nfiles && !rc; k++) {
        FILE *f = fopen(files[k], "r");
        char line[512];
        int summary = 0;
        if (!f) {
            fprintf(stderr, "tsr_sccal --merge: cannot open %s\n", files[k]);
            rc = 2;
            break;
        }
        while (fgets(line, sizeof line, f)) {
            sample_t x;
            speeds_t t;
            uint64_t c, b, r;
            memset(&x, 0, sizeof x);
            if (sscanf(line, "sample %" SCNu64 " %" SCNu64 " %" SCNu64 " %zu %" SCNu64 " %" SCNu64 " %lg %u %u", &x.seed,
                       &x.rtl, &x.sc, &x.ninsns, &x.ops, &x.bytes, &x.bw, &x.lat, &x.out) == 9) {
                if (n == cap) {
                    cap = cap ? 2 * cap : 256;
                    sample_t *p = realloc(s, cap * sizeof *p);
                    if (!p) {
                        fprintf(stderr, "tsr_sccal --merge: out of memory\n");
                        rc = 2;
                        break;
                    }
                    s = p;
                }
                x.err = x.rtl ? ((double)x.sc - (double)x.rtl) / (double)x.rtl : 0;
                x.util = x.rtl ? (double)x.bytes / (double)x.rtl / (x.bw > 0 ? x.bw : 8) : 0;
                s[n++] = x;
            } else if (sscanf(line, "speeds %" SCNu64 " %" SCNu64 " %lg %lg %lg", &t.rtl_cyc, &t.sc_cyc, &t.rtl_t,
                              &t.sc_t, &t.fs_t) == 5) {
                sp.rtl_cyc += t.rtl_cyc, sp.sc_cyc += t.sc_cyc;
                sp.rtl_t += t.rtl_t, sp.sc_t += t.sc_t, sp.fs_t += t.fs_t;
            } else if (sscanf(line, "programs %" SCNu64 " failed %" SCNu64 " reused %" SCNu64, &c, &b, &r) == 3) {
                count += c, bad += b, reused += r;
                summary = 1;
            } else if (!strncmp(line, "config ", 7) && !config[0]) {
                snprintf(config, sizeof config, "%s", line + 7);
                config[strcspn(config, "\n")] = 0;
            } else if (strncmp(line, "seed ", 5) == 0) {
                fputs(line, stdout); /* a failed program's line */
            }
        }
        fclose(f);
        if (!rc && !summary) { /* a shard that died: its programs are not in the report */
            fprintf(stderr, "tsr_sccal --merge: %s has no summary line (the shard did not finish)\n", files[k]);
            rc = 2;
        }
    }
    if (!rc)
        summarize(s, n, bad, count, config[0] ? config : "?", "the shards' logs", reused, &sp);
    free(s);
    return rc ? rc : bad ? 1 : 0;
}

/* --only P: the run's program printed as seed P is program i = P - seed,
 * run as the one program of shard i of count shards (prep draws its config
 * and DRAM timing from i and P, as the whole run does). */
static int only_program(uint64_t p, uint64_t seed, uint64_t count, uint64_t shard_n, uint64_t *si, uint64_t *sn)
{
    if (shard_n != 1) {
        fprintf(stderr, "tsr_sccal: --only and --shard do not go together\n");
        return -1;
    }
    if (!count) {
        fprintf(stderr, "tsr_sccal: --only %" PRIu64 ": the run has no programs (--count 0)\n", p);
        return -1;
    }
    if (p < seed || p - seed >= count) {
        fprintf(stderr,
                "tsr_sccal: --only %" PRIu64 " is not a program of this run (seeds %" PRIu64 " .. %" PRIu64
                " with --seed %" PRIu64 " --count %" PRIu64 ")\n",
                p, seed, seed + count - 1, seed, count);
        return -1;
    }
    *si = p - seed;
    *sn = count;
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t count = 100, seed = 1, nconf = 2;
    const char *config = "default";
    int verbose = 0, random_dram = 0, jit = 0, with_rtl = 0, counters = 0;
    double max_err = -1; /* --max-err PCT: every program's |err| at most this (else exit 1) */
    const char *rtl_log = NULL;
    uint64_t shard_i = 0, shard_n = 1, only = 0;
    int only_set = 0;
    int samples = 0, merge_at = 0;
    rtl_known_t *known = NULL;
    size_t nknown = 0;
    tsr_rtl_opts_t ro;
    memset(&ro, 0, sizeof ro);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--count") && v) {
            if (parse_u64(a, argv[++i], &count))
                return 2;
        } else if (!strcmp(a, "--seed") && v) {
            if (parse_u64(a, argv[++i], &seed))
                return 2;
        } else if (!strcmp(a, "--shard") && v) {
            if (sscanf(argv[++i], "%" SCNu64 "/%" SCNu64, &shard_i, &shard_n) != 2 || strchr(argv[i], '-') ||
                shard_n < 1 || shard_i >= shard_n) {
                fprintf(stderr, "tsr_sccal: --shard wants I/N with 0 <= I < N, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--only") && v) {
            if (parse_u64(a, argv[++i], &only))
                return 2;
            only_set = 1;
        } else if (!strcmp(a, "--samples")) {
            samples = 1;
        } else if (!strcmp(a, "--merge") && v) {
            merge_at = i + 1; /* the rest of the line: the shards' --samples outputs */
            break;
        }
        else if (!strcmp(a, "--config") && v)
            config = argv[++i];
        else if (!strcmp(a, "--configs") && v)
            nconf = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(a, "--dram-latency") && v)
            ro.dram_latency = (uint32_t)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(a, "--dram-bw") && v)
            ro.dram_bytes_per_cycle = strtod(argv[++i], NULL);
        else if (!strcmp(a, "--dram-outstanding") && v)
            ro.dram_outstanding = (uint32_t)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(a, "--min-insns") && v)
            g.go.min_insns = (uint32_t)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(a, "--max-insns") && v)
            g.go.max_insns = (uint32_t)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(a, "--random-dram"))
            random_dram = 1;
        else if (!strcmp(a, "--verbose"))
            verbose = 1;
        else if (!strcmp(a, "--counters"))
            counters = 1;
        else if (!strcmp(a, "--jit-resnet18"))
            jit = 1;
        else if (!strcmp(a, "--rtl"))
            with_rtl = 1;
        else if (!strcmp(a, "--max-err") && v) {
            char *end;
            errno = 0;
            max_err = strtod(argv[++i], &end);
            if (end == argv[i] || *end || errno || !(max_err >= 0 && max_err < 1e6)) {
                fprintf(stderr, "tsr_sccal: --max-err wants a percentage >= 0, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--rtl-cycles") && v)
            rtl_log = argv[++i];
        else if (!strcmp(a, "--timeline") && v)
            tl_prefix = argv[++i];
        else {
            fprintf(stderr, "usage: tsr_sccal [--count N] [--seed S] [--config PRESET|random|FILE] [--configs K]\n"
                            "                 [--dram-latency N] [--dram-bw B] [--dram-outstanding N] [--random-dram]\n"
                            "                 [--verbose [--counters]] [--rtl-cycles LOG] [--timeline PREFIX] [--max-err PCT]\n"
                            "                 [--min-insns N] [--max-insns N] [--shard I/N --samples] [--only SEED]\n"
                            "       tsr_sccal --merge SAMPLES...   (the report over shards' --samples outputs)\n"
                            "       tsr_sccal --jit-resnet18 [--rtl] [--config C]\n");
            return 2;
        }
    }
    if (merge_at)
        return merge(argc - merge_at, argv + merge_at);
    g.random_cfg = !strcmp(config, "random");
    g.seed = seed, g.nconf = nconf, g.random_dram = random_dram, g.ro = ro;
    tsr_config_t fixed;
    memset(&fixed, 0, sizeof fixed); /* (random configs: unused) */
    if (!g.random_cfg && tsr_config_load(config, &fixed)) {
        fprintf(stderr, "tsr_sccal: %s\n", tsr_errmsg());
        return 2;
    }
    g.fixed = fixed;
    if (jit)
        return jit_resnet18(&fixed, with_rtl);
    if (only_set && only_program(only, seed, count, shard_n, &shard_i, &shard_n))
        return 2;
    if (rtl_log && load_rtl_log(rtl_log, &known, &nknown))
        return 2;
    /* this shard's programs: i = shard_i + j * shard_n (all of them without --shard) */
    const uint64_t shard_programs = count > shard_i ? (count - shard_i - 1) / shard_n + 1 : 0;
    sample_t *s = calloc(shard_programs ? shard_programs : 1, sizeof *s);
    uint64_t *cnt = counters ? calloc(shard_programs ? shard_programs : 1, sizeof(uint64_t) * TSR_CNT_COUNT) : NULL;
    if (!s || (counters && !cnt)) {
        fprintf(stderr, "tsr_sccal: out of memory for %" PRIu64 " programs\n", count);
        return 2;
    }
    uint64_t n = 0, bad = 0, rtl_cyc = 0, sc_cyc = 0, reused = 0;
    double rtl_t = 0, sc_t = 0, fs_t = 0;
    /* Per block of programs, three passes: systemc on each program of the
     * block, then fsim (every output byte compared), then the RTL. Each
     * simulator's runs are back to back, so each is timed with its own
     * code and data in the caches; interleaving a Verilated model between
     * two model runs evicted them (tiny: the model's cycles/s fell from
     * 26 M to 15-18 M), which measured the mix, not either simulator. Short
     * blocks keep both simulators' runs close in time, so the load of a
     * shared machine weighs on both alike. */
    enum { BLOCK = 25 };
    uint8_t *souts[BLOCK][TSR_GEN_MAX_BUFS];
    for (uint64_t b0 = 0; b0 < shard_programs; b0 += BLOCK) {
        const uint64_t b1 = b0 + BLOCK < shard_programs ? b0 + BLOCK : shard_programs, n0 = n;
        /* pass 1: systemc; its outputs kept for pass 2 (souts[k - n0]) */
        for (uint64_t j = b0; j < b1; j++) {
            const uint64_t i = shard_i + j * shard_n, ps = seed + i;
            tsr_gen_prog_t p;
            tsr_rtl_opts_t r;
            if (prep(ps, i, &p, &r)) {
                bad++;
                continue;
            }
            tsr_counters_t cs;
            if (run_on("systemc", &p, &r, souts[n - n0], &cs, &sc_t)) {
                printf("seed %" PRIu64 ": systemc run failed: %s\n", ps, tsr_errmsg());
                tsr_gen_outputs_free(souts[n - n0]);
                bad++;
            } else {
                sample_t *x = &s[n];
                memset(x, 0, sizeof *x);
                x->seed = ps;
                x->sc = cs.cycles;
                /* (DRAM bytes and op counts are the same on every backend: the RTL pass overwrites them) */
                x->ops = cs.gemm_ops + cs.gemm_reset_ops + cs.alu_ops;
                x->bytes = cs.hw[TSR_CNT_DRAM_RD_BYTES] + cs.hw[TSR_CNT_DRAM_WR_BYTES];
                x->ninsns = p.ninsns;
                x->bw = r.dram_bytes_per_cycle;
                x->lat = r.dram_latency, x->out = r.dram_outstanding;
                if (cnt)
                    memcpy(cnt + n * TSR_CNT_COUNT, cs.hw, sizeof cs.hw);
                n++;
            }
            tsr_gen_free(&p);
        }
        /* passes 2 and 3: fsim and the RTL; a program that fails in either
         * leaves the sample set */
        uint64_t kept = n0;
        for (uint64_t k = n0; k < n; k++) {
            sample_t *x = &s[k];
            tsr_gen_prog_t p;
            tsr_rtl_opts_t r;
            int ok = 0;
            if (!prep(x->seed, x->seed - seed, &p, &r)) {
                uint8_t *of[TSR_GEN_MAX_BUFS] = {NULL};
                tsr_counters_t cf;
                tsr_gen_diff_t d;
                if (run_on("fsim", &p, &r, of, &cf, &fs_t))
                    printf("seed %" PRIu64 ": fsim run failed: %s\n", x->seed, tsr_errmsg());
                else if (tsr_gen_compare(&p, of, souts[k - n0], &d))
                    printf("seed %" PRIu64 ": systemc output differs from fsim: %s byte %" PRIu64 " (%u vs %u), %" PRIu64
                           " bytes\n",
                           x->seed, p.bufs[d.buf].name, d.offset, d.a, d.b, d.nbytes);
                else
                    ok = 1;
                tsr_gen_outputs_free(of);
                tsr_gen_free(&p);
            }
            tsr_gen_outputs_free(souts[k - n0]);
            if (!ok) {
                bad++;
                x->seed = UINT64_MAX; /* (dropped below) */
            }
        }
        for (uint64_t k = n0; k < n; k++) {
            sample_t *x = &s[k];
            if (x->seed == UINT64_MAX)
                continue;
            uint64_t known_cyc = 0;
            int from_log = rtl_lookup(known, nknown, x->seed, &known_cyc);
            if (from_log) { /* the RTL's cycles from the log */
                x->rtl = known_cyc;
                reused++;
            } else {
                tsr_gen_prog_t p;
                tsr_rtl_opts_t r;
                uint8_t *orr[TSR_GEN_MAX_BUFS] = {NULL};
                tsr_counters_t cr;
                int rc = prep(x->seed, x->seed - seed, &p, &r);
                if (!rc) {
                    rc = run_on("rtl", &p, &r, orr, &cr, &rtl_t);
                    tsr_gen_outputs_free(orr);
                    tsr_gen_free(&p);
                }
                if (rc) {
                    printf("seed %" PRIu64 ": rtl run failed: %s\n", x->seed, tsr_errmsg());
                    bad++;
                    continue;
                }
                x->rtl = cr.cycles;
                x->ops = cr.gemm_ops + cr.gemm_reset_ops + cr.alu_ops;
                x->bytes = cr.hw[TSR_CNT_DRAM_RD_BYTES] + cr.hw[TSR_CNT_DRAM_WR_BYTES];
                rtl_cyc += cr.cycles;
            }
            x->err = x->rtl ? ((double)x->sc - (double)x->rtl) / (double)x->rtl : 0;
            x->util = x->rtl ? (double)x->bytes / (double)x->rtl / (x->bw > 0 ? x->bw : 8) : 0;
            if (verbose)
                printf("seed %" PRIu64 ": rtl %" PRIu64 " systemc %" PRIu64 " err %+.2f%% (lat %u bw %.0f out %u)\n",
                       x->seed, x->rtl, x->sc, 100 * x->err, x->lat, x->bw, x->out);
            if (verbose && cnt) {
                printf("cnt seed %" PRIu64 ":", x->seed);
                for (int c = 0; c < TSR_CNT_COUNT; c++)
                    printf(" %" PRIu64, cnt[k * TSR_CNT_COUNT + c]);
                printf("\n");
            }
            sc_cyc += x->sc;
            if (cnt && kept != k)
                memcpy(cnt + kept * TSR_CNT_COUNT, cnt + k * TSR_CNT_COUNT, sizeof(uint64_t) * TSR_CNT_COUNT);
            s[kept++] = *x;
        }
        n = kept;
    }
    speeds_t sp = {rtl_cyc, sc_cyc, rtl_t, sc_t, fs_t};
    if (samples) { /* for --merge: every kept sample, the speeds and the failures */
        for (uint64_t i = 0; i < n; i++)
            printf("sample %" PRIu64 " %" PRIu64 " %" PRIu64 " %zu %" PRIu64 " %" PRIu64 " %.17g %u %u\n", s[i].seed,
                   s[i].rtl, s[i].sc, s[i].ninsns, s[i].ops, s[i].bytes, s[i].bw, s[i].lat, s[i].out);
        printf("speeds %" PRIu64 " %" PRIu64 " %.17g %.17g %.17g\n", sp.rtl_cyc, sp.sc_cyc, sp.rtl_t, sp.sc_t, sp.fs_t);
        printf("config %s\n", config);
        printf("programs %" PRIu64 " failed %" PRIu64 " reused %" PRIu64 "\n", shard_programs, bad, reused);
    } else {
        summarize(s, n, bad, only_set ? 1 : count, config, rtl_log, reused, &sp);
    }
    if (max_err >= 0) {
        /* the bound is per program: one program past it fails the run */
        uint64_t over = 0;
        for (uint64_t i = 0; i < n; i++)
            if (100 * fabs(s[i].err) > max_err) {
                printf("tsr_sccal: seed %" PRIu64 ": |err| %.2f%% above --max-err %.2f%%\n", s[i].seed,
                       100 * fabs(s[i].err), max_err);
                over++;
            }
        if (!n)
            printf("tsr_sccal: --max-err: no program compared\n");
        else if (over)
            printf("tsr_sccal: %" PRIu64 " of %" PRIu64 " programs above --max-err %.2f%%\n", over, n, max_err);
        if (over || !n)
            bad++;
    }
    free(s);
    free(cnt);
    free(known);
    return bad ? 1 : 0;
}
