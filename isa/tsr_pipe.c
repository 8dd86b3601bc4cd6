/*
 * tsr_pipe: execution-order semantics (fetch, three stages, bounded
 * command and token queues) shared by the functional simulator and the
 * verifier. See tsr_pipe.h. The model is a network of deterministic
 * processes with blocking bounded queues, so whether it deadlocks does not
 * depend on the schedule; the randomized schedule exists to show that the
 * data results do not either.
 */
#include "tsr_pipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"

typedef struct {
    uint32_t clock[TSR_STAGE_COUNT]; /* producer's knowledge when it pushed */
    uint32_t from;                   /* index of the pushing instruction */
} token_t;

typedef struct {
    token_t *ring;   /* capacity dep_queue_depth */
    uint32_t head;   /* oldest token */
    uint32_t count;  /* tokens held */
} tqueue_t;

typedef struct {
    uint32_t *ring;  /* instruction indices, capacity cmd_queue_depth */
    uint32_t head;   /* oldest command */
    uint32_t count;  /* commands held */
} cqueue_t;

/* Where a stage is in its current instruction. */
enum { ST_IDLE, ST_POPPING, ST_EXEC, ST_PUSHING };

typedef struct {
    int state;                       /* ST_* */
    uint32_t idx;                    /* current instruction */
    int push_prev_left, push_next_left; /* tokens still to push */
    uint32_t clock[TSR_STAGE_COUNT]; /* instructions of each stage known complete */
} stage_t;

struct tsr_pipe {
    const tsr_config_t *cfg;
    const tsr_insn_t *insns;
    size_t n;
    tsr_pipe_exec_fn exec;
    void *ctx;
    uint64_t rng;                    /* xorshift state; 0 = deterministic schedule */
    size_t pc;                       /* next instruction for fetch */
    cqueue_t cmd[TSR_STAGE_COUNT];
    tqueue_t tok[TSR_Q_COUNT];
    stage_t st[TSR_STAGE_COUNT];
    uint32_t *stage_list[TSR_STAGE_COUNT]; /* instruction indices of each stage, in order */
    uint32_t stage_total[TSR_STAGE_COUNT];
    uint64_t executed;
    int finished;
    int error;                       /* sticky error code */
};

const char *tsr_queue_name(int q)
{
    static const char *n[] = {"load->compute", "compute->load", "compute->store",
                              "store->compute"};
    return q >= 0 && q < TSR_Q_COUNT ? n[q] : "?";
}

/* Token queues an instruction of stage s pops/pushes for each flag; -1 = illegal. */
static int q_pop_prev(int s) { return s == TSR_STAGE_COMPUTE ? TSR_Q_L2C : s == TSR_STAGE_STORE ? TSR_Q_C2S : -1; }
static int q_pop_next(int s) { return s == TSR_STAGE_LOAD ? TSR_Q_C2L : s == TSR_STAGE_COMPUTE ? TSR_Q_S2C : -1; }
static int q_push_prev(int s) { return s == TSR_STAGE_COMPUTE ? TSR_Q_C2L : s == TSR_STAGE_STORE ? TSR_Q_S2C : -1; }
static int q_push_next(int s) { return s == TSR_STAGE_LOAD ? TSR_Q_L2C : s == TSR_STAGE_COMPUTE ? TSR_Q_C2S : -1; }

