// tb_store: self-checking testbench for tsr_store. Random STORE instructions
// (random sram_base, sizes, strides == and > x_size, x_size == 0, and
// malformed ones: padded, wrong memory type, rows beyond the buffer) read a
// random out SRAM (1-cycle read latency) and write through a port-level DRAM
// write model with random request/data back-pressure and random write
// acknowledgement latency. After every instruction the whole DRAM image is
// compared with an independent model of isa/semantics.md, so bytes next to
// the written elements must be untouched; the instruction may complete and
// push only when every write it issued is acknowledged. Tokens: nothing may
// happen before the pop token; push only with room in the queue. A first
// phase with an ideal DRAM checks throughput.
`timescale 1ns/1ps
module tb_store;
  localparam int BB = tsr_pkg::BUS_BYTES;
  localparam int OB = tsr_pkg::OUT_BYTES;
  localparam int OD = tsr_pkg::OUT_DEPTH;
  localparam int AW = tsr_pkg::ACC_IDX_BITS;
  localparam int DRAM_BYTES = 16384;
  localparam int NPERF = 4;
  localparam int NINSN = 160;
  localparam int PERF_LAT = 4;       // ideal write acknowledgement latency
  localparam int QD = 256;
  localparam int MAXCYC = 400000;

  logic clk = 1'b0;
  logic rst_n = 1'b0;
  always #5 clk = ~clk;

  logic         cmd_valid, cmd_ready;
  logic [127:0] cmd;
  logic         pop_valid, pop, push_ready, push;
  logic         wr_req_valid, wr_req_ready;
  logic [31:0]  wr_req_addr, wr_req_beats;
  logic         wr_data_valid, wr_data_ready;
  logic [BB*8-1:0] wr_data;
  logic [BB-1:0] wr_strb;
  logic         wr_done;
  logic         out_re;
  logic [AW-1:0] out_raddr;
  logic [OB*8-1:0] out_rdata;
  logic         busy, stall_tok, stall_mem, err;
  logic [31:0]  insn_count;

  tsr_store dut (
    .clk_i             (clk),
    .rst_ni            (rst_n),
    .cmd_valid_i       (cmd_valid),
    .cmd_ready_o       (cmd_ready),
    .cmd_i             (cmd),
    .pop_prev_valid_i  (pop_valid),
    .pop_prev_o        (pop),
    .push_prev_ready_i (push_ready),
    .push_prev_o       (push),
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
    .busy_o            (busy),
    .stall_tok_o       (stall_tok),
    .stall_mem_o       (stall_mem),
    .insn_count_o      (insn_count),
    .err_o             (err)
  );

  localparam int SEED = 20240612;
  integer seed = SEED;
  function automatic integer rnd(input integer n);
    integer r;
    r = $random(seed);
    if (r < 0) r = -r;
    rnd = (n <= 0) ? 0 : (r % n);
  endfunction

  // ---------------- instruction stream ----------------
  logic [127:0] insn [NINSN];
  integer f_base [NINSN], f_dram [NINSN], f_ys [NINSN], f_xs [NINSN], f_st [NINSN];
  integer f_pop [NINSN], f_push [NINSN], f_err [NINSN], f_do [NINSN], f_mem [NINSN], f_pad [NINSN];
  integer pop_prefix [NINSN+1];

  // bad: 0 none, 1 rows beyond the buffer, 2 padded, 3 wrong memory type
  task automatic make_insn(input integer k, input integer perf, input integer bad);
    integer n, maxe, r;
    logic [127:0] v;
    do begin
      f_xs[k] = perf ? 8 : ((rnd(10) == 0) ? 0 : 1 + rnd(8));
      f_ys[k] = perf ? 6 : rnd(6);
      n = f_xs[k] * f_ys[k];
    end while (n > OD || (bad != 0 && n == 0));
    f_mem[k] = (bad == 3) ? tsr_pkg::MEM_ACC : tsr_pkg::MEM_OUT;
    f_pad[k] = (bad == 2) ? 1 + rnd(15) : 0;
    if (f_xs[k] == 0) f_base[k] = rnd(1 << tsr_pkg::MEM_SRAM_BASE_W);
    else if (bad == 1) f_base[k] = OD - n + 1 + rnd(3);
    else f_base[k] = rnd(OD - n + 1);
    if (f_base[k] >= (1 << tsr_pkg::MEM_SRAM_BASE_W)) f_base[k] = (1 << tsr_pkg::MEM_SRAM_BASE_W) - 1;
    r = rnd(3);
    f_st[k] = (r == 0 && !perf) ? f_xs[k] : f_xs[k] + 1 + rnd(10);
    maxe = DRAM_BYTES / OB - ((f_ys[k] > 0 ? f_ys[k] - 1 : 0) * f_st[k] + f_xs[k]);
    f_dram[k] = rnd(maxe + 1);
    f_pop[k]  = perf ? 0 : rnd(2);
    f_push[k] = perf ? 0 : rnd(2);
    f_err[k]  = (f_xs[k] != 0) && (bad != 0);
    f_do[k]   = (f_xs[k] != 0) && !f_err[k];
    v = '0;
    v[tsr_pkg::MEM_OPCODE_LSB +: tsr_pkg::MEM_OPCODE_W]       = tsr_pkg::MEM_OPCODE_W'(tsr_pkg::OP_STORE);
    v[tsr_pkg::MEM_POP_PREV_LSB +: tsr_pkg::MEM_POP_PREV_W]   = f_pop[k][0];
    v[tsr_pkg::MEM_PUSH_PREV_LSB +: tsr_pkg::MEM_PUSH_PREV_W] = f_push[k][0];
    v[tsr_pkg::MEM_MEM_TYPE_LSB +: tsr_pkg::MEM_MEM_TYPE_W]   = tsr_pkg::MEM_MEM_TYPE_W'(f_mem[k]);
    v[tsr_pkg::MEM_SRAM_BASE_LSB +: tsr_pkg::MEM_SRAM_BASE_W] = tsr_pkg::MEM_SRAM_BASE_W'(f_base[k]);
    v[tsr_pkg::MEM_DRAM_BASE_LSB +: tsr_pkg::MEM_DRAM_BASE_W] = tsr_pkg::MEM_DRAM_BASE_W'(f_dram[k]);
    v[tsr_pkg::MEM_Y_SIZE_LSB +: tsr_pkg::MEM_Y_SIZE_W]       = tsr_pkg::MEM_Y_SIZE_W'(f_ys[k]);
    v[tsr_pkg::MEM_X_SIZE_LSB +: tsr_pkg::MEM_X_SIZE_W]       = tsr_pkg::MEM_X_SIZE_W'(f_xs[k]);
    v[tsr_pkg::MEM_X_STRIDE_LSB +: tsr_pkg::MEM_X_STRIDE_W]   = tsr_pkg::MEM_X_STRIDE_W'(f_st[k]);
    // A padded store puts its padding on one random side.
    r = rnd(4);
    if (r == 0) v[tsr_pkg::MEM_Y_PAD0_LSB +: tsr_pkg::MEM_Y_PAD0_W] = tsr_pkg::MEM_Y_PAD0_W'(f_pad[k]);
    if (r == 1) v[tsr_pkg::MEM_Y_PAD1_LSB +: tsr_pkg::MEM_Y_PAD1_W] = tsr_pkg::MEM_Y_PAD1_W'(f_pad[k]);
    if (r == 2) v[tsr_pkg::MEM_X_PAD0_LSB +: tsr_pkg::MEM_X_PAD0_W] = tsr_pkg::MEM_X_PAD0_W'(f_pad[k]);
    if (r == 3) v[tsr_pkg::MEM_X_PAD1_LSB +: tsr_pkg::MEM_X_PAD1_W] = tsr_pkg::MEM_X_PAD1_W'(f_pad[k]);
    insn[k] = v;
  endtask

  // ---------------- memories ----------------
  logic [7:0] dram [DRAM_BYTES];
  logic [7:0] dram_exp [DRAM_BYTES];
  logic [OB*8-1:0] out_mem [OD];

  task automatic model_insn(input integer k);
    integer y, x, b, e, r;
    r = f_base[k];
    if (f_do[k])
      for (y = 0; y < f_ys[k]; y = y + 1)
        for (x = 0; x < f_xs[k]; x = x + 1) begin
          e = f_dram[k] + y * f_st[k] + x;
          for (b = 0; b < OB; b = b + 1) dram_exp[e * OB + b] = out_mem[r][8*b +: 8];
          r = r + 1;
        end
  endtask

  task automatic compare_all(input integer k);
    integer a;
    for (a = 0; a < DRAM_BYTES; a = a + 1)
      if (dram[a] !== dram_exp[a]) begin
        $display("FAIL after insn %0d: DRAM byte 0x%0h = %h, expected %h (seed %0d)", k, a, dram[a],
                 dram_exp[a], SEED);
        $fatal(1);
      end
  endtask

  // out SRAM: data the cycle after re; undefined otherwise so a late sample shows.
  always @(posedge clk) begin
    if (rst_n && out_re) begin
      if (out_raddr >= OD) begin $display("FAIL out read of row %0d", out_raddr); $fatal(1); end
      out_rdata <= out_mem[out_raddr];
    end else begin
      out_rdata <= 'x;
    end
  end

  // ---------------- DRAM write model ----------------
  integer rq_addr [QD], rq_beats [QD];
  integer rq_head = 0, rq_tail = 0, rq_beat = 0;
  logic [BB*8-1:0] bq_data [QD];
  logic [BB-1:0] bq_strb [QD];
  integer bq_head = 0, bq_tail = 0;
  integer dq_time [QD];
  integer dq_head = 0, dq_tail = 0, dq_last = 0;
  integer reqs = 0, dones = 0;
  integer cycle = 0;
  logic ideal;
  integer req_pct, data_pct;

  always @(posedge clk) cycle <= cycle + 1;

  always @(posedge clk) begin
    integer a, b;
    if (rst_n) begin
      if (wr_req_valid && wr_req_ready) begin
        if (wr_req_addr % BB != 0 || wr_req_beats < 1 ||
            wr_req_addr + wr_req_beats * BB > DRAM_BYTES) begin
          $display("FAIL bad write request addr=%0h beats=%0d", wr_req_addr, wr_req_beats);
          $fatal(1);
        end
        rq_addr[rq_tail % QD] = wr_req_addr;
        rq_beats[rq_tail % QD] = wr_req_beats;
        rq_tail = rq_tail + 1;
        reqs = reqs + 1;
      end
      if (wr_data_valid && wr_data_ready) begin
        bq_data[bq_tail % QD] = wr_data;
        bq_strb[bq_tail % QD] = wr_strb;
        bq_tail = bq_tail + 1;
      end
      if (wr_done) begin
        dq_head = dq_head + 1;
        dones = dones + 1;
      end
      // Beats go to requests in order (data may run ahead of its request).
      while (rq_head != rq_tail && bq_head != bq_tail) begin
        a = rq_addr[rq_head % QD] + rq_beat * BB;
        for (b = 0; b < BB; b = b + 1)
          if (bq_strb[bq_head % QD][b]) dram[a + b] = bq_data[bq_head % QD][8*b +: 8];
        bq_head = bq_head + 1;
        rq_beat = rq_beat + 1;
        if (rq_beat == rq_beats[rq_head % QD]) begin
          rq_beat = 0;
          rq_head = rq_head + 1;
          dq_last = ((dq_last > cycle) ? dq_last : cycle) + (ideal ? PERF_LAT : 1 + rnd(20));
          dq_time[dq_tail % QD] = dq_last;
          dq_tail = dq_tail + 1;
        end
      end
    end
  end

  always @(negedge clk) begin
    wr_req_ready  <= ideal ? 1'b1 : (rnd(100) < req_pct);
    wr_data_ready <= ideal ? 1'b1 : (rnd(100) < data_pct);
    wr_done       <= (dq_head != dq_tail) && (cycle >= dq_time[dq_head % QD]);
  end

  // ---------------- commands and tokens ----------------
  integer cmd_idx = 0;
  integer tokens = 0, pops = 0, pushes = 0;
  integer push_pct;

  always @(negedge clk) begin
    cmd_valid <= (cmd_idx < NINSN) && (ideal || rnd(4) != 0);
    cmd <= (cmd_idx < NINSN) ? insn[cmd_idx] : 'x;
    if (ideal) begin
      push_ready <= 1'b1;
    end else begin
      push_ready <= rnd(100) < push_pct;
      if (tokens < tsr_pkg::DEP_QUEUE_DEPTH && rnd(40) == 0) tokens = tokens + 1;
    end
    pop_valid <= tokens > 0;
  end

  always @(posedge clk) begin
    if (rst_n) begin
      if (cmd_valid && cmd_ready) cmd_idx <= cmd_idx + 1;
      if (pop) begin
        if (insn_count >= NINSN) begin $display("FAIL pop after the last insn"); $fatal(1); end
        if (!pop_valid) begin $display("FAIL pop without a token"); $fatal(1); end
        if (!f_pop[insn_count]) begin $display("FAIL pop by insn %0d without pop flag", insn_count); $fatal(1); end
        tokens = tokens - 1;
        pops = pops + 1;
      end
      if ((out_re || wr_req_valid || wr_data_valid) &&
          (insn_count >= NINSN || pops < pop_prefix[insn_count + 1])) begin
        $display("FAIL insn %0d active before its pop token", insn_count);
        $fatal(1);
      end
      if ((out_re || wr_req_valid || wr_data_valid) && insn_count < NINSN && !f_do[insn_count]) begin
        $display("FAIL insn %0d accesses memory but must not", insn_count);
        $fatal(1);
      end
      if (push) begin
        if (insn_count >= NINSN) begin $display("FAIL push after the last insn"); $fatal(1); end
        if (!push_ready) begin $display("FAIL push while the queue is full"); $fatal(1); end
        if (!f_push[insn_count]) begin $display("FAIL push by insn %0d without push flag", insn_count); $fatal(1); end
        if (dones != reqs || rq_head != rq_tail || bq_head != bq_tail) begin
          $display("FAIL insn %0d pushed with writes outstanding (%0d of %0d done)", insn_count,
                   dones, reqs);
          $fatal(1);
        end
        pushes = pushes + 1;
      end
    end
  end

  // ---------------- per-instruction check ----------------
  integer done = 0;
  integer t_last = 4;
  integer any_err = 0;
  always @(negedge clk) begin
    integer ideal_cyc;
    if (rst_n && insn_count != done) begin
      if (insn_count != done + 1) begin $display("FAIL insn_count jumped to %0d", insn_count); $fatal(1); end
      if (dones != reqs || rq_head != rq_tail || bq_head != bq_tail) begin
        $display("FAIL insn %0d completed with writes outstanding (%0d of %0d done)", done, dones, reqs);
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
        ideal_cyc = f_xs[done] * f_ys[done] * ((OB > BB) ? OB / BB : 1);
        $display("perf insn %0d: %0d cycles for %0d rows, ideal %0d + ack latency %0d", done,
                 cycle - t_last, f_xs[done] * f_ys[done], ideal_cyc, PERF_LAT);
        if (cycle - t_last > ideal_cyc + PERF_LAT + 12) begin
          $display("FAIL insn %0d too slow: %0d cycles for ideal %0d", done, cycle - t_last, ideal_cyc);
          $fatal(1);
        end
      end
      t_last = cycle;
      done = done + 1;
      if (done == NPERF) ideal = 1'b0;
    end
  end

  // ---------------- main ----------------
  initial begin
    integer k, r, b, npop, npush, bad;
    $display("tb_store: seed %0d", SEED);
    ideal = 1'b1;
    req_pct = 70;
    data_pct = 70;
    push_pct = 60;
    cmd_valid = 1'b0;
    pop_valid = 1'b0;
    push_ready = 1'b0;
    wr_req_ready = 1'b0;
    wr_data_ready = 1'b0;
    wr_done = 1'b0;
    for (r = 0; r < DRAM_BYTES; r = r + 1) begin
      dram[r] = 8'(rnd(256));
      dram_exp[r] = dram[r];
    end
    for (r = 0; r < OD; r = r + 1)
      for (b = 0; b < OB; b = b + 1) out_mem[r][8*b +: 8] = 8'(rnd(256));
    npop = 0;
    npush = 0;
    pop_prefix[0] = 0;
    for (k = 0; k < NINSN; k = k + 1) begin
      bad = 0;
      if (k == NINSN - 30) bad = 1;
      if (k == NINSN - 20) bad = 2;
      if (k == NINSN - 10) bad = 3;
      make_insn(k, k < NPERF, bad);
      npop = npop + f_pop[k];
      npush = npush + f_push[k];
      pop_prefix[k + 1] = npop;
    end
    repeat (4) @(posedge clk);
    rst_n = 1'b1;
    while (done < NINSN && cycle < MAXCYC) begin
      @(posedge clk);
      if (cycle % 2000 == 0) begin
        req_pct = 20 + rnd(81);
        data_pct = 20 + rnd(81);
        push_pct = 5 + rnd(96);
      end
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
    if (busy || reqs != dones) begin $display("FAIL writes outstanding at the end"); $fatal(1); end
    $display("tb_store: %0d instructions, %0d cycles, %0d write requests, %0d pops, %0d pushes",
             NINSN, cycle, reqs, pops, pushes);
    $display("PASS");
    $finish;
  end
endmodule
