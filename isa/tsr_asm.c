/*
 * tsr_asm: assembler and disassembler for the Tessera text format (grammar
 * in tsr_asm.h).
 *
 * Parsing is one pass over the lines followed by a resolve step: a .uops
 * buffer keeps growing until the last line and a buffer may be named before
 * it is declared, so placement and symbolic dram= addresses are fixed up at
 * the end. Every instruction is encoded as soon as it is parsed (symbolic
 * addresses as 0) so that a field that does not fit is reported at its own
 * line; instructions with symbolic addresses are encoded again once resolved.
 *
 * Placement: buffers with @ADDR stay where they are (they must not overlap).
 * The others are placed in declaration order (a .uops buffer is declared by
 * its first .uops line), each at the first TSR_ASM_ALIGN-aligned address at
 * or after the end of the previous automatically placed buffer (the first
 * one at or after TSR_ASM_BASE_ADDR) where it overlaps no @ADDR buffer.
 *
 * Random contents (`random SEED`): splitmix64. The state starts at SEED;
 * each step adds 0x9e3779b97f4a7c15 and mixes the state into a 64-bit word
 * (z ^= z >> 30, z *= 0xbf58476d1ce4e5b9, z ^= z >> 27, z *= 0x94d049bb133111eb,
 * z ^= z >> 31). The words are written little-endian; a final partial word
 * contributes its low bytes. It is documented here so that any tool can
 * reproduce a program's inputs.
 */
#include "tsr_asm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_file.h"
#include "tsr_util.h"

/* Longest excerpt of an offending token quoted in a message. */
#define SHOW 48
#define Q(t) (int)strnlen((t), SHOW), (t)

typedef struct {
    size_t insn;                 /* instruction whose dram_base this sets */
    char name[TSR_ASM_NAME_MAX]; /* buffer named */
    int64_t off;                 /* element offset (+N / -N) */
    int line;
    char tok[SHOW + 1];          /* the dram= token, for messages */
} fixup_t;

typedef struct {
    char name[TSR_ASM_NAME_MAX];
    int line;
} output_ref_t;

typedef struct {
    const tsr_config_t *cfg;
    const char *src;             /* name used in messages */
    int line;                    /* current source line */
    tsr_program_t *p;
    size_t cap_insns, cap_lines, cap_bufs, cap_fixed;
    unsigned char *fixed;        /* per buffer: placed with @ADDR */
    fixup_t *fix;
    size_t nfix, cap_fix;
    output_ref_t *outs;
    size_t nouts, cap_outs;
    char **tok;                  /* tokens of the current line */
    size_t ntok, cap_tok;
} asm_t;

/* Keys of instruction lines; flags are keys without a value. */
enum {
    K_SRAM, K_DRAM, K_Y, K_X, K_STRIDE, K_PAD, K_RESET, K_UOP, K_ITER, K_DST, K_SRC, K_WGT,
    K_IMM, K_USE_IMM, K_PAD_VALUE, K_POP_PREV, K_POP_NEXT, K_PUSH_PREV, K_PUSH_NEXT, K_DEPTHWISE, K_COUNT
};
static const char *const key_names[K_COUNT] = {
    "sram", "dram", "y", "x", "stride", "pad", "reset", "uop", "iter", "dst", "src", "wgt",
    "imm", "use_imm", "pad_value", "pop_prev", "pop_next", "push_prev", "push_next", "depthwise",
};
#define B(k) (1u << (k))
#define FLAG_KEYS (B(K_POP_PREV) | B(K_POP_NEXT) | B(K_PUSH_PREV) | B(K_PUSH_NEXT))
#define MEM_KEYS (B(K_SRAM) | B(K_DRAM) | B(K_Y) | B(K_X) | B(K_STRIDE))
#define LOOP_KEYS (B(K_UOP) | B(K_ITER) | B(K_DST) | B(K_SRC))

/* Indexed by opcode. */
static const unsigned allowed_keys[TSR_OP_COUNT] = {
    [TSR_OP_LOAD] = MEM_KEYS | B(K_PAD) | B(K_PAD_VALUE) | FLAG_KEYS,
    [TSR_OP_STORE] = MEM_KEYS | B(K_PAD) | B(K_PAD_VALUE) | FLAG_KEYS,
    [TSR_OP_GEMM] = LOOP_KEYS | B(K_WGT) | B(K_RESET) | B(K_DEPTHWISE) | FLAG_KEYS,
    [TSR_OP_FINISH] = FLAG_KEYS,
    [TSR_OP_ALU] = LOOP_KEYS | B(K_RESET) | B(K_IMM) | B(K_USE_IMM) | FLAG_KEYS,
};
static const unsigned required_keys[TSR_OP_COUNT] = {
    [TSR_OP_LOAD] = MEM_KEYS,
    [TSR_OP_STORE] = MEM_KEYS,
    [TSR_OP_GEMM] = LOOP_KEYS | B(K_WGT),
    [TSR_OP_FINISH] = 0,
    [TSR_OP_ALU] = LOOP_KEYS,
};

