#!/usr/bin/python3
"""test_zoo.py: CTest `zoo_small` - the model zoo's quantizer and table, small and quick.

usage: test_zoo.py TESSERA WORKDIR      (exit 77 = skipped: node or ONNX Runtime is absent)

1. A hand-computed case: Conv (2 channels, 2x2 kernel) + Relu with fixed weights and two fixed
   calibration inputs; every scale, zero point and quantized value the u8 and s8 forms must carry is
   written out below from onnxruntime's formulas (dyadic weights and inputs, so that float32 sums are
   exact and ONNX Runtime's calibration gives exactly the ranges worked out by hand).
2. Bad arguments of build.py, qdq.py and zoo.py: one line, exit 2, no traceback, nothing written.
3. build.py is deterministic: the same model built twice is byte-identical.
4. The table on resnet18 and mobilenet_v2 at 32x32 (20 inputs, 8 calibration inputs): every model
   and variant reported; every QDQ file passes qdq_check (and a file with one bias scale off by one
   float32 ulp does not); ONNX Runtime loads each file as written (--as-is); the QDQ logits agree with
   the float model's. Bounds (measured 2026-12-06: resnet18 u8/s8 top-1 90%/65% and logit correlation
   0.992/0.989; mobilenet_v2 15%/10% and 0.78/0.75): correlation >= 0.97 for resnet18 and >= 0.65
   for mobilenet_v2, top-1 >= 80% for resnet18 u8. Why not top-1 everywhere: these networks have
   random weights, and their top-1 margins are below the quantization noise (mobilenet_v2 at 224:
   mean margin 0.028, RMS logit error 0.035), so top-1 flips say little; a broken quantizer (a wrong
   bias scale or axis, a lost clamp) drops the correlation to about 0.
   And tessera on them (what users bring): each imports as one device segment with every MAC on the
   device, its top-1 equals ONNX Runtime's on >= 90% of the inputs (measured 100%), and layerdiff.py
   finds every operator, run alone on the same input, within 1 LSB of ONNX Runtime.
   With EXACT_REQUANT every Conv/Gemm of the u8 models is bit-identical to ONNX Runtime (exact_requant);
   with ACT_LUT torchvision's mobilenet_v3_small runs its activations as device tables, in fewer
   segments, byte-identical to the host path (act_tables).
"""
import json
import os
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import qdq  # noqa: E402
import qdq_check  # noqa: E402

FAILS = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def tiny_model():
    """X [1,1,2,2] -> Conv(W [2,1,2,2], B [2]) -> Relu -> Y [1,2,1,1]."""
    w = np.array([[[[127 / 64, -0.5], [0.25, 0.0625]]], [[[-127 / 128, 0.125], [0.5, -0.25]]]], np.float32)
    b = np.array([0.25, -0.5], np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["X", "W", "B"], ["C"], "conv"), helper.make_node("Relu", ["C"], ["Y"], "relu")],
        "tiny", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 2, 1, 1])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


# Calibration inputs: x00 x01 / x10 x11. Conv outputs (worked out by hand, exact in float32):
#   A = [1, 2; 0, -1]:   ch0 = 127/64 - 1 - 1/16 + 1/4 = 1.171875   ch1 = -127/128 + 1/4 + 1/4 - 1/2 = -0.9921875
#   B = [0.5, 1.5; 2, 0]: ch0 = 127/128 - 3/4 + 1/2 + 1/4 = 0.9921875 ch1 = -127/256 + 3/16 + 1 - 1/2 = 0.19140625
# so X's range is [-1, 2], Conv's [-0.9921875, 1.171875] and Relu's [0, 1.171875].
CALIB = np.array([[[[1, 2], [0, -1]]], [[[0.5, 1.5], [2, 0]]]], np.float32)

