/*
 * tsr_pipeplan: the pipeline placement planner (issue 26). A network is a
 * DAG of nodes; K devices (each of a device kind: a config, one cost per
 * node) and the host run it as a pipeline of stages, a stage being the set
 * of nodes on one device or one host thread. The planner finds the
 * placement whose slowest stage is fastest (throughput), ties broken by the
 * batch-1 latency, exactly:
 *  - contiguous splits (every stage convex, the stages in a topological
 *    order) by dynamic programming over the graph's ideals (downsets), as
 *    Tarnawski et al., "Efficient Algorithms for Device Placement of DNN
 *    Graph Operators", NeurIPS 2020: a contiguous split is a chain of
 *    ideals {} = I0 < I1 < ... < Im = V, stage j = Ij \ Ij-1;
 *  - any split (non-contiguous) on small graphs by an integer program
 *    (GLPK), the paper's ILP for the same objective.
 *
 * The cost model (the paper's throughput model, all in device cycles):
 *   load(S on slot s) = sum over v in S of cost_s(v)              compute
 *                     + sum over v in S with a consumer not in S of  c(v)  sends
 *                     + sum over u not in S with a consumer in S of c(u)  receives
 *                     + (s a device) sum over v in S of the graph inputs it
 *                       reads and the graph outputs it writes, each
 *                       latency + bytes / bytes_per_cycle   (to/from the host)
 *   c(v) = link latency + bytes(v) / link bytes_per_cycle, bytes(v) the
 *   largest of v's out-edges (a node's output is one tensor, sent once per
 *   stage boundary it crosses: both ends pay for it, the sender once
 *   whatever the number of receiving stages, the paper's c_v);
 *   period = the largest load (one input leaves the pipeline per period);
 *   latency (batch 1) = the sum of the stage loads (the stages one after
 *   another, each receiving, computing and sending).
 * This is the load of the paper's released throughput DP (msr-fiddle/
 * dnn-partitioning, throughput-dp: compute + the summed costs of the nodes
 * whose outputs cross the set's boundary, each node once), with one
 * difference: there the CPU stages pay no communication; here the host's
 * stages pay the link like a device's (the host is the link's other end).
 * A device's stage must fit its DRAM: the sum of its nodes' footprints
 * (weights + activations as the caller counts them) <= the device's DRAM.
 * The host has no memory limit and runs what the caller gives a finite
 * host cost; it provides up to host_stages stages (threads; default 1).
 * A node no device kind can run (cost INFINITY) is host-only.
 *
 * Everything is checked before anything runs (tsr_pp_check): a node no
 * device and not the host can run, a node whose footprint fits no device
 * that can run it (and the host cannot), K above TSR_PP_MAX_DEVICES, a
 * cycle; and by the DP: an ideal count above the limit or more than
 * TSR_PP_MAX_DP_NODES nodes (refused with a message suggesting the
 * heuristic, tsr_pp_solve_baseline): one line naming the node or device,
 * TSR_EINVAL.
 */
#ifndef TSR_PIPEPLAN_H
#define TSR_PIPEPLAN_H

#include <stdint.h>
#include <stdio.h>

#define TSR_PP_MAX_DEVICES 64            /* K above it is refused */
#define TSR_PP_MAX_KINDS 16              /* device kinds (configs) */
#define TSR_PP_MAX_NODES 100000
#define TSR_PP_MAX_IDEALS 1000000        /* default ideal limit of the exact DP */
#define TSR_PP_MAX_DP_NODES 20000        /* nodes the exact DP takes (its enumeration recurses per node) */
#define TSR_PP_MAX_HOST_STAGES 8
#define TSR_PP_MAX_COST 1e15               /* cycles of one node (finite costs above it are refused) */
#define TSR_PP_MAX_BYTES (1ull << 44)    /* a node's footprint, an edge, a graph input/output (16 TiB) */
#define TSR_PP_MAX_SPLIT 8               /* parts of an intra-layer split */

typedef struct tsr_pp tsr_pp_t;

