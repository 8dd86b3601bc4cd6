/*
 * test_eltwise: the elementwise JIT operators (jit/tsr_eltwise.c: add,
 * clip, relu) against the plain-C reference of jit/operators.md
 * (tests/tsr_opref.c), exact equality. Hand cases with expected values
 * worked out by hand; random cases over shapes, dtypes, zero points, add
 * parameters (from random scales via opref_add_params_from_scales, and raw
 * values anywhere in the documented ranges), clamp ranges and configs
 * (tiny/default/large presets, BATCH 2, BLOCK_IN > BLOCK_OUT, BLOCK_IN <
 * BLOCK_OUT, and buffers so small that only one buffer fits); bad
 * parameters. Failures print the seed, the case and the first differing
 * element (index, got, expected). Backend from TSR_TEST_BACKEND (default
 * fsim, which runs with a random stage interleaving so a missing token
 * shows up as a wrong result; other backends run a third of the random
 * cases); TSR_ELTWISE_SEED overrides the base seed, TSR_ELTWISE_FILTER
 * selects tests (cmocka pattern). test_bench prints the 1x64x56x56 figures
 * (cycles per element vs the DRAM bound on timed backends).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_driver.h"
#include "tsr_eltwise.h"
#include "tsr_error.h"
#include "tsr_opplan.h"
#include "tsr_opref.h"
#include "tsr_testenv.h"

static const char *backend(void) { return tsr_test_backend(); }

static int on_fsim(void) { return !strcmp(backend(), "fsim"); }

/* Random case counts: full on fsim, a third on the slower RTL. */
static int scaled(int n) { return on_fsim() ? n : (n + 2) / 3; }

static uint64_t base_seed(void) { return tsr_test_seed("TSR_ELTWISE_SEED", 20261124u); }

/* Extra configs (besides tsr_testenv's b2 and rect): BLOCK_IN 4 < BLOCK_OUT
 * 8; BLOCK_IN 16 > BLOCK_OUT 4 with 16 accumulator rows (add cannot double
 * buffer: single-buffer fallback); 16-bit accumulators (refused). */
static const char *CFG_WIDE = "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": 3, \"LOG_WGT_WIDTH\": 3, \"LOG_ACC_WIDTH\": 5, "
                              "\"LOG_BATCH\": 0, \"LOG_BLOCK_IN\": 2, \"LOG_BLOCK_OUT\": 3, \"LOG_UOP_BUFF_SIZE\": 12, "
                              "\"LOG_INP_BUFF_SIZE\": 10, \"LOG_WGT_BUFF_SIZE\": 12, \"LOG_ACC_BUFF_SIZE\": 12}";
static const char *CFG_CRAMPED = "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": 3, \"LOG_WGT_WIDTH\": 3, "
                                 "\"LOG_ACC_WIDTH\": 5, \"LOG_BATCH\": 0, \"LOG_BLOCK_IN\": 4, \"LOG_BLOCK_OUT\": 2, "
                                 "\"LOG_UOP_BUFF_SIZE\": 7, \"LOG_INP_BUFF_SIZE\": 8, \"LOG_WGT_BUFF_SIZE\": 8, "
                                 "\"LOG_ACC_BUFF_SIZE\": 8, \"CMD_QUEUE_DEPTH\": 8, \"DEP_QUEUE_DEPTH\": 2}";
static const char *CFG_ACC16 = "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": 3, \"LOG_WGT_WIDTH\": 3, "
                               "\"LOG_ACC_WIDTH\": 4, \"LOG_BATCH\": 0, \"LOG_BLOCK\": 2, \"LOG_UOP_BUFF_SIZE\": 10, "
                               "\"LOG_INP_BUFF_SIZE\": 9, \"LOG_WGT_BUFF_SIZE\": 10, \"LOG_ACC_BUFF_SIZE\": 10}";

static tsr_device_t *open_dev(const char *name)
{
    tsr_config_t cfg;
    int rc;
    const char *json = !strcmp(name, "wide") ? CFG_WIDE : !strcmp(name, "cramped") ? CFG_CRAMPED
                       : !strcmp(name, "acc16") ? CFG_ACC16 : NULL;
    rc = json ? tsr_config_parse(json, name, &cfg) : tsr_test_config(name, &cfg);
    if (rc)
        fail_msg("config %s: %s", name, tsr_errmsg());
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = base_seed() | 1};
    if (tsr_device_open(backend(), &cfg, &o, &dev))
        fail_msg("open %s/%s: %s", backend(), name, tsr_errmsg());
    return dev;
}