# Weights: per channel absmax 127/64 and 127/128 -> scale 2*absmax/254 = 1/64 and 1/128 (exact),
# zero point round((-127 + 127) / 2) = 0, q = round(w / scale).
W_Q = np.array([[[[127, -32], [16, 4]]], [[[-127, 16], [64, -32]]]], np.int8)
W_SCALE = np.array([1 / 64, 1 / 128], np.float32)

HAND = {
    "u8": {
        # uint8 asymmetric [0, 255]: scale (rmax - rmin) / 255, zero point round(0 - rmin / scale)
        "x_scale": np.float32(3 / 255), "x_zp": (np.uint8, 85),
        # Relu removed; Conv's output takes Relu's range [0, 1.171875]
        "y_scale": np.float32(1.171875 / 255), "y_zp": (np.uint8, 0),
        # bias: scale float32(x_scale * w_scale[c]) (x * 2^-k: exact), q = round(b / scale)
        # = round(0.25 * 64 / x_scale) = round(1359.99997) and round(-0.5 * 128 / x_scale) = round(-5439.9999)
        "b_q": [1360, -5440],
        "ops": ["QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Conv",
                "QuantizeLinear", "DequantizeLinear"],
    },
    "s8": {
        # int8 symmetric [-127, 127]: scale 2 * absmax / 254, zero point 0
        "x_scale": np.float32(4 / 254), "x_zp": (np.int8, 0),
        "y_scale": np.float32(2.34375 / 254), "y_zp": (np.int8, 0),
        # round(16 / x_scale) = round(1016.000004), round(-64 / x_scale) = round(-4064.00002)
        "b_q": [1016, -4064],
        "ops": ["QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Conv",
                "QuantizeLinear", "DequantizeLinear", "Relu", "QuantizeLinear", "DequantizeLinear"],
    },
}


def hand_case():
    for v, e in HAND.items():
        q = qdq.quantize_model(tiny_model(), CALIB, v)
        inits = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
        expect(sorted(n.op_type for n in q.graph.node) == sorted(e["ops"]), f"hand {v}: nodes {sorted(e['ops'])}")
        xs, xz = inits.get("X_scale"), inits.get("X_zero_point")
        expect(xs is not None and xs.dtype == np.float32 and xs == e["x_scale"], f"hand {v}: X scale {e['x_scale']!r}")
        expect(xz is not None and xz.dtype == e["x_zp"][0] and xz == e["x_zp"][1], f"hand {v}: X zero point {e['x_zp'][1]}")
        ys, yz = inits.get("Y_scale"), inits.get("Y_zero_point")
        if v == "s8":  # Relu kept: Conv's output C has its own pair, with Relu's range
            expect(inits.get("C_scale") == e["y_scale"] and inits.get("C_zero_point") == 0, f"hand {v}: C scale, zero point")
        expect(ys is not None and ys == e["y_scale"], f"hand {v}: Y scale {e['y_scale']!r}")
        expect(yz is not None and yz.dtype == e["y_zp"][0] and yz == e["y_zp"][1], f"hand {v}: Y zero point")
        expect(np.array_equal(inits.get("W_quantized"), W_Q) and inits["W_quantized"].dtype == np.int8,
               f"hand {v}: W int8 {W_Q.reshape(2, 4).tolist()}")
        expect(np.array_equal(inits.get("W_scale"), W_SCALE), f"hand {v}: W scales 1/64, 1/128")
        expect(np.array_equal(inits.get("W_zero_point"), np.zeros(2, np.int8)), f"hand {v}: W zero points 0")
        expect(np.array_equal(inits.get("B_quantized"), np.array(e["b_q"], np.int32)), f"hand {v}: B int32 {e['b_q']}")
        expect(np.array_equal(inits.get("B_quantized_scale"), np.array([e["x_scale"] / 64, e["x_scale"] / 128], np.float32)),
               f"hand {v}: B scale x_scale * w_scale")
        dq = {n.name: n for n in q.graph.node}
        expect(all(a.i == 0 for a in dq["W_DequantizeLinear"].attribute if a.name == "axis")
               and any(a.name == "axis" for a in dq["W_DequantizeLinear"].attribute), f"hand {v}: W DequantizeLinear axis 0")
        expect(qdq_check.check(q, v) == [], f"hand {v}: qdq_check passes")


