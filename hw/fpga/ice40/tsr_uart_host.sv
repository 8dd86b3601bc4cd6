// tsr_uart_host: the host side of the iCE40 board wrapper. A host (a PC on
// the board's USB UART) sends 9-byte frames: opcode, a 32-bit address and
// 32-bit data, little-endian; every frame is answered with 4 bytes:
//   0x01 register write  -> AXI4-Lite write of data at address[7:0]; reply {30'b0, bresp}
//   0x02 register read   -> AXI4-Lite read at address[7:0]; reply rdata
//   0x03 memory write    -> one 32-bit word of device memory; reply {31'b0, err}
//   0x04 memory read     -> one 32-bit word of device memory; reply the word
//   other                -> reply 0xffffffff
// The register map is the accelerator's own (isa/tsr_regs.h), so a host
// program drives the board with the same register sequence as the RTL
// backend. A frame left incomplete for 2^16 cycles is dropped, so a host
// can always resynchronise by pausing.
module tsr_uart_host (
  input  logic        clk_i,
  input  logic        rst_ni,
  // UART byte streams
  input  logic        rx_valid_i,
  input  logic [7:0]  rx_data_i,
  output logic        tx_valid_o,
  input  logic        tx_ready_i,
  output logic [7:0]  tx_data_o,
  // AXI4-Lite master (to the accelerator's control slave)
  output logic        m_axil_awvalid_o,
  input  logic        m_axil_awready_i,
  output logic [7:0]  m_axil_awaddr_o,
  output logic        m_axil_wvalid_o,
  input  logic        m_axil_wready_i,
  output logic [31:0] m_axil_wdata_o,
  input  logic        m_axil_bvalid_i,
  output logic        m_axil_bready_o,
  input  logic [1:0]  m_axil_bresp_i,
  output logic        m_axil_arvalid_o,
  input  logic        m_axil_arready_i,
  output logic [7:0]  m_axil_araddr_o,
  input  logic        m_axil_rvalid_i,
  output logic        m_axil_rready_o,
  input  logic [31:0] m_axil_rdata_i,
  // device-memory port (one word per request)
  output logic        mem_req_o,
  output logic        mem_we_o,
  output logic [31:2] mem_addr_o,    // word address
  output logic [31:0] mem_wdata_o,
  input  logic        mem_ack_i,
  input  logic [31:0] mem_rdata_i,
  input  logic        mem_err_i
);
  typedef enum logic [2:0] {Recv, RegWr, RegWrResp, RegRd, RegRdResp, Mem, Reply} state_e;
  state_e      state_q, state_d;
  logic [71:0] frame_q, frame_d;   // bytes shift in from the top: byte 0 ends in [7:0]
  logic [3:0]  nbytes_q, nbytes_d;
  logic [15:0] idle_q, idle_d;
  logic        aw_done_q, aw_done_d, w_done_q, w_done_d;
  logic [31:0] reply_q, reply_d;
  logic [2:0]  left_q, left_d;     // reply bytes still to send

  logic [7:0]  op;
  logic [31:0] addr, data;
  assign op   = frame_q[7:0];
  assign addr = frame_q[39:8];
  assign data = frame_q[71:40];

  assign m_axil_awvalid_o = (state_q == RegWr) && !aw_done_q;
  assign m_axil_wvalid_o  = (state_q == RegWr) && !w_done_q;
  assign m_axil_awaddr_o  = addr[7:0];
  assign m_axil_wdata_o   = data;
  assign m_axil_bready_o  = (state_q == RegWrResp);
  assign m_axil_arvalid_o = (state_q == RegRd);
  assign m_axil_araddr_o  = addr[7:0];
  assign m_axil_rready_o  = (state_q == RegRdResp);
  assign mem_req_o   = (state_q == Mem);
  assign mem_we_o    = (op == 8'h03);
  assign mem_addr_o  = addr[31:2];
  assign mem_wdata_o = data;
  assign tx_valid_o  = (state_q == Reply);
  assign tx_data_o   = reply_q[7:0];

  always_comb begin
    state_d   = state_q;
    frame_d   = frame_q;
    nbytes_d  = nbytes_q;
    idle_d    = idle_q;
    aw_done_d = aw_done_q;
    w_done_d  = w_done_q;
    reply_d   = reply_q;
    left_d    = left_q;
    case (state_q)
      Recv: begin
        if (rx_valid_i) begin
          frame_d  = {rx_data_i, frame_q[71:8]};
          nbytes_d = nbytes_q + 4'd1;
          idle_d   = '0;
          if (nbytes_q == 4'd8) begin
            nbytes_d = '0;
            case (frame_q[15:8])  // byte 0 (the opcode) before this last shift
              8'h01: begin state_d = RegWr; aw_done_d = 1'b0; w_done_d = 1'b0; end
              8'h02: state_d = RegRd;
              8'h03, 8'h04: state_d = Mem;
              default: begin state_d = Reply; reply_d = '1; left_d = 3'd4; end
            endcase
          end
        end else if (nbytes_q != '0) begin
          idle_d = idle_q + 16'd1;
          if (idle_q == '1) nbytes_d = '0;
        end
      end
      RegWr: begin
        if (m_axil_awready_i) aw_done_d = 1'b1;
        if (m_axil_wready_i) w_done_d = 1'b1;
        if ((aw_done_q || m_axil_awready_i) && (w_done_q || m_axil_wready_i)) state_d = RegWrResp;
      end
      RegWrResp: if (m_axil_bvalid_i) begin
        reply_d = {30'd0, m_axil_bresp_i};
        left_d  = 3'd4;
        state_d = Reply;
      end
      RegRd: if (m_axil_arready_i) state_d = RegRdResp;
      RegRdResp: if (m_axil_rvalid_i) begin
        reply_d = m_axil_rdata_i;
        left_d  = 3'd4;
        state_d = Reply;
      end
      Mem: if (mem_ack_i) begin
        reply_d = (op == 8'h03) ? {31'd0, mem_err_i} : mem_rdata_i;
        left_d  = 3'd4;
        state_d = Reply;
      end
      Reply: if (tx_ready_i) begin
        reply_d = {8'd0, reply_q[31:8]};
        left_d  = left_q - 3'd1;
        if (left_q == 3'd1) state_d = Recv;
      end
      default: state_d = Recv;
    endcase
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q   <= Recv;
      frame_q   <= '0;
      nbytes_q  <= '0;
      idle_q    <= '0;
      aw_done_q <= 1'b0;
      w_done_q  <= 1'b0;
      reply_q   <= '0;
      left_q    <= '0;
    end else begin
      state_q   <= state_d;
      frame_q   <= frame_d;
      nbytes_q  <= nbytes_d;
      idle_q    <= idle_d;
      aw_done_q <= aw_done_d;
      w_done_q  <= w_done_d;
      reply_q   <= reply_d;
      left_q    <= left_d;
    end
  end
endmodule