/* ---------------------------------------------------------------- helpers */

static int perr(asm_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(asm_t *a, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tsr_err(TSR_EPARSE, "%s:%d: %s", a->src, a->line, msg);
}

static int nomem(asm_t *a) { return tsr_err(TSR_ENOMEM, "%s:%d: out of memory", a->src, a->line); }

/* Returns a block with room for need elements (ptr itself if it has room),
 * or NULL with ptr still valid. */
static void *grow(void *ptr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap && ptr)
        return ptr;
    size_t n = *cap ? *cap : 8;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return NULL;
        n *= 2;
    }
    void *q = realloc(ptr, n * elem);
    if (q)
        *cap = n;
    return q;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
static int is_alpha_(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_alnum_(char c) { return is_alpha_(c) || (c >= '0' && c <= '9'); }

static int valid_name(const char *s)
{
    if (!is_alpha_(*s))
        return 0;
    while (*++s)
        if (!is_alnum_(*s))
            return 0;
    return 1;
}

/* An unsigned decimal or 0x-hex number spanning exactly [s, s + n).
 * 0 ok, -1 malformed, -2 larger than 64 bits. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0, base = 10;
    size_t i = 0;
    if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        i = 2;
    }
    if (i == n)
        return -1;
    for (; i < n; i++) {
        char c = s[i];
        uint64_t d;
        if (c >= '0' && c <= '9')
            d = (uint64_t)(c - '0');
        else if (base == 16 && c >= 'a' && c <= 'f')
            d = (uint64_t)(c - 'a' + 10);
        else if (base == 16 && c >= 'A' && c <= 'F')
            d = (uint64_t)(c - 'A' + 10);
        else
            return -1;
        if (v > (UINT64_MAX - d) / base)
            return -2;
        v = v * base + d;
    }
    *out = v;
    return 0;
}

/* Unsigned 32-bit value [s, s + n) of token tok (quoted in messages). */
static int num_u32(asm_t *a, const char *s, size_t n, const char *tok, uint32_t *out)
{
    uint64_t v;
    if (n > 0 && s[0] == '-')
        return perr(a, "negative number not allowed here (%.*s)", Q(tok));
    int r = parse_u64(s, n, &v);
    if (r == -1)
        return perr(a, "malformed number (%.*s)", Q(tok));
    if (r == -2 || v > UINT32_MAX)
        return perr(a, "value does not fit its field (%.*s)", Q(tok));
    *out = (uint32_t)v;
    return TSR_OK;
}

static int num_i32(asm_t *a, const char *s, const char *tok, int32_t *out)
{
    size_t n = strlen(s);
    int neg = n > 0 && s[0] == '-';
    uint64_t v;
    int r = parse_u64(s + neg, n - (size_t)neg, &v);
    if (r == -1)
        return perr(a, "malformed number (%.*s)", Q(tok));
    if (r == -2 || v > (neg ? 0x80000000ull : 0x7fffffffull))
        return perr(a, "value does not fit its field (%.*s)", Q(tok));
    *out = neg ? (int32_t)(-(int64_t)v) : (int32_t)v;
    return TSR_OK;
}

/* Exactly k unsigned numbers separated by sep. */
static int num_list(asm_t *a, const char *val, char sep, int k, const char *tok, uint32_t *out)
{
    const char *p = val;
    for (int i = 0; i < k; i++) {
        const char *e = strchr(p, sep);
        if ((i < k - 1) != (e != NULL))
            return perr(a, "malformed value, expected %d numbers separated by '%c' (%.*s)", k, sep,
                        Q(tok));
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int rc = num_u32(a, p, len, tok, &out[i]);
        if (rc)
            return rc;
        p = e ? e + 1 : p + len;
    }
    return TSR_OK;
}

static int bool01(asm_t *a, const char *v, const char *tok, uint32_t *out)
{
    if (strcmp(v, "0") && strcmp(v, "1"))
        return perr(a, "value must be 0 or 1 (%.*s)", Q(tok));
    *out = (uint32_t)(v[0] - '0');
    return TSR_OK;
}

static ptrdiff_t find_buf(const tsr_program_t *p, const char *name)
{
    for (size_t i = 0; i < p->nbufs; i++)
        if (!strcmp(p->bufs[i].name, name))
            return (ptrdiff_t)i;
    return -1;
}

/* [a, a + as) and [b, b + bs) intersect; neither end overflows (checked by callers). */
static int overlaps(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
    return a < b + bs && b < a + as;
}

static int align_up(uint64_t x, uint64_t *out)
{
    if (x > UINT64_MAX - (TSR_ASM_ALIGN - 1))
        return -1;
    *out = (x + TSR_ASM_ALIGN - 1) & ~(TSR_ASM_ALIGN - 1);
    return 0;
}

static tsr_asm_buffer_t *new_buf(asm_t *a, const char *name, int fixed)
{
    tsr_program_t *p = a->p;
    void *q = grow(p->bufs, &a->cap_bufs, p->nbufs + 1, sizeof *p->bufs);
    if (!q)
        return NULL;
    p->bufs = q;
    q = grow(a->fixed, &a->cap_fixed, p->nbufs + 1, 1);
    if (!q)
        return NULL;
    a->fixed = q;
    a->fixed[p->nbufs] = (unsigned char)fixed;
    tsr_asm_buffer_t *b = &p->bufs[p->nbufs++];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    b->line = a->line;
    return b;
}

/* A buffer name token: an identifier shorter than TSR_ASM_NAME_MAX. */
static int check_name(asm_t *a, const char *name)
{
    if (!valid_name(name))
        return perr(a, "bad buffer name, expected [A-Za-z_][A-Za-z0-9_]* (%.*s)", Q(name));
    if (strlen(name) >= TSR_ASM_NAME_MAX)
        return perr(a, "buffer name longer than %d characters (%.*s)", TSR_ASM_NAME_MAX - 1,
                    Q(name));
    return TSR_OK;
}

/* -------------------------------------------------------------- directives */

/* .buffer NAME SIZE [@ADDR] [zero | random SEED | file PATH] */
static int parse_buffer(asm_t *a)
{
    char **t = a->tok;
    size_t n = a->ntok, i = 3;
    uint64_t size, addr = 0, seed = 0;
    int fixed = 0, init = TSR_INIT_ZERO, rc;
    const char *path = NULL;

    if (n < 2)
        return perr(a, "missing buffer name (.buffer)");
    if ((rc = check_name(a, t[1])))
        return rc;
    if (find_buf(a->p, t[1]) >= 0)
        return perr(a, "duplicate buffer name (%.*s)", Q(t[1]));
    if (n < 3)
        return perr(a, "missing buffer size (%.*s)", Q(t[1]));
    if (t[2][0] == '-')
        return perr(a, "negative number not allowed here (%.*s)", Q(t[2]));
    if ((rc = parse_u64(t[2], strlen(t[2]), &size)))
        return perr(a, rc == -1 ? "malformed number (%.*s)" : "buffer size too large (%.*s)",
                    Q(t[2]));
    if (size == 0)
        return perr(a, "buffer size must be positive (%.*s)", Q(t[2]));
    if (i < n && t[i][0] == '@') {
        if ((rc = parse_u64(t[i] + 1, strlen(t[i] + 1), &addr)))
            return perr(a, rc == -1 ? "malformed address (%.*s)" : "address too large (%.*s)",
                        Q(t[i]));
        if (addr % TSR_ASM_ALIGN)
            return perr(a, "buffer address not aligned to %llu bytes (%.*s)",
                        (unsigned long long)TSR_ASM_ALIGN, Q(t[i]));
        if (size > UINT64_MAX - addr)
            return perr(a, "buffer does not fit the address space (%.*s)", Q(t[i]));
        for (size_t j = 0; j < a->p->nbufs; j++)
            if (a->fixed[j] && overlaps(addr, size, a->p->bufs[j].addr, a->p->bufs[j].size))
                return perr(a, "buffer overlaps buffer %s declared at line %d (%.*s)",
                            a->p->bufs[j].name, a->p->bufs[j].line, Q(t[i]));
        fixed = 1;
        i++;
    }
    if (i < n) {
        if (!strcmp(t[i], "zero")) {
            i++;
        } else if (!strcmp(t[i], "random")) {
            if (i + 1 >= n)
                return perr(a, "missing seed after random (%.*s)", Q(t[1]));
            if (t[i + 1][0] == '-')
                return perr(a, "negative number not allowed here (%.*s)", Q(t[i + 1]));
            if ((rc = parse_u64(t[i + 1], strlen(t[i + 1]), &seed)))
                return perr(a, rc == -1 ? "malformed number (%.*s)" : "seed too large (%.*s)",
                            Q(t[i + 1]));
            init = TSR_INIT_RANDOM;
            i += 2;
        } else if (!strcmp(t[i], "file")) {
            if (i + 1 >= n)
                return perr(a, "missing path after file (%.*s)", Q(t[1]));
            path = t[i + 1];
            init = TSR_INIT_FILE;
            i += 2;
        } else {
            return perr(a, "unexpected token, expected @ADDR, zero, random SEED or file PATH "
                           "(%.*s)",
                        Q(t[i]));
        }
    }
    if (i < n)
        return perr(a, "unexpected token after buffer declaration (%.*s)", Q(t[i]));

    tsr_asm_buffer_t *b = new_buf(a, t[1], fixed);
    if (!b)
        return nomem(a);
    b->addr = addr;
    b->size = size;
    b->init = init;
    b->seed = seed;
    if (path && !(b->path = strdup(path)))
        return nomem(a);
    return TSR_OK;
}

/* .uops NAME D,S,W [D,S,W ...] */
static int parse_uops(asm_t *a)
{
    char **t = a->tok;
    size_t n = a->ntok;
    uint64_t *raw = NULL;
    int rc;

    if (n < 2)
        return perr(a, "missing buffer name (.uops)");
    if ((rc = check_name(a, t[1])))
        return rc;
    ptrdiff_t idx = find_buf(a->p, t[1]);
    if (idx >= 0 && a->p->bufs[idx].init != TSR_INIT_UOPS)
        return perr(a, "buffer %s declared at line %d is not a .uops buffer (%.*s)",
                    a->p->bufs[idx].name, a->p->bufs[idx].line, Q(t[1]));
    if (n < 3)
        return perr(a, "missing uop triple D,S,W (%.*s)", Q(t[1]));

    size_t cnt = n - 2;
    if (!(raw = malloc(cnt * sizeof *raw)))
        return nomem(a);
    for (size_t i = 0; i < cnt; i++) {
        const char *s = t[i + 2];
        uint32_t f[3];
        const char *p = s;
        for (int k = 0; k < 3; k++) {
            const char *e = strchr(p, ',');
            if ((k < 2) != (e != NULL)) {
                rc = perr(a, "bad uop triple, expected D,S,W (%.*s)", Q(s));
                goto out;
            }
            size_t len = e ? (size_t)(e - p) : strlen(p);
            uint64_t v;
            int r = parse_u64(p, len, &v);
            if (r == -1) {
                rc = perr(a, "bad uop triple, malformed number (%.*s)", Q(s));
                goto out;
            }
            if (r == -2 || v > UINT32_MAX) {
                rc = perr(a, "uop field does not fit (%.*s)", Q(s));
                goto out;
            }
            f[k] = (uint32_t)v;
            p = e ? e + 1 : p + len;
        }
        tsr_uop_t u = {f[0], f[1], f[2]};
        if ((rc = tsr_uop_encode(a->cfg, &u, &raw[i]))) {
            rc = perr(a, "%s (%.*s)", tsr_errmsg(), Q(s));
            goto out;
        }
    }

    tsr_asm_buffer_t *b = idx >= 0 ? &a->p->bufs[idx] : new_buf(a, t[1], 0);
    if (!b) {
        rc = nomem(a);
        goto out;
    }
    b->init = TSR_INIT_UOPS;
    uint64_t *q = realloc(b->uops, (b->nuops + cnt) * sizeof *q);
    if (!q) {
        rc = nomem(a);
        goto out;
    }
    b->uops = q;
    memcpy(b->uops + b->nuops, raw, cnt * sizeof *raw);
    b->nuops += cnt;
    b->size = (uint64_t)b->nuops * a->cfg->uop_bytes;
    rc = TSR_OK;
out:
    free(raw);
    return rc;
}

static int parse_output(asm_t *a)
{
    int rc;
    if (a->ntok < 2)
        return perr(a, "missing buffer name (.output)");
    if (a->ntok > 2)
        return perr(a, "unexpected token after .output NAME (%.*s)", Q(a->tok[2]));
    if ((rc = check_name(a, a->tok[1])))
        return rc;
    void *q = grow(a->outs, &a->cap_outs, a->nouts + 1, sizeof *a->outs);
    if (!q)
        return nomem(a);
    a->outs = q;
    output_ref_t *o = &a->outs[a->nouts++];
    snprintf(o->name, sizeof o->name, "%s", a->tok[1]);
    o->line = a->line;
    return TSR_OK;
}

/* ------------------------------------------------------------ instructions */

/* dram=EXPR: a number, or NAME / NAME+N / NAME-N recorded as a fixup. */
static int parse_dram(asm_t *a, const char *v, const char *tok, uint32_t *dram, fixup_t *fx,
                      int *has_fix)
{
    if (!is_alpha_(v[0]))
        return num_u32(a, v, strlen(v), tok, dram);
    size_t len = 1;
    while (is_alnum_(v[len]))
        len++;
    if (len >= TSR_ASM_NAME_MAX)
        return perr(a, "unknown buffer (%.*s)", Q(tok));
    memset(fx, 0, sizeof *fx);
    memcpy(fx->name, v, len);
    fx->line = a->line;
    snprintf(fx->tok, sizeof fx->tok, "%.*s", Q(tok));
    const char *r = v + len;
    if (*r == '+' || *r == '-') {
        uint32_t off;
        int rc = num_u32(a, r + 1, strlen(r + 1), tok, &off);
        if (rc)
            return rc;
        fx->off = *r == '-' ? -(int64_t)off : (int64_t)off;
    } else if (*r) {
        return perr(a, "malformed address, expected NAME, NAME+N or NAME-N (%.*s)", Q(tok));
    }
    *dram = 0;
    *has_fix = 1;
    return TSR_OK;
}

static int add_insn(asm_t *a, const tsr_insn_t *in)
{
    tsr_program_t *p = a->p;
    void *q = grow(p->insns, &a->cap_insns, p->ninsns + 1, sizeof *p->insns);
    if (!q)
        return nomem(a);
    p->insns = q;
    q = grow(p->lines, &a->cap_lines, p->ninsns + 1, sizeof *p->lines);
    if (!q)
        return nomem(a);
    p->lines = q;
    p->insns[p->ninsns] = *in;
    p->lines[p->ninsns] = a->line;
    p->ninsns++;
    return TSR_OK;
}

static int parse_insn(asm_t *a, uint32_t op)
{
    tsr_insn_t in;
    tsr_insn_bits_t bits;
    fixup_t fx;
    int has_fix = 0, rc = TSR_OK;
    unsigned seen = 0;
    size_t i = 1;

    memset(&in, 0, sizeof in);
    memset(&fx, 0, sizeof fx);
    in.opcode = op;
    if (op == TSR_OP_LOAD || op == TSR_OP_STORE) {
        if (a->ntok < 2)
            return perr(a, "missing memory type (%s)", a->tok[0]);
        for (in.mem_type = 0; in.mem_type < TSR_MEM_COUNT; in.mem_type++)
            if (!strcmp(a->tok[1], tsr_mem_name(in.mem_type)))
                break;
        if (in.mem_type == TSR_MEM_COUNT)
            return perr(a, "unknown memory type, expected uop wgt inp acc out acc8 lut (%.*s)",
                        Q(a->tok[1]));
        i = 2;
    } else if (op == TSR_OP_ALU) {
        if (a->ntok < 2)
            return perr(a, "missing ALU op (alu)");
        for (in.alu_opcode = 0; in.alu_opcode < TSR_ALU_COUNT; in.alu_opcode++)
            if (!strcmp(a->tok[1], tsr_alu_name(in.alu_opcode)))
                break;
        if (in.alu_opcode == TSR_ALU_COUNT)
            return perr(a, "unknown ALU op, expected min max add shr mul mov rshr mulhr rqfin fscale lut (%.*s)",
                        Q(a->tok[1]));
        i = 2;
    }

    for (; i < a->ntok; i++) {
        const char *t = a->tok[i];
        const char *eq = strchr(t, '=');
        size_t klen = eq ? (size_t)(eq - t) : strlen(t);
        int k;
        for (k = 0; k < K_COUNT; k++)
            if (strlen(key_names[k]) == klen && !strncmp(t, key_names[k], klen))
                break;
        if (k == K_COUNT || !(allowed_keys[op] & B(k)))
            return perr(a, "unknown key for %s (%.*s)", a->tok[0], Q(t));
        if (seen & B(k))
            return perr(a, "duplicate key (%.*s)", Q(t));
        seen |= B(k);
        const char *v = eq ? eq + 1 : NULL;
        if (FLAG_KEYS & B(k)) {
            if (v)
                return perr(a, "flag takes no value (%.*s)", Q(t));
            uint32_t *flag[4] = {&in.pop_prev, &in.pop_next, &in.push_prev, &in.push_next};
            *flag[k - K_POP_PREV] = 1;
            continue;
        }
        if (k == K_RESET && !v) {
            in.reset = 1;
            continue;
        }
        if (k == K_DEPTHWISE && !v) {
            in.depthwise = 1;
            continue;
        }
        if (!v)
            return perr(a, "missing value for key (%.*s)", Q(t));
        uint32_t l[4];
        switch (k) {
        case K_SRAM: rc = num_u32(a, v, strlen(v), t, &in.sram_base); break;
        case K_DRAM: rc = parse_dram(a, v, t, &in.dram_base, &fx, &has_fix); break;
        case K_Y: rc = num_u32(a, v, strlen(v), t, &in.y_size); break;
        case K_X: rc = num_u32(a, v, strlen(v), t, &in.x_size); break;
        case K_STRIDE: rc = num_u32(a, v, strlen(v), t, &in.x_stride); break;
        case K_PAD:
            if (!(rc = num_list(a, v, ',', 4, t, l))) {
                in.y_pad0 = l[0];
                in.y_pad1 = l[1];
                in.x_pad0 = l[2];
                in.x_pad1 = l[3];
            }
            break;
        case K_RESET: rc = bool01(a, v, t, &in.reset); break;
        case K_USE_IMM: rc = bool01(a, v, t, &in.use_imm); break;
        case K_DEPTHWISE: rc = bool01(a, v, t, &in.depthwise); break;
        case K_IMM: rc = num_i32(a, v, t, &in.imm); break;
        case K_PAD_VALUE: rc = num_i32(a, v, t, &in.pad_value); break;
        case K_UOP:
            if (!(rc = num_list(a, v, ':', 2, t, l))) {
                in.uop_bgn = l[0];
                in.uop_end = l[1];
            }
            break;
        case K_ITER:
            if (!(rc = num_list(a, v, ',', 2, t, l))) {
                in.iter_out = l[0];
                in.iter_in = l[1];
            }
            break;
        case K_DST:
            if (!(rc = num_list(a, v, ',', 2, t, l))) {
                in.dst_factor_out = l[0];
                in.dst_factor_in = l[1];
            }
            break;
        case K_SRC:
            if (!(rc = num_list(a, v, ',', 2, t, l))) {
                in.src_factor_out = l[0];
                in.src_factor_in = l[1];
            }
            break;
        default: /* K_WGT */
            if (!(rc = num_list(a, v, ',', 2, t, l))) {
                in.wgt_factor_out = l[0];
                in.wgt_factor_in = l[1];
            }
            break;
        }
        if (rc)
            return rc;
    }
    unsigned missing = required_keys[op] & ~seen;
    if (missing) {
        int k = 0;
        while (!(missing & B(k)))
            k++;
        return perr(a, "missing required key (%s)", key_names[k]);
    }
    if (op == TSR_OP_ALU && !(seen & B(K_USE_IMM)))
        in.use_imm = (seen & B(K_IMM)) != 0;
    if ((rc = tsr_insn_encode(a->cfg, &in, &bits)))
        return perr(a, "value does not fit its field: %s", tsr_errmsg());
    if (has_fix) {
        void *q = grow(a->fix, &a->cap_fix, a->nfix + 1, sizeof *a->fix);
        if (!q)
            return nomem(a);
        a->fix = q;
        fx.insn = a->p->ninsns;
        a->fix[a->nfix++] = fx;
    }
    return add_insn(a, &in);
}

static int parse_line(asm_t *a, char *s)
{
    char *c = strchr(s, '#');
    if (c)
        *c = '\0';
    a->ntok = 0;
    while (*s) {
        while (is_ws(*s))
            *s++ = '\0';
        if (!*s)
            break;
        void *q = grow(a->tok, &a->cap_tok, a->ntok + 1, sizeof *a->tok);
        if (!q)
            return nomem(a);
        a->tok = q;
        a->tok[a->ntok++] = s;
        while (*s && !is_ws(*s))
            s++;
    }
    if (!a->ntok)
        return TSR_OK;
    const char *m = a->tok[0];
    if (!strcmp(m, ".buffer"))
        return parse_buffer(a);
    if (!strcmp(m, ".uops"))
        return parse_uops(a);
    if (!strcmp(m, ".output"))
        return parse_output(a);
    for (uint32_t op = 0; op < TSR_OP_COUNT; op++)
        if (!strcmp(m, tsr_opcode_name(op)))
            return parse_insn(a, op);
    return perr(a, "unknown mnemonic (%.*s)", Q(m));
}

/* ----------------------------------------------------------------- resolve */

static int place_buffers(asm_t *a)
{
    tsr_program_t *p = a->p;
    uint64_t cur = TSR_ASM_BASE_ADDR;
    for (size_t i = 0; i < p->nbufs; i++) {
        tsr_asm_buffer_t *b = &p->bufs[i];
        uint64_t addr;
        if (a->fixed[i])
            continue;
        a->line = b->line;
        if (align_up(cur, &addr))
            goto full;
    again:
        if (b->size > UINT64_MAX - addr)
            goto full;
        /* Each move passes one @ADDR buffer for good, so this terminates. */
        for (size_t j = 0; j < p->nbufs; j++)
            if (a->fixed[j] && overlaps(addr, b->size, p->bufs[j].addr, p->bufs[j].size)) {
                if (align_up(p->bufs[j].addr + p->bufs[j].size, &addr))
                    goto full;
                goto again;
            }
        b->addr = addr;
        cur = addr + b->size;
        continue;
    full:
        return perr(a, "buffer does not fit the address space (%s)", b->name);
    }
    return TSR_OK;
}

static int resolve_fixups(asm_t *a)
{
    tsr_program_t *p = a->p;
    for (size_t i = 0; i < a->nfix; i++) {
        const fixup_t *fx = &a->fix[i];
        tsr_insn_t *in = &p->insns[fx->insn];
        tsr_insn_bits_t bits;
        a->line = fx->line;
        ptrdiff_t idx = find_buf(p, fx->name);
        if (idx < 0)
            return perr(a, "unknown buffer %s (%s)", fx->name, fx->tok);
        const tsr_asm_buffer_t *b = &p->bufs[idx];
        uint32_t eb = tsr_config_elem_bytes(a->cfg, (int)in->mem_type);
        if (!eb && in->mem_type == TSR_MEM_LUT)
            return perr(a, "memory type lut needs config key ACT_LUT > 0 (%s)", fx->tok);
        if (!eb)
            return perr(a, "memory type has no element size (%s)", fx->tok);
        if (b->addr % eb)
            return perr(a,
                        "misaligned address: buffer %s at 0x%llx is not a multiple of the %u-byte "
                        "%s element (%s)",
                        b->name, (unsigned long long)b->addr, eb, tsr_mem_name(in->mem_type),
                        fx->tok);
        uint64_t base = b->addr / eb, e;
        if (fx->off < 0 && (uint64_t)(-fx->off) > base)
            return perr(a, "dram address out of range: below 0 (%s)", fx->tok);
        e = fx->off < 0 ? base - (uint64_t)(-fx->off) : base + (uint64_t)fx->off;
        if (e > UINT32_MAX)
            return perr(a, "dram address out of range: element %llu does not fit 32 bits (%s)",
                        (unsigned long long)e, fx->tok);
        in->dram_base = (uint32_t)e;
        if (tsr_insn_encode(a->cfg, in, &bits))
            return perr(a, "value does not fit its field: %s", tsr_errmsg());
    }
    return TSR_OK;
}

static int resolve(asm_t *a)
{
    int rc;
    if ((rc = place_buffers(a)) || (rc = resolve_fixups(a)))
        return rc;
    for (size_t i = 0; i < a->nouts; i++) {
        a->line = a->outs[i].line;
        ptrdiff_t idx = find_buf(a->p, a->outs[i].name);
        if (idx < 0)
            return perr(a, "unknown buffer in .output (%s)", a->outs[i].name);
        a->p->bufs[idx].is_output = 1;
    }
    return TSR_OK;
}

/* -------------------------------------------------------------- public API */

int tsr_asm_parse(const tsr_config_t *cfg, const char *text, const char *name, tsr_program_t *prog)
{
    asm_t a;
    char *copy = NULL;
    int rc = TSR_OK;

    memset(&a, 0, sizeof a);
    if (!prog)
        return tsr_err(TSR_EINVAL, "tsr_asm_parse: no program given");
    memset(prog, 0, sizeof *prog);
    a.cfg = cfg;
    a.src = name ? name : "<input>";
    a.p = prog;
    if (!cfg || !text) {
        rc = tsr_err(TSR_EINVAL, "%s: no config or text given", a.src);
        goto out;
    }
    if (!(copy = strdup(text))) {
        rc = nomem(&a);
        goto out;
    }
    for (char *s = copy; s;) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = '\0';
        a.line++;
        if ((rc = parse_line(&a, s)))
            goto out;
        s = nl ? nl + 1 : NULL;
    }
    rc = resolve(&a);
out:
    free(copy);
    free(a.fixed);
    free(a.fix);
    free(a.outs);
    free(a.tok);
    if (rc)
        tsr_program_free(prog);
    return rc;
}

