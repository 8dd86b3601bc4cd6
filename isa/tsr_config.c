/*
 * tsr_config: parse and validate the hardware configuration and derive
 * every dependent quantity (see tsr_config.h). Validation names the key and
 * the allowed range, because a config is the first thing an architect edits
 * and a silent fallback would make every later number wrong.
 */
#include "tsr_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_file.h"
#include "tsr_isa.h"
#include "tsr_jsonstrict.h"

extern const char *const tsr_preset_table[][2];

/* Boards VTA's TARGET key names, with the bus width and clock Tessera
 * assumes for them when DRAM_BUS_WIDTH / CLOCK_MHZ are absent. */
static const struct {
    const char *name;
    int bus_bits;
    int mhz;
} targets[] = {
    {"sim", 64, 100},     {"tsim", 64, 100},   {"bsim", 64, 100},
    {"pynq", 64, 100},    {"ultra96", 128, 333}, {"zcu104", 128, 333},
    {"de10nano", 64, 100}, {"intelfocl", 512, 200}, {"alveo", 512, 300},
};

enum { K_REQ = 1, K_OPT = 0 };

/* Integer keys: name, where the value goes, allowed range, required. */
typedef struct {
    const char *name;
    size_t offset;
    int lo, hi;
    int required;
} int_key_t;

#define OFF(m) offsetof(tsr_config_t, m)
/* Buffer sizes are range-checked in buffer_depth(), where the allowed range
 * (at least one row, which depends on other keys) is known; here only
 * absurd values are caught. */
#define BUF_ANY_LO (-(1 << 30))
#define BUF_ANY_HI (1 << 30)
static const int_key_t int_keys[] = {
    {"LOG_INP_WIDTH", OFF(log_inp_width), 3, 4, K_REQ},
    {"LOG_WGT_WIDTH", OFF(log_wgt_width), 3, 4, K_REQ},
    {"LOG_ACC_WIDTH", OFF(log_acc_width), 4, 5, K_REQ},
    {"LOG_BATCH", OFF(log_batch), 0, 4, K_REQ},
    {"LOG_UOP_BUFF_SIZE", OFF(log_uop_buff_size), BUF_ANY_LO, BUF_ANY_HI, K_REQ},
    {"LOG_INP_BUFF_SIZE", OFF(log_inp_buff_size), BUF_ANY_LO, BUF_ANY_HI, K_REQ},
    {"LOG_WGT_BUFF_SIZE", OFF(log_wgt_buff_size), BUF_ANY_LO, BUF_ANY_HI, K_REQ},
    {"LOG_ACC_BUFF_SIZE", OFF(log_acc_buff_size), BUF_ANY_LO, BUF_ANY_HI, K_REQ},
    {"DRAM_BUS_WIDTH", OFF(dram_bus_width), 32, 512, K_OPT},
    {"CLOCK_MHZ", OFF(clock_mhz), 1, 1000, K_OPT},
    {"CMD_QUEUE_DEPTH", OFF(cmd_queue_depth), 2, 4096, K_OPT},
    {"DEP_QUEUE_DEPTH", OFF(dep_queue_depth), 1, 255, K_OPT},
    {"DSP_PACK", OFF(dsp_pack), 0, 1, K_OPT},
    {"OUT_BUFF_LUTRAM", OFF(out_buff_lutram), 0, 1, K_OPT},
    {"ACC_SINGLE_COPY", OFF(acc_single_copy), 0, 1, K_OPT},
    {"SERIAL_CORE", OFF(serial_core), 0, 1, K_OPT},
    {"EXACT_REQUANT", OFF(exact_requant), 0, 1, K_OPT},
    {"ACT_LUT", OFF(act_lut), 0, 8, K_OPT}, /* and a power of two (ACT_LUT_SET) */
    {"DEPTHWISE", OFF(depthwise), 0, 8, K_OPT},
};
#define N_INT_KEYS (sizeof int_keys / sizeof int_keys[0])

/* The values ACT_LUT allows (a count of tables the lut op indexes by the
 * low bits of its operand: a power of two), as messages name them. */
#define ACT_LUT_SET "0, 1, 2, 4, 8"

