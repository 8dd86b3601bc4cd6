/*
 * fuzz_npy: .npy bytes -> tsr_npy_parse_named, the in-memory reader whose
 * prefix, header and data checks tsr_npy_read (the path reader) shares.
 * An accepted file must describe a tensor whose element count times the
 * element size fits the bytes that followed the header.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "tsr_npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tsr_tensor_t t;
    if (tsr_npy_parse_named(data, size, "fuzz.npy", &t))
        return 0;
    int64_t numel = tsr_tensor_numel(&t);
    size_t es = tsr_dtype_size(t.dtype);
    if (numel < 0 || es == 0 || (uint64_t)numel > size / es) {
        fprintf(stderr, "fuzz: accepted %lld elements of %zu bytes from %zu input bytes\n",
                (long long)numel, es, size);
        abort();
    }
    tsr_tensor_free(&t);
    return 0;
}
