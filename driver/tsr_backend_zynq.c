/*
 * tsr_backend_zynq: PYNQ-class Zynq boards without XRT. The accelerator's
 * AXI4-Lite registers (on a GP port) are a Linux UIO device, mapped from
 * /dev/uioN; device DRAM is one physically contiguous, cached u-dma-buf
 * buffer (/dev/udmabufN, CMA-backed) whose physical addresses are the
 * accelerator's AXI addresses (on an HP port), with explicit cache
 * maintenance through u-dma-buf's sysfs sync files: sync_for_device after
 * every host write (so before ap_start), sync_for_cpu before every host
 * read (so after ap_done). Buffers are carved out of the u-dma-buf with
 * the same allocator the simulators use (tsr_dram over external memory).
 * The register sequence is driver/tsr_regseq.c, the code the `rtl`
 * backend runs against the Verilated model. Completion is polled
 * (AP_CTRL.ap_done): a UIO interrupt needs the IP's interrupt wired in the
 * block design and is not required.
 *
 * Selection (environment): TESSERA_UIO, the UIO device's name in
 * /sys/class/uio/uioN/name (default "tessera"); TESSERA_UDMABUF, the
 * u-dma-buf device (default "udmabuf0"); TESSERA_SYSFS and TESSERA_DEVFS
 * replace /sys and /dev (tests supply a fake tree).
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_regseq.h"

#define MAX_UIO 64 /* uio0 .. uio63 are searched */

typedef struct {
    volatile uint32_t *regs;  /* the UIO register window */
    size_t regs_len;          /* its mapped length */
    uint8_t *mem;             /* the u-dma-buf mapping */
    uint64_t mem_len;         /* its length */
    uint64_t phys;            /* its physical (device) address */
    char dmadir[512];         /* sysfs directory of the u-dma-buf (sync files) */
} zynq_t;

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* First line of a sysfs file, without the newline; 0 if unreadable. */
static int read_line(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

static int read_u64(const char *path, uint64_t *v)
{
    char buf[64], *end;
    if (!read_line(path, buf, sizeof buf))
        return tsr_err(TSR_EBACKEND, "zynq: cannot read %s: %s", path, strerror(errno));
    errno = 0;
    *v = strtoull(buf, &end, 0);
    if (errno || end == buf)
        return tsr_err(TSR_EBACKEND, "zynq: %s holds \"%s\", not a number", path, buf);
    return TSR_OK;
}

static int write_sysfs(const char *dir, const char *file, uint64_t v)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    if (!f)
        return tsr_err(TSR_EIO, "zynq: cannot write %s: %s", path, strerror(errno));
    int bad = fprintf(f, "%llu\n", (unsigned long long)v) < 0;
    bad |= fclose(f) != 0;
    return bad ? tsr_err(TSR_EIO, "zynq: writing %s failed", path) : TSR_OK;
}

static int z_read32(void *ctx, uint32_t off, uint32_t *v)
{
    zynq_t *z = ctx;
    if (off + 4 > z->regs_len || (off & 3))
        return tsr_err(TSR_EINVAL, "zynq: register offset 0x%x outside the %zu-byte window", off, z->regs_len);
    *v = z->regs[off / 4];
    return TSR_OK;
}

static int z_write32(void *ctx, uint32_t off, uint32_t v)
{
    zynq_t *z = ctx;
    if (off + 4 > z->regs_len || (off & 3))
        return tsr_err(TSR_EINVAL, "zynq: register offset 0x%x outside the %zu-byte window", off, z->regs_len);
    __sync_synchronize(); /* DRAM writes (and their sync) before the register write that starts the device */
    z->regs[off / 4] = v;
    return TSR_OK;
}

/* u-dma-buf manual sync: sync_offset, sync_size, sync_direction (1 to the
 * device, 2 from the device), then 1 into sync_for_device / sync_for_cpu. */
static int z_sync(zynq_t *z, uint64_t addr, uint64_t n, int to_dev)
{
    if (addr < z->phys || n > z->mem_len || addr - z->phys > z->mem_len - n)
        return tsr_err(TSR_EFAULT, "zynq: sync of [0x%llx, +%llu) outside the DMA buffer", (unsigned long long)addr,
                       (unsigned long long)n);
    int rc;
    if ((rc = write_sysfs(z->dmadir, "sync_offset", addr - z->phys)) || (rc = write_sysfs(z->dmadir, "sync_size", n)) ||
        (rc = write_sysfs(z->dmadir, "sync_direction", to_dev ? 1 : 2)) ||
        (rc = write_sysfs(z->dmadir, to_dev ? "sync_for_device" : "sync_for_cpu", 1)))
        return rc;
    return TSR_OK;
}

static int z_sync_dev(void *ctx, uint64_t addr, uint64_t n) { return z_sync(ctx, addr, n, 1); }
static int z_sync_cpu(void *ctx, uint64_t addr, uint64_t n) { return z_sync(ctx, addr, n, 0); }

static void z_close(void *ctx)
{
    zynq_t *z = ctx;
    if (!z)
        return;
    if (z->regs)
        munmap((void *)z->regs, z->regs_len);
    if (z->mem)
        munmap(z->mem, z->mem_len);
    free(z);
}

