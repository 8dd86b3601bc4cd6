#!/usr/bin/python3
"""test_op_se.py TESSERA WORKDIR [BACKEND]: the squeeze-and-excite block with its Mul on the device
(onnx/ops/tsr_ox_eltwise.c, jit/tsr_mul.h). Small float models X -> Conv -> P -> Conv -> A, the gate
S = Sigmoid|HardSigmoid(Conv(Relu(Conv(GlobalAveragePool(A))))), M = Mul(A, S) (or Mul(S, A)),
Y = Conv(Add(M, P)), quantized u8 and s8 by our quantize_static (scripts/zoo/qdq.py), run on
configs/default.json + "ACT_LUT": 4 (the gate's activation is then a device table, so the Mul's
operands are device work) and on configs/default.json + "ACT_LUT": 0 (no tables, called "default"
below: the gate on the host, the Mul the host's QLinearMul kernel):
  (a) placement on ACT_LUT: the Mul on the device ("mul by a per-channel vector"), the Add after it
      too, one device segment, the graph input's QuantizeLinear and the output's DequantizeLinear the
      only host operators; on the default config the Mul is the host kernel;
  (b) the Mul's output tensor (--tensor) is byte-identical on both configs (the device form against
      the host kernel, on the same operands);
  (c) against ONNX Runtime alone: the DQ -> Mul -> Q group run in ORT on tessera's own operands (its A
      and S bytes) gives tessera's M bytes exactly (0 LSB), and the whole output is within 2 LSB of ORT
      on both configs (the convs requantize in fixed point, <= 1 LSB each);
  (d) over a 40x40 map the block's average (1,600 taps, into a finer scale than its input's) is the
      device's global average (jit/tsr_gavg.h), and the block is still one segment;
  (e) a scale set without an exact integer form (x_scale = y_scale, s_scale 0.5: the float products
      have exact ties of both parities, ties to even) keeps the Mul on the host on ACT_LUT, with the
      same bytes as the default config's;
  (f) a real SE Mul (EfficientNet-B0 u8 at 224x224, features.4.1) on every (x, s) byte pair, on the
      device, against ONNX Runtime, on the default config and with EXACT_REQUANT: its odd output zero
      point meets a tie (MLAS adds the zero point in float32 before it rounds), 2 of 65,536 pairs 1 LSB
      off on both before; and the host's QLinearMul kernel on the same pairs (2 off before).
"""
import json
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import oxtest as T  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(30)
C, H, W = 24, 9, 11
SHAPE = [1, C, H, W]
BOUND = 2


NOLUT = None  # configs/default.json with ACT_LUT 0 (main writes it): the config cfg None means


def w(shape, s):
    return (rng.standard_normal(shape) * s).astype(np.float32)


