/*
 * tsr_fsim: the functional golden model (see tsr_fsim.h and
 * isa/semantics.md). Clarity first: each instruction is one function that
 * follows the spec text; ordering comes from tsr_pipe. Speed comes from
 * keeping on-chip rows unpacked (int16 inputs/weights, int32 accumulators,
 * decoded uops) so the GEMM inner loop is a plain dot product the compiler
 * vectorises, and from resolving one DRAM pointer per transferred row.
 */
#include "tsr_fsim.h"

#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_pipe.h"

struct tsr_fsim {
    tsr_config_t cfg;     /* copy of the configuration */
    tsr_dram_t *dram;     /* device DRAM (not owned) */
    tsr_uop_t *uop;       /* uop buffer, decoded */
    int16_t *inp;         /* [inp_depth][BATCH*BLOCK_IN] */
    int16_t *wgt;         /* [wgt_depth][BLOCK_OUT*BLOCK_IN] */
    int32_t *acc;         /* [acc_depth][BATCH*BLOCK_OUT] */
    int16_t *out;         /* [acc_depth][BATCH*BLOCK_OUT] */
    int8_t *lut;          /* [ACT_LUT][256] activation tables (NULL without ACT_LUT) */
    uint32_t inp_row;     /* values per input row */
    uint32_t wgt_row;     /* values per weight row */
    uint32_t acc_row;     /* values per accumulator/output row */
    tsr_insn_t *insns;    /* decoded stream of the current run */
    size_t ninsns;        /* instructions in the current run */
    tsr_pipe_t *pipe;     /* ordering model of the current run */
    int loop_active;      /* a GEMM/ALU is part-way through its loops */
    uint32_t li, lj, lu;  /* where it resumes: outer, inner, uop */
    tsr_counters_t ctr;   /* activity counters */
    int timing_only;      /* tsr_fsim_set_timing_only: only uop LOADs move data */
    uint8_t *row;         /* staging for a DRAM row spanning adjacent buffers */
    uint64_t row_cap;     /* its size in bytes */
};

/* Staging row of at least n bytes (a transfer row is at most 2^16 elements). */
static uint8_t *row_buf(tsr_fsim_t *s, uint64_t n)
{
    if (n > s->row_cap) {
        uint8_t *p = realloc(s->row, (size_t)n);
        if (!p)
            return NULL;
        s->row = p;
        s->row_cap = n;
    }
    return s->row;
}

int tsr_fsim_create(const tsr_config_t *cfg, tsr_dram_t *dram, tsr_fsim_t **out)
{
    tsr_fsim_t *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s)
        return tsr_err(TSR_ENOMEM, "out of memory");
    s->cfg = *cfg;
    s->dram = dram;
    s->inp_row = (uint32_t)(cfg->batch * cfg->block_in);
    s->wgt_row = (uint32_t)(cfg->block_out * cfg->block_in);
    s->acc_row = (uint32_t)(cfg->batch * cfg->block_out);
    s->uop = calloc(cfg->uop_depth, sizeof *s->uop);
    s->inp = calloc((size_t)cfg->inp_depth * s->inp_row, sizeof *s->inp);
    s->wgt = calloc((size_t)cfg->wgt_depth * s->wgt_row, sizeof *s->wgt);
    s->acc = calloc((size_t)cfg->acc_depth * s->acc_row, sizeof *s->acc);
    s->out = calloc((size_t)cfg->acc_depth * s->acc_row, sizeof *s->out);
    if (cfg->act_lut)
        s->lut = calloc((size_t)cfg->act_lut, TSR_LUT_ENTRIES);
    if (!s->uop || !s->inp || !s->wgt || !s->acc || !s->out || (cfg->act_lut && !s->lut)) {
        tsr_fsim_destroy(s);
        return tsr_err(TSR_ENOMEM, "out of memory for on-chip buffers");
    }
    *out = s;
    return TSR_OK;
}

void tsr_fsim_destroy(tsr_fsim_t *s)
{
    if (!s)
        return;
    tsr_pipe_destroy(s->pipe);
    free(s->insns);
    free(s->uop);
    free(s->inp);
    free(s->wgt);
    free(s->acc);
    free(s->out);
    free(s->lut);
    free(s->row);
    free(s);
}

