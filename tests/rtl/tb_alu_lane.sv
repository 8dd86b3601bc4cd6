// tb_alu_lane: tsr_alu_lane (the shared-shifter, shared-rounding lane)
// against a behavioural reference written here from isa/semantics.md "ALU
// operations" in 64-bit integer arithmetic: every op 0..8 on corner operands
// (0, +-1, the extremes, the shift clamps +-(W-1), +-W, rqfin fields at their
// bounds) crossed with each other, then random operands (half of them with b
// narrowed so shift amounts and rqfin fields take every value). The first
// mismatches print op, operands, lane result and reference.
// Seed: SEED below (printed).
module tb_alu_lane;
  localparam int W = tsr_pkg::ACC_WIDTH;
  localparam int NRAND = 20000;
  localparam int SEED = 11;

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

  function automatic longint reference(input int o, input longint x, input longint y);
    longint s, p, n, b64, zp, lo, hi, r, t;
    s = (y > W - 1) ? W - 1 : (y < -(W - 1)) ? -(W - 1) : y;
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
    for (int o = 0; o <= 8; o++) begin
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
    if (errors == 0) $display("PASS (%0d operand pairs)", checked);
    else $display("FAIL: %0d mismatches of %0d", errors, checked);
    $finish;
  end
endmodule
