/*
 * tsr_jsonstrict: the number check cJSON does not make. cJSON reads a
 * number with strtod, so it accepts what JSON (RFC 8259) forbids: a leading
 * zero ("LOG_BLOCK": 04 reads as 4), a leading '.', a trailing '.' ("1."),
 * and then takes whatever strtod takes. A config is the first thing an
 * architect edits, and a value that another JSON reader (Python's json,
 * jq) refuses or reads differently must not be silently accepted here.
 *
 * The check scans the text once before cJSON parses it: outside strings,
 * every bare token (a run of letters, digits, '+', '-', '.') must be true,
 * false, null or an RFC 8259 number
 *     -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
 * so leading zeros, '+1', hex (0x10), NaN, Infinity, "1." and ".5" are
 * refused with one line naming the key the value belongs to and its line.
 * Everything else (structure, strings) is left to cJSON.
 */
#ifndef TSR_JSONSTRICT_H
#define TSR_JSONSTRICT_H

/* TSR_OK, or TSR_ECONFIG with "NAME: line L: key K: T is not a JSON number
 * (RFC 8259: ...)". json is NUL-terminated. */
int tsr_json_check_numbers(const char *json, const char *name);

#endif
