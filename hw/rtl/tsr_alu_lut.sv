// tsr_alu_lut: ALU op lut for one accumulator lane (isa/semantics.md "ALU
// operations", ACT_LUT > 0): res = table[b & (ACT_LUT-1)][a & 255],
// sign-extended from 8 bits to W. The lane keeps its own copy of all
// ACT_LUT tables so that every lane reads one entry in the same cycle and
// the op keeps the ALU's rate (one row per cycle) and latency (the read is
// combinational, beside tsr_alu_lane). A LOAD of lut writes every copy at
// once (broadcast), one DMA bus beat of table bytes per cycle.
//
// Storage: BusBytes byte banks, bank j holding the entries whose flat index
// (table*256 + entry) is j mod BusBytes, so one beat (BusBytes consecutive
// entries, little-endian on the bus) is one write at one address in every
// bank, and a read takes one byte from the bank the entry's low bits name.
// Reads and writes never meet (a LOAD of lut waits until the ALU pipe is
// idle and no ALU instruction starts until it is done, tsr_compute), so one
// address port serves both: each bank is a single-port RAM with an
// asynchronous read, which the FPGA tools map to distributed RAM (Xilinx:
// a 64-entry bit per LUT, RAM64X1S/RAM128X1S/RAM256X1S) instead of flops.
// Area per lane: ACT_LUT*2048 bits of LUT RAM (ACT_LUT*32 LUT6 as RAM64X1S)
// plus the BusBytes-to-1 byte mux; BATCH*BLOCK_OUT lanes.
`include "tsr_assert.svh"

module tsr_alu_lut #(
  parameter int Width    = tsr_pkg::ACC_WIDTH,
  parameter int Tables   = tsr_pkg::ACT_LUT,
  parameter int BusBytes = tsr_pkg::BUS_BYTES,
  localparam int Depth = Tables * 256 / BusBytes,          // beats held
  localparam int DAW   = (Depth > 1) ? $clog2(Depth) : 1,   // beat address bits
  localparam int LB    = $clog2(BusBytes)                   // entry bits naming the bank
) (
  input  logic                  clk_i,
  // table writes (a LOAD of lut): beat waddr_i of the flat table array
  input  logic                  we_i,
  input  logic [DAW-1:0]        waddr_i,
  input  logic [BusBytes*8-1:0] wdata_i,
  // the lane's operands
  input  logic                  re_i,    // a lut op reads this cycle (assertion only)
  input  logic [Width-1:0]      a_i,
  input  logic [Width-1:0]      b_i,
  output logic [Width-1:0]      res_o
);
  logic [DAW-1:0] raddr, addr;
  logic [LB-1:0]  bank_sel;
  logic [BusBytes*8-1:0] rbeat;
  logic [7:0]     entry;
  logic           unused_ab;

  // The entry's beat: {table, entry / BusBytes}; a single table has no
  // table bits (b is then not read).
  if (Tables > 1) begin : g_tables
    localparam int TW = $clog2(Tables);
    assign raddr = DAW'({b_i[TW-1:0], a_i[7:LB]});
    assign unused_ab = ^{a_i[Width-1:8], b_i[Width-1:TW]};
  end else begin : g_one_table
    assign raddr = DAW'(a_i[7:LB]);
    assign unused_ab = ^{a_i[Width-1:8], b_i};
  end
  assign addr = we_i ? waddr_i : raddr;
  assign bank_sel = a_i[LB-1:0];

  for (genvar j = 0; j < BusBytes; j++) begin : g_bank
    logic [7:0] mem [Depth];
    always_ff @(posedge clk_i) begin
      if (we_i) mem[addr] <= wdata_i[j*8 +: 8];
    end
    assign rbeat[j*8 +: 8] = mem[addr];
  end

  assign entry = rbeat[bank_sel*8 +: 8];
  assign res_o = Width'($signed(entry));

  // One address port: a lut op never reads while a LOAD of lut writes.
  `TSR_ASSERT(chk_no_read_during_write, !(we_i && re_i), clk_i, 1'b1)
  // Tables is 1, 2, 4 or 8 (a power of two: b's low bits name the table);
  // a beat divides a table; operands carry at least a byte.
  `TSR_ASSERT_INIT(chk_tables, Tables == 1 || Tables == 2 || Tables == 4 || Tables == 8)
  `TSR_ASSERT_INIT(chk_bus, (BusBytes & (BusBytes - 1)) == 0 && BusBytes >= 2 && BusBytes <= 128)
  `TSR_ASSERT_INIT(chk_width, Width >= 8)
endmodule
