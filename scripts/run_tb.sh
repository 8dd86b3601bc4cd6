#!/usr/bin/env bash
# Run one self-checking SystemVerilog testbench (tests/rtl/TB.sv) against
# hw/rtl/*.sv for a config preset, under Icarus Verilog (a second front end
# besides Verilator keeps the RTL in the portable subset).
# Usage: scripts/run_tb.sh TESSERA_BIN TB_NAME PRESET [WORKDIR]
# The testbench prints "PASS" at the end, or "FAIL ..." and calls $fatal.
set -euo pipefail
cli=$1; tb=$2; preset=$3
root=$(cd "$(dirname "$0")/.." && pwd)
work=${4:-$(mktemp -d)}
mkdir -p "$work"
"$cli" config emit-sv "$preset" -o "$work/tsr_pkg.sv"
iverilog -g2012 -Wall -Wno-timescale -I"$root/hw/rtl" -o "$work/$tb.vvp" -s "$tb" \
  "$work/tsr_pkg.sv" "$root"/hw/rtl/*.sv "$root/tests/rtl/$tb.sv"
out=$(vvp -n "$work/$tb.vvp" 2>&1) || { echo "$out"; exit 1; }
echo "$out" | tail -20
echo "$out" | grep -q '^PASS' || { echo "testbench $tb did not print PASS"; exit 1; }
! echo "$out" | grep -q 'FAIL'
