// tsr_load: the load stage. Executes LOAD of inp and wgt (isa/semantics.md):
// a 2-D strided DRAM region, padded on four sides, into consecutive on-chip
// rows from sram_base. Pad rows are zero, except for inp where every lane
// holds the sign-extended pad_value.
//
// Two halves, so DRAM reads of the next instruction overlap the writes of
// the current one (no per-instruction latency bubble):
// - The front decodes a command, takes its pop token, checks it, and issues
//   element-reader commands: one per DRAM row, or one for the whole region
//   when the rows are contiguous (x_stride == x_size), up to RdCmdDepth
//   commands ahead of the data. It hands the instruction to the back as soon
//   as the back is free (possibly while still issuing), and takes the next
//   command once both are done, so it runs at most one instruction ahead.
// - The back writes the padded rectangle with two walkers sharing the SRAM
//   write port: a data walker that places each element as it arrives
//   (priority) and a pad walker that fills the pad rows in the other cycles.
//   When both are done it pushes the token (in instruction order) and counts
//   the instruction.
// Two element readers (one per element size) share the DMA read port. Each
// reader command is logged (reader, beats) twice: the request log lets only
// the reader of the oldest command send requests, so data returns in command
// order, and the data log routes every returning beat to its reader.
// Readers of elements at least a bus beat wide have no buffer reservation
// (BufBeats = 0: requests are limited only by the AXI master's outstanding
// bursts, so the bus rate survives the DRAM latency). That is deadlock-free
// because the back takes every element of its instruction as it arrives and
// waits on nothing else, and the front requests data for the next
// instruction only when the back's current one cannot block on its push
// (no push flag, or the queue already has room: only this stage pushes it),
// so data waiting on the shared R channel is taken within a bounded time
// (at most the current instruction's remaining padding). Narrower elements
// keep the reservation (the back takes less than a beat per cycle; beats
// without reserved room would hold the R channel at that rate).
// An instruction whose rows would leave the buffer writes nothing and sets
// the sticky err_o when it completes (the golden model's EBOUNDS); its
// tokens are still handled so the pipeline does not hang.
`include "tsr_assert.svh"

module tsr_load #(
  parameter int BusBytes = tsr_pkg::BUS_BYTES,
  // Reader commands (DRAM rows) in flight: enough rows of a few beats to
  // cover the DRAM latency with the AXI master's outstanding bursts.
  parameter int RdCmdDepth = 16,
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
  input  logic [tsr_pkg::INSN_BITS-1:0] cmd_i,
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
  // Instruction field widths (the ISA field table, through tsr_pkg)
  localparam int MTW = tsr_pkg::MEM_MEM_TYPE_W;    // memory type
  localparam int SBW = tsr_pkg::MEM_SRAM_BASE_W;
  localparam int PW = tsr_pkg::MEM_Y_PAD0_W;
  localparam int PVW = tsr_pkg::MEM_PAD_VALUE_W;
  // Row lengths and counts: a 16-bit size plus two 4-bit pads.
  localparam int RW = tsr_pkg::MEM_X_SIZE_W + 1;
  // sram_base + row * rows, without overflow.
  localparam int TW = 2 * RW + 1;
  localparam int IB_SHIFT = $clog2(IB);
  localparam int WB_SHIFT = $clog2(WB);
  localparam int BBL = $clog2(BusBytes);
  localparam int IWID = tsr_pkg::INP_WIDTH;
  localparam int ILANES = IB * 8 / IWID;
  localparam int LCW = $clog2(RdCmdDepth + 1);

  // ================================================================ front
  typedef enum logic [1:0] {
    F_IDLE,   // waiting for a command
    F_POP,    // waiting for the pop token
    F_RUN     // issuing reader commands and/or waiting to hand over to the back
  } fstate_e;

  fstate_e f_state_q, f_state_d;

  // Latched instruction.
  logic           f_wgt_q, f_wgt_d;        // destination is wgt (else inp)
  logic           f_bad_q, f_bad_d;        // memory type other than inp/wgt
  logic           f_pop_q, f_pop_d, f_push_q, f_push_d;
  logic [SBW-1:0] f_base_q, f_base_d;
  logic [tsr_pkg::MEM_X_SIZE_W-1:0] f_xs_q, f_xs_d;
  logic [PVW-1:0] f_pv_q, f_pv_d;          // pad_value
  logic [RW-1:0]  f_row_q, f_row_d;        // x_pad0 + x_size + x_pad1
  logic [RW-1:0]  f_rows_q, f_rows_d;      // y_pad0 + y_size + y_pad1
  logic [RW-1:0]  f_xp0_q, f_xp0_d, f_xend_q, f_xend_d;  // data columns [x_pad0, x_end)
  logic [RW-1:0]  f_yp0_q, f_yp0_d, f_yend_q, f_yend_d;  // data rows [y_pad0, y_end)
  logic [RW-1:0]  f_dskip_q, f_dskip_d;    // x_pad1 + x_pad0 + 1: data row end -> next row start
  logic [TW-1:0]  f_doff_q, f_doff_d;      // y_pad0 * row + x_pad0: first data row
  logic [31:0]    f_ndata_q, f_ndata_d;    // y_size * x_size
  logic           f_pads_q, f_pads_d;      // any padding
  logic           f_exec_q, f_exec_d;      // writes rows (checks passed, something to write)
  logic           f_err_q, f_err_d;        // out-of-range or bad type
  logic           f_ovf_q, f_ovf_d;        // DRAM footprint beyond 32 address bits
  logic           c_ovf;
  logic           f_handed_q, f_handed_d;  // the back has this instruction

  // Reader command issuer.
  logic [15:0]    iss_left_q, iss_left_d;  // commands still to issue
  logic [31:0]    iss_count_q, iss_count_d;  // elements per command
  logic [31:0]    iss_addr_q, iss_addr_d;
  logic [31:0]    stride_q, stride_d;      // x_stride in bytes

  // Decoded command fields.
  logic [MTW-1:0] c_mem;
  logic [31:0]    c_dram;
  logic [tsr_pkg::MEM_Y_SIZE_W-1:0]   c_y_size;
  logic [tsr_pkg::MEM_X_SIZE_W-1:0]   c_x_size;
  logic [tsr_pkg::MEM_X_STRIDE_W-1:0] c_x_stride;
  logic [PW-1:0]  c_y_pad0, c_y_pad1, c_x_pad0, c_x_pad1;
  logic           c_wgt, c_pop, c_push;
  logic [SBW-1:0] c_sram_base;
  logic [RW-1:0]  c_row;

  assign c_mem      = tsr_pkg::mem_mem_type(cmd_i);
  assign c_dram     = tsr_pkg::mem_dram_base(cmd_i);
  assign c_y_size   = tsr_pkg::mem_y_size(cmd_i);
  assign c_x_size   = tsr_pkg::mem_x_size(cmd_i);
  assign c_x_stride = tsr_pkg::mem_x_stride(cmd_i);
  assign c_y_pad0   = tsr_pkg::mem_y_pad0(cmd_i);
  assign c_y_pad1   = tsr_pkg::mem_y_pad1(cmd_i);
  assign c_x_pad0   = tsr_pkg::mem_x_pad0(cmd_i);
  assign c_x_pad1   = tsr_pkg::mem_x_pad1(cmd_i);
  assign c_wgt      = (c_mem == MTW'(tsr_pkg::MEM_WGT));
  assign c_pop      = tsr_pkg::mem_pop_next(cmd_i);
  assign c_push     = tsr_pkg::mem_push_next(cmd_i);
  assign c_sram_base = tsr_pkg::mem_sram_base(cmd_i);
  // The padded box (tsr_pad_box: the one place its geometry is computed).
  logic [RW-1:0]  c_rows, c_x_lo, c_x_hi, c_y_lo, c_y_hi;
  tsr_pad_box u_box (
    .y_size_i (c_y_size),
    .x_size_i (c_x_size),
    .y_pad0_i (c_y_pad0),
    .y_pad1_i (c_y_pad1),
    .x_pad0_i (c_x_pad0),
    .x_pad1_i (c_x_pad1),
    .row_o    (c_row),
    .rows_o   (c_rows),
    .x_lo_o   (c_x_lo),
    .x_hi_o   (c_x_hi),
    .y_lo_o   (c_y_lo),
    .y_hi_o   (c_y_hi)
  );

  tsr_dram_span u_span (
    .dram_base_i (c_dram),
    .y_size_i    (c_y_size),
    .x_size_i    (c_x_size),
    .x_stride_i  (c_x_stride),
    .elem_log_i  (c_wgt ? 4'(WB_SHIFT) : 4'(IB_SHIFT)),
    .ovf_o       (c_ovf)
  );

  // ================================================================ back
  typedef enum logic [1:0] {
    B_IDLE,   // no instruction
    B_RUN,    // writing rows
    B_PUSH    // rows written: waiting for room to push
  } bstate_e;

  bstate_e b_state_q, b_state_d;
  logic            b_wgt_q, b_wgt_d, b_push_q, b_push_d, b_err_q, b_err_d;
  logic [PVW-1:0]  b_pv_q, b_pv_d;
  logic [RW-1:0]   b_row_q, b_row_d, b_rows_q, b_rows_d;
  logic [RW-1:0]   b_xp0_q, b_xp0_d, b_xend_q, b_xend_d, b_yp0_q, b_yp0_d, b_yend_q, b_yend_d;
  logic [RW-1:0]   b_xs_q, b_xs_d, b_dskip_q, b_dskip_d;
  // Data walker: elements left, column within the data row, SRAM row.
  logic [31:0]     d_left_q, d_left_d;
  logic [RW-1:0]   dx_q, dx_d;
  logic [IDXW-1:0] daddr_q, daddr_d;
  // Pad walker: position in the padded rectangle (never inside a data row).
  logic            p_done_q, p_done_d;
  logic [RW-1:0]   px_q, px_d, py_q, py_d;
  logic [IDXW-1:0] paddr_q, paddr_d;

  logic [31:0]     count_q, count_d;
  logic            err_q, err_d;

  // ================================================================ readers
  logic                inp_cmd_valid, inp_cmd_ready, wgt_cmd_valid, wgt_cmd_ready;
  logic                inp_req_valid, wgt_req_valid, inp_req_ready, wgt_req_ready;
  logic [31:0]         inp_req_addr, wgt_req_addr, inp_req_beats, wgt_req_beats;
  logic                inp_data_valid, wgt_data_valid, inp_data_ready, wgt_data_ready;
  logic                inp_elem_valid, inp_elem_ready, wgt_elem_valid, wgt_elem_ready;
  logic [IB*8-1:0]     inp_elem;
  logic [WB*8-1:0]     wgt_elem;

  tsr_dma_rd_elems #(
    .ElemBytes (IB),
    .BusBytes  (BusBytes),
    .BufBeats  ((IB < BusBytes) ? 32 : 0),
    .CmdDepth  (RdCmdDepth)
  ) u_inp_reader (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .cmd_valid_i     (inp_cmd_valid),
    .cmd_ready_o     (inp_cmd_ready),
    .cmd_addr_i      (iss_addr_q),
    .cmd_count_i     (iss_count_q),
    .rd_req_valid_o  (inp_req_valid),
    .rd_req_ready_i  (inp_req_ready),
    .rd_req_addr_o   (inp_req_addr),
    .rd_req_beats_o  (inp_req_beats),
    .rd_data_valid_i (inp_data_valid),
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
    .BusBytes  (BusBytes),
    .BufBeats  ((WB < BusBytes) ? 32 : 0),
    .CmdDepth  (RdCmdDepth)
  ) u_wgt_reader (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .cmd_valid_i     (wgt_cmd_valid),
    .cmd_ready_o     (wgt_cmd_ready),
    .cmd_addr_i      (iss_addr_q),
    .cmd_count_i     (iss_count_q),
    .rd_req_valid_o  (wgt_req_valid),
    .rd_req_ready_i  (wgt_req_ready),
    .rd_req_addr_o   (wgt_req_addr),
    .rd_req_beats_o  (wgt_req_beats),
    .rd_data_valid_i (wgt_data_valid),
    .rd_data_ready_o (wgt_data_ready),
    .rd_data_i       (rd_data_i),
    .elem_valid_o    (wgt_elem_valid),
    .elem_ready_i    (wgt_elem_ready),
    .elem_o          (wgt_elem),
    .busy_o          (),
    .stall_o         ()
  );

  // Bus beats of the reader command being issued (as the reader counts them).
  logic [31:0] inp_cmd_beats, wgt_cmd_beats, cmd_beats;
  if (IB >= BusBytes) begin : g_inp_beats
    assign inp_cmd_beats = iss_count_q << $clog2(IB / BusBytes);
  end else begin : g_inp_beats
    logic [32:0] span;
    assign span = {1'b0, iss_count_q} + 33'(iss_addr_q[BBL-1:IB_SHIFT]) + {1'b0, 32'(BusBytes / IB - 1)};
    assign inp_cmd_beats = 32'(span >> $clog2(BusBytes / IB));
  end
  if (WB >= BusBytes) begin : g_wgt_beats
    assign wgt_cmd_beats = iss_count_q << $clog2(WB / BusBytes);
  end else begin : g_wgt_beats
    logic [32:0] span;
    assign span = {1'b0, iss_count_q} + 33'(iss_addr_q[BBL-1:WB_SHIFT]) + {1'b0, 32'(BusBytes / WB - 1)};
    assign wgt_cmd_beats = 32'(span >> $clog2(BusBytes / WB));
  end
  assign cmd_beats = f_wgt_q ? wgt_cmd_beats : inp_cmd_beats;

  // Command logs: (reader is wgt, beats) per reader command, in issue order.
  logic        rlog_in_ready, rlog_valid, rlog_pop;
  logic        dlog_in_ready, dlog_valid, dlog_pop;
  logic [32:0] rlog_head, dlog_head;
  logic [LCW-1:0] rlog_count, dlog_count;
  logic        iss_valid, iss_ready, iss_fire, iss_allowed, hand;

  tsr_fifo #(.Width(33), .Depth(RdCmdDepth)) u_rlog (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (iss_fire),
    .in_ready_o  (rlog_in_ready),
    .in_data_i   ({f_wgt_q, cmd_beats}),
    .out_valid_o (rlog_valid),
    .out_ready_i (rlog_pop),
    .out_data_o  (rlog_head),
    .count_o     (rlog_count)
  );

  tsr_fifo #(.Width(33), .Depth(RdCmdDepth)) u_dlog (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (iss_fire),
    .in_ready_o  (dlog_in_ready),
    .in_data_i   ({f_wgt_q, cmd_beats}),
    .out_valid_o (dlog_valid),
    .out_ready_i (dlog_pop),
    .out_data_o  (dlog_head),
    .count_o     (dlog_count)
  );

  // Issuer: reads of an instruction not yet handed over wait until the
  // back's instruction cannot block on its push.
  assign iss_allowed   = f_handed_q || hand || !b_push_q || push_next_ready_i;
  assign iss_valid     = (f_state_q == F_RUN) && (iss_left_q != '0) && iss_allowed &&
                         rlog_in_ready && dlog_in_ready;
  assign inp_cmd_valid = iss_valid && !f_wgt_q;
  assign wgt_cmd_valid = iss_valid && f_wgt_q;
  assign iss_ready     = f_wgt_q ? wgt_cmd_ready : inp_cmd_ready;
  assign iss_fire      = iss_valid && iss_ready;

  // Requests: only the reader of the oldest logged command.
  logic        r_started_q, r_started_d, d_started_q, d_started_d;
  logic [31:0] r_left_q, r_left_d, r_left, d_beats_q, d_beats_d, d_beats;
  logic        r_sel, d_sel, req_fire, beat_fire;

  assign r_sel          = rlog_head[32];
  assign r_left         = r_started_q ? r_left_q : rlog_head[31:0];
  assign rd_req_valid_o = rlog_valid && (r_sel ? wgt_req_valid : inp_req_valid);
  assign rd_req_addr_o  = r_sel ? wgt_req_addr : inp_req_addr;
  assign rd_req_beats_o = r_sel ? wgt_req_beats : inp_req_beats;
  assign inp_req_ready  = rd_req_ready_i && rlog_valid && !r_sel;
  assign wgt_req_ready  = rd_req_ready_i && rlog_valid && r_sel;
  assign req_fire       = rd_req_valid_o && rd_req_ready_i;
  assign rlog_pop       = req_fire && (rd_req_beats_o == r_left);

  // Data: each beat goes to the reader of the oldest command still receiving.
  assign d_sel           = dlog_head[32];
  assign d_beats         = d_started_q ? d_beats_q : dlog_head[31:0];
  assign inp_data_valid  = rd_data_valid_i && dlog_valid && !d_sel;
  assign wgt_data_valid  = rd_data_valid_i && dlog_valid && d_sel;
  assign rd_data_ready_o = dlog_valid && (d_sel ? wgt_data_ready : inp_data_ready);
  assign beat_fire       = rd_data_valid_i && rd_data_ready_o;
  assign dlog_pop        = beat_fire && (d_beats == 32'd1);

  always_comb begin
    r_started_d = r_started_q;
    r_left_d    = r_left_q;
    d_started_d = d_started_q;
    d_beats_d   = d_beats_q;
    if (req_fire) begin
      r_started_d = !rlog_pop;
      r_left_d    = r_left - rd_req_beats_o;
    end
    if (beat_fire) begin
      d_started_d = !dlog_pop;
      d_beats_d   = d_beats - 32'd1;
    end
  end

  // ================================================================ back datapath
  logic b_elem_valid, data_take, p_is_data, pad_we, we;
  logic [IB*8-1:0] inp_pad_row;

  assign b_elem_valid   = b_wgt_q ? wgt_elem_valid : inp_elem_valid;
  assign data_take      = (b_state_q == B_RUN) && (d_left_q != '0) && b_elem_valid;
  assign inp_elem_ready = data_take && !b_wgt_q;
  assign wgt_elem_ready = data_take && b_wgt_q;
  // The pad walker stops at a data row's first element and jumps past it.
  assign p_is_data      = (py_q >= b_yp0_q) && (py_q < b_yend_q) && (px_q == b_xp0_q);
  assign pad_we         = (b_state_q == B_RUN) && !p_done_q && !p_is_data && !data_take;
  assign we             = data_take || pad_we;

  for (genvar l = 0; l < ILANES; l++) begin : g_pad_lane
    assign inp_pad_row[l*IWID +: IWID] = IWID'($signed(b_pv_q));
  end

  assign inp_we_o    = we && !b_wgt_q;
  assign wgt_we_o    = we && b_wgt_q;
  assign inp_waddr_o = data_take ? daddr_q[tsr_pkg::INP_IDX_BITS-1:0] : paddr_q[tsr_pkg::INP_IDX_BITS-1:0];
  assign wgt_waddr_o = data_take ? daddr_q[tsr_pkg::WGT_IDX_BITS-1:0] : paddr_q[tsr_pkg::WGT_IDX_BITS-1:0];
  assign inp_wdata_o = data_take ? inp_elem : inp_pad_row;
  assign wgt_wdata_o = data_take ? wgt_elem : '0;

  // ================================================================ control
  logic pop_ok, push_ok, b_free;
  logic [TW-1:0] span_end;
  logic range_err;

  // The instruction's rows [sram_base, sram_base + row*rows) must fit the buffer.
  assign span_end  = TW'(f_base_q) + TW'(f_row_q) * TW'(f_rows_q);
  assign range_err = f_wgt_q ? (span_end > TW'(tsr_pkg::WGT_DEPTH))
                             : (span_end > TW'(tsr_pkg::INP_DEPTH));

  assign pop_ok  = !f_pop_q || pop_next_valid_i;
  assign push_ok = !b_push_q || push_next_ready_i;
  assign b_free  = (b_state_q == B_IDLE) || ((b_state_q == B_PUSH) && push_ok);
  assign hand    = (f_state_q == F_RUN) && !f_handed_q && b_free;

  // Front.
  always_comb begin
    f_state_d   = f_state_q;
    f_wgt_d     = f_wgt_q;
    f_bad_d     = f_bad_q;
    f_pop_d     = f_pop_q;
    f_push_d    = f_push_q;
    f_base_d    = f_base_q;
    f_xs_d      = f_xs_q;
    f_pv_d      = f_pv_q;
    f_row_d     = f_row_q;
    f_rows_d    = f_rows_q;
    f_xp0_d     = f_xp0_q;
    f_xend_d    = f_xend_q;
    f_yp0_d     = f_yp0_q;
    f_yend_d    = f_yend_q;
    f_dskip_d   = f_dskip_q;
    f_doff_d    = f_doff_q;
    f_ndata_d   = f_ndata_q;
    f_pads_d    = f_pads_q;
    f_exec_d    = f_exec_q;
    f_err_d     = f_err_q;
    f_ovf_d     = f_ovf_q;
    f_handed_d  = f_handed_q;
    iss_left_d  = iss_left_q;
    iss_count_d = iss_count_q;
    iss_addr_d  = iss_addr_q;
    stride_d    = stride_q;
    pop_next_o  = 1'b0;
    cmd_ready_o = (f_state_q == F_IDLE);

    case (f_state_q)
      F_IDLE: begin
        if (cmd_valid_i) begin
          f_wgt_d   = c_wgt;
          f_bad_d   = !c_wgt && (c_mem != MTW'(tsr_pkg::MEM_INP));
          f_ovf_d   = c_ovf;
          f_pop_d   = c_pop;
          f_push_d  = c_push;
          f_base_d  = c_sram_base;
          f_xs_d    = c_x_size;
          // pad_value applies to inp only (the verifier requires 0 elsewhere).
          f_pv_d    = c_wgt ? '0 : tsr_pkg::mem_pad_value(cmd_i);
          f_row_d   = c_row;
          f_rows_d  = c_rows;
          f_xp0_d   = c_x_lo;
          f_xend_d  = c_x_hi;
          f_yp0_d   = c_y_lo;
          f_yend_d  = c_y_hi;
          f_dskip_d = RW'(c_x_pad0) + RW'(c_x_pad1) + RW'(1);
          f_doff_d  = TW'(c_y_pad0) * TW'(c_row) + TW'(c_x_pad0);
          f_ndata_d = 32'(c_y_size) * 32'(c_x_size);
          f_pads_d  = (c_y_pad0 != '0) || (c_y_pad1 != '0) || (c_x_pad0 != '0) || (c_x_pad1 != '0);
          // Contiguous rows: one reader command streams all of them (the
          // back places elements by position, so padding is unaffected).
          if (c_x_stride == c_x_size) begin
            iss_left_d  = {15'd0, c_y_size != '0};
            iss_count_d = f_ndata_d;
          end else begin
            iss_left_d  = c_y_size;
            iss_count_d = {16'd0, c_x_size};
          end
          // Element sizes are powers of two (the config stores their logs).
          iss_addr_d = c_wgt ? (c_dram << WB_SHIFT) : (c_dram << IB_SHIFT);
          stride_d   = c_wgt ? ({16'd0, c_x_stride} << WB_SHIFT)
                             : ({16'd0, c_x_stride} << IB_SHIFT);
          f_state_d  = F_POP;
        end
      end
      F_POP: begin
        if (pop_ok) begin
          pop_next_o = f_pop_q;
          // Same checks, in the same order, as the golden model.
          f_err_d    = (f_xs_q != '0) && (f_bad_q || range_err || f_ovf_q);
          f_exec_d   = (f_xs_q != '0) && !f_bad_q && !range_err && !f_ovf_q && (f_rows_q != '0);
          if (!f_exec_d) iss_left_d = '0;
          f_handed_d = 1'b0;
          f_state_d  = F_RUN;
        end
      end
      F_RUN: begin
        if (iss_fire) begin
          iss_left_d = iss_left_q - 16'd1;
          iss_addr_d = iss_addr_q + stride_q;
        end
        if (hand) f_handed_d = 1'b1;
        if (iss_left_d == '0 && f_handed_d) f_state_d = F_IDLE;
      end
      default: f_state_d = F_IDLE;
    endcase
  end

  // Back.
  always_comb begin
    b_state_d = b_state_q;
    b_wgt_d   = b_wgt_q;
    b_push_d  = b_push_q;
    b_err_d   = b_err_q;
    b_pv_d    = b_pv_q;
    b_row_d   = b_row_q;
    b_rows_d  = b_rows_q;
    b_xp0_d   = b_xp0_q;
    b_xend_d  = b_xend_q;
    b_yp0_d   = b_yp0_q;
    b_yend_d  = b_yend_q;
    b_xs_d    = b_xs_q;
    b_dskip_d = b_dskip_q;
    d_left_d  = d_left_q;
    dx_d      = dx_q;
    daddr_d   = daddr_q;
    p_done_d  = p_done_q;
    px_d      = px_q;
    py_d      = py_q;
    paddr_d   = paddr_q;
    count_d   = count_q;
    err_d     = err_q;
    push_next_o = 1'b0;

    // Data walker.
    if (data_take) begin
      d_left_d = d_left_q - 32'd1;
      if (dx_q == b_xs_q - RW'(1)) begin
        dx_d    = '0;
        daddr_d = daddr_q + IDXW'(b_dskip_q);
      end else begin
        dx_d    = dx_q + RW'(1);
        daddr_d = daddr_q + IDXW'(1);
      end
    end
    // Pad walker: writes one pad row per free cycle, jumps over data.
    if (b_state_q == B_RUN && !p_done_q) begin
      if (p_is_data) begin
        paddr_d = paddr_q + IDXW'(b_xs_q);
        if (b_xend_q == b_row_q) begin
          px_d = '0;
          py_d = py_q + RW'(1);
        end else begin
          px_d = b_xend_q;
        end
      end else if (pad_we) begin
        paddr_d = paddr_q + IDXW'(1);
        if (px_q == b_row_q - RW'(1)) begin
          px_d = '0;
          py_d = py_q + RW'(1);
        end else begin
          px_d = px_q + RW'(1);
        end
      end
      p_done_d = (py_d == b_rows_q);
    end

    case (b_state_q)
      B_RUN: begin
        if (d_left_d == '0 && p_done_d) b_state_d = B_PUSH;
      end
      B_PUSH: begin
        if (push_ok) begin
          push_next_o = b_push_q;
          count_d     = count_q + 32'd1;
          err_d       = err_q || b_err_q;
          b_state_d   = B_IDLE;
        end
      end
      default: ;
    endcase

    if (hand) begin
      b_wgt_d   = f_wgt_q;
      b_push_d  = f_push_q;
      b_err_d   = f_err_q;
      b_pv_d    = f_pv_q;
      b_row_d   = f_row_q;
      b_rows_d  = f_rows_q;
      b_xp0_d   = f_xp0_q;
      b_xend_d  = f_xend_q;
      b_yp0_d   = f_yp0_q;
      b_yend_d  = f_yend_q;
      b_xs_d    = RW'(f_xs_q);
      b_dskip_d = f_dskip_q;
      d_left_d  = f_exec_q ? f_ndata_q : '0;
      dx_d      = '0;
      daddr_d   = IDXW'(f_base_q) + IDXW'(f_doff_q);
      p_done_d  = !f_exec_q || !f_pads_q;
      px_d      = '0;
      py_d      = '0;
      paddr_d   = IDXW'(f_base_q);
      if (f_exec_q) b_state_d = B_RUN;
      else b_state_d = B_PUSH;
    end
  end

  logic unused;
  assign unused = ^{rlog_count, dlog_count};

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      f_state_q   <= F_IDLE;
      f_wgt_q     <= 1'b0;
      f_bad_q     <= 1'b0;
      f_pop_q     <= 1'b0;
      f_push_q    <= 1'b0;
      f_base_q    <= '0;
      f_xs_q      <= '0;
      f_pv_q      <= '0;
      f_row_q     <= '0;
      f_rows_q    <= '0;
      f_xp0_q     <= '0;
      f_xend_q    <= '0;
      f_yp0_q     <= '0;
      f_yend_q    <= '0;
      f_dskip_q   <= '0;
      f_doff_q    <= '0;
      f_ndata_q   <= '0;
      f_pads_q    <= 1'b0;
      f_exec_q    <= 1'b0;
      f_err_q     <= 1'b0;
      f_ovf_q     <= 1'b0;
      f_handed_q  <= 1'b0;
      iss_left_q  <= '0;
      iss_count_q <= '0;
      iss_addr_q  <= '0;
      stride_q    <= '0;
      r_started_q <= 1'b0;
      r_left_q    <= '0;
      d_started_q <= 1'b0;
      d_beats_q   <= '0;
      b_state_q   <= B_IDLE;
      b_wgt_q     <= 1'b0;
      b_push_q    <= 1'b0;
      b_err_q     <= 1'b0;
      b_pv_q      <= '0;
      b_row_q     <= '0;
      b_rows_q    <= '0;
      b_xp0_q     <= '0;
      b_xend_q    <= '0;
      b_yp0_q     <= '0;
      b_yend_q    <= '0;
      b_xs_q      <= '0;
      b_dskip_q   <= '0;
      d_left_q    <= '0;
      dx_q        <= '0;
      daddr_q     <= '0;
      p_done_q    <= 1'b1;
      px_q        <= '0;
      py_q        <= '0;
      paddr_q     <= '0;
      count_q     <= '0;
      err_q       <= 1'b0;
    end else begin
      f_state_q   <= f_state_d;
      f_wgt_q     <= f_wgt_d;
      f_bad_q     <= f_bad_d;
      f_pop_q     <= f_pop_d;
      f_push_q    <= f_push_d;
      f_base_q    <= f_base_d;
      f_xs_q      <= f_xs_d;
      f_pv_q      <= f_pv_d;
      f_row_q     <= f_row_d;
      f_rows_q    <= f_rows_d;
      f_xp0_q     <= f_xp0_d;
      f_xend_q    <= f_xend_d;
      f_yp0_q     <= f_yp0_d;
      f_yend_q    <= f_yend_d;
      f_dskip_q   <= f_dskip_d;
      f_doff_q    <= f_doff_d;
      f_ndata_q   <= f_ndata_d;
      f_pads_q    <= f_pads_d;
      f_exec_q    <= f_exec_d;
      f_err_q     <= f_err_d;
      f_ovf_q     <= f_ovf_d;
      f_handed_q  <= f_handed_d;
      iss_left_q  <= iss_left_d;
      iss_count_q <= iss_count_d;
      iss_addr_q  <= iss_addr_d;
      stride_q    <= stride_d;
      r_started_q <= r_started_d;
      r_left_q    <= r_left_d;
      d_started_q <= d_started_d;
      d_beats_q   <= d_beats_d;
      b_state_q   <= b_state_d;
      b_wgt_q     <= b_wgt_d;
      b_push_q    <= b_push_d;
      b_err_q     <= b_err_d;
      b_pv_q      <= b_pv_d;
      b_row_q     <= b_row_d;
      b_rows_q    <= b_rows_d;
      b_xp0_q     <= b_xp0_d;
      b_xend_q    <= b_xend_d;
      b_yp0_q     <= b_yp0_d;
      b_yend_q    <= b_yend_d;
      b_xs_q      <= b_xs_d;
      b_dskip_q   <= b_dskip_d;
      d_left_q    <= d_left_d;
      dx_q        <= dx_d;
      daddr_q     <= daddr_d;
      p_done_q    <= p_done_d;
      px_q        <= px_d;
      py_q        <= py_d;
      paddr_q     <= paddr_d;
      count_q     <= count_d;
      err_q       <= err_d;
    end
  end

  assign busy_o       = (f_state_q != F_IDLE) || (b_state_q != B_IDLE);
  assign stall_tok_o  = ((f_state_q == F_POP) && !pop_ok) || ((b_state_q == B_PUSH) && !push_ok);
  assign stall_mem_o  = (b_state_q == B_RUN) && (d_left_q != '0) && !b_elem_valid && !pad_we;
  assign insn_count_o = count_q;
  assign err_o        = err_q;

  // The range check before execution keeps every write inside the buffer.
  `TSR_ASSERT(chk_write_in_range, !we || {1'b0, (data_take ? daddr_q : paddr_q)} <
              (b_wgt_q ? (IDXW+1)'(tsr_pkg::WGT_DEPTH) : (IDXW+1)'(tsr_pkg::INP_DEPTH)), clk_i, rst_ni)
endmodule