/* A problem with nkinds device kinds (1..TSR_PP_MAX_KINDS), no nodes, no
 * devices, a link of 8 bytes per cycle and 0 latency, one host stage. */
int tsr_pp_create(int nkinds, tsr_pp_t **out);
void tsr_pp_free(tsr_pp_t *pp);

/* A node: cost[k] its cycles on device kind k (INFINITY: kind k cannot run
 * it), host_cost its cycles on the host (INFINITY: the host cannot), mem its
 * DRAM footprint on a device (bytes). *id gets 0, 1, ... The name is copied
 * (errors and the printed plan name it). */
int tsr_pp_node(tsr_pp_t *pp, const char *name, const double *cost, double host_cost, uint64_t mem, int *id);
/* Graph inputs the node reads from the host and outputs it gives the host
 * (bytes; paid over the link when the node is on a device). */
int tsr_pp_node_io(tsr_pp_t *pp, int node, uint64_t in_bytes, uint64_t out_bytes);
/* The intra-layer split (Mesh-TensorFlow style, issue 26 step 3): node may
 * run as `parts` (2..TSR_PP_MAX_SPLIT) equal parts (its output channels cut
 * in parts) on `parts` devices of one class (kind and DRAM) side by side, a
 * stage of its own. cost[k] is one part's cycles on kind k (INFINITY: kind k
 * cannot), mem one part's footprint. The split stage's load on each of its
 * devices: the part's compute + the full input received (the host
 * broadcasts it: each device pays latency + bytes / bw per producer, the
 * producer sends once) + its slice of the output sent (latency + bytes /
 * parts / bw; the host concatenates the slices, so a consumer receives the
 * whole tensor as from an unsplit node), and graph inputs / outputs the same
 * way. Setting a node's parts again replaces it. */
int tsr_pp_node_split(tsr_pp_t *pp, int node, int parts, const double *cost, uint64_t mem);
/* Work of the node in MACs (for the equal-MAC baseline only). */
int tsr_pp_node_macs(tsr_pp_t *pp, int node, double macs);
/* An edge: node to consumes from's output, bytes of it. */
int tsr_pp_edge(tsr_pp_t *pp, int from, int to, uint64_t bytes);
/* A device of kind kind with dram bytes of DRAM; *id gets 0, 1, ... */
int tsr_pp_device(tsr_pp_t *pp, const char *name, int kind, uint64_t dram, int *id);
/* The link between any two of devices and host: bytes per cycle (> 0) and
 * latency per transfer (cycles, >= 0). */
int tsr_pp_set_link(tsr_pp_t *pp, double bytes_per_cycle, double latency);
/* Host stages (0..TSR_PP_MAX_HOST_STAGES; 0: the host runs nothing). */
int tsr_pp_set_host_stages(tsr_pp_t *pp, int n);

int tsr_pp_nnodes(const tsr_pp_t *pp);
int tsr_pp_ndevices(const tsr_pp_t *pp);
const char *tsr_pp_node_name(const tsr_pp_t *pp, int node);
/* Node's cost on device kind k (INFINITY: cannot; NaN: no such node or kind). */
double tsr_pp_node_cost(const tsr_pp_t *pp, int node, int kind);
const char *tsr_pp_device_name(const tsr_pp_t *pp, int dev);

/* Slots: a placement puts every node on a slot, 0..K-1 the devices,
 * K..K+host_stages-1 the host's stages. */
int tsr_pp_nslots(const tsr_pp_t *pp);

/* The guards above: 0, or TSR_EINVAL with one line naming the node or
 * device. The solvers call it first. */
int tsr_pp_check(const tsr_pp_t *pp);

