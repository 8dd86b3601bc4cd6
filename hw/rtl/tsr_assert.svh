// tsr_assert.svh: the assertion macros of hw/rtl (after lowRISC ibex's
// prim_assert.sv and pulp's common_cells assertions.svh), included by every
// module so that checks read alike and compile away in synthesis.
//
// Why immediate checks in `always` blocks and not `assert property`:
// The three tools (Verilator 5.006, Icarus 11, yosys 0.23) lack concurrent assertions
// (../shared/notes/toolchain.md). Why `if (!(cond)) $error` and not
// `assert (cond)`: Verilator ignores `assert` unless built with --assert,
// and the RTL models are built without it; an `if` is checked by Verilator
// and Icarus alike. yosys defines SYNTHESIS and sees none of it (it rejects
// immediate assertions), so checks cost no area and cannot change a netlist.
//
// Macros (NAME is a unique identifier in the module: it names the check's
// block, so the report reads `<instance path>.NAME`):
//   `TSR_ASSERT(NAME, COND, CLK, RST_N)   COND holds at every rising CLK edge
//                                         while RST_N is high (pass 1'b1
//                                         for a module without reset)
//   `TSR_ASSERT_MSG(NAME, COND, CLK, RST_N, MSG)
//                                         the same with a message: MSG is a
//                                         parenthesised $error argument list,
//                                         e.g. ("row %0d", row_q)
//   `TSR_ASSERT_KNOWN(NAME, SIG, CLK, RST_N)
//                                         SIG has no X or Z bit (Icarus; a
//                                         model from Verilator is two-state)
//   `TSR_ASSERT_INIT(NAME, COND)          COND holds at elaboration: for
//                                         parameter checks, and the one kind
//                                         a combinational module can carry
//                                         without a clock
`ifndef TSR_ASSERT_SVH
`define TSR_ASSERT_SVH

`ifndef SYNTHESIS

`define TSR_ASSERT(NAME, COND, CLK, RST_N) \
  always @(posedge CLK) begin : NAME \
    if ((RST_N) && !(COND)) $error("%m: assertion failed"); \
  end

`define TSR_ASSERT_MSG(NAME, COND, CLK, RST_N, MSG) \
  always @(posedge CLK) begin : NAME \
    if ((RST_N) && !(COND)) $error MSG; \
  end

`define TSR_ASSERT_KNOWN(NAME, SIG, CLK, RST_N) \
  always @(posedge CLK) begin : NAME \
    if ((RST_N) && $isunknown(SIG)) $error("%m: X or Z bits"); \
  end

`define TSR_ASSERT_INIT(NAME, COND) \
  initial begin : NAME \
    if (!(COND)) $error("%m: parameter check failed"); \
  end

`else

`define TSR_ASSERT(NAME, COND, CLK, RST_N)
`define TSR_ASSERT_MSG(NAME, COND, CLK, RST_N, MSG)
`define TSR_ASSERT_KNOWN(NAME, SIG, CLK, RST_N)
`define TSR_ASSERT_INIT(NAME, COND)

`endif
`endif
