/* tsr_multidev: K devices and a modelled link between them (tsr_multidev.h). */
#include "tsr_multidev.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"

struct tsr_mdev {
    int k;
    tsr_device_t *dev[TSR_MDEV_MAX];
    tsr_config_t cfg[TSR_MDEV_MAX];
    char backend[TSR_MDEV_MAX][16];
    uint64_t dram[TSR_MDEV_MAX];
    double bw, lat;
    tsr_link_mode_t mode;
    double spent[TSR_MDEV_MAX];    /* link cycles charged */
    uint64_t bytes[TSR_MDEV_MAX];  /* link bytes charged */
    pthread_mutex_t lock;          /* the link's counters */
};

/* One lock for the backends whose devices share process-wide simulation
 * state: the SystemC kernel (one per process). An rtl device runs in a
 * child process of its own (backend rtlproc), so rtl devices run side by
 * side. */
static pthread_mutex_t shared_run_lock = PTHREAD_MUTEX_INITIALIZER;

static int shared_backend(const char *b)
{
    return !strcmp(b, "systemc") || !strcmp(b, "sampled"); /* sampled: the SystemC kernel too */
}

int tsr_mdev_open(int k, const char *const *backends, const tsr_config_t *cfgs, const tsr_device_opts_t *opts,
                  double bytes_per_cycle, double latency, tsr_mdev_t **out)
{
    if (!out)
        return tsr_err(TSR_EINVAL, "devices: NULL result");
    *out = NULL;
    if (k < 1 || k > TSR_MDEV_MAX)
        return tsr_err(TSR_EINVAL, "devices: K = %d, need 1..%d", k, TSR_MDEV_MAX);
    if (!cfgs)
        return tsr_err(TSR_EINVAL, "devices: no configs");
    if (!(bytes_per_cycle > 0) || !isfinite(bytes_per_cycle) || !(latency >= 0) || !isfinite(latency))
        return tsr_err(TSR_EINVAL, "devices: link of %g bytes/cycle and %g cycles latency: need > 0 and >= 0",
                       bytes_per_cycle, latency);
    int nsampled = 0;
    for (int d = 0; d < k; d++)
        nsampled += backends && backends[d] && !strcmp(backends[d], "sampled");
    if (nsampled > 1) /* its RTL windows are in-process Verilated models: two of them hang (rtl runs in children) */
        return tsr_err(TSR_EINVAL, "devices: %d devices on the sampled backend: its RTL windows run in this process, "
                       "which can hold one Verilated model at a time; use rtl or systemc for K devices", nsampled);
    tsr_mdev_t *m = calloc(1, sizeof *m);
    if (!m)
        return tsr_err(TSR_ENOMEM, "out of memory");
    pthread_mutex_init(&m->lock, NULL);
    m->bw = bytes_per_cycle;
    m->lat = latency;
    int rc = TSR_OK;
    for (int d = 0; d < k && !rc; d++) {
        const char *b = backends && backends[d] ? backends[d] : "fsim";
        snprintf(m->backend[d], sizeof m->backend[d], "%s", b);
        m->cfg[d] = cfgs[d];
        m->dram[d] = opts && opts[d].dram_size ? opts[d].dram_size : 1ull << 30;
        /* an rtl device runs in a child process of its own: two Verilated models in one process
         * deadlock on close (Verilator's shared context), and two configs' libraries clash */
        const char *open_as = !strcmp(b, "rtl") ? "rtlproc" : b;
        if ((rc = tsr_device_open(open_as, &cfgs[d], opts ? &opts[d] : NULL, &m->dev[d])))
            tsr_err_prefix(rc, "device %d (%s, %dx%dx%d): ", d, b, cfgs[d].batch, cfgs[d].block_in,
                           cfgs[d].block_out);
        else
            m->k = d + 1;
    }
    if (rc) {
        tsr_mdev_close(m);
        return rc;
    }
    *out = m;
    return TSR_OK;
}

