/* tsr_cli_bench: `tessera bench` (tsr_cli_bench.h). The measurements are
 * the library's (jit/tsr_mmbench.h, jit/tsr_netbench.h); this file parses
 * the flags and prints the tables, whose format scripts and tests parse. */
#include "tsr_cli_bench.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_cli_common.h"
#include "tsr_cli_firstexec.h"
#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_sampled.h"
#include "tsr_kcache.h"
#include "tsr_mmbench.h"
#include "tsr_netbench.h"
#include "tsr_util.h"

static const char *bench_help =
    "usage: tessera bench [--config CONFIG] [--backend NAME] [--kind matmul|gemm|resnet18|mbv2-dw|first-exec]\n"
    "                     [-m M] [-k K] [-n N] [--reps R]\n"
    "\n"
    "  --kind matmul  (default) the JIT's tiled, double-buffered int8 matmul\n"
    "                 (default 1024 x 1024 x 1024; DRAM traffic included)\n"
    "  --kind gemm    GEMM-bound: a first run loads the operands, a second run\n"
    "                 issues R GEMM instructions of K/BLOCK_IN-long reductions\n"
    "                 over the on-chip tile (default -m 256 -k 1024 -n 128\n"
    "                 --reps 8, clipped to the buffers); its cycles measure the\n"
    "                 GEMM core against 1 tensor op per cycle\n"
    "Prints instructions, tensor ops and MACs per second (wall and CPU time);\n"
    "on a timed backend (rtl) also cycles, tensor ops per cycle, MAC\n"
    "utilisation and simulated cycles per second.\n"
    "  --kind resnet18  the ResNet-18 convolution table (cycles, utilisation,\n"
    "                 roofline, DRAM bytes, JIT time per layer); its options:\n"
    "                 `tessera bench --kind resnet18 --help`\n"
    "  --kind mbv2-dw   MobileNetV2's depthwise convs without and with the GEMM\n"
    "                 depthwise mode against their compulsory-bytes bound:\n"
    "                 `tessera bench --kind mbv2-dw --help`\n"
    "  --kind first-exec  a network's first execution, timing-only SystemC vs fsim\n"
    "                 in CPU time, each in a fresh process:\n"
    "                 `tessera bench --kind first-exec --help`\n" TSR_CLI_DEVICE_OPTIONS_HELP;

/* ------------------------------------------------------------ gemm */

static int bench_gemm(const tsr_cli_mm_opts_t *mo)
{
    tsr_mmbench_opts_t o = {mo->b.cfgname, mo->b.backend, &tsr_cli_devopts, (int)mo->m, (int)mo->k, (int)mo->n,
                            (int)mo->shift, mo->reps, mo->b.seed};
    tsr_mmbench_gemm_t g;
    int rc = tsr_mmbench_gemm(&o, &g);
    if (rc)
        return tsr_cli_fail(rc);
    const tsr_counters_t *ctr = &g.ctr;
    printf("bench: GEMM-bound, tile %ld x %ld blocks, reduction %ld, %ld GEMM instructions, config %s, backend %s\n",
           g.tm, g.tn, g.kb, mo->reps, mo->b.cfgname, mo->b.backend);
    printf("  gemm tensor ops    %llu\n", (unsigned long long)ctr->gemm_ops);
    printf("  MACs               %llu\n", (unsigned long long)ctr->macs);
    printf("  wall / CPU time    %.3f s / %.3f s (GEMM run)\n", g.secs, g.cpu_s);
    printf("  tensor ops/s       %.3e (simulator speed, per CPU second)\n", ctr->gemm_ops / g.cpu_s);
    if (ctr->cycles) {
        uint64_t busy = ctr->has_hw ? ctr->hw[TSR_CNT_COMPUTE_BUSY] : ctr->cycles;
        printf("  load run           %llu cycles (%.3f s)\n", (unsigned long long)g.load.cycles, g.load_s);
        printf("  GEMM run           %llu cycles (compute busy %llu)\n", (unsigned long long)ctr->cycles,
               (unsigned long long)busy);
        printf("  tensor ops/cycle   %.4f of 1 (GEMM run, data on chip, incl. fetch and drain)\n",
               (double)ctr->gemm_ops / (double)ctr->cycles);
        printf("  simulated cycles/s %.3e per CPU second (%.3e per wall second)\n", ctr->cycles / g.cpu_s,
               ctr->cycles / g.secs);
    }
    return 0;
}

