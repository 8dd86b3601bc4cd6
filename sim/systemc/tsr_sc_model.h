// tsr_sc_model: the accelerator as a SystemC/TLM-2.0 component, timed at
// the transaction level (instruction phases, DRAM bursts) and functionally
// exact: the data effect of every instruction is computed by the fsim's own
// per-instruction code (tsr_fsim_exec) when the timed schedule reaches it,
// so output bytes equal the fsim's by construction.
//
// Sockets:
//   regs (target)      AXI4-Lite register map of isa/tsr_regs.h (the map the
//                      RTL and the driver use): 32-bit accesses.
//   mem  (initiator)   the AXI4 master: one b_transport per burst (at most 16
//                      beats, never crossing 4 KiB). Its transactions carry
//                      tsr_sc_axi_ext (port, read priority, timing-only). The
//                      data path reads and writes the device memory directly
//                      (tsr_dram_t, the analogue of TLM DMI): the burst
//                      transactions carry timing only, so the memory model
//                      must be tsr_sc_dram or honour the extension.
// Timing follows hw/ARCHITECTURE.md at instruction granularity (see the
// .cpp); the stages synchronise at instruction boundaries and run ahead
// inside one (loosely timed, quantum keeper). They share one model clock,
// ahead of SystemC time by at most the TLM global quantum (10,000 cycles
// when it is not set): the stage modules' loops are fibers of one SystemC
// process (the accelerator's engine), which schedules them itself
// (tsr_sc_accel::yield_) and waits in SystemC time only when no stage can
// run or a quantum is used up (temporal decoupling). A host process sees the
// registers of a running accelerator at most a quantum ahead; DONE is
// raised when SystemC time has reached the model's end of the run.
#ifndef TSR_SC_MODEL_H
#define TSR_SC_MODEL_H

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <boost/context/fiber.hpp>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

extern "C" {
#include "tsr_config.h"
#include "tsr_counters.h"
#include "tsr_dram.h"
#include "tsr_fsim.h"
#include "tsr_isa.h"
#include "tsr_regs.h"
#include "tsr_timeline.h"
}

// One cycle of the accelerator clock as simulated time (1 ns: 1 GHz
// nominal; only cycle counts are reported).
sc_core::sc_time tsr_sc_cycles(double n);
// Simulated time as cycles (fractional when the DRAM rate is).
double tsr_sc_to_cycles(const sc_core::sc_time &t);

// A FIFO in a ring of power-of-two capacity, grown when full: the model's
// queues (commands, tokens, slots, bursts in flight) are short and pushed
// and popped per instruction, where std::deque's chunked iterators cost
// more than the rest of the bookkeeping.
template <class T> class tsr_sc_ring {
  public:
    bool empty() const { return n_ == 0; }
    size_t size() const { return n_; }
    T &operator[](size_t i) { return buf_[(head_ + i) & (buf_.size() - 1)]; }
    const T &operator[](size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }
    T &front() { return (*this)[0]; }
    const T &front() const { return (*this)[0]; }
    T &back() { return (*this)[n_ - 1]; }
    const T &back() const { return (*this)[n_ - 1]; }
    void clear() { head_ = n_ = 0; }
    void pop_front()
    {
        head_ = (head_ + 1) & (buf_.size() - 1);
        n_--;
    }
    void push_back(const T &v)
    {
        if (n_ == buf_.size())
            grow();
        buf_[(head_ + n_) & (buf_.size() - 1)] = v;
        n_++;
    }

  private:
    std::vector<T> buf_;
    size_t head_ = 0, n_ = 0;
    __attribute__((noinline)) void grow()
    {
        std::vector<T> b(buf_.empty() ? 16 : 2 * buf_.size());
        for (size_t i = 0; i < n_; i++)
            b[i] = (*this)[i];
        buf_.swap(b);
        head_ = 0;
    }
};

// DRAM timing parameters, the same as the RTL backend's (tsr_rtl_opts_t).
struct tsr_sc_dram_params {
    double latency = 32;       // cycles from address accepted to first data / write response
    double bytes_per_cycle = 8; // bandwidth shared by reads and writes
    unsigned outstanding = 8;  // bursts in flight per direction
};

