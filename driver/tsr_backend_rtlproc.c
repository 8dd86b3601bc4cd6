/*
 * tsr_backend_rtlproc: backend `rtlproc`, the `rtl` backend run in a child
 * process, `tessera-rtld` (driver/tsr_rtld.c), one per device (issue 26).
 * Several RTL devices, of one config or several, can then be open in one
 * process: each Verilated model has its own process, context and library
 * (see driver/tsr_rtlproc.h for why one process cannot hold two). The
 * cycles, counters and DRAM contents are the `rtl` backend's: every
 * operation is forwarded as it is.
 *
 * A child that dies (EOF on the socket) or stops answering (no reply within
 * the timeout: TESSERA_RTLD_TIMEOUT_MS, default 60 s; a wait is asked for in
 * 1 s slices, so a long run is not a silent one) fails the operation with
 * one line giving its pid and how it ended; the child is then killed and
 * reaped, and every later operation on the device fails at once. Other
 * devices are other processes and carry on.
 *
 * The server is found at $TESSERA_RTLD, else next to the running program
 * (an installed tree: bin/tessera-rtld), else where the build put it.
 *
 * Fault injection for tests: TESSERA_RTLD_FAULT=kill:D:N (or stop:D:N)
 * sends SIGKILL (or SIGSTOP: a hang) to the child of the D-th rtlproc device
 * opened (0-based) since the variable was set, right after its N-th start
 * (1-based).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tsr_bound.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_rtlproc.h"

#ifndef TSR_RTLD_PATH
#define TSR_RTLD_PATH "tessera-rtld"
#endif

#define WAIT_SLICE_MS 1000

typedef struct rp {
    pid_t pid;
    int fd;
    int dead;             /* the child died or hung: every operation fails */
    char why[200];        /* how it ended */
    int timeout_ms;       /* most time for one reply */
    tsr_rtl_opts_t ro;    /* the cycle bound's DRAM timing */
    int ordinal;          /* rtlproc devices opened before this one since TESSERA_RTLD_FAULT changed */
    int starts;
    char fault;           /* 'k' kill, 's' stop, 0 none */
    int fault_at;
} rp_t;

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Reap the child (killing it first unless it is known to be exiting) and
 * describe how it ended. */