/* ------------------------------------------------------------ matmul */

static void print_matmul(const tsr_cli_mm_opts_t *mo, const tsr_mmbench_result_t *r)
{
    const tsr_counters_t *ctr = &r->ctr;
    double secs = r->secs;
    uint64_t insns = 0;
    for (int i = 0; i < TSR_OP_COUNT; i++)
        insns += ctr->insns[i];
    printf("bench: matmul %ldx%ldx%ld, config %s, backend %s\n", mo->m, mo->k, mo->n, mo->b.cfgname, mo->b.backend);
    printf("  instructions       %llu\n", (unsigned long long)insns);
    printf("  gemm tensor ops    %llu\n", (unsigned long long)ctr->gemm_ops);
    printf("  alu tensor ops     %llu\n", (unsigned long long)ctr->alu_ops);
    printf("  MACs               %llu\n", (unsigned long long)ctr->macs);
    printf("  DRAM bytes         %llu loaded, %llu stored\n",
           (unsigned long long)(ctr->bytes_loaded[TSR_MEM_INP] + ctr->bytes_loaded[TSR_MEM_WGT] +
                                ctr->bytes_loaded[TSR_MEM_UOP]),
           (unsigned long long)ctr->bytes_stored);
    printf("  wall time          %.3f s\n", secs);
    printf("  tensor ops/s       %.3e\n", ctr->gemm_ops / secs);
    printf("  MACs/s             %.3e\n", ctr->macs / secs);
    printf("  instructions/s     %.3e\n", insns / secs);
    if (!ctr->cycles)
        return;
    printf("  cycles             %llu\n", (unsigned long long)ctr->cycles);
    printf("  MAC utilisation    %.1f%% (MACs / (cycles x %llu))\n",
           100.0 * (double)ctr->macs / ((double)ctr->cycles * (double)r->macs_per_op),
           (unsigned long long)r->macs_per_op);
    printf("  simulated cycles/s %.3e\n", ctr->cycles / secs);
    if (ctr->has_hw)
        for (int k = 0; k < TSR_CNT_COUNT; k++)
            printf("  hw %-16s %llu\n", tsr_cnt_name(k), (unsigned long long)ctr->hw[k]);
}

static int bench_matmul(const tsr_cli_mm_opts_t *mo)
{
    size_t m = (size_t)mo->m, k = (size_t)mo->k, n = (size_t)mo->n;
    int8_t *a = malloc(m * k), *b = malloc(k * n), *c = malloc(m * n);
    tsr_mmbench_opts_t o = {mo->b.cfgname, mo->b.backend, &tsr_cli_devopts, (int)m, (int)k, (int)n, (int)mo->shift,
                            0, 0};
    tsr_mmbench_result_t r;
    int rc = !a || !b || !c ? tsr_err(TSR_ENOMEM, "out of memory") : TSR_OK;
    if (!rc) {
        tsr_mmbench_random(mo->b.seed, a, m * k, b, k * n);
        rc = tsr_mmbench_matmul(&o, a, b, c, &r);
    }
    if (!rc)
        print_matmul(mo, &r);
    free(a);
    free(b);
    free(c);
    return rc ? tsr_cli_fail(rc) : 0;
}

/* ------------------------------------------------ --kind resnet18 */