/* Keys handled specially (block sizes, strings, checked-for-consistency keys). */
static const char *const other_keys[] = {
    "TARGET", "HW_VER", "LOG_BLOCK", "LOG_BLOCK_IN", "LOG_BLOCK_OUT",
    "LOG_OUT_WIDTH", "LOG_OUT_BUFF_SIZE",
};

static int *int_at(tsr_config_t *cfg, size_t off) { return (int *)((char *)cfg + off); }

static int ilog2u(uint64_t v)
{
    int r = 0;
    while (v > 1) {
        v >>= 1;
        r++;
    }
    return r;
}

/* Read an integer-valued key; *present = 0 if absent. */
static int get_int(const cJSON *root, const char *cname, const char *key, int lo, int hi,
                   int *val, int *present)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    *present = 0;
    if (!it)
        return TSR_OK;
    if (!cJSON_IsNumber(it))
        return tsr_err(TSR_ECONFIG, "%s: key %s must be an integer in [%d, %d], got a %s", cname,
                       key, lo, hi,
                       cJSON_IsString(it) ? "string" : cJSON_IsBool(it) ? "boolean"
                       : cJSON_IsNull(it) ? "null" : cJSON_IsArray(it) ? "array" : "object");
    double d = it->valuedouble;
    if (!strcmp(key, "ACT_LUT")) { /* a set, not a range */
        /* (the range first: only then is the conversion defined) */
        if (!(d >= 0 && d <= 8 && d == floor(d)) || ((int)d & ((int)d - 1)))
            return tsr_err(TSR_ECONFIG, "%s: key ACT_LUT = %g is not allowed: allowed " ACT_LUT_SET, cname, d);
    }
    if (d != floor(d) || !isfinite(d))
        return tsr_err(TSR_ECONFIG, "%s: key %s must be an integer in [%d, %d], got %g", cname,
                       key, lo, hi, d);
    if (d < lo || d > hi)
        return tsr_err(TSR_ECONFIG, "%s: key %s = %.0f is out of range: allowed [%d, %d]", cname,
                       key, d, lo, hi);
    *val = (int)d;
    *present = 1;
    return TSR_OK;
}

static int get_str(const cJSON *root, const char *cname, const char *key, char *dst, size_t n,
                   int *present)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    *present = 0;
    if (!it)
        return TSR_OK;
    if (!cJSON_IsString(it))
        return tsr_err(TSR_ECONFIG, "%s: key %s must be a string", cname, key);
    if (strlen(it->valuestring) >= n)
        return tsr_err(TSR_ECONFIG, "%s: key %s is longer than %zu characters", cname, key, n - 1);
    snprintf(dst, n, "%s", it->valuestring);
    *present = 1;
    return TSR_OK;
}

/* Check a buffer-size key against its row size and derive its depth. */
static int buffer_depth(const char *cname, const char *key, int log_size, uint32_t row_bytes,
                        uint32_t *depth, int *idx_bits)
{
    int lo = ilog2u(row_bytes);
    int hi = lo + TSR_MAX_IDX_BITS;
    if (hi > 24)
        hi = 24;
    if (log_size < lo || log_size > hi)
        return tsr_err(TSR_ECONFIG,
                       "%s: key %s = %d is out of range: allowed [%d, %d] for %u-byte rows "
                       "(at least one row, at most 2^%d rows and 16 MiB)",
                       cname, key, log_size, lo, hi, row_bytes, TSR_MAX_IDX_BITS);
    *idx_bits = log_size - lo;
    *depth = 1u << *idx_bits;
    return TSR_OK;
}

