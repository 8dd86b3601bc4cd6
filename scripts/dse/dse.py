#!/usr/bin/python3
# tessera design-space exploration: sweep hardware configs from a space file,
# measure each point's workload cycles (SystemC timed model, timing-only, by default) and
# area (yosys synth_xilinx via scripts/synth.sh), cache every result by
# content, and report the table, the Pareto front, board fits and plots.
#
#   dse.py check SPACE                         check the space, list its points
#   dse.py sweep SPACE [--engine local|slurm] [-j N] [--out DIR] [--rtl-check K] [--full-check K]
#   dse.py point CONTEXT INDEX                 one point (what the engines run)
#   dse.py area-check CONFIG[=RESULT] ...      the area estimate vs full synthesis
#
# Uses /usr/bin/python3 (Debian's matplotlib); nothing outside the standard
# library otherwise.
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tsrdse import boards, engines, evaluate, report, safeio, space  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_JOBS = 1024  # -j and --rtl-check


def log(msg):
    print(msg, flush=True)


class UsageError(Exception):
    """A bad argument or input file: one line, exit 2 (the guard at the bottom)."""


def die(msg):
    raise UsageError(msg)


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (its default prints the usage first)."""

    def error(self, message):
        self.exit(2, safeio.clip(f"{self.prog}: {message} (--help for usage)") + "\n")


def find_cli(arg):
    # a binary named by --cli or $TESSERA_CLI must be that binary: falling back to another
    # one would measure something else than what was asked for
    for given, what in ((arg, "--cli"), (os.environ.get("TESSERA_CLI"), "$TESSERA_CLI")):
        if given:
            if not os.path.exists(given):
                die(f"{what} {given}: no such file")
            if not os.path.isfile(given):
                die(f"{what} {given}: not a regular file")
            if not os.access(given, os.X_OK):
                die(f"{what} {given}: not executable")
            return os.path.abspath(given)
    for c in (os.path.join(ROOT, "build", "tessera"), shutil.which("tessera")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    die("no tessera binary: build it (cmake --build build) or give --cli PATH")


def make_context(sp, cli, cache):
    pts = []
    for n, (ov, cfg) in enumerate(sp.points):
        show = space.config_show(cli, cfg, "point")
        pts.append({"id": f"p{n:03d}", "overrides": ov, "config": cfg, "macs": show["macs"],
                    "clock_mhz": show["clock_mhz"], "sram_kib": sum(show["buffers"].values()) / 1024,
                    # block RAM data bits of the buffers at full use (32 Kbit per BRAM36): a floor
                    "bram36_floor": -(-sum(show["buffers"].values()) // 4096)})
    return {"space": sp.name, "root": ROOT, "cli": cli, "cache": os.path.abspath(cache),
            "workload": sp.workload, "dram": sp.dram, "backend": sp.backend, "synth": sp.synth, "host": sp.host,
            "fingerprints": evaluate.fingerprints(ROOT, cli), "points": pts}


def cmd_check(a):
    cli = find_cli(a.cli)
    sp = space.load(a.space, ROOT, cli)
    log(f"space {sp.name}: {len(sp.points)} legal points, {len(sp.illegal)} illegal; workload "
        f"{space.workload_label(sp.workload)}; backend {sp.backend}; DRAM {sp.dram['bytes_per_cycle']} B/cycle; boards "
        f"{', '.join(b['name'] for b in sp.boards) or '-'}")
    for n, (ov, _) in enumerate(sp.points):
        log(f"  p{n:03d} " + " ".join(f"{k}={v}" for k, v in ov.items()))
    for ov, err in sp.illegal:
        log("  illegal " + " ".join(f"{k}={v}" for k, v in ov.items()) + f": {err}")


def cmd_point(a):
    # the sweep's own file, but a user may name any: bounded, and its shape checked
    text = safeio.read_text(a.context, "sweep context", safeio.MAX_CONTEXT_BYTES)
    ctx = safeio.load_json(text, a.context, "sweep context")
    need = ("points", "cli", "cache", "workload", "dram", "backend", "synth", "fingerprints")
    if not isinstance(ctx, dict) or any(k not in ctx for k in need) or not isinstance(ctx["points"], list):
        die(f"{a.context}: not a sweep context (the context.json `dse.py sweep` writes)")
    if not 0 <= a.index < len(ctx["points"]):
        die(f"point: index {a.index} out of range (0..{len(ctx['points']) - 1})")
    parts = (a.only,) if a.only else ("cycles", "synth")
    try:
        r = evaluate.evaluate(ctx, a.index, backend=a.backend, log=log, parts=parts)
    except (KeyError, TypeError, AttributeError) as e:
        die(f"{a.context}: not a sweep context (the context.json `dse.py sweep` writes): "
            f"{type(e).__name__} {safeio.show(str(e))}")
    bad = [k for k, v in r.items() if v is not None and "error" in v]
    sys.exit(1 if bad else 0)


def check_points(rows, k):
    """Up to k points spread across the front (then the other complete points, fastest first)."""
    front = sorted((i for i, r in enumerate(rows) if r.get("pareto")), key=lambda i: rows[i]["throughput"])
    if len(front) < k:  # too few on the front: the other complete points, fastest first
        rest = sorted((i for i, r in enumerate(rows) if r["status"] == "ok" and i not in front),
                      key=lambda i: -rows[i]["throughput"])
        front = sorted(front + rest[:k - len(front)], key=lambda i: rows[i]["throughput"])
    if len(front) > k:
        front = [front[round(j * (len(front) - 1) / (k - 1))] for j in range(k)] if k > 1 else front[:1]
    return front


def full_check(ctx, rows, k, log):
    """The timing-only sweep's cycles of up to k points against the full SystemC model's (data
    computed): they must be the same cycle for cycle (the mode skips the data, no cycle)."""
    out = []
    for i in check_points(rows, k):
        r = evaluate.evaluate(ctx, i, backend="systemc", log=log, parts=("cycles",))["cycles"]
        if "error" in r:
            log(f"full check {rows[i]['id']}: {r['error']}")
            out.append({"id": rows[i]["id"], "error": r["error"]})
            continue
        out.append({"id": rows[i]["id"], "sweep_cycles": rows[i]["cycles"], "full_cycles": r["cycles"],
                    "same": rows[i]["cycles"] == r["cycles"], "full_wall_s": r["wall_s"],
                    "sweep_wall_s": rows[i]["cycles_wall_s"]})
        log(f"full check {rows[i]['id']}: {ctx['backend']} {rows[i]['cycles']} vs systemc {r['cycles']} cycles: "
            f"{'same' if rows[i]['cycles'] == r['cycles'] else 'DIFFERENT'} (systemc {r['wall_s']:.1f} s, "
            f"{ctx['backend']} {rows[i]['cycles_wall_s']:.1f} s)")
    return out


def rtl_check(ctx, ctx_path, rows, k, log):
    """Cycles of up to k points spread across the front on the RTL backend vs the sweep's."""
    out = []
    for i in check_points(rows, k):
        t0 = time.monotonic()
        r = evaluate.evaluate(ctx, i, backend="rtl", log=log)["cycles"]
        if "error" in r:
            log(f"rtl check {rows[i]['id']}: {r['error']}")
            continue
        err = (rows[i]["cycles"] - r["cycles"]) / r["cycles"]
        out.append({"id": rows[i]["id"], "sweep_cycles": rows[i]["cycles"], "rtl_cycles": r["cycles"],
                    "error": err, "rtl_wall_s": r["wall_s"], "sweep_wall_s": rows[i]["cycles_wall_s"]})
        log(f"rtl check {rows[i]['id']}: {ctx['backend']} {rows[i]['cycles']} vs rtl {r['cycles']} cycles: "
            f"error {100 * err:+.2f}% (rtl {r['wall_s']:.0f} s, {ctx['backend']} {rows[i]['cycles_wall_s']:.1f} s"
            f"{'' if time.monotonic() - t0 > 1 else ', cached'})")
    return out


