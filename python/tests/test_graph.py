"""tessera.Graph against the numpy reference (npref.py) and against the same operators run one by one
through tessera.op (the C path of `tessera op`); its refusals."""
import numpy as np
import pytest

import npref
import tessera
from test_api import _raises


def _net(rng):
    """A small residual CNN's parameters: stem conv s2, depthwise 3x3, 1x1 conv, add, pools, dense."""
    return {"w1": rng.integers(-128, 128, (16, 3, 3, 3)).astype(np.int8),
            "b1": rng.integers(-2000, 2000, 16).astype(np.int32),
            "w2": rng.integers(-128, 128, (16, 1, 3, 3)).astype(np.int8),
            "b2": rng.integers(-2000, 2000, 16).astype(np.int32),
            "w3": rng.integers(-128, 128, (16, 16, 1, 1)).astype(np.int8),
            "w4": rng.integers(-128, 128, (10, 16)).astype(np.int8),
            "b4": rng.integers(-500, 500, 10).astype(np.int32),
            "ws1": rng.uniform(0.002, 0.01, 16).astype(np.float32)}


ADD = (0.05, 0.04, 0.06)


def _build(g, p, n=2):
    x = g.input((n, 3, 16, 16), np.int8, zp=-3)
    h1 = g.conv2d(x, p["w1"], p["b1"], stride=2, pad=1, x_scale=0.05, w_scale=p["ws1"], y_scale=0.05, y_zp=-10,
                  relu=True, name="stem")
    h2 = g.conv2d(h1, p["w2"], p["b2"], pad=1, groups=16, mult=1 << 30, shift=-7, y_zp=-10, name="dw")
    h3 = g.conv2d(h2, p["w3"], None, mult=1518500250, shift=-8, y_zp=2, name="pw")
    s = g.add(h1, h3, y_zp=1, scales=ADD, name="res")
    m = g.maxpool(s, 2, stride=2, name="mp")
    a = g.avgpool(m, 3, stride=1, pad=1, name="ap")
    gp = g.global_avgpool(a, name="gap")
    y = g.dense(gp, p["w4"], p["b4"], mult=1 << 30, shift=-6, y_zp=0, name="fc")
    return x, y


def _reference(x, p):
    """The same network in numpy (integer semantics of jit/operators.md)."""
    ms = [npref.quantize_multiplier(np.float64(0.05) * np.float64(s) / 0.05) for s in p["ws1"]]
    h1 = npref.requant(npref.conv2d_acc(x, p["w1"], p["b1"], (2, 2), (1, 1, 1, 1), 1, -3, 0),
                       [m for m, _ in ms], [s for _, s in ms], -10, -10, 127, np.int8)
    h2 = npref.requant(npref.conv2d_acc(h1, p["w2"], p["b2"], (1, 1), (1, 1, 1, 1), 16, -10, 0),
                       1 << 30, -7, -10, -128, 127, np.int8)
    h3 = npref.requant(npref.conv2d_acc(h2, p["w3"], None, (1, 1), (0, 0, 0, 0), 1, -10, 0),
                       1518500250, -8, 2, -128, 127, np.int8)
    s = npref.add(h1, h3, -10, 2, 1, npref.add_params(*ADD), -128, 127, np.int8)
    m = npref.maxpool(s, (2, 2), (2, 2), (0, 0, 0, 0))
    a = npref.avgpool(m, (3, 3), (1, 1), (1, 1, 1, 1), 1)
    gp = npref.global_avgpool(a)
    y = npref.requant(npref.dense_acc(gp, p["w4"], p["b4"], 1, 0), 1 << 30, -6, 0, -128, 127, np.int8)
    return y.reshape(y.shape[0], -1, 1, 1)


def test_graph_matches_numpy_reference(dev):
    rng = np.random.default_rng(7)
    p = _net(rng)
    g = tessera.Graph(dev)
    _build(g, p)
    for k in range(2):  # planned once, run on new inputs
        x = rng.integers(-128, 128, (2, 3, 16, 16)).astype(np.int8)
        y = g.run(x)
        assert y.shape == (2, 10, 1, 1) and y.dtype == np.int8
        assert np.array_equal(y, _reference(x, p)), k
    rep = g.report
    assert [r["layer"] for r in rep] == ["stem", "dw", "pw", "res", "mp", "ap", "gap", "fc"] or \
        [r["layer"] for r in rep] == ["stem", "dw", "pw", "mp", "ap", "gap", "fc"]  # (pw+res fused)
    assert sum(r["macs"] for r in rep) > 0 and all(r["jit"] for r in rep)
    assert "stem" in g.report_text


