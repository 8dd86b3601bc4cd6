#!/usr/bin/env bash
# Gate-level check of the MAC array alone: tsr_gemm_core synthesized by the
# open flow's own script (scripts/fpga/ice40_synth.sh, TOP tsr_gemm_core)
# against its RTL, under Icarus with yosys's iCE40 cell models
# (tests/fpga/tb_gemm_gl.sv). Seconds, where the tsr_top netlist takes
# many minutes; it fails on yosys 0.23's ice40_dsp pass (see ice40_synth.sh).
# Usage: scripts/fpga/ice40_gemm_gl.sh TESSERA_BIN [PRESET_OR_JSON] [SEED] [WORKDIR]
set -euo pipefail
cli=$1; cfg=${2:-ice40}; seed=${3:-1}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${4:-$(mktemp -d)}
mkdir -p "$work"
"$cli" config emit-sv "$cfg" -o "$work/tsr_pkg.sv"
"$root/scripts/fpga/ice40_synth.sh" "$work/tsr_pkg.sv" "$work/gl" tsr_gemm_core
# The netlist module beside the RTL module of the same name.
sed 's/^module tsr_gemm_core(/module tsr_gemm_core_gl(/' "$work/gl/tsr_gemm_core_ice40.v" >"$work/gemm_gl.v"
grep -q '^module tsr_gemm_core_gl(' "$work/gemm_gl.v" || { echo "ice40_gemm_gl: no module tsr_gemm_core in the netlist" >&2; exit 1; }
grep '^ *SB_' "$work/gl/stat.txt" || true
iverilog -g2012 -I"$root/hw/rtl" -DNO_ICE40_DEFAULT_ASSIGNMENTS -o "$work/tb.vvp" -s tb_gemm_gl \
  "$work/tsr_pkg.sv" "$root/hw/rtl/tsr_gemm_core.sv" "$root/hw/rtl/tsr_gemm_dot.sv" "$work/gemm_gl.v" "$root/tests/fpga/tb_gemm_gl.sv" \
  /usr/share/yosys/ice40/cells_sim.v >"$work/iverilog.log" 2>&1 || { cat "$work/iverilog.log"; exit 1; }
out=$(vvp -n "$work/tb.vvp" +seed="$seed" 2>&1) || { echo "$out"; exit 1; }
echo "$out" | tail -5
echo "$out" | grep -q '^PASS' || { echo "tb_gemm_gl did not print PASS" >&2; exit 1; }
