// tb_alu_lut: tsr_alu_lut (one lane's copy of the activation tables)
// against a byte array written here from isa/semantics.md: ALU op lut is
// table[b & (T-1)][a & 255] sign-extended from 8 bits, and a LOAD of lut
// writes the tables' bytes in DRAM order, one bus beat (BUS_BYTES bytes)
// per cycle. The unit is instantiated with its table count as a parameter
// (1, 2, 4 and 8 tables, the bus of the config), so the check runs whatever
// ACT_LUT the preset has. For each: every beat written with random bytes,
// then every entry of every table read with random high bits in a and b
// (b negative too: its two's complement low bits name the table), then a
// few beats rewritten (the others must keep their bytes) and every entry
// read again. Reads happen only between writes, as in the compute stage.
// Seed: SEED below (printed).
module tb_alu_lut;
  localparam int W = tsr_pkg::ACC_WIDTH;
  localparam int BB = tsr_pkg::BUS_BYTES;
  localparam int SEED = 25;

  logic clk = 1'b0;
  always #5 clk = !clk;

  logic [3:0] done;

  for (genvar g = 0; g < 4; g++) begin : g_t
    localparam int T = 1 << g;
    localparam int D = T * 256 / BB;  // beats of all tables
    localparam int DAW = (D > 1) ? $clog2(D) : 1;
    logic           we, re;
    logic [DAW-1:0] waddr;
    logic [BB*8-1:0] wdata;
    logic [W-1:0]   a, b, res;
    logic [7:0]     ref_t [T*256];
    int             seed_state;
    int             nerr;  // (a block variable: Icarus 11 loses increments of
                           // a module array element from an automatic task)

    tsr_alu_lut #(
      .Width    (W),
      .Tables   (T),
      .BusBytes (BB)
    ) u_lut (
      .clk_i   (clk),
      .we_i    (we),
      .waddr_i (waddr),
      .wdata_i (wdata),
      .re_i    (re),
      .a_i     (a),
      .b_i     (b),
      .res_o   (res)
    );

    // Write beat k with random bytes (model too), on the next rising edge.
    task automatic write_beat(input int k);
      @(negedge clk);
      we = 1'b1;
      re = 1'b0;
      waddr = DAW'(k);
      for (int j = 0; j < BB; j++) begin
        wdata[j*8 +: 8] = 8'($random(seed_state));
        ref_t[k*BB + j] = wdata[j*8 +: 8];
      end
      @(posedge clk);
      #1 we = 1'b0;
    endtask

    // Read every entry of every table, a and b with random high bits.
    task automatic check_all(input string what);
      logic [W-1:0] want;
      @(negedge clk);
      re = 1'b1;
      for (int t = 0; t < T; t++) begin
        for (int e = 0; e < 256; e++) begin
          a = W'($random(seed_state));
          a[7:0] = 8'(e);
          b = W'($random(seed_state));
          b = (b & ~W'(T - 1)) | W'(t);
          #1;
          want = W'($signed(ref_t[t*256 + e]));
          if (res !== want) begin
            if (nerr < 10)
              $display("FAIL %0d tables, %s: a 0x%h b 0x%h (table %0d entry %0d): got 0x%h, want 0x%h",
                       T, what, a, b, t, e, res, want);
            nerr++;
          end
        end
      end
      re = 1'b0;
    endtask

    initial begin
      seed_state = SEED + g;
      we = 1'b0;
      re = 1'b0;
      waddr = '0;
      wdata = '0;
      a = '0;
      b = '0;
      nerr = 0;
      done[g] = 1'b0;
      for (int k = 0; k < D; k++) write_beat(k);
      check_all("after loading every beat");
      // rewrite a few beats (a LOAD of some tables): the rest keep theirs
      for (int n = 0; n < 3; n++) write_beat(($random(seed_state) & 32'h7fffffff) % D);
      write_beat(D - 1);
      check_all("after rewriting some beats");
      done[g] = 1'b1;
    end
  end

  int errors;

  initial begin
    $display("tb_alu_lut: seed %0d, bus %0d bytes, W = %0d", SEED, BB, W);
    wait (done == 4'hf);
    errors = g_t[0].nerr + g_t[1].nerr + g_t[2].nerr + g_t[3].nerr;
    if (errors == 0) begin
      $display("PASS (1, 2, 4 and 8 tables: every entry, twice)");
    end else begin
      $display("FAIL: %0d mismatches", errors);
      $fatal(1);
    end
    $finish;
  end
endmodule
