#!/usr/bin/python3
"""Build the tessera package's C extension (tessera/_tessera_c) with cffi in API mode.

    /usr/bin/python3 python/build_cffi.py --source SRC --lib LIBTESSERA.so --out PKGDIR [--tmp DIR]

Compiles the declarations below against the public headers (so a header change that breaks a
declaration fails the build instead of corrupting memory at run time), links libtessera.so,
and assembles PKGDIR: the package's .py files, the extension and a copy of libtessera.so
(found through the extension's rpath $ORIGIN, so the directory can be installed anywhere).
Run by the CMake target python_ext; exit 2 with one line on bad arguments.
"""
import argparse
import os
import shutil
import sys

# What the package calls. Structs the package reads field by field are declared with "...;"
# so that cffi takes their layout from the headers.
CDEF = r"""
void free(void *);
enum { TSR_OK = 0, TSR_EINVAL = -1, TSR_ECONFIG = -2, TSR_EPARSE = -3, TSR_EVERIFY = -4,
       TSR_EDEADLOCK = -5, TSR_EBOUNDS = -6, TSR_ENOMEM = -7, TSR_EIO = -8, TSR_ETIMEOUT = -9,
       TSR_EBACKEND = -10, TSR_EFAULT = -11 };
const char *tsr_errmsg(void);
const char *tsr_errname(int code);
void tsr_err_clear(void);

typedef struct tsr_config {
    char target[32]; char hw_ver[32];
    int log_inp_width; int log_wgt_width; int log_acc_width; int log_batch;
    int log_block_in; int log_block_out; int log_uop_buff_size; int log_inp_buff_size;
    int log_wgt_buff_size; int log_acc_buff_size;
    int dram_bus_width; int clock_mhz; int cmd_queue_depth; int dep_queue_depth;
    int dsp_pack; int out_buff_lutram; int acc_single_copy; int serial_core; int exact_requant; int act_lut;
    int inp_width; int wgt_width; int acc_width; int out_width; int batch; int block_in; int block_out;
    uint32_t uop_bytes; uint32_t inp_bytes; uint32_t wgt_bytes; uint32_t acc_bytes; uint32_t acc8_bytes;
    uint32_t out_bytes; uint32_t uop_depth; uint32_t inp_depth; uint32_t wgt_depth; uint32_t acc_depth;
    uint32_t out_depth; int uop_idx_bits; int inp_idx_bits; int wgt_idx_bits; int acc_idx_bits;
    int uop_dst_bits; int uop_src_bits; int uop_wgt_bits; int sram_base_bits;
    uint64_t out_buff_size; uint64_t macs_per_op;
    ...;
} tsr_config_t;
int tsr_config_parse(const char *json, const char *name, tsr_config_t *cfg);
int tsr_config_load(const char *path_or_preset, tsr_config_t *cfg);
const char *tsr_config_preset_json(const char *name);
const char *const *tsr_config_preset_names(void);

typedef struct tsr_rtl_opts {
    uint32_t dram_latency; double dram_bytes_per_cycle; uint32_t dram_outstanding; int threads;
    uint64_t watchdog_cycles;
    ...;
} tsr_rtl_opts_t;
typedef struct tsr_device_opts {
    uint64_t dram_size; uint64_t seed; uint64_t run_budget; tsr_rtl_opts_t rtl;
    ...;
} tsr_device_opts_t;
typedef struct tsr_device tsr_device_t;
const char *const *tsr_backend_names(void);
int tsr_device_open(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *opts,
                    tsr_device_t **out);
void tsr_device_close(tsr_device_t *dev);
int tsr_mem_alloc_at(tsr_device_t *dev, uint64_t addr, uint64_t size);
int tsr_mem_free(tsr_device_t *dev, uint64_t addr);
int tsr_mem_write(tsr_device_t *dev, uint64_t addr, const void *src, uint64_t n);
int tsr_mem_read(tsr_device_t *dev, uint64_t addr, void *dst, uint64_t n);

typedef enum { TSR_DT_INT8, TSR_DT_UINT8, TSR_DT_INT16, TSR_DT_INT32, TSR_DT_FLOAT32, TSR_DT_INT64 } tsr_dtype_e;
typedef struct tsr_tensor {
    tsr_dtype_e dtype; int ndim; int64_t shape[8]; void *data; size_t nbytes;
} tsr_tensor_t;
void tsr_tensor_free(tsr_tensor_t *t);

typedef struct tsr_onnx tsr_onnx_t;
int tsr_onnx_load_buffer(const void *buf, size_t n, const char *name, int batch, tsr_onnx_t **out);
void tsr_onnx_free(tsr_onnx_t *m);
int tsr_onnx_device_ops(const tsr_onnx_t *m);
int tsr_onnx_host_ops(const tsr_onnx_t *m);
int tsr_onnx_prepare(tsr_onnx_t *m, const tsr_config_t *cfg, tsr_device_t *dev, unsigned flags);
int tsr_onnx_run(tsr_onnx_t *m, const tsr_tensor_t *in, tsr_tensor_t *out);
int tsr_onnx_read_value(const tsr_onnx_t *m, const char *name, tsr_tensor_t *out);

typedef struct tsr_insn { ...; } tsr_insn_t;
typedef struct tsr_asm_buffer {
    char name[64]; uint64_t addr; uint64_t size; int init; uint64_t seed; char *path;
    uint64_t *uops; size_t nuops; int is_output; int line;
    ...;
} tsr_asm_buffer_t;
typedef struct tsr_program {
    tsr_insn_t *insns; int *lines; size_t ninsns; tsr_asm_buffer_t *bufs; size_t nbufs;
    ...;
} tsr_program_t;
int tsr_asm_parse(const tsr_config_t *cfg, const char *text, const char *name, tsr_program_t *prog);
void tsr_program_free(tsr_program_t *prog);
void tsr_asm_random_fill(uint64_t seed, uint8_t *dst, size_t n);
int tsr_submit(tsr_device_t *dev, const tsr_insn_t *insns, size_t n);
int tsr_wait(tsr_device_t *dev, int timeout_ms);

typedef struct tsr_region { uint64_t addr; uint64_t size; const char *name; } tsr_region_t;
typedef struct tsr_verify_opts {
    const tsr_region_t *regions; size_t nregions; int check_dram;
    int (*read)(void *, uint64_t, void *, size_t); void *read_ctx;
    ...;
} tsr_verify_opts_t;
int tsr_verify(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n, const tsr_verify_opts_t *opts);

/* glue (below): what a print function writes, as a malloc'd string (free()); NULL if out of memory
 * or the writer failed */
char *tsr_py_onnx_placement(const tsr_onnx_t *m);
char *tsr_py_onnx_placement_json(const tsr_onnx_t *m);
char *tsr_py_onnx_report(const tsr_onnx_t *m);
"""

