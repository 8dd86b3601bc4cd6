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
typedef void (*tsr_notice_fn)(void *ctx, const char *line);
void tsr_set_notice_handler(tsr_notice_fn fn, void *ctx);
extern "Python" void _tsr_notice_cb(void *ctx, const char *line);

typedef struct tsr_config {
    char target[32]; char hw_ver[32];
    int log_inp_width; int log_wgt_width; int log_acc_width; int log_batch;
    int log_block_in; int log_block_out; int log_uop_buff_size; int log_inp_buff_size;
    int log_wgt_buff_size; int log_acc_buff_size;
    int dram_bus_width; int clock_mhz; int cmd_queue_depth; int dep_queue_depth;
    int dsp_pack; int out_buff_lutram; int acc_single_copy; int serial_core; int exact_requant; int act_lut;
    int depthwise;
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
    uint64_t watchdog_cycles; const char *timeline_path; uint64_t timeline_max; int timing_only;
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
typedef struct { ...; } tsr_onnx_opts_t;
int tsr_onnx_parse_place(const char *arg, tsr_onnx_opts_t *o);
int tsr_onnx_load_buffer_opts(const void *buf, size_t n, const char *name, int batch, const tsr_onnx_opts_t *o,
                              tsr_onnx_t **out);
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

/* the per-layer report as rows (onnx/tsr_onnx_report.h) */
typedef struct tsr_onnx_layer {
    int segment; int index; int node; const char *name; const char *layer; const char *op; char shape[64];
    double macs; double cycles; double util; double bound; double ratio; int memory_bound; double moved;
    double compulsory; double wall_ms; double plan_ms; double upload_ms; int kcache; int solo; double peak;
    double dram_bw;
    ...;
} tsr_onnx_layer_t;
int tsr_onnx_report_rows(const tsr_onnx_t *m);
int tsr_onnx_report_row(const tsr_onnx_t *m, int i, tsr_onnx_layer_t *out);

/* operators (jit/): parameters (the requantization fields are members of an anonymous union in C) */
typedef struct tsr_conv2d_params {
    int n; int c_in; int h; int w; int c_out; int kh; int kw; int stride_h; int stride_w;
    int pad_top; int pad_left; int pad_bottom; int pad_right; int groups;
    tsr_dtype_e x_dtype; int32_t x_zp; tsr_dtype_e w_dtype; const int32_t *w_zp; int w_zp_count;
    tsr_dtype_e y_dtype; int32_t y_zp; const int32_t *mult; const int32_t *shift; int rq_count;
    int32_t act_min; int32_t act_max; const float *fscale;
    ...;
} tsr_conv2d_params_t;
typedef struct tsr_dense_params {
    int n; int k; int m; tsr_dtype_e x_dtype; int32_t x_zp; tsr_dtype_e w_dtype; const int32_t *w_zp; int w_zp_count;
    tsr_dtype_e y_dtype; int32_t y_zp; const int32_t *mult; const int32_t *shift; int rq_count;
    int32_t act_min; int32_t act_max; const float *fscale;
    ...;
} tsr_dense_params_t;
typedef struct tsr_eltwise_desc { int n; int c; int h; int w; tsr_dtype_e dtype; int32_t zp; ...; } tsr_eltwise_desc_t;
typedef struct tsr_add_params {
    tsr_eltwise_desc_t a; tsr_eltwise_desc_t b; tsr_eltwise_desc_t y; int left_shift; int32_t mult_a; int32_t mult_b;
    int shift_a; int shift_b; int32_t mult_out; int shift_out; int32_t act_min; int32_t act_max; int round_once;
    ...;
} tsr_add_params_t;
typedef struct tsr_clip_params { tsr_eltwise_desc_t x; tsr_eltwise_desc_t y; int32_t lo; int32_t hi; ...; } tsr_clip_params_t;
typedef enum { TSR_POOL_MAX = 0, TSR_POOL_AVG = 1, TSR_POOL_GLOBAL_AVG = 2 } tsr_pool_kind_e;
typedef struct tsr_pool_params {
    tsr_pool_kind_e kind; int n; int c; int h; int w; int kh; int kw; int stride_h; int stride_w;
    int pad_top; int pad_left; int pad_bottom; int pad_right; int count_include_pad; tsr_dtype_e dtype; int32_t zp;
    ...;
} tsr_pool_params_t;
int tsr_conv2d_check(const tsr_conv2d_params_t *p, int *oh, int *ow);
int tsr_dense_check(const tsr_dense_params_t *p, int *parts);
int tsr_pool_check(const tsr_pool_params_t *p, int *oh, int *ow);
int tsr_add_check(const tsr_add_params_t *p, int64_t *count);
int tsr_clip_check(const tsr_clip_params_t *p, int64_t *count);
int tsr_relu_params(const tsr_eltwise_desc_t *x, tsr_clip_params_t *out);
int tsr_quant_requant_params(double x_scale, const double *w_scale, int count, double y_scale, int32_t *mult,
                             int32_t *shift);
typedef struct tsr_add_quant {
    int left_shift; int32_t mult_a; int32_t shift_a; int32_t mult_b; int32_t shift_b; int32_t mult_out;
    int32_t shift_out;
    ...;
} tsr_add_quant_t;
int tsr_quant_add_params(double scale_a, double scale_b, double scale_y, tsr_add_quant_t *out);
int tsr_quantize_bound(double real, double scale, int32_t zp, tsr_dtype_e dt, int32_t *q);

/* one operator (jit/tsr_oprun.h), as `tessera op` runs it */
typedef struct tsr_counters { uint64_t macs; uint64_t cycles; uint64_t gemm_ops; uint64_t alu_ops; ...; } tsr_counters_t;
typedef struct { double plan_ms; int kcache; double exec_s; size_t ninsns; tsr_counters_t ctr; ...; } tsr_oprun_info_t;
#define TSR_OPRUN_CONV2D ...
#define TSR_OPRUN_DENSE ...
#define TSR_OPRUN_ADD ...
#define TSR_OPRUN_CLIP ...
#define TSR_OPRUN_POOL ...
int tsr_oprun(tsr_device_t *dev, int op, const void *params, const void *x, const void *w,
              const int32_t *bias, void *y, tsr_oprun_info_t *info);

/* the graph runtime (jit/tsr_graph.h) */
typedef struct tsr_graph tsr_graph_t;
typedef struct tsr_graph_layer {
    const char *name; const char *op; char shape[64]; double macs; double cycles; double moved; double compulsory;
    double bound; int memory_bound; double wall_ms; double plan_ms; double upload_ms; int kcache;
    ...;
} tsr_graph_layer_t;
int tsr_graph_create(const tsr_config_t *cfg, tsr_graph_t **out);
void tsr_graph_free(tsr_graph_t *g);
int tsr_graph_tensor(tsr_graph_t *g, int n, int c, int h, int w, tsr_dtype_e dt, int32_t zp, int *id);
int tsr_graph_output(tsr_graph_t *g, int t);
int tsr_graph_conv2d(tsr_graph_t *g, const char *name, int x, int y, const tsr_conv2d_params_t *p, const void *w,
                     const int32_t *bias);
int tsr_graph_dense(tsr_graph_t *g, const char *name, int x, int y, const tsr_dense_params_t *p, const void *w,
                    const int32_t *bias);
int tsr_graph_pool(tsr_graph_t *g, const char *name, int x, int y, const tsr_pool_params_t *p);
int tsr_graph_add(tsr_graph_t *g, const char *name, int a, int b, int y, const tsr_add_params_t *p);
int tsr_graph_clip(tsr_graph_t *g, const char *name, int x, int y, const tsr_clip_params_t *p);
int tsr_graph_reshape(tsr_graph_t *g, const char *name, int x, int y);
int tsr_graph_concat(tsr_graph_t *g, const char *name, int a, int b, int y);
typedef struct tsr_requant_params {
    int n; int c; int h; int w; tsr_dtype_e x_dtype; int32_t x_zp;
    tsr_dtype_e y_dtype; int32_t y_zp; const int32_t *mult; const int32_t *shift; int rq_count;
    int32_t act_min; int32_t act_max; const float *fscale;
    ...;
} tsr_requant_params_t;
int tsr_graph_requantize(tsr_graph_t *g, const char *name, int x, int y, const tsr_requant_params_t *p);
typedef struct tsr_act_table { int8_t v[256]; } tsr_act_table_t;
int tsr_act_table_from_values(const int32_t values[256], tsr_act_table_t *t);
int tsr_graph_act(tsr_graph_t *g, const char *name, int x, int y, const tsr_act_table_t *t);
int tsr_graph_plan(tsr_graph_t *g, tsr_device_t *dev, unsigned flags);
int tsr_graph_exec(tsr_graph_t *g, const void *const *inputs, void *const *outputs);
int tsr_graph_nnodes(const tsr_graph_t *g);
const tsr_graph_layer_t *tsr_graph_layer(const tsr_graph_t *g, int i);
int tsr_graph_layer_node(const tsr_graph_t *g, int i);
double tsr_roofline_dram_bw(const tsr_config_t *cfg, double requested);

/* glue (below): what a print function writes, as a malloc'd string (free()); NULL if out of memory
 * or the writer failed */
char *tsr_py_onnx_placement(const tsr_onnx_t *m);
char *tsr_py_onnx_placement_json(const tsr_onnx_t *m);
char *tsr_py_onnx_report(const tsr_onnx_t *m);
char *tsr_py_graph_report(const tsr_graph_t *g);
"""

# Compiled into the extension: the includes, and the only C of the package's own. The
# placement (as JSON, tsr_onnx_write_placement_json) and the printed tables (the report's rows
# come from onnx/tsr_onnx_report.h; the text is kept for report_text) are written by the library
# to a FILE; they are captured in memory (open_memstream).
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
#include "tsr_onnx_report.h"
#include "tsr_graph.h"
#include "tsr_oprun.h"
#include "tsr_quant.h"
#include "tsr_roofline.h"

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
/* the graph's printed table (Graph.report_text), captured the same way */
static char *tsr_py_graph_report(const tsr_graph_t *g)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return NULL;
    tsr_graph_print_report(g, f);
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}
"""


def main():
    ap = argparse.ArgumentParser(description="build the tessera Python extension (cffi, API mode)")
    ap.add_argument("--source", required=True, help="Tessera source tree")
    ap.add_argument("--lib", required=True, help="libtessera.so to link")
    ap.add_argument("--out", required=True, help="package directory to assemble")
    ap.add_argument("--tmp", help="cffi's work directory (default: OUT/../cffi-tmp)")
    ap.add_argument("--cli", default="", help="the tessera CLI (tessera.dse runs the DSE engine with it)")
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
    # Where the source tree (scripts/dse) and the CLI are, for tessera.dse (generated: not in git)
    with open(os.path.join(out, "_build.py"), "w") as f:
        f.write('"""Generated by build_cffi.py: the tree and CLI this package was built from."""\n'
                "SOURCE = %r\nCLI = %r\n" % (src, os.path.abspath(a.cli) if a.cli else ""))
    for f in sorted(os.listdir(os.path.join(src, "python", "tessera"))):
        if f.endswith(".py"):
            shutil.copy2(os.path.join(src, "python", "tessera", f), os.path.join(out, f))
    return 0


if __name__ == "__main__":
    sys.exit(main())
