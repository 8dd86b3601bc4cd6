// tb_compute: self-checking testbench of tsr_compute. An independent model
// of isa/semantics.md (LOAD uop/acc/acc8, GEMM, ALU, FINISH; written from the
// spec text, with 64-bit integer arithmetic) runs each instruction as it is
// queued; the DUT's uop/acc buffers (read hierarchically), the out SRAM
// model and the op/token/finish counts are compared when the DUT is idle.
// Around the DUT: a port-level DRAM read model (random request acceptance,
// random data gaps, several requests outstanding), inp/wgt SRAM models
// (1-cycle read latency), an out SRAM model, token sources and push sinks
// with random back-pressure. Also checks one tensor op per cycle (first to
// last gemm_op_o/alu_op_o pulse == ops-1), that nothing executes while a
// token is held back, that a blocked push holds the stage, the sticky
// error on an out-of-range index, and (bank-rule phase, counted through
// hierarchical references) that accumulator LOADs run beside a pipe busy in
// the other bank and complete in the cycle a pipe retires.
module tb_compute;
  localparam int B = tsr_pkg::BATCH;
  localparam int BI = tsr_pkg::BLOCK_IN;
  localparam int BO = tsr_pkg::BLOCK_OUT;
  localparam int IW = tsr_pkg::INP_WIDTH;
  localparam int WW = tsr_pkg::WGT_WIDTH;
  localparam int AW = tsr_pkg::ACC_WIDTH;
  localparam int OW = tsr_pkg::OUT_WIDTH;
  localparam int LANES = B * BO;
  localparam int UOPR = tsr_pkg::UOP_BYTES * 8;
  localparam int INPR = tsr_pkg::INP_BYTES * 8;
  localparam int WGTR = tsr_pkg::WGT_BYTES * 8;
  localparam int ACCR = tsr_pkg::ACC_BYTES * 8;
  localparam int OUTR = tsr_pkg::OUT_BYTES * 8;
  localparam int UD = tsr_pkg::UOP_DEPTH;
  localparam int ID = tsr_pkg::INP_DEPTH;
  localparam int WD = tsr_pkg::WGT_DEPTH;
  localparam int AD = tsr_pkg::ACC_DEPTH;
  localparam int BW = tsr_pkg::DRAM_BUS_WIDTH;
  localparam int BB = BW / 8;
  localparam int DRAM_BYTES = 1 << 18;
  localparam int STAGE = DRAM_BYTES - (1 << 16);  // staging area for uops/edge rows
  localparam int MEM_UOP = tsr_pkg::MEM_UOP;
  localparam int MEM_ACC = tsr_pkg::MEM_ACC;
  localparam int MEM_ACC8 = tsr_pkg::MEM_ACC8;
  localparam int BIG = (AD >= 1024) ? 1 : 0;  // default preset: fewer rounds
  localparam int LOGSZ = 65536;

  // ------------------------------------------------------------------
  // Clock, reset, randomness, failure
  // ------------------------------------------------------------------
  logic clk = 1'b0;
  logic rst_n = 1'b0;
  always #5 clk = ~clk;
  integer seed = 32'h5eed_c0de;
  int cyc = 0;
  always @(posedge clk) cyc <= cyc + 1;

  function automatic int rnd(input int n);
    rnd = (n <= 1) ? 0 : $unsigned($random(seed)) % n;
  endfunction

  task automatic fail(input string msg);
    $display("FAIL %s (cycle %0d, seed 0x%08x)", msg, cyc, 32'h5eed_c0de);
    $fatal(1);
  endtask

  // ------------------------------------------------------------------
  // DUT
  // ------------------------------------------------------------------
  logic         cmd_valid, cmd_ready;
  logic [127:0] cmd;
  logic         pop_prev_valid, pop_prev, pop_next_valid, pop_next;
  logic         push_prev_ready, push_prev, push_next_ready, push_next;
  logic         rd_req_valid, rd_req_ready, rd_data_valid, rd_data_ready;
  logic [31:0]  rd_req_addr, rd_req_beats;
  logic [BW-1:0] rd_data;
  logic         inp_re, wgt_re;
  logic [1:0]   out_we;
  logic [tsr_pkg::INP_IDX_BITS-1:0] inp_raddr;
  logic [tsr_pkg::WGT_IDX_BITS-1:0] wgt_raddr;
  logic [2*(tsr_pkg::ACC_IDX_BITS-1)-1:0] out_waddr;  // per bank
  logic [INPR-1:0] inp_rdata;
  logic [WGTR-1:0] wgt_rdata;
  logic [2*OUTR-1:0] out_wdata;
  logic         busy, stall_tok, stall_mem, finish, gemm_op, alu_op, err;
  logic [31:0]  insn_count;

  tsr_compute dut (
    .clk_i             (clk),
    .rst_ni            (rst_n),
    .cmd_valid_i       (cmd_valid),
    .cmd_ready_o       (cmd_ready),
    .cmd_i             (cmd),
    .pop_prev_valid_i  (pop_prev_valid),
    .pop_prev_o        (pop_prev),
    .pop_next_valid_i  (pop_next_valid),
    .pop_next_o        (pop_next),
    .push_prev_ready_i (push_prev_ready),
    .push_prev_o       (push_prev),
    .push_next_ready_i (push_next_ready),
    .push_next_o       (push_next),
    .rd_req_valid_o    (rd_req_valid),
    .rd_req_ready_i    (rd_req_ready),
    .rd_req_addr_o     (rd_req_addr),
    .rd_req_beats_o    (rd_req_beats),
    .rd_data_valid_i   (rd_data_valid),
    .rd_data_ready_o   (rd_data_ready),
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
    .busy_o            (busy),
    .stall_tok_o       (stall_tok),
    .stall_mem_o       (stall_mem),
    .insn_count_o      (insn_count),
    .finish_o          (finish),
    .gemm_op_o         (gemm_op),
    .alu_op_o          (alu_op),
    .err_o             (err)
  );

  // ------------------------------------------------------------------
  // SRAM models: inp/wgt (1-cycle read), out (write port)
  // ------------------------------------------------------------------
  logic [INPR-1:0] inp_mem [ID];
  logic [WGTR-1:0] wgt_mem [WD];
  logic [OUTR-1:0] out_mem [AD];

  always @(posedge clk) begin
    if (inp_re) begin
      if (inp_raddr >= ID) fail("inp read out of range");
      inp_rdata <= inp_mem[inp_raddr];
    end
    if (wgt_re) begin
      if (wgt_raddr >= WD) fail("wgt read out of range");
      wgt_rdata <= wgt_mem[wgt_raddr];
    end
    // the output buffer is banked by the row index MSB
    for (int b = 0; b < 2; b++) begin
      if (out_we[b]) out_mem[b * (AD / 2) + out_waddr[b*(tsr_pkg::ACC_IDX_BITS-1) +: tsr_pkg::ACC_IDX_BITS-1]]
                       <= out_wdata[b*OUTR +: OUTR];
    end
  end

  // ------------------------------------------------------------------
  // DRAM read-port model
  // ------------------------------------------------------------------
  logic [7:0] dram [DRAM_BYTES];
  int rq_addr [64];
  int rq_beats [64];
  int rq_wr = 0, rq_rd = 0, beat_i = 0;
  int req_pct = 70, data_pct = 70;
  int mem_stall_cycles = 0;

  function automatic logic [BW-1:0] dram_beat(input int addr);
    for (int k = 0; k < BB; k++) dram_beat[k*8 +: 8] = dram[addr + k];
  endfunction

  always @(posedge clk) begin
    if (!rst_n) begin
      rd_req_ready  <= 1'b0;
      rd_data_valid <= 1'b0;
      rd_data       <= '0;
      rq_rd = rq_wr;
      beat_i = 0;
    end else begin
      if (stall_mem) mem_stall_cycles = mem_stall_cycles + 1;
      if (rd_req_valid && rd_req_ready) begin
        if (rd_req_addr % BB != 0) fail($sformatf("unaligned read request 0x%0x", rd_req_addr));
        if (rd_req_beats < 1) fail("read request of 0 beats");
        if (rd_req_addr + rd_req_beats * BB > DRAM_BYTES)
          fail($sformatf("read request 0x%0x + %0d beats outside DRAM", rd_req_addr, rd_req_beats));
        if (rq_wr - rq_rd >= 64) fail("too many outstanding reads for the model");
        rq_addr[rq_wr % 64] = rd_req_addr;
        rq_beats[rq_wr % 64] = rd_req_beats;
        rq_wr = rq_wr + 1;
      end
      if (rd_data_valid && rd_data_ready) begin
        beat_i = beat_i + 1;
        if (beat_i == rq_beats[rq_rd % 64]) begin
          rq_rd = rq_rd + 1;
          beat_i = 0;
        end
      end
      rd_req_ready <= (rnd(100) < req_pct);
      // Valid stays up until taken (valid/ready rule); data follows the beat.
      if (!(rd_data_valid && !rd_data_ready)) begin
        if (rq_rd != rq_wr && rnd(100) < data_pct) begin
          rd_data_valid <= 1'b1;
          rd_data <= dram_beat(rq_addr[rq_rd % 64] + beat_i * BB);
        end else begin
          rd_data_valid <= 1'b0;
        end
      end
    end
  end

  // ------------------------------------------------------------------
  // Command driver (queue filled by the test sequence)
  // ------------------------------------------------------------------
  logic [127:0] cq [4096];
  int cq_wr = 0, cq_rd = 0, cmd_pct = 80;
  int cnt_base = 0;  // instructions dropped by a reset (error tests)

  always @(posedge clk) begin
    if (!rst_n) begin
      cmd_valid <= 1'b0;
      cmd <= '0;
      cq_rd = cq_wr;
    end else begin
      if (cmd_valid && cmd_ready) cq_rd = cq_rd + 1;
      if (!cmd_valid || cmd_ready) begin
        if (cq_rd != cq_wr && rnd(100) < cmd_pct) begin
          cmd_valid <= 1'b1;
          cmd <= cq[cq_rd % 4096];
        end else begin
          cmd_valid <= 1'b0;
        end
      end
    end
  end

  // ------------------------------------------------------------------
  // Token sources and push sinks
  // ------------------------------------------------------------------
  int prev_given = 0, prev_taken = 0, next_given = 0, next_taken = 0;
  int prev_pushed = 0, next_pushed = 0, exp_prev_push = 0, exp_next_push = 0;
  int push_pct = 75;
  bit prev_block = 0, next_block = 0;
  logic prev_rdy_r, next_rdy_r;
  assign pop_prev_valid = (prev_given > prev_taken);
  assign pop_next_valid = (next_given > next_taken);
  assign push_prev_ready = prev_rdy_r && !prev_block;
  assign push_next_ready = next_rdy_r && !next_block;

  always @(posedge clk) begin
    if (!rst_n) begin
      prev_rdy_r <= 1'b0;
      next_rdy_r <= 1'b0;
    end else begin
      prev_rdy_r <= (rnd(100) < push_pct);
      next_rdy_r <= (rnd(100) < push_pct);
      if (pop_prev) begin
        if (!pop_prev_valid) fail("pop_prev_o without a token");
        prev_taken <= prev_taken + 1;
      end
      if (pop_next) begin
        if (!pop_next_valid) fail("pop_next_o without a token");
        next_taken <= next_taken + 1;
      end
      if (push_prev) begin
        if (!push_prev_ready) fail("push_prev_o while the queue is full");
        prev_pushed <= prev_pushed + 1;
      end
      if (push_next) begin
        if (!push_next_ready) fail("push_next_o while the queue is full");
        next_pushed <= next_pushed + 1;
      end
    end
  end

  // ------------------------------------------------------------------
  // Activity monitors
  // ------------------------------------------------------------------
  int g_total = 0, a_total = 0, fin_total = 0;
  // Cycles from the first to the last ALU op of the last ALU instruction, as
  // the model walks its ops (m_loops): one per op, and under ACC_SINGLE_COPY
  // one more for each op after the first that reads a src row other than the
  // one the op before it read (the pipe keeps that row; a new read waits for
  // the write of the op ahead on the bank's one port).
  int a_span = 0;
  int g_log [LOGSZ];
  int a_log [LOGSZ];
  bit hold = 0;  // a token is held back / a push is blocked: nothing may run

  always @(posedge clk) begin
    if (rst_n) begin
      if (gemm_op) begin
        if (!busy) fail("gemm_op_o while not busy");
        g_log[g_total % LOGSZ] = cyc;
        g_total = g_total + 1;
      end
      if (alu_op) begin
        if (!busy) fail("alu_op_o while not busy");
        a_log[a_total % LOGSZ] = cyc;
        a_total = a_total + 1;
      end
      if (finish) fin_total = fin_total + 1;
      if (verbose && dut.err_d && !dut.err_q)
        $display("[%0d] DUT error at insn %0d: cmd %h", cyc, insn_count, dut.cmd_q);
      if (verbose && dut.u_pipe_gemm.p1_err)
        $display("[%0d] DUT GEMM p1_err: dst %0d src %0d wgt %0d", cyc, dut.u_pipe_gemm.dst_idx,
                 dut.u_pipe_gemm.src_idx, dut.u_pipe_gemm.wgt_idx);
      if (verbose && dut.u_pipe_alu.p1_err)
        $display("[%0d] DUT ALU p1_err: dst %0d src %0d", cyc, dut.u_pipe_alu.dst_idx, dut.u_pipe_alu.src_idx);
      if (hold && (gemm_op || alu_op || out_we || rd_req_valid || inp_re || wgt_re || finish))
        fail("activity while a token is held back or a push is blocked");
    end
  end

  // Overlap of accumulator LOADs with the pipes (bank-rule phase only, ov_on):
  // cycles in which a load writes acc while a pipe is busy, cycles in which
  // the dispatcher completes an instruction in S_PUSH while a pipe retires
  // (count_d + 2), cycles in which an acc LOAD waits on a busy pipe's banks,
  // and acc LOADs that start beside a busy pipe.
  bit ov_on = 0;
  int ov_ld_busy = 0, ov_push_retire = 0, ov_ld_wait = 0, ov_ld_start = 0;
  int ov_stuck = 0;  // directed rounds in which no LOAD completed beside a waiting pipe

  always @(posedge clk) begin
    if (rst_n && ov_on) begin
      if (dut.ld_acc_we && dut.p_busy != 2'b00) ov_ld_busy = ov_ld_busy + 1;
      if (dut.state_q == dut.S_PUSH && dut.push_ok && dut.p_retire != 2'b00)
        ov_push_retire = ov_push_retire + 1;
      if (dut.state_q == dut.S_POP && dut.ld_acc_nb && dut.ld_conflict) ov_ld_wait = ov_ld_wait + 1;
      if (dut.ld_start && dut.ld_acc_nb && dut.p_busy != 2'b00) ov_ld_start = ov_ld_start + 1;
    end
  end

  // ------------------------------------------------------------------
  // Reference model (isa/semantics.md)
  // ------------------------------------------------------------------
  logic [UOPR-1:0] m_uop [UD];
  logic [ACCR-1:0] m_acc [AD];
  logic [OUTR-1:0] m_out [AD];
  int m_gemm_ops = 0, m_alu_ops = 0, m_finish = 0;
  bit m_err = 0;
  bit expect_err = 0;
  bit auto_tokens = 1;

  // keep the low W bits, sign-extended
  function automatic longint wrapw(input longint v);
    longint t;
    t = v <<< (64 - AW);
    wrapw = t >>> (64 - AW);
  endfunction

  function automatic longint lane(input logic [ACCR-1:0] row, input int l);
    logic signed [AW-1:0] v;
    v = row[l*AW +: AW];
    lane = v;
  endfunction

  function automatic longint inp_val(input int r, input int k);
    logic signed [IW-1:0] v;
    v = inp_mem[r][k*IW +: IW];
    inp_val = v;
  endfunction

  function automatic longint wgt_val(input int r, input int k);
    logic signed [WW-1:0] v;
    v = wgt_mem[r][k*WW +: WW];
    wgt_val = v;
  endfunction

  function automatic int uop_field(input int u, input int lsb, input int w);
    logic [UOPR-1:0] x;
    x = m_uop[u] >> lsb;
    uop_field = 0;
    for (int k = 0; k < w; k++) uop_field[k] = x[k];
  endfunction

  // Every acc write also writes out (low output-width bits).
  task automatic m_write_acc(input int r, input logic [ACCR-1:0] row, input bit mirror);
    m_acc[r] = row;
    if (mirror)
      for (int l = 0; l < LANES; l++) m_out[r][l*OW +: OW] = row[l*AW +: OW];
  endtask

  function automatic longint alu_ref(input int op, input longint a, input longint b);
    longint s, lim, p, n, mask, r, h;
    s = b;
    if (s < -(AW - 1)) s = -(AW - 1);
    if (s > AW - 1) s = AW - 1;
    lim = 64'sd1 <<< (AW - 1);
    case (op)
      0: alu_ref = (a < b) ? a : b;
      1: alu_ref = (a > b) ? a : b;
      2: alu_ref = wrapw(a + b);
      4: alu_ref = wrapw(a * b);
      5: alu_ref = b;
      7: begin
        if (a == -lim && b == -lim) begin
          alu_ref = lim - 1;
        end else begin
          p = a * b;
          n = (p >= 0) ? (64'sd1 <<< (AW - 2)) : (1 - (64'sd1 <<< (AW - 2)));
          alu_ref = wrapw((p + n) / lim);  // SV division truncates toward zero
        end
      end
      8: begin  // rqfin: rounding shift, + zero point, clamp (fields of b's low 32 bits)
        longint u, sh, zp, lo, hi, q, hv;
        u = b & 64'hffffffff;
        sh = u & 31;
        zp = (u >> 5) & 511;
        lo = (u >> 14) & 511;
        hi = (u >> 23) & 511;
        if (zp >= 256) zp = zp - 512;
        if (lo >= 256) lo = lo - 512;
        if (hi >= 256) hi = hi - 512;
        if (sh > AW - 1) sh = AW - 1;
        q = a;
        if (sh > 0) begin
          hv = 64'sd1 <<< (sh - 1);
          q = (a >= 0) ? ((a + hv) >>> sh) : -((-a + hv) >>> sh);
        end
        q = q + zp;
        if (q < lo) q = lo;
        if (q > hi) q = hi;
        alu_ref = wrapw(q);
      end
      default: begin  // 3 shr, 6 rshr
        if (s <= 0) begin
          alu_ref = wrapw(a <<< (-s));
        end else if (op == 3) begin
          alu_ref = a >>> s;
        end else begin
          mask = (64'sd1 <<< s) - 1;
          r = a & mask;
          h = (mask >>> 1) + ((a < 0) ? 1 : 0);
          alu_ref = wrapw((a >>> s) + ((r > h) ? 1 : 0));
        end
      end
    endcase
  endfunction

  function automatic int elem_bytes(input int mt);
    if (mt == MEM_UOP) elem_bytes = tsr_pkg::UOP_BYTES;
    else if (mt == MEM_ACC) elem_bytes = tsr_pkg::ACC_BYTES;
    else elem_bytes = tsr_pkg::ACC8_BYTES;
  endfunction

  task automatic m_load(input int mt, input int sbase, input int dbase, input int ys, input int xs,
                        input int xst, input int yp0, input int yp1, input int xp0, input int xp1);
    int row, rows, r, eb, addr;
    bit pad;
    logic [ACCR-1:0] v;
    logic [UOPR-1:0] uv;
    logic signed [7:0] by;
    longint lv;
    eb = elem_bytes(mt);
    row = xp0 + xs + xp1;
    rows = (xs == 0) ? 0 : yp0 + ys + yp1;  // x_size 0: no transfer
    r = sbase;
    for (int y = 0; y < rows; y++) begin
      for (int x = 0; x < row; x++) begin
        pad = (y < yp0) || (y >= yp0 + ys) || (x < xp0) || (x >= xp0 + xs);
        addr = (dbase + (y - yp0) * xst + (x - xp0)) * eb;
        if (mt == MEM_UOP) begin
          uv = '0;
          if (!pad) for (int k = 0; k < eb; k++) uv[k*8 +: 8] = dram[addr + k];
          m_uop[r] = uv;
        end else if (mt == MEM_ACC) begin
          v = '0;
          if (!pad) for (int k = 0; k < eb; k++) v[k*8 +: 8] = dram[addr + k];
          m_write_acc(r, v, 0);
        end else begin
          v = '0;
          if (!pad) begin
            for (int k = 0; k < LANES; k++) begin
              by = dram[addr + k];
              lv = by;
              v[k*AW +: AW] = lv;
            end
          end
          m_write_acc(r, v, 0);
        end
        r++;
      end
    end
  endtask

  // GEMM (is_gemm) or ALU loops; stops at the first out-of-range index
  // (m_err), like the golden model.
  task automatic m_loops(input bit is_gemm, input bit rst, input int bgn, input int endu,
                         input int io, input int ii, input int dfo, input int dfi, input int sfo,
                         input int sfi, input int wfo, input int wfi, input int op,
                         input bit use_imm, input int imm);
    int dst, src, wg, prev_src;
    longint sum, a, bv;
    logic [ACCR-1:0] row, srow;
    bit stop, first;
    stop = 0;
    first = 1;
    prev_src = -1;
    if (!is_gemm) a_span = 0;
    for (int i = 0; i < io; i++) begin
      for (int j = 0; j < ii; j++) begin
        for (int u = bgn; u < endu && !stop; u++) begin
          dst = uop_field(u, tsr_pkg::UOP_DST_LSB, tsr_pkg::UOP_DST_W) + i * dfo + j * dfi;
          src = uop_field(u, tsr_pkg::UOP_SRC_LSB, tsr_pkg::UOP_SRC_W) + i * sfo + j * sfi;
          wg = uop_field(u, tsr_pkg::UOP_WGT_LSB, tsr_pkg::UOP_WGT_W) + i * wfo + j * wfi;
          if (dst >= AD) stop = 1;
          if (stop) begin
            m_err = 1;
          end else if (rst) begin
            m_write_acc(dst, '0, 1);
            if (!is_gemm) m_alu_ops++;
            if (!is_gemm && !first) a_span += 1;
            first = 0;
          end else if (is_gemm) begin
            if (src >= ID || wg >= WD) stop = 1;
            row = m_acc[dst];
            for (int b = 0; b < B; b++) begin
              for (int o = 0; o < BO; o++) begin
                sum = 0;
                for (int k = 0; k < BI; k++) sum = sum + inp_val(src, b * BI + k) * wgt_val(wg, o * BI + k);
                a = lane(row, b * BO + o);
                row[(b * BO + o) * AW +: AW] = wrapw(a + sum);
              end
            end
            if (stop) m_err = 1;
            else m_write_acc(dst, row, 1);
            if (!stop) m_gemm_ops++;
          end else begin
            if (!use_imm && src >= AD) stop = 1;
            row = m_acc[dst];
            srow = (use_imm || stop) ? '0 : m_acc[src];  // read before the write: src == dst sees old values
            for (int l = 0; l < LANES; l++) begin
              bv = use_imm ? imm : lane(srow, l);
              row[l*AW +: AW] = alu_ref(op, lane(row, l), bv);
            end
            if (stop) m_err = 1;
            else m_write_acc(dst, row, 1);
            if (!stop) m_alu_ops++;
            if (!stop && !first)
              a_span += (tsr_pkg::ACC_SINGLE_COPY != 0 && !use_imm && src != prev_src) ? 2 : 1;
            first = 0;
            prev_src = src;
          end
        end
      end
    end
  endtask

  // ------------------------------------------------------------------
  // Instruction encoding and issue
  // ------------------------------------------------------------------
  function automatic logic [127:0] put(input logic [127:0] c, input int lsb, input int w,
                                       input longint v);
    for (int k = 0; k < w; k++) c[lsb + k] = v[k];
    put = c;
  endfunction

  function automatic logic [127:0] hdr(input int opc, input int flags);
    logic [127:0] c;
    c = '0;
    c = put(c, tsr_pkg::GEMM_OPCODE_LSB, 3, opc);
    c = put(c, tsr_pkg::GEMM_POP_PREV_LSB, 1, flags & 1);
    c = put(c, tsr_pkg::GEMM_POP_NEXT_LSB, 1, (flags >> 1) & 1);
    c = put(c, tsr_pkg::GEMM_PUSH_PREV_LSB, 1, (flags >> 2) & 1);
    c = put(c, tsr_pkg::GEMM_PUSH_NEXT_LSB, 1, (flags >> 3) & 1);
    hdr = c;
  endfunction

  // flags: bit0 pop_prev, bit1 pop_next, bit2 push_prev, bit3 push_next
  bit verbose = 0;
  task automatic issue(input logic [127:0] c, input int flags);
    if (verbose) $display("[%0d] insn #%0d: %h flags %0d", cyc, cq_wr, c, flags);
    if (cq_wr - cq_rd >= 4000) fail("testbench command queue overflow");
    cq[cq_wr % 4096] = c;
    cq_wr = cq_wr + 1;
    if (auto_tokens) begin
      if (flags & 1) prev_given++;
      if (flags & 2) next_given++;
    end
    if (flags & 4) exp_prev_push++;
    if (flags & 8) exp_next_push++;
  endtask

  task automatic do_load(input int flags, input int mt, input int sbase, input int dbase,
                         input int ys, input int xs, input int xst, input int yp0, input int yp1,
                         input int xp0, input int xp1);
    logic [127:0] c;
    c = hdr(tsr_pkg::OP_LOAD, flags);
    c = put(c, tsr_pkg::MEM_MEM_TYPE_LSB, tsr_pkg::MEM_MEM_TYPE_W, mt);
    c = put(c, tsr_pkg::MEM_SRAM_BASE_LSB, tsr_pkg::MEM_SRAM_BASE_W, sbase);
    c = put(c, tsr_pkg::MEM_DRAM_BASE_LSB, tsr_pkg::MEM_DRAM_BASE_W, dbase);
    c = put(c, tsr_pkg::MEM_Y_SIZE_LSB, tsr_pkg::MEM_Y_SIZE_W, ys);
    c = put(c, tsr_pkg::MEM_X_SIZE_LSB, tsr_pkg::MEM_X_SIZE_W, xs);
    c = put(c, tsr_pkg::MEM_X_STRIDE_LSB, tsr_pkg::MEM_X_STRIDE_W, xst);
    c = put(c, tsr_pkg::MEM_Y_PAD0_LSB, 4, yp0);
    c = put(c, tsr_pkg::MEM_Y_PAD1_LSB, 4, yp1);
    c = put(c, tsr_pkg::MEM_X_PAD0_LSB, 4, xp0);
    c = put(c, tsr_pkg::MEM_X_PAD1_LSB, 4, xp1);
    m_load(mt, sbase, dbase, ys, xs, xst, yp0, yp1, xp0, xp1);
    issue(c, flags);
  endtask

  task automatic do_gemm(input int flags, input bit rst, input int bgn, input int endu,
                         input int io, input int ii, input int dfo, input int dfi, input int sfo,
                         input int sfi, input int wfo, input int wfi);
    logic [127:0] c;
    c = hdr(tsr_pkg::OP_GEMM, flags);
    c = put(c, tsr_pkg::GEMM_RESET_LSB, 1, rst);
    c = put(c, tsr_pkg::GEMM_UOP_BGN_LSB, tsr_pkg::GEMM_UOP_BGN_W, bgn);
    c = put(c, tsr_pkg::GEMM_UOP_END_LSB, tsr_pkg::GEMM_UOP_END_W, endu);
    c = put(c, tsr_pkg::GEMM_ITER_OUT_LSB, tsr_pkg::GEMM_ITER_OUT_W, io);
    c = put(c, tsr_pkg::GEMM_ITER_IN_LSB, tsr_pkg::GEMM_ITER_IN_W, ii);
    c = put(c, tsr_pkg::GEMM_DST_FACTOR_OUT_LSB, tsr_pkg::GEMM_DST_FACTOR_OUT_W, dfo);
    c = put(c, tsr_pkg::GEMM_DST_FACTOR_IN_LSB, tsr_pkg::GEMM_DST_FACTOR_IN_W, dfi);
    c = put(c, tsr_pkg::GEMM_SRC_FACTOR_OUT_LSB, tsr_pkg::GEMM_SRC_FACTOR_OUT_W, sfo);
    c = put(c, tsr_pkg::GEMM_SRC_FACTOR_IN_LSB, tsr_pkg::GEMM_SRC_FACTOR_IN_W, sfi);
    c = put(c, tsr_pkg::GEMM_WGT_FACTOR_OUT_LSB, tsr_pkg::GEMM_WGT_FACTOR_OUT_W, wfo);
    c = put(c, tsr_pkg::GEMM_WGT_FACTOR_IN_LSB, tsr_pkg::GEMM_WGT_FACTOR_IN_W, wfi);
    m_loops(1, rst, bgn, endu, io, ii, dfo, dfi, sfo, sfi, wfo, wfi, 0, 0, 0);
    if (m_err && !expect_err) fail("testbench generated an out-of-range GEMM");
    issue(c, flags);
  endtask

  task automatic do_alu(input int flags, input bit rst, input int bgn, input int endu,
                        input int io, input int ii, input int dfo, input int dfi, input int sfo,
                        input int sfi, input int op, input bit use_imm, input int imm);
    logic [127:0] c;
    c = hdr(tsr_pkg::OP_ALU, flags);
    c = put(c, tsr_pkg::ALU_RESET_LSB, 1, rst);
    c = put(c, tsr_pkg::ALU_UOP_BGN_LSB, tsr_pkg::ALU_UOP_BGN_W, bgn);
    c = put(c, tsr_pkg::ALU_UOP_END_LSB, tsr_pkg::ALU_UOP_END_W, endu);
    c = put(c, tsr_pkg::ALU_ITER_OUT_LSB, tsr_pkg::ALU_ITER_OUT_W, io);
    c = put(c, tsr_pkg::ALU_ITER_IN_LSB, tsr_pkg::ALU_ITER_IN_W, ii);
    c = put(c, tsr_pkg::ALU_DST_FACTOR_OUT_LSB, tsr_pkg::ALU_DST_FACTOR_OUT_W, dfo);
    c = put(c, tsr_pkg::ALU_DST_FACTOR_IN_LSB, tsr_pkg::ALU_DST_FACTOR_IN_W, dfi);
    c = put(c, tsr_pkg::ALU_SRC_FACTOR_OUT_LSB, tsr_pkg::ALU_SRC_FACTOR_OUT_W, sfo);
    c = put(c, tsr_pkg::ALU_SRC_FACTOR_IN_LSB, tsr_pkg::ALU_SRC_FACTOR_IN_W, sfi);
    c = put(c, tsr_pkg::ALU_ALU_OPCODE_LSB, tsr_pkg::ALU_ALU_OPCODE_W, op);
    c = put(c, tsr_pkg::ALU_USE_IMM_LSB, 1, use_imm);
    c = put(c, tsr_pkg::ALU_IMM_LSB, 16, imm);
    m_loops(0, rst, bgn, endu, io, ii, dfo, dfi, sfo, sfi, 0, 0, op, use_imm, imm);
    if (m_err && !expect_err) fail("testbench generated an out-of-range ALU op");
    issue(c, flags);
  endtask

  task automatic do_finish(input int flags);
    m_finish++;
    issue(hdr(tsr_pkg::OP_FINISH, flags), flags);
  endtask

  // ------------------------------------------------------------------
  // Checking
  // ------------------------------------------------------------------
  task automatic wait_done;
    int t;
    t = 0;
    while (insn_count + cnt_base != cq_wr) begin
      @(negedge clk);
      t++;
      if (err) fail("unexpected err_o");
      if (t > 400000) fail($sformatf("timeout: %0d of %0d instructions done", insn_count, cq_wr));
    end
    @(negedge clk);
  endtask

  // Accumulator row r as held by copy c (0 dst, 1 src): two banks (index
  // MSB), each kept twice, or once with ACC_SINGLE_COPY (both copies read
  // the one RAM then).
  if (tsr_pkg::ACC_SINGLE_COPY != 0) begin : g_acc
    function automatic logic [LANES*AW-1:0] row(input int c, input int r);
      if (c > 1) return 'x;
      if (r < AD / 2) return dut.g_bank[0].g_one.u_acc.mem_q[r];
      return dut.g_bank[1].g_one.u_acc.mem_q[r - AD / 2];
    endfunction
  end else begin : g_acc
    function automatic logic [LANES*AW-1:0] row(input int c, input int r);
      if (r < AD / 2) return (c == 0) ? dut.g_bank[0].g_two.u_acc_dst.g_bram.mem_q[r]
                                      : dut.g_bank[0].g_two.u_acc_src.g_bram.mem_q[r];
      return (c == 0) ? dut.g_bank[1].g_two.u_acc_dst.g_bram.mem_q[r - AD / 2]
                      : dut.g_bank[1].g_two.u_acc_src.g_bram.mem_q[r - AD / 2];
    endfunction
  end

  task automatic check_state(input string where);
    for (int r = 0; r < AD; r++) begin
      logic [LANES*AW-1:0] d, s;
      d = g_acc.row(0, r);
      s = g_acc.row(1, r);
      if (d !== m_acc[r])
        fail($sformatf("%s: acc row %0d: dut %h model %h", where, r, d, m_acc[r]));
      if (s !== m_acc[r])
        fail($sformatf("%s: acc (src copy) row %0d differs", where, r));
      if (out_mem[r] !== m_out[r])
        fail($sformatf("%s: out row %0d: dut %h model %h", where, r, out_mem[r], m_out[r]));
    end
    for (int r = 0; r < UD; r++) begin
      if (dut.g_uop[0].u_uop_buf.g_bram.mem_q[r] !== m_uop[r])
        fail($sformatf("%s: uop row %0d: dut %h model %h", where, r, dut.g_uop[0].u_uop_buf.g_bram.mem_q[r], m_uop[r]));
      if (dut.g_uop[1].u_uop_buf.g_bram.mem_q[r] !== m_uop[r])
        fail($sformatf("%s: uop row %0d (second copy) differs", where, r));
    end
    if (g_total != m_gemm_ops) fail($sformatf("%s: gemm ops %0d, model %0d", where, g_total, m_gemm_ops));
    if (a_total != m_alu_ops) fail($sformatf("%s: alu ops %0d, model %0d", where, a_total, m_alu_ops));
    if (fin_total != m_finish) fail($sformatf("%s: finish %0d, model %0d", where, fin_total, m_finish));
    if (prev_taken != prev_given || next_taken != next_given)
      fail($sformatf("%s: tokens popped %0d/%0d of %0d/%0d", where, prev_taken, next_taken,
                     prev_given, next_given));
    if (prev_pushed != exp_prev_push || next_pushed != exp_next_push)
      fail($sformatf("%s: pushes %0d/%0d, expected %0d/%0d", where, prev_pushed, next_pushed,
                     exp_prev_push, exp_next_push));
    if (busy || stall_tok) fail($sformatf("%s: busy/stall_tok while idle", where));
  endtask

  task automatic sync(input string where);
    wait_done();
    check_state(where);
  endtask

  task automatic phase(input string name);
    if (verbose) begin
      $display("== %s at cycle %0d", name, cyc);
      $fflush();
    end
  endtask

  // Run an instruction alone and check its ops issued one per cycle.
  int g_before, a_before;
  task automatic mark;
    wait_done();
    g_before = g_total;
    a_before = a_total;
  endtask

  task automatic check_rate(input string where, input int g_ops, input int a_ops);
    sync(where);
    if (g_total - g_before != g_ops)
      fail($sformatf("%s: %0d gemm ops, expected %0d", where, g_total - g_before, g_ops));
    if (a_total - a_before != a_ops)
      fail($sformatf("%s: %0d alu ops, expected %0d", where, a_total - a_before, a_ops));
    if (g_ops > 1 && g_log[(g_total - 1) % LOGSZ] - g_log[g_before % LOGSZ] != g_ops - 1)
      fail($sformatf("%s: %0d gemm ops took %0d cycles from first to last", where, g_ops,
                     g_log[(g_total - 1) % LOGSZ] - g_log[g_before % LOGSZ] + 1));
    if (a_ops > 1 && a_log[(a_total - 1) % LOGSZ] - a_log[a_before % LOGSZ] != a_span)
      fail($sformatf("%s: %0d alu ops took %0d cycles from first to last, expected %0d", where,
                     a_ops, a_log[(a_total - 1) % LOGSZ] - a_log[a_before % LOGSZ] + 1, a_span + 1));
  endtask

  // ------------------------------------------------------------------
  // Test helpers
  // ------------------------------------------------------------------
  int u_dst [256];
  int u_src [256];
  int u_wgt [256];
  int stage_ptr = STAGE;

  // Load uops u_*[0..n) into uop rows [bgn, bgn+n) through DRAM (the
  // staging area is only rewritten when nothing is outstanding).
  task automatic stage_uops(input int bgn, input int n);
    logic [UOPR-1:0] w;
    int a;
    wait_done();
    a = STAGE;
    for (int k = 0; k < n; k++) begin
      w = '0;
      w = w | (UOPR'(u_dst[k]) << tsr_pkg::UOP_DST_LSB);
      w = w | (UOPR'(u_src[k]) << tsr_pkg::UOP_SRC_LSB);
      w = w | (UOPR'(u_wgt[k]) << tsr_pkg::UOP_WGT_LSB);
      for (int by = 0; by < UOPR / 8; by++) dram[a + k * (UOPR / 8) + by] = w[by*8 +: 8];
    end
    do_load(0, MEM_UOP, bgn, STAGE / (UOPR / 8), 1, n, n, 0, 0, 0, 0);
  endtask

  // Ops of a loop nest (0 if empty).
  function automatic int nops(input int bgn, input int endu, input int io, input int ii);
    nops = (endu > bgn) ? (endu - bgn) * io * ii : 0;
  endfunction

  // Edge values for ALU operands (index k, any int).
  function automatic longint edge_val(input int k);
    longint lim, t1, t2;
    lim = 64'sd1 <<< (AW - 1);
    t1 = $random(seed);
    t2 = $random(seed);
    case (k % 20)
      0: edge_val = -lim;
      1: edge_val = lim - 1;
      2: edge_val = 0;
      3: edge_val = 1;
      4: edge_val = -1;
      5: edge_val = -lim + 1;
      6: edge_val = lim - 2;
      7: edge_val = lim >>> 1;
      8: edge_val = -(lim >>> 1);
      9: edge_val = AW - 1;
      10: edge_val = AW;
      11: edge_val = -(AW - 1);
      12: edge_val = -AW;
      13: edge_val = 3;
      14: edge_val = -3;
      15: edge_val = AW + 5;
      16: edge_val = -(AW + 5);
      17: edge_val = wrapw(t1);
      18: edge_val = rnd(64) - 32;
      default: edge_val = wrapw((t1 <<< 16) ^ t2);
    endcase
  endfunction

  function automatic int imm_val(input int k);
    case (k % 16)
      0: imm_val = -32768;
      1: imm_val = 32767;
      2: imm_val = 0;
      3: imm_val = 1;
      4: imm_val = -1;
      5: imm_val = AW - 1;
      6: imm_val = AW;
      7: imm_val = AW + 1;
      8: imm_val = -(AW - 1);
      9: imm_val = -AW;
      10: imm_val = -(AW + 1);
      11: imm_val = 2;
      12: imm_val = AW / 2;
      13: imm_val = -100;
      14: imm_val = 12345;
      default: imm_val = rnd(65536) - 32768;
    endcase
  endfunction

  // Write n acc rows of edge values to DRAM staging and load them at row r0.
  task automatic load_edge_rows(input int r0, input int n);
    longint v;
    wait_done();
    for (int r = 0; r < n; r++) begin
      for (int l = 0; l < LANES; l++) begin
        v = edge_val(r * 7 + l * 3 + rnd(3));
        for (int by = 0; by < AW / 8; by++)
          dram[STAGE + 32768 + (r * LANES + l) * (AW / 8) + by] = v[by*8 +: 8];
      end
    end
    do_load(0, MEM_ACC, r0, (STAGE + 32768) / (ACCR / 8), 1, n, n, 0, 0, 0, 0);
  endtask

  // Random in-range GEMM (is_gemm) or ALU instruction with fresh uops.
  int last_ops;
  task automatic random_loop_insn(input bit is_gemm, input int flags, input bit reduce);
    int nu, io, ii, dfo, dfi, sfo, sfi, wfo, wfi, bgn, md, ms, mw, sd, op, imm, rdst;
    bit rst, use_imm;
    int sdepth;
    sdepth = is_gemm ? ID : AD;
    nu = 1 + rnd(reduce ? 8 : 6);
    io = 1 + rnd(3);
    ii = 1 + rnd(4);
    if (rnd(8) == 0) begin
      io = 1;
      ii = 10 + rnd(30);
    end
    dfo = rnd(AD / 8);
    dfi = rnd(AD / 8);
    sfo = rnd(sdepth / 8);
    sfi = rnd(sdepth / 8);
    wfo = is_gemm ? rnd(WD / 8) : 0;
    wfi = is_gemm ? rnd(WD / 8) : 0;
    if (ii > 4) begin  // long inner loop: small inner steps
      dfi = rnd(2);
      sfi = rnd(2);
      wfi = is_gemm ? rnd(2) : 0;
    end
    if (reduce) begin
      dfi = 0;  // every (j, u) of one i hits the same row
      if (rnd(2) == 0) dfo = 0;
    end
    md = AD - ((io - 1) * dfo + (ii - 1) * dfi);
    ms = sdepth - ((io - 1) * sfo + (ii - 1) * sfi);
    mw = WD - ((io - 1) * wfo + (ii - 1) * wfi);
    rdst = rnd(md);
    for (int k = 0; k < nu; k++) begin
      if (reduce) u_dst[k] = (rnd(4) == 0) ? rnd(md) : rdst;  // mostly one row, some ping-pong
      else u_dst[k] = (rnd(3) == 0 && k > 0) ? u_dst[k - 1] : rnd(md);
      u_src[k] = rnd(ms);
      u_wgt[k] = is_gemm ? rnd(mw) : rnd(1 << tsr_pkg::UOP_WGT_W);
      // ALU: src == dst sometimes (needs both in range for the src offsets too)
      if (!is_gemm && rnd(4) == 0 && u_dst[k] < ms) u_src[k] = u_dst[k];
    end
    bgn = rnd(UD - nu + 1);
    stage_uops(bgn, nu);
    rst = (rnd(7) == 0);
    op = rnd(9);
    use_imm = rnd(2);
    imm = imm_val(rnd(64));
    mark();
    if (is_gemm) do_gemm(flags, rst, bgn, bgn + nu, io, ii, dfo, dfi, sfo, sfi, wfo, wfi);
    else do_alu(flags, rst, bgn, bgn + nu, io, ii, dfo, dfi, sfo, sfi, op, use_imm, imm);
    last_ops = nops(bgn, bgn + nu, io, ii);
    if (is_gemm) check_rate($sformatf("gemm%s nu=%0d io=%0d ii=%0d rst=%0d", reduce ? " reduce" : "",
                                      nu, io, ii, rst), rst ? 0 : last_ops, 0);
    else check_rate($sformatf("alu op=%0d imm=%0d(%0d) nu=%0d io=%0d ii=%0d rst=%0d", op, use_imm,
                              imm, nu, io, ii, rst), 0, last_ops);
  endtask

  // Random load of uop/acc/acc8 rows with padding (uop: no padding).
  task automatic random_load(input int flags, input bit no_uop);
    int mt, eb, depth, xs, ys, xst, yp0, yp1, xp0, xp1, rows, row, sb, db, span;
    mt = no_uop ? 1 + rnd(2) : rnd(3);
    mt = (mt == 0) ? MEM_UOP : (mt == 1) ? MEM_ACC : MEM_ACC8;
    eb = elem_bytes(mt);
    depth = (mt == MEM_UOP) ? UD : AD;
    xs = 1 + rnd(6);
    ys = rnd(4);
    xst = xs + rnd(4);
    if (rnd(4) == 0) xst = rnd(xs + 1);  // overlapping or repeated rows
    yp0 = (mt == MEM_UOP) ? 0 : rnd(3);
    yp1 = (mt == MEM_UOP) ? 0 : rnd(3);
    xp0 = (mt == MEM_UOP) ? 0 : rnd(3);
    xp1 = (mt == MEM_UOP) ? 0 : rnd(3);
    if (mt != MEM_UOP && rnd(10) == 0) begin  // maximal padding
      ys = 1;
      xs = 1;
      if (rnd(2)) begin
        yp0 = 15;
        yp1 = 0;
        xp0 = 0;
        xp1 = 3;
      end else begin
        yp0 = 0;
        yp1 = 1;
        xp0 = 1;
        xp1 = 15;
      end
    end
    row = xp0 + xs + xp1;
    rows = yp0 + ys + yp1;
    if (row * rows > depth) fail("testbench generated an oversized load");
    sb = rnd(depth - row * rows + 1);
    span = ((ys > 0 ? ys - 1 : 0) * xst + xs) * eb;
    db = rnd((STAGE - span) / eb);
    do_load(flags, mt, sb, db, ys, xs, xst, yp0, yp1, xp0, xp1);
  endtask

  function automatic int rflags();
    rflags = (rnd(3) == 0) ? rnd(16) : 0;
  endfunction

  // Bank-rule phase: GEMM/ALU instructions confined to one accumulator bank
  // (rows [0, AD/2) or [AD/2, AD)) with acc LOADs beside them. A pool of 64
  // uops at OVU, 16 per region r = 2*pipe + bank (pipe 0 GEMM, 1 ALU): dst
  // (and the ALU's src) in the first quarter of the bank, so loop offsets up
  // to 3/4 of a bank keep the instruction's whole footprint inside it.
  localparam int OVU = UD - 64;
  localparam int HB = AD / 2;  // rows per accumulator bank

  task automatic ov_stage_uops;
    for (int r = 0; r < 4; r++) begin
      for (int k = 0; k < 16; k++) begin
        u_dst[r * 16 + k] = (r % 2) * HB + rnd(HB / 4);
        if (r < 2) begin
          u_src[r * 16 + k] = rnd(ID / 4);
          u_wgt[r * 16 + k] = rnd(WD / 4);
        end else begin
          u_src[r * 16 + k] = (r % 2) * HB + rnd(HB / 4);
          u_wgt[r * 16 + k] = rnd(1 << tsr_pkg::UOP_WGT_W);
        end
      end
    end
    stage_uops(OVU, 64);
  endtask

  // Loop factor f with (iters - 1) * f <= budget and f < 2^w; mostly small.
  function automatic int ov_factor(input int iters, input int budget, input int w);
    int lim;
    lim = (iters > 1) ? budget / (iters - 1) : budget;
    if (lim > (1 << w) - 1) lim = (1 << w) - 1;
    if (lim > 4 && rnd(4) != 0) lim = 4;
    ov_factor = rnd(lim + 1);
  endfunction

  // A long GEMM (pipe 0) or ALU (pipe 1) instruction whose acc rows (dst;
  // the ALU's src too) all lie in accumulator bank bk.
  task automatic ov_insn(input int pipe, input int bk, input int flags);
    int nu, bgn, io, ii, db, sb, wb, dfo, dfi, sfo, sfi, wfo, wfi;
    bit rst;
    nu = 1 + rnd(4);
    bgn = OVU + (2 * pipe + bk) * 16 + rnd(16 - nu + 1);
    io = 2 + rnd(BIG ? 2 : 3);
    ii = 4 + rnd(BIG ? 4 : 9);
    db = (3 * HB / 4 - 1) / 2;  // each of the two loop levels gets half
    sb = (pipe == 0) ? (3 * ID / 4 - 1) / 2 : db;
    wb = (3 * WD / 4 - 1) / 2;
    rst = (rnd(10) == 0);
    if (pipe == 0) begin
      dfo = ov_factor(io, db, tsr_pkg::GEMM_DST_FACTOR_OUT_W);
      dfi = ov_factor(ii, db, tsr_pkg::GEMM_DST_FACTOR_IN_W);
      sfo = ov_factor(io, sb, tsr_pkg::GEMM_SRC_FACTOR_OUT_W);
      sfi = ov_factor(ii, sb, tsr_pkg::GEMM_SRC_FACTOR_IN_W);
      wfo = ov_factor(io, wb, tsr_pkg::GEMM_WGT_FACTOR_OUT_W);
      wfi = ov_factor(ii, wb, tsr_pkg::GEMM_WGT_FACTOR_IN_W);
      do_gemm(flags, rst, bgn, bgn + nu, io, ii, dfo, dfi, sfo, sfi, wfo, wfi);
    end else begin
      dfo = ov_factor(io, db, tsr_pkg::ALU_DST_FACTOR_OUT_W);
      dfi = ov_factor(ii, db, tsr_pkg::ALU_DST_FACTOR_IN_W);
      sfo = ov_factor(io, sb, tsr_pkg::ALU_SRC_FACTOR_OUT_W);
      sfi = ov_factor(ii, sb, tsr_pkg::ALU_SRC_FACTOR_IN_W);
      do_alu(flags, rst, bgn, bgn + nu, io, ii, dfo, dfi, sfo, sfi, rnd(9), rnd(2), imm_val(rnd(64)));
    end
  endtask

  // An acc/acc8 LOAD without push flags (pops sometimes) of up to 30 rows,
  // padding sometimes: straddle = 0 inside bank bk, 1 across the bank boundary.
  task automatic ov_load(input int bk, input bit straddle);
    int mt, eb, xs, ys, xst, yp0, yp1, xp0, xp1, n, sb, db, span;
    mt = rnd(2) ? MEM_ACC : MEM_ACC8;
    eb = elem_bytes(mt);
    xs = (straddle ? 2 : 1) + rnd(BIG ? 2 : 3);  // default: shorter (8-beat rows)
    ys = 1 + rnd(BIG ? 2 : 3);
    xst = xs + rnd(3);
    if (rnd(5) == 0) xst = rnd(xs + 1);  // overlapping or repeated rows
    yp0 = (rnd(4) == 0) ? 1 : 0;
    yp1 = (rnd(4) == 0) ? 1 : 0;
    xp0 = (rnd(4) == 0) ? 1 : 0;
    xp1 = (rnd(4) == 0) ? 1 : 0;
    n = (yp0 + ys + yp1) * (xp0 + xs + xp1);
    if (n > HB) fail("testbench generated an oversized bank-rule load");
    if (straddle) sb = HB - 1 - rnd(n - 1);  // first row in bank 0, last in bank 1
    else sb = bk * HB + rnd(HB - n + 1);
    span = ((ys - 1) * xst + xs) * eb;
    db = rnd((STAGE - span) / eb);
    do_load((rnd(4) == 0) ? 1 + rnd(3) : 0, mt, sb, db, ys, xs, xst, yp0, yp1, xp0, xp1);
  endtask

  // ------------------------------------------------------------------
  // Test sequence
  // ------------------------------------------------------------------
  int n_rounds;
  logic [ACCR-1:0] acc_before;

  initial begin
    for (int r = 0; r < ID; r++) inp_mem[r] = '0;
    for (int r = 0; r < WD; r++) wgt_mem[r] = '0;
    for (int r = 0; r < ID; r++)
      for (int k = 0; k < INPR / 32 + 1; k++) inp_mem[r] = (inp_mem[r] << 32) | INPR'($unsigned($random(seed)));
    for (int r = 0; r < WD; r++)
      for (int k = 0; k < WGTR / 32 + 1; k++) wgt_mem[r] = (wgt_mem[r] << 32) | WGTR'($unsigned($random(seed)));
    for (int a = 0; a < DRAM_BYTES; a++) dram[a] = 8'($random(seed));
    for (int r = 0; r < AD; r++) begin
      out_mem[r] = '0;
      m_out[r] = '0;
      m_acc[r] = 'x;
    end
    for (int r = 0; r < UD; r++) m_uop[r] = 'x;
    n_rounds = BIG ? 1 : 3;
    verbose = $test$plusargs("verbose");

    repeat (5) @(negedge clk);
    rst_n = 1'b1;
    repeat (2) @(negedge clk);

    // --- full-buffer loads: every uop row, every acc row (strided) ---
    phase("full-buffer loads: every uop row, every acc row (strided)");
    do_load(0, MEM_UOP, 0, 0, 1, UD, UD, 0, 0, 0, 0);
    sync("uop full load");
    do_load(0, MEM_ACC, 0, 1000 / (ACCR / 8), 4, AD / 4, AD / 4 + 3, 0, 0, 0, 0);
    sync("acc full load");

    // --- random loads, one at a time, then streamed ---
    phase("random loads, one at a time, then streamed");
    for (int t = 0; t < 12 * n_rounds; t++) begin
      random_load(rflags(), 0);
      sync($sformatf("random load %0d", t));
    end
    for (int t = 0; t < 10 * n_rounds; t++) random_load(rflags(), 0);
    do_load(5, MEM_ACC, 0, 0, 3, 0, 0, 1, 1, 1, 1);  // x_size 0: flags only
    do_load(10, 2, 0, 0, 3, 0, 0, 0, 0, 0, 0);       // x_size 0 of another type
    sync("streamed loads");
    // loading acc must not change out: write out rows first, then reload acc
    random_loop_insn(1, 0, 0);
    for (int t = 0; t < 4; t++) random_load(0, 0);
    sync("acc loads keep out");

    // --- GEMM: random loops, factors, resets; same-dst reductions ---
    phase("GEMM: random loops, factors, resets; same-dst reductions");
    for (int t = 0; t < 25 * n_rounds; t++) random_loop_insn(1, rflags(), 0);
    for (int t = 0; t < 15 * n_rounds; t++) random_loop_insn(1, rflags(), 1);
    // a K reduction: uops 0..K-1 all dst 0, all consecutive
    for (int k = 0; k < 8; k++) begin
      u_dst[k] = 0;
      u_src[k] = k;
      u_wgt[k] = k;
    end
    stage_uops(0, 8);
    mark();
    do_gemm(0, 0, 0, 8, 1, 6, 0, 0, 0, 8, 0, 8);
    check_rate("K reduction", 48, 0);
    // empty loops: no ops, but the instruction completes
    mark();
    do_gemm(0, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1);
    do_gemm(0, 0, 0, 4, 0, 2, 1, 1, 1, 1, 1, 1);
    do_alu(0, 0, 0, 4, 2, 0, 1, 1, 1, 1, 2, 1, 5);
    check_rate("empty loops", 0, 0);

    // --- ALU: each op with imm and register operand on edge values ---
    phase("ALU: each op with imm and register operand on edge values");
    for (int op = 0; op < 9; op++) begin
      for (int mode = 0; mode < 3; mode++) begin  // 0 imm, 1 register, 2 src == dst
        load_edge_rows(AD - 16, 16);
        for (int k = 0; k < 8; k++) begin
          u_dst[k] = AD - 16 + k;
          u_src[k] = (mode == 2) ? AD - 16 + k : AD - 16 + ((k + 3 + op) % 15);
          u_wgt[k] = 0;
        end
        stage_uops(UD - 8, 8);
        for (int t = 0; t < ((mode == 0) ? 4 : 1); t++) begin
          mark();
          // iter_in 2 with dst factor 0: each row is hit twice back to back-ish
          do_alu(0, 0, UD - 8, UD, 1, 2, 0, (mode == 2) ? 0 : 1, 0, (mode == 2) ? 0 : 1, op,
                 mode == 0, imm_val(op * 5 + t * 3 + rnd(16)));
          check_rate($sformatf("alu edge op %0d mode %0d", op, mode), 0, 16);
        end
      end
    end
    // every immediate edge value through every op
    for (int k = 0; k < 16; k++) begin
      load_edge_rows(AD - 16, 16);
      for (int op = 0; op < 9; op++) begin
        mark();
        do_alu(0, 0, UD - 8, UD, 1, 1, 0, 0, 0, 0, op, 1, imm_val(k));
        check_rate($sformatf("alu imm %0d op %0d", imm_val(k), op), 0, 8);
      end
    end
    for (int t = 0; t < 25 * n_rounds; t++) random_loop_insn(0, rflags(), 0);
    for (int t = 0; t < 10 * n_rounds; t++) random_loop_insn(0, rflags(), 1);
    // reset through the ALU
    mark();
    do_alu(0, 1, UD - 8, UD, 1, 1, 0, 0, 0, 0, 3, 0, 0);
    check_rate("alu reset", 0, 8);

    // --- token waits: nothing runs before the token arrives ---
    phase("token waits: nothing runs before the token arrives");
    for (int t = 0; t < 12; t++) begin
      int kind, fl, n;
      wait_done();
      auto_tokens = 0;
      kind = t % 4;
      fl = 1 + (t / 4) % 3;  // pop_prev, pop_next, both
      hold = 1;
      case (kind)
        0: do_gemm(fl, 0, UD - 8, UD, 1, 2, 1, 1, 1, 1, 1, 1);
        1: do_alu(fl, 0, UD - 8, UD, 1, 2, 1, 1, 1, 1, 2, 1, 7);
        2: do_load(fl, MEM_ACC, 5, 100, 2, 3, 4, 1, 0, 1, 1);
        default: do_finish(fl);
      endcase
      n = 5 + rnd(40);
      repeat (n) @(negedge clk);
      if (!stall_tok || !busy) fail($sformatf("token hold %0d: stall_tok_o/busy_o not set", t));
      if (fl == 3) begin
        // one of two tokens is not enough
        if (rnd(2)) prev_given++;
        else next_given++;
        repeat (3 + rnd(10)) @(negedge clk);
        if (!stall_tok) fail("token hold: ran with one of two tokens");
      end
      hold = 0;
      if ((fl & 1) && prev_given == prev_taken) prev_given++;
      if ((fl & 2) && next_given == next_taken) next_given++;
      auto_tokens = 1;
      sync($sformatf("token hold %0d", t));
    end
    // tokens queued ahead of the instructions that use them
    prev_given += 3;
    next_given += 2;
    auto_tokens = 0;
    do_finish(1);
    do_gemm(3, 1, UD - 8, UD, 1, 1, 0, 0, 0, 0, 0, 0);
    do_load(1, MEM_ACC, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    do_load(2, MEM_ACC8, 9, 0, 1, 2, 2, 0, 0, 0, 0);
    auto_tokens = 1;
    sync("tokens ahead");

    // --- blocked pushes hold the stage (and the next instruction of the
    // same pipe; LOADs hold everything) ---
    phase("blocked pushes hold the stage (and the next instruction)");
    for (int t = 0; t < 6; t++) begin
      int fl, c0, k;
      wait_done();
      fl = (t % 3 == 0) ? 4 : (t % 3 == 1) ? 8 : 12;
      prev_block = (fl & 4) != 0;
      next_block = (fl & 8) != 0;
      if (t < 3) begin
        do_gemm(fl, 0, UD - 8, UD, 1, 1, 0, 0, 0, 0, 0, 0);
        do_gemm(0, 0, UD - 8, UD, 1, 1, 0, 0, 0, 0, 0, 0);
      end else begin
        do_load(fl, MEM_ACC8, 20, 50, 2, 2, 3, 1, 1, 0, 1);
        do_alu(0, 0, UD - 8, UD, 1, 1, 0, 0, 0, 0, 2, 1, 1);
      end
      k = 0;
      while (!stall_tok) begin
        @(negedge clk);
        if (++k > 100000) fail("push test: never reached the push wait");
      end
      hold = 1;
      c0 = insn_count;
      repeat (5 + rnd(40)) begin
        @(negedge clk);
        if (insn_count != c0 || !stall_tok || !busy || cmd_ready)
          fail($sformatf("push test %0d: stage moved on while its push is blocked", t));
      end
      if (fl == 12) begin
        // one queue free is not enough
        prev_block = 0;
        repeat (5) @(negedge clk);
        if (insn_count != c0) fail("push test: completed with one of two queues full");
      end
      hold = 0;
      prev_block = 0;
      next_block = 0;
      sync($sformatf("push test %0d", t));
    end

    // --- streamed mix with random flags, back-pressure everywhere ---
    phase("streamed mix with random flags, back-pressure everywhere");
    for (int k = 0; k < 64; k++) begin
      u_dst[k] = rnd(AD / 2);
      u_src[k] = rnd(((ID < AD) ? ID : AD) / 2);
      u_wgt[k] = rnd(WD / 2);
    end
    stage_uops(0, 64);
    wait_done();
    for (int t = 0; t < 40 * n_rounds; t++) begin
      int kind, bgn, nu, sd;
      kind = rnd(6);
      bgn = rnd(60);
      nu = rnd(5);
      sd = (ID < AD) ? ID : AD;
      case (kind)
        0: random_load(rflags(), 1);
        1, 2: do_gemm(rflags(), rnd(6) == 0, bgn, bgn + nu, 1 + rnd(3), 1 + rnd(3), rnd(AD / 8),
                      rnd(AD / 8), rnd(sd / 8), rnd(sd / 8), rnd(WD / 8), rnd(WD / 8));
        3, 4: do_alu(rflags(), rnd(6) == 0, bgn, bgn + nu, 1 + rnd(3), 1 + rnd(3), rnd(AD / 8),
                     rnd(AD / 8), rnd(sd / 8), rnd(sd / 8), rnd(8), rnd(2), imm_val(rnd(32)));
        default: if (rnd(2)) do_finish(rflags());
                 else do_load(rflags(), MEM_ACC, 0, 0, 1, 0, 1, 0, 0, 0, 0);
      endcase
    end
    sync("stream");
    // huge factors on operands that are not read: saturating offsets, no error
    mark();
    do_gemm(0, 1, 0, 2, 3, 3, 1, 2, (1 << tsr_pkg::GEMM_SRC_FACTOR_OUT_W) - 1,
            (1 << tsr_pkg::GEMM_SRC_FACTOR_IN_W) - 1, (1 << tsr_pkg::GEMM_WGT_FACTOR_OUT_W) - 1,
            (1 << tsr_pkg::GEMM_WGT_FACTOR_IN_W) - 1);
    do_alu(0, 0, 0, 2, 3, 3, 1, 2, (1 << tsr_pkg::ALU_SRC_FACTOR_OUT_W) - 1,
           (1 << tsr_pkg::ALU_SRC_FACTOR_IN_W) - 1, 2, 1, -7);
    check_rate("unread operands out of range", 0, 18);
    if (mem_stall_cycles == 0) fail("stall_mem_o never set during loads");

    // --- acc LOADs beside running pipes (bank rule), LOADs completing
    // beside retires: long GEMM/ALU confined to one bank, each followed by
    // acc/acc8 LOADs without push flags, mostly into the other bank (they
    // run beside the pipe), some across the boundary or into the pipe's bank
    // (they wait); random pops/pushes and back-pressure. Every fourth round
    // lines a pipe's retire up with a LOAD's completion (S_PUSH). Results
    // must be those of in-order execution, and the overlap must be seen. ---
    phase("acc loads beside running pipes (bank rule) and loads completing beside retires");
    ov_stage_uops();
    wait_done();
    ov_on = 1;
    for (int t = 0; t < (BIG ? 16 : 40); t++) begin
      int bk, kind, nl, w;
      if (t % 8 == 0) begin
        if (t > 0) begin
          sync($sformatf("bank-rule loads, round %0d", t));
          ov_stage_uops();  // fresh uops (a barrier)
        end
        req_pct = 50 + rnd(51);
        data_pct = 50 + rnd(51);
        push_pct = (rnd(3) == 0) ? 100 : 30 + rnd(60);
        cmd_pct = 60 + rnd(41);
      end
      bk = rnd(2);
      if (t % 4 != 3) begin
        // 0, 1: GEMM; 2, 3: ALU; 4: GEMM and ALU both in bank bk (the ALU
        // waits for the GEMM, the loads for the ALU's footprint); 5: GEMM,
        // the loads, then an ALU in bank bk
        kind = rnd(6);
        if (kind != 2 && kind != 3) ov_insn(0, bk, rnd(2) ? rnd(16) : 0);
        if (kind >= 2 && kind <= 4) ov_insn(1, bk, rnd(2) ? rnd(16) : 0);
        nl = 1 + rnd(4);
        for (int k = 0; k < nl; k++) begin
          w = rnd(10);
          if (w < 6) ov_load(1 - bk, 0);   // the other bank: beside the pipe
          else if (w < 8) ov_load(bk, 1);  // across the boundary: waits
          else ov_load(bk, 0);             // the pipe's bank: waits
        end
        if (kind == 5) ov_insn(1, bk, rnd(2) ? rnd(16) : 0);
        // sometimes a younger instruction in the other bank (it reads rows
        // the loads wrote)
        if (rnd(3) == 0) ov_insn(rnd(2), 1 - bk, rnd(2) ? rnd(16) : 0);
      end else begin
        // A pipe instruction that pushes, its queue blocked, while LOADs
        // into the other bank stream beside it (issued as the queue drains);
        // once it has finished (and is the oldest), the block is lifted in a
        // cycle where a LOAD completes (S_PUSH) and the push queue is ready,
        // so the pipe retires in that very cycle.
        int pipe, fl, k;
        bit done;
        wait_done();
        pipe = rnd(2);
        fl = (4 << rnd(2)) | rnd(4);  // push_prev or push_next, pops sometimes
        prev_block = (fl & 4) != 0;
        next_block = (fl & 8) != 0;
        ov_insn(pipe, bk, fl);
        done = 0;
        k = 0;
        while (!done) begin
          if (cq_wr - cq_rd < 2) ov_load(1 - bk, 0);
          @(negedge clk);
          if (dut.occ_q[pipe] && !dut.p_busy[pipe] && !dut.young_q[pipe]) begin
            k++;  // cycles the finished pipe has waited for its push
            if (dut.state_q == dut.S_PUSH && (!(fl & 4) || prev_rdy_r) && (!(fl & 8) || next_rdy_r)) done = 1;
          end
          if (!done && k >= 500) begin  // no LOAD completes beside the waiting pipe
            ov_stuck++;
            done = 1;
          end
        end
        prev_block = 0;
        next_block = 0;
      end
    end
    sync("bank-rule loads");
    ov_on = 0;
    req_pct = 70;
    data_pct = 70;
    push_pct = 75;
    cmd_pct = 80;
    $display("bank-rule phase: %0d cycles of acc LOAD writes beside a busy pipe (%0d LOADs started beside one), %0d S_PUSH completions beside a pipe retire, %0d cycles of acc LOADs waiting on a pipe's banks, %0d directed rounds without a LOAD beside the waiting pipe",
             ov_ld_busy, ov_ld_start, ov_push_retire, ov_ld_wait, ov_stuck);
    if (ov_ld_busy == 0)
      fail("bank-rule phase: no acc LOAD wrote the accumulator while a pipe was busy (acc LOADs no longer run beside the pipes)");
    if (ov_push_retire == 0)
      fail("bank-rule phase: no LOAD completed in S_PUSH in the cycle a pipe retired (path never exercised)");
    if (ov_ld_wait == 0)
      fail("bank-rule phase: no acc LOAD waited on a busy pipe's bank (conflict path never exercised)");
    if (ov_stuck != 0)
      fail($sformatf("bank-rule phase: in %0d rounds no LOAD completed within 500 cycles while a finished pipe waited for its push",
                     ov_stuck));

    // --- errors: sticky err_o, nothing out of range touched, stage stops ---
    phase("errors: sticky err_o, nothing out of range touched, stage stops");
    for (int t = 0; t < 4; t++) begin
      int k;
      wait_done();
      u_dst[0] = 1;
      u_src[0] = 2;
      u_wgt[0] = 3;
      u_dst[1] = 0;
      u_src[1] = 0;
      u_wgt[1] = 0;
      stage_uops(0, 2);
      wait_done();
      m_err = 0;
      expect_err = 1;
      case (t)
        0: do_gemm(0, 0, 0, 2, 3, 1, AD / 2, 0, 0, 0, 0, 0);        // dst reaches AD
        1: do_alu(0, 0, 0, 2, 1, 4, 0, 1, 0, AD / 2 - 1, 2, 0, 0);  // src reaches AD
        2: begin  // uop_end beyond the buffer
          m_err = 1;
          issue(put(hdr(tsr_pkg::OP_GEMM, 0), tsr_pkg::GEMM_UOP_END_LSB, tsr_pkg::GEMM_UOP_END_W, UD + 1), 0);
        end
        default: begin  // LOAD past the end of acc
          logic [127:0] c;
          m_err = 1;
          c = hdr(tsr_pkg::OP_LOAD, 0);
          c = put(c, tsr_pkg::MEM_MEM_TYPE_LSB, 3, MEM_ACC);
          c = put(c, tsr_pkg::MEM_SRAM_BASE_LSB, tsr_pkg::MEM_SRAM_BASE_W, AD - 2);
          c = put(c, tsr_pkg::MEM_Y_SIZE_LSB, 16, 1);
          c = put(c, tsr_pkg::MEM_X_SIZE_LSB, 16, 2);
          c = put(c, tsr_pkg::MEM_X_STRIDE_LSB, 16, 2);
          c = put(c, tsr_pkg::MEM_X_PAD1_LSB, 4, 1);
          issue(c, 0);
        end
      endcase
      if (!m_err) fail("error test: the model found no error");
      do_finish(0);  // must never run
      m_finish--;
      k = 0;
      while (!err) begin
        @(negedge clk);
        if (++k > 10000) fail($sformatf("error test %0d: err_o not raised", t));
      end
      repeat (6) @(negedge clk);  // ops already past P1 still land
      hold = 1;
      repeat (30) @(negedge clk);
      hold = 0;
      if (!err || cmd_ready || busy) fail($sformatf("error test %0d: stage did not stop", t));
      check_state($sformatf("error test %0d", t));
      // reset: buffers keep their contents (block RAM), the queue restarts
      @(negedge clk);
      rst_n = 1'b0;
      repeat (3) @(negedge clk);
      cnt_base = cq_wr;
      rst_n = 1'b1;
      @(negedge clk);
      if (err) fail("err_o not cleared by reset");
    end
    expect_err = 0;
    m_err = 0;
    // still works after reset
    random_loop_insn(1, 0, 1);
    random_loop_insn(0, 0, 0);

    $display("PASS");
    $finish;
  end
endmodule
