#!/usr/bin/python3
"""The float reference of `tessera train` (issue 27): the same fine-tuning in float32
with torch, starting from the float model the QDQ digits file dequantizes to (every
weight w_q * w_scale, every bias b_q * b_scale; activations not quantized), on the
same data, in the same order, with the same trainable layers, epochs, learning rate,
momentum and batch; prints the accuracies on the new and the old domain before and
after, and with --json FILE writes them as JSON.

The model is the digits CNN of scripts/onnx/train_digits.py (conv1, relu, conv2, relu,
maxpool 2, flatten, fc): its QDQ file is read with onnx, the weights found as the
DequantizeLinear inputs of each Conv/Gemm node, whatever their Constant or initializer
form. Trainable layers as `tessera train --trainable` takes them: names (fc, conv2,
/fc/Gemm, a weight's name) separated by commas, or last:K.

Same order as the C trainer (train/tsr_train.c): per epoch the indices 0..N-1 shuffled
by Fisher-Yates with j = splitmix64(state) mod (i + 1), i from N-1 down, one state
seeded with --seed for the whole run; batches of --batch in that order, the last one
shorter; the loss the mean cross-entropy of the batch; torch.optim.SGD (momentum,
no dampening, no weight decay).

Usage: float_finetune.py MODEL.onnx --data X.npy --labels Y.npy --test X.npy Y.npy
         --old X.npy Y.npy --epochs N --trainable LAYERS [--lr F] [--momentum F]
         [--batch B] [--seed S] [--json FILE]
"""
import json
import math
import os
import sys

USAGE = ("usage: float_finetune.py MODEL.onnx --data X.npy --labels Y.npy --test X.npy Y.npy --old X.npy Y.npy "
         "--epochs N --trainable LAYERS [--lr F] [--momentum F] [--batch B] [--seed S] [--json FILE]")
MASK = (1 << 64) - 1
LAYERS = ("conv1", "conv2", "fc")


def fail(msg, code=2):
    sys.stderr.write("float_finetune: " + str(msg).replace("\n", "?")[:1000] + "\n")
    sys.exit(code)


