#!/usr/bin/env bash
# Synthesize tsr_top for iCE40 (yosys synth_ice40 -dsp, flattened) and write
# its gate-level netlist. The one synthesis of the accelerator core for the
# open iCE40 flow: the RTL backend's netlist model (TESSERA_RTL_NETLIST=ice40,
# scripts/build_rtl_model.sh) simulates this netlist, and the bitstream flow
# (scripts/fpga/ice40.sh) places and routes the same netlist inside the board
# wrapper, so what is simulated is what goes on the board.
# Usage: scripts/fpga/ice40_synth.sh PKG_SV OUT_DIR [TOP]
# Writes OUT_DIR/TOP_ice40.v (netlist of SB_* cells), TOP_ice40.json,
# stat.txt (cell counts) and synth.log. TOP defaults to the accelerator's
# one top, tsr_top (it picks the core by SERIAL_CORE); it may name a
# submodule of hw/rtl, for a gate-level check of that module alone (scripts/fpga/ice40_gemm_gl.sh).
set -euo pipefail
pkg=$1; out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
top=${3:-tsr_top}
mkdir -p "$out"
srcs=("$pkg" "$root"/hw/rtl/*.sv)
# synth_ice40 -dsp, with its coarse section spelt out to leave out one pass:
# ice40_dsp (yosys 0.23) folds a register behind a multiplier into the
# SB_MAC16 and then deletes the whole register cell, also the bits that
# other multipliers drive: tsr_gemm_core's product register (one 64-bit
# register behind four multipliers for 1x2x2) became one SB_MAC16 and the
# other three products were lost (dot products wrong whenever negative).
# Without ice40_dsp the multipliers still map to SB_MAC16 (techmap
# mul2dsp/dsp_map below); their registers stay in the fabric.
# scripts/fpga/ice40_gemm_gl.sh (ctest gl_ice40_gemm) shows the bug on tsr_gemm_core
# alone: it fails with plain synth_ice40 -dsp.
# Logic is mapped with ABC9 (-abc9, timing for the UP5K: -device u): on the
# serial core it gave 196 fewer LUT4s and a UP5K placement at 14.8 MHz instead
# of 12.1 (nextpnr; icetime 14.1 instead of 11.7) against the board's 12 MHz.
# yosys calls ABC9 experimental: the gate-level tests simulate exactly this
# netlist (scripts/fpga/ice40_gltest.sh, gl_ice40_gemm).
coarse='opt_expr; opt_clean; check; opt -nodffe -nosdff; fsm; opt; wreduce; peepopt; opt_clean; share
  techmap -map +/cmp2lut.v -D LUT_WIDTH=4; opt_expr; opt_clean; memory_dff; wreduce t:$mul
  techmap -map +/mul2dsp.v -map +/ice40/dsp_map.v -D DSP_A_MAXWIDTH=16 -D DSP_B_MAXWIDTH=16 -D DSP_A_MINWIDTH=2 -D DSP_B_MINWIDTH=2 -D DSP_Y_MINWIDTH=11 -D DSP_NAME=$__MUL16X16
  select a:mul2dsp; setattr -unset mul2dsp; opt_expr -fine; wreduce; select -clear
  chtype -set $mul t:$__soft_mul; alumacc; opt; memory -nomap; opt_clean'
yosys -q -l "$out/synth.log" -p "read_verilog -sv -DSYNTHESIS ${srcs[*]}
  synth_ice40 -dsp -top $top -run begin:coarse
  $coarse
  synth_ice40 -dsp -abc9 -device u -top $top -run map_ram:
  tee -q -o $out/stat.txt stat
  write_json $out/${top}_ice40.json
  write_verilog -noattr $out/${top}_ice40.v" >/dev/null 2>"$out/yosys.stderr" || {
  tail -20 "$out/yosys.stderr" >&2; exit 1; }
grep -q "SB_" "$out/stat.txt" || { echo "ice40_synth: no SB_* cells in the netlist: synthesis went wrong" >&2; exit 1; }
