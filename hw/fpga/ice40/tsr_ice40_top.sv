// tsr_ice40_top: the accelerator on an iCE40 UP5K board (e.g. iCEBreaker).
// The sg48 package has 39 I/Os, far fewer than tsr_top's AXI ports, so the
// board keeps everything on chip: device memory is the four SPRAMs behind a
// small AXI4 slave (tsr_spram_axi, 128 KiB), and a host reaches the control
// registers and the device memory over the board's USB UART (tsr_uart_host:
// 9-byte frames, 4-byte replies, 115200 8N1 by default). A host program
// writes instructions and tensors into device memory, then writes the same
// registers, in the same order, as the RTL backend does (INSN_ADDR,
// INSN_COUNT, CTRL.START), polls STATUS and reads the results back.
// Reset: a power-on counter (iCE40 flip-flops configure to 0) and the
// board's button (active low).
module tsr_ice40_top #(
  parameter int ClkHz = 12000000,
  parameter int Baud  = 115200
) (
  input  logic clk_i,
  input  logic btn_ni,     // user button, active low: reset while pressed
  input  logic uart_rx_i,
  output logic uart_tx_o,
  output logic led_done_no,  // lit (low) when STATUS.DONE is set
  output logic led_rx_no     // lit (low) while the host is sending
);
  // The initial value is what configuration gives every iCE40 flip-flop;
  // written out so simulation starts from it too.
  logic [3:0] por_q = 4'd0;
  logic       rst_n;
  always_ff @(posedge clk_i) begin
    if (por_q != 4'hf) por_q <= por_q + 4'd1;
  end
  assign rst_n = (por_q == 4'hf) && btn_ni;

  // UART byte streams
  logic       rx_valid, tx_valid, tx_ready;
  logic [7:0] rx_data, tx_data;
  tsr_uart_rx #(.ClkHz(ClkHz), .Baud(Baud)) u_rx (
    .clk_i (clk_i), .rst_ni (rst_n), .rx_i (uart_rx_i), .valid_o (rx_valid), .data_o (rx_data));
  tsr_uart_tx #(.ClkHz(ClkHz), .Baud(Baud)) u_tx (
    .clk_i (clk_i), .rst_ni (rst_n), .valid_i (tx_valid), .ready_o (tx_ready), .data_i (tx_data),
    .tx_o (uart_tx_o));

  // AXI4-Lite from the host bridge to the accelerator
  logic        awvalid, awready, wvalid, wready, bvalid, bready, arvalid, arready, rvalid, rready;
  logic [7:0]  awaddr, araddr;
  logic [31:0] wdata, rdata;
  logic [1:0]  bresp;
  // host port of the device memory
  logic        host_req, host_we, host_ack, host_err;
  logic [31:2] host_addr;
  logic [31:0] host_wdata, host_rdata;

  tsr_uart_host u_host (
    .clk_i            (clk_i),
    .rst_ni           (rst_n),
    .rx_valid_i       (rx_valid),
    .rx_data_i        (rx_data),
    .tx_valid_o       (tx_valid),
    .tx_ready_i       (tx_ready),
    .tx_data_o        (tx_data),
    .m_axil_awvalid_o (awvalid),
    .m_axil_awready_i (awready),
    .m_axil_awaddr_o  (awaddr),
    .m_axil_wvalid_o  (wvalid),
    .m_axil_wready_i  (wready),
    .m_axil_wdata_o   (wdata),
    .m_axil_bvalid_i  (bvalid),
    .m_axil_bready_o  (bready),
    .m_axil_bresp_i   (bresp),
    .m_axil_arvalid_o (arvalid),
    .m_axil_arready_i (arready),
    .m_axil_araddr_o  (araddr),
    .m_axil_rvalid_i  (rvalid),
    .m_axil_rready_o  (rready),
    .m_axil_rdata_i   (rdata),
    .mem_req_o        (host_req),
    .mem_we_o         (host_we),
    .mem_addr_o       (host_addr),
    .mem_wdata_o      (host_wdata),
    .mem_ack_i        (host_ack),
    .mem_rdata_i      (host_rdata),
    .mem_err_i        (host_err)
  );

  // AXI4 from the accelerator to the device memory
  logic        m_arvalid, m_arready, m_rvalid, m_rready, m_rlast;
  logic        m_awvalid, m_awready, m_wvalid, m_wready, m_wlast, m_bvalid, m_bready;
  logic [31:0] m_araddr, m_awaddr, m_rdata, m_wdata;
  logic [7:0]  m_arlen, m_awlen;
  logic [1:0]  m_arid, m_awid, m_rid, m_bid, m_rresp, m_bresp;
  logic [3:0]  m_wstrb;
  logic        done;
  logic        irq;   // ap_ctrl_hs interrupt: no line to the host here (it polls over the UART)

  // The core: tsr_top picks it by SERIAL_CORE (the ice40 preset's serial
  // core is the one that fits an UP5K).
  tsr_top u_tsr (
    .clk_i            (clk_i),
    .rst_ni           (rst_n),
    .s_axil_awvalid_i (awvalid),
    .s_axil_awready_o (awready),
    .s_axil_awaddr_i  (awaddr),
    .s_axil_wvalid_i  (wvalid),
    .s_axil_wready_o  (wready),
    .s_axil_wdata_i   (wdata),
    .s_axil_wstrb_i   (4'hf),
    .s_axil_bvalid_o  (bvalid),
    .s_axil_bready_i  (bready),
    .s_axil_bresp_o   (bresp),
    .s_axil_arvalid_i (arvalid),
    .s_axil_arready_o (arready),
    .s_axil_araddr_i  (araddr),
    .s_axil_rvalid_o  (rvalid),
    .s_axil_rready_i  (rready),
    .s_axil_rdata_o   (rdata),
    .s_axil_rresp_o   (),
    .m_axi_arvalid_o  (m_arvalid),
    .m_axi_arready_i  (m_arready),
    .m_axi_araddr_o   (m_araddr),
    .m_axi_arlen_o    (m_arlen),
    .m_axi_arsize_o   (),
    .m_axi_arburst_o  (),
    .m_axi_arid_o     (m_arid),
    .m_axi_rvalid_i   (m_rvalid),
    .m_axi_rready_o   (m_rready),
    .m_axi_rdata_i    (m_rdata),
    .m_axi_rresp_i    (m_rresp),
    .m_axi_rlast_i    (m_rlast),
    .m_axi_rid_i      (m_rid),
    .m_axi_awvalid_o  (m_awvalid),
    .m_axi_awready_i  (m_awready),
    .m_axi_awaddr_o   (m_awaddr),
    .m_axi_awlen_o    (m_awlen),
    .m_axi_awsize_o   (),
    .m_axi_awburst_o  (),
    .m_axi_awid_o     (m_awid),
    .m_axi_wvalid_o   (m_wvalid),
    .m_axi_wready_i   (m_wready),
    .m_axi_wdata_o    (m_wdata),
    .m_axi_wstrb_o    (m_wstrb),
    .m_axi_wlast_o    (m_wlast),
    .m_axi_bvalid_i   (m_bvalid),
    .m_axi_bready_o   (m_bready),
    .m_axi_bresp_i    (m_bresp),
    .m_axi_bid_i      (m_bid),
    .done_o           (done),
    .interrupt_o      (irq)
  );

  tsr_spram_axi u_mem (
    .clk_i           (clk_i),
    .rst_ni          (rst_n),
    .s_axi_arvalid_i (m_arvalid),
    .s_axi_arready_o (m_arready),
    .s_axi_araddr_i  (m_araddr),
    .s_axi_arlen_i   (m_arlen),
    .s_axi_arid_i    (m_arid),
    .s_axi_rvalid_o  (m_rvalid),
    .s_axi_rready_i  (m_rready),
    .s_axi_rdata_o   (m_rdata),
    .s_axi_rresp_o   (m_rresp),
    .s_axi_rlast_o   (m_rlast),
    .s_axi_rid_o     (m_rid),
    .s_axi_awvalid_i (m_awvalid),
    .s_axi_awready_o (m_awready),
    .s_axi_awaddr_i  (m_awaddr),
    .s_axi_awlen_i   (m_awlen),
    .s_axi_awid_i    (m_awid),
    .s_axi_wvalid_i  (m_wvalid),
    .s_axi_wready_o  (m_wready),
    .s_axi_wdata_i   (m_wdata),
    .s_axi_wstrb_i   (m_wstrb),
    .s_axi_wlast_i   (m_wlast),
    .s_axi_bvalid_o  (m_bvalid),
    .s_axi_bready_i  (m_bready),
    .s_axi_bresp_o   (m_bresp),
    .s_axi_bid_o     (m_bid),
    .host_req_i      (host_req),
    .host_we_i       (host_we),
    .host_addr_i     (host_addr),
    .host_wdata_i    (host_wdata),
    .host_ack_o      (host_ack),
    .host_rdata_o    (host_rdata),
    .host_err_o      (host_err)
  );

  assign led_done_no = !done;
  assign led_rx_no   = uart_rx_i;
endmodule
