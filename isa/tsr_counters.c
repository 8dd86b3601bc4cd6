/* tsr_counters: printing and accumulation of activity counters. */
#include "tsr_counters.h"

void tsr_counters_print(const tsr_counters_t *c, FILE *f)
{
    for (int op = 0; op < TSR_OP_COUNT; op++)
        fprintf(f, "insn_%-18s %llu\n", tsr_opcode_name((uint32_t)op), (unsigned long long)c->insns[op]);
    /* (lut, an optional buffer, only when a stream loaded it: the report of
     * every config without ACT_LUT stays as it was) */
    for (int m = 0; m < TSR_MEM_COUNT; m++)
        if (m != TSR_MEM_OUT && (m != TSR_MEM_LUT || c->loads[m]))
            fprintf(f, "load_%-6s insns %6llu  bytes %llu\n", tsr_mem_name((uint32_t)m),
                    (unsigned long long)c->loads[m], (unsigned long long)c->bytes_loaded[m]);
    fprintf(f, "pad_rows_loaded         %llu\n", (unsigned long long)c->pad_rows_loaded);
    fprintf(f, "bytes_stored            %llu\n", (unsigned long long)c->bytes_stored);
    fprintf(f, "insn_bytes_fetched      %llu\n", (unsigned long long)c->insn_bytes_fetched);
    fprintf(f, "gemm_ops                %llu\n", (unsigned long long)c->gemm_ops);
    fprintf(f, "gemm_reset_ops          %llu\n", (unsigned long long)c->gemm_reset_ops);
    fprintf(f, "macs                    %llu\n", (unsigned long long)c->macs);
    fprintf(f, "alu_ops                 %llu\n", (unsigned long long)c->alu_ops);
    fprintf(f, "alu_lanes               %llu\n", (unsigned long long)c->alu_lanes);
    fprintf(f, "cycles                  %llu\n", (unsigned long long)c->cycles);
    if (c->has_hw)
        for (int k = 0; k < TSR_CNT_COUNT; k++)
            fprintf(f, "hw_%-20s %llu\n", tsr_cnt_name(k), (unsigned long long)c->hw[k]);
}

void tsr_counters_static(const tsr_config_t *cfg, const tsr_insn_t *insns, size_t n,
                         tsr_counters_t *c)
{
    for (size_t k = 0; k < n; k++) {
        const tsr_insn_t *in = &insns[k];
        if (in->opcode >= TSR_OP_COUNT)
            continue;
        c->insns[in->opcode]++;
        c->insn_bytes_fetched += TSR_INSN_BYTES;
        uint64_t iters = (uint64_t)in->iter_out * in->iter_in * (in->uop_end > in->uop_bgn ? in->uop_end - in->uop_bgn : 0);
        switch (in->opcode) {
        case TSR_OP_LOAD:
            if (in->mem_type >= TSR_MEM_COUNT)
                break;
            c->loads[in->mem_type]++;
            if (in->x_size) {
                uint64_t rows = (uint64_t)(in->y_pad0 + in->y_size + in->y_pad1) * (in->x_pad0 + in->x_size + in->x_pad1);
                uint64_t data = (uint64_t)in->y_size * in->x_size;
                c->bytes_loaded[in->mem_type] += data * tsr_config_elem_bytes(cfg, (int)in->mem_type);
                c->pad_rows_loaded += rows - data;
            }
            break;
        case TSR_OP_STORE:
            if (in->x_size)
                c->bytes_stored += (uint64_t)in->y_size * in->x_size * cfg->out_bytes;
            break;
        case TSR_OP_GEMM:
            if (in->reset) {
                c->gemm_reset_ops += iters;
            } else {
                c->gemm_ops += iters;
                c->macs += iters * tsr_insn_macs_per_op(cfg, in);
            }
            break;
        case TSR_OP_ALU:
            c->alu_ops += iters;
            c->alu_lanes += iters * (uint64_t)(cfg->batch * cfg->block_out);
            break;
        default: break;
        }
    }
}

void tsr_counters_from_hw(tsr_counters_t *c, int with_ops)
{
    c->has_hw = 1;
    c->cycles = c->hw[TSR_CNT_CYCLES];
    if (with_ops) {
        c->gemm_ops = c->hw[TSR_CNT_GEMM_OPS];
        c->alu_ops = c->hw[TSR_CNT_ALU_OPS];
    }
}

void tsr_counters_add(tsr_counters_t *a, const tsr_counters_t *b)
{
    uint64_t has = a->has_hw | b->has_hw;
    uint64_t *pa = (uint64_t *)a;
    const uint64_t *pb = (const uint64_t *)b;
    for (size_t i = 0; i < sizeof *a / sizeof(uint64_t); i++)
        pa[i] += pb[i];
    a->has_hw = has;
}
