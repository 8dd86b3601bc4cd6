/* tsr_pipeplan: the pipeline placement planner (tsr_pipeplan.h has the
 * model). Internally the nodes are renumbered in a topological order, so
 * that "index order" is a topological order: the DP's enumeration of a
 * stage below an ideal removes nodes in decreasing index, which is then
 * always a legal removal order, and every stage is met exactly once. */
#include "tsr_pipeplan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_jitutil.h"

typedef struct {
    char name[48];
    double cost[TSR_PP_MAX_KINDS];
    double host;
    uint64_t mem, in_bytes, out_bytes;
    double macs;
    double *scost;                          /* split parts: [r * nkinds + k] one part's cost (INFINITY: no), or NULL */
    int units;                              /* shared boundary split: units (0/1: not shared) */
    double *ucost;                          /* [(u - 1) * nkinds + k]: u units' cost, u = 1..units-1 */
    double uextra[TSR_PP_MAX_KINDS];        /* added to the later part's stage */
    uint64_t smem[TSR_PP_MAX_SPLIT + 1];    /* one part's footprint */
} pp_node_t;

typedef struct {
    char name[48];
    int kind;
    uint64_t dram;
} pp_dev_t;

typedef struct {
    int from, to;
    uint64_t bytes;
} pp_edge_t;

struct tsr_pp {
    int nkinds;
    pp_node_t *nodes;
    int nn, capn;
    pp_edge_t *edges;
    int ne, cape;
    pp_dev_t devs[TSR_PP_MAX_DEVICES + 1]; /* one more than allowed, so that K too large is refused by check */
    int nd;
    int too_many_devices;                  /* devices added past the array */
    double bw, lat;
    int host_stages;
};

int tsr_pp_create(int nkinds, tsr_pp_t **out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "plan: NULL result");
    *out = NULL;
    if (nkinds < 1 || nkinds > TSR_PP_MAX_KINDS)
        return tsr_err(TSR_EINVAL, "plan: %d device kinds, need 1..%d", nkinds, TSR_PP_MAX_KINDS);
    tsr_pp_t *pp = calloc(1, sizeof *pp);
    if (!pp)
        return tsr_err(TSR_ENOMEM, "out of memory");
    pp->nkinds = nkinds;
    pp->bw = 8;
    pp->host_stages = 1;
    *out = pp;
    return TSR_OK;
}

void tsr_pp_free(tsr_pp_t *pp)
{
    if (!pp)
        return;
    for (int v = 0; v < pp->nn; v++) {
        free(pp->nodes[v].scost);
        free(pp->nodes[v].ucost);
    }
    free(pp->nodes);
    free(pp->edges);
    free(pp);
}

int tsr_pp_node(tsr_pp_t *pp, const char *name, const double *cost, double host_cost, uint64_t mem, int *id)
{
    if (!pp || !cost)
        return tsr_err(TSR_EINVAL, "plan: NULL problem or costs");
    if (pp->nn >= TSR_PP_MAX_NODES)
        return tsr_err(TSR_EINVAL, "plan: more than %d nodes", TSR_PP_MAX_NODES);
    /* Bounds that keep every sum exact enough and finite: a finite cost that summed to INFINITY would read
     * as "cannot run", and footprints that wrapped around 2^64 as "fits". */
    for (int k = 0; k < pp->nkinds; k++)
        if (isnan(cost[k]) || cost[k] < 0 || (isfinite(cost[k]) && cost[k] > TSR_PP_MAX_COST))
            return tsr_err(TSR_EINVAL, "plan: node \"%s\": cost on kind %d is %g, need 0..%g or INFINITY",
                           name ? name : "", k, cost[k], TSR_PP_MAX_COST);
    if (isnan(host_cost) || host_cost < 0 || (isfinite(host_cost) && host_cost > TSR_PP_MAX_COST))
        return tsr_err(TSR_EINVAL, "plan: node \"%s\": host cost %g, need 0..%g or INFINITY", name ? name : "",
                       host_cost, TSR_PP_MAX_COST);
    if (mem > TSR_PP_MAX_BYTES)
        return tsr_err(TSR_EINVAL, "plan: node \"%s\": footprint %llu bytes, above %llu", name ? name : "",
                       (unsigned long long)mem, (unsigned long long)TSR_PP_MAX_BYTES);
    if (pp->nn == pp->capn) {
        int cap = pp->capn ? 2 * pp->capn : 64;
        pp_node_t *v = realloc(pp->nodes, (size_t)cap * sizeof *v);
        if (!v)
            return tsr_err(TSR_ENOMEM, "out of memory");
        pp->nodes = v;
        pp->capn = cap;
    }
    pp_node_t *n = &pp->nodes[pp->nn];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", name && *name ? name : "?");
    for (int k = 0; k < pp->nkinds; k++)
        n->cost[k] = cost[k];
    n->host = host_cost;
    n->mem = mem;
    if (id)
        *id = pp->nn;
    pp->nn++;
    return TSR_OK;
}

int tsr_pp_node_split(tsr_pp_t *pp, int node, int parts, const double *cost, uint64_t mem)
{
    if (!pp || !cost || node < 0 || node >= pp->nn)
        return tsr_err(TSR_EINVAL, "plan: split of node %d: no such node", node);
    pp_node_t *n = &pp->nodes[node];
    if (parts < 2 || parts > TSR_PP_MAX_SPLIT)
        return tsr_err(TSR_EINVAL, "plan: node \"%s\": split into %d parts, need 2..%d", n->name, parts,
                       TSR_PP_MAX_SPLIT);
    for (int k = 0; k < pp->nkinds; k++)
        if (isnan(cost[k]) || cost[k] < 0 || (isfinite(cost[k]) && cost[k] > TSR_PP_MAX_COST))
            return tsr_err(TSR_EINVAL, "plan: node \"%s\": part cost on kind %d is %g, need 0..%g or INFINITY",
                           n->name, k, cost[k], TSR_PP_MAX_COST);
    if (mem > TSR_PP_MAX_BYTES)
        return tsr_err(TSR_EINVAL, "plan: node \"%s\": part footprint %llu bytes, above %llu", n->name,
                       (unsigned long long)mem, (unsigned long long)TSR_PP_MAX_BYTES);
    if (!n->scost) {
        n->scost = malloc(sizeof(double) * (size_t)(TSR_PP_MAX_SPLIT + 1) * (size_t)pp->nkinds);
        if (!n->scost)
            return tsr_err(TSR_ENOMEM, "out of memory");
        for (int i = 0; i < (TSR_PP_MAX_SPLIT + 1) * pp->nkinds; i++)
            n->scost[i] = INFINITY;
    }
    for (int k = 0; k < pp->nkinds; k++)
        n->scost[parts * pp->nkinds + k] = cost[k];
    n->smem[parts] = mem;
    return TSR_OK;
}

/* One part's cycles of node v split in r on kind k (INFINITY: not splittable so). */
static double split_cost(const tsr_pp_t *pp, int v, int r, int k)
{
    const pp_node_t *n = &pp->nodes[v];
    return r >= 2 && r <= TSR_PP_MAX_SPLIT && n->scost ? n->scost[r * pp->nkinds + k] : INFINITY;
}

int tsr_pp_node_io(tsr_pp_t *pp, int node, uint64_t in_bytes, uint64_t out_bytes)
{
    if (!pp || node < 0 || node >= pp->nn)
        return tsr_err(TSR_EINVAL, "plan: no node %d", node);
    if (in_bytes > TSR_PP_MAX_BYTES || out_bytes > TSR_PP_MAX_BYTES)
        return tsr_err(TSR_EINVAL, "plan: node \"%s\": graph input/output bytes above %llu", pp->nodes[node].name,
                       (unsigned long long)TSR_PP_MAX_BYTES);
    pp->nodes[node].in_bytes = in_bytes;
    pp->nodes[node].out_bytes = out_bytes;
    return TSR_OK;
}

int tsr_pp_node_macs(tsr_pp_t *pp, int node, double macs)
{
    if (!pp || node < 0 || node >= pp->nn || !(macs >= 0))
        return tsr_err(TSR_EINVAL, "plan: no node %d or MACs not >= 0", node);
    pp->nodes[node].macs = macs;
    return TSR_OK;
}

int tsr_pp_edge(tsr_pp_t *pp, int from, int to, uint64_t bytes)
{
    if (!pp || from < 0 || from >= pp->nn || to < 0 || to >= pp->nn)
        return tsr_err(TSR_EINVAL, "plan: edge %d -> %d names no node", from, to);
    if (from == to)
        return tsr_err(TSR_EINVAL, "plan: edge from node \"%s\" to itself", pp->nodes[from].name);
    if (bytes > TSR_PP_MAX_BYTES)
        return tsr_err(TSR_EINVAL, "plan: edge \"%s\" -> \"%s\": %llu bytes, above %llu", pp->nodes[from].name,
                       pp->nodes[to].name, (unsigned long long)bytes, (unsigned long long)TSR_PP_MAX_BYTES);
    if (pp->ne >= 8 * TSR_PP_MAX_NODES)
        return tsr_err(TSR_EINVAL, "plan: more than %d edges", 8 * TSR_PP_MAX_NODES);
    if (pp->ne == pp->cape) {
        int cap = pp->cape ? 2 * pp->cape : 128;
        pp_edge_t *v = realloc(pp->edges, (size_t)cap * sizeof *v);
        if (!v)
            return tsr_err(TSR_ENOMEM, "out of memory");
        pp->edges = v;
        pp->cape = cap;
    }
    pp->edges[pp->ne++] = (pp_edge_t){from, to, bytes};
    return TSR_OK;
}

int tsr_pp_device(tsr_pp_t *pp, const char *name, int kind, uint64_t dram, int *id)
{
    if (!pp)
        return tsr_err(TSR_EINVAL, "plan: NULL problem");
    if (kind < 0 || kind >= pp->nkinds)
        return tsr_err(TSR_EINVAL, "plan: device \"%s\": kind %d, have %d kinds", name ? name : "", kind,
                       pp->nkinds);
    if (pp->nd > TSR_PP_MAX_DEVICES) { /* refused by tsr_pp_check with the count */
        pp->too_many_devices++;
        if (id)
            *id = -1;
        return TSR_OK;
    }
    pp_dev_t *d = &pp->devs[pp->nd];
    if (name && *name)
        snprintf(d->name, sizeof d->name, "%s", name);
    else
        snprintf(d->name, sizeof d->name, "dev%d", pp->nd);
    d->kind = kind;
    d->dram = dram;
    if (id)
        *id = pp->nd;
    pp->nd++;
    return TSR_OK;
}

int tsr_pp_set_link(tsr_pp_t *pp, double bytes_per_cycle, double latency)
{
    if (!pp || !(bytes_per_cycle > 0) || isinf(bytes_per_cycle) || !(latency >= 0) || isinf(latency))
        return tsr_err(TSR_EINVAL, "plan: link needs bytes per cycle > 0 and latency >= 0, finite");
    pp->bw = bytes_per_cycle;
    pp->lat = latency;
    return TSR_OK;
}

int tsr_pp_set_host_stages(tsr_pp_t *pp, int n)
{
    if (!pp || n < 0 || n > TSR_PP_MAX_HOST_STAGES)
        return tsr_err(TSR_EINVAL, "plan: host stages %d, need 0..%d", n, TSR_PP_MAX_HOST_STAGES);
    pp->host_stages = n;
    return TSR_OK;
}

int tsr_pp_nnodes(const tsr_pp_t *pp) { return pp ? pp->nn : 0; }
int tsr_pp_ndevices(const tsr_pp_t *pp) { return pp ? pp->nd : 0; }
int tsr_pp_nslots(const tsr_pp_t *pp) { return pp ? pp->nd + pp->host_stages : 0; }
const char *tsr_pp_node_name(const tsr_pp_t *pp, int v) { return pp && v >= 0 && v < pp->nn ? pp->nodes[v].name : "?"; }
double tsr_pp_node_cost(const tsr_pp_t *pp, int v, int k)
{
    return pp && v >= 0 && v < pp->nn && k >= 0 && k < pp->nkinds ? pp->nodes[v].cost[k] : NAN;
}
const char *tsr_pp_device_name(const tsr_pp_t *pp, int d) { return pp && d >= 0 && d < pp->nd ? pp->devs[d].name : "?"; }

