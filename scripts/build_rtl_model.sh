#!/usr/bin/env bash
# Build the Verilated tsr_top for one config into a shared library that the
# RTL backend dlopen()s. Called automatically by sim/tsr_rtl.c on a cache
# miss; safe to run by hand.
# Usage: build_rtl_model.sh OUT_DIR PKG_SV BUS_BYTES TRACE(0|1) THREADS(1..) [TIMELINE(0|1)]
# TIMELINE=1 makes the stage signals a --timeline run samples public
# (sim/rtl/tsr_timeline.vlt); a separate model, so normal runs keep the
# fully optimised one.
set -euo pipefail
out=$1; pkg=$2; bus=$3; trace=$4; threads=$5; timeline=${6:-0}
root=$(cd "$(dirname "$0")/.." && pwd)
VI=/usr/share/verilator/include
mkdir -p "$out"
obj="$out/obj"
rm -rf "$obj"
vflags=(--cc -O3 --Mdir "$obj" --top-module tsr_top -CFLAGS -fPIC -MAKEFLAGS "OPT_FAST=-O3"
        -Wno-fatal --x-assign 0 --x-initial 0)
cflags=(-fPIC -O2 -std=c++17 -DTSR_BUS_BYTES="$bus" -I"$obj" -I"$VI" -I"$VI/vltstd" -I"$root/sim/rtl")
extra=()
if [ "$trace" = 1 ]; then
  vflags+=(--trace-fst); cflags+=(-DTSR_TRACE); extra+=("$VI/verilated_fst_c.cpp")
fi
if [ "$threads" -gt 1 ]; then vflags+=(--threads "$threads"); fi
vlt=("$root/hw/rtl/lint_waivers.vlt")
if [ "$timeline" = 1 ]; then vlt+=("$root/sim/rtl/tsr_timeline.vlt"); cflags+=(-DTSR_TIMELINE); fi
verilator "${vflags[@]}" --build "${vlt[@]}" "$pkg" "$root"/hw/rtl/*.sv >"$out/verilator.log" 2>&1 ||
  { cat "$out/verilator.log" >&2; exit 1; }
objs=()
for src in "$root/sim/rtl/tsr_vshim.cpp" "$VI/verilated.cpp" "$VI/verilated_threads.cpp" "${extra[@]}"; do
  o="$obj/$(basename "${src%.cpp}").o"
  g++ "${cflags[@]}" -c "$src" -o "$o"
  objs+=("$o")
done
libs=(-lpthread)
if [ "$trace" = 1 ]; then libs+=(-lz); fi
g++ -shared -o "$out/libtsrv.so.tmp" "${objs[@]}" "$obj/Vtsr_top__ALL.a" "${libs[@]}"
mv "$out/libtsrv.so.tmp" "$out/libtsrv.so"
rm -rf "$obj"
