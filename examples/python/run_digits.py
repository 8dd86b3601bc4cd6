#!/usr/bin/python3
"""The README's main job from Python: the digits CNN on the functional simulator, its accuracy, and
the per-layer roofline of the run (a PNG when OUT.png is given).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/run_digits.py [build/digits] [OUT.png]
"""
import sys

import numpy as np

import tessera

d = sys.argv[1] if len(sys.argv) > 1 else "build/digits"
x, labels = np.load(f"{d}/test_x.npy"), np.load(f"{d}/test_y.npy")
with tessera.Device("default", backend="fsim") as dev:
    model = tessera.load_onnx(f"{d}/digits_qdq.onnx", dev)
    right = int((model.run(x).argmax(axis=1) == labels).sum())
    print(f"accuracy: {right} of {len(labels)} = {100 * right / len(labels):.2f}% (backend fsim)")
    if len(sys.argv) > 2:
        import matplotlib
        matplotlib.use("Agg")
        model.report.plot_roofline().figure.savefig(sys.argv[2], dpi=120)
        print(f"roofline: {sys.argv[2]}")
