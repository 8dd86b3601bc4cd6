// tsr_axi_master: serves NumRd DMA read ports and one DMA write port on one
// AXI4 master. Port requests (bus-aligned address, beat count) are cut into
// INCR bursts of at most 16 beats that never cross a 4 KiB boundary. Read
// bursts are arbitrated per burst, round-robin among the ports of RdPrio
// that request (ports whose reads stall their stage: instruction fetch, the
// compute stage's uop/acc loads) and among all ports when none of those
// does (the load stage prefetches ahead), with ARID = port
// index and up to MaxRdOut bursts outstanding; R beats are routed by RID and
// only taken when the destination port is ready. Writes: AW bursts and W
// beats proceed independently (W of a burst may go before its AW is
// accepted); wr_done_o pulses once per port request after the B responses of
// all its bursts. err_o is sticky (any RRESP/BRESP other than OKAY, or an R
// beat with an unknown RID); rd_beat_o / wr_beat_o pulse once per data beat
// transferred on R / W (registered, one cycle late).
// flush_i (soft reset) drains safely: the request queues are cleared and no
// new AR/AW is issued; an address already presented stays valid until
// accepted; every R beat is taken and dropped, every B response taken;
// a write burst whose AW was generated gets its remaining W beats with
// WSTRB = 0 (no byte written). idle_o: nothing is outstanding. The error
// bit clears while flushing.
`include "tsr_assert.svh"
`include "tsr_axi.svh"

