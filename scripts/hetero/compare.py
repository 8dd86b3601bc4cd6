#!/usr/bin/python3
"""compare.py: a mixed set of devices against every homogeneous set with the same total MACs (issue 26).

usage: compare.py --tessera BIN --model MODEL.onnx --images X.npy --kinds CFG.json,CFG.json,..
                  --total MACS[,MACS..] [--backend systemc|fsim] [--jit-costs] [--max-devices N] [--check]
                  [--json] [-- EXTRA TESSERA FLAGS]

For each total T (MACs per cycle) every multiset of the given device kinds whose MACs per cycle add up
to T (1..--max-devices devices) is planned and run with the same flags: `tessera infer MODEL -i X.npy
--devices K --configs ...` (the planner's best plan for that set; on systemc with --calibrate, so the
node costs are the backend's own; with --jit-costs the JIT's, measured on systemc; on fsim the JIT's
cost model, which only plans and checks the outputs). Each kind's MACs per cycle, DRAM bus bits and on-chip buffer bytes are read from `tessera
config show`, so the table shows whether the sets also have the same total bandwidth and buffer.

Printed per set: the devices, their total bus bits and buffer KiB, the predicted period (cycles of the
first device's clock, the slowest stage of the plan), the measured period (the slowest stage measured
on systemc: device counters plus the link model), the throughput (inputs per second at that clock) and
the speed-up over the best homogeneous set of the same total, and whether every output equalled the
single-device run (the executor's check). The mixed sets are listed with their kinds in the order
given; the first kind present is the first device (its clock and its single-device reference).

--check: exit 1 unless, for every total, the best mixed set's period (measured on systemc, predicted
on fsim) is below every homogeneous set's, and every run printed equal outputs. Exit 2 on bad
arguments or a failed run (its stderr's last line is printed).
"""
import argparse
import itertools
import json
import re
import subprocess
import sys


class UsageError(Exception):
    pass


def kind_info(tessera, cfg):
    try:
        r = subprocess.run([tessera, "config", "show", cfg], capture_output=True, text=True)
    except OSError as e:
        raise UsageError(f"--tessera {tessera}: {e.strerror}")
    if r.returncode:
        raise UsageError(f"{cfg}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'config show failed'}")
    out = r.stdout
    macs = int(re.search(r"= (\d+) MACs/op", out).group(1))
    bus = int(re.search(r"\((\d+)-bit DRAM bus, (\d+) MHz\)", out).group(1))
    mhz = int(re.search(r"\((\d+)-bit DRAM bus, (\d+) MHz\)", out).group(2))
    buf = sum(int(m.group(1)) for m in re.finditer(r"^(?:uop|inp|wgt|acc|out)\s+(\d+)\s", out, re.M))
    return {"cfg": cfg, "macs": macs, "bus": bus, "mhz": mhz, "buf": buf}


