#!/usr/bin/python3
"""test_op_float.py TESSERA WORKDIR [BACKEND]: the standard float ops on the host (ops/tsr_ox_math.c,
tsr_onnx_hostf.c) against ONNX Runtime: activations and math, in QDQ models quantized as quantize_static
writes them (u8 and s8; X -> Conv -> OP -> Y) and as plain float models.

Bounds: where the quantizer puts a QuantizeLinear after the op (Sigmoid, LeakyRelu, Clip, Mul, Add,
MatMul, Softmax, Gather, Transpose, Where, LayerNormalization: quantize_static's op list) the output is
compared in LSBs of its scale: Softmax exact (ONNX Runtime fuses DQ -> Softmax -> Q into its integer
QLinearSoftmax, which the host reproduces), the others <= 1 LSB (the host computes in double rounded to float32, ONNX Runtime
with its own float32 approximations, so a value on a rounding boundary may go either way). Ops the
quantizer leaves in float (HardSigmoid, HardSwish, Tanh, Erf, Div, Sub, Pow, Sqrt, ReduceMean, ...) give
a float output: |diff| <= 1e-5 * max(1, |y|).
Config: configs/default.json + "ACT_LUT": 0 (written to the work directory): without activation tables
the quantized activations after the conv stay host kernels (with them they would be device tables,
test_op_act).
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import oxtest as T  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(7)
SHAPE = [1, 8, 5, 6]


def float_vs_ort(name, m, x, tol=1e-5):
    """Run m (float output) on tessera and ONNX Runtime: |diff| <= tol * max(1, |want|)."""
    path = T.save(m, name.replace(" ", "_") + ".onnx")
    want = T.ort(path, x)
    rc, got, err = T.infer(path, x)
    if rc != 0 or got is None:
        return T.check(name, False, f"tessera exit {rc}: {err}")
    if got.shape != want.shape or got.dtype != want.dtype:
        return T.check(name, False, f"shape/dtype {got.shape} {got.dtype} vs {want.shape} {want.dtype}")
    d = np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want.astype(np.float64)))
    return T.check(name, bool(d.max() <= tol) if d.size else True, f"{want.shape}: max rel diff {d.max():.2e}")


def conv_then(op_nodes, yshape, extra_inits=(), opset=13):
    """X -> 1x1 Conv (B) -> op_nodes (reading B, writing Y)."""
    w = (rng.standard_normal((SHAPE[1], SHAPE[1], 1, 1)) * 0.6).astype(np.float32)
    nodes = [helper.make_node("Conv", ["X", "w"], ["B"], name="conv")] + op_nodes
    return T.model(nodes, [("X", F, SHAPE)], [("Y", F, yshape)],
                   [numpy_helper.from_array(w, "w")] + list(extra_inits), opset=opset)


def c(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


# vit_tiny u8 at 224x224 (scripts/zoo build.py + qdq.py), encoder layer 10's attention Softmax: one row of its
# input bytes (197 keys, head 1, query 96, on the zoo's input 6), x_scale 0.01704006 zero point 127, y 1/255, 0
VIT_ROW = ("797d79727e7c775761658b43423e4d6768676d7c723d3f718f5f575159514e565c6675281d517a7072635b5b5d52384b7b71"
           "69676e77705052806753618c809398766b717a8b914e576e7e8f7f737470637b8f9fa1565759788b7e6a6667789172747c58"
           "4e607087767564625464535b52665d585c53666f4f4a5c6263655e5b635958675a544c5c54606c7071655e4b3c58595f5b58"
           "5f56536f7b695b56546a61534b566852445d665e666c756d67504d7a8b8789746a6e5d788871604b4a99878d838288")


def softmax_vit_row():
    """ORT's QLinearSoftmax table shift is log(FLT_MAX / L) with the quotient and the log in float32: in double
    (the host kernel before) the table is a few ulps off and 3 of this row's 197 bytes differ by 1 LSB."""
    F32, U8 = TensorProto.FLOAT, TensorProto.UINT8
    mk, n = helper.make_tensor, helper.make_node
    xs, ys = 0.017040058970451355, 0.003921568859368563
    inits = [mk("xs", F32, [], [xs]), mk("xz", U8, [], [127]), mk("ys", F32, [], [ys]), mk("yz", U8, [], [0])]
    nodes = [n("QuantizeLinear", ["X", "xs", "xz"], ["Xq"]), n("DequantizeLinear", ["Xq", "xs", "xz"], ["Xd"]),
             n("Softmax", ["Xd"], ["S"], axis=-1), n("QuantizeLinear", ["S", "ys", "yz"], ["Y"])]
    m = T.model(nodes, [("X", F32, (1, 197))], [("Y", U8, (1, 197))], inits)
    b = np.frombuffer(bytes.fromhex(VIT_ROW), np.uint8).astype(np.float32)
    T.against_ort("softmax vit_tiny layer 10 row", m, ((b - 127) * np.float32(xs))[None].astype(np.float32), max_lsb=0)