module tsr_axi_master #(
  parameter int NumRd    = 3,
  parameter int BusBytes = tsr_pkg::BUS_BYTES,
  parameter int MaxRdOut = 8,   // read bursts in flight (AR issued, RLAST not seen)
  parameter int MaxWrOut = 8,   // write bursts in flight (AW issued, B not seen)
  parameter logic [NumRd-1:0] RdPrio = '0  // read ports served first
) (
  input  logic                  clk_i,
  input  logic                  rst_ni,
  // DMA read ports
  input  logic [NumRd-1:0]      rd_req_valid_i,
  output logic [NumRd-1:0]      rd_req_ready_o,
  input  logic [NumRd*32-1:0]   rd_req_addr_i,
  input  logic [NumRd*32-1:0]   rd_req_beats_i,
  output logic [NumRd-1:0]      rd_data_valid_o,
  input  logic [NumRd-1:0]      rd_data_ready_i,
  output logic [BusBytes*8-1:0] rd_data_o,
  // DMA write port
  input  logic                  wr_req_valid_i,
  output logic                  wr_req_ready_o,
  input  logic [31:0]           wr_req_addr_i,
  input  logic [31:0]           wr_req_beats_i,
  input  logic                  wr_data_valid_i,
  output logic                  wr_data_ready_o,
  input  logic [BusBytes*8-1:0] wr_data_i,
  input  logic [BusBytes-1:0]   wr_strb_i,
  output logic                  wr_done_o,
  // AXI4 master
  `TSR_AXI_M_PORTS(BusBytes),
  // soft reset
  input  logic                  flush_i,
  output logic                  idle_o,
  // status
  output logic                  err_o,
  output logic                  rd_beat_o,
  output logic                  wr_beat_o
);
  localparam int BW  = BusBytes * 8;
  localparam int BBL = $clog2(BusBytes);
  localparam int PW  = (NumRd > 1) ? $clog2(NumRd) : 1;
  localparam int ROW = $clog2(MaxRdOut + 1);
  localparam int WOW = $clog2(MaxWrOut + 1);
  localparam logic [12:0] PAGE_BEATS = 13'(4096 / BusBytes);

  // Beats of the next burst: min(left, 16, beats to the next 4 KiB boundary).
  // page_beat: the address's beat index within its 4 KiB page (addr[11:BBL]).
  function automatic logic [4:0] burst_len(input logic [11-BBL:0] page_beat,
                                           input logic [31:0] left);
    logic [12:0] to_page;
    logic [4:0]  m;
    to_page = PAGE_BEATS - {{(BBL + 1){1'b0}}, page_beat};
    m = (left < 32'd16) ? left[4:0] : 5'd16;
    if (to_page < {8'd0, m}) m = to_page[4:0];
    burst_len = m;
  endfunction

  // ================================================================ reads
  logic [NumRd-1:0]    rq_valid, rq_pop;
  logic [NumRd*64-1:0] rq_head;
  logic [NumRd*2-1:0]  rq_count;
  logic                rq_rst_n;  // request queues: cleared by a flush

  assign rq_rst_n = rst_ni && !flush_i;

  for (genvar p = 0; p < NumRd; p++) begin : g_rq
    tsr_fifo #(.Width(64), .Depth(2)) u_rq (
      .clk_i       (clk_i),
      .rst_ni      (rq_rst_n),
      .in_valid_i  (rd_req_valid_i[p]),
      .in_ready_o  (rd_req_ready_o[p]),
      .in_data_i   ({rd_req_addr_i[p*32 +: 32], rd_req_beats_i[p*32 +: 32]}),
      .out_valid_o (rq_valid[p]),
      .out_ready_i (rq_pop[p]),
      .out_data_o  (rq_head[p*64 +: 64]),
      .count_o     (rq_count[p*2 +: 2])
    );
  end

  // Per-port progress through the request at the head of its queue.
  logic [NumRd-1:0]    rstart_q, rstart_d;
  logic [NumRd*32-1:0] raddr_q, raddr_d, rleft_q, rleft_d;
  logic [NumRd*32-1:0] rcur_addr, rcur_left;
  logic [NumRd*5-1:0]  rblen;

  always_comb begin
    for (int p = 0; p < NumRd; p++) begin
      rcur_addr[p*32 +: 32] = rstart_q[p] ? raddr_q[p*32 +: 32] : rq_head[p*64 + 32 +: 32];
      rcur_left[p*32 +: 32] = rstart_q[p] ? rleft_q[p*32 +: 32] : rq_head[p*64 +: 32];
      rblen[p*5 +: 5] = burst_len(rcur_addr[p*32 + BBL +: 12 - BBL], rcur_left[p*32 +: 32]);
    end
  end

  // Round-robin pick, starting after the port granted last.
  logic [PW-1:0]  rr_q, rr_d, pick;
  logic           any_req;
  logic [PW:0]    idx;

  logic [NumRd-1:0] rq_cand;

  always_comb begin
    pick    = rr_q;
    any_req = 1'b0;
    idx     = '0;
    rq_cand = ((rq_valid & RdPrio) != '0) ? (rq_valid & RdPrio) : rq_valid;
    for (int i = 1; i <= NumRd; i++) begin
      idx = {1'b0, rr_q} + (PW + 1)'(i);
      if (idx >= (PW + 1)'(NumRd)) idx = idx - (PW + 1)'(NumRd);
      if (!any_req && rq_cand[idx[PW-1:0]]) begin
        any_req = 1'b1;
        pick    = idx[PW-1:0];
      end
    end
  end

  logic           ar_valid_q, ar_valid_d, ar_load;
  logic [31:0]    ar_addr_q, ar_addr_d;
  logic [3:0]     ar_len_q, ar_len_d;
  logic [PW-1:0]  ar_id_q, ar_id_d;
  logic [ROW-1:0] rd_out_q, rd_out_d;
  logic [31:0]    pick_addr, pick_left;
  logic [4:0]     pick_len;
  logic           r_fire, r_id_ok;

  assign pick_addr = rcur_addr[pick*32 +: 32];
  assign pick_left = rcur_left[pick*32 +: 32];
  assign pick_len  = rblen[pick*5 +: 5];
  // A burst finishing (RLAST) this cycle frees its slot for the next AR at once.
  assign ar_load   = (!ar_valid_q || m_axi_arready_i) && any_req && !flush_i &&
                     ((rd_out_q != ROW'(MaxRdOut)) || (r_fire && m_axi_rlast_i));

  always_comb begin
    ar_valid_d = ar_valid_q;
    ar_addr_d  = ar_addr_q;
    ar_len_d   = ar_len_q;
    ar_id_d    = ar_id_q;
    rr_d       = rr_q;
    rstart_d   = rstart_q;
    raddr_d    = raddr_q;
    rleft_d    = rleft_q;
    rq_pop     = '0;
    if (m_axi_arready_i) ar_valid_d = 1'b0;
    if (ar_load) begin
      ar_valid_d = 1'b1;
      ar_addr_d  = pick_addr;
      ar_len_d   = 4'(pick_len - 5'd1);
      ar_id_d    = pick;
      rr_d       = pick;
      if ({27'd0, pick_len} == pick_left) begin
        rq_pop[pick]   = 1'b1;
        rstart_d[pick] = 1'b0;
      end else begin
        rstart_d[pick]          = 1'b1;
        raddr_d[pick*32 +: 32]  = pick_addr + ({27'd0, pick_len} << BBL);
        rleft_d[pick*32 +: 32]  = pick_left - {27'd0, pick_len};
      end
    end
    if (flush_i) rstart_d = '0;
  end

  always_comb begin
    rd_out_d = rd_out_q;
    if (ar_load && !(r_fire && m_axi_rlast_i)) rd_out_d = rd_out_q + ROW'(1);
    if (!ar_load && r_fire && m_axi_rlast_i) rd_out_d = rd_out_q - ROW'(1);
  end

  assign m_axi_arvalid_o = ar_valid_q;
  assign m_axi_araddr_o  = ar_addr_q;
  assign m_axi_arlen_o   = {4'd0, ar_len_q};
  assign m_axi_arsize_o  = 3'(BBL);
  assign m_axi_arburst_o = 2'b01;
  assign m_axi_arid_o    = 2'(ar_id_q);

  // R: route by RID; a beat is only taken when its port can take it.
  always_comb begin
    r_id_ok         = 1'b0;
    m_axi_rready_o  = 1'b1;   // beats with an unknown ID are dropped (and flagged)
    rd_data_valid_o = '0;
    for (int p = 0; p < NumRd; p++) begin
      if (m_axi_rid_i == 2'(p)) begin
        r_id_ok            = 1'b1;
        m_axi_rready_o     = rd_data_ready_i[p];
        rd_data_valid_o[p] = m_axi_rvalid_i;
      end
    end
    if (flush_i) begin  // drain: take and drop every beat
      m_axi_rready_o  = 1'b1;
      rd_data_valid_o = '0;
    end
  end

  assign rd_data_o = m_axi_rdata_i;
  assign r_fire    = m_axi_rvalid_i && m_axi_rready_o;

  // ================================================================ writes
  logic        wq_valid, wq_pop;
  logic [63:0] wq_head;
  logic [1:0]  wq_count;

  tsr_fifo #(.Width(64), .Depth(2)) u_wq (
    .clk_i       (clk_i),
    .rst_ni      (rq_rst_n),
    .in_valid_i  (wr_req_valid_i),
    .in_ready_o  (wr_req_ready_o),
    .in_data_i   ({wr_req_addr_i, wr_req_beats_i}),
    .out_valid_o (wq_valid),
    .out_ready_i (wq_pop),
    .out_data_o  (wq_head),
    .count_o     (wq_count)
  );

  logic        wstart_q, wstart_d;
  logic [31:0] waddr_q, waddr_d, wleft_q, wleft_d;
  logic [31:0] wcur_addr, wcur_left;
  logic [4:0]  wblen;

  assign wcur_addr = wstart_q ? waddr_q : wq_head[63:32];
  assign wcur_left = wstart_q ? wleft_q : wq_head[31:0];
  assign wblen     = burst_len(wcur_addr[11:BBL], wcur_left);

  // Each generated burst queues its length for the W side and its
  // "last burst of the request" flag for the B side.
  logic           wlenq_in_ready, wlenq_valid, wlenq_pop;
  logic [3:0]     wlen_head;
  logic [WOW-1:0] wlenq_count, bq_count;
  logic           bq_in_ready, bq_valid, bq_head;
  logic           aw_valid_q, aw_valid_d, aw_load;
  logic [31:0]    aw_addr_q, aw_addr_d;
  logic [3:0]     aw_len_q, aw_len_d;
  logic           aw_last_req;

  assign aw_load     = (!aw_valid_q || m_axi_awready_i) && wq_valid && wlenq_in_ready && bq_in_ready &&
                       !flush_i;
  assign aw_last_req = ({27'd0, wblen} == wcur_left);
  assign wq_pop      = aw_load && aw_last_req;

  always_comb begin
    aw_valid_d = aw_valid_q;
    aw_addr_d  = aw_addr_q;
    aw_len_d   = aw_len_q;
    wstart_d   = wstart_q;
    waddr_d    = waddr_q;
    wleft_d    = wleft_q;
    if (m_axi_awready_i) aw_valid_d = 1'b0;
    if (aw_load) begin
      aw_valid_d = 1'b1;
      aw_addr_d  = wcur_addr;
      aw_len_d   = 4'(wblen - 5'd1);
      wstart_d   = !aw_last_req;
      waddr_d    = wcur_addr + ({27'd0, wblen} << BBL);
      wleft_d    = wcur_left - {27'd0, wblen};
    end
    if (flush_i) wstart_d = 1'b0;
  end

  tsr_fifo #(.Width(4), .Depth(MaxWrOut)) u_wlenq (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (aw_load),
    .in_ready_o  (wlenq_in_ready),
    .in_data_i   (aw_len_d),
    .out_valid_o (wlenq_valid),
    .out_ready_i (wlenq_pop),
    .out_data_o  (wlen_head),
    .count_o     (wlenq_count)
  );

  tsr_fifo #(.Width(1), .Depth(MaxWrOut)) u_bq (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (aw_load),
    .in_ready_o  (bq_in_ready),
    .in_data_i   (aw_last_req),
    .out_valid_o (bq_valid),
    .out_ready_i (m_axi_bvalid_i),
    .out_data_o  (bq_head),
    .count_o     (bq_count)
  );

  assign m_axi_awvalid_o = aw_valid_q;
  assign m_axi_awaddr_o  = aw_addr_q;
  assign m_axi_awlen_o   = {4'd0, aw_len_q};
  assign m_axi_awsize_o  = 3'(BBL);
  assign m_axi_awburst_o = 2'b01;
  assign m_axi_awid_o    = 2'd0;

  // W: one output register; beats are counted against the burst at the
  // head of wlenq to place WLAST.
  logic          w_valid_q, w_valid_d, w_last_q, w_last_d, w_load, w_last, w_src_valid;
  logic [3:0]    wbeat_q, wbeat_d;
  logic [BW-1:0] w_data_q, w_data_d;
  logic [BusBytes-1:0] w_strb_q, w_strb_d;

  assign wr_data_ready_o = wlenq_valid && (!w_valid_q || m_axi_wready_i);
  // A flush completes generated bursts with empty-strobe beats.
  assign w_src_valid     = wr_data_valid_i || flush_i;
  assign w_load          = w_src_valid && wr_data_ready_o;
  assign w_last          = (wbeat_q == wlen_head);
  assign wlenq_pop       = w_load && w_last;

  always_comb begin
    w_valid_d = w_valid_q;
    w_last_d  = w_last_q;
    w_data_d  = w_data_q;
    w_strb_d  = w_strb_q;
    wbeat_d   = wbeat_q;
    if (m_axi_wready_i) w_valid_d = 1'b0;
    if (w_load) begin
      w_valid_d = 1'b1;
      w_last_d  = w_last;
      w_data_d  = wr_data_i;
      w_strb_d  = flush_i ? '0 : wr_strb_i;
      wbeat_d   = w_last ? 4'd0 : wbeat_q + 4'd1;
    end
  end

  assign m_axi_wvalid_o = w_valid_q;
  assign m_axi_wdata_o  = w_data_q;
  assign m_axi_wstrb_o  = w_strb_q;
  assign m_axi_wlast_o  = w_last_q;

  // B: one entry of bq per burst; the last burst of a request completes it.
  logic b_fire;
  assign m_axi_bready_o = bq_valid;
  assign b_fire         = m_axi_bvalid_i && bq_valid;

  // ================================================================ status
  logic err_q, err_d, wr_done_q, rd_beat_q, wr_beat_q;
  always_comb begin
    err_d = err_q;
    if (r_fire && (m_axi_rresp_i != 2'b00 || !r_id_ok)) err_d = 1'b1;
    if (b_fire && m_axi_bresp_i != 2'b00) err_d = 1'b1;
    if (flush_i) err_d = 1'b0;
  end

  assign idle_o = !ar_valid_q && (rd_out_q == '0) && !aw_valid_q && !wlenq_valid && !w_valid_q && !bq_valid;

  assign err_o     = err_q;
  assign wr_done_o = wr_done_q;
  assign rd_beat_o = rd_beat_q;
  assign wr_beat_o = wr_beat_q;

  logic unused;
  assign unused = ^{rq_count, wq_count, wlenq_count, bq_count, m_axi_bid_i};

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      rstart_q   <= '0;
      raddr_q    <= '0;
      rleft_q    <= '0;
      rr_q       <= PW'(NumRd - 1);
      ar_valid_q <= 1'b0;
      ar_addr_q  <= '0;
      ar_len_q   <= '0;
      ar_id_q    <= '0;
      rd_out_q   <= '0;
      wstart_q   <= 1'b0;
      waddr_q    <= '0;
      wleft_q    <= '0;
      aw_valid_q <= 1'b0;
      aw_addr_q  <= '0;
      aw_len_q   <= '0;
      w_valid_q  <= 1'b0;
      w_last_q   <= 1'b0;
      w_strb_q   <= '0;
      wbeat_q    <= '0;
      err_q      <= 1'b0;
      wr_done_q  <= 1'b0;
      rd_beat_q  <= 1'b0;
      wr_beat_q  <= 1'b0;
    end else begin
      rstart_q   <= rstart_d;
      raddr_q    <= raddr_d;
      rleft_q    <= rleft_d;
      rr_q       <= rr_d;
      ar_valid_q <= ar_valid_d;
      ar_addr_q  <= ar_addr_d;
      ar_len_q   <= ar_len_d;
      ar_id_q    <= ar_id_d;
      rd_out_q   <= rd_out_d;
      wstart_q   <= wstart_d;
      waddr_q    <= waddr_d;
      wleft_q    <= wleft_d;
      aw_valid_q <= aw_valid_d;
      aw_addr_q  <= aw_addr_d;
      aw_len_q   <= aw_len_d;
      w_valid_q  <= w_valid_d;
      w_last_q   <= w_last_d;
      w_strb_q   <= w_strb_d;
      wbeat_q    <= wbeat_d;
      err_q      <= err_d;
      wr_done_q  <= b_fire && bq_head;
      rd_beat_q  <= r_fire;
      wr_beat_q  <= m_axi_wvalid_o && m_axi_wready_i;
    end
  end

  // W data register without reset (only read while w_valid_q).
  always_ff @(posedge clk_i) begin
    w_data_q <= w_data_d;
  end

  // 2-bit AXI IDs name the read ports
  `TSR_ASSERT_INIT(chk_num_rd, NumRd >= 1 && NumRd <= 4)
  // Bursts are INCR, at most 16 beats, and never cross a 4 KiB page (AXI4).
  `TSR_ASSERT(chk_ar_burst, !m_axi_arvalid_o || (m_axi_arlen_o < 8'd16 &&
              13'(m_axi_araddr_o[11:0]) + 13'(BusBytes) * (13'(m_axi_arlen_o) + 13'd1) <= 13'd4096),
              clk_i, rst_ni)
  `TSR_ASSERT(chk_aw_burst, !m_axi_awvalid_o || (m_axi_awlen_o < 8'd16 &&
              13'(m_axi_awaddr_o[11:0]) + 13'(BusBytes) * (13'(m_axi_awlen_o) + 13'd1) <= 13'd4096),
              clk_i, rst_ni)

`ifndef SYNTHESIS

  // Handshake checks (simulation only): the AXI4 channels in both
  // directions (AR, AW, W are ours; R, B the memory's), and the requesters'
  // ports, whose offers a soft reset (flush) may withdraw.
  logic chk_rst_n;
  assign chk_rst_n = rst_ni && !flush_i;
  tsr_hs_check #(.Width(32 + 8 + 3 + 2 + 2)) u_ar_check (
    .clk_i (clk_i), .rst_ni (rst_ni), .valid_i (m_axi_arvalid_o), .ready_i (m_axi_arready_i),
    .data_i ({m_axi_araddr_o, m_axi_arlen_o, m_axi_arsize_o, m_axi_arburst_o, m_axi_arid_o}));
  tsr_hs_check #(.Width(32 + 8 + 3 + 2 + 2)) u_aw_check (
    .clk_i (clk_i), .rst_ni (rst_ni), .valid_i (m_axi_awvalid_o), .ready_i (m_axi_awready_i),
    .data_i ({m_axi_awaddr_o, m_axi_awlen_o, m_axi_awsize_o, m_axi_awburst_o, m_axi_awid_o}));
  tsr_hs_check #(.Width(BusBytes * 9 + 1)) u_w_check (
    .clk_i (clk_i), .rst_ni (rst_ni), .valid_i (m_axi_wvalid_o), .ready_i (m_axi_wready_i),
    .data_i ({m_axi_wdata_o, m_axi_wstrb_o, m_axi_wlast_o}));
  tsr_hs_check #(.Width(BusBytes * 8 + 5)) u_r_check (
    .clk_i (clk_i), .rst_ni (rst_ni), .valid_i (m_axi_rvalid_i), .ready_i (m_axi_rready_o),
    .data_i ({m_axi_rdata_i, m_axi_rresp_i, m_axi_rlast_i, m_axi_rid_i}));
  tsr_hs_check #(.Width(4)) u_b_check (
    .clk_i (clk_i), .rst_ni (rst_ni), .valid_i (m_axi_bvalid_i), .ready_i (m_axi_bready_o),
    .data_i ({m_axi_bresp_i, m_axi_bid_i}));
  for (genvar k = 0; k < NumRd; k++) begin : g_rd_check
    tsr_hs_check #(.Width(64)) u_req_check (
      .clk_i (clk_i), .rst_ni (chk_rst_n), .valid_i (rd_req_valid_i[k]),
      .ready_i (rd_req_ready_o[k]), .data_i ({rd_req_addr_i[k*32 +: 32], rd_req_beats_i[k*32 +: 32]}));
    tsr_hs_check #(.Width(BusBytes * 8)) u_data_check (
      .clk_i (clk_i), .rst_ni (chk_rst_n), .valid_i (rd_data_valid_o[k]),
      .ready_i (rd_data_ready_i[k]), .data_i (rd_data_o));
  end
  tsr_hs_check #(.Width(64)) u_wr_req_check (
    .clk_i (clk_i), .rst_ni (chk_rst_n), .valid_i (wr_req_valid_i), .ready_i (wr_req_ready_o),
    .data_i ({wr_req_addr_i, wr_req_beats_i}));
  tsr_hs_check #(.Width(BusBytes * 9)) u_wr_data_check (
    .clk_i (clk_i), .rst_ni (chk_rst_n), .valid_i (wr_data_valid_i), .ready_i (wr_data_ready_o),
    .data_i ({wr_data_i, wr_strb_i}));
`endif
endmodule
