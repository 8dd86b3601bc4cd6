/*
 * tsr_soak: long-running differential soak. Generates random programs
 * (tsr_gen) and runs each on fsim with the fixed schedule, on a second
 * backend (fsim with a random interleaving by default; "rtl" once it
 * exists) and on the in-order reference machine, comparing every output
 * byte. Mismatches are reported with seed, config, first differing byte and
 * the first diverging STORE (bisected).
 *
 *   tsr_soak [--count N] [--seed S] [--backend NAME] [--config PRESET|random|FILE]
 *            [--no-ref] [--quiet] [--no-junk] [--no-empty-loops] [--round-sizes]
 *            [--max-insns N] [--configs K] [--shard I/N]
 *
 * Program i uses generator seed S + i (for random configs also the config
 * seed; with --configs K the random configs cycle through seeds S .. S+K-1,
 * since on the RTL backend each new config is a Verilator model build), and
 * the second backend gets interleaving seed tsr_gen_mix(S + i) | 1, exactly
 * as test_difftest does: `--seed SEED --count 1` reproduces a test failure.
 *
 * --shard I/N runs only programs i with i % N == I (each with the seed, config
 * and interleaving the whole soak gives it): N processes with I = 0 .. N-1 run
 * the serial soak's programs between them. scripts/soak/psoak.py starts them
 * on this machine's cores or as a Slurm job array and adds up the results.
 *
 * --no-junk / --no-empty-loops / --round-sizes / --max-insns narrow the generated programs
 * (tsr_gen_opts_t) to isolate a failure.
 *
 * --hostile: mutated streams with verification off, fsim against the RTL
 * (or --backend), each on ONE device opened once, so every failed run is
 * followed by the next stream on the same device (recovery exercised).
 * Program i is generated with seed S + i, then mutated 1-3 times (seeded
 * by the same number): a bit flip in an instruction word (re-drawn while
 * the word does not decode), an instruction dropped, duplicated, or
 * swapped with its neighbour. Verdicts (ok / error) and, when both are
 * ok, every output byte are compared; prints "N streams, M disagreements".
 * After a stream that failed on either device both devices are scrubbed
 * (every on-chip buffer zeroed by a short valid stream) since a failed
 * run stops at a backend-specific point and the ISA leaves on-chip
 * contents unspecified after it (isa/semantics.md); no stream is skipped.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_gen.h"
#include "tsr_hostile.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tsr_soak [--count N] [--seed S] [--backend NAME] "
               "[--config PRESET|random|FILE] [--no-ref] [--quiet] [--no-junk] "
               "[--no-empty-loops] [--round-sizes] [--max-insns N] [--configs K] [--shard I/N]\n"
               "       tsr_soak --hostile [--count N] [--seed S] [--backend NAME] [--config PRESET|FILE] [--quiet] "
               "[--shard I/N]\n");
}

/* A whole decimal or 0x number, else a one-line error (strtoull alone takes
 * "12abc" as 12 and "abc" as 0: a typo must not shrink a soak). */
static int parse_u64(const char *opt, const char *v, uint64_t *out)
{
    char *end;
    if (!v || !*v || *v == '-' || (errno = 0, *out = strtoull(v, &end, 0), errno) || *end) {
        fprintf(stderr, "tsr_soak: %s wants a non-negative integer, got '%s'\n", opt, v ? v : "");
        return -1;
    }
    return 0;
}

/* --shard I/N with N >= 1 and I < N. */
static int parse_shard(const char *v, tsr_shard_t *sh)
{
    char *end;
    errno = 0;
    unsigned long long i = strtoull(v, &end, 10), n = 0;
    if (!errno && end != v && *v != '-' && *end == '/' && end[1] && end[1] != '-') {
        const char *nv = end + 1;
        n = strtoull(nv, &end, 10);
        if (!errno && !*end && n >= 1 && i < n) {
            sh->index = i;
            sh->count = n;
            return 0;
        }
    }
    fprintf(stderr, "tsr_soak: --shard wants I/N with 0 <= I < N, got '%s'\n", v);
    return -1;
}

