// tsr_sc_link: the link between K devices and the host as a SystemC/TLM-2.0
// interconnect (driver/tsr_link.h, issue 26). TSR_LINK_MAX_PORTS initiator
// ports (one per pipeline stage: a device's or a host stage's) bound to the
// one target socket of the interconnect. A transfer is one b_transport
// (TLM_IGNORE_COMMAND: timing only, the data moves through host memory;
// data length = the bytes). The interconnect serves each channel one
// transfer at a time, in the order the transfers arrive (FIFO): the shared
// link has one channel for every port, p2p a channel per port. A transfer
// occupies its channel for latency + bytes / bytes_per_cycle cycles; the
// delay until it is done (its wait for the channel included) is returned in
// the timing annotation, and the initiator waits it (loosely timed, no wait
// inside the target).
//
// The ports and the interconnect are elaborated with the process's one
// kernel (sim/systemc/tsr_sc_shim.cpp builds them with the device slots:
// SystemC cannot add modules after its first sc_start); a replay spawns one
// process per stage (sc_spawn), runs the kernel until they are done and
// reads the times back. The devices' slots are idle meanwhile (the caller
// holds the run lock): simulated time moves on, and the devices count their
// cycles from each run's START.
#ifndef TSR_SC_LINK_H
#define TSR_SC_LINK_H

#include <systemc>
#include <tlm>
#include <tlm_utils/multi_passthrough_target_socket.h>
#include <tlm_utils/simple_initiator_socket.h>

#include <memory>
#include <vector>

extern "C" {
#include "tsr_link.h"
}

// The interconnect: one target socket, every port bound to it.
struct tsr_sc_link_bus : sc_core::sc_module {
    tlm_utils::multi_passthrough_target_socket<tsr_sc_link_bus> tsock;
    bool shared = false;
    double bytes_per_cycle = 8, latency = 0;
    std::vector<sc_core::sc_time> free_at; // per channel: when its last transfer is done
    double busy = 0;                       // cycles the channels carried transfers
    double wait[TSR_LINK_MAX_PORTS] = {};  // per port: cycles its transfers waited for a channel
    explicit tsr_sc_link_bus(sc_core::sc_module_name n);
    void configure(bool shared_link, double bpc, double lat);
    void b_transport(int port, tlm::tlm_generic_payload &gp, sc_core::sc_time &delay);
};

// One initiator (a stage's device or the host's side of a host stage).
struct tsr_sc_link_port : sc_core::sc_module {
    tlm_utils::simple_initiator_socket<tsr_sc_link_port> sock;
    tlm::tlm_generic_payload gp;
    unsigned char dummy = 0; // the payload's data pointer (never read: IGNORE command)
    explicit tsr_sc_link_port(sc_core::sc_module_name n);
    // One transfer of b bytes from the current time; returns when it is done.
    void transfer(uint64_t b);
};

struct tsr_sc_link {
    std::unique_ptr<tsr_sc_link_bus> bus;
    std::unique_ptr<tsr_sc_link_port> port[TSR_LINK_MAX_PORTS];
    tsr_sc_link(); // builds and binds (during elaboration)
};

// The process's link (the shim's world, built on first use); null when the
// kernel could not be elaborated (the error is set).
tsr_sc_link *tsr_sc_world_link();

#endif
