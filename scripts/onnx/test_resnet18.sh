#!/usr/bin/env bash
# ResNet-18 as ONNX through the importer (ctest onnx_resnet18_small; the full
# network by hand): tsr_netdump writes the C-built network (jit/tsr_netdesc.c,
# seeded) and the graph runtime's bytes of every tensor; resnet18_onnx.py
# rebuilds it as a QDQ ONNX model; `tessera infer` runs that model on the same
# input and every quantized tensor must equal the graph runtime's byte for
# byte (the importer's lowering is checked against the network it should
# produce). ONNX Runtime runs the same model (its float32 requantization, no
# metadata): the per-tensor difference is printed, not required to be 0.
# usage: test_resnet18.sh TESSERA_BIN NETDUMP_BIN SOURCE_DIR WORK_DIR [BACKEND [SMALL [SEED]]]
#   SMALL: HW,WIDTH,CLASSES of tsr_netdesc_resnet18_small, or "full" (ImageNet shape)
set -euo pipefail
TSR=$(realpath "$1") DUMP=$(realpath "$2") SRC=$(realpath "$3") WORK=$4 BACKEND=${5:-fsim} SMALL=${6:-full} SEED=${7:-1}
PY=/usr/bin/python3
mkdir -p "$WORK"
cd "$WORK"
rm -f t*.npy x*.npy ort*.npy
if [ "$SMALL" = full ]; then sargs=(); else sargs=(--small "$SMALL"); fi
t0=$(date +%s.%N)
"$DUMP" . --seed "$SEED" --backend "$BACKEND" "${sargs[@]}"
echo "netdesc + graph runtime ($BACKEND): $(echo "$(date +%s.%N) - $t0" | bc) s"
"$PY" "$SRC/scripts/onnx/resnet18_onnx.py" .
nt=$("$PY" -c "import json; print(len(json.load(open('net.json'))['tensors']))")
out=$("$PY" -c "import json; print(json.load(open('net.json'))['output'])")
targs=() oargs=()
for ((t = 1; t < nt; t++)); do
  targs+=(--tensor "t$t=x$t.npy")
  [ "$t" = "$out" ] || oargs+=("t$t" "ort$t.npy")
done
t0=$(date +%s.%N)
"$TSR" infer resnet18_qdq.onnx -i input0.npy -o tsr_out.npy --backend "$BACKEND" "${targs[@]}" > infer.txt
echo "tessera infer ($BACKEND): $(echo "$(date +%s.%N) - $t0" | bc) s"
grep -E "^placement|^requantization" infer.txt
ORT_DIR=${TSR_ORT_DIR:-$HOME/.cache/tessera/ort}
ort=0
if [ -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  NODE_PATH="$ORT_DIR/node_modules" node "$SRC/scripts/onnx/ort_run.js" ort_resnet18_qdq.onnx input0.npy \
    "ort$out.npy" "${oargs[@]}"
  ort=1
else
  echo "ONNX Runtime not installed in $ORT_DIR (scripts/setup.sh): no ORT comparison"
fi
"$PY" - "$nt" "$out" "$ort" <<'PY'
import json, sys
import numpy as np
nt, out, ort = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
net = json.load(open("net.json"))
names = {n["out"]: n["name"] for n in net["nodes"]}
bad = 0
total = same = 0
for t in range(1, nt):
    g = np.load(f"t{t}.npy")                       # graph runtime (netdesc)
    x = np.load(f"x{t}.npy").reshape(g.shape)      # ONNX importer
    d = (g != x)
    total += g.size
    same += g.size - d.sum()
    line = f"t{t:<3d} {names[t]:22s} {str(g.shape):20s} importer vs graph runtime: {d.sum()} of {g.size} differ"
    if d.any():
        i = np.flatnonzero(d)[0]
        line += f" (first at flat {i}: {x.flat[i]} vs {g.flat[i]})"
        bad += 1
    if ort:
        o = np.load(f"ort{t}.npy").reshape(g.shape).astype(np.int64)
        e = np.abs(o - x.astype(np.int64))
        line += f"; vs onnxruntime: {(e != 0).sum()} differ, max {e.max()} LSB"
    print(line)
print(f"importer vs graph runtime: {same} of {total} bytes equal over {nt - 1} tensors "
      f"({'IDENTICAL' if same == total else 'DIFFERENT'})")
sys.exit(1 if bad else 0)
PY
