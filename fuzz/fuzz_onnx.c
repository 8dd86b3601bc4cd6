/*
 * fuzz_onnx: libFuzzer target for the ONNX importer. Any byte string is
 * given to tsr_onnx_load_buffer: the same path as a file (the nesting
 * pre-scan of onnx/tsr_onnx_wire.h, protobuf-c unpack, validation,
 * lowering), so deep nesting is refused before unpack here as well;
 * the importer must return 0 or an error, never crash, hang or allocate
 * beyond its limits. Build: cmake -DTSR_FUZZ=ON -DCMAKE_C_COMPILER=clang.
 */
#include <stddef.h>
#include <stdint.h>

#include "tsr_onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tsr_onnx_t *m = NULL;
    if (!tsr_onnx_load_buffer(data, size, "<fuzz>", 2, &m))
        tsr_onnx_free(m);
    return 0;
}
