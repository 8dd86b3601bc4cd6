// tsr_dma_cursor: the element cursor of the DMA element units
// (tsr_dma_rd_elems, tsr_dma_wr_elems): where the next element of the
// command at the head of their info queue sits in its bus beat (slot) and
// how many elements of that command are left. The head's own slot and count
// are used for its first element (no cycle spent loading them); each step
// advances both, and the step that takes the last element makes the next
// command's head count again. The caller pops the head with that step
// (last_o). Counts are >= 1 (a command moves at least one element).
`include "tsr_assert.svh"

module tsr_dma_cursor #(
  parameter int SlotW = 1  // bits of an element slot within a beat
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  input  logic             head_valid_i,  // a command is at the head
  input  logic [SlotW-1:0] head_slot_i,   // its first element's slot
  input  logic [31:0]      head_count_i,  // its element count (>= 1)
  input  logic             step_i,        // one element taken this cycle
  output logic [SlotW-1:0] slot_o,        // slot of the current element
  output logic [31:0]      left_o,        // elements left, the current one included
  output logic             last_o         // the current element is the command's last
);
  logic             first_q, first_d;  // the current element is the head's first
  logic [SlotW-1:0] slot_q, slot_d;
  logic [31:0]      left_q, left_d;

  assign slot_o = first_q ? head_slot_i : slot_q;
  assign left_o = first_q ? head_count_i : left_q;
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

  // Steps only with a command at the head, and never past its last element.
  `TSR_ASSERT(chk_step_with_head, !step_i || head_valid_i, clk_i, rst_ni)
  `TSR_ASSERT(chk_left_nonzero, !head_valid_i || left_o != '0, clk_i, rst_ni)
endmodule
