// tb_ice40_top: the iCE40 board wrapper seen from the host's side of the
// UART. Sends frames as a host program would (opcode, address, data; 9
// bytes, LSB first, 8N1) and checks the 4-byte replies: device-memory words
// written and read back in both SPRAM banks, an address past the 128 KiB
// answering an error, an accelerator register written and read back
// through the AXI4-Lite bridge, an unknown opcode. A fast baud rate
// (8 clocks per bit) keeps the run short. Prints PASS or FAIL.
`timescale 1ns / 1ps
module tb_ice40_top;
  localparam int Div = 8;  // clocks per UART bit
  logic clk = 1'b0, rx = 1'b1, tx, led_done_n, led_rx_n;
  int   errors = 0;
  always #5 clk = !clk;

  tsr_ice40_top #(.ClkHz(Div), .Baud(1)) dut (
    .clk_i (clk), .btn_ni (1'b1), .uart_rx_i (rx), .uart_tx_o (tx),
    .led_done_no (led_done_n), .led_rx_no (led_rx_n));

  task automatic send_byte(input logic [7:0] b);
    rx = 1'b0;
    repeat (Div) @(posedge clk);
    for (int i = 0; i < 8; i++) begin
      rx = b[i];
      repeat (Div) @(posedge clk);
    end
    rx = 1'b1;
    repeat (Div) @(posedge clk);
  endtask

  task automatic recv_byte(output logic [7:0] b);
    int waited = 0;
    while (tx !== 1'b0) begin
      @(posedge clk);
      waited++;
      if (waited > 100000) begin
        $display("FAIL: no reply byte from the board");
        $fatal(1);
      end
    end
    repeat (Div / 2) @(posedge clk);
    for (int i = 0; i < 8; i++) begin
      repeat (Div) @(posedge clk);
      b[i] = tx;
    end
    repeat (Div) @(posedge clk);  // stop bit
  endtask

  task automatic frame(input logic [7:0] op, input logic [31:0] addr, input logic [31:0] data,
                       output logic [31:0] reply);
    logic [7:0] b;
    send_byte(op);
    for (int i = 0; i < 4; i++) send_byte(addr[8*i +: 8]);
    for (int i = 0; i < 4; i++) send_byte(data[8*i +: 8]);
    for (int i = 0; i < 4; i++) begin
      recv_byte(b);
      reply[8*i +: 8] = b;
    end
  endtask

  task automatic expect_frame(input string what, input logic [7:0] op, input logic [31:0] addr,
                              input logic [31:0] data, input logic [31:0] want);
    logic [31:0] got;
    frame(op, addr, data, got);
    if (got !== want) begin
      $display("FAIL: %s: reply %08h, expected %08h", what, got, want);
      errors++;
    end else $display("ok: %s: %08h", what, got);
  endtask

  initial begin
    repeat (40) @(posedge clk);
    expect_frame("memory write bank 0", 8'h03, 32'h0000_0100, 32'hdead_beef, 32'd0);
    expect_frame("memory write bank 1", 8'h03, 32'h0001_0104, 32'h1234_5678, 32'd0);
    expect_frame("memory write last word", 8'h03, 32'h0001_fffc, 32'h0bad_cafe, 32'd0);
    expect_frame("memory read bank 0", 8'h04, 32'h0000_0100, 32'd0, 32'hdead_beef);
    expect_frame("memory read bank 1", 8'h04, 32'h0001_0104, 32'd0, 32'h1234_5678);
    expect_frame("memory read last word", 8'h04, 32'h0001_fffc, 32'd0, 32'h0bad_cafe);
    expect_frame("memory write past 128 KiB", 8'h03, 32'h0002_0000, 32'h1111_1111, 32'd1);
    expect_frame("memory read past 128 KiB", 8'h04, 32'h0002_0000, 32'd0, 32'd0);
    expect_frame("bank 0 unchanged by the refused write", 8'h04, 32'h0000_0000 | 32'h100, 32'd0,
                 32'hdead_beef);
    expect_frame("register write INSN_ADDR", 8'h01, 32'(tsr_pkg::REG_INSN_ADDR), 32'h0000_1230, 32'd0);
    expect_frame("register read INSN_ADDR", 8'h02, 32'(tsr_pkg::REG_INSN_ADDR), 32'd0, 32'h0000_1230);
    expect_frame("unknown opcode", 8'h55, 32'd0, 32'd0, 32'hffff_ffff);
    if (errors == 0) $display("PASS");
    else begin
      $display("FAIL: %0d replies wrong", errors);
      $fatal(1);
    end
    $finish;
  end
endmodule
