#!/usr/bin/python3
"""test_op_vit.py TESSERA WORKDIR [BACKEND]: the quantized Adds of a ViT against ONNX Runtime.

ViT-tiny's residual Adds (two activations) and bias Adds (an activation and a constant) run on the host as
ONNX Runtime's QLinearAdd. On an x86-64 CPU with AVX2 ORT computes it in float32 (MLAS
MlasQLinearAddKernelAvx2Helper: fma(a0, r0, fma(a1, r1, zy - (r0 z0 + r1 z1))), rounded half to even),
not in MLAS's fixed-point form (half away from zero): the two differ on exact ties, 2 of 37824 values of a
ViT-tiny residual Add, and each such 1-LSB seed spreads through the following blocks. Here the scales are
powers of two, so that an eighth of the sums are ties: exact (bound 0 LSB, ORT computes from integers with
one float rounding) in u8 and s8, with each operand order of the Add.
LayerNorm's ReduceMean (float32 on the host between DQ and Q in a QDQ ViT): ORT sums a row of trailing
axes in Eigen's SSE order (two 4-float accumulators) and divides in float32; a double sum rounded once
differs in the last bit of most means (a quantized value moves when such a bit crosses a rounding
boundary). Here bit-exact (bound 0 ulp) on rows of 192 (aligned) and 190 (rows start off 16 bytes).
LayerNorm's Sqrt: ORT's is Eigen's fast-math packet sqrt (rsqrtps and one Newton step, not correctly
rounded) on all but the last n % 4 elements: bit-exact (bound 0 ulp) on 197 variances.
The MatMul of two activations (attention's Q.K^T): u8 x u8 ORT fuses into QLinearMatMul (integers, one
float rounding); int8 x int8 it runs unfused, DQ -> float32 SGEMM -> Q, whose rounding noise decides
the ties. Scales with a_scale * b_scale / y_scale = 1/2 exactly make half the outputs ties: the host
kernel (--place attn-matmul=host) exact (bound 0 LSB) in both variants; the device's matmul of two
activations (jit/tsr_bmm.h, the default) exact in u8 with EXACT_REQUANT, within 1 LSB in fixed point
(it rounds ties up) and in s8 (exact integer sums, not ORT's SGEMM noise).
"""
import json
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto as TP, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import oxtest as T  # noqa: E402


def qdq(name, scale, zp, elem):
    """Q and DQ nodes of tensor name (per-tensor constants), the dequantized tensor's name, constants."""
    s = numpy_helper.from_array(np.array(scale, np.float32), f"{name}_s")
    z = numpy_helper.from_array(np.array(zp, np.uint8 if elem == "u8" else np.int8), f"{name}_z")
    nodes = [helper.make_node("QuantizeLinear", [name, s.name, z.name], [f"{name}_q"]),
             helper.make_node("DequantizeLinear", [f"{name}_q", s.name, z.name], [f"{name}_d"])]
    return nodes, f"{name}_d", [s, z]


def tie_model(act, const_first):
    """x -> Q/DQ (2^-5) -> Tanh -> Q/DQ (2^-7); Add(x, tanh) -> Q/DQ (2^-4); then Add(c, that) with a
    constant c (2^-6; const_first: the node's input 0) -> Q/DQ (2^-4)."""
    z = 128 if act == "u8" else 0
    n1, xd, i1 = qdq("x", 2.0 ** -5, z, act)
    n2, td, i2 = qdq("t", 2.0 ** -7, z, act)
    n3, sd, i3 = qdq("s", 2.0 ** -4, z, act)
    n4, yd, i4 = qdq("y", 2.0 ** -4, z, act)
    rng = np.random.default_rng(3)
    cq = rng.integers(0 if act == "u8" else -128, 256 if act == "u8" else 128, 48).astype(
        np.uint8 if act == "u8" else np.int8)
    cs = numpy_helper.from_array(np.array(2.0 ** -6, np.float32), "c_s")
    cz = numpy_helper.from_array(np.array(z, cq.dtype), "c_z")
    cn = helper.make_node("DequantizeLinear", ["c_q", "c_s", "c_z"], ["c_d"])
    add2 = helper.make_node("Add", ["c_d", sd] if const_first else [sd, "c_d"], ["y"], name="add_bias")
    nodes = (n1 + [helper.make_node("Tanh", [xd], ["t"], name="tanh")] + n2
             + [helper.make_node("Add", [xd, td], ["s"], name="add_res")] + n3 + [cn, add2] + n4)
    return T.model(nodes, [("x", TP.FLOAT, [1, 64, 48])], [(yd, TP.FLOAT, [1, 64, 48])],
                   i1 + i2 + i3 + i4 + [numpy_helper.from_array(cq, "c_q"), cs, cz])