/* ------------------------------------------------------------ the graph */

/* The problem in the form the solvers use: topological numbering, adjacency
 * lists, per-node transfer costs. */
typedef struct {
    const tsr_pp_t *pp;
    int n;
    int *topo;         /* topo[i] = the problem's node at position i */
    int *pos;          /* pos[v] = position of problem node v */
    int *soff, *succ;  /* successors (positions), CSR, duplicates removed */
    int *poff, *pred;  /* predecessors */
    double *c;         /* c(v): link latency + largest out-edge bytes / bw (0 without consumers) */
    uint64_t *cbytes;  /* the bytes of that */
    double *hio;       /* graph inputs and outputs over the link (devices only) */
    double *hin, *hout;
} pp_graph_t;

static void graph_free(pp_graph_t *g)
{
    free(g->topo);
    free(g->pos);
    free(g->soff);
    free(g->succ);
    free(g->poff);
    free(g->pred);
    free(g->c);
    free(g->cbytes);
    free(g->hio);
    free(g->hin);
    free(g->hout);
    memset(g, 0, sizeof *g);
}

static double xfer_cycles(const tsr_pp_t *pp, uint64_t bytes) { return pp->lat + (double)bytes / pp->bw; }

static int graph_build(const tsr_pp_t *pp, pp_graph_t *g)
{
    memset(g, 0, sizeof *g);
    int n = pp->nn, ne = pp->ne;
    g->pp = pp;
    g->n = n;
    g->topo = malloc(sizeof(int) * (size_t)(n + 1));
    g->pos = malloc(sizeof(int) * (size_t)(n + 1));
    g->soff = calloc((size_t)n + 1, sizeof(int));
    g->poff = calloc((size_t)n + 1, sizeof(int));
    g->succ = malloc(sizeof(int) * (size_t)(ne + 1));
    g->pred = malloc(sizeof(int) * (size_t)(ne + 1));
    g->c = calloc((size_t)n + 1, sizeof(double));
    g->cbytes = calloc((size_t)n + 1, sizeof(uint64_t));
    g->hio = calloc((size_t)n + 1, sizeof(double));
    g->hin = calloc((size_t)n + 1, sizeof(double));
    g->hout = calloc((size_t)n + 1, sizeof(double));
    int *indeg = calloc((size_t)n + 1, sizeof(int));
    int *tmp = calloc((size_t)n + 1, sizeof(int));
    int *eoff = calloc((size_t)n + 1, sizeof(int)), *eto = malloc(sizeof(int) * (size_t)(ne + 1));
    if (!g->topo || !g->pos || !g->soff || !g->poff || !g->succ || !g->pred || !g->c || !g->cbytes || !g->hio ||
        !g->hin || !g->hout || !indeg || !tmp || !eoff || !eto) {
        free(indeg), free(tmp), free(eoff), free(eto);
        graph_free(g);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    /* Kahn over the problem's edges (in problem numbering), smallest index first among ready nodes is not
     * needed: any topological order is fine. */
    for (int e = 0; e < ne; e++)
        eoff[pp->edges[e].from]++;
    for (int v = 0, s = 0; v < n; v++) {
        int d = eoff[v];
        eoff[v] = s;
        s += d;
    }
    for (int e = 0; e < ne; e++) {
        int f = pp->edges[e].from;
        eto[eoff[f] + tmp[f]++] = pp->edges[e].to;
        indeg[pp->edges[e].to]++;
    }
    int head = 0, tail = 0;
    for (int v = 0; v < n; v++)
        if (!indeg[v])
            g->topo[tail++] = v;
    while (head < tail) {
        int v = g->topo[head++];
        for (int i = 0; i < tmp[v]; i++)
            if (!--indeg[eto[eoff[v] + i]])
                g->topo[tail++] = eto[eoff[v] + i];
    }
    if (tail < n) {
        int v = 0;
        while (v < n && !indeg[v])
            v++;
        free(indeg), free(tmp), free(eoff), free(eto);
        const char *nm = pp->nodes[v].name;
        graph_free(g);
        return tsr_err(TSR_EINVAL, "plan: the graph has a cycle through node \"%s\"", nm);
    }
    free(indeg), free(tmp), free(eoff), free(eto);
    for (int i = 0; i < n; i++)
        g->pos[g->topo[i]] = i;
    /* successors and predecessors in positions, duplicates merged (largest bytes) */
    int *cnt = calloc((size_t)n + 1, sizeof(int));
    if (!cnt) {
        graph_free(g);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    for (int e = 0; e < ne; e++) {
        int f = g->pos[pp->edges[e].from];
        if (pp->edges[e].bytes > g->cbytes[f])
            g->cbytes[f] = pp->edges[e].bytes;
        g->soff[f + 1]++;
        g->poff[g->pos[pp->edges[e].to] + 1]++;
    }
    for (int i = 0; i < n; i++) {
        g->soff[i + 1] += g->soff[i];
        g->poff[i + 1] += g->poff[i];
    }
    for (int e = 0; e < ne; e++) {
        int f = g->pos[pp->edges[e].from], t = g->pos[pp->edges[e].to];
        g->succ[g->soff[f] + cnt[f]++] = t;
    }
    memset(cnt, 0, sizeof(int) * (size_t)(n + 1));
    for (int e = 0; e < ne; e++) {
        int f = g->pos[pp->edges[e].from], t = g->pos[pp->edges[e].to];
        g->pred[g->poff[t] + cnt[t]++] = f;
    }
    free(cnt);
    /* remove duplicate entries (two edges between the same nodes) by compacting each list */
    for (int pass = 0; pass < 2; pass++) {
        int *off = pass ? g->poff : g->soff, *adj = pass ? g->pred : g->succ;
        int w = 0;
        for (int v = 0; v < n; v++) {
            int b = off[v], e = off[v + 1];
            off[v] = w;
            for (int i = b; i < e; i++) {
                int dup = 0;
                for (int j = off[v]; j < w; j++)
                    dup |= adj[j] == adj[i];
                if (!dup)
                    adj[w++] = adj[i];
            }
        }
        off[n] = w;
    }
    for (int i = 0; i < n; i++) {
        const pp_node_t *nd = &pp->nodes[g->topo[i]];
        g->c[i] = g->soff[i + 1] > g->soff[i] ? xfer_cycles(pp, g->cbytes[i]) : 0;
        g->hin[i] = nd->in_bytes ? xfer_cycles(pp, nd->in_bytes) : 0;
        g->hout[i] = nd->out_bytes ? xfer_cycles(pp, nd->out_bytes) : 0;
        g->hio[i] = g->hin[i] + g->hout[i];
    }
    return TSR_OK;
}

/* Cost of (problem) node v on slot s. */
static double slot_cost(const tsr_pp_t *pp, int v, int s)
{
    return s < pp->nd ? pp->nodes[v].cost[pp->devs[s].kind] : pp->nodes[v].host;
}

int tsr_pp_check(const tsr_pp_t *pp)
{
    if (!pp)
        return tsr_err(TSR_EINVAL, "plan: NULL problem");
    if (pp->too_many_devices || pp->nd > TSR_PP_MAX_DEVICES)
        return tsr_err(TSR_EINVAL, "plan: %d devices, above the limit of %d", pp->nd + pp->too_many_devices,
                       TSR_PP_MAX_DEVICES);
    if (!pp->nn)
        return tsr_err(TSR_EINVAL, "plan: the graph has no nodes");
    if (!pp->nd && !pp->host_stages)
        return tsr_err(TSR_EINVAL, "plan: no devices and no host stages");
    for (int v = 0; v < pp->nn; v++) {
        const pp_node_t *n = &pp->nodes[v];
        int host = pp->host_stages > 0 && isfinite(n->host);
        int runs = 0, fits = 0, biggest = -1;
        for (int d = 0; d < pp->nd; d++) {
            int whole = isfinite(n->cost[pp->devs[d].kind]), part = 0;
            for (int r = 2; r <= TSR_PP_MAX_SPLIT; r++) /* its parts (an intra-layer split) may fit where it does not */
                part |= isfinite(split_cost(pp, v, r, pp->devs[d].kind)) && n->smem[r] <= pp->devs[d].dram;
            if (n->units > 1) { /* or its two parts over a shared boundary (the larger is at least half) */
                uint64_t q = (uint64_t)n->units, half = (n->mem * ((q + 1) / 2) + q - 1) / q;
                part |= isfinite(n->ucost[(size_t)((q + 1) / 2 - 1) * (size_t)pp->nkinds + (size_t)pp->devs[d].kind]) &&
                        half <= pp->devs[d].dram;
            }
            if (!whole && !part)
                continue;
            runs = 1;
            fits |= (whole && n->mem <= pp->devs[d].dram) || part;
            if (biggest < 0 || pp->devs[d].dram > pp->devs[biggest].dram)
                biggest = d;
        }
        if (!runs && !host)
            return tsr_err(TSR_EINVAL, "plan: node \"%s\": no device and not the host can run it", n->name);
        if (runs && !fits && !host)
            return tsr_err(TSR_EINVAL,
                           "plan: node \"%s\" needs %llu bytes of DRAM, more than device \"%s\" (the largest that "
                           "can run it) has (%llu), and the host cannot run it",
                           n->name, (unsigned long long)n->mem, pp->devs[biggest].name,
                           (unsigned long long)pp->devs[biggest].dram);
    }
    pp_graph_t g;
    int rc = graph_build(pp, &g); /* the cycle check */
    if (rc)
        return rc;
    graph_free(&g);
    return TSR_OK;
}

/* ------------------------------------------------------------ evaluation */

void tsr_pp_plan_free(tsr_pp_plan_t *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nstages; i++)
        free(p->stages[i].nodes);
    free(p->stages);
    free(p->xfers);
    free(p->slot);
    memset(p, 0, sizeof *p);
}

/* Evaluate slot[] (problem numbering) over g. With strict, a node on a slot
 * that cannot run it or a stage over its device's DRAM is an error; else
 * the period is INFINITY. */
static int evaluate(const pp_graph_t *g, const int *slot, const int *parts, const int *xslots, int strict,
                    tsr_pp_plan_t *out)
{
    const tsr_pp_t *pp = g->pp;
    int n = g->n, ns = tsr_pp_nslots(pp);
    memset(out, 0, sizeof *out);
    out->slot = malloc(sizeof(int) * (size_t)n);
    double *comp = calloc((size_t)ns, sizeof(double)), *cin = calloc((size_t)ns, sizeof(double)),
           *cout = calloc((size_t)ns, sizeof(double));
    uint64_t *mem = calloc((size_t)ns, sizeof(uint64_t));
    int *cnt = calloc((size_t)ns, sizeof(int)), *order = malloc(sizeof(int) * (size_t)ns),
        *sidx = malloc(sizeof(int) * (size_t)ns), *seen = malloc(sizeof(int) * (size_t)ns),
        *spart = calloc((size_t)ns, sizeof(int)), *sowner = malloc(sizeof(int) * (size_t)ns);
    char *adj = calloc((size_t)ns * (size_t)ns, 1);
    int rc = TSR_OK;
    if (!out->slot || !comp || !cin || !cout || !mem || !cnt || !order || !sidx || !seen || !adj || !spart ||
        !sowner) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto done;
    }
    int infeasible = 0;
    for (int s = 0; s < ns; s++)
        sowner[s] = -1;
    /* split nodes first: each holds its devices alone */
    for (int v = 0; v < n && parts; v++) {
        int r = parts[v], s = slot[v];
        if (r == 1)
            continue;
        if (r < 2 || r > TSR_PP_MAX_SPLIT || s < 0 || s >= pp->nd) {
            rc = tsr_err(TSR_EINVAL, "plan: node \"%s\": split into %d parts on slot %d (need 2..%d parts on a device)",
                         pp->nodes[v].name, r, s, TSR_PP_MAX_SPLIT);
            goto done;
        }
        for (int j = 0; j < r; j++) {
            int x = j ? xslots[v * TSR_PP_MAX_SPLIT + j - 1] : s;
            if (x < 0 || x >= pp->nd || sowner[x] >= 0 || pp->devs[x].kind != pp->devs[s].kind ||
                pp->devs[x].dram != pp->devs[s].dram) {
                rc = tsr_err(TSR_EINVAL,
                             "plan: node \"%s\": part %d of its split on slot %d: not a free device of the class of "
                             "device \"%s\"",
                             pp->nodes[v].name, j, x, pp->devs[s].name);
                goto done;
            }
            sowner[x] = v;
        }
        spart[s] = r;
    }
    for (int v = 0; v < n; v++) {
        int s = slot[v];
        if (s < 0 || s >= ns) {
            rc = tsr_err(TSR_EINVAL, "plan: node \"%s\" on slot %d, have %d", pp->nodes[v].name, s, ns);
            goto done;
        }
        if (sowner[s] >= 0 && sowner[s] != v) {
            rc = tsr_err(TSR_EINVAL, "plan: node \"%s\" on device \"%s\", which runs a part of split node \"%s\"",
                         pp->nodes[v].name, pp->devs[s].name, pp->nodes[sowner[s]].name);
            goto done;
        }
        out->slot[v] = s;
        int r = parts ? parts[v] : 1;
        if (r > 1) { /* one part: its compute, the whole input, its slice of any graph output */
            double cst = split_cost(pp, v, r, pp->devs[s].kind);
            if (!isfinite(cst)) {
                if (strict) {
                    rc = tsr_err(TSR_EINVAL, "plan: node \"%s\" cannot be split into %d parts on device \"%s\"",
                                 pp->nodes[v].name, r, pp->devs[s].name);
                    goto done;
                }
                infeasible = 1;
            }
            comp[s] += cst;
            cnt[s]++;
            mem[s] += pp->nodes[v].smem[r];
            int i = g->pos[v];
            cin[s] += g->hin[i];
            cout[s] += pp->nodes[v].out_bytes ? pp->lat + (double)pp->nodes[v].out_bytes / r / pp->bw : 0;
            continue;
        }
        double cst = slot_cost(pp, v, s);
        if (!isfinite(cst)) {
            if (strict) {
                rc = tsr_err(TSR_EINVAL, "plan: node \"%s\" placed on %s%s, which cannot run it", pp->nodes[v].name,
                             s < pp->nd ? "device " : "the host", s < pp->nd ? pp->devs[s].name : "");
                goto done;
            }
            infeasible = 1;
        }
        comp[s] += cst;
        cnt[s]++;
        if (s < pp->nd) {
            mem[s] += pp->nodes[v].mem;
            int i = g->pos[v];
            cin[s] += g->hin[i];
            cout[s] += g->hout[i];
        }
    }
    /* transfers: for each producer, once on its side, once per receiving slot */
    int *mark = seen; /* per slot: last producer that sent there */
    for (int s = 0; s < ns; s++)
        mark[s] = -1;
    int nx = 0, capx = 0;
    for (int i = 0; i < n; i++) {
        int u = g->topo[i], su = slot[u], sent = 0;
        for (int j = g->soff[i]; j < g->soff[i + 1]; j++) {
            int w = g->topo[g->succ[j]], sw = slot[w];
            if (sw == su || mark[sw] == i)
                continue;
            mark[sw] = i;
            cin[sw] += g->c[i];
            adj[(size_t)su * (size_t)ns + (size_t)sw] = 1;
            sent = 1;
            if (nx == capx) {
                capx = capx ? 2 * capx : 16;
                tsr_pp_xfer_t *x = realloc(out->xfers, sizeof *x * (size_t)capx);
                if (!x) {
                    rc = tsr_err(TSR_ENOMEM, "out of memory");
                    goto done;
                }
                out->xfers = x;
            }
            out->xfers[nx++] = (tsr_pp_xfer_t){u, su, sw, g->cbytes[i]};
        }
        if (sent) /* a split node sends its slice (the host concatenates) */
            cout[su] += spart[su] ? pp->lat + (double)g->cbytes[i] / spart[su] / pp->bw : g->c[i];
    }
    out->nxfers = nx;
    for (int s = 0; s < pp->nd; s++)
        if (mem[s] > pp->devs[s].dram) {
            if (strict) {
                rc = tsr_err(TSR_EINVAL, "plan: the stage on device \"%s\" needs %llu bytes of DRAM, it has %llu",
                             pp->devs[s].name, (unsigned long long)mem[s], (unsigned long long)pp->devs[s].dram);
                goto done;
            }
            infeasible = 1;
        }
    /* stage order: Kahn over the slots' quotient graph (slot order among ready ones); contiguous iff acyclic */
    int nst = 0;
    for (int s = 0; s < ns; s++)
        nst += cnt[s] > 0;
    {
        int *indeg = mem ? (int *)calloc((size_t)ns, sizeof(int)) : NULL;
        if (!indeg) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            goto done;
        }
        for (int a = 0; a < ns; a++)
            for (int b = 0; b < ns; b++)
                indeg[b] += adj[(size_t)a * (size_t)ns + (size_t)b];
        int k = 0;
        for (int s = 0; s < ns; s++)
            seen[s] = 0;
        for (;;) {
            int pick = -1;
            for (int s = 0; s < ns && pick < 0; s++)
                if (cnt[s] && !seen[s] && !indeg[s])
                    pick = s;
            if (pick < 0)
                break;
            seen[pick] = 1;
            order[k++] = pick;
            for (int b = 0; b < ns; b++)
                indeg[b] -= adj[(size_t)pick * (size_t)ns + (size_t)b];
        }
        out->contiguous = k == nst;
        for (int s = 0; s < ns; s++) /* the rest (a cycle) in slot order */
            if (cnt[s] && !seen[s])
                order[k++] = s;
        free(indeg);
    }
    out->stages = calloc((size_t)(nst ? nst : 1), sizeof *out->stages);
    if (!out->stages) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto done;
    }
    out->nstages = nst;
    double period = 0, lat = 0;
    for (int k = 0; k < nst; k++) {
        int s = order[k];
        sidx[s] = k;
        tsr_pp_stage_t *st = &out->stages[k];
        st->slot = s;
        st->parts = spart[s] ? spart[s] : 1;
        st->slots[0] = s;
        if (spart[s]) {
            int v = sowner[s];
            for (int j = 1; j < spart[s]; j++)
                st->slots[j] = xslots[v * TSR_PP_MAX_SPLIT + j - 1];
        }
        st->nodes = malloc(sizeof(int) * (size_t)cnt[s]);
        if (!st->nodes) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            goto done;
        }
        st->compute = comp[s];
        st->comm_in = cin[s];
        st->comm_out = cout[s];
        st->load = comp[s] + cin[s] + cout[s];
        st->mem = mem[s];
        period = fmax(period, st->load);
        lat += st->load;
    }
    for (int i = 0; i < n; i++) {
        int v = g->topo[i];
        tsr_pp_stage_t *st = &out->stages[sidx[slot[v]]];
        st->nodes[st->nnodes++] = v;
    }
    for (int x = 0; x < nx; x++) {
        out->xfers[x].from = sidx[out->xfers[x].from];
        out->xfers[x].to = sidx[out->xfers[x].to];
    }
    out->period = infeasible ? INFINITY : period;
    out->latency = infeasible ? INFINITY : lat;
    snprintf(out->method, sizeof out->method, "given");
