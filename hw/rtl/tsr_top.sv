// tsr_top: the Tessera accelerator, the one top of every flow (Verilator
// model, lint, testbenches, synthesis, the FPGA wrappers). The config picks
// the microarchitecture: SERIAL_CORE = 0 the pipelined tsr_pipe_accel
// (fetch, load, compute and store stages side by side), SERIAL_CORE = 1 the
// serial tsr_serial_accel (one instruction at a time on one datapath, for
// the smallest FPGAs). Both have these ports, the register map of tsr_ctrl
// and the same behaviour at the boundary; only cycles differ.
`include "tsr_assert.svh"
`include "tsr_axi.svh"

module tsr_top (
  input  logic        clk_i,
  input  logic        rst_ni,
  // AXI4-Lite control slave
  `TSR_AXIL_S_PORTS,
  // AXI4 master (DRAM)
  `TSR_AXI_M_PORTS(tsr_pkg::BUS_BYTES),
  // completion flag (= STATUS.DONE: set by FINISH or an error, cleared by a start)
  output logic        done_o,
  // ap_ctrl_hs interrupt (GIE & |(IER & ISR)); Vitis calls this port `interrupt`
  output logic        interrupt_o
);
  if (tsr_pkg::SERIAL_CORE != 0) begin : g_serial
    tsr_serial_accel u_core (
      .clk_i            (clk_i),
      .rst_ni           (rst_ni),
      `TSR_AXIL_S_CONNECT,
      `TSR_AXI_M_CONNECT,
      .done_o           (done_o),
      .interrupt_o      (interrupt_o)
    );
  end else begin : g_pipe
    tsr_pipe_accel u_core (
      .clk_i            (clk_i),
      .rst_ni           (rst_ni),
      `TSR_AXIL_S_CONNECT,
      `TSR_AXI_M_CONNECT,
      .done_o           (done_o),
      .interrupt_o      (interrupt_o)
    );
  end

  // The generated package decides the core; any other value is a config error.
  `TSR_ASSERT_INIT(chk_serial_core, tsr_pkg::SERIAL_CORE == 0 || tsr_pkg::SERIAL_CORE == 1)
endmodule
