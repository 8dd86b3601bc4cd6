/* tsr_counters: printing and accumulation of activity counters. */
#include "tsr_counters.h"

void tsr_counters_print(const tsr_counters_t *c, FILE *f)
{
    for (int op = 0; op < TSR_OP_COUNT; op++)
        fprintf(f, "insn_%-18s %llu\n", tsr_opcode_name((uint32_t)op), (unsigned long long)c->insns[op]);
    for (int m = 0; m < TSR_MEM_COUNT; m++)
        if (m != TSR_MEM_OUT)
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
}

void tsr_counters_add(tsr_counters_t *a, const tsr_counters_t *b)
{
    uint64_t *pa = (uint64_t *)a;
    const uint64_t *pb = (const uint64_t *)b;
    for (size_t i = 0; i < sizeof *a / sizeof(uint64_t); i++)
        pa[i] += pb[i];
}
