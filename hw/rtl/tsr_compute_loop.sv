// tsr_compute_loop: the micro-op loop nest of GEMM/ALU (isa/semantics.md):
// for i < iter_out, j < iter_in, u in [uop_bgn, uop_end) it emits one
// (u, dst/src/wgt offsets) per cycle, offsets = i*factor_out + j*factor_in.
// Offsets are built by addition (no multipliers) and saturate at
// 2^(OffW-1): every buffer has at most that many rows, so a saturated offset
// still marks the index as out of range, and the caller reports the error
// only if an op with it is actually issued (as the golden model does).
// The caller keeps the loop parameters stable while busy; stall_i keeps
// the current op on the outputs for another cycle.
`include "tsr_assert.svh"

module tsr_compute_loop #(
  parameter int UopBits = tsr_pkg::UOP_IDX_BITS,  // uop index bits
  parameter int IterW   = tsr_pkg::GEMM_ITER_OUT_W, // iter_out/iter_in bits
  parameter int OffW    = tsr_pkg::SRAM_BASE_BITS + 1  // offset bits (max index bits + 1: callers pass it)
) (
  input  logic              clk_i,
  input  logic              rst_ni,
  input  logic              start_i,   // pulse: begin a loop nest (when idle)
  input  logic              stall_i,   // hold the current op (emit it again)
  input  logic              abort_i,   // stop emitting (error)
  input  logic [UopBits-1:0] uop_bgn_i,
  input  logic [UopBits:0]   uop_end_i,
  input  logic [IterW-1:0]  iter_out_i,
  input  logic [IterW-1:0]  iter_in_i,
  input  logic [OffW-2:0]   dst_fo_i,
  input  logic [OffW-2:0]   dst_fi_i,
  input  logic [OffW-2:0]   src_fo_i,
  input  logic [OffW-2:0]   src_fi_i,
  input  logic [OffW-2:0]   wgt_fo_i,
  input  logic [OffW-2:0]   wgt_fi_i,
  output logic              valid_o,   // one op this cycle (also "busy")
  output logic [UopBits-1:0] uop_o,
  output logic [OffW-1:0]   dst_off_o,
  output logic [OffW-1:0]   src_off_o,
  output logic [OffW-1:0]   wgt_off_o
);
  localparam logic [OffW-1:0] CAP = {1'b1, {(OffW - 1){1'b0}}};

  logic              active_q, active_d;
  logic [UopBits-1:0] u_q, u_d;
  logic [IterW-1:0]  i_q, i_d, j_q, j_d;
  // *_row: offset of the current i (j = 0); *_cur: of the current (i, j).
  logic [OffW-1:0]   d_row_q, d_row_d, d_cur_q, d_cur_d;
  logic [OffW-1:0]   s_row_q, s_row_d, s_cur_q, s_cur_d;
  logic [OffW-1:0]   w_row_q, w_row_d, w_cur_q, w_cur_d;
  logic              u_last, j_last, i_last;

  // a <= CAP and f < CAP, so the sum fits in OffW bits before the clamp.
  function automatic logic [OffW-1:0] sat_add(input logic [OffW-1:0] a,
                                               input logic [OffW-2:0] f);
    logic [OffW-1:0] t;
    t = a + {1'b0, f};
    sat_add = (t > CAP) ? CAP : t;
  endfunction

  always_comb begin
    u_last = ({1'b0, u_q} + 1'b1) == uop_end_i;
    j_last = (j_q + 1'b1) == iter_in_i;
    i_last = (i_q + 1'b1) == iter_out_i;

    active_d = active_q;
    u_d = u_q;
    i_d = i_q;
    j_d = j_q;
    d_row_d = d_row_q;
    s_row_d = s_row_q;
    w_row_d = w_row_q;
    d_cur_d = d_cur_q;
    s_cur_d = s_cur_q;
    w_cur_d = w_cur_q;

    if (start_i && !active_q) begin
      active_d = ({1'b0, uop_bgn_i} < uop_end_i) && (iter_out_i != '0) && (iter_in_i != '0);
      u_d = uop_bgn_i;
      i_d = '0;
      j_d = '0;
      d_row_d = '0;
      s_row_d = '0;
      w_row_d = '0;
      d_cur_d = '0;
      s_cur_d = '0;
      w_cur_d = '0;
    end else if (active_q && abort_i) begin
      active_d = 1'b0;
    end else if (active_q && !stall_i) begin
      if (!u_last) begin
        u_d = u_q + 1'b1;
      end else begin
        u_d = uop_bgn_i;
        if (!j_last) begin
          j_d = j_q + 1'b1;
          d_cur_d = sat_add(d_cur_q, dst_fi_i);
          s_cur_d = sat_add(s_cur_q, src_fi_i);
          w_cur_d = sat_add(w_cur_q, wgt_fi_i);
        end else begin
          j_d = '0;
          if (!i_last) begin
            i_d = i_q + 1'b1;
            d_row_d = sat_add(d_row_q, dst_fo_i);
            s_row_d = sat_add(s_row_q, src_fo_i);
            w_row_d = sat_add(w_row_q, wgt_fo_i);
            d_cur_d = d_row_d;
            s_cur_d = s_row_d;
            w_cur_d = w_row_d;
          end else begin
            active_d = 1'b0;
          end
        end
      end
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      active_q <= 1'b0;
      u_q      <= '0;
      i_q      <= '0;
      j_q      <= '0;
      d_row_q  <= '0;
      s_row_q  <= '0;
      w_row_q  <= '0;
      d_cur_q  <= '0;
      s_cur_q  <= '0;
      w_cur_q  <= '0;
    end else begin
      active_q <= active_d;
      u_q      <= u_d;
      i_q      <= i_d;
      j_q      <= j_d;
      d_row_q  <= d_row_d;
      s_row_q  <= s_row_d;
      w_row_q  <= w_row_d;
      d_cur_q  <= d_cur_d;
      s_cur_q  <= s_cur_d;
      w_cur_q  <= w_cur_d;
    end
  end

  assign valid_o   = active_q;
  assign uop_o     = u_q;
  assign dst_off_o = d_cur_q;
  assign src_off_o = s_cur_q;
  assign wgt_off_o = w_cur_q;

  // Offsets saturate at CAP; while a nest runs its indices stay inside the
  // loop bounds (the caller keeps them stable while busy).
  `TSR_ASSERT(chk_offsets_capped, d_cur_q <= CAP && s_cur_q <= CAP && w_cur_q <= CAP, clk_i, rst_ni)
  `TSR_ASSERT(chk_in_bounds, !active_q || ({1'b0, u_q} < uop_end_i && i_q < iter_out_i && j_q < iter_in_i),
              clk_i, rst_ni)
endmodule
