#!/usr/bin/env bash
# `tessera train` end to end (ctest train_cli), on the digits CNN the build trains
# (build/digits/digits_qdq.onnx) and the rotated digits of build/digits/shifted:
#  1. every bad input refused before training: exit 2, one line on stderr naming the
#     problem, no epoch run, the output file (a sentinel) untouched;
#  2. the demo: fc fine-tuned for 3 epochs on the device; the tuned model in
#     `tessera infer` on the rotated and the upright held-out digits: the rotated ones
#     learnt (>= 20 points over the untuned model), the upright ones kept (within 6
#     points), both within 3 points of the same fine-tuning in float with torch
#     (float_finetune.py); conv2+fc likewise for 2 epochs (>= 20 points, within 6);
#     peak device memory of the training steps at most 2x one inference's (conv2+fc, last:3);
#     fc with --update device (the SGD update on the device ALU) likewise within 3 points of float;
#  3. the tuned model in ONNX Runtime (npm onnxruntime-node, skipped without node):
#     the same predictions as `tessera infer`, quantized logits within 1 LSB.
# With MODE rtl (ctest train_cli_rtl) only: one epoch of conv2+fc on the Verilated RTL writes
# the same tuned model, byte for byte, as on fsim and as on the SystemC model, whose
# training-step cycles are within 3% of the RTL's. With MODE seeds (ctest train_cli_seeds) only: the
# device's accuracy against float in the mean over seeds 1-6 (see that section). With MODE newclass
# (ctest train_cli_newclass) only: a new class learnt on the device (see that section). With MODE resblock
# (ctest train_cli_resblock; DIGITS_DIR is make_resblock.py's directory) only: a residual block with a
# depthwise conv and a global average pool trained on the device, against float torch (see that section).
# With MODE zoo (ctest train_cli_zoo; DIGITS_DIR is make_zoo_resnet.py's directory) only: the zoo's
# ResNet-18 with a new head, its last block fine-tuned on the device against float torch (see that section).
# usage: test_train.sh TESSERA_BIN SOURCE_DIR WORK_DIR DIGITS_DIR [MODE]
set -euo pipefail
TSR=$(realpath "$1") SRC=$(realpath "$2") WORK=$3 DIG=$(realpath "$4") MODE=${5:-full}
PY=/usr/bin/python3
SH=$DIG/shifted
mkdir -p "$WORK"
cd "$WORK"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

if [ "$MODE" = rtl ]; then
  # (TSR_TRAIN_EXTRA adds options: "--weight-bits 16" checks the 16-bit forward's GEMMs the same way)
  for be in rtl systemc fsim; do
    # shellcheck disable=SC2086
    "$TSR" train "$DIG/digits_qdq.onnx" --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 1 \
      --trainable conv2,fc --lr 0.01 --backend $be ${TSR_TRAIN_EXTRA:-} -o tuned_$be.onnx --quiet |
      tee train_$be.log | grep -E "step|wrote"
  done
  cmp tuned_rtl.onnx tuned_fsim.onnx || fail "the RTL's tuned model differs from fsim's"
  cmp tuned_systemc.onnx tuned_fsim.onnx || fail "the SystemC model's tuned model differs from fsim's"
  "$PY" - <<'PY' || fail "SystemC's training-step cycles not within 3% of the RTL's"
import re, sys
c = {}
for be in ("rtl", "systemc"):
    m = re.search(r"one training step: (\d+) cycles", open(f"train_{be}.log").read())
    c[be] = int(m.group(1))
d = abs(c["systemc"] - c["rtl"]) / c["rtl"]
print(f"training step: rtl {c['rtl']} cycles, systemc {c['systemc']} ({d * 100:.2f}% apart)")
sys.exit(0 if d <= 0.03 else 1)
PY
  if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
  echo "train_cli_rtl: all passed"
  exit 0
fi

if [ "$MODE" = resblock ]; then
  # The layer kinds of a zoo model's last block (ctest train_cli_resblock; DIGITS_DIR is then
  # make_resblock.py's directory): conv1, conv2 (a residual branch), the depthwise stride-2 conv and fc of
  # the small residual model trained on the device, through the add, the ReLU6 and the global average
  # pool: the loss falls, the held-out samples of the shifted domain are learnt (>= 20 points over the
  # untuned model) within 3 points of float torch's, the backward MACs are >= 90% on the device, the tuned
  # model runs in ONNX Runtime with
  # the same predictions as `tessera infer`, and one step costs at most 3x one inference on systemc.
  acc() { "$TSR" infer "$1" -i "$DIG/test_x.npy" --labels "$DIG/test_y.npy" --quiet | sed -n 's/^accuracy: [0-9]* of [0-9]* = \([0-9.]*\)%.*/\1/p'; }
  base=$(acc "$DIG/resblock_qdq.onnx")
  "$TSR" train "$DIG/resblock_qdq.onnx" --data "$DIG/train_x.npy" --labels "$DIG/train_y.npy" --epochs 4 \
    --trainable conv1,conv2,dw,fc --lr 0.001 -o rb.onnx | tee rb.log | grep -E '^epoch|MACs|^  /' || fail "train"
  "$TSR" train "$DIG/resblock_qdq.onnx" --data "$DIG/train_x.npy" --labels "$DIG/train_y.npy" --epochs 1 \
    --trainable conv1,conv2,dw,fc --lr 0.001 --backend systemc -o rb_sc.onnx --quiet | tee rb_sc.log \
    | grep -E 'training step' || fail "train on systemc"
  tuned=$(acc rb.onnx)
  # the float reference: the same fine-tuning in torch on the float model's graph (its ReLU6 and Relus,
  # which ONNX Runtime's quantizer removed) with the QDQ file's weights; the device within 3 points of
  # it (200 held-out samples, 0.5 points each). Before the trainer masked the removed ReLU6's 6, the device
  # learnt 19 points more than float (80.50% vs 61.50%): its gradient passed where the float model's is 0
  "$PY" "$SRC/scripts/train/float_finetune.py" "$DIG/resblock_qdq.onnx" --float-model "$DIG/resblock_fp32.onnx" \
    --data "$DIG/train_x.npy" --labels "$DIG/train_y.npy" --test "$DIG/test_x.npy" "$DIG/test_y.npy" --epochs 4 \
    --trainable conv1,conv2,dw,fc --lr 0.001 --json rb.float.json | grep after || fail "float_finetune.py"
  # --json to a FIFO (as to /dev/null): the same bytes as the regular file, and the FIFO stays one
  # (renaming the temporary file over it replaced it with a regular file, and /dev/null run as root)
  "$PY" - "$SRC/scripts/train" <<'PY' || fail "float_finetune.py --json to a FIFO"
