/*
 * tsr_streamdump: prints a fingerprint (length and FNV-1a hash of the
 * encoded instructions, and of the uop kernels where the plan exposes them)
 * of the instruction stream every JIT lowering emits for a fixed set of
 * operators and shapes: every layer of ResNet-18 (ImageNet shape), of two
 * small ResNet-18s (stem tap-packed and not), the joined one-submission
 * stream, and direct plans of shapes the networks do not have (depthwise,
 * uint8 and split weights, avg pools, clip, add, matmul), on the default and
 * tiny presets.
 *
 * Not a test: it is the before/after check of a refactoring of the
 * lowerings (the stream builder). Run it on both versions and diff the
 * output; a line that differs names the operator whose stream changed.
 *   tsr_streamdump > before.txt   ... change ...   tsr_streamdump | diff before.txt -
 * A stream changed on purpose must then be shown exact by the operator tests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_conv2d.h"
#include "tsr_eltwise.h"
#include "tsr_error.h"
#include "tsr_graph.h"
#include "tsr_matmul.h"
#include "tsr_netdesc.h"
#include "tsr_pool.h"

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t stream_hash(const tsr_config_t *c, const tsr_insn_t *v, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        tsr_insn_bits_t bits;
        uint8_t raw[TSR_INSN_BYTES];
        if (tsr_insn_encode(c, &v[i], &bits)) {
            printf("  (instruction %zu does not encode: %s)\n", i, tsr_errmsg());
            return 0;
        }
        tsr_insn_bits_store(&bits, raw);
        h = fnv(h, raw, sizeof raw);
    }
    return h;
}

static uint64_t uop_hash(tsr_device_t *dev, uint64_t addr, size_t nuops)
{
    const tsr_config_t *c = tsr_device_config(dev);
    size_t nb = nuops * c->uop_bytes;
    uint8_t *b = malloc(nb ? nb : 1);
    uint64_t h = 0;
    if (b && !tsr_mem_read(dev, addr, b, nb))
        h = fnv(0xcbf29ce484222325ull, b, nb);
    free(b);
    return h;
}

static void line(const char *cfg, const char *name, const tsr_config_t *c, const tsr_insn_t *v, size_t n,
                 tsr_device_t *dev, uint64_t uop_addr, size_t nuops)
{
    printf("%-8s %-34s insns %7zu %016llx", cfg, name, n, (unsigned long long)stream_hash(c, v, n));
    if (dev)
        printf("  uops %6zu %016llx", nuops, (unsigned long long)uop_hash(dev, uop_addr, nuops));
    printf("\n");
}

static int dump_net(const char *cfgname, tsr_device_t *dev, const char *label, const tsr_netdesc_t *nd,
                    unsigned flags)
{
    tsr_graph_t *g = NULL;
    int rc = tsr_graph_from_netdesc(tsr_device_config(dev), nd, &g);
    if (!rc)
        rc = tsr_graph_plan(g, dev, flags);
    if (rc) {
        printf("%s %s: %s\n", cfgname, label, tsr_errmsg());
        tsr_graph_free(g);
        return rc;
    }
    char name[96];
    for (int i = 0; i < tsr_graph_nnodes(g); i++) {
        size_t n;
        const tsr_insn_t *v = tsr_graph_stream(g, i, &n);
        if (!v)
            continue;
        snprintf(name, sizeof name, "%s/%s", label, tsr_graph_layer(g, i)->name);
        line(cfgname, name, tsr_device_config(dev), v, n, NULL, 0, 0);
    }
    size_t n;
    const tsr_insn_t *v = tsr_graph_stream(g, -1, &n);
    if (v) {
        snprintf(name, sizeof name, "%s/joined", label);
        line(cfgname, name, tsr_device_config(dev), v, n, NULL, 0, 0);
    }
    tsr_graph_free(g);
    return 0;
}

static const int32_t one_zp[1] = {0}, zp_u8[1] = {131}, m1[1] = {1518500250}, s1[1] = {-9};
static int32_t pc_m[64], pc_s[64], pc_zp[64];

static tsr_conv2d_params_t conv(int c_in, int hw, int c_out, int k, int s, int pad, int groups)
{
    tsr_conv2d_params_t p = {0};
    p.n = 1, p.c_in = c_in, p.h = p.w = hw, p.c_out = c_out, p.kh = p.kw = k, p.stride_h = p.stride_w = s;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad, p.groups = groups;
    p.x_dtype = p.w_dtype = p.y_dtype = TSR_DT_INT8;
    p.w_zp = one_zp, p.w_zp_count = 1, p.mult = m1, p.shift = s1, p.rq_count = 1;
    p.act_min = -128, p.act_max = 127;
    return p;
}

static void dump_conv(const char *cfgname, tsr_device_t *dev, const char *name, const tsr_conv2d_params_t *p)
{
    tsr_conv2d_plan_t pl;
    if (tsr_conv2d_plan(dev, p, &pl)) {
        printf("%-8s %-34s plan failed: %s\n", cfgname, name, tsr_errmsg());
        return;
    }
    line(cfgname, name, tsr_device_config(dev), pl.insns, pl.ninsns, dev, pl.uop_addr, pl.nuops);
    tsr_conv2d_plan_free(dev, &pl);
}

static void dump_pool(const char *cfgname, tsr_device_t *dev, const char *name, tsr_pool_kind_e kind, int c, int hw,
                      int k, int s, int pad, int cip, tsr_dtype_e dt, int32_t zp)
{
    tsr_pool_params_t p = {kind, 1, c, hw, hw, k, k, s, s, pad, pad, pad, pad, cip, dt, zp, 0};
    tsr_pool_plan_t pl;
    if (tsr_pool_plan(dev, &p, &pl)) {
        printf("%-8s %-34s plan failed: %s\n", cfgname, name, tsr_errmsg());
        return;
    }
    line(cfgname, name, tsr_device_config(dev), pl.insns, pl.ninsns, dev, pl.uop_addr, pl.nuops);
    tsr_pool_plan_free(dev, &pl);
}

static void dump_eltwise(const char *cfgname, tsr_device_t *dev)
{
    tsr_eltwise_desc_t a = {1, 64, 14, 14, TSR_DT_INT8, -3}, b = {1, 64, 14, 14, TSR_DT_UINT8, 120},
                       y = {1, 64, 14, 14, TSR_DT_INT8, 5};
    tsr_add_params_t ap = {a, b, y, 20, 1073741824, 1288490189, -1, -2, 1518500250, -19, -128, 127, 0, 0};
    tsr_eltwise_plan_t pl;
    if (!tsr_add_plan(dev, &ap, &pl)) {
        line(cfgname, "add/64x14x14 i8+u8", tsr_device_config(dev), pl.insns, pl.ninsns, dev, pl.uop_addr,
             pl.nuops);
        tsr_add_plan_free(dev, &pl);
    } else
        printf("%-8s add plan failed: %s\n", cfgname, tsr_errmsg());
    tsr_eltwise_desc_t x = {2, 24, 9, 7, TSR_DT_UINT8, 128};
    tsr_clip_params_t cp = {x, x, 128, 200};
    if (!tsr_clip_plan(dev, &cp, &pl)) {
        line(cfgname, "clip/2x24x9x7 u8", tsr_device_config(dev), pl.insns, pl.ninsns, dev, pl.uop_addr,
             pl.nuops);
        tsr_clip_plan_free(dev, &pl);
    } else
        printf("%-8s clip plan failed: %s\n", cfgname, tsr_errmsg());
}

static void dump_matmul(const char *cfgname, tsr_device_t *dev, int m, int k, int n)
{
    const tsr_config_t *c = tsr_device_config(dev);
    uint64_t a, b, y;
    tsr_matmul_prog_t prog;
    char name[64];
    snprintf(name, sizeof name, "matmul/%dx%dx%d", m, k, n);
    if (tsr_mem_alloc(dev, tsr_matmul_a_bytes(c, m, k), &a) || tsr_mem_alloc(dev, tsr_matmul_b_bytes(c, k, n), &b) ||
        tsr_mem_alloc(dev, tsr_matmul_c_bytes(c, m, n), &y) || tsr_matmul_build(dev, a, b, y, m, k, n, 7, &prog)) {
        printf("%-8s %-34s failed: %s\n", cfgname, name, tsr_errmsg());
        return;
    }
    line(cfgname, name, c, prog.insns, prog.ninsns, NULL, 0, 0);
    tsr_matmul_free(dev, &prog);
    tsr_mem_free(dev, a);
    tsr_mem_free(dev, b);
    tsr_mem_free(dev, y);
}

static void dump_config(const char *cfgname, int nets)
{
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {0};
    if (tsr_config_load(cfgname, &cfg) || tsr_device_open("fsim", &cfg, &o, &dev)) {
        printf("%s: %s\n", cfgname, tsr_errmsg());
        return;
    }
    const int bo = cfg.block_out;
    for (int i = 0; i < 64; i++)
        pc_m[i] = 1073741824 + i * 7919, pc_s[i] = -8 - i % 5, pc_zp[i] = (i * 37) % 200;
    /* direct operator plans */
    tsr_conv2d_params_t p = conv(32, 28, 32, 3, 1, 1, 32);
    dump_conv(cfgname, dev, "conv/dw3x3 s1 32x28", &p);
    p = conv(32, 28, 32, 5, 2, 2, 32);
    p.x_dtype = TSR_DT_UINT8, p.x_zp = 128;
    dump_conv(cfgname, dev, "conv/dw5x5 s2 u8", &p);
    p = conv(48, 14, 64, 1, 1, 0, 1);
    p.mult = pc_m, p.shift = pc_s, p.rq_count = 64, p.y_dtype = TSR_DT_UINT8, p.y_zp = 7, p.act_min = 7;
    p.act_max = 255;
    dump_conv(cfgname, dev, "conv/1x1 per-channel rq", &p);
    p = conv(16, 17, 2 * bo, 3, 2, 1, 1);
    p.w_dtype = TSR_DT_UINT8, p.w_zp = zp_u8;
    dump_conv(cfgname, dev, "conv/3x3 s2 u8 weights (split)", &p);
    p = conv(3, 40, 16, 7, 2, 3, 1);
    p.w_dtype = TSR_DT_UINT8, p.w_zp = pc_zp, p.w_zp_count = 16;
    dump_conv(cfgname, dev, "conv/stem-like 7x7 s2 pc w_zp", &p);
    p = conv(64, 7, 128, 3, 1, 1, 1);
    dump_conv(cfgname, dev, "conv/3x3 64->128 7x7", &p);
    p = conv(16, 9, 16, 1, 2, 0, 1);
    p.kh = 3;
    dump_conv(cfgname, dev, "conv/3x1 s2", &p);
    dump_pool(cfgname, dev, "pool/max3 s2 p1", TSR_POOL_MAX, 64, 28, 3, 2, 1, 0, TSR_DT_INT8, 0);
    dump_pool(cfgname, dev, "pool/avg3 s1 p1 cip0 u8", TSR_POOL_AVG, 32, 15, 3, 1, 1, 0, TSR_DT_UINT8, 100);
    dump_pool(cfgname, dev, "pool/avg2 s2 cip1", TSR_POOL_AVG, 48, 16, 2, 2, 0, 1, TSR_DT_INT8, -5);
    dump_pool(cfgname, dev, "pool/avg5 s3 p2 cip1", TSR_POOL_AVG, 16, 20, 5, 3, 2, 1, TSR_DT_INT8, 0);
    dump_pool(cfgname, dev, "pool/gap 7x7", TSR_POOL_GLOBAL_AVG, 128, 7, 0, 0, 0, 0, TSR_DT_INT8, 3);
    dump_pool(cfgname, dev, "pool/gap 30x30 u8", TSR_POOL_GLOBAL_AVG, 16, 30, 0, 0, 0, 0, TSR_DT_UINT8, 128);
    dump_eltwise(cfgname, dev);
    dump_matmul(cfgname, dev, 4 * cfg.batch, 4 * cfg.block_in, 4 * bo);
    dump_matmul(cfgname, dev, 16 * cfg.batch, 8 * cfg.block_in, 16 * bo);
    dump_matmul(cfgname, dev, 300 * cfg.batch, 4 * cfg.block_in, 90 * bo);
    /* networks */
    tsr_netdesc_t nd;
    if (!tsr_netdesc_resnet18_small(7, 2, 32, 16, 10, &nd)) {
        dump_net(cfgname, dev, "r18s", &nd, TSR_GRAPH_NO_FUSE);
        dump_net(cfgname, dev, "r18s-notap-1sub", &nd,
                 TSR_GRAPH_NO_TAPPACK | TSR_GRAPH_ONE_SUBMISSION | TSR_GRAPH_NO_FUSE);
        tsr_netdesc_free(&nd);
    }
    if (nets && !tsr_netdesc_resnet18(7, 1, &nd)) {
        dump_net(cfgname, dev, "r18", &nd, TSR_GRAPH_NO_FUSE);
        tsr_netdesc_free(&nd);
    }
    /* the adds fused into their convs' epilogues (last: their kernels'
     * device buffers move the DRAM addresses of whatever is planned after) */
    if (!tsr_netdesc_resnet18_small(7, 2, 32, 16, 10, &nd)) {
        dump_net(cfgname, dev, "r18s-fuse", &nd, 0);
        dump_net(cfgname, dev, "r18s-notap-1sub-fuse", &nd, TSR_GRAPH_NO_TAPPACK | TSR_GRAPH_ONE_SUBMISSION);
        tsr_netdesc_free(&nd);
    }
    if (nets && !tsr_netdesc_resnet18(7, 1, &nd)) {
        dump_net(cfgname, dev, "r18-fuse", &nd, 0);
        tsr_netdesc_free(&nd);
    }
    tsr_device_close(dev);
}

int main(void)
{
    dump_config("default", 1);
    dump_config("tiny", 0);
    return 0;
}