def multisets(kinds, total, max_devices):
    """Counts per kind (a tuple) with sum(count * macs) == total and 1..max_devices devices."""
    ranges = [range(0, min(total // k["macs"], max_devices) + 1) for k in kinds]
    n = 1
    for r in ranges:
        n *= len(r)
    if n > 1000000:
        raise UsageError(f"{n} combinations of {len(kinds)} kinds: give fewer kinds or a smaller --max-devices")
    for counts in itertools.product(*ranges):
        if sum(c * k["macs"] for c, k in zip(counts, kinds)) == total and 0 < sum(counts) <= max_devices:
            yield counts


def calibrated(a):
    return a.backend != "fsim" and not a.jit_costs


def run_set(a, kinds, counts):
    cfgs = [k["cfg"] for c, k in zip(counts, kinds) for _ in range(c)]
    cmd = [a.tessera, "infer", a.model, "-i", a.images, "--devices", str(len(cfgs)), "--configs", ",".join(cfgs),
           "--backend", a.backend, *(["--calibrate"] if calibrated(a) else []), *a.extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit status {r.returncode}"
        raise RuntimeError(f"{' '.join(cmd)}: {last}")
    plan = re.search(r"^plan \([^)]*\): (\d+) stages, period (\d+) cycles", r.stdout, re.M)
    slow = re.search(r"^slowest stage: predicted (\d+) cycles .* measured (\d+) cycles", r.stdout, re.M)
    eq = re.search(r"^outputs equal to the single-device run: (\w+) \((\d+) of (\d+)\)", r.stdout, re.M)
    if not plan or not eq:
        raise RuntimeError(f"{' '.join(cmd)}: no plan or no output check in its output")
    res = {"devices": len(cfgs), "stages": int(plan.group(1)), "predicted": int(plan.group(2)),
           "measured": int(slow.group(2)) if slow else None, "equal": eq.group(1) == "yes",
           "outputs": f"{eq.group(2)} of {eq.group(3)}"}
    if slow:
        res["predicted"] = int(slow.group(1))
    return res


def name_of(kinds, counts):
    return " + ".join(f"{c} x {k['name']}" for c, k in zip(counts, kinds) if c)


def compare(a, kinds, total):
    rows = []
    for counts in multisets(kinds, total, a.max_devices):
        r = run_set(a, kinds, counts)
        r.update(counts=counts, set=name_of(kinds, counts), homogeneous=sum(1 for c in counts if c) == 1,
                 bus=sum(c * k["bus"] for c, k in zip(counts, kinds)),
                 buf_kib=sum(c * k["buf"] for c, k in zip(counts, kinds)) // 1024)
        r["period"] = r["measured"] if r["measured"] is not None else r["predicted"]
        rows.append(r)
        print(f"  ran {r['set']}: period {r['period']}", file=sys.stderr, flush=True)
    rows.sort(key=lambda r: r["period"])
    homo = [r for r in rows if r["homogeneous"]]
    best_h = min((r["period"] for r in homo), default=None)
    for r in rows:
        r["vs_best_homogeneous"] = best_h / r["period"] if best_h else None
    return rows, best_h


def table(a, kinds, total, rows, best_h):
    mhz = kinds[0]["mhz"]
    out = [f"total {total} MACs per cycle ({a.backend}{', calibrated' if calibrated(a) else ', JIT costs'}"
           f"{', ' + ' '.join(a.extra) if a.extra else ''}):", "",
           "| set | devices | bus bits | buffers KiB | predicted period | measured period | inputs/s | "
           "vs best homogeneous | outputs equal |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        meas = f"{r['measured']:,}" if r["measured"] is not None else "-"
        tag = "" if r["homogeneous"] else " (mixed)"
        out.append(f"| {r['set']}{tag} | {r['devices']} | {r['bus']} | {r['buf_kib']:,} | {r['predicted']:,} | {meas} | "
                   f"{mhz * 1e6 / r['period']:,.1f} | {r['vs_best_homogeneous']:.3f}x | "
                   f"{'yes' if r['equal'] else 'NO'} ({r['outputs']}) |")
    return "\n".join(out)


def main(argv):
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--kinds", required=True, help="config files (or presets), comma-separated")
    ap.add_argument("--total", required=True, help="total MACs per cycle, comma-separated")
    ap.add_argument("--backend", default="systemc")
    ap.add_argument("--max-devices", type=int, default=31)
    ap.add_argument("--jit-costs", action="store_true", help="on systemc too: plan with the JIT's costs")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--json", action="store_true")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    a.extra = extra
    try:
        if a.backend not in ("systemc", "fsim"):
            raise UsageError("--backend: systemc (calibrated, measured) or fsim (JIT costs, planned)")
        if not 1 <= a.max_devices <= 64:
            raise UsageError("--max-devices needs 1..64")
        totals = [int(t) for t in a.total.split(",")]
        if any(t <= 0 for t in totals):
            raise UsageError("--total needs positive MACs per cycle")
        kinds = []
        for cfg in a.kinds.split(","):
            k = kind_info(a.tessera, cfg)
            k["name"] = re.sub(r"\.json$", "", cfg.rsplit("/", 1)[-1])
            kinds.append(k)
        if len({k["mhz"] for k in kinds}) != 1:
            raise UsageError("--kinds: every kind needs the same clock (the periods are compared in cycles)")
    except (UsageError, ValueError) as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    ok, results = True, []
    for t in totals:
        try:
            rows, best_h = compare(a, kinds, t)
        except (RuntimeError, UsageError) as e:
            print(f"compare.py: {e}", file=sys.stderr)
            return 2
        if not rows:
            print(f"compare.py: no set of {a.kinds} adds up to {t} MACs per cycle", file=sys.stderr)
            return 2
        results.append({"total": t, "rows": rows, "best_homogeneous": best_h})
        if not a.json:
            print(table(a, kinds, t, rows, best_h) + "\n")
        mixed = [r for r in rows if not r["homogeneous"]]
        if not all(r["equal"] for r in rows):
            ok = False
            print(f"CHECK: total {t}: an output differed from the single-device run", file=sys.stderr)
        if a.check and (not mixed or best_h is None or mixed[0]["period"] >= best_h):
            ok = False
            print(f"CHECK: total {t}: the best mixed set ({mixed[0]['set'] if mixed else 'none'}, "
                  f"{mixed[0]['period'] if mixed else '-'}) does not beat every homogeneous one "
                  f"(best {best_h})", file=sys.stderr)
        elif a.check:
            print(f"ok: total {t}: {mixed[0]['set']} ({mixed[0]['period']:,} cycles) beats every homogeneous set "
                  f"(best {best_h:,}): {best_h / mixed[0]['period']:.3f}x", file=sys.stderr)
    if a.json:
        for res in results:
            for r in res["rows"]:
                r["counts"] = list(r["counts"])
        print(json.dumps({"kinds": kinds, "backend": a.backend, "extra": a.extra, "results": results}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