typedef struct tsr_pp_stage {
    int slot;            /* device index, or >= K: host stage slot - K */
    int parts;           /* 1, or a split stage: its one node in parts parts on slots[0..parts) (slots[0] = slot) */
    int slots[TSR_PP_MAX_SPLIT];
    int nnodes;
    int *nodes;          /* in topological order */
    double compute;      /* cycles of its nodes on the slot */
    double comm_in;      /* receives (incl. graph inputs from the host) */
    double comm_out;     /* sends (incl. graph outputs to the host) */
    double load;         /* compute + comm_in + comm_out */
    uint64_t mem;        /* DRAM footprint (devices) */
    /* (A shared boundary split, tsr_pp_solve_shared.) head > 0: nodes[0] is shared with the stage before, which
     * runs its first head units: this stage runs units [head, units); tail > 0: nodes[nnodes - 1] is shared
     * with the stage after: this stage runs its units [0, tail). 0: whole nodes. */
    int head, tail;
} tsr_pp_stage_t;

typedef struct tsr_pp_xfer {
    int node;            /* the producer */
    int from, to;        /* stage indices */
    uint64_t bytes;
} tsr_pp_xfer_t;

typedef struct tsr_pp_plan {
    int nstages;         /* non-empty stages, in a topological order when contiguous */
    tsr_pp_stage_t *stages;
    int nxfers;
    tsr_pp_xfer_t *xfers;
    int *slot;           /* per node: its slot */
    double period;       /* the slowest stage's load: cycles per input in steady state */
    double latency;      /* sum of the loads (batch 1) */
    int contiguous;      /* the stages' quotient graph is acyclic */
    char method[24];     /* "dp", "ilp", "equal-macs", "greedy", "single", "given" */
    uint64_t ideals;     /* dp: ideals of the graph */
    double solve_ms;     /* wall time of the solve */
    int shared;          /* a stage has a head or a tail (tsr_pp_solve_shared) */
} tsr_pp_plan_t;

typedef struct tsr_pp_opts {
    uint64_t max_ideals; /* 0: TSR_PP_MAX_IDEALS */
    double time_limit_s; /* ILP: 0 = 60 s; past it the ILP is refused (no proven optimum) */
    int max_split;       /* DP: 0 or 1 no intra-layer split; 2..TSR_PP_MAX_SPLIT and <= K: a node with
                            tsr_pp_node_split parts up to it may be a split stage */
} tsr_pp_opts_t;

/* The exact contiguous planner (DP over ideals). opts may be NULL. With
 * opts->max_split >= 2 it is exact over contiguous splits in which any
 * stage of a single node may instead be that node split into r equal parts
 * (2 <= r <= max_split, a part cost given by tsr_pp_node_split) over r
 * devices of one class; without, over contiguous splits. Refuses
 * (TSR_EINVAL, the reason) a problem with no feasible contiguous split,
 * naming the constraint that binds. */
int tsr_pp_solve_dp(const tsr_pp_t *pp, const tsr_pp_opts_t *opts, tsr_pp_plan_t *out);
/* The exact non-contiguous planner (ILP through GLPK; small graphs: nodes x
 * slots <= 4096). TSR_EBACKEND "built without GLPK" when it was not
 * available at build time. */
int tsr_pp_solve_ilp(const tsr_pp_t *pp, const tsr_pp_opts_t *opts, tsr_pp_plan_t *out);
int tsr_pp_have_ilp(void);

/* Baselines (and the heuristic for graphs too wide for the DP): nodes in
 * topological order cut into consecutive runs over the devices, each run
 * an equal share of the MACs (TSR_PP_EQUAL_MACS) or of the cycles on its
 * device (TSR_PP_GREEDY: fill a device up to total/K, then the next);
 * host-only nodes on host stage 0. TSR_PP_SINGLE: everything on the device
 * with the smallest load (host-only nodes on the host): the one-device
 * reference of the speed-up. */
typedef enum { TSR_PP_EQUAL_MACS = 1, TSR_PP_GREEDY, TSR_PP_SINGLE } tsr_pp_baseline_e;
int tsr_pp_solve_baseline(const tsr_pp_t *pp, tsr_pp_baseline_e which, tsr_pp_plan_t *out);

/* The plan of a given placement (slot[v] per node): loads, stages,
 * transfers. TSR_EINVAL naming the node or device when a node is on a slot
 * that cannot run it or a device's stage exceeds its DRAM. */
int tsr_pp_evaluate(const tsr_pp_t *pp, const int *slot, tsr_pp_plan_t *out);

