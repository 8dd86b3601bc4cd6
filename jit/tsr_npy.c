/*
 * tsr_npy: .npy reader and writer (see tsr_npy.h).
 *
 * The header is a Python dict literal that NumPy reads with
 * ast.literal_eval. Rather than accept "whatever looks right" we parse the
 * exact subset NumPy (any version) writes, plus the liberties a person
 * editing one by hand might take (key order, whitespace, quotes, trailing
 * comma, Python 2's "5L"), and reject everything else with the offset of
 * the offending byte: a header that almost parses is a corrupt file, and
 * guessing would hand an operator a tensor of the wrong shape.
 *
 * Defences against hostile input, in the order they apply: the header
 * length must fit inside the file (and under 1 MiB) before the header is
 * read; every dimension and the byte count are computed with overflow
 * checks; the byte count must equal what follows the header exactly before
 * anything is allocated. So the largest allocation is the file's own size.
 */
#include "tsr_npy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsr_error.h"
#include "tsr_file.h"

/* A supported header is under 300 bytes; NumPy itself refuses more than
 * 10000 by default. 1 MiB leaves room for odd padding yet bounds what a
 * bogus length field can make us read before the dict is even looked at. */
#define NPY_MAX_HEADER (1u << 20)
/* The writer pads the prefix + header to a multiple of this, as NumPy
 * does, so the data can be memory-mapped with any element alignment. */
#define NPY_ALIGN 64

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Per-dtype facts: NumPy's type code (without byte-order character). */
static const struct {
    const char *name;
    const char *code;
    size_t size;
} dtypes[] = {
    [TSR_DT_INT8] = {"int8", "i1", 1},
    [TSR_DT_UINT8] = {"uint8", "u1", 1},
    [TSR_DT_INT16] = {"int16", "i2", 2},
    [TSR_DT_INT32] = {"int32", "i4", 4},
    [TSR_DT_FLOAT32] = {"float32", "f4", 4},
    [TSR_DT_INT64] = {"int64", "i8", 8},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])
#define DTYPE_LIST "int8, uint8, int16, int32, float32, int64"

/* Everything the prefix and header dict say about the data. */
typedef struct {
    int major;                         /* format version: 1, 2 or 3 (minor is always 0) */
    size_t prefix_len;                 /* magic + version + length field: 10 or 12 bytes */
    size_t hlen;                       /* header dict bytes, from the length field */
    int have_descr, have_fortran, have_shape; /* which keys were seen (duplicates are errors) */
    tsr_dtype_e dtype;                 /* element type from 'descr' */
    int swap;                          /* file byte order differs from the host's */
    int fortran;                       /* 'fortran_order': data is column-major */
    int ndim;                          /* entries in shape */
    int64_t shape[TSR_TENSOR_MAX_DIMS]; /* 'shape' */
    size_t nbytes;                     /* data bytes the shape and dtype require */
} npy_hdr_t;

const char *tsr_dtype_name(tsr_dtype_e dt)
{
    return (unsigned)dt < N_DTYPES ? dtypes[dt].name : "invalid";
}

size_t tsr_dtype_size(tsr_dtype_e dt) { return (unsigned)dt < N_DTYPES ? dtypes[dt].size : 0; }

static int host_little(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Bytes of a shape of esize-byte elements; -1 if a dimension is negative or
 * the total exceeds what both int64_t and size_t can hold. A zero
 * dimension makes the total 0, but the other dimensions must still be sane
 * (NumPy likewise refuses shapes whose nonzero part overflows). */
static int shape_bytes(int ndim, const int64_t *shape, size_t esize, size_t *nbytes)
{
    uint64_t n = 1;
    int empty = 0;
    const uint64_t lim = (uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX
                                                                   : (uint64_t)SIZE_MAX;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return -1;
        if (shape[d] == 0) {
            empty = 1;
            continue;
        }
        if (n > lim / (uint64_t)shape[d])
            return -1;
        n *= (uint64_t)shape[d];
    }
    if (n > lim / esize)
        return -1;
    *nbytes = empty ? 0 : (size_t)(n * esize);
    return 0;
}

/* "(3, 4)", "(5,)", "()": Python's repr of a tuple, which is also what
 * the writer puts in the header. */
static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, ndim == 1 ? ",)" : ")");
}

