/*
 * test_emit: the generated artifacts. The checked-in field reference must
 * equal what the field table generates now (so docs cannot drift), and the
 * SystemVerilog package emitted for every preset must be accepted by
 * Verilator (lint -Wall) and yosys, with constants matching values
 * computed by hand here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_emit.h"
#include "tsr_error.h"
#include "tsr_rtl.h"

static char tmpdir[256];

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tsr_test_emit_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static int run(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
    return rc;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n)
        buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_fields_doc_is_current(void **state)
{
    (void)state;
    char gen[512];
    snprintf(gen, sizeof gen, "%s/fields.md", tmpdir);
    assert_int_equal(run("%s isa doc --config default -o %s", TSR_CLI, gen), 0);
    char *want = slurp(gen);
    char *have = slurp(TSR_SOURCE_DIR "/isa/fields.md");
    assert_non_null(want);
    assert_non_null(have);
    if (strcmp(want, have)) {
        int line = 1;
        size_t i = 0;
        while (want[i] && want[i] == have[i])
            line += want[i++] == '\n';
        fail_msg("isa/fields.md is stale from line %d; regenerate with "
                 "`build/tessera isa doc --config default -o isa/fields.md`",
                 line);
    }
    free(want);
    free(have);
}

/* Expected constants, computed by hand from the preset files. */
static void expect_const(const char *sv, const char *name, unsigned long want)
{
    char pat[128];
    snprintf(pat, sizeof pat, " %s = ", name);
    const char *p = strstr(sv, pat);
    if (!p)
        fail_msg("constant %s missing from the package", name);
    unsigned long got = strtoul(p + strlen(pat), NULL, 10);
    if (got != want)
        fail_msg("%s = %lu, expected %lu", name, got, want);
}

static void check_preset(const char *preset)
{
    char pkg[512], top[512];
    /* Verilator wants file names to match the unit names. */
    assert_int_equal(run("mkdir -p %s/%s", tmpdir, preset), 0);
    snprintf(pkg, sizeof pkg, "%s/%s/tsr_pkg.sv", tmpdir, preset);
    snprintf(top, sizeof top, "%s/%s/top.sv", tmpdir, preset);
    assert_int_equal(run("%s config emit-sv %s -o %s", TSR_CLI, preset, pkg), 0);
    /* A module that uses the package the way RTL will: qualified names in
     * port widths and part-selects (no import: yosys 0.23 lacks it). */
    FILE *f = fopen(top, "w");
    assert_non_null(f);
    fprintf(f,
            "module top (\n"
            "  input  logic [tsr_pkg::INSN_BITS-1:0] insn_i,\n"
            "  output logic [tsr_pkg::SRAM_BASE_BITS-1:0] sram_base_o,\n"
            "  output logic [2:0] opcode_o\n"
            ");\n"
            "  assign sram_base_o = insn_i[tsr_pkg::MEM_SRAM_BASE_LSB +: tsr_pkg::MEM_SRAM_BASE_W];\n"
            "  assign opcode_o = insn_i[tsr_pkg::MEM_OPCODE_LSB +: 3];\n"
            "endmodule\n");
    fclose(f);
    assert_int_equal(run("verilator --lint-only -Wall -Wno-UNUSEDSIGNAL -Wno-UNUSEDPARAM %s %s --top-module top",
                         pkg, top), 0);
    assert_int_equal(run("yosys -q -p 'read_verilog -sv %s %s; hierarchy -top top; proc' >/dev/null", pkg,
                         top), 0);
    assert_int_equal(run("iverilog -g2012 -o %s.vvp %s %s", top, pkg, top), 0);
}

static void test_sv_package_default(void **state)
{
    (void)state;
    check_preset("default");
    char path[512];
    snprintf(path, sizeof path, "%s/default/tsr_pkg.sv", tmpdir);
    char *sv = slurp(path);
    assert_non_null(sv);
    expect_const(sv, "BLOCK_IN", 16);
    expect_const(sv, "BLOCK_OUT", 16);
    expect_const(sv, "ACC_DEPTH", 2048);   /* 128 KiB / (16 x 4 B) */
    expect_const(sv, "WGT_DEPTH", 1024);   /* 256 KiB / (16 x 16 B) */
    expect_const(sv, "UOP_DEPTH", 8192);   /* 32 KiB / 4 B */
    expect_const(sv, "INP_DEPTH", 2048);   /* 32 KiB / 16 B */
    expect_const(sv, "MEM_SRAM_BASE_LSB", 10);
    expect_const(sv, "MEM_SRAM_BASE_W", 13);
    expect_const(sv, "GEMM_UOP_BGN_LSB", 8);
    expect_const(sv, "ALU_IMM_W", 16);
    expect_const(sv, "DRAM_BUS_WIDTH", 64);
    free(sv);
}

static void test_sv_package_tiny(void **state)
{
    (void)state;
    check_preset("tiny");
    char path[512];
    snprintf(path, sizeof path, "%s/tiny/tsr_pkg.sv", tmpdir);
    char *sv = slurp(path);
    assert_non_null(sv);
    expect_const(sv, "BLOCK_IN", 4);
    expect_const(sv, "ACC_DEPTH", 128);    /* 2 KiB / (4 x 4 B) */
    expect_const(sv, "UOP_DEPTH", 256);    /* 1 KiB / 4 B */
    expect_const(sv, "MEM_SRAM_BASE_W", 8);/* uop index is the widest: 8 bits */
    free(sv);
}

