/*
 * tsr_cli_op: `tessera op OPERATOR ...` (see tsr_cli_op.h). Flow: parse
 * the flags, load the config and the .npy operands, derive and check every
 * parameter (before the device is opened: an RTL model build takes a
 * minute, a typo should not), open the device, plan, write, run, read, and
 * only then write the output (tsr_npy_write replaces it atomically, so a
 * failure never leaves a partial file).
 */
#include "tsr_cli_op.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr_config.h"
#include "tsr_conv2d.h"
#include "tsr_dense.h"
#include "tsr_eltwise.h"
#include "tsr_error.h"
#include "tsr_npy.h"
#include "tsr_oprun.h"
#include "tsr_pool.h"
#include "tsr_quant.h"

/* ------------------------------------------------------------ the flags */

enum {
    F_INPUT = 2000, F_WEIGHT, F_BIAS, F_OUTPUT, F_XZP, F_WZP, F_YZP, F_YDTYPE, F_MULT, F_SHIFT, F_XSCALE,
    F_WSCALE, F_YSCALE, F_ACTMIN, F_ACTMAX, F_RELU, F_RELU6, F_GROUPS, F_STRIDE, F_PAD, F_BACKEND, F_CONFIG,
    F_SEED, F_QUIET, F_HELP, F_INA, F_INB, F_AZP, F_BZP, F_ASCALE, F_BSCALE, F_ADDPARAMS, F_KERNEL, F_CIP, F_END
};

/* Flags of one operator: bit (F_x - F_INPUT). */
#define BIT(f) (1ull << ((f) - F_INPUT))
#define COMMON_FLAGS                                                                                               \
    (BIT(F_INPUT) | BIT(F_OUTPUT) | BIT(F_BACKEND) | BIT(F_CONFIG) | BIT(F_SEED) | BIT(F_QUIET) | BIT(F_HELP))
#define REQUANT_FLAGS                                                                                              \
    (BIT(F_WEIGHT) | BIT(F_BIAS) | BIT(F_XZP) | BIT(F_WZP) | BIT(F_YZP) | BIT(F_YDTYPE) | BIT(F_MULT) |          \
     BIT(F_SHIFT) | BIT(F_XSCALE) | BIT(F_WSCALE) | BIT(F_YSCALE) | BIT(F_ACTMIN) | BIT(F_ACTMAX) | BIT(F_RELU) | \
     BIT(F_RELU6))

static const struct option op_long[] = {
    {"input", required_argument, 0, F_INPUT},     {"weight", required_argument, 0, F_WEIGHT},
    {"bias", required_argument, 0, F_BIAS},       {"output", required_argument, 0, F_OUTPUT},
    {"x-zp", required_argument, 0, F_XZP},        {"w-zp", required_argument, 0, F_WZP},
    {"y-zp", required_argument, 0, F_YZP},        {"y-dtype", required_argument, 0, F_YDTYPE},
    {"mult", required_argument, 0, F_MULT},       {"shift", required_argument, 0, F_SHIFT},
    {"x-scale", required_argument, 0, F_XSCALE},  {"w-scale", required_argument, 0, F_WSCALE},
    {"y-scale", required_argument, 0, F_YSCALE},  {"act-min", required_argument, 0, F_ACTMIN},
    {"act-max", required_argument, 0, F_ACTMAX},  {"relu", no_argument, 0, F_RELU},
    {"relu6", no_argument, 0, F_RELU6},           {"groups", required_argument, 0, F_GROUPS},
    {"stride", required_argument, 0, F_STRIDE},   {"pad", required_argument, 0, F_PAD},
    {"backend", required_argument, 0, F_BACKEND}, {"config", required_argument, 0, F_CONFIG},
    {"seed", required_argument, 0, F_SEED},       {"quiet", no_argument, 0, F_QUIET},
    {"help", no_argument, 0, F_HELP},             {"input-a", required_argument, 0, F_INA},
    {"input-b", required_argument, 0, F_INB},     {"a-zp", required_argument, 0, F_AZP},
    {"b-zp", required_argument, 0, F_BZP},        {"a-scale", required_argument, 0, F_ASCALE},
    {"b-scale", required_argument, 0, F_BSCALE},  {"add-params", required_argument, 0, F_ADDPARAMS},
    {"kernel", required_argument, 0, F_KERNEL},   {"count-include-pad", no_argument, 0, F_CIP},
};
#define N_OP_LONG (sizeof op_long / sizeof op_long[0])

/* Parsed command line (strings are argv's; numbers are parsed later, with
 * the operand shapes known). */
typedef struct {
    const char *arg[F_END - F_INPUT]; /* value of each flag given (NULL = not given; "" for switches) */
    const char *backend, *config;     /* device backend and config (defaults fsim, default) */
    uint64_t seed;                    /* fsim stage interleaving (0 = fixed order) */
    int quiet;                        /* no summary line */
} op_args_t;

#define ARG(a, f) ((a)->arg[(f) - F_INPUT])

/* ------------------------------------------------------------- helps */

static const char op_help[] =
    "usage: tessera op OPERATOR [FLAGS]      (tessera op OPERATOR --help: its flags)\n"
    "\n"
    "Run one quantized operator of jit/operators.md on a device, bit-exact:\n"
    "operands come from NumPy .npy files (their dtypes decide the input types),\n"
    "the result is written as .npy. Prints one summary line (shapes, device\n"
    "counters, time) unless --quiet.\n"
    "\n"
    "operators:\n"
    "  conv2d    2-D convolution, groups 1 or depthwise: x [N,C,H,W], w [C_out,C_in/groups,KH,KW]\n"
    "  dense     fully connected: x [N,K] (or [N,C,H,W] read as [N,C*H*W]), w [M,K] -> y [N,M]\n"
    "  maxpool   max over KH x KW windows (padding never wins)\n"
    "  avgpool   rounded average over KH x KW windows (TFLite AVERAGE_POOL_2D)\n"
    "  globalavgpool  rounded average over each H x W plane -> [N, C, 1, 1]\n"
    "  add       elementwise a + b with requantization (TFLite ADD), same shapes\n"
    "  relu      y = max(x, x_zp)\n"
    "  clip      y = clamp(x, lo, hi)\n"
    "\n"
    "common flags:\n"
    "  -x, --input FILE.npy    input activations (int8 or uint8)\n"
    "  -o, --output FILE.npy   result (written atomically, only on success)\n"
    "  -c, --config C          config file or preset: default (default), tiny, large\n"
    "      --backend NAME      fsim (default) or rtl (cycle-accurate Verilator model)\n"
    "      --seed N            fsim stage interleaving: 0 = fixed order (default), else random\n"
    "  -q, --quiet             no summary line\n"
    "\n"
    "conv2d and dense:\n"
    "  -w, --weight FILE.npy   weights (int8 or uint8)\n"
    "      --bias FILE.npy     int32 bias [C_out] / [M] (default: none)\n"
    "      --x-zp N            input zero point (default 0)\n"
    "      --w-zp N|FILE.npy   weight zero point, or one per output channel (default 0)\n"
    "      --y-zp N            output zero point (default 0)\n"
    "      --y-dtype T         int8 or uint8 (default: the input's dtype)\n"
    "  requantization, either\n"
    "      --mult M|FILE.npy --shift S|FILE.npy\n"
    "                          fixed-point multiplier(s) [0, 2^31-1] and shift(s) [-31, 30]\n"
    "                          (> 0 shifts left), one or one per output channel\n"
    "  or  --x-scale R --w-scale R|FILE.npy --y-scale R\n"
    "                          real scales; M and S per channel = QuantizeMultiplier(\n"
    "                          x_scale * w_scale / y_scale) (TFLite); FILE.npy is float32\n"
    "  output clamp (default: the whole output range), one of\n"
    "      --act-min N --act-max N   integer bounds (either or both)\n"
    "      --relu              clamp below at the output zero point\n"
    "      --relu6             clamp to the reals [0, 6] (needs --y-scale)\n"
    "\n"
    "maxpool, avgpool, globalavgpool (output: the input's dtype and zero point):\n"
    "      --kernel K|KH,KW    window (not globalavgpool)\n"
    "      --stride S|SH,SW, --pad P|PH,PW|T,L,B,R   as for conv2d (pads below the kernel)\n"
    "      --count-include-pad avgpool: padded positions count in the divisor\n"
    "      --x-zp N            zero point (default 0)\n"
    "\n"
    "add (a, b, y each with its own dtype and zero point; same shapes):\n"
    "  -a, --input-a FILE.npy, -b, --input-b FILE.npy   the inputs (instead of -x)\n"
    "      --a-zp N, --b-zp N, --y-zp N, --y-dtype T\n"
    "      --a-scale R --b-scale R --y-scale R   real scales (TFLite ADD parameters), or\n"
    "      --add-params L,MA,SA,MB,SB,MO,SO      the integer parameters directly\n"
    "      --act-min N, --act-max N, --relu, --relu6   output clamp\n"
    "\n"
    "relu (y = max(x, x_zp)) and clip (same dtype and zero point in and out):\n"
    "      --x-zp N            zero point (default 0)\n"
    "      --act-min LO --act-max HI   clip bounds, or --relu6 --x-scale R\n"
    "\n"
    "Per-channel .npy arrays are 1-D with one value per output channel (a\n"
    "single value is broadcast); integer ones may be int8, uint8, int16 or int32.\n"
    "Exit status: 0 ok, 1 error (named on one line), 2 bad usage.\n";

