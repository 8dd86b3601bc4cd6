/*
 * test_config: configuration parsing and derivation (isa/tsr_config.c).
 *
 * Every expected number here is computed by hand from the key values (row
 * bytes = lanes x bits / 8, depth = buffer bytes / row bytes), never taken
 * from the code under test. Error cases check the code and that the message
 * names the key (and, for ranges, the allowed "[lo, hi]"), because the
 * message is what an architect editing a config actually sees.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tsr_board.h"
#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_strsafe.h"

/* ---- JSON builder: a base key set with per-test overrides ---- */

typedef struct {
    const char *key;
    const char *val; /* raw JSON text; NULL = remove the key */
} kv_t;

/* configs/default.json as VTA ships it (without the Tessera keys). */
static const kv_t vta_default[] = {
    {"TARGET", "\"pynq\""},     {"HW_VER", "\"0.0.2\""},   {"LOG_INP_WIDTH", "3"},
    {"LOG_WGT_WIDTH", "3"},     {"LOG_ACC_WIDTH", "5"},    {"LOG_BATCH", "0"},
    {"LOG_BLOCK", "4"},         {"LOG_UOP_BUFF_SIZE", "15"}, {"LOG_INP_BUFF_SIZE", "15"},
    {"LOG_WGT_BUFF_SIZE", "18"}, {"LOG_ACC_BUFF_SIZE", "17"}, {NULL, NULL},
};

static char json_buf[4096];

/* Base keys, each replaced/removed by an override of the same name; overrides
 * naming keys not in the base are appended. ovr ends with {NULL, NULL}. */
static const char *mkjson(const kv_t *base, const kv_t *ovr)
{
    size_t n = 0;
    n += (size_t)snprintf(json_buf + n, sizeof json_buf - n, "{");
    int first = 1;
    for (const kv_t *b = base; b->key; b++) {
        const char *val = b->val;
        for (const kv_t *o = ovr; o && o->key; o++)
            if (!strcmp(o->key, b->key))
                val = o->val;
        if (!val)
            continue;
        n += (size_t)snprintf(json_buf + n, sizeof json_buf - n, "%s\n  \"%s\": %s",
                              first ? "" : ",", b->key, val);
        first = 0;
    }
    for (const kv_t *o = ovr; o && o->key; o++) {
        int in_base = 0;
        for (const kv_t *b = base; b->key; b++)
            in_base |= !strcmp(o->key, b->key);
        if (in_base || !o->val)
            continue;
        n += (size_t)snprintf(json_buf + n, sizeof json_buf - n, "%s\n  \"%s\": %s",
                              first ? "" : ",", o->key, o->val);
        first = 0;
    }
    snprintf(json_buf + n, sizeof json_buf - n, "\n}\n");
    return json_buf;
}

/* Parse default-with-overrides; the single override form used by most tests. */
static int parse1(const char *key, const char *val, tsr_config_t *cfg)
{
    kv_t ovr[] = {{key, val}, {NULL, NULL}};
    tsr_err_clear();
    return tsr_config_parse(mkjson(vta_default, ovr), "testcfg", cfg);
}

static void expect_has(const char *what, const char *needle)
{
    if (!strstr(tsr_errmsg(), needle))
        fail_msg("%s: message \"%s\" does not contain \"%s\"", what, tsr_errmsg(), needle);
}

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

/* ---- derived values, by hand ---- */

typedef struct {
    int batch, block_in, block_out;
    uint32_t inp_bytes, wgt_bytes, acc_bytes, acc8_bytes, out_bytes, uop_bytes;
    uint32_t uop_depth, inp_depth, wgt_depth, acc_depth, out_depth;
    int uop_idx, inp_idx, wgt_idx, acc_idx;
    int uop_dst, uop_src, uop_wgt, sram_base_bits;
    uint64_t out_buff_size, macs;
    uint32_t lut_depth; /* activation tables (ACT_LUT) */
} derived_t;

#define CHECK_EQ(field, got, want)                                                                 \
    do {                                                                                           \
        if ((long long)(got) != (long long)(want))                                                 \
            fail_msg("%s: %s = %lld, want %lld", what, field, (long long)(got),                    \
                     (long long)(want));                                                           \
    } while (0)

static void check_derived(const char *what, const tsr_config_t *c, const derived_t *d)
{
    CHECK_EQ("batch", c->batch, d->batch);
    CHECK_EQ("block_in", c->block_in, d->block_in);
    CHECK_EQ("block_out", c->block_out, d->block_out);
    CHECK_EQ("inp_bytes", c->inp_bytes, d->inp_bytes);
    CHECK_EQ("wgt_bytes", c->wgt_bytes, d->wgt_bytes);
    CHECK_EQ("acc_bytes", c->acc_bytes, d->acc_bytes);
    CHECK_EQ("acc8_bytes", c->acc8_bytes, d->acc8_bytes);
    CHECK_EQ("out_bytes", c->out_bytes, d->out_bytes);
    CHECK_EQ("uop_bytes", c->uop_bytes, d->uop_bytes);
    CHECK_EQ("uop_depth", c->uop_depth, d->uop_depth);
    CHECK_EQ("inp_depth", c->inp_depth, d->inp_depth);
    CHECK_EQ("wgt_depth", c->wgt_depth, d->wgt_depth);
    CHECK_EQ("acc_depth", c->acc_depth, d->acc_depth);
    CHECK_EQ("out_depth", c->out_depth, d->out_depth);
    CHECK_EQ("uop_idx_bits", c->uop_idx_bits, d->uop_idx);
    CHECK_EQ("inp_idx_bits", c->inp_idx_bits, d->inp_idx);
    CHECK_EQ("wgt_idx_bits", c->wgt_idx_bits, d->wgt_idx);
    CHECK_EQ("acc_idx_bits", c->acc_idx_bits, d->acc_idx);
    CHECK_EQ("uop_dst_bits", c->uop_dst_bits, d->uop_dst);
    CHECK_EQ("uop_src_bits", c->uop_src_bits, d->uop_src);
    CHECK_EQ("uop_wgt_bits", c->uop_wgt_bits, d->uop_wgt);
    CHECK_EQ("sram_base_bits", c->sram_base_bits, d->sram_base_bits);
    CHECK_EQ("out_buff_size", c->out_buff_size, d->out_buff_size);
    CHECK_EQ("macs_per_op", c->macs_per_op, d->macs);
    /* Accessors must agree with the struct and the memory-type table. */
    CHECK_EQ("elem_bytes(uop)", tsr_config_elem_bytes(c, TSR_MEM_UOP), d->uop_bytes);
    CHECK_EQ("elem_bytes(wgt)", tsr_config_elem_bytes(c, TSR_MEM_WGT), d->wgt_bytes);
    CHECK_EQ("elem_bytes(inp)", tsr_config_elem_bytes(c, TSR_MEM_INP), d->inp_bytes);
    CHECK_EQ("elem_bytes(acc)", tsr_config_elem_bytes(c, TSR_MEM_ACC), d->acc_bytes);
    CHECK_EQ("elem_bytes(out)", tsr_config_elem_bytes(c, TSR_MEM_OUT), d->out_bytes);
    CHECK_EQ("elem_bytes(acc8)", tsr_config_elem_bytes(c, TSR_MEM_ACC8), d->acc8_bytes);
    CHECK_EQ("elem_bytes(lut)", tsr_config_elem_bytes(c, TSR_MEM_LUT), d->lut_depth ? 256 : 0);
    CHECK_EQ("elem_bytes(7)", tsr_config_elem_bytes(c, 7), 0);
    CHECK_EQ("sram_depth(uop)", tsr_config_sram_depth(c, TSR_MEM_UOP), d->uop_depth);
    CHECK_EQ("sram_depth(wgt)", tsr_config_sram_depth(c, TSR_MEM_WGT), d->wgt_depth);
    CHECK_EQ("sram_depth(inp)", tsr_config_sram_depth(c, TSR_MEM_INP), d->inp_depth);
    CHECK_EQ("sram_depth(acc)", tsr_config_sram_depth(c, TSR_MEM_ACC), d->acc_depth);
    CHECK_EQ("sram_depth(out)", tsr_config_sram_depth(c, TSR_MEM_OUT), d->out_depth);
    CHECK_EQ("sram_depth(acc8)", tsr_config_sram_depth(c, TSR_MEM_ACC8), d->acc_depth);
    CHECK_EQ("sram_depth(lut)", tsr_config_sram_depth(c, TSR_MEM_LUT), d->lut_depth);
    CHECK_EQ("sram_depth(7)", tsr_config_sram_depth(c, 7), 0);
}

