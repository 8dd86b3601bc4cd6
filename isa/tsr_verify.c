/*
 * tsr_verify: static checks of a task-instruction stream (see tsr_verify.h).
 * Per-instruction checks run first, in stream order, so the first error
 * reported is the earliest bad instruction; then STOREs are checked against
 * the DRAM the uop LOADs read; then the stream is dry-run through tsr_pipe
 * for token, deadlock and FINISH-ordering errors, with each instruction's
 * on-chip footprint handed to the race detector (tsr_hb) as it executes.
 */
#include "tsr_verify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_hb.h"
#include "tsr_pipe.h"

/* A DRAM byte range [lo, hi) accessed by insn #idx. */
typedef struct {
    uint64_t lo, hi;     /* bytes */
    uint32_t idx;        /* the instruction */
} span_t;

/* A set of spans, searchable for overlaps once sealed. */
typedef struct {
    span_t *v;           /* spans; sorted by lo once sealed */
    size_t n, cap;       /* used / allocated entries */
    size_t *reach;       /* sealed: reach[k] = the span ending last among v[0..k] */
} spanset_t;

/* Boundaries of the STORE rows that some LOAD reads: the race detector
 * tracks DRAM in the segments they cut (nothing when no LOAD reads what a
 * STORE writes, the usual case). */
typedef struct {
    uint64_t *b;         /* boundaries */
    size_t n, cap;       /* used / allocated */
} bounds_t;

typedef struct {
    const tsr_config_t *cfg;
    const tsr_verify_opts_t *opts;
    tsr_uop_t *uops;     /* shadow of the uop buffer */
    uint8_t *known;      /* 1 if the shadow entry holds loaded contents */
    uint8_t *loaded;     /* 1 if a uop LOAD earlier in the stream wrote the entry */
    uint8_t lut_loaded[8]; /* 1 if a lut LOAD earlier in the stream wrote the table (ACT_LUT <= 8) */
    uint8_t *raw;        /* one row of uop bytes as read from DRAM (uop_depth entries) */
    spanset_t uops_read; /* DRAM bytes the stream's uop LOADs read */
    spanset_t loads;     /* DRAM bytes any LOAD reads */
    bounds_t dram;       /* DRAM segment boundaries for the race pass */
    tsr_pipe_t *pipe;    /* the dry run, during the race pass */
    tsr_hb_t *hb;        /* race detector, during the race pass */
} vstate_t;

