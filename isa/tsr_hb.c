/*
 * tsr_hb: happens-before race detection on shared on-chip rows (see
 * tsr_hb.h). Shadow state per row as flat ordinal arrays; GEMM/ALU
 * footprints as row bitsets over the words they span, kept as runs.
 */
#include "tsr_hb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"

/* What two stages share: three on-chip buffers and DRAM (in segments). */
enum { SB_INP, SB_WGT, SB_OUT, SB_DRAM, SB_COUNT };

static const char *const sb_name[SB_COUNT] = {"inp", "wgt", "out", "DRAM"};

/* One stage writes each shared buffer (tsr_insn_stage): LOADs of inp and
 * wgt run in the load stage, every GEMM/ALU (out's writer) in compute,
 * STOREs (DRAM's) in store. So a write never races with a write, and what
 * is known about a row is the last write's ordinal in that stage and, per
 * reading stage, the latest read since it. */
static const int sb_writer[SB_COUNT] = {TSR_STAGE_LOAD, TSR_STAGE_LOAD, TSR_STAGE_COMPUTE, TSR_STAGE_STORE};

/* The shadow of a buffer, row by row as flat arrays of ordinals (1-based
 * within their stage, 0 = none): an access checks and stamps its runs with
 * a few vector operations per row, whatever other instructions left there
 * (rows kept as segments alike fragmented under the GEMMs' read stamps and
 * cost a third of a ResNet-50's first execution). Ordinals, not stream
 * indices: the stamp is one word, the index is ord[stage][ordinal]. */
typedef struct {
    uint32_t *w;                     /* w[r]: the last write (writer-stage ordinal) */
    uint32_t *rd[TSR_STAGE_COUNT];   /* rd[t][r]: the latest stage-t read (a write leaves it: stamp_runs) */
    unsigned readers;                /* bit t: rd[t] may hold a read */
} shadow_t;

/* Rows [lo, hi). */
typedef struct {
    uint32_t lo, hi;
} run_t;

/* The rows one index kind of a GEMM/ALU reaches, as runs, and what they
 * depend on: the uop slice at a gen (its bases), the loop and the mode.
 * A tiled stream repeats many of them (of a ResNet-18's, a third are one
 * of the 16 before), kept in slots by a hash of the key. */
typedef struct {
    uint64_t gen;
    uint32_t key[8];                 /* kind, depthwise, uop_bgn, uop_end, iter_out, iter_in, factor out, in */
    run_t *runs;
    uint32_t n, cap;                 /* runs used / allocated */
    int valid;
} fp_t;

#define FP_SLOTS 64 /* a power of two */

/* Rows [lo, hi) before clipping to a buffer. */
typedef struct {
    uint64_t lo, hi;
} iv_t;

/* The intervals a footprint is built from without bitsets, at most. */
#define IV_MAX 4096

/* A set of rows as a bitset whose words outside [lo, hi) are zero: the
 * sets are progressions and uop bases a few words wide in a bitset as wide
 * as the deepest buffer, so every pass goes over the span alone. */
typedef struct {
    uint64_t *w;
    size_t lo, hi;                   /* the span (lo == hi: empty) */
} bset_t;

struct tsr_hb {
    const tsr_config_t *cfg;
    const tsr_insn_t *insns;
    size_t n;
    shadow_t sh[SB_COUNT];           /* shadow of each shared buffer */
    uint32_t *ord[TSR_STAGE_COUNT];  /* ord[t][k]: stream index of stage t's k-th instruction */
    uint32_t depth[SB_COUNT];        /* rows per shared buffer (DRAM: segments) */
    uint64_t *bounds;                /* DRAM segment boundaries (depth[SB_DRAM] + 1) */
    size_t nw;                       /* 64-bit words of a bitset over the deepest buffer */
    bset_t base[3];                  /* uop bases (dst, src, wgt) of the cached kernel slice */
    bset_t lo, li, l, f;             /* scratch: loop offsets (outer, inner, both), footprint */
    uint64_t gen;                    /* bumped by every uop LOAD: invalidates the caches */
    uint64_t c_gen;                  /* the bases were built at this gen ... */
    uint32_t c_bgn, c_end;           /* ... for this slice */
    fp_t fp[FP_SLOTS];               /* footprints as runs, in the slot of their key's hash */
    iv_t *iv, *ivl;                  /* scratch: a footprint's intervals, the loop's (IV_MAX each) */
    uint32_t *bases;                 /* scratch: a uop slice's bases (uop_depth) */
    int c_valid;                     /* bases hold that slice */
};