static const char *bench_rn_help =
    "usage: tessera bench --kind resnet18 [--layers C2,C5] [--config CONFIG]\n"
    "                     [--backend NAME] [--check] [--seed N] [--no-jit-cache]\n"
    "                     [--no-tappack] [device options]\n"
    "\n"
    "Run the convolution layers of ResNet-18 (batch 1, int8 activations with\n"
    "zero point -128, int8 weights, int32 bias, per-channel requantization,\n"
    "ReLU) through tsr_conv2d on the device and print one row per layer:\n"
    "  C1 224x224 3->64 7x7 p3 s2    C2 56x56 64->64 3x3 p1 s1\n"
    "  C3 56x56 64->128 3x3 p1 s2    C4 56x56 64->128 1x1 p0 s2\n"
    "  C5 28x28 128->128 3x3 p1 s1   C6 28x28 128->256 3x3 p1 s2\n"
    "  C7 28x28 128->256 1x1 p0 s2   C8 14x14 256->256 3x3 p1 s1\n"
    "  C9 14x14 256->512 3x3 p1 s2   C10 14x14 256->512 1x1 p0 s2\n"
    "  C11 7x7 512->512 3x3 p1 s1    (input H x W, C_in -> C_out, kernel, pad, stride)\n"
    "\n"
    "  --layers LIST     comma-separated subset, e.g. C2,C5 (default: all)\n"
    "  --config CONFIG   config file or preset (default: default)\n"
    "  --backend NAME    fsim, rtl (default: the headline; fsim is untimed) or\n"
    "                    systemc (timed model, cycles close to rtl, ~1000x faster)\n"
    "  --check           also run every layer on fsim (random stage interleaving)\n"
    "                    and compare the output bytes exactly; a difference is\n"
    "                    reported (first differing element) and the exit status is 1\n"
    "  --seed N          random data seed (default 1)\n"
    "  --no-jit-cache    plan without the kernel cache (JIT ms = full generation)\n"
    "  --no-tappack      run C1 as the original 3-channel 7x7 conv (default: the\n"
    "                    exact tap-packed rewrite, jit/tsr_tappack.h: 21 channels,\n"
    "                    7x1 kernel over an input the host packs outside the\n"
    "                    device cycles; MACs, bound and compulsory bytes stay\n"
    "                    the original layer's; --check compares with fsim of the\n"
    "                    original conv)\n"
    "\n"
    "Columns: MACs of the layer (real tensor sizes, no padding); cycles (device\n"
    "counter); util = MACs / (cycles x peak), peak = BATCH x BLOCK_IN x BLOCK_OUT\n"
    "MACs per cycle; bound = roofline cycles = max(MACs / peak, compulsory /\n"
    "DRAM bytes per cycle); ratio = bound / cycles; limit = which term binds;\n"
    "moved = DRAM bytes the device moved (rtl: AXI read + write counters,\n"
    "instruction fetch included; fsim: LOAD + STORE + fetch bytes); compulsory\n"
    "= input + weights + 4-byte bias + output bytes, each moved once (real\n"
    "sizes, no padding); ratio_rd = the ratio with a stricter bound that leaves\n"
    "out input bytes no window reads (the rows and columns a strided 1x1 kernel\n"
    "skips: three quarters of its input; ratio can pass 1 there); JIT ms = plan\n"
    "time and jit =\n"
    "how the kernel was obtained (miss: generated, hit: device cache, disk:\n"
    "on-disk kernel cache, off: no cache); check = ok / DIFF / -. The on-disk\n"
    "cache is $TESSERA_JIT_CACHE_DIR, else $TESSERA_CACHE/jit, else\n"
    "~/.cache/tessera/jit (TESSERA_JIT_CACHE=off disables it, =mem keeps\n"
    "kernels in memory only).\n"
    "DRAM bytes per cycle is --dram-bw (8 by default, the 64-bit port), at most\n"
    "twice the bus width in bytes (one read and one write beat per cycle). Then a\n"
    "total line, the wall time of the whole table and the kernel cache counters.\n"
    TSR_CLI_DEVICE_OPTIONS_HELP;

typedef struct {
    tsr_lbench_opts_t lo;
    int sel[TSR_RN18_LAYERS]; /* 1 = run this layer */
} rn_opts_t;

/* --layers LIST: 0, or -1 (usage error printed). */
static int rn_layers(const char *arg, rn_opts_t *o)
{
    char buf[256];
    int any = 0;
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        int k = tsr_rn18_layer_find(t);
        if (k < 0) {
            fprintf(stderr, "%s bench: unknown layer \"%s\" (C1..C11)\n", TSR_CLI_PROG, t);
            return tsr_cli_usage("bench", "bad --layers"), -1;
        }
        o->sel[k] = 1;
        any = 1;
    }
    if (!any)
        return tsr_cli_usage("bench", "--layers needs at least one of C1..C11"), -1;
    return 0;
}

