/* tsr_stream: the instruction-stream builder of every lowering (tsr_stream.h). */
#include "tsr_stream.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"

static const char *const q_name[TSR_Q_COUNT] = {"load->compute", "compute->load", "compute->store",
                                                "store->compute"};
/* Producer and consumer stage of each queue. */
static const int q_from[TSR_Q_COUNT] = {TSR_STAGE_LOAD, TSR_STAGE_COMPUTE, TSR_STAGE_COMPUTE, TSR_STAGE_STORE};
static const int q_to[TSR_Q_COUNT] = {TSR_STAGE_COMPUTE, TSR_STAGE_LOAD, TSR_STAGE_STORE, TSR_STAGE_COMPUTE};

void tsr_stream_init(tsr_stream_t *s, const tsr_config_t *c, int count_only, int use_tag)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    s->count_only = count_only;
    s->use_tag = use_tag && !count_only;
    for (int k = 0; k < TSR_STAGE_COUNT; k++)
        s->last[k] = -1;
    for (int q = 0; q < TSR_Q_COUNT; q++)
        s->sig_at[q] = -1;
    for (int k = 0; k < TSR_STAGE_COUNT; k++)
        s->carrier[k] = -1;
}

void tsr_stream_reset(tsr_stream_t *s)
{
    tsr_insn_t *v = s->v;
    int8_t *tag = s->tag;
    const size_t cap = s->cap;
    tsr_stream_init(s, s->c, s->count_only, s->use_tag);
    s->v = v;
    s->tag = tag;
    s->cap = cap;
}

void tsr_stream_free(tsr_stream_t *s)
{
    free(s->v);
    free(s->tag);
    s->v = NULL;
    s->tag = NULL;
    s->n = s->cap = 0;
}

void tsr_stream_take(tsr_stream_t *s, tsr_insn_t **v, size_t *n)
{
    *v = s->v;
    *n = s->n;
    s->v = NULL;
    s->n = s->cap = 0;
}

const char *tsr_stream_id(void) { return "stream builder, built " __DATE__ " " __TIME__; }

int tsr_stream_status(const tsr_stream_t *s)
{
    return s->rc == TSR_ENOMEM ? tsr_err(TSR_ENOMEM, "out of memory") : s->rc;
}

int tsr_stream_check(const tsr_stream_t *s, const char *op)
{
    if (s->rc)
        return tsr_stream_status(s);
    for (size_t i = 0; i < s->n; i++) {
        tsr_insn_bits_t bits;
        int rc = tsr_insn_encode(s->c, &s->v[i], &bits);
        if (rc)
            return tsr_err_prefix(rc, "%s: instruction %zu of the generated stream: ", op, i);
    }
    return TSR_OK;
}

/* The stored instruction i, or the scratch one (dry run, error). */
static tsr_insn_t *at(tsr_stream_t *s, long i)
{
    if (s->count_only || s->rc || i < 0 || (size_t)i >= s->n)
        return &s->scratch;
    return &s->v[i];
}

/* Token flags of a pop of q by its consumer, of a push of q by its producer. */
static void set_pop(tsr_insn_t *in, int q)
{
    if (q == TSR_Q_LD2CMP || q == TSR_Q_CMP2ST)
        in->pop_prev = 1;
    else
        in->pop_next = 1;
}

static void set_push(tsr_insn_t *in, int q)
{
    if (q == TSR_Q_LD2CMP || q == TSR_Q_CMP2ST)
        in->push_next = 1;
    else
        in->push_prev = 1;
}

