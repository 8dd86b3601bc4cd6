#!/usr/bin/env bash
# `tessera infer MODEL --devices K` (issue 26; ctest onnx_infer_devices): the
# C-built small ResNet-18 (tsr_netdump, seeded) as a QDQ ONNX model
# (resnet18_onnx.py), three images pipelined over 3 fsim devices, with and
# without shared boundaries: every model output equal to `tessera infer` on
# one device, image by image, byte for byte. The digits CNN, whose host
# operator sits between its two device segments (a host node of the
# pipeline), on 2 devices: its outputs equal one device's image by image, with
# the host node merged into a device's stage and, with --host-scale 3000, as
# a host stage that is the bottleneck (still run, reported); with
# --skip-host the outputs differ (exit 1, no OUTPUT). Refusals: a device
# failing mid-pipeline, --devices 65, a model with nothing for the device
# (one line each); a failing run writes no OUTPUT.
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
# the digits CNN: a host operator between its device segments, a host node of the pipeline
"$PY" - "$(dirname "$DIGITS")/test_x.npy" <<'PYEOF'
import sys, numpy as np
x = np.load(sys.argv[1])[:5]
np.save("d5.npy", x)
for i in range(5):
    np.save(f"d{i}.npy", x[i:i + 1])
PYEOF
for i in 0 1 2 3 4; do
  "$TSR" infer "$DIGITS" -i "d$i.npy" -o "done$i.npy" --quiet
done
"$PY" -c "import numpy as np; y = np.concatenate([np.load(f'done{i}.npy') for i in range(5)]); assert len({r.tobytes() for r in y}) == 5; np.save('done.npy', y)"
dcheck() { # $1: output file, $2: what
  if "$PY" -c "import numpy as np, sys; a, b = np.load('$1'), np.load('done.npy'); sys.exit(0 if a.dtype == b.dtype and np.array_equal(a, b) else 1)"; then
    echo "ok: $2: the 5 outputs equal one device's, image by image"
  else
    echo "FAIL: $2: outputs differ from one device's"; fail=1
  fi
}
"$TSR" infer "$DIGITS" -i d5.npy --devices 2 -o dpipe.npy > out3.txt
grep -q "outputs equal to the single-device run: yes (5 of 5)" out3.txt || { echo "FAIL: digits: no equality line"; cat out3.txt; fail=1; }
grep -q "^host nodes: 1 " out3.txt && grep -q "on the device's host thread: 1 host node" out3.txt ||
  { echo "FAIL: digits: the host node is not in a device's stage"; cat out3.txt; fail=1; }
grep -E "^host node|^plan \(|^  stage" out3.txt
dcheck dpipe.npy "digits, 2 devices (host node merged into a device's stage)"
"$TSR" infer "$DIGITS" -i d5.npy --devices 2 --host-scale 3000 -o dhost.npy > out6.txt
grep -qE "^  stage 1  host 0 " out6.txt && grep -q "host stage, its own thread: 1 host node" out6.txt ||
  { echo "FAIL: digits --host-scale 3000: no host stage"; cat out6.txt; fail=1; }
grep -E "^  stage|^plan \(" out6.txt
dcheck dhost.npy "digits, 2 devices, a host stage (--host-scale 3000)"
grep -q "the bottleneck is a host stage (predicted)" out6.txt || { echo "FAIL: host bottleneck not reported"; cat out6.txt; fail=1; }
set +e
"$TSR" infer "$DIGITS" -i d5.npy --devices 2 --skip-host -o bad.npy > out7.txt 2>&1
rc=$?
set -e
[ "$rc" = 1 ] && grep -q "outputs equal to the single-device run: NO" out7.txt && [ ! -e bad.npy ] ||
  { echo "FAIL: --skip-host was not caught (exit $rc)"; cat out7.txt; fail=1; }
echo "ok: the pipeline skipping its host node is caught (exit 1, no OUTPUT)"
# refusals: one line naming the culprit, no OUTPUT written
if "$TSR" infer resnet18_qdq.onnx -i x3.npy --devices 3 --fail-device 1 -o bad.npy > out4.txt 2>&1; then echo "FAIL: failing device accepted"; fail=1; fi
grep -q "pipeline stopped: device 1" out4.txt || { echo "FAIL: failure message"; cat out4.txt; fail=1; }
[ ! -e bad.npy ] || { echo "FAIL: bad.npy written after a failure"; fail=1; }
set +e
"$TSR" infer resnet18_qdq.onnx -i x3.npy --devices 65 > out5.txt 2>&1
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "at most 64 devices" out5.txt || { echo "FAIL: --devices 65 (exit $rc)"; cat out5.txt; fail=1; }
# a model with nothing for the device: a float Relu
"$PY" - <<'PYEOF'
import numpy as np
from onnx import TensorProto, helper, save
g = helper.make_graph([helper.make_node("Relu", ["X"], ["Y"], "relu")], "hostonly",
                      [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])],
                      [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4])])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "hostonly.onnx")
np.save("h1.npy", np.ones((1, 4), np.float32))
PYEOF
set +e
"$TSR" infer hostonly.onnx -i h1.npy --devices 2 -o bad.npy > out8.txt 2>&1
rc=$?
set -e
[ "$rc" != 0 ] && [ "$(wc -l < out8.txt)" = 1 ] && grep -q "no device operator" out8.txt && [ ! -e bad.npy ] ||
  { echo "FAIL: a model with nothing for the device (exit $rc)"; cat out8.txt; fail=1; }
echo "refusals checked"
[ "$fail" = 0 ] && echo "1 passed, 0 failed" || { echo "0 passed, 1 failed"; exit 1; }
