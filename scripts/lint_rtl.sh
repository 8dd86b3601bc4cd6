#!/usr/bin/env bash
# Lint the whole accelerator for one config: Verilator -Wall (waivers only
# in hw/rtl/lint_waivers.vlt), plus yosys and Icarus elaboration so the RTL
# stays in the subset all three accept.
# Usage: scripts/lint_rtl.sh TESSERA_BIN PRESET_OR_JSON [WORKDIR]
set -euo pipefail
cli=$1; cfg=$2
root=$(cd "$(dirname "$0")/.." && pwd)
work=${3:-$(mktemp -d)}
mkdir -p "$work"
"$cli" config emit-sv "$cfg" -o "$work/tsr_pkg.sv"
srcs=("$work/tsr_pkg.sv" "$root"/hw/rtl/*.sv)
top=tsr_top  # the one top: it picks the core by SERIAL_CORE
verilator --lint-only -Wall -I"$root/hw/rtl" "$root/hw/rtl/lint_waivers.vlt" "${srcs[@]}" --top-module "$top"
yosys -q -p "read_verilog -sv ${srcs[*]}; hierarchy -check -top $top; proc" > "$work/yosys.log"
iverilog -g2012 -I"$root/hw/rtl" -o "$work/top.vvp" -s "$top" "${srcs[@]}"
echo "lint: $top clean for $cfg (verilator -Wall, yosys, iverilog)"
