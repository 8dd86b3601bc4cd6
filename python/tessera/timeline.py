"""Run timelines: the Perfetto/Chrome trace-event JSON the rtl and systemc backends write
(sim/tsr_timeline.h, the CLI's --timeline FILE.json), read back for a notebook: the runs, the
stage lanes, and a matplotlib Gantt of them. Model.timeline() makes one."""
import json
import os

from ._base import Error, lib

# Lanes drawn by default, top to bottom (the writer's thread names).
GANTT_LANES = ("runs", "fetch", "load", "compute", "store", "gemm pipe", "alu pipe")
MAX_BYTES = 1 << 30  # a timeline is at most 256 MiB by default (TSR_TL_DEFAULT_MAX); refuse absurd files


class Timeline:
    """A timeline file read back. .path, .data (the JSON document), .lanes {name: [(start, duration,
    label)]} in cycles (1 ns = 1 cycle in the file), .runs (one dict per device run: name, start, cycles,
    instructions, layer when known). open .path in ui.perfetto.dev for the full view."""

    def __init__(self, path, layers=None):
        try:
            size = os.path.getsize(path)
            if size > MAX_BYTES:
                raise Error("%s: %d bytes, more than a timeline holds" % (path, size), lib.TSR_EINVAL)
            with open(path, encoding="utf-8") as f:
                self.data = json.load(f)
        except OSError as e:
            raise Error("%s: %s" % (path, e.strerror or e), lib.TSR_EIO) from None
        except ValueError as e:
            raise Error("%s: not a timeline (JSON: %s)" % (path, e), lib.TSR_EPARSE) from None
        if not isinstance(self.data, dict) or not isinstance(self.data.get("traceEvents"), list):
            raise Error("%s: not a timeline (no traceEvents)" % path, lib.TSR_EPARSE)
        self.path = str(path)
        names = {}
        for e in self.data["traceEvents"]:
            if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "thread_name":
                names[e.get("tid")] = str(e.get("args", {}).get("name", e.get("tid")))
        self.lanes = {}
        self.runs = []
        for e in self.data["traceEvents"]:
            if not isinstance(e, dict) or e.get("ph") != "X":
                continue
            lane = names.get(e.get("tid"), str(e.get("tid")))
            # microseconds in the file with 1 ns = 1 cycle: cycles = ts * 1000
            start, dur = float(e.get("ts", 0)) * 1000, float(e.get("dur", 0)) * 1000
            self.lanes.setdefault(lane, []).append((start, dur, str(e.get("name", ""))))
            if lane == "runs":
                a = e.get("args", {})
                self.runs.append({"name": e.get("name"), "start": round(start), "cycles": a.get("cycles"),
                                  "instructions": a.get("instructions")})
        if layers and len(layers) == len(self.runs):  # one submission per layer: name the runs
            for r, name in zip(self.runs, layers):
                r["layer"] = name

    @property
    def cycles(self):
        """Device cycles of all runs together."""
        return sum(r["cycles"] or 0 for r in self.runs)

    def plot(self, ax=None, lanes=GANTT_LANES, max_slices=200000):
        """A Gantt chart of the lanes (one row each, a bar per slice; at most max_slices bars per lane);
        run bars are labelled with their layer when known. Returns the Axes."""
        if ax is None:
            import matplotlib.pyplot as plt
            _, ax = plt.subplots(figsize=(10, 0.45 * len(lanes) + 1.2))
        shown = [n for n in lanes if n in self.lanes]
        colors = {"runs": "#2e4057", "fetch": "#9aa7b8", "load": "#00798c", "compute": "#d1495b", "store": "#edae49",
                  "gemm pipe": "#66a182", "alu pipe": "#8d96a3"}
        for row, name in enumerate(shown):
            bars = [(s, d) for s, d, _ in self.lanes[name][:max_slices]]
            ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colors.get(name, "#555555"), label=name)
        for r in self.runs:
            if "layer" in r and "runs" in shown:
                ax.text(r["start"], shown.index("runs"), " " + str(r["layer"])[:20], va="center", fontsize=6,
                        color="white", clip_on=True)
        ax.set_yticks(range(len(shown)))
        ax.set_yticklabels(shown)
        ax.invert_yaxis()
        ax.set_xlabel("cycles")
        ax.set_title("timeline: %d runs, %d cycles" % (len(self.runs), self.cycles))
        return ax

    def __repr__(self):
        return "<tessera.Timeline %s: %d runs, %d cycles>" % (self.path, len(self.runs), self.cycles)
