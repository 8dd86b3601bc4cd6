/*
 * tsr_ref: naive reference implementation of isa/semantics.md (see
 * tsr_ref.h). Written for obviousness: every rule of the spec appears as a
 * plain loop or expression, with 64-bit intermediates so that no step can
 * overflow before the explicit wrap.
 */
#include "tsr_ref.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char ref_msg[512];

const char *ref_errmsg(void)
{
    return ref_msg;
}

static int ref_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int ref_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ref_msg, sizeof ref_msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---------------------------------------------------------------- ALU */

int32_t ref_wrap(int64_t v, int width)
{
    uint64_t modulus = 1ull << width;
    uint64_t u = (uint64_t)v & (modulus - 1);
    if (u >= modulus / 2)
        return (int32_t)((int64_t)u - (int64_t)modulus);
    return (int32_t)u;
}

/* Arithmetic right shift written as floor division, so it does not rely on
 * the implementation-defined >> of negative numbers. */
static int64_t ref_asr(int64_t a, int64_t s)
{
    int64_t p = (int64_t)1 << s;
    int64_t q = a / p;
    if (a % p != 0 && a < 0)
        q -= 1;
    return q;
}

/* shr for an already clamped shift amount s. */
static int64_t ref_shift(int64_t a, int64_t s)
{
    if (s >= 0)
        return ref_asr(a, s);
    return a * ((int64_t)1 << -s); /* |a| < 2^31, -s <= 31: fits */
}

/* Round m * 2^-sh (sh >= 0) to an integer, half to even. */
static uint64_t ref_rne_shift(uint64_t m, int sh)
{
    if (sh == 0)
        return m;
    if (sh > 62)
        return 0;
    uint64_t q = m >> sh, rem = m & (((uint64_t)1 << sh) - 1), half = (uint64_t)1 << (sh - 1);
    return q + (rem > half || (rem == half && (q & 1)) ? 1 : 0);
}

/* Round m (> 0) to 24 significant bits, half to even; *e grows by the
 * bits dropped. */
static uint64_t ref_round24(uint64_t m, int *e)
{
    int msb = 63;
    while (!(m >> msb))
        msb--;
    if (msb <= 23)
        return m;
    int sh = msb - 23;
    m = ref_rne_shift(m, sh);
    *e += sh;
    if (m >> 24) { /* rounding carried to 2^24 */
        m >>= 1;
        *e += 1;
    }
    return m;
}

/* fscale in integers only (the way the RTL computes it): |a| to a 24-bit
 * significand (the int -> float32 rounding), times the scale's significand,
 * that product to 24 bits (the float32 multiply's rounding), then to an
 * integer, each rounding half to even; saturated to W bits. */
static int64_t ref_fscale(int64_t a, uint32_t bits, int W)
{
    int ex = (int)((bits >> 23) & 0xff);
    if (ex == 0 || ex == 0xff || a == 0)
        return 0;
    int neg = (a < 0) != (int)(bits >> 31);
    int e = 0;
    uint64_t m = ref_round24((uint64_t)(a < 0 ? -a : a), &e);
    m *= (uint64_t)((bits & 0x7fffffu) | 0x800000u);
    e += ex - 127 - 23;
    m = ref_round24(m, &e);
    int64_t lim = (int64_t)1 << (W - 1);
    uint64_t v;
    if (e >= 0)
        v = e >= 40 ? (uint64_t)1 << 63 : m << e;
    else
        v = ref_rne_shift(m, -e);
    if (neg)
        return v >= (uint64_t)lim ? -lim : -(int64_t)v;
    return v >= (uint64_t)lim ? lim - 1 : (int64_t)v;
}