static void reap(rp_t *p, int kill_it)
{
    if (p->pid <= 0)
        return;
    int status = 0;
    pid_t r = 0;
    if (!kill_it)
        for (int i = 0; i < 500 && !(r = waitpid(p->pid, &status, WNOHANG)); i++) /* up to 5 s for a clean exit */
            usleep(10000);
    if (!r || r < 0) {
        kill(p->pid, SIGKILL);
        kill(p->pid, SIGCONT);
        while ((r = waitpid(p->pid, &status, 0)) < 0 && errno == EINTR)
            ;
    }
    if (r == p->pid && !p->why[0]) {
        if (WIFSIGNALED(status))
            snprintf(p->why, sizeof p->why, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
        else if (WIFEXITED(status))
            snprintf(p->why, sizeof p->why, "exited with status %d", WEXITSTATUS(status));
    }
    p->pid = -1;
}

static const char *op_name(uint32_t op)
{
    static const char *const n[TSR_RP_NOPS] = {"", "open", "alloc", "alloc_at", "free", "write", "read", "start",
                                               "wait", "counters", "reset_counters", "reset", "close"};
    return op < TSR_RP_NOPS ? n[op] : "?";
}

/* The child failed during op: kill and reap it, remember why, one line. */
static int child_failed(rp_t *p, uint32_t op, const char *what)
{
    pid_t pid = p->pid;
    int hung = !strcmp(what, "hung");
    reap(p, 1);
    if (hung || !p->why[0])
        snprintf(p->why, sizeof p->why, "%s", hung ? "did not answer in time and was killed" : what);
    p->dead = 1;
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    return tsr_err(TSR_EBACKEND, "rtl child process %d %s (during %s)", (int)pid, p->why, op_name(op));
}

/* Read n bytes by the deadline: 0, -1 on EOF/error, -2 on timeout. */
static int recv_all(rp_t *p, void *buf, size_t n, int64_t deadline)
{
    char *c = buf;
    while (n) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -2;
        struct pollfd pf = {.fd = p->fd, .events = POLLIN};
        int r = poll(&pf, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return -2;
        ssize_t k = recv(p->fd, c, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k, n -= (size_t)k;
    }
    return 0;
}

/* One request and its reply; the reply's payload (at most out_cap bytes) into out. */
static int call(rp_t *p, uint32_t op, uint64_t a, uint64_t b, uint64_t c, const void *pay, uint64_t len, void *out,
                uint64_t out_cap, uint64_t *v, int timeout_ms)
{
    if (p->dead)
        return tsr_err(TSR_EBACKEND, "rtl child process %s earlier: the device is gone", p->why);
    tsr_rp_req_t q = {.magic = TSR_RTLPROC_MAGIC, .op = op, .a = a, .b = b, .c = c, .len = len};
    if (tsr_rp_send_all(p->fd, &q, sizeof q) || (len && tsr_rp_send_all(p->fd, pay, (size_t)len)))
        return child_failed(p, op, "closed its socket");
    int64_t deadline = now_ms() + timeout_ms;
    tsr_rp_rep_t h;
    int r = recv_all(p, &h, sizeof h, deadline);
    if (r)
        return child_failed(p, op, r == -2 ? "hung" : "closed its socket");
    char msg[4097];
    if (h.msglen > 4096 || h.len > out_cap)
        return child_failed(p, op, "sent a malformed reply");
    if ((r = recv_all(p, msg, h.msglen, deadline)) || (h.len && (r = recv_all(p, out, (size_t)h.len, deadline))))
        return child_failed(p, op, r == -2 ? "hung" : "closed its socket");
    msg[h.msglen] = 0;
    if (v)
        *v = h.v;
    if (h.rc)
        return tsr_err(h.rc, "%s", msg);
    return TSR_OK;
}

static int reply_ms(const rp_t *p) { return p->timeout_ms; }

/* The server binary: $TESSERA_RTLD, next to this program, or the build's. */
static void server_path(char *out, size_t n)
{
    const char *e = getenv("TESSERA_RTLD");
    if (e && *e) {
        snprintf(out, n, "%s", e);
        return;
    }
    char self[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k > 0) {
        self[k] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            snprintf(out, n, "%s/tessera-rtld", self);
            if (!access(out, X_OK))
                return;
        }
    }
    snprintf(out, n, "%s", TSR_RTLD_PATH);
}

/* The ordinal counts rtlproc opens since TESSERA_RTLD_FAULT last changed, so
 * a test can set it just before opening the system it means. */
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static char fault_seen[64];
static int fault_opened;

static void parse_fault(rp_t *p)
{
    const char *f = getenv("TESSERA_RTLD_FAULT");
    pthread_mutex_lock(&fault_lock);
    if (strncmp(fault_seen, f ? f : "", sizeof fault_seen - 1)) {
        snprintf(fault_seen, sizeof fault_seen, "%s", f ? f : "");
        fault_opened = 0;
    }
    p->ordinal = fault_opened++;
    pthread_mutex_unlock(&fault_lock);
    int d, nth;
    char kind[8];
    if (f && sscanf(f, "%7[a-z]:%d:%d", kind, &d, &nth) == 3 && d == p->ordinal && nth >= 1 &&
        (!strcmp(kind, "kill") || !strcmp(kind, "stop"))) {
        p->fault = kind[0] == 'k' ? 'k' : 's';
        p->fault_at = nth;
    }
}

static void rp_close(void *st);

static int rp_open(const tsr_config_t *cfg, const tsr_device_opts_t *opts, void **state)
{
    rp_t *p = calloc(1, sizeof *p);
    if (!p)
        return tsr_err(TSR_ENOMEM, "out of memory");
    p->fd = -1;
    p->pid = -1;
    p->ro = opts->rtl;
    if (!p->ro.watchdog_cycles) /* as tsr_regseq_new */
        p->ro.watchdog_cycles = 200000;
    p->timeout_ms = 60000;
    const char *t = getenv("TESSERA_RTLD_TIMEOUT_MS");
    if (t && atoi(t) > 0)
        p->timeout_ms = atoi(t);
    parse_fault(p);
    char path[PATH_MAX + 32];
    server_path(path, sizeof path);
    if (access(path, X_OK)) {
        free(p);
        return tsr_err(TSR_EBACKEND, "rtlproc: the RTL server %s is not there (build the tessera_rtld target, or "
                       "set TESSERA_RTLD)", path);
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
        free(p);
        return tsr_err(TSR_EBACKEND, "rtlproc: socketpair: %s", strerror(errno));
    }
    char *argv[] = {path, NULL};
    /* fork + exec, not fork alone: the child must not inherit this process's
     * threads' locks or a Verilated model already loaded here. Between fork
     * and exec only async-signal-safe calls. Every socket is CLOEXEC, so a
     * child holds no other device's socket and a death is seen as EOF. */
    pid_t pid = fork();
    if (pid == 0) {
        if (dup2(sv[1], TSR_RTLPROC_FD) < 0)
            _exit(127);
        execv(path, argv);
        _exit(127);
    }
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        free(p);
        return tsr_err(TSR_EBACKEND, "rtlproc: fork: %s", strerror(errno));
    }
    p->pid = pid;
    p->fd = sv[0];
    /* open: the config, the options (pointers travel as the strings after them) */
    size_t paths[3] = {0};
    const char *ps[3] = {opts->rtl.trace_path, opts->rtl.profile_path, opts->rtl.timeline_path};
    size_t len = sizeof *cfg + sizeof *opts;
    for (int i = 0; i < 3; i++) {
        paths[i] = ps[i] ? strlen(ps[i]) : 0;
        if (paths[i] > 4096) {
            rp_close(p);
            return tsr_err(TSR_EINVAL, "rtlproc: a path of %zu bytes", paths[i]);
        }
        len += paths[i] + 1;
    }
    char *buf = calloc(1, len);
    if (!buf) {
        rp_close(p);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    tsr_device_opts_t o = *opts;
    o.rtl.trace_path = o.rtl.profile_path = o.rtl.timeline_path = NULL;
    o.sample = NULL;
    memcpy(buf, cfg, sizeof *cfg);
    memcpy(buf + sizeof *cfg, &o, sizeof o);
    char *q = buf + sizeof *cfg + sizeof o;
    for (int i = 0; i < 3; i++) {
        if (paths[i])
            memcpy(q, ps[i], paths[i]);
        q += paths[i] + 1;
    }
    /* a cache miss Verilates the model: minutes, so open waits up to an hour */
    int rc = call(p, TSR_RP_OPEN, 0, 0, 0, buf, len, NULL, 0, NULL, 3600 * 1000);
    free(buf);
    if (rc) {
        if (p->dead) /* say which program died */
            tsr_err_prefix(rc, "rtlproc (%s): ", path);
        rp_close(p);
        return rc;
    }
    *state = p;
    return TSR_OK;
}

static void rp_close(void *st)
{
    rp_t *p = st;
    if (!p)
        return;
    if (!p->dead && p->fd >= 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tsr_errmsg()); /* close must not replace the error being reported */
        if (call(p, TSR_RP_CLOSE, 0, 0, 0, NULL, 0, NULL, 0, NULL, reply_ms(p)) == TSR_OK)
            reap(p, 0);
        if (msg[0])
            tsr_err(TSR_EBACKEND, "%s", msg);
        else
            tsr_err_clear();
    }
    reap(p, 1);
    if (p->fd >= 0)
        close(p->fd);
    free(p);
}

