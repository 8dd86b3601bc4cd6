// tsr_spram_axi: the device memory of the iCE40 UP5K board wrapper: the
// four 256 Kbit SPRAMs as 128 KiB of 32-bit words (bank = address bit 16,
// each bank two SPRAMs side by side for the low and high half-word), served
// to the accelerator's AXI4 master (INCR bursts, one at a time, a read beat
// every two cycles, a write beat every cycle) and to the host bridge (one
// word per request, taken between bursts). Addresses at or above 128 KiB
// answer SLVERR and are not written, like an access outside every buffer in
// the simulator's DRAM model. The data bus is 32 bits: the preset's
// DRAM_BUS_WIDTH must be 32.
module tsr_spram_axi (
  input  logic        clk_i,
  input  logic        rst_ni,
  // AXI4 slave, read
  input  logic        s_axi_arvalid_i,
  output logic        s_axi_arready_o,
  input  logic [31:0] s_axi_araddr_i,
  input  logic [7:0]  s_axi_arlen_i,
  input  logic [1:0]  s_axi_arid_i,
  output logic        s_axi_rvalid_o,
  input  logic        s_axi_rready_i,
  output logic [31:0] s_axi_rdata_o,
  output logic [1:0]  s_axi_rresp_o,
  output logic        s_axi_rlast_o,
  output logic [1:0]  s_axi_rid_o,
  // AXI4 slave, write
  input  logic        s_axi_awvalid_i,
  output logic        s_axi_awready_o,
  input  logic [31:0] s_axi_awaddr_i,
  input  logic [7:0]  s_axi_awlen_i,
  input  logic [1:0]  s_axi_awid_i,
  input  logic        s_axi_wvalid_i,
  output logic        s_axi_wready_o,
  input  logic [31:0] s_axi_wdata_i,
  input  logic [3:0]  s_axi_wstrb_i,
  input  logic        s_axi_wlast_i,
  output logic        s_axi_bvalid_o,
  input  logic        s_axi_bready_i,
  output logic [1:0]  s_axi_bresp_o,
  output logic [1:0]  s_axi_bid_o,
  // host port (tsr_uart_host)
  input  logic        host_req_i,
  input  logic        host_we_i,
  input  logic [31:2] host_addr_i,   // word address
  input  logic [31:0] host_wdata_i,
  output logic        host_ack_o,
  output logic [31:0] host_rdata_o,
  output logic        host_err_o
);
  localparam logic [1:0] SlvErr = 2'b10;
  typedef enum logic [2:0] {Idle, RdAddr, RdData, WrData, WrResp, HostAck} state_e;
  state_e      state_q, state_d;
  logic [31:0] addr_q, addr_d;
  logic [7:0]  len_q, len_d;
  logic [1:0]  id_q, id_d;
  logic        err_q, err_d;      // this burst touched an address outside the memory

  // memory access of this cycle
  logic        cs, we, rbank_q, rbank_d;
  logic [16:2] maddr;            // word address: bank, SPRAM row
  logic [31:0] mwdata;
  logic [3:0]  mstrb;
  logic [63:0] dout;              // {bank 1, bank 0}
  logic [31:0] rword;

  // true for a byte address at or above 128 KiB (given its bits 31:17)
  function automatic logic outside(input logic [31:17] hi);
    outside = (hi != '0);
  endfunction

  assign rword = rbank_q ? dout[63:32] : dout[31:0];
  assign s_axi_arready_o = (state_q == Idle) && !host_req_i;
  assign s_axi_awready_o = (state_q == Idle) && !host_req_i && !s_axi_arvalid_i;
  assign s_axi_rvalid_o  = (state_q == RdData);
  assign s_axi_rdata_o   = err_q ? '0 : rword;
  assign s_axi_rresp_o   = err_q ? SlvErr : 2'b00;
  assign s_axi_rlast_o   = (len_q == '0);
  assign s_axi_rid_o     = id_q;
  assign s_axi_wready_o  = (state_q == WrData);
  assign s_axi_bvalid_o  = (state_q == WrResp);
  assign s_axi_bresp_o   = err_q ? SlvErr : 2'b00;
  assign s_axi_bid_o     = id_q;
  assign host_ack_o      = (state_q == HostAck);
  assign host_rdata_o    = err_q ? '0 : rword;
  assign host_err_o      = err_q;

  always_comb begin
    state_d = state_q;
    addr_d  = addr_q;
    len_d   = len_q;
    id_d    = id_q;
    err_d   = err_q;
    rbank_d = rbank_q;
    cs      = 1'b0;
    we      = 1'b0;
    maddr   = addr_q[16:2];
    mwdata  = s_axi_wdata_i;
    mstrb   = s_axi_wstrb_i;
    case (state_q)
      Idle: begin
        if (host_req_i) begin
          // one word now; the answer (read data or error) the next cycle
          maddr   = host_addr_i[16:2];
          mwdata  = host_wdata_i;
          mstrb   = 4'hf;
          cs      = !outside({host_addr_i[31:17]});
          we      = host_we_i;
          rbank_d = host_addr_i[16];
          err_d   = outside({host_addr_i[31:17]});
          state_d = HostAck;
        end else if (s_axi_arvalid_i) begin
          addr_d  = s_axi_araddr_i;
          len_d   = s_axi_arlen_i;
          id_d    = s_axi_arid_i;
          state_d = RdAddr;
        end else if (s_axi_awvalid_i) begin
          addr_d  = s_axi_awaddr_i;
          len_d   = s_axi_awlen_i;
          id_d    = s_axi_awid_i;
          err_d   = 1'b0;
          state_d = WrData;
        end
      end
      RdAddr: begin
        cs      = !outside(addr_q[31:17]);
        rbank_d = addr_q[16];
        err_d   = outside(addr_q[31:17]);
        state_d = RdData;
      end
      RdData: if (s_axi_rready_i) begin
        if (len_q == '0) state_d = Idle;
        else begin
          len_d   = len_q - 8'd1;
          addr_d  = addr_q + 32'd4;
          state_d = RdAddr;
        end
      end
      WrData: if (s_axi_wvalid_i) begin
        cs     = !outside(addr_q[31:17]);
        we     = 1'b1;
        err_d  = err_q || outside(addr_q[31:17]);
        addr_d = addr_q + 32'd4;
        if (s_axi_wlast_i) state_d = WrResp;
      end
      WrResp: if (s_axi_bready_i) state_d = Idle;
      HostAck: state_d = Idle;
      default: state_d = Idle;
    endcase
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q <= Idle;
      addr_q  <= '0;
      len_q   <= '0;
      id_q    <= '0;
      err_q   <= 1'b0;
      rbank_q <= 1'b0;
    end else begin
      state_q <= state_d;
      addr_q  <= addr_d;
      len_q   <= len_d;
      id_q    <= id_d;
      err_q   <= err_d;
      rbank_q <= rbank_d;
    end
  end

  // SPRAM i: bank i/2, half-word i%2; MASKWREN enables nibbles.
  for (genvar i = 0; i < 4; i++) begin : g_spram
    SB_SPRAM256KA u_spram (
      .ADDRESS    (maddr[15:2]),
      .DATAIN     (mwdata[(i % 2) * 16 +: 16]),
      .MASKWREN   ({{2{mstrb[(i % 2) * 2 + 1]}}, {2{mstrb[(i % 2) * 2]}}}),
      .WREN       (we),
      .CHIPSELECT (cs && maddr[16] == 1'(i / 2)),
      .CLOCK      (clk_i),
      .STANDBY    (1'b0),
      .SLEEP      (1'b0),
      .POWEROFF   (1'b1),
      .DATAOUT    (dout[i * 16 +: 16])
    );
  end
endmodule