def run(args, env=None):
    return subprocess.run([sys.executable] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env)


def bad_input(work):
    out = os.path.join(work, "bad")
    os.makedirs(out, exist_ok=True)
    victim = os.path.join(out, "keep.onnx")
    with open(victim, "w") as f:
        f.write("untouched")
    cases = [
        ("build.py unknown model", [os.path.join(HERE, "build.py"), "--models", "resnet9000", "--out", out], None),
        ("build.py bad --size", [os.path.join(HERE, "build.py"), "--models", "resnet18", "--size", "12x", "--out", out], None),
        ("build.py --size 8", [os.path.join(HERE, "build.py"), "--models", "resnet18", "--size", "8", "--out", out], None),
        ("build.py unwritable --out", [os.path.join(HERE, "build.py"), "--models", "resnet18", "--out",
                                       os.path.join(victim, "sub")], None),
        ("qdq.py missing model", [os.path.join(HERE, "qdq.py"), os.path.join(out, "nope.onnx"), victim], None),
        ("qdq.py not a model", [os.path.join(HERE, "qdq.py"), victim, victim], None),
        ("qdq.py bad --activations", [os.path.join(HERE, "qdq.py"), victim, victim, "--activations", "u4"], None),
        ("qdq.py missing ORT", [os.path.join(HERE, "qdq.py"), os.path.join(work, "tiny.onnx"), victim],
         dict(os.environ, TSR_ORT_DIR=os.path.join(work, "no-ort"))),
        ("zoo.py unknown model", [os.path.join(HERE, "zoo.py"), "table", "--models", "alexnet", "--dir", out], None),
        ("zoo.py bad --inputs", [os.path.join(HERE, "zoo.py"), "table", "--inputs", "0", "--dir", out], None),
        ("zoo.py --rtl-timeout without --rtl-check", [os.path.join(HERE, "zoo.py"), "table", "--rtl-timeout", "60",
                                                     "--dir", out], None),
        ("zoo.py bad --rtl-timeout", [os.path.join(HERE, "zoo.py"), "table", "--rtl-check", "--rtl-timeout", "0",
                                      "--dir", out], None),
        ("zoo.py no command", [os.path.join(HERE, "zoo.py")], None),
        ("zoo.py missing ORT", [os.path.join(HERE, "zoo.py"), "table", "--models", "resnet18", "--dir", out,
                                "--tessera", sys.executable], dict(os.environ, TSR_ORT_DIR=os.path.join(work, "no-ort"))),
    ]
    onnx.save(tiny_model(), os.path.join(work, "tiny.onnx"))
    before = sorted(os.listdir(out))
    for what, args, env in cases:
        p = run(args, env)
        err = [ln for ln in p.stderr.splitlines() if ln.strip()]
        expect(p.returncode == 2 and len(err) == 1 and "Traceback" not in p.stderr,
               f"{what}: exit 2 with one line ({p.returncode}: {err[-1] if err else ''})")
    with open(victim) as f:
        expect(f.read() == "untouched", "failing runs left the output file untouched")
    expect(sorted(os.listdir(out)) == before, "failing runs wrote no file")


