// tsr_compute: the compute stage (isa/semantics.md; hw/ARCHITECTURE.md).
// Runs LOAD uop/acc/acc8, GEMM, ALU and FINISH. A dispatcher takes the
// instructions in order and pops their tokens; GEMM goes to the GEMM pipe,
// ALU to the ALU pipe (tsr_compute_pipe, one tensor op per cycle each).
// An instruction may start while the other pipe still runs an older one:
// the younger's ops then keep out of the older's accumulator bank(s) (the
// bank rule in tsr_compute_pipe), so every row sees its ops in program
// order, and requantization of one tile overlaps the GEMMs of the next.
// Pushes stay in program order: an instruction pushes only once every older
// instruction has finished. FINISH and uop LOADs wait until both pipes are
// idle; an accumulator LOAD without push flags waits only for a running
// pipe whose footprint shares a bank with the rows it writes (the bank rule
// again), so constants for one bank load while the other bank computes.
// The uop buffer is kept twice (one read port per pipe) and the
// accumulator is split in two banks by its index MSB, each bank kept twice
// (dst and src reads of the ALU in one cycle), or once with ACC_SINGLE_COPY
// (a true-dual-port RAM: the ALU then issues ops that read a src row every
// other cycle, tsr_compute_pipe); the output buffer (in
// tsr_pipe_accel) is banked the same way, so the pipes write it through one port
// per bank. With ACT_LUT > 0 it also runs LOAD lut: like a uop LOAD (a
// barrier: both pipes idle), through a fourth reader of tsr_compute_load,
// into every ALU lane's copy of the activation tables (tsr_alu_lut, in the
// ALU pipe). An index out of range raises err_o (sticky) and stops the stage
// until reset.
`include "tsr_assert.svh"

module tsr_compute (
  input  logic         clk_i,
  input  logic         rst_ni,
  // command
  input  logic         cmd_valid_i,
  output logic         cmd_ready_o,
  input  logic [tsr_pkg::INSN_BITS-1:0] cmd_i,
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
  // output buffer, one write port per bank (row index without the MSB)
  output logic [1:0]   out_we_o,
  output logic [2*(tsr_pkg::ACC_IDX_BITS-1)-1:0] out_waddr_o,
  output logic [2*tsr_pkg::OUT_BYTES*8-1:0]      out_wdata_o,
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
  // Instruction field widths (the ISA field table, through tsr_pkg)
  localparam int OPW = tsr_pkg::MEM_OPCODE_W;      // opcode
  localparam int MTW = tsr_pkg::MEM_MEM_TYPE_W;    // memory type
  localparam int AOW = tsr_pkg::ALU_ALU_OPCODE_W;  // ALU operation
  localparam int LANES = tsr_pkg::BATCH * tsr_pkg::BLOCK_OUT;
  localparam int AW = tsr_pkg::ACC_WIDTH;
  localparam int OW = tsr_pkg::OUT_WIDTH;
  localparam int ROW = tsr_pkg::ACC_BYTES * 8;
  localparam int UIB = tsr_pkg::UOP_IDX_BITS;
  localparam int AIB = tsr_pkg::ACC_IDX_BITS;
  localparam int IIB = tsr_pkg::INP_IDX_BITS;
  localparam int WIB = tsr_pkg::WGT_IDX_BITS;
  // activation tables (ACT_LUT > 0): beat address bits of all tables
  localparam bit LUT = (tsr_pkg::ACT_LUT != 0);
  localparam int LUT_BEATS = tsr_pkg::ACT_LUT * 256 / tsr_pkg::BUS_BYTES;
  localparam int LAW = LUT ? $clog2(LUT_BEATS) : 1;
  localparam int LDW0 = (UIB > AIB) ? UIB : AIB;
  localparam int LDW = (LDW0 > LAW) ? LDW0 : LAW;  // load row (lut: beat) address

  // ---------------------------------------------------------------------
  // Command fields (all formats share the opcode and flag bits)
  // ---------------------------------------------------------------------
  logic [tsr_pkg::INSN_BITS-1:0] cmd_q, cmd_d;
  logic [OPW-1:0] opcode;
  logic         f_pop_prev, f_pop_next, f_push_prev, f_push_next;
  logic         is_gemm, is_alu;
  logic [UIB-1:0] uop_bgn;
  logic [UIB:0]   uop_end;
  logic [MTW-1:0] mem_type;
  logic [tsr_pkg::SRAM_BASE_BITS-1:0] sram_base;
  logic [tsr_pkg::MEM_X_SIZE_W-1:0] x_size;
  logic [34:0]  ld_end;       // sram_base + rows*row
  logic [33:0]  ld_size_q, ld_size_d;  // rows*row of the accepted command
  logic         ld_ovf_q, ld_ovf_d;    // its DRAM footprint is beyond 32 address bits
  logic [3:0]   in_elem_log;           // log2(element bytes) of cmd_i's memory type
  logic [MTW-1:0] in_mem;
  logic [AOW-1:0] alu_op;
  logic [tsr_pkg::MEM_X_SIZE_W:0] in_rows, in_row;  // of cmd_i (tsr_pad_box)
  logic         ld_padded;    // the command in cmd_q pads (LOAD lut may not)
  logic         ld_acc_nb;    // accumulator LOAD that need not wait for both pipes
  logic [1:0]   ld_banks;     // accumulator banks it writes

  // Continuous assignments (Icarus handles constant part-selects of a
  // vector read in always_comb only coarsely).
  assign opcode      = tsr_pkg::gemm_opcode(cmd_q);
  assign f_pop_prev  = tsr_pkg::gemm_pop_prev(cmd_q);
  assign f_pop_next  = tsr_pkg::gemm_pop_next(cmd_q);
  assign f_push_prev = tsr_pkg::gemm_push_prev(cmd_q);
  assign f_push_next = tsr_pkg::gemm_push_next(cmd_q);
  assign is_gemm     = (opcode == OPW'(tsr_pkg::OP_GEMM));
  assign is_alu      = (opcode == OPW'(tsr_pkg::OP_ALU));
  assign uop_bgn     = tsr_pkg::gemm_uop_bgn(cmd_q);
  assign uop_end     = tsr_pkg::gemm_uop_end(cmd_q);

  assign mem_type  = tsr_pkg::mem_mem_type(cmd_q);
  assign sram_base = tsr_pkg::mem_sram_base(cmd_q);
  assign x_size    = tsr_pkg::mem_x_size(cmd_q);
  assign ld_end    = 35'(sram_base) + 35'(ld_size_q);

  // rows*row of the incoming command, registered with it so the bounds
  // check does not put a multiplier behind the command register.
  tsr_pad_box u_box (
    .y_size_i (tsr_pkg::mem_y_size(cmd_i)),
    .x_size_i (tsr_pkg::mem_x_size(cmd_i)),
    .y_pad0_i (tsr_pkg::mem_y_pad0(cmd_i)),
    .y_pad1_i (tsr_pkg::mem_y_pad1(cmd_i)),
    .x_pad0_i (tsr_pkg::mem_x_pad0(cmd_i)),
    .x_pad1_i (tsr_pkg::mem_x_pad1(cmd_i)),
    .row_o    (in_row),
    .rows_o   (in_rows),
    .x_lo_o   (),
    .x_hi_o   (),
    .y_lo_o   (),
    .y_hi_o   ()
  );
  assign ld_size_d = 34'(in_rows) * 34'(in_row);
  assign in_mem    = tsr_pkg::mem_mem_type(cmd_i);
  assign in_elem_log = (LUT && in_mem == MTW'(tsr_pkg::MEM_LUT)) ? 4'd8 :  // 256 bytes a table
                       (in_mem == MTW'(tsr_pkg::MEM_UOP)) ? 4'($clog2(tsr_pkg::UOP_BYTES)) :
                       (in_mem == MTW'(tsr_pkg::MEM_ACC8)) ? 4'($clog2(tsr_pkg::ACC8_BYTES)) :
                       4'($clog2(tsr_pkg::ACC_BYTES));
  tsr_dram_span u_span (
    .dram_base_i (tsr_pkg::mem_dram_base(cmd_i)),
    .y_size_i    (tsr_pkg::mem_y_size(cmd_i)),
    .x_size_i    (tsr_pkg::mem_x_size(cmd_i)),
    .x_stride_i  (tsr_pkg::mem_x_stride(cmd_i)),
    .elem_log_i  (in_elem_log),
    .ovf_o       (ld_ovf_d)
  );
  assign alu_op    = tsr_pkg::alu_alu_opcode(cmd_q);
  assign ld_padded = (tsr_pkg::mem_y_pad0(cmd_q) != '0) || (tsr_pkg::mem_y_pad1(cmd_q) != '0) ||
                     (tsr_pkg::mem_x_pad0(cmd_q) != '0) || (tsr_pkg::mem_x_pad1(cmd_q) != '0);
  assign ld_acc_nb = (opcode == OPW'(tsr_pkg::OP_LOAD)) && (x_size != '0) && !f_push_prev && !f_push_next &&
                     (mem_type == MTW'(tsr_pkg::MEM_ACC) || mem_type == MTW'(tsr_pkg::MEM_ACC8));
  localparam int ACC_HALF_ROWS = tsr_pkg::ACC_DEPTH / 2;
  localparam logic [34:0] ACC_HALF = 35'(ACC_HALF_ROWS);
  assign ld_banks  = {(ld_end - 35'd1) >= ACC_HALF, 35'(sram_base) < ACC_HALF};
  // a pipe still running an instruction whose footprint shares a bank with
  // the load (p_busy/p_banks come from the pipes, declared below)
  logic ld_conflict;

  // ---------------------------------------------------------------------
  // Dispatcher
  // ---------------------------------------------------------------------
  localparam int HAW = AIB - 1;  // row index within a bank
  localparam int PG = 0, PA = 1; // pipe numbers: GEMM, ALU

  typedef enum logic [2:0] {
    S_IDLE, S_POP, S_EXEC, S_PUSH, S_ERR
  } state_e;
  state_e state_q, state_d;
  logic [31:0] count_q, count_d;
  logic        err_q, err_d;
  logic        pop_ok, push_ok, ld_start, cmd_err, unit_free;
  logic        ld_busy, ld_stall;
  logic [1:0]  occ_q, occ_d;       // pipe holds an unretired instruction
  logic [1:0]  young_q, young_d;   // ... younger than the other pipe's
  logic [3:0]  pflags_q, pflags_d; // its push flags {next, prev}, 2 bits per pipe
  logic [1:0]  p_start, p_busy, p_known, p_err, p_op, p_retire;
  logic [3:0]  p_banks;            // banks of each pipe's footprint, 2 bits per pipe
  assign ld_conflict = (occ_q[0] && p_busy[0] && ((p_banks[1:0] & ld_banks) != 2'b00)) ||
                       (occ_q[1] && p_busy[1] && ((p_banks[3:2] & ld_banks) != 2'b00));
  logic [1:0]  p_push_ok;
  logic        unit;               // pipe of the command in cmd_q

  always_comb begin
    unit    = is_alu ? 1'(PA) : 1'(PG);
    pop_ok  = (!f_pop_prev || pop_prev_valid_i) && (!f_pop_next || pop_next_valid_i);
    push_ok = (!f_push_prev || push_prev_ready_i) && (!f_push_next || push_next_ready_i);
    // GEMM/ALU need their pipe; FINISH and most LOADs wait for both (a
    // barrier); an accumulator LOAD only for pipes busy in its banks.
    unit_free = (is_gemm || is_alu) ? !occ_q[unit] : ld_acc_nb ? !ld_conflict : (occ_q == 2'b00);

    // Errors found when the instruction starts (after its pops, as in the
    // golden model): uop range, load bounds, anything not for this stage.
    cmd_err = 1'b0;
    if (is_gemm || is_alu) begin
      cmd_err = ({1'b0, uop_bgn} > uop_end) || (uop_end > (UIB + 1)'(tsr_pkg::UOP_DEPTH));
      // an ALU op this config lacks (reserved, or its key off): an error,
      // whatever the loops run
      if (is_alu && !tsr_pkg::ALU_OPS_MASK[alu_op]) cmd_err = 1'b1;
    end else if (opcode == OPW'(tsr_pkg::OP_LOAD)) begin
      if (x_size != '0) begin
        if (mem_type == MTW'(tsr_pkg::MEM_UOP)) begin
          cmd_err = (ld_end > 35'(tsr_pkg::UOP_DEPTH)) || ld_ovf_q;
        end else if (mem_type == MTW'(tsr_pkg::MEM_ACC) || mem_type == MTW'(tsr_pkg::MEM_ACC8)) begin
          cmd_err = (ld_end > 35'(tsr_pkg::ACC_DEPTH)) || ld_ovf_q;
        end else if (LUT && mem_type == MTW'(tsr_pkg::MEM_LUT)) begin
          // tables [sram_base, sram_base + rows*row) within [0, ACT_LUT);
          // a table is loaded whole, so padding is malformed
          cmd_err = (ld_end > 35'(tsr_pkg::ACT_LUT)) || ld_ovf_q || ld_padded;
        end else begin
          cmd_err = 1'b1;
        end
      end
    end else if (opcode != OPW'(tsr_pkg::OP_FINISH)) begin
      cmd_err = 1'b1;
    end

    state_d     = state_q;
    cmd_d       = cmd_q;
    count_d     = count_q;
    err_d       = err_q || (p_err != 2'b00);
    occ_d       = occ_q;
    young_d     = young_q;
    pflags_d    = pflags_q;
    cmd_ready_o = 1'b0;
    pop_prev_o  = 1'b0;
    pop_next_o  = 1'b0;
    push_prev_o = 1'b0;
    push_next_o = 1'b0;
    finish_o    = 1'b0;
    ld_start    = 1'b0;
    p_start     = 2'b00;
    p_retire    = 2'b00;

    // Retire: a finished instruction pushes once no older one is pending;
    // one without pushes frees its pipe at once. At most one retiring
    // instruction pushes per cycle (a younger pusher waits for the older).
    for (int u = 0; u < 2; u++) begin
      p_push_ok[u] = (!pflags_q[2*u] || push_prev_ready_i) && (!pflags_q[2*u+1] || push_next_ready_i);
      if (occ_q[u] && !p_busy[u] && !err_q &&
          ((pflags_q[2*u +: 2] == 2'b00) || (!young_q[u] && p_push_ok[u]))) begin
        p_retire[u] = 1'b1;
      end
    end
    for (int u = 0; u < 2; u++) begin
      if (p_retire[u]) begin
        push_prev_o  = push_prev_o || pflags_q[2*u];
        push_next_o  = push_next_o || pflags_q[2*u+1];
        count_d      = count_d + 32'd1;
        occ_d[u]     = 1'b0;
        young_d[1-u] = 1'b0;
      end
    end

    case (state_q)
      S_IDLE: begin
        cmd_ready_o = !err_q;
        if (err_q) begin
          state_d = S_ERR;
        end else if (cmd_valid_i) begin
          cmd_d   = cmd_i;
          state_d = S_POP;
        end
      end
      S_POP: begin
        // a malformed GEMM/ALU fails only once every older instruction is
        // done (in program order they complete before it)
        if (pop_ok && unit_free && (!cmd_err || occ_q == 2'b00) && !err_q) begin
          pop_prev_o = f_pop_prev;
          pop_next_o = f_pop_next;
          if (cmd_err) begin
            err_d   = 1'b1;
            state_d = S_ERR;
          end else if (is_gemm || is_alu) begin
            p_start[unit]  = 1'b1;
            occ_d[unit]    = 1'b1;
            // younger than the other pipe's instruction unless that one
            // retires in this very cycle
            young_d[unit]  = occ_q[1-unit] && !p_retire[1-unit];
            pflags_d[2*unit +: 2] = {f_push_next, f_push_prev};
            state_d        = S_IDLE;
          end else if (opcode == OPW'(tsr_pkg::OP_LOAD)) begin
            ld_start = (x_size != '0);
            if (x_size != '0) state_d = S_EXEC;
            else state_d = S_PUSH;
          end else begin
            finish_o = 1'b1;
            state_d  = S_PUSH;
          end
        end else if (err_q) begin
          state_d = S_ERR;
        end
      end
      S_EXEC: begin
        if (err_q) begin
          state_d = S_ERR;
        end else if (!ld_busy) begin
          state_d = S_PUSH;
        end
      end
      S_PUSH: begin
        // an instruction with push flags came through a barrier (no older
        // one can retire now); one without may complete beside a retire
        if (push_ok) begin
          push_prev_o = push_prev_o || f_push_prev;
          push_next_o = push_next_o || f_push_next;
          count_d     = count_d + 32'd1;
          state_d     = S_IDLE;
        end
      end
      default: ;  // S_ERR: held until reset
    endcase
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q     <= S_IDLE;
      cmd_q       <= '0;
      count_q     <= '0;
      err_q       <= 1'b0;
      ld_size_q   <= '0;
      ld_ovf_q    <= 1'b0;
      occ_q       <= '0;
      young_q     <= '0;
      pflags_q    <= '0;
    end else begin
      state_q     <= state_d;
      cmd_q       <= cmd_d;
      count_q     <= count_d;
      err_q       <= err_d;
      ld_size_q   <= cmd_ready_o ? ld_size_d : ld_size_q;
      ld_ovf_q    <= cmd_ready_o ? ld_ovf_d : ld_ovf_q;
      occ_q       <= occ_d;
      young_q     <= young_d;
      pflags_q    <= pflags_d;
    end
  end

  // ---------------------------------------------------------------------
  // Pipes, uop buffer copies, accumulator banks
  // ---------------------------------------------------------------------
  logic [1:0]     uop_re;
  logic [2*UIB-1:0] uop_raddr;
  logic [2*tsr_pkg::UOP_BYTES*8-1:0] uop_rdata;
  logic [tsr_pkg::UOP_BYTES*8-1:0] ld_uop_wdata;
  logic           ld_uop_we, ld_acc_we;
  logic [LDW-1:0] ld_waddr;
  logic [ROW-1:0] ld_acc_wdata;
  logic           ld_lut_we;
  logic [tsr_pkg::BUS_BYTES*8-1:0] ld_lut_wdata;
  logic [1:0]     a_dre, a_sre, a_we;
  logic [2*AIB-1:0] a_draddr, a_sraddr, a_waddr;  // per pipe
  logic [2*ROW-1:0] a_drdata, a_srdata, a_wdata;
  logic           alu_inp_re, alu_wgt_re;
  logic [IIB-1:0] alu_inp_raddr;
  logic [WIB-1:0] alu_wgt_raddr;

  for (genvar u = 0; u < 2; u++) begin : g_uop
    tsr_sram #(
      .Width (tsr_pkg::UOP_BYTES * 8),
      .Depth (tsr_pkg::UOP_DEPTH)
    ) u_uop_buf (
      .clk_i   (clk_i),
      .we_i    (ld_uop_we),
      .waddr_i (ld_waddr[UIB-1:0]),
      .wdata_i (ld_uop_wdata),
      .re_i    (uop_re[u]),
      .raddr_i (uop_raddr[u*UIB +: UIB]),
      .rdata_o (uop_rdata[u*tsr_pkg::UOP_BYTES*8 +: tsr_pkg::UOP_BYTES*8])
    );
  end

  tsr_compute_pipe #(
    .Gemm (1)
  ) u_pipe_gemm (
    .clk_i         (clk_i),
    .rst_ni        (rst_ni),
    .start_i       (p_start[PG]),
    .cmd_i         (cmd_q),
    .abort_i       (err_q),
    .busy_o        (p_busy[PG]),
    .check_i       (young_q[PG] && p_busy[PA]),
    .other_known_i (p_known[PA]),
    .other_banks_i (p_banks[2*PA +: 2]),
    .known_o       (p_known[PG]),
    .banks_o       (p_banks[2*PG +: 2]),
    .uop_re_o      (uop_re[PG]),
    .uop_raddr_o   (uop_raddr[PG*UIB +: UIB]),
    .uop_rdata_i   (uop_rdata[PG*tsr_pkg::UOP_BYTES*8 +: tsr_pkg::UOP_BYTES*8]),
    .inp_re_o      (inp_re_o),
    .inp_raddr_o   (inp_raddr_o),
    .inp_rdata_i   (inp_rdata_i),
    .wgt_re_o      (wgt_re_o),
    .wgt_raddr_o   (wgt_raddr_o),
    .wgt_rdata_i   (wgt_rdata_i),
    .acc_dre_o     (a_dre[PG]),
    .acc_draddr_o  (a_draddr[PG*AIB +: AIB]),
    .acc_drdata_i  (a_drdata[PG*ROW +: ROW]),
    .acc_sre_o     (a_sre[PG]),
    .acc_sraddr_o  (a_sraddr[PG*AIB +: AIB]),
    .acc_srdata_i  (a_srdata[PG*ROW +: ROW]),
    .acc_we_o      (a_we[PG]),
    .acc_waddr_o   (a_waddr[PG*AIB +: AIB]),
    .acc_wdata_o   (a_wdata[PG*ROW +: ROW]),
    .lut_we_i      (1'b0),
    .lut_waddr_i   ({LAW{1'b0}}),
    .lut_wdata_i   ({(tsr_pkg::BUS_BYTES * 8){1'b0}}),
    .err_o         (p_err[PG]),
    .op_o          (p_op[PG])
  );

  tsr_compute_pipe #(
    .Gemm (0)
  ) u_pipe_alu (
    .clk_i         (clk_i),
    .rst_ni        (rst_ni),
    .start_i       (p_start[PA]),
    .cmd_i         (cmd_q),
    .abort_i       (err_q),
    .busy_o        (p_busy[PA]),
    .check_i       (young_q[PA] && p_busy[PG]),
    .other_known_i (p_known[PG]),
    .other_banks_i (p_banks[2*PG +: 2]),
    .known_o       (p_known[PA]),
    .banks_o       (p_banks[2*PA +: 2]),
    .uop_re_o      (uop_re[PA]),
    .uop_raddr_o   (uop_raddr[PA*UIB +: UIB]),
    .uop_rdata_i   (uop_rdata[PA*tsr_pkg::UOP_BYTES*8 +: tsr_pkg::UOP_BYTES*8]),
    .inp_re_o      (alu_inp_re),
    .inp_raddr_o   (alu_inp_raddr),
    .inp_rdata_i   ({(tsr_pkg::INP_BYTES * 8){1'b0}}),
    .wgt_re_o      (alu_wgt_re),
    .wgt_raddr_o   (alu_wgt_raddr),
    .wgt_rdata_i   ({(tsr_pkg::WGT_BYTES * 8){1'b0}}),
    .acc_dre_o     (a_dre[PA]),
    .acc_draddr_o  (a_draddr[PA*AIB +: AIB]),
    .acc_drdata_i  (a_drdata[PA*ROW +: ROW]),
    .acc_sre_o     (a_sre[PA]),
    .acc_sraddr_o  (a_sraddr[PA*AIB +: AIB]),
    .acc_srdata_i  (a_srdata[PA*ROW +: ROW]),
    .acc_we_o      (a_we[PA]),
    .acc_waddr_o   (a_waddr[PA*AIB +: AIB]),
    .acc_wdata_o   (a_wdata[PA*ROW +: ROW]),
    .lut_we_i      (ld_lut_we),
    .lut_waddr_i   (ld_waddr[LAW-1:0]),
    .lut_wdata_i   (ld_lut_wdata),
    .err_o         (p_err[PA]),
    .op_o          (p_op[PA])
  );

  logic unused_alu_ports;
  assign unused_alu_ports = ^{alu_inp_re, alu_inp_raddr, alu_wgt_re, alu_wgt_raddr,
                              a_sre[PG], a_sraddr[PG*AIB +: AIB]};

  assign gemm_op_o = p_op[PG];
  assign alu_op_o  = p_op[PA];

  // Bank b ports. The bank rule guarantees that the two pipes never want
  // the same bank in one cycle; GEMM is served first should that be broken
  // (the assertion below reports it in simulation).
  logic [1:0]     bk_dre, bk_sre, bk_we;
  logic [2*HAW-1:0] bk_draddr, bk_sraddr, bk_waddr;  // per bank
  logic [2*ROW-1:0] bk_wdata, bk_drdata, bk_srdata;
  logic [1:0]     drbank_q, srbank_q;  // bank each pipe read last cycle

  always_comb begin
    for (int b = 0; b < 2; b++) begin
      bk_dre[b] = 1'b0;
      bk_sre[b] = 1'b0;
      bk_we[b]  = 1'b0;
      bk_draddr[b*HAW +: HAW] = '0;
      bk_sraddr[b*HAW +: HAW] = '0;
      bk_waddr[b*HAW +: HAW]  = '0;
      bk_wdata[b*ROW +: ROW]  = '0;
      out_we_o[b] = 1'b0;
      for (int u = 1; u >= 0; u--) begin  // u = 0 (GEMM) last, so it wins
        if (a_dre[u] && a_draddr[u*AIB + AIB-1] == 1'(b)) begin
          bk_dre[b] = 1'b1;
          bk_draddr[b*HAW +: HAW] = a_draddr[u*AIB +: HAW];
        end
        if (u == PA && a_sre[u] && a_sraddr[u*AIB + AIB-1] == 1'(b)) begin
          bk_sre[b] = 1'b1;
          bk_sraddr[b*HAW +: HAW] = a_sraddr[u*AIB +: HAW];
        end
        if (a_we[u] && a_waddr[u*AIB + AIB-1] == 1'(b)) begin
          bk_we[b]    = 1'b1;
          out_we_o[b] = 1'b1;
          bk_waddr[b*HAW +: HAW] = a_waddr[u*AIB +: HAW];
          bk_wdata[b*ROW +: ROW] = a_wdata[u*ROW +: ROW];
        end
      end
      // loads run while no pipe uses their bank (dispatcher check)
      if (ld_acc_we && ld_waddr[AIB-1] == 1'(b)) begin
        bk_we[b] = 1'b1;
        bk_waddr[b*HAW +: HAW] = ld_waddr[HAW-1:0];
        bk_wdata[b*ROW +: ROW] = ld_acc_wdata;
      end
      out_waddr_o[b*HAW +: HAW] = bk_waddr[b*HAW +: HAW];
      for (int l = 0; l < LANES; l++) begin
        out_wdata_o[b*LANES*OW + l*OW +: OW] = bk_wdata[b*ROW + l*AW +: OW];  // truncation
      end
    end
    for (int u = 0; u < 2; u++) begin
      a_drdata[u*ROW +: ROW] = drbank_q[u] ? bk_drdata[ROW +: ROW] : bk_drdata[0 +: ROW];
      a_srdata[u*ROW +: ROW] = srbank_q[u] ? bk_srdata[ROW +: ROW] : bk_srdata[0 +: ROW];
    end
  end

  for (genvar b = 0; b < 2; b++) begin : g_bank
    if (tsr_pkg::ACC_SINGLE_COPY != 0) begin : g_one
      // One copy: port A writes or serves the ALU's src read (the ALU pipe
      // issues such ops every other cycle, so they never meet a write of
      // this bank: its own writes alternate with its reads, the GEMM pipe and
      // loads keep out of the bank while it runs), port B the dst reads.
      tsr_sram_2p #(
        .Width (ROW),
        .Depth (tsr_pkg::ACC_DEPTH / 2)
      ) u_acc (
        .clk_i     (clk_i),
        .a_we_i    (bk_we[b]),
        .a_re_i    (bk_sre[b] && !bk_we[b]),
        .a_addr_i  (bk_we[b] ? bk_waddr[b*HAW +: HAW] : bk_sraddr[b*HAW +: HAW]),
        .a_wdata_i (bk_wdata[b*ROW +: ROW]),
        .a_rdata_o (bk_srdata[b*ROW +: ROW]),
        .b_re_i    (bk_dre[b]),
        .b_addr_i  (bk_draddr[b*HAW +: HAW]),
        .b_rdata_o (bk_drdata[b*ROW +: ROW])
      );
      // ACC_SINGLE_COPY: port A never reads a src row and writes in one cycle
      `TSR_ASSERT_MSG(chk_src_vs_write, !(bk_we[b] && bk_sre[b]), clk_i, rst_ni,
                      ("tsr_compute: a src read meets a write of accumulator bank %0d (ACC_SINGLE_COPY)", b))
    end else begin : g_two
      tsr_sram #(
        .Width (ROW),
        .Depth (tsr_pkg::ACC_DEPTH / 2)
      ) u_acc_dst (
        .clk_i   (clk_i),
        .we_i    (bk_we[b]),
        .waddr_i (bk_waddr[b*HAW +: HAW]),
        .wdata_i (bk_wdata[b*ROW +: ROW]),
        .re_i    (bk_dre[b]),
        .raddr_i (bk_draddr[b*HAW +: HAW]),
        .rdata_o (bk_drdata[b*ROW +: ROW])
      );
      tsr_sram #(
        .Width (ROW),
        .Depth (tsr_pkg::ACC_DEPTH / 2)
      ) u_acc_src (
        .clk_i   (clk_i),
        .we_i    (bk_we[b]),
        .waddr_i (bk_waddr[b*HAW +: HAW]),
        .wdata_i (bk_wdata[b*ROW +: ROW]),
        .re_i    (bk_sre[b]),
        .raddr_i (bk_sraddr[b*HAW +: HAW]),
        .rdata_o (bk_srdata[b*ROW +: ROW])
      );
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      drbank_q <= '0;
      srbank_q <= '0;
    end else begin
      drbank_q <= {a_draddr[PA*AIB + AIB-1], a_draddr[PG*AIB + AIB-1]};
      srbank_q <= {a_sraddr[PA*AIB + AIB-1], a_sraddr[PG*AIB + AIB-1]};
    end
  end

  // The bank rule: the two pipes, and a load beside them, never want the
  // same accumulator bank port in one cycle.
  `TSR_ASSERT(chk_one_reader_per_bank, !(a_dre[PG] && a_dre[PA] &&
              a_draddr[PG*AIB + AIB-1] == a_draddr[PA*AIB + AIB-1]), clk_i, rst_ni)
  `TSR_ASSERT(chk_one_writer_per_bank, !(a_we[PG] && a_we[PA] &&
              a_waddr[PG*AIB + AIB-1] == a_waddr[PA*AIB + AIB-1]), clk_i, rst_ni)
  `TSR_ASSERT(chk_gemm_write_vs_alu_read, !(a_we[PG] && a_sre[PA] &&
              a_waddr[PG*AIB + AIB-1] == a_sraddr[PA*AIB + AIB-1]), clk_i, rst_ni)
  for (genvar u = 0; u < 2; u++) begin : g_chk_load
    `TSR_ASSERT(chk_load_bank_free, !(ld_acc_we &&
                ((a_we[u] && a_waddr[u*AIB + AIB-1] == ld_waddr[AIB-1]) ||
                 (a_dre[u] && a_draddr[u*AIB + AIB-1] == ld_waddr[AIB-1]) ||
                 (a_sre[u] && a_sraddr[u*AIB + AIB-1] == ld_waddr[AIB-1]))), clk_i, rst_ni)
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
    .dram_base_i     (tsr_pkg::mem_dram_base(cmd_q)),
    .y_size_i        (tsr_pkg::mem_y_size(cmd_q)),
    .x_size_i        (x_size),
    .x_stride_i      (tsr_pkg::mem_x_stride(cmd_q)),
    .y_pad0_i        (tsr_pkg::mem_y_pad0(cmd_q)),
    .y_pad1_i        (tsr_pkg::mem_y_pad1(cmd_q)),
    .x_pad0_i        (tsr_pkg::mem_x_pad0(cmd_q)),
    .x_pad1_i        (tsr_pkg::mem_x_pad1(cmd_q)),
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
    .acc_wdata_o     (ld_acc_wdata),
    .lut_we_o        (ld_lut_we),
    .lut_wdata_o     (ld_lut_wdata)
  );

  // ---------------------------------------------------------------------
  // Status
  // ---------------------------------------------------------------------
  assign busy_o       = !err_q && (((state_q != S_IDLE) && (state_q != S_ERR)) || (occ_q != 2'b00));
  assign stall_tok_o  = (state_q == S_POP && unit_free && !pop_ok) || (state_q == S_PUSH && !push_ok) ||
                        (occ_q[0] && !p_busy[0] && !young_q[0] && !p_push_ok[0]) ||
                        (occ_q[1] && !p_busy[1] && !young_q[1] && !p_push_ok[1]);
  // (a finished younger instruction waiting for the older to push is not a
  // token stall: the older is still executing)
  assign stall_mem_o  = (state_q == S_EXEC) && ld_stall;
  assign insn_count_o = count_q;
  assign err_o        = err_q;
endmodule