import json, os, stat, sys, threading
sys.path.insert(0, sys.argv[1])
import float_finetune
res = json.load(open("rb.float.json"))
if os.path.lexists("rb.fifo"):
    os.unlink("rb.fifo")
os.mkfifo("rb.fifo")
got = []
t = threading.Thread(target=lambda: got.append(open("rb.fifo").read()), daemon=True)
t.start()
float_finetune.write_json("rb.fifo", res)
t.join(30)
ok = got == [open("rb.float.json").read()] and stat.S_ISFIFO(os.lstat("rb.fifo").st_mode)
print(f"float_finetune.py --json to a FIFO: {'same bytes, still a FIFO' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PY
  # --sim grad (the device's int8 dY, simulated in float): its conv and dense gradients against torch autograd's
  # on dY quantized by hand (max|g| / 127 per tensor; dX from dY * w_scale quantized again and the int8
  # weights); a bad --sim name refused in one line
  "$PY" - "$SRC/scripts/train" <<'PY' || fail "float_finetune.py --sim grad"
import sys
import torch
import torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
import float_finetune as ff
torch.manual_seed(1)
def q8(t):
    s = t.abs().max() / 127
    return torch.round(t / s) * s
ok = True
L = ff.sim_layer(torch, F, {"grad"})
for conv in (dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1), None):
    x = torch.randn(4, 3, 5, 5) if conv else torch.randn(4, 7)
    w = (torch.randn(6, 3, 3, 3) if conv else torch.randn(6, 7)).requires_grad_()
    b = torch.randn(6).requires_grad_()
    xx = x.clone().requires_grad_()
    y = L.apply(xx, w, b, conv)
    g = torch.randn_like(y) * torch.rand_like(y) ** 4  # (many small values: int8 loses them)
    y.backward(g)
    ws = w.detach().abs().reshape(6, -1).amax(1) / 127.5
    wq = torch.round(w.detach() / ws.reshape(-1, *[1] * (w.dim() - 1))).clamp(-128, 127)
    cs = ws.reshape(1, -1, *[1] * (g.dim() - 2))
    x2, w2 = x.clone().requires_grad_(), w.detach().clone().requires_grad_()
    (F.conv2d(x2, w2, None, **conv) if conv else F.linear(x2, w2)).backward(q8(g))
    x3 = x.clone().requires_grad_()
    (F.conv2d(x3, wq, None, **conv) if conv else F.linear(x3, wq)).backward(q8(g * cs))
    gb = g.sum([0, 2, 3] if conv else [0])
    for name, got, ref in (("dW", w.grad, w2.grad), ("dX", xx.grad, x3.grad), ("db", b.grad, gb)):
        err = float((got - ref).abs().max() / ref.abs().max())
        ok &= err < 1e-5
        print(f"--sim grad {'conv' if conv else 'dense'} {name}: relative error {err:.2e} against autograd")
    exact = float((w.grad - (torch.nn.grad.conv2d_weight(x, w.shape, g, **conv) if conv else g.t() @ x)).abs().max())
    ok &= exact > 0  # (the quantization is there)
sys.exit(0 if ok else 1)
PY
  "$PY" "$SRC/scripts/train/float_finetune.py" "$DIG/resblock_qdq.onnx" --data x --labels y --test a b --epochs 1 \
    --trainable fc --sim nosuch 2> sim.err && fail "--sim nosuch accepted"
  grep -q "^float_finetune: --sim 'nosuch': not one of grad," sim.err && [ "$(wc -l < sim.err)" = 1 ] \
    || fail "--sim nosuch: $(cat sim.err)"
  "$PY" - "${tuned:-0}" <<'PY' || fail "the residual model's device accuracy not within 3 points of float's"
import json, sys
t, f = float(sys.argv[1]), 100 * json.load(open("rb.float.json"))["after"]["new"]
print(f"resblock: held-out {t:.2f}% on the device, {f:.2f}% in float torch ({t - f:+.2f} points)")
sys.exit(0 if abs(t - f) <= 3 else 1)
PY
  "$PY" - "${base:-0}" "${tuned:-0}" <<'PY' || fail "the residual model's training"
import re, sys
base, tuned = map(float, sys.argv[1:3])
log = open("rb.log").read()
loss = [float(v) for v in re.findall(r"^epoch \d+/\d+: loss ([0-9.]+)", log, re.M)]
share = float(re.search(r"backward MACs: \d+ on the device, \d+ on the host \(([0-9.]+)% on the device\)", log)[1])
m = re.search(r"one training step: (\d+) cycles .* inference of the whole model on the same batch (\d+) cycles",
              open("rb_sc.log").read())
step, inf = int(m[1]), int(m[2])
print(f"resblock: loss {' -> '.join(f'{v:.4f}' for v in loss)}, held-out {base:.2f} -> {tuned:.2f}%, backward MACs "
      f"{share:.1f}% on the device, step {step} cycles vs inference {inf}: {step / inf:.2f}x (systemc)")
ok = len(loss) == 4 and loss[-1] < 0.5 * loss[0] and tuned >= base + 20 and share >= 90 and step <= 3 * inf
sys.exit(0 if ok else 1)
PY
  if ! command -v node >/dev/null; then
    echo "node not found: the ONNX Runtime comparison is skipped"
  else
    ORT_DIR=${TSR_ORT_DIR:-$HOME/.cache/tessera/ort}
    "$TSR" infer rb.onnx -i "$DIG/test_x.npy" -o tsr_rb.npy --quiet
    NODE_PATH="$ORT_DIR/node_modules" node "$SRC/scripts/onnx/ort_run.js" rb.onnx "$DIG/test_x.npy" ort_rb.npy \
      2> ort.err || { cat ort.err; fail "ONNX Runtime on the tuned residual model"; }
    "$PY" - <<'PY' || fail "ONNX Runtime's predictions differ from tessera infer's"
import numpy as np
a, b = np.load("tsr_rb.npy"), np.load("ort_rb.npy")
agree = (a.argmax(1) == b.argmax(1)).mean()
print(f"resblock tuned: predictions agree with ONNX Runtime {agree * 100:.2f}% ({len(a)} samples), logits max "
      f"|diff| {np.abs(a - b).max():.4f}")
