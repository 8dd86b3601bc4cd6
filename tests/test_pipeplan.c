/*
 * test_pipeplan: the pipeline placement planner (jit/tsr_pipeplan.h)
 * against brute force written here from the model in the header (and
 * nothing in the planner):
 *  - 300 random small DAGs (2..7 nodes, 1..3 devices of 1..2 kinds with
 *    DRAM limits, 0..1 host stages, host-only nodes, random link): every
 *    placement enumerated; the DP's period and latency equal the best
 *    contiguous placement's (stages whose quotient graph is acyclic),
 *    lexicographically (period, then latency), and the DP's own placement
 *    re-evaluated here gives the same figures; an infeasible problem is
 *    refused. Seed printed (TSR_PP_SEED overrides it, TSR_PP_COUNT the count).
 *  - the ILP against the best of all placements (non-contiguous) on 120
 *    tiny graphs (skipped, with a message, when built without GLPK).
 *  - the shared planner (tsr_pp_solve_shared) against every interval plan
 *    with shared boundaries on 300 random DAGs (2..6 nodes in topological
 *    order, units 2..4, random part costs, 1..3 devices, DRAM limits),
 *    evaluated here from the header's model as sets; its clean-cut plans
 *    equal tsr_pp_evaluate's; a load worked out by hand; refusals.
 *  - hand-made cases: a chain, a diamond (both ends pay a transfer), a
 *    host-only node, a DRAM limit forcing a split, the baselines.
 *  - bad inputs refused with one line naming the node or device: a node
 *    nothing can run, a node no DRAM holds, K above 64, a cycle, too many
 *    ideals (the message names the heuristic).
 *  - `tessera plan --net resnet18 --devices 2`: the plan printed, the
 *    optimum no worse than the baselines; its refusals and usage errors.
 * How it can fail: a period or latency above (or below: a wrong cost
 * model) the brute force's, a refusal of a feasible problem, an accepted
 * bad input, a message that does not name the culprit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <math.h>

#include "tsr_error.h"
#include "tsr_pipeplan.h"
#include "tsr_testenv.h"

/* ---------------------------------------------------------- the random problems */

#define MAXN 8
#define MAXS 4

typedef struct {
    int n, nkinds, K, H;            /* nodes, kinds, devices, host stages */
    double cost[MAXN][2], host[MAXN];
    uint64_t mem[MAXN], in[MAXN], out[MAXN];
    int ne, ef[64], et[64];
    uint64_t eb[64];
    int kind[MAXS];
    uint64_t dram[MAXS];
    double bw, lat;
} prob_t;

static uint64_t rng_state;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
static int rint_(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }

