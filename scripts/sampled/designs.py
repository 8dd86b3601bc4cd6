#!/usr/bin/python3
"""Window designs of the sampled backend evaluated offline on whole-run traces.

    TESSERA_SAMPLED_TRACE=T.txt tessera infer M.onnx -i x.npy --backend sampled --timing-only --sample all
    /usr/bin/python3 scripts/sampled/designs.py T.txt [T2.txt ...] [--p 0.03,0.1,0.3] [--draws 2000]

A `--sample all` trace holds every submission's fast-model and RTL cycles (a window's RTL cycles
are the same whichever submissions ran before it: docs/guide/simulate.md), so any design can be
drawn from it many times: per design and P, the mean share of the run's RTL cycles spent in windows
(the CPU the windows cost), the share of draws within 1% of the full RTL, the 95th percentile of
|error|, and how often the printed 95% interval held (draws with >= 2 windows; the others have no
bound, their error is counted). Designs:
  random    each submission a window with probability P, one ratio estimator (what --sample random:P
            computes: R = sum y / sum x over the windows; its variance the larger of the linearization's
            and the jackknife's, with the finite-population correction; --linearization: the first alone)
  strata    the same draws, a separate ratio estimator per kind of submission (dw, gemm, alu+move),
            strata with fewer than 2 windows pooled (their ratio from all windows if the pool has < 2)
"""
import argparse
import sys

import numpy as np

LINEARIZATION_ONLY = False  # --linearization: the linearization's variance alone (the backend before the jackknife)

T975 = [0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052,
        2.048, 2.045, 2.042]


def t975(df):
    return T975[df] if df <= 30 else 1.959964 + (1.959964 ** 3 + 1.959964) / (4.0 * df)


def load(path):
    with open(path) as f:
        head = f.readline().split()
        if head[:4] != ["sub", "kind", "fast", "rtl"]:
            sys.exit(f"designs.py: {path}: not a TESSERA_SAMPLED_TRACE file")
        rows = [line.split() for line in f if line.strip()]
    if not rows or any(r[4] != "1" or r[5] != "0" for r in rows):
        sys.exit(f"designs.py: {path}: every submission must be a whole window (run it with --sample all)")
    kind = np.array(["alu" if r[1] == "move" else r[1] for r in rows])
    return kind, np.array([float(r[2]) for r in rows]), np.array([float(r[3]) for r in rows])


def ratio(x, y, s, X, M):
    """Ratio estimate of one group (M units, fast total X) from its windows s: (Y, variance)."""
    n = int(s.sum())
    R = y[s].sum() / x[s].sum()
    e = y[s] - R * x[s]
    var = 0.0
    if n >= 2:  # the larger of the linearization's and the jackknife's, as tsr_sampled_estimate
        lin = M * M / n * (e ** 2).sum() / (n - 1)
        xs, ys = x[s], y[s]
        rj = (ys.sum() - ys) / (xs.sum() - xs)
        jk = X * X * (n - 1) / n * ((rj - rj.mean()) ** 2).sum()
        var = (1 - n / M) * (lin if LINEARIZATION_ONLY else max(lin, jk))
    return R * (X - x[s].sum()) + y[s].sum(), var


def random_est(kind, x, y, s):
    if s.sum() < 2:
        return None
    Y, v = ratio(x, y, s, x.sum(), len(x))
    return Y, np.sqrt(v), int(s.sum()) - 1


def strata_est(kind, x, y, s):
    if s.sum() < 2:
        return None
    groups, pool = [], np.zeros(len(x), bool)
    for k in np.unique(kind):
        m = kind == k
        if (s & m).sum() >= 2:
            groups.append(m)
        else:
            pool |= m
    Y = V = 0.0
    df = 0
    for m in groups + ([pool] if pool.any() else []):
        sm = s & m
        if sm.sum() >= 2:
            Yh, v = ratio(x[m], y[m], sm[m], x[m].sum(), int(m.sum()))
            df += int(sm.sum()) - 1
        else:  # the pool without 2 windows of its own: the ratio of all windows for its fast cycles
            R = y[s].sum() / x[s].sum()
            Yh = y[sm].sum() + R * (x[m].sum() - x[sm].sum())
            e = y[s] - R * x[s]
            n = int(s.sum())
            Mm = int(m.sum())
            v = Mm * Mm * max(0.0, 1 - sm.sum() / Mm) / n * (e ** 2).sum() / (n - 1)
        Y += Yh
        V += v
    return Y, np.sqrt(V), max(df, 1)


def evaluate(name, kind, x, y, p, draws, est):
    rng = np.random.default_rng(1)
    Yt = y.sum()
    cost, err, held, nobound = [], [], [], 0
    for _ in range(draws):
        s = rng.random(len(x)) < p
        cost.append(y[s].sum() / Yt)
        r = est(kind, x, y, s)
        if r is None:  # 0 or 1 window: the ratio estimate (the fast model's cycles without a window), no bound
            nobound += 1
            err.append((ratio(x, y, s, x.sum(), len(x))[0] if s.any() else x.sum()) / Yt - 1)
            continue
        Yh, se, df = r
        err.append((Yh - Yt) / Yt)
        held.append(abs(Yh - Yt) <= t975(df) * se)
    err = np.abs(np.array(err))
    print(f"  {name:7s} P={p:<5g} windows {np.mean(cost) * 100:5.1f}% of the RTL cycles, within 1% "
          f"{np.mean(err < 0.01) * 100:3.0f}%, p95 |error| {np.percentile(err, 95) * 100:5.2f}%, interval held "
          f"{np.mean(held) * 100 if held else float('nan'):3.0f}%, no bound {nobound / draws * 100:3.0f}%")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--p", default="0.03,0.1,0.3")
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--linearization", action="store_true",
                    help="the ratio estimator's variance by linearization alone (the backend before the jackknife)")
    a = ap.parse_args(argv)
    global LINEARIZATION_ONLY
    LINEARIZATION_ONLY = a.linearization
    ps = [float(v) for v in a.p.split(",")]
    if any(not 0 < p <= 1 for p in ps) or a.draws < 1:
        sys.exit("designs.py: --p needs probabilities in (0, 1], --draws a positive count")
    for path in a.traces:
        kind, x, y = load(path)
        print(f"{path}: {len(x)} submissions, RTL {y.sum():.0f} cycles, fast model {x.sum():.0f} "
              f"({(x.sum() / y.sum() - 1) * 100:+.2f}%); RTL/fast per kind: "
              + ", ".join(f"{k} {y[kind == k].sum() / x[kind == k].sum():.4f} "
                          f"({(y[kind == k] / x[kind == k]).min():.3f}-{(y[kind == k] / x[kind == k]).max():.3f})"
                          for k in np.unique(kind)))
        for p in ps:
            evaluate("random", kind, x, y, p, a.draws, random_est)
            evaluate("strata", kind, x, y, p, a.draws, strata_est)


if __name__ == "__main__":
    main(sys.argv[1:])
