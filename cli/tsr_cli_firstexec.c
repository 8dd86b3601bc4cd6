/* tsr_cli_firstexec: `tessera bench --kind first-exec` (tsr_cli_firstexec.h).
 * What a DSE point or a one-off `tessera net`/`infer` pays is a network's
 * FIRST execution: every stream verified, decoded and run once. Each
 * measurement is a child process of its own (forked before anything is
 * loaded), so no verify memo, decode cache, warm heap or page table of an
 * earlier run helps it; fsim and timing-only alternate within a round. The
 * figure is the process's CPU time over the execution alone (after
 * planning): other jobs on a shared machine inflate wall time, not it. */
#include "tsr_cli_firstexec.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsr_cli_common.h"
#include "tsr_error.h"
#include "tsr_graph.h"
#include "tsr_netdesc.h"
#include "tsr_npy.h"
#include "tsr_onnx.h"
#include "tsr_util.h"

static const char *fx_help =
    "usage: tessera bench --kind first-exec [--model resnet18|MODEL.onnx] [-i INPUT.npy]\n"
    "                     [--rounds N] [--config CONFIG] [--seed N] [--place KIND=device|host[,...]]\n"
    "                     [device options]\n"
    "\n"
    "A network's first execution on fsim and on the timing-only SystemC model\n"
    "(--backend systemc --timing-only), each in a fresh process, alternating, N\n"
    "rounds: per round the CPU time of the execution (the process's, all threads,\n"
    "from the inputs written to the outputs read; planning excluded) and wall time,\n"
    "then the medians and their ratio. The timing-only cycles must be the same in\n"
    "every round.\n"
    "  --model NAME    resnet18 (default: `tessera net resnet18`'s network, seeded)\n"
    "                  or an ONNX file run as `tessera infer` runs it (needs -i)\n"
    "  -i INPUT.npy    the ONNX model's input\n"
    "  --rounds N      rounds, 1..50 (default 3)\n" TSR_CLI_PLACE_HELP TSR_CLI_DEVICE_OPTIONS_HELP;

typedef struct {
    const char *model, *input, *cfgname;
    uint64_t seed;
    int rounds;
    tsr_onnx_opts_t place; /* --place (an ONNX model) */
} fx_args_t;

/* One measurement, as the child reports it through a pipe. */
typedef struct {
    int rc;
    double cpu_s, wall_s, cycles;
    char msg[512];
} fx_res_t;

/* The timed region's counters: start, then stop into r. */
typedef struct {
    double t0, c0;
} fx_clock_t;

static void fx_start(fx_clock_t *c)
{
    c->t0 = tsr_now_s();
    c->c0 = tsr_cpu_s();
}

static void fx_stop(const fx_clock_t *c, fx_res_t *r)
{
    r->cpu_s = tsr_cpu_s() - c->c0;
    r->wall_s = tsr_now_s() - c->t0;
}

static int is_onnx(const fx_args_t *a) { return strcmp(a->model, "resnet18") != 0; }

/* tessera net resnet18's steps: the network, its plan, a seeded input; then
 * the execution, timed. */
static int fx_net(const fx_args_t *a, const tsr_device_opts_t *d, fx_res_t *r)
{
    tsr_config_t cfg;
    tsr_netdesc_t nd;
    tsr_device_t *dev = NULL;
    tsr_graph_t *g = NULL;
    uint8_t *in = NULL, *out = NULL;
    memset(&nd, 0, sizeof nd);
    int rc = tsr_config_load(a->cfgname, &cfg);
    if (!rc && !(rc = tsr_device_open(d->rtl.timing_only ? "systemc" : "fsim", &cfg, d, &dev)) &&
        !(rc = tsr_netdesc_resnet18(a->seed, 1, &nd)) && !(rc = tsr_graph_from_netdesc(&cfg, &nd, &g)))
        rc = tsr_graph_plan(g, dev, 0);
    if (!rc && (!(in = malloc(tsr_netdesc_tensor_bytes(&nd, 0))) ||
                !(out = malloc(tsr_netdesc_tensor_bytes(&nd, nd.output)))))
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc) {
        tsr_netdesc_random_input(&nd, a->seed, in);
        const void *ins[1] = {in};
        void *outs[1] = {out};
        fx_clock_t c;
        fx_start(&c);
        rc = tsr_graph_exec(g, ins, outs);
        fx_stop(&c, r);
    }
    if (!rc) {
        tsr_graph_totals_t t;
        tsr_graph_totals(g, &t);
        r->cycles = t.cycles;
    }
    free(in);
    free(out);
    tsr_graph_free(g);
    tsr_netdesc_free(&nd);
    tsr_device_close(dev);
    return rc;
}