static void random_problem(prob_t *p, int maxn, int maxslots)
{
    memset(p, 0, sizeof *p);
    p->n = rint_(2, maxn);
    p->nkinds = rint_(1, 2);
    p->H = rint_(0, 1);
    p->K = rint_(1, maxslots - p->H);
    for (int v = 0; v < p->n; v++) {
        for (int k = 0; k < p->nkinds; k++)
            p->cost[v][k] = rint_(1, 100);
        p->host[v] = rnd() % 2 ? rint_(20, 300) : INFINITY;
        if (rnd() % 8 == 0) { /* host-only */
            for (int k = 0; k < p->nkinds; k++)
                p->cost[v][k] = INFINITY;
            p->host[v] = rint_(1, 100);
        } else if (p->nkinds == 2 && rnd() % 6 == 0) {
            p->cost[v][rnd() % 2] = INFINITY; /* one kind cannot run it */
        }
        p->mem[v] = (uint64_t)rint_(0, 10);
        if (rnd() % 4 == 0)
            p->in[v] = (uint64_t)rint_(1, 64);
        if (rnd() % 4 == 0)
            p->out[v] = (uint64_t)rint_(1, 64);
    }
    for (int a = 0; a < p->n; a++) /* a random DAG, edges from lower to higher index, ids shuffled below */
        for (int b = a + 1; b < p->n; b++)
            if (rnd() % 100 < 45 && p->ne < 64) {
                p->ef[p->ne] = a, p->et[p->ne] = b;
                p->eb[p->ne++] = (uint64_t)rint_(0, 200);
            }
    if (rnd() % 4 == 0 && p->ne && p->ne < 64) { /* a duplicate edge */
        p->ef[p->ne] = p->ef[0], p->et[p->ne] = p->et[0];
        p->eb[p->ne++] = (uint64_t)rint_(0, 300);
    }
    /* relabel the nodes so that index order is not a topological order */
    int perm[MAXN];
    for (int i = 0; i < p->n; i++)
        perm[i] = i;
    for (int i = p->n - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint32_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    prob_t q = *p;
    for (int v = 0; v < p->n; v++) {
        int w = perm[v];
        for (int k = 0; k < 2; k++)
            q.cost[w][k] = p->cost[v][k];
        q.host[w] = p->host[v], q.mem[w] = p->mem[v], q.in[w] = p->in[v], q.out[w] = p->out[v];
    }
    for (int e = 0; e < p->ne; e++)
        q.ef[e] = perm[p->ef[e]], q.et[e] = perm[p->et[e]];
    *p = q;
    for (int d = 0; d < p->K; d++) {
        p->kind[d] = rint_(0, p->nkinds - 1);
        p->dram[d] = (uint64_t)rint_(8, 40);
    }
    static const double bws[] = {1, 2, 4, 8, 16};
    p->bw = bws[rnd() % 5];
    p->lat = rint_(0, 20);
    /* nothing can run a node: give the host its cost (the refusal has its own test) */
    for (int v = 0; v < p->n; v++) {
        int runs = 0;
        for (int d = 0; d < p->K; d++)
            runs |= isfinite(p->cost[v][p->kind[d]]);
        if (!runs && (!p->H || !isfinite(p->host[v]))) {
            p->H = 1;
            p->host[v] = rint_(1, 100);
            if (p->K + p->H > maxslots)
                p->K--, runs = 0;
        }
    }
    if (p->K < 1) /* keep one device */
        p->K = 1;
}

static tsr_pp_t *build(const prob_t *p)
{
    tsr_pp_t *pp;
    assert_int_equal(tsr_pp_create(p->nkinds, &pp), 0);
    for (int v = 0; v < p->n; v++) {
        char nm[16];
        snprintf(nm, sizeof nm, "n%d", v);
        int id;
        assert_int_equal(tsr_pp_node(pp, nm, p->cost[v], p->host[v], p->mem[v], &id), 0);
        assert_int_equal(id, v);
        assert_int_equal(tsr_pp_node_io(pp, v, p->in[v], p->out[v]), 0);
    }
    for (int e = 0; e < p->ne; e++)
        assert_int_equal(tsr_pp_edge(pp, p->ef[e], p->et[e], p->eb[e]), 0);
    for (int d = 0; d < p->K; d++)
        assert_int_equal(tsr_pp_device(pp, NULL, p->kind[d], p->dram[d], NULL), 0);
    assert_int_equal(tsr_pp_set_link(pp, p->bw, p->lat), 0);
    assert_int_equal(tsr_pp_set_host_stages(pp, p->H), 0);
    return pp;
}

/* ---------------------------------------------------------- the brute force (the model, from the header) */

static double xfer(const prob_t *p, uint64_t bytes) { return p->lat + (double)bytes / p->bw; }

/* Loads of placement slot[] (period, latency); INFINITY when infeasible.
 * *contig: the stages' quotient graph is acyclic. */
static void brute_eval(const prob_t *p, const int *slot, double *period, double *latency, int *contig)
{
    int ns = p->K + p->H;
    double load[MAXS] = {0};
    uint64_t mem[MAXS] = {0};
    int used[MAXS] = {0}, adj[MAXS][MAXS] = {{0}};
    double c[MAXN];
    for (int u = 0; u < p->n; u++) { /* c(u): the largest out-edge */
        uint64_t b = 0;
        int has = 0;
        for (int e = 0; e < p->ne; e++)
            if (p->ef[e] == u) {
                has = 1;
                if (p->eb[e] > b)
                    b = p->eb[e];
            }
        c[u] = has ? xfer(p, b) : 0;
    }
    int bad = 0;
    for (int v = 0; v < p->n; v++) {
        int s = slot[v];
        used[s] = 1;
        double cst = s < p->K ? p->cost[v][p->kind[s]] : p->host[v];
        if (!isfinite(cst))
            bad = 1;
        load[s] += cst;
        if (s < p->K) {
            mem[s] += p->mem[v];
            if (p->in[v])
                load[s] += xfer(p, p->in[v]);
            if (p->out[v])
                load[s] += xfer(p, p->out[v]);
        }
    }
    for (int s = 0; s < ns; s++) {
        if (s < p->K && mem[s] > p->dram[s])
            bad = 1;
        for (int u = 0; u < p->n; u++) {
            int send = 0, recv = 0;
            for (int e = 0; e < p->ne; e++) {
                if (p->ef[e] != u)
                    continue;
                int a = slot[u], b = slot[p->et[e]];
                if (a == s && b != s)
                    send = 1;
                if (a != s && b == s)
                    recv = 1;
                if (a != b)
                    adj[a][b] = 1;
            }
            load[s] += (send + recv) * c[u];
        }
    }
    /* acyclic quotient: repeatedly drop a stage nobody sends to */
    int gone[MAXS] = {0}, left = 0;
    for (int s = 0; s < ns; s++)
        left += used[s];
    for (int progress = 1; progress;) {
        progress = 0;
        for (int s = 0; s < ns; s++) {
            if (!used[s] || gone[s])
                continue;
            int in = 0;
            for (int a = 0; a < ns; a++)
                in |= used[a] && !gone[a] && adj[a][s];
            if (!in)
                gone[s] = 1, left--, progress = 1;
        }
    }
    *contig = left == 0;
    double per = 0, lat = 0;
    for (int s = 0; s < ns; s++)
        if (used[s])
            per = fmax(per, load[s]), lat += load[s];
    *period = bad ? INFINITY : per;
    *latency = bad ? INFINITY : lat;
}

/* Best (period, latency) over contiguous placements, and the best period over all. */
static void brute(const prob_t *p, double *cper, double *clat, double *aper)
{
    int ns = p->K + p->H, slot[MAXN] = {0};
    long total = 1;
    for (int v = 0; v < p->n; v++)
        total *= ns;
    *cper = *clat = *aper = INFINITY;
    for (long x = 0; x < total; x++) {
        long y = x;
        for (int v = 0; v < p->n; v++)
            slot[v] = (int)(y % ns), y /= ns;
        double per, lat;
        int contig;
        brute_eval(p, slot, &per, &lat, &contig);
        if (!isfinite(per))
            continue;
        *aper = fmin(*aper, per);
        if (contig && (per < *cper * (1 - 1e-12) || (per <= *cper * (1 + 1e-12) && lat < *clat)))
            *cper = per, *clat = lat;
    }
}

static int near(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(1, fabs(b)); }

static uint64_t test_seed(void)
{
    const char *s = getenv("TSR_PP_SEED");
    return s ? strtoull(s, NULL, 0) : 0x5eed2026ull;
}
static int test_count(int dflt)
{
    const char *s = getenv("TSR_PP_COUNT");
    return s ? atoi(s) : dflt;
}

static void test_dp_vs_brute(void **state)
{
    (void)state;
    uint64_t seed = test_seed();
    int count = test_count(300), feasible = 0, refused = 0, multi = 0;
    rng_state = seed | 1;
    printf("test_dp_vs_brute: seed 0x%llx, %d DAGs (TSR_PP_SEED, TSR_PP_COUNT)\n", (unsigned long long)seed, count);
    for (int it = 0; it < count; it++) {
        prob_t p;
        random_problem(&p, 7, MAXS);
        double cper, clat, aper;
        brute(&p, &cper, &clat, &aper);
        tsr_pp_t *pp = build(&p);
        tsr_pp_plan_t pl;
        int rc = tsr_pp_solve_dp(pp, NULL, &pl);
        if (!isfinite(cper)) {
            if (rc != TSR_EINVAL)
                fail_msg("DAG %d (seed 0x%llx): no contiguous placement exists, DP returned %d period %g", it,
                         (unsigned long long)seed, rc, pl.period);
            refused++;
        } else {
            if (rc)
                fail_msg("DAG %d: DP refused a feasible problem (best period %g): %s", it, cper, tsr_errmsg());
            if (!near(pl.period, cper, 1e-9) || !near(pl.latency, clat, 1e-9))
                fail_msg("DAG %d (seed 0x%llx, n %d, K %d, H %d): DP period %.6f latency %.6f, brute force %.6f %.6f",
                         it, (unsigned long long)seed, p.n, p.K, p.H, pl.period, pl.latency, cper, clat);
            double per, lat;
            int contig;
            brute_eval(&p, pl.slot, &per, &lat, &contig);
            if (!contig || !pl.contiguous || !near(per, pl.period, 1e-9) || !near(lat, pl.latency, 1e-9))
                fail_msg("DAG %d: the DP's placement evaluates to %g / %g (contiguous %d), it said %g / %g", it, per,
                         lat, contig, pl.period, pl.latency);
            feasible++;
            multi += pl.nstages > 1;
            tsr_pp_plan_free(&pl);
        }
        tsr_pp_free(pp);
    }
    printf("test_dp_vs_brute: %d optimal (%d with several stages), %d infeasible and refused\n", feasible, multi,
           refused);
    assert_true(feasible >= 200); /* the brief: >= 200 graphs solved and proved optimal */
    assert_true(multi >= 50);     /* and not all trivially one stage */
}

/* ---------------------------------------------------------- intra-layer splits (issue 26 step 3) */

#define MAXR 3 /* parts the split test allows (<= MAXS) */

typedef struct {
    double cost[MAXN][MAXR + 1][2]; /* one part's cost per kind (INFINITY: not splittable so) */
    uint64_t mem[MAXN][MAXR + 1];
} split_t;

static void random_split(const prob_t *p, split_t *sp)
{
    for (int v = 0; v < p->n; v++)
        for (int r = 0; r <= MAXR; r++) {
            for (int k = 0; k < 2; k++)
                sp->cost[v][r][k] = INFINITY;
            sp->mem[v][r] = 0;
            if (r < 2 || rnd() % 4 == 0)
                continue;
            for (int k = 0; k < p->nkinds; k++)
                if (isfinite(p->cost[v][k]))
                    sp->cost[v][r][k] = ceil(p->cost[v][k] / r) + rint_(0, 10);
            sp->mem[v][r] = p->mem[v] / (uint64_t)r + (uint64_t)rint_(0, 2);
        }
}

/* The split model from the header, written again: node v in parts[v] parts
 * on slot[v] and parts[v] - 1 more free devices of its class (chosen here
 * in index order: devices of a class are interchangeable). Period and
 * latency of the placement, INFINITY when infeasible or not contiguous. */
static void brute_eval_split(const prob_t *p, const split_t *sp, const int *slot, const int *parts, int *xs,
                             double *period, double *latency)
{
    *period = *latency = INFINITY;
    int ns = p->K + p->H, cntv[MAXS] = {0}, busy[MAXS] = {0};
    for (int v = 0; v < p->n; v++)
        cntv[slot[v]]++, busy[slot[v]] = 1;
    for (int v = 0; v < p->n; v++) {
        int s = slot[v], r = parts[v];
        if (r == 1)
            continue;
        if (s >= p->K || cntv[s] != 1 || !isfinite(sp->cost[v][r][p->kind[s]]) || sp->mem[v][r] > p->dram[s])
            return;
        for (int j = 1; j < r; j++) {
            int x = -1;
            for (int d = 0; d < p->K && x < 0; d++)
                if (!busy[d] && p->kind[d] == p->kind[s] && p->dram[d] == p->dram[s])
                    x = d;
            if (x < 0)
                return;
            busy[x] = 1;
            xs[v * TSR_PP_MAX_SPLIT + j - 1] = x;
        }
    }
    double per, lat;
    int contig;
    brute_eval(p, slot, &per, &lat, &contig); /* contiguity (the extra devices run no node) */
    if (!contig)
        return;
    int ok = 1;
    double pmax = 0, lsum = 0;
    for (int s = 0; s < ns && ok; s++) {
        if (!cntv[s])
            continue;
        int v = -1;
        for (int u = 0; u < p->n; u++)
            if (slot[u] == s && parts[u] > 1)
                v = u;
        double load;
        if (v < 0) { /* an unsplit stage: brute_eval's load, with a split producer's send being its slice */
            load = 0;
            uint64_t mem = 0;
            for (int u = 0; u < p->n; u++) {
                if (slot[u] != s)
                    continue;
                load += s < p->K ? p->cost[u][p->kind[s]] : p->host[u];
                if (s < p->K) {
                    mem += p->mem[u];
                    load += (p->in[u] ? xfer(p, p->in[u]) : 0) + (p->out[u] ? xfer(p, p->out[u]) : 0);
                }
            }
            if (s < p->K && mem > p->dram[s])
                ok = 0;
            for (int u = 0; u < p->n; u++) {
                int send = 0, recv = 0;
                uint64_t b = 0;
                for (int e = 0; e < p->ne; e++)
                    if (p->ef[e] == u) {
                        b = p->eb[e] > b ? p->eb[e] : b;
                        int a = slot[u], t = slot[p->et[e]];
                        send |= a == s && t != s;
                        recv |= a != s && t == s;
                    }
                int has = 0;
                for (int e = 0; e < p->ne; e++)
                    has |= p->ef[e] == u;
                double cu = has ? xfer(p, b) : 0;
                if (recv)
                    load += cu;
                if (send) /* a split producer sends its slice */
                    load += parts[u] > 1 ? p->lat + (double)b / parts[u] / p->bw : cu;
            }
        } else {
            int r = parts[v];
            load = sp->cost[v][r][p->kind[s]] + (p->in[v] ? xfer(p, p->in[v]) : 0) +
                   (p->out[v] ? p->lat + (double)p->out[v] / r / p->bw : 0);
            uint64_t b = 0;
            int has = 0;
            for (int e = 0; e < p->ne; e++)
                if (p->ef[e] == v)
                    has = 1, b = p->eb[e] > b ? p->eb[e] : b;
            if (has)
                load += p->lat + (double)b / r / p->bw;
            for (int u = 0; u < p->n; u++) { /* each part receives the whole of every input */
                int in = 0;
                for (int e = 0; e < p->ne; e++)
                    in |= p->ef[e] == u && p->et[e] == v;
                if (!in)
                    continue;
                uint64_t bu = 0;
                for (int e = 0; e < p->ne; e++)
                    if (p->ef[e] == u && p->eb[e] > bu)
                        bu = p->eb[e];
                load += xfer(p, bu);
            }
        }
        double cst_ok = 1;
        for (int u = 0; u < p->n; u++)
            if (slot[u] == s && parts[u] == 1 && !isfinite(s < p->K ? p->cost[u][p->kind[s]] : p->host[u]))
                cst_ok = 0;
        if (!cst_ok)
            ok = 0;
        pmax = fmax(pmax, load);
        lsum += load;
    }
    if (ok)
        *period = pmax, *latency = lsum;
}

static void test_split_vs_brute(void **state)
{
    (void)state;
    uint64_t seed = test_seed() ^ 0x5b117ull;
    int count = test_count(250), solved = 0, better = 0, used = 0;
    rng_state = seed | 1;
    for (int it = 0; it < count; it++) {
        prob_t p;
        random_problem(&p, 6, MAXS);
        if (p.K < 2)
            continue;
        int heavy = rint_(0, p.n - 1); /* one layer dominates (the case splits are for) */
        for (int k = 0; k < p.nkinds; k++)
            p.cost[heavy][k] *= 6;
        if (rnd() % 4) /* devices of a class are what a split uses: mostly one DRAM size */
            for (int d = 1; d < p.K; d++)
                p.dram[d] = p.dram[0];
        split_t sp;
        random_split(&p, &sp);
        int maxr = p.K < MAXR ? p.K : MAXR, ns = p.K + p.H;
        /* brute force: every placement, every parts choice */
        double bper = INFINITY, blat = INFINITY, uper = INFINITY;
        int slot[MAXN], parts[MAXN], xs[MAXN * TSR_PP_MAX_SPLIT];
        long total = 1;
        for (int v = 0; v < p.n; v++)
            total *= ns * maxr;
        for (long x = 0; x < total; x++) {
            long y = x;
            for (int v = 0; v < p.n; v++) {
                slot[v] = (int)(y % ns), y /= ns;
                parts[v] = 1 + (int)(y % maxr), y /= maxr;
            }
            double per, lat;
            brute_eval_split(&p, &sp, slot, parts, xs, &per, &lat);
            if (!isfinite(per))
                continue;
            int split = 0;
            for (int v = 0; v < p.n; v++)
                split |= parts[v] > 1;
            if (!split)
                uper = fmin(uper, per);
            if (per < bper * (1 - 1e-12) || (per <= bper * (1 + 1e-12) && lat < blat))
                bper = per, blat = lat;
        }
        tsr_pp_t *pp = build(&p);
        for (int v = 0; v < p.n; v++)
            for (int r = 2; r <= MAXR; r++)
                if (sp.cost[v][r][0] < INFINITY || sp.cost[v][r][1] < INFINITY)
                    assert_int_equal(tsr_pp_node_split(pp, v, r, sp.cost[v][r], sp.mem[v][r]), 0);
        tsr_pp_opts_t o = {0};
        o.max_split = maxr;
        tsr_pp_plan_t pl;
        int rc = tsr_pp_solve_dp(pp, &o, &pl);
        if (!isfinite(bper)) {
            if (rc != TSR_EINVAL)
                fail_msg("DAG %d: no placement with splits exists, DP returned %d", it, rc);
        } else {
            if (rc)
                fail_msg("DAG %d: DP with splits refused a feasible problem (best %g): %s", it, bper, tsr_errmsg());
            if (!near(pl.period, bper, 1e-9) || !near(pl.latency, blat, 1e-9))
                fail_msg("DAG %d (seed 0x%llx, n %d, K %d, H %d): DP with splits period %.6f latency %.6f, brute "
                         "force %.6f %.6f",
                         it, (unsigned long long)seed, p.n, p.K, p.H, pl.period, pl.latency, bper, blat);
            int any = 0, pparts[MAXN], pxs[MAXN * TSR_PP_MAX_SPLIT];
            for (int k = 0; k < pl.nstages; k++) {
                any |= pl.stages[k].parts > 1;
                for (int j = 0; j < pl.stages[k].nnodes; j++)
                    pparts[pl.stages[k].nodes[j]] = pl.stages[k].parts;
            }
            double per, lat; /* the plan as the brute force's model reads it */
            brute_eval_split(&p, &sp, pl.slot, pparts, pxs, &per, &lat);
            if (!near(per, pl.period, 1e-9) || !near(lat, pl.latency, 1e-9))
                fail_msg("DAG %d: the DP's split plan evaluates to %g / %g, it said %g / %g", it, per, lat, pl.period,
                         pl.latency);
            used += any;
            better += bper < uper * (1 - 1e-12);
            solved++;
            tsr_pp_plan_free(&pl);
        }
        tsr_pp_free(pp);
    }
    printf("test_split_vs_brute: %d optimal, %d using a split, %d better than every unsplit plan\n", solved, used,
           better);
    assert_true(solved >= 100);
    assert_true(better >= 10); /* the splits matter in the instances */
}

/* A split stage's load by hand, and the refusals. */
static void test_split_refusals(void **state)
{
    (void)state;
    tsr_pp_t *pp;
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    double c0 = 1000, c1 = 100, part = 520;
    assert_int_equal(tsr_pp_node(pp, "big", &c0, INFINITY, 10, NULL), 0);
    assert_int_equal(tsr_pp_node(pp, "small", &c1, INFINITY, 10, NULL), 0);
    assert_int_equal(tsr_pp_edge(pp, 0, 1, 800), 0);
    for (int d = 0; d < 3; d++)
        assert_int_equal(tsr_pp_device(pp, NULL, 0, 100, NULL), 0);
    assert_int_equal(tsr_pp_set_link(pp, 8, 10), 0);
    assert_int_equal(tsr_pp_set_host_stages(pp, 0), 0);
    assert_int_equal(tsr_pp_node_split(pp, 0, 2, &part, 6), 0);
    assert_int_equal(tsr_pp_node_split(pp, 0, 1, &part, 6), TSR_EINVAL);
    assert_int_equal(tsr_pp_node_split(pp, 0, TSR_PP_MAX_SPLIT + 1, &part, 6), TSR_EINVAL);
    assert_int_equal(tsr_pp_node_split(pp, 7, 2, &part, 6), TSR_EINVAL);
    tsr_pp_opts_t o = {0};
    o.max_split = 4; /* more parts than the 3 devices */
    tsr_pp_plan_t pl;
    assert_int_equal(tsr_pp_solve_dp(pp, &o, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "only 3 devices"));
    o.max_split = 2;
    assert_int_equal(tsr_pp_solve_dp(pp, &o, &pl), 0);
    /* big in 2 parts: 520 + its slice 10 + 800/2/8 = 580; small: 100 + 10 + 100 = 210 */
    assert_int_equal(pl.nstages, 2);
    assert_int_equal(pl.stages[0].parts, 2);
    assert_int_equal(pl.stages[0].slots[0], 0);
    assert_int_equal(pl.stages[0].slots[1], 1);
    assert_true(near(pl.stages[0].load, 580, 1e-12));
    assert_true(near(pl.period, 580, 1e-12));
    assert_true(near(pl.latency, 790, 1e-12));
    tsr_pp_plan_free(&pl);
    /* unsplit, the best is 1000 + 110 */
    o.max_split = 0;
    assert_int_equal(tsr_pp_solve_dp(pp, &o, &pl), 0);
    assert_true(near(pl.period, 1100, 1e-12)); /* both on one device */
    tsr_pp_plan_free(&pl);
    /* a node too big for any device whole but whose parts fit: planned split, not refused */
    {
        tsr_pp_t *q;
        assert_int_equal(tsr_pp_create(1, &q), 0);
        double cb = 1000, cp = 500;
        assert_int_equal(tsr_pp_node(q, "huge", &cb, INFINITY, 150, NULL), 0);
        assert_int_equal(tsr_pp_node_split(q, 0, 2, &cp, 75), 0);
        for (int d = 0; d < 2; d++)
            assert_int_equal(tsr_pp_device(q, NULL, 0, 100, NULL), 0);
        assert_int_equal(tsr_pp_set_host_stages(q, 0), 0);
        tsr_pp_opts_t o2 = {0};
        o2.max_split = 2;
        tsr_pp_plan_t p2;
        if (tsr_pp_solve_dp(q, &o2, &p2))
            fail_msg("%s", tsr_errmsg());
        assert_int_equal(p2.stages[0].parts, 2);
        assert_true(p2.stages[0].mem == 75);
        tsr_pp_plan_free(&p2);
        o2.max_split = 0; /* unsplit it fits nowhere: refused */
        assert_int_equal(tsr_pp_solve_dp(q, &o2, &p2), TSR_EINVAL);
        tsr_pp_free(q);
    }
    /* evaluate_split refuses a part on a device that runs another node */
    int slot[2] = {0, 1}, parts[2] = {2, 1}, xs[2 * TSR_PP_MAX_SPLIT] = {1};
    assert_int_equal(tsr_pp_evaluate_split(pp, slot, parts, xs, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "small"));
    xs[0] = 2;
    assert_int_equal(tsr_pp_evaluate_split(pp, slot, parts, xs, &pl), 0);
    assert_true(near(pl.period, 580, 1e-12));
    tsr_pp_plan_free(&pl);
    tsr_pp_free(pp);
}

static void test_ilp_vs_brute(void **state)
{
    (void)state;
    if (!tsr_pp_have_ilp()) {
        printf("test_ilp_vs_brute: SKIPPED, built without GLPK (install libglpk-dev and rebuild)\n");
        tsr_pp_plan_t pl;
        assert_int_equal(tsr_pp_solve_ilp(NULL, NULL, &pl), TSR_EBACKEND);
        assert_non_null(strstr(tsr_errmsg(), "built without GLPK"));
        skip();
    }
    uint64_t seed = test_seed() ^ 0x11f;
    int count = test_count(300) * 2 / 5, solved = 0, noncontig_better = 0;
    rng_state = seed | 1;
    for (int it = 0; it < count; it++) {
        prob_t p;
        random_problem(&p, 6, MAXS);
        double cper, clat, aper;
        brute(&p, &cper, &clat, &aper);
        tsr_pp_t *pp = build(&p);
        tsr_pp_plan_t pl;
        int rc = tsr_pp_solve_ilp(pp, NULL, &pl);
        if (!isfinite(aper)) {
            assert_int_equal(rc, TSR_EINVAL);
        } else {
            if (rc)
                fail_msg("graph %d: ILP failed on a feasible problem: %s", it, tsr_errmsg());
            if (!near(pl.period, aper, 1e-6))
                fail_msg("graph %d (seed 0x%llx): ILP period %.6f, brute force over all placements %.6f", it,
                         (unsigned long long)seed, pl.period, aper);
            assert_true(pl.period <= cper * (1 + 1e-9)); /* never worse than the best contiguous */
            noncontig_better += pl.period < cper * (1 - 1e-9);
            solved++;
            tsr_pp_plan_free(&pl);
        }
        tsr_pp_free(pp);
    }
    printf("test_ilp_vs_brute: %d optimal, %d of them better than every contiguous split\n", solved,
           noncontig_better);
    assert_true(solved >= count / 2);
}

/* ---------------------------------------------------------- hand-made cases */

static tsr_pp_t *chain(int n, const double *cost, uint64_t mem, uint64_t bytes)
{
    tsr_pp_t *pp;
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    for (int v = 0; v < n; v++) {
        char nm[16];
        snprintf(nm, sizeof nm, "c%d", v);
        assert_int_equal(tsr_pp_node(pp, nm, &cost[v], INFINITY, mem, NULL), 0);
        if (v)
            assert_int_equal(tsr_pp_edge(pp, v - 1, v, bytes), 0);
    }
    return pp;
}

static void test_chain(void **state)
{
    (void)state;
    double cost[6] = {10, 10, 10, 10, 30, 12};
    tsr_pp_t *pp = chain(6, cost, 1, 16);
    assert_int_equal(tsr_pp_set_link(pp, 8, 1), 0); /* each cut: 1 + 16/8 = 3 cycles on both sides */
    for (int d = 0; d < 3; d++)
        assert_int_equal(tsr_pp_device(pp, NULL, 0, 100, NULL), 0);
    tsr_pp_plan_t pl;
    if (tsr_pp_solve_dp(pp, NULL, &pl))
        fail_msg("%s", tsr_errmsg());
    /* best: {c0..c3} 40+3 | {c4} 3+30+3 | {c5} 3+12: period 43; {c0..c2} 33 | {c3} 16 | {c4,c5} 45 and
     * {c0..c3} 43 | {c4,c5} 45 are worse */
    assert_true(near(pl.period, 43, 1e-12));
    assert_int_equal(pl.nstages, 3);
    assert_int_equal(pl.stages[0].nnodes, 4);
    assert_int_equal(pl.nxfers, 2);
    assert_true(pl.contiguous);
    tsr_pp_plan_t one;
    assert_int_equal(tsr_pp_solve_baseline(pp, TSR_PP_SINGLE, &one), 0);
    assert_true(near(one.period, 82, 1e-12));
    tsr_pp_plan_t eq, gr;
    assert_int_equal(tsr_pp_solve_baseline(pp, TSR_PP_GREEDY, &gr), 0);
    for (int v = 0; v < 6; v++)
        assert_int_equal(tsr_pp_node_macs(pp, v, cost[v]), 0);
    assert_int_equal(tsr_pp_solve_baseline(pp, TSR_PP_EQUAL_MACS, &eq), 0);
    assert_true(gr.period >= pl.period && eq.period >= pl.period); /* the DP is optimal: baselines no better */
    tsr_pp_print(pp, &pl, one.period, stdout);
    tsr_pp_plan_free(&pl), tsr_pp_plan_free(&one), tsr_pp_plan_free(&eq), tsr_pp_plan_free(&gr);
    tsr_pp_free(pp);
}

/* A long chain: the enumeration recurses once per node of a stage (3,000 deep on one device), and the
 * optimum over 3 devices of a uniform chain with free links is the even split. */
static void test_long_chain(void **state)
{
    (void)state;
    enum { N = 3000 };
    static double cost[N];
    for (int v = 0; v < N; v++)
        cost[v] = 7;
    tsr_pp_t *pp = chain(N, cost, 1, 0);
    assert_int_equal(tsr_pp_set_link(pp, 8, 0), 0);
    assert_int_equal(tsr_pp_device(pp, NULL, 0, 1 << 20, NULL), 0);
    tsr_pp_plan_t pl;
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), 0);
    assert_true(near(pl.period, 7.0 * N, 1e-12));
    assert_int_equal((int)pl.ideals, N + 1);
    tsr_pp_plan_free(&pl);
    assert_int_equal(tsr_pp_device(pp, NULL, 0, 1 << 20, NULL), 0);
    assert_int_equal(tsr_pp_device(pp, NULL, 0, 1 << 20, NULL), 0);
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), 0);
    assert_true(near(pl.period, 7.0 * N / 3, 1e-12));
    assert_int_equal(pl.nstages, 3);
    tsr_pp_plan_free(&pl);
    tsr_pp_free(pp);
}

