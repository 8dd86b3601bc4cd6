/*
 * test_npy: the .npy reader and writer (jit/tsr_npy.c).
 *
 * Expected values never come from the code under test: hand-built byte
 * images (big-endian and Fortran layouts computed here by plain loops),
 * files NumPy itself writes together with their values as text, and files
 * we write checked by NumPy against a formula it evaluates on its own.
 * NumPy (/usr/bin/python3 with python3-numpy, installed by
 * scripts/setup.sh) is a declared dependency: without it the interop tests
 * fail rather than skip, so a missing package cannot pass CI silently.
 *
 * Bad inputs check the error code, that the message starts with the file
 * name and that it names the problem, since that message is all a user of
 * `tessera op` sees. The fuzz tests (truncations, header corruptions,
 * random header token soup) only demand "an error or a consistent tensor";
 * their real checker is the ASan/UBSan build.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsr_error.h"
#include "tsr_npy.h"

#define PYTHON "/usr/bin/python3"

static const tsr_dtype_e all_dtypes[] = {TSR_DT_INT8, TSR_DT_UINT8, TSR_DT_INT16, TSR_DT_INT32,
                                         TSR_DT_FLOAT32};
#define N_ALL_DTYPES 5

/* ---- scratch directory and small file helpers ---- */

static char g_dir[512]; /* mkdtemp'd per run, removed by the group teardown */

static int make_dir(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tsr_npy_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp %s: %s\n", g_dir, strerror(errno));
        return -1;
    }
    return 0;
}

static int remove_dir(void **state)
{
    (void)state;
    /* readdir may skip entries when the directory changes under it, so
     * scan again until the directory is empty. */
    for (int pass = 0; pass < 10 && rmdir(g_dir) && errno == ENOTEMPTY; pass++) {
        DIR *d = opendir(g_dir);
        if (!d)
            break;
        struct dirent *e;
        char p[1024];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    return 0;
}

/* g_dir/name; eight rotating buffers so a few can be live at once. */
static const char *tpath(const char *fmt, ...)
{
    static char bufs[8][1024];
    static int k;
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    char *b = bufs[k++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", g_dir, name);
    return b;
}

static void put_file(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f))
        fail_msg("cannot write %s", path);
}

static uint8_t *get_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    size_t cap = 1 << 16, len = 0;
    uint8_t *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap)
            b = realloc(b, cap *= 2);
    }
    fclose(f);
    if (!b)
        fail_msg("out of memory reading %s", path);
    *n = len;
    return b;
}

/* ---- expectations ---- */

static void expect_ok(const char *what, int rc)
{
    if (rc != TSR_OK)
        fail_msg("%s: got %s, want OK (message: %s)", what, tsr_errname(rc), tsr_errmsg());
}

static void expect_code(const char *what, int rc, int want)
{
    if (rc != want)
        fail_msg("%s: got %s, want %s (message: %s)", what, tsr_errname(rc), tsr_errname(want),
                 tsr_errmsg());
}

static void expect_has(const char *what, const char *needle)
{
    if (!strstr(tsr_errmsg(), needle))
        fail_msg("%s: message \"%s\" does not contain \"%s\"", what, tsr_errmsg(), needle);
}

/* Message starts with "name: ". */
static void expect_named(const char *what, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(tsr_errmsg(), name, n) || strncmp(tsr_errmsg() + n, ": ", 2))
        fail_msg("%s: message \"%s\" does not start with \"%s: \"", what, tsr_errmsg(), name);
}

static void expect_zeroed(const char *what, const tsr_tensor_t *t)
{
    tsr_tensor_t z;
    memset(&z, 0, sizeof z);
    if (memcmp(t, &z, sizeof z))
        fail_msg("%s: tensor not left zeroed after an error", what);
}

/* ---- value formula shared with the NumPy checker (check_ours.py says it
 * again in Python, with Python's unbounded integers) ---- */

static void formula(tsr_dtype_e dt, uint64_t i, void *dst)
{
    switch (dt) {
    case TSR_DT_INT8: {
        int8_t v = (int8_t)((int)((i * 37 + 11) % 256) - 128);
        memcpy(dst, &v, 1);
        break;
    }
    case TSR_DT_UINT8: {
        uint8_t v = (uint8_t)((i * 73 + 5) % 256);
        memcpy(dst, &v, 1);
        break;
    }
    case TSR_DT_INT16: {
        int16_t v = (int16_t)((int)((i * 2971 + 13) % 65536) - 32768);
        memcpy(dst, &v, 2);
        break;
    }
    case TSR_DT_INT32: {
        int32_t v = (int32_t)((int64_t)((i * 2654435761ull + 7) % 4294967296ull) - 2147483648ll);
        memcpy(dst, &v, 4);
        break;
    }
    case TSR_DT_FLOAT32: {
        float v = (float)((double)((int64_t)((i * 7) % 1001) - 500) / 16.0);
        memcpy(dst, &v, 4);
        break;
    }
    case TSR_DT_INT64: { /* (not in the NumPy cross-check lists: ONNX token ids only) */
        int64_t v = (int64_t)(i * 2654435761ull) - 4000000000ll;
        memcpy(dst, &v, 8);
        break;
    }
    }
}

static size_t dt_size(tsr_dtype_e dt) { return dt == TSR_DT_INT64 ? 8 : dt == TSR_DT_INT16 ? 2 : dt >= TSR_DT_INT32 ? 4 : 1; }

/* A tensor built without tsr_tensor_alloc, filled by the formula. */
static void make_tensor(tsr_tensor_t *t, tsr_dtype_e dt, int ndim, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->ndim = ndim;
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        n *= (uint64_t)shape[d];
    }
    t->nbytes = (size_t)n * dt_size(dt);
    t->data = malloc(t->nbytes ? t->nbytes : 1);
    assert_non_null(t->data);
    for (uint64_t i = 0; i < n; i++)
        formula(dt, i, (uint8_t *)t->data + i * dt_size(dt));
}

static void expect_same(const char *what, const tsr_tensor_t *got, const tsr_tensor_t *want)
{
    if (got->dtype != want->dtype)
        fail_msg("%s: dtype %d, want %d", what, got->dtype, want->dtype);
    if (got->ndim != want->ndim)
        fail_msg("%s: ndim %d, want %d", what, got->ndim, want->ndim);
    for (int d = 0; d < TSR_TENSOR_MAX_DIMS; d++)
        if (got->shape[d] != (d < want->ndim ? want->shape[d] : 0))
            fail_msg("%s: shape[%d] = %lld, want %lld", what, d, (long long)got->shape[d],
                     (long long)(d < want->ndim ? want->shape[d] : 0));
    if (got->nbytes != want->nbytes)
        fail_msg("%s: nbytes %zu, want %zu", what, got->nbytes, want->nbytes);
    if (!got->data)
        fail_msg("%s: data is NULL", what);
    if (memcmp(got->data, want->data, want->nbytes))
        fail_msg("%s: data differs", what);
}

/* Python's repr of a shape tuple, written independently of the library. */
static void py_tuple(char *b, size_t cap, int ndim, const int64_t *shape)
{
    size_t n = (size_t)snprintf(b, cap, "(");
    for (int d = 0; d < ndim; d++)
        n += (size_t)snprintf(b + n, cap - n, d ? ", %lld" : "%lld", (long long)shape[d]);
    snprintf(b + n, cap - n, ndim == 1 ? ",)" : ")");
}

static int host_is_little(void)
{
    uint32_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b;
}

/* ---- dtype helpers and tensor allocation ---- */

static void test_dtype_helpers(void **state)
{
    (void)state;
    static const char *names[] = {"int8", "uint8", "int16", "int32", "float32"};
    static const size_t sizes[] = {1, 1, 2, 4, 4};
    for (int k = 0; k < N_ALL_DTYPES; k++) {
        assert_string_equal(tsr_dtype_name(all_dtypes[k]), names[k]);
        assert_int_equal(tsr_dtype_size(all_dtypes[k]), sizes[k]);
    }
    assert_string_equal(tsr_dtype_name(TSR_DT_INT64), "int64");
    assert_int_equal(tsr_dtype_size(TSR_DT_INT64), 8);
    assert_string_equal(tsr_dtype_name((tsr_dtype_e)6), "invalid");
    assert_string_equal(tsr_dtype_name((tsr_dtype_e)-1), "invalid");
    assert_int_equal(tsr_dtype_size((tsr_dtype_e)6), 0);
    assert_int_equal(tsr_dtype_size((tsr_dtype_e)-1), 0);
}

