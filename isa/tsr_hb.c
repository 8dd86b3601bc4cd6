/*
 * tsr_hb: happens-before race detection on shared on-chip rows (see
 * tsr_hb.h). Shadow state per row; GEMM/ALU footprints as row bitsets.
 */
#include "tsr_hb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"

/* What two stages share: three on-chip buffers and DRAM (in segments). */
enum { SB_INP, SB_WGT, SB_OUT, SB_DRAM, SB_COUNT };

static const char *const sb_name[SB_COUNT] = {"inp", "wgt", "out", "DRAM"};

/* What is known about one row: the last write and, per stage, the latest
 * read since it. Ordinals are 1-based within the stage (0 = none). */
typedef struct {
    uint32_t w_seq;                  /* writer's ordinal in its stage */
    uint32_t w_idx;                  /* writer's stream index */
    uint32_t w_stage;                /* writer's stage */
    uint32_t r_seq[TSR_STAGE_COUNT]; /* latest reader's ordinal, per stage */
    uint32_t r_idx[TSR_STAGE_COUNT]; /* its stream index */
} row_t;

struct tsr_hb {
    const tsr_config_t *cfg;
    const tsr_insn_t *insns;
    size_t n;
    row_t *rows[SB_COUNT];           /* shadow of each shared buffer */
    uint32_t depth[SB_COUNT];        /* rows per shared buffer (DRAM: segments) */
    uint64_t *bounds;                /* DRAM segment boundaries (depth[SB_DRAM] + 1) */
    size_t nw;                       /* 64-bit words of a bitset over the deepest buffer */
    uint64_t *base[3];               /* uop bases (dst, src, wgt) of the cached kernel slice */
    uint64_t *lo, *li, *l, *f;       /* scratch: loop offsets (outer, inner, both), footprint */
    uint32_t gen;                    /* bumped by every uop LOAD: invalidates the cache */
    uint32_t c_bgn, c_end, c_gen;    /* slice the bases were built for */
    int c_valid;                     /* bases hold that slice */
};

int tsr_hb_create(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n, tsr_hb_t **out)
{
    tsr_hb_t *h = calloc(1, sizeof *h);
    *out = NULL;
    if (!h)
        return tsr_err(TSR_ENOMEM, "out of memory");
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
        ok &= (h->rows[b] = calloc(h->depth[b] ? h->depth[b] : 1, sizeof(row_t))) != NULL;
    for (int k = 0; k < 3; k++)
        ok &= (h->base[k] = calloc(h->nw, 8)) != NULL;
    ok &= (h->lo = calloc(h->nw, 8)) && (h->li = calloc(h->nw, 8)) && (h->l = calloc(h->nw, 8)) &&
          (h->f = calloc(h->nw, 8));
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
        free(h->rows[b]);
    for (int k = 0; k < 3; k++)
        free(h->base[k]);
    free(h->bounds);
    free(h->lo);
    free(h->li);
    free(h->l);
    free(h->f);
    free(h);
}

int tsr_hb_set_dram(tsr_hb_t *h, const uint64_t *bounds, size_t n)
{
    free(h->rows[SB_DRAM]);
    free(h->bounds);
    h->rows[SB_DRAM] = NULL;
    h->bounds = NULL;
    h->depth[SB_DRAM] = 0;
    if (n < 2)
        return TSR_OK;
    if (n - 1 > UINT32_MAX)
        return tsr_err(TSR_ENOMEM, "%zu DRAM segments are too many to track", n - 1);
    h->rows[SB_DRAM] = calloc(n - 1, sizeof(row_t));
    h->bounds = malloc(n * sizeof *bounds);
    if (!h->rows[SB_DRAM] || !h->bounds)
        return tsr_err(TSR_ENOMEM, "out of memory");
    memcpy(h->bounds, bounds, n * sizeof *bounds);
    h->depth[SB_DRAM] = (uint32_t)(n - 1);
    return TSR_OK;
}

/* ---------------------------------------------------------- shadow rows */