static void test_diamond(void **state)
{
    (void)state;
    /* a -> b, a -> c, b -> d, c -> d; every edge 8 bytes at 8 bytes per cycle: a cut costs 1 on both sides.
     * {a,b} | {c,d}: 11 + a,b sent (2) = 13 and 11 + a,b received (2) = 13: period 13, latency 26. */
    tsr_pp_t *pp;
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    const double c[4] = {1, 10, 10, 1};
    const char *nm[4] = {"a", "b", "c", "d"};
    for (int v = 0; v < 4; v++)
        assert_int_equal(tsr_pp_node(pp, nm[v], &c[v], INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_edge(pp, 0, 1, 8), 0);
    assert_int_equal(tsr_pp_edge(pp, 0, 2, 8), 0);
    assert_int_equal(tsr_pp_edge(pp, 1, 3, 8), 0);
    assert_int_equal(tsr_pp_edge(pp, 2, 3, 8), 0);
    assert_int_equal(tsr_pp_device(pp, "d0", 0, 1, NULL), 0);
    assert_int_equal(tsr_pp_device(pp, "d1", 0, 1, NULL), 0);
    assert_int_equal(tsr_pp_set_host_stages(pp, 0), 0);
    tsr_pp_plan_t pl;
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), 0);
    assert_true(near(pl.period, 13, 1e-12));
    assert_true(near(pl.latency, 26, 1e-12));
    assert_int_equal(pl.nstages, 2);
    assert_true(near(pl.stages[0].comm_out, 2, 1e-12) && near(pl.stages[1].comm_in, 2, 1e-12));
    tsr_pp_plan_free(&pl);
    tsr_pp_free(pp);
}

