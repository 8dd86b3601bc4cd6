/*
 * tsr_board: parse and check board files, and the fit verdict (see
 * tsr_board.h). Every message names the file and the key, so a bad edit to
 * a board file is found at once instead of as a wrong fit verdict.
 */
#include "tsr_board.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_file.h"
#include "tsr_jsonstrict.h"

/* Generated from the JSON files in boards/ by scripts/embed_presets.cmake. */
extern const char *const tsr_board_table[][2];

static const char *const res_names[TSR_RES_COUNT] = {"LUT", "FF", "BRAM36", "URAM",
                                                     "DSP", "LC", "EBR",    "SPRAM"};
static const char *const family_names[] = {"xc7", "xcup", "ice40"};

/* Classes each family must state (the ones every design uses). */
static const int xilinx_required[] = {TSR_RES_LUT, TSR_RES_FF, TSR_RES_BRAM36, TSR_RES_DSP};
static const int ice40_required[] = {TSR_RES_LC, TSR_RES_EBR};

const char *tsr_res_name(int res)
{
    return res >= 0 && res < TSR_RES_COUNT ? res_names[res] : NULL;
}

const char *tsr_family_name(tsr_family_e f)
{
    return (unsigned)f < sizeof family_names / sizeof family_names[0] ? family_names[f] : "?";
}

/* Family f may hold class r: Xilinx classes on xc7/xcup, iCE40 ones on ice40
 * (DSP is both: DSP48 or SB_MAC16). */
static int family_has(tsr_family_e f, int r)
{
    if (r == TSR_RES_DSP)
        return 1;
    int ice = r == TSR_RES_LC || r == TSR_RES_EBR || r == TSR_RES_SPRAM;
    return f == TSR_FAMILY_ICE40 ? ice : !ice;
}

static int check_keys(const cJSON *obj, const char *name, const char *where,
                      const char *const *allowed, size_t n)
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        size_t i;
        for (i = 0; i < n; i++)
            if (!strcmp(it->string, allowed[i]))
                break;
        if (i == n)
            return tsr_err(TSR_ECONFIG, "%s: unknown key \"%s%s\"", name, where, it->string);
        for (const cJSON *jt = it->next; jt; jt = jt->next)
            if (!strcmp(it->string, jt->string))
                return tsr_err(TSR_ECONFIG, "%s: key %s%s appears twice", name, where, it->string);
    }
    return TSR_OK;
}

static int get_string(const cJSON *root, const char *name, const char *key, char *dst, size_t n,
                      int required)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it) {
        if (required)
            return tsr_err(TSR_ECONFIG, "%s: missing key %s", name, key);
        dst[0] = '\0';
        return TSR_OK;
    }
    if (!cJSON_IsString(it) || !it->valuestring[0])
        return tsr_err(TSR_ECONFIG, "%s: key %s must be a non-empty string", name, key);
    if (strlen(it->valuestring) >= n)
        return tsr_err(TSR_ECONFIG, "%s: key %s is longer than %zu characters", name, key, n - 1);
    snprintf(dst, n, "%s", it->valuestring);
    return TSR_OK;
}

/* A number in [lo, hi]; integral if integer is set. */
static int get_number(const cJSON *it, const char *name, const char *key, double lo, double hi,
                      int integer, double *out)
{
    if (!it)
        return tsr_err(TSR_ECONFIG, "%s: missing key %s", name, key);
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return tsr_err(TSR_ECONFIG, "%s: key %s must be a number", name, key);
    double d = it->valuedouble;
    if (integer && d != floor(d))
        return tsr_err(TSR_ECONFIG, "%s: key %s must be an integer, got %g", name, key, d);
    if (d < lo || d > hi)
        return tsr_err(TSR_ECONFIG, "%s: key %s = %g is out of range: allowed [%g, %g]", name,
                       key, d, lo, hi);
    *out = d;
    return TSR_OK;
}

static int class_of(const char *s)
{
    for (int r = 0; r < TSR_RES_COUNT; r++)
        if (!strcmp(s, res_names[r]))
            return r;
    return -1;
}