/* The instruction an access by `who` conflicts with on row x, or -1. */
static int64_t conflict(const row_t *x, const tsr_hb_who_t *who, int write, int *other_writes)
{
    if (x->w_seq && (int)x->w_stage != who->stage && who->clock[x->w_stage] < x->w_seq) {
        *other_writes = 1;
        return x->w_idx;
    }
    if (write)
        for (int t = 0; t < TSR_STAGE_COUNT; t++)
            if (t != who->stage && x->r_seq[t] && who->clock[t] < x->r_seq[t]) {
                *other_writes = 0;
                return x->r_idx[t];
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

/* Rows [lo, hi) of shared buffer b, read or written by `who`. */
static int access(tsr_hb_t *h, const tsr_hb_who_t *who, int b, uint32_t lo, uint32_t hi, int write)
{
    uint32_t seq = who->clock[who->stage] + 1;
    row_t *rows = h->rows[b];
    if (hi > h->depth[b])
        hi = h->depth[b]; /* tsr_verify rejected anything past the end already */
    for (uint32_t r = lo; r < hi; r++) {
        row_t *x = &rows[r];
        int ow = 0;
        int64_t other = conflict(x, who, write, &ow);
        if (other >= 0) {
            /* Name the whole run of rows with the same conflict. */
            uint32_t e = r + 1;
            int ow2 = 0;
            while (e < hi && conflict(&rows[e], who, write, &ow2) == other && ow2 == ow)
                e++;
            return race(h, who, b, r, e, write, (uint32_t)other, ow);
        }
        if (write) {
            memset(x, 0, sizeof *x);
            x->w_seq = seq;
            x->w_idx = who->idx;
            x->w_stage = (uint32_t)who->stage;
        } else {
            x->r_seq[who->stage] = seq;
            x->r_idx[who->stage] = who->idx;
        }
    }
    return TSR_OK;
}

/* ---------------------------------------------------- row-set footprints */

/* dst |= src << k over nw words. */
static void or_shifted(uint64_t *dst, const uint64_t *src, size_t nw, uint32_t k)
{
    size_t ws = k / 64;
    unsigned bs = k % 64;
    for (size_t i = nw; i-- > ws;) {
        uint64_t v = src[i - ws] << bs;
        if (bs && i - ws > 0)
            v |= src[i - ws - 1] >> (64 - bs);
        dst[i] |= v;
    }
}

/* Bits set in a[0..nw), and the span of its nonzero words [*lo, *hi] (*lo > *hi:
 * none). (The bit count in plain arithmetic: without -mpopcnt the builtin is
 * a call into libgcc, which was a tenth of a verified ResNet-18.) */
static size_t popcount(const uint64_t *a, size_t nw, size_t *lo, size_t *hi)
{
    size_t c = 0;
    *lo = nw;
    *hi = 0;
    for (size_t i = 0; i < nw; i++) {
        uint64_t x = a[i];
        if (!x)
            continue;
        if (*lo == nw)
            *lo = i;
        *hi = i;
        x = x - ((x >> 1) & 0x5555555555555555ull);
        x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
        x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
        c += (size_t)((x * 0x0101010101010101ull) >> 56);
    }
    return c;
}

/* out = {x + y : x in a, y in b}, shifting the larger set by each member of
 * the smaller; each shift touches only the words the larger set's nonzero
 * span reaches (the sets are small progressions and uop bases in a buffer
 * of thousands of rows: the whole width per shift was most of the verifier). */
static void minkowski(uint64_t *out, const uint64_t *a, const uint64_t *b, size_t nw)
{
    size_t alo, ahi, blo, bhi;
    if (popcount(a, nw, &alo, &ahi) > popcount(b, nw, &blo, &bhi)) {
        const uint64_t *t = a;
        a = b;
        b = t;
        size_t u = alo;
        alo = blo;
        blo = u;
        u = ahi;
        ahi = bhi;
        bhi = u;
    }
    memset(out, 0, nw * 8);
    if (blo > bhi)
        return;
    for (size_t i = alo; i <= ahi && i < nw; i++)
        for (uint64_t w = a[i]; w; w &= w - 1) {
            const uint32_t k = (uint32_t)(i * 64 + (size_t)__builtin_ctzll(w));
            const size_t ws = k / 64;
            const unsigned bs = k % 64;
            /* dst word j takes src words j-ws and j-ws-1: nonzero for j-ws in [blo, bhi+1] */
            if (blo + ws >= nw)
                break; /* (larger shifts move everything past the end) */
            size_t top = bhi + 1 + ws < nw ? bhi + 1 + ws : nw - 1;
            for (size_t j = top + 1; j-- > blo + ws;) {
                uint64_t v = j - ws <= bhi ? b[j - ws] << bs : 0;
                if (bs && j - ws > 0)
                    v |= b[j - ws - 1] >> (64 - bs);
                out[j] |= v;
            }
        }
}

/* {k * step : k < count} below depth. */
static void progression(uint64_t *set, size_t nw, uint32_t count, uint32_t step, uint32_t depth)
{
    memset(set, 0, nw * 8);
    set[0] = 1;
    if (!step)
        return;
    for (uint64_t k = 1, v = step; k < count && v < depth; k++, v += step)
        set[v / 64] |= 1ull << (v % 64);
}

/* Access every row of bitset f (rows below depth) as runs. */
static int access_set(tsr_hb_t *h, const tsr_hb_who_t *who, int b, const uint64_t *f, int write)
{
    uint32_t depth = h->depth[b];
    uint32_t r = 0;
    while (r < depth) {
        /* Skip clear bits, then take the run of set ones. */
        while (r < depth && !(f[r / 64] >> (r % 64) & 1)) {
            if (!(r % 64) && !f[r / 64])
                r += 64;
            else
                r++;
        }
        uint32_t e = r;
        while (e < depth && (f[e / 64] >> (e % 64) & 1)) {
            if (!(e % 64) && f[e / 64] == ~0ull)
                e += 64;
            else
                e++;
        }
        if (e > depth)
            e = depth;
        if (r < e) {
            int rc = access(h, who, b, r, e, write);
            if (rc)
                return rc;
        }
        r = e;
    }
    return TSR_OK;
}

/* The rows one index kind (0 dst, 1 src, 2 wgt) of a GEMM/ALU reaches,
 * from the cached uop bases, into h->f. */
static void loop_rows(tsr_hb_t *h, const tsr_insn_t *in, int kind, uint32_t depth)
{
    uint32_t fo = kind == 0 ? in->dst_factor_out : kind == 1 ? in->src_factor_out : in->wgt_factor_out;
    uint32_t fi = kind == 0 ? in->dst_factor_in : kind == 1 ? in->src_factor_in : in->wgt_factor_in;
    progression(h->lo, h->nw, in->iter_out, fo, depth);
    progression(h->li, h->nw, in->iter_in, fi, depth);
    minkowski(h->l, h->lo, h->li, h->nw);
    minkowski(h->f, h->base[kind], h->l, h->nw);
}

/* h->f |= h->f << 1 | ... | h->f << (k-1): the rows a depthwise op reads
 * from each src (the checks before keep src+k-1 inside the buffer). */
static void widen_rows(tsr_hb_t *h, uint32_t k)
{
    memcpy(h->l, h->f, h->nw * 8);
    for (uint32_t s = 1; s < k; s++)
        or_shifted(h->f, h->l, h->nw, s);
}

/* h->f := { s >> bits : s in h->f }: the weight rows of a set of tap groups. */
static void group_rows(tsr_hb_t *h, int bits)
{
    memcpy(h->l, h->f, h->nw * 8);
    memset(h->f, 0, h->nw * 8);
    for (size_t i = 0; i < h->nw; i++)
        for (uint64_t w = h->l[i]; w; w &= w - 1) {
            uint64_t r = (i * 64 + (uint64_t)__builtin_ctzll(w)) >> bits;
            h->f[r / 64] |= 1ull << (r % 64);
        }
}

/* Bases of uops [bgn, end) per kind; 0 if some uop is unknown. */
static int load_bases(tsr_hb_t *h, const tsr_insn_t *in, const tsr_uop_t *uops, const uint8_t *known)
{
    if (h->c_valid && h->c_gen == h->gen && h->c_bgn == in->uop_bgn && h->c_end == in->uop_end)
        return 1;
    h->c_valid = 0;
    for (int k = 0; k < 3; k++)
        memset(h->base[k], 0, h->nw * 8);
    uint64_t lim = (uint64_t)h->nw * 64;
    for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
        if (!known[u])
            return 0;
        const uint32_t v[3] = {uops[u].dst, uops[u].src, uops[u].wgt};
        for (int k = 0; k < 3; k++)
            if (v[k] < lim) /* out-of-range bases were rejected unless unused (reset, ALU src) */
                h->base[k][v[k] / 64] |= 1ull << (v[k] % 64);
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
        int rc;
        if (a < e && (rc = access(h, who, SB_DRAM, a, e, write)))
            return rc;
    }
    return TSR_OK;
}

int tsr_hb_insn(tsr_hb_t *h, const tsr_hb_who_t *who, const tsr_uop_t *uops, const uint8_t *known)
{
    const tsr_insn_t *in = &h->insns[who->idx];
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
    if (!in->iter_out || !in->iter_in || in->uop_bgn >= in->uop_end || !load_bases(h, in, uops, known))
        return TSR_OK;
    int rc;
    /* Every iteration writes out[dst] (GEMM, ALU, reset alike). */
    loop_rows(h, in, 0, h->depth[SB_OUT]);
    if ((rc = access_set(h, who, SB_OUT, h->f, 1)))
        return rc;
    if (in->opcode == TSR_OP_GEMM && !in->reset) {
        loop_rows(h, in, 1, h->depth[SB_INP]);
        if (in->depthwise) /* each op also reads the K-1 rows after src */
            widen_rows(h, (uint32_t)h->cfg->depthwise);
        if ((rc = access_set(h, who, SB_INP, h->f, 0)))
            return rc;
        if (in->depthwise) { /* tap groups, G per row */
            loop_rows(h, in, 2, (uint32_t)((uint64_t)h->depth[SB_WGT] << h->cfg->dw_group_bits));
            group_rows(h, h->cfg->dw_group_bits);
        } else {
            loop_rows(h, in, 2, h->depth[SB_WGT]);
        }
        if ((rc = access_set(h, who, SB_WGT, h->f, 0)))
            return rc;
    }
    return TSR_OK;
}