int tsr_asm_parse_file(const tsr_config_t *cfg, const char *path, tsr_program_t *prog)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (prog)
        memset(prog, 0, sizeof *prog);
    if (!path || !prog)
        return tsr_err(TSR_EINVAL, "tsr_asm_parse_file: no path or program given");
    if ((rc = tsr_file_read(path, TSR_ASM_MAX_FILE, "assembly file", &buf, &len)))
        return rc;
    const char *text = (const char *)buf;
    if (strlen(text) != len) {
        int line = 1;
        for (size_t i = 0; text[i]; i++)
            line += text[i] == '\n';
        rc = tsr_err(TSR_EPARSE, "%s:%d: file contains a NUL byte", path, line);
    } else {
        rc = tsr_asm_parse(cfg, text, path, prog);
    }
    free(buf);
    return rc;
}

void tsr_program_free(tsr_program_t *prog)
{
    if (!prog)
        return;
    for (size_t i = 0; i < prog->nbufs; i++) {
        free(prog->bufs[i].path);
        free(prog->bufs[i].uops);
    }
    free(prog->bufs);
    free(prog->insns);
    free(prog->lines);
    memset(prog, 0, sizeof *prog);
}

static int flags_text(const tsr_insn_t *in, char *t, size_t n, int k)
{
    static const char *const names[4] = {"pop_prev", "pop_next", "push_prev", "push_next"};
    const uint32_t v[4] = {in->pop_prev, in->pop_next, in->push_prev, in->push_next};
    for (int i = 0; i < 4; i++)
        if (v[i] && k >= 0 && (size_t)k < n)
            k += snprintf(t + k, n - (size_t)k, " %s", names[i]);
    return k;
}