static void test_tensor_alloc_free(void **state)
{
    (void)state;
    tsr_tensor_t t;
    int64_t sh[3] = {2, 3, 4};
    expect_ok("alloc", tsr_tensor_alloc(&t, TSR_DT_INT32, 3, sh));
    assert_int_equal(t.nbytes, 2 * 3 * 4 * 4);
    assert_int_equal(t.ndim, 3);
    assert_int_equal(t.shape[2], 4);
    assert_int_equal(t.shape[3], 0);
    assert_int_equal(tsr_tensor_numel(&t), 24);
    for (size_t i = 0; i < t.nbytes; i++)
        assert_int_equal(((uint8_t *)t.data)[i], 0);
    tsr_tensor_free(&t);
    expect_zeroed("free", &t);
    tsr_tensor_free(&t); /* twice is fine */
    tsr_tensor_free(NULL);

    expect_ok("scalar", tsr_tensor_alloc(&t, TSR_DT_FLOAT32, 0, NULL));
    assert_int_equal(t.nbytes, 4);
    assert_int_equal(tsr_tensor_numel(&t), 1);
    tsr_tensor_free(&t);
    int64_t empty[2] = {0, 7};
    expect_ok("empty", tsr_tensor_alloc(&t, TSR_DT_INT8, 2, empty));
    assert_int_equal(t.nbytes, 0);
    assert_non_null(t.data);
    assert_int_equal(tsr_tensor_numel(&t), 0);
    tsr_tensor_free(&t);

    int64_t neg[2] = {3, -1}, huge[2] = {INT64_MAX / 2, 3};
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    expect_code("negative", tsr_tensor_alloc(&t, TSR_DT_INT8, 2, neg), TSR_EINVAL);
    expect_has("negative", "(3, -1)");
    expect_zeroed("negative", &t);
    expect_code("overflow", tsr_tensor_alloc(&t, TSR_DT_INT8, 2, huge), TSR_EINVAL);
    expect_code("ndim 9", tsr_tensor_alloc(&t, TSR_DT_INT8, 9, nine), TSR_EINVAL);
    expect_has("ndim 9", "ndim 9");
    expect_code("dtype", tsr_tensor_alloc(&t, (tsr_dtype_e)7, 1, sh), TSR_EINVAL);
    expect_has("dtype", "dtype 7");
    expect_code("no shape", tsr_tensor_alloc(&t, TSR_DT_INT8, 2, NULL), TSR_EINVAL);
    expect_code("no tensor", tsr_tensor_alloc(NULL, TSR_DT_INT8, 0, NULL), TSR_EINVAL);
}

/* ---- round trips through our own writer and reader ---- */

static const int64_t rt_shapes[][4] = {{0}, {5}, {3, 4}, {2, 3, 4}, {2, 1, 3, 2}};

/* Writer output: version 1.0, 64-byte aligned header ending in '\n', the
 * dict exactly as NumPy writes it, spaces as padding, then the data. */
static void expect_layout(const char *what, const uint8_t *b, size_t n, const tsr_tensor_t *t)
{
    static const char *codes[] = {"|i1", "|u1", "?i2", "?i4", "?f4"};
    char dict[512], descr[4], tup[256];
    snprintf(descr, sizeof descr, "%s", codes[t->dtype]);
    if (descr[0] == '?')
        descr[0] = host_is_little() ? '<' : '>';
    py_tuple(tup, sizeof tup, t->ndim, t->shape);
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
             tup);
    if (n < 10 || memcmp(b, "\x93NUMPY\x01\x00", 8))
        fail_msg("%s: no version 1.0 magic", what);
    size_t hlen = (size_t)b[8] | (size_t)b[9] << 8;
    if ((10 + hlen) % 64)
        fail_msg("%s: data offset %zu is not a multiple of 64", what, 10 + hlen);
    if (n != 10 + hlen + t->nbytes)
        fail_msg("%s: file is %zu bytes, want %zu", what, n, 10 + hlen + t->nbytes);
    if (b[10 + hlen - 1] != '\n')
        fail_msg("%s: header does not end with a newline", what);
    size_t dl = strlen(dict);
    if (hlen < dl + 1 || memcmp(b + 10, dict, dl))
        fail_msg("%s: header is \"%.*s\", want it to start with \"%s\"", what, (int)hlen - 1,
                 (const char *)b + 10, dict);
    for (size_t i = 10 + dl; i < 10 + hlen - 1; i++)
        if (b[i] != ' ')
            fail_msg("%s: padding byte at %zu is 0x%02x, not a space", what, i, b[i]);
    if (t->nbytes && memcmp(b + 10 + hlen, t->data, t->nbytes))
        fail_msg("%s: data bytes differ", what);
}

static void roundtrip_one(tsr_dtype_e dt, int ndim, const int64_t *shape)
{
    char what[320], tup[256];
    tsr_tensor_t t, r;
    py_tuple(tup, sizeof tup, ndim, shape);
    snprintf(what, sizeof what, "%s %s", tsr_dtype_name(dt), tup);
    make_tensor(&t, dt, ndim, shape);
    const char *p = tpath("rt_%s_%d.npy", tsr_dtype_name(dt), ndim);
    expect_ok(what, tsr_npy_write(p, &t));
    expect_ok(what, tsr_npy_read(p, &r));
    expect_same(what, &r, &t);
    tsr_tensor_free(&r);
    size_t n;
    uint8_t *b = get_file(p, &n);
    expect_layout(what, b, n, &t);
    expect_ok(what, tsr_npy_parse(b, n, &r));
    expect_same(what, &r, &t);
    tsr_tensor_free(&r);
    free(b);
    free(t.data);
}

static void test_roundtrip(void **state)
{
    (void)state;
    for (int k = 0; k < N_ALL_DTYPES; k++)
        for (int nd = 0; nd <= 4; nd++)
            roundtrip_one(all_dtypes[k], nd, rt_shapes[nd]);
    /* Empty tensors, a long axis, all eight dimensions. */
    static const int64_t e1[] = {0}, e3[] = {2, 0, 3}, big[] = {1000, 17},
                         d8[] = {2, 1, 2, 3, 1, 2, 1, 2};
    for (int k = 0; k < N_ALL_DTYPES; k++) {
        roundtrip_one(all_dtypes[k], 1, e1);
        roundtrip_one(all_dtypes[k], 3, e3);
        roundtrip_one(all_dtypes[k], 2, big);
        roundtrip_one(all_dtypes[k], 8, d8);
    }
}

/* Overwriting an existing file replaces it and leaves no temporary. */
static void test_overwrite(void **state)
{
    (void)state;
    tsr_tensor_t a, b, r;
    static const int64_t sa[] = {100}, sb[] = {3, 3};
    make_tensor(&a, TSR_DT_INT32, 1, sa);
    make_tensor(&b, TSR_DT_INT8, 2, sb);
    const char *p = tpath("overwrite.npy");
    expect_ok("first", tsr_npy_write(p, &a));
    expect_ok("second", tsr_npy_write(p, &b));
    expect_ok("read", tsr_npy_read(p, &r));
    expect_same("overwritten", &r, &b);
    tsr_tensor_free(&r);
    DIR *d = opendir(g_dir);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, "overwrite.npy.tmp"))
            fail_msg("temporary file %s left behind", e->d_name);
    closedir(d);
    free(a.data);
    free(b.data);
}

/* ---- header variants, byte order, Fortran order (hand-built images) ---- */

typedef struct {
    uint8_t b[4096]; /* file image */
    size_t n;        /* its length */
} img_t;

/* Prefix of the given version + dict text (no padding) + data. */
static void mk_img(img_t *im, int major, const char *dict, const void *data, size_t nd)
{
    size_t dl = strlen(dict), pl = major == 1 ? 10 : 12;
    assert_true(pl + dl + nd <= sizeof im->b);
    memcpy(im->b, "\x93NUMPY", 6);
    im->b[6] = (uint8_t)major;
    im->b[7] = 0;
    for (size_t k = 0; k < pl - 8; k++)
        im->b[8 + k] = (uint8_t)(dl >> (8 * k));
    memcpy(im->b + pl, dict, dl);
    if (nd)
        memcpy(im->b + pl + dl, data, nd);
    im->n = pl + dl + nd;
}

static void parse_ok(const char *what, const img_t *im, tsr_tensor_t *t)
{
    tsr_err_clear();
    expect_ok(what, tsr_npy_parse_named(im->b, im->n, what, t));
}

