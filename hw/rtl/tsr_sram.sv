// tsr_sram: one-write, one-read synchronous RAM written so FPGA tools infer
// block RAM: no reset, registered read data, read-during-write returns the
// old contents. Lutram = 1 asks for distributed (LUT) RAM instead
// (ram_style, honoured by yosys and Vivado): same behaviour and timing, for
// buffers that would push a small part over its block-RAM budget.
// NoRdw = 1 promises that no row is read in the cycle it is written (the
// serial core never reads and writes one buffer at once): the synthesizer
// may then drop the bypass that gives a collision its old-data result
// (yosys no_rw_check; on iCE40 that bypass was a register and a LUT per data
// bit beside every block RAM). A simulation check holds the caller to it.
`include "tsr_assert.svh"

module tsr_sram #(
  parameter int Width = 32,
  parameter int Depth = 16,
  parameter int Lutram = 0,
  parameter int NoRdw = 0,
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
  end else if (NoRdw != 0) begin : g_bram_nrw
    (* no_rw_check *) logic [Width-1:0] mem_q [Depth];
    always_ff @(posedge clk_i) begin
      if (we_i) mem_q[waddr_i] <= wdata_i;
      if (re_i) rdata_q <= mem_q[raddr_i];
    end
    `TSR_ASSERT_MSG(chk_no_rdw, !(we_i && re_i && waddr_i == raddr_i), clk_i, 1'b1,
                    ("%m: row %0d read in the cycle it is written (NoRdw = 1)", raddr_i))
  end else begin : g_bram
    logic [Width-1:0] mem_q [Depth];
    always_ff @(posedge clk_i) begin
      if (we_i) mem_q[waddr_i] <= wdata_i;
      if (re_i) rdata_q <= mem_q[raddr_i];
    end
  end

  assign rdata_o = rdata_q;

  // Every write lands inside the array (a Depth that is not a power of two
  // leaves addresses the RAM does not have).
  `TSR_ASSERT(chk_write_in_range, !we_i || 32'(waddr_i) < 32'(Depth), clk_i, 1'b1)
endmodule