static int bad(size_t i, const tsr_insn_t *in, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(size_t i, const tsr_insn_t *in, const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *op = tsr_opcode_name(in->opcode);
    if (in->opcode == TSR_OP_LOAD || in->opcode == TSR_OP_STORE)
        return tsr_err(TSR_EVERIFY, "insn #%zu (%s %s): %s", i, op,
                       tsr_mem_name(in->mem_type) ? tsr_mem_name(in->mem_type) : "?", msg);
    return tsr_err(TSR_EVERIFY, "insn #%zu (%s): %s", i, op ? op : "?", msg);
}

/* The DRAM span of a 2-D transfer must lie inside one declared region. */
static int check_dram(vstate_t *v, size_t i, const tsr_insn_t *in)
{
    const tsr_verify_opts_t *o = v->opts;
    uint64_t eb = tsr_config_elem_bytes(v->cfg, (int)in->mem_type);
    uint64_t first = (uint64_t)in->dram_base * eb;
    uint64_t last_elem = (uint64_t)in->dram_base + (uint64_t)(in->y_size ? in->y_size - 1 : 0) * in->x_stride + in->x_size;
    uint64_t end = last_elem * eb;
    /* Rows may be laid out with a stride smaller than their length; the
     * span still covers every byte touched. */
    uint64_t row_end = ((uint64_t)in->dram_base + in->x_size) * eb;
    if (row_end > end)
        end = row_end;
    for (size_t r = 0; r < o->nregions; r++) {
        const tsr_region_t *g = &o->regions[r];
        if (first >= g->addr && end <= g->addr + g->size)
            return TSR_OK;
    }
    for (size_t r = 0; r < o->nregions; r++) {
        const tsr_region_t *g = &o->regions[r];
        if (first >= g->addr && first < g->addr + g->size)
            return bad(i, in,
                       "DRAM access [0x%llx, 0x%llx) runs past the end of buffer %s [0x%llx, 0x%llx)",
                       (unsigned long long)first, (unsigned long long)end,
                       g->name ? g->name : "", (unsigned long long)g->addr,
                       (unsigned long long)(g->addr + g->size));
    }
    return bad(i, in, "DRAM access [0x%llx, 0x%llx) is outside every declared buffer",
               (unsigned long long)first, (unsigned long long)end);
}

/* The uop shadow after a uop LOAD (one DRAM read per row; a row that
 * cannot be read leaves its entries unknown). Linear in the rows loaded. */
static void load_uops(vstate_t *v, const tsr_insn_t *in)
{
    const tsr_config_t *c = v->cfg;
    uint32_t ub = c->uop_bytes;
    uint32_t nb = ub < 8 ? ub : 8;
    for (uint64_t y = 0; y < in->y_size; y++) {
        uint32_t slot0 = (uint32_t)(in->sram_base + y * in->x_size);
        memset(v->known + slot0, 0, in->x_size);
        memset(v->loaded + slot0, 1, in->x_size);
        if (!v->opts || !v->opts->read)
            continue;
        uint64_t addr = ((uint64_t)in->dram_base + y * in->x_stride) * ub;
        if (v->opts->read(v->opts->read_ctx, addr, v->raw, (size_t)in->x_size * ub) != TSR_OK)
            continue;
        for (uint32_t x = 0; x < in->x_size; x++) {
            uint64_t w = 0;
            for (uint32_t b = 0; b < nb; b++)
                w |= (uint64_t)v->raw[(size_t)x * ub + b] << (8 * b);
            tsr_uop_decode(c, w, &v->uops[slot0 + x]);
            v->known[slot0 + x] = 1;
        }
    }
}

/* Add the DRAM bytes of a LOAD/STORE (one span per row, or one for rows
 * laid end to end) to set. */
static int add_spans(spanset_t *set, size_t i, const tsr_insn_t *in, uint64_t eb)
{
    int packed = in->x_stride == in->x_size;
    uint64_t nrows = packed ? 1 : in->y_size;
    uint64_t rowlen = packed ? (uint64_t)in->x_size * in->y_size : in->x_size;
    for (uint64_t y = 0; y < nrows; y++) {
        if (set->n == set->cap) {
            size_t cap = set->cap ? 2 * set->cap : 64;
            span_t *p = realloc(set->v, cap * sizeof *p);
            if (!p)
                return tsr_err(TSR_ENOMEM, "out of memory");
            set->v = p;
            set->cap = cap;
        }
        uint64_t lo = ((uint64_t)in->dram_base + y * in->x_stride) * eb;
        set->v[set->n++] = (span_t){lo, lo + rowlen * eb, (uint32_t)i};
    }
    return TSR_OK;
}

/* Sort the spans by lo, then by instruction: they were added in stream
 * order, so a stable LSD radix sort over the bytes lo uses does it (spans
 * alike in lo and instruction are alike in hi too). qsort's comparator
 * calls were 3% of a ResNet-50's first execution. */
static int span_sort(spanset_t *set)
{
    uint64_t any = 0;
    for (size_t k = 0; k < set->n; k++)
        any |= set->v[k].lo;
    span_t *tmp = NULL;
    for (int sh = 0; sh < 64 && (any >> sh); sh += 8) {
        size_t at[257] = {0};
        if (!tmp && !(tmp = malloc(set->n * sizeof *tmp)))
            return tsr_err(TSR_ENOMEM, "out of memory");
        for (size_t k = 0; k < set->n; k++)
            at[((set->v[k].lo >> sh) & 255) + 1]++;
        for (int d = 0; d < 256; d++)
            at[d + 1] += at[d];
        for (size_t k = 0; k < set->n; k++)
            tmp[at[(set->v[k].lo >> sh) & 255]++] = set->v[k];
        span_t *t = set->v;
        set->v = tmp;
        tmp = t;
    }
    free(tmp);
    set->cap = set->n; /* (v may be the scratch now; nothing is added after sealing) */
    return TSR_OK;
}

static int seal(spanset_t *set)
{
    if (!set->n)
        return TSR_OK;
    int rc = span_sort(set);
    if (rc)
        return rc;
    if (!(set->reach = malloc(set->n * sizeof *set->reach)))
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (size_t k = 0; k < set->n; k++)
        set->reach[k] = k && set->v[set->reach[k - 1]].hi >= set->v[k].hi ? set->reach[k - 1] : k;
    return TSR_OK;
}

static void spanset_free(spanset_t *set)
{
    free(set->v);
    free(set->reach);
}

/* A span of the sealed set overlapping bytes [lo, hi), or NULL. */
static const span_t *overlap(const spanset_t *set, uint64_t lo, uint64_t hi)
{
    size_t a = 0, b = set->n; /* first span starting at or after hi */
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (set->v[mid].lo < hi)
            a = mid + 1;
        else
            b = mid;
    }
    if (!a)
        return NULL;
    const span_t *k = &set->v[set->reach[a - 1]];
    return k->hi > lo ? k : NULL;
}

