#!/usr/bin/python3
"""test_op_ffn.py TESSERA WORKDIR [BACKEND]: a transformer's feed-forward block on the device.

X [1, 24, 32] -> MatMul(W1) -> Add(b1) -> GELU (Erf form: Div, Erf, Add, Mul, Mul) -> MatMul(W2) -> Add(b2),
as torch exports a Linear (MatMul, then the bias Add) and quantized by our quantize_static
(scripts/zoo/qdq.py, u8 and s8, each bias order of the Add). The bias Adds are QDQ Adds of an activation
and a constant vector (ONNX Runtime's QLinearAdd), each a device depthwise 1x1 conv whose per-channel
integer form was searched to equal the host kernel on every input byte (onnx/ops/tsr_ox_bias.c); the GELU
is one activation table (onnx/tsr_onnx_act.c) written in the denses' [rows, C] layout. Checked:
  (a) the GELU's nodes one device table; with zero biases (as the zoo's BERT and ViT are initialised)
      and with random u8 biases one device segment, the input's Q and the output's DQ the only host
      operators, the Adds on the device (fails before: the Adds and the GELU on the host, 2 segments, 11
      host ops);
      random s8 biases: one channel of ff1's 64 has no integer form, that Add stays on the host;
  (b) the output bytes equal the host path's (--place bias=host on a config without activation tables;
      with EXACT_REQUANT, the host Adds');
  (c) each bias Add alone against ONNX Runtime (its DQ -> Add -> Q group run in ORT on tessera's own
      input of it, read with --tensor): 0 LSB; the whole block against ORT within 1 LSB (the denses'
      fixed-point requantization, measured and printed);
  (d) an Add whose constant makes exact ties of both parities (power-of-two scales, a bias on the half
      LSB) has no integer form: it stays on the host and is still exact against ORT.
"""
import json
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto as TP, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import oxtest as T  # noqa: E402

S, D, H = 24, 32, 64


def ffn(bias_first, zero_bias, seed=5):
    rng = np.random.default_rng(seed)
    b = 0.0 if zero_bias else 0.3
    init = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("w1", rng.standard_normal((D, H)) * 0.25), ("b1", rng.standard_normal(H) * b),
        ("w2", rng.standard_normal((H, D)) * 0.2), ("b2", rng.standard_normal(D) * b),
        ("sqrt2", np.array(1.4142135)), ("one", np.array(1.0)), ("half", np.array(0.5)))]
    n = helper.make_node

    def add(x, b, y, name):
        return n("Add", [b, x] if bias_first else [x, b], [y], name=name)
    nodes = [n("MatMul", ["x", "w1"], ["m1"], name="ff1"), add("m1", "b1", "h", "ff1_bias"),
             n("Div", ["h", "sqrt2"], ["d"], name="gelu_div"), n("Erf", ["d"], ["e"], name="gelu_erf"),
             n("Add", ["e", "one"], ["e1"], name="gelu_add"), n("Mul", ["h", "e1"], ["g0"], name="gelu_mul"),
             n("Mul", ["g0", "half"], ["g"], name="gelu_half"),
             n("MatMul", ["g", "w2"], ["m2"], name="ff2"), add("m2", "b2", "y", "ff2_bias")]
    return T.model(nodes, [("x", TP.FLOAT, [1, S, D])], [("y", TP.FLOAT, [1, S, D])], init)


def placement(path, x, env=None):
    """(placement JSON, or None and the error) of tessera infer on x."""
    np.save("pl_in.npy", x)
    r = subprocess.run([T.TSR, "infer", path, "-i", "pl_in.npy", "-o", "pl_out.npy", "--quiet", "--backend",
                        T.BACKEND, "--placement-json", "-"], capture_output=True, text=True, errors="replace",
                       timeout=600, env=dict(os.environ, **(env or {})))
    return (json.loads(r.stdout), "") if r.returncode == 0 else (None, r.stderr.strip()[-300:])