static void test_header_variants(void **state)
{
    (void)state;
    /* The images below are little-endian, compared with native values. */
    assert_true(host_is_little());
    /* int16 (2, 3) = 1..6, little-endian. */
    const uint8_t le[12] = {1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0};
    int16_t want6[6] = {1, 2, 3, 4, 5, 6};
    static const struct {
        int major;
        const char *dict;
    } v[] = {
        {1, "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }"},
        {1, "{'shape': (2, 3), 'fortran_order': False, 'descr': '<i2'}"},
        {1, "{'fortran_order': False, 'descr': '<i2', 'shape': (2,3)}\n"},
        {1, "  {\n\t\"descr\" : \"<i2\" ,\r\n 'fortran_order':False,'shape':( 2 , 3 , ),}   \n"},
        {1, "{'descr': '<i2', 'fortran_order': False, 'shape': (2L, 3L), }"},
        {2, "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }"},
        {3, "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }"},
        {1, "{'descr':'<i2','fortran_order':False,'shape':(2,3),}"},
    };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        img_t im;
        tsr_tensor_t t;
        char what[32];
        snprintf(what, sizeof what, "variant %zu", k);
        mk_img(&im, v[k].major, v[k].dict, le, sizeof le);
        parse_ok(what, &im, &t);
        assert_int_equal(t.dtype, TSR_DT_INT16);
        assert_int_equal(t.ndim, 2);
        assert_int_equal(t.shape[0], 2);
        assert_int_equal(t.shape[1], 3);
        assert_memory_equal(t.data, want6, sizeof want6);
        tsr_tensor_free(&t);
    }

    /* Scalar and 1-tuple. */
    img_t im;
    tsr_tensor_t t;
    float f = -2.5f;
    mk_img(&im, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", &f, 4);
    parse_ok("scalar", &im, &t);
    assert_int_equal(t.ndim, 0);
    assert_int_equal(t.nbytes, 4);
    assert_memory_equal(t.data, &f, 4);
    tsr_tensor_free(&t);
    const uint8_t five[5] = {9, 8, 7, 6, 255};
    mk_img(&im, 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", five, 5);
    parse_ok("1-tuple", &im, &t);
    assert_int_equal(t.ndim, 1);
    assert_int_equal(t.shape[0], 5);
    assert_memory_equal(t.data, five, 5);
    tsr_tensor_free(&t);

    /* Byte-order spellings: one-byte types ignore it, '=' / none mean native. */
    static const struct {
        const char *descr;
        tsr_dtype_e dt;
    } d[] = {
        {"|i1", TSR_DT_INT8},  {"<i1", TSR_DT_INT8},   {"=i1", TSR_DT_INT8},
        {"i1", TSR_DT_INT8},   {">i1", TSR_DT_INT8},   {"|u1", TSR_DT_UINT8},
        {"<u1", TSR_DT_UINT8}, {"=u1", TSR_DT_UINT8},  {"u1", TSR_DT_UINT8},
        {"<i2", TSR_DT_INT16}, {"=i2", TSR_DT_INT16},  {"i2", TSR_DT_INT16},
        {"<i4", TSR_DT_INT32}, {"=i4", TSR_DT_INT32},  {"<f4", TSR_DT_FLOAT32},
        {"f4", TSR_DT_FLOAT32},
    };
    const uint8_t eight[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (size_t k = 0; k < sizeof d / sizeof d[0]; k++) {
        char dict[128];
        size_t n = 8 / dt_size(d[k].dt);
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%zu,), }",
                 d[k].descr, n);
        mk_img(&im, 1, dict, eight, 8);
        parse_ok(d[k].descr, &im, &t);
        assert_int_equal(t.dtype, d[k].dt);
        assert_int_equal(t.shape[0], (int64_t)n);
        assert_memory_equal(t.data, eight, 8); /* no swap on a little-endian host */
        tsr_tensor_free(&t);
    }
}

static void test_big_endian(void **state)
{
    (void)state;
    img_t im;
    tsr_tensor_t t;
    const uint8_t be4[12] = {0x00, 0x00, 0x01, 0x02, 0xff, 0xff, 0xff, 0xfe, 0x80, 0, 0, 0};
    int32_t w4[3] = {258, -2, INT32_MIN};
    mk_img(&im, 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (3,), }", be4, 12);
    parse_ok(">i4", &im, &t);
    assert_memory_equal(t.data, w4, sizeof w4);
    tsr_tensor_free(&t);

    const uint8_t be2[4] = {0x01, 0x02, 0xff, 0x00};
    int16_t w2[2] = {258, -256};
    mk_img(&im, 1, "{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", be2, 4);
    parse_ok(">i2", &im, &t);
    assert_memory_equal(t.data, w2, sizeof w2);
    tsr_tensor_free(&t);

    /* 1.0f, -pi (0xc0490fdb), -0.0f. */
    const uint8_t bef[12] = {0x3f, 0x80, 0, 0, 0xc0, 0x49, 0x0f, 0xdb, 0x80, 0, 0, 0};
    uint32_t wf[3] = {0x3f800000u, 0xc0490fdbu, 0x80000000u};
    mk_img(&im, 2, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", bef, 12);
    parse_ok(">f4", &im, &t);
    assert_memory_equal(t.data, wf, sizeof wf);
    tsr_tensor_free(&t);

    /* Through a file: the reader swaps in place there. */
    put_file(tpath("be.npy"), im.b, im.n);
    expect_ok("be file", tsr_npy_read(tpath("be.npy"), &t));
    assert_memory_equal(t.data, wf, sizeof wf);
    tsr_tensor_free(&t);
}

static void test_fortran_order(void **state)
{
    (void)state;
    img_t im;
    tsr_tensor_t t;
    /* [[1, 2, 3], [4, 5, 6]] stored column by column. */
    const int8_t f23[6] = {1, 4, 2, 5, 3, 6};
    const int8_t c23[6] = {1, 2, 3, 4, 5, 6};
    mk_img(&im, 1, "{'descr': '|i1', 'fortran_order': True, 'shape': (2, 3), }", f23, 6);
    parse_ok("fortran 2x3", &im, &t);
    assert_int_equal(t.shape[0], 2);
    assert_int_equal(t.shape[1], 3);
    assert_memory_equal(t.data, c23, 6);
    tsr_tensor_free(&t);

    /* Big-endian int16 (2, 3, 4), a[i][j][k] = 100i + 10j + k, in Fortran
     * order: i varies fastest, k slowest. */
    uint8_t fb[48];
    int16_t want[24];
    size_t o = 0;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++) {
                int v = 100 * i + 10 * j + k;
                fb[o++] = (uint8_t)(v >> 8);
                fb[o++] = (uint8_t)v;
            }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                want[(i * 3 + j) * 4 + k] = (int16_t)(100 * i + 10 * j + k);
    mk_img(&im, 1, "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3, 4), }", fb, 48);
    parse_ok("fortran >i2 3-d", &im, &t);
    assert_memory_equal(t.data, want, sizeof want);
    tsr_tensor_free(&t);
    put_file(tpath("fortran.npy"), im.b, im.n);
    expect_ok("fortran file", tsr_npy_read(tpath("fortran.npy"), &t));
    assert_memory_equal(t.data, want, sizeof want);
    tsr_tensor_free(&t);

    /* One dimension or none: Fortran order is the same layout. */
    const int8_t d3[3] = {7, 8, 9};
    mk_img(&im, 1, "{'descr': '|i1', 'fortran_order': True, 'shape': (3,), }", d3, 3);
    parse_ok("fortran 1-d", &im, &t);
    assert_memory_equal(t.data, d3, 3);
    tsr_tensor_free(&t);
    mk_img(&im, 1, "{'descr': '|i1', 'fortran_order': True, 'shape': (), }", d3, 1);
    parse_ok("fortran 0-d", &im, &t);
    assert_memory_equal(t.data, d3, 1);
    tsr_tensor_free(&t);
    mk_img(&im, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (0, 5), }", d3, 0);
    parse_ok("fortran empty", &im, &t);
    assert_int_equal(t.nbytes, 0);
    tsr_tensor_free(&t);
}

/* ---- bad inputs ---- */

typedef struct {
    const char *what;   /* test case name (also the file name) */
    int major;          /* version for mk_img; 0 = raw bytes below */
    const char *dict;   /* header text (or raw bytes) */
    size_t raw_len;     /* length of raw bytes when major == 0 */
    size_t data;        /* data bytes to append */
    int code;           /* expected error */
    const char *needle; /* expected in the message */
} bad_t;

