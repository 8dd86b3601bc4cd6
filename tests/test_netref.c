/*
 * test_netref: the network description (jit/tsr_netdesc.c) and the
 * whole-network plain-C reference (tests/tsr_netref.c).
 *
 *  - Topology: ResNet-18 has 20 convolutions + 1 fc (21 weight layers),
 *    8 residual adds, 3 downsample convs, one maxpool and one global
 *    average pool; the tensor shapes of the ImageNet network (112, 56, 28,
 *    14, 7) and its MAC count 1,814,073,344 (computed by hand from the
 *    layer table, not by the code under test). Fails if the generator
 *    builds another network.
 *  - Direct node checks: every conv, fc, add, maxpool and avgpool node of
 *    the small network recomputed from the node's input with naive loops
 *    written here (independent of tsr_opref.c and of the JIT) and compared
 *    with the reference's output byte for byte. Fails if the reference maps
 *    a parameter wrongly (padding, stride, zero point, per-channel
 *    requantization, add multipliers) or runs the wrong input.
 *  - Calibration: every tensor of the small and the full network uses its
 *    range (the largest |q - zp| reaches a quarter of it, and no tensor is
 *    constant), at most SAT_LIMIT of the values sit at a saturating clamp
 *    bound (the top of the range, and the bottom for signed outputs; the
 *    relu bound at the real zero is not saturation), relu'd tensors are not
 *    dead (< 90% zeros), and the logits of two different inputs differ.
 *    Fails if the calibration over- or under-estimates the activations.
 *  - Bad descs are rejected with an error (validation, the reference).
 * The full ResNet-18 reference runs in one test only (test_resnet18_full:
 * two inputs, the first timed and printed, ~2.5 s each on one core at -O3).
 * TSR_NETREF_SEED overrides the seed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr_error.h"
#include "tsr_netdesc.h"
#include "tsr_netref.h"
#include "tsr_testenv.h"

/* Saturation limit: the calibration puts 4 standard deviations of the
 * modelled distribution below the top of the range, where a Gaussian has
 * 0.003% of its mass; the model is approximate (random-weight statistics,
 * maxpool and the residual sums; loose for the tiny tensors of the small
 * networks, a few hundred values over 4 channels), so allow 2%: measured
 * at most ~0.5% on the full network and ~1% on the small ones, while a
 * scale 3x too small clips about a third of the values. */
#define SAT_LIMIT 0.02
/* Smallest tensor whose fractions are checked (below, one channel's few
 * values are already several percent). */
#define STAT_MIN 1024

static uint64_t seed(void) { return tsr_test_seed("TSR_NETREF_SEED", 20261125u); }

static int32_t qv(tsr_dtype_e dt, const void *p, size_t i)
{
    const uint8_t *b = p;
    return dt == TSR_DT_UINT8 ? (int32_t)b[i] : (int32_t)(int8_t)b[i];
}

static int count_kind(const tsr_netdesc_t *nd, tsr_nd_kind_e k)
{
    int c = 0;
    for (int i = 0; i < nd->nnodes; i++)
        c += nd->nodes[i].kind == k;
    return c;
}

static const tsr_nd_node_t *find(const tsr_netdesc_t *nd, const char *name)
{
    for (int i = 0; i < nd->nnodes; i++)
        if (!strcmp(nd->nodes[i].name, name))
            return &nd->nodes[i];
    fail_msg("no node named %s", name);
    return NULL;
}

static void expect_shape(const tsr_netdesc_t *nd, int t, int n, int c, int h, int w)
{
    const tsr_nd_tensor_t *x = &nd->tensors[t];
    if (x->n != n || x->c != c || x->h != h || x->w != w)
        fail_msg("tensor %d is [%d,%d,%d,%d], expected [%d,%d,%d,%d]", t, x->n, x->c, x->h, x->w, n, c, h, w);
}

/* The ResNet-18 structure for base width W, input hw, classes: counts,
 * names, shortcut wiring, kernel parameters and the shapes. */
