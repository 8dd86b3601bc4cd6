// tsr_sc_model: the SystemC/TLM-2.0 timed model (see tsr_sc_model.h).
//
// Timing at instruction granularity, after hw/ARCHITECTURE.md:
// - fetch: 16-beat chunks, at most 32 beats reserved (two chunks), one
//   instruction per cycle into the stage command queues (CMD_QUEUE_DEPTH);
// - load: pops, then the reads of the instruction (contiguous rows merged
//   into one command), the back writes data as it arrives and pad rows in
//   the other cycles; the front issues the next instruction's reads while
//   the back finishes the current one unless that one could block on its
//   push;
// - compute: in-order dispatch, pops at dispatch; GEMM and ALU pipes one
//   tensor op per cycle plus the pipeline latency; a younger instruction in
//   the other pipe starts once the older's footprint is known (first pass
//   over its uops) and, if their accumulator banks meet, after the older
//   ends; pushes in program order (after every older instruction ended);
//   LOAD uop, pushing loads and FINISH wait for both pipes, acc loads only
//   for a pipe whose banks they write;
// - store: one write command per row (merged if contiguous), completes
//   after its last write response.
// Every stage synchronises with simulated time at instruction
// boundaries; inside an instruction the bursts it issues run ahead on a
// tlm_quantumkeeper-style local offset (one cycle per burst on the address
// channel). Token queue entries carry the cycle they become visible, and
// queue slots the cycle their pop freed them. The compute stage keeps its
// own clock ahead of simulated time and waits only for what is not there
// yet and for its DRAM reads. Stages due at the same time run in a fixed
// order (fetch, compute, load, store: the sequencer below), so the cycles
// do not depend on the SystemC kernel's order of same-time processes.
// The constants below are the fixed overheads of the RTL stages, measured
// against the RTL backend (tests/test_systemc.c checks the agreement).
#include "tsr_sc_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
#include "tsr_error.h"
#include "tsr_pipe.h"
}

using namespace sc_core;

namespace {
// Fixed per-instruction overheads, in cycles. TSR_SC_TUNE="a,b,..." overrides
// them in this order (a calibration knob for tsr_sccal, not for users).
double kCmdLat = 2;      // fetch -> stage command queue visibility
double kLoadBack = 3;    // load: last element written -> instruction complete
double kPipeLat = 5;     // compute pipe: P0..P4 after the last op issued
double kDispatch = 3;    // compute: dispatcher cycles per instruction (queue read, decode, pop; 2 -> 3
                         // measured: random programs mean |err| default 2.11 -> 1.91%, tiny 2.53 -> 2.16%,
                         // random configs 2.11 -> 1.81%)
double kCLoad = 6;       // compute LOAD: last element -> complete (5 -> 6 with the timing of issue 25's
                         // calibration: tsr_sccal tiny, 200 programs, mean |err| 1.09 -> 1.01%)
double kStoreOvh = 3;    // store: start -> first write data
double kFinish = 2;      // FINISH -> DONE
double kTokLat = 1;      // push -> visible to the popping stage
double kWalk = 1;        // compute LOAD: start -> its writer at the first row
double kLoadFront = 4;   // load: command taken -> its first read request (decode, pop, issuer, the
                         // reader's and the AXI master's request queues)
double kStoreEnd = 3;    // store: last write response -> complete (writer idle, push)
double kFetchStart = 2;  // fetch: START -> its first AR
double kFetchReq = 3;    // fetch: a chunk's room back (credit) -> the next chunk's AR
double kLoadTok = 1;     // load: a pop token the front waited for (in its pop state) -> its first read request
double kRsvReq = 2;      // compute LOAD of narrow elements: a beat freed in its reader's buffer -> the
                         // request that needed its room
double kCLoadConfl = 2;  // compute: an acc LOAD that waited for a pipe's ops in its banks -> its start
                         // (ld_conflict clears, ld_start, the reader's request: the RTL's first AR
                         // ~3 cycles after; 3 fits EfficientNet-B0's depthwise+SiLU layers exactly
                         // but raised random programs' mean |err| 0.87 -> 0.93%, 2 -> 0.89%)
// The pipes as tsr_compute/tsr_compute_pipe time them (a pipe's `end` is its last op's issue + 1 +
// kPipeLat, busy_o falling one cycle before): the next instruction of a pipe starts (p_start) when
// the one before has retired and its first op issues 2 cycles later (start_q, the loop); an op of
// a younger instruction in the other pipe holds in P1 until the older's busy_o falls (the bank
// rule), so it issues 2 cycles before that `end`; and passes P1 once the older's footprint is known,
// the cycle after its first pass's last op passed P1. Found on MobileNetV2/EfficientNet-B0 timelines
// (ALU after ALU: last op + 8 on the RTL, + 6 in the model; GEMM after a bank-sharing ALU: + 4, + 6).
double kPipeStart = 2;   // compute: a pipe's instruction retired -> the next one's first op in it
double kBankGap = 2;     // compute: an older instruction's end in the other pipe -> an op in its banks
double kKnown = 0;       // compute: an instruction's first pass over its uops -> its footprint known
double kLoadHand = 1;    // load: the front's first request after a command it took as the back took
                         // the one before (it waited for the back): this many cycles more than
                         // kLoadFront (tsr_load: F_RUN -> F_IDLE after the hand, then the command).
                         // Timed for elements of 4+ beats only: for all, tsr_sccal 200 programs
                         // default_dw 0.28 -> 0.22% but tiny_exact 0.68 -> 0.70%, random configs
                         // 0.80 -> 0.82% (programs above 3%: 0 -> 2, 4 -> 6)
double kCLoadPadRoom = 1; // compute LOAD of 2-beat elements: a row's padding cycles its data hides
double kLoadWalk = 1;    // load: the back's walk over pad and data rows done -> instruction complete
                         // (tsr_load's B_PUSH cycle; kLoadBack from its last data beat. 3 -> 1: tsr_sccal
                         // 200 programs, mean |err| tiny 0.79 -> 0.74%, tiny_lut 0.83 -> 0.73%)
double kHoldBpe = 1;     // load: data the front requested ahead holds the R channel (no reservation) for
                         // elements of this many beats and more (tsr_load's readers of elements a beat wide
                         // or wider: BufBeats 0; 2 -> 1: random configs' 1-beat inp, program 130 -5.84 -> -1.22%)
constexpr unsigned kBurstBeats = 16;
constexpr double kQuantum = 16;    // cycles a stage may run ahead inside an instruction

struct tune_env {
    tune_env()
    {
        const char *e = getenv("TSR_SC_TUNE");
        double *k[] = {&kCmdLat, &kLoadBack, &kPipeLat, &kDispatch, &kCLoad, &kStoreOvh, &kFinish, &kTokLat, &kWalk, &kStoreEnd, &kLoadFront, &kFetchStart, &kFetchReq, &kLoadTok, &kHoldBpe, &kRsvReq, &kCLoadConfl, &kPipeStart, &kBankGap, &kKnown, &kLoadWalk, &kLoadHand};
        for (size_t i = 0; e && *e && i < sizeof k / sizeof k[0]; i++) {
            char *end;
            double v = strtod(e, &end);
            if (end == e)
                break;
            *k[i] = v;
            e = *end == ',' ? end + 1 : end;
        }
    }
} tune_env_once;
} // namespace

// Time units per cycle (1 ns), looked up once: sc_time(double, unit) finds
// the unit's scale through the simcontext on every call, which was a tenth of
// the model's time on short programs. The first lookup constructs an sc_time,
// which fixes the resolution, so the cached value cannot go stale.
// (A plain global with an out-of-line first lookup rather than a function
// static: the guard kept the lookup out of line in every conversion.)
static double g_ticks_per_cycle = 0;
// Cycles below which a whole number c of them is c * scale time units exactly
// (and back): 2^52 / scale when the scale is a whole number, else 0 (cyc_whole).
static double g_whole_below = 0;
static __attribute__((noinline)) double ticks_per_cycle_init()
{
    const double t = sc_time(1, SC_NS).to_double();
    if (t >= 1 && t < 4294967296.0 && t == (double)(sc_dt::uint64)t)
        g_whole_below = 4503599627370496.0 / t;
    g_ticks_per_cycle = t;
    return t;
}
static inline double ticks_per_cycle()
{
    return g_ticks_per_cycle > 0 ? g_ticks_per_cycle : ticks_per_cycle_init();
}

// Cycles as time units: what sc_time(n, SC_NS) computes (n * scale + 0.5,
// truncated) when the resolution divides 1 ns (the scale is then this
// integer), without constructing an sc_time.
// (Out of line: the scale not looked up yet, or not a whole number of units.)
static __attribute__((noinline)) sc_dt::uint64 ticks_of_slow(double n)
{
    const double t = ticks_per_cycle();
    if (n > 0 && t >= 1)
        return (sc_dt::uint64)(n * t + 0.5);
    return sc_time(n, SC_NS).value();
}
static inline __attribute__((always_inline)) sc_dt::uint64 ticks_of(double n)
{
    const double t = g_ticks_per_cycle; // (0 until looked up: the slow path looks it up)
    if (n > 0 && t >= 1)
        return (sc_dt::uint64)(n * t + 0.5);
    return ticks_of_slow(n);
}

static inline __attribute__((always_inline)) sc_time cyc_time(double n) { return sc_time::from_value(ticks_of(n)); }

// Time units as cycles. The last conversion is kept: the stages convert the
// same time stamp many times between two waits, and the division is the
// costly part. A burst's local offset and the DRAM target's clock (when
// it has no sequencer's) have a memo each: a burst alternates them with its
// other times, which otherwise missed the one memo a few times per burst
// (the same quotient either way). The model clock keeps its own (set_now).
struct cyc_memo {
    sc_dt::uint64 ticks = 0;
    double cyc = 0;
};
static cyc_memo g_cyc_any, g_cyc_now, g_cyc_local;
static inline __attribute__((always_inline)) double cyc_of(sc_dt::uint64 v, cyc_memo &m = g_cyc_any)
{
    if (v != m.ticks) {
        m.ticks = v;
        m.cyc = (double)v / ticks_per_cycle();
    }
    return m.cyc;
}

static inline __attribute__((always_inline)) double to_cyc(const sc_time &t) { return cyc_of(t.value()); }

// ticks_of(c) as cycles again (t = ticks_of(c)): c itself when it is a
// whole number of cycles (t is then c * scale exactly, and the quotient c),
// without the division, whose latency held up the burst path (a load
// stage's burst ends and waits mostly at whole cycles); else cyc_of(t, m).
static inline __attribute__((always_inline)) bool whole_cycles(double c)
{
    return c > 0 && c < g_whole_below && c == (double)(long long)c;
}
static inline __attribute__((always_inline)) double cyc_whole(double c, sc_dt::uint64 t, cyc_memo &m)
{
    return whole_cycles(c) ? c : cyc_of(t, m);
}
// A burst's local offset in cycles: none (most of the load stage's bursts,
// after their wait) is 0 without the conversion, which would also evict the
// offset's memo (the same value either way).
static inline __attribute__((always_inline)) double local_cyc(sc_dt::uint64 v) { return v ? cyc_of(v, g_cyc_local) : 0.0; }

// sc_time_stamp() without the call into the library (the same member it
// returns): the stages read the time several times per instruction.
// (sc_get_curr_simcontext() itself was not inlined: its first-use branch
// constructs a context; the model only runs inside a started kernel.)
static inline const sc_time &stamp()
{
    return sc_core::sc_curr_simcontext ? sc_core::sc_curr_simcontext->time_stamp() : sc_time_stamp();
}

// std::llround (halves away from zero) without the call into libm: the
// counters round a cycle difference several times per instruction. Equal
// to it for every |x| < 2^63 (x - trunc(x) is exact).
static inline long long round_ll(double x)
{
    const long long i = (long long)x;
    const double f = x - (double)i;
    return i + (f >= 0.5) - (f <= -0.5);
}

// The model clock moves only through set_now, which keeps it in cycles too:
// now() reads that (called a dozen times per burst), with no conversion.
// (here, before its callers, and inline)
inline __attribute__((always_inline)) double tsr_sc_accel::now() const { return mnow_c_; }
inline __attribute__((always_inline)) void tsr_sc_accel::set_now(sc_dt::uint64 t, double c)
{
    mnow_ = t;
    // (what cyc_of(t) gives; with c, t = ticks_of(c): see cyc_whole)
    mnow_c_ = whole_cycles(c) ? c : (double)t / ticks_per_cycle();
}

