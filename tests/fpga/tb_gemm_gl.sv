// tb_gemm_gl: tsr_gemm_core (RTL) against its iCE40 gate-level netlist
// (tsr_gemm_core_gl: scripts/fpga/ice40_synth.sh with TOP tsr_gemm_core,
// simulated over yosys's iCE40 cell models), cycle by cycle on random
// operands and the corner values -128 / 127 / 0. The netlist is what the
// open flow places and what the gate-level tests of tsr_top simulate, so a
// mapping bug shows up here in seconds instead of as a wrong byte after a
// long tsr_top netlist run (yosys 0.23's ice40_dsp lost three of four
// products of 1x2x2). Prints the seed, the first divergence, then PASS or
// FAIL.
module tb_gemm_gl;
  localparam int B = tsr_pkg::BATCH, I = tsr_pkg::BLOCK_IN, O = tsr_pkg::BLOCK_OUT;
  localparam int IW = tsr_pkg::INP_WIDTH, WW = tsr_pkg::WGT_WIDTH, AW = tsr_pkg::ACC_WIDTH;
  localparam int N = 2000;
  logic clk = 1'b0;
  logic [B*I*IW-1:0] inp;
  logic [O*I*WW-1:0] wgt;
  logic [B*O*AW-1:0] dot_rtl, dot_gl;
  integer seed, n, k, bad;

  tsr_gemm_core u_rtl (.clk_i(clk), .inp_i(inp), .wgt_i(wgt), .dw_i(1'b0), .taps_i({(B*I*IW){1'b0}}), .grp_i(1'b0), .dot_o(dot_rtl));
  tsr_gemm_core_gl u_gl (.clk_i(clk), .inp_i(inp), .wgt_i(wgt), .dw_i(1'b0), .taps_i({(B*I*IW){1'b0}}), .grp_i(1'b0), .dot_o(dot_gl));

  // One operand element: random, or a corner value now and then.
  function automatic logic [31:0] pick(input integer r, input integer c);
    case (c % 8)
      0: pick = 32'h80;         // most negative int8
      1: pick = 32'h7f;         // most positive int8
      2: pick = 32'h00;
      default: pick = r;
    endcase
  endfunction

  initial begin
    if (!$value$plusargs("seed=%d", seed)) seed = 1;
    $display("tb_gemm_gl: seed %0d, %0d cycles, %0dx%0dx%0d", seed, N, B, I, O);
    bad = 0;
    for (n = 0; n < N; n++) begin
      for (k = 0; k < B * I; k++) inp[k*IW +: IW] = IW'(pick($random(seed), (n < N / 2) ? 3 : $random(seed)));
      for (k = 0; k < O * I; k++) wgt[k*WW +: WW] = WW'(pick($random(seed), (n < N / 2) ? 3 : $random(seed)));
      #1 clk = 1'b1;
      #1 clk = 1'b0;
      // both are two cycles behind their inputs; compare once the pipe is full
      if (n >= 2 && dot_rtl !== dot_gl) begin
        if (bad == 0) $display("FAIL first divergence at cycle %0d: rtl %h netlist %h", n, dot_rtl, dot_gl);
        bad++;
      end
    end
    if (bad != 0) begin
      $display("FAIL %0d of %0d cycles differ", bad, N - 2);
      $fatal(1);
    end
    $display("PASS %0d cycles equal", N - 2);
    $finish;
  end
endmodule