static void check_topology(const tsr_netdesc_t *nd, int n, int hw, int W, int classes)
{
    assert_int_equal(count_kind(nd, TSR_ND_CONV), 20);
    assert_int_equal(count_kind(nd, TSR_ND_DENSE), 1);
    assert_int_equal(count_kind(nd, TSR_ND_ADD), 8);
    assert_int_equal(count_kind(nd, TSR_ND_POOL), 2);
    assert_int_equal(count_kind(nd, TSR_ND_CLIP), 0);
    assert_int_equal(nd->nnodes, 31);
    assert_int_equal(nd->ntensors, 32);
    int ds = 0;
    for (int i = 0; i < nd->nnodes; i++)
        ds += strstr(nd->nodes[i].name, "downsample") != NULL;
    assert_int_equal(ds, 3);
    expect_shape(nd, 0, n, 3, hw, hw);
    const tsr_nd_node_t *c1 = find(nd, "conv1"), *mp = find(nd, "maxpool");
    assert_int_equal(c1->in[0], 0);
    assert_true(c1->conv.kh == 7 && c1->conv.kw == 7 && c1->conv.stride_h == 2 && c1->conv.stride_w == 2 &&
                c1->conv.pad_top == 3 && c1->conv.pad_left == 3 && c1->conv.pad_bottom == 3 && c1->conv.pad_right == 3);
    assert_true(c1->conv.act_min == c1->conv.y_zp); /* relu fused */
    int h = (hw + 6 - 7) / 2 + 1;
    expect_shape(nd, c1->out, n, W, h, h);
    assert_int_equal(mp->in[0], c1->out);
    assert_true(mp->pool.kind == TSR_POOL_MAX && mp->pool.kh == 3 && mp->pool.stride_h == 2 && mp->pool.pad_top == 1);
    h = (h + 2 - 3) / 2 + 1;
    expect_shape(nd, mp->out, n, W, h, h);
    int x = mp->out;
    for (int s = 0; s < 4; s++)
        for (int b = 0; b < 2; b++) {
            char nm[48];
            int st = s > 0 && b == 0 ? 2 : 1, c = W << s;
            snprintf(nm, sizeof nm, "layer%d.%d.conv1", s + 1, b);
            const tsr_nd_node_t *k1 = find(nd, nm);
            snprintf(nm, sizeof nm, "layer%d.%d.conv2", s + 1, b);
            const tsr_nd_node_t *k2 = find(nd, nm);
            snprintf(nm, sizeof nm, "layer%d.%d.add", s + 1, b);
            const tsr_nd_node_t *ad = find(nd, nm);
            assert_int_equal(k1->in[0], x);
            assert_true(k1->conv.kh == 3 && k1->conv.stride_h == st && k1->conv.pad_top == 1);
            assert_true(k1->conv.act_min == k1->conv.y_zp); /* relu inside the block */
            assert_int_equal(k2->in[0], k1->out);
            assert_true(k2->conv.kh == 3 && k2->conv.stride_h == 1 && k2->conv.pad_top == 1);
            assert_int_equal(ad->in[0], k2->out);
            if (st == 2) {
                snprintf(nm, sizeof nm, "layer%d.%d.downsample", s + 1, b);
                const tsr_nd_node_t *d = find(nd, nm);
                assert_int_equal(d->in[0], x);
                assert_true(d->conv.kh == 1 && d->conv.stride_h == 2 && d->conv.pad_top == 0);
                assert_int_equal(ad->in[1], d->out);
            } else {
                assert_int_equal(ad->in[1], x); /* identity shortcut */
            }
            assert_true(ad->add.act_min == ad->add.y.zp); /* relu fused as the add's clamp */
            h = (h + 2 - 3) / st + 1;
            expect_shape(nd, ad->out, n, c, h, h);
            x = ad->out;
        }
    const tsr_nd_node_t *ap = find(nd, "avgpool"), *fc = find(nd, "fc");
    assert_int_equal(ap->in[0], x);
    assert_int_equal(ap->pool.kind, TSR_POOL_GLOBAL_AVG);
    expect_shape(nd, ap->out, n, 8 * W, 1, 1);
    assert_int_equal(fc->in[0], ap->out);
    assert_int_equal(fc->dense.k, 8 * W);
    assert_int_equal(fc->out, nd->output);
    expect_shape(nd, nd->output, n, classes, 1, 1);
    for (int i = 0; i < nd->nnodes; i++) /* per-output-channel requantization everywhere */
        if (nd->nodes[i].kind == TSR_ND_CONV)
            assert_int_equal(nd->nodes[i].conv.rq_count, nd->nodes[i].conv.c_out);
    assert_int_equal(fc->dense.rq_count, classes);
}