sc_time tsr_sc_cycles(double n) { return cyc_time(n); }
// (axi's `between` or `pace` when there is none)
static tsr_sc_nofn *const kNoFn = nullptr;
double tsr_sc_to_cycles(const sc_time &t) { return to_cyc(t); }

// ------------------------------------------------------------------ DRAM

tsr_sc_dram::tsr_sc_dram(sc_module_name n) : sc_module(n), tsock("tsock")
{
    tsock.register_b_transport(this, &tsr_sc_dram::b_transport);
}

void tsr_sc_dram::clear()
{
    rq_.clear();
    wq_.clear();
    rwin_.clear();
    credit_ = 3.0 * bus;
    credit_at_ = 0;
}

// (inline, before its callers: several per burst)
inline sc_dt::uint64 tsr_sc_dram::now_ticks() const { return seq ? seq->seq_now() : stamp().value(); }
inline __attribute__((always_inline)) double tsr_sc_dram::now_cyc() const
{
    return seq && seq->seq_clock_cyc ? *seq->seq_clock_cyc : cyc_of(now_ticks(), g_cyc_now);
}

// Where the beats of a write go. The RTL's slave (sim/tsr_rtl.c) gives a
// write beat only the bandwidth a valid read beat leaves: its token bucket
// (bytes_per_cycle per cycle, at most four beats) must hold two beats while
// read data waits. So inside the windows where read data flows a write gets
// what the bucket saved beyond one beat (*credit: it fills in the gaps and,
// above one beat per cycle, beside the reads), then bytes_per_cycle - bus
// per cycle (nothing unless the bandwidth exceeds one beat per cycle); in
// the gaps up to one beat per `bc` cycles. A gap is only known to stay free
// up to `h` (a read issued later brings its data `latency` after the
// current time at the earliest and takes the gap): walk from *t, writing
// `left` bytes, through the known read windows and the gaps before h;
// returns the bytes still to write (0: *t is when the last beat went).
double tsr_sc_dram::write_walk(double *t, double left, double bc, double h, double *credit)
{
    const double now = now_cyc();
    while (!rwin_.empty() && rwin_.front().second <= std::min(*t, now))
        rwin_.pop_front();
    const double busy = std::min(std::max(0.0, p.bytes_per_cycle - bus), bus / bc); // bytes/cycle beside reads
    const double idle = std::min(p.bytes_per_cycle, bus / bc);                        // bytes/cycle alone
    auto run = [&](double until, double rate) { // write at `rate` in [*t, until); true when done
        double g = until - *t;
        if (g <= 0)
            return false;
        if (g * rate >= left) {
            *t += left / rate;
            left = 0;
            return true;
        }
        left -= g * rate;
        *t += g;
        return false;
    };
    for (size_t k = 0; k < rwin_.size(); k++) {
        const auto &w = rwin_[k];
        if (w.second <= *t)
            continue;
        if (w.first > *t) {
            if (run(std::min(w.first, h), idle))
                return 0;
            if (*t < w.first) // stopped at the horizon
                return left;
        }
        // Inside the window: the saved bytes first, at the full rate.
        if (*credit > 0) {
            double c = std::min(*credit, left), t0 = *t;
            if (run(std::min(w.second, *t + c / idle), idle)) {
                *credit -= c;
                return 0;
            }
            *credit = std::max(0.0, *credit - (*t - t0) * idle);
        }
        if (busy > 0 ? run(w.second, busy) : (*t = std::max(*t, w.second), false))
            return 0;
    }
    run(std::min(h, 1e300), idle);
    return left;
}

// What the bucket saved beyond one beat at cycle `to` (credit_ at credit_at_
// before): it fills at bytes_per_cycle in the gaps between read windows and
// beside the reads only above one beat per cycle (below, the reads drain it).
double tsr_sc_dram::credit_at(double to) const
{
    const double cap = 3.0 * bus;
    double c = credit_, t = credit_at_;
    for (size_t k = 0; k < rwin_.size(); k++) {
        const auto &w = rwin_[k];
        if (t >= to)
            break;
        if (w.second <= t)
            continue;
        if (w.first > t) {
            c = std::min(cap, c + (std::min(w.first, to) - t) * p.bytes_per_cycle);
            t = std::min(w.first, to);
        }
        double e = std::min(w.second, to);
        if (e > t)
            c = p.bytes_per_cycle < bus ? 0 : std::min(cap, c + (e - t) * (p.bytes_per_cycle - bus));
        t = std::max(t, e);
    }
    if (to > t)
        c = std::min(cap, c + (to - t) * p.bytes_per_cycle);
    return c;
}

// A timed wait of the target until `at`: through the initiator's sequencer
// when it has one (same-time wake-ups in its fixed order), else a plain
// wait, cut short by the abort event if there is one.
void tsr_sc_dram::wait_at(sc_dt::uint64 at)
{
    if (seq)
        seq->seq_wait(at);
    else if (abort_ev)
        wait(sc_time::from_value(at) - stamp(), *abort_ev);
    else
        wait(sc_time::from_value(at) - stamp());
}


// (inline: a low-priority read asks once or twice per burst)
inline __attribute__((always_inline)) double tsr_sc_dram::rd_slot_at(double t)
{
    while (!rq_.empty() && rq_.front() <= t)
        rq_.pop_front();
    return rq_.size() >= p.outstanding ? rq_[rq_.size() - p.outstanding] : t;
}

double tsr_sc_dram::serve(bool wr, unsigned len, tsr_sc_axi_ext *x, sc_dt::uint64 *d)
{
    const unsigned beats = (len + (unsigned)bus - 1) / (unsigned)bus;
    double t = *d ? cyc_of(now_ticks() + *d) : now_cyc(); // (the same quotient: no offset, the clock's)
    // Slot: the burst `outstanding` places back must have completed.
    tsr_sc_ring<double> &q = wr ? wq_ : rq_;
    while (!q.empty() && q.front() <= t)
        q.pop_front();
    double issue = t;
    if (q.size() >= p.outstanding)
        issue = std::max(issue, q[q.size() - p.outstanding]);
    // Read priority: a low-priority read (the load stage's prefetch) does
    // not claim a slot ahead of time: it waits until one is free and lets
    // fetch and compute-stage reads that come meanwhile go first, as the
    // RTL's AXI master arbitrates per burst (a wait_slot read waits too).
    while (!wr && x && (!x->high_prio || x->wait_slot) && issue > t + 1e-3) {
        // (at least one time unit: the slot's cycle may round to now)
        const sc_dt::uint64 nt = now_ticks(), it = ticks_of(issue);
        wait_at(it > nt ? it : nt + 1);
        // (No delta wait for high-priority reads of this cycle: the
        // sequencer resumes fetch and compute before the load stage.)
        if (aborting && *aborting) {
            // Device reset: the burst is dropped before it claims a slot.
            // The transaction ends here (no exception through the socket:
            // the initiator sees the abort and unwinds its own frame).
            *d = 0;
            return -1;
        }
        *d = 0;
        t = now_cyc();
        while (!q.empty() && q.front() <= t)
            q.pop_front();
        issue = t;
        if (q.size() >= p.outstanding)
            issue = std::max(issue, q[q.size() - p.outstanding]);
    }
    const double beat_t = std::max(1.0, bus / p.bytes_per_cycle); // channel time per beat
    const double bw_t = bus / p.bytes_per_cycle;                  // bandwidth time per beat
    double end;
    if (!wr) {
        double s = std::max({issue + p.latency, r_free_, bw_free_ - 4.0 * bw_t});
        end = std::max(s + beats * beat_t, x ? x->min_end : 0.0);
        if (x) {
            // (a consumer that waits for the burst's first element walks on from it)
            if (x->hold_span > 0)
                end = std::max(end, s + x->hold_first + x->hold_span);
            x->data_start = s;
            x->stream_end = s + beats * beat_t;
        }
        r_free_ = end;
        bw_free_ = std::max(bw_free_, s) + beats * bw_t;
        // Data a consumer holds (min_end) stalls the R channel: the slave
        // presents a beat nobody takes, its bucket fills, and writes go at
        // full rate; the beats flow as the consumer takes them, at the end.
        rwin_.push_back({std::max(s, end - beats * beat_t), end});
        if (rwin_.size() > 256)
            rwin_.pop_front();
        rd_bytes += (uint64_t)beats * (uint64_t)bus;
    } else {
        double s = std::max(issue + (x ? x->w_lead : 0.0), w_free_);
        const double bc = std::max(beat_t, x ? x->beat_cycles : 1.0);
        // Past what is known the beats are planned as if no read came; wait
        // in simulated time until the plan is known (the reads that come
        // meanwhile take the bandwidth first, then plan the rest again).
        double last = s, left = (double)beats * bus, credit = credit_at(std::max(s, credit_at_));
        while ((left = write_walk(&last, left, bc, now_cyc() + p.latency, &credit)) > 0) {
            double plan = last, c = credit;
            write_walk(&plan, left, bc, 1e300, &c);
            double wake = std::max(now_cyc() + 1, plan - p.latency);
            wait_at(ticks_of(wake));
            if (aborting && *aborting) {
                *d = 0;
                return -1;
            }
        }
        w_free_ = last;
        credit_ = credit;
        credit_at_ = last;
        bw_free_ = std::max(bw_free_, s) + beats * bw_t;
        end = last + p.latency;
        wr_bytes += (uint64_t)beats * (uint64_t)bus;
    }
    q.push_back(end);
    if (q.size() > 64)
        q.pop_front();
    if (x)
        x->accepted = issue;
    if (x)
        x->end = end;
    *d = ticks_of(end) - now_ticks();
    return issue;
}

void tsr_sc_dram::b_transport(tlm::tlm_generic_payload &gp, sc_time &d)
{
    tsr_sc_axi_ext *x = nullptr;
    gp.get_extension(x);
    const bool wr = gp.is_write();
    const unsigned len = gp.get_data_length();
    sc_dt::uint64 dt = d.value();
    if (serve(wr, len, x, &dt) < 0) {
        gp.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
        d = SC_ZERO_TIME;
        return;
    }
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
    if (!x || !x->timing_only) {
        // A memory access through the socket (a host or another master).
        unsigned char *data = gp.get_data_ptr();
        int rc = wr ? tsr_dram_write(mem, gp.get_address(), data, len)
                    : tsr_dram_read(mem, gp.get_address(), data, len);
        if (rc)
            gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    }
    // The delay returns the completion, the extension the acceptance.
    d = sc_time::from_value(dt);
}

// ------------------------------------------------------------ the accel


// The schedule. The stages share the model clock mnow_ and only one runs
// at a time: each is a fiber (Boost.Context) of the accelerator's one
// SystemC process, the engine. A stage that waits (on time or on a queue)
// calls yield_, which picks the next stage as a SystemC kernel would and
// switches to it, or returns at once when that is the caller (one stage
// running ahead alone, the common case); a switch costs a few dozen
// instructions where a SystemC thread switch through the kernel cost
// hundreds. The order is deterministic: the stages runnable at this time
// first (ready_, in order), then those a queue change woke (next_, the
// next delta cycle, in notification order), then the earliest wake time,
// the stages due then in kSeq order (fetch, compute, load, store): fetch's
// command pushes are seen by the stages' checks in that cycle, and
// compute's reads go before the load stage's, as the RTL's AXI master
// prefers fetch and compute reads. (When the stages were SystemC threads
// with their own timed waits, the order of threads waking at one time was
// the kernel's, which any other process reshuffles: an unrelated thread
// changed the cycles of 3-15% of the programs.) The model clock runs ahead
// of SystemC time by at most the quantum; past it, and when no stage can
// run, control returns to the engine, which waits in SystemC time (other
// processes of a virtual platform run then) for the next wake time, a
// START or a reset.
namespace {
constexpr int kPickSync = -2;
constexpr sc_dt::uint64 kNever = ~(sc_dt::uint64)0;
constexpr size_t kFiberStack = 1 << 20; // bytes per stage fiber (touched pages only)
} // namespace

