#!/usr/bin/python3
"""tessera.op: one quantized conv2d on the device (as `tessera op conv2d`), checked against a plain
numpy computation of the same integer arithmetic (jit/operators.md), on fsim and on the SystemC
model with its cycles.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/op_conv2d.py
"""
import numpy as np

import tessera

rng = np.random.default_rng(2)
x = rng.integers(-128, 128, (1, 32, 14, 14)).astype(np.int8)
w = rng.integers(-128, 128, (64, 32, 3, 3)).astype(np.int8)
b = rng.integers(-1000, 1000, 64).astype(np.int32)
M, S = 1 << 30, -10  # requantization: y = round(acc * 2^-11), double rounding as TFLite
for backend in [b for b in ("fsim", "systemc") if b in tessera.backends()]:
    with tessera.Device("default", backend=backend) as dev:
        y, info = tessera.op.conv2d(dev, x, w, b, pad=1, mult=M, shift=S, relu=True, info=True)
    print(f"{backend}: y {y.shape}, {info['macs']} MACs, {info['cycles']} cycles, {info['instructions']} instructions")
# numpy: int64 accumulators over the zero-padded input, then SRDHM and the rounding shift
xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
acc = np.zeros((1, 64, 14, 14), np.int64) + b.reshape(1, -1, 1, 1)
for ky in range(3):
    for kx in range(3):
        acc += np.einsum("nchw,oc->nohw", xp[:, :, ky:ky + 14, kx:kx + 14], w[:, :, ky, kx].astype(np.int64))
h = (acc * M + (1 << 30)) >> 31  # SRDHM(acc, M), floor((p + 2^30) / 2^31)
e = -S
h = (h >> e) + ((h & ((1 << e) - 1)) > (((1 << e) - 1) >> 1) + (h < 0))  # RDBPOT
ref = np.clip(h, 0, 127).astype(np.int8)
print(f"same as numpy: {np.array_equal(y, ref)}")