static uint64_t total_macs(const tsr_netdesc_t *nd)
{
    uint64_t m = 0;
    for (int i = 0; i < nd->nnodes; i++) {
        const tsr_nd_node_t *nn = &nd->nodes[i];
        const tsr_nd_tensor_t *y = &nd->tensors[nn->out];
        if (nn->kind == TSR_ND_CONV)
            m += (uint64_t)y->n * y->c * y->h * y->w * (uint64_t)nn->conv.c_in * nn->conv.kh * nn->conv.kw;
        else if (nn->kind == TSR_ND_DENSE)
            m += (uint64_t)nn->dense.n * nn->dense.m * nn->dense.k;
    }
    return m;
}

/* --------------------------------------------- naive node recomputation */

/* TFLite MultiplyByQuantizedMultiplier written out: wrapping left shift,
 * round((x * M) / 2^31) with ties up, then x / 2^e rounded half away. */
static int64_t naive_mbqm(int64_t x, int32_t mult, int shift)
{
    if (shift > 0)
        x = (int64_t)(int32_t)(uint32_t)((uint64_t)x << shift);
    int64_t p = x * (int64_t)mult, hi;
    if (x == INT32_MIN && mult == INT32_MIN)
        hi = INT32_MAX;
    else { /* floor((p + 2^30) / 2^31) */
        int64_t q = p + ((int64_t)1 << 30);
        hi = q >= 0 ? q / ((int64_t)1 << 31) : -((-q + ((int64_t)1 << 31) - 1) / ((int64_t)1 << 31));
    }
    if (shift >= 0)
        return hi;
    int64_t d = (int64_t)1 << -shift, a = hi < 0 ? -hi : hi, r = (a + d / 2) / d;
    return hi < 0 ? -r : r;
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* First element where a node's reference output differs from the naive
 * recomputation (fails the test naming it). */
static void naive_node(const tsr_netdesc_t *nd, const tsr_nd_node_t *nn, void **outs)
{
    const tsr_nd_tensor_t *X = &nd->tensors[nn->in[0]], *Y = &nd->tensors[nn->out];
    const void *x = outs[nn->in[0]], *y = outs[nn->out];
    size_t ny = (size_t)tsr_netdesc_tensor_bytes(nd, nn->out);
    for (size_t i = 0; i < ny; i++) {
        int ox = (int)(i % (size_t)Y->w), oy = (int)(i / (size_t)Y->w % (size_t)Y->h);
        int c = (int)(i / ((size_t)Y->w * Y->h) % (size_t)Y->c), n = (int)(i / ((size_t)Y->w * Y->h * Y->c));
        int64_t v = 0;
        if (nn->kind == TSR_ND_CONV) {
            const tsr_conv2d_params_t *p = &nn->conv;
            int64_t acc = nn->bias ? nn->bias[c] : 0;
            for (int ci = 0; ci < p->c_in; ci++)
                for (int ky = 0; ky < p->kh; ky++)
                    for (int kx = 0; kx < p->kw; kx++) {
                        int iy = oy * p->stride_h - p->pad_top + ky, ix = ox * p->stride_w - p->pad_left + kx;
                        if (iy < 0 || iy >= X->h || ix < 0 || ix >= X->w)
                            continue; /* padding: x = x_zp contributes 0 */
                        int64_t xv = qv(X->dtype, x, (((size_t)n * X->c + ci) * X->h + iy) * X->w + ix) - p->x_zp;
                        int64_t wv = qv(p->w_dtype, nn->w, (((size_t)c * p->c_in + ci) * p->kh + ky) * p->kw + kx) -
                                     p->w_zp[p->w_zp_count == 1 ? 0 : c];
                        acc += xv * wv;
                    }
            int r = p->rq_count == 1 ? 0 : c;
            v = clampi(naive_mbqm((int32_t)acc, p->mult[r], p->shift[r]) + p->y_zp, p->act_min, p->act_max);
        } else if (nn->kind == TSR_ND_DENSE) {
            const tsr_dense_params_t *p = &nn->dense;
            int64_t acc = nn->bias ? nn->bias[c] : 0;
            for (int k = 0; k < p->k; k++)
                acc += (int64_t)(qv(X->dtype, x, (size_t)n * p->k + k) - p->x_zp) *
                       (qv(p->w_dtype, nn->w, (size_t)c * p->k + k) - p->w_zp[p->w_zp_count == 1 ? 0 : c]);
            int r = p->rq_count == 1 ? 0 : c;
            v = clampi(naive_mbqm((int32_t)acc, p->mult[r], p->shift[r]) + p->y_zp, p->act_min, p->act_max);
        } else if (nn->kind == TSR_ND_ADD) {
            const tsr_add_params_t *p = &nn->add;
            const tsr_nd_tensor_t *B = &nd->tensors[nn->in[1]];
            int64_t a = qv(X->dtype, x, i) - p->a.zp, b = qv(B->dtype, outs[nn->in[1]], i) - p->b.zp;
            int64_t raw = naive_mbqm(a * (1 << p->left_shift), p->mult_a, p->shift_a) +
                          naive_mbqm(b * (1 << p->left_shift), p->mult_b, p->shift_b);
            v = clampi(naive_mbqm(raw, p->mult_out, p->shift_out) + p->y.zp, p->act_min, p->act_max);
        } else if (nn->kind == TSR_ND_POOL && nn->pool.kind == TSR_POOL_MAX) {
            const tsr_pool_params_t *p = &nn->pool;
            v = INT64_MIN;
            for (int ky = 0; ky < p->kh; ky++)
                for (int kx = 0; kx < p->kw; kx++) {
                    int iy = oy * p->stride_h - p->pad_top + ky, ix = ox * p->stride_w - p->pad_left + kx;
                    if (iy >= 0 && iy < X->h && ix >= 0 && ix < X->w) {
                        int64_t e = qv(X->dtype, x, (((size_t)n * X->c + c) * X->h + iy) * X->w + ix);
                        v = e > v ? e : v;
                    }
                }
        } else if (nn->kind == TSR_ND_POOL && nn->pool.kind == TSR_POOL_GLOBAL_AVG) {
            int64_t sum = 0, cnt = (int64_t)X->h * X->w;
            for (int64_t j = 0; j < cnt; j++)
                sum += qv(X->dtype, x, ((size_t)n * X->c + c) * (size_t)cnt + (size_t)j);
            v = sum > 0 ? (sum + cnt / 2) / cnt : (sum - cnt / 2) / cnt;
        } else {
            fail_msg("node %s: no naive recomputation for its kind", nn->name);
        }
        if (qv(Y->dtype, y, i) != v)
            fail_msg("seed %llu node %s: reference output [%d][%d][%d][%d] (flat %zu of %zu) is %d, the naive loop "
                     "gives %lld", (unsigned long long)seed(), nn->name, n, c, oy, ox, i, ny, qv(Y->dtype, y, i),
                     (long long)v);
    }
}

/* ----------------------------------------------------------- calibration */

static tsr_nd_kind_e producer_kind(const tsr_netdesc_t *nd, int t)
{
    for (int i = 0; i < nd->nnodes; i++)
        if (nd->nodes[i].out == t)
            return nd->nodes[i].kind;
    return (tsr_nd_kind_e)0;
}

/* Calibration of every tensor (see the top comment); prints a summary. */
static void check_calibration(const tsr_netdesc_t *nd, void **outs)
{
    double worst = 0;
    int worst_t = 0;
    for (int t = 1; t < nd->ntensors; t++) {
        const tsr_nd_tensor_t *x = &nd->tensors[t];
        int32_t lo = x->dtype == TSR_DT_UINT8 ? 0 : -128, hi = x->dtype == TSR_DT_UINT8 ? 255 : 127;
        size_t n = (size_t)tsr_netdesc_tensor_bytes(nd, t), sat = 0, zeros = 0;
        int32_t mn = INT32_MAX, mx = INT32_MIN, span = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t v = qv(x->dtype, outs[t], i);
            sat += v == hi || (v == lo && lo != x->zp);
            zeros += v == x->zp;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
            int32_t d = v - x->zp < 0 ? x->zp - v : v - x->zp;
            span = d > span ? d : span;
        }
        const char *name = "?";
        for (int i = 0; i < nd->nnodes; i++)
            if (nd->nodes[i].out == t)
                name = nd->nodes[i].name;
        double f = (double)sat / (double)n;
        if (f > worst && n >= STAT_MIN) {
            worst = f;
            worst_t = t;
        }
        int range = (x->zp == lo ? hi - lo : hi - x->zp); /* largest |q - zp| on the positive side */
        /* pools keep their input's scale (they do not choose one): no range-use check */
        int want = producer_kind(nd, t) == TSR_ND_POOL ? 1 : range / 4;
        /* fractions of fewer than STAT_MIN values (the last stages of the
         * small networks: a few channels of a few pixels) say little: only
         * "not constant" there */
        int stats = n >= STAT_MIN;
        if (mn == mx ||
            (stats && (f > SAT_LIMIT || span < want || (lo == x->zp && (double)zeros / (double)n > 0.9))))
            fail_msg("seed %llu tensor %d (%s): %.2f%% of %zu values at a saturating bound (limit %.0f%%), values in "
                     "[%d, %d], largest |q - zp| %d (want >= %d), %.1f%% at the zero point",
                     (unsigned long long)seed(), t, name, 100 * f, n, 100 * SAT_LIMIT, mn, mx, span, want,
                     100.0 * (double)zeros / (double)n);
    }
    printf("calibration: %d tensors; most saturated (of >= %d values): tensor %d, %.3f%% at a bound\n",
           nd->ntensors - 1, STAT_MIN, worst_t, 100 * worst);
}

