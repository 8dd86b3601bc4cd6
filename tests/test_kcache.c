/*
 * test_kcache: the JIT kernel cache (jit/tsr_kcache.c) through the conv2d
 * lowering and its generic API. Why these tests: a cache that serves a
 * wrong kernel is worse than none, so every cached run is compared with
 * the plain-C operator reference (tests/tsr_opref.c, exact equality, seed
 * and first differing element reported), cached streams are compared with
 * freshly generated ones, and cache files are damaged in every way we can
 * think of (flipped bytes anywhere, truncation, trailing bytes, other
 * version, other config, valid checksum over a bad tiling or an
 * undecodable instruction): each must be detected, counted, deleted and
 * regenerated.
 *
 * With TSR_KCACHE_BENCH=1 the program instead runs the bench smoke test:
 * `tessera bench --kind resnet18 --backend fsim --layers C10 --check`
 * twice in a fresh cache directory, parsing the table and checking that
 * its numbers are self-consistent and that the second process got its
 * kernel from the on-disk cache (CTest entry bench_resnet18_smoke; with
 * TSR_TEST_BACKEND=rtl also cycles, utilisation <= 1 and ratio <= 1).
 *
 * Backend: fsim (with a random stage interleaving); TSR_TEST_BACKEND=rtl
 * runs the same cases on the RTL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsr_conv2d.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_eltwise.h"
#include "tsr_kcache.h"
#include "tsr_opref.h"
#include "tsr_testenv.h"

#define SEED0 20261123u

static const char *backend(void) { return tsr_test_backend(); }

static tsr_device_t *open_dev(const char *cfgname) { return tsr_test_open(cfgname, SEED0 | 1); }

/* A fresh, empty temporary cache directory (removed by rm_dir). */
static void make_dir(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/tsr_kcache_XXXXXX");
    if (!mkdtemp(buf))
        fail_msg("mkdtemp failed");
}

static int count_files(const char *dir, char *one, size_t n)
{
    DIR *d = opendir(dir);
    int k = 0;
    struct dirent *de;
    if (!d)
        return 0;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') {
            if (one)
                snprintf(one, n, "%s/%s", dir, de->d_name);
            k++;
        }
    closedir(d);
    return k;
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[600];
    if (!d)
        return;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(dir);
}

static tsr_kcache_t *make_cache(tsr_device_t *dev, const char *dir, size_t max_entries, int disabled)
{
    tsr_kcache_opts_t o = {.max_entries = max_entries, .dir = dir, .disabled = disabled, .quiet = 1};
    tsr_kcache_t *kc = NULL;
    if (tsr_kcache_create(dev, &o, &kc))
        fail_msg("kcache_create: %s", tsr_errmsg());
    return kc;
}

static tsr_kcache_stats_t stats(tsr_device_t *dev)
{
    tsr_kcache_stats_t st;
    assert_int_equal(tsr_kcache_stats(tsr_kcache_get(dev), &st), TSR_OK);
    return st;
}

/* ---------------------------------------------------------------- cases */

static int rnd(uint64_t *s, int lo, int hi) { return tsr_test_rnd(s, lo, hi); }

/* One conv2d case: parameters, their arrays and the data. */
typedef struct {
    tsr_conv2d_params_t p;
    int32_t w_zp[512], mult[512], shift[512];
    uint64_t seed; /* data seed (printed on failure) */
} ccase_t;

static void fix(ccase_t *k)
{
    k->p.w_zp = k->w_zp;
    k->p.mult = k->mult;
    k->p.shift = k->shift;
}

static ccase_t mk(int cin, int h, int w, int cout, int kk, int s, int pad, int per_channel)
{
    ccase_t k;
    memset(&k, 0, sizeof k);
    tsr_conv2d_params_t *p = &k.p;
    p->n = 1;
    p->c_in = cin;
    p->h = h;
    p->w = w;
    p->c_out = cout;
    p->kh = p->kw = kk;
    p->stride_h = p->stride_w = s;
    p->pad_top = p->pad_left = p->pad_bottom = p->pad_right = pad;
    p->groups = 1;
    p->x_dtype = p->w_dtype = p->y_dtype = TSR_DT_INT8;
    p->x_zp = -5;
    p->y_zp = 3;
    p->w_zp_count = 1;
    p->rq_count = per_channel ? cout : 1;
    for (int i = 0; i < p->rq_count; i++) {
        k.mult[i] = 1300000000 + (i % 64) * 10000000;
        k.shift[i] = -8 - i % 2;
    }
    p->act_min = -128;
    p->act_max = 127;
    k.seed = 1;
    fix(&k);
    return k;
}

static const char *desc(const ccase_t *k, char *buf, size_t n)
{
    const tsr_conv2d_params_t *p = &k->p;
    snprintf(buf, n, "seed %llu: x [%d,%d,%d,%d] w %dx%d s%d pad %d groups %d, %s requant mult[0] %d shift[0] %d",
             (unsigned long long)k->seed, p->n, p->c_in, p->h, p->w, p->kh, p->kw, p->stride_h, p->pad_top, p->groups,
             p->rq_count > 1 ? "per-channel" : "per-tensor", p->mult[0], p->shift[0]);
    return buf;
}

/* Data of a case (from its seed). */
typedef struct {
    uint8_t *x, *w, *y, *yr;
    int32_t *bias;
    size_t nx, nw, ny;
    int oh, ow;
} cdata_t;

static void data_make(ccase_t *k, cdata_t *d)
{
    fix(k);
    tsr_conv2d_params_t *p = &k->p;
    assert_int_equal(tsr_conv2d_check(p, &d->oh, &d->ow), TSR_OK);
    int cin_g = p->groups == 1 ? p->c_in : 1;
    d->nx = (size_t)p->n * p->c_in * p->h * p->w;
    d->nw = (size_t)p->c_out * cin_g * p->kh * p->kw;
    d->ny = (size_t)p->n * p->c_out * d->oh * d->ow;
    d->x = malloc(d->nx);
    d->w = malloc(d->nw);
    d->y = malloc(d->ny);
    d->yr = malloc(d->ny);
    d->bias = malloc(sizeof(int32_t) * (size_t)p->c_out);
    assert_true(d->x && d->w && d->y && d->yr && d->bias);
    uint64_t s = k->seed * 7919 + 11;
    for (size_t i = 0; i < d->nx; i++)
        d->x[i] = (uint8_t)rnd(&s, -128, 127);
    for (size_t i = 0; i < d->nw; i++)
        d->w[i] = (uint8_t)rnd(&s, -128, 127);
    for (int i = 0; i < p->c_out; i++)
        d->bias[i] = rnd(&s, -30000, 30000);
    /* the reference */
    opref_tensor_t tx = {p->x_dtype == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8, p->n, p->c_in, p->h, p->w, d->x, p->x_zp};
    opref_weights_t tw = {OPREF_INT8, p->c_out, cin_g, p->kh, p->kw, d->w, k->w_zp, p->w_zp_count};
    opref_tensor_t ty = {OPREF_INT8, p->n, p->c_out, d->oh, d->ow, d->yr, p->y_zp};
    opref_conv_params_t cp = {p->stride_h, p->stride_w, p->pad_top, p->pad_left, p->pad_bottom, p->pad_right,
                              p->groups};
    opref_requant_t rq = {p->rq_count, k->mult, k->shift, p->act_min, p->act_max, NULL};
    if (opref_conv2d(&tx, &tw, d->bias, &cp, &rq, &ty))
        fail_msg("reference: %s", tsr_errmsg());
}

