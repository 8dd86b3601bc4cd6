// tsr_alu_fscale: the ALU op fscale (isa/semantics.md "ALU operations",
// config key EXACT_REQUANT): round_half_even(float32(float32(a) * f)) with
// f the IEEE binary32 scale in b's 32 bits, saturated to 32 bits. This is
// how ONNX Runtime requantizes (MLAS's MlasRequantizeOutput), so with it a
// device's quantized outputs are that runtime's bit for bit.
//
// No floating-point unit: the float32 arithmetic is done in integers, the
// way tests/tsr_ref.c's ref_fscale does it (checked there against the
// host's float32 on 2M pairs):
//   1. |a| to a 24-bit significand: leading one, normalize, round half to
//      even (the int32 -> float32 conversion; a carry out makes it 2^24,
//      which is 2^23 with the exponent one higher);
//   2. that times the scale's significand {1, b[22:0]}: a 48-bit product
//      in [2^46, 2^48), rounded to 24 bits half to even (the float32
//      multiply's rounding, again with a carry case);
//   3. the 24-bit product significand times 2^E to an integer, rounded half
//      to even, saturated; the sign is a's sign xor b's sign bit.
// Exponent field 0 (zero, subnormal) or 255 (infinity, NaN) gives 0, as
// does a = 0. The float32 product cannot overflow into an infinity that
// matters (anything >= 2^31 saturates) nor underflow into a subnormal
// (|a| >= 1 and f >= 2^-126), so the exponent range needs no special case.
//
// The 24 x 24 multiply is not here: the op's operands go out on mul_a_o /
// mul_b_o and the product comes back on prod_i, so the lane's one W x W
// multiplier (mul, mulhr; DSP blocks on an FPGA) serves fscale too
// (tsr_alu_pre muxes its operands). Combinational, like the rest of the
// lane: the op has the latency of every other ALU op.
`include "tsr_assert.svh"

module tsr_alu_fscale #(
  parameter int Width = tsr_pkg::ACC_WIDTH
) (
  input  logic [Width-1:0] a_i,       // the accumulator value, W-bit two's complement
  input  logic [Width-1:0] b_i,       // the scale's binary32 bit pattern
  output logic [23:0]      mul_a_o,   // |a| rounded to 24 bits (to the multiplier)
  output logic [23:0]      mul_b_o,   // the scale's significand (to the multiplier)
  input  logic [47:0]      prod_i,    // mul_a_o * mul_b_o
  output logic [Width-1:0] res_o
);
  localparam int LW = $clog2(Width);  // bits of a leading-one index 0..W-1
  localparam int DROP = Width - 24;   // bits of |a| below a 24-bit significand
  // E, the weight of the product significand's last bit, spans
  // [-149, 137]: a signed 10-bit value.
  localparam int EW = 10;
  // |v| >= 2^(W-1) when the product significand's last bit weighs this or
  // more (its leading one is 23 bits higher).
  localparam logic signed [EW-1:0] E_SAT = EW'(Width - 1 - 23);
  // Left shift of the significand into a fixed-point word with FB
  // fraction bits (guard + sticky for a right shift of up to 25: anything
  // shifted further is below 1/2 and rounds to 0).
  localparam int FB = 25;
  localparam int FXW = FB + Width - 1;  // the word: an integer part below 2^(W-1), the fraction
  localparam logic signed [EW-1:0] E_ZERO = EW'(-FB);  // e below this: 0

  logic [7:0]          ex;
  logic                scale_ok, neg, zero;
  logic [Width-1:0]    mag, norm;
  logic [LW-1:0]       msb;
  logic [24:0]         sig_a_r, sig_p_r;  // 24-bit significands plus the rounding carry
  logic                rnd_a, rnd_p, carry_a, carry_p, p_hi, g_p, s_p;
  logic [23:0]         sig_p_t, sig_p;
  logic signed [EW-1:0] e;
  logic [FXW-1:0]      fx;
  logic [Width-2:0]    v_t;
  logic [Width-1:0]    v;
  logic [5:0]          fsh;  // e + FB, 0..FB + E_SAT - 1
  logic                g_v, s_v, sat;

  // The index of x's leading one (0 for x = 0: the caller checks zero).
  function automatic logic [LW-1:0] lead1(input logic [Width-1:0] x);
    lead1 = '0;
    for (int i = 0; i < Width; i++) if (x[i]) lead1 = LW'(i);
  endfunction

  // Continuous assignments, no always_comb: written as two always_comb
  // blocks (before and after the multiplier) this module kept Icarus 11
  // waking one block from the other forever at time 0.
  assign ex = b_i[30:23];
  assign scale_ok = (ex != 8'h00) && (ex != 8'hff);
  assign neg = a_i[Width-1] ^ b_i[31];
  // |a| as a W-bit unsigned value (-2^(W-1) gives 2^(W-1), still W bits)
  assign mag = a_i[Width-1] ? -a_i : a_i;
  assign zero = (mag == '0);

  // 1. leading one, then normalize it to bit W-1
  assign msb = lead1(mag);
  assign norm = mag << (LW'(Width - 1) - msb);
  // round to 24 bits, half to even: guard is the first dropped bit, sticky
  // the rest; a tie keeps the even significand
  assign rnd_a = norm[DROP-1] && ((norm[DROP-2:0] != '0) || norm[DROP]);
  assign sig_a_r = {1'b0, norm[Width-1 -: 24]} + 25'(rnd_a);
  assign carry_a = sig_a_r[24];  // 2^24 - 1 rounded up: 2^24, that is 2^23 * 2
  assign mul_a_o = carry_a ? 24'h80_0000 : sig_a_r[23:0];
  assign mul_b_o = {1'b1, b_i[22:0]};

  // 2. the product in [2^46, 2^48): 24 bits from its leading one, rounded
  assign p_hi = prod_i[47];
  assign sig_p_t = p_hi ? prod_i[47:24] : prod_i[46:23];
  assign g_p = p_hi ? prod_i[23] : prod_i[22];
  assign s_p = p_hi ? (prod_i[22:0] != '0) : (prod_i[21:0] != '0);
  assign rnd_p = g_p && (s_p || sig_p_t[0]);
  assign sig_p_r = {1'b0, sig_p_t} + 25'(rnd_p);
  assign carry_p = sig_p_r[24];
  assign sig_p = carry_p ? 24'h80_0000 : sig_p_r[23:0];

  // 3. p = sig_p * 2^e. |a| ~ mul_a * 2^(msb - 23 + carry_a), f = mul_b *
  // 2^(ex - 150), and sig_p is the product >> (23 + p_hi), or one more on a
  // carry:
  assign e = EW'(msb) + EW'(carry_a) + EW'(ex) - EW'(150) + EW'(p_hi) + EW'(carry_p);
  assign sat = (e >= E_SAT);
  // sig_p << (e + FB) in a fixed-point word with FB fraction bits; below
  // -FB the value is under 1/2 (sig_p < 2^24) and rounds to 0
  assign fsh = 6'(e + EW'(FB));
  assign fx = (e >= E_ZERO && !sat) ? (FXW'(sig_p) << fsh) : '0;
  assign v_t = fx[FXW-1:FB];  // the integer part, below 2^(W-1)
  assign g_v = fx[FB-1];
  assign s_v = (fx[FB-2:0] != '0);
  // round half to even; v stays below 2^(W-1) (a round up happens only
  // with fraction bits, so when v_t < 2^24)
  assign v = {1'b0, v_t} + Width'(g_v && (s_v || v_t[0]));

  assign res_o = (!scale_ok || zero) ? '0
               : sat ? (neg ? {1'b1, {(Width - 1){1'b0}}} : {1'b0, {(Width - 1){1'b1}}})
               : neg ? -v : v;

  // b is a binary32 pattern and a's rounding drops W - 24 bits with a
  // guard and a sticky bit: the config allows fscale only with 32-bit
  // accumulators (EXACT_REQUANT needs LOG_ACC_WIDTH 5, isa/tsr_config.c).
  `TSR_ASSERT_INIT(chk_width, Width == 32)
endmodule
