// tsr_sram_2p: a synchronous RAM with two ports, written so FPGA tools
// infer one true-dual-port block RAM: port A reads or writes (one address),
// port B reads. No reset, registered read data (valid the cycle after the
// read enable), a port B read of the address port A writes in that cycle
// returns the old contents. Port A must not read and write in one cycle
// (its caller interleaves them; an assertion checks it in simulation); a
// write also loads port A's read data with the old contents (read-first, as
// the block RAM port does, so no extra register holds it). The
// accumulator uses it with ACC_SINGLE_COPY: one copy per bank instead of a
// tsr_sram for the dst reads and another for the src reads.
`include "tsr_assert.svh"

module tsr_sram_2p #(
  parameter int Width = 32,
  parameter int Depth = 16,
  localparam int AW = (Depth > 1) ? $clog2(Depth) : 1
) (
  input  logic             clk_i,
  // port A: write or read
  input  logic             a_we_i,
  input  logic             a_re_i,
  input  logic [AW-1:0]    a_addr_i,
  input  logic [Width-1:0] a_wdata_i,
  output logic [Width-1:0] a_rdata_o,
  // port B: read
  input  logic             b_re_i,
  input  logic [AW-1:0]    b_addr_i,
  output logic [Width-1:0] b_rdata_o
);
  logic [Width-1:0] mem_q [Depth];
  logic [Width-1:0] a_rdata_q, b_rdata_q;

  // As in tsr_sram, the memory array is written through its address.
  always_ff @(posedge clk_i) begin
    if (a_we_i) mem_q[a_addr_i] <= a_wdata_i;
    if (a_re_i || a_we_i) a_rdata_q <= mem_q[a_addr_i];  // read-first (see the header)
    if (b_re_i) b_rdata_q <= mem_q[b_addr_i];
  end

  assign a_rdata_o = a_rdata_q;
  assign b_rdata_o = b_rdata_q;

  `TSR_ASSERT(chk_port_a_one_access, !(a_we_i && a_re_i), clk_i, 1'b1)
  // Every write lands inside the array (a Depth that is not a power of two
  // leaves addresses the RAM does not have).
  `TSR_ASSERT(chk_write_in_range, !a_we_i || 32'(a_addr_i) < 32'(Depth), clk_i, 1'b1)
endmodule
