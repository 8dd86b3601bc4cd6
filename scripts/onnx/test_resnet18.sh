#!/usr/bin/env bash
# ResNet-18 as ONNX through the importer (ctest onnx_resnet18_small; the full
# network by hand): tsr_netdump writes the C-built network (jit/tsr_netdesc.c,
# seeded) and the graph runtime's bytes of every tensor; resnet18_onnx.py
# rebuilds it as a QDQ ONNX model; `tessera infer` runs that model on the same
# input and every quantized tensor must equal the graph runtime's byte for
# byte (the importer's lowering is checked against the network it should
# produce). ONNX Runtime runs the same model (its float32 requantization, no
# metadata): the per-tensor difference is printed - each
# operator alone on the graph runtime's input bytes (its own rounding) and the
# whole network chained (differences compound from layer to layer); alone,
# at most 1 LSB is required.
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
"$PY" - "$nt" "$out" "$ort" "$SRC/scripts/onnx/ort_run.js" "$ORT_DIR" <<'PY'
import json, os, subprocess, sys
import numpy as np
import onnx.utils
nt, out, ort = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
net = json.load(open("net.json"))
names = {n["out"]: n["name"] for n in net["nodes"]}
if ort:  # each operator alone on ONNX Runtime, from the graph runtime's input bytes: its own difference
    env = dict(os.environ, NODE_PATH=f"{sys.argv[5]}/node_modules")
    for n in net["nodes"]:
        ins = [f"t{i}" for i in n["in"] if i >= 0]
        onnx.utils.extract_model("resnet18_qdq.onnx", f"node{n['out']}.onnx", ins, [f"t{n['out']}"])
        feeds = ",".join("input0.npy" if i == "t0" else f"{i}.npy" for i in ins)
        subprocess.run(["node", sys.argv[4], f"node{n['out']}.onnx", feeds, f"orn{n['out']}.npy"], env=env, check=True)
bad = 0
total = same = alone_n = alone_max = 0
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
        a = np.abs(np.load(f"orn{t}.npy").reshape(g.shape).astype(np.int64) - x.astype(np.int64))
        alone_n += (a != 0).sum()
        alone_max = max(alone_max, a.max())
        line += (f"; vs onnxruntime: alone {(a != 0).sum()} differ, max {a.max()} LSB; "
                 f"chained {(e != 0).sum()} differ, max {e.max()} LSB")
    print(line)
print(f"importer vs graph runtime: {same} of {total} bytes equal over {nt - 1} tensors "
      f"({'IDENTICAL' if same == total else 'DIFFERENT'})")
if ort:
    print(f"onnxruntime, each operator alone on the same input bytes: {alone_n} of {total} bytes differ, max "
          f"{alone_max} LSB ({'ok' if alone_max <= 1 else 'FAIL: more than 1 LSB'})")
    bad += alone_max > 1
sys.exit(1 if bad else 0)
PY