static void test_host_only(void **state)
{
    (void)state;
    /* a -> h -> b, h host-only: a and b on devices, h on the host, three stages in order */
    tsr_pp_t *pp;
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    double c = 50, inf = INFINITY;
    assert_int_equal(tsr_pp_node(pp, "a", &c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_node(pp, "softmax", &inf, 5, 0, NULL), 0);
    assert_int_equal(tsr_pp_node(pp, "b", &c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_edge(pp, 0, 1, 64), 0);
    assert_int_equal(tsr_pp_edge(pp, 1, 2, 64), 0);
    assert_int_equal(tsr_pp_device(pp, NULL, 0, 1000, NULL), 0);
    assert_int_equal(tsr_pp_device(pp, NULL, 0, 1000, NULL), 0);
    tsr_pp_plan_t pl;
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), 0);
    assert_int_equal(pl.slot[1], 2); /* slot K: host stage 0 */
    assert_int_equal(pl.nstages, 3);
    assert_true(pl.contiguous);
    assert_int_equal(pl.stages[1].slot, 2);
    assert_true(pl.slot[0] != pl.slot[2]); /* one device for both would be a cycle through the host */
    tsr_pp_plan_free(&pl);
    /* without host stages: refused, naming the node */
    assert_int_equal(tsr_pp_set_host_stages(pp, 0), 0);
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "\"softmax\""));
    assert_non_null(strstr(tsr_errmsg(), "no device and not the host"));
    tsr_pp_free(pp);
}

