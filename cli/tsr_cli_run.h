/*
 * tsr_cli_run: what the CLI's network and bench commands share to get
 * their devices: the device of the chosen backend (with the common device
 * flags and the RTL model build's progress on stderr) and, for --check, an
 * fsim device with a random legal stage interleaving to run the same work
 * on. One place, so `net` and `bench --kind resnet18` open and check the
 * same way.
 */
#ifndef TSR_CLI_RUN_H
#define TSR_CLI_RUN_H

#include <stdint.h>

#include "tsr_config.h"
#include "tsr_driver.h"

/* *dev on backend with base's options (rtl.verbose set); with check, *chk
 * an fsim device whose interleaving seed derives from seed. On error
 * nothing is left open and both are NULL. */
int tsr_cli_open_devices(const char *backend, const tsr_config_t *cfg, const tsr_device_opts_t *base, int check,
                         uint64_t seed, tsr_device_t **dev, tsr_device_t **chk);

#endif
