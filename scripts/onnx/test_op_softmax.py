#!/usr/bin/python3
"""test_op_softmax.py TESSERA WORKDIR [BACKEND]: the QDQ Softmax on the device against ONNX Runtime.

ONNX Runtime (1.20, CPU) fuses DequantizeLinear -> Softmax -> QuantizeLinear into its com.microsoft
QLinearSoftmax: a float32 table of exp((i - 255 + shift) * x_scale), the row's float32 running sum and
nearbyintf(table * floor(1 / y_scale) / sum) + zero point (contrib_ops/cpu/quantization/qlinear_softmax.cc;
the host kernel tsr_ox_run_qsoftmax reproduces it bit for bit, test_op_float). On a config with ACT_LUT >= 4
the importer puts it on the device (jit/tsr_softmax.h: integers; the exponent from three activation
tables, an exact reciprocal of the exact row sum), which rounds the same real value from other
intermediates: at most 1 LSB from ORT, here measured.

Config: configs/default.json + "ACT_LUT": 4 + "EXACT_REQUANT": 1 (the convs around the softmax then equal
ORT's bit for bit, so the softmax's input is ORT's and its output is compared alone).
  (a) X -> conv -> Softmax(axis=-1) [1, 4, 6, 40] -> Y, u8 and s8 (quantize_static's form): Y against ORT,
      at most 1 LSB; the Softmax on the device (placement kernel "softmax"), next to the conv;
  (b) conv -> Softmax -> conv: the Softmax's output bytes (--tensor) against configs/default.json +
      "ACT_LUT": 0's (no tables), where it is the host's QLinearSoftmax (ORT's own arithmetic): at most 1 LSB;
  (c) a 3-D softmax between host operators (ViT's attention [3, 197, 197] and a [2, 9, 300] one, rows
      longer than 256): on the host by default (no device segment of its own); --place softmax=device puts
      it on the device: at most 1 LSB from ORT;
  (d) without ACT_LUT (configs/default.json + "ACT_LUT": 0) the Softmax is the host kernel (exact).
"""
import json
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto as TP, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import oxtest as T  # noqa: E402

F = TP.FLOAT
rng = np.random.default_rng(17)
BOUND = 1


NOLUT = None  # configs/default.json with ACT_LUT 0 (main writes it): the config cfg None means


def conv_softmax(shape, after):
    """X -> 3x3 conv (scores) -> Softmax(axis=-1) -> [1x1 conv] -> Y."""
    c = shape[1]
    n = helper.make_node
    nodes = [n("Conv", ["X", "w0"], ["S"], name="scores", pads=[1, 1, 1, 1]),
             n("Softmax", ["S"], ["P" if after else "Y"], name="softmax", axis=-1)]
    inits = [numpy_helper.from_array((rng.standard_normal((c, c, 3, 3)) * 0.5).astype(np.float32), "w0")]
    if after:
        nodes.append(n("Conv", ["P", "w1"], ["Y"], name="mix"))
        inits.append(numpy_helper.from_array((rng.standard_normal((c, c, 1, 1)) * 0.5).astype(np.float32), "w1"))
    return T.model(nodes, [("X", F, shape)], [("Y", F, shape)], inits)


def softmax3(shape, act, xs, ys, yz):
    """x -> Q/DQ (xs, zero point 128 or 0) -> Softmax(axis=-1) -> Q/DQ (ys, yz): the group as quantize_static
    writes it around a softmax between host operators."""
    et = np.uint8 if act == "u8" else np.int8
    inits = [numpy_helper.from_array(np.array(xs, np.float32), "xs"),
             numpy_helper.from_array(np.array(128 if act == "u8" else 0, et), "xz"),
             numpy_helper.from_array(np.array(ys, np.float32), "ys"), numpy_helper.from_array(np.array(yz, et), "yz")]
    n = helper.make_node
    nodes = [n("QuantizeLinear", ["X", "xs", "xz"], ["Xq"]), n("DequantizeLinear", ["Xq", "xs", "xz"], ["Xd"]),
             n("Softmax", ["Xd"], ["S"], name="softmax", axis=-1),
             n("QuantizeLinear", ["S", "ys", "yz"], ["Sq"]), n("DequantizeLinear", ["Sq", "ys", "yz"], ["Y"])]
    return T.model(nodes, [("X", F, shape)], [("Y", F, shape)], inits)


def run(path, x, cfg, tensors=(), place=None):
    """tessera infer: (exit code, output, {tensor: array}, {node: kernel}, stderr)."""
    np.save("sm_in.npy", x)
    cmd = [T.TSR, "infer", path, "-i", "sm_in.npy", "-o", "sm_out.npy", "--quiet", "--backend", T.BACKEND,
           "--placement-json", "sm_pl.json"]
    cmd += ["--config", cfg or NOLUT]
    for t in tensors:
        cmd += ["--tensor", f"{t}=sm_t.npy"]
    if place:
        cmd += ["--place", place]
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600)
    if r.returncode:
        return r.returncode, None, None, {}, r.stderr.strip()[-300:]
    with open("sm_pl.json") as f:
        pl = {q["name"]: q["kernel"] for q in json.load(f)["placement"]}
    return 0, np.load("sm_out.npy"), np.load("sm_t.npy") if tensors else None, pl, ""


