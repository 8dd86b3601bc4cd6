/*
 * tsr_opplan: the plan step every lowering (conv2d, pool, add/clip) shares,
 * once its geometry is known: fetch the kernel (tiling, relocatable
 * stream, uops) from the device's kernel cache or generate it; check the
 * device tensors it is given and allocate the buffers it is not; bind the
 * kernel's stream to those buffers (check alignment, copy, relocate,
 * optionally re-check every field); count what the stream does. The
 * operator keeps only what is its own: its geometry, signature, kernel
 * metadata, buffer sizes and constants.
 */
#ifndef TSR_OPPLAN_H
#define TSR_OPPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_kcache.h"

/* Fetch: ctx is the operator's; fits may adopt a cached kernel's tiling
 * into it (tsr_kcache_fetch), gen generates and inserts into kc. */
typedef struct tsr_opplan_kernel {
    const uint8_t *sig;                                   /* kernel cache signature */
    size_t sig_len;
    int (*fits)(const tsr_kernel_t *k, void *ctx);        /* a cached kernel still fits (1) */
    int (*gen)(tsr_kcache_t *kc, void *ctx, tsr_kcache_ref_t **ref); /* generate and insert it */
    void *ctx;
} tsr_opplan_kernel_t;

/* The device's kernel cache, then tsr_kcache_fetch: *ref and *status
 * (tsr_kc_status_e) as there. */
int tsr_opplan_fetch(tsr_device_t *dev, const tsr_opplan_kernel_t *k, tsr_kcache_ref_t **ref, int *status);

/* One device buffer of a plan, in the order they are allocated (the order
 * decides the addresses, hence the streams: keep each operator's). */
typedef struct tsr_opbuf {
    uint64_t bytes;            /* its size; 0: the plan has none (nothing allocated, *addr 0) */
    const tsr_dtensor_t *t;    /* a device tensor to use (of exactly bytes, allocated), or NULL: allocate */
    uint64_t *addr;            /* gets its address */
} tsr_opbuf_t;

/* Check every given tensor against its size ("op: device tensors do not
 * match the plan's input/output layout"), then allocate the others in
 * order. On error the addresses already set stay set: the operator's plan
 * free releases them. */
int tsr_opplan_buffers(tsr_device_t *dev, const char *op, const tsr_opbuf_t *b, int n);

/* What binding gives the plan. */
typedef struct tsr_opplan_stream {
    tsr_insn_t *insns;         /* the plan's stream (malloc'ed; the plan owns it) */
    size_t ninsns;
    uint64_t gemm_ops;         /* GEMM tensor ops (non-reset) it performs */
    uint64_t alu_ops;          /* ALU tensor ops */
    uint64_t dram_bytes;       /* DRAM bytes it loads and stores (instructions excluded) */
} tsr_opplan_stream_t;

/* Bind ref's kernel to the buffers: base[s][m] is the byte address of the
 * buffer of memory type m (TSR_MEM_*) in slot s (tsr_kcache_relocate_slots;
 * slot NULL: one slot). Every nonzero address must be a multiple of its
 * element size. check_fields: encode every instruction once relocated (for
 * a stream not checked when it was generated). Counts into *out. On error
 * out->insns may be set: the plan takes it like on success (its free
 * releases it). */
int tsr_opplan_bind(const tsr_config_t *c, const char *op, const tsr_kcache_ref_t *ref, const uint8_t *slot, int nslots,
                    const uint64_t base[][TSR_MEM_COUNT], int check_fields, tsr_opplan_stream_t *out);

/* Give a plan what tsr_opplan_bind returned (rc) and produced (st): the
 * stream always (on error too: the plan's free releases it), the counts
 * only on success; returns rc. Field by field because the operators' plans
 * are distinct public structs that each carry these five fields. */
int tsr_opplan_take(int rc, const tsr_opplan_stream_t *st, tsr_insn_t **insns, size_t *ninsns, uint64_t *gemm_ops,
                    uint64_t *alu_ops, uint64_t *dram_bytes);

#endif
