/*
 * tsr_stream: the one instruction-stream builder every lowering emits
 * through (conv2d, pool, add/clip, matmul; the graph joins their streams with
 * it too). It owns what each lowering used to write for itself:
 *
 *  - the growing instruction array, and a dry run (count_only) the tiling
 *    searches use to cost a tiling without storing it;
 *  - LOAD / STORE / GEMM / ALU emission with their fields set from named
 *    arguments, and the DRAM bytes each LOAD/STORE moves counted as emitted;
 *  - dependency tokens by queue instead of hand-set flags: tsr_stream_wait(q)
 *    makes the next instruction of q's consumer stage pop q, and
 *    tsr_stream_signal(q) makes the last instruction emitted in q's producer
 *    stage push q (a token-only carrier is emitted when that stage has
 *    emitted nothing since its last signal). The builder counts every queue's
 *    pushes and pops as it goes;
 *  - the uop kernel LOAD that opens a stream (its length may be set later,
 *    once the lowering knows how many uops it uses);
 *  - FINISH, added once per submission by tsr_stream_finish: it pops
 *    whatever token the store stage (and the load stage) still has pending,
 *    and refuses a stream whose other queues do not balance (a token pushed
 *    that nobody pops, or a pop with nothing pushed before it, is a
 *    deadlock on the device; it fails here, at plan time, naming the queue).
 *
 * A lowering only describes its loops and tiles. Errors (out of memory, an
 * unbalanced queue) are sticky: emits after one go to a scratch instruction
 * and tsr_stream_finish / tsr_stream_status return the error.
 */
#ifndef TSR_STREAM_H
#define TSR_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_isa.h"

/* The four token queues between the three stages. */
typedef enum tsr_tokq {
    TSR_Q_LD2CMP = 0, /* load -> compute: data loaded (load pushes next, compute pops prev) */
    TSR_Q_CMP2LD = 1, /* compute -> load: on-chip buffers free again (compute pushes prev, load pops next) */
    TSR_Q_CMP2ST = 2, /* compute -> store: results ready (compute pushes next, store pops prev) */
    TSR_Q_ST2CMP = 3, /* store -> compute: results drained (store pushes prev, compute pops next) */
    TSR_Q_COUNT = 4
} tsr_tokq_e;

typedef struct tsr_stream {
    const tsr_config_t *c;      /* element sizes for the DRAM byte count */
    tsr_insn_t *v;              /* the instructions (NULL in a dry run) */
    size_t n, cap;              /* emitted (counted in a dry run), allocated */
    int count_only;             /* dry run: count, do not store */
    int rc;                     /* sticky error (TSR_OK, TSR_ENOMEM, TSR_EINVAL) */
    uint64_t bytes;             /* DRAM bytes moved by LOAD/STORE (dry run and real) */
    tsr_insn_t scratch;         /* target of emits that are not stored */
    int8_t *tag;                /* per instruction: the lowering's tag (conv2d: accumulator bank), or NULL */
    int use_tag;                /* keep tag[] */
    int cur_tag;                /* tag recorded for the next emits */
    long pushed[TSR_Q_COUNT];   /* tokens pushed per queue (stored instructions) */
    long popped[TSR_Q_COUNT];   /* tokens popped per queue */
    int want[TSR_STAGE_COUNT];  /* pending pops: bit q set = the stage's next instruction pops queue q */
    long last[TSR_STAGE_COUNT]; /* index of the last instruction of each stage (-1: none) */
    uint32_t uop_x;             /* length the uop LOAD was counted with (tsr_stream_set_uops) */
    long sig_at[TSR_Q_COUNT];   /* index of the instruction that last pushed each queue (-1: none) */
    long carrier[TSR_STAGE_COUNT]; /* index of each stage's last token-only carrier (-1: none) */
} tsr_stream_t;

/* An empty stream for config c (count_only: a dry run; use_tag: keep a tag per instruction). */
void tsr_stream_init(tsr_stream_t *s, const tsr_config_t *c, int count_only, int use_tag);
/* s empty again, as tsr_stream_init made it, keeping its allocation: a
 * search that builds many candidate streams pays for the memory once. */
void tsr_stream_reset(tsr_stream_t *s);
void tsr_stream_free(tsr_stream_t *s);
/* Hand the instructions to the caller (*v owned by it), leaving s empty. */
void tsr_stream_take(tsr_stream_t *s, tsr_insn_t **v, size_t *n);

/* A zeroed instruction with this opcode (and mem_type for LOAD/STORE, which
 * decides its stage), appended; pops any pending wait of its stage. */
tsr_insn_t *tsr_stream_emit(tsr_stream_t *s, uint32_t opcode, uint32_t mem_type);
/* LOAD of y rows of x elements, stride elements apart in DRAM, counted in bytes. */
tsr_insn_t *tsr_stream_load(tsr_stream_t *s, uint32_t mem, uint32_t sram, uint32_t dram, uint32_t y, uint32_t x,
                            uint32_t stride);
/* STORE of the out buffer, counted in bytes. */
tsr_insn_t *tsr_stream_store(tsr_stream_t *s, uint32_t sram, uint32_t dram, uint32_t y, uint32_t x,
                             uint32_t stride);
/* GEMM over uops [ubgn, uend). reset: accumulator reset. */
tsr_insn_t *tsr_stream_gemm(tsr_stream_t *s, uint32_t ubgn, uint32_t uend, int reset);
/* ALU op over uops [ubgn, uend). */
tsr_insn_t *tsr_stream_alu(tsr_stream_t *s, uint32_t op, uint32_t ubgn, uint32_t uend);
/* Loops of a GEMM/ALU: iter_out x iter_in with dst/src (and GEMM wgt) factors. */
void tsr_stream_loops(tsr_insn_t *in, uint32_t iter_out, uint32_t dfo, uint32_t sfo, uint32_t iter_in, uint32_t dfi,
                      uint32_t sfi);
/* The uop kernel LOAD (nuops rows from DRAM element dram, 0 if not known yet); returns its index. */
size_t tsr_stream_uops(tsr_stream_t *s, uint32_t dram, uint32_t nuops);
/* Set the length of the uop LOAD at index i (and count its bytes). */
void tsr_stream_set_uops(tsr_stream_t *s, size_t i, uint32_t nuops);

/* The next instruction of queue q's consumer stage pops q. */
void tsr_stream_wait(tsr_stream_t *s, tsr_tokq_e q);
/* The last instruction of queue q's producer stage pushes q (a token-only
 * carrier of that stage is emitted first if it emitted nothing since q's
 * last push). */
void tsr_stream_signal(tsr_stream_t *s, tsr_tokq_e q);
/* Instruction i (of q's producer stage, emitted earlier) pushes q: for a
 * lowering that decides after the fact which of its instructions free a
 * buffer (conv2d resident mode). */
void tsr_stream_signal_at(tsr_stream_t *s, size_t i, tsr_tokq_e q);
/* A token-only instruction of stage st (it takes the stage's pending pops;
 * a later signal does not put its push on it). */
void tsr_stream_carrier(tsr_stream_t *s, int st);
/* Tokens of q pushed and not yet popped. */
long tsr_stream_pending(const tsr_stream_t *s, tsr_tokq_e q);

/* Close the submission: FINISH popping the pending store->compute (and
 * load->compute) token; every other queue must balance. Returns s->rc, or
 * TSR_EINVAL naming the queue that does not balance. */
int tsr_stream_finish(tsr_stream_t *s);
/* Between two streams joined into one submission: the previous one's
 * trailing FINISH (at index i) becomes a compute-stage carrier popping the
 * same token and pushing one to the load stage, and a load-stage carrier
 * popping it is appended, so the next stream's loads wait for the previous
 * one's last STORE and compute instruction. */
void tsr_stream_barrier(tsr_insn_t *finish, tsr_insn_t *carrier);
/* Every instruction encodes for the config (a lowering's fields in range);
 * else the error, naming op and the first instruction that does not.
 * Returns the sticky error first. */
int tsr_stream_check(const tsr_stream_t *s, const char *op);
/* Build identity of the builder: every lowering's kernel-cache signature
 * holds it, so a kernel cached on disk by another build is not reused. */
const char *tsr_stream_id(void);
/* The sticky error (TSR_OK if none). */
int tsr_stream_status(const tsr_stream_t *s);

#endif
