/*
 * tsr_cost: the one cost model of the JIT's lowerings: what a tiling's
 * run costs on the accelerator, for the tiling searches (conv2d, pool,
 * add/clip) and the estimates their plans report.
 *
 * The machine it models: three stages (load, compute with a GEMM and an
 * ALU pipe, store) handing on-chip halves to each other through token
 * queues, one DRAM port of tsr_cost_dram_bw bytes per cycle, one tensor op
 * per cycle per pipe. It is evaluated two ways:
 *  - tsr_cost_stream: over a built stream, instruction by instruction
 *    (tokens, the DRAM port's busy intervals, the accumulator bank rule);
 *    what conv2d's search minimises, whose schedules differ in ways only
 *    the stream shows.
 *  - tsr_cost_pipelined: in closed form, from the totals of a stream built
 *    dry (pool) or derived per row (add/clip): transfers and compute
 *    overlapped over the steps, plus the fill/drain that cannot overlap,
 *    the transfers single buffering serialises, and per-step and
 *    per-instruction overheads (each lowering's constants, measured).
 * (The roofline of tsr_roofline.h is a lower bound, not this model.)
 */
#ifndef TSR_COST_H
#define TSR_COST_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_isa.h"

/* DRAM bytes per cycle the model assumes: the bus width in bytes. */
double tsr_cost_dram_bw(const tsr_config_t *c);

/* Estimated cycles of stream v[0..n) (tags: per instruction the
 * accumulator bank a GEMM/ALU works in, -1 both, or NULL). Exact when
 * below limit (INFINITY: always); else some value above limit, often found
 * without the whole pass (a search only needs to know that a candidate
 * does not beat the best so far). 1e30 for a stream whose tokens do not
 * balance. */
double tsr_cost_stream(const tsr_config_t *c, const tsr_insn_t *v, size_t n, const int8_t *tags, double limit);
/* The same with the stream's uop buffer (uops[0..nuops), decoded): a
 * depthwise GEMM's ops cost 1 cycle when their window follows the previous
 * op's and K otherwise (tsr_insn_issue_cycles), which only its uops tell;
 * without them (or for a range beyond nuops) every depthwise op counts K.
 * Every other instruction is estimated as by tsr_cost_stream. */
double tsr_cost_stream_uops(const tsr_config_t *c, const tsr_insn_t *v, size_t n, const int8_t *tags,
                            const tsr_uop_t *uops, size_t nuops, double limit);

/* The closed form's terms, in cycles. */
typedef struct tsr_cost_terms {
    double mem;        /* DRAM time of every transfer (bytes / tsr_cost_dram_bw) */
    double comp;       /* compute time (tensor ops; the busier pipe where GEMM and ALU overlap) */
    double fill;       /* of the shorter side, what cannot overlap (fill and drain); < 0: one step's
                          worth, min(mem, comp) / steps */
    double serial[2];  /* transfers single buffering serialises (input side, output side) */
    double steps;      /* pipeline steps (tiles) */
    double per_step;   /* overhead per step (DRAM latency, token hand-offs) */
    double insns;      /* instructions */
    double per_insn;   /* overhead per instruction (issue, pipeline fill) */
} tsr_cost_terms_t;

/* max(mem, comp) + fill + per_step * steps + serial + per_insn * insns. */
double tsr_cost_pipelined(const tsr_cost_terms_t *t);

/* Build identity of the model (part of every kernel-cache signature). */
const char *tsr_cost_id(void);

#endif