def special_output(work):
    """qdq.py OUT where OUT is a FIFO (as -o /dev/null is a device): the FIFO receives the same
    bytes as a regular file and stays a FIFO. Renaming the temporary file over it would have
    replaced it with a regular file, and run as root, /dev/null too."""
    model, reg, fifo = (os.path.join(work, n) for n in ("special.onnx", "special_reg.onnx", "special.fifo"))
    w = np.random.default_rng(5).normal(0, 0.2, (4, 3, 3, 3)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["X", "W"], ["Y"], "conv", pads=[1, 1, 1, 1])], "special",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4, 16, 16])],
                          [numpy_helper.from_array(w, "W")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), model)
    for f in (reg, fifo):
        if os.path.lexists(f):
            os.unlink(f)
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    p = run([os.path.join(HERE, "qdq.py"), model, fifo, "--calib", "2"])
    reader.join(60)
    if reader.is_alive():  # nothing was written into the FIFO: release the reader
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    q = run([os.path.join(HERE, "qdq.py"), model, reg, "--calib", "2"])
    with open(reg, "rb") as f:
        want = f.read() if q.returncode == 0 else None
    expect(p.returncode == 0 and want and got == [want],
           f"qdq.py to a FIFO: the bytes of a regular-file run ({p.returncode}: {p.stderr.strip()[-200:]})")
    expect(stat.S_ISFIFO(os.lstat(fifo).st_mode), "qdq.py to a FIFO: the FIFO is still a FIFO")


def determinism(work):
    a, b = os.path.join(work, "det_a"), os.path.join(work, "det_b")
    for d in (a, b):
        p = run([os.path.join(HERE, "build.py"), "--models", "squeezenet1_1", "--size", "32", "--out", d, "--force"])
        expect(p.returncode == 0, f"build.py squeezenet1_1 -> {d}")
    with open(os.path.join(a, "squeezenet1_1.onnx"), "rb") as f1, open(os.path.join(b, "squeezenet1_1.onnx"), "rb") as f2:
        expect(f1.read() == f2.read(), "build.py: the same seed gives a byte-identical .onnx")


