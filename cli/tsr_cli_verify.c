/* tsr_cli_verify: `tessera verify PROGRAM.s` (tsr_cli_verify.h). */
#include "tsr_cli_verify.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_asm.h"
#include "tsr_cli_common.h"
#include "tsr_error.h"
#include "tsr_verify.h"

static const char *verify_help =
    "usage: tessera verify PROGRAM.s [--config CONFIG]\n"
    "\n"
    "Statically check a program: dependency flags and token balance, deadlock\n"
    "(including full command and token queues), FINISH placement and ordering,\n"
    "on-chip ranges (on the uop contents the buffers get, filled as `run` fills\n"
    "them: uops, random SEED, file), data races between stages (accesses to the\n"
    "same on-chip rows that no token chain orders), STOREs into DRAM a uop LOAD\n"
    "reads, GEMM/ALU uop rows no earlier uop LOAD of the program wrote, and DRAM\n"
    "accesses against the declared buffers. Prints OK or the first error with\n"
    "its instruction index; exit status 0 or 1.\n"
    "  --config CONFIG   config file or preset (default: default)\n";

/* The declared buffers' contents, filled as `run` fills them (zero, random
 * SEED, uops, file) the first time the verifier reads one (it reads only
 * uop kernels), so the uop index checks see what a run would load. */
typedef struct {
    const tsr_config_t *cfg;
    const tsr_program_t *p;
    const char *path;            /* the program file (base of `file` paths) */
    uint8_t **bytes;             /* contents of each buffer, NULL until read */
    int err;                     /* first fill error, or TSR_OK */
    char msg[512];               /* its message */
} decl_image_t;

/* Fill buffer k of the image; on error remember the first message. */
static int decl_fill(decl_image_t *im, size_t k)
{
    const tsr_asm_buffer_t *b = &im->p->bufs[k];
    int rc = TSR_OK;
    if (!(im->bytes[k] = malloc(b->size ? (size_t)b->size : 1)))
        rc = tsr_err(TSR_ENOMEM, "buffer %s: out of memory", b->name);
    else if ((rc = tsr_cli_fill_buffer(im->cfg, b, im->path, im->bytes[k])))
        tsr_err_prefix(rc, "buffer %s: ", b->name);
    if (rc) {
        free(im->bytes[k]);
        im->bytes[k] = NULL;
        if (!im->err) {
            im->err = rc;
            snprintf(im->msg, sizeof im->msg, "%s", tsr_errmsg());
        }
    }
    return rc;
}

static int decl_read(void *ctx, uint64_t addr, void *dst, size_t n)
{
    decl_image_t *im = ctx;
    for (size_t k = 0; k < im->p->nbufs; k++) {
        const tsr_asm_buffer_t *b = &im->p->bufs[k];
        if (addr < b->addr || addr - b->addr > b->size || n > b->size - (addr - b->addr))
            continue;
        int rc = im->bytes[k] ? TSR_OK : decl_fill(im, k);
        if (rc)
            return rc;
        memcpy(dst, im->bytes[k] + (addr - b->addr), n);
        return TSR_OK;
    }
    return TSR_EFAULT;
}

static int program_verify(const tsr_config_t *cfg, const tsr_program_t *p, const char *path)
{
    int rc = TSR_OK;
    size_t nb = p->nbufs ? p->nbufs : 1;
    tsr_region_t *regs = calloc(nb, sizeof *regs);
    decl_image_t im = {cfg, p, path, calloc(nb, sizeof(uint8_t *)), TSR_OK, ""};
    if (!regs || !im.bytes) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < p->nbufs; k++)
        regs[k] = (tsr_region_t){p->bufs[k].addr, p->bufs[k].size, p->bufs[k].name};
    tsr_verify_opts_t vo = {regs, p->nbufs, 1, decl_read, &im};
    rc = tsr_verify(cfg, p->insns, p->ninsns, &vo);
    /* A kernel buffer that could not be filled fails `run` too, and its uops went unchecked. */
    if (!rc && im.err)
        rc = tsr_err(im.err, "%s", im.msg);
out:
    for (size_t k = 0; im.bytes && k < p->nbufs; k++)
        free(im.bytes[k]);
    free(im.bytes);
    free(regs);
    return rc;
}

int tsr_cli_verify(int argc, char **argv)
{
    tsr_cli_prog_opts_t o = {.b = {.cfgname = "default"}};
    int i = tsr_cli_prog_parse(argc, argv, "verify", verify_help, &o);
    if (i < 0)
        return i == -2 ? 0 : 2;
    if (i != argc - 1)
        return tsr_cli_usage("verify", "expected one PROGRAM.s");
    tsr_config_t cfg;
    tsr_program_t p = {0};
    int rc = tsr_config_load(o.b.cfgname, &cfg);
    if (!rc)
        rc = tsr_asm_parse_file(&cfg, argv[i], &p);
    /* Config and parse errors name their file already; verifier errors
     * name only the instruction. */
    if (!rc && (rc = program_verify(&cfg, &p, argv[i])))
        tsr_err_prefix(rc, "%s: ", argv[i]);
    tsr_program_free(&p);
    if (rc)
        return tsr_cli_fail(rc);
    printf("%s: OK\n", argv[i]);
    return 0;
}
