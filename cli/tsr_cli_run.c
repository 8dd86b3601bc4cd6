/* tsr_cli_run: the CLI's device opening for net and bench (tsr_cli_run.h). */
#include "tsr_cli_run.h"

#include <stddef.h>

int tsr_cli_open_devices(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *base, int check,
                         uint64_t seed, tsr_device_t **dev, tsr_device_t **chk)
{
    *dev = NULL;
    *chk = NULL;
    tsr_device_opts_t dopts = *base;
    dopts.rtl.verbose = 1;
    int rc = tsr_device_open(backend, cfg, &dopts, dev);
    if (!rc && check) {
        tsr_device_opts_t co = {.seed = seed * 2654435761u + 1}; /* random legal stage interleaving */
        rc = tsr_device_open("fsim", cfg, &co, chk);
    }
    if (rc) {
        if (*dev)
            tsr_device_close(*dev);
        *dev = NULL;
        *chk = NULL;
    }
    return rc;
}