done:
    free(comp), free(cin), free(cout), free(mem), free(cnt), free(order), free(sidx), free(seen), free(adj);
    free(spart), free(sowner);
    if (rc)
        tsr_pp_plan_free(out);
    return rc;
}

int tsr_pp_evaluate(const tsr_pp_t *pp, const int *slot, tsr_pp_plan_t *out)
{
    if (!out || !slot)
        return tsr_err(TSR_EINVAL, "plan: NULL placement or result");
    memset(out, 0, sizeof *out);
    int rc = tsr_pp_check(pp);
    if (rc)
        return rc;
    pp_graph_t g;
    if ((rc = graph_build(pp, &g)))
        return rc;
    rc = evaluate(&g, slot, NULL, NULL, 1, out);
    graph_free(&g);
    return rc;
}

int tsr_pp_evaluate_split(const tsr_pp_t *pp, const int *slot, const int *parts, const int *xslots,
                          tsr_pp_plan_t *out)
{
    if (!out || !slot || (parts && !xslots))
        return tsr_err(TSR_EINVAL, "plan: NULL placement, split devices or result");
    memset(out, 0, sizeof *out);
    int rc = tsr_pp_check(pp);
    if (rc)
        return rc;
    pp_graph_t g;
    if ((rc = graph_build(pp, &g)))
        return rc;
    rc = evaluate(&g, slot, parts, xslots, 1, out);
    graph_free(&g);
    return rc;
}

/* ------------------------------------------------------------ the DP over ideals */

/* Device classes: devices of one kind and DRAM are interchangeable; the
 * host's stages are one more class. The DP's state counts the stages used
 * per class (mixed radix). */
typedef struct {
    int ncls;
    int kind[TSR_PP_MAX_DEVICES + 1]; /* -1: host */
    uint64_t dram[TSR_PP_MAX_DEVICES + 1];
    int count[TSR_PP_MAX_DEVICES + 1];
    int stride[TSR_PP_MAX_DEVICES + 1];
    int nstates;
    unsigned char *digit;             /* [cls][state]: stages of class cls used in state */
} pp_classes_t;

typedef struct {
    const pp_graph_t *g;
    const pp_classes_t *cl;
    int W;               /* 64-bit words per ideal */
    uint64_t *bits;      /* ideals' bitsets, W words each (positions) */
    uint64_t nid, capid, max_ideals;
    uint32_t *hash;      /* open addressing: ideal id + 1, 0 empty */
    uint64_t hcap;
    int64_t *dhead;      /* per ideal: first down edge (ideal minus one maximal node), -1 none */
    int64_t *dnext;
    int32_t *dnode, *dto;
    uint64_t nde, capde;
    /* the DP */
    int mode;            /* 0: minimise the largest load; 1: minimise the sum with loads <= bound */
    double ub;           /* loads above are not considered */
    double *val;         /* [ideal][state] */
    int32_t *bprev;      /* mode 1: the smaller ideal */
    int16_t *bcls;       /* mode 1: the class of the stage */
    int8_t *bpart;       /* mode 1: its parts (1, or a split stage's) */
    int max_split;       /* 0/1: no intra-layer split */
    double *scost;       /* [(position * (TSR_PP_MAX_SPLIT + 1) + r) * ncls + class]: one part's cost */
    uint64_t *smem;      /* [position * (TSR_PP_MAX_SPLIT + 1) + r]: one part's footprint */
    /* the stage enumeration below the current ideal */
    const uint64_t *cur; /* its bitset */
    uint64_t curid;
    int *cnt;            /* per position: consumers in the stage */
    double *cost;        /* [class][position]: cost (INFINITY: cannot) */
    uint64_t *mem;       /* per position */
    double *ncbuf;       /* [depth][class]: the stage's compute sums at each depth of the enumeration */
} pp_dp_t;