raise SystemExit(0 if agree == 1.0 else 1)
PY
  fi
  if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
  echo "train_cli_resblock: all passed"
  exit 0
fi

if [ "$MODE" = zoo ]; then
  # A model a user brings (ctest train_cli_zoo; DIGITS_DIR is make_zoo_resnet.py's directory): the zoo's
  # torchvision ResNet-18 at 32x32 with a new 10-class head, quantized by scripts/zoo/qdq.py as ONNX
  # Runtime's quantize_static writes it, exported for one image ([1,3,32,32]). Its last basic block
  # (layer4.1: conv1, conv2, the residual Add and its Relu), the global average pool and fc fine-tuned on
  # the device on 200 upscaled digits for 2 epochs; held-out accuracy on the 360 held-out digits:
  #  - the untuned model guesses (<= 20%); tuned >= 50 points above it, within ZOO_TOL points of the same
  #    fine-tuning in float torch (float_finetune.py --float-model: the graph of the float model, whose
  #    Relus ONNX Runtime's quantizer removed, with the QDQ file's dequantized weights);
  #  - the tuned file (batch 1, as written) runs in `tessera infer` and in ONNX Runtime, with the same
  #    predictions on every held-out digit (tessera on a copy whose batch dimension is symbolic: the
  #    same graph; the file itself on its first digits gives the same bytes).
  # Fails before the trainer ran a model of a fixed batch of 1, and with the logits' range the untuned
  # model calibrated (TSR_TRAIN_EXTRA="--logits-range fixed": ~30% against float's ~80%).
  Z=$DIG ZOO_TOL=${ZOO_TOL:-3}
  "$PY" - "$Z/train_x.npy" "$Z/train_y.npy" <<'PY'
import sys
import numpy as np
np.save("x200.npy", np.load(sys.argv[1])[:200]); np.save("y200.npy", np.load(sys.argv[2])[:200])
PY
  # --update device on the file's per-channel weight scales (each of fc's 10 channels its own, as qdq.py
  # writes them): one epoch of fc on the device ALU against the host's float32 update of the same step
  # (the default: the file's scales kept, its master copy clamped), an independent implementation. The two
  # tuned fc's int8 weights agree but for the last rounding of a few (fails if a channel's multiplier is
  # another's: its weights move by the ratio of their scales).
  for u in device master; do
    "$TSR" train "$Z/resnet18_qdq.onnx" --data x200.npy --labels y200.npy --epochs 1 --trainable fc --lr 0.003 \
      --update $u -o fc_$u.onnx --quiet > fc_$u.log 2>&1 || { cat fc_$u.log; fail "fc --update $u"; }
  done
  "$PY" - "$Z/resnet18_qdq.onnx" <<'PY' || fail "--update device on per-channel scales parts from the host update"
import sys
import numpy as np
import onnx
from onnx import numpy_helper as nh
def fc_w(path):
    m = onnx.load(path)
    vals = {t.name: nh.to_array(t) for t in m.graph.initializer}
    vals.update({n.output[0]: nh.to_array(n.attribute[0].t) for n in m.graph.node if n.op_type == "Constant"})
    prod = {o: n for n in m.graph.node for o in n.output}
    gemm = [n for n in m.graph.node if n.op_type == "Gemm"][-1]
    dq = prod[gemm.input[1]]
    return vals[dq.input[0]].astype(np.int32), vals[dq.input[1]]
w0, s0 = fc_w(sys.argv[1])
wd, sd = fc_w("fc_device.onnx")
wm, sm = fc_w("fc_master.onnx")
moved, off = (wd != w0).mean(), np.abs(wd - wm)
print(f"zoo fc, 1 epoch: {len(np.unique(s0))} distinct channel scales; device moved {moved * 100:.1f}% of the "
      f"weights; device vs host update: {(off > 0).mean() * 100:.2f}% differ, max {off.max()}")
ok = np.array_equal(sd, s0) and np.array_equal(sm, s0) and len(np.unique(s0)) > 1 and moved > 0.2
sys.exit(0 if ok and off.max() <= 1 and (off > 0).mean() <= 0.01 else 1)
PY
  L=last:3 E=2 LR=0.003 # (layer4.1's conv1, conv2 and fc; the Add and the pool between them)
  # shellcheck disable=SC2086
  "$TSR" train "$Z/resnet18_qdq.onnx" --data x200.npy --labels y200.npy --epochs $E --trainable "$L" --lr $LR \
    ${TSR_TRAIN_EXTRA:-} -o zoo.onnx | tee zoo.log | grep -E "^  /|^epoch|MACs|peak|range|wrote" || fail "train"
  "$PY" "$SRC/scripts/train/float_finetune.py" "$Z/resnet18_qdq.onnx" --float-model "$Z/resnet18.onnx" \
    --data x200.npy --labels y200.npy --test "$Z/test_x.npy" "$Z/test_y.npy" --epochs $E --trainable "$L" \
    --lr $LR --json zoo.float.json | grep float || fail "float_finetune.py"
  if [ ! -f zoo.onnx ] || [ ! -f zoo.float.json ]; then echo "$fails failure(s)"; exit 1; fi
  "$PY" - "$Z/resnet18_qdq.onnx" <<'PY' || fail "the batch dimension made symbolic"
import sys
import onnx
for src, dst in ((sys.argv[1], "base_n.onnx"), ("zoo.onnx", "zoo_n.onnx")):
    m = onnx.load(src)
    for v in list(m.graph.input) + list(m.graph.output):
        d = v.type.tensor_type.shape.dim[0]
        assert d.dim_value == 1, f"{src}: batch {d}"
        d.ClearField("dim_value")
        d.dim_param = "N"
    onnx.save(m, dst)
PY
  "$PY" - "$Z/test_x.npy" "$Z/test_y.npy" <<'PY'
import sys
import numpy as np
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
np.save("x1.npy", x[:1]); np.save("x120.npy", x[:120]); np.save("y120.npy", y[:120])
PY
  acc() { "$TSR" infer "$1" -i "$2" --labels "$3" -o "$4" --quiet | sed -n 's/^accuracy: [0-9]* of [0-9]* = \([0-9.]*\)%.*/\1/p'; }
  # (the untuned model on the first 120 held-out digits: it guesses, and that is enough to see it)
  base=$(acc base_n.onnx x120.npy y120.npy base_out.npy) tuned=$(acc zoo_n.onnx "$Z/test_x.npy" "$Z/test_y.npy" zoo_out.npy)
  "$TSR" infer zoo.onnx -i x1.npy -o zoo1.npy --quiet > /dev/null || fail "tessera infer on the tuned file (batch 1)"
  "$PY" - "${base:-0}" "${tuned:-0}" "$ZOO_TOL" <<'PY' || fail "the zoo model's fine-tuning"
