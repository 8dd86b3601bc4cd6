/*
 * tsr_pipe: the execution-order semantics of a task-instruction stream.
 *
 * Fetch reads instructions in order and dispatches each into the bounded
 * command queue of its stage (load, compute, store); a full queue stalls
 * fetch. A stage takes its next command when every token it pops is
 * available, executes it (through a callback), then pushes its tokens,
 * stalling while the target token queue is full. Token queues:
 *   load->compute, compute->load, compute->store, store->compute
 * each holding up to DEP_QUEUE_DEPTH tokens. The run ends at FINISH.
 *
 * Both the functional simulator (with a data callback) and the static
 * verifier (with none) run streams through this one model, so "would
 * deadlock" means the same thing everywhere. The model also tracks
 * happens-before (vector clocks carried on tokens) to prove that every
 * load/store-stage instruction completes before FINISH, and that no token
 * is left in a queue at FINISH.
 *
 * Scheduling: seed 0 runs each agent until it blocks, in turn (fast);
 * any other seed picks a random ready agent per step. A correct stream
 * gives the same result under every schedule.
 */
#ifndef TSR_PIPE_H
#define TSR_PIPE_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_isa.h"

/* Token queue ids. */
typedef enum {
    TSR_Q_L2C = 0, /* load pushes next, compute pops prev */
    TSR_Q_C2L = 1, /* compute pushes prev, load pops next */
    TSR_Q_C2S = 2, /* compute pushes next, store pops prev */
    TSR_Q_S2C = 3, /* store pushes prev, compute pops next */
    TSR_Q_COUNT = 4
} tsr_queue_e;

/* Returned by an exec callback that did part of a long instruction and
 * wants to be called again for the same instruction. */
#define TSR_PIPE_MORE 1

/* Execute one instruction (or, returning TSR_PIPE_MORE, the next part of
 * it); return TSR_OK when done or a negative code (message set). */
typedef int (*tsr_pipe_exec_fn)(void *ctx, uint32_t index, const tsr_insn_t *insn);

typedef struct tsr_pipe tsr_pipe_t;

/* insns must stay valid while the pipe lives. exec may be NULL (dry run). */
int tsr_pipe_create(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n,
                    tsr_pipe_exec_fn exec, void *ctx, uint64_t seed, tsr_pipe_t **out);
void tsr_pipe_destroy(tsr_pipe_t *p);
/* Run up to max_insns exec calls (0 = no limit). *done is set to
 * 1 once FINISH has executed. Errors: TSR_EDEADLOCK (message names every
 * blocked agent and the queue fill levels), TSR_EVERIFY (no FINISH,
 * instruction after FINISH, illegal flag, work not ordered before FINISH,
 * leftover tokens), or whatever exec returned (prefixed with the index). */
int tsr_pipe_run(tsr_pipe_t *p, uint64_t max_insns, int *done);
/* Vector clock of stage s: clock[t] = how many stage-t instructions are
 * known (through tokens, transitively) to have completed. Inside an exec
 * callback for a stage-s instruction it is that instruction's knowledge
 * (clock[s] = its ordinal within the stage, from 0). */
void tsr_pipe_clock(const tsr_pipe_t *p, int s, uint32_t clock[TSR_STAGE_COUNT]);
/* Instructions executed so far. */
uint64_t tsr_pipe_executed(const tsr_pipe_t *p);
/* Name of a token queue ("load->compute"). */
const char *tsr_queue_name(int q);

#endif