static int rp_alloc(void *st, uint64_t size, uint64_t align, uint64_t *addr)
{
    rp_t *p = st;
    return call(p, TSR_RP_ALLOC, size, align, 0, NULL, 0, NULL, 0, addr, reply_ms(p));
}

static int rp_alloc_at(void *st, uint64_t addr, uint64_t size)
{
    rp_t *p = st;
    return call(p, TSR_RP_ALLOC_AT, addr, size, 0, NULL, 0, NULL, 0, NULL, reply_ms(p));
}

static int rp_free(void *st, uint64_t addr)
{
    rp_t *p = st;
    if (p->dead) /* the buffer went with the process; the cleanup after a failure must not replace its message */
        return TSR_OK;
    return call(p, TSR_RP_FREE, addr, 0, 0, NULL, 0, NULL, 0, NULL, reply_ms(p));
}

static int rp_write(void *st, uint64_t addr, const void *src, uint64_t n)
{
    rp_t *p = st;
    const char *s = src;
    for (uint64_t off = 0; off < n || (!n && !off); off += TSR_RTLPROC_CHUNK) {
        uint64_t k = n - off < TSR_RTLPROC_CHUNK ? n - off : TSR_RTLPROC_CHUNK;
        int rc = call(p, TSR_RP_WRITE, addr + off, 0, 0, s + off, k, NULL, 0, NULL, reply_ms(p));
        if (rc || !n)
            return rc;
    }
    return TSR_OK;
}

