// tsr_store: the store stage. Executes STORE of out (isa/semantics.md):
// output rows sram_base.. in order go to y_size DRAM rows of x_size elements,
// x_stride elements apart. A command issuer queues one writer command per
// DRAM row (one for the whole region when the rows are contiguous, so bursts
// stay long) while the row reader streams the out SRAM into the element writer
// at one row per cycle: reads are issued only when the skid FIFO has room for
// them (the SRAM answers one cycle later), so writer back-pressure never
// loses data. The instruction completes (and may push its token) only when
// the writer reports every write acknowledged. Malformed stores (other
// memory type, padding, rows outside the buffer) write nothing and set the
// sticky err_o, as the golden model rejects them; their tokens are still
// handled so the pipeline does not hang.
`include "tsr_assert.svh"

module tsr_store #(
  parameter int BusBytes = tsr_pkg::BUS_BYTES,
  localparam int OB = tsr_pkg::OUT_BYTES,
  localparam int AW = tsr_pkg::ACC_IDX_BITS
) (
  input  logic         clk_i,
  input  logic         rst_ni,
  // command (STORE of out)
  input  logic         cmd_valid_i,
  output logic         cmd_ready_o,
  input  logic [tsr_pkg::INSN_BITS-1:0] cmd_i,
  // tokens
  input  logic         pop_prev_valid_i,   // compute -> store
  output logic         pop_prev_o,
  input  logic         push_prev_ready_i,  // store -> compute
  output logic         push_prev_o,
  // DMA write port
  output logic         wr_req_valid_o,
  input  logic         wr_req_ready_i,
  output logic [31:0]  wr_req_addr_o,
  output logic [31:0]  wr_req_beats_o,
  output logic         wr_data_valid_o,
  input  logic         wr_data_ready_i,
  output logic [BusBytes*8-1:0] wr_data_o,
  output logic [BusBytes-1:0]   wr_strb_o,
  input  logic         wr_done_i,
  // out SRAM read port (data the cycle after re)
  output logic         out_re_o,
  output logic [AW-1:0] out_raddr_o,
  input  logic [OB*8-1:0] out_rdata_i,
  // status
  output logic         busy_o,
  output logic         stall_tok_o,
  output logic         stall_mem_o,
  output logic [31:0]  insn_count_o,
  output logic         err_o
);
  // Instruction field widths (the ISA field table, through tsr_pkg)
  localparam int MTW = tsr_pkg::MEM_MEM_TYPE_W;    // memory type
  localparam int SBW = tsr_pkg::MEM_SRAM_BASE_W;
  localparam int OB_SHIFT = $clog2(OB);
  // Skid FIFO: the credit check ignores a same-cycle pop, so at one row per
  // cycle (one read in flight, one row queued) it needs 3 entries; 4 is the
  // next power of two.
  localparam int SKID = 4;
  localparam int SCW = $clog2(SKID + 1);

  typedef enum logic [2:0] {
    S_IDLE,   // waiting for a command
    S_POP,    // waiting for the pop token
    S_EXEC,   // streaming rows to the writer
    S_DRAIN,  // waiting for the writes to be acknowledged
    S_PUSH    // waiting for room to push
  } state_e;

  state_e state_q, state_d;

  // Latched instruction.
  logic           bad_q, bad_d;            // not out, or padded
  logic           ovf_q, ovf_d;            // DRAM footprint beyond 32 address bits
  logic           c_ovf;
  logic           pop_q, pop_d, push_q, push_d;
  logic [SBW-1:0] sram_base_q, sram_base_d;
  logic [tsr_pkg::MEM_Y_SIZE_W-1:0] y_size_q, y_size_d;
  logic [tsr_pkg::MEM_X_SIZE_W-1:0] x_size_q, x_size_d;

  // Writer command issuer: one command per DRAM row, or one for the whole
  // region when the rows are contiguous (x_stride == x_size: longer bursts).
  logic [15:0]    iss_left_q, iss_left_d;  // commands still to issue
  logic [31:0]    iss_count_q, iss_count_d;  // elements per command
  logic           merge_q, merge_d;          // contiguous rows: one command
  logic [31:0]    iss_addr_q, iss_addr_d;
  logic [31:0]    stride_q, stride_d;      // x_stride in bytes

  // SRAM row reader and element feed.
  logic [31:0]    rd_left_q, rd_left_d;    // rows still to read
  logic [31:0]    fed_left_q, fed_left_d;  // rows still to hand to the writer
  logic [AW-1:0]  raddr_q, raddr_d;
  logic           inflight_q, inflight_d;  // a read was issued last cycle

  logic [31:0]    count_q, count_d;
  logic           err_q, err_d;

  // Decoded command fields.
  logic [MTW-1:0] c_mem;
  logic [31:0]    c_dram;
  logic [tsr_pkg::MEM_X_STRIDE_W-1:0] c_x_stride;
  logic           c_padded, c_pop, c_push;
  logic [SBW-1:0] c_sram_base;
  logic [tsr_pkg::MEM_Y_SIZE_W-1:0] c_y_size;
  logic [tsr_pkg::MEM_X_SIZE_W-1:0] c_x_size;

  assign c_mem      = tsr_pkg::mem_mem_type(cmd_i);
  assign c_dram     = tsr_pkg::mem_dram_base(cmd_i);
  assign c_x_stride = tsr_pkg::mem_x_stride(cmd_i);
  assign c_pop      = tsr_pkg::mem_pop_prev(cmd_i);
  assign c_push     = tsr_pkg::mem_push_prev(cmd_i);
  assign c_sram_base = tsr_pkg::mem_sram_base(cmd_i);
  assign c_y_size   = tsr_pkg::mem_y_size(cmd_i);
  assign c_x_size   = tsr_pkg::mem_x_size(cmd_i);
  assign c_padded   = (tsr_pkg::mem_y_pad0(cmd_i) != '0) ||
                      (tsr_pkg::mem_y_pad1(cmd_i) != '0) ||
                      (tsr_pkg::mem_x_pad0(cmd_i) != '0) ||
                      (tsr_pkg::mem_x_pad1(cmd_i) != '0);

  tsr_dram_span u_span (
    .dram_base_i (c_dram),
    .y_size_i    (c_y_size),
    .x_size_i    (c_x_size),
    .x_stride_i  (c_x_stride),
    .elem_log_i  (4'(OB_SHIFT)),
    .ovf_o       (c_ovf)
  );

  logic            iss_valid, iss_ready;
  logic            re;
  logic            skid_valid, skid_ready;
  logic [OB*8-1:0] skid_data;
  logic [SCW-1:0]  skid_count;
  logic            wr_idle;
  logic [31:0]     n_rows;
  logic [32:0]     span_end;
  logic            range_err;
  logic            pop_ok, push_ok;

  tsr_dma_wr_elems #(
    .ElemBytes (OB),
    .BusBytes  (BusBytes)
  ) u_writer (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .cmd_valid_i     (iss_valid),
    .cmd_ready_o     (iss_ready),
    .cmd_addr_i      (iss_addr_q),
    .cmd_count_i     (iss_count_q),
    .elem_valid_i    (skid_valid),
    .elem_ready_o    (skid_ready),
    .elem_i          (skid_data),
    .wr_req_valid_o  (wr_req_valid_o),
    .wr_req_ready_i  (wr_req_ready_i),
    .wr_req_addr_o   (wr_req_addr_o),
    .wr_req_beats_o  (wr_req_beats_o),
    .wr_data_valid_o (wr_data_valid_o),
    .wr_data_ready_i (wr_data_ready_i),
    .wr_data_o       (wr_data_o),
    .wr_strb_o       (wr_strb_o),
    .wr_done_i       (wr_done_i),
    .idle_o          (wr_idle),
    .stall_o         ()
  );

  // Read data lands in the skid FIFO the cycle after the read; a read is
  // issued only if the FIFO can take it even when nothing leaves meanwhile.
  tsr_fifo #(.Width(OB * 8), .Depth(SKID)) u_skid (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (inflight_q),
    .in_ready_o  (),
    .in_data_i   (out_rdata_i),
    .out_valid_o (skid_valid),
    .out_ready_i (skid_ready),
    .out_data_o  (skid_data),
    .count_o     (skid_count)
  );

  assign iss_valid   = (state_q == S_EXEC) && (iss_left_q != '0);
  assign re          = (state_q == S_EXEC) && (rd_left_q != '0) &&
                       ((SCW + 1)'(skid_count) + (SCW + 1)'(inflight_q) < (SCW + 1)'(SKID));
  assign out_re_o    = re;
  assign out_raddr_o = raddr_q;

  // Rows [sram_base, sram_base + y_size*x_size) must fit the buffer.
  assign n_rows    = 32'(y_size_q) * 32'(x_size_q);
  assign span_end  = 33'(sram_base_q) + 33'(n_rows);
  assign range_err = span_end > 33'(tsr_pkg::OUT_DEPTH);

  assign pop_ok  = !pop_q || pop_prev_valid_i;
  assign push_ok = !push_q || push_prev_ready_i;

  always_comb begin
    state_d     = state_q;
    bad_d       = bad_q;
    ovf_d       = ovf_q;
    pop_d       = pop_q;
    push_d      = push_q;
    sram_base_d = sram_base_q;
    y_size_d    = y_size_q;
    x_size_d    = x_size_q;
    iss_left_d  = iss_left_q;
    iss_count_d = iss_count_q;
    merge_d     = merge_q;
    iss_addr_d  = iss_addr_q;
    stride_d    = stride_q;
    rd_left_d   = rd_left_q;
    fed_left_d  = fed_left_q;
    raddr_d     = raddr_q;
    inflight_d  = re;
    count_d     = count_q;
    err_d       = err_q;
    pop_prev_o  = 1'b0;
    push_prev_o = 1'b0;
    cmd_ready_o = (state_q == S_IDLE);

    case (state_q)
      S_IDLE: begin
        if (cmd_valid_i) begin
          bad_d       = (c_mem != MTW'(tsr_pkg::MEM_OUT)) || c_padded;
          ovf_d       = c_ovf;
          pop_d       = c_pop;
          push_d      = c_push;
          sram_base_d = c_sram_base;
          y_size_d    = c_y_size;
          x_size_d    = c_x_size;
          merge_d     = (c_x_stride == c_x_size);
          iss_left_d  = merge_d ? {15'd0, c_y_size != '0} : c_y_size;
          iss_count_d = {16'd0, c_x_size};
          // OUT_BYTES is a power of two (the config stores logs of the widths).
          iss_addr_d  = c_dram << OB_SHIFT;
          stride_d    = {16'd0, c_x_stride} << OB_SHIFT;
          state_d     = S_POP;
        end
      end
      S_POP: begin
        if (pop_ok) begin
          pop_prev_o = pop_q;
          if (merge_q) iss_count_d = n_rows;
          rd_left_d  = n_rows;
          fed_left_d = n_rows;
          raddr_d    = AW'(sram_base_q);
          // Same checks, in the same order, as the golden model.
          if (x_size_q == '0) begin
            state_d = S_PUSH;
          end else if (bad_q || range_err || ovf_q) begin
            err_d   = 1'b1;
            state_d = S_PUSH;
          end else if (n_rows == '0) begin
            state_d = S_PUSH;
          end else begin
            state_d = S_EXEC;
          end
        end
      end
      S_EXEC: begin
        if (iss_valid && iss_ready) begin
          iss_left_d = iss_left_q - 16'd1;
          iss_addr_d = iss_addr_q + stride_q;
        end
        if (re) begin
          rd_left_d = rd_left_q - 32'd1;
          raddr_d   = raddr_q + AW'(1);
        end
        if (skid_valid && skid_ready) fed_left_d = fed_left_q - 32'd1;
        if (iss_left_d == '0 && fed_left_d == '0) state_d = S_DRAIN;
      end
      S_DRAIN: begin
        if (wr_idle) state_d = S_PUSH;
      end
      S_PUSH: begin
        if (push_ok) begin
          push_prev_o = push_q;
          count_d     = count_q + 32'd1;
          state_d     = S_IDLE;
        end
      end
      default: state_d = S_IDLE;
    endcase
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q     <= S_IDLE;
      bad_q       <= 1'b0;
      ovf_q       <= 1'b0;
      pop_q       <= 1'b0;
      push_q      <= 1'b0;
      sram_base_q <= '0;
      y_size_q    <= '0;
      x_size_q    <= '0;
      iss_left_q  <= '0;
      iss_count_q <= '0;
      merge_q     <= 1'b0;
      iss_addr_q  <= '0;
      stride_q    <= '0;
      rd_left_q   <= '0;
      fed_left_q  <= '0;
      raddr_q     <= '0;
      inflight_q  <= 1'b0;
      count_q     <= '0;
      err_q       <= 1'b0;
    end else begin
      state_q     <= state_d;
      bad_q       <= bad_d;
      ovf_q       <= ovf_d;
      pop_q       <= pop_d;
      push_q      <= push_d;
      sram_base_q <= sram_base_d;
      y_size_q    <= y_size_d;
      x_size_q    <= x_size_d;
      iss_left_q  <= iss_left_d;
      iss_count_q <= iss_count_d;
      merge_q     <= merge_d;
      iss_addr_q  <= iss_addr_d;
      stride_q    <= stride_d;
      rd_left_q   <= rd_left_d;
      fed_left_q  <= fed_left_d;
      raddr_q     <= raddr_d;
      inflight_q  <= inflight_d;
      count_q     <= count_d;
      err_q       <= err_d;
    end
  end

  assign busy_o       = (state_q != S_IDLE);
  assign stall_tok_o  = ((state_q == S_POP) && !pop_ok) || ((state_q == S_PUSH) && !push_ok);
  assign stall_mem_o  = ((state_q == S_EXEC) && skid_valid && !skid_ready) ||
                        ((state_q == S_DRAIN) && !wr_idle);
  assign insn_count_o = count_q;
  assign err_o        = err_q;

  // The range check before execution keeps every read inside the buffer.
  `TSR_ASSERT(chk_read_in_range, !re || 32'(raddr_q) < 32'(tsr_pkg::OUT_DEPTH), clk_i, rst_ni)
endmodule