def layerdiff(tessera, d, model, variant, config="default", inputs=2):
    """layerdiff.py's rows (per quantized tensor, chain and alone against ONNX Runtime) on 2 inputs, its
    scratch files in this test's directory (its default, /tmp/layerdiff, is shared with every other run
    on the machine: two runs at once overwrite each other's files)."""
    p = run([os.path.join(HERE, "layerdiff.py"), os.path.join(d, "s32", f"{model}_{variant}.onnx"),
             os.path.join(d, "s32", f"{model}_x20.npy"), "--tessera", tessera, "--inputs", str(inputs), "--json",
             "--config", config, "--dir", os.path.join(d, "layerdiff")])
    if p.returncode:
        print("     layerdiff: " + (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
        return []
    return json.loads(p.stdout)


def exact_requant(tessera, work, d):
    """With EXACT_REQUANT (the ALU's fscale: ONNX Runtime's float32 requantization) every Conv and Gemm
    of the u8 models, run alone on ONNX Runtime's input, is bit-identical to ONNX Runtime on 8 inputs
    (without the key they differ by 1 LSB here and there). The Adds are not: ONNX Runtime's QLinearAdd
    rounds a float32 sum of two scaled terms, which the device's fixed-point add matches within 1 LSB
    only. The s8 models are not asserted exact: ONNX Runtime's s8 convs differ from its own QLinearConv
    form now and then (docs/guide/model-zoo.md)."""
    with open(os.path.join(common.ROOT, "configs", "default.json")) as f:
        cfg = json.load(f)
    cfg["EXACT_REQUANT"] = 1
    path = os.path.join(work, "default_exact.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    for model in ("resnet18", "mobilenet_v2"):
        layers = layerdiff(tessera, d, model, "u8", config=path, inputs=8)
        convs = [x for x in layers if x["op"].startswith(("Conv", "Gemm"))]
        off = [x for x in convs if x.get("alone_max")]
        over = [x for x in layers if (x.get("alone_max") or 0) > 1]
        expect(convs and not off and not over, f"{model} u8 with EXACT_REQUANT: all {len(convs)} Conv/Gemm "
               f"bit-identical to ONNX Runtime alone, every operator within 1 LSB, 8 inputs"
               f"{'; off: ' + off[0]['tensor'] if off else ''}{'; over: ' + over[0]['tensor'] if over else ''}")


def act_tables(tessera, work):
    """With ACT_LUT (device activation tables; the default config has 2), torchvision's
    mobilenet_v3_small quantized as quantize_static writes it (u8 and s8, 32x32): its
    HardSwish/Hardsigmoid chains become device tables, so it runs in fewer device segments with fewer
    host operators than on the default config without tables (default + "ACT_LUT": 0, written here),
    and its outputs are byte-identical to the table-less path's (the tables are computed by the host
    kernels themselves). Measured 2026-12-06 at 64x64: 38 -> 27 segments, 146 -> 43 host ops. Since the
    squeeze-and-excite Mul runs on the device (jit/tsr_mul.h) with the residual Adds after it, the whole
    network is one device segment with two host operators (the input's QuantizeLinear, the output's
    DequantizeLinear): 38/119 -> 1/2 at 32x32 (it was 38/137 -> 27/34 with the gates' Muls on the host)."""
    with open(os.path.join(common.ROOT, "configs", "default.json")) as f:
        cfg = json.load(f)
    expect(cfg.get("ACT_LUT") == 2, f"configs/default.json has ACT_LUT 2 (got {cfg.get('ACT_LUT')})")
    cfg["ACT_LUT"] = 0
    path = os.path.join(work, "default_nolut.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    d = os.path.join(work, "zoo")
    rows = {}
    for name, c in (("nolut", path), ("lut", "default")):
        p = run([os.path.join(HERE, "zoo.py"), "table", "--models", "mobilenet_v3_small", "--size", "32",
                 "--inputs", "2", "--calib", "8", "--dir", d, "--tessera", tessera, "--config", c, "--json"])
        expect(p.returncode == 0, f"mobilenet_v3_small table on {name} ran ({p.stderr.strip().splitlines()[-1:]})")
        if p.returncode:
            return
        rows[name] = {r["variant"]: r for r in json.loads(p.stdout)["rows"]}
    for v in ("u8", "s8"):
        a, b = rows["nolut"].get(v, {}), rows["lut"].get(v, {})
        expect(a.get("imports") == "yes" and b.get("imports") == "yes" and (b.get("segments") or 99) < (a.get("segments") or 0)
               and (b.get("host_ops") or 999) < (a.get("host_ops") or 0),
               f"mobilenet_v3_small {v} with ACT_LUT: fewer segments and host ops "
               f"({a.get('segments')}/{a.get('host_ops')} -> {b.get('segments')}/{b.get('host_ops')})")
        expect(b.get("segments") == 1 and b.get("host_ops") == 2,
               f"mobilenet_v3_small {v} with ACT_LUT: one device segment, 2 host ops (the gates' Muls and the "
               f"Adds after them on the device; got {b.get('segments')}/{b.get('host_ops')})")
        q = os.path.join(d, "s32", f"mobilenet_v3_small_{v}.onnx")
        x = os.path.join(work, "mv3_x.npy")
        np.save(x, np.load(os.path.join(d, "s32", "mobilenet_v3_small_x2.npy"))[:1])
        outs = []
        for c in (path, "default"):
            o = os.path.join(work, f"mv3_{v}_{len(outs)}.npy")
            p = subprocess.run([tessera, "infer", q, "-i", x, "-o", o, "--quiet", "--config", c],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            outs.append(np.load(o) if p.returncode == 0 else None)
        expect(all(o is not None for o in outs) and np.array_equal(outs[0], outs[1]),
               f"mobilenet_v3_small {v}: outputs with ACT_LUT byte-identical to ACT_LUT 0's")


def zoo_table(tessera, work):
    d = os.path.join(work, "zoo")
    p = run([os.path.join(HERE, "zoo.py"), "table", "--models", "resnet18,mobilenet_v2", "--size", "32",
             "--inputs", "20", "--calib", "8", "--dir", d, "--tessera", tessera, "--json"])
    expect(p.returncode == 0, f"zoo.py table ran (exit {p.returncode}: {p.stderr.strip().splitlines()[-1:] })")
    if p.returncode:
        return
    rows = json.loads(p.stdout)["rows"]
    got = {(r["model"], r["variant"]) for r in rows}
    expect(got == {(m, v) for m in ("resnet18", "mobilenet_v2") for v in ("u8", "s8")}, "the table reports every model and variant")
    for r in rows:
        tag = f"{r['model']} {r['variant']}"
        print(f"     {tag}: imports: {r.get('imports')}; fp32 top-1 {r.get('fp32_top1')}, corr {r.get('fp32_corr')}")
        expect(bool(r.get("imports")), f"{tag}: the table says whether it imports")
        expect(r.get("qdq_check") == "ok", f"{tag}: qdq_check ok ({r.get('qdq_check')})")
        lo = 0.97 if r["model"] == "resnet18" else 0.65
        expect((r.get("fp32_corr") or 0) >= lo, f"{tag}: QDQ logits correlate with the float model's >= {lo}")
        # torchvision networks quantized as quantize_static writes them: both import whole onto the
        # device (measured: one segment, all MACs on the device, top-1 vs ORT 100% on these 20 inputs)
        expect(r["imports"] == "yes", f"{tag}: imports ({r['imports']})")
        expect(r.get("device_macs") == 1.0 and r.get("segments") == 1,
               f"{tag}: one device segment with every MAC ({r.get('segments')}, {r.get('device_macs')})")
        expect(r.get("inputs") == 20 and (r.get("top1") or 0) >= 0.9,
               f"{tag}: tessera's top-1 equals ONNX Runtime's on >= 90% of the 20 inputs ({r.get('top1')})")
        layers = layerdiff(tessera, d, r["model"], r["variant"])
        over = [x for x in layers if (x.get("alone_max") or 0) > 1]  # folded points have none
        expect(layers and not over, f"{tag}: every operator alone within 1 LSB of ONNX Runtime "
               f"({len(layers)} points{'; over: ' + over[0]['node'] if over else ''})")
        q = os.path.join(d, "s32", f"{r['model']}_{r['variant']}.onnx")
        x = os.path.join(d, "s32", f"{r['model']}_x20.npy")
        one = os.path.join(work, "one.npy")
        np.save(one, np.load(x)[:1])
        try:
            common.ort_run(q, one, os.path.join(work, "one_out.npy"), as_is=True)
            ok = True
        except common.OrtError as e:
            ok = False
            print("     " + str(e))
        expect(ok, f"{tag}: ONNX Runtime runs the file as written")
    exact_requant(tessera, work, d)
    act_tables(tessera, work)
    r = next(r for r in rows if (r["model"], r["variant"]) == ("resnet18", "u8"))
    expect((r.get("fp32_top1") or 0) >= 0.8, "resnet18 u8: QDQ top-1 agrees with the float model on >= 80% of 20 inputs")
    # the structural check can fail: one bias scale one float32 ulp off
    m = onnx.load(os.path.join(d, "s32", "resnet18_u8.onnx"))
    for t in m.graph.initializer:
        if t.name.endswith("_quantized_scale"):
            a = numpy_helper.to_array(t).copy()
            a[0] = np.nextafter(a[0], np.float32(1))
            t.CopyFrom(numpy_helper.from_array(a, t.name))
            break
    probs = qdq_check.check(m, "u8")
    expect(len(probs) == 1 and "x_scale * w_scale" in probs[0], "qdq_check finds a bias scale one ulp off")


def main():
    if len(sys.argv) != 3:
        print("usage: test_zoo.py TESSERA WORKDIR", file=sys.stderr)
        return 2
    tessera, work = sys.argv[1], sys.argv[2]
    why = common.ort_available()
    if why:
        print(f"SKIP: {why}")
        return 77
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    hand_case()
    bad_input(work)
    special_output(work)
    determinism(work)
    zoo_table(tessera, work)
    print(f"{len(FAILS)} failure(s) in {time.time() - t0:.1f} s")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
