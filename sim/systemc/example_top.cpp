// example_top: the accelerator model in a minimal virtual platform. A
// memory model (tsr_sc_dram over a tsr_dram, the AXI timing of the RTL
// backend) sits on the accelerator's AXI4 initiator socket; a host
// SC_THREAD places a one-tile GEMM program and its data in memory, drives
// the accelerator through its AXI4-Lite register socket (INSN_ADDR,
// INSN_COUNT, CTRL.START, poll STATUS, read the cycle counter) and checks
// the result against a plain dot product. Exit status 0 when it matches.
//   ./build/tsr_sc_example
// --bridge-delay N also runs a second platform whose DRAM sits behind an
// interconnect that adds N cycles to every burst's completion (the delay
// it returns); it must take more cycles than the first when N > 0 and the
// same when N is 0 (a CTest: the model must not take the DRAM target's
// own completion cycle for the burst's end when something delays it).
//   ./build/tsr_sc_example --bridge-delay 3
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tsr_sc_model.h"

extern "C" {
#include "tsr_error.h"
}

using namespace sc_core;

struct host : sc_module {
    tlm_utils::simple_initiator_socket<host> regs; // to the accelerator's register socket
    tsr_dram_t *mem;
    const tsr_config_t *cfg;
    int ok = 0, finished = 0;
    uint32_t cycles = 0; // the accelerator's cycle counter at DONE
    SC_HAS_PROCESS(host);
    host(sc_module_name n, tsr_dram_t *m, const tsr_config_t *c) : sc_module(n), regs("regs"), mem(m), cfg(c)
    {
        SC_THREAD(run);
    }