/* 0, or -1 (usage error printed) / -2 (help printed). */
static int rn_parse(int argc, char **argv, rn_opts_t *o)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"backend", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 's'},   {"kind", required_argument, 0, 'K'},
        {"layers", required_argument, 0, 'L'}, {"check", no_argument, 0, 'C'},
        {"no-jit-cache", no_argument, 0, 'N'}, {"help", no_argument, 0, 'h'},
        {"no-tappack", no_argument, 0, 'T'},
        TSR_CLI_DEVICE_LONG_OPTIONS,           {0, 0, 0, 0}};
    tsr_cli_base_t b = {o->lo.cfgname, o->lo.backend, o->lo.seed};
    int c, any = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:b:s:h", opts, NULL)) != -1) {
        int r = tsr_cli_base_option("bench", c, optarg, &b);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        switch (c) {
        case 'K':
            if (strcmp(optarg, "resnet18"))
                return tsr_cli_usage("bench", "--kind is matmul, gemm or resnet18"), -1;
            break;
        case 'C': o->lo.check = 1; break;
        case 'N': o->lo.no_cache = 1; break;
        case 'T': o->lo.tappack = 0; break;
        case 'L':
            if (rn_layers(optarg, o))
                return -1;
            any = 1;
            break;
        case 'h': fputs(bench_rn_help, stdout); return -2;
        default: return tsr_cli_usage("bench", "bad option"), -1;
        }
    }
    if (optind != argc)
        return tsr_cli_usage("bench", "unexpected argument"), -1;
    for (int i = 0; !any && i < TSR_RN18_LAYERS; i++)
        o->sel[i] = 1;
    o->lo.cfgname = b.cfgname;
    o->lo.backend = b.backend;
    o->lo.seed = b.seed;
    return 0;
}

#define RN_ROW "%-5s %-26s %11.0f %11s %6s %11.0f %6s %8s %-7s %11.0f %11.0f %8.2f %-4s %s\n"

static void rn_header(const tsr_lbench_t *b, const rn_opts_t *o)
{
    printf("bench: ResNet-18 convolutions, batch 1, int8, per-channel requantization; config %s (%dx%dx%d, peak %.0f "
           "MACs/cycle), backend %s, DRAM %.4g B/cycle, seed %llu%s\n",
           o->lo.cfgname, b->cfg.batch, b->cfg.block_in, b->cfg.block_out, b->peak, o->lo.backend, b->bw,
           (unsigned long long)o->lo.seed, o->lo.check ? ", checked against fsim" : "");
    printf("%-5s %-26s %11s %11s %6s %11s %6s %8s %-7s %11s %11s %8s %-4s %s\n", "layer", "shape", "MACs", "cycles",
           "util", "bound", "ratio", "ratio_rd", "limit", "moved", "compulsory", "JIT_ms", "jit", "check");
    fflush(stdout);
}

/* cycles, util, ratio, ratio_rd as printed: numbers when timed, else "-". */
typedef struct {
    char cyc[32], util[16], ratio[16], ratio_rd[16];
} rn_cells_t;

static void rn_cells(int timed, double cycles, double util, double ratio, double ratio_rd, rn_cells_t *c)
{
    if (!timed) {
        *c = (rn_cells_t){"-", "-", "-", "-"};
        return;
    }
    snprintf(c->cyc, sizeof c->cyc, "%.0f", cycles);
    snprintf(c->util, sizeof c->util, "%.3f", util);
    snprintf(c->ratio, sizeof c->ratio, "%.3f", ratio);
    snprintf(c->ratio_rd, sizeof c->ratio_rd, "%.3f", ratio_rd);
}

static void rn_row(const tsr_lbench_row_t *r, const char *backend)
{
    const tsr_rn18_layer_t *L = r->layer;
    static const char *kcn[] = {"off", "miss", "hit", "disk"};
    char shape[64];
    rn_cells_t c;
    if (r->differs)
        fprintf(stderr, "%s: output differs from fsim at [0][%d][%d][%d] (flat %zu of %zu): %s %d, fsim %d\n", L->name,
                r->diff_c, r->diff_y, r->diff_x, r->diff_flat, r->diff_n, backend, r->diff_dev, r->diff_ref);
    snprintf(shape, sizeof shape, "%dx%d,%d->%d,%dx%d,s%d,p%d", L->hw, L->hw, L->cin, L->cout, L->k, L->k, L->stride,
             L->pad);
    rn_cells(r->timed, r->cycles, r->util, r->ratio, r->ratio_rd, &c);
    printf(RN_ROW, L->name, shape, r->macs, c.cyc, c.util, r->bound, c.ratio, c.ratio_rd,
           r->memory_bound ? "memory" : "compute", r->moved, r->compulsory, r->jit_ms,
           r->kcache >= 0 && r->kcache < 4 ? kcn[r->kcache] : "?", !r->checked ? "-" : r->differs ? "DIFF" : "ok");
    fflush(stdout);
}

