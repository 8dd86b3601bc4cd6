/*
 * tsr_act: activation functions by table lookup on the accelerator's
 * activation table unit (config key ACT_LUT; the memory type lut and the
 * ALU op lut of isa/semantics.md), for device tensors (jit/tsr_dtensor.h).
 *
 * A table maps every 8-bit input to an 8-bit output, so any unary
 * quantized operator whose output depends only on its input byte (Sigmoid,
 * Tanh, HardSwish, SiLU, GELU, exp in softmax's numerator, ... in their
 * QDQ / QLinear forms) is exactly one table: the device computes no
 * arithmetic, so its bytes are the table's bytes, whatever rounding the
 * table's builder used (jit/operators.md, "activation tables").
 *
 * Tables are in device terms. A device tensor holds h = x - off (off = 128
 * for uint8, 0 for int8) as int8; the lut op indexes a table by the low 8
 * bits of the accumulator, i.e. by the byte h & 255, and the STORE writes
 * the entry's low 8 bits. So entry i of a table is the device value
 * h_y = y - off_y written for the input whose device byte is i:
 *     i = (x - off_x) & 255,   entry[i] = y(x) - off_y   (in [-128, 127]).
 *
 * Lowering (tsr_act_plan_tensors): the table goes to table 0 of the unit
 * (one LOAD lut), the tensor's rows are cut into tiles of T accumulator
 * rows, two halves of the accumulator buffer alternating so that tile t's
 * STORE overlaps tile t+1's compute; per tile: LOAD acc8 (compute stage:
 * the rows sign-extended, so each lane holds h), one ALU lut over the tile
 * (one op per row, imm table 0), STORE out. The rows are the tensor's
 * whole buffer, padded lanes included (they map to padded lanes,
 * don't-care). DRAM-bound: 2 bytes moved per element and one ALU op per
 * row of BATCH x BLOCK elements.
 */
#ifndef TSR_ACT_H
#define TSR_ACT_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"
#include "tsr_dtensor.h"
#include "tsr_npy.h"

#define TSR_ACT_ENTRIES 256

/* One activation table, in device terms (above). */
typedef struct tsr_act_table {
    int8_t v[TSR_ACT_ENTRIES];
} tsr_act_table_t;

/* A table from a caller's 256 values (device terms: values[i] is the
 * int8 device output for the input device byte i). A value outside
 * [-128, 127] is refused with one line naming its index (TSR_EINVAL);
 * *t is written only on success. */
int tsr_act_table_from_values(const int32_t values[TSR_ACT_ENTRIES], tsr_act_table_t *t);

/* The quantization of a unary operator's input and output (ONNX's
 * DequantizeLinear / QuantizeLinear parameters; per tensor). */
typedef struct tsr_act_quant {
    tsr_dtype_e x_dtype;   /* TSR_DT_INT8 or TSR_DT_UINT8 */
    float x_scale;         /* > 0, finite */
    int32_t x_zp;          /* within x_dtype's range */
    tsr_dtype_e y_dtype;
    float y_scale;         /* > 0, finite */
    int32_t y_zp;          /* within y_dtype's range */
} tsr_act_quant_t;

/* The table of y = Q(f(DQ(x))) computed the way ONNX Runtime's QDQ unary
 * operators (and the QLinear* lookup tables it fuses them to) compute it,
 * in float32, for every x of x_dtype:
 *   xf = (float)(x - x_zp) * x_scale                (one float32 multiply, round to nearest even;
 *                                                   x - x_zp is exact in float32)
 *   yf = (float)f((double)xf)                       (f gets the float32 value exactly; its result is
 *                                                   rounded to float32, to nearest even)
 *   q  = nearbyintf(yf / y_scale) + y_zp            (one float32 division, round to nearest even;
 *                                                   then round half to even, as MlasQuantizeLinear)
 *   y  = clamp(q, y_dtype's range)                  (saturation; +-infinity saturate)
 * and entry[(x - off_x) & 255] = y - off_y. The host's float32 arithmetic
 * is IEEE binary32 with the default rounding (the build uses no fast-math).
 * f must return the float32 value ONNX Runtime's float kernel returns for
 * the operator to be bit-exact (e.g. its MLAS logistic / tanh
 * approximations rather than the exact functions: a result one float32
 * ulp off can land on the other side of a quantization boundary).
 * Refused (TSR_EINVAL, one line): a dtype not int8/uint8, a scale not
 * positive and finite, a zero point outside its type, a NULL f, and an f
 * that returns NaN (naming the input x); *t is written only on success. */
int tsr_act_table_from_function(const tsr_act_quant_t *q, double (*f)(double), tsr_act_table_t *t);

typedef struct tsr_act_plan {
    uint64_t rows;            /* accumulator rows the tensor's buffer holds (its bytes / row bytes) */
    uint32_t tile_rows;       /* T: rows per tile */
    int tiles;                /* ceil(rows / T) */
    int nbuf;                 /* 2: alternating accumulator halves; 1: one (buffer of one row) */
    uint64_t x_addr, y_addr;  /* the device tensors' buffers (not owned) */
    uint64_t c_addr;          /* owned: the table (256 B) then the plan's two uops */
    tsr_insn_t *insns;        /* the stream (owned) */
    size_t ninsns;
    uint64_t alu_ops;         /* ALU tensor ops (one per row) */
    uint64_t dram_bytes;      /* DRAM bytes the stream's LOADs and STOREs move */
} tsr_act_plan_t;

/* Plan table t over device tensors x -> y (same shape; any dtypes and
 * zero points: the table says what the bytes become). Refused: a NULL
 * argument, a config without activation tables (ACT_LUT = 0), tensors of
 * different shapes or without buffers. Allocates the plan's small
 * constant buffer and writes the table and uops to it. */
int tsr_act_plan_tensors(tsr_device_t *dev, const tsr_act_table_t *t, const tsr_dtensor_t *x, const tsr_dtensor_t *y,
                         tsr_act_plan_t *plan);
/* Run the plan (tsr_submit, which verifies, + tsr_wait). */
int tsr_act_exec(tsr_device_t *dev, const tsr_act_plan_t *plan);
/* Free the stream and the constant buffer (safe on a zeroed or failed plan). */
void tsr_act_plan_free(tsr_device_t *dev, tsr_act_plan_t *plan);
/* Plan, run, free. */
int tsr_act_run(tsr_device_t *dev, const tsr_act_table_t *t, const tsr_dtensor_t *x, const tsr_dtensor_t *y);

#endif
