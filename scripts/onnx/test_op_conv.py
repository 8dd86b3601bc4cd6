#!/usr/bin/python3
"""test_op_conv.py TESSERA WORKDIR [BACKEND]: the conv family (Conv with a fused Relu/Clip, grouped
convolution, BatchNormalization that follows no Conv) quantized as quantize_static writes them (u8 and s8), against ONNX Runtime.

Bounds, per operator: ONNX Runtime requantizes a conv's int32 accumulator in float,
round_half_even(float32(acc) * float32(x_scale * w_scale / y_scale)) + y_zp; tessera's device
multiplies by a fixed-point multiplier and rounds once (onnx/tsr_onnx_attr.c tsr_ox_rq_params), so a
conv may differ by 1 LSB where the product lands within float32's rounding of a tie (a few elements
in 1e5). A Relu/Clip is exact either way: in the u8 form it is the output QuantizeLinear's range
(the clamp), in the s8 form it sits between two Q/DQ pairs on one grid and the device clamps the
same integers. A BatchNormalization (ORT: float DQ -> BatchNormalization -> Q) is the depthwise 1x1 conv
whose weights +-127 carry a = scale / sqrt(var + eps) exactly in their per-channel scale; its shift
rounds to the bias grid, far below an LSB: within 1 LSB. So each single conv below must be within
1 LSB; a chain of two within 2. With EXACT_REQUANT (the ALU's fscale) the device requantizes as ONNX
Runtime does: exact (exact_requant, which also shows the fixed-point form differing on exact ties).
"""
import json
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import oxtest as T  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(3030)


