/*
 * tsr_pipeexec: the pipelined executor (issue 26). A network (tsr_netdesc.h)
 * split into stages by the placement planner (tsr_pipeplan.h; a contiguous
 * plan whose nodes are the network's nodes in order, as tsr_pipenet_problem
 * builds it) runs over a system of K devices (tsr_multidev.h): stage s is a
 * graph of its nodes (tsr_graph.h) planned on its device; its inputs are
 * the tensors it reads that earlier stages (or the host: the network input)
 * produce, its outputs the tensors later stages read (and the network
 * output). A stream of N inputs flows through the stages concurrently: one
 * host thread per stage, bounded queues between stages (depth 2: double
 * buffered: a stage computes input i while i-1 waits for the next stage),
 * results in order. Transfers are host-mediated (a stage's outputs read from
 * its device's DRAM, written into the next device's by the graph runtime)
 * and each transfer's cycles charged to both ends by the link model.
 *
 * The measure is device cycles, not wall time: stage s's time for input i
 * is its device's measured cycles (counters, the sum of its layers) plus
 * the link cycles it pays (receives + sends). All cycles are of the first
 * device's clock, as the planner's (a device of another config: its
 * counters scaled by the clocks' ratio). The makespan is the finish
 * time of the last input in a timeline replayed from those times with the
 * same bounded queues (a stage starts input i when input i is received and
 * input i-1 is done; it hands input i on when the next stage's queue has
 * room). Throughput = N / makespan; the steady state is one input per
 * slowest stage.
 *
 * Every output is compared byte for byte with a single-device run of the
 * whole network (a reference device: the first device's backend and
 * config). A device failing mid-pipeline stops the pipeline: the error names
 * the device and stage, the queues are drained, the threads joined and
 * every other device reset (tsr_mdev_reset_all), so the system runs the next
 * pipeline. A plan with shared boundaries (tsr_pp_solve_shared: a conv's
 * output channels over two consecutive stages) runs the earlier part in
 * the earlier stage's graph (its slice sent on), and the later part first
 * on the later stage's device, as a graph of its own; the host joins the
 * two slices along C into the conv's output, an input of the stage's graph
 * (an add the conv would fuse then runs on its own); the link is charged
 * as the planner's model says (the earlier slice in, this part's slice out
 * and back in). Host nodes (tsr_pipex_opts_t.host: an imported model's host
 * operators between device segments) run in host stages (a thread of their
 * own, no device) or inside device stages, as the plan puts them. A
 * non-contiguous plan of whole nodes (the ILP's) runs as a DAG of pieces:
 * each stage's nodes cut where another stage's nodes come between them,
 * one thread per stage running its pieces, input by input, as soon as their
 * inputs are there (tsr_pipeexec.c, run_dag); its timeline replays the same
 * rule. Refused before anything runs (one line, TSR_EINVAL): a plan that
 * puts device nodes on the host, a non-contiguous plan with split or shared
 * stages, a contiguous plan whose stage reads a
 * tensor a later stage produces (wrong stage order), a stage whose DRAM
 * footprint (the planner's count) exceeds its device's DRAM, a plan for a
 * different network or number of devices. With a shared link
 * (tsr_mdev_set_link_mode) the stream is also replayed from the measured
 * cycles on the SystemC interconnect (tsr_link.h: per stage and input, its
 * receives, its compute, its sends; a shared boundary's and host nodes'
 * round trips with the receives), the contended period and makespan in
 * the link_* fields; refused for non-contiguous plans and split stages.
 */
#ifndef TSR_PIPEEXEC_H
#define TSR_PIPEEXEC_H

#include <stdint.h>
#include <stdio.h>

#include "tsr_multidev.h"
#include "tsr_netdesc.h"
#include "tsr_pipenet.h"
#include "tsr_pipeplan.h"

#define TSR_PIPEX_MAX_INPUTS 4096
#define TSR_PIPEX_MAX_STAGES (TSR_MDEV_MAX + TSR_PP_MAX_HOST_STAGES) /* device stages and host stages */

