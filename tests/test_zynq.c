/*
 * test_zynq: the `zynq` backend (Linux UIO registers + u-dma-buf DRAM)
 * without a board. A fake sysfs/dev tree in a temporary directory holds
 * /sys/class/uio/uio0 (name, map0 size), /sys/class/u-dma-buf/udmabuf0
 * (phys_addr, size, sync files) and the two device files, which are plain
 * files mapped shared, so the backend's register window and DMA buffer are
 * memory this test can watch. A device thread plays the accelerator on the
 * register window: on ap_start it takes INSN_ADDR/INSN_COUNT, runs the
 * stream with the golden model (fsim) on the bytes it finds in the DMA
 * buffer at those physical addresses, writes the results back and raises
 * ap_done. Generated programs (tsr_gen, seeds printed) must then give the
 * output of the independent reference machine (tsr_ref through the "ref"
 * executor) byte for byte, which fails if the register sequence writes the
 * wrong offsets or values, if buffers are not placed at the u-dma-buf's
 * physical addresses, or if completion is misread. The sync files must
 * have been written (the cache maintenance), and without the devices the
 * backend must fail naming what is missing.
 *
 * What this does not cover: a real UIO mapping (uncached device memory),
 * real cache maintenance and the accelerator's own ap_ctrl_hs logic (the
 * rtl backend runs that, through the same register sequence).
 */
#define _DEFAULT_SOURCE /* mkdtemp, usleep */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsr_error.h"
#include "tsr_fsim.h"
#include "tsr_gen.h"
#include "tsr_testenv.h"

#define PHYS TSR_GEN_BASE_ADDR /* the fake u-dma-buf's physical address: where tsr_gen places buffers */
#define DMA_BYTES (16u << 20)
#define REG_BYTES 4096u

static char root[256];

static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void get(const char *rel, char *buf, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (f) {
        if (!fgets(buf, (int)n, f))
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
}

static void *map_dev(const char *rel, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)len), 0);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    assert_true(p != MAP_FAILED);
    return p;
}

/* The fake accelerator. */
typedef struct {
    volatile uint32_t *regs;
    uint8_t *mem;
    tsr_config_t cfg;
    volatile int stop;
    int runs;          /* streams run */
    int bad_hi;        /* INSN_ADDR_HI was not 0 at a start */
} fake_t;

static void fake_run(fake_t *f)
{
    uint32_t addr = f->regs[TSR_REG_INSN_ADDR / 4], count = f->regs[TSR_REG_INSN_COUNT / 4];
    f->bad_hi |= f->regs[TSR_REG_INSN_ADDR_HI / 4] != 0;
    tsr_dram_t *d = NULL;
    tsr_fsim_t *s = NULL;
    int rc = tsr_dram_create(PHYS, DMA_BYTES, &d);
    if (!rc && !(rc = tsr_dram_alloc_at(d, PHYS, DMA_BYTES)) && !(rc = tsr_dram_write(d, PHYS, f->mem, DMA_BYTES)) &&
        !(rc = tsr_fsim_create(&f->cfg, d, &s)) && !(rc = tsr_fsim_run(s, addr, count, 0)))
        rc = tsr_dram_read(d, PHYS, f->mem, DMA_BYTES);
    if (rc)
        fprintf(stderr, "fake device: run failed: %s\n", tsr_errmsg());
    tsr_fsim_destroy(s);
    tsr_dram_destroy(d);
    f->regs[tsr_cnt_offset(TSR_CNT_CYCLES) / 4] = 1000u + count;
    f->regs[TSR_REG_STATUS / 4] = TSR_STATUS_DONE | (rc ? TSR_STATUS_ERR : 0);
    __sync_synchronize();
    f->regs[TSR_REG_AP_CTRL / 4] = TSR_AP_DONE | TSR_AP_READY | TSR_AP_IDLE;
    f->runs++;
}

static void *fake_main(void *arg)
{
    fake_t *f = arg;
    while (!f->stop) {
        __sync_synchronize();
        if (f->regs[TSR_REG_AP_CTRL / 4] & TSR_AP_START)
            fake_run(f);
        if (f->regs[TSR_REG_SOFT_RESET / 4] & TSR_SOFT_RESET) {
            f->regs[TSR_REG_SOFT_RESET / 4] = 0;
            f->regs[TSR_REG_STATUS / 4] = 0;
            f->regs[TSR_REG_AP_CTRL / 4] = TSR_AP_IDLE;
        }
        usleep(50);
    }
    return NULL;
}

