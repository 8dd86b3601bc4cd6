/*
 * tsr_vtop: the C interface of a Verilated tsr_top model, implemented by
 * the thin C++ shim (tsr_vshim.cpp) that Verilator requires and loaded at
 * run time from a per-config shared library (see tsr_rtl.c). Signals are
 * addressed by enum so the C harness never touches Verilator types.
 */
#ifndef TSR_VTOP_H
#define TSR_VTOP_H

#include <stdint.h>

/* Top-level signals of tsr_top (scalars up to 64 bits). */
typedef enum {
    TSR_V_RST_N = 0,
    /* AXI4-Lite slave */
    TSR_V_AXIL_AWVALID, TSR_V_AXIL_AWREADY, TSR_V_AXIL_AWADDR,
    TSR_V_AXIL_WVALID, TSR_V_AXIL_WREADY, TSR_V_AXIL_WDATA, TSR_V_AXIL_WSTRB,
    TSR_V_AXIL_BVALID, TSR_V_AXIL_BREADY,
    TSR_V_AXIL_ARVALID, TSR_V_AXIL_ARREADY, TSR_V_AXIL_ARADDR,
    TSR_V_AXIL_RVALID, TSR_V_AXIL_RREADY, TSR_V_AXIL_RDATA,
    /* AXI4 master */
    TSR_V_ARVALID, TSR_V_ARREADY, TSR_V_ARADDR, TSR_V_ARLEN, TSR_V_ARSIZE, TSR_V_ARBURST, TSR_V_ARID,
    TSR_V_RVALID, TSR_V_RREADY, TSR_V_RRESP, TSR_V_RLAST, TSR_V_RID,
    TSR_V_AWVALID, TSR_V_AWREADY, TSR_V_AWADDR, TSR_V_AWLEN, TSR_V_AWSIZE, TSR_V_AWBURST, TSR_V_AWID,
    TSR_V_WVALID, TSR_V_WREADY, TSR_V_WSTRB, TSR_V_WLAST,
    TSR_V_BVALID, TSR_V_BREADY, TSR_V_BRESP, TSR_V_BID,
    TSR_V_DONE,
    TSR_V_COUNT
} tsr_vsig_e;

/* Internal signals a timeline model (built with sim/rtl/tsr_timeline.vlt,
 * which makes them public) samples every cycle: the stage handshakes that
 * feed the hardware counters, so no hw/rtl edit is needed for them. */
typedef enum {
    TSR_VP_FETCHED = 0,                                    /* instructions fetch dispatched */
    TSR_VP_LOAD_INSNS, TSR_VP_COMPUTE_INSNS, TSR_VP_STORE_INSNS, /* completed per stage */
    TSR_VP_LOAD_BUSY, TSR_VP_COMPUTE_BUSY, TSR_VP_STORE_BUSY,
    TSR_VP_LOAD_STALL_TOK, TSR_VP_COMPUTE_STALL_TOK, TSR_VP_STORE_STALL_TOK,
    TSR_VP_GEMM_OP, TSR_VP_ALU_OP,                         /* a pipe issued an op this cycle */
    TSR_VP_COUNT
} tsr_vprobe_e;

/* Function table exported by the shim as `tsr_vtop_api` (version-checked). */
#define TSR_VTOP_API_VERSION 2
typedef struct tsr_vtop_api {
    int version;                                   /* TSR_VTOP_API_VERSION */
    int bus_bytes;                                 /* DRAM bus width the model was built for */
    void *(*create)(const char *fst_path);         /* NULL path: no waveform */
    void (*destroy)(void *m);
    void (*eval)(void *m);                         /* settle combinational logic */
    void (*tick)(void *m);                         /* one clock: rising edge, then falling */
    uint64_t (*get)(void *m, int sig);             /* read a scalar signal */
    void (*set)(void *m, int sig, uint64_t v);     /* drive a scalar input */
    void (*get_wdata)(void *m, uint8_t *bytes);    /* m_axi_wdata_o, bus_bytes bytes */
    void (*set_rdata)(void *m, const uint8_t *bytes); /* m_axi_rdata_i */
    void (*trace)(void *m, int on);                /* dump waveform while on */
    /* Timeline models: read the tsr_vprobe_e signals into v; returns the
     * mask of those the model exposes (0 in a model built without them). */
    uint32_t (*probe)(void *m, uint32_t v[TSR_VP_COUNT]);
} tsr_vtop_api_t;

/* tsr_top's names of the tsr_vprobe_e signals (the shim looks them up). */
#define TSR_VP_NAMES                                                                                    \
    {"fetched", "load_insns", "compute_insns", "store_insns", "load_busy", "compute_busy", "store_busy", \
     "load_stall_tok", "compute_stall_tok", "store_stall_tok", "gemm_op", "alu_op"}

#endif