int32_t ref_alu(uint32_t op, int32_t a32, int32_t b32, int W)
{
    int64_t a = a32, b = b32, r = 0;
    int64_t s = b;
    if (s < -(W - 1))
        s = -(W - 1);
    if (s > W - 1)
        s = W - 1;

    switch (op) {
    case TSR_ALU_MIN:
        r = a < b ? a : b;
        break;
    case TSR_ALU_MAX:
        r = a > b ? a : b;
        break;
    case TSR_ALU_ADD:
        r = a + b;
        break;
    case TSR_ALU_SHR:
        r = ref_shift(a, s);
        break;
    case TSR_ALU_MUL:
        r = a * b;
        break;
    case TSR_ALU_MOV:
        r = b;
        break;
    case TSR_ALU_RSHR:
        if (s > 0) {
            uint64_t mask = ((uint64_t)1 << s) - 1;
            uint64_t rem = (uint64_t)a & mask; /* low s bits, two's complement */
            uint64_t half = (mask >> 1) + (a < 0 ? 1 : 0);
            r = ref_asr(a, s) + (rem > half ? 1 : 0);
        } else {
            r = ref_shift(a, s);
        }
        break;
    case TSR_ALU_MULHR: {
        int64_t lim = (int64_t)1 << (W - 1);
        if (a == -lim && b == -lim) {
            r = lim - 1;
        } else {
            int64_t p = a * b;
            int64_t n = p >= 0 ? ((int64_t)1 << (W - 2)) : 1 - ((int64_t)1 << (W - 2));
            r = (p + n) / lim; /* C division truncates toward zero */
        }
        break;
    }
    case TSR_ALU_RQFIN: {
        /* Fields of b's low 32 bits (b as a two's complement integer), read
         * arithmetically: shift 5 bits, then zero point, lo, hi 9 bits each. */
        uint64_t u = (uint64_t)b & 0xffffffffull;
        int64_t f[4] = {(int64_t)(u % 32), (int64_t)((u / 32) % 512), (int64_t)((u / 16384) % 512),
                        (int64_t)((u / 8388608) % 512)};
        for (int k = 1; k < 4; k++)
            if (f[k] >= 256)
                f[k] -= 512;
        int64_t sh = f[0] < W - 1 ? f[0] : W - 1, q = a;
        if (sh > 0) { /* a / 2^sh rounded half away from zero */
            int64_t h = (int64_t)1 << (sh - 1);
            q = a >= 0 ? (a + h) >> sh : -((-a + h) >> sh);
        }
        q += f[1];
        if (q < f[2])
            q = f[2];
        if (q > f[3])
            q = f[3];
        r = q;
        break;
    }
    case TSR_ALU_FSCALE:
        r = ref_fscale(a, (uint32_t)b32, W);
        break;
    default:
        return 0;
    }
    return ref_wrap(r, W);
}

/* ------------------------------------------------------- value packing */

/* Signed value of `width` bits at bit offset `bit` of p (little-endian,
 * least significant bit first). */
static int32_t get_val(const uint8_t *p, uint64_t bit, int width)
{
    uint64_t u = 0;
    for (int k = 0; k < width; k++) {
        uint64_t b = bit + (uint64_t)k;
        if ((p[b / 8] >> (b % 8)) & 1)
            u |= (uint64_t)1 << k;
    }
    return ref_wrap((int64_t)u, width);
}

static void put_val(uint8_t *p, uint64_t bit, int width, int32_t v)
{
    uint64_t u = (uint64_t)(int64_t)v;
    for (int k = 0; k < width; k++) {
        uint64_t b = bit + (uint64_t)k;
        if ((u >> k) & 1)
            p[b / 8] = (uint8_t)(p[b / 8] | (1u << (b % 8)));
        else
            p[b / 8] = (uint8_t)(p[b / 8] & ~(1u << (b % 8)));
    }
}

/* ------------------------------------------------------------ machine */

static uint32_t bits_to_bytes(uint64_t bits)
{
    return (uint32_t)((bits + 7) / 8);
}

