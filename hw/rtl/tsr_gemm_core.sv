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
// DspPack = 1 (config key DSP_PACK, int8 x int8 only) computes the products
// of two output columns o, o+1 that share the input value a in one
// multiplier, as in Xilinx WP486: P = a * (w1 * 2^16 + w0), a 8 x 25-bit
// product one DSP48 holds. a*w0 lies in [-16256, 16384], so it is P's low 16
// bits read as signed; P >>> 16 is a*w1 minus 1 when a*w0 < 0, i.e. when
// P[15] is set, so a*w1 = (P >>> 16) + P[15]. Both are exact: the result is
// bit-identical to DspPack = 0 with half the multipliers and no extra cycle.
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
  localparam int LANES = Batch * BlockOut;
  localparam int PW = InpWidth + WgtWidth;           // exact product width
  localparam int LOGN = $clog2(BlockIn);
  localparam int NP = 1 << LOGN;                     // leaves, padded to 2^k
  localparam int TW = PW + LOGN;                     // exact sum width
  localparam int XW = (TW < AccWidth) ? TW : AccWidth;  // tree width
  localparam int NODES = 2 * NP;                     // heap: node k = 2k + 2k+1

  localparam int PKW = 25;                          // packed weight operand
  localparam int PPW = PKW + InpWidth;              // packed product
  localparam int PAIRS = Batch * (BlockOut / 2) * BlockIn;

  logic [LANES*BlockIn*PW-1:0] prod;                // registered products the tree sums
  logic [LANES*AccWidth-1:0]   dot_d, dot_q;
  logic [LANES*NODES*XW-1:0]   tree;
  logic signed [PW-1:0]        leaf;                // loop temporary

  if (DspPack == 0) begin : g_plain
    logic [LANES*BlockIn*PW-1:0] prod_d, prod_q;
    logic signed [PW-1:0]        mx, mw;            // loop temporaries
    // Products: lane l = b*BlockOut + o, term i.
    always_comb begin
      for (int b = 0; b < Batch; b++) begin
        for (int o = 0; o < BlockOut; o++) begin
          for (int i = 0; i < BlockIn; i++) begin
            mx = PW'($signed(inp_i[(b*BlockIn + i)*InpWidth +: InpWidth]));
            mw = PW'($signed(wgt_i[(o*BlockIn + i)*WgtWidth +: WgtWidth]));
            prod_d[((b*BlockOut + o)*BlockIn + i)*PW +: PW] = mx * mw;
          end
        end
      end
    end
    // Datapath register: no reset, no enable (see the header).
    always_ff @(posedge clk_i) begin
      prod_q <= prod_d;
    end
    assign prod = prod_q;
  end else begin : g_pack
    logic [PAIRS*PPW-1:0]  pp_d, pp_q;
    logic signed [PKW-1:0] pw;                      // loop temporaries
    logic signed [PPW-1:0] pa, pp;
    // Packed products: pair k = (b*BlockOut/2 + o/2)*BlockIn + i holds
    // a * (w[o+1] * 2^16 + w[o]) for even o.
    always_comb begin
      for (int b = 0; b < Batch; b++) begin
        for (int o = 0; o < BlockOut; o += 2) begin
          for (int i = 0; i < BlockIn; i++) begin
            pa = PPW'($signed(inp_i[(b*BlockIn + i)*InpWidth +: InpWidth]));
            pw = (PKW'($signed(wgt_i[((o + 1)*BlockIn + i)*WgtWidth +: WgtWidth])) <<< 16)
               + PKW'($signed(wgt_i[(o*BlockIn + i)*WgtWidth +: WgtWidth]));
            pp_d[((b*(BlockOut/2) + o/2)*BlockIn + i)*PPW +: PPW] = pa * PPW'(pw);
          end
        end
      end
    end
    // Datapath register: no reset, no enable (see the header).
    always_ff @(posedge clk_i) begin
      pp_q <= pp_d;
    end
    // Unpacked from the registered pairs (see the header).
    always_comb begin
      for (int b = 0; b < Batch; b++) begin
        for (int o = 0; o < BlockOut; o += 2) begin
          for (int i = 0; i < BlockIn; i++) begin
            pp = $signed(pp_q[((b*(BlockOut/2) + o/2)*BlockIn + i)*PPW +: PPW]);
            prod[((b*BlockOut + o)*BlockIn + i)*PW +: PW] = PW'($signed(pp[15:0]));
            prod[((b*BlockOut + o + 1)*BlockIn + i)*PW +: PW] =
                PW'((pp >>> 16) + PPW'(pp[15]));
          end
        end
      end
    end
  end

  // Adder tree per lane: leaves at heap nodes NP..2NP-1, root at node 1.
  // Below the accumulator width the tree is exact; above it, it keeps the
  // low AccWidth bits, which is all the wrapping accumulate needs.
  always_comb begin
    for (int l = 0; l < LANES; l++) begin
      tree[(l*NODES)*XW +: XW] = '0;  // heap node 0 is unused
      for (int i = 0; i < NP; i++) begin
        leaf = '0;
        if (i < BlockIn) leaf = $signed(prod[(l*BlockIn + i)*PW +: PW]);
        tree[(l*NODES + NP + i)*XW +: XW] = XW'(leaf);
      end
      for (int k = NP - 1; k >= 1; k--) begin
        tree[(l*NODES + k)*XW +: XW] = tree[(l*NODES + 2*k)*XW +: XW]
                                     + tree[(l*NODES + 2*k + 1)*XW +: XW];
      end
      dot_d[l*AccWidth +: AccWidth] =
          AccWidth'($signed(tree[(l*NODES + 1)*XW +: XW]));
    end
  end

  // Datapath register: no reset, no enable (see the header).
  always_ff @(posedge clk_i) begin
    dot_q <= dot_d;
  end

  assign dot_o = dot_q;
endmodule
