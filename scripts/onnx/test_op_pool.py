#!/usr/bin/python3
"""test_op_pool.py TESSERA WORKDIR [BACKEND]: the pool family (MaxPool, AveragePool, GlobalAveragePool,
ReduceMean over the spatial axes) quantized as quantize_static writes them (u8 and s8), against ONNX
Runtime.

Bounds, per operator: ONNX Runtime rounds a pool's requantization in float (QLinearAveragePool /
QLinearGlobalAveragePool, or DQ -> float pool -> Q: one float rounding); tessera rounds once in fixed
point (the conv epilogue's multiplier x_scale / (count * y_scale)), so each average is within 1 LSB.
A max pool that keeps its input's quantization is exact (max commutes with the monotone DQ/Q). An
average whose output keeps the input's quantization is the device pool, rounded half away from zero
where ORT rounds half to even: 1 LSB at ties; with EXACT_REQUANT the device rounds them half to even too
(avg_ties: exact; at 7d0f729, before, 132 of its 1,024 u8 outputs were 1 LSB off).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import oxtest as T  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(30)


def pool_model(node, xshape, yshape, inits=(), opset=13):
    """X -> Conv 1x1 (so the pool reads a device tensor) -> node -> Y."""
    c = xshape[1]
    w = numpy_helper.from_array((rng.standard_normal((c, c, 1, 1)) * 0.5).astype(np.float32), "cw")
    b = numpy_helper.from_array((rng.standard_normal(c) * 0.1).astype(np.float32), "cb")
    conv = helper.make_node("Conv", ["X", "cw", "cb"], ["H"], name="conv")
    return T.model([conv, node], [("X", F, xshape)], [("Y", F, yshape)], [w, b, *inits], opset=opset)


def data(shape, n=16):
    return rng.standard_normal((n, *shape[1:])).astype(np.float32), rng.standard_normal(shape).astype(np.float32)


def own_scale(m, factor):
    """Give the graph output's QuantizeLinear/DequantizeLinear pair (the pool's) a scale of its own,
    factor times the one the quantizer wrote (MaxPool and AveragePool reuse their input's, as
    quantize_static does; other tools may not): a new initializer, the shared one stays. m is copied."""
    c = onnx.ModelProto()
    c.CopyFrom(m)
    m = c
    y = m.graph.output[0].name
    dq = next(n for n in m.graph.node if y in n.output)
    q = next(n for n in m.graph.node if dq.input[0] in n.output)
    old = q.input[1]
    init = next(t for t in m.graph.initializer if t.name == old)
    s = (numpy_helper.to_array(init) * np.float32(factor)).astype(np.float32)
    m.graph.initializer.append(numpy_helper.from_array(s, "own_y_scale"))
    q.input[1] = dq.input[1] = "own_y_scale"
    return m


def mean_model(node, xshape, mshape, yshape, opset=13, inits=()):
    """pool_model, then a Gemm (keepdims 0) or a 1x1 Conv after the ReduceMean ("M"): the quantizer
    quantizes a ReduceMean's output only for such a consumer (mnasnet: ReduceMean -> Gemm)."""
    m = pool_model(node, xshape, yshape, inits, opset)
    c = xshape[1]
    w = (rng.standard_normal((c, c) if len(mshape) == 2 else (c, c, 1, 1)) * 0.3).astype(np.float32)
    m.graph.initializer.append(numpy_helper.from_array(w, "gw"))
    op = "Gemm" if len(mshape) == 2 else "Conv"
    m.graph.node.append(helper.make_node(op, ["M", "gw"], ["Y"], name="after", **({"transB": 1} if op == "Gemm"
                                                                                   else {})))
    return m


def cut_at(m, tensor):
    """The quantized model m ending at the DequantizeLinear of `tensor`'s QuantizeLinear (the graph
    output becomes it; nodes after it go): the operator that produces `tensor` compared alone."""
    q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == tensor)
    dq = next(n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.input[0] == q.output[0])
    keep, need = [], {dq.output[0]}
    for n in reversed(list(m.graph.node)):
        if any(o in need for o in n.output):
            keep.append(n)
            need.update(i for i in n.input if i)
    del m.graph.node[:]
    m.graph.node.extend(reversed(keep))
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info(dq.output[0], F, None))
    return m