def kernels(path, x):
    """{node name: kernel} from tessera's --placement-json (None when it fails)."""
    np.save("pl_in.npy", x)
    r = subprocess.run([T.TSR, "infer", path, "-i", "pl_in.npy", "-o", "pl_out.npy", "--quiet", "--backend",
                        T.BACKEND, "--placement-json", "-"], capture_output=True, text=True, errors="replace",
                       timeout=600)
    if r.returncode:
        return {"error": r.stderr.strip()[-200:]}
    return {q["name"]: q["kernel"] for q in json.loads(r.stdout)["placement"]}


def reduce_mean(shape):
    """ReduceMean over the last axis of a float input, keepdims: float out."""
    return T.model([helper.make_node("ReduceMean", ["x"], ["y"], axes=[-1], name="mean")],
                   [("x", TP.FLOAT, shape)], [("y", TP.FLOAT, shape[:-1] + [1])])


def matmul_model(act):
    """x [1, 24, 24] -> Q/DQ (0.1) = a; Tanh(a) -> Q/DQ (0.3) = t; MatMul(a, t) -> Q/DQ (2 fl(0.1 * 0.3))."""
    z = 128 if act == "u8" else 0
    n1, ad, i1 = qdq("x", 0.1, z, act)
    n2, td, i2 = qdq("t", 0.3, z, act)
    n3, yd, i3 = qdq("y", 2 * float(np.float32(np.float32(0.1) * np.float32(0.3))), z, act)
    nodes = (n1 + [helper.make_node("Tanh", [ad], ["t"], name="tanh")] + n2
             + [helper.make_node("MatMul", [ad, td], ["y"], name="qk")] + n3)
    return T.model(nodes, [("x", TP.FLOAT, [1, 24, 24])], [(yd, TP.FLOAT, [1, 24, 24])], i1 + i2 + i3)


def main():
    T.setup()
    rng = np.random.default_rng(4)
    xm = (rng.standard_normal((1, 24, 24)) * 0.4).astype(np.float32)
    exact_cfg = os.path.realpath("default_exact.json")
    with open(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "configs", "default.json")) as f:
        cfg = json.load(f)
    cfg["EXACT_REQUANT"] = 1
    with open(exact_cfg, "w") as f:
        json.dump(cfg, f)
    for act in ("u8", "s8"):
        with T.placed("attn-matmul=host"):
            T.against_ort(f"matmul of activations on ties {act}, host", matmul_model(act), xm, max_lsb=0)
        T.against_ort(f"matmul of activations on ties {act}, device", matmul_model(act), xm, max_lsb=1)
        T.against_ort(f"matmul of activations on ties {act}, device exact", matmul_model(act), xm,
                      max_lsb=0 if act == "u8" else 1, extra=("--config", exact_cfg))
    rng = np.random.default_rng(2)
    v = rng.uniform(0.05, 12.0, (1, 197, 1)).astype(np.float32)
    path = T.save(T.model([helper.make_node("Sqrt", ["x"], ["y"], name="sqrt")], [("x", TP.FLOAT, [1, 197, 1])],
                          [("y", TP.FLOAT, [1, 197, 1])]), "sqrt.onnx")
    want = T.ort(path, v)
    rc, got, err = T.infer(path, v)
    ok = rc == 0 and got is not None and got.shape == want.shape and got.dtype == want.dtype
    n = int((got.view(np.uint32) != want.view(np.uint32)).sum()) if ok else -1
    T.check("sqrt: float32 bits as ORT", ok and n == 0, f"{n} of {want.size} differ" if ok else f"exit {rc}: {err}")
    for shape in ([1, 197, 192], [1, 64, 190]):
        # values as a LayerNorm sees them: dequantized u8 (multiples of a scale)
        x = ((rng.integers(0, 256, shape) - 127) * np.float32(0.0478)).astype(np.float32)
        path = T.save(reduce_mean(shape), f"mean_{shape[-1]}.onnx")
        want = T.ort(path, x)
        rc, got, err = T.infer(path, x)
        ok = rc == 0 and got is not None and got.shape == want.shape and got.dtype == want.dtype
        n = int((got.view(np.uint32) != want.view(np.uint32)).sum()) if ok else -1
        T.check(f"reduce mean {shape[-1]}: float32 bits as ORT", ok and n == 0,
                f"{n} of {want.size} differ" if ok else f"tessera exit {rc}: {err}")
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((1, 64, 48)) * 1.5).astype(np.float32)
    for act in ("u8", "s8"):
        for first in (False, True):
            m = tie_model(act, first)
            T.against_ort(f"vit adds on ties {act}{' const first' if first else ''}", m, x, max_lsb=0)
            kinds = kernels(T.save(m, f"tie_{act}.onnx"), x)
            T.check(f"vit adds {act}: on the host as QLinearAdd",
                    all(kinds.get(n) == "quantized add or mul" for n in ("add_res", "add_bias")), f"{kinds}")
    T.finish()


if __name__ == "__main__":
    main()
