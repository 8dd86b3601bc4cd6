#!/usr/bin/env bash
# Synthesize tsr_top for iCE40 (yosys synth_ice40 -dsp, flattened) and write
# its gate-level netlist. The one synthesis of the accelerator core for the
# open iCE40 flow: the RTL backend's netlist model (TESSERA_RTL_NETLIST=ice40,
# scripts/build_rtl_model.sh) simulates this netlist, and the bitstream flow
# (scripts/fpga/ice40.sh) places and routes the same netlist inside the board
# wrapper, so what is simulated is what goes on the board.
# Usage: scripts/fpga/ice40_synth.sh PKG_SV OUT_DIR
# Writes OUT_DIR/tsr_top_ice40.v (netlist of SB_* cells), tsr_top_ice40.json,
# stat.txt (cell counts) and synth.log.
set -euo pipefail
pkg=$1; out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
srcs=("$pkg" "$root"/hw/rtl/*.sv)
yosys -q -l "$out/synth.log" -p "read_verilog -sv -DSYNTHESIS ${srcs[*]}
  synth_ice40 -dsp -top tsr_top
  tee -q -o $out/stat.txt stat
  write_json $out/tsr_top_ice40.json
  write_verilog -noattr $out/tsr_top_ice40.v" >/dev/null 2>"$out/yosys.stderr" || {
  tail -20 "$out/yosys.stderr" >&2; exit 1; }
grep -q "SB_LUT4" "$out/stat.txt" || { echo "ice40_synth: no SB_LUT4 cells in the netlist: synthesis went wrong" >&2; exit 1; }