static void data_free(cdata_t *d)
{
    free(d->x);
    free(d->w);
    free(d->y);
    free(d->yr);
    free(d->bias);
}

/* Exact comparison with the reference; the first differing element named. */
static void compare(const ccase_t *k, const cdata_t *d, const char *what)
{
    char b[300];
    for (size_t i = 0; i < d->ny; i++)
        if (d->y[i] != d->yr[i]) {
            size_t ox = i % (size_t)d->ow, oy = i / d->ow % (size_t)d->oh, co = i / ((size_t)d->ow * d->oh);
            fail_msg("%s, %s: output [0][%zu][%zu][%zu] (flat %zu of %zu): got %d, want %d", what, desc(k, b, sizeof b),
                     co, oy, ox, i, d->ny, (int8_t)d->y[i], (int8_t)d->yr[i]);
        }
}

/* Run a planned case on the device and compare with the reference. */
static void run_plan(tsr_device_t *dev, const ccase_t *k, const tsr_conv2d_plan_t *pl, cdata_t *d, const char *what)
{
    char b[300];
    int rc = tsr_conv2d_write_weights(dev, pl, d->w, d->bias);
    if (!rc)
        rc = tsr_conv2d_write_input(dev, pl, d->x);
    if (!rc)
        rc = tsr_conv2d_exec(dev, pl);
    if (!rc)
        rc = tsr_conv2d_read_output(dev, pl, d->y);
    if (rc)
        fail_msg("%s, %s: run: %s", what, desc(k, b, sizeof b), tsr_errmsg());
    compare(k, d, what);
}

/* Plan, check the cache status, run, compare, free. */
static void plan_run(tsr_device_t *dev, ccase_t *k, int want_status, const char *what)
{
    char b[300];
    cdata_t d;
    data_make(k, &d);
    tsr_conv2d_plan_t pl;
    if (tsr_conv2d_plan(dev, &k->p, &pl))
        fail_msg("%s, %s: plan: %s", what, desc(k, b, sizeof b), tsr_errmsg());
    if (want_status >= 0 && pl.kcache != want_status)
        fail_msg("%s, %s: cache status %d, want %d", what, desc(k, b, sizeof b), pl.kcache, want_status);
    run_plan(dev, k, &pl, &d, what);
    tsr_conv2d_plan_free(dev, &pl);
    data_free(&d);
}

/* A plan's stream with its buffers' element offsets taken out again (the
 * test's own inverse of the relocation), for comparing streams of plans
 * whose buffers sit at different addresses. */
static tsr_insn_t *normalized(tsr_device_t *dev, const tsr_conv2d_plan_t *pl)
{
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_insn_t *v = malloc(pl->ninsns * sizeof *v);
    assert_non_null(v);
    memcpy(v, pl->insns, pl->ninsns * sizeof *v);
    for (size_t i = 0; i < pl->ninsns; i++) {
        tsr_insn_t *in = &v[i];
        if ((in->opcode != TSR_OP_LOAD && in->opcode != TSR_OP_STORE) || !in->x_size)
            continue;
        uint64_t a = in->opcode == TSR_OP_STORE ? pl->y_addr
                     : in->mem_type == TSR_MEM_UOP ? pl->uop_addr
                     : in->mem_type == TSR_MEM_INP ? pl->x_addr
                     : in->mem_type == TSR_MEM_WGT ? pl->w_addr
                                                   : pl->c_addr;
        uint32_t m = in->opcode == TSR_OP_STORE ? (uint32_t)TSR_MEM_OUT : in->mem_type;
        in->dram_base -= (uint32_t)(a / tsr_config_elem_bytes(c, (int)m));
    }
    return v;
}

static void same_stream(tsr_device_t *da, const tsr_conv2d_plan_t *a, tsr_device_t *db, const tsr_conv2d_plan_t *b)
{
    assert_int_equal(a->ninsns, b->ninsns);
    assert_int_equal(a->nuops, b->nuops);
    tsr_insn_t *x = normalized(da, a), *y = normalized(db, b);
    for (size_t i = 0; i < a->ninsns; i++)
        if (memcmp(&x[i], &y[i], sizeof x[i]))
            fail_msg("streams differ at instruction %zu (opcode %u vs %u, dram_base %u vs %u)", i, x[i].opcode,
                     y[i].opcode, x[i].dram_base, y[i].dram_base);
    free(x);
    free(y);
    /* the uop kernels too */
    const tsr_config_t *c = tsr_device_config(da);
    size_t n = a->nuops * c->uop_bytes;
    uint8_t *ua = malloc(n), *ub = malloc(n);
    assert_true(ua && ub);
    assert_int_equal(tsr_mem_read(da, a->uop_addr, ua, n), TSR_OK);
    assert_int_equal(tsr_mem_read(db, b->uop_addr, ub, n), TSR_OK);
    assert_memory_equal(ua, ub, n);
    free(ua);
    free(ub);
}

/* ---------------------------------------------------------------- tests */

/* Same signature twice: a hit, sharing the uop buffer, no generation; a
 * different shape or stream-relevant value: a miss; different multipliers
 * (constant rows only): a hit. */