static int precheck(tsr_pipe_t *p)
{
    char d[32];
    size_t finish_at = p->n;
    for (size_t i = 0; i < p->n; i++) {
        const tsr_insn_t *in = &p->insns[i];
        if (in->opcode >= TSR_OP_COUNT)
            return tsr_err(TSR_EVERIFY, "insn #%zu: invalid opcode %u", i, in->opcode);
        if ((in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE) && in->mem_type >= TSR_MEM_COUNT)
            return tsr_err(TSR_EVERIFY, "insn #%zu: invalid memory type %u", i, in->mem_type);
        int s = tsr_insn_stage(in);
        /* (the description only for a message: formatting it for every instruction was 3% of a first run) */
        if (in->pop_prev && q_pop_prev(s) < 0)
            return tsr_err(TSR_EVERIFY, "insn #%zu (%s): pop_prev is illegal in the %s stage (it has no previous stage)", i, tsr_insn_desc(in, d, sizeof d), tsr_stage_name(s));
        if (in->push_prev && q_push_prev(s) < 0)
            return tsr_err(TSR_EVERIFY, "insn #%zu (%s): push_prev is illegal in the %s stage (it has no previous stage)", i, tsr_insn_desc(in, d, sizeof d), tsr_stage_name(s));
        if (in->pop_next && q_pop_next(s) < 0)
            return tsr_err(TSR_EVERIFY, "insn #%zu (%s): pop_next is illegal in the %s stage (it has no next stage)", i, tsr_insn_desc(in, d, sizeof d), tsr_stage_name(s));
        if (in->push_next && q_push_next(s) < 0)
            return tsr_err(TSR_EVERIFY, "insn #%zu (%s): push_next is illegal in the %s stage (it has no next stage)", i, tsr_insn_desc(in, d, sizeof d), tsr_stage_name(s));
        if (in->opcode == TSR_OP_FINISH) {
            if (finish_at != p->n)
                return tsr_err(TSR_EVERIFY, "insn #%zu (finish): second FINISH (first at #%zu); FINISH must be the last instruction", i, finish_at);
            finish_at = i;
            if (in->push_prev || in->push_next)
                return tsr_err(TSR_EVERIFY, "insn #%zu (finish): FINISH pushes a token that nothing can pop (token imbalance)", i);
        }
    }
    if (finish_at == p->n)
        return tsr_err(TSR_EVERIFY, "insn #%zu: stream of %zu instructions has no FINISH: the device would never signal completion", p->n, p->n);
    if (finish_at != p->n - 1)
        return tsr_err(TSR_EVERIFY, "insn #%zu (%s): instruction after FINISH (#%zu); FINISH must be the last instruction",
                       finish_at + 1, tsr_insn_desc(&p->insns[finish_at + 1], d, sizeof d), finish_at);
    return TSR_OK;
}

int tsr_pipe_create(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n,
                    tsr_pipe_exec_fn exec, void *ctx, uint64_t seed, tsr_pipe_t **out)
{
    int rc = TSR_OK;
    tsr_pipe_t *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return tsr_err(TSR_ENOMEM, "out of memory");
    p->cfg = cfg;
    p->insns = insns;
    p->n = n;
    p->exec = exec;
    p->ctx = ctx;
    p->rng = seed ? seed * 0x9E3779B97F4A7C15ull | 1 : 0;
    if (n > UINT32_MAX) {
        rc = tsr_err(TSR_EVERIFY, "stream of %zu instructions is too long", n);
        goto out;
    }
    if ((rc = precheck(p)))
        goto out;
    for (int s = 0; s < TSR_STAGE_COUNT; s++) {
        p->cmd[s].ring = malloc(sizeof(uint32_t) * (size_t)cfg->cmd_queue_depth);
        p->stage_list[s] = malloc(sizeof(uint32_t) * (n ? n : 1));
        if (!p->cmd[s].ring || !p->stage_list[s]) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            goto out;
        }
    }
    for (int q = 0; q < TSR_Q_COUNT; q++) {
        p->tok[q].ring = malloc(sizeof(token_t) * (size_t)cfg->dep_queue_depth);
        if (!p->tok[q].ring) {
            rc = tsr_err(TSR_ENOMEM, "out of memory");
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int s = tsr_insn_stage(&insns[i]);
        p->stage_list[s][p->stage_total[s]++] = (uint32_t)i;
    }
out:
    if (rc) {
        tsr_pipe_destroy(p);
        return rc;
    }
    *out = p;
    return TSR_OK;
}

void tsr_pipe_destroy(tsr_pipe_t *p)
{
    if (!p)
        return;
    for (int s = 0; s < TSR_STAGE_COUNT; s++) {
        free(p->cmd[s].ring);
        free(p->stage_list[s]);
    }
    for (int q = 0; q < TSR_Q_COUNT; q++)
        free(p->tok[q].ring);
    free(p);
}