int tsr_disasm_insn(const tsr_config_t *cfg, const tsr_insn_t *in, char *buf, size_t n)
{
    char t[512];
    int k;
    (void)cfg; /* the text form does not depend on field widths */
    if (!in)
        return tsr_err(TSR_EINVAL, "disasm: no instruction given");
    switch (in->opcode) {
    case TSR_OP_LOAD:
    case TSR_OP_STORE:
        if (!tsr_mem_name(in->mem_type))
            return tsr_err(TSR_EINVAL, "disasm: %s has invalid memory type %u",
                           tsr_opcode_name(in->opcode), in->mem_type);
        k = snprintf(t, sizeof t, "%s %s sram=%u dram=%u y=%u x=%u stride=%u pad=%u,%u,%u,%u",
                     tsr_opcode_name(in->opcode), tsr_mem_name(in->mem_type), in->sram_base,
                     in->dram_base, in->y_size, in->x_size, in->x_stride, in->y_pad0, in->y_pad1,
                     in->x_pad0, in->x_pad1);
        if (k > 0 && in->pad_value && (size_t)k < sizeof t)
            k += snprintf(t + k, sizeof t - (size_t)k, " pad_value=%d", in->pad_value);
        break;
    case TSR_OP_GEMM:
        k = snprintf(t, sizeof t,
                     "gemm reset=%u uop=%u:%u iter=%u,%u dst=%u,%u src=%u,%u wgt=%u,%u",
                     in->reset, in->uop_bgn, in->uop_end, in->iter_out, in->iter_in,
                     in->dst_factor_out, in->dst_factor_in, in->src_factor_out, in->src_factor_in,
                     in->wgt_factor_out, in->wgt_factor_in);
        if (k > 0 && in->depthwise && (size_t)k < sizeof t)
            k += snprintf(t + k, sizeof t - (size_t)k, " depthwise");
        break;
    case TSR_OP_ALU:
        if (!tsr_alu_name(in->alu_opcode))
            return tsr_err(TSR_EINVAL, "disasm: alu has invalid ALU op %u", in->alu_opcode);
        k = snprintf(t, sizeof t,
                     "alu %s reset=%u uop=%u:%u iter=%u,%u dst=%u,%u src=%u,%u use_imm=%u imm=%d",
                     tsr_alu_name(in->alu_opcode), in->reset, in->uop_bgn, in->uop_end,
                     in->iter_out, in->iter_in, in->dst_factor_out, in->dst_factor_in,
                     in->src_factor_out, in->src_factor_in, in->use_imm, (int)in->imm);
        break;
    case TSR_OP_FINISH: k = snprintf(t, sizeof t, "finish"); break;
    default: return tsr_err(TSR_EINVAL, "disasm: invalid opcode %u", in->opcode);
    }
    k = flags_text(in, t, sizeof t, k);
    if (k < 0 || (size_t)k >= sizeof t)
        return tsr_err(TSR_EINVAL, "disasm: instruction text too long");
    if (!buf || (size_t)k >= n)
        return tsr_err(TSR_EBOUNDS, "disasm: text needs %d bytes, buffer holds %zu", k + 1, n);
    memcpy(buf, t, (size_t)k + 1);
    return k;
}