static uint64_t rng_next(uint64_t *s) { return tsr_test_next(s); }
static int rnd(uint64_t *s, int lo, int hi) { return tsr_test_rnd(s, lo, hi); }
static double rndf(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

static int32_t dmin(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 0 : -128; }
static int32_t dmax(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 255 : 127; }
static const char *dname(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? "u8" : "i8"; }
static opref_dtype_t odt(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8; }
static int32_t val(tsr_dtype_e d, uint8_t byte) { return d == TSR_DT_UINT8 ? byte : (int8_t)byte; }

/* One case: an add or a clip. */
typedef struct {
    int is_add;
    tsr_add_params_t a;
    tsr_clip_params_t c;
} elt_case_t;

/* Output elements strictly inside the clamp range / all compared, for the
 * scale-derived add cases (they must mostly not saturate to mean much). */
static double g_inside_frac;
static int g_total;
/* 1: use the one-call API. */
static int g_one_call;
/* Plans seen: multi-tile, single-buffered. */
static int g_multi, g_single, g_linear;

static void describe(const elt_case_t *k, const char *cfg, uint64_t seed, char *buf, size_t n)
{
    if (k->is_add) {
        const tsr_add_params_t *p = &k->a;
        snprintf(buf, n,
                 "seed %llu config %s: add [%d,%d,%d,%d] a %s zp %d, b %s zp %d, y %s zp %d, left_shift %d, "
                 "a (%d, %d), b (%d, %d), out (%d, %d), act [%d, %d]",
                 (unsigned long long)seed, cfg, p->a.n, p->a.c, p->a.h, p->a.w, dname(p->a.dtype), p->a.zp,
                 dname(p->b.dtype), p->b.zp, dname(p->y.dtype), p->y.zp, p->left_shift, p->mult_a, p->shift_a,
                 p->mult_b, p->shift_b, p->mult_out, p->shift_out, p->act_min, p->act_max);
    } else {
        const tsr_clip_params_t *p = &k->c;
        snprintf(buf, n, "seed %llu config %s: clip [%d,%d,%d,%d] %s zp %d, [%d, %d]", (unsigned long long)seed, cfg,
                 p->x.n, p->x.c, p->x.h, p->x.w, dname(p->x.dtype), p->x.zp, p->lo, p->hi);
    }
}

static size_t numel(const tsr_eltwise_desc_t *d) { return (size_t)d->n * d->c * d->h * d->w; }

/* The reference result for data a (and b). */
static void reference(const elt_case_t *k, uint8_t *a, uint8_t *b, uint8_t *yr, const char *desc)
{
    int rc;
    if (k->is_add) {
        const tsr_add_params_t *p = &k->a;
        opref_tensor_t ta = {odt(p->a.dtype), p->a.n, p->a.c, p->a.h, p->a.w, a, p->a.zp};
        opref_tensor_t tb = {odt(p->b.dtype), p->b.n, p->b.c, p->b.h, p->b.w, b, p->b.zp};
        opref_tensor_t ty = {odt(p->y.dtype), p->y.n, p->y.c, p->y.h, p->y.w, yr, p->y.zp};
        opref_add_params_t op = {p->left_shift, p->mult_a, p->mult_b, p->shift_a, p->shift_b, p->mult_out,
                                 p->shift_out, p->act_min, p->act_max, p->round_once};
        rc = opref_add(&ta, &tb, &op, &ty);
    } else {
        const tsr_clip_params_t *p = &k->c;
        opref_tensor_t tx = {odt(p->x.dtype), p->x.n, p->x.c, p->x.h, p->x.w, a, p->x.zp};
        opref_tensor_t ty = {odt(p->y.dtype), p->y.n, p->y.c, p->y.h, p->y.w, yr, p->y.zp};
        rc = opref_clip(&tx, p->lo, p->hi, &ty);
    }
    if (rc)
        fail_msg("%s: reference: %s", desc, tsr_errmsg());
}

/* Run k on dev with inputs a (b) into y. */
static void run_dev(tsr_device_t *dev, const elt_case_t *k, const uint8_t *a, const uint8_t *b, uint8_t *y,
                    const char *desc, int verbose)
{
    int rc;
    if (g_one_call) {
        rc = k->is_add ? tsr_add_run(dev, &k->a, a, b, y) : tsr_clip_run(dev, &k->c, a, y);
        if (rc)
            fail_msg("%s: run: %s", desc, tsr_errmsg());
        return;
    }
    tsr_eltwise_plan_t pl;
    rc = k->is_add ? tsr_add_plan(dev, &k->a, &pl) : tsr_clip_plan(dev, &k->c, &pl);
    if (rc)
        fail_msg("%s: plan: %s", desc, tsr_errmsg());
    g_multi += pl.tiles > 1;
    g_single += pl.nbuf == 1;
    g_linear += pl.linear;
    if (verbose)
        printf("  %s\n    %u rows, tile %d rows x %d tiles, %d buffers, %d ops/row, %zu insns, %llu alu + %llu gemm "
               "ops, DRAM %llu B\n",
               desc, pl.rows, pl.tile_rows, pl.tiles, pl.nbuf, pl.ops_per_row, pl.ninsns,
               (unsigned long long)pl.alu_ops, (unsigned long long)pl.gemm_ops, (unsigned long long)pl.dram_bytes);
    if (k->is_add) {
        if (!(rc = tsr_add_write_inputs(dev, &pl, a, b)) && !(rc = tsr_add_exec(dev, &pl)))
            rc = tsr_add_read_output(dev, &pl, y);
    } else {
        if (!(rc = tsr_clip_write_input(dev, &pl, a)) && !(rc = tsr_clip_exec(dev, &pl)))
            rc = tsr_clip_read_output(dev, &pl, y);
    }
    if (rc)
        fail_msg("%s: run: %s", desc, tsr_errmsg());
    if (k->is_add)
        tsr_add_plan_free(dev, &pl);
    else
        tsr_clip_plan_free(dev, &pl);
}

/* Compare y with yr; fail on the first difference. */
static void compare(const char *desc, tsr_dtype_e dt, const uint8_t *y, const uint8_t *yr, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (y[i] != yr[i])
            fail_msg("%s\n  element %zu of %zu: got %d, expected %d", desc, i, n, val(dt, y[i]), val(dt, yr[i]));
}

/* Random data for k, the device result and the reference, compared. */
static void run_case(tsr_device_t *dev, const char *cfg, const elt_case_t *k, uint64_t seed, int count_inside)
{
    char desc[512];
    describe(k, cfg, seed, desc, sizeof desc);
    const tsr_eltwise_desc_t *da = k->is_add ? &k->a.a : &k->c.x, *db = k->is_add ? &k->a.b : NULL;
    tsr_dtype_e ydt = k->is_add ? k->a.y.dtype : k->c.x.dtype;
    size_t n = numel(da);
    uint8_t *a = malloc(n), *b = malloc(n), *y = malloc(n), *yr = malloc(n);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(y);
    assert_non_null(yr);
    uint64_t s = seed ^ 0xabcdef;
    int mode = rnd(&s, 0, 4); /* 0: values near the zero points, else uniform */
    for (size_t i = 0; i < n; i++) {
        int32_t v = mode ? rnd(&s, dmin(da->dtype), dmax(da->dtype)) : da->zp + rnd(&s, -8, 8);
        a[i] = (uint8_t)(v < dmin(da->dtype) ? dmin(da->dtype) : v > dmax(da->dtype) ? dmax(da->dtype) : v);
        b[i] = db ? (uint8_t)rnd(&s, dmin(db->dtype), dmax(db->dtype)) : 0;
    }
    memset(y, 0x5a, n);
    run_dev(dev, k, a, b, y, desc, 0);
    reference(k, a, b, yr, desc);
    compare(desc, ydt, y, yr, n);
    if (count_inside) { /* per-case fraction, so one large case cannot dominate */
        size_t in = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t v = val(ydt, yr[i]);
            in += v > k->a.act_min && v < k->a.act_max;
        }
        g_inside_frac += (double)in / (double)n;
        g_total++;
    }
    free(a);
    free(b);
    free(y);
    free(yr);
}

