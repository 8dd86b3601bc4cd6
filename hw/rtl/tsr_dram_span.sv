// tsr_dram_span: does a LOAD/STORE's DRAM footprint fit the 32-bit AXI
// address space? The ISA's dram_base counts elements (32 bits), so
// dram_base * element bytes can exceed 2^32; the address registers would
// wrap and the access land in another buffer. The stages treat ovf_o like
// an out-of-range index: no transfer, sticky error (the golden model's
// EFAULT: no device DRAM lies above 4 GiB on a 32-bit AXI port).
// Footprint: rows y < y_size of x_size elements at dram_base + y*x_stride,
// so its last element ends at dram_base + (y_size-1)*x_stride + x_size.
// Combinational; callers register the result beside the command.
`include "tsr_assert.svh"

module tsr_dram_span (
  input  logic [tsr_pkg::MEM_DRAM_BASE_W-1:0] dram_base_i,  // first element
  input  logic [tsr_pkg::MEM_Y_SIZE_W-1:0]   y_size_i,
  input  logic [tsr_pkg::MEM_X_SIZE_W-1:0]   x_size_i,
  input  logic [tsr_pkg::MEM_X_STRIDE_W-1:0] x_stride_i,
  input  logic [3:0]  elem_log_i,   // log2(element bytes), <= 12
  output logic        ovf_o         // some byte at or above 2^32
);
  logic [33:0] end_elem, limit;
  logic [31:0] rows_span;
  logic [tsr_pkg::MEM_Y_SIZE_W-1:0] last_row;

  assign last_row  = y_size_i - 16'd1;  // unused when y_size_i == 0
  assign rows_span = 32'(last_row) * 32'(x_stride_i);
  assign end_elem  = 34'(dram_base_i) + 34'(rows_span) + 34'(x_size_i);
  assign limit     = 34'd1 << (6'd32 - 6'(elem_log_i));
  assign ovf_o     = (y_size_i != '0) && (x_size_i != '0) && (end_elem > limit);

  // The 34-bit sum covers dram_base (32 bits) + a row span (32) + x_size (16).
  `TSR_ASSERT_INIT(chk_field_widths, tsr_pkg::MEM_DRAM_BASE_W <= 32 && tsr_pkg::MEM_Y_SIZE_W <= 16 &&
                   tsr_pkg::MEM_X_SIZE_W <= 16 && tsr_pkg::MEM_X_STRIDE_W <= 16)
endmodule
