#!/usr/bin/python3
"""test_op_fold.py TESSERA WORKDIR [BACKEND]: shape subgraphs folded at import (ops/tsr_ox_fold.c and the
constant path of ops/tsr_ox_math.c), int64 graph inputs, and `tessera infer --placement-json`.

- Shape subgraphs as torch exports them: x.view(x.size(0), -1) (Shape, Gather, Unsqueeze, Concat,
  Reshape) and a small transformer encoder layer at opset 13 and 17 (Shape/Gather/Mul/Div/Concat/
  Reshape/Transpose, MatMul of activations, Softmax, LayerNormalization): float against ONNX Runtime
  (|diff| <= 1e-5 * max(1, |y|)) and the QDQ form of the flatten model (u8, s8: <= 1 LSB).
- int64 input: token ids [1, 7] into an embedding Gather, exactly ONNX Runtime's rows.
- placement JSON: valid JSON, names in full (a quote, a backslash and a newline in a node name), the
  side of every node, MACs of the conv.
- Bad input, one line each and no huge allocation: a Reshape whose folded shape does not match, a
  Range with a huge count, a ConstantOfShape of a folded huge shape.
"""
import json
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import oxtest as T  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
rng = np.random.default_rng(5)


def float_vs_ort(name, path, x, tol=1e-5):
    want = T.ort(path, x)
    rc, got, err = T.infer(path, x)
    if rc != 0 or got is None:
        return T.check(name, False, f"tessera exit {rc}: {err}")
    if got.shape != want.shape:
        return T.check(name, False, f"shape {got.shape} vs ONNX Runtime {want.shape}")
    if want.dtype.kind != "f":
        return T.check(name, bool(np.array_equal(got, want)), f"{want.dtype} {want.shape} exact")
    d = np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want.astype(np.float64)))
    return T.check(name, bool(d.max() <= tol), f"{want.shape}: max rel diff {d.max():.2e}")


