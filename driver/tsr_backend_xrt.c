/*
 * tsr_backend_xrt: Alveo cards and Zynq boards running XRT (libxrt, C API).
 * The xclbin (TESSERA_XCLBIN, built by scripts/fpga/vitis) holds the RTL
 * packaged as the Vitis RTL kernel "tessera" (kernel.xml from
 * `tessera config emit-kernel-xml`). Device DRAM is one XRT buffer object
 * in the memory bank of the kernel's AXI4 master (argument 0's group),
 * mapped into the host; buffers are carved out of it with the simulators'
 * allocator (tsr_dram over the mapping) and synced with xrtBOSync. Runs go
 * through XRT: xrtRunSetArg with the arguments in register-map order
 * (tsr_kernel_args: insns, count), xrtRunStart, xrtRunWaitFor. The kernel
 * is opened exclusively, so Tessera's own registers (status, tokens,
 * units, counters, soft reset) are read and written with
 * xrtKernelReadRegister/WriteRegister through the same register sequence
 * (driver/tsr_regseq.c) the rtl and zynq backends run.
 *
 * Selection (environment): XILINX_XRT (required: XRT's C API aborts the
 * process without it), TESSERA_XCLBIN, TESSERA_XRT_DEVICE (index, 0).
 * XCL_EMULATION_MODE=sw_emu is refused (its shim hangs without a
 * sw_emu xclbin). Built only when libxrt-dev is found (TSR_HAVE_XRT).
 */
#ifdef TSR_HAVE_XRT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>

#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_regseq.h"

#define KERNEL_NAME TSR_KERNEL_NAME
#define DRAM_MAX (256ull << 20) /* default device DRAM: one 256 MiB buffer object */
#define WAIT_MS 10              /* xrtRunWaitFor slice between budget/watchdog checks */

typedef struct {
    xrtDeviceHandle dev;  /* the card */
    xrtKernelHandle k;    /* the kernel, opened exclusively */
    xrtBufferHandle bo;   /* device DRAM */
    xrtRunHandle run;     /* the run in progress, or NULL */
    uint64_t base;        /* the buffer object's device address */
} xrt_t;

static int x_read32(void *ctx, uint32_t off, uint32_t *v)
{
    if (xrtKernelReadRegister(((xrt_t *)ctx)->k, off, v))
        return tsr_err(TSR_EBACKEND, "xrt: reading kernel register 0x%x failed", off);
    return TSR_OK;
}

static int x_write32(void *ctx, uint32_t off, uint32_t v)
{
    if (xrtKernelWriteRegister(((xrt_t *)ctx)->k, off, v))
        return tsr_err(TSR_EBACKEND, "xrt: writing kernel register 0x%x failed", off);
    return TSR_OK;
}

static int x_sync(xrt_t *x, uint64_t addr, uint64_t n, enum xclBOSyncDirection dir)
{
    if (xrtBOSync(x->bo, dir, (size_t)n, (size_t)(addr - x->base)))
        return tsr_err(TSR_EBACKEND, "xrt: xrtBOSync of [0x%llx, +%llu) failed", (unsigned long long)addr,
                       (unsigned long long)n);
    return TSR_OK;
}
static int x_sync_dev(void *ctx, uint64_t addr, uint64_t n) { return x_sync(ctx, addr, n, XCL_BO_SYNC_BO_TO_DEVICE); }
static int x_sync_cpu(void *ctx, uint64_t addr, uint64_t n) { return x_sync(ctx, addr, n, XCL_BO_SYNC_BO_FROM_DEVICE); }

static void x_close(void *ctx)
{
    xrt_t *x = ctx;
    if (!x)
        return;
    if (x->run)
        xrtRunClose(x->run);
    if (x->bo)
        xrtBOFree(x->bo);
    if (x->k)
        xrtKernelClose(x->k);
    if (x->dev)
        xrtDeviceClose(x->dev);
    free(x);
}

static const tsr_regio_ops_t xrt_ops = {
    .name = "xrt",
    .read32 = x_read32,
    .write32 = x_write32,
    .wait_irq = NULL, /* runs complete through xrtRunWaitFor (x_wait) */
    .sync_for_device = x_sync_dev,
    .sync_for_cpu = x_sync_cpu,
    .close = x_close,
};

/* Everything XRT needs before its first call, checked so that a missing
 * piece is an error message, not an abort inside the library. */
static int preflight(void)
{
    const char *xx = getenv("XILINX_XRT"), *em = getenv("XCL_EMULATION_MODE");
    if (!xx || !*xx)
        return tsr_err(TSR_EBACKEND, "xrt: XILINX_XRT is not set (source XRT's setup.sh, or point it at a directory "
                                     "whose lib/ holds libxrt_coreutil; XRT's C API aborts without it)");
    if (em && !strcmp(em, "sw_emu"))
        return tsr_err(TSR_EBACKEND, "xrt: XCL_EMULATION_MODE=sw_emu is not supported (the RTL kernel has no "
                                     "software model; use hw_emu with an hw_emu xclbin, or a board)");
    return TSR_OK;
}