/* The rows of a STORE that overlap a sealed set: calls fn for each. */
typedef int (*row_fn)(vstate_t *v, size_t i, const tsr_insn_t *in, uint64_t lo, uint64_t hi,
                      const span_t *sp);

static int store_rows(vstate_t *v, const spanset_t *set, size_t i, const tsr_insn_t *in, row_fn fn)
{
    uint64_t eb = tsr_config_elem_bytes(v->cfg, TSR_MEM_OUT);
    uint64_t first = (uint64_t)in->dram_base * eb;
    uint64_t end = ((uint64_t)in->dram_base + (uint64_t)(in->y_size - 1) * in->x_stride + in->x_size) * eb;
    if (!set->n || !overlap(set, first, end))
        return TSR_OK; /* the usual case: one search per STORE */
    for (uint64_t y = 0; y < in->y_size; y++) {
        uint64_t lo = ((uint64_t)in->dram_base + y * in->x_stride) * eb, hi = lo + in->x_size * eb;
        const span_t *sp = overlap(set, lo, hi);
        int rc;
        if (sp && (rc = fn(v, i, in, lo, hi, sp)))
            return rc;
    }
    return TSR_OK;
}

static int self_modify_row(vstate_t *v, size_t i, const tsr_insn_t *in, uint64_t lo, uint64_t hi,
                           const span_t *sp)
{
    (void)v;
    uint64_t a = lo > sp->lo ? lo : sp->lo, b = hi < sp->hi ? hi : sp->hi;
    return bad(i, in,
               "writes DRAM bytes [0x%llx, 0x%llx) that insn #%u (load uop) reads as micro-ops; "
               "a stream may not rewrite its own micro-ops (the verifier checks their indices "
               "before the run)",
               (unsigned long long)a, (unsigned long long)b, sp->idx);
}