const tsr_counters_t *tsr_fsim_counters(const tsr_fsim_t *s) { return &s->ctr; }
void tsr_fsim_reset_counters(tsr_fsim_t *s) { memset(&s->ctr, 0, sizeof s->ctr); }

/* Little-endian signed value of `bytes` bytes. */
static int32_t rd_le(const uint8_t *p, int bytes)
{
    switch (bytes) {
    case 1: return (int8_t)p[0];
    case 2: return (int16_t)(uint16_t)(p[0] | p[1] << 8);
    default: return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    }
}

/* Little-endian int16 at p: one load on a little-endian host (the byte
 * form does not vectorise). */
static inline int16_t rd_le16(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    int16_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    return (int16_t)(uint16_t)(p[0] | p[1] << 8);
#endif
}

static void wr_le(uint8_t *p, int32_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)((uint32_t)v >> (8 * i));
}

/* Fill `count` consecutive on-chip rows from `row` on, of memory type m,
 * from consecutive DRAM rows at src, or pad them if src is NULL (every lane
 * padv for inp, zero otherwise). Rows are contiguous on both sides, so the
 * data types convert as one run of count x row elements: on small configs
 * a call per row was much of a LOAD's cost. */
static void fill_rows(tsr_fsim_t *s, uint32_t m, uint32_t row, uint32_t count, const uint8_t *src, int16_t padv)
{
    const tsr_config_t *c = &s->cfg;
    switch (m) {
    case TSR_MEM_UOP:
        for (uint32_t k = 0; k < count; k++, row++) {
            if (!src) {
                memset(&s->uop[row], 0, sizeof s->uop[row]);
            } else {
                const uint8_t *p = src + (size_t)k * c->uop_bytes;
                uint64_t raw = 0;
                for (uint32_t i = 0; i < c->uop_bytes; i++)
                    raw |= (uint64_t)p[i] << (8 * i);
                tsr_uop_decode(c, raw, &s->uop[row]);
            }
        }
        break;
    case TSR_MEM_INP:
    case TSR_MEM_WGT: {
        int16_t *dst = m == TSR_MEM_INP ? &s->inp[(size_t)row * s->inp_row] : &s->wgt[(size_t)row * s->wgt_row];
        size_t n = (size_t)count * (m == TSR_MEM_INP ? s->inp_row : s->wgt_row);
        int bytes = (m == TSR_MEM_INP ? c->inp_width : c->wgt_width) / 8;
        /* One loop per element width, each plain enough to vectorise: rows
         * are short on small configs, where a width test per element was
         * much of the cost of a LOAD. */
        if (!src) {
            int16_t v = m == TSR_MEM_INP ? padv : 0;
            for (size_t i = 0; i < n; i++)
                dst[i] = v;
        } else if (bytes == 1) {
            for (size_t i = 0; i < n; i++)
                dst[i] = (int8_t)src[i];
        } else if (bytes == 2) {
            for (size_t i = 0; i < n; i++)
                dst[i] = rd_le16(src + 2 * i);
        } else {
            for (size_t i = 0; i < n; i++)
                dst[i] = (int16_t)rd_le(src + i * bytes, bytes);
        }
        break;
    }
    case TSR_MEM_ACC:
    case TSR_MEM_ACC8: {
        int32_t *dst = &s->acc[(size_t)row * s->acc_row];
        int bytes = m == TSR_MEM_ACC ? c->acc_width / 8 : 1;
        const size_t n = (size_t)count * s->acc_row;
        /* As above: the width tested once per row, not per element. */
        if (!src)
            memset(dst, 0, sizeof *dst * n);
        else if (bytes == 1)
            for (size_t i = 0; i < n; i++)
                dst[i] = (int8_t)src[i];
        else if (bytes == 2)
            for (size_t i = 0; i < n; i++)
                dst[i] = rd_le16(src + 2 * i);
        else if (bytes == 4)
            for (size_t i = 0; i < n; i++)
                dst[i] = rd_le(src + i * 4, 4);
        else
            for (size_t i = 0; i < n; i++)
                dst[i] = rd_le(src + i * bytes, bytes);
        break;
    }
    case TSR_MEM_LUT: /* (exec_load refuses padding: src is set) */
        if (src)
            memcpy(&s->lut[(size_t)row * TSR_LUT_ENTRIES], src, (size_t)count * TSR_LUT_ENTRIES);
        break;
    default: break;
    }
}

