// tsr_insn_route: the stage that executes an instruction, and whether its
// opcode or memory type is malformed (isa/semantics.md "Dependency flags and
// stages"; the C side is tsr_insn_stage). The rule both cores' fetch
// dispatches by, kept in one place. Combinational.
`include "tsr_assert.svh"

module tsr_insn_route (
  input  logic [tsr_pkg::MEM_OPCODE_W-1:0]   opcode_i,
  input  logic [tsr_pkg::MEM_MEM_TYPE_W-1:0] mem_type_i,  // read for LOAD and STORE only
  output logic [1:0]                         stage_o,     // 0 load, 1 compute, 2 store
  output logic                               bad_o        // opcode beyond ALU, or LOAD/STORE memory type beyond the last
);
  localparam int OPW = tsr_pkg::MEM_OPCODE_W;
  localparam int MTW = tsr_pkg::MEM_MEM_TYPE_W;
  // The last memory type this config has: lut with activation tables
  // (ACT_LUT > 0, a LOAD of it runs in the compute stage; a STORE of it
  // reaches the store stage, which flags every type but out), else acc8.
  localparam int LAST_MEM = (tsr_pkg::ACT_LUT != 0) ? tsr_pkg::MEM_LUT : tsr_pkg::MEM_ACC8;

  always_comb begin
    stage_o = 2'd1;
    if (opcode_i == OPW'(tsr_pkg::OP_STORE)) begin
      stage_o = 2'd2;
    end else if (opcode_i == OPW'(tsr_pkg::OP_LOAD) &&
                 (mem_type_i == MTW'(tsr_pkg::MEM_INP) || mem_type_i == MTW'(tsr_pkg::MEM_WGT))) begin
      stage_o = 2'd0;
    end
    bad_o = (opcode_i > OPW'(tsr_pkg::OP_ALU)) ||
            ((opcode_i == OPW'(tsr_pkg::OP_LOAD) || opcode_i == OPW'(tsr_pkg::OP_STORE)) &&
             mem_type_i > MTW'(LAST_MEM));
  end

  // bad_o relies on ALU being the last opcode, acc8 the last memory type
  // before lut and lut the last of all.
  `TSR_ASSERT_INIT(chk_last_opcode, tsr_pkg::OP_ALU >= tsr_pkg::OP_LOAD && tsr_pkg::OP_ALU >= tsr_pkg::OP_STORE &&
                   tsr_pkg::OP_ALU >= tsr_pkg::OP_GEMM && tsr_pkg::OP_ALU >= tsr_pkg::OP_FINISH)
  `TSR_ASSERT_INIT(chk_last_mem_type, tsr_pkg::MEM_ACC8 >= tsr_pkg::MEM_UOP && tsr_pkg::MEM_ACC8 >= tsr_pkg::MEM_WGT &&
                   tsr_pkg::MEM_ACC8 >= tsr_pkg::MEM_INP && tsr_pkg::MEM_ACC8 >= tsr_pkg::MEM_ACC &&
                   tsr_pkg::MEM_ACC8 >= tsr_pkg::MEM_OUT)
  `TSR_ASSERT_INIT(chk_lut_after_acc8, tsr_pkg::MEM_LUT == tsr_pkg::MEM_ACC8 + 1)
endmodule