import json, re, sys
import numpy as np
base, tuned, tol = map(float, sys.argv[1:4])
f = 100 * json.load(open("zoo.float.json"))["after"]["new"]
log = open("zoo.log").read()
share = float(re.search(r"backward MACs: \d+ on the device, \d+ on the host \(([0-9.]+)% on the device\)", log)[1])
same1 = np.array_equal(np.load("zoo1.npy"), np.load("zoo_out.npy")[:1])
print(f"zoo resnet18 (layer4.1 + fc, 2 epochs on 200 digits): held-out {base:.2f} -> {tuned:.2f}% on the device, "
      f"float torch {f:.2f}% (device - float {tuned - f:+.2f} points, tolerance {tol}); backward MACs {share:.1f}% "
      f"on the device; the batch-1 file's output {'equals' if same1 else 'DIFFERS FROM'} the symbolic-batch copy's")
sys.exit(0 if base <= 20 and tuned >= base + 50 and abs(tuned - f) <= tol and share >= 90 and same1 else 1)
PY
  if ! command -v node >/dev/null; then
    echo "node not found: the ONNX Runtime comparison is skipped"
  else
    ORT_DIR=${TSR_ORT_DIR:-$HOME/.cache/tessera/ort}
    NODE_PATH="$ORT_DIR/node_modules" node "$SRC/scripts/onnx/ort_run.js" --batch zoo.onnx "$Z/test_x.npy" ort_zoo.npy \
      2> ort.err || { cat ort.err; fail "ONNX Runtime on the tuned zoo model"; }
    # Through the 20 frozen convs tessera's and ONNX Runtime's rounding differ by a few LSB (the untuned
    # file's logits already by up to 9 of its 0.045), so a near-tie may go either way: every prediction must
    # agree except where tessera's two largest logits are closer than the largest difference between the
    # two runtimes' logits, and those at most 1% of the digits; the logits within 8 LSB of their scale.
    "$PY" - "$SRC/scripts/zoo" <<'PY' || fail "ONNX Runtime's predictions differ from tessera infer's"
import sys
import numpy as np
import onnx
sys.path.insert(0, sys.argv[1])
import common
a, b = np.load("zoo_out.npy"), np.load("ort_zoo.npy").reshape(-1, 10)
lsb = common.output_scale(onnx.load("zoo.onnx"))  # the logits' quantization step (the tuned file's)
d = np.abs(a - b).max()
top2 = np.sort(a, 1)[:, -2:]
tie = top2[:, 1] - top2[:, 0] <= d
dis = a.argmax(1) != b.argmax(1)
print(f"zoo tuned: predictions agree with ONNX Runtime on {(~dis).sum()} of {len(a)} digits ({dis.sum()} "
      f"disagree, of them {(dis & tie).sum()} near-ties), logits max |diff| {d:.4f} = {d / lsb:.1f} LSB")
raise SystemExit(0 if not (dis & ~tie).any() and dis.sum() <= 0.01 * len(a) and d <= 8 * lsb + 1e-6 else 1)
PY
  fi
  if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
  echo "train_cli_zoo: all passed"
  exit 0
fi

if [ "$MODE" = newclass ]; then
  # A new class (ctest train_cli_newclass): the digits CNN of make_newclass.py never saw digit 9 (its
  # tenth output a reserved slot); fine-tuned on the device on 100 nines and 200 other digits, it must
  # learn the nines (>= 80% of the 36 held-out ones, from 0%), keep the other digits (within 4 points of
  # the untuned model's 97.84% on their 324 held-out images), and match float torch on the same data
  # and schedule within 2 held-out nines (5.56 points) and 3 points on the others.
  NC=$DIG/newclass
  acc() { "$TSR" infer "$1" -i "$NC/$2_x.npy" --labels "$NC/$2_y.npy" --quiet | sed -n 's/^accuracy: [0-9]* of [0-9]* = \([0-9.]*\)%.*/\1/p'; }
  base_new=$(acc "$NC/base_qdq.onnx" new) base_old=$(acc "$NC/base_qdq.onnx" old)
  echo "untuned: new class $base_new%, old classes $base_old%"
  for c in "fc 3 0.005" "conv2,fc 3 0.01"; do
    read -r L E LR <<< "$c"
    "$TSR" train "$NC/base_qdq.onnx" --data "$NC/train_x.npy" --labels "$NC/train_y.npy" --epochs "$E" \
      --trainable "$L" --lr "$LR" -o "nc_$L.onnx" | tee "nc_$L.log" | grep -E '^epoch|MACs' || fail "train $L"
    "$PY" "$SRC/scripts/train/float_finetune.py" "$NC/base_qdq.onnx" --data "$NC/train_x.npy" \
      --labels "$NC/train_y.npy" --test "$NC/new_x.npy" "$NC/new_y.npy" --old "$NC/old_x.npy" "$NC/old_y.npy" \
      --epochs "$E" --trainable "$L" --lr "$LR" --json "nc_$L.float.json" > /dev/null 2>&1 || fail "float $L"
    new=$(acc "nc_$L.onnx" new) old=$(acc "nc_$L.onnx" old)
    "$PY" - "$base_new" "$base_old" "${new:-0}" "${old:-0}" "nc_$L.float.json" "$L" <<'PY' || fail "new class, $L"
import json, sys
bn, bo, n, o = map(float, sys.argv[1:5])
f = json.load(open(sys.argv[5]))["after"]
fn, fo = 100 * f["new"], 100 * f["old"]
print(f"{sys.argv[6]}: new class {bn:.2f} -> {n:.2f}% (float {fn:.2f}), old classes {bo:.2f} -> {o:.2f}% "
      f"(float {fo:.2f})")
