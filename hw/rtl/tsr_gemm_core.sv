// tsr_gemm_core: the MAC array of one GEMM tensor op without the final
// accumulate: BATCH x BLOCK_OUT dot products of BLOCK_IN signed products
// (isa/semantics.md GEMM). Two register stages: the products (so a
// synthesizer can pack each multiplier with its output register into a DSP)
// and the adder-tree sums. The accumulator add closes a one-cycle loop in
// tsr_compute, where forwarding lives, so it is not done here.
// dot_o is the sum modulo 2^AccWidth (the accumulate wraps to that anyway);
// it follows inp_i/wgt_i by two cycles. The pipeline never stalls, so the
// datapath registers need neither enable nor reset (the caller tracks
// validity).
//
// The array is BATCH x BLOCK_OUT / L units tsr_gemm_dot (L = 2 output columns
// per unit with DspPack = 1, two int8 products per multiplier; else 1).
`include "tsr_assert.svh"

module tsr_gemm_core #(
  parameter int Batch    = tsr_pkg::BATCH,
  parameter int BlockIn  = tsr_pkg::BLOCK_IN,
  parameter int BlockOut = tsr_pkg::BLOCK_OUT,
  parameter int InpWidth = tsr_pkg::INP_WIDTH,
  parameter int WgtWidth = tsr_pkg::WGT_WIDTH,
  parameter int AccWidth = tsr_pkg::ACC_WIDTH,
  parameter int DspPack  = tsr_pkg::DSP_PACK
) (
  input  logic                                clk_i,
  input  logic [Batch*BlockIn*InpWidth-1:0]   inp_i,  // row [b][i]
  input  logic [BlockOut*BlockIn*WgtWidth-1:0] wgt_i, // row [o][i]
  output logic [Batch*BlockOut*AccWidth-1:0]  dot_o   // row [b][o]
);
  localparam int L = (DspPack != 0) ? 2 : 1;       // output columns per unit

  for (genvar b = 0; b < Batch; b++) begin : g_row
    for (genvar g = 0; g < BlockOut / L; g++) begin : g_unit
      tsr_gemm_dot #(
        .BlockIn (BlockIn),
        .InpWidth(InpWidth),
        .WgtWidth(WgtWidth),
        .AccWidth(AccWidth),
        .DspPack (DspPack),
        .Lanes   (L)
      ) u_dot (
        .clk_i,
        .inp_i(inp_i[b*BlockIn*InpWidth +: BlockIn*InpWidth]),
        .wgt_i(wgt_i[g*L*BlockIn*WgtWidth +: L*BlockIn*WgtWidth]),
        .dot_o(dot_o[(b*BlockOut + g*L)*AccWidth +: L*AccWidth])
      );
    end
  end

  // DSP packing pairs output columns: BlockOut must be even.
  `TSR_ASSERT_INIT(chk_pairs, BlockOut % L == 0)
endmodule
