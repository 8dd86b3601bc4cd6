#!/usr/bin/env bash
# The digits CNN end to end (ctest onnx_digits): train + quantize it
# (train_digits.py, seeded), run both ONNX forms with `tessera infer` on the
# held-out images and compare with ONNX Runtime (npm onnxruntime-node, the
# independent reference) tensor by tensor: every quantized tensor within
# 1 LSB of ORT on at most 1e-4 of its elements (ORT rounds acc * scale in
# float32, the device in 31-bit fixed point), the quantized logits and the
# predictions identical, accuracy >= 95%.
# usage: test_digits.sh TESSERA_BIN SOURCE_DIR WORK_DIR [BACKEND [IMAGES]]
# (IMAGES: only the first IMAGES held-out images, for the slower RTL backend)
# ORT is installed once into $TSR_ORT_DIR (default ~/.cache/tessera/ort).
set -euo pipefail
TSR=$(realpath "$1") SRC=$(realpath "$2") WORK=$3 BACKEND=${4:-fsim} IMAGES=${5:-0}
PY=/usr/bin/python3
mkdir -p "$WORK"
cd "$WORK"
t0=$(date +%s.%N)
"$PY" "$SRC/scripts/onnx/train_digits.py" . 2>&1 | grep -v Warning | grep -v "_C._jit" || true
echo "train + quantize + export: $(echo "$(date +%s.%N) - $t0" | bc) s"
if [ "$IMAGES" -gt 0 ]; then
  "$PY" -c "import numpy as np; [np.save(f, np.load(f)[:$IMAGES]) for f in ('test_x.npy', 'test_y.npy')]"
fi
ORT_DIR=${TSR_ORT_DIR:-$HOME/.cache/tessera/ort}
if [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  mkdir -p "$ORT_DIR"
  (cd "$ORT_DIR" && npm install onnxruntime-node@1.20.1 --ignore-scripts --no-audit --no-fund >/dev/null)
fi
# intermediate quantized tensors as extra graph outputs, for ORT
"$PY" - <<'PY'
import onnx, onnx.helper as h
from onnx import TensorProto
for src, names in [("digits_qlinear.onnx", ["conv1.y", "conv2.y", "fc.y"]),
                   ("digits_qdq.onnx", ["/conv1/QuantizeLinear_output_0", "/conv2/QuantizeLinear_output_0",
                                        "/pool/QuantizeLinear_output_0", "/fc/QuantizeLinear_output_0"])]:
    m = onnx.load(src)
    for n in names:
        m.graph.output.append(h.make_tensor_value_info(n, TensorProto.UINT8, None))
    onnx.save(m, "ort_" + src)
PY
QL=(conv1.y conv2.y fc.y)
QD=(/conv1/QuantizeLinear_output_0 /conv2/QuantizeLinear_output_0 /pool/QuantizeLinear_output_0 /fc/QuantizeLinear_output_0)
for form in qlinear qdq; do
  if [ $form = qlinear ]; then names=("${QL[@]}"); else names=("${QD[@]}"); fi
  targs=() oargs=()
  i=0
  for n in "${names[@]}"; do targs+=(--tensor "$n=tsr_${form}_$i.npy"); oargs+=("$n" "ort_${form}_$i.npy"); i=$((i+1)); done
  "$TSR" infer digits_$form.onnx -i test_x.npy -o tsr_$form.npy --labels test_y.npy --backend "$BACKEND" "${targs[@]}" \
    | tee infer_$form.txt | grep -E "^placement|^accuracy|^  |segment"
  NODE_PATH="$ORT_DIR/node_modules" node "$SRC/scripts/onnx/ort_run.js" ort_digits_$form.onnx test_x.npy \
    ort_$form.npy "${oargs[@]}"
done
"$PY" - "${QL[@]}" -- "${QD[@]}" <<'PY'
import sys
import numpy as np
args = sys.argv[1:]
k = args.index("--")
forms = {"qlinear": args[:k], "qdq": args[k + 1:]}
y = np.load("test_y.npy")
f_acc, t_acc = open("float.txt").read().split()
print(f"float accuracy {float(f_acc)*100:.2f}%, torch int8 (qnnpack) {float(t_acc)*100:.2f}% on {len(y)} held-out images")
bad = 0
for form, names in forms.items():
    for i, n in enumerate(names):
        t = np.load(f"tsr_{form}_{i}.npy").astype(np.int64)
        o = np.load(f"ort_{form}_{i}.npy").astype(np.int64)
        d = np.abs(t - o)
        frac = (d != 0).mean()
        last = i == len(names) - 1
        ok = t.shape == o.shape and d.max() <= 1 and frac <= 1e-4 and (not last or d.max() == 0)
        bad += not ok
        print(f"{form:8s} {n:34s} {str(t.shape):18s} max |tessera - ort| {d.max()} LSB, "
              f"{(d != 0).sum()} of {d.size} differ {'ok' if ok else 'FAIL'}")
    pt, po = np.load(f"tsr_{form}.npy"), np.load(f"ort_{form}.npy")
    acc_t, acc_o = (pt.argmax(1) == y).mean(), (po.argmax(1) == y).mean()
    agree = (pt.argmax(1) == po.argmax(1)).mean()
    print(f"{form:8s} accuracy tessera {acc_t*100:.2f}%, onnxruntime {acc_o*100:.2f}%, predictions agree "
          f"{agree*100:.2f}%, output max |diff| {np.abs(pt - po).max():.3g}")
    bad += agree != 1.0 or acc_t < 0.95
sys.exit(1 if bad else 0)
PY
