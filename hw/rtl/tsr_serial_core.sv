// tsr_serial_core: the serial microarchitecture (SERIAL_CORE = 1), for the
// smallest FPGAs. It executes the same ISA with the same answers as the
// pipelined core (isa/semantics.md) on one shared datapath, one instruction
// at a time, trading cycles for area. This module is its wiring:
// - tsr_serial_sched, the scheduler: fetch dispatches each instruction's
//   index and flags into the command queue of its stage; in turn it picks a
//   stage whose head instruction has its pop tokens, reads the whole
//   instruction and runs it to completion (an instruction whose push finds
//   its token queue full leaves the push pending; its stage waits while the
//   others go on). The stages keep their own program order and synchronise
//   only through tokens, so a stream that completes on the pipelined core
//   completes here (atomic instructions are one of its legal schedules; the
//   verifier rejects every stream whose answer depends on the schedule).
// - tsr_serial_mem, the memory port: DRAM one byte per cycle through a
//   one-word read buffer and a one-word write-combining buffer
//   (tsr_serial_axi: single beats).
// - tsr_serial_exec, the execute datapath: the GEMM array and accumulate,
//   the ALU lane in two cycles.
// - the on-chip buffers (uop, inp, wgt, acc, out), one tsr_sram each: the
//   scheduler writes and addresses them, the execute datapath reads the
//   GEMM operands straight from their read ports.
// Errors (malformed instruction, index or range, DRAM beyond 32 bits or an
// error response, reserved ALU opcode) stop the core with the unit's sticky
// error bit until the next start or reset. After FINISH the core stops, so
// the registers show what was left (tokens, queued work) for the driver's
// end-of-run checks.
`include "tsr_assert.svh"

module tsr_serial_core (
  input  logic         clk_i,
  input  logic         rst_ni,
  input  logic         start_i,
  input  logic [31:0]  insn_addr_i,
  input  logic [31:0]  insn_count_i,
  // DRAM (tsr_serial_axi)
  output logic         mem_req_valid_o,
  input  logic         mem_req_ready_i,
  output logic         mem_req_write_o,
  output logic [31:0]  mem_req_addr_o,
  output logic [tsr_pkg::BUS_BYTES*8-1:0] mem_req_wdata_o,
  output logic [tsr_pkg::BUS_BYTES-1:0]   mem_req_wstrb_o,
  input  logic         mem_rsp_valid_i,
  input  logic [tsr_pkg::BUS_BYTES*8-1:0] mem_rsp_rdata_i,
  input  logic         mem_rsp_err_i,
  // status
  output logic         finish_o,      // FINISH executed (one cycle)
  output logic [3:0]   busy_o,        // {store, compute, load, fetch}
  output logic [3:0]   err_o,         // {store, compute, load, fetch}, sticky
  output logic         compute_exec_o, // the compute stage executes an instruction
  output logic         gemm_op_o,     // a non-reset GEMM tensor op completed
  output logic         alu_op_o,      // an ALU tensor op completed
  output logic [31:0]  fetched_o,     // instructions dispatched this run
  output logic [29:0]  stage_insns_o, // {store, compute, load} completed, 10 bits each
  output logic [31:0]  tokens_o       // REG_TOKENS: {s2c, c2s, c2l, l2c}
);
  localparam int BB   = tsr_pkg::BUS_BYTES;
  localparam int LB   = $clog2(BB);
  localparam int NL   = tsr_pkg::BATCH * tsr_pkg::BLOCK_OUT;  // accumulator lanes per row
  localparam int W    = tsr_pkg::ACC_WIDTH;
  localparam int AROW = NL * W;
  localparam int OROW = NL * tsr_pkg::OUT_WIDTH;
  localparam int LNW  = (NL > 1) ? $clog2(NL) : 1;  // an ALU lane (tsr_serial_exec's LaneW)

  // ------------------------------------------------------------ on-chip buffers
  logic                    uop_we, uop_re, inp_we, inp_re, wgt_we, wgt_re, acc_we, acc_re, out_we, out_re;
  logic [tsr_pkg::UOP_IDX_BITS-1:0] uop_waddr, uop_raddr;
  logic [tsr_pkg::INP_IDX_BITS-1:0] inp_waddr, inp_raddr;
  logic [tsr_pkg::WGT_IDX_BITS-1:0] wgt_waddr, wgt_raddr;
  logic [tsr_pkg::ACC_IDX_BITS-1:0] acc_waddr, acc_raddr, out_waddr, out_raddr;
  logic [tsr_pkg::UOP_BYTES*8-1:0]  uop_wdata, uop_rdata;
  logic [tsr_pkg::INP_BYTES*8-1:0]  inp_wdata, inp_rdata;
  logic [tsr_pkg::WGT_BYTES*8-1:0]  wgt_wdata, wgt_rdata;
  logic [AROW-1:0]         acc_wdata, acc_rdata;
  logic [OROW-1:0]         out_wdata, out_rdata;

  tsr_sram #(.Width(tsr_pkg::UOP_BYTES * 8), .Depth(tsr_pkg::UOP_DEPTH), .NoRdw(1)) u_uop (
    .clk_i, .we_i(uop_we), .waddr_i(uop_waddr), .wdata_i(uop_wdata), .re_i(uop_re), .raddr_i(uop_raddr),
    .rdata_o(uop_rdata));
  tsr_sram #(.Width(tsr_pkg::INP_BYTES * 8), .Depth(tsr_pkg::INP_DEPTH), .NoRdw(1)) u_inp (
    .clk_i, .we_i(inp_we), .waddr_i(inp_waddr), .wdata_i(inp_wdata), .re_i(inp_re), .raddr_i(inp_raddr),
    .rdata_o(inp_rdata));
  tsr_sram #(.Width(tsr_pkg::WGT_BYTES * 8), .Depth(tsr_pkg::WGT_DEPTH), .NoRdw(1)) u_wgt (
    .clk_i, .we_i(wgt_we), .waddr_i(wgt_waddr), .wdata_i(wgt_wdata), .re_i(wgt_re), .raddr_i(wgt_raddr),
    .rdata_o(wgt_rdata));
  tsr_sram #(.Width(AROW), .Depth(tsr_pkg::ACC_DEPTH), .NoRdw(1)) u_acc (
    .clk_i, .we_i(acc_we), .waddr_i(acc_waddr), .wdata_i(acc_wdata), .re_i(acc_re), .raddr_i(acc_raddr),
    .rdata_o(acc_rdata));
  tsr_sram #(.Width(OROW), .Depth(tsr_pkg::OUT_DEPTH), .NoRdw(1)) u_out (
    .clk_i, .we_i(out_we), .waddr_i(out_waddr), .wdata_i(out_wdata), .re_i(out_re), .raddr_i(out_raddr),
    .rdata_o(out_rdata));

  // ------------------------------------------------------------ scheduler <-> memory port
  logic [32:0]  dram_addr;
  logic [32:LB] dram_addr_next;
  logic         dram_rd_need, dram_wr_need, dram_rdrop, dram_wput;
  logic [7:0]   dram_wbyte, dram_rbyte;
  logic         dram_rhit, dram_wclash, dram_wpend, dram_busy, dram_err;

  // ------------------------------------------------------------ scheduler <-> execute
  logic [LNW-1:0]                         exec_lane;
  logic [tsr_pkg::ALU_ALU_OPCODE_W-1:0]   exec_alu_op;
  logic                                   exec_use_imm;
  logic [tsr_pkg::ALU_IMM_W-1:0]          exec_imm;
  logic [W-1:0]                           exec_src, exec_alu_res;
  logic [AROW-1:0]                        exec_alu_row, exec_acc_row;
  logic [OROW-1:0]                        exec_out_row, exec_alu_out;

  tsr_serial_sched #(.LaneW(LNW)) u_sched (
    .clk_i,
    .rst_ni,
    .start_i,
    .insn_addr_i,
    .insn_count_i,
    .dram_addr_o      (dram_addr),
    .dram_addr_next_o (dram_addr_next),
    .dram_rd_need_o   (dram_rd_need),
    .dram_wr_need_o   (dram_wr_need),
    .dram_rdrop_o     (dram_rdrop),
    .dram_wput_o      (dram_wput),
    .dram_wbyte_o     (dram_wbyte),
    .dram_rhit_i      (dram_rhit),
    .dram_rbyte_i     (dram_rbyte),
    .dram_wclash_i    (dram_wclash),
    .dram_wpend_i     (dram_wpend),
    .dram_busy_i      (dram_busy),
    .dram_err_i       (dram_err),
    .uop_we_o         (uop_we),
    .uop_re_o         (uop_re),
    .uop_waddr_o      (uop_waddr),
    .uop_raddr_o      (uop_raddr),
    .uop_wdata_o      (uop_wdata),
    .uop_rdata_i      (uop_rdata),
    .inp_we_o         (inp_we),
    .inp_re_o         (inp_re),
    .inp_waddr_o      (inp_waddr),
    .inp_raddr_o      (inp_raddr),
    .inp_wdata_o      (inp_wdata),
    .wgt_we_o         (wgt_we),
    .wgt_re_o         (wgt_re),
    .wgt_waddr_o      (wgt_waddr),
    .wgt_raddr_o      (wgt_raddr),
    .wgt_wdata_o      (wgt_wdata),
    .acc_we_o         (acc_we),
    .acc_re_o         (acc_re),
    .acc_waddr_o      (acc_waddr),
    .acc_raddr_o      (acc_raddr),
    .acc_wdata_o      (acc_wdata),
    .acc_rdata_i      (acc_rdata),
    .out_we_o         (out_we),
    .out_re_o         (out_re),
    .out_waddr_o      (out_waddr),
    .out_raddr_o      (out_raddr),
    .out_wdata_o      (out_wdata),
    .out_rdata_i      (out_rdata),
    .exec_lane_o      (exec_lane),
    .exec_alu_op_o    (exec_alu_op),
    .exec_use_imm_o   (exec_use_imm),
    .exec_imm_o       (exec_imm),
    .exec_src_o       (exec_src),
    .exec_alu_row_o   (exec_alu_row),
    .exec_acc_row_i   (exec_acc_row),
    .exec_out_row_i   (exec_out_row),
    .exec_alu_res_i   (exec_alu_res),
    .exec_alu_out_i   (exec_alu_out),
    .finish_o,
    .busy_o,
    .err_o,
    .compute_exec_o,
    .gemm_op_o,
    .alu_op_o,
    .fetched_o,
    .stage_insns_o,
    .tokens_o
  );

  tsr_serial_mem #(.BusBytes(BB)) u_mem (
    .clk_i,
    .rst_ni,
    .start_i,
    .addr_i          (dram_addr),
    .addr_next_i     (dram_addr_next),
    .rd_need_i       (dram_rd_need),
    .wr_need_i       (dram_wr_need),
    .rdrop_i         (dram_rdrop),
    .wput_i          (dram_wput),
    .wbyte_i         (dram_wbyte),
    .rhit_o          (dram_rhit),
    .rbyte_o         (dram_rbyte),
    .wclash_o        (dram_wclash),
    .wpend_o         (dram_wpend),
    .busy_o          (dram_busy),
    .rsp_err_o       (dram_err),
    .mem_req_valid_o,
    .mem_req_ready_i,
    .mem_req_write_o,
    .mem_req_addr_o,
    .mem_req_wdata_o,
    .mem_req_wstrb_o,
    .mem_rsp_valid_i,
    .mem_rsp_rdata_i,
    .mem_rsp_err_i
  );

  tsr_serial_exec #(.LaneW(LNW)) u_exec (
    .clk_i,
    .inp_i     (inp_rdata),
    .wgt_i     (wgt_rdata),
    .acc_i     (acc_rdata),
    .acc_row_o (exec_acc_row),
    .out_row_o (exec_out_row),
    .lane_i    (exec_lane),
    .alu_op_i  (exec_alu_op),
    .use_imm_i (exec_use_imm),
    .imm_i     (exec_imm),
    .src_i     (exec_src),
    .alu_res_o (exec_alu_res),
    .alu_row_i (exec_alu_row),
    .alu_out_o (exec_alu_out)
  );

  // One step touches a buffer through one port: the scheduler never reads
  // and writes a buffer in the same cycle (stronger than the NoRdw promise
  // each tsr_sram checks for its rows).
  `TSR_ASSERT(chk_one_access, !(uop_we && uop_re) && !(inp_we && inp_re) && !(wgt_we && wgt_re) &&
              !(acc_we && acc_re) && !(out_we && out_re), clk_i, rst_ni)
endmodule
