#!/usr/bin/env bash
# `tessera infer MODEL --devices K` (issue 26; ctest onnx_infer_devices): the
# C-built small ResNet-18 (tsr_netdump, seeded) as a QDQ ONNX model
# (resnet18_onnx.py), three images pipelined over 3 fsim devices, with and
# without shared boundaries: every model output equal to `tessera infer` on
# one device, image by image, byte for byte. Refusals: a model with a host
# operator between its device segments (the digits CNN, naming it), a device
# failing mid-pipeline, --devices 65; a failing run writes no OUTPUT.
# usage: test_infer_devices.sh TESSERA_BIN NETDUMP_BIN SOURCE_DIR WORK_DIR DIGITS_ONNX
set -euo pipefail
TSR=$(realpath "$1") DUMP=$(realpath "$2") SRC=$(realpath "$3") WORK=$4 DIGITS=$(realpath "$5")
PY=/usr/bin/python3
mkdir -p "$WORK"
cd "$WORK"
rm -f ./*.npy ./*.onnx out*.txt
"$DUMP" . --seed 7 --backend fsim --small 32,16,10 > /dev/null
"$PY" "$SRC/scripts/onnx/resnet18_onnx.py" . > /dev/null
# three images: the dump's input and two others of its type and shape
"$PY" - <<'PYEOF'
import numpy as np
x = np.load("input0.npy")
r = np.random.RandomState(26)
imgs = [x] + [r.randint(np.iinfo(x.dtype).min, np.iinfo(x.dtype).max + 1, size=x.shape).astype(x.dtype)
              if x.dtype.kind in "ui" else r.rand(*x.shape).astype(x.dtype) for _ in range(2)]
np.save("x3.npy", np.concatenate(imgs))
for i, im in enumerate(imgs):
    np.save(f"x{i}.npy", im)
PYEOF
for i in 0 1 2; do
  "$TSR" infer resnet18_qdq.onnx -i "x$i.npy" -o "one$i.npy" --quiet
done
"$PY" -c "import numpy as np; np.save('one.npy', np.concatenate([np.load(f'one{i}.npy') for i in range(3)]))"
fail=0
check() { # $1: output file, $2: what
  if "$PY" -c "import numpy as np, sys; a, b = np.load('$1'), np.load('one.npy'); sys.exit(0 if a.dtype == b.dtype and np.array_equal(a, b) else 1)"; then
    echo "ok: $2: the 3 outputs equal one device's"
  else
    echo "FAIL: $2: outputs differ from one device's"; fail=1
  fi
}
"$TSR" infer resnet18_qdq.onnx -i x3.npy --devices 3 -o pipe.npy > out1.txt
grep -q "outputs equal to the single-device run: yes (3 of 3)" out1.txt || { echo "FAIL: no equality line"; cat out1.txt; fail=1; }
grep -E "^model:|^plan \(" out1.txt
check pipe.npy "3 devices"
"$TSR" infer resnet18_qdq.onnx -i x3.npy --devices 4 --share 4 -o share.npy > out2.txt
grep -E "^plan \(|^shared planner" out2.txt
check share.npy "4 devices, --share 4"
# refusals: one line naming the culprit, no OUTPUT written
if "$TSR" infer "$DIGITS" -i x3.npy --devices 2 -o bad.npy > out3.txt 2>&1; then echo "FAIL: digits accepted"; fail=1; fi
grep -q 'host operator "/fc/Gemm" (concat) runs between device segments 0 and 1' out3.txt || { echo "FAIL: digits message"; cat out3.txt; fail=1; }
[ ! -e bad.npy ] || { echo "FAIL: bad.npy written"; fail=1; }
if "$TSR" infer resnet18_qdq.onnx -i x3.npy --devices 3 --fail-device 1 -o bad.npy > out4.txt 2>&1; then echo "FAIL: failing device accepted"; fail=1; fi
grep -q "pipeline stopped: device 1" out4.txt || { echo "FAIL: failure message"; cat out4.txt; fail=1; }
[ ! -e bad.npy ] || { echo "FAIL: bad.npy written after a failure"; fail=1; }
set +e
"$TSR" infer resnet18_qdq.onnx -i x3.npy --devices 65 > out5.txt 2>&1
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "at most 64 devices" out5.txt || { echo "FAIL: --devices 65 (exit $rc)"; cat out5.txt; fail=1; }
echo "refusals checked"
[ "$fail" = 0 ] && echo "1 passed, 0 failed" || { echo "0 passed, 1 failed"; exit 1; }
