// tsr_dma_wr_elems: writes a stream of ElemBytes-byte elements to
// `count` consecutive elements starting at a byte address through one DMA
// write port. Each command becomes one write request covering its bus beats;
// elements narrower than the bus are packed into beats whose byte strobes
// cover only the elements' bytes (partial first/last beats), wider ones are
// sent as ElemBytes/BusBytes full beats. For wide elements the beats are cut
// directly out of elem_i, so elem_i must stay stable while elem_valid_i is
// high and elem_ready_o low (the usual valid/ready rule).
// idle_o is high when no command is pending and every request issued has
// been acknowledged by wr_done_i.
`include "tsr_assert.svh"

module tsr_dma_wr_elems #(
  parameter int ElemBytes = 4,
  parameter int BusBytes  = tsr_pkg::BUS_BYTES,
  parameter int CmdDepth  = 4,
  parameter int MaxPending = 15   // commands accepted but not yet done
) (
  input  logic                   clk_i,
  input  logic                   rst_ni,
  // command
  input  logic                   cmd_valid_i,
  output logic                   cmd_ready_o,
  input  logic [31:0]            cmd_addr_i,
  input  logic [31:0]            cmd_count_i,
  // element stream
  input  logic                   elem_valid_i,
  output logic                   elem_ready_o,
  input  logic [ElemBytes*8-1:0] elem_i,
  // DMA write port
  output logic                   wr_req_valid_o,
  input  logic                   wr_req_ready_i,
  output logic [31:0]            wr_req_addr_o,
  output logic [31:0]            wr_req_beats_o,
  output logic                   wr_data_valid_o,
  input  logic                   wr_data_ready_i,
  output logic [BusBytes*8-1:0]  wr_data_o,
  output logic [BusBytes-1:0]    wr_strb_o,
  input  logic                   wr_done_i,
  // status
  output logic                   idle_o,
  output logic                   stall_o
);
  localparam int EW    = ElemBytes * 8;
  localparam int BW    = BusBytes * 8;
  localparam bit SMALL = (ElemBytes < BusBytes);
  localparam int EPB   = SMALL ? BusBytes / ElemBytes : 1;   // elements per beat
  localparam int EPBL  = $clog2(EPB);
  localparam int SW    = (EPBL > 0) ? EPBL : 1;
  localparam int BPE   = SMALL ? 1 : ElemBytes / BusBytes;   // beats per element
  localparam int BPEL  = $clog2(BPE);
  localparam int BCW   = (BPEL > 0) ? BPEL : 1;
  localparam int PW    = $clog2(MaxPending + 1);
  localparam int CQW   = $clog2(CmdDepth + 1);

  // ---------------------------------------------------------------- command
  logic          reqq_in_ready, infoq_in_ready, cmd_fire;
  logic [31:0]   cmd_beat_addr, cmd_beats;
  logic [SW-1:0] cmd_off;
  logic [PW-1:0] pend_q, pend_d;

  assign cmd_ready_o   = reqq_in_ready && infoq_in_ready && (pend_q != PW'(MaxPending));
  assign cmd_fire      = cmd_valid_i && cmd_ready_o;

  // The beats the command covers (tsr_dma_beats: the read and the write side agree).
  tsr_dma_beats #(.ElemBytes(ElemBytes), .BusBytes(BusBytes)) u_beats (
    .addr_i      (cmd_addr_i),
    .count_i     (cmd_count_i),
    .beat_addr_o (cmd_beat_addr),
    .beats_o     (cmd_beats),
    .off_o       (cmd_off)
  );

  logic [CQW-1:0] reqq_count, infoq_count;
  logic [1:0]     outq_count;

  // Requests go out as soon as the command is accepted (ahead of the data).
  tsr_fifo #(.Width(64), .Depth(CmdDepth)) u_reqq (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (cmd_fire),
    .in_ready_o  (reqq_in_ready),
    .in_data_i   ({cmd_beat_addr, cmd_beats}),
    .out_valid_o (wr_req_valid_o),
    .out_ready_i (wr_req_ready_i),
    .out_data_o  ({wr_req_addr_o, wr_req_beats_o}),
    .count_o     (reqq_count)
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

  // ---------------------------------------------------------------- data
  logic          outq_in_ready, beat_push;
  logic [BW-1:0] beat_data;
  logic [BusBytes-1:0] beat_strb;
  tsr_fifo #(.Width(BW + BusBytes), .Depth(2)) u_outq (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (beat_push),
    .in_ready_o  (outq_in_ready),
    .in_data_i   ({beat_strb, beat_data}),
    .out_valid_o (wr_data_valid_o),
    .out_ready_i (wr_data_ready_i),
    .out_data_o  ({wr_strb_o, wr_data_o}),
    .count_o     (outq_count)
  );

  assign elem_fire = elem_valid_i && elem_ready_o;

  if (SMALL) begin : g_pack
    // Elements collect in acc_*; a beat leaves when full or at the command's end.
    logic [BW-1:0]       acc_data_q, acc_data_d, new_data;
    logic [BusBytes-1:0] acc_strb_q, acc_strb_d, new_strb;

    always_comb begin
      new_data = acc_data_q;
      new_strb = acc_strb_q;
      for (int s = 0; s < EPB; s++) begin
        if (slot == SW'(s)) begin
          new_data[s * EW +: EW]               = elem_i;
          new_strb[s * ElemBytes +: ElemBytes] = '1;
        end
      end
    end

    assign elem_ready_o = info_valid && outq_in_ready;
    assign beat_push    = elem_fire && (last_elem || slot == SW'(EPB - 1));
    assign beat_data    = new_data;
    assign beat_strb    = new_strb;

    always_comb begin
      acc_data_d = acc_data_q;
      acc_strb_d = acc_strb_q;
      if (elem_fire) begin
        acc_data_d = beat_push ? '0 : new_data;
        acc_strb_d = beat_push ? '0 : new_strb;
      end
    end

    always_ff @(posedge clk_i) begin
      if (!rst_ni) begin
        acc_data_q <= '0;
        acc_strb_q <= '0;
      end else begin
        acc_data_q <= acc_data_d;
        acc_strb_q <= acc_strb_d;
      end
    end
  end else begin : g_split
    // Beat k of the element is cut out of elem_i; the element is taken
    // (elem_ready_o) together with its last beat.
    logic [BCW-1:0] bcnt_q, bcnt_d;
    logic           last_beat;

    if (BPE == 1) begin : g_one
      assign beat_data = elem_i;
      assign last_beat = 1'b1;
    end else begin : g_many
      assign beat_data = elem_i[bcnt_q * BW +: BW];
      assign last_beat = (bcnt_q == BCW'(BPE - 1));
    end

    assign beat_strb    = '1;
    assign beat_push    = elem_valid_i && info_valid && outq_in_ready;
    assign elem_ready_o = info_valid && outq_in_ready && last_beat;

    always_comb begin
      bcnt_d = bcnt_q;
      if (beat_push && BPEL > 0) bcnt_d = bcnt_q + BCW'(1);
    end

    always_ff @(posedge clk_i) begin
      if (!rst_ni) bcnt_q <= '0;
      else bcnt_q <= bcnt_d;
    end

    logic unused_slot;  // wide elements: no slots, and the cursor pops its own head
    assign unused_slot = ^{slot, last_elem};
  end

  // ---------------------------------------------------------------- status
  always_comb begin
    pend_d = pend_q;
    if (cmd_fire && !wr_done_i) pend_d = pend_q + PW'(1);
    if (!cmd_fire && wr_done_i) pend_d = pend_q - PW'(1);
  end

  assign idle_o = (pend_q == '0);
  // Memory side holds us up: request or beat not taken, or every beat is out
  // and only the write acknowledgements are missing.
  assign stall_o = (wr_req_valid_o && !wr_req_ready_i) ||
                   (wr_data_valid_o && !wr_data_ready_i) ||
                   ((pend_q != '0) && !info_valid && !wr_data_valid_o && !wr_req_valid_o);

  logic unused_counts;
  assign unused_counts = ^{reqq_count, infoq_count, outq_count};

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      pend_q  <= '0;
    end else begin
      pend_q  <= pend_d;
    end
  end

  `TSR_ASSERT_INIT(chk_pow2, (ElemBytes & (ElemBytes - 1)) == 0 && (BusBytes & (BusBytes - 1)) == 0)
  `TSR_ASSERT(chk_req_nonempty, !wr_req_valid_o || wr_req_beats_o != '0, clk_i, rst_ni)
endmodule
