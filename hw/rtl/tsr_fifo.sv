// tsr_fifo: synchronous FIFO with valid/ready on both sides. Output data is
// taken from the storage array, so a push is visible at the output one cycle
// later; full and empty come from a count register.
`include "tsr_assert.svh"

module tsr_fifo #(
  parameter int Width = 8,
  parameter int Depth = 4,
  localparam int AW = (Depth > 1) ? $clog2(Depth) : 1,
  localparam int CW = $clog2(Depth + 1)
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  input  logic             in_valid_i,
  output logic             in_ready_o,
  input  logic [Width-1:0] in_data_i,
  output logic             out_valid_o,
  input  logic             out_ready_i,
  output logic [Width-1:0] out_data_o,
  output logic [CW-1:0]    count_o
);
  logic [Width-1:0] mem_q [Depth];
  logic [AW-1:0] rd_q, rd_d, wr_q, wr_d;
  logic [CW-1:0] cnt_q, cnt_d;
  logic push, pop;

  assign in_ready_o  = (cnt_q != CW'(Depth));
  assign out_valid_o = (cnt_q != '0);
  assign out_data_o  = mem_q[rd_q];
  assign count_o     = cnt_q;
  assign push = in_valid_i && in_ready_o;
  assign pop  = out_valid_o && out_ready_i;

  function automatic logic [AW-1:0] incr(input logic [AW-1:0] p);
    if (p == AW'(Depth - 1)) incr = '0;
    else incr = p + AW'(1);
  endfunction

  always_comb begin
    rd_d  = pop ? incr(rd_q) : rd_q;
    wr_d  = push ? incr(wr_q) : wr_q;
    cnt_d = cnt_q + CW'(push) - CW'(pop);
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      rd_q  <= '0;
      wr_q  <= '0;
      cnt_q <= '0;
    end else begin
      rd_q  <= rd_d;
      wr_q  <= wr_d;
      cnt_q <= cnt_d;
    end
  end

  // Storage: written in place (no reset), like the SRAM.
  always_ff @(posedge clk_i) begin
    if (push) mem_q[wr_q] <= in_data_i;
  end

`ifndef SYNTHESIS
  // Simulation-only checks: the producer holds its offer (tsr_hs_check);
  // the count stays within 0..Depth and agrees with the pointers (no push
  // when full, no pop when empty).
  tsr_hs_check #(.Width(Width)) u_in_check (
    .clk_i (clk_i), .rst_ni (rst_ni), .valid_i (in_valid_i), .ready_i (in_ready_o),
    .data_i (in_data_i));
`endif
  `TSR_ASSERT_MSG(chk_count_range, cnt_q <= CW'(Depth), clk_i, rst_ni,
                  ("%m: count %0d above the depth %0d", cnt_q, Depth))
  `TSR_ASSERT(chk_empty_ptrs, !(cnt_q == '0 && rd_q != wr_q), clk_i, rst_ni)
  `TSR_ASSERT(chk_full_ptrs, !(cnt_q == CW'(Depth) && rd_q != wr_q), clk_i, rst_ni)
  `TSR_ASSERT(chk_push_when_full, !(push && cnt_q == CW'(Depth)), clk_i, rst_ni)
  `TSR_ASSERT(chk_pop_when_empty, !(pop && cnt_q == '0), clk_i, rst_ni)
endmodule