/* Run the reference on two inputs, check calibration of the first run and
 * that the logits differ. Returns the seconds of one run. */
static double run_two(const tsr_netdesc_t *nd, void (*per_run)(const tsr_netdesc_t *, void **))
{
    size_t nin = (size_t)tsr_netdesc_tensor_bytes(nd, 0), nout = (size_t)tsr_netdesc_tensor_bytes(nd, nd->output);
    uint8_t *in = malloc(nin), *logits = malloc(nout);
    assert_non_null(in);
    assert_non_null(logits);
    void **outs = calloc((size_t)nd->ntensors, sizeof *outs);
    assert_non_null(outs);
    double secs = 0;
    for (int r = 0; r < 2; r++) {
        tsr_netdesc_random_input(nd, seed() + 1000u * (uint64_t)r, in);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = tsr_netref_run(nd, in, outs);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (rc)
            fail_msg("netref: %s", tsr_errmsg());
        if (r == 0) {
            secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
            assert_memory_equal(outs[0], in, nin);
            check_calibration(nd, outs);
            if (per_run)
                per_run(nd, outs);
            memcpy(logits, outs[nd->output], nout);
        } else {
            size_t diff = 0;
            for (size_t i = 0; i < nout; i++)
                diff += logits[i] != ((uint8_t *)outs[nd->output])[i];
            printf("logits: %zu of %zu differ between two inputs\n", diff, nout);
            if (diff < nout / 4)
                fail_msg("seed %llu: only %zu of %zu logits differ between two random inputs", (unsigned long long)seed(),
                         diff, nout);
        }
        tsr_netref_free(nd, outs);
    }
    free(outs);
    free(in);
    free(logits);
    return secs;
}

