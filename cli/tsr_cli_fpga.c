/*
 * tsr_cli_fpga: `tessera fpga fit` and `tessera fpga boards` (see
 * tsr_cli_fpga.h). The synthesis itself is scripts/synth.sh (one yosys
 * invocation per family, shared with CI and people running it by hand);
 * this file runs it, reads its "resources CLASS=N ..." line and prints the
 * table against the board. The script caches results by content under
 * $TESSERA_CACHE/synth, so asking again about the same design is instant.
 */
#define _DEFAULT_SOURCE /* mkdtemp, setenv */
#include "tsr_cli_fpga.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsr_board.h"
#include "tsr_cachedir.h"
#include "tsr_config.h"
#include "tsr_error.h"

#ifndef TSR_SOURCE_DIR
#define TSR_SOURCE_DIR "."
#endif

enum { FIT_OK = 0, FIT_NO = 1, FIT_USAGE = 2, FIT_ERROR = 3 };

static const char *fpga_help =
    "usage: tessera fpga fit --board BOARD --config CONFIG [--estimate]\n"
    "       tessera fpga boards\n"
    "\n"
    "  fit     synthesize CONFIG's design with yosys for BOARD's family\n"
    "          (synth_xilinx, synth_xilinx -family xcup, synth_ice40), print\n"
    "          resource / used / budget / share / limit and say whether it fits.\n"
    "          Exit status: 0 fits, 1 does not fit, 2 usage error, 3 error.\n"
    "          Results are cached by content ($TESSERA_CACHE/synth), so a\n"
    "          second call on the same design and tools is instant.\n"
    "  boards  list the built-in boards (boards/*.json)\n"
    "\n"
    "  -b, --board BOARD    a built-in board name (pynq-z1, ...) or a board JSON file\n"
    "  -c, --config CONFIG  a preset name or a config JSON file (default: default)\n"
    "  --no-cache           synthesize even if a cached result exists\n"
    "  --estimate           Xilinx boards: yosys module by module (scripts/synth_hier.py,\n"
    "                       each module once per parameter set, cached), minutes where\n"
    "                       the flattened flow of a large design takes hours; LUT and FF\n"
    "                       come out high (about +11% LUT, scripts/dse/README.md), so a\n"
    "                       fit is conservative\n"
    "\n"
    "The estimate is yosys's cell count before place and route: vendor tools\n"
    "usually need fewer LUTs; limits (e.g. LUT <= 80%) leave room for that\n"
    "difference, routing and the shell.\n";

static int err_out(int code)
{
    fprintf(stderr, "tessera fpga: error: %s\n", tsr_errmsg()[0] ? tsr_errmsg() : tsr_errname(code));
    return FIT_ERROR;
}

static int usage(const char *msg)
{
    fprintf(stderr, "tessera fpga: %s (see `tessera fpga --help`)\n", msg);
    return FIT_USAGE;
}

/* Parse "resources LUT=1 FF=2 BRAM36=3.5 ..." into used[]. */
static int parse_resources(const char *line, double used[TSR_RES_COUNT])
{
    char buf[512], *save = NULL;
    snprintf(buf, sizeof buf, "%s", line + strlen("resources "));
    for (char *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
        char *eq = strchr(t, '=');
        if (!eq)
            return -1;
        *eq = '\0';
        int r;
        for (r = 0; r < TSR_RES_COUNT; r++)
            if (!strcmp(t, tsr_res_name(r)))
                break;
        char *end;
        double v = strtod(eq + 1, &end);
        if (r == TSR_RES_COUNT || *end || v < 0)
            return -1;
        used[r] = v;
    }
    return 0;
}

/* Paths of a synthesis: the script, this binary, the synth cache and a
 * fresh work directory in it (created, with the cache, as mkdir -p). */
typedef struct {
    char script[1024], self[1024], synth_cache[600], work[640], log[700];
} synth_paths_t;