AREA_CLASSES = ("LUT", "FF", "BRAM36", "DSP")


def area_errors(est, full):
    """Relative error of the estimate per resource class (board classes: LUT incl. LUT RAM)."""
    e, f = boards.area_classes(est), boards.area_classes(full)
    return {k: (e[k] - f[k]) / f[k] if f[k] else (0.0 if e[k] == 0 else float("inf")) for k in AREA_CLASSES}


def _fmt_area(a):
    c = boards.area_classes(a)
    return f"LUT {c['LUT']} FF {c['FF']} BRAM36 {c['BRAM36']:g} DSP {c['DSP']}"


def cmd_area_check(a):
    """Each config's area from the estimate and from the full synthesis (both cached; the full
    one may be given as a scripts/synth.sh result file), and the estimate's error per class."""
    cli = find_cli(a.cli)
    cache = a.cache or os.environ.get("TESSERA_DSE_CACHE") or os.path.join(ROOT, "build", "dse-cache")
    base = {"root": ROOT, "cli": cli, "cache": os.path.abspath(cache),
            "fingerprints": evaluate.fingerprints(ROOT, cli)}
    out, worst = [], {k: 0.0 for k in AREA_CLASSES}
    for arg in a.configs:
        name, _, ref = arg.partition("=")
        cfg = space.load_config(ROOT, name)
        if isinstance(cfg, str):
            die(f"area-check: {cfg}")
        err = space.check_config(cli, cfg, name)
        if err:
            die(f"area-check: {name}: {err}")
        ctx = dict(base, points=[{"id": name, "config": cfg}])
        res = {}
        for mode in ("estimate", "full"):
            c = dict(ctx, synth=mode)
            if mode == "full" and ref:
                try:
                    res[mode] = evaluate.parse_area(safeio.read_text(ref, "synthesis result"))
                except safeio.InputError as e:
                    die(f"area-check: {ref}: not a scripts/synth.sh result: {e.reason}")
                except RuntimeError as e:
                    die(f"area-check: {ref}: not a scripts/synth.sh result: {e}")
                res[mode]["from"] = ref
                continue
            with tempfile.TemporaryDirectory(prefix="dse-area-") as wd:
                ent = evaluate.cache_get(c, "synth", evaluate.synth_key(c, cfg))
                if ent is None:
                    log(f"{name}: {mode} synthesis ...")
                    try:
                        ent = evaluate.run_synth(c, cfg, wd)
                    except RuntimeError as e:
                        sys.exit(safeio.clip(f"dse area-check: {name}: {e}"))
                    evaluate.cache_put(c, "synth", evaluate.synth_key(c, cfg), ent)
            res[mode] = ent
        errs = area_errors(res["estimate"], res["full"])
        for k in AREA_CLASSES:
            worst[k] = max(worst[k], abs(errs[k]))
        log(f"{name}: estimate {_fmt_area(res['estimate'])} ({res['estimate'].get('yosys_s', '-')} s); full "
            f"{_fmt_area(res['full'])} ({res['full'].get('yosys_s', '-')} s"
            + (f", from {ref}" if ref else "") + "); error "
            + ", ".join(f"{k} {100 * errs[k]:+.1f}%" for k in AREA_CLASSES))
        out.append({"config": name, "estimate": res["estimate"], "full": res["full"], "error": errs})
    log("largest |error|: " + ", ".join(f"{k} {100 * worst[k]:.1f}%" for k in AREA_CLASSES))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