static void test_hits_misses(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("default");
    make_cache(dev, "", 0, 0);
    ccase_t a = mk(32, 9, 9, 40, 3, 1, 1, 1);
    fix(&a);
    tsr_conv2d_plan_t p1, p2;
    assert_int_equal(tsr_conv2d_plan(dev, &a.p, &p1), TSR_OK);
    assert_int_equal(p1.kcache, TSR_KC_MISS);
    assert_int_equal(tsr_conv2d_plan(dev, &a.p, &p2), TSR_OK);
    assert_int_equal(p2.kcache, TSR_KC_HIT);
    assert_true(p1.uop_addr == p2.uop_addr); /* one upload, shared */
    assert_true(p1.x_addr != p2.x_addr);     /* data buffers are per plan */
    same_stream(dev, &p1, dev, &p2);
    tsr_kcache_stats_t st = stats(dev);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.inserts, 1);
    assert_int_equal(st.entries, 1);
    assert_true(st.gen_ns > 0);
    /* both plans run correctly, the second after the first is freed */
    cdata_t d;
    data_make(&a, &d);
    run_plan(dev, &a, &p1, &d, "first plan");
    tsr_conv2d_plan_free(dev, &p1);
    a.seed = 2;
    data_free(&d);
    data_make(&a, &d);
    run_plan(dev, &a, &p2, &d, "second plan (hit)");
    tsr_conv2d_plan_free(dev, &p2);
    data_free(&d);
    /* multipliers and per-channel shift values are not in the signature */
    for (int i = 0; i < a.p.rq_count; i++) {
        a.mult[i] = 1100000000 - i * 3000000;
        a.shift[i] = -7 - i % 3;
    }
    a.seed = 3;
    plan_run(dev, &a, TSR_KC_HIT, "other multipliers");
    /* stream-relevant changes miss */
    ccase_t b = a;
    b.p.y_zp = 4;
    plan_run(dev, &b, TSR_KC_MISS, "other output zero point");
    b = a;
    b.p.act_min = -100;
    plan_run(dev, &b, TSR_KC_MISS, "other clamp");
    b = a;
    b.shift[0] = 1; /* a positive shift adds an ALU step */
    plan_run(dev, &b, TSR_KC_MISS, "positive shift");
    b = a;
    b.p.h = 10;
    plan_run(dev, &b, TSR_KC_MISS, "other height");
    b = a;
    b.p.x_zp = 7;
    plan_run(dev, &b, TSR_KC_MISS, "other input zero point");
    b = a;
    b.p.rq_count = 1;
    plan_run(dev, &b, TSR_KC_MISS, "per tensor");
    b.shift[0] = -9;
    plan_run(dev, &b, TSR_KC_MISS, "per tensor, other shift (an immediate)");
    st = stats(dev);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.misses, 8);
    assert_int_equal(st.entries, 8);
    assert_int_equal(st.disk_writes, 0); /* memory-only cache */
    /* bad parameters still fail cleanly through the cache */
    b = a;
    b.p.kh = 0;
    tsr_conv2d_plan_t pb;
    assert_int_equal(tsr_conv2d_plan(dev, &b.p, &pb), TSR_EINVAL);
    assert_int_equal(tsr_conv2d_plan(NULL, &b.p, &pb), TSR_EINVAL);
    tsr_device_close(dev);
}

/* Identical results cached and uncached, on a spread of layer shapes, each
 * compared with the reference; identical streams and uops. */
static void test_cached_vs_uncached(void **state)
{
    (void)state;
    tsr_device_t *du = open_dev("default"), *dc = open_dev("default");
    make_cache(du, "", 0, 1); /* disabled: every plan generates */
    make_cache(dc, "", 0, 0);
    ccase_t cases[6];
    cases[0] = mk(64, 14, 14, 64, 3, 1, 1, 1);  /* C2-like, reduced */
    cases[1] = mk(64, 14, 14, 128, 3, 2, 1, 1); /* C3-like */
    cases[2] = mk(64, 14, 14, 128, 1, 2, 0, 0); /* C4-like */
    cases[3] = mk(3, 40, 40, 16, 7, 2, 3, 1);   /* C1-like */
    cases[4] = mk(24, 8, 8, 24, 3, 1, 1, 1);    /* depthwise */
    cases[4].p.groups = 24;
    cases[5] = mk(40, 6, 7, 20, 5, 1, 2, 1);
    cases[5].p.x_dtype = TSR_DT_UINT8;
    cases[5].p.x_zp = 131;
    for (int i = 0; i < 6; i++) {
        ccase_t *k = &cases[i];
        k->seed = 100 + (uint64_t)i;
        fix(k);
        tsr_conv2d_plan_t pu, pm, ph;
        char b[300];
        if (tsr_conv2d_plan(du, &k->p, &pu))
            fail_msg("%s: plan: %s", desc(k, b, sizeof b), tsr_errmsg());
        assert_int_equal(pu.kcache, TSR_KC_NONE);
        assert_int_equal(tsr_conv2d_plan(dc, &k->p, &pm), TSR_OK);
        assert_int_equal(pm.kcache, TSR_KC_MISS);
        assert_int_equal(tsr_conv2d_plan(dc, &k->p, &ph), TSR_OK);
        assert_int_equal(ph.kcache, TSR_KC_HIT);
        same_stream(du, &pu, dc, &ph);
        assert_int_equal(pu.toh, ph.toh);
        assert_int_equal(pu.tco, ph.tco);
        assert_int_equal(pu.tci, ph.tci);
        assert_int_equal(pu.gemm_ops, ph.gemm_ops);
        assert_int_equal(pu.dram_bytes, ph.dram_bytes);
        cdata_t d;
        data_make(k, &d);
        run_plan(du, k, &pu, &d, "uncached");
        uint8_t *yu = malloc(d.ny);
        assert_non_null(yu);
        memcpy(yu, d.y, d.ny);
        memset(d.y, 0xa5, d.ny);
        run_plan(dc, k, &ph, &d, "cached (hit)");
        assert_memory_equal(yu, d.y, d.ny);
        free(yu);
        data_free(&d);
        tsr_conv2d_plan_free(du, &pu);
        tsr_conv2d_plan_free(dc, &pm);
        tsr_conv2d_plan_free(dc, &ph);
    }
    tsr_kcache_stats_t su = stats(du), sc = stats(dc);
    assert_int_equal(su.hits + su.entries, 0);
    assert_int_equal(su.misses, 6);
    assert_int_equal(sc.hits, 6);
    assert_int_equal(sc.misses, 6);
    /* the one-call API goes through the cache too */
    ccase_t k = cases[0];
    fix(&k);
    cdata_t d;
    data_make(&k, &d);
    assert_int_equal(tsr_conv2d_run(dc, &k.p, d.x, d.w, d.bias, d.y), TSR_OK);
    compare(&k, &d, "tsr_conv2d_run");
    data_free(&d);
    assert_int_equal(stats(dc).hits, 7);
    tsr_device_close(du);
    tsr_device_close(dc);
}

/* The memo keeps at most 64 MiB of keys and values (packed weight images
 * are values): past it the oldest entries go, the newest stays, and a key
 * is found only by its whole bytes. Fails with the entry count as the only
 * bound (the first entry would still be there). */