// Burst attributes the AXI master attaches to its transactions.
struct tsr_sc_axi_ext : tlm::tlm_extension<tsr_sc_axi_ext> {
    int high_prio = 0;     // fetch and compute-stage reads (they stall their stage)
    int wait_slot = 0;     // a high-priority read that waits for a free slot (no claim ahead)
    int timing_only = 0;   // data moved through the direct interface: do not touch memory
    double accepted = 0;   // out: cycle the memory accepted the address
    double beat_cycles = 1; // write: cycles the source needs per beat (narrow rows)
    double w_lead = 0;      // write: cycles from its address to its first beat
    double min_end = 0;     // read: the consumer takes the last beat no earlier (it holds
                            // the in-order R channel until then)
    double hold_first = 0;  // read: beats of the burst its consumer's first element needs and
    double hold_span = 0;   // the cycles from taking that element to taking the last beat
                            // (0: none; a consumer waiting for the burst's first data)
    double data_start = 0;  // out: read: cycle the burst's first beat could go
    double stream_end = 0;  // out: read: its last beat's end were it not held
    double end = -1;        // out: the completion's cycle (the delay: to ticks_of(end))
    tlm::tlm_extension_base *clone() const override { return new tsr_sc_axi_ext(*this); }
    void copy_from(const tlm::tlm_extension_base &e) override
    {
        *this = static_cast<const tsr_sc_axi_ext &>(e);
    }
};

// Thrown inside a stage's fiber when the device is reset (abandons the run).
struct tsr_sc_abort {};

// The initiator's schedule as the DRAM target sees it: its model time, and
// timed waits that go through the initiator's own scheduler (the stages
// due at one simulated time run in a fixed order, so the model's cycles do
// not depend on how the SystemC kernel orders processes). The DRAM target's
// own waits (a read waiting for a slot, a write for its plan) run in the
// calling stage's fiber and use it.
struct tsr_sc_sequencer {
    // Wait until absolute time `at`, in time units (or the owner's abort
    // event); no throw.
    virtual void seq_wait(sc_dt::uint64 at) = 0;
    // The owner's model time in time units (at or ahead of SystemC time):
    // read through a pointer to its clock, set by the owner (the DRAM
    // target reads it several times per burst).
    sc_dt::uint64 seq_now() const { return *seq_clock; }
    const sc_dt::uint64 *seq_clock = nullptr;
    // The same time in cycles (the time units over the units per cycle),
    // kept beside it by the owner, or null (the target converts).
    const double *seq_clock_cyc = nullptr;
    virtual ~tsr_sc_sequencer() = default;
};

// The DRAM behind the AXI port: a TLM target whose b_transport returns, as
// the annotated delay, when the burst's last beat (read) or its write
// response arrives. Semantics of the RTL backend's slave (sim/tsr_rtl.c):
// a burst is accepted while fewer than `outstanding` are in flight in its
// direction; first read beat `latency` after acceptance; beats of one
// direction in order on their channel, at most one per cycle; all beats
// share the bandwidth; reads go before writes (a write beat gets only what
// valid read data leaves in the token bucket: a write's b_transport waits
// in simulated time until the reads that could take its beats are known);
// write response `latency` after the last beat. High-priority reads take a
// free slot before low-priority ones waiting at the same time.
class tsr_sc_dram : public sc_core::sc_module {
  public:
    tlm_utils::simple_target_socket<tsr_sc_dram> tsock;
    tsr_dram_t *mem = nullptr;       // backing store (device memory)
    tsr_sc_dram_params p;             // timing
    int bus = 8;                      // bytes per beat
    const bool *aborting = nullptr;   // set by the owner's reset: a read waiting for a slot
                                      // then ends at once, TLM_GENERIC_ERROR_RESPONSE, dropped
    sc_core::sc_event *abort_ev = nullptr; // notified with it (wakes such a read)
    tsr_sc_sequencer *seq = nullptr;  // the initiator's sequencer for timed waits (else plain wait)
    uint64_t rd_bytes = 0, wr_bytes = 0; // bus bytes moved (beats x bus)