/* Nothing known about any of the rows (the rest is written before read). */
static int shadow_alloc(shadow_t *sh, uint32_t depth)
{
    const size_t d = depth ? depth : 1;
    int ok = (sh->w = calloc(d, sizeof(uint32_t))) != NULL;
    for (int t = 0; t < TSR_STAGE_COUNT; t++)
        ok &= (sh->rd[t] = calloc(d, sizeof(uint32_t))) != NULL;
    sh->readers = 0;
    return ok ? TSR_OK : TSR_ENOMEM;
}

static void shadow_free(shadow_t *sh)
{
    free(sh->w);
    sh->w = NULL;
    for (int t = 0; t < TSR_STAGE_COUNT; t++) {
        free(sh->rd[t]);
        sh->rd[t] = NULL;
    }
}

int tsr_hb_create(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n, tsr_hb_t **out)
{
    tsr_hb_t *h = calloc(1, sizeof *h);
    *out = NULL;
    if (!h)
        return tsr_err(TSR_ENOMEM, "out of memory");
    if (n >= (size_t)INT32_MAX) { /* (ordinals compare as signed 32-bit differences) */
        free(h);
        return tsr_err(TSR_ENOMEM, "%zu instructions are too many to check for races", n);
    }
    h->cfg = cfg;
    h->insns = insns;
    h->n = n;
    h->depth[SB_INP] = cfg->inp_depth;
    h->depth[SB_WGT] = cfg->wgt_depth;
    h->depth[SB_OUT] = cfg->out_depth > cfg->acc_depth ? cfg->out_depth : cfg->acc_depth;
    uint32_t maxd = 1;
    for (int b = 0; b < SB_DRAM; b++)
        if (h->depth[b] > maxd)
            maxd = h->depth[b];
    /* a depthwise op's weight index names a tap group: it reaches G times the rows */
    if (((uint64_t)cfg->wgt_depth << cfg->dw_group_bits) > maxd)
        maxd = (uint32_t)((uint64_t)cfg->wgt_depth << cfg->dw_group_bits);
    h->nw = (maxd + 63) / 64;
    int ok = 1;
    for (int b = 0; b < SB_DRAM; b++)
        ok &= shadow_alloc(&h->sh[b], h->depth[b]) == TSR_OK;
    for (int t = 0; t < TSR_STAGE_COUNT; t++) /* (ordinals are 1-based: n + 1 entries) */
        ok &= (h->ord[t] = malloc((n + 1) * sizeof(uint32_t))) != NULL;
    for (int k = 0; k < 3; k++)
        ok &= (h->base[k].w = calloc(h->nw, 8)) != NULL;
    ok &= (h->lo.w = calloc(h->nw, 8)) && (h->li.w = calloc(h->nw, 8)) && (h->l.w = calloc(h->nw, 8)) &&
          (h->f.w = calloc(h->nw, 8));
    ok &= (h->iv = malloc(IV_MAX * sizeof *h->iv)) && (h->ivl = malloc(IV_MAX * sizeof *h->ivl)) &&
          (h->bases = malloc((cfg->uop_depth ? cfg->uop_depth : 1) * sizeof *h->bases));
    if (!ok) {
        tsr_hb_destroy(h);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    *out = h;
    return TSR_OK;
}

void tsr_hb_destroy(tsr_hb_t *h)
{
    if (!h)
        return;
    for (int b = 0; b < SB_COUNT; b++)
        shadow_free(&h->sh[b]);
    for (int t = 0; t < TSR_STAGE_COUNT; t++)
        free(h->ord[t]);
    for (int k = 0; k < FP_SLOTS; k++)
        free(h->fp[k].runs);
    for (int k = 0; k < 3; k++)
        free(h->base[k].w);
    free(h->bounds);
    free(h->iv);
    free(h->ivl);
    free(h->bases);
    free(h->lo.w);
    free(h->li.w);
    free(h->l.w);
    free(h->f.w);
    free(h);
}

int tsr_hb_set_dram(tsr_hb_t *h, const uint64_t *bounds, size_t n)
{
    shadow_free(&h->sh[SB_DRAM]);
    free(h->bounds);
    h->bounds = NULL;
    h->depth[SB_DRAM] = 0;
    if (n < 2)
        return TSR_OK;
    if (n - 1 >= UINT32_MAX)
        return tsr_err(TSR_ENOMEM, "%zu DRAM segments are too many to track", n - 1);
    h->bounds = malloc(n * sizeof *bounds);
    if (!h->bounds || shadow_alloc(&h->sh[SB_DRAM], (uint32_t)(n - 1)))
        return tsr_err(TSR_ENOMEM, "out of memory");
    memcpy(h->bounds, bounds, n * sizeof *bounds);
    h->depth[SB_DRAM] = (uint32_t)(n - 1);
    return TSR_OK;
}

/* ---------------------------------------------------------- shadow rows */

/* The instruction an access by `who` conflicts with on row x of buffer b,
 * or -1: for a read the last write, unless known done; for a write the
 * first stage's latest read since it that is not (the writer's own stage
 * neither writes twice unordered nor reads). */
static int64_t conflict(const tsr_hb_t *h, int b, uint32_t x, const tsr_hb_who_t *who, int write, int *other_writes)
{
    const shadow_t *sh = &h->sh[b];
    const int ws = sb_writer[b];
    if (!write) {
        if (ws != who->stage && sh->w[x] > who->clock[ws]) {
            *other_writes = 1;
            return h->ord[ws][sh->w[x]];
        }
        return -1;
    }
    for (int t = 0; t < TSR_STAGE_COUNT; t++)
        if (t != who->stage && (sh->readers >> t & 1) && sh->rd[t][x] > who->clock[t]) {
            *other_writes = 0;
            return h->ord[t][sh->rd[t][x]];
        }
    return -1;
}

/* The message has no "insn #N (op): " prefix: the dry run that calls the
 * detector adds it. */
static int race(const tsr_hb_t *h, const tsr_hb_who_t *who, int b, uint32_t lo, uint32_t hi,
                int write, uint32_t other, int other_writes)
{
    char d[32];
    const tsr_insn_t *o = &h->insns[other];
    char where[64];
    if (b == SB_DRAM)
        snprintf(where, sizeof where, "DRAM bytes [0x%llx, 0x%llx)", (unsigned long long)h->bounds[lo],
                 (unsigned long long)h->bounds[hi]);
    else
        snprintf(where, sizeof where, "%s rows [%u, %u)", sb_name[b], lo, hi);
    return tsr_err(TSR_EVERIFY,
                   "race on %s: this %s-stage instruction %s them and insn #%u (%s) "
                   "in the %s stage %s them, with no chain of tokens ordering the two (the result "
                   "would depend on the stage schedule)",
                   where, tsr_stage_name(who->stage), write ? "writes" : "reads", other,
                   tsr_insn_desc(o, d, sizeof d), tsr_stage_name(tsr_insn_stage(o)),
                   other_writes ? "writes" : "reads");
}

/* d[lo..hi) = x while checking v[lo..hi) against c: bit 31 of the result
 * is set iff some v[r] > c. (Ordinals are below 2^31, so c - v[r] is
 * negative exactly then: an OR of differences, which the compiler
 * vectorizes with the stores.) v may be NULL: nothing to check. */
static uint32_t check_stamp(const uint32_t *restrict v, uint32_t *restrict d, uint32_t lo, uint32_t hi, uint32_t c,
                            uint32_t x)
{
    uint32_t acc = 0;
    if (!v) {
        for (uint32_t r = lo; r < hi; r++)
            d[r] = x;
        return 0;
    }
    for (uint32_t r = lo; r < hi; r++) {
        acc |= c - v[r];
        d[r] = x;
    }
    return acc;
}

static uint32_t check_only(const uint32_t *v, uint32_t lo, uint32_t hi, uint32_t c)
{
    uint32_t acc = 0;
    for (uint32_t r = lo; r < hi; r++)
        acc |= c - v[r];
    return acc;
}

/* Stamp the access of runs[0..n) and say whether it may conflict: a read
 * is the latest of its stage (checked against the last write), a write the
 * rows' last write (checked against each other stage's latest read). One
 * pass per run: what a read stamps (its stage's reads) a read's conflict
 * does not look at, nor does a write's conflict look at the writes; a
 * race ends the pass, so the stamps of a racing access are never read.
 * A write leaves the reads before it in place: a stage's clock only grows
 * (tsr_pipe merges clocks at token pops), so a read this write did not
 * conflict with cannot conflict with a later write of the same stage. */
static int stamp_runs(tsr_hb_t *h, const tsr_hb_who_t *who, int b, const run_t *runs, uint32_t n, int write)
{
    shadow_t *sh = &h->sh[b];
    const int ws = sb_writer[b];
    const uint32_t seq = who->clock[who->stage] + 1;
    uint32_t acc = 0;
    if (!write) {
        const uint32_t *v = ws != who->stage ? sh->w : NULL;
        for (uint32_t j = 0; j < n; j++)
            acc |= check_stamp(v, sh->rd[who->stage], runs[j].lo, runs[j].hi, who->clock[ws], seq);
        sh->readers |= 1u << who->stage;
        return (int)(acc >> 31);
    }
    int first = -1; /* the reading stage checked while stamping */
    for (int t = 0; t < TSR_STAGE_COUNT; t++)
        if (t != who->stage && (sh->readers >> t & 1)) {
            if (first < 0)
                first = t;
            else
                for (uint32_t j = 0; j < n; j++)
                    acc |= check_only(sh->rd[t], runs[j].lo, runs[j].hi, who->clock[t]);
        }
    for (uint32_t j = 0; j < n; j++)
        acc |= check_stamp(first < 0 ? NULL : sh->rd[first], sh->w, runs[j].lo, runs[j].hi,
                           first < 0 ? 0 : who->clock[first], seq);
    return (int)(acc >> 31);
}

/* The race on the first row of runs[0..n) (ascending, disjoint, inside the
 * buffer) that conflicts with an earlier access, naming the rows after it
 * in its run with the same conflict. */
static int report(const tsr_hb_t *h, const tsr_hb_who_t *who, int b, const run_t *runs, uint32_t n, int write)
{
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t r = runs[j].lo; r < runs[j].hi; r++) {
            int ow = 0, ow2 = 0;
            const int64_t other = conflict(h, b, r, who, write, &ow);
            if (other < 0)
                continue;
            uint32_t e = r + 1;
            while (e < runs[j].hi && conflict(h, b, e, who, write, &ow2) == other && ow2 == ow)
                e++;
            return race(h, who, b, r, e, write, (uint32_t)other, ow);
        }
    return tsr_err(TSR_EVERIFY, "internal: a race on %s rows that none of them shows", sb_name[b]);
}

