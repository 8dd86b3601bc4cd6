#!/usr/bin/env bash
# A heterogeneous placement that beats every homogeneous one with the same total MACs (issue 26;
# ctest hetero_mix). The small version: torchvision's MobileNetV2 at 112x112, u8 QDQ (scripts/zoo:
# build.py, qdq.py, 8 calibration inputs), on the two device kinds of tests/hetero/ (p16: a 16x16 array,
# 128-bit bus; p8: an 8x8 array, 32-bit bus, a quarter of p16's buffers - bus and buffers in proportion
# to the MACs, so every set with the same total MACs has the same total bandwidth and buffer bytes).
#   1. JIT costs (fsim): at 1024 MACs per cycle the best mixed set's planned period is below every
#      homogeneous set's (4 x p16, 16 x p8), and every output equals the single-device run;
#   2. the same on systemc with calibrated costs, periods measured (when the systemc backend is built);
#   3. the check can fail: with two names for the same config the "mixed" sets only tie (exit 1).
# usage: test_hetero.sh TESSERA_BIN SOURCE_DIR WORK_DIR
#   Exit 77 (skipped) when the model cannot be built (no torch or no ONNX Runtime for the calibration).
set -euo pipefail
TSR=$(realpath "$1") SRC=$(realpath "$2") WORK=$3
PY=/usr/bin/python3
CMP="$SRC/scripts/hetero/compare.py"
mkdir -p "$WORK"
cd "$WORK"
M=mobilenet_v2_112_u8.onnx
if [ ! -s "$M" ]; then
  if ! "$PY" "$SRC/scripts/zoo/build.py" --models mobilenet_v2 --size 112 --out zoo > build.txt 2>&1 ||
     ! "$PY" "$SRC/scripts/zoo/qdq.py" zoo/mobilenet_v2.onnx "$M.tmp" --activations u8 --calib 8 --size 112 \
       >> build.txt 2>&1; then
    echo "skipped: the zoo model could not be built:"; tail -3 build.txt; exit 77
  fi
  mv "$M.tmp" "$M"
fi
"$PY" -c "import sys; sys.path.insert(0, '$SRC/scripts/zoo'); import common, numpy as np; np.save('x1.npy', common.images(1, 112, 2000))"
K="$SRC/tests/hetero/p16.json,$SRC/tests/hetero/p8.json"
fail=0
"$PY" "$CMP" --tessera "$TSR" --model "$M" --images x1.npy --kinds "$K" --total 1024 --backend fsim --check \
  > jit.txt 2> jit.err || { echo "FAIL: JIT costs: the mixed set does not win"; fail=1; }
cat jit.txt; grep -v "^  ran" jit.err || true
if "$TSR" infer "$M" -i x1.npy --backend systemc --quiet > /dev/null 2>&1; then
  "$PY" "$CMP" --tessera "$TSR" --model "$M" --images x1.npy --kinds "$K" --total 1024 --check \
    > sc.txt 2> sc.err || { echo "FAIL: systemc, calibrated: the mixed set does not win"; fail=1; }
  cat sc.txt; grep -v "^  ran" sc.err || true
else
  echo "(no systemc backend: the measured comparison skipped)"
fi
# The check must be able to fail: p16 under a second name makes "mixed" sets of one config.
cp "$SRC/tests/hetero/p16.json" p16_again.json
set +e
"$PY" "$CMP" --tessera "$TSR" --model "$M" --images x1.npy --kinds "$SRC/tests/hetero/p16.json,p16_again.json" \
  --total 512 --backend fsim --check > same.txt 2> same.err
rc=$?
set -e
if [ "$rc" -ne 1 ] || ! grep -q "does not beat every homogeneous one" same.err; then
  echo "FAIL: one config under two names passed the check (exit $rc)"; cat same.txt same.err; fail=1
else
  echo "ok: one config under two names: the check fails (the mixed sets tie)"
fi
exit $fail
