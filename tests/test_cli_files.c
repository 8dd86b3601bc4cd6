/*
 * test_cli_files: the CLI on hostile input paths and its error messages.
 * `tessera asm /dev/zero`, `tessera disasm FIFO` and a `.buffer ... file
 * /dev/zero` must fail at once (each command runs under `timeout`: a hang
 * shows as exit status 124) with exactly one clear message; an absurd
 * `.buffer` size is refused by the device memory check before any host
 * memory is allocated; every message carries its context once (no
 * "buffer z: buffer z:", no "p.s: p.s:2:"); and `config show --batch`
 * answers a bad line with that line's error and goes on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char g_dir[256];
static char g_err[8192];

static int group_setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/tsr_test_cli_files_XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    char p[512];
    snprintf(p, sizeof p, "%s/fifo", g_dir);
    return mkfifo(p, 0600);
}

static int group_teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_text(const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f))
        fail_msg("cannot write %s", p);
}

/* Run `tessera ARGS` in g_dir under a 60 s timeout; returns the exit
 * status (124: it hung), stderr in g_err. */
static int cli(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int cli(const char *fmt, ...)
{
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd %s && timeout 60 %s %s >/dev/null 2>.stderr", g_dir, TSR_CLI,
             args);
    int st = system(cmd);
    snprintf(cmd, sizeof cmd, "%s/.stderr", g_dir);
    g_err[0] = '\0';
    FILE *f = fopen(cmd, "r");
    if (f) {
        size_t k = fread(g_err, 1, sizeof g_err - 1, f);
        g_err[k] = '\0';
        fclose(f);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* `tessera ARGS` must exit 1 with stderr exactly "tessera: error: MSG\n". */
static void expect_error(const char *msg, const char *args)
{
    int st = cli("%s", args);
    char want[2048];
    snprintf(want, sizeof want, "tessera: error: %s\n", msg);
    if (st == 124)
        fail_msg("tessera %s: hung (killed after 60 s)", args);
    if (st != 1 || strcmp(g_err, want))
        fail_msg("tessera %s: exit %d, stderr\n  \"%s\"\nwant exit 1, stderr\n  \"%s\"", args, st,
                 g_err, want);
}

static void test_asm_disasm_special_files(void **state)
{
    (void)state;
    expect_error("/dev/zero: assembly file is a character device, not a regular file",
                 "asm /dev/zero -o out.bin");
    expect_error("fifo: assembly file is a FIFO (named pipe), not a regular file", "asm fifo -o out.bin");
    expect_error("fifo: instruction stream is a FIFO (named pipe), not a regular file", "disasm fifo");
    expect_error("/dev/zero: instruction stream is a character device, not a regular file",
                 "disasm /dev/zero");
    expect_error("fifo: assembly file is a FIFO (named pipe), not a regular file", "verify fifo");
    expect_error("fifo: config file is a FIFO (named pipe), not a regular file", "config show fifo");
    expect_error("/dev/zero: config file is a character device, not a regular file",
                 "asm --config /dev/zero nothing.s");
}

static void test_buffer_file_errors(void **state)
{
    (void)state;
    write_text("zero.s", ".buffer z 64 file /dev/zero\nfinish\n");
    expect_error("buffer z: /dev/zero: buffer file is a character device, not a regular file",
                 "run -q zero.s");
    write_text("fifo.s", ".buffer z 64 file fifo\nfinish\n");
    expect_error("buffer z: fifo: buffer file is a FIFO (named pipe), not a regular file",
                 "run -q fifo.s");
    write_text("data.bin", "0123456789");
    write_text("small.s", ".buffer z 8 file data.bin\nfinish\n");
    expect_error("buffer z: data.bin: buffer file is 10 bytes, more than the 8 allowed",
                 "run -q small.s");
    write_text("missing.s", ".buffer a 64\n.buffer z 64 file nosuch.bin\nfinish\n");
    expect_error("buffer z: nosuch.bin: cannot open buffer file: No such file or directory",
                 "run -q missing.s");
    /* the file fits: its bytes, then zeros */
    write_text("fits.s", ".buffer z 16 file data.bin\n.output z\nfinish\n");
    assert_int_equal(cli("run -q fits.s"), 0);
    char p[512];
    uint8_t got[32];
    snprintf(p, sizeof p, "%s/z.bin", g_dir);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    size_t n = fread(got, 1, sizeof got, f);
    fclose(f);
    assert_int_equal(n, 16);
    assert_memory_equal(got, "0123456789\0\0\0\0\0\0", 16);
}

/* 1 TiB: the device (1 GiB of DRAM by default) refuses it before the host
 * copy is allocated (allocating first gave "out of memory" at best). */
static void test_huge_buffer_refused_by_device(void **state)
{
    (void)state;
    write_text("huge.s", ".buffer small 64\n.buffer z 0x10000000000\nfinish\n");
    expect_error("buffer z: DRAM buffer [0x101000, 0x10000101000) is outside device memory "
                 "[0x1000, 0x40001000)",
                 "run -q huge.s");
    /* one byte more than the device: also refused by the device check */
    write_text("over.s", ".buffer z 0x40000001 @0x1000\nfinish\n");
    expect_error("buffer z: DRAM buffer [0x1000, 0x40001040) is outside device memory "
                 "[0x1000, 0x40001000)",
                 "run -q over.s");
}

static void test_messages_name_context_once(void **state)
{
    (void)state;
    write_text("bad.s", ".buffer z 64\nfrob\n");
    expect_error("bad.s:2: unknown mnemonic (frob)", "verify bad.s");
    expect_error("bad.s:2: unknown mnemonic (frob)", "asm bad.s -o out.bin");
    expect_error("bad.s:2: unknown mnemonic (frob)", "run bad.s");
    write_text("bad.json", "{\"LOG_BLOCK\": 4}");
    expect_error("bad.json: missing key LOG_INP_WIDTH (allowed [3, 4])", "verify --config bad.json bad.s");
    expect_error("--config bad.json: missing key LOG_INP_WIDTH (allowed [3, 4])",
                 "op dense -x x.npy -w w.npy -o y.npy --config bad.json");
    expect_error("--config nosuch: no such config file, nor a preset (default, tiny, large, ultra96, zcu104, u55c)",
                 "op dense -x x.npy -w w.npy -o y.npy --config nosuch");
    /* a verifier error is named by the program once (the verifier's own
     * wording is not this test's business) */
    write_text("oob.s", ".buffer z 64\nload inp sram=0 dram=z y=1 x=1000 stride=1000\nfinish\n");
    assert_int_equal(cli("verify oob.s"), 1);
    if (strncmp(g_err, "tessera: error: oob.s: insn #0 ", 31) || strstr(g_err + 22, "oob.s"))
        fail_msg("verify oob.s: stderr \"%s\", want \"tessera: error: oob.s: insn #0 ...\" "
                 "naming oob.s once",
                 g_err);
}

/* `tessera config show --batch`: each bad line (malformed JSON, an unknown key, a 2 MiB line,
 * an empty line, invalid UTF-8, a NUL byte) is that line's error, and the good line after it
 * still gets its answer (no crash, no stop); stdout has exactly one line per input line. */
static void test_config_batch_bad_lines(void **state)
{
    (void)state;
    static const char *good = "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": 3, \"LOG_WGT_WIDTH\": 3, "
                              "\"LOG_ACC_WIDTH\": 5, \"LOG_BATCH\": 0, \"LOG_BLOCK\": 2, "
                              "\"LOG_UOP_BUFF_SIZE\": 10, \"LOG_INP_BUFF_SIZE\": 9, "
                              "\"LOG_WGT_BUFF_SIZE\": 10, \"LOG_ACC_BUFF_SIZE\": 11, \"CLOCK_MHZ\": 50}";
    static const char *answer =
        "{\"buffers\":{\"uop\":1024,\"inp\":512,\"wgt\":1024,\"acc\":2048,\"out\":512},\"macs\":16,"
        "\"bus_bits\":64,\"clock_mhz\":50}";
    char p[512];
    snprintf(p, sizeof p, "%s/batch.jsonl", g_dir);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    fprintf(f, "%s\n{\"LOG_BLOCK\": 4\n%s\n", good, good);                  /* 1-3 */
    fprintf(f, "{\"LOG_BLOCK\": 2, \"FOO\": 1}\n%s\n", good);               /* 4-5 */
    fputs("{\"HW_VER\": \"", f);                                           /* 6: 2 MiB */
    for (int i = 0; i < (2 << 20) - 16; i++)
        fputc('x', f);
    fprintf(f, "\"}\n%s\n", good);                                          /* 7 */
    fprintf(f, "\n%s\n", good);                                             /* 8-9 */
    fprintf(f, "{\"HW_VER\": \"caf\xe9\"}\n%s\n", good);                   /* 10-11 */
    fputs("{\"A\": 1}", f);                                                  /* 12: a NUL */
    fputc('\0', f);
    fprintf(f, "\n%s", good); /* 13, no final newline: still a line */
    assert_int_equal(fclose(f), 0);

    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd %s && timeout 60 %s config show --batch < batch.jsonl > batch.out 2>.stderr",
             g_dir, TSR_CLI);
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    const char *want[] = {
        answer,
        "{\"error\":\"line 2: malformed JSON near line 1\"}",
        answer,
        "{\"error\":\"line 4: unknown key \\\"FOO\\\"\"}",
        answer,
        "{\"error\":\"line 6: the config line is 2097150 bytes, more than the 1048576 allowed\"}",
        answer,
        "{\"error\":\"line 8: empty line (give one JSON config per line)\"}",
        answer,
        "{\"error\":\"line 10: not UTF-8 text (byte 16)\"}",
        answer,
        "{\"error\":\"line 12: malformed JSON: line contains a NUL byte\"}",
        answer,
    };
    snprintf(p, sizeof p, "%s/batch.out", g_dir);
    f = fopen(p, "r");
    assert_non_null(f);
    char line[4096];
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (n < sizeof want / sizeof want[0] && strcmp(line, want[n]))
            fail_msg("config show --batch, answer %zu:\n  %s\nwant\n  %s", n + 1, line, want[n]);
        n++;
    }
    fclose(f);
    assert_int_equal(n, sizeof want / sizeof want[0]);

    /* --name names every line's config as `config show FILE` names the file */
    write_text("named.jsonl", "{\"LOG_BLOCK\": 2, \"FOO\": 1}\n");
    snprintf(cmd, sizeof cmd, "cd %s && %s config show --batch --name point < named.jsonl > named.out", g_dir,
             TSR_CLI);
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof p, "%s/named.out", g_dir);
    f = fopen(p, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_string_equal(line, "{\"error\":\"point: unknown key \\\"FOO\\\"\"}\n");
    /* a CONFIG or -o with --batch, --batch on another subcommand: usage errors */
    assert_int_equal(cli("config show --batch tiny"), 2);
    assert_int_equal(cli("config emit-sv --batch"), 2);
    assert_int_equal(cli("config show --name x tiny"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asm_disasm_special_files),
        cmocka_unit_test(test_buffer_file_errors),
        cmocka_unit_test(test_huge_buffer_refused_by_device),
        cmocka_unit_test(test_messages_name_context_once),
        cmocka_unit_test(test_config_batch_bad_lines),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