def parse_host_table(out):
    """The rows of `tessera infer`'s host table: {"kernel/op": (elements, ms)} (fixed columns:
    the kernel in 26 characters, the ONNX op in 22, then ops, elements, ms, ns/elem)."""
    rows, on = {}, False
    for line in out.splitlines():
        if line.startswith("host operators:"):
            on = True
            continue
        if not on or not line.startswith("  ") or line.strip().startswith("host kernel"):
            on = on and line.startswith("  ")
            continue
        kernel, op, rest = line[2:28].strip(), line[29:51].strip(), line[51:].split()
        if len(rest) == 4:
            rows[f"{kernel}/{op}"] = (int(rest[1]), float(rest[2]))
    return rows


def cmd_host_calibrate(a):
    """ns per element of each (host kernel, ONNX op) on this machine: the minimum over --runs runs of
    each model (`tessera infer ... --backend fsim`) of the host table's ms / elements; the table
    tsrdse/hostmodel.py's NS_PER_ELEMENT is made from (a run's other work shares the machine, so
    the minimum is the kernel's own time)."""
    cli = find_cli(a.cli)
    if not 1 <= a.runs <= 100:
        die(f"host-calibrate: --runs {a.runs}: give 1..100")
    pairs = []
    for m in a.models:
        model, sep, inp = m.partition("=")
        if not sep or not model or not inp:
            die(f"host-calibrate: {safeio.show(m)}: give MODEL.onnx=INPUT.npy")
        for f in (model, inp):
            if not os.path.isfile(f):
                die(f"host-calibrate: {safeio.show(f)}: no such file")
        pairs.append((model, inp))
    # page faults of the run-time buffers in prepare (calloc touches them), not in the first host op
    env = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.perturb=1")
    best = {}
    for model, inp in pairs:
        for _ in range(a.runs):
            cmd = [cli, "infer", model, "-i", inp, "--backend", "fsim"] + (["--config", a.config] if a.config else [])
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if p.returncode != 0:
                sys.exit(safeio.clip(f"dse host-calibrate: {os.path.basename(model)}: "
                                     f"{(p.stderr.strip().splitlines() or ['failed'])[-1]}"))
            for k, (el, ms) in parse_host_table(p.stdout).items():
                if el > 0:
                    best[k] = min(best.get(k, float("inf")), 1e6 * ms / el)
    for k in sorted(best):
        log(f"  {json.dumps(k)}: {best[k]:.2f},")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({k: round(v, 3) for k, v in sorted(best.items())}, f, indent=1)