/* Rows of runs[0..n) (ascending, disjoint, clipped to the buffer) of shared
 * buffer b, read or written by `who`. */
static int access_runs(tsr_hb_t *h, const tsr_hb_who_t *who, int b, const run_t *runs, uint32_t n, int write)
{
    if (!n)
        return TSR_OK;
    if (write && who->stage != sb_writer[b])
        return tsr_err(TSR_EVERIFY, "internal: a %s-stage instruction writes %s", tsr_stage_name(who->stage),
                       sb_name[b]);
    return stamp_runs(h, who, b, runs, n, write) ? report(h, who, b, runs, n, write) : TSR_OK;
}

/* Rows [lo, hi) of shared buffer b, read or written by `who`. */
static int access(tsr_hb_t *h, const tsr_hb_who_t *who, int b, uint32_t lo, uint32_t hi, int write)
{
    if (hi > h->depth[b])
        hi = h->depth[b]; /* tsr_verify rejected anything past the end already */
    const run_t r = {lo, hi};
    return access_runs(h, who, b, &r, lo < hi, write);
}

/* ---------------------------------------------------- row-set footprints */

static void bs_clear(bset_t *s)
{
    if (s->hi > s->lo)
        memset(s->w + s->lo, 0, (s->hi - s->lo) * 8);
    s->lo = s->hi = 0;
}