static const char conv2d_help[] =
    "usage: tessera op conv2d -x X.npy -w W.npy -o Y.npy [--bias B.npy] [--stride S] [--pad P]\n"
    "                         [--groups G] [zero points] [requantization] [clamp] [device]\n"
    "\n"
    "Quantized 2-D convolution (jit/operators.md \"conv2d\"), NCHW:\n"
    "  x [N, C_in, H, W] int8/uint8, w [C_out, C_in/groups, KH, KW] int8/uint8\n"
    "  (the kernel size comes from the weight shape), bias [C_out] int32,\n"
    "  y [N, C_out, OH, OW], OH = (H + pad_top + pad_bottom - KH) / stride_h + 1.\n"
    "\n"
    "  -x, --input FILE.npy    input [N, C_in, H, W]\n"
    "  -w, --weight FILE.npy   weights [C_out, C_in/groups, KH, KW]\n"
    "      --bias FILE.npy     int32 [C_out] (default: none)\n"
    "  -o, --output FILE.npy   result [N, C_out, OH, OW]\n"
    "      --stride S|SH,SW    strides (default 1)\n"
    "      --pad P|PH,PW|T,L,B,R  zero padding (the real 0, i.e. x_zp): all sides,\n"
    "                          height/width, or top,left,bottom,right (ONNX order); 0..15\n"
    "      --groups G          1 (default) or C_in (depthwise: C_out = C_in, w [C, 1, KH, KW])\n"
    "      --x-zp N            input zero point (default 0)\n"
    "      --w-zp N|FILE.npy   weight zero point(s); w - w_zp must fit int8 (int8 weights\n"
    "                          with zp 0, uint8 weights with zp 128 always do)\n"
    "      --y-zp N            output zero point (default 0)\n"
    "      --y-dtype T         int8 or uint8 (default: the input's dtype)\n"
    "      --mult M|FILE.npy --shift S|FILE.npy    fixed-point requantization, or\n"
    "      --x-scale R --w-scale R|FILE.npy --y-scale R   real scales (QuantizeMultiplier)\n"
    "      --act-min N, --act-max N, --relu, --relu6      output clamp\n"
    "  -c, --config C, --backend NAME, --seed N, -q, --quiet   as for every operator\n";

static const char dense_help[] =
    "usage: tessera op dense -x X.npy -w W.npy -o Y.npy [--bias B.npy] [zero points]\n"
    "                        [requantization] [clamp] [device]\n"
    "\n"
    "Quantized fully connected layer (jit/operators.md \"dense\"; ONNX Gemm with\n"
    "transB = 1, TFLite FULLY_CONNECTED): y[n][m] = requantize(bias[m] +\n"
    "SUM_k (x[n][k] - x_zp) * (w[m][k] - w_zp[m])).\n"
    "\n"
    "  -x, --input FILE.npy    input [N, K], or [N, C, H, W] (any rank >= 2) read as\n"
    "                          [N, C*H*W]; int8/uint8\n"
    "  -w, --weight FILE.npy   weights [M, K], int8/uint8 (any zero point)\n"
    "      --bias FILE.npy     int32 [M] (default: none)\n"
    "  -o, --output FILE.npy   result [N, M]\n"
    "      --x-zp N            input zero point (default 0)\n"
    "      --w-zp N|FILE.npy   weight zero point(s), one or one per output m (default 0)\n"
    "      --y-zp N            output zero point (default 0)\n"
    "      --y-dtype T         int8 or uint8 (default: the input's dtype)\n"
    "      --mult M|FILE.npy --shift S|FILE.npy    fixed-point requantization, or\n"
    "      --x-scale R --w-scale R|FILE.npy --y-scale R   real scales (QuantizeMultiplier)\n"
    "      --act-min N, --act-max N, --relu, --relu6      output clamp\n"
    "  -c, --config C, --backend NAME, --seed N, -q, --quiet   as for every operator\n";

static const char add_help[] =
    "usage: tessera op add -a A.npy -b B.npy -o Y.npy [zero points] (--a-scale R --b-scale R --y-scale R\n"
    "                      | --add-params L,MA,SA,MB,SB,MO,SO) [clamp] [device]\n"
    "\n"
    "Quantized elementwise add (jit/operators.md \"add\", TFLite ADD, bit-exact): a, b\n"
    "and y have the same shape (no broadcasting), each its own dtype and zero point.\n"
    "\n"
    "  -a, --input-a FILE.npy  first input (int8 or uint8, any shape)\n"
    "  -b, --input-b FILE.npy  second input (same shape as a)\n"
    "  -o, --output FILE.npy   result (a's shape)\n"
    "      --a-zp N, --b-zp N, --y-zp N   zero points (default 0)\n"
    "      --y-dtype T         int8 or uint8 (default: a's dtype)\n"
    "      --a-scale R --b-scale R --y-scale R\n"
    "                          real scales; the integer parameters are TFLite's (left\n"
    "                          shift 20, QuantizeMultiplier of a/2max, b/2max, 2max/(2^20 y))\n"
    "      --add-params L,MA,SA,MB,SB,MO,SO\n"
    "                          or the integers directly: left shift [0, 22], then\n"
    "                          multiplier and shift of a, of b ([-31, 0]) and of the output\n"
    "      --act-min N, --act-max N, --relu, --relu6 (needs --y-scale)   output clamp\n"
    "  -c, --config C, --backend NAME, --seed N, -q, --quiet   as for every operator\n";

static const char relu_help[] =
    "usage: tessera op relu -x X.npy -o Y.npy [--x-zp N] [device]\n"
    "\n"
    "Quantized relu (jit/operators.md \"relu and clip\"): y = max(x, x_zp), same\n"
    "shape, dtype and zero point in and out.\n"
    "\n"
    "  -x, --input FILE.npy    input (int8 or uint8, any shape)\n"
    "  -o, --output FILE.npy   result\n"
    "      --x-zp N            zero point (default 0)\n"
    "  -c, --config C, --backend NAME, --seed N, -q, --quiet   as for every operator\n";

static const char clip_help[] =
    "usage: tessera op clip -x X.npy -o Y.npy [--x-zp N] (--act-min LO --act-max HI | --relu6 --x-scale R)\n"
    "                       [device]\n"
    "\n"
    "Quantized clip (jit/operators.md \"relu and clip\"): y = min(max(x, lo), hi),\n"
    "same shape, dtype and zero point in and out.\n"
    "\n"
    "  -x, --input FILE.npy    input (int8 or uint8, any shape)\n"
    "  -o, --output FILE.npy   result\n"
    "      --x-zp N            zero point (default 0)\n"
    "      --act-min LO, --act-max HI   integer bounds (default: the dtype's range)\n"
    "      --relu6 --x-scale R  the real bounds [0, 6] quantized with scale R (TFLite)\n"
    "  -c, --config C, --backend NAME, --seed N, -q, --quiet   as for every operator\n";

