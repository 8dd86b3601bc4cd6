/*
 * tsr_dram: the device DRAM seen by simulator backends: an address space
 * holding allocated buffers backed by host memory. Every byte of an access
 * must lie in an allocated buffer (an access may run from one buffer into
 * an adjacent one: the device, like an address map on a board, knows
 * mapped and unmapped bytes, not buffers); anything else is TSR_EFAULT
 * with the address, so a stray DMA is an error, never silent corruption.
 *
 * Each buffer is mapped in whole TSR_DRAM_GRAIN-byte units (its size
 * rounded up; the tail reads as zero): the RTL reads whole bus beats (at
 * most 64 bytes), so with buffers starting on that grain a beat is either
 * entirely mapped or entirely unmapped, and the functional simulator's
 * byte-exact check and the RTL DRAM model's beat check give the same
 * verdict (isa/semantics.md, "DRAM accesses").
 */
#ifndef TSR_DRAM_H
#define TSR_DRAM_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_verify.h"

#define TSR_DRAM_GRAIN 64u /* mapping granule: the widest bus beat (DRAM_BUS_WIDTH <= 512) */

typedef struct tsr_dram tsr_dram_t;

/* Address space [base, base + size). */
int tsr_dram_create(uint64_t base, uint64_t size, tsr_dram_t **out);
/* The same over memory the caller owns (a board's DMA buffer, an XRT
 * buffer object's mapping): host points at [base, base + size) and must
 * outlive the tsr_dram_t; buffers are slices of it, zeroed when allocated. */
int tsr_dram_create_backed(uint64_t base, uint64_t size, uint8_t *host, tsr_dram_t **out);
void tsr_dram_destroy(tsr_dram_t *d);
/* Allocate at the lowest free address aligned to align (power of two). */
int tsr_dram_alloc(tsr_dram_t *d, uint64_t size, uint64_t align, uint64_t *addr);
/* Allocate exactly [addr, addr + size); fails if it overlaps a buffer. */
int tsr_dram_alloc_at(tsr_dram_t *d, uint64_t addr, uint64_t size);
/* Free the buffer starting at addr. */
int tsr_dram_free(tsr_dram_t *d, uint64_t addr);
int tsr_dram_read(const tsr_dram_t *d, uint64_t addr, void *dst, uint64_t n);
int tsr_dram_write(tsr_dram_t *d, uint64_t addr, const void *src, uint64_t n);
/* Host pointer to [addr, addr + n) if it lies in one buffer, else NULL
 * (a span across adjacent buffers has no pointer: use read/write). */
uint8_t *tsr_dram_ptr(const tsr_dram_t *d, uint64_t addr, uint64_t n);
/* Number of buffers; copies up to max of them into out (sorted by address). */
size_t tsr_dram_regions(const tsr_dram_t *d, tsr_region_t *out, size_t max);
/* tsr_mem_read_fn adapter (ctx = tsr_dram_t*). */
int tsr_dram_read_cb(void *ctx, uint64_t addr, void *dst, size_t n);

#endif
