"""The tessera package against the C CLI (same bytes) and the plain references, and its refusals."""
import os
import subprocess
import threading

import numpy as np
import pytest

import tessera


# ---------------------------------------------------------------- results

def test_digits_bit_identical_to_cli(dev, digits, digits_cli):
    ref, _, _ = digits_cli
    x = np.load(digits["x"])
    y = tessera.load_onnx(digits["qdq"], dev).run(x)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    assert y.tobytes() == ref.tobytes()


def test_resnet18_small_bit_identical_to_cli(dev, cli, resnet18_small, tmp_path):
    model, inp = resnet18_small
    out = str(tmp_path / "out.npy")
    subprocess.run([cli, "infer", model, "-i", inp, "-o", out, "--quiet"], check=True, capture_output=True)
    ref = np.load(out)
    y = tessera.load_onnx(model, dev).run(np.load(inp))
    assert y.dtype == ref.dtype and y.shape == ref.shape and y.tobytes() == ref.tobytes()


def test_digits_qlinear_form_same_predictions(dev, digits):
    x, labels = np.load(digits["x"]), np.load(digits["y"])
    acc = (tessera.load_onnx(digits["qlinear"], dev).run(x).argmax(axis=1) == labels).mean()
    assert acc > 0.9


def test_digits_accuracy_matches_cli_line(dev, digits, digits_cli):
    _, text, _ = digits_cli
    x, labels = np.load(digits["x"]), np.load(digits["y"])
    right = int((tessera.load_onnx(digits["qdq"], dev).run(x).argmax(axis=1) == labels).sum())
    assert "accuracy: %d of %d" % (right, len(labels)) in text


def test_placement_matches_cli(dev, digits, digits_cli):
    _, text, cli_placement = digits_cli
    m = tessera.load_onnx(digits["qdq"], dev, batch=360)  # the batch the CLI ran (macs count it)
    pl = m.placement
    assert pl == cli_placement["placement"]  # `tessera infer --placement-json`, node by node
    assert sum(p["side"] == "device" for p in pl) == m.device_ops == cli_placement["device_ops"]
    assert m.placement_text in text  # the same lines `tessera infer` prints


def test_place_refused_in_one_line(dev, digits):
    """place= is parsed by the importer's own --place parser: a bad kind or value is refused naming it."""
    for place, why in (("bogus=host", 'unknown kind "bogus"'), ({"softmax": "gpu"}, 'softmax needs device or host'),
                       ("", "KIND=device|host"), ({"concat": 1}, "str kinds and values"), (3, "KIND=device|host")):
        with pytest.raises(tessera.Error) as e:
            tessera.load_onnx(digits["qdq"], dev, place=place)
        assert str(e.value).startswith("place: ") and why in str(e.value) and "\n" not in str(e.value), place
    # kinds the digits model has none of change nothing
    a = tessera.load_onnx(digits["qdq"], dev).placement
    assert tessera.load_onnx(digits["qdq"], dev, place="concat=host,softmax=device").placement == a


def test_report_rows_match_cli(dev, digits, digits_cli):
    """The library's rows (onnx/tsr_onnx_report.h) against the table `tessera infer` prints."""
    _, text, cli_placement = digits_cli
    m = tessera.load_onnx(digits["qdq"], dev)
    m.run(np.load(digits["x"]))
    rows = m.report
    assert isinstance(rows, list) and rows and all(r["macs"] >= 0 and r["name"] for r in rows)
    assert sum(r["macs"] for r in rows) > 0
    # the CLI's table row by row, but for the plan time and the kernel cache (they vary by run)
    cli_rows = parse_printed_report(text[text.index("device segment 0"):])
    assert len(rows) == len(cli_rows) == m.device_ops  # one row per device operator (digits)
    for r, c in zip(rows, cli_rows):
        assert (r["segment"], r["index"], r["layer"][:18], r["op"], r["shape"][:26], r["limit"]) == \
            (c["segment"], c["index"], c["layer"], c["op"], c["shape"], c["limit"])
        for k in ("macs", "moved", "compulsory"):
            assert r[k] == c[k], k
        assert round(r["bound"]) == c["bound"] and r["cycles"] == c["cycles"] is None
    # joined to the placement by node index: the same node, its name in full
    pl = m.placement
    for r in rows:
        assert pl[r["node"]]["name"] == r["name"] and pl[r["node"]]["side"] == "device"
        assert pl[r["node"]]["segment"] == r["segment"]


