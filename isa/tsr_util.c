/* tsr_util: the clocks and the memo hash, written once (splitmix64 is inline in tsr_util.h). */
#include "tsr_util.h"

#include <string.h>
#include <time.h>

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double tsr_now_s(void) { return clock_s(CLOCK_MONOTONIC); }

double tsr_cpu_s(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

uint64_t tsr_hash64(const void *b, size_t n)
{
    const uint8_t *s = b;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    for (; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}