static void test_dram_split(void **state)
{
    (void)state;
    /* three nodes of 6 bytes on devices of 12: one device would be fastest (the link is slow), but it
     * cannot hold them all: two stages, each within its DRAM */
    double cost[3] = {10, 10, 10};
    tsr_pp_t *pp = chain(3, cost, 6, 800);
    assert_int_equal(tsr_pp_set_link(pp, 8, 1000), 0);
    assert_int_equal(tsr_pp_device(pp, "big", 0, 1 << 20, NULL), 0);
    tsr_pp_plan_t pl;
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), 0);
    assert_int_equal(pl.nstages, 1);
    assert_true(near(pl.period, 30, 1e-12));
    tsr_pp_plan_free(&pl);
    tsr_pp_free(pp);
    pp = chain(3, cost, 6, 800);
    assert_int_equal(tsr_pp_set_link(pp, 8, 1000), 0);
    assert_int_equal(tsr_pp_device(pp, "s0", 0, 12, NULL), 0);
    assert_int_equal(tsr_pp_device(pp, "s1", 0, 12, NULL), 0);
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), 0);
    assert_int_equal(pl.nstages, 2);
    for (int k = 0; k < 2; k++)
        assert_true(pl.stages[k].mem <= 12);
    assert_true(near(pl.period, 20 + 1100, 1e-12));
    tsr_pp_plan_free(&pl);
    /* the ILP agrees */
    if (tsr_pp_have_ilp()) {
        assert_int_equal(tsr_pp_solve_ilp(pp, NULL, &pl), 0);
        assert_true(near(pl.period, 1120, 1e-6));
        tsr_pp_plan_free(&pl);
    }
    /* a placement over the DRAM is refused naming the device */
    int slot[3] = {0, 0, 0};
    assert_int_equal(tsr_pp_evaluate(pp, slot, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "\"s0\""));
    tsr_pp_free(pp);
}

/* ---------------------------------------------------------- bad inputs */

