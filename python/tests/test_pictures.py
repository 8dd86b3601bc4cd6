"""The report's rows in full (against the printed table and the placement), its HTML table and
roofline plot, timelines (against the CLI's --timeline file) and their Gantt, timing-only devices,
and the DSE from Python (against dse.py's own results) with its Pareto plot."""
import json
import os
import subprocess

import matplotlib

matplotlib.use("Agg")  # noqa: E402  (no display in CI)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tessera  # noqa: E402
from test_api import _raises, parse_printed_report  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
# the timed tests need the SystemC model (libsystemc-dev: built when the setup installed it)
systemc = pytest.mark.skipif("systemc" not in tessera.backends(), reason="built without the systemc backend")


def test_report_names_in_full_resnet18(dev, cli, resnet18_small):
    """Names longer than the printed column come whole; the rest of each row is the printed one."""
    model, inp = resnet18_small
    r = subprocess.run([cli, "infer", model, "-i", inp], capture_output=True, text=True, check=True)
    m = tessera.load_onnx(model, dev)
    m.run(np.load(inp))
    rows = m.report
    printed = parse_printed_report(r.stdout[r.stdout.index("device segment 0"):])
    assert len(rows) == len(printed) > 10
    assert any(len(x["name"]) > 18 for x in rows)  # the table cuts these
    pl = m.placement
    for x, p in zip(rows, printed):
        assert x["layer"][:18] == p["layer"] and x["op"] == p["op"] and x["macs"] == p["macs"]
        assert pl[x["node"]]["name"] == x["name"] and x["name"].startswith(x["layer"][:18])
    # a conv with its residual add in the epilogue is one row, joined to the conv's node
    fused = [x for x in rows if x["op"] == "conv+add"]
    assert fused and all(pl[x["node"]]["op"] == "Conv" for x in fused)


def test_report_row_accessor_refusals(dev, digits):
    """The C accessor: out of range and an unprepared model are one-line errors (no crash)."""
    lib, ffi = tessera.lib, tessera.ffi
    m = tessera.load_onnx(digits["qdq"], dev)
    L = ffi.new("tsr_onnx_layer_t *")
    n = lib.tsr_onnx_report_rows(m._m)
    assert n == 4 and lib.tsr_onnx_report_row(m._m, n - 1, L) == 0 and ffi.string(L.op) == b"dense"
    for bad in (n, -1, 1 << 30):
        assert lib.tsr_onnx_report_row(m._m, bad, L) == lib.TSR_EINVAL
        assert b"out of range" in ffi.string(lib.tsr_errmsg()) and L.name == ffi.NULL
    image = open(digits["qdq"], "rb").read()
    out = ffi.new("tsr_onnx_t **")
    assert lib.tsr_onnx_load_buffer(image, len(image), b"x.onnx", 1, out) == 0
    raw = ffi.gc(out[0], lib.tsr_onnx_free)
    assert lib.tsr_onnx_report_rows(raw) == 0
    assert lib.tsr_onnx_report_row(raw, 0, L) == lib.TSR_EINVAL
    assert b"not prepared" in ffi.string(lib.tsr_errmsg())
    lib.tsr_err_clear()


@systemc
def test_report_cycles_systemc(digits):
    """On a timed backend: cycles, util and ratio, as the printed table rounds them."""
    with tessera.Device(backend="systemc") as d:
        m = tessera.load_onnx(digits["qdq"], d)
        m.run(np.load(digits["x"]))
        rows, printed = m.report, parse_printed_report(m.report_text)
    assert len(rows) == len(printed) == 4
    for x, p in zip(rows, printed):
        assert x["cycles"] == p["cycles"] > 0
        assert round(x["util"], 3) == p["util"] and round(x["ratio"], 3) == p["ratio"]
        assert abs(x["util"] - x["macs"] / (x["cycles"] * rows.peak)) < 1e-12


def test_report_html_and_dataframe(dev, digits):
    m = tessera.load_onnx(digits["qdq"], dev)
    m.run(np.load(digits["x"]))
    h = m.report._repr_html_()
    assert h.count("<tr>") == 1 + len(m.report) and "/conv2/Conv" in h
    hand = tessera.Report([dict(m.report[0], name="<b>&x")], 256, 8)
    assert "&lt;b&gt;&amp;x" in hand._repr_html_() and "<b>&x" not in hand._repr_html_()
    # python3-pandas is in the setup: the table as a DataFrame, row for row, column for column
    df = m.report.to_dataframe()
    assert list(df["name"]) == [r["name"] for r in m.report]
    assert list(df["cycles"]) == [r["cycles"] for r in m.report] and len(df.columns) == len(m.report[0])


