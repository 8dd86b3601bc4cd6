// tsr_alu_pre: everything of an ALU lane but rqfin's finish
// (isa/semantics.md "ALU operations", W = Width), combinational: the result
// of every op except rqfin, for which it is a shifted right by b's shift
// field and rounded (rshr's rounding), before tsr_alu_fin adds the zero
// point and clamps. tsr_alu_lane is the two back to back; the serial core
// registers between them (a lane is two cycles there, so its clock meets
// an iCE40's). Operands and result are W-bit two's complement; mul and
// mulhr share one signed W x W multiplier. With EXACT_REQUANT, fscale
// (tsr_alu_fscale) is here too and uses the same multiplier for its 24 x 24
// significand product (its operands muxed in), so the op costs no DSP
// block and has every op's latency; without the key none of it is
// generated and the lane is what it was.
`include "tsr_assert.svh"

module tsr_alu_pre #(
  parameter int Width = tsr_pkg::ACC_WIDTH,
  localparam int SW = $clog2(Width),  // bits of a shift amount 0..W-1
  localparam int OW = tsr_pkg::ALU_ALU_OPCODE_W  // ALU operation bits
) (
  input  logic [OW-1:0]      op_i,
  input  logic [Width-1:0] a_i,
  input  logic [Width-1:0] b_i,
  output logic [Width-1:0] res_o   // the result; rqfin: the rounded shift
);
  // ALU operations (isa: tsr_pkg::ALU_*), as op_i values
  localparam logic [OW-1:0] OP_MIN = OW'(tsr_pkg::ALU_MIN), OP_MAX = OW'(tsr_pkg::ALU_MAX);
  localparam logic [OW-1:0] OP_ADD = OW'(tsr_pkg::ALU_ADD), OP_SHR = OW'(tsr_pkg::ALU_SHR);
  localparam logic [OW-1:0] OP_MUL = OW'(tsr_pkg::ALU_MUL), OP_MOV = OW'(tsr_pkg::ALU_MOV);
  localparam logic [OW-1:0] OP_RSHR = OW'(tsr_pkg::ALU_RSHR), OP_RQFIN = OW'(tsr_pkg::ALU_RQFIN);
  localparam logic [Width-1:0] MAX_SHIFT = Width'(Width - 1);
  localparam logic signed [Width-1:0] MIN_SHIFT = -$signed(MAX_SHIFT);  // -(W-1)
  localparam logic [Width-1:0] MIN_VAL = {1'b1, {(Width - 1){1'b0}}};
  localparam logic [Width-1:0] MAX_VAL = {1'b0, {(Width - 1){1'b1}}};
  // 2^(W-2), the rounding nudge of mulhr, as a 2W-bit signed constant.
  localparam logic [2*Width-1:0] HALF = {{(Width + 1){1'b0}}, 1'b1, {(Width - 2){1'b0}}};

  logic signed [Width-1:0]   a_s, b_s;
  logic signed [Width-1:0]   mul_a, mul_b;  // the multiplier's operands (a, b; fscale's)
  logic [Width-1:0]          base_res;      // the result of every op but fscale
  logic signed [2*Width-1:0] prod, prod_nudged;
  logic [Width-1:0] low_mask, sh_x, shr_res, shl_res, sh_res, rnd_res, ab_res;
  logic [Width+1:0] sh_z;      // {fill, operand, guard} shifted right
  logic [SW-1:0]    rsh, lsh;  // clamp(b) as right / left shift amounts
  logic [SW-1:0]    sh;        // the right shift of this op (rsh, or rqfin's)
  logic             b_is_neg, left, round_up, guard, sticky, a_lt_b, pick_a;
  logic             unused_hi;  // mulhr keeps bits [W-1:0] of the shifted sum
  // rqfin: b packs shift [4:0] of its low 32 bits (b sign-extended first);
  // the rest is tsr_alu_fin's.
  logic [63:0]      b64;
  logic [SW-1:0]    q_sh;
  logic             unused_b64;

  assign b64 = 64'($signed(b_i));
  assign unused_b64 = ^b64[63:5];

  // rqfin's shift is clamped to W-1 (a no-op when W >= 32)
  if (Width >= 32) begin : g_qsh_full
    assign q_sh = SW'(b64[4:0]);
  end else begin : g_qsh_clamp
    assign q_sh = (b64[4:0] > 5'(Width - 1)) ? SW'(Width - 1) : SW'(b64[4:0]);
  end

  // Bit-reversed copy of a W-bit value: a left shift is a right shift of
  // the reversed operand, reversed back. Written as log2 stages of swaps
  // (halves, quarters, ... single bits) of v in the top of an RP-bit word,
  // RP = W rounded up to a power of two: wiring in hardware like a bit
  // loop, but a few word operations in a simulator instead of one per bit.
  localparam int LRP = $clog2(Width);
  localparam int RP = 1 << LRP;
  // stage k swaps blocks of RP >> (k+1) bits; its mask keeps the low block of each pair
  function automatic logic [LRP*RP-1:0] rev_masks();
    for (int k = 0; k < LRP; k++)
      for (int i = 0; i < RP; i++) rev_masks[k*RP + i] = (i % (RP >> k)) < (RP >> (k + 1));
  endfunction
  localparam logic [LRP*RP-1:0] REV_MASKS = rev_masks();
  function automatic logic [Width-1:0] rev(input logic [Width-1:0] v);
    logic [RP-1:0] x, m;
    x = RP'(v) << (RP - Width);
    for (int k = 0; k < LRP; k++) begin
      m = REV_MASKS[k*RP +: RP];
      x = ((x & m) << (RP >> (k + 1))) | ((x >> (RP >> (k + 1))) & m);
    end
    rev = x[Width-1:0];
  endfunction

  // The one multiplier, outside the always_comb below: with fscale its
  // operands depend on tsr_alu_fscale, whose result depends on prod, and
  // one block both reading and writing that chain is a (false)
  // combinational loop to Verilator.
  assign prod = mul_a * mul_b;

  // Area: shr, rshr and rqfin share one shifter (left shifts through bit
  // reversal) and one rounding term (rqfin's r is rshr's result for its own
  // shift amount, shr's is rshr's without the rounding); min, max and mov
  // one a-or-b select and one comparator (on a tie both operands are the
  // result).
  always_comb begin
    a_s = $signed(a_i);
    b_s = $signed(b_i);
    b_is_neg = b_i[Width-1];

    // s = clamp(b, -(W-1), W-1): rsh = s when s >= 0, lsh = -s when s < 0.
    rsh = '0;
    lsh = '0;
    if (!b_is_neg) begin
      rsh = (b_i > MAX_SHIFT) ? SW'(Width - 1) : b_i[SW-1:0];
    end else begin
      // -b <= W-1 fits in SW bits, so only the low bits of b are negated.
      lsh = (b_s < MIN_SHIFT) ? SW'(Width - 1) : -b_i[SW-1:0];
    end
    sh = (op_i == OP_RQFIN) ? q_sh : rsh;
    left = b_is_neg && (op_i != OP_RQFIN);

    // One shifter: {fill, x, 0} >> amount. Right: x = a, fill = sign, the
    // guard bit below x catches a[s-1] (0 when s = 0). Left: x = rev(a),
    // fill = 0, and rev() of the result is a << lsh.
    sh_x = left ? rev(a_i) : a_i;
    sh_z = {left ? 1'b0 : a_i[Width-1], sh_x, 1'b0};
    sh_z = $unsigned($signed(sh_z) >>> (left ? lsh : sh));
    shr_res = sh_z[Width:1];
    shl_res = rev(sh_z[Width:1]);
    guard = sh_z[0];

    // Rounding half away from zero, r = a & (2^s - 1) > ((2^s - 1) >> 1) +
    // (a < 0): for s > 0 that is a[s-1] set and, for a < 0, any bit below
    // it set too; nothing for s = 0 (guard is 0 then).
    // bits 0 .. s-2 set: (2^s - 1) >> 1, as a shift of ones (one word
    // operation in a simulator, the same bit-by-bit decode of s in hardware)
    low_mask = Width'(~({(Width + 1){1'b1}} << sh) >> 1);
    sticky = (a_i & low_mask) != '0;
    // shr does not round: shr and rshr then share one result
    round_up = guard && (!a_i[Width-1] || sticky) && (op_i != OP_SHR);
    rnd_res = shr_res + Width'(round_up);
    sh_res = b_is_neg ? shl_res : rnd_res;

    // min, max and mov pick a or b
    a_lt_b = (a_s < b_s);
    pick_a = (op_i == OP_MIN) ? a_lt_b : (op_i == OP_MAX) ? !a_lt_b : 1'b0;
    ab_res = pick_a ? a_i : b_i;

    // mulhr: with p = a*b and n = p >= 0 ? 2^(W-2) : 1 - 2^(W-2), (p + n)
    // truncated toward zero by 2^(W-1) equals floor((p + 2^(W-2)) / 2^(W-1))
    // for either sign of p, so one arithmetic shift does it.
    prod_nudged = (prod + $signed(HALF)) >>> (Width - 1);
    unused_hi = ^prod_nudged[2*Width-1:Width];

    case (op_i)
      OP_RQFIN: base_res = rnd_res;                                  // rqfin: a rounded, shifted
      OP_MIN, OP_MAX, OP_MOV: base_res = ab_res;                      // min, max, mov
      OP_ADD: base_res = a_i + b_i;                                 // add
      OP_SHR, OP_RSHR: base_res = sh_res;                             // shr, rshr
      OP_MUL: base_res = prod[Width-1:0];                           // mul
      default: base_res = (a_i == MIN_VAL && b_i == MIN_VAL) ? MAX_VAL  // mulhr
                                                             : prod_nudged[Width-1:0];
    endcase
  end

  if (tsr_pkg::EXACT_REQUANT != 0) begin : g_fscale
    // fscale: its significands go through the lane's multiplier (both
    // below 2^24, so positive as W-bit signed operands and their product
    // exact in its low 48 bits)
    localparam logic [OW-1:0] OP_FSCALE = OW'(tsr_pkg::ALU_FSCALE);
    logic [23:0]      fs_a, fs_b;
    logic [Width-1:0] fs_res;
    logic             is_fs;
    tsr_alu_fscale #(.Width(Width)) u_fscale (
      .a_i, .b_i, .mul_a_o(fs_a), .mul_b_o(fs_b), .prod_i(prod[47:0]), .res_o(fs_res)
    );
    assign is_fs = (op_i == OP_FSCALE);
    assign mul_a = is_fs ? $signed(Width'(fs_a)) : $signed(a_i);
    assign mul_b = is_fs ? $signed(Width'(fs_b)) : $signed(b_i);
    assign res_o = is_fs ? fs_res : base_res;
  end else begin : g_no_fscale
    assign mul_a = $signed(a_i);
    assign mul_b = $signed(b_i);
    assign res_o = base_res;
  end

  // HALF needs W >= 3; b64 (rqfin's shift field) needs W <= 64.
  `TSR_ASSERT_INIT(chk_width, Width >= 3 && Width <= 64)
endmodule