static int rp_read(void *st, uint64_t addr, void *dst, uint64_t n)
{
    rp_t *p = st;
    char *d = dst;
    for (uint64_t off = 0; off < n; off += TSR_RTLPROC_CHUNK) {
        uint64_t k = n - off < TSR_RTLPROC_CHUNK ? n - off : TSR_RTLPROC_CHUNK;
        int rc = call(p, TSR_RP_READ, addr + off, k, 0, NULL, 0, d + off, k, NULL, reply_ms(p));
        if (rc)
            return rc;
    }
    return TSR_OK;
}

static int rp_start(void *st, uint64_t insn_addr, uint32_t count, uint64_t bound)
{
    rp_t *p = st;
    int rc = call(p, TSR_RP_START, insn_addr, count, bound, NULL, 0, NULL, 0, NULL, reply_ms(p));
    if (!rc && p->fault && ++p->starts == p->fault_at && p->pid > 0)
        kill(p->pid, p->fault == 'k' ? SIGKILL : SIGSTOP);
    return rc;
}

/* In slices: the child answers TSR_ETIMEOUT at least every WAIT_SLICE_MS while
 * it runs, so a child that stops answering is found within the reply timeout. */
static int rp_wait(void *st, int timeout_ms)
{
    rp_t *p = st;
    int64_t end = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    for (;;) {
        int64_t left = end < 0 ? WAIT_SLICE_MS : end - now_ms();
        if (left < 0)
            left = 0;
        int slice = left > WAIT_SLICE_MS ? WAIT_SLICE_MS : (int)left;
        int rc = call(p, TSR_RP_WAIT, (uint64_t)(int64_t)slice, 0, 0, NULL, 0, NULL, 0, NULL, slice + reply_ms(p));
        if (rc != TSR_ETIMEOUT || (end >= 0 && now_ms() >= end))
            return rc;
    }
}

static int rp_counters(void *st, tsr_counters_t *out)
{
    rp_t *p = st;
    return call(p, TSR_RP_COUNTERS, 0, 0, 0, NULL, 0, out, sizeof *out, NULL, reply_ms(p));
}

static int rp_reset_counters(void *st)
{
    rp_t *p = st;
    return call(p, TSR_RP_RESET_COUNTERS, 0, 0, 0, NULL, 0, NULL, 0, NULL, reply_ms(p));
}

static int rp_reset(void *st)
{
    rp_t *p = st;
    if (p->dead) /* short: it follows the message that said how the process ended */
        return tsr_err(TSR_EBACKEND, "the rtl child process is gone");
    return call(p, TSR_RP_RESET, 0, 0, 0, NULL, 0, NULL, 0, NULL, reply_ms(p));
}

/* The bound is the stream's and the DRAM timing's alone: computed here, as the rtl backend does. */
static uint64_t rp_bound(void *st, const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n)
{
    return tsr_rtl_cycle_bound(&((rp_t *)st)->ro, cfg, insns, n);
}

const tsr_backend_ops_t tsr_backend_rtlproc = {
    .name = "rtlproc",
    .open = rp_open,
    .close = rp_close,
    .mem_alloc = rp_alloc,
    .mem_alloc_at = rp_alloc_at,
    .mem_free = rp_free,
    .mem_write = rp_write,
    .mem_read = rp_read,
    .start = rp_start,
    .wait = rp_wait,
    .counters = rp_counters,
    .reset_counters = rp_reset_counters,
    .reset = rp_reset,
    .bound = rp_bound,
    .budget_unit = "cycles",
};