tsr_sc_accel::tsr_sc_accel(sc_module_name n)
    : sc_module(n), regs("regs"), mem("mem"), fetch_("fetch", this), load_("load", this),
      compute_("compute", this), store_("store", this)
{
    regs.register_b_transport(this, &tsr_sc_accel::reg_transport);
    start_or_abort_ = start_ev | abort_ev;
    seq_clock = &mnow_;
    seq_clock_cyc = &mnow_c_;
    for (int s = 0; s < kSeqN; s++)
        seq_at_[s] = kNever;
    SC_THREAD(engine);
}

int tsr_sc_accel::pick_(sc_dt::uint64 *sync)
{
    if (rd_head_ < rd_n_)
        return ready_[rd_head_++];
    if (nx_n_) { // the next delta cycle
        for (int k = 0; k < nx_n_; k++)
            ready_[k] = next_[k];
        rd_n_ = nx_n_;
        nx_n_ = 0;
        rd_head_ = 1;
        return ready_[0];
    }
    const sc_dt::uint64 t = seq_min_;
    if (t == kNever)
        return -1;
    if (t > stamp().value() + quantum_) {
        *sync = t;
        return kPickSync;
    }
    set_now(std::max(mnow_, t));
    rd_head_ = rd_n_ = 0;
    for (int s = 0; s < kSeqN; s++)
        if (seq_at_[s] == t) {
            seq_at_[s] = kNever;
            ready_[rd_n_++] = s;
        }
    seq_set(ready_[0], kNever); // (the earliest of the rest)
    return ready_[rd_head_++];
}

// Stage s due at t (kNever: not), the earliest wake time kept beside.
void tsr_sc_accel::seq_set(int s, sc_dt::uint64 t)
{
    seq_at_[s] = t;
    sc_dt::uint64 m = seq_at_[0];
    for (int k = 1; k < kSeqN; k++)
        m = std::min(m, seq_at_[k]);
    seq_min_ = m;
}

// From the running context (a stage or the engine) to context n: returns
// when some context switches back to this one.
void tsr_sc_accel::switch_to(int n)
{
    const int me = cur_;
    if (n == me)
        return;
    cur_ = n;
    from_ = me;
    boost::context::fiber back = std::move(fib_[n]).resume();
    fib_[from_] = std::move(back); // (the context that switched to this one)
    cur_ = me;
}

void tsr_sc_accel::yield_(int s)
{
    sc_dt::uint64 sync = 0;
    const int n = aborting ? -1 : pick_(&sync);
    if (n == s)
        return;
    // To the next stage, or to the engine (which waits in SystemC time and
    // picks again).
    switch_to(n >= 0 ? n : kEngine);
}

// (inline: a stage waits a few times per burst, most of them on the fast
// path; the rest out of line)
inline __attribute__((always_inline)) void tsr_sc_accel::wait_ticks(int s, sc_dt::uint64 t, double c)
{
    if (t <= mnow_) // (a time that rounds to now: nothing to wait for)
        return;
    // Nothing runnable now and s alone due first, within the quantum (a
    // stage running ahead alone, most waits): what pick_ would decide,
    // without the round through yield_. (A running stage is due at no
    // time, kNever: the earliest is another's.)
    if (!aborting && rd_head_ >= rd_n_ && !nx_n_ && seq_min_ > t && t <= stamp().value() + quantum_) {
        set_now(t, c);
        ready_[0] = s;
        rd_head_ = rd_n_ = 1;
        return;
    }
    wait_ticks_slow(s, t);
}

void tsr_sc_accel::wait_ticks_slow(int s, sc_dt::uint64 t)
{
    seq_set(s, t);
    yield_(s);
    seq_set(s, kNever); // (woken by an abort: no longer due)
}

// Until SystemC time has reached the model's (a host sees DONE then),
// unless another stage is runnable now.
void tsr_sc_accel::sync_real(int s)
{
    if (mnow_ <= stamp().value() || rd_head_ < rd_n_ || nx_n_)
        return;
    real_sync_ = s;
    switch_to(kEngine);
    if (aborting)
        throw tsr_sc_abort();
}

// The command and token queues empty, no stage on an instruction (a START,
// a reset).
void tsr_sc_accel::clear_queues()
{
    for (int s = 0; s < TSR_STAGE_COUNT; s++) {
        cmdq[s].clear();
        cmdq_slots[s].clear();
        stage_at[s] = -1;
    }
    for (auto &q : tq)
        q.clear();
}

void tsr_sc_accel::sched_clear()
{
    rd_head_ = rd_n_ = nx_n_ = 0;
    real_sync_ = -1;
    for (int s = 0; s < kSeqN; s++)
        seq_at_[s] = kNever;
    seq_min_ = kNever;
    for (auto &c : cmdq_ev)
        c.waiter = -1;
    for (auto &q : tq)
        q.changed.waiter = -1;
}

// A timed wait of the DRAM target, in the calling stage's fiber.
void tsr_sc_accel::seq_wait(sc_dt::uint64 at)
{
    if (cur_ >= kSeqN || sc_get_current_process_b() != engine_proc_) {
        // not a stage (a host's transaction through the DRAM target)
        if (at > stamp().value())
            wait(sc_time::from_value(at) - stamp(), abort_ev);
        return;
    }
    wait_ticks(cur_, at);
}

void tsr_sc_accel::seq_abort() { abort_ev.notify(SC_ZERO_TIME); }

// Each stage's fiber: its module's loop, which never returns (a fiber
// destroyed while suspended unwinds its stack).
boost::context::fiber tsr_sc_accel::make_fiber(int s)
{
    return boost::context::fiber(std::allocator_arg, boost::context::fixedsize_stack(kFiberStack),
                                 [this, s](boost::context::fiber &&from) {
                                     fib_[from_] = std::move(from);
                                     switch (s) {
                                     case kSeqFetch: fetch_.run(); break;
                                     case kSeqLoad: load_.run(); break;
                                     case kSeqCompute: compute_.run(); break;
                                     default: store_.run(); break;
                                     }
                                     return std::move(fib_[kEngine]);
                                 });
}

// The engine: the accelerator's SystemC process. It starts the stages,
// runs the schedule while a stage can run and otherwise waits in SystemC
// time: for the next wake time (a quantum used up), for SystemC time to
// reach the model's (sync_real), or for a START or a reset. A reset (soft
// reset or a failed instruction) unwinds every stage out of its
// instruction, clears the queues and restarts the stages' loops.
void tsr_sc_accel::engine()
{
    engine_proc_ = sc_get_current_process_b();
    cur_ = kEngine;
    for (int s = 0; s < kSeqN; s++) {
        fib_[s] = make_fiber(s);
        switch_to(s); // to its first wait
    }
    for (;;) {
        if (aborting) {
            // Every stage leaves its instruction (a stage parked by its
            // catch is there already), then the state is cleared.
            for (int s = 0; s < kSeqN; s++)
                if (!parked_[s])
                    switch_to(s);
            clear_queues();
            sched_clear();
            if (dram_model)
                dram_model->clear();
            aborting = false;
            start_pending = false;
            if (status_ & TSR_STATUS_RESETTING)
                status_ = 0;
            for (int s = 0; s < kSeqN; s++)
                switch_to(s); // back to the top of its loop, to its first wait
            continue;
        }
        sc_dt::uint64 sync = 0;
        int n = -1;
        const sc_dt::uint64 real = stamp().value();
        set_now(std::max(mnow_, real));
        if (real_sync_ >= 0) {
            if (mnow_ > real) {
                wait(sc_time::from_value(mnow_ - real), abort_ev);
                continue;
            }
            n = real_sync_;
            real_sync_ = -1;
        } else if (start_pending && fetch_idle_) {
            n = kSeqFetch;
        } else {
            n = pick_(&sync);
        }
        if (n >= 0)
            switch_to(n); // the stages run until none can
        else if (n == kPickSync)
            wait(sc_time::from_value(sync - real), start_or_abort_);
        else
            wait(start_or_abort_); // idle (or deadlocked: the driver sees no activity)
    }
}

tsr_sc_accel::~tsr_sc_accel() { tsr_fsim_destroy(fsim); }

int tsr_sc_accel::configure(const tsr_config_t *c, tsr_dram_t *d, const tsr_sc_dram_params &p)
{
    tsr_fsim_destroy(fsim);
    fsim = nullptr;
    cfg = *c;
    dram = d;
    dp = p;
    bus = c->dram_bus_width / 8;
    {
        const sc_time q = tlm::tlm_global_quantum::instance().get();
        quantum_ = q > SC_ZERO_TIME ? q.value() : ticks_of(10000);
    }
    for (auto &q : tq)
        q.depth = q.slots.depth = (unsigned)c->dep_queue_depth;
    for (auto &q : cmdq_slots)
        q.depth = (unsigned)c->cmd_queue_depth;
    status_ = 0;
    decoded_.clear(); // (decoded for the old config)
    decoded_bytes_ = 0;
    return tsr_fsim_create(c, d, &fsim);
}

// While no stage runs (the model waits for SystemC time) the model is where
// SystemC time is.
double tsr_sc_accel::host_now() const { return cyc_of(std::max(mnow_, stamp().value())); }

// (inline: a stage waits several times per burst)
inline __attribute__((always_inline)) void tsr_sc_accel::wait_until(double cyc)
{
    double n = now();
    if (cyc > n + 1e-9)
        wait_ticks(cur_, ticks_of(cyc), cyc);
    if (aborting)
        throw tsr_sc_abort();
}

// In stage s's catch: park until the engine has cleared the state.
void tsr_sc_accel::idle_after_abort(int s)
{
    parked_[s] = true;
    switch_to(kEngine);
    parked_[s] = false;
}

// Fetch waits for a START (the other stages go on meanwhile).
void tsr_sc_accel::wait_start()
{
    fetch_idle_ = true;
    yield_(kSeqFetch);
    fetch_idle_ = false;
    if (aborting)
        throw tsr_sc_abort();
}

void tsr_sc_accel::wait_ev(tsr_sc_cond &c)
{
    const int s = cur_;
    c.waiter = s;
    yield_(s); // (not picked again before a notification)
    if (c.waiter == s)
        c.waiter = -1;
    if (aborting)
        throw tsr_sc_abort();
}

void tsr_sc_accel::wait_ev_until(tsr_sc_cond &c, double cyc)
{
    const int s = cur_;
    const sc_dt::uint64 t = ticks_of(cyc);
    if (t > mnow_) {
        c.waiter = s;
        seq_set(s, t);
        yield_(s);
        seq_set(s, kNever);
        if (c.waiter == s)
            c.waiter = -1;
        // Woken by one of the two: a wake-up by the other queued meanwhile
        // (due at this time and notified) must not resume a later wait.
        int n = rd_head_;
        for (int k = rd_head_; k < rd_n_; k++)
            if (ready_[k] != s)
                ready_[n++] = ready_[k];
        rd_n_ = n;
        n = 0;
        for (int k = 0; k < nx_n_; k++)
            if (next_[k] != s)
                next_[n++] = next_[k];
        nx_n_ = n;
    }
    if (aborting)
        throw tsr_sc_abort();
}

void tsr_sc_accel::notify(tsr_sc_cond &c)
{
    if (c.waiter >= 0) {
        next_[nx_n_++] = c.waiter;
        c.waiter = -1;
    }
}

tsr_sc_cmd tsr_sc_accel::take_cmd(int st, double floor, double *lt)
{
    while (cmdq[st].empty())
        wait_ev(cmdq_ev[st]);
    tsr_sc_cmd c = cmdq[st].front();
    if (lt)
        *lt = std::max({*lt, floor, c.at, now()});
    else
        wait_until(std::max(c.at, floor));
    cmdq[st].pop_front();
    cmdq_slots[st].popped(lt ? *lt : now());
    notify(cmdq_ev[st]);
    stage_at[st] = (long)c.idx;
    return c;
}

// The token queues an instruction of a stage pops and pushes.
static int pop_q(int st, int next) { return st == TSR_STAGE_LOAD ? TSR_Q_C2L : st == TSR_STAGE_STORE ? TSR_Q_C2S : next ? TSR_Q_S2C : TSR_Q_L2C; }
static int push_q(int st, int next) { return st == TSR_STAGE_LOAD ? TSR_Q_L2C : st == TSR_STAGE_STORE ? TSR_Q_S2C : next ? TSR_Q_C2S : TSR_Q_C2L; }

