/*
 * test_cli_op: `tessera op` end to end. Random .npy operands are written
 * with jit/tsr_npy, the CLI (TSR_CLI) runs conv2d or dense on them with
 * random flags (zero points as numbers or per-channel .npy, requantization
 * as --mult/--shift numbers or .npy or as real scales, clamps, strides,
 * the 1/2/4-number padding forms, depthwise), and the output file is
 * compared exactly with the plain-C reference of jit/operators.md
 * (tests/tsr_opref.c), parameters derived there independently
 * (opref_quantize_multiplier, opref_quantize_bound). Error cases (missing
 * or corrupt files, wrong dtypes and shapes, bad flags and values) check
 * the exit status, the one-line message, and that no output file is left
 * (or a previous one is untouched). Failures print the seed and the
 * command. TSR_TEST_BACKEND=rtl runs a few cases with --backend rtl.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsr_error.h"
#include "tsr_npy.h"
#include "tsr_opref.h"
#include "tsr_testenv.h"

static char g_dir[256];      /* scratch directory (the CLI runs in it) */
static char g_stdout[65536]; /* captured output of the last run */
static char g_stderr[65536];
static char g_cmd[8192]; /* the last command line */

static const char *backend(void) { return tsr_test_backend(); }
static int is_fsim(void) { return !strcmp(backend(), "fsim"); }

static uint64_t base_seed(void) { return tsr_test_seed("TSR_CLI_SEED", 20261123u); }

static uint64_t rng_next(uint64_t *s) { return tsr_test_next(s); }
static int rnd(uint64_t *s, int lo, int hi) { return tsr_test_rnd(s, lo, hi); }
static double rnd01(uint64_t *s) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

static void read_text(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = 0;
    fclose(f);
}

/* Run `tessera ARGS` in g_dir; returns the exit status, output captured. */
static int cli(const char *fmt, ...)
{
    char args[6144];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(g_cmd, sizeof g_cmd, "cd %s && %s %s >%s/.stdout 2>%s/.stderr", g_dir, TSR_CLI, args, g_dir, g_dir);
    int st = system(g_cmd);
    char p[512];
    snprintf(p, sizeof p, "%s/.stdout", g_dir);
    read_text(p, g_stdout, sizeof g_stdout);
    snprintf(p, sizeof p, "%s/.stderr", g_dir);
    read_text(p, g_stderr, sizeof g_stderr);
    snprintf(g_cmd, sizeof g_cmd, "tessera %s", args);
    if (st == -1 || !WIFEXITED(st))
        fail_msg("%s: did not exit normally (status %d): %s", g_cmd, st, g_stderr);
    return WEXITSTATUS(st);
}

static void path_of(const char *name, char *buf, size_t n) { snprintf(buf, n, "%s/%s", g_dir, name); }

static int exists(const char *name)
{
    char p[512];
    path_of(name, p, sizeof p);
    struct stat st;
    return stat(p, &st) == 0;
}

static void rm(const char *name)
{
    char p[512];
    path_of(name, p, sizeof p);
    remove(p);
}

static void save(const char *name, tsr_dtype_e dt, int ndim, const int64_t *shape, const void *data)
{
    tsr_tensor_t t;
    if (tsr_tensor_alloc(&t, dt, ndim, shape))
        fail_msg("alloc: %s", tsr_errmsg());
    memcpy(t.data, data, t.nbytes);
    char p[512];
    path_of(name, p, sizeof p);
    if (tsr_npy_write(p, &t))
        fail_msg("write %s: %s", p, tsr_errmsg());
    tsr_tensor_free(&t);
}

static void save1_i32(const char *name, const int32_t *v, int n)
{
    int64_t s[1] = {n};
    save(name, TSR_DT_INT32, 1, s, v);
}

static void save1_f32(const char *name, const double *v, int n)
{
    float f[512];
    for (int i = 0; i < n; i++)
        f[i] = (float)v[i];
    int64_t s[1] = {n};
    save(name, TSR_DT_FLOAT32, 1, s, f);
}

static int32_t dmin(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 0 : -128; }
static int32_t dmax(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 255 : 127; }
static opref_dtype_t odt(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? OPREF_UINT8 : OPREF_INT8; }

/* Load the CLI's output and compare with the reference bytes. */
static void compare_output(const char *name, tsr_dtype_e dt, int ndim, const int64_t *shape, const uint8_t *ref,
                           const char *desc)
{
    char p[512];
    path_of(name, p, sizeof p);
    tsr_tensor_t y = {0};
    if (tsr_npy_read(p, &y))
        fail_msg("%s\n  %s: output: %s", desc, g_cmd, tsr_errmsg());
    if (y.dtype != dt || y.ndim != ndim)
        fail_msg("%s\n  %s: output dtype %s ndim %d, want %s ndim %d", desc, g_cmd, tsr_dtype_name(y.dtype), y.ndim,
                 tsr_dtype_name(dt), ndim);
    for (int i = 0; i < ndim; i++)
        if (y.shape[i] != shape[i])
            fail_msg("%s\n  %s: output dim %d is %lld, want %lld", desc, g_cmd, i, (long long)y.shape[i],
                     (long long)shape[i]);
    const uint8_t *yb = y.data;
    for (size_t i = 0; i < y.nbytes; i++)
        if (yb[i] != ref[i]) {
            int32_t got = dt == TSR_DT_UINT8 ? yb[i] : (int8_t)yb[i];
            int32_t want = dt == TSR_DT_UINT8 ? ref[i] : (int8_t)ref[i];
            fail_msg("%s\n  %s: first difference at flat index %zu: got %d, reference %d", desc, g_cmd, i, got, want);
        }
    tsr_tensor_free(&y);
}

/* ------------------------------------------------ shared quantization */

/* Random requantization / clamp flags for cout channels and their
 * reference values. kterms: terms per output (for a sensible scale). */
typedef struct {
    char flags[2048];             /* CLI flags */
    tsr_dtype_e y_dtype;          /* output dtype */
    int32_t y_zp;                 /* output zero point */
    int32_t mult[256], shift[256]; /* reference requantization */
    int rq_count;                 /* 1 or cout */
    int32_t act_min, act_max;     /* reference clamp */
} rq_case_t;

static void add_flag(char *buf, size_t n, const char *fmt, ...)
{
    size_t k = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + k, n - k, fmt, ap);
    va_end(ap);
}