static void naive_all(const tsr_netdesc_t *nd, void **outs)
{
    int checked = 0;
    for (int i = 0; i < nd->nnodes; i++) {
        naive_node(nd, &nd->nodes[i], outs);
        checked++;
    }
    assert_int_equal(checked, 31);
}

/* ----------------------------------------------------------------- tests */

static void test_small_net(void **state)
{
    (void)state;
    tsr_netdesc_t nd;
    if (tsr_netdesc_resnet18_small(seed(), 2, 32, 16, 10, &nd))
        fail_msg("resnet18_small: %s", tsr_errmsg());
    check_topology(&nd, 2, 32, 16, 10);
    assert_int_equal(tsr_netdesc_validate(&nd), 0);
    double s = run_two(&nd, naive_all);
    printf("small ResNet-18 (batch 2, 32x32, width 16, 10 classes, %.1f MMACs): reference %.3f s\n",
           (double)total_macs(&nd) / 1e6, s);
    tsr_netdesc_free(&nd);
}

static void test_small_shapes(void **state)
{
    (void)state;
    /* other small shapes: odd input size, width 8, batch 1; and the same seed gives the same weights */
    const int shapes[][4] = {{1, 40, 8, 7}, {3, 17, 4, 5}, {1, 64, 16, 100}};
    for (int k = 0; k < 3; k++) {
        tsr_netdesc_t a, b;
        const int *sh = shapes[k];
        if (tsr_netdesc_resnet18_small(seed() + (uint64_t)k, sh[0], sh[1], sh[2], sh[3], &a) ||
            tsr_netdesc_resnet18_small(seed() + (uint64_t)k, sh[0], sh[1], sh[2], sh[3], &b))
            fail_msg("resnet18_small %d/%d/%d/%d: %s", sh[0], sh[1], sh[2], sh[3], tsr_errmsg());
        check_topology(&a, sh[0], sh[1], sh[2], sh[3]);
        for (int i = 0; i < a.nnodes; i++)
            if (a.nodes[i].w) {
                size_t nw = a.nodes[i].kind == TSR_ND_CONV ? (size_t)a.nodes[i].conv.c_out * a.nodes[i].conv.c_in *
                                                                 a.nodes[i].conv.kh * a.nodes[i].conv.kw
                                                           : (size_t)a.nodes[i].dense.m * a.nodes[i].dense.k;
                assert_memory_equal(a.nodes[i].w, b.nodes[i].w, nw);
            }
        run_two(&a, NULL);
        tsr_netdesc_free(&a);
        tsr_netdesc_free(&b);
    }
}