sys.exit(0 if bn <= 10 and n >= 80 and o >= bo - 4 and abs(n - fn) <= 5.6 and abs(o - fo) <= 3 else 1)
PY
  done
  # The backward convs' lowering under the trainer's memory budget (the inference's high-water mark):
  # the last, 12-sample batch's conv2 dW is estimated faster as the im2col GEMM, whose buffers are over
  # it; the budget takes the gathered lowering there, so the peak is the one with that lowering forced
  # (95,496 B, 0.97x inference; without the budget 169,224 B, 1.72x)
  peak() { sed -n 's/.*peak device memory: training \([0-9]*\) B.*/\1/p' "$1"; }
  TESSERA_GRAD_LOWERING=gather "$TSR" train "$NC/base_qdq.onnx" --data "$NC/train_x.npy" --labels "$NC/train_y.npy" \
    --epochs 3 --trainable conv2,fc --lr 0.01 -o nc_gather.onnx --quiet > nc_gather.log || fail "train gather"
  pb=$(peak "nc_conv2,fc.log") pg=$(peak nc_gather.log)
  echo "conv2,fc: peak device memory $pb B by the budget, $pg B with the gathered lowering forced"
  [ -n "$pb" ] && [ "$pb" = "$pg" ] || fail "conv2,fc: peak device memory ${pb:-?} B, not the gathered lowering's ${pg:-?} B"
  if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
  echo "train_cli_newclass: all passed"
  exit 0
fi

if [ "$MODE" = seeds ]; then
  # Accuracy against float over seeds (ctest train_cli_seeds): one run of 360 held-out digits moves by
  # 0.28 points per digit, and a run's difference to float scatters by up to ~1 point either way (the
  # gradients' rounding alone moves a result by up to 0.83), so the 0.5-point goal is checked on the mean
  # difference over seeds 1-6 of each case (fc, conv2+fc, last:3; new and old domain), with the gradients
  # rounded to nearest and stochastically. TSR_TRAIN_EXTRA adds options to the device runs (the
  # int8-only update, `--update int8`, fails it: 0.4-1.8 points below float on average).
  for c in "fc 3 0.005" "conv2,fc 2 0.01" "last:3 2 0.01"; do
    read -r L E LR <<< "$c"
    for s in 1 2 3 4 5 6; do
      "$PY" "$SRC/scripts/train/float_finetune.py" "$DIG/digits_qdq.onnx" --data "$SH/train_x.npy" \
        --labels "$SH/train_y.npy" --test "$SH/test_x.npy" "$SH/test_y.npy" --old "$SH/old_x.npy" "$SH/old_y.npy" \
        --epochs "$E" --trainable "$L" --lr "$LR" --seed "$s" --json "f_${L}_$s.json" > /dev/null 2>&1 ||
        fail "float_finetune.py $L seed $s"
      for r in nearest stochastic; do
        # shellcheck disable=SC2086
        "$TSR" train "$DIG/digits_qdq.onnx" --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs "$E" \
          --trainable "$L" --lr "$LR" --seed "$s" --grad-round $r ${TSR_TRAIN_EXTRA:-} -o "t_${L}_${s}_$r.onnx" \
          --quiet > /dev/null || fail "train $L seed $s $r"
        for d in test old; do
          "$TSR" infer "t_${L}_${s}_$r.onnx" -i "$SH/${d}_x.npy" --labels "$SH/${d}_y.npy" --quiet |
            sed -n "s/^accuracy: [0-9]* of [0-9]* = \([0-9.]*\)%.*/$L $s $r $d \1/p"
        done
      done
    done
  done > seeds.txt
  "$PY" - <<'PY' || fail "the device's mean accuracy over seeds not within 0.5 points of float's"
import collections, json, sys
diff = collections.defaultdict(list)
for line in open("seeds.txt"):
    L, s, r, d, a = line.split()
    f = json.load(open(f"f_{L}_{s}.json"))["after"]["new" if d == "test" else "old"]
    diff[(L, r, d)].append(float(a) - 100 * f)
ok = len(diff) == 12 and all(len(v) == 6 for v in diff.values())
for (L, r, d), v in sorted(diff.items()):
    m = sum(v) / len(v)
    ok &= abs(m) <= 0.5
    print(f"{L:9s} {r:10s} {'new' if d == 'test' else 'old'}: device - float over 6 seeds: mean {m:+.2f} points, "
          f"per seed {' '.join(f'{x:+.2f}' for x in v)}")
sys.exit(0 if ok else 1)
PY
  if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
  echo "train_cli_seeds: all passed"
  exit 0
fi

# ---------------------------------------------------------------- 1. refusals
"$PY" - "$SH" <<'PY'
import sys
import numpy as np
sh = sys.argv[1]
x, y = np.load(f"{sh}/train_x.npy"), np.load(f"{sh}/train_y.npy")
np.save("y_range.npy", np.where(np.arange(len(y)) == 5, 10, y).astype(np.int32))
np.save("y_neg.npy", np.where(np.arange(len(y)) == 5, -1, y).astype(np.int32))
np.save("y_short.npy", y[:-1])
np.save("y_float.npy", y.astype(np.float32))
np.save("x_shape.npy", np.zeros((len(y), 1, 8, 9), np.float32))
np.save("x_dtype.npy", (x * 255).astype(np.uint8))
xn = x.copy(); xn[3, 0, 2, 2] = np.nan; np.save("x_nan.npy", xn)
xi = x.copy(); xi[9, 0, 0, 0] = np.inf; np.save("x_inf.npy", xi)
np.save("x_few.npy", x[:4]); np.save("y_few.npy", y[:4])
open("garbage.onnx", "wb").write(b"not an onnx model")
import onnx
m = onnx.load(f"{sh}/../digits_qdq.onnx")  # the max pool as an average pool (its backward spreads evenly)
for n in m.graph.node:
    if n.op_type == "MaxPool":
        n.op_type = "AveragePool"
onnx.save(m, "avgpool.onnx")
from onnx import numpy_helper as nh, helper as h  # fc with per-channel weight (and bias) scales, all equal
m = onnx.load(f"{sh}/../digits_qdq.onnx")
const = {n.output[0]: n for n in m.graph.node if n.op_type == "Constant"}
prod = {o: n for n in m.graph.node for o in n.output}
gemm = next(n for n in m.graph.node if n.op_type == "Gemm")
wdq, bdq = prod[gemm.input[1]], prod[gemm.input[2]]
rows = nh.to_array(const[wdq.input[0]].attribute[0].t).shape[0]
del bdq.input[2]  # (the int32 bias's zero point 0 by default)
for dq, ks in ((wdq, (1, 2)), (bdq, (1,))):
    for k in ks:
        t = const[dq.input[k]].attribute[0].t
        a = nh.to_array(t)
        t.CopyFrom(nh.from_array(np.full(rows, a, a.dtype), dq.input[k]))
    dq.attribute.append(h.make_attribute("axis", 0))
