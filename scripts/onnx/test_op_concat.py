#!/usr/bin/python3
"""test_op_concat.py TESSERA WORKDIR [BACKEND]: Concat quantized as quantize_static writes it (u8 and s8:
every input and the output with its own calibrated range), against ONNX Runtime.

Bounds: an input whose parameters are the output's is copied exactly; one with its own is requantized
on the device (the conv epilogue's fixed-point multiplier x_scale / y_scale, one rounding) where ONNX
Runtime dequantizes and quantizes in float (one rounding): <= 1 LSB. A Concat of one input is an alias. Along channels, with every channel offset a multiple of the config's
BLOCK, the Concat runs on the device as views (no copy; its bytes are the host copy's exactly).
"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import oxtest as T  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(31)


def branches(k, c, shape, gains):
    """X -> k 1x1 convs (outputs B0..Bk-1, c channels each, scaled by gains: different ranges)."""
    nodes, inits = [], []
    for i in range(k):
        w = (rng.standard_normal((c, shape[1], 1, 1)) * 0.4 * gains[i]).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", ["X", f"w{i}"], [f"B{i}"], name=f"conv{i}"))
    return nodes, inits


def concat_model(k, c, shape, gains, axis=1):
    nodes, inits = branches(k, c, shape, gains)
    nodes.append(helper.make_node("Concat", [f"B{i}" for i in range(k)], ["Y"], name="cat", axis=axis))
    yshape = list(shape)
    yshape[1] = k * c
    return T.model(nodes, [("X", F, shape)], [("Y", F, yshape)], inits)


def own_params(m, cat):
    """How many inputs of Concat node `cat` in the quantized m have a scale or zero point other than the
    output QuantizeLinear's."""
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    prod = {o: n for n in m.graph.node for o in n.output}
    node = next(n for n in m.graph.node if n.name == cat)
    q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == node.output[0])
    out = (inits[q.input[1]], inits[q.input[2]])
    return sum(1 for i in node.input if (inits[prod[i].input[1]], inits[prod[i].input[2]]) != out)


def conv_concat(act, chans, gains, same=False):
    """X -> one 1x1 conv per entry of chans (its channels; gains scale the weights: each output its own
    range, or with same the one weight tensor sliced: one range) -> Concat along channels."""
    shape = [1, 8, 5, 7]
    cal = rng.standard_normal((16, *shape[1:])).astype(np.float32)
    x = rng.standard_normal(shape).astype(np.float32)
    nodes, inits = [], []
    w0 = (rng.standard_normal((max(chans), shape[1], 1, 1)) * 0.4).astype(np.float32)
    for i, (c, g) in enumerate(zip(chans, gains)):
        w = w0[:c] if same else (rng.standard_normal((c, shape[1], 1, 1)) * 0.4 * g).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", ["X", f"w{i}"], [f"B{i}"], name=f"conv{i}"))
    nodes.append(helper.make_node("Concat", [f"B{i}" for i in range(len(chans))], ["Y"], name="cat", axis=1))
    m = T.model(nodes, [("X", F, shape)], [("Y", F, [1, sum(chans), *shape[2:]])], inits)
    return T.quantize(m, cal, act), x


def device_concats():
    """Concat of 2-4 device convs on the device (issue 30): its inputs views of its output where the default
    config's BLOCK (16) divides every channel offset, in one segment with the convs (and the requantizes of
    inputs with their own parameters), its bytes those of the host copy (--place concat=host) exactly and
    within 1 LSB of ONNX Runtime; an offset BLOCK does not divide keeps the host copy."""
    cases = [("2 equal scales", [16, 16], [1, 1], True, True), ("2 own scales", [16, 16], [1.0, 3.0], False, True),
             ("3 own scales", [32, 16, 5], [2.0, 0.5, 1.0], False, True),
             ("4 own scales", [16, 16, 48, 3], [0.5, 1.0, 2.0, 4.0], False, True),
             ("2 unaligned", [8, 16], [1.0, 3.0], False, False)]
    for act in ("u8", "s8"):
        for name, chans, gains, same, dev in cases:
            label = f"device concat {name} {act}"
            q, x = conv_concat(act, chans, gains, same)
            got = T.against_ort(label, q, x, max_lsb=1)
            path = label.replace(" ", "_") + ".onnx"
            rc, host, err = T.infer(path, x, ("--place", "concat=host"))
            T.check(f"{label} = host copy", rc == 0 and got is not None and host is not None and
                    np.array_equal(got, host), err.strip()[:200] if rc else "")
            rc, out = T.placement(path, x)
            line = next((ln for ln in out.splitlines() if ln.split()[:2] == ["cat", "Concat"]), "")
            where = "device, segment 0 (concat" in line if dev else "host" in line
            segs = " in 1 segment," in out.splitlines()[0] if out else False
            T.check(f"{label} placed", rc == 0 and where and (segs or not dev), (out.splitlines()[0] if out else "") + " | " +
                    " ".join(line.split()))
    lut_requant()
    if own_params(conv_concat("u8", [16, 16], [1, 1], True)[0], "cat"):
        T.check("device concat equal scales are equal", False, "the quantizer gave the inputs their own ranges")


