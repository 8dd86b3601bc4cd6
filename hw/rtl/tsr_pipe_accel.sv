// tsr_pipe_accel: the pipelined Tessera accelerator (SERIAL_CORE = 0; tsr_top
// instantiates it). Fetch dispatches the instruction stream
// to the load, compute and store stages; the stages synchronise through
// four dependency-token queues and share on-chip buffers (inp and wgt
// written by load and read by compute, out written by compute and read by
// store); one AXI4 master serves every DRAM access and an AXI4-Lite slave
// holds control, status and performance counters. A soft reset
// (SOFT_RESET register) holds fetch, the stages and the token queues in reset
// (core_rst_n) while the AXI4 master drains; on-chip buffers keep their
// contents.
`include "tsr_assert.svh"
`include "tsr_axi.svh"

module tsr_pipe_accel (
  input  logic        clk_i,
  input  logic        rst_ni,
  // AXI4-Lite control slave
  `TSR_AXIL_S_PORTS,
  // AXI4 master (DRAM)
  `TSR_AXI_M_PORTS(tsr_pkg::BUS_BYTES),
  // completion flag (= STATUS.DONE: set by FINISH or an error, cleared by a start)
  output logic        done_o,
  // ap_ctrl_hs interrupt (GIE & |(IER & ISR)); Vitis calls this port `interrupt`
  output logic        interrupt_o
);
  localparam int BW = tsr_pkg::DRAM_BUS_WIDTH;
  localparam int NRD = 3;  // read ports: 0 fetch, 1 load, 2 compute
  localparam int IW = tsr_pkg::INP_IDX_BITS;
  localparam int WW = tsr_pkg::WGT_IDX_BITS;
  localparam int AW = tsr_pkg::ACC_IDX_BITS;

  // ---- control ----
  logic        start, finish, err;
  logic        soft_rst, core_rst_n, axi_idle;
  logic [31:0] tokens, units;
  localparam int TCW = $clog2(tsr_pkg::DEP_QUEUE_DEPTH + 1);
  logic [TCW-1:0] l2c_count, c2l_count, c2s_count, s2c_count;
  logic [31:0] insn_addr, insn_count, fetched;
  logic        fetch_busy, fetch_stall, fetch_err;

  // ---- DMA ports ----
  logic [NRD-1:0]    rd_req_valid, rd_req_ready, rd_data_valid, rd_data_ready;
  logic [NRD*32-1:0] rd_req_addr, rd_req_beats;
  logic [BW-1:0]     rd_data;
  logic              wr_req_valid, wr_req_ready, wr_data_valid, wr_data_ready, wr_done;
  logic [31:0]       wr_req_addr, wr_req_beats;
  logic [BW-1:0]     wr_data;
  logic [BW/8-1:0]   wr_strb;
  logic              rd_beat, wr_beat, axi_err;

  // ---- commands ----
  logic         load_cmd_valid, load_cmd_ready, compute_cmd_valid, compute_cmd_ready;
  logic         store_cmd_valid, store_cmd_ready;
  logic [tsr_pkg::INSN_BITS-1:0] load_cmd, compute_cmd, store_cmd;

  // ---- tokens ----
  logic l2c_push, l2c_pop, l2c_valid, l2c_ready;
  logic c2l_push, c2l_pop, c2l_valid, c2l_ready;
  logic c2s_push, c2s_pop, c2s_valid, c2s_ready;
  logic s2c_push, s2c_pop, s2c_valid, s2c_ready;

  // ---- SRAMs ----
  logic                          inp_we, inp_re, wgt_we, wgt_re, out_re;
  logic [IW-1:0]                 inp_waddr, inp_raddr;
  logic [WW-1:0]                 wgt_waddr, wgt_raddr;
  logic [AW-1:0]                 out_raddr;
  // The output buffer is banked like the accumulator (index MSB): the
  // compute stage's two pipes write it through one port per bank.
  logic [1:0]                    out_we;
  logic [2*(AW-1)-1:0]           out_waddr;
  logic [2*tsr_pkg::OUT_BYTES*8-1:0] out_wdata, out_bank_rdata;
  logic                          out_rbank_q;
  logic [tsr_pkg::INP_BYTES*8-1:0] inp_wdata, inp_rdata;
  logic [tsr_pkg::WGT_BYTES*8-1:0] wgt_wdata, wgt_rdata;
  logic [tsr_pkg::OUT_BYTES*8-1:0] out_rdata;

  // ---- status ----
  logic        load_busy, load_stall_tok, load_stall_mem, load_err;
  logic        compute_busy, compute_stall_tok, compute_stall_mem, compute_err;
  logic        store_busy, store_stall_tok, store_stall_mem, store_err;
  logic        gemm_op, alu_op;
  logic [31:0] load_insns, compute_insns, store_insns;
  logic [tsr_pkg::CNT_COUNT-1:0]   cnt_inc;

  tsr_ctrl u_ctrl (
    .clk_i            (clk_i),
    .rst_ni           (rst_ni),
    `TSR_AXIL_S_CONNECT,
    .start_o          (start),
    .done_o           (done_o),
    .interrupt_o      (interrupt_o),
    .insn_addr_o      (insn_addr),
    .insn_count_o     (insn_count),
    .finish_i         (finish),
    .err_i            (err),
    .fetched_i        (fetched),
    .stage_insns_i    ({store_insns[9:0], compute_insns[9:0], load_insns[9:0]}),
    .cnt_inc_i        (cnt_inc),
    .tokens_i         (tokens),
    .units_i          (units),
    .axi_idle_i       (axi_idle),
    .soft_rst_o       (soft_rst)
  );

  assign err = fetch_err | load_err | compute_err | store_err | axi_err;
  // synchronous reset of everything but the control slave and the AXI master
  assign core_rst_n = rst_ni && !soft_rst;
  // REG_TOKENS / REG_UNITS (isa/tsr_regs.h): token counts, busy and error per unit
  assign tokens = {8'(s2c_count), 8'(c2s_count), 8'(c2l_count), 8'(l2c_count)};
  assign units  = {19'd0, axi_err, store_err, compute_err, load_err, fetch_err,
                   3'd0, !axi_idle, store_busy, compute_busy, load_busy, fetch_busy};

  // Counter events, in tsr_pkg::CNT_* order; DRAM counters count bytes per beat.
  always_comb begin
    cnt_inc = '0;
    cnt_inc[tsr_pkg::CNT_CYCLES]            = 1'b1;
    cnt_inc[tsr_pkg::CNT_LOAD_BUSY]         = load_busy;
    cnt_inc[tsr_pkg::CNT_LOAD_STALL_TOK]    = load_stall_tok;
    cnt_inc[tsr_pkg::CNT_LOAD_STALL_MEM]    = load_stall_mem;
    cnt_inc[tsr_pkg::CNT_COMPUTE_BUSY]      = compute_busy;
    cnt_inc[tsr_pkg::CNT_COMPUTE_STALL_TOK] = compute_stall_tok;
    cnt_inc[tsr_pkg::CNT_COMPUTE_STALL_MEM] = compute_stall_mem;
    cnt_inc[tsr_pkg::CNT_STORE_BUSY]        = store_busy;
    cnt_inc[tsr_pkg::CNT_STORE_STALL_TOK]   = store_stall_tok;
    cnt_inc[tsr_pkg::CNT_STORE_STALL_MEM]   = store_stall_mem;
    cnt_inc[tsr_pkg::CNT_FETCH_STALL]       = fetch_stall;
    cnt_inc[tsr_pkg::CNT_DRAM_RD_BYTES]     = rd_beat;
    cnt_inc[tsr_pkg::CNT_DRAM_WR_BYTES]     = wr_beat;
    cnt_inc[tsr_pkg::CNT_GEMM_OPS]          = gemm_op;
    cnt_inc[tsr_pkg::CNT_ALU_OPS]           = alu_op;
    cnt_inc[tsr_pkg::CNT_DUAL_OPS]          = gemm_op && alu_op;
  end

  tsr_fetch u_fetch (
    .clk_i           (clk_i),
    .rst_ni          (core_rst_n),
    .start_i         (start),
    .insn_addr_i     (insn_addr),
    .insn_count_i    (insn_count),
    .rd_req_valid_o  (rd_req_valid[0]),
    .rd_req_ready_i  (rd_req_ready[0]),
    .rd_req_addr_o   (rd_req_addr[0*32 +: 32]),
    .rd_req_beats_o  (rd_req_beats[0*32 +: 32]),
    .rd_data_valid_i (rd_data_valid[0]),
    .rd_data_ready_o (rd_data_ready[0]),
    .rd_data_i       (rd_data),
    .load_valid_o    (load_cmd_valid),
    .load_ready_i    (load_cmd_ready),
    .load_cmd_o      (load_cmd),
    .compute_valid_o (compute_cmd_valid),
    .compute_ready_i (compute_cmd_ready),
    .compute_cmd_o   (compute_cmd),
    .store_valid_o   (store_cmd_valid),
    .store_ready_i   (store_cmd_ready),
    .store_cmd_o     (store_cmd),
    .busy_o          (fetch_busy),
    .stall_o         (fetch_stall),
    .fetched_o       (fetched),
    .err_o           (fetch_err)
  );

  tsr_load u_load (
    .clk_i             (clk_i),
    .rst_ni            (core_rst_n),
    .cmd_valid_i       (load_cmd_valid),
    .cmd_ready_o       (load_cmd_ready),
    .cmd_i             (load_cmd),
    .pop_next_valid_i  (c2l_valid),
    .pop_next_o        (c2l_pop),
    .push_next_ready_i (l2c_ready),
    .push_next_o       (l2c_push),
    .rd_req_valid_o    (rd_req_valid[1]),
    .rd_req_ready_i    (rd_req_ready[1]),
    .rd_req_addr_o     (rd_req_addr[1*32 +: 32]),
    .rd_req_beats_o    (rd_req_beats[1*32 +: 32]),
    .rd_data_valid_i   (rd_data_valid[1]),
    .rd_data_ready_o   (rd_data_ready[1]),
    .rd_data_i         (rd_data),
    .inp_we_o          (inp_we),
    .inp_waddr_o       (inp_waddr),
    .inp_wdata_o       (inp_wdata),
    .wgt_we_o          (wgt_we),
    .wgt_waddr_o       (wgt_waddr),
    .wgt_wdata_o       (wgt_wdata),
    .busy_o            (load_busy),
    .stall_tok_o       (load_stall_tok),
    .stall_mem_o       (load_stall_mem),
    .insn_count_o      (load_insns),
    .err_o             (load_err)
  );

  tsr_compute u_compute (
    .clk_i             (clk_i),
    .rst_ni            (core_rst_n),
    .cmd_valid_i       (compute_cmd_valid),
    .cmd_ready_o       (compute_cmd_ready),
    .cmd_i             (compute_cmd),
    .pop_prev_valid_i  (l2c_valid),
    .pop_prev_o        (l2c_pop),
    .pop_next_valid_i  (s2c_valid),
    .pop_next_o        (s2c_pop),
    .push_prev_ready_i (c2l_ready),
    .push_prev_o       (c2l_push),
    .push_next_ready_i (c2s_ready),
    .push_next_o       (c2s_push),
    .rd_req_valid_o    (rd_req_valid[2]),
    .rd_req_ready_i    (rd_req_ready[2]),
    .rd_req_addr_o     (rd_req_addr[2*32 +: 32]),
    .rd_req_beats_o    (rd_req_beats[2*32 +: 32]),
    .rd_data_valid_i   (rd_data_valid[2]),
    .rd_data_ready_o   (rd_data_ready[2]),
    .rd_data_i         (rd_data),
    .inp_re_o          (inp_re),
    .inp_raddr_o       (inp_raddr),
    .inp_rdata_i       (inp_rdata),
    .wgt_re_o          (wgt_re),
    .wgt_raddr_o       (wgt_raddr),
    .wgt_rdata_i       (wgt_rdata),
    .out_we_o          (out_we),
    .out_waddr_o       (out_waddr),
    .out_wdata_o       (out_wdata),
    .busy_o            (compute_busy),
    .stall_tok_o       (compute_stall_tok),
    .stall_mem_o       (compute_stall_mem),
    .insn_count_o      (compute_insns),
    .finish_o          (finish),
    .gemm_op_o         (gemm_op),
    .alu_op_o          (alu_op),
    .err_o             (compute_err)
  );

  tsr_store u_store (
    .clk_i             (clk_i),
    .rst_ni            (core_rst_n),
    .cmd_valid_i       (store_cmd_valid),
    .cmd_ready_o       (store_cmd_ready),
    .cmd_i             (store_cmd),
    .pop_prev_valid_i  (c2s_valid),
    .pop_prev_o        (c2s_pop),
    .push_prev_ready_i (s2c_ready),
    .push_prev_o       (s2c_push),
    .wr_req_valid_o    (wr_req_valid),
    .wr_req_ready_i    (wr_req_ready),
    .wr_req_addr_o     (wr_req_addr),
    .wr_req_beats_o    (wr_req_beats),
    .wr_data_valid_o   (wr_data_valid),
    .wr_data_ready_i   (wr_data_ready),
    .wr_data_o         (wr_data),
    .wr_strb_o         (wr_strb),
    .wr_done_i         (wr_done),
    .out_re_o          (out_re),
    .out_raddr_o       (out_raddr),
    .out_rdata_i       (out_rdata),
    .busy_o            (store_busy),
    .stall_tok_o       (store_stall_tok),
    .stall_mem_o       (store_stall_mem),
    .insn_count_o      (store_insns),
    .err_o             (store_err)
  );

  tsr_dep_queue u_l2c (.clk_i(clk_i), .rst_ni(core_rst_n), .push_i(l2c_push), .pop_i(l2c_pop),
                       .valid_o(l2c_valid), .ready_o(l2c_ready), .count_o(l2c_count));
  tsr_dep_queue u_c2l (.clk_i(clk_i), .rst_ni(core_rst_n), .push_i(c2l_push), .pop_i(c2l_pop),
                       .valid_o(c2l_valid), .ready_o(c2l_ready), .count_o(c2l_count));
  tsr_dep_queue u_c2s (.clk_i(clk_i), .rst_ni(core_rst_n), .push_i(c2s_push), .pop_i(c2s_pop),
                       .valid_o(c2s_valid), .ready_o(c2s_ready), .count_o(c2s_count));
  tsr_dep_queue u_s2c (.clk_i(clk_i), .rst_ni(core_rst_n), .push_i(s2c_push), .pop_i(s2c_pop),
                       .valid_o(s2c_valid), .ready_o(s2c_ready), .count_o(s2c_count));

  tsr_sram #(.Width(tsr_pkg::INP_BYTES * 8), .Depth(tsr_pkg::INP_DEPTH)) u_inp (
    .clk_i (clk_i), .we_i (inp_we), .waddr_i (inp_waddr), .wdata_i (inp_wdata),
    .re_i (inp_re), .raddr_i (inp_raddr), .rdata_o (inp_rdata));
  tsr_sram #(.Width(tsr_pkg::WGT_BYTES * 8), .Depth(tsr_pkg::WGT_DEPTH)) u_wgt (
    .clk_i (clk_i), .we_i (wgt_we), .waddr_i (wgt_waddr), .wdata_i (wgt_wdata),
    .re_i (wgt_re), .raddr_i (wgt_raddr), .rdata_o (wgt_rdata));
  for (genvar b = 0; b < 2; b++) begin : g_out
    tsr_sram #(.Width(tsr_pkg::OUT_BYTES * 8), .Depth(tsr_pkg::ACC_DEPTH / 2),
               .Lutram(tsr_pkg::OUT_BUFF_LUTRAM)) u_out (
      .clk_i   (clk_i),
      .we_i    (out_we[b]),
      .waddr_i (out_waddr[b*(AW-1) +: AW-1]),
      .wdata_i (out_wdata[b*tsr_pkg::OUT_BYTES*8 +: tsr_pkg::OUT_BYTES*8]),
      .re_i    (out_re && out_raddr[AW-1] == 1'(b)),
      .raddr_i (out_raddr[AW-2:0]),
      .rdata_o (out_bank_rdata[b*tsr_pkg::OUT_BYTES*8 +: tsr_pkg::OUT_BYTES*8]));
  end
  always_ff @(posedge clk_i) begin
    if (!core_rst_n) out_rbank_q <= 1'b0;
    else if (out_re) out_rbank_q <= out_raddr[AW-1];
  end
  assign out_rdata = out_rbank_q ? out_bank_rdata[tsr_pkg::OUT_BYTES*8 +: tsr_pkg::OUT_BYTES*8]
                                 : out_bank_rdata[0 +: tsr_pkg::OUT_BYTES*8];

  // fetch and compute reads first: they stall their stage, the load stage
  // prefetches ahead of the compute stage
  tsr_axi_master #(.NumRd(NRD), .BusBytes(tsr_pkg::BUS_BYTES), .RdPrio(3'b101)) u_axi (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .rd_req_valid_i  (rd_req_valid),
    .rd_req_ready_o  (rd_req_ready),
    .rd_req_addr_i   (rd_req_addr),
    .rd_req_beats_i  (rd_req_beats),
    .rd_data_valid_o (rd_data_valid),
    .rd_data_ready_i (rd_data_ready),
    .rd_data_o       (rd_data),
    .wr_req_valid_i  (wr_req_valid),
    .wr_req_ready_o  (wr_req_ready),
    .wr_req_addr_i   (wr_req_addr),
    .wr_req_beats_i  (wr_req_beats),
    .wr_data_valid_i (wr_data_valid),
    .wr_data_ready_o (wr_data_ready),
    .wr_data_i       (wr_data),
    .wr_strb_i       (wr_strb),
    .wr_done_o       (wr_done),
    `TSR_AXI_M_CONNECT,
    .flush_i         (soft_rst),
    .idle_o          (axi_idle),
    .err_o           (axi_err),
    .rd_beat_o       (rd_beat),
    .wr_beat_o       (wr_beat)
  );

  // fetch_busy is informational (the run ends at FINISH, not when fetch drains);
  // software reads it in REG_UNITS.

  // No run starts while the core is held in (soft) reset (fetch and the
  // stages would miss it).
  `TSR_ASSERT(chk_no_start_in_reset, !(start && soft_rst), clk_i, rst_ni)
endmodule
