// tsr_ctrl: AXI4-Lite control slave in the Vitis RTL-kernel convention
// (ap_ctrl_hs at 0x00, GIE/IER/ISR at 0x04-0x0C, the kernel arguments from
// 0x10), then Tessera's registers: status, soft reset, progress, tokens,
// units and the 64-bit performance counters, at the offsets of the one
// register map (isa/tsr_regs.h -> tsr_pkg::REG_*). One run at a time:
// ap_start is taken only when idle, ap_ready rises with ap_done. Counters
// clear at a start and count while the run is busy. Reading a counter's LO
// word latches its HI word, so a 64-bit value is read consistently.
// Soft reset (SOFT_RESET, isa/tsr_regs.h): soft_rst_o holds every stage,
// fetch and the token queues in reset and makes the AXI4 master drain
// (no new bursts, outstanding ones completed); STATUS.RESETTING clears
// once the master reports idle, at least RstMin cycles later.
// CntMask and CntWidth trim the counters for small parts (tsr_serial_accel):
// a counter whose mask bit is 0 is not built and reads 0; the others count
// in CntWidth bits and read zero-extended to 64.
`include "tsr_assert.svh"
`include "tsr_axi.svh"

module tsr_ctrl #(
  parameter int NumCnt = tsr_pkg::CNT_COUNT,
  parameter logic [NumCnt-1:0] CntMask = '1,
  parameter int CntWidth = 64
) (
  input  logic        clk_i,
  input  logic        rst_ni,
  // AXI4-Lite slave
  `TSR_AXIL_S_PORTS,
  // to the accelerator
  output logic        start_o,
  output logic        done_o,         // STATUS.DONE (level; cleared by the next start)
  output logic        interrupt_o,    // GIE & |(IER & ISR)
  output logic [31:0] insn_addr_o,
  output logic [31:0] insn_count_o,
  input  logic        finish_i,       // FINISH executed
  input  logic        err_i,          // any unit reported an error
  input  logic [31:0] fetched_i,
  input  logic [29:0] stage_insns_i,  // {store[9:0], compute[9:0], load[9:0]}
  input  logic [NumCnt-1:0] cnt_inc_i,     // one event this cycle (the DRAM byte counters: one beat)
  input  logic [31:0] tokens_i,       // REG_TOKENS
  input  logic [31:0] units_i,        // REG_UNITS
  input  logic        axi_idle_i,     // the AXI4 master has nothing outstanding
  output logic        soft_rst_o      // soft reset in progress (stages held, master draining)
);
  localparam int RstMin = 3;  // cycles the stages are held before idle is trusted
  logic        busy_q, busy_d, done_q, done_d;
  logic        ap_done_q, ap_done_d, ap_ready_q, ap_ready_d, auto_q, auto_d;  // AP_CTRL bits
  logic        gie_q, gie_d;
  logic [1:0]  ier_q, ier_d, isr_q, isr_d;
  logic [31:0] addr_hi_q, addr_hi_d;
  logic        rst_q, rst_d, soft_rst;
  logic [1:0]  rst_cnt_q, rst_cnt_d;
  logic [31:0] addr_q, addr_d, count_q, count_d;
  logic [NumCnt*64-1:0] cnt_q, cnt_d;  // counter k at [64k +: 64]
  logic [31:0] hi_latch_q, hi_latch_d;
  logic        bvalid_q, bvalid_d, rvalid_q, rvalid_d;
  logic [31:0] rdata_q, rdata_d;
  logic        do_write, do_read, start, host_start, finish, restart, wr_ctrl;
  logic [31:0] rd_value, rd_hi;
  logic [7:0]  raddr;

  // Accept a write when address and data are both present and the previous
  // response has been taken; reads likewise.
  assign do_write = s_axil_awvalid_i && s_axil_wvalid_i && !bvalid_q;
  assign do_read  = s_axil_arvalid_i && !rvalid_q;
  assign s_axil_awready_o = do_write;
  assign s_axil_wready_o  = do_write;
  assign s_axil_arready_o = do_read;
  assign s_axil_bvalid_o  = bvalid_q;
  assign s_axil_bresp_o   = 2'b00;
  assign s_axil_rvalid_o  = rvalid_q;
  assign s_axil_rdata_o   = rdata_q;
  assign s_axil_rresp_o   = 2'b00;
  assign raddr = s_axil_araddr_i;

  // SOFT_RESET wins over an ap_start written in the same cycle (there is
  // one write port, so that cannot happen today); ap_start waits for idle.
  assign wr_ctrl = do_write && s_axil_awaddr_i == 8'(tsr_pkg::REG_AP_CTRL) && s_axil_wstrb_i[0];
  assign soft_rst = do_write && s_axil_awaddr_i == 8'(tsr_pkg::REG_SOFT_RESET) && s_axil_wstrb_i[0] &&
                    s_axil_wdata_i[tsr_pkg::SOFT_RESET_BIT];
  assign host_start = wr_ctrl && s_axil_wdata_i[tsr_pkg::AP_START_BIT] && !busy_q && !rst_q && !soft_rst;
  assign finish = busy_q && (finish_i || err_i);
  // auto_restart: the same arguments run again after a clean finish.
  assign restart = finish && auto_q && !err_i && !soft_rst;
  assign start = host_start || restart;
  assign interrupt_o = gie_q && |(ier_q & isr_q);
  assign soft_rst_o = rst_q;
  assign start_o = start;
  assign done_o = done_q;
  assign insn_addr_o = addr_q;
  assign insn_count_o = count_q;

  // What one event adds: a bus beat's bytes for the DRAM byte counters, else 1.
  function automatic logic [7:0] cnt_step(input int k);
    cnt_step = (k == tsr_pkg::CNT_DRAM_RD_BYTES || k == tsr_pkg::CNT_DRAM_WR_BYTES) ? 8'(tsr_pkg::BUS_BYTES)
                                                                                     : 8'd1;
  endfunction

  always_comb begin
    rd_value = '0;
    rd_hi = '0;
    if (raddr == 8'(tsr_pkg::REG_AP_CTRL))
      rd_value = {24'd0, auto_q, 3'd0, ap_ready_q, !busy_q && !rst_q, ap_done_q, busy_q};
    else if (raddr == 8'(tsr_pkg::REG_GIE)) rd_value = {31'd0, gie_q};
    else if (raddr == 8'(tsr_pkg::REG_IER)) rd_value = {30'd0, ier_q};
    else if (raddr == 8'(tsr_pkg::REG_ISR)) rd_value = {30'd0, isr_q};
    else if (raddr == 8'(tsr_pkg::REG_STATUS)) rd_value = {28'd0, rst_q, err_i, done_q, busy_q};
    else if (raddr == 8'(tsr_pkg::REG_SOFT_RESET)) rd_value = {31'd0, rst_q};
    else if (raddr == 8'(tsr_pkg::REG_INSN_ADDR)) rd_value = addr_q;
    else if (raddr == 8'(tsr_pkg::REG_INSN_ADDR_HI)) rd_value = addr_hi_q;
    else if (raddr == 8'(tsr_pkg::REG_INSN_COUNT)) rd_value = count_q;
    else if (raddr == 8'(tsr_pkg::REG_STAGE_INSNS)) rd_value = {2'd0, stage_insns_i};
    else if (raddr == 8'(tsr_pkg::REG_FETCHED)) rd_value = fetched_i;
    else if (raddr == 8'(tsr_pkg::REG_TOKENS)) rd_value = tokens_i;
    else if (raddr == 8'(tsr_pkg::REG_UNITS)) rd_value = units_i;
    for (int k = 0; k < NumCnt; k++) begin
      if (CntMask[k] && raddr == 8'(tsr_pkg::REG_COUNTERS + 8 * k)) begin
        rd_value = cnt_q[k*64 +: 32];
        rd_hi = cnt_q[k*64+32 +: 32];
      end
      if (raddr == 8'(tsr_pkg::REG_COUNTERS + 8 * k + 4)) rd_value = hi_latch_q;
    end
  end

  always_comb begin
    busy_d = busy_q;
    done_d = done_q;
    ap_done_d = ap_done_q;
    ap_ready_d = ap_ready_q;
    auto_d = auto_q;
    gie_d = gie_q;
    ier_d = ier_q;
    isr_d = isr_q;
    addr_hi_d = addr_hi_q;
    rst_d = rst_q;
    rst_cnt_d = rst_cnt_q;
    addr_d = addr_q;
    count_d = count_q;
    hi_latch_d = hi_latch_q;
    bvalid_d = bvalid_q;
    rvalid_d = rvalid_q;
    rdata_d = rdata_q;
    cnt_d = cnt_q;
    for (int k = 0; k < NumCnt; k++) begin
      if (busy_q && cnt_inc_i[k])
        cnt_d[k*64 +: 64] = 64'(CntWidth'(cnt_q[k*64 +: CntWidth] + CntWidth'(cnt_step(k))));
      if (!CntMask[k]) cnt_d[k*64 +: 64] = '0;
    end
    if (start) cnt_d = '0;
    if (s_axil_bvalid_o && s_axil_bready_i) bvalid_d = 1'b0;
    if (s_axil_rvalid_o && s_axil_rready_i) rvalid_d = 1'b0;
    if (do_write) begin
      bvalid_d = 1'b1;
      if (!busy_q && s_axil_awaddr_i == 8'(tsr_pkg::REG_INSN_ADDR)) addr_d = s_axil_wdata_i;
      if (!busy_q && s_axil_awaddr_i == 8'(tsr_pkg::REG_INSN_ADDR_HI)) addr_hi_d = s_axil_wdata_i;
      if (!busy_q && s_axil_awaddr_i == 8'(tsr_pkg::REG_INSN_COUNT)) count_d = s_axil_wdata_i;
      if (wr_ctrl) auto_d = s_axil_wdata_i[tsr_pkg::AP_AUTO_RESTART_BIT];
      if (s_axil_awaddr_i == 8'(tsr_pkg::REG_GIE)) gie_d = s_axil_wdata_i[0];
      if (s_axil_awaddr_i == 8'(tsr_pkg::REG_IER)) ier_d = s_axil_wdata_i[1:0];
      if (s_axil_awaddr_i == 8'(tsr_pkg::REG_ISR)) isr_d = isr_q ^ s_axil_wdata_i[1:0];  // toggle on write
    end
    if (do_read) begin
      rvalid_d = 1'b1;
      rdata_d = rd_value;
      hi_latch_d = rd_hi;
      // ap_done and ap_ready clear on read (an event in this cycle wins, below)
      if (raddr == 8'(tsr_pkg::REG_AP_CTRL)) begin
        ap_done_d = 1'b0;
        ap_ready_d = 1'b0;
      end
    end
    if (finish) begin
      busy_d = 1'b0;
      done_d = 1'b1;
      ap_done_d = 1'b1;
      ap_ready_d = 1'b1;
      isr_d = isr_d | ier_q;
    end
    if (start) begin
      busy_d = 1'b1;
      done_d = 1'b0;
    end
    if (rst_q) begin
      if (rst_cnt_q != 2'(RstMin)) rst_cnt_d = rst_cnt_q + 2'd1;
      else if (axi_idle_i) rst_d = 1'b0;
    end
    if (soft_rst) begin
      rst_d = 1'b1;
      rst_cnt_d = '0;
      busy_d = 1'b0;
      done_d = 1'b0;
      ap_done_d = 1'b0;
      ap_ready_d = 1'b0;
      auto_d = 1'b0;
      isr_d = '0;
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      busy_q <= 1'b0;
      done_q <= 1'b0;
      ap_done_q <= 1'b0;
      ap_ready_q <= 1'b0;
      auto_q <= 1'b0;
      gie_q <= 1'b0;
      ier_q <= '0;
      isr_q <= '0;
      addr_hi_q <= '0;
      rst_q <= 1'b0;
      rst_cnt_q <= '0;
      addr_q <= '0;
      count_q <= '0;
      hi_latch_q <= '0;
      bvalid_q <= 1'b0;
      rvalid_q <= 1'b0;
      rdata_q <= '0;
      cnt_q <= '0;
    end else begin
      busy_q <= busy_d;
      done_q <= done_d;
      ap_done_q <= ap_done_d;
      ap_ready_q <= ap_ready_d;
      auto_q <= auto_d;
      gie_q <= gie_d;
      ier_q <= ier_d;
      isr_q <= isr_d;
      addr_hi_q <= addr_hi_d;
      rst_q <= rst_d;
      rst_cnt_q <= rst_cnt_d;
      addr_q <= addr_d;
      count_q <= count_d;
      hi_latch_q <= hi_latch_d;
      bvalid_q <= bvalid_d;
      rvalid_q <= rvalid_d;
      rdata_q <= rdata_d;
      cnt_q <= cnt_d;
    end
  end

  // Only byte 0 of AP_CTRL / SOFT_RESET carries bits; the other strobes select nothing.
  logic unused_wstrb;
  assign unused_wstrb = ^s_axil_wstrb_i[3:1];

  // A run and a soft reset never overlap: the reset ends the run and no
  // start is taken until it is over.
  `TSR_ASSERT(chk_no_run_in_reset, !(busy_q && rst_q), clk_i, rst_ni)
  `TSR_ASSERT(chk_no_start_in_reset, !(start && rst_q), clk_i, rst_ni)
endmodule