static int dram_row(vstate_t *v, size_t i, const tsr_insn_t *in, uint64_t lo, uint64_t hi,
                    const span_t *sp)
{
    (void)i;
    (void)in;
    (void)sp;
    if (v->dram.n + 2 > v->dram.cap) {
        size_t cap = v->dram.cap ? 2 * v->dram.cap : 64;
        uint64_t *p = realloc(v->dram.b, cap * sizeof *p);
        if (!p)
            return tsr_err(TSR_ENOMEM, "out of memory");
        v->dram.b = p;
        v->dram.cap = cap;
    }
    v->dram.b[v->dram.n++] = lo;
    v->dram.b[v->dram.n++] = hi;
    return TSR_OK;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Self-modifying streams: a STORE may not write DRAM bytes that any uop
 * LOAD of the stream reads, before or after it. The index checks read the
 * micro-ops before the run, so a stream that rewrote its own kernel would
 * run indices nobody checked. (The instruction buffer is the driver's and
 * outside every declared buffer, so check_dram keeps STOREs out of it.)
 * Then, for the race pass, the boundaries of STORE rows that LOADs read. */
static int check_stores(vstate_t *v, const tsr_insn_t *insns, size_t n)
{
    int rc;
    if ((rc = seal(&v->uops_read)) || (rc = seal(&v->loads)))
        return rc;
    for (size_t i = 0; i < n; i++) {
        const tsr_insn_t *in = &insns[i];
        if (in->opcode != TSR_OP_STORE || !in->x_size || !in->y_size)
            continue;
        if ((rc = store_rows(v, &v->uops_read, i, in, self_modify_row)) ||
            (rc = store_rows(v, &v->loads, i, in, dram_row)))
            return rc;
    }
    if (!v->dram.n)
        return TSR_OK;
    qsort(v->dram.b, v->dram.n, sizeof *v->dram.b, u64_cmp);
    size_t u = 0;
    for (size_t k = 0; k < v->dram.n; k++)
        if (!u || v->dram.b[k] != v->dram.b[u - 1])
            v->dram.b[u++] = v->dram.b[k];
    v->dram.n = u;
    return TSR_OK;
}

static int check_mem(vstate_t *v, size_t i, const tsr_insn_t *in)
{
    const tsr_config_t *c = v->cfg;
    int is_load = in->opcode == TSR_OP_LOAD;
    uint32_t m = in->mem_type;
    if (is_load && m == TSR_MEM_OUT)
        return bad(i, in, "LOAD into the out buffer is not allowed (load acc or acc8 instead)");
    if (!is_load && m != TSR_MEM_OUT)
        return bad(i, in, "STORE reads only the out buffer, not %s", tsr_mem_name(m));
    /* (before the flag-only case: the instruction names a buffer the config lacks) */
    if (m == TSR_MEM_LUT && !c->act_lut)
        return bad(i, in, "LOAD of lut needs config key ACT_LUT > 0, which this config lacks");
    int padded = in->y_pad0 || in->y_pad1 || in->x_pad0 || in->x_pad1;
    if (padded && (!is_load || m == TSR_MEM_UOP || m == TSR_MEM_LUT))
        return bad(i, in, "padding is only allowed on LOADs of wgt, inp, acc and acc8");
    if (in->pad_value && !(is_load && m == TSR_MEM_INP))
        return bad(i, in, "pad_value %d is only allowed on LOADs of inp (must be 0 here)", in->pad_value);
    if (in->x_size == 0)
        return TSR_OK;
    uint64_t row = (uint64_t)in->x_pad0 + in->x_size + in->x_pad1;
    uint64_t rows = (uint64_t)in->y_pad0 + in->y_size + in->y_pad1;
    uint64_t depth = tsr_config_sram_depth(c, (int)m);
    uint64_t end = (uint64_t)in->sram_base + row * rows;
    if (end > depth)
        return bad(i, in, "on-chip rows [%u, %llu) are outside the %s buffer (%llu rows)",
                   in->sram_base, (unsigned long long)end, m == TSR_MEM_ACC8 ? "acc" : tsr_mem_name(m),
                   (unsigned long long)depth);
    if (v->opts && v->opts->check_dram && in->y_size) {
        int rc = check_dram(v, i, in);
        if (rc)
            return rc;
    }
    /* Track uop contents so GEMM/ALU indices can be checked exactly. */
    if (is_load && m == TSR_MEM_UOP)
        load_uops(v, in);
    /* and which activation tables the stream has loaded (rows < ACT_LUT <= 8 here) */
    if (is_load && m == TSR_MEM_LUT)
        for (uint64_t k = 0; k < (uint64_t)in->y_size * in->x_size; k++)
            v->lut_loaded[in->sram_base + k] = 1;
    if (is_load && in->y_size) {
        uint64_t eb = tsr_config_elem_bytes(c, (int)m);
        int rc = add_spans(&v->loads, i, in, eb);
        if (!rc && m == TSR_MEM_UOP)
            rc = add_spans(&v->uops_read, i, in, eb);
        if (rc)
            return rc;
    }
    return TSR_OK;
}

static int check_idx(size_t i, const tsr_insn_t *in, const char *what, uint32_t base,
                     uint32_t fo, uint32_t fi, uint32_t depth, uint32_t u)
{
    uint64_t max = base + (uint64_t)(in->iter_out - 1) * fo + (uint64_t)(in->iter_in - 1) * fi;
    if (max >= depth)
        return bad(i, in,
                   "%s index reaches %llu at uop %u (%u + %u*%u + %u*%u), outside the %u-row buffer",
                   what, (unsigned long long)max, u, base, in->iter_out - 1, fo, in->iter_in - 1, fi,
                   depth);
    return TSR_OK;
}

/* 1 when every uop of in's slice was loaded and none of the known ones
 * reaches outside a buffer: the largest base of each index kind checked
 * once (an index grows with its base), so the per-uop checks below, which
 * name the first uop at fault, run only when one may be. Most of a
 * network's GEMMs; the per-uop loop was 3% of a ResNet-50's first run. */
static int slice_fits(const vstate_t *v, const tsr_insn_t *in)
{
    const tsr_config_t *c = v->cfg;
    uint32_t md = 0, ms = 0, mw = 0, all = 1;
    for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
        all &= v->loaded[u];
        if (!v->known[u])
            continue;
        const tsr_uop_t *uo = &v->uops[u];
        md = uo->dst > md ? uo->dst : md;
        ms = uo->src > ms ? uo->src : ms;
        mw = uo->wgt > mw ? uo->wgt : mw;
    }
    const uint64_t to = in->iter_out - 1, ti = in->iter_in - 1;
    if (!all || md + to * in->dst_factor_out + ti * in->dst_factor_in >= c->acc_depth)
        return 0;
    if (in->reset)
        return 1;
    if (in->opcode == TSR_OP_GEMM) {
        const uint64_t last = in->depthwise ? (uint64_t)c->depthwise - 1 : 0;
        const uint64_t wdepth = in->depthwise ? (uint64_t)c->wgt_depth << c->dw_group_bits : c->wgt_depth;
        return ms + last + to * in->src_factor_out + ti * in->src_factor_in < c->inp_depth &&
               mw + to * in->wgt_factor_out + ti * in->wgt_factor_in < wdepth;
    }
    return in->use_imm || ms + to * in->src_factor_out + ti * in->src_factor_in < c->acc_depth;
}

