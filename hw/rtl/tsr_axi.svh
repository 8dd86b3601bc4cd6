// tsr_axi.svh: the two bus bundles of the accelerator as port macros, so
// their port lists are written once instead of in every module that carries
// them (tsr_top, tsr_pipe_accel, tsr_serial_accel, tsr_axi_master,
// tsr_serial_axi, tsr_ctrl). A macro and not a packed struct or an interface
// because Icarus 11 accepts neither a package typedef as a port type nor
// interfaces (../shared/notes/toolchain.md), and every tool here must parse
// the RTL; the signal names stay those of the Vitis/IP-XACT AXI convention
// (m_axi_*, s_axil_*), which the vendor wrappers and the harness rely on.
//
//   `TSR_AXI_M_PORTS(BB)     the AXI4 master ports (DRAM), data BB bytes wide
//   `TSR_AXI_M_CONNECT       .m_axi_x (m_axi_x) for each of them
//   `TSR_AXIL_S_PORTS        the AXI4-Lite control slave ports (32-bit data,
//                            8-bit byte addresses: the register map)
//   `TSR_AXIL_S_CONNECT      .s_axil_x (s_axil_x) for each of them
// The port macros end without a comma: write one after them when more ports
// follow. IDs are 2 bits (read port index), bursts INCR of at most 16 beats.
`ifndef TSR_AXI_SVH
`define TSR_AXI_SVH

`define TSR_AXI_M_PORTS(BB) \
  output logic              m_axi_arvalid_o, \
  input  logic              m_axi_arready_i, \
  output logic [31:0]       m_axi_araddr_o, \
  output logic [7:0]        m_axi_arlen_o, \
  output logic [2:0]        m_axi_arsize_o, \
  output logic [1:0]        m_axi_arburst_o, \
  output logic [1:0]        m_axi_arid_o, \
  input  logic              m_axi_rvalid_i, \
  output logic              m_axi_rready_o, \
  input  logic [(BB)*8-1:0] m_axi_rdata_i, \
  input  logic [1:0]        m_axi_rresp_i, \
  input  logic              m_axi_rlast_i, \
  input  logic [1:0]        m_axi_rid_i, \
  output logic              m_axi_awvalid_o, \
  input  logic              m_axi_awready_i, \
  output logic [31:0]       m_axi_awaddr_o, \
  output logic [7:0]        m_axi_awlen_o, \
  output logic [2:0]        m_axi_awsize_o, \
  output logic [1:0]        m_axi_awburst_o, \
  output logic [1:0]        m_axi_awid_o, \
  output logic              m_axi_wvalid_o, \
  input  logic              m_axi_wready_i, \
  output logic [(BB)*8-1:0] m_axi_wdata_o, \
  output logic [(BB)-1:0]   m_axi_wstrb_o, \
  output logic              m_axi_wlast_o, \
  input  logic              m_axi_bvalid_i, \
  output logic              m_axi_bready_o, \
  input  logic [1:0]        m_axi_bresp_i, \
  input  logic [1:0]        m_axi_bid_i

`define TSR_AXI_M_CONNECT \
  .m_axi_arvalid_o (m_axi_arvalid_o), \
  .m_axi_arready_i (m_axi_arready_i), \
  .m_axi_araddr_o  (m_axi_araddr_o), \
  .m_axi_arlen_o   (m_axi_arlen_o), \
  .m_axi_arsize_o  (m_axi_arsize_o), \
  .m_axi_arburst_o (m_axi_arburst_o), \
  .m_axi_arid_o    (m_axi_arid_o), \
  .m_axi_rvalid_i  (m_axi_rvalid_i), \
  .m_axi_rready_o  (m_axi_rready_o), \
  .m_axi_rdata_i   (m_axi_rdata_i), \
  .m_axi_rresp_i   (m_axi_rresp_i), \
  .m_axi_rlast_i   (m_axi_rlast_i), \
  .m_axi_rid_i     (m_axi_rid_i), \
  .m_axi_awvalid_o (m_axi_awvalid_o), \
  .m_axi_awready_i (m_axi_awready_i), \
  .m_axi_awaddr_o  (m_axi_awaddr_o), \
  .m_axi_awlen_o   (m_axi_awlen_o), \
  .m_axi_awsize_o  (m_axi_awsize_o), \
  .m_axi_awburst_o (m_axi_awburst_o), \
  .m_axi_awid_o    (m_axi_awid_o), \
  .m_axi_wvalid_o  (m_axi_wvalid_o), \
  .m_axi_wready_i  (m_axi_wready_i), \
  .m_axi_wdata_o   (m_axi_wdata_o), \
  .m_axi_wstrb_o   (m_axi_wstrb_o), \
  .m_axi_wlast_o   (m_axi_wlast_o), \
  .m_axi_bvalid_i  (m_axi_bvalid_i), \
  .m_axi_bready_o  (m_axi_bready_o), \
  .m_axi_bresp_i   (m_axi_bresp_i), \
  .m_axi_bid_i     (m_axi_bid_i)

`define TSR_AXIL_S_PORTS \
  input  logic              s_axil_awvalid_i, \
  output logic              s_axil_awready_o, \
  input  logic [7:0]        s_axil_awaddr_i, \
  input  logic              s_axil_wvalid_i, \
  output logic              s_axil_wready_o, \
  input  logic [31:0]       s_axil_wdata_i, \
  input  logic [3:0]        s_axil_wstrb_i, \
  output logic              s_axil_bvalid_o, \
  input  logic              s_axil_bready_i, \
  output logic [1:0]        s_axil_bresp_o, \
  input  logic              s_axil_arvalid_i, \
  output logic              s_axil_arready_o, \
  input  logic [7:0]        s_axil_araddr_i, \
  output logic              s_axil_rvalid_o, \
  input  logic              s_axil_rready_i, \
  output logic [31:0]       s_axil_rdata_o, \
  output logic [1:0]        s_axil_rresp_o

`define TSR_AXIL_S_CONNECT \
  .s_axil_awvalid_i (s_axil_awvalid_i), \
  .s_axil_awready_o (s_axil_awready_o), \
  .s_axil_awaddr_i  (s_axil_awaddr_i), \
  .s_axil_wvalid_i  (s_axil_wvalid_i), \
  .s_axil_wready_o  (s_axil_wready_o), \
  .s_axil_wdata_i   (s_axil_wdata_i), \
  .s_axil_wstrb_i   (s_axil_wstrb_i), \
  .s_axil_bvalid_o  (s_axil_bvalid_o), \
  .s_axil_bready_i  (s_axil_bready_i), \
  .s_axil_bresp_o   (s_axil_bresp_o), \
  .s_axil_arvalid_i (s_axil_arvalid_i), \
  .s_axil_arready_o (s_axil_arready_o), \
  .s_axil_araddr_i  (s_axil_araddr_i), \
  .s_axil_rvalid_o  (s_axil_rvalid_o), \
  .s_axil_rready_i  (s_axil_rready_i), \
  .s_axil_rdata_o   (s_axil_rdata_o), \
  .s_axil_rresp_o   (s_axil_rresp_o)

`endif