/* The tap-packing note of a row (appended to notes, printed after the table). */
static void rn_note(const tsr_lbench_row_t *r, char *notes, size_t size, size_t *len)
{
    const tsr_conv2d_params_t *tp = &r->tp;
    if (!r->tappacked || *len >= size)
        return;
    *len += (size_t)snprintf(notes + *len, size - *len,
                             "%s: tap-packed (jit/tsr_tappack.h): conv %d->%d %dx%d s%dx%d over the host-packed input "
                             "[%d,%d,%d,%d] (%llu bytes, packing %.2f ms on the host, not in the cycles); --no-tappack "
                             "runs the original\n",
                             r->layer->name, tp->c_in, tp->c_out, tp->kh, tp->kw, tp->stride_h, tp->stride_w, tp->n,
                             tp->c_in, tp->h, tp->w, (unsigned long long)r->tp_bytes, r->tp_ms);
}

static void rn_total(const tsr_lbench_t *b, const tsr_lbench_total_t *t, double t_start)
{
    rn_cells_t c;
    rn_cells(t->timed && t->cycles > 0, t->cycles, t->util, t->ratio, t->ratio_rd, &c);
    printf(RN_ROW, "total", "-", t->macs, c.cyc, c.util, t->bound, c.ratio, c.ratio_rd, "-", t->moved, t->compulsory,
           t->jit_ms, "-", !b->chk ? "-" : t->ndiff ? "DIFF" : "ok");
    tsr_kcache_stats_t ks;
    memset(&ks, 0, sizeof ks);
    tsr_kcache_stats(tsr_kcache_get(b->dev), &ks);
    printf("wall time %.2f s for %d layers (data, plans, packing, runs%s); jit cache: %llu misses, %llu hits, %llu "
           "from disk, %.1f ms generating, %.1f ms saved\n",
           tsr_now_s() - t_start, t->nrun, b->chk ? ", fsim check runs" : "", (unsigned long long)ks.misses,
           (unsigned long long)ks.hits, (unsigned long long)ks.disk_hits, ks.gen_ns / 1e6, ks.saved_ns / 1e6);
    tsr_sampled_print(b->dev, stdout); /* a sampled device's RTL estimate and its bound */
}

/* Every selected layer: a row each, then the total and the notes. */
static int rn_table(tsr_lbench_t *b, const rn_opts_t *o, double t_start, tsr_lbench_total_t *t)
{
    char notes[1024] = "";
    size_t notes_len = 0;
    tsr_lbench_total_init(t);
    for (int li = 0; li < TSR_RN18_LAYERS; li++) {
        tsr_lbench_row_t row;
        if (!o->sel[li])
            continue;
        int rc = tsr_lbench_layer(b, li, &row);
        if (rc)
            return rc;
        rn_note(&row, notes, sizeof notes, &notes_len);
        rn_row(&row, o->lo.backend);
        tsr_lbench_total_add(b, t, &row);
    }
    rn_total(b, t, t_start);
    fputs(notes, stdout);
    return TSR_OK;
}