static void test_default_preset(void **state)
{
    (void)state;
    tsr_config_t c;
    const char *what = "default";
    expect_ok(what, tsr_config_load("default", &c));
    /* 1x16x16 int8: inp row 16*1 B = 16 B, 2^15/16 = 2048 rows (11 bits); wgt row 16*16 = 256 B,
     * 2^18/256 = 1024 (10 bits); acc row 16*4 = 64 B, 2^17/64 = 2048 (11 bits); uop 11+11+10 = 32
     * bits -> 4 B, 2^15/4 = 8192 (13 bits); out 16 B x 2048 rows = 32 KiB. */
    derived_t d = {1, 16, 16, 16, 256, 64, 16, 16, 4, 8192, 2048, 1024, 2048, 2048,
                   13, 11, 10, 11, 11, 11, 10, 13, 32768, 256, 2 /* ACT_LUT 2: two 256-byte tables */};
    check_derived(what, &c, &d);
    CHECK_EQ("inp_width", c.inp_width, 8);
    CHECK_EQ("wgt_width", c.wgt_width, 8);
    CHECK_EQ("acc_width", c.acc_width, 32);
    CHECK_EQ("out_width", c.out_width, 8);
    CHECK_EQ("dram_bus_width", c.dram_bus_width, 64);
    CHECK_EQ("clock_mhz", c.clock_mhz, 100);
    CHECK_EQ("cmd_queue_depth", c.cmd_queue_depth, 512);
    CHECK_EQ("dep_queue_depth", c.dep_queue_depth, 16);
    assert_string_equal(c.target, "pynq");
    assert_string_equal(c.hw_ver, "0.0.2");
}

static void test_tiny_preset(void **state)
{
    (void)state;
    tsr_config_t c;
    const char *what = "tiny";
    expect_ok(what, tsr_config_load("tiny", &c));
    /* 1x4x4: inp row 4 B, 2^9/4 = 128 (7); wgt row 16 B, 2^10/16 = 64 (6); acc row 16 B,
     * 2^11/16 = 128 (7); uop 7+7+6 = 20 bits -> 4 B, 2^10/4 = 256 (8); out 4 B x 128 = 512 B. */
    derived_t d = {1, 4, 4, 4, 16, 16, 4, 4, 4, 256, 128, 64, 128, 128,
                   8, 7, 6, 7, 7, 7, 6, 8, 512, 16, 0};
    check_derived(what, &c, &d);
    CHECK_EQ("cmd_queue_depth", c.cmd_queue_depth, 16);
    CHECK_EQ("dep_queue_depth", c.dep_queue_depth, 4);
    CHECK_EQ("clock_mhz", c.clock_mhz, 50);
}

static void test_large_preset(void **state)
{
    (void)state;
    tsr_config_t c;
    const char *what = "large";
    expect_ok(what, tsr_config_load("large", &c));
    /* 1x32x32: inp row 32 B, 2^16/32 = 2048 (11); wgt row 1024 B, 2^19/1024 = 512 (9); acc row
     * 128 B, 2^18/128 = 2048 (11); uop 11+11+9 = 31 bits -> 4 B, 8192 (13); out 32 B x 2048. */
    derived_t d = {1, 32, 32, 32, 1024, 128, 32, 32, 4, 8192, 2048, 512, 2048, 2048,
                   13, 11, 9, 11, 11, 11, 9, 13, 65536, 1024, 0};
    check_derived(what, &c, &d);
    CHECK_EQ("dram_bus_width", c.dram_bus_width, 128);
    CHECK_EQ("clock_mhz", c.clock_mhz, 250);
}

