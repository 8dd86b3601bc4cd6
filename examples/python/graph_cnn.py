#!/usr/bin/python3
"""tessera.Graph: a small residual CNN built layer by layer (stem conv, depthwise, 1x1, add, pools,
dense), planned once on fsim and run on two random batches; its per-layer table.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/graph_cnn.py
"""
import numpy as np

import tessera

rng = np.random.default_rng(1)
i8 = lambda *shape: rng.integers(-128, 128, shape).astype(np.int8)  # noqa: E731
with tessera.Device("default", backend="fsim") as dev:
    g = tessera.Graph(dev)
    x = g.input((4, 3, 32, 32), np.int8, zp=0)
    h = g.conv2d(x, i8(16, 3, 3, 3), stride=2, pad=1, x_scale=0.05, w_scale=0.0005, y_scale=0.05, relu=True,
                 name="stem")
    d = g.conv2d(h, i8(16, 1, 3, 3), pad=1, groups=16, mult=1 << 30, shift=-8, name="dw")
    p = g.conv2d(d, i8(16, 16, 1, 1), mult=1 << 30, shift=-8, name="pw")
    r = g.add(h, p, scales=(0.05, 0.05, 0.06), name="residual")
    y = g.dense(g.global_avgpool(g.maxpool(r, 2, stride=2)), i8(10, 16), mult=1 << 30, shift=-8, name="fc")
    for k in range(2):
        out = g.run(i8(4, 3, 32, 32))
        print(f"batch {k}: output {out.shape} {out.dtype}, first row {out.reshape(4, 10)[0].tolist()}")
    print(g.report_text.splitlines()[0])
    for row in g.report:
        print(f"  {row['name']:10s} {row['op']:9s} {row['shape']:22s} MACs {row['macs']:>9d}  bound {row['bound']:.0f}")
    print(f"graph: {len(g.report)} layers")
