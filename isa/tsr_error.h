/*
 * tsr_error: negative error codes shared by every Tessera layer, plus a
 * thread-local "last error" message so that a caller several layers up can
 * print exactly what went wrong (which key, which instruction, which field)
 * without every function carrying a message buffer.
 */
#ifndef TSR_ERROR_H
#define TSR_ERROR_H

#include <stddef.h>

enum {
    TSR_OK = 0,
    TSR_EINVAL = -1,    /* bad argument or malformed input */
    TSR_ECONFIG = -2,   /* bad hardware configuration */
    TSR_EPARSE = -3,    /* assembly / file syntax error */
    TSR_EVERIFY = -4,   /* instruction stream rejected by the verifier */
    TSR_EDEADLOCK = -5, /* stages blocked forever on tokens or queues */
    TSR_EBOUNDS = -6,   /* value does not fit its field / buffer */
    TSR_ENOMEM = -7,    /* host or device memory exhausted */
    TSR_EIO = -8,       /* file could not be read or written */
    TSR_ETIMEOUT = -9,  /* wait ran past its deadline (run may continue) */
    TSR_EBACKEND = -10, /* backend unknown or failed */
    TSR_EFAULT = -11,   /* DRAM access outside every allocated buffer */
};

/* Record a message for the current thread and return code (for `return tsr_err(...)`). */
int tsr_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepend context ("while loading x: ") to the current message; returns code. */
int tsr_err_prefix(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Message of the last error recorded on this thread ("" if none). */
const char *tsr_errmsg(void);
/* Short name of an error code ("EVERIFY"). */
const char *tsr_errname(int code);
/* Forget the last error. */
void tsr_err_clear(void);

/* Notices: what the library has to tell a user that is not an error (a
 * timeline cut at its size limit, a kernel cache it cannot use, a model
 * being built). One line, without "tessera: " or a newline. By default
 * they go to stderr as "tessera: <line>"; a binding that must keep stderr
 * clean (Python) installs a handler. The handler is process-wide; it may
 * be called from any thread. NULL restores the default. */
typedef void (*tsr_notice_fn)(void *ctx, const char *line);
void tsr_set_notice_handler(tsr_notice_fn fn, void *ctx);
void tsr_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
