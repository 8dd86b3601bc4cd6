/*
 * tsr_rtlproc: the wire protocol between the driver's `rtlproc` backend
 * (driver/tsr_backend_rtlproc.c) and its server, `tessera-rtld`
 * (driver/tsr_rtld.c), which runs one `rtl` backend instance in a process
 * of its own (issue 26).
 *
 * Why a process per RTL device: two Verilated models open in one process
 * share Verilator's context, and closing one of them hangs
 * (VerilatedContextImp::scopeErase waits on a mutex forever); two configs
 * would also load two model libraries with the same symbols. A child
 * process per device has its own context and library, and its crash or
 * hang is seen by the parent as EOF or a timeout on the socket instead of
 * taking the process down.
 *
 * One request, one reply, over a SOCK_STREAM socketpair (the server's end
 * is its fd 3). Both sides are built from the same tree, so the config and
 * the options travel as raw structs; TSR_RTLPROC_MAGIC and the struct sizes
 * in the OPEN request catch a mismatched server binary.
 */
#ifndef TSR_RTLPROC_H
#define TSR_RTLPROC_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#define TSR_RTLPROC_MAGIC 0x54525044u /* "TRPD" + protocol version in the low byte */
#define TSR_RTLPROC_FD 3              /* the server's socket */
#define TSR_RTLPROC_CHUNK (16u << 20) /* most payload bytes in one message (writes and reads are split) */

enum {
    TSR_RP_OPEN = 1,  /* payload: cfg, opts (pointers zeroed), 3 NUL-terminated paths (trace, profile, timeline) */
    TSR_RP_ALLOC,     /* a = size, b = align -> v = addr */
    TSR_RP_ALLOC_AT,  /* a = addr, b = size */
    TSR_RP_FREE,      /* a = addr */
    TSR_RP_WRITE,     /* a = addr, payload = bytes */
    TSR_RP_READ,      /* a = addr, b = n -> payload */
    TSR_RP_START,     /* a = insn_addr, b = count, c = bound */
    TSR_RP_WAIT,      /* a = timeout_ms (int64) */
    TSR_RP_COUNTERS,  /* -> payload tsr_counters_t */
    TSR_RP_RESET_COUNTERS,
    TSR_RP_RESET,
    TSR_RP_CLOSE,     /* the server closes the backend, replies and exits */
    TSR_RP_NOPS
};

typedef struct tsr_rp_req {
    uint32_t magic;
    uint32_t op;
    uint64_t a, b, c;
    uint64_t len; /* payload bytes that follow */
} tsr_rp_req_t;

typedef struct tsr_rp_rep {
    int32_t rc;      /* TSR_OK or a TSR_E* code */
    uint32_t msglen; /* bytes of the error message that follow (the server's tsr_errmsg) */
    uint64_t v;      /* a result (ALLOC's address) */
    uint64_t len;    /* payload bytes after the message */
} tsr_rp_rep_t;

/* The socket I/O both ends share. Send all n bytes (MSG_NOSIGNAL: a peer that is gone is an error to
 * report, not a SIGPIPE that kills the sender): 0, -1 on error. */
static inline int tsr_rp_send_all(int fd, const void *buf, size_t n)
{
    const char *c = buf;
    while (n) {
        ssize_t r = send(fd, c, n, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r, n -= (size_t)r;
    }
    return 0;
}

/* Read all n bytes, waiting as long as it takes (the server's side; the parent's waits by a deadline):
 * 0, -1 on EOF/error. */
static inline int tsr_rp_read_all(int fd, void *buf, size_t n)
{
    char *c = buf;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r, n -= (size_t)r;
    }
    return 0;
}

#endif
