/*
 * tsr_roofline: roofline bounds and moved-byte accounting (tsr_roofline.h).
 */
#include "tsr_roofline.h"

#include <string.h>

double tsr_roofline_dram_bw(const tsr_config_t *cfg, double requested)
{
    double bw = requested > 0 ? requested : 8.0;
    if (bw > 2.0 * cfg->dram_bus_width / 8)
        bw = 2.0 * cfg->dram_bus_width / 8;
    return bw;
}

tsr_roofline_t tsr_roofline_bound(const tsr_config_t *cfg, double macs, double compulsory, double bw)
{
    tsr_roofline_t r;
    r.t_compute = macs / (double)cfg->macs_per_op;
    r.t_memory = compulsory / bw;
    r.memory_bound = r.t_memory > r.t_compute;
    r.bound = r.memory_bound ? r.t_memory : r.t_compute;
    return r;
}

double tsr_roofline_moved(const tsr_counters_t *ctr)
{
    if (ctr->has_hw)
        return (double)ctr->hw[TSR_CNT_DRAM_RD_BYTES] + (double)ctr->hw[TSR_CNT_DRAM_WR_BYTES];
    double moved = (double)ctr->bytes_stored + (double)ctr->insn_bytes_fetched;
    for (int m = 0; m < TSR_MEM_COUNT; m++)
        moved += (double)ctr->bytes_loaded[m];
    return moved;
}

void tsr_counters_delta(const tsr_counters_t *a, const tsr_counters_t *b, tsr_counters_t *out)
{
    tsr_counters_t d;
    memset(&d, 0, sizeof d);
    for (int i = 0; i < TSR_OP_COUNT; i++)
        d.insns[i] = b->insns[i] - a->insns[i];
    for (int m = 0; m < TSR_MEM_COUNT; m++) {
        d.loads[m] = b->loads[m] - a->loads[m];
        d.bytes_loaded[m] = b->bytes_loaded[m] - a->bytes_loaded[m];
    }
    d.pad_rows_loaded = b->pad_rows_loaded - a->pad_rows_loaded;
    d.bytes_stored = b->bytes_stored - a->bytes_stored;
    d.insn_bytes_fetched = b->insn_bytes_fetched - a->insn_bytes_fetched;
    d.gemm_ops = b->gemm_ops - a->gemm_ops;
    d.gemm_reset_ops = b->gemm_reset_ops - a->gemm_reset_ops;
    d.macs = b->macs - a->macs;
    d.alu_ops = b->alu_ops - a->alu_ops;
    d.alu_lanes = b->alu_lanes - a->alu_lanes;
    d.cycles = b->cycles - a->cycles;
    d.has_hw = b->has_hw;
    for (int i = 0; i < TSR_CNT_COUNT; i++)
        d.hw[i] = b->hw[i] - a->hw[i];
    *out = d;
}

double tsr_roofline_conv2d_macs(const tsr_conv2d_params_t *p)
{
    int oh = 0, ow = 0;
    if (tsr_conv2d_check(p, &oh, &ow))
        return 0;
    const double cin_g = (double)(p->c_in / p->groups); /* input channels per group */
    return (double)p->n * p->c_out * oh * ow * cin_g * p->kh * p->kw;
}

/* Input indices along one axis that some window reads. */
static int used_axis(int in, int out, int k, int stride, int pad, int read_only)
{
    int used = 0;
    for (int i = 0; i < in; i++) {
        int hit = !read_only;
        for (int o = 0; o < out && !hit; o++)
            hit = i >= o * stride - pad && i < o * stride - pad + k;
        used += hit;
    }
    return used;
}

double tsr_roofline_conv2d_compulsory(const tsr_conv2d_params_t *p, int read_only)
{
    int oh = 0, ow = 0;
    if (tsr_conv2d_check(p, &oh, &ow))
        return 0;
    const double uh = used_axis(p->h, oh, p->kh, p->stride_h, p->pad_top, read_only);
    const double uw = used_axis(p->w, ow, p->kw, p->stride_w, p->pad_left, read_only);
    const double cin_g = (double)(p->c_in / p->groups); /* input channels per group */
    const double wbytes = (double)p->c_out * cin_g * p->kh * p->kw;
    return (double)p->n * p->c_in * uh * uw + wbytes + 4.0 * p->c_out + (double)p->n * p->c_out * oh * ow;
}
