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
    T.finish()


if __name__ == "__main__":
    main()