static int derive(tsr_config_t *c, const char *cname)
{
    int rc;
    c->inp_width = 1 << c->log_inp_width;
    c->wgt_width = 1 << c->log_wgt_width;
    c->acc_width = 1 << c->log_acc_width;
    c->out_width = c->inp_width;
    if (c->acc_width < c->inp_width + c->wgt_width)
        return tsr_err(TSR_ECONFIG,
                       "%s: inconsistent widths: LOG_ACC_WIDTH = %d gives %d-bit accumulators, "
                       "narrower than input (%d) + weight (%d) bits",
                       cname, c->log_acc_width, c->acc_width, c->inp_width, c->wgt_width);
    /* fscale's operand b is a float32 bit pattern: it needs a 32-bit lane */
    if (c->exact_requant && c->acc_width != 32)
        return tsr_err(TSR_ECONFIG,
                       "%s: EXACT_REQUANT = 1 needs 32-bit accumulators (LOG_ACC_WIDTH = 5), got "
                       "LOG_ACC_WIDTH = %d",
                       cname, c->log_acc_width);
    /* ACT_LUT counts tables; the lut op takes its table index from the low
     * bits of its operand, so the count is a power of two */
    if (c->act_lut < 0 || c->act_lut > 8 || (c->act_lut & (c->act_lut - 1)))
        return tsr_err(TSR_ECONFIG, "%s: key ACT_LUT = %d is not allowed: allowed " ACT_LUT_SET, cname,
                       c->act_lut);
    c->batch = 1 << c->log_batch;
    c->block_in = 1 << c->log_block_in;
    c->block_out = 1 << c->log_block_out;
    c->inp_bytes = (uint32_t)(c->batch * c->block_in * c->inp_width / 8);
    c->wgt_bytes = (uint32_t)(c->block_out * c->block_in * c->wgt_width / 8);
    c->acc_bytes = (uint32_t)(c->batch * c->block_out * c->acc_width / 8);
    c->acc8_bytes = (uint32_t)(c->batch * c->block_out);
    c->out_bytes = (uint32_t)(c->batch * c->block_out * c->out_width / 8);
    c->macs_per_op = (uint64_t)c->batch * (uint64_t)c->block_in * (uint64_t)c->block_out;

    if ((rc = buffer_depth(cname, "LOG_INP_BUFF_SIZE", c->log_inp_buff_size, c->inp_bytes,
                           &c->inp_depth, &c->inp_idx_bits)) ||
        (rc = buffer_depth(cname, "LOG_WGT_BUFF_SIZE", c->log_wgt_buff_size, c->wgt_bytes,
                           &c->wgt_depth, &c->wgt_idx_bits)) ||
        (rc = buffer_depth(cname, "LOG_ACC_BUFF_SIZE", c->log_acc_buff_size, c->acc_bytes,
                           &c->acc_depth, &c->acc_idx_bits)))
        return rc;
    c->out_depth = c->acc_depth;
    c->out_buff_size = (uint64_t)c->out_depth * c->out_bytes;

    /* An index of 0 bits still needs a 1-bit field so that the value 0 is encodable. */
    c->uop_dst_bits = c->acc_idx_bits ? c->acc_idx_bits : 1;
    c->uop_src_bits = c->inp_idx_bits > c->acc_idx_bits ? c->inp_idx_bits : c->acc_idx_bits;
    if (!c->uop_src_bits)
        c->uop_src_bits = 1;
    c->uop_wgt_bits = c->wgt_idx_bits ? c->wgt_idx_bits : 1;
    int uop_bits = c->uop_dst_bits + c->uop_src_bits + c->uop_wgt_bits;
    c->uop_bytes = uop_bits <= 32 ? 4 : 8;
    if ((rc = buffer_depth(cname, "LOG_UOP_BUFF_SIZE", c->log_uop_buff_size, c->uop_bytes,
                           &c->uop_depth, &c->uop_idx_bits)))
        return rc;

    int s = c->uop_idx_bits;
    if (c->inp_idx_bits > s) s = c->inp_idx_bits;
    if (c->wgt_idx_bits > s) s = c->wgt_idx_bits;
    if (c->acc_idx_bits > s) s = c->acc_idx_bits;
    if (ilog2u((uint64_t)c->act_lut) > s) s = ilog2u((uint64_t)c->act_lut); /* lut rows */
    c->sram_base_bits = s ? s : 1;

    if (c->dsp_pack && (c->inp_width != 8 || c->wgt_width != 8))
        return tsr_err(TSR_ECONFIG,
                       "%s: key DSP_PACK = 1 needs int8 inputs and weights (LOG_INP_WIDTH = "
                       "LOG_WGT_WIDTH = 3): two products share one 25 x 18-bit multiplier",
                       cname);
    /* The depthwise mode runs tap k of lane c on the multiplier of output
     * column k (with DSP_PACK, of the column pair k) and input c: each lane
     * is an input and an output channel at once, and the taps must fit the
     * columns (hw/rtl/tsr_gemm_core.sv) */
    if (c->depthwise && c->block_in != c->block_out)
        return tsr_err(TSR_ECONFIG,
                       "%s: DEPTHWISE = %d needs BLOCK_IN == BLOCK_OUT (each lane is one channel), got %d and %d",
                       cname, c->depthwise, c->block_in, c->block_out);
    if (c->depthwise > c->block_out / (c->dsp_pack ? 2 : 1))
        return tsr_err(TSR_ECONFIG,
                       "%s: DEPTHWISE = %d taps do not fit the %d output columns%s (at most %d)", cname,
                       c->depthwise, c->block_out, c->dsp_pack ? " paired by DSP_PACK" : "",
                       c->block_out / (c->dsp_pack ? 2 : 1));
    c->dw_group_bits = 0;
    while (c->depthwise && (c->depthwise << (c->dw_group_bits + 1)) <= c->block_out)
        c->dw_group_bits++;
    if (c->dram_bus_width & (c->dram_bus_width - 1))
        return tsr_err(TSR_ECONFIG,
                       "%s: key DRAM_BUS_WIDTH = %d must be a power of two in [32, 512]", cname,
                       c->dram_bus_width);
    if ((rc = tsr_isa_check_config(c)))
        return tsr_err_prefix(rc, "%s: ", cname);
    return TSR_OK;
}

