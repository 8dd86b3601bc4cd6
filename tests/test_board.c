/*
 * test_board: board files (isa/tsr_board.c). Every built-in board parses and
 * carries the data-sheet figures typed in here by hand (an independent copy,
 * so a damaged file or a parser slip fails); bad files get their exact
 * one-line messages; the fit verdict is checked on hand-computed cases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tsr_board.h"
#include "tsr_error.h"

static const char *good =
    "{\"name\": \"b\", \"part\": \"p\", \"family\": \"xc7\", "
    "\"resources\": {\"LUT\": 1000, \"FF\": 2000, \"BRAM36\": 10, \"DSP\": 20}, "
    "\"limits\": {\"LUT\": 0.8}, \"dram\": {\"bus_bits\": 64, \"mbytes\": 512}, \"clock_mhz\": 100}";

static void test_builtin_boards(void **state)
{
    (void)state;
    static const struct {
        const char *name, *part;
        tsr_family_e fam;
        double lut, bram, dsp;
    } want[] = {
        {"pynq-z1", "xc7z020clg400-1", TSR_FAMILY_XC7, 53200, 140, 220},
        {"pynq-z2", "xc7z020clg400-1", TSR_FAMILY_XC7, 53200, 140, 220},
        {"ultra96-v2", "xczu3eg-sbva484-1-i", TSR_FAMILY_XCUP, 70560, 216, 360},
        {"zcu104", "xczu7ev-ffvc1156-2-e", TSR_FAMILY_XCUP, 230400, 312, 1728},
        {"u250", "xcu250-figd2104-2L-e", TSR_FAMILY_XCUP, 1728000, 2688, 12288},
        {"u55c", "xcu55c-fsvh2892-2L-e", TSR_FAMILY_XCUP, 1304000, 2016, 9024},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tsr_board_t b;
        if (tsr_board_load(want[i].name, &b))
            fail_msg("board %s: %s", want[i].name, tsr_errmsg());
        assert_string_equal(b.part, want[i].part);
        assert_int_equal(b.family, want[i].fam);
        assert_true(b.budget[TSR_RES_LUT] == want[i].lut);
        assert_true(b.budget[TSR_RES_BRAM36] == want[i].bram);
        assert_true(b.budget[TSR_RES_DSP] == want[i].dsp);
        assert_true(b.limit[TSR_RES_LUT] == 0.80);
    }
    tsr_board_t b;
    assert_int_equal(tsr_board_load("ice40-up5k", &b), TSR_OK);
    assert_int_equal(b.family, TSR_FAMILY_ICE40);
    assert_true(b.budget[TSR_RES_LC] == 5280 && b.budget[TSR_RES_SPRAM] == 4);
    /* every listed name loads */
    int n = 0;
    for (const char *const *p = tsr_board_names(); *p; p++, n++)
        assert_int_equal(tsr_board_load(*p, &b), TSR_OK);
    assert_true(n >= 8);
}

/* Replace the first occurrence of from in good by to, parse, expect msg. */
static void expect_bad(const char *from, const char *to, const char *msg)
{
    char json[1024];
    const char *p = strstr(good, from);
    assert_non_null(p);
    snprintf(json, sizeof json, "%.*s%s%s", (int)(p - good), good, to, p + strlen(from));
    tsr_board_t b;
    int rc = tsr_board_parse(json, "x.json", &b);
    if (rc != TSR_ECONFIG || strcmp(tsr_errmsg(), msg))
        fail_msg("%s\n  got rc %d: %s\n  want: %s", json, rc, tsr_errmsg(), msg);
}

static void test_bad_boards(void **state)
{
    (void)state;
    tsr_board_t b;
    assert_int_equal(tsr_board_parse(good, "x.json", &b), TSR_OK);
    expect_bad("\"clock_mhz\"", "\"clock\"", "x.json: unknown key \"clock\"");
    expect_bad("\"LUT\": 1000, ", "",
               "x.json: key limits.LUT limits a resource the board does not list");
    expect_bad("\"DSP\": 20", "\"URAMX\": 20",
               "x.json: unknown key \"resources.URAMX\" (resource classes of family xc7: LUT, FF, "
               "BRAM36, URAM, DSP)");
    expect_bad(", \"DSP\": 20", "", "x.json: missing key resources.DSP");
    expect_bad("\"DSP\": 20", "\"DSP\": -3",
               "x.json: key resources.DSP = -3 is out of range: allowed [0, 1e+08]");
    expect_bad("\"DSP\": 20", "\"DSP\": 1e12",
               "x.json: key resources.DSP = 1e+12 is out of range: allowed [0, 1e+08]");
    expect_bad("\"DSP\": 20", "\"DSP\": 2.5", "x.json: key resources.DSP must be an integer, got 2.5");
    expect_bad("\"DSP\": 20", "\"DSP\": \"20\"", "x.json: key resources.DSP must be a number");
    expect_bad("0.8", "1.5", "x.json: key limits.LUT = 1.5 is out of range: allowed [0.01, 1]");
    expect_bad("\"xc7\"", "\"xc9\"", "x.json: key family = \"xc9\" is unknown: allowed xc7, xcup, ice40");
    expect_bad("\"part\": \"p\", ", "", "x.json: missing key part");
    expect_bad("\"bus_bits\": 64", "\"bus_bits\": 0",
               "x.json: key dram.bus_bits = 0 is out of range: allowed [8, 1024]");
    expect_bad("{\"bus_bits\"", "{\"width\": 1, \"bus_bits\"", "x.json: unknown key \"dram.width\"");
    expect_bad("\"clock_mhz\": 100", "\"clock_mhz\": 100, \"clock_mhz\": 100",
               "x.json: key clock_mhz appears twice");
    expect_bad("{\"name\"", "[{\"name\"", "x.json: malformed board file: not a JSON object");
    assert_int_equal(tsr_board_parse("not json", "y.json", &b), TSR_ECONFIG);
    assert_string_equal(tsr_errmsg(), "y.json: malformed board file: not a JSON object");
    assert_int_equal(tsr_board_load("/nonexistent/board.json", &b), TSR_EIO);
    assert_non_null(strstr(tsr_errmsg(), "/nonexistent/board.json: no such board file, nor a built-in board (ice40-hx8k"));
}

static void test_fits(void **state)
{
    (void)state;
    tsr_board_t b;
    assert_int_equal(tsr_board_parse(good, "x.json", &b), TSR_OK);
    double used[TSR_RES_COUNT] = {0};
    char why[256];
    used[TSR_RES_LUT] = 800; /* exactly 80% of 1000 */
    used[TSR_RES_DSP] = 20;
    used[TSR_RES_BRAM36] = 10;
    assert_int_equal(tsr_board_fits(&b, used, why, sizeof why), 1);
    assert_string_equal(why, "");
    used[TSR_RES_LUT] = 801;
    used[TSR_RES_DSP] = 323;
    used[TSR_RES_BRAM36] = 10.5;
    assert_int_equal(tsr_board_fits(&b, used, why, sizeof why), 0);
    assert_string_equal(why, "LUT 801 > 800, BRAM36 10.5 > 10, DSP 323 > 20");
    /* a class the board does not have: any use is over */
    memset(used, 0, sizeof used);
    used[TSR_RES_URAM] = 1;
    assert_int_equal(tsr_board_fits(&b, used, why, sizeof why), 0);
    assert_string_equal(why, "URAM 1 > 0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_boards),
        cmocka_unit_test(test_bad_boards),
        cmocka_unit_test(test_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