static int exec_load(tsr_fsim_t *s, const tsr_insn_t *in)
{
    const tsr_config_t *c = &s->cfg;
    uint32_t m = in->mem_type;
    s->ctr.loads[m < TSR_MEM_COUNT ? m : 0]++;
    /* a memory type the config lacks is malformed even in a flag-only
     * LOAD (the RTL built without it flags any such instruction) */
    if (m == TSR_MEM_LUT && !c->act_lut)
        return tsr_err(TSR_EINVAL, "LOAD of lut needs config key ACT_LUT > 0");
    if (in->x_size == 0)
        return TSR_OK;
    if (m == TSR_MEM_OUT || m >= TSR_MEM_COUNT)
        return tsr_err(TSR_EINVAL, "LOAD into memory type %s is not allowed",
                       tsr_mem_name(m) ? tsr_mem_name(m) : "?");
    if (m == TSR_MEM_LUT && (in->y_pad0 || in->y_pad1 || in->x_pad0 || in->x_pad1))
        return tsr_err(TSR_EINVAL, "LOAD of lut cannot pad (a table is loaded whole)");
    uint32_t eb = tsr_config_elem_bytes(c, (int)m);
    uint64_t row = (uint64_t)in->x_pad0 + in->x_size + in->x_pad1;
    uint64_t rows = (uint64_t)in->y_pad0 + in->y_size + in->y_pad1;
    uint64_t depth = tsr_config_sram_depth(c, (int)m);
    if ((uint64_t)in->sram_base + row * rows > depth)
        return tsr_err(TSR_EBOUNDS, "on-chip rows [%u, %llu) exceed the %s buffer (%llu rows)",
                       in->sram_base, (unsigned long long)(in->sram_base + row * rows),
                       tsr_mem_name(m), (unsigned long long)depth);
    if (s->timing_only && m != TSR_MEM_UOP) { /* the counts only (uops steer the loops: loaded) */
        s->ctr.pad_rows_loaded += row * rows - (uint64_t)in->y_size * in->x_size;
        s->ctr.bytes_loaded[m] += (uint64_t)in->y_size * in->x_size * eb;
        return TSR_OK;
    }
    uint32_t r = in->sram_base;
    for (uint64_t y = 0; y < rows; y++) {
        int pad_y = y < in->y_pad0 || y >= (uint64_t)in->y_pad0 + in->y_size;
        const uint8_t *src = NULL;
        if (!pad_y) {
            uint64_t addr = ((uint64_t)in->dram_base + (y - in->y_pad0) * in->x_stride) * eb;
            uint64_t nb = (uint64_t)in->x_size * eb;
            src = tsr_dram_ptr(s->dram, addr, nb);
            /* A row may run into an adjacent buffer (every byte mapped). */
            uint8_t *stage = src ? NULL : row_buf(s, nb);
            if (stage && tsr_dram_read(s->dram, addr, stage, nb) == TSR_OK)
                src = stage;
            if (!src)
                return tsr_err(TSR_EFAULT,
                               "DRAM read of %llu bytes at 0x%llx (row %llu) is outside every "
                               "allocated buffer",
                               (unsigned long long)in->x_size * eb, (unsigned long long)addr,
                               (unsigned long long)(y - in->y_pad0));
        }
        /* (row <= depth here: the counts fit 32 bits) */
        if (pad_y) {
            fill_rows(s, m, r, (uint32_t)row, NULL, (int16_t)in->pad_value);
            s->ctr.pad_rows_loaded += row;
        } else {
            fill_rows(s, m, r, in->x_pad0, NULL, (int16_t)in->pad_value);
            fill_rows(s, m, r + in->x_pad0, in->x_size, src, (int16_t)in->pad_value);
            fill_rows(s, m, r + in->x_pad0 + in->x_size, in->x_pad1, NULL, (int16_t)in->pad_value);
            s->ctr.pad_rows_loaded += (uint64_t)in->x_pad0 + in->x_pad1;
        }
        r += (uint32_t)row;
    }
    s->ctr.bytes_loaded[m] += (uint64_t)in->y_size * in->x_size * eb;
    return TSR_OK;
}

