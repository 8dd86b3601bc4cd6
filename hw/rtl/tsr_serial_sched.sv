// tsr_serial_sched: the serial core's scheduler (tsr_serial_core; hw/ARCHITECTURE.md
// "The serial core"), the controller apart from its two datapaths, the DRAM
// port tsr_serial_mem and the execute datapath tsr_serial_exec:
// - fetch: reads the first two bytes of each instruction (opcode, memory
//   type, flags) and dispatches its index and flags into the command queue
//   of its stage (three queues of CMD_QUEUE_DEPTH entries in one block RAM,
//   u_cmdq here);
// - the dependency tokens (four counters of DEP_QUEUE_DEPTH) and the
//   pushes an instruction leaves pending while its token queue is full;
// - the state machine that picks, in turn, a stage whose head instruction
//   has its pop tokens, reads the whole instruction through the DRAM port
//   and runs it to completion: the walks of LOAD and STORE (a byte a cycle,
//   the on-chip and DRAM spans checked row by row as the walk reaches
//   them), the micro-op loop of GEMM and ALU (tsr_compute_loop) and the
//   writes of their results into the on-chip buffers, whose ports it drives
//   (the buffers themselves are tsr_serial_core's).
// The registers the steps move (the instruction, the element row, the byte
// and lane counter, the DRAM address) are here, with the state that gives
// them meaning; the DRAM port holds the word buffers, the execute datapath
// the arithmetic.

