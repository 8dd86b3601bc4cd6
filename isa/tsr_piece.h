/*
 * tsr_piece: a piece of a stream, made a stream of its own.
 *
 * The sampled backend's finest window (driver/tsr_sampled.h, `pieces:P:K`)
 * runs a contiguous range [a, b) of a submission's instructions on the RTL
 * and on a second fast model, both from the DRAM the submission started
 * with, and takes the ratio of their cycles. A range cut out of a pipelined
 * stream is not a stream: its tokens do not balance, its instructions read
 * on-chip rows that instructions before a wrote, and it has no FINISH. This
 * builds the smallest stream that runs the range as it is:
 *
 *  - tokens: the k-th pop of a queue consumes the k-th push of that queue
 *    (the queues count tokens), so a pop whose push lies outside the range,
 *    and a push whose pop does, are dropped; every pair inside stays.
 *  - a prologue re-issues, for every uop, lut, inp, wgt and acc row the
 *    range reads before writing it, the last LOAD before a that wrote it
 *    (in the stream's order); an acc row a GEMM/ALU wrote (the other bank
 *    of a double-buffered tile loop, in flight at the cut) is written with
 *    zeros by an ALU mov through a uop the prologue loads: its data is not
 *    the run's, the piece's instructions and timing are; then a
 *    compute-stage no-op (LOAD acc, no transfer) waits for the prologue's
 *    input loads;
 *  - a FINISH after the range, waiting for the range's last load-stage and
 *    store-stage instruction unless a token already orders them before a
 *    compute instruction of the range.
 *
 * A STORE in the range of output rows computed before a (a tile stored
 * late by a software-pipelined stream) keeps its tokens and stores nothing
 * (x_size 0): what it would store is whatever each simulator holds. A cut
 * is refused (TSR_EVERIFY naming the row or the reason) when the range
 * reads a row nothing before it wrote, or acc rows no loaded uop can
 * address, or the piece is one the verifier rejects (a dropped token that
 * ordered two accesses); the caller tries another cut.
 * The prologue's instructions are part of the piece's cycles on both
 * simulators alike.
 */
#ifndef TSR_PIECE_H
#define TSR_PIECE_H

#include <stddef.h>

#include "tsr_config.h"
#include "tsr_isa.h"
#include "tsr_verify.h"

/* insns[0..n) is a verified stream ending in FINISH; 0 <= a < b <= n - 1
 * (FINISH not in the range). On TSR_OK *out (malloc'ed, *nout
 * instructions) is the piece, *npro of them the prologue. read/ctx read the
 * uop contents from DRAM (for the footprints). */
int tsr_piece_build(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n, size_t a, size_t b,
                    tsr_mem_read_fn read, void *ctx, tsr_insn_t **out, size_t *nout, size_t *npro);

#endif