int main(int argc, char **argv)
{
    uint64_t count = 100, seed = 1, nconf = 0;
    tsr_shard_t shard = {0, 1};
    const char *backend = NULL, *config = "random";
    int use_ref = 1, quiet = 0, hostile = 0;
    tsr_gen_opts_t go;
    memset(&go, 0, sizeof go);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--count") && v) {
            if (parse_u64(a, v, &count))
                return 2;
            i++;
        } else if (!strcmp(a, "--seed") && v) {
            if (parse_u64(a, v, &seed))
                return 2;
            i++;
        } else if (!strcmp(a, "--shard") && v) {
            if (parse_shard(v, &shard))
                return 2;
            i++;
        } else if (!strcmp(a, "--backend") && v) {
            backend = v;
            i++;
        } else if (!strcmp(a, "--config") && v) {
            config = v;
            i++;
        } else if (!strcmp(a, "--configs") && v) {
            if (parse_u64(a, v, &nconf))
                return 2;
            i++;
        } else if (!strcmp(a, "--max-insns") && v) {
            go.max_insns = (uint32_t)strtoul(v, NULL, 0);
            if (go.max_insns && go.max_insns < 24)
                go.min_insns = go.max_insns;
            i++;
        } else if (!strcmp(a, "--round-sizes")) {
            go.round_sizes = 1;
        } else if (!strcmp(a, "--no-junk")) {
            go.no_noop_junk = 1;
        } else if (!strcmp(a, "--no-empty-loops")) {
            go.no_empty_loops = 1;
        } else if (!strcmp(a, "--no-ref")) {
            use_ref = 0;
        } else if (!strcmp(a, "--hostile")) {
            hostile = 1;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    tsr_config_t fixed;
    if (hostile) {
        if (!strcmp(config, "random"))
            config = "tiny"; /* one config: the devices live for the whole soak */
        if (!backend)
            backend = "rtl"; /* hostile default: fsim against the RTL */
        if (tsr_config_load(config, &fixed)) {
            fprintf(stderr, "tsr_soak: %s\n", tsr_errmsg());
            return 2;
        }
        return tsr_hostile_soak(&fixed, backend, seed, count, &shard, quiet, stdout);
    }
    if (!backend)
        backend = "fsim";
    int random_cfg = !strcmp(config, "random");
    if (!random_cfg && tsr_config_load(config, &fixed)) {
        fprintf(stderr, "tsr_soak: %s\n", tsr_errmsg());
        return 2;
    }
    uint64_t mismatches = 0, errors = 0, ran = 0;
    /* the shard's programs, counted first so that i cannot wrap near 2^64 */
    const uint64_t mine = count > shard.index ? (count - shard.index - 1) / shard.count + 1 : 0;
    for (uint64_t j = 0; j < mine; j++, ran++) {
        const uint64_t i = shard.index + j * shard.count;
        uint64_t ps = seed + i;
        tsr_config_t cfg = fixed;
        char json[1024];
        if (random_cfg) {
            /* ACT_LUT too, on every backend (random configs are pipelined
             * cores; the RTL's has the table unit) */
            const uint64_t cs = nconf ? seed + i % nconf : ps;
            if (tsr_gen_random_config(cs, json, sizeof json) || tsr_config_parse(json, "random", &cfg) ||
                tsr_gen_add_act_lut(cs, &cfg, json, sizeof json)) {
                fprintf(stderr, "program seed %" PRIu64 ": bad random config: %s\n", ps, tsr_errmsg());
                errors++;
                continue;
            }
        }
        tsr_gen_prog_t p;
        int rc = tsr_gen_program(ps, &cfg, &go, &p);
        if (rc) {
            fprintf(stderr, "program seed %" PRIu64 ": %s\n", ps, tsr_errmsg());
            errors++;
            continue;
        }
        tsr_gen_exec_t ex[3] = {{"fsim", 0, NULL, NULL}, {backend, tsr_gen_mix(ps) | 1, NULL, NULL},
                                {"ref", 0, NULL, NULL}};
        rc = tsr_gen_difftest(&p, ex, use_ref ? 3 : 2, stdout);
        if (rc > 0)
            mismatches++;
        else if (rc < 0)
            errors++;
        if (!quiet && (ran + 1) % 100 == 0)
            fprintf(stderr, "%" PRIu64 " programs, %" PRIu64 " mismatches so far\n", ran + 1, mismatches);
        tsr_gen_free(&p);
    }
    printf("%" PRIu64 " programs, %" PRIu64 " mismatches", ran, mismatches);
    if (errors)
        printf(", %" PRIu64 " errors", errors);
    printf("\n");
    return mismatches || errors ? 1 : 0;
}