static int exec_store(tsr_fsim_t *s, const tsr_insn_t *in)
{
    const tsr_config_t *c = &s->cfg;
    if (in->mem_type == TSR_MEM_LUT && !c->act_lut) /* as in exec_load */
        return tsr_err(TSR_EINVAL, "STORE of lut needs config key ACT_LUT > 0 (and is never allowed)");
    if (in->x_size == 0)
        return TSR_OK;
    if (in->mem_type != TSR_MEM_OUT)
        return tsr_err(TSR_EINVAL, "STORE from memory type %s is not allowed (only out)",
                       tsr_mem_name(in->mem_type) ? tsr_mem_name(in->mem_type) : "?");
    if (in->y_pad0 || in->y_pad1 || in->x_pad0 || in->x_pad1)
        return tsr_err(TSR_EINVAL, "STORE cannot pad");
    uint32_t eb = c->out_bytes;
    int vb = c->out_width / 8;
    uint64_t n = (uint64_t)in->y_size * in->x_size;
    if (in->sram_base + n > c->out_depth)
        return tsr_err(TSR_EBOUNDS, "on-chip rows [%u, %llu) exceed the out buffer (%u rows)",
                       in->sram_base, (unsigned long long)(in->sram_base + n), c->out_depth);
    if (s->timing_only) {
        s->ctr.bytes_stored += n * eb;
        return TSR_OK;
    }
    uint32_t r = in->sram_base;
    for (uint32_t y = 0; y < in->y_size; y++) {
        uint64_t addr = ((uint64_t)in->dram_base + (uint64_t)y * in->x_stride) * eb;
        uint64_t nb = (uint64_t)in->x_size * eb;
        uint8_t *dst = tsr_dram_ptr(s->dram, addr, nb);
        /* A row may run into an adjacent buffer: stage it, then write every byte. */
        uint8_t *stage = dst ? NULL : row_buf(s, nb);
        if (stage && tsr_dram_read(s->dram, addr, stage, nb) == TSR_OK)
            dst = stage;
        if (!dst)
            return tsr_err(TSR_EFAULT,
                           "DRAM write of %llu bytes at 0x%llx (row %u) is outside every "
                           "allocated buffer",
                           (unsigned long long)in->x_size * eb, (unsigned long long)addr, y);
        for (uint32_t x = 0; x < in->x_size; x++, r++) {
            const int16_t *o = &s->out[(size_t)r * s->acc_row];
            uint8_t *d = dst + (size_t)x * eb;
            if (vb == 1)
                for (uint32_t i = 0; i < s->acc_row; i++)
                    d[i] = (uint8_t)o[i];
            else
                for (uint32_t i = 0; i < s->acc_row; i++)
                    wr_le(d + (size_t)i * vb, o[i], vb);
        }
        if (dst == stage && tsr_dram_write(s->dram, addr, stage, nb) != TSR_OK)
            return tsr_err(TSR_EFAULT, "DRAM write of %llu bytes at 0x%llx (row %u) failed",
                           (unsigned long long)nb, (unsigned long long)addr, y);
    }
    s->ctr.bytes_stored += n * eb;
    return TSR_OK;
}

/* Mirror an accumulator row into the output buffer (truncation to out width). */
static inline __attribute__((always_inline)) void mirror_n(int16_t *o, const int32_t *a, uint32_t n, int w8)
{
    if (w8)
        for (uint32_t i = 0; i < n; i++)
            o[i] = (int8_t)(uint8_t)(uint32_t)a[i];
    else
        for (uint32_t i = 0; i < n; i++)
            o[i] = (int16_t)(uint16_t)(uint32_t)a[i];
}

/* (A row of 4 lanes, the smallest presets', as straight-line code: the
 * vectorised loop's set-up cost more than the row.) */
static void mirror(tsr_fsim_t *s, uint32_t dst)
{
    const int32_t *a = &s->acc[(size_t)dst * s->acc_row];
    int16_t *o = &s->out[(size_t)dst * s->acc_row];
    const int w8 = s->cfg.out_width == 8;
    if (s->acc_row == 4)
        mirror_n(o, a, 4, w8);
    else
        mirror_n(o, a, s->acc_row, w8);
}

