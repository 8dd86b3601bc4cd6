// tsr_sc_shim: the extern "C" side of the SystemC model (sim/tsr_sc.h),
// the same split as the Verilator harness (sim/rtl/tsr_vshim.cpp): the
// driver stays C, this file owns the kernel.
//
// Kernel once per process: SystemC elaborates a design once and cannot
// add modules after the first sc_start, while the driver opens and closes
// devices freely (tests open several). So the first create builds a fixed
// world of TSR_SC_SLOTS slots (accelerator + DRAM model + host port each)
// and the link between devices (tsr_sc_link.h), starts the kernel, and
// every device claims a free slot and reconfigures it (the modules hold
// no config-sized state: buffers live in the slot's fsim instance, made
// per configure). Idle slots cost nothing: their
// engines wait on events.
#include <cstdlib>
#include <memory>
#include <string>

#include "tsr_sc_link.h"
#include "tsr_sc_model.h"

extern "C" {
#include "tsr_error.h"
#include "tsr_sc.h"
}

using namespace sc_core;

namespace {

// The host side of a slot: drives the register socket (AXI4-Lite).
struct host_port : sc_module {
    tlm_utils::simple_initiator_socket<host_port> sock;
    explicit host_port(sc_module_name n) : sc_module(n), sock("sock") {}
};

struct world {
    std::unique_ptr<tsr_sc_accel> acc[TSR_SC_SLOTS];
    std::unique_ptr<tsr_sc_dram> mem[TSR_SC_SLOTS];
    std::unique_ptr<host_port> host[TSR_SC_SLOTS];
    bool used[TSR_SC_SLOTS] = {};
    std::unique_ptr<tsr_sc_link> link; // the link between devices (tsr_sc_link.h), elaborated with the slots
};

world *g_world;

int build_world()
{
    if (g_world)
        return TSR_OK;
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    // A device stepped while idle is not worth a warning on stderr.
    sc_report_handler::set_actions(SC_ID_NO_SC_START_ACTIVITY_, SC_DO_NOTHING);
    try {
        world *w = new world;
        for (int i = 0; i < TSR_SC_SLOTS; i++) {
            std::string n = std::to_string(i);
            w->acc[i].reset(new tsr_sc_accel(("tsr_accel" + n).c_str()));
            w->mem[i].reset(new tsr_sc_dram(("tsr_dram" + n).c_str()));
            w->host[i].reset(new host_port(("tsr_host" + n).c_str()));
            w->acc[i]->mem.bind(w->mem[i]->tsock);
            w->host[i]->sock.bind(w->acc[i]->regs);
            w->acc[i]->dram_model = w->mem[i].get();
            w->acc[i]->mem_direct = w->mem[i].get(); // (bound with nothing between)
            w->mem[i]->aborting = &w->acc[i]->aborting;
            w->mem[i]->abort_ev = &w->acc[i]->abort_ev;
            w->mem[i]->seq = w->acc[i].get();
        }
        w->link.reset(new tsr_sc_link());
        sc_start(SC_ZERO_TIME); // end of elaboration; engines at their first wait
        g_world = w;
    } catch (std::exception &e) {
        return tsr_err(TSR_EBACKEND, "systemc: elaboration failed: %s", e.what());
    }
    return TSR_OK;
}

} // namespace

tsr_sc_link *tsr_sc_world_link() { return build_world() ? nullptr : g_world->link.get(); }

struct tsr_sc {
    int slot;
    tsr_sc_accel *acc;
    tsr_sc_dram *mem;
    host_port *host;
    tsr_tl_t *tl; // --timeline, or null
    tlm::tlm_generic_payload gp; // the register transaction, reused (a payload allocates its extension table)
};

