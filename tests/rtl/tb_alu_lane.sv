// tb_alu_lane: tsr_alu_lane (the shared-shifter, shared-rounding lane)
// against a behavioural reference written here from isa/semantics.md "ALU
// operations" in 64-bit integer arithmetic: every op 0..8 on corner operands
// (0, +-1, the extremes, the shift clamps +-(W-1), +-W, rqfin fields at their
// bounds) crossed with each other, then random operands (half of them with b
// narrowed so shift amounts and rqfin fields take every value). The first
// mismatches print op, operands, lane result and reference.
// fscale (op 9, only where the config has EXACT_REQUANT: the ops run are
// those of tsr_pkg::ALU_OPS_MASK) against an integer-only model of float32
// arithmetic (tests/tsr_ref.c's ref_fscale, which test_fsim_ops checks
// against the host's float32; Icarus has no binary32 type), on top of the
// corners and random pairs: ties in each of the three roundings, |a| above
// 2^24, saturation, scales with exponent field 0 and 255, and random scales
// with exponents around 127 (the requantization range).
// lut (op 10, where the config has ACT_LUT) is not the lane's: tsr_alu_lut
// computes it beside the lane and the ALU pipe muxes its result over the
// lane's, so it is skipped here; tb_alu_lut checks it.
// Seed: SEED below (printed).
module tb_alu_lane;
  localparam int W = tsr_pkg::ACC_WIDTH;
  localparam int NRAND = 20000;
  localparam int SEED = 11;
  localparam logic [15:0] OPS = tsr_pkg::ALU_OPS_MASK;  // the ops this config runs

  logic [3:0]   op;
  logic [W-1:0] a, b, res;
  int errors = 0;
  int checked = 0;
  int seed_state;

  tsr_alu_lane #(.Width(W)) u_lane (.op_i(op), .a_i(a), .b_i(b), .res_o(res));

  // W-bit two's complement value of x (the result wraps to W bits).
  function automatic longint wrapw(input longint x);
    longint m;
    m = x & ((longint'(1) << W) - 1);
    if (m >= (longint'(1) << (W - 1))) m = m - (longint'(1) << W);
    return m;
  endfunction

  // a / 2^s rounded half away from zero (rshr for s > 0).
  function automatic longint rdiv(input longint x, input int s);
    longint r, h;
    r = x & ((longint'(1) << s) - 1);
    h = (((longint'(1) << s) - 1) >>> 1) + ((x < 0) ? 1 : 0);
    return (x >>> s) + ((r > h) ? 1 : 0);
  endfunction

  // m * 2^-sh rounded to an integer, half to even (sh >= 0)
  function automatic longint rne_shift(input longint m, input int sh);
    longint q, rem, half;
    if (sh == 0) return m;
    if (sh > 62) return 0;
    q = m >> sh;
    rem = m & ((longint'(1) << sh) - 1);
    half = longint'(1) << (sh - 1);
    return q + ((rem > half || (rem == half && q[0])) ? 1 : 0);
  endfunction

  // m (> 0, below 2^56) rounded to 24 significant bits, half to even;
  // returns the significand | (bits dropped << 56)
  // (the bits dropped, carry included, come back in the top byte: a
  // function, as Icarus lets functions call no tasks)
  function automatic longint round24(input longint m);
    int msb, sh;
    msb = 62;
    sh = 0;
    while (((m >> msb) & 1) == 0) msb--;
    if (msb > 23) begin
      sh = msb - 23;
      m = rne_shift(m, sh);
      if ((m >> 24) != 0) begin  // the rounding carried to 2^24
        m = m >> 1;
        sh += 1;
      end
    end
    return (longint'(sh) << 56) | m;
  endfunction

  // fscale: round_half_even(float32(float32(x) * f)), f = binary32 bits,
  // saturated to W bits; 0 for an exponent field of 0 or 255
  function automatic longint fscale_ref(input longint x, input logic [31:0] bits);
    int ex, e;
    bit neg;
    longint m, r, v, lim;
    ex = int'(bits[30:23]);
    if (ex == 0 || ex == 255 || x == 0) return 0;
    neg = (x < 0) != bits[31];
    e = 0;
    m = (x < 0) ? -x : x;
    r = round24(m);
    m = r & 32'hff_ffff;
    e += int'(r >> 56);
    // the product of two 24-bit significands is below 2^48: no overflow
    m = m * longint'({1'b1, bits[22:0]});
    e += ex - 127 - 23;
    r = round24(m);
    m = r & 32'hff_ffff;
    e += int'(r >> 56);
    lim = longint'(1) << (W - 1);
    if (e >= 0) v = (e >= 40) ? lim : (m << e);
    else v = rne_shift(m, -e);
    if (v >= lim) return neg ? -lim : lim - 1;
    return neg ? -v : v;
  endfunction

  function automatic longint reference(input int o, input longint x, input longint y);
    longint s, p, n, b64, zp, lo, hi, r, t;
    s = (y > W - 1) ? W - 1 : (y < -(W - 1)) ? -(W - 1) : y;
    if (o == 9) return fscale_ref(x, 32'(y));
    case (o)
      0: return (x < y) ? x : y;
      1: return (x > y) ? x : y;
      2: return wrapw(x + y);
      3: return (s >= 0) ? (x >>> s) : wrapw(x << (-s));
      4: return wrapw(x * y);
      5: return y;
      6: return (s > 0) ? rdiv(x, int'(s)) : (s == 0) ? x : wrapw(x << (-s));
      7: begin
        if (x == -(longint'(1) << (W - 1)) && y == -(longint'(1) << (W - 1)))
          return (longint'(1) << (W - 1)) - 1;
        p = x * y;
        n = (p >= 0) ? (longint'(1) << (W - 2)) : 1 - (longint'(1) << (W - 2));
        return (p + n) / (longint'(1) << (W - 1));  // truncates toward zero
      end
      default: begin  // 8: rqfin
        b64 = y;  // y is already the sign-extended b
        t = b64 & 31;
        if (t > W - 1) t = W - 1;
        zp = (b64 >> 5) & 511;
        if (zp >= 256) zp = zp - 512;
        lo = (b64 >> 14) & 511;
        if (lo >= 256) lo = lo - 512;
        hi = (b64 >> 23) & 511;
        if (hi >= 256) hi = hi - 512;
        r = (t == 0) ? x : rdiv(x, int'(t));
        r = r + zp;
        if (r < lo) r = lo;
        if (r > hi) r = hi;
        return wrapw(r);
      end
    endcase
  endfunction

  task automatic check(input int o, input logic [W-1:0] x, input logic [W-1:0] y);
    longint want;
    op = 4'(o);
    a = x;
    b = y;
    #1;
    want = reference(o, longint'($signed(x)), longint'($signed(y)));
    checked++;
    if (longint'($signed(res)) != want) begin
      errors++;
      if (errors <= 10)
        $display("FAIL op %0d a %h b %h: lane %h reference %h", o, x, y, res, W'(want));
    end
  endtask

  localparam int NC = 16;
  logic [W-1:0] corner [NC];

  // a binary32 pattern: sign, exponent field, fraction
  function automatic logic [31:0] f32(input bit sg, input int ex, input logic [22:0] fr);
    return {sg, 8'(ex), fr};
  endfunction

  // The fscale-specific operands (W = 32: the config allows fscale only
  // then).
  task automatic fscale_cases;
    int n0;
    logic [31:0] x, f;
    n0 = checked;
    // 1. the int -> float32 rounding of |a| >= 2^24: floats are 2^(k+1)
    // apart above 2^(24+k), so base + d * 2^k is a tie for odd d (2^24 + 1
    // rounds down to even, 2^24 + 3 up) and a quarter point a quarter
    // further; a carry to 2^(25+k); times 1.0 and 1.0 + 2^-23, both signs
    for (int k = 0; k < 7; k++) begin
      logic [31:0] base;
      base = 32'(1) << (24 + k);
      for (int d = -3; d <= 3; d++) begin
        x = base + 32'(d << k);
        check(9, x, f32(0, 127, 0));
        check(9, -x, f32(0, 127, 0));
        check(9, x, f32(1, 127, 23'h1));
        check(9, x + 32'((1 << k) / 2), f32(0, 127, 0));  // a quarter point
      end
      check(9, (base << 1) - 1, f32(0, 127, 0));  // rounds up to 2^(25 + k)
    end
    // 2. ties of the integer rounding: odd a times 2^-1 (x.5), 2^-2, 1.5
    // * 2^-1 (x.25 / x.75 and .5)
    for (int i = -20; i <= 20; i++) begin
      check(9, 32'(i), f32(0, 126, 0));
      check(9, 32'(i), f32(1, 126, 0));
      check(9, 32'(i), f32(0, 125, 0));
      check(9, 32'(i), f32(0, 126, 23'h40_0000));
    end
    // 3. ties of the product's rounding: odd 24-bit a in [2^23, 2^25 / 3)
    // times 1.5 * 2^k (the product's bit 22 is the guard, nothing below it)
    for (int k = 0; k < 2000; k++) begin
      x = (32'h80_0000 + ($urandom(seed_state) % 32'h2a_aaaa)) | 32'(1);
      f = f32(k[0], 127 - 28 + int'($urandom(seed_state) % 36), 23'h40_0000);
      check(9, x, f);
      check(9, -x, f);
    end
    // 4. saturation: large scales, the extremes, results right at 2^31
    check(9, 32'h7fff_ffff, f32(0, 127, 0));
    check(9, 32'h8000_0000, f32(0, 127, 0));   // -2^31 * 1 = -2^31 exactly
    check(9, 32'h8000_0000, f32(1, 127, 0));   // 2^31: saturates to 2^31 - 1
    check(9, 32'h4000_0000, f32(0, 128, 0));   // 2^31
    check(9, 32'h3fff_ffff, f32(0, 128, 0));   // float32(2^30 - 1) = 2^30, * 2
    check(9, 32'h7fff_ff80, f32(0, 127, 0));   // 2^31 - 128: exact, fits
    check(9, 32'h7fff_ffbf, f32(0, 127, 0));   // rounds down to 2^31 - 128
    check(9, 32'h7fff_ffc0, f32(0, 127, 0));   // a tie: up to 2^31, saturates
    check(9, 32'h8000_0040, f32(0, 127, 0));   // -(2^31 - 64): tie to -2^31
    check(9, 32'd1, f32(0, 254, 23'h7f_ffff)); // the largest finite scale
    check(9, -32'd1, f32(0, 254, 23'h7f_ffff));
    check(9, 32'd1, f32(0, 157, 23'h7f_ffff)); // float32 just below 2^31
    check(9, 32'd1, f32(0, 158, 0));           // 2^31
    check(9, 32'd3, f32(1, 157, 0));           // -3 * 2^30
    // 5. non-normal scales: exponent 0 (zero, subnormals) and 255 (inf,
    // NaN), each sign, against corner and random a: always 0
    for (int k = 0; k < 64; k++) begin
      x = (k < NC) ? corner[k] : $urandom(seed_state);
      check(9, x, f32(k[0], 0, 23'h0));
      check(9, x, f32(k[0], 0, 23'(k * 77777 + 1)));
      check(9, x, f32(k[0], 255, 23'h0));
      check(9, x, f32(k[0], 255, 23'(k * 77777 + 1)));
    end
    // 6. random a (of every magnitude) and random scales with exponents
    // around 127, and a few anywhere
    for (int k = 0; k < NRAND; k++) begin
      x = $urandom(seed_state);
      x = 32'($signed(x) >>> ($urandom(seed_state) % 32));
      f = $urandom(seed_state);
      if (k % 8 != 0) f[30:23] = 8'(127 - 40 + int'($urandom(seed_state) % 60));
      check(9, x, f);
    end
    $display("fscale: %0d operand pairs", checked - n0);
  endtask


  initial begin
    seed_state = SEED;
    $display("tb_alu_lane: seed %0d, W = %0d, %0d random operand pairs per op", SEED, W, NRAND);
    corner[0] = '0;
    corner[1] = W'(1);
    corner[2] = '1;                          // -1
    corner[3] = {1'b1, {(W - 1){1'b0}}};     // INT_MIN
    corner[4] = {1'b0, {(W - 1){1'b1}}};     // INT_MAX
    corner[5] = W'(W - 1);
    corner[6] = W'(W);
    corner[7] = -W'(W - 1);
    corner[8] = -W'(W);
    corner[9] = W'(5);
    corner[10] = -W'(5);
    corner[11] = W'(32'h0040_0019);          // rqfin: shift 25, zp 0, lo 0, hi 0
    corner[12] = W'(32'h7fbf_e00f);          // rqfin: shift 15, zp -256, lo -256... hi 255
    corner[13] = W'(32'h8040_3fe3);          // rqfin: hi -256, lo 1, zp -1, shift 3
    corner[14] = W'(32'h0000_0010);
    corner[15] = W'(32'hffff_ff80);
    for (int o = 0; o < tsr_pkg::ALU_COUNT; o++) begin
      if (OPS[o] && o != tsr_pkg::ALU_LUT) begin  // else reserved here (its key is off), or lut
        for (int i = 0; i < NC; i++)
          for (int j = 0; j < NC; j++) check(o, corner[i], corner[j]);
        for (int k = 0; k < NRAND; k++) begin
          logic [W-1:0] x, y;
          x = W'($urandom(seed_state));
          y = W'($urandom(seed_state));
          if (k % 2 == 0) y = W'($signed(y) >>> ($urandom(seed_state) % W));
          if (k % 3 == 0) x = W'($signed(x) >>> ($urandom(seed_state) % W));
          check(o, x, y);
        end
      end
    end
    if (OPS[9]) fscale_cases;
    if (errors == 0) $display("PASS (%0d operand pairs)", checked);
    else $display("FAIL: %0d mismatches of %0d", errors, checked);
    $finish;
  end
endmodule
