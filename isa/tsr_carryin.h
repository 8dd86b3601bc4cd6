/*
 * tsr_carryin: does a stream read on-chip state that an earlier submission
 * left behind?
 *
 * The verifier makes every uop row and activation table a GEMM/ALU reads
 * come from the same stream, but not the data buffers: a non-reset GEMM may
 * accumulate onto acc rows no instruction of the stream wrote, read inp or
 * wgt rows loaded by the previous stream, and a STORE may store out rows
 * the stream never computed. Such a stream's result depends on what the
 * device held before it started, which is what a simulator that takes over
 * the device mid-run (the sampled backend, driver/tsr_backend_sampled.c)
 * would have to hand over. This check finds the first such read.
 *
 * Footprints (isa/semantics.md): a LOAD writes the rows it fills (padding
 * included) of inp, wgt, acc (acc8 loads acc), uop or lut; a STORE reads
 * out rows; every GEMM/ALU iteration writes acc[dst] and out[dst]; a reset
 * reads nothing, a non-reset GEMM reads acc[dst], inp[src .. src + K - 1]
 * (K = DEPTHWISE in depthwise mode, else 1) and wgt[wgt] (in depthwise
 * mode the row of tap group wgt, wgt >> dw_group_bits); an ALU reads
 * acc[dst] (not for mov) and acc[src] (without use_imm); an ALU lut reads
 * its table (imm, or every table with a register operand); a GEMM/ALU with
 * at least one iteration reads uop rows [uop_bgn, uop_end). The order is
 * one legal execution (tsr_pipe's dry run): for a race-free stream (the
 * verifier's) whether a write comes before a read of the same row is the
 * same in every schedule. Rows out of range are the verifier's business and
 * are not reported here. Cost: one pass over every tensor op of the stream
 * (the functional model's loop, without the arithmetic).
 */
#ifndef TSR_CARRYIN_H
#define TSR_CARRYIN_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_isa.h"
#include "tsr_verify.h"

/* TSR_OK if the stream reads only on-chip rows it wrote before; otherwise
 * TSR_EVERIFY with "insn #N (op) reads BUF row R, which no earlier
 * instruction of this stream wrote". read/ctx fetch the uop contents from
 * device DRAM (uop LOADs); a failed read is an error. */
int tsr_carryin_check(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n, tsr_mem_read_fn read, void *ctx);

/* The on-chip buffers, as indices of tsr_carryin_rows' sets. */
enum { TSR_CARRY_INP, TSR_CARRY_WGT, TSR_CARRY_ACC, TSR_CARRY_OUT, TSR_CARRY_UOP, TSR_CARRY_LUT, TSR_CARRY_COUNT };
/* Rows of buffer buf (the size of its set), and its name ("inp", ...). */
uint32_t tsr_carryin_depth(const tsr_config_t *cfg, int buf);
const char *tsr_carryin_name(int buf);
/* Every row the stream reads before writing it: carried[buf][row] set to 1
 * (each set tsr_carryin_depth(cfg, buf) bytes, zeroed by the caller).
 * uops0 (uop_depth entries, or NULL) is the uop buffer's contents at the
 * start, for the footprints of GEMM/ALUs over uops the stream did not load
 * (a piece of a stream, tsr_piece.h). */
int tsr_carryin_rows(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n, tsr_mem_read_fn read, void *ctx,
                     const tsr_uop_t *uops0, uint8_t *carried[TSR_CARRY_COUNT]);

#endif