int ref_machine_init(ref_machine_t *m, const tsr_config_t *cfg)
{
    memset(m, 0, sizeof *m);
    m->batch = 1 << cfg->log_batch;
    m->block_in = 1 << cfg->log_block_in;
    m->block_out = 1 << cfg->log_block_out;
    m->inp_width = 1 << cfg->log_inp_width;
    m->wgt_width = 1 << cfg->log_wgt_width;
    m->acc_width = 1 << cfg->log_acc_width;
    m->out_width = m->inp_width; /* "output values (input width)" */
    m->inp_bytes = bits_to_bytes((uint64_t)m->batch * m->block_in * m->inp_width);
    m->wgt_bytes = bits_to_bytes((uint64_t)m->block_out * m->block_in * m->wgt_width);
    m->acc_bytes = bits_to_bytes((uint64_t)m->batch * m->block_out * m->acc_width);
    m->acc8_bytes = bits_to_bytes((uint64_t)m->batch * m->block_out * 8);
    m->out_bytes = bits_to_bytes((uint64_t)m->batch * m->block_out * m->out_width);
    m->uop_bytes = cfg->uop_bytes;
    if (cfg->act_lut < 0 || cfg->act_lut > 8)
        return ref_fail("unsupported config (ACT_LUT %d)", cfg->act_lut);
    m->lut_count = (uint32_t)cfg->act_lut;
    if (cfg->depthwise < 0 || cfg->depthwise > 8)
        return ref_fail("unsupported config (DEPTHWISE %d)", cfg->depthwise);
    m->dw_taps = cfg->depthwise;
    m->dw_groups = 1;
    while (m->dw_taps && (uint64_t)m->dw_taps * m->dw_groups * 2 <= (uint64_t)m->block_out)
        m->dw_groups *= 2;
    m->uop_dst_bits = cfg->uop_dst_bits;
    m->uop_src_bits = cfg->uop_src_bits;
    m->uop_wgt_bits = cfg->uop_wgt_bits;
    if (m->uop_bytes == 0 || m->acc_width > 32 || m->acc_width < 2)
        return ref_fail("unsupported config (uop_bytes %u, acc width %d)", m->uop_bytes, m->acc_width);
    m->uop_depth = (uint32_t)((1ull << cfg->log_uop_buff_size) / m->uop_bytes);
    m->inp_depth = (uint32_t)((1ull << cfg->log_inp_buff_size) / m->inp_bytes);
    m->wgt_depth = (uint32_t)((1ull << cfg->log_wgt_buff_size) / m->wgt_bytes);
    m->acc_depth = (uint32_t)((1ull << cfg->log_acc_buff_size) / m->acc_bytes);

    size_t nacc = (size_t)m->acc_depth * m->batch * m->block_out;
    m->uop = calloc(m->uop_depth ? m->uop_depth : 1, sizeof *m->uop);
    m->inp = calloc((size_t)m->inp_depth * m->batch * m->block_in + 1, sizeof *m->inp);
    m->wgt = calloc((size_t)m->wgt_depth * m->block_out * m->block_in + 1, sizeof *m->wgt);
    m->acc = calloc(nacc + 1, sizeof *m->acc);
    m->out = calloc(nacc + 1, sizeof *m->out);
    if (!m->uop || !m->inp || !m->wgt || !m->acc || !m->out) {
        ref_machine_free(m);
        return ref_fail("out of memory");
    }
    return 0;
}

void ref_machine_free(ref_machine_t *m)
{
    free(m->uop);
    free(m->inp);
    free(m->wgt);
    free(m->acc);
    free(m->out);
    m->uop = NULL;
    m->inp = m->wgt = m->acc = m->out = NULL;
}

int ref_machine_copy(ref_machine_t *dst, const ref_machine_t *src)
{
    size_t nu = src->uop_depth ? src->uop_depth : 1;
    size_t ni = (size_t)src->inp_depth * src->batch * src->block_in + 1;
    size_t nw = (size_t)src->wgt_depth * src->block_out * src->block_in + 1;
    size_t na = (size_t)src->acc_depth * src->batch * src->block_out + 1;
    *dst = *src;
    dst->uop = malloc(nu * sizeof *dst->uop);
    dst->inp = malloc(ni * sizeof *dst->inp);
    dst->wgt = malloc(nw * sizeof *dst->wgt);
    dst->acc = malloc(na * sizeof *dst->acc);
    dst->out = malloc(na * sizeof *dst->out);
    if (!dst->uop || !dst->inp || !dst->wgt || !dst->acc || !dst->out) {
        ref_machine_free(dst);
        return ref_fail("out of memory");
    }
    memcpy(dst->uop, src->uop, nu * sizeof *dst->uop);
    memcpy(dst->inp, src->inp, ni * sizeof *dst->inp);
    memcpy(dst->wgt, src->wgt, nw * sizeof *dst->wgt);
    memcpy(dst->acc, src->acc, na * sizeof *dst->acc);
    memcpy(dst->out, src->out, na * sizeof *dst->out);
    return 0;
}