static uint64_t hash_bits(const uint64_t *b, int W)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < W; i++) {
        h ^= b[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

static int dp_grow_hash(pp_dp_t *d)
{
    uint64_t cap = d->hcap ? 2 * d->hcap : 1024;
    uint32_t *h = calloc(cap, sizeof *h);
    if (!h)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (uint64_t id = 0; id < d->nid; id++) {
        uint64_t k = hash_bits(d->bits + id * (uint64_t)d->W, d->W) & (cap - 1);
        while (h[k])
            k = (k + 1) & (cap - 1);
        h[k] = (uint32_t)(id + 1);
    }
    free(d->hash);
    d->hash = h;
    d->hcap = cap;
    return TSR_OK;
}

/* The id of ideal b, adding it when new (*added). -1 with the error set. */
static int64_t dp_ideal(pp_dp_t *d, const uint64_t *b, int *added)
{
    *added = 0;
    uint64_t k = hash_bits(b, d->W) & (d->hcap - 1);
    while (d->hash[k]) {
        uint64_t id = d->hash[k] - 1;
        if (!memcmp(d->bits + id * (uint64_t)d->W, b, sizeof(uint64_t) * (size_t)d->W))
            return (int64_t)id;
        k = (k + 1) & (d->hcap - 1);
    }
    if (d->nid >= d->max_ideals) {
        tsr_err(TSR_EINVAL,
                "plan: the graph has more than %llu ideals (downsets): too wide for the exact planner; use the "
                "heuristic (tsr_pp_solve_baseline, greedy) or raise the limit",
                (unsigned long long)d->max_ideals);
        return -1;
    }
    if (d->nid == d->capid) {
        uint64_t cap = d->capid ? 2 * d->capid : 256;
        uint64_t *nb = realloc(d->bits, cap * (uint64_t)d->W * sizeof(uint64_t));
        int64_t *nh = realloc(d->dhead, cap * sizeof(int64_t));
        if (nb)
            d->bits = nb;
        if (nh)
            d->dhead = nh;
        if (!nb || !nh) {
            tsr_err(TSR_ENOMEM, "out of memory (%llu ideals)", (unsigned long long)d->nid);
            return -1;
        }
        d->capid = cap;
    }
    uint64_t id = d->nid++;
    memcpy(d->bits + id * (uint64_t)d->W, b, sizeof(uint64_t) * (size_t)d->W);
    d->dhead[id] = -1;
    d->hash[k] = (uint32_t)(id + 1);
    *added = 1;
    if (2 * d->nid > d->hcap && dp_grow_hash(d))
        return -1;
    return (int64_t)id;
}

static int dp_add_down(pp_dp_t *d, uint64_t from, int node, uint64_t to)
{
    if (d->nde == d->capde) {
        uint64_t cap = d->capde ? 2 * d->capde : 1024;
        int64_t *nx = realloc(d->dnext, cap * sizeof(int64_t));
        if (nx)
            d->dnext = nx;
        int32_t *nn = realloc(d->dnode, cap * sizeof(int32_t));
        if (nn)
            d->dnode = nn;
        int32_t *nt = realloc(d->dto, cap * sizeof(int32_t));
        if (nt)
            d->dto = nt;
        if (!nx || !nn || !nt)
            return tsr_err(TSR_ENOMEM, "out of memory");
        d->capde = cap;
    }
    d->dnode[d->nde] = node;
    d->dto[d->nde] = (int32_t)to;
    d->dnext[d->nde] = d->dhead[from];
    d->dhead[from] = (int64_t)d->nde++;
    return TSR_OK;
}

#define BIT(b, i) (((b)[(i) >> 6] >> ((i)&63)) & 1u)

/* Every ideal, breadth first from the empty one (so by size: an ideal's
 * sub-ideals come before it), with its down edges. */
static int dp_ideals(pp_dp_t *d)
{
    const pp_graph_t *g = d->g;
    int n = g->n;
    if (dp_grow_hash(d))
        return TSR_ENOMEM;
    uint64_t *b = calloc((size_t)d->W, sizeof(uint64_t));
    if (!b)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int added;
    if (dp_ideal(d, b, &added) < 0) {
        free(b);
        return TSR_ENOMEM;
    }
    for (uint64_t id = 0; id < d->nid; id++) {
        for (int v = 0; v < n; v++) {
            const uint64_t *cur = d->bits + id * (uint64_t)d->W; /* may move as ideals are added */
            if (BIT(cur, v))
                continue;
            int ok = 1;
            for (int j = g->poff[v]; j < g->poff[v + 1] && ok; j++)
                ok = BIT(cur, g->pred[j]);
            if (!ok)
                continue;
            memcpy(b, cur, sizeof(uint64_t) * (size_t)d->W);
            b[v >> 6] |= 1ull << (v & 63);
            int64_t up = dp_ideal(d, b, &added);
            if (up < 0 || dp_add_down(d, (uint64_t)up, v, id)) {
                free(b);
                return up < 0 ? (int)TSR_EINVAL : TSR_ENOMEM;
            }
        }
    }
    free(b);
    return TSR_OK;
}

/* The stage S = cur \ ideal(sub) has just been extended; sums are its
 * compute per class, comm (sends + receives), hio (graph io), mem.
 * Relax every class and state of the current ideal from sub. */
static void dp_relax(pp_dp_t *d, uint64_t sub, const double *comp, double comm, double hio, uint64_t mem)
{
    const pp_classes_t *cl = d->cl;
    int S = cl->nstates;
    double *to = d->val + d->curid * (uint64_t)S;
    const double *from = d->val + sub * (uint64_t)S;
    for (int c = 0; c < cl->ncls; c++) {
        if (!isfinite(comp[c]) || (cl->kind[c] >= 0 && mem > cl->dram[c]))
            continue;
        double load = comp[c] + comm + (cl->kind[c] >= 0 ? hio : 0);
        if (load > d->ub)
            continue;
        const unsigned char *dg = cl->digit + (size_t)c * (size_t)S;
        int stride = cl->stride[c];
        for (int st = 0; st < S; st++) {
            if (!dg[st])
                continue;
            double pv = from[st - stride];
            if (!isfinite(pv))
                continue;
            double v = d->mode ? pv + load : pv > load ? pv : load; /* (fmax is a libm call here) */
            if (v < to[st]) {
                to[st] = v;
                if (d->mode) {
                    d->bprev[d->curid * (uint64_t)S + (uint64_t)st] = (int32_t)sub;
                    d->bcls[d->curid * (uint64_t)S + (uint64_t)st] = (int16_t)c;
                    d->bpart[d->curid * (uint64_t)S + (uint64_t)st] = 1;
                }
            }
        }
    }
}

/* The stage {v} = cur \ ideal(sub) as a split stage: v in r parts on r
 * devices of one class, each part's load the part's compute, the whole
 * input (each device receives it), its slice of v's output and of any graph
 * output; the r devices run side by side, so the stage's load is one
 * part's, and it uses r devices of the class. */
static void dp_relax_split(pp_dp_t *d, uint64_t sub, int v)
{
    const pp_graph_t *g = d->g;
    const tsr_pp_t *pp = g->pp;
    const pp_classes_t *cl = d->cl;
    int S = cl->nstates;
    double recv = 0;
    for (int j = g->poff[v]; j < g->poff[v + 1]; j++)
        recv += g->c[g->pred[j]];
    uint64_t ob = pp->nodes[g->topo[v]].out_bytes;
    double *to = d->val + d->curid * (uint64_t)S;
    const double *from = d->val + sub * (uint64_t)S;
    for (int c = 0; c < cl->ncls; c++) {
        if (cl->kind[c] < 0)
            continue;
        for (int r = 2; r <= d->max_split && r <= cl->count[c]; r++) {
            size_t ix = (size_t)v * (TSR_PP_MAX_SPLIT + 1) + (size_t)r;
            double cst = d->scost[ix * (size_t)cl->ncls + (size_t)c];
            if (!isfinite(cst) || d->smem[ix] > cl->dram[c])
                continue;
            double load = cst + recv + g->hin[v];
            if (g->soff[v + 1] > g->soff[v])
                load += pp->lat + (double)g->cbytes[v] / r / pp->bw;
            if (ob)
                load += pp->lat + (double)ob / r / pp->bw;
            if (load > d->ub)
                continue;
            const unsigned char *dg = cl->digit + (size_t)c * (size_t)S;
            int back = r * cl->stride[c];
            for (int st = 0; st < S; st++) {
                if (dg[st] < r)
                    continue;
                double pv = from[st - back];
                if (!isfinite(pv))
                    continue;
                double nv = d->mode ? pv + load : pv > load ? pv : load;
                if (nv < to[st]) {
                    to[st] = nv;
                    if (d->mode) {
                        d->bprev[d->curid * (uint64_t)S + (uint64_t)st] = (int32_t)sub;
                        d->bcls[d->curid * (uint64_t)S + (uint64_t)st] = (int16_t)c;
                        d->bpart[d->curid * (uint64_t)S + (uint64_t)st] = (int8_t)r;
                    }
                }
            }
        }
    }
}

/* Extend the stage below the current ideal: remove from ideal `sub` each
 * maximal node below `last`, update the stage's sums, relax, recurse. The
 * sums are restored from the frame (not subtracted), so no rounding
 * accumulates. */
static void dp_enum(pp_dp_t *d, uint64_t sub, int last, int depth, const double *comp, double comm, double hio,
                    uint64_t mem)
{
    const pp_graph_t *g = d->g;
    const pp_classes_t *cl = d->cl;
    double *nc = d->ncbuf + (size_t)depth * (size_t)cl->ncls; /* this depth's sums (a small frame: deep chains) */
    for (int64_t e = d->dhead[sub]; e >= 0; e = d->dnext[e]) {
        int v = d->dnode[e];
        if (v >= last)
            continue;
        uint64_t below = (uint64_t)d->dto[e];
        if (depth == 0 && d->max_split >= 2) /* a stage of v alone: also split (before the prune below) */
            dp_relax_split(d, below, v);
        double lb = INFINITY;
        uint64_t nm = mem + d->mem[v];
        for (int c = 0; c < cl->ncls; c++) {
            nc[c] = comp[c] + d->cost[(size_t)c * (size_t)g->n + (size_t)v];
            if ((cl->kind[c] < 0 || nm <= cl->dram[c]) && nc[c] < lb)
                lb = nc[c];
        }
        if (lb > d->ub) /* only grows as the stage grows: nothing below here can be used */
            continue;
        double ncomm = comm;
        int leaves = 0; /* a consumer outside the current ideal: v's output leaves the stage */
        for (int j = g->soff[v]; j < g->soff[v + 1] && !leaves; j++)
            leaves = !BIT(d->cur, g->succ[j]);
        if (leaves)
            ncomm += g->c[v];
        if (d->cnt[v]) /* v was received by the stage; now it is in it */
            ncomm -= g->c[v];
        for (int j = g->poff[v]; j < g->poff[v + 1]; j++)
            if (!d->cnt[g->pred[j]]++)
                ncomm += g->c[g->pred[j]];
        double nh = hio + g->hio[v];
        dp_relax(d, below, nc, ncomm, nh, nm);
        dp_enum(d, below, v, depth + 1, nc, ncomm, nh, nm);
        for (int j = g->poff[v]; j < g->poff[v + 1]; j++)
            d->cnt[g->pred[j]]--;
    }
}

static void dp_run(pp_dp_t *d)
{
    const pp_classes_t *cl = d->cl;
    int S = cl->nstates;
    double zero[TSR_PP_MAX_DEVICES + 1] = {0};
    for (uint64_t i = 0; i < d->nid * (uint64_t)S; i++)
        d->val[i] = INFINITY;
    d->val[0] = 0; /* the empty ideal, no stage used */
    for (uint64_t id = 1; id < d->nid; id++) {
        d->cur = d->bits + id * (uint64_t)d->W;
        d->curid = id;
        dp_enum(d, id, d->g->n, 0, zero, 0, 0, 0);
    }
}

static int classes_build(const tsr_pp_t *pp, pp_classes_t *cl)
{
    memset(cl, 0, sizeof *cl);
    for (int dv = 0; dv < pp->nd; dv++) {
        int c = 0;
        while (c < cl->ncls && !(cl->kind[c] == pp->devs[dv].kind && cl->dram[c] == pp->devs[dv].dram))
            c++;
        if (c == cl->ncls) {
            cl->kind[c] = pp->devs[dv].kind;
            cl->dram[c] = pp->devs[dv].dram;
            cl->ncls++;
        }
        cl->count[c]++;
    }
    int host_runs = 0; /* a host that can run nothing is no class (half the states, no dead loop) */
    for (int v = 0; v < pp->nn && !host_runs; v++)
        host_runs = isfinite(pp->nodes[v].host);
    if (pp->host_stages && host_runs) {
        cl->kind[cl->ncls] = -1;
        cl->count[cl->ncls++] = pp->host_stages;
    }
    double states = 1;
    for (int c = 0; c < cl->ncls; c++) {
        cl->stride[c] = (int)states;
        states *= cl->count[c] + 1;
    }
    if (states > 65536)
        return tsr_err(TSR_EINVAL,
                       "plan: %d device classes (kind, DRAM) give %.0f stage-count states, above 65536: use "
                       "fewer distinct configs",
                       cl->ncls, states);
    cl->nstates = (int)states;
    cl->digit = malloc((size_t)(unsigned)cl->ncls * (size_t)(unsigned)cl->nstates);
    if (!cl->digit)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int c = 0; c < cl->ncls; c++)
        for (int st = 0; st < cl->nstates; st++)
            cl->digit[(size_t)c * (size_t)cl->nstates + (size_t)st] =
                (unsigned char)((st / cl->stride[c]) % (cl->count[c] + 1));
    return TSR_OK;
}

static void dp_free(pp_dp_t *d)
{
    free(d->bits), free(d->hash), free(d->dhead), free(d->dnext), free(d->dnode), free(d->dto);
    free(d->bpart), free(d->scost), free(d->smem);
    free(d->val), free(d->bprev), free(d->bcls), free(d->cnt), free(d->cost), free(d->mem), free(d->ncbuf);
}

/* Why no contiguous split exists, for the refusal: the first node in
 * topological order whose footprint no device can hold, else a general line. */
static int dp_infeasible(const tsr_pp_t *pp, const pp_graph_t *g)
{
    uint64_t total = 0, dram = 0;
    for (int i = 0; i < g->n; i++)
        if (!(pp->host_stages && isfinite(pp->nodes[g->topo[i]].host)))
            total += pp->nodes[g->topo[i]].mem;
    for (int dv = 0; dv < pp->nd; dv++)
        dram += pp->devs[dv].dram;
    if (total > dram)
        return tsr_err(TSR_EINVAL,
                       "plan: the nodes the host cannot run need %llu bytes of DRAM, the %d devices have %llu in all",
                       (unsigned long long)total, pp->nd, (unsigned long long)dram);
    return tsr_err(TSR_EINVAL,
                   "plan: no contiguous split fits the devices' DRAM with %d devices and %d host stages (try more "
                   "devices, or the ILP for non-contiguous splits)",
                   pp->nd, pp->host_stages);
}

int tsr_pp_solve_dp(const tsr_pp_t *pp, const tsr_pp_opts_t *opts, tsr_pp_plan_t *out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "plan: NULL result");
    memset(out, 0, sizeof *out);
    int rc = tsr_pp_check(pp);
    if (rc)
        return rc;
    uint64_t t0 = tsr_mono_ns();
    pp_graph_t g;
    if ((rc = graph_build(pp, &g)))
        return rc;
    pp_classes_t cl;
    pp_dp_t d;
    memset(&d, 0, sizeof d);
    int *slot = NULL, *parts = NULL, *xslots = NULL;
    if ((rc = classes_build(pp, &cl)))
        goto done;
    int n = g.n;
    d.max_split = opts ? opts->max_split : 0;
    if (d.max_split < 0 || d.max_split > TSR_PP_MAX_SPLIT) {
        rc = tsr_err(TSR_EINVAL, "plan: intra-layer split into %d parts, need 0..%d", d.max_split, TSR_PP_MAX_SPLIT);
        goto done;
    }
    if (d.max_split >= 2 && d.max_split > pp->nd) {
        rc = tsr_err(TSR_EINVAL, "plan: intra-layer split into up to %d parts, but only %d devices", d.max_split,
                     pp->nd);
        goto done;
    }
    if (n > TSR_PP_MAX_DP_NODES) { /* the enumeration recurses once per node of a stage */
        rc = tsr_err(TSR_EINVAL, "plan: %d nodes, above the exact planner's %d: use the heuristic "
                                 "(tsr_pp_solve_baseline, greedy)", n, TSR_PP_MAX_DP_NODES);
        goto done;
    }
    d.g = &g;
    d.cl = &cl;
    d.W = (n + 63) / 64;
    d.max_ideals = opts && opts->max_ideals ? opts->max_ideals : TSR_PP_MAX_IDEALS;
    if ((rc = dp_ideals(&d)))
        goto done;
    if (d.nid * (uint64_t)cl.nstates > 50000000ull) {
        rc = tsr_err(TSR_EINVAL,
                     "plan: %llu ideals x %d stage-count states is above 5e7 table entries: use fewer devices or "
                     "configs, or the heuristic (tsr_pp_solve_baseline, greedy)",
                     (unsigned long long)d.nid, cl.nstates);
        goto done;
    }
    size_t cells = (size_t)d.nid * (size_t)cl.nstates;
    d.val = malloc(cells * sizeof(double));
    d.bprev = malloc(cells * sizeof(int32_t));
    d.bcls = malloc(cells * sizeof(int16_t));
    d.bpart = malloc(cells * sizeof(int8_t));
    d.scost = malloc((size_t)n * (TSR_PP_MAX_SPLIT + 1) * (size_t)cl.ncls * sizeof(double));
    d.smem = malloc((size_t)n * (TSR_PP_MAX_SPLIT + 1) * sizeof(uint64_t));
    d.cnt = calloc((size_t)n, sizeof(int));
    d.cost = malloc((size_t)cl.ncls * (size_t)n * sizeof(double));
    d.mem = malloc((size_t)n * sizeof(uint64_t));
    d.ncbuf = malloc((size_t)(n + 1) * (size_t)cl.ncls * sizeof(double));
    slot = malloc((size_t)n * sizeof(int));
    if (!d.val || !d.bprev || !d.bcls || !d.bpart || !d.scost || !d.smem || !d.cnt || !d.cost || !d.mem ||
        !d.ncbuf || !slot) {
        rc = tsr_err(TSR_ENOMEM, "out of memory (DP table of %zu entries)", cells);
        goto done;
    }
    /* per class and position: the cost; the lower bound of a first upper bound */
    double lbsum = 0, lbmax = 0, total = 0;
    for (int i = 0; i < n; i++) {
        const pp_node_t *nd = &pp->nodes[g.topo[i]];
        d.mem[i] = nd->mem;
        double best = INFINITY;
        for (int c = 0; c < cl.ncls; c++) {
            double x = cl.kind[c] >= 0 ? nd->cost[cl.kind[c]] : nd->host;
            d.cost[(size_t)c * (size_t)n + (size_t)i] = x;
            best = fmin(best, x);
            if (isfinite(x))
                total += x;
        }
        for (int r = 0; r <= TSR_PP_MAX_SPLIT; r++) {
            size_t ix = (size_t)i * (TSR_PP_MAX_SPLIT + 1) + (size_t)r;
            d.smem[ix] = nd->smem[r];
            for (int c = 0; c < cl.ncls; c++)
                d.scost[ix * (size_t)cl.ncls + (size_t)c] =
                    cl.kind[c] >= 0 ? split_cost(pp, g.topo[i], r, cl.kind[c]) : INFINITY;
        }
        lbsum += best;
        lbmax = fmax(lbmax, best);
        total += 2 * g.c[i] + g.hio[i];
    }
    int stages = pp->nd;
    for (int i = 0; i < n && pp->host_stages; i++)
        if (isfinite(pp->nodes[i].host)) {
            stages += pp->host_stages;
            break;
        }
    /* Pass 1: the smallest period. Stages whose compute alone exceeds ub are
     * not enumerated (the enumeration's bulk): ub starts at the greedy
     * baseline's period (a split that exists, usually within a few percent
     * of the optimum), else a little above the lower bound; when no split
     * fits under ub, ub doubles, and past every finite load it is lifted. */
    double opt = INFINITY, ub0 = fmax(lbsum / (stages ? stages : 1), lbmax) * 1.25 + 1e-9;
    {
        tsr_pp_plan_t gp;
        if (!tsr_pp_solve_baseline(pp, TSR_PP_GREEDY, &gp)) {
            if (isfinite(gp.period) && gp.contiguous)
                ub0 = gp.period * (1 + 1e-9);
            tsr_pp_plan_free(&gp);
        }
        tsr_err_clear();
    }
    d.mode = 0;
    for (double ub = ub0;; ub *= 2) {
        if (ub > total)
            ub = INFINITY;
        d.ub = ub;
        dp_run(&d);
        for (int st = 0; st < cl.nstates; st++)
            opt = fmin(opt, d.val[(d.nid - 1) * (uint64_t)cl.nstates + (uint64_t)st]);
        if (isfinite(opt) || isinf(ub))
            break;
    }
    if (!isfinite(opt)) {
        rc = dp_infeasible(pp, &g);
        goto done;
    }
    /* Pass 2: the smallest latency among splits whose every load is within the period. */
    d.mode = 1;
    d.ub = opt * (1 + 1e-12);
    dp_run(&d);
    int best = -1;
    for (int st = 0; st < cl.nstates; st++) {
        double v = d.val[(d.nid - 1) * (uint64_t)cl.nstates + (uint64_t)st];
        if (isfinite(v) && (best < 0 || v < d.val[(d.nid - 1) * (uint64_t)cl.nstates + (uint64_t)best]))
            best = st;
    }
    if (best < 0) { /* cannot happen: pass 1's optimum is a split within the bound */
        rc = tsr_err(TSR_EINVAL, "plan: internal: the latency pass found no split within period %g", opt);
        goto done;
    }
    /* Walk back from the whole graph to the empty ideal, then give the
     * stages devices in pipeline order (a class's devices in index order). */
    int nst = 0, scls[TSR_PP_MAX_DEVICES + TSR_PP_MAX_HOST_STAGES + 1], spart[TSR_PP_MAX_DEVICES + TSR_PP_MAX_HOST_STAGES + 1];
    uint64_t sid[TSR_PP_MAX_DEVICES + TSR_PP_MAX_HOST_STAGES + 1], sprev[TSR_PP_MAX_DEVICES + TSR_PP_MAX_HOST_STAGES + 1];
    for (uint64_t id = d.nid - 1, st = (uint64_t)best; id;) {
        uint64_t cell = id * (uint64_t)cl.nstates + st;
        sid[nst] = id;
        sprev[nst] = (uint64_t)d.bprev[cell];
        scls[nst] = d.bcls[cell];
        spart[nst] = d.bpart[cell];
        st -= (uint64_t)cl.stride[scls[nst]] * (uint64_t)spart[nst];
        id = sprev[nst++];
    }
    int used[TSR_PP_MAX_DEVICES + 1] = {0}, nhost = 0, anysplit = 0;
    parts = malloc(sizeof(int) * (size_t)n);
    xslots = malloc(sizeof(int) * (size_t)n * TSR_PP_MAX_SPLIT);
    if (!parts || !xslots) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto done;
    }
    for (int k = nst - 1; k >= 0; k--) {
        int c = scls[k], s = -1, sl[TSR_PP_MAX_SPLIT];
        if (cl.kind[c] < 0) {
            s = pp->nd + nhost++;
        } else {
            for (int j = 0; j < spart[k]; j++) {
                sl[j] = -1;
                for (int dv = 0; dv < pp->nd && sl[j] < 0; dv++)
                    if (pp->devs[dv].kind == cl.kind[c] && pp->devs[dv].dram == cl.dram[c] && !used[dv])
                        sl[j] = dv;
                used[sl[j]] = 1;
            }
            s = sl[0];
        }
        const uint64_t *a = d.bits + sid[k] * (uint64_t)d.W, *b = d.bits + sprev[k] * (uint64_t)d.W;
        for (int i = 0; i < n; i++)
            if (BIT(a, i) && !BIT(b, i)) {
                int v = g.topo[i];
                slot[v] = s;
                parts[v] = spart[k];
                for (int j = 1; j < spart[k]; j++)
                    xslots[v * TSR_PP_MAX_SPLIT + j - 1] = sl[j];
                anysplit |= spart[k] > 1;
            }
    }
    if ((rc = evaluate(&g, slot, anysplit ? parts : NULL, xslots, 1, out)))
        goto done;
    snprintf(out->method, sizeof out->method, "dp");
    out->ideals = d.nid;
    out->solve_ms = (double)(tsr_mono_ns() - t0) / 1e6;