static int synth_paths(synth_paths_t *sp)
{
    char cache[512];
    const char *root = getenv("TESSERA_ROOT");
    if (!root || !*root)
        root = TSR_SOURCE_DIR;
    snprintf(sp->script, sizeof sp->script, "%s/scripts/synth.sh", root);
    if (access(sp->script, X_OK))
        return tsr_err(TSR_EIO, "cannot run %s (set TESSERA_ROOT to the source tree)", sp->script);
    ssize_t n = readlink("/proc/self/exe", sp->self, sizeof sp->self - 1);
    if (n <= 0)
        return tsr_err(TSR_EIO, "cannot find the tessera binary: %s", strerror(errno));
    sp->self[n] = '\0';
    tsr_cache_dir(cache, sizeof cache);
    snprintf(sp->synth_cache, sizeof sp->synth_cache, "%s/synth", cache);
    char *work = sp->work;
    snprintf(work, sizeof sp->work, "%s", sp->synth_cache);
    for (char *p = work + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            (void)mkdir(work, 0755);
            *p = '/';
        }
    if (mkdir(work, 0755) && errno != EEXIST)
        return tsr_err(TSR_EIO, "cannot create %s: %s", work, strerror(errno));
    snprintf(work, sizeof sp->work, "%s/work-XXXXXX", sp->synth_cache);
    if (!mkdtemp(work))
        return tsr_err(TSR_EIO, "cannot create a directory in %s: %s", sp->synth_cache, strerror(errno));
    snprintf(sp->log, sizeof sp->log, "%s/fit.log", work);
    return TSR_OK;
}

/* The child: stdout to the pipe, stderr to the log, then the script. */
static void synth_child(const synth_paths_t *sp, int fd[2], const char *cfg, const char *family, int use_cache)
{
    close(fd[0]);
    dup2(fd[1], 1);
    FILE *lf = fopen(sp->log, "w");
    if (lf)
        dup2(fileno(lf), 2);
    if (use_cache)
        setenv("SYNTH_CACHE", sp->synth_cache, 1);
    else
        unsetenv("SYNTH_CACHE");
    execl(sp->script, sp->script, sp->self, cfg, sp->work, family, (char *)NULL);
    _exit(127);
}

/* Read the script's "resources ..." and "cached ..." lines from fd; its
 * exit status in *st. 0 when a resources line parsed. */
static int synth_read(int fd, pid_t pid, double used[TSR_RES_COUNT], int *cached, int *st)
{
    FILE *out = fdopen(fd, "r");
    char line[512];
    int got = 0, bad = 0;
    *cached = 0;
    while (out && fgets(line, sizeof line, out)) {
        if (!strncmp(line, "resources ", 10)) {
            got = 1;
            bad |= parse_resources(line, used);
        } else if (!strncmp(line, "cached ", 7))
            *cached = 1;
    }
    if (out)
        fclose(out);
    while (waitpid(pid, st, 0) < 0 && errno == EINTR)
        ;
    return got && !bad ? 0 : -1;
}

/* Run scripts/synth.sh; fills used[] and *cached. Work files go to a fresh
 * directory under the cache, removed on success and kept (named in the
 * message) on failure. */
static int run_synth(const char *cfg, const tsr_board_t *b, int use_cache, int estimate,
                     double used[TSR_RES_COUNT], int *cached)
{
    char family[32];
    synth_paths_t sp;
    snprintf(family, sizeof family, "%s%s", tsr_family_name(b->family), estimate ? "-est" : "");
    int rc = synth_paths(&sp), fd[2], st;
    if (rc)
        return rc;
    if (pipe(fd))
        return tsr_err(TSR_EIO, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return tsr_err(TSR_EIO, "fork: %s", strerror(errno));
    if (pid == 0)
        synth_child(&sp, fd, cfg, family, use_cache);
    close(fd[1]);
    if (synth_read(fd[0], pid, used, cached, &st) || !WIFEXITED(st) || WEXITSTATUS(st))
        return tsr_err(TSR_EBACKEND, "yosys synthesis of %s for %s failed; see %s (and synth.log there)",
                       cfg, family, sp.log);
    /* Success: the result is in the cache; drop the work files. */
    static const char *const files[] = {"tsr_pkg.sv", "synth.log", "stat.txt", "yosys.stderr",
                                        "result.txt", "fit.log"};
    char path[800];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", sp.work, files[i]);
        (void)unlink(path);
    }
    (void)rmdir(sp.work);
    return TSR_OK;
}