def lut_requant():
    """Each input's requantization to the output's parameters, checked element by element on the quantized
    bytes tessera computed (--tensor: the inputs' and the output's): QuantizeLinear(DequantizeLinear(x)) as
    ONNX defines it (float32 (x - zp_i) * s_i, float32 division by s_o, round half to even, + zp_o,
    saturate), in numpy. With activation tables (ACT_LUT) the requantizes are tables of exactly that:
    0 differ; without, the conv epilogue's fixed-point multiplier: within 1 LSB."""
    import json
    with open(os.path.join(T.common.ROOT, "configs", "default.json")) as f:
        cfg = json.load(f)
    cfg["ACT_LUT"] = 2
    with open("lut.json", "w") as f:
        json.dump(cfg, f)
    for act in ("u8", "s8"):
        q, _ = conv_concat(act, [16, 32, 16, 7], [0.3, 1.0, 3.0, 9.0])
        inits = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
        path = T.save(q, f"lut_requant_{act}.onnx")
        # inputs spread over their whole range (ties of the requantization are met)
        x = (rng.standard_normal((1, 8, 5, 7)) * 3).astype(np.float32)
        names = [f"B{i}_QuantizeLinear_Output" for i in range(4)] + ["Y_QuantizeLinear_Output"]
        for cfgname, bound in (("lut.json", 0), ("default", 1)):
            rc, _, err = T.infer(path, x, ["--config", cfgname] + [a for k, n in enumerate(names)
                                                                  for a in ("--tensor", f"{n}=t{k}.npy")])
            if rc:
                T.check(f"requant {act} {cfgname}", False, err[:200])
                continue
            t = [np.load(f"t{k}.npy").astype(np.int32) for k in range(5)]
            so, zo = np.float32(inits["Y_scale"]), int(inits["Y_zero_point"])
            lo, hi = (0, 255) if act == "u8" else (-128, 127)
            want = []
            for i in range(4):
                si, zi = np.float32(inits[f"B{i}_scale"]), int(inits[f"B{i}_zero_point"])
                f = (t[i] - zi).astype(np.float32) * si
                want.append(np.clip(np.rint(f / so) + zo, lo, hi).astype(np.int32))
            d = np.abs(np.concatenate(want, axis=1) - t[4])
            T.check(f"requant {act} {cfgname} (bound {bound})", d.max() <= bound,
                    f"{int((d > 0).sum())} of {d.size} differ, max {int(d.max())}")
            if cfgname == "lut.json":
                np.save("pl_lut.npy", x)
                r = subprocess.run([T.TSR, "infer", path, "-i", "pl_lut.npy", "--config", cfgname, "--backend",
                                    T.BACKEND], capture_output=True, text=True, errors="replace", timeout=600)
                rc, out = r.returncode, r.stdout
                T.check(f"requant {act} tables", rc == 0 and "in 1 segment," in out.splitlines()[0] and
                        "conv+act" in out, out.splitlines()[0] if out else "")


def place_option():
    """tessera infer --place (issue 30: one placement option, not environment switches): concat=host moves
    an aligned device Concat to the host copy (more segments, the same bytes) and is printed with the
    placement; an unknown kind or value is a one-line error naming it, refused before anything runs (no
    output written)."""
    q, x = conv_concat("u8", [16, 16], [1, 1], True)
    path = T.save(q, "place_cat.onnx")
    rc, dev = T.placement(path, x)
    with T.placed("concat=host"):
        rc2, host = T.placement(path, x)
    first = [o.splitlines()[0] if o else "" for o in (dev, host)]
    nseg = [int(f.split(" segment")[0].split()[-1]) if " segment" in f else -1 for f in first]
    line = next((ln for ln in host.splitlines() if ln.split()[:2] == ["cat", "Concat"]), "")
    T.check("--place concat=host: the Concat on the host, more segments", rc == 0 and rc2 == 0 and
            nseg[0] == 1 and nseg[1] > 1 and "host" in line, " | ".join(first + [" ".join(line.split())]))
    T.check("--place concat=host: printed with the placement",
            "placement options: --place concat=host" in host and "placement options" not in dev, host[:300])
    np.save("place_in.npy", x)
    for arg, want in (("bogus=host", 'unknown kind "bogus"'), ("concat=maybe", 'concat needs device or host, not "maybe"'),
                      ("softmax=device,bias", 'bias needs device or host')):
        if os.path.exists("place_out.npy"):
            os.remove("place_out.npy")
        r = subprocess.run([T.TSR, "infer", path, "-i", "place_in.npy", "-o", "place_out.npy", "--place", arg],
                           capture_output=True, text=True, errors="replace", timeout=60)
        err = r.stderr.strip()
        T.check(f"--place {arg} refused", r.returncode == 2 and len(err.splitlines()) == 1 and want in err and
                not r.stdout and not os.path.exists("place_out.npy"), f"exit {r.returncode}: {err[:200]}")


