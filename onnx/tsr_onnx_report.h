/*
 * tsr_onnx_report: the per-layer table of a model's last run as data, one
 * row per device layer in the order tsr_onnx_print_report prints them
 * (segment by segment, each in execution order; a reshape, and a conv whose
 * add runs in its epilogue, are no rows of their own, as in the table).
 *
 * Why: programs that want the figures (the Python package's Model.report,
 * plots, scripts) used to parse the printed table, whose layer names are
 * cut to the column width and which rounds every figure. A row carries the
 * ONNX node index too, so it joins the placement (tsr_onnx_write_placement_json's
 * "index") without matching names.
 */
#ifndef TSR_ONNX_REPORT_H
#define TSR_ONNX_REPORT_H

#include "tsr_onnx.h"

typedef struct tsr_onnx_layer {
    int segment;            /* device segment */
    int index;              /* row number within its segment (the table's "#"; 0 for a conv run alone) */
    int node;               /* the ONNX node the row stands for (placement index); -1 if none is known */
    const char *name;       /* that node's name in full, as in the file (raw bytes; its output's name when
                               the node has none); valid while the model lives */
    const char *layer;      /* the device operator's name as the table prints it (made safe, at most 47
                               bytes); valid until the model is prepared again or freed */
    const char *op;         /* "conv", "dwconv", "gconv", "dense", "maxpool", "avgpool", "gap", "add", "clip",
                               "act", "requant", "conv+add", ... (tsr_graph_layer_t.op) */
    char shape[64];         /* e.g. "56x56,64->64,3x3,s1" */
    double macs;            /* unpadded multiply-accumulates (batch included) */
    double cycles;          /* device cycles of the last run (0 on untimed backends and for a conv run alone) */
    double util;            /* macs / (cycles * peak); 0 without cycles */
    double bound;           /* roofline bound, cycles */
    double ratio;           /* bound / cycles; 0 without cycles */
    int memory_bound;       /* 1 if the memory term of the bound binds */
    double moved;           /* DRAM bytes moved (counters; 0 for a conv run alone) */
    double compulsory;      /* DRAM bytes every correct run moves once */
    double wall_ms, plan_ms, upload_ms; /* host times of the last run, the plan, the weights' upload */
    int kcache;             /* tsr_kc_status_e of its kernel (0 off, 1 miss, 2 hit, 3 disk), -1 unknown */
    int solo;               /* 1: run alone (no per-layer counters; tsr_onnx_print_report prints one line
                               for it): a conv whose weights need several int8 parts, or a matmul of two
                               activations (op "matmul") */
    double peak;            /* MACs per cycle of the device (BATCH x BLOCK_IN x BLOCK_OUT) */
    double dram_bw;         /* DRAM bytes per cycle the bound assumes */
} tsr_onnx_layer_t;

/* Rows of the report after tsr_onnx_prepare (0 before, or when the model
 * has no device segment). The figures that come from a run (cycles, moved,
 * wall_ms) are those of the last tsr_onnx_run, 0 before the first. */
int tsr_onnx_report_rows(const tsr_onnx_t *m);
/* Row i into *out. TSR_EINVAL (one line) when m is not prepared or i is
 * out of range; *out is then zeroed. */
int tsr_onnx_report_row(const tsr_onnx_t *m, int i, tsr_onnx_layer_t *out);

#endif