static int check_uops(const tsr_fsim_t *s, const tsr_insn_t *in)
{
    if (in->uop_bgn > in->uop_end || in->uop_end > s->cfg.uop_depth)
        return tsr_err(TSR_EBOUNDS, "uop range [%u, %u) is outside the uop buffer (%u entries)",
                       in->uop_bgn, in->uop_end, s->cfg.uop_depth);
    return TSR_OK;
}

static int index_error(const char *what, uint64_t idx, uint32_t depth, uint32_t u, uint32_t i,
                       uint32_t j)
{
    return tsr_err(TSR_EBOUNDS, "%s index %llu is outside its buffer (%u rows) at uop %u, i=%u, j=%u",
                   what, (unsigned long long)idx, depth, u, i, j);
}

#if defined(__SSE2__)
/* The 8-bit case with BLOCK_IN a multiple of 8 and BLOCK_OUT of 4 (every
 * preset but the smallest): four outputs at a time, eight products per
 * pmaddwd, the four partial vectors reduced together (one transpose instead
 * of a horizontal sum per output). Products are at most 2^14 in magnitude,
 * so pmaddwd's pair sums are exact and the int32 lane sums wrap as the
 * scalar loop's unsigned additions do: the same bits in any order. */
static void gemm8_sse2(int32_t *restrict a, const int16_t *restrict x, const int16_t *restrict wt, int bt, int bi,
                       int bo)
{
    for (int b = 0; b < bt; b++) {
        const int16_t *xb = x + b * bi;
        int32_t *ab = a + b * bo;
        for (int o = 0; o < bo; o += 4) {
            const int16_t *w0 = wt + o * bi;
            __m128i s0 = _mm_setzero_si128(), s1 = s0, s2 = s0, s3 = s0;
            for (int i = 0; i < bi; i += 8) {
                __m128i xv = _mm_loadu_si128((const __m128i *)(xb + i));
                s0 = _mm_add_epi32(s0, _mm_madd_epi16(xv, _mm_loadu_si128((const __m128i *)(w0 + i))));
                s1 = _mm_add_epi32(s1, _mm_madd_epi16(xv, _mm_loadu_si128((const __m128i *)(w0 + bi + i))));
                s2 = _mm_add_epi32(s2, _mm_madd_epi16(xv, _mm_loadu_si128((const __m128i *)(w0 + 2 * bi + i))));
                s3 = _mm_add_epi32(s3, _mm_madd_epi16(xv, _mm_loadu_si128((const __m128i *)(w0 + 3 * bi + i))));
            }
            __m128i u0 = _mm_add_epi32(_mm_unpacklo_epi32(s0, s1), _mm_unpackhi_epi32(s0, s1));
            __m128i u1 = _mm_add_epi32(_mm_unpacklo_epi32(s2, s3), _mm_unpackhi_epi32(s2, s3));
            __m128i r = _mm_add_epi32(_mm_unpacklo_epi64(u0, u1), _mm_unpackhi_epi64(u0, u1));
            __m128i av = _mm_loadu_si128((const __m128i *)(ab + o));
            _mm_storeu_si128((__m128i *)(ab + o), _mm_add_epi32(av, r));
        }
    }
}
#endif

/* The 8-bit scalar loop; always inlined, so the call with a constant
 * BLOCK_IN of 4 (the smallest presets) is unrolled. */
static inline __attribute__((always_inline)) void gemm8_scalar(int32_t *a, const int16_t *x, const int16_t *wt,
                                                               int bt, int bi, int bo)
{
    for (int b = 0; b < bt; b++) {
        const int16_t *xb = x + b * bi;
        for (int o = 0; o < bo; o++) {
            const int16_t *wo = wt + o * bi;
            uint32_t d = 0;
            for (int i = 0; i < bi; i++)
                d += (uint32_t)((int32_t)xb[i] * (int32_t)wo[i]);
            a[b * bo + o] = (int32_t)((uint32_t)a[b * bo + o] + d);
        }
    }
}

/* Dot products of one tensor op. 8-bit operands cannot overflow int32 for
 * BLOCK_IN <= 64, so that case (the common one) sums in int32 and wraps
 * with unsigned arithmetic; wider operands accumulate in int64. */