static const char pool_help[] =
    "usage: tessera op maxpool|avgpool -x X.npy -o Y.npy --kernel K|KH,KW [--stride S|SH,SW]\n"
    "                                  [--pad P|PH,PW|T,L,B,R] [--count-include-pad] [--x-zp N] [device]\n"
    "       tessera op globalavgpool -x X.npy -o Y.npy [--x-zp N] [device]\n"
    "\n"
    "Quantized pools (jit/operators.md \"maxpool\", \"avgpool\", \"global average pool\"),\n"
    "NCHW; the output has the input's dtype and zero point. Averages are over the\n"
    "raw quantized values, rounded half away from zero (TFLite).\n"
    "\n"
    "  -x, --input FILE.npy    input [N, C, H, W] (int8 or uint8)\n"
    "  -o, --output FILE.npy   result [N, C, OH, OW] ([N, C, 1, 1] for globalavgpool)\n"
    "      --kernel K|KH,KW    window (maxpool, avgpool; required)\n"
    "      --stride S|SH,SW    strides (default 1)\n"
    "      --pad P|PH,PW|T,L,B,R  padding (ONNX order), each below the kernel size\n"
    "      --count-include-pad avgpool: padded positions (the real 0 = x_zp) count\n"
    "      --x-zp N            zero point (default 0)\n"
    "  -c, --config C, --backend NAME, --seed N, -q, --quiet   as for every operator\n";

/* ---------------------------------------------------------- utilities */

static int op_usage(const char *op, const char *fmt, const char *what)
{
    fprintf(stderr, "tessera op%s%s: ", op ? " " : "", op ? op : "");
    fprintf(stderr, fmt, what);
    fprintf(stderr, " (see `tessera op%s%s --help`)\n", op ? " " : "", op ? op : "");
    return 2;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_real(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* Comma-separated integers in [lo, hi]: 1..max of them. */
static int parse_list(const char *s, long lo, long hi, int max, int *out, int *n)
{
    char buf[128];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    *n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long v;
        if (*n == max || parse_int(t, lo, hi, &v))
            return -1;
        out[(*n)++] = (int)v;
    }
    return *n ? 0 : -1;
}

static const char *shape_str(const tsr_tensor_t *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

/* Read an operand: dtype one of the allowed ones, every dimension 1..2^31-1
 * (on error *t is left empty). */
static int load_operand(const char *flag, const char *path, unsigned dtypes, tsr_tensor_t *t)
{
    int rc = tsr_npy_read(path, t);
    if (rc)
        return tsr_err_prefix(rc, "%s: ", flag);
    if (!(dtypes & (1u << t->dtype))) {
        char allowed[64] = "";
        for (int d = TSR_DT_INT8; d <= TSR_DT_FLOAT32; d++)
            if (dtypes & (1u << d))
                snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s%s", allowed[0] ? " or " : "",
                         tsr_dtype_name((tsr_dtype_e)d));
        rc = tsr_err(TSR_EINVAL, "%s %s: dtype %s, expected %s", flag, path, tsr_dtype_name(t->dtype), allowed);
        tsr_tensor_free(t);
        return rc;
    }
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] < 1 || t->shape[i] > INT32_MAX) {
            char sb[128];
            rc = tsr_err(TSR_EINVAL, "%s %s: shape %s has an empty or too large dimension", flag, path,
                         shape_str(t, sb, sizeof sb));
            tsr_tensor_free(t);
            return rc;
        }
    return TSR_OK;
}

#define DT_INTS ((1u << TSR_DT_INT8) | (1u << TSR_DT_UINT8) | (1u << TSR_DT_INT16) | (1u << TSR_DT_INT32))
#define DT_Q8 ((1u << TSR_DT_INT8) | (1u << TSR_DT_UINT8))

/* A per-tensor or per-channel integer parameter: a number, or a 1-D (or
 * scalar) .npy of integers with 1 or `count` values. */
typedef struct {
    int32_t *v; /* values (owned) */
    int n;      /* how many: 1 or count */
} ivec_t;

typedef struct {
    double *v; /* values (owned) */
    int n;     /* how many: 1 or count */
} dvec_t;