static const tsr_regio_ops_t uio_ops = {
    .name = "uio",
    .read32 = z_read32,
    .write32 = z_write32,
    .wait_irq = NULL, /* poll AP_CTRL */
    .sync_for_device = z_sync_dev,
    .sync_for_cpu = z_sync_cpu,
    .close = z_close,
};

static int map_file(const char *path, size_t len, void **out)
{
    int fd = open(path, O_RDWR); /* no O_SYNC: cached, with explicit syncs */
    if (fd < 0)
        return tsr_err(TSR_EBACKEND, "zynq: cannot open %s: %s", path, strerror(errno));
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return tsr_err(TSR_EBACKEND, "zynq: cannot map %zu bytes of %s: %s", len, path, strerror(errno));
    *out = p;
    return TSR_OK;
}

/* The UIO device named name: its register window mapped. */
static int open_uio(zynq_t *z, const char *sys, const char *dev, const char *name)
{
    char path[600], buf[128];
    for (int i = 0; i < MAX_UIO; i++) {
        snprintf(path, sizeof path, "%s/class/uio/uio%d/name", sys, i);
        if (!read_line(path, buf, sizeof buf) || strcmp(buf, name))
            continue;
        uint64_t size;
        int rc;
        snprintf(path, sizeof path, "%s/class/uio/uio%d/maps/map0/size", sys, i);
        if ((rc = read_u64(path, &size)))
            return rc;
        if (size < TSR_REG_MAP_BYTES)
            return tsr_err(TSR_EBACKEND, "zynq: UIO %s (uio%d) maps %llu bytes, the register map needs %u", name, i,
                           (unsigned long long)size, (unsigned)TSR_REG_MAP_BYTES);
        snprintf(path, sizeof path, "%s/uio%d", dev, i);
        void *p;
        if ((rc = map_file(path, (size_t)size, &p)))
            return rc;
        z->regs = p;
        z->regs_len = (size_t)size;
        return TSR_OK;
    }
    return tsr_err(TSR_EBACKEND,
                   "zynq: no UIO device named \"%s\" under %s/class/uio (load the bitstream and a device-tree "
                   "overlay binding the accelerator's AXI4-Lite window to generic-uio, or set TESSERA_UIO to its "
                   "name)",
                   name, sys);
}

static int open_udmabuf(zynq_t *z, const char *sys, const char *dev, const char *name)
{
    char path[600];
    int rc;
    snprintf(z->dmadir, sizeof z->dmadir, "%s/class/u-dma-buf/%s", sys, name);
    if (access(z->dmadir, F_OK))
        return tsr_err(TSR_EBACKEND,
                       "zynq: no u-dma-buf device %s (%s missing: load the u-dma-buf module, e.g. `insmod "
                       "u-dma-buf.ko udmabuf0=67108864`, or set TESSERA_UDMABUF)",
                       name, z->dmadir);
    snprintf(path, sizeof path, "%s/phys_addr", z->dmadir);
    if ((rc = read_u64(path, &z->phys)))
        return rc;
    snprintf(path, sizeof path, "%s/size", z->dmadir);
    if ((rc = read_u64(path, &z->mem_len)))
        return rc;
    if (!z->mem_len || z->phys + z->mem_len > 0x100000000ull)
        return tsr_err(TSR_EBACKEND,
                       "zynq: u-dma-buf %s at 0x%llx, %llu bytes: the accelerator's AXI4 master reaches the "
                       "first 4 GiB only",
                       name, (unsigned long long)z->phys, (unsigned long long)z->mem_len);
    snprintf(path, sizeof path, "%s/%s", dev, name);
    void *p;
    if ((rc = map_file(path, (size_t)z->mem_len, &p)))
        return rc;
    z->mem = p;
    return TSR_OK;
}

static int z_open(const tsr_config_t *cfg, const tsr_device_opts_t *opts, void **state)
{
    const char *sys = env_or("TESSERA_SYSFS", "/sys"), *dev = env_or("TESSERA_DEVFS", "/dev");
    tsr_regseq_t *s;
    int rc = tsr_regseq_new("zynq", cfg, opts, &s);
    if (rc)
        return rc;
    zynq_t *z = calloc(1, sizeof *z);
    if (!z) {
        tsr_regseq_close(s);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    s->io.ops = &uio_ops;
    s->io.ctx = z;
    s->io.slice_unit = "polls";
    if ((rc = open_uio(z, sys, dev, env_or("TESSERA_UIO", "tessera"))) ||
        (rc = open_udmabuf(z, sys, dev, env_or("TESSERA_UDMABUF", "udmabuf0"))) ||
        (rc = tsr_dram_create_backed(z->phys, z->mem_len, z->mem, &s->io.dram))) {
        tsr_regseq_close(s);
        return rc;
    }
    /* A device left busy by an earlier process: start from idle. */
    uint32_t ap = 0;
    if ((rc = z_read32(z, TSR_REG_AP_CTRL, &ap)) || (!(ap & TSR_AP_IDLE) && (rc = tsr_regseq_reset(s)))) {
        tsr_regseq_close(s);
        return rc;
    }
    *state = s;
    return TSR_OK;
}

const tsr_backend_ops_t tsr_backend_zynq = {
    .name = "zynq",
    .open = z_open,
    .start = tsr_regseq_start,
    .wait = tsr_regseq_wait,
    TSR_REGSEQ_BACKEND_OPS,
};
