/*
 * tsr_hostile: mutated streams on fsim and a second backend, one device
 * each for the whole soak (see tsr_hostile.h and tsr_soak.c --hostile).
 *
 * Verdicts compared: ok / error. Error classes are not compared: a stream
 * with two defects may meet either first (the backends run stages in a
 * different order), and both stop with an error either way. Outputs are
 * compared only when both runs succeed (a failed run stops at a
 * backend-specific point). Streams with a data race (tsr_race.h) whose
 * results differ are listed and not counted: by the ISA their result
 * depends on the schedule. Every stream starts from zeroed on-chip buffers
 * (tsr_hostile_scrub after each stream): the ISA leaves the contents after
 * a failed run unspecified, and mutated streams read rows they never wrote.
 */
#include "tsr_hostile.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr_error.h"
#include "tsr_gen.h"
#include "tsr_race.h"
#include "tsr_util.h"

static uint64_t rnd(uint64_t *s)
{
    return tsr_splitmix64(s);
}

void tsr_hostile_mutate(const tsr_config_t *cfg, uint64_t seed, tsr_insn_t *insns, size_t *n, size_t cap,
                        char *desc, size_t ndesc)
{
    uint64_t s = seed * 0x2545F4914F6CDD1Dull + 7;
    int k = 1 + (int)(rnd(&s) % 3);
    size_t len = 0;
    desc[0] = '\0';
    for (int m = 0; m < k && *n > 0; m++) {
        size_t i = (size_t)(rnd(&s) % *n);
        int kind = (int)(rnd(&s) % 4);
        int w = 0;
        if (kind == 0) { /* bit flip, re-drawn until the word decodes */
            tsr_insn_bits_t b;
            tsr_insn_t t;
            int bit = -1;
            for (int tries = 0; tries < 16; tries++) {
                if (tsr_insn_encode(cfg, &insns[i], &b))
                    break;
                int cand = (int)(rnd(&s) % 128);
                b.w[cand / 64] ^= 1ull << (cand % 64);
                if (!tsr_insn_decode(cfg, &b, &t)) {
                    insns[i] = t;
                    bit = cand;
                    break;
                }
            }
            w = snprintf(desc + len, ndesc - len, "%sflip #%zu bit %d", len ? ", " : "", i, bit);
        } else if (kind == 1 && *n > 1) { /* drop */
            memmove(&insns[i], &insns[i + 1], (*n - i - 1) * sizeof *insns);
            (*n)--;
            w = snprintf(desc + len, ndesc - len, "%sdrop #%zu", len ? ", " : "", i);
        } else if (kind == 2 && *n < cap) { /* duplicate */
            memmove(&insns[i + 1], &insns[i], (*n - i) * sizeof *insns);
            (*n)++;
            w = snprintf(desc + len, ndesc - len, "%sdup #%zu", len ? ", " : "", i);
        } else if (i + 1 < *n) { /* swap with the next */
            tsr_insn_t t = insns[i];
            insns[i] = insns[i + 1];
            insns[i + 1] = t;
            w = snprintf(desc + len, ndesc - len, "%sswap #%zu,#%zu", len ? ", " : "", i, i + 1);
        }
        if (w > 0 && (size_t)w < ndesc - len)
            len += (size_t)w;
    }
}