void tsr_sc_accel::pop_tokens(const tsr_insn_t &in, int st, double *stall, double *lt)
{
    int qs[2], n = 0;
    if (in.pop_prev)
        qs[n++] = pop_q(st, 0);
    if (in.pop_next)
        qs[n++] = pop_q(st, 1);
    if (lt) {
        // On the stage's own clock: wait (in simulated time) only for a
        // token that is not there yet; a token only this stage pops stays
        // visible, so one pass over the queues suffices.
        const double t0 = std::max(*lt, now());
        double t = t0;
        for (int k = 0; k < n; k++) {
            tsr_sc_tokq &q = tq[qs[k]];
            while (q.tok.empty())
                wait_ev(q.changed);
            t = std::max({t, q.tok.front(), now()});
        }
        take_tokens(qs, n, t, stall, t0, st);
        *lt = t;
        return;
    }
    const double t0 = now();
    for (;;) {
        bool ok = true;
        for (int k = 0; k < n && ok; k++) {
            tsr_sc_tokq &q = tq[qs[k]];
            if (q.tok.empty()) {
                wait_ev(q.changed);
                ok = false;
            } else if (q.tok.front() > now() + 1e-9) {
                wait_until(q.tok.front());
                ok = false;
            }
        }
        if (ok)
            break;
    }
    take_tokens(qs, n, now(), stall, t0, st);
}

// The tokens of queues qs[0..n) taken at cycle t (their slots free from
// then), the wait since t0 counted as a stall and drawn on the timeline.
void tsr_sc_accel::take_tokens(const int *qs, int n, double t, double *stall, double t0, int st)
{
    for (int k = 0; k < n; k++) {
        tq[qs[k]].tok.pop_front();
        tq[qs[k]].slots.popped(t);
        notify(tq[qs[k]].changed);
    }
    if (stall)
        *stall += t - t0;
    if (tl)
        tsr_tl_wait(tl, st, t0, t);
}

double tsr_sc_accel::push_tokens(const tsr_insn_t &in, int st, double at)
{
    int qs[2], n = 0;
    if (in.push_prev)
        qs[n++] = push_q(st, 0);
    if (in.push_next)
        qs[n++] = push_q(st, 1);
    for (int k = 0; k < n; k++) {
        tsr_sc_tokq &q = tq[qs[k]];
        const double w0 = now();
        while (q.tok.size() >= q.depth)
            wait_ev(q.changed);
        // (A stage that pushes ahead of `at` waits only from then.)
        if (now() > std::max(w0, at))
            if (tl)
                tsr_tl_wait(tl, st, std::max(w0, at), now());
        // (the slot is free from its pop, which may be ahead of simulated time)
        const double slot = std::max(now(), q.slots.next_free());
        double v = std::max(at, slot) + kTokLat;
        if (!q.tok.empty())
            v = std::max(v, q.tok.back());
        q.tok.push_back(v);
        q.slots.pushed();
        notify(q.changed);
        at = std::max(at, slot);
    }
    return at;
}