done:
    free(slot);
    free(parts);
    free(xslots);
    free(cl.digit);
    dp_free(&d);
    graph_free(&g);
    return rc;
}

/* ------------------------------------------------------------ baselines */

int tsr_pp_solve_baseline(const tsr_pp_t *pp, tsr_pp_baseline_e which, tsr_pp_plan_t *out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "plan: NULL result");
    memset(out, 0, sizeof *out);
    if (which != TSR_PP_EQUAL_MACS && which != TSR_PP_GREEDY && which != TSR_PP_SINGLE)
        return tsr_err(TSR_EINVAL, "plan: unknown baseline %d", (int)which);
    int rc = tsr_pp_check(pp);
    if (rc)
        return rc;
    uint64_t t0 = tsr_mono_ns();
    pp_graph_t g;
    if ((rc = graph_build(pp, &g)))
        return rc;
    int n = g.n, K = pp->nd;
    int *slot = malloc(sizeof(int) * (size_t)n);
    if (!slot) {
        graph_free(&g);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    /* host-only nodes (no device kind can run them) on host stage 0 */
    for (int v = 0; v < n; v++) {
        int runs = 0;
        for (int dv = 0; dv < K; dv++)
            runs |= isfinite(pp->nodes[v].cost[pp->devs[dv].kind]);
        slot[v] = runs ? -1 : K;
    }
    if (which == TSR_PP_SINGLE) {
        double bestp = INFINITY;
        int bestd = 0;
        for (int dv = 0; dv < K; dv++) {
            for (int v = 0; v < n; v++)
                if (slot[v] != K || isfinite(pp->nodes[v].cost[pp->devs[dv].kind]))
                    slot[v] = isfinite(pp->nodes[v].cost[pp->devs[dv].kind]) ? dv : K;
            tsr_pp_plan_t p;
            if (!evaluate(&g, slot, NULL, NULL, 0, &p)) {
                if (p.period < bestp)
                    bestp = p.period, bestd = dv;
                tsr_pp_plan_free(&p);
            }
        }
        for (int v = 0; v < n; v++)
            if (slot[v] < K)
                slot[v] = isfinite(pp->nodes[v].cost[pp->devs[bestd].kind]) ? bestd : K;
    } else {
        /* consecutive runs in topological order, one per device in index order */
        double total = 0;
        for (int i = 0; i < n; i++) {
            int v = g.topo[i];
            if (slot[v] == K)
                continue;
            total += which == TSR_PP_EQUAL_MACS ? pp->nodes[v].macs : pp->nodes[v].cost[pp->devs[0].kind];
        }
        double acc = 0;
        int dv = 0;
        for (int i = 0; i < n; i++) {
            int v = g.topo[i];
            if (slot[v] == K)
                continue;
            double w = which == TSR_PP_EQUAL_MACS ? pp->nodes[v].macs : pp->nodes[v].cost[pp->devs[dv].kind];
            if (which == TSR_PP_EQUAL_MACS) {
                /* the node goes to the device whose share its midpoint falls in */
                double mid = acc + w / 2;
                int want = total > 0 ? (int)(mid / total * K) : 0;
                dv = want >= K ? K - 1 : want < dv ? dv : want;
            } else if (acc > 0 && acc + w > total / K * (dv + 1) && dv < K - 1) {
                dv++; /* this device is full: the next one */
            }
            while (!isfinite(pp->nodes[v].cost[pp->devs[dv].kind]) && dv < K - 1)
                dv++;
            slot[v] = isfinite(pp->nodes[v].cost[pp->devs[dv].kind]) ? dv : K;
            acc += w;
        }
    }
    if (pp->host_stages == 0)
        for (int v = 0; v < n; v++)
            if (slot[v] >= K)
                slot[v] = 0; /* evaluate refuses it, naming the node */
    rc = evaluate(&g, slot, NULL, NULL, 0, out);
    if (!rc) {
        static const char *names[] = {"", "equal-macs", "greedy", "single"};
        snprintf(out->method, sizeof out->method, "%s", names[which]);
        out->solve_ms = (double)(tsr_mono_ns() - t0) / 1e6;
    }
    free(slot);
    graph_free(&g);
    return rc;
}

