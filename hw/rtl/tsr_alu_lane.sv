// tsr_alu_lane: one accumulator lane of the tensor ALU, combinational
// (isa/semantics.md "ALU operations", W = Width): tsr_alu_pre and
// tsr_alu_fin back to back. Operands and result are W-bit two's complement.
// The compute stage instantiates BATCH x BLOCK_OUT lanes and closes its
// forwarding loop through them, so everything here is one cycle of logic.
`include "tsr_assert.svh"

module tsr_alu_lane #(
  parameter int Width = tsr_pkg::ACC_WIDTH,
  localparam int OW = tsr_pkg::ALU_ALU_OPCODE_W  // ALU operation bits
) (
  input  logic [OW-1:0]      op_i,
  input  logic [Width-1:0] a_i,
  input  logic [Width-1:0] b_i,
  output logic [Width-1:0] res_o
);
  logic [Width-1:0] pre;

  tsr_alu_pre #(.Width(Width)) u_pre (.op_i, .a_i, .b_i, .res_o(pre));
  tsr_alu_fin #(.Width(Width)) u_fin (.op_i, .b_i, .pre_i(pre), .res_o);

  // op_i is 4 bits: every defined ALU operation must be encodable in it.
  `TSR_ASSERT_INIT(chk_op_width, tsr_pkg::ALU_COUNT <= 16)
endmodule
