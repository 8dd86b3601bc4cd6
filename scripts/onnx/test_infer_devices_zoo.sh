#!/usr/bin/env bash
# `tessera infer MODEL --devices K` on a zoo model whose host operators sit
# between its device segments (issue 26; ctest onnx_infer_devices_zoo):
# torchvision's MobileNetV3-Small at 32x32, u8 QDQ (scripts/zoo: build.py,
# qdq.py, 8 calibration inputs), on the default config without activation
# tables (configs/default.json + "ACT_LUT": 0, written here as nolut.json: its
# Hardswish/Hardsigmoid and the residual Adds run on the host, 33 host nodes
# between 38 device segments). Three images on 2 and 4 devices (systemc when
# built, else fsim): every output equal to `tessera infer` on one device,
# image by image, byte for byte (the images' outputs differ, so a reordered
# stream fails); the throughput against one device printed; --skip-host
# (the pipeline skips its host nodes) must fail with exit 1 and write no
# OUTPUT. Then the default config itself (ACT_LUT 2: one device segment) on
# 2 devices.
# usage: test_infer_devices_zoo.sh TESSERA_BIN SOURCE_DIR WORK_DIR [ZOO_S32_DIR]
#   ZOO_S32_DIR: where onnx_zoo_small left mobilenet_v3_small_u8.onnx (used when
#   present; else built here, ~30 s). Exit 77 (skipped) when the model cannot be
#   built (no ONNX Runtime for the calibration).
set -euo pipefail
TSR=$(realpath "$1") SRC=$(realpath "$2") WORK=$3 ZOO=${4:-}
PY=/usr/bin/python3
mkdir -p "$WORK"
cd "$WORK"
rm -f ./x*.npy ./one*.npy ./pipe*.npy ./bad.npy out*.txt
M=mobilenet_v3_small_u8.onnx
if [ -n "$ZOO" ] && [ -s "$ZOO/$M" ]; then
  cp "$ZOO/$M" "$M"
elif [ ! -s "$M" ]; then
  if ! "$PY" "$SRC/scripts/zoo/build.py" --models mobilenet_v3_small --size 32 --out zoo > build.txt 2>&1 ||
     ! "$PY" "$SRC/scripts/zoo/qdq.py" zoo/mobilenet_v3_small.onnx "$M.tmp" --activations u8 --calib 8 --size 32 \
       >> build.txt 2>&1; then
    echo "skipped: the zoo model could not be built:"; tail -3 build.txt; exit 77
  fi
  mv "$M.tmp" "$M"
fi
"$PY" - <<'PYEOF'
import numpy as np
r = np.random.RandomState(26)
x = r.rand(3, 3, 32, 32).astype(np.float32)
np.save("x3.npy", x)
for i in range(3):
    np.save(f"x{i}.npy", x[i:i + 1])
PYEOF
"$PY" -c "import json; c = json.load(open('$SRC/configs/default.json')); c['ACT_LUT'] = 0; json.dump(c, open('nolut.json', 'w'))"
for i in 0 1 2; do
  "$TSR" infer "$M" -i "x$i.npy" --config nolut.json -o "one$i.npy" --quiet
done
"$PY" -c "import numpy as np; y = np.concatenate([np.load(f'one{i}.npy') for i in range(3)]); assert len({r.tobytes() for r in y}) == 3; np.save('one.npy', y)"
BACK=fsim
if "$TSR" infer "$M" -i x0.npy --config nolut.json --backend systemc --quiet -o probe.npy > /dev/null 2>&1; then BACK=systemc; fi
fail=0
for K in 2 4; do
  "$TSR" infer "$M" -i x3.npy --devices "$K" --config nolut.json --backend "$BACK" -o "pipe$K.npy" > "out$K.txt"
  grep -q "^host nodes: " "out$K.txt" || { echo "FAIL: $K devices: no host nodes"; fail=1; }
  grep -q "outputs equal to the single-device run: yes (3 of 3)" "out$K.txt" ||
    { echo "FAIL: $K devices: no equality line"; cat "out$K.txt"; fail=1; }
  grep -E "^model:|^host nodes:|^plan \(|^  throughput|^one device:|^slowest stage|bottleneck" "out$K.txt"
  if "$PY" -c "import numpy as np, sys; a, b = np.load('pipe$K.npy'), np.load('one.npy'); sys.exit(0 if a.dtype == b.dtype and np.array_equal(a, b) else 1)"; then
    echo "ok: $K devices ($BACK): the 3 outputs equal one device's, image by image"
  else
    echo "FAIL: $K devices: outputs differ from one device's"; fail=1
  fi
done
# with activation tables (the default config: ACT_LUT 2) the model is one device segment whose
# HardSigmoid/HardSwish/Mul/GlobalAveragePool nodes the planner must cost (it refused them: "no
# operator to plan")
for i in 0 1 2; do "$TSR" infer "$M" -i "x$i.npy" --config default -o "lone$i.npy" --quiet; done
if "$TSR" infer "$M" -i x3.npy --devices 2 --config default --backend "$BACK" -o plut.npy > outlut.txt 2>&1 &&
   grep -q "outputs equal to the single-device run: yes (3 of 3)" outlut.txt &&
   "$PY" -c "import numpy as np, sys; a = np.load('plut.npy'); b = np.concatenate([np.load(f'lone{i}.npy') for i in range(3)]); sys.exit(0 if np.array_equal(a, b) else 1)"; then
  echo "ok: ACT_LUT 2, 2 devices ($BACK): $(grep -E '^one device:' outlut.txt)"
else
  echo "FAIL: ACT_LUT 2 on 2 devices:"; tail -3 outlut.txt; fail=1
fi
set +e
"$TSR" infer "$M" -i x3.npy --devices 2 --config nolut.json --skip-host -o bad.npy > out9.txt 2>&1
rc=$?
set -e
if [ "$rc" = 1 ] && grep -q "outputs equal to the single-device run: NO" out9.txt && [ ! -e bad.npy ]; then
  echo "ok: the pipeline skipping its host nodes is caught (exit 1, no OUTPUT)"
else
  echo "FAIL: --skip-host was not caught (exit $rc)"; tail -3 out9.txt; fail=1
fi
[ "$fail" = 0 ] && echo "1 passed, 0 failed" || { echo "0 passed, 1 failed"; exit 1; }