/* "resources" or "limits": an object of class -> number. */
static int get_classes(const cJSON *root, const char *name, const char *key, tsr_board_t *b,
                       int is_limit)
{
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(root, key);
    char k[96];
    if (!obj) {
        if (is_limit)
            return TSR_OK;
        return tsr_err(TSR_ECONFIG, "%s: missing key %s", name, key);
    }
    if (!cJSON_IsObject(obj))
        return tsr_err(TSR_ECONFIG, "%s: key %s must be an object of resource class -> %s", name,
                       key, is_limit ? "share in (0, 1]" : "count");
    for (const cJSON *it = obj->child; it; it = it->next) {
        int r = class_of(it->string);
        snprintf(k, sizeof k, "%s.%s", key, it->string);
        if (r < 0 || !family_has(b->family, r))
            return tsr_err(TSR_ECONFIG, "%s: unknown key \"%s\" (resource classes of family %s: %s)",
                           name, k, tsr_family_name(b->family),
                           b->family == TSR_FAMILY_ICE40 ? "LC, EBR, SPRAM, DSP"
                                                         : "LUT, FF, BRAM36, URAM, DSP");
        for (const cJSON *jt = it->next; jt; jt = jt->next)
            if (!strcmp(it->string, jt->string))
                return tsr_err(TSR_ECONFIG, "%s: key %s appears twice", name, k);
        double v = 0;
        int rc;
        if (is_limit) {
            if (!b->has[r])
                return tsr_err(TSR_ECONFIG, "%s: key %s limits a resource the board does not list",
                               name, k);
            if ((rc = get_number(it, name, k, 0.01, 1.0, 0, &v)))
                return rc;
            b->limit[r] = v;
        } else {
            if ((rc = get_number(it, name, k, 0, TSR_BOARD_MAX_RES, 1, &v)))
                return rc;
            b->has[r] = 1;
            b->budget[r] = v;
        }
    }
    return TSR_OK;
}

int tsr_board_parse(const char *json, const char *name, tsr_board_t *out)
{
    static const char *const top_keys[] = {"name", "vendor", "part", "family", "resources",
                                           "limits", "dram", "clock_mhz"};
    static const char *const dram_keys[] = {"bus_bits", "mbytes"};
    const char *bn = name ? name : "board";
    tsr_board_t b;
    char fam[16];
    double d;
    int rc = TSR_OK;
    cJSON *root = NULL;
    memset(&b, 0, sizeof b);
    for (int r = 0; r < TSR_RES_COUNT; r++)
        b.limit[r] = 1.0;
    if (!json || !out)
        return tsr_err(TSR_EINVAL, "%s: no board given", bn);
    /* Numbers as RFC 8259 has them (cJSON takes "04" as 4): tsr_jsonstrict.h. */
    if ((rc = tsr_json_check_numbers(json, bn)))
        goto out;
    root = cJSON_ParseWithOpts(json, NULL, 1);
    if (!root || !cJSON_IsObject(root)) {
        rc = tsr_err(TSR_ECONFIG, "%s: malformed board file: not a JSON object", bn);
        goto out;
    }
    if ((rc = check_keys(root, bn, "", top_keys, sizeof top_keys / sizeof top_keys[0])) ||
        (rc = get_string(root, bn, "name", b.name, sizeof b.name, 1)) ||
        (rc = get_string(root, bn, "vendor", b.vendor, sizeof b.vendor, 0)) ||
        (rc = get_string(root, bn, "part", b.part, sizeof b.part, 1)) ||
        (rc = get_string(root, bn, "family", fam, sizeof fam, 1)))
        goto out;
    size_t fi;
    for (fi = 0; fi < sizeof family_names / sizeof family_names[0]; fi++)
        if (!strcmp(fam, family_names[fi]))
            break;
    if (fi == sizeof family_names / sizeof family_names[0]) {
        rc = tsr_err(TSR_ECONFIG, "%s: key family = \"%s\" is unknown: allowed xc7, xcup, ice40",
                     bn, fam);
        goto out;
    }
    b.family = (tsr_family_e)fi;
    if ((rc = get_classes(root, bn, "resources", &b, 0)) ||
        (rc = get_classes(root, bn, "limits", &b, 1)))
        goto out;
    const int *req = b.family == TSR_FAMILY_ICE40 ? ice40_required : xilinx_required;
    size_t nreq = b.family == TSR_FAMILY_ICE40 ? sizeof ice40_required / sizeof ice40_required[0]
                                               : sizeof xilinx_required / sizeof xilinx_required[0];
    for (size_t i = 0; i < nreq; i++)
        if (!b.has[req[i]]) {
            rc = tsr_err(TSR_ECONFIG, "%s: missing key resources.%s", bn, res_names[req[i]]);
            goto out;
        }
    const cJSON *dram = cJSON_GetObjectItemCaseSensitive(root, "dram");
    if (!dram || !cJSON_IsObject(dram)) {
        rc = tsr_err(TSR_ECONFIG, "%s: %s key dram (an object with bus_bits, mbytes)", bn,
                     dram ? "malformed" : "missing");
        goto out;
    }
    if ((rc = check_keys(dram, bn, "dram.", dram_keys, 2)) ||
        (rc = get_number(cJSON_GetObjectItemCaseSensitive(dram, "bus_bits"), bn, "dram.bus_bits",
                         8, 1024, 1, &d)))
        goto out;
    b.dram_bus_bits = (int)d;
    if ((rc = get_number(cJSON_GetObjectItemCaseSensitive(dram, "mbytes"), bn, "dram.mbytes", 0,
                         1 << 24, 1, &d)))
        goto out;
    b.dram_mbytes = (int)d;
    if ((rc = get_number(cJSON_GetObjectItemCaseSensitive(root, "clock_mhz"), bn, "clock_mhz", 1,
                         2000, 1, &d)))
        goto out;
    b.clock_mhz = (int)d;
    *out = b;
out:
    cJSON_Delete(root);
    return rc;
}