int tsr_hostile_scrub(tsr_device_t *dev)
{
    const tsr_config_t *c = tsr_device_config(dev);
    uint64_t eb = c->wgt_bytes, z = 0;
    const uint32_t mems[3] = {TSR_MEM_UOP, TSR_MEM_INP, TSR_MEM_WGT};
    for (int m = 0; m < TSR_MEM_COUNT; m++)
        if (tsr_config_elem_bytes(c, m) > eb)
            eb = tsr_config_elem_bytes(c, m);
    int rc = tsr_mem_alloc(dev, eb, &z);
    if (rc)
        return rc;
    tsr_insn_t in[5];
    memset(in, 0, sizeof in);
    /* each buffer: every row from one zero element (stride 0) */
    for (int k = 0; k < 3; k++) {
        in[k].opcode = TSR_OP_LOAD;
        in[k].mem_type = mems[k];
        in[k].dram_base = (uint32_t)(z / tsr_config_elem_bytes(c, (int)mems[k]));
        in[k].y_size = (uint32_t)tsr_config_sram_depth(c, (int)mems[k]);
        in[k].x_size = 1;
        in[k].x_stride = 0;
    }
    in[2].push_next = 1; /* the last load-stage LOAD, ordered before FINISH */
    /* the uop LOAD runs in the compute stage, before this GEMM (uop 0 = 0,0,0) */
    in[3].opcode = TSR_OP_GEMM; /* reset every accumulator (and out) row */
    in[3].reset = 1;
    in[3].uop_bgn = 0;
    in[3].uop_end = 1;
    in[3].iter_out = c->acc_depth;
    in[3].iter_in = 1;
    in[3].dst_factor_out = 1;
    in[3].pop_prev = 1;
    in[4].opcode = TSR_OP_FINISH;
    rc = tsr_submit(dev, in, 5);
    if (!rc)
        rc = tsr_wait(dev, -1);
    int rf = tsr_mem_free(dev, z);
    return rc ? tsr_err_prefix(rc, "scrub: ") : rf;
}

typedef struct {
    int rc;                            /* submit + wait */
    char msg[300];                     /* its message */
    uint8_t *outs[TSR_GEN_MAX_BUFS];   /* outputs when rc == 0 */
} verdict_t;

static int run_one(tsr_device_t *dev, const tsr_gen_prog_t *p, const tsr_insn_t *insns, size_t n, verdict_t *v)
{
    memset(v, 0, sizeof *v);
    int rc = tsr_gen_load(dev, p);
    if (rc) /* harness failure, not a verdict */
        return rc;
    v->rc = tsr_submit(dev, insns, n);
    if (!v->rc)
        v->rc = tsr_wait(dev, -1);
    if (v->rc)
        snprintf(v->msg, sizeof v->msg, "%s", tsr_errmsg());
    else if ((rc = tsr_gen_read_outputs(dev, p, v->outs)))
        return rc;
    for (size_t i = 0; i < p->nbufs && !rc; i++)
        rc = tsr_mem_free(dev, p->bufs[i].addr);
    if (!rc)
        rc = tsr_hostile_scrub(dev);
    return rc;
}

