"""Per-layer reports as rows: Model.report and Graph.report (a list of dicts with a table for
notebooks and a roofline plot). The rows come from the library (onnx/tsr_onnx_report.h,
tsr_graph_layer), never from parsing the printed table."""
from ._base import ffi, lib, _s

_KCACHE = {0: "off", 1: "miss", 2: "hit", 3: "disk"}
# the columns of the HTML table, in the printed table's order (plus the full name and the node)
COLUMNS = ["segment", "index", "name", "op", "shape", "macs", "cycles", "util", "bound", "ratio", "limit", "moved",
           "compulsory", "plan_ms", "jit"]


def _int(v):
    return int(v) if float(v).is_integer() else float(v)


def _row(L, peak, extra):
    """One layer (tsr_graph_layer_t or tsr_onnx_layer_t) as a dict."""
    timed = L.cycles > 0
    r = dict(extra)
    r.update({"op": _s(L.op), "shape": _s(L.shape), "macs": _int(L.macs),
              "cycles": _int(L.cycles) if timed else None,
              "util": L.macs / (L.cycles * peak) if timed else None, "bound": float(L.bound),
              "ratio": L.bound / L.cycles if timed else None, "limit": "memory" if L.memory_bound else "compute",
              "moved": _int(L.moved), "compulsory": _int(L.compulsory), "wall_ms": float(L.wall_ms),
              "plan_ms": float(L.plan_ms), "upload_ms": float(L.upload_ms), "jit": _KCACHE.get(L.kcache)})
    return r


def onnx_rows(m):
    """The rows of an imported, prepared model (tsr_onnx_report_row)."""
    from ._base import _check
    out = []
    L = ffi.new("tsr_onnx_layer_t *")
    peak = bw = 0.0
    for i in range(lib.tsr_onnx_report_rows(m)):
        _check(lib.tsr_onnx_report_row(m, i, L))
        peak, bw = L.peak, L.dram_bw
        out.append(_row(L, peak, {"segment": L.segment, "index": L.index, "node": L.node, "name": _s(L.name),
                                  "layer": _s(L.layer)}))
        out[-1]["solo"] = bool(L.solo)
    return out, peak, bw


def graph_rows(g, cfg):
    """The rows of a planned graph (tsr_graph_layer in execution order, as tsr_graph_print_report)."""
    out = []
    for i in range(lib.tsr_graph_nnodes(g)):
        L = lib.tsr_graph_layer(g, i)
        if L == ffi.NULL or _s(L.op) in ("reshape", "concat", "fused"):
            continue
        out.append(_row(L, cfg.macs_per_op, {"segment": 0, "index": len(out), "node": lib.tsr_graph_layer_node(g, i),
                                             "name": _s(L.name), "layer": _s(L.name)}))
    return out, float(cfg.macs_per_op), lib.tsr_roofline_dram_bw(cfg, 0)


class Report(list):
    """The per-layer table of the last run: a list of dicts, one per device layer, with keys segment,
    index, node (the ONNX node index, as in Model.placement), name (in full), layer, op, shape, macs,
    cycles, util, bound, ratio, limit, moved, compulsory, wall_ms, plan_ms, upload_ms, jit (cycles, util
    and ratio are None on untimed backends). .peak (MACs per cycle) and .dram_bw (bytes per cycle) are
    the roofline the bounds use."""

    def __init__(self, rows, peak, dram_bw):
        super().__init__(rows)
        self.peak = float(peak)
        self.dram_bw = float(dram_bw)

    def to_dataframe(self):
        """The rows as a pandas DataFrame (needs Debian's python3-pandas)."""
        import pandas
        return pandas.DataFrame(list(self))

    def _repr_html_(self):
        import html
        def cell(k, v):
            if v is None:
                return "-"
            if isinstance(v, float):
                return "%.3f" % v if k in ("util", "ratio", "plan_ms") else "%.0f" % v
            return html.escape(str(v))
        head = "".join("<th>%s</th>" % c for c in COLUMNS)
        body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % cell(c, r.get(c)) for c in COLUMNS) for r in self)
        return ("<table class=\"tessera-report\"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>"
                "<p>%d layers; peak %g MACs/cycle, DRAM %g B/cycle</p>" % (head, body, len(self), self.peak,
                                                                         self.dram_bw))

    def roofline_points(self):
        """Per layer with MACs: (name, intensity in MACs per compulsory DRAM byte, MACs per cycle: achieved
        when the run has cycles, else the bound's, MACs)."""
        pts = []
        for r in self:
            if not r["macs"] or not r["compulsory"]:
                continue
            perf = r["macs"] / r["cycles"] if r["cycles"] else r["macs"] / r["bound"] if r["bound"] else 0.0
            pts.append((r["name"], r["macs"] / r["compulsory"], perf, r["macs"]))
        return pts

    def plot_roofline(self, ax=None, label_top=5):
        """The layers on the device's roofline (matplotlib; log-log): the roof min(peak, DRAM B/cycle x
        intensity), one point per layer at its achieved MACs/cycle (its bound on an untimed backend),
        the label_top layers with the most MACs named. Returns the Axes."""
        if ax is None:
            import matplotlib.pyplot as plt
            _, ax = plt.subplots(figsize=(7, 4.5))
        pts = self.roofline_points()
        xs = [p[1] for p in pts] or [1.0]
        lo, hi = min(xs + [self.peak / self.dram_bw]) / 4, max(xs + [self.peak / self.dram_bw]) * 4
        knee = self.peak / self.dram_bw
        ax.plot([lo, knee, hi], [self.dram_bw * lo, self.peak, self.peak], color="black", lw=1.5,
                label="roof: %g MACs/cycle, %g B/cycle" % (self.peak, self.dram_bw))
        timed = any(r["cycles"] for r in self)
        ax.scatter([p[1] for p in pts], [p[2] for p in pts], s=24, zorder=3,
                   label="layers (achieved)" if timed else "layers (bound: no cycles on this backend)")
        for name, x, y, _ in sorted(pts, key=lambda p: -p[3])[:label_top]:
            ax.annotate(name[:24], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("intensity (MACs per compulsory DRAM byte)")
        ax.set_ylabel("MACs per cycle")
        ax.set_title("roofline (%d layers)" % len(pts))
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(True, which="both", lw=0.3)
        return ax