def conv_act(c_in, c_out, group=1, act=None, k=3, hw=8, second=False):
    """X -> Conv (group) -> [Relu | Clip(0, 6)] [-> Conv 1x1 -> Relu] -> Y."""
    w = numpy_helper.from_array((rng.standard_normal((c_out, c_in // group, k, k)) * 0.4).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(c_out) * 0.2).astype(np.float32), "b")
    inits = [w, b]
    nodes = [helper.make_node("Conv", ["X", "w", "b"], ["H"], name="conv", group=group, pads=[1, 1, 1, 1]
                              if k == 3 else [0, 0, 0, 0])]
    y = "H"
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["H"], ["A"], name="relu"))
        y = "A"
    elif act == "clip":
        inits += [numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")]
        nodes.append(helper.make_node("Clip", ["H", "lo", "hi"], ["A"], name="clip"))
        y = "A"
    if second:
        w2 = numpy_helper.from_array((rng.standard_normal((c_out, c_out, 1, 1)) * 0.3).astype(np.float32), "w2")
        inits.append(w2)
        nodes += [helper.make_node("Conv", [y, "w2"], ["H2"], name="conv2"),
                  helper.make_node("Relu", ["H2"], ["A2"], name="relu2")]
        y = "A2"
    nodes[-1].output[0] = "Y"
    return T.model(nodes, [("X", F, (1, c_in, hw, hw))], [("Y", F, (1, c_out, hw, hw))], inits)


def bn_model(c=16, hw=8, after_conv=False):
    """X [-> Conv 1x1 -> Relu] -> BatchNormalization -> Relu -> Y (DenseNet's norm1 follows a Concat or a
    Relu, never a Conv, so the exporter cannot fold it)."""
    g = rng.standard_normal
    inits = [numpy_helper.from_array((g(c) * 0.8 + 1).astype(np.float32), "s"),
             numpy_helper.from_array((g(c) * 0.5).astype(np.float32), "bb"),
             numpy_helper.from_array((g(c) * 0.3).astype(np.float32), "mean"),
             numpy_helper.from_array((np.abs(g(c)) + 0.5).astype(np.float32), "var")]
    nodes, x = [], "X"
    if after_conv:
        inits.append(numpy_helper.from_array((g((c, c, 1, 1)) * 0.4).astype(np.float32), "cw"))
        nodes += [helper.make_node("Conv", ["X", "cw"], ["H"], name="conv"),
                  helper.make_node("Relu", ["H"], ["R"], name="relu0")]
        x = "R"
    nodes += [helper.make_node("BatchNormalization", [x, "s", "bb", "mean", "var"], ["N"], name="bn", epsilon=1e-5),
              helper.make_node("Relu", ["N"], ["Y"], name="relu")]
    return T.model(nodes, [("X", F, (1, c, hw, hw))], [("Y", F, (1, c, hw, hw))], inits)


def data(c, hw=8, n=24):
    calib = (rng.standard_normal((n, c, hw, hw)) * 1.5).astype(np.float32)
    x = (rng.standard_normal((4, c, hw, hw)) * 1.5).astype(np.float32)
    return calib, x


def placed(q, x, name):
    """(device segments, host operators) of q's placement, from `tessera infer`'s header line."""
    import re
    path = T.save(q, name + ".onnx")
    rc, out = T.placement(path, x[:1])
    mm = re.search(r"-> (\d+) device operators? in (\d+) segments?, (\d+) host operators?", out)
    return (int(mm.group(2)), int(mm.group(3))) if rc == 0 and mm else None


def device_macs(q, x, name):
    """The MACs the device's per-layer table gives the conv layers of q (None when it does not run)."""
    import re
    path = T.save(q, name + ".onnx")
    rc, out = T.placement(path, x[:1])
    rows = re.findall(r"^\d+\s+\S+\s+(?:g|dw)?conv\S*\s+\S+\s+(\d+)\s", out, re.M)
    return sum(int(r) for r in rows) if rc == 0 and rows else None


def tie_model():
    """A QDQ conv (x u8 scale 1/16 zp 128, w s8 per tensor 1/8, bias int32 1/128, y u8 1/64 zp 128) whose
    requantization scale is exactly 0.5: every odd accumulator lands on a tie, which ONNX Runtime rounds
    half to even and the fixed-point multiplier (SRDHM) rounds half up."""
    i8, u8 = TensorProto.INT8, TensorProto.UINT8
    w = rng.integers(-60, 61, (8, 4, 3, 3)).astype(np.int8)
    b = rng.integers(-500, 501, 8).astype(np.int32)
    inits = [numpy_helper.from_array(w, "wq"), numpy_helper.from_array(b, "bq"),
             helper.make_tensor("xs", F, [], [1 / 16]), helper.make_tensor("xz", u8, [], [128]),
             helper.make_tensor("ws", F, [], [1 / 8]), helper.make_tensor("wz", i8, [], [0]),
             helper.make_tensor("bs", F, [], [1 / 128]), helper.make_tensor("bz", TensorProto.INT32, [], [0]),
             helper.make_tensor("ys", F, [], [1 / 64]), helper.make_tensor("yz", u8, [], [128])]
    nodes = [helper.make_node("QuantizeLinear", ["X", "xs", "xz"], ["Xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["Xq", "xs", "xz"], ["Xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["Wd"], name="dqw"),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["Bd"], name="dqb"),
             helper.make_node("Conv", ["Xd", "Wd", "Bd"], ["H"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["H", "ys", "yz"], ["Hq"], name="qh"),
             helper.make_node("DequantizeLinear", ["Hq", "ys", "yz"], ["Y"], name="dqh")]
    return T.model(nodes, [("X", F, [1, 4, 8, 8])], [("Y", F, [1, 8, 8, 8])], inits)


def exact_requant(calib, x):
    """EXACT_REQUANT (the ALU's fscale) makes a conv's requantization ONNX Runtime's, bit for bit: the
    tie model is exact with it and differs without it (the check can fail); the u8 family cases above
    are exact with it."""
    cfg = json.load(open(os.path.join(T.common.ROOT, "configs", "default.json")))
    cfg["EXACT_REQUANT"] = 1
    path = os.path.realpath("default_exact.json")
    json.dump(cfg, open(path, "w"))
    xt = (rng.integers(-40, 41, (1, 4, 8, 8)) / 16).astype(np.float32)  # on the input grid
    m = tie_model()
    T.against_ort("conv requant ties, EXACT_REQUANT", m, xt, max_lsb=0, extra=("--config", path))
    got = T.against_ort("conv requant ties, fixed point", m, xt, max_lsb=1)
    if got is not None:
        _, ndiff = T.diff_lsb(got, T.ort(T.save(m, "ties.onnx"), xt), T.output_scale(m))
        T.check("conv requant ties: fixed point differs (half up vs even)", ndiff > 0, f"{ndiff} of {got.size}")
    for name, model in (("conv relu", conv_act(8, 16, act="relu")), ("conv clip6", conv_act(8, 16, act="clip")),
                        ("conv relu conv relu", conv_act(8, 16, act="relu", second=True))):
        T.against_ort(f"{name} u8, EXACT_REQUANT", T.quantize(model, calib, "u8"), x[:1], max_lsb=0,
                      extra=("--config", path))


def shared_s8_block(c=32, hw=16, n=4):
    """X -> Q (int8) -> DQ -> Conv 3x3 (per-channel int8 weights) -> Q -> DQ -> Add (+ the same DQ of X)
    -> Q -> DQ -> Y: the input's Q/DQ pair read by two nodes, as a ResNet block's input. Its own draws
    (seed 1: one element of 32,768 lands within float32's sums of a tie)."""
    r = np.random.default_rng(1)
    i8 = TensorProto.INT8
    xs, ws = np.float32(r.uniform(0.01, 0.05)), r.uniform(0.002, 0.01, c).astype(np.float32)
    ys, zs = np.float32(r.uniform(0.02, 0.08)), np.float32(r.uniform(0.03, 0.1))
    w = r.integers(-127, 128, (c, c, 3, 3)).astype(np.int8)
    b = r.integers(-3000, 3001, c).astype(np.int32)
    inits = [numpy_helper.from_array(w, "wq"), numpy_helper.from_array(b, "bq"),
             numpy_helper.from_array(np.array(xs), "xs"), helper.make_tensor("z0", i8, [], [0]),
             numpy_helper.from_array(ws, "ws"), numpy_helper.from_array(np.zeros(c, np.int8), "wz"),
             numpy_helper.from_array((xs * ws).astype(np.float32), "bs"),
             numpy_helper.from_array(np.zeros(c, np.int32), "bz"),
             numpy_helper.from_array(np.array(ys), "ys"), numpy_helper.from_array(np.array(zs), "zs")]
    nodes = [helper.make_node("QuantizeLinear", ["X", "xs", "z0"], ["Xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["Xq", "xs", "z0"], ["Xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["Wd"], name="dqw", axis=0),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["Bd"], name="dqb", axis=0),
             helper.make_node("Conv", ["Xd", "Wd", "Bd"], ["H"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["H", "ys", "z0"], ["Hq"], name="qh"),
             helper.make_node("DequantizeLinear", ["Hq", "ys", "z0"], ["Hd"], name="dqh"),
             helper.make_node("Add", ["Hd", "Xd"], ["S"], name="add"),
             helper.make_node("QuantizeLinear", ["S", "zs", "z0"], ["Sq"], name="qs"),
             helper.make_node("DequantizeLinear", ["Sq", "zs", "z0"], ["Y"], name="dqs")]
    x = (r.integers(-127, 128, (n, c, hw, hw)) * xs).astype(np.float32)
    return T.model(nodes, [("X", F, [n, c, hw, hw])], [("Y", F, [n, c, hw, hw])], inits), x


def s8_shared_input():
    """ONNX Runtime on x86 fuses DQ -> Conv -> Q into a QLinearConv only for uint8 activations, and moves an
    int8 Q/DQ pair to uint8 only where the Q feeds one DQ: a conv reading an int8 tensor that a second node
    reads too runs as a float Conv (im2col + SGEMM in float32, then QuantizeLinear), whose sums part from
    the exact integers near ties. With the pairs moved to uint8 (ort_run.js --s8-as-u8, zoo.py table
    --ort-s8-as-u8) it is a QLinearConv, and tessera with EXACT_REQUANT is exact against it; the plain run
    differs (the check can fail)."""
    cfg = json.load(open(os.path.join(T.common.ROOT, "configs", "default.json")))
    cfg["EXACT_REQUANT"] = 1
    path = os.path.realpath("default_exact_s8.json")
    json.dump(cfg, open(path, "w"))
    m, x = shared_s8_block()
    name = T.save(m, "shared_s8.onnx")
    rc, got, err = T.infer(name, x, ("--config", path))
    if got is None:
        T.check("s8 shared input, EXACT_REQUANT: runs", False, err)
        return
    np.save("shared_s8_x.npy", x)
    T.common.ort_run(name, "shared_s8_x.npy", "shared_s8_u8.npy", batch=False, s8_as_u8=True)
    sc = T.output_scale(m)
    _, n_moved = T.diff_lsb(got, np.load("shared_s8_u8.npy"), sc)
    _, n_plain = T.diff_lsb(got, T.ort(name, x), sc)
    T.check("s8 shared input, EXACT_REQUANT: exact against ORT with int8 pairs as uint8", n_moved == 0,
            f"{n_moved} of {got.size} differ")
    T.check("s8 shared input: ORT's float conv (pairs as written) differs", n_plain > 0,
            f"{n_plain} of {got.size} differ")


def main():
    T.setup()
    for v in ("u8", "s8"):
        calib, x = data(8)
        # Conv + Relu: u8 removes the Relu (the Q's range), s8 keeps it between Q/DQ pairs (fused)
        q = T.quantize(conv_act(8, 16, act="relu"), calib, v)
        T.against_ort(f"conv relu {v}", q, x[:1], max_lsb=1)
        # ReLU6 as Clip(0, 6) (mobilenet_v2): s8 refused "Clip not supported" before the fusion
        q = T.quantize(conv_act(8, 16, act="clip"), calib, v)
        T.against_ort(f"conv clip6 {v}", q, x[:1], max_lsb=1)
        pl = placed(q, x, f"conv_clip6_{v}_pl")
        # the input Q and the output DQ are the host's; the conv and its clamp one device op
        T.check(f"conv clip6 {v}: one segment, clip fused", pl is not None and pl[0] == 1 and pl[1] <= 2,
                f"(segments, host ops) = {pl}")
        # two convs with a kept Relu between: both on the device in one segment
        q = T.quantize(conv_act(8, 16, act="relu", second=True), calib, v)
        T.against_ort(f"conv relu conv relu {v}", q, x[:1], max_lsb=2)
        pl = placed(q, x, f"conv2_{v}_pl")
        T.check(f"conv relu conv relu {v}: one segment", pl is not None and pl[0] == 1 and pl[1] <= 2,
                f"(segments, host ops) = {pl}")
        # grouped convolution (RegNet: group 2 and more; a depthwise one with a channel multiplier)
        calib16, x16 = data(16)
        state = rng.bit_generator.state  # the cases below leave the later draws (BN's bound) as they were
        for g, co in ((2, 16), (4, 16), (8, 24), (16, 32), (8, 16), (16, 16)):
            q = T.quantize(conv_act(16, co, group=g, act="relu"), calib16, v)
            T.against_ort(f"conv group {g} 16-{co} {v}", q, x16[:1], max_lsb=1)
            # C_out == C_in with C/G dividing the default block (16): the grouped conv's own MACs on
            # the device (64 outputs x C_out x C/G x 9); else (a channel multiplier) G times them
            want = 64 * co * (16 // g) * 9 * (1 if co == 16 else g)
            got = device_macs(q, x16, f"conv_group_{g}_{co}_{v}_pl")
            T.check(f"conv group {g} 16-{co} {v}: device MACs", got == want, f"{got} (want {want})")
        # 64 channels in 2 groups of 32: a group spans two of the default's 16-channel blocks, the graph
        # runs it as block-diagonal groups-1 weights (exact, twice the MACs)
        calib64, x64 = data(64)
        q = T.quantize(conv_act(64, 64, group=2, act="relu"), calib64, v)
        T.against_ort(f"conv group 2 64-64 {v}", q, x64[:1], max_lsb=1)
        got = device_macs(q, x64, f"conv_group_2_64_{v}_pl")
        T.check(f"conv group 2 64-64 {v}: device MACs (expanded)", got == 64 * 64 * 64 * 9, f"{got}")
        rng.bit_generator.state = state
        for g, co in ((2, 16), (4, 16), (8, 24), (16, 32)):  # replay the draws of the four cases before
            conv_act(16, co, group=g, act="relu")
        q = T.quantize(conv_act(16, 16, group=4, k=1), calib16, v)
        T.against_ort(f"conv 1x1 group 4 {v}", q, x16[:1], max_lsb=1)
        # BatchNormalization that follows no Conv: a depthwise 1x1 conv on the device (bound 1 LSB alone,
        # 2 after a conv)
        q = T.quantize(bn_model(), calib16, v)
        T.against_ort(f"batchnorm relu {v}", q, x16[:1], max_lsb=1)
        q = T.quantize(bn_model(after_conv=True), calib16, v)
        T.against_ort(f"conv relu batchnorm relu {v}", q, x16[:1], max_lsb=2)
        # the shift's rounding to the bias grid, chosen per channel (w in 64..127): nearly always exact
        # (with w = 127 always, 0.27% of DenseNet's BN outputs were 1 LSB off alone)
        xb = (rng.standard_normal((1, 16, 32, 32)) * 1.5).astype(np.float32)
        qb = T.quantize(bn_model(hw=32), calib16.repeat(4, 2).repeat(4, 3), v)
        got = T.against_ort(f"batchnorm relu 32x32 {v}", qb, xb, max_lsb=1)
        if got is not None:
            want = T.ort(T.save(qb, f"bn32_{v}.onnx"), xb)
            _, ndiff = T.diff_lsb(got, want, T.output_scale(qb))
            T.check(f"batchnorm relu 32x32 {v}: at most 4 of {got.size} differ", ndiff <= 4, f"{ndiff} differ")
        pl = placed(q, x16, f"bn_{v}_pl")
        T.check(f"conv relu batchnorm relu {v}: one segment", pl is not None and pl[0] == 1 and pl[1] <= 2,
                f"(segments, host ops) = {pl}")
    # a group that does not divide the channels (the quantized file edited: ORT cannot calibrate it)
    calib6, x6 = data(6)
    q = T.quantize(conv_act(6, 8, group=2), calib6, "u8")
    for n in q.graph.node:
        for at in n.attribute:
            if n.op_type == "Conv" and at.name == "group":
                at.i = 4
    T.expect_error("conv group 4 of 6 channels", q, "group 4 does not divide the 6 input and 8 output channels",
                   x6[:1])
    s8_shared_input()
    exact_requant(*data(8))  # (last: the cases above keep their random draws)
    T.finish()


if __name__ == "__main__":
    main()