/* ------------------------------------------------------------ the shared boundary split */

int tsr_pp_node_share(tsr_pp_t *pp, int node, int units, const double *ucost, const double *extra)
{
    if (!pp || !ucost || node < 0 || node >= pp->nn)
        return tsr_err(TSR_EINVAL, "plan: shared split of node %d: no such node", node);
    pp_node_t *n = &pp->nodes[node];
    if (units < 2 || units > TSR_PP_MAX_UNITS)
        return tsr_err(TSR_EINVAL, "plan: node \"%s\": shared in %d units, need 2..%d", n->name, units,
                       TSR_PP_MAX_UNITS);
    if (n->out_bytes)
        return tsr_err(TSR_EINVAL, "plan: node \"%s\" writes a graph output: it cannot be shared", n->name);
    for (int i = 0; i < (units - 1) * pp->nkinds; i++)
        if (isnan(ucost[i]) || ucost[i] < 0 || (isfinite(ucost[i]) && ucost[i] > TSR_PP_MAX_COST))
            return tsr_err(TSR_EINVAL, "plan: node \"%s\": cost of %d units on kind %d is %g, need 0..%g or INFINITY",
                           n->name, i / pp->nkinds + 1, i % pp->nkinds, ucost[i], TSR_PP_MAX_COST);
    for (int k = 0; extra && k < pp->nkinds; k++)
        if (!isfinite(extra[k]) || extra[k] < 0 || extra[k] > TSR_PP_MAX_COST)
            return tsr_err(TSR_EINVAL, "plan: node \"%s\": extra cost %g on kind %d, need 0..%g", n->name, extra[k], k,
                           TSR_PP_MAX_COST);
    double *c = malloc(sizeof(double) * (size_t)(units - 1) * (size_t)pp->nkinds);
    if (!c)
        return tsr_err(TSR_ENOMEM, "out of memory");
    memcpy(c, ucost, sizeof(double) * (size_t)(units - 1) * (size_t)pp->nkinds);
    free(n->ucost);
    n->ucost = c;
    n->units = units;
    for (int k = 0; k < pp->nkinds; k++)
        n->uextra[k] = extra ? extra[k] : 0;
    return TSR_OK;
}

int tsr_pp_node_units(const tsr_pp_t *pp, int v)
{
    return pp && v >= 0 && v < pp->nn && pp->nodes[v].units > 1 ? pp->nodes[v].units : 1;
}

/* The problem in index order: successors and predecessors (deduplicated),
 * each node's output bytes (its largest out-edge). */
typedef struct {
    const tsr_pp_t *pp;
    int n;
    int *soff, *succ, *poff, *pred;
    uint64_t *cb;
    int *stamp, tick;  /* receive marks */
} sh_t;

static void sh_free(sh_t *h)
{
    free(h->soff), free(h->succ), free(h->poff), free(h->pred), free(h->cb), free(h->stamp);
    memset(h, 0, sizeof *h);
}

