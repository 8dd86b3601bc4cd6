"""Design-space exploration from Python: tessera.dse.sweep(space) runs the DSE engine of the source
tree (scripts/dse/dse.py sweep: the same space files, cache, engines and Pareto front) and returns its
points as rows; .plot_pareto() draws throughput against area (or MACs/cycle without synthesis).

    s = tessera.dse.sweep("scripts/dse/spaces/tiny-small.json", jobs=2)
    s.front                    # the Pareto points
    s.plot_pareto()            # matplotlib Axes
    s.to_dataframe()           # with pandas"""
import json
import os
import subprocess
import sys
import tempfile

from ._base import Error, _arg, lib

__all__ = ["sweep", "Sweep"]


def _paths(cli):
    """The source tree (its scripts/dse) and the tessera CLI this package was built with."""
    try:
        from . import _build
        root, built_cli = _build.SOURCE, _build.CLI
    except ImportError:
        root, built_cli = "", ""
    root = os.environ.get("TESSERA_ROOT") or root
    script = os.path.join(root, "scripts", "dse", "dse.py")
    if not os.path.isfile(script):
        raise Error("dse: no DSE engine at %s (the Tessera source tree: set TESSERA_ROOT)" % script, lib.TSR_EINVAL)
    cli = cli or os.environ.get("TESSERA_CLI") or built_cli
    if not cli or not os.path.isfile(cli):
        raise Error("dse: no tessera CLI (%s): give cli= or set TESSERA_CLI" % (cli or "none known"), lib.TSR_EINVAL)
    return script, cli


class Sweep(list):
    """The sweep's points (results.json "points"): dicts with id, overrides, config, macs_per_cycle,
    clock_mhz, status, cycles, throughput (workload runs per second), pareto, and the area when
    synthesized (LUT, FF, BRAM36, DSP, fits). .space, .out (its output directory), .log (what the
    engine printed)."""

    def __init__(self, doc, out, log):
        super().__init__(doc.get("points", []))
        self.doc, self.space, self.out, self.log = doc, doc.get("space"), out, log
        self.synth = doc.get("synth", "none")

    @property
    def front(self):
        """The points on the Pareto front (the engine's objectives), by throughput."""
        return sorted((r for r in self if r.get("pareto")), key=lambda r: r["throughput"])

    def to_dataframe(self):
        import pandas
        return pandas.DataFrame(list(self))

    def plot_pareto(self, x=None, ax=None):
        """Throughput against x (default: LUT with synthesis, else macs_per_cycle): every complete point,
        the front marked and its 2-D staircase. Returns the Axes."""
        if x is None:
            x = "LUT" if any("LUT" in r for r in self) else "macs_per_cycle"
        ok = [r for r in self if r.get("status") == "ok" and x in r]
        if not ok:
            raise _arg("x", "no complete point has %r" % (x,))
        if ax is None:
            import matplotlib.pyplot as plt
            _, ax = plt.subplots(figsize=(6, 4))
        ax.scatter([r[x] for r in ok], [r["throughput"] for r in ok], s=18, c="#9aa7b8", label="design point")
        fr = [r for r in ok if r.get("pareto")]
        ax.scatter([r[x] for r in fr], [r["throughput"] for r in fr], s=30, c="#d1495b", label="Pareto front")
        stair, best = [], -1.0
        for r in sorted(ok, key=lambda r: (r[x], -r["throughput"])):
            if r["throughput"] > best:
                stair.append(r)
                best = r["throughput"]
        ax.step([r[x] for r in stair], [r["throughput"] for r in stair], where="post", c="#d1495b", lw=1)
        ax.set_xlabel(x)
        ax.set_ylabel("throughput (workload runs/s)")
        ax.set_title("%s: %d points, %d on the front" % (self.space, len(ok), len(fr)))
        ax.legend(fontsize=8)
        return ax

    def __repr__(self):
        return "<tessera.dse.Sweep %s: %d points, %d on the front>" % (self.space, len(self), len(self.front))


def _absolute(space):
    """A space dict with its file paths (base when a file, workload model/input/reference) made absolute
    from the current directory: the engine resolves them next to the space file, written elsewhere."""
    sp = dict(space)
    if isinstance(sp.get("base"), str) and os.path.isfile(sp["base"]):
        sp["base"] = os.path.abspath(sp["base"])
    if isinstance(sp.get("workload"), dict):
        w = sp["workload"] = dict(sp["workload"])
        for k in ("model", "input", "reference"):
            if isinstance(w.get(k), str):
                w[k] = os.path.abspath(w[k])
    return sp


def sweep(space, *, jobs=1, out=None, cache=None, cli=None, synth=None, timeout=None):
    """Run a sweep (dse.py sweep SPACE --no-plot) and return its points (Sweep). space: a space file
    path, or the space as a dict (its relative file paths are then relative to the current directory).
    out: the output directory (default: a temporary one, removed); cache: the result cache (default
    the engine's, $TESSERA_DSE_CACHE or build/dse-cache); synth: override the space's mode. Raises
    tessera.Error with the engine's one-line message when it refuses the space."""
    script, cli = _paths(cli)
    if not isinstance(jobs, int) or isinstance(jobs, bool) or not 1 <= jobs <= 1024:
        raise _arg("jobs", "needs an int in 1..1024")
    if synth is not None and synth not in ("none", "estimate", "full"):
        raise _arg("synth", "none, estimate or full, not %r" % (synth,))
    with tempfile.TemporaryDirectory(prefix="tessera-dse-") as tmp:
        if isinstance(space, dict):
            path = os.path.join(tmp, "space.json")
            try:
                with open(path, "w") as f:
                    json.dump(_absolute(space), f)
            except (TypeError, ValueError) as e:
                raise _arg("space", "not JSON-serialisable: %s" % e) from None
        elif isinstance(space, (str, os.PathLike)):
            path = os.fspath(space)
            if not os.path.isfile(path):
                raise _arg("space", "%s: no such file" % path)
        else:
            raise _arg("space", "needs a space file path or a dict, not %s" % type(space).__name__)
        outdir = os.path.abspath(out) if out else os.path.join(tmp, "out")
        # the engine runs under Debian's interpreter (its matplotlib), as its own docs say
        py = "/usr/bin/python3" if os.path.isfile("/usr/bin/python3") else sys.executable
        cmd = [py, script, "sweep", path, "-j", str(jobs), "--out", outdir, "--cli", cli, "--no-plot"]
        if cache:
            cmd += ["--cache", os.fspath(cache)]
        if synth:
            cmd += ["--synth", synth]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Error("dse: the sweep took more than %s s" % timeout, lib.TSR_ETIMEOUT) from None
        res = os.path.join(outdir, "results.json")
        # exit 1: some points are missing (listed in the rows' status); 2: the space was refused
        if r.returncode not in (0, 1) or not os.path.isfile(res):
            msg = (r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or ["exit %d" % r.returncode])[-1]
            raise Error(msg if msg.startswith("dse") else "dse: " + msg, lib.TSR_EINVAL)
        with open(res) as f:
            doc = json.load(f)
        return Sweep(doc, outdir if out else None, r.stdout)
