// tsr_dma_cursor: the element side of the DMA element units
// (tsr_dma_rd_elems, tsr_dma_wr_elems): the queue of accepted commands
// (the slot of each one's first element in its bus beat, and its element
// count) and the cursor over the command at its head: where its next
// element sits in its beat (slot) and how many of its elements are left.
// The head's own slot and count are used for its first element (no cycle
// spent loading them); each step advances both, and the step that takes
// the last element pops the head, so the next command's head counts again.
// Counts are >= 1 (a command moves at least one element).
`include "tsr_assert.svh"

module tsr_dma_cursor #(
  parameter int SlotW = 1,   // bits of an element slot within a beat
  parameter int Depth = 4,   // commands queued
  localparam int CW = $clog2(Depth + 1)
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  // a command (the unit's command port)
  input  logic             push_i,        // accepted this cycle (only when ready_o)
  output logic             ready_o,       // room for one more
  input  logic [SlotW-1:0] slot_i,        // its first element's slot
  input  logic [31:0]      count_i,       // its element count (>= 1)
  // its elements
  output logic             valid_o,       // a command is at the head
  input  logic             step_i,        // one element taken this cycle
  output logic [SlotW-1:0] slot_o,        // slot of the current element
  output logic [31:0]      left_o,        // elements left, the current one included
  output logic             last_o,        // the current element is the command's last
  output logic [CW-1:0]    count_o        // commands queued
);
  logic [SlotW-1:0] head_slot;
  logic [31:0]      head_count;
  tsr_fifo #(.Width(SlotW + 32), .Depth(Depth)) u_q (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (push_i),
    .in_ready_o  (ready_o),
    .in_data_i   ({slot_i, count_i}),
    .out_valid_o (valid_o),
    .out_ready_i (step_i && last_o),
    .out_data_o  ({head_slot, head_count}),
    .count_o     (count_o)
  );

  logic             first_q, first_d;  // the current element is the head's first
  logic [SlotW-1:0] slot_q, slot_d;
  logic [31:0]      left_q, left_d;

  assign slot_o = first_q ? head_slot : slot_q;
  assign left_o = first_q ? head_count : left_q;
  assign last_o = (left_o == 32'd1);

  always_comb begin
    first_d = first_q;
    slot_d  = slot_q;
    left_d  = left_q;
    if (step_i) begin
      first_d = last_o;
      slot_d  = slot_o + SlotW'(1);
      left_d  = left_o - 32'd1;
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      first_q <= 1'b1;
      slot_q  <= '0;
      left_q  <= '0;
    end else begin
      first_q <= first_d;
      slot_q  <= slot_d;
      left_q  <= left_d;
    end
  end

  // Commands move at least one element; steps only with a command at the
  // head, and never past its last element.
  `TSR_ASSERT(chk_push_count, !push_i || count_i != '0, clk_i, rst_ni)
  `TSR_ASSERT(chk_step_with_head, !step_i || valid_o, clk_i, rst_ni)
  `TSR_ASSERT(chk_left_nonzero, !valid_o || left_o != '0, clk_i, rst_ni)
endmodule
