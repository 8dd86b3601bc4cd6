#!/usr/bin/python3
"""Model.timeline: the digits CNN once on the SystemC model with its timeline on: the Perfetto JSON
(open it in ui.perfetto.dev) and a Gantt of the stages as a PNG.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/timeline.py build/digits OUTDIR
"""
import os
import sys

import matplotlib
import numpy as np

import tessera

matplotlib.use("Agg")
if len(sys.argv) != 3:
    print("timeline: usage: timeline.py DIGITS_DIR OUTDIR", file=sys.stderr)
    sys.exit(2)
if "systemc" not in tessera.backends():
    print("timeline: this library was built without the systemc backend")
    sys.exit(77)  # (CTest: skipped)
d, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
with tessera.Device("default", backend="fsim") as dev:
    model = tessera.load_onnx(f"{d}/digits_qdq.onnx", dev)
    tl = model.timeline(np.load(f"{d}/test_x.npy")[:32], path=f"{out}/digits_timeline.json")
for r in tl.runs:
    print(f"  {r['layer']:16s} {r['cycles']:>8d} cycles, {r['instructions']} instructions")
tl.plot().figure.savefig(f"{out}/digits_gantt.png", dpi=120)
print(f"timeline: {len(tl.runs)} runs, {tl.cycles} cycles; {tl.path}, {out}/digits_gantt.png")
