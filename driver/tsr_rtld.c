/*
 * tessera-rtld: one `rtl` backend instance in a process of its own, driven
 * over a socket by the driver's `rtlproc` backend (protocol:
 * driver/tsr_rtlproc.h). Started by the parent with its end of a
 * socketpair as fd 3; it serves requests until CLOSE or EOF, so a parent
 * that dies takes it along: the parent waits in slices of a second, so the
 * server is never busy much longer before it reads the EOF. (Not
 * PR_SET_PDEATHSIG: it fires when the thread that forked exits, which may be
 * any thread of the parent.)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_rtlproc.h"

static int fd = TSR_RTLPROC_FD;

/* The reply: rc, the error message when rc != 0, then the payload. */
static int reply(int rc, uint64_t v, const void *payload, uint64_t len)
{
    const char *msg = rc ? tsr_errmsg() : "";
    tsr_rp_rep_t h = {.rc = rc, .msglen = (uint32_t)strlen(msg), .v = v, .len = len};
    if (h.msglen > 4096)
        h.msglen = 4096;
    return tsr_rp_send_all(fd, &h, sizeof h) || tsr_rp_send_all(fd, msg, h.msglen) ||
                   (len && tsr_rp_send_all(fd, payload, (size_t)len))
               ? -1
               : 0;
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "tessera-rtld: started by the driver's rtlproc backend, takes no arguments\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    const tsr_backend_ops_t *ops = &tsr_backend_rtl;
    void *st = NULL;
    tsr_config_t cfg;
    tsr_device_opts_t opts;
    char *buf = malloc(TSR_RTLPROC_CHUNK + 3 * 4097);
    if (!buf)
        return 1;
    for (;;) {
        tsr_rp_req_t q;
        if (tsr_rp_read_all(fd, &q, sizeof q))
            break; /* EOF: the parent is gone */
        if (q.magic != TSR_RTLPROC_MAGIC || q.len > TSR_RTLPROC_CHUNK + 3 * 4097) {
            fprintf(stderr, "tessera-rtld: bad request (magic %08x, %llu payload bytes)\n", q.magic,
                    (unsigned long long)q.len);
            break;
        }
        if (q.len && tsr_rp_read_all(fd, buf, (size_t)q.len))
            break;
        int rc = TSR_OK;
        uint64_t v = 0;
        if (q.op != TSR_RP_OPEN && !st && q.op != TSR_RP_CLOSE) {
            rc = tsr_err(TSR_EBACKEND, "rtld: request %u before open", q.op);
            if (reply(rc, 0, NULL, 0))
                break;
            continue;
        }
        switch (q.op) {
        case TSR_RP_OPEN: {
            if (st || q.len < sizeof cfg + sizeof opts + 3) {
                rc = tsr_err(TSR_EINVAL, "rtld: bad open request (%llu bytes; server built from another tree?)",
                             (unsigned long long)q.len);
                break;
            }
            memcpy(&cfg, buf, sizeof cfg);
            memcpy(&opts, buf + sizeof cfg, sizeof opts);
            buf[q.len - 1] = 0;
            const char *p = buf + sizeof cfg + sizeof opts, *paths[3];
            for (int i = 0; i < 3; i++) {
                paths[i] = *p ? p : NULL;
                p += strlen(p) + 1;
                if (p > buf + q.len)
                    p = buf + q.len - 1;
            }
            opts.rtl.trace_path = paths[0];
            opts.rtl.profile_path = paths[1];
            opts.rtl.timeline_path = paths[2];
            opts.sample = NULL;
            rc = ops->open(&cfg, &opts, &st);
            if (rc)
                st = NULL;
            break;
        }
        case TSR_RP_ALLOC: rc = ops->mem_alloc(st, q.a, q.b, &v); break;
        case TSR_RP_ALLOC_AT: rc = ops->mem_alloc_at(st, q.a, q.b); break;
        case TSR_RP_FREE: rc = ops->mem_free(st, q.a); break;
        case TSR_RP_WRITE: rc = ops->mem_write(st, q.a, buf, q.len); break;
        case TSR_RP_READ:
            if (q.b > TSR_RTLPROC_CHUNK) {
                rc = tsr_err(TSR_EINVAL, "rtld: read of %llu bytes", (unsigned long long)q.b);
                break;
            }
            if ((rc = ops->mem_read(st, q.a, buf, q.b)))
                break;
            if (reply(TSR_OK, 0, buf, q.b))
                goto out;
            continue;
        case TSR_RP_START: rc = ops->start(st, q.a, (uint32_t)q.b, q.c); break;
        case TSR_RP_WAIT: rc = ops->wait(st, (int)(int64_t)q.a); break;
        case TSR_RP_COUNTERS: {
            tsr_counters_t c;
            memset(&c, 0, sizeof c);
            if ((rc = ops->counters(st, &c)))
                break;
            if (reply(TSR_OK, 0, &c, sizeof c))
                goto out;
            continue;
        }
        case TSR_RP_RESET_COUNTERS: rc = ops->reset_counters(st); break;
        case TSR_RP_RESET: rc = ops->reset(st); break;
        case TSR_RP_CLOSE:
            if (st)
                ops->close(st);
            st = NULL;
            reply(TSR_OK, 0, NULL, 0);
            goto out;
        default: rc = tsr_err(TSR_EINVAL, "rtld: unknown request %u", q.op); break;
        }
        if (reply(rc, v, NULL, 0))
            break;
    }
out:
    /* EOF or a broken pipe: the parent is gone, nobody waits for a clean close */
    free(buf);
    return 0;
}