static tsr_eltwise_desc_t rand_desc(uint64_t *s, int n, int c, int h, int w)
{
    tsr_eltwise_desc_t d = {n, c, h, w, rnd(s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8, 0};
    int e = rnd(s, 0, 5);
    d.zp = e == 0 ? dmin(d.dtype) : e == 1 ? dmax(d.dtype) : rnd(s, dmin(d.dtype), dmax(d.dtype));
    return d;
}

/* A random shape of at most maxel elements (sometimes exactly a multiple
 * of lanes, sometimes a single element). */
static void rand_shape(uint64_t *s, int maxel, int lanes, int *n, int *c, int *h, int *w)
{
    int total;
    int e = rnd(s, 0, 9);
    if (e == 0)
        total = 1;
    else if (e == 1)
        total = lanes * rnd(s, 1, maxel / lanes > 0 ? maxel / lanes : 1);
    else
        total = rnd(s, 1, maxel);
    /* factor total into n*c*h*w */
    int f[4] = {1, 1, 1, 1};
    int r = total;
    for (int k = 0; k < 3; k++) {
        int d = rnd(s, 1, 6);
        while (d > 1 && r % d)
            d--;
        f[k] = d;
        r /= d;
    }
    f[3] = r;
    int rot = rnd(s, 0, 3);
    *n = f[rot % 4];
    *c = f[(rot + 1) % 4];
    *h = f[(rot + 2) % 4];
    *w = f[(rot + 3) % 4];
}

static int32_t rand_mult(uint64_t *s)
{
    int e = rnd(s, 0, 9);
    if (e == 0)
        return 0;
    if (e == 1)
        return INT32_MAX;
    if (e == 2)
        return 1 << 30;
    if (e == 3)
        return rnd(s, 0, INT32_MAX);
    return (int32_t)((1u << 30) + (uint32_t)rnd(s, 0, (1 << 30) - 1));
}

/* Random add parameters: from three random scales (TFLite Prepare) or raw
 * values anywhere in the documented ranges. Returns 1 for scale-derived. */
static int rand_add(uint64_t *s, tsr_add_params_t *p)
{
    tsr_dtype_e ydt = p->y.dtype;
    if (rnd(s, 0, 2)) {
        opref_add_params_t op;
        for (;;) {
            /* equal and power-of-two scale ratios make power-of-two paths */
            int e = rnd(s, 0, 5);
            double sa = 0.002 * pow(2.0, 6 * rndf(s));
            double sb = e == 0 ? sa : e == 1 ? ldexp(sa, rnd(s, -7, 7)) : 0.002 * pow(2.0, 6 * rndf(s));
            double sy = (sa > sb ? sa : sb) * pow(2.0, 2.0 * rndf(s) + 0.5);
            if (!opref_add_params_from_scales(sa, sb, sy, odt(ydt), &op))
                break;
        }
        p->left_shift = op.left_shift;
        p->mult_a = op.mult_a;
        p->shift_a = op.shift_a;
        p->mult_b = op.mult_b;
        p->shift_b = op.shift_b;
        p->mult_out = op.mult_out;
        p->shift_out = op.shift_out;
        p->act_min = op.act_min;
        p->act_max = op.act_max;
        if (rnd(s, 0, 3) == 0) { /* fused relu / relu6-like */
            p->act_min = p->y.zp;
            p->act_max = rnd(s, p->act_min, dmax(ydt));
        }
        return 1;
    }
    p->left_shift = rnd(s, 0, 22);
    p->mult_a = rand_mult(s);
    p->mult_b = rand_mult(s);
    p->mult_out = rand_mult(s);
    p->shift_a = rnd(s, 0, 3) ? rnd(s, -31, 0) : 0;
    p->shift_b = rnd(s, 0, 3) ? rnd(s, -31, 0) : p->shift_a;
    p->shift_out = rnd(s, -31, 30);
    /* mostly shifts that keep values in range; sometimes anything */
    if (rnd(s, 0, 1)) {
        p->shift_a = rnd(s, -3, 0);
        p->shift_b = rnd(s, -3, 0);
        p->shift_out = -(p->left_shift + rnd(s, -3, 2));
        if (p->shift_out > 30)
            p->shift_out = 30;
        if (p->shift_out < -31)
            p->shift_out = -31;
    }
    int full = rnd(s, 0, 2);
    p->act_min = full ? dmin(ydt) : rnd(s, dmin(ydt), dmax(ydt));
    p->act_max = full ? dmax(ydt) : rnd(s, p->act_min, dmax(ydt));
    return 0;
}

static void rand_case(uint64_t *s, elt_case_t *k, int maxel, int lanes, int *derived)
{
    memset(k, 0, sizeof *k);
    int n, c, h, w;
    rand_shape(s, maxel, lanes, &n, &c, &h, &w);
    *derived = 0;
    if (rnd(s, 0, 2)) {
        k->is_add = 1;
        k->a.a = rand_desc(s, n, c, h, w);
        k->a.b = rand_desc(s, n, c, h, w);
        k->a.y = rand_desc(s, n, c, h, w);
        *derived = rand_add(s, &k->a);
    } else {
        k->c.x = rand_desc(s, n, c, h, w);
        k->c.y = k->c.x;
        int e = rnd(s, 0, 3);
        tsr_dtype_e dt = k->c.x.dtype;
        if (e == 0) { /* relu */
            k->c.lo = k->c.x.zp;
            k->c.hi = dmax(dt);
        } else if (e == 1) { /* identity */
            k->c.lo = dmin(dt);
            k->c.hi = dmax(dt);
        } else {
            k->c.lo = rnd(s, dmin(dt), dmax(dt));
            k->c.hi = rnd(s, k->c.lo, dmax(dt));
        }
    }
}

static void random_cases(const char *cfg, int count, int maxel, uint64_t salt)
{
    tsr_device_t *dev = open_dev(cfg);
    const tsr_config_t *c = tsr_device_config(dev);
    uint64_t seed0 = base_seed() ^ (salt * 0x1000193u);
    count = scaled(count);
    g_inside_frac = 0;
    g_total = 0;
    g_multi = g_single = g_linear = 0;
    int adds = 0, derived_n = 0;
    for (int i = 0; i < count; i++) {
        uint64_t seed = seed0 + (uint64_t)i, s = seed;
        elt_case_t k;
        int derived;
        rand_case(&s, &k, maxel, c->batch * c->block_out, &derived);
        adds += k.is_add;
        derived_n += derived;
        run_case(dev, cfg, &k, seed, derived);
    }
    printf("  %s: %d cases (%d add, %d of them from scales, %d power-of-two fast path; %d clip), %d multi-tile, %d "
           "single-buffered; scale-derived adds: on average %.0f%% of the outputs strictly inside the clamp range\n",
           cfg, count, adds, derived_n, g_linear, count - adds, g_multi, g_single,
           100.0 * g_inside_frac / (g_total ? g_total : 1));
    if (derived_n >= 20) /* too few cases say little */
        assert_true(g_inside_frac > 0.4 * g_total);
    tsr_device_close(dev);
}

static tsr_eltwise_desc_t desc1(int n, tsr_dtype_e dt, int32_t zp);
static void hand(tsr_device_t *dev, const elt_case_t *k, const int *a, const int *b, const int *want, int n);

/* ONNX Runtime's QLinearAdd (MLAS): xa*MA + xb*MB rounded once by 2^Sh
 * (round_once, MA/MB in [2^21, 2^22) as onnx/ops/tsr_ox_eltwise.c forms
 * them): against the reference's one rounding on tiny and default, and a
 * hand case where one rounding and two (SRDHM by 2^30, then RDBPOT) part. */
static void test_round_once(void **state)
{
    (void)state;
    static const char *cfgs[] = {"tiny", "default"};
    for (int ci = 0; ci < 2; ci++) {
        tsr_device_t *dev = open_dev(cfgs[ci]);
        const tsr_config_t *c = tsr_device_config(dev);
        for (int i = 0; i < scaled(40); i++) {
            uint64_t seed = base_seed() ^ 0x0ce5u ^ (uint64_t)(ci * 1000 + i), s = seed;
            elt_case_t k;
            int n, ch, h, w;
            memset(&k, 0, sizeof k);
            rand_shape(&s, 3000, c->batch * c->block_out, &n, &ch, &h, &w);
            k.is_add = 1;
            k.a.a = rand_desc(&s, n, ch, h, w);
            k.a.b = rand_desc(&s, n, ch, h, w);
            k.a.y = rand_desc(&s, n, ch, h, w);
            const int sh = rnd(&s, 13, 24);
            k.a.left_shift = 22;
            k.a.mult_a = rnd(&s, 1 << 21, (1 << 22) - 1) * 512;
            k.a.mult_b = rnd(&s, 1 << 21, (1 << 22) - 1) * 512;
            k.a.mult_out = 1 << 30;
            k.a.shift_out = -(sh - 1);
            k.a.act_min = dmin(k.a.y.dtype);
            k.a.act_max = dmax(k.a.y.dtype);
            k.a.round_once = 1;
            run_case(dev, cfgs[ci], &k, seed, 0);
        }
        tsr_device_close(dev);
    }
    /* by hand, where the two roundings part: MA = 2^21, MB = 2^20 - 1, Sh = 21,
     * a = b = 1: the sum 2^21 + 2^20 - 1 is just below 1.5 * 2^21, so one
     * rounding gives 1; halving first (SRDHM by 2^30) makes it 1.5 * 2^20 and
     * the second rounding 2 */
    tsr_device_t *dev = open_dev("tiny");
    elt_case_t k;
    memset(&k, 0, sizeof k);
    k.is_add = 1;
    k.a.a = desc1(3, TSR_DT_INT8, 0);
    k.a.b = desc1(3, TSR_DT_INT8, 0);
    k.a.y = desc1(3, TSR_DT_INT8, 0);
    k.a.left_shift = 22;
    k.a.mult_a = (1 << 21) * 512;
    k.a.mult_b = ((1 << 20) - 1) * 512;
    k.a.mult_out = 1 << 30;
    k.a.shift_out = -20;
    k.a.act_min = -128;
    k.a.act_max = 127;
    k.a.round_once = 1;
    hand(dev, &k, (int[]){1, -1, 3}, (int[]){1, -1, 0}, (int[]){1, -1, 3}, 3);
    k.a.round_once = 0;
    /* (a = b = -1: SRDHM's nudge rounds the negative tie toward zero, -1.5 * 2^20 + 1, so -1 either way) */
    hand(dev, &k, (int[]){1, -1, 3}, (int[]){1, -1, 0}, (int[]){2, -1, 3}, 3);
    tsr_device_close(dev);
}

static void test_random_tiny(void **state)
{
    (void)state;
    random_cases("tiny", 300, 1500, 1);
}
static void test_random_default(void **state)
{
    (void)state;
    random_cases("default", 100, 12000, 2);
}
static void test_random_large(void **state)
{
    (void)state;
    random_cases("large", 40, 20000, 3);
}
static void test_random_batch2(void **state)
{
    (void)state;
    random_cases("b2", 60, 2000, 4);
}
static void test_random_rect(void **state)
{
    (void)state;
    random_cases("rect", 60, 2000, 5);
}
/* Configs only this test uses are not built as RTL models (each costs a
 * Verilator build); their layouts are covered on fsim. */
static int skip_extra_model(const char *cfg)
{
    if (on_fsim())
        return 0;
    printf("  %s: skipped on %s (extra model; covered on fsim)\n", cfg, backend());
    return 1;
}

static void test_random_wide(void **state)
{
    (void)state;
    if (skip_extra_model("wide"))
        return;
    random_cases("wide", 60, 2000, 6);
}
static void test_random_cramped(void **state)
{
    (void)state;
    if (skip_extra_model("cramped"))
        return;
    random_cases("cramped", 60, 300, 7);
    assert_true(!on_fsim() || g_single > 0); /* the single-buffer fallback was exercised */
}

/* ------------------------------------------------------------ hand cases */

static tsr_eltwise_desc_t desc1(int n, tsr_dtype_e dt, int32_t zp)
{
    tsr_eltwise_desc_t d = {1, 1, 1, n, dt, zp};
    return d;
}

/* Run k on the given data and compare with hand-computed expected values
 * (and with the reference). */
static void hand(tsr_device_t *dev, const elt_case_t *k, const int *a, const int *b, const int *want, int n)
{
    char desc[512];
    describe(k, "tiny", 0, desc, sizeof desc);
    uint8_t xa[64], xb[64], y[64], yr[64];
    assert_true(n <= 64);
    for (int i = 0; i < n; i++) {
        xa[i] = (uint8_t)a[i];
        xb[i] = b ? (uint8_t)b[i] : 0;
    }
    tsr_dtype_e ydt = k->is_add ? k->a.y.dtype : k->c.x.dtype;
    run_dev(dev, k, xa, xb, y, desc, 0);
    for (int i = 0; i < n; i++)
        if (val(ydt, y[i]) != want[i])
            fail_msg("%s\n  element %d: got %d, expected (by hand) %d", desc, i, val(ydt, y[i]), want[i]);
    reference(k, xa, xb, yr, desc);
    compare(desc, ydt, y, yr, (size_t)n);
}

static void test_hand_clip(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    elt_case_t k;
    memset(&k, 0, sizeof k);
    /* relu int8 zp 0 */
    k.c.x = k.c.y = desc1(5, TSR_DT_INT8, 0);
    assert_int_equal(tsr_relu_params(&k.c.x, &k.c), TSR_OK);
    hand(dev, &k, (int[]){-128, -1, 0, 1, 127}, NULL, (int[]){0, 0, 0, 1, 127}, 5);
    /* relu uint8 zp 100 */
    k.c.x = k.c.y = desc1(5, TSR_DT_UINT8, 100);
    assert_int_equal(tsr_relu_params(&k.c.x, &k.c), TSR_OK);
    hand(dev, &k, (int[]){0, 99, 100, 101, 255}, NULL, (int[]){100, 100, 100, 101, 255}, 5);
    /* clip int8 [-3, 5] (zp -20 irrelevant) */
    k.c.x = k.c.y = desc1(7, TSR_DT_INT8, -20);
    k.c.lo = -3;
    k.c.hi = 5;
    hand(dev, &k, (int[]){-128, -4, -3, 0, 5, 6, 127}, NULL, (int[]){-3, -3, -3, 0, 5, 5, 5}, 7);
    /* clip uint8 [0, 255] is the identity; [128, 130] */
    k.c.x = k.c.y = desc1(6, TSR_DT_UINT8, 0);
    k.c.lo = 0;
    k.c.hi = 255;
    hand(dev, &k, (int[]){0, 1, 127, 128, 254, 255}, NULL, (int[]){0, 1, 127, 128, 254, 255}, 6);
    k.c.lo = 128;
    k.c.hi = 130;
    hand(dev, &k, (int[]){0, 1, 127, 128, 254, 255}, NULL, (int[]){128, 128, 128, 128, 130, 130}, 6);
    /* tsr_relu_run on a [2,3,2,5] uint8 tensor */
    tsr_eltwise_desc_t d = {2, 3, 2, 5, TSR_DT_UINT8, 7};
    uint8_t x[60], y[60];
    for (int i = 0; i < 60; i++)
        x[i] = (uint8_t)(i * 37);
    assert_int_equal(tsr_relu_run(dev, &d, x, y), TSR_OK);
    for (int i = 0; i < 60; i++)
        assert_int_equal(y[i], x[i] < 7 ? 7 : x[i]);
    tsr_device_close(dev);
}

static void test_hand_add(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    elt_case_t k;
    memset(&k, 0, sizeof k);
    k.is_add = 1;
    /* equal scales s: (M_a, S_a) = (M_b, S_b) = (2^30, 0), (M_o, S_o) =
     * QuantizeMultiplier(2^-19) = (2^30, -18): y = clamp(da + db + y_zp) */
    k.a.a = desc1(5, TSR_DT_INT8, 0);
    k.a.b = desc1(5, TSR_DT_INT8, 0);
    k.a.y = desc1(5, TSR_DT_INT8, 0);
    opref_add_params_t op;
    assert_int_equal(opref_add_params_from_scales(0.05, 0.05, 0.05, OPREF_INT8, &op), TSR_OK);
    assert_int_equal(op.mult_a, 1 << 30);
    assert_int_equal(op.shift_a, 0);
    assert_int_equal(op.mult_out, 1 << 30);
    assert_int_equal(op.shift_out, -18);
    k.a.left_shift = op.left_shift;
    k.a.mult_a = op.mult_a;
    k.a.shift_a = op.shift_a;
    k.a.mult_b = op.mult_b;
    k.a.shift_b = op.shift_b;
    k.a.mult_out = op.mult_out;
    k.a.shift_out = op.shift_out;
    k.a.act_min = -128;
    k.a.act_max = 127;
    hand(dev, &k, (int[]){1, -5, 100, 100, -128}, (int[]){2, 3, 27, 28, -1}, (int[]){3, -2, 127, 127, -128}, 5);
    /* the same through the general path: M_b = 2^30 + 1 is not a power of
     * two (and changes nothing here: SRDHM(v * 2^20, 2^30 + 1) = v * 2^19 for
     * |v| <= 255, the extra v * 2^20 / 2^31 < 1/2 being rounded away) */
    k.a.mult_b = (1 << 30) + 1;
    hand(dev, &k, (int[]){1, -5, 100, 100, -128}, (int[]){2, 3, 27, 28, -1}, (int[]){3, -2, 127, 127, -128}, 5);
    k.a.mult_b = 1 << 30;
    /* s_a = 2 s_b: (M_b, S_b) = (2^30, -1), power-of-two paths 2^19 and 2^18:
     * y = clamp(round-free (2 da + db) / 2 ... ) computed as da + db/2 with
     * QuantizeMultiplier(2 s_a / (2^20 s_y)); s_y = s_a: y = RDBPOT(2 da + db, 1) */
    assert_int_equal(opref_add_params_from_scales(0.1, 0.05, 0.1, OPREF_INT8, &op), TSR_OK);
    assert_int_equal(op.mult_b, 1 << 30);
    assert_int_equal(op.shift_b, -1);
    assert_int_equal(op.mult_out, 1 << 30);
    assert_int_equal(op.shift_out, -18);
    k.a.shift_b = op.shift_b;
    /* raw = (2 da + db) << 18, MBQM(raw, 2^30, -18) = RDBPOT((2 da + db) << 17, 18)
     * = (2 da + db) / 2 rounded half away from zero */
    hand(dev, &k, (int[]){1, 1, -1, 10, 0}, (int[]){1, -1, -1, 3, -3}, (int[]){2, 1, -2, 12, -2}, 5);
    k.a.shift_b = 0;
    /* mixed dtypes and zero points: a u8 zp 128, b i8 zp -10, y u8 zp 5 */
    k.a.a = desc1(3, TSR_DT_UINT8, 128);
    k.a.b = desc1(3, TSR_DT_INT8, -10);
    k.a.y = desc1(3, TSR_DT_UINT8, 5);
    k.a.act_min = 0;
    k.a.act_max = 255;
    hand(dev, &k, (int[]){128, 200, 0}, (int[]){-10, 0, 127}, (int[]){5, 87, 14}, 3);
    /* fused relu on the output: act [y_zp, 255] */
    k.a.act_min = 5;
    hand(dev, &k, (int[]){0, 200, 100}, (int[]){-10, -20, -10}, (int[]){5, 67, 5}, 3);
    /* double rounding (operators.md): left_shift 0, a * 0.5 then / 2, b
     * ignored (M_b 0), output MBQM(raw, 2^30, 1) = raw:
     * 5 -> SRDHM 3 -> RDBPOT 2; -5 -> -2 -> -1; 3 -> 2 -> 1; -3 -> -1 -> -1 */
    k.a.a = desc1(4, TSR_DT_INT8, 0);
    k.a.b = desc1(4, TSR_DT_INT8, 0);
    k.a.y = desc1(4, TSR_DT_INT8, 0);
    k.a.left_shift = 0;
    k.a.mult_a = 1 << 30;
    k.a.shift_a = -1;
    k.a.mult_b = 0;
    k.a.shift_b = -5;
    k.a.mult_out = 1 << 30;
    k.a.shift_out = 1;
    k.a.act_min = -128;
    k.a.act_max = 127;
    hand(dev, &k, (int[]){5, -5, 3, -3}, (int[]){99, -99, 1, 0}, (int[]){2, -1, 1, -1}, 4);
    /* extremes: left_shift 22, M = 2^31 - 1, output left shift 30 (wraps) */
    k.a.a = desc1(8, TSR_DT_INT8, -128);
    k.a.b = desc1(8, TSR_DT_UINT8, 0);
    k.a.y = desc1(8, TSR_DT_INT8, 3);
    k.a.left_shift = 22;
    k.a.mult_a = INT32_MAX;
    k.a.shift_a = 0;
    k.a.mult_b = INT32_MAX;
    k.a.shift_b = -31;
    k.a.mult_out = INT32_MAX;
    k.a.shift_out = 30;
    uint8_t a[8] = {127, 0, 0x80, 5, 6, 7, 100, 127}, b[8] = {255, 0, 255, 1, 2, 3, 200, 0}, y[8], yr[8];
    run_dev(dev, &k, a, b, y, "add extremes", 0);
    reference(&k, a, b, yr, "add extremes");
    compare("add extremes", TSR_DT_INT8, y, yr, 8);
    tsr_device_close(dev);
}

/* Many tiles on tiny under several random stage interleavings: a missing
 * dependency token lets a stage overwrite a half still in use. */
static void test_many_tiles(void **state)
{
    (void)state;
    int runs = scaled(12);
    for (int r = 0; r < runs; r++) {
        tsr_config_t cfg;
        assert_int_equal(tsr_config_load(r % 3 == 2 ? "default" : "tiny", &cfg), TSR_OK);
        tsr_device_t *dev = NULL;
        tsr_device_opts_t o = {.seed = base_seed() * 31 + (uint64_t)r * 7919 + 1};
        if (tsr_device_open(backend(), &cfg, &o, &dev))
            fail_msg("open: %s", tsr_errmsg());
        uint64_t s = base_seed() + (uint64_t)r;
        elt_case_t k;
        memset(&k, 0, sizeof k);
        int n = r % 3 == 2 ? 60000 : 8000 + rnd(&s, 0, 4000);
        if (r % 2 == 0) {
            k.is_add = 1;
            k.a.a = rand_desc(&s, 1, 1, 1, n);
            k.a.b = rand_desc(&s, 1, 1, 1, n);
            k.a.y = rand_desc(&s, 1, 1, 1, n);
            while (!rand_add(&s, &k.a))
                ;
        } else {
            k.c.x = k.c.y = rand_desc(&s, 1, 1, 1, n);
            k.c.lo = rnd(&s, dmin(k.c.x.dtype), dmax(k.c.x.dtype));
            k.c.hi = rnd(&s, k.c.lo, dmax(k.c.x.dtype));
        }
        run_case(dev, r % 3 == 2 ? "default" : "tiny", &k, base_seed() + (uint64_t)r, 0);
        tsr_device_close(dev);
    }
}

/* The one-call API, and a device reused across many plans. */
static void test_one_call(void **state)
{
    (void)state;
    g_one_call = 1;
    random_cases("default", 20, 5000, 8);
    g_one_call = 0;
}

/* --------------------------------------------------------- bad params */

static void expect_add_err(tsr_device_t *dev, const tsr_add_params_t *p, const char *word)
{
    tsr_eltwise_plan_t pl;
    int rc = tsr_add_plan(dev, p, &pl);
    if (rc != TSR_EINVAL)
        fail_msg("add: want EINVAL (\"%s\"), got %s", word, tsr_errname(rc));
    if (!strstr(tsr_errmsg(), word))
        fail_msg("add: message \"%s\" lacks \"%s\"", tsr_errmsg(), word);
    tsr_add_plan_free(dev, &pl); /* safe on a failed plan */
}

static void expect_clip_err(tsr_device_t *dev, const tsr_clip_params_t *p, const char *word)
{
    tsr_eltwise_plan_t pl;
    int rc = tsr_clip_plan(dev, p, &pl);
    if (rc != TSR_EINVAL)
        fail_msg("clip: want EINVAL (\"%s\"), got %s", word, tsr_errname(rc));
    if (!strstr(tsr_errmsg(), word))
        fail_msg("clip: message \"%s\" lacks \"%s\"", tsr_errmsg(), word);
    tsr_clip_plan_free(dev, &pl);
}

static tsr_add_params_t good_add(void)
{
    tsr_add_params_t p;
    memset(&p, 0, sizeof p);
    p.a = (tsr_eltwise_desc_t){1, 4, 3, 3, TSR_DT_INT8, 0};
    p.b = p.a;
    p.y = p.a;
    p.left_shift = 20;
    p.mult_a = p.mult_b = p.mult_out = 1 << 30;
    p.shift_out = -18;
    p.act_min = -128;
    p.act_max = 127;
    return p;
}

static void test_bad_params(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("tiny");
    tsr_add_params_t p;
#define BADA(stmt, word)                                                                                           \
    do {                                                                                                           \
        p = good_add();                                                                                            \
        stmt;                                                                                                      \
        expect_add_err(dev, &p, word);                                                                             \
    } while (0)
    BADA(p.a.n = 0, "positive");
    BADA(p.b.w = -1, "positive");
    BADA((p.a.n = p.b.n = p.y.n = 65536, p.a.c = p.b.c = p.y.c = 32768), "2^31 - 1");
    BADA(p.b.c = 5, "no broadcasting");
    BADA(p.y.h = 1, "no broadcasting");
    BADA(p.a.dtype = TSR_DT_INT16, "int8 or uint8");
    BADA(p.y.dtype = TSR_DT_FLOAT32, "int8 or uint8");
    BADA(p.a.zp = 128, "zero point");
    BADA((p.b.dtype = TSR_DT_UINT8, p.b.zp = -1), "zero point");
    BADA(p.y.zp = -129, "zero point");
    BADA(p.left_shift = -1, "left_shift");
    BADA(p.left_shift = 23, "left_shift");
    BADA(p.mult_a = -1, "negative");
    BADA(p.mult_out = INT32_MIN, "negative");
    BADA(p.shift_a = 1, "shift");
    BADA(p.shift_b = -32, "shift");
    BADA(p.shift_out = 31, "shift");
    BADA(p.shift_out = -32, "shift");
    BADA((p.act_min = 5, p.act_max = 4), "activation range");
    BADA((p.y.dtype = TSR_DT_UINT8, p.act_min = -1, p.act_max = 255), "activation range");
    BADA(p.act_max = 128, "activation range");
#undef BADA
    assert_int_equal(tsr_add_plan(dev, NULL, &(tsr_eltwise_plan_t){0}), TSR_EINVAL);
    tsr_clip_params_t c;
#define BADC(stmt, word)                                                                                           \
    do {                                                                                                           \
        memset(&c, 0, sizeof c);                                                                                   \
        c.x = (tsr_eltwise_desc_t){2, 3, 4, 5, TSR_DT_UINT8, 10};                                                  \
        c.y = c.x;                                                                                                 \
        c.lo = 10;                                                                                                 \
        c.hi = 255;                                                                                                \
        stmt;                                                                                                      \
        expect_clip_err(dev, &c, word);                                                                            \
    } while (0)
    BADC(c.x.h = 0, "positive");
    BADC(c.y.w = 4, "no broadcasting");
    BADC(c.y.dtype = TSR_DT_INT8, "do not rescale");
    BADC(c.y.zp = 11, "do not rescale");
    BADC((c.x.zp = 300, c.y.zp = 300), "zero point");
    BADC(c.x.dtype = TSR_DT_INT32, "int8 or uint8");
    BADC(c.lo = -1, "bounds");
    BADC(c.hi = 256, "bounds");
    BADC((c.lo = 20, c.hi = 19), "bounds");
    BADC((c.x.dtype = c.y.dtype = TSR_DT_INT8, c.hi = 128), "bounds");
#undef BADC
    assert_int_equal(tsr_clip_plan(dev, NULL, &(tsr_eltwise_plan_t){0}), TSR_EINVAL);
    tsr_clip_params_t rp;
    assert_int_equal(tsr_relu_params(NULL, &rp), TSR_EINVAL);
    tsr_eltwise_desc_t bd = {1, 1, 1, 1, TSR_DT_INT8, 200};
    assert_int_equal(tsr_relu_params(&bd, &rp), TSR_EINVAL);
    uint8_t buf[64] = {0};
    assert_int_equal(tsr_relu_run(dev, &bd, buf, buf), TSR_EINVAL);

    /* NULL data, and a plan used with the other operator's functions */
    p = good_add();
    assert_int_equal(tsr_add_run(dev, &p, buf, NULL, buf), TSR_EINVAL);
    tsr_eltwise_plan_t pl;
    assert_int_equal(tsr_add_plan(dev, &p, &pl), TSR_OK);
    assert_int_equal(tsr_clip_exec(dev, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "other operator"));
    assert_int_equal(tsr_clip_write_input(dev, &pl, buf), TSR_EINVAL);
    assert_int_equal(tsr_add_write_inputs(dev, &pl, buf, NULL), TSR_EINVAL);
    assert_int_equal(tsr_add_read_output(dev, &pl, NULL), TSR_EINVAL);
    tsr_add_plan_free(dev, &pl);
    assert_int_equal(tsr_add_exec(dev, &pl), TSR_EINVAL); /* freed */
    assert_int_equal(tsr_add_exec(dev, NULL), TSR_EINVAL);
    tsr_device_close(dev);

    /* 16-bit accumulators: the ALU ops are not the 32-bit functions */
    if (skip_extra_model("acc16"))
        return;
    dev = open_dev("acc16");
    p = good_add();
    expect_add_err(dev, &p, "int32 accumulators");
    tsr_device_close(dev);
}

/* ------------------------------------------------------------- figures */

/* 1x64x56x56 (ResNet-18 residual add and relu) on default: plan figures,
 * and on a timed backend cycles per element against the DRAM bound (bytes
 * moved / bus bytes per cycle). The results are checked too. */
static void bench_one(tsr_device_t *dev, elt_case_t *k, const char *name)
{
    const tsr_config_t *c = tsr_device_config(dev);
    const tsr_eltwise_desc_t *d = k->is_add ? &k->a.a : &k->c.x;
    size_t n = numel(d);
    uint8_t *a = malloc(n), *b = malloc(n), *y = malloc(n), *yr = malloc(n);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(y);
    assert_non_null(yr);
    uint64_t s = 99;
    for (size_t i = 0; i < n; i++) {
        a[i] = (uint8_t)rnd(&s, 0, 255);
        b[i] = (uint8_t)rnd(&s, 0, 255);
    }
    tsr_eltwise_plan_t pl;
    int rc = k->is_add ? tsr_add_plan(dev, &k->a, &pl) : tsr_clip_plan(dev, &k->c, &pl);
    if (rc)
        fail_msg("%s: plan: %s", name, tsr_errmsg());
    rc = k->is_add ? tsr_add_write_inputs(dev, &pl, a, b) : tsr_clip_write_input(dev, &pl, a);
    assert_int_equal(rc, TSR_OK);
    tsr_counters_t c0, c1;
    assert_int_equal(tsr_read_counters(dev, &c0), TSR_OK);
    rc = k->is_add ? tsr_add_exec(dev, &pl) : tsr_clip_exec(dev, &pl);
    if (rc)
        fail_msg("%s: exec: %s", name, tsr_errmsg());
    assert_int_equal(tsr_read_counters(dev, &c1), TSR_OK);
    rc = k->is_add ? tsr_add_read_output(dev, &pl, y) : tsr_clip_read_output(dev, &pl, y);
    assert_int_equal(rc, TSR_OK);
    reference(k, a, b, yr, name);
    compare(name, k->is_add ? k->a.y.dtype : k->c.x.dtype, y, yr, n);
    assert_int_equal(c1.alu_ops - c0.alu_ops, pl.alu_ops);
    assert_int_equal(c1.gemm_ops - c0.gemm_ops, pl.gemm_ops);
    double bus = c->dram_bus_width / 8.0;
    double bound = (double)pl.dram_bytes / bus;
    printf("  %s [1,64,56,56] on %s%s: tile %d rows x %d tiles, %d buffers, %d ops/row (%.3f ops/element), %zu "
           "insns, DRAM %llu B -> bound %.0f cycles (%.3f/element)",
           name, backend(), pl.linear ? " (power-of-two fast path)" : "", pl.tile_rows, pl.tiles, pl.nbuf,
           pl.ops_per_row,
           (double)pl.ops_per_row / (c->batch * c->block_out), pl.ninsns, (unsigned long long)pl.dram_bytes, bound,
           bound / (double)n);
    uint64_t cyc = c1.cycles - c0.cycles;
    if (cyc) {
        printf(", measured %llu cycles = %.3f/element (%.2fx the DRAM bound; model %.0f)",
               (unsigned long long)cyc, (double)cyc / (double)n, (double)cyc / bound, pl.est_cycles);
        if (c1.has_hw)
            printf("\n    compute busy %llu, stalled on tokens %llu; load busy %llu; store busy %llu",
                   (unsigned long long)(c1.hw[TSR_CNT_COMPUTE_BUSY] - c0.hw[TSR_CNT_COMPUTE_BUSY]),
                   (unsigned long long)(c1.hw[TSR_CNT_COMPUTE_STALL_TOK] - c0.hw[TSR_CNT_COMPUTE_STALL_TOK]),
                   (unsigned long long)(c1.hw[TSR_CNT_LOAD_BUSY] - c0.hw[TSR_CNT_LOAD_BUSY]),
                   (unsigned long long)(c1.hw[TSR_CNT_STORE_BUSY] - c0.hw[TSR_CNT_STORE_BUSY]));
    }
    printf("\n");
    tsr_add_plan_free(dev, &pl);
    free(a);
    free(b);
    free(y);
    free(yr);
}

static void test_bench(void **state)
{
    (void)state;
    tsr_device_t *dev = open_dev("default");
    elt_case_t k;
    memset(&k, 0, sizeof k);
    k.is_add = 1;
    k.a.a = (tsr_eltwise_desc_t){1, 64, 56, 56, TSR_DT_INT8, -3};
    k.a.b = (tsr_eltwise_desc_t){1, 64, 56, 56, TSR_DT_INT8, 7};
    k.a.y = (tsr_eltwise_desc_t){1, 64, 56, 56, TSR_DT_INT8, -1};
    opref_add_params_t op;
    assert_int_equal(opref_add_params_from_scales(0.031, 0.047, 0.06, OPREF_INT8, &op), TSR_OK);
    k.a.left_shift = op.left_shift;
    k.a.mult_a = op.mult_a;
    k.a.shift_a = op.shift_a;
    k.a.mult_b = op.mult_b;
    k.a.shift_b = op.shift_b;
    k.a.mult_out = op.mult_out;
    k.a.shift_out = op.shift_out;
    k.a.act_min = op.act_min;
    k.a.act_max = op.act_max;
    bench_one(dev, &k, "add");
    /* equal input scales: the power-of-two fast path */
    assert_int_equal(opref_add_params_from_scales(0.047, 0.047, 0.06, OPREF_INT8, &op), TSR_OK);
    k.a.mult_a = op.mult_a;
    k.a.shift_a = op.shift_a;
    k.a.mult_b = op.mult_b;
    k.a.shift_b = op.shift_b;
    k.a.mult_out = op.mult_out;
    k.a.shift_out = op.shift_out;
    bench_one(dev, &k, "add (equal input scales)");
    memset(&k, 0, sizeof k);
    k.c.x = (tsr_eltwise_desc_t){1, 64, 56, 56, TSR_DT_INT8, -5};
    assert_int_equal(tsr_relu_params(&k.c.x, &k.c), TSR_OK);
    bench_one(dev, &k, "relu");
    tsr_device_close(dev);
}

/* The shared plan step (tsr_opplan.h) as the add plan uses it: device
 * tensors that do not match the plan are refused before anything is
 * allocated (the allocator's first free address is unchanged), as is a
 * tensor with no buffer (by the add's own check), and a stream is never bound to a misaligned
 * buffer. */
static uint64_t first_free(tsr_device_t *dev)
{
    uint64_t a = 0;
    assert_int_equal(tsr_mem_alloc(dev, 64, &a), 0);
    assert_int_equal(tsr_mem_free(dev, a), 0);
    return a;
}

static void test_plan_step(void **state)
{
    (void)state;
    tsr_device_t *dev = tsr_test_open("default", 1);
    const tsr_config_t *c = tsr_device_config(dev);
    tsr_dtensor_t a, b, small, y;
    assert_int_equal(tsr_dtensor_init(c, 1, 32, 8, 8, TSR_DT_INT8, 0, &a), 0);
    assert_int_equal(tsr_dtensor_init(c, 1, 32, 8, 8, TSR_DT_INT8, 0, &b), 0);
    assert_int_equal(tsr_dtensor_init(c, 1, 16, 8, 8, TSR_DT_INT8, 0, &small), 0);
    assert_int_equal(tsr_dtensor_init(c, 1, 32, 8, 8, TSR_DT_INT8, 0, &y), 0);
    assert_int_equal(tsr_dtensor_alloc(dev, &a), 0);
    assert_int_equal(tsr_dtensor_alloc(dev, &small), 0);
    assert_int_equal(tsr_dtensor_alloc(dev, &y), 0);
    const tsr_eltwise_desc_t d = {1, 32, 8, 8, TSR_DT_INT8, 0};
    tsr_add_params_t p = {.a = d, .b = d, .y = d, .left_shift = 20, .mult_a = 1 << 30, .mult_b = 1 << 30,
                          .shift_a = 0, .shift_b = 0, .mult_out = 1 << 30, .shift_out = -19, .act_min = -128,
                          .act_max = 127};
    tsr_eltwise_plan_t pl;
    const uint64_t before = first_free(dev);
    /* b has no buffer */
    assert_int_equal(tsr_add_plan_tensors(dev, &p, &a, &b, &y, &pl), TSR_EINVAL);
    if (!strstr(tsr_errmsg(), "without a buffer"))
        fail_msg("unallocated tensor refused without saying why: %s", tsr_errmsg());
    assert_true(first_free(dev) == before);
    /* the step itself: a tensor of another size than the plan's buffer is
     * refused before the buffers before it are allocated */
    uint64_t w_addr = 0, x_addr = 0;
    const tsr_opbuf_t bufs[] = {{4096, NULL, &w_addr}, {a.bytes, &small, &x_addr}};
    assert_int_equal(tsr_opplan_buffers(dev, "add", bufs, 2), TSR_EINVAL);
    if (!strstr(tsr_errmsg(), "add: device tensors do not match the plan"))
        fail_msg("short tensor refused without saying why: %s", tsr_errmsg());
    assert_true(w_addr == 0 && x_addr == 0);
    assert_true(first_free(dev) == before);
    /* the good plan; its kernel bound to a misaligned input is refused */
    assert_int_equal(tsr_dtensor_alloc(dev, &b), 0);
    if (tsr_add_plan_tensors(dev, &p, &a, &b, &y, &pl))
        fail_msg("good add: %s", tsr_errmsg());
    uint64_t base[2][TSR_MEM_COUNT] = {{0}};
    base[0][TSR_MEM_INP] = base[1][TSR_MEM_INP] = a.addr + 1;
    base[0][TSR_MEM_OUT] = base[1][TSR_MEM_OUT] = y.addr;
    tsr_opplan_stream_t st;
    assert_int_equal(tsr_opplan_bind(c, "add", pl.kref, NULL, 2, (const uint64_t(*)[TSR_MEM_COUNT])base, 0, &st),
                     TSR_EINVAL);
    assert_null(st.insns);
    if (!strstr(tsr_errmsg(), "not aligned"))
        fail_msg("misaligned buffer refused without saying why: %s", tsr_errmsg());
    tsr_add_plan_free(dev, &pl);
    tsr_dtensor_free(dev, &a);
    tsr_dtensor_free(dev, &b);
    tsr_dtensor_free(dev, &small);
    tsr_dtensor_free(dev, &y);
    tsr_device_close(dev);
}

int main(void)
{
    printf("test_eltwise: backend %s, base seed %llu (TSR_ELTWISE_SEED)\n", backend(),
           (unsigned long long)base_seed());
    const char *filter = getenv("TSR_ELTWISE_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_params),     cmocka_unit_test(test_hand_clip),
        cmocka_unit_test(test_hand_add),       cmocka_unit_test(test_round_once), cmocka_unit_test(test_random_tiny),
        cmocka_unit_test(test_random_default), cmocka_unit_test(test_random_large),
        cmocka_unit_test(test_random_batch2),  cmocka_unit_test(test_random_rect),
        cmocka_unit_test(test_random_wide),    cmocka_unit_test(test_random_cramped),
        cmocka_unit_test(test_many_tiles),     cmocka_unit_test(test_one_call),
        cmocka_unit_test(test_bench),          cmocka_unit_test(test_plan_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