static void bs_set(bset_t *s, uint64_t r)
{
    const size_t i = (size_t)(r / 64);
    s->w[i] |= 1ull << (r % 64);
    if (s->hi == s->lo) {
        s->lo = i;
        s->hi = i + 1;
    } else {
        s->lo = i < s->lo ? i : s->lo;
        s->hi = i + 1 > s->hi ? i + 1 : s->hi;
    }
}

static void bs_copy(bset_t *dst, const bset_t *src)
{
    bs_clear(dst);
    if (src->hi > src->lo)
        memcpy(dst->w + src->lo, src->w + src->lo, (src->hi - src->lo) * 8);
    dst->lo = src->lo;
    dst->hi = src->hi;
}

/* Bits set in s (the bit count in plain arithmetic: without -mpopcnt the
 * builtin is a call into libgcc, which was a tenth of a verified ResNet-18). */
static size_t popcount(const bset_t *s)
{
    size_t c = 0;
    for (size_t i = s->lo; i < s->hi; i++) {
        uint64_t x = s->w[i];
        x = x - ((x >> 1) & 0x5555555555555555ull);
        x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
        x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
        c += (size_t)((x * 0x0101010101010101ull) >> 56);
    }
    return c;
}

/* dst |= src << k (within nw words). */
static void or_shifted(bset_t *dst, const bset_t *src, size_t nw, uint32_t k)
{
    const size_t ws = k / 64;
    const unsigned bs = k % 64;
    if (src->hi == src->lo || src->lo + ws >= nw)
        return;
    /* dst word j takes src words j-ws and j-ws-1: nonzero for j-ws in [lo, hi] */
    const size_t top = src->hi + ws < nw ? src->hi + ws : nw - 1;
    for (size_t j = top + 1; j-- > src->lo + ws;) {
        uint64_t v = j - ws < src->hi ? src->w[j - ws] << bs : 0;
        if (bs && j - ws > src->lo)
            v |= src->w[j - ws - 1] >> (64 - bs);
        if (v) {
            dst->w[j] |= v;
            if (dst->hi == dst->lo) {
                dst->lo = j;
                dst->hi = j + 1;
            } else {
                dst->lo = j < dst->lo ? j : dst->lo;
                dst->hi = j + 1 > dst->hi ? j + 1 : dst->hi;
            }
        }
    }
}