def test_graph_matches_ops_one_by_one(dev):
    """The graph's bytes = each operator through tessera.op (the CLI's path), chained on the host."""
    rng = np.random.default_rng(8)
    p = _net(rng)
    x = rng.integers(-128, 128, (1, 3, 16, 16)).astype(np.int8)
    g = tessera.Graph(dev)
    _build(g, p, n=1)
    y = g.run(x)
    op = tessera.op
    h1 = op.conv2d(dev, x, p["w1"], p["b1"], stride=2, pad=1, x_zp=-3, x_scale=0.05, w_scale=p["ws1"], y_scale=0.05,
                   y_zp=-10, relu=True)
    h2 = op.conv2d(dev, h1, p["w2"], p["b2"], pad=1, groups=16, x_zp=-10, mult=1 << 30, shift=-7, y_zp=-10)
    h3 = op.conv2d(dev, h2, p["w3"], None, x_zp=-10, mult=1518500250, shift=-8, y_zp=2)
    s = op.add(dev, h1, h3, a_zp=-10, b_zp=2, y_zp=1, scales=ADD)
    # the pools and the dense: the numpy reference (tessera.op has no pools)
    gp = npref.global_avgpool(npref.avgpool(npref.maxpool(s, (2, 2), (2, 2), (0,) * 4), (3, 3), (1, 1), (1,) * 4, 1))
    yo = op.dense(dev, gp, p["w4"], p["b4"], x_zp=1, mult=1 << 30, shift=-6)
    assert y.tobytes() == yo.tobytes()


def test_graph_two_outputs_and_uint8(dev):
    rng = np.random.default_rng(9)
    g = tessera.Graph(dev)
    x = g.input((1, 8, 6, 6), np.uint8, zp=128)
    w = rng.integers(-128, 128, (8, 8, 3, 3)).astype(np.int8)
    c = g.conv2d(x, w, mult=1 << 30, shift=-8, y_zp=128, y_dtype=np.uint8)
    r = g.clip(c, 100, 200)
    g.output(c, r)
    xa = rng.integers(0, 256, (1, 8, 6, 6)).astype(np.uint8)
    yc, yr = g.run(xa)
    want = npref.requant(npref.conv2d_acc(xa, w, None, (1, 1), (0,) * 4, 1, 128, 0), 1 << 30, -8, 128, 0, 255,
                         np.uint8)
    assert np.array_equal(yc, want) and np.array_equal(yr, np.clip(want, 100, 200))


def test_graph_concat(dev):
    """The graph input and three convs' outputs along channels (views of one device tensor; the input is
    copied on the device): equal to numpy's concatenate of the numpy reference convs; a channel offset that is not a multiple of BLOCK is refused naming the node."""
    rng = np.random.default_rng(7)
    g = tessera.Graph(dev)
    x = g.input((1, 16, 5, 6), zp=-3)
    ws = [rng.integers(-60, 60, (c, 16, 1, 1), dtype=np.int8) for c in (16, 32, 5)]
    hs = [g.conv2d(x, w, mult=1 << 30, shift=-8, y_zp=-3, name="c%d" % i) for i, w in enumerate(ws)]
    y = g.concat(x, hs[0], hs[1], hs[2], name="cat")
    g.output(y)
    xa = rng.integers(-128, 127, (1, 16, 5, 6), dtype=np.int8)
    got = g.run(xa)
    want = np.concatenate([xa] + [npref.requant(npref.conv2d_acc(xa, w, None, (1, 1), (0,) * 4, 1, -3, 0), 1 << 30,
                                                -8, -3, -128, 127, np.int8) for w in ws], axis=1)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    g2 = tessera.Graph(dev)
    a = g2.input((1, 5, 3, 3))
    e = _raises(lambda: g2.concat(a, a, name="odd"), "BLOCK")
    assert "odd" in str(e)


def test_graph_refusals(dev):
    g = tessera.Graph(dev)
    x = g.input((1, 4, 5, 5), np.int8)
    w = np.zeros((4, 4, 3, 3), np.int8)
    q = dict(mult=1 << 30, shift=-4)
    _raises(lambda: g.input((1, 4, 5), np.int8), arg="shape")
    _raises(lambda: g.input((1, 4, 5, 5), np.float32), "float32", arg="dtype")
    _raises(lambda: g.conv2d("x", w, **q), "Tensor", arg="x")
    _raises(lambda: g.conv2d(x, w.astype(np.int16), **q), "int16", arg="w")
    _raises(lambda: g.conv2d(x, w[:, :, ::2], **q), "contiguous", arg="w")
    _raises(lambda: g.conv2d(x, w, groups=3, **q), arg="groups")
    _raises(lambda: g.conv2d(x, w, b=np.zeros(4, np.int64), **q), "int64", arg="b")
    _raises(lambda: g.conv2d(x, w, name="n" * 60, **q), arg="name")
    _raises(lambda: g.maxpool(x, 0), arg="kernel")
    other = tessera.Graph(dev).input((1, 4, 5, 5))
    _raises(lambda: g.add(x, other, scales=ADD), "Tensor", arg="b")
    y = g.conv2d(x, w, pad=1, **q)
    e = _raises(lambda: g.conv2d(y, np.zeros((4, 4, 7, 7), np.int8), **q))  # 5x5 input, 7x7 kernel: the library
    assert e.code == tessera.lib.TSR_EINVAL
    xa = np.zeros((1, 4, 5, 5), np.int8)
    _raises(lambda: g.run(xa.astype(np.uint8)), "uint8", arg="x")
    _raises(lambda: g.run(xa[:, :2].copy()), "shape", arg="x")
    _raises(lambda: g.run(np.zeros((1, 4, 5, 10), np.int8)[..., ::2]), "contiguous", arg="x")
    _raises(lambda: g.run(xa, xa), "2 arrays", arg="x")
    assert g.run(xa).shape == (1, 4, 5, 5)
    _raises(lambda: g.conv2d(y, w, **q), "planned")  # no nodes after the plan


