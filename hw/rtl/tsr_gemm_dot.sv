// tsr_gemm_dot: the unit tsr_gemm_core replicates: Lanes dot products of
// BlockIn signed products over one input row x[i] (one output column, or
// the two that share a multiplier with DspPack), with the core's two
// register stages (products, adder-tree sums). A module of its own so the
// array is BATCH x BLOCK_OUT / Lanes instances of one small block: the
// per-module area estimate (scripts/synth_hier.py) synthesizes it once
// instead of the whole array (an Alveo preset's 4,096 products took yosys
// hours), and the flattened full flow sees the same logic.
//
// DspPack = 1 (config key DSP_PACK, int8 x int8 only; Lanes = 2) computes the
// products of the two output columns o, o+1 that share the input value a in
// one multiplier, as in Xilinx WP486: P = a * (w1 * 2^16 + w0), a 8 x 25-bit
// product one DSP48 holds. a*w0 lies in [-16256, 16384], so it is P's low 16
// bits read as signed; P >>> 16 is a*w1 minus 1 when a*w0 < 0, i.e. when
// P[15] is set, so a*w1 = (P >>> 16) + P[15]. Both are exact: the result is
// bit-identical to DspPack = 0 with half the multipliers and no extra cycle.
// dot_o is each sum modulo 2^AccWidth; it follows inp_i/wgt_i by two cycles.
// prod_o: the registered products of the first (low) lane, a[i] * w[0][i],
// one cycle after inp_i/wgt_i: the depthwise mode of tsr_gemm_core sums
// them across units instead of along the tree (with DspPack, a*w0 is exact
// whatever w1 is, so that lane's product serves alone).
//
// Written for simulation speed at no area (the Verilated model spends most
// of a GEMM cycle here): each term's multiplier and register is a generate
// block of its own (a scalar variable to Verilator, not a field of a
// 528-bit vector), the packed product is 32 bits (exact, see PPW; a native
// word in C++, where 33 bits cost 64-bit sign extensions), and the adder
// tree's nodes sit in word-aligned slots of NS bits (an aligned word, not
// an XW-bit field straddling words; the slot bits above XW are constant 0
// and never read, so synthesis keeps the XW-bit adders it had). yosys maps
// the same cells as before (scripts/synth_hier.py: LUT, FF, DSP equal).