#define STD_I4 "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"

static const bad_t bad_cases[] = {
    {"empty", 0, "", 0, 0, TSR_EPARSE, "empty file"},
    {"magic1", 0, "\x93NUMPX\x01\x00\x10\x00", 10, 16, TSR_EPARSE, "bad magic"},
    {"magic2", 0, "GIF89a\x01\x00\x10\x00", 10, 16, TSR_EPARSE, "bad magic"},
    {"short-magic", 0, "\x93NU", 3, 0, TSR_EPARSE, "truncated"},
    {"no-version", 0, "\x93NUMPY\x01", 7, 0, TSR_EPARSE, "truncated"},
    {"version4", 0, "\x93NUMPY\x04\x00\x10\x00\x00\x00", 12, 16, TSR_EPARSE,
     "unsupported .npy format version 4.0"},
    {"version1.1", 0, "\x93NUMPY\x01\x01\x10\x00", 10, 16, TSR_EPARSE, "version 1.1"},
    {"version0", 0, "\x93NUMPY\x00\x00\x10\x00", 10, 16, TSR_EPARSE, "version 0.0"},
    {"short-len", 0, "\x93NUMPY\x01\x00\x10", 9, 0, TSR_EPARSE, "header length field"},
    {"short-len-v2", 0, "\x93NUMPY\x02\x00\x10\x00\x00", 11, 0, TSR_EPARSE,
     "header length field"},
    {"hlen-past-end", 0, "\x93NUMPY\x01\x00\xff\xff{}", 12, 0, TSR_EPARSE,
     "header length 65535 runs past the end of the file"},
    {"hlen-past-end-v2", 0, "\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14, 0, TSR_EPARSE,
     "header length 4294967295 runs past the end of the file"},
    {"no-brace", 1, "'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", 0, 24,
     TSR_EPARSE, "expected '{'"},
    {"quote-missing", 1, "{'descr': '<i4, 'fortran_order': False, 'shape': (2, 3)}", 0, 0,
     TSR_EINVAL, "dtype '<i4, ' not supported"},
    {"unterminated2", 1, "{'descr': '<i4", 0, 0, TSR_EPARSE, "not terminated"},
    {"no-colon", 1, "{'descr' '<i4', 'fortran_order': False, 'shape': (2, 3), }", 0, 24,
     TSR_EPARSE, "expected ':' after a key"},
    {"no-close", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), ", 0, 24,
     TSR_EPARSE, "the end of the header"},
    {"no-comma", 1, "{'descr': '<i4' 'fortran_order': False, 'shape': (2, 3), }", 0, 24,
     TSR_EPARSE, "expected ',' or '}' after a value"},
    {"unknown-key", 1,
     "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", 0, 24,
     TSR_EPARSE, "unexpected key 'extra'"},
    {"dup-key", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), 'shape': (6,)}",
     0, 24, TSR_EPARSE, "duplicate key 'shape'"},
    {"missing-shape", 1, "{'descr': '<i4', 'fortran_order': False}", 0, 24, TSR_EPARSE,
     "key 'shape' is missing"},
    {"missing-descr", 1, "{'fortran_order': False, 'shape': (2, 3)}", 0, 24, TSR_EPARSE,
     "key 'descr' is missing"},
    {"empty-dict", 1, "{}", 0, 24, TSR_EPARSE, "is missing"},
    {"fortran-yes", 1, "{'descr': '<i4', 'fortran_order': 'yes', 'shape': (2, 3), }", 0, 24,
     TSR_EPARSE, "True or False"},
    {"fortran-1", 1, "{'descr': '<i4', 'fortran_order': 1, 'shape': (2, 3), }", 0, 24,
     TSR_EPARSE, "True or False"},
    {"fortran-true", 1, "{'descr': '<i4', 'fortran_order': true, 'shape': (2, 3), }", 0, 24,
     TSR_EPARSE, "True or False"},
    {"shape-list", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': [2, 3], }", 0, 24,
     TSR_EPARSE, "a tuple"},
    {"shape-not-tuple", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (6), }", 0, 24,
     TSR_EPARSE, "'shape' (6) is not a tuple"},
    {"shape-int", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': 6, }", 0, 24,
     TSR_EPARSE, "a tuple"},
    {"shape-float", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2.0, 3), }", 0, 24,
     TSR_EPARSE, "',' or ')' in 'shape'"},
    {"shape-double-comma", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,, 3), }",
     0, 24, TSR_EPARSE, "a dimension"},
    {"negative", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (-1, 3), }", 0, 24,
     TSR_EPARSE, "negative dimension -1"},
    {"dim-overflow", 1,
     "{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999, 1), }", 0, 24,
     TSR_EPARSE, "dimension 99999999999999999999 in 'shape' overflows int64"},
    {"dim-int64max", 1,
     "{'descr': '<i4', 'fortran_order': False, 'shape': (9223372036854775808,), }", 0, 24,
     TSR_EPARSE, "overflows int64"},
    {"product-overflow", 1,
     "{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0, 24,
     TSR_EPARSE, "'shape' (4294967296, 4294967296) of int32 overflows"},
    {"bytes-overflow", 1,
     "{'descr': '<i4', 'fortran_order': False, 'shape': (4611686018427387904,), }", 0, 24,
     TSR_EPARSE, "overflows"},
    {"zero-dim-overflow", 1,
     "{'descr': '<i4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }", 0, 0,
     TSR_EPARSE, "overflows"},
    {"huge-shape", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1099511627776,), }",
     0, 24, TSR_EPARSE, "needs 4398046511104 bytes, only 24 follow the header"},
    {"ndim9", 1,
     "{'descr': '|i1', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", 0, 1,
     TSR_EINVAL, "more than 8 dimensions"},
    {"f8", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 0, 24, TSR_EINVAL,
     "dtype '<f8' not supported (int8, uint8, int16, int32, float32, int64)"},
    {"u2", 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", 0, 6, TSR_EINVAL,
     "dtype '<u2' not supported"},
    {"b1", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 0, 3, TSR_EINVAL,
     "dtype '|b1' not supported"},
    {"f2", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", 0, 6, TSR_EINVAL,
     "dtype '<f2' not supported"},
    {"empty-descr", 1, "{'descr': '', 'fortran_order': False, 'shape': (3,), }", 0, 6,
     TSR_EINVAL, "dtype '' not supported"},
    {"long-descr", 1,
     "{'descr': '<i4xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx', "
     "'fortran_order': False, 'shape': (3,), }",
     0, 12, TSR_EINVAL, "...' not supported"},
    {"descr-not-string", 1, "{'descr': 4, 'fortran_order': False, 'shape': (3,), }", 0, 12,
     TSR_EPARSE, "a quoted dtype string"},
    {"structured", 1, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (3,), }", 0,
     12, TSR_EINVAL, "structured"},
    {"short-data", 1, STD_I4, 0, 23, TSR_EPARSE,
     "truncated .npy data: shape (2, 3) of int32 needs 24 bytes, only 23 follow the header"},
    {"no-data", 1, STD_I4, 0, 0, TSR_EPARSE, "needs 24 bytes, only 0 follow"},
    {"long-data", 1, STD_I4, 0, 25, TSR_EPARSE, "1 unexpected bytes after the data"},
    {"trailing-text", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), } x", 0,
     24, TSR_EPARSE, "only whitespace after the header dict"},
    {"two-dicts", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3)}{}", 0, 24,
     TSR_EPARSE, "only whitespace after the header dict"},
    {"escape", 1, "{'desc\\r': '<i4', 'fortran_order': False, 'shape': (2, 3), }", 0, 24,
     TSR_EPARSE, "escape sequences"},
    {"newline-in-string", 1, "{'descr': '<i4\n', 'fortran_order': False, 'shape': (2, 3), }",
     0, 24, TSR_EPARSE, "closing quote"},
    {"nul", 0,
     "\x93NUMPY\x01\x00\x08\x00{'descr\x00", 18, 0, TSR_EPARSE, "not terminated"},
    {"nul2", 0, "\x93NUMPY\x01\x00\x02\x00{\x00", 12, 0, TSR_EPARSE, "byte 0x00"},
    {"unquoted-key", 1, "{descr: '<i4', 'fortran_order': False, 'shape': (2, 3), }", 0, 24,
     TSR_EPARSE, "a quoted key or '}'"},
    {"empty-header", 1, "", 0, 24, TSR_EPARSE, "the end of the header"},
};