    SC_HAS_PROCESS(tsr_sc_dram);
    explicit tsr_sc_dram(sc_core::sc_module_name n);
    void clear(); // forget bursts in flight (device reset)
    // The timing of one burst of `len` bytes, b_transport's without the
    // payload, the socket or the memory access: *d the delay in time units
    // (in: the request's annotation, out: the completion, from the model
    // time then). Returns the cycle the address was accepted, or -1 when a
    // device reset dropped the burst (*d 0). The accelerator calls it
    // directly for its timing-only bursts (tsr_sc_accel::mem_direct).
    double serve(bool wr, unsigned len, tsr_sc_axi_ext *x, sc_dt::uint64 *d);
    double rd_slot_at(double t); // cycle a read slot is free, from cycle t on

  private:
    double r_free_ = 0, w_free_ = 0, bw_free_ = 0; // cycle each resource is next free
    tsr_sc_ring<double> rq_, wq_;                  // completion cycle of bursts in flight
    tsr_sc_ring<std::pair<double, double>> rwin_;  // cycles read data flows [first beat, last beat)
    double credit_ = 24, credit_at_ = 0;           // bytes the bucket saved beyond one beat, and when
    double write_walk(double *t, double left, double bc, double h, double *credit);
    double credit_at(double to) const;
    void b_transport(tlm::tlm_generic_payload &gp, sc_core::sc_time &d);
    void wait_at(sc_dt::uint64 at); // a timed wait until `at` (time units) (sequencer, abort event or plain)
    sc_dt::uint64 now_ticks() const;          // the sequencer's model time, else SystemC time
    double now_cyc() const;                   // the same in cycles
};

// A condition a stage waits on (a queue changed): the stage waiting
// (tsr_sc_accel's stage order, -1: none). tsr_sc_accel::notify makes it
// runnable after the stages runnable now (a delta cycle's semantics); a
// stage re-checks its queue before it waits, so a notification nobody
// waits for is dropped.
struct tsr_sc_cond {
    int waiter = -1;
};

// The slots of a bounded queue, with the cycle each pop freed its slot: a
// stage that runs ahead of simulated time (compute, on its own clock) pops
// "in the future", so a pusher must not take the slot before that cycle
// even though it sees it free already.
struct tsr_sc_slots {
    unsigned depth = 16;
    tsr_sc_ring<double> pops; // cycles of the pops a later push may still need, oldest first
    uint64_t npush = 0, npop = 0;
    void clear()
    {
        pops.clear();
        npush = npop = 0;
    }
    // Cycle the slot of the next push was freed (0: never used). Call only
    // while the queue holds fewer than depth entries.
    double next_free() const
    {
        if (npush < depth)
            return 0;
        return pops[(size_t)(npush - depth - (npop - pops.size()))];
    }
    void pushed()
    {
        npush++;
        // (pops older than the one the next push needs are of no use)
        while (!pops.empty() && npop - pops.size() + depth < npush)
            pops.pop_front();
    }
    void popped(double at)
    {
        pops.push_back(at);
        npop++;
    }
    // Pops that happen after cycle t (the entries still there at t).
    size_t after(double t) const
    {
        size_t n = 0;
        for (size_t k = pops.size(); k > 0 && pops[k - 1] > t + 1e-9; k--)
            n++;
        return n;
    }
};

// A token queue (tsr_dep_queue): tokens carry the cycle they become
// visible, so a pusher that runs ahead in time pushes "in the future".
class tsr_sc_tokq {
  public:
    unsigned depth = 16;
    tsr_sc_ring<double> tok; // visible-at cycles, non-decreasing
    tsr_sc_slots slots;     // when popped (a push takes a slot no earlier)
    tsr_sc_cond changed;
    void clear()
    {
        tok.clear();
        slots.clear();
    }
};

class tsr_sc_accel;

// Fetch: reads the stream in 16-beat chunks with at most BufBeats (32) beats
// reserved, dispatches one instruction per cycle into the stage queues.
class tsr_sc_fetch : public sc_core::sc_module {
  public:
    tsr_sc_fetch(sc_core::sc_module_name n, tsr_sc_accel *a);
    void run(); // the stage's loop (a fiber of the accelerator's engine)
  private:
    tsr_sc_accel *a_;
    std::vector<double> dispv_; // cycle each instruction of the run was dispatched
};

