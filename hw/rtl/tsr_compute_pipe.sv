// tsr_compute_pipe: one execution pipeline of the compute stage, for GEMM
// (Gemm = 1: MAC array) or for ALU instructions (Gemm = 0: ALU lanes).
// tsr_compute owns two of them so that ALU post-processing of one tile runs
// while the GEMM core works on the next (hw/ARCHITECTURE.md, "compute").
//
// Pipeline, one tensor op per cycle:
//   P0  tsr_compute_loop emits (u, offsets); uop read
//   P1  indices = uop fields + offsets, range check, bank check (may hold)
//   P2  inp/wgt rows arrive; MAC products (GEMM)
//   P3  adder trees; acc reads (dst, and src for ALU)
//   P4  acc rows arrive; forward, accumulate / ALU lanes; acc write
// Only P0/P1 can hold; an op past P1 always completes. With ACC_SINGLE_COPY
// an ALU op that reads a src row holds one cycle behind the op ahead, unless
// its src row is the one the op just ahead of it (same instruction) used:
// then it takes that row from a one-row copy (sprev_q) kept current with this
// pipe's writes, reads nothing and issues at once. Requantization reads one
// constant row (bias, multiplier, shift) for every output row, so it runs at
// one op per cycle. The acc read in P3
// can miss only the write made in the same cycle by this pipe's op just
// ahead (the other pipe never touches the same rows concurrently, and an
// accumulator load runs beside a busy pipe only in a bank outside its
// footprint, tsr_compute): that write is forwarded from the wb_* registers.
//
// Depthwise mode (GEMM pipe, config key DEPTHWISE = K > 0, a GEMM with
// field depthwise): an op reads input rows src .. src+K-1 (the K taps, range
// checked as src + K - 1 < INP_DEPTH). The pipe keeps the last K-1 input
// rows it read in a window (win_q, shifted whenever read data arrives). An
// op whose src is the previous op's src + d with 1 <= d < K (same
// instruction: a slide; stride-2 layers slide by 2) finds src .. src+K-1-d
// there, holds in P1 for d-1 fill cycles reading src+K-d .. src+K-2, then
// reads src+K-1 as it passes; any other op (the first of the instruction, or
// a jump) holds for K-1 fill cycles reading src .. src+K-2, then reads
// src+K-1. Either way the window has shifted in the op's last K-1 rows by
// P2. So an op costs d cycles or K, the timing contract of isa/tsr_isa.c
// (dw_issue_cycles). In P2 the
// window and the arriving row are the taps of tsr_gemm_core's depthwise
// mode. The op's weight index names a tap group (G = 2^DW_GROUP_BITS per
// weight row): it reads row wgt >> DW_GROUP_BITS (range checked against
// WGT_DEPTH) and hands wgt mod G to the core with the row (p2_grp_q); the
// index arithmetic is DW_GROUP_BITS wider so that the loops reach every
// group. Without the key none of it is generated.
//
// Bank rule. The accumulator is split in two banks by its index MSB. When
// the other pipe runs an OLDER instruction (check_i), an op here may pass P1
// only once the older instruction's footprint is known (other_known_i) and
// only if every bank the op touches lies outside it (other_banks_i);
// otherwise it holds. Disjoint banks mean disjoint rows, so program order is
// kept for every row, and no bank port is wanted by both pipes in a cycle.
// The footprint of this pipe's own instruction (banks_o) is a bounding
// interval: after the first pass over its uops (i = j = 0, every uop seen
// once) min/max of the uop fields plus the largest loop offsets
// (iter-1)*factor bound every index the instruction can touch.
`include "tsr_assert.svh"

module tsr_compute_pipe #(
  parameter int Gemm = 1,
  // beat address bits of the activation tables (tsr_alu_lut; 1 without them)
  localparam int LAW = (tsr_pkg::ACT_LUT != 0) ? $clog2(tsr_pkg::ACT_LUT * 256 / tsr_pkg::BUS_BYTES) : 1
) (
  input  logic         clk_i,
  input  logic         rst_ni,
  // instruction (cmd_i sampled with start_i; the pipe must be idle)
  input  logic         start_i,
  input  logic [tsr_pkg::INSN_BITS-1:0] cmd_i,
  input  logic         abort_i,   // stop issuing (an error anywhere)
  output logic         busy_o,    // loop running or ops in flight
  // bank rule
  input  logic         check_i,
  input  logic         other_known_i,
  input  logic [1:0]   other_banks_i,
  output logic         known_o,
  output logic [1:0]   banks_o,
  // uop buffer read port
  output logic         uop_re_o,
  output logic [tsr_pkg::UOP_IDX_BITS-1:0] uop_raddr_o,
  input  logic [tsr_pkg::UOP_BYTES*8-1:0]  uop_rdata_i,
  // inp/wgt read ports (GEMM)
  output logic         inp_re_o,
  output logic [tsr_pkg::INP_IDX_BITS-1:0] inp_raddr_o,
  input  logic [tsr_pkg::INP_BYTES*8-1:0]  inp_rdata_i,
  output logic         wgt_re_o,
  output logic [tsr_pkg::WGT_IDX_BITS-1:0] wgt_raddr_o,
  input  logic [tsr_pkg::WGT_BYTES*8-1:0]  wgt_rdata_i,
  // accumulator ports (data one cycle after the read)
  output logic         acc_dre_o,
  output logic [tsr_pkg::ACC_IDX_BITS-1:0] acc_draddr_o,
  input  logic [tsr_pkg::ACC_BYTES*8-1:0]  acc_drdata_i,
  output logic         acc_sre_o,
  output logic [tsr_pkg::ACC_IDX_BITS-1:0] acc_sraddr_o,
  input  logic [tsr_pkg::ACC_BYTES*8-1:0]  acc_srdata_i,
  output logic         acc_we_o,
  output logic [tsr_pkg::ACC_IDX_BITS-1:0] acc_waddr_o,
  output logic [tsr_pkg::ACC_BYTES*8-1:0]  acc_wdata_o,
  // activation table writes, broadcast to every lane's copy (ALU pipe with
  // ACT_LUT > 0 only; a LOAD of lut, which runs while this pipe is idle)
  input  logic         lut_we_i,
  input  logic [LAW-1:0] lut_waddr_i,
  input  logic [tsr_pkg::BUS_BYTES*8-1:0] lut_wdata_i,
  // status
  output logic         err_o,     // index out of range (pulse)
  output logic         op_o       // a counted tensor op passed P1
);
  // Instruction field widths (the ISA field table, through tsr_pkg)
  localparam int AOW = tsr_pkg::ALU_ALU_OPCODE_W;  // ALU operation
  localparam int LANES = tsr_pkg::BATCH * tsr_pkg::BLOCK_OUT;
  localparam int AW = tsr_pkg::ACC_WIDTH;
  localparam int ROW = tsr_pkg::ACC_BYTES * 8;
  localparam int UIB = tsr_pkg::UOP_IDX_BITS;
  localparam int AIB = tsr_pkg::ACC_IDX_BITS;
  localparam int IIB = tsr_pkg::INP_IDX_BITS;
  localparam int WIB = tsr_pkg::WGT_IDX_BITS;
  // depthwise weight index: a tap group, DW_GROUP_BITS below the row (GEMM pipe)
  localparam int GB = (Gemm != 0 && tsr_pkg::DEPTHWISE != 0) ? tsr_pkg::DW_GROUP_BITS : 0;
  localparam int GBW = (GB > 0) ? GB : 1;
  localparam int MAXIB0 = (AIB > IIB) ? AIB : IIB;
  localparam int MAXIB = (MAXIB0 > WIB + GB) ? MAXIB0 : WIB + GB;
  localparam int OFFW = MAXIB + 1;  // loop offsets and indices
  localparam int ITW = tsr_pkg::GEMM_ITER_OUT_W;
  localparam int XW = ITW + OFFW + 1;  // footprint arithmetic
  localparam logic [XW-1:0] HALF = XW'(tsr_pkg::ACC_DEPTH / 2);

  // ---------------------------------------------------------------------
  // Instruction fields (held in cmd_q while busy)
  // ---------------------------------------------------------------------
  logic [tsr_pkg::INSN_BITS-1:0]    cmd_q;
  logic            op_reset, use_imm, uses_src;
  logic [AOW-1:0]  alu_opc;
  logic [AW-1:0]   imm_ext;
  logic [UIB-1:0]  uop_bgn;
  logic [UIB:0]    uop_end;
  logic [ITW-1:0]  iter_out, iter_in;
  logic [OFFW-2:0] dst_fo, dst_fi, src_fo, src_fi, wgt_fo, wgt_fi;

  assign op_reset = tsr_pkg::gemm_reset(cmd_q);
  assign uop_bgn  = tsr_pkg::gemm_uop_bgn(cmd_q);
  assign uop_end  = tsr_pkg::gemm_uop_end(cmd_q);
  assign iter_out = tsr_pkg::gemm_iter_out(cmd_q);
  assign iter_in  = tsr_pkg::gemm_iter_in(cmd_q);
  assign dst_fo = (OFFW-1)'({tsr_pkg::gemm_dst_factor_out(cmd_q)});
  assign dst_fi = (OFFW-1)'({tsr_pkg::gemm_dst_factor_in(cmd_q)});
  if (Gemm != 0) begin : g_gemm_fields
    assign src_fo = (OFFW-1)'({tsr_pkg::gemm_src_factor_out(cmd_q)});
    assign src_fi = (OFFW-1)'({tsr_pkg::gemm_src_factor_in(cmd_q)});
    assign wgt_fo = (OFFW-1)'({tsr_pkg::gemm_wgt_factor_out(cmd_q)});
    assign wgt_fi = (OFFW-1)'({tsr_pkg::gemm_wgt_factor_in(cmd_q)});
    assign alu_opc = '0;
    assign use_imm = 1'b0;
    assign imm_ext = '0;
    assign uses_src = 1'b0;  // GEMM's src is an inp row, not an acc row
  end else begin : g_alu_fields
    assign src_fo = (OFFW-1)'({tsr_pkg::alu_src_factor_out(cmd_q)});
    assign src_fi = (OFFW-1)'({tsr_pkg::alu_src_factor_in(cmd_q)});
    assign wgt_fo = '0;
    assign wgt_fi = '0;
    assign alu_opc = tsr_pkg::alu_alu_opcode(cmd_q);
    assign use_imm = tsr_pkg::alu_use_imm(cmd_q);
    assign imm_ext = AW'($signed({tsr_pkg::alu_imm(cmd_q)}));
    assign uses_src = !op_reset && !use_imm;
  end

  // ---------------------------------------------------------------------
  // P0: loop nest and uop read
  // ---------------------------------------------------------------------
  logic            start_q, loop_valid, hold, p1_err, p1_ok, err_q;
  logic [UIB-1:0]  loop_uop;
  logic [OFFW-1:0] loop_doff, loop_soff, loop_woff;

  tsr_compute_loop #(
    .UopBits (UIB),
    .IterW   (ITW),
    .OffW    (OFFW)
  ) u_loop (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .start_i    (start_q),
    .stall_i    (hold),
    .abort_i    (abort_i || p1_err),
    .uop_bgn_i  (uop_bgn),
    .uop_end_i  (uop_end),
    .iter_out_i (iter_out),
    .iter_in_i  (iter_in),
    .dst_fo_i   (dst_fo),
    .dst_fi_i   (dst_fi),
    .src_fo_i   (src_fo),
    .src_fi_i   (src_fi),
    .wgt_fo_i   (wgt_fo),
    .wgt_fi_i   (wgt_fi),
    .valid_o    (loop_valid),
    .uop_o      (loop_uop),
    .dst_off_o  (loop_doff),
    .src_off_o  (loop_soff),
    .wgt_off_o  (loop_woff)
  );

  // A held op keeps its uop in the read register: no new read.
  assign uop_re_o    = loop_valid && !hold;
  assign uop_raddr_o = loop_uop;

  // ---------------------------------------------------------------------
  // P1: indices, range check, bank check
  // ---------------------------------------------------------------------
  logic            p1_valid_q;
  logic [OFFW-1:0] p1_doff_q, p1_soff_q, p1_woff_q;
  logic [OFFW-1:0] dst_idx, src_idx, wgt_idx;
  logic            dst_bad, src_bad, wgt_bad, idx_bad;
  logic [OFFW-1:0] wgt_row;    // the weight row wgt_idx reads (depthwise: of its tap group)
  logic [GBW-1:0]  p2_grp_q;   // depthwise: its tap group within the row, beside the row's data (P2)
  logic [1:0]      op_banks;
  // ACC_SINGLE_COPY: this op's src row is the one the previous op of the
  // same instruction used (last_src_q), so it comes from sprev_q, not a read.
  logic            reuse, last_ok_q;
  logic [AIB-1:0]  last_src_q;
  // Depthwise mode (g_dw below; constants without the key): the op in P1
  // issues a fill read this cycle (and holds), the offset of this cycle's
  // inp read from src, and src_idx plus the last row the op reads.
  logic            dw_mode, dw_fill, hold_base;
  logic [IIB-1:0]  dw_roff;
  logic [OFFW:0]   src_hi;

  assign dst_idx = OFFW'(uop_rdata_i[tsr_pkg::UOP_DST_LSB +: tsr_pkg::UOP_DST_W]) + p1_doff_q;
  assign src_idx = OFFW'(uop_rdata_i[tsr_pkg::UOP_SRC_LSB +: tsr_pkg::UOP_SRC_W]) + p1_soff_q;
  assign wgt_idx = OFFW'(uop_rdata_i[tsr_pkg::UOP_WGT_LSB +: tsr_pkg::UOP_WGT_W]) + p1_woff_q;

  always_comb begin
    dst_bad = dst_idx >= OFFW'(tsr_pkg::ACC_DEPTH);
    src_bad = (Gemm != 0) ? (src_hi >= (OFFW + 1)'(tsr_pkg::INP_DEPTH)) : (src_idx >= OFFW'(tsr_pkg::ACC_DEPTH));
    wgt_bad = wgt_row >= OFFW'(tsr_pkg::WGT_DEPTH);
    // Operands a reset op or an immediate ALU op does not read are not
    // checked, as in the golden model.
    idx_bad = dst_bad || (!op_reset && ((Gemm != 0) ? (src_bad || wgt_bad) : (!use_imm && src_bad)));
    op_banks = 2'b00;
    op_banks[dst_idx[AIB-1]] = 1'b1;
    if (uses_src) op_banks[src_idx[AIB-1]] = 1'b1;
    // A bad index also waits for the older instruction: in program order
    // that one completes (and pushes) before this error happens.
    // ACC_SINGLE_COPY: a src-reading ALU op reads its src row in P3 on the
    // port its bank writes with, so it follows the op ahead by two cycles
    // (that op's P4 write and this op's P3 read fall in different cycles).
    hold_base = p1_valid_q && ((check_i && (idx_bad || !other_known_i || ((op_banks & other_banks_i) != 2'b00))) ||
                               ((tsr_pkg::ACC_SINGLE_COPY != 0) && uses_src && !reuse && p2_valid_q));
  end

  // A depthwise op filling the window holds too (dw_fill needs !hold_base:
  // kept out of the block above, which dw_fill reads).
  assign hold   = hold_base || dw_fill;
  assign p1_err = p1_valid_q && !err_q && !abort_i && idx_bad && !hold;
  assign p1_ok  = p1_valid_q && !err_q && !abort_i && !idx_bad && !hold;

  assign reuse = (tsr_pkg::ACC_SINGLE_COPY != 0) && uses_src && last_ok_q &&
                 (src_idx[AIB-1:0] == last_src_q);

  assign inp_re_o    = (Gemm != 0) && ((p1_ok && !op_reset) || dw_fill);
  assign inp_raddr_o = src_idx[IIB-1:0] + dw_roff;
  assign wgt_re_o    = (Gemm != 0) && p1_ok && !op_reset;
  assign wgt_raddr_o = wgt_row[WIB-1:0];
  assign op_o        = p1_ok && ((Gemm == 0) || !op_reset);
  assign err_o       = p1_err;

  // Micro-op bits above the wgt field are zero by definition (fields.md).
  localparam int UOP_USED = tsr_pkg::UOP_WGT_LSB + tsr_pkg::UOP_WGT_W;
  if (UOP_USED < tsr_pkg::UOP_BYTES * 8) begin : g_uop_hi
    logic unused_uop_hi;
    assign unused_uop_hi = ^uop_rdata_i[tsr_pkg::UOP_BYTES*8-1:UOP_USED];
  end

  // Depthwise tap groups: row and group of the weight index (a plain GEMM's
  // index is the row). The group goes to the core with the row's data.
  if (GB > 0) begin : g_grp
    logic dw_insn;
    assign dw_insn = tsr_pkg::gemm_depthwise(cmd_q) != 1'b0;
    assign wgt_row = dw_insn ? (wgt_idx >> GB) : wgt_idx;
    // datapath register (as p2_dst_q): read only beside p2_valid_q's data
    always_ff @(posedge clk_i) begin
      p2_grp_q <= wgt_idx[GB-1:0];
    end
  end else begin : g_no_grp
    assign wgt_row = wgt_idx;
    assign p2_grp_q = '0;
  end

  // ---------------------------------------------------------------------
  // Depthwise mode: fill reads, slide detection, the window of input rows
  // ---------------------------------------------------------------------
  localparam int DWK = (Gemm != 0) ? tsr_pkg::DEPTHWISE : 0;  // taps (0: no mode)
  localparam int TK = (DWK > 0) ? DWK : 1;                      // tap rows to the core
  localparam int IROW = tsr_pkg::INP_BYTES * 8;
  logic [TK*IROW-1:0] dw_taps;  // P2: tap k's row at k

  if (DWK != 0) begin : g_dw
    localparam int CW = (DWK > 1) ? $clog2(DWK) : 1;
    logic [CW-1:0]   cnt_q;      // fill reads the op in P1 has issued
    logic            ok_q;       // an op of this instruction passed P1 (in last_q)
    logic [OFFW-1:0] last_q;     // its src
    logic [OFFW-1:0] step;       // src - last_q (mod 2^OFFW)
    logic            slide;      // 1 <= step < K: the window holds src .. last_q+K-1
    logic [CW-1:0]   nfill;      // fill reads of this op: m - 1, m = step or K
    logic [CW-1:0]   rbase;      // its first fill reads src + K - m

    // Static per instruction (cmd_q); a reset op reads no input. src_idx and
    // last_q stay put while the op holds in P1, so step, nfill and rbase do.
    assign dw_mode = (tsr_pkg::gemm_depthwise(cmd_q) != 1'b0) && !op_reset;
    assign step    = src_idx - last_q;
    assign slide   = ok_q && (src_idx > last_q) && (step < OFFW'(DWK));
    assign nfill   = slide ? CW'(step - 1'b1) : CW'(DWK - 1);
    assign rbase   = slide ? CW'(OFFW'(DWK) - step) : '0;
    assign dw_fill = p1_valid_q && dw_mode && !err_q && !abort_i && !hold_base && !idx_bad &&
                     (cnt_q != nfill);
    // fill n reads src+K-m+n (m-1 fills: the rows after the window's); the
    // op itself reads src+K-1 (slide or not). rbase + cnt_q < K - 1.
    assign dw_roff = dw_fill ? IIB'(rbase) + IIB'(cnt_q) : dw_mode ? IIB'(DWK - 1) : '0;
    assign src_hi  = {1'b0, src_idx} + (dw_mode ? (OFFW + 1)'(DWK - 1) : '0);

    always_ff @(posedge clk_i) begin
      if (!rst_ni) begin
        cnt_q  <= '0;
        ok_q   <= 1'b0;
        last_q <= '0;
      end else begin
        // a slide only within an instruction (as last_ok_q)
        if (start_q) begin
          cnt_q <= '0;
          ok_q  <= 1'b0;
        end else if (p1_ok) begin
          cnt_q <= '0;
          ok_q  <= dw_mode;
        end else if (dw_fill) begin
          cnt_q <= cnt_q + 1'b1;
        end
        if (p1_ok) last_q <= src_idx;
      end
    end

    if (DWK > 1) begin : g_win
      // The last K-1 rows read, oldest at 0; shifted as each read's data
      // arrives (the cycle after inp_re_o).
      logic                  rd_q;
      logic [(DWK-1)*IROW-1:0] win_q;
      always_ff @(posedge clk_i) begin
        if (!rst_ni) rd_q <= 1'b0;
        else rd_q <= inp_re_o;
      end
      // Window data: read only by ops whose rows were all shifted in within
      // their instruction, so no reset needed.
      always_ff @(posedge clk_i) begin
        if (rd_q) begin
          for (int k = 0; k < DWK - 2; k++) win_q[k*IROW +: IROW] <= win_q[(k+1)*IROW +: IROW];
          win_q[(DWK-2)*IROW +: IROW] <= inp_rdata_i;
        end
      end
      assign dw_taps = {inp_rdata_i, win_q};
    end else begin : g_one_tap
      assign dw_taps = inp_rdata_i;
    end
  end else begin : g_no_dw
    assign dw_mode = 1'b0;
    assign dw_fill = 1'b0;
    assign dw_roff = '0;
    assign src_hi  = {1'b0, src_idx};
    assign dw_taps = '0;
  end

  // ---------------------------------------------------------------------
  // Footprint: min/max uop fields over the first pass, plus max offsets
  // ---------------------------------------------------------------------
  logic [UIB:0]    first_left_q, first_left_d;  // first-pass ops still to see
  logic            known_q, known_d;
  logic [OFFW-1:0] dmin_q, dmin_d, dmax_q, dmax_d, smin_q, smin_d, smax_q, smax_d;
  logic [XW-1:0]   doff_max_q, soff_max_q, dhi, shi;
  logic            empty_insn;

  assign empty_insn = !({1'b0, uop_bgn} < uop_end) || (iter_out == '0) || (iter_in == '0);

  always_comb begin
    first_left_d = first_left_q;
    known_d = known_q;
    dmin_d = dmin_q;
    dmax_d = dmax_q;
    smin_d = smin_q;
    smax_d = smax_q;
    if (start_q) begin
      first_left_d = uop_end - {1'b0, uop_bgn};
      known_d = empty_insn;
      dmin_d = '1;
      dmax_d = '0;
      smin_d = '1;
      smax_d = '0;
    end else if (p1_ok && !known_q) begin
      if (dst_idx < dmin_q) dmin_d = dst_idx;
      if (dst_idx > dmax_q) dmax_d = dst_idx;
      if (src_idx < smin_q) smin_d = src_idx;
      if (src_idx > smax_q) smax_d = src_idx;
      first_left_d = first_left_q - 1'b1;
      known_d = (first_left_q == (UIB + 1)'(1));
    end
  end

  // banks_o depends on registers only (kept apart from the update above).
  always_comb begin
    dhi = XW'(dmax_q) + doff_max_q;
    shi = XW'(smax_q) + soff_max_q;
    banks_o = 2'b00;
    if (!empty_insn) begin
      banks_o[0] = XW'(dmin_q) < HALF;
      banks_o[1] = dhi >= HALF;
      if (uses_src) begin
        banks_o[0] = banks_o[0] || (XW'(smin_q) < HALF);
        banks_o[1] = banks_o[1] || (shi >= HALF);
      end
    end
    if (!known_q) banks_o = 2'b11;
  end
  assign known_o = known_q;

  // Every op of a known footprint stays within its banks (the bank rule's
  // premise).
  `TSR_ASSERT(chk_op_in_footprint, !(known_q && p1_ok && ((op_banks & ~banks_o) != 2'b00)),
              clk_i, rst_ni)

  // ---------------------------------------------------------------------
  // P2..P4
  // ---------------------------------------------------------------------
  logic           p2_valid_q, p3_valid_q, p4_valid_q;
  logic           p2_reuse_q, p3_reuse_q, p4_reuse_q;
  logic [ROW-1:0] sprev_q, sprev_d;  // src row of the last op, as it is after that op's write
  logic [AIB-1:0] p2_dst_q, p2_src_q, p3_dst_q, p3_src_q, p4_dst_q, p4_src_q;
  logic [ROW-1:0] dot;
  logic           wb_valid_q;
  logic [AIB-1:0] wb_addr_q;
  logic [ROW-1:0] wb_data_q;
  logic [ROW-1:0] a_row, s_row, b_row, alu_row, res_row;

  if (Gemm != 0) begin : g_mac
    tsr_gemm_core #(
      .Batch    (tsr_pkg::BATCH),
      .BlockIn  (tsr_pkg::BLOCK_IN),
      .BlockOut (tsr_pkg::BLOCK_OUT),
      .InpWidth (tsr_pkg::INP_WIDTH),
      .WgtWidth (tsr_pkg::WGT_WIDTH),
      .AccWidth (AW)
    ) u_gemm (
      .clk_i (clk_i),
      .inp_i (inp_rdata_i),
      .wgt_i (wgt_rdata_i),
      .dw_i  (dw_mode),
      .taps_i(dw_taps),
      .grp_i (p2_grp_q),
      .dot_o (dot)
    );
    assign alu_row = '0;
    logic unused_alu;
    assign unused_alu = ^{acc_srdata_i, alu_opc, imm_ext, p4_src_q, b_row, s_row,
                          lut_we_i, lut_waddr_i, lut_wdata_i};
  end else begin : g_lanes
    for (genvar l = 0; l < LANES; l++) begin : g_lane
      logic [AW-1:0] lane_res;
      tsr_alu_lane #(
        .Width (AW)
      ) u_alu (
        .op_i  (alu_opc),
        .a_i   (a_row[l*AW +: AW]),
        .b_i   (b_row[l*AW +: AW]),
        .res_o (lane_res)
      );
      if (tsr_pkg::ACT_LUT != 0) begin : g_lut
        // ALU op lut: each lane reads its own copy of the tables in P4, beside
        // its tsr_alu_lane, so the op has every op's latency and rate.
        logic is_lut;
        logic [AW-1:0] lut_res;
        assign is_lut = (alu_opc == AOW'(tsr_pkg::ALU_LUT));
        tsr_alu_lut #(
          .Width (AW)
        ) u_lut (
          .clk_i   (clk_i),
          .we_i    (lut_we_i),
          .waddr_i (lut_waddr_i),
          .wdata_i (lut_wdata_i),
          .re_i    (p4_valid_q && is_lut),
          .a_i     (a_row[l*AW +: AW]),
          .b_i     (b_row[l*AW +: AW]),
          .res_o   (lut_res)
        );
        assign alu_row[l*AW +: AW] = is_lut ? lut_res : lane_res;
      end else begin : g_no_lut
        assign alu_row[l*AW +: AW] = lane_res;
      end
    end
    if (tsr_pkg::ACT_LUT == 0) begin : g_no_tables
      logic unused_lut;
      assign unused_lut = ^{lut_we_i, lut_waddr_i, lut_wdata_i};
    end
    assign dot = '0;
    logic unused_mac;
    assign unused_mac = ^{inp_rdata_i, wgt_rdata_i, wgt_idx, wgt_row, dw_mode, dw_taps, p2_grp_q};
  end

  assign acc_dre_o    = p3_valid_q;
  assign acc_draddr_o = p3_dst_q;
  assign acc_sre_o    = p3_valid_q && uses_src && !p3_reuse_q;
  assign acc_sraddr_o = p3_src_q;

  always_comb begin
    a_row = (wb_valid_q && wb_addr_q == p4_dst_q) ? wb_data_q : acc_drdata_i;
    s_row = (wb_valid_q && wb_addr_q == p4_src_q) ? wb_data_q : p4_reuse_q ? sprev_q : acc_srdata_i;
    b_row = use_imm ? {LANES{imm_ext}} : s_row;
    for (int l = 0; l < LANES; l++) begin
      if (op_reset) begin
        res_row[l*AW +: AW] = '0;
      end else if (Gemm != 0) begin
        res_row[l*AW +: AW] = a_row[l*AW +: AW] + dot[l*AW +: AW];
      end else begin
        res_row[l*AW +: AW] = alu_row[l*AW +: AW];
      end
    end
    acc_we_o    = p4_valid_q;
    acc_waddr_o = p4_dst_q;
    acc_wdata_o = res_row;
    busy_o = start_q || loop_valid || p1_valid_q || p2_valid_q || p3_valid_q || p4_valid_q;
  end

  // The row an op read as src, as it is after that op's write (dst == src).
  always_comb begin
    sprev_d = sprev_q;
    if ((tsr_pkg::ACC_SINGLE_COPY != 0) && p4_valid_q && uses_src)
      sprev_d = (p4_dst_q == p4_src_q) ? res_row : s_row;
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      cmd_q        <= '0;
      start_q      <= 1'b0;
      err_q        <= 1'b0;
      p1_valid_q   <= 1'b0;
      p1_doff_q    <= '0;
      p1_soff_q    <= '0;
      p1_woff_q    <= '0;
      p2_valid_q   <= 1'b0;
      p2_dst_q     <= '0;
      p2_src_q     <= '0;
      p2_reuse_q   <= 1'b0;
      p3_reuse_q   <= 1'b0;
      p4_reuse_q   <= 1'b0;
      last_ok_q    <= 1'b0;
      last_src_q   <= '0;
      p3_valid_q   <= 1'b0;
      p3_dst_q     <= '0;
      p3_src_q     <= '0;
      p4_valid_q   <= 1'b0;
      p4_dst_q     <= '0;
      p4_src_q     <= '0;
      wb_valid_q   <= 1'b0;
      wb_addr_q    <= '0;
      first_left_q <= '0;
      known_q      <= 1'b0;
      dmin_q       <= '0;
      dmax_q       <= '0;
      smin_q       <= '0;
      smax_q       <= '0;
      doff_max_q   <= '0;
      soff_max_q   <= '0;
    end else begin
      cmd_q        <= start_i ? cmd_i : cmd_q;
      start_q      <= start_i;
      err_q        <= err_q || p1_err;
      if (!hold) begin
        p1_valid_q <= loop_valid && !err_q && !p1_err && !abort_i;
        p1_doff_q  <= loop_doff;
        p1_soff_q  <= loop_soff;
        p1_woff_q  <= loop_woff;
      end
      p2_valid_q   <= p1_ok;
      p2_dst_q     <= dst_idx[AIB-1:0];
      p2_src_q     <= src_idx[AIB-1:0];
      p2_reuse_q   <= reuse;
      p3_reuse_q   <= p2_reuse_q;
      p4_reuse_q   <= p3_reuse_q;
      // reuse only within an instruction: between two, the other pipe or a
      // load may have written any row
      if (start_q) last_ok_q <= 1'b0;
      else if (p1_ok) last_ok_q <= 1'b1;
      if (p1_ok) last_src_q <= src_idx[AIB-1:0];
      p3_valid_q   <= p2_valid_q;
      p3_dst_q     <= p2_dst_q;
      p3_src_q     <= p2_src_q;
      p4_valid_q   <= p3_valid_q;
      p4_dst_q     <= p3_dst_q;
      p4_src_q     <= p3_src_q;
      wb_valid_q   <= acc_we_o;
      wb_addr_q    <= acc_waddr_o;
      first_left_q <= first_left_d;
      known_q      <= known_d;
      dmin_q       <= dmin_d;
      dmax_q       <= dmax_d;
      smin_q       <= smin_d;
      smax_q       <= smax_d;
      // Largest loop offsets; cmd_q is stable from the cycle after start,
      // and the footprint is used only after the first pass.
      doff_max_q   <= (iter_out == '0 || iter_in == '0) ? '0 :
                      (XW'(iter_out) - XW'(1)) * XW'(dst_fo) + (XW'(iter_in) - XW'(1)) * XW'(dst_fi);
      soff_max_q   <= (iter_out == '0 || iter_in == '0) ? '0 :
                      (XW'(iter_out) - XW'(1)) * XW'(src_fo) + (XW'(iter_in) - XW'(1)) * XW'(src_fi);
    end
  end

  // Forwarded row data: qualified by wb_valid_q, so no reset needed.
  always_ff @(posedge clk_i) begin
    wb_data_q <= acc_wdata_o;
  end

  // sprev_q is read only by ops that reuse it (p4_reuse_q), and those follow
  // an op of their instruction that set it: no reset needed.
  always_ff @(posedge clk_i) begin
    sprev_q <= sprev_d;
  end
endmodule