static void test_memo_bytes(void **state)
{
    (void)state;
    tsr_device_t *d = open_dev("default");
    make_cache(d, "", 0, 0);
    tsr_kcache_t *kc = tsr_kcache_get(d);
    const size_t n = (size_t)9 << 20; /* eight 9 MiB values: 72 MiB, so the first goes */
    uint8_t *v = malloc(n), *back = malloc(n);
    assert_non_null(v);
    assert_non_null(back);
    for (uint32_t k = 0; k < 8; k++) {
        memset(v, (int)k + 1, n);
        assert_int_equal(tsr_kcache_memo_put(kc, &k, sizeof k, v, n), TSR_OK);
    }
    uint32_t k0 = 0, k7 = 7;
    assert_int_equal(tsr_kcache_memo_get(kc, &k7, sizeof k7, back, n), 1);
    assert_int_equal(back[n - 1], 8);
    assert_int_equal(tsr_kcache_memo_get(kc, &k0, sizeof k0, back, n), 0); /* 72 MiB > 64: gone */
    uint32_t k1 = 1;
    assert_int_equal(tsr_kcache_memo_get(kc, &k1, sizeof k1, back, n), 1);
    const uint8_t longer[5] = {1, 0, 0, 0, 0}; /* the key 1 and one byte more: not key 1 */
    assert_int_equal(tsr_kcache_memo_get(kc, longer, sizeof longer, back, n), 0);
    free(v);
    free(back);
    tsr_device_close(d);
}

/* Two layers of one shape whose requantization differs (different
 * signatures, so two kernels) share one tiling search: the second finds the
 * first's tiling in the memo, and its stream is the one a device that never
 * saw the first generates. A memo keyed too loosely (a hit across shapes)
 * or a memo result that differs from a fresh search fails here. */
static void test_tiling_memo(void **state)
{
    (void)state;
    tsr_device_t *dm = open_dev("default"), *df = open_dev("default");
    make_cache(dm, "", 0, 0);
    make_cache(df, "", 0, 0);
    ccase_t a = mk(64, 14, 14, 128, 3, 1, 1, 0), b = a, other = mk(64, 14, 14, 96, 3, 1, 1, 0);
    b.shift[0] = a.shift[0] - 1; /* per tensor: the shift is an instruction immediate */
    b.mult[0] = a.mult[0] - 12345;
    fix(&a);
    fix(&b);
    fix(&other);
    tsr_conv2d_plan_t pa, pb, po, pf;
    assert_int_equal(tsr_conv2d_plan(dm, &a.p, &pa), TSR_OK);
    assert_int_equal(stats(dm).memo_hits, 0);
    assert_int_equal(tsr_conv2d_plan(dm, &other.p, &po), TSR_OK); /* another shape: searched */
    assert_int_equal(stats(dm).memo_hits, 0);
    assert_int_equal(tsr_conv2d_plan(dm, &b.p, &pb), TSR_OK);
    assert_int_equal(pb.kcache, TSR_KC_MISS); /* its own kernel */
    assert_int_equal(stats(dm).memo_hits, 1); /* but a's search */
    assert_int_equal(tsr_conv2d_plan(df, &b.p, &pf), TSR_OK);
    assert_int_equal(stats(df).memo_hits, 0);
    same_stream(dm, &pb, df, &pf);
    cdata_t d;
    data_make(&b, &d);
    run_plan(dm, &b, &pb, &d, "tiling from the memo");
    compare(&b, &d, "tiling from the memo");
    data_free(&d);
    tsr_conv2d_plan_free(dm, &pa);
    tsr_conv2d_plan_free(dm, &po);
    tsr_conv2d_plan_free(dm, &pb);
    tsr_conv2d_plan_free(df, &pf);
    tsr_device_close(dm);
    tsr_device_close(df);
}

/* Kernels written by one device instance are read by the next (the same
 * path a second process takes), run correctly and equal the original. */
static void test_disk_roundtrip(void **state)
{
    (void)state;
    char dir[64], file[600];
    make_dir(dir, sizeof dir);
    ccase_t a = mk(48, 10, 10, 32, 3, 1, 1, 1), b = mk(16, 12, 12, 16, 1, 2, 0, 0);
    fix(&a);
    fix(&b);
    tsr_device_t *d1 = open_dev("default");
    make_cache(d1, dir, 0, 0);
    tsr_conv2d_plan_t p1;
    assert_int_equal(tsr_conv2d_plan(d1, &a.p, &p1), TSR_OK);
    assert_int_equal(p1.kcache, TSR_KC_MISS);
    plan_run(d1, &b, TSR_KC_MISS, "b on device 1");
    assert_int_equal(stats(d1).disk_writes, 2);
    assert_int_equal(count_files(dir, file, sizeof file), 2);

    tsr_device_t *d2 = open_dev("default");
    make_cache(d2, dir, 0, 0);
    tsr_conv2d_plan_t p2;
    assert_int_equal(tsr_conv2d_plan(d2, &a.p, &p2), TSR_OK);
    assert_int_equal(p2.kcache, TSR_KC_DISK);
    same_stream(d1, &p1, d2, &p2);
    cdata_t d;
    data_make(&a, &d);
    run_plan(d2, &a, &p2, &d, "from disk");
    data_free(&d);
    tsr_conv2d_plan_free(d2, &p2);
    plan_run(d2, &a, TSR_KC_HIT, "again, now in memory");
    plan_run(d2, &b, TSR_KC_DISK, "b from disk");
    tsr_kcache_stats_t st = stats(d2);
    assert_int_equal(st.disk_hits, 2);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 0);
    assert_int_equal(st.disk_writes, 0);
    assert_int_equal(st.disk_rejects, 0);
    tsr_conv2d_plan_free(d1, &p1);
    tsr_device_close(d1);
    tsr_device_close(d2);
    /* another config never reads these files */
    tsr_device_t *d3 = open_dev("tiny");
    make_cache(d3, dir, 0, 0);
    ccase_t t = mk(8, 6, 6, 8, 3, 1, 1, 0);
    plan_run(d3, &t, TSR_KC_MISS, "tiny");
    tsr_device_close(d3);
    /* a memory-only cache leaves the directory alone */
    tsr_device_t *d4 = open_dev("default");
    make_cache(d4, "", 0, 0);
    plan_run(d4, &a, TSR_KC_MISS, "memory only");
    tsr_device_close(d4);
    assert_int_equal(count_files(dir, NULL, 0), 3);
    /* the directory's byte budget: least recently used files go first */
    tsr_device_t *d5 = open_dev("default");
    tsr_kcache_opts_t o = {.dir = dir, .max_disk_bytes = 1, .quiet = 1};
    tsr_kcache_t *kc;
    assert_int_equal(tsr_kcache_create(d5, &o, &kc), TSR_OK);
    ccase_t c = mk(8, 5, 5, 8, 1, 1, 0, 0);
    plan_run(d5, &c, TSR_KC_MISS, "over a 1-byte budget");
    assert_int_equal(count_files(dir, NULL, 0), 0);
    tsr_device_close(d5);
    rm_dir(dir);
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Recompute the trailing checksum of file bytes b (n bytes), so a damage
 * passes the checksum and must be caught by the other checks. */