uint32_t ref_elem_bytes(const ref_machine_t *m, uint32_t mem_type)
{
    switch (mem_type) {
    case TSR_MEM_UOP: return m->uop_bytes;
    case TSR_MEM_WGT: return m->wgt_bytes;
    case TSR_MEM_INP: return m->inp_bytes;
    case TSR_MEM_ACC: return m->acc_bytes;
    case TSR_MEM_OUT: return m->out_bytes;
    case TSR_MEM_ACC8: return m->acc8_bytes;
    case TSR_MEM_LUT: return m->lut_count ? 256 : 0; /* 256 int8 entries */
    default: return 0;
    }
}

uint32_t ref_sram_depth(const ref_machine_t *m, uint32_t mem_type)
{
    switch (mem_type) {
    case TSR_MEM_UOP: return m->uop_depth;
    case TSR_MEM_WGT: return m->wgt_depth;
    case TSR_MEM_INP: return m->inp_depth;
    case TSR_MEM_ACC:
    case TSR_MEM_OUT:
    case TSR_MEM_ACC8: return m->acc_depth;
    case TSR_MEM_LUT: return m->lut_count;
    default: return 0;
    }
}

void ref_uop_fields(const ref_machine_t *m, uint64_t raw, uint32_t *dst, uint32_t *src, uint32_t *wgt)
{
    int a = m->uop_dst_bits, b = m->uop_src_bits, c = m->uop_wgt_bits;
    *dst = (uint32_t)(raw & ((1ull << a) - 1));
    *src = (uint32_t)((raw >> a) & ((1ull << b) - 1));
    *wgt = (uint32_t)((raw >> (a + b)) & ((1ull << c) - 1));
}

/* Values per row and their width for a memory type, and the row's storage. */
static int32_t *row_values(ref_machine_t *m, uint32_t mem, uint32_t row, int *nvals, int *width)
{
    switch (mem) {
    case TSR_MEM_WGT:
        *nvals = m->block_out * m->block_in;
        *width = m->wgt_width;
        return m->wgt + (size_t)row * *nvals;
    case TSR_MEM_INP:
        *nvals = m->batch * m->block_in;
        *width = m->inp_width;
        return m->inp + (size_t)row * *nvals;
    case TSR_MEM_ACC:
        *nvals = m->batch * m->block_out;
        *width = m->acc_width;
        return m->acc + (size_t)row * *nvals;
    case TSR_MEM_ACC8: /* int8 in DRAM, lands in the accumulator */
        *nvals = m->batch * m->block_out;
        *width = 8;
        return m->acc + (size_t)row * *nvals;
    case TSR_MEM_OUT:
        *nvals = m->batch * m->block_out;
        *width = m->out_width;
        return m->out + (size_t)row * *nvals;
    default:
        return NULL;
    }
}

/* Host pointer to DRAM bytes [addr, addr + n), or NULL if outside. */
static const uint8_t *dram_at(const ref_dram_t *d, uint64_t addr, uint64_t n)
{
    if (addr < d->base || addr + n > d->base + d->size || addr + n < addr)
        return NULL;
    return d->bytes + (addr - d->base);
}

/* ---------------------------------------------------------- LOAD/STORE */

