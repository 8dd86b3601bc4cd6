/*
 * tsr_strsafe: make an untrusted string (an ONNX node or tensor name, a
 * config key) safe to put into a one-line message or a table.
 *
 * Why: names come from the input file, and a name holding a newline, an
 * ANSI escape sequence or bytes that are not UTF-8 would split an error
 * into several lines, rewrite the user's terminal or garble a log. Every
 * place that formats such a string into a message goes through here:
 *  - control bytes (0x00..0x1f, 0x7f), C1 control characters (U+0080..
 *    U+009F, e.g. the one-byte CSI) and bytes that are not part of valid
 *    UTF-8 (overlong forms, surrogates, > U+10FFFF, stray continuation
 *    bytes) are written as \xNN (two lowercase hex digits per byte);
 *    valid printable UTF-8 is kept as it is; a backslash is kept too, so
 *    a name that already reads "\x0a" is shown as written (messages are
 *    for people, not to be parsed back);
 *  - at most TSR_STRSAFE_MAX bytes of the input are shown: a longer string
 *    (or one that does not fit the buffer) ends in "...".
 */
#ifndef TSR_STRSAFE_H
#define TSR_STRSAFE_H

#include <stddef.h>

#define TSR_STRSAFE_MAX 80                         /* input bytes shown */
#define TSR_STRSAFE_BUF (4 * TSR_STRSAFE_MAX + 4)  /* room for the worst case (every byte escaped) + "..." */

/* Write the safe form of s (at most TSR_STRSAFE_MAX input bytes; NULL
 * reads "(null)") to buf of n >= 4 bytes, always NUL-terminated; returns
 * buf. A result that would not fit in n - 1 bytes is cut at a character
 * boundary and ends in "...". */
const char *tsr_strsafe(const char *s, char *buf, size_t n);
/* Same with max input bytes instead of TSR_STRSAFE_MAX ((size_t)-1: no
 * limit but the buffer's), e.g. for a whole message. */
const char *tsr_strsafe_n(const char *s, size_t max, char *buf, size_t n);

/* For an argument of printf-style formatting: the safe form in a buffer
 * that lives until the end of the enclosing block (a compound literal). */
#define TSR_SAFE(s) tsr_strsafe((s), (char[TSR_STRSAFE_BUF]){0}, TSR_STRSAFE_BUF)

#endif
