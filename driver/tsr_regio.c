/* tsr_regio: device-DRAM entry points shared by the register-driven backends (see tsr_regio.h). */
#include "tsr_regio.h"

#include "tsr_error.h"

/* A new buffer reads as zeros: on a cached DMA buffer, push them out. */
static int zeroed(tsr_regio_t *io, uint64_t addr, uint64_t size)
{
    int rc = TSR_OK;
    if (io->ops && io->ops->sync_for_device && (rc = io->ops->sync_for_device(io->ctx, addr, size)))
        tsr_dram_free(io->dram, addr);
    return rc;
}

int tsr_regio_mem_alloc(void *st, uint64_t size, uint64_t align, uint64_t *addr)
{
    tsr_regio_t *io = st;
    int rc = tsr_dram_alloc(io->dram, size, align, addr);
    return rc ? rc : zeroed(io, *addr, size);
}

int tsr_regio_mem_alloc_at(void *st, uint64_t addr, uint64_t size)
{
    tsr_regio_t *io = st;
    int rc = tsr_dram_alloc_at(io->dram, addr, size);
    return rc ? rc : zeroed(io, addr, size);
}

int tsr_regio_mem_free(void *st, uint64_t addr) { return tsr_dram_free(((tsr_regio_t *)st)->dram, addr); }

int tsr_regio_mem_write(void *st, uint64_t addr, const void *src, uint64_t n)
{
    tsr_regio_t *io = st;
    int rc = tsr_dram_write(io->dram, addr, src, n);
    if (!rc && io->ops && io->ops->sync_for_device)
        rc = io->ops->sync_for_device(io->ctx, addr, n);
    return rc;
}

int tsr_regio_mem_read(void *st, uint64_t addr, void *dst, uint64_t n)
{
    tsr_regio_t *io = st;
    int rc = TSR_OK;
    if (io->ops && io->ops->sync_for_cpu)
        rc = io->ops->sync_for_cpu(io->ctx, addr, n);
    return rc ? rc : tsr_dram_read(io->dram, addr, dst, n);
}

void tsr_regio_close(tsr_regio_t *io)
{
    /* The DRAM's bookkeeping first: the implementation may own the memory it views. */
    tsr_dram_t *d = io->dram;
    io->dram = 0;
    tsr_dram_destroy(d);
    if (io->ops && io->ops->close)
        io->ops->close(io->ctx);
    io->ops = 0;
    io->ctx = 0;
}