uint64_t tsr_pipe_executed(const tsr_pipe_t *p) { return p->executed; }

void tsr_pipe_clock(const tsr_pipe_t *p, int s, uint32_t clock[TSR_STAGE_COUNT])
{
    memcpy(clock, p->st[s].clock, sizeof p->st[s].clock);
}

static void tok_push(tsr_pipe_t *p, int q, const uint32_t clock[TSR_STAGE_COUNT], uint32_t from)
{
    tqueue_t *t = &p->tok[q];
    token_t *k = &t->ring[(t->head + t->count) % (uint32_t)p->cfg->dep_queue_depth];
    memcpy(k->clock, clock, sizeof k->clock);
    k->from = from;
    t->count++;
}

static void tok_pop(tsr_pipe_t *p, int q, uint32_t clock[TSR_STAGE_COUNT])
{
    tqueue_t *t = &p->tok[q];
    token_t *k = &t->ring[t->head];
    for (int s = 0; s < TSR_STAGE_COUNT; s++)
        if (k->clock[s] > clock[s])
            clock[s] = k->clock[s];
    t->head = (t->head + 1) % (uint32_t)p->cfg->dep_queue_depth;
    t->count--;
}

static uint64_t step_fetch(tsr_pipe_t *p, uint64_t max);
static uint64_t step_stage(tsr_pipe_t *p, int s, uint64_t max, uint64_t *budget);
static int deadlock_report(tsr_pipe_t *p);

/* Checks at FINISH. To name the real defect, first let the load and store
 * stages run on (without executing anything) until they stop: if one is
 * stuck, the stream deadlocks; if tokens remain, they are unbalanced; only
 * then is leftover work a FINISH-ordering error. */
static int finish_checks(tsr_pipe_t *p, uint32_t idx)
{
    const stage_t *c = &p->st[TSR_STAGE_COMPUTE];
    char d[32];
    tsr_pipe_exec_fn exec = p->exec;
    uint32_t clock_load = c->clock[TSR_STAGE_LOAD], clock_store = c->clock[TSR_STAGE_STORE];
    uint64_t executed = p->executed, budget = UINT64_MAX;
    p->exec = NULL;
    for (;;) {
        uint64_t progress = step_fetch(p, UINT64_MAX);
        progress += step_stage(p, TSR_STAGE_LOAD, UINT64_MAX, &budget);
        progress += step_stage(p, TSR_STAGE_STORE, UINT64_MAX, &budget);
        if (!progress)
            break;
    }
    p->exec = exec;
    p->executed = executed;
    if (p->st[TSR_STAGE_LOAD].state != ST_IDLE || p->st[TSR_STAGE_STORE].state != ST_IDLE) {
        deadlock_report(p);
        return tsr_err_prefix(TSR_EDEADLOCK, "insn #%u (finish): a stage is blocked forever, FINISH cannot wait for it: ", idx);
    }
    for (int q = 0; q < TSR_Q_COUNT; q++) {
        const tqueue_t *t = &p->tok[q];
        if (t->count) {
            uint32_t from = t->ring[t->head].from;
            return tsr_err(TSR_EVERIFY,
                           "insn #%u (%s): token imbalance: %u token(s) left in queue %s at FINISH, "
                           "the first pushed by insn #%u (%s) and never popped",
                           from, tsr_insn_desc(&p->insns[from], d, sizeof d), t->count,
                           tsr_queue_name(q), from, d);
        }
    }
    const uint32_t known[TSR_STAGE_COUNT] = {clock_load, 0, clock_store};
    for (int s = 0; s < TSR_STAGE_COUNT; s++) {
        if (s == TSR_STAGE_COMPUTE || known[s] >= p->stage_total[s])
            continue;
        uint32_t j = p->stage_list[s][known[s]];
        return tsr_err(TSR_EVERIFY,
                       "insn #%u (finish): %s-stage insn #%u (%s) is not ordered before FINISH, so "
                       "completion could be signalled before it runs (make the last %s-stage "
                       "instruction push a token that compute pops before FINISH)",
                       idx, tsr_stage_name(s), j, tsr_insn_desc(&p->insns[j], d, sizeof d),
                       tsr_stage_name(s));
    }
    return TSR_OK;
}