/* The same with intra-layer splits: parts[v] (NULL: all 1) and, for
 * parts[v] > 1, the node's other devices xslots[v * TSR_PP_MAX_SPLIT + j],
 * j < parts[v] - 1 (devices of slot[v]'s class, each running nothing else). */
int tsr_pp_evaluate_split(const tsr_pp_t *pp, const int *slot, const int *parts, const int *xslots,
                          tsr_pp_plan_t *out);

/* The shared boundary split (issue 26): two consecutive stages share one
 * node, the earlier stage's device running the first u of its `units`
 * equal units of output channels, the later's the other units - u, so
 * that stages balance to within a unit instead of a whole layer.
 * tsr_pp_node_share gives node its units (2..TSR_PP_MAX_UNITS) and the
 * costs: ucost[(u - 1) * nkinds + k] the cycles of u units on kind k
 * (u = 1..units - 1; INFINITY: not on kind k), extra[k] (NULL: none)
 * cycles added to the later part's stage (the node's add, which the
 * runtime fuses into the whole node, runs on its own there). The model:
 *  - the later part's stage holds every consumer of the node (else the
 *    cut is not a candidate); it receives the earlier part's slice
 *    (latency + bytes u / units / bw), and its own part's slice goes to
 *    the host and back (the host joins the slices; the device cannot):
 *    twice latency + bytes (units - u) / units / bw;
 *  - the earlier stage sends its slice; both stages receive the node's
 *    inputs (as any stage reading a tensor it does not produce) and a
 *    graph input the node reads;
 *  - a part's footprint is the node's times its share of the units.
 * A node with a graph output is not shared. */
#define TSR_PP_MAX_UNITS 64
int tsr_pp_node_share(tsr_pp_t *pp, int node, int units, const double *ucost, const double *extra);
/* Node's units (1: not shared). */
int tsr_pp_node_units(const tsr_pp_t *pp, int node);

/* A cut between two consecutive stages: before node `node` (index order),
 * its first `units` units (0: none) in the earlier stage. */
typedef struct tsr_pp_cut {
    int node, units;
} tsr_pp_cut_t;

/* The exact planner over interval plans with shared boundaries: the nodes
 * in index order (which must be a topological order: refused otherwise)
 * cut into at most K consecutive stages, stage j on device j, each cut
 * clean or through one node given units by tsr_pp_node_share (a node is
 * in at most two stages). Minimises the period, then the latency, over
 * every such plan (a DP over the cut positions; the loads as above and,
 * for clean cuts, as tsr_pp_evaluate's). Devices only: a node only the
 * host runs is refused. Every node in one stage (K = 1) is a plan. */
int tsr_pp_solve_shared(const tsr_pp_t *pp, const tsr_pp_opts_t *opts, tsr_pp_plan_t *out);
/* The plan of the cuts cuts[0..ncuts) (increasing; ncuts + 1 stages, stage
 * j on device j): TSR_EINVAL naming the cut or node when a cut is out of
 * order, through a node that is not shared, leaves a consumer of a shared
 * node outside the later part's stage, or a stage does not fit. */
int tsr_pp_evaluate_shared(const tsr_pp_t *pp, const tsr_pp_cut_t *cuts, int ncuts, tsr_pp_plan_t *out);

void tsr_pp_plan_free(tsr_pp_plan_t *p);

/* One shared link instead of a link per device (tsr_multidev.h,
 * TSR_LINK_SHARED): the link carries every stage's transfers, one at a
 * time, so the period is at least the sum of the stages' communication
 * (comm_in + comm_out) per input. Returns that sum; the plan's period with
 * one shared link is at least max(p->period, it). The plans are made
 * without contention (a link per device). */
double tsr_pp_shared_link_bound(const tsr_pp_plan_t *p);

/* The plan: one line per stage (slot, nodes, compute, transfers, load),
 * transfers, period, latency and, with single_period > 0, the throughput as
 * a multiple of it. */
void tsr_pp_print(const tsr_pp_t *pp, const tsr_pp_plan_t *p, double single_period, FILE *f);

#endif