static void reseal(uint8_t *b, size_t n)
{
    uint64_t h = fnv(b, n - 8);
    for (int i = 0; i < 8; i++)
        b[n - 8 + i] = (uint8_t)(h >> (8 * i));
}

static uint32_t rd32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Damage the cache file in many ways; each time a new device must reject
 * it (counted, file deleted), regenerate, run correctly and write a good
 * file that the next device reads. */
static void test_disk_corruption(void **state)
{
    (void)state;
    /* the source identity: a SHA-256 in hex, made by the build */
    const char *sid = tsr_kcache_source_id();
    assert_int_equal(strlen(sid), 64);
    assert_int_equal(strspn(sid, "0123456789abcdef"), 64);
    char dir[64], file[600];
    make_dir(dir, sizeof dir);
    ccase_t a = mk(20, 7, 7, 24, 3, 1, 1, 1);
    tsr_device_t *d0 = open_dev("default");
    make_cache(d0, dir, 0, 0);
    plan_run(d0, &a, TSR_KC_MISS, "writer");
    tsr_device_close(d0);
    assert_int_equal(count_files(dir, file, sizeof file), 1);
    FILE *f = fopen(file, "rb");
    assert_non_null(f);
    static uint8_t good[1 << 20];
    size_t n = fread(good, 1, sizeof good, f);
    fclose(f);
    assert_true(n > 100 && n < sizeof good);
    const size_t sig_len = rd32(good + 32), meta_len = rd32(good + 36), ninsns = rd32(good + 40);
    const size_t sig_at = 64, meta_at = sig_at + sig_len, insn_at = meta_at + meta_len, uop_at = insn_at + 16 * ninsns;
    assert_true(uop_at < n - 8);

    enum { FLIP, TRUNC, APPEND, VERSION, CONFIG, SOURCE, SIGBYTE, BADTILING, BADINSN, BADMAGIC, EMPTY };
    struct {
        int kind;
        size_t at;
        const char *name;
    } dmg[] = {
        {FLIP, 9, "flipped version byte"},       {FLIP, 20, "flipped config hash byte"},
        {FLIP, 34, "flipped sig length"},        {FLIP, 42, "flipped instruction count"},
        {FLIP, sig_at + 3, "flipped signature"}, {FLIP, meta_at, "flipped metadata"},
        {FLIP, insn_at + 17, "flipped instruction"}, {FLIP, uop_at + 1, "flipped uop"},
        {FLIP, n - 1, "flipped checksum"},       {TRUNC, n - 1, "truncated by one byte"},
        {TRUNC, n / 2, "truncated to half"},     {TRUNC, 10, "truncated to 10 bytes"},
        {EMPTY, 0, "empty file"},                {APPEND, 0, "trailing byte"},
        {VERSION, 0, "other format version (resealed)"}, {CONFIG, 0, "other config hash (resealed)"},
        {SOURCE, 0, "written by another build of the JIT's sources (resealed)"},
        {SIGBYTE, 0, "other signature under this name (resealed)"},
        {BADTILING, 0, "tiling that does not fit (resealed)"},
        {BADINSN, 0, "undecodable instruction (resealed)"}, {BADMAGIC, 0, "bad magic"},
    };
    static uint8_t b[(1 << 20) + 1];
    for (size_t i = 0; i < sizeof dmg / sizeof dmg[0]; i++) {
        size_t m = n;
        memcpy(b, good, n);
        switch (dmg[i].kind) {
        case FLIP: b[dmg[i].at] ^= 0x40; break;
        case TRUNC: m = dmg[i].at; break;
        case EMPTY: m = 0; break;
        case APPEND: b[m++] = 0; break;
        case VERSION: wr32(b + 8, rd32(b + 8) + 1); reseal(b, m); break;
        case CONFIG: b[16] ^= 1; reseal(b, m); break;
        case SOURCE: b[60] ^= 1; reseal(b, m); break; /* the source hash at 56 */
        case SIGBYTE: b[sig_at + sig_len - 1] ^= 1; reseal(b, m); break;
        case BADTILING: wr32(b + meta_at, 100000); reseal(b, m); break; /* toh */
        case BADINSN: memset(b + insn_at + 16, 0xff, 16); reseal(b, m); break;
        case BADMAGIC: b[0] = 'X'; break;
        }
        f = fopen(file, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, m, f), m);
        fclose(f);
        tsr_device_t *dev = open_dev("default");
        tsr_kcache_t *kc = make_cache(dev, dir, 0, 0);
        (void)kc;
        a.seed = 10 + i;
        /* a bad tiling passes the cache's checks (valid file) and is caught
         * by the lowering: regenerated and overwritten */
        plan_run(dev, &a, TSR_KC_MISS, dmg[i].name);
        tsr_kcache_stats_t st = stats(dev);
        if (dmg[i].kind != BADTILING && st.disk_rejects != 1)
            fail_msg("%s: %llu rejects, want 1", dmg[i].name, (unsigned long long)st.disk_rejects);
        assert_int_equal(st.disk_writes, 1); /* regenerated and rewritten */
        tsr_device_close(dev);
        /* the rewritten file is good again */
        assert_int_equal(count_files(dir, NULL, 0), 1);
        dev = open_dev("default");
        make_cache(dev, dir, 0, 0);
        plan_run(dev, &a, TSR_KC_DISK, "after regeneration");
        tsr_device_close(dev);
    }
    /* one case with the warning printed (the default) */
    f = fopen(file, "r+b");
    assert_non_null(f);
    fseek(f, (long)(uop_at + 2), SEEK_SET);
    fputc(0x5a ^ good[uop_at + 2], f);
    fclose(f);
    tsr_device_t *dev = open_dev("default");
    tsr_kcache_opts_t o = {.dir = dir};
    tsr_kcache_t *kc;
    assert_int_equal(tsr_kcache_create(dev, &o, &kc), TSR_OK);
    printf("  (a warning about a corrupted cache file is expected here:)\n");
    fflush(stdout);
    plan_run(dev, &a, TSR_KC_MISS, "warned");
    assert_int_equal(stats(dev).disk_rejects, 1);
    tsr_device_close(dev);
    /* an unreadable directory entry (a directory where the file should
     * be) is rejected and the kernel generated; nothing crashes */
    unlink(file);
    assert_int_equal(mkdir(file, 0755), 0);
    dev = open_dev("default");
    make_cache(dev, dir, 0, 0);
    plan_run(dev, &a, TSR_KC_MISS, "directory in the way");
    assert_int_equal(stats(dev).disk_rejects, 1);
    tsr_device_close(dev);
    rmdir(file);
    /* a FIFO where the file should be: refused without blocking (a plain
     * open would wait for a writer forever; the alarm ends the test) */
    assert_int_equal(mkfifo(file, 0600), 0);
    dev = open_dev("default");
    make_cache(dev, dir, 0, 0);
    alarm(120);
    plan_run(dev, &a, TSR_KC_MISS, "FIFO in the way");
    alarm(0);
    assert_int_equal(stats(dev).disk_rejects, 1);
    tsr_device_close(dev);
    unlink(file);
    rm_dir(dir);
}