@systemc
def test_plot_roofline(digits):
    with tessera.Device(backend="systemc") as d:
        m = tessera.load_onnx(digits["qdq"], d)
        m.run(np.load(digits["x"]))
        rep = m.report
    ax = rep.plot_roofline()
    pts = rep.roofline_points()
    assert len(pts) == 3  # the layers with MACs (the max pool has none)
    offs = ax.collections[0].get_offsets()
    assert np.allclose(offs, [(p[1], p[2]) for p in pts])
    # achieved MACs/cycle: macs / cycles of each row
    assert np.allclose(sorted(offs[:, 1]), sorted(r["macs"] / r["cycles"] for r in rep if r["macs"]))
    roof = ax.lines[0].get_xydata()
    assert roof[1][0] == pytest.approx(rep.peak / rep.dram_bw) and roof[1][1] == rep.peak == 256
    assert roof[0][1] == pytest.approx(rep.dram_bw * roof[0][0])
    assert ax.get_xscale() == "log" and len(ax.texts) == 3
    matplotlib.pyplot.close("all")


@systemc
def test_timeline_same_as_cli(cli, digits, tmp_path):
    x = np.load(digits["x"])
    ref = tmp_path / "cli.json"
    subprocess.run([cli, "infer", digits["qdq"], "-i", digits["x"], "--backend", "systemc", "--timeline", str(ref),
                    "--quiet"], check=True, capture_output=True)
    with tessera.Device() as d:  # fsim: the timeline runs on a systemc device of its own
        m = tessera.load_onnx(digits["qdq"], d)
        t = m.timeline(x, path=tmp_path / "py.json")
    # event for event the same, but the DRAM addresses (the CLI's process allocates in another order)
    def events(path):
        ev = json.loads(path.read_text())["traceEvents"]
        for e in ev:
            for k in ("addr", "dram_base"):
                e.get("args", {}).pop(k, None)
        return ev
    assert events(tmp_path / "py.json") == events(ref)
    assert [r["layer"] for r in t.runs] == ["/conv1/Conv", "/conv2/Conv", "/pool/MaxPool", "/fc/Gemm"]
    with tessera.Device(backend="systemc") as d:
        m = tessera.load_onnx(digits["qdq"], d)
        m.run(x)
        assert [r["cycles"] for r in t.runs] == [r["cycles"] for r in m.report]
    ax = t.plot()
    labels = [tl.get_text() for tl in ax.get_yticklabels()]
    assert labels == ["runs", "fetch", "load", "compute", "store", "gemm pipe", "alu pipe"]
    assert len(ax.collections) == len(labels)
    assert len(ax.collections[0].get_paths()) == 4  # a bar per run
    assert len(ax.collections[3].get_paths()) == len(t.lanes["compute"])
    matplotlib.pyplot.close("all")
    # a temporary file by default, removed
    t2 = tessera.load_onnx(digits["qdq"], tessera.Device()).timeline(x[:360])
    assert t2.cycles == t.cycles and not os.path.exists(t2.path)


@systemc
def test_device_timeline_option(digits, tmp_path):
    """Device(timeline=PATH): every run of the device in one file, complete at close."""
    x = np.load(digits["x"])[:16]
    with tessera.Device(backend="systemc", timeline=str(tmp_path / "d.json")) as d:
        m = tessera.load_onnx(digits["qdq"], d)
        m.run(x)
        m.run(x)
        cyc = [r["cycles"] for r in m.report]
    t = tessera.Timeline(str(tmp_path / "d.json"))
    assert len(t.runs) == 8 and [r["cycles"] for r in t.runs[4:]] == cyc


def test_timeline_refusals(dev, digits, tmp_path):
    m = tessera.load_onnx(digits["qdq"], dev)
    x = np.load(digits["x"])
    _raises(lambda: m.timeline(x, backend="fsim"), "fsim", arg="backend")  # no timeline there
    _raises(lambda: m.timeline(x, path=3), arg="path")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _raises(lambda: tessera.Timeline(str(bad)), "not a timeline")


@systemc
def test_timing_only(digits):
    x = np.load(digits["x"])
    with tessera.Device(backend="systemc") as d:
        m = tessera.load_onnx(digits["qdq"], d)
        assert m.run(x) is not None
        full = [r["cycles"] for r in m.report]
    with tessera.Device(backend="systemc", timing_only=True) as d:
        m = tessera.load_onnx(digits["qdq"], d)
        assert m.run(x) is None  # no data computed: no array pretending to be one
        assert [r["cycles"] for r in m.report] == full
        w = np.ones((4, 4, 1, 1), np.int8)
        y, info = tessera.op.conv2d(d, np.ones((1, 4, 4, 4), np.int8), w, mult=1 << 30, shift=0, info=True)
        assert y is None and info["cycles"] > 0
    _raises(lambda: tessera.Device(backend="fsim", timing_only=True), "timing")
    _raises(lambda: tessera.Device(backend="systemc", timing_only=1), arg="timing_only")


SPACE = {"name": "py-tiny", "base": "tiny", "keys": {"LOG_BLOCK": [2, 3], "LOG_ACC_BUFF_SIZE": [11, 12]},
         "workload": {"kind": "resnet18-small", "small": [16, 4, 10]}, "dram": {"bytes_per_cycle": 8},
         "synth": "none"}