// Load stage (LOAD inp/wgt): front issues the reads of the next instruction
// while the back still writes the current one (hw/ARCHITECTURE.md).
class tsr_sc_load : public sc_core::sc_module {
  public:
    tsr_sc_load(sc_core::sc_module_name n, tsr_sc_accel *a);
    void run(); // the stage's loop (a fiber of the accelerator's engine)
  private:
    tsr_sc_accel *a_;
};

// Compute stage: in-order dispatcher, GEMM pipe beside ALU pipe under the
// bank rule, LOAD uop/acc/acc8, FINISH.
class tsr_sc_compute : public sc_core::sc_module {
  public:
    tsr_sc_compute(sc_core::sc_module_name n, tsr_sc_accel *a);
    void run(); // the stage's loop (a fiber of the accelerator's engine)
  private:
    tsr_sc_accel *a_;
};

// Store stage: out rows to DRAM, complete after every write response.
class tsr_sc_store : public sc_core::sc_module {
  public:
    tsr_sc_store(sc_core::sc_module_name n, tsr_sc_accel *a);
    void run(); // the stage's loop (a fiber of the accelerator's engine)
  private:
    tsr_sc_accel *a_;
};

// No callback (tsr_sc_accel::axi's `between` or `pace`).
struct tsr_sc_nofn {
    double operator()() const { return 0; }
    double operator()(uint64_t, double) const { return 0; }
};

// A command queue entry: instruction index and the cycle it is visible.
struct tsr_sc_cmd {
    uint32_t idx;
    double at;
};

// A burst transaction of the AXI master, reused across bursts.
struct tsr_sc_burst {
    tlm::tlm_generic_payload gp;
    tsr_sc_axi_ext *ext; // owned by gp (freed by its destructor)
    tsr_sc_burst() : ext(new tsr_sc_axi_ext) { gp.set_extension(ext); }
};

class tsr_sc_accel : public sc_core::sc_module, public tsr_sc_sequencer {
  public:
    tlm_utils::simple_target_socket<tsr_sc_accel> regs; // AXI4-Lite
    tlm_utils::simple_initiator_socket<tsr_sc_accel> mem; // AXI4 master

    SC_HAS_PROCESS(tsr_sc_accel);
    explicit tsr_sc_accel(sc_core::sc_module_name n);
    ~tsr_sc_accel() override;

    // Attach a configuration and the device memory (the data path's direct
    // interface); creates the functional state. Call while idle.
    int configure(const tsr_config_t *cfg, tsr_dram_t *dram, const tsr_sc_dram_params &dp);
    // Abandon any run: stages back to idle at the next delta cycle (run the
    // kernel for SC_ZERO_TIME after this), queues and error state cleared.
    void reset();
    bool done() const { return status_ & TSR_STATUS_DONE; }
    bool running() const { return status_ & TSR_STATUS_BUSY; }
    // Error of the last run (0 if none) and its message.
    int error() const { return err_rc_; }
    const std::string &error_msg() const { return err_msg_; }
    // Cycles since the last START (to DONE once done).
    uint64_t run_cycles() const;
    // Where each stage stands (for deadlock reports).
    std::string where() const;
    uint32_t reg_insn_addr() const { return insn_addr_; }
    tsr_sc_dram *dram_model = nullptr;   // cleared on reset (optional)
    // The DRAM model `mem` is bound to with nothing between (set by whoever
    // binds it, or null): the bursts, timing only, call its serve()
    // directly instead of b_transport through the socket (the same cycles,
    // without the payload, the socket's calls and the sc_time conversions).
    tsr_sc_dram *mem_direct = nullptr;
    tsr_tl_t *tl = nullptr;              // timeline the stages report to (owned by the shim), or null
    // Set on DONE; the shim pauses the kernel with it.
    sc_core::sc_event done_ev;