/* LRU eviction by entry count and by bytes; an evicted kernel still held by
 * a plan keeps its uop buffer until the plan is freed. */
static void test_eviction(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("default");
    make_cache(dev, "", 3, 0);
    ccase_t k[5];
    for (int i = 0; i < 5; i++) {
        k[i] = mk(16, 6 + i, 6, 16, 3, 1, 1, 0);
        k[i].seed = 40 + (uint64_t)i;
    }
    tsr_conv2d_plan_t held;
    fix(&k[0]);
    assert_int_equal(tsr_conv2d_plan(dev, &k[0].p, &held), TSR_OK);
    for (int i = 1; i < 3; i++)
        plan_run(dev, &k[i], TSR_KC_MISS, "fill");
    plan_run(dev, &k[0], TSR_KC_HIT, "k0 used: most recent");
    plan_run(dev, &k[3], TSR_KC_MISS, "k3 evicts k1");
    plan_run(dev, &k[4], TSR_KC_MISS, "k4 evicts k2");
    tsr_kcache_stats_t st = stats(dev);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.evictions, 2);
    plan_run(dev, &k[0], TSR_KC_HIT, "k0 kept");
    plan_run(dev, &k[4], TSR_KC_HIT, "k4 kept");
    plan_run(dev, &k[1], TSR_KC_MISS, "k1 was evicted");
    plan_run(dev, &k[2], TSR_KC_MISS, "k2 was evicted");
    /* k0 is now evicted but held: its uops are still there */
    assert_int_equal(stats(dev).entries, 3);
    cdata_t d;
    data_make(&k[0], &d);
    run_plan(dev, &k[0], &held, &d, "held plan of an evicted kernel");
    data_free(&d);
    tsr_conv2d_plan_free(dev, &held);
    /* a byte bound: room for about one kernel */
    tsr_kcache_opts_t o = {.max_bytes = 1, .dir = "", .quiet = 1};
    tsr_kcache_t *kc;
    assert_int_equal(tsr_kcache_create(dev, &o, &kc), TSR_OK); /* replaces (frees) the old cache */
    plan_run(dev, &k[0], TSR_KC_MISS, "byte bound 1");
    plan_run(dev, &k[1], TSR_KC_MISS, "byte bound 2");
    st = stats(dev);
    assert_int_equal(st.entries, 1); /* the newest stays even over the bound */
    assert_int_equal(st.evictions, 1);
    plan_run(dev, &k[1], TSR_KC_HIT, "newest kept");
    /* freeing the cache explicitly while a plan holds a kernel */
    tsr_conv2d_plan_t p;
    fix(&k[1]);
    assert_int_equal(tsr_conv2d_plan(dev, &k[1].p, &p), TSR_OK);
    tsr_kcache_free(kc);
    data_make(&k[1], &d);
    run_plan(dev, &k[1], &p, &d, "plan outliving its cache");
    data_free(&d);
    tsr_conv2d_plan_free(dev, &p);
    plan_run(dev, &k[1], -1, "a new default cache is created lazily");
    tsr_device_close(dev);
}

/* The generic API: bad arguments are refused with a message; a lowering
 * other than conv2d can store and get back its own kernel. */
static void test_generic_api(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_kcache_t *kc = make_cache(dev, "", 0, 0);
    tsr_kcache_ref_t *r = NULL;
    uint8_t sig[TSR_KCACHE_MAX_SIG + 1];
    memset(sig, 7, sizeof sig);
    assert_int_equal(tsr_kcache_lookup(kc, NULL, 4, &r), TSR_EINVAL);
    assert_int_equal(tsr_kcache_lookup(kc, sig, 0, &r), TSR_EINVAL);
    assert_int_equal(tsr_kcache_lookup(kc, sig, sizeof sig, &r), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "signature"));
    assert_int_equal(tsr_kcache_lookup(NULL, sig, 4, &r), TSR_EINVAL);
    assert_int_equal(tsr_kcache_lookup(kc, sig, 4, &r), 0);
    assert_null(r);
    /* a hand-made kernel: 2 uops, a LOAD of them and FINISH */
    tsr_insn_t in[2];
    memset(in, 0, sizeof in);
    in[0].opcode = TSR_OP_LOAD;
    in[0].mem_type = TSR_MEM_UOP;
    in[0].y_size = 1;
    in[0].x_size = in[0].x_stride = 2;
    in[1].opcode = TSR_OP_FINISH;
    uint8_t uops[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    const char meta[] = "pool v1";
    tsr_kernel_t k = {meta, sizeof meta, in, 2, uops, 2, 1000};
    tsr_kernel_t bad = k;
    bad.nuops = c->uop_depth + 1;
    assert_int_equal(tsr_kcache_insert(kc, sig, 4, &bad, &r), TSR_EINVAL);
    bad = k;
    bad.insns = NULL;
    assert_int_equal(tsr_kcache_insert(kc, sig, 4, &bad, &r), TSR_EINVAL);
    assert_int_equal(tsr_kcache_insert(kc, sig, 4, &k, &r), TSR_OK);
    tsr_kcache_ref_t *r2 = NULL;
    assert_int_equal(tsr_kcache_lookup(kc, sig, 4, &r2), 1);
    assert_ptr_equal(r, r2);
    const tsr_kernel_t *got = tsr_kcache_kernel(r2);
    assert_int_equal(got->meta_len, sizeof meta);
    assert_string_equal(got->meta, meta);
    assert_int_equal(got->ninsns, 2);
    assert_null(got->uops);
    uint8_t back[16];
    assert_int_equal(tsr_mem_read(dev, tsr_kcache_uop_addr(r2), back, 2 * c->uop_bytes), TSR_OK);
    assert_memory_equal(back, uops, 2 * c->uop_bytes);
    /* relocate and run it */
    tsr_insn_t run[2];
    memcpy(run, got->insns, sizeof run);
    uint64_t base[TSR_MEM_COUNT] = {0};
    base[TSR_MEM_UOP] = tsr_kcache_uop_addr(r2);
    assert_int_equal(tsr_kcache_relocate(c, run, 2, base), TSR_OK);
    assert_int_equal(run[0].dram_base, (uint32_t)(base[TSR_MEM_UOP] / c->uop_bytes));
    assert_int_equal(tsr_submit(dev, run, 2), TSR_OK);
    assert_int_equal(tsr_wait(dev, -1), TSR_OK);
    base[TSR_MEM_UOP] += 1; /* misaligned */
    assert_int_equal(tsr_kcache_relocate(c, run, 2, base), TSR_EINVAL);
    base[TSR_MEM_UOP] = (uint64_t)c->uop_bytes << 32; /* past the 32-bit field */
    memcpy(run, got->insns, sizeof run);
    assert_int_equal(tsr_kcache_relocate(c, run, 2, base), TSR_EBOUNDS);
    tsr_kcache_release(r);
    tsr_kcache_release(r2);
    tsr_kcache_release(NULL);
    /* configs hash apart */
    tsr_config_t other;
    assert_int_equal(tsr_config_load("default", &other), TSR_OK);
    assert_true(tsr_kcache_config_hash(c) != tsr_kcache_config_hash(&other));
    /* every key counts, the late ones too (they were once left out of a hand-kept list) */
    static const struct { const char *key; int value; } one[] = {
        {"DEPTHWISE", 0}, {"ACT_LUT", 0}, {"EXACT_REQUANT", 1}, {"DSP_PACK", 0}, {"ACC_SINGLE_COPY", 0},
        {"OUT_BUFF_LUTRAM", 1}, {"CLOCK_MHZ", 150}, {"DEP_QUEUE_DEPTH", 8}};
    tsr_config_t dflt, moved;
    assert_int_equal(tsr_config_load("default", &dflt), TSR_OK);
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        assert_int_equal(tsr_config_load_with("default", one[i].key, one[i].value, &moved), TSR_OK);
        if (tsr_kcache_config_hash(&dflt) == tsr_kcache_config_hash(&moved))
            fail_msg("default and default with %s %d hash alike", one[i].key, one[i].value);
    }
    char path[256];
    assert_int_equal(tsr_kcache_file(kc, sig, 4, path, sizeof path), TSR_OK);
    assert_string_equal(path, ""); /* memory only */
    /* TESSERA_JIT_CACHE=off: lazily created caches cache nothing */
    tsr_kcache_free(kc);
    setenv("TESSERA_JIT_CACHE", "off", 1);
    ccase_t t = mk(8, 6, 6, 8, 3, 1, 1, 0);
    plan_run(dev, &t, TSR_KC_NONE, "env off");
    plan_run(dev, &t, TSR_KC_NONE, "env off again");
    assert_int_equal(stats(dev).entries, 0);
    setenv("TESSERA_JIT_CACHE", "mem", 1);
    tsr_device_close(dev);
}