static void build_bad(const bad_t *c, img_t *im)
{
    static uint8_t zeros[64];
    if (c->major) {
        mk_img(im, c->major, c->dict, zeros, c->data);
    } else {
        memcpy(im->b, c->dict, c->raw_len);
        memset(im->b + c->raw_len, 0, c->data);
        im->n = c->raw_len + c->data;
    }
}

static void test_bad_inputs(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof bad_cases / sizeof bad_cases[0]; k++) {
        const bad_t *c = &bad_cases[k];
        img_t im;
        tsr_tensor_t t;
        char name[64];
        build_bad(c, &im);
        snprintf(name, sizeof name, "%s.npy", c->what);
        /* In memory. */
        tsr_err_clear();
        memset(&t, 0xa5, sizeof t);
        expect_code(c->what, tsr_npy_parse_named(im.b, im.n, name, &t), c->code);
        expect_named(c->what, name);
        expect_has(c->what, c->needle);
        expect_zeroed(c->what, &t);
        /* From a file: the same verdict, naming the path. */
        const char *p = tpath("%s", name);
        put_file(p, im.b, im.n);
        tsr_err_clear();
        memset(&t, 0xa5, sizeof t);
        expect_code(c->what, tsr_npy_read(p, &t), c->code);
        expect_named(c->what, p);
        expect_has(c->what, c->needle);
        expect_zeroed(c->what, &t);
        unlink(p);
    }
    /* The unnamed variant still says where the bytes came from. */
    tsr_tensor_t t;
    expect_code("unnamed", tsr_npy_parse("GIF89a....", 10, &t), TSR_EPARSE);
    expect_named("unnamed", "<npy buffer>");
}

/* A header over the 1 MiB limit is refused before it is read. */
static void test_header_limit(void **state)
{
    (void)state;
    size_t hlen = (1u << 20) + 1, n = 12 + hlen;
    uint8_t *b = calloc(1, n);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY\x02\x00", 8);
    for (int k = 0; k < 4; k++)
        b[8 + k] = (uint8_t)(hlen >> (8 * k));
    memset(b + 12, ' ', hlen);
    tsr_tensor_t t;
    expect_code("huge header", tsr_npy_parse_named(b, n, "big.npy", &t), TSR_EPARSE);
    expect_has("huge header", "big.npy: header length 1048577 exceeds the 1048576-byte limit");
    put_file(tpath("big.npy"), b, n);
    expect_code("huge header file", tsr_npy_read(tpath("big.npy"), &t), TSR_EPARSE);
    expect_has("huge header file", "exceeds the 1048576-byte limit");
    unlink(tpath("big.npy"));
    free(b);
}

static void test_io_errors(void **state)
{
    (void)state;
    tsr_tensor_t t, good;
    static const int64_t s4[] = {4};
    make_tensor(&good, TSR_DT_INT8, 1, s4);

    const char *missing = tpath("no-such-file.npy");
    expect_code("missing", tsr_npy_read(missing, &t), TSR_EIO);
    expect_named("missing", missing);
    expect_has("missing", "cannot open");
    expect_zeroed("missing", &t);
    expect_code("directory", tsr_npy_read(g_dir, &t), TSR_EIO);
    expect_named("directory", g_dir);
    expect_has("directory", "is a directory");
    expect_code("null path", tsr_npy_read(NULL, &t), TSR_EINVAL);
    expect_code("null out", tsr_npy_read(missing, NULL), TSR_EINVAL);
    expect_code("null buf", tsr_npy_parse(NULL, 5, &t), TSR_EINVAL);

    const char *nodir = tpath("no-such-dir/x.npy");
    expect_code("no dir", tsr_npy_write(nodir, &good), TSR_EIO);
    expect_named("no dir", nodir);
    expect_has("no dir", "cannot create a temporary file");
    expect_code("onto a directory", tsr_npy_write(g_dir, &good), TSR_EIO);
    expect_has("onto a directory", "rename");

    /* Invalid tensors are refused before any file is touched. */
    const char *p = tpath("invalid.npy");
    tsr_tensor_t bad = good;
    bad.dtype = (tsr_dtype_e)9;
    expect_code("bad dtype", tsr_npy_write(p, &bad), TSR_EINVAL);
    expect_has("bad dtype", "dtype 9");
    bad = good;
    bad.ndim = 9;
    expect_code("ndim 9", tsr_npy_write(p, &bad), TSR_EINVAL);
    expect_has("ndim 9", "ndim 9");
    bad.ndim = -1;
    expect_code("ndim -1", tsr_npy_write(p, &bad), TSR_EINVAL);
    bad = good;
    bad.shape[0] = -4;
    expect_code("negative shape", tsr_npy_write(p, &bad), TSR_EINVAL);
    expect_has("negative shape", "(-4,)");
    bad = good;
    bad.nbytes = 5;
    expect_code("nbytes", tsr_npy_write(p, &bad), TSR_EINVAL);
    expect_has("nbytes", "nbytes is 5 but shape (4,) of int8 needs 4");
    bad = good;
    bad.data = NULL;
    expect_code("no data", tsr_npy_write(p, &bad), TSR_EINVAL);
    expect_has("no data", "no data");
    expect_code("null tensor", tsr_npy_write(p, NULL), TSR_EINVAL);
    expect_code("null path", tsr_npy_write(NULL, &good), TSR_EINVAL);
    if (access(p, F_OK) == 0)
        fail_msg("an invalid tensor created %s", p);
    free(good.data);
}

/* A write that fails half-way (file size limit: EFBIG) must leave the old
 * file as it was and remove its temporary. */
static void test_atomic_write(void **state)
{
    (void)state;
    tsr_tensor_t old, big, r;
    static const int64_t so[] = {3, 5}, sb[] = {256, 256};
    make_tensor(&old, TSR_DT_INT16, 2, so);
    make_tensor(&big, TSR_DT_INT32, 2, sb);
    const char *p = tpath("atomic.npy");
    expect_ok("old", tsr_npy_write(p, &old));

    struct rlimit saved, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = saved;
    lim.rlim_cur = 8192;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = tsr_npy_write(p, &big);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, prev);

    expect_code("write past the size limit", rc, TSR_EIO);
    expect_named("write past the size limit", p);
    expect_has("write past the size limit", "write failed");
    expect_has("write past the size limit", "previous file is unchanged");
    expect_ok("reread", tsr_npy_read(p, &r));
    expect_same("old contents", &r, &old);
    tsr_tensor_free(&r);
    DIR *d = opendir(g_dir);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, "atomic.npy.tmp"))
            fail_msg("temporary file %s left behind", e->d_name);
    closedir(d);
    /* And without the limit it goes through. */
    expect_ok("big", tsr_npy_write(p, &big));
    expect_ok("reread big", tsr_npy_read(p, &r));
    expect_same("new contents", &r, &big);
    tsr_tensor_free(&r);
    free(old.data);
    free(big.data);
}

/* ---- NumPy interop ---- */

