#!/usr/bin/python3
"""The float reference of `tessera train` (issue 27): the same fine-tuning in float32
with torch, starting from the float model the QDQ file dequantizes to (every weight
w_q * w_scale, every bias b_q * b_scale; activations not quantized), on the same data,
in the same order, with the same trainable layers, epochs, learning rate, momentum and
batch; prints the accuracies on the new and the old domain before and after, and with
--json FILE writes them as JSON.

Any model of the layer kinds the trainer takes (Conv, Gemm/MatMul, Relu, Clip, MaxPool,
AveragePool, GlobalAveragePool, Add, Flatten): the QDQ file is read with onnx, its
constants folded, the weights found as the DequantizeLinear inputs of each Conv/Gemm
node, and its graph run in torch with every QuantizeLinear/DequantizeLinear of an
activation an identity. ONNX Runtime's quantizer removes a Relu (or a ReLU6's Clip)
whose range the uint8 output already is: for such a file (scripts/zoo/qdq.py's)
--float-model FP32.onnx gives the graph, the float model it was quantized from, whose
Conv/Gemm nodes take the QDQ file's dequantized weights and biases by node name. The
digits CNN of scripts/onnx/train_digits.py (torch's quantizer keeps its Relus) needs none.

As the C trainer: the frozen layers (before the first trainable one) run once per sample,
their outputs the part's input; the part is every node downstream of a trainable
weight. Trainable layers as `tessera train --trainable` takes them: node names
(/fc/Gemm, with or without the '/'), a prefix of their path (fc, layer4/layer4.1), a
weight's name, comma separated, or last:K (the last K Conv/Gemm nodes).

Same order as the C trainer (train/tsr_train.c): per epoch the indices 0..N-1 shuffled
by Fisher-Yates with j = splitmix64(state) mod (i + 1), i from N-1 down, one state
seeded with --seed for the whole run; batches of --batch in that order, the last one
shorter; the loss the mean cross-entropy of the batch; torch.optim.SGD (momentum,
no dampening, no weight decay).

Device effects simulated in float (issue 27: where the device's accuracy gap to float comes from), one at
a time or comma separated: --sim grad (int8 dY as the trainer quantizes it), grad-row, grad16, weight (int8
weights in the forward, the float master updated), weight-conv, weight-gemm, weight-eval, weight-stoch, act
(every activation on the file's uint8/int8 grid); SIMS below says what each does. --features TRAIN.npy
TEST.npy: the part's input as the device computed it (the quantized frozen tensor that `tessera infer
--tensor NAME_QuantizeLinear_Output=F.npy` writes) instead of float's.

Usage: float_finetune.py MODEL.onnx --data X.npy --labels Y.npy --test X.npy Y.npy
         [--old X.npy Y.npy] --epochs N --trainable LAYERS [--lr F] [--momentum F]
         [--batch B] [--seed S] [--float-model FP32.onnx] [--sim EFFECTS] [--features TRAIN.npy TEST.npy]
         [--json FILE]
"""
import json
import math
import os
import stat
import sys

USAGE = ("usage: float_finetune.py MODEL.onnx --data X.npy --labels Y.npy --test X.npy Y.npy [--old X.npy Y.npy] "
         "--epochs N --trainable LAYERS [--lr F] [--momentum F] [--batch B] [--seed S] [--float-model FP32.onnx] "
         "[--sim EFFECTS] [--features TRAIN.npy TEST.npy] [--json FILE]")
MASK = (1 << 64) - 1
WEIGHT_OPS = ("Conv", "Gemm", "MatMul")
# --sim: one device effect at a time, simulated in float (issue 27's gap)
SIMS = {"grad": "dY of each trainable Conv/Gemm quantized to int8 per tensor (max|g|/127, to nearest) for dW and dX, "
                "dX's per-channel weight scales folded into dY and quantized again, dX from the int8 weights "
                "(as train/tsr_train_step.c)",
        "grad-row": "as grad, but one int8 scale per sample (row of dY)",
        "grad16": "as grad, with dY split in two int8 parts (hi on max|g|/127, the residual lo on that / 254)",
        "weight": "the forward with the weights quantized per output channel (max|w|/127.5, int8: the trainer's "
                  "--weight-scale refit, not its default file scales) each step, the float master copy updated "
                  "(straight-through)",
        "weight-conv": "as weight, the Conv layers only",
        "weight-gemm": "as weight, the Gemm layers only",
        "weight-eval": "float training, the accuracies with the trained weights quantized as weight does "
                       "(post-training quantization of the float result)",
        "weight-stoch": "as weight, the training forward's weights rounded stochastically (floor(w / s + u), fresh u "
                        "each step), the accuracies' to nearest",
        "act": "every activation the QDQ file quantizes (frozen features, the part's layers' outputs) rounded to its "
               "uint8/int8 grid with the file's scale and zero point, clamped (straight-through)"}


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
         "data": None, "labels": None, "test": None, "old": None, "model": None, "float-model": None, "sim": "",
         "features": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            fail(USAGE)
        two = a in ("--test", "--old", "--features")
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
    for k in ("model", "data", "labels", "test", "epochs", "trainable"):
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
    o["sim"] = [v for v in o["sim"].split(",") if v]
    for v in o["sim"]:
        if v not in SIMS:
            fail(f"--sim {v!r}: not one of {', '.join(SIMS)}")
    return o