/* ---------------------------------------------------- bench smoke test */

#ifndef TSR_CLI
#define TSR_CLI "tessera"
#endif

typedef struct {
    char layer[64], shape[64], limit[64], jit[64], check[64];
    double macs, cycles, util, bound, ratio, ratio_rd, moved, comp, jit_ms;
} row_t;

static double num(const char *s)
{
    return strcmp(s, "-") ? strtod(s, NULL) : -1;
}

/* Run the bench; parse its rows (layers and the total line). */
static int run_bench(const char *env, row_t *rows, int max, char *wall)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s bench --kind resnet18 --backend %s --layers C10 --check", env, TSR_CLI,
             backend());
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[1024];
    int n = 0, in_table = 0;
    wall[0] = 0;
    while (fgets(line, sizeof line, p)) {
        fputs(line, stdout);
        if (!strncmp(line, "layer ", 6)) {
            in_table = 1;
            continue;
        }
        if (!strncmp(line, "wall time", 9)) {
            snprintf(wall, 256, "%.200s", line);
            in_table = 0;
        }
        if (!in_table || n >= max)
            continue;
        char f[14][64];
        int k = sscanf(line, "%63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s", f[0], f[1], f[2],
                       f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12], f[13]);
        if (k < 13)
            continue;
        row_t *r = &rows[n++];
        snprintf(r->layer, sizeof r->layer, "%s", f[0]);
        snprintf(r->shape, sizeof r->shape, "%s", f[1]);
        r->macs = num(f[2]);
        r->cycles = num(f[3]);
        r->util = num(f[4]);
        r->bound = num(f[5]);
        r->ratio = num(f[6]);
        r->ratio_rd = num(f[7]);
        snprintf(r->limit, sizeof r->limit, "%s", f[8]);
        r->moved = num(f[9]);
        r->comp = num(f[10]);
        r->jit_ms = num(f[11]);
        snprintf(r->jit, sizeof r->jit, "%s", f[12]);
        snprintf(r->check, sizeof r->check, "%s", k > 13 ? f[13] : "");
    }
    int st = pclose(p);
    assert_int_equal(st, 0);
    return n;
}

static void check_rows(const row_t *rows, int n, const char *want_jit)
{
    assert_int_equal(n, 2); /* C10 and the total */
    const row_t *r = &rows[0];
    assert_string_equal(r->layer, "C10");
    assert_string_equal(r->shape, "14x14,256->512,1x1,s2,p0");
    /* MACs of C10: 7*7 outputs x 256 x 512 */
    assert_true(r->macs == 49.0 * 256 * 512);
    /* compulsory bytes: every input byte, weights, 4-byte bias, output */
    assert_true(r->comp == 14.0 * 14 * 256 + 512.0 * 256 + 4 * 512 + 7.0 * 7 * 512);
    /* the device reads at least the input a 1x1 stride-2 kernel reads (even
     * rows and columns) besides the rest */
    const double comp_rd = 7.0 * 7 * 256 + 512.0 * 256 + 4 * 512 + 7.0 * 7 * 512;
    assert_true(r->moved >= comp_rd);
    /* roofline bound on default: max(MACs / 256, compulsory / 8) */
    double want_bound = r->macs / 256 > r->comp / 8 ? r->macs / 256 : r->comp / 8;
    double bound_rd = r->macs / 256 > comp_rd / 8 ? r->macs / 256 : comp_rd / 8;
    assert_true(r->bound > want_bound - 1 && r->bound < want_bound + 1);
    assert_string_equal(r->limit, r->macs / 256 > r->comp / 8 ? "compute" : "memory");
    /* fsim is untimed: no cycles, utilisation or ratio */
    if (!strcmp(backend(), "fsim"))
        assert_true(r->cycles < 0 && r->util < 0 && r->ratio < 0 && r->ratio_rd < 0);
    else {
        assert_true(r->cycles > 0);
        /* the stricter bound is one the device must respect */
        assert_true(r->util <= 1.0 && r->ratio_rd <= 1.0 + 1e-9 && r->cycles >= bound_rd);
        assert_true(fabs(r->ratio - r->bound / r->cycles) < 1e-3 && fabs(r->ratio_rd - bound_rd / r->cycles) < 1e-3);
    }
    assert_true(r->jit_ms >= 0);
    assert_string_equal(r->jit, want_jit);
    assert_string_equal(r->check, "ok");
    const row_t *t = &rows[1];
    assert_string_equal(t->layer, "total");
    assert_true(t->macs == r->macs && t->comp == r->comp && t->moved == r->moved);
}

