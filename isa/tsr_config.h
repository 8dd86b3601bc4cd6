/*
 * tsr_config: the hardware configuration, parsed once from JSON and turned
 * into every derived quantity (element sizes, buffer depths, index widths,
 * uop width). This is the only place those numbers are computed: the ISA
 * field table, the simulators, the driver and the generated SystemVerilog
 * package all read them from a tsr_config_t.
 *
 * Accepts VTA's vta_config.json keys unchanged, plus Tessera keys with
 * defaults (so a VTA file is a complete Tessera config).
 */
#ifndef TSR_CONFIG_H
#define TSR_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* Maximum derived index width of any on-chip buffer (bits). */
#define TSR_MAX_IDX_BITS 16

typedef struct tsr_config {
    /* ---- keys as written (VTA meanings) ---- */
    char target[32];        /* TARGET: VTA board name, sets bus/clock defaults */
    char hw_ver[32];        /* HW_VER: informational */
    int log_inp_width;      /* LOG_INP_WIDTH: log2 bits of an input value */
    int log_wgt_width;      /* LOG_WGT_WIDTH: log2 bits of a weight value */
    int log_acc_width;      /* LOG_ACC_WIDTH: log2 bits of an accumulator */
    int log_batch;          /* LOG_BATCH: log2 rows of the GEMM tile */
    int log_block_in;       /* LOG_BLOCK_IN (or LOG_BLOCK): log2 reduction width */
    int log_block_out;      /* LOG_BLOCK_OUT (or LOG_BLOCK): log2 output width */
    int log_uop_buff_size;  /* LOG_UOP_BUFF_SIZE: log2 bytes of the uop buffer */
    int log_inp_buff_size;  /* LOG_INP_BUFF_SIZE: log2 bytes of the input buffer */
    int log_wgt_buff_size;  /* LOG_WGT_BUFF_SIZE: log2 bytes of the weight buffer */
    int log_acc_buff_size;  /* LOG_ACC_BUFF_SIZE: log2 bytes of the accumulator buffer */
    /* ---- Tessera keys (optional) ---- */
    int dram_bus_width;     /* DRAM_BUS_WIDTH: AXI4 data width in bits */
    int clock_mhz;          /* CLOCK_MHZ: target clock, for reports and timing */
    int cmd_queue_depth;    /* CMD_QUEUE_DEPTH: fetch->stage command FIFO depth */
    int dep_queue_depth;    /* DEP_QUEUE_DEPTH: capacity of each token queue */
    int dsp_pack;           /* DSP_PACK: 1 = two int8 products per multiplier (RTL
                               area option; results and cycles unchanged) */
    int out_buff_lutram;    /* OUT_BUFF_LUTRAM: 1 = output buffer in LUT RAM instead of
                               block RAM (RTL area option; results and cycles unchanged) */
    int acc_single_copy;    /* ACC_SINGLE_COPY: 1 = one accumulator copy per bank instead of
                               two (RTL area option; results unchanged, an ALU op that reads
                               a second accumulator row issues every other cycle) */
    int serial_core;        /* SERIAL_CORE: 1 = the serial microarchitecture (hw/rtl/tsr_serial_accel:
                               one instruction at a time, byte-wide DMA, one ALU lane) for
                               the smallest FPGAs; results unchanged, many times the cycles */
    int exact_requant;      /* EXACT_REQUANT: 1 = the ALU op fscale (ONNX Runtime's float32
                               requantizing multiply, bit for bit); needs 32-bit accumulators */
    int act_lut;            /* ACT_LUT: activation tables of 256 int8 entries (0 = none, 1, 2, 4
                               or 8): the memory type lut and the ALU op lut (isa/semantics.md) */
    int depthwise;          /* DEPTHWISE: taps K of the GEMM depthwise mode (0 = none, 1..8):
                               acc[dst][b][c] += sum_k<K inp[src+k][b][c] * wgt[r][t+k][c], the
                               index naming a tap group (row r = wgt >> dw_group_bits, t = (wgt mod
                               G) * K); needs BLOCK_IN == BLOCK_OUT and K <= BLOCK_OUT (/2 with
                               DSP_PACK) */

    /* ---- derived ---- */
    int inp_width;          /* bits per input value */
    int wgt_width;          /* bits per weight value */
    int acc_width;          /* bits per accumulator value */
    int out_width;          /* bits per output value (= input width, as VTA) */
    int batch;              /* BATCH rows per tensor op */
    int block_in;           /* BLOCK_IN reduction length */
    int block_out;          /* BLOCK_OUT output columns */
    uint32_t uop_bytes;     /* bytes per uop in DRAM and SRAM (4 or 8) */
    uint32_t inp_bytes;     /* bytes per input row: BATCH x BLOCK_IN values */
    uint32_t wgt_bytes;     /* bytes per weight row: BLOCK_OUT x BLOCK_IN values */
    uint32_t acc_bytes;     /* bytes per accumulator row: BATCH x BLOCK_OUT values */
    uint32_t acc8_bytes;    /* bytes per ACC_8BIT row: BATCH x BLOCK_OUT int8 */
    uint32_t out_bytes;     /* bytes per output row: BATCH x BLOCK_OUT values */
    uint32_t uop_depth;     /* rows in the uop buffer */
    uint32_t inp_depth;     /* rows in the input buffer */
    uint32_t wgt_depth;     /* rows in the weight buffer */
    uint32_t acc_depth;     /* rows in the accumulator buffer */
    uint32_t out_depth;     /* rows in the output buffer (= acc_depth) */
    int uop_idx_bits;       /* log2(uop_depth) */
    int inp_idx_bits;       /* log2(inp_depth) */
    int wgt_idx_bits;       /* log2(wgt_depth) */
    int acc_idx_bits;       /* log2(acc_depth) */
    int uop_dst_bits;       /* uop dst field width (= acc_idx_bits) */
    int uop_src_bits;       /* uop src field width (max of inp/acc idx bits) */
    int uop_wgt_bits;       /* uop wgt field width (= wgt_idx_bits) */
    int sram_base_bits;     /* LOAD/STORE sram_base width (max idx bits) */
    uint64_t out_buff_size; /* bytes of the output buffer */
    uint64_t macs_per_op;   /* BATCH x BLOCK_IN x BLOCK_OUT */
    int dw_group_bits;      /* DEPTHWISE > 0: log2 of the tap groups one weight row holds, the largest
                               power of two G <= BLOCK_OUT / DEPTHWISE (a depthwise op's wgt index
                               names a group: row = wgt >> bits); 0 without the key */
} tsr_config_t;

