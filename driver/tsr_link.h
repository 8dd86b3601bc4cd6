/*
 * tsr_link: a timed replay of a pipeline's steps over the link between K
 * devices and the host (issue 26), as plain data. The problem: S stages
 * (each one initiator port on the link), N inputs; per stage and input its
 * compute cycles, the transfers it receives before computing and the ones
 * it sends after; the bounded queues of the pipelined executor between
 * consecutive stages. Stage s starts input i when stage s - 1 has handed
 * input i over and it has handed over input i - 1; it hands input i over
 * when stage s + 1 has started input i - depth (room in the queue); the same
 * rule as the executor's timeline (jit/tsr_pipeexec.c).
 *
 * The link: a transfer of b bytes occupies a channel for latency + b /
 * bytes_per_cycle cycles, its initiator waiting until it is done.
 *   TSR_LINK_P2P     each stage's port has a channel of its own: no
 *                    contention (the planner's model; a stage's time is its
 *                    compute plus its transfers, as the executor charges).
 *   TSR_LINK_SHARED  one channel for every port: transfers are served one at
 *                    a time in the order they are requested (FIFO), so
 *                    transfers of different stages that overlap in time
 *                    wait for each other. Requests at the same simulated
 *                    time are served in the order their stages' processes
 *                    run (SystemC's, deterministic: a stage that goes on
 *                    without waiting asks before one it has just woken).
 * The replay is a SystemC/TLM-2.0 simulation (sim/systemc/tsr_sc_link.cpp:
 * an initiator socket per port, one interconnect target, the delay returned
 * in b_transport's timing annotation); it needs the systemc layer linked
 * (tsr_link_available) and runs in the process's one SystemC kernel, so the
 * caller serialises it with the systemc devices' runs (tsr_mdev_link_replay).
 */
#ifndef TSR_LINK_H
#define TSR_LINK_H

#include <stdint.h>

#define TSR_LINK_MAX_PORTS 96    /* stages (initiators) of one replay */
#define TSR_LINK_MAX_XFERS 64    /* transfers per stage and input, each way */
#define TSR_LINK_MAX_INPUTS (1 << 20) /* inputs of one replay */

typedef enum { TSR_LINK_P2P = 0, TSR_LINK_SHARED = 1 } tsr_link_mode_t;

typedef struct tsr_link_stage {
    int nrx, ntx;                        /* transfers before / after the compute, per input */
    uint64_t rx[TSR_LINK_MAX_XFERS];     /* bytes */
    uint64_t tx[TSR_LINK_MAX_XFERS];
    const double *compute;               /* [ninputs] cycles */
} tsr_link_stage_t;

typedef struct tsr_link_problem {
    tsr_link_mode_t mode;
    double bytes_per_cycle, latency;     /* > 0, >= 0 */
    int nstages, ninputs, depth;         /* 1..TSR_LINK_MAX_PORTS, >= 1, >= 1 */
    int win0, win1;                      /* the period's window: 0 <= win0 < win1 < ninputs (both 0: the second
                                            half of the inputs) */
    const tsr_link_stage_t *st;
} tsr_link_problem_t;

typedef struct tsr_link_result {
    double makespan;                     /* the last input's hand-over by the last stage */
    double period;                       /* mean interval between the last stage's hand-overs of inputs win0 and
                                            win1 (by default over the second half; the makespan when N = 1) */
    double busy;                         /* cycles the link (every channel) carried transfers */
    double wait[TSR_LINK_MAX_PORTS];     /* per stage: cycles per input its transfers waited for the link */
    double xfer[TSR_LINK_MAX_PORTS];     /* per stage: cycles per input of its transfers, waits included */
    double *fin;                         /* optional [nstages * ninputs]: fin[s * N + i], stage s hands input i over */
} tsr_link_result_t;

/* Is the SystemC replay linked into this program? */
int tsr_link_available(void);

/* Cycles one transfer of b bytes occupies a channel: latency + b / bytes_per_cycle (0 for b = 0). */
double tsr_link_xfer_cycles(const tsr_link_problem_t *p, uint64_t b);

/* Replay p (checked: one line naming the bad field). Not thread-safe: one
 * SystemC kernel per process. r->fin, when set, must hold nstages * ninputs. */
int tsr_link_replay(const tsr_link_problem_t *p, tsr_link_result_t *r);

/* The systemc layer's implementation (sim/systemc/tsr_sc_link.cpp), reached
 * weakly by tsr_link_replay; p is checked. */
int tsr_sc_link_replay(const tsr_link_problem_t *p, tsr_link_result_t *r);

#endif
