#!/usr/bin/python3
"""Python overhead of the tessera package against the C CLI's wall time, and its import time.

    PYTHONPATH=<build>/python /usr/bin/python3 examples/python/bench.py TESSERA_CLI MODEL.onnx INPUT.npy [...] [--reps N]

For each MODEL/INPUT pair: `tessera infer MODEL -i INPUT -o OUT --quiet` as a process (best of N
wall times), the same in Python as a process (import, Device, load_onnx, run), and in-process
load+prepare+run and run alone (best of N); the outputs must be the same bytes. "proc Δ": the Python
process against the CLI's; "in-proc Δ": load+run in Python against the CLI's whole process. Then `import
tessera` (a fresh interpreter, less `import numpy`). A measurement, not a test: it prints a table.
Exit 2 with one line on bad arguments.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np


def best(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


PY_RUN = ("import sys, numpy as np, tessera\n"
          "with tessera.Device('default', backend='fsim') as d:\n"
          "    y = tessera.load_onnx(sys.argv[1], d).run(np.load(sys.argv[2]))\n"
          "np.save(sys.argv[3], y)\n")


def main(argv):
    reps = 5
    if "--reps" in argv:
        i = argv.index("--reps")
        try:
            reps = int(argv[i + 1])
        except (IndexError, ValueError):
            reps = 0
        del argv[i:i + 2]
    if len(argv) < 3 or len(argv) % 2 == 0 or reps < 1:
        print("bench: usage: bench.py TESSERA_CLI MODEL.onnx INPUT.npy [MODEL INPUT ...] [--reps N>=1]",
              file=sys.stderr)
        return 2
    cli, pairs = argv[0], list(zip(argv[1::2], argv[2::2]))
    for p in [cli] + [f for pr in pairs for f in pr]:
        if not os.path.isfile(p):
            print(f"bench: {p}: no such file", file=sys.stderr)
            return 2
    import tessera
    py = sys.executable
    print(f"{'model':28s} {'CLI process':>12s} {'Py process':>11s} {'Py load+run':>12s} {'Py run':>9s}"
          f" {'proc Δ':>8s} {'in-proc Δ':>9s}  same bytes")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, inp in pairs:
            oc, op = os.path.join(tmp, "c.npy"), os.path.join(tmp, "p.npy")
            t_cli = best(lambda: subprocess.run([cli, "infer", model, "-i", inp, "-o", oc, "--quiet"],
                                                check=True, stdout=subprocess.DEVNULL), reps)
            t_pyp = best(lambda: subprocess.run([py, "-c", PY_RUN, model, inp, op], check=True), reps)
            x = np.load(inp)
            out = {}

            def load_run():
                with tessera.Device("default", backend="fsim") as d:
                    out["y"] = tessera.load_onnx(model, d, batch=x.shape[0]).run(x)
            t_lr = best(load_run, reps)
            with tessera.Device("default", backend="fsim") as d:
                m = tessera.load_onnx(model, d, batch=x.shape[0])
                t_run = best(lambda: m.run(x), reps)
                # one run, then the device segments' own wall time in the library for that same run
                t_run1 = best(lambda: m.run(x), 1)
                t_seg = sum(float(v) for v in re.findall(r"last execution ([0-9.]+) ms wall", m.report_text)) / 1e3
            same = np.load(oc).tobytes() == out["y"].tobytes() == np.load(op).tobytes()
            print(f"{os.path.basename(model)[:28]:28s} {t_cli * 1e3:10.1f}ms {t_pyp * 1e3:9.1f}ms"
                  f" {t_lr * 1e3:10.1f}ms {t_run * 1e3:7.1f}ms {100 * (t_pyp - t_cli) / t_cli:+7.1f}%"
                  f" {100 * (t_lr - t_cli) / t_cli:+8.1f}%  {same}")
            rows.append((os.path.basename(model), t_run1, t_seg))
    for name, t_run1, t_seg in rows:
        print(f"{name}: one run {t_run1 * 1e3:.1f} ms, of it the device segments {t_seg * 1e3:.1f} ms (the library's"
              f" own clock); the rest, {(t_run1 - t_seg) * 1e3:.2f} ms ({100 * (t_run1 - t_seg) / t_run1:.2f}%), is"
              f" the host operators and the package")
    t_np = best(lambda: subprocess.run([py, "-c", "import numpy"], check=True), reps)
    t_ts = best(lambda: subprocess.run([py, "-c", "import numpy, tessera"], check=True), reps)
    print(f"import: python3 -c 'import numpy' {t_np * 1e3:.1f} ms; 'import numpy, tessera' {t_ts * 1e3:.1f} ms"
          f" (tessera alone {(t_ts - t_np) * 1e3:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