def against_ort(name, m, x, cfg, place=None, want_kernel="softmax"):
    """m's output (the softmax's, dequantized) against ORT in LSBs, and the softmax node's kernel."""
    path = T.save(m, name.replace(" ", "_") + ".onnx")
    want = T.ort(path, x)
    rc, got, _, pl, err = run(path, x, cfg, place=place)
    if rc:
        return T.check(name, False, f"tessera exit {rc}: {err}")
    mx, nd = T.diff_lsb(got, want, T.output_scale(m))
    T.check(f"{name}: within {BOUND} LSB of ORT", mx <= BOUND, f"{nd} of {want.size} differ, max {mx} LSB")
    T.check(f"{name}: placement", pl.get("softmax") == want_kernel, f"kernel {pl.get('softmax')!r}")
    return nd, want.size


def main():
    global NOLUT
    T.setup()
    cfg = T.default_config("softmax_lut.json", ACT_LUT=4, EXACT_REQUANT=1)
    NOLUT = T.default_config("softmax_nolut.json", ACT_LUT=0)
    total = [0, 0]
    # (a) a conv's scores, the softmax's output the model's
    shape = [1, 4, 6, 40]
    cal = rng.standard_normal((8, *shape[1:])).astype(np.float32)
    x = rng.standard_normal(shape).astype(np.float32)
    for act in ("u8", "s8"):
        q = T.quantize(conv_softmax(shape, False), cal, act)
        nd, n = against_ort(f"conv softmax {act}", q, x, cfg)
        total[0] += nd
        total[1] += n
    # (b) between two convs: the softmax's bytes against the host kernel's (ORT's arithmetic)
    for act in ("u8", "s8"):
        q = T.quantize(conv_softmax(shape, True), cal, act)
        path = T.save(q, f"conv_softmax_conv_{act}.onnx")
        pname = [nd.output[0] for nd in q.graph.node if nd.op_type == "QuantizeLinear" and nd.input[0] == "P"]
        rc, _, dev, pl, err = run(path, x, cfg, tensors=pname)
        rc2, _, host, pl2, err2 = run(path, x, None, tensors=pname)
        if rc or rc2:
            T.check(f"softmax between convs {act}", False, err or err2)
            continue
        d = np.abs(dev.astype(np.int32) - host.astype(np.int32))
        T.check(f"softmax between convs {act}: device vs host kernel", d.max() <= BOUND,
                f"{int((d != 0).sum())} of {d.size} differ, max {int(d.max())}")
        T.check(f"softmax between convs {act}: placement", pl.get("softmax") == "softmax" and
                pl2.get("softmax") == "quantized softmax", f"{pl.get('softmax')!r} / {pl2.get('softmax')!r}")
    # (c) 3-D softmaxes between host operators: host by default, the device when asked
    # (scores of an attention: x_scale as calibrated ranges of some 10 give; outputs [0, 1] as quantize_static
    # writes them: u8 1/255 zp 0, s8 symmetric 2/254 zp 0, and s8 1/256 zp -128, whose 1.0 wraps as ORT's)
    for shp, sc, xsc in (([3, 197, 197], 2.5, 0.047), ([2, 9, 300], 4.0, 0.09)):
        xv = (rng.standard_normal(shp) * sc).astype(np.float32)
        for act, ys, yz in (("u8", 1 / 255, 0), ("s8", 2 / 254, 0), ("s8", 1 / 256, -128)):
            q = softmax3(shp, act, xsc, ys, yz)
            tag = f"{shp[0]}x{shp[1]}x{shp[2]} {act} zp {yz}"
            against_ort(f"softmax {tag} auto", q, xv, cfg, want_kernel="quantized softmax")
            nd, n = against_ort(f"softmax {tag} forced", q, xv, cfg, place="softmax=device")
            total[0] += nd
            total[1] += n
    # (d) no tables: the host kernel, exact
    q = T.quantize(conv_softmax(shape, False), cal, "u8")
    path = T.save(q, "conv_softmax_default.onnx")
    want = T.ort(path, x)
    rc, got, _, pl, err = run(path, x, None)
    mx, nd = T.diff_lsb(got, want, T.output_scale(q)) if not rc else (-1, -1)
    T.check("no tables (default + ACT_LUT 0): host kernel, exact", not rc and mx == 0 and pl.get("softmax") == "quantized softmax",
            err or f"{nd} differ, kernel {pl.get('softmax')!r}")
    print(f"device softmax against ONNX Runtime: {total[0]} of {total[1]} values differ (by 1 LSB at most)")
    T.finish()


if __name__ == "__main__":
    main()
