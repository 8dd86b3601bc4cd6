// tb_dma_rd_elems: self-checking test of tsr_dma_rd_elems for several element
// sizes (below, equal to and above the bus width) and both buffer modes.
// Each harness drives random commands, models the DMA read port (random
// request acceptance, random latency, random gaps in data; beats of each
// request in order), applies random back-pressure on the element stream and
// compares every element with a memory whose byte at address a is a hash
// of a. It also checks that requests cover exactly the commands' beats in
// order, that the outstanding data never exceeds the reservation, handshake
// stability, busy_o/stall_o, and, in a second phase without any delays,
// that elements stream without bubbles (one per cycle, or one per
// ElemBytes/BusBytes cycles; checked where the design guarantees it:
// BufBeats 0 or >= 32, and commands long enough that the CmdDepth-deep
// command queue covers the request-to-data latency).
//
// Icarus notes: `&&` is not relied on to short-circuit (Icarus 11 evaluates
// `q.size() != 0 && q[0] ...` fully, and reading [0] of a queue emptied by
// pop_front gives a vector of garbage width: a "%cmp/u operand width
// mismatch" error that prints hundreds of MB of X per occurrence), so every
// queue element read sits under its own `if`; rnd() is called
// unconditionally so the random stream does not depend on evaluation order.
// Every pop_front() result is used: Verilator 5.006 drops
// `junk = q.pop_front()` when junk is never read, pop included.
// Each harness stops after MaxErrors errors or MaxIdle cycles without any
// handshake; the global cycle cap is a few times the expected run time, so a
// hang costs seconds.
module tb_dma_rd_elems_h #(
  parameter int ElemBytes = 4,
  parameter int BufBeats  = 32,
  parameter int MaxCount  = 40,
  parameter int NCmd0     = 150,  // random phase
  parameter int NCmd1     = 60,   // full-speed phase
  parameter int Seed      = 1,
  parameter int MaxErrors = 10,
  parameter int MaxIdle   = 1000  // cycles without any handshake: a hang
) (
  input  logic clk,
  input  logic rst_n,
  output logic done,
  output int   errors
);
  localparam int BB  = tsr_pkg::BUS_BYTES;
  localparam int EB  = ElemBytes;
  localparam int BPE = (EB >= BB) ? EB / BB : 1;
  // Full-speed phase: every command lasts at least this many element cycles
  // so that the commands queued behind the streaming one (CmdDepth 4) cover
  // the command-to-element latency (about 8 cycles with data latency 3).
  localparam int MinCyc1   = 12;
  localparam int MinCount1 = (MinCyc1 + BPE - 1) / BPE;
  // The rate is only guaranteed when a 16-beat chunk can be requested while
  // the buffer still holds data (BufBeats >= 32) or without reservation.
  localparam bit CheckRate = (BufBeats == 0) || (BufBeats >= 32);

  logic                 cmd_valid, cmd_ready;
  logic [31:0]          cmd_addr, cmd_count;
  logic                 rd_req_valid, rd_req_ready;
  logic [31:0]          rd_req_addr, rd_req_beats;
  logic                 rd_data_valid, rd_data_ready;
  logic [BB*8-1:0]      rd_data;
  logic                 elem_valid, elem_ready;
  logic [EB*8-1:0]      elem;
  logic                 busy, stall;

  tsr_dma_rd_elems #(
    .ElemBytes (EB),
    .BusBytes  (BB),
    .BufBeats  (BufBeats)
  ) dut (
    .clk_i           (clk),
    .rst_ni          (rst_n),
    .cmd_valid_i     (cmd_valid),
    .cmd_ready_o     (cmd_ready),
    .cmd_addr_i      (cmd_addr),
    .cmd_count_i     (cmd_count),
    .rd_req_valid_o  (rd_req_valid),
    .rd_req_ready_i  (rd_req_ready),
    .rd_req_addr_o   (rd_req_addr),
    .rd_req_beats_o  (rd_req_beats),
    .rd_data_valid_i (rd_data_valid),
    .rd_data_ready_o (rd_data_ready),
    .rd_data_i       (rd_data),
    .elem_valid_o    (elem_valid),
    .elem_ready_i    (elem_ready),
    .elem_o          (elem),
    .busy_o          (busy),
    .stall_o         (stall)
  );

  // ---- helpers
  logic [31:0] rng;
  function automatic logic [31:0] rnd();
    rng = rng ^ (rng << 13);
    rng = rng ^ (rng >> 17);
    rng = rng ^ (rng << 5);
    rnd = rng;
  endfunction

  function automatic logic [7:0] mem_byte(input logic [31:0] a);
    logic [31:0] h;
    h = (a ^ 32'h5bd1e995) * 32'h9E3779B1;
    mem_byte = h[31:24] ^ h[15:8];
  endfunction

  function automatic logic [BB*8-1:0] mem_beat(input logic [31:0] a);
    for (int i = 0; i < BB; i++) mem_beat[i*8 +: 8] = mem_byte(a + i);
  endfunction

  function automatic logic [EB*8-1:0] mem_elem(input logic [31:0] a);
    for (int i = 0; i < EB; i++) mem_elem[i*8 +: 8] = mem_byte(a + i);
  endfunction

  // Describe an element mismatch briefly: first differing byte only (an
  // element can be 16 beats wide).
  function automatic string elem_diff(input logic [EB*8-1:0] got, input logic [31:0] a);
    logic [EB*8-1:0] want;
    int nbad, first;
    want = mem_elem(a);
    nbad = 0;
    first = -1;
    for (int i = 0; i < EB; i++)
      if (got[i*8 +: 8] !== want[i*8 +: 8]) begin
        if (first < 0) first = i;
        nbad++;
      end
    if (first < 0) return "no difference";
    return $sformatf("%0d of %0d bytes differ, first byte %0d: got %h expected %h",
                     nbad, EB, first, got[first*8 +: 8], want[first*8 +: 8]);
  endfunction

  // ---- model state
  logic [31:0] exp_elem[$];    // element addresses still to come out
  logic [31:0] exp_beat[$];    // beat addresses still to be requested
  logic [31:0] dq_addr[$];     // beats requested, not yet delivered
  logic [31:0] dq_time[$];
  logic [31:0] data_addr;     // address of the beat on rd_data
  int          cyc, phase, sent, requested, delivered;
  int          first_fire, last_fire, fires1, idle;
  logic        prev_req_stall, prev_elem_stall;
  logic [31:0] prev_req_addr, prev_req_beats;
  logic [EB*8-1:0] prev_elem;
  logic [31:0] r_lat, r_data, r_req, r_elem, r_cmd, r_cnt, r_short, r_cnt3, r_addr;

  task automatic fail(input string msg);
    $display("FAIL tb_dma_rd_elems E%0d/B%0d cycle %0d: %s", EB, BufBeats, cyc, msg);
    errors++;
  endtask

  // Called by the top on timeout.
  task automatic report;
    $display("  E%0d/B%0d: done %0d phase %0d cycle %0d, %0d commands sent, %0d elements and %0d beats pending, %0d beats in flight, errors %0d, busy_o %0d elem_valid %0d rd_req_valid %0d",
             EB, BufBeats, done, phase, cyc, sent, exp_elem.size(), exp_beat.size(),
             dq_addr.size(), errors, busy, elem_valid, rd_req_valid);
  endtask

  initial rng = 32'h1234567 + 32'(Seed) * 32'h9E3779B9;

  always @(posedge clk) begin
    if (!rst_n) begin
      cmd_valid <= 1'b0;
      cmd_addr <= '0;
      cmd_count <= '0;
      rd_req_ready <= 1'b0;
      rd_data_valid <= 1'b0;
      rd_data <= '0;
      elem_ready <= 1'b0;
      done <= 1'b0;
      errors = 0;
      cyc = 0;
      phase = 0;
      sent = 0;
      requested = 0;
      delivered = 0;
      first_fire = -1;
      last_fire = -1;
      fires1 = 0;
      idle = 0;
      prev_req_stall = 1'b0;
      prev_elem_stall = 1'b0;
    end else if (!done) begin
      cyc++;
      // Random numbers for this cycle, drawn unconditionally.
      r_lat   = rnd();
      r_data  = rnd();
      r_req   = rnd();
      r_elem  = rnd();
      r_cmd   = rnd();
      r_cnt   = rnd();
      r_short = rnd();
      r_cnt3  = rnd();
      r_addr  = rnd();
      // ---- stability of DUT outputs held under back-pressure
      if (prev_req_stall && (!rd_req_valid || rd_req_addr != prev_req_addr ||
                             rd_req_beats != prev_req_beats))
        fail("read request changed or dropped while not accepted");
      if (prev_elem_stall && (!elem_valid || elem != prev_elem))
        fail("element changed or dropped while not accepted");
      prev_req_stall  = rd_req_valid && !rd_req_ready;
      prev_req_addr   = rd_req_addr;
      prev_req_beats  = rd_req_beats;
      prev_elem_stall = elem_valid && !elem_ready;
      prev_elem       = elem;

      // ---- status outputs
      if (busy !== (exp_elem.size() != 0))
        fail($sformatf("busy_o=%0d with %0d elements pending", busy, exp_elem.size()));
      if (stall !== (exp_elem.size() != 0 && !elem_valid))
        fail($sformatf("stall_o=%0d (elem_valid %0d, pending %0d)", stall, elem_valid,
                       exp_elem.size()));

      // ---- command accepted
      if (cmd_valid && cmd_ready) begin
        logic [31:0] b0, b1;
        for (int k = 0; k < cmd_count; k++) exp_elem.push_back(cmd_addr + k * EB);
        b0 = cmd_addr & ~32'(BB - 1);
        b1 = (cmd_addr + cmd_count * EB + BB - 1) & ~32'(BB - 1);
        for (logic [31:0] b = b0; b != b1; b += BB) exp_beat.push_back(b);
        sent++;
      end

      // ---- request accepted
      if (rd_req_valid && rd_req_ready) begin
        int lat;
        lat = r_lat % 24;
        if (phase == 1) lat = 3;
        if (rd_req_addr % BB != 0) fail($sformatf("request address %h not bus aligned", rd_req_addr));
        if (rd_req_beats == 0) fail("request of 0 beats");
        if (BufBeats != 0 && rd_req_beats > 16) fail("chunk larger than 16 beats");
        for (int b = 0; b < rd_req_beats; b++) begin
          if (exp_beat.size() == 0) begin
            fail($sformatf("request beat %h not covered by any command", rd_req_addr + b * BB));
          end else begin
            logic [31:0] want;
            want = exp_beat.pop_front();
            if (want != rd_req_addr + b * BB)
              fail($sformatf("requested beat %h, expected %h", rd_req_addr + b * BB, want));
          end
          dq_addr.push_back(rd_req_addr + b * BB);
          dq_time.push_back(32'(cyc + lat));
        end
        requested += rd_req_beats;
        if (BufBeats != 0 && requested - delivered > BufBeats)
          fail($sformatf("%0d beats outstanding, reservation is %0d", requested - delivered, BufBeats));
      end

      // ---- data delivered
      if (rd_data_valid && rd_data_ready) begin
        if (dq_addr.size() == 0) begin
          fail("model: beat delivered but none in flight");
        end else begin
          logic [31:0] a, t;
          a = dq_addr.pop_front();
          t = dq_time.pop_front();
          if (a != data_addr || t > 32'(cyc))
            fail($sformatf("model: delivered beat %h (due %0d), queue head %h", data_addr, t, a));
        end
        delivered++;
      end

      // ---- element out
      if (elem_valid && elem_ready) begin
        if (exp_elem.size() == 0) begin
          fail("element without a command");
        end else begin
          logic [31:0] a;
          a = exp_elem.pop_front();
          if (elem !== mem_elem(a))
            fail($sformatf("element at %h: %s", a, elem_diff(elem, a)));
        end
        if (phase == 1) begin
          if (first_fire < 0) first_fire = cyc;
          last_fire = cyc;
          fires1++;
        end
      end

      // ---- drive: data (held until taken)
      if (!rd_data_valid || rd_data_ready) begin
        logic give;
        give = 1'b0;
        if (dq_addr.size() != 0)   // (no && here: see the header)
          if (dq_time[0] <= 32'(cyc)) give = (phase == 1) || (r_data % 4 != 0);
        if (give) begin
          data_addr = dq_addr[0];
          rd_data_valid <= 1'b1;
          rd_data <= mem_beat(data_addr);
        end else begin
          rd_data_valid <= 1'b0;
          rd_data <= {BB{8'hxx}};
        end
      end
      rd_req_ready <= (phase == 1) || (r_req % 3 != 0);
      elem_ready   <= (phase == 1) || (r_elem % 4 != 0);

      // ---- drive: commands
      if (!cmd_valid || cmd_ready) begin
        cmd_valid <= 1'b0;
        if (sent < ((phase == 0) ? NCmd0 : NCmd0 + NCmd1) && (phase == 1 || r_cmd % 3 == 0)) begin
          logic [31:0] cnt, a;
          cnt = 1 + r_cnt % MaxCount;
          if (phase == 0 && r_short % 4 == 0) cnt = 1 + r_cnt3 % 3;
          if (phase == 1 && cnt < MinCount1) cnt = MinCount1;
          a = (r_addr % 32'h10000) * EB;
          cmd_valid <= 1'b1;
          cmd_addr  <= a;
          cmd_count <= cnt;
        end
      end

      // ---- hang detection
      if ((cmd_valid && cmd_ready) || (rd_req_valid && rd_req_ready) ||
          (rd_data_valid && rd_data_ready) || (elem_valid && elem_ready))
        idle = 0;
      else
        idle++;
      if (idle == MaxIdle) begin
        fail($sformatf("no handshake for %0d cycles (%0d elements, %0d beats pending, %0d in flight; busy_o %0d rd_req_valid %0d rd_data_ready %0d elem_valid %0d)",
                       MaxIdle, exp_elem.size(), exp_beat.size(), dq_addr.size(), busy,
                       rd_req_valid, rd_data_ready, elem_valid));
        done <= 1'b1;
      end

      // ---- phase change / end
      if (sent == NCmd0 && phase == 0 && exp_elem.size() == 0 && !cmd_valid) begin
        if (exp_beat.size() != 0 || dq_addr.size() != 0) fail("beats left after phase 0");
        phase = 1;
      end
      if (phase == 1 && sent == NCmd0 + NCmd1 && exp_elem.size() == 0 && !cmd_valid) begin
        string rate_note;
        rate_note = "";
        if (!CheckRate) rate_note = ", not checked";
        if (exp_beat.size() != 0 || dq_addr.size() != 0) fail("beats left at end");
        // Full speed: every cycle an element (or every BPE cycles a wide one).
        if (CheckRate && last_fire - first_fire > (fires1 - 1) * BPE)
          fail($sformatf("full-speed phase: %0d elements took %0d cycles (ideal %0d)",
                         fires1, last_fire - first_fire + 1, (fires1 - 1) * BPE + 1));
        $display("tb_dma_rd_elems E%0d/B%0d: %0d beats, full-speed %0d elements in %0d cycles (ideal %0d%s), done at cycle %0d",
                 EB, BufBeats, requested, fires1, last_fire - first_fire + 1,
                 (fires1 - 1) * BPE + 1, rate_note, cyc);
        done <= 1'b1;
      end
      if (errors >= MaxErrors) begin
        $display("FAIL tb_dma_rd_elems E%0d/B%0d: stopping after %0d errors", EB, BufBeats, errors);
        done <= 1'b1;
      end
    end
  end
endmodule

module tb_dma_rd_elems;
  localparam int BB = tsr_pkg::BUS_BYTES;
  localparam int NH = 8;

  logic clk = 1'b0;
  logic rst_n = 1'b0;
  logic [NH-1:0] done;
  int errors [NH];

  always #5 clk = ~clk;

  // Every harness is done after about 10000 cycles (E128, 16 beats per
  // element); a hang ends here after a few seconds of Icarus time.
  localparam int MaxCycles = 30000;

  initial begin
    repeat (MaxCycles) @(posedge clk);
    $display("FAIL tb_dma_rd_elems: timeout after %0d cycles, done=%b", MaxCycles, done);
    h0.report(); h1.report(); h2.report(); h3.report();
    h4.report(); h5.report(); h6.report(); h7.report();
    $fatal(1);
  end

  tb_dma_rd_elems_h #(.ElemBytes(1),       .BufBeats(32), .MaxCount(70), .Seed(1))
    h0 (.clk(clk), .rst_n(rst_n), .done(done[0]), .errors(errors[0]));
  tb_dma_rd_elems_h #(.ElemBytes(4),       .BufBeats(32), .MaxCount(40), .Seed(2))
    h1 (.clk(clk), .rst_n(rst_n), .done(done[1]), .errors(errors[1]));
  tb_dma_rd_elems_h #(.ElemBytes(BB / 2),  .BufBeats(16), .MaxCount(40), .Seed(3))
    h2 (.clk(clk), .rst_n(rst_n), .done(done[2]), .errors(errors[2]));
  tb_dma_rd_elems_h #(.ElemBytes(BB),      .BufBeats(32), .MaxCount(40), .Seed(4))
    h3 (.clk(clk), .rst_n(rst_n), .done(done[3]), .errors(errors[3]));
  tb_dma_rd_elems_h #(.ElemBytes(2 * BB),  .BufBeats(32), .MaxCount(20), .Seed(5))
    h4 (.clk(clk), .rst_n(rst_n), .done(done[4]), .errors(errors[4]));
  tb_dma_rd_elems_h #(.ElemBytes(16 * BB), .BufBeats(32), .MaxCount(4),  .Seed(6))
    h5 (.clk(clk), .rst_n(rst_n), .done(done[5]), .errors(errors[5]));
  tb_dma_rd_elems_h #(.ElemBytes(4),       .BufBeats(0),  .MaxCount(40), .Seed(7))
    h6 (.clk(clk), .rst_n(rst_n), .done(done[6]), .errors(errors[6]));
  tb_dma_rd_elems_h #(.ElemBytes(16 * BB), .BufBeats(0),  .MaxCount(4),  .Seed(8))
    h7 (.clk(clk), .rst_n(rst_n), .done(done[7]), .errors(errors[7]));

  initial begin
    int total;
    repeat (4) @(posedge clk);
    rst_n <= 1'b1;
    wait (&done);
    total = 0;
    for (int i = 0; i < NH; i++) total += errors[i];
    if (total != 0) begin
      $display("FAIL tb_dma_rd_elems: %0d errors", total);
      $fatal(1);
    end
    $display("PASS");
    $finish;
  end
endmodule