static void make_tree(int with_uio, int with_dma)
{
    snprintf(root, sizeof root, "/tmp/tsr_zynq_XXXXXX");
    assert_non_null(mkdtemp(root));
    put("sys/class/uio/uio0/name", "other_ip\n"); /* a UIO device that is not ours comes first */
    put("sys/class/uio/uio0/maps/map0/size", "0x00001000\n");
    if (with_uio) {
        put("sys/class/uio/uio1/name", "tessera\n");
        put("sys/class/uio/uio1/maps/map0/size", "0x00001000\n");
    }
    if (with_dma) {
        char v[64];
        snprintf(v, sizeof v, "0x%llx\n", (unsigned long long)PHYS);
        put("sys/class/u-dma-buf/udmabuf0/phys_addr", v);
        snprintf(v, sizeof v, "%u\n", DMA_BYTES);
        put("sys/class/u-dma-buf/udmabuf0/size", v);
        const char *sync[] = {"sync_offset", "sync_size", "sync_direction", "sync_for_cpu", "sync_for_device"};
        for (size_t i = 0; i < 5; i++) {
            char rel[128];
            snprintf(rel, sizeof rel, "sys/class/u-dma-buf/udmabuf0/%s", sync[i]);
            put(rel, "0\n");
        }
    }
    put("dev/.keep", "");
    char s[300];
    snprintf(s, sizeof s, "%s/sys", root);
    setenv("TESSERA_SYSFS", s, 1);
    snprintf(s, sizeof s, "%s/dev", root);
    setenv("TESSERA_DEVFS", s, 1);
}

static void remove_tree(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

/* Without the devices: a clear error naming what is missing. */
static void test_missing(void **st)
{
    (void)st;
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    assert_int_equal(tsr_test_config("tiny", &cfg), 0);
    make_tree(0, 0);
    assert_int_equal(tsr_device_open("zynq", &cfg, NULL, &dev), TSR_EBACKEND);
    assert_non_null(strstr(tsr_errmsg(), "no UIO device named \"tessera\""));
    remove_tree();
    make_tree(1, 0);
    map_dev("dev/uio1", REG_BYTES);
    assert_int_equal(tsr_device_open("zynq", &cfg, NULL, &dev), TSR_EBACKEND);
    assert_non_null(strstr(tsr_errmsg(), "u-dma-buf"));
    remove_tree();
    assert_null(dev);
}

static void test_programs(void **st)
{
    (void)st;
    tsr_config_t cfg;
    assert_int_equal(tsr_test_config("tiny", &cfg), 0);
    make_tree(1, 1);
    fake_t f = {0};
    f.regs = map_dev("dev/uio1", REG_BYTES);
    f.mem = map_dev("dev/udmabuf0", DMA_BYTES);
    f.cfg = cfg;
    f.regs[TSR_REG_AP_CTRL / 4] = TSR_AP_IDLE;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fake_main, &f), 0);
    uint64_t seed0 = tsr_test_seed("TSR_SEED", 0x5eed2c0);
    int n = 6;
    for (int i = 0; i < n; i++) {
        uint64_t seed = seed0 + (uint64_t)i;
        tsr_gen_prog_t p;
        assert_int_equal(tsr_gen_program(seed, &cfg, NULL, &p), 0);
        uint8_t *a[TSR_GEN_MAX_BUFS], *b[TSR_GEN_MAX_BUFS];
        tsr_gen_exec_t ez = {.name = "zynq"}, er = {.name = "ref"};
        int rc = tsr_gen_run(&ez, &p, p.insns, p.ninsns, a);
        if (rc)
            fail_msg("seed 0x%llx: zynq run failed: %s", (unsigned long long)seed, tsr_errmsg());
        assert_int_equal(tsr_gen_run(&er, &p, p.insns, p.ninsns, b), 0);
        tsr_gen_diff_t d;
        if (tsr_gen_compare(&p, a, b, &d))
            fail_msg("seed 0x%llx: buffer %s byte %llu: zynq %u, reference %u (%llu bytes differ)",
                     (unsigned long long)seed, p.bufs[d.buf].name, (unsigned long long)d.offset, d.a, d.b,
                     (unsigned long long)d.nbytes);
        tsr_gen_outputs_free(a);
        tsr_gen_outputs_free(b);
        tsr_gen_free(&p);
    }
    f.stop = 1;
    pthread_join(th, NULL);
    printf("zynq over a fake UIO + u-dma-buf: %d programs (seeds 0x%llx..) equal the reference, %d runs\n", n,
           (unsigned long long)seed0, f.runs);
    assert_int_equal(f.runs, n);
    assert_int_equal(f.bad_hi, 0);
    /* Cache maintenance went through u-dma-buf's sync files: the last
     * access was a read of the outputs (sync_for_cpu, direction 2). */
    char v[64];
    get("sys/class/u-dma-buf/udmabuf0/sync_for_device", v, sizeof v);
    assert_string_equal(v, "1");
    get("sys/class/u-dma-buf/udmabuf0/sync_for_cpu", v, sizeof v);
    assert_string_equal(v, "1");
    get("sys/class/u-dma-buf/udmabuf0/sync_direction", v, sizeof v);
    assert_string_equal(v, "2");
    munmap((void *)f.regs, REG_BYTES);
    munmap(f.mem, DMA_BYTES);
    remove_tree();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing),
        cmocka_unit_test(test_programs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
