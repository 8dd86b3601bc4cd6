/*
 * tsr_npy: host tensors and the NumPy .npy file format, so that the
 * `tessera op ...` commands can take operands from, and hand results back
 * to, the files NumPy users already have (np.save / np.load).
 *
 * A tsr_tensor_t is a dense row-major (C order) array in host memory that
 * owns its data. The reader accepts what NumPy writes for the supported
 * dtypes: format versions 1.0, 2.0 and 3.0, any byte order and Fortran
 * order (both converted to native row-major on load, so no caller ever sees
 * a strided or byte-swapped tensor). Everything else is rejected with a
 * message naming the file and the problem; a corrupt or hostile file can
 * never make the reader crash or allocate more than the file's own size.
 *
 * The writer emits what np.save emits for a C-contiguous array: version
 * 1.0, native byte order, header padded to a multiple of 64 bytes. It
 * replaces the destination atomically (temporary file + rename), so a
 * failed write leaves any previous file untouched.
 *
 * Error codes: TSR_EIO when the OS fails us (open, read, write, rename),
 * TSR_EPARSE when the bytes are not a valid .npy file (bad magic,
 * truncation, malformed header, size mismatch), TSR_EINVAL for a valid file
 * Tessera cannot represent (unsupported dtype, more than 8 dimensions) and
 * for bad arguments, TSR_ENOMEM when the data does not fit in memory.
 */
#ifndef TSR_NPY_H
#define TSR_NPY_H

#include <stddef.h>
#include <stdint.h>

/* Most dimensions a tensor can have (NumPy allows 64; operators need 4). */
#define TSR_TENSOR_MAX_DIMS 8

/* Element types the accelerator's operators consume or produce. */
typedef enum {
    TSR_DT_INT8,    /* int8_t: inputs, weights, requantized outputs */
    TSR_DT_UINT8,   /* uint8_t: unsigned inputs (images) */
    TSR_DT_INT16,   /* int16_t: 16-bit configs (LOG_*_WIDTH = 4) */
    TSR_DT_INT32,   /* int32_t: accumulators, biases */
    TSR_DT_FLOAT32, /* IEEE-754 binary32: host-side reference data */
    TSR_DT_INT64,   /* int64_t: ONNX int64 inputs (token ids); read and written, no operator takes it */
} tsr_dtype_e;

typedef struct tsr_tensor {
    tsr_dtype_e dtype;                  /* element type */
    int ndim;                           /* number of dimensions, 0 (scalar) .. 8 */
    int64_t shape[TSR_TENSOR_MAX_DIMS]; /* extent of each dimension (>= 0); unused ones are 0 */
    void *data;                         /* row-major elements, native byte order (owned, malloc) */
    size_t nbytes;                      /* bytes at data: product(shape) x dtype size */
} tsr_tensor_t;

/* Lower-case name ("int8", "float32"), or "invalid" for an out-of-range value. */
const char *tsr_dtype_name(tsr_dtype_e dt);
/* Bytes per element, 0 for an out-of-range value. */
size_t tsr_dtype_size(tsr_dtype_e dt);
/* Number of elements (1 for a scalar, 0 if any dimension is 0). */
int64_t tsr_tensor_numel(const tsr_tensor_t *t);

/* Allocate a zero-filled tensor of the given type and shape (shape may be
 * NULL when ndim is 0). On error *t is left zeroed. data is never NULL on
 * success, even for an empty tensor. */
int tsr_tensor_alloc(tsr_tensor_t *t, tsr_dtype_e dtype, int ndim, const int64_t *shape);
/* Free the data and zero the struct; safe on NULL and on a zeroed tensor. */
void tsr_tensor_free(tsr_tensor_t *t);

/* Load a .npy file. On error *out is left zeroed (free is still safe) and
 * the message (tsr_errmsg) starts with the path. */
int tsr_npy_read(const char *path, tsr_tensor_t *out);
/* Same, from a complete file image in memory; messages name "<npy buffer>". */
int tsr_npy_parse(const void *buf, size_t n, tsr_tensor_t *out);
/* Same, with the name to use in messages (e.g. "<stdin>"). */
int tsr_npy_parse_named(const void *buf, size_t n, const char *name, tsr_tensor_t *out);

/* Write t to path as .npy version 1.0, atomically replacing any existing
 * file. The tensor is validated first (dtype, ndim, shape, nbytes, data). */
int tsr_npy_write(const char *path, const tsr_tensor_t *t);

#endif