int64_t tsr_tensor_numel(const tsr_tensor_t *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim && d < TSR_TENSOR_MAX_DIMS; d++)
        n *= t->shape[d];
    return n;
}

int tsr_tensor_alloc(tsr_tensor_t *t, tsr_dtype_e dtype, int ndim, const int64_t *shape)
{
    size_t nbytes;
    char sh[256];
    if (!t)
        return tsr_err(TSR_EINVAL, "tsr_tensor_alloc: no tensor given");
    memset(t, 0, sizeof *t);
    if (!tsr_dtype_size(dtype))
        return tsr_err(TSR_EINVAL, "tsr_tensor_alloc: dtype %d is not one of " DTYPE_LIST,
                       (int)dtype);
    if (ndim < 0 || ndim > TSR_TENSOR_MAX_DIMS || (ndim > 0 && !shape))
        return tsr_err(TSR_EINVAL, "tsr_tensor_alloc: ndim %d out of range [0, %d]%s", ndim,
                       TSR_TENSOR_MAX_DIMS, ndim > 0 && !shape ? " or no shape given" : "");
    if (shape_bytes(ndim, shape, tsr_dtype_size(dtype), &nbytes)) {
        fmt_shape(sh, sizeof sh, ndim, shape);
        return tsr_err(TSR_EINVAL, "tsr_tensor_alloc: shape %s is negative or too large", sh);
    }
    /* At least one byte, so that data != NULL tells a live tensor. */
    void *p = calloc(nbytes ? nbytes : 1, 1);
    if (!p)
        return tsr_err(TSR_ENOMEM, "tsr_tensor_alloc: out of memory for %zu bytes", nbytes);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    t->data = p;
    t->nbytes = nbytes;
    return TSR_OK;
}

void tsr_tensor_free(tsr_tensor_t *t)
{
    if (!t)
        return;
    free(t->data);
    memset(t, 0, sizeof *t);
}

/* ---- prefix: magic, version, header length ---- */

/* p holds the first min(total, 12) bytes of a total-byte file. */
static int parse_prefix(const uint8_t *p, size_t total, const char *name, npy_hdr_t *h)
{
    size_t avail = total < 12 ? total : 12;
    if (total == 0)
        return tsr_err(TSR_EPARSE, "%s: empty file, not a .npy file", name);
    if (memcmp(p, npy_magic, avail < 6 ? avail : 6))
        return tsr_err(TSR_EPARSE, "%s: not a .npy file (bad magic: does not start with \\x93NUMPY)",
                       name);
    if (avail < 8)
        return tsr_err(TSR_EPARSE, "%s: truncated .npy file: %zu bytes end inside the magic/version",
                       name, total);
    h->major = p[6];
    if ((h->major != 1 && h->major != 2 && h->major != 3) || p[7] != 0)
        return tsr_err(TSR_EPARSE,
                       "%s: unsupported .npy format version %d.%d (supported: 1.0, 2.0, 3.0)", name,
                       p[6], p[7]);
    h->prefix_len = h->major == 1 ? 10 : 12;
    if (avail < h->prefix_len)
        return tsr_err(TSR_EPARSE,
                       "%s: truncated .npy file: %zu bytes end inside the header length field",
                       name, total);
    if (h->major == 1)
        h->hlen = (size_t)p[8] | (size_t)p[9] << 8;
    else
        h->hlen = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
    if (h->hlen > total - h->prefix_len)
        return tsr_err(TSR_EPARSE,
                       "%s: truncated .npy file: header length %zu runs past the end of the file "
                       "(only %zu bytes follow the %zu-byte prefix)",
                       name, h->hlen, total - h->prefix_len, h->prefix_len);
    if (h->hlen > NPY_MAX_HEADER)
        return tsr_err(TSR_EPARSE, "%s: header length %zu exceeds the %u-byte limit", name, h->hlen,
                       NPY_MAX_HEADER);
    return TSR_OK;
}

/* ---- header dict ---- */

/* Cursor over the header text; off is the file offset of text[0]. */
typedef struct {
    const char *s;    /* header text (not NUL-terminated) */
    size_t n;         /* its length */
    size_t i;         /* current position */
    size_t off;       /* file offset of s[0], for messages */
    const char *name; /* file name, for messages */
} lex_t;

