/*
 * tsr_pipenet: networks as problems for the pipeline placement planner
 * (tsr_pipeplan.h). A network description (tsr_netdesc.h: ResNet-18 from
 * its generator, ResNet-50's shapes from here) becomes a planner graph whose
 * node costs are the JIT's own estimates: every operator is planned on a
 * device of each kind (a config; fsim is enough, nothing runs) and its
 * cost-model figure taken (conv2d and dense: plan.cost, the tiling search's
 * estimate; pool: plan.cost; add/clip: est_cycles; an activation table,
 * which has no estimate: its bytes over the DRAM port), converted to cycles
 * of the first kind's clock. A node's footprint is its packed weights and
 * constants plus its output tensor; an edge carries the producer's output
 * tensor; the network input and output go to and from the host.
 *
 * Also the random network-shaped DAGs of the planner's benchmark.
 */
#ifndef TSR_PIPENET_H
#define TSR_PIPENET_H

#include <stdint.h>

#include "tsr_config.h"
#include "tsr_netdesc.h"
#include "tsr_pipeplan.h"

/* ResNet-50 (ImageNet shape, batch n) as a description of shapes and
 * parameters only (no weights unless tsr_pipenet_resnet50_weights adds them;
 * per-tensor requantization).
 * Free with tsr_pipenet_desc_free. */
int tsr_pipenet_resnet50_desc(int n, tsr_netdesc_t *out);
void tsr_pipenet_desc_free(tsr_netdesc_t *nd);
/* (Added for the pipelined executor.) Seeded random int8 weights in -8..8
 * for every conv and the FC of tsr_pipenet_resnet50_desc's description (no
 * bias), so the graph runtime can run it: the fixed requantization then
 * keeps most activations inside their range. Freed by tsr_pipenet_desc_free. */
int tsr_pipenet_resnet50_weights(tsr_netdesc_t *nd, uint64_t seed);

/* The planner's problem for nd over nkinds device kinds cfgs[0..nkinds)
 * (costs as above, from an fsim device per kind), no devices added yet.
 * *plan_ms gets the time the JIT took (NULL: not wanted). */
int tsr_pipenet_problem(const tsr_netdesc_t *nd, const tsr_config_t *cfgs, int nkinds, tsr_pp_t **out,
                        double *plan_ms);

/* (Added for the pipelined executor.) The same problem with the node costs
 * given: cost[v * nkinds + k] is node v's cycles on kind k in that kind's
 * clock (a calibration run, tsr_pipex_calibrate); footprints, edges and
 * the operators' checks as above. */
int tsr_pipenet_problem_costs(const tsr_netdesc_t *nd, const tsr_config_t *cfgs, int nkinds, const double *cost,
                              tsr_pp_t **out);

/* (Issue 26: host operators between device segments.) Host nodes: work the
 * host runs between device nodes (an imported model's host operators between
 * two device segments). Host node h reads network tensor in_t[h] and, when
 * in2_t is given and in2_t[h] >= 0, in2_t[h] (tensors a node of nd or an
 * earlier host node produces, or tensor 0) and writes out_t[h], a tensor no
 * node of nd produces; run(ctx, h, in, in2, out) computes it on the host (in2
 * NULL for one input; the executor calls it from one thread at a time per h). cycles[h] is its measured host time
 * converted to cycles of the first config's clock (the host model: its
 * thread's CPU time x clock x scale, tsr_pipenet_host_cycles).
 * In the planner's problem host node h is node nd->nnodes + h: on the host
 * (a host stage: its own thread) it costs cycles[h]; merged into a device's
 * stage (run on that stage's host thread while its device waits) it costs
 * cycles[h] plus the link of its inputs (device to host) and of its output
 * (host to device), latency + bytes / bytes_per_cycle each; no DRAM. */
typedef int (*tsr_pipenet_host_fn)(void *ctx, int h, const void *in, const void *in2, void *out);
typedef struct tsr_pipenet_host {
    int n;                     /* host nodes (0: none) */
    const char *const *names;  /* n names (the plan and errors print them) */
    const int *in_t, *out_t;   /* network tensors */
    const int *in2_t;          /* NULL, or per node a second input tensor (-1: none) */
    const double *cycles;      /* the host model's cycles per run (first config's clock) */
    double scale;              /* the host model's slowdown (0 or 1: this host's speed; S: a host S times slower,
                                  e.g. an embedded core): measured times are multiplied by it too */
    tsr_pipenet_host_fn run;
    void *ctx;
} tsr_pipenet_host_t;
/* The host model: ns nanoseconds of host time as cycles of a clock of
 * clock_mhz MHz. The time is the calling thread's CPU time
 * (tsr_pipenet_host_clock_ns), not wall time: on a loaded machine other
 * processes' time slices would count otherwise (a machine whose host runs
 * only the pipeline has the same). */
