// tsr_serial_accel: the accelerator with the serial core (config key
// SERIAL_CORE = 1; hw/rtl/tsr_serial_core.sv says how it works), for FPGAs
// far smaller than the pipelined tsr_pipe_accel needs. Same ports, register
// map and behaviour at the boundary: the AXI4-Lite control slave is the
// same tsr_ctrl, DRAM is reached through a single-beat AXI4 master, and a
// soft reset holds the core while the master completes its transaction.
// tsr_top instantiates it when the config asks for it.
`include "tsr_assert.svh"
`include "tsr_axi.svh"

module tsr_serial_accel (
  input  logic        clk_i,
  input  logic        rst_ni,
  // AXI4-Lite control slave
  `TSR_AXIL_S_PORTS,
  // AXI4 master (DRAM)
  `TSR_AXI_M_PORTS(tsr_pkg::BUS_BYTES),
  // completion flag (= STATUS.DONE: set by FINISH or an error, cleared by a start)
  output logic        done_o,
  // ap_ctrl_hs interrupt (GIE & |(IER & ISR)); Vitis calls this port `interrupt`
  output logic        interrupt_o
);
  localparam int BW = tsr_pkg::DRAM_BUS_WIDTH;

  logic        start, finish, soft_rst, core_rst_n, axi_idle, axi_err;
  logic [31:0] insn_addr, insn_count, fetched, tokens, units;
  logic [29:0] stage_insns;
  logic [3:0]  busy, errs;
  logic        compute_exec;
  logic        gemm_op, alu_op, rd_beat, wr_beat;
  logic        req_valid, req_ready, req_write, rsp_valid, rsp_err;
  logic [31:0] req_addr;
  logic [BW-1:0] req_wdata, rsp_rdata;
  logic [BW/8-1:0] req_wstrb;
  logic [tsr_pkg::CNT_COUNT-1:0]   cnt_inc;

  // The counters the driver's progress watchdog and run budget read, in 36
  // bits (over an hour and a half at 12 MHz): cycles, DRAM bytes, tensor ops, and
  // COMPUTE_BUSY, which here counts the cycles the compute stage executes
  // (the watchdog's busy - waits, with the waits not built). The others are
  // not built and read 0: on the smallest parts sixteen 64-bit counters
  // were a third of the core.
  localparam logic [tsr_pkg::CNT_COUNT-1:0] CntMask =
    tsr_pkg::CNT_COUNT'((1 << tsr_pkg::CNT_CYCLES) | (1 << tsr_pkg::CNT_COMPUTE_BUSY) |
                        (1 << tsr_pkg::CNT_DRAM_RD_BYTES) | (1 << tsr_pkg::CNT_DRAM_WR_BYTES) |
                        (1 << tsr_pkg::CNT_GEMM_OPS) | (1 << tsr_pkg::CNT_ALU_OPS));

  tsr_ctrl #(.CntMask(CntMask), .CntWidth(36)) u_ctrl (
    .clk_i            (clk_i),
    .rst_ni           (rst_ni),
    `TSR_AXIL_S_CONNECT,
    .start_o          (start),
    .done_o           (done_o),
    .interrupt_o      (interrupt_o),
    .insn_addr_o      (insn_addr),
    .insn_count_o     (insn_count),
    .finish_i         (finish),
    .err_i            ((|errs) | axi_err),
    .fetched_i        (fetched),
    .stage_insns_i    (stage_insns),
    .cnt_inc_i        (cnt_inc),
    .tokens_i         (tokens),
    .units_i          (units),
    .axi_idle_i       (axi_idle),
    .soft_rst_o       (soft_rst)
  );

  assign core_rst_n = rst_ni && !soft_rst;
  // REG_UNITS (isa/tsr_regs.h): busy and error per unit
  assign units = {19'd0, axi_err, errs, 3'd0, !axi_idle, busy};

  // Counter events, in tsr_pkg::CNT_* order (DRAM counters count bytes per beat).
  always_comb begin
    cnt_inc = '0;
    cnt_inc[tsr_pkg::CNT_CYCLES]       = 1'b1;
    cnt_inc[tsr_pkg::CNT_COMPUTE_BUSY] = compute_exec;
    cnt_inc[tsr_pkg::CNT_DRAM_RD_BYTES] = rd_beat;
    cnt_inc[tsr_pkg::CNT_DRAM_WR_BYTES] = wr_beat;
    cnt_inc[tsr_pkg::CNT_GEMM_OPS]     = gemm_op;
    cnt_inc[tsr_pkg::CNT_ALU_OPS]      = alu_op;
  end

  tsr_serial_core u_core (
    .clk_i           (clk_i),
    .rst_ni          (core_rst_n),
    .start_i         (start),
    .insn_addr_i     (insn_addr),
    .insn_count_i    (insn_count),
    .mem_req_valid_o (req_valid),
    .mem_req_ready_i (req_ready),
    .mem_req_write_o (req_write),
    .mem_req_addr_o  (req_addr),
    .mem_req_wdata_o (req_wdata),
    .mem_req_wstrb_o (req_wstrb),
    .mem_rsp_valid_i (rsp_valid),
    .mem_rsp_rdata_i (rsp_rdata),
    .mem_rsp_err_i   (rsp_err),
    .finish_o        (finish),
    .busy_o          (busy),
    .err_o           (errs),
    .compute_exec_o  (compute_exec),
    .gemm_op_o       (gemm_op),
    .alu_op_o        (alu_op),
    .fetched_o       (fetched),
    .stage_insns_o   (stage_insns),
    .tokens_o        (tokens)
  );

  tsr_serial_axi u_axi (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .req_valid_i     (req_valid),
    .req_ready_o     (req_ready),
    .req_write_i     (req_write),
    .req_addr_i      (req_addr),
    .req_wdata_i     (req_wdata),
    .req_wstrb_i     (req_wstrb),
    .rsp_valid_o     (rsp_valid),
    .rsp_rdata_o     (rsp_rdata),
    .rsp_err_o       (rsp_err),
    `TSR_AXI_M_CONNECT,
    .flush_i         (soft_rst),
    .idle_o          (axi_idle),
    .err_o           (axi_err),
    .rd_beat_o       (rd_beat),
    .wr_beat_o       (wr_beat)
  );

  // No run starts while the core is held in (soft) reset, and the one
  // single-beat master never moves a read and a write beat in one cycle.
  `TSR_ASSERT(chk_no_start_in_reset, !(start && soft_rst), clk_i, rst_ni)
  `TSR_ASSERT(chk_one_beat, !(rd_beat && wr_beat), clk_i, rst_ni)
endmodule
