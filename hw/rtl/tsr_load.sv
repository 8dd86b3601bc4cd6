// tsr_load: the load stage. Executes LOAD of inp and wgt (isa/semantics.md):
// a 2-D strided DRAM region, zero-padded on four sides, into consecutive
// on-chip rows from sram_base. Two element readers (one per element size)
// share the stage's DMA read port; only the one of the current instruction
// is active, and it is drained before the next instruction starts, so the
// port is a plain mux. A command issuer queues one reader command per DRAM
// row ahead of the data, so the port stays busy across rows, while the row
// writer walks the padded rectangle: padding at one row per cycle, data at
// the rate elements arrive. An instruction whose rows would leave the buffer
// writes nothing and sets the sticky err_o (the golden model's EBOUNDS);
// its tokens are still handled so the pipeline does not hang.
module tsr_load #(
  parameter int BusBytes = tsr_pkg::BUS_BYTES,
  localparam int IB = tsr_pkg::INP_BYTES,
  localparam int WB = tsr_pkg::WGT_BYTES,
  localparam int IDXW = (tsr_pkg::INP_IDX_BITS > tsr_pkg::WGT_IDX_BITS) ?
                        tsr_pkg::INP_IDX_BITS : tsr_pkg::WGT_IDX_BITS
) (
  input  logic         clk_i,
  input  logic         rst_ni,
  // command (LOAD of inp or wgt)
  input  logic         cmd_valid_i,
  output logic         cmd_ready_o,
  input  logic [127:0] cmd_i,
  // tokens
  input  logic         pop_next_valid_i,   // compute -> load
  output logic         pop_next_o,
  input  logic         push_next_ready_i,  // load -> compute
  output logic         push_next_o,
  // DMA read port
  output logic         rd_req_valid_o,
  input  logic         rd_req_ready_i,
  output logic [31:0]  rd_req_addr_o,
  output logic [31:0]  rd_req_beats_o,
  input  logic         rd_data_valid_i,
  output logic         rd_data_ready_o,
  input  logic [BusBytes*8-1:0] rd_data_i,
  // SRAM write ports
  output logic         inp_we_o,
  output logic [tsr_pkg::INP_IDX_BITS-1:0] inp_waddr_o,
  output logic [IB*8-1:0] inp_wdata_o,
  output logic         wgt_we_o,
  output logic [tsr_pkg::WGT_IDX_BITS-1:0] wgt_waddr_o,
  output logic [WB*8-1:0] wgt_wdata_o,
  // status
  output logic         busy_o,
  output logic         stall_tok_o,
  output logic         stall_mem_o,
  output logic [31:0]  insn_count_o,
  output logic         err_o
);
  localparam int SBW = tsr_pkg::MEM_SRAM_BASE_W;
  localparam int PW = tsr_pkg::MEM_Y_PAD0_W;
  // Row lengths and counts: a 16-bit size plus two 4-bit pads.
  localparam int RW = tsr_pkg::MEM_X_SIZE_W + 1;
  // sram_base + row * rows, without overflow.
  localparam int TW = 2 * RW + 1;
  localparam int IB_SHIFT = $clog2(IB);
  localparam int WB_SHIFT = $clog2(WB);

  typedef enum logic [1:0] {
    S_IDLE,   // waiting for a command
    S_POP,    // waiting for the pop token
    S_EXEC,   // transferring
    S_PUSH    // waiting for room to push
  } state_e;

  state_e state_q, state_d;

  // Latched instruction.
  logic           sel_wgt_q, sel_wgt_d;    // destination is wgt (else inp)
  logic           bad_type_q, bad_type_d;  // memory type other than inp/wgt
  logic           pop_q, pop_d, push_q, push_d;
  logic [SBW-1:0] sram_base_q, sram_base_d;
  logic [15:0]    x_size_q, x_size_d;
  logic [PW-1:0]  y_pad0_q, y_pad0_d, x_pad0_q, x_pad0_d;
  logic [RW-1:0]  row_q, row_d;            // x_pad0 + x_size + x_pad1
  logic [RW-1:0]  rows_q, rows_d;          // y_pad0 + y_size + y_pad1
  logic [RW-1:0]  x_end_q, x_end_d;        // x_pad0 + x_size
  logic [RW-1:0]  y_end_q, y_end_d;        // y_pad0 + y_size

  // Reader command issuer: one command per DRAM row.
  logic [15:0]    iss_left_q, iss_left_d;
  logic [31:0]    iss_addr_q, iss_addr_d;
  logic [31:0]    stride_q, stride_d;      // x_stride in bytes

  // Row writer position.
  logic [RW-1:0]  wx_q, wx_d, wy_q, wy_d;
  logic [IDXW-1:0] waddr_q, waddr_d;

  logic [31:0]    count_q, count_d;
  logic           err_q, err_d;

  // Decoded command fields.
  logic [2:0]     c_mem;
  logic [31:0]    c_dram;
  logic [15:0]    c_y_size, c_x_size, c_x_stride;
  logic [PW-1:0]  c_y_pad0, c_y_pad1, c_x_pad0, c_x_pad1;
  logic           c_wgt, c_pop, c_push;
  logic [SBW-1:0] c_sram_base;

  assign c_mem      = cmd_i[tsr_pkg::MEM_MEM_TYPE_LSB +: tsr_pkg::MEM_MEM_TYPE_W];
  assign c_dram     = cmd_i[tsr_pkg::MEM_DRAM_BASE_LSB +: tsr_pkg::MEM_DRAM_BASE_W];
  assign c_y_size   = cmd_i[tsr_pkg::MEM_Y_SIZE_LSB +: tsr_pkg::MEM_Y_SIZE_W];
  assign c_x_size   = cmd_i[tsr_pkg::MEM_X_SIZE_LSB +: tsr_pkg::MEM_X_SIZE_W];
  assign c_x_stride = cmd_i[tsr_pkg::MEM_X_STRIDE_LSB +: tsr_pkg::MEM_X_STRIDE_W];
  assign c_y_pad0   = cmd_i[tsr_pkg::MEM_Y_PAD0_LSB +: tsr_pkg::MEM_Y_PAD0_W];
  assign c_y_pad1   = cmd_i[tsr_pkg::MEM_Y_PAD1_LSB +: tsr_pkg::MEM_Y_PAD1_W];
  assign c_x_pad0   = cmd_i[tsr_pkg::MEM_X_PAD0_LSB +: tsr_pkg::MEM_X_PAD0_W];
  assign c_x_pad1   = cmd_i[tsr_pkg::MEM_X_PAD1_LSB +: tsr_pkg::MEM_X_PAD1_W];
  assign c_wgt      = (c_mem == 3'(tsr_pkg::MEM_WGT));
  assign c_pop      = cmd_i[tsr_pkg::MEM_POP_NEXT_LSB];
  assign c_push     = cmd_i[tsr_pkg::MEM_PUSH_NEXT_LSB];
  assign c_sram_base = cmd_i[tsr_pkg::MEM_SRAM_BASE_LSB +: SBW];

  // Element readers and the port mux.
  logic                inp_cmd_valid, inp_cmd_ready, wgt_cmd_valid, wgt_cmd_ready;
  logic                inp_req_valid, wgt_req_valid;
  logic [31:0]         inp_req_addr, wgt_req_addr, inp_req_beats, wgt_req_beats;
  logic                inp_data_ready, wgt_data_ready;
  logic                inp_elem_valid, inp_elem_ready, wgt_elem_valid, wgt_elem_ready;
  logic [IB*8-1:0]     inp_elem;
  logic [WB*8-1:0]     wgt_elem;
  logic                iss_valid, iss_ready;
  logic                elem_valid;

  tsr_dma_rd_elems #(
    .ElemBytes (IB),
    .BusBytes  (BusBytes)
  ) u_inp_reader (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .cmd_valid_i     (inp_cmd_valid),
    .cmd_ready_o     (inp_cmd_ready),
    .cmd_addr_i      (iss_addr_q),
    .cmd_count_i     ({16'd0, x_size_q}),
    .rd_req_valid_o  (inp_req_valid),
    .rd_req_ready_i  (rd_req_ready_i && !sel_wgt_q),
    .rd_req_addr_o   (inp_req_addr),
    .rd_req_beats_o  (inp_req_beats),
    .rd_data_valid_i (rd_data_valid_i && !sel_wgt_q),
    .rd_data_ready_o (inp_data_ready),
    .rd_data_i       (rd_data_i),
    .elem_valid_o    (inp_elem_valid),
    .elem_ready_i    (inp_elem_ready),
    .elem_o          (inp_elem),
    .busy_o          (),
    .stall_o         ()
  );

  tsr_dma_rd_elems #(
    .ElemBytes (WB),
    .BusBytes  (BusBytes)
  ) u_wgt_reader (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .cmd_valid_i     (wgt_cmd_valid),
    .cmd_ready_o     (wgt_cmd_ready),
    .cmd_addr_i      (iss_addr_q),
    .cmd_count_i     ({16'd0, x_size_q}),
    .rd_req_valid_o  (wgt_req_valid),
    .rd_req_ready_i  (rd_req_ready_i && sel_wgt_q),
    .rd_req_addr_o   (wgt_req_addr),
    .rd_req_beats_o  (wgt_req_beats),
    .rd_data_valid_i (rd_data_valid_i && sel_wgt_q),
    .rd_data_ready_o (wgt_data_ready),
    .rd_data_i       (rd_data_i),
    .elem_valid_o    (wgt_elem_valid),
    .elem_ready_i    (wgt_elem_ready),
    .elem_o          (wgt_elem),
    .busy_o          (),
    .stall_o         ()
  );

  assign rd_req_valid_o  = sel_wgt_q ? wgt_req_valid : inp_req_valid;
  assign rd_req_addr_o   = sel_wgt_q ? wgt_req_addr : inp_req_addr;
  assign rd_req_beats_o  = sel_wgt_q ? wgt_req_beats : inp_req_beats;
  assign rd_data_ready_o = sel_wgt_q ? wgt_data_ready : inp_data_ready;

  // Issuer handshake.
  assign iss_valid     = (state_q == S_EXEC) && (iss_left_q != '0);
  assign inp_cmd_valid = iss_valid && !sel_wgt_q;
  assign wgt_cmd_valid = iss_valid && sel_wgt_q;
  assign iss_ready     = sel_wgt_q ? wgt_cmd_ready : inp_cmd_ready;

  // Row writer.
  logic pad, take, we, last;
  logic pop_ok, push_ok;
  logic [TW-1:0] span_end;
  logic range_err;

  assign elem_valid = sel_wgt_q ? wgt_elem_valid : inp_elem_valid;
  assign pad  = (wy_q < RW'(y_pad0_q)) || (wy_q >= y_end_q) ||
                (wx_q < RW'(x_pad0_q)) || (wx_q >= x_end_q);
  assign take = (state_q == S_EXEC) && !pad;
  assign inp_elem_ready = take && !sel_wgt_q;
  assign wgt_elem_ready = take && sel_wgt_q;
  assign we   = (state_q == S_EXEC) && (pad || elem_valid);
  assign last = (wx_q == row_q - RW'(1)) && (wy_q == rows_q - RW'(1));

  assign inp_we_o    = we && !sel_wgt_q;
  assign wgt_we_o    = we && sel_wgt_q;
  assign inp_waddr_o = waddr_q[tsr_pkg::INP_IDX_BITS-1:0];
  assign wgt_waddr_o = waddr_q[tsr_pkg::WGT_IDX_BITS-1:0];
  assign inp_wdata_o = pad ? '0 : inp_elem;
  assign wgt_wdata_o = pad ? '0 : wgt_elem;

  // The instruction's rows [sram_base, sram_base + row*rows) must fit the buffer.
  assign span_end  = TW'(sram_base_q) + TW'(row_q) * TW'(rows_q);
  assign range_err = sel_wgt_q ? (span_end > TW'(tsr_pkg::WGT_DEPTH))
                               : (span_end > TW'(tsr_pkg::INP_DEPTH));

  assign pop_ok  = !pop_q || pop_next_valid_i;
  assign push_ok = !push_q || push_next_ready_i;

  always_comb begin
    state_d     = state_q;
    sel_wgt_d   = sel_wgt_q;
    bad_type_d  = bad_type_q;
    pop_d       = pop_q;
    push_d      = push_q;
    sram_base_d = sram_base_q;
    x_size_d    = x_size_q;
    y_pad0_d    = y_pad0_q;
    x_pad0_d    = x_pad0_q;
    row_d       = row_q;
    rows_d      = rows_q;
    x_end_d     = x_end_q;
    y_end_d     = y_end_q;
    iss_left_d  = iss_left_q;
    iss_addr_d  = iss_addr_q;
    stride_d    = stride_q;
    wx_d        = wx_q;
    wy_d        = wy_q;
    waddr_d     = waddr_q;
    count_d     = count_q;
    err_d       = err_q;
    pop_next_o  = 1'b0;
    push_next_o = 1'b0;
    cmd_ready_o = (state_q == S_IDLE);

    case (state_q)
      S_IDLE: begin
        if (cmd_valid_i) begin
          sel_wgt_d   = c_wgt;
          bad_type_d  = !c_wgt && (c_mem != 3'(tsr_pkg::MEM_INP));
          pop_d       = c_pop;
          push_d      = c_push;
          sram_base_d = c_sram_base;
          x_size_d    = c_x_size;
          y_pad0_d    = c_y_pad0;
          x_pad0_d    = c_x_pad0;
          row_d       = RW'(c_x_pad0) + RW'(c_x_size) + RW'(c_x_pad1);
          rows_d      = RW'(c_y_pad0) + RW'(c_y_size) + RW'(c_y_pad1);
          x_end_d     = RW'(c_x_pad0) + RW'(c_x_size);
          y_end_d     = RW'(c_y_pad0) + RW'(c_y_size);
          iss_left_d  = c_y_size;
          // Element sizes are powers of two (the config stores their logs).
          iss_addr_d  = c_wgt ? (c_dram << WB_SHIFT) : (c_dram << IB_SHIFT);
          stride_d    = c_wgt ? ({16'd0, c_x_stride} << WB_SHIFT)
                              : ({16'd0, c_x_stride} << IB_SHIFT);
          wx_d        = '0;
          wy_d        = '0;
          state_d     = S_POP;
        end
      end
      S_POP: begin
        if (pop_ok) begin
          pop_next_o = pop_q;
          // Same checks, in the same order, as the golden model.
          waddr_d = IDXW'(sram_base_q);
          if (x_size_q == '0) begin
            state_d = S_PUSH;
          end else if (bad_type_q || range_err) begin
            err_d   = 1'b1;
            state_d = S_PUSH;
          end else if (rows_q == '0) begin
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
        if (we) begin
          waddr_d = waddr_q + IDXW'(1);
          if (wx_q == row_q - RW'(1)) begin
            wx_d = '0;
            wy_d = wy_q + RW'(1);
          end else begin
            wx_d = wx_q + RW'(1);
          end
          if (last) state_d = S_PUSH;
        end
      end
      S_PUSH: begin
        if (push_ok) begin
          push_next_o = push_q;
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
      sel_wgt_q   <= 1'b0;
      bad_type_q  <= 1'b0;
      pop_q       <= 1'b0;
      push_q      <= 1'b0;
      sram_base_q <= '0;
      x_size_q    <= '0;
      y_pad0_q    <= '0;
      x_pad0_q    <= '0;
      row_q       <= '0;
      rows_q      <= '0;
      x_end_q     <= '0;
      y_end_q     <= '0;
      iss_left_q  <= '0;
      iss_addr_q  <= '0;
      stride_q    <= '0;
      wx_q        <= '0;
      wy_q        <= '0;
      waddr_q     <= '0;
      count_q     <= '0;
      err_q       <= 1'b0;
    end else begin
      state_q     <= state_d;
      sel_wgt_q   <= sel_wgt_d;
      bad_type_q  <= bad_type_d;
      pop_q       <= pop_d;
      push_q      <= push_d;
      sram_base_q <= sram_base_d;
      x_size_q    <= x_size_d;
      y_pad0_q    <= y_pad0_d;
      x_pad0_q    <= x_pad0_d;
      row_q       <= row_d;
      rows_q      <= rows_d;
      x_end_q     <= x_end_d;
      y_end_q     <= y_end_d;
      iss_left_q  <= iss_left_d;
      iss_addr_q  <= iss_addr_d;
      stride_q    <= stride_d;
      wx_q        <= wx_d;
      wy_q        <= wy_d;
      waddr_q     <= waddr_d;
      count_q     <= count_d;
      err_q       <= err_d;
    end
  end

  assign busy_o       = (state_q != S_IDLE);
  assign stall_tok_o  = ((state_q == S_POP) && !pop_ok) || ((state_q == S_PUSH) && !push_ok);
  assign stall_mem_o  = (state_q == S_EXEC) && !pad && !elem_valid;
  assign insn_count_o = count_q;
  assign err_o        = err_q;

`ifndef SYNTHESIS
  // The range check before execution keeps every write inside the buffer.
  always @(posedge clk_i) begin
    if (rst_ni && we) begin
      assert ({1'b0, waddr_q} < (sel_wgt_q ? (IDXW+1)'(tsr_pkg::WGT_DEPTH) : (IDXW+1)'(tsr_pkg::INP_DEPTH)))
        else $error("tsr_load: SRAM write out of range");
    end
  end
`endif
endmodule