/* Parse JSON text; name is used in messages. Returns TSR_OK or TSR_ECONFIG. */
int tsr_config_parse(const char *json, const char *name, tsr_config_t *cfg);
/* Largest config file tsr_config_load reads (a config is a few hundred bytes). */
#define TSR_CONFIG_MAX_FILE (1u << 20)

/* Load a config from a file path, or a preset name ("default", "tiny", "large").
 * The file must be a regular file of at most TSR_CONFIG_MAX_FILE bytes. */
int tsr_config_load(const char *path_or_preset, tsr_config_t *cfg);
/* The same with one integer key set to value (the preset's or file's own
 * value of it replaced, or the key added), e.g. ("default", "DEPTHWISE", 0). */
int tsr_config_load_with(const char *path_or_preset, const char *key, int value, tsr_config_t *cfg);
/* JSON text of a built-in preset, or NULL. */
const char *tsr_config_preset_json(const char *name);
/* NULL-terminated list of preset names. */
const char *const *tsr_config_preset_names(void);
/* Write a human-readable summary of keys and derived values. */
void tsr_config_print(const tsr_config_t *cfg, void *file /* FILE* */);
/* Bytes per DRAM element (= SRAM row) of a memory type (TSR_MEM_*), 0 if invalid
 * or if the config has no such buffer (lut with ACT_LUT = 0). */
/* The values of every integer key of c, in the key table's order, then LOG_BLOCK_IN and LOG_BLOCK_OUT
 * (the keys a config is parsed from; derived values follow from them): up to n into out; how many there
 * are. One source for whoever identifies a config by its keys (the kernel cache), so a new key is never
 * left out of such an identity. */
size_t tsr_config_key_values(const tsr_config_t *c, int32_t *out, size_t n);
uint32_t tsr_config_elem_bytes(const tsr_config_t *cfg, int mem_type);
/* Rows of the on-chip buffer a memory type loads into (ACC_8BIT -> acc), 0 if none. */
uint32_t tsr_config_sram_depth(const tsr_config_t *cfg, int mem_type);
/* Bytes of the on-chip buffer a memory type loads into (rows x row bytes; ACC_8BIT -> acc),
 * 0 if none: the one place `config show` and `config show --batch` take buffer sizes from. */
uint64_t tsr_config_buffer_bytes(const tsr_config_t *cfg, int mem_type);

#endif
