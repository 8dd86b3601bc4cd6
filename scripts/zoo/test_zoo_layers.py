#!/usr/bin/python3
"""test_zoo_layers.py: CTest `onnx_zoo_layers` - real zoo layers' parameters, every input byte pair, against ONNX
Runtime (the importer's tests otherwise use models their scripts write).

usage: test_zoo_layers.py TESSERA WORKDIR [ZOO_S32_DIR]   (exit 77 = skipped: node or ONNX Runtime is absent)

The model: torchvision's resnet18 (weights=None), u8 QDQ at 32x32 (scripts/zoo: build.py, qdq.py --calib 8), taken
from ZOO_S32_DIR where onnx_zoo_small left it, else built here (~20 s). Each residual Add is cut out with its real
scales and zero points (its two DequantizeLinear inputs and the QuantizeLinear after it) into an Add of two device
values that take all 65,536 byte pairs (oxtest.add_pair_model: identity convs of one input), and compared with ONNX
Runtime's QLinearAdd (AVX2 float32 FMAs): on the default config within 1 LSB (0 where the importer found an exact
integer form for the device add: 8 of resnet18's 8 at 64x64), with EXACT_REQUANT 0 differ (the device add where
an exact form exists, else the host kernel, onnx/tsr_onnx_qadd.c). The fixture's models have no BatchNormalization
left (folded into the convs at export); onnx_op_bn covers that search.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "onnx"))
import oxtest as T  # noqa: E402

MODEL = "resnet18_u8.onnx"


def model_path(zoo):
    """The fixture's resnet18 u8 at 32x32, else one built in the work directory (None: could not)."""
    if zoo and os.path.exists(os.path.join(zoo, MODEL)):
        return os.path.join(zoo, MODEL)
    if os.path.exists(MODEL):
        return os.path.realpath(MODEL)
    py = "/usr/bin/python3"
    r = subprocess.run([py, os.path.join(HERE, "build.py"), "--models", "resnet18", "--size", "32", "--out", "zoo"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        r = subprocess.run([py, os.path.join(HERE, "qdq.py"), "zoo/resnet18.onnx", MODEL + ".tmp", "--activations",
                            "u8", "--calib", "8", "--size", "32"], capture_output=True, text=True)
    if r.returncode != 0:
        print("model could not be built:", (r.stderr or r.stdout).strip()[-300:])
        return None
    os.replace(MODEL + ".tmp", MODEL)
    return os.path.realpath(MODEL)


def residual_adds(path):
    """(name, (sa, za, sb, zb, sy, zy)) of every Add of two DequantizeLinear values closed by a QuantizeLinear."""
    g = onnx.load(path).graph
    init = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    prod = {o: n for n in g.node for o in n.output}
    cons = {}
    for n in g.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)
    out = []
    for n in g.node:
        if n.op_type != "Add":
            continue
        d = [prod.get(i) for i in n.input]
        q = cons.get(n.output[0], [None])[0]
        if any(x is None or x.op_type != "DequantizeLinear" for x in d) or q is None or q.op_type != "QuantizeLinear":
            continue
        qs = [(float(init[x.input[1]]), init[x.input[2]]) for x in (d[0], d[1], q)]
        if any(z.dtype != np.uint8 for _, z in qs):
            continue
        out.append((n.name, tuple(v for s, z in qs for v in (s, int(z)))))
    return out


def main():
    zoo = os.path.realpath(sys.argv[3]) if len(sys.argv) > 3 else None
    del sys.argv[3:]  # (oxtest's third argument is a backend)
    T.setup()
    path = model_path(zoo)
    if path is None:
        print("SKIP: the zoo model could not be built")
        sys.exit(77)
    adds = residual_adds(path)
    T.check("resnet18: its 8 residual Adds found", len(adds) == 8, f"{[a for a, _ in adds]}")
    exact_cfg = T.default_config("exact.json", EXACT_REQUANT=1)
    for name, p in adds:
        m, x = T.add_pair_model(*p)
        mpath = T.save(m, "pair.onnx")
        want = T.ort(mpath, x)
        for cfg, bound in (("default", 1), (exact_cfg, 0)):
            rc, got, err = T.infer(mpath, x, ("--config", cfg))
            mx, nd = T.diff_lsb(got, want) if rc == 0 and got is not None else (None, None)
            T.check(f"{name} {'EXACT_REQUANT' if bound == 0 else 'default'}", rc == 0 and mx <= bound,
                    f"max |diff| {mx} LSB, {nd} of 65536 differ (bound {bound})" if rc == 0 else err)
    T.finish()


if __name__ == "__main__":
    main()
