// tb_gemm_pack: tsr_gemm_core with DspPack = 0 and 1 (two int8 products per
// multiplier) against a behavioural reference computed here: every dot
// product as the plain sum of sign-extended products modulo 2^AccWidth.
// Operands: the corners (-128, -1, 0, 1, 127 everywhere, and per-lane mixes
// where a*w0 < 0 meets a*w1 >= 0, which is what the packed correction term
// is for), then random rows. The cores follow their inputs by two cycles;
// the check compares the outputs with the reference of two cycles before.
// Seed: the $urandom seed below (printed).
module tb_gemm_pack;
  localparam int B  = tsr_pkg::BATCH;
  localparam int BI = tsr_pkg::BLOCK_IN;
  localparam int BO = tsr_pkg::BLOCK_OUT;
  localparam int IW = tsr_pkg::INP_WIDTH;
  localparam int WW = tsr_pkg::WGT_WIDTH;
  localparam int AW = tsr_pkg::ACC_WIDTH;
  localparam int NRAND = 3000;
  localparam int SEED = 7;

  logic clk = 1'b0;
  logic [B*BI*IW-1:0] inp;
  logic [BO*BI*WW-1:0] wgt;
  logic [B*BO*AW-1:0] dot0, dot1, ref_d, ref_q1, ref_q2;
  int errors = 0;
  int checked = 0;
  int seed_state;

  tsr_gemm_core #(.DspPack(0)) u_plain (.clk_i(clk), .inp_i(inp), .wgt_i(wgt), .dw_i(1'b0), .taps_i({(B*BI*IW){1'b0}}), .grp_i(1'b0), .dot_o(dot0));
  tsr_gemm_core #(.DspPack(1)) u_pack  (.clk_i(clk), .inp_i(inp), .wgt_i(wgt), .dw_i(1'b0), .taps_i({(B*BI*IW){1'b0}}), .grp_i(1'b0), .dot_o(dot1));

  // Reference dot products of the current operands.
  always_comb begin
    for (int b = 0; b < B; b++) begin
      for (int o = 0; o < BO; o++) begin
        longint s;
        s = 0;
        for (int i = 0; i < BI; i++)
          s = s + longint'($signed(inp[(b*BI + i)*IW +: IW])) * longint'($signed(wgt[(o*BI + i)*WW +: WW]));
        ref_d[(b*BO + o)*AW +: AW] = s[AW-1:0];
      end
    end
  end

  task automatic step;
    #5 clk = 1'b1;
    ref_q2 = ref_q1;
    ref_q1 = ref_d;
    #5 clk = 1'b0;
    #1;
    if (checked >= 2) begin
      if (dot0 !== ref_q2 || dot1 !== ref_q2) begin
        errors++;
        if (errors <= 5)
          $display("FAIL at operand set %0d: plain %h packed %h reference %h", checked - 2, dot0, dot1, ref_q2);
      end
    end
    checked++;
  endtask

  function automatic logic [7:0] corner(input int k);
    case (k % 5)
      0: corner = 8'h80;  // -128
      1: corner = 8'hff;  // -1
      2: corner = 8'h00;
      3: corner = 8'h01;
      default: corner = 8'h7f;
    endcase
  endfunction

  initial begin
    seed_state = SEED;
    $display("tb_gemm_pack: seed %0d, %0dx%0dx%0d, %0d random operand sets", SEED, B, BI, BO, NRAND);
    if (IW != 8 || WW != 8) begin
      $display("PASS (DspPack needs int8 operands; this config has int%0d x int%0d)", IW, WW);
      $finish;
    end
    // corners: every (a, w0, w1) combination of the five corner values
    for (int ka = 0; ka < 5; ka++)
      for (int k0 = 0; k0 < 5; k0++)
        for (int k1 = 0; k1 < 5; k1++) begin
          for (int j = 0; j < B*BI; j++) inp[j*8 +: 8] = corner(ka + j);
          for (int o = 0; o < BO; o++)
            for (int i = 0; i < BI; i++) wgt[(o*BI + i)*8 +: 8] = corner((o % 2 == 0 ? k0 : k1) + i);
          step();
        end
    for (int n = 0; n < NRAND; n++) begin
      for (int j = 0; j < B*BI; j++) inp[j*8 +: 8] = 8'($urandom(seed_state));
      for (int j = 0; j < BO*BI; j++) wgt[j*8 +: 8] = 8'($urandom(seed_state));
      step();
    end
    step();
    step();
    if (errors == 0) $display("PASS (%0d operand sets)", checked - 2);
    else $display("FAIL: %0d mismatches", errors);
    $finish;
  end
endmodule