def q_output(q, node_name):
    """The QuantizeLinear output after node node_name's output in the QDQ model q, its Q node."""
    out = next(nd.output[0] for nd in q.graph.node if nd.name == node_name)
    qn = next(nd for nd in q.graph.node if nd.op_type == "QuantizeLinear" and nd.input[0] == out)
    return qn.output[0], qn


def add_alone(q, node_name, act):
    """The bias Add's group as a model of its own: its quantized input x_q -> DQ, the bias DQ -> Add -> Q,
    the Q's output, with the QDQ model's own constants (the group ORT fuses into QLinearAdd)."""
    g = q.graph
    add = next(nd for nd in g.node if nd.name == node_name)
    dqs = {nd.output[0]: nd for nd in g.node if nd.op_type == "DequantizeLinear"}
    ins = [dqs[i] for i in add.input]
    act_dq = next(d for d in ins if not any(t.name == d.input[0] for t in g.initializer))
    yq, qn = q_output(q, node_name)
    need = {i for d in ins for i in d.input} | set(qn.input[1:])
    inits = [t for t in g.initializer if t.name in need]
    et = TP.UINT8 if act == "u8" else TP.INT8
    m = T.model(ins + [add, qn], [(act_dq.input[0], et, [1, S, D if node_name == "ff2_bias" else H])],
                [(yq, et, [1, S, D if node_name == "ff2_bias" else H])], inits)
    return m, act_dq.input[0], yq


def tie_model(act):
    """x -> Q/DQ (2^-4) -> MatMul(identity-like W, per channel) -> Q/DQ (2^-4) -> Add(c: 2^-5, zp 0,
    odd codes: half an output LSB) -> Q/DQ (2^-4): every sum an exact tie of either parity."""
    z = 128 if act == "u8" else 0
    et, nt = (TP.UINT8, np.uint8) if act == "u8" else (TP.INT8, np.int8)
    c = np.full(D, 2 ** -4, np.float32)
    init = [numpy_helper.from_array(np.array(v, np.float32), nm) for nm, v in (("s_in", 2 ** -4),
                                                                               ("s_mm", 2 ** -4), ("s_y", 2 ** -4),
                                                                               ("s_c", 2 ** -5))]
    init += [numpy_helper.from_array(np.array(z, nt), nm) for nm in ("z_in", "z_mm", "z_y")]
    init += [numpy_helper.from_array(np.array(0 if act == "s8" else 0, nt), "z_c"),
             numpy_helper.from_array((np.arange(D) % 7 * 2 + 1).astype(nt), "c_q"),
             numpy_helper.from_array(np.eye(D, dtype=np.int8) * 64, "w_q"), numpy_helper.from_array(c, "w_s"),
             numpy_helper.from_array(np.zeros(D, np.int8), "w_z")]
    n = helper.make_node
    nodes = [n("QuantizeLinear", ["x", "s_in", "z_in"], ["x_q"]), n("DequantizeLinear", ["x_q", "s_in", "z_in"], ["x_d"]),
             n("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w_d"], axis=1),
             n("MatMul", ["x_d", "w_d"], ["m"], name="mm"),
             n("QuantizeLinear", ["m", "s_mm", "z_mm"], ["m_q"]), n("DequantizeLinear", ["m_q", "s_mm", "z_mm"], ["m_d"]),
             n("DequantizeLinear", ["c_q", "s_c", "z_c"], ["c_d"]), n("Add", ["m_d", "c_d"], ["y"], name="tie_bias"),
             n("QuantizeLinear", ["y", "s_y", "z_y"], ["y_q"]), n("DequantizeLinear", ["y_q", "s_y", "z_y"], ["y_d"])]
    return T.model(nodes, [("x", TP.FLOAT, [1, S, D])], [("y_d", TP.FLOAT, [1, S, D])], init)


