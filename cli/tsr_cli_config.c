/* tsr_cli_config: `tessera config ...` (tsr_cli_config.h). */
#include "tsr_cli_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_cli_common.h"
#include "tsr_config.h"
#include "tsr_emit.h"
#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_regs.h"

static const char *config_help =
    "usage: tessera config show CONFIG\n"
    "       tessera config show --batch [--name NAME] < CONFIGS.jsonl\n"
    "       tessera config emit-sv CONFIG [-o FILE]\n"
    "       tessera config emit-kernel-xml CONFIG [-o FILE]\n"
    "       tessera config emit-regmap CONFIG [-o FILE]\n"
    "\n"
    "CONFIG is a JSON file (VTA's vta_config.json keys plus Tessera's) or a\n"
    "preset name: default, tiny, large.\n"
    "  show      print every key and derived value (buffer depths, field widths)\n"
    "  emit-sv   write the SystemVerilog package tsr_pkg for this config\n"
    "  emit-kernel-xml  write the Vitis RTL kernel description (kernel.xml):\n"
    "            ap_ctrl_hs, the arguments at their register offsets\n"
    "  emit-regmap      write the AXI4-Lite register map as a Markdown table\n"
    "  -o FILE   output file (default: stdout)\n"
    "  --batch   check many configs in one process: each line of stdin is one JSON\n"
    "            config (at most 1 MiB); each gets one line on stdout, in order:\n"
    "            {\"buffers\": {\"uop\": BYTES, \"inp\": ..., \"wgt\": ..., \"acc\": ...,\n"
    "            \"out\": ...}, \"macs\": MACS_PER_OP, \"bus_bits\": N, \"clock_mhz\": N}\n"
    "            or {\"error\": \"MESSAGE\"} (what `config show` says of that config).\n"
    "            A bad line (malformed, too long, empty, not UTF-8) is that line's error;\n"
    "            exit 0 once every line is answered, 1 if stdin or stdout fails\n"
    "  --name NAME  the config's name in --batch messages (default: \"line N\")\n";

/* Write one of the generated files of cfg (named cfgname) to out. The text
 * is generated in memory first: a refusal (e.g. a config the RTL cannot
 * build) leaves out untouched. */
static int emit(const char *sub, const tsr_config_t *cfg, const char *cfgname, const char *out)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return tsr_cli_fail(tsr_err(TSR_ENOMEM, "out of memory"));
    int rc = !strcmp(sub, "emit-sv")           ? tsr_emit_sv(cfg, cfgname, m)
             : !strcmp(sub, "emit-kernel-xml") ? tsr_emit_kernel_xml((unsigned)cfg->dram_bus_width, m)
                                               : tsr_regmap_doc(m);
    if (fclose(m) && !rc)
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (rc) {
        free(buf);
        return tsr_cli_fail(rc);
    }
    FILE *f = tsr_cli_open_out(out);
    if (!f) {
        free(buf);
        return tsr_cli_fail(TSR_EIO);
    }
    int rc2 = fwrite(buf, 1, len, f) == len ? TSR_OK : tsr_err(TSR_EIO, "%s: write error", out ? out : "stdout");
    free(buf);
    int rc3 = tsr_cli_close_out(f, out);
    return rc2 || rc3 ? tsr_cli_fail(rc2 ? rc2 : rc3) : 0;
}

/* ------------------------------------------------------------ --batch */

/* Bytes of a valid UTF-8 sequence at s (n bytes left), 0 if none starts there: no overlong
 * forms, no surrogates, nothing past U+10FFFF (RFC 3629). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

/* Offset of the first byte of s that starts no valid UTF-8 sequence, or n. */
static size_t utf8_bad_at(const unsigned char *s, size_t n)
{
    size_t i = 0, k;
    while (i < n && (k = utf8_seq(s + i, n - i)))
        i += k;
    return i;
}

/* An error message as a JSON string must be UTF-8: a message is cut at a fixed length, which
 * may split a character of an echoed key; such bytes become '?'. */
static void utf8_fix(char *msg)
{
    unsigned char *s = (unsigned char *)msg;
    size_t n = strlen(msg);
    for (size_t i = utf8_bad_at(s, n); i < n; i += 1 + utf8_bad_at(s + i + 1, n - i - 1))
        s[i] = '?';
}

/* Print one answer line (a cJSON object, freed here); 0, or -1 when stdout fails. */
static int batch_put(cJSON *o)
{
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) {
        tsr_err(TSR_ENOMEM, "out of memory writing a --batch answer");
        return -1;
    }
    /* one line at a time: a caller feeding lines through a pipe reads each answer at once */
    int bad = fputs(text, stdout) < 0 || fputc('\n', stdout) == EOF || fflush(stdout);
    cJSON_free(text);
    if (bad)
        tsr_err(TSR_EIO, "standard output: write failed");
    return bad ? -1 : 0;
}

/* The answer to one line: the derived values `config show` prints, or its error message.
 * Buffer bytes come from tsr_config_buffer_bytes, as show's "bytes" column does. */