int tsr_hostile_soak(const tsr_config_t *cfg, const char *backend, uint64_t seed, uint64_t count,
                     const tsr_shard_t *shard, int quiet, FILE *log)
{
    tsr_device_t *dev[2] = {NULL, NULL};
    const char *names[2] = {"fsim", backend};
    tsr_device_opts_t o;
    memset(&o, 0, sizeof o);
    o.skip_verify = 1;
    o.rtl.watchdog_cycles = 50000; /* deadlocked mutants end sooner */
    uint64_t disagree = 0, errors = 0, both_err = 0, both_ok = 0, racy_n = 0, racy_streams = 0;
    int rc = TSR_OK;
    for (int d = 0; d < 2 && !rc; d++)
        rc = tsr_device_open(names[d], cfg, &o, &dev[d]);
    if (rc) {
        fprintf(log, "tsr_soak --hostile: %s\n", tsr_errmsg());
        tsr_device_close(dev[0]);
        tsr_device_close(dev[1]);
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t ran = 0;
    /* the shard's programs, counted first so that i cannot wrap near 2^64 */
    const uint64_t mine = count > shard->index ? (count - shard->index - 1) / shard->count + 1 : 0;
    for (uint64_t j = 0; j < mine; j++, ran++) {
        const uint64_t i = shard->index + j * shard->count;
        uint64_t ps = seed + i;
        tsr_gen_prog_t p;
        if (tsr_gen_program(ps, cfg, NULL, &p)) {
            fprintf(log, "seed %" PRIu64 ": generator: %s\n", ps, tsr_errmsg());
            errors++;
            continue;
        }
        size_t n = p.ninsns, cap = p.ninsns + 4;
        tsr_insn_t *m = malloc(cap * sizeof *m);
        char desc[200];
        verdict_t v[2];
        memset(v, 0, sizeof v);
        if (!m) {
            errors++;
            tsr_gen_free(&p);
            continue;
        }
        memcpy(m, p.insns, n * sizeof *m);
        tsr_hostile_mutate(cfg, ps, m, &n, cap, desc, sizeof desc);
        int hr = TSR_OK;
        for (int d = 0; d < 2 && !hr; d++)
            hr = run_one(dev[d], &p, m, n, &v[d]);
        if (hr) {
            fprintf(log, "seed %" PRIu64 " (%s): harness error: %s\n", ps, desc, tsr_errmsg());
            errors++;
        } else {
            int bad = (v[0].rc != 0) != (v[1].rc != 0);
            tsr_gen_diff_t df;
            if (!bad && !v[0].rc && tsr_gen_compare(&p, v[0].outs, v[1].outs, &df))
                bad = 2;
            both_err += v[0].rc && v[1].rc;
            both_ok += !v[0].rc && !v[1].rc;
            char rwhy[200];
            int race = tsr_race_check(&p, m, n, rwhy, sizeof rwhy);
            racy_streams += race == TSR_RACE_FOUND;
            int racy = bad && race == TSR_RACE_FOUND;
            if (racy) { /* schedule-dependent by the ISA: listed, not counted */
                racy_n++;
                if (racy_n <= 5)
                    fprintf(log, "racy seed %" PRIu64 " (%s): fsim %s, %s %s; race: %s\n", ps, desc,
                            v[0].rc ? "error" : "ok", backend, v[1].rc ? "error" : "ok", rwhy);
                bad = 0;
            }
            if (bad) {
                if (disagree < 20) {
                    fprintf(log, "DISAGREE seed %" PRIu64 " (%s): fsim %s%s%s; %s %s%s%s", ps, desc,
                            v[0].rc ? "error: " : "ok", v[0].msg, "", backend, v[1].rc ? "error: " : "ok",
                            v[1].msg, "");
                    if (bad == 2)
                        fprintf(log, "; outputs differ: buffer %s byte %" PRIu64 " fsim 0x%02x %s 0x%02x (%" PRIu64
                                     " bytes)",
                                p.bufs[df.buf].name, df.offset, df.a, backend, df.b, df.nbytes);
                    if (race == TSR_RACE_UNKNOWN)
                        fprintf(log, "; race check: %s", rwhy);
                    fputc('\n', log);
                }
                disagree++;
            }
        }
        tsr_gen_outputs_free(v[0].outs);
        tsr_gen_outputs_free(v[1].outs);
        free(m);
        tsr_gen_free(&p);
        if (!quiet && (ran + 1) % 100 == 0)
            fprintf(stderr, "%" PRIu64 " streams, %" PRIu64 " disagreements so far\n", ran + 1, disagree);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    fprintf(log, "%" PRIu64 " streams, %" PRIu64 " disagreements (fsim vs %s; %" PRIu64 " both ok, %" PRIu64
                 " both error; %.1f s)",
            ran, disagree, backend, both_ok, both_err, secs);
    fprintf(log, "; %" PRIu64 " streams have a data race, %" PRIu64 " of them gave different results (not counted)",
            racy_streams, racy_n);
    if (errors)
        fprintf(log, ", %" PRIu64 " harness errors", errors);
    fputc('\n', log);
    for (int d = 0; d < 2; d++)
        tsr_device_close(dev[d]);
    return disagree || errors ? 1 : 0;
}
