/*
 * tsr_util: the small helpers every layer used to write for itself: one
 * pseudo-random generator and the two clocks benchmarks read.
 *
 * Why one place: each copy had to produce the same sequence (generated
 * programs, test seeds, benchmark data are reproduced from a seed), and a
 * copy that drifted would silently change them. isa/ is the bottom layer,
 * so everything may include this.
 */
#ifndef TSR_UTIL_H
#define TSR_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* One step of splitmix64 (Steele, Lea, Flood 2014; Vigna's reference
 * code): add 0x9e3779b97f4a7c15 to *state, return the mixed state. Any
 * state is valid, 0 included; seed 0 gives e220a8397b1dcdaf,
 * 6e789e6aa1b965f4, ... Inline: the generators and fills call it once
 * per number in their inner loops, as their own copies did. */
static inline uint64_t tsr_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A 64-bit hash of n bytes (a word-at-a-time multiply-xorshift, FNV-1a for
 * the tail): keys of in-memory memos whose hits are checked or harmless
 * (the verifier's stream memo compares its reads, the conv plan's packed
 * weights are checked when written). Not for anything on disk or
 * adversarial: use SHA-256 there (tsr_kcache). */
uint64_t tsr_hash64(const void *b, size_t n);

/* Seconds on CLOCK_MONOTONIC (wall time that never steps back). */
double tsr_now_s(void);

/* Seconds of CPU time of the whole process (all threads): a noisy,
 * shared machine inflates wall time but not this. */
double tsr_cpu_s(void);

#endif