tsr_insn_t *tsr_stream_emit(tsr_stream_t *s, uint32_t opcode, uint32_t mem_type)
{
    tsr_insn_t *in;
    if (s->count_only || s->rc) {
        in = &s->scratch;
    } else {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 256;
            tsr_insn_t *v = realloc(s->v, cap * sizeof *v);
            if (v)
                s->v = v;
            int8_t *tg = v && s->use_tag ? realloc(s->tag, cap) : NULL;
            if (tg)
                s->tag = tg;
            if (!v || (s->use_tag && !tg)) {
                s->rc = TSR_ENOMEM;
                in = &s->scratch;
                memset(in, 0, sizeof *in);
                return in;
            }
            s->cap = cap;
        }
        if (s->use_tag)
            s->tag[s->n] = (int8_t)s->cur_tag;
        in = &s->v[s->n];
    }
    const long i = (long)s->n++;
    /* zeroed in pieces the compiler writes as plain stores: a search emits
     * millions of these, and a whole-struct memset becomes a string
     * instruction whose start-up costs more than the stores */
    _Static_assert(sizeof *in > 64 && sizeof *in <= 128, "tsr_insn_t size");
    memset(in, 0, 64);
    memset((char *)in + 64, 0, sizeof *in - 64);
    in->opcode = opcode;
    in->mem_type = mem_type;
    const int st = opcode == TSR_OP_FINISH ? TSR_STAGE_COMPUTE : (int)tsr_insn_stage(in);
    s->last[st] = i;
    if (s->want[st]) {
        for (int q = 0; q < TSR_Q_COUNT; q++)
            if (q_to[q] == st && (s->want[st] >> q & 1)) {
                set_pop(in, q);
                s->popped[q]++;
            }
        s->want[st] = 0;
    }
    return in;
}

tsr_insn_t *tsr_stream_load(tsr_stream_t *s, uint32_t mem, uint32_t sram, uint32_t dram, uint32_t y, uint32_t x,
                            uint32_t stride)
{
    tsr_insn_t *in = tsr_stream_emit(s, TSR_OP_LOAD, mem);
    in->sram_base = sram;
    in->dram_base = dram;
    in->y_size = y;
    in->x_size = x;
    in->x_stride = stride;
    uint32_t eb = mem == TSR_MEM_INP ? s->c->inp_bytes
                  : mem == TSR_MEM_WGT ? s->c->wgt_bytes
                  : mem == TSR_MEM_UOP ? s->c->uop_bytes
                                       : s->c->acc_bytes;
    s->bytes += (uint64_t)y * x * eb;
    return in;
}

tsr_insn_t *tsr_stream_store(tsr_stream_t *s, uint32_t sram, uint32_t dram, uint32_t y, uint32_t x, uint32_t stride)
{
    tsr_insn_t *in = tsr_stream_emit(s, TSR_OP_STORE, TSR_MEM_OUT);
    in->sram_base = sram;
    in->dram_base = dram;
    in->y_size = y;
    in->x_size = x;
    in->x_stride = stride;
    s->bytes += (uint64_t)y * x * s->c->out_bytes;
    return in;
}

tsr_insn_t *tsr_stream_gemm(tsr_stream_t *s, uint32_t ubgn, uint32_t uend, int reset)
{
    tsr_insn_t *in = tsr_stream_emit(s, TSR_OP_GEMM, 0);
    in->uop_bgn = ubgn;
    in->uop_end = uend;
    in->reset = (uint32_t)reset;
    return in;
}

tsr_insn_t *tsr_stream_alu(tsr_stream_t *s, uint32_t op, uint32_t ubgn, uint32_t uend)
{
    tsr_insn_t *in = tsr_stream_emit(s, TSR_OP_ALU, 0);
    in->alu_opcode = op;
    in->uop_bgn = ubgn;
    in->uop_end = uend;
    return in;
}

void tsr_stream_loops(tsr_insn_t *in, uint32_t iter_out, uint32_t dfo, uint32_t sfo, uint32_t iter_in, uint32_t dfi,
                      uint32_t sfi)
{
    in->iter_out = iter_out;
    in->dst_factor_out = dfo;
    in->src_factor_out = sfo;
    in->iter_in = iter_in;
    in->dst_factor_in = dfi;
    in->src_factor_in = sfi;
}

