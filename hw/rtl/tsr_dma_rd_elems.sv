// tsr_dma_rd_elems: reads `count` elements of ElemBytes bytes starting at a
// byte address through one DMA read port and streams them out in address
// order. Elements narrower than the bus are extracted from beats (first one
// at byte offset addr % BusBytes); wider ones are gathered from
// ElemBytes/BusBytes beats. Commands queue (CmdDepth deep) so the request for
// the next command goes out while data of earlier ones still streams.
//
// Deadlock avoidance: with BufBeats > 0 (default) every request is cut into
// chunks of at most 16 beats (aligned to 16-beat blocks) and a chunk is only
// requested when the local data buffer has room reserved for all of it, so
// rd_data_ready_o is never low for data that was requested. The AXI master
// shares one R channel between ports and only takes a beat when its port is
// ready: a port whose element consumer waits on another port's progress
// (fetch waiting for a stage that waits for its own DRAM data) would
// otherwise block the R channel for everybody. The reservation caps the
// rate at about BufBeats beats per DRAM round trip (32 beats per ~51 cycles
// at 32 cycles of latency). BufBeats = 0 turns the reservation off (one
// request per command, unlimited look-ahead, 2-beat buffer: full bus rate);
// use it only when the element consumer takes elements as they arrive and
// never waits on other DMA traffic, with elements at least a beat wide.
`include "tsr_assert.svh"

module tsr_dma_rd_elems #(
  parameter int ElemBytes = 4,
  parameter int BusBytes  = tsr_pkg::BUS_BYTES,
  parameter int BufBeats  = 32,
  parameter int CmdDepth  = 4
) (
  input  logic                   clk_i,
  input  logic                   rst_ni,
  // command
  input  logic                   cmd_valid_i,
  output logic                   cmd_ready_o,
  input  logic [31:0]            cmd_addr_i,
  input  logic [31:0]            cmd_count_i,
  // DMA read port
  output logic                   rd_req_valid_o,
  input  logic                   rd_req_ready_i,
  output logic [31:0]            rd_req_addr_o,
  output logic [31:0]            rd_req_beats_o,
  input  logic                   rd_data_valid_i,
  output logic                   rd_data_ready_o,
  input  logic [BusBytes*8-1:0]  rd_data_i,
  // element stream
  output logic                   elem_valid_o,
  input  logic                   elem_ready_i,
  output logic [ElemBytes*8-1:0] elem_o,
  // status
  output logic                   busy_o,
  output logic                   stall_o
);
  localparam int EW    = ElemBytes * 8;
  localparam int BW    = BusBytes * 8;
  localparam int BBL   = $clog2(BusBytes);
  localparam bit SMALL = (ElemBytes < BusBytes);
  localparam int EPB   = SMALL ? BusBytes / ElemBytes : 1;   // elements per beat
  localparam int EPBL  = $clog2(EPB);
  localparam int SW    = (EPBL > 0) ? EPBL : 1;               // slot index width
  localparam int BPE   = SMALL ? 1 : ElemBytes / BusBytes;   // beats per element
  localparam int BPEL  = $clog2(BPE);
  localparam int BCW   = (BPEL > 0) ? BPEL : 1;
  localparam int DDEPTH = (BufBeats > 2) ? BufBeats : 2;
  localparam int CRW   = $clog2(DDEPTH + 1);

  // ---------------------------------------------------------------- command
  logic        cmdq_in_ready, infoq_in_ready, cmd_fire;
  logic [31:0] cmd_beat_addr, cmd_beats;
  logic [SW-1:0] cmd_off;

  assign cmd_ready_o   = cmdq_in_ready && infoq_in_ready;
  assign cmd_fire      = cmd_valid_i && cmd_ready_o;

  // The beats the command covers (tsr_dma_beats: the read and the write side agree).
  tsr_dma_beats #(.ElemBytes(ElemBytes), .BusBytes(BusBytes)) u_beats (
    .addr_i      (cmd_addr_i),
    .count_i     (cmd_count_i),
    .beat_addr_o (cmd_beat_addr),
    .beats_o     (cmd_beats),
    .off_o       (cmd_off)
  );

  // Request side works on the head of cmdq; the data side on the cursor's head command.
  logic        cmdq_valid, cmdq_pop;
  logic [$clog2(CmdDepth + 1)-1:0] cmdq_count, infoq_count;
  logic [$clog2(DDEPTH + 1)-1:0]   dataq_count;
  logic [63:0] cmdq_head;
  tsr_fifo #(.Width(64), .Depth(CmdDepth)) u_cmdq (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (cmd_fire),
    .in_ready_o  (cmdq_in_ready),
    .in_data_i   ({cmd_beat_addr, cmd_beats}),
    .out_valid_o (cmdq_valid),
    .out_ready_i (cmdq_pop),
    .out_data_o  (cmdq_head),
    .count_o     (cmdq_count)
  );

  // The accepted commands' elements: their queue and the cursor over its
  // head (tsr_dma_cursor; the step that takes a command's last element
  // pops it).
  logic          info_valid, last_elem, elem_fire;
  logic [SW-1:0] slot;
  tsr_dma_cursor #(.SlotW(SW), .Depth(CmdDepth)) u_cursor (
    .clk_i   (clk_i),
    .rst_ni  (rst_ni),
    .push_i  (cmd_fire),
    .ready_o (infoq_in_ready),
    .slot_i  (cmd_off),
    .count_i (cmd_count_i),
    .valid_o (info_valid),
    .step_i  (elem_fire),
    .slot_o  (slot),
    .left_o  (),
    .last_o  (last_elem),
    .count_o (infoq_count)
  );

  // ---------------------------------------------------------------- requests
  logic        rstarted_q, rstarted_d;
  logic [31:0] raddr_q, raddr_d, rleft_q, rleft_d;
  logic [31:0] cur_addr, cur_left, chunk;
  logic [4:0]  to_block;
  logic        credit_ok, req_fire, data_pop;
  logic [CRW-1:0] credit_q, credit_d;

  always_comb begin
    cur_addr = rstarted_q ? raddr_q : cmdq_head[63:32];
    cur_left = rstarted_q ? rleft_q : cmdq_head[31:0];
    to_block = 5'd16 - {1'b0, cur_addr[BBL +: 4]};
    if (BufBeats == 0) chunk = cur_left;
    else if (cur_left < {27'd0, to_block}) chunk = cur_left;
    else chunk = {27'd0, to_block};
  end

  assign credit_ok      = (BufBeats == 0) || ({{(32 - CRW){1'b0}}, credit_q} >= chunk);
  assign rd_req_valid_o = cmdq_valid && credit_ok;
  assign rd_req_addr_o  = cur_addr;
  assign rd_req_beats_o = chunk;
  assign req_fire       = rd_req_valid_o && rd_req_ready_i;
  assign cmdq_pop       = req_fire && (chunk == cur_left);

  always_comb begin
    rstarted_d = rstarted_q;
    raddr_d    = raddr_q;
    rleft_d    = rleft_q;
    if (req_fire) begin
      rstarted_d = !cmdq_pop;
      raddr_d    = cur_addr + (chunk << BBL);
      rleft_d    = cur_left - chunk;
    end
  end

  // Credits: beats of buffer space not yet promised to a request.
  always_comb begin
    credit_d = credit_q;
    if (BufBeats != 0) begin
      if (req_fire) credit_d = credit_d - chunk[CRW-1:0];
      if (data_pop) credit_d = credit_d + CRW'(1);
    end
  end

  // ---------------------------------------------------------------- data
  logic          beat_valid;
  logic [BW-1:0] beat;
  tsr_fifo #(.Width(BW), .Depth(DDEPTH)) u_dataq (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (rd_data_valid_i),
    .in_ready_o  (rd_data_ready_o),
    .in_data_i   (rd_data_i),
    .out_valid_o (beat_valid),
    .out_ready_i (data_pop),
    .out_data_o  (beat),
    .count_o     (dataq_count)
  );

  assign elem_fire = elem_valid_o && elem_ready_i;

  if (SMALL) begin : g_extract
    assign elem_valid_o = beat_valid && info_valid;
    assign elem_o       = beat[slot * EW +: EW];
    assign data_pop     = elem_fire && (last_elem || slot == SW'(EPB - 1));
  end else begin : g_gather
    logic           full_q, full_d;
    logic [BCW-1:0] bcnt_q, bcnt_d;
    logic [EW-1:0]  elem_q, elem_d, elem_shift;

    // Beats shift in from the top: after BPE beats, beat 0 is at the bottom.
    if (BPE == 1) begin : g_one
      assign elem_shift = beat;
    end else begin : g_shift
      assign elem_shift = {beat, elem_q[EW-1:BW]};
    end

    assign elem_valid_o = full_q;
    assign elem_o       = elem_q;
    assign data_pop     = beat_valid && (!full_q || elem_ready_i);

    always_comb begin
      full_d = full_q;
      bcnt_d = bcnt_q;
      elem_d = elem_q;
      if (elem_fire) full_d = 1'b0;
      if (data_pop) begin
        elem_d = elem_shift;
        if (BPEL > 0) bcnt_d = bcnt_q + BCW'(1);
        if (bcnt_q == BCW'(BPE - 1)) begin
          full_d = 1'b1;
          bcnt_d = '0;
        end
      end
    end

    always_ff @(posedge clk_i) begin
      if (!rst_ni) begin
        full_q <= 1'b0;
        bcnt_q <= '0;
      end else begin
        full_q <= full_d;
        bcnt_q <= bcnt_d;
      end
    end

    // Data register without reset (only read while full_q says it is valid).
    always_ff @(posedge clk_i) begin
      elem_q <= elem_d;
    end

    logic unused_slot;  // wide elements: no slots, and the cursor pops its own head
    assign unused_slot = ^{slot, last_elem};
  end

  logic unused_counts;
  assign unused_counts = ^{cmdq_count, infoq_count, dataq_count};

  assign busy_o  = info_valid;
  assign stall_o = info_valid && !elem_valid_o;

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      rstarted_q <= 1'b0;
      raddr_q    <= '0;
      rleft_q    <= '0;
      credit_q   <= CRW'(BufBeats);
    end else begin
      rstarted_q <= rstarted_d;
      raddr_q    <= raddr_d;
      rleft_q    <= rleft_d;
      credit_q   <= credit_d;
    end
  end

  `TSR_ASSERT_INIT(chk_buf_beats, BufBeats == 0 || BufBeats >= 16)
  `TSR_ASSERT_INIT(chk_pow2, (ElemBytes & (ElemBytes - 1)) == 0 && (BusBytes & (BusBytes - 1)) == 0)
  // Reservation: the credit never exceeds the buffer it reserves, and a
  // request is sent only with credit for all of it.
  `TSR_ASSERT(chk_credit_range, BufBeats == 0 || 32'(credit_q) <= 32'(DDEPTH), clk_i, rst_ni)
  `TSR_ASSERT(chk_req_nonempty, !rd_req_valid_o || rd_req_beats_o != '0, clk_i, rst_ni)
endmodule
