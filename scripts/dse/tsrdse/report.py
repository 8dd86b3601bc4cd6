# Results of a sweep: the table (CSV + JSON), Pareto front, fits-board marks,
# best design per board, plots (Debian's matplotlib, PNG + SVG) and a summary.
import csv
import json
import os

from . import boards as boards_mod
from . import hostmodel, pareto, space

CSV_FIELDS = ["id", "overrides", "macs_per_cycle", "sram_kib", "bram36_floor", "clock_mhz", "cycles", "throughput",
              "LUT", "FF", "BRAM36", "DSP", "pareto", "fits", "ruled_out", "cycles_wall_s", "synth_wall_s",
              "synth_yosys_s", "status"]


HOST_FIELDS = ["device_ms", "host_ms", "host_ops_ms", "round_trips_ms", "segments", "host_ops"]


def csv_fields(ctx):
    """The CSV's columns: with a host model, the host time before the throughput; with a workload
    reference, its comparison after the throughput."""
    f = list(CSV_FIELDS)
    if ctx.get("host"):
        at = f.index("throughput")
        f = f[:at] + HOST_FIELDS + f[at:]
    if ctx["workload"].get("reference"):
        at = f.index("throughput") + 1
        f = f[:at] + ["mismatches", "max_lsb"] + f[at:]
    return f


def build_rows(ctx, results, boards, budget):
    """One row per point; results[i] = evaluate.lookup() of point i."""
    rows = []
    for pt, r in zip(ctx["points"], results):
        row = {"id": pt["id"], "overrides": pt["overrides"], "config": pt["config"],
               "macs_per_cycle": pt["macs"], "clock_mhz": pt["clock_mhz"], "status": "ok",
               "sram_kib": pt.get("sram_kib"), "bram36_floor": pt.get("bram36_floor")}
        c, s = r["cycles"], r["synth"]
        if c is None or "error" in c:
            row["status"] = "cycles missing" if c is None else "cycles failed: " + c["error"]
        elif ctx["workload"].get("reference") and "mismatches" not in c:
            row["status"] = "cycles missing"  # (an entry without the comparison: not this sweep's)
        elif ctx.get("host") and "host" not in c:
            row["status"] = "cycles missing"  # (an entry without the plan's host work: not this sweep's)
        else:
            row["cycles"] = c["cycles"]
            row["cycles_wall_s"] = c["wall_s"]
            if ctx["workload"].get("reference"):
                row.update(mismatches=c["mismatches"], max_lsb=c["max_lsb"], values=c["values"])
            # inferences (workload runs) per second at the config's clock; with a host model the host
            # operators and round trips of the plan run in series with the device (tsrdse/hostmodel.py)
            dev_s = c["cycles"] / (pt["clock_mhz"] * 1e6)
            host_s = 0.0
            if ctx.get("host"):
                host_s, ops_s, trips_s = hostmodel.seconds(ctx["host"], c["host"])
                row.update(device_ms=1e3 * dev_s, host_ms=1e3 * host_s, host_ops_ms=1e3 * ops_s,
                           round_trips_ms=1e3 * trips_s, segments=c["host"]["segments"],
                           host_ops=c["host"]["host_ops"])
            row["throughput"] = ctx["workload"].get("batch", 1) / (dev_s + host_s)
        # without an area: the boards whose block RAM the buffers cannot fit even at full use
        row["ruled_out"] = [b["name"] for b in boards
                            if (row["bram36_floor"] or 0) > (boards_mod.usable(b, "BRAM36") or float("inf"))
                            or pt["clock_mhz"] > b.get("clock_mhz", pt["clock_mhz"])]
        if ctx["synth"] != "none":
            if s is None or "error" in s:
                if row["status"] == "ok":
                    row["status"] = "synth missing" if s is None else "synth failed: " + s["error"]
            else:
                a = boards_mod.area_classes(s)
                row.update(LUT=a["LUT"], FF=a["FF"], BRAM36=a["BRAM36"], DSP=a["DSP"],
                           synth_wall_s=s["wall_s"], synth_yosys_s=s.get("yosys_s"), area=s)
                # per board: fits?, the class closest to (or over) its limit, its share of the usable amount
                row["fit_marks"] = {b["name"]: boards_mod.fit(b, s, pt["clock_mhz"]) for b in boards}
                row["fits"] = [n for n, f in row["fit_marks"].items() if f[0]]
                row["in_budget"] = boards_mod.fits_budget(budget, s) if budget else True
        rows.append(row)
    done = [r for r in rows if r["status"] == "ok"]
    objs = pareto.objectives(ctx["synth"], ctx["workload"].get("reference"))
    cand = [r for r in done if r.get("in_budget", True)]
    for i in pareto.front(cand, objs):
        cand[i]["pareto"] = True
    return rows


