// tsr_fetch: reads the instruction stream from DRAM (through an element
// reader of 16-byte instructions) and dispatches each instruction, in
// order, into the command FIFO of the stage that executes it. A full FIFO
// stalls fetch, exactly as the golden model's bounded command queues do.
`include "tsr_assert.svh"

module tsr_fetch #(
  parameter int CmdDepth = tsr_pkg::CMD_QUEUE_DEPTH,
  parameter int BusBytes = tsr_pkg::BUS_BYTES
) (
  input  logic         clk_i,
  input  logic         rst_ni,
  input  logic         start_i,
  input  logic [31:0]  insn_addr_i,
  input  logic [31:0]  insn_count_i,
  // DMA read port
  output logic         rd_req_valid_o,
  input  logic         rd_req_ready_i,
  output logic [31:0]  rd_req_addr_o,
  output logic [31:0]  rd_req_beats_o,
  input  logic         rd_data_valid_i,
  output logic         rd_data_ready_o,
  input  logic [BusBytes*8-1:0] rd_data_i,
  // commands to the stages
  output logic         load_valid_o,
  input  logic         load_ready_i,
  output logic [tsr_pkg::INSN_BITS-1:0] load_cmd_o,
  output logic         compute_valid_o,
  input  logic         compute_ready_i,
  output logic [tsr_pkg::INSN_BITS-1:0] compute_cmd_o,
  output logic         store_valid_o,
  input  logic         store_ready_i,
  output logic [tsr_pkg::INSN_BITS-1:0] store_cmd_o,
  // status
  output logic         busy_o,
  output logic         stall_o,       // an instruction waits for a full command FIFO
  output logic [31:0]  fetched_o,
  output logic         err_o          // malformed opcode / memory type (sticky until start)
);
  localparam int STAGE_LOAD = 0;
  localparam int STAGE_COMPUTE = 1;
  localparam int STAGE_STORE = 2;

  logic        cmd_valid_q, cmd_valid_d, cmd_ready;
  logic [31:0] remaining_q, remaining_d;
  logic [31:0] fetched_q, fetched_d;
  logic        err_q, err_d;
  logic        insn_valid, insn_ready;
  logic [tsr_pkg::INSN_BITS-1:0] insn;
  logic [tsr_pkg::MEM_OPCODE_W-1:0]   opcode;
  logic [tsr_pkg::MEM_MEM_TYPE_W-1:0] mem_type;
  logic [1:0]  stage;
  logic        bad;
  logic [2:0]  fifo_in_ready;
  logic [2:0]  fifo_in_valid;

  tsr_dma_rd_elems #(
    .ElemBytes (tsr_pkg::INSN_BITS / 8),
    .BusBytes  (BusBytes)
  ) u_reader (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .cmd_valid_i     (cmd_valid_q),
    .cmd_ready_o     (cmd_ready),
    .cmd_addr_i      (insn_addr_i),
    .cmd_count_i     (insn_count_i),
    .rd_req_valid_o  (rd_req_valid_o),
    .rd_req_ready_i  (rd_req_ready_i),
    .rd_req_addr_o   (rd_req_addr_o),
    .rd_req_beats_o  (rd_req_beats_o),
    .rd_data_valid_i (rd_data_valid_i),
    .rd_data_ready_o (rd_data_ready_o),
    .rd_data_i       (rd_data_i),
    .elem_valid_o    (insn_valid),
    .elem_ready_i    (insn_ready),
    .elem_o          (insn),
    .busy_o          (),
    .stall_o         ()
  );

  assign opcode   = tsr_pkg::insn_opcode(insn);
  assign mem_type = tsr_pkg::mem_mem_type(insn);

  tsr_insn_route u_route (.opcode_i(opcode), .mem_type_i(mem_type), .stage_o(stage), .bad_o(bad));

  // Dispatch only while the run is error-free; a malformed instruction stops fetch.
  always_comb begin
    fifo_in_valid = '0;
    if (insn_valid && !bad && !err_q) fifo_in_valid[stage] = 1'b1;
    insn_ready = !bad && !err_q && fifo_in_ready[stage];
  end

  always_comb begin
    cmd_valid_d = cmd_valid_q;
    remaining_d = remaining_q;
    fetched_d   = fetched_q;
    err_d       = err_q;
    if (cmd_valid_q && cmd_ready) cmd_valid_d = 1'b0;
    if (insn_valid && insn_ready) begin
      remaining_d = remaining_q - 32'd1;
      fetched_d   = fetched_q + 32'd1;
    end
    if (insn_valid && bad) err_d = 1'b1;
    if (start_i) begin
      cmd_valid_d = (insn_count_i != '0);
      remaining_d = insn_count_i;
      fetched_d   = '0;
      err_d       = 1'b0;
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      cmd_valid_q <= 1'b0;
      remaining_q <= '0;
      fetched_q   <= '0;
      err_q       <= 1'b0;
    end else begin
      cmd_valid_q <= cmd_valid_d;
      remaining_q <= remaining_d;
      fetched_q   <= fetched_d;
      err_q       <= err_d;
    end
  end

  assign busy_o    = (remaining_q != '0);
  assign stall_o   = insn_valid && !bad && !fifo_in_ready[stage];
  assign fetched_o = fetched_q;
  assign err_o     = err_q;

  tsr_fifo #(.Width(tsr_pkg::INSN_BITS), .Depth(CmdDepth)) u_load_q (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (fifo_in_valid[STAGE_LOAD]),
    .in_ready_o  (fifo_in_ready[STAGE_LOAD]),
    .in_data_i   (insn),
    .out_valid_o (load_valid_o),
    .out_ready_i (load_ready_i),
    .out_data_o  (load_cmd_o),
    .count_o     ()
  );

  tsr_fifo #(.Width(tsr_pkg::INSN_BITS), .Depth(CmdDepth)) u_compute_q (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (fifo_in_valid[STAGE_COMPUTE]),
    .in_ready_o  (fifo_in_ready[STAGE_COMPUTE]),
    .in_data_i   (insn),
    .out_valid_o (compute_valid_o),
    .out_ready_i (compute_ready_i),
    .out_data_o  (compute_cmd_o),
    .count_o     ()
  );

  tsr_fifo #(.Width(tsr_pkg::INSN_BITS), .Depth(CmdDepth)) u_store_q (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (fifo_in_valid[STAGE_STORE]),
    .in_ready_o  (fifo_in_ready[STAGE_STORE]),
    .in_data_i   (insn),
    .out_valid_o (store_valid_o),
    .out_ready_i (store_ready_i),
    .out_data_o  (store_cmd_o),
    .count_o     ()
  );

  // Each instruction goes to at most one stage, and a malformed one to none.
  `TSR_ASSERT(chk_one_stage, $onehot0(fifo_in_valid), clk_i, rst_ni)
  `TSR_ASSERT(chk_bad_not_dispatched, !(bad && (fifo_in_valid != '0)), clk_i, rst_ni)
endmodule
