#!/usr/bin/env bash
# Lint the iCE40 board wrapper (hw/fpga/ice40) with the accelerator inside:
# Verilator -Wall (waivers: hw/rtl/lint_waivers.vlt and
# hw/fpga/ice40/lint_waivers.vlt, the latter only for yosys's cell models),
# yosys and Icarus elaboration, like scripts/lint_rtl.sh for tsr_top.
# The SPRAM primitive comes from yosys's iCE40 cell models.
# Usage: scripts/fpga/ice40_lint.sh TESSERA_BIN PRESET_OR_JSON [WORKDIR]
set -euo pipefail
cli=$1; cfg=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${3:-$(mktemp -d)}
cells=/usr/share/yosys/ice40/cells_sim.v
mkdir -p "$work"
"$cli" config emit-sv "$cfg" -o "$work/tsr_pkg.sv"
srcs=("$work/tsr_pkg.sv" "$root"/hw/rtl/*.sv "$root"/hw/fpga/ice40/*.sv)
# Port default values in the cell models are not Verilog that Verilator or
# Icarus parse; the macro turns them off.
verilator --lint-only -Wall -I"$root/hw/rtl" -DNO_ICE40_DEFAULT_ASSIGNMENTS "$root/hw/rtl/lint_waivers.vlt" \
  "$root/hw/fpga/ice40/lint_waivers.vlt" "${srcs[@]}" -v "$cells" --top-module tsr_ice40_top
yosys -q -p "read_verilog -lib -specify +/ice40/cells_sim.v; read_verilog -sv ${srcs[*]}; hierarchy -check -top tsr_ice40_top; proc" > "$work/yosys.log"
iverilog -g2012 -I"$root/hw/rtl" -DNO_ICE40_DEFAULT_ASSIGNMENTS -o "$work/top.vvp" -s tsr_ice40_top "${srcs[@]}" "$cells" 2>"$work/iverilog.log" ||
  { cat "$work/iverilog.log" >&2; exit 1; }
echo "lint: tsr_ice40_top clean for $cfg (verilator -Wall, yosys, iverilog)"
