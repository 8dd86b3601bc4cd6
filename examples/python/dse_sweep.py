#!/usr/bin/python3
"""tessera.dse.sweep: a tiny design space (block size x accumulator buffer of the tiny preset, a small
ResNet-18 on the SystemC model, no synthesis) swept by the DSE engine; its Pareto front and plot.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/dse_sweep.py OUTDIR
"""
import os
import sys

import matplotlib

import tessera

matplotlib.use("Agg")
if len(sys.argv) != 2:
    print("dse_sweep: usage: dse_sweep.py OUTDIR", file=sys.stderr)
    sys.exit(2)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
space = {"name": "example-tiny", "base": "tiny", "keys": {"LOG_BLOCK": [2, 3], "LOG_ACC_BUFF_SIZE": [11, 12]},
         "workload": {"kind": "resnet18-small", "small": [16, 4, 10]}, "dram": {"bytes_per_cycle": 8},
         "synth": "none"}
s = tessera.dse.sweep(space, jobs=2, cache=os.path.join(out, "dse-cache"))
for r in s:
    ov = " ".join(f"{k}={v}" for k, v in r["overrides"].items())
    print(f"  {r['id']} {ov:34s} {r['cycles']:>7d} cycles  {r['throughput']:8.1f}/s{'  front' if r.get('pareto') else ''}")
s.plot_pareto().figure.savefig(os.path.join(out, "pareto.png"), dpi=120)
print(f"sweep: {len(s)} points, {len(s.front)} on the front; {out}/pareto.png")
