/*
 * tsr_dtensor: a device tensor, the one activation layout operators exchange
 * (jit/operators.md, "Device tensors and the layout contract").
 *
 * Why one layout. Before, every operator packed its own input from host
 * NCHW and unpacked its own output, so nothing could chain on the device.
 * A device tensor is a DRAM buffer holding an NCHW tensor in the blocked
 * layout every lowering reads and writes directly:
 *
 *   elements [NB][CB][H][W], NB = ceil(N / BATCH), CB = ceil(C / BLOCK),
 *   each element one on-chip row [BATCH][BLOCK] of int8:
 *   row (nb, cb, y, x) lane [b][i] = h(n = nb*BATCH + b, c = cb*BLOCK + i, y, x)
 *
 * with BLOCK = BLOCK_IN = BLOCK_OUT (configs where they differ cannot chain
 * an output into the next input and are refused) and the values re-centred
 * to int8: h = x - off, off = 128 for uint8, 0 for int8 (the conv2d lowering
 * has always fed its GEMMs that way). The device therefore sees every
 * tensor as int8 with zero point zp - off (its "device view",
 * tsr_dtensor_view): operators over device tensors are planned on the
 * device view and write the re-centred values of their output directly.
 * Padded channels (c >= C) and padded batch lanes (n >= N) are
 * don't-care: the edge packer writes zp - off there, operators may leave
 * anything, and no consumer reads them with a non-zero weight (conv and
 * dense weights are zero on padded input channels; pools and elementwise
 * ops map padded lanes to padded lanes).
 *
 * Packing from and unpacking to host NCHW happens only at the edges of a
 * graph (tsr_dtensor_write_nchw / tsr_dtensor_read_nchw).
 */
#ifndef TSR_DTENSOR_H
#define TSR_DTENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_npy.h"

typedef struct tsr_dtensor {
    int n, c, h, w;        /* logical NCHW shape, each >= 1 */
    tsr_dtype_e dtype;     /* logical dtype: TSR_DT_INT8 or TSR_DT_UINT8 */
    int32_t zp;            /* logical zero point, within dtype's range */
    int batch, block;      /* BATCH and BLOCK (= BLOCK_IN = BLOCK_OUT) of the config */
    int nb, cb;            /* batch blocks ceil(N / BATCH), channel blocks ceil(C / BLOCK) */
    uint64_t bytes;        /* NB*CB*H*W rows of BATCH*BLOCK bytes */
    uint64_t addr;         /* device byte address of the buffer (0: none yet) */
    int owned;             /* 1: the buffer was allocated by tsr_dtensor_alloc and is freed with the tensor */
} tsr_dtensor_t;

/* Re-centring offset of a dtype: 128 for uint8, 0 for int8. */
int tsr_dtensor_off(tsr_dtype_e dt);
/* Describe a tensor of shape [n, c, h, w] for cfg (no buffer). TSR_EINVAL
 * for a bad shape, dtype or zero point, or a config that cannot chain
 * (BLOCK_IN != BLOCK_OUT, or inputs/outputs not 8-bit). */
int tsr_dtensor_init(const tsr_config_t *cfg, int n, int c, int h, int w, tsr_dtype_e dt, int32_t zp,
                     tsr_dtensor_t *t);
/* Allocate an owned buffer for t (t->addr must be 0). */
int tsr_dtensor_alloc(tsr_device_t *dev, tsr_dtensor_t *t);
/* Free an owned buffer (no-op otherwise) and clear the address. */
void tsr_dtensor_free(tsr_device_t *dev, tsr_dtensor_t *t);
/* The device view: dtype int8, zero point zp - off. */
void tsr_dtensor_view(const tsr_dtensor_t *t, tsr_dtype_e *dt, int32_t *zp);
/* 1 if a and b describe the same shape, dtype and zero point. */
int tsr_dtensor_same(const tsr_dtensor_t *a, const tsr_dtensor_t *b);

/* Host packing: x holds NCHW bytes of t->dtype; dst gets t->bytes. */
void tsr_dtensor_pack(const tsr_dtensor_t *t, const void *x, uint8_t *dst);
/* Host unpacking: src holds t->bytes; y gets NCHW bytes of t->dtype. */
void tsr_dtensor_unpack(const tsr_dtensor_t *t, const uint8_t *src, void *y);
/* Pack and write to / read and unpack from the tensor's buffer. */
int tsr_dtensor_write_nchw(tsr_device_t *dev, const tsr_dtensor_t *t, const void *x);
int tsr_dtensor_read_nchw(tsr_device_t *dev, const tsr_dtensor_t *t, void *y);

#endif
