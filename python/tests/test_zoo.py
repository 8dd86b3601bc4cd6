"""The zoo subset from Python: torchvision's architectures built by scripts/zoo at 32x32 (random weights,
seeded), quantized by scripts/zoo/qdq.py (u8 and s8), each run by `tessera infer` and by the package:
the same bytes; the report's rows against the printed table, also with activation tables (ACT_LUT)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tessera
from test_api import parse_printed_report

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MODELS = ["mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1", "shufflenet_v2_x1_0",
          "googlenet", "regnet_x_400mf", "bert_tiny"]


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    for mod in ("torch", "torchvision", "onnx"):
        pytest.importorskip(mod)
    d = tmp_path_factory.mktemp("zoo")
    py = "/usr/bin/python3"
    subprocess.run([py, os.path.join(ROOT, "scripts", "zoo", "build.py"), "--models", ",".join(MODELS), "--size",
                    "32", "--out", str(d)], check=True, capture_output=True)
    sys.path.insert(0, os.path.join(ROOT, "scripts", "zoo"))
    import common
    out = []
    for m in MODELS:
        x = common.inputs(m, 1, 32, 1).astype(np.int64 if m == "bert_tiny" else np.float32)
        np.save(d / (m + "-x.npy"), x)
        for v in ("u8", "s8"):
            q = d / ("%s-%s.onnx" % (m, v))
            subprocess.run([py, os.path.join(ROOT, "scripts", "zoo", "qdq.py"), str(d / (m + ".onnx")), str(q),
                            "--activations", v, "--calib", "4"], check=True, capture_output=True)
            out.append((str(q), str(d / (m + "-x.npy"))))
    return out


def test_zoo_subset_same_bytes_as_cli(cli, zoo, tmp_path):
    assert len(zoo) == 16
    with tessera.Device() as dev:
        for model, inp in zoo:
            o = str(tmp_path / "y.npy")
            r = subprocess.run([cli, "infer", model, "-i", inp, "-o", o], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            m = tessera.load_onnx(model, dev)
            y = m.run(np.load(inp))
            ref = np.load(o)
            assert y.dtype == ref.dtype and y.tobytes() == ref.tobytes(), model
            rows, printed = m.report, parse_printed_report(r.stdout[r.stdout.find("device segment"):])
            solo = [x for x in rows if x["solo"]]
            assert len(rows) - len(solo) == len(printed), model
            pl = m.placement
            for x, p in zip([x for x in rows if not x["solo"]], printed):
                assert (x["segment"], x["index"], x["layer"][:18], x["op"], x["macs"]) == \
                    (p["segment"], p["index"], p["layer"], p["op"], p["macs"]), model
                assert pl[x["node"]]["name"] == x["name"] and x["name"].startswith(x["layer"][:18]), model


def test_zoo_activation_tables_rows(cli, zoo, tmp_path):
    """With ACT_LUT the tables are device layers named after their chain's first node."""
    cfg = {k: v for k, v in tessera.config("default", ACT_LUT=4).items() if k.isupper()}
    cf = tmp_path / "lut.json"
    cf.write_text(json.dumps(cfg))
    for name in ("mobilenet_v3_small-u8", "efficientnet_b0-s8"):  # HardSwish; SiLU (a table of a table)
        model, inp = next(z for z in zoo if name in z[0])
        o = str(tmp_path / "y.npy")
        r = subprocess.run([cli, "infer", model, "-i", inp, "-o", o, "--config", str(cf)], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        with tessera.Device(cfg) as dev:
            m = tessera.load_onnx(model, dev)
            assert m.run(np.load(inp)).tobytes() == np.load(o).tobytes(), name
            rows, pl = m.report, m.placement
        # a table runs as its own layer, or in the epilogue of the conv before it ("conv+act")
        acts = [x for x in rows if x["op"] == "act" or x["op"].endswith("+act")]
        assert acts and len(rows) == len(parse_printed_report(r.stdout[r.stdout.find("device segment"):])), name
        for x in rows:
            assert x["node"] >= 0 and pl[x["node"]]["name"] == x["name"], name
            assert x["name"].startswith(x["layer"][:18]), name
        # a table is named after its chain's first operator: an activation (or a Mul of one), not its Q/DQ
        assert all(pl[x["node"]]["op"] not in ("DequantizeLinear",) for x in acts), name


def test_place_as_cli(cli, zoo, tmp_path):
    """place= moves the same ops as `tessera infer --place`: ShuffleNet's channel shuffles onto the
    host (device by default), GoogLeNet's Concats onto the host (device by default); node by node
    the CLI's placement, and the bytes the CLI writes."""
    cases = (("shufflenet_v2_x1_0-u8", "shuffle=host"), ("googlenet-u8", {"concat": "host"}))
    with tessera.Device() as dev:
        for name, place in cases:
            model, inp = next(z for z in zoo if os.path.basename(z[0]) == name + ".onnx")
            arg = place if isinstance(place, str) else ",".join("%s=%s" % kv for kv in place.items())
            o, pj = str(tmp_path / "y.npy"), str(tmp_path / "p.json")
            r = subprocess.run([cli, "infer", model, "-i", inp, "-o", o, "--place", arg, "--placement-json", pj],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            with open(pj) as f:
                ref = json.load(f)
            m = tessera.load_onnx(model, dev, place=place)
            assert m.placement == ref["placement"], name
            assert m.placement != tessera.load_onnx(model, dev).placement, name  # the option moved something
            y = m.run(np.load(inp))
            assert y.tobytes() == np.load(o).tobytes(), name