/* Relocation by buffer slot: two inp LOADs of slot 0 and one of slot 1 (as
 * add's inputs a and b) move by their own slot's base; a slot past nslots
 * is refused. Then add plans: a miss and a hit of the same signature over
 * other tensors give the same stream up to the inputs' and output's bases. */
static void test_slots(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("default");
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_insn_t in[4];
    memset(in, 0, sizeof in);
    for (int i = 0; i < 3; i++) {
        in[i].opcode = TSR_OP_LOAD;
        in[i].mem_type = TSR_MEM_INP;
        in[i].y_size = 1;
        in[i].x_size = in[i].x_stride = 1;
        in[i].dram_base = (uint32_t)(10 * i);
    }
    in[3].opcode = TSR_OP_STORE;
    in[3].y_size = 1;
    in[3].x_size = in[3].x_stride = 1;
    in[3].dram_base = 5;
    const uint8_t slot[4] = {0, 1, 0, 0};
    uint64_t base[2][TSR_MEM_COUNT];
    memset(base, 0, sizeof base);
    base[0][TSR_MEM_INP] = 100ull * c->inp_bytes;
    base[1][TSR_MEM_INP] = 1000ull * c->inp_bytes;
    base[0][TSR_MEM_OUT] = base[1][TSR_MEM_OUT] = 7ull * c->out_bytes;
    assert_int_equal(tsr_kcache_relocate_slots(c, in, 4, slot, 2, (const uint64_t(*)[TSR_MEM_COUNT])base), TSR_OK);
    assert_int_equal(in[0].dram_base, 100);
    assert_int_equal(in[1].dram_base, 1010);
    assert_int_equal(in[2].dram_base, 120);
    assert_int_equal(in[3].dram_base, 12);
    const uint8_t bad[4] = {0, 2, 0, 0};
    assert_int_equal(tsr_kcache_relocate_slots(c, in, 4, bad, 2, (const uint64_t(*)[TSR_MEM_COUNT])base), TSR_EINVAL);
    /* add: generated, then from the cache over other tensors */
    tsr_kcache_t *kc = make_cache(dev, "", 0, 0);
    (void)kc;
    tsr_eltwise_desc_t d = {1, 16, 9, 9, TSR_DT_INT8, 3};
    tsr_add_params_t ap = {.a = d, .b = d, .y = d, .left_shift = 20, .mult_a = 1 << 30, .mult_b = 1518500250,
                           .shift_a = 0, .shift_b = -1, .mult_out = 1 << 30, .shift_out = -18, .act_min = -128,
                           .act_max = 127};
    ap.b.zp = -7;
    tsr_eltwise_plan_t p1, p2;
    assert_int_equal(tsr_add_plan(dev, &ap, &p1), TSR_OK);
    assert_int_equal(tsr_add_plan(dev, &ap, &p2), TSR_OK);
    assert_int_equal(p1.kcache, TSR_KC_MISS);
    assert_int_equal(p2.kcache, TSR_KC_HIT);
    assert_int_equal(p1.ninsns, p2.ninsns);
    int differ_b = 0;
    for (size_t i = 0; i < p1.ninsns; i++) {
        const tsr_insn_t *x = &p1.insns[i], *y = &p2.insns[i];
        if (x->opcode != TSR_OP_LOAD || x->mem_type != TSR_MEM_INP) {
            if (x->opcode == TSR_OP_STORE)
                assert_int_equal((int64_t)x->dram_base - (int64_t)(p1.y_addr / c->out_bytes),
                                 (int64_t)y->dram_base - (int64_t)(p2.y_addr / c->out_bytes));
            continue;
        }
        /* each input LOAD is at the same offset from the same input's base */
        const int64_t oa1 = (int64_t)x->dram_base - (int64_t)(p1.x_addr[0] / c->inp_bytes);
        const int64_t ob1 = (int64_t)x->dram_base - (int64_t)(p1.x_addr[1] / c->inp_bytes);
        const int64_t oa2 = (int64_t)y->dram_base - (int64_t)(p2.x_addr[0] / c->inp_bytes);
        const int64_t ob2 = (int64_t)y->dram_base - (int64_t)(p2.x_addr[1] / c->inp_bytes);
        const int64_t rows = (int64_t)(p1.x_bytes / c->inp_bytes);
        const int in_a = oa1 >= 0 && oa1 < rows, in_b = ob1 >= 0 && ob1 < rows;
        assert_true(in_a || in_b);
        if (in_a)
            assert_int_equal(oa1, oa2);
        else {
            assert_int_equal(ob1, ob2);
            differ_b++;
        }
    }
    assert_true(differ_b > 0); /* b's loads were relocated against b */
    tsr_add_plan_free(dev, &p1);
    tsr_add_plan_free(dev, &p2);
    tsr_device_close(dev);
}

static void test_bench_smoke(void **state)
{
    (void)state;
    char dir[64], env[160], wall[256];
    make_dir(dir, sizeof dir);
    snprintf(env, sizeof env, "TESSERA_JIT_CACHE_DIR=%s TESSERA_JIT_CACHE=on", dir);
    row_t rows[16];
    int n = run_bench(env, rows, 16, wall);
    check_rows(rows, n, "miss");
    assert_non_null(strstr(wall, "wall time"));
    /* a second process finds the kernel on disk */
    n = run_bench(env, rows, 16, wall);
    check_rows(rows, n, "disk");
    /* bad options are usage errors, not crashes */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s bench --kind resnet18 --layers C99 >/dev/null 2>&1", TSR_CLI);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    snprintf(cmd, sizeof cmd, "%s bench --kind resnet18 --help | grep -q -- --layers", TSR_CLI);
    assert_int_equal(system(cmd), 0);
    rm_dir(dir);
}

int main(void)
{
    const char *bench = getenv("TSR_KCACHE_BENCH");
    printf("test_kcache: backend %s\n", backend());
    if (bench && !strcmp(bench, "1")) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_bench_smoke)};
        return cmocka_run_group_tests(tests, NULL, NULL);
    }
    /* lazily created caches (none of the tests rely on them) stay in memory */
    setenv("TESSERA_JIT_CACHE", "mem", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hits_misses),     cmocka_unit_test(test_cached_vs_uncached),
        cmocka_unit_test(test_tiling_memo),     cmocka_unit_test(test_memo_bytes),
        cmocka_unit_test(test_disk_roundtrip),  cmocka_unit_test(test_disk_corruption),
        cmocka_unit_test(test_eviction),        cmocka_unit_test(test_generic_api),
        cmocka_unit_test(test_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