int tsr_config_parse(const char *json, const char *name, tsr_config_t *cfg)
{
    const char *cname = name ? name : "config";
    int rc = TSR_OK;
    cJSON *root = NULL;
    tsr_config_t c;
    memset(&c, 0, sizeof c);

    if (!json || !cfg)
        return tsr_err(TSR_EINVAL, "%s: no config given", cname);
    /* Numbers as RFC 8259 has them (cJSON takes "04" as 4): tsr_jsonstrict.h. */
    if ((rc = tsr_json_check_numbers(json, cname)))
        goto out;
    /* Trailing text after the object means a damaged or concatenated file. */
    root = cJSON_ParseWithOpts(json, NULL, 1);
    if (!root) {
        const char *where = cJSON_GetErrorPtr();
        int line = 1;
        for (const char *p = json; where && p < where && *p; p++)
            line += *p == '\n';
        rc = tsr_err(TSR_ECONFIG, "%s: malformed JSON near line %d", cname, line);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        rc = tsr_err(TSR_ECONFIG, "%s: malformed JSON config: top level must be an object", cname);
        goto out;
    }
    /* Unknown keys are errors: a misspelt key silently ignored is a wrong design. */
    for (const cJSON *it = root->child; it; it = it->next) {
        int known = 0;
        for (size_t i = 0; i < N_INT_KEYS && !known; i++)
            known = !strcmp(it->string, int_keys[i].name);
        for (size_t i = 0; i < sizeof other_keys / sizeof other_keys[0] && !known; i++)
            known = !strcmp(it->string, other_keys[i]);
        if (!known) {
            rc = tsr_err(TSR_ECONFIG, "%s: unknown key \"%s\"", cname, it->string);
            goto out;
        }
        for (const cJSON *jt = it->next; jt; jt = jt->next)
            if (!strcmp(it->string, jt->string)) {
                rc = tsr_err(TSR_ECONFIG, "%s: key %s appears twice", cname, it->string);
                goto out;
            }
    }

    int present;
    if ((rc = get_str(root, cname, "TARGET", c.target, sizeof c.target, &present)))
        goto out;
    if (!present)
        snprintf(c.target, sizeof c.target, "sim");
    size_t ti;
    for (ti = 0; ti < sizeof targets / sizeof targets[0]; ti++)
        if (!strcmp(targets[ti].name, c.target))
            break;
    if (ti == sizeof targets / sizeof targets[0]) {
        rc = tsr_err(TSR_ECONFIG,
                     "%s: key TARGET = \"%s\" is unknown: allowed sim, tsim, bsim, pynq, ultra96, "
                     "zcu104, de10nano, intelfocl, alveo",
                     cname, c.target);
        goto out;
    }
    if ((rc = get_str(root, cname, "HW_VER", c.hw_ver, sizeof c.hw_ver, &present)))
        goto out;
    c.dram_bus_width = targets[ti].bus_bits;
    c.clock_mhz = targets[ti].mhz;
    c.cmd_queue_depth = 512;
    c.dep_queue_depth = 16;

    for (size_t i = 0; i < N_INT_KEYS; i++) {
        const int_key_t *k = &int_keys[i];
        if ((rc = get_int(root, cname, k->name, k->lo, k->hi, int_at(&c, k->offset), &present)))
            goto out;
        if (!present && k->required) {
            if (k->lo == BUF_ANY_LO)
                rc = tsr_err(TSR_ECONFIG, "%s: missing key %s (log2 of the buffer size in bytes)",
                             cname, k->name);
            else
                rc = tsr_err(TSR_ECONFIG, "%s: missing key %s (allowed [%d, %d])", cname, k->name,
                             k->lo, k->hi);
            goto out;
        }
    }

    int blk = 0, bin = 0, bout = 0, has_blk, has_in, has_out;
    if ((rc = get_int(root, cname, "LOG_BLOCK", 1, 6, &blk, &has_blk)) ||
        (rc = get_int(root, cname, "LOG_BLOCK_IN", 1, 6, &bin, &has_in)) ||
        (rc = get_int(root, cname, "LOG_BLOCK_OUT", 1, 6, &bout, &has_out)))
        goto out;
    if (has_blk) {
        if ((has_in && bin != blk) || (has_out && bout != blk)) {
            rc = tsr_err(TSR_ECONFIG,
                         "%s: inconsistent keys: LOG_BLOCK = %d but LOG_BLOCK_IN/LOG_BLOCK_OUT "
                         "differ; give LOG_BLOCK alone or both LOG_BLOCK_IN and LOG_BLOCK_OUT",
                         cname, blk);
            goto out;
        }
        c.log_block_in = c.log_block_out = blk;
    } else if (has_in && has_out) {
        c.log_block_in = bin;
        c.log_block_out = bout;
    } else {
        rc = tsr_err(TSR_ECONFIG,
                     "%s: missing key %s (allowed [1, 6]): give LOG_BLOCK, or LOG_BLOCK_IN and "
                     "LOG_BLOCK_OUT",
                     cname, has_in ? "LOG_BLOCK_OUT" : has_out ? "LOG_BLOCK_IN" : "LOG_BLOCK");
        goto out;
    }

    if ((rc = derive(&c, cname)))
        goto out;

    int ow;
    if ((rc = get_int(root, cname, "LOG_OUT_WIDTH", 3, 4, &ow, &present)))
        goto out;
    if (present && ow != c.log_inp_width) {
        rc = tsr_err(TSR_ECONFIG,
                     "%s: inconsistent key LOG_OUT_WIDTH = %d: outputs have the input width, "
                     "allowed [%d, %d]",
                     cname, ow, c.log_inp_width, c.log_inp_width);
        goto out;
    }
    int ob;
    int want_ob = ilog2u(c.out_buff_size);
    if ((rc = get_int(root, cname, "LOG_OUT_BUFF_SIZE", 0, 30, &ob, &present)))
        goto out;
    if (present && ob != want_ob) {
        rc = tsr_err(TSR_ECONFIG,
                     "%s: inconsistent key LOG_OUT_BUFF_SIZE = %d: the output buffer mirrors the "
                     "accumulator rows, so it must be %d (allowed [%d, %d])",
                     cname, ob, want_ob, want_ob, want_ob);
        goto out;
    }
    *cfg = c;
out:
    cJSON_Delete(root);
    return rc;
}