typedef struct tsr_pipex_opts {
    int ninputs;          /* inputs in the stream (1..TSR_PIPEX_MAX_INPUTS; 0 = 4) */
    uint64_t seed;        /* input i is tsr_netdesc_random_input(nd, seed + i) */
    unsigned flags;       /* graph plan flags (TSR_GRAPH_*) of every stage and of the reference */
    int queue_depth;      /* 1..16 (0 = 2, double buffering) */
    int no_reference;     /* 1: no single-device run (no check, no speed-up) */
    /* For tests: flip one byte of every transfer from stage corrupt_stage - 1
     * (0: none), so the comparison with the single-device run must fail. */
    int corrupt_stage;
    /* (For a model's inputs, tessera infer --devices.) inputs[i]: the bytes of network tensor 0 for input i
     * (NULL: seeded, as above), used by the reference run too; outputs[i] (NULL: not wanted) gets input i's
     * output bytes of the pipeline. */
    const void *const *inputs;
    void *const *outputs;
    /* (Host nodes between device nodes, e.g. an imported model's host operators between device segments;
     * NULL or n = 0: none.) The plan's nodes nd->nnodes + h are host->... node h (tsr_pipenet_problem_host).
     * A stage on a host slot runs host nodes only, on its own thread (a host stage); a device stage may hold
     * host nodes too, run on its thread between its device nodes (its graph then in pieces, each planned on
     * the device), their time part of the stage's. A host node's time is its wall time by the host model
     * (tsr_pipenet_host_cycles, the first device's clock); in a device stage its input and output also pay
     * the link (to the host and back), as the planner counts it. The reference runs the host nodes in the
     * same order. Split and shared stages are refused with host nodes. */
    const tsr_pipenet_host_t *host;
    int skip_host;        /* for tests: the pipeline does not run its host nodes (the reference does), so the
                             comparison must fail */
} tsr_pipex_opts_t;

typedef struct tsr_pipex_stage_res {
    int device;            /* device index */
    int parts;             /* 1, or a split stage's parts (on devices device, device + ... as the plan's slots) */
    int nnodes;
    char first[48], last[48]; /* its first and last node */
    double predicted;      /* the plan's load (compute + link) */
    double pred_compute;   /* the plan's compute */
    double compute;        /* measured device cycles per input (mean over the inputs) */
    double compute_max;    /* ... the largest */
    double link;           /* link cycles per input (receives + sends, the model) */
    double measured;       /* compute + link */
    uint64_t bytes_in, bytes_out; /* per input */
    int nin, nout;         /* tensors received / sent */
    int head, tail;        /* a shared boundary: the plan's units (tsr_pp_stage_t) */
    int host_nodes;        /* host nodes in the stage (device -1: a host stage, only host nodes) */
    double host;           /* measured host cycles per input (mean; part of compute) */
    double pred_host;      /* the plan's host cycles of its host nodes (the host model, part of pred_compute) */
} tsr_pipex_stage_res_t;

typedef struct tsr_pipex_result {
    int nstages, ninputs, timed;  /* timed: the devices count cycles (not fsim) */
    tsr_pipex_stage_res_t st[TSR_PIPEX_MAX_STAGES];
    int slowest_pred, slowest_meas;   /* stage indices */
    double period_pred, period_meas;  /* the slowest stage, predicted and measured */
    double makespan;       /* cycles until the last input's output (replayed timeline) */
    double latency;        /* cycles of the first input through every stage */
    double throughput;     /* inputs per cycle: N / makespan */
    double single;         /* the reference device's cycles per input (mean), plus the link cycles of
                              receiving the input from the host and sending the output back (the
                              planner's single-device load); with host nodes, their host cycles and
                              link round trips too (the planner's cost of host nodes merged into one device) */
    double speedup;        /* single / period_meas: the steady-state multiple of one device */
    double speedup_n;      /* N x single / makespan: the multiple over these N inputs (fill included) */
    int checked, equal;    /* outputs compared with the single-device run / equal */
    int first_diff;        /* first input whose output differed (-1: none) */
    double wall_s;         /* host wall time of the pipeline (not the measure) */
    /* The shared link (tsr_mdev_set_link_mode TSR_LINK_SHARED, timed backends): the stream replayed from the
     * measured cycles on the SystemC interconnect (tsr_link.h), one link for every device and the host. */
    int link_shared;       /* 1: the figures below were replayed */
    double link_floor;     /* every stage's link cycles per input summed: one shared link carries them all, so
                              the period is at least this (the planner's bound: max(period_pred, link_floor)) */
    double period_link;    /* the replay's steady-state period, contention included: the mean interval of the last
                              stage's hand-overs in a longer stream repeating the measured inputs' cycles (a window of
                              whole repeats after the fill, before the drain) */
    double makespan_link;  /* the replay's makespan */
    double period_p2p, makespan_p2p; /* the same replay with a link per device (no contention; its makespan is the
                                        timeline's, makespan above) */
    double speedup_link;   /* single / period_link */
    double link_busy;      /* the replay: cycles the link carried transfers */
    double link_wait[TSR_PIPEX_MAX_STAGES]; /* per stage: cycles per input its transfers waited for the link (the
                                               longer stream's mean, its fill and drain included) */
    int failed_device;     /* -1, or the device that failed */
} tsr_pipex_result_t;

