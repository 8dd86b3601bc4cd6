/* tsr_strsafe: untrusted strings made printable on one line (see tsr_strsafe.h). */
#include "tsr_strsafe.h"

#include <stdint.h>
#include <string.h>

/* Length (1..4) of the valid UTF-8 character at p (at most left bytes),
 * or 0 if p does not start one (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
static size_t utf8_len(const uint8_t *p, size_t left)
{
    const uint8_t c = p[0];
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else
        return 0;
    if (left < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* The next character's safe form into out (<= 16 bytes); returns its
 * length and sets *used to the input bytes it consumed. */
static size_t one_char(const uint8_t *p, size_t left, char *out, size_t *used)
{
    static const char hex[] = "0123456789abcdef";
    size_t len = utf8_len(p, left);
    /* printable: ASCII but the controls, or a character beyond the C1 controls */
    if ((len == 1 && p[0] >= 0x20 && p[0] != 0x7f) || (len == 2 && !(p[0] == 0xc2 && p[1] < 0xa0)) || len > 2) {
        memcpy(out, p, len);
        *used = len;
        return len;
    }
    if (!len)
        len = 1; /* an invalid byte alone */
    for (size_t i = 0; i < len; i++) {
        out[4 * i] = '\\';
        out[4 * i + 1] = 'x';
        out[4 * i + 2] = hex[p[i] >> 4];
        out[4 * i + 3] = hex[p[i] & 15];
    }
    *used = len;
    return 4 * len;
}

const char *tsr_strsafe_n(const char *s, size_t max, char *buf, size_t n)
{
    if (!buf || n < 4)
        return buf && n ? (buf[0] = '\0', buf) : "";
    if (!s)
        s = "(null)";
    const uint8_t *p = (const uint8_t *)s;
    size_t len = strnlen(s, max), need = 0, i = 0, used;
    char c[16];
    /* does it all fit? then no "..." is needed */
    while (i < len && need <= n - 1) {
        need += one_char(p + i, len - i, c, &used);
        i += used;
    }
    const int cut = need > n - 1 || s[len] != '\0';
    const size_t room = cut ? n - 4 : n - 1; /* leave room for the "..." */
    size_t o = 0;
    for (i = 0; i < len;) {
        const size_t k = one_char(p + i, len - i, c, &used);
        if (o + k > room)
            break;
        memcpy(buf + o, c, k);
        o += k;
        i += used;
    }
    if (cut)
        memcpy(buf + o, "...", 3), o += 3;
    buf[o] = '\0';
    return buf;
}

const char *tsr_strsafe(const char *s, char *buf, size_t n)
{
    return tsr_strsafe_n(s, TSR_STRSAFE_MAX, buf, n);
}