static int peek(const lex_t *l) { return l->i < l->n ? (unsigned char)l->s[l->i] : -1; }

static void skip_ws(lex_t *l)
{
    /* Python's whitespace between tokens. */
    while (l->i < l->n && (l->s[l->i] == ' ' || l->s[l->i] == '\t' || l->s[l->i] == '\n' ||
                           l->s[l->i] == '\r' || l->s[l->i] == '\f' || l->s[l->i] == '\v'))
        l->i++;
}

/* What is at the cursor, printable whatever the byte is. */
static const char *what_here(const lex_t *l, char buf[32])
{
    int c = peek(l);
    if (c < 0)
        snprintf(buf, 32, "the end of the header");
    else if (c >= 0x20 && c < 0x7f)
        snprintf(buf, 32, "'%c'", c);
    else
        snprintf(buf, 32, "byte 0x%02x", c);
    return buf;
}

static int syntax(const lex_t *l, const char *expected)
{
    char buf[32];
    return tsr_err(TSR_EPARSE, "%s: malformed .npy header at file offset %zu: expected %s, got %s",
                   l->name, l->off + l->i, expected, what_here(l, buf));
}

/* A quoted Python string without escapes (NumPy never writes any). The
 * value is copied into dst (truncated to cap - 1, non-printable bytes
 * shown as '?', so messages stay readable); *full_len is its real length. */
