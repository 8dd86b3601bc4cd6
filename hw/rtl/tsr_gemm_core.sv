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
//
// Depthwise mode (Depthwise = K > 0, config key DEPTHWISE; dw_i set for a
// GEMM with field depthwise): lane [b][c] sums its own channel's K taps,
// sum_k taps_i[k][b][c] * wgt_i[k][c] (isa/semantics.md). It reuses the
// array's multipliers: unit k < K of each batch row takes input row tap k
// instead of the broadcast inp_i, and its low-lane weights are row k (with
// DspPack = 0 they are already; with DspPack = 1 unit k normally holds rows
// 2k, 2k+1, and row k replaces row 2k). A weight row holds G = 2^DwGroupBits
// tap groups of K rows (isa/semantics.md): grp_i (static while the op's
// weight row is on wgt_i) picks group q, and unit k takes row q*K + k, a
// G-way mux per unit (none when G = 1). A per-lane adder sums the units'
// registered low-lane products (tsr_gemm_dot prod_o) over k, registered in
// the stage of the adder trees, so dot_o keeps its two-cycle latency and
// dw_i (static for a whole instruction) only selects it. With Depthwise = 0
// none of this is generated: dw_i, taps_i and grp_i are unused.
`include "tsr_assert.svh"

module tsr_gemm_core #(
  parameter int Batch    = tsr_pkg::BATCH,
  parameter int BlockIn  = tsr_pkg::BLOCK_IN,
  parameter int BlockOut = tsr_pkg::BLOCK_OUT,
  parameter int InpWidth = tsr_pkg::INP_WIDTH,
  parameter int WgtWidth = tsr_pkg::WGT_WIDTH,
  parameter int AccWidth = tsr_pkg::ACC_WIDTH,
  parameter int DspPack  = tsr_pkg::DSP_PACK,
  parameter int Depthwise = tsr_pkg::DEPTHWISE,
  parameter int DwGroupBits = tsr_pkg::DW_GROUP_BITS,
  localparam int TK = (Depthwise > 0) ? Depthwise : 1,  // tap rows on taps_i
  localparam int GBW = (DwGroupBits > 0) ? DwGroupBits : 1  // grp_i bits
) (
  input  logic                                clk_i,
  input  logic [Batch*BlockIn*InpWidth-1:0]   inp_i,  // row [b][i]
  input  logic [BlockOut*BlockIn*WgtWidth-1:0] wgt_i, // row [o][i]
  input  logic                                dw_i,   // depthwise mode (static per instruction)
  input  logic [TK*Batch*BlockIn*InpWidth-1:0] taps_i, // depthwise: tap k's row [b][i] at k
  input  logic [GBW-1:0]                      grp_i,  // depthwise: tap group of the weight row
  output logic [Batch*BlockOut*AccWidth-1:0]  dot_o   // row [b][o]
);
  localparam int L = (DspPack != 0) ? 2 : 1;       // output columns per unit
  localparam int PW = InpWidth + WgtWidth;          // exact product width
  localparam int IR = BlockIn * InpWidth;           // one batch row of an input row
  localparam int WR = BlockIn * WgtWidth;           // one weight row

  logic [Batch*BlockOut*AccWidth-1:0] dot_arr;       // the units' dot products
  logic [Batch*(BlockOut/L)*BlockIn*PW-1:0] prods;   // the units' low-lane products

  for (genvar b = 0; b < Batch; b++) begin : g_row
    for (genvar g = 0; g < BlockOut / L; g++) begin : g_unit
      logic [IR-1:0]   u_inp;
      logic [L*WR-1:0] u_wgt;
      if (Depthwise != 0 && g < Depthwise) begin : g_tap
        // tap g of the depthwise mode: its own input row, weight row g low
        // (of tap group grp_i: row grp_i*K + g)
        assign u_inp = dw_i ? taps_i[(g*Batch + b)*IR +: IR] : inp_i[b*IR +: IR];
        if (DwGroupBits == 0) begin : g_one_grp
          if (L == 2) begin : g_pair
            assign u_wgt[WR +: WR] = wgt_i[(2*g + 1)*WR +: WR];
            assign u_wgt[0 +: WR] = dw_i ? wgt_i[g*WR +: WR] : wgt_i[2*g*WR +: WR];
          end else begin : g_one
            assign u_wgt = wgt_i[g*WR +: WR];
          end
        end else begin : g_grps
          logic [WR-1:0] w_tap;  // row grp_i*K + g
          always_comb begin
            w_tap = wgt_i[g*WR +: WR];
            for (int q = 1; q < (1 << DwGroupBits); q++)
              if (grp_i == GBW'(q)) w_tap = wgt_i[(q*Depthwise + g)*WR +: WR];
          end
          if (L == 2) begin : g_pair
            assign u_wgt[WR +: WR] = wgt_i[(2*g + 1)*WR +: WR];
            assign u_wgt[0 +: WR] = dw_i ? w_tap : wgt_i[2*g*WR +: WR];
          end else begin : g_one
            assign u_wgt = dw_i ? w_tap : wgt_i[g*WR +: WR];
          end
        end
      end else begin : g_bcast
        assign u_inp = inp_i[b*IR +: IR];
        assign u_wgt = wgt_i[g*L*WR +: L*WR];
      end
      tsr_gemm_dot #(
        .BlockIn (BlockIn),
        .InpWidth(InpWidth),
        .WgtWidth(WgtWidth),
        .AccWidth(AccWidth),
        .DspPack (DspPack),
        .Lanes   (L)
      ) u_dot (
        .clk_i,
        .inp_i (u_inp),
        .wgt_i (u_wgt),
        .dot_o (dot_arr[(b*BlockOut + g*L)*AccWidth +: L*AccWidth]),
        .prod_o(prods[(b*(BlockOut/L) + g)*BlockIn*PW +: BlockIn*PW])
      );
    end
  end

  if (Depthwise != 0) begin : g_dw
    // Lane [b][c]: the sum over taps k of unit k's product of term c. K
    // products of PW bits sum exactly in PW + clog2(K) bits (below the
    // accumulator width), so the adders and the register are that wide and
    // the sum is sign-extended into dot_o; registered beside the trees.
    localparam int SW0 = PW + $clog2(Depthwise);
    localparam int SW = (SW0 < AccWidth) ? SW0 : AccWidth;
    logic [Batch*BlockIn*SW-1:0] dw_d, dw_q;
    logic [SW-1:0] s;                              // loop temporary
    always_comb begin
      for (int b = 0; b < Batch; b++) begin
        for (int c = 0; c < BlockIn; c++) begin
          s = '0;
          for (int k = 0; k < Depthwise; k++)
            s = s + SW'($signed(prods[((b*(BlockOut/L) + k)*BlockIn + c)*PW +: PW]));
          dw_d[(b*BlockIn + c)*SW +: SW] = s;
        end
      end
    end
    // Datapath register: no reset, no enable (as the trees').
    always_ff @(posedge clk_i) begin
      dw_q <= dw_d;
    end
    for (genvar l = 0; l < Batch * BlockIn; l++) begin : g_lane
      assign dot_o[l*AccWidth +: AccWidth] =
          dw_i ? AccWidth'($signed(dw_q[l*SW +: SW])) : dot_arr[l*AccWidth +: AccWidth];
    end
    // Units from Depthwise on contribute no tap; their products are unused.
    if (Depthwise < BlockOut / L) begin : g_rest
      logic unused_rest;
      always_comb begin
        unused_rest = 1'b0;
        for (int b = 0; b < Batch; b++)
          for (int g = Depthwise; g < BlockOut / L; g++)
            unused_rest = unused_rest ^ (^prods[(b*(BlockOut/L) + g)*BlockIn*PW +: BlockIn*PW]);
      end
    end
    if (DwGroupBits == 0) begin : g_no_grp
      logic unused_grp;
      assign unused_grp = ^grp_i;
    end
    // each lane is one channel (BlockIn == BlockOut); the taps fit the units;
    // the groups fit the weight row
    `TSR_ASSERT_INIT(chk_dw_shape, BlockIn == BlockOut && Depthwise <= BlockOut / L &&
                     (Depthwise << DwGroupBits) <= BlockOut)
  end else begin : g_no_dw
    assign dot_o = dot_arr;
    logic unused_dw;
    assign unused_dw = ^{dw_i, taps_i, grp_i, prods};
  end

  // DSP packing pairs output columns: BlockOut must be even.
  `TSR_ASSERT_INIT(chk_pairs, BlockOut % L == 0)
endmodule
