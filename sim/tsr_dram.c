/*
 * tsr_dram: device DRAM for the simulator backends (see tsr_dram.h).
 * Buffers are kept sorted by address so lookups are a binary search: the
 * functional simulator resolves one pointer per transferred row.
 */
#include "tsr_dram.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"

typedef struct {
    uint64_t addr;  /* device byte address */
    uint64_t size;  /* bytes the device may access: the requested size rounded up to TSR_DRAM_GRAIN */
    uint8_t *host;  /* backing store (size bytes, zeroed) */
} region_t;

/* Device extent of a size-byte buffer (size <= 2^63 checked by callers' limits). */
static uint64_t grain_up(uint64_t size) { return (size + TSR_DRAM_GRAIN - 1) & ~(uint64_t)(TSR_DRAM_GRAIN - 1); }

struct tsr_dram {
    uint64_t base;  /* first device address */
    uint64_t size;  /* size of the address space */
    region_t *r;    /* sorted by addr, non-overlapping */
    size_t n;       /* regions in use */
    size_t cap;     /* regions allocated */
    uint8_t *backing; /* NULL: each buffer has its own host memory; else the host view of [base, base + size) */
};

int tsr_dram_create(uint64_t base, uint64_t size, tsr_dram_t **out)
{
    tsr_dram_t *d = calloc(1, sizeof *d);
    if (!d)
        return tsr_err(TSR_ENOMEM, "out of memory");
    d->base = base;
    d->size = size;
    *out = d;
    return TSR_OK;
}

int tsr_dram_create_backed(uint64_t base, uint64_t size, uint8_t *host, tsr_dram_t **out)
{
    int rc = tsr_dram_create(base, size, out);
    if (!rc)
        (*out)->backing = host;
    return rc;
}

void tsr_dram_destroy(tsr_dram_t *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n && !d->backing; i++)
        free(d->r[i].host);
    free(d->r);
    free(d);
}