static cJSON *batch_answer(const char *line, size_t n, size_t len, const char *name)
{
    static const struct {
        const char *name;
        int mem;
    } bufs[] = {{"uop", TSR_MEM_UOP}, {"inp", TSR_MEM_INP}, {"wgt", TSR_MEM_WGT}, {"acc", TSR_MEM_ACC},
                {"out", TSR_MEM_OUT}};
    tsr_config_t cfg;
    int rc;
    size_t bad;
    tsr_err_clear();
    if (len > TSR_CONFIG_MAX_FILE)
        rc = tsr_err(TSR_EBOUNDS, "%s: the config line is %zu bytes, more than the %u allowed", name, len,
                     TSR_CONFIG_MAX_FILE);
    else if (!n)
        rc = tsr_err(TSR_ECONFIG, "%s: empty line (give one JSON config per line)", name);
    else if (strlen(line) != n)
        rc = tsr_err(TSR_ECONFIG, "%s: malformed JSON: line contains a NUL byte", name);
    else if ((bad = utf8_bad_at((const unsigned char *)line, n)) != n)
        rc = tsr_err(TSR_ECONFIG, "%s: not UTF-8 text (byte %zu)", name, bad + 1);
    else
        rc = tsr_config_parse(line, name, &cfg);
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tsr_cli_errtext(rc));
        utf8_fix(msg);
        return cJSON_AddStringToObject(o, "error", msg) ? o : (cJSON_Delete(o), NULL);
    }
    cJSON *b = cJSON_AddObjectToObject(o, "buffers");
    int ok = b != NULL;
    for (size_t i = 0; ok && i < sizeof bufs / sizeof bufs[0]; i++)
        ok = cJSON_AddNumberToObject(b, bufs[i].name, (double)tsr_config_buffer_bytes(&cfg, bufs[i].mem)) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "macs", (double)cfg.macs_per_op) &&
         cJSON_AddNumberToObject(o, "bus_bits", cfg.dram_bus_width) &&
         cJSON_AddNumberToObject(o, "clock_mhz", cfg.clock_mhz);
    return ok ? o : (cJSON_Delete(o), NULL);
}

/* `config show --batch`: one answer per stdin line, in constant memory (a line longer than
 * TSR_CONFIG_MAX_FILE is counted to its end, not held). */
static int batch(const char *fixed_name)
{
    char *line = malloc(TSR_CONFIG_MAX_FILE + 1);
    if (!line)
        return tsr_cli_fail(tsr_err(TSR_ENOMEM, "out of memory for a --batch line"));
    unsigned long long lineno = 0;
    int c = 0, rc = 0;
    while (!rc && c != EOF) {
        size_t n = 0, len = 0;
        while ((c = getchar()) != EOF && c != '\n') {
            if (len < TSR_CONFIG_MAX_FILE)
                line[n++] = (char)c;
            len += len < SIZE_MAX;
        }
        if (c == EOF && !len)
            break; /* end of input (a last line without '\n' is still a line) */
        line[n] = '\0';
        char name[64];
        snprintf(name, sizeof name, "line %llu", ++lineno);
        rc = batch_put(batch_answer(line, n, len, fixed_name ? fixed_name : name));
    }
    int read_errno = errno;
    free(line);
    if (!rc && ferror(stdin))
        rc = tsr_err(TSR_EIO, "standard input: %s", strerror(read_errno));
    return rc ? tsr_cli_fail(rc) : 0;
}

int tsr_cli_config(int argc, char **argv)
{
    const char *out = NULL, *name = NULL;
    int batch_mode = 0;
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(config_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    static const struct option opts[] = {{"output", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'},
                                         {"batch", no_argument, 0, 'B'}, {"name", required_argument, 0, 'N'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        if (c == 'o')
            out = optarg;
        else if (c == 'B')
            batch_mode = 1;
        else if (c == 'N')
            name = optarg;
        else if (c == 'h') {
            fputs(config_help, stdout);
            return 0;
        } else
            return tsr_cli_usage("config", "bad option");
    }
    if (batch_mode || name) {
        if (strcmp(sub, "show") || !batch_mode)
            return tsr_cli_usage("config", "--batch and --name are options of `config show --batch`");
        if (optind != argc || out)
            return tsr_cli_usage("config", "show --batch reads the configs from stdin: no CONFIG, no -o");
        return batch(name);
    }
    if (optind != argc - 1)
        return tsr_cli_usage("config", "expected exactly one CONFIG");
    tsr_config_t cfg;
    int rc = tsr_config_load(argv[optind], &cfg);
    if (rc)
        return tsr_cli_fail(rc);
    if (!strcmp(sub, "show")) {
        tsr_config_print(&cfg, stdout);
        return 0;
    }
    if (!strcmp(sub, "emit-sv") || !strcmp(sub, "emit-kernel-xml") || !strcmp(sub, "emit-regmap"))
        return emit(sub, &cfg, argv[optind], out);
    return tsr_cli_usage("config", "unknown subcommand (show, emit-sv, emit-kernel-xml, emit-regmap)");
}
