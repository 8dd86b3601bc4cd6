// tsr_dep_queue: a dependency-token queue between two stages. Tokens carry
// no data, so the queue is a saturating counter; capacity is
// DEP_QUEUE_DEPTH, the bound the verifier's deadlock check assumes. The
// capacity limits run-ahead only: it orders no memory access
// (isa/semantics.md), and consumers may pop earlier than the golden model.
`include "tsr_assert.svh"

module tsr_dep_queue #(
  parameter int Depth = tsr_pkg::DEP_QUEUE_DEPTH,
  localparam int CW = $clog2(Depth + 1)
) (
  input  logic clk_i,
  input  logic rst_ni,
  input  logic push_i,   // producer: one token (only when ready_o)
  input  logic pop_i,    // consumer: one token (only when valid_o)
  output logic valid_o,  // at least one token
  output logic ready_o,  // room for one more
  output logic [CW-1:0] count_o
);
  logic [CW-1:0] cnt_q, cnt_d;
  logic do_push, do_pop;

  assign do_push = push_i && ready_o;
  assign do_pop  = pop_i && valid_o;
  assign valid_o = (cnt_q != '0);
  assign ready_o = (cnt_q != CW'(Depth));
  assign count_o = cnt_q;

  always_comb begin
    cnt_d = cnt_q + CW'(do_push) - CW'(do_pop);
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) cnt_q <= '0;
    else cnt_q <= cnt_d;
  end

  // Protocol: producers push only with room, consumers pop only a token;
  // the count stays within the capacity the verifier assumes.
  `TSR_ASSERT(chk_push_when_full, !(push_i && !ready_o), clk_i, rst_ni)
  `TSR_ASSERT(chk_pop_when_empty, !(pop_i && !valid_o), clk_i, rst_ni)
  `TSR_ASSERT(chk_count_in_range, cnt_q <= CW'(Depth), clk_i, rst_ni)
endmodule