static void test_resnet18_full(void **state)
{
    (void)state;
    tsr_netdesc_t nd;
    if (tsr_netdesc_resnet18(seed(), 1, &nd))
        fail_msg("resnet18: %s", tsr_errmsg());
    check_topology(&nd, 1, 224, 64, 1000);
    assert_true(total_macs(&nd) == 1814073344ull);
    assert_string_equal(nd.name, "resnet18");
    double s = run_two(&nd, NULL);
    printf("ResNet-18 (batch 1, 224x224, 1.814 GMACs): plain-C reference %.2f s on one core\n", s);
    tsr_netdesc_free(&nd);
}

static void test_bad(void **state)
{
    (void)state;
    tsr_netdesc_t nd;
    assert_int_equal(tsr_netdesc_resnet18_small(1, 0, 32, 16, 10, &nd), TSR_EINVAL);
    assert_int_equal(tsr_netdesc_resnet18_small(1, 1, 32, 0, 10, &nd), TSR_EINVAL);
    assert_int_equal(tsr_netdesc_resnet18_small(1, 1, 0, 16, 10, &nd), TSR_EINVAL);
    assert_int_equal(tsr_netdesc_resnet18(1, 0, &nd), TSR_EINVAL);
    assert_int_equal(tsr_netdesc_validate(NULL), TSR_EINVAL);
    if (tsr_netdesc_resnet18_small(seed(), 1, 16, 4, 3, &nd))
        fail_msg("resnet18_small: %s", tsr_errmsg());
    size_t nin = (size_t)tsr_netdesc_tensor_bytes(&nd, 0);
    uint8_t *in = calloc(nin, 1);
    void **outs = calloc((size_t)nd.ntensors, sizeof *outs);
    assert_non_null(in);
    assert_non_null(outs);
    /* each corruption must be caught by validate and by the reference */
    tsr_nd_node_t *n5 = &nd.nodes[5];
    int saved = n5->in[0];
    n5->in[0] = nd.nodes[7].out; /* reads a tensor computed later */
    assert_int_equal(tsr_netdesc_validate(&nd), TSR_EINVAL);
    printf("rejected: %s\n", tsr_errmsg());
    assert_int_equal(tsr_netref_run(&nd, in, outs), TSR_EINVAL);
    for (int t = 0; t < nd.ntensors; t++)
        assert_null(outs[t]);
    n5->in[0] = saved;
    tsr_nd_node_t *c1 = &nd.nodes[0];
    c1->conv.x_zp = 0; /* disagrees with the input tensor's zero point 128 */
    assert_int_equal(tsr_netdesc_validate(&nd), TSR_EINVAL);
    printf("rejected: %s\n", tsr_errmsg());
    assert_int_equal(tsr_netref_run(&nd, in, outs), TSR_EINVAL);
    c1->conv.x_zp = 128;
    c1->conv.stride_h = 0; /* the JIT's own check */
    assert_int_equal(tsr_netdesc_validate(&nd), TSR_EINVAL);
    printf("rejected: %s\n", tsr_errmsg());
    c1->conv.stride_h = 2;
    assert_int_equal(tsr_netdesc_validate(&nd), 0);
    assert_int_equal(tsr_netref_run(&nd, in, outs), 0);
    tsr_netref_free(&nd, outs);
    free(outs);
    free(in);
    tsr_netdesc_free(&nd);
}

int main(void)
{
    printf("test_netref seed %llu (TSR_NETREF_SEED)\n", (unsigned long long)seed());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_net),
        cmocka_unit_test(test_small_shapes),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_resnet18_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
