#!/usr/bin/env bash
# Build the Verilated tsr_top for one config into a shared library that the
# RTL backend dlopen()s. Called automatically by sim/tsr_rtl.c on a cache
# miss; safe to run by hand.
# Usage: build_rtl_model.sh OUT_DIR PKG_SV BUS_BYTES TRACE(0|1) THREADS(1..) [TIMELINE(0|1)] [KIND]
# TIMELINE=1 makes the stage signals a --timeline run samples public
# (sim/rtl/tsr_timeline.vlt); a separate model, so normal runs keep the
# fully optimised one.
# KIND rtl (default): the model is hw/rtl itself. KIND ice40: the model is
# the gate-level netlist of yosys synth_ice40 (scripts/fpga/ice40_synth.sh)
# over yosys's iCE40 cell models; the netlist stays in OUT_DIR/netlist.
set -euo pipefail
out=$1; pkg=$2; bus=$3; trace=$4; threads=$5; timeline=${6:-0}; kind=${7:-rtl}
root=$(cd "$(dirname "$0")/.." && pwd)
VI=/usr/share/verilator/include
mkdir -p "$out"
obj="$out/obj"
rm -rf "$obj"
# tsr_top is the one top; it picks the core the package asks for (SERIAL_CORE).
top=tsr_top
vflags=(--cc -O3 --Mdir "$obj" -I"$root/hw/rtl" --top-module "$top" --prefix Vtsr_top -CFLAGS -fPIC -MAKEFLAGS "OPT_FAST=-O3"
        -Wno-fatal --x-assign 0 --x-initial 0)
cflags=(-fPIC -O2 -std=c++17 -DTSR_BUS_BYTES="$bus" -I"$obj" -I"$VI" -I"$VI/vltstd" -I"$root/sim/rtl")
extra=()
if [ "$trace" = 1 ]; then
  vflags+=(--trace-fst); cflags+=(-DTSR_TRACE); extra+=("$VI/verilated_fst_c.cpp")
fi
if [ "$threads" -gt 1 ]; then vflags+=(--threads "$threads"); fi
case "$kind" in
  rtl)
    vsrcs=("$root/hw/rtl/lint_waivers.vlt")
    if [ "$timeline" = 1 ]; then vsrcs+=("$root/sim/rtl/tsr_timeline.vlt"); cflags+=(-DTSR_TIMELINE); fi
    vsrcs+=("$pkg" "$root"/hw/rtl/*.sv) ;;
  ice40)
    if [ "$timeline" = 1 ]; then
      echo "build_rtl_model: a timeline needs the RTL model's stage signals, which the iCE40 netlist does not keep" >&2; exit 1
    fi
    # A netlist already in OUT_DIR is used as it is: one synthesized by an
    # earlier build of the same sources, or a hand-edited copy (a mutation
    # check that the gate-level tests can fail).
    if [ ! -f "$out/netlist/${top}_ice40.v" ]; then
      "$root/scripts/fpga/ice40_synth.sh" "$pkg" "$out/netlist"
    fi
    # Port default values in cells_sim.v are not Verilog Verilator parses;
    # the macro turns them off (every cell input is connected in the netlist).
    # A gate-level model is ~50 MB of C++: -O1 and two jobs compile it in a
    # fraction of the -O3 time (the later OPT_FAST wins in make).
    vflags+=(-DNO_ICE40_DEFAULT_ASSIGNMENTS -Wno-lint -Wno-style -Wno-TIMESCALEMOD
             -MAKEFLAGS "OPT_FAST=-O1" -j 2)
    vsrcs=("$out/netlist/${top}_ice40.v" /usr/share/yosys/ice40/cells_sim.v) ;;
  *) echo "build_rtl_model: unknown model kind $kind (allowed rtl, ice40)" >&2; exit 1 ;;
esac
verilator "${vflags[@]}" --build "${vsrcs[@]}" >"$out/verilator.log" 2>&1 ||
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