    // ---- state shared with the stage modules ----
    tsr_config_t cfg{};
    tsr_dram_t *dram = nullptr;
    tsr_fsim_t *fsim = nullptr;          // data semantics (fsim code)
    tsr_sc_dram_params dp;
    int bus = 8;
    std::vector<tsr_insn_t> insns;        // decoded stream of the run
    tsr_sc_ring<tsr_sc_cmd> cmdq[TSR_STAGE_COUNT];
    tsr_sc_slots cmdq_slots[TSR_STAGE_COUNT]; // when each command queue's entries were popped
    tsr_sc_cond cmdq_ev[TSR_STAGE_COUNT];
    tsr_sc_tokq tq[4];                    // tsr_queue_e order
    sc_core::sc_event start_ev, abort_ev;
    void idle_after_abort(int s); // in stage s's catch: park until the engine has cleared the state
    bool aborting = false;
    bool start_pending = false;           // START written, fetch not yet started
    uint64_t gen = 0;                     // run generation (START count)
    uint32_t fetched = 0, stage_done[TSR_STAGE_COUNT] = {0, 0, 0};
    long stage_at[TSR_STAGE_COUNT] = {-1, -1, -1}; // instruction a stage is on (-1 idle)
    uint64_t hw[TSR_CNT_COUNT] = {};      // counters (cycles filled on read)
    double run_start = 0, run_end = 0;    // cycles
    double op_t0[2] = {0, 0}, op_n[2] = {0, 0}; // GEMM/ALU pipe: first op cycle and ops of its
                                               // instruction (counted whole at dispatch; a
                                               // mid-run read leaves out ops not yet issued)
    double op_step[2] = {1, 1};                    // cycles between two of those ops (2: src-reading
                                                   // ALU ops with ACC_SINGLE_COPY)

    // Same-time order of the stages (the schedule runs the ones due at one
    // time in this order): fetch first (its command pushes are seen by the
    // stages' checks in that cycle), then compute (its reads go before the
    // load stage's, as the RTL's AXI master prefers fetch and compute reads),
    // load, store.
    enum { kSeqFetch, kSeqCompute, kSeqLoad, kSeqStore, kSeqN, kEngine = kSeqN };
    void seq_wait(sc_dt::uint64 at) override;

    // Helpers for the stages (all may throw tsr_sc_abort).
    double now() const;      // model time (in a stage)
    double host_now() const; // model time seen from outside (a register read)
    void wait_until(double cyc);
    void wait_start(); // for start_ev (or an abort)
    void wait_ev(tsr_sc_cond &c);
    // For c or until cycle cyc, whichever comes first (the load stage's
    // front waits for its next command or token while its back's
    // instruction ends at its own time).
    void wait_ev_until(tsr_sc_cond &c, double cyc);
    void notify(tsr_sc_cond &c); // its waiter runnable (after those runnable now)
    // Waits for and pops the next command, not before cycle `floor`: a stage
    // that knows when its current instruction ends (compute, store) does
    // not wait for that time itself; its next pop (and so its next dispatch)
    // waits for it instead, one wait per instruction instead of two.
    // With `lt` (the compute stage's own clock, at or after simulated time)
    // neither waits in simulated time for a command or a token that is
    // there: the pop is stamped *lt, advanced to when it happens.
    tsr_sc_cmd take_cmd(int stage, double floor = 0, double *lt = nullptr);
    void pop_tokens(const tsr_insn_t &in, int stage, double *stall, double *lt = nullptr);
    void take_tokens(const int *qs, int n, double t, double *stall, double t0, int stage); // (pop_tokens' end)
    double push_tokens(const tsr_insn_t &in, int stage, double at); // returns the push cycle
    // Issue the bursts of [addr, addr+bytes) at the current time plus
    // *local (time units; advanced by one cycle per burst, the AR/AW channel); returns
    // the cycle of the last beat (read) or of the last write response.
    // `between`, if given, runs after every burst and while a burst waits
    // to be requested (the load stage completes its previous instruction
    // there once its time has come); it returns the cycle it is next due. `pace`, if
    // given, is asked for each read burst (its end address, -1) the cycle
    // its consumer can take the last beat (min_end) and told (the end
    // address, the burst's completion) after it. `blocks`: a reader with a
    // buffer reservation (tsr_dma_rd_elems, BufBeats > 0) requests chunks
    // aligned to 16-beat blocks, not 16-beat bursts from the start.
    // `between` and `pace` are the callers' lambdas, of type tsr_sc_nofn
    // (and null) for none: called directly, several times per burst, where
    // std::function's indirect calls were a tenth of a timing-only run.
    // (Defined, and so instantiated, in the .cpp: its stages' callers.)
    template <class Between, class Pace>
    double axi(bool write, bool high, uint64_t addr, uint64_t bytes, sc_dt::uint64 *local, double beat_cycles,
               Between *between, Pace *pace, bool blocks);
    void exec(const tsr_insn_t &in, uint32_t idx, const char *stage); // fsim data; error -> fail
    void fail(int rc, const std::string &msg);
    void finish(double at);

