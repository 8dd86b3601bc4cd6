/* tsr_error: thread-local last-error message (see tsr_error.h). */
#include "tsr_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TSR_ERRMSG_MAX 1024

static _Thread_local char errmsg[TSR_ERRMSG_MAX];

int tsr_err(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, sizeof errmsg, fmt, ap);
    va_end(ap);
    return code;
}

int tsr_err_prefix(int code, const char *fmt, ...)
{
    char prefix[TSR_ERRMSG_MAX];
    char old[TSR_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, errmsg, sizeof old);
    /* Truncation of very long messages is fine: the prefix matters most. */
    size_t n = strlen(prefix);
    if (n >= sizeof errmsg)
        n = sizeof errmsg - 1;
    memcpy(errmsg, prefix, n);
    size_t m = strlen(old);
    if (m > sizeof errmsg - 1 - n)
        m = sizeof errmsg - 1 - n;
    memcpy(errmsg + n, old, m);
    errmsg[n + m] = '\0';
    return code;
}

const char *tsr_errmsg(void) { return errmsg; }

static tsr_notice_fn notice_fn;
static void *notice_ctx;

void tsr_set_notice_handler(tsr_notice_fn fn, void *ctx)
{
    notice_fn = fn;
    notice_ctx = ctx;
}

void tsr_notice(const char *fmt, ...)
{
    char line[TSR_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (notice_fn)
        notice_fn(notice_ctx, line);
    else
        fprintf(stderr, "tessera: %s\n", line);
}

void tsr_err_clear(void) { errmsg[0] = '\0'; }

const char *tsr_errname(int code)
{
    switch (code) {
    case TSR_OK: return "OK";
    case TSR_EINVAL: return "EINVAL";
    case TSR_ECONFIG: return "ECONFIG";
    case TSR_EPARSE: return "EPARSE";
    case TSR_EVERIFY: return "EVERIFY";
    case TSR_EDEADLOCK: return "EDEADLOCK";
    case TSR_EBOUNDS: return "EBOUNDS";
    case TSR_ENOMEM: return "ENOMEM";
    case TSR_EIO: return "EIO";
    case TSR_ETIMEOUT: return "ETIMEOUT";
    case TSR_EBACKEND: return "EBACKEND";
    case TSR_EFAULT: return "EFAULT";
    default: return "EUNKNOWN";
    }
}
