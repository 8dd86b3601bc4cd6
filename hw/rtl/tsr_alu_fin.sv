// tsr_alu_fin: the end of rqfin (isa/semantics.md "ALU operations"): the
// zero point added to the rounded shift of tsr_alu_pre and the result
// clamped to [lo, hi], the sum and clamp done exactly in QW bits before the
// result is cut to W. b packs zero point [13:5], lo [22:14], hi [31:23] of
// its low 32 bits (sign-extended first). Every other op passes through.
// Combinational.
`include "tsr_assert.svh"

module tsr_alu_fin #(
  parameter int Width = tsr_pkg::ACC_WIDTH,
  localparam int OW = tsr_pkg::ALU_ALU_OPCODE_W  // ALU operation bits
) (
  input  logic [OW-1:0]      op_i,
  input  logic [Width-1:0] b_i,
  input  logic [Width-1:0] pre_i,  // tsr_alu_pre's result
  output logic [Width-1:0] res_o
);
  localparam int QW = ((Width > 10) ? Width : 10) + 2;
  logic [63:0]          b64;
  logic signed [QW-1:0] q_v, q_lo, q_hi, q_c;
  logic                 unused_b64;

  assign b64 = 64'($signed(b_i));
  assign unused_b64 = ^{b64[63:32], b64[4:0]};

  always_comb begin
    q_v = QW'($signed(pre_i)) + QW'($signed(b64[13:5]));
    q_lo = QW'($signed(b64[22:14]));
    q_hi = QW'($signed(b64[31:23]));
    q_c = (q_v < q_lo) ? q_lo : q_v;
    q_c = (q_c > q_hi) ? q_hi : q_c;
    res_o = (op_i == OW'(tsr_pkg::ALU_RQFIN)) ? q_c[Width-1:0] : pre_i;
  end

  // b is widened to 64 bits to read its packed fields: wider lanes would lose bits.
  `TSR_ASSERT_INIT(chk_width, Width >= 3 && Width <= 64)
endmodule
