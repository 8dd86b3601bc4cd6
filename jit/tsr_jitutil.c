/* tsr_jitutil: geometry shared by the operator lowerings (tsr_jitutil.h). */
#include "tsr_jitutil.h"

#include <time.h>

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