def cmd_sweep(a):
    cli = find_cli(a.cli)
    sp = space.load(a.space, ROOT, cli)
    if a.synth:
        sp.synth = a.synth
    if a.full_check and sp.backend != "systemc-timing":
        die(f"--full-check compares a systemc-timing sweep with the full model; this space's backend is "
            f"{sp.backend}")
    out = os.path.abspath(a.out or os.path.join("dse-out", sp.name))
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        die(f"--out {out}: cannot make the directory: {e.strerror}")
    cache = a.cache or os.environ.get("TESSERA_DSE_CACHE") or os.path.join(ROOT, "build", "dse-cache")
    ctx = make_context(sp, cli, cache)
    ctx_path = os.path.join(out, "context.json")
    with open(ctx_path, "w") as f:
        json.dump(ctx, f, indent=1)
    todo = engines.pending(ctx)
    log(f"dse: space {sp.name}: {len(ctx['points'])} points ({len(sp.illegal)} illegal skipped), "
        f"{len(ctx['points']) - len(todo)} cached, {len(todo)} to run on {a.engine} (-j {a.jobs}); "
        f"workload {space.workload_label(sp.workload)} on {sp.backend}, synthesis {sp.synth}; out {out}")
    t0 = time.monotonic()
    if todo and a.report_only:
        log(f"dse: --report-only: {len(todo)} points not (fully) computed are reported as missing")
        todo = []
    if todo:
        if a.engine == "local":
            engines.run_local(ctx, ctx_path, todo, a.jobs, log)
        else:
            try:
                engines.run_slurm(ctx, ctx_path, todo, a.jobs, log)
            except RuntimeError as e:
                sys.exit(safeio.clip(f"dse: {e}"))
    wall = time.monotonic() - t0
    results = [evaluate.lookup(ctx, i) for i in range(len(ctx["points"]))]
    rows = report.build_rows(ctx, results, sp.boards, sp.budget)
    report.write(out, ctx, rows, sp.boards)
    report.summary(ctx, rows, sp.boards, sp.illegal, log)
    if a.rtl_check:
        checks = rtl_check(ctx, ctx_path, rows, a.rtl_check, log)
        with open(os.path.join(out, "rtl_check.json"), "w") as f:
            json.dump(checks, f, indent=1)
        if checks:
            worst = max(abs(c["error"]) for c in checks)
            log(f"rtl check: {len(checks)} points, largest |error| {100 * worst:.2f}%")
    full_bad = False
    if a.full_check:
        checks = full_check(ctx, rows, a.full_check, log)
        with open(os.path.join(out, "full_check.json"), "w") as f:
            json.dump(checks, f, indent=1)
        full_bad = any(not c.get("same") for c in checks)
        log(f"full check: {len(checks)} points, " + (
            "cycles differ or a run failed on " + ", ".join(c["id"] for c in checks if not c.get("same"))
            if full_bad else "the same cycles on every one"))
    if not a.no_plot:
        paths = report.plot(out, ctx, rows, sp.boards)
        if paths:
            log("plots: " + ", ".join(paths))
    cw = [r["cycles_wall_s"] for r in rows if "cycles_wall_s" in r]
    # yosys's own seconds where synth.sh reports them (also when it answered from its cache)
    sw = [r.get("synth_yosys_s") or r["synth_wall_s"] for r in rows if "synth_wall_s" in r]

    def stats(xs):
        return f"{sum(xs) / len(xs):.1f} s mean ({min(xs):.0f}-{max(xs):.0f})" if xs else "-"
    log(f"cost: this run {wall:.1f} s wall for {len(todo)} points; per point (when computed) cycles "
        f"{stats(cw)}, synthesis ({ctx['synth']}) {stats(sw)}")
    log(f"results: {out}/results.csv, {out}/results.json")
    missing = [r for r in rows if r["status"] != "ok"]
    sys.exit(1 if missing or full_bad else 0)


