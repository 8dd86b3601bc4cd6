"""oxtest.py: what the importer's operator-family tests share (scripts/onnx/test_op_*.py).

Each family test builds small float models (onnx.helper or torch), quantizes them the way users'
tools do (scripts/zoo/qdq.py, onnxruntime's quantize_static form, u8 and s8 activations), and
compares `tessera infer` with ONNX Runtime (the independent reference) on the same inputs.

usage inside a test:
    import oxtest as T
    T.setup()                       # argv TESSERA WORKDIR [BACKEND]; exit 77 without ONNX Runtime
    q = T.quantize(float_model, calib, "u8")
    T.against_ort("maxpool ceil", q, x, max_lsb=0)
    T.expect_error("no form", model, 'node "n" (Foo): ...', x)
    T.finish()                      # exit 1 if any check failed
"""
import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "zoo"))
import common  # noqa: E402  (scripts/zoo/common.py: ONNX Runtime through ort_run.js)
import qdq  # noqa: E402     (scripts/zoo/qdq.py: our quantize_static)

TSR = None
BACKEND = "fsim"
CONFIG = None  # a config file infer() passes when its extra names none (None: the default preset)
PLACE = None  # a --place SPEC every tessera infer of this harness passes (placed(); None: the defaults)
failures = 0
_n = 0


def setup():
    """Read argv, enter the work directory, skip (77) when ONNX Runtime is absent."""
    global TSR, BACKEND
    if len(sys.argv) < 3:
        print(f"usage: {sys.argv[0]} TESSERA_BIN WORK_DIR [BACKEND]", file=sys.stderr)
        sys.exit(2)
    TSR = os.path.realpath(sys.argv[1])
    BACKEND = sys.argv[3] if len(sys.argv) > 3 else "fsim"
    os.makedirs(sys.argv[2], exist_ok=True)
    os.chdir(sys.argv[2])
    why = common.ort_available()
    if why:
        print(f"SKIP: {why}")
        sys.exit(77)


def check(name, ok, detail=""):
    global failures
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {name:40s} {detail}")
    return ok


def finish():
    print(f"{'FAILED' if failures else 'passed'}: {failures} failure(s)")
    sys.exit(1 if failures else 0)


def model(nodes, inputs, outputs, inits=(), opset=13):
    """A ModelProto from nodes; inputs/outputs as (name, TensorProto type, shape) triples."""
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "t", [vi(*i) for i in inputs], [vi(*o) for o in outputs], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m


def default_config(name, **keys):
    """configs/default.json with keys set (e.g. ACT_LUT=0: the default preset without its activation
    tables, the host path), written to the work directory as name; its real path."""
    with open(os.path.join(os.path.dirname(os.path.dirname(HERE)), "configs", "default.json")) as f:
        cfg = json.load(f)
    cfg.update(keys)
    with open(name, "w") as f:
        json.dump(cfg, f)
    return os.path.realpath(name)


def save(m, name):
    with open(name, "wb") as f:
        f.write(m.SerializeToString())
    return name


def quantize(float_model, calib, activations="u8"):
    """The QDQ form of float_model (a copy), calibrated on calib [n, ...] as quantize_static does."""
    m = onnx.ModelProto()
    m.CopyFrom(float_model)
    return qdq.quantize_model(m, calib, activations)


def place_args():
    """("--place", SPEC) while inside placed(SPEC), else ()."""
    return ("--place", PLACE) if PLACE else ()


@contextlib.contextmanager
def placed(spec):
    """Every tessera infer this harness runs inside the block passes --place spec (e.g. "concat=host")."""
    global PLACE
    old, PLACE = PLACE, spec
    try:
        yield
    finally:
        PLACE = old


def infer(path, x, extra=()):
    """tessera infer on input array x: (exit code, output array or None, stderr)."""
    global _n
    _n += 1
    xin, yout = f"in{_n}.npy", f"out{_n}.npy"
    np.save(xin, x)
    if CONFIG and "--config" not in extra:
        extra = ("--config", CONFIG, *extra)
    try:
        r = subprocess.run([TSR, "infer", path, "-i", xin, "-o", yout, "--quiet", "--backend", BACKEND, *place_args(),
                            *extra],
                           capture_output=True, text=True, errors="replace", timeout=600)
    except subprocess.TimeoutExpired:
        return 124, None, "timed out"
    y = np.load(yout) if r.returncode == 0 and os.path.exists(yout) else None
    return r.returncode, y, r.stderr.strip() or r.stdout.strip()[-300:]


def ort(path, x):
    """ONNX Runtime's first output on x (one run of the whole batch, optimisation 'all')."""
    global _n
    _n += 1
    xin, yout = f"ort_in{_n}.npy", f"ort_out{_n}.npy"
    np.save(xin, x)
    common.ort_run(path, xin, yout, batch=False)
    return np.load(yout)


def output_scale(m):
    """The scale of the DequantizeLinear that produces m's first output (a per-tensor constant), else
    None: a float output that is a dequantized tensor is compared in its LSBs (common.output_scale)."""
    return common.output_scale(m)