def test_graph_and_op_refuse_a_second_run_in_flight(dev):
    g = tessera.Graph(dev)
    g.relu(g.input((1, 4, 4, 4)))
    x = np.zeros((1, 4, 4, 4), np.int8)
    lock = dev._busy("device")  # what a run in flight holds
    try:
        _raises(lambda: g.run(x), "busy")
        _raises(lambda: tessera.op.conv2d(dev, x, np.zeros((4, 4, 1, 1), np.int8), mult=1, shift=0), "busy",
                arg="dev")
    finally:
        lock.release()
    assert g.run(x).shape == (1, 4, 4, 4)


def test_graph_device_closed():
    d = tessera.Device()
    g = tessera.Graph(d)
    x = g.input((1, 4, 4, 4))
    g.relu(x)
    d.close()
    _raises(lambda: g.run(np.zeros((1, 4, 4, 4), np.int8)), "closed")
    _raises(lambda: tessera.Graph(d), "closed", arg="device")
    with pytest.raises(tessera.Error):
        g.relu(x)


def test_graph_activation_table():
    """An activation table (ACT_LUT): y = fn(x) elementwise, int8 -> uint8 and uint8 -> int8, against
    numpy; refused on a config without tables, naming the key."""
    rng = np.random.default_rng(12)
    sig = lambda v: np.round(255 / (1 + np.exp(-v / 16.0))).astype(np.int64)  # noqa: E731  int8 -> uint8
    neg = lambda v: np.clip(127 - v, -128, 127)  # noqa: E731  uint8 -> int8
    with tessera.Device(tessera.config("default", ACT_LUT=1)) as d:
        g = tessera.Graph(d)
        x = g.input((2, 20, 5, 7), np.int8, zp=3)
        a = g.act(x, sig, y_dtype=np.uint8, y_zp=0)
        g.act(a, neg, y_dtype=np.int8, y_zp=-1)
        g.output(a, g._last)
        xa = rng.integers(-128, 128, (2, 20, 5, 7)).astype(np.int8)
        ya, yb = g.run(xa)
        assert ya.dtype == np.uint8 and np.array_equal(ya, sig(xa.astype(np.int64)))
        assert yb.dtype == np.int8 and np.array_equal(yb, neg(ya.astype(np.int64)))
        assert [r["op"] for r in g.report] == ["act", "act"]
        g2 = tessera.Graph(d)
        x2 = g2.input((1, 1, 1, 1))
        _raises(lambda: g2.act(x2, 3), arg="fn")
        _raises(lambda: g2.act(x2, lambda v: v * 2), "[-128, 127]", arg="fn")
        _raises(lambda: g2.act(x2, lambda v: v[:3]), arg="fn")
        _raises(lambda: g2.act(x2, lambda v: 1 / 0), "ZeroDivisionError", arg="fn")
    g = tessera.Graph(tessera.Device(tessera.config("default", ACT_LUT=0)))  # (the default preset has 2)
    _raises(lambda: g.act(g.input((1, 4, 4, 4)), neg), "ACT_LUT")


def test_graph_requantize():
    rng = np.random.default_rng(13)
    with tessera.Device() as d:
        g = tessera.Graph(d)
        x = g.input((2, 24, 3, 5), np.uint8, zp=128)
        m = rng.integers(1 << 30, 1 << 31, 24)
        g.requantize(x, mult=m, shift=-1, y_zp=-3, y_dtype=np.int8, relu=True)
        xa = rng.integers(0, 256, (2, 24, 3, 5)).astype(np.uint8)
        y = g.run(xa)
        want = npref.requant(xa.astype(np.int64) - 128, m, -1, -3, -3, 127, np.int8)
        assert y.dtype == np.int8 and np.array_equal(y, want)
        assert [r["op"] for r in g.report] == ["requant"]
        g2 = tessera.Graph(d)
        y2 = g2.requantize(g2.input((1, 4, 2, 2), np.int8, zp=5), x_scale=0.1, y_scale=0.3, y_zp=1)
        xb = rng.integers(-128, 128, (1, 4, 2, 2)).astype(np.int8)
        mm, ss = npref.quantize_multiplier(0.1 * 1.0 / 0.3)
        assert np.array_equal(g2.run(xb), npref.requant(xb.astype(np.int64) - 5, mm, ss, 1, -128, 127, np.int8))
        assert y2.dtype == np.int8
        _raises(lambda: tessera.Graph(d).requantize(tessera.Graph(d).input((1, 1, 1, 1))), "Tensor", arg="x")
        g3 = tessera.Graph(d)
        _raises(lambda: g3.requantize(g3.input((1, 1, 1, 1))), "no requantization", arg="mult")