/* Index of the first region with addr > a. */
static size_t upper(const tsr_dram_t *d, uint64_t a)
{
    size_t lo = 0, hi = d->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (d->r[mid].addr <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int insert(tsr_dram_t *d, uint64_t addr, uint64_t size)
{
    if (size == 0)
        return tsr_err(TSR_EINVAL, "cannot allocate an empty DRAM buffer");
    if (size > SIZE_MAX - TSR_DRAM_GRAIN)
        return tsr_err(TSR_ENOMEM, "DRAM buffer of %llu bytes is too large for this host",
                       (unsigned long long)size);
    size = grain_up(size);
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        region_t *r = realloc(d->r, cap * sizeof *r);
        if (!r)
            return tsr_err(TSR_ENOMEM, "out of memory");
        d->r = r;
        d->cap = cap;
    }
    /* Backed: the buffer is its slice of the mapping, zeroed like calloc's. */
    uint8_t *host = d->backing ? d->backing + (addr - d->base) : calloc(1, (size_t)size);
    if (d->backing)
        memset(host, 0, (size_t)size);
    if (!host)
        return tsr_err(TSR_ENOMEM, "out of host memory for a %llu-byte DRAM buffer",
                       (unsigned long long)size);
    size_t i = upper(d, addr);
    memmove(&d->r[i + 1], &d->r[i], (d->n - i) * sizeof *d->r);
    d->r[i] = (region_t){addr, size, host};
    d->n++;
    return TSR_OK;
}

int tsr_dram_alloc_at(tsr_dram_t *d, uint64_t addr, uint64_t size)
{
    if (size && size <= UINT64_MAX - TSR_DRAM_GRAIN)
        size = grain_up(size);
    if (addr < d->base || size > d->size || addr - d->base > d->size - size)
        return tsr_err(TSR_ENOMEM,
                       "DRAM buffer [0x%llx, 0x%llx) is outside device memory [0x%llx, 0x%llx)",
                       (unsigned long long)addr, (unsigned long long)(addr + size),
                       (unsigned long long)d->base, (unsigned long long)(d->base + d->size));
    size_t i = upper(d, addr);
    if ((i > 0 && d->r[i - 1].addr + d->r[i - 1].size > addr) ||
        (i < d->n && d->r[i].addr < addr + size))
        return tsr_err(TSR_EINVAL, "DRAM buffer [0x%llx, 0x%llx) overlaps an allocated buffer",
                       (unsigned long long)addr, (unsigned long long)(addr + size));
    return insert(d, addr, size);
}

int tsr_dram_alloc(tsr_dram_t *d, uint64_t size, uint64_t align, uint64_t *addr)
{
    if (!align || (align & (align - 1)))
        return tsr_err(TSR_EINVAL, "alignment %llu is not a power of two", (unsigned long long)align);
    if (size && size <= UINT64_MAX - TSR_DRAM_GRAIN)
        size = grain_up(size);
    uint64_t a = (d->base + align - 1) & ~(align - 1);
    for (size_t i = 0; i <= d->n; i++) {
        uint64_t gap_end = i < d->n ? d->r[i].addr : d->base + d->size;
        if (a <= gap_end && size <= gap_end - a) {
            int rc = insert(d, a, size);
            if (!rc)
                *addr = a;
            return rc;
        }
        if (i < d->n)
            a = (d->r[i].addr + d->r[i].size + align - 1) & ~(align - 1);
    }
    return tsr_err(TSR_ENOMEM, "device DRAM exhausted: no free %llu-byte block",
                   (unsigned long long)size);
}

int tsr_dram_free(tsr_dram_t *d, uint64_t addr)
{
    size_t i = upper(d, addr);
    if (i == 0 || d->r[i - 1].addr != addr)
        return tsr_err(TSR_EINVAL, "0x%llx is not the start of an allocated DRAM buffer",
                       (unsigned long long)addr);
    i--;
    if (!d->backing)
        free(d->r[i].host);
    memmove(&d->r[i], &d->r[i + 1], (d->n - i - 1) * sizeof *d->r);
    d->n--;
    return TSR_OK;
}

uint8_t *tsr_dram_ptr(const tsr_dram_t *d, uint64_t addr, uint64_t n)
{
    size_t i = upper(d, addr);
    if (i == 0)
        return NULL;
    const region_t *r = &d->r[i - 1];
    if (addr - r->addr > r->size || n > r->size - (addr - r->addr))
        return NULL;
    return r->host + (addr - r->addr);
}

static int fault(uint64_t addr, uint64_t n, const char *what)
{
    return tsr_err(TSR_EFAULT, "DRAM %s of %llu bytes at 0x%llx is outside every allocated buffer",
                   what, (unsigned long long)n, (unsigned long long)addr);
}

/* Walk [addr, addr + n) over the buffers that cover it (adjacent buffers
 * may share one access): copy into (to_dev) or out of device memory. Every
 * byte must be mapped; nothing is copied otherwise. */
static int span(const tsr_dram_t *d, uint64_t addr, uint8_t *host, uint64_t n, int to_dev)
{
    if (n && addr > UINT64_MAX - n)
        return fault(addr, n, to_dev ? "write" : "read");
    for (int pass = 0; pass < 2; pass++) { /* pass 0 checks, pass 1 copies */
        uint64_t a = addr, left = n;
        while (left) {
            size_t i = upper(d, a);
            const region_t *r = i ? &d->r[i - 1] : NULL;
            if (!r || a - r->addr >= r->size)
                return fault(addr, n, to_dev ? "write" : "read");
            uint64_t k = r->size - (a - r->addr);
            if (k > left)
                k = left;
            if (pass && to_dev)
                memcpy(r->host + (a - r->addr), host + (n - left), (size_t)k);
            else if (pass)
                memcpy(host + (n - left), r->host + (a - r->addr), (size_t)k);
            a += k;
            left -= k;
        }
    }
    return TSR_OK;
}

int tsr_dram_read(const tsr_dram_t *d, uint64_t addr, void *dst, uint64_t n)
{
    uint8_t *p = tsr_dram_ptr(d, addr, n);
    if (!p)
        return span(d, addr, dst, n, 0);
    memcpy(dst, p, (size_t)n);
    return TSR_OK;
}

int tsr_dram_write(tsr_dram_t *d, uint64_t addr, const void *src, uint64_t n)
{
    uint8_t *p = tsr_dram_ptr(d, addr, n);
    if (!p)
        return span(d, addr, (uint8_t *)(uintptr_t)src, n, 1);
    memcpy(p, src, (size_t)n);
    return TSR_OK;
}

size_t tsr_dram_regions(const tsr_dram_t *d, tsr_region_t *out, size_t max)
{
    for (size_t i = 0; i < d->n && i < max; i++)
        out[i] = (tsr_region_t){d->r[i].addr, d->r[i].size, NULL};
    return d->n;
}

int tsr_dram_read_cb(void *ctx, uint64_t addr, void *dst, size_t n)
{
    return tsr_dram_read(ctx, addr, dst, n);
}
