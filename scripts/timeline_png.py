#!/usr/bin/env python3
"""timeline_png: render a `tessera ... --timeline FILE.json` trace as a PNG.

  timeline_png.py FILE.json OUT.png [--title T] [--zoom START,CYCLES]

One row per lane (fetch, load, compute, store, token waits, GEMM/ALU pipes,
DRAM reads and writes: the burst lanes folded into one row each), slices
coloured by instruction kind, and the counter tracks (token queues, DRAM
bursts in flight) below. The top panel shows the whole trace; --zoom adds a
second panel over [START, START+CYCLES) cycles (1 ns = 1 cycle in the file).
Needs matplotlib (/usr/bin/python3 on the project machine).

The picture in docs/guide/simulate.md (docs/timeline_resnet18_c4.png) is made with:
  tessera bench --kind resnet18 --layers C4 --backend rtl --timeline c4.json
  /usr/bin/python3 scripts/timeline_png.py c4.json docs/timeline_resnet18_c4.png \
      --title "ResNet-18 C4 (56x56, 64->128, 1x1, stride 2) on the RTL, config default" --zoom 10000,2500
"""
import json
import os
import re
import stat
import sys

USAGE = "usage: timeline_png.py FILE.json OUT.png [--title T] [--zoom START,CYCLES] (--help for more)"
# bytes of a trace file: one ResNet-18 layer on the tiny config is ~23 MB; parsed, a trace
# takes ~10x its size in memory, so a larger one would not be drawn on a 24 GiB machine anyway
MAX_TRACE = 1 << 30


class InputError(Exception):
    """A bad argument or trace file: one line, exit 2."""

ROWS = ["fetch", "load", "compute", "store", "load token wait", "compute token wait", "store token wait",
        "gemm pipe", "alu pipe", "dram read", "dram write"]
COLORS = {"load": "#4c72b0", "gemm": "#dd8452", "alu": "#55a868", "store": "#c44e52", "finish": "#8172b3",
          "fetch": "#937860", "token": "#bbbbbb", "read": "#64b5cd", "write": "#da8bc3"}


def colour(name):
    for k, c in COLORS.items():
        if name.startswith(k):
            return c
    return "#999999"


def read_trace(path):
    """The trace's JSON: a regular file (a FIFO would block the open) of at most MAX_TRACE bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(f"{path}: cannot open the trace: {e.strerror}")
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else
                    "a directory" if stat.S_ISDIR(st.st_mode) else "a special file")
            raise InputError(f"{path}: the trace is {kind}, not a regular file")
        data = f.read(MAX_TRACE + 1)
        if len(data) > MAX_TRACE:
            raise InputError(f"{path}: the trace is more than {MAX_TRACE} bytes")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:
        raise InputError(f"{path}: not a timeline (a `tessera ... --timeline` JSON file): {str(e)[:100]}")


def load(path):
    try:
        ev = read_trace(path)["traceEvents"]
        names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
        return lanes(ev, names)
    except (KeyError, TypeError, AttributeError, IndexError) as e:
        raise InputError(f"{path}: not a timeline (a `tessera ... --timeline` JSON file): "
                         f"{type(e).__name__} {str(e)[:60]}")


def lanes(ev, names):
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


def parse_args(argv):
    if argv[:1] in (["--help"], ["-h"]):
        print(__doc__)
        sys.exit(0)
    if len(argv) < 2 or argv[0].startswith("--") or argv[1].startswith("--"):
        raise InputError(USAGE)
    title, zoom = argv[0], None
    i = 2
    while i < len(argv):
        if argv[i] not in ("--title", "--zoom"):
            raise InputError(f"unknown option {argv[i][:60]!r}; {USAGE}")
        if i + 1 >= len(argv):
            raise InputError(f"{argv[i]} needs a value; {USAGE}")
        if argv[i] == "--title":
            title = argv[i + 1]
        else:
            m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*,\s*(\d+(?:\.\d*)?)\s*", argv[i + 1])
            if not m or float(m.group(2)) <= 0:
                raise InputError(f"--zoom {argv[i + 1][:60]!r}: give START,CYCLES (numbers, CYCLES > 0)")
            zoom = (float(m.group(1)), float(m.group(1)) + float(m.group(2)))
        i += 2
    return argv[0], argv[1], title, zoom


def main(argv):
    path, out, title, zoom = parse_args(argv)
    rows, counters = load(path)
    import matplotlib  # after the arguments: a bad one fails fast
    matplotlib.use("Agg")
    import matplotlib.patches  # noqa: F401
    import matplotlib.pyplot as plt
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
    try:
        fig.savefig(out, dpi=110)
    except (OSError, ValueError) as e:  # an unwritable path, an unknown extension
        raise InputError(f"{out}: cannot write the picture: {str(e)[:200]}")
    return 0


def guard(prog, fn):
    """Bad input: one line, exit 2; Ctrl-C: one line; anything else is a bug: one line, exit 1."""
    def line(msg):
        return re.sub(r"[\x00-\x1f\x7f]", "?", msg)[:1000]
    try:
        return fn()
    except InputError as e:
        sys.stderr.write(line(f"{prog}: {e}") + "\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(f"{prog}: interrupted\n")
        return 130
    except Exception as e:  # noqa: BLE001 (the last line of defence: one line, not a traceback)
        sys.stderr.write(line(f"{prog}: internal error ({type(e).__name__}: {e}); please report it") + "\n")
        return 1


if __name__ == "__main__":
    sys.exit(guard("timeline_png", lambda: main(sys.argv[1:])))