  private:
    // The schedule (see yield_): model time, the context running (a stage
    // or kEngine), each stage's wake time when it waits on time (UINT64_MAX:
    // not), the stages runnable at this time (this delta, then the next),
    // the stage waiting for SystemC time to catch up (-1: none), fetch
    // waiting for START, the stages parked after an abort.
    sc_dt::uint64 mnow_ = 0, quantum_ = 0; // time units
    double mnow_c_ = 0;                    // mnow_ in cycles (now(): set with it by set_now)
    void set_now(sc_dt::uint64 t, double c = -1); // (c: t's cycles, t = ticks_of(c), if known)
    int cur_ = kEngine, from_ = kEngine;
    sc_dt::uint64 seq_at_[kSeqN];
    sc_dt::uint64 seq_min_ = ~(sc_dt::uint64)0; // the earliest of them (seq_set keeps it)
    void seq_set(int s, sc_dt::uint64 t);
    int ready_[kSeqN], rd_head_ = 0, rd_n_ = 0, next_[kSeqN], nx_n_ = 0;
    int real_sync_ = -1;
    bool fetch_idle_ = false, parked_[kSeqN] = {};
    sc_core::sc_process_b *engine_proc_ = nullptr;
    void engine();                           // the SystemC process (SC_THREAD)
    boost::context::fiber make_fiber(int s);
    void switch_to(int n);                   // from the running context to context n
    void wait_ticks(int s, sc_dt::uint64 t, double c = -1); // stage s waits until model time t (c: set_now's)
    void wait_ticks_slow(int s, sc_dt::uint64 t); // (its round through the schedule)
    void yield_(int s);                      // stage s waits: run the next stage due
    int pick_(sc_dt::uint64 *sync);          // that stage (or -1, or kPickSync)
    void sync_real(int s);                   // stage s waits until SystemC time reaches the model's
    void sched_clear();
    void clear_queues();
    void seq_abort(); // wake the engine (with abort_ev)
    std::vector<std::unique_ptr<tsr_sc_burst>> burst_pool_; // free burst transactions (axi)
public:
    // A paced read's exchange with its pace function (axi): the hold relative to the data
    // it sets (got -3), the last burst's first beat and unheld end it reads.
    double hold_first_ = 0, hold_span_ = 0, rd_start_ = 0, rd_stream_end_ = 0;
private:
    sc_core::sc_event_or_list start_or_abort_;
    uint32_t status_ = 0, insn_addr_ = 0, insn_count_ = 0, hi_latch_ = 0;
    // ap_ctrl_hs (isa/tsr_regs.h): ap_done/ap_ready read once per run (clear
    // on read), ISR acknowledged by a write; GIE/IER/auto_restart/INSN_ADDR_HI
    // are stored only (the model raises no interrupt and does not restart).
    bool ap_read_ = false, isr_ack_ = false;
    // Streams decoded at earlier STARTs, by a hash of their bytes (compared
    // in full on a hit); cleared by configure and when they pass the bound
    // (bytes of stream; a decoded instruction takes a few times more).
    struct decoded_stream {
        std::vector<uint8_t> raw;
        std::vector<tsr_insn_t> insns;
    };
    std::unordered_map<uint64_t, decoded_stream> decoded_;
    uint64_t decoded_bytes_ = 0;
    static constexpr uint64_t kDecodedMax = 16ull << 20;
    uint32_t gie_ = 0, ier_ = 0, auto_ = 0, insn_addr_hi_ = 0;
    int err_rc_ = 0;
    std::string err_msg_;
    tsr_sc_fetch fetch_;
    tsr_sc_load load_;
    tsr_sc_compute compute_;
    tsr_sc_store store_;
    void reg_transport(tlm::tlm_generic_payload &gp, sc_core::sc_time &d);
    uint32_t reg_read(uint32_t addr);
    void reg_write(uint32_t addr, uint32_t v);
    // The contexts' suspended states (the stages', the engine's): last, so
    // destroyed first (a suspended fiber unwinds its stack, whose frames use
    // the members above).
    boost::context::fiber fib_[kSeqN + 1];
};

#endif