static int lex_string(lex_t *l, const char *expected, char *dst, size_t cap, size_t *full_len)
{
    int q = peek(l);
    if (q != '\'' && q != '"')
        return syntax(l, expected);
    size_t start = ++l->i, k = 0;
    for (;;) {
        int c = peek(l);
        if (c < 0)
            return tsr_err(TSR_EPARSE,
                           "%s: malformed .npy header: string starting at file offset %zu is "
                           "not terminated",
                           l->name, l->off + start - 1);
        if (c == '\\')
            return tsr_err(TSR_EPARSE,
                           "%s: malformed .npy header at file offset %zu: escape sequences are "
                           "not supported in strings",
                           l->name, l->off + l->i);
        if (c == '\n')
            return syntax(l, "a closing quote before the end of the line");
        l->i++;
        if (c == q)
            break;
        if (k + 1 < cap)
            dst[k++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    dst[k] = '\0';
    *full_len = l->i - start - 1;
    return TSR_OK;
}

static int parse_descr(lex_t *l, npy_hdr_t *h)
{
    char s[64];
    size_t len;
    int rc;
    if (peek(l) == '[')
        return tsr_err(TSR_EINVAL,
                       "%s: dtype is a structured (record) type, not supported (" DTYPE_LIST ")",
                       l->name);
    if ((rc = lex_string(l, "a quoted dtype string for 'descr'", s, sizeof s, &len)))
        return rc;
    const char *t = s;
    char order = '=';
    if (*t == '<' || *t == '>' || *t == '=' || *t == '|')
        order = *t++;
    for (size_t k = 0; k < N_DTYPES; k++)
        if (len < sizeof s && !strcmp(t, dtypes[k].code)) {
            int file_little = order == '<' ? 1 : order == '>' ? 0 : host_little();
            h->dtype = (tsr_dtype_e)k;
            h->swap = dtypes[k].size > 1 && file_little != host_little();
            return TSR_OK;
        }
    return tsr_err(TSR_EINVAL, "%s: dtype '%s%s' not supported (" DTYPE_LIST ")", l->name, s,
                   len < sizeof s ? "" : "...");
}

static int parse_fortran(lex_t *l, npy_hdr_t *h)
{
    size_t start = l->i;
    while (l->i < l->n && ((l->s[l->i] >= 'a' && l->s[l->i] <= 'z') ||
                           (l->s[l->i] >= 'A' && l->s[l->i] <= 'Z') ||
                           (l->s[l->i] >= '0' && l->s[l->i] <= '9') || l->s[l->i] == '_'))
        l->i++;
    size_t len = l->i - start;
    if (len == 4 && !memcmp(l->s + start, "True", 4))
        h->fortran = 1;
    else if (len == 5 && !memcmp(l->s + start, "False", 5))
        h->fortran = 0;
    else {
        l->i = start;
        return syntax(l, "True or False for 'fortran_order'");
    }
    return TSR_OK;
}

/* One dimension: digits with an optional Python 2 'L' suffix. */
static int parse_dim(lex_t *l, int64_t *v)
{
    size_t start = l->i;
    int neg = peek(l) == '-';
    if (neg)
        l->i++;
    if (peek(l) < '0' || peek(l) > '9') {
        l->i = start;
        return syntax(l, "a dimension (non-negative integer) in 'shape'");
    }
    uint64_t x = 0;
    int big = 0;
    while (peek(l) >= '0' && peek(l) <= '9') {
        unsigned d = (unsigned)(peek(l) - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10)
            big = 1;
        else
            x = x * 10 + d;
        l->i++;
    }
    if (peek(l) == 'L' || peek(l) == 'l')
        l->i++;
    int len = (int)(l->i - start);
    if (neg)
        return tsr_err(TSR_EPARSE, "%s: negative dimension %.*s in 'shape'", l->name,
                       len > 40 ? 40 : len, l->s + start);
    if (big)
        return tsr_err(TSR_EPARSE, "%s: dimension %.*s%s in 'shape' overflows int64", l->name,
                       len > 40 ? 40 : len, l->s + start, len > 40 ? "..." : "");
    *v = (int64_t)x;
    return TSR_OK;
}

/* A tuple of dimensions: "()", "(5,)", "(2, 3)", "(2, 3,)". "(5)" is not a
 * tuple in Python (NumPy rejects it too). */
static int parse_shape(lex_t *l, npy_hdr_t *h)
{
    int rc;
    if (peek(l) != '(')
        return syntax(l, "a tuple '(...)' for 'shape'");
    size_t open = l->i++;
    h->ndim = 0;
    skip_ws(l);
    if (peek(l) == ')') {
        l->i++;
        return TSR_OK;
    }
    for (;;) {
        int64_t v = 0;
        if ((rc = parse_dim(l, &v)))
            return rc;
        if (h->ndim == TSR_TENSOR_MAX_DIMS)
            return tsr_err(TSR_EINVAL, "%s: 'shape' has more than %d dimensions (not supported)",
                           l->name, TSR_TENSOR_MAX_DIMS);
        h->shape[h->ndim++] = v;
        skip_ws(l);
        if (peek(l) == ')') {
            if (h->ndim == 1)
                return tsr_err(TSR_EPARSE,
                               "%s: malformed .npy header at file offset %zu: 'shape' %.*s is "
                               "not a tuple (a 1-tuple needs a trailing comma: (n,))",
                               l->name, l->off + open, (int)(l->i + 1 - open), l->s + open);
            l->i++;
            return TSR_OK;
        }
        if (peek(l) != ',')
            return syntax(l, "',' or ')' in 'shape'");
        l->i++;
        skip_ws(l);
        if (peek(l) == ')') {
            l->i++;
            return TSR_OK;
        }
    }
}

static int parse_dict(const char *text, size_t n, size_t off, const char *name, npy_hdr_t *h)
{
    lex_t l = {text, n, 0, off, name};
    int rc;
    skip_ws(&l);
    if (peek(&l) != '{')
        return syntax(&l, "'{' starting the header dict");
    l.i++;
    for (;;) {
        char key[32];
        size_t klen, kpos;
        rc = TSR_OK;
        skip_ws(&l);
        if (peek(&l) == '}') {
            l.i++;
            break;
        }
        kpos = l.i;
        if ((rc = lex_string(&l, "a quoted key or '}'", key, sizeof key, &klen)))
            return rc;
        skip_ws(&l);
        if (peek(&l) != ':')
            return syntax(&l, "':' after a key");
        l.i++;
        skip_ws(&l);
        int *seen = NULL;
        if (klen < sizeof key && !strcmp(key, "descr")) {
            seen = &h->have_descr;
            if (!*seen)
                rc = parse_descr(&l, h);
        } else if (klen < sizeof key && !strcmp(key, "fortran_order")) {
            seen = &h->have_fortran;
            if (!*seen)
                rc = parse_fortran(&l, h);
        } else if (klen < sizeof key && !strcmp(key, "shape")) {
            seen = &h->have_shape;
            if (!*seen)
                rc = parse_shape(&l, h);
        } else {
            return tsr_err(TSR_EPARSE,
                           "%s: malformed .npy header at file offset %zu: unexpected key '%s%s' "
                           "(a .npy header has exactly 'descr', 'fortran_order', 'shape')",
                           name, off + kpos, key, klen < sizeof key ? "" : "...");
        }
        if (*seen)
            return tsr_err(TSR_EPARSE,
                           "%s: malformed .npy header at file offset %zu: duplicate key '%s'",
                           name, off + kpos, key);
        if (rc)
            return rc;
        *seen = 1;
        skip_ws(&l);
        if (peek(&l) == ',') {
            l.i++;
            continue;
        }
        if (peek(&l) == '}') {
            l.i++;
            break;
        }
        return syntax(&l, "',' or '}' after a value");
    }
    skip_ws(&l);
    if (l.i != l.n)
        return syntax(&l, "only whitespace after the header dict");
    if (!h->have_descr || !h->have_fortran || !h->have_shape)
        return tsr_err(TSR_EPARSE, "%s: malformed .npy header: key '%s' is missing", name,
                       !h->have_descr ? "descr" : !h->have_fortran ? "fortran_order" : "shape");
    if (shape_bytes(h->ndim, h->shape, dtypes[h->dtype].size, &h->nbytes)) {
        char sh[256];
        fmt_shape(sh, sizeof sh, h->ndim, h->shape);
        return tsr_err(TSR_EPARSE, "%s: 'shape' %s of %s overflows (more than 2^63 bytes)", name,
                       sh, dtypes[h->dtype].name);
    }
    return TSR_OK;
}

/* The data must be exactly what the shape needs: short is truncation,
 * long means the header and the data disagree, and either way the shape
 * cannot be trusted. */
static int check_data(const npy_hdr_t *h, size_t avail, const char *name)
{
    if (avail == h->nbytes)
        return TSR_OK;
    char sh[256];
    fmt_shape(sh, sizeof sh, h->ndim, h->shape);
    if (avail < h->nbytes)
        return tsr_err(TSR_EPARSE,
                       "%s: truncated .npy data: shape %s of %s needs %zu bytes, only %zu follow "
                       "the header",
                       name, sh, dtypes[h->dtype].name, h->nbytes, avail);
    return tsr_err(TSR_EPARSE,
                   "%s: %zu unexpected bytes after the data: shape %s of %s needs %zu bytes, %zu "
                   "follow the header",
                   name, avail - h->nbytes, sh, dtypes[h->dtype].name, h->nbytes, avail);
}

/* ---- data conversion ---- */

/* Copy one element, reversing its bytes if swap; dst may equal src. */
static void copy_elem(uint8_t *dst, const uint8_t *src, size_t es, int swap)
{
    uint8_t tmp[8];
    memcpy(tmp, src, es);
    for (size_t b = 0; b < es; b++)
        dst[b] = swap ? tmp[es - 1 - b] : tmp[b];
}

static int needs_convert(const npy_hdr_t *h) { return h->swap || (h->fortran && h->ndim > 1); }

/* File layout -> native row-major. dst may equal src unless the data is
 * Fortran order (then every element moves). */
static void convert(const npy_hdr_t *h, const uint8_t *src, uint8_t *dst)
{
    size_t es = dtypes[h->dtype].size, n = h->nbytes / es;
    if (!(h->fortran && h->ndim > 1)) {
        if (!h->swap) {
            if (dst != src)
                memcpy(dst, src, h->nbytes);
            return;
        }
        for (size_t i = 0; i < n; i++)
            copy_elem(dst + i * es, src + i * es, es, 1);
        return;
    }
    /* Walk dst in C order (last index fastest) while tracking the
     * column-major offset of the same index tuple in src. */
    size_t fstride[TSR_TENSOR_MAX_DIMS], idx[TSR_TENSOR_MAX_DIMS] = {0}, off = 0, s = 1;
    for (int d = 0; d < h->ndim; d++) {
        fstride[d] = s;
        s *= (size_t)h->shape[d];
    }
    for (size_t i = 0; i < n; i++) {
        copy_elem(dst + i * es, src + off * es, es, h->swap);
        for (int d = h->ndim - 1; d >= 0; d--) {
            off += fstride[d];
            if (++idx[d] < (size_t)h->shape[d])
                break;
            off -= fstride[d] * (size_t)h->shape[d];
            idx[d] = 0;
        }
    }
}

static void fill_tensor(const npy_hdr_t *h, void *data, tsr_tensor_t *out)
{
    memset(out, 0, sizeof *out);
    out->dtype = h->dtype;
    out->ndim = h->ndim;
    for (int d = 0; d < h->ndim; d++)
        out->shape[d] = h->shape[d];
    out->data = data;
    out->nbytes = h->nbytes;
}

/* ---- reading ---- */

int tsr_npy_parse_named(const void *buf, size_t n, const char *name, tsr_tensor_t *out)
{
    npy_hdr_t h;
    int rc;
    if (out)
        memset(out, 0, sizeof *out);
    if (!name)
        name = "<npy buffer>";
    if (!out || (!buf && n))
        return tsr_err(TSR_EINVAL, "%s: no buffer or tensor given", name);
    const uint8_t *p = buf;
    memset(&h, 0, sizeof h);
    if ((rc = parse_prefix(p, n, name, &h)) ||
        (rc = parse_dict((const char *)p + h.prefix_len, h.hlen, h.prefix_len, name, &h)) ||
        (rc = check_data(&h, n - h.prefix_len - h.hlen, name)))
        return rc;
    uint8_t *dst = malloc(h.nbytes ? h.nbytes : 1);
    if (!dst)
        return tsr_err(TSR_ENOMEM, "%s: out of memory for %zu bytes of data", name, h.nbytes);
    convert(&h, p + h.prefix_len + h.hlen, dst);
    fill_tensor(&h, dst, out);
    return TSR_OK;
}

int tsr_npy_parse(const void *buf, size_t n, tsr_tensor_t *out)
{
    return tsr_npy_parse_named(buf, n, NULL, out);
}

int tsr_npy_read(const char *path, tsr_tensor_t *out)
{
    npy_hdr_t h;
    uint8_t pre[12];
    char *text = NULL;
    uint8_t *raw = NULL;
    tsr_file_t f;
    int rc;

    if (out)
        memset(out, 0, sizeof *out);
    if (!path || !out)
        return tsr_err(TSR_EINVAL, "tsr_npy_read: no path or tensor given");
    /* The size decides how much may be allocated, so it must be known up
     * front: tsr_file_open refuses pipes, devices and directories. The
     * header is read and checked before the data is allocated. */
    if ((rc = tsr_file_open(&f, path, UINT64_MAX, ".npy file")))
        return rc;
    if (f.size > SIZE_MAX) {
        rc = tsr_err(TSR_EBOUNDS, "%s: file too large for this host", path);
        goto out;
    }
    size_t total = (size_t)f.size;
    memset(&h, 0, sizeof h);
    if ((rc = tsr_file_read_at(&f, 0, pre, total < 12 ? total : 12, "prefix")) ||
        (rc = parse_prefix(pre, total, path, &h)))
        goto out;
    if (!(text = malloc(h.hlen ? h.hlen : 1))) {
        rc = tsr_err(TSR_ENOMEM, "%s: out of memory for the header", path);
        goto out;
    }
    if ((rc = tsr_file_read_at(&f, h.prefix_len, text, h.hlen, "header")) ||
        (rc = parse_dict(text, h.hlen, h.prefix_len, path, &h)) ||
        (rc = check_data(&h, total - h.prefix_len - h.hlen, path)))
        goto out;
    if (!(raw = malloc(h.nbytes ? h.nbytes : 1))) {
        rc = tsr_err(TSR_ENOMEM, "%s: out of memory for %zu bytes of data", path, h.nbytes);
        goto out;
    }
    if ((rc = tsr_file_read_at(&f, h.prefix_len + h.hlen, raw, h.nbytes, "data")) ||
        (rc = tsr_file_check_end(&f)))
        goto out;
    if (needs_convert(&h)) {
        /* Byte swapping alone works in place; a transpose needs a copy. */
        uint8_t *dst = h.fortran && h.ndim > 1 ? malloc(h.nbytes ? h.nbytes : 1) : raw;
        if (!dst) {
            rc = tsr_err(TSR_ENOMEM, "%s: out of memory converting %zu bytes from Fortran order",
                         path, h.nbytes);
            goto out;
        }
        convert(&h, raw, dst);
        if (dst != raw) {
            free(raw);
            raw = dst;
        }
    }
    fill_tensor(&h, raw, out);
    raw = NULL;
    rc = TSR_OK;
out:
    free(text);
    free(raw);
    tsr_file_close(&f);
    return rc;
}

/* ---- writing ---- */

static int write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int tsr_npy_write(const char *path, const tsr_tensor_t *t)
{
    static atomic_uint tmp_counter;
    char sh[256], dict[512];
    uint8_t head[10 + sizeof dict + NPY_ALIGN + 1];
    size_t nbytes;

    if (!path || !t)
        return tsr_err(TSR_EINVAL, "tsr_npy_write: no path or tensor given");
    if (!tsr_dtype_size(t->dtype))
        return tsr_err(TSR_EINVAL, "%s: cannot write tensor: dtype %d is not one of " DTYPE_LIST,
                       path, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > TSR_TENSOR_MAX_DIMS)
        return tsr_err(TSR_EINVAL, "%s: cannot write tensor: ndim %d out of range [0, %d]", path,
                       t->ndim, TSR_TENSOR_MAX_DIMS);
    fmt_shape(sh, sizeof sh, t->ndim, t->shape);
    if (shape_bytes(t->ndim, t->shape, dtypes[t->dtype].size, &nbytes))
        return tsr_err(TSR_EINVAL, "%s: cannot write tensor: shape %s is negative or too large",
                       path, sh);
    if (nbytes != t->nbytes)
        return tsr_err(TSR_EINVAL,
                       "%s: cannot write tensor: nbytes is %zu but shape %s of %s needs %zu", path,
                       t->nbytes, sh, dtypes[t->dtype].name, nbytes);
    if (nbytes && !t->data)
        return tsr_err(TSR_EINVAL, "%s: cannot write tensor: no data", path);

    /* Native byte order: the reader swaps if needed, as NumPy's does. */
    char order = dtypes[t->dtype].size == 1 ? '|' : host_little() ? '<' : '>';
    int dlen = snprintf(dict, sizeof dict, "{'descr': '%c%s', 'fortran_order': False, 'shape': %s, }",
                        order, dtypes[t->dtype].code, sh);
    size_t pad = (NPY_ALIGN - (10 + (size_t)dlen + 1) % NPY_ALIGN) % NPY_ALIGN;
    size_t hlen = (size_t)dlen + pad + 1;
    memcpy(head, npy_magic, 6);
    head[6] = 1;
    head[7] = 0;
    head[8] = (uint8_t)(hlen & 0xff);
    head[9] = (uint8_t)(hlen >> 8);
    memcpy(head + 10, dict, (size_t)dlen);
    memset(head + 10 + dlen, ' ', pad);
    head[10 + hlen - 1] = '\n';

    /* A device or FIFO (-o /dev/null) is written in place: a rename would
     * replace it with a regular file (tsr_file_is_special). */
    if (tsr_file_is_special(path))
        return tsr_file_write_special(path, head, 10 + hlen, t->data, nbytes);

    /* A new file next to the destination (same filesystem, so rename is
     * atomic); O_EXCL with a per-process counter keeps concurrent writers
     * apart, and 0666 lets the umask decide permissions as for fopen. */
    size_t tlen = strlen(path) + 64;
    char *tmp = malloc(tlen);
    if (!tmp)
        return tsr_err(TSR_ENOMEM, "%s: out of memory", path);
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, tlen, "%s.tmp.%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1u));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return tsr_err(TSR_EIO, "%s: cannot create a temporary file next to it: %s", path,
                       strerror(e));
    }
    const char *step = "write";
    int ok = !write_all(fd, head, 10 + hlen) && !write_all(fd, t->data, nbytes);
    /* fsync before rename: otherwise a crash can leave the new name
     * pointing at an empty file, which is worse than the old contents. */
    if (ok && fsync(fd)) {
        ok = 0;
        step = "sync";
    }
    int e = errno;
    if (close(fd) && ok) {
        ok = 0;
        e = errno;
        step = "close";
    }
    if (ok && rename(tmp, path)) {
        ok = 0;
        e = errno;
        step = "rename into place";
    }
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return tsr_err(TSR_EIO, "%s: %s failed: %s (any previous file is unchanged)", path, step,
                       strerror(e));
    }
    free(tmp);
    return TSR_OK;
}