/* out = {x + y : x in a, y in b} within nw words, shifting the larger set
 * by each member of the smaller. */
static void minkowski(bset_t *out, const bset_t *a, const bset_t *b, size_t nw)
{
    if (popcount(a) > popcount(b)) {
        const bset_t *t = a;
        a = b;
        b = t;
    }
    bs_clear(out);
    for (size_t i = a->lo; i < a->hi; i++)
        for (uint64_t w = a->w[i]; w; w &= w - 1) {
            const uint32_t k = (uint32_t)(i * 64 + (size_t)__builtin_ctzll(w));
            if (b->lo + k / 64 >= nw)
                return; /* (this and larger shifts move everything past the end) */
            or_shifted(out, b, nw, k);
        }
}

/* {k * step : k < count} below depth. */
static void progression(bset_t *set, uint32_t count, uint32_t step, uint32_t depth)
{
    bs_clear(set);
    bs_set(set, 0);
    if (!step)
        return;
    for (uint64_t k = 1, v = step; k < count && v < depth; k++, v += step)
        bs_set(set, v);
}

/* The rows of bitset f below depth as runs into out (room for depth / 2 + 1:
 * runs alternate with gaps); how many. */
static uint32_t set_runs(const bset_t *f, uint32_t depth, run_t *out)
{
    const size_t nw = f->hi < (depth + 63) / 64 ? f->hi : (depth + 63) / 64;
    uint32_t n = 0, r = (uint32_t)(f->lo * 64);
    while (r < depth) {
        size_t w = r / 64; /* the next set bit at or after r, then the next clear one after it */
        if (w >= nw)
            break;
        uint64_t x = f->w[w] & (~0ull << (r % 64));
        while (!x && ++w < nw)
            x = f->w[w];
        if (!x)
            break;
        const uint32_t s = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(x));
        if (s >= depth)
            break;
        w = s / 64;
        x = ~f->w[w] & (~0ull << (s % 64));
        while (!x && ++w < nw)
            x = ~f->w[w];
        uint32_t e = x ? (uint32_t)(w * 64 + (size_t)__builtin_ctzll(x)) : (uint32_t)(nw * 64);
        if (e > depth)
            e = depth;
        out[n++] = (run_t){s, e};
        r = e;
    }
    return n;
}

/* The rows one index kind (0 dst, 1 src, 2 wgt) of a GEMM/ALU reaches,
 * from the cached uop bases, into h->f. */
static void loop_rows(tsr_hb_t *h, const tsr_insn_t *in, int kind, uint32_t depth)
{
    uint32_t fo = kind == 0 ? in->dst_factor_out : kind == 1 ? in->src_factor_out : in->wgt_factor_out;
    uint32_t fi = kind == 0 ? in->dst_factor_in : kind == 1 ? in->src_factor_in : in->wgt_factor_in;
    progression(&h->lo, in->iter_out, fo, depth);
    progression(&h->li, in->iter_in, fi, depth);
    minkowski(&h->l, &h->lo, &h->li, h->nw);
    minkowski(&h->f, &h->base[kind], &h->l, h->nw);
}

/* h->f |= h->f << 1 | ... | h->f << (k-1): the rows a depthwise op reads
 * from each src (the checks before keep src+k-1 inside the buffer). */
static void widen_rows(tsr_hb_t *h, uint32_t k)
{
    bs_copy(&h->l, &h->f);
    for (uint32_t s = 1; s < k; s++)
        or_shifted(&h->f, &h->l, h->nw, s);
}

/* h->f := { s >> bits : s in h->f }: the weight rows of a set of tap groups. */
static void group_rows(tsr_hb_t *h, int bits)
{
    bs_copy(&h->l, &h->f);
    bs_clear(&h->f);
    for (size_t i = h->l.lo; i < h->l.hi; i++)
        for (uint64_t w = h->l.w[i]; w; w &= w - 1)
            bs_set(&h->f, (i * 64 + (uint64_t)__builtin_ctzll(w)) >> bits);
}