static void gemm_op(tsr_fsim_t *s, uint32_t dst, uint32_t src, uint32_t w)
{
    const tsr_config_t *c = &s->cfg;
    const int bi = c->block_in, bo = c->block_out, bt = c->batch;
    int32_t *a = &s->acc[(size_t)dst * s->acc_row];
    const int16_t *x = &s->inp[(size_t)src * s->inp_row];
    const int16_t *wt = &s->wgt[(size_t)w * s->wgt_row];
    if (c->inp_width + c->wgt_width <= 16 && c->acc_width == 32) {
#if defined(__SSE2__)
        if (bi % 8 == 0 && bo % 4 == 0) {
            gemm8_sse2(a, x, wt, bt, bi, bo);
            return;
        }
#endif
        if (bi == 4)
            gemm8_scalar(a, x, wt, bt, 4, bo);
        else
            gemm8_scalar(a, x, wt, bt, bi, bo);
        return;
    }
    for (int b = 0; b < bt; b++) {
        const int16_t *xb = x + b * bi;
        for (int o = 0; o < bo; o++) {
            const int16_t *wo = wt + o * bi;
            int64_t d = 0;
            for (int i = 0; i < bi; i++)
                d += (int64_t)xb[i] * (int64_t)wo[i];
            int32_t *ap = &a[b * bo + o];
            *ap = tsr_wrap((int64_t)*ap + d, c->acc_width);
        }
    }
}

/* The depthwise mode (isa/semantics.md): lane c of batch row b sums K taps
 * of its own channel, tap k from input row src+k and weight row [k][c]. */
static void gemm_dw_op(tsr_fsim_t *s, uint32_t dst, uint32_t src, uint32_t w)
{
    const tsr_config_t *c = &s->cfg;
    const int bi = c->block_in, bt = c->batch, K = c->depthwise;
    int32_t *a = &s->acc[(size_t)dst * s->acc_row];
    /* w names a tap group: row w / G, first tap row (w mod G) * K */
    const uint32_t gm = (1u << c->dw_group_bits) - 1;
    const int16_t *wt = &s->wgt[(size_t)(w >> c->dw_group_bits) * s->wgt_row + (size_t)((w & gm) * (uint32_t)K) * bi];
    for (int b = 0; b < bt; b++)
        for (int ch = 0; ch < bi; ch++) {
            int64_t d = 0;
            for (int k = 0; k < K; k++)
                d += (int64_t)s->inp[(size_t)(src + (uint32_t)k) * s->inp_row + (size_t)b * bi + ch] *
                     (int64_t)wt[k * bi + ch];
            int32_t *ap = &a[b * bi + ch];
            *ap = tsr_wrap((int64_t)*ap + d, c->acc_width);
        }
}

/* Tensor ops per exec call: long instructions yield (TSR_PIPE_MORE) so a
 * wait timeout is honoured even inside one instruction. */
#define LOOP_CHUNK (1u << 16)