static int check_loop(vstate_t *v, size_t i, const tsr_insn_t *in)
{
    const tsr_config_t *c = v->cfg;
    int is_gemm = in->opcode == TSR_OP_GEMM;
    if (in->opcode == TSR_OP_ALU && in->alu_opcode >= TSR_ALU_COUNT)
        return bad(i, in, "invalid ALU opcode %u", in->alu_opcode);
    if (in->opcode == TSR_OP_ALU && !tsr_alu_op_available(c, in->alu_opcode))
        return bad(i, in, "ALU op %s needs config key %s %s, which this config lacks",
                   tsr_alu_name(in->alu_opcode), tsr_alu_op_key(in->alu_opcode),
                   tsr_alu_op_key_value(in->alu_opcode));
    if (is_gemm && in->depthwise && !c->depthwise)
        return bad(i, in, "GEMM depthwise mode needs config key DEPTHWISE > 0, which this config lacks");
    if (is_gemm && in->depthwise > 1)
        return bad(i, in, "GEMM depthwise = %u is not 0 or 1", in->depthwise);
    const int is_lut = in->opcode == TSR_OP_ALU && in->alu_opcode == TSR_ALU_LUT;
    /* The hardware would take the table index from imm's low bits; an imm
     * naming no table is a lowering's mistake, not an intent. */
    if (is_lut && in->use_imm && (in->imm < 0 || in->imm >= c->act_lut))
        return bad(i, in, "ALU op lut: table imm = %d is outside [0, %d) (ACT_LUT = %d)", in->imm, c->act_lut,
                   c->act_lut);
    if (in->uop_bgn > in->uop_end)
        return bad(i, in, "uop range [%u, %u) is reversed", in->uop_bgn, in->uop_end);
    if (in->uop_end > c->uop_depth)
        return bad(i, in, "uop range [%u, %u) is outside the uop buffer (%u entries)", in->uop_bgn,
                   in->uop_end, c->uop_depth);
    if (!in->iter_out || !in->iter_in)
        return TSR_OK; /* no iteration: no uop is read */
    /* Tables come from the stream, as uops do (lut LOADs run in the compute
     * stage, in program order with ALU ops): a table never loaded holds
     * whatever the device has. With imm one table is read, else any. */
    if (is_lut && !in->reset && in->uop_bgn < in->uop_end)
        for (int t = in->use_imm ? in->imm : 0; t < (in->use_imm ? in->imm + 1 : c->act_lut); t++)
            if (!v->lut_loaded[t])
                return bad(i, in,
                           "ALU op lut reads activation table %d, which no earlier LOAD of lut of this stream "
                           "writes (its contents would be whatever the device holds)",
                           t);
    /* Every uop read must come from a uop LOAD of this stream, earlier in
     * it (uop LOADs, GEMM and ALU all run in the compute stage, in program
     * order). A row never loaded holds whatever the backend has: zeros in
     * fsim, the previous stream's kernel on the RTL; its indices are
     * unchecked and the result would differ across backends and runs. */
    if (slice_fits(v, in))
        return TSR_OK;
    for (uint32_t u = in->uop_bgn; u < in->uop_end; u++)
        if (!v->loaded[u])
            return bad(i, in,
                       "uop range [%u, %u) reads uop row %u, which no earlier uop LOAD of this "
                       "stream writes (its contents would be whatever the device holds)",
                       in->uop_bgn, in->uop_end, u);
    for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
        if (!v->known[u])
            continue;
        const tsr_uop_t *uo = &v->uops[u];
        int rc = check_idx(i, in, "dst (acc)", uo->dst, in->dst_factor_out, in->dst_factor_in, c->acc_depth, u);
        if (rc)
            return rc;
        if (in->reset)
            continue;
        if (is_gemm) {
            /* a depthwise op reads rows src..src+K-1 */
            const uint32_t last = in->depthwise ? (uint32_t)c->depthwise - 1 : 0;
            /* and weight row wgt / G (its index names a tap group) */
            const uint64_t wdepth = in->depthwise ? (uint64_t)c->wgt_depth << c->dw_group_bits : c->wgt_depth;
            if ((rc = check_idx(i, in, in->depthwise ? "src + DEPTHWISE - 1 (inp)" : "src (inp)", uo->src + last,
                                in->src_factor_out, in->src_factor_in, c->inp_depth, u)) ||
                (rc = check_idx(i, in, in->depthwise ? "wgt (tap group; row wgt / G)" : "wgt", uo->wgt,
                                in->wgt_factor_out, in->wgt_factor_in, (uint32_t)wdepth, u)))
                return rc;
        } else if (!in->use_imm) {
            if ((rc = check_idx(i, in, "src (acc)", uo->src, in->src_factor_out, in->src_factor_in, c->acc_depth, u)))
                return rc;
        }
    }
    return TSR_OK;
}

