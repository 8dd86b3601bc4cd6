// tsr_dep_queue: a dependency-token queue between two stages. Tokens carry
// no data, so the queue is a saturating counter; capacity is
// DEP_QUEUE_DEPTH, the bound the verifier's deadlock check assumes. The
// capacity limits run-ahead only: it orders no memory access
// (isa/semantics.md), and consumers may pop earlier than the golden model.
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

`ifndef SYNTHESIS
  // Simulation-only protocol checks (plain always: not hardware).
  always @(posedge clk_i) begin
    if (rst_ni) begin
      assert (!(push_i && !ready_o)) else $error("tsr_dep_queue: push to a full queue");
      assert (!(pop_i && !valid_o)) else $error("tsr_dep_queue: pop from an empty queue");
    end
  end
`endif
endmodule
