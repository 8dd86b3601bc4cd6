/*
 * tsr_mmbench: matmul and GEMM-bound measurements on a device
 * (tsr_mmbench.h).
 */
#include "tsr_mmbench.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_config.h"
#include "tsr_error.h"
#include "tsr_isa.h"
#include "tsr_util.h"

void tsr_mmbench_random(uint64_t seed, int8_t *a, size_t na, int8_t *b, size_t nb)
{
    uint64_t s = seed;
    for (size_t i = 0; i < na; i++)
        a[i] = (int8_t)(tsr_splitmix64(&s) & 0xff);
    for (size_t i = 0; i < nb; i++)
        b[i] = (int8_t)(tsr_splitmix64(&s) & 0xff);
}

static int open_device(const tsr_mmbench_opts_t *o, tsr_config_t *cfg, tsr_device_t **dev)
{
    tsr_device_opts_t dopts = {0};
    if (o->dev)
        dopts = *o->dev;
    dopts.rtl.verbose = 1;
    *dev = NULL;
    int rc = tsr_config_load(o->cfgname, cfg);
    return rc ? rc : tsr_device_open(o->backend, cfg, &dopts, dev);
}

/* Pack and upload A and B, allocate C (packed layouts of tsr_matmul.h). */
static int mm_upload(tsr_device_t *dev, const tsr_config_t *cfg, const tsr_mmbench_opts_t *o, const int8_t *a,
                     const int8_t *b, uint64_t d[3])
{
    uint64_t na = tsr_matmul_a_bytes(cfg, o->m, o->k), nb = tsr_matmul_b_bytes(cfg, o->k, o->n);
    uint8_t *pa = malloc(na), *pb = malloc(nb);
    int rc = !pa || !pb ? tsr_err(TSR_ENOMEM, "out of memory") : TSR_OK;
    if (!rc) {
        tsr_pack_a(cfg, a, o->m, o->k, pa);
        tsr_pack_b(cfg, b, o->k, o->n, pb);
    }
    if (!rc && !(rc = tsr_mem_alloc(dev, na, &d[0])) && !(rc = tsr_mem_alloc(dev, nb, &d[1])) &&
        !(rc = tsr_mem_alloc(dev, tsr_matmul_c_bytes(cfg, o->m, o->n), &d[2])) &&
        !(rc = tsr_mem_write(dev, d[0], pa, na)))
        rc = tsr_mem_write(dev, d[1], pb, nb);
    free(pa);
    free(pb);
    return rc;
}

static int mm_download(tsr_device_t *dev, const tsr_config_t *cfg, const tsr_mmbench_opts_t *o, uint64_t dc, int8_t *c)
{
    uint64_t nc = tsr_matmul_c_bytes(cfg, o->m, o->n);
    uint8_t *pc = malloc(nc);
    int rc = pc ? tsr_mem_read(dev, dc, pc, nc) : tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc)
        tsr_unpack_c(cfg, pc, o->m, o->n, c);
    free(pc);
    return rc;
}

int tsr_mmbench_matmul(const tsr_mmbench_opts_t *o, const int8_t *a, const int8_t *b, int8_t *c,
                       tsr_mmbench_result_t *r)
{
    tsr_config_t cfg;
    tsr_device_t *dev;
    tsr_matmul_prog_t prog = {0};
    uint64_t d[3] = {0, 0, 0};
    memset(r, 0, sizeof *r);
    int rc = open_device(o, &cfg, &dev);
    if (rc)
        return rc;
    r->macs_per_op = cfg.macs_per_op;
    if (o->m % cfg.batch || o->k % cfg.block_in || o->n % cfg.block_out)
        rc = tsr_err(TSR_EINVAL, "sizes %dx%dx%d must be multiples of %dx%dx%d for this config", o->m, o->k, o->n,
                     cfg.batch, cfg.block_in, cfg.block_out);
    if (!rc && !(rc = mm_upload(dev, &cfg, o, a, b, d)))
        rc = tsr_matmul_build(dev, d[0], d[1], d[2], o->m, o->k, o->n, o->shift, &prog);
    double t0 = tsr_now_s();
    if (!rc && !(rc = tsr_submit(dev, prog.insns, prog.ninsns)) && !(rc = tsr_wait(dev, -1))) {
        r->secs = tsr_now_s() - t0;
        rc = mm_download(dev, &cfg, o, d[2], c);
    }
    if (!rc) {
        tsr_read_counters(dev, &r->ctr);
        r->info = prog;
        r->info.insns = NULL;
    }
    tsr_matmul_free(dev, &prog);
    tsr_device_close(dev);
    return rc;
}

