// tsr_sram: one-write, one-read synchronous RAM written so FPGA tools infer
// block RAM: no reset, registered read data, read-during-write returns the
// old contents. Lutram = 1 asks for distributed (LUT) RAM instead
// (ram_style, honoured by yosys and Vivado): same behaviour and timing, for
// buffers that would push a small part over its block-RAM budget.
module tsr_sram #(
  parameter int Width = 32,
  parameter int Depth = 16,
  parameter int Lutram = 0,
  localparam int AW = (Depth > 1) ? $clog2(Depth) : 1
) (
  input  logic             clk_i,
  input  logic             we_i,
  input  logic [AW-1:0]    waddr_i,
  input  logic [Width-1:0] wdata_i,
  input  logic             re_i,
  input  logic [AW-1:0]    raddr_i,
  output logic [Width-1:0] rdata_o
);
  logic [Width-1:0] rdata_q;

  // Memory arrays are the one place where the write is not a plain q <= d:
  // the write enable and address select the entry, as RAM inference needs.
  // The two branches differ only in the ram_style attribute (an attribute
  // cannot depend on a parameter).
  if (Lutram != 0) begin : g_lut
    (* ram_style = "distributed" *) logic [Width-1:0] mem_q [Depth];
    always_ff @(posedge clk_i) begin
      if (we_i) mem_q[waddr_i] <= wdata_i;
      if (re_i) rdata_q <= mem_q[raddr_i];
    end
  end else begin : g_bram
    logic [Width-1:0] mem_q [Depth];
    always_ff @(posedge clk_i) begin
      if (we_i) mem_q[waddr_i] <= wdata_i;
      if (re_i) rdata_q <= mem_q[raddr_i];
    end
  end

  assign rdata_o = rdata_q;
endmodule
