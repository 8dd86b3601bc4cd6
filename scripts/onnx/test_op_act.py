#!/usr/bin/python3
"""test_op_act.py TESSERA WORKDIR [BACKEND]: quantized activations as device activation tables
(onnx/tsr_onnx_act.c; config key ACT_LUT). Small float models X -> Conv -> ACT -> Conv -> Y (Sigmoid,
HardSwish, SiLU = x * Sigmoid(x), Tanh, GELU in its Erf form, LeakyRelu), quantized u8 and s8 by our
quantize_static (scripts/zoo/qdq.py), run on configs/default.json + "ACT_LUT": 4 and on
configs/default.json + "ACT_LUT": 0 (the host path; both written to the work directory):
  (a) the outputs are bit-identical (the tables are computed by running the host kernels);
  (b) against ONNX Runtime, both within the same LSB bound of the output (measured and printed; the
      bound is 2 LSB: the chain's float ops round as the host's float kernels do, <= 1 LSB per
      operator where ONNX Runtime rounds in float with its own approximations, and the 1x1 conv after
      it moves such a difference by at most one more);
  (c) the placement (--placement-json) shows the Q node on the device as an "activation table", the
      chain's float nodes folded into it, fewer host operators and fewer segments than the host path.
Tables are taken only next to device work (a table between host operators would be a segment of its
own). Bad input: a chain the pass must not take runs as before on the ACT_LUT config (same bytes, still on
the host): a Mul of two different tensors (a second non-constant input), a constant that is not a
scalar; a per-channel DequantizeLinear of a computed tensor and a 16-bit QuantizeLinear are refused
the same way on both configs (the pass changes nothing there).
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
rng = np.random.default_rng(25)
SHAPE = [1, 8, 10, 12]
BOUND = 2


NOLUT = None  # configs/default.json with ACT_LUT 0: the host path (main writes it)


def placement(path, x, cfg):
    """The --placement-json of tessera infer on cfg (None: the host path, NOLUT), parsed."""
    np.save("pl_in.npy", x)
    cmd = [T.TSR, "infer", path, "-i", "pl_in.npy", "--backend", T.BACKEND, "--quiet", "--placement-json", "-"]
    r = subprocess.run(cmd + ["--config", cfg or NOLUT], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return json.loads(r.stdout), ""


def conv_act_conv(act_nodes, inits=(), opset=13):
    """X -> 3x3 Conv -> act_nodes (reading A, writing B) -> 1x1 Conv -> Y."""
    c = SHAPE[1]
    w1 = (rng.standard_normal((c, c, 3, 3)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((c, c, 1, 1)) * 0.5).astype(np.float32)
    n = helper.make_node
    nodes = [n("Conv", ["X", "w1"], ["A"], name="conv1", pads=[1, 1, 1, 1])] + act_nodes + \
            [n("Conv", ["B", "w2"], ["Y"], name="conv2")]
    return T.model(nodes, [("X", F, SHAPE)], [("Y", F, SHAPE)],
                   [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")] + list(inits),
                   opset=opset)


def c(name, a):
    return numpy_helper.from_array(np.asarray(a, dtype=np.float32), name)


def run_both(name, q, x, cfg):
    """The model on the host path and with tables: (host output, act output, ORT output) or None."""
    path = T.save(q, name.replace(" ", "_") + ".onnx")
    want = T.ort(path, x)
    rc0, y0, e0 = T.infer(path, x, ("--config", NOLUT))
    rc1, y1, e1 = T.infer(path, x, ("--config", cfg))
    if rc0 or rc1 or y0 is None or y1 is None:
        T.check(name, False, f"host path exit {rc0} ({e0}), tables exit {rc1} ({e1})")
        return None
    return path, y0, y1, want


def table_case(name, q, x, cfg, folded_ops):
    r = run_both(name, q, x, cfg)
    if not r:
        return
    path, y0, y1, want = r
    T.check(f"{name}: bit-identical", y0.shape == y1.shape and np.array_equal(y0.view(np.uint8), y1.view(np.uint8)),
            f"{int((y0 != y1).sum())} of {y0.size} differ")
    scale = T.output_scale(q)
    m0, n0 = T.diff_lsb(y0, want, scale)
    m1, n1 = T.diff_lsb(y1, want, scale)
    T.check(f"{name}: vs ORT", m1 <= BOUND and m0 == m1,
            f"tables {m1} LSB ({n1} differ), host path {m0} LSB ({n0} differ), bound {BOUND}")
    p0, e0 = placement(path, x, None)
    p1, e1 = placement(path, x, cfg)
    if p0 is None or p1 is None:
        T.check(f"{name}: placement", False, e0 or e1)
        return
    acts = [p for p in p1["placement"] if p["side"] == "device" and p["kernel"] == "activation table"]
    chain = [p for p in p1["placement"] if p["op"] in folded_ops]
    # every node of the chain: the table's own node on the device, or folded into it (its segment)
    host_left = [p["op"] for p in chain if p["side"] not in ("device", "folded")]
    folded = [p for p in chain if p["side"] == "folded"]
    ok = acts and not host_left and len(chain) >= len(folded_ops) and \
        all(p["segment"] == acts[0]["segment"] for p in chain) and \
        p1["segments"] < p0["segments"] and p1["host_ops"] < p0["host_ops"]
    T.check(f"{name}: placement", bool(ok),
            f"{len(acts)} table(s), folded {sorted(set(f['op'] for f in folded))}, host left {host_left}; "
            f"segments {p0['segments']} -> {p1['segments']}, host ops {p0['host_ops']} -> {p1['host_ops']}")


def stays_case(name, q, x, cfg, host_op):
    """The pass must not take it: same bytes on both configs, host_op still on the host."""
    r = run_both(name, q, x, cfg)
    if not r:
        return
    path, y0, y1, _ = r
    p1, e1 = placement(path, x, cfg)
    on_host = p1 is not None and any(p["side"] == "host" and p["op"] == host_op for p in p1["placement"])
    T.check(f"{name}: not a table", np.array_equal(y0.view(np.uint8), y1.view(np.uint8)) and on_host,
            e1 or f"{host_op} on the host: {on_host}")


def refused_alike(name, m, x, cfg):
    """Refused on both configs with the same one line."""
    path = T.save(m, name.replace(" ", "_") + ".onnx")
    rc0, y0, e0 = T.infer(path, x, ("--config", NOLUT))
    rc1, y1, e1 = T.infer(path, x, ("--config", cfg))
    T.check(f"{name}: refused alike", rc0 == rc1 == 1 and y0 is None and y1 is None and e0 == e1
            and len(e1.splitlines()) == 1, f"{rc0} {e0!r} / {rc1} {e1!r}")


def main():
    global NOLUT
    T.setup()
    cfg = T.default_config("act_lut.json", ACT_LUT=4)
    NOLUT = T.default_config("act_nolut.json", ACT_LUT=0)
    cal = rng.standard_normal((16, *SHAPE[1:])).astype(np.float32)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    n = helper.make_node
    s2 = np.float32(np.sqrt(2.0))
    cases = [
        ("sigmoid", [n("Sigmoid", ["A"], ["B"], name="sig")], [], ["Sigmoid"], 13),
        ("hardswish", [n("HardSwish", ["A"], ["B"], name="hsw")], [], ["HardSwish"], 14),
        ("silu", [n("Sigmoid", ["A"], ["S"], name="sig"), n("Mul", ["A", "S"], ["B"], name="mul")], [],
         ["Sigmoid", "Mul"], 13),
        ("tanh", [n("Tanh", ["A"], ["B"], name="tanh")], [], ["Tanh"], 13),
        ("gelu erf", [n("Div", ["A", "sq2"], ["D"], name="div"), n("Erf", ["D"], ["E"], name="erf"),
                      n("Add", ["E", "one"], ["P"], name="add1"), n("Mul", ["A", "P"], ["M"], name="mulx"),
                      n("Mul", ["M", "half"], ["B"], name="mulh")],
         [c("sq2", s2), c("one", 1.0), c("half", 0.5)], ["Div", "Erf", "Add", "Mul"], 13),
        ("leakyrelu", [n("LeakyRelu", ["A"], ["B"], name="lrelu", alpha=0.1)], [], ["LeakyRelu"], 13),
    ]
    for name, nodes, inits, ops, opset in cases:
        fm = conv_act_conv(nodes, inits, opset)
        for act in ("u8", "s8"):
            q = T.quantize(fm, cal, act)
            table_case(f"{name} {act}", q, x, cfg, ops)

    # a value inside a table is never computed: asking for it is one clear line; the table's output reads
    # as the host path's
    np.save("tin.npy", x)

    def tensor(name, extra):
        r = subprocess.run([T.TSR, "infer", "silu_u8.onnx", "-i", "tin.npy", "-o", "tout.npy", "--quiet",
                            "--backend", T.BACKEND, "--tensor", f"{name}=t.npy", *extra],
                           capture_output=True, text=True, timeout=600)
        return r.returncode, r.stderr.strip(), (np.load("t.npy") if r.returncode == 0 else None)
    rc, err, _ = tensor("S", ("--config", cfg))
    T.check("silu: a value inside the table", rc == 1 and len(err.splitlines()) == 1 and
            "inside a device activation table" in err, err)
    rc1, e1, t1 = tensor("B_QuantizeLinear_Output", ("--config", cfg))
    rc0, e0, t0 = tensor("B_QuantizeLinear_Output", ("--config", NOLUT))
    T.check("silu: the table's output", rc0 == rc1 == 0 and np.array_equal(t0, t1), e0 or e1)

    # a Mul of the activation and another conv's output: two non-constant inputs, not one table
    w3 = (rng.standard_normal((SHAPE[1], SHAPE[1], 1, 1)) * 0.5).astype(np.float32)
    two = conv_act_conv([n("Conv", ["X", "w3"], ["C"], name="conv3"), n("Sigmoid", ["A"], ["S"], name="sig"),
                         n("Mul", ["S", "C"], ["B"], name="mul2")], [numpy_helper.from_array(w3, "w3")])
    for act in ("u8", "s8"):
        stays_case(f"mul of two tensors {act}", T.quantize(two, cal, act), x, cfg, "Mul")
    # a per-channel constant (not a scalar): Mul by [1, C, 1, 1] after Tanh stays a float chain on the host
    pc = conv_act_conv([n("Tanh", ["A"], ["Tn"], name="tanh"), n("Div", ["Tn", "pc"], ["B"], name="divc")],
                       [c("pc", (1.0 + rng.random((1, SHAPE[1], 1, 1))).astype(np.float32))])
    stays_case("per-channel constant u8", T.quantize(pc, cal, "u8"), x, cfg, "Div")

    # QLinear models (com.microsoft QLinearSigmoid, QLinearLeakyRelu: ONNX Runtime's lookup tables): on the
    # host within 1 LSB of ORT (MLAS's logistic approximation; LeakyRelu exact), after a device max pool a
    # table, bit-identical; straight after the host's QuantizeLinear of the input (no device operator
    # next to it) it stays on the host: a segment of its own would be one more round trip
    for op, attrs in (("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.2})):
        for qt, z in ((TensorProto.UINT8, np.uint8(118)), (TensorProto.INT8, np.int8(-7))):
            for pooled in (True, False):
                inits = [numpy_helper.from_array(np.float32(0.031), "xs"), numpy_helper.from_array(z, "xz"),
                         numpy_helper.from_array(np.float32(0.0043 if op == "QLinearSigmoid" else 0.02), "ys"),
                         numpy_helper.from_array(z, "yz")]
                nodes = [n("QuantizeLinear", ["X", "xs", "xz"], ["q0"], name="qx")]
                if pooled:
                    nodes.append(n("MaxPool", ["q0"], ["q"], name="pool", kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
                nodes += [n(op, ["q" if pooled else "q0", "xs", "xz", "ys", "yz"], ["a"], name="qact",
                            domain="com.microsoft", **attrs),
                          n("DequantizeLinear", ["a", "ys", "yz"], ["Y"], name="dqy")]
                g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("X", F, SHAPE)],
                                      [helper.make_tensor_value_info("Y", F, SHAPE)], inits)
                qm = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                                         helper.make_opsetid("com.microsoft", 1)])
                qm.ir_version = 7
                name = f"{op} {'u8' if qt == TensorProto.UINT8 else 's8'}{' after a pool' if pooled else ' alone'}"
                xq = (rng.standard_normal(SHAPE) * 2.5).astype(np.float32)
                r = run_both(name, qm, xq, cfg)
                if not r:
                    continue
                path, y0, y1, want = r
                m0, n0 = T.diff_lsb(y0, want, T.output_scale(qm))
                p1, e1 = placement(path, xq, cfg)
                where = [p["side"] + (" table" if p["kernel"] == "activation table" else "")
                         for p in (p1["placement"] if p1 else []) if p["op"] == op]
                T.check(name, np.array_equal(y0, y1) and m0 <= (1 if op == "QLinearSigmoid" else 0) and
                        where == (["device table"] if pooled else ["host"]),
                        f"host vs ORT {m0} LSB ({n0} differ), tables bit-identical {np.array_equal(y0, y1)}, "
                        f"placed {where} {e1}")

    # a per-channel DequantizeLinear of a computed tensor, a 16-bit QuantizeLinear: refused alike
    U8, U16 = TensorProto.UINT8, TensorProto.UINT16
    sc = numpy_helper.from_array(np.full(SHAPE[1], 0.05, np.float32), "sc")
    zp = numpy_helper.from_array(np.full(SHAPE[1], 128, np.uint8), "zp")
    sc1 = numpy_helper.from_array(np.float32(0.05), "sc1")
    zp1 = numpy_helper.from_array(np.uint8(128), "zp1")
    pcm = T.model([n("QuantizeLinear", ["X", "sc1", "zp1"], ["q"]),
                   n("MaxPool", ["q"], ["p"], kernel_shape=[1, 1]),
                   n("DequantizeLinear", ["p", "sc", "zp"], ["d"], name="dq_pc", axis=1),
                   n("Sigmoid", ["d"], ["s"], name="sig"),
                   n("QuantizeLinear", ["s", "sc1", "zp1"], ["Y"])],
                  [("X", F, SHAPE)], [("Y", U8, SHAPE)], [sc, zp, sc1, zp1])
    refused_alike("per-channel dq", pcm, x, cfg)
    zp16 = numpy_helper.from_array(np.uint16(0), "zp16")
    m16 = T.model([n("QuantizeLinear", ["X", "sc1", "zp16"], ["q"], name="q16"),
                   n("DequantizeLinear", ["q", "sc1", "zp16"], ["d"], name="dq16"),
                   n("Sigmoid", ["d"], ["s"], name="sig"),
                   n("QuantizeLinear", ["s", "sc1", "zp1"], ["Y"])],
                  [("X", F, SHAPE)], [("Y", U8, SHAPE)], [sc1, zp1, zp16], opset=21)
    refused_alike("16-bit q", m16, x, cfg)
    T.finish()


if __name__ == "__main__":
    main()