static void test_sv_package_large(void **state)
{
    (void)state;
    check_preset("large");
}

static void test_cli_bad_config_names_key(void **state)
{
    (void)state;
    char cfg[512], out[512];
    snprintf(cfg, sizeof cfg, "%s/bad.json", tmpdir);
    snprintf(out, sizeof out, "%s/bad.txt", tmpdir);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fputs("{\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":9,"
          "\"LOG_BLOCK\":4,\"LOG_UOP_BUFF_SIZE\":15,\"LOG_INP_BUFF_SIZE\":15,"
          "\"LOG_WGT_BUFF_SIZE\":18,\"LOG_ACC_BUFF_SIZE\":17}",
          f);
    fclose(f);
    int rc = run("%s config show %s 2>%s", TSR_CLI, cfg, out);
    assert_int_not_equal(rc, 0);
    char *msg = slurp(out);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "LOG_BATCH"));
    assert_non_null(strstr(msg, "[0, 4]"));
    free(msg);
}

/* ACT_LUT > 0: the RTL has no activation table unit, so every way an RTL
 * model is built refuses the config with one line: the SV package
 * (tsr_emit_sv, which synthesis, testbenches and the FPGA flows take from
 * `tessera config emit-sv`), the rtl backend's model build and the driver's
 * rtl device. The same config without the key emits as before. */
static void test_rtl_refuses_act_lut(void **state)
{
    (void)state;
    /* the serial core has no activation table unit: refused everywhere */
    static const char *const want = "ACT_LUT with SERIAL_CORE: the serial core has no activation table unit";
    const char *json = "{\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":0,"
                       "\"LOG_BLOCK\":2,\"LOG_UOP_BUFF_SIZE\":10,\"LOG_INP_BUFF_SIZE\":9,"
                       "\"LOG_WGT_BUFF_SIZE\":10,\"LOG_ACC_BUFF_SIZE\":11,\"SERIAL_CORE\":1,\"ACT_LUT\":2}";
    tsr_config_t c;
    assert_int_equal(tsr_config_parse(json, "lut", &c), TSR_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(tsr_emit_sv(&c, "lut", f), TSR_ECONFIG);
    assert_non_null(strstr(tsr_errmsg(), want));
    fclose(f);
    assert_int_equal(len, 0); /* nothing written */
    free(buf);
    tsr_rtl_t *r = NULL;
    assert_int_equal(tsr_rtl_create(&c, NULL, NULL, &r), TSR_ECONFIG);
    assert_null(r);
    assert_non_null(strstr(tsr_errmsg(), want));
    tsr_device_t *dev = NULL;
    assert_int_not_equal(tsr_device_open("rtl", &c, NULL, &dev), TSR_OK);
    assert_null(dev);
    assert_non_null(strstr(tsr_errmsg(), want));
    /* the CLI: nonzero exit, that line */
    char cfg[300], out[300];
    snprintf(cfg, sizeof cfg, "%s/lut.json", tmpdir);
    snprintf(out, sizeof out, "%s/lut.txt", tmpdir);
    FILE *cf = fopen(cfg, "w");
    assert_non_null(cf);
    fputs(json, cf);
    fclose(cf);
    assert_int_not_equal(run("%s config emit-sv %s >/dev/null 2>%s", TSR_CLI, cfg, out), 0);
    char *msg = slurp(out);
    assert_non_null(msg);
    assert_non_null(strstr(msg, want));
    free(msg);
    /* ... and -o FILE untouched (it used to be emptied before the refusal) */
    char sv[300];
    snprintf(sv, sizeof sv, "%s/keep.sv", tmpdir);
    FILE *kf = fopen(sv, "w");
    assert_non_null(kf);
    fputs("keep\n", kf);
    fclose(kf);
    assert_int_not_equal(run("%s config emit-sv %s -o %s >/dev/null 2>&1", TSR_CLI, cfg, sv), 0);
    msg = slurp(sv);
    assert_non_null(msg);
    assert_string_equal(msg, "keep\n");
    free(msg);
    /* the pipelined core has the unit: emitted, with the key and op 10 */
    c.serial_core = 0;
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(tsr_emit_sv(&c, "lut", f), TSR_OK);
    fclose(f);
    assert_true(len > 0);
    expect_const(buf, "ACT_LUT", 2);
    expect_const(buf, "SERIAL_CORE", 0);
    assert_non_null(strstr(buf, "ALU_OPS_MASK = 16'h5ff")); /* ops 0..8 and lut (10) */
    free(buf);
    /* without the key: emitted, no table unit */
    c.act_lut = 0;
    c.serial_core = 1;
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(tsr_emit_sv(&c, "lut0", f), TSR_OK);
    fclose(f);
    assert_true(len > 0 && strstr(buf, "MEM_LUT = 6") && strstr(buf, "ALU_LUT = 10"));
    expect_const(buf, "ACT_LUT", 0);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_doc_is_current),
        cmocka_unit_test(test_sv_package_default),
        cmocka_unit_test(test_sv_package_tiny),
        cmocka_unit_test(test_sv_package_large),
        cmocka_unit_test(test_cli_bad_config_names_key),
        cmocka_unit_test(test_rtl_refuses_act_lut),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
