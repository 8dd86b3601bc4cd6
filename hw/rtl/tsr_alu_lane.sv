// tsr_alu_lane: one accumulator lane of the tensor ALU, combinational
// (isa/semantics.md "ALU operations", W = Width). Operands and result are
// W-bit two's complement. The compute stage instantiates BATCH x BLOCK_OUT
// lanes and closes its forwarding loop through them, so everything here is
// one cycle of logic: mul and mulhr share one signed W x W multiplier.
module tsr_alu_lane #(
  parameter int Width = tsr_pkg::ACC_WIDTH,
  localparam int SW = $clog2(Width)  // bits of a shift amount 0..W-1
) (
  input  logic [3:0]       op_i,
  input  logic [Width-1:0] a_i,
  input  logic [Width-1:0] b_i,
  output logic [Width-1:0] res_o
);
  localparam logic [Width-1:0] MAX_SHIFT = Width'(Width - 1);
  localparam logic [Width-1:0] MIN_VAL = {1'b1, {(Width - 1){1'b0}}};
  localparam logic [Width-1:0] MAX_VAL = {1'b0, {(Width - 1){1'b1}}};
  // 2^(W-2), the rounding nudge of mulhr, as a 2W-bit signed constant.
  localparam logic [2*Width-1:0] HALF = {{(Width + 1){1'b0}}, 1'b1, {(Width - 2){1'b0}}};

  logic signed [Width-1:0]   a_s, b_s;
  logic signed [2*Width-1:0] prod, prod_nudged;
  logic [Width-1:0] b_neg, mask, rem, thr, shr_res, shl_res;
  logic [SW-1:0]    rsh, lsh;  // clamp(b) as right / left shift amounts
  logic             b_is_neg, round_up;
  logic             unused_hi;  // mulhr keeps bits [W-1:0] of the shifted sum
  // rqfin: b packs shift [4:0], zero point [13:5], lo [22:14], hi [31:23]
  // of its low 32 bits (b sign-extended first); the sum and clamp are done
  // exactly in QW bits before the result is cut to W.
  localparam int QW = ((Width > 10) ? Width : 10) + 2;
  logic [63:0]      b64;
  logic [SW-1:0]    q_sh;
  logic [Width-1:0] q_mask, q_rem, q_thr, q_r;
  logic signed [QW-1:0] q_v, q_lo, q_hi, q_c;
  logic             unused_b64;

  assign b64 = 64'($signed(b_i));
  assign unused_b64 = ^b64[63:32];

  // rqfin's shift is clamped to W-1 (a no-op when W >= 32)
  if (Width >= 32) begin : g_qsh_full
    assign q_sh = SW'(b64[4:0]);
  end else begin : g_qsh_clamp
    assign q_sh = (b64[4:0] > 5'(Width - 1)) ? SW'(Width - 1) : SW'(b64[4:0]);
  end

  always_comb begin
    a_s = $signed(a_i);
    b_s = $signed(b_i);
    b_is_neg = b_i[Width-1];
    b_neg = -b_i;

    // s = clamp(b, -(W-1), W-1): rsh = s when s >= 0, lsh = -s when s < 0.
    rsh = '0;
    lsh = '0;
    if (!b_is_neg) begin
      rsh = (b_i > MAX_SHIFT) ? SW'(Width - 1) : b_i[SW-1:0];
    end else begin
      // -b for b = INT_MIN wraps to INT_MIN itself, whose unsigned value is
      // also above W-1, so the clamp still applies.
      lsh = (b_neg > MAX_SHIFT) ? SW'(Width - 1) : b_neg[SW-1:0];
    end

    shr_res = $unsigned(a_s >>> rsh);
    shl_res = a_i << lsh;

    // rshr rounding: r = a & (2^s - 1) against ((2^s - 1) >> 1) + (a < 0).
    mask = ~({Width{1'b1}} << rsh);
    rem = a_i & mask;
    thr = (mask >> 1) + Width'(a_i[Width-1]);
    round_up = (rem > thr);

    // mulhr: with p = a*b and n = p >= 0 ? 2^(W-2) : 1 - 2^(W-2), (p + n)
    // truncated toward zero by 2^(W-1) equals floor((p + 2^(W-2)) / 2^(W-1))
    // for either sign of p, so one arithmetic shift does it.
    prod = a_s * b_s;
    prod_nudged = (prod + $signed(HALF)) >>> (Width - 1);
    unused_hi = ^prod_nudged[2*Width-1:Width];

    q_mask = ~({Width{1'b1}} << q_sh);
    q_rem = a_i & q_mask;
    q_thr = (q_mask >> 1) + Width'(a_i[Width-1]);
    q_r = $unsigned(a_s >>> q_sh) + Width'(q_rem > q_thr);
    q_v = QW'($signed(q_r)) + QW'($signed(b64[13:5]));
    q_lo = QW'($signed(b64[22:14]));
    q_hi = QW'($signed(b64[31:23]));
    q_c = (q_v < q_lo) ? q_lo : q_v;
    q_c = (q_c > q_hi) ? q_hi : q_c;

    case (op_i)
      4'd8: res_o = q_c[Width-1:0];                               // rqfin
      4'd0: res_o = (a_s < b_s) ? a_i : b_i;                      // min
      4'd1: res_o = (a_s > b_s) ? a_i : b_i;                      // max
      4'd2: res_o = a_i + b_i;                                     // add
      4'd3: res_o = b_is_neg ? shl_res : shr_res;                  // shr
      4'd4: res_o = prod[Width-1:0];                               // mul
      4'd5: res_o = b_i;                                           // mov
      4'd6: res_o = b_is_neg ? shl_res : shr_res + Width'(round_up); // rshr
      default: res_o = (a_i == MIN_VAL && b_i == MIN_VAL) ? MAX_VAL  // mulhr
                                                          : prod_nudged[Width-1:0];
    endcase
  end
endmodule
