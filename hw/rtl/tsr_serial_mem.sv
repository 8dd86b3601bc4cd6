// tsr_serial_mem: the serial core's DRAM port (tsr_serial_core's memory
// side; hw/ARCHITECTURE.md "The serial core"). The core's datapath walks
// DRAM one byte per cycle at a byte address; this port keeps
// - a one-word read buffer: the word of the current address once read;
//   dropped when the address leaves the word, when an instruction starts
//   (DRAM may have changed) and when a write goes out (it may hold old bytes);
// - a one-word write-combining buffer: bytes put at the current address
//   gather in one word (tag and byte strobes) until the core flushes it or
//   puts a byte of another word (a clash, which the core resolves by
//   flushing first);
// and issues one single-beat request at a time to tsr_serial_axi: a read
// that misses the read buffer, or a flush of the write buffer.
// Controller (the core's scheduler, tsr_serial_sched) and this datapath
// meet at rd_need_i / wr_need_i / wput_i and rhit_o / wclash_o / busy_o.
`include "tsr_assert.svh"

module tsr_serial_mem #(
  parameter int BusBytes = tsr_pkg::BUS_BYTES,
  localparam int LB = $clog2(BusBytes)
) (
  input  logic                  clk_i,
  input  logic                  rst_ni,
  input  logic                  start_i,      // a run starts: both buffers empty
  input  logic [32:0]           addr_i,       // the byte the core is at (bit 32: beyond DRAM)
  input  logic [32:LB]          addr_next_i,  // the word of the byte it moves to
  input  logic                  rd_need_i,    // the core needs addr_i's byte (rbyte_o)
  input  logic                  wr_need_i,    // the core needs the write buffer flushed
  input  logic                  rdrop_i,      // an instruction starts: drop the read buffer
  input  logic                  wput_i,       // put wbyte_i at addr_i (only when !wclash_o && !busy_o)
  input  logic [7:0]            wbyte_i,
  output logic                  rhit_o,       // the read buffer holds addr_i's word
  output logic [7:0]            rbyte_o,      // addr_i's byte from it
  output logic                  wclash_o,     // the write buffer holds bytes of another word
  output logic                  wpend_o,      // the write buffer holds bytes
  output logic                  busy_o,       // a request is outstanding
  output logic                  rsp_err_o,    // its response is an error
  // to tsr_serial_axi
  output logic                  mem_req_valid_o,
  input  logic                  mem_req_ready_i,
  output logic                  mem_req_write_o,
  output logic [31:0]           mem_req_addr_o,
  output logic [BusBytes*8-1:0] mem_req_wdata_o,
  output logic [BusBytes-1:0]   mem_req_wstrb_o,
  input  logic                  mem_rsp_valid_i,
  input  logic [BusBytes*8-1:0] mem_rsp_rdata_i,
  input  logic                  mem_rsp_err_i
);
  logic [BusBytes*8-1:0] rbuf_q, rbuf_d;    // last word read
  logic                  rval_q, rval_d;
  logic [BusBytes*8-1:0] wbuf_q, wbuf_d;    // bytes to write
  logic [BusBytes-1:0]   wstrb_q, wstrb_d;
  logic [31-LB:0]        wtag_q, wtag_d;
  logic                  mwait_q, mwait_d;  // a request is outstanding
  logic                  mwr_q, mwr_d;      // ... and it is a write
  logic [LB-1:0]         boff;

  assign boff      = addr_i[LB-1:0];
  assign rhit_o    = rval_q;  // the buffer holds addr_i's word (dropped when addr_i leaves it)
  assign rbyte_o   = rbuf_q[8*boff +: 8];
  assign wclash_o  = (wstrb_q != '0) && (wtag_q != addr_i[31:LB]);
  assign wpend_o   = (wstrb_q != '0);
  assign busy_o    = mwait_q;
  assign rsp_err_o = mwait_q && mem_rsp_valid_i && mem_rsp_err_i;

  assign mem_req_valid_o = !mwait_q && ((rd_need_i && !rval_q) || wr_need_i);
  assign mem_req_write_o = wr_need_i;
  assign mem_req_addr_o  = wr_need_i ? {wtag_q, {LB{1'b0}}} : {addr_i[31:LB], {LB{1'b0}}};
  assign mem_req_wdata_o = wbuf_q;
  assign mem_req_wstrb_o = wstrb_q;

  always_comb begin
    rbuf_d  = rbuf_q;
    rval_d  = rval_q;
    wbuf_d  = wbuf_q;
    wstrb_d = wstrb_q;
    wtag_d  = wtag_q;
    mwait_d = mwait_q;
    mwr_d   = mwr_q;
    // A response: a read fills the word buffer, a write empties the
    // write-combining buffer.
    if (mwait_q && mem_rsp_valid_i) begin
      mwait_d = 1'b0;
      if (mwr_q) begin
        wstrb_d = '0;
      end else begin
        rbuf_d = mem_rsp_rdata_i;
        rval_d = 1'b1;
      end
    end
    if (rdrop_i) rval_d = 1'b0;  // DRAM may have changed since the last instruction
    // the read buffer holds addr_i's word only
    if (addr_next_i != addr_i[32:LB]) rval_d = 1'b0;
    if (mem_req_valid_o && mem_req_ready_i) begin
      mwait_d = 1'b1;
      mwr_d   = wr_need_i;
      if (wr_need_i) rval_d = 1'b0;  // the read buffer may hold the old bytes
    end
    if (wput_i) wtag_d = addr_i[31:LB];
    // per-byte updates with one enable each (a dynamic part select would build a shifter)
    for (int k = 0; k < BusBytes; k++) begin
      if (wput_i && boff == LB'(k)) begin
        wbuf_d[8*k +: 8] = wbyte_i;
        wstrb_d[k]       = 1'b1;
      end
    end
    if (start_i) begin
      rval_d  = 1'b0;
      wstrb_d = '0;
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      rval_q  <= 1'b0;
      mwait_q <= 1'b0;
      mwr_q   <= 1'b0;
    end else begin
      rval_q  <= rval_d;
      mwait_q <= mwait_d;
      mwr_q   <= mwr_d;
    end
  end

  // Datapath registers: no reset. The write buffer keeps its bytes through
  // a soft reset: the AXI master may still be sending them
  // (tsr_serial_axi); a start empties it.
  always_ff @(posedge clk_i) begin
    rbuf_q  <= rbuf_d;
    wbuf_q  <= wbuf_d;
    wstrb_q <= wstrb_d;
    wtag_q  <= wtag_d;
  end

  // One request at a time, and bytes are put only into a free, matching buffer.
  `TSR_ASSERT(chk_one_request, !(mwait_q && mem_req_valid_o), clk_i, rst_ni)
  `TSR_ASSERT(chk_put_no_clash, !(wput_i && (wclash_o || mwait_q)), clk_i, rst_ni)
endmodule
