/* tsr_jsonstrict: RFC 8259 numbers in JSON text before cJSON reads it (see tsr_jsonstrict.h). */
#include "tsr_jsonstrict.h"

#include <string.h>
#include <strings.h>

#include "tsr_error.h"
#include "tsr_strsafe.h"

/* Whether p[0..n) is an RFC 8259 number. */
static int json_number(const char *p, size_t n)
{
    size_t i = 0;
    if (i < n && p[i] == '-')
        i++;
    if (i < n && p[i] == '0')
        i++;
    else if (i < n && p[i] >= '1' && p[i] <= '9')
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
    else
        return 0;
    if (i < n && p[i] == '.') {
        const size_t d = ++i;
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
        if (i == d)
            return 0;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-'))
            i++;
        const size_t d = i;
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
        if (i == d)
            return 0;
    }
    return i == n;
}

static int bare_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' || c == '-' ||
           c == '.' || c == '_';
}

/* A token meant as a number: it starts like one, or is a spelling of NaN or
 * infinity that some readers take. */
static int looks_numeric(const char *t, size_t n)
{
    static const char *const words[] = {"nan", "inf", "infinity"};
    if ((*t >= '0' && *t <= '9') || *t == '-' || *t == '+' || *t == '.')
        return 1;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        if (n == strlen(words[w]) && !strncasecmp(t, words[w], n))
            return 1;
    return 0;
}

int tsr_json_check_numbers(const char *json, const char *name)
{
    const char *nm = name ? name : "JSON";
    const char *key = NULL, *str = NULL; /* the last key seen, the last string */
    size_t keylen = 0, strlen_ = 0;
    int line = 1;
    if (!json)
        return TSR_OK;
    for (const char *p = json; *p;) {
        if (*p == '"') { /* a string: skip it, escapes included */
            const char *s = ++p;
            while (*p && *p != '"') {
                if (*p == '\\' && p[1])
                    p++;
                line += *p == '\n';
                p++;
            }
            str = s, strlen_ = (size_t)(p - s);
            if (*p)
                p++;
            continue;
        }
        if (*p == ':' && str) { /* the string before a ':' is a key */
            key = str, keylen = strlen_;
            p++;
            continue;
        }
        if (!bare_char(*p)) {
            line += *p == '\n';
            p++;
            continue;
        }
        const char *t = p;
        while (bare_char(*p))
            p++;
        const size_t n = (size_t)(p - t);
        /* other bare words (an unquoted string) cJSON refuses itself, as malformed JSON */
        if (!looks_numeric(t, n) || json_number(t, n))
            continue;
        char tok[TSR_STRSAFE_MAX + 1], kname[TSR_STRSAFE_MAX + 1];
        const size_t tn = n < TSR_STRSAFE_MAX ? n : TSR_STRSAFE_MAX, kn = keylen < TSR_STRSAFE_MAX ? keylen
                                                                                                : TSR_STRSAFE_MAX;
        memcpy(tok, t, tn), tok[tn] = '\0';
        memcpy(kname, key ? key : "", kn), kname[kn] = '\0';
        if (key)
            return tsr_err(TSR_ECONFIG, "%s: line %d: key %s: %s%s is not a JSON number (RFC 8259: no leading "
                           "zeros, '+', hex, NaN or Infinity; digits on both sides of a '.')", nm, line,
                           TSR_SAFE(kname), TSR_SAFE(tok), n > tn ? "..." : "");
        return tsr_err(TSR_ECONFIG, "%s: line %d: %s%s is not a JSON number (RFC 8259: no leading zeros, '+', hex, "
                       "NaN or Infinity; digits on both sides of a '.')", nm, line, TSR_SAFE(tok),
                       n > tn ? "..." : "");
    }
    return TSR_OK;
}