onnx.save(m, "perchannel.onnx")
t = const[wdq.input[0]].attribute[0].t  # the same with output channel 3's int8 weights all zero ...
a = nh.to_array(t).copy()
a[3] = 0
t.CopyFrom(nh.from_array(a, t.name))
onnx.save(m, "zerochan_ok.onnx")  # (on the others' scale: it trains)
t = const[wdq.input[1]].attribute[0].t  # ... and on a placeholder scale, torch's eps
a = nh.to_array(t).copy()
a[3] = np.finfo(np.float32).eps
t.CopyFrom(nh.from_array(a, t.name))
onnx.save(m, "zerochan.onnx")
PY
cp "$DIG/digits_qdq.onnx" model.onnx
GOOD=(--data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 1 --trainable fc)
# refuse WANT ARGS...: exit 2, one line containing WANT, no training, out.onnx untouched
refuse() {
  local want=$1; shift
  printf 'sentinel\n' > out.onnx
  set +e
  "$TSR" train "$@" > r.out 2> r.err
  local rc=$?
  set -e
  if [ $rc -ne 2 ]; then fail "exit $rc (want 2) for: $*"; cat r.err; return; fi
  if [ "$(wc -l < r.err)" -ne 1 ]; then fail "not one line for: $*"; cat r.err; fi
  if ! grep -qF -- "$want" r.err; then fail "message for '$*' lacks '$want': $(cat r.err)"; fi
  if grep -q '^epoch' r.out; then fail "trained before refusing: $*"; fi
  if [ "$(cat out.onnx)" != sentinel ]; then fail "output touched by: $*"; fi
  ls out.onnx.part.* >/dev/null 2>&1 && fail "a temporary file left by: $*"
  echo "refused: $(cat r.err)"
}
refuse "label 10 of sample 5 is out of range" model.onnx --data "$SH/train_x.npy" --labels y_range.npy --epochs 1 --trainable fc -o out.onnx
refuse "label -1 of sample 5 is out of range" model.onnx --data "$SH/train_x.npy" --labels y_neg.npy --epochs 1 --trainable fc -o out.onnx
refuse "one per sample" model.onnx --data "$SH/train_x.npy" --labels y_short.npy --epochs 1 --trainable fc -o out.onnx
refuse "int32 or int64" model.onnx --data "$SH/train_x.npy" --labels y_float.npy --epochs 1 --trainable fc -o out.onnx
refuse "must be float32 [N,1,8,8]" model.onnx --data x_shape.npy --labels "$SH/train_y.npy" --epochs 1 --trainable fc -o out.onnx
refuse "must be float32 [N,1,8,8]" model.onnx --data x_dtype.npy --labels "$SH/train_y.npy" --epochs 1 --trainable fc -o out.onnx
refuse "(sample 3) is not finite" model.onnx --data x_nan.npy --labels "$SH/train_y.npy" --epochs 1 --trainable fc -o out.onnx
refuse "(sample 9) is not finite" model.onnx --data x_inf.npy --labels "$SH/train_y.npy" --epochs 1 --trainable fc -o out.onnx
refuse "4 samples: need at least the batch (16)" model.onnx --data x_few.npy --labels y_few.npy --epochs 1 --trainable fc -o out.onnx
refuse "--lr nan" model.onnx "${GOOD[@]}" --lr nan -o out.onnx
refuse "--lr inf" model.onnx "${GOOD[@]}" --lr inf -o out.onnx
refuse "--lr -0.5" model.onnx "${GOOD[@]}" --lr -0.5 -o out.onnx
refuse "--lr 0" model.onnx "${GOOD[@]}" --lr 0 -o out.onnx
refuse "the fixed-point update would overflow" model.onnx "${GOOD[@]}" --lr 1e9 -o out.onnx
refuse '--grad-round "up": nearest or stochastic' model.onnx "${GOOD[@]}" --grad-round up -o out.onnx
refuse '--grad-bits "12": 8 or 16' model.onnx "${GOOD[@]}" --grad-bits 12 -o out.onnx
refuse '--weight-round "up": nearest or stochastic' model.onnx "${GOOD[@]}" --weight-round up -o out.onnx
refuse '--weight-bits "12": 8 or 16' model.onnx "${GOOD[@]}" --weight-bits 12 -o out.onnx
refuse '--weight-bits 16 runs the forward on the master copy: not with --update int8' model.onnx "${GOOD[@]}" \
  --weight-bits 16 --update int8 -o out.onnx
refuse '--weight-round stochastic rounds the master copy: not with --update int8' model.onnx "${GOOD[@]}" \
  --weight-round stochastic --update int8 -o out.onnx
refuse '--update "sgd": master, int8 or device' model.onnx "${GOOD[@]}" --update sgd -o out.onnx
refuse '--update device keeps the master copy on the int8 grid' model.onnx "${GOOD[@]}" --update device \
  --grad-bits 16 -o out.onnx
refuse '--lr 1.5: the device update of node "/fc/Gemm" (Gemm) needs 2^-32 <= lr < 1' model.onnx "${GOOD[@]}" \
  --update device --lr 1.5 -o out.onnx
# a trained channel stored all zero on a placeholder scale cannot leave zero with the file's scales (kept by default)
refuse 'node "/fc/Gemm" (Gemm): weight channel 3 is all zero in the file with scale 1.19e-07' zerochan.onnx "${GOOD[@]}" -o out.onnx
refuse 'give it nonzero initial weights or use --weight-scale refit' zerochan.onnx "${GOOD[@]}" -o out.onnx
refuse 'weight channel 3 is all zero' zerochan.onnx "${GOOD[@]}" --update device -o out.onnx
"$TSR" train zerochan.onnx "${GOOD[@]}" --weight-scale refit -o zc_refit.onnx --quiet > zc.log 2>&1 ||
  { cat zc.log; fail "--weight-scale refit on an all-zero channel"; }
"$TSR" train zerochan_ok.onnx "${GOOD[@]}" -o zc_ok.onnx --quiet > zc.log 2>&1 ||
  { cat zc.log; fail "an all-zero channel on the others' scale"; }
# per-channel weight scales with --update device (a multiplier per output channel, jit/tsr_sgd.h): fc's
# scales all equal, so every channel's multiplier is the per-tensor one and the tuned fc is the per-tensor
# model's, byte for byte (refused before: "has per-channel weight scales (10)")
"$TSR" train perchannel.onnx "${GOOD[@]}" --update device -o pc_dev.onnx --quiet > pc_dev.log 2>&1 &&
  "$TSR" train model.onnx "${GOOD[@]}" --update device -o pt_dev.onnx --quiet > pt_dev.log 2>&1 ||
  { cat pc_dev.log pt_dev.log; fail "--update device on per-channel weight scales"; }
