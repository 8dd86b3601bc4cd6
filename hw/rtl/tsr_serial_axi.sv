// tsr_serial_axi: the AXI4 master of the serial core (tsr_serial_accel). One
// single-beat transaction at a time (ARLEN/AWLEN = 0, full-width INCR beats,
// ID 0): the serial core moves one byte per cycle, so bursts and outstanding
// transactions would buy nothing and cost the area this core exists to save.
// A request is a bus-aligned byte address, plus data and byte strobes for a
// write; rsp_valid_o pulses once when it completes, with the read data and
// rsp_err_o (RRESP/BRESP other than OKAY). AW and W are presented together
// and each is held until accepted (either may go first). The address is
// registered here; write data and strobes are not: the requester holds them
// from the request to the response, also through a soft reset (the serial
// core's write buffer has no reset).
// err_o is sticky until flush_i. flush_i (soft reset) takes no new request;
// a transaction already accepted is completed as issued (a single beat, so
// no burst is cut short); idle_o: nothing outstanding.
`include "tsr_assert.svh"
`include "tsr_axi.svh"

module tsr_serial_axi #(
  parameter int BusBytes = tsr_pkg::BUS_BYTES
) (
  input  logic                  clk_i,
  input  logic                  rst_ni,
  // request / response
  input  logic                  req_valid_i,
  output logic                  req_ready_o,
  input  logic                  req_write_i,
  input  logic [31:0]           req_addr_i,    // bus-aligned
  input  logic [BusBytes*8-1:0] req_wdata_i,
  input  logic [BusBytes-1:0]   req_wstrb_i,
  output logic                  rsp_valid_o,
  output logic [BusBytes*8-1:0] rsp_rdata_o,
  output logic                  rsp_err_o,
  // AXI4 master
  `TSR_AXI_M_PORTS(BusBytes),
  // soft reset
  input  logic                  flush_i,
  output logic                  idle_o,
  output logic                  err_o,
  output logic                  rd_beat_o,   // an R beat was taken
  output logic                  wr_beat_o    // a W beat was sent
);
  typedef enum logic [1:0] {S_IDLE, S_READ, S_WRITE} state_e;
  state_e state_q, state_d;
  logic   addr_pend_q, addr_pend_d;   // AR or AW not yet accepted
  logic   data_pend_q, data_pend_d;   // W not yet accepted
  logic   err_q, err_d;
  logic                  rsp_valid, rsp_err;
  logic [31:0]           addr_q, addr_d;

  assign req_ready_o     = (state_q == S_IDLE) && !flush_i;
  assign m_axi_arvalid_o = (state_q == S_READ) && addr_pend_q;
  assign m_axi_araddr_o  = addr_q;
  assign m_axi_arlen_o   = 8'd0;
  assign m_axi_arsize_o  = 3'($clog2(BusBytes));
  assign m_axi_arburst_o = 2'b01;
  assign m_axi_arid_o    = 2'd0;
  assign m_axi_rready_o  = (state_q == S_READ) && !addr_pend_q;
  assign m_axi_awvalid_o = (state_q == S_WRITE) && addr_pend_q;
  assign m_axi_awaddr_o  = addr_q;
  assign m_axi_awlen_o   = 8'd0;
  assign m_axi_awsize_o  = 3'($clog2(BusBytes));
  assign m_axi_awburst_o = 2'b01;
  assign m_axi_awid_o    = 2'd0;
  assign m_axi_wvalid_o  = (state_q == S_WRITE) && data_pend_q;
  assign m_axi_wdata_o   = req_wdata_i;
  assign m_axi_wstrb_o   = req_wstrb_i;
  assign m_axi_wlast_o   = 1'b1;
  assign m_axi_bready_o  = (state_q == S_WRITE) && !addr_pend_q && !data_pend_q;

  always_comb begin
    state_d     = state_q;
    addr_pend_d = addr_pend_q;
    data_pend_d = data_pend_q;
    err_d       = err_q && !flush_i;
    addr_d      = addr_q;
    rsp_valid   = 1'b0;
    rsp_err     = 1'b0;
    case (state_q)
      S_IDLE: begin
        if (req_valid_i && req_ready_o) begin
          if (req_write_i) state_d = S_WRITE;
          else state_d = S_READ;
          addr_pend_d = 1'b1;
          data_pend_d = req_write_i;
          addr_d      = req_addr_i;
        end
      end
      S_READ: begin
        if (addr_pend_q && m_axi_arready_i) addr_pend_d = 1'b0;
        if (m_axi_rready_o && m_axi_rvalid_i) begin
          rsp_valid = 1'b1;
          rsp_err   = (m_axi_rresp_i != 2'b00);
          state_d   = S_IDLE;
        end
      end
      default: begin  // S_WRITE
        if (addr_pend_q && m_axi_awready_i) addr_pend_d = 1'b0;
        if (data_pend_q && m_axi_wready_i) data_pend_d = 1'b0;
        if (m_axi_bready_o && m_axi_bvalid_i) begin
          rsp_valid = 1'b1;
          rsp_err   = (m_axi_bresp_i != 2'b00);
          state_d   = S_IDLE;
        end
      end
    endcase
    if (rsp_err && !flush_i) err_d = 1'b1;
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q     <= S_IDLE;
      addr_pend_q <= 1'b0;
      data_pend_q <= 1'b0;
      err_q       <= 1'b0;
      addr_q      <= '0;
      rd_beat_o   <= 1'b0;
      wr_beat_o   <= 1'b0;
    end else begin
      state_q     <= state_d;
      addr_pend_q <= addr_pend_d;
      data_pend_q <= data_pend_d;
      err_q       <= err_d;
      addr_q      <= addr_d;
      rd_beat_o   <= m_axi_rvalid_i && m_axi_rready_o;
      wr_beat_o   <= m_axi_wvalid_o && m_axi_wready_i;
    end
  end

  // The response is combinational from the channel (R data straight through),
  // so the core sees it in the cycle it arrives.
  assign rsp_valid_o = rsp_valid;
  assign rsp_rdata_o = m_axi_rdata_i;
  assign rsp_err_o   = rsp_err;
  assign idle_o      = (state_q == S_IDLE);
  assign err_o       = err_q;

  // Single-beat transactions with ID 0: RLAST and the IDs carry nothing.
  logic unused_axi;
  assign unused_axi = m_axi_rlast_i ^ (^m_axi_rid_i) ^ (^m_axi_bid_i);

  tsr_hs_check #(.Width(32)) u_ar_chk (.clk_i, .rst_ni, .valid_i(m_axi_arvalid_o),
                                       .ready_i(m_axi_arready_i), .data_i(m_axi_araddr_o));
  tsr_hs_check #(.Width(32)) u_aw_chk (.clk_i, .rst_ni, .valid_i(m_axi_awvalid_o),
                                       .ready_i(m_axi_awready_i), .data_i(m_axi_awaddr_o));
  tsr_hs_check #(.Width(BusBytes * 9)) u_w_chk (.clk_i, .rst_ni, .valid_i(m_axi_wvalid_o),
                                                .ready_i(m_axi_wready_i), .data_i({m_axi_wstrb_o, m_axi_wdata_o}));

  // One single-beat transaction at a time: W only inside a write, and the
  // response phase only once address (and data) are gone.
  `TSR_ASSERT(chk_w_in_write, !data_pend_q || state_q == S_WRITE, clk_i, rst_ni)
  `TSR_ASSERT(chk_one_channel, !(m_axi_arvalid_o && (m_axi_awvalid_o || m_axi_wvalid_o)), clk_i, rst_ni)
endmodule
