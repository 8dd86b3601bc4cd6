// tsr_serial_exec: the serial core's execute datapath (tsr_serial_core), the
// arithmetic its GEMM and ALU micro-steps use, apart from the scheduler
// (tsr_serial_sched) that decides which step runs and when:
// - GEMM: the array of tsr_gemm_core on the input and weight rows read this
//   cycle, added lane by lane to the accumulator row read with them; the sum
//   is the row S_GEMM_WR writes back (acc_row_o) and its out-row view.
// - ALU: one lane, lane_i of the accumulator row (the dst operand) against
//   src_i (the src lane, or the immediate), in two cycles: tsr_alu_pre's
//   result is registered here (alu_pre_q) and tsr_alu_fin finishes it in the
//   next cycle (one cycle for the whole lane was the iCE40's critical path).
//   The scheduler holds a, b and the op still for both cycles. fscale
//   (EXACT_REQUANT) is part of tsr_alu_pre, so it fills the first cycle and
//   takes the two cycles of every op.
// - The out-row view of a row (the low OUT_WIDTH bits of each lane) for the
//   scheduler's ALU row, so both writes of an op share one definition.
// Nothing here decides control flow; the registers the micro-steps move
// (row, lane counter) stay with the scheduler, which also owns the walks
// of LOAD and STORE through the same row register.
`include "tsr_assert.svh"

module tsr_serial_exec #(
  // bits of a lane index (at least one): exactly the lanes, so the lane
  // select is an NL-way multiplexer; the scheduler checks the range
  parameter int LaneW = (tsr_pkg::BATCH * tsr_pkg::BLOCK_OUT > 1) ? $clog2(tsr_pkg::BATCH * tsr_pkg::BLOCK_OUT) : 1
) (
  input  logic clk_i,
  // GEMM: rows read from the SRAMs this cycle
  input  logic [tsr_pkg::INP_BYTES*8-1:0] inp_i,
  input  logic [tsr_pkg::WGT_BYTES*8-1:0] wgt_i,
  input  logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::ACC_WIDTH-1:0] acc_i,  // also the ALU's dst row
  output logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::ACC_WIDTH-1:0] acc_row_o,  // acc_i + inp_i x wgt_i
  output logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::OUT_WIDTH-1:0] out_row_o,  // its out row
  // ALU lane
  input  logic [LaneW-1:0]                          lane_i,     // dst lane of acc_i
  input  logic [tsr_pkg::ALU_ALU_OPCODE_W-1:0]      alu_op_i,
  input  logic                                      use_imm_i,
  input  logic [tsr_pkg::ALU_IMM_W-1:0]             imm_i,
  input  logic [tsr_pkg::ACC_WIDTH-1:0]             src_i,      // src lane (when !use_imm_i)
  output logic [tsr_pkg::ACC_WIDTH-1:0]             alu_res_o,  // valid in the lane's second cycle
  // out-row view of the scheduler's ALU row
  input  logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::ACC_WIDTH-1:0] alu_row_i,
  output logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::OUT_WIDTH-1:0] alu_out_o
);
  localparam int NL   = tsr_pkg::BATCH * tsr_pkg::BLOCK_OUT;  // accumulator lanes per row
  localparam int W    = tsr_pkg::ACC_WIDTH;
  localparam int OW   = tsr_pkg::OUT_WIDTH;
  localparam int AROW = NL * W;
  localparam int OROW = NL * OW;

  // out row of an accumulator row: the low OUT_WIDTH bits of each lane
  function automatic logic [OROW-1:0] out_of(input logic [AROW-1:0] a);
    for (int l = 0; l < NL; l++) out_of[l*OW +: OW] = a[l*W +: OW];
  endfunction

  // ------------------------------------------------------------ GEMM
  logic [AROW-1:0] dot;
  // (no depthwise mode: the serial core refuses DEPTHWISE, tsr_emit_rtl_supported)
  tsr_gemm_core u_gemm (.clk_i, .inp_i, .wgt_i, .dw_i(1'b0), .taps_i({(tsr_pkg::INP_BYTES*8){1'b0}}),
                       .grp_i('0), .dot_o(dot));
  for (genvar l = 0; l < NL; l++) begin : g_acc_add
    assign acc_row_o[l*W +: W] = acc_i[l*W +: W] + dot[l*W +: W];
  end
  assign out_row_o = out_of(acc_row_o);
  assign alu_out_o = out_of(alu_row_i);

  // ------------------------------------------------------------ ALU lane
  logic [W-1:0] alu_a, alu_b, alu_pre, alu_pre_q;
  assign alu_a = acc_i[lane_i*W +: W];
  assign alu_b = use_imm_i ? W'($signed(imm_i)) : src_i;
  tsr_alu_pre u_alu_pre (.op_i(alu_op_i), .a_i(alu_a), .b_i(alu_b), .res_o(alu_pre));
  tsr_alu_fin u_alu_fin (.op_i(alu_op_i), .b_i(alu_b), .pre_i(alu_pre_q), .res_o(alu_res_o));

  // No reset: the scheduler reads it only in a lane's second cycle.
  always_ff @(posedge clk_i) alu_pre_q <= alu_pre;

  // The out row keeps the low OUT_WIDTH bits of each accumulator lane.
  `TSR_ASSERT_INIT(chk_out_width, OW <= W)
endmodule