const char *const *tsr_board_names(void)
{
    static const char *names[32];
    size_t i;
    for (i = 0; i < 31 && tsr_board_table[i][0]; i++)
        names[i] = tsr_board_table[i][0];
    names[i] = NULL;
    return names;
}

int tsr_board_load(const char *name_or_path, tsr_board_t *b)
{
    if (!name_or_path)
        return tsr_err(TSR_EINVAL, "no board given");
    for (size_t i = 0; tsr_board_table[i][0]; i++)
        if (!strcmp(tsr_board_table[i][0], name_or_path))
            return tsr_board_parse(tsr_board_table[i][1], name_or_path, b);
    uint8_t *buf = NULL;
    size_t n = 0;
    tsr_file_t f;
    int rc = tsr_file_open(&f, name_or_path, TSR_BOARD_MAX_FILE, "board file");
    if (rc && f.sys_errno == ENOENT) {
        char list[512] = "";
        for (const char *const *p = tsr_board_names(); *p; p++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                     p == tsr_board_names() ? "" : ", ", *p);
        return tsr_err(TSR_EIO, "%s: no such board file, nor a built-in board (%s)", name_or_path,
                       list);
    }
    if (!rc)
        rc = tsr_file_read_all(&f, &buf, &n);
    if (!rc && strlen((const char *)buf) != n)
        rc = tsr_err(TSR_ECONFIG, "%s: malformed board file: contains a NUL byte", name_or_path);
    if (!rc)
        rc = tsr_board_parse((const char *)buf, name_or_path, b);
    free(buf);
    return rc;
}

double tsr_board_usable(const tsr_board_t *b, int res)
{
    return b->has[res] ? floor(b->budget[res] * b->limit[res] + 1e-9) : 0.0;
}

int tsr_board_fits(const tsr_board_t *b, const double used[TSR_RES_COUNT], char *why,
                   int why_len)
{
    int fits = 1;
    size_t len = 0;
    if (why && why_len > 0)
        why[0] = '\0';
    for (int r = 0; r < TSR_RES_COUNT; r++) {
        double cap = tsr_board_usable(b, r);
        if (used[r] <= cap)
            continue;
        fits = 0;
        if (why && why_len > 0 && len < (size_t)why_len) {
            int n = snprintf(why + len, (size_t)why_len - len, "%s%s %g > %g", len ? ", " : "",
                             res_names[r], used[r], cap);
            len += n > 0 ? (size_t)n : 0;
        }
    }
    return fits;
}