# Compiled into the extension: the includes, and the only C of the package's own. The
# placement (as JSON, tsr_onnx_write_placement_json) and the per-layer report (text only:
# onnx/tsr_onnx.h has no structured accessor for it yet) are written by the library to a FILE;
# they are captured in memory (open_memstream) and parsed in Python.
SOURCE = r"""
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include "tsr_error.h"
#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_asm.h"
#include "tsr_verify.h"
#include "tsr_npy.h"
#include "tsr_onnx.h"

static char *tsr_py_capture(const tsr_onnx_t *m, void (*print)(const tsr_onnx_t *, FILE *),
                             int (*write)(const tsr_onnx_t *, FILE *))
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return NULL;
    int rc = 0;
    if (print)
        print(m, f);
    else
        rc = write(m, f);
    if (fclose(f) || rc) {
        free(buf);
        return NULL;
    }
    return buf;
}
static char *tsr_py_onnx_placement(const tsr_onnx_t *m) { return tsr_py_capture(m, tsr_onnx_print_placement, NULL); }
static char *tsr_py_onnx_placement_json(const tsr_onnx_t *m)
{
    return tsr_py_capture(m, NULL, tsr_onnx_write_placement_json);
}
static char *tsr_py_onnx_report(const tsr_onnx_t *m) { return tsr_py_capture(m, tsr_onnx_print_report, NULL); }
"""


def main():
    ap = argparse.ArgumentParser(description="build the tessera Python extension (cffi, API mode)")
    ap.add_argument("--source", required=True, help="Tessera source tree")
    ap.add_argument("--lib", required=True, help="libtessera.so to link")
    ap.add_argument("--out", required=True, help="package directory to assemble")
    ap.add_argument("--tmp", help="cffi's work directory (default: OUT/../cffi-tmp)")
    a = ap.parse_args()
    if not os.path.isfile(a.lib) or not os.path.isdir(os.path.join(a.source, "python", "tessera")):
        print("build_cffi: --lib must be libtessera.so and --source the Tessera tree", file=sys.stderr)
        return 2
    import cffi  # here, so that a bad command line is refused without it

    src = os.path.abspath(a.source)
    libdir = os.path.dirname(os.path.abspath(a.lib))
    out = os.path.abspath(a.out)
    tmp = os.path.abspath(a.tmp or os.path.join(out, "..", "cffi-tmp"))
    os.makedirs(out, exist_ok=True)
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source(
        "tessera._tessera_c", SOURCE,
        include_dirs=[os.path.join(src, d) for d in ("isa", "driver", "jit", "onnx")],
        library_dirs=[libdir], libraries=["tessera"],
        extra_compile_args=["-std=c11", "-Wall", "-Werror", "-Wno-unused-function"],
        extra_link_args=["-Wl,-rpath,$ORIGIN"])
    built = ffi.compile(tmpdir=tmp, verbose=False)
    shutil.copy2(built, os.path.join(out, os.path.basename(built)))
    # The shared library next to the extension (rpath $ORIGIN), under its soname.
    real = os.path.realpath(a.lib)
    shutil.copy2(real, os.path.join(out, "libtessera.so.0"))
    for f in sorted(os.listdir(os.path.join(src, "python", "tessera"))):
        if f.endswith(".py"):
            shutil.copy2(os.path.join(src, "python", "tessera", f), os.path.join(out, f))
    return 0


if __name__ == "__main__":
    sys.exit(main())