def fold_constants(g):
    """{name: numpy array} of every constant of graph g: initializers, Constant nodes and what they fold to
    (ConstantOfShape, Cast, Identity, DequantizeLinear of constants: the dequantized weights)."""
    import numpy as np
    from onnx import numpy_helper
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
    return const


def attrs(n):
    import onnx
    return {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}


class Graph:
    """The model's compute nodes (constants folded away), in graph order, and its weights: nodes [(node,
    attributes)], params {node name: [weight, bias or None]} of the Conv/Gemm/MatMul nodes, the input's
    name and per-sample shape, the output's name and the number of classes."""

    def __init__(self, qdq_path, float_path):
        import onnx
        q = onnx.load(qdq_path)
        qc = fold_constants(q.graph)
        qw = {}
        for n in q.graph.node:
            if n.op_type in WEIGHT_OPS:
                if n.input[1] not in qc or (len(n.input) > 2 and n.input[2] and n.input[2] not in qc):
                    fail(f"{qdq_path}: node {n.name} ({n.op_type}): weights or bias not constant")
                b = qc[n.input[2]] if len(n.input) > 2 and n.input[2] else None
                qw[n.name] = (qc[n.input[1]], b, n.input[1])
        # the activations' quantization {tensor: (scale, zero point, qmin, qmax)} (--sim act)
        self.aq = {}
        for n in q.graph.node:
            if n.op_type == "QuantizeLinear" and n.input[0] not in qc and n.input[1] in qc:
                zp = qc[n.input[2]] if len(n.input) > 2 and n.input[2] in qc else None
                lo, hi = (-128, 127) if zp is not None and zp.dtype.kind == "i" else (0, 255)
                self.aq[n.input[0]] = (float(qc[n.input[1]]), 0 if zp is None else int(zp), lo, hi)
        g = onnx.load(float_path).graph if float_path else q.graph
        const = fold_constants(g) if float_path else qc
        self.const, self.nodes, self.params, self.wnames = const, [], {}, {}
        for n in g.node:
            if all(o in const for o in n.output):
                continue  # a constant (folded)
            if n.op_type in WEIGHT_OPS:
                if n.name not in qw:
                    fail(f"{float_path}: node {n.name} ({n.op_type}) is not in {qdq_path}")
                w, b, wn = qw[n.name]
                if float_path and (const.get(n.input[1]) is None or const[n.input[1]].shape != w.shape):
                    fail(f"{float_path}: node {n.name}: its weights' shape is not the QDQ file's")
                self.params[n.name] = [w, b]
                self.wnames[n.name] = wn
            self.nodes.append((n, attrs(n)))
        if float_path and set(self.params) != set(qw):
            fail(f"{float_path}: its Conv/Gemm nodes are not {qdq_path}'s")
        inputs = [i for i in g.input if i.name not in const]
        if len(inputs) != 1:
            fail(f"{qdq_path}: expected one graph input, found {len(inputs)}")
        self.input = inputs[0].name
        self.sample_shape = tuple(d.dim_value for d in inputs[0].type.tensor_type.shape.dim[1:])
        self.output = g.output[0].name
        last = [n for n, _ in self.nodes if n.op_type in WEIGHT_OPS][-1]
        w = self.params[last.name][0]
        self.classes = w.shape[0] if last.op_type == "Gemm" and attrs(last).get("transB", 0) else w.shape[-1]

    def trainable_set(self, spec):
        """The node names of --trainable (as the C trainer's `names`), in graph order."""
        layers = [n.name for n, _ in self.nodes if n.op_type in WEIGHT_OPS]
        if spec.startswith("last:"):
            try:
                k = int(spec[5:])
            except ValueError:
                fail(f"--trainable {spec!r}: last:K needs an integer K")
            if not (1 <= k <= len(layers)):
                fail(f"--trainable {spec!r}: K must be in [1, {len(layers)}]")
            return set(layers[-k:])
        out = set()
        for name in spec.split(","):
            name = name.strip()
            hit = {nm for nm in layers
                   if name in (nm, nm.lstrip("/"), self.wnames[nm]) or nm.lstrip("/").startswith(name + "/")}
            if not hit:
                fail(f"--trainable: no layer {name!r} (layers: {', '.join(layers)})")
            out |= hit
        return out


