/*
 * tsr_dtype: the 8-bit activation and weight types every lowering checks
 * and packs (int8, uint8), in one place: which are allowed, their ranges,
 * the re-centring offset the device works with (h = x - off: int8 values
 * on chip for both types) and reading one element.
 */
#ifndef TSR_DTYPE_H
#define TSR_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_npy.h"

/* int8 or uint8: the types the operators take. */
static inline int tsr_dt_ok(tsr_dtype_e d) { return d == TSR_DT_INT8 || d == TSR_DT_UINT8; }
/* The type's range. */
static inline int32_t tsr_dt_min(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 0 : -128; }
static inline int32_t tsr_dt_max(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 255 : 127; }
/* The re-centring offset: 128 for uint8, 0 for int8 (tsr_dtensor_off). */
static inline int32_t tsr_dt_off(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 128 : 0; }
/* Element i of an int8 or uint8 array, as a value. */
static inline int32_t tsr_dt_get(tsr_dtype_e d, const void *base, size_t i)
{
    return d == TSR_DT_UINT8 ? (int32_t)((const uint8_t *)base)[i] : (int32_t)((const int8_t *)base)[i];
}

#endif