@systemc
def test_dse_sweep_same_as_dse_py(cli, tmp_path):
    cache = tmp_path / "cache"
    s = tessera.dse.sweep(SPACE, cli=cli, cache=cache, jobs=2)
    # dse.py itself on the same space file (the cache now answers: the same cycles)
    sp = tmp_path / "space.json"
    sp.write_text(json.dumps(SPACE))
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "dse", "dse.py"), "sweep", str(sp), "--cli",
                    cli, "--cache", str(cache), "--out", str(tmp_path / "out"), "--no-plot"], check=True,
                   capture_output=True)
    ref = json.loads((tmp_path / "out" / "results.json").read_text())["points"]
    assert len(s) == len(ref) == 4 and all(r["status"] == "ok" for r in s)
    key = lambda r: (r["id"], r["overrides"], r["cycles"], r["throughput"], bool(r.get("pareto")))  # noqa: E731
    assert [key(r) for r in s] == [key(r) for r in ref]
    assert all(r["throughput"] == pytest.approx(r["clock_mhz"] * 1e6 / r["cycles"]) for r in s)
    assert s.front and all(r.get("pareto") for r in s.front)
    df = s.to_dataframe()  # the sweep as a DataFrame (python3-pandas is in the setup)
    assert list(df["id"]) == [r["id"] for r in ref] and list(df["cycles"]) == [r["cycles"] for r in ref]
    ax = s.plot_pareto()
    allpts, front = ax.collections[0].get_offsets(), ax.collections[1].get_offsets()
    assert np.allclose(allpts, [(r["macs_per_cycle"], r["throughput"]) for r in s])
    assert sorted(map(tuple, front)) == sorted((r["macs_per_cycle"], r["throughput"]) for r in s.front)
    matplotlib.pyplot.close("all")


def test_dse_refusals(cli, tmp_path):
    bad = dict(SPACE, keys={"NOT_A_KEY": [1, 2]})
    e = _raises(lambda: tessera.dse.sweep(bad, cli=cli, cache=tmp_path / "c"), "NOT_A_KEY")
    assert e.code == tessera.lib.TSR_EINVAL
    _raises(lambda: tessera.dse.sweep(42, cli=cli), arg="space")
    _raises(lambda: tessera.dse.sweep(str(tmp_path / "none.json"), cli=cli), arg="space")
    _raises(lambda: tessera.dse.sweep(SPACE, cli=cli, jobs=0), arg="jobs")


def test_report_conv_run_alone(dev, cli, tmp_path):
    """A conv whose weights need two int8 parts runs alone (no per-layer counters): one row all the
    same, with its static figures; the MACs those of the placement."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    c = lambda name, v, t: numpy_helper.from_array(np.array(v, t), name)  # noqa: E731
    inits = [c("xs", 0.05, np.float32), c("xz", 128, np.uint8), c("ws", 0.01, np.float32), c("wz", 7, np.uint8),
             c("ys", 0.2, np.float32), c("yz", 100, np.uint8),
             numpy_helper.from_array(rng.integers(0, 256, (8, 4, 3, 3)).astype(np.uint8), "w")]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                            name="a_conv_whose_weights_need_two_int8_parts", pads=[1, 1, 1, 1])
    g = helper.make_graph([node], "solo", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 4, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 8, 6, 6])], inits)
    path, xp, yp = tmp_path / "solo.onnx", tmp_path / "x.npy", tmp_path / "y.npy"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    x = rng.integers(0, 256, (1, 4, 6, 6)).astype(np.uint8)
    np.save(xp, x)
    r = subprocess.run([cli, "infer", str(path), "-i", str(xp), "-o", str(yp)], capture_output=True, text=True)
    assert r.returncode == 0 and "run alone" in r.stdout, r.stderr
    m = tessera.load_onnx(str(path), dev)
    assert m.run(x).tobytes() == np.load(yp).tobytes()
    (row,) = m.report
    assert row["solo"] and row["name"] == "a_conv_whose_weights_need_two_int8_parts" and row["node"] == 0
    assert row["macs"] == m.placement[0]["macs"] == 1 * 8 * 6 * 6 * 4 * 3 * 3
    assert row["shape"] == "6x6,4->8,3x3,s1" and row["cycles"] is None and row["moved"] == 0
    # input, output, weights and the int32 bias the importer gives every conv (as for a graph's conv)
    assert row["compulsory"] == 4 * 36 + 8 * 36 + 8 * 4 * 9 + 4 * 8


@systemc
def test_notice_is_a_warning_not_stderr(digits, tmp_path, capfd):
    """A timeline cut at its size limit is a notice: a tessera.Notice warning, nothing on stderr
    (the library's default handler prints it, the package installs its own)."""
    x = np.load(digits["x"])[:16]
    with pytest.warns(tessera.Notice, match="size limit"):
        with tessera.Device(backend="systemc", timeline=str(tmp_path / "d.json"), timeline_max=4096) as d:
            tessera.load_onnx(digits["qdq"], d).run(x)
    assert capfd.readouterr().err == ""
