#!/usr/bin/env python3
"""test_op_matmul.py: transformer matmuls against ONNX Runtime (uint8 and int8 activations).

- MatMul of a 3-D activation [B, S, K] by a constant [K, N] (a Linear layer): the device dense over
  the B*S rows, exact against ONNX Runtime's QLinearMatMul up to its float32 requantization (<= 1
  LSB: ORT multiplies the int32 sum by a float32 scale, the device by a fixed-point multiplier).
- a torch-exported attention block (Linear layers, Q.K^T, softmax, attn.V, the output Linear),
  quantized: the output against ONNX Runtime, and its device share of the MACs from
  `tessera infer --placement-json`: all of them, Q.K^T and attn.V as device matmuls of two
  activations (jit/tsr_bmm.h), each within 1 LSB of the host's ORT arithmetic (--place attn-matmul=host)
  on its own output; with --place attn-matmul=host they are the host's integer kernel.
usage: test_op_matmul.py TESSERA WORKDIR [BACKEND]
"""
import io
import json
import os
import subprocess

import numpy as np
import onnx
from onnx import TensorProto as TP, helper, numpy_helper

import oxtest as T
import zoo  # scripts/zoo/zoo.py: macs_per_node, parse_placement (the zoo table's device share)

kernels = {}  # node name -> kernel, from the last device_share run


def device_share(path, x):
    """(share of the MatMul/Gemm/Conv MACs on the device, placement dict) from --placement-json."""
    np.save("share_in.npy", x)
    r = subprocess.run([T.TSR, "infer", path, "-i", "share_in.npy", "-o", "share_out.npy", "--quiet",
                        "--backend", T.BACKEND, "--placement-json", "-", *T.place_args()], capture_output=True, text=True,
                       errors="replace", timeout=600)
    p = zoo.parse_placement(r.stdout) if r.returncode == 0 else None
    if p is None:
        return None, r.stderr.strip()[-300:]
    global kernels
    kernels = {q["name"]: q["kernel"] for q in json.loads(r.stdout)["placement"]}
    macs = zoo.macs_per_node(onnx.load(path))
    total = sum(macs.values())
    dev = sum(macs.get(k, 0) for k, w in p[2] if w.startswith("device"))
    return (dev / total if total else None), p


