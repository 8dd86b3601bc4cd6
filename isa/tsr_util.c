/* tsr_util: the clocks, written once (splitmix64 is inline in tsr_util.h). */
#include "tsr_util.h"

#include <time.h>

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double tsr_now_s(void) { return clock_s(CLOCK_MONOTONIC); }

double tsr_cpu_s(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }
