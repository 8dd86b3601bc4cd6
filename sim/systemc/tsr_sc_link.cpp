// tsr_sc_link: the link's TLM-2.0 interconnect and the pipeline replay over
// it (tsr_sc_link.h, driver/tsr_link.h).
#include "tsr_sc_link.h"

#include <algorithm>
#include <exception>
#include <string>

#include "tsr_sc_model.h"

extern "C" {
#include "tsr_error.h"
}

using namespace sc_core;

tsr_sc_link_bus::tsr_sc_link_bus(sc_module_name n) : sc_module(n), tsock("tsock")
{
    tsock.register_b_transport(this, &tsr_sc_link_bus::b_transport);
}

void tsr_sc_link_bus::configure(bool shared_link, double bpc, double lat)
{
    shared = shared_link;
    bytes_per_cycle = bpc;
    latency = lat;
    free_at.assign(shared ? 1 : TSR_LINK_MAX_PORTS, SC_ZERO_TIME);
    busy = 0;
    std::fill(wait, wait + TSR_LINK_MAX_PORTS, 0.0);
}

// A transfer arrives at the current time plus its annotation; it starts when
// its channel is free (FIFO: the channel's earlier transfers were all
// requested before it), and the annotation becomes the time until it is done.
void tsr_sc_link_bus::b_transport(int port, tlm::tlm_generic_payload &gp, sc_time &delay)
{
    const sc_time arrive = sc_time_stamp() + delay;
    sc_time &ch = free_at[shared ? 0 : port];
    const sc_time start = std::max(arrive, ch);
    const double occ = latency + (double)gp.get_data_length() / bytes_per_cycle;
    const sc_time done = start + tsr_sc_cycles(occ);
    ch = done;
    busy += occ;
    wait[port] += tsr_sc_to_cycles(start - arrive);
    delay = done - sc_time_stamp();
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
}

tsr_sc_link_port::tsr_sc_link_port(sc_module_name n) : sc_module(n), sock("sock") {}

void tsr_sc_link_port::transfer(uint64_t b)
{
    if (!b)
        return;
    sc_time d = SC_ZERO_TIME;
    gp.set_command(tlm::TLM_IGNORE_COMMAND);
    gp.set_address(0);
    gp.set_data_ptr(&dummy);
    gp.set_data_length((unsigned)b); // (checked < 4 GiB by tsr_link_replay)
    gp.set_streaming_width((unsigned)b);
    gp.set_byte_enable_ptr(nullptr);
    gp.set_dmi_allowed(false);
    gp.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sock->b_transport(gp, d);
    wait(d);
}

tsr_sc_link::tsr_sc_link()
{
    bus.reset(new tsr_sc_link_bus("tsr_link_bus"));
    for (int i = 0; i < TSR_LINK_MAX_PORTS; i++) {
        port[i].reset(new tsr_sc_link_port(("tsr_link_port" + std::to_string(i)).c_str()));
        port[i]->sock.bind(bus->tsock);
    }
}

namespace {

// One replay's shared state: per stage, inputs started and handed over.
struct replay {
    const tsr_link_problem_t *p;
    tsr_sc_link *link;
    sc_time t0;
    std::vector<int> started, done;
    std::vector<double> fin, xfer;
    std::vector<std::unique_ptr<sc_event>> ev;
    int finished = 0;
};

void wait_until(replay &r, int s, const std::vector<int> &count, int need)
{
    while (count[s] < need)
        wait(*r.ev[s]);
}

// One transfer list of stage s, its time (waits included) added to xfer[s].
void transfers(replay &r, int s, const uint64_t *b, int n)
{
    const sc_time a = sc_time_stamp();
    for (int k = 0; k < n; k++)
        r.link->port[s]->transfer(b[k]);
    r.xfer[s] += tsr_sc_to_cycles(sc_time_stamp() - a);
}

// Stage s: the executor's rule (tsr_link.h) with its transfers on its port.
void stage_proc(replay &r, int s)
{
    const tsr_link_problem_t *p = r.p;
    const tsr_link_stage_t *st = &p->st[s];
    const int N = p->ninputs, S = p->nstages;
    for (int i = 0; i < N; i++) {
        if (s > 0)
            wait_until(r, s - 1, r.done, i + 1); // input i handed over by the stage before
        r.started[s] = i + 1;
        r.ev[s]->notify(SC_ZERO_TIME);
        transfers(r, s, st->rx, st->nrx);
        wait(tsr_sc_cycles(st->compute[i]));
        transfers(r, s, st->tx, st->ntx);
        if (s < S - 1 && i >= p->depth)
            wait_until(r, s + 1, r.started, i - p->depth + 1); // room in the queue
        r.done[s] = i + 1;
        r.fin[(size_t)s * N + i] = tsr_sc_to_cycles(sc_time_stamp() - r.t0);
        r.ev[s]->notify(SC_ZERO_TIME);
    }
    r.finished++;
}

int run(replay &r)
{
    const int S = r.p->nstages;
    for (int s = 0; s < S; s++)
        sc_spawn([&r, s]() { stage_proc(r, s); });
    while (r.finished < S) {
        if (!sc_pending_activity())
            return tsr_err(TSR_EDEADLOCK, "link: the replay stopped with %d of %d stages done", r.finished, S);
        sc_start(sc_time_to_pending_activity());
    }
    return TSR_OK;
}

void results(const replay &r, tsr_link_result_t *res)
{
    const int S = r.p->nstages, N = r.p->ninputs;
    const double *last = &r.fin[(size_t)(S - 1) * N];
    res->makespan = last[N - 1];
    int a = r.p->win0, b = r.p->win1;
    if (b <= a) // the second half's intervals (the first input's hand-over when N = 1)
        a = N / 2 < N - 1 ? N / 2 : 0, b = N - 1;
    res->period = b > a ? (last[b] - last[a]) / (b - a) : last[0];
    res->busy = r.link->bus->busy;
    for (int s = 0; s < S; s++) {
        res->wait[s] = r.link->bus->wait[s] / N;
        res->xfer[s] = r.xfer[s] / N;
    }
    if (res->fin)
        std::copy(r.fin.begin(), r.fin.end(), res->fin);
}

} // namespace

extern "C" int tsr_sc_link_replay(const tsr_link_problem_t *p, tsr_link_result_t *res)
{
    tsr_sc_link *link = tsr_sc_world_link();
    if (!link)
        return TSR_EBACKEND;
    replay r;
    r.p = p;
    r.link = link;
    int rc;
    try {
        r.started.assign(p->nstages, 0);
        r.done.assign(p->nstages, 0);
        r.fin.assign((size_t)p->nstages * p->ninputs, 0.0);
        r.xfer.assign(p->nstages, 0.0);
        for (int s = 0; s < p->nstages; s++)
            r.ev.emplace_back(new sc_event());
        link->bus->configure(p->mode == TSR_LINK_SHARED, p->bytes_per_cycle, p->latency);
        r.t0 = sc_time_stamp();
        link->bus->free_at.assign(link->bus->free_at.size(), r.t0);
        rc = run(r);
    } catch (std::exception &e) {
        rc = tsr_err(TSR_EBACKEND, "link: SystemC: %s", e.what());
    }
    if (!rc)
        results(r, res);
    return rc;
}