static int exec_gemm_alu(tsr_fsim_t *s, const tsr_insn_t *in)
{
    const tsr_config_t *c = &s->cfg;
    const int is_gemm = in->opcode == TSR_OP_GEMM;
    const uint32_t src_depth = is_gemm ? c->inp_depth : c->acc_depth;
    uint32_t i = 0, j = 0, u = in->uop_bgn, work = 0;
    if (s->loop_active) {
        i = s->li;
        j = s->lj;
        u = s->lu;
    } else {
        /* A reserved ALU opcode is an error however many ops the loops run
         * (as in the RTL, which checks it when the instruction starts). */
        if (!is_gemm && in->alu_opcode >= TSR_ALU_COUNT)
            return tsr_err(TSR_EINVAL, "reserved ALU opcode %u (defined: 0..%d)", in->alu_opcode,
                           TSR_ALU_COUNT - 1);
        /* an op the config lacks is as reserved: the RTL built without it
         * flags it the same way (its error bit, when the instruction starts) */
        if (!is_gemm && !tsr_alu_op_available(c, in->alu_opcode))
            return tsr_err(TSR_EINVAL, "ALU op %s needs config key %s %s", tsr_alu_name(in->alu_opcode),
                           tsr_alu_op_key(in->alu_opcode), tsr_alu_op_key_value(in->alu_opcode));
        if (is_gemm && in->depthwise && !c->depthwise)
            return tsr_err(TSR_EINVAL, "GEMM depthwise mode needs config key DEPTHWISE > 0");
        int rc = check_uops(s, in);
        if (rc)
            return rc;
    }
    s->loop_active = 0;
    if (in->uop_bgn == in->uop_end)
        return TSR_OK;
    if (s->timing_only) { /* the counts of the loops, not their data (indices: the verifier's) */
        const uint64_t n = (uint64_t)in->iter_out * in->iter_in * (in->uop_end - in->uop_bgn);
        if (is_gemm && in->reset)
            s->ctr.gemm_reset_ops += n;
        else if (is_gemm) {
            s->ctr.gemm_ops += n;
            s->ctr.macs += n * tsr_insn_macs_per_op(c, in);
        } else {
            s->ctr.alu_ops += n;
            s->ctr.alu_lanes += n * s->acc_row;
        }
        return TSR_OK;
    }
    /* The instruction's fields in locals: the counter updates below are
     * stores the compiler cannot prove leave *in alone, so it reloaded
     * every factor per tensor op. */
    const uint32_t iter_out = in->iter_out, iter_in = in->iter_in, uop_bgn = in->uop_bgn, uop_end = in->uop_end;
    const int dw = is_gemm && in->depthwise;
    const uint32_t src_last = dw ? (uint32_t)c->depthwise - 1 : 0; /* the op reads rows src..src+src_last */
    const int wgt_shift = dw ? c->dw_group_bits : 0;                 /* and weight row wgt >> wgt_shift */
    const uint64_t op_macs = tsr_insn_macs_per_op(c, in);
    const uint64_t dfo = in->dst_factor_out, dfi = in->dst_factor_in, sfo = in->src_factor_out,
                   sfi = in->src_factor_in, wfo = in->wgt_factor_out, wfi = in->wgt_factor_in;
    for (; i < iter_out; i++, j = 0) {
        for (; j < iter_in; j++, u = uop_bgn) {
            const uint64_t d0 = (uint64_t)i * dfo + (uint64_t)j * dfi, s0 = (uint64_t)i * sfo + (uint64_t)j * sfi,
                           w0 = (uint64_t)i * wfo + (uint64_t)j * wfi;
            for (; u < uop_end; u++) {
                if (work++ == LOOP_CHUNK) {
                    s->loop_active = 1;
                    s->li = i;
                    s->lj = j;
                    s->lu = u;
                    return TSR_PIPE_MORE;
                }
                const tsr_uop_t *uo = &s->uop[u];
                uint64_t dst = uo->dst + d0;
                uint64_t src = uo->src + s0;
                uint64_t wgt = uo->wgt + w0;
                if (dst >= c->acc_depth)
                    return index_error("dst (acc)", dst, c->acc_depth, u, i, j);
                int32_t *a = &s->acc[dst * s->acc_row];
                if (in->reset) {
                    memset(a, 0, sizeof *a * s->acc_row);
                    if (is_gemm)
                        s->ctr.gemm_reset_ops++;
                    else {
                        s->ctr.alu_ops++;
                        s->ctr.alu_lanes += s->acc_row;
                    }
                } else if (is_gemm) {
                    if (src + src_last >= src_depth)
                        return index_error(dw ? "src + DEPTHWISE - 1 (inp)" : "src (inp)", src + src_last,
                                           src_depth, u, i, j);
                    if ((wgt >> wgt_shift) >= c->wgt_depth)
                        return index_error(dw ? "wgt / G (row of the tap group)" : "wgt", wgt >> wgt_shift,
                                           c->wgt_depth, u, i, j);
                    if (dw)
                        gemm_dw_op(s, (uint32_t)dst, (uint32_t)src, (uint32_t)wgt);
                    else
                        gemm_op(s, (uint32_t)dst, (uint32_t)src, (uint32_t)wgt);
                    s->ctr.gemm_ops++;
                    s->ctr.macs += op_macs;
                } else {
                    if (!in->use_imm && src >= src_depth)
                        return index_error("src (acc)", src, src_depth, u, i, j);
                    const int32_t *b = in->use_imm ? NULL : &s->acc[src * s->acc_row];
                    if (in->alu_opcode == TSR_ALU_LUT)
                        tsr_alu_lut_row(a, b, in->imm, s->acc_row, s->lut, (uint32_t)c->act_lut);
                    else
                        tsr_alu_apply_row(in->alu_opcode, a, b, in->imm, s->acc_row, c->acc_width);
                    s->ctr.alu_ops++;
                    s->ctr.alu_lanes += s->acc_row;
                }
                mirror(s, (uint32_t)dst);
            }
        }
    }
    return TSR_OK;
}