static int sh_build(const tsr_pp_t *pp, sh_t *h)
{
    memset(h, 0, sizeof *h);
    int n = pp->nn, ne = pp->ne;
    h->pp = pp;
    h->n = n;
    h->soff = calloc((size_t)n + 2, sizeof(int));
    h->poff = calloc((size_t)n + 2, sizeof(int));
    h->succ = malloc(sizeof(int) * (size_t)(ne + 1));
    h->pred = malloc(sizeof(int) * (size_t)(ne + 1));
    h->cb = calloc((size_t)n + 1, sizeof(uint64_t));
    h->stamp = calloc((size_t)n + 1, sizeof(int));
    if (!h->soff || !h->poff || !h->succ || !h->pred || !h->cb || !h->stamp) {
        sh_free(h);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    for (int e = 0; e < ne; e++) {
        const pp_edge_t *x = &pp->edges[e];
        if (x->from >= x->to) {
            int f = x->from, t = x->to;
            sh_free(h);
            return tsr_err(TSR_EINVAL,
                           "plan: edge \"%s\" -> \"%s\" goes backwards in the node order: the shared planner needs the "
                           "nodes in a topological order",
                           pp->nodes[f].name, pp->nodes[t].name);
        }
        h->soff[x->from + 2]++;
        h->poff[x->to + 2]++;
        if (x->bytes > h->cb[x->from])
            h->cb[x->from] = x->bytes;
    }
    for (int v = 0; v < n; v++) {
        h->soff[v + 2] += h->soff[v + 1];
        h->poff[v + 2] += h->poff[v + 1];
    }
    for (int e = 0; e < ne; e++) { /* soff[v + 1] is the fill pointer of v, ending at soff[v + 2]'s old start */
        const pp_edge_t *x = &pp->edges[e];
        h->succ[h->soff[x->from + 1]++] = x->to;
        h->pred[h->poff[x->to + 1]++] = x->from;
    }
    /* now soff[v] .. soff[v + 1] is v's list; duplicates are harmless below (marks and "any" tests) */
    return TSR_OK;
}

/* The load of stage [(i0, b0), (i1, b1)) on device d (INFINITY: not a
 * stage: empty, a middle piece, a consumer of its head outside it, a node
 * device d cannot run, over its DRAM). */
typedef struct {
    double compute, cin, cout, load;
    uint64_t mem;
} sh_load_t;

static double sh_slice(const tsr_pp_t *pp, uint64_t bytes, int u, int q)
{
    return xfer_cycles(pp, bytes * (uint64_t)u / (uint64_t)q);
}

#define SH_WHOLE(v) (((v) > i0 || ((v) == i0 && b0 == 0)) && (v) < i1)

static int sh_units(const tsr_pp_t *pp, int v) { return v < pp->nn && pp->nodes[v].units > 1 ? pp->nodes[v].units : 1; }

static double sh_load(sh_t *h, int i0, int b0, int i1, int b1, int d, sh_load_t *o)
{
    const tsr_pp_t *pp = h->pp;
    int k = pp->devs[d].kind;
    memset(o, 0, sizeof *o);
    o->load = INFINITY;
    if (!(i0 < i1 || (i0 == i1 && b0 == 0 && b1 > 0)))
        return INFINITY;
    int head = b0 > 0 ? i0 : -1, tail = b1 > 0 ? i1 : -1;
    double comp = 0, cin = 0, cout = 0;
    uint64_t mem = 0;
    if (head >= 0) {
        const pp_node_t *nh = &pp->nodes[head];
        int q = nh->units;
        for (int j = h->soff[head]; j < h->soff[head + 1]; j++)
            if (!SH_WHOLE(h->succ[j]))
                return INFINITY; /* a consumer of the shared node outside the later part's stage */
        comp += nh->ucost[(size_t)(q - b0 - 1) * (size_t)pp->nkinds + (size_t)k] + nh->uextra[k];
        mem += (nh->mem * (uint64_t)(q - b0) + (uint64_t)q - 1) / (uint64_t)q;
        if (nh->in_bytes)
            cin += xfer_cycles(pp, nh->in_bytes);
        /* the join: the earlier slice received, this part's slice to the host and back */
        cin += sh_slice(pp, h->cb[head], b0, q) + sh_slice(pp, h->cb[head], q - b0, q);
        cout += sh_slice(pp, h->cb[head], q - b0, q);
    }
    if (tail >= 0) {
        const pp_node_t *nt = &pp->nodes[tail];
        int q = nt->units;
        comp += nt->ucost[(size_t)(b1 - 1) * (size_t)pp->nkinds + (size_t)k];
        mem += (nt->mem * (uint64_t)b1 + (uint64_t)q - 1) / (uint64_t)q;
        if (nt->in_bytes)
            cin += xfer_cycles(pp, nt->in_bytes);
        cout += sh_slice(pp, h->cb[tail], b1, q);
    }
    int first = head >= 0 ? i0 + 1 : i0;
    for (int v = first; v < i1; v++) {
        const pp_node_t *nv = &pp->nodes[v];
        comp += nv->cost[k];
        mem += nv->mem;
        if (nv->in_bytes)
            cin += xfer_cycles(pp, nv->in_bytes);
        if (nv->out_bytes)
            cout += xfer_cycles(pp, nv->out_bytes);
        int leaves = 0;
        for (int j = h->soff[v]; j < h->soff[v + 1] && !leaves; j++)
            leaves = !SH_WHOLE(h->succ[j]);
        if (leaves)
            cout += xfer_cycles(pp, h->cb[v]);
    }
    if (!isfinite(comp) || mem > pp->devs[d].dram)
        return INFINITY;
    /* receives: every producer outside the stage (not the head: joined above) read by a member, once */
    h->tick++;
    int lo = head >= 0 ? i0 : first, hi = tail >= 0 ? i1 : i1 - 1;
    for (int v = lo; v <= hi; v++)
        for (int j = h->poff[v]; j < h->poff[v + 1]; j++) {
            int u = h->pred[j];
            if (u == head || SH_WHOLE(u) || h->stamp[u] == h->tick)
                continue;
            h->stamp[u] = h->tick;
            cin += xfer_cycles(pp, h->cb[u]);
        }
    o->compute = comp;
    o->cin = cin;
    o->cout = cout;
    o->mem = mem;
    o->load = comp + cin + cout;
    return o->load;
}
#undef SH_WHOLE

/* The plan of cut positions (ncut + 1 stages; cut j = (cn[j], cu[j])). */
static int sh_plan(sh_t *h, const int *cn, const int *cu, int ncut, tsr_pp_plan_t *out)
{
    const tsr_pp_t *pp = h->pp;
    int n = pp->nn, S = ncut + 1;
    memset(out, 0, sizeof *out);
    out->stages = calloc((size_t)S, sizeof *out->stages);
    out->slot = malloc(sizeof(int) * (size_t)n);
    out->xfers = malloc(sizeof *out->xfers * (size_t)(2 * pp->ne + S + 1));
    if (!out->stages || !out->slot || !out->xfers) {
        tsr_pp_plan_free(out);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    out->nstages = S;
    double period = 0, lat = 0;
    for (int s = 0; s < S; s++) {
        int i0 = s ? cn[s - 1] : 0, b0 = s ? cu[s - 1] : 0, i1 = s < ncut ? cn[s] : n, b1 = s < ncut ? cu[s] : 0;
        sh_load_t L;
        sh_load(h, i0, b0, i1, b1, s, &L);
        tsr_pp_stage_t *st = &out->stages[s];
        st->slot = s;
        st->slots[0] = s;
        st->parts = 1;
        st->head = b0;
        st->tail = b1;
        int last = b1 > 0 ? i1 : i1 - 1;
        st->nodes = malloc(sizeof(int) * (size_t)(last - i0 + 1));
        if (!st->nodes) {
            tsr_pp_plan_free(out);
            return tsr_err(TSR_ENOMEM, "out of memory");
        }
        for (int v = i0; v <= last; v++) { /* (a shared node's slot ends as the later part's stage) */
            st->nodes[st->nnodes++] = v;
            out->slot[v] = s;
        }
        st->compute = L.compute;
        st->comm_in = L.cin;
        st->comm_out = L.cout;
        st->load = L.load;
        st->mem = L.mem;
        period = fmax(period, L.load);
        lat += L.load;
        out->shared |= b0 > 0 || b1 > 0;
    }
    /* transfers: each producer once per stage reading it (a shared node is read by both its parts' stages);
     * a shared node's earlier slice to the later stage */
    int *sa = malloc(sizeof(int) * (size_t)n), *sb = malloc(sizeof(int) * (size_t)n);
    if (!sa || !sb) {
        free(sa), free(sb);
        tsr_pp_plan_free(out);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    for (int v = 0; v < n; v++)
        sa[v] = sb[v] = out->slot[v];
    for (int s = 0; s + 1 < S; s++)
        if (out->stages[s].tail > 0)
            sa[out->stages[s].nodes[out->stages[s].nnodes - 1]] = s;
    int nx = 0;
    for (int s = 0; s < S; s++) {
        tsr_pp_stage_t *st = &out->stages[s];
        for (int j = 0; j < st->nnodes; j++) {
            int u = st->nodes[j];
            if ((j == st->nnodes - 1 && st->tail > 0) || (j == 0 && st->head > 0))
                continue;
            for (int e = h->soff[u]; e < h->soff[u + 1]; e++)
                for (int side = 0; side < 2; side++) {
                    int w = h->succ[e], t = side ? sb[w] : sa[w], dup = t == s;
                    for (int x = 0; x < nx && !dup; x++)
                        dup = out->xfers[x].node == u && out->xfers[x].to == t;
                    if (!dup && nx < 2 * pp->ne + S)
                        out->xfers[nx++] = (tsr_pp_xfer_t){u, s, t, h->cb[u]};
                }
        }
        if (st->tail > 0 && nx < 2 * pp->ne + S) {
            int v = st->nodes[st->nnodes - 1];
            out->xfers[nx++] = (tsr_pp_xfer_t){v, s, s + 1, h->cb[v] * (uint64_t)st->tail / (uint64_t)sh_units(pp, v)};
        }
    }
    free(sa), free(sb);
    out->nxfers = nx;
    out->period = period;
    out->latency = lat;
    out->contiguous = 1;
    snprintf(out->method, sizeof out->method, "given");
    return TSR_OK;
}

int tsr_pp_evaluate_shared(const tsr_pp_t *pp, const tsr_pp_cut_t *cuts, int ncuts, tsr_pp_plan_t *out)
{
    if (!out || (ncuts && !cuts))
        return tsr_err(TSR_EINVAL, "plan: NULL cuts or result");
    memset(out, 0, sizeof *out);
    int rc = tsr_pp_check(pp);
    if (rc)
        return rc;
    if (ncuts < 0 || ncuts + 1 > pp->nd)
        return tsr_err(TSR_EINVAL, "plan: %d cuts make %d stages, there are %d devices", ncuts, ncuts + 1, pp->nd);
    sh_t h;
    if ((rc = sh_build(pp, &h)))
        return rc;
    int *cn = malloc(sizeof(int) * (size_t)(ncuts + 1)), *cu = malloc(sizeof(int) * (size_t)(ncuts + 1));
    if (!cn || !cu)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    for (int j = 0; j < ncuts && !rc; j++) {
        cn[j] = cuts[j].node;
        cu[j] = cuts[j].units;
        if (cn[j] < 0 || cn[j] >= pp->nn || cu[j] < 0 || cu[j] >= sh_units(pp, cn[j]) ||
            (cu[j] == 0 && cn[j] == 0))
            rc = tsr_err(TSR_EINVAL, "plan: cut %d (before node %d, %d units): %s", j, cn[j], cu[j],
                         cn[j] >= 0 && cn[j] < pp->nn && cu[j] > 0 ? "the node has fewer units or is not shared"
                                                                    : "no such position");
    }
    for (int s = 0; s <= ncuts && !rc; s++) {
        int i0 = s ? cn[s - 1] : 0, b0 = s ? cu[s - 1] : 0, i1 = s < ncuts ? cn[s] : pp->nn, b1 = s < ncuts ? cu[s] : 0;
        sh_load_t L;
        if (!isfinite(sh_load(&h, i0, b0, i1, b1, s, &L)))
            rc = tsr_err(TSR_EINVAL,
                         "plan: stage %d (node %d unit %d to node %d unit %d) on device \"%s\" is not a stage: empty or "
                         "out of order, a consumer of shared node \"%s\" outside it, a node the device cannot run, "
                         "or over its DRAM",
                         s, i0, b0, i1, b1, pp->devs[s].name, b0 > 0 ? pp->nodes[i0].name : "-");
    }
    if (!rc)
        rc = sh_plan(&h, cn, cu, ncuts, out);
    free(cn), free(cu);
    sh_free(&h);
    return rc;
}

int tsr_pp_solve_shared(const tsr_pp_t *pp, const tsr_pp_opts_t *opts, tsr_pp_plan_t *out)
{
    (void)opts;
    if (!out)
        return tsr_err(TSR_EINVAL, "plan: NULL result");
    memset(out, 0, sizeof *out);
    int rc = tsr_pp_check(pp);
    if (rc)
        return rc;
    if (!pp->nd)
        return tsr_err(TSR_EINVAL, "plan: the shared planner needs a device");
    for (int v = 0; v < pp->nn; v++) {
        int any = 0;
        for (int d = 0; d < pp->nd; d++)
            any |= isfinite(pp->nodes[v].cost[pp->devs[d].kind]);
        if (!any)
            return tsr_err(TSR_EINVAL, "plan: node \"%s\": no device can run it (the shared planner places device "
                                       "stages only)", pp->nodes[v].name);
    }
    uint64_t t0 = tsr_mono_ns();
    sh_t h;
    if ((rc = sh_build(pp, &h)))
        return rc;
    int n = pp->nn, K = pp->nd;
    /* positions: (v, u) for every node and unit, then the end (n, 0) */
    int P = 1;
    for (int v = 0; v < n; v++)
        P += sh_units(pp, v);
    int *pn = malloc(sizeof(int) * (size_t)P), *pu = malloc(sizeof(int) * (size_t)P);
    double *f = malloc(sizeof(double) * (size_t)(K + 1) * (size_t)P), *g = malloc(sizeof(double) * (size_t)(K + 1) * (size_t)P);
    int *bf = malloc(sizeof(int) * (size_t)(K + 1) * (size_t)P);
    double *wsum = malloc(sizeof(double) * (size_t)(n + 1)); /* prefix sums of the cheapest whole costs (a bound) */
    int *cn = malloc(sizeof(int) * (size_t)(K + 1)), *cu = malloc(sizeof(int) * (size_t)(K + 1));
    if (!pn || !pu || !f || !g || !bf || !wsum || !cn || !cu) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto done;
    }
    for (int v = 0, p = 0; v < n; v++)
        for (int u = 0; u < sh_units(pp, v); u++, p++)
            pn[p] = v, pu[p] = u;
    pn[P - 1] = n, pu[P - 1] = 0;
    wsum[0] = 0;
    for (int v = 0; v < n; v++) {
        double lo = INFINITY;
        for (int d = 0; d < K; d++)
            lo = fmin(lo, pp->nodes[v].cost[pp->devs[d].kind]);
        wsum[v + 1] = wsum[v] + lo;
    }
    /* Two passes: the period (min over plans of the largest load), then the latency (min sum of loads with
     * every load within the period). A stage's load depends on its two cuts and its device only. */
    double period = INFINITY;
    for (int pass = 0; pass < 2; pass++) {
        double *val = pass ? g : f;
        for (size_t i = 0; i < (size_t)(K + 1) * (size_t)P; i++)
            val[i] = INFINITY;
        val[0] = 0; /* zero stages end at position 0 */
        double bound = pass ? period * (1 + 1e-12) + 1e-9 : INFINITY, inc = INFINITY;
        for (int a = 0; a < P - 1; a++) {
            int any = 0;
            for (int j = 0; j < K && !any; j++)
                any = isfinite(val[(size_t)j * (size_t)P + (size_t)a]);
            if (!any)
                continue;
            for (int z = a + 1; z < P; z++) {
                int i0 = pn[a], i1 = pn[z];
                /* the nodes strictly between are whole: their compute only grows with z */
                if (i1 > i0 + 1 && wsum[i1] - wsum[i0 + 1] > fmin(bound, inc))
                    break;
                for (int j = 0; j < K; j++) {
                    double pv = val[(size_t)j * (size_t)P + (size_t)a];
                    if (!isfinite(pv))
                        continue;
                    sh_load_t L;
                    double ld = sh_load(&h, i0, pu[a], i1, pu[z], j, &L);
                    if (!isfinite(ld) || ld > bound)
                        continue;
                    double nv = pass ? pv + ld : fmax(pv, ld);
                    size_t at = (size_t)(j + 1) * (size_t)P + (size_t)z;
                    if (nv < val[at]) {
                        val[at] = nv;
                        if (pass)
                            bf[at] = a;
                    }
                }
            }
            if (!pass) /* an incumbent for the bound: the best complete plan so far (any number of stages) */
                for (int j = 1; j <= K; j++)
                    inc = fmin(inc, f[(size_t)j * (size_t)P + (size_t)(P - 1)]);
        }
        if (!pass) {
            for (int j = 1; j <= K; j++)
                period = fmin(period, f[(size_t)j * (size_t)P + (size_t)(P - 1)]);
            if (!isfinite(period)) {
                rc = tsr_err(TSR_EINVAL, "plan: no interval plan over %d devices fits (a stage over a device's DRAM or "
                                         "with a node its device cannot run)", K);
                goto done;
            }
        }
    }
    int bj = -1;
    for (int j = 1; j <= K; j++)
        if (isfinite(g[(size_t)j * (size_t)P + (size_t)(P - 1)]) &&
            (bj < 0 || g[(size_t)j * (size_t)P + (size_t)(P - 1)] < g[(size_t)bj * (size_t)P + (size_t)(P - 1)]))
            bj = j;
    if (bj < 0) {
        rc = tsr_err(TSR_EINVAL, "plan: the shared planner's latency pass found no plan");
        goto done;
    }
    int z = P - 1;
    for (int j = bj; j > 1; j--) {
        int a = bf[(size_t)j * (size_t)P + (size_t)z];
        cn[j - 2] = pn[a];
        cu[j - 2] = pu[a];
        z = a;
    }
    rc = sh_plan(&h, cn, cu, bj - 1, out);
    if (!rc) {
        snprintf(out->method, sizeof out->method, "shared");
        out->ideals = (uint64_t)P;
        out->solve_ms = (double)(tsr_mono_ns() - t0) / 1e6;
    }
done:
    free(pn), free(pu), free(f), free(g), free(bf), free(wsum), free(cn), free(cu);
    sh_free(&h);
    return rc;
}

/* ------------------------------------------------------------ printing */

double tsr_pp_shared_link_bound(const tsr_pp_plan_t *p)
{
    double t = 0;
    for (int s = 0; p && s < p->nstages; s++)
        t += p->stages[s].comm_in + p->stages[s].comm_out;
    return t;
}

void tsr_pp_print(const tsr_pp_t *pp, const tsr_pp_plan_t *p, double single_period, FILE *f)
{
    fprintf(f, "plan (%s%s): %d stages, period %.0f cycles, latency %.0f cycles%s\n", p->method,
            p->contiguous ? ", contiguous" : ", not contiguous", p->nstages, p->period, p->latency,
            isfinite(p->period) ? "" : " (infeasible: a device's DRAM or a node it cannot run)");
    for (int k = 0; k < p->nstages; k++) {
        const tsr_pp_stage_t *s = &p->stages[k];
        char where[64];
        if (s->slot < pp->nd && s->parts > 1) { /* a split stage: its devices, one part each */
            int w = snprintf(where, sizeof where, "devices ");
            for (int j = 0; j < s->parts && w < (int)sizeof where; j++)
                w += snprintf(where + w, sizeof where - (size_t)w, "%s%s", j ? "+" : "", pp->devs[s->slots[j]].name);
        } else if (s->slot < pp->nd)
            snprintf(where, sizeof where, "device %s", pp->devs[s->slot].name);
        else
            snprintf(where, sizeof where, "host %d", s->slot - pp->nd);
        fprintf(f, "  stage %d  %-14s %4d nodes (%s .. %s)  compute %.0f  in %.0f  out %.0f  load %.0f", k, where,
                s->nnodes, pp->nodes[s->nodes[0]].name, pp->nodes[s->nodes[s->nnodes - 1]].name, s->compute,
                s->comm_in, s->comm_out, s->load);
        if (s->parts > 1)
            fprintf(f, "  (split in %d output-channel parts, per device)", s->parts);
        if (s->head > 0)
            fprintf(f, "  (%s: units %d..%d of %d)", pp->nodes[s->nodes[0]].name, s->head + 1,
                    pp->nodes[s->nodes[0]].units, pp->nodes[s->nodes[0]].units);
        if (s->tail > 0)
            fprintf(f, "  (%s: units 1..%d of %d)", pp->nodes[s->nodes[s->nnodes - 1]].name, s->tail,
                    pp->nodes[s->nodes[s->nnodes - 1]].units);
        if (s->slot < pp->nd)
            fprintf(f, "  DRAM %.1f of %.1f MiB", (double)s->mem / 1048576.0,
                    (double)pp->devs[s->slot].dram / 1048576.0);
        fputc('\n', f);
    }
    uint64_t bytes = 0;
    for (int x = 0; x < p->nxfers; x++)
        bytes += p->xfers[x].bytes;
    fprintf(f, "  transfers: %d between stages, %llu bytes per input", p->nxfers, (unsigned long long)bytes);
    for (int x = 0; x < p->nxfers && x < 12; x++)
        fprintf(f, "%s%s %d->%d %llu B", x ? ", " : ": ", pp->nodes[p->xfers[x].node].name, p->xfers[x].from,
                p->xfers[x].to, (unsigned long long)p->xfers[x].bytes);
    fprintf(f, "%s\n", p->nxfers > 12 ? ", ..." : "");
    if (single_period > 0 && isfinite(single_period) && p->period > 0)
        fprintf(f, "  throughput %.3fx one device (period %.0f vs %.0f cycles)\n", single_period / p->period,
                p->period, single_period);
}

/* ------------------------------------------------------------ the ILP (any split) */

#ifdef TSR_HAVE_GLPK
#include <glpk.h>

int tsr_pp_have_ilp(void) { return 1; }

/* The paper's ILP for the period: x[v][s] binary (v on slot s), o[v][s] >=
 * x[v][s] - x[w][s] and i[v][s] >= x[w][s] - x[v][s] for each edge v->w (v's
 * output leaves / enters slot s), load(s) <= T, DRAM per device, minimise
 * T. The o, i are continuous: only where a load binds do they need to be
 * tight, and the placement found is evaluated with the exact loads. */
int tsr_pp_solve_ilp(const tsr_pp_t *pp, const tsr_pp_opts_t *opts, tsr_pp_plan_t *out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "plan: NULL result");
    memset(out, 0, sizeof *out);
    int rc = tsr_pp_check(pp);
    if (rc)
        return rc;
    int n = pp->nn, ns = tsr_pp_nslots(pp), K = pp->nd;
    if ((long)n * ns > 4096)
        return tsr_err(TSR_EINVAL, "plan: the ILP is for small graphs: %d nodes x %d slots is above 4096 (use the "
                                   "DP for contiguous splits)", n, ns);
    uint64_t t0 = tsr_mono_ns();
    pp_graph_t g;
    if ((rc = graph_build(pp, &g)))
        return rc;
    /* columns: x (n*ns), o (n*ns), i (n*ns), T; 1-based */
    int X = 1, O = X + n * ns, I = O + n * ns, T = I + n * ns, ncol = T;
    size_t cap = 1024, nz = 0;
    int *ia = malloc(sizeof(int) * (cap + 1)), *ja = malloc(sizeof(int) * (cap + 1));
    double *ar = malloc(sizeof(double) * (cap + 1));
    int *slot = malloc(sizeof(int) * (size_t)n);
    glp_prob *lp = glp_create_prob();
    if (!ia || !ja || !ar || !slot) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto done;
    }
#define NZ(r, c, v)                                                                                                  \
    do {                                                                                                             \
        if (nz + 1 > cap) {                                                                                          \
            cap *= 2;                                                                                                \
            int *na = realloc(ia, sizeof(int) * (cap + 1)), *nj = realloc(ja, sizeof(int) * (cap + 1));              \
            double *nr = realloc(ar, sizeof(double) * (cap + 1));                                                   \
            if (na)                                                                                                  \
                ia = na;                                                                                             \
            if (nj)                                                                                                  \
                ja = nj;                                                                                             \
            if (nr)                                                                                                  \
                ar = nr;                                                                                             \
            if (!na || !nj || !nr) {                                                                                 \
                rc = tsr_err(TSR_ENOMEM, "out of memory");                                                           \
                goto done;                                                                                           \
            }                                                                                                        \
        }                                                                                                            \
        nz++;                                                                                                        \
        ia[nz] = (r), ja[nz] = (c), ar[nz] = (v);                                                                    \
    } while (0)
    glp_set_obj_dir(lp, GLP_MIN);
    glp_add_cols(lp, ncol);
    for (int p = 0; p < n; p++) /* positions */
        for (int s = 0; s < ns; s++) {
            int v = g.topo[p];
            int cx = X + p * ns + s;
            glp_set_col_kind(lp, cx, GLP_BV);
            if (!isfinite(slot_cost(pp, v, s)) || (s < K && pp->nodes[v].mem > pp->devs[s].dram))
                glp_set_col_bnds(lp, cx, GLP_FX, 0, 0);
            glp_set_col_bnds(lp, O + p * ns + s, GLP_DB, 0, 1);
            glp_set_col_bnds(lp, I + p * ns + s, GLP_DB, 0, 1);
        }
    glp_set_col_bnds(lp, T, GLP_LO, 0, 0);
    glp_set_obj_coef(lp, T, 1);
    int row = 0;
    for (int p = 0; p < n; p++) { /* each node on one slot */
        row = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, row, GLP_FX, 1, 1);
        for (int s = 0; s < ns; s++)
            NZ(row, X + p * ns + s, 1);
    }
    for (int p = 0; p < n; p++)
        for (int j = g.soff[p]; j < g.soff[p + 1]; j++)
            for (int s = 0; s < ns; s++) {
                int q = g.succ[j];
                row = glp_add_rows(lp, 1); /* x_ps - x_qs - o_ps <= 0 */
                glp_set_row_bnds(lp, row, GLP_UP, 0, 0);
                NZ(row, X + p * ns + s, 1);
                NZ(row, X + q * ns + s, -1);
                NZ(row, O + p * ns + s, -1);
                row = glp_add_rows(lp, 1); /* x_qs - x_ps - i_ps <= 0 */
                glp_set_row_bnds(lp, row, GLP_UP, 0, 0);
                NZ(row, X + q * ns + s, 1);
                NZ(row, X + p * ns + s, -1);
                NZ(row, I + p * ns + s, -1);
            }
    for (int s = 0; s < ns; s++) { /* load(s) - T <= 0 */
        row = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, row, GLP_UP, 0, 0);
        for (int p = 0; p < n; p++) {
            double cst = slot_cost(pp, g.topo[p], s);
            double x = (isfinite(cst) ? cst : 0) + (s < K ? g.hio[p] : 0);
            if (x != 0)
                NZ(row, X + p * ns + s, x);
            if (g.c[p] != 0) {
                NZ(row, O + p * ns + s, g.c[p]);
                NZ(row, I + p * ns + s, g.c[p]);
            }
        }
        NZ(row, T, -1);
        if (s < K) { /* DRAM */
            row = glp_add_rows(lp, 1);
            glp_set_row_bnds(lp, row, GLP_UP, 0, (double)pp->devs[s].dram);
            for (int p = 0; p < n; p++)
                if (pp->nodes[g.topo[p]].mem)
                    NZ(row, X + p * ns + s, (double)pp->nodes[g.topo[p]].mem);
        }
    }
    /* Symmetry: interchangeable slots (devices of one kind and DRAM; the host's stages) are used in order,
     * the later one only by a node after some node of the earlier one: x[p][s'] <= sum_{q<p} x[q][s] for s
     * the previous slot of s' in its class. Every placement has an equivalent one that meets it (sort the
     * class's slots by their first node), so the optimum stays; the solver no longer proves it K! times. */
    for (int s2 = 1; s2 < ns; s2++) {
        int s1 = s2 - 1;
        while (s1 >= 0 && !(s1 >= K && s2 >= K) &&
               !(s1 < K && s2 < K && pp->devs[s1].kind == pp->devs[s2].kind && pp->devs[s1].dram == pp->devs[s2].dram))
            s1--;
        if (s1 < 0)
            continue;
        for (int p = 0; p < n; p++) {
            row = glp_add_rows(lp, 1);
            glp_set_row_bnds(lp, row, GLP_UP, 0, 0);
            NZ(row, X + p * ns + s2, 1);
            for (int q = 0; q < p; q++)
                NZ(row, X + q * ns + s1, -1);
        }
    }