def splitmix64(state):
    """(new state, value): isa/tsr_util.h's tsr_splitmix64."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def epoch_order(n, state):
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        state, r = splitmix64(state)
        j = r % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order, state


def parse(argv):
    o = {"lr": 0.01, "momentum": 0.9, "batch": 16, "seed": 1, "json": None, "epochs": None, "trainable": None,
         "data": None, "labels": None, "test": None, "old": None, "model": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            fail(USAGE)
        two = a in ("--test", "--old")
        if a.startswith("--"):
            key = a[2:]
            if key not in o or key == "model":
                fail(f"unknown option {a}; " + USAGE)
            need = 2 if two else 1
            vals = argv[i + 1:i + 1 + need]
            if len(vals) != need:
                fail(f"{a} needs {need} value(s)")
            o[key] = vals if two else vals[0]
            i += 1 + need
            continue
        if o["model"] is not None:
            fail(f"unexpected argument {a!r}; " + USAGE)
        o["model"] = a
        i += 1
    for k in ("model", "data", "labels", "test", "old", "epochs", "trainable"):
        if o[k] is None:
            fail(f"missing {'MODEL.onnx' if k == 'model' else '--' + k}; " + USAGE)
    try:
        o["lr"], o["momentum"] = float(o["lr"]), float(o["momentum"])
        o["epochs"], o["batch"], o["seed"] = int(o["epochs"]), int(o["batch"]), int(o["seed"])
    except ValueError as e:
        fail(f"bad number: {e}")
    if not (math.isfinite(o["lr"]) and o["lr"] > 0) or not (math.isfinite(o["momentum"]) and 0 <= o["momentum"] < 1):
        fail("--lr must be finite and > 0, --momentum in [0, 1)")
    if not (1 <= o["epochs"] <= 1000) or not (1 <= o["batch"] <= 4096) or not (0 <= o["seed"] < 2**64):
        fail("--epochs in [1, 1000], --batch in [1, 4096], --seed in [0, 2^64)")
    return o


def trainable_set(spec):
    """The layer names of --trainable (names of LAYERS, ONNX node names /fc/Gemm, or last:K)."""
    if spec.startswith("last:"):
        try:
            k = int(spec[5:])
        except ValueError:
            fail(f"--trainable {spec!r}: last:K needs an integer K")
        if not (1 <= k <= len(LAYERS)):
            fail(f"--trainable {spec!r}: K must be in [1, {len(LAYERS)}]")
        return set(LAYERS[-k:])
    out = set()
    for name in spec.split(","):
        s = name.strip().strip("/").split("/")[0]
        if s not in LAYERS:
            fail(f"--trainable: unknown layer {name!r} (layers: {', '.join(LAYERS)})")
        out.add(s)
    return out


def float_params(path):
    """{layer: (weight, bias)} as float32 numpy arrays: the QDQ file's DequantizeLinear of each Conv/Gemm input."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    g = m.graph
    const = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:  # constants, folded in graph order (the file is topologically sorted)
        ins = [const.get(x) for x in n.input]
        if n.op_type == "Constant":
            const[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        elif n.op_type == "ConstantOfShape" and ins[0] is not None:
            v = numpy_helper.to_array(n.attribute[0].t) if n.attribute else np.zeros(1, np.float32)
            const[n.output[0]] = np.full(tuple(int(d) for d in ins[0]), v.ravel()[0], dtype=v.dtype)
        elif n.op_type in ("Cast", "Identity") and ins and ins[0] is not None:
            const[n.output[0]] = ins[0]  # (the casts here only relabel the zero point's type)
        elif n.op_type == "DequantizeLinear" and all(v is not None for v in ins):
            x, s = ins[0].astype(np.float64), ins[1].astype(np.float64)
            z = ins[2].astype(np.float64) if len(ins) > 2 else np.zeros_like(s)
            if s.size > 1:  # per channel along axis (default 1; the weights' is 0)
                ax = next((a.i for a in n.attribute if a.name == "axis"), 1)
                shape = [1] * x.ndim
                shape[ax] = s.size
                s, z = s.reshape(shape), z.reshape(shape)
            const[n.output[0]] = ((x - z) * s).astype(np.float32)
    out = {}
    for n in g.node:
        if n.op_type in ("Conv", "Gemm"):
            layer = n.name.strip("/").split("/")[0]
            if n.input[1] not in const or len(n.input) < 3 or n.input[2] not in const:
                fail(f"{path}: node {n.name} ({n.op_type}): weights or bias not constant")
            out[layer] = (const[n.input[1]], const[n.input[2]])
    if set(out) != set(LAYERS):
        fail(f"{path}: expected the digits CNN's layers {LAYERS}, found {sorted(out)}")
    return out


def load_xy(xf, yf):
    import numpy as np
    try:
        x, y = np.load(xf), np.load(yf)
    except (OSError, ValueError) as e:
        fail(f"{xf} / {yf}: {e}")
    if x.ndim != 4 or x.shape[1:] != (1, 8, 8) or x.dtype != np.float32 or y.shape != (len(x),):
        fail(f"{xf} / {yf}: expected float32 [N,1,8,8] and labels [N] (are {x.dtype} {x.shape}, {y.shape})")
    return x, y.astype(np.int64)


def main(o):
    import numpy as np
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
            self.fc = nn.Linear(32 * 4 * 4, 10)

        def forward(self, x):
            x = torch.relu(self.conv1(x))
            x = torch.relu(self.conv2(x))
            x = torch.max_pool2d(x, 2)
            return self.fc(torch.flatten(x, 1))

    params = float_params(o["model"])
    train = trainable_set(o["trainable"])
    net = Net()
    with torch.no_grad():
        for name in LAYERS:
            w, b = params[name]
            mod = getattr(net, name)
            mod.weight.copy_(torch.from_numpy(w.reshape(mod.weight.shape)))
            mod.bias.copy_(torch.from_numpy(b))
            for p in mod.parameters():
                p.requires_grad_(name in train)
    x, y = load_xy(o["data"], o["labels"])
    tx, ty = load_xy(*o["test"])
    ox, oy = load_xy(*o["old"])
    if y.min() < 0 or y.max() > 9:
        fail(f"{o['labels']}: labels must be in [0, 9]")

    def acc(a, b):
        with torch.no_grad():
            return float((net(torch.from_numpy(a)).argmax(1).numpy() == b).mean())

    res = {"before": {"new": acc(tx, ty), "old": acc(ox, oy)}}
    opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=o["lr"], momentum=o["momentum"])
    lossf = nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    state = o["seed"] & MASK
    res["epochs"] = []
    for e in range(o["epochs"]):
        order, state = epoch_order(len(x), state)
        tot, right = 0.0, 0
        for i in range(0, len(order), o["batch"]):
            idx = torch.tensor(order[i:i + o["batch"]])
            opt.zero_grad()
            out = net(xt[idx])
            loss = lossf(out, yt[idx])
            loss.backward()
            opt.step()
            tot += float(loss) * len(idx)
            right += int((out.argmax(1) == yt[idx]).sum())
        res["epochs"].append({"loss": tot / len(x), "train_acc": right / len(x)})
        print(f"epoch {e + 1}: loss {tot / len(x):.4f}, accuracy on the training data {right / len(x) * 100:.2f}%")
    res["after"] = {"new": acc(tx, ty), "old": acc(ox, oy)}
    for k in ("before", "after"):
        print(f"float {k} fine-tuning: new domain {res[k]['new'] * 100:.2f}% ({len(ty)} images), "
              f"old domain {res[k]['old'] * 100:.2f}% ({len(oy)} images)")
    if o["json"]:
        tmp = o["json"] + ".tmp"
        with open(tmp, "w") as f:
            json.dump(res, f, indent=1)
        os.replace(tmp, o["json"])


if __name__ == "__main__":
    opts = parse(sys.argv[1:])
    try:
        main(opts)
    except KeyboardInterrupt:
        sys.stderr.write("float_finetune: interrupted\n")
        sys.exit(130)
    except OSError as e:
        fail(f"{e.filename or ''}: {e.strerror or e}", 1)
