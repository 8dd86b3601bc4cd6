// tsr_pad_box: the padded rectangle of a LOAD (isa/semantics.md LOAD), the
// one place its geometry is computed: rows of x_pad0 + x_size + x_pad1
// elements, y_pad0 + y_size + y_pad1 of them, data in columns
// [x_pad0, x_pad0 + x_size) of rows [y_pad0, y_pad0 + y_size), pad
// elsewhere. The load stage (tsr_load), the compute stage's bounds check
// (tsr_compute), its uop/acc loads (tsr_compute_load) and the serial
// core's LOAD walk (tsr_serial_sched) walk or size this box.
// Combinational; every output fits RowW bits (a size plus two pads).
`include "tsr_assert.svh"

module tsr_pad_box #(
  localparam int RowW = tsr_pkg::MEM_X_SIZE_W + 1
) (
  input  logic [tsr_pkg::MEM_Y_SIZE_W-1:0] y_size_i,
  input  logic [tsr_pkg::MEM_X_SIZE_W-1:0] x_size_i,
  input  logic [tsr_pkg::MEM_Y_PAD0_W-1:0] y_pad0_i,
  input  logic [tsr_pkg::MEM_Y_PAD1_W-1:0] y_pad1_i,
  input  logic [tsr_pkg::MEM_X_PAD0_W-1:0] x_pad0_i,
  input  logic [tsr_pkg::MEM_X_PAD1_W-1:0] x_pad1_i,
  output logic [RowW-1:0] row_o,   // elements per row, pads included
  output logic [RowW-1:0] rows_o,  // rows, pads included
  output logic [RowW-1:0] x_lo_o,  // first data column
  output logic [RowW-1:0] x_hi_o,  // one past the last data column
  output logic [RowW-1:0] y_lo_o,  // first data row
  output logic [RowW-1:0] y_hi_o   // one past the last data row
);
  assign x_lo_o = RowW'(x_pad0_i);
  assign x_hi_o = RowW'(x_pad0_i) + RowW'(x_size_i);
  assign row_o  = x_hi_o + RowW'(x_pad1_i);
  assign y_lo_o = RowW'(y_pad0_i);
  assign y_hi_o = RowW'(y_pad0_i) + RowW'(y_size_i);
  assign rows_o = y_hi_o + RowW'(y_pad1_i);

  // One more bit than a size holds a size plus two pads of at most 4 bits
  // each, in either direction.
  `TSR_ASSERT_INIT(chk_widths, tsr_pkg::MEM_Y_SIZE_W <= tsr_pkg::MEM_X_SIZE_W &&
                   tsr_pkg::MEM_Y_PAD0_W <= 4 && tsr_pkg::MEM_Y_PAD1_W <= 4 &&
                   tsr_pkg::MEM_X_PAD0_W <= 4 && tsr_pkg::MEM_X_PAD1_W <= 4)
endmodule
