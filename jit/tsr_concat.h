/*
 * tsr_concat: the concatenation of two device tensors along channels
 * (ONNX Concat axis 1, a chain of them for more inputs) as the graph runs
 * it: no kernel and no copy. The output is allocated once and each input
 * is a view of its channel slice (tsr_graph.c): its producer writes the
 * slice in place, its readers read it there. The blocked layout
 * (tsr_dtensor.h, [NB][CB][H][W] rows of BATCH x BLOCK lanes) makes a
 * slice a view with the output's strides exactly when one batch block
 * holds the batch (N <= BATCH) and the first input's channels fill whole
 * blocks (C_a a multiple of BLOCK): input b then starts C_a / BLOCK * H * W
 * rows into the output. Other shapes are refused (tsr_concat_layout),
 * naming the reason, so the caller keeps the concat elsewhere.
 */
#ifndef TSR_CONCAT_H
#define TSR_CONCAT_H

#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_npy.h"

typedef struct tsr_concat_params {
    int n, h, w;           /* the shared N, H, W */
    int c_a, c_b;          /* channels of input a (first) and b; the output has c_a + c_b */
    tsr_dtype_e dtype;     /* TSR_DT_INT8 or TSR_DT_UINT8, of all three tensors */
    int32_t zp;            /* zero point of all three (the bytes are shared, not converted) */
} tsr_concat_params_t;

/* Check the parameters (shape, dtype, zero point): 0 or TSR_EINVAL. */
int tsr_concat_check(const tsr_concat_params_t *p);
/* Can cfg's device tensors hold the inputs as views of the output? 0, or
 * TSR_EINVAL saying why not (N > BATCH, C_a not a multiple of BLOCK). */
int tsr_concat_layout(const tsr_config_t *cfg, const tsr_concat_params_t *p);
/* Byte offset of input b's slice in the output's buffer (cfg's layout). */
uint64_t tsr_concat_b_offset(const tsr_config_t *cfg, const tsr_concat_params_t *p);

#endif