def run_node(n, a, ins, torch, F):
    """One node in float (torch): ins the input tensors (None for an absent optional input)."""
    op = n.op_type
    if op in ("QuantizeLinear", "DequantizeLinear", "Cast", "Identity"):
        return ins[0]  # an activation's quantization (and torch's Cast of its type): float here
    if op == "Conv":
        p = a.get("pads", [0, 0, 0, 0])
        if p[0] != p[2] or p[1] != p[3]:
            fail(f"node {n.name}: asymmetric pads {p}")
        return F.conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None, stride=tuple(a.get("strides", [1, 1])),
                        padding=(p[0], p[1]), dilation=tuple(a.get("dilations", [1, 1])), groups=a.get("group", 1))
    if op == "Gemm":
        if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
            fail(f"node {n.name}: Gemm with transA, alpha or beta")
        w = ins[1] if a.get("transB", 0) else ins[1].t()
        return F.linear(ins[0], w, ins[2] if len(ins) > 2 else None)
    if op == "MatMul":
        return torch.matmul(ins[0], ins[1])
    if op == "Relu":
        return torch.relu(ins[0])
    if op == "Clip":
        lo = float(ins[1]) if len(ins) > 1 and ins[1] is not None else a.get("min", float("-inf"))
        hi = float(ins[2]) if len(ins) > 2 and ins[2] is not None else a.get("max", float("inf"))
        return torch.clamp(ins[0], lo, hi)
    if op == "Add":
        return ins[0] + ins[1]
    if op in ("MaxPool", "AveragePool"):
        p = a.get("pads", [0, 0, 0, 0])
        k, st = tuple(a["kernel_shape"]), tuple(a.get("strides", [1, 1]))
        if p[0] != p[2] or p[1] != p[3] or a.get("ceil_mode", 0):
            fail(f"node {n.name}: asymmetric pads or ceil_mode")
        if op == "MaxPool":
            return F.max_pool2d(ins[0], k, st, (p[0], p[1]))
        return F.avg_pool2d(ins[0], k, st, (p[0], p[1]), count_include_pad=bool(a.get("count_include_pad", 0)))
    if op == "GlobalAveragePool":
        return ins[0].mean(dim=(2, 3), keepdim=True)
    if op == "Flatten":
        return torch.flatten(ins[0], a.get("axis", 1))
    if op == "Reshape":
        shape = [int(v) for v in ins[1]]
        return ins[0].reshape([ins[0].shape[0]] + shape[1:])  # (the batch is the data's)
    if op == "Softmax":
        return ins[0]  # (the loss and the argmax are of the logits)
    fail(f"node {n.name}: {op} is not a layer kind the trainer takes")


def wscale(w):
    """The per-output-channel weight scale max|w| / 127.5: the trainer's rule under --weight-scale refit (its
    default before 115d2f1). The trainer's default now keeps the file's scales and clamps the master copy to
    their int8 range; --sim does not model that yet (the effects measured with it were under the re-fit)."""
    s = w.detach().abs().reshape(w.shape[0], -1).amax(1) / 127.5
    return s.clamp_min(1e-30).reshape([-1] + [1] * (w.dim() - 1))


def qgrad(g, rows, torch, split=False):
    """g quantized to int8 as the device does (per tensor, or per row of the batch), dequantized; split: plus
    the residual quantized to int8 on the scale / 254 (two int8 GEMMs)."""
    a = g.abs().reshape(g.shape[0], -1).amax(1).reshape([-1] + [1] * (g.dim() - 1)) if rows else g.abs().max()
    s = a / 127.0
    one = torch.where(s > 0, s, torch.ones_like(s))
    hi = torch.where(s > 0, torch.clamp(torch.round(g / one), -127, 127) * s, 0 * g)
    if not split:
        return hi
    s2 = s / 254.0
    return hi + torch.where(s2 > 0, torch.clamp(torch.round((g - hi) / (one / 254.0)), -127, 127) * s2, 0 * g)