/* Bases of uops [bgn, end) per kind; 0 if some uop is unknown. */
static int load_bases(tsr_hb_t *h, const tsr_insn_t *in, const tsr_uop_t *uops, const uint8_t *known)
{
    if (h->c_valid && h->c_gen == h->gen && h->c_bgn == in->uop_bgn && h->c_end == in->uop_end)
        return 1;
    h->c_valid = 0;
    for (int k = 0; k < 3; k++)
        bs_clear(&h->base[k]);
    uint64_t lim = (uint64_t)h->nw * 64;
    for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
        if (!known[u])
            return 0;
        const uint32_t v[3] = {uops[u].dst, uops[u].src, uops[u].wgt};
        for (int k = 0; k < 3; k++)
            if (v[k] < lim) /* out-of-range bases were rejected unless unused (reset, ALU src) */
                bs_set(&h->base[k], v[k]);
    }
    h->c_valid = 1;
    h->c_gen = h->gen;
    h->c_bgn = in->uop_bgn;
    h->c_end = in->uop_end;
    return 1;
}

/* The DRAM rows of a LOAD (read) or STORE (write), as tracked segments. */
static int access_dram(tsr_hb_t *h, const tsr_hb_who_t *who, const tsr_insn_t *in)
{
    uint32_t nseg = h->depth[SB_DRAM];
    if (!nseg || !in->x_size || !in->y_size)
        return TSR_OK;
    uint64_t eb = tsr_config_elem_bytes(h->cfg, (int)in->mem_type);
    const uint64_t *bd = h->bounds;
    int write = in->opcode == TSR_OP_STORE;
    uint64_t first = (uint64_t)in->dram_base * eb;
    uint64_t end = ((uint64_t)in->dram_base + (uint64_t)(in->y_size - 1) * in->x_stride + in->x_size) * eb;
    if (end <= bd[0] || first >= bd[nseg])
        return TSR_OK;
    for (uint64_t y = 0; y < in->y_size; y++) {
        uint64_t lo = ((uint64_t)in->dram_base + y * in->x_stride) * eb, hi = lo + in->x_size * eb;
        /* First segment ending after lo. */
        uint32_t a = 0, b = nseg;
        while (a < b) {
            uint32_t mid = a + (b - a) / 2;
            if (bd[mid + 1] <= lo)
                a = mid + 1;
            else
                b = mid;
        }
        uint32_t e = a;
        while (e < nseg && bd[e] < hi)
            e++;
        /* A STORE row no LOAD reads has no boundaries of its own (the verifier adds those of the rows
           LOADs read): it races with nothing, and the segment it falls in may hold other bytes a LOAD
           reads (a false race). The rows LOADs read begin and end on boundaries. */
        if (write && !(a < e && bd[a] == lo && bd[e] == hi))
            continue;
        int rc;
        if (a < e && (rc = access(h, who, SB_DRAM, a, e, write)))
            return rc;
    }
    return TSR_OK;
}

/* ----------------------------------------------- footprints as intervals */

/* The loop offsets {i*fo + j*fi : i < iter_out, j < iter_in} as ascending
 * disjoint intervals into iv (room for IV_MAX): how many, 0 when more or
 * when both loops step over gaps (the bitsets build those). A tiled
 * stream's loops are nearly all one interval or a few. */
static uint32_t loop_intervals(uint32_t iter_out, uint32_t fo, uint32_t iter_in, uint32_t fi, iv_t *iv)
{
    uint64_t len = 1; /* the inner loop as [0, len), or points j*fi */
    if (iter_in > 1 && fi == 1)
        len = iter_in;
    else if (iter_in > 1 && fi > 1) {
        if ((iter_out > 1 && fo) || iter_in > IV_MAX)
            return 0;
        for (uint32_t j = 0; j < iter_in; j++)
            iv[j] = (iv_t){(uint64_t)j * fi, (uint64_t)j * fi + 1};
        return iter_in;
    }
    if (iter_out <= 1 || !fo || fo <= len) { /* one interval (past every buffer beyond 2^62) */
        const uint64_t top = (uint64_t)(iter_out ? iter_out - 1 : 0) * fo;
        iv[0] = (iv_t){0, (top < (1ull << 62) ? top : 1ull << 62) + len};
        return 1;
    }
    if (iter_out > IV_MAX)
        return 0;
    for (uint32_t i = 0; i < iter_out; i++)
        iv[i] = (iv_t){(uint64_t)i * fo, (uint64_t)i * fo + len};
    return iter_out;
}

/* The distinct bases (index kind 0 dst, 1 src, 2 wgt) of uops [bgn, end),
 * ascending, into out; how many, -1 if some uop is unknown, or -2 when the
 * slice is far from sorted (the bitsets build those: an insertion sort of
 * a reversed 8,192-uop slice on every GEMM of a hostile stream was
 * quadratic, 2,000 such GEMMs 50 s instead of 0.2 s). */