static int exec_cb(void *ctx, uint32_t index, const tsr_insn_t *in)
{
    tsr_fsim_t *s = ctx;
    (void)index;
    /* A resumed GEMM/ALU (only compute runs loops) was counted on its first call. */
    int resumed = s->loop_active && (in->opcode == TSR_OP_GEMM || in->opcode == TSR_OP_ALU);
    if (!resumed)
        s->ctr.insns[in->opcode]++;
    switch (in->opcode) {
    case TSR_OP_LOAD: return exec_load(s, in);
    case TSR_OP_STORE: return exec_store(s, in);
    case TSR_OP_GEMM:
    case TSR_OP_ALU: return exec_gemm_alu(s, in);
    default: return TSR_OK;
    }
}

int tsr_fsim_exec(tsr_fsim_t *s, const tsr_insn_t *in)
{
    int rc;
    if (s->pipe) /* a resumable loop of a run in progress would be lost */
        return tsr_err(TSR_EINVAL, "fsim: exec while a run is in progress");
    while ((rc = exec_cb(s, 0, in)) == TSR_PIPE_MORE)
        ;
    s->loop_active = 0;
    return rc;
}

const tsr_uop_t *tsr_fsim_uops(const tsr_fsim_t *s) { return s->uop; }

void tsr_fsim_set_timing_only(tsr_fsim_t *s, int on) { s->timing_only = on != 0; }

int tsr_fsim_start(tsr_fsim_t *s, uint64_t insn_addr, uint32_t count, uint64_t seed)
{
    int rc = TSR_OK;
    tsr_pipe_destroy(s->pipe);
    s->pipe = NULL;
    s->loop_active = 0;
    free(s->insns);
    s->insns = calloc(count ? count : 1, sizeof *s->insns);
    s->ninsns = count;
    if (!s->insns)
        return tsr_err(TSR_ENOMEM, "out of memory for %u instructions", count);
    const uint8_t *p = tsr_dram_ptr(s->dram, insn_addr, (uint64_t)count * TSR_INSN_BYTES);
    if (!p)
        return tsr_err(TSR_EFAULT,
                       "fetch: instructions [0x%llx, +%llu bytes) are outside every allocated buffer",
                       (unsigned long long)insn_addr, (unsigned long long)count * TSR_INSN_BYTES);
    for (uint32_t i = 0; i < count; i++) {
        tsr_insn_bits_t b;
        tsr_insn_bits_load(p + (size_t)i * TSR_INSN_BYTES, &b);
        if ((rc = tsr_insn_decode(&s->cfg, &b, &s->insns[i])))
            return tsr_err_prefix(rc, "fetch: insn #%u: ", i);
    }
    s->ctr.insn_bytes_fetched += (uint64_t)count * TSR_INSN_BYTES;
    return tsr_pipe_create(&s->cfg, s->insns, count, exec_cb, s, seed, &s->pipe);
}

int tsr_fsim_step(tsr_fsim_t *s, uint64_t budget, int *done)
{
    *done = 0;
    if (!s->pipe)
        return tsr_err(TSR_EINVAL, "no run started");
    return tsr_pipe_run(s->pipe, budget, done);
}

void tsr_fsim_abort(tsr_fsim_t *s)
{
    tsr_pipe_destroy(s->pipe);
    s->pipe = NULL;
    s->loop_active = 0;
}

int tsr_fsim_run(tsr_fsim_t *s, uint64_t insn_addr, uint32_t count, uint64_t seed)
{
    int done = 0;
    int rc = tsr_fsim_start(s, insn_addr, count, seed);
    if (!rc)
        rc = tsr_fsim_step(s, 0, &done);
    return rc;
}
