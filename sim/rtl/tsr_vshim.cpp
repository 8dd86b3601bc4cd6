// tsr_vshim: the thin C++ layer Verilator requires. It wraps Vtsr_top in
// the plain function table of tsr_vtop.h so the harness stays C. Nothing
// here knows about DRAM, registers or timing.
#include <cstring>

#include "Vtsr_top.h"
#include "verilated.h"
#ifdef TSR_TRACE
#include "verilated_fst_c.h"
#endif
#ifdef TSR_TIMELINE
#include "verilated_syms.h"
#endif

extern "C" {
#include "tsr_vtop.h"
}

namespace {

struct Model {
    VerilatedContext ctx;
    Vtsr_top *top;
#ifdef TSR_TRACE
    VerilatedFstC *fst = nullptr;
    bool tracing = false;
#endif
    uint64_t time = 0;
    // An input (or the clock) changed since the last evaluation. eval()
    // skips the model's evaluation when nothing did: it would compute the
    // same values again (Verilator runs the input-combinational region on
    // every eval() call, changed inputs or not).
    bool dirty = true;
#ifdef TSR_TIMELINE
    // The probed signals, found by name at run time so that a renamed
    // signal costs its lane (and a message) instead of the model build.
    void *vp[TSR_VP_COUNT] = {};
    int vp_bytes[TSR_VP_COUNT] = {};
    uint32_t vp_mask = 0;
#endif
};

// Byte copies for ports whose Verilator type depends on the width.
template <typename T> void to_bytes(const T &v, uint8_t *b, int n)
{
    for (int i = 0; i < n; i++) b[i] = (uint8_t)((uint64_t)v >> (8 * i));
}
template <std::size_t W> void to_bytes(const VlWide<W> &v, uint8_t *b, int n)
{
    for (int i = 0; i < n; i++) b[i] = (uint8_t)(v[i / 4] >> (8 * (i % 4)));
}
template <typename T> void from_bytes(T &v, const uint8_t *b, int n)
{
    uint64_t x = 0;
    for (int i = 0; i < n; i++) x |= (uint64_t)b[i] << (8 * i);
    v = (T)x;
}
template <std::size_t W> void from_bytes(VlWide<W> &v, const uint8_t *b, int n)
{
    for (std::size_t i = 0; i < W; i++) v[i] = 0;
    for (int i = 0; i < n; i++) v[i / 4] |= (uint32_t)b[i] << (8 * (i % 4));
}

void *create(const char *fst)
{
    Model *m = new Model;
    m->top = new Vtsr_top{&m->ctx};
#ifdef TSR_TRACE
    if (fst) {
        m->ctx.traceEverOn(true);
        m->fst = new VerilatedFstC;
        m->top->trace(m->fst, 99);
        m->fst->open(fst);
    }
#else
    (void)fst;
#endif
    m->top->clk_i = 0;
    m->top->eval();
#ifdef TSR_TIMELINE
    static const char *const names[TSR_VP_COUNT] = TSR_VP_NAMES;
    // The stage signals live in the pipelined core, under tsr_top's generate
    // (a serial-core model has no such scope: its timeline lanes stay empty).
    if (const VerilatedScope *s = m->ctx.scopeFind("TOP.tsr_top.g_pipe.u_core"))
        for (int k = 0; k < TSR_VP_COUNT; k++)
            if (VerilatedVar *v = s->varFind(names[k])) {
                int b = v->vltype() == VLVT_UINT8 ? 1 : v->vltype() == VLVT_UINT16 ? 2 : v->vltype() == VLVT_UINT32 ? 4 : 0;
                if (b) {
                    m->vp[k] = v->datap();
                    m->vp_bytes[k] = b;
                    m->vp_mask |= 1u << k;
                }
            }
#endif
    return m;
}

void destroy(void *p)
{
    Model *m = (Model *)p;
    m->top->final();
#ifdef TSR_TRACE
    if (m->fst) {
        m->fst->close();
        delete m->fst;
    }
#endif
    delete m->top;
    delete m;
}

void eval(void *p)
{
    Model *m = (Model *)p;
    if (m->dirty) {
        m->top->eval();
        m->dirty = false;
    }
}

void dump(Model *m)
{
#ifdef TSR_TRACE
    if (m->fst && m->tracing) m->fst->dump(m->time);
#else
    (void)m;
#endif
}

// One clock: the rising edge is evaluated now. The falling edge triggers
// nothing in tsr_top, so its evaluation waits for the next eval() (the
// harness calls it after driving the next cycle's inputs, before it reads
// an output that could depend on them): one evaluation per edge instead of
// two. Registered outputs (done_o) are final after the rising edge. A
// waveform still gets both edges evaluated and dumped.
void tick(void *p)
{
    Model *m = (Model *)p;
    if (m->dirty) m->top->eval(); // inputs driven since the last eval settle before the edge
    m->top->clk_i = 1;
    m->top->eval();
    m->time += 5;
    dump(m);
    m->top->clk_i = 0;
    m->dirty = true;
#ifdef TSR_TRACE
    if (m->fst && m->tracing) {
        m->top->eval();
        m->dirty = false;
    }
#endif
    m->time += 5;
    dump(m);
}

void trace(void *p, int on)
{
#ifdef TSR_TRACE
    ((Model *)p)->tracing = on != 0;
#else
    (void)p;
    (void)on;
#endif
}

uint32_t probe(void *p, uint32_t *v)
{
#ifdef TSR_TIMELINE
    Model *m = (Model *)p;
    for (int k = 0; k < TSR_VP_COUNT; k++)
        v[k] = m->vp_bytes[k] == 1 ? *(const uint8_t *)m->vp[k]
             : m->vp_bytes[k] == 2 ? *(const uint16_t *)m->vp[k]
             : m->vp_bytes[k] == 4 ? *(const uint32_t *)m->vp[k] : 0;
    return m->vp_mask;
#else
    (void)p;
    for (int k = 0; k < TSR_VP_COUNT; k++)
        v[k] = 0;
    return 0;
#endif
}

uint64_t get(void *p, int sig)
{
    Vtsr_top *t = ((Model *)p)->top;
    switch (sig) {
    case TSR_V_AXIL_AWREADY: return t->s_axil_awready_o;
    case TSR_V_AXIL_WREADY: return t->s_axil_wready_o;
    case TSR_V_AXIL_BVALID: return t->s_axil_bvalid_o;
    case TSR_V_AXIL_ARREADY: return t->s_axil_arready_o;
    case TSR_V_AXIL_RVALID: return t->s_axil_rvalid_o;
    case TSR_V_AXIL_RDATA: return t->s_axil_rdata_o;
    case TSR_V_ARVALID: return t->m_axi_arvalid_o;
    case TSR_V_ARADDR: return t->m_axi_araddr_o;
    case TSR_V_ARLEN: return t->m_axi_arlen_o;
    case TSR_V_ARSIZE: return t->m_axi_arsize_o;
    case TSR_V_ARBURST: return t->m_axi_arburst_o;
    case TSR_V_ARID: return t->m_axi_arid_o;
    case TSR_V_RREADY: return t->m_axi_rready_o;
    case TSR_V_AWVALID: return t->m_axi_awvalid_o;
    case TSR_V_AWADDR: return t->m_axi_awaddr_o;
    case TSR_V_AWLEN: return t->m_axi_awlen_o;
    case TSR_V_AWSIZE: return t->m_axi_awsize_o;
    case TSR_V_AWBURST: return t->m_axi_awburst_o;
    case TSR_V_AWID: return t->m_axi_awid_o;
    case TSR_V_WVALID: return t->m_axi_wvalid_o;
    case TSR_V_WSTRB: return (uint64_t)t->m_axi_wstrb_o;
    case TSR_V_WLAST: return t->m_axi_wlast_o;
    case TSR_V_BREADY: return t->m_axi_bready_o;
    case TSR_V_DONE: return t->done_o;
    default: return 0;
    }
}

void set(void *p, int sig, uint64_t v)
{
    Model *m = (Model *)p;
    Vtsr_top *t = m->top;
// an input that changes marks the model for evaluation
#define TSR_SET(port)                                                                                   \
    do {                                                                                                \
        if (t->port != (decltype(t->port))v) {                                                          \
            t->port = (decltype(t->port))v;                                                             \
            m->dirty = true;                                                                            \
        }                                                                                               \
    } while (0)
    switch (sig) {
    case TSR_V_RST_N: TSR_SET(rst_ni); break;
    case TSR_V_AXIL_AWVALID: TSR_SET(s_axil_awvalid_i); break;
    case TSR_V_AXIL_AWADDR: TSR_SET(s_axil_awaddr_i); break;
    case TSR_V_AXIL_WVALID: TSR_SET(s_axil_wvalid_i); break;
    case TSR_V_AXIL_WDATA: TSR_SET(s_axil_wdata_i); break;
    case TSR_V_AXIL_WSTRB: TSR_SET(s_axil_wstrb_i); break;
    case TSR_V_AXIL_BREADY: TSR_SET(s_axil_bready_i); break;
    case TSR_V_AXIL_ARVALID: TSR_SET(s_axil_arvalid_i); break;
    case TSR_V_AXIL_ARADDR: TSR_SET(s_axil_araddr_i); break;
    case TSR_V_AXIL_RREADY: TSR_SET(s_axil_rready_i); break;
    case TSR_V_ARREADY: TSR_SET(m_axi_arready_i); break;
    case TSR_V_RVALID: TSR_SET(m_axi_rvalid_i); break;
    case TSR_V_RRESP: TSR_SET(m_axi_rresp_i); break;
    case TSR_V_RLAST: TSR_SET(m_axi_rlast_i); break;
    case TSR_V_RID: TSR_SET(m_axi_rid_i); break;
    case TSR_V_AWREADY: TSR_SET(m_axi_awready_i); break;
    case TSR_V_WREADY: TSR_SET(m_axi_wready_i); break;
    case TSR_V_BVALID: TSR_SET(m_axi_bvalid_i); break;
    case TSR_V_BRESP: TSR_SET(m_axi_bresp_i); break;
    case TSR_V_BID: TSR_SET(m_axi_bid_i); break;
    default: break;
    }
#undef TSR_SET
}

void get_wdata(void *p, uint8_t *b) { to_bytes(((Model *)p)->top->m_axi_wdata_o, b, TSR_BUS_BYTES); }
void set_rdata(void *p, const uint8_t *b)
{
    Model *m = (Model *)p;
    auto &port = m->top->m_axi_rdata_i;
    unsigned char old[sizeof port];
    std::memcpy(old, &port, sizeof port);
    from_bytes(port, b, TSR_BUS_BYTES);
    if (std::memcmp(old, &port, sizeof port)) m->dirty = true;
}

} // namespace

extern "C" const tsr_vtop_api_t tsr_vtop_api = {
    TSR_VTOP_API_VERSION, TSR_BUS_BYTES, create, destroy, eval, tick, get, set, get_wdata, set_rdata, trace, probe,
};
