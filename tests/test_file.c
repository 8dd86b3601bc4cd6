/*
 * test_file: bounded reading of input files (isa/tsr_file) and the readers
 * built on it. A FIFO must be refused without blocking (an alarm kills the
 * test if the open or a read waits), a device such as /dev/zero without
 * reading it, a file over the limit before anything is read (a sparse
 * 1 TiB file would take minutes and all memory otherwise), and a file that
 * shrinks or grows while read must be an error. The config loader, the
 * assembler and the .npy reader give the exact messages asserted here.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tsr_asm.h"
#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_file.h"
#include "tsr_npy.h"
#include "tsr_util.h"

static char g_dir[256];

static int group_setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/tsr_test_file_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tpath(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
    return p[k];
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f))
        fail_msg("cannot write %s", path);
}

static const char *make_fifo(const char *name)
{
    const char *p = tpath(name);
    unlink(p);
    if (mkfifo(p, 0600))
        fail_msg("mkfifo %s: %s", p, strerror(errno));
    return p;
}

/* The last error message must be exactly want (printf format). */
static void expect_msg(int rc, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void expect_msg(int rc, int code, const char *fmt, ...)
{
    char want[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    if (rc != code || strcmp(tsr_errmsg(), want))
        fail_msg("got %s \"%s\"\nwant %s \"%s\"", tsr_errname(rc), tsr_errmsg(), tsr_errname(code),
                 want);
}

/* ------------------------------------------------------------ tsr_file */

static void test_regular_file(void **state)
{
    (void)state;
    uint8_t want[3000];
    for (size_t i = 0; i < sizeof want; i++)
        want[i] = (uint8_t)(i * 7 + 1);
    const char *p = tpath("regular.dat");
    write_bytes(p, want, sizeof want);
    uint8_t *got = NULL;
    size_t n = 0;
    assert_int_equal(tsr_file_read(p, sizeof want, "test file", &got, &n), TSR_OK);
    assert_int_equal(n, sizeof want);
    assert_memory_equal(got, want, sizeof want);
    assert_int_equal(got[n], 0); /* NUL after the last byte */
    free(got);
    /* empty file: a buffer holding just the NUL */
    const char *e = tpath("empty.dat");
    write_bytes(e, "", 0);
    assert_int_equal(tsr_file_read(e, 0, "test file", &got, &n), TSR_OK);
    assert_int_equal(n, 0);
    assert_non_null(got);
    assert_int_equal(got[0], 0);
    free(got);
    /* reads at an offset */
    tsr_file_t f;
    uint8_t mid[10];
    assert_int_equal(tsr_file_open(&f, p, UINT64_MAX, "test file"), TSR_OK);
    assert_int_equal(f.size, sizeof want);
    assert_int_equal(tsr_file_read_at(&f, 1000, mid, sizeof mid, "middle"), TSR_OK);
    assert_memory_equal(mid, want + 1000, sizeof mid);
    assert_int_equal(tsr_file_check_end(&f), TSR_OK);
    tsr_file_close(&f);
    assert_int_equal(f.fd, -1);
    tsr_file_close(&f); /* twice is safe */
}

static void test_missing_and_directory(void **state)
{
    (void)state;
    tsr_file_t f;
    uint8_t *d = (uint8_t *)"x";
    size_t n = 5;
    const char *m = tpath("no-such-file");
    expect_msg(tsr_file_open(&f, m, 100, "test file"), TSR_EIO,
               "%s: cannot open test file: No such file or directory", m);
    assert_int_equal(f.sys_errno, ENOENT);
    assert_int_equal(f.fd, -1);
    expect_msg(tsr_file_read(m, 100, "test file", &d, &n), TSR_EIO,
               "%s: cannot open test file: No such file or directory", m);
    assert_null(d);
    assert_int_equal(n, 0);
    expect_msg(tsr_file_read(g_dir, 100, "test file", &d, &n), TSR_EIO,
               "%s: test file is a directory, not a regular file", g_dir);
    assert_null(d);
}

/* A FIFO with no writer: a blocking open would wait forever. */
static void test_fifo_refused_without_blocking(void **state)
{
    (void)state;
    const char *p = make_fifo("fifo");
    uint8_t *d = NULL;
    size_t n = 0;
    double t0 = tsr_now_s();
    alarm(20); /* SIGALRM kills the test if the reader blocks */
    expect_msg(tsr_file_read(p, 1 << 20, "test file", &d, &n), TSR_EIO,
               "%s: test file is a FIFO (named pipe), not a regular file", p);
    alarm(0);
    assert_null(d);
    if (tsr_now_s() - t0 > 2.0)
        fail_msg("refusing the FIFO took %.1f s", tsr_now_s() - t0);
}

static void test_device_refused(void **state)
{
    (void)state;
    uint8_t *d = NULL;
    size_t n = 0;
    alarm(20); /* reading /dev/zero never ends */
    expect_msg(tsr_file_read("/dev/zero", UINT64_MAX, "test file", &d, &n), TSR_EIO,
               "/dev/zero: test file is a character device, not a regular file");
    expect_msg(tsr_file_read("/dev/null", UINT64_MAX, "test file", &d, &n), TSR_EIO,
               "/dev/null: test file is a character device, not a regular file");
    alarm(0);
    assert_null(d);
}

/* Over the limit: refused from the size alone. The sparse 1 TiB file
 * cannot be allocated or read in the test's time. */
static void test_over_limit_refused_before_reading(void **state)
{
    (void)state;
    const char *p = tpath("limit.dat");
    write_bytes(p, "0123456789", 10);
    uint8_t *d = NULL;
    size_t n = 0;
    expect_msg(tsr_file_read(p, 9, "test file", &d, &n), TSR_EBOUNDS,
               "%s: test file is 10 bytes, more than the 9 allowed", p);
    assert_null(d);
    assert_int_equal(tsr_file_read(p, 10, "test file", &d, &n), TSR_OK); /* the limit itself is fine */
    free(d);

    const char *big = tpath("sparse.dat");
    int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    if (ftruncate(fd, 1ll << 40)) {
        close(fd);
        skip(); /* the file system has no sparse files */
    }
    close(fd);
    alarm(20);
    expect_msg(tsr_file_read(big, 1ull << 30, "test file", &d, &n), TSR_EBOUNDS,
               "%s: test file is 1099511627776 bytes, more than the 1073741824 allowed", big);
    alarm(0);
    assert_null(d);
    unlink(big);
}

static void test_shrink_and_grow(void **state)
{
    (void)state;
    const char *p = tpath("changing.dat");
    uint8_t buf[100];
    tsr_file_t f;
    memset(buf, 0x5a, sizeof buf);
    write_bytes(p, buf, sizeof buf);
    /* shrinks after open: a short read is an error, not a shorter result */
    assert_int_equal(tsr_file_open(&f, p, 1000, "test file"), TSR_OK);
    assert_int_equal(truncate(p, 40), 0);
    expect_msg(tsr_file_read_at(&f, 0, buf, (size_t)f.size, "contents"), TSR_EIO,
               "%s: test file shrank while reading its contents (40 of 100 bytes)", p);
    tsr_file_close(&f);
    /* grows after open: reading the size seen at open is not the whole file */
    assert_int_equal(tsr_file_open(&f, p, 1000, "test file"), TSR_OK);
    FILE *a = fopen(p, "ab");
    assert_non_null(a);
    fputs("more", a);
    fclose(a);
    assert_int_equal(tsr_file_read_at(&f, 0, buf, (size_t)f.size, "contents"), TSR_OK);
    expect_msg(tsr_file_check_end(&f), TSR_EIO,
               "%s: test file grew while being read (was 40 bytes)", p);
    tsr_file_close(&f);
}

/* ------------------------------------------------- the readers built on it */

static void test_config_load_messages(void **state)
{
    (void)state;
    tsr_config_t c;
    const char *fifo = make_fifo("cfg-fifo.json");
    alarm(20);
    expect_msg(tsr_config_load(fifo, &c), TSR_EIO,
               "%s: config file is a FIFO (named pipe), not a regular file", fifo);
    expect_msg(tsr_config_load("/dev/zero", &c), TSR_EIO,
               "/dev/zero: config file is a character device, not a regular file");
    alarm(0);
    const char *m = tpath("missing.json");
    expect_msg(tsr_config_load(m, &c), TSR_EIO,
               "%s: no such config file, nor a preset (default, tiny, large, ultra96, zcu104, u55c)", m);
    const char *big = tpath("big.json");
    int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, TSR_CONFIG_MAX_FILE + 1), 0);
    close(fd);
    expect_msg(tsr_config_load(big, &c), TSR_EBOUNDS,
               "%s: config file is %u bytes, more than the %u allowed", big,
               TSR_CONFIG_MAX_FILE + 1, TSR_CONFIG_MAX_FILE);
    const char *nul = tpath("nul.json");
    write_bytes(nul, "{\0}", 3);
    expect_msg(tsr_config_load(nul, &c), TSR_ECONFIG,
               "%s: malformed JSON: file contains a NUL byte", nul);
    /* a config error carries its file name once */
    const char *bad = tpath("bad.json");
    write_bytes(bad, "{\"LOG_BLOCK\": 4}", 16);
    expect_msg(tsr_config_load(bad, &c), TSR_ECONFIG,
               "%s: missing key LOG_INP_WIDTH (allowed [3, 4])", bad);
}