size_t tsr_mmbench_check(const int8_t *a, const int8_t *b, const int8_t *c, size_t m, size_t k, size_t n, int shift,
                         size_t *fi, size_t *fj, int64_t *ref)
{
    size_t bad = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            int64_t acc = 0;
            for (size_t q = 0; q < k; q++)
                acc += (int64_t)a[i * k + q] * b[q * n + j];
            int64_t v = acc;
            if (shift > 0) {
                int64_t d = (int64_t)1 << shift;
                v = acc >= 0 ? (acc + d / 2) / d : -((-acc + d / 2) / d);
            }
            v = v < -128 ? -128 : v > 127 ? 127 : v;
            if (c[i * n + j] != v && bad++ == 0) {
                *fi = i;
                *fj = j;
                *ref = v;
            }
        }
    return bad;
}

/* ---------------------------------------------------------- GEMM-bound */

static long min_l(long a, long b) { return a < b ? a : b; }
static long max_l(long a, long b) { return a > b ? a : b; }

/* The tile and reduction: what the on-chip buffers hold and the loop
 * factors' (config-derived) fields take. */
static void gemm_clip(const tsr_config_t *cfg, const tsr_mmbench_opts_t *o, tsr_mmbench_gemm_t *g)
{
    long kb = max_l(o->k / cfg->block_in, 1), tm = max_l(o->m / cfg->batch, 1), tn = max_l(o->n / cfg->block_out, 1);
    kb = min_l(kb, min_l((long)cfg->uop_depth, min_l((long)cfg->inp_depth, (long)cfg->wgt_depth)));
    if (tm * kb > (long)cfg->inp_depth) tm = (long)cfg->inp_depth / kb;
    if (tn * kb > (long)cfg->wgt_depth) tn = (long)cfg->wgt_depth / kb;
    if (tm * tn > (long)cfg->acc_depth) tn = (long)cfg->acc_depth / tm;
    kb = min_l(kb, tsr_isa_field_max(cfg, TSR_OP_GEMM, "src_factor_out"));
    kb = min_l(kb, tsr_isa_field_max(cfg, TSR_OP_GEMM, "wgt_factor_in"));
    tn = min_l(tn, tsr_isa_field_max(cfg, TSR_OP_GEMM, "dst_factor_out"));
    g->tm = min_l(tm, 16383);
    g->tn = min_l(tn, 16383);
    g->kb = kb;
}

/* Uops (one per reduction step), inputs and weights (random) to the device. */
static int gemm_upload(tsr_device_t *dev, const tsr_config_t *cfg, const tsr_mmbench_gemm_t *g, uint64_t seed,
                       uint64_t d[3])
{
    uint64_t nu = (uint64_t)g->kb * cfg->uop_bytes, ni = (uint64_t)g->tm * g->kb * cfg->inp_bytes;
    uint64_t nw = (uint64_t)g->tn * g->kb * cfg->wgt_bytes;
    uint8_t *buf = malloc(ni > nw ? (ni > nu ? ni : nu) : (nw > nu ? nw : nu));
    int rc = buf ? TSR_OK : tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc && !(rc = tsr_mem_alloc(dev, nu, &d[0])) && !(rc = tsr_mem_alloc(dev, ni, &d[1])))
        rc = tsr_mem_alloc(dev, nw, &d[2]);
    for (long i = 0; !rc && i < g->kb; i++) {
        tsr_uop_t u = {0, (uint32_t)i, (uint32_t)i};
        uint64_t raw;
        if (!(rc = tsr_uop_encode(cfg, &u, &raw)))
            for (uint32_t b = 0; b < cfg->uop_bytes; b++)
                buf[(size_t)i * cfg->uop_bytes + b] = (uint8_t)(raw >> (8 * b));
    }
    uint64_t s = seed + 1;
    if (!rc && !(rc = tsr_mem_write(dev, d[0], buf, nu))) {
        for (uint64_t i = 0; i < ni; i++)
            buf[i] = (uint8_t)tsr_splitmix64(&s);
        rc = tsr_mem_write(dev, d[1], buf, ni);
    }
    if (!rc) {
        for (uint64_t i = 0; i < nw; i++)
            buf[i] = (uint8_t)tsr_splitmix64(&s);
        rc = tsr_mem_write(dev, d[2], buf, nw);
    }
    free(buf);
    return rc;
}