void tsr_mdev_close(tsr_mdev_t *m)
{
    if (!m)
        return;
    for (int d = 0; d < m->k; d++)
        tsr_device_close(m->dev[d]);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

int tsr_mdev_count(const tsr_mdev_t *m) { return m ? m->k : 0; }
tsr_device_t *tsr_mdev_device(const tsr_mdev_t *m, int d) { return m && d >= 0 && d < m->k ? m->dev[d] : NULL; }
const tsr_config_t *tsr_mdev_config(const tsr_mdev_t *m, int d) { return m && d >= 0 && d < m->k ? &m->cfg[d] : NULL; }
const char *tsr_mdev_backend(const tsr_mdev_t *m, int d) { return m && d >= 0 && d < m->k ? m->backend[d] : ""; }
uint64_t tsr_mdev_dram(const tsr_mdev_t *m, int d) { return m && d >= 0 && d < m->k ? m->dram[d] : 0; }
double tsr_mdev_link_bw(const tsr_mdev_t *m) { return m ? m->bw : 0; }
double tsr_mdev_link_latency(const tsr_mdev_t *m) { return m ? m->lat : 0; }

double tsr_mdev_link_cycles(const tsr_mdev_t *m, uint64_t n)
{
    return n ? m->lat + (double)n / m->bw : 0;
}

void tsr_mdev_charge(tsr_mdev_t *m, int d, uint64_t n)
{
    if (!m || d < 0 || d >= m->k || !n)
        return;
    pthread_mutex_lock(&m->lock);
    m->spent[d] += tsr_mdev_link_cycles(m, n);
    m->bytes[d] += n;
    pthread_mutex_unlock(&m->lock);
}

double tsr_mdev_link_spent(const tsr_mdev_t *m, int d, uint64_t *bytes)
{
    if (!m || d < 0 || d >= m->k)
        return 0;
    pthread_mutex_lock((pthread_mutex_t *)&m->lock);
    double s = m->spent[d];
    if (bytes)
        *bytes = m->bytes[d];
    pthread_mutex_unlock((pthread_mutex_t *)&m->lock);
    return s;
}

void tsr_mdev_clear_link(tsr_mdev_t *m)
{
    pthread_mutex_lock(&m->lock);
    memset(m->spent, 0, sizeof m->spent);
    memset(m->bytes, 0, sizeof m->bytes);
    pthread_mutex_unlock(&m->lock);
}

int tsr_mdev_copy(tsr_mdev_t *m, int from, uint64_t src, int to, uint64_t dst, uint64_t n, void *host_buf)
{
    if (!m || from < -1 || from >= m->k || to < -1 || to >= m->k)
        return tsr_err(TSR_EINVAL, "devices: copy from %d to %d: no such device", from, to);
    if (from == to)
        return tsr_err(TSR_EINVAL, "devices: copy from device %d to itself", from);
    if (!n)
        return TSR_OK;
    if ((from < 0 || to < 0) && !host_buf)
        return tsr_err(TSR_EINVAL, "devices: copy to or from the host without a host buffer");
    void *buf = host_buf;
    int own = 0;
    if (!buf) {
        if (n > (1ull << 32))
            return tsr_err(TSR_EINVAL, "devices: copy of %llu bytes: at most 4 GiB", (unsigned long long)n);
        if (!(buf = malloc((size_t)n)))
            return tsr_err(TSR_ENOMEM, "out of memory");
        own = 1;
    }
    int rc = TSR_OK;
    if (from >= 0 && (rc = tsr_mem_read(m->dev[from], src, buf, n)))
        tsr_err_prefix(rc, "device %d: ", from);
    if (!rc && to >= 0 && (rc = tsr_mem_write(m->dev[to], dst, buf, n)))
        tsr_err_prefix(rc, "device %d: ", to);
    if (!rc) {
        tsr_mdev_charge(m, from, n);
        tsr_mdev_charge(m, to, n);
    }
    if (own)
        free(buf);
    return rc;
}

int tsr_mdev_set_link_mode(tsr_mdev_t *m, tsr_link_mode_t mode)
{
    if (!m || (mode != TSR_LINK_P2P && mode != TSR_LINK_SHARED))
        return tsr_err(TSR_EINVAL, "devices: link mode %d, need p2p or shared", (int)mode);
    if (mode == TSR_LINK_SHARED && !tsr_link_available())
        return tsr_err(TSR_EINVAL, "devices: a shared link is timed by the SystemC interconnect; this program was "
                                   "built without SystemC: use the p2p link");
    m->mode = mode;
    return TSR_OK;
}

tsr_link_mode_t tsr_mdev_link_mode(const tsr_mdev_t *m) { return m ? m->mode : TSR_LINK_P2P; }

int tsr_mdev_link_replay(tsr_mdev_t *m, tsr_link_problem_t *p, tsr_link_result_t *r)
{
    if (!m || !p)
        return tsr_err(TSR_EINVAL, "devices: link replay without a system or problem");
    p->bytes_per_cycle = m->bw;
    p->latency = m->lat;
    pthread_mutex_lock(&shared_run_lock); /* the SystemC kernel the systemc devices run on */
    int rc = tsr_link_replay(p, r);
    pthread_mutex_unlock(&shared_run_lock);
    return rc;
}

void tsr_mdev_run_lock(tsr_mdev_t *m, int d)
{
    if (shared_backend(tsr_mdev_backend(m, d)))
        pthread_mutex_lock(&shared_run_lock);
}

void tsr_mdev_run_unlock(tsr_mdev_t *m, int d)
{
    if (shared_backend(tsr_mdev_backend(m, d)))
        pthread_mutex_unlock(&shared_run_lock);
}

int tsr_mdev_reset_all(tsr_mdev_t *m, int except)
{
    int first = TSR_OK;
    for (int d = 0; m && d < m->k; d++) {
        if (d == except)
            continue;
        int rc = tsr_device_reset(m->dev[d]);
        if (rc && !first)
            first = tsr_err_prefix(rc, "device %d: reset: ", d);
    }
    return first;
}