const char *tsr_config_preset_json(const char *name)
{
    for (size_t i = 0; name && tsr_preset_table[i][0]; i++)
        if (!strcmp(tsr_preset_table[i][0], name))
            return tsr_preset_table[i][1];
    return NULL;
}

const char *const *tsr_config_preset_names(void)
{
    static const char *names[16];
    size_t i;
    for (i = 0; i < 15 && tsr_preset_table[i][0]; i++)
        names[i] = tsr_preset_table[i][0];
    names[i] = NULL;
    return names;
}

/* A preset's or file's JSON with one integer key set: the key's own value
 * replaced, or the key added (the parser refuses a key given twice). */
static int parse_with(const char *json, const char *name, const char *key, int value, tsr_config_t *cfg)
{
    cJSON *root = cJSON_ParseWithOpts(json, NULL, 1);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tsr_config_parse(json, name, cfg); /* its own message for the malformed text */
    }
    cJSON_DeleteItemFromObjectCaseSensitive(root, key);
    char *text = cJSON_AddNumberToObject(root, key, value) ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return tsr_err(TSR_ENOMEM, "%s: out of memory", name);
    int rc = tsr_config_parse(text, name, cfg);
    free(text);
    return rc;
}

static int load(const char *path_or_preset, const char *key, int value, tsr_config_t *cfg);