`include "tsr_assert.svh"

module tsr_serial_sched #(
  // bits of an ALU lane index (tsr_serial_exec's LaneW)
  parameter int LaneW = (tsr_pkg::BATCH * tsr_pkg::BLOCK_OUT > 1) ? $clog2(tsr_pkg::BATCH * tsr_pkg::BLOCK_OUT) : 1,
  localparam int BusLog = $clog2(tsr_pkg::BUS_BYTES)
) (
  input  logic         clk_i,
  input  logic         rst_ni,
  input  logic         start_i,
  input  logic [31:0]  insn_addr_i,
  input  logic [31:0]  insn_count_i,
  // DRAM port (tsr_serial_mem)
  output logic [32:0]  dram_addr_o,       // the byte the walk is at (bit 32: beyond DRAM)
  output logic [32:BusLog] dram_addr_next_o, // the word of the byte it moves to
  output logic         dram_rd_need_o,    // this state needs dram_addr_o's byte
  output logic         dram_wr_need_o,    // this state needs the write buffer flushed
  output logic         dram_rdrop_o,      // an instruction starts: DRAM may have changed
  output logic         dram_wput_o,       // put dram_wbyte_o at dram_addr_o
  output logic [7:0]   dram_wbyte_o,
  input  logic         dram_rhit_i,
  input  logic [7:0]   dram_rbyte_i,
  input  logic         dram_wclash_i,
  input  logic         dram_wpend_i,
  input  logic         dram_busy_i,
  input  logic         dram_err_i,
  // on-chip buffers (tsr_sram, one read and one write port each)
  output logic                                uop_we_o, uop_re_o,
  output logic [tsr_pkg::UOP_IDX_BITS-1:0]    uop_waddr_o, uop_raddr_o,
  output logic [tsr_pkg::UOP_BYTES*8-1:0]     uop_wdata_o,
  input  logic [tsr_pkg::UOP_BYTES*8-1:0]     uop_rdata_i,
  output logic                                inp_we_o, inp_re_o,
  output logic [tsr_pkg::INP_IDX_BITS-1:0]    inp_waddr_o, inp_raddr_o,
  output logic [tsr_pkg::INP_BYTES*8-1:0]     inp_wdata_o,
  output logic                                wgt_we_o, wgt_re_o,
  output logic [tsr_pkg::WGT_IDX_BITS-1:0]    wgt_waddr_o, wgt_raddr_o,
  output logic [tsr_pkg::WGT_BYTES*8-1:0]     wgt_wdata_o,
  output logic                                acc_we_o, acc_re_o,
  output logic [tsr_pkg::ACC_IDX_BITS-1:0]    acc_waddr_o, acc_raddr_o,
  output logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::ACC_WIDTH-1:0] acc_wdata_o,
  input  logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::ACC_WIDTH-1:0] acc_rdata_i,
  output logic                                out_we_o, out_re_o,
  output logic [tsr_pkg::ACC_IDX_BITS-1:0]    out_waddr_o, out_raddr_o,
  output logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::OUT_WIDTH-1:0] out_wdata_o,
  input  logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::OUT_WIDTH-1:0] out_rdata_i,
  // execute datapath (tsr_serial_exec; its GEMM operands are the buffers' read data)
  output logic [LaneW-1:0]                      exec_lane_o,    // ALU: the dst lane
  output logic [tsr_pkg::ALU_ALU_OPCODE_W-1:0]  exec_alu_op_o,
  output logic                                  exec_use_imm_o,
  output logic [tsr_pkg::ALU_IMM_W-1:0]         exec_imm_o,
  output logic [tsr_pkg::ACC_WIDTH-1:0]         exec_src_o,     // ALU: the src lane
  output logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::ACC_WIDTH-1:0] exec_alu_row_o,  // ALU: the result row
  input  logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::ACC_WIDTH-1:0] exec_acc_row_i,  // GEMM: the accumulated row
  input  logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::OUT_WIDTH-1:0] exec_out_row_i,  // ... its out row
  input  logic [tsr_pkg::ACC_WIDTH-1:0]         exec_alu_res_i, // ALU: the lane's result
  input  logic [tsr_pkg::BATCH*tsr_pkg::BLOCK_OUT*tsr_pkg::OUT_WIDTH-1:0] exec_alu_out_i,  // out row of exec_alu_row_o
  // status
  output logic         finish_o,      // FINISH executed (one cycle)
  output logic [3:0]   busy_o,        // {store, compute, load, fetch}
  output logic [3:0]   err_o,         // {store, compute, load, fetch}, sticky
  output logic         compute_exec_o, // the compute stage executes an instruction
  output logic         gemm_op_o,     // a non-reset GEMM tensor op completed
  output logic         alu_op_o,      // an ALU tensor op completed
  output logic [31:0]  fetched_o,     // instructions dispatched this run
  output logic [29:0]  stage_insns_o, // {store, compute, load} completed, 10 bits each
  output logic [31:0]  tokens_o       // REG_TOKENS: {s2c, c2s, c2l, l2c}
);
  // Instruction field widths (the ISA field table, through tsr_pkg)
  localparam int OPW = tsr_pkg::MEM_OPCODE_W;      // opcode
  localparam int MTW = tsr_pkg::MEM_MEM_TYPE_W;    // memory type
  // ------------------------------------------------------------ parameters
  localparam int ILB  = $clog2(tsr_pkg::INSN_BITS / 8);  // log2(instruction bytes)
  localparam int IXW  = 32 - ILB;                    // instruction index (32-bit addresses)
  localparam int D    = tsr_pkg::CMD_QUEUE_DEPTH;
  localparam int QPW  = $clog2(D);
  localparam int QCW  = $clog2(D + 1);
  localparam int QAW  = $clog2(3 * D);
  localparam int TCW  = $clog2(tsr_pkg::DEP_QUEUE_DEPTH + 1);
  localparam int NL   = tsr_pkg::BATCH * tsr_pkg::BLOCK_OUT;           // accumulator lanes per row
  localparam int W    = tsr_pkg::ACC_WIDTH;
  localparam int AROW = NL * W;
  localparam int RB0  = (tsr_pkg::INP_BYTES > tsr_pkg::WGT_BYTES) ? tsr_pkg::INP_BYTES : tsr_pkg::WGT_BYTES;
  localparam int RB1  = (RB0 > tsr_pkg::UOP_BYTES) ? RB0 : tsr_pkg::UOP_BYTES;
  localparam int RB2  = (RB1 > tsr_pkg::ACC_BYTES) ? RB1 : tsr_pkg::ACC_BYTES;
  localparam int RB   = (RB2 > tsr_pkg::OUT_BYTES) ? RB2 : tsr_pkg::OUT_BYTES;   // widest element (bytes)
  localparam int RW   = RB * 8;
  localparam int IW0  = (tsr_pkg::UOP_IDX_BITS > tsr_pkg::INP_IDX_BITS) ? tsr_pkg::UOP_IDX_BITS : tsr_pkg::INP_IDX_BITS;
  localparam int IW1  = (IW0 > tsr_pkg::WGT_IDX_BITS) ? IW0 : tsr_pkg::WGT_IDX_BITS;
  localparam int IW2  = (IW1 > tsr_pkg::ACC_IDX_BITS) ? IW1 : tsr_pkg::ACC_IDX_BITS;
  localparam int RIW  = ((IW2 > tsr_pkg::SRAM_BASE_BITS) ? IW2 : tsr_pkg::SRAM_BASE_BITS) + 1;  // on-chip row counter
  // The micro-op loops are tsr_compute_loop's, sized as the compute pipe
  // sizes them: offsets in OFFW bits (the largest inp/wgt/acc index + 1).
  localparam int MAXIB0 = (tsr_pkg::ACC_IDX_BITS > tsr_pkg::INP_IDX_BITS) ? tsr_pkg::ACC_IDX_BITS : tsr_pkg::INP_IDX_BITS;
  localparam int MAXIB  = (MAXIB0 > tsr_pkg::WGT_IDX_BITS) ? MAXIB0 : tsr_pkg::WGT_IDX_BITS;
  localparam int OFFW = MAXIB + 1;
  localparam int UIB  = tsr_pkg::UOP_IDX_BITS;
  localparam int ITW  = tsr_pkg::GEMM_ITER_OUT_W;
  localparam int BC0  = (RB > NL) ? RB : NL;
  localparam int BCW  = $clog2(((BC0 > 16) ? BC0 : 16) + 1);  // bytes of an element, lanes, 16
  localparam int BXW  = tsr_pkg::MEM_X_SIZE_W + 1;  // a column or row of the padded box (tsr_pad_box's RowW)

  localparam int ST_LOAD = 0, ST_COMPUTE = 1, ST_STORE = 2;

  typedef enum logic [4:0] {
    S_IDLE, S_SCHED, S_FHDR, S_HDR, S_QHEAD, S_IREAD, S_DECODE,
    S_LD_ELEM, S_LD_BYTE, S_LD_WR,
    S_ST_RD, S_ST_LATCH, S_ST_BYTE, S_FLUSH,
    S_UOP_RD, S_UOP, S_GEMM_W1, S_GEMM_W2, S_GEMM_WR,
    S_ALU_SRC, S_ALU_LANE, S_ALU_WR,
    S_DONE_EXEC, S_ERR, S_FINISHED
  } state_e;

  // ------------------------------------------------------------ decode helpers
  // {push_next, push_prev, pop_next, pop_prev} of an instruction, by format
  function automatic logic [3:0] insn_flags(input logic [tsr_pkg::INSN_BITS-1:0] in);
    case (tsr_pkg::insn_opcode(in))
      OPW'(tsr_pkg::OP_GEMM):   insn_flags = {tsr_pkg::gemm_push_next(in), tsr_pkg::gemm_push_prev(in), tsr_pkg::gemm_pop_next(in), tsr_pkg::gemm_pop_prev(in)};
      OPW'(tsr_pkg::OP_ALU):    insn_flags = {tsr_pkg::alu_push_next(in), tsr_pkg::alu_push_prev(in), tsr_pkg::alu_pop_next(in), tsr_pkg::alu_pop_prev(in)};
      OPW'(tsr_pkg::OP_FINISH): insn_flags = {tsr_pkg::finish_push_next(in), tsr_pkg::finish_push_prev(in), tsr_pkg::finish_pop_next(in),
                                   tsr_pkg::finish_pop_prev(in)};
      default:       insn_flags = {tsr_pkg::mem_push_next(in), tsr_pkg::mem_push_prev(in), tsr_pkg::mem_pop_next(in), tsr_pkg::mem_pop_prev(in)};
    endcase
  endfunction

  // log2 of the DRAM element bytes of a memory type (element sizes are powers of two)
  function automatic logic [3:0] elem_log(input logic [MTW-1:0] mt);
    case (mt)
      MTW'(tsr_pkg::MEM_UOP):  elem_log = 4'($clog2(tsr_pkg::UOP_BYTES));
      MTW'(tsr_pkg::MEM_WGT):  elem_log = 4'($clog2(tsr_pkg::WGT_BYTES));
      MTW'(tsr_pkg::MEM_INP):  elem_log = 4'($clog2(tsr_pkg::INP_BYTES));
      MTW'(tsr_pkg::MEM_ACC):  elem_log = 4'($clog2(tsr_pkg::ACC_BYTES));
      MTW'(tsr_pkg::MEM_ACC8): elem_log = 4'($clog2(tsr_pkg::ACC8_BYTES));
      default:      elem_log = 4'($clog2(tsr_pkg::OUT_BYTES));
    endcase
  endfunction

  function automatic logic [16:0] sram_depth(input logic [MTW-1:0] mt);
    case (mt)
      MTW'(tsr_pkg::MEM_UOP):  sram_depth = 17'(tsr_pkg::UOP_DEPTH);
      MTW'(tsr_pkg::MEM_WGT):  sram_depth = 17'(tsr_pkg::WGT_DEPTH);
      MTW'(tsr_pkg::MEM_INP):  sram_depth = 17'(tsr_pkg::INP_DEPTH);
      MTW'(tsr_pkg::MEM_OUT):  sram_depth = 17'(tsr_pkg::OUT_DEPTH);
      default:      sram_depth = 17'(tsr_pkg::ACC_DEPTH);
    endcase
  endfunction

  // ------------------------------------------------------------ state
  state_e state_q, state_d;
  // run
  logic [IXW-1:0] next_q, next_d;           // next instruction to fetch
  logic           fhdr_q, fhdr_d;           // a fetched header waits for its queue
  logic [1:0]     fstage_q, fstage_d;
  logic [3:0]     fflags_q, fflags_d;
  // command queues: pointers and counts per stage
  logic [3*QPW-1:0] qrd_q, qrd_d, qwr_q, qwr_d;
  logic [3*QCW-1:0] qcnt_q, qcnt_d;
  // tokens
  logic [TCW-1:0] l2c_q, l2c_d, c2l_q, c2l_d, c2s_q, c2s_d, s2c_q, s2c_d;
  logic [5:0]     pend_q, pend_d;           // pending {push_next, push_prev} per stage
  logic [29:0]    done_q, done_d;           // completed instructions per stage (10 bits each)
  logic [1:0]     cand_q, cand_d;           // stage the scheduler looks at
  logic [1:0]     cur_q, cur_d;             // stage of the executing instruction
  logic [3:0]     cflags_q, cflags_d;
  logic [3:0]     err_q, err_d;
  // instruction and datapath
  logic [tsr_pkg::INSN_BITS-1:0] insn_q, insn_d;
  logic [RW-1:0]  row_q, row_d;             // element being moved; ALU: the dst row
  logic [BCW-1:0] bcnt_q, bcnt_d;           // bytes moved of the current element / instruction
  logic [32:0]    baddr_q, baddr_d;         // DRAM byte address (bit 32: beyond 32-bit DRAM)
  logic [32:0]    rbase_q, rbase_d;         // byte address of the current DRAM row (bit 32 sticky)
  // The walk over a LOAD's padded box (tsr_pad_box; a STORE's is all
  // data): the column and row of the current element in it, and whether
  // each is a data column / row. The flags change where the walk meets a
  // bound (equality compares: the iCE40 has no room for magnitude ones).
  logic [BXW-1:0] bx_q, bx_d, by_q, by_d;
  logic           xin_q, xin_d, yin_q, yin_d;
  logic [RIW-1:0] r_q, r_d;                 // on-chip row
  // micro-op loops
  logic [OFFW-1:0] dst_q, dst_d;

  // ------------------------------------------------------------ command queues
  // An entry: an instruction's index and its flags (insn_flags).
  typedef struct packed {
    logic [3:0]     flags;
    logic [IXW-1:0] idx;
  } qent_t;  // 4 + IXW bits (the queue RAM's width)
  logic            q_we, q_re;
  logic [QAW-1:0]  q_waddr, q_raddr;
  qent_t           q_wdata, q_rdata;

  tsr_sram #(.Width(4 + IXW), .Depth(3 * D), .NoRdw(1)) u_cmdq (
    .clk_i, .we_i(q_we), .waddr_i(q_waddr), .wdata_i(q_wdata), .re_i(q_re), .raddr_i(q_raddr), .rdata_o(q_rdata));


  // fields of the executing instruction, through the generated decoders
  logic [tsr_pkg::ALU_DST_FACTOR_IN_W-1:0] d_alu_dst_factor_in;
  assign d_alu_dst_factor_in = tsr_pkg::alu_dst_factor_in(insn_q);
  logic [tsr_pkg::ALU_DST_FACTOR_OUT_W-1:0] d_alu_dst_factor_out;
  assign d_alu_dst_factor_out = tsr_pkg::alu_dst_factor_out(insn_q);
  logic [tsr_pkg::ALU_IMM_W-1:0] d_alu_imm;
  assign d_alu_imm = tsr_pkg::alu_imm(insn_q);
  logic [tsr_pkg::ALU_ITER_IN_W-1:0] d_alu_iter_in;
  assign d_alu_iter_in = tsr_pkg::alu_iter_in(insn_q);
  logic [tsr_pkg::ALU_ITER_OUT_W-1:0] d_alu_iter_out;
  assign d_alu_iter_out = tsr_pkg::alu_iter_out(insn_q);
  logic [tsr_pkg::ALU_SRC_FACTOR_IN_W-1:0] d_alu_src_factor_in;
  assign d_alu_src_factor_in = tsr_pkg::alu_src_factor_in(insn_q);
  logic [tsr_pkg::ALU_SRC_FACTOR_OUT_W-1:0] d_alu_src_factor_out;
  assign d_alu_src_factor_out = tsr_pkg::alu_src_factor_out(insn_q);
  logic [tsr_pkg::ALU_UOP_BGN_W-1:0] d_alu_uop_bgn;
  assign d_alu_uop_bgn = tsr_pkg::alu_uop_bgn(insn_q);
  logic [tsr_pkg::ALU_UOP_END_W-1:0] d_alu_uop_end;
  assign d_alu_uop_end = tsr_pkg::alu_uop_end(insn_q);
  logic [tsr_pkg::GEMM_DST_FACTOR_IN_W-1:0] d_gemm_dst_factor_in;
  assign d_gemm_dst_factor_in = tsr_pkg::gemm_dst_factor_in(insn_q);
  logic [tsr_pkg::GEMM_DST_FACTOR_OUT_W-1:0] d_gemm_dst_factor_out;
  assign d_gemm_dst_factor_out = tsr_pkg::gemm_dst_factor_out(insn_q);
  logic [tsr_pkg::GEMM_ITER_IN_W-1:0] d_gemm_iter_in;
  assign d_gemm_iter_in = tsr_pkg::gemm_iter_in(insn_q);
  logic [tsr_pkg::GEMM_ITER_OUT_W-1:0] d_gemm_iter_out;
  assign d_gemm_iter_out = tsr_pkg::gemm_iter_out(insn_q);
  logic [tsr_pkg::GEMM_SRC_FACTOR_IN_W-1:0] d_gemm_src_factor_in;
  assign d_gemm_src_factor_in = tsr_pkg::gemm_src_factor_in(insn_q);
  logic [tsr_pkg::GEMM_SRC_FACTOR_OUT_W-1:0] d_gemm_src_factor_out;
  assign d_gemm_src_factor_out = tsr_pkg::gemm_src_factor_out(insn_q);
  logic [tsr_pkg::GEMM_UOP_BGN_W-1:0] d_gemm_uop_bgn;
  assign d_gemm_uop_bgn = tsr_pkg::gemm_uop_bgn(insn_q);
  logic [tsr_pkg::GEMM_UOP_END_W-1:0] d_gemm_uop_end;
  assign d_gemm_uop_end = tsr_pkg::gemm_uop_end(insn_q);
  logic [tsr_pkg::GEMM_WGT_FACTOR_IN_W-1:0] d_gemm_wgt_factor_in;
  assign d_gemm_wgt_factor_in = tsr_pkg::gemm_wgt_factor_in(insn_q);
  logic [tsr_pkg::GEMM_WGT_FACTOR_OUT_W-1:0] d_gemm_wgt_factor_out;
  assign d_gemm_wgt_factor_out = tsr_pkg::gemm_wgt_factor_out(insn_q);
  logic [tsr_pkg::MEM_DRAM_BASE_W-1:0] d_mem_dram_base;
  assign d_mem_dram_base = tsr_pkg::mem_dram_base(insn_q);
  logic [tsr_pkg::MEM_PAD_VALUE_W-1:0] d_mem_pad_value;
  assign d_mem_pad_value = tsr_pkg::mem_pad_value(insn_q);
  logic [tsr_pkg::MEM_SRAM_BASE_W-1:0] d_mem_sram_base;
  assign d_mem_sram_base = tsr_pkg::mem_sram_base(insn_q);

  // ------------------------------------------------------------ execute datapath
  // tsr_serial_exec (in tsr_serial_core): the GEMM array and accumulate
  // (exec_acc_row_i), the ALU lane and the out-row views. ALU: lane bcnt of
  // the dst row (held at the accumulator's read port) with the src lane at
  // the bottom of row_q, whose results rotate in; a lane takes two cycles
  // (aph_q), a, b and the op holding still for both.
  logic            aph_q, aph_d;  // second cycle of a lane
  assign exec_lane_o    = LaneW'(bcnt_q);
  assign exec_alu_op_o  = tsr_pkg::alu_alu_opcode(insn_q);
  assign exec_use_imm_o = tsr_pkg::alu_use_imm(insn_q);
  assign exec_imm_o     = d_alu_imm;
  assign exec_src_o     = row_q[W-1:0];
  assign exec_alu_row_o = row_q[AROW-1:0];

  // ------------------------------------------------------------ instruction fields
  logic [OPW-1:0] opcode;
  logic [MTW-1:0] mtype;
  logic [3:0]  elog;
  logic [tsr_pkg::MEM_Y_SIZE_W-1:0]   ys;
  logic [tsr_pkg::MEM_X_SIZE_W-1:0]   xs;
  logic [tsr_pkg::MEM_X_STRIDE_W-1:0] xstride;
  logic [tsr_pkg::MEM_Y_PAD0_W-1:0] yp0, yp1, xp0, xp1;  // the four pad fields share a width
  logic        is_gemm, uop_bad, alu_bad;
  assign opcode  = tsr_pkg::insn_opcode(insn_q);
  assign mtype   = tsr_pkg::mem_mem_type(insn_q);
  assign elog    = elem_log(mtype);
  assign ys      = tsr_pkg::mem_y_size(insn_q);
  assign xs      = tsr_pkg::mem_x_size(insn_q);
  assign xstride = tsr_pkg::mem_x_stride(insn_q);
  assign yp0     = tsr_pkg::mem_y_pad0(insn_q);
  assign yp1     = tsr_pkg::mem_y_pad1(insn_q);
  assign xp0     = tsr_pkg::mem_x_pad0(insn_q);
  assign xp1     = tsr_pkg::mem_x_pad1(insn_q);
  // The padded box (tsr_pad_box: the one place its geometry is computed).
  logic [BXW-1:0] bx_row, bx_rows, bx_x_lo, bx_x_hi, bx_y_lo, bx_y_hi;
  tsr_pad_box u_box (
    .y_size_i (ys),
    .x_size_i (xs),
    .y_pad0_i (yp0),
    .y_pad1_i (yp1),
    .x_pad0_i (xp0),
    .x_pad1_i (xp1),
    .row_o    (bx_row),
    .rows_o   (bx_rows),
    .x_lo_o   (bx_x_lo),
    .x_hi_o   (bx_x_hi),
    .y_lo_o   (bx_y_lo),
    .y_hi_o   (bx_y_hi)
  );
  assign is_gemm = (opcode == OPW'(tsr_pkg::OP_GEMM));

  // GEMM and ALU share the loop fields' positions only by accident of the
  // table: read each through its own format's decoder.
  logic [UIB-1:0]  f_bgn;
  logic [UIB:0]    f_end;
  logic [ITW-1:0]  f_iout, f_iin;
  logic [OFFW-2:0] f_dfo, f_dfi, f_sfo, f_sfi, f_wfo, f_wfi;
  logic           f_reset;
  always_comb begin
    if (is_gemm) begin
      f_bgn = UIB'(d_gemm_uop_bgn);      f_end = (UIB + 1)'(d_gemm_uop_end);
      f_iout = ITW'(d_gemm_iter_out);   f_iin = ITW'(d_gemm_iter_in);
      f_dfo = (OFFW - 1)'(d_gemm_dst_factor_out); f_dfi = (OFFW - 1)'(d_gemm_dst_factor_in);
      f_sfo = (OFFW - 1)'(d_gemm_src_factor_out); f_sfi = (OFFW - 1)'(d_gemm_src_factor_in);
      f_wfo = (OFFW - 1)'(d_gemm_wgt_factor_out); f_wfi = (OFFW - 1)'(d_gemm_wgt_factor_in);
      f_reset = tsr_pkg::gemm_reset(insn_q);
    end else begin
      f_bgn = UIB'(d_alu_uop_bgn);       f_end = (UIB + 1)'(d_alu_uop_end);
      f_iout = ITW'(d_alu_iter_out);    f_iin = ITW'(d_alu_iter_in);
      f_dfo = (OFFW - 1)'(d_alu_dst_factor_out); f_dfi = (OFFW - 1)'(d_alu_dst_factor_in);
      f_sfo = (OFFW - 1)'(d_alu_src_factor_out); f_sfi = (OFFW - 1)'(d_alu_src_factor_in);
      f_wfo = '0;                             f_wfi = '0;
      f_reset = tsr_pkg::alu_reset(insn_q);
    end
  end
  assign uop_bad = ({1'b0, f_bgn} > f_end) || (32'(f_end) > 32'(tsr_pkg::UOP_DEPTH));
  assign alu_bad = !is_gemm && !tsr_pkg::ALU_OPS_MASK[tsr_pkg::alu_alu_opcode(insn_q)];

  // header of a fetched instruction: its first two bytes, at the top of insn_q
  logic [tsr_pkg::INSN_BITS-1:0] hdr;
  logic [OPW-1:0] h_op;
  logic [MTW-1:0] h_mt;
  logic [1:0]  h_stage;
  logic        h_bad;
  assign hdr  = {{(tsr_pkg::INSN_BITS - 16){1'b0}}, insn_q[tsr_pkg::INSN_BITS-1 -: 16]};
  assign h_op = tsr_pkg::insn_opcode(hdr);
  assign h_mt = tsr_pkg::mem_mem_type(hdr);
  tsr_insn_route u_route (.opcode_i(h_op), .mem_type_i(h_mt), .stage_o(h_stage), .bad_o(h_bad));

  // The loop nest: one (uop, offsets) at a time, held (stall) until the op
  // is done and advanced in S_GEMM_WR; an error aborts it.
  logic            loop_start, loop_stall, loop_abort, loop_valid;
  logic [UIB-1:0]  loop_uop;
  logic [OFFW-1:0] loop_doff, loop_soff, loop_woff;
  tsr_compute_loop #(.UopBits(UIB), .IterW(ITW), .OffW(OFFW)) u_loop (
    .clk_i,
    .rst_ni,
    .start_i    (loop_start),
    .stall_i    (loop_stall),
    .abort_i    (loop_abort),
    .uop_bgn_i  (f_bgn),
    .uop_end_i  (f_end),
    .iter_out_i (f_iout),
    .iter_in_i  (f_iin),
    .dst_fo_i   (f_dfo),
    .dst_fi_i   (f_dfi),
    .src_fo_i   (f_sfo),
    .src_fi_i   (f_sfi),
    .wgt_fo_i   (f_wfo),
    .wgt_fi_i   (f_wfi),
    .valid_o    (loop_valid),
    .uop_o      (loop_uop),
    .dst_off_o  (loop_doff),
    .src_off_o  (loop_soff),
    .wgt_off_o  (loop_woff)
  );

  // ------------------------------------------------------------ queues and tokens
  logic [QCW-1:0] qcnt [3];
  logic [QPW-1:0] qrd [3], qwr [3];
  for (genvar s = 0; s < 3; s++) begin : g_q
    assign qcnt[s] = qcnt_q[s*QCW +: QCW];
    assign qrd[s]  = qrd_q[s*QPW +: QPW];
    assign qwr[s]  = qwr_q[s*QPW +: QPW];
  end

  function automatic logic [QPW-1:0] qnext(input logic [QPW-1:0] p);
    qnext = (32'(p) == D - 1) ? '0 : p + QPW'(1);
  endfunction
  function automatic logic [QAW-1:0] qaddr(input logic [1:0] s, input logic [QPW-1:0] p);
    qaddr = QAW'(32'(s) * D + 32'(p));
  endfunction

  // pops available / pushes possible for stage s with flags f
  function automatic logic pop_ok(input logic [1:0] s, input logic [1:0] f, input logic [TCW-1:0] l2c,
                                  input logic [TCW-1:0] c2l, input logic [TCW-1:0] c2s,
                                  input logic [TCW-1:0] s2c);
    case (s)
      2'(ST_LOAD):    pop_ok = !f[1] || (c2l != '0);
      2'(ST_COMPUTE): pop_ok = (!f[0] || (l2c != '0)) && (!f[1] || (s2c != '0));
      default:        pop_ok = !f[0] || (c2s != '0);
    endcase
  endfunction
  localparam logic [TCW-1:0] TFULL = TCW'(tsr_pkg::DEP_QUEUE_DEPTH);
  function automatic logic push_ok(input logic [1:0] s, input logic [1:0] p, input logic [TCW-1:0] l2c,
                                   input logic [TCW-1:0] c2l, input logic [TCW-1:0] c2s,
                                   input logic [TCW-1:0] s2c);
    case (s)
      2'(ST_LOAD):    push_ok = !p[1] || (l2c != TFULL);
      2'(ST_COMPUTE): push_ok = (!p[0] || (c2l != TFULL)) && (!p[1] || (c2s != TFULL));
      default:        push_ok = !p[0] || (s2c != TFULL);
    endcase
  endfunction

  // ------------------------------------------------------------ the state machine
  logic [3:0]  hflags;
  logic [1:0]  pend_s;
  logic        in_row, row_end, walk_end;
  logic [BXW-1:0] bx_inc, by_inc;
  logic [OFFW-1:0] ix_dst, ix_src, ix_wgt;  // uop field + loop offset (< 2^OFFW)
  logic [tsr_pkg::UOP_BYTES*8-1:0] uop_row;
  logic [31:0] iaddr;
  logic [RW-1:0] ld_row;  // what a LOAD writes: the element, or zeros for a pad row
  logic [37:0] dbase_b;   // dram_base in bytes
  logic [32:0] rsum, rnext;  // the next DRAM row's byte address
  logic        op_gemm, op_alu, fin, pend_go, step;
  logic        pend_clr, pend_set, done_inc, q_push, q_pop, err_stage;
  logic [1:0]  done_sel;
  logic [9:0]  done_one;

  assign hflags  = q_rdata.flags;
  // byte address of an instruction: the next header, or a queue head
  assign iaddr   = insn_addr_i + {(state_q == S_QHEAD) ? q_rdata.idx : next_q, ILB'(0)};
  assign uop_row = uop_rdata_i;
  logic unused_uop;  // the bits above the three fields are padding
  assign unused_uop = ^uop_row;
  assign loop_stall = (state_q != S_GEMM_WR);
  assign loop_abort = (state_q == S_ERR);
  assign ix_dst   = OFFW'(uop_row[tsr_pkg::UOP_DST_LSB +: tsr_pkg::UOP_DST_W]) + loop_doff;
  assign ix_src   = OFFW'(uop_row[tsr_pkg::UOP_SRC_LSB +: tsr_pkg::UOP_SRC_W]) + loop_soff;
  assign ix_wgt   = OFFW'(uop_row[tsr_pkg::UOP_WGT_LSB +: tsr_pkg::UOP_WGT_W]) + loop_woff;
  assign bx_inc   = bx_q + BXW'(1);
  assign by_inc   = by_q + BXW'(1);
  assign in_row   = yin_q && xin_q;
  assign row_end  = (bx_inc == bx_row);
  assign walk_end = row_end && (by_inc == bx_rows);
  assign dbase_b = 38'(d_mem_dram_base) << elog;
  assign rsum    = {1'b0, rbase_q[31:0]} + (33'(xstride) << elog);
  assign rnext   = {rbase_q[32] | rsum[32], rsum[31:0]};
  assign ld_row  = in_row ? row_q : '0;

  always_comb begin
    state_d    = state_q;
    next_d     = next_q;
    fhdr_d     = fhdr_q;
    fstage_d   = fstage_q;
    fflags_d   = fflags_q;
    qrd_d      = qrd_q;
    qwr_d      = qwr_q;
    qcnt_d     = qcnt_q;
    l2c_d      = l2c_q;
    c2l_d      = c2l_q;
    c2s_d      = c2s_q;
    s2c_d      = s2c_q;
    pend_d     = pend_q;
    done_d     = done_q;
    cand_d     = cand_q;
    cur_d      = cur_q;
    cflags_d   = cflags_q;
    err_d      = err_q;
    insn_d     = insn_q;
    row_d      = row_q;
    bcnt_d     = bcnt_q;
    aph_d      = aph_q;
    baddr_d    = baddr_q;
    rbase_d    = rbase_q;
    bx_d       = bx_q;
    by_d       = by_q;
    xin_d      = xin_q;
    yin_d      = yin_q;
    r_d        = r_q;
    dst_d      = dst_q;

    q_we = 1'b0; q_waddr = '0; q_wdata = '0; q_re = 1'b0; q_raddr = '0;
    uop_we_o = 1'b0; uop_waddr_o = '0; uop_wdata_o = '0; uop_re_o = 1'b0; uop_raddr_o = '0;
    inp_we_o = 1'b0; inp_waddr_o = '0; inp_wdata_o = '0; inp_re_o = 1'b0; inp_raddr_o = '0;
    wgt_we_o = 1'b0; wgt_waddr_o = '0; wgt_wdata_o = '0; wgt_re_o = 1'b0; wgt_raddr_o = '0;
    acc_we_o = 1'b0; acc_waddr_o = '0; acc_wdata_o = '0; acc_re_o = 1'b0; acc_raddr_o = '0;
    out_we_o = 1'b0; out_waddr_o = '0; out_wdata_o = '0; out_re_o = 1'b0; out_raddr_o = '0;
    pend_s = 2'd0;
    pend_go = 1'b0;
    loop_start = 1'b0;
    pend_clr = 1'b0;
    pend_set = 1'b0;
    done_inc = 1'b0;
    done_sel = 2'd0;
    q_push = 1'b0;
    q_pop = 1'b0;
    err_stage = 1'b0;
    dram_wput_o = 1'b0;
    dram_rdrop_o = 1'b0;
    step = 1'b0;
    dram_rd_need_o = 1'b0;
    dram_wr_need_o = 1'b0;
    op_gemm = 1'b0;
    op_alu = 1'b0;
    fin = 1'b0;

    case (state_q)
      S_IDLE, S_ERR, S_FINISHED: ;

      // ---------------------------------------------------- scheduling
      S_SCHED: begin
        // 1. a pending push whose queues now have room
        pend_go = 1'b0;
    loop_start = 1'b0;
    step = 1'b0;
        for (int k = 0; k < 3; k++) begin
          if (!pend_go && pend_q[2*k +: 2] != '0 && push_ok(2'(k), pend_q[2*k +: 2], l2c_q, c2l_q, c2s_q, s2c_q)) begin
            pend_go = 1'b1;
            pend_s  = 2'(k);
          end
        end
        if (pend_go) begin
          pend_clr = 1'b1;
          done_inc = 1'b1;
          done_sel = pend_s;
          case (pend_s)
            2'(ST_LOAD): l2c_d = l2c_q + TCW'(1);  // (load pushes next only)
            2'(ST_COMPUTE): begin
              if (pend_q[2]) c2l_d = c2l_q + TCW'(1);
              if (pend_q[3]) c2s_d = c2s_q + TCW'(1);
            end
            default: s2c_d = s2c_q + TCW'(1);       // (store pushes prev only)
          endcase
        end else if (fhdr_q && 32'(qcnt[fstage_q]) != D) begin
          // 2. dispatch the fetched instruction
          q_we    = 1'b1;
          q_waddr = qaddr(fstage_q, qwr[fstage_q]);
          q_wdata.flags = fflags_q;
          q_wdata.idx   = IXW'(next_q - IXW'(1));
          q_push = 1'b1;
          fhdr_d    = 1'b0;
        end else if (!fhdr_q && 32'(next_q) != insn_count_i) begin
          // 3. fetch the next header
          baddr_d = {1'b0, iaddr};
          bcnt_d  = '0;
          state_d = S_FHDR;
        end else if (qcnt[cand_q] != '0 && pend_q[2*cand_q +: 2] == '0) begin
          // 4. look at a stage's head instruction
          q_re    = 1'b1;
          q_raddr = qaddr(cand_q, qrd[cand_q]);
          state_d = S_QHEAD;
        end else begin
          cand_d = (cand_q == 2'd2) ? 2'd0 : cand_q + 2'd1;
        end
      end

      S_FHDR: begin
        dram_rd_need_o = 1'b1;
        if (dram_rhit_i) begin
          insn_d  = {dram_rbyte_i, insn_q[tsr_pkg::INSN_BITS-1:8]};
          baddr_d = baddr_q + 33'd1;
          bcnt_d  = bcnt_q + BCW'(1);
          if (bcnt_q == BCW'(1)) state_d = S_HDR;
        end
      end

      S_HDR: begin
        if (h_bad) begin
          err_d[0] = 1'b1;
          state_d  = S_ERR;
        end else begin
          fhdr_d   = 1'b1;
          fstage_d = h_stage;
          fflags_d = insn_flags(hdr);
          next_d   = next_q + IXW'(1);
          state_d  = S_SCHED;
        end
      end

      S_QHEAD: begin
        if (pop_ok(cand_q, hflags[1:0], l2c_q, c2l_q, c2s_q, s2c_q)) begin
          case (cand_q)
            2'(ST_LOAD): if (hflags[1]) c2l_d = c2l_q - TCW'(1);
            2'(ST_COMPUTE): begin
              if (hflags[0]) l2c_d = l2c_q - TCW'(1);
              if (hflags[1]) s2c_d = s2c_q - TCW'(1);
            end
            default: if (hflags[0]) c2s_d = c2s_q - TCW'(1);
          endcase
          q_pop = 1'b1;
          cur_d    = cand_q;
          cflags_d = hflags;
          baddr_d  = {1'b0, iaddr};
          bcnt_d   = '0;
          dram_rdrop_o    = 1'b1;  // DRAM may have changed since the last instruction
          state_d  = S_IREAD;
        end else begin
          state_d = S_SCHED;
        end
        cand_d = (cand_q == 2'd2) ? 2'd0 : cand_q + 2'd1;
      end

      S_IREAD: begin
        dram_rd_need_o = 1'b1;
        if (dram_rhit_i) begin
          insn_d  = {dram_rbyte_i, insn_q[tsr_pkg::INSN_BITS-1:8]};
          baddr_d = baddr_q + 33'd1;
          bcnt_d  = bcnt_q + BCW'(1);
          if (bcnt_q == BCW'(15)) state_d = S_DECODE;
        end
      end

      // ---------------------------------------------------- decode and checks
      S_DECODE: begin
        state_d = S_DONE_EXEC;
        if (opcode == OPW'(tsr_pkg::OP_LOAD) || opcode == OPW'(tsr_pkg::OP_STORE)) begin
          // A STORE reads out only and cannot pad; the load stage gets
          // inp/wgt only (fetch), compute uop, acc and acc8. The on-chip
          // and DRAM spans are checked row by row as the walk reaches them
          // (the rows before a failing one are moved: after a failed run
          // the buffers hold whatever it left).
          if (xs != '0) begin
            if ((opcode == OPW'(tsr_pkg::OP_STORE) &&
                 ((mtype != MTW'(tsr_pkg::MEM_OUT)) || (yp0 != '0) || (yp1 != '0) || (xp0 != '0) || (xp1 != '0))) ||
                (opcode == OPW'(tsr_pkg::OP_LOAD) && cur_q == 2'(ST_COMPUTE) &&
                 !(mtype == MTW'(tsr_pkg::MEM_UOP) || mtype == MTW'(tsr_pkg::MEM_ACC) ||
                   mtype == MTW'(tsr_pkg::MEM_ACC8)))) begin
              err_stage = 1'b1;
              state_d = S_ERR;
            end else begin
              bx_d     = '0;
              by_d     = '0;
              xin_d    = (bx_x_lo == '0);  // (a walk has data columns: x_size > 0)
              yin_d    = (bx_y_lo == '0) && (bx_y_hi != '0);
              r_d      = RIW'(d_mem_sram_base);
              rbase_d  = {dbase_b[37:32] != '0, dbase_b[31:0]};
              baddr_d  = {dbase_b[37:32] != '0, dbase_b[31:0]};
              bcnt_d   = '0;
              // nothing to move: a STORE of no row, a LOAD of no padded row
              if (opcode == OPW'(tsr_pkg::OP_STORE)) begin
                if (ys != '0) state_d = S_ST_RD;
              end else begin
                if (bx_rows != '0) state_d = S_LD_ELEM;
              end
            end
          end
        end else if (opcode == OPW'(tsr_pkg::OP_GEMM) || opcode == OPW'(tsr_pkg::OP_ALU)) begin
          if (uop_bad || alu_bad) begin
            err_d[2] = 1'b1;
            state_d  = S_ERR;
          end else begin
            loop_start = 1'b1;  // (a loop of no iteration ends at once)
            state_d    = S_UOP_RD;
          end
        end else begin
          // FINISH: the run is over; the core stops where it is
          fin     = 1'b1;
          state_d = S_DONE_EXEC;
        end
      end

      // ---------------------------------------------------- LOAD
      S_LD_ELEM: begin
        bcnt_d = '0;
        if (r_q >= RIW'(sram_depth(mtype))) begin
          // the row leaves its buffer
          err_stage = 1'b1;
          state_d = S_ERR;
        end else if (in_row) begin
          state_d = S_LD_BYTE;
        end else begin
          // a pad row: zeros, or pad_value in every input lane (S_LD_WR)
          state_d = S_LD_WR;
        end
      end

      S_LD_BYTE: begin
        dram_rd_need_o = !baddr_q[32];
        if (baddr_q[32]) begin
          // a DRAM byte at or beyond 2^32
          err_stage = 1'b1;
          state_d = S_ERR;
        end else if (dram_rhit_i) begin
          row_d   = {dram_rbyte_i, row_q[RW-1:8]};
          baddr_d = baddr_q + 33'd1;
          bcnt_d  = bcnt_q + BCW'(1);
          if (32'(bcnt_q) + 1 == (32'd1 << elog)) state_d = S_LD_WR;
        end
      end

      S_LD_WR: begin
        // the element is in the top bytes of row_q; a pad row is zeros (inp: pad_value)
        case (mtype)
          MTW'(tsr_pkg::MEM_UOP): begin
            uop_we_o = 1'b1; uop_waddr_o = tsr_pkg::UOP_IDX_BITS'(r_q); uop_wdata_o = ld_row[RW-1 -: tsr_pkg::UOP_BYTES*8];
          end
          MTW'(tsr_pkg::MEM_WGT): begin
            wgt_we_o = 1'b1; wgt_waddr_o = tsr_pkg::WGT_IDX_BITS'(r_q); wgt_wdata_o = ld_row[RW-1 -: tsr_pkg::WGT_BYTES*8];
          end
          MTW'(tsr_pkg::MEM_INP): begin
            inp_we_o = 1'b1; inp_waddr_o = tsr_pkg::INP_IDX_BITS'(r_q); inp_wdata_o = ld_row[RW-1 -: tsr_pkg::INP_BYTES*8];
            if (!in_row)
              for (int k = 0; k < tsr_pkg::INP_BYTES * 8 / tsr_pkg::INP_WIDTH; k++)
                inp_wdata_o[k*tsr_pkg::INP_WIDTH +: tsr_pkg::INP_WIDTH] = tsr_pkg::INP_WIDTH'($signed(d_mem_pad_value));
          end
          MTW'(tsr_pkg::MEM_ACC): begin
            acc_we_o = 1'b1; acc_waddr_o = tsr_pkg::ACC_IDX_BITS'(r_q); acc_wdata_o = ld_row[RW-1 -: AROW];
          end
          default: begin  // MEM_ACC8: int8 values sign-extended into the lanes
            acc_we_o = 1'b1; acc_waddr_o = tsr_pkg::ACC_IDX_BITS'(r_q);
            for (int l = 0; l < NL; l++)
              acc_wdata_o[l*W +: W] = W'($signed(ld_row[RW - tsr_pkg::ACC8_BYTES*8 + l*8 +: 8]));
          end
        endcase
        r_d  = r_q + RIW'(1);
        step = 1'b1;
        if (walk_end) state_d = S_DONE_EXEC;
        else state_d = S_LD_ELEM;
      end

      // ---------------------------------------------------- STORE
      S_ST_RD: begin
        if (r_q >= RIW'(tsr_pkg::OUT_DEPTH)) begin
          err_d[3] = 1'b1;
          state_d  = S_ERR;
        end else begin
          out_re_o    = 1'b1;
          out_raddr_o = tsr_pkg::ACC_IDX_BITS'(r_q);
          state_d   = S_ST_LATCH;
        end
      end

      S_ST_LATCH: begin
        row_d   = RW'(out_rdata_i);
        bcnt_d  = '0;
        state_d = S_ST_BYTE;
      end

      S_ST_BYTE: begin
        dram_wr_need_o = dram_wclash_i;
        if (baddr_q[32]) begin
          err_d[3] = 1'b1;
          state_d  = S_ERR;
        end else if (!dram_wclash_i && !dram_busy_i) begin
          dram_wput_o    = 1'b1;
          row_d   = {dram_rbyte_i, row_q[RW-1:8]};  // (the same shift as a LOAD's; the top is unused)
          baddr_d = baddr_q + 33'd1;
          bcnt_d  = bcnt_q + BCW'(1);
          if (32'(bcnt_q) + 1 == tsr_pkg::OUT_BYTES) begin
            r_d  = r_q + RIW'(1);
            step = 1'b1;
            if (walk_end) state_d = S_FLUSH;
            else state_d = S_ST_RD;
          end
        end
      end

      S_FLUSH: begin
        dram_wr_need_o = dram_wpend_i;
        if (!dram_wpend_i && !dram_busy_i) state_d = S_DONE_EXEC;
      end

      // ---------------------------------------------------- GEMM / ALU
      S_UOP_RD: begin
        if (!loop_valid) begin
          state_d = S_DONE_EXEC;
        end else begin
          uop_re_o    = 1'b1;
          uop_raddr_o = loop_uop;
          state_d   = S_UOP;
        end
      end

      S_UOP: begin
        dst_d = ix_dst;
        if (ix_dst >= OFFW'(tsr_pkg::ACC_DEPTH)) begin
          err_d[2] = 1'b1;
          state_d  = S_ERR;
        end else if (f_reset) begin
          row_d   = '0;  // written by S_ALU_WR
          state_d = S_ALU_WR;
        end else if (is_gemm) begin
          if (ix_src >= OFFW'(tsr_pkg::INP_DEPTH) || ix_wgt >= OFFW'(tsr_pkg::WGT_DEPTH)) begin
            err_d[2] = 1'b1;
            state_d  = S_ERR;
          end else begin
            inp_re_o = 1'b1; inp_raddr_o = tsr_pkg::INP_IDX_BITS'(ix_src);
            wgt_re_o = 1'b1; wgt_raddr_o = tsr_pkg::WGT_IDX_BITS'(ix_wgt);
            acc_re_o = 1'b1; acc_raddr_o = tsr_pkg::ACC_IDX_BITS'(ix_dst);
            state_d = S_GEMM_W1;
          end
        end else if (!tsr_pkg::alu_use_imm(insn_q)) begin
          if (ix_src >= OFFW'(tsr_pkg::ACC_DEPTH)) begin
            err_d[2] = 1'b1;
            state_d  = S_ERR;
          end else begin
            acc_re_o = 1'b1; acc_raddr_o = tsr_pkg::ACC_IDX_BITS'(ix_src);
            state_d = S_ALU_SRC;
          end
        end else begin
          acc_re_o  = 1'b1; acc_raddr_o = tsr_pkg::ACC_IDX_BITS'(ix_dst);
          bcnt_d  = '0;
          aph_d   = 1'b0;
          state_d = S_ALU_LANE;
        end
      end

      S_GEMM_W1: state_d = S_GEMM_W2;
      S_GEMM_W2: state_d = S_GEMM_WR;

      S_ALU_SRC: begin
        row_d   = RW'(acc_rdata_i);
        acc_re_o  = 1'b1; acc_raddr_o = tsr_pkg::ACC_IDX_BITS'(dst_q);
        bcnt_d  = '0;
        aph_d   = 1'b0;
        state_d = S_ALU_LANE;
      end

      S_ALU_LANE: begin
        // a lane in two cycles: src lanes leave row_q at the bottom as results enter at the top
        aph_d = !aph_q;
        if (aph_q) begin
          row_d[AROW-1:0] = {exec_alu_res_i, row_q[AROW-1:W]};
          bcnt_d = bcnt_q + BCW'(1);
          if (32'(bcnt_q) + 1 == NL) state_d = S_ALU_WR;
        end
      end

      S_ALU_WR: begin
        acc_we_o = 1'b1; acc_waddr_o = tsr_pkg::ACC_IDX_BITS'(dst_q); acc_wdata_o = row_q[AROW-1:0];
        out_we_o = 1'b1; out_waddr_o = tsr_pkg::ACC_IDX_BITS'(dst_q); out_wdata_o = exec_alu_out_i;
        op_alu  = !is_gemm;  // (a GEMM reset comes through here too)
        state_d = S_GEMM_WR;
      end

      S_GEMM_WR: begin
        // GEMM: write the accumulated row; every op (reset and ALU too)
        // comes through here: the loop advances (stall low).
        if (is_gemm && !f_reset) begin
          acc_we_o = 1'b1; acc_waddr_o = tsr_pkg::ACC_IDX_BITS'(dst_q); acc_wdata_o = exec_acc_row_i;
          out_we_o = 1'b1; out_waddr_o = tsr_pkg::ACC_IDX_BITS'(dst_q); out_wdata_o = exec_out_row_i;
          op_gemm = 1'b1;
        end
        state_d = S_UOP_RD;  // the loop advances this cycle
      end

      // ---------------------------------------------------- completion
      S_DONE_EXEC: begin
        // pushes happen in S_SCHED (at once if the queues have room)
        pend_set = 1'b1;
        done_inc = (cflags_q[3:2] == 2'b00);
        done_sel = cur_q;
        if (opcode == OPW'(tsr_pkg::OP_FINISH)) state_d = S_FINISHED;
        else state_d = S_SCHED;
      end

      default: state_d = S_ERR;
    endcase

    // one element of the walk done: the next element or row; after a data
    // row the DRAM address moves to the next row
    if (step) begin
      if (!row_end) begin
        bx_d = bx_inc;
        if (bx_inc == bx_x_hi) xin_d = 1'b0;
        else if (bx_inc == bx_x_lo) xin_d = 1'b1;
      end else begin
        bx_d  = '0;
        xin_d = (bx_x_lo == '0);
        by_d  = by_inc;
        if (by_inc == bx_y_hi) yin_d = 1'b0;
        else if (by_inc == bx_y_lo) yin_d = 1'b1;
        if (yin_q) begin
          rbase_d = rnext;
          baddr_d = rnext;
        end
      end
    end

    // an error response from DRAM stops the core
    if (dram_err_i) begin
      if (state_q == S_FHDR) err_d[0] = 1'b1;
      else err_stage = 1'b1;
      state_d = S_ERR;
    end

    // Per-stage and per-byte updates with one enable each (dynamic part
    // selects would build shifters).
    done_one = done_q[0 +: 10];
    if (done_sel == 2'(ST_COMPUTE)) done_one = done_q[10 +: 10];
    if (done_sel == 2'(ST_STORE)) done_one = done_q[20 +: 10];
    done_one = done_one + 10'd1;
    for (int k = 0; k < 3; k++) begin
      if (done_inc && done_sel == 2'(k)) done_d[10*k +: 10] = done_one;
      if (pend_clr && pend_s == 2'(k)) pend_d[2*k +: 2] = '0;
      if (pend_set && cur_q == 2'(k)) pend_d[2*k +: 2] = cflags_q[3:2];
      if (q_push && fstage_q == 2'(k)) begin
        qwr_d[k*QPW +: QPW]  = qnext(qwr[k]);
        qcnt_d[k*QCW +: QCW] = qcnt[k] + QCW'(1);
      end
      if (q_pop && cand_q == 2'(k)) begin
        qrd_d[k*QPW +: QPW]  = qnext(qrd[k]);
        qcnt_d[k*QCW +: QCW] = qcnt[k] - QCW'(1);
      end
      if (err_stage && cur_q == 2'(k)) err_d[k+1] = 1'b1;
    end

    if (start_i) begin
      state_d  = S_SCHED;
      next_d   = '0;
      fhdr_d   = 1'b0;
      qrd_d    = '0;
      qwr_d    = '0;
      qcnt_d   = '0;
      l2c_d    = '0;
      c2l_d    = '0;
      c2s_d    = '0;
      s2c_d    = '0;
      pend_d   = '0;
      cand_d   = '0;
      err_d    = '0;
    end
  end

  assign dram_addr_o      = baddr_q;
  assign dram_addr_next_o = baddr_d[32:BusLog];
  assign dram_wbyte_o     = row_q[7:0];

  // ------------------------------------------------------------ status
  logic exec;
  logic [2:0] sbusy;
  assign exec = !(state_q == S_IDLE || state_q == S_SCHED || state_q == S_FHDR || state_q == S_HDR ||
                  state_q == S_QHEAD || state_q == S_ERR || state_q == S_FINISHED);
  for (genvar s = 0; s < 3; s++) begin : g_status
    assign sbusy[s]       = (qcnt[s] != '0) || (pend_q[2*s +: 2] != '0) || (exec && cur_q == 2'(s));
  end
  assign busy_o        = {sbusy, fhdr_q || 32'(next_q) != insn_count_i};
  assign err_o         = err_q;
  assign finish_o      = fin;
  assign compute_exec_o = exec && cur_q == 2'(ST_COMPUTE);
  assign gemm_op_o     = op_gemm;
  assign alu_op_o      = op_alu;
  assign fetched_o     = 32'(next_q);  // headers read (one may wait for its queue)
  assign stage_insns_o = done_q;
  assign tokens_o      = {8'(s2c_q), 8'(c2s_q), 8'(c2l_q), 8'(l2c_q)};

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q    <= S_IDLE;
      next_q     <= '0;
      fhdr_q     <= 1'b0;
      fstage_q   <= '0;
      fflags_q   <= '0;
      qrd_q      <= '0;
      qwr_q      <= '0;
      qcnt_q     <= '0;
      l2c_q      <= '0;
      c2l_q      <= '0;
      c2s_q      <= '0;
      s2c_q      <= '0;
      pend_q     <= '0;
      done_q     <= '0;
      cand_q     <= '0;
      cur_q      <= '0;
      cflags_q   <= '0;
      err_q      <= '0;
    end else begin
      state_q    <= state_d;
      next_q     <= next_d;
      fhdr_q     <= fhdr_d;
      fstage_q   <= fstage_d;
      fflags_q   <= fflags_d;
      qrd_q      <= qrd_d;
      qwr_q      <= qwr_d;
      qcnt_q     <= qcnt_d;
      l2c_q      <= l2c_d;
      c2l_q      <= c2l_d;
      c2s_q      <= c2s_d;
      s2c_q      <= s2c_d;
      pend_q     <= pend_d;
      done_q     <= done_d;
      cand_q     <= cand_d;
      cur_q      <= cur_d;
      cflags_q   <= cflags_d;
      err_q      <= err_d;
    end
  end

  // Datapath registers: no reset (their state machine gives them meaning).
  always_ff @(posedge clk_i) begin
    insn_q     <= insn_d;
    row_q      <= row_d;
    bcnt_q     <= bcnt_d;
    aph_q      <= aph_d;
    baddr_q    <= baddr_d;
    rbase_q    <= rbase_d;
    bx_q       <= bx_d;
    by_q       <= by_d;
    xin_q      <= xin_d;
    yin_q      <= yin_d;
    r_q        <= r_d;
    dst_q      <= dst_d;
  end

  // Command queues and token counters stay within their capacities (those
  // the verifier's deadlock check assumes).
  for (genvar s = 0; s < 3; s++) begin : g_chk_queue
    `TSR_ASSERT(chk_queue_count, qcnt_q[s*QCW +: QCW] <= QCW'(D), clk_i, rst_ni)
  end
  // The walk writes only elements of its padded box, and its flags say
  // where in the box it is.
  `TSR_ASSERT(chk_walk_in_box, state_q != S_LD_WR || (bx_q < bx_row && by_q < bx_rows), clk_i, rst_ni)
  `TSR_ASSERT(chk_walk_flags, state_q != S_LD_WR ||
              (in_row == (by_q >= bx_y_lo && by_q < bx_y_hi && bx_q >= bx_x_lo && bx_q < bx_x_hi)), clk_i, rst_ni)
  // The ALU lane counter stays within the row (tsr_serial_exec takes the
  // lane in LaneW bits).
  `TSR_ASSERT(chk_alu_lane, state_q != S_ALU_LANE || 32'(bcnt_q) < NL, clk_i, rst_ni)
  `TSR_ASSERT(chk_token_counts, l2c_q <= TCW'(tsr_pkg::DEP_QUEUE_DEPTH) && c2l_q <= TCW'(tsr_pkg::DEP_QUEUE_DEPTH) &&
              c2s_q <= TCW'(tsr_pkg::DEP_QUEUE_DEPTH) && s2c_q <= TCW'(tsr_pkg::DEP_QUEUE_DEPTH), clk_i, rst_ni)
endmodule