static int64_t slice_bases(const tsr_insn_t *in, int kind, const tsr_uop_t *uops, const uint8_t *known,
                           uint32_t *out)
{
    uint32_t n = 0;
    uint64_t moves = 0;
    for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
        if (!known[u])
            return -1;
        uint32_t v = kind == 0 ? uops[u].dst : kind == 1 ? uops[u].src : uops[u].wgt, k = n++;
        for (; k && out[k - 1] > v; k--) /* (insertion: slices are a few uops, mostly in order) */
            out[k] = out[k - 1];
        out[k] = v;
        if ((moves += n - 1 - k) > 4 * (uint64_t)(in->uop_end - in->uop_bgn) + 64)
            return -2;
    }
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++)
        if (!m || out[k] != out[m - 1])
            out[m++] = out[k];
    return m;
}

/* Ascending intervals iv[0..n) (overlapping or touching allowed), each
 * [lo, hi + widen - 1) then >> shift, clipped to depth, as maximal runs into
 * out; how many. */
static uint32_t merge_runs(const iv_t *iv, uint32_t n, uint32_t widen, int shift, uint32_t depth, run_t *out)
{
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint64_t lo = iv[k].lo >> shift, hi = ((iv[k].hi + widen - 2) >> shift) + 1; /* (last row, then past it) */
        if (lo >= depth)
            break;
        if (hi > depth)
            hi = depth;
        if (m && lo <= out[m - 1].hi) {
            if (hi > out[m - 1].hi)
                out[m - 1].hi = (uint32_t)hi;
        } else
            out[m++] = (run_t){(uint32_t)lo, (uint32_t)hi};
    }
    return m;
}

/* The rows index kind `kind` of `in` reaches as runs into out, from the
 * uop bases and the loop's intervals (with a depthwise op's K rows per src
 * and tap groups per weight row): how many, -1 if some uop is unknown,
 * -2 when the bitsets must build them. The same rows as they do. */
static int64_t fast_runs(tsr_hb_t *h, const tsr_insn_t *in, int kind, const tsr_uop_t *uops, const uint8_t *known,
                         run_t *out)
{
    const uint32_t fo = kind == 0 ? in->dst_factor_out : kind == 1 ? in->src_factor_out : in->wgt_factor_out;
    const uint32_t fi = kind == 0 ? in->dst_factor_in : kind == 1 ? in->src_factor_in : in->wgt_factor_in;
    const uint32_t nl = loop_intervals(in->iter_out, fo, in->iter_in, fi, h->ivl);
    const int64_t nb = slice_bases(in, kind, uops, known, h->bases);
    if (nb < 0)
        return nb;
    if (!nl || (nl > 1 && nb > 1) || (uint64_t)nb * nl > IV_MAX)
        return -2; /* (bases x several intervals would need a sort) */
    uint32_t n = 0;
    for (int64_t k = 0; k < nb; k++)
        for (uint32_t j = 0; j < nl; j++)
            h->iv[n++] = (iv_t){h->ivl[j].lo + h->bases[k], h->ivl[j].hi + h->bases[k]};
    const int dw = in->opcode == TSR_OP_GEMM && in->depthwise;
    const int b = kind == 0 ? SB_OUT : kind == 1 ? SB_INP : SB_WGT;
    const uint32_t widen = kind == 1 && dw ? (uint32_t)h->cfg->depthwise : 1;
    return merge_runs(h->iv, n, widen, kind == 2 && dw ? h->cfg->dw_group_bits : 0, h->depth[b], out);
}

/* The rows index kind (0 dst: out, 1 src: inp, 2 wgt) of GEMM/ALU `in`
 * reaches, from the cache or built from the uop bases (with a depthwise
 * op's K rows per src and tap groups per weight row), in *out; NULL when
 * some uop of its slice is unknown. */
/* The bitsets' footprint of kind `kind` of `in` into h->f; 0 if some uop
 * of its slice is unknown. */
static int bitset_rows(tsr_hb_t *h, const tsr_insn_t *in, int kind, const tsr_uop_t *uops, const uint8_t *known)
{
    if (!load_bases(h, in, uops, known))
        return 0;
    const int dw = in->opcode == TSR_OP_GEMM && in->depthwise;
    if (kind == 2 && dw) { /* tap groups, G per row */
        loop_rows(h, in, 2, (uint32_t)((uint64_t)h->depth[SB_WGT] << h->cfg->dw_group_bits));
        group_rows(h, h->cfg->dw_group_bits);
    } else {
        loop_rows(h, in, kind, h->depth[kind == 0 ? SB_OUT : kind == 1 ? SB_INP : SB_WGT]);
        if (kind == 1 && dw) /* each op also reads the K-1 rows after src */
            widen_rows(h, (uint32_t)h->cfg->depthwise);
    }
    return 1;
}

