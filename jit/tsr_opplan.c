/* tsr_opplan: the plan step every lowering shares (tsr_opplan.h). */
#include "tsr_opplan.h"

#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"

/* tsr_kcache_fetch's callbacks over the operator's, which also get kc. */
typedef struct {
    tsr_kcache_t *kc;
    const tsr_opplan_kernel_t *k;
} fetch_ctx_t;

static int fetch_fits(const tsr_kernel_t *k, void *ctx)
{
    const fetch_ctx_t *f = ctx;
    return f->k->fits(k, f->k->ctx);
}

static int fetch_gen(void *ctx, tsr_kcache_ref_t **ref)
{
    const fetch_ctx_t *f = ctx;
    return f->k->gen(f->kc, f->k->ctx, ref);
}

int tsr_opplan_fetch(tsr_device_t *dev, const tsr_opplan_kernel_t *k, tsr_kcache_ref_t **ref, int *status)
{
    tsr_kcache_t *kc = tsr_kcache_get(dev);
    if (!kc)
        return TSR_ENOMEM;
    fetch_ctx_t f = {kc, k};
    return tsr_kcache_fetch(kc, k->sig, k->sig_len, fetch_fits, fetch_gen, &f, ref, status);
}

int tsr_opplan_buffers(tsr_device_t *dev, const char *op, const tsr_opbuf_t *b, int n)
{
    for (int i = 0; i < n; i++)
        if (b[i].t && (b[i].t->bytes != b[i].bytes || !b[i].t->addr))
            return tsr_err(TSR_EINVAL, "%s: device tensors do not match the plan's input/output layout", op);
    for (int i = 0; i < n; i++) {
        int rc;
        if (b[i].t)
            *b[i].addr = b[i].t->addr;
        else if (b[i].bytes && (rc = tsr_mem_alloc(dev, b[i].bytes, b[i].addr)))
            return rc;
    }
    return TSR_OK;
}

static int aligned(const tsr_config_t *c, const char *op, const uint64_t base[][TSR_MEM_COUNT], int nslots)
{
    for (int s = 0; s < nslots; s++)
        for (int m = 0; m < TSR_MEM_COUNT; m++) {
            const uint32_t eb = tsr_config_elem_bytes(c, m);
            if (base[s][m] && eb && base[s][m] % eb)
                return tsr_err(TSR_EINVAL, "%s: device buffers not aligned to their element sizes", op);
        }
    return TSR_OK;
}

/* Encode every instruction: the field-by-field check of a new stream. */
static int check_encodes(const tsr_config_t *c, const char *op, const tsr_insn_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tsr_insn_bits_t bits;
        int rc = tsr_insn_encode(c, &v[i], &bits);
        if (rc)
            return tsr_err_prefix(rc, "%s: instruction %zu of the generated stream: ", op, i);
    }
    return TSR_OK;
}

int tsr_opplan_bind(const tsr_config_t *c, const char *op, const tsr_kcache_ref_t *ref, const uint8_t *slot, int nslots,
                    const uint64_t base[][TSR_MEM_COUNT], int check_fields, tsr_opplan_stream_t *out)
{
    memset(out, 0, sizeof *out);
    int rc = aligned(c, op, base, nslots);
    if (rc)
        return rc;
    const tsr_kernel_t *k = tsr_kcache_kernel(ref);
    if (!(out->insns = malloc((k->ninsns ? k->ninsns : 1) * sizeof *out->insns)))
        return tsr_err(TSR_ENOMEM, "out of memory");
    memcpy(out->insns, k->insns, k->ninsns * sizeof *out->insns);
    out->ninsns = k->ninsns;
    if ((rc = tsr_kcache_relocate_slots(c, out->insns, out->ninsns, slot, nslots, base)))
        return tsr_err_prefix(rc, "%s: ", op);
    if (check_fields && (rc = check_encodes(c, op, out->insns, out->ninsns)))
        return rc;
    tsr_counters_t ct;
    memset(&ct, 0, sizeof ct);
    tsr_counters_static(c, out->insns, out->ninsns, &ct);
    out->gemm_ops = ct.gemm_ops;
    out->alu_ops = ct.alu_ops;
    out->dram_bytes = ct.bytes_stored;
    for (int m = 0; m < TSR_MEM_COUNT; m++)
        out->dram_bytes += ct.bytes_loaded[m];
    return TSR_OK;
}

int tsr_opplan_take(int rc, const tsr_opplan_stream_t *st, tsr_insn_t **insns, size_t *ninsns, uint64_t *gemm_ops,
                    uint64_t *alu_ops, uint64_t *dram_bytes)
{
    *insns = st->insns;
    *ninsns = st->ninsns;
    if (rc)
        return rc;
    *gemm_ops = st->gemm_ops;
    *alu_ops = st->alu_ops;
    *dram_bytes = st->dram_bytes;
    return TSR_OK;
}