"$PY" - <<'PY' || fail "--update device: per-channel scales (all equal) do not give the per-tensor model's fc"
import numpy as np, onnx
from onnx import numpy_helper as nh
def consts(f):
    return {n.output[0]: nh.to_array(n.attribute[0].t) for n in onnx.load(f).graph.node if n.op_type == "Constant"}
pc, pt, base = consts("pc_dev.onnx"), consts("pt_dev.onnx"), consts("model.onnx")
diff = [k for k in pt if k in pc and not np.array_equal(np.broadcast_to(pt[k], pc[k].shape), pc[k])]
moved = sum(int(np.sum(pt[k] != base[k])) for k in pt if pt[k].dtype == np.int8 and pt[k].shape == base[k].shape)
print(f"--update device, per-channel scales: {len(diff)} tensors differ from the per-tensor run's; {moved} int8 "
      "weights moved")
assert not diff and moved > 100, diff
PY
# a config the device update cannot run on: refused before the first step (it was at the first update,
# after the first batch's forward and backward), the buffer and the size it needs named
sed 's/"LOG_UOP_BUFF_SIZE": [0-9]*/"LOG_UOP_BUFF_SIZE": 8/' "$SRC/configs/default.json" > small_uop.json
refuse '--update device: sgd: the uop buffer holds 64 micro-ops (LOG_UOP_BUFF_SIZE 8), the update needs 128' \
  model.onnx "${GOOD[@]}" --update device --config small_uop.json -o out.onnx
refuse '--logits-range "wide": observe or fixed' model.onnx "${GOOD[@]}" --logits-range wide -o out.onnx
refuse '--lr "0.1x"' model.onnx "${GOOD[@]}" --lr 0.1x -o out.onnx
refuse "--momentum 1" model.onnx "${GOOD[@]}" --momentum 1 -o out.onnx
refuse "--momentum -0.1" model.onnx "${GOOD[@]}" --momentum -0.1 -o out.onnx
refuse "--momentum nan" model.onnx "${GOOD[@]}" --momentum nan -o out.onnx
refuse "--epochs 0" model.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 0 --trainable fc -o out.onnx
refuse "--epochs 1001" model.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 1001 --trainable fc -o out.onnx
refuse '--epochs "99999999999"' model.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 99999999999 --trainable fc -o out.onnx
refuse "--batch 0" model.onnx "${GOOD[@]}" --batch 0 -o out.onnx
refuse "--batch 5000" model.onnx "${GOOD[@]}" --batch 5000 -o out.onnx
refuse 'no layer "fc9"' model.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 1 --trainable fc9 -o out.onnx
refuse '"/pool/MaxPool" (MaxPool) has no weights to train' model.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 1 --trainable pool -o out.onnx
refuse "last:K needs K in [1, 3]" model.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 1 --trainable last:4 -o out.onnx
refuse "is the model file" model.onnx "${GOOD[@]}" -o model.onnx
refuse "is the model file" model.onnx "${GOOD[@]}" -o ./model.onnx
refuse "is a directory" model.onnx "${GOOD[@]}" -o .
refuse "cannot be written" model.onnx "${GOOD[@]}" -o no/such/dir/t.onnx
refuse "garbage.onnx" garbage.onnx "${GOOD[@]}" -o out.onnx
refuse "--timing-only" model.onnx "${GOOD[@]}" --backend systemc --timing-only -o out.onnx
refuse "-o TUNED.onnx is required" model.onnx "${GOOD[@]}"
# (an AveragePool in the part was refused until its backward, the even spread, was there: now it trains)
"$TSR" train avgpool.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 1 --trainable conv2 \
  -o avg_tuned.onnx --quiet > avg.log 2>&1 && grep -q "wrote avg_tuned.onnx" avg.log \
  || { cat avg.log; fail "the digits CNN with an AveragePool does not train conv2 through it"; }
refuse 'node "fc" (QGemm) cannot be trained: an operator-form node' "$DIG/digits_qlinear.onnx" "${GOOD[@]}" -o out.onnx
cmp -s model.onnx "$DIG/digits_qdq.onnx" || fail "the input model changed"
# -o naming a device or FIFO (as -o /dev/null does) is written in place and stays what it was: the
# atomic write's rename replaced /dev/null with a regular file when a test ran `-o /dev/null` as root
rm -f out.fifo && mkfifo out.fifo
timeout 120 cat out.fifo > fifo_got.onnx &
catpid=$!
"$TSR" train model.onnx "${GOOD[@]}" --seed 3 --quiet -o out.fifo > fifo.log 2>&1 || { cat fifo.log; fail "-o FIFO failed"; }
[ -p out.fifo ] || { fail "-o FIFO was replaced by a regular file"; rm -f out.fifo; printf x > out.fifo; }
wait "$catpid" || fail "nothing was written to the FIFO"
"$TSR" train model.onnx "${GOOD[@]}" --seed 3 --quiet -o fifo_ref.onnx > /dev/null 2>&1
cmp -s fifo_got.onnx fifo_ref.onnx || fail "-o FIFO got other bytes than -o FILE"
rm -f out.fifo