double tsr_pipenet_host_cycles(double ns, double clock_mhz);
uint64_t tsr_pipenet_host_clock_ns(void);
/* tsr_pipenet_problem[_costs] (cost NULL: the JIT's estimates) with host
 * nodes: nodes 0..nd->nnodes-1 as there, then the host nodes, and the edges
 * through them (a tensor a host node writes is no graph input). The link
 * (bytes per cycle, latency) prices a merged host node's transfers; the
 * caller sets the same link on the problem. Refused (TSR_EINVAL, naming the
 * host node): a tensor out of range, an out_t that a node of nd produces or
 * another host node writes, a host node reading its own output, a negative
 * or non-finite cost. */
int tsr_pipenet_problem_host(const tsr_netdesc_t *nd, const tsr_pipenet_host_t *host, double link_bw,
                             double link_lat, const tsr_config_t *cfgs, int nkinds, const double *cost,
                             tsr_pp_t **out);

/* (Added for the intra-layer split, issue 26 step 3.) Node v of nd split
 * into r parts by output channels: 0 when it can be (a conv with groups 1,
 * 2 <= r <= TSR_PP_MAX_SPLIT, r dividing C_out, its output read by no add:
 * the graph runtime would fuse the add into the conv), else TSR_EINVAL
 * naming the node and the reason. */
int tsr_pipenet_splittable(const tsr_netdesc_t *nd, int v, int r);
/* Part j (0..r-1) of that split: *part is node v with C_out / r output
 * channels, its weights, bias and per-channel requantization the slice of
 * channels [j C_out / r, (j + 1) C_out / r) (pointers into v's arrays, not
 * copies: valid while nd is). An output channel's value depends on its own
 * weights only, so the parts' outputs concatenated along C are v's output. */
int tsr_pipenet_split_part(const tsr_netdesc_t *nd, int v, int r, int j, tsr_nd_node_t *part);
/* The `heaviest` splittable (into 2) nodes of pp (built from nd), by their
 * cost on kind 0, into nodes[] (at most heaviest): how many. */
int tsr_pipenet_split_nodes(const tsr_netdesc_t *nd, const tsr_pp_t *pp, int heaviest, int *nodes);
/* Give pp (tsr_pipenet_problem of nd over cfgs) the split parts of
 * nodes[0..nn) for r = 2..max_split where splittable (tsr_pp_node_split):
 * a part's cost is the JIT's estimate of the part conv (tap-packed as the
 * whole would be), or, with given, given[(i * (TSR_PP_MAX_SPLIT + 1) + r) *
 * nkinds + k] (measured, kind k's clock); its footprint the part's packed
 * weights plus its output slice. */
int tsr_pipenet_add_splits(tsr_pp_t *pp, const tsr_netdesc_t *nd, const tsr_config_t *cfgs, int nkinds,
                           int max_split, int nn, const int *nodes, const double *given);

/* (Issue 26, the shared boundary split: tsr_pp_node_share.) Node v of nd
 * cut by output channels into units for configs cfgs[0..nkinds): *units
 * (2..max_units) when it can be (a conv with groups 1, not writing the
 * network output, its C_out a multiple of every config's BLOCK_OUT: a unit
 * is a power-of-two multiple of it, so each part's output is whole channel
 * blocks), else 0 (not an error). */
int tsr_pipenet_share_units(const tsr_netdesc_t *nd, int v, const tsr_config_t *cfgs, int nkinds, int max_units,
                            int *units);
/* Node v with output channels [c0, c1) only: weights, bias and per-channel
 * requantization are slices (pointers into v's arrays: valid while nd is).
 * A channel's value depends on its own weights only, so the slices of
 * consecutive ranges concatenated along C are v's output. */
int tsr_pipenet_slice_part(const tsr_netdesc_t *nd, int v, int c0, int c1, tsr_nd_node_t *part);
/* Give pp (tsr_pipenet_problem[_costs] of nd over cfgs) the shares of every
 * node tsr_pipenet_share_units allows: u units cost alone[v] * u / units,
 * alone[v * nkinds + k] being the node's cycles on kind k (its own clock)
 * without a fused add (NULL: pp's cost); extra (the later part's stage runs
 * the add the whole conv would have fused, on its own) alone[a] minus pp's
 * cost of that add a. A calibration run with TSR_GRAPH_NO_FUSE gives alone. */
int tsr_pipenet_add_shares(tsr_pp_t *pp, const tsr_netdesc_t *nd, const tsr_config_t *cfgs, int nkinds,
                           int max_units, const double *alone);

/* A random DAG shaped like a network, for timing the planner: n nodes,
 * a chain of single nodes and blocks (with probability skip_pct percent): a
 * block is 2..window parallel branches of 1..4 nodes from the node before,
 * joined by one node (inception / residual shapes); costs 1000..100000
 * cycles, edges and footprints 1..65 KiB, one kind. */
int tsr_pipenet_random_dag(int n, int window, int skip_pct, uint64_t seed, tsr_pp_t **out);

#endif