def sim_layer(torch, F, sims):
    """A Conv/Gemm layer with the device effects of sims in its forward (weights) and backward (dY)."""
    class Layer(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b, conv):
            ctx.conv, ctx.b_none = conv, b is None
            ctx.save_for_backward(x, w)
            return (F.conv2d(x, w, b, **conv) if conv is not None else F.linear(x, w, b))

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            conv = ctx.conv
            rows, split = "grad-row" in sims, "grad16" in sims
            gq = qgrad(g, rows, torch, split)
            gb = None if ctx.b_none else g.sum(dim=[d for d in range(g.dim()) if d != 1])
            if conv is not None:
                gw = torch.nn.grad.conv2d_weight(x, w.shape, gq, **conv)
            else:
                gw = gq.t() @ x
            ws = wscale(w)
            wq = torch.round(w / ws).clamp(-128, 127)  # (w is already on its grid with --sim weight)
            cs = ws.reshape(1, -1, *([1] * (g.dim() - 2)))
            gx = qgrad(g * cs, rows, torch, split)  # dY * w_scale per channel, quantized again; dX = that . wq
            if conv is not None:
                gx = torch.nn.grad.conv2d_input(x.shape, wq, gx, **conv)
            else:
                gx = gx @ wq
            return gx, gw, gb, None
    return Layer


def load_xy(xf, yf, shape):
    import numpy as np
    try:
        x, y = np.load(xf), np.load(yf)
    except (OSError, ValueError) as e:
        fail(f"{xf} / {yf}: {e}")
    if x.ndim != 1 + len(shape) or x.shape[1:] != shape or x.dtype != np.float32 or y.shape != (len(x),):
        fail(f"{xf} / {yf}: expected float32 [N,{','.join(map(str, shape))}] and labels [N] "
             f"(are {x.dtype} {x.shape}, {y.shape})")
    return x, y.astype(np.int64)


