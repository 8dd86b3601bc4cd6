#!/usr/bin/env python3
"""timeline_png: render a `tessera ... --timeline FILE.json` trace as a PNG.

  timeline_png.py FILE.json OUT.png [--title T] [--zoom START,CYCLES]

One row per lane (fetch, load, compute, store, token waits, GEMM/ALU pipes,
DRAM reads and writes: the burst lanes folded into one row each), slices
coloured by instruction kind, and the counter tracks (token queues, DRAM
bursts in flight) below. The top panel shows the whole trace; --zoom adds a
second panel over [START, START+CYCLES) cycles (1 ns = 1 cycle in the file).
Needs matplotlib (/usr/bin/python3 on the project machine).

The README picture (docs/timeline_resnet18_c4.png) is made with:
  tessera bench --kind resnet18 --layers C4 --backend rtl --timeline c4.json
  /usr/bin/python3 scripts/timeline_png.py c4.json docs/timeline_resnet18_c4.png \
      --title "ResNet-18 C4 (56x56, 64->128, 1x1, stride 2) on the RTL, config default" --zoom 10000,2500
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROWS = ["fetch", "load", "compute", "store", "load token wait", "compute token wait", "store token wait",
        "gemm pipe", "alu pipe", "dram read", "dram write"]
COLORS = {"load": "#4c72b0", "gemm": "#dd8452", "alu": "#55a868", "store": "#c44e52", "finish": "#8172b3",
          "fetch": "#937860", "token": "#bbbbbb", "read": "#64b5cd", "write": "#da8bc3"}


def colour(name):
    for k, c in COLORS.items():
        if name.startswith(k):
            return c
    return "#999999"


def load(path):
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    rows = {r: [] for r in ROWS}
    for e in ev:
        if e["ph"] != "X":
            continue
        lane = names.get(e["tid"], "")
        if lane.startswith("dram read"):
            lane = "dram read"
        elif lane.startswith("dram write"):
            lane = "dram write"
        if lane in rows:
            rows[lane].append((e["ts"] * 1000.0, e["dur"] * 1000.0, e["name"]))
    counters = {}
    for e in ev:
        if e["ph"] == "C" and e["name"] in ("token queues", "dram bursts in flight"):
            for k, v in e["args"].items():
                counters.setdefault("%s %s" % (e["name"].split()[0], k), []).append((e["ts"] * 1000.0, v))
    return rows, counters


def panel(ax_lanes, ax_cnt, rows, counters, lo, hi):
    for i, r in enumerate(ROWS):
        segs = [(b, max(d, (hi - lo) / 4000.0), n) for b, d, n in rows[r] if b + d >= lo and b <= hi]
        by_col = {}
        for b, d, n in segs:
            by_col.setdefault(colour(n), []).append((b, d))
        for c, s in by_col.items():
            ax_lanes.broken_barh(s, (len(ROWS) - 1 - i - 0.4, 0.8), facecolors=c, edgecolors="white", linewidth=0.3)
    ax_lanes.set_yticks(range(len(ROWS)))
    ax_lanes.set_yticklabels(list(reversed(ROWS)), fontsize=8)
    ax_lanes.set_xlim(lo, hi)
    for name, pts in sorted(counters.items()):
        xs, ys = [], []
        for t, v in pts:
            if xs:
                xs.append(t)
                ys.append(ys[-1])
            xs.append(t)
            ys.append(v)
        ax_cnt.plot(xs, ys, lw=0.8, label=name)
    ax_cnt.set_xlim(lo, hi)
    ax_cnt.set_xlabel("cycle")
    ax_cnt.legend(fontsize=6, ncol=6, loc="upper right")


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    title, zoom = argv[0], None
    i = 2
    while i < len(argv):
        if argv[i] == "--title":
            title = argv[i + 1]
        elif argv[i] == "--zoom":
            a, n = argv[i + 1].split(",")
            zoom = (float(a), float(a) + float(n))
        i += 2
    rows, counters = load(argv[0])
    end = max((b + d for r in rows.values() for b, d, _ in r), default=1.0)
    npanel = 2 if zoom else 1
    fig, axes = plt.subplots(2 * npanel, 1, figsize=(14, 4.8 * npanel),
                             gridspec_kw={"height_ratios": [3, 1] * npanel})
    panel(axes[0], axes[1], rows, counters, 0.0, end)
    axes[0].set_title(title, fontsize=10)
    if zoom:
        panel(axes[2], axes[3], rows, counters, zoom[0], zoom[1])
        axes[2].set_title("zoom: cycles %.0f-%.0f" % zoom, fontsize=9)
    handles = [matplotlib.patches.Patch(color=c, label=k) for k, c in COLORS.items()]
    fig.legend(handles=handles, loc="upper right", fontsize=7, ncol=len(handles))
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(argv[1], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