int tsr_config_load(const char *path_or_preset, tsr_config_t *cfg)
{
    return load(path_or_preset, NULL, 0, cfg);
}

int tsr_config_load_with(const char *path_or_preset, const char *key, int value, tsr_config_t *cfg)
{
    if (!key)
        return tsr_err(TSR_EINVAL, "no config key given");
    return load(path_or_preset, key, value, cfg);
}

static int load(const char *path_or_preset, const char *key, int value, tsr_config_t *cfg)
{
    const char *preset = tsr_config_preset_json(path_or_preset);
    if (preset)
        return key ? parse_with(preset, path_or_preset, key, value, cfg) : tsr_config_parse(preset, path_or_preset, cfg);
    if (!path_or_preset)
        return tsr_err(TSR_EINVAL, "no config given");
    uint8_t *buf = NULL;
    size_t n = 0;
    tsr_file_t f;
    int rc = tsr_file_open(&f, path_or_preset, TSR_CONFIG_MAX_FILE, "config file");
    if (rc && f.sys_errno == ENOENT)
        return tsr_err(TSR_EIO, "%s: no such config file, nor a preset (default, tiny, large, ultra96, zcu104, u55c)",
                       path_or_preset);
    if (!rc)
        rc = tsr_file_read_all(&f, &buf, &n);
    if (!rc && strlen((const char *)buf) != n)
        rc = tsr_err(TSR_ECONFIG, "%s: malformed JSON: file contains a NUL byte", path_or_preset);
    if (!rc)
        rc = key ? parse_with((const char *)buf, path_or_preset, key, value, cfg)
                 : tsr_config_parse((const char *)buf, path_or_preset, cfg);
    free(buf);
    return rc;
}

size_t tsr_config_key_values(const tsr_config_t *c, int32_t *out, size_t n)
{
    const size_t total = N_INT_KEYS + 2;
    for (size_t i = 0; i < N_INT_KEYS && i < n; i++)
        out[i] = *(const int *)((const char *)c + int_keys[i].offset);
    if (N_INT_KEYS < n)
        out[N_INT_KEYS] = c->log_block_in;
    if (N_INT_KEYS + 1 < n)
        out[N_INT_KEYS + 1] = c->log_block_out;
    return total;
}

uint32_t tsr_config_elem_bytes(const tsr_config_t *c, int mem_type)
{
    switch (mem_type) {
    case TSR_MEM_UOP: return c->uop_bytes;
    case TSR_MEM_WGT: return c->wgt_bytes;
    case TSR_MEM_INP: return c->inp_bytes;
    case TSR_MEM_ACC: return c->acc_bytes;
    case TSR_MEM_OUT: return c->out_bytes;
    case TSR_MEM_ACC8: return c->acc8_bytes;
    case TSR_MEM_LUT: return c->act_lut ? TSR_LUT_ENTRIES : 0;
    default: return 0;
    }
}

uint32_t tsr_config_sram_depth(const tsr_config_t *c, int mem_type)
{
    switch (mem_type) {
    case TSR_MEM_UOP: return c->uop_depth;
    case TSR_MEM_WGT: return c->wgt_depth;
    case TSR_MEM_INP: return c->inp_depth;
    case TSR_MEM_ACC: return c->acc_depth;
    case TSR_MEM_OUT: return c->out_depth;
    case TSR_MEM_ACC8: return c->acc_depth;
    case TSR_MEM_LUT: return (uint32_t)c->act_lut;
    default: return 0;
    }
}

uint64_t tsr_config_buffer_bytes(const tsr_config_t *c, int mem_type)
{
    if (mem_type == TSR_MEM_ACC8)
        mem_type = TSR_MEM_ACC; /* 8-bit loads fill acc rows; the buffer is acc's */
    return (uint64_t)tsr_config_sram_depth(c, mem_type) * tsr_config_elem_bytes(c, mem_type);
}

