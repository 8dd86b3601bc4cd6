// tsr_hs_check: simulation-only checker of one valid/ready handshake. Once
// valid is high without ready, the sender must keep valid high and the
// payload unchanged until the transfer (AXI's rule, and the rule every
// Tessera FIFO and stage port relies on: a receiver may sample the payload
// in any cycle valid is high). Instantiated beside each handshake; empty in
// synthesis. Through tsr_assert.svh (`if (...) $error`, which Verilator
// checks without --assert and Icarus reports too).
`include "tsr_assert.svh"

module tsr_hs_check #(
  parameter int Width = 1
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  input  logic             valid_i,
  input  logic             ready_i,
  input  logic [Width-1:0] data_i
);
`ifndef SYNTHESIS
  logic             stall_q;  // last cycle: valid && !ready
  logic [Width-1:0] data_q;   // the payload then

  always @(posedge clk_i) begin
    if (!rst_ni) begin
      stall_q <= 1'b0;
    end else begin
      stall_q <= valid_i && !ready_i;
    end
    data_q <= data_i;
  end
`endif
  `TSR_ASSERT_MSG(chk_valid_held, !(stall_q && !valid_i), clk_i, rst_ni,
                  ("%m: valid dropped before the transfer (valid && !ready last cycle)"))
  `TSR_ASSERT_MSG(chk_payload_held, !(stall_q && valid_i && data_i !== data_q), clk_i, rst_ni,
                  ("%m: payload changed while valid && !ready"))
endmodule