/* tessera infer's steps: load, target, device, prepare; then the run, timed. */
static int fx_onnx(const fx_args_t *a, const tsr_device_opts_t *d, fx_res_t *r)
{
    tsr_tensor_t in, out;
    tsr_onnx_t *m = NULL;
    tsr_device_t *dev = NULL;
    tsr_config_t cfg;
    memset(&in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    int rc = tsr_npy_read(a->input, &in);
    if (!rc && (in.ndim < 1 || in.shape[0] < 1 || in.shape[0] > 65536))
        rc = tsr_err(TSR_EINVAL, "%s: the input needs a batch dimension of 1..65536", a->input);
    if (!rc && !(rc = tsr_config_load(a->cfgname, &cfg)) && !(rc = tsr_onnx_load_opts(a->model, (int)in.shape[0], &a->place, &m)) &&
        !(rc = tsr_onnx_set_target(m, &cfg)) &&
        !(rc = tsr_device_open(d->rtl.timing_only ? "systemc" : "fsim", &cfg, d, &dev)))
        rc = tsr_onnx_prepare(m, &cfg, dev, 0);
    if (!rc) {
        fx_clock_t c;
        fx_start(&c);
        rc = tsr_onnx_run(m, &in, &out);
        fx_stop(&c, r);
    }
    tsr_counters_t c;
    if (!rc && !(rc = tsr_read_counters(dev, &c)))
        r->cycles = (double)c.cycles;
    tsr_tensor_free(&in);
    tsr_tensor_free(&out);
    tsr_onnx_free(m);
    tsr_device_close(dev);
    return rc;
}

static ssize_t read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

/* One measurement in a child process of its own. */
static int fx_spawn(const fx_args_t *a, int timing, fx_res_t *r)
{
    const char *mode = timing ? "timing-only" : "fsim";
    int fd[2];
    memset(r, 0, sizeof *r);
    if (pipe(fd))
        return tsr_err(TSR_EIO, "bench: pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return tsr_err(TSR_EIO, "bench: fork: %s", strerror(errno));
    }
    if (!pid) {
        close(fd[0]);
        tsr_device_opts_t d = tsr_cli_devopts;
        d.rtl.timing_only = timing;
        fx_res_t c;
        memset(&c, 0, sizeof c);
        c.rc = is_onnx(a) ? fx_onnx(a, &d, &c) : fx_net(a, &d, &c);
        if (c.rc)
            snprintf(c.msg, sizeof c.msg, "%s", tsr_errmsg());
        const int ok = write(fd[1], &c, sizeof c) == (ssize_t)sizeof c;
        _exit(ok ? 0 : 3);
    }
    close(fd[1]);
    const ssize_t got = read_full(fd[0], r, sizeof *r);
    close(fd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (got != (ssize_t)sizeof *r) {
        if (WIFSIGNALED(st))
            return tsr_err(TSR_EBACKEND, "bench: the %s process died of signal %d", mode, WTERMSIG(st));
        return tsr_err(TSR_EBACKEND, "bench: the %s process exited (status %d) without a result", mode,
                       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    r->msg[sizeof r->msg - 1] = 0;
    if (r->rc)
        return tsr_err(r->rc, "bench: %s: %s", mode, r->msg);
    return TSR_OK;
}

static int dbl_cmp(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(const double *v, int n)
{
    double s[64];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, dbl_cmp);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void range(const double *v, int n, double *lo, double *hi)
{
    *lo = *hi = v[0];
    for (int k = 1; k < n; k++) {
        *lo = v[k] < *lo ? v[k] : *lo;
        *hi = v[k] > *hi ? v[k] : *hi;
    }
}

/* The medians and their ratio, the range of the rounds' ratios. */
static void fx_summary(const fx_args_t *a, const double *cf, const double *ct, const double *ratio, double cycles)
{
    const int n = a->rounds;
    const double mf = median(cf, n), mt = median(ct, n);
    double lo, hi;
    range(ratio, n, &lo, &hi);
    printf("first execution, CPU: fsim %.1f ms, timing-only %.1f ms (medians): %.2fx (rounds %.2fx - %.2fx)\n",
           mf * 1e3, mt * 1e3, mt > 0 ? mf / mt : 0, lo, hi);
    printf("timing-only cycles %.0f (the same in every round)\n", cycles);
}

/* The rounds, the table and the summary. */
static int fx_run(const fx_args_t *a)
{
    double cf[50], ct[50], ratio[50], cycles = 0;
    printf("bench: first execution of %s (config %s): fsim vs systemc --timing-only, %d rounds, each run in a fresh "
           "process; CPU = the process's CPU time over the execution (planning excluded)\n",
           a->model, a->cfgname, a->rounds);
    printf("%-6s %12s %9s %14s %9s %8s\n", "round", "fsim CPU ms", "wall ms", "timing CPU ms", "wall ms", "ratio");
    for (int k = 0; k < a->rounds; k++) {
        fx_res_t f, t;
        int rc = k % 2 ? fx_spawn(a, 1, &t) : fx_spawn(a, 0, &f);
        if (!rc)
            rc = k % 2 ? fx_spawn(a, 0, &f) : fx_spawn(a, 1, &t);
        if (rc)
            return rc;
        if (k && t.cycles != cycles)
            return tsr_err(TSR_EINVAL, "bench: the timing-only cycles differ between rounds (%.0f, then %.0f)",
                           cycles, t.cycles);
        cycles = t.cycles;
        cf[k] = f.cpu_s;
        ct[k] = t.cpu_s;
        ratio[k] = t.cpu_s > 0 ? f.cpu_s / t.cpu_s : 0;
        printf("%-6d %12.1f %9.1f %14.1f %9.1f %7.2fx\n", k + 1, f.cpu_s * 1e3, f.wall_s * 1e3, t.cpu_s * 1e3,
               t.wall_s * 1e3, ratio[k]);
        fflush(stdout);
    }
    fx_summary(a, cf, ct, ratio, cycles);
    return TSR_OK;
}

int tsr_cli_bench_firstexec(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"seed", required_argument, 0, 's'},
        {"kind", required_argument, 0, 'K'},   {"model", required_argument, 0, 'M'},
        {"rounds", required_argument, 0, 'r'}, {"help", no_argument, 0, 'h'},
        {"place", required_argument, 0, 'P'},  TSR_CLI_DEVICE_LONG_OPTIONS, {0, 0, 0, 0}};
    tsr_cli_base_t base = {"default", "fsim", 1};
    fx_args_t a = {.model = "resnet18", .rounds = 3};
    long v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:s:i:h", opts, NULL)) != -1) {
        int r = tsr_cli_base_option("bench", c, optarg, &base);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (c) {
        case 'K': break;
        case 'M': a.model = optarg; break;
        case 'i': a.input = optarg; break;
        case 'P':
            if (tsr_cli_place("bench", optarg, &a.place))
                return 2;
            break;
        case 'r':
            if (tsr_cli_parse_long(optarg, 1, 50, &v))
                return tsr_cli_usage("bench", "--rounds is 1..50");
            a.rounds = (int)v;
            break;
        case 'h': fputs(fx_help, stdout); return 0;
        default: return tsr_cli_usage("bench", "bad option");
        }
    }
    if (optind != argc)
        return tsr_cli_usage("bench", "unexpected argument");
    if (is_onnx(&a) && !a.input)
        return tsr_cli_usage("bench", "--model MODEL.onnx needs -i INPUT.npy");
    if (!is_onnx(&a) && (a.input || memchr(a.place.place, TSR_PLACE_DEVICE, TSR_PLACE_NKINDS) ||
                         memchr(a.place.place, TSR_PLACE_HOST, TSR_PLACE_NKINDS)))
        return tsr_cli_usage("bench", "-i and --place are for an ONNX --model (resnet18 makes its own)");
    a.cfgname = base.cfgname;
    a.seed = base.seed;
    const int rc = fx_run(&a);
    return rc ? tsr_cli_fail(rc) : 0;
}