static int reg_access(tsr_sc_t *s, bool write, uint32_t addr, uint32_t *v)
{
    tlm::tlm_generic_payload &gp = s->gp;
    sc_time d = SC_ZERO_TIME;
    gp.set_command(write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
    gp.set_address(addr);
    gp.set_data_ptr(reinterpret_cast<unsigned char *>(v));
    gp.set_data_length(4);
    gp.set_streaming_width(4);
    gp.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    s->host->sock->b_transport(gp, d);
    if (!gp.is_response_ok())
        return tsr_err(TSR_EBACKEND, "systemc: register %s of 0x%02x failed", write ? "write" : "read", addr);
    return TSR_OK;
}

// Run the kernel for n cycles, or only delta cycles when n is 0.
static void run_kernel(double n)
{
    if (n <= 0) { // delta cycles until nothing is left at this time (bounded)
        for (int i = 0; i < 1000 && sc_pending_activity_at_current_time(); i++)
            sc_start(SC_ZERO_TIME);
        return;
    }
    if (sc_pending_activity())
        sc_start(tsr_sc_cycles(n));
}

extern "C" int tsr_sc_create(const tsr_config_t *cfg, tsr_dram_t *dram, const tsr_rtl_opts_t *opts, tsr_sc_t **out)
{
    *out = nullptr;
    int rc = build_world();
    if (rc)
        return rc;
    int slot = -1;
    for (int i = 0; i < TSR_SC_SLOTS && slot < 0; i++)
        if (!g_world->used[i])
            slot = i;
    if (slot < 0)
        return tsr_err(TSR_EBACKEND, "systemc: %d devices already open in this process (close one first)",
                       TSR_SC_SLOTS);
    tsr_sc_dram_params dp;
    if (opts && opts->dram_latency)
        dp.latency = opts->dram_latency;
    if (opts && opts->dram_bytes_per_cycle > 0)
        dp.bytes_per_cycle = opts->dram_bytes_per_cycle;
    if (opts && opts->dram_outstanding)
        dp.outstanding = opts->dram_outstanding > 32 ? 32 : opts->dram_outstanding;
    tsr_sc_t *s = new (std::nothrow) tsr_sc_t;
    if (!s)
        return tsr_err(TSR_ENOMEM, "out of memory");
    s->slot = slot;
    s->acc = g_world->acc[slot].get();
    s->mem = g_world->mem[slot].get();
    s->host = g_world->host[slot].get();
    s->tl = nullptr;
    s->mem->mem = dram;
    s->mem->p = dp;
    s->mem->bus = cfg->dram_bus_width / 8;
    s->mem->clear();
    if ((rc = s->acc->configure(cfg, dram, dp)) ||
        (opts && opts->timeline_path && (rc = tsr_tl_open(opts->timeline_path, "systemc", opts->timeline_max, &s->tl)))) {
        delete s;
        return rc;
    }
    s->acc->tl = s->tl;
    /* timing only: the data path the model shares with fsim is skipped (uops still load) */
    tsr_fsim_set_timing_only(s->acc->fsim, opts && opts->timing_only);
    g_world->used[slot] = true;
    *out = s;
    return TSR_OK;
}

extern "C" void tsr_sc_destroy(tsr_sc_t *s)
{
    if (!s)
        return;
    if (s->acc->running() || s->acc->aborting) {
        s->acc->reset();
        run_kernel(0);
    }
    s->acc->tl = nullptr;
    tsr_tl_close(s->tl);
    g_world->used[s->slot] = false;
    delete s;
}

extern "C" int tsr_sc_start(tsr_sc_t *s, uint64_t insn_addr, uint32_t count)
{
    if (insn_addr + (uint64_t)count * TSR_INSN_BYTES > 0xffffffffull)
        return tsr_err(TSR_EINVAL, "systemc: instructions at 0x%llx are beyond the 32-bit AXI address space",
                       (unsigned long long)insn_addr);
    if (s->acc->aborting)
        run_kernel(0);
    uint32_t a = (uint32_t)insn_addr, hi = 0, one = TSR_AP_START;
    int rc;
    if ((rc = reg_access(s, true, TSR_REG_INSN_ADDR, &a)) || (rc = reg_access(s, true, TSR_REG_INSN_ADDR_HI, &hi)) ||
        (rc = reg_access(s, true, TSR_REG_INSN_COUNT, &count)) || (rc = reg_access(s, true, TSR_REG_AP_CTRL, &one)))
        return rc;
    return TSR_OK;
}

extern "C" int tsr_sc_step(tsr_sc_t *s, uint64_t max_cycles, int *done)
{
    *done = 0;
    tsr_sc_accel *a = s->acc;
    double target = tsr_sc_to_cycles(sc_time_stamp()) + (max_cycles ? (double)max_cycles : 1e18);
    try {
        while (!a->done()) {
            double now = tsr_sc_to_cycles(sc_time_stamp());
            if (now + 1e-3 >= target) // (time to cycles is a division: compare with slack)
                return TSR_OK;
            if (!sc_pending_activity())
                return tsr_err(TSR_EDEADLOCK, "systemc: no stage can progress (deadlock) at cycle %llu of the run: %s",
                               (unsigned long long)a->run_cycles(), a->where().c_str());
            sc_dt::uint64 dc = sc_delta_count();
            run_kernel(target - now);
            bool moved = tsr_sc_to_cycles(sc_time_stamp()) > now || sc_delta_count() != dc;
            if (!a->done() && (!sc_pending_activity() || !moved))
                return tsr_err(TSR_EDEADLOCK, "systemc: no stage can progress (deadlock) at cycle %llu of the run: %s",
                               (unsigned long long)a->run_cycles(), a->where().c_str());
        }
    } catch (std::exception &e) {
        return tsr_err(TSR_EBACKEND, "systemc: %s", e.what());
    }
    if (a->error()) {
        tsr_err(a->error(), "%s", a->error_msg().c_str());
        return a->error();
    }
    *done = 1;
    return TSR_OK;
}

extern "C" int tsr_sc_reset(tsr_sc_t *s)
{
    uint32_t v = TSR_SOFT_RESET, st = 0;
    int rc = reg_access(s, true, TSR_REG_SOFT_RESET, &v);
    if (!rc)
        run_kernel(0);
    if (!rc && (rc = reg_access(s, false, TSR_REG_STATUS, &st)) == TSR_OK && (st & TSR_STATUS_RESETTING))
        rc = tsr_err(TSR_EBACKEND, "systemc: soft reset did not complete");
    return rc;
}

extern "C" const tsr_insn_t *tsr_sc_decoded(const tsr_sc_t *s, uint32_t count)
{
    const tsr_sc_accel *a = s->acc;
    if (a->error() || !a->running() || a->insns.size() != count)
        return nullptr;
    return a->insns.data();
}

extern "C" uint64_t tsr_sc_run_cycles(const tsr_sc_t *s) { return s->acc->run_cycles(); }

extern "C" int tsr_sc_read_counters(tsr_sc_t *s, uint64_t hw[TSR_CNT_COUNT])
{
    for (int k = 0; k < TSR_CNT_COUNT; k++) {
        uint32_t lo = 0, hi = 0;
        int rc = reg_access(s, false, tsr_cnt_offset(k), &lo);
        if (!rc)
            rc = reg_access(s, false, tsr_cnt_offset(k) + 4, &hi);
        if (rc)
            return rc;
        hw[k] = (uint64_t)hi << 32 | lo;
    }
    return TSR_OK;
}

// libsystemc's main() calls sc_main; the driver's programs have their own
// main, so this one is never called (weak: a real virtual platform, such
// as example_top.cpp, defines its own).
extern "C" __attribute__((weak)) int sc_main(int, char *[]) { return 1; }
