/*
 * tsr_regio: the one register/DMA layer under every backend that drives the
 * accelerator through its AXI4-Lite register map (isa/tsr_regs.h): 32-bit
 * register reads and writes, a wait for the completion signal, and device
 * DRAM as a tsr_dram_t (allocator plus host view of the memory the
 * accelerator's AXI4 master reads) with cache maintenance around the
 * accelerator's accesses. Implementations: the Verilated model
 * (sim/tsr_rtl.c, `rtl`), Linux UIO + u-dma-buf (driver/tsr_uio.c,
 * `zynq`). The register sequence on top (driver/tsr_regseq.c) is the same
 * code for all of them, so simulation tests what a board runs.
 */
#ifndef TSR_REGIO_H
#define TSR_REGIO_H

#include <stdint.h>

#include "tsr_dram.h"

typedef struct tsr_regio_ops {
    const char *name;                                           /* "rtl", "uio" */
    int (*read32)(void *ctx, uint32_t off, uint32_t *v);        /* register at byte offset off */
    int (*write32)(void *ctx, uint32_t off, uint32_t v);
    /* Let the device run for up to `slice` (cycles on a model, milliseconds
     * on a board) or until its completion signal (the done/interrupt line)
     * rises; *fired = 1 then. NULL: the caller polls AP_CTRL instead. */
    int (*wait_irq)(void *ctx, uint64_t slice, int *fired);
    /* Make host writes to [addr, addr + n) visible to the device, and the
     * device's writes visible to the host (no-ops on coherent models). */
    int (*sync_for_device)(void *ctx, uint64_t addr, uint64_t n);
    int (*sync_for_cpu)(void *ctx, uint64_t addr, uint64_t n);
    /* Optional: the implementation's own check once a soft reset reports
     * done (the model's DRAM slave: every burst the master started has
     * completed). */
    int (*after_reset)(void *ctx);
    void (*close)(void *ctx);                                   /* release ctx (not the dram) */
} tsr_regio_ops_t;

/* A register/DMA implementation instance. A backend state that begins
 * with a tsr_regio_t can use the tsr_regio_mem_* entry points below
 * directly as its tsr_backend_ops_t memory functions. */
typedef struct tsr_regio {
    const tsr_regio_ops_t *ops; /* NULL: DRAM only (no registers, no cache maintenance) */
    void *ctx;                  /* the implementation's state */
    tsr_dram_t *dram;           /* device DRAM: buffers and their host view */
    uint64_t slice;             /* wait_irq slice: cycles (model) or ms (board) */
    const char *slice_unit;     /* "cycles", "ms" */
} tsr_regio_t;

/* Backend memory functions over a state that begins with a tsr_regio_t. */
int tsr_regio_mem_alloc(void *st, uint64_t size, uint64_t align, uint64_t *addr);
int tsr_regio_mem_alloc_at(void *st, uint64_t addr, uint64_t size);
int tsr_regio_mem_free(void *st, uint64_t addr);
/* Copy into device DRAM, then sync_for_device. */
int tsr_regio_mem_write(void *st, uint64_t addr, const void *src, uint64_t n);
/* sync_for_cpu, then copy out of device DRAM. */
int tsr_regio_mem_read(void *st, uint64_t addr, void *dst, uint64_t n);
/* Release the implementation and the DRAM. */
void tsr_regio_close(tsr_regio_t *io);

#endif