static void test_asm_file_messages(void **state)
{
    (void)state;
    tsr_config_t c;
    tsr_program_t p;
    assert_int_equal(tsr_config_load("default", &c), TSR_OK);
    const char *fifo = make_fifo("prog-fifo.s");
    alarm(20);
    expect_msg(tsr_asm_parse_file(&c, fifo, &p), TSR_EIO,
               "%s: assembly file is a FIFO (named pipe), not a regular file", fifo);
    expect_msg(tsr_asm_parse_file(&c, "/dev/zero", &p), TSR_EIO,
               "/dev/zero: assembly file is a character device, not a regular file");
    alarm(0);
    assert_int_equal(p.ninsns, 0);
    const char *s = tpath("prog.s");
    write_bytes(s, "finish\nfrob\n", 12);
    expect_msg(tsr_asm_parse_file(&c, s, &p), TSR_EPARSE, "%s:2: unknown mnemonic (frob)", s);
    write_bytes(s, "finish\n\0", 8);
    expect_msg(tsr_asm_parse_file(&c, s, &p), TSR_EPARSE, "%s:2: file contains a NUL byte", s);
}

static void test_npy_read_refuses(void **state)
{
    (void)state;
    tsr_tensor_t t;
    const char *fifo = make_fifo("x-fifo.npy");
    alarm(20);
    expect_msg(tsr_npy_read(fifo, &t), TSR_EIO,
               "%s: .npy file is a FIFO (named pipe), not a regular file", fifo);
    expect_msg(tsr_npy_read("/dev/zero", &t), TSR_EIO,
               "/dev/zero: .npy file is a character device, not a regular file");
    alarm(0);
    assert_null(t.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regular_file),
        cmocka_unit_test(test_missing_and_directory),
        cmocka_unit_test(test_fifo_refused_without_blocking),
        cmocka_unit_test(test_device_refused),
        cmocka_unit_test(test_over_limit_refused_before_reading),
        cmocka_unit_test(test_shrink_and_grow),
        cmocka_unit_test(test_config_load_messages),
        cmocka_unit_test(test_asm_file_messages),
        cmocka_unit_test(test_npy_read_refuses),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