# ---------------------------------------------------------------- 2. the demo
acc() { "$TSR" infer "$1" -i "$SH/$2_x.npy" --labels "$SH/$2_y.npy" --quiet | sed -n 's/^accuracy: [0-9]* of [0-9]* = \([0-9.]*\)%.*/\1/p'; }
base_new=$(acc model.onnx test) base_old=$(acc model.onnx old)
echo "untuned: new domain $base_new%, old domain $base_old%"
demo() { # LAYERS EPOCHS LR OUT
  "$TSR" train model.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs "$2" --trainable "$1" \
    --lr "$3" --momentum 0.9 --batch 16 --seed 1 -o "$4" | tee "$4.log" | grep -E '^epoch|MACs|^wrote'
  "$PY" "$SRC/scripts/train/float_finetune.py" model.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" \
    --test "$SH/test_x.npy" "$SH/test_y.npy" --old "$SH/old_x.npy" "$SH/old_y.npy" --epochs "$2" --trainable "$1" \
    --lr "$3" --momentum 0.9 --batch 16 --seed 1 --json "$4.float.json" 2>/dev/null | grep after
  local new old
  new=$(acc "$4" test) old=$(acc "$4" old)
  echo "tuned ($1, $2 epochs): new domain $new%, old domain $old%"
  "$PY" - "$base_new" "$base_old" "$new" "$old" "$4.float.json" "$1" <<'PY' || fails=$((fails + 1))
import json, sys
bn, bo, n, o = map(float, sys.argv[1:5])
f = json.load(open(sys.argv[5]))["after"]
fn, fo = 100 * f["new"], 100 * f["old"]
print(f"{sys.argv[6]}: new {bn:.2f} -> {n:.2f} (float {fn:.2f}), old {bo:.2f} -> {o:.2f} (float {fo:.2f})")
ok = n >= bn + 20 and o >= bo - 6 and abs(n - fn) <= 3 and abs(o - fo) <= 3
sys.exit(0 if ok else 1)
PY
}
demo fc 3 0.005 tuned_fc.onnx
demo conv2,fc 2 0.01 tuned_c2.onnx
# the update on the device ALU (--update device, jit/tsr_sgd.h): fc as the demo, against the same float run
"$TSR" train model.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 3 --trainable fc --lr 0.005 \
  --momentum 0.9 --batch 16 --seed 1 --update device -o tuned_dev.onnx > tuned_dev.onnx.log || fail "--update device"
grep -E '^wrote|device update' tuned_dev.onnx.log || fail "--update device: no 'device update' measure"
dnew=$(acc tuned_dev.onnx test) dold=$(acc tuned_dev.onnx old)
"$PY" - "$base_new" "$base_old" "${dnew:-0}" "${dold:-0}" tuned_fc.onnx.float.json <<'PY' || fail "--update device, fc"
import json, sys
bn, bo, n, o = map(float, sys.argv[1:5])
f = json.load(open(sys.argv[5]))["after"]
fn, fo = 100 * f["new"], 100 * f["old"]
print(f"fc --update device: new {bn:.2f} -> {n:.2f} (float {fn:.2f}), old {bo:.2f} -> {o:.2f} (float {fo:.2f})")
sys.exit(0 if n >= bn + 20 and o >= bo - 6 and abs(n - fn) <= 3 and abs(o - fo) <= 3 else 1)
PY
grep -q "100.0% on the device" tuned_fc.onnx.log || fail "backward MACs not all on the device (fc)"

# peak device memory of the training steps <= 2x one inference's (the issue's goal): conv2+fc from
# the demo, and conv1+conv2+fc (last:3, 1 epoch). The conv dW/dX lowering that gathers on chip keeps
# it under (0.96x, 1.26x); the im2col lowering (TESSERA_GRAD_LOWERING=im2col) breaks it (2.17x, 3.73x)
"$TSR" train model.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 1 --trainable last:3 \
  --lr 0.01 -o tuned_l3.onnx > tuned_l3.onnx.log
# and last:3 with --update device: the state (w_m's and v's planes) held between steps, the update's own
# buffers (gradient, result, uops, constants) only while it runs (1.97x; 2.30x when they were held: fails)
"$TSR" train model.onnx --data "$SH/train_x.npy" --labels "$SH/train_y.npy" --epochs 1 --trainable last:3 \
  --lr 0.01 --update device -o tuned_l3d.onnx > tuned_l3d.onnx.log
for t in tuned_c2 tuned_l3 tuned_l3d; do
  r=$(sed -n 's/.*peak device memory: training \([0-9]*\) B.* vs inference \([0-9]*\) B.*/\1 \2/p' "$t.onnx.log")
  read -r pt pi <<< "${r:-0 0}"
  echo "$t: peak device memory $pt B vs inference $pi B"
  [ "$pi" -gt 0 ] && [ "$pt" -gt 0 ] && [ "$pt" -le $((2 * pi)) ] || fail "$t: peak device memory $pt B over 2x inference's $pi B"
done

# ---------------------------------------------------------------- 3. ONNX Runtime on the tuned model
if ! command -v node >/dev/null; then
  echo "node not found: the ONNX Runtime comparison is skipped"
else
  ORT_DIR=${TSR_ORT_DIR:-$HOME/.cache/tessera/ort}
  if [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
    mkdir -p "$ORT_DIR"
    (cd "$ORT_DIR" && npm install onnxruntime-node@1.20.1 --ignore-scripts --no-audit --no-fund >/dev/null)
  fi
  Q=/fc/QuantizeLinear_output_0
  for t in tuned_fc tuned_c2 tuned_dev; do
    "$PY" - "$t.onnx" <<'PY'
import sys, onnx, onnx.helper as h
from onnx import TensorProto
m = onnx.load(sys.argv[1])  # (the file parses with onnx too)
m.graph.output.append(h.make_tensor_value_info("/fc/QuantizeLinear_output_0", TensorProto.UINT8, None))
onnx.save(m, "ort_" + sys.argv[1])
PY
    for s in test old; do
      "$TSR" infer "$t.onnx" -i "$SH/${s}_x.npy" -o "tsr_${t}_$s.npy" --tensor "$Q=tsrq_${t}_$s.npy" --quiet
      # (ORT's warnings about the unused int8 weights ort_exact.py moved to uint8: shown only on failure)
      NODE_PATH="$ORT_DIR/node_modules" node "$SRC/scripts/onnx/ort_run.js" "ort_$t.onnx" "$SH/${s}_x.npy" \
        "ort_${t}_$s.npy" "$Q" "ortq_${t}_$s.npy" 2> ort.err || { cat ort.err; fail "ONNX Runtime on $t"; continue; }
      "$PY" - "$t" "$s" <<'PY' || fails=$((fails + 1))
import sys
import numpy as np
t, s = sys.argv[1:3]
a, b = np.load(f"tsr_{t}_{s}.npy"), np.load(f"ort_{t}_{s}.npy")
qa, qb = np.load(f"tsrq_{t}_{s}.npy").astype(int), np.load(f"ortq_{t}_{s}.npy").astype(int)
d = np.abs(qa - qb)
agree = (a.argmax(1) == b.argmax(1)).mean()
print(f"{t} on {s}: predictions agree with ONNX Runtime {agree * 100:.2f}%, quantized logits max |diff| "
      f"{d.max()} LSB ({(d != 0).sum()} of {d.size} differ)")
sys.exit(0 if agree == 1.0 and d.max() <= 1 else 1)
PY
    done
  done
fi
if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "train_cli: all passed"