/* The table of used / budget / share / limit and the verdict; the exit status. */
static int print_fit(const tsr_board_t *b, const char *cfgname, int estimate, int cached,
                     const double used[TSR_RES_COUNT])
{
    printf("board %s (%s, yosys family %s), config %s: yosys %s%s\n", b->name, b->part,
           tsr_family_name(b->family), cfgname,
           estimate ? "per-module estimate (LUT and FF high: a conservative fit)" : "estimate",
           cached ? " (cached)" : "");
    printf("%-8s %10s %10s %7s %7s\n", "resource", "used", "budget", "share", "limit");
    for (int r = 0; r < TSR_RES_COUNT; r++) {
        if (!b->has[r] && used[r] == 0)
            continue;
        char share[16] = "-";
        if (b->budget[r] > 0)
            snprintf(share, sizeof share, "%.1f%%", 100.0 * used[r] / b->budget[r]);
        else if (used[r] > 0)
            snprintf(share, sizeof share, "inf");
        printf("%-8s %10g %10g %7s %6.0f%%\n", tsr_res_name(r), used[r], b->budget[r], share,
               100.0 * b->limit[r]);
    }
    if (b->family == TSR_FAMILY_ICE40)
        printf("note: on iCE40, LC is max(LUT4, FF) of the core before placement, a lower bound (the\n"
               "board wrapper and packing add to it); scripts/fpga/ice40.sh places and routes\n");
    char why[512];
    if (tsr_board_fits(b, used, why, sizeof why)) {
        printf("fits\n");
        return FIT_OK;
    }
    printf("does not fit: %s\n", why);
    return FIT_NO;
}

static int cmd_fit(int argc, char **argv)
{
    static const struct option opts[] = {{"board", required_argument, 0, 'b'},
                                         {"config", required_argument, 0, 'c'},
                                         {"no-cache", no_argument, 0, 'n'},
                                         {"estimate", no_argument, 0, 'e'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *board = NULL, *cfgname = "default";
    int use_cache = 1, estimate = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "b:c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'b': board = optarg; break;
        case 'c': cfgname = optarg; break;
        case 'n': use_cache = 0; break;
        case 'e': estimate = 1; break;
        case 'h': fputs(fpga_help, stdout); return FIT_OK;
        default: return usage("bad option");
        }
    }
    if (optind != argc)
        return usage("unexpected argument");
    if (!board)
        return usage("fit needs --board BOARD");
    tsr_board_t b;
    tsr_config_t cfg;
    int rc;
    if ((rc = tsr_board_load(board, &b)) || (rc = tsr_config_load(cfgname, &cfg)))
        return err_out(rc);
    if (estimate && b.family == TSR_FAMILY_ICE40)
        return usage("--estimate is for Xilinx boards (an iCE40 design is small: its full synthesis takes minutes)");
    double used[TSR_RES_COUNT] = {0};
    int cached = 0;
    if ((rc = run_synth(cfgname, &b, use_cache, estimate, used, &cached)))
        return err_out(rc);
    return print_fit(&b, cfgname, estimate, cached, used);
}

int tsr_cli_fpga(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(fpga_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? FIT_USAGE : FIT_OK;
    }
    if (!strcmp(argv[1], "fit"))
        return cmd_fit(argc - 1, argv + 1);
    if (!strcmp(argv[1], "boards")) {
        for (const char *const *p = tsr_board_names(); *p; p++) {
            tsr_board_t b;
            if (tsr_board_load(*p, &b))
                return err_out(TSR_ECONFIG);
            printf("%-12s %-22s %-5s %s\n", b.name, b.part, tsr_family_name(b.family), b.vendor);
        }
        return FIT_OK;
    }
    return usage("unknown subcommand (fit, boards)");
}