/* Advance fetch by at most max dispatches; returns how many. */
static uint64_t step_fetch(tsr_pipe_t *p, uint64_t max)
{
    uint64_t done = 0;
    while (done < max && p->pc < p->n) {
        int s = tsr_insn_stage(&p->insns[p->pc]);
        cqueue_t *q = &p->cmd[s];
        if (q->count == (uint32_t)p->cfg->cmd_queue_depth)
            break;
        q->ring[(q->head + q->count) % (uint32_t)p->cfg->cmd_queue_depth] = (uint32_t)p->pc++;
        q->count++;
        done++;
    }
    return done;
}

/* Advance stage s by at most max state changes; returns how many, or sets p->error. */
static uint64_t step_stage(tsr_pipe_t *p, int s, uint64_t max, uint64_t *budget)
{
    stage_t *st = &p->st[s];
    uint64_t done = 0;
    while (done < max && !p->finished && !p->error) {
        if (st->state == ST_IDLE) {
            cqueue_t *q = &p->cmd[s];
            if (!q->count)
                break;
            st->idx = q->ring[q->head];
            q->head = (q->head + 1) % (uint32_t)p->cfg->cmd_queue_depth;
            q->count--;
            st->state = ST_POPPING;
            done++;
        }
        const tsr_insn_t *in = &p->insns[st->idx];
        if (st->state == ST_POPPING) {
            int qp = in->pop_prev ? q_pop_prev(s) : -1;
            int qn = in->pop_next ? q_pop_next(s) : -1;
            if ((qp >= 0 && !p->tok[qp].count) || (qn >= 0 && !p->tok[qn].count))
                break;
            if (*budget == 0)
                break;
            if (qp >= 0)
                tok_pop(p, qp, st->clock);
            if (qn >= 0)
                tok_pop(p, qn, st->clock);
            st->state = ST_EXEC;
        }
        if (st->state == ST_EXEC) {
            /* Each exec call is one unit of budget; a long instruction
             * returns TSR_PIPE_MORE and is resumed, so callers regain
             * control (timeouts) and other stages interleave. */
            if (*budget == 0)
                break;
            (*budget)--;
            if (p->exec) {
                int rc = p->exec(p->ctx, st->idx, in);
                if (rc == TSR_PIPE_MORE) {
                    done++;
                    break;
                }
                if (rc) {
                    char d[32];
                    p->error = tsr_err_prefix(rc, "insn #%u (%s): ", st->idx, tsr_insn_desc(in, d, sizeof d));
                    break;
                }
            }
            st->clock[s]++;
            p->executed++;
            done++;
            if (in->opcode == TSR_OP_FINISH) {
                st->state = ST_IDLE;
                int rc = finish_checks(p, st->idx);
                if (rc) {
                    p->error = rc;
                    break;
                }
                p->finished = 1;
                st->state = ST_IDLE;
                break;
            }
            st->push_prev_left = in->push_prev ? 1 : 0;
            st->push_next_left = in->push_next ? 1 : 0;
            st->state = ST_PUSHING;
        }
        if (st->state == ST_PUSHING) {
            if (st->push_prev_left) {
                int q = q_push_prev(s);
                /* q >= 0 always (precheck rejects illegal flags); the test keeps the compiler sure. */
                if (q >= 0 && p->tok[q].count < (uint32_t)p->cfg->dep_queue_depth) {
                    tok_push(p, q, st->clock, st->idx);
                    st->push_prev_left = 0;
                    done++;
                }
            }
            if (st->push_next_left) {
                int q = q_push_next(s);
                if (q >= 0 && p->tok[q].count < (uint32_t)p->cfg->dep_queue_depth) {
                    tok_push(p, q, st->clock, st->idx);
                    st->push_next_left = 0;
                    done++;
                }
            }
            if (st->push_prev_left || st->push_next_left)
                break;
            st->state = ST_IDLE;
        }
    }
    return done;
}

