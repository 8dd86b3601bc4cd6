#!/usr/bin/env python3
"""timeline_check: validate a `--timeline` file and compare two of them.

  timeline_check.py FILE.json                 well-formedness only
  timeline_check.py RTL.json SC.json [--tol F] [--abs C] [--max-tol G]
                                              ... and do they line up?

Well-formed (each file): valid JSON with a traceEvents list; every event has
ph, pid and name; X events a numeric ts and a dur >= 0 and a tid; C events
numeric args; the fetch/load/compute/store lanes are named; slices on a
stage lane never overlap and their args.idx rise (program order).

Line up (two files, e.g. the rtl and systemc timelines of one program):
the same runs, and per run and stage the same instructions in the same
order (kind and index); start times counted from the run's start: per run
and stage the median difference within F x the run's length + C cycles
(default 10% + 128) and every one within G x the run's length + C (default
75%: the model is calibrated on run totals; single instructions can be far
off where the DRAM model differs, e.g. write bursts behind a saturating
read stream). Prints the first divergence, the median and the largest start
difference per stage. Exit 0 when all holds, 1 otherwise.
"""
import json
import sys

STAGES = ("fetch", "load", "compute", "store")


def fail(msg):
    print("timeline_check: " + msg)
    sys.exit(1)


def load(path):
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: not valid JSON: %s" % (path, e))
    ev = d.get("traceEvents") if isinstance(d, dict) else None
    if not isinstance(ev, list):
        fail("%s: no traceEvents list" % path)
    lanes = {}
    for i, e in enumerate(ev):
        if not isinstance(e, dict) or not all(k in e for k in ("ph", "pid", "name")):
            fail("%s: event %d lacks ph/pid/name: %r" % (path, i, e))
        ph = e["ph"]
        if ph == "M" and e["name"] == "thread_name":
            lanes[e["args"]["name"]] = e["tid"]
        elif ph == "X":
            if not isinstance(e.get("ts"), (int, float)) or not isinstance(e.get("dur"), (int, float)) \
                    or e["dur"] < 0 or "tid" not in e:
                fail("%s: slice %d (%s) has a bad ts/dur/tid" % (path, i, e["name"]))
        elif ph == "C":
            a = e.get("args")
            if not isinstance(a, dict) or not a or not all(isinstance(v, (int, float)) for v in a.values()) \
                    or not isinstance(e.get("ts"), (int, float)):
                fail("%s: counter %d (%s) has bad args/ts" % (path, i, e["name"]))
        elif ph not in ("M", "i"):
            fail("%s: event %d has unexpected phase %r" % (path, i, ph))
    for s in STAGES + ("runs",):
        if s not in lanes:
            fail("%s: lane %r missing" % (path, s))
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e["ph"] == "X" and e["tid"] == lanes["runs"])
    per = {}  # (run, stage) -> [(start from run start in cycles, idx, name)]
    for s in STAGES[1:]:
        sl = sorted((e for e in ev if e["ph"] == "X" and e["tid"] == lanes[s]), key=lambda e: e["ts"])
        last_end, last_idx = -1e300, -1
        for e in sl:
            if e["ts"] < last_end - 1e-6:
                fail("%s: %s lane: slice %s at %.3f overlaps the previous one" % (path, s, e["name"], e["ts"]))
            idx = e.get("args", {}).get("idx")
            r = next((k for k, (b, en) in enumerate(runs) if b - 1e-6 <= e["ts"] <= en + 1e-6), None)
            if not isinstance(idx, int) or r is None:
                fail("%s: %s lane: slice %s at %.3f has no idx or lies outside every run" % (path, s, e["name"], e["ts"]))
            if r == last_run(per, s) and idx <= last_idx:
                fail("%s: %s lane: instruction #%d after #%d (not program order)" % (path, s, idx, last_idx))
            last_end, last_idx = e["ts"] + e["dur"], idx
            per.setdefault((r, s), []).append(((e["ts"] - runs[r][0]) * 1000.0, idx, e["name"]))
    return runs, per, len(ev)


def last_run(per, s):
    rs = [r for (r, st) in per if st == s]
    return max(rs) if rs else None


def main(argv):
    tol, abs_c, max_tol, files = 0.10, 128.0, 0.75, []
    i = 0
    while i < len(argv):
        if argv[i] == "--tol":
            tol = float(argv[i + 1]); i += 2
        elif argv[i] == "--max-tol":
            max_tol = float(argv[i + 1]); i += 2
        elif argv[i] == "--abs":
            abs_c = float(argv[i + 1]); i += 2
        else:
            files.append(argv[i]); i += 1
    if len(files) not in (1, 2):
        print(__doc__)
        return 2
    a = load(files[0])
    print("%s: well-formed, %d events, %d runs" % (files[0], a[2], len(a[0])))
    if len(files) == 1:
        return 0
    b = load(files[1])
    print("%s: well-formed, %d events, %d runs" % (files[1], b[2], len(b[0])))
    if len(a[0]) != len(b[0]):
        fail("%d runs vs %d" % (len(a[0]), len(b[0])))
    worst, medians = {}, {}
    for r, (ra, rb) in enumerate(zip(a[0], b[0])):
        la, lb = (ra[1] - ra[0]) * 1000.0, (rb[1] - rb[0]) * 1000.0
        lim = tol * max(la, lb) + abs_c
        lim_max = max_tol * max(la, lb) + abs_c
        for s in STAGES[1:]:
            xa, xb = a[1].get((r, s), []), b[1].get((r, s), [])
            if len(xa) != len(xb):
                fail("run %d %s: %d instructions vs %d" % (r + 1, s, len(xa), len(xb)))
            diffs = []
            for k, (p, q) in enumerate(zip(xa, xb)):
                if p[1:] != q[1:]:
                    fail("run %d %s: slice %d is #%d %s vs #%d %s (order differs)" % (r + 1, s, k, p[1], p[2], q[1], q[2]))
                d = q[0] - p[0]
                diffs.append(abs(d))
                if abs(d) > abs(worst.get(s, (0,))[0]):
                    worst[s] = (d, r + 1, p[1], p[2], lim_max)
                if abs(d) > lim_max:
                    fail("run %d %s: #%d %s starts at cycle %.0f vs %.0f (%+.0f, beyond %.0f = %.1f%% of %.0f + %.0f)"
                         % (r + 1, s, p[1], p[2], p[0], q[0], d, lim_max, 100 * max_tol, max(la, lb), abs_c))
            if diffs:
                med = sorted(diffs)[len(diffs) // 2]
                medians.setdefault(s, []).append(med)
                if med > lim:
                    fail("run %d %s: median start difference %.0f cycles beyond %.0f = %.1f%% of %.0f + %.0f"
                         % (r + 1, s, med, lim, 100 * tol, max(la, lb), abs_c))
        print("run %d: %.0f vs %.0f cycles (%+.2f%%)" % (r + 1, la, lb, 100 * (lb - la) / la if la else 0))
    for s in STAGES[1:]:
        if s in worst:
            d, r, idx, name, lim = worst[s]
            print("%s: same order; median start difference %.0f cycles (largest over runs), largest %+.0f "
                  "(run %d, #%d %s; limit %.0f)" % (s, max(medians[s]), d, r, idx, name, lim))
    print("timelines line up")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