static int bench_resnet18(int argc, char **argv)
{
    rn_opts_t o = {.lo = {.cfgname = "default", .backend = "rtl", .dev = &tsr_cli_devopts, .seed = 1, .tappack = 1}};
    int r = rn_parse(argc, argv, &o);
    if (r)
        return r == -2 ? 0 : 2;
    const double t_start = tsr_now_s();
    tsr_lbench_t b;
    tsr_lbench_total_t t;
    int rc = tsr_lbench_open(&o.lo, &b);
    if (rc)
        return tsr_cli_fail(rc);
    rn_header(&b, &o);
    rc = rn_table(&b, &o, t_start, &t);
    tsr_lbench_close(&b);
    if (rc)
        return tsr_cli_fail(rc);
    if (t.ndiff) {
        fprintf(stderr, "%s bench: %d layer(s) differ from fsim\n", TSR_CLI_PROG, t.ndiff);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------ --kind mbv2-dw */

static const char *bench_dw_help =
    "usage: tessera bench --kind mbv2-dw [--layers D1,D4] [--config CONFIG] [--taps K]\n"
    "                     [--backend NAME] [--check] [--seed N] [device options]\n"
    "\n"
    "The 17 depthwise 3x3 convs of MobileNetV2 (torchvision, 224x224, pad 1; int8,\n"
    "per-channel requantization) through tsr_conv2d on two devices: the config as\n"
    "given (the block-diagonal path: one tap of BLOCK_IN channels per GEMM op) and\n"
    "the config plus DEPTHWISE = K (the GEMM depthwise mode, K taps per op).\n"
    "Per layer: compulsory DRAM bytes (input, weights, bias, output once) and\n"
    "their bound in cycles at --dram-bw bytes per cycle (8: the 64-bit port);\n"
    "per path: cycles (device counter; - when untimed, e.g. fsim), the JIT's\n"
    "estimate, x = cycles / bound, GEMM ops and the tile (rows x columns x channel\n"
    "blocks);\n"
    "dw_moved = DRAM bytes the mode's run moved / compulsory (halo rows, whole\n"
    "weight rows of which an op reads K, constant rows, uops, instructions).\n"
    "  --config CONFIG  the config: its DEPTHWISE is set to 0 for the first column, to K for the second (default: default)\n"
    "  --taps K         DEPTHWISE of the second column (default 3)\n"
    "  --backend NAME   systemc (default), rtl, fsim (untimed: estimates only)\n"
    "  --check          compare both paths' outputs with fsim's, byte for byte\n"
    TSR_CLI_DEVICE_OPTIONS_HELP;

static int bench_mbv2_dw(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"backend", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 's'},   {"kind", required_argument, 0, 'K'},
        {"layers", required_argument, 0, 'L'}, {"check", no_argument, 0, 'C'},
        {"taps", required_argument, 0, 't'},   {"help", no_argument, 0, 'h'},
        TSR_CLI_DEVICE_LONG_OPTIONS,           {0, 0, 0, 0}};
    tsr_cli_base_t base = {"default", "systemc", 1};
    tsr_dwbench_opts_t o = {.dev = &tsr_cli_devopts, .taps = 3};
    int sel[TSR_MBV2_DW_LAYERS] = {0}, any = 0, c;
    char buf[256], *end;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:b:s:h", opts, NULL)) != -1) {
        int r = tsr_cli_base_option("bench", c, optarg, &base);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (c) {
        case 'K': break;
        case 'C': o.check = 1; break;
        case 't':
            o.taps = (int)strtol(optarg, &end, 10);
            if (*end || o.taps < 1 || o.taps > 8)
                return tsr_cli_usage("bench", "--taps is 1..8"), 2;
            break;
        case 'L':
            snprintf(buf, sizeof buf, "%s", optarg);
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","), any = 1) {
                int k = tsr_mbv2_dw_layer_find(t);
                if (k < 0) {
                    fprintf(stderr, "%s bench: unknown layer \"%s\" (D1..D17)\n", TSR_CLI_PROG, t);
                    return tsr_cli_usage("bench", "bad --layers"), 2;
                }
                sel[k] = 1;
            }
            break;
        case 'h': fputs(bench_dw_help, stdout); return 0;
        default: return tsr_cli_usage("bench", "bad option"), 2;
        }
    }
    if (optind != argc)
        return tsr_cli_usage("bench", "unexpected argument"), 2;
    o.cfgname = base.cfgname;
    o.backend = base.backend;
    o.seed = base.seed;
    tsr_dwbench_t b;
    int rc = tsr_dwbench_open(&o, &b);
    if (rc)
        return tsr_cli_fail(rc);
    printf("bench: MobileNetV2 depthwise 3x3 convs, int8; config %s vs %s + DEPTHWISE %d, backend %s, DRAM %.4g "
           "B/cycle%s\n", o.cfgname, o.cfgname, o.taps, o.backend, b.bw, o.check ? ", checked against fsim" : "");
    printf("%-5s %-16s %10s %9s | %9s %9s %6s %9s %-10s | %9s %9s %6s %9s %-10s %8s %s\n", "layer", "shape",
           "compulsory", "bound", "cycles", "est", "x", "gemm_ops", "tile", "dw_cycles", "dw_est", "dw_x", "gemm_ops",
           "tile", "dw_moved", "check");
    double sum[5] = {0};
    int ndiff = 0;
    for (int i = 0; i < TSR_MBV2_DW_LAYERS && !rc; i++) {
        if (any && !sel[i])
            continue;
        tsr_dwbench_row_t r;
        if ((rc = tsr_dwbench_layer(&b, i, &r)))
            break;
        const tsr_mbv2_dw_layer_t *L = r.layer;
        char shape[32], cyc[2][24], x[2][16], tile[2][40];
        snprintf(shape, sizeof shape, "%dx%d,%d,s%d", L->hw, L->hw, L->c, L->stride);
        for (int k = 0; k < 2; k++) {
            snprintf(cyc[k], sizeof cyc[k], r.timed ? "%.0f" : "-", r.cycles[k]);
            snprintf(x[k], sizeof x[k], r.timed ? "%.3f" : "-", r.cycles[k] / r.t_mem);
            snprintf(tile[k], sizeof tile[k], "%dx%dx%d", r.toh[k], r.tow[k], r.tco[k]);
        }
        printf("%-5s %-16s %10.0f %9.0f | %9s %9.0f %6s %9.0f %-10s | %9s %9.0f %6s %9.0f %-10s %8.3f %s\n", L->name,
               shape, r.compulsory, r.t_mem, cyc[0], r.est[0], x[0], r.gemm_ops[0], tile[0], cyc[1], r.est[1], x[1],
               r.gemm_ops[1], tile[1], r.moved[1] / r.compulsory, !r.checked ? "-" : r.differs ? "DIFF" : "ok");
        fflush(stdout);
        ndiff += r.differs;
        sum[0] += r.compulsory;
        sum[1] += r.t_mem;
        sum[2] += r.cycles[0];
        sum[3] += r.cycles[1];
    }
    if (!rc && sum[2] > 0)
        printf("total %-16s %10.0f %9.0f | %9.0f %9s %6.3f %9s %-10s | %9.0f %9s %6.3f\n", "-", sum[0], sum[1], sum[2],
               "-", sum[2] / sum[1], "-", "-", sum[3], "-", sum[3] / sum[1]);
    tsr_dwbench_close(&b);
    if (rc)
        return tsr_cli_fail(rc);
    if (ndiff) {
        fprintf(stderr, "%s bench: %d layer(s) differ from fsim\n", TSR_CLI_PROG, ndiff);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ the command */

int tsr_cli_bench(int argc, char **argv)
{
    tsr_cli_mm_opts_t mo = {.b = {.cfgname = "default", .backend = "fsim", .seed = 1}, .m = 0, .k = 0, .n = 0,
                            .shift = 10, .reps = 8, .kind = "matmul"};
    for (int i = 1; i < argc; i++) /* --kind resnet18 has its own options */
        if ((!strcmp(argv[i], "--kind") && i + 1 < argc && !strcmp(argv[i + 1], "resnet18")) ||
            !strcmp(argv[i], "--kind=resnet18"))
            return bench_resnet18(argc, argv);
    for (int i = 1; i < argc; i++) /* and so has --kind first-exec (tsr_cli_firstexec.c) */
        if ((!strcmp(argv[i], "--kind") && i + 1 < argc && !strcmp(argv[i + 1], "first-exec")) ||
            !strcmp(argv[i], "--kind=first-exec"))
            return tsr_cli_bench_firstexec(argc, argv);
    for (int i = 1; i < argc; i++) /* and so has --kind mbv2-dw */
        if ((!strcmp(argv[i], "--kind") && i + 1 < argc && !strcmp(argv[i + 1], "mbv2-dw")) ||
            !strcmp(argv[i], "--kind=mbv2-dw"))
            return bench_mbv2_dw(argc, argv);
    int r = tsr_cli_mm_parse(argc, argv, "bench", bench_help, &mo);
    if (r)
        return r == -2 ? 0 : 2;
    int gemm = !strcmp(mo.kind, "gemm");
    if (!mo.m) mo.m = gemm ? 256 : 1024;
    if (!mo.k) mo.k = 1024;
    if (!mo.n) mo.n = gemm ? 128 : 1024;
    return gemm ? bench_gemm(&mo) : bench_matmul(&mo);
}