int ref_load(ref_machine_t *m, const tsr_insn_t *in, const ref_dram_t *d)
{
    uint32_t mem = in->mem_type;
    if (in->opcode != TSR_OP_LOAD)
        return ref_fail("ref_load: opcode %u", in->opcode);
    if (mem != TSR_MEM_UOP && mem != TSR_MEM_WGT && mem != TSR_MEM_INP && mem != TSR_MEM_ACC &&
        mem != TSR_MEM_ACC8 && mem != TSR_MEM_LUT)
        return ref_fail("load: memory type %u cannot be loaded", mem);
    if (mem == TSR_MEM_LUT && !m->lut_count)
        return ref_fail("load lut: the config has no tables (ACT_LUT = 0)");
    if (in->x_size == 0)
        return 0;
    if ((mem == TSR_MEM_UOP || mem == TSR_MEM_LUT) && (in->y_pad0 || in->y_pad1 || in->x_pad0 || in->x_pad1))
        return ref_fail("load uop/lut: padding not allowed");
    if (mem != TSR_MEM_INP && in->pad_value)
        return ref_fail("load: pad_value %d on a non-inp load", in->pad_value);

    uint64_t ebytes = ref_elem_bytes(m, mem);
    uint64_t depth = ref_sram_depth(m, mem);
    uint64_t row = (uint64_t)in->x_pad0 + in->x_size + in->x_pad1;
    uint64_t rows_y = (uint64_t)in->y_pad0 + in->y_size + in->y_pad1;
    if ((uint64_t)in->sram_base + rows_y * row > depth)
        return ref_fail("load: sram rows %u..%llu beyond depth %llu", in->sram_base,
                        (unsigned long long)(in->sram_base + rows_y * row), (unsigned long long)depth);

    for (uint64_t y = 0; y < rows_y; y++) {
        for (uint64_t x = 0; x < row; x++) {
            uint32_t r = (uint32_t)(in->sram_base + y * row + x);
            int pad = y < in->y_pad0 || y >= (uint64_t)in->y_pad0 + in->y_size || x < in->x_pad0 ||
                      x >= (uint64_t)in->x_pad0 + in->x_size;
            const uint8_t *src = NULL;
            if (!pad) {
                uint64_t e = (uint64_t)in->dram_base + (y - in->y_pad0) * in->x_stride + (x - in->x_pad0);
                src = dram_at(d, e * ebytes, ebytes);
                if (!src)
                    return ref_fail("load: DRAM element %llu (addr 0x%llx) outside DRAM",
                                    (unsigned long long)e, (unsigned long long)(e * ebytes));
            }
            if (mem == TSR_MEM_LUT) { /* (never a pad row: refused above) */
                for (int k = 0; k < 256; k++)
                    m->lut[r][k] = get_val(src, (uint64_t)k * 8, 8);
                continue;
            }
            if (mem == TSR_MEM_UOP) {
                uint64_t raw = 0;
                for (uint32_t k = 0; k < m->uop_bytes; k++)
                    raw |= (uint64_t)src[k] << (8 * k);
                m->uop[r] = raw;
                continue;
            }
            int nvals = 0, width = 8; /* (set by row_values for every type reaching here) */
            int32_t *vals = row_values(m, mem, r, &nvals, &width);
            for (int k = 0; k < nvals; k++)
                vals[k] = pad ? (mem == TSR_MEM_INP ? in->pad_value : 0) : get_val(src, (uint64_t)k * width, width);
        }
    }
    return 0;
}

int ref_store(ref_machine_t *m, const tsr_insn_t *in, ref_dram_t *d)
{
    if (in->opcode != TSR_OP_STORE)
        return ref_fail("ref_store: opcode %u", in->opcode);
    if (in->mem_type != TSR_MEM_OUT)
        return ref_fail("store: memory type %u (only out)", in->mem_type);
    if (in->y_pad0 || in->y_pad1 || in->x_pad0 || in->x_pad1)
        return ref_fail("store: padding must be zero");
    if (in->x_size == 0)
        return 0;
    uint64_t ebytes = m->out_bytes;
    for (uint64_t y = 0; y < in->y_size; y++) {
        for (uint64_t x = 0; x < in->x_size; x++) {
            uint64_t r = in->sram_base + y * in->x_size + x;
            uint64_t e = (uint64_t)in->dram_base + y * in->x_stride + x;
            if (r >= m->acc_depth)
                return ref_fail("store: out row %llu beyond depth %u", (unsigned long long)r, m->acc_depth);
            uint8_t *dst = (uint8_t *)dram_at(d, e * ebytes, ebytes);
            if (!dst)
                return ref_fail("store: DRAM element %llu outside DRAM", (unsigned long long)e);
            int nvals, width;
            int32_t *vals = row_values(m, TSR_MEM_OUT, (uint32_t)r, &nvals, &width);
            for (int k = 0; k < nvals; k++)
                put_val(dst, (uint64_t)k * width, width, vals[k]);
        }
    }
    return 0;
}