int tsr_disasm_stream(const tsr_config_t *cfg, const uint8_t *bytes, size_t nbytes, void *file)
{
    FILE *f = file;
    size_t count = nbytes / TSR_INSN_BYTES;
    char line[512];
    if (!cfg || !f || (nbytes && !bytes))
        return tsr_err(TSR_EINVAL, "disasm: no config, stream or output given");
    for (size_t i = 0; i < count; i++) {
        tsr_insn_bits_t bits;
        tsr_insn_t in;
        int rc;
        tsr_insn_bits_load(bytes + i * TSR_INSN_BYTES, &bits);
        if ((rc = tsr_insn_decode(cfg, &bits, &in)))
            return tsr_err_prefix(rc, "instruction %zu (byte offset %zu): ", i,
                                  i * TSR_INSN_BYTES);
        if ((rc = tsr_disasm_insn(cfg, &in, line, sizeof line)) < 0)
            return tsr_err_prefix(rc, "instruction %zu: ", i);
        if (fprintf(f, "%s\n", line) < 0)
            return tsr_err(TSR_EIO, "disasm: write error at instruction %zu", i);
    }
    if (nbytes % TSR_INSN_BYTES)
        return tsr_err(TSR_EINVAL, "instruction %zu (byte offset %zu): truncated, %zu of %d bytes",
                       count, count * TSR_INSN_BYTES, nbytes % TSR_INSN_BYTES, TSR_INSN_BYTES);
    return TSR_OK;
}

void tsr_asm_random_fill(uint64_t seed, uint8_t *dst, size_t n)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i += 8) {
        const uint64_t z = tsr_splitmix64(&s);
        for (size_t j = 0; j < 8 && i + j < n; j++)
            dst[i + j] = (uint8_t)(z >> (8 * j));
    }
}