template <class Between, class Pace>
double tsr_sc_accel::axi(bool write, bool high, uint64_t addr, uint64_t bytes, sc_dt::uint64 *local, double beat_cycles,
                         Between *between, Pace *pace, bool blocks)
{
    constexpr bool kBetween = !std::is_same<Between, tsr_sc_nofn>::value, kPace = !std::is_same<Pace, tsr_sc_nofn>::value;
    const uint64_t b = (uint64_t)bus;
    uint64_t a = addr / b * b, end = (addr + bytes + b - 1) / b * b;
    double last = now();
    // A payload from the pool (one per stage in a burst at a time: a
    // payload allocates its extension table, a malloc per burst otherwise);
    // back to the pool on every exit, the abort (a tsr_sc_abort thrown out
    // of the loop on a device reset) included. Its extension is its own
    // (heap, freed with it).
    struct pooled {
        std::vector<std::unique_ptr<tsr_sc_burst>> &pool;
        std::unique_ptr<tsr_sc_burst> b;
        ~pooled() { pool.push_back(std::move(b)); }
    } pb{burst_pool_, nullptr};
    if (!burst_pool_.empty()) {
        pb.b = std::move(burst_pool_.back());
        burst_pool_.pop_back();
    } else {
        pb.b.reset(new tsr_sc_burst);
    }
    tlm::tlm_generic_payload &gp = pb.b->gp;
    tsr_sc_axi_ext &ext = *pb.b->ext;
    // (the direct DRAM model's delay counts from this model's clock, mnow_)
    const bool end_exact = mem_direct && mem_direct->seq == this && seq_clock == &mnow_;
    while (a < end) {
        uint64_t n = std::min<uint64_t>(end - a, kBurstBeats * b);
        if (blocks)
            n = std::min<uint64_t>(n, kBurstBeats * b - a % (kBurstBeats * b));
        uint64_t page = (a | 4095) + 1; // no burst crosses 4 KiB
        n = std::min(n, page - a);
        ext.high_prio = high;
        // A compute LOAD of elements at least a beat wide (its writer paces
        // the reads) does not claim a DRAM read slot ahead of time: its
        // request waits at the AXI master, whose round robin among the
        // high-priority ports lets a fetch that comes meanwhile go first
        // (tiny_exact program 103: the fetch's burst at 208 on the RTL).
        ext.wait_slot = high && kPace && !blocks;
        ext.timing_only = 1;
        ext.beat_cycles = beat_cycles;
        // (a store's first beat: a cycle after its address, the row read
        // behind it; narrow rows' beats take that cycle anyway)
        ext.w_lead = write && a == addr / b * b ? std::max(0.0, 2 - beat_cycles) : 0;
        if constexpr (kPace) {
            // Not requested before the reader has room for it.
            const double nb = (*pace)(a + n, -2), at = now() + local_cyc(*local);
            if (nb > at + 1e-9) {
                if (nb - now() > kQuantum) {
                    // (waiting in simulated time: `between` still runs when due)
                    while (now() < nb - 1e-9) {
                        double w = nb;
                        if constexpr (kBetween) {
                            const double d = (*between)();
                            if (d > now() + 1e-9)
                                w = std::min(w, d);
                        }
                        wait_until(w);
                    }
                    if constexpr (kBetween)
                        (*between)();
                    *local = 0;
                } else {
                    *local = ticks_of(nb - now());
                }
            }
        }
        if (!write && !high && *local > 0) {
            // A low-priority read ahead of simulated time waits for it: the
            // DRAM serves bursts in call order, so a fetch or compute read
            // of an earlier cycle made later would queue behind it.
            const double at = now() + local_cyc(*local);
            while (now() < at - 1e-9) {
                double w = at;
                if constexpr (kBetween) {
                    const double d = (*between)();
                    if (d > now() + 1e-9)
                        w = std::min(w, d);
                }
                wait_until(w);
            }
            *local = 0;
        }
        if (kBetween && !write && !high && mem_direct) {
            // A low-priority read waits for a free slot here, where the
            // stage's back completes its instructions (their pushes) when
            // due meanwhile, rather than inside the DRAM target.
            for (;;) {
                const double at = now() + local_cyc(*local), sl = mem_direct->rd_slot_at(at);
                if (sl <= at + 1e-9)
                    break;
                double w = sl;
                const double d = (*between)();
                if (d > now() + 1e-9)
                    w = std::min(w, d);
                wait_until(w);
                *local = 0;
            }
        }
        ext.hold_first = ext.hold_span = 0;
        ext.min_end = 0;
        ext.end = -1;
        if constexpr (kPace) {
            // (with the earliest last beat, a walker's hold relative to the data)
            hold_first_ = hold_span_ = 0;
            ext.min_end = (*pace)(a + n, -1);
            ext.hold_first = hold_first_;
            ext.hold_span = hold_span_;
        }
        sc_dt::uint64 dt = *local;
        if (mem_direct) {
            mem_direct->serve(write, (unsigned)n, &ext, &dt);
        } else {
            gp.set_command(write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
            gp.set_address(a);
            gp.set_data_ptr(nullptr);
            gp.set_data_length((unsigned)n);
            gp.set_streaming_width((unsigned)n);
            gp.set_byte_enable_ptr(nullptr);
            gp.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
            sc_time d = sc_time::from_value(*local);
            mem->b_transport(gp, d);
            dt = d.value();
        }
        if (aborting) // reset while the burst waited for a slot (dropped)
            throw tsr_sc_abort();
        double issue = ext.accepted;
        // The completion's cycle as the target reports it, where it is
        // provably the delay's end (mnow_ + dt = ticks_of(ext.end)): the DRAM
        // model called directly on this model's clock (end_exact), else
        // checked (a target without the sequencer counts from SystemC time,
        // an interconnect between may add its own delay); or the division.
        const sc_dt::uint64 end_t = mnow_ + dt;
        const double burst_end =
            ext.end >= 0 && (end_exact || ticks_of(ext.end) == end_t) ? cyc_whole(ext.end, end_t, g_cyc_any) : cyc_of(end_t);
        last = std::max(last, burst_end);
        if constexpr (kPace) {
            rd_start_ = ext.data_start;
            rd_stream_end_ = ext.stream_end;
            (*pace)(a + n, burst_end);
        }
        if (tl)
            tsr_tl_burst(tl, write ? TSR_TL_WR : TSR_TL_RD, issue, burst_end, a, (uint32_t)n);
        // Next address one cycle after this one was accepted.
        double loc = issue + 1 - now();
        *local = ticks_of(std::max(0.0, loc));
        if (loc > kQuantum) { // quantum used up: synchronise
            wait_until(issue + 1);
            *local = 0;
        }
        a += n;
        if constexpr (kBetween)
            (*between)();
    }
    if (write)
        hw[TSR_CNT_DRAM_WR_BYTES] += end - addr / b * b;
    else
        hw[TSR_CNT_DRAM_RD_BYTES] += end - addr / b * b;
    return last;
}

void tsr_sc_accel::fail(int rc, const std::string &msg)
{
    if (!err_rc_) {
        err_rc_ = rc;
        err_msg_ = msg;
    }
    status_ = (status_ & ~TSR_STATUS_BUSY) | TSR_STATUS_DONE | TSR_STATUS_ERR;
    run_end = now();
    tsr_tl_run_end(tl, run_end);
    aborting = true; // the other stages stop at their next wait
    abort_ev.notify(SC_ZERO_TIME);
    seq_abort();
    done_ev.notify(SC_ZERO_TIME);
    sc_pause();
    throw tsr_sc_abort();
}

void tsr_sc_accel::exec(const tsr_insn_t &in, uint32_t idx, const char *stage)
{
    tsr_err_clear();
    int rc = tsr_fsim_exec(fsim, &in);
    if (rc) {
        char pre[96];
        snprintf(pre, sizeof pre, "systemc: %s stage: insn #%u (%s): ", stage, idx, tsr_opcode_name(in.opcode));
        fail(rc, pre + std::string(tsr_errmsg()));
    }
}

void tsr_sc_accel::finish(double at)
{
    wait_until(at + kFinish);
    sync_real(kSeqCompute);
    run_end = now();
    tsr_tl_run_end(tl, run_end);
    status_ = (status_ & ~TSR_STATUS_BUSY) | TSR_STATUS_DONE;
    // End-of-run checks (as tsr_rtl's): no token left in a queue.
    for (int q = 0; q < 4; q++)
        if (!tq[q].tok.empty()) {
            err_rc_ = TSR_EVERIFY;
            err_msg_ = "systemc: token imbalance: " + std::to_string(tq[q].tok.size()) +
                       " token(s) left in queue " + tsr_queue_name(q) + " at FINISH";
            status_ |= TSR_STATUS_ERR;
            break;
        }
    done_ev.notify(SC_ZERO_TIME);
    sc_pause();
}

void tsr_sc_accel::reset()
{
    aborting = true;
    abort_ev.notify(SC_ZERO_TIME);
    seq_abort();
}

uint64_t tsr_sc_accel::run_cycles() const
{
    double e = (status_ & TSR_STATUS_DONE) ? run_end : host_now();
    return (uint64_t)round_ll(e - run_start);
}

std::string tsr_sc_accel::where() const
{
    char buf[256];
    snprintf(buf, sizeof buf, "fetched %u of %u; load at #%ld, compute at #%ld, store at #%ld; tokens %zu/%zu/%zu/%zu",
             fetched, insn_count_, stage_at[0], stage_at[1], stage_at[2], tq[0].tok.size(), tq[1].tok.size(),
             tq[2].tok.size(), tq[3].tok.size());
    return buf;
}

// ---------------------------------------------------------- registers

uint32_t tsr_sc_accel::reg_read(uint32_t addr)
{
    switch (addr) {
    case TSR_REG_AP_CTRL: {
        bool done_ev = (status_ & TSR_STATUS_DONE) && !ap_read_;
        ap_read_ = ap_read_ || (status_ & TSR_STATUS_DONE);
        return (running() ? TSR_AP_START : 0) | (done_ev ? TSR_AP_DONE | TSR_AP_READY : 0) |
               (status_ & (TSR_STATUS_BUSY | TSR_STATUS_RESETTING) ? 0 : TSR_AP_IDLE) | auto_;
    }
    case TSR_REG_GIE: return gie_;
    case TSR_REG_IER: return ier_;
    case TSR_REG_ISR: return (status_ & TSR_STATUS_DONE) && !isr_ack_ ? ier_ : 0;
    case TSR_REG_STATUS: return status_;
    case TSR_REG_SOFT_RESET: return (status_ & TSR_STATUS_RESETTING) ? 1 : 0;
    case TSR_REG_INSN_ADDR: return insn_addr_;
    case TSR_REG_INSN_ADDR_HI: return insn_addr_hi_;
    case TSR_REG_INSN_COUNT: return insn_count_;
    case TSR_REG_STAGE_INSNS:
        return (stage_done[0] & 1023u) | (stage_done[1] & 1023u) << 10 | (stage_done[2] & 1023u) << 20;
    case TSR_REG_FETCHED: return fetched;
    case TSR_REG_TOKENS: {
        uint32_t v = 0;
        for (int q = 0; q < 4; q++)
            v |= (uint32_t)std::min<size_t>(tq[q].tok.size(), 255) << (8 * q);
        return v;
    }
    case TSR_REG_UNITS: {
        uint32_t v = 0;
        if (running()) {
            if (fetched < insn_count_)
                v |= 1u << TSR_UNIT_FETCH;
            for (int s = 0; s < TSR_STAGE_COUNT; s++)
                if (stage_at[s] >= 0)
                    v |= 1u << (TSR_UNIT_LOAD + s);
        }
        if (status_ & TSR_STATUS_ERR)
            v |= 1u << (8 + TSR_UNIT_COMPUTE);
        return v;
    }
    default: break;
    }
    if (addr >= TSR_REG_COUNTERS && addr < TSR_REG_COUNTERS + 8 * TSR_CNT_COUNT) {
        int k = (int)(addr - TSR_REG_COUNTERS) / 8;
        uint64_t v = k == TSR_CNT_CYCLES ? run_cycles() : hw[k];
        if ((k == TSR_CNT_GEMM_OPS || k == TSR_CNT_ALU_OPS) && running()) {
            int p = k == TSR_CNT_ALU_OPS;
            double left = std::min(op_n[p], op_n[p] - (host_now() - op_t0[p]) / op_step[p]);
            if (left > 0)
                v -= std::min<uint64_t>(v, (uint64_t)left);
        }
        if ((addr & 4) == 0) {
            hi_latch_ = (uint32_t)(v >> 32);
            return (uint32_t)v;
        }
        return hi_latch_;
    }
    return 0;
}

void tsr_sc_accel::reg_write(uint32_t addr, uint32_t v)
{
    switch (addr) {
    case TSR_REG_INSN_ADDR: insn_addr_ = v; break;
    case TSR_REG_INSN_ADDR_HI: insn_addr_hi_ = v; break;
    case TSR_REG_INSN_COUNT: insn_count_ = v; break;
    case TSR_REG_GIE: gie_ = v & 1; break;
    case TSR_REG_IER: ier_ = v & 3; break;
    case TSR_REG_ISR: isr_ack_ = isr_ack_ || (v & ier_); break;
    case TSR_REG_SOFT_RESET:
        if (v & TSR_SOFT_RESET) {
            status_ = TSR_STATUS_RESETTING;
            auto_ = 0;
            ap_read_ = isr_ack_ = false;
            reset();
        }
        break;
    case TSR_REG_AP_CTRL:
        auto_ = v & TSR_AP_AUTO_RESTART;
        if ((v & TSR_AP_START) && !(status_ & (TSR_STATUS_RESETTING | TSR_STATUS_BUSY))) {
            ap_read_ = isr_ack_ = false;
            // START: counters reset, the stream decoded for the stages.
            memset(hw, 0, sizeof hw);
            err_rc_ = 0;
            err_msg_.clear();
            gen++;
            fetched = 0;
            for (int s = 0; s < TSR_STAGE_COUNT; s++)
                stage_done[s] = 0;
            clear_queues();
            set_now(std::max(mnow_, stamp().value()));
            run_start = now();
            run_end = run_start;
            status_ = TSR_STATUS_BUSY;
            // The decoded stream of an earlier START with the same bytes (the
            // graph runtime submits the same planned streams on every
            // execution: decoding was a seventh of a timing-only ResNet-18).
            const uint64_t nb = (uint64_t)insn_count_ * TSR_INSN_BYTES;
            const uint8_t *raw = tsr_dram_ptr(dram, insn_addr_, nb);
            decoded_stream *hit = nullptr;
            uint64_t key = 0;
            if (raw) {
                key = 0x9e3779b97f4a7c15ull ^ nb;
                for (uint64_t k = 0; k + 8 <= nb; k += 8) {
                    uint64_t w;
                    memcpy(&w, raw + k, 8);
                    key = (key ^ w) * 0xff51afd7ed558ccdull;
                    key ^= key >> 29;
                }
                auto it = decoded_.find(key);
                if (it != decoded_.end() && it->second.raw.size() == nb && !memcmp(it->second.raw.data(), raw, nb))
                    hit = &it->second;
            }
            if (hit)
                insns = hit->insns;
            else
                insns.assign(insn_count_, tsr_insn_t{});
            for (uint32_t i = 0; i < insn_count_ && !hit; i++) {
                uint8_t b[TSR_INSN_BYTES];
                tsr_insn_bits_t bits;
                // (the bytes in place where DRAM has them in one piece)
                int rc = raw ? 0 : tsr_dram_read(dram, (uint64_t)insn_addr_ + (uint64_t)i * TSR_INSN_BYTES, b, sizeof b);
                if (!rc) {
                    tsr_insn_bits_load(raw ? raw + (size_t)i * TSR_INSN_BYTES : b, &bits);
                    rc = tsr_insn_decode(&cfg, &bits, &insns[i]);
                }
                if (rc) {
                    err_rc_ = rc;
                    err_msg_ = "systemc: fetch: insn #" + std::to_string(i) + ": " + tsr_errmsg();
                    status_ = TSR_STATUS_DONE | TSR_STATUS_ERR;
                    done_ev.notify(SC_ZERO_TIME);
                    return;
                }
            }
            // Remembered (the decode is a function of the config and the
            // bytes: configure forgets them), up to a bound on the memory.
            if (!hit && raw && nb <= kDecodedMax) {
                if (decoded_bytes_ + nb > kDecodedMax) {
                    decoded_.clear();
                    decoded_bytes_ = 0;
                }
                decoded_stream &e = decoded_[key];
                decoded_bytes_ -= e.raw.size();
                e.raw.assign(raw, raw + nb);
                e.insns = insns;
                decoded_bytes_ += nb;
            }
            if (tsr_tl_run_begin(tl, &cfg, insns.data(), insn_count_, run_start))
                tl = nullptr; // out of memory: the timeline stops (it reports on close)
            start_pending = true;
            start_ev.notify(SC_ZERO_TIME);
        }
        break;
    default: break;
    }
}

void tsr_sc_accel::reg_transport(tlm::tlm_generic_payload &gp, sc_time &d)
{
    uint32_t addr = (uint32_t)gp.get_address();
    if (gp.get_data_length() != 4 || (addr & 3) || addr >= TSR_REG_MAP_BYTES) {
        gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
        return;
    }
    uint32_t v;
    if (gp.is_write()) {
        memcpy(&v, gp.get_data_ptr(), 4);
        reg_write(addr, v);
    } else {
        v = reg_read(addr);
        memcpy(gp.get_data_ptr(), &v, 4);
    }
    d += cyc_time(2); // an AXI4-Lite access takes a few cycles
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
}

// -------------------------------------------------------------- fetch

tsr_sc_fetch::tsr_sc_fetch(sc_module_name n, tsr_sc_accel *a) : sc_module(n), a_(a) {}

void tsr_sc_fetch::run()
{
    for (;;) {
        try {
            while (!a_->start_pending)
                a_->wait_start();
            a_->start_pending = false;
            tsr_sc_accel &A = *a_;
            const uint32_t n = (uint32_t)A.insns.size();
            const uint64_t bus = (uint64_t)A.bus;
            const uint32_t per_chunk = (uint32_t)std::max<uint64_t>(1, kBurstBeats * bus / TSR_INSN_BYTES);
            // Cycle each of the last two chunks' reserved room is back (the
            // reader's credit, tsr_dma_rd_elems): its last beat left the
            // buffer for the instruction register (with two beats per
            // instruction, when the instruction before it was dispatched,
            // then one more cycle; one beat: then; several instructions per
            // beat: when the last is dispatched), plus the cycles from the
            // credit to the AR (kFetchReq). The first two chunks' ARs go
            // kFetchStart cycles after START.
            double drained[2] = {A.now() + kFetchStart, A.now() + kFetchStart};
            const double t_start = A.now();
            double disp = t_start;
            dispv_.assign(n, t_start); // each instruction's dispatch
            std::vector<double> &dispv = dispv_;
            const double ibeats = (double)TSR_INSN_BYTES / (double)bus; // beats per instruction
            // The chunks' requests go when their room is back, also while
            // fetch waits to dispatch the chunk before (a full command
            // queue): the reader requests by its credit, not by dispatch.
            const uint32_t nch = (n + per_chunk - 1) / per_chunk;
            uint32_t nreq = 0; // chunks requested
            double clast[2] = {0, 0}; // each one's last beat
            auto request = [&](uint32_t j) {
                A.wait_until(drained[j & 1]); // buffer room reserved for this chunk
                sc_dt::uint64 local = 0;
                const uint32_t cj = j * per_chunk;
                const uint64_t addr = A.reg_insn_addr() + (uint64_t)cj * TSR_INSN_BYTES;
                clast[j & 1] = A.axi(false, true, addr, (uint64_t)std::min(per_chunk, n - cj) * TSR_INSN_BYTES, &local,
                                     1, kNoFn, kNoFn, true);
                nreq = j + 1;
            };
            // When the next chunk's request is due (never: none left, or its
            // room's time not known yet: chunks up to `known` have it).
            uint32_t known = 1;
            auto due = [&]() { return nreq < nch && nreq <= known ? drained[nreq & 1] : 1e300; };
            for (uint32_t c0 = 0, k = 0; c0 < n; c0 += per_chunk, k++) {
                uint32_t cn = std::min(per_chunk, n - c0);
                if (nreq == k)
                    request(k);
                while (due() <= A.now() + 1e-9)
                    request(nreq);
                // Chunk k + 2 needs as many beats of room as it has: those
                // of chunk k up to its own length (a last, short chunk
                // needs fewer), back once instruction j's last beat has
                // left the buffer: with a beat or more per instruction when
                // the one before it was dispatched (j then waits in the
                // element register, its beats taken, also while a full
                // command queue holds it), else when j was.
                uint32_t j = UINT32_MAX;
                if (k + 2 < nch) {
                    const uint32_t c2 = (k + 2) * per_chunk, n2 = std::min(per_chunk, n - c2);
                    const uint64_t b2 = ((uint64_t)n2 * TSR_INSN_BYTES + bus - 1) / bus;
                    j = c0 + std::min<uint32_t>(cn, (uint32_t)((b2 * bus + TSR_INSN_BYTES - 1) / TSR_INSN_BYTES)) - 1;
                }
                auto room_back = [&](uint32_t done) { // instruction `done` dispatched (UINT32_MAX: before any)
                    if (j == UINT32_MAX || known >= k + 2)
                        return;
                    if (ibeats >= 1 ? done + 1 != j && !(done == UINT32_MAX && j == c0) : done != j)
                        return;
                    const double dj = dispv[j], dp = j ? dispv[j - 1] : t_start;
                    drained[k & 1] = (ibeats >= 2 ? dp + 1 : ibeats >= 1 ? dp : dj) + kFetchReq;
                    known = k + 2;
                };
                room_back(UINT32_MAX);
                double last = clast[k & 1];
                double first = last - (double)((cn * TSR_INSN_BYTES + bus - 1) / bus) + 1;
                for (uint32_t i = 0; i < cn; i++) {
                    uint32_t idx = c0 + i;
                    double arrive = first + (double)((i + 1) * TSR_INSN_BYTES + bus - 1) / (double)bus - 1;
                    disp = std::max(disp + 1, std::ceil(arrive) + 1);
                    int st = (int)tsr_insn_stage(&A.insns[idx]);
                    if (A.cmdq[st].size() >= (size_t)A.cfg.cmd_queue_depth) {
                        // Full: wait for the pop that frees a slot (no wait
                        // for `disp` first: the entry's visibility follows
                        // from disp, whenever it is pushed).
                        while (A.cmdq[st].size() >= (size_t)A.cfg.cmd_queue_depth) {
                            const double d = due();
                            if (d <= A.now() + 1e-9)
                                request(nreq);
                            else if (d < 1e300)
                                A.wait_ev_until(A.cmdq_ev[st], d);
                            else
                                A.wait_ev(A.cmdq_ev[st]);
                        }
                        A.hw[TSR_CNT_FETCH_STALL] += (uint64_t)round_ll(std::max(0.0, A.now() - disp));
                        disp = std::max(disp, A.now());
                    }
                    // A slot freed by a pop ahead of simulated time (the
                    // compute stage's clock) is free only from then, and
                    // fetch goes on only then, as if the queue had been full
                    // until that pop: the load stage reads how far fetch has
                    // come in simulated time (its next command), and fetch
                    // running ahead there moved 70 of 100 tiny programs,
                    // mean |err| 1.70 -> 1.86%; waiting here, 2 of 100.
                    const double slot = A.cmdq_slots[st].next_free();
                    if (slot > disp) {
                        A.hw[TSR_CNT_FETCH_STALL] += (uint64_t)round_ll(slot - std::max(disp, A.now()));
                        disp = slot;
                    }
                    while (due() < slot)
                        request(nreq);
                    A.wait_until(slot);
                    A.cmdq[st].push_back({idx, disp + kCmdLat});
                    A.cmdq_slots[st].pushed();
                    A.notify(A.cmdq_ev[st]);
                    if (A.tl)
                        tsr_tl_fetch(A.tl, disp);
                    A.fetched = idx + 1;
                    dispv[idx] = disp;
                    room_back(idx);
                }
            }
        } catch (tsr_sc_abort &) {
            a_->idle_after_abort(tsr_sc_accel::kSeqFetch);
        }
    }
}

// --------------------------------------------------------------- load

tsr_sc_load::tsr_sc_load(sc_module_name n, tsr_sc_accel *a) : sc_module(n), a_(a) {}

// The 32-beat reservation of a load-stage reader of elements narrower than
// a beat (tsr_dma_rd_elems' credit) spans instructions: beats requested for
// an earlier instruction and not yet taken by the back hold room too. Per
// reader, the beats requested so far and, per instruction, the range of
// them and when the back starts taking them (one element per cycle).
struct tsr_sc_rsv {
    struct seg {
        double lo, hi, t0;
    };
    double beats = 0;         // beats requested so far (the reader's count)
    tsr_sc_ring<seg> segs;    // instructions' beats [lo, hi) taken from t0 on
    // When beat `need` (counted as `beats`) is taken, elements of bpe beats.
    double taken(double need, double bpe) const
    {
        for (size_t k = segs.size(); k > 0; k--)
            if (segs[k - 1].lo <= need)
                return segs[k - 1].t0 + (std::min(need, segs[k - 1].hi) - segs[k - 1].lo) / bpe;
        return 0;
    }
    void add(double n, double t0)
    {
        segs.push_back({beats, beats + n, t0});
        beats += n;
        while (segs.size() > 1 && segs[1].hi <= beats - 32) // (none older is needed)
            segs.pop_front();
    }
};

// Reads of one LOAD/STORE's rows: one command per row, contiguous rows merged.
// (`between` as axi's: a lambda, or kNoFn)
template <class Between = tsr_sc_nofn>
static double transfer(tsr_sc_accel &A, const tsr_insn_t &in, bool write, bool high, uint32_t eb, sc_dt::uint64 *local,
                       Between *between = kNoFn, double walk0 = -1, double back0 = -1, tsr_sc_rsv *rsv = nullptr,
                       double *taken = nullptr)
{
    // walk0 >= 0: a compute LOAD of elements at least a beat wide (acc):
    // its writer walks the padded rows in order from walk0, one row per
    // cycle, and takes an element's beats only when it reaches it (a
    // 2-beat buffer, no reservation): padding between the data holds the
    // shared R channel (tsr_compute_load), which delays every read behind.
    uint64_t r0 = 0, y0 = 0;
    double wbase = walk0;
    const uint64_t rowlen = (uint64_t)in.x_pad0 + in.x_size + in.x_pad1, nd = (uint64_t)in.x_size * in.y_size;
    // back0 >= 0: a LOAD of the load stage, whose back takes this
    // instruction's elements from back0 on, one per cycle (tsr_load). With
    // elements at least a beat wide there is no reservation either: data
    // the front requested ahead waits in the R channel (holding it) until
    // the back is on its instruction, beyond the reader's 2-beat buffer and
    // its element register (elements of kHoldBpe beats or more: with tiny's
    // 2-beat wgt elements too once the front's request latency, kLoadFront,
    // and the DRAM's call order of reads, axi, were modelled; before, it
    // made the order of compute reads behind them decide whole programs).
    // Narrower elements keep a 32-beat reservation:
    // a burst is requested only once the back has taken enough of the
    // earlier ones (tsr_dma_rd_elems). (`got` -2 asks for the earliest
    // request, -1 for the earliest last beat and counts the burst.)
    const double bus = (double)A.bus, bpe = (double)eb / bus, first = A.now() + A.dp.latency;
    uint64_t bstart = 0;
    double cum = 0;
    // (*taken: when the back has taken the last element, one per cycle from
    // back0 and from each burst's first beat)
    double bnb = 0, left = (double)nd;
    if (taken)
        *taken = back0;
    auto back_fn = [&](uint64_t end, double got) {
        if (got >= 0) {
            if (taken && left > 0) {
                const double ne = std::min(left, bnb * bus / (double)eb);
                *taken = std::max(*taken, got - bnb + 1) + ne;
                left -= ne;
            }
            return 0.0;
        }
        if (got == -2 && bpe >= 1)
            return 0.0;
        const double c = cum + (double)((end - bstart) / (uint64_t)A.bus);
        if (got == -2) {
            if (c > 32)
                return std::max(back0, first) + (c - 32) / bpe;
            // (room the reader's earlier instructions still hold)
            return rsv && rsv->beats + c > 32 ? rsv->taken(rsv->beats + c - 32, bpe) : 0.0;
        }
        bnb = c - cum;
        cum = c;
        bstart = end;
        // (what fits the buffer and the element register does not wait)
        return bpe >= kHoldBpe && c > 2 + bpe ? back0 + c - (2 + bpe) : 0.0;
    };
    // A compute-stage reader of elements narrower than a beat (uop; acc8
    // on narrow configs) keeps tsr_dma_rd_elems' 32-beat reservation too:
    // a 16-beat block is requested once a beat of buffer is free for each
    // of its beats, a beat freed when the writer has taken its last element
    // (one element per cycle from each burst's first beat). With the DRAM
    // busy its data comes a queue of bursts later, so the reader gets about
    // 32 beats per round trip (MobileNetV2's 800-uop depthwise kernels:
    // 39 -> 2,002 cycles on the RTL against the model's 881).
    struct cseg {
        double lo, nb, t0; // beats before it, its beats, its first element taken
    };
    tsr_sc_ring<cseg> csegs;
    double ctake = -1; // the writer's last element taken so far
    auto crsv_fn = [&](uint64_t end, double got) {
        const double c = cum + (double)((end - bstart) / (uint64_t)A.bus);
        if (got == -2) {
            const double need = c - 32; // beats that must have left the buffer
            if (need <= 0)
                return 0.0;
            for (size_t k = csegs.size(); k > 0; k--) {
                const cseg &g = csegs[k - 1];
                if (g.lo < need)
                    return g.t0 + (std::min(need, g.lo + g.nb) - g.lo) / bpe + kRsvReq;
            }
            return 0.0;
        }
        if (got == -1)
            return 0.0;
        const double nb = c - cum, ne = std::min(left, nb * bus / (double)eb);
        const double t0 = std::max(ctake, got - nb - 1); // (its first beat; what the uncontended end, first + rows, counts)
        csegs.push_back({cum, nb, t0});
        ctake = t0 + ne;
        left -= ne;
        cum = c;
        bstart = end;
        if (taken)
            *taken = ctake;
        return 0.0;
    };
    // The walker's burst starts where the one before ended (a row command's
    // bursts are consecutive; r0 starts each).
    uint64_t wa = 0, wr0 = ~(uint64_t)0;
    // With elements of E beats the writer takes an element every E cycles
    // at most: the reader gathers the next element's beats only once the
    // writer has taken the one before (tsr_dma_rd_elems' one element
    // register), a beat a cycle. A row's padding overlaps the first
    // element's gathering but for a cycle's room (kCLoadPadRoom): the
    // first element of the next row goes max(pad + room, E) cycles after
    // the row's last (E 1: one cell per cycle; E 4, random-config program
    // 64: an acc load's burst across a row of 11 pad cells took 24 cycles
    // on the RTL, 18 in the model with the 4-beat elements a cycle apart).
    const double E_w = walk0 >= 0 && eb > (uint32_t)A.bus ? (double)eb / (double)A.bus : 1.0;
    const double rowt = ((double)in.x_size - 1) * E_w +
                        std::max((double)(in.x_pad0 + in.x_pad1) + std::min(kCLoadPadRoom, (double)(in.x_pad0 + in.x_pad1)), E_w);
    auto cell_of = [&](uint64_t g) { // (g: the element's index in the instruction)
        g = std::min<uint64_t>(g, nd ? nd - 1 : 0);
        const uint64_t y = g / in.x_size, x = g % in.x_size;
        return (double)(in.y_pad0 * rowlen + in.x_pad0) + (double)y * rowt + E_w * (double)x;
    };
    auto walk_fn = [&](uint64_t end, double got) {
        if (got == -2)
            return 0.0;
        if (wr0 != r0)
            wa = (wr0 = r0) / (uint64_t)A.bus * (uint64_t)A.bus;
        // Its first element (the first to complete in it), its last, and the
        // element whose take frees the room of its last beat: the reader
        // buffers 2 beats behind a gather register of one element, so with
        // elements of at most 2 beats the last beat goes when the writer has
        // taken the element 1 + 2/E before the last, 2 + E cycles after (E
        // beats per element; wider ones: when it takes the last).
        const uint64_t g0 = (uint64_t)y0 * in.x_size; // (rows read one command each: this row's first)
        const uint64_t l = g0 + (end > r0 + eb ? (end - r0) / eb - 1 : 0);
        const uint64_t lf = g0 + (wa > r0 ? (wa - r0) / eb : 0);
        const double E = (double)eb / bus;
        const uint64_t back = E <= 2 ? 1 + (uint64_t)(2 / E) : 0;
        const double c = E <= 2 ? 2 + E : 0;
        const uint64_t r = l >= lf + back ? l - back : lf;
        const double kf = std::ceil((double)(r0 + (lf - g0 + 1) * eb - wa) / bus);
        if (got == -1) {
            // (and the hold relative to the data, in hold_first_/hold_span_)
            if (l >= lf + back) {
                A.hold_first_ = std::max(1.0, kf);
                A.hold_span_ = cell_of(r) - cell_of(lf) + c;
            }
            return l >= back ? wbase + cell_of(l - back) + c : 0.0;
        }
        // The writer waited for this data: for its first element, or for the
        // stream (the last element with its last beat).
        wbase = std::max({wbase, A.rd_start_ + std::max(1.0, kf) - cell_of(lf), A.rd_stream_end_ - cell_of(l)});
        wa = end;
        return 0.0;
    };
    const bool crsv = walk0 < 0 && back0 < 0 && !write && high && eb < (uint32_t)A.bus && in.mem_type != TSR_MEM_LUT;
    // The pace: the load stage's back (back0), the compute LOAD's walker
    // (walk0) or its reservation (crsv), or none.
    const int pmode = !in.x_size ? 0 : back0 >= 0 ? 1 : walk0 >= 0 ? 2 : crsv ? 3 : 0;
    // A store's source gives one row per cycle: rows narrower than a beat slow its beats.
    const double bc = write ? std::max(1.0, (double)A.bus / (double)eb) : 1.0;
    // Readers of elements narrower than a beat reserve buffer room: their
    // chunks are 16-beat aligned blocks (a LUT's reader has no reservation).
    const bool blocks = !write && eb < (uint32_t)A.bus && in.mem_type != TSR_MEM_LUT;
    double last = A.now();
    if (!in.x_size || !in.y_size)
        return last;
    uint64_t row = (uint64_t)in.x_size * eb;
    auto rows = [&](auto *pace) {
        if (in.x_stride == in.x_size || in.y_size == 1) {
            r0 = (uint64_t)in.dram_base * eb;
            bstart = r0 / (uint64_t)A.bus * (uint64_t)A.bus;
            last = A.axi(write, high, r0, row * in.y_size, local, bc, between, pace, blocks);
        } else {
            for (uint32_t y = 0; y < in.y_size; y++) {
                r0 = ((uint64_t)in.dram_base + (uint64_t)y * in.x_stride) * eb;
                y0 = y;
                bstart = r0 / (uint64_t)A.bus * (uint64_t)A.bus;
                last = std::max(last, A.axi(write, high, r0, row, local, bc, between, pace, blocks));
            }
        }
    };
    if (pmode == 1)
        rows(&back_fn);
    else if (pmode == 2)
        rows(&walk_fn);
    else if (pmode == 3)
        rows(&crsv_fn);
    else
        rows(kNoFn);
    if (rsv && back0 >= 0 && bpe < 1)
        rsv->add(cum, std::max(back0, first));
    if (walk0 >= 0 && nd) // (the writer's last element: its burst went before it with short elements)
        last = std::max(last, wbase + (double)((in.y_pad0 + in.y_size - 1) * rowlen + in.x_pad0 + in.x_size - 1));
    return last;
}

void tsr_sc_load::run()
{
    struct pend_t {
        bool valid = false;
        uint32_t idx = 0;
        double end = 0;
        double t0 = 0; // cycle the stage took it
    } pend;
    tsr_sc_rsv rsv[2]; // the inp and wgt readers' reservations
    double hand = -1;  // cycle the front last waited for the back to take an instruction
    tsr_sc_accel &A = *a_;
    for (;;) {
        try {
            pend.valid = false;
            for (;;) {
                auto finalize = [&]() {
                    if (!pend.valid)
                        return;
                    const tsr_insn_t &in = A.insns[pend.idx];
                    A.wait_until(pend.end);
                    A.exec(in, pend.idx, "load");
                    const double before = A.now();
                    A.push_tokens(in, TSR_STAGE_LOAD, A.now());
                    // Complete at the modelled end (finalize may run later, once
                    // the next instruction's reads are issued), or when a full
                    // token queue let the push through.
                    if (A.tl)
                        tsr_tl_insn(A.tl, TSR_STAGE_LOAD, pend.t0, A.now() > before ? A.now() : pend.end);
                    A.stage_done[TSR_STAGE_LOAD]++;
                    A.stage_at[TSR_STAGE_LOAD] = -1;
                    pend.valid = false;
                };
                // The front takes the next command (and then its pop token)
                // while the back writes the current instruction: wait for it
                // or for the back's end, whichever comes first (the back
                // completes and pushes at its own time meanwhile).
                auto wait_for = [&](tsr_sc_ring<double> *tok, tsr_sc_cond &ev) {
                    for (;;) {
                        const bool empty = tok ? tok->empty() : A.cmdq[TSR_STAGE_LOAD].empty();
                        const double at = empty ? 0 : tok ? tok->front() : A.cmdq[TSR_STAGE_LOAD].front().at;
                        if (!empty && at <= A.now() + 1e-9)
                            return;
                        if (pend.valid && (empty || pend.end < at)) {
                            if (pend.end > A.now() + 1e-9) {
                                if (empty)
                                    A.wait_ev_until(ev, pend.end);
                                else
                                    A.wait_until(pend.end);
                            }
                            if (A.now() >= pend.end - 1e-9)
                                finalize();
                        } else if (empty) {
                            A.wait_ev(ev);
                        } else {
                            A.wait_until(at);
                        }
                    }
                };
                wait_for(nullptr, A.cmdq_ev[TSR_STAGE_LOAD]);
                tsr_sc_cmd c = A.take_cmd(TSR_STAGE_LOAD);
                const tsr_insn_t &in = A.insns[c.idx];
                double t0 = A.now(), stall = 0;
                if (in.pop_next) {
                    wait_for(&A.tq[TSR_Q_C2L].tok, A.tq[TSR_Q_C2L].changed);
                    stall += A.now() - t0;
                }
                A.pop_tokens(in, TSR_STAGE_LOAD, &stall);
                if (pend.valid && A.insns[pend.idx].push_next && A.tq[TSR_Q_L2C].tok.size() + A.tq[TSR_Q_L2C].slots.after(A.now()) >= A.tq[TSR_Q_L2C].depth)
                    finalize();
                A.stage_at[TSR_STAGE_LOAD] = (long)c.idx;
                // The front's first request goes kLoadFront cycles after it
                // took the command (decode, pop, issuer, the reader's and the
                // AXI master's queues), kLoadTok after a pop token it waited
                // for (it waited in the pop state).
                // (a cycle more when it took the command as the back took the
                // one before, after waiting for it: tsr_load's front leaves
                // F_RUN the cycle after the hand; timed for elements of 4+
                // beats, see kLoadHand)
                const double hk = hand >= 0 && t0 <= hand + 1e-9 &&
                                          tsr_config_elem_bytes(&A.cfg, (int)in.mem_type) >= 4u * (uint32_t)A.bus
                                      ? kLoadHand
                                      : 0;
                const double lf = std::max(t0 + kLoadFront + hk, A.now() + (A.now() > t0 + 1e-9 ? kLoadTok : 0)) - A.now();
                sc_dt::uint64 local = lf > 0 ? ticks_of(lf) : 0;
                uint32_t eb = tsr_config_elem_bytes(&A.cfg, (int)in.mem_type);
                double t_issue = A.now();
                double prev_end = pend.valid ? pend.end : t_issue;
                // The back completes the previous instruction (its push) when
                // its time comes, also while the front still issues reads
                // that wait for a free slot.
                auto due_fn = [&]() {
                    if (pend.valid && A.now() >= pend.end - 1e-9) {
                        finalize();
                        A.stage_at[TSR_STAGE_LOAD] = (long)c.idx;
                    }
                    return pend.valid ? pend.end : 1e300;
                };
                const double back0 = std::max(prev_end, t_issue);
                double taken = back0;
                double data_end = transfer(A, in, false, false, eb, &local, &due_fn, -1, back0,
                                           &rsv[in.mem_type == TSR_MEM_WGT], &taken);
                {
                    // (the front runs one instruction ahead of the back: it
                    // takes the next command once the back has this one)
                    const double before = A.now();
                    finalize();
                    hand = A.now() > before + 1e-9 ? A.now() : -1;
                }
                A.stage_at[TSR_STAGE_LOAD] = (long)c.idx;
                uint64_t rows = in.x_size ? (uint64_t)(in.y_pad0 + in.y_size + in.y_pad1) * (in.x_pad0 + in.x_size + in.x_pad1) : 0;
                // The back writes one row per cycle from when it has the
                // instruction: data elements as they arrive (one per cycle
                // from the first data, priority), pad rows in the other
                // cycles, also before the first data comes (tsr_load's pad
                // walker).
                // The pad walker steps over each data row in a cycle of its
                // own and loses the cycles the data walker writes in while
                // it walks: data that comes before it is done cost it all
                // their cycles.
                double first = in.x_size && in.y_size ? t_issue + A.dp.latency : t_issue; // (no data: no read)
                const double nd = (double)in.x_size * in.y_size, s0 = std::max(prev_end, t_issue);
                double walk = s0 + (double)rows;
                if ((double)rows > nd && nd > 0) {
                    const double alone = s0 + ((double)rows - nd) + in.y_size;
                    walk = first < alone ? alone + nd : alone;
                }
                double back = std::max(walk, first + nd);
                // The back takes one element per cycle from each burst's
                // first beat: narrow elements come faster than it takes
                // them (the last is taken at `taken` - 1; its push follows
                // sooner than kLoadBack after a last beat).
                back = std::max(back, taken - 2);
                double end = std::max({data_end + kLoadBack, std::max(first + nd, taken - 2) + kLoadBack, walk + kLoadWalk});
                pend = {true, c.idx, end, t0};
                A.hw[TSR_CNT_LOAD_BUSY] += (uint64_t)round_ll(end - t0);
                A.hw[TSR_CNT_LOAD_STALL_TOK] += (uint64_t)round_ll(stall);
                A.hw[TSR_CNT_LOAD_STALL_MEM] += (uint64_t)round_ll(std::max(0.0, data_end - back));
            }
        } catch (tsr_sc_abort &) {
            a_->idle_after_abort(tsr_sc_accel::kSeqLoad);
        }
    }
}

// ------------------------------------------------------------ compute

tsr_sc_compute::tsr_sc_compute(sc_module_name n, tsr_sc_accel *a) : sc_module(n), a_(a) {}

namespace {
// What one GEMM/ALU instruction touches in the accumulator: bank bits.
unsigned footprint(const tsr_sc_accel &A, const tsr_insn_t &in)
{
    if (in.uop_end > A.cfg.uop_depth)
        return 3;
    if (in.uop_bgn >= in.uop_end || !in.iter_out || !in.iter_in)
        return 0; // no ops: no bank (tsr_compute_pipe's empty_insn)
    const tsr_uop_t *u = tsr_fsim_uops(A.fsim);
    uint64_t lo = UINT64_MAX, hi = 0, slo = UINT64_MAX, shi = 0;
    for (uint32_t k = in.uop_bgn; k < in.uop_end; k++) {
        lo = std::min<uint64_t>(lo, u[k].dst);
        hi = std::max<uint64_t>(hi, u[k].dst);
        slo = std::min<uint64_t>(slo, u[k].src);
        shi = std::max<uint64_t>(shi, u[k].src);
    }
    uint64_t io = in.iter_out ? in.iter_out - 1 : 0, ii = in.iter_in ? in.iter_in - 1 : 0;
    hi += io * in.dst_factor_out + ii * in.dst_factor_in;
    shi += io * in.src_factor_out + ii * in.src_factor_in;
    const uint64_t half = A.cfg.acc_depth / 2;
    auto banks = [&](uint64_t a, uint64_t b) {
        return (a < half ? 1u : 0u) | (b >= half ? 2u : 0u) | (a >= half ? 2u : 0u) | (b < half ? 1u : 0u);
    };
    unsigned m = banks(lo, hi);
    if (in.opcode == TSR_OP_ALU && !in.use_imm && !in.reset)
        m |= banks(slo, shi);
    return m;
}
} // namespace

void tsr_sc_compute::run()
{
    tsr_sc_accel &A = *a_;
    for (;;) {
        try {
            // Per-run pipe state (reset on every START: the dispatcher
            // starts from an empty queue after one).
            double pfree[2] = {0, 0}, pend[2] = {0, 0}, pknown[2] = {0, 0}, pops0[2] = {0, 0}, popsend[2] = {0, 0};
            unsigned pbanks[2] = {0, 0};
            double older = 0;
            double floor = 0; // the dispatcher is busy until then (see take_cmd)
            // The dispatcher's own clock: GEMM and ALU instructions touch
            // nothing another stage observes in simulated time (their pops
            // and pushes are stamped with this clock, their data is guarded
            // by tokens), so the stage waits in simulated time only for a
            // command or token that is not there yet, for its DRAM reads
            // (served in call order) and at FINISH.
            double lt = 0;
            uint64_t gen = ~0ull;
            for (;;) {
                tsr_sc_cmd c = A.take_cmd(TSR_STAGE_COMPUTE, floor, &lt);
                if (gen != A.gen) {
                    gen = A.gen;
                    lt = std::max(A.now(), std::max(floor, c.at));
                    pfree[0] = pfree[1] = pend[0] = pend[1] = pknown[0] = pknown[1] = older = lt;
                    pops0[0] = pops0[1] = popsend[0] = popsend[1] = lt;
                    pbanks[0] = pbanks[1] = 0;
                }
                const tsr_insn_t &in = A.insns[c.idx];
                double t0 = lt, stall = 0;
                A.pop_tokens(in, TSR_STAGE_COMPUTE, &stall, &lt);
                A.hw[TSR_CNT_COMPUTE_STALL_TOK] += (uint64_t)round_ll(stall);
                double t = lt + kDispatch;
                if (in.opcode == TSR_OP_FINISH) {
                    t = std::max({t, pfree[0], pfree[1], older});
                    A.wait_until(t);
                    lt = t;
                    A.exec(in, c.idx, "compute");
                    A.push_tokens(in, TSR_STAGE_COMPUTE, t);
                    A.stage_done[TSR_STAGE_COMPUTE]++;
                    A.stage_at[TSR_STAGE_COMPUTE] = -1;
                    A.hw[TSR_CNT_COMPUTE_BUSY] += (uint64_t)round_ll(A.now() - t0);
                    if (A.tl)
                        tsr_tl_insn(A.tl, TSR_STAGE_COMPUTE, t0, A.now());
                    A.finish(A.now());
                    continue;
                }
                if (in.opcode == TSR_OP_LOAD) {
                    // (a lut LOAD, ACT_LUT, is timed as a uop LOAD: its rows are no
                    // accumulator bank's, so it waits for both pipes)
                    bool all = in.mem_type == TSR_MEM_UOP || in.mem_type == TSR_MEM_LUT || in.push_prev ||
                               in.push_next || !in.x_size;
                    unsigned banks = 3;
                    if (!all) {
                        uint64_t rows = (uint64_t)(in.y_pad0 + in.y_size + in.y_pad1) * (in.x_pad0 + in.x_size + in.x_pad1);
                        uint64_t half = A.cfg.acc_depth / 2, lo = in.sram_base, hi = lo + (rows ? rows - 1 : 0);
                        banks = (lo < half ? 1u : 0u) | (hi >= half ? 2u : 0u);
                    }
                    // (a barrier waits until both pipes are free, their
                    // instructions retired; an accumulator LOAD only while a
                    // pipe still has ops in flight in its banks: one whose
                    // ops are done but which waits to push in program order
                    // is no conflict, tsr_compute's ld_conflict)
                    for (int p = 0; p < 2; p++)
                        if (all)
                            t = std::max(t, pfree[p]);
                        else if (pend[p] > t && (pbanks[p] & banks))
                            t = std::max(t, pend[p] + kCLoadConfl);
                    if (all)
                        t = std::max(t, older);
                    // (Its reads wait for t: the DRAM serves bursts in call
                    // order, and issued ahead on a local offset they went
                    // before the load stage's reads of those cycles: tiny
                    // configs' mean |err| 1.70 -> 2.01%.)
                    A.wait_until(t);
                    lt = t;
                    sc_dt::uint64 local = 0;
                    uint32_t eb = tsr_config_elem_bytes(&A.cfg, (int)in.mem_type);
                    const bool wide = eb >= (uint32_t)A.bus && in.mem_type != TSR_MEM_LUT;
                    // Reads start once the writer, one padded row per cycle,
                    // is in the last top padding row (tsr_compute_load).
                    if (in.x_size && in.y_pad0 > 1)
                        A.wait_until(t + (double)(in.y_pad0 - 1) * (in.x_pad0 + in.x_size + in.x_pad1));
                    double taken = -1; // (narrow elements: the writer's last one taken, + 1)
                    double data_end = transfer(A, in, false, true, eb, &local, kNoFn, wide ? t + kWalk : -1, -1,
                                               nullptr, &taken);
                    uint64_t rows = in.x_size ? (uint64_t)(in.y_pad0 + in.y_size + in.y_pad1) * (in.x_pad0 + in.x_size + in.x_pad1) : 0;
                    // The writer walks the rows before the first element
                    // while the first read is on its way: every row after
                    // it goes once that element is there, one per cycle.
                    const double pre = in.x_size && in.y_size && wide ? (double)in.y_pad0 * (in.x_pad0 + in.x_size + in.x_pad1) + in.x_pad0 : 0;
                    const double rd0 = in.x_size && in.y_pad0 > 1 ? t + (double)(in.y_pad0 - 1) * (in.x_pad0 + in.x_size + in.x_pad1) : t;
                    double first = !in.x_size || !in.y_size ? t // (no data: no read)
                                   : wide ? std::max(rd0 + A.dp.latency, t + pre) - pre : t + A.dp.latency;
                    // The writer walks the rows in order: the padding after the
                    // last element follows its data.
                    const double trailing = in.x_size ? (double)in.y_pad1 * (in.x_pad0 + in.x_size + in.x_pad1) + in.x_pad1 : 0;
                    // (an empty LOAD goes from the pop to the push: no reader, no writer)
                    double end = in.x_size ? std::max({data_end + trailing, first + (double)rows, taken}) + kCLoad : t;
                    A.hw[TSR_CNT_COMPUTE_STALL_MEM] += (uint64_t)round_ll(std::max(0.0, end - kCLoad - t - (double)rows));
                    // Data now, the push stamped `end` (its tokens are visible
                    // from then; only this stage's later instructions read
                    // what it loads): the wait for `end` is the next pop's.
                    A.exec(in, c.idx, "compute");
                    end = std::max(end, A.push_tokens(in, TSR_STAGE_COMPUTE, end));
                    if (A.tl)
                        tsr_tl_insn(A.tl, TSR_STAGE_COMPUTE, t0, end);
                    older = std::max(older, end);
                    floor = lt = end;
                    A.stage_done[TSR_STAGE_COMPUTE]++;
                    A.stage_at[TSR_STAGE_COMPUTE] = -1;
                    A.hw[TSR_CNT_COMPUTE_BUSY] += (uint64_t)round_ll(end - t0);
                    continue;
                }
                // GEMM / ALU
                const int p = in.opcode == TSR_OP_GEMM ? 0 : 1, o = 1 - p;
                unsigned banks = footprint(A, in);
                t = std::max(t, pfree[p] + kPipeStart);
                if (pend[o] - kBankGap > t) { // the other pipe runs an older instruction
                    t = std::max(t, pknown[o]);
                    if (banks & pbanks[o])
                        t = std::max(t, pend[o] - kBankGap);
                }
                // Issued at t: the data now (what it reads was pushed to it
                // before; what it writes is read only after its own push),
                // the wait for t is the next pop's.
                floor = lt = t;
                A.exec(in, c.idx, "compute");
                uint64_t nu = in.uop_end > in.uop_bgn ? in.uop_end - in.uop_bgn : 0;
                uint64_t ops = (uint64_t)in.iter_out * in.iter_in * nu;
                const double span = tsr_insn_issue_cycles(&A.cfg, &in, tsr_fsim_uops(A.fsim)); // ops (+ src reads, ACC_SINGLE_COPY)
                double end = t + span + (ops ? kPipeLat : 1);
                double fin = end;
                if (in.push_prev || in.push_next)
                    fin = A.push_tokens(in, TSR_STAGE_COMPUTE, std::max(end, older));
                // Ops issued in the same cycles as the other pipe's.
                double ov = std::min(t + span, popsend[o]) - std::max(t, pops0[o]);
                if (ov > 0)
                    A.hw[TSR_CNT_DUAL_OPS] += (uint64_t)round_ll(ov);
                pops0[p] = t;
                popsend[p] = t + span;
                pfree[p] = std::max(end, fin);
                pend[p] = end; // (its ops in flight until then: the bank rule's)
                // The footprint is known after the first pass over the uops; a
                // depthwise GEMM's pass costs its issue cycles (K per fresh op)
                double first = (double)std::min<uint64_t>(nu, ops);
                if (in.opcode == TSR_OP_GEMM && in.depthwise && ops) {
                    tsr_insn_t one = in;
                    one.iter_out = one.iter_in = 1;
                    first = tsr_insn_issue_cycles(&A.cfg, &one, tsr_fsim_uops(A.fsim));
                }
                pknown[p] = t + first + kKnown;
                pbanks[p] = banks;
                older = std::max(older, pfree[p]);
                A.op_t0[p] = t;
                A.op_n[p] = (in.opcode == TSR_OP_GEMM && in.reset) ? 0 : (double)ops;
                A.op_step[p] = in.depthwise && ops ? span / (double)ops : span > (double)ops ? 2.0 : 1.0;
                if (A.tl)
                    tsr_tl_insn(A.tl, TSR_STAGE_COMPUTE, t0, pfree[p]);
                if (A.tl && A.op_n[p] > 0)
                    tsr_tl_pipe(A.tl, p, t, t + span, ops);
                if (in.opcode == TSR_OP_GEMM)
                    A.hw[TSR_CNT_GEMM_OPS] += in.reset ? 0 : ops;
                else
                    A.hw[TSR_CNT_ALU_OPS] += ops;
                A.hw[TSR_CNT_COMPUTE_BUSY] += (uint64_t)round_ll(end - t0);
                A.stage_done[TSR_STAGE_COMPUTE]++;
                A.stage_at[TSR_STAGE_COMPUTE] = -1;
            }
        } catch (tsr_sc_abort &) {
            a_->idle_after_abort(tsr_sc_accel::kSeqCompute);
        }
    }
}

// -------------------------------------------------------------- store

tsr_sc_store::tsr_sc_store(sc_module_name n, tsr_sc_accel *a) : sc_module(n), a_(a) {}

void tsr_sc_store::run()
{
    tsr_sc_accel &A = *a_;
    for (;;) {
        try {
            double floor = 0; // the stage is busy until then (see take_cmd)
            for (;;) {
                tsr_sc_cmd c = A.take_cmd(TSR_STAGE_STORE, floor);
                const tsr_insn_t &in = A.insns[c.idx];
                double t0 = A.now(), stall = 0;
                A.pop_tokens(in, TSR_STAGE_STORE, &stall);
                A.exec(in, c.idx, "store");
                double t = A.now() + kStoreOvh;
                sc_dt::uint64 local = ticks_of(kStoreOvh); // its writes from t on the local offset (no wait)
                double end = transfer(A, in, true, false, A.cfg.out_bytes, &local);
                if (in.x_size && in.y_size)
                    end += kStoreEnd;
                end = std::max(end, t);
                // The push stamped `end` (visible from then), the wait for it
                // is the next pop's.
                end = std::max(end, A.push_tokens(in, TSR_STAGE_STORE, end));
                floor = end;
                if (A.tl)
                    tsr_tl_insn(A.tl, TSR_STAGE_STORE, t0, end);
                A.stage_done[TSR_STAGE_STORE]++;
                A.stage_at[TSR_STAGE_STORE] = -1;
                A.hw[TSR_CNT_STORE_BUSY] += (uint64_t)round_ll(end - t0);
                A.hw[TSR_CNT_STORE_STALL_TOK] += (uint64_t)round_ll(stall);
                A.hw[TSR_CNT_STORE_STALL_MEM] += (uint64_t)round_ll(std::max(0.0, end - t));
            }
        } catch (tsr_sc_abort &) {
            a_->idle_after_abort(tsr_sc_accel::kSeqStore);
        }
    }
}
