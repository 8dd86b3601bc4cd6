#!/usr/bin/env bash
# Gate-level proof of the iCE40 netlist: the RTL backend's model is built
# from the netlist of yosys synth_ice40 (TESSERA_RTL_NETLIST=ice40, yosys's
# iCE40 cell models, Verilator), then
#  1. COUNT random programs of the differential generator (tests/tsr_gen via
#     tsr_soak) run on fsim, on the netlist and on the in-order reference;
#     every output byte must agree (tsr_soak exits non-zero on a mismatch);
#  2. a conv2d (random int8 data, 3x3, padding 1, requantized) runs through
#     the JIT on fsim and on the netlist; the two result files must be equal
#     byte for byte.
# Usage: scripts/fpga/ice40_gltest.sh TESSERA_BIN TSR_SOAK_BIN [COUNT] [SEED] [CONFIG]
#   CONFIG default ice40 (configs/ice40.json). The first run builds the model
#   (synthesis + Verilator, minutes) into $TESSERA_CACHE; later runs reuse it.
set -euo pipefail
cli=$1; soak=$2; count=${3:-20}; seed=${4:-1}; cfg=${5:-ice40}
export TESSERA_RTL_NETLIST=ice40
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
"$soak" --backend rtl --config "$cfg" --count "$count" --seed "$seed" --quiet
t1=$(date +%s)
/usr/bin/python3 - "$work" "$seed" <<'PY'
import sys, numpy as np
work, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
np.save(f"{work}/x.npy", rng.integers(-128, 128, size=(1, 4, 6, 6), dtype=np.int8))
np.save(f"{work}/w.npy", rng.integers(-128, 128, size=(4, 4, 3, 3), dtype=np.int8))
np.save(f"{work}/b.npy", rng.integers(-2000, 2000, size=(4,), dtype=np.int32))
PY
conv=(op conv2d -c "$cfg" -x "$work/x.npy" -w "$work/w.npy" --bias "$work/b.npy" --pad 1
      --mult 1518500250 --shift -9 --quiet)
"$cli" "${conv[@]}" --backend fsim -o "$work/y_fsim.npy"
"$cli" "${conv[@]}" --backend rtl -o "$work/y_gl.npy"
t2=$(date +%s)
if ! cmp "$work/y_fsim.npy" "$work/y_gl.npy"; then
  echo "ice40 gate-level: conv2d result differs from fsim" >&2
  exit 1
fi
bytes=$(/usr/bin/python3 -c 'import numpy as np,sys; print(np.load(sys.argv[1]).size)' "$work/y_gl.npy")
echo "ice40 gate-level: conv2d [1,4,6,6] x [4,4,3,3] pad 1: $bytes output bytes equal to fsim's"
echo "ice40 gate-level: wall time: $count generator programs $((t1 - t0)) s, conv2d (fsim + netlist) $((t2 - t1)) s"
