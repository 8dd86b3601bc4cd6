#!/usr/bin/env bash
# Synthesize tsr_top with yosys for a Xilinx 7-series part (synth_xilinx)
# and print the resource estimate (LUT, FF, BRAM, DSP).
# Usage: scripts/synth.sh TESSERA_BIN PRESET_OR_JSON [WORKDIR]
set -euo pipefail
cli=$1; cfg=$2
root=$(cd "$(dirname "$0")/.." && pwd)
work=${3:-$(mktemp -d)}
mkdir -p "$work"
"$cli" config emit-sv "$cfg" -o "$work/tsr_pkg.sv"
srcs=("$work/tsr_pkg.sv" "$root"/hw/rtl/*.sv)
# Warnings (e.g. BRAM port resizing) go to the log only.
yosys -q -l "$work/synth.log" -p "read_verilog -sv -DSYNTHESIS ${srcs[*]}; synth_xilinx -top tsr_top -flatten; tee -o $work/stat.txt stat" >/dev/null 2>"$work/yosys.stderr" || {
  tail -20 "$work/yosys.stderr"; exit 1; }
# Summarise the cell counts by resource class (yosys prints "CELL COUNT").
awk -v cfg="$cfg" '
  NF == 2 && $2 ~ /^[0-9]+$/ { c=$1; n=$2;
    if (c ~ /^LUT[1-6]$/) lut+=n; else if (c ~ /^FD/) ff+=n;
    else if (c ~ /^RAMB36/) b36+=n; else if (c ~ /^RAMB18/) b18+=n;
    else if (c ~ /^DSP48/) dsp+=n; else if (c ~ /^RAM(32|64|128|256)/) lutram+=n; }
  END { printf "synth_xilinx %s: LUT %d  FF %d  BRAM36 %d  BRAM18 %d  DSP48 %d  LUTRAM %d\n", cfg, lut, ff, b36, b18, dsp, lutram;
        if (lut == 0 || ff == 0) { print "synth: no LUTs or flip-flops in the netlist: synthesis went wrong"; exit 1 } }
' "$work/stat.txt"
