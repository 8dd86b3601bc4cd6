// tsr_dma_beats: the bus beats a DMA command covers: `count` elements of
// ElemBytes bytes from a byte address, in whole beats of BusBytes from the
// beat that holds the first byte. The read and the write side of the DMA
// (tsr_dma_rd_elems, tsr_dma_wr_elems) size their requests here, so the two
// agree on every command. Elements narrower than the bus share beats: the
// first one sits in slot off_o of the first beat and the span is rounded up
// to whole beats; wider ones take ElemBytes/BusBytes beats each (aligned:
// off_o is 0). Combinational.
`include "tsr_assert.svh"

module tsr_dma_beats #(
  parameter int ElemBytes = 4,
  parameter int BusBytes  = tsr_pkg::BUS_BYTES,
  localparam int EPB  = (ElemBytes < BusBytes) ? BusBytes / ElemBytes : 1,  // elements per beat
  localparam int SW   = ($clog2(EPB) > 0) ? $clog2(EPB) : 1                 // slot index width
) (
  input  logic [31:0]   addr_i,       // byte address of the first element
  input  logic [31:0]   count_i,      // elements
  output logic [31:0]   beat_addr_o,  // byte address of the first beat
  output logic [31:0]   beats_o,      // beats covered
  output logic [SW-1:0] off_o         // slot of the first element in its beat
);
  localparam int BBL  = $clog2(BusBytes);
  localparam int EBL  = $clog2(ElemBytes);
  localparam int EPBL = $clog2(EPB);
  localparam int BPEL = (ElemBytes > BusBytes) ? $clog2(ElemBytes / BusBytes) : 0;  // log2(beats per element)

  assign beat_addr_o = {addr_i[31:BBL], {BBL{1'b0}}};

  if (ElemBytes < BusBytes) begin : g_small
    // beats = ceil((offset + count) / EPB), in 64 bits so it cannot wrap
    logic [63:0] span, nbeats;
    assign off_o   = addr_i[EBL +: SW];
    assign span    = {32'd0, count_i} + {{(64 - SW){1'b0}}, off_o} + {32'd0, 32'(EPB - 1)};
    assign nbeats  = span >> EPBL;
    assign beats_o = nbeats[31:0];
    logic unused_beats;
    assign unused_beats = ^{nbeats[63:32], addr_i[BBL-1:0]};
  end else begin : g_large
    assign off_o   = '0;
    assign beats_o = count_i << BPEL;
    logic unused_beats;
    assign unused_beats = ^addr_i[BBL-1:0];
  end

  // Elements and beats are powers of two bytes (the shifts above rely on it).
  `TSR_ASSERT_INIT(chk_pow2, (1 << EBL) == ElemBytes && (1 << BBL) == BusBytes)
endmodule