/* ------------------------------------------------------------ GEMM/ALU */

/* Index of one uop loop iteration: base + i*f_out + j*f_in (plain integers). */
static uint64_t loop_idx(uint32_t base, uint64_t i, uint32_t f_out, uint64_t j, uint32_t f_in)
{
    return base + i * f_out + j * f_in;
}

/* Write a new accumulator value and its truncated output copy. */
static void write_acc(ref_machine_t *m, uint64_t row, int lane, int64_t v)
{
    size_t k = (size_t)row * m->batch * m->block_out + (size_t)lane;
    m->acc[k] = ref_wrap(v, m->acc_width);
    m->out[k] = ref_wrap(m->acc[k], m->out_width);
}

int ref_gemm(ref_machine_t *m, const tsr_insn_t *in)
{
    if (in->opcode != TSR_OP_GEMM)
        return ref_fail("ref_gemm: opcode %u", in->opcode);
    if (in->uop_end > m->uop_depth)
        return ref_fail("gemm: uop_end %u beyond uop depth %u", in->uop_end, m->uop_depth);
    int B = m->batch, BI = m->block_in, BO = m->block_out;
    if (in->depthwise && !m->dw_taps)
        return ref_fail("gemm: depthwise mode without DEPTHWISE");
    /* depthwise: the op reads input rows src .. src+K-1 (semantics.md) */
    const uint64_t extra = in->depthwise ? (uint64_t)m->dw_taps - 1 : 0;
    for (uint64_t i = 0; i < in->iter_out; i++) {
        for (uint64_t j = 0; j < in->iter_in; j++) {
            for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
                uint32_t ud, us, uw;
                ref_uop_fields(m, m->uop[u], &ud, &us, &uw);
                uint64_t dst = loop_idx(ud, i, in->dst_factor_out, j, in->dst_factor_in);
                uint64_t src = loop_idx(us, i, in->src_factor_out, j, in->src_factor_in);
                uint64_t wgt = loop_idx(uw, i, in->wgt_factor_out, j, in->wgt_factor_in);
                /* operands a reset op does not read are not checked (semantics.md) */
                /* depthwise: wgt names a tap group, row wgt / groups */
                const uint64_t wrow = in->depthwise ? wgt / m->dw_groups : wgt;
                if (dst >= m->acc_depth || (!in->reset && (src + extra >= m->inp_depth || wrow >= m->wgt_depth)))
                    return ref_fail("gemm: i=%llu j=%llu u=%u: dst %llu src %llu wgt %llu out of range",
                                    (unsigned long long)i, (unsigned long long)j, u,
                                    (unsigned long long)dst, (unsigned long long)src,
                                    (unsigned long long)wgt);
                for (int b = 0; b < B; b++) {
                    for (int o = 0; o < BO; o++) {
                        if (in->reset) {
                            write_acc(m, dst, b * BO + o, 0);
                            continue;
                        }
                        int64_t sum = 0;
                        if (in->depthwise) { /* lane o: channel o, taps k < K from rows src+k */
                            for (int k = 0; k < m->dw_taps; k++) {
                                int64_t x = m->inp[(size_t)(src + (uint64_t)k) * B * BI + (size_t)b * BI + o];
                                uint64_t tap = (wgt % m->dw_groups) * (uint64_t)m->dw_taps + (uint64_t)k;
                                int64_t w = m->wgt[(size_t)wrow * BO * BI + (size_t)tap * BI + o];
                                sum += x * w;
                            }
                            int64_t a = m->acc[(size_t)dst * B * BO + (size_t)b * BO + o];
                            write_acc(m, dst, b * BO + o, a + sum);
                            continue;
                        }
                        for (int k = 0; k < BI; k++) {
                            int64_t x = m->inp[(size_t)src * B * BI + (size_t)b * BI + k];
                            int64_t w = m->wgt[(size_t)wgt * BO * BI + (size_t)o * BI + k];
                            sum += x * w;
                        }
                        int64_t a = m->acc[(size_t)dst * B * BO + (size_t)b * BO + o];
                        write_acc(m, dst, b * BO + o, a + sum);
                    }
                }
            }
        }
    }
    return 0;
}