static int deadlock_report(tsr_pipe_t *p)
{
    char msg[900];
    size_t len = 0;
    char d[32];
#define APPEND(...)                                                                                \
    do {                                                                                           \
        int k_ = snprintf(msg + len, sizeof msg - len, __VA_ARGS__);                               \
        if (k_ > 0)                                                                                \
            len = len + (size_t)k_ < sizeof msg ? len + (size_t)k_ : sizeof msg - 1;               \
    } while (0)
    /* Name the earliest blocked instruction first: it is usually the culprit. */
    uint32_t first = UINT32_MAX;
    for (int s = 0; s < TSR_STAGE_COUNT; s++)
        if (p->st[s].state != ST_IDLE && p->st[s].idx < first)
            first = p->st[s].idx;
    if (first == UINT32_MAX)
        first = (uint32_t)p->pc;
    APPEND("insn #%u: deadlock after %llu instructions:", first, (unsigned long long)p->executed);
    for (int s = 0; s < TSR_STAGE_COUNT; s++) {
        const stage_t *st = &p->st[s];
        const tsr_insn_t *in = &p->insns[st->idx];
        APPEND(" %s stage ", tsr_stage_name(s));
        if (st->state == ST_IDLE) {
            APPEND("idle (no command);");
        } else if (st->state == ST_EXEC) {
            APPEND("executing #%u (%s);", st->idx, tsr_insn_desc(in, d, sizeof d));
        } else if (st->state == ST_POPPING) {
            int qp = in->pop_prev ? q_pop_prev(s) : -1, qn = in->pop_next ? q_pop_next(s) : -1;
            int q = (qp >= 0 && !p->tok[qp].count) ? qp : qn;
            APPEND("blocked at #%u (%s) waiting for a token on %s;", st->idx,
                   tsr_insn_desc(in, d, sizeof d), tsr_queue_name(q));
        } else {
            int q = st->push_prev_left ? q_push_prev(s) : q_push_next(s);
            APPEND("blocked at #%u (%s) pushing to full queue %s;", st->idx,
                   tsr_insn_desc(in, d, sizeof d), tsr_queue_name(q));
        }
    }
    if (p->pc < p->n) {
        int s = tsr_insn_stage(&p->insns[p->pc]);
        APPEND(" fetch blocked at #%zu: %s command queue full (%d entries);", p->pc,
               tsr_stage_name(s), p->cfg->cmd_queue_depth);
    } else {
        APPEND(" fetch done;");
    }
    APPEND(" tokens:");
    for (int q = 0; q < TSR_Q_COUNT; q++)
        APPEND(" %s %u/%d", tsr_queue_name(q), p->tok[q].count, p->cfg->dep_queue_depth);
#undef APPEND
    return tsr_err(TSR_EDEADLOCK, "%s", msg);
}

static uint32_t rnd(tsr_pipe_t *p, uint32_t n)
{
    p->rng ^= p->rng << 13;
    p->rng ^= p->rng >> 7;
    p->rng ^= p->rng << 17;
    return (uint32_t)(p->rng % n);
}

int tsr_pipe_run(tsr_pipe_t *p, uint64_t max_insns, int *done)
{
    uint64_t budget = max_insns ? max_insns : UINT64_MAX;
    *done = p->finished;
    if (p->error)
        return p->error;
    while (!p->finished && budget) {
        uint64_t progress = 0;
        if (!p->rng) {
            progress += step_fetch(p, UINT64_MAX);
            for (int s = 0; s < TSR_STAGE_COUNT && !p->error; s++)
                progress += step_stage(p, s, UINT64_MAX, &budget);
        } else {
            /* One step of each agent, in a random order. */
            int order[4] = {0, 1, 2, 3};
            for (int i = 3; i > 0; i--) {
                int j = (int)rnd(p, (uint32_t)i + 1), t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
            for (int i = 0; i < 4 && !p->error && !p->finished; i++)
                progress += order[i] == 3 ? step_fetch(p, 1 + rnd(p, 3))
                                          : step_stage(p, order[i], 1 + rnd(p, 4), &budget);
        }
        if (p->error)
            return p->error;
        if (!progress && !p->finished && budget)
            return p->error = deadlock_report(p);
    }
    *done = p->finished;
    return TSR_OK;
}
