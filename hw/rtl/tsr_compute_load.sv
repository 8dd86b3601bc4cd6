// tsr_compute_load: LOAD of uop, acc and acc8 rows into the buffers inside
// tsr_compute (isa/semantics.md LOAD). One tsr_dma_rd_elems per memory type
// (their element widths differ); only one load runs at a time, so their
// read ports are muxed onto the stage's single DMA read port by the type of
// the running load. An issuer sends one element-reader command per DRAM row
// (y_size of them, or one for the whole region when the rows are contiguous,
// running ahead of the data); a writer walks the padded on-chip rows in
// order, writing zeros for padding and the next streamed element otherwise,
// one row per cycle when data is there. As in tsr_load, readers of elements
// at least a bus beat wide have no buffer reservation (BufBeats = 0: full bus
// rate whatever the DRAM latency): the writer takes every element as it
// arrives and waits on nothing else, and reads start when it reaches the last
// top padding row. Narrower elements (uop) keep the reservation: the writer
// takes one element per cycle, less than a beat, and without it their beats
// would hold the shared R channel at that rate.
// With activation tables (ACT_LUT > 0) a fourth reader serves LOAD lut: a
// table is 256 bytes, so its elements are read as bus beats (BUS_BYTES each,
// 256/BUS_BYTES per table; a table is contiguous in DRAM) and the writer
// walks beats instead of tables: one beat per cycle into the lanes' table
// copies (lut_we_o, beat address waddr_o), at the bus rate like acc rows.
// Without the key none of it is generated.
// The caller checks bounds (sram_base + rows*row <= depth), x_size != 0 and
// (lut) no padding before start_i and keeps the inputs stable while busy_o.
`include "tsr_assert.svh"

module tsr_compute_load #(
  parameter int AddrW = 13  // on-chip row address bits (max of uop, acc)
) (
  input  logic        clk_i,
  input  logic        rst_ni,
  input  logic        start_i,
  input  logic [tsr_pkg::MEM_MEM_TYPE_W-1:0] mem_type_i,  // tsr_pkg::MEM_UOP, MEM_ACC, MEM_ACC8 (or MEM_LUT)
  input  logic [AddrW-1:0] sram_base_i,
  input  logic [31:0] dram_base_i,
  input  logic [tsr_pkg::MEM_Y_SIZE_W-1:0]   y_size_i,
  input  logic [tsr_pkg::MEM_X_SIZE_W-1:0]   x_size_i,
  input  logic [tsr_pkg::MEM_X_STRIDE_W-1:0] x_stride_i,
  input  logic [tsr_pkg::MEM_Y_PAD0_W-1:0]   y_pad0_i,
  input  logic [tsr_pkg::MEM_Y_PAD1_W-1:0]   y_pad1_i,
  input  logic [tsr_pkg::MEM_X_PAD0_W-1:0]   x_pad0_i,
  input  logic [tsr_pkg::MEM_X_PAD1_W-1:0]   x_pad1_i,
  output logic        busy_o,
  output logic        stall_o,     // waiting on DRAM
  // DMA read port
  output logic        rd_req_valid_o,
  input  logic        rd_req_ready_i,
  output logic [31:0] rd_req_addr_o,
  output logic [31:0] rd_req_beats_o,
  input  logic        rd_data_valid_i,
  output logic        rd_data_ready_o,
  input  logic [tsr_pkg::DRAM_BUS_WIDTH-1:0] rd_data_i,
  // buffer writes
  output logic        uop_we_o,
  output logic        acc_we_o,
  output logic [AddrW-1:0] waddr_o,
  output logic [tsr_pkg::UOP_BYTES*8-1:0] uop_wdata_o,
  output logic [tsr_pkg::ACC_BYTES*8-1:0] acc_wdata_o,
  output logic        lut_we_o,    // a beat of tables at waddr_o (ACT_LUT > 0; else 0)
  output logic [tsr_pkg::BUS_BYTES*8-1:0] lut_wdata_o
);
  // Instruction field widths (the ISA field table, through tsr_pkg)
  localparam int MTW = tsr_pkg::MEM_MEM_TYPE_W;    // memory type
  localparam int RW  = tsr_pkg::MEM_X_SIZE_W + 1;    // a size plus two pads (tsr_pad_box)
  localparam int UB = tsr_pkg::UOP_BYTES;
  localparam int AB = tsr_pkg::ACC_BYTES;
  localparam int A8B = tsr_pkg::ACC8_BYTES;
  localparam int AW = tsr_pkg::ACC_WIDTH;
  localparam int LANES = tsr_pkg::BATCH * tsr_pkg::BLOCK_OUT;
  localparam int BB = tsr_pkg::BUS_BYTES;
  localparam int BPT = 256 / BB;  // beats per activation table
  localparam bit LUT = (tsr_pkg::ACT_LUT != 0);
  localparam int NT = LUT ? 4 : 3;  // element readers: 0 uop, 1 acc, 2 acc8 (3 lut)

  // ---- latched shape ----
  logic [1:0]  sel_q, sel_d;          // reader of the running load
  logic [RW-1:0] row_q, row_d;          // x_pad0 + x_size + x_pad1
  logic [RW-1:0] rows_q, rows_d;        // y_pad0 + y_size + y_pad1
  logic [RW-1:0] x_lo_q, x_lo_d, x_hi_q, x_hi_d;  // data columns [x_lo, x_hi)
  logic [RW-1:0] y_lo_q, y_lo_d, y_hi_q, y_hi_d;  // data rows [y_lo, y_hi)

  // ---- issuer ----
  logic [15:0] iss_left_q, iss_left_d;      // commands still to issue
  logic [31:0] iss_count_q, iss_count_d;    // elements per command
  logic [31:0] iss_addr_q, iss_addr_d, stride_bytes, base_bytes;
  logic        iss_valid;
  logic [NT-1:0] cmd_valid, cmd_ready;

  // ---- writer ----
  logic        wr_active_q, wr_active_d;
  logic [RW-1:0] wy_q, wy_d, wx_q, wx_d;
  logic [AddrW-1:0] waddr_q, waddr_d;
  logic        pad, take, write;

  // ---- readers ----
  logic [NT-1:0]    req_valid, data_ready, elem_valid, elem_ready;
  logic [NT*32-1:0] req_addr, req_beats;
  logic [UB*8-1:0]  elem_uop;
  logic [AB*8-1:0]  elem_acc;
  logic [A8B*8-1:0] elem_acc8;
  logic             sel_elem_valid;
  logic [NT-1:0]    unused_busy, unused_stall;  // the writer tracks progress itself

  // The padded box of the incoming command (latched at start).
  logic [RW-1:0] box_row, box_rows, box_x_lo, box_x_hi, box_y_lo, box_y_hi;
  tsr_pad_box u_box (
    .y_size_i (y_size_i),
    .x_size_i (x_size_i),
    .y_pad0_i (y_pad0_i),
    .y_pad1_i (y_pad1_i),
    .x_pad0_i (x_pad0_i),
    .x_pad1_i (x_pad1_i),
    .row_o    (box_row),
    .rows_o   (box_rows),
    .x_lo_o   (box_x_lo),
    .x_hi_o   (box_x_hi),
    .y_lo_o   (box_y_lo),
    .y_hi_o   (box_y_hi)
  );

  always_comb begin
    sel_d = sel_q;
    row_d = row_q;
    rows_d = rows_q;
    x_lo_d = x_lo_q;
    x_hi_d = x_hi_q;
    y_lo_d = y_lo_q;
    y_hi_d = y_hi_q;
    iss_left_d = iss_left_q;
    iss_count_d = iss_count_q;
    iss_addr_d = iss_addr_q;
    wr_active_d = wr_active_q;
    wy_d = wy_q;
    wx_d = wx_q;
    waddr_d = waddr_q;

    // Byte addresses wrap at 32 bits like the bus; element sizes are
    // constants, so these are shifts for power-of-two rows.
    case (mem_type_i)
      MTW'(tsr_pkg::MEM_UOP): begin
        base_bytes = dram_base_i * 32'(UB);
        stride_bytes = 32'(x_stride_i) * 32'(UB);
      end
      MTW'(tsr_pkg::MEM_ACC): begin
        base_bytes = dram_base_i * 32'(AB);
        stride_bytes = 32'(x_stride_i) * 32'(AB);
      end
      default: begin
        base_bytes = dram_base_i * 32'(A8B);
        stride_bytes = 32'(x_stride_i) * 32'(A8B);
      end
    endcase
    if (LUT && mem_type_i == MTW'(tsr_pkg::MEM_LUT)) begin
      base_bytes = dram_base_i * 32'd256;
      stride_bytes = 32'(x_stride_i) * 32'd256;
    end

    // Reads start once the writer is in the last top padding row (the
    // readers have no buffer reservation; see the header).
    iss_valid = (iss_left_q != '0) && (wy_q + RW'(1) >= y_lo_q);
    cmd_valid = '0;
    cmd_valid[sel_q] = iss_valid;
    if (iss_valid && cmd_ready[sel_q]) begin
      iss_left_d = iss_left_q - 16'd1;
      iss_addr_d = iss_addr_q + stride_bytes;
    end

    pad = (wy_q < y_lo_q) || (wy_q >= y_hi_q) || (wx_q < x_lo_q) || (wx_q >= x_hi_q);
    sel_elem_valid = elem_valid[sel_q];
    take = wr_active_q && !pad && sel_elem_valid;
    write = wr_active_q && (pad || sel_elem_valid);
    elem_ready = '0;
    elem_ready[sel_q] = take;
    if (write) begin
      waddr_d = waddr_q + AddrW'(1);
      if (wx_q + RW'(1) == row_q) begin
        wx_d = '0;
        wy_d = wy_q + RW'(1);
        if (wy_q + RW'(1) == rows_q) wr_active_d = 1'b0;
      end else begin
        wx_d = wx_q + RW'(1);
      end
    end

    if (start_i && !wr_active_q) begin
      case (mem_type_i)
        MTW'(tsr_pkg::MEM_UOP): sel_d = 2'd0;
        MTW'(tsr_pkg::MEM_ACC): sel_d = 2'd1;
        default:              sel_d = 2'd2;
      endcase
      row_d = box_row;
      rows_d = box_rows;
      x_lo_d = box_x_lo;
      x_hi_d = box_x_hi;
      y_lo_d = box_y_lo;
      y_hi_d = box_y_hi;
      // Contiguous rows (x_stride == x_size): one command for all of them.
      if (x_size_i == '0) begin
        iss_left_d  = '0;
        iss_count_d = '0;
      end else if (x_stride_i == x_size_i) begin
        iss_left_d  = {15'd0, y_size_i != '0};
        iss_count_d = 32'(y_size_i) * 32'(x_size_i);
      end else begin
        iss_left_d  = y_size_i;
        iss_count_d = {16'd0, x_size_i};
      end
      // lut: the same walk over beats, x_size*BPT of them per row (no
      // padding; the caller's bounds check keeps rows*row <= ACT_LUT*BPT)
      if (LUT && mem_type_i == MTW'(tsr_pkg::MEM_LUT)) begin
        sel_d  = 2'd3;
        row_d  = RW'(32'(x_size_i) * 32'(BPT));
        x_lo_d = '0;
        x_hi_d = row_d;
        if (x_size_i != '0 && x_stride_i == x_size_i) begin
          iss_count_d = 32'(y_size_i) * 32'(x_size_i) * 32'(BPT);
        end else begin
          iss_count_d = 32'(x_size_i) * 32'(BPT);
        end
      end
      iss_addr_d = base_bytes;
      wr_active_d = (rows_d != '0) && (row_d != '0);
      wy_d = '0;
      wx_d = '0;
      waddr_d = sram_base_i;
      // lut: the first beat of table sram_base
      if (LUT && mem_type_i == MTW'(tsr_pkg::MEM_LUT)) waddr_d = AddrW'(32'(sram_base_i) * 32'(BPT));
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      sel_q       <= '0;
      row_q       <= '0;
      rows_q      <= '0;
      x_lo_q      <= '0;
      x_hi_q      <= '0;
      y_lo_q      <= '0;
      y_hi_q      <= '0;
      iss_left_q  <= '0;
      iss_count_q <= '0;
      iss_addr_q  <= '0;
      wr_active_q <= 1'b0;
      wy_q        <= '0;
      wx_q        <= '0;
      waddr_q     <= '0;
    end else begin
      sel_q       <= sel_d;
      row_q       <= row_d;
      rows_q      <= rows_d;
      x_lo_q      <= x_lo_d;
      x_hi_q      <= x_hi_d;
      y_lo_q      <= y_lo_d;
      y_hi_q      <= y_hi_d;
      iss_left_q  <= iss_left_d;
      iss_count_q <= iss_count_d;
      iss_addr_q  <= iss_addr_d;
      wr_active_q <= wr_active_d;
      wy_q        <= wy_d;
      wx_q        <= wx_d;
      waddr_q     <= waddr_d;
    end
  end

  // ---- element readers; only the selected one sees the port ----
  tsr_dma_rd_elems #(
    .ElemBytes (UB),
    .BufBeats  ((UB < tsr_pkg::BUS_BYTES) ? 32 : 0),
    .CmdDepth  (16)
  ) u_uop_reader (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .cmd_valid_i     (cmd_valid[0]),
    .cmd_ready_o     (cmd_ready[0]),
    .cmd_addr_i      (iss_addr_q),
    .cmd_count_i     (iss_count_q),
    .rd_req_valid_o  (req_valid[0]),
    .rd_req_ready_i  (rd_req_ready_i && sel_q == 2'd0),
    .rd_req_addr_o   (req_addr[0*32 +: 32]),
    .rd_req_beats_o  (req_beats[0*32 +: 32]),
    .rd_data_valid_i (rd_data_valid_i && sel_q == 2'd0),
    .rd_data_ready_o (data_ready[0]),
    .rd_data_i       (rd_data_i),
    .elem_valid_o    (elem_valid[0]),
    .elem_ready_i    (elem_ready[0]),
    .elem_o          (elem_uop),
    .busy_o          (unused_busy[0]),
    .stall_o         (unused_stall[0])
  );

  tsr_dma_rd_elems #(
    .ElemBytes (AB),
    .BufBeats  ((AB < tsr_pkg::BUS_BYTES) ? 32 : 0),
    .CmdDepth  (16)
  ) u_acc_reader (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .cmd_valid_i     (cmd_valid[1]),
    .cmd_ready_o     (cmd_ready[1]),
    .cmd_addr_i      (iss_addr_q),
    .cmd_count_i     (iss_count_q),
    .rd_req_valid_o  (req_valid[1]),
    .rd_req_ready_i  (rd_req_ready_i && sel_q == 2'd1),
    .rd_req_addr_o   (req_addr[1*32 +: 32]),
    .rd_req_beats_o  (req_beats[1*32 +: 32]),
    .rd_data_valid_i (rd_data_valid_i && sel_q == 2'd1),
    .rd_data_ready_o (data_ready[1]),
    .rd_data_i       (rd_data_i),
    .elem_valid_o    (elem_valid[1]),
    .elem_ready_i    (elem_ready[1]),
    .elem_o          (elem_acc),
    .busy_o          (unused_busy[1]),
    .stall_o         (unused_stall[1])
  );

  tsr_dma_rd_elems #(
    .ElemBytes (A8B),
    .BufBeats  ((A8B < tsr_pkg::BUS_BYTES) ? 32 : 0),
    .CmdDepth  (16)
  ) u_acc8_reader (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .cmd_valid_i     (cmd_valid[2]),
    .cmd_ready_o     (cmd_ready[2]),
    .cmd_addr_i      (iss_addr_q),
    .cmd_count_i     (iss_count_q),
    .rd_req_valid_o  (req_valid[2]),
    .rd_req_ready_i  (rd_req_ready_i && sel_q == 2'd2),
    .rd_req_addr_o   (req_addr[2*32 +: 32]),
    .rd_req_beats_o  (req_beats[2*32 +: 32]),
    .rd_data_valid_i (rd_data_valid_i && sel_q == 2'd2),
    .rd_data_ready_o (data_ready[2]),
    .rd_data_i       (rd_data_i),
    .elem_valid_o    (elem_valid[2]),
    .elem_ready_i    (elem_ready[2]),
    .elem_o          (elem_acc8),
    .busy_o          (unused_busy[2]),
    .stall_o         (unused_stall[2])
  );

  if (LUT) begin : g_lut_reader
    tsr_dma_rd_elems #(
      .ElemBytes (BB),
      .BufBeats  (0),  // one beat per element: the writer takes each as it arrives
      .CmdDepth  (16)
    ) u_lut_reader (
      .clk_i           (clk_i),
      .rst_ni          (rst_ni),
      .cmd_valid_i     (cmd_valid[3]),
      .cmd_ready_o     (cmd_ready[3]),
      .cmd_addr_i      (iss_addr_q),
      .cmd_count_i     (iss_count_q),
      .rd_req_valid_o  (req_valid[3]),
      .rd_req_ready_i  (rd_req_ready_i && sel_q == 2'd3),
      .rd_req_addr_o   (req_addr[3*32 +: 32]),
      .rd_req_beats_o  (req_beats[3*32 +: 32]),
      .rd_data_valid_i (rd_data_valid_i && sel_q == 2'd3),
      .rd_data_ready_o (data_ready[3]),
      .rd_data_i       (rd_data_i),
      .elem_valid_o    (elem_valid[3]),
      .elem_ready_i    (elem_ready[3]),
      .elem_o          (lut_wdata_o),
      .busy_o          (unused_busy[3]),
      .stall_o         (unused_stall[3])
    );
    assign lut_we_o = write && (sel_q == 2'd3);
  end else begin : g_no_lut
    assign lut_we_o = 1'b0;
    assign lut_wdata_o = '0;
  end

  always_comb begin
    rd_req_valid_o  = req_valid[sel_q];
    rd_req_addr_o   = req_addr[sel_q*32 +: 32];
    rd_req_beats_o  = req_beats[sel_q*32 +: 32];
    rd_data_ready_o = data_ready[sel_q];

    uop_we_o = write && (sel_q == 2'd0);
    acc_we_o = write && (sel_q != 2'd0) && !(LUT && sel_q == 2'd3);
    waddr_o  = waddr_q;
    uop_wdata_o = pad ? '0 : elem_uop;
    acc_wdata_o = '0;
    if (!pad) begin
      if (sel_q == 2'd1) begin
        acc_wdata_o = elem_acc;
      end else begin
        // acc8: byte k of the element is lane k, sign-extended to W bits.
        for (int k = 0; k < LANES; k++) begin
          acc_wdata_o[k*AW +: AW] = AW'($signed(elem_acc8[k*8 +: 8]));
        end
      end
    end
  end

  assign busy_o  = wr_active_q || (iss_left_q != '0);
  assign stall_o = (rd_req_valid_o && !rd_req_ready_i) || (wr_active_q && !pad && !sel_elem_valid);

  // The writer walks the padded box row by row: its cursor stays inside it.
  `TSR_ASSERT(chk_walk_in_box, !wr_active_q || (wx_q < row_q && wy_q < rows_q), clk_i, rst_ni)
endmodule