static void random_rq(uint64_t *s, tsr_dtype_e x_dtype, int cout, int kterms, int spread, rq_case_t *r)
{
    memset(r, 0, sizeof *r);
    char *f = r->flags;
    const size_t fn = sizeof r->flags;
    r->y_dtype = x_dtype;
    if (rnd(s, 0, 1)) {
        r->y_dtype = rnd(s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
        add_flag(f, fn, " --y-dtype %s", r->y_dtype == TSR_DT_UINT8 ? "uint8" : "int8");
    }
    r->y_zp = rnd(s, 0, 3) ? rnd(s, dmin(r->y_dtype), dmax(r->y_dtype)) : 0;
    if (r->y_zp || rnd(s, 0, 1))
        add_flag(f, fn, " --y-zp %d", r->y_zp);
    int lg = 0;
    while ((1 << lg) < kterms)
        lg++;
    int e = -(lg / 2 + 7 + spread); /* real multiplier ~ 2^e */
    int mode = rnd(s, 0, 3);
    double ys = 0;
    r->rq_count = mode == 1 || mode == 3 ? cout : 1;
    if (mode <= 1) { /* fixed point */
        for (int i = 0; i < r->rq_count; i++) {
            r->mult[i] = (int32_t)((1u << 30) + (uint32_t)rnd(s, 0, (1 << 30) - 1));
            r->shift[i] = e + 1 + rnd(s, -1, 1);
        }
        if (mode == 0)
            add_flag(f, fn, " --mult %d --shift %d", r->mult[0], r->shift[0]);
        else {
            save1_i32("mult.npy", r->mult, cout);
            if (rnd(s, 0, 1)) {
                save1_i32("shift.npy", r->shift, cout);
                add_flag(f, fn, " --mult mult.npy --shift shift.npy");
            } else { /* a scalar shift is broadcast */
                for (int i = 1; i < cout; i++)
                    r->shift[i] = r->shift[0];
                add_flag(f, fn, " --mult mult.npy --shift %d", r->shift[0]);
            }
        }
    } else { /* real scales */
        double xs = ldexp(0.5 + 0.5 * rnd01(s), rnd(s, -8, -2));
        double ws[256] = {0};
        int nw = mode == 3 ? cout : 1;
        for (int i = 0; i < nw; i++)
            ws[i] = (double)(float)ldexp(0.5 + 0.5 * rnd01(s), rnd(s, -9, -5)); /* float32 exact */
        ys = xs * ws[0] / ldexp(0.7 + 0.6 * rnd01(s), e);
        add_flag(f, fn, " --x-scale %.17g --y-scale %.17g", xs, ys);
        if (mode == 3) {
            save1_f32("wscale.npy", ws, nw);
            add_flag(f, fn, " --w-scale wscale.npy");
        } else
            add_flag(f, fn, " --w-scale %.17g", ws[0]);
        for (int i = 0; i < nw; i++) {
            int sh;
            if (opref_quantize_multiplier(xs * ws[i] / ys, &r->mult[i], &sh))
                fail_msg("reference quantize_multiplier: %s", tsr_errmsg());
            r->shift[i] = sh;
        }
    }
    r->act_min = dmin(r->y_dtype);
    r->act_max = dmax(r->y_dtype);
    int clamp = rnd(s, 0, 4);
    if (clamp == 1) {
        add_flag(f, fn, " --relu");
        r->act_min = r->y_zp;
    } else if (clamp == 2) {
        r->act_min = rnd(s, dmin(r->y_dtype), r->y_zp);
        r->act_max = rnd(s, r->act_min, dmax(r->y_dtype));
        add_flag(f, fn, " --act-min %d --act-max %d", r->act_min, r->act_max);
    } else if (clamp == 3) {
        r->act_max = rnd(s, r->y_zp, dmax(r->y_dtype));
        add_flag(f, fn, " --act-max %d", r->act_max);
    } else if (clamp == 4 && ys > 0) {
        add_flag(f, fn, " --relu6");
        if (opref_quantize_bound(0.0, ys, r->y_zp, odt(r->y_dtype), &r->act_min) ||
            opref_quantize_bound(6.0, ys, r->y_zp, odt(r->y_dtype), &r->act_max))
            fail_msg("reference quantize_bound: %s", tsr_errmsg());
    }
}

/* --------------------------------------------------------------- conv2d */

static void conv_case(uint64_t seed)
{
    uint64_t s = seed;
    char flags[4096] = "";
    int n = rnd(&s, 1, 2), cin = rnd(&s, 1, 6), h = rnd(&s, 1, 7), w = rnd(&s, 1, 7);
    int kh = rnd(&s, 1, 3), kw = rnd(&s, 0, 2) ? kh : rnd(&s, 1, 3);
    int dw = cin >= 2 && rnd(&s, 0, 3) == 0;
    int cout = dw ? cin : rnd(&s, 1, 9);
    opref_conv_params_t cp = {1, 1, 0, 0, 0, 0, dw ? cin : 1};
    if (dw)
        add_flag(flags, sizeof flags, " --groups %d", cin);
    else if (rnd(&s, 0, 3) == 0)
        add_flag(flags, sizeof flags, " --groups 1");
    int sf = rnd(&s, 0, 2);
    if (sf == 1) {
        cp.stride_h = cp.stride_w = 2;
        add_flag(flags, sizeof flags, " --stride 2");
    } else if (sf == 2) {
        cp.stride_h = rnd(&s, 1, 2);
        cp.stride_w = rnd(&s, 1, 2);
        add_flag(flags, sizeof flags, " --stride %d,%d", cp.stride_h, cp.stride_w);
    }
    int pf = rnd(&s, 0, 3);
    if (pf == 1) {
        cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = rnd(&s, 0, 2);
        add_flag(flags, sizeof flags, " --pad %d", cp.pad_top);
    } else if (pf == 2) {
        cp.pad_top = cp.pad_bottom = rnd(&s, 0, 2);
        cp.pad_left = cp.pad_right = rnd(&s, 0, 2);
        add_flag(flags, sizeof flags, " --pad %d,%d", cp.pad_top, cp.pad_left);
    } else if (pf == 3) {
        cp.pad_top = rnd(&s, 0, 2);
        cp.pad_left = rnd(&s, 0, 2);
        cp.pad_bottom = rnd(&s, 0, 2);
        cp.pad_right = rnd(&s, 0, 2);
        add_flag(flags, sizeof flags, " --pad %d,%d,%d,%d", cp.pad_top, cp.pad_left, cp.pad_bottom, cp.pad_right);
    }
    if (h + cp.pad_top + cp.pad_bottom < kh)
        h = kh;
    if (w + cp.pad_left + cp.pad_right < kw)
        w = kw;
    tsr_dtype_e xdt = rnd(&s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    tsr_dtype_e wdt = rnd(&s, 0, 2) == 0 ? TSR_DT_UINT8 : TSR_DT_INT8;
    int32_t x_zp = rnd(&s, 0, 3) ? rnd(&s, dmin(xdt), dmax(xdt)) : 0;
    if (x_zp || rnd(&s, 0, 1))
        add_flag(flags, sizeof flags, " --x-zp %d", x_zp);
    /* weight zero points: a quarter of the cases take any zero point and
     * weights over the whole dtype range (w - zp beyond int8: split
     * weights, depthwise too); the rest keep w - zp within int8 */
    const int fullw = rnd(&s, 0, 3) == 0;
    int32_t w_zp[64];
    int nzp = rnd(&s, 0, 1) ? cout : 1;
    for (int i = 0; i < nzp; i++)
        w_zp[i] = fullw ? rnd(&s, dmin(wdt), dmax(wdt))
                  : wdt == TSR_DT_UINT8 ? 128 + (rnd(&s, 0, 2) ? 0 : rnd(&s, -5, 5))
                                        : (rnd(&s, 0, 2) ? 0 : rnd(&s, -9, 9));
    if (nzp > 1) {
        int64_t sh[1] = {cout};
        if (rnd(&s, 0, 1))
            save("wzp.npy", TSR_DT_INT32, 1, sh, w_zp);
        else { /* an int16 array */
            int16_t z16[64];
            for (int i = 0; i < cout; i++)
                z16[i] = (int16_t)w_zp[i];
            save("wzp.npy", TSR_DT_INT16, 1, sh, z16);
        }
        add_flag(flags, sizeof flags, " --w-zp wzp.npy");
    } else if (w_zp[0] || rnd(&s, 0, 1))
        add_flag(flags, sizeof flags, " --w-zp %d", w_zp[0]);
    int cin_g = dw ? 1 : cin;
    size_t nx = (size_t)n * cin * h * w, nw = (size_t)cout * cin_g * kh * kw;
    uint8_t *x = malloc(nx), *wt = malloc(nw);
    int32_t bias[64];
    assert_true(x && wt);
    for (size_t i = 0; i < nx; i++)
        x[i] = (uint8_t)rnd(&s, dmin(xdt), dmax(xdt));
    for (size_t i = 0; i < nw; i++) {
        int32_t zp = w_zp[nzp == 1 ? 0 : (int)(i / ((size_t)cin_g * kh * kw))];
        int lo = !fullw && zp - 128 > dmin(wdt) ? zp - 128 : dmin(wdt);
        int hi = !fullw && zp + 127 < dmax(wdt) ? zp + 127 : dmax(wdt);
        wt[i] = (uint8_t)rnd(&s, lo, hi);
    }
    for (int i = 0; i < cout; i++)
        bias[i] = rnd(&s, -3000, 3000);
    int use_bias = rnd(&s, 0, 3) != 0;
    int64_t xs[4] = {n, cin, h, w}, ws[4] = {cout, cin_g, kh, kw};
    save("x.npy", xdt, 4, xs, x);
    save("w.npy", wdt, 4, ws, wt);
    if (use_bias) {
        save1_i32("b.npy", bias, cout);
        add_flag(flags, sizeof flags, " --bias b.npy");
    }
    rq_case_t r;
    random_rq(&s, xdt, cout, cin_g * kh * kw, 0, &r);
    /* reference */
    opref_tensor_t ox = {odt(xdt), n, cin, h, w, x, x_zp};
    opref_weights_t ow = {odt(wdt), cout, cin_g, kh, kw, wt, w_zp, nzp};
    opref_shape_t os;
    if (opref_conv2d_out_shape(&ox, &ow, &cp, &os))
        fail_msg("seed %llu: reference shape: %s", (unsigned long long)seed, tsr_errmsg());
    size_t ny = (size_t)os.n * os.c * os.h * os.w;
    uint8_t *yr = malloc(ny);
    assert_non_null(yr);
    opref_tensor_t oy = {odt(r.y_dtype), os.n, os.c, os.h, os.w, yr, r.y_zp};
    opref_requant_t rq = {r.rq_count, r.mult, r.shift, r.act_min, r.act_max, NULL};
    if (opref_conv2d(&ox, &ow, use_bias ? bias : NULL, &cp, &rq, &oy))
        fail_msg("seed %llu: reference: %s", (unsigned long long)seed, tsr_errmsg());
    rm("y.npy");
    int st = cli("op conv2d -x x.npy -w w.npy -o y.npy --backend %s --seed %llu%s%s", backend(),
                 (unsigned long long)(seed | 1), flags, r.flags);
    char desc[128];
    snprintf(desc, sizeof desc, "conv2d seed %llu (TSR_CLI_SEED base %llu)", (unsigned long long)seed,
             (unsigned long long)base_seed());
    if (st != 0)
        fail_msg("%s\n  %s: exit %d: %s", desc, g_cmd, st, g_stderr);
    if (!strstr(g_stdout, "conv2d: x [") || !strstr(g_stdout, "GEMM ops"))
        fail_msg("%s\n  %s: summary line missing: \"%s\"", desc, g_cmd, g_stdout);
    int64_t yshape[4] = {os.n, os.c, os.h, os.w};
    compare_output("y.npy", r.y_dtype, 4, yshape, yr, desc);
    free(x);
    free(wt);
    free(yr);
}

static void test_conv2d_random(void **state)
{
    (void)state;
    int count = is_fsim() ? 60 : 4;
    for (int i = 0; i < count; i++)
        conv_case(base_seed() * 31 + (uint64_t)i);
    printf("  %d conv2d cases through the CLI on %s\n", count, backend());
}

/* ---------------------------------------------------------------- dense */

static void dense_case(uint64_t seed)
{
    uint64_t s = seed;
    char flags[4096] = "";
    int n = rnd(&s, 1, 9), m = rnd(&s, 1, 20);
    int four = rnd(&s, 0, 2) == 0;
    int c = four ? rnd(&s, 1, 4) : 1, hh = four ? rnd(&s, 1, 3) : 1, ww = four ? rnd(&s, 1, 3) : 1;
    int k = four ? c * hh * ww : rnd(&s, 1, 70);
    tsr_dtype_e xdt = rnd(&s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    tsr_dtype_e wdt = rnd(&s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    int32_t x_zp = rnd(&s, 0, 3) ? rnd(&s, dmin(xdt), dmax(xdt)) : 0;
    if (x_zp || rnd(&s, 0, 1))
        add_flag(flags, sizeof flags, " --x-zp %d", x_zp);
    int32_t w_zp[64];
    int nzp = rnd(&s, 0, 1) ? m : 1;
    for (int i = 0; i < nzp; i++) /* any zero point: dense splits the reduction when needed */
        w_zp[i] = rnd(&s, dmin(wdt), dmax(wdt));
    if (nzp > 1) {
        int64_t sh[1] = {m};
        if (wdt == TSR_DT_UINT8 && rnd(&s, 0, 1)) { /* a uint8 array */
            uint8_t z8[64];
            for (int i = 0; i < m; i++)
                z8[i] = (uint8_t)w_zp[i];
            save("wzp.npy", TSR_DT_UINT8, 1, sh, z8);
        } else
            save("wzp.npy", TSR_DT_INT32, 1, sh, w_zp);
        add_flag(flags, sizeof flags, " --w-zp wzp.npy");
    } else
        add_flag(flags, sizeof flags, " --w-zp %d", w_zp[0]);
    size_t nx = (size_t)n * k, nw = (size_t)m * k;
    uint8_t *x = malloc(nx), *wt = malloc(nw);
    int32_t bias[64];
    assert_true(x && wt);
    /* values near the zero points keep the sums (and outputs) moderate */
    for (size_t i = 0; i < nx; i++) {
        int v = x_zp + rnd(&s, -60, 60);
        x[i] = (uint8_t)(v < dmin(xdt) ? dmin(xdt) : v > dmax(xdt) ? dmax(xdt) : v);
    }
    for (size_t i = 0; i < nw; i++)
        wt[i] = (uint8_t)rnd(&s, dmin(wdt), dmax(wdt));
    for (int i = 0; i < m; i++)
        bias[i] = rnd(&s, -3000, 3000);
    int use_bias = rnd(&s, 0, 3) != 0;
    if (four) {
        int64_t xs[4] = {n, c, hh, ww};
        save("x.npy", xdt, 4, xs, x);
    } else {
        int64_t xs[2] = {n, k};
        save("x.npy", xdt, 2, xs, x);
    }
    int64_t ws[2] = {m, k};
    save("w.npy", wdt, 2, ws, wt);
    if (use_bias) {
        save1_i32("b.npy", bias, m);
        add_flag(flags, sizeof flags, " --bias b.npy");
    }
    rq_case_t r;
    random_rq(&s, xdt, m, k, 1, &r);
    opref_tensor_t ox = {odt(xdt), n, k, 1, 1, x, x_zp};
    opref_weights_t ow = {odt(wdt), m, k, 1, 1, wt, w_zp, nzp};
    uint8_t *yr = malloc((size_t)n * m);
    assert_non_null(yr);
    opref_tensor_t oy = {odt(r.y_dtype), n, m, 1, 1, yr, r.y_zp};
    opref_requant_t rq = {r.rq_count, r.mult, r.shift, r.act_min, r.act_max, NULL};
    if (opref_dense(&ox, &ow, use_bias ? bias : NULL, &rq, &oy))
        fail_msg("seed %llu: reference: %s", (unsigned long long)seed, tsr_errmsg());
    rm("y.npy");
    const char *cfg = rnd(&s, 0, 1) ? "tiny" : "default";
    int st = cli("op dense -x x.npy -w w.npy -o y.npy --backend %s --config %s --seed %llu%s%s", backend(), cfg,
                 (unsigned long long)(seed | 1), flags, r.flags);
    char desc[128];
    snprintf(desc, sizeof desc, "dense seed %llu (TSR_CLI_SEED base %llu)", (unsigned long long)seed,
             (unsigned long long)base_seed());
    if (st != 0)
        fail_msg("%s\n  %s: exit %d: %s", desc, g_cmd, st, g_stderr);
    int64_t yshape[2] = {n, m};
    compare_output("y.npy", r.y_dtype, 2, yshape, yr, desc);
    free(x);
    free(wt);
    free(yr);
}

static void test_dense_random(void **state)
{
    (void)state;
    int count = is_fsim() ? 60 : 4;
    for (int i = 0; i < count; i++)
        dense_case(base_seed() * 37 + (uint64_t)i);
    printf("  %d dense cases through the CLI on %s\n", count, backend());
}

/* ----------------------------------------------------------- help, quiet */

static void test_help(void **state)
{
    (void)state;
    assert_int_equal(cli("--help"), 0);
    assert_non_null(strstr(g_stdout, "  op "));
    assert_int_equal(cli("op --help"), 0);
    static const char *all[] = {"--input", "--weight", "--bias", "--output", "--x-zp", "--w-zp", "--y-zp",
                                "--y-dtype", "--mult", "--shift", "--x-scale", "--w-scale", "--y-scale",
                                "--act-min", "--act-max", "--relu", "--relu6", "--backend", "--config", "--seed",
                                "--quiet", "conv2d", "dense", "--dram-latency", "--watchdog", "maxpool", "avgpool",
                                "globalavgpool", "add", "relu", "clip",
                                "--kernel", "--count-include-pad", "--input-a", "--input-b", "--a-zp", "--b-zp",
                                "--a-scale", "--b-scale", "--add-params"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strstr(g_stdout, all[i]))
            fail_msg("`tessera op --help` does not mention %s", all[i]);
    assert_int_equal(cli("op conv2d --help"), 0);
    static const char *conv[] = {"--input", "--weight", "--bias", "--output", "--stride", "--pad", "--groups",
                                 "--x-zp", "--w-zp", "--y-zp", "--y-dtype", "--mult", "--shift", "--x-scale",
                                 "--w-scale", "--y-scale", "--act-min", "--act-max", "--relu", "--relu6",
                                 "--config", "--backend", "--seed", "--quiet", "--dram-bw", "T,L,B,R"};
    for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++)
        if (!strstr(g_stdout, conv[i]))
            fail_msg("`tessera op conv2d --help` does not mention %s", conv[i]);
    assert_int_equal(cli("op dense -h"), 0);
    assert_non_null(strstr(g_stdout, "[N, C*H*W]"));
    assert_null(strstr(g_stdout, "--groups"));
    assert_int_equal(cli("op add --help"), 0);
    static const char *add[] = {"--input-a", "--input-b", "--a-zp", "--b-zp", "--y-zp", "--a-scale", "--b-scale",
                                "--y-scale", "--add-params", "--relu6", "--y-dtype"};
    for (size_t i = 0; i < sizeof add / sizeof add[0]; i++)
        if (!strstr(g_stdout, add[i]))
            fail_msg("`tessera op add --help` does not mention %s", add[i]);
    assert_int_equal(cli("op clip --help"), 0);
    assert_non_null(strstr(g_stdout, "--act-min"));
    assert_int_equal(cli("op relu --help"), 0);
    assert_non_null(strstr(g_stdout, "--x-zp"));
    assert_int_equal(cli("op avgpool --help"), 0);
    static const char *pool[] = {"--kernel", "--stride", "--pad", "--count-include-pad", "--x-zp", "globalavgpool"};
    for (size_t i = 0; i < sizeof pool / sizeof pool[0]; i++)
        if (!strstr(g_stdout, pool[i]))
            fail_msg("`tessera op avgpool --help` does not mention %s", pool[i]);
    assert_int_equal(cli("op"), 2);
    assert_non_null(strstr(g_stderr, "usage: tessera op"));
}

static void test_quiet(void **state)
{
    (void)state;
    int8_t x[6] = {1, -2, 3, -4, 5, -6}, w[6] = {7, 8, 9, -10, -11, -12};
    int64_t xs[2] = {2, 3}, ws[2] = {2, 3};
    save("x.npy", TSR_DT_INT8, 2, xs, x);
    save("w.npy", TSR_DT_INT8, 2, ws, w);
    assert_int_equal(cli("op dense -x x.npy -w w.npy -o y.npy --mult 1073741824 --shift 1 -q --config tiny"), 0);
    assert_string_equal(g_stdout, "");
    assert_string_equal(g_stderr, "");
    /* exact: y = x . w (mult 2^30, shift 1 = 1.0) */
    int8_t ref[4] = {1 * 7 - 2 * 8 + 3 * 9, -10 + 22 - 36, -4 * 7 + 5 * 8 - 6 * 9, 40 - 55 + 72};
    int64_t ys[2] = {2, 2};
    compare_output("y.npy", TSR_DT_INT8, 2, ys, (const uint8_t *)ref, "quiet");
}

/* --------------------------------------------------------------- errors */

/* A failing command: exit status, a one-line message containing `want`,
 * and no output file (or the previous one untouched). */
static void expect_fail(int want_status, const char *want, const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    int st = cli("%s", args);
    if (st != want_status)
        fail_msg("%s: exit %d, want %d (stderr: %s)", g_cmd, st, want_status, g_stderr);
    if (!strstr(g_stderr, want))
        fail_msg("%s: message \"%s\" lacks \"%s\"", g_cmd, g_stderr, want);
    char *nl = strchr(g_stderr, '\n');
    if (!nl || nl[1])
        fail_msg("%s: message is not one line: \"%s\"", g_cmd, g_stderr);
    if (exists("out.npy")) {
        char p[512], got[64];
        path_of("out.npy", p, sizeof p);
        read_text(p, got, sizeof got);
        if (strcmp(got, "previous contents"))
            fail_msg("%s: out.npy was written or changed although the command failed", g_cmd);
    }
}

static void write_raw(const char *name, const void *data, size_t n)
{
    char p[512];
    path_of(name, p, sizeof p);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void test_errors(void **state)
{
    (void)state;
    /* valid operands: conv x [1,4,5,5], w [3,4,3,3]; dense x [2,8], w [3,8] */
    int8_t x[100], w[108], xd[16], wd[24];
    for (int i = 0; i < 108; i++)
        w[i] = (int8_t)(i % 7 - 3);
    for (int i = 0; i < 100; i++)
        x[i] = (int8_t)(i % 11 - 5);
    memcpy(xd, x, sizeof xd);
    memcpy(wd, w, sizeof wd);
    int64_t xs[4] = {1, 4, 5, 5}, ws[4] = {3, 4, 3, 3}, xds[2] = {2, 8}, wds[2] = {3, 8};
    save("x.npy", TSR_DT_INT8, 4, xs, x);
    save("w.npy", TSR_DT_INT8, 4, ws, w);
    save("xd.npy", TSR_DT_INT8, 2, xds, xd);
    int64_t x1s[4] = {1, 4, 1, 1}, w5s[4] = {3, 5, 1, 1}, x0s[2] = {0, 8};
    save("x0.npy", TSR_DT_INT8, 2, x0s, x);
    save("xs.npy", TSR_DT_INT8, 0, NULL, x);
    save("w5.npy", TSR_DT_INT8, 4, w5s, w);
    save("x1.npy", TSR_DT_INT8, 4, x1s, x);
    save("wd.npy", TSR_DT_INT8, 2, wds, wd);
    int32_t b3[3] = {1, 2, 3}, b4[4] = {1, 2, 3, 4};
    save1_i32("b3.npy", b3, 3);
    save1_i32("b4.npy", b4, 4);
    int64_t s3[1] = {3};
    save("b3i8.npy", TSR_DT_INT8, 1, s3, "\1\2\3");
    float xf[100] = {0};
    save("xf.npy", TSR_DT_FLOAT32, 4, xs, xf);
    uint8_t wu[108];
    for (int i = 0; i < 108; i++)
        wu[i] = (uint8_t)(i * 3);
    save("wu.npy", TSR_DT_UINT8, 4, ws, wu);
    int64_t wdws[4] = {4, 1, 3, 3}; /* depthwise weights for x.npy's 4 channels, some above 127 */
    uint8_t wudw[36];
    for (int i = 0; i < 36; i++)
        wudw[i] = (uint8_t)(i * 7);
    save("wudw.npy", TSR_DT_UINT8, 4, wdws, wudw);
    double sc[2] = {0.5, 0.25};
    save1_f32("sc2.npy", sc, 2);
    int32_t z2[2] = {0, 1};
    save1_i32("z2.npy", z2, 2);
    /* corrupt files: bad magic, truncated data, garbage header */
    write_raw("magic.npy", "\x93NUMPX\x01\x00\x10\x00{}              \n", 26);
    {
        char p[512];
        path_of("x.npy", p, sizeof p);
        FILE *f = fopen(p, "rb");
        assert_non_null(f);
        uint8_t buf[512];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        write_raw("trunc.npy", buf, n - 10);
        buf[20] = '#';
        write_raw("badhdr.npy", buf, n);
    }
    write_raw("empty.npy", "", 0);
    const char *C = "op conv2d -x x.npy -w w.npy -o out.npy --mult 1518500250 --shift -8";
    const char *D = "op dense -x xd.npy -w wd.npy -o out.npy --mult 1518500250 --shift -8";
    assert_int_equal(cli("%s", C), 0); /* the valid commands work */
    rm("out.npy");
    assert_int_equal(cli("%s", D), 0);
    rm("out.npy");

    for (int pass = 0; pass < 2; pass++) {
        /* pass 1: a previous out.npy must survive every failure untouched */
        if (pass)
            write_raw("out.npy", "previous contents", 17);
        /* files */
        expect_fail(1, "missing.npy: cannot open", "op conv2d -x missing.npy -w w.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "--weight", "op conv2d -x x.npy -w nowhere.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "magic.npy", "op conv2d -x magic.npy -w w.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "trunc.npy", "op conv2d -x trunc.npy -w w.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "badhdr.npy", "op conv2d -x badhdr.npy -w w.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "empty.npy", "op dense -x empty.npy -w wd.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "dtype float32, expected int8 or uint8",
                    "op conv2d -x xf.npy -w w.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "--bias b3i8.npy: dtype int8, expected int32", "%s --bias b3i8.npy", C);
        expect_fail(1, "--w-zp sc2.npy: dtype float32", "%s --w-zp sc2.npy", D);
        expect_fail(1, "--w-scale z2.npy: dtype int32, expected float32",
                    "op dense -x xd.npy -w wd.npy -o out.npy --x-scale 1 --w-scale z2.npy --y-scale 1");
        /* shapes */
        expect_fail(1, "w5.npy have shape [3,5,1,1], expected [C_out, 4, KH, KW]",
                    "op conv2d -x x.npy -w w5.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "must be 4-D [C_out", "op conv2d -x x.npy -w wd.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "x0.npy: shape [0,8] has an empty or too large dimension",
                    "op dense -x x0.npy -w wd.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "must be [N, K] or [N, C, H, W], got []",
                    "op dense -x xs.npy -w wd.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "must be 4-D", "op conv2d -x xd.npy -w w.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "expected [M, 8]", "op dense -x xd.npy -w w.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "expected [M, 100]", "op dense -x x.npy -w wd.npy -o out.npy --mult 1 --shift 0");
        expect_fail(1, "bias b4.npy has shape [4], expected [3]", "%s --bias b4.npy", C);
        expect_fail(1, "bias b4.npy has shape [4], expected [3]", "%s --bias b4.npy", D);
        expect_fail(1, "shape [2], expected 1 or 3 values", "%s --w-zp z2.npy", D);
        expect_fail(1, "shape [2], expected 1 or 3 values",
                    "op conv2d -x x.npy -w w.npy -o out.npy --x-scale 1 --w-scale sc2.npy --y-scale 1");
        expect_fail(1, "kernel 3x3 larger than the padded input",
                    "op conv2d -x x1.npy -w w.npy -o out.npy --mult 1 --shift 0");
        /* flags and values */
        expect_fail(2, "unknown flag --frobnicate", "%s --frobnicate", C);
        expect_fail(2, "--stride does not apply", "%s --stride 2", D);
        expect_fail(2, "flag --pad needs a value", "%s --pad", C);
        expect_fail(2, "unknown operator \"conv3d\"", "op conv3d -x x.npy");
        expect_fail(2, "missing --output", "op conv2d -x x.npy -w w.npy --mult 1 --shift 0");
        expect_fail(2, "missing --weight", "op dense -x xd.npy -o out.npy --mult 1 --shift 0");
        expect_fail(2, "unexpected argument \"stray\"", "%s stray", C);
        expect_fail(2, "--dram-latency 0", "%s --dram-latency 0", C);
        expect_fail(2, "--seed", "%s --seed -3", C);
        expect_fail(1, "--x-zp 300", "%s --x-zp 300", C);
        expect_fail(1, "--y-zp -1", "%s --y-dtype uint8 --y-zp -1", C);
        expect_fail(1, "--y-dtype int16", "%s --y-dtype int16", C);
        expect_fail(1, "shift [0] = 40 outside [-31, 30]",
                    "op conv2d -x x.npy -w w.npy -o out.npy --mult 1 --shift 40");
        expect_fail(1, "multiplier [0] = -5 is negative",
                    "op dense -x xd.npy -w wd.npy -o out.npy --mult -5 --shift 0");
        expect_fail(1, "--mult: \"big\" is neither an integer",
                    "op dense -x xd.npy -w wd.npy -o out.npy --mult big --shift 0");
        expect_fail(1, "--pad 1,2,3", "%s --pad 1,2,3", C);
        expect_fail(1, "--pad -1", "%s --pad -1", C);
        expect_fail(1, "padding 16 is more than 15", "%s --pad 16", C);
        expect_fail(1, "--stride 0", "%s --stride 0", C);
        expect_fail(1, "--stride 1,2,3", "%s --stride 1,2,3", C);
        expect_fail(1, "--groups 2", "%s --groups 2", C);
        expect_fail(1, "--groups x", "%s --groups x", C);
        expect_fail(1, "(depthwise)", "%s --groups 4", C);
        expect_fail(1, "no requantization given", "op conv2d -x x.npy -w w.npy -o out.npy");
        expect_fail(1, "missing --shift", "op conv2d -x x.npy -w w.npy -o out.npy --mult 5");
        expect_fail(1, "not both", "%s --y-scale 0.5", C);
        expect_fail(1, "missing --w-scale", "op dense -x xd.npy -w wd.npy -o out.npy --x-scale 0.5 --y-scale 1");
        expect_fail(1, "output scale -1 is not a finite value > 0",
                    "op dense -x xd.npy -w wd.npy -o out.npy --x-scale 0.5 --w-scale 0.1 --y-scale -1");
        expect_fail(1, "needs a left shift of",
                    "op dense -x xd.npy -w wd.npy -o out.npy --x-scale 1e6 --w-scale 1e6 --y-scale 1e-3");
        expect_fail(1, "--relu6 needs", "%s --relu6", C);
        expect_fail(1, "only one of", "%s --relu --act-min 3", C);
        expect_fail(1, "--act-min 9 is above --act-max 2", "%s --act-min 9 --act-max 2", C);
        expect_fail(1, "--act-max 200", "%s --act-max 200", C);
        expect_fail(1, "weight zero point [0] = 300", "%s --w-zp 300", D);
        expect_fail(1, "--config nosuch", "%s --config nosuch", C);
        expect_fail(1, "nosuch", "%s --backend nosuch", C);
        /* depthwise with w - w_zp beyond int8 (uint8 weights, zero point 0)
         * runs (split weights; exactness: test_conv2d) */
        rm("out.npy");
        assert_int_equal(cli("op conv2d -x x.npy -w wudw.npy -o out.npy --groups 4 --mult 1 --shift 0"), 0);
        assert_true(exists("out.npy"));
        rm("out.npy");
        /* output into a missing directory */
        expect_fail(1, "nodir/y.npy", "op dense -x xd.npy -w wd.npy -o nodir/y.npy --mult 1 --shift 0");
    }
    rm("out.npy");
}

/* ------------------------------------------------- add, relu, clip */

/* A random shape of rank 1..4 with at most `max` elements. */
static int random_shape(uint64_t *s, int64_t *shape, int max)
{
    int nd = rnd(s, 1, 4);
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        shape[i] = rnd(s, 1, i == nd - 1 ? 40 : 5);
        if (n * shape[i] > max)
            shape[i] = 1;
        n *= shape[i];
    }
    return nd;
}

static int64_t numel(int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    return n;
}

static void add_case(uint64_t seed)
{
    uint64_t s = seed;
    char flags[2048] = "";
    int64_t shape[4];
    int nd = random_shape(&s, shape, 3000);
    int count = (int)numel(nd, shape);
    tsr_dtype_e adt = rnd(&s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8, bdt = rnd(&s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    tsr_dtype_e ydt = adt;
    if (rnd(&s, 0, 1)) {
        ydt = rnd(&s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
        add_flag(flags, sizeof flags, " --y-dtype %s", ydt == TSR_DT_UINT8 ? "uint8" : "int8");
    }
    int32_t azp = rnd(&s, dmin(adt), dmax(adt)), bzp = rnd(&s, dmin(bdt), dmax(bdt));
    int32_t yzp = rnd(&s, dmin(ydt), dmax(ydt));
    add_flag(flags, sizeof flags, " --a-zp %d --b-zp %d --y-zp %d", azp, bzp, yzp);
    uint8_t *av = malloc((size_t)count), *bv = malloc((size_t)count), *yr = malloc((size_t)count);
    assert_true(av && bv && yr);
    for (int i = 0; i < count; i++) {
        av[i] = (uint8_t)rnd(&s, dmin(adt), dmax(adt));
        bv[i] = (uint8_t)rnd(&s, dmin(bdt), dmax(bdt));
    }
    save("a.npy", adt, nd, shape, av);
    save("b.npy", bdt, nd, shape, bv);
    opref_add_params_t ap;
    double sa, sb, sy;
    do {
        sa = (double)(float)ldexp(0.5 + 0.5 * rnd01(&s), rnd(&s, -8, -3));
        sb = rnd(&s, 0, 3) ? (double)(float)ldexp(0.5 + 0.5 * rnd01(&s), rnd(&s, -8, -3)) : sa;
        sy = (double)(float)(fmax(sa, sb) * (1.0 + 1.5 * rnd01(&s)));
    } while (opref_add_params_from_scales(sa, sb, sy, odt(ydt), &ap));
    int raw = rnd(&s, 0, 2) == 0;
    if (raw)
        add_flag(flags, sizeof flags, " --add-params %d,%d,%d,%d,%d,%d,%d", ap.left_shift, ap.mult_a, ap.shift_a,
                 ap.mult_b, ap.shift_b, ap.mult_out, ap.shift_out);
    else
        add_flag(flags, sizeof flags, " --a-scale %.17g --b-scale %.17g --y-scale %.17g", sa, sb, sy);
    int clamp = rnd(&s, 0, 3);
    if (clamp == 1) {
        add_flag(flags, sizeof flags, " --relu");
        ap.act_min = yzp;
    } else if (clamp == 2) {
        ap.act_min = rnd(&s, dmin(ydt), yzp);
        ap.act_max = rnd(&s, ap.act_min, dmax(ydt));
        add_flag(flags, sizeof flags, " --act-min %d --act-max %d", ap.act_min, ap.act_max);
    } else if (clamp == 3 && !raw) {
        add_flag(flags, sizeof flags, " --relu6");
        assert_int_equal(opref_quantize_bound(0, sy, yzp, odt(ydt), &ap.act_min), TSR_OK);
        assert_int_equal(opref_quantize_bound(6, sy, yzp, odt(ydt), &ap.act_max), TSR_OK);
    }
    opref_tensor_t oa = {odt(adt), 1, 1, 1, count, av, azp}, ob = {odt(bdt), 1, 1, 1, count, bv, bzp};
    opref_tensor_t oy = {odt(ydt), 1, 1, 1, count, yr, yzp};
    if (opref_add(&oa, &ob, &ap, &oy))
        fail_msg("seed %llu: reference add: %s", (unsigned long long)seed, tsr_errmsg());
    rm("y.npy");
    int st = cli("op add -a a.npy -b b.npy -o y.npy --backend %s --seed %llu%s", backend(),
                 (unsigned long long)(seed | 1), flags);
    char desc[128];
    snprintf(desc, sizeof desc, "add seed %llu (TSR_CLI_SEED base %llu)", (unsigned long long)seed,
             (unsigned long long)base_seed());
    if (st)
        fail_msg("%s\n  %s: exit %d: %s", desc, g_cmd, st, g_stderr);
    compare_output("y.npy", ydt, nd, shape, yr, desc);
    free(av);
    free(bv);
    free(yr);
}

static void clip_case(uint64_t seed)
{
    uint64_t s = seed;
    char flags[512] = "";
    int64_t shape[4];
    int nd = random_shape(&s, shape, 3000);
    int count = (int)numel(nd, shape);
    tsr_dtype_e dt = rnd(&s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    int32_t zp = rnd(&s, dmin(dt), dmax(dt));
    add_flag(flags, sizeof flags, " --x-zp %d", zp);
    uint8_t *xv = malloc((size_t)count), *yr = malloc((size_t)count);
    assert_true(xv && yr);
    for (int i = 0; i < count; i++)
        xv[i] = (uint8_t)rnd(&s, dmin(dt), dmax(dt));
    save("x.npy", dt, nd, shape, xv);
    opref_tensor_t ox = {odt(dt), 1, 1, 1, count, xv, zp}, oy = {odt(dt), 1, 1, 1, count, yr, zp};
    int kind = rnd(&s, 0, 2); /* relu, clip ints, clip relu6 */
    const char *op = kind ? "clip" : "relu";
    if (kind == 0) {
        assert_int_equal(opref_relu(&ox, &oy), TSR_OK);
    } else {
        int32_t lo = rnd(&s, dmin(dt), dmax(dt)), hi = rnd(&s, lo, dmax(dt));
        if (kind == 1) {
            add_flag(flags, sizeof flags, " --act-min %d --act-max %d", lo, hi);
        } else {
            double sc = ldexp(0.5 + 0.5 * rnd01(&s), rnd(&s, -7, -2));
            add_flag(flags, sizeof flags, " --relu6 --x-scale %.17g", sc);
            assert_int_equal(opref_quantize_bound(0, sc, zp, odt(dt), &lo), TSR_OK);
            assert_int_equal(opref_quantize_bound(6, sc, zp, odt(dt), &hi), TSR_OK);
        }
        assert_int_equal(opref_clip(&ox, lo, hi, &oy), TSR_OK);
    }
    rm("y.npy");
    int st = cli("op %s -x x.npy -o y.npy --backend %s --seed %llu%s", op, backend(), (unsigned long long)(seed | 1),
                 flags);
    char desc[128];
    snprintf(desc, sizeof desc, "%s seed %llu (TSR_CLI_SEED base %llu)", op, (unsigned long long)seed,
             (unsigned long long)base_seed());
    if (st)
        fail_msg("%s\n  %s: exit %d: %s", desc, g_cmd, st, g_stderr);
    compare_output("y.npy", dt, nd, shape, yr, desc);
    free(xv);
    free(yr);
}

static void test_eltwise_random(void **state)
{
    (void)state;
    int count = is_fsim() ? 40 : 3;
    for (int i = 0; i < count; i++) {
        add_case(base_seed() * 41 + (uint64_t)i);
        clip_case(base_seed() * 43 + (uint64_t)i);
    }
    printf("  %d add and %d relu/clip cases through the CLI on %s\n", count, count, backend());
    /* errors */
    int8_t v[12] = {0};
    int64_t s1[2] = {3, 4}, s2[2] = {4, 3};
    save("a.npy", TSR_DT_INT8, 2, s1, v);
    save("b.npy", TSR_DT_INT8, 2, s2, v);
    save("c.npy", TSR_DT_INT8, 2, s1, v);
    rm("out.npy");
    expect_fail(1, "differ in shape", "op add -a a.npy -b b.npy -o out.npy --a-scale 1 --b-scale 1 --y-scale 1");
    expect_fail(1, "no requantization given", "op add -a a.npy -b c.npy -o out.npy");
    expect_fail(1, "not both", "op add -a a.npy -b c.npy -o out.npy --a-scale 1 --add-params 20,1,0,1,0,1,0");
    expect_fail(1, "--add-params 1,2", "op add -a a.npy -b c.npy -o out.npy --add-params 1,2");
    expect_fail(1, "left", "op add -a a.npy -b c.npy -o out.npy --add-params 30,1,0,1,0,1,0");
    expect_fail(1, "--b-scale", "op add -a a.npy -b c.npy -o out.npy --a-scale 1 --y-scale 1");
    expect_fail(1, "--a-zp 128", "op add -a a.npy -b c.npy -o out.npy --a-zp 128 --a-scale 1 --b-scale 1 --y-scale 1");
    expect_fail(2, "missing --input-b", "op add -a a.npy -o out.npy --a-scale 1 --b-scale 1 --y-scale 1");
    expect_fail(2, "--x-zp does not apply", "op add -a a.npy -b c.npy -o out.npy --x-zp 1");
    expect_fail(2, "--act-min does not apply", "op relu -x a.npy -o out.npy --act-min 1");
    expect_fail(1, "--act-min 5 is above --act-max 2", "op clip -x a.npy -o out.npy --act-min 5 --act-max 2");
    expect_fail(1, "--relu6 needs", "op clip -x a.npy -o out.npy --relu6");
}

/* ---------------------------------------------------------------- pools */

static void pool_case(uint64_t seed, int kind) /* 0 max, 1 avg, 2 global */
{
    static const char *names[3] = {"maxpool", "avgpool", "globalavgpool"};
    uint64_t s = seed;
    char flags[512] = "";
    int n = rnd(&s, 1, 2), c = rnd(&s, 1, 20), h = rnd(&s, 1, 9), w = rnd(&s, 1, 9);
    opref_pool_params_t pp = {1, 1, 1, 1, 0, 0, 0, 0, 0};
    if (kind < 2) {
        pp.kh = rnd(&s, 1, 3);
        pp.kw = rnd(&s, 0, 2) ? pp.kh : rnd(&s, 1, 3);
        if (pp.kh == pp.kw)
            add_flag(flags, sizeof flags, " --kernel %d", pp.kh);
        else
            add_flag(flags, sizeof flags, " --kernel %d,%d", pp.kh, pp.kw);
        pp.stride_h = pp.stride_w = rnd(&s, 1, 2);
        if (pp.stride_h > 1 || rnd(&s, 0, 1))
            add_flag(flags, sizeof flags, " --stride %d", pp.stride_h);
        if (rnd(&s, 0, 1)) {
            pp.pad_top = rnd(&s, 0, pp.kh - 1);
            pp.pad_left = rnd(&s, 0, pp.kw - 1);
            pp.pad_bottom = rnd(&s, 0, pp.kh - 1);
            pp.pad_right = rnd(&s, 0, pp.kw - 1);
            add_flag(flags, sizeof flags, " --pad %d,%d,%d,%d", pp.pad_top, pp.pad_left, pp.pad_bottom, pp.pad_right);
        }
        if (kind == 1 && rnd(&s, 0, 1)) {
            pp.count_include_pad = 1;
            add_flag(flags, sizeof flags, " --count-include-pad");
        }
        if (h + pp.pad_top + pp.pad_bottom < pp.kh)
            h = pp.kh;
        if (w + pp.pad_left + pp.pad_right < pp.kw)
            w = pp.kw;
    }
    tsr_dtype_e dt = rnd(&s, 0, 1) ? TSR_DT_UINT8 : TSR_DT_INT8;
    int32_t zp = rnd(&s, dmin(dt), dmax(dt));
    add_flag(flags, sizeof flags, " --x-zp %d", zp);
    size_t nx = (size_t)n * c * h * w;
    uint8_t *xv = malloc(nx);
    assert_non_null(xv);
    for (size_t i = 0; i < nx; i++)
        xv[i] = (uint8_t)rnd(&s, dmin(dt), dmax(dt));
    int64_t xs[4] = {n, c, h, w};
    save("x.npy", dt, 4, xs, xv);
    opref_tensor_t ox = {odt(dt), n, c, h, w, xv, zp};
    opref_shape_t os = {n, c, 1, 1};
    if (kind < 2 && opref_pool_out_shape(&ox, &pp, &os))
        fail_msg("seed %llu: reference shape: %s", (unsigned long long)seed, tsr_errmsg());
    size_t ny = (size_t)os.n * os.c * os.h * os.w;
    uint8_t *yr = malloc(ny);
    assert_non_null(yr);
    opref_tensor_t oy = {odt(dt), os.n, os.c, os.h, os.w, yr, zp};
    int rc = kind == 0 ? opref_maxpool(&ox, &pp, &oy) : kind == 1 ? opref_avgpool(&ox, &pp, &oy)
                                                                 : opref_global_avgpool(&ox, &oy);
    if (rc)
        fail_msg("seed %llu: reference: %s", (unsigned long long)seed, tsr_errmsg());
    rm("y.npy");
    int st = cli("op %s -x x.npy -o y.npy --backend %s --seed %llu%s", names[kind], backend(),
                 (unsigned long long)(seed | 1), flags);
    char desc[128];
    snprintf(desc, sizeof desc, "%s seed %llu (TSR_CLI_SEED base %llu)", names[kind], (unsigned long long)seed,
             (unsigned long long)base_seed());
    if (st)
        fail_msg("%s\n  %s: exit %d: %s", desc, g_cmd, st, g_stderr);
    int64_t ys[4] = {os.n, os.c, os.h, os.w};
    compare_output("y.npy", dt, 4, ys, yr, desc);
    free(xv);
    free(yr);
}

static void test_pool_random(void **state)
{
    (void)state;
    int count = is_fsim() ? 25 : 2;
    for (int i = 0; i < count; i++)
        for (int k = 0; k < 3; k++)
            pool_case(base_seed() * 47 + (uint64_t)(i * 3 + k), k);
    printf("  %d maxpool, avgpool and globalavgpool cases each through the CLI on %s\n", count, backend());
    int8_t v[32] = {0};
    int64_t s4[4] = {1, 2, 4, 4}, s2[2] = {4, 8};
    save("p.npy", TSR_DT_INT8, 4, s4, v);
    save("p2.npy", TSR_DT_INT8, 2, s2, v);
    rm("out.npy");
    expect_fail(1, "missing --kernel", "op maxpool -x p.npy -o out.npy");
    expect_fail(1, "--kernel 0", "op avgpool -x p.npy -o out.npy --kernel 0");
    expect_fail(1, "must be 4-D", "op maxpool -x p2.npy -o out.npy --kernel 2");
    expect_fail(1, "padding", "op maxpool -x p.npy -o out.npy --kernel 2 --pad 2");
    expect_fail(2, "--kernel does not apply", "op globalavgpool -x p.npy -o out.npy --kernel 2");
    expect_fail(2, "--count-include-pad does not apply",
                "op maxpool -x p.npy -o out.npy --kernel 2 --count-include-pad");
}

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tsr_cli_op_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    printf("test_cli_op: CLI %s, backend %s, base seed %llu (TSR_CLI_SEED)\n", TSR_CLI, backend(),
           (unsigned long long)base_seed());
    const char *filter = getenv("TSR_CLI_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),          cmocka_unit_test(test_quiet),        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_conv2d_random), cmocka_unit_test(test_dense_random),
        cmocka_unit_test(test_pool_random),
        cmocka_unit_test(test_eltwise_random),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
