/*
 * tsr_multidev: a system of K Tessera devices (issue 26). Each device is
 * its own driver instance (fsim, rtl or systemc; any config per device),
 * with its own DRAM; the devices and the host are joined by a modelled link
 * of bytes_per_cycle and a latency per transfer, the pipeline planner's
 * link model (tsr_pipeplan.h): moving b bytes costs latency + b /
 * bytes_per_cycle cycles, paid by BOTH ends (the sender's DMA and the
 * receiver's). A thin layer above the driver: transfers are host-mediated
 * (read from device A's DRAM, write to device B's), and the link's cycles
 * are counted by the model per device, not simulated. With a shared link
 * (tsr_mdev_set_link_mode) the executor replays its steps on a SystemC/TLM
 * interconnect that times the contention (tsr_link.h; see the guide,
 * docs/guide/several-devices.md).
 *
 * Threads: a device is driven by one thread at a time. The SystemC backend
 * has one simulation kernel per process (sim/systemc/tsr_sc.h), so its runs
 * (and the sampled backend's, which runs on it)
 * are serialised through tsr_mdev_run_lock (device cycles, not wall time,
 * are the measure). An rtl device is opened as backend rtlproc, a child
 * process per device (driver/tsr_rtlproc.h: one process cannot hold two
 * Verilated models), so rtl and fsim devices run concurrently.
 */
#ifndef TSR_MULTIDEV_H
#define TSR_MULTIDEV_H

#include <stdint.h>

#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_link.h"

#define TSR_MDEV_MAX 64 /* devices in a system (the planner's TSR_PP_MAX_DEVICES); more are refused */

typedef struct tsr_mdev tsr_mdev_t;

/* K devices: device d on backends[d] (NULL or a NULL entry: "fsim") with
 * cfgs[d] and opts[d] (opts NULL: defaults for all). Link: bytes_per_cycle
 * > 0, latency >= 0. Refused (one line, nothing opened): K outside
 * 1..TSR_MDEV_MAX, a bad link, more than one sampled device (its RTL
 * windows are in-process Verilated models); a device that fails to open is named
 * ("device 2 (systemc, 1x32x32): ..."). */
int tsr_mdev_open(int k, const char *const *backends, const tsr_config_t *cfgs, const tsr_device_opts_t *opts,
                  double bytes_per_cycle, double latency, tsr_mdev_t **out);
void tsr_mdev_close(tsr_mdev_t *m);

int tsr_mdev_count(const tsr_mdev_t *m);
tsr_device_t *tsr_mdev_device(const tsr_mdev_t *m, int d);
const tsr_config_t *tsr_mdev_config(const tsr_mdev_t *m, int d);
const char *tsr_mdev_backend(const tsr_mdev_t *m, int d);
/* Device DRAM bytes (the open option, default 1 GiB). */
uint64_t tsr_mdev_dram(const tsr_mdev_t *m, int d);
double tsr_mdev_link_bw(const tsr_mdev_t *m);
double tsr_mdev_link_latency(const tsr_mdev_t *m);

/* Cycles of one transfer of n bytes: latency + n / bytes_per_cycle (0 for n = 0). */
double tsr_mdev_link_cycles(const tsr_mdev_t *m, uint64_t n);

/* Host-mediated copy of n bytes from device `from` (address src) to device
 * `to` (address dst): read into host memory, written to the other DRAM.
 * Either end may be -1, the host (its pointer then host_buf). Both device
 * ends are charged tsr_mdev_link_cycles(n). Errors name the device. */
int tsr_mdev_copy(tsr_mdev_t *m, int from, uint64_t src, int to, uint64_t dst, uint64_t n, void *host_buf);
/* Charge device d one end of an n-byte transfer (d = -1: the host, not counted). Thread-safe. */
void tsr_mdev_charge(tsr_mdev_t *m, int d, uint64_t n);
/* Link cycles and bytes charged to device d since open or tsr_mdev_clear_link. */
double tsr_mdev_link_spent(const tsr_mdev_t *m, int d, uint64_t *bytes);
void tsr_mdev_clear_link(tsr_mdev_t *m);

/* The link's kind. TSR_LINK_P2P (the default): a link per device, the
 * planner's model; transfers are charged as above, not simulated.
 * TSR_LINK_SHARED: one link for every device and the host; the pipelined
 * executor replays its steps on the SystemC interconnect (tsr_link.h), so
 * transfers that overlap in time wait for each other. Refused (one line)
 * when the program has no systemc layer. */
int tsr_mdev_set_link_mode(tsr_mdev_t *m, tsr_link_mode_t mode);
tsr_link_mode_t tsr_mdev_link_mode(const tsr_mdev_t *m);
/* tsr_link_replay with the system's link, serialised with the systemc
 * devices' runs (one SystemC kernel per process). p's bandwidth and latency
 * are set from the system's; its mode is the caller's (a shared system
 * replays p2p too, for the period without contention). */
int tsr_mdev_link_replay(tsr_mdev_t *m, tsr_link_problem_t *p, tsr_link_result_t *r);

/* Serialise a run on device d's backend when it shares process-wide state
 * (systemc, rtl); nothing for fsim. Every lock is paired with an unlock. */
void tsr_mdev_run_lock(tsr_mdev_t *m, int d);
void tsr_mdev_run_unlock(tsr_mdev_t *m, int d);

/* Return every device but `except` (-1: none) to idle (tsr_device_reset):
 * after a device failed, the others abandon what they were running. The
 * first error, naming the device, or 0. */
int tsr_mdev_reset_all(tsr_mdev_t *m, int except);

#endif