static void test_other_shapes(void **state)
{
    (void)state;
    tsr_config_t c;
    const char *what;

    what = "LOG_BATCH 2";
    expect_ok(what, parse1("LOG_BATCH", "2", &c));
    /* 4x16x16: inp row 64 B -> 512 (9); acc row 4*16*4 = 256 B -> 512 (9); wgt unchanged 1024
     * (10); uop 9+9+10 = 28 -> 4 B, 8192; out row 64 B x 512 = 32 KiB. */
    derived_t d1 = {4, 16, 16, 64, 256, 256, 64, 64, 4, 8192, 512, 1024, 512, 512,
                    13, 9, 10, 9, 9, 9, 10, 13, 32768, 1024, 0};
    check_derived(what, &c, &d1);

    what = "LOG_BLOCK_IN 4, LOG_BLOCK_OUT 5";
    {
        kv_t ovr[] = {{"LOG_BLOCK", NULL}, {"LOG_BLOCK_IN", "4"}, {"LOG_BLOCK_OUT", "5"},
                      {NULL, NULL}};
        expect_ok(what, tsr_config_parse(mkjson(vta_default, ovr), "t", &c));
    }
    /* BI 16, BO 32: inp 16 B -> 2048 (11); wgt 32*16 = 512 B -> 512 (9); acc 32*4 = 128 B ->
     * 1024 (10); uop 10+11+9 = 30 -> 4 B; out 32 B x 1024 = 32 KiB; sram_base 13 (uop). */
    derived_t d2 = {1, 16, 32, 16, 512, 128, 32, 32, 4, 8192, 2048, 512, 1024, 1024,
                    13, 11, 9, 10, 10, 11, 9, 13, 32768, 512, 0};
    check_derived(what, &c, &d2);

    what = "LOG_BLOCK with equal LOG_BLOCK_IN/OUT";
    {
        kv_t ovr[] = {{"LOG_BLOCK_IN", "4"}, {"LOG_BLOCK_OUT", "4"}, {NULL, NULL}};
        expect_ok(what, tsr_config_parse(mkjson(vta_default, ovr), "t", &c));
        CHECK_EQ("block_in", c.block_in, 16);
    }

    what = "8-byte uops";
    expect_ok(what, parse1("LOG_INP_BUFF_SIZE", "16", &c));
    /* inp 2^16/16 = 4096 (12): uop 11+12+10 = 33 bits -> 8 B, 2^15/8 = 4096 (12). */
    derived_t d3 = {1, 16, 16, 16, 256, 64, 16, 16, 8, 4096, 4096, 1024, 2048, 2048,
                    12, 12, 10, 11, 11, 12, 10, 12, 32768, 256, 0};
    check_derived(what, &c, &d3);

    what = "int16 inputs";
    {
        kv_t ovr[] = {{"LOG_INP_WIDTH", "4"}, {"LOG_WGT_WIDTH", "4"}, {NULL, NULL}};
        expect_ok(what, tsr_config_parse(mkjson(vta_default, ovr), "t", &c));
    }
    /* 16-bit inputs/weights, 32-bit acc (16+16 <= 32): inp row 32 B -> 1024 (10); wgt row 512 B
     * -> 512 (9); acc 2048 (11); out row 32 B (input width) x 2048 = 64 KiB; uop 11+11+9. */
    derived_t d4 = {1, 16, 16, 32, 512, 64, 16, 32, 4, 8192, 1024, 512, 2048, 2048,
                    13, 10, 9, 11, 11, 11, 9, 13, 65536, 256, 0};
    check_derived(what, &c, &d4);
    CHECK_EQ("out_width", c.out_width, 16);

    what = "int16 accumulators (8+8 <= 16)";
    {
        /* acc row 16*2 = 32 B; 2^16/32 = 2048 rows (with 2^17 it would be 4096 rows = 12 bits,
         * and ALU = 57 + 2U + 4A = 57 + 24 + 48 > 128 with U 12 from 8-byte uops). */
        kv_t ovr[] = {{"LOG_ACC_WIDTH", "4"}, {"LOG_ACC_BUFF_SIZE", "16"}, {NULL, NULL}};
        expect_ok(what, tsr_config_parse(mkjson(vta_default, ovr), "t", &c));
    }
    CHECK_EQ("acc_width", c.acc_width, 16);
    CHECK_EQ("acc_bytes", c.acc_bytes, 32);
    CHECK_EQ("acc_depth", c.acc_depth, 2048);
    CHECK_EQ("uop_bytes", c.uop_bytes, 4);

    what = "one-row input buffer (LOG_INP_BUFF_SIZE = log2 row bytes)";
    expect_ok(what, parse1("LOG_INP_BUFF_SIZE", "4", &c));
    CHECK_EQ("inp_depth", c.inp_depth, 1);
}

static void test_vta_optional_keys(void **state)
{
    (void)state;
    tsr_config_t c;
    const char *what = "LOG_OUT_WIDTH/LOG_OUT_BUFF_SIZE consistent";
    {
        /* out: 2048 rows x 16 B = 2^15. */
        kv_t ovr[] = {{"LOG_OUT_WIDTH", "3"}, {"LOG_OUT_BUFF_SIZE", "15"}, {NULL, NULL}};
        expect_ok(what, tsr_config_parse(mkjson(vta_default, ovr), "t", &c));
    }
    expect_code("LOG_OUT_WIDTH 4", parse1("LOG_OUT_WIDTH", "4", &c), TSR_ECONFIG);
    expect_has("LOG_OUT_WIDTH 4", "LOG_OUT_WIDTH");
    expect_code("LOG_OUT_BUFF_SIZE 16", parse1("LOG_OUT_BUFF_SIZE", "16", &c), TSR_ECONFIG);
    expect_has("LOG_OUT_BUFF_SIZE 16", "LOG_OUT_BUFF_SIZE");
    expect_code("LOG_OUT_BUFF_SIZE 14", parse1("LOG_OUT_BUFF_SIZE", "14", &c), TSR_ECONFIG);
    expect_has("LOG_OUT_BUFF_SIZE 14", "LOG_OUT_BUFF_SIZE");
    {
        /* LOG_BATCH 1: out 2^17/128 = 1024 rows x 32 B = 2^15 still. */
        kv_t ovr[] = {{"LOG_BATCH", "1"}, {"LOG_OUT_BUFF_SIZE", "15"}, {NULL, NULL}};
        expect_ok("LOG_BATCH 1 + LOG_OUT_BUFF_SIZE 15",
                  tsr_config_parse(mkjson(vta_default, ovr), "t", &c));
    }
    {
        /* Output width follows the input width: int16 inputs -> 2048 x 32 B = 2^16. */
        kv_t ovr[] = {{"LOG_INP_WIDTH", "4"}, {"LOG_OUT_WIDTH", "4"},
                      {"LOG_OUT_BUFF_SIZE", "16"}, {NULL, NULL}};
        expect_ok("int16 out", tsr_config_parse(mkjson(vta_default, ovr), "t", &c));
        kv_t bad[] = {{"LOG_INP_WIDTH", "4"}, {"LOG_OUT_WIDTH", "3"}, {NULL, NULL}};
        expect_code("int16 inp, int8 out", tsr_config_parse(mkjson(vta_default, bad), "t", &c),
                    TSR_ECONFIG);
        expect_has("int16 inp, int8 out", "LOG_OUT_WIDTH");
    }
}