def check_block(act, first, zero, x, calib, nolut):
    name = f"ffn {act}{' bias first' if first else ''}{' zero bias' if zero else ''}"
    q = T.quantize(ffn(first, zero), calib, act)
    path = T.save(q, name.replace(" ", "_") + ".onnx")
    pl, err = placement(path, x)
    if not T.check(f"{name}: imports", pl is not None, err):
        return
    side = {p["name"]: p["side"] for p in pl["placement"]}
    on_dev = [k for k in ("ff1_bias", "ff2_bias") if side.get(k) == "device"]
    T.check(f"{name}: GELU one device table", side.get("gelu_half") == "device" and side.get("gelu_erf") == "folded",
            str({k: side.get(k) for k in ("gelu_erf", "gelu_half")}))
    if zero or act == "u8":  # (random s8 biases: one of 96 channels has no form, that Add stays on the host)
        T.check(f"{name}: one segment, 2 host ops, Adds on the device", pl["segments"] == 1 and
                pl["host_ops"] == 2 and len(on_dev) == 2, f"{pl['segments']} segments, {pl['host_ops']} host ops, "
                f"on the device: {on_dev}")
    else:
        T.check(f"{name}: each Add on the device or the host", all(side.get(k) in ("device", "host")
                                                                     for k in ("ff1_bias", "ff2_bias")),
                f"on the device: {on_dev}, {pl['segments']} segments")
    got = T.against_ort(name, q, x, max_lsb=1)
    rc, host, e = T.infer(path, x, ("--config", nolut, "--place", "bias=host"))
    T.check(f"{name}: bytes = the host path's", got is not None and host is not None and
            np.array_equal(got, host), f"exit {rc} {e}" if host is None else "")
    if zero and act == "u8":  # the conv is fixed point on every config: with EXACT_REQUANT too
        exact = T.default_config("exact.json", EXACT_REQUANT=1)
        rc1, dev_x, e1 = T.infer(path, x, ("--config", exact))
        rc2, host_x, e2 = T.infer(path, x, ("--config", exact, "--place", "bias=host"))
        T.check(f"{name}: EXACT_REQUANT, bytes = the host Adds'", dev_x is not None and host_x is not None and
                np.array_equal(dev_x, host_x), f"exit {rc1} {e1}; {rc2} {e2}")
    groups = {node: add_alone(q, node, act) for node in ("ff1_bias", "ff2_bias")}
    args = []
    for node, (m, xin, yq) in groups.items():
        mm_q, _ = q_output(q, "ff1" if node == "ff1_bias" else "ff2")
        args += ["--tensor", f"{mm_q}={node}_in.npy", "--tensor", f"{yq}={node}_out.npy"]
    rc, _, e = T.infer(path, x, tuple(args))
    if not T.check(f"{name}: the Adds' operands read", rc == 0, e):
        return
    for node, (m, xin, yq) in groups.items():
        a_in, a_out = np.load(f"{node}_in.npy"), np.load(f"{node}_out.npy")
        want = T.ort(T.save(m, f"{node}_{act}.onnx"), a_in)
        mx, nd = T.diff_lsb(a_out, want)
        T.check(f"{name}: {node} alone vs ORT", mx == 0, f"max {mx} LSB, {nd} of {want.size} differ")


def main():
    T.setup()
    nolut = T.default_config("nolut.json", ACT_LUT=0)
    rng = np.random.default_rng(7)
    calib = (rng.standard_normal((8, S, D)) * 1.2).astype(np.float32)
    x = (rng.standard_normal((1, S, D)) * 1.2).astype(np.float32)
    for act in ("u8", "s8"):
        check_block(act, act == "u8", True, x, calib, nolut)
        check_block(act, False, False, x, calib, nolut)
        m = tie_model(act)
        T.against_ort(f"bias on ties {act}", m, x, max_lsb=0)
        pl, err = placement(T.save(m, f"tie_{act}.onnx"), x)
        side = {p["name"]: p["side"] for p in pl["placement"]} if pl else {}
        T.check(f"bias on ties {act}: no integer form, on the host", side.get("tie_bias") == "host",
                err or str(side.get("tie_bias")))
    T.finish()


if __name__ == "__main__":
    main()