int ref_alu_insn(ref_machine_t *m, const tsr_insn_t *in)
{
    if (in->opcode != TSR_OP_ALU)
        return ref_fail("ref_alu_insn: opcode %u", in->opcode);
    if (in->alu_opcode >= TSR_ALU_COUNT)
        return ref_fail("alu: bad op %u", in->alu_opcode);
    if (in->alu_opcode == TSR_ALU_LUT && !m->lut_count)
        return ref_fail("alu lut: the config has no tables (ACT_LUT = 0)");
    if (in->uop_end > m->uop_depth)
        return ref_fail("alu: uop_end %u beyond uop depth %u", in->uop_end, m->uop_depth);
    /* the immediate is a 16-bit field, sign-extended */
    int32_t imm = ref_wrap((int64_t)(uint32_t)in->imm & 0xffff, 16);
    int lanes = m->batch * m->block_out;
    for (uint64_t i = 0; i < in->iter_out; i++) {
        for (uint64_t j = 0; j < in->iter_in; j++) {
            for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
                uint32_t ud, us, uw;
                ref_uop_fields(m, m->uop[u], &ud, &us, &uw);
                uint64_t dst = loop_idx(ud, i, in->dst_factor_out, j, in->dst_factor_in);
                uint64_t src = loop_idx(us, i, in->src_factor_out, j, in->src_factor_in);
                /* src is not read (nor checked) by a reset or immediate op */
                if (dst >= m->acc_depth || (!in->reset && !in->use_imm && src >= m->acc_depth))
                    return ref_fail("alu: i=%llu j=%llu u=%u: dst %llu src %llu out of range",
                                    (unsigned long long)i, (unsigned long long)j, u,
                                    (unsigned long long)dst, (unsigned long long)src);
                /* lane by lane: with src == dst each lane still reads its own old value */
                for (int l = 0; l < lanes; l++) {
                    int32_t a = m->acc[(size_t)dst * lanes + l];
                    if (in->reset) {
                        write_acc(m, dst, l, 0);
                        continue;
                    }
                    int32_t b = in->use_imm ? imm : m->acc[(size_t)src * lanes + l];
                    int32_t r = ref_alu(in->alu_opcode, a, b, m->acc_width);
                    if (in->alu_opcode == TSR_ALU_LUT) {
                        /* table: b modulo the count (a power of two), taken
                         * non-negative; entry: a modulo 256, likewise (the
                         * byte a STORE of a would write) */
                        int64_t n = m->lut_count, t = ((int64_t)b % n + n) % n, e = ((int64_t)a % 256 + 256) % 256;
                        r = m->lut[t][e];
                    }
                    write_acc(m, dst, l, r);
                }
            }
        }
    }
    return 0;
}

int ref_exec(ref_machine_t *m, const tsr_insn_t *in, ref_dram_t *d)
{
    switch (in->opcode) {
    case TSR_OP_LOAD: return ref_load(m, in, d);
    case TSR_OP_STORE: return ref_store(m, in, d);
    case TSR_OP_GEMM: return ref_gemm(m, in);
    case TSR_OP_ALU: return ref_alu_insn(m, in);
    case TSR_OP_FINISH: return 0;
    default: return ref_fail("bad opcode %u", in->opcode);
    }
}