def test_batch_change_reimports(dev, digits, digits_cli):
    ref, _, _ = digits_cli
    x = np.load(digits["x"])
    m = tessera.load_onnx(digits["qdq"], dev, batch=7)
    assert m.run(x[:7]).tobytes() == ref[:7].tobytes()
    assert m.run(x).tobytes() == ref.tobytes()


def test_output_owns_its_memory(dev, digits, digits_cli):
    ref, _, _ = digits_cli
    m = tessera.load_onnx(digits["qdq"], dev)
    y = m.run(np.load(digits["x"]))
    del m
    import gc
    gc.collect()
    assert y.tobytes() == ref.tobytes()


def test_dropped_models_are_freed(dev, digits):
    """A long-lived device does not keep every model loaded on it alive."""
    import gc
    import weakref
    refs = [weakref.ref(tessera.load_onnx(digits["qdq"], dev)) for _ in range(3)]
    gc.collect()
    assert all(r() is None for r in refs) and len(dev._models) == 0


def test_config_dict_and_overrides():
    c = tessera.config("default")
    assert c["LOG_BLOCK_IN"] == 4 and c["block_in"] == 16 and c["macs_per_op"] == 256
    c5 = tessera.config("default", LOG_BLOCK=5)
    assert c5["block_in"] == 32 and c5["block_out"] == 32 and c5["LOG_BLOCK_OUT"] == 5
    assert tessera.config(c5) == c5  # a dict goes back in
    assert "default" in tessera.presets() and "fsim" in tessera.backends()


def test_device_from_config_dict(digits, digits_cli):
    ref, _, _ = digits_cli
    with tessera.Device(tessera.config("default"), backend="fsim", dram_size=1 << 28) as d:
        assert d.config["block_out"] == 16
        assert tessera.load_onnx(digits["qdq"], d).run(np.load(digits["x"])).tobytes() == ref.tobytes()


GEMM = os.path.join(os.path.dirname(__file__), "..", "..", "isa", "examples", "gemm_relu.s")


def test_asm_run_matches_cli_and_numpy(dev, cli, tmp_path):
    text = open(GEMM).read()
    p = tessera.asm(text)
    assert len(p) > 0 and {b["name"] for b in p.buffers} >= {"inp", "wgt", "out"}
    tessera.verify(p)
    out = tessera.run(p, dev)["out"]
    subprocess.run([cli, "run", "--config", "default", "--out-dir", str(tmp_path), "--quiet", GEMM], check=True,
                   capture_output=True)
    assert out == (tmp_path / "out.bin").read_bytes()
    # the plain reference: Y = clamp(relu(X W^T) >> 8, 127), X and W the buffers' seeded bytes
    xb, wb = bytearray(128), bytearray(1024)
    tessera.lib.tsr_asm_random_fill(1, tessera.ffi.from_buffer(xb), 128)
    tessera.lib.tsr_asm_random_fill(2, tessera.ffi.from_buffer(wb), 1024)
    x = np.frombuffer(bytes(xb), np.int8).reshape(4, 32).astype(np.int64)
    wblk = np.frombuffer(bytes(wb), np.int8).reshape(2, 2, 16, 16)  # [n][k][o][i]
    w = wblk.transpose(0, 2, 1, 3).reshape(32, 32).astype(np.int64)
    y = np.minimum(np.maximum(x @ w.T, 0) >> 8, 127).astype(np.int8)
    assert out == y.tobytes()


def test_run_inputs_override(dev):
    p = tessera.asm(open(GEMM).read())
    z = tessera.run(p, dev, inputs={"inp": bytes(128)})["out"]
    assert z == bytes(128)


def parse_printed_report(text):
    """The per-layer table as tsr_graph_print_report prints it (fixed-width columns)."""
    rows, seg = [], -1
    num = lambda v: None if v == "-" else int(v) if v.lstrip("-").isdigit() else float(v)  # noqa: E731
    for line in text.splitlines():
        if line.startswith("device segment "):
            seg = int(line.split()[2].rstrip(":"))
            continue
        tok = line.split()
        if len(tok) < 14 or not tok[0].isdigit() or len(tok[0]) > 3:
            continue
        mid, right = line[4:61], tok[-10:]  # the layer (18), op (10) and shape (26) columns
        row = {"segment": seg, "index": int(tok[0]), "layer": mid[0:18].strip(), "op": mid[19:29].strip(),
               "shape": mid[30:56].strip()}
        for k, v in zip(["macs", "cycles", "util", "bound", "ratio", "limit", "moved", "compulsory", "plan_ms",
                         "jit"], right):
            row[k] = v if k in ("limit", "jit") else num(v)
        rows.append(row)
    return rows


# ---------------------------------------------------------------- refusals

