#!/usr/bin/python3
"""test_op_bn.py TESSERA WORKDIR [BACKEND]: a BatchNormalization that follows no Conv (DenseNet's norm1 after a
Concat), quantized as quantize_static writes it (u8 and s8, with and without the Relu after it), bit-exact with
ONNX Runtime on every input byte of every channel.

ONNX Runtime runs DQ -> BatchNormalization -> Q in float32 (its kernel's new scale 1 / sqrt(var + eps) * scale
and new bias B - mean * new scale, x * scale + bias, then QuantizeLinear's divide and round half to even), so
an output byte is a function of the input byte alone, per channel. The importer (onnx/ops/tsr_ox_conv.c,
tsr_ox_qdq_batchnorm) computes that table for all 256 bytes and picks the device depthwise conv's weight
(int8), int32 bias and requantization multiplier so that the device gives the same bytes in both of its
requantizations (the fixed point, and fscale with EXACT_REQUANT). Here each channel sees all 256 bytes: every
output must equal ORT's, on the default config and with EXACT_REQUANT. Before (tessera at 7d0f729: weight +-w
with the scale |a| / w, the shift rounded to the bias grid) 10 and 6 of 16,384 values differed (u8, bn relu).
"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import oxtest as T  # noqa: E402

F = TensorProto.FLOAT
C, HW = 64, 16  # 16 x 16 = every byte once per channel
rng = np.random.default_rng(3033)


def bn_model(relu):
    """X -> BatchNormalization [-> Relu] -> Y, DenseNet-like parameters (scale around 1, small shifts)."""
    g = rng.standard_normal
    inits = [numpy_helper.from_array((g(C) * 0.4 + 1).astype(np.float32), "s"),
             numpy_helper.from_array((g(C) * 0.5).astype(np.float32), "bb"),
             numpy_helper.from_array((g(C) * 0.3).astype(np.float32), "mean"),
             numpy_helper.from_array((np.abs(g(C)) + 0.3).astype(np.float32), "var")]
    nodes = [helper.make_node("BatchNormalization", ["X", "s", "bb", "mean", "var"], ["N"], name="bn", epsilon=1e-5)]
    if relu:
        nodes.append(helper.make_node("Relu", ["N"], ["Y"], name="relu"))
    else:
        nodes[0].output[0] = "Y"
    return T.model(nodes, [("X", F, (1, C, HW, HW))], [("Y", F, (1, C, HW, HW))], inits)


def every_byte(q):
    """A float input whose input QuantizeLinear gives every byte of its type once in each channel."""
    inits = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    qn = next(n for n in q.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "X")
    s, z = np.float32(inits[qn.input[1]]), inits[qn.input[2]]
    b = np.arange(256) - (128 if z.dtype == np.int8 else 0)
    x = (b - int(z)).astype(np.float32) * s
    return np.tile(x.reshape(1, 1, HW, HW), (1, C, 1, 1)).astype(np.float32)


def main():
    T.setup()
    exact_cfg = T.default_config("default_exact.json", EXACT_REQUANT=1)
    for v in ("u8", "s8"):
        for relu in (True, False):
            calib = (rng.standard_normal((16, C, HW, HW)) * 1.5).astype(np.float32)
            q = T.quantize(bn_model(relu), calib, v)
            x = every_byte(q)
            name = f"bn{' relu' if relu else ''} {v}"
            T.against_ort(f"{name}, every byte", q, x, max_lsb=0)
            T.against_ort(f"{name}, every byte, EXACT_REQUANT", q, x, max_lsb=0, extra=("--config", exact_cfg))
    no_exact_form(exact_cfg)
    T.finish()


# DenseNet-121 BNs at 64x64 (scripts/zoo: build.py, qdq.py --calib 8) with channels that no int8 depthwise conv
# reproduces: input/output scales and zero points, epsilon, then per channel (running mean, running var); the
# scale is 1 and B 0 (torchvision's init). The last channel of each is one that has an exact conv.
REAL_BNS = (("u8 norm5", "u8", 0.022784199565649033, 142, 0.016375545412302017, 0, 9.999999747378752e-06,
             ((-0.8203443288803101, 0.24151305854320526), (0.2505950927734375, 0.3101878762245178),
              (0.6600202918052673, 0.16943944990634918))),
            ("s8 transition3.norm", "s8", 0.03393728658556938, 0, 0.03714955598115921, 0, 9.999999747378752e-06,
             ((-1.6629847288131714, 0.3167839050292969), (-0.20374606549739838, 0.6713756918907166),
              (-0.5428141355514526, 0.6003155708312988), (0.23767445981502533, 0.4974433183670044),
              (0.10194966942071915, 0.4707414507865906), (-0.28005799651145935, 0.3001626133918762))))


def no_exact_form(exact_cfg):
    """Real BNs with channels that have no exact device conv (a slope/offset ratio no bias / weight with
    |weight| <= 127 gives): on the default config the device conv, within 1 LSB; with EXACT_REQUANT the whole BN
    runs as the host's per-channel table of ONNX Runtime's bytes, 0 differ, and the placement says why (before:
    on the device there too, 2 and 6 of the 256 x C values 1 LSB off)."""
    mk, n = helper.make_tensor, helper.make_node
    for name, v, xs, xz, ys, yz, eps, ch in REAL_BNS:
        c = len(ch)
        qt = TensorProto.INT8 if v == "s8" else TensorProto.UINT8
        inits = [mk("xs", F, [], [xs]), mk("xz", qt, [], [xz]), mk("ys", F, [], [ys]), mk("yz", qt, [], [yz]),
                 mk("s", F, [c], [1.0] * c), mk("bb", F, [c], [0.0] * c), mk("mean", F, [c], [p[0] for p in ch]),
                 mk("var", F, [c], [p[1] for p in ch])]
        nodes = [n("QuantizeLinear", ["X", "xs", "xz"], ["Xq"]), n("DequantizeLinear", ["Xq", "xs", "xz"], ["Xd"]),
                 n("BatchNormalization", ["Xd", "s", "bb", "mean", "var"], ["N"], name="bn", epsilon=eps),
                 n("QuantizeLinear", ["N", "ys", "yz"], ["Y"])]
        m = T.model(nodes, [("X", F, (1, c, HW, HW))], [("Y", qt, (1, c, HW, HW))], inits)
        b = np.arange(256) - (128 if v == "s8" else 0)
        x = np.tile(((b - xz).astype(np.float32) * np.float32(xs)).reshape(1, 1, HW, HW), (1, c, 1, 1))
        path = T.save(m, "bn_real.onnx")
        want = T.ort(path, x.astype(np.float32))
        rc, got, err = T.infer(path, x)
        mx, nd = T.diff_lsb(got, want) if rc == 0 else (None, None)
        T.check(f"{name}, default", rc == 0 and mx <= 1, f"max |diff| {mx} LSB, {nd} of {256 * c} differ (bound 1)"
                if rc == 0 else err)
        np.save("bn_real_x.npy", x)  # EXACT_REQUANT, with the placement printed
        r = subprocess.run([T.TSR, "infer", path, "-i", "bn_real_x.npy", "-o", "bn_real_y.npy", "--backend",
                            T.BACKEND, "--config", exact_cfg], capture_output=True, text=True, errors="replace",
                           timeout=600)
        mx, nd = T.diff_lsb(np.load("bn_real_y.npy"), want) if r.returncode == 0 else (None, None)
        T.check(f"{name}, EXACT_REQUANT", r.returncode == 0 and mx == 0,
                f"max |diff| {mx} LSB, {nd} of {256 * c} differ (bound 0)")
        line = [ln.strip() for ln in r.stdout.splitlines() if ln.split()[:1] == ["bn"]]
        T.check(f"{name}: on the host, saying why", bool(line) and line[0].endswith(
            "host (quantized per-channel lookup table: no exact integer form on the device, EXACT_REQUANT)"),
            line[0] if line else r.stderr.strip()[-200:])


if __name__ == "__main__":
    main()
