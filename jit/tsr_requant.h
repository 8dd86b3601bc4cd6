/*
 * tsr_requant: the requantization fields (jit/operators.md
 * "Requantization": int32 accumulator -> int8/uint8 output) that conv2d,
 * dense and the graph's requantize node state alike, as one struct, with
 * their one check and the packing of the ALU's rqfin row.
 *
 * The parameter structs keep their field names (p->mult, p->y_zp, ...):
 * they hold the fields through TSR_REQUANT_MEMBERS, an anonymous union of
 * the named struct (p->rq, to copy or check them at once) and the same
 * fields unnamed.
 */
#ifndef TSR_REQUANT_H
#define TSR_REQUANT_H

#include <stdint.h>

#include "tsr_npy.h"

#define TSR_REQUANT_FIELDS                                                                                            \
    tsr_dtype_e y_dtype;      /* TSR_DT_INT8 or TSR_DT_UINT8 */                                                       \
    int32_t y_zp;             /* output zero point, within y_dtype's range */                                        \
    const int32_t *mult;      /* [rq_count] multipliers, [0, 2^31 - 1] */                                            \
    const int32_t *shift;     /* [rq_count] shifts, [-31, 30] (> 0 shifts left) */                                   \
    int rq_count;             /* 1 (per tensor) or one per output channel */                                         \
    int32_t act_min, act_max; /* output clamp, within y_dtype's range, act_min <= act_max */                        \
    const float *fscale;      /* NULL: fixed point (mult, shift); else [rq_count] float32 scales, normal and > 0,   \
                                 applied by the ALU's fscale (config EXACT_REQUANT): ONNX Runtime's                  \
                                 round_half_even(float32(acc) * scale) bit for bit; mult/shift then unused */

typedef struct tsr_requant {
    TSR_REQUANT_FIELDS
} tsr_requant_t;

/* In a parameter struct: the fields by name and as .rq. */
#define TSR_REQUANT_MEMBERS                                                                                           \
    union {                                                                                                           \
        tsr_requant_t rq;                                                                                             \
        struct {                                                                                                      \
            TSR_REQUANT_FIELDS                                                                                        \
        };                                                                                                            \
    }

/* Check rq for an output of `channels` channels (chname: how the operator
 * names that count, "C_out", "M"): 1 or channels (multiplier, shift)
 * pairs, each in range, and the clamp a non-empty subrange of y_dtype's.
 * (y_dtype and y_zp are the caller's to check first.) Messages start with
 * op. */
int tsr_requant_check(const char *op, const tsr_requant_t *rq, int channels, const char *chname);

/* The fscale operand of a float32 scale: its bit pattern. */
static inline int32_t tsr_requant_fscale_bits(float f)
{
    union {
        float f;
        uint32_t u;
    } v = {.f = f};
    return (int32_t)v.u;
}

/* The rqfin operand row of one output channel (isa/semantics.md): right
 * shift in [4:0], zero point [13:5], clamp low [22:14], high [31:23]. */
static inline int32_t tsr_requant_rqfin(int32_t rshift, int32_t zp, int32_t lo, int32_t hi)
{
    return (int32_t)((uint32_t)rshift | ((uint32_t)zp & 511u) << 5 | ((uint32_t)lo & 511u) << 14 |
                     ((uint32_t)hi & 511u) << 23);
}

#endif
