/*
 * tsr_board: FPGA board data (the JSON files in boards/, see boards/README.md) read into
 * a tsr_board_t, and the fit check of a resource estimate against it. The
 * board files are the one source of board data: the fit check, the FPGA
 * flows and the design-space exploration read them through this module.
 * Every file is embedded in the library at build time, so `--board pynq-z1`
 * works from any directory; a path to a JSON file works too.
 *
 * Validation is strict (unknown keys, missing resources, negative or absurd
 * numbers are errors naming the file and the key) because a wrong budget
 * turns into a wrong "fits" verdict that nobody re-checks until a vendor
 * tool fails hours later.
 */
#ifndef TSR_BOARD_H
#define TSR_BOARD_H

#include <stdint.h>

/* Resource classes, by yosys cell class (boards/README.md). */
typedef enum {
    TSR_RES_LUT,    /* Xilinx LUT1..LUT6 */
    TSR_RES_FF,     /* Xilinx flip-flops (FD*) */
    TSR_RES_BRAM36, /* Xilinx RAMB36 (a RAMB18 counts 0.5) */
    TSR_RES_URAM,   /* UltraScale+ URAM288 */
    TSR_RES_DSP,    /* DSP48E1/E2, iCE40 SB_MAC16 */
    TSR_RES_LC,     /* iCE40 logic cells (LUT4 + FF) */
    TSR_RES_EBR,    /* iCE40 4-kbit block RAM */
    TSR_RES_SPRAM,  /* iCE40 UltraPlus 256-kbit single-port RAM */
    TSR_RES_COUNT
} tsr_res_e;

/* Yosys synthesis family of a board. */
typedef enum {
    TSR_FAMILY_XC7,   /* synth_xilinx (7-series, Zynq-7000) */
    TSR_FAMILY_XCUP,  /* synth_xilinx -family xcup (UltraScale+) */
    TSR_FAMILY_ICE40, /* synth_ice40 */
} tsr_family_e;

/* Largest budget of one resource class a board file may state. */
#define TSR_BOARD_MAX_RES 100000000.0
/* Largest board file read (a board file is a few hundred bytes). */
#define TSR_BOARD_MAX_FILE (1u << 20)

typedef struct tsr_board {
    char name[64];                 /* "name": short board name (pynq-z1) */
    char vendor[128];              /* "vendor": human description (optional) */
    char part[64];                 /* "part": the FPGA part number */
    tsr_family_e family;           /* "family": yosys synthesis family */
    int has[TSR_RES_COUNT];        /* 1 if "resources" lists the class */
    double budget[TSR_RES_COUNT];  /* "resources": data-sheet totals */
    double limit[TSR_RES_COUNT];   /* "limits": usable share (1.0 when absent) */
    int dram_bus_bits;             /* "dram.bus_bits": HP / memory port data bits */
    int dram_mbytes;               /* "dram.mbytes": DRAM size (0: none on board) */
    int clock_mhz;                 /* "clock_mhz": default accelerator clock */
} tsr_board_t;

/* Parse board JSON text; name is used in messages (file or board name). */
int tsr_board_parse(const char *json, const char *name, tsr_board_t *b);
/* Load a built-in board by name ("pynq-z1") or a board JSON file by path. */
int tsr_board_load(const char *name_or_path, tsr_board_t *b);
/* NULL-terminated names of the built-in boards. */
const char *const *tsr_board_names(void);

/* Resource class name ("BRAM36"); NULL for an invalid value. */
const char *tsr_res_name(int res);
/* Family name as in the board files ("xc7"). */
const char *tsr_family_name(tsr_family_e f);

/* Compare used[] (per class; classes the board lacks must be 0) against the
 * board: returns 1 if everything fits, 0 if not. When it does not fit,
 * why (if not NULL) gets "DSP 323 > 220, BRAM36 143 > 140" naming every
 * class over its budget x limit. */
int tsr_board_fits(const tsr_board_t *b, const double used[TSR_RES_COUNT], char *why,
                   int why_len);
/* Usable amount of a class: budget x limit. */
double tsr_board_usable(const tsr_board_t *b, int res);

#endif