    uint32_t reg(bool wr, uint32_t addr, uint32_t v = 0)
    {
        tlm::tlm_generic_payload gp;
        sc_time d = SC_ZERO_TIME;
        gp.set_command(wr ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
        gp.set_address(addr);
        gp.set_data_ptr(reinterpret_cast<unsigned char *>(&v));
        gp.set_data_length(4);
        gp.set_streaming_width(4);
        regs->b_transport(gp, d);
        wait(d);
        return v;
    }

    static tsr_insn_t mem_insn(uint32_t op, uint32_t m, uint32_t sram, uint32_t dram, uint32_t x)
    {
        tsr_insn_t in{};
        in.opcode = op;
        in.mem_type = m;
        in.sram_base = sram;
        in.dram_base = dram;
        in.y_size = 1;
        in.x_size = x;
        in.x_stride = x;
        return in;
    }

    void run()
    {
        const tsr_config_t &c = *cfg;
        const int bi = c.block_in, bo = c.block_out, bt = c.batch;
        uint64_t a_uop, a_inp, a_wgt, a_out, a_prog;
        tsr_dram_alloc(mem, 64, 4096, &a_uop);
        tsr_dram_alloc(mem, (uint64_t)bt * bi, 4096, &a_inp);
        tsr_dram_alloc(mem, (uint64_t)bo * bi, 4096, &a_wgt);
        tsr_dram_alloc(mem, (uint64_t)bt * bo, 4096, &a_out);
        tsr_dram_alloc(mem, 8 * TSR_INSN_BYTES, 4096, &a_prog);
        // Data: x[b][i], w[o][i] small int8 values; one uop (dst 0, src 0, wgt 0).
        std::vector<int8_t> x((size_t)bt * bi), w((size_t)bo * bi);
        for (size_t i = 0; i < x.size(); i++)
            x[i] = (int8_t)((int)(i * 7 % 11) - 5);
        for (size_t i = 0; i < w.size(); i++)
            w[i] = (int8_t)((int)(i * 5 % 13) - 6);
        tsr_dram_write(mem, a_inp, x.data(), x.size());
        tsr_dram_write(mem, a_wgt, w.data(), w.size());
        tsr_uop_t u{0, 0, 0};
        uint64_t raw = 0;
        tsr_uop_encode(&c, &u, &raw);
        tsr_dram_write(mem, a_uop, &raw, c.uop_bytes);
        // Program: uop, inp, wgt loads; GEMM (reset, then accumulate); STORE; FINISH.
        std::vector<tsr_insn_t> p;
        p.push_back(mem_insn(TSR_OP_LOAD, TSR_MEM_UOP, 0, (uint32_t)(a_uop / c.uop_bytes), 1));
        p.push_back(mem_insn(TSR_OP_LOAD, TSR_MEM_INP, 0, (uint32_t)(a_inp / ((uint64_t)bt * bi)), 1));
        p.push_back(mem_insn(TSR_OP_LOAD, TSR_MEM_WGT, 0, (uint32_t)(a_wgt / ((uint64_t)bo * bi)), 1));
        p.back().push_next = 1;
        tsr_insn_t g{};
        g.opcode = TSR_OP_GEMM;
        g.uop_bgn = 0;
        g.uop_end = 1;
        g.iter_out = g.iter_in = 1;
        g.reset = 1;
        p.push_back(g);
        g.reset = 0;
        g.pop_prev = 1;
        g.push_next = 1;
        p.push_back(g);
        tsr_insn_t st = mem_insn(TSR_OP_STORE, TSR_MEM_OUT, 0, (uint32_t)(a_out / c.out_bytes), 1);
        st.pop_prev = 1;
        st.push_prev = 1;
        p.push_back(st);
        tsr_insn_t f{};
        f.opcode = TSR_OP_FINISH;
        f.pop_next = 1;
        p.push_back(f);
        for (size_t i = 0; i < p.size(); i++) {
            tsr_insn_bits_t b;
            uint8_t bytes[TSR_INSN_BYTES];
            if (tsr_insn_encode(&c, &p[i], &b)) {
                printf("example_top: encode failed: %s\n", tsr_errmsg());
                return;
            }
            tsr_insn_bits_store(&b, bytes);
            tsr_dram_write(mem, a_prog + i * TSR_INSN_BYTES, bytes, TSR_INSN_BYTES);
        }
        // Drive the accelerator through its registers.
        reg(true, TSR_REG_INSN_ADDR, (uint32_t)a_prog);
        reg(true, TSR_REG_INSN_ADDR_HI, 0);
        reg(true, TSR_REG_INSN_COUNT, (uint32_t)p.size());
        reg(true, TSR_REG_AP_CTRL, TSR_AP_START);
        while (!(reg(false, TSR_REG_AP_CTRL) & TSR_AP_DONE)) // ap_ctrl_hs: poll ap_done (clear on read)
            wait(tsr_sc_cycles(16));
        uint32_t s = reg(false, TSR_REG_STATUS);
        cycles = reg(false, tsr_cnt_offset(TSR_CNT_CYCLES));
        std::vector<int8_t> y((size_t)bt * bo);
        tsr_dram_read(mem, a_out, y.data(), y.size());
        int bad = 0;
        for (int b = 0; b < bt; b++)
            for (int o = 0; o < bo; o++) {
                int32_t d = 0;
                for (int i = 0; i < bi; i++)
                    d += x[(size_t)b * bi + i] * w[(size_t)o * bi + i];
                bad += (int8_t)(uint8_t)(uint32_t)d != y[(size_t)b * bo + o];
            }
        printf("example_top: status 0x%x, %u cycles, %d of %d outputs differ from the reference\n", s, cycles, bad,
               bt * bo);
        ok = !(s & TSR_STATUS_ERR) && bad == 0;
        finished = 1;
    }
};

// An interconnect on the AXI path: forwards each burst to the DRAM and adds
// `cycles` to the delay it returns (the completion).
struct bridge : sc_module {
    tlm_utils::simple_target_socket<bridge> tsock;
    tlm_utils::simple_initiator_socket<bridge> isock;
    double cycles;
    bridge(sc_module_name n, double c) : sc_module(n), tsock("tsock"), isock("isock"), cycles(c)
    {
        tsock.register_b_transport(this, &bridge::b_transport);
    }
    void b_transport(tlm::tlm_generic_payload &gp, sc_time &d)
    {
        isock->b_transport(gp, d);
        d += tsr_sc_cycles(cycles);
    }
};

// One platform: memory, its DRAM model, the accelerator, the host; the
// accelerator's AXI port bound to the DRAM model directly or through `br`.
struct platform {
    tsr_dram_t *mem = nullptr;
    tsr_sc_dram dram;
    tsr_sc_accel acc;
    host h;
    platform(const std::string &n, tsr_dram_t *m, const tsr_config_t *cfg, bridge *br)
        : mem(m), dram((n + "dram").c_str()), acc((n + "accel").c_str()), h((n + "host").c_str(), m, cfg)
    {
        dram.mem = m;
        dram.bus = cfg->dram_bus_width / 8;
        if (br) {
            acc.mem.bind(br->tsock);
            br->isock.bind(dram.tsock);
        } else {
            acc.mem.bind(dram.tsock);
        }
        h.regs.bind(acc.regs);
        acc.dram_model = &dram;
        dram.seq = &acc; // its waits in the stages' fixed same-time order
    }
};

int sc_main(int argc, char *argv[])
{
    double delay = -1; // --bridge-delay N: the second platform's (none: no second platform)
    if (argc == 3 && std::string(argv[1]) == "--bridge-delay") {
        char *e = nullptr;
        delay = strtod(argv[2], &e);
        if (!*argv[2] || *e || !(delay >= 0 && delay <= 1000)) {
            printf("example_top: --bridge-delay takes cycles 0..1000, not '%s'\n", argv[2]);
            return 1;
        }
    } else if (argc != 1) {
        printf("usage: tsr_sc_example [--bridge-delay N]\n");
        return 1;
    }
    tsr_config_t cfg;
    tsr_dram_t *mem = nullptr, *mem2 = nullptr;
    if (tsr_config_load("default", &cfg) || tsr_dram_create(0x1000, 1 << 20, &mem) ||
        (delay >= 0 && tsr_dram_create(0x1000, 1 << 20, &mem2))) {
        printf("example_top: %s\n", tsr_errmsg());
        return 1;
    }
    platform p("", mem, &cfg, nullptr);
    std::unique_ptr<bridge> br;
    std::unique_ptr<platform> p2;
    if (delay >= 0) {
        br.reset(new bridge("bridge", delay));
        p2.reset(new platform("b_", mem2, &cfg, br.get()));
    }
    if (p.acc.configure(&cfg, mem, p.dram.p) || (p2 && p2->acc.configure(&cfg, mem2, p2->dram.p))) {
        printf("example_top: %s\n", tsr_errmsg());
        return 1;
    }
    // The accelerator pauses the kernel (sc_pause) at DONE, for drivers that
    // step it; a platform just resumes.
    do
        sc_start();
    while (!(p.h.finished && (!p2 || p2->h.finished)) && sc_pending_activity());
    int ok = p.h.ok && (!p2 || p2->h.ok);
    if (p2) {
        const bool timed = delay > 0 ? p2->h.cycles > p.h.cycles : p2->h.cycles == p.h.cycles;
        printf("example_top: behind a %g-cycle interconnect %u cycles, direct %u (%s)\n", delay, p2->h.cycles,
               p.h.cycles, timed ? "as expected" : delay > 0 ? "the delay was lost" : "differ");
        ok = ok && timed;
    }
    tsr_dram_destroy(mem);
    tsr_dram_destroy(mem2);
    return ok ? 0 : 1;
}