def main():
    ap = Parser(prog="dse.py", description="tessera design-space exploration")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="check a space file and list its points")
    c.add_argument("space")
    c.add_argument("--cli", help="the tessera binary (default build/tessera)")
    c.set_defaults(fn=cmd_check)
    s = sub.add_parser("sweep", help="run a sweep")
    s.add_argument("space")
    s.add_argument("--engine", choices=("local", "slurm"), default="local")
    s.add_argument("-j", "--jobs", type=int, default=None,
                   help="local: worker processes (default 1); slurm: most array tasks at once "
                        "(default 0 = no limit)")
    s.add_argument("--out", help="output directory (default dse-out/NAME)")
    s.add_argument("--cache", help="result cache (default $TESSERA_DSE_CACHE or build/dse-cache)")
    s.add_argument("--cli", help="the tessera binary (default build/tessera)")
    s.add_argument("--rtl-check", type=int, default=0, metavar="K",
                   help="afterwards run K points across the Pareto front on the RTL backend")
    s.add_argument("--full-check", type=int, default=0, metavar="K",
                   help="afterwards run K points across the Pareto front on the full SystemC model (data "
                        "computed): a systemc-timing sweep must have its cycles exactly (exit 1 if not)")
    s.add_argument("--no-plot", action="store_true")
    s.add_argument("--report-only", action="store_true",
                   help="compute nothing: the table, front and plots of what the cache holds")
    s.add_argument("--synth", choices=space.SYNTH_MODES, help="override the space's synthesis mode")
    s.set_defaults(fn=cmd_sweep)
    p = sub.add_parser("point", help="evaluate one point of a sweep context (run by the engines)")
    p.add_argument("context")
    p.add_argument("index", type=int)
    p.add_argument("--backend", help="override the context's backend (e.g. rtl for a check)")
    p.add_argument("--only", choices=("cycles", "synth"), help="one part of the point")
    p.set_defaults(fn=cmd_point)
    v = sub.add_parser("area-check", help="the area estimate against full synthesis, per config")
    v.add_argument("configs", nargs="+", metavar="CONFIG[=RESULT]",
                   help="a preset or config file; =RESULT: the full synthesis's scripts/synth.sh output "
                        "(instead of running it)")
    v.add_argument("--cache", help="result cache (default $TESSERA_DSE_CACHE or build/dse-cache)")
    v.add_argument("--cli", help="the tessera binary (default build/tessera)")
    v.add_argument("--json", help="also write the figures to this JSON file")
    v.set_defaults(fn=cmd_area_check)
    h = sub.add_parser("host-calibrate", help="measure the host kernels' ns per element on this machine")
    h.add_argument("models", nargs="+", metavar="MODEL.onnx=INPUT.npy")
    h.add_argument("--runs", type=int, default=5, help="runs per model; the minimum per row counts (default 5)")
    h.add_argument("--config", help="config (default: the default preset)")
    h.add_argument("--cli", help="the tessera binary (default build/tessera)")
    h.add_argument("--json", help="also write the table to this JSON file")
    h.set_defaults(fn=cmd_host_calibrate)
    a = ap.parse_args()
    if getattr(a, "cmd", "") == "sweep" and a.jobs is None:
        a.jobs = 1 if a.engine == "local" else 0
    if getattr(a, "jobs", 1) < 0 or (getattr(a, "engine", "") == "local" and a.jobs < 1):
        ap.error("-j needs a positive number (slurm: 0 = no limit)")
    # (local: one process per job at once; more than this is a typo, not a machine)
    if getattr(a, "jobs", 1) > MAX_JOBS:
        ap.error(f"-j {a.jobs}: at most {MAX_JOBS}")
    if not 0 <= getattr(a, "rtl_check", 0) <= MAX_JOBS:
        ap.error(f"--rtl-check {a.rtl_check}: give 0..{MAX_JOBS} points")
    if not 0 <= getattr(a, "full_check", 0) <= MAX_JOBS:
        ap.error(f"--full-check {a.full_check}: give 0..{MAX_JOBS} points")
    a.fn(a)


if __name__ == "__main__":
    # bad input: one line, exit 2; Ctrl-C: one line; a bug: one line with its type, exit 1
    safeio.guard("dse", main, (space.SpaceError, UsageError))