def q_path(m, name):
    return T.save(m, name + ".onnx")


def main():
    T.setup()
    for act in ("u8", "s8"):
        # GlobalAveragePool: the quantizer gives its output its own range (resnet18's first refusal)
        sh = [1, 24, 7, 7]
        cal, x = data(sh)
        m = pool_model(helper.make_node("GlobalAveragePool", ["H"], ["Y"], name="gap"), sh, [1, 24, 1, 1])
        T.against_ort(f"gap own scale {act}", T.quantize(m, cal, act), x, max_lsb=1)
        sh2 = [1, 16, 14, 14]  # a window the conv takes (14x14)
        cal2, x2 = data(sh2)
        m = pool_model(helper.make_node("GlobalAveragePool", ["H"], ["Y"], name="gap"), sh2, [1, 16, 1, 1])
        T.against_ort(f"gap 14x14 own scale {act}", T.quantize(m, cal2, act), x2, max_lsb=1)
        # ReduceMean over H, W (mnasnet's first refusal), keepdims 1 and 0, axes as attribute and input
        for axes, keep, ms in (([2, 3], 1, [1, 24, 1, 1]), ([-1, -2], 0, [1, 24])):
            m = mean_model(helper.make_node("ReduceMean", ["H"], ["M"], name="rm", axes=axes, keepdims=keep),
                           sh, ms, ms)
            T.against_ort(f"reducemean {axes} keepdims {keep} {act}", cut_at(T.quantize(m, cal, act), "M"), x,
                          max_lsb=1)
        ax = numpy_helper.from_array(np.array([2, 3], np.int64), "axes")
        m = mean_model(helper.make_node("ReduceMean", ["H", "axes"], ["M"], name="rm", keepdims=0), sh, [1, 24],
                       [1, 24], opset=18, inits=[ax])
        T.against_ort(f"reducemean opset18 {act}", cut_at(T.quantize(m, cal, act), "M"), x, max_lsb=1)
        # MaxPool ceil_mode (squeezenet1_1, googlenet): exact
        sh3 = [1, 16, 13, 13]
        cal3, x3 = data(sh3)
        for k, s, pads, oh in ((3, 2, [0, 0, 0, 0], 6), (2, 2, [0, 0, 0, 0], 7), (3, 2, [1, 1, 1, 1], 7)):
            m = pool_model(helper.make_node("MaxPool", ["H"], ["Y"], name="mp", kernel_shape=[k, k], strides=[s, s],
                                            pads=pads, ceil_mode=1), sh3, [1, 16, oh, oh])
            T.against_ort(f"maxpool ceil k{k}s{s}p{pads[0]} {act}", T.quantize(m, cal3, act), x3, max_lsb=0)
        # MaxPool whose output has its own scale: max, then a requantize
        m = pool_model(helper.make_node("MaxPool", ["H"], ["Y"], name="mp", kernel_shape=[3, 3], strides=[2, 2],
                                        ceil_mode=1), sh3, [1, 16, 6, 6])
        T.against_ort(f"maxpool own scale {act}", own_scale(T.quantize(m, cal3, act), 1.7), x3, max_lsb=1)
        # AveragePool, count_include_pad 0 / 1, pads, its input's scale (device pool) and its own
        for cip in (0, 1):
            m = pool_model(helper.make_node("AveragePool", ["H"], ["Y"], name="ap", kernel_shape=[3, 3],
                                            strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=cip),
                           sh3, [1, 16, 7, 7])
            q = T.quantize(m, cal3, act)
            T.against_ort(f"avgpool cip{cip} {act}", q, x3, max_lsb=1)
            # a coarser output scale: with count_include_pad 0 and padding (the count varies) the device
            # pool then a device requantize (two roundings, <= 0.5 * 1/1.7 + 0.5 LSB)
            T.against_ort(f"avgpool cip{cip} own scale {act}", own_scale(q, 1.7), x3, max_lsb=1)
            if cip:  # count_include_pad 1: the fused form for a finer output scale too
                T.against_ort(f"avgpool cip1 finer scale {act}", own_scale(q, 0.3), x3, max_lsb=1)
        # a global average wider than the conv's 64x64 window, output finer than the input: the device's
        # global average (jit/tsr_gavg.h: the exact window sum, then the fused form's requantization; it
        # ran on the host in float, DQ -> mean -> Q, before)
        sh4 = [1, 8, 72, 72]
        cal4, x4 = data(sh4, 4)
        m = pool_model(helper.make_node("GlobalAveragePool", ["H"], ["Y"], name="gap"), sh4, [1, 8, 1, 1])
        q = T.quantize(m, cal4, act)
        T.against_ort(f"gap 72x72 {act}", q, x4, max_lsb=1)
        rc, out = T.placement(q_path(q, f"gap72_{act}"), x4)
        line = next((ln for ln in out.splitlines() if " GlobalAveragePool " in ln), "")
        T.check(f"gap 72x72 placed on the device {act}", rc == 0 and "device" in line and "global average" in line,
                line)
        # the squeeze-and-excite global averages of mobilenet_v3_small / efficientnet_b0 at 224: windows
        # within 64x64 that the device conv's buffers cannot hold (56x56: 3136 input and weight rows; the
        # default config holds 2048 / 1024), channels as the SE blocks'; own scale, finer than the input's
        for sh5 in ([1, 16, 56, 56], [1, 96, 56, 56], [1, 40, 28, 28], [1, 24, 32, 32]):
            cal5, x5 = data(sh5, 2)
            m = pool_model(helper.make_node("GlobalAveragePool", ["H"], ["Y"], name="gap"), sh5, [*sh5[:2], 1, 1])
            T.against_ort(f"gap {sh5[2]}x{sh5[3]} c{sh5[1]} {act}", T.quantize(m, cal5, act), x5[:1], max_lsb=1)
    # refusals stay one line naming the node
    sh = [1, 8, 6, 6]
    cal, x = data(sh)
    m = mean_model(helper.make_node("ReduceMean", ["H"], ["M"], name="rm_c", axes=[1], keepdims=1),
                   sh, [1, 1, 6, 6], [1, 1, 6, 6])
    m.graph.initializer[-1].CopyFrom(numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "gw"))
    # over the channels it is no pool: the host's float ReduceMean between DQ and Q (one float rounding,
    # as ORT's)
    T.against_ort("reducemean over channels (host)", cut_at(T.quantize(m, cal, "u8"), "M"), x, max_lsb=1)
    m2 = pool_model(helper.make_node("AveragePool", ["H"], ["Y"], name="ap_fine", kernel_shape=[3, 3],
                                     strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0), [1, 8, 6, 6],
                    [1, 8, 3, 3])
    T.expect_error("avgpool cip0 finer output scale", own_scale(T.quantize(m2, cal, "u8"), 0.3),
                   "is finer than its input's", x)
    for act in ("u8", "s8"):  # ceil_mode, count_include_pad 0: the ceil's padding is not counted
        m = pool_model(helper.make_node("AveragePool", ["H"], ["Y"], name="ap_ceil", kernel_shape=[3, 3],
                                        strides=[2, 2], ceil_mode=1), [1, 8, 6, 6], [1, 8, 3, 3])
        T.against_ort(f"avgpool ceil cip0 {act}", T.quantize(m, cal, act), x, max_lsb=1)
    m = pool_model(helper.make_node("AveragePool", ["H"], ["Y"], name="ap_ceil", kernel_shape=[3, 3],
                                    strides=[2, 2], ceil_mode=1, count_include_pad=1), [1, 8, 6, 6], [1, 8, 3, 3])
    T.expect_error("avgpool partial ceil window cip1", T.quantize(m, cal, "u8"), "ceil_mode with a partial", x)
    # DenseNet's transition as torch exports it: a Pad of zeros (an identity), then AveragePool 2x2/2
    zp = numpy_helper.from_array(np.zeros(8, np.int64), "zpads")
    for act in ("u8", "s8"):
        m = pool_model(helper.make_node("Pad", ["H", "zpads"], ["P"], name="pad0", mode="constant"), [1, 8, 6, 6],
                       [1, 8, 3, 3], [zp])
        m.graph.node.append(helper.make_node("AveragePool", ["P"], ["Y"], name="ap2", kernel_shape=[2, 2],
                                             strides=[2, 2]))
        T.against_ort(f"pad zeros + avgpool {act}", T.quantize(m, cal, act), x, max_lsb=1)
    m = pool_model(helper.make_node("Pad", ["H", "pads1"], ["Y"], name="pad1", mode="constant"), [1, 8, 6, 6],
                   [1, 8, 8, 8], [numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads1")])
    T.expect_error("pad that adds elements", T.quantize(m, cal, "u8"), 'node "pad1" (Pad): padding that adds', x)
    # com.microsoft QLinearAveragePool (ONNX Runtime's fused form), integer in and out
    for dt, npt, zx, zy in ((TensorProto.UINT8, np.uint8, 128, 120), (TensorProto.INT8, np.int8, 3, -5)):
        for cip, ys in ((1, 0.03), (0, 0.08), (0, 0.05), (0, 0.03)):
            name = f"qlinear avgpool {npt.__name__} cip{cip} y_scale {ys}"
            inits = [numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
                     numpy_helper.from_array(np.array(zx, npt), "xz"),
                     numpy_helper.from_array(np.array(ys, np.float32), "ys"),
                     numpy_helper.from_array(np.array(zy, npt), "yz")]
            node = helper.make_node("QLinearAveragePool", ["X", "xs", "xz", "ys", "yz"], ["Y"], name="qap",
                                    domain="com.microsoft", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                    count_include_pad=cip)
            g = helper.make_graph([node], "t", [helper.make_tensor_value_info("X", dt, [1, 8, 9, 9])],
                                  [helper.make_tensor_value_info("Y", dt, [1, 8, 5, 5])], inits)
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
            m.ir_version = 7
            xi = rng.integers(np.iinfo(npt).min, np.iinfo(npt).max, (1, 8, 9, 9)).astype(npt)
            if cip == 0 and ys < 0.05:
                T.expect_error(name, m, "is finer than its input's", xi)
            else:
                T.against_ort(name, m, xi, max_lsb=1)
    avg_ties()
    T.finish()


def avg_ties():
    """A 2x2 AveragePool whose output keeps its input's quantization (DenseNet's transition pool), scale 1/16
    (a power of two, so ORT's float32 QLinearAveragePool, round(sum / 4 / scale + zp), is exact: the raw average
    rounded half to even), an odd u8 zero point. With EXACT_REQUANT the device pool rounds half to even too (fscale
    by 1/4, jit/operators.md avgpool): exact; on the default config half away from zero: within 1 LSB."""
    cfg = T.default_config("pool_exact.json", EXACT_REQUANT=1)
    for dt, npt, z in ((TensorProto.UINT8, np.uint8, 131), (TensorProto.INT8, np.int8, 0)):
        inits = [helper.make_tensor("s", F, [], [1 / 16]), helper.make_tensor("z", dt, [], [z])]
        nodes = [helper.make_node("QuantizeLinear", ["X", "s", "z"], ["Xq"]),
                 helper.make_node("DequantizeLinear", ["Xq", "s", "z"], ["Xd"]),
                 helper.make_node("AveragePool", ["Xd"], ["P"], name="ap", kernel_shape=[2, 2], strides=[2, 2]),
                 helper.make_node("QuantizeLinear", ["P", "s", "z"], ["Pq"]),
                 helper.make_node("DequantizeLinear", ["Pq", "s", "z"], ["Y"])]
        m = T.model(nodes, [("X", F, (1, 16, 16, 16))], [("Y", F, (1, 16, 8, 8))], inits)
        info = np.iinfo(npt)
        x = ((rng.integers(info.min, info.max + 1, (1, 16, 16, 16)) - z) / 16).astype(np.float32)
        T.against_ort(f"avgpool 2x2 ties {npt.__name__}, EXACT_REQUANT", m, x, max_lsb=0, extra=("--config", cfg))
        T.against_ort(f"avgpool 2x2 ties {npt.__name__}", m, x, max_lsb=1)


if __name__ == "__main__":
    main()
