/* tsr_cli_run: `tessera run PROGRAM.s` (tsr_cli_run.h). */
#include "tsr_cli_run.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_asm.h"
#include "tsr_cli_common.h"
#include "tsr_error.h"
#include "tsr_util.h"

static const char *run_help =
    "usage: tessera run PROGRAM.s [--config CONFIG] [--backend NAME] [--seed N]\n"
    "                  [--out-dir DIR] [--timeout MS] [--quiet]\n"
    "\n"
    "Allocate the program's buffers on a device, fill them (zero, random SEED,\n"
    "file PATH or uops), submit the stream (verified first), wait, write every\n"
    "`.output` buffer to DIR/NAME.bin and print the counters.\n"
    "  --config CONFIG   config file or preset (default: default)\n"
    "  --backend NAME    fsim (default), rtl (cycle-accurate Verilator model) or\n"
    "                    systemc (SystemC/TLM-2.0 timed model, cycles close to rtl)\n"
    "  --seed N          fsim stage interleaving: 0 = fixed order, else random\n"
    "  --out-dir DIR     where outputs go (default: current directory)\n"
    "  --timeout MS      give up waiting after MS milliseconds (default: none)\n"
    "  --quiet           do not print counters\n" TSR_CLI_DEVICE_OPTIONS_HELP;

/* Allocate and fill every declared buffer (path: the program file). */
static int upload(tsr_device_t *dev, const tsr_config_t *cfg, const tsr_program_t *p, const char *path)
{
    uint8_t *tmp = NULL;
    int rc = TSR_OK;
    for (size_t k = 0; !rc && k < p->nbufs; k++) {
        const tsr_asm_buffer_t *b = &p->bufs[k];
        /* Device memory first: it bounds the buffer, so an absurd size is
         * refused before the host copy below is allocated. */
        rc = tsr_mem_alloc_at(dev, b->addr, b->size);
        free(tmp);
        tmp = NULL;
        if (!rc && !(tmp = malloc((size_t)b->size)))
            rc = tsr_err(TSR_ENOMEM, "out of memory for %llu bytes", (unsigned long long)b->size);
        if (!rc)
            rc = tsr_cli_fill_buffer(cfg, b, path, tmp);
        if (!rc)
            rc = tsr_mem_write(dev, b->addr, tmp, b->size);
        if (rc)
            tsr_err_prefix(rc, "buffer %s: ", b->name);
    }
    free(tmp);
    return rc;
}

/* Read buffer b from the device into DIR/NAME.bin. */
static int write_output(tsr_device_t *dev, const tsr_asm_buffer_t *b, const tsr_cli_prog_opts_t *o)
{
    uint8_t *tmp = malloc((size_t)b->size);
    if (!tmp)
        return tsr_err(TSR_ENOMEM, "out of memory");
    int rc = tsr_mem_read(dev, b->addr, tmp, b->size);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", o->out_dir, b->name);
    FILE *f = rc ? NULL : fopen(path, "wb");
    if (!rc && (!f || fwrite(tmp, 1, (size_t)b->size, f) != b->size)) {
        rc = tsr_err(TSR_EIO, "%s: cannot write: %s", path, strerror(errno));
        if (f)
            fclose(f);
    } else if (!rc && fclose(f)) {
        rc = tsr_err(TSR_EIO, "%s: write error", path);
    }
    free(tmp);
    if (!rc && !o->quiet)
        printf("wrote %s (%llu bytes)\n", path, (unsigned long long)b->size);
    return rc;
}

int tsr_cli_run(int argc, char **argv)
{
    tsr_cli_prog_opts_t o = {.b = {.cfgname = "default", .backend = "fsim"}, .out_dir = ".", .timeout_ms = -1};
    int i = tsr_cli_prog_parse(argc, argv, "run", run_help, &o);
    if (i < 0)
        return i == -2 ? 0 : 2;
    if (i != argc - 1)
        return tsr_cli_usage("run", "expected one PROGRAM.s");
    tsr_config_t cfg;
    tsr_program_t p = {0};
    tsr_device_t *dev = NULL;
    int rc = tsr_config_load(o.b.cfgname, &cfg);
    if (!rc)
        rc = tsr_asm_parse_file(&cfg, argv[i], &p);
    tsr_device_opts_t dopts = tsr_cli_devopts;
    dopts.seed = o.b.seed;
    dopts.rtl.verbose = 1;
    if (!rc && !(rc = tsr_device_open(o.b.backend, &cfg, &dopts, &dev)))
        rc = upload(dev, &cfg, &p, argv[i]);
    double t0 = tsr_now_s();
    if (!rc && !(rc = tsr_submit(dev, p.insns, p.ninsns)))
        rc = tsr_wait(dev, (int)o.timeout_ms);
    double t1 = tsr_now_s();
    for (size_t k = 0; !rc && k < p.nbufs; k++)
        if (p.bufs[k].is_output)
            rc = write_output(dev, &p.bufs[k], &o);
    if (!rc && !o.quiet) {
        tsr_counters_t ctr;
        tsr_read_counters(dev, &ctr);
        printf("%s: %zu instructions on %s in %.3f s\n", argv[i], p.ninsns, o.b.backend, t1 - t0);
        tsr_counters_print(&ctr, stdout);
    }
    tsr_device_close(dev);
    tsr_program_free(&p);
    return rc ? tsr_cli_fail(rc) : 0;
}
