/* tsr_jitutil: geometry shared by the operator lowerings (tsr_jitutil.h). */
#include "tsr_jitutil.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tsr_error.h"

void tsr_span(int i0, int n, int step, int size, tsr_span_t *s)
{
    s->pad0 = s->real = s->pad1 = 0;
    s->first = 0;
    for (int v = 0; v < n; v++) {
        int i = i0 + v * step;
        if (i < 0)
            s->pad0++;
        else if (i < size) {
            if (!s->real)
                s->first = i;
            s->real++;
        } else
            s->pad1++;
    }
}

void tsr_row_tile(int rt, int toh, int oh, int kh, int sh, int pad_top, int h, int row_step, tsr_rowtile_t *r)
{
    r->oy0 = rt * toh;
    r->toh = toh < oh - r->oy0 ? toh : oh - r->oy0;
    r->rows = row_step == 1 ? (r->toh - 1) * sh + kh : r->toh;
    tsr_span_t sp;
    tsr_span(r->oy0 * sh - pad_top, r->rows, row_step, h, &sp);
    r->pad0 = sp.pad0;
    r->real = sp.real;
    r->pad1 = sp.pad1;
    r->iy_first = sp.first;
}

int tsr_tile_candidates(int n, int *out)
{
    int k = 0;
    for (int v = 1; v <= n; v++)
        if (v == 1 || (n + v - 1) / v != (n + v - 2) / (v - 1))
            out[k++] = v;
    return k;
}

uint64_t tsr_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tsr_process_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int tsr_jit_threads(void)
{
    const char *env = getenv("TESSERA_JIT_THREADS");
    long n = env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

int tsr_jit_pack_uops(const tsr_config_t *c, const tsr_uop_t *u, size_t n, uint8_t **out)
{
    uint8_t *u8 = calloc(n ? n : 1, c->uop_bytes);
    *out = NULL;
    if (!u8)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        uint64_t raw;
        int rc = tsr_uop_encode(c, &u[k], &raw);
        if (rc) {
            free(u8);
            return rc;
        }
        memcpy(u8 + k * c->uop_bytes, &raw, c->uop_bytes);
    }
    *out = u8;
    return TSR_OK;
}

int tsr_jit_run_stream(tsr_device_t *dev, const char *op, const tsr_insn_t *insns, size_t n)
{
    if (!dev || !insns)
        return tsr_err(TSR_EINVAL, "%s: %s", op, !insns ? "plan not built (or freed)" : "NULL device");
    int rc = tsr_submit(dev, insns, n);
    if (!rc)
        rc = tsr_wait(dev, -1);
    return rc;
}