static void run_python(const char *script, const char *what)
{
    if (access(PYTHON, X_OK))
        fail_msg("%s: %s not found; python3 with numpy is a declared test dependency "
                 "(install with scripts/setup.sh)",
                 what, PYTHON);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        fail_msg("%s: fork: %s", what, strerror(errno));
    if (pid == 0) {
        execl(PYTHON, "python3", script, g_dir, (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        fail_msg("%s: waitpid: %s", what, strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("%s: %s %s failed (%s %d); if numpy is missing, install python3-numpy "
                 "(scripts/setup.sh) -- it is a declared test dependency",
                 what, PYTHON, script, WIFEXITED(st) ? "exit status" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* Writes NAME.npy files with np.save / write_array and manifest.txt:
 *   OK name dtype ndim d0 .. dn-1 count v0 .. v(count-1)   (C order; float32 as bit patterns)
 *   ERR name needle...                                      (we must refuse it with that message)
 *   END
 */
static const char gen_py[] =
    "import sys\n"
    "import numpy as np\n"
    "from numpy.lib import format as npf\n"
    "d = sys.argv[1]\n"
    "rng = np.random.default_rng(20240601)\n"
    "man = open(d + '/manifest.txt', 'w')\n"
    "def rand(code, shape):\n"
    "    dt = np.dtype(code)\n"
    "    if dt.kind == 'f':\n"
    "        a = (rng.standard_normal(shape) * 100).astype(dt)\n"
    "        flat = a.reshape(-1)\n"
    "        specials = [np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4028235e38, 1.0]\n"
    "        flat[:len(specials)] = specials[:flat.size]\n"
    "        return a\n"
    "    info = np.iinfo(dt)\n"
    "    a = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np.int64)\n"
    "    a = a.astype(dt)\n"
    "    a.reshape(-1)[:2] = [info.min, info.max][:a.size]\n"
    "    return a\n"
    "def save(name, a, version):\n"
    "    path = d + '/' + name + '.npy'\n"
    "    if version is None:\n"
    "        np.save(path, a)\n"
    "    else:\n"
    "        with open(path, 'wb') as f:\n"
    "            npf.write_array(f, a, version=version)\n"
    "def ok(name, a, version=None, fortran=None):\n"
    "    save(name, a, version)\n"
    "    hdr = open(d + '/' + name + '.npy', 'rb').read(200)\n"
    "    if fortran is not None:\n"
    "        assert (b\"'fortran_order': True\" in hdr) == fortran, (name, hdr)\n"
    "    flat = np.ascontiguousarray(a).reshape(-1)\n"
    "    if flat.dtype.kind == 'f':\n"
    "        vals = flat.view(flat.dtype.byteorder + 'u4')\n"
    "    else:\n"
    "        vals = flat\n"
    "    f = ['OK', name, a.dtype.name, str(a.ndim)] + [str(s) for s in a.shape]\n"
    "    f += [str(flat.size)] + [str(int(v)) for v in vals]\n"
    "    man.write(' '.join(f) + '\\n')\n"
    "def bad(name, a, needle):\n"
    "    save(name, a, None)\n"
    "    man.write('ERR ' + name + ' ' + needle + '\\n')\n"
    "F = np.asfortranarray\n"
    "ok('i8_2d', rand('i1', (3, 4)))\n"
    "ok('u8_1d', rand('u1', (7,)))\n"
    "ok('i16_be_3d', rand('>i2', (2, 3, 4)))\n"
    "ok('i32_f_2d', F(rand('<i4', (3, 5))), fortran=True)\n"
    "ok('f32_f_be_3d', F(rand('>f4', (4, 3, 2))), fortran=True)\n"
    "ok('f32_scalar', np.array(3.5, dtype='<f4'))\n"
    "ok('u8_scalar', np.array(200, dtype='u1'))\n"
    "ok('i32_empty', np.zeros((0, 3), dtype='<i4'))\n"
    "ok('i8_f_4d', F(rand('i1', (2, 3, 2, 2))), fortran=True)\n"
    "ok('i16_long', rand('<i2', (64, 33)))\n"
    "ok('u8_f_2d', F(rand('u1', (5, 4))), fortran=True)\n"
    "ok('i32_v2', rand('<i4', (3, 2)), version=(2, 0))\n"
    "ok('f32_v3', rand('<f4', (2, 2)), version=(3, 0))\n"
    "ok('i32_be_f_4d', F(rand('>i4', (2, 2, 3, 2))), fortran=True)\n"
    "ok('i16_be_f_v2', F(rand('>i2', (3, 4))), version=(2, 0), fortran=True)\n"
    "ok('i8_view', rand('i1', (6, 8))[::2, ::-1])\n"
    "ok('i16_5d', rand('<i2', (2, 1, 2, 1, 3)))\n"
    "ok('u8_f_8d', F(rand('u1', (1, 2, 1, 2, 1, 2, 1, 2))), fortran=True)\n"
    "ok('f32_1d', rand('<f4', (9,)))\n"
    "ok('f32_be_1d', rand('>f4', (9,)))\n"
    "ok('i32_be_scalar', np.array(-123456789, dtype='>i4'))\n"
    "bad('f8', np.zeros(3), \"dtype '<f8' not supported (int8, uint8, int16, int32, float32, int64)\")\n"
    "bad('u16', np.zeros(3, dtype='<u2'), \"dtype '<u2' not supported\")\n"
    "bad('bool', np.zeros(3, dtype=bool), \"dtype '|b1' not supported\")\n"
    "bad('unicode', np.array(['ab', 'c']), \"dtype '<U2' not supported\")\n"
    "bad('record', np.zeros(3, dtype=[('a', '<i4'), ('b', '<f4')]), 'structured')\n"
    "bad('ndim9', np.zeros((1,) * 9, dtype='i1'), 'more than 8 dimensions')\n"
    "man.write('END\\n')\n"
    "man.close()\n";

static tsr_dtype_e dtype_by_name(const char *s)
{
    for (int k = 0; k < N_ALL_DTYPES; k++)
        if (!strcmp(s, tsr_dtype_name(all_dtypes[k])))
            return all_dtypes[k];
    fail_msg("manifest: unknown dtype %s", s);
    return TSR_DT_INT8;
}

/* Next whitespace-separated token of *s (modified in place). */
static char *tok(char **s)
{
    char *p = *s;
    while (*p == ' ')
        p++;
    if (!*p)
        fail_msg("manifest: line ends early");
    char *e = p;
    while (*e && *e != ' ')
        e++;
    if (*e)
        *e++ = '\0';
    *s = e;
    return p;
}

static void check_numpy_case(char *line)
{
    char *s = line;
    const char *name = tok(&s);
    tsr_dtype_e dt = dtype_by_name(tok(&s));
    int ndim = atoi(tok(&s));
    int64_t shape[16];
    for (int d = 0; d < ndim && d < 16; d++)
        shape[d] = strtoll(tok(&s), NULL, 10);
    long long count = strtoll(tok(&s), NULL, 10);
    const char *p = tpath("%s.npy", name);
    tsr_tensor_t t;
    tsr_err_clear();
    expect_ok(name, tsr_npy_read(p, &t));
    if (t.dtype != dt || t.ndim != ndim)
        fail_msg("%s: read %s ndim %d, numpy wrote %s ndim %d", name, tsr_dtype_name(t.dtype),
                 t.ndim, tsr_dtype_name(dt), ndim);
    for (int d = 0; d < ndim; d++)
        if (t.shape[d] != shape[d])
            fail_msg("%s: shape[%d] = %lld, numpy wrote %lld", name, d, (long long)t.shape[d],
                     (long long)shape[d]);
    if (tsr_tensor_numel(&t) != count || t.nbytes != (size_t)count * dt_size(dt))
        fail_msg("%s: %lld elements / %zu bytes, numpy wrote %lld elements", name,
                 (long long)tsr_tensor_numel(&t), t.nbytes, count);
    for (long long i = 0; i < count; i++) {
        long long want = strtoll(tok(&s), NULL, 10), got = 0;
        const uint8_t *e = (const uint8_t *)t.data + (size_t)i * dt_size(dt);
        switch (dt) {
        case TSR_DT_INT8: got = *(const int8_t *)e; break;
        case TSR_DT_UINT8: got = *e; break;
        case TSR_DT_INT16: { int16_t v; memcpy(&v, e, 2); got = v; break; }
        case TSR_DT_INT32: { int32_t v; memcpy(&v, e, 4); got = v; break; }
        case TSR_DT_FLOAT32: { uint32_t v; memcpy(&v, e, 4); got = v; break; }
        case TSR_DT_INT64: { int64_t v; memcpy(&v, e, 8); got = v; break; }
        }
        if (got != want)
            fail_msg("%s: element %lld (C order) is %lld, numpy says %lld%s", name, i, got, want,
                     dt == TSR_DT_FLOAT32 ? " (float32 bit patterns)" : "");
    }
    tsr_tensor_free(&t);
}

static void test_numpy_to_tessera(void **state)
{
    (void)state;
    const char *script = tpath("gen.py");
    put_file(script, gen_py, sizeof gen_py - 1);
    run_python(script, "numpy writer");
    size_t n;
    char *man = (char *)get_file(tpath("manifest.txt"), &n);
    man = realloc(man, n + 1);
    man[n] = '\0';
    int n_ok = 0, n_err = 0, end = 0;
    for (char *line = man, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (!strncmp(line, "OK ", 3)) {
            check_numpy_case(line + 3);
            n_ok++;
        } else if (!strncmp(line, "ERR ", 4)) {
            char *s = line + 4;
            const char *name = tok(&s);
            const char *p = tpath("%s.npy", name);
            tsr_tensor_t t;
            int rc = tsr_npy_read(p, &t);
            if (rc >= 0)
                fail_msg("%s: numpy's file was accepted, want an error containing \"%s\"", name,
                         s);
            expect_named(name, p);
            expect_has(name, s);
            n_err++;
        } else if (!strcmp(line, "END")) {
            end = 1;
        } else {
            fail_msg("manifest: unexpected line \"%.60s\"", line);
        }
    }
    free(man);
    if (!end || n_ok != 21 || n_err != 6)
        fail_msg("manifest incomplete: %d OK, %d ERR cases, END %s (want 21, 6, seen)", n_ok,
                 n_err, end ? "seen" : "missing");
}

/* Reads written.txt ("name dtype d0 .. dn-1" per line), loads each file
 * with np.load and compares it with the formula evaluated in Python;
 * checks the layout NumPy itself would write (version 1.0, 64-byte
 * alignment, newline, C order). Exit status 0 = all good. */
static const char check_py[] =
    "import sys\n"
    "import numpy as np\n"
    "from numpy.lib import format as npf\n"
    "d = sys.argv[1]\n"
    "def formula(dt, i):\n"
    "    if dt == 'int8': return (i * 37 + 11) % 256 - 128\n"
    "    if dt == 'uint8': return (i * 73 + 5) % 256\n"
    "    if dt == 'int16': return (i * 2971 + 13) % 65536 - 32768\n"
    "    if dt == 'int32': return (i * 2654435761 + 7) % 2**32 - 2**31\n"
    "    if dt == 'float32': return ((i * 7) % 1001 - 500) / 16.0\n"
    "    raise ValueError(dt)\n"
    "bad = 0\n"
    "seen = 0\n"
    "for line in open(d + '/written.txt'):\n"
    "    name, dt, *dims = line.split()\n"
    "    shape = tuple(int(x) for x in dims)\n"
    "    path = d + '/' + name + '.npy'\n"
    "    raw = open(path, 'rb').read()\n"
    "    hlen = int.from_bytes(raw[8:10], 'little')\n"
    "    problems = []\n"
    "    if raw[:8] != b'\\x93NUMPY\\x01\\x00': problems.append('not version 1.0')\n"
    "    if (10 + hlen) % 64: problems.append('data offset %d not 64-aligned' % (10 + hlen))\n"
    "    if raw[10 + hlen - 1:10 + hlen] != b'\\n': problems.append('header lacks newline')\n"
    "    with open(path, 'rb') as f:\n"
    "        npf.read_magic(f)\n"
    "        hshape, fortran, hdtype = npf.read_array_header_1_0(f)\n"
    "    if fortran: problems.append('fortran_order True')\n"
    "    a = np.load(path, allow_pickle=False)\n"
    "    if a.dtype != np.dtype(dt): problems.append('dtype %s' % a.dtype)\n"
    "    if a.shape != shape: problems.append('shape %s, want %s' % (a.shape, shape))\n"
    "    n = 1\n"
    "    for s in shape: n *= s\n"
    "    want = np.array([formula(dt, i) for i in range(n)], dtype=dt).reshape(shape)\n"
    "    if a.shape == shape and not np.array_equal(a, want): problems.append('values differ')\n"
    "    if problems:\n"
    "        bad += 1\n"
    "        print('%s: %s' % (name, '; '.join(problems)), file=sys.stderr)\n"
    "    seen += 1\n"
    "print('numpy checked %d files written by tsr_npy_write, %d bad' % (seen, bad))\n"
    "sys.exit(1 if bad or seen == 0 else 0)\n";

static void test_tessera_to_numpy(void **state)
{
    (void)state;
    static const struct {
        int ndim;
        int64_t shape[8];
    } shapes[] = {
        {0, {0}},        {1, {5}},          {2, {3, 4}},
        {3, {2, 3, 4}},  {4, {2, 1, 3, 2}}, {2, {0, 4}},
        {2, {128, 9}},   {8, {1, 2, 1, 2, 1, 2, 1, 2}},
    };
    const char *list = tpath("written.txt");
    FILE *f = fopen(list, "w");
    assert_non_null(f);
    for (int k = 0; k < N_ALL_DTYPES; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            tsr_tensor_t t;
            char name[64];
            tsr_dtype_e dt = all_dtypes[k];
            snprintf(name, sizeof name, "w_%s_%zu", tsr_dtype_name(dt), s);
            make_tensor(&t, dt, shapes[s].ndim, shapes[s].shape);
            expect_ok(name, tsr_npy_write(tpath("%s.npy", name), &t));
            free(t.data);
            fprintf(f, "%s %s", name, tsr_dtype_name(dt));
            for (int d = 0; d < shapes[s].ndim; d++)
                fprintf(f, " %lld", (long long)shapes[s].shape[d]);
            fprintf(f, "\n");
        }
    assert_int_equal(fclose(f), 0);
    const char *script = tpath("check_ours.py");
    put_file(script, check_py, sizeof check_py - 1);
    run_python(script, "numpy reader");
}

/* ---- fuzz ---- */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    /* xorshift64*: deterministic, so a failure reproduces. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* OK results must be self-consistent; errors must carry a named message. */
static void check_outcome(const char *what, int rc, tsr_tensor_t *t, const char *name)
{
    if (rc == TSR_OK) {
        if (t->ndim < 0 || t->ndim > TSR_TENSOR_MAX_DIMS || !t->data ||
            !tsr_dtype_size(t->dtype))
            fail_msg("%s: inconsistent tensor accepted", what);
        uint64_t n = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0)
                fail_msg("%s: negative dimension accepted", what);
            n *= (uint64_t)t->shape[d];
        }
        if (n * tsr_dtype_size(t->dtype) != t->nbytes)
            fail_msg("%s: nbytes %zu does not match the shape", what, t->nbytes);
        /* Touch every byte so ASan sees any overrun. */
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < t->nbytes; i++)
            sum += ((uint8_t *)t->data)[i];
        (void)sum;
        tsr_tensor_free(t);
        return;
    }
    if (rc != TSR_EPARSE && rc != TSR_EINVAL)
        fail_msg("%s: unexpected error %s: %s", what, tsr_errname(rc), tsr_errmsg());
    expect_named(what, name);
    expect_zeroed(what, t);
}

/* Fuzz bases: a file from our writer, and hand-built ones exercising v2
 * with big-endian Fortran data, v3 scalar and an empty array. */
static void fuzz_bases(img_t *im, int *count)
{
    tsr_tensor_t t;
    static const int64_t s[] = {2, 3, 4};
    make_tensor(&t, TSR_DT_INT16, 3, s);
    assert_int_equal(tsr_npy_write(tpath("fuzz_base.npy"), &t), TSR_OK);
    free(t.data);
    size_t n;
    uint8_t *b = get_file(tpath("fuzz_base.npy"), &n);
    assert_true(n <= sizeof im[0].b);
    memcpy(im[0].b, b, n);
    im[0].n = n;
    free(b);
    static const uint8_t data[24] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                     13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24};
    mk_img(&im[1], 2, "{'shape': (3, 2), 'descr': '>i4', 'fortran_order': True}  \n", data, 24);
    mk_img(&im[2], 3, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": ()}\n", data, 4);
    mk_img(&im[3], 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 5), }\n", data, 0);
    *count = 4;
}

static void test_fuzz_truncation(void **state)
{
    (void)state;
    img_t im[4];
    int nb;
    fuzz_bases(im, &nb);
    const char *p = tpath("trunc.npy");
    for (int k = 0; k < nb; k++) {
        tsr_tensor_t t;
        char what[64];
        snprintf(what, sizeof what, "base %d", k);
        expect_ok(what, tsr_npy_parse_named(im[k].b, im[k].n, "base.npy", &t));
        tsr_tensor_free(&t);
        for (size_t len = 0; len < im[k].n; len++) {
            snprintf(what, sizeof what, "base %d cut to %zu bytes", k, len);
            /* A heap copy of exactly len bytes, so ASan catches any read past it. */
            uint8_t *b = malloc(len ? len : 1);
            memcpy(b, im[k].b, len);
            tsr_err_clear();
            int rc = tsr_npy_parse_named(b, len, "cut.npy", &t);
            free(b);
            /* The data length is exact, so every truncation is an error. */
            if (rc >= 0)
                fail_msg("%s: accepted", what);
            check_outcome(what, rc, &t, "cut.npy");
            /* And the same through a file. */
            put_file(p, im[k].b, len);
            rc = tsr_npy_read(p, &t);
            if (rc >= 0)
                fail_msg("%s (file): accepted", what);
            check_outcome(what, rc, &t, p);
        }
    }
    unlink(p);
}

static void test_fuzz_corruption(void **state)
{
    (void)state;
    static const char interesting[] = "{}():,'\" \n\t0123456789-LTrueFalse<>|=[]\\\x00\xff\x80";
    img_t im[4];
    int nb;
    fuzz_bases(im, &nb);
    rng_state = 0x9e3779b97f4a7c15ull;
    int accepted = 0, rejected = 0;
    for (int k = 0; k < nb; k++) {
        /* Header region: prefix + dict (the data bytes are all valid). */
        size_t hdr_end = im[k].n - (k == 0 ? 48 : k == 1 ? 24 : k == 2 ? 4 : 0);
        for (int iter = 0; iter < 20000; iter++) {
            img_t m = im[k];
            int nmut = 1 + (int)(rnd() % 4);
            for (int j = 0; j < nmut; j++) {
                /* Deletions may have shrunk the image below hdr_end. */
                size_t lim = hdr_end < m.n ? hdr_end : m.n;
                if (!lim)
                    break;
                size_t pos = (size_t)(rnd() % lim);
                uint64_t r = rnd();
                if (r % 8 == 0 && m.n + 1 < sizeof m.b) { /* insert a byte */
                    memmove(m.b + pos + 1, m.b + pos, m.n - pos);
                    m.b[pos] = interesting[(r >> 8) % (sizeof interesting - 1)];
                    m.n++;
                } else if (r % 8 == 1 && m.n > 1) { /* delete a byte */
                    memmove(m.b + pos, m.b + pos + 1, m.n - pos - 1);
                    m.n--;
                } else if (r % 8 < 5) {
                    m.b[pos] = interesting[(r >> 8) % (sizeof interesting - 1)];
                } else {
                    m.b[pos] = (uint8_t)(r >> 8);
                }
            }
            if (rnd() % 16 == 0) /* sometimes also a length change at the end */
                m.n = (size_t)(rnd() % (m.n + 1));
            uint8_t *b = malloc(m.n ? m.n : 1);
            memcpy(b, m.b, m.n);
            tsr_tensor_t t;
            char what[64];
            snprintf(what, sizeof what, "base %d corruption %d", k, iter);
            int rc = tsr_npy_parse_named(b, m.n, "fuzz.npy", &t);
            free(b);
            if (rc == TSR_OK)
                accepted++;
            else
                rejected++;
            check_outcome(what, rc, &t, "fuzz.npy");
        }
    }
    printf("corruption fuzz: %d accepted, %d rejected\n", accepted, rejected);
    assert_true(rejected > 0 && accepted > 0);
}

/* Headers assembled from random tokens, to reach deep parser states that
 * byte flips of one valid header rarely do. */
static void test_fuzz_tokens(void **state)
{
    (void)state;
    static const char *toks[] = {
        "{", "}", "(", ")", ",", ":", " ", "\n", "'descr'", "'fortran_order'", "'shape'",
        "'<i4'", "'|u1'", "'>f4'", "'<i2'", "'i1'", "'<f8'", "True", "False", "0", "1", "3",
        "7L", "-2", "99999999999999999999", "4294967296", "'", "\"", "[", "]", "\\", "'x'",
        "\"descr\"", "(2, 3)", "(4,)", "()", "'descr': '|i1', ", "'fortran_order': False, ",
        "'shape': (", "),", "}\n",
    };
    /* A valid header as tokens: half the iterations edit it a little. */
    static const char *skel[] = {"{", "'descr'", ":", "'<i4'", ",", "'fortran_order'", ":",
                                 "True", ",", "'shape'", ":", "(", "2", ",", "3", ")", ",", "}"};
    const int nskel = (int)(sizeof skel / sizeof skel[0]);
    const int ntoks = (int)(sizeof toks / sizeof toks[0]);
    static const uint8_t data[256];
    rng_state = 0x2545f4914f6cdd1dull;
    int accepted = 0;
    for (int iter = 0; iter < 30000; iter++) {
        const char *seq[64];
        int ns = 0;
        if (iter % 2) {
            for (int j = 0; j < nskel; j++)
                seq[ns++] = skel[j];
            for (int e = (int)(rnd() % 4); e > 0; e--) {
                int at = (int)(rnd() % (uint64_t)ns);
                uint64_t op = rnd() % 3;
                if (op == 0) /* replace */
                    seq[at] = toks[rnd() % (uint64_t)ntoks];
                else if (op == 1 && ns > 1) { /* delete */
                    memmove(seq + at, seq + at + 1, (size_t)(ns - at - 1) * sizeof seq[0]);
                    ns--;
                } else if (ns < 64) { /* insert */
                    memmove(seq + at + 1, seq + at, (size_t)(ns - at) * sizeof seq[0]);
                    seq[at] = toks[rnd() % (uint64_t)ntoks];
                    ns++;
                }
            }
        } else {
            if (rnd() % 2)
                seq[ns++] = "{";
            for (int j = (int)(rnd() % 24); j > 0; j--)
                seq[ns++] = toks[rnd() % (uint64_t)ntoks];
            if (rnd() % 2)
                seq[ns++] = "}";
        }
        char dict[2048];
        size_t n = 0;
        for (int j = 0; j < ns; j++)
            n += (size_t)snprintf(dict + n, sizeof dict - n, "%s", seq[j]);
        img_t im;
        /* Mostly the 24 bytes a (2, 3) int32 needs, so edits that keep the
         * header valid get as far as the data. */
        size_t nd = rnd() % 4 ? 24 : (size_t)(rnd() % 64);
        mk_img(&im, 1 + (int)(rnd() % 3), dict, data, nd);
        uint8_t *b = malloc(im.n);
        memcpy(b, im.b, im.n);
        tsr_tensor_t t;
        char what[64];
        snprintf(what, sizeof what, "token soup %d", iter);
        int rc = tsr_npy_parse_named(b, im.n, "soup.npy", &t);
        free(b);
        accepted += rc == TSR_OK;
        check_outcome(what, rc, &t, "soup.npy");
    }
    printf("token fuzz: %d of 30000 accepted\n", accepted);
}

/* A FIFO destination (the same case as -o /dev/null) is written in place and
 * stays a FIFO: the atomic write's rename replaced /dev/null with a regular
 * file when a test ran `tessera infer -o /dev/null` as root. The reader is
 * opened first, non-blocking, so the writer's open succeeds and a tensor
 * smaller than the pipe's buffer needs no concurrent drain. */
static void test_write_to_fifo(void **state)
{
    (void)state;
    tsr_tensor_t t;
    static const int64_t sh[] = {4, 6};
    make_tensor(&t, TSR_DT_INT16, 2, sh);
    const char *ref = tpath("fifo_ref.npy");
    expect_ok("reference file", tsr_npy_write(ref, &t));
    struct stat rs;
    assert_int_equal(stat(ref, &rs), 0);
    const char *p = tpath("out.fifo");
    unlink(p);
    assert_int_equal(mkfifo(p, 0600), 0);
    const int rd = open(p, O_RDONLY | O_NONBLOCK);
    assert_true(rd >= 0);
    expect_ok("write to a fifo", tsr_npy_write(p, &t));
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    if (!S_ISFIFO(st.st_mode))
        fail_msg("%s is no longer a FIFO after the write (replaced by a rename)", p);
    uint8_t got[4096], want[4096];
    const ssize_t n = read(rd, got, sizeof got);
    close(rd);
    FILE *f = fopen(ref, "rb");
    assert_non_null(f);
    const size_t m = fread(want, 1, sizeof want, f);
    fclose(f);
    assert_int_equal((size_t)rs.st_size, m);
    assert_int_equal(n, (ssize_t)m);
    assert_memory_equal(got, want, m);
    unlink(p);
    free(t.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_helpers),
        cmocka_unit_test(test_tensor_alloc_free),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_overwrite),
        cmocka_unit_test(test_header_variants),
        cmocka_unit_test(test_big_endian),
        cmocka_unit_test(test_fortran_order),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_header_limit),
        cmocka_unit_test(test_io_errors),
        cmocka_unit_test(test_atomic_write),
        cmocka_unit_test(test_write_to_fifo),
        cmocka_unit_test(test_numpy_to_tessera),
        cmocka_unit_test(test_tessera_to_numpy),
        cmocka_unit_test(test_fuzz_truncation),
        cmocka_unit_test(test_fuzz_corruption),
        cmocka_unit_test(test_fuzz_tokens),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