def export(mod, x, path, opset):
    import torch
    with torch.no_grad():
        # a symbolic batch keeps torch's shape subgraphs in the file (a static one folds them away)
        torch.onnx.export(mod, (torch.from_numpy(x),), path, opset_version=opset, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return path


def torch_cases():
    import torch
    torch.manual_seed(0)

    class Flat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(4, 6, 3, padding=1)
            self.fc = torch.nn.Linear(6 * 5 * 5, 10)

        def forward(self, x):
            y = torch.relu(self.conv(x))
            return self.fc(y.view(y.size(0), -1))

    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    cal = rng.standard_normal((16, 4, 5, 5)).astype(np.float32)
    p = export(Flat().eval(), x, "flat13.onnx", 13)
    import onnx
    fm = onnx.load(p)
    ops = {n.op_type for n in fm.graph.node}
    T.check("the export has a shape subgraph", "Shape" in ops, str(sorted(ops)))
    for act in ("u8", "s8"):
        T.against_ort(f"torch view(size(0), -1) {act}", T.quantize(fm, cal, act), x, max_lsb=1)

    class Block(torch.nn.Module):
        """Self-attention as timm's ViT writes it: reshape/permute by x.shape, Q.K^T, softmax, LayerNorm."""

        def __init__(self, c=16, h=2):
            super().__init__()
            self.h = h
            self.qkv = torch.nn.Linear(c, 3 * c)
            self.proj = torch.nn.Linear(c, c)
            self.ln = torch.nn.LayerNorm(c)

        def forward(self, x):
            b, n, c = x.shape
            qkv = self.qkv(x).reshape(b, n, 3, self.h, c // self.h).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            a = ((q @ k.transpose(-2, -1)) * (c // self.h) ** -0.5).softmax(dim=-1)
            y = (a @ v).transpose(1, 2).reshape(b, n, c)
            return self.ln(x + self.proj(y))

    layer = Block().eval()
    xt = rng.standard_normal((1, 6, 16)).astype(np.float32)
    for opset in (13, 17):
        float_vs_ort(f"torch transformer layer opset {opset}", export(layer, xt, f"enc{opset}.onnx", opset), xt)


def int64_input():
    emb = rng.standard_normal((20, 8)).astype(np.float32)
    n = helper.make_node
    m = T.model([n("Gather", ["E", "ids"], ["g"], name="embed"), n("Mul", ["g", "k"], ["Y"], name="scale")],
                [("ids", I64, [1, 7])], [("Y", F, [1, 7, 8])],
                [numpy_helper.from_array(emb, "E"), numpy_helper.from_array(np.float32(4.0), "k")])
    path = T.save(m, "embed.onnx")
    ids = np.array([[0, 3, 19, -1, 5, 5, 12]], np.int64)
    float_vs_ort("int64 token ids into Gather", path, ids, tol=0)
    bad = np.array([[0, 3, 20, 1, 5, 5, 12]], np.int64)
    rc, y, err = T.infer(path, bad)
    T.check("int64 id out of range (refused at run)", rc == 1 and y is None and len(err.splitlines()) == 1 and
            'node "embed" (Gather): index 20 (element 2 of the indices) is out of range' in err, err)


def placement_json():
    """--placement-json on conv -> Sigmoid, on configs/default.json + "ACT_LUT": 0 (without tables the
    Sigmoid is a host node: one entry of each side)."""
    cfg = T.default_config("pj_nolut.json", ACT_LUT=0)
    n = helper.make_node
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    odd = 'conv "a"\\b\nc'
    m = T.model([n("Conv", ["X", "w"], ["C"], name=odd, pads=[1, 1, 1, 1]), n("Sigmoid", ["C"], ["Y"], name="sig")],
                [("X", F, [1, 3, 6, 6])], [("Y", F, [1, 4, 6, 6])], [numpy_helper.from_array(w, "w")])
    cal = rng.standard_normal((8, 3, 6, 6)).astype(np.float32)
    q = T.quantize(m, cal, "u8")
    path = T.save(q, "pj.onnx")
    np.save("pj_in.npy", rng.standard_normal((1, 3, 6, 6)).astype(np.float32))
    r = subprocess.run([T.TSR, "infer", path, "-i", "pj_in.npy", "--quiet", "--placement-json", "-", "--config", cfg,
                        "--backend", T.BACKEND], capture_output=True, text=True, errors="replace", timeout=600)
    try:
        j = json.loads(r.stdout)
    except ValueError as e:
        T.check("placement JSON on stdout", False, f"exit {r.returncode}: {e}: {r.stdout[:200]!r}")
        return
    pl = j["placement"]
    names = [p["name"] for p in pl]
    conv = [p for p in pl if p["op"] == "Conv"]
    sig = [p for p in pl if p["op"] == "Sigmoid"]
    T.check("placement JSON: one entry per node", len(pl) == len(q.graph.node) == j["nodes"], f"{len(pl)} entries")
    # (tsr_strsafe's form: the newline as \x0a, quote and backslash as they are, escaped by JSON)
    T.check("placement JSON: name in full, escaped", 'conv "a"\\b\\x0ac' in names, str(names))
    T.check("placement JSON: conv on the device with its MACs", len(conv) == 1 and conv[0]["side"] == "device" and
            conv[0]["segment"] == 0 and conv[0]["macs"] == 4 * 36 * 27, str(conv))
    T.check("placement JSON: sigmoid on the host", len(sig) == 1 and sig[0]["side"] == "host", str(sig))
    # to a file: written with the outputs; a failing run writes none
    r = subprocess.run([T.TSR, "infer", path, "-i", "pj_in.npy", "-o", "pj_out.npy", "--quiet", "--config", cfg,
                        "--placement-json", "pj.json"], capture_output=True, text=True)
    ok = r.returncode == 0 and json.load(open("pj.json"))["segments"] == j["segments"]
    T.check("placement JSON to a file", ok, r.stderr.strip())
    np.save("pj_bad.npy", np.zeros((1, 3, 5, 5), np.float32))
    r = subprocess.run([T.TSR, "infer", path, "-i", "pj_bad.npy", "--quiet", "--config", cfg, "--placement-json",
                        "pj2.json"],
                       capture_output=True, text=True)
    T.check("placement JSON: a failing run writes no file", r.returncode == 1 and not os.path.exists("pj2.json"),
            r.stderr.strip())


def bad_inputs():
    n = helper.make_node
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    # Reshape to [Shape(x)[0], 7]: 100 elements do not make rows of 7
    nodes = [n("Shape", ["X"], ["s"]), n("Gather", ["s", "i0"], ["b"], axis=0),
             n("Unsqueeze", ["b", "ax"], ["bu"]), n("Concat", ["bu", "seven"], ["shp"], axis=0),
             n("Reshape", ["X", "shp"], ["Y"], name="rs")]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "i0"), numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(np.array([7], np.int64), "seven")]
    m = T.model(nodes, [("X", F, [1, 4, 5, 5])], [("Y", F, [1, 7])], inits)
    T.expect_error("reshape folded shape mismatch", m, 'node "rs" (Reshape): the new shape has 28 bytes, its input 400',
                   x)
    nodes = [n("Range", ["a", "b", "d"], ["r"], name="rng"), n("Cast", ["r"], ["rf"], to=F), n("Add", ["X", "rf"], ["Y"])]
    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("a", 0), ("b", 1 << 62), ("d", 1))]
    m = T.model(nodes, [("X", F, [1, 4, 5, 5])], [("Y", F, [1, 4, 5, 5])], inits)
    T.expect_error("range huge count", m, 'node "rng" (Range): 4.61169e+18 elements: at most 1048576 are folded', x)
    nodes = [n("Mul", ["big", "big"], ["sq"]), n("ConstantOfShape", ["sq"], ["z"], name="cos"),
             n("Add", ["X", "z"], ["Y"])]
    inits = [numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "big")]
    m = T.model(nodes, [("X", F, [1, 4, 5, 5])], [("Y", F, [1, 4, 5, 5])], inits)
    T.expect_error("constantofshape of a folded huge shape", m, 'node "cos" (ConstantOfShape): ', x)


def main():
    T.setup()
    torch_cases()
    int64_input()
    placement_json()
    bad_inputs()
    T.finish()


if __name__ == "__main__":
    main()