static void test_refusals(void **state)
{
    (void)state;
    tsr_pp_t *pp;
    tsr_pp_plan_t pl;
    double c = 1, inf = INFINITY;
    /* a node nothing can run */
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    assert_int_equal(tsr_pp_node(pp, "ok", &c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_node(pp, "lonely", &inf, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_device(pp, NULL, 0, 100, NULL), 0);
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "node \"lonely\": no device and not the host can run it"));
    assert_int_equal(tsr_pp_solve_baseline(pp, TSR_PP_GREEDY, &pl), TSR_EINVAL);
    tsr_pp_free(pp);
    /* a node whose footprint fits no device */
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    assert_int_equal(tsr_pp_node(pp, "huge", &c, INFINITY, 5000, NULL), 0);
    assert_int_equal(tsr_pp_device(pp, "small", 0, 100, NULL), 0);
    assert_int_equal(tsr_pp_device(pp, "smaller", 0, 50, NULL), 0);
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "node \"huge\" needs 5000 bytes"));
    assert_non_null(strstr(tsr_errmsg(), "device \"small\""));
    tsr_pp_free(pp);
    /* DRAM in all too small (every node fits some device, not all together) */
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    for (int v = 0; v < 3; v++)
        assert_int_equal(tsr_pp_node(pp, "x", &c, INFINITY, 60, NULL), 0);
    assert_int_equal(tsr_pp_device(pp, "d0", 0, 100, NULL), 0);
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "need 180 bytes of DRAM"));
    tsr_pp_free(pp);
    /* K above the limit */
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    assert_int_equal(tsr_pp_node(pp, "a", &c, INFINITY, 0, NULL), 0);
    for (int d = 0; d < TSR_PP_MAX_DEVICES + 1; d++)
        assert_int_equal(tsr_pp_device(pp, NULL, 0, 100, NULL), 0);
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "65 devices, above the limit of 64"));
    tsr_pp_free(pp);
    /* a cycle */
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    assert_int_equal(tsr_pp_node(pp, "p", &c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_node(pp, "q", &c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_node(pp, "r", &c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_edge(pp, 0, 1, 1), 0);
    assert_int_equal(tsr_pp_edge(pp, 1, 2, 1), 0);
    assert_int_equal(tsr_pp_edge(pp, 2, 1, 1), 0);
    assert_int_equal(tsr_pp_device(pp, NULL, 0, 100, NULL), 0);
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "cycle through node \"q\""));
    tsr_pp_free(pp);
    /* too many ideals: 20 independent nodes have 2^20 */
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    for (int v = 0; v < 20; v++)
        assert_int_equal(tsr_pp_node(pp, "w", &c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_device(pp, NULL, 0, 100, NULL), 0);
    tsr_pp_opts_t o = {.max_ideals = 1000};
    assert_int_equal(tsr_pp_solve_dp(pp, &o, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "more than 1000 ideals"));
    assert_non_null(strstr(tsr_errmsg(), "heuristic"));
    assert_int_equal(tsr_pp_solve_baseline(pp, TSR_PP_GREEDY, &pl), 0); /* the heuristic runs */
    tsr_pp_plan_free(&pl);
    tsr_pp_free(pp);
    /* bad arguments */
    assert_int_equal(tsr_pp_create(0, &pp), TSR_EINVAL);
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    double neg = -1;
    assert_int_equal(tsr_pp_node(pp, "neg", &neg, INFINITY, 0, NULL), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "\"neg\""));
    assert_int_equal(tsr_pp_edge(pp, 0, 1, 1), TSR_EINVAL);
    double big = 1e300; /* finite costs that would sum to INFINITY ("cannot run") */
    assert_int_equal(tsr_pp_node(pp, "big", &big, INFINITY, 0, NULL), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "\"big\""));
    assert_int_equal(tsr_pp_node(pp, "wrap", &c, INFINITY, UINT64_MAX, NULL), TSR_EINVAL); /* sums would wrap */
    assert_non_null(strstr(tsr_errmsg(), "\"wrap\": footprint"));
    assert_int_equal(tsr_pp_node(pp, "a", &c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_node(pp, "b", &c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_edge(pp, 0, 1, UINT64_MAX), TSR_EINVAL);
    assert_int_equal(tsr_pp_node_io(pp, 0, UINT64_MAX, 0), TSR_EINVAL);
    tsr_pp_free(pp);
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    assert_int_equal(tsr_pp_device(pp, "k9", 9, 1, NULL), TSR_EINVAL);
    assert_int_equal(tsr_pp_set_link(pp, 0, 0), TSR_EINVAL);
    assert_int_equal(tsr_pp_set_host_stages(pp, 99), TSR_EINVAL);
    assert_int_equal(tsr_pp_solve_dp(pp, NULL, &pl), TSR_EINVAL); /* no nodes */
    tsr_pp_free(pp);
}


/* ---------------------------------------------------------- shared boundaries (tsr_pp_solve_shared) */

#define MAXQ 4 /* units of a shared node in the test */

typedef struct {
    prob_t p;                       /* nodes in index order (a topological order), no host */
    int q[MAXN];                    /* units (1: not shared) */
    double uc[MAXN][MAXQ][2];       /* cost of u units on kind k */
    double extra[MAXN][2];
} sprob_t;

static void random_shared(sprob_t *s)
{
    memset(s, 0, sizeof *s);
    prob_t *p = &s->p;
    p->n = rint_(2, 6);
    p->nkinds = rint_(1, 2);
    p->K = rint_(1, 3);
    for (int v = 0; v < p->n; v++) {
        for (int k = 0; k < p->nkinds; k++)
            p->cost[v][k] = rint_(10, 300);
        if (p->nkinds == 2 && rnd() % 8 == 0)
            p->cost[v][rnd() % 2] = INFINITY;
        p->host[v] = INFINITY;
        p->mem[v] = (uint64_t)rint_(0, 12);
        if (rnd() % 4 == 0)
            p->in[v] = (uint64_t)rint_(1, 64);
        s->q[v] = 1;
        if (rnd() % 3) {
            s->q[v] = rint_(2, MAXQ);
            for (int k = 0; k < p->nkinds; k++) {
                for (int u = 1; u < s->q[v]; u++) /* linear, or a random part (the model takes any cost) */
                    s->uc[v][u][k] = !isfinite(p->cost[v][k]) ? INFINITY
                                     : rnd() % 2          ? p->cost[v][k] * u / s->q[v]
                                                          : rint_(1, 300);
                s->extra[v][k] = rnd() % 2 ? rint_(0, 20) : 0;
            }
        } else if (rnd() % 4 == 0)
            p->out[v] = (uint64_t)rint_(1, 64);
    }
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            if (rnd() % 100 < 50 && p->ne < 64) {
                p->ef[p->ne] = a, p->et[p->ne] = b;
                p->eb[p->ne++] = 12 * (uint64_t)rint_(0, 20); /* divisible by every unit count */
            }
    for (int d = 0; d < p->K; d++) {
        p->kind[d] = rint_(0, p->nkinds - 1);
        p->dram[d] = (uint64_t)rint_(10, 40);
    }
    static const double bws[] = {1, 4, 8, 16};
    p->bw = bws[rnd() % 4];
    p->lat = rint_(0, 10);
}

static tsr_pp_t *build_shared(const sprob_t *s)
{
    tsr_pp_t *pp = build(&s->p);
    for (int v = 0; v < s->p.n; v++)
        if (s->q[v] > 1) {
            double uc[MAXQ * 2];
            for (int u = 1; u < s->q[v]; u++)
                for (int k = 0; k < s->p.nkinds; k++)
                    uc[(u - 1) * s->p.nkinds + k] = s->uc[v][u][k];
            assert_int_equal(tsr_pp_node_share(pp, v, s->q[v], uc, s->extra[v]), 0);
        }
    return pp;
}

/* The loads of the plan whose stage j runs, of node v, units [lo[j][v], hi[j][v]) (lo = hi: none), from the
 * header's model, stage by stage as sets. INFINITY when a stage is not one. */
static void brute_eval_shared(const sprob_t *s, int S, int lo[MAXS][MAXN], int hi[MAXS][MAXN], double *period,
                              double *latency)
{
    const prob_t *p = &s->p;
    uint64_t cb[MAXN] = {0};
    int has_succ[MAXN] = {0};
    for (int e = 0; e < p->ne; e++) {
        has_succ[p->ef[e]] = 1;
        if (p->eb[e] > cb[p->ef[e]])
            cb[p->ef[e]] = p->eb[e];
    }
    *period = 0, *latency = 0;
    for (int j = 0; j < S; j++) {
        int k = p->kind[j];
        double comp = 0, cin = 0, cout = 0;
        uint64_t mem = 0;
        int any = 0;
        int whole[MAXN], part[MAXN];
        for (int v = 0; v < p->n; v++) {
            whole[v] = lo[j][v] == 0 && hi[j][v] == s->q[v];
            part[v] = hi[j][v] > lo[j][v] && !whole[v];
            any |= whole[v] || part[v];
        }
        if (!any) {
            *period = *latency = INFINITY;
            return;
        }
        for (int v = 0; v < p->n; v++) {
            int q = s->q[v];
            if (whole[v]) {
                comp += p->cost[v][k];
                mem += p->mem[v];
                cin += p->in[v] ? xfer(p, p->in[v]) : 0;
                cout += p->out[v] ? xfer(p, p->out[v]) : 0;
                int leaves = 0; /* a consumer not whole here (elsewhere, or a part here whose rest is elsewhere) */
                for (int e = 0; e < p->ne; e++)
                    if (p->ef[e] == v && !whole[p->et[e]])
                        leaves = 1;
                if (leaves)
                    cout += has_succ[v] ? xfer(p, cb[v]) : 0;
            } else if (part[v]) {
                int u = hi[j][v] - lo[j][v];
                if (lo[j][v] > 0 && hi[j][v] < q) { /* a middle piece */
                    *period = *latency = INFINITY;
                    return;
                }
                comp += s->uc[v][u][k];
                mem += (p->mem[v] * (uint64_t)u + (uint64_t)q - 1) / (uint64_t)q;
                cin += p->in[v] ? xfer(p, p->in[v]) : 0;
                if (lo[j][v] > 0) { /* the later part: every consumer whole here; the join */
                    for (int e = 0; e < p->ne; e++)
                        if (p->ef[e] == v && !whole[p->et[e]]) {
                            *period = *latency = INFINITY;
                            return;
                        }
                    comp += s->extra[v][k];
                    cin += xfer(p, cb[v] * (uint64_t)lo[j][v] / (uint64_t)q) + xfer(p, cb[v] * (uint64_t)u / (uint64_t)q);
                    cout += xfer(p, cb[v] * (uint64_t)u / (uint64_t)q);
                } else
                    cout += xfer(p, cb[v] * (uint64_t)u / (uint64_t)q);
            }
        }
        /* receives: each node not whole here (and not joined here) read by anything here, once */
        for (int u = 0; u < p->n; u++) {
            if (whole[u] || (part[u] && lo[j][u] > 0))
                continue;
            int read = 0;
            for (int e = 0; e < p->ne; e++)
                if (p->ef[e] == u && (whole[p->et[e]] || part[p->et[e]]))
                    read = 1;
            if (read)
                cin += xfer(p, cb[u]);
        }
        if (!isfinite(comp) || mem > p->dram[j]) {
            *period = *latency = INFINITY;
            return;
        }
        double load = comp + cin + cout;
        *period = fmax(*period, load);
        *latency += load;
    }
}

/* Every plan: cut positions (node, units) strictly increasing, up to K stages. */
static void brute_shared_rec(const sprob_t *s, int S, int *cn, int *cu, int depth, double *bp, double *bl,
                             int *nplans)
{
    const prob_t *p = &s->p;
    if (depth == S - 1) {
        int lo[MAXS][MAXN], hi[MAXS][MAXN];
        for (int j = 0; j < S; j++) {
            int a = j ? cn[j - 1] * MAXQ + cu[j - 1] : 0, b = j < S - 1 ? cn[j] * MAXQ + cu[j] : p->n * MAXQ;
            for (int v = 0; v < p->n; v++) {
                /* node v occupies positions v * MAXQ + [0, q): its units [x - v MAXQ] in [a, b) */
                int l = a - v * MAXQ, h = b - v * MAXQ;
                l = l < 0 ? 0 : l > s->q[v] ? s->q[v] : l;
                h = h < 0 ? 0 : h > s->q[v] ? s->q[v] : h;
                lo[j][v] = l, hi[j][v] = h > l ? h : l;
            }
        }
        double per, lat;
        brute_eval_shared(s, S, lo, hi, &per, &lat);
        (*nplans)++;
        if (per < *bp - 1e-9 * fmax(1, *bp) || (near(per, *bp, 1e-9) && lat < *bl))
            *bp = per, *bl = lat;
        return;
    }
    int v0 = depth ? cn[depth - 1] : 0, u0 = depth ? cu[depth - 1] + 1 : 1;
    for (int v = v0; v < p->n; v++)
        for (int u = v == v0 ? u0 : 0; u < s->q[v]; u++) {
            if (v == 0 && u == 0)
                continue;
            cn[depth] = v, cu[depth] = u;
            brute_shared_rec(s, S, cn, cu, depth + 1, bp, bl, nplans);
        }
}

static void test_shared_vs_brute(void **state)
{
    (void)state;
    uint64_t seed = test_seed();
    int count = test_count(300), feasible = 0, refused = 0, shared = 0, better = 0, clean = 0;
    rng_state = (seed ^ 0x5a5a) | 1;
    printf("test_shared_vs_brute: seed 0x%llx, %d DAGs\n", (unsigned long long)seed, count);
    for (int it = 0; it < count; it++) {
        sprob_t s;
        random_shared(&s);
        const prob_t *p = &s.p;
        double bp = INFINITY, bl = INFINITY, bp_clean = INFINITY;
        int cn[MAXS], cu[MAXS], nplans = 0;
        for (int S = 1; S <= p->K; S++)
            brute_shared_rec(&s, S, cn, cu, 0, &bp, &bl, &nplans);
        /* the best with clean cuts only (no node shared) */
        sprob_t c = s;
        for (int v = 0; v < p->n; v++)
            c.q[v] = 1;
        double cl = INFINITY;
        for (int S = 1; S <= p->K; S++)
            brute_shared_rec(&c, S, cn, cu, 0, &bp_clean, &cl, &nplans);
        tsr_pp_t *pp = build_shared(&s);
        tsr_pp_plan_t pl;
        int rc = tsr_pp_solve_shared(pp, NULL, &pl);
        if (!isfinite(bp)) {
            if (rc != TSR_EINVAL)
                fail_msg("DAG %d (seed 0x%llx): no plan exists, the shared planner returned %d period %g", it,
                         (unsigned long long)seed, rc, pl.period);
            refused++;
        } else {
            if (rc)
                fail_msg("DAG %d: refused a feasible problem (best period %g): %s", it, bp, tsr_errmsg());
            if (!near(pl.period, bp, 1e-9) || !near(pl.latency, bl, 1e-9))
                fail_msg("DAG %d (seed 0x%llx, n %d, K %d): shared planner period %.6f latency %.6f, brute force "
                         "%.6f %.6f",
                         it, (unsigned long long)seed, p->n, p->K, pl.period, pl.latency, bp, bl);
            /* its cuts evaluated again give its figures */
            tsr_pp_cut_t cuts[MAXS];
            for (int j = 1; j < pl.nstages; j++)
                cuts[j - 1] = (tsr_pp_cut_t){pl.stages[j].nodes[0], pl.stages[j].head};
            tsr_pp_plan_t ev;
            assert_int_equal(tsr_pp_evaluate_shared(pp, cuts, pl.nstages - 1, &ev), 0);
            assert_true(near(ev.period, pl.period, 1e-12) && near(ev.latency, pl.latency, 1e-12));
            /* a plan with clean cuts only is an ordinary placement: tsr_pp_evaluate gives the same loads */
            if (!pl.shared) {
                int slot[MAXN];
                for (int j = 0; j < pl.nstages; j++)
                    for (int i = 0; i < pl.stages[j].nnodes; i++)
                        slot[pl.stages[j].nodes[i]] = j;
                tsr_pp_plan_t ord;
                assert_int_equal(tsr_pp_evaluate(pp, slot, &ord), 0);
                if (!near(ord.period, pl.period, 1e-9) || !near(ord.latency, pl.latency, 1e-9))
                    fail_msg("DAG %d: clean plan %g / %g, tsr_pp_evaluate %g / %g", it, pl.period, pl.latency,
                             ord.period, ord.latency);
                tsr_pp_plan_free(&ord);
                clean++;
            }
            shared += pl.shared;
            better += bp < bp_clean * (1 - 1e-9);
            feasible++;
            tsr_pp_plan_free(&ev);
            tsr_pp_plan_free(&pl);
        }
        tsr_pp_free(pp);
    }
    printf("test_shared_vs_brute: %d optimal (%d share a node, %d beat every clean-cut plan; %d clean plans equal "
           "tsr_pp_evaluate's), %d infeasible and refused\n",
           feasible, shared, better, clean, refused);
    assert_true(feasible >= 200);
    assert_true(better >= 30); /* sharing matters on enough of them */
    assert_true(clean >= 30);
}

/* Shared boundaries refused: bad units, a graph output, an order that is not topological, a cut that leaves a
 * consumer outside the later part's stage; and a hand-worked load. */
static void test_shared_refusals(void **state)
{
    (void)state;
    tsr_pp_t *pp;
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    double c[1] = {100}, uc[3] = {25, 50, 75};
    for (int v = 0; v < 3; v++)
        assert_int_equal(tsr_pp_node(pp, v == 1 ? "mid" : v ? "out" : "in", c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_edge(pp, 0, 1, 800), 0);
    assert_int_equal(tsr_pp_edge(pp, 1, 2, 400), 0);
    assert_int_equal(tsr_pp_node_io(pp, 2, 0, 16), 0);
    assert_int_equal(tsr_pp_device(pp, "d0", 0, 1000, NULL), 0);
    assert_int_equal(tsr_pp_device(pp, "d1", 0, 1000, NULL), 0);
    assert_int_equal(tsr_pp_set_link(pp, 8, 10), 0);
    assert_int_equal(tsr_pp_node_share(pp, 1, 1, uc, NULL), TSR_EINVAL);
    assert_int_equal(tsr_pp_node_share(pp, 1, TSR_PP_MAX_UNITS + 1, uc, NULL), TSR_EINVAL);
    assert_int_equal(tsr_pp_node_share(pp, 2, 4, uc, NULL), TSR_EINVAL); /* writes the graph output */
    assert_non_null(strstr(tsr_errmsg(), "\"out\" writes a graph output"));
    double bad[3] = {25, NAN, 75};
    assert_int_equal(tsr_pp_node_share(pp, 1, 4, bad, NULL), TSR_EINVAL);
    double ex[1] = {7};
    assert_int_equal(tsr_pp_node_share(pp, 1, 4, uc, ex), 0);
    assert_int_equal(tsr_pp_node_units(pp, 1), 4);
    assert_int_equal(tsr_pp_node_units(pp, 0), 1);
    /* "mid" shared at unit 1: stage 0 = in + 1 unit of mid, stage 1 = 3 units of mid + out. By hand (link
     * 8 B/cycle + 10):
     * stage 0: 100 + 25; sends in's 800 B (mid's rest reads it) 10 + 100, and its slice of mid's 400 B,
     *          100 B: 10 + 12.5 -> 257.5
     * stage 1: 75 + 7 + 100; receives in's 800 B (110); the join: the slice of 100 B in (22.5), its own
     *          300 B out and in (2 x 47.5); the graph output 16 B (12) -> 182 + 110 + 22.5 + 95 + 12 = 421.5 */
    tsr_pp_cut_t cut = {1, 1};
    tsr_pp_plan_t pl;
    assert_int_equal(tsr_pp_evaluate_shared(pp, &cut, 1, &pl), 0);
    assert_true(pl.shared && pl.nstages == 2);
    assert_true(near(pl.stages[0].load, 257.5, 1e-12));
    assert_true(near(pl.stages[1].load, 421.5, 1e-12));
    assert_int_equal(pl.stages[0].tail, 1);
    assert_int_equal(pl.stages[1].head, 1);
    tsr_pp_plan_free(&pl);
    /* a cut that leaves "out" (a consumer of the shared node) outside the later part's stage */
    tsr_pp_cut_t two[2] = {{1, 2}, {2, 0}};
    assert_int_equal(tsr_pp_evaluate_shared(pp, two, 2, &pl), TSR_EINVAL); /* 3 stages, 2 devices */
    assert_int_equal(tsr_pp_device(pp, "d2", 0, 1000, NULL), 0);
    assert_int_equal(tsr_pp_evaluate_shared(pp, two, 2, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "consumer of shared node \"mid\""));
    tsr_pp_cut_t units[1] = {{1, 4}};
    assert_int_equal(tsr_pp_evaluate_shared(pp, units, 1, &pl), TSR_EINVAL);
    tsr_pp_cut_t order[2] = {{2, 0}, {1, 0}};
    assert_int_equal(tsr_pp_evaluate_shared(pp, order, 2, &pl), TSR_EINVAL);
    tsr_pp_free(pp);
    /* the node order must be a topological order */
    assert_int_equal(tsr_pp_create(1, &pp), 0);
    assert_int_equal(tsr_pp_node(pp, "a", c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_node(pp, "b", c, INFINITY, 0, NULL), 0);
    assert_int_equal(tsr_pp_edge(pp, 1, 0, 8), 0);
    assert_int_equal(tsr_pp_device(pp, "d0", 0, 1000, NULL), 0);
    assert_int_equal(tsr_pp_solve_shared(pp, NULL, &pl), TSR_EINVAL);
    assert_non_null(strstr(tsr_errmsg(), "\"b\" -> \"a\" goes backwards"));
    tsr_pp_free(pp);
}


/* ---------------------------------------------------------- the command */

/* Run `tessera ARGS` (stderr joined); its output in buf, its exit status returned. */
static int run_cli(const char *args, char *buf, size_t cap)
{
    return tsr_test_run_cli(TSR_CLI, args, buf, cap);
}

static double period_of(const char *out, const char *label)
{
    const char *p = strstr(out, label);
    if (!p || !(p = strstr(p, "period ")))
        fail_msg("no \"%s\" row in:\n%s", label, out);
    return strtod(p + 7, NULL);
}

static void test_cli(void **state)
{
    (void)state;
    static char out[65536];
    /* ResNet-18 over 2 devices (its kernels from the cache after a first run): the plan, and the optimum no
     * worse than the baselines */
    int rc = run_cli("plan --net resnet18 --devices 2", out, sizeof out);
    if (rc)
        fail_msg("exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "plan (dp, contiguous): 2 stages"));
    assert_non_null(strstr(out, "throughput"));
    double dp = period_of(out, "optimal (dp)"), eq = period_of(out, "equal-MAC"), gr = period_of(out, "greedy"),
           one = period_of(out, "\n  one device ");
    assert_true(dp > 0 && dp <= eq && dp <= gr && dp < one);
    assert_true(one / dp > 1.5); /* two devices: well above one (the costs split evenly enough) */
    /* refusals: one line naming the device / node / limit, exit 1; usage errors exit 2 */
    assert_int_equal(run_cli("plan --net resnet18 --devices 65", out, sizeof out), 1);
    assert_non_null(strstr(out, "65 devices, above the limit of 64"));
    assert_int_equal(run_cli("plan --net resnet18 --devices 2 --dram 1", out, sizeof out), 1);
    assert_non_null(strstr(out, "node \"layer4.0.conv1\" needs"));
    assert_int_equal(run_cli("plan --net resnet18 --devices 2 --dram 5", out, sizeof out), 1);
    assert_non_null(strstr(out, "bytes of DRAM, the 2 devices have"));
    assert_int_equal(run_cli("plan --net vgg", out, sizeof out), 2);
    assert_int_equal(run_cli("plan --net resnet18 --link-bw 0", out, sizeof out), 2);
    assert_int_equal(run_cli("plan --net resnet18 --ilp --ilp-time 0", out, sizeof out), 2);
    assert_non_null(strstr(out, "--ilp-time needs seconds"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain),         cmocka_unit_test(test_long_chain),   cmocka_unit_test(test_diamond),      cmocka_unit_test(test_host_only),
        cmocka_unit_test(test_dram_split),    cmocka_unit_test(test_refusals),     cmocka_unit_test(test_dp_vs_brute),
        cmocka_unit_test(test_ilp_vs_brute),  cmocka_unit_test(test_split_vs_brute), cmocka_unit_test(test_split_refusals),  cmocka_unit_test(test_shared_vs_brute),
        cmocka_unit_test(test_shared_refusals), cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