void tsr_config_print(const tsr_config_t *c, void *file)
{
    FILE *f = file;
    fprintf(f, "target            %s (%d-bit DRAM bus, %d MHz)\n", c->target, c->dram_bus_width,
            c->clock_mhz);
    fprintf(f, "tensor op         %d x %d x %d (BATCH x BLOCK_IN x BLOCK_OUT) = %llu MACs/op\n",
            c->batch, c->block_in, c->block_out, (unsigned long long)c->macs_per_op);
    fprintf(f, "widths            input int%d, weight int%d, accumulator int%d, output int%d\n",
            c->inp_width, c->wgt_width, c->acc_width, c->out_width);
    fprintf(f, "peak              %.1f GOPS at %d MHz (2 ops per MAC)\n",
            2.0 * (double)c->macs_per_op * c->clock_mhz / 1000.0, c->clock_mhz);
    fprintf(f, "%-8s %10s %10s %8s %9s\n", "buffer", "bytes", "row bytes", "rows", "idx bits");
#define ROW(n, m, rb, d, b)                                                                         \
    fprintf(f, "%-8s %10llu %10u %8u %9d\n", n, (unsigned long long)tsr_config_buffer_bytes(c, m), rb, d, b)
    ROW("uop", TSR_MEM_UOP, c->uop_bytes, c->uop_depth, c->uop_idx_bits);
    ROW("inp", TSR_MEM_INP, c->inp_bytes, c->inp_depth, c->inp_idx_bits);
    ROW("wgt", TSR_MEM_WGT, c->wgt_bytes, c->wgt_depth, c->wgt_idx_bits);
    ROW("acc", TSR_MEM_ACC, c->acc_bytes, c->acc_depth, c->acc_idx_bits);
    ROW("out", TSR_MEM_OUT, c->out_bytes, c->out_depth, c->acc_idx_bits);
    if (c->act_lut)
        ROW("lut", TSR_MEM_LUT, (uint32_t)TSR_LUT_ENTRIES, (uint32_t)c->act_lut, 0);
#undef ROW
    fprintf(f, "uop               %d bits used of %u bytes (dst %d, src %d, wgt %d)\n",
            c->uop_dst_bits + c->uop_src_bits + c->uop_wgt_bits, c->uop_bytes, c->uop_dst_bits,
            c->uop_src_bits, c->uop_wgt_bits);
    fprintf(f, "queues            command %d entries, token %d entries\n", c->cmd_queue_depth,
            c->dep_queue_depth);
    fprintf(f, "multipliers       %s\n",
            c->dsp_pack ? "two int8 products per multiplier (DSP_PACK)" : "one product each");
    fprintf(f, "output buffer     %s\n",
            c->out_buff_lutram ? "LUT RAM (OUT_BUFF_LUTRAM)" : "block RAM");
    fprintf(f, "accumulator       %s\n",
            c->acc_single_copy ? "one copy, ALU ops reading a new src row every other cycle (ACC_SINGLE_COPY)"
                               : "two copies (dst and src read in one cycle)");
    fprintf(f, "microarchitecture %s\n",
            c->serial_core ? "serial: one instruction at a time, byte-wide DMA (SERIAL_CORE)"
                           : "pipelined: fetch, load, compute and store stages in parallel");
    fprintf(f, "requantization    %s\n",
            c->exact_requant ? "fixed point and float32 (fscale, EXACT_REQUANT)" : "fixed point");
    if (c->depthwise)
        fprintf(f, "depthwise         GEMM depthwise mode, %d taps per op on %d lanes, %d tap groups per weight row "
                   "(DEPTHWISE)\n",
                c->depthwise, c->batch * c->block_out, 1 << c->dw_group_bits);
    if (c->act_lut)
        fprintf(f, "activation        %d table%s of 256 int8 entries (ALU op lut, ACT_LUT)\n", c->act_lut,
                c->act_lut > 1 ? "s" : "");

    static const char *fmts[] = {"MEM", "GEMM", "ALU", "FINISH"};
    static const uint32_t ops[] = {TSR_OP_LOAD, TSR_OP_GEMM, TSR_OP_ALU, TSR_OP_FINISH};
    for (int i = 0; i < 4; i++) {
        tsr_format_t fm;
        if (tsr_isa_format(c, ops[i], &fm) == TSR_OK)
            fprintf(f, "insn %-12s %d of 128 bits\n", fmts[i], fm.total_bits);
    }
}