static int x_open(const tsr_config_t *cfg, const tsr_device_opts_t *opts, void **state)
{
    int rc = preflight();
    if (rc)
        return rc;
    tsr_regseq_t *s;
    if ((rc = tsr_regseq_new("xrt", cfg, opts, &s)))
        return rc;
    xrt_t *x = calloc(1, sizeof *x);
    if (!x) {
        tsr_regseq_close(s);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    s->io.ops = &xrt_ops;
    s->io.ctx = x;
    s->io.slice = WAIT_MS;
    s->io.slice_unit = "ms";
    const char *di = getenv("TESSERA_XRT_DEVICE"), *xclbin = getenv("TESSERA_XCLBIN");
    unsigned idx = di && *di ? (unsigned)strtoul(di, NULL, 0) : 0;
    uint64_t size = opts->dram_size && opts->dram_size < DRAM_MAX ? opts->dram_size : DRAM_MAX;
    xuid_t uuid;
    if (!(x->dev = xrtDeviceOpen(idx))) {
        rc = tsr_err(TSR_EBACKEND, "xrt: cannot open device %u (no Alveo card or XRT-managed Zynq here, or its "
                                   "driver is not loaded): %s", idx, strerror(errno));
        goto fail;
    }
    if (!xclbin || !*xclbin || access(xclbin, R_OK)) {
        rc = tsr_err(TSR_EBACKEND, "xrt: device %u is open but TESSERA_XCLBIN (%s) does not name a readable xclbin "
                                   "(build one with scripts/fpga/vitis on a machine with Vitis)",
                     idx, xclbin && *xclbin ? xclbin : "unset");
        goto fail;
    }
    if (xrtDeviceLoadXclbinFile(x->dev, xclbin) || xrtDeviceGetXclbinUUID(x->dev, uuid)) {
        rc = tsr_err(TSR_EBACKEND, "xrt: loading %s onto device %u failed", xclbin, idx);
        goto fail;
    }
    if (!(x->k = xrtPLKernelOpenExclusive(x->dev, uuid, KERNEL_NAME))) {
        rc = tsr_err(TSR_EBACKEND, "xrt: %s has no kernel \"%s\" (or it is in use by another process)", xclbin,
                     KERNEL_NAME);
        goto fail;
    }
    int grp = xrtKernelArgGroupId(x->k, 0);
    if (grp < 0 || !(x->bo = xrtBOAlloc(x->dev, (size_t)size, XRT_BO_FLAGS_NONE, (xrtMemoryGroup)grp))) {
        rc = tsr_err(TSR_EBACKEND, "xrt: cannot allocate %llu bytes of device memory in bank group %d",
                     (unsigned long long)size, grp);
        goto fail;
    }
    uint8_t *map = xrtBOMap(x->bo);
    x->base = xrtBOAddress(x->bo);
    if (!map) {
        rc = tsr_err(TSR_EBACKEND, "xrt: cannot map the device memory buffer");
        goto fail;
    }
    if (x->base + size > 0x100000000ull) {
        rc = tsr_err(TSR_EBACKEND, "xrt: device memory at 0x%llx is beyond the first 4 GiB the kernel's 32-bit "
                                   "AXI4 master reaches (connect it to a bank mapped below 4 GiB)",
                     (unsigned long long)x->base);
        goto fail;
    }
    if ((rc = tsr_dram_create_backed(x->base, size, map, &s->io.dram)))
        goto fail;
    *state = s;
    return TSR_OK;
fail:
    tsr_regseq_close(s);
    return rc;
}

/* Start through XRT: the arguments by index, in register-map order. */
static int x_start(void *st, uint64_t insn_addr, uint32_t count, uint64_t bound)
{
    tsr_regseq_t *rs = st;
    xrt_t *x = rs->io.ctx;
    size_t na;
    const tsr_kernel_arg_t *args = tsr_kernel_args(&na);
    int rc = tsr_regseq_prepare(rs, insn_addr, count, bound);
    if (rc)
        return rc;
    if (x->run)
        xrtRunClose(x->run);
    if (!(x->run = xrtRunOpen(x->k)))
        return tsr_err(TSR_EBACKEND, "xrt: xrtRunOpen failed");
    for (size_t i = 0; i < na; i++) {
        int bad = args[i].is_pointer ? xrtRunSetArg(x->run, (int)i, (uint64_t)insn_addr)
                                     : xrtRunSetArg(x->run, (int)i, (unsigned)count);
        if (bad)
            return tsr_err(TSR_EBACKEND, "xrt: setting argument %zu (%s) failed", i, args[i].name);
    }
    if (xrtRunStart(x->run))
        return tsr_err(TSR_EBACKEND, "xrt: xrtRunStart failed");
    rs->started = 1;
    return TSR_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int x_wait(void *st, int timeout_ms)
{
    tsr_regseq_t *rs = st;
    xrt_t *x = rs->io.ctx;
    double deadline = now_ms() + timeout_ms;
    if (!rs->started || !x->run)
        return tsr_err(TSR_EINVAL, "nothing started");
    for (;;) {
        enum ert_cmd_state stt = xrtRunWaitFor(x->run, WAIT_MS);
        if (stt == ERT_CMD_STATE_COMPLETED)
            return tsr_regseq_finish(rs);
        if (stt == ERT_CMD_STATE_ERROR || stt == ERT_CMD_STATE_ABORT || stt == ERT_CMD_STATE_TIMEOUT) {
            rs->started = 0;
            return tsr_err(TSR_EBACKEND, "xrt: the run ended in XRT state %d", (int)stt);
        }
        int rc = tsr_regseq_check_progress(rs);
        if (rc) {
            rs->started = 0;
            return rc;
        }
        if (timeout_ms >= 0 && now_ms() >= deadline)
            return tsr_err(TSR_ETIMEOUT, "run still in progress after %d ms", timeout_ms);
    }
}

const tsr_backend_ops_t tsr_backend_xrt = {
    .name = "xrt",
    .open = x_open,
    .start = x_start,
    .wait = x_wait,
    TSR_REGSEQ_BACKEND_OPS,
};
#else
typedef int tsr_backend_xrt_not_built; /* libxrt-dev not found: no xrt backend (ISO C wants a declaration) */
#endif