`include "tsr_assert.svh"

module tsr_gemm_dot #(
  parameter int BlockIn  = tsr_pkg::BLOCK_IN,
  parameter int InpWidth = tsr_pkg::INP_WIDTH,
  parameter int WgtWidth = tsr_pkg::WGT_WIDTH,
  parameter int AccWidth = tsr_pkg::ACC_WIDTH,
  parameter int DspPack  = tsr_pkg::DSP_PACK,
  parameter int Lanes    = (DspPack != 0) ? 2 : 1
) (
  input  logic                              clk_i,
  input  logic [BlockIn*InpWidth-1:0]       inp_i,  // x[i]
  input  logic [Lanes*BlockIn*WgtWidth-1:0] wgt_i,  // row [o][i] of the unit's columns
  output logic [Lanes*AccWidth-1:0]         dot_o,  // [o]
  output logic [BlockIn*(InpWidth+WgtWidth)-1:0] prod_o  // [i] of lane 0
);
  localparam int PW = InpWidth + WgtWidth;           // exact product width
  localparam int LOGN = $clog2(BlockIn);
  localparam int NP = 1 << LOGN;                     // leaves, padded to 2^k
  localparam int TW = PW + LOGN;                     // exact sum width
  localparam int XW = (TW < AccWidth) ? TW : AccWidth;  // tree width
  localparam int NODES = 2 * NP;                     // heap: node k = 2k + 2k+1
  // a node's slot: XW bits rounded up to 8, 16 or a multiple of 32
  localparam int NS = (XW <= 8) ? 8 : (XW <= 16) ? 16 : 32 * ((XW + 31) / 32);

  localparam int PKW = 25;                          // packed weight operand
  // packed product: |a| <= 2^7 and |w1 * 2^16 + w0| <= 2^23 + 2^7, so
  // |P| <= 2^30 + 2^14 and 32 bits hold it exactly (the 25 x 8 operands
  // would allow 33)
  localparam int PPW = InpWidth + WgtWidth + 16;

  logic [Lanes*BlockIn*PW-1:0] prod;                // registered products the tree sums
  logic [Lanes*AccWidth-1:0]   dot_d, dot_q;
  logic [Lanes*NODES*NS-1:0]   tree;

  if (DspPack == 0) begin : g_plain
    // Products: lane o, term i; datapath register: no reset, no enable (the
    // pipeline never stalls; the caller tracks validity).
    for (genvar o = 0; o < Lanes; o++) begin : g_lane
      for (genvar i = 0; i < BlockIn; i++) begin : g_term
        logic signed [PW-1:0] p_d, p_q;
        assign p_d = PW'($signed(inp_i[i*InpWidth +: InpWidth]))
                   * PW'($signed(wgt_i[(o*BlockIn + i)*WgtWidth +: WgtWidth]));
        always_ff @(posedge clk_i) begin
          p_q <= p_d;
        end
        assign prod[(o*BlockIn + i)*PW +: PW] = p_q;
      end
    end
  end else begin : g_pack
    // Packed products: term i holds a * (w[1] * 2^16 + w[0]); datapath
    // register: no reset, no enable; unpacked from the registered pair (see
    // the header).
    for (genvar i = 0; i < BlockIn; i++) begin : g_term
      logic signed [PKW-1:0] pw;
      logic signed [PPW-1:0] pp_d, pp_q;
      assign pw = (PKW'($signed(wgt_i[(BlockIn + i)*WgtWidth +: WgtWidth])) <<< 16)
                + PKW'($signed(wgt_i[i*WgtWidth +: WgtWidth]));
      assign pp_d = PPW'($signed(inp_i[i*InpWidth +: InpWidth])) * PPW'(pw);
      always_ff @(posedge clk_i) begin
        pp_q <= pp_d;
      end
      assign prod[i*PW +: PW] = PW'($signed(pp_q[15:0]));
      assign prod[(BlockIn + i)*PW +: PW] = PW'((pp_q >>> 16) + PPW'(pp_q[15]));
    end
  end

  // Adder tree per lane: leaves at heap nodes NP..2NP-1, root at node 1.
  // Below the accumulator width the tree is exact; above it, it keeps the
  // low AccWidth bits, which is all the wrapping accumulate needs.
  // The leaves are offset, not sign-extended: a product p enters as the
  // PW-bit word p + 2^(PW-1) (its sign bit inverted, zero-extended), so the
  // tree sums non-negative values and the root is the exact sum plus
  // BlockIn * 2^(PW-1), which is 2^(XW-1) or 0 modulo 2^XW (BlockIn = NP is
  // a power of two, XW = PW + LOGN or below): the root's top bit inverted
  // (SUM_FIX) gives the sum modulo 2^XW bit for bit. In hardware an
  // inverted bit is free and the zero-extended lower levels are narrower;
  // in a simulator it saves a sign extension per product.
  localparam logic [PW-1:0] LEAF_FIX = {1'b1, {(PW - 1){1'b0}}};
  localparam logic [XW-1:0] SUM_FIX = XW'(NP) << (PW - 1);
  always_comb begin
    for (int l = 0; l < Lanes; l++) begin
      tree[(l*NODES)*NS +: NS] = '0;  // heap node 0 is unused
      for (int i = 0; i < NP; i++) begin
        tree[(l*NODES + NP + i)*NS +: NS] = NS'({prod[(l*BlockIn + i)*PW +: PW] ^ LEAF_FIX});
      end
      for (int k = NP - 1; k >= 1; k--) begin
        tree[(l*NODES + k)*NS +: NS] = NS'(XW'(tree[(l*NODES + 2*k)*NS +: XW]
                                              + tree[(l*NODES + 2*k + 1)*NS +: XW]));
      end
      dot_d[l*AccWidth +: AccWidth] =
          AccWidth'($signed(tree[(l*NODES + 1)*NS +: XW] ^ SUM_FIX));
    end
  end

  // Datapath register: no reset, no enable.
  always_ff @(posedge clk_i) begin
    dot_q <= dot_d;
  end

  assign dot_o = dot_q;
  assign prod_o = prod[BlockIn*PW-1:0];

  // The offset leaves need every leaf a product (no padding) and SUM_FIX
  // one bit or none: BlockIn a power of two.
  `TSR_ASSERT_INIT(chk_block_pow2, BlockIn == NP)
  // The packed product is exact only for int8 x int8 in two lanes (WP486).
  `TSR_ASSERT_INIT(chk_dsp_pack, DspPack == 0 || (InpWidth == 8 && WgtWidth == 8 && Lanes == 2))
endmodule