def linear3d(act):
    """MatMul [1, 24, 40] x constant [40, 24]: the dense over 24 rows."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array((rng.standard_normal((40, 24)) * 0.2).astype(np.float32), "w")
    m = T.model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [("x", TP.FLOAT, [1, 24, 40])],
                [("y", TP.FLOAT, [1, 24, 24])], [w])
    calib = rng.standard_normal((8, 24, 40)).astype(np.float32)
    q = T.quantize(m, calib, act)
    x = rng.standard_normal((1, 24, 40)).astype(np.float32)
    T.against_ort(f"matmul 3-D x const {act}", q, x, max_lsb=1)
    path = T.save(q, f"mm3d_{act}.onnx")
    share, p = device_share(path, x)
    T.check(f"matmul 3-D x const {act}: on the device", share == 1.0, f"device share {share} {p if share is None else ''}")


def add_const(act):
    """Add of an activation [1, 64, 48] and a constant: a bias [48] (first operand, as torch writes
    a Linear's) and a position embedding [1, 64, 48]: ONNX Runtime's QLinearAdd, exact."""
    rng = np.random.default_rng(7)
    bias = numpy_helper.from_array((rng.standard_normal(48) * 0.5).astype(np.float32), "bias")
    pos = numpy_helper.from_array((rng.standard_normal((1, 64, 48)) * 2).astype(np.float32), "pos")
    m = T.model([helper.make_node("Add", ["bias", "x"], ["t"], name="add_bias"),
                 helper.make_node("Add", ["t", "pos"], ["y"], name="add_pos")],
                [("x", TP.FLOAT, [1, 64, 48])], [("y", TP.FLOAT, [1, 64, 48])], [bias, pos])
    calib = (rng.standard_normal((8, 64, 48)) * 3).astype(np.float32)
    q = T.quantize(m, calib, act)
    x = (rng.standard_normal((1, 64, 48)) * 3).astype(np.float32)
    T.against_ort(f"add of constants {act}", q, x, max_lsb=0)
    device_share(T.save(q, f"addc_{act}.onnx"), x)
    k = [kernels.get(n) for n in ("add_bias", "add_pos")]
    T.check(f"add of constants {act}: integer", k == ["quantized add or mul"] * 2, f"{k}")
    # a constant whose scale is below 2^-14 of the output's: MLAS's float form of QLinearAdd
    tiny = numpy_helper.from_array((rng.standard_normal(48) * 1e-6).astype(np.float32), "tiny")
    m = T.model([helper.make_node("Add", ["x", "tiny"], ["y"], name="add_tiny")], [("x", TP.FLOAT, [1, 64, 48])],
                [("y", TP.FLOAT, [1, 64, 48])], [tiny])
    T.against_ort(f"add of a tiny constant {act}", T.quantize(m, calib, act), x, max_lsb=0)
    # Mul by a constant (LayerNorm's weight) and of two activations (GELU's x * (1 + erf)), and the
    # Add of two activations off the device: ONNX Runtime's QLinearMul / QLinearAdd, exact
    g = numpy_helper.from_array((rng.standard_normal(48) * 0.7).astype(np.float32), "g")
    m = T.model([helper.make_node("Mul", ["x", "g"], ["t"], name="mul_const"),
                 helper.make_node("Tanh", ["x"], ["u"], name="tanh"),
                 helper.make_node("Mul", ["t", "u"], ["v"], name="mul_act"),
                 helper.make_node("Add", ["v", "u"], ["y"], name="add_act")],
                [("x", TP.FLOAT, [1, 64, 48])], [("y", TP.FLOAT, [1, 64, 48])], [g])
    q = T.quantize(m, calib, act)
    T.against_ort(f"mul and add of activations {act}", q, x, max_lsb=0)
    device_share(T.save(q, f"mul_{act}.onnx"), x)
    k = [kernels.get(n) for n in ("mul_const", "mul_act", "add_act")]
    T.check(f"mul and add of activations {act}: integer", k == ["quantized add or mul"] * 3, f"{k}")


def attention_model():
    import torch

    class Attn(torch.nn.Module):
        def __init__(self, d=32, h=2):
            super().__init__()
            self.h, self.dk = h, d // h
            self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))

        def forward(self, x):
            b, s, d = x.shape
            def heads(t):
                return t.reshape(b, s, self.h, self.dk).transpose(1, 2)
            q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
            a = torch.softmax(q @ k.transpose(-1, -2) / self.dk ** 0.5, dim=-1)
            return self.o((a @ v).transpose(1, 2).reshape(b, s, d))

    torch.manual_seed(0)
    f = io.BytesIO()
    torch.onnx.export(Attn().eval(), torch.randn(1, 16, 32), f, opset_version=13,
                      input_names=["x"], output_names=["y"])
    return onnx.load_from_string(f.getvalue())


def two_act_kernels(q):
    aa = {n.name: kernels.get(n.name) for n in q.graph.node if n.op_type == "MatMul"}
    return aa, [k for n, k in aa.items() if k != "dense"]


def matmul_alone(path, x, q):
    """Each matmul of two activations against ORT's QLinearMatMul arithmetic on tessera's own operands
    of it (the int32 sum of (a - a_zp)(b - b_zp), times float32 a_scale * b_scale / y_scale, rounded
    half to even): {node: (max LSB, elements differing)}, or an error."""
    init = {i.name: numpy_helper.to_array(i) for i in q.graph.initializer}
    prod = {o: n for n in q.graph.node for o in n.output}
    cons = {}
    for n in q.graph.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)
    mms, names = [], []
    for n in q.graph.node:
        if n.op_type != "MatMul" or n.name not in ("/MatMul", "/MatMul_1"):
            continue
        da, db, qy = prod[n.input[0]], prod[n.input[1]], cons[n.output[0]][0]
        mms.append((n.name, da, db, qy))
        names += [da.input[0], db.input[0], qy.output[0]]
    extra = [a for i, nm in enumerate(names) for a in ("--tensor", f"{nm}=mt{i}.npy")]
    rc, _, err = T.infer(path, x, extra)
    if rc:
        return err
    out = {}
    for j, (name, da, db, qy) in enumerate(mms):
        a, b, y = (np.load(f"mt{3 * j + i}.npy").astype(np.int64) for i in range(3))
        sa, za = np.float32(init[da.input[1]]), int(init[da.input[2]])
        sb, zb = np.float32(init[db.input[1]]), int(init[db.input[2]])
        sy, zy = np.float32(init[qy.input[1]]), int(init[qy.input[2]])
        acc = np.matmul(a - za, b - zb).astype(np.float32)
        lo, hi = (0, 255) if init[qy.input[2]].dtype == np.uint8 else (-128, 127)
        want = np.clip(np.rint(acc * np.float32(sa * sb / sy)) + zy, lo, hi)
        out[name] = T.diff_lsb(y, want)
    return out


def attention(act, fm):
    rng = np.random.default_rng(5)
    calib = rng.standard_normal((8, 16, 32)).astype(np.float32)
    q = T.quantize(fm, calib, act)
    x = rng.standard_normal((1, 16, 32)).astype(np.float32)
    # ORT requantizes every matmul through float32 (<= 1 LSB each; two int8 activations it multiplies
    # as a float32 SGEMM, the device in integers); the chain of six quantized operators can add those
    # up: 2 LSB of the final output (u8), 3 (s8: the device's exact Q.K^T sums flip a few elements by
    # 1 LSB, which the softmax and attn.V carry on)
    T.against_ort(f"attention block {act}", q, x, max_lsb=2 if act == "u8" else 3)
    path = T.save(q, f"attn_{act}.onnx")
    share, p = device_share(path, x)
    T.check(f"attention block {act}: MACs on the device", share is not None and share >= 0.999,
            f"device share {share if share is None else f'{share:.1%}'}"
            f"{'' if share is None else f' ({p[0]} segments, {p[1]} host ops)'}")
    # Q.K^T and attention.V (two activations): device matmuls of two activations; on the host
    # (--place attn-matmul=host) ORT's QLinearMatMul arithmetic (integer sums), not the float
    # matmul of dequantized values
    aa, qq = two_act_kernels(q)
    T.check(f"attention block {act}: Q.K^T, attn.V on the device", len(qq) == 2 and
            all(k == "matmul of two activations" for k in qq), f"{aa}")
    alone = matmul_alone(path, x, q)
    T.check(f"attention block {act}: each matmul alone", isinstance(alone, dict) and len(alone) == 2 and
            all(d[0] <= 1 for d in alone.values()), f"{alone} (max LSB, elements differing)")
    with T.placed("attn-matmul=host"):
        device_share(path, x)
        aa, qq = two_act_kernels(q)
    T.check(f"attention block {act}: --place attn-matmul=host", len(qq) == 2 and
            all(k == "quantized batched matmul" for k in qq), f"{aa}")
    return share


def main():
    T.setup()
    try:
        fm = attention_model()
    except Exception as e:  # torch's exporter absent or refusing: the onnx.helper cases still run
        fm = None
        print(f"note: no torch export ({type(e).__name__}: {e})")
    for act in ("u8", "s8"):
        linear3d(act)
        add_const(act)
        if fm is not None:
            attention(act, fm)
    T.finish()


if __name__ == "__main__":
    main()