def best_per_board(rows, boards):
    best = {}
    for b in boards:
        fit = [r for r in rows if r["status"] == "ok" and b["name"] in r.get("fits", []) and r.get("in_budget", True)]
        # equal throughput (e.g. ACT_LUT 1, 2, 4: the same cycles): the point on the front, not the first
        best[b["name"]] = max(fit, key=lambda r: (r["throughput"], bool(r.get("pareto")))) if fit else None
    return best


def _fmt_ov(ov):
    return " ".join(f"{k}={v}" for k, v in ov.items())


def write(outdir, ctx, rows, boards):
    # one column per board: "yes"/"no" and the tightest resource class with its share, e.g. "no LUT 106%"
    board_cols = [f"fit:{b['name']}" for b in boards] if ctx["synth"] != "none" else []
    with open(os.path.join(outdir, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=csv_fields(ctx) + board_cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            d = dict(r, overrides=_fmt_ov(r["overrides"]), pareto=int(bool(r.get("pareto"))),
                     fits=" ".join(r.get("fits", [])), ruled_out=" ".join(r.get("ruled_out", [])))
            for name, (ok, worst, share) in r.get("fit_marks", {}).items():
                d[f"fit:{name}"] = f"{'yes' if ok else 'no'} {worst} {100 * share:.0f}%"
            for k in ["throughput"] + HOST_FIELDS[:4]:
                if k in d:
                    d[k] = f"{d[k]:.3f}"
            w.writerow(d)
    best = best_per_board(rows, boards)
    doc = {"space": ctx["space"], "workload": ctx["workload"], "dram": ctx["dram"], "host": ctx.get("host"),
           "backend": ctx["backend"], "synth": ctx["synth"], "fingerprints": ctx["fingerprints"],
           "boards": [b["name"] for b in boards], "points": rows,
           "best_per_board": {k: (v["id"] if v else None) for k, v in best.items()}}
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    return best


def summary(ctx, rows, boards, illegal, log):
    ok = [r for r in rows if r["status"] == "ok"]
    log(f"summary: {len(ok)} of {len(rows)} points complete"
        + (f", {len(illegal)} illegal points skipped" if illegal else ""))
    for r in rows:
        if r["status"] != "ok":
            log(f"  {r['id']}: {r['status']}")
    unit = "inf/s" if ctx["workload"]["kind"] != "resnet18-layers" else "layer sets/s"
    ref = ctx["workload"].get("reference")
    if ref:
        log(f"reference {os.path.basename(ref)}: mismatches = output elements that differ from it, max_lsb = "
            f"the largest difference" + (f" in LSBs of the output's scale {ctx['workload']['output_scale']:g}"
                                         if ctx["workload"].get("output_scale") else ""))
    host = ctx.get("host")
    if host:
        log(f"host model: {host['cpu']}, {host['factor']:g}x this machine's time per element, "
            f"{host['round_trip_us']:g} us per segment, {host['ns_per_byte']:g} ns per byte in and out: "
            f"{unit} = 1 / (device time + host time)")
    hdr = (f"{'id':6} {'MAC/c':>5} {'KiB':>5} {'MHz':>4} {'cycles':>10}"
           + (f" {'host ms':>8} {'segs':>4}" if host else "") + f" {unit:>12}"
           + (f" {'mismatch':>8} {'LSB':>4}" if ref else "")
           + f" {'LUT':>7} {'DSP':>5} {'BRAM36':>6} {'floor':>5}  P  fits  overrides")
    log(hdr)
    for r in sorted(ok, key=lambda r: -r["throughput"]):
        acc = f" {r['mismatches']:8d} {r['max_lsb']:>4}" if ref else ""
        hc = f" {r['host_ms']:8.3f} {r['segments']:4d}" if host else ""
        log(f"{r['id']:6} {r['macs_per_cycle']:5d} {r['sram_kib']:5.0f} {r['clock_mhz']:4d} {r['cycles']:10d}{hc} "
            f"{r['throughput']:12.2f}{acc} {r.get('LUT', '-'):>7} {r.get('DSP', '-'):>5} "
            f"{r.get('BRAM36', '-'):>6} {r['bram36_floor']:5d}  {'*' if r.get('pareto') else ' '}  "
            f"{','.join(r.get('fits', [])) or '-'}  {_fmt_ov(r['overrides'])}")
    for name, r in best_per_board(rows, boards).items():
        if ctx["synth"] == "none":
            cand = [r for r in ok if name not in r["ruled_out"]]
            log(f"{name}: no area (synthesis off); {len(ok) - len(cand)} of {len(ok)} points ruled out by "
                f"their buffers' block RAM floor or clock" + (f"; fastest not ruled out: {max(cand, key=lambda r: r['throughput'])['id']}"
                                                         if cand else ""))
            continue
        log(f"best on {name}: " + (f"{r['id']} ({r['throughput']:.2f} {unit}, {_fmt_ov(r['overrides'])})"
                                  if r else "nothing in the sweep fits"))
    _other_boards(ctx, rows, boards, log)


def _other_boards(ctx, rows, boards, log):
    """The board presets the space does not judge by area (not listed, or a family synth_xilinx
    does not map to): whether their RAM could hold even the smallest point's buffers."""
    listed = {b["name"] for b in boards}
    need = min((r["sram_kib"] for r in rows), default=0)
    for name in boards_mod.names(ctx["root"]):
        if name in listed:
            continue
        b = boards_mod.load(ctx["root"], name)
        cap = boards_mod.ram_bits(b) / 8192
        how = ("fits nothing: its RAM holds at most " if cap < need else "not judged (not in the space's "
               "constraints.boards); its RAM holds at most ")
        log(f"{name} ({b['family']}): {how}{cap:.0f} KiB, the smallest point's buffers need {need:.0f} KiB")


def plot(outdir, ctx, rows, boards):
    """Throughput against LUT, DSP and BRAM36, the Pareto front marked, board limits dashed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r["status"] == "ok" and "LUT" in r]
    unit = "inferences/s" if ctx["workload"]["kind"] != "resnet18-layers" else "layer sets/s"
    if not ok:
        return _plot_config_axes(outdir, ctx, rows, unit, plt)
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), sharey=True)
    best_ids = {}
    for name, r in best_per_board(rows, boards).items():
        if r:
            best_ids.setdefault(r["id"], []).append(name)
    for ax, res in zip(axes, ("LUT", "DSP", "BRAM36")):
        xs = [r[res] for r in ok]
        ys = [r["throughput"] for r in ok]
        ax.scatter(xs, ys, s=18, c="#9aa7b8", label="design point")
        fr = sorted((r for r in ok if r.get("pareto")), key=lambda r: r[res])
        ax.scatter([r[res] for r in fr], [r["throughput"] for r in fr], s=30, c="#d1495b",
                   label="Pareto (all objectives)")
        # the 2-D front for this resource: a staircase
        stair, best = [], -1
        for r in sorted(ok, key=lambda r: (r[res], -r["throughput"])):
            if r["throughput"] > best:
                stair.append(r)
                best = r["throughput"]
        ax.step([r[res] for r in stair], [r["throughput"] for r in stair], where="post", c="#d1495b", lw=1)
        # the best design per board: a ring, labelled with the boards it is best on
        for rid, names in best_ids.items():
            r = next(x for x in ok if x["id"] == rid)
            ax.scatter([r[res]], [r["throughput"]], s=110, facecolors="none", edgecolors="#00798c", lw=1.2)
            ax.annotate("best: " + ", ".join(names), (r[res], r["throughput"]), textcoords="offset points",
                        xytext=(6, -10), fontsize=6, color="#00798c")
        for b in boards:
            cap = boards_mod.usable(b, res)
            if cap and cap < 4 * max(xs):
                ax.axvline(cap, ls="--", lw=0.8, c="#2e4057")
                ax.text(cap, max(ys), " " + b["name"], rotation=90, va="top", fontsize=7)
        _label_mismatches(ax, ctx, ok, res)
        ax.set_xlabel(res + (" (usable share of each board dashed)" if res == "LUT" else ""))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"throughput ({unit})")
    axes[0].legend(fontsize=7, loc="lower right")
    w = ctx["workload"]
    src = "yosys synth_xilinx" if ctx["synth"] == "full" else "the module-by-module yosys estimate (synth.sh xc7-est)"
    fig.suptitle(f"{ctx['space']}: {space.workload_label(w)} on {ctx['backend']}, DRAM {ctx['dram']['bytes_per_cycle']} B/cycle, "
                 f"area from {src}", fontsize=10)
    fig.tight_layout()
    paths = []
    for ext in ("png", "svg"):
        p = os.path.join(outdir, f"pareto.{ext}")
        fig.savefig(p, dpi=110)
        paths.append(p)
    plt.close(fig)
    return paths


def _label_mismatches(ax, ctx, ok, key):
    """With a workload reference: each point labelled with its mismatches (the accuracy objective
    has no axis of its own)."""
    if not ctx["workload"].get("reference"):
        return
    at = {}
    for r in ok:  # points at one place (e.g. a key that changes neither cycles nor this axis): one label
        at.setdefault((r[key], r["throughput"]), []).append(r)
    for xy, rs in at.items():
        ax.annotate(" / ".join(f"{r['id']} {r['mismatches']}" for r in rs) + " mismatches", xy,
                    textcoords="offset points", xytext=(4, 4), fontsize=6, color="#6b4c9a")


def _plot_config_axes(outdir, ctx, rows, unit, plt):
    """Without synthesis results: throughput against the config's own cost measures (MACs
    per cycle, on-chip buffer KiB), the points of equal MACs/cycle joined; says so."""
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    macs = sorted({r["macs_per_cycle"] for r in ok})
    colors = ["#2e4057", "#d1495b", "#00798c", "#edae49", "#66a182", "#8d96a3"]
    for ax, key, label in ((axes[0], "macs_per_cycle", "MACs per cycle (BATCH x BLOCK_IN x BLOCK_OUT)"),
                           (axes[1], "sram_kib", "on-chip buffers, KiB (uop + inp + wgt + acc + out)")):
        for n, m in enumerate(macs):
            pts = sorted((r for r in ok if r["macs_per_cycle"] == m), key=lambda r: r[key])
            ax.plot([r[key] for r in pts], [r["throughput"] for r in pts], "o-" if key == "sram_kib" else "o",
                    ms=4, lw=0.8, c=colors[n % len(colors)], label=f"{m} MACs/cycle")
        fr = [r for r in ok if r.get("pareto")]
        ax.scatter([r[key] for r in fr], [r["throughput"] for r in fr], s=60, facecolors="none",
                   edgecolors="k", label="Pareto (throughput vs MACs/cycle, KiB"
                   + (", mismatches)" if ctx["workload"].get("reference") else ")"))
        _label_mismatches(ax, ctx, ok, key)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_xscale("log", base=2)
    axes[0].set_ylabel(f"throughput ({unit})")
    axes[1].legend(fontsize=7)
    fig.suptitle(f"{ctx['space']}: {space.workload_label(ctx['workload'])} on {ctx['backend']}, DRAM "
                 f"{ctx['dram']['bytes_per_cycle']} B/cycle (no synthesis results: config measures "
                 f"on x)", fontsize=10)
    fig.tight_layout()
    paths = []
    for ext in ("png", "svg"):
        p = os.path.join(outdir, f"throughput.{ext}")
        fig.savefig(p, dpi=110)
        paths.append(p)
    plt.close(fig)
    return paths
