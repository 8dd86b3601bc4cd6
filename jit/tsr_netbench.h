/*
 * tsr_netbench: ResNet-18 as a benchmark, the work behind `tessera bench
 * --kind resnet18` (its convolutions one by one) and `tessera net resnet18`
 * (the whole network as a graph). In the library, not the CLI, so a C
 * program gets the same figures as the command line: the CLI parses flags
 * and prints these structs, nothing else.
 *
 * Both take their devices the same way (tsr_netbench_open_devices): the
 * chosen backend, and for --check an fsim device with a random legal stage
 * interleaving that runs the same work for a byte-exact comparison.
 */
#ifndef TSR_NETBENCH_H
#define TSR_NETBENCH_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_config.h"
#include "tsr_conv2d.h"
#include "tsr_driver.h"
#include "tsr_graph.h"
#include "tsr_netdesc.h"

/* *dev on backend with base's options (rtl.verbose set: RTL model build
 * progress on stderr); with check, *chk an fsim device whose interleaving
 * seed derives from seed. On error nothing is left open and both are NULL. */
int tsr_netbench_open_devices(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *base, int check,
                              uint64_t seed, tsr_device_t **dev, tsr_device_t **chk);

/* ------------------------------------------- the layer benchmark (bench) */

/* One ResNet-18 convolution: input hw x hw, cin -> cout, k x k kernel. */
typedef struct tsr_rn18_layer {
    const char *name; /* C1 .. C11 */
    int hw, cin, cout, k, pad, stride;
} tsr_rn18_layer_t;

#define TSR_RN18_LAYERS 11

/* Layer i (0 .. TSR_RN18_LAYERS-1), or NULL. */
const tsr_rn18_layer_t *tsr_rn18_layer(int i);
/* Index of the layer named name (case-insensitive), or -1. */
int tsr_rn18_layer_find(const char *name);

/* What the layer benchmark needs: config, devices, roofline terms. */
typedef struct tsr_lbench {
    tsr_config_t cfg;
    tsr_device_t *dev; /* the measured device */
    tsr_device_t *chk; /* fsim reference (NULL without check) */
    double peak;       /* MACs per cycle */
    double bw;         /* DRAM bytes per cycle of the roofline */
    uint64_t seed;     /* data seed */
    int tappack;       /* 1: few-channel layers (C1) run tap-packed */
} tsr_lbench_t;

typedef struct tsr_lbench_opts {
    const char *cfgname, *backend;
    const tsr_device_opts_t *dev; /* device options (NULL: defaults) */
    uint64_t seed;
    int check;    /* open the fsim reference device */
    int no_cache; /* plan without the kernel cache */
    int tappack;  /* run C1 tap-packed (jit/tsr_tappack.h) */
} tsr_lbench_opts_t;

/* One row of the table. util, ratio and ratio_rd are valid when timed. */
typedef struct tsr_lbench_row {
    const tsr_rn18_layer_t *layer;
    double macs;              /* real tensor sizes, no padding */
    double cycles;            /* device counter (0 on an untimed backend) */
    int timed;                /* cycles > 0 */
    double util;              /* macs / (cycles x peak) */
    double bound, bound_rd;   /* roofline cycles; bound_rd without the input bytes no window reads */
    double ratio, ratio_rd;   /* bound / cycles, bound_rd / cycles */
    int memory_bound;         /* which roofline term binds */
    double moved, compulsory; /* DRAM bytes moved (counters) and compulsory */
    double jit_ms;            /* plan time */
    int kcache;               /* tsr_kc_status_e of the kernel */
    int checked;              /* compared with the fsim reference */
    int differs;              /* ... and differed: the first differing element below */
    size_t diff_flat, diff_n; /* flat index of it, of diff_n outputs */
    int diff_c, diff_y, diff_x, diff_dev, diff_ref;
    int tappacked;            /* ran the tap-packed rewrite: */
    tsr_conv2d_params_t tp;   /* its parameters */
    uint64_t tp_bytes;        /* packed input bytes */
    double tp_ms;             /* host packing time (not in the cycles) */
} tsr_lbench_row_t;

/* Sums over the rows run; util and the ratios are valid when timed (every
 * row timed). */
typedef struct tsr_lbench_total {
    double macs, cycles, bound, bound_rd, moved, compulsory, jit_ms;
    int nrun, ndiff, timed;
    double util, ratio, ratio_rd;
} tsr_lbench_total_t;

/* Load the config and open the devices (and disable the kernel cache for
 * no_cache). On error nothing is left open. */
int tsr_lbench_open(const tsr_lbench_opts_t *o, tsr_lbench_t *b);
void tsr_lbench_close(tsr_lbench_t *b);
/* Run layer i on random data from the seed (requantized per channel,
 * ReLU), and on the reference device if open; fill row. A difference from
 * the reference is not an error (row->differs). Errors are prefixed with
 * the layer's name. */
int tsr_lbench_layer(tsr_lbench_t *b, int i, tsr_lbench_row_t *row);
/* Start a total (zeroes it) and add a row to it. */
void tsr_lbench_total_init(tsr_lbench_total_t *t);
void tsr_lbench_total_add(const tsr_lbench_t *b, tsr_lbench_total_t *t, const tsr_lbench_row_t *row);

/* ------------------------------- MobileNetV2's depthwise layers (bench) */

/* One of the 17 depthwise 3x3 convs of torchvision's mobilenet_v2 at
 * 224x224 (pad 1): input hw x hw, c channels, stride. */