/* Run plan (over pp, built from nd) on the system. r is filled as far as
 * it got. An output that differs is not an error: r->equal < r->checked. */
int tsr_pipex_run(tsr_mdev_t *m, const tsr_netdesc_t *nd, const tsr_pp_t *pp, const tsr_pp_plan_t *plan,
                 const tsr_pipex_opts_t *o, tsr_pipex_result_t *r);

/* Per-layer cycles of the whole network on one device of backend/cfg (a
 * calibration run on input seed): cost[v] gets node v's cycles (a conv with
 * a fused add carries the add's; the add gets 0). For tsr_pipenet_problem_costs. */
int tsr_pipex_calibrate(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *dopts,
                       const tsr_netdesc_t *nd, unsigned flags, uint64_t seed, double *cost);

/* (Intra-layer split.) Part 0 of node v split in parts (tsr_pipenet_split_part)
 * alone on one device of backend/cfg, on a seeded input: *cycles its device
 * cycles (cfg's clock). Every part has the same shape, so on the timed
 * backends this is each part's cost (tsr_pipenet_add_splits' given). */
int tsr_pipex_calibrate_split(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *dopts,
                              const tsr_netdesc_t *nd, int v, int parts, unsigned flags, uint64_t seed, double *cycles);

/* (Shared boundary split.) Node v's output channels [c0, c1) alone
 * (tsr_pipenet_slice_part) on one device of backend/cfg, on a seeded input:
 * *cycles its device cycles (cfg's clock). */
int tsr_pipex_calibrate_slice(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *dopts,
                              const tsr_netdesc_t *nd, int v, int c0, int c1, unsigned flags, uint64_t seed,
                              double *cycles);

/* Stage s of plan alone on one device of backend/cfg (the stage's graph,
 * its inputs seeded bytes), once: *cycles gets its device cycles (in cfg's
 * clock). A check of a pipeline's stages on another backend, one device
 * open at a time (the rtl backend holds one Verilated model per process). */
int tsr_pipex_stage_alone(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *dopts,
                          const tsr_netdesc_t *nd, const tsr_pp_plan_t *plan, int s, unsigned flags, uint64_t seed,
                          double *cycles);
/* The same for a plan with shared boundaries (pp gives the shared nodes'
 * units): a stage's later part of its first node, then its graph (the
 * joined tensor seeded bytes), *cycles their sum. */
int tsr_pipex_stage_alone_pp(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *dopts,
                             const tsr_netdesc_t *nd, const tsr_pp_t *pp, const tsr_pp_plan_t *plan, int s,
                             unsigned flags, uint64_t seed, double *cycles);

/* The stages (device, nodes, predicted and measured cycles, transfers),
 * the slowest stage predicted vs measured, throughput, latency, the
 * speed-up over one device and whether the outputs equal the single-device run. */
void tsr_pipex_print(const tsr_pipex_result_t *r, FILE *f);

#endif