def _raises(fn, *words, arg=None):
    """fn raises tessera.Error, one line containing words; arg: the message starts with 'arg: '."""
    with pytest.raises(tessera.Error) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg
    if arg:
        assert msg.startswith(arg + ": "), msg
    return e.value


def test_wrong_dtype(dev, digits):
    m = tessera.load_onnx(digits["qdq"], dev)
    x = np.load(digits["x"])
    _raises(lambda: m.run(x.astype(np.float64)), "float64", arg="x")
    _raises(lambda: m.run(x.astype(np.int32)), "float", arg="x")
    _raises(lambda: m.run(x.astype(np.int64)), "float", arg="x")


def test_wrong_shape(dev, digits):
    m = tessera.load_onnx(digits["qdq"], dev)
    x = np.load(digits["x"])
    _raises(lambda: m.run(x[:, :, :4].copy()), "[360,1,8,8]", arg="x")
    _raises(lambda: m.run(x.reshape(x.shape[0], -1)), "[360,1,8,8]", arg="x")


def test_non_contiguous(dev, digits):
    m = tessera.load_onnx(digits["qdq"], dev)
    x = np.load(digits["x"])
    xt = np.concatenate([x, x], axis=-1)[..., ::2]
    assert not xt.flags.c_contiguous
    _raises(lambda: m.run(xt), "contiguous", arg="x")


def test_not_an_array(dev, digits):
    m = tessera.load_onnx(digits["qdq"], dev)
    _raises(lambda: m.run([1, 2, 3]), "numpy", arg="x")


def test_not_onnx(dev, tmp_path):
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"this is not a protobuf\x00\xff" * 10)
    _raises(lambda: tessera.load_onnx(str(bad), dev), str(bad))
    _raises(lambda: tessera.load_onnx(str(tmp_path / "missing.onnx"), dev), "missing.onnx")
    _raises(lambda: tessera.load_onnx(123, dev), arg="path")
    _raises(lambda: tessera.load_onnx(str(bad), "fsim"), arg="device")


def test_device_used_after_close(digits):
    d = tessera.Device()
    m = tessera.load_onnx(digits["qdq"], d)
    d.close()
    d.close()  # twice is fine
    x = np.load(digits["x"])
    _raises(lambda: m.run(x), "closed")
    _raises(lambda: tessera.load_onnx(digits["qdq"], d), "closed", arg="device")
    _raises(lambda: tessera.run(tessera.asm(open(GEMM).read()), d), "closed", arg="device")


def test_bad_config_and_backend():
    _raises(lambda: tessera.config("no-such-preset"), "no-such-preset")
    _raises(lambda: tessera.config("default", LOG_BLOCK=9), "LOG_BLOCK")
    _raises(lambda: tessera.config("default", NOT_A_KEY=1), "NOT_A_KEY")
    _raises(lambda: tessera.Device(backend="nope"), "nope")
    _raises(lambda: tessera.Device(dram_latncy=3), arg="dram_latncy")
    _raises(lambda: tessera.Device(dram_size=-1), arg="dram_size")


def test_bad_program():
    e = _raises(lambda: tessera.asm("FROB 1 2 3\n"), "FROB")
    assert e.code == tessera.lib.TSR_EPARSE
    _raises(lambda: tessera.verify("not a program"), arg="program")


def test_no_stderr_from_library(digits, tmp_path):
    """Errors are exceptions only: a failing load prints nothing (checked in a child process)."""
    code = ("import tessera\n"
            "d = tessera.Device()\n"
            "try:\n tessera.load_onnx(%r, d)\nexcept tessera.Error as e:\n print('ERR', e)\n"
            "try:\n tessera.asm('FROB\\n')\nexcept tessera.Error as e:\n print('ERR', e)\n") % (__file__,)
    r = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.count("ERR ") == 2 and r.stderr == "", (r.stdout, r.stderr)


# ---------------------------------------------------------------- threads

def test_two_threads_two_devices(digits, digits_cli):
    ref, _, _ = digits_cli
    x = np.load(digits["x"])
    results, errors = {}, []

    def work(k):
        try:
            with tessera.Device("default", backend="fsim") as d:
                results[k] = tessera.load_onnx(digits["qdq"], d).run(x)
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errors, errors
    assert all(results[k].tobytes() == ref.tobytes() for k in range(2))


def test_second_run_while_in_flight_refused(dev, digits):
    m = tessera.load_onnx(digits["qdq"], dev)
    x = np.load(digits["x"])
    lock = dev._busy("device")  # what a run in flight holds
    try:
        _raises(lambda: m.run(x), "busy")
    finally:
        lock.release()
    assert m.run(x).shape[0] == x.shape[0]
