// tsr_compute: the compute stage (isa/semantics.md; hw/ARCHITECTURE.md).
// Runs LOAD uop/acc/acc8, GEMM, ALU and FINISH in order, one instruction at
// a time: take command, wait for and pop tokens, execute, push tokens.
// Owns the uop buffer and the accumulator buffer (two tsr_sram copies
// written together, so the ALU reads dst and src rows in the same cycle).
//
// GEMM/ALU pipeline, one tensor op per cycle, never stalls:
//   P0  tsr_compute_loop emits (u, offsets); uop buffer read
//   P1  indices = uop fields + offsets, range check; inp/wgt reads
//   P2  inp/wgt rows arrive; MAC products (tsr_gemm_core)
//   P3  adder trees; acc reads (dst, and src for ALU)
//   P4  acc rows arrive; forward, accumulate / ALU lanes; acc + out write
// The acc rows are read in P3, one cycle before P4 writes, so the only write
// a read can miss is the one made in the same cycle (the op just ahead, or
// a load): that write is kept in the wb_* registers and substituted for
// the SRAM data when its row matches (dst and src independently). Ops on
// one row back to back (a K reduction) thus run at one op per cycle.
// An index out of range kills the op in P1 (no buffer is touched with
// it), raises err_o (sticky) and stops the stage until reset.
module tsr_compute (
  input  logic         clk_i,
  input  logic         rst_ni,
  // command
  input  logic         cmd_valid_i,
  output logic         cmd_ready_o,
  input  logic [127:0] cmd_i,
  // tokens
  input  logic         pop_prev_valid_i,
  output logic         pop_prev_o,
  input  logic         pop_next_valid_i,
  output logic         pop_next_o,
  input  logic         push_prev_ready_i,
  output logic         push_prev_o,
  input  logic         push_next_ready_i,
  output logic         push_next_o,
  // DMA read port (uop/acc/acc8 loads)
  output logic         rd_req_valid_o,
  input  logic         rd_req_ready_i,
  output logic [31:0]  rd_req_addr_o,
  output logic [31:0]  rd_req_beats_o,
  input  logic         rd_data_valid_i,
  output logic         rd_data_ready_o,
  input  logic [tsr_pkg::DRAM_BUS_WIDTH-1:0] rd_data_i,
  // SRAM ports
  output logic         inp_re_o,
  output logic [tsr_pkg::INP_IDX_BITS-1:0] inp_raddr_o,
  input  logic [tsr_pkg::INP_BYTES*8-1:0]  inp_rdata_i,
  output logic         wgt_re_o,
  output logic [tsr_pkg::WGT_IDX_BITS-1:0] wgt_raddr_o,
  input  logic [tsr_pkg::WGT_BYTES*8-1:0]  wgt_rdata_i,
  output logic         out_we_o,
  output logic [tsr_pkg::ACC_IDX_BITS-1:0] out_waddr_o,
  output logic [tsr_pkg::OUT_BYTES*8-1:0]  out_wdata_o,
  // status
  output logic         busy_o,
  output logic         stall_tok_o,
  output logic         stall_mem_o,
  output logic [31:0]  insn_count_o,
  output logic         finish_o,
  output logic         gemm_op_o,
  output logic         alu_op_o,
  output logic         err_o
);
  localparam int LANES = tsr_pkg::BATCH * tsr_pkg::BLOCK_OUT;
  localparam int AW = tsr_pkg::ACC_WIDTH;
  localparam int OW = tsr_pkg::OUT_WIDTH;
  localparam int ROW = tsr_pkg::ACC_BYTES * 8;
  localparam int UIB = tsr_pkg::UOP_IDX_BITS;
  localparam int AIB = tsr_pkg::ACC_IDX_BITS;
  localparam int IIB = tsr_pkg::INP_IDX_BITS;
  localparam int WIB = tsr_pkg::WGT_IDX_BITS;
  localparam int MAXIB0 = (AIB > IIB) ? AIB : IIB;
  localparam int MAXIB = (MAXIB0 > WIB) ? MAXIB0 : WIB;
  localparam int OFFW = MAXIB + 1;  // loop offsets and indices
  localparam int LDW = (UIB > AIB) ? UIB : AIB;  // load row address
  localparam int ITW = tsr_pkg::GEMM_ITER_OUT_W;

  // ---------------------------------------------------------------------
  // Command fields (all formats share the opcode and flag bits)
  // ---------------------------------------------------------------------
  logic [127:0] cmd_q, cmd_d;
  logic [2:0]   opcode;
  logic         f_pop_prev, f_pop_next, f_push_prev, f_push_next;
  logic         is_gemm, is_alu, op_reset, use_imm;
  logic [2:0]   alu_opc;
  logic [AW-1:0] imm_ext;
  logic [UIB-1:0] uop_bgn;
  logic [UIB:0]   uop_end;
  logic [ITW-1:0] iter_out, iter_in;
  logic [OFFW-2:0] dst_fo, dst_fi, src_fo, src_fi, wgt_fo, wgt_fi;
  logic [2:0]   mem_type;
  logic [tsr_pkg::SRAM_BASE_BITS-1:0] sram_base;
  logic [15:0]  x_size;
  logic [34:0]  ld_end;       // sram_base + rows*row
  logic [33:0]  ld_size_q, ld_size_d;  // rows*row of the accepted command
  logic [16:0]  in_rows, in_row;        // of cmd_i

  // Continuous assignments (Icarus handles constant part-selects of a
  // vector read in always_comb only coarsely).
  assign opcode      = cmd_q[tsr_pkg::GEMM_OPCODE_LSB +: 3];
  assign f_pop_prev  = cmd_q[tsr_pkg::GEMM_POP_PREV_LSB];
  assign f_pop_next  = cmd_q[tsr_pkg::GEMM_POP_NEXT_LSB];
  assign f_push_prev = cmd_q[tsr_pkg::GEMM_PUSH_PREV_LSB];
  assign f_push_next = cmd_q[tsr_pkg::GEMM_PUSH_NEXT_LSB];
  assign is_gemm     = (opcode == 3'(tsr_pkg::OP_GEMM));
  assign is_alu      = (opcode == 3'(tsr_pkg::OP_ALU));
  assign op_reset    = cmd_q[tsr_pkg::GEMM_RESET_LSB];
  assign uop_bgn     = cmd_q[tsr_pkg::GEMM_UOP_BGN_LSB +: UIB];
  assign uop_end     = cmd_q[tsr_pkg::GEMM_UOP_END_LSB +: UIB + 1];
  assign iter_out    = cmd_q[tsr_pkg::GEMM_ITER_OUT_LSB +: ITW];
  assign iter_in     = cmd_q[tsr_pkg::GEMM_ITER_IN_LSB +: ITW];
  assign dst_fo = (OFFW-1)'(cmd_q[tsr_pkg::GEMM_DST_FACTOR_OUT_LSB +: tsr_pkg::GEMM_DST_FACTOR_OUT_W]);
  assign dst_fi = (OFFW-1)'(cmd_q[tsr_pkg::GEMM_DST_FACTOR_IN_LSB +: tsr_pkg::GEMM_DST_FACTOR_IN_W]);
  // The src factors of GEMM (inp rows) and ALU (acc rows) may differ in
  // width; ALU has no wgt factors (those bits hold alu_opcode/imm).
  assign src_fo = is_gemm
      ? (OFFW-1)'(cmd_q[tsr_pkg::GEMM_SRC_FACTOR_OUT_LSB +: tsr_pkg::GEMM_SRC_FACTOR_OUT_W])
      : (OFFW-1)'(cmd_q[tsr_pkg::ALU_SRC_FACTOR_OUT_LSB +: tsr_pkg::ALU_SRC_FACTOR_OUT_W]);
  assign src_fi = is_gemm
      ? (OFFW-1)'(cmd_q[tsr_pkg::GEMM_SRC_FACTOR_IN_LSB +: tsr_pkg::GEMM_SRC_FACTOR_IN_W])
      : (OFFW-1)'(cmd_q[tsr_pkg::ALU_SRC_FACTOR_IN_LSB +: tsr_pkg::ALU_SRC_FACTOR_IN_W]);
  assign wgt_fo = is_gemm
      ? (OFFW-1)'(cmd_q[tsr_pkg::GEMM_WGT_FACTOR_OUT_LSB +: tsr_pkg::GEMM_WGT_FACTOR_OUT_W]) : '0;
  assign wgt_fi = is_gemm
      ? (OFFW-1)'(cmd_q[tsr_pkg::GEMM_WGT_FACTOR_IN_LSB +: tsr_pkg::GEMM_WGT_FACTOR_IN_W]) : '0;
  assign alu_opc = cmd_q[tsr_pkg::ALU_ALU_OPCODE_LSB +: 3];
  assign use_imm = cmd_q[tsr_pkg::ALU_USE_IMM_LSB];
  assign imm_ext = AW'($signed(cmd_q[tsr_pkg::ALU_IMM_LSB +: 16]));

  assign mem_type  = cmd_q[tsr_pkg::MEM_MEM_TYPE_LSB +: 3];
  assign sram_base = cmd_q[tsr_pkg::MEM_SRAM_BASE_LSB +: tsr_pkg::SRAM_BASE_BITS];
  assign x_size    = cmd_q[tsr_pkg::MEM_X_SIZE_LSB +: 16];
  assign ld_end    = 35'(sram_base) + 35'(ld_size_q);

  // rows*row of the incoming command, registered with it so the bounds
  // check does not put a multiplier behind the command register.
  assign in_rows = 17'(cmd_i[tsr_pkg::MEM_Y_PAD0_LSB +: 4]) + 17'(cmd_i[tsr_pkg::MEM_Y_SIZE_LSB +: 16])
                 + 17'(cmd_i[tsr_pkg::MEM_Y_PAD1_LSB +: 4]);
  assign in_row  = 17'(cmd_i[tsr_pkg::MEM_X_PAD0_LSB +: 4]) + 17'(cmd_i[tsr_pkg::MEM_X_SIZE_LSB +: 16])
                 + 17'(cmd_i[tsr_pkg::MEM_X_PAD1_LSB +: 4]);
  assign ld_size_d = 34'(in_rows) * 34'(in_row);

  // ---------------------------------------------------------------------
  // Instruction sequencer
  // ---------------------------------------------------------------------
  typedef enum logic [2:0] {
    S_IDLE, S_POP, S_EXEC, S_PUSH, S_ERR
  } state_e;
  state_e state_q, state_d;
  logic [31:0] count_q, count_d;
  logic        err_q, err_d;
  logic        pop_ok, push_ok, loop_start, ld_start, cmd_err;
  logic        loop_valid, ld_busy, ld_stall, pipe_busy;
  logic        p1_err;

  always_comb begin
    pop_ok  = (!f_pop_prev || pop_prev_valid_i) && (!f_pop_next || pop_next_valid_i);
    push_ok = (!f_push_prev || push_prev_ready_i) && (!f_push_next || push_next_ready_i);

    // Errors found when the instruction starts (after its pops, as in the
    // golden model): uop range, load bounds, anything not for this stage.
    cmd_err = 1'b0;
    if (is_gemm || is_alu) begin
      cmd_err = ({1'b0, uop_bgn} > uop_end) || (uop_end > (UIB + 1)'(tsr_pkg::UOP_DEPTH));
    end else if (opcode == 3'(tsr_pkg::OP_LOAD)) begin
      if (x_size != '0) begin
        if (mem_type == 3'(tsr_pkg::MEM_UOP)) begin
          cmd_err = ld_end > 35'(tsr_pkg::UOP_DEPTH);
        end else if (mem_type == 3'(tsr_pkg::MEM_ACC) || mem_type == 3'(tsr_pkg::MEM_ACC8)) begin
          cmd_err = ld_end > 35'(tsr_pkg::ACC_DEPTH);
        end else begin
          cmd_err = 1'b1;
        end
      end
    end else if (opcode != 3'(tsr_pkg::OP_FINISH)) begin
      cmd_err = 1'b1;
    end

    state_d     = state_q;
    cmd_d       = cmd_q;
    count_d     = count_q;
    err_d       = err_q || p1_err;
    cmd_ready_o = 1'b0;
    pop_prev_o  = 1'b0;
    pop_next_o  = 1'b0;
    push_prev_o = 1'b0;
    push_next_o = 1'b0;
    finish_o    = 1'b0;
    loop_start  = 1'b0;
    ld_start    = 1'b0;

    case (state_q)
      S_IDLE: begin
        cmd_ready_o = 1'b1;
        if (cmd_valid_i) begin
          cmd_d   = cmd_i;
          state_d = S_POP;
        end
      end
      S_POP: begin
        if (pop_ok) begin
          pop_prev_o = f_pop_prev;
          pop_next_o = f_pop_next;
          if (cmd_err) begin
            err_d   = 1'b1;
            state_d = S_ERR;
          end else if (is_gemm || is_alu) begin
            loop_start = 1'b1;
            state_d    = S_EXEC;
          end else if (opcode == 3'(tsr_pkg::OP_LOAD)) begin
            ld_start = (x_size != '0);
            if (x_size != '0) state_d = S_EXEC;
            else state_d = S_PUSH;
          end else begin
            finish_o = 1'b1;
            state_d  = S_PUSH;
          end
        end
      end
      S_EXEC: begin
        if (err_q) begin
          state_d = S_ERR;  // in-flight ops still drain through the pipeline
        end else if (!loop_valid && !pipe_busy && !ld_busy) begin
          state_d = S_PUSH;
        end
      end
      S_PUSH: begin
        if (push_ok) begin
          push_prev_o = f_push_prev;
          push_next_o = f_push_next;
          count_d     = count_q + 32'd1;
          state_d     = S_IDLE;
        end
      end
      default: ;  // S_ERR: held until reset
    endcase
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q   <= S_IDLE;
      cmd_q     <= '0;
      count_q   <= '0;
      err_q     <= 1'b0;
      ld_size_q <= '0;
    end else begin
      state_q   <= state_d;
      cmd_q     <= cmd_d;
      count_q   <= count_d;
      err_q     <= err_d;
      ld_size_q <= cmd_ready_o ? ld_size_d : ld_size_q;
    end
  end

  // ---------------------------------------------------------------------
  // P0: loop nest and uop buffer read
  // ---------------------------------------------------------------------
  logic [UIB-1:0]  loop_uop;
  logic [OFFW-1:0] loop_doff, loop_soff, loop_woff;
  logic [tsr_pkg::UOP_BYTES*8-1:0] uop_rdata, ld_uop_wdata;
  logic            ld_uop_we, ld_acc_we;
  logic [LDW-1:0]  ld_waddr;
  logic [ROW-1:0]  ld_acc_wdata;

  tsr_compute_loop #(
    .UopBits (UIB),
    .IterW   (ITW),
    .OffW    (OFFW)
  ) u_loop (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .start_i    (loop_start),
    .abort_i    (err_q || p1_err),
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

  tsr_sram #(
    .Width (tsr_pkg::UOP_BYTES * 8),
    .Depth (tsr_pkg::UOP_DEPTH)
  ) u_uop_buf (
    .clk_i   (clk_i),
    .we_i    (ld_uop_we),
    .waddr_i (ld_waddr[UIB-1:0]),
    .wdata_i (ld_uop_wdata),
    .re_i    (loop_valid),
    .raddr_i (loop_uop),
    .rdata_o (uop_rdata)
  );

  // ---------------------------------------------------------------------
  // P1: index formation and range check; inp/wgt reads
  // ---------------------------------------------------------------------
  logic            p1_valid_q;
  logic [OFFW-1:0] p1_doff_q, p1_soff_q, p1_woff_q;
  logic [OFFW-1:0] dst_idx, src_idx, wgt_idx;
  logic            dst_bad, src_bad, wgt_bad, p1_ok;

  // Field + offset cannot overflow OFFW bits (fields < 2^MAXIB,
  // offsets <= 2^MAXIB).
  assign dst_idx = OFFW'(uop_rdata[tsr_pkg::UOP_DST_LSB +: tsr_pkg::UOP_DST_W]) + p1_doff_q;
  assign src_idx = OFFW'(uop_rdata[tsr_pkg::UOP_SRC_LSB +: tsr_pkg::UOP_SRC_W]) + p1_soff_q;
  assign wgt_idx = OFFW'(uop_rdata[tsr_pkg::UOP_WGT_LSB +: tsr_pkg::UOP_WGT_W]) + p1_woff_q;

  always_comb begin
    dst_bad = dst_idx >= OFFW'(tsr_pkg::ACC_DEPTH);
    src_bad = src_idx >= (is_gemm ? OFFW'(tsr_pkg::INP_DEPTH) : OFFW'(tsr_pkg::ACC_DEPTH));
    wgt_bad = wgt_idx >= OFFW'(tsr_pkg::WGT_DEPTH);
    // Operands a reset op or an immediate ALU op does not read are not
    // checked, as in the golden model.
    p1_err = p1_valid_q && !err_q &&
             (dst_bad || (!op_reset && (is_gemm ? (src_bad || wgt_bad) : (!use_imm && src_bad))));
    p1_ok = p1_valid_q && !err_q && !p1_err;

    inp_re_o    = p1_ok && is_gemm && !op_reset;
    inp_raddr_o = src_idx[IIB-1:0];
    wgt_re_o    = p1_ok && is_gemm && !op_reset;
    wgt_raddr_o = wgt_idx[WIB-1:0];
    gemm_op_o   = p1_ok && is_gemm && !op_reset;
    alu_op_o    = p1_ok && is_alu;
  end

  // Micro-op bits above the wgt field are zero by definition (fields.md).
  localparam int UOP_USED = tsr_pkg::UOP_WGT_LSB + tsr_pkg::UOP_WGT_W;
  if (UOP_USED < tsr_pkg::UOP_BYTES * 8) begin : g_uop_hi
    logic unused_uop_hi;
    assign unused_uop_hi = ^uop_rdata[tsr_pkg::UOP_BYTES*8-1:UOP_USED];
  end

  // ---------------------------------------------------------------------
  // P2, P3: MAC array (tsr_gemm_core); acc reads in P3
  // ---------------------------------------------------------------------
  logic           p2_valid_q, p3_valid_q, p4_valid_q;
  logic [AIB-1:0] p2_dst_q, p2_src_q, p3_dst_q, p3_src_q, p4_dst_q, p4_src_q;
  logic [ROW-1:0] dot;

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
    .dot_o (dot)
  );

  logic           acc_we;
  logic [AIB-1:0] acc_waddr;
  logic [ROW-1:0] acc_wdata, acc_dst_rdata, acc_src_rdata;

  tsr_sram #(
    .Width (ROW),
    .Depth (tsr_pkg::ACC_DEPTH)
  ) u_acc_dst (
    .clk_i   (clk_i),
    .we_i    (acc_we),
    .waddr_i (acc_waddr),
    .wdata_i (acc_wdata),
    .re_i    (p3_valid_q),
    .raddr_i (p3_dst_q),
    .rdata_o (acc_dst_rdata)
  );

  tsr_sram #(
    .Width (ROW),
    .Depth (tsr_pkg::ACC_DEPTH)
  ) u_acc_src (
    .clk_i   (clk_i),
    .we_i    (acc_we),
    .waddr_i (acc_waddr),
    .wdata_i (acc_wdata),
    .re_i    (p3_valid_q && is_alu && !use_imm),
    .raddr_i (p3_src_q),
    .rdata_o (acc_src_rdata)
  );

  // ---------------------------------------------------------------------
  // P4: forwarding, accumulate / ALU, acc + out write
  // ---------------------------------------------------------------------
  logic           wb_valid_q;
  logic [AIB-1:0] wb_addr_q;
  logic [ROW-1:0] wb_data_q;
  logic [ROW-1:0] a_row, s_row, b_row, alu_row, res_row;

  always_comb begin
    a_row = (wb_valid_q && wb_addr_q == p4_dst_q) ? wb_data_q : acc_dst_rdata;
    s_row = (wb_valid_q && wb_addr_q == p4_src_q) ? wb_data_q : acc_src_rdata;
    b_row = use_imm ? {LANES{imm_ext}} : s_row;
  end

  for (genvar l = 0; l < LANES; l++) begin : g_lane
    tsr_alu_lane #(
      .Width (AW)
    ) u_alu (
      .op_i  (alu_opc),
      .a_i   (a_row[l*AW +: AW]),
      .b_i   (b_row[l*AW +: AW]),
      .res_o (alu_row[l*AW +: AW])
    );
  end

  always_comb begin
    for (int l = 0; l < LANES; l++) begin
      if (op_reset) begin
        res_row[l*AW +: AW] = '0;
      end else if (is_gemm) begin
        res_row[l*AW +: AW] = a_row[l*AW +: AW] + dot[l*AW +: AW];
      end else begin
        res_row[l*AW +: AW] = alu_row[l*AW +: AW];
      end
      out_wdata_o[l*OW +: OW] = res_row[l*AW +: OW];  // truncation
    end
    out_we_o    = p4_valid_q;
    out_waddr_o = p4_dst_q;

    // The acc write port is shared with loads (never at the same time: an
    // instruction ends only after the pipeline drained).
    acc_we    = p4_valid_q || ld_acc_we;
    acc_waddr = p4_valid_q ? p4_dst_q : ld_waddr[AIB-1:0];
    acc_wdata = p4_valid_q ? res_row : ld_acc_wdata;
    pipe_busy = p1_valid_q || p2_valid_q || p3_valid_q || p4_valid_q;
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      p1_valid_q <= 1'b0;
      p1_doff_q  <= '0;
      p1_soff_q  <= '0;
      p1_woff_q  <= '0;
      p2_valid_q <= 1'b0;
      p2_dst_q   <= '0;
      p2_src_q   <= '0;
      p3_valid_q <= 1'b0;
      p3_dst_q   <= '0;
      p3_src_q   <= '0;
      p4_valid_q <= 1'b0;
      p4_dst_q   <= '0;
      p4_src_q   <= '0;
      wb_valid_q <= 1'b0;
      wb_addr_q  <= '0;
    end else begin
      p1_valid_q <= loop_valid && !err_q && !p1_err;
      p1_doff_q  <= loop_doff;
      p1_soff_q  <= loop_soff;
      p1_woff_q  <= loop_woff;
      p2_valid_q <= p1_ok;
      p2_dst_q   <= dst_idx[AIB-1:0];
      p2_src_q   <= src_idx[AIB-1:0];
      p3_valid_q <= p2_valid_q;
      p3_dst_q   <= p2_dst_q;
      p3_src_q   <= p2_src_q;
      p4_valid_q <= p3_valid_q;
      p4_dst_q   <= p3_dst_q;
      p4_src_q   <= p3_src_q;
      wb_valid_q <= acc_we;
      wb_addr_q  <= acc_waddr;
    end
  end

  // Forwarded row data: qualified by wb_valid_q, so no reset needed.
  always_ff @(posedge clk_i) begin
    wb_data_q <= acc_wdata;
  end

  // ---------------------------------------------------------------------
  // Loads of uop / acc / acc8
  // ---------------------------------------------------------------------
  tsr_compute_load #(
    .AddrW (LDW)
  ) u_load (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .start_i         (ld_start),
    .mem_type_i      (mem_type),
    .sram_base_i     (LDW'(sram_base)),
    .dram_base_i     (cmd_q[tsr_pkg::MEM_DRAM_BASE_LSB +: 32]),
    .y_size_i        (cmd_q[tsr_pkg::MEM_Y_SIZE_LSB +: 16]),
    .x_size_i        (x_size),
    .x_stride_i      (cmd_q[tsr_pkg::MEM_X_STRIDE_LSB +: 16]),
    .y_pad0_i        (cmd_q[tsr_pkg::MEM_Y_PAD0_LSB +: 4]),
    .y_pad1_i        (cmd_q[tsr_pkg::MEM_Y_PAD1_LSB +: 4]),
    .x_pad0_i        (cmd_q[tsr_pkg::MEM_X_PAD0_LSB +: 4]),
    .x_pad1_i        (cmd_q[tsr_pkg::MEM_X_PAD1_LSB +: 4]),
    .busy_o          (ld_busy),
    .stall_o         (ld_stall),
    .rd_req_valid_o  (rd_req_valid_o),
    .rd_req_ready_i  (rd_req_ready_i),
    .rd_req_addr_o   (rd_req_addr_o),
    .rd_req_beats_o  (rd_req_beats_o),
    .rd_data_valid_i (rd_data_valid_i),
    .rd_data_ready_o (rd_data_ready_o),
    .rd_data_i       (rd_data_i),
    .uop_we_o        (ld_uop_we),
    .acc_we_o        (ld_acc_we),
    .waddr_o         (ld_waddr),
    .uop_wdata_o     (ld_uop_wdata),
    .acc_wdata_o     (ld_acc_wdata)
  );

  // ---------------------------------------------------------------------
  // Status
  // ---------------------------------------------------------------------
  assign busy_o       = (state_q != S_IDLE) && (state_q != S_ERR);
  assign stall_tok_o  = (state_q == S_POP && !pop_ok) || (state_q == S_PUSH && !push_ok);
  assign stall_mem_o  = (state_q == S_EXEC) && ld_stall;
  assign insn_count_o = count_q;
  assign err_o        = err_q;
endmodule
