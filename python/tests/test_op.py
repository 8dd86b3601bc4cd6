"""tessera.op: one operator against `tessera op` (same bytes) and the numpy reference (npref.py)."""
import subprocess

import numpy as np
import pytest

import npref
import tessera


def _cli_op(cli, tmp_path, op, arrays, flags):
    """`tessera op OP` on .npy operands; its output array."""
    args = [cli, "op", op, "-q", "-o", str(tmp_path / "y.npy")]
    for flag, a in arrays.items():
        p = tmp_path / (flag.strip("-") + ".npy")
        np.save(p, a)
        args += [flag, str(p)]
    r = subprocess.run(args + [str(f) for f in flags], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return np.load(tmp_path / "y.npy")


@pytest.mark.parametrize("xdt,groups,stride,pad", [(np.int8, 1, 2, 1), (np.uint8, 1, 1, (1, 0, 2, 1)),
                                                   (np.int8, 8, 1, 1)])
def test_conv2d_same_bytes_as_cli_and_numpy(dev, cli, tmp_path, xdt, groups, stride, pad):
    rng = np.random.default_rng(3 + groups)
    lo, hi = (-128, 128) if xdt == np.int8 else (0, 256)
    x = rng.integers(lo, hi, (2, 8, 9, 7)).astype(xdt)
    w = rng.integers(-128, 128, (8, 8 // groups, 3, 3)).astype(np.int8)
    b = rng.integers(-5000, 5000, 8).astype(np.int32)
    ws = rng.uniform(0.002, 0.02, 8).astype(np.float32)
    xzp, yzp = (3, -4) if xdt == np.int8 else (120, 7)
    kw = dict(stride=stride, pad=pad, groups=groups, x_zp=xzp, y_zp=yzp, x_scale=0.05, w_scale=ws, y_scale=0.1,
              relu=True)
    y = tessera.op.conv2d(dev, x, w, b, **kw)
    pads = pad if isinstance(pad, tuple) else (pad,)
    ref = _cli_op(cli, tmp_path, "conv2d", {"-x": x, "-w": w, "--bias": b, "--w-scale": ws},
                  ["--stride", stride, "--pad", ",".join(map(str, pads)), "--groups", groups, "--x-zp", xzp,
                   "--y-zp", yzp, "--x-scale", 0.05, "--y-scale", 0.1, "--relu"])
    assert y.dtype == ref.dtype and y.shape == ref.shape and y.tobytes() == ref.tobytes()
    # numpy: the accumulators, then TFLite's requantization with (M, S) per channel
    p4 = pads * 4 if len(pads) == 1 else pads
    acc = npref.conv2d_acc(x, w, b, (stride, stride), p4, groups, xzp, 0)
    ms = [npref.quantize_multiplier(np.float64(0.05) * np.float64(s) / 0.1) for s in ws]
    lo_, hi_ = (-128, 127) if xdt == np.int8 else (0, 255)
    want = npref.requant(acc, [m for m, _ in ms], [s for _, s in ms], yzp, yzp, hi_, xdt)
    assert np.array_equal(y, want)


def test_dense_same_bytes_as_cli_and_numpy(dev, cli, tmp_path):
    rng = np.random.default_rng(11)
    x = rng.integers(0, 256, (5, 70)).astype(np.uint8)
    w = rng.integers(-128, 128, (12, 70)).astype(np.int8)
    b = rng.integers(-3000, 3000, 12).astype(np.int32)
    y, info = tessera.op.dense(dev, x, w, b, x_zp=128, y_zp=-3, y_dtype="int8", mult=1518500250, shift=-9,
                               info=True)
    ref = _cli_op(cli, tmp_path, "dense", {"-x": x, "-w": w, "--bias": b},
                  ["--x-zp", 128, "--y-zp", -3, "--y-dtype", "int8", "--mult", 1518500250, "--shift", -9])
    assert y.tobytes() == ref.tobytes() and y.dtype == np.int8 and y.shape == (5, 12)
    want = npref.requant(npref.dense_acc(x, w, b, 128, 0), 1518500250, -9, -3, -128, 127, np.int8)
    assert np.array_equal(y, want)
    assert info["macs"] >= 5 * 70 * 12 and info["instructions"] > 0


def test_add_same_bytes_as_cli_and_numpy(dev, cli, tmp_path):
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (3, 4, 5, 6)).astype(np.int8)
    bb = rng.integers(0, 256, (3, 4, 5, 6)).astype(np.uint8)
    y = tessera.op.add(dev, a, bb, a_zp=-2, b_zp=130, y_zp=5, scales=(0.02, 0.035, 0.04))
    ref = _cli_op(cli, tmp_path, "add", {"-a": a, "-b": bb}, ["--a-zp", -2, "--b-zp", 130, "--y-zp", 5,
                                                               "--a-scale", 0.02, "--b-scale", 0.035,
                                                               "--y-scale", 0.04])
    assert y.tobytes() == ref.tobytes() and y.shape == a.shape
    want = npref.add(a, bb, -2, 130, 5, npref.add_params(0.02, 0.035, 0.04), -128, 127, np.int8)
    assert np.array_equal(y, want)


def test_op_refusals_name_the_argument(dev):
    x = np.zeros((1, 4, 5, 5), np.int8)
    w = np.zeros((4, 4, 3, 3), np.int8)
    q = dict(mult=1 << 30, shift=-4)
    from test_api import _raises
    _raises(lambda: tessera.op.conv2d(dev, x.astype(np.float32), w, **q), "float32", arg="x")
    _raises(lambda: tessera.op.conv2d(dev, x[0], w, **q), "dimensions", arg="x")
    _raises(lambda: tessera.op.conv2d(dev, x[..., ::2], w, **q), "contiguous", arg="x")
    _raises(lambda: tessera.op.conv2d(dev, x, w[:, :2].copy(), **q), "(C_out, 4, KH, KW)", arg="w")
    _raises(lambda: tessera.op.conv2d(dev, x, w, np.zeros(3, np.int32), **q), "(4,)", arg="b")
    _raises(lambda: tessera.op.conv2d(dev, x, w, groups=3, **q), arg="groups")
    _raises(lambda: tessera.op.conv2d(dev, x, w, x_zp=200, **q), "[-128, 127]", arg="x_zp")
    _raises(lambda: tessera.op.conv2d(dev, x, w), "no requantization", arg="mult")
    _raises(lambda: tessera.op.conv2d(dev, x, w, mult=1 << 30), arg="shift")
    _raises(lambda: tessera.op.conv2d(dev, x, w, stride=0, **q), arg="stride")
    _raises(lambda: tessera.op.conv2d(dev, x, w, relu6=True, **q), arg="relu6")
    _raises(lambda: tessera.op.conv2d("fsim", x, w, **q), arg="dev")
    _raises(lambda: tessera.op.add(dev, x, x[:, :2].copy(), scales=(1, 1, 1)), "differs", arg="b")
    e = _raises(lambda: tessera.op.conv2d(dev, x, w, pad=20, **q), "pad")  # the library's own check
    assert e.code == tessera.lib.TSR_EINVAL
    d = tessera.Device()
    d.close()
    _raises(lambda: tessera.op.conv2d(d, x, w, **q), "closed", arg="dev")


@pytest.mark.parametrize("kind", ["maxpool", "avgpool", "globalavgpool"])
def test_pools_same_bytes_as_cli_and_numpy(dev, cli, tmp_path, kind):
    rng = np.random.default_rng(21)
    x = rng.integers(-128, 128, (2, 20, 9, 11)).astype(np.int8)
    if kind == "globalavgpool":
        y = tessera.op.global_avgpool(dev, x, x_zp=-5)
        flags, want = ["--x-zp", -5], npref.global_avgpool(x)
    else:
        fn = getattr(tessera.op, kind)
        kw = dict(stride=2, pad=(1, 0, 1, 2), x_zp=-5) | ({"count_include_pad": True} if kind == "avgpool" else {})
        y = fn(dev, x, (3, 3), **kw)
        flags = ["--kernel", "3,3", "--stride", 2, "--pad", "1,0,1,2", "--x-zp", -5] + \
            (["--count-include-pad"] if kind == "avgpool" else [])
        want = npref.maxpool(x, (3, 3), (2, 2), (1, 0, 1, 2)) if kind == "maxpool" else \
            npref.avgpool(x, (3, 3), (2, 2), (1, 0, 1, 2), -5, count_include_pad=True)
    ref = _cli_op(cli, tmp_path, kind, {"-x": x}, flags)
    assert y.tobytes() == ref.tobytes() and y.shape == ref.shape
    assert np.array_equal(y, want)


def test_relu_clip_same_bytes_as_cli(dev, cli, tmp_path):
    x = np.random.default_rng(4).integers(0, 256, (3, 7, 5)).astype(np.uint8)
    y = tessera.op.relu(dev, x, x_zp=100)
    assert y.tobytes() == _cli_op(cli, tmp_path, "relu", {"-x": x}, ["--x-zp", 100]).tobytes()
    assert np.array_equal(y, np.maximum(x, 100))
    y = tessera.op.clip(dev, x, 30, 200, x_zp=100)
    assert y.tobytes() == _cli_op(cli, tmp_path, "clip", {"-x": x}, ["--x-zp", 100, "--act-min", 30,
                                                                     "--act-max", 200]).tobytes()
    assert np.array_equal(y, np.clip(x, 30, 200))
    from test_api import _raises
    _raises(lambda: tessera.op.clip(dev, x, 200, 30), "above", arg="lo")
    _raises(lambda: tessera.op.clip(dev, x, -1, 30), arg="lo")
    _raises(lambda: tessera.op.maxpool(dev, x, 2), "dimensions", arg="x")
    _raises(lambda: tessera.op.maxpool(dev, x.reshape(1, 3, 7, 5), (0, 2)), arg="kernel")