def main():
    T.setup()
    T.CONFIG = T.default_config("float_nolut.json", ACT_LUT=0)
    cal = rng.standard_normal((16, *SHAPE[1:])).astype(np.float32)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    n = helper.make_node
    # (name, nodes reading B writing Y, output shape, constants, quantized output (LSB compare), opset)
    cases = [
        ("sigmoid", [n("Sigmoid", ["B"], ["Y"])], SHAPE, [], True, 13),
        ("leakyrelu", [n("LeakyRelu", ["B"], ["Y"], alpha=0.1)], SHAPE, [], True, 13),
        ("clip float", [n("Clip", ["B", "lo", "hi"], ["Y"])], SHAPE, [c("lo", np.float32(-0.5)),
                                                                    c("hi", np.float32(0.7))], True, 13),
        ("mul by vector", [n("Mul", ["B", "v"], ["Y"])], SHAPE,
         [c("v", rng.standard_normal((SHAPE[1], 1, 1)).astype(np.float32))], True, 13),
        ("add broadcast", [n("Add", ["B", "v"], ["Y"])], SHAPE,
         [c("v", rng.standard_normal((SHAPE[3],)).astype(np.float32))], True, 13),
        ("softmax last", [n("Softmax", ["B"], ["Y"], axis=-1)], SHAPE, [], True, 13),
        ("softmax axis 1", [n("Softmax", ["B"], ["Y"], axis=1)], SHAPE, [], True, 13),
        ("transpose moves", [n("Transpose", ["B"], ["Y"], perm=[0, 2, 3, 1])],
         [SHAPE[0], SHAPE[2], SHAPE[3], SHAPE[1]], [], True, 13),
        ("layernorm", [n("LayerNormalization", ["B", "g", "bb"], ["Y"], axis=-1, epsilon=1e-5)], SHAPE,
         [c("g", rng.standard_normal(SHAPE[3]).astype(np.float32)),
          c("bb", rng.standard_normal(SHAPE[3]).astype(np.float32))], True, 17),
        ("hardsigmoid", [n("HardSigmoid", ["B"], ["Y"], alpha=1 / 6, beta=0.5)], SHAPE, [], False, 13),
        ("hardswish", [n("HardSwish", ["B"], ["Y"])], SHAPE, [], False, 14),
        ("tanh", [n("Tanh", ["B"], ["Y"])], SHAPE, [], False, 13),
        ("erf", [n("Erf", ["B"], ["Y"])], SHAPE, [], False, 13),
        ("div sub pow", [n("Div", ["B", "two"], ["D"]), n("Sub", ["D", "one"], ["S"]),
                         n("Pow", ["S", "two"], ["Y"])], SHAPE,
         [c("two", np.float32(2.0)), c("one", np.float32(1.0))], False, 13),
        ("sqrt reciprocal", [n("Abs", ["B"], ["A"]), n("Sqrt", ["A"], ["S"]), n("Add", ["S", "one"], ["P"]),
                             n("Reciprocal", ["P"], ["Y"])], SHAPE, [c("one", np.float32(1.0))], False, 13),
        ("reducemean axes", [n("ReduceMean", ["B"], ["Y"], axes=[1, 3], keepdims=1)],
         [SHAPE[0], 1, SHAPE[2], 1], [], False, 13),
    ]
    for act in ("u8", "s8"):
        for name, nodes, ysh, inits, quant, opset in cases:
            m = conv_then(nodes, ysh, inits, opset)
            q = T.quantize(m, cal, act)
            if quant:
                # DQ -> Softmax -> Q is ORT's integer QLinearSoftmax: exact
                T.against_ort(f"{name} {act}", q, x, max_lsb=0 if name.startswith("softmax") else 1)
            else:
                float_vs_ort(f"{name} {act}", q, x)
    softmax_vit_row()
    # the decomposed LayerNorm (ReduceMean/Sub/Pow/Sqrt/Div) of a transformer exported at opset 13,
    # and a MatMul of two activations (attention's Q.K^T), plain float
    nodes = [n("ReduceMean", ["X"], ["mu"], axes=[-1]), n("Sub", ["X", "mu"], ["d"]),
             n("Pow", ["d", "two"], ["d2"]), n("ReduceMean", ["d2"], ["var"], axes=[-1]),
             n("Add", ["var", "eps"], ["ve"]), n("Sqrt", ["ve"], ["sd"]), n("Div", ["d", "sd"], ["Y"])]
    m = T.model(nodes, [("X", F, SHAPE)], [("Y", F, SHAPE)], [c("two", np.float32(2)), c("eps", np.float32(1e-5))])
    float_vs_ort("layernorm decomposed float", m, x)
    nodes = [n("Transpose", ["X"], ["Xt"], perm=[0, 1, 3, 2]), n("MatMul", ["X", "Xt"], ["Y"])]
    m = T.model(nodes, [("X", F, SHAPE)], [("Y", F, [1, 8, 5, 5])])
    float_vs_ort("matmul of activations float", m, x)
    nodes = [n("Gelu", ["X"], ["Y"])]
    m = T.model(nodes, [("X", F, SHAPE)], [("Y", F, SHAPE)], opset=20)
    float_vs_ort("gelu opset 20 float", m, x)
    nodes = [n("Slice", ["X", "st", "en", "ax", "sp"], ["Y"])]
    m = T.model(nodes, [("X", F, SHAPE)], [("Y", F, [1, 8, 3, 6])],
                [c("st", np.array([-1], np.int64)), c("en", np.array([-9], np.int64)),
                 c("ax", np.array([2], np.int64)), c("sp", np.array([-2], np.int64))])
    float_vs_ort("slice negative step float", m, x, tol=0)
    # refusals: one line naming the node
    nodes = [n("Gather", ["X", "ix"], ["Y"], name="g", axis=1)]
    m = T.model(nodes, [("X", F, SHAPE)], [("Y", F, [1, 2, 5, 6])], [c("ix", np.array([0, 8], np.int64))])
    T.expect_error("gather index out of range", m, 'node "g" (Gather): index 8 (element 1 of the indices) is out '
                   "of range for a dimension of 8", x)
    nodes = [n("Add", ["X", "v"], ["Y"], name="badd")]
    m = T.model(nodes, [("X", F, SHAPE)], [("Y", F, SHAPE)], [c("v", np.ones(4, np.float32))])
    T.expect_error("add shapes do not broadcast", m, 'node "badd" (Add): the inputs\' shapes do not broadcast', x)
    T.finish()


if __name__ == "__main__":
    main()