#undef NZ
    glp_load_matrix(lp, (int)nz, ia, ja, ar);
    glp_term_out(GLP_OFF);
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    double lim = opts && opts->time_limit_s > 0 ? opts->time_limit_s : 60;
    parm.tm_lim = (int)(lim * 1000);
    int r = glp_intopt(lp, &parm);
    int st = glp_mip_status(lp);
    if (st == GLP_NOFEAS || (r == GLP_ENOPFS)) {
        rc = tsr_err(TSR_EINVAL, "plan: no placement fits the devices' DRAM (ILP infeasible)");
        goto done;
    }
    if (r || st != GLP_OPT) {
        rc = tsr_err(TSR_ETIMEOUT, "plan: the ILP proved no optimum within %g s (GLPK status %d, code %d)", lim, st,
                     r);
        goto done;
    }
    for (int p = 0; p < n; p++) {
        slot[g.topo[p]] = 0;
        for (int s = 0; s < ns; s++)
            if (glp_mip_col_val(lp, X + p * ns + s) > 0.5)
                slot[g.topo[p]] = s;
    }
    if ((rc = evaluate(&g, slot, NULL, NULL, 1, out)))
        goto done;
    snprintf(out->method, sizeof out->method, "ilp");
    out->solve_ms = (double)(tsr_mono_ns() - t0) / 1e6;
done:
    glp_delete_prob(lp);
    free(ia), free(ja), free(ar), free(slot);
    graph_free(&g);
    return rc;
}
#else
int tsr_pp_have_ilp(void) { return 0; }

int tsr_pp_solve_ilp(const tsr_pp_t *pp, const tsr_pp_opts_t *opts, tsr_pp_plan_t *out)
{
    (void)pp, (void)opts;
    if (out)
        memset(out, 0, sizeof *out);
    return tsr_err(TSR_EBACKEND, "plan: the ILP planner was built without GLPK (install libglpk-dev and rebuild)");
}
#endif