def diff_lsb(got, want, scale=None):
    """(max |difference|, how many differ) in LSBs: integers directly, a dequantized float output in
    units of its scale (rounded: both sides are multiples of it); shapes must match."""
    if scale:
        d = np.rint(np.abs(got.astype(np.float64) - want.astype(np.float64)) / scale).astype(np.int64)
    else:
        d = np.abs(got.astype(np.int64) - want.astype(np.int64))
    return int(d.max()) if d.size else 0, int((d != 0).sum())


def against_ort(name, m, x, max_lsb=0, extra=()):
    """Save m, run it on tessera and ONNX Runtime, require equal shape and dtype and at most max_lsb
    difference (0: exact). Returns tessera's output or None."""
    path = save(m, name.replace(" ", "_").replace("/", "_") + ".onnx")
    want = ort(path, x)
    rc, got, err = infer(path, x, extra)
    if rc != 0 or got is None:
        check(name, False, f"tessera exit {rc}: {err}")
        return None
    if got.shape != want.shape or got.dtype != want.dtype:
        check(name, False, f"shape/dtype {got.shape} {got.dtype} vs ONNX Runtime {want.shape} {want.dtype}")
        return None
    scale = output_scale(m) if want.dtype.kind == "f" else None
    if want.dtype.kind == "f" and scale is None:
        check(name, False, "the output is float but not a per-tensor DequantizeLinear: compare it yourself")
        return None
    mx, n = diff_lsb(got, want, scale)
    check(name, mx <= max_lsb, f"{want.dtype} {want.shape}: max |diff| {mx} LSB, {n} of {want.size} differ "
          f"(bound {max_lsb})")
    return got


def expect_error(name, m, want, x):
    """tessera must refuse m with exit 1, one stderr line containing want, and write no output."""
    path = save(m, name.replace(" ", "_").replace("/", "_") + ".onnx")
    rc, y, err = infer(path, x)
    ok = rc == 1 and y is None and len(err.splitlines()) == 1 and want in err
    return check(name + " (refused)", ok, err if not ok else "")


def add_pair_model(sa, za, sb, zb, sy, zy):
    """An Add of A (scale sa, zero point za) and B (sb, zb) into (sy, zy), both device values of one input X
    [1, 2, 256, 256] quantized as A: conva takes channel 0 (weight 1, scale 1), convb channel 1 (weight 1 of
    scale sb / sa and a bias za - zb: B's byte is X's), so that a = X[0] and b = X[1] take all 65,536 pairs.
    Also the input x that gives them (x[0] row index, x[1] column index)."""
    from onnx import TensorProto, numpy_helper
    F32, U8, I8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
    mk, n = helper.make_tensor, helper.make_node
    ws = float(np.float32(sb) / np.float32(sa))
    inits = [mk("sa", F32, [], [sa]), mk("za", U8, [], [za]), mk("sb", F32, [], [sb]), mk("zb", U8, [], [zb]),
             mk("sy", F32, [], [sy]), mk("zy", U8, [], [zy]),
             numpy_helper.from_array(np.array([1, 0], np.int8).reshape(1, 2, 1, 1), "wa"),
             numpy_helper.from_array(np.array([0, 1], np.int8).reshape(1, 2, 1, 1), "wb"),
             mk("ws", F32, [1], [1.0]), mk("wsb", F32, [1], [ws]), mk("wz", I8, [1], [0]),
             mk("bb", I32, [1], [za - zb]), mk("bs", F32, [1], [float(np.float32(sa) * np.float32(ws))]),
             mk("bz", I32, [1], [0])]
    nodes = [n("QuantizeLinear", ["X", "sa", "za"], ["Xq"]), n("DequantizeLinear", ["Xq", "sa", "za"], ["Xd"]),
             n("DequantizeLinear", ["wa", "ws", "wz"], ["Wa"], axis=0),
             n("DequantizeLinear", ["wb", "wsb", "wz"], ["Wb"], axis=0),
             n("DequantizeLinear", ["bb", "bs", "bz"], ["Bb"], axis=0),
             n("Conv", ["Xd", "Wa"], ["Ha"], name="conva"), n("Conv", ["Xd", "Wb", "Bb"], ["Hb"], name="convb"),
             n("QuantizeLinear", ["Ha", "sa", "za"], ["Aq"]), n("DequantizeLinear", ["Aq", "sa", "za"], ["A"]),
             n("QuantizeLinear", ["Hb", "sb", "zb"], ["Bq"]), n("DequantizeLinear", ["Bq", "sb", "zb"], ["B"]),
             n("Add", ["A", "B"], ["S"], name="add"), n("QuantizeLinear", ["S", "sy", "zy"], ["Y"])]
    m = model(nodes, [("X", F32, (1, 2, 256, 256))], [("Y", U8, (1, 1, 256, 256))], inits)
    i = np.arange(256, dtype=np.float32) - za
    x = np.stack([np.repeat(i[:, None], 256, 1), np.repeat(i[None, :], 256, 0)])[None] * np.float32(sa)
    return m, x.astype(np.float32)


def placement(path, x):
    """`tessera infer` without --quiet: its stdout (the placement of every node and the per-layer
    table), for reading segment and host-operator counts."""
    np.save("pl_in.npy", x)
    r = subprocess.run([TSR, "infer", path, "-i", "pl_in.npy", "--backend", BACKEND, *place_args()],
                       capture_output=True, text=True, errors="replace", timeout=600)
    return r.returncode, r.stdout