def se_model(gate, swap, shape=None):
    """X -> conv0 -> P -> conv1 -> A; S = gate(conv3(relu(conv2(gap(A))))); M = A * S; Y = conv4(M + P)."""
    shape = shape or SHAPE
    n = helper.make_node
    g = [n("Sigmoid", ["Z"], ["S"], name="gate")] if gate == "sigmoid" else \
        [n("HardSigmoid", ["Z"], ["S"], name="gate", alpha=1.0 / 6, beta=0.5)]
    nodes = [n("Conv", ["X", "w0"], ["P"], name="conv0", pads=[1, 1, 1, 1]),
             n("Conv", ["P", "w1"], ["A"], name="conv1", pads=[1, 1, 1, 1]),
             n("GlobalAveragePool", ["A"], ["G"], name="gap"),
             n("Conv", ["G", "w2", "b2"], ["R0"], name="squeeze"),
             n("Relu", ["R0"], ["R"], name="relu"),
             n("Conv", ["R", "w3", "b3"], ["Z"], name="excite")] + g + \
            [n("Mul", ["S", "A"] if swap else ["A", "S"], ["M"], name="se_mul"),
             n("Add", ["M", "P"], ["Q"], name="res_add"),
             n("Conv", ["Q", "w4"], ["Y"], name="conv4")]
    inits = [numpy_helper.from_array(w((C, C, 3, 3), 0.2), "w0"), numpy_helper.from_array(w((C, C, 3, 3), 0.2), "w1"),
             numpy_helper.from_array(w((C // 4, C, 1, 1), 0.4), "w2"),
             numpy_helper.from_array(w((C // 4,), 0.1), "b2"),
             numpy_helper.from_array(w((C, C // 4, 1, 1), 0.6), "w3"), numpy_helper.from_array(w((C,), 0.3), "b3"),
             numpy_helper.from_array(w((C, C, 1, 1), 0.3), "w4")]
    return T.model(nodes, [("X", F, shape)], [("Y", F, shape)], inits)


def tessera(path, x, cfg, tensors=(), placement=False):
    """tessera infer: (exit code, output, {tensor: bytes}, placement JSON or None, stderr)."""
    np.save("se_in.npy", x)
    cmd = [T.TSR, "infer", path, "-i", "se_in.npy", "-o", "se_out.npy", "--quiet", "--backend", T.BACKEND]
    cmd += ["--config", cfg or NOLUT]
    for t in tensors:
        cmd += ["--tensor", f"{t}=se_t_{t}.npy"]
    if placement:
        cmd += ["--placement-json", "se_pl.json"]
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600)
    if r.returncode:
        return r.returncode, None, {}, None, r.stderr.strip()
    pl = None
    if placement:
        with open("se_pl.json") as f:
            pl = json.load(f)
    return 0, np.load("se_out.npy"), {t: np.load(f"se_t_{t}.npy") for t in tensors}, pl, ""


def producer_q(q, name):
    """The QuantizeLinear whose DequantizeLinear feeds node `name` with tensor index k: its output name,
    scale and zero point initializers, for every input of node `name`."""
    nodes = {o: nd for nd in q.graph.node for o in nd.output}
    node = next(nd for nd in q.graph.node if nd.name == name)
    out = []
    for i in node.input:
        dq = nodes[i]
        assert dq.op_type == "DequantizeLinear", dq.op_type
        out.append((dq.input[0], dq.input[1], dq.input[2]))
    cons = [nd for nd in q.graph.node if node.output[0] in nd.input]
    assert len(cons) == 1 and cons[0].op_type == "QuantizeLinear"
    return out, (cons[0].output[0], cons[0].input[1], cons[0].input[2])


def mul_alone(q, ins, out, a, s):
    """ONNX Runtime's DQ -> Mul -> Q of the model's Mul on the quantized operands a, s (tessera's)."""
    init = {i.name: i for i in q.graph.initializer}
    n = helper.make_node
    dt = TensorProto.UINT8 if a.dtype == np.uint8 else TensorProto.INT8
    st = TensorProto.UINT8 if s.dtype == np.uint8 else TensorProto.INT8
    yt = init[out[2]].data_type
    names = ["qa", "qb"]
    nodes = [n("DequantizeLinear", [names[k], ins[k][1], ins[k][2]], [f"f{k}"]) for k in range(2)]
    nodes += [n("Mul", ["f0", "f1"], ["m"]), n("QuantizeLinear", ["m", out[1], out[2]], ["y"])]
    inits = [init[ins[0][1]], init[ins[0][2]], init[ins[1][1]], init[ins[1][2]], init[out[1]], init[out[2]]]
    shapes = [list(a.shape), list(s.shape)]
    types = [dt, st]
    m = helper.make_model(helper.make_graph(nodes, "mul", [helper.make_tensor_value_info(names[k], types[k], shapes[k])
                                                            for k in range(2)],
                                            [helper.make_tensor_value_info("y", yt, list(a.shape))], inits),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    T.save(m, "mul_alone.onnx")
    np.save("ma.npy", a)
    np.save("mb.npy", s)
    try:
        T.common.ort_run("mul_alone.onnx", "ma.npy,mb.npy", "mul_alone_out.npy", batch=False)
    except T.common.OrtError as e:
        return None, str(e)
    return np.load("mul_alone_out.npy"), ""


def se_case(name, q, x, cfg, gap_kernel=None):
    path = T.save(q, name.replace(" ", "_") + ".onnx")
    ins, out = producer_q(q, "se_mul")
    tens = [ins[0][0], ins[1][0], out[0]]
    rc0, y0, t0, p0, e0 = tessera(path, x, None, tens, True)
    rc1, y1, t1, p1, e1 = tessera(path, x, cfg, tens, True)
    if rc0 or rc1:
        T.check(name, False, f"default exit {rc0} ({e0}), ACT_LUT exit {rc1} ({e1})")
        return
    mul1 = [p for p in p1["placement"] if p["name"] == "se_mul"]
    add1 = [p for p in p1["placement"] if p["name"] == "res_add"]
    mul0 = [p for p in p0["placement"] if p["name"] == "se_mul"]
    gap1 = [p for p in p1["placement"] if p["name"] == "gap"]
    ok = mul1 and mul1[0]["side"] == "device" and mul1[0]["kernel"] == "mul by a per-channel vector" and \
        add1 and add1[0]["side"] == "device" and p1["segments"] == 1 and p1["host_ops"] == 2 and \
        mul0 and mul0[0]["side"] == "host" and gap1 and gap1[0]["side"] == "device" and \
        (gap_kernel is None or gap1[0]["kernel"] == gap_kernel)
    T.check(f"{name}: placement", bool(ok),
            f"ACT_LUT: Mul {mul1[0]['side'] if mul1 else '?'} ({mul1[0]['kernel'] if mul1 else ''}), Add "
            f"{add1[0]['side'] if add1 else '?'}, gap {gap1[0]['kernel'] if gap1 else '?'}, {p1['segments']} "
            f"segment(s), {p1['host_ops']} host ops; default: "
            f"Mul {mul0[0]['side'] if mul0 else '?'} ({mul0[0]['kernel'] if mul0 else ''}), {p0['segments']} "
            f"segments, {p0['host_ops']} host ops")
    same = all(np.array_equal(t0[t], t1[t]) for t in tens)
    T.check(f"{name}: device Mul = host kernel", same,
            f"operands and product byte-identical on both configs: {same} "
            f"({int((t0[out[0]] != t1[out[0]]).sum())} of {t1[out[0]].size} product bytes differ)")
    ya, why = mul_alone(q, ins, out, t1[ins[0][0]], t1[ins[1][0]])
    if ya is None:
        T.check(f"{name}: Mul alone vs ORT", False, why)
    else:
        d = int((ya.astype(np.int64) != t1[out[0]].astype(np.int64)).sum())
        T.check(f"{name}: Mul alone vs ORT", d == 0, f"{d} of {ya.size} differ")
    want = T.ort(path, x)
    scale = T.output_scale(q)
    m0, n0 = T.diff_lsb(y0, want, scale)
    m1, n1 = T.diff_lsb(y1, want, scale)
    T.check(f"{name}: vs ORT", m0 <= BOUND and m1 <= BOUND,
            f"ACT_LUT {m1} LSB ({n1} differ), default {m0} LSB ({n0} differ), bound {BOUND}")


def every_pair_mul(xs, xz, ss, sz, ys, yz):
    """A Mul of A [1, 256, 16, 16] (scale xs, zero point xz) by S [1, 256, 1, 1] (ss, sz) into (ys, yz), both
    device values of one input X [1, 512, 16, 16] quantized as A: conva takes channels 0..255 (weight 1), convb
    channels 256..511 (weight 1 of scale ss / xs and a bias xz - sz: its byte is X's), averaged over the plane
    into S. A's channel c holds every byte (a permutation), X's channel 256 + c the byte c, so that S[c] = c and
    the (A, S) pairs are all 65,536. Also that input."""
    F32, U8, I8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
    mk, n = helper.make_tensor, helper.make_node
    ws = float(np.float32(ss) / np.float32(xs))
    wa, wb = np.zeros((256, 512, 1, 1), np.int8), np.zeros((256, 512, 1, 1), np.int8)
    wa[np.arange(256), np.arange(256)] = 1
    wb[np.arange(256), 256 + np.arange(256)] = 1
    inits = [mk("xs", F32, [], [xs]), mk("xz", U8, [], [xz]), mk("ss", F32, [], [ss]), mk("sz", U8, [], [sz]),
             mk("ys", F32, [], [ys]), mk("yz", U8, [], [yz]), numpy_helper.from_array(wa, "wa"),
             numpy_helper.from_array(wb, "wb"), mk("w1", F32, [1], [1.0]), mk("wsb", F32, [1], [ws]),
             mk("wz", I8, [1], [0]), mk("bb", I32, [256], [xz - sz] * 256),
             mk("bs", F32, [1], [float(np.float32(xs) * np.float32(ws))]), mk("bz", I32, [1], [0])]
    nodes = [n("QuantizeLinear", ["X", "xs", "xz"], ["Xq"]), n("DequantizeLinear", ["Xq", "xs", "xz"], ["Xd"]),
             n("DequantizeLinear", ["wa", "w1", "wz"], ["Wa"], axis=0),
             n("DequantizeLinear", ["wb", "wsb", "wz"], ["Wb"], axis=0),
             n("DequantizeLinear", ["bb", "bs", "bz"], ["Bb"], axis=0),
             n("Conv", ["Xd", "Wa"], ["Ha"], name="conva"), n("Conv", ["Xd", "Wb", "Bb"], ["Hb"], name="convb"),
             n("QuantizeLinear", ["Ha", "xs", "xz"], ["Aq"]), n("DequantizeLinear", ["Aq", "xs", "xz"], ["A"]),
             n("QuantizeLinear", ["Hb", "ss", "sz"], ["Bq"]), n("DequantizeLinear", ["Bq", "ss", "sz"], ["B"]),
             n("GlobalAveragePool", ["B"], ["G"], name="gap"),
             n("QuantizeLinear", ["G", "ss", "sz"], ["Gq"]), n("DequantizeLinear", ["Gq", "ss", "sz"], ["S"]),
             n("Mul", ["A", "S"], ["M"], name="se_mul"), n("QuantizeLinear", ["M", "ys", "yz"], ["Y"])]
    m = T.model(nodes, [("X", F32, (1, 512, 16, 16))], [("Y", U8, (1, 256, 16, 16))], inits)
    c = np.arange(256)
    xb = np.concatenate([(np.arange(256)[None, :] * 7 + c[:, None]) % 256, np.repeat(c[:, None], 256, 1)])
    x = ((xb.astype(np.float32) - np.float32(xz)) * np.float32(xs)).reshape(1, 512, 16, 16)
    return m, x.astype(np.float32)


def real_tie():
    """(f): EfficientNet-B0 u8 224x224 features.4.1's SE Mul (scripts/zoo build.py + qdq.py, 16 calibration
    inputs): x_scale 0.053469732 zp 5, s_scale 0.0028141001 zp 0, y_scale 0.028032897 zp 7. x 146, s 183:
    p = 25,803, float32(p) * f = 138.5, ORT 146 (138.5 + 7 = 145.5, to even), not 145."""
    exact_cfg = T.default_config("se_exact.json", EXACT_REQUANT=1)
    m, x = every_pair_mul(0.053469732, 5, 0.0028141001, 0, 0.028032897, 7)
    path = T.save(m, "se_tie.onnx")
    want = T.ort(path, x)
    for nm, cfg in (("default", T.default_config("se_default.json")), ("EXACT_REQUANT", exact_cfg)):
        rc, got, err = T.infer(path, x, ("--config", cfg))
        mx, nd = T.diff_lsb(got, want) if rc == 0 else (None, None)
        T.check(f"real SE Mul every pair, {nm}", rc == 0 and mx == 0,
                err if rc else f"max |diff| {mx} LSB, {nd} of 65536 differ (bound 0)")
        np.save("se_tie_x.npy", x)
        r = subprocess.run([T.TSR, "infer", path, "-i", "se_tie_x.npy", "--backend", T.BACKEND, "--config", cfg,
                            "--placement-json", "se_tie_pl.json"], capture_output=True, text=True, errors="replace",
                           timeout=600)
        pl = json.load(open("se_tie_pl.json")) if r.returncode == 0 else {"placement": []}
        mul = [p for p in pl["placement"] if p["name"] == "se_mul"]
        T.check(f"real SE Mul, {nm}: on the device", bool(mul) and mul[0]["side"] == "device",
                mul[0]["side"] if mul else r.stderr.strip()[-200:])
    # the host's QLinearMul kernel (operands from a Split, host values), also what activation tables are made of
    F32, U8 = TensorProto.FLOAT, TensorProto.UINT8
    mk, n = helper.make_tensor, helper.make_node
    inits = [mk("xs", F32, [], [0.053469732]), mk("xz", U8, [], [5]), mk("ss", F32, [], [0.0028141001]),
             mk("sz", U8, [], [0]), mk("ys", F32, [], [0.028032897]), mk("yz", U8, [], [7])]
    nodes = [n("Split", ["X"], ["X0", "X1"], axis=1),
             n("QuantizeLinear", ["X0", "xs", "xz"], ["Aq"]), n("DequantizeLinear", ["Aq", "xs", "xz"], ["A"]),
             n("QuantizeLinear", ["X1", "ss", "sz"], ["Sq"]), n("DequantizeLinear", ["Sq", "ss", "sz"], ["S"]),
             n("Mul", ["A", "S"], ["M"], name="mul"), n("QuantizeLinear", ["M", "ys", "yz"], ["Y"])]
    hm = T.model(nodes, [("X", F32, (1, 2, 256, 256))], [("Y", U8, (1, 1, 256, 256))], inits)
    i = np.arange(256, dtype=np.float32)
    hx = np.stack([np.repeat(i[:, None] - 5, 256, 1) * np.float32(0.053469732),
                   np.repeat(i[None, :], 256, 0) * np.float32(0.0028141001)])[None].astype(np.float32)
    T.against_ort("real SE Mul every pair, host kernel", hm, hx, max_lsb=0)


def main():
    global NOLUT
    T.setup()
    cfg = T.default_config("se_lut.json", ACT_LUT=4)
    NOLUT = T.default_config("se_nolut.json", ACT_LUT=0)
    cal = rng.standard_normal((16, *SHAPE[1:])).astype(np.float32)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    for gate in ("sigmoid", "hardsigmoid"):
        for swap in (False, True):
            fm = se_model(gate, swap)
            for act in ("u8", "s8"):
                se_case(f"{gate}{' swapped' if swap else ''} {act}", T.quantize(fm, cal, act), x, cfg)

    # a block over a 40x40 map: its average (1,600 taps, more than the fused depthwise-conv form holds,
    # into a finer scale than its input's) is the device's global average, so the block is one segment
    big = [1, C, 40, 40]
    calb = rng.standard_normal((8, *big[1:])).astype(np.float32)
    xb = rng.standard_normal(big).astype(np.float32)
    for act in ("u8", "s8"):
        se_case(f"40x40 map {act}", T.quantize(se_model("sigmoid", False, big), calb, act), xb, cfg,
                gap_kernel="global average")

    # no exact integer form: x_scale = y_scale and s_scale 0.5 make the factor exactly 0.5
    q = T.quantize(se_model("sigmoid", False), cal, "u8")
    ins, out = producer_q(q, "se_mul")
    init = {i.name: i for i in q.graph.initializer}
    xs = numpy_helper.to_array(init[ins[0][1]])
    for nm, v in ((ins[1][1], np.float32(0.5)), (out[1], xs)):
        init[nm].CopyFrom(numpy_helper.from_array(np.asarray(v, dtype=np.float32), nm))
    path = T.save(q, "no_form_u8.onnx")
    rc0, y0, _, _, e0 = tessera(path, x, None)
    rc1, y1, _, p1, e1 = tessera(path, x, cfg, (), True)
    mul1 = [p for p in p1["placement"] if p["name"] == "se_mul"] if p1 else []
    T.check("no integer form: Mul stays on the host", rc0 == rc1 == 0 and mul1 and mul1[0]["side"] == "host" and
            np.array_equal(y0.view(np.uint8), y1.view(np.uint8)),
            e0 or e1 or f"Mul {mul1[0]['side'] if mul1 else '?'}, outputs equal {np.array_equal(y0, y1)}")
    real_tie()
    T.finish()


if __name__ == "__main__":
    main()