/* Stream 1 (4 instructions) loads inputs and weights; stream 2 loads its kb
 * uops itself (a few cycles: a stream may only read uop rows it loaded,
 * which the verifier checks), then reps GEMMs and FINISH. */
static void gemm_streams(const tsr_config_t *cfg, const tsr_mmbench_gemm_t *g, long reps, const uint64_t d[3],
                         tsr_insn_t *in)
{
    long tm = g->tm, tn = g->tn, kb = g->kb;
    in->opcode = TSR_OP_LOAD; in->mem_type = TSR_MEM_INP; in->dram_base = (uint32_t)(d[1] / cfg->inp_bytes);
    in->y_size = 1; in->x_size = in->x_stride = (uint32_t)(tm * kb); in++;
    in->opcode = TSR_OP_LOAD; in->mem_type = TSR_MEM_WGT; in->dram_base = (uint32_t)(d[2] / cfg->wgt_bytes);
    in->y_size = 1; in->x_size = in->x_stride = (uint32_t)(tn * kb); in->push_next = 1; in++;
    in->opcode = TSR_OP_ALU; /* a no-op taking the loads' token */
    in->pop_prev = 1; in++;
    in->opcode = TSR_OP_FINISH; in++;
    in->opcode = TSR_OP_LOAD; in->mem_type = TSR_MEM_UOP; in->dram_base = (uint32_t)(d[0] / cfg->uop_bytes);
    in->y_size = 1; in->x_size = in->x_stride = (uint32_t)kb; in++;
    for (long r = 0; r < reps; r++, in++) {
        in->opcode = TSR_OP_GEMM;
        in->uop_end = (uint32_t)kb;
        in->iter_out = (uint32_t)tm;
        in->iter_in = (uint32_t)tn;
        in->dst_factor_out = (uint32_t)tn;
        in->dst_factor_in = 1;
        in->src_factor_out = (uint32_t)kb;
        in->wgt_factor_in = (uint32_t)kb;
    }
    in->opcode = TSR_OP_FINISH;
}

/* Run 1 (load), then run 2 (GEMMs) with the counters reset in between. */
static int gemm_runs(tsr_device_t *dev, const tsr_insn_t *insns, size_t nload, size_t ngemm, tsr_mmbench_gemm_t *g)
{
    double t0 = tsr_now_s();
    int rc;
    if ((rc = tsr_submit(dev, insns, nload)) || (rc = tsr_wait(dev, -1)) || (rc = tsr_read_counters(dev, &g->load)) ||
        (rc = tsr_reset_counters(dev)))
        return rc;
    double t1 = tsr_now_s(), c1 = tsr_cpu_s();
    g->load_s = t1 - t0;
    if ((rc = tsr_submit(dev, insns + nload, ngemm)) || (rc = tsr_wait(dev, -1)) ||
        (rc = tsr_read_counters(dev, &g->ctr)))
        return rc;
    g->secs = tsr_now_s() - t1;
    g->cpu_s = tsr_cpu_s() - c1;
    return TSR_OK;
}

int tsr_mmbench_gemm(const tsr_mmbench_opts_t *o, tsr_mmbench_gemm_t *g)
{
    tsr_config_t cfg;
    tsr_device_t *dev;
    uint64_t d[3] = {0, 0, 0};
    memset(g, 0, sizeof *g);
    int rc = open_device(o, &cfg, &dev);
    if (rc)
        return rc;
    gemm_clip(&cfg, o, g);
    const size_t nload = 4, ngemm = 2 + (size_t)o->reps;
    tsr_insn_t *insns = calloc(nload + ngemm, sizeof *insns);
    rc = insns ? gemm_upload(dev, &cfg, g, o->seed, d) : tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc) {
        gemm_streams(&cfg, g, o->reps, d, insns);
        rc = gemm_runs(dev, insns, nload, ngemm, g);
    }
    free(insns);
    tsr_device_close(dev);
    return rc;
}