typedef struct tsr_mbv2_dw_layer {
    const char *name; /* D1 .. D17 (the block's features[] index in the note) */
    int hw, c, stride, block;
} tsr_mbv2_dw_layer_t;

#define TSR_MBV2_DW_LAYERS 17

const tsr_mbv2_dw_layer_t *tsr_mbv2_dw_layer(int i);
int tsr_mbv2_dw_layer_find(const char *name);

/* Each layer on two devices of the same backend: the config as given
 * (depthwise on the block-diagonal path, unless it has DEPTHWISE) and the
 * config plus DEPTHWISE = taps (the GEMM depthwise mode), and with check
 * on an fsim device too (outputs compared byte for byte with both). */
typedef struct tsr_dwbench_opts {
    const char *cfgname, *backend;
    const tsr_device_opts_t *dev; /* device options (NULL: defaults) */
    uint64_t seed;
    int taps;  /* DEPTHWISE of the second config (1..8) */
    int check; /* compare the outputs with fsim's */
} tsr_dwbench_opts_t;

typedef struct tsr_dwbench {
    tsr_config_t cfg[2];    /* [0] as given, [1] + DEPTHWISE */
    tsr_device_t *dev[2];
    tsr_device_t *chk;      /* fsim (check), of cfg[0] */
    double bw;              /* DRAM bytes per cycle of the bound */
    uint64_t seed;
} tsr_dwbench_t;

typedef struct tsr_dwbench_row {
    const tsr_mbv2_dw_layer_t *layer;
    double macs, compulsory; /* unpadded MACs; compulsory bytes (input, weights, bias, output once) */
    double t_mem;            /* compulsory bytes / DRAM bytes per cycle: the bound of these layers */
    double t_comp[2];        /* MACs / the useful MACs per cycle of each path (B*BI on the block-diagonal
                                path, B*BI*K in the mode) */
    double cycles[2];        /* device counter (0: untimed backend) */
    double est[2];           /* the JIT's estimate (plan cost) */
    double moved[2];         /* DRAM bytes moved */
    double gemm_ops[2];      /* GEMM tensor ops (counters) */
    int dwk[2];              /* taps of the plan's depthwise mode (0: block-diagonal) */
    int toh[2], tow[2], tco[2], tiles[2]; /* the tiling chosen: output rows x columns x channel blocks */
    int timed;
    int checked, differs;    /* compared with fsim (every path): a path's output differed */
} tsr_dwbench_row_t;

/* Load the config, derive the DEPTHWISE one, open the devices. Refused
 * (one line) when the config has DEPTHWISE already or the key does not fit
 * it. On error nothing is left open. */
int tsr_dwbench_open(const tsr_dwbench_opts_t *o, tsr_dwbench_t *b);
void tsr_dwbench_close(tsr_dwbench_t *b);
/* Run layer i (random int8 data from the seed, per-channel requantization,
 * ReLU6-like clamp) on both devices; fill row. */
int tsr_dwbench_layer(tsr_dwbench_t *b, int i, tsr_dwbench_row_t *row);

/* ------------------------------------------- the whole network (net) */

typedef struct tsr_netbench_opts {
    const char *cfgname, *backend;
    const tsr_device_opts_t *dev; /* device options (NULL: defaults) */
    uint64_t seed;                /* weights and input */
    int batch, runs;              /* batch size; executions timed */
    int check;                    /* also plan for a comparison with fsim (keeps every tensor) */
    int small, small_hw, small_width, small_classes; /* the scaled-down network */
    unsigned flags;               /* TSR_GRAPH_* plan flags */
} tsr_netbench_opts_t;

typedef struct tsr_netbench {
    tsr_config_t cfg;
    tsr_device_t *dev, *chk;
    tsr_netdesc_t nd;
    tsr_graph_t *g;           /* planned and executed: tsr_graph_print_report(g) is the table */
    unsigned flags;           /* as planned */
    double dram_bw;           /* DRAM bytes per cycle of the roofline */
    double desc_ms;           /* building the network description */
    tsr_graph_totals_t again; /* a second plan of the same network, from the in-memory kernel cache */
    double wall_s;            /* mean wall time of one execution of the batch */
    uint8_t *in, *out;        /* the input and output tensors */
    int top, top_logit;       /* the first image's largest logit and its class */
} tsr_netbench_t;

/* One tensor that differs from fsim. */
typedef struct tsr_netbench_diff {
    int tensor;
    const char *node; /* its producer */
    uint64_t flat, n; /* first differing byte, of n */
    int dev, ref;     /* the values there */
} tsr_netbench_diff_t;

/* Check figures: tensors compared, differing, and conv outputs fused away. */
typedef struct tsr_netbench_check {
    int compared, diffs, fused;
} tsr_netbench_check_t;

/* Build the network, plan it, plan it again from the kernel cache, run it
 * o->runs times on a seeded random input. nb is filled even on error, so
 * tsr_netbench_close(nb) is always right. */
int tsr_netbench_run(const tsr_netbench_opts_t *o, tsr_netbench_t *nb);
/* Run it on fsim with every add on its own and compare every tensor both
 * keep; on_diff (may be NULL) hears each differing one. Needs check. */
int tsr_netbench_check(tsr_netbench_t *nb, void (*on_diff)(const tsr_netbench_diff_t *d, void *ctx), void *ctx,
                       tsr_netbench_check_t *out);
void tsr_netbench_close(tsr_netbench_t *nb);

#endif
