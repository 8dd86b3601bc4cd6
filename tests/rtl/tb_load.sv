// tb_load: self-checking testbench for tsr_load. Random LOAD instructions
// (inp and wgt, random sram_base, sizes, strides, four pads, x_size == 0,
// out-of-range rows) run against a port-level DRAM model with random
// request back-pressure, latency and data gaps, over a random DRAM image.
// After every instruction both SRAMs are compared in full with an
// independent model of isa/semantics.md (so rows outside the target must
// be unchanged). Tokens: nothing may happen before the pop token, the push
// comes only after every row of the instruction is written, and only when
// the queue has room (the stage may run one instruction ahead: its pop and
// reads may come while the previous instruction still writes). inp pad rows
// hold a random pad_value. A first phase with an ideal DRAM checks
// per-instruction throughput; a second one, with a realistic DRAM latency,
// checks that a run of contiguous and strided loads (rows of a few hundred
// bytes) keeps the bus busy, with no latency bubble between instructions.
`timescale 1ns/1ps
module tb_load;
  localparam int BB = tsr_pkg::BUS_BYTES;
  localparam int IB = tsr_pkg::INP_BYTES;
  localparam int WB = tsr_pkg::WGT_BYTES;
  localparam int ID = tsr_pkg::INP_DEPTH;
  localparam int WD = tsr_pkg::WGT_DEPTH;
  localparam int IW = tsr_pkg::INP_IDX_BITS;
  localparam int WW = tsr_pkg::WGT_IDX_BITS;
  localparam int DRAM_BYTES = 65536;
  localparam int NPERF = 6;          // first instructions: ideal DRAM, throughput check
  localparam int NINSN = 160;
  localparam int PERF_LAT = 6;       // ideal DRAM latency (cycles from request to data)
  localparam int NPERF2 = 8;         // next instructions: ideal DRAM with PERF_LAT2, run throughput
  localparam int PERF_LAT2 = 32;
  localparam int PERF2_BYTES = 2048; // about this much per instruction
  localparam int QD = 64;            // DRAM model request queue
  localparam int MAXCYC = 400000;

  logic clk = 1'b0;
  logic rst_n = 1'b0;
  always #5 clk = ~clk;

  // DUT ports
  logic         cmd_valid, cmd_ready;
  logic [127:0] cmd;
  logic         pop_valid, pop, push_ready, push;
  logic         rd_req_valid, rd_req_ready;
  logic [31:0]  rd_req_addr, rd_req_beats;
  logic         rd_data_valid, rd_data_ready;
  logic [BB*8-1:0] rd_data;
  logic         inp_we, wgt_we;
  logic [IW-1:0] inp_waddr;
  logic [WW-1:0] wgt_waddr;
  logic [IB*8-1:0] inp_wdata;
  logic [WB*8-1:0] wgt_wdata;
  logic         busy, stall_tok, stall_mem, err;
  logic [31:0]  insn_count;

  tsr_load dut (
    .clk_i             (clk),
    .rst_ni            (rst_n),
    .cmd_valid_i       (cmd_valid),
    .cmd_ready_o       (cmd_ready),
    .cmd_i             (cmd),
    .pop_next_valid_i  (pop_valid),
    .pop_next_o        (pop),
    .push_next_ready_i (push_ready),
    .push_next_o       (push),
    .rd_req_valid_o    (rd_req_valid),
    .rd_req_ready_i    (rd_req_ready),
    .rd_req_addr_o     (rd_req_addr),
    .rd_req_beats_o    (rd_req_beats),
    .rd_data_valid_i   (rd_data_valid),
    .rd_data_ready_o   (rd_data_ready),
    .rd_data_i         (rd_data),
    .inp_we_o          (inp_we),
    .inp_waddr_o       (inp_waddr),
    .inp_wdata_o       (inp_wdata),
    .wgt_we_o          (wgt_we),
    .wgt_waddr_o       (wgt_waddr),
    .wgt_wdata_o       (wgt_wdata),
    .busy_o            (busy),
    .stall_tok_o       (stall_tok),
    .stall_mem_o       (stall_mem),
    .insn_count_o      (insn_count),
    .err_o             (err)
  );

  localparam int SEED = 20240611;
  integer seed = SEED;
  function automatic integer rnd(input integer n);
    integer r;
    r = $random(seed);
    if (r < 0) r = -r;
    rnd = (n <= 0) ? 0 : (r % n);
  endfunction

  // ---------------- instruction stream and its fields ----------------
  logic [127:0] insn [NINSN];
  integer f_wgt [NINSN], f_base [NINSN], f_dram [NINSN], f_ys [NINSN], f_xs [NINSN];
  integer f_st [NINSN], f_yp0 [NINSN], f_yp1 [NINSN], f_xp0 [NINSN], f_xp1 [NINSN];
  integer f_pop [NINSN], f_push [NINSN], f_err [NINSN], f_writes [NINSN], f_pv [NINSN];
  integer pop_prefix [NINSN+1];

  task automatic make_insn(input integer k, input integer perf, input integer bad);
    integer eb, depth, row, rows, total, maxe, r, tries;
    logic [127:0] v;
    f_wgt[k] = perf ? (k % 2) : rnd(2);
    eb = f_wgt[k] ? WB : IB;
    depth = f_wgt[k] ? WD : ID;
    tries = 0;
    do begin
      f_xs[k]  = perf ? (f_wgt[k] ? 4 : 8) : ((rnd(10) == 0) ? 0 : 1 + rnd(8));
      f_ys[k]  = perf ? (f_wgt[k] ? 4 : 8) : rnd(6);
      f_xp0[k] = perf ? 1 : ((rnd(5) == 0) ? rnd(16) : rnd(3));
      f_xp1[k] = perf ? 2 : ((rnd(5) == 0) ? rnd(16) : rnd(3));
      f_yp0[k] = perf ? 1 : ((rnd(5) == 0) ? rnd(16) : rnd(3));
      f_yp1[k] = perf ? 1 : ((rnd(5) == 0) ? rnd(16) : rnd(3));
      row = f_xp0[k] + f_xs[k] + f_xp1[k];
      rows = f_yp0[k] + f_ys[k] + f_yp1[k];
      total = row * rows;
      tries = tries + 1;
    end while (f_xs[k] != 0 && total > depth);
    if (f_xs[k] == 0) begin
      // No transfer: any sram_base, even beyond the buffer, is fine.
      f_base[k] = rnd(1 << tsr_pkg::MEM_SRAM_BASE_W);
    end else if (bad) begin
      f_base[k] = depth - total + 1 + rnd(4);
      if (f_base[k] >= (1 << tsr_pkg::MEM_SRAM_BASE_W)) f_base[k] = (1 << tsr_pkg::MEM_SRAM_BASE_W) - 1;
    end else begin
      f_base[k] = rnd(depth - total + 1);
    end
    r = rnd(8);
    if (r < 3) f_st[k] = f_xs[k];
    else if (r < 7 || perf) f_st[k] = f_xs[k] + 1 + rnd(10);
    else f_st[k] = rnd(f_xs[k] + 1);   // overlapping or repeated rows
    // The region must fit the DRAM image (wide elements, large configs).
    while (f_ys[k] > 1 && (f_ys[k] - 1) * f_st[k] + f_xs[k] > DRAM_BYTES / eb) begin
      f_ys[k] = f_ys[k] - 1;
      rows = f_yp0[k] + f_ys[k] + f_yp1[k];
      total = row * rows;
    end
    maxe = DRAM_BYTES / eb - ((f_ys[k] > 0 ? f_ys[k] - 1 : 0) * f_st[k] + f_xs[k]);
    f_dram[k] = rnd(maxe + 1);
    f_pop[k]  = perf ? 0 : rnd(2);
    f_push[k] = perf ? 0 : rnd(2);
    f_pv[k]   = (f_wgt[k] || rnd(3) == 0) ? 0 : rnd(256) - 128;
    f_err[k]  = (f_xs[k] != 0) && (f_base[k] + total > depth);
    f_writes[k] = (f_xs[k] == 0 || f_err[k]) ? 0 : total;
    v = '0;
    v[tsr_pkg::MEM_OPCODE_LSB +: tsr_pkg::MEM_OPCODE_W]       = tsr_pkg::MEM_OPCODE_W'(tsr_pkg::OP_LOAD);
    v[tsr_pkg::MEM_POP_NEXT_LSB +: tsr_pkg::MEM_POP_NEXT_W]   = f_pop[k][0];
    v[tsr_pkg::MEM_PUSH_NEXT_LSB +: tsr_pkg::MEM_PUSH_NEXT_W] = f_push[k][0];
    v[tsr_pkg::MEM_MEM_TYPE_LSB +: tsr_pkg::MEM_MEM_TYPE_W]   =
        tsr_pkg::MEM_MEM_TYPE_W'(f_wgt[k] ? tsr_pkg::MEM_WGT : tsr_pkg::MEM_INP);
    v[tsr_pkg::MEM_SRAM_BASE_LSB +: tsr_pkg::MEM_SRAM_BASE_W] = tsr_pkg::MEM_SRAM_BASE_W'(f_base[k]);
    v[tsr_pkg::MEM_DRAM_BASE_LSB +: tsr_pkg::MEM_DRAM_BASE_W] = tsr_pkg::MEM_DRAM_BASE_W'(f_dram[k]);
    v[tsr_pkg::MEM_Y_SIZE_LSB +: tsr_pkg::MEM_Y_SIZE_W]       = tsr_pkg::MEM_Y_SIZE_W'(f_ys[k]);
    v[tsr_pkg::MEM_X_SIZE_LSB +: tsr_pkg::MEM_X_SIZE_W]       = tsr_pkg::MEM_X_SIZE_W'(f_xs[k]);
    v[tsr_pkg::MEM_X_STRIDE_LSB +: tsr_pkg::MEM_X_STRIDE_W]   = tsr_pkg::MEM_X_STRIDE_W'(f_st[k]);
    v[tsr_pkg::MEM_Y_PAD0_LSB +: tsr_pkg::MEM_Y_PAD0_W]       = tsr_pkg::MEM_Y_PAD0_W'(f_yp0[k]);
    v[tsr_pkg::MEM_Y_PAD1_LSB +: tsr_pkg::MEM_Y_PAD1_W]       = tsr_pkg::MEM_Y_PAD1_W'(f_yp1[k]);
    v[tsr_pkg::MEM_X_PAD0_LSB +: tsr_pkg::MEM_X_PAD0_W]       = tsr_pkg::MEM_X_PAD0_W'(f_xp0[k]);
    v[tsr_pkg::MEM_X_PAD1_LSB +: tsr_pkg::MEM_X_PAD1_W]       = tsr_pkg::MEM_X_PAD1_W'(f_xp1[k]);
    v[tsr_pkg::MEM_PAD_VALUE_LSB +: tsr_pkg::MEM_PAD_VALUE_W] = tsr_pkg::MEM_PAD_VALUE_W'(f_pv[k]);
    insn[k] = v;
  endtask

  // Second perf phase: no padding or tokens; alternately inp and wgt,
  // contiguous rows (k % 4 < 2) or rows of about 256 bytes with gaps.
  task automatic make_perf2(input integer k);
    integer eb, depth, e, total, maxe;
    f_wgt[k] = k % 2;
    eb = f_wgt[k] ? WB : IB;
    depth = f_wgt[k] ? WD : ID;
    e = PERF2_BYTES / eb;
    if (e > depth / 2) e = depth / 2;
    if (e < 1) e = 1;
    if (k % 4 < 2) begin
      f_ys[k] = 2;
      f_xs[k] = (e / 2 > 0) ? e / 2 : 1;
      f_st[k] = f_xs[k];
    end else begin
      f_xs[k] = 256 / eb;
      if (f_xs[k] > depth / 4) f_xs[k] = depth / 4;
      if (f_xs[k] < 1) f_xs[k] = 1;
      f_ys[k] = e / f_xs[k];
      if (f_ys[k] > 8) f_ys[k] = 8;
      if (f_ys[k] < 1) f_ys[k] = 1;
      f_st[k] = f_xs[k] + 1 + rnd(3);
      while (f_ys[k] > 1 && (f_ys[k] - 1) * f_st[k] + f_xs[k] > DRAM_BYTES / eb) f_ys[k] = f_ys[k] - 1;
    end
    f_xp0[k] = 0;
    f_xp1[k] = 0;
    f_yp0[k] = 0;
    f_yp1[k] = 0;
    f_pv[k]  = 0;
    total = f_xs[k] * f_ys[k];
    f_base[k] = rnd(depth - total + 1);
    maxe = DRAM_BYTES / eb - ((f_ys[k] - 1) * f_st[k] + f_xs[k]);
    f_dram[k] = rnd(maxe + 1);
    f_pop[k]  = 0;
    f_push[k] = 0;
    f_err[k]  = 0;
    f_writes[k] = total;
    insn[k] = '0;
    insn[k][tsr_pkg::MEM_OPCODE_LSB +: tsr_pkg::MEM_OPCODE_W]     = tsr_pkg::MEM_OPCODE_W'(tsr_pkg::OP_LOAD);
    insn[k][tsr_pkg::MEM_MEM_TYPE_LSB +: tsr_pkg::MEM_MEM_TYPE_W] =
        tsr_pkg::MEM_MEM_TYPE_W'(f_wgt[k] ? tsr_pkg::MEM_WGT : tsr_pkg::MEM_INP);
    insn[k][tsr_pkg::MEM_SRAM_BASE_LSB +: tsr_pkg::MEM_SRAM_BASE_W] = tsr_pkg::MEM_SRAM_BASE_W'(f_base[k]);
    insn[k][tsr_pkg::MEM_DRAM_BASE_LSB +: tsr_pkg::MEM_DRAM_BASE_W] = tsr_pkg::MEM_DRAM_BASE_W'(f_dram[k]);
    insn[k][tsr_pkg::MEM_Y_SIZE_LSB +: tsr_pkg::MEM_Y_SIZE_W]       = tsr_pkg::MEM_Y_SIZE_W'(f_ys[k]);
    insn[k][tsr_pkg::MEM_X_SIZE_LSB +: tsr_pkg::MEM_X_SIZE_W]       = tsr_pkg::MEM_X_SIZE_W'(f_xs[k]);
    insn[k][tsr_pkg::MEM_X_STRIDE_LSB +: tsr_pkg::MEM_X_STRIDE_W]   = tsr_pkg::MEM_X_STRIDE_W'(f_st[k]);
  endtask

  // ---------------- memories: DRAM image, SRAMs, expected SRAMs ----------------
  logic [7:0] dram [DRAM_BYTES];
  logic [IB*8-1:0] inp_mem [ID];
  logic [IB*8-1:0] inp_exp [ID];
  logic [WB*8-1:0] wgt_mem [WD];
  logic [WB*8-1:0] wgt_exp [WD];

  // The model: isa/semantics.md LOAD, row by row.
  task automatic model_insn(input integer k);
    integer eb, row, rows, r, y, x, e, b, l;
    logic [WB*8-1:0] val;
    logic [IB*8-1:0] pad_row;
    logic [7:0] pv8;
    pv8 = 8'(f_pv[k]);
    for (l = 0; l < IB * 8 / tsr_pkg::INP_WIDTH; l = l + 1)
      pad_row[l * tsr_pkg::INP_WIDTH +: tsr_pkg::INP_WIDTH] =
          {{(tsr_pkg::INP_WIDTH - 8){pv8[7]}}, pv8};
    if (f_xs[k] != 0 && !f_err[k]) begin
      eb = f_wgt[k] ? WB : IB;
      row = f_xp0[k] + f_xs[k] + f_xp1[k];
      rows = f_yp0[k] + f_ys[k] + f_yp1[k];
      r = f_base[k];
      for (y = 0; y < rows; y = y + 1) begin
        for (x = 0; x < row; x = x + 1) begin
          val = '0;
          if (!f_wgt[k]) val[IB*8-1:0] = pad_row;
          if (!(y < f_yp0[k] || y >= f_yp0[k] + f_ys[k] || x < f_xp0[k] || x >= f_xp0[k] + f_xs[k])) begin
            e = f_dram[k] + (y - f_yp0[k]) * f_st[k] + (x - f_xp0[k]);
            for (b = 0; b < eb; b = b + 1) val[8*b +: 8] = dram[e * eb + b];
          end
          if (f_wgt[k]) wgt_exp[r] = val;
          else inp_exp[r] = val[IB*8-1:0];
          r = r + 1;
        end
      end
    end
  endtask

  task automatic compare_all(input integer k);
    integer r;
    for (r = 0; r < ID; r = r + 1)
      if (inp_mem[r] !== inp_exp[r]) begin
        $display("FAIL after insn %0d: inp row %0d = %h, expected %h (seed %0d)", k, r, inp_mem[r],
                 inp_exp[r], SEED);
        $fatal(1);
      end
    for (r = 0; r < WD; r = r + 1)
      if (wgt_mem[r] !== wgt_exp[r]) begin
        $display("FAIL after insn %0d: wgt row %0d = %h, expected %h (seed %0d)", k, r, wgt_mem[r],
                 wgt_exp[r], SEED);
        $fatal(1);
      end
  endtask

  // SRAM write ports.
  always @(posedge clk) begin
    if (rst_n && inp_we) begin
      if (inp_waddr >= ID) begin $display("FAIL inp write to row %0d", inp_waddr); $fatal(1); end
      inp_mem[inp_waddr] <= inp_wdata;
    end
    if (rst_n && wgt_we) begin
      if (wgt_waddr >= WD) begin $display("FAIL wgt write to row %0d", wgt_waddr); $fatal(1); end
      wgt_mem[wgt_waddr] <= wgt_wdata;
    end
  end

  // ---------------- DRAM read model ----------------
  integer q_addr [QD], q_beats [QD], q_time [QD];
  integer q_head = 0, q_tail = 0, q_beat = 0;
  integer cycle = 0;
  logic ideal;          // perf phase: no back-pressure, fixed latency, no gaps
  integer lat = PERF_LAT;
  integer req_ready_pct, data_pct;

  always @(posedge clk) cycle <= cycle + 1;

  always @(posedge clk) begin
    if (rst_n && rd_req_valid && rd_req_ready) begin
      if (rd_req_addr % BB != 0 || rd_req_beats < 1 ||
          rd_req_addr + rd_req_beats * BB > DRAM_BYTES) begin
        $display("FAIL bad read request addr=%0h beats=%0d", rd_req_addr, rd_req_beats);
        $fatal(1);
      end
      if (q_tail - q_head >= QD) begin $display("FAIL DRAM model queue overflow"); $fatal(1); end
      q_addr[q_tail % QD]  = rd_req_addr;
      q_beats[q_tail % QD] = rd_req_beats;
      q_time[q_tail % QD]  = cycle + (ideal ? lat - 1 : 1 + rnd(24));
      q_tail = q_tail + 1;
    end
    if (rst_n && rd_data_valid && rd_data_ready) begin
      q_beat = q_beat + 1;
      if (q_beat == q_beats[q_head % QD]) begin
        q_beat = 0;
        q_head = q_head + 1;
      end
    end
  end

  always @(negedge clk) begin
    integer b, a;
    rd_req_ready  <= ideal ? 1'b1 : (rnd(100) < req_ready_pct);
    rd_data_valid <= 1'b0;
    rd_data       <= 'x;
    if (q_head != q_tail && cycle >= q_time[q_head % QD] && (ideal || rnd(100) < data_pct)) begin
      a = q_addr[q_head % QD] + q_beat * BB;
      rd_data_valid <= 1'b1;
      for (b = 0; b < BB; b = b + 1) rd_data[8*b +: 8] <= dram[a + b];
    end
  end

  // ---------------- command, token and push drivers ----------------
  integer cmd_idx = 0;
  integer tokens = 0, pops = 0, pushes = 0;
  integer pop_next_idx = 0;   // first instruction that may still pop
  integer push_pct;

  always @(negedge clk) begin
    // The second perf phase starts on an idle stage.
    cmd_valid <= (cmd_idx < NINSN) && (ideal || rnd(4) != 0) && !(cmd_idx == NPERF && done < NPERF);
    cmd <= (cmd_idx < NINSN) ? insn[cmd_idx] : 'x;
    if (ideal) begin
      push_ready <= 1'b1;
    end else begin
      push_ready <= rnd(100) < push_pct;
      if (tokens < tsr_pkg::DEP_QUEUE_DEPTH && rnd(40) == 0) tokens = tokens + 1;
    end
    pop_valid <= tokens > 0;
  end

  integer writes_cur = 0;   // SRAM writes of the instruction now executing
  always @(posedge clk) begin
    if (rst_n) begin
      if (cmd_valid && cmd_ready) cmd_idx <= cmd_idx + 1;
      if (pop) begin
        // Pops come in instruction order; the stage may take the next
        // instruction's pop while the current one (insn_count) still runs.
        while (pop_next_idx < NINSN && !f_pop[pop_next_idx]) pop_next_idx = pop_next_idx + 1;
        if (pop_next_idx >= NINSN) begin $display("FAIL pop after the last insn"); $fatal(1); end
        if (!pop_valid) begin $display("FAIL pop without a token"); $fatal(1); end
        if (pop_next_idx > insn_count + 1 || pop_next_idx >= cmd_idx) begin
          $display("FAIL pop for insn %0d while insn %0d runs (%0d accepted)", pop_next_idx,
                   insn_count, cmd_idx);
          $fatal(1);
        end
        pop_next_idx = pop_next_idx + 1;
        tokens = tokens - 1;
        pops = pops + 1;
      end
      // No write before the instruction's pop (writes are in instruction
      // order), no read before the pop of the instruction at most one ahead.
      if ((inp_we || wgt_we) &&
          (insn_count >= NINSN || pops < pop_prefix[insn_count + 1])) begin
        $display("FAIL insn %0d writes before its pop token", insn_count);
        $fatal(1);
      end
      if (rd_req_valid &&
          (insn_count >= NINSN || pops < pop_prefix[insn_count + 1])) begin
        $display("FAIL insn %0d active before its pop token", insn_count);
        $fatal(1);
      end
      if (inp_we || wgt_we) writes_cur = writes_cur + 1;
      if (push) begin
        if (insn_count >= NINSN) begin $display("FAIL push after the last insn"); $fatal(1); end
        if (!push_ready) begin $display("FAIL push while the queue is full"); $fatal(1); end
        if (!f_push[insn_count]) begin $display("FAIL push by insn %0d without push flag", insn_count); $fatal(1); end
        if (writes_cur != f_writes[insn_count]) begin
          $display("FAIL insn %0d pushed after %0d of %0d writes", insn_count, writes_cur,
                   f_writes[insn_count]);
          $fatal(1);
        end
        pushes = pushes + 1;
      end
    end
  end

  // ---------------- per-instruction check ----------------
  integer done = 0;
  integer t_last = 4;
  integer t2_start = 0, ideal2 = 0;
  integer any_err = 0;
  always @(negedge clk) begin
    integer ideal_cyc, eb, row, rows;
    if (rst_n && insn_count != done) begin
      if (insn_count != done + 1) begin $display("FAIL insn_count jumped to %0d", insn_count); $fatal(1); end
      if (writes_cur != f_writes[done]) begin
        $display("FAIL insn %0d completed after %0d of %0d writes", done, writes_cur, f_writes[done]);
        $fatal(1);
      end
      model_insn(done);
      compare_all(done);
      any_err = any_err | f_err[done];
      if (err !== any_err[0]) begin
        $display("FAIL after insn %0d err_o=%b, expected %0d", done, err, any_err);
        $fatal(1);
      end
      if (done < NPERF) begin
        eb = f_wgt[done] ? WB : IB;
        row = f_xp0[done] + f_xs[done] + f_xp1[done];
        rows = f_yp0[done] + f_ys[done] + f_yp1[done];
        ideal_cyc = row * rows - f_xs[done] * f_ys[done] +
                    f_xs[done] * f_ys[done] * ((eb > BB) ? eb / BB : 1);
        $display("perf insn %0d (%s): %0d cycles, %0d rows, ideal %0d + latency %0d", done,
                 f_wgt[done] ? "wgt" : "inp", cycle - t_last, row * rows, ideal_cyc, PERF_LAT);
        if (cycle - t_last > ideal_cyc + PERF_LAT + 8) begin
          $display("FAIL insn %0d too slow: %0d cycles for ideal %0d", done, cycle - t_last, ideal_cyc);
          $fatal(1);
        end
      end
      if (done >= NPERF && done < NPERF + NPERF2) begin
        eb = f_wgt[done] ? WB : IB;
        ideal2 = ideal2 + f_xs[done] * f_ys[done] * ((eb > BB) ? eb / BB : 1);
        if (done == NPERF + NPERF2 - 1) begin
          $display("perf run of %0d insns (latency %0d): %0d cycles, ideal %0d + latency", NPERF2,
                   PERF_LAT2, cycle - t2_start, ideal2);
          // 1% and one latency: no per-instruction or per-row bubbles.
          if (cycle - t2_start > ideal2 + ideal2 / 100 + PERF_LAT2 + 8) begin
            $display("FAIL perf run too slow: %0d cycles for ideal %0d", cycle - t2_start, ideal2);
            $fatal(1);
          end
        end
      end
      writes_cur = 0;
      t_last = cycle;
      done = done + 1;
      if (done == NPERF) begin
        lat = PERF_LAT2;
        t2_start = cycle;
      end
      if (done == NPERF + NPERF2) ideal = 1'b0;
    end
  end

  // ---------------- main ----------------
  initial begin
    integer k, r, b, npop, npush;
    $display("tb_load: seed %0d", SEED);
    ideal = 1'b1;
    req_ready_pct = 70;
    data_pct = 75;
    push_pct = 60;
    cmd_valid = 1'b0;
    pop_valid = 1'b0;
    push_ready = 1'b0;
    rd_req_ready = 1'b0;
    rd_data_valid = 1'b0;
    for (r = 0; r < DRAM_BYTES; r = r + 1) dram[r] = 8'(rnd(256));
    for (r = 0; r < ID; r = r + 1) begin
      for (b = 0; b < IB; b = b + 1) inp_mem[r][8*b +: 8] = 8'(rnd(256));
      inp_exp[r] = inp_mem[r];
    end
    for (r = 0; r < WD; r = r + 1) begin
      for (b = 0; b < WB; b = b + 1) wgt_mem[r][8*b +: 8] = 8'(rnd(256));
      wgt_exp[r] = wgt_mem[r];
    end
    npop = 0;
    npush = 0;
    pop_prefix[0] = 0;
    for (k = 0; k < NINSN; k = k + 1) begin
      if (k >= NPERF && k < NPERF + NPERF2) make_perf2(k);
      else make_insn(k, k < NPERF, k == NINSN - 20 || k == NINSN - 5);
      npop = npop + f_pop[k];
      npush = npush + f_push[k];
      pop_prefix[k + 1] = npop;
    end
    repeat (4) @(posedge clk);
    rst_n = 1'b1;
    while (done < NINSN && cycle < MAXCYC) begin
      @(posedge clk);
      // Vary the pressure so both starved and saturated phases occur.
      if (cycle % 2000 == 0) begin
        req_ready_pct = 20 + rnd(81);
        data_pct = 20 + rnd(81);
        push_pct = 5 + rnd(96);
      end
      // Keep the token supply going so every pop is eventually served.
      if (!ideal && tokens == 0 && stall_tok && rnd(8) == 0) tokens = tokens + 1;
    end
    if (done != NINSN) begin
      $display("FAIL timeout: %0d of %0d instructions done (busy=%b stall_tok=%b stall_mem=%b)",
               done, NINSN, busy, stall_tok, stall_mem);
      $fatal(1);
    end
    repeat (5) @(posedge clk);
    if (pops != npop || pushes != npush) begin
      $display("FAIL tokens: %0d pops (expected %0d), %0d pushes (expected %0d)", pops, npop,
               pushes, npush);
      $fatal(1);
    end
    if (q_head != q_tail || busy) begin $display("FAIL reads outstanding at the end"); $fatal(1); end
    $display("tb_load: %0d instructions, %0d cycles, %0d pops, %0d pushes", NINSN, cycle, pops, pushes);
    $display("PASS");
    $finish;
  end
endmodule