static uint32_t key_slot(const uint32_t key[8], uint64_t gen)
{
    uint64_t x = gen * 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < 8; k++)
        x = (x ^ key[k]) * 0x100000001b3ull;
    return (uint32_t)(x >> 32) & (FP_SLOTS - 1);
}

/* The rows index kind (0 dst: out, 1 src: inp, 2 wgt) of GEMM/ALU `in`
 * reaches, from the cache or built (from intervals, else from the uop
 * bases' bitsets), in *out; NULL when some uop of its slice is unknown. */
static int footprint(tsr_hb_t *h, const tsr_insn_t *in, int kind, const tsr_uop_t *uops, const uint8_t *known,
                     const fp_t **out)
{
    const uint32_t key[8] = {(uint32_t)kind, in->depthwise, in->uop_bgn, in->uop_end, in->iter_out, in->iter_in,
                             kind == 0 ? in->dst_factor_out : kind == 1 ? in->src_factor_out : in->wgt_factor_out,
                             kind == 0 ? in->dst_factor_in : kind == 1 ? in->src_factor_in : in->wgt_factor_in};
    fp_t *f = &h->fp[key_slot(key, h->gen)];
    *out = NULL;
    if (f->valid && f->gen == h->gen && !memcmp(f->key, key, sizeof key)) {
        *out = f;
        return TSR_OK;
    }
    const int b = kind == 0 ? SB_OUT : kind == 1 ? SB_INP : SB_WGT;
    const uint32_t need = h->depth[b] / 2 + 1; /* (runs alternate with gaps) */
    if (f->cap < need) {
        run_t *r = realloc(f->runs, need * sizeof *r);
        if (!r)
            return tsr_err(TSR_ENOMEM, "out of memory");
        f->runs = r;
        f->cap = need;
    }
    f->valid = 0;
    int64_t n = fast_runs(h, in, kind, uops, known, f->runs);
    if (n == -2 && bitset_rows(h, in, kind, uops, known))
        n = set_runs(&h->f, h->depth[b], f->runs);
    if (n < 0)
        return TSR_OK;
    f->n = (uint32_t)n;
    f->gen = h->gen;
    memcpy(f->key, key, sizeof key);
    f->valid = 1;
    *out = f;
    return TSR_OK;
}

int tsr_hb_insn(tsr_hb_t *h, const tsr_hb_who_t *who, const tsr_uop_t *uops, const uint8_t *known)
{
    const tsr_insn_t *in = &h->insns[who->idx];
    h->ord[who->stage][who->clock[who->stage] + 1] = who->idx;
    if (in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE) {
        int rc = access_dram(h, who, in);
        if (rc)
            return rc;
    }
    if (in->opcode == TSR_OP_LOAD && in->x_size) {
        uint64_t rows = (uint64_t)(in->y_pad0 + in->y_size + in->y_pad1) * (in->x_pad0 + in->x_size + in->x_pad1);
        uint64_t end = in->sram_base + rows;
        if (in->mem_type == TSR_MEM_UOP)
            h->gen++;
        int b = in->mem_type == TSR_MEM_INP ? SB_INP : in->mem_type == TSR_MEM_WGT ? SB_WGT : -1;
        if (b < 0 || !rows)
            return TSR_OK;
        return access(h, who, b, in->sram_base, end > h->depth[b] ? h->depth[b] : (uint32_t)end, 1);
    }
    if (in->opcode == TSR_OP_STORE && in->x_size && in->y_size) {
        uint64_t end = in->sram_base + (uint64_t)in->y_size * in->x_size;
        return access(h, who, SB_OUT, in->sram_base, end > h->depth[SB_OUT] ? h->depth[SB_OUT] : (uint32_t)end, 0);
    }
    if (in->opcode != TSR_OP_GEMM && in->opcode != TSR_OP_ALU)
        return TSR_OK;
    if (!in->iter_out || !in->iter_in || in->uop_bgn >= in->uop_end)
        return TSR_OK;
    /* Every iteration writes out[dst] (GEMM, ALU, reset alike); a GEMM
     * that computes reads inp[src] and wgt[wgt]. A footprint is NULL when
     * some uop of the slice is unknown: not checked. */
    static const int buf[3] = {SB_OUT, SB_INP, SB_WGT};
    const int kinds = in->opcode == TSR_OP_GEMM && !in->reset ? 3 : 1;
    for (int k = 0; k < kinds; k++) {
        const fp_t *f = NULL;
        int rc = footprint(h, in, k, uops, known, &f);
        if (!rc && f)
            rc = access_runs(h, who, buf[k], f->runs, f->n, k == 0);
        if (rc || !f)
            return rc;
    }
    return TSR_OK;
}
