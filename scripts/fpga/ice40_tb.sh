#!/usr/bin/env bash
# Run the iCE40 board-wrapper testbench (tests/fpga/tb_ice40_top.sv) under
# Icarus with the accelerator RTL and yosys's iCE40 cell models (SPRAM).
# Usage: scripts/fpga/ice40_tb.sh TESSERA_BIN [PRESET_OR_JSON] [WORKDIR]
# The testbench prints "PASS" at the end, or "FAIL ..." and calls $fatal.
set -euo pipefail
cli=$1; cfg=${2:-ice40}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${3:-$(mktemp -d)}
mkdir -p "$work"
"$cli" config emit-sv "$cfg" -o "$work/tsr_pkg.sv"
iverilog -g2012 -Wall -Wno-timescale -I"$root/hw/rtl" -DNO_ICE40_DEFAULT_ASSIGNMENTS -o "$work/tb.vvp" -s tb_ice40_top \
  "$work/tsr_pkg.sv" "$root"/hw/rtl/*.sv "$root"/hw/fpga/ice40/*.sv "$root/tests/fpga/tb_ice40_top.sv" \
  /usr/share/yosys/ice40/cells_sim.v >"$work/iverilog.log" 2>&1 || { cat "$work/iverilog.log"; exit 1; }
out=$(vvp -n "$work/tb.vvp" 2>&1) || { echo "$out"; exit 1; }
echo "$out" | tail -20
echo "$out" | grep -q '^PASS' || { echo "testbench tb_ice40_top did not print PASS"; exit 1; }
! echo "$out" | grep -q 'FAIL'