/* The race pass: the dry run calls this for each instruction in the order
 * of one legal execution, with its stage's vector clock. Compute-stage
 * instructions (uop LOADs, GEMM, ALU) run in program order, so the uop
 * shadow rebuilt here matches the one the index checks used. */
static int race_exec(void *ctx, uint32_t index, const tsr_insn_t *in)
{
    vstate_t *v = ctx;
    tsr_hb_who_t who = {index, tsr_insn_stage(in), {0}};
    tsr_pipe_clock(v->pipe, who.stage, who.clock);
    if (in->opcode == TSR_OP_LOAD && in->mem_type == TSR_MEM_UOP && in->x_size)
        load_uops(v, in);
    /* The pipe prefixes an error with "insn #N (op): ". */
    return tsr_hb_insn(v->hb, &who, v->uops, v->known);
}

int tsr_verify(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n,
               const tsr_verify_opts_t *opts)
{
    int rc = TSR_OK;
    vstate_t v;
    memset(&v, 0, sizeof v);
    v.cfg = cfg;
    v.opts = opts;
    v.uops = malloc(cfg->uop_depth * sizeof(tsr_uop_t)); /* (an entry is read only once known) */
    v.known = calloc(cfg->uop_depth, 1);
    v.loaded = calloc(cfg->uop_depth, 1);
    v.raw = malloc((size_t)cfg->uop_depth * cfg->uop_bytes + 8);
    if (!v.uops || !v.known || !v.loaded || !v.raw) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        const tsr_insn_t *in = &insns[i];
        switch (in->opcode) {
        case TSR_OP_LOAD:
        case TSR_OP_STORE:
            if (in->mem_type >= TSR_MEM_COUNT)
                rc = bad(i, in, "invalid memory type %u", in->mem_type);
            else
                rc = check_mem(&v, i, in);
            break;
        case TSR_OP_GEMM:
        case TSR_OP_ALU: rc = check_loop(&v, i, in); break;
        case TSR_OP_FINISH: break;
        default: rc = tsr_err(TSR_EVERIFY, "insn #%zu: invalid opcode %u", i, in->opcode); break;
        }
    }
    if (rc || (rc = check_stores(&v, insns, n)))
        goto out;
    /* Ordering: tokens, deadlock, FINISH; and data races, checked on the
     * way through the same dry run. */
    int done = 0;
    memset(v.known, 0, cfg->uop_depth);
    if ((rc = tsr_hb_create(cfg, insns, n, &v.hb)) ||
        (rc = tsr_hb_set_dram(v.hb, v.dram.b, v.dram.n)) ||
        (rc = tsr_pipe_create(cfg, insns, n, race_exec, &v, 0, &v.pipe)))
        goto out;
    rc = tsr_pipe_run(v.pipe, 0, &done);
out:
    tsr_pipe_destroy(v.pipe);
    tsr_hb_destroy(v.hb);
    free(v.uops);
    free(v.known);
    free(v.loaded);
    free(v.raw);
    spanset_free(&v.uops_read);
    spanset_free(&v.loads);
    free(v.dram.b);
    return rc;
}