static int load_ivec(const char *flag, const char *arg, int count, ivec_t *out)
{
    long v;
    out->v = NULL;
    out->n = 0;
    if (!parse_int(arg, INT32_MIN, INT32_MAX, &v)) {
        if (!(out->v = malloc(sizeof(int32_t))))
            return tsr_err(TSR_ENOMEM, "out of memory");
        out->v[0] = (int32_t)v;
        out->n = 1;
        return TSR_OK;
    }
    tsr_tensor_t t = {0};
    int rc = load_operand(flag, arg, DT_INTS, &t);
    if (rc) {
        if (rc == TSR_EIO && strchr(arg, '.') == NULL)
            rc = tsr_err(TSR_EINVAL, "%s: \"%s\" is neither an integer nor a .npy file", flag, arg);
        return rc;
    }
    int64_t n = tsr_tensor_numel(&t);
    if (t.ndim > 1 || (n != 1 && n != count)) {
        char sb[128];
        rc = tsr_err(TSR_EINVAL, "%s %s: shape %s, expected 1 or %d values (one per output channel)", flag, arg,
                     shape_str(&t, sb, sizeof sb), count);
        tsr_tensor_free(&t);
        return rc;
    }
    if (!(out->v = malloc(sizeof(int32_t) * (size_t)n))) {
        tsr_tensor_free(&t);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    for (int64_t i = 0; i < n; i++)
        out->v[i] = t.dtype == TSR_DT_INT8    ? ((const int8_t *)t.data)[i]
                    : t.dtype == TSR_DT_UINT8 ? ((const uint8_t *)t.data)[i]
                    : t.dtype == TSR_DT_INT16 ? ((const int16_t *)t.data)[i]
                                              : ((const int32_t *)t.data)[i];
    out->n = (int)n;
    tsr_tensor_free(&t);
    return TSR_OK;
}

static int load_dvec(const char *flag, const char *arg, int count, dvec_t *out)
{
    double v;
    out->v = NULL;
    out->n = 0;
    if (!parse_real(arg, &v)) {
        if (!(out->v = malloc(sizeof(double))))
            return tsr_err(TSR_ENOMEM, "out of memory");
        out->v[0] = v;
        out->n = 1;
        return TSR_OK;
    }
    tsr_tensor_t t = {0};
    int rc = load_operand(flag, arg, 1u << TSR_DT_FLOAT32, &t);
    if (rc) {
        if (rc == TSR_EIO && strchr(arg, '.') == NULL)
            rc = tsr_err(TSR_EINVAL, "%s: \"%s\" is neither a number nor a .npy file", flag, arg);
        return rc;
    }
    int64_t n = tsr_tensor_numel(&t);
    if (t.ndim > 1 || (n != 1 && n != count)) {
        char sb[128];
        rc = tsr_err(TSR_EINVAL, "%s %s: shape %s, expected 1 or %d values (one per output channel)", flag, arg,
                     shape_str(&t, sb, sizeof sb), count);
        tsr_tensor_free(&t);
        return rc;
    }
    if (!(out->v = malloc(sizeof(double) * (size_t)n))) {
        tsr_tensor_free(&t);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    for (int64_t i = 0; i < n; i++)
        out->v[i] = ((const float *)t.data)[i]; /* float32 widened exactly, as TFLite does */
    out->n = (int)n;
    tsr_tensor_free(&t);
    return TSR_OK;
}

/* Broadcast a single value to count values. */
static int ivec_expand(ivec_t *a, int count)
{
    if (a->n == count)
        return TSR_OK;
    int32_t *v = malloc(sizeof(int32_t) * (size_t)count);
    if (!v)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (int i = 0; i < count; i++)
        v[i] = a->v[0];
    free(a->v);
    a->v = v;
    a->n = count;
    return TSR_OK;
}

/* ------------------------------------------- quantization parameters */

/* Everything conv2d and dense share beyond the shapes. */
typedef struct {
    tsr_dtype_e y_dtype;   /* output dtype */
    int32_t x_zp, y_zp;    /* zero points */
    ivec_t w_zp;           /* weight zero point(s) */
    ivec_t mult, shift;    /* requantization, rq count each */
    int32_t act_min, act_max; /* output clamp */
} quant_t;

static void quant_free(quant_t *q)
{
    free(q->w_zp.v);
    free(q->mult.v);
    free(q->shift.v);
    memset(q, 0, sizeof *q);
}

static int32_t qmin(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 0 : -128; }
static int32_t qmax(tsr_dtype_e d) { return d == TSR_DT_UINT8 ? 255 : 127; }

/* A zero point flag for dtype dt (default 0). */
static int get_zp(const op_args_t *a, int flag, tsr_dtype_e dt, const char *what, int32_t *zp)
{
    long v;
    *zp = 0;
    if (!ARG(a, flag))
        return TSR_OK;
    if (parse_int(ARG(a, flag), qmin(dt), qmax(dt), &v))
        return tsr_err(TSR_EINVAL, "--%s %s: expected an integer in [%d, %d] (the %s is %s)",
                       op_long[flag - F_INPUT].name, ARG(a, flag), qmin(dt), qmax(dt), what, tsr_dtype_name(dt));
    *zp = (int32_t)v;
    return TSR_OK;
}

/* The output clamp from --act-min/--act-max, --relu or --relu6 (whose
 * real bounds 0 and 6 are quantized with the scale given by scale_flag);
 * default: the whole range of dt. */
static int get_clamp(const op_args_t *a, tsr_dtype_e dt, int32_t zp, int scale_flag, int32_t *lo, int32_t *hi)
{
    long v;
    int rc;
    *lo = qmin(dt);
    *hi = qmax(dt);
    int n_act = (ARG(a, F_ACTMIN) || ARG(a, F_ACTMAX)) + !!ARG(a, F_RELU) + !!ARG(a, F_RELU6);
    if (n_act > 1)
        return tsr_err(TSR_EINVAL, "give only one of --act-min/--act-max, --relu, --relu6");
    if (ARG(a, F_ACTMIN)) {
        if (parse_int(ARG(a, F_ACTMIN), qmin(dt), qmax(dt), &v))
            return tsr_err(TSR_EINVAL, "--act-min %s: expected an integer in [%d, %d] (the output is %s)",
                           ARG(a, F_ACTMIN), qmin(dt), qmax(dt), tsr_dtype_name(dt));
        *lo = (int32_t)v;
    }
    if (ARG(a, F_ACTMAX)) {
        if (parse_int(ARG(a, F_ACTMAX), qmin(dt), qmax(dt), &v))
            return tsr_err(TSR_EINVAL, "--act-max %s: expected an integer in [%d, %d] (the output is %s)",
                           ARG(a, F_ACTMAX), qmin(dt), qmax(dt), tsr_dtype_name(dt));
        *hi = (int32_t)v;
    }
    if (*lo > *hi)
        return tsr_err(TSR_EINVAL, "--act-min %d is above --act-max %d", *lo, *hi);
    if (ARG(a, F_RELU))
        *lo = zp;
    if (ARG(a, F_RELU6)) {
        double sc;
        const char *sf = op_long[scale_flag - F_INPUT].name;
        if (!ARG(a, scale_flag) || parse_real(ARG(a, scale_flag), &sc))
            return tsr_err(TSR_EINVAL, "--relu6 needs the output scale as a number (--%s R)", sf);
        if ((rc = tsr_quantize_bound(0.0, sc, zp, dt, lo)) || (rc = tsr_quantize_bound(6.0, sc, zp, dt, hi)))
            return tsr_err_prefix(rc, "--relu6: ");
    }
    return TSR_OK;
}

/* Output dtype and the zero points from the flags; cout = output channels. */
static int get_zps(const op_args_t *a, tsr_dtype_e x_dtype, int cout, quant_t *q)
{
    long v;
    q->y_dtype = x_dtype;
    if (ARG(a, F_YDTYPE)) {
        if (!strcmp(ARG(a, F_YDTYPE), "int8"))
            q->y_dtype = TSR_DT_INT8;
        else if (!strcmp(ARG(a, F_YDTYPE), "uint8"))
            q->y_dtype = TSR_DT_UINT8;
        else
            return tsr_err(TSR_EINVAL, "--y-dtype %s: expected int8 or uint8", ARG(a, F_YDTYPE));
    }
    if (ARG(a, F_XZP)) {
        if (parse_int(ARG(a, F_XZP), qmin(x_dtype), qmax(x_dtype), &v))
            return tsr_err(TSR_EINVAL, "--x-zp %s: expected an integer in [%d, %d] (the input is %s)", ARG(a, F_XZP),
                           qmin(x_dtype), qmax(x_dtype), tsr_dtype_name(x_dtype));
        q->x_zp = (int32_t)v;
    }
    if (ARG(a, F_YZP)) {
        if (parse_int(ARG(a, F_YZP), qmin(q->y_dtype), qmax(q->y_dtype), &v))
            return tsr_err(TSR_EINVAL, "--y-zp %s: expected an integer in [%d, %d] (the output is %s)", ARG(a, F_YZP),
                           qmin(q->y_dtype), qmax(q->y_dtype), tsr_dtype_name(q->y_dtype));
        q->y_zp = (int32_t)v;
    }
    return load_ivec("--w-zp", ARG(a, F_WZP) ? ARG(a, F_WZP) : "0", cout, &q->w_zp);
}

/* --mult and --shift: one or one per output channel each. */
static int get_fixed(const op_args_t *a, int cout, quant_t *q)
{
    int rc;
    if (!ARG(a, F_MULT) || !ARG(a, F_SHIFT))
        return tsr_err(TSR_EINVAL, "--mult and --shift go together (missing %s)", ARG(a, F_MULT) ? "--shift" : "--mult");
    if ((rc = load_ivec("--mult", ARG(a, F_MULT), cout, &q->mult)) ||
        (rc = load_ivec("--shift", ARG(a, F_SHIFT), cout, &q->shift)))
        return rc;
    if (q->mult.n != q->shift.n && ((rc = ivec_expand(&q->mult, cout)) || (rc = ivec_expand(&q->shift, cout))))
        return rc;
    return TSR_OK;
}

/* --x-scale, --w-scale, --y-scale: M and S per channel by TFLite's rule. */
static int get_scales(const op_args_t *a, int cout, quant_t *q)
{
    const char *missing = !ARG(a, F_XSCALE) ? "--x-scale" : !ARG(a, F_WSCALE) ? "--w-scale"
                          : !ARG(a, F_YSCALE) ? "--y-scale" : NULL;
    if (missing)
        return tsr_err(TSR_EINVAL, "--x-scale, --w-scale and --y-scale go together (missing %s)", missing);
    dvec_t xs = {0}, ws = {0}, ys = {0};
    int rc;
    if (!(rc = load_dvec("--x-scale", ARG(a, F_XSCALE), 1, &xs)) &&
        !(rc = load_dvec("--w-scale", ARG(a, F_WSCALE), cout, &ws)) &&
        !(rc = load_dvec("--y-scale", ARG(a, F_YSCALE), 1, &ys))) {
        q->mult.v = malloc(sizeof(int32_t) * (size_t)ws.n);
        q->shift.v = malloc(sizeof(int32_t) * (size_t)ws.n);
        if (!q->mult.v || !q->shift.v)
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        else
            rc = tsr_quant_requant_params(xs.v[0], ws.v, ws.n, ys.v[0], q->mult.v, q->shift.v);
        q->mult.n = q->shift.n = ws.n;
    }
    free(xs.v);
    free(ws.v);
    free(ys.v);
    return rc;
}

/* Zero points, requantization and clamp from the flags; cout = output
 * channels. Usage-level conflicts are TSR_EINVAL with the flags named. */
static int get_quant(const op_args_t *a, tsr_dtype_e x_dtype, int cout, quant_t *q)
{
    int rc;
    memset(q, 0, sizeof *q);
    if ((rc = get_zps(a, x_dtype, cout, q)))
        return rc;
    int fixed = ARG(a, F_MULT) || ARG(a, F_SHIFT);
    int scales = ARG(a, F_XSCALE) || ARG(a, F_WSCALE) || ARG(a, F_YSCALE);
    if (fixed && scales)
        return tsr_err(TSR_EINVAL, "give either --mult/--shift or --x-scale/--w-scale/--y-scale, not both");
    if (!fixed && !scales)
        return tsr_err(TSR_EINVAL,
                       "no requantization given: use --mult and --shift, or --x-scale, --w-scale and --y-scale");
    if ((rc = fixed ? get_fixed(a, cout, q) : get_scales(a, cout, q)))
        return rc;
    return get_clamp(a, q->y_dtype, q->y_zp, F_YSCALE, &q->act_min, &q->act_max);
}

/* ------------------------------------------------------------- running */

/* What an operator run reports. */
typedef struct {
    double secs;          /* exec (submit + wait) wall time */
    tsr_counters_t ctr;   /* device counters after the run */
    size_t ninsns;        /* instructions in the stream */
} run_info_t;

static int open_device(const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg, tsr_device_t **dev)
{
    tsr_device_opts_t o;
    memset(&o, 0, sizeof o);
    if (d && d->opts)
        o = *d->opts;
    o.seed = a->seed;
    o.rtl.verbose = !a->quiet;
    return tsr_device_open(a->backend, cfg, &o, dev);
}

/* One operator on a device of its own, through the library's runner. */
static int run_op(const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg, tsr_oprun_e op,
                  const void *p, const void *x, const void *w, const int32_t *bias, void *y, run_info_t *info)
{
    tsr_device_t *dev = NULL;
    tsr_oprun_info_t oi;
    int rc = open_device(a, d, cfg, &dev);
    if (!rc && !(rc = tsr_oprun(dev, op, p, x, w, bias, y, &oi))) {
        info->secs = oi.exec_s;
        info->ctr = oi.ctr;
        info->ninsns = oi.ninsns;
    }
    tsr_device_close(dev);
    return rc;
}

/* --stride S|SH,SW (default 1) and --pad P|PH,PW|T,L,B,R (default 0). */
static int get_window(const op_args_t *a, int *sh, int *sw, int *pt, int *pl, int *pb, int *pr)
{
    int v[4], n;
    *sh = *sw = 1;
    *pt = *pl = *pb = *pr = 0;
    if (ARG(a, F_STRIDE)) {
        if (parse_list(ARG(a, F_STRIDE), 1, 1 << 16, 2, v, &n))
            return tsr_err(TSR_EINVAL, "--stride %s: expected S or SH,SW (positive integers)", ARG(a, F_STRIDE));
        *sh = v[0];
        *sw = v[n - 1];
    }
    if (ARG(a, F_PAD)) {
        if (parse_list(ARG(a, F_PAD), 0, 1 << 16, 4, v, &n) || n == 3)
            return tsr_err(TSR_EINVAL, "--pad %s: expected P, PH,PW or T,L,B,R (integers >= 0)", ARG(a, F_PAD));
        if (n == 1) {
            *pt = *pl = *pb = *pr = v[0];
        } else if (n == 2) {
            *pt = *pb = v[0];
            *pl = *pr = v[1];
        } else {
            *pt = v[0];
            *pl = v[1];
            *pb = v[2];
            *pr = v[3];
        }
    }
    return TSR_OK;
}

/* conv2d's shapes, groups, window and bias from the operands and flags. */
static int conv2d_geometry(const op_args_t *a, const tsr_tensor_t *x, const tsr_tensor_t *w, const tsr_tensor_t *bias,
                           tsr_conv2d_params_t *p)
{
    char sx[128], sw[128];
    if (x->ndim != 4)
        return tsr_err(TSR_EINVAL, "conv2d: input %s must be 4-D [N, C, H, W], got %s", ARG(a, F_INPUT),
                       shape_str(x, sx, sizeof sx));
    if (w->ndim != 4)
        return tsr_err(TSR_EINVAL, "conv2d: weights %s must be 4-D [C_out, C_in/groups, KH, KW], got %s",
                       ARG(a, F_WEIGHT), shape_str(w, sw, sizeof sw));
    p->n = (int)x->shape[0];
    p->c_in = (int)x->shape[1];
    p->h = (int)x->shape[2];
    p->w = (int)x->shape[3];
    p->c_out = (int)w->shape[0];
    p->kh = (int)w->shape[2];
    p->kw = (int)w->shape[3];
    long g = 1;
    if (ARG(a, F_GROUPS) && parse_int(ARG(a, F_GROUPS), 1, INT32_MAX, &g))
        return tsr_err(TSR_EINVAL, "--groups %s: expected 1 or the input channel count %d", ARG(a, F_GROUPS), p->c_in);
    p->groups = (int)g;
    if (p->groups != 1 && p->groups != p->c_in)
        return tsr_err(TSR_EINVAL, "--groups %d: only 1 or the input channel count %d (depthwise) are supported",
                       p->groups, p->c_in);
    if (w->shape[1] != p->c_in / p->groups || (p->groups > 1 && p->c_out != p->c_in))
        return tsr_err(TSR_EINVAL, "conv2d: weights %s have shape %s, expected [%s, %d, KH, KW] for input %s%s",
                       ARG(a, F_WEIGHT), shape_str(w, sw, sizeof sw), p->groups > 1 ? "C_in" : "C_out",
                       p->c_in / p->groups, shape_str(x, sx, sizeof sx), p->groups > 1 ? " (depthwise)" : "");
    int rc = get_window(a, &p->stride_h, &p->stride_w, &p->pad_top, &p->pad_left, &p->pad_bottom, &p->pad_right);
    if (rc)
        return rc;
    if (bias && (bias->ndim != 1 || bias->shape[0] != p->c_out))
        return tsr_err(TSR_EINVAL, "conv2d: bias %s has shape %s, expected [%d] (C_out)", ARG(a, F_BIAS),
                       shape_str(bias, sx, sizeof sx), p->c_out);
    return TSR_OK;
}

/* The dtypes, zero points, requantization and clamp of conv2d and dense
 * (their parameter structs share these field names). */
#define SET_QUANT(p, q, x, w)                                                                                      \
    do {                                                                                                           \
        (p).x_dtype = (x)->dtype;                                                                                  \
        (p).x_zp = (q).x_zp;                                                                                       \
        (p).w_dtype = (w)->dtype;                                                                                  \
        (p).w_zp = (q).w_zp.v;                                                                                     \
        (p).w_zp_count = (q).w_zp.n;                                                                               \
        (p).y_dtype = (q).y_dtype;                                                                                 \
        (p).y_zp = (q).y_zp;                                                                                       \
        (p).mult = (q).mult.v;                                                                                     \
        (p).shift = (q).shift.v;                                                                                   \
        (p).rq_count = (q).mult.n;                                                                                 \
        (p).act_min = (q).act_min;                                                                                 \
        (p).act_max = (q).act_max;                                                                                 \
    } while (0)

static int run_conv2d(const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg, const tsr_tensor_t *x,
                      const tsr_tensor_t *w, const tsr_tensor_t *bias, tsr_tensor_t *y, run_info_t *info)
{
    tsr_conv2d_params_t p;
    memset(&p, 0, sizeof p);
    quant_t q;
    memset(&q, 0, sizeof q);
    int rc = conv2d_geometry(a, x, w, bias, &p), oh, ow;
    if (!rc && !(rc = get_quant(a, x->dtype, p.c_out, &q))) {
        SET_QUANT(p, q, x, w);
        rc = tsr_conv2d_check(&p, &oh, &ow);
    }
    if (!rc) {
        const int64_t yshape[4] = {p.n, p.c_out, oh, ow};
        rc = tsr_tensor_alloc(y, p.y_dtype, 4, yshape);
    }
    if (!rc)
        rc = run_op(a, d, cfg, TSR_OPRUN_CONV2D, &p, x->data, w->data, bias ? bias->data : NULL, y->data, info);
    quant_free(&q);
    return rc;
}

static int run_dense(const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg, const tsr_tensor_t *x,
                     const tsr_tensor_t *w, const tsr_tensor_t *bias, tsr_tensor_t *y, run_info_t *info)
{
    char sx[128], sw[128];
    tsr_dense_params_t p;
    memset(&p, 0, sizeof p);
    quant_t q;
    memset(&q, 0, sizeof q);
    int rc = TSR_OK;
    if (x->ndim < 2) {
        rc = tsr_err(TSR_EINVAL, "dense: input %s must be [N, K] or [N, C, H, W], got %s", ARG(a, F_INPUT),
                     shape_str(x, sx, sizeof sx));
        goto out;
    }
    int64_t k = tsr_tensor_numel(x) / x->shape[0];
    if (w->ndim != 2 || w->shape[1] != k) {
        rc = tsr_err(TSR_EINVAL, "dense: weights %s have shape %s, expected [M, %lld] for input %s", ARG(a, F_WEIGHT),
                     shape_str(w, sw, sizeof sw), (long long)k, shape_str(x, sx, sizeof sx));
        goto out;
    }
    if (k > INT32_MAX) {
        rc = tsr_err(TSR_EINVAL, "dense: input %s: K = %lld is too large", ARG(a, F_INPUT), (long long)k);
        goto out;
    }
    p.n = (int)x->shape[0];
    p.k = (int)k;
    p.m = (int)w->shape[0];
    if (bias && (bias->ndim != 1 || bias->shape[0] != p.m)) {
        rc = tsr_err(TSR_EINVAL, "dense: bias %s has shape %s, expected [%d] (M)", ARG(a, F_BIAS),
                     shape_str(bias, sx, sizeof sx), p.m);
        goto out;
    }
    if ((rc = get_quant(a, x->dtype, p.m, &q)))
        goto out;
    SET_QUANT(p, q, x, w);
    if ((rc = tsr_dense_check(&p, NULL)))
        goto out;
    const int64_t yshape[2] = {p.n, p.m};
    if ((rc = tsr_tensor_alloc(y, p.y_dtype, 2, yshape)))
        goto out;
    rc = run_op(a, d, cfg, TSR_OPRUN_DENSE, &p, x->data, w->data, bias ? bias->data : NULL, y->data, info);
out:
    quant_free(&q);
    return rc;
}

/* Flat elementwise descriptor of a tensor (the shape does not matter to
 * the lowering: the values are one vector). */
static int flat_desc(const char *flag, const char *path, const tsr_tensor_t *t, int32_t zp, tsr_eltwise_desc_t *d)
{
    int64_t n = tsr_tensor_numel(t);
    if (n < 1 || n > INT32_MAX)
        return tsr_err(TSR_EINVAL, "%s %s: %lld elements (need 1 to 2^31 - 1)", flag, path, (long long)n);
    d->n = d->c = d->h = 1;
    d->w = (int)n;
    d->dtype = t->dtype;
    d->zp = zp;
    return TSR_OK;
}

static int same_shape(const tsr_tensor_t *a, const tsr_tensor_t *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

static int add_set(tsr_add_params_t *p, const tsr_add_quant_t *q)
{
    p->left_shift = q->left_shift;
    p->mult_a = q->mult_a;
    p->shift_a = q->shift_a;
    p->mult_b = q->mult_b;
    p->shift_b = q->shift_b;
    p->mult_out = q->mult_out;
    p->shift_out = q->shift_out;
    return TSR_OK;
}

/* add's requantization: --add-params, or the three scales (TFLite's rule). */
static int add_requant(const op_args_t *a, tsr_add_params_t *p)
{
    int scales = ARG(a, F_ASCALE) || ARG(a, F_BSCALE) || ARG(a, F_YSCALE);
    if (scales && ARG(a, F_ADDPARAMS))
        return tsr_err(TSR_EINVAL, "give either --a-scale/--b-scale/--y-scale or --add-params, not both");
    if (ARG(a, F_ADDPARAMS)) {
        int v[7], n;
        if (parse_list(ARG(a, F_ADDPARAMS), INT32_MIN, INT32_MAX, 7, v, &n) || n != 7)
            return tsr_err(TSR_EINVAL, "--add-params %s: expected 7 integers L,MA,SA,MB,SB,MO,SO", ARG(a, F_ADDPARAMS));
        tsr_add_quant_t q = {v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
        return add_set(p, &q);
    }
    if (!scales)
        return tsr_err(TSR_EINVAL,
                       "add: no requantization given: use --a-scale, --b-scale and --y-scale, or --add-params");
    double s3[3];
    const int fl[3] = {F_ASCALE, F_BSCALE, F_YSCALE};
    for (int i = 0; i < 3; i++)
        if (!ARG(a, fl[i]) || parse_real(ARG(a, fl[i]), &s3[i]))
            return tsr_err(TSR_EINVAL, "--a-scale, --b-scale and --y-scale go together and are numbers (--%s %s)",
                           op_long[fl[i] - F_INPUT].name, ARG(a, fl[i]) ? ARG(a, fl[i]) : "missing");
    tsr_add_quant_t q;
    int rc = tsr_quant_add_params(s3[0], s3[1], s3[2], &q);
    return rc ? rc : add_set(p, &q);
}

static int run_add(const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg, const tsr_tensor_t *ta,
                   const tsr_tensor_t *tb, const tsr_tensor_t *bias, tsr_tensor_t *y, run_info_t *info)
{
    (void)bias;
    char sa[128], sb[128];
    tsr_add_params_t p;
    memset(&p, 0, sizeof p);
    int rc;
    int32_t azp, bzp, yzp;
    if (!same_shape(ta, tb)) {
        rc = tsr_err(TSR_EINVAL, "add: inputs %s %s and %s %s differ in shape (no broadcasting)", ARG(a, F_INA),
                     shape_str(ta, sa, sizeof sa), ARG(a, F_INB), shape_str(tb, sb, sizeof sb));
        goto out;
    }
    tsr_dtype_e ydt = ta->dtype;
    if (ARG(a, F_YDTYPE)) {
        if (!strcmp(ARG(a, F_YDTYPE), "int8"))
            ydt = TSR_DT_INT8;
        else if (!strcmp(ARG(a, F_YDTYPE), "uint8"))
            ydt = TSR_DT_UINT8;
        else {
            rc = tsr_err(TSR_EINVAL, "--y-dtype %s: expected int8 or uint8", ARG(a, F_YDTYPE));
            goto out;
        }
    }
    if ((rc = get_zp(a, F_AZP, ta->dtype, "input a", &azp)) || (rc = get_zp(a, F_BZP, tb->dtype, "input b", &bzp)) ||
        (rc = get_zp(a, F_YZP, ydt, "output", &yzp)))
        goto out;
    if ((rc = flat_desc("--input-a", ARG(a, F_INA), ta, azp, &p.a)) ||
        (rc = flat_desc("--input-b", ARG(a, F_INB), tb, bzp, &p.b)))
        goto out;
    p.y = p.a;
    p.y.dtype = ydt;
    p.y.zp = yzp;
    if ((rc = add_requant(a, &p)))
        goto out;
    if ((rc = get_clamp(a, ydt, yzp, F_YSCALE, &p.act_min, &p.act_max)) || (rc = tsr_add_check(&p, NULL)))
        goto out;
    if ((rc = tsr_tensor_alloc(y, ydt, ta->ndim, ta->shape)))
        goto out;
    rc = run_op(a, d, cfg, TSR_OPRUN_ADD, &p, ta->data, tb->data, NULL, y->data, info);
out:
    return rc;
}

/* relu (relu != 0) or clip. */
static int run_clip_or_relu(int relu, const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg,
                            const tsr_tensor_t *x, tsr_tensor_t *y, run_info_t *info)
{
    tsr_clip_params_t p;
    memset(&p, 0, sizeof p);
    int rc;
    int32_t zp;
    tsr_eltwise_desc_t xd;
    if ((rc = get_zp(a, F_XZP, x->dtype, "input", &zp)) || (rc = flat_desc("--input", ARG(a, F_INPUT), x, zp, &xd)))
        goto out;
    if (relu)
        rc = tsr_relu_params(&xd, &p);
    else {
        p.x = p.y = xd;
        rc = get_clamp(a, x->dtype, zp, F_XSCALE, &p.lo, &p.hi);
    }
    if (rc || (rc = tsr_clip_check(&p, NULL)))
        goto out;
    if ((rc = tsr_tensor_alloc(y, x->dtype, x->ndim, x->shape)))
        goto out;
    rc = run_op(a, d, cfg, TSR_OPRUN_CLIP, &p, x->data, NULL, NULL, y->data, info);
out:
    return rc;
}

static int run_relu(const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg, const tsr_tensor_t *x,
                    const tsr_tensor_t *w, const tsr_tensor_t *bias, tsr_tensor_t *y, run_info_t *info)
{
    (void)w;
    (void)bias;
    return run_clip_or_relu(1, a, d, cfg, x, y, info);
}

static int run_clip(const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg, const tsr_tensor_t *x,
                    const tsr_tensor_t *w, const tsr_tensor_t *bias, tsr_tensor_t *y, run_info_t *info)
{
    (void)w;
    (void)bias;
    return run_clip_or_relu(0, a, d, cfg, x, y, info);
}

static int run_pool(tsr_pool_kind_e kind, const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg,
                    const tsr_tensor_t *x, tsr_tensor_t *y, run_info_t *info)
{
    char sx[128];
    tsr_pool_params_t p;
    memset(&p, 0, sizeof p);
    int rc = TSR_OK;
    if (x->ndim != 4) {
        rc = tsr_err(TSR_EINVAL, "pool: input %s must be 4-D [N, C, H, W], got %s", ARG(a, F_INPUT),
                     shape_str(x, sx, sizeof sx));
        goto out;
    }
    p.kind = kind;
    p.n = (int)x->shape[0];
    p.c = (int)x->shape[1];
    p.h = (int)x->shape[2];
    p.w = (int)x->shape[3];
    p.dtype = x->dtype;
    if ((rc = get_zp(a, F_XZP, x->dtype, "input", &p.zp)))
        goto out;
    if (kind == TSR_POOL_GLOBAL_AVG) {
        p.kh = p.h;
        p.kw = p.w;
        p.stride_h = p.stride_w = 1;
    } else {
        int v[2], n;
        if (!ARG(a, F_KERNEL)) {
            rc = tsr_err(TSR_EINVAL, "pool: missing --kernel K or KH,KW");
            goto out;
        }
        if (parse_list(ARG(a, F_KERNEL), 1, 1 << 16, 2, v, &n)) {
            rc = tsr_err(TSR_EINVAL, "--kernel %s: expected K or KH,KW (positive integers)", ARG(a, F_KERNEL));
            goto out;
        }
        p.kh = v[0];
        p.kw = v[n - 1];
        if ((rc = get_window(a, &p.stride_h, &p.stride_w, &p.pad_top, &p.pad_left, &p.pad_bottom, &p.pad_right)))
            goto out;
        p.count_include_pad = ARG(a, F_CIP) != NULL;
    }
    int oh, ow;
    if ((rc = tsr_pool_check(&p, &oh, &ow)))
        goto out;
    const int64_t yshape[4] = {p.n, p.c, oh, ow};
    if ((rc = tsr_tensor_alloc(y, p.dtype, 4, yshape)))
        goto out;
    rc = run_op(a, d, cfg, TSR_OPRUN_POOL, &p, x->data, NULL, NULL, y->data, info);
out:
    return rc;
}

static int run_maxpool(const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg, const tsr_tensor_t *x,
                       const tsr_tensor_t *w, const tsr_tensor_t *bias, tsr_tensor_t *y, run_info_t *info)
{
    (void)w;
    (void)bias;
    return run_pool(TSR_POOL_MAX, a, d, cfg, x, y, info);
}

static int run_avgpool(const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg, const tsr_tensor_t *x,
                       const tsr_tensor_t *w, const tsr_tensor_t *bias, tsr_tensor_t *y, run_info_t *info)
{
    (void)w;
    (void)bias;
    return run_pool(TSR_POOL_AVG, a, d, cfg, x, y, info);
}

static int run_globalavgpool(const op_args_t *a, const tsr_cli_dev_t *d, const tsr_config_t *cfg,
                             const tsr_tensor_t *x, const tsr_tensor_t *w, const tsr_tensor_t *bias, tsr_tensor_t *y,
                             run_info_t *info)
{
    (void)w;
    (void)bias;
    return run_pool(TSR_POOL_GLOBAL_AVG, a, d, cfg, x, y, info);
}

/* ------------------------------------------------------------ operators */

typedef int (*op_run_fn)(const op_args_t *, const tsr_cli_dev_t *, const tsr_config_t *, const tsr_tensor_t *,
                         const tsr_tensor_t *, const tsr_tensor_t *, tsr_tensor_t *, run_info_t *);

typedef struct {
    const char *name;       /* operator name on the command line */
    const char *help;       /* its --help text */
    uint64_t flags;         /* BIT()s of the flags it takes */
    int in1, in2;           /* flags of the first operand (required) and the second (0: none) */
    const char *label1, *label2; /* their names in the summary line */
    op_run_fn run;          /* runs it */
} op_desc_t;

static const op_desc_t ops[] = {
    {"conv2d", conv2d_help, COMMON_FLAGS | REQUANT_FLAGS | BIT(F_GROUPS) | BIT(F_STRIDE) | BIT(F_PAD), F_INPUT,
     F_WEIGHT, "x", "w", run_conv2d},
    {"dense", dense_help, COMMON_FLAGS | REQUANT_FLAGS, F_INPUT, F_WEIGHT, "x", "w", run_dense},
    {"maxpool", pool_help, COMMON_FLAGS | BIT(F_XZP) | BIT(F_KERNEL) | BIT(F_STRIDE) | BIT(F_PAD), F_INPUT, 0, "x",
     NULL, run_maxpool},
    {"avgpool", pool_help, COMMON_FLAGS | BIT(F_XZP) | BIT(F_KERNEL) | BIT(F_STRIDE) | BIT(F_PAD) | BIT(F_CIP),
     F_INPUT, 0, "x", NULL, run_avgpool},
    {"globalavgpool", pool_help, COMMON_FLAGS | BIT(F_XZP), F_INPUT, 0, "x", NULL, run_globalavgpool},
    {"add", add_help,
     (COMMON_FLAGS & ~BIT(F_INPUT)) | BIT(F_INA) | BIT(F_INB) | BIT(F_AZP) | BIT(F_BZP) | BIT(F_YZP) |
         BIT(F_YDTYPE) | BIT(F_ASCALE) | BIT(F_BSCALE) | BIT(F_YSCALE) | BIT(F_ADDPARAMS) | BIT(F_ACTMIN) |
         BIT(F_ACTMAX) | BIT(F_RELU) | BIT(F_RELU6),
     F_INA, F_INB, "a", "b", run_add},
    {"relu", relu_help, COMMON_FLAGS | BIT(F_XZP), F_INPUT, 0, "x", NULL, run_relu},
    {"clip", clip_help, COMMON_FLAGS | BIT(F_XZP) | BIT(F_ACTMIN) | BIT(F_ACTMAX) | BIT(F_RELU6) | BIT(F_XSCALE),
     F_INPUT, 0, "x", NULL, run_clip},
};

/* The operator named name, or NULL (message printed). */
static const op_desc_t *op_find(const char *name)
{
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(name, ops[i].name))
            return &ops[i];
    char names[128] = "";
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", ops[i].name);
    fprintf(stderr, "tessera op: unknown operator \"%s\" (available: %s; see `tessera op --help`)\n", name, names);
    return NULL;
}

/* The flag table: ours, then the host's device options (calloc'd). */
static struct option *op_flags(const tsr_cli_dev_t *d)
{
    size_t ndev = 0;
    while (d && d->long_opts && d->long_opts[ndev].name)
        ndev++;
    struct option *lo = calloc(N_OP_LONG + ndev + 1, sizeof *lo);
    if (!lo)
        return NULL;
    memcpy(lo, op_long, sizeof op_long);
    if (ndev)
        memcpy(lo + N_OP_LONG, d->long_opts, ndev * sizeof *lo);
    return lo;
}

/* getopt's short flag c as its long code. */
static int op_short(int c)
{
    switch (c) {
    case 'x': return F_INPUT;
    case 'w': return F_WEIGHT;
    case 'o': return F_OUTPUT;
    case 'c': return F_CONFIG;
    case 'q': return F_QUIET;
    case 'h': return F_HELP;
    case 'a': return F_INA;
    case 'b': return F_INB;
    default: return c;
    }
}

/* One flag c as getopt returned it (li: its long index or -1): 0, or the
 * exit status of the usage error. */
static int op_flag(const op_desc_t *o, const tsr_cli_dev_t *d, const struct option *lo, char **sub, int c, int li,
                   op_args_t *a)
{
    if (c == '?' || c == ':') {
        char bad[64];
        if (optopt > 0 && optopt < 256)
            snprintf(bad, sizeof bad, "-%c", optopt);
        else
            snprintf(bad, sizeof bad, "%s", sub[optind - 1]);
        return op_usage(o->name, c == ':' ? "flag %s needs a value" : "unknown flag %s", bad);
    }
    if (c >= F_INPUT && c < F_END) {
        if (!(o->flags & BIT(c))) {
            char what[64];
            snprintf(what, sizeof what, "--%s", op_long[c - F_INPUT].name);
            return op_usage(o->name, "flag %s does not apply to this operator", what);
        }
        ARG(a, c) = optarg ? optarg : "";
        return 0;
    }
    int r = d && d->handle ? d->handle(c, optarg) : 0;
    if (r < 0) {
        char what[128];
        snprintf(what, sizeof what, "--%s %s", li >= 0 ? lo[li].name : "?", optarg ? optarg : "");
        return op_usage(o->name, "bad value for device option %s", what);
    }
    return r == 0 ? op_usage(o->name, "unknown flag %s", sub[optind - 1]) : 0;
}

/* Backend, config, quiet, seed and the required flags from the parsed
 * flags: 0, or the exit status of the usage error. */
static int op_settle(const op_desc_t *o, op_args_t *a)
{
    if (ARG(a, F_BACKEND))
        a->backend = ARG(a, F_BACKEND);
    if (ARG(a, F_CONFIG))
        a->config = ARG(a, F_CONFIG);
    a->quiet = ARG(a, F_QUIET) != NULL;
    if (ARG(a, F_SEED)) {
        char *end;
        errno = 0;
        a->seed = strtoull(ARG(a, F_SEED), &end, 10);
        if (errno || end == ARG(a, F_SEED) || *end || ARG(a, F_SEED)[0] == '-')
            return op_usage(o->name, "--seed %s: expected a non-negative integer", ARG(a, F_SEED));
    }
    if (tsr_cli_devopts.rtl.timing_only) /* (an op always writes its output) */
        return op_usage(o->name, "%s", TSR_CLI_TIMING_ONLY_MSG);
    const int required[] = {o->in1, o->in2, F_OUTPUT};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (required[i] && !ARG(a, required[i])) {
            char what[64];
            snprintf(what, sizeof what, "--%s", op_long[required[i] - F_INPUT].name);
            return op_usage(o->name, "missing %s", what);
        }
    return 0;
}

/* Parse operator o's flags (sub[0] is its name): -1 to go on, else the
 * exit status (usage error, or 0 after --help). */
static int op_parse(const op_desc_t *o, const tsr_cli_dev_t *d, int subc, char **sub, op_args_t *a)
{
    struct option *lo = op_flags(d);
    if (!lo)
        return tsr_cli_fail(tsr_err(TSR_ENOMEM, "out of memory"));
    int status = -1, c, li = -1;
    optind = 1;
    opterr = 0;
    while (status < 0 && (c = getopt_long(subc, sub, ":x:w:o:c:qha:b:", lo, &li)) != -1) {
        int r = op_flag(o, d, lo, sub, op_short(c), li, a);
        if (r)
            status = r;
    }
    free(lo);
    if (status >= 0)
        return status;
    if (ARG(a, F_HELP)) {
        fputs(o->help, stdout);
        if (d && d->help)
            fputs(d->help, stdout);
        return 0;
    }
    if (optind != subc)
        return op_usage(o->name, "unexpected argument \"%s\"", sub[optind]);
    int r = op_settle(o, a);
    return r ? r : -1;
}

/* The summary line of a run. */
static void op_summary(const op_desc_t *o, const op_args_t *a, const tsr_tensor_t *x, const tsr_tensor_t *w,
                       const tsr_tensor_t *y, const run_info_t *info)
{
    char sx[128], sw[128], sy[128];
    printf("%s: %s %s %s", o->name, o->label1, shape_str(x, sx, sizeof sx), tsr_dtype_name(x->dtype));
    if (o->in2)
        printf(", %s %s %s", o->label2, shape_str(w, sw, sizeof sw), tsr_dtype_name(w->dtype));
    printf(" -> y %s %s (%s); %s/%s: %zu instructions, %llu GEMM ops, %llu ALU ops", shape_str(y, sy, sizeof sy),
           tsr_dtype_name(y->dtype), ARG(a, F_OUTPUT), a->backend, a->config, info->ninsns,
           (unsigned long long)info->ctr.gemm_ops, (unsigned long long)info->ctr.alu_ops);
    if (info->ctr.cycles)
        printf(", %llu cycles", (unsigned long long)info->ctr.cycles);
    printf(", %.3f s\n", info->secs);
}

/* Config, operands, run, output file, summary: the exit status. */
static int op_execute(const op_desc_t *o, const op_args_t *a, const tsr_cli_dev_t *d)
{
    tsr_config_t cfg;
    tsr_tensor_t x = {0}, w = {0}, b = {0}, y = {0};
    run_info_t info;
    memset(&info, 0, sizeof info);
    int rc = tsr_config_load(a->config, &cfg);
    if (rc)
        rc = tsr_err_prefix(rc, "--config "); /* the message starts with the file or preset name */
    char f1[32], f2[32];
    snprintf(f1, sizeof f1, "--%s", op_long[o->in1 - F_INPUT].name);
    snprintf(f2, sizeof f2, "--%s", o->in2 ? op_long[o->in2 - F_INPUT].name : "");
    if (!rc)
        rc = load_operand(f1, ARG(a, o->in1), DT_Q8, &x);
    if (!rc && o->in2)
        rc = load_operand(f2, ARG(a, o->in2), DT_Q8, &w);
    if (!rc && ARG(a, F_BIAS))
        rc = load_operand("--bias", ARG(a, F_BIAS), 1u << TSR_DT_INT32, &b);
    if (!rc)
        rc = o->run(a, d, &cfg, &x, o->in2 ? &w : NULL, ARG(a, F_BIAS) ? &b : NULL, &y, &info);
    if (!rc)
        rc = tsr_npy_write(ARG(a, F_OUTPUT), &y);
    if (!rc && !a->quiet)
        op_summary(o, a, &x, &w, &y, &info);
    tsr_tensor_free(&x);
    tsr_tensor_free(&w);
    tsr_tensor_free(&b);
    tsr_tensor_free(&y);
    return rc ? tsr_cli_fail(rc) : 0;
}

int tsr_cli_op(int argc, char **argv, const tsr_cli_dev_t *d)
{
    if (argc < 2) {
        fputs(op_help, stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(op_help, stdout);
        if (d && d->help)
            fputs(d->help, stdout);
        return 0;
    }
    const op_desc_t *o = op_find(argv[1]);
    if (!o)
        return 2;
    op_args_t a;
    memset(&a, 0, sizeof a);
    a.backend = "fsim";
    a.config = "default";
    int status = op_parse(o, d, argc - 1, argv + 1, &a);
    return status >= 0 ? status : op_execute(o, &a, d);
}