def main():
    T.setup()
    place_option()
    device_concats()
    shape = [1, 8, 6, 6]
    cal = rng.standard_normal((16, *shape[1:])).astype(np.float32)
    x = rng.standard_normal(shape).astype(np.float32)
    for act in ("u8", "s8"):
        # two and four inputs, each with its own range (shufflenet, googlenet, squeezenet)
        m = concat_model(2, 8, shape, [1.0, 3.0])
        T.against_ort(f"concat 2 own scales {act}", T.quantize(m, cal, act), x, max_lsb=1)
        m = concat_model(4, 4, shape, [0.5, 1.0, 2.0, 4.0])
        T.against_ort(f"concat 4 own scales {act}", T.quantize(m, cal, act), x, max_lsb=1)
        # inputs from a max pool, a conv and the graph's quantized input, each requantized on the device
        nodes, inits = branches(1, 8, shape, [1.0])
        nodes += [helper.make_node("MaxPool", ["B0"], ["P"], name="mp", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                  helper.make_node("Conv", ["P", "w0"], ["C"], name="convp"),
                  helper.make_node("Concat", ["P", "C", "X"], ["Y"], name="cat", axis=1)]
        m = T.model(nodes, [("X", F, shape)], [("Y", F, [1, 24, 6, 6])], inits)
        T.against_ort(f"concat pool+conv+input {act}", T.quantize(m, cal, act), x, max_lsb=1)
        q = T.quantize(m, cal, act)
        rc, out = T.placement(f"concat_pool+conv+input_{act}.onnx", x)
        # conv0, the max pool, convp and a device requantize per input whose parameters are not the output's
        want = 3 + own_params(q, "cat")
        T.check(f"concat requantizes on the device {act}", rc == 0 and f"-> {want} device operators" in out,
                f"want {want}: " + (out.splitlines()[0] if out else ""))
        # 3-D inputs with their own scales along the last axis, and a constant input (ViT's class token
        # is an initializer the quantizer quantizes): requantized as [1, 1, rows, last], quantized at import
        nodes, inits = branches(2, 8, shape, [1.0, 3.0])
        inits.append(numpy_helper.from_array(np.array([1, 8, 36], np.int64), "r3"))
        inits.append(numpy_helper.from_array((rng.standard_normal((1, 8, 5)) * 2).astype(np.float32), "tok"))
        nodes += [helper.make_node("Reshape", ["B0", "r3"], ["R0"], name="r0"),
                  helper.make_node("Reshape", ["B1", "r3"], ["R1"], name="r1"),
                  helper.make_node("Concat", ["tok", "R0", "R1"], ["Y"], name="cat3d", axis=2)]
        m = T.model(nodes, [("X", F, shape)], [("Y", F, [1, 8, 77])], inits)
        T.against_ort(f"concat 3-D + constant {act}", T.quantize(m, cal, act), x, max_lsb=1)
        # a 3-D graph input (quantized on the host: a 3-D value) and a constant: the input requantized as
        # [1, 1, 8, 36]
        tok = numpy_helper.from_array((rng.standard_normal((1, 8, 5)) * 4).astype(np.float32), "tok")
        m = T.model([helper.make_node("Concat", ["X", "tok"], ["Y"], name="cat3", axis=2)],
                    [("X", F, [1, 8, 36])], [("Y", F, [1, 8, 41])], [tok])
        T.against_ort(f"concat 3-D input + constant {act}", T.quantize(m, cal.reshape(16, 8, 36), act),
                      x.reshape(1, 8, 36), max_lsb=1)
        # one input (densenet121): an alias
        nodes, inits = branches(1, 8, shape, [1.0])
        nodes.append(helper.make_node("Concat", ["B0"], ["Y"], name="cat1", axis=1))
        m = T.model(nodes, [("X", F, shape)], [("Y", F, [1, 8, 6, 6])], inits)
        T.against_ort(f"concat 1 input {act}", T.quantize(m, cal, act), x, max_lsb=0)
    for act in ("u8", "s8"):
        # shufflenet's unit: Split along channels, one half through a conv, Concat (own scales)
        w = numpy_helper.from_array((rng.standard_normal((4, 4, 1, 1)) * 0.7).astype(np.float32), "ws")
        nodes, inits = branches(1, 8, shape, [1.0])
        split = numpy_helper.from_array(np.array([4, 4], np.int64), "sp")
        nodes += [helper.make_node("Split", ["B0", "sp"], ["S0", "S1"], name="split", axis=1),
                  helper.make_node("Conv", ["S1", "ws"], ["C1"], name="convs"),
                  helper.make_node("Concat", ["S0", "C1"], ["Y"], name="cat", axis=1)]
        m = T.model(nodes, [("X", F, shape)], [("Y", F, [1, 8, 6, 6])], inits + [w, split])
        T.against_ort(f"split conv concat {act}", T.quantize(m, cal, act), x, max_lsb=1)
        # Split into three equal parts (no sizes given), the middle one the output
        nodes, inits = branches(1, 9, shape, [1.0])
        nodes.append(helper.make_node("Split", ["B0"], ["P0", "P1", "P2"], name="split3", axis=1))
        nodes.append(helper.make_node("Relu", ["P1"], ["Y"], name="r"))
        m = T.model(nodes, [("X", F, shape)], [("Y", F, [1, 3, 6, 6])], inits)
        T.against_ort(f"split 3 equal {act}", T.quantize(m, cal, act), x, max_lsb=0)
    # com.microsoft QLinearConcat (ONNX Runtime's fused Concat): a computed input with its own parameters,
    # one with the output's, a constant with its own
    for dt, npt in ((TensorProto.UINT8, np.uint8), (TensorProto.INT8, np.int8)):
        z = (lambda v: np.array(v if npt == np.uint8 else v - 128, npt))
        inits = [numpy_helper.from_array(np.array(0.04, np.float32), "ys"), numpy_helper.from_array(z(130), "yz"),
                 numpy_helper.from_array(np.array(0.05, np.float32), "as"), numpy_helper.from_array(z(120), "az"),
                 numpy_helper.from_array(np.array(0.04, np.float32), "bs"), numpy_helper.from_array(z(130), "bz"),
                 numpy_helper.from_array(rng.integers(0, 255, (1, 2, 3, 3)).astype(np.int32).astype(npt)
                                         if npt == np.uint8 else rng.integers(-128, 127, (1, 2, 3, 3)).astype(npt),
                                         "c"),
                 numpy_helper.from_array(np.array(0.07, np.float32), "cs"), numpy_helper.from_array(z(100), "cz")]
        node = helper.make_node("QLinearConcat", ["ys", "yz", "X", "as", "az", "X", "bs", "bz", "c", "cs", "cz"],
                                ["Y"], name="qcat", domain="com.microsoft", axis=1)
        g = helper.make_graph([node], "t", [helper.make_tensor_value_info("X", dt, [1, 4, 3, 3])],
                              [helper.make_tensor_value_info("Y", dt, [1, 10, 3, 3])], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
        m.ir_version = 7
        xi = rng.integers(np.iinfo(npt).min, np.iinfo(npt).max, (1, 4, 3, 3)).astype(npt)
        T.against_ort(f"qlinearconcat {npt.__name__}", m, xi, max_lsb=1)
    # integer inputs (no QDQ): three uint8 tensors along H, exact
    U = TensorProto.UINT8
    shapes = [[1, 2, 3, 4], [1, 2, 1, 4], [1, 2, 2, 4]]
    m = T.model([helper.make_node("Concat", ["a", "b", "c"], ["Y"], name="catu", axis=2)],
                [("a", U, shapes[0])], [("Y", U, [1, 2, 6, 4])],
                [numpy_helper.from_array(np.full(s, 7 + i, np.uint8), n) for i, (s, n) in
                 enumerate(zip(shapes[1:], "bc"))])
    # constants b and c: ONNX Runtime folds them; tessera copies them in
    xa = rng.integers(0, 255, shapes[0]).astype(np.uint8)
    T.against_ort("concat 3 uint8 along H", m, xa, max_lsb=0)
    T.finish()


if __name__ == "__main__":
    main()
