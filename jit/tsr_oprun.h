/*
 * tsr_oprun: one operator run on a device, start to end: plan (timed,
 * kernel from the cache), write the weights and inputs, reset the counters,
 * execute (timed), read the counters and the output, free the plan. Every
 * single-operator caller (the CLI's `op` commands and the per-layer bench)
 * runs through here instead of spelling out the six calls per operator; a
 * graph of operators runs through tsr_graph instead.
 */
#ifndef TSR_OPRUN_H
#define TSR_OPRUN_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_op.h"

/* The operator (tsr_op.h's kinds under this runner's names), and the type
 * of the params handed to tsr_oprun. */
typedef tsr_op_kind_e tsr_oprun_e;
#define TSR_OPRUN_CONV2D TSR_OPK_CONV /* tsr_conv2d_params_t; in: x, w, bias */
#define TSR_OPRUN_DENSE TSR_OPK_DENSE /* tsr_dense_params_t; in: x, w, bias */
#define TSR_OPRUN_ADD TSR_OPK_ADD     /* tsr_add_params_t; in: a, b */
#define TSR_OPRUN_CLIP TSR_OPK_CLIP   /* tsr_clip_params_t (relu too); in: x */
#define TSR_OPRUN_POOL TSR_OPK_POOL   /* tsr_pool_params_t; in: x */

/* What a run reports. */
typedef struct {
    double plan_ms;     /* wall time of the plan (kernel generated or fetched, buffers allocated) */
    int kcache;         /* tsr_kc_status_e of its kernel */
    double exec_s;      /* wall time of the execution (submit + wait) */
    size_t ninsns;      /* instructions of its stream */
    tsr_counters_t ctr; /* the device's counters of the execution */
} tsr_oprun_info_t;

/* Run operator op with params on dev: x (add: a), w (add: b; NULL for the
 * operators without weights), bias (NULL: none) in the operator's own
 * host layout, the output into y. info (may be NULL) gets the figures.
 * Nothing is left allocated on the device, on success or error. */
int tsr_oprun(tsr_device_t *dev, tsr_oprun_e op, const void *params, const void *x, const void *w,
              const int32_t *bias, void *y, tsr_oprun_info_t *info);

#endif