def main(o):
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    G = Graph(o["model"], o["float-model"])
    train = G.trainable_set(o["trainable"])
    params = {}
    for name, (w, b) in G.params.items():
        params[name] = [nn.Parameter(torch.from_numpy(np.array(w)), requires_grad=name in train),
                        None if b is None else nn.Parameter(torch.from_numpy(np.array(b)), requires_grad=name in train)]
    # the part: every node downstream of a trainable weight (the first trainable layer's on)
    produced = set()
    part = []
    for i, (n, a) in enumerate(G.nodes):
        if n.name in train or any(v in produced for v in n.input):
            part.append(i)
            produced.update(n.output)
    if G.output not in produced:
        fail(f"the trainable layers do not reach the output {G.output}")
    frozen = sorted({v for i in part for v in G.nodes[i][0].input if v and v not in produced and v not in G.const
                     and v not in G.params})

    def value(env, v):
        if v in env:
            return env[v]
        if v in G.const:
            return torch.from_numpy(np.array(G.const[v]))
        fail(f"value {v} is not computed before its use")

    sims = set(o["sim"])
    Layer = sim_layer(torch, F, sims)

    def fq_act(v, t):
        """--sim act: t on the file's grid of tensor v (straight-through)."""
        if "act" not in sims or v not in G.aq or v == G.output:
            return t
        sc, zp, lo, hi = G.aq[v]
        return t + ((torch.clamp(torch.round(t / sc) + zp, lo, hi) - zp) * sc - t).detach()

    def run(nodes, env):
        for i in nodes:
            n, a = G.nodes[i]
            if n.op_type in WEIGHT_OPS:
                w, b = params[n.name]
                wsim = ("weight" in sims or f"weight-{n.op_type.lower()}" in sims
                        or ("weight-eval" in sims and not torch.is_grad_enabled()))
                if "weight-stoch" in sims and n.name in train:
                    ws = wscale(w)
                    r = torch.floor(w / ws + torch.rand(w.shape)) if torch.is_grad_enabled() else torch.round(w / ws)
                    w = w + (r.clamp(-128, 127) * ws - w).detach()
                elif wsim and n.name in train:
                    w = w + (torch.round(w / wscale(w)).clamp(-128, 127) * wscale(w) - w).detach()
                x = value(env, n.input[0])
                if sims & {"grad", "grad-row", "grad16"} and n.name in train and n.op_type in ("Conv", "Gemm"):
                    conv = None
                    if n.op_type == "Conv":
                        p = a.get("pads", [0, 0, 0, 0])
                        conv = dict(stride=tuple(a.get("strides", [1, 1])), padding=(p[0], p[1]),
                                    dilation=tuple(a.get("dilations", [1, 1])), groups=a.get("group", 1))
                    elif not a.get("transB", 0):
                        fail(f"node {n.name}: --sim grad takes a Gemm with transB")
                    env[n.output[0]] = fq_act(n.output[0], Layer.apply(x, w, b, conv))
                    continue
                ins = [x, w] + ([b] if b is not None else [])
            else:
                ins = [value(env, v) if v else None for v in n.input]
            env[n.output[0]] = fq_act(n.output[0], run_node(n, a, ins, torch, F))
        return env

    prefix = [i for i in range(len(G.nodes)) if i not in set(part)]

    def features(xa):
        """The frozen values the part reads, for every sample (once: they do not change)."""
        out = {v: [] for v in frozen}
        with torch.no_grad():
            for s in range(0, len(xa), 100):
                env = run(prefix, {G.input: torch.from_numpy(xa[s:s + 100])})
                for v in frozen:
                    out[v].append(env[v] if v in env else value(env, v))
        return {v: torch.cat(t) for v, t in out.items()}

    def logits(feat, idx=None):
        env = {v: fq_act(v, t if idx is None else t[idx]) for v, t in feat.items()}
        return run(part, env)[G.output]

    x, y = load_xy(o["data"], o["labels"], G.sample_shape)
    sets = {"new": load_xy(*o["test"], G.sample_shape)}
    if o["old"]:
        sets["old"] = load_xy(*o["old"], G.sample_shape)
    if y.min() < 0 or y.max() >= G.classes:
        fail(f"{o['labels']}: labels must be in [0, {G.classes - 1}]")
    fx = features(x)
    fsets = {k: (features(a), b) for k, (a, b) in sets.items()}
    if o["features"]:  # the frozen part's output as the device computed it (tessera infer --tensor)
        if len(frozen) != 1 or frozen[0] not in G.aq:
            fail(f"--features: the part reads {len(frozen)} frozen values, not one quantized tensor")
        sc, zp = G.aq[frozen[0]][:2]
        for f, d in ((fx, o["features"][0]), (fsets["new"][0], o["features"][1])):
            try:
                a = np.load(d)
            except (OSError, ValueError) as e:
                fail(f"{d}: {e}")
            if a.shape != tuple(f[frozen[0]].shape) or a.dtype.kind not in "iu":
                fail(f"{d}: expected the quantized {frozen[0]} {tuple(f[frozen[0]].shape)}, is {a.dtype} {a.shape}")
            f[frozen[0]] = torch.from_numpy(((a.astype(np.float64) - zp) * sc).astype(np.float32))

    def acc(f, b):
        with torch.no_grad():
            return float((logits(f).argmax(1).numpy() == b).mean())

    res = {"before": {k: acc(*v) for k, v in fsets.items()}}
    opt = torch.optim.SGD([p for pb in params.values() for p in pb if p is not None and p.requires_grad],
                          lr=o["lr"], momentum=o["momentum"])
    lossf = nn.CrossEntropyLoss()
    yt = torch.from_numpy(y)
    state = o["seed"] & MASK
    res["epochs"] = []
    for e in range(o["epochs"]):
        order, state = epoch_order(len(x), state)
        tot, right = 0.0, 0
        for i in range(0, len(order), o["batch"]):
            idx = torch.tensor(order[i:i + o["batch"]])
            opt.zero_grad()
            out = logits(fx, idx)
            loss = lossf(out, yt[idx])
            loss.backward()
            opt.step()
            tot += float(loss) * len(idx)
            right += int((out.argmax(1) == yt[idx]).sum())
        res["epochs"].append({"loss": tot / len(x), "train_acc": right / len(x)})
        print(f"epoch {e + 1}: loss {tot / len(x):.4f}, accuracy on the training data {right / len(x) * 100:.2f}%")
    res["after"] = {k: acc(*v) for k, v in fsets.items()}
    for k in ("before", "after"):
        print(f"float {k} fine-tuning: " + ", ".join(
            f"{'new' if d == 'new' else 'old'} domain {res[k][d] * 100:.2f}% ({len(sets[d][1])} images)"
            for d in res[k]))
    if o["json"]:
        write_json(o["json"], res)


def write_json(path, res):
    """Whole or not at all: a temporary file renamed over path; a FIFO or device (/dev/null) is
    written into instead, since the rename would replace it with a regular file."""
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        special = False
    if special:
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    opts = parse(sys.argv[1:])
    try:
        main(opts)
    except KeyboardInterrupt:
        sys.stderr.write("float_finetune: interrupted\n")
        sys.exit(130)
    except OSError as e:
        fail(f"{e.filename or ''}: {e.strerror or e}", 1)