static void test_targets_and_defaults(void **state)
{
    (void)state;
    tsr_config_t c;
    const char *what;
    static const struct {
        const char *target;
        int bus;
    } t[] = {{"sim", 64}, {"tsim", 64}, {"bsim", 64}, {"pynq", 64}, {"de10nano", 64},
             {"ultra96", 128}, {"zcu104", 128}, {"intelfocl", 0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char val[40];
        snprintf(val, sizeof val, "\"%s\"", t[i].target);
        int rc = parse1("TARGET", val, &c);
        expect_ok(t[i].target, rc);
        assert_string_equal(c.target, t[i].target);
        if (t[i].bus && c.dram_bus_width != t[i].bus)
            fail_msg("TARGET %s: default DRAM_BUS_WIDTH %d, want %d", t[i].target,
                     c.dram_bus_width, t[i].bus);
        /* Defaults must themselves be legal values. */
        assert_true(c.dram_bus_width >= 32 && c.dram_bus_width <= 512 &&
                    !(c.dram_bus_width & (c.dram_bus_width - 1)));
        assert_true(c.clock_mhz >= 1 && c.clock_mhz <= 1000);
        assert_true(c.cmd_queue_depth >= 2 && c.cmd_queue_depth <= 4096);
        assert_true(c.dep_queue_depth >= 1 && c.dep_queue_depth <= 255);
    }
    /* An explicit key beats the board default. */
    {
        kv_t ovr[] = {{"TARGET", "\"ultra96\""}, {"DRAM_BUS_WIDTH", "256"},
                      {"CLOCK_MHZ", "1000"}, {"CMD_QUEUE_DEPTH", "2"},
                      {"DEP_QUEUE_DEPTH", "255"}, {NULL, NULL}};
        expect_ok("explicit", tsr_config_parse(mkjson(vta_default, ovr), "t", &c));
        what = "explicit";
        CHECK_EQ("dram_bus_width", c.dram_bus_width, 256);
        CHECK_EQ("clock_mhz", c.clock_mhz, 1000);
        CHECK_EQ("cmd_queue_depth", c.cmd_queue_depth, 2);
        CHECK_EQ("dep_queue_depth", c.dep_queue_depth, 255);
    }
    expect_code("TARGET foo", parse1("TARGET", "\"foo\"", &c), TSR_ECONFIG);
    expect_has("TARGET foo", "TARGET");
    expect_code("TARGET number", parse1("TARGET", "7", &c), TSR_ECONFIG);
    expect_has("TARGET number", "TARGET");
    expect_code("HW_VER number", parse1("HW_VER", "2", &c), TSR_ECONFIG);
    expect_has("HW_VER number", "HW_VER");
    static const char *const not_pow2[] = {"96", "48", "384", "33", "511"};
    for (size_t i = 0; i < sizeof not_pow2 / sizeof not_pow2[0]; i++) {
        expect_code(not_pow2[i], parse1("DRAM_BUS_WIDTH", not_pow2[i], &c), TSR_ECONFIG);
        expect_has(not_pow2[i], "DRAM_BUS_WIDTH");
    }
    static const char *const pow2[] = {"32", "64", "128", "256", "512"};
    for (size_t i = 0; i < sizeof pow2 / sizeof pow2[0]; i++) {
        expect_ok(pow2[i], parse1("DRAM_BUS_WIDTH", pow2[i], &c));
        what = pow2[i];
        CHECK_EQ("dram_bus_width", c.dram_bus_width, atoi(pow2[i]));
    }
}

/* ---- ranges ---- */

typedef struct {
    const char *key;
    int lo, hi;
} range_t;

static void check_range(const kv_t *base, const char *cfgname, const range_t *r, int check_edges)
{
    char val[32], what[96], want[48];
    tsr_config_t c;
    snprintf(want, sizeof want, "[%d, %d]", r->lo, r->hi);
    int bad[2] = {r->lo - 1, r->hi + 1};
    for (int i = 0; i < 2; i++) {
        snprintf(val, sizeof val, "%d", bad[i]);
        snprintf(what, sizeof what, "%s: %s = %s", cfgname, r->key, val);
        kv_t ovr[] = {{r->key, val}, {NULL, NULL}};
        tsr_err_clear();
        expect_code(what, tsr_config_parse(mkjson(base, ovr), cfgname, &c), TSR_ECONFIG);
        expect_has(what, r->key);
        expect_has(what, want);
    }
    if (!check_edges)
        return;
    int good[2] = {r->lo, r->hi};
    for (int i = 0; i < 2; i++) {
        snprintf(val, sizeof val, "%d", good[i]);
        snprintf(what, sizeof what, "%s: %s = %s", cfgname, r->key, val);
        kv_t ovr[] = {{r->key, val}, {NULL, NULL}};
        tsr_err_clear();
        expect_ok(what, tsr_config_parse(mkjson(base, ovr), cfgname, &c));
    }
}

static void test_ranges(void **state)
{
    (void)state;
    /* Ranges whose both ends are accepted with every other key at default. LOG_INP_WIDTH and
     * LOG_WGT_WIDTH = 4 would need a wider accumulator than int32 only if both are 4 (then
     * 16+16 = 32 fits), so each alone at 4 is fine. */
    static const range_t edges[] = {
        {"LOG_INP_WIDTH", 3, 4},      {"LOG_WGT_WIDTH", 3, 4},   {"LOG_BATCH", 0, 4},
        {"DRAM_BUS_WIDTH", 32, 512},  {"CLOCK_MHZ", 1, 1000},    {"CMD_QUEUE_DEPTH", 2, 4096},
        {"DEP_QUEUE_DEPTH", 1, 255},
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        check_range(vta_default, "default", &edges[i], 1);

    /* LOG_ACC_WIDTH 4 with int8 x int8 is legal (16 >= 8+8); accepted in test_other_shapes
     * (with a smaller acc buffer, so that the ALU format still fits). */
    static const range_t acc = {"LOG_ACC_WIDTH", 4, 5};
    check_range(vta_default, "default", &acc, 0);

    /* LOG_BLOCK 1..6. At 6: inp row 64 B -> 512 rows, wgt row 4 KiB -> 64 rows, acc row
     * 256 B -> 512 rows: fits. At 1: inp 2 B -> 16384 rows (14 bits), wgt 4 B -> 65536 (16),
     * acc 8 B -> 16384 (14): the uop is 14+14+16 = 44 bits (8 B), U = 12, GEMM needs
     * 7+1+12+13+28+28+28+32 = 149 bits, so the smallest block is rejected as inconsistent. */
    static const range_t blk = {"LOG_BLOCK", 1, 6};
    check_range(vta_default, "default", &blk, 0);
    {
        tsr_config_t c;
        expect_ok("LOG_BLOCK 6", parse1("LOG_BLOCK", "6", &c));
        if (c.wgt_depth != 64 || c.inp_depth != 512 || c.acc_depth != 512)
            fail_msg("LOG_BLOCK 6: depths inp %u wgt %u acc %u, want 512 64 512", c.inp_depth,
                     c.wgt_depth, c.acc_depth);
        tsr_err_clear();
        int rc = parse1("LOG_BLOCK", "1", &c);
        if (rc != TSR_ECONFIG)
            fail_msg("LOG_BLOCK 1 with default buffers: got %s, want ECONFIG", tsr_errname(rc));
        /* (ALU is over too: 57 + 2*12 + 4*14 = 137, and MEM: 114 + 16 = 130; any may be named.) */
        if (!strstr(tsr_errmsg(), "GEMM") && !strstr(tsr_errmsg(), "ALU") && !strstr(tsr_errmsg(), "MEM"))
            fail_msg("LOG_BLOCK 1: message \"%s\" names no format", tsr_errmsg());
    }
    {
        kv_t base[] = {{"LOG_BLOCK", NULL}, {"LOG_BLOCK_IN", "4"}, {"LOG_BLOCK_OUT", "4"},
                       {NULL, NULL}};
        /* Build a base with LOG_BLOCK_IN/OUT instead of LOG_BLOCK. */
        static kv_t split[16];
        size_t n = 0;
        for (const kv_t *b = vta_default; b->key; b++)
            if (strcmp(b->key, "LOG_BLOCK"))
                split[n++] = *b;
        split[n++] = base[1];
        split[n++] = base[2];
        split[n].key = NULL;
        static const range_t bi = {"LOG_BLOCK_IN", 1, 6}, bo = {"LOG_BLOCK_OUT", 1, 6};
        check_range(split, "split", &bi, 0);
        check_range(split, "split", &bo, 0);
    }

    /* Buffer sizes: at least one row, at most 2^16 rows and 2^24 bytes. Default rows: uop 4 B
     * (lo 2), inp 16 B (lo 4), wgt 256 B (lo 8), acc 64 B (lo 6); hi = min(lo + 16, 24). */
    static const range_t bufs[] = {
        {"LOG_UOP_BUFF_SIZE", 2, 18}, {"LOG_INP_BUFF_SIZE", 4, 20},
        {"LOG_WGT_BUFF_SIZE", 8, 24}, {"LOG_ACC_BUFF_SIZE", 6, 22},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        check_range(vta_default, "default", &bufs[i], 0);
}

static void test_acc_width_consistency(void **state)
{
    (void)state;
    tsr_config_t c;
    /* int16 x int8 needs 24 bits: a 16-bit accumulator is too narrow. */
    kv_t ovr[] = {{"LOG_INP_WIDTH", "4"}, {"LOG_ACC_WIDTH", "4"}, {NULL, NULL}};
    tsr_err_clear();
    expect_code("acc too narrow", tsr_config_parse(mkjson(vta_default, ovr), "t", &c),
                TSR_ECONFIG);
    expect_has("acc too narrow", "LOG_ACC_WIDTH");
    kv_t ovr2[] = {{"LOG_WGT_WIDTH", "4"}, {"LOG_ACC_WIDTH", "4"}, {NULL, NULL}};
    expect_code("acc too narrow (wgt)", tsr_config_parse(mkjson(vta_default, ovr2), "t", &c),
                TSR_ECONFIG);
    expect_has("acc too narrow (wgt)", "LOG_ACC_WIDTH");
}

static void test_block_keys(void **state)
{
    (void)state;
    tsr_config_t c;
    {
        kv_t ovr[] = {{"LOG_BLOCK_IN", "3"}, {NULL, NULL}};
        tsr_err_clear();
        expect_code("LOG_BLOCK + different LOG_BLOCK_IN",
                    tsr_config_parse(mkjson(vta_default, ovr), "t", &c), TSR_ECONFIG);
        expect_has("LOG_BLOCK + different LOG_BLOCK_IN", "LOG_BLOCK");
        expect_has("LOG_BLOCK + different LOG_BLOCK_IN", "inconsistent");
    }
    {
        kv_t ovr[] = {{"LOG_BLOCK_OUT", "5"}, {NULL, NULL}};
        expect_code("LOG_BLOCK + different LOG_BLOCK_OUT",
                    tsr_config_parse(mkjson(vta_default, ovr), "t", &c), TSR_ECONFIG);
        expect_has("LOG_BLOCK + different LOG_BLOCK_OUT", "inconsistent");
    }
    {
        kv_t ovr[] = {{"LOG_BLOCK", NULL}, {"LOG_BLOCK_IN", "4"}, {NULL, NULL}};
        expect_code("LOG_BLOCK_IN alone", tsr_config_parse(mkjson(vta_default, ovr), "t", &c),
                    TSR_ECONFIG);
        expect_has("LOG_BLOCK_IN alone", "LOG_BLOCK_OUT");
        expect_has("LOG_BLOCK_IN alone", "missing");
    }
    {
        kv_t ovr[] = {{"LOG_BLOCK", NULL}, {"LOG_BLOCK_OUT", "4"}, {NULL, NULL}};
        expect_code("LOG_BLOCK_OUT alone", tsr_config_parse(mkjson(vta_default, ovr), "t", &c),
                    TSR_ECONFIG);
        expect_has("LOG_BLOCK_OUT alone", "LOG_BLOCK_IN");
        expect_has("LOG_BLOCK_OUT alone", "missing");
    }
}

static void test_missing_keys(void **state)
{
    (void)state;
    tsr_config_t c;
    static const char *const req[] = {
        "LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH", "LOG_BATCH", "LOG_BLOCK",
        "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE",
    };
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "missing %s", req[i]);
        expect_code(what, parse1(req[i], NULL, &c), TSR_ECONFIG);
        expect_has(what, req[i]);
        expect_has(what, "missing");
    }
    /* The optional ones really are optional. */
    static const char *const opt[] = {"TARGET", "HW_VER"};
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
        expect_ok(opt[i], parse1(opt[i], NULL, &c));
}

static void test_unknown_and_types(void **state)
{
    (void)state;
    tsr_config_t c;
    expect_code("unknown", parse1("LOG_FOO_SIZE", "3", &c), TSR_ECONFIG);
    expect_has("unknown", "LOG_FOO_SIZE");
    expect_has("unknown", "unknown");
    /* Case matters: a lower-case spelling is a different (unknown) key. */
    expect_code("lower case", parse1("log_batch", "0", &c), TSR_ECONFIG);
    expect_has("lower case", "log_batch");
    expect_has("lower case", "unknown");

    static const char *const keys[] = {"LOG_BATCH", "LOG_INP_BUFF_SIZE", "CLOCK_MHZ",
                                       "DEP_QUEUE_DEPTH", "LOG_BLOCK"};
    static const char *const vals[] = {"\"0\"", "3.5", "true", "false", "null", "[4]", "{}",
                                       "0.5", "4.000001"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (size_t v = 0; v < sizeof vals / sizeof vals[0]; v++) {
            char what[96];
            snprintf(what, sizeof what, "%s = %s", keys[k], vals[v]);
            expect_code(what, parse1(keys[k], vals[v], &c), TSR_ECONFIG);
            expect_has(what, keys[k]);
        }
}

static void test_malformed_json(void **state)
{
    (void)state;
    tsr_config_t c;
    static const char *const bad[] = {
        "",
        "{",
        "{\"LOG_BATCH\": }",
        "{\"LOG_BATCH\" 0}",
        "[1, 2]",
        "42",
        "\"LOG_BATCH\"",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tsr_err_clear();
        expect_code(bad[i], tsr_config_parse(bad[i], "t", &c), TSR_ECONFIG);
        expect_has(bad[i], "JSON");
    }
    /* A complete, valid object followed by garbage is still malformed text. */
    char buf[4096];
    snprintf(buf, sizeof buf, "%s garbage", mkjson(vta_default, NULL));
    tsr_err_clear();
    expect_code("trailing garbage", tsr_config_parse(buf, "t", &c), TSR_ECONFIG);
    expect_has("trailing garbage", "JSON");
    /* ... while trailing whitespace is fine. */
    snprintf(buf, sizeof buf, "%s \n\t ", mkjson(vta_default, NULL));
    expect_ok("trailing whitespace", tsr_config_parse(buf, "t", &c));
    /* The name given is used in messages. */
    tsr_err_clear();
    expect_code("name", tsr_config_parse("{", "my_board.json", &c), TSR_ECONFIG);
    expect_has("name", "my_board.json");
}

/* Numbers JSON (RFC 8259) does not have are refused, not read the way
 * cJSON's strtod reads them ("04" was taken as 4), with one line naming
 * the key; the same check guards the board files (tsr_board.c). */
static void test_strict_numbers(void **state)
{
    (void)state;
    tsr_config_t c;
    static const char *const bad[] = {"04", "-04", "00", "+4", "0x4", "NaN", "nan", "Infinity", "-Infinity",
                                      "inf", "4.", ".4", "4.e1", "4e", "4e+", "1_0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[96];
        snprintf(want, sizeof want, "testcfg: line 8: key LOG_BLOCK: %s is not a JSON number (RFC 8259", bad[i]);
        expect_code(bad[i], parse1("LOG_BLOCK", bad[i], &c), TSR_ECONFIG);
        expect_has(bad[i], want);
        if (strchr(tsr_errmsg(), '\n'))
            fail_msg("%s: message spans lines: %s", bad[i], tsr_errmsg());
    }
    /* what JSON allows still parses and reaches the range check */
    static const char *const good[] = {"4", "4.0", "40e-1", "0.4E1", "4E0"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        expect_ok(good[i], parse1("LOG_BLOCK", good[i], &c));
    expect_code("-0", parse1("LOG_BLOCK", "-0", &c), TSR_ECONFIG);
    expect_has("-0", "key LOG_BLOCK = -0 is out of range");
    /* digits inside strings are not numbers */
    expect_ok("string with 04", parse1("HW_VER", "\"04.+x\"", &c));
    /* a key with control characters is shown escaped, on one line */
    tsr_err_clear();
    expect_code("odd key", tsr_config_parse("{\"A\\nB\x1b[31m\": 01}", "k.json", &c), TSR_ECONFIG);
    expect_has("odd key", "k.json: line 1: key A\\nB\\x1b[31m: 01 is not a JSON number");
    /* a board file through the same check */
    tsr_board_t b;
    tsr_err_clear();
    expect_code("board", tsr_board_parse("{\"name\": \"x\",\n \"clock_mhz\": 0100}", "b.json", &b),
                TSR_ECONFIG);
    expect_has("board", "b.json: line 2: key clock_mhz: 0100 is not a JSON number");
}

/* tsr_strsafe (isa/tsr_strsafe.h), the one helper that puts untrusted
 * strings (config keys above, ONNX names) into messages: one line, valid
 * UTF-8 kept, everything else \xNN, long strings cut with "...". */
static void expect_safe(const char *in, size_t n, const char *want)
{
    char buf[TSR_STRSAFE_BUF];
    const char *got = tsr_strsafe(in, buf, n);
    if (strcmp(got, want))
        fail_msg("tsr_strsafe(\"%s\", %zu): got \"%s\", want \"%s\"", in ? in : "(NULL)", n, got, want);
    if (strlen(got) >= n)
        fail_msg("tsr_strsafe(%zu): %zu bytes do not fit", n, strlen(got));
}

static void test_strsafe(void **state)
{
    (void)state;
    const size_t B = TSR_STRSAFE_BUF;
    expect_safe("conv1", B, "conv1");
    expect_safe(NULL, B, "(null)");
    expect_safe("a\nb\r\tc\x7f", B, "a\\x0ab\\x0d\\x09c\\x7f");
    expect_safe("\x1b[31mred", B, "\\x1b[31mred");
    expect_safe("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0", B, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0");
    expect_safe("\xc2\x9b" "2J", B, "\\xc2\\x9b2J");                     /* C1 CSI */
    expect_safe("\xc0\xaf", B, "\\xc0\\xaf");                            /* overlong '/' */
    expect_safe("\xed\xa0\x80", B, "\\xed\\xa0\\x80");                  /* a surrogate */
    expect_safe("\xf4\x90\x80\x80", B, "\\xf4\\x90\\x80\\x80");          /* above U+10FFFF */
    expect_safe("\xe2\x82", B, "\\xe2\\x82");                            /* cut short */
    expect_safe("\xff\x80x", B, "\\xff\\x80x");
    char in[200], want[200];
    memset(in, 'n', 81), in[81] = '\0';
    memset(want, 'n', 80), memcpy(want + 80, "...", 4);
    expect_safe(in, B, want);                                           /* > 80 bytes: cut */
    in[80] = '\0';
    expect_safe(in, B, in);                                             /* 80: whole */
    expect_safe("abcdefg", 8, "abcdefg");                               /* fits exactly */
    expect_safe("abcdefgh", 8, "abcd...");
    expect_safe("\n\n\n", 8, "\\x0a...");                               /* never half an escape */
    expect_safe("ab\xe2\x82\xac", 8, "ab\xe2\x82\xac");
    expect_safe("abcd\xe2\x82\xac" "x", 8, "abcd...");                  /* never half a character */
    /* the worst case fits its buffer: every one of 80 bytes escaped */
    memset(in, '\x01', 120), in[120] = '\0';
    char big[TSR_STRSAFE_BUF];
    tsr_strsafe(in, big, sizeof big);
    assert_int_equal(strlen(big), 4 * TSR_STRSAFE_MAX + 3);
}

static void test_isa_fit(void **state)
{
    (void)state;
    tsr_config_t c;
    /* Field budget (index widths U uop, I inp, W wgt, A acc; header 7, uop_end U+1, two
     * 14-bit loops): GEMM = 7+1+U+(U+1)+28+2A+2I+2W, ALU = 7+1+U+(U+1)+28+4A+3+1+16.
     * Default: U 13, I 11, W 10, A 11 -> GEMM 127, ALU 127: both at the limit. */
    expect_ok("default fits", tsr_config_load("default", &c));

    /* LOG_WGT_BUFF_SIZE 19 (W 11) makes uops 11+11+11 = 33 bits -> 8 B, so with
     * LOG_UOP_BUFF_SIZE 16, U = 16-3 = 13: GEMM = 7+1+13+14+28+22+22+22 = 129 > 128, while
     * ALU = 7+1+13+14+28+44+20 = 127 fits. */
    {
        kv_t ovr[] = {{"LOG_WGT_BUFF_SIZE", "19"}, {"LOG_UOP_BUFF_SIZE", "16"}, {NULL, NULL}};
        tsr_err_clear();
        expect_code("GEMM too wide", tsr_config_parse(mkjson(vta_default, ovr), "t", &c),
                    TSR_ECONFIG);
        expect_has("GEMM too wide", "GEMM");
        /* ... and one uop-buffer size smaller (U 12) it fits: GEMM 127. */
        kv_t ok[] = {{"LOG_WGT_BUFF_SIZE", "19"}, {"LOG_UOP_BUFF_SIZE", "15"}, {NULL, NULL}};
        expect_ok("GEMM fits again", tsr_config_parse(mkjson(vta_default, ok), "t", &c));
    }
    /* LOG_ACC_BUFF_SIZE 18 (A 12), LOG_INP_BUFF_SIZE 14 (I 10), LOG_WGT_BUFF_SIZE 17 (W 9):
     * uop 12+12+9 = 33 bits -> 8 B, U = 15-3 = 12. ALU = 7+1+12+13+28+48+20 = 129 > 128;
     * GEMM = 7+1+12+13+28+24+2*src+18 <= 127 whether src factors take I (10) or max(I,A) (12). */
    {
        kv_t ovr[] = {{"LOG_ACC_BUFF_SIZE", "18"}, {"LOG_INP_BUFF_SIZE", "14"},
                      {"LOG_WGT_BUFF_SIZE", "17"}, {NULL, NULL}};
        tsr_err_clear();
        expect_code("ALU too wide", tsr_config_parse(mkjson(vta_default, ovr), "t", &c),
                    TSR_ECONFIG);
        expect_has("ALU too wide", "ALU");
    }
}

/* The RTL area options: 0/1 only; DSP_PACK only for int8 x int8. */
static void test_area_options(void **state)
{
    (void)state;
    tsr_config_t c;
    expect_ok("DSP_PACK 1", parse1("DSP_PACK", "1", &c));
    assert_int_equal(c.dsp_pack, 1);
    assert_int_equal(c.out_buff_lutram, 0);
    expect_ok("OUT_BUFF_LUTRAM 1", parse1("OUT_BUFF_LUTRAM", "1", &c));
    assert_int_equal(c.out_buff_lutram, 1);
    assert_int_equal(c.acc_single_copy, 0);
    expect_ok("ACC_SINGLE_COPY 1", parse1("ACC_SINGLE_COPY", "1", &c));
    assert_int_equal(c.acc_single_copy, 1);
    assert_int_equal(parse1("ACC_SINGLE_COPY", "-1", &c), TSR_ECONFIG);
    assert_string_equal(tsr_errmsg(), "testcfg: key ACC_SINGLE_COPY = -1 is out of range: allowed [0, 1]");
    assert_int_equal(parse1("DSP_PACK", "2", &c), TSR_ECONFIG);
    assert_string_equal(tsr_errmsg(), "testcfg: key DSP_PACK = 2 is out of range: allowed [0, 1]");
    assert_int_equal(parse1("OUT_BUFF_LUTRAM", "true", &c), TSR_ECONFIG);
    assert_string_equal(tsr_errmsg(),
                        "testcfg: key OUT_BUFF_LUTRAM must be an integer in [0, 1], got a boolean");
    kv_t wide[] = {{"LOG_WGT_WIDTH", "4"}, {"DSP_PACK", "1"}, {NULL, NULL}};
    tsr_err_clear();
    assert_int_equal(tsr_config_parse(mkjson(vta_default, wide), "testcfg", &c), TSR_ECONFIG);
    assert_string_equal(tsr_errmsg(),
                        "testcfg: key DSP_PACK = 1 needs int8 inputs and weights (LOG_INP_WIDTH = "
                        "LOG_WGT_WIDTH = 3): two products share one 25 x 18-bit multiplier");
    /* the default preset packs the multipliers and keeps one accumulator
     * copy, output buffer in block RAM (it must fit a Pynq-Z1's xc7z020) */
    assert_int_equal(tsr_config_load("default", &c), TSR_OK);
    assert_int_equal(c.dsp_pack, 1);
    assert_int_equal(c.out_buff_lutram, 0);
    assert_int_equal(c.acc_single_copy, 1);
    assert_int_equal(c.serial_core, 0);
    /* the serial microarchitecture: 0/1, off by default, on in the ice40
     * preset (the one small enough for an iCE40 UP5K) */
    expect_ok("SERIAL_CORE 1", parse1("SERIAL_CORE", "1", &c));
    assert_int_equal(c.serial_core, 1);
    assert_int_equal(parse1("SERIAL_CORE", "2", &c), TSR_ECONFIG);
    assert_string_equal(tsr_errmsg(), "testcfg: key SERIAL_CORE = 2 is out of range: allowed [0, 1]");
    assert_int_equal(tsr_config_load("ice40", &c), TSR_OK);
    assert_int_equal(c.serial_core, 1);
}

/* ACT_LUT: a count of activation tables from the set 0, 1, 2, 4, 8 (the
 * message names the set), off when the key is absent; the default preset
 * has 2 (docs/results.md, "Activation tables (ACT_LUT)": the DSE verdict);
 * the lut buffer's geometry. */
static void test_act_lut(void **state)
{
    (void)state;
    tsr_config_t c;
    assert_int_equal(tsr_config_load("default", &c), TSR_OK);
    assert_int_equal(c.act_lut, 2);
    assert_int_equal(tsr_config_elem_bytes(&c, TSR_MEM_LUT), 256);
    assert_int_equal(tsr_config_sram_depth(&c, TSR_MEM_LUT), 2);
    assert_int_equal(tsr_alu_op_available(&c, TSR_ALU_LUT), 1);
    /* a config without the key has no tables (the other presets, VTA's keys) */
    assert_int_equal(tsr_config_load("tiny", &c), TSR_OK);
    assert_int_equal(c.act_lut, 0);
    expect_ok("VTA's default keys", tsr_config_parse(mkjson(vta_default, NULL), "t", &c));
    assert_int_equal(c.act_lut, 0);
    assert_int_equal(tsr_config_elem_bytes(&c, TSR_MEM_LUT), 0);
    assert_int_equal(tsr_config_sram_depth(&c, TSR_MEM_LUT), 0);
    static const char *const ok[] = {"0", "1", "2", "4", "8"};
    for (int i = 0; i < 5; i++) {
        expect_ok(ok[i], parse1("ACT_LUT", ok[i], &c));
        assert_int_equal(c.act_lut, atoi(ok[i]));
        assert_int_equal(tsr_config_sram_depth(&c, TSR_MEM_LUT), (uint32_t)c.act_lut);
        assert_int_equal(tsr_config_elem_bytes(&c, TSR_MEM_LUT), c.act_lut ? 256 : 0);
        assert_int_equal(tsr_config_buffer_bytes(&c, TSR_MEM_LUT), 256u * (uint32_t)c.act_lut);
        /* (the lut op is available exactly when there are tables) */
        assert_int_equal(tsr_alu_op_available(&c, TSR_ALU_LUT), c.act_lut > 0);
    }
    static const char *const bad[] = {"3", "5", "6", "7", "9", "16", "-1", "1.5", "1e300"};
    for (int i = 0; i < 9; i++) {
        tsr_err_clear();
        if (parse1("ACT_LUT", bad[i], &c) != TSR_ECONFIG)
            fail_msg("ACT_LUT = %s accepted", bad[i]);
        char want[128];
        snprintf(want, sizeof want, "testcfg: key ACT_LUT = %s is not allowed: allowed 0, 1, 2, 4, 8",
                 !strcmp(bad[i], "1e300") ? "1e+300" : bad[i]);
        assert_string_equal(tsr_errmsg(), want);
    }
    tsr_err_clear();
    assert_int_equal(parse1("ACT_LUT", "\"4\"", &c), TSR_ECONFIG);
    expect_has("ACT_LUT string", "ACT_LUT must be an integer");
    /* the tables take the 16-bit LOG_ACC_WIDTH too (entries are int8) */
    kv_t a16[] = {{"LOG_ACC_WIDTH", "4"}, {"LOG_ACC_BUFF_SIZE", "15"}, {"ACT_LUT", "2"}, {NULL, NULL}};
    tsr_err_clear();
    expect_ok("ACT_LUT with 16-bit accumulators", tsr_config_parse(mkjson(vta_default, a16), "t", &c));
    assert_int_equal(c.act_lut, 2);
}

/* tsr_config_load_with: one key set on a preset, replacing its own value
 * (the default preset has DEPTHWISE) or added; the rest as the preset. */
static void test_load_with(void **state)
{
    (void)state;
    tsr_config_t d, z, l;
    assert_int_equal(tsr_config_load("default", &d), TSR_OK);
    assert_int_equal(d.depthwise, 3);
    assert_int_equal(tsr_config_load_with("default", "DEPTHWISE", 0, &z), TSR_OK);
    assert_int_equal(z.depthwise, 0);
    assert_int_equal(tsr_config_load_with("default", "ACT_LUT", 4, &l), TSR_OK);
    assert_int_equal(l.act_lut, 4);
    assert_int_equal(d.act_lut, 2);
    assert_int_equal(tsr_config_load_with("default", "ACT_LUT", 0, &z), TSR_OK);
    assert_int_equal(z.act_lut, 0);
    assert_int_equal(z.depthwise, 3);
    assert_int_equal(l.depthwise, 3);
    assert_int_equal(z.inp_depth, d.inp_depth);
    assert_int_equal(z.dsp_pack, d.dsp_pack);
    /* the key is checked like any other */
    assert_int_not_equal(tsr_config_load_with("default", "DEPTHWISE", 9, &z), TSR_OK);
    assert_non_null(strstr(tsr_errmsg(), "DEPTHWISE"));
    assert_int_not_equal(tsr_config_load_with("default", "NO_SUCH_KEY", 1, &z), TSR_OK);
    assert_non_null(strstr(tsr_errmsg(), "NO_SUCH_KEY"));
}

static void test_load_files(void **state)
{
    (void)state;
    static const char *const names[] = {"default", "tiny", "large"};
    const char *const *list = tsr_config_preset_names();
    assert_non_null(list);
    for (size_t i = 0; i < 3; i++) {
        int found = 0;
        for (const char *const *p = list; *p; p++)
            found |= !strcmp(*p, names[i]);
        if (!found)
            fail_msg("preset %s not listed", names[i]);
        assert_non_null(tsr_config_preset_json(names[i]));
        char path[1024];
        snprintf(path, sizeof path, "%s/configs/%s.json", TSR_SOURCE_DIR, names[i]);
        tsr_config_t a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        expect_ok(path, tsr_config_load(path, &a));
        expect_ok(names[i], tsr_config_load(names[i], &b));
        if (memcmp(&a, &b, sizeof a))
            fail_msg("%s: file and embedded preset parse differently", names[i]);
    }
    assert_null(tsr_config_preset_json("nonexistent"));
    tsr_config_t c;
    int rc = tsr_config_load("/nonexistent/dir/cfg.json", &c);
    if (rc == TSR_OK)
        fail_msg("loading a missing file succeeded");
    expect_has("missing file", "/nonexistent/dir/cfg.json");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_preset),
        cmocka_unit_test(test_tiny_preset),
        cmocka_unit_test(test_large_preset),
        cmocka_unit_test(test_other_shapes),
        cmocka_unit_test(test_vta_optional_keys),
        cmocka_unit_test(test_targets_and_defaults),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_acc_width_consistency),
        cmocka_unit_test(test_block_keys),
        cmocka_unit_test(test_missing_keys),
        cmocka_unit_test(test_unknown_and_types),
        cmocka_unit_test(test_malformed_json),
        cmocka_unit_test(test_strict_numbers),
        cmocka_unit_test(test_strsafe),
        cmocka_unit_test(test_isa_fit),
        cmocka_unit_test(test_area_options),
        cmocka_unit_test(test_act_lut),
        cmocka_unit_test(test_load_with),
        cmocka_unit_test(test_load_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