size_t tsr_stream_uops(tsr_stream_t *s, uint32_t dram, uint32_t nuops)
{
    const size_t i = s->n;
    tsr_stream_load(s, TSR_MEM_UOP, 0, dram, 1, nuops, nuops);
    s->uop_x = nuops;
    return i;
}

void tsr_stream_set_uops(tsr_stream_t *s, size_t i, uint32_t nuops)
{
    tsr_insn_t *in = at(s, (long)i);
    s->bytes += (uint64_t)nuops * s->c->uop_bytes - (uint64_t)s->uop_x * s->c->uop_bytes;
    s->uop_x = nuops;
    in->x_size = in->x_stride = nuops;
}

void tsr_stream_wait(tsr_stream_t *s, tsr_tokq_e q) { s->want[q_to[q]] |= 1 << q; }

void tsr_stream_carrier(tsr_stream_t *s, int st)
{
    if (st == TSR_STAGE_LOAD)
        tsr_stream_emit(s, TSR_OP_LOAD, TSR_MEM_INP);
    else if (st == TSR_STAGE_COMPUTE)
        tsr_stream_emit(s, TSR_OP_LOAD, TSR_MEM_ACC);
    else
        tsr_stream_emit(s, TSR_OP_STORE, TSR_MEM_OUT);
    s->carrier[st] = s->last[st];
}

void tsr_stream_signal(tsr_stream_t *s, tsr_tokq_e q)
{
    const int st = q_from[q];
    const long l = s->last[st];
    if (l < 0 || l <= s->sig_at[q] || l == s->carrier[st]) {
        /* nothing of the producer stage to carry the token: a carrier */
        tsr_stream_carrier(s, st);
        s->carrier[st] = -1; /* a carrier of this push, not of a pop */
    }
    set_push(at(s, s->last[st]), q);
    s->sig_at[q] = s->last[st];
    s->pushed[q]++;
}

void tsr_stream_signal_at(tsr_stream_t *s, size_t i, tsr_tokq_e q)
{
    set_push(at(s, (long)i), q);
    s->pushed[q]++;
}

long tsr_stream_pending(const tsr_stream_t *s, tsr_tokq_e q) { return s->pushed[q] - s->popped[q]; }

int tsr_stream_finish(tsr_stream_t *s)
{
    if (tsr_stream_pending(s, TSR_Q_ST2CMP) > 0)
        tsr_stream_wait(s, TSR_Q_ST2CMP);
    if (tsr_stream_pending(s, TSR_Q_LD2CMP) > 0)
        tsr_stream_wait(s, TSR_Q_LD2CMP);
    tsr_stream_emit(s, TSR_OP_FINISH, 0);
    if (s->rc)
        return s->rc == TSR_ENOMEM ? tsr_err(TSR_ENOMEM, "out of memory") : s->rc;
    for (int q = 0; q < TSR_Q_COUNT; q++)
        if (tsr_stream_pending(s, q)) {
            s->rc = TSR_EINVAL;
            return tsr_err(TSR_EINVAL, "stream: the %s token queue does not balance at FINISH (%ld pushed, %ld "
                           "popped): the lowering would deadlock",
                           q_name[q], s->pushed[q], s->popped[q]);
        }
    return TSR_OK;
}

void tsr_stream_barrier(tsr_insn_t *finish, tsr_insn_t *carrier)
{
    memset(finish, 0, sizeof *finish);
    finish->opcode = TSR_OP_LOAD;
    finish->mem_type = TSR_MEM_ACC; /* compute stage */
    finish->pop_next = 1;
    finish->push_prev = 1;
    memset(carrier, 0, sizeof *carrier);
    carrier->opcode = TSR_OP_LOAD;
    carrier->mem_type = TSR_MEM_INP; /* load stage */
    carrier->pop_next = 1;
}
