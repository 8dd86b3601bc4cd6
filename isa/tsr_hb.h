/*
 * tsr_hb: data-race detection on the on-chip rows that two stages share,
 * by happens-before over the token chains.
 *
 * The stages run concurrently; only tokens order them (isa/semantics.md).
 * Two accesses to the same row of a shared buffer, at least one a write,
 * by instructions of different stages must be ordered by a chain of token
 * pushes and pops, or the stream's result depends on the schedule. Within
 * a stage, program order holds (the compute stage's bank rule makes its
 * results those of program order), so same-stage pairs never race.
 *
 * The same rule covers DRAM: a STORE (store stage) and a LOAD (load or
 * compute stage) of the same bytes must be ordered too.
 *
 * Shared rows: inp and wgt (written by load-stage LOADs including their
 * padding, read by non-reset GEMMs) and out (written by every GEMM/ALU
 * iteration as the mirror of acc, read by STORE). acc and uop rows are
 * touched by the compute stage alone (LOAD acc/acc8 does not write out),
 * so they cannot race on chip.
 *
 * The caller feeds the instructions in the order of one legal execution
 * (tsr_verify uses tsr_pipe's dry run), each with its stage's vector clock
 * at execution: clock[t] = how many stage-t instructions are known to have
 * completed (through tokens, transitively). A write of stage t with
 * ordinal k (1-based) happens before the current instruction iff
 * clock[t] >= k. Per row the detector keeps the last write and, per
 * stage, the latest read since it (FastTrack): checking each access
 * against those finds a race if the stream has one, in any schedule.
 * One stage writes each shared buffer, so that state is the last write's
 * ordinal and each reading stage's latest read's, in flat arrays by row:
 * an access is a few runs of rows, checked and stamped in one vectorized
 * pass each. A stage's clock
 * must only grow (tsr_pipe's do), so a write need not clear the reads
 * before it: one it did not conflict with cannot conflict with a later
 * write of the same stage.
 * GEMM/ALU footprints are built as runs from intervals when the loop's
 * offsets are one interval (or a few, over one uop base): each uop base
 * plus them, sorted and merged, a few instructions per uop; other loops as
 * row bitsets (uop bases plus loop offsets, a Minkowski sum by shifted ORs
 * over the words the sets span). Either is kept, by a hash of the slice
 * and loop, for the next instructions with the same: never iterations x
 * uops, at worst a few passes over the buffer depth.
 */
#ifndef TSR_HB_H
#define TSR_HB_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_isa.h"

typedef struct tsr_hb tsr_hb_t;

/* The instruction being executed and its stage's knowledge. */
typedef struct tsr_hb_who {
    uint32_t idx;                        /* stream index */
    int stage;                           /* tsr_stage_e */
    uint32_t clock[TSR_STAGE_COUNT];     /* completed instructions known, per stage */
} tsr_hb_who_t;

/* insns (for naming instructions in messages) must outlive the detector. */
int tsr_hb_create(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n, tsr_hb_t **out);
void tsr_hb_destroy(tsr_hb_t *h);

/* DRAM bytes to track: the segments [bounds[k], bounds[k+1]) of a sorted,
 * duplicate-free list (the STORE rows some LOAD reads, cut where they
 * start and end). A STORE writes, a LOAD reads the segments its rows
 * overlap; ones outside every segment are not tracked (no STORE writes
 * them, or no LOAD reads them). n may be 0. */
int tsr_hb_set_dram(tsr_hb_t *h, const uint64_t *bounds, size_t n);

/* Check and record the on-chip accesses of insns[who->idx]. uops is the
 * uop buffer's contents as this instruction sees them (uop_depth entries;
 * known[u] != 0 if entry u holds loaded contents); a GEMM/ALU whose uops
 * are not all known has no known footprint and is not checked. Indices
 * must already be in range (tsr_verify checks them first). Returns TSR_OK
 * or TSR_EVERIFY "race on BUF rows [a, b): this ... insn #M (op) ..."
 * naming the other instruction (the caller prefixes this one's index). */
int tsr_hb_insn(tsr_hb_t *h, const tsr_hb_who_t *who, const tsr_uop_t *uops, const uint8_t *known);

#endif
