# Engines that run the pending points of a sweep: `local` (N worker processes on
# this machine) and `slurm` (one sbatch job array, one task per point, polled
# with squeue). Both run the same per-point command, `dse.py point CTX INDEX`,
# which writes its results into the content-addressed cache; the sweep reads
# the cache afterwards, so both engines give the same table. The processes and the
# job array themselves are tsrdse/jobarray.py (which the soak runner uses too).
import os
import sys
import time

from . import evaluate, jobarray

DSE_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dse.py")


def _done(ctx, i, parts=("cycles", "synth")):
    r = evaluate.lookup(ctx, i)
    return ((r["cycles"] is not None or "cycles" not in parts) and
            (ctx["synth"] == "none" or r["synth"] is not None or "synth" not in parts))


def pending(ctx, parts=("cycles", "synth")):
    return [i for i in range(len(ctx["points"])) if not _done(ctx, i, parts)]


def _progress(ctx, todo, t0, log, part=None, last=[None]):
    parts = (part,) if part else ("cycles", "synth")
    left = sum(1 for i in todo if not _done(ctx, i, parts))
    n = len(todo)
    el = time.monotonic() - t0
    eta = f", ~{el / (n - left) * left:.0f} s left" if n - left else ""
    msg = f"progress{' (' + part + ')' if part else ''}: {n - left}/{n} points done, {el:.0f} s{eta}"
    if msg.split(",")[0] != last[0]:
        log(msg)
        last[0] = msg.split(",")[0]
    return left


def run_local(ctx, ctx_path, todo, jobs, log, nice=0):
    """Run the points in `todo` with up to `jobs` worker processes: first every point's
    cycles (fast), then the syntheses (slow), so the cycles table is complete early."""
    failed = _run_local(ctx, ctx_path, pending(ctx, ("cycles",)), jobs, log, nice, "cycles")
    if ctx["synth"] != "none":
        failed += _run_local(ctx, ctx_path, pending(ctx, ("synth",)), jobs, log, nice, "synth")
    return failed


def _run_local(ctx, ctx_path, todo, jobs, log, nice, part):
    t0 = time.monotonic()
    logdir = os.path.join(os.path.dirname(ctx_path), "logs")
    # workers inherit the sweep's priority (start a long sweep with `nice`)
    cmds = [[sys.executable, DSE_PY, "point", ctx_path, str(i), "--only", part] for i in todo]
    names = [f"{ctx['points'][i]['id']}.{part}.log" for i in todo]
    res = jobarray.run_local(cmds, jobs, logdir, lambda done, n: _progress(ctx, todo, t0, log, part), nice, names)
    failed = []
    for i, (rc, out) in zip(todo, res):
        if rc != 0:
            failed.append(i)
            # why, in the sweep's own output (the table only says the result is missing)
            with open(out, errors="replace") as f:
                last = (f.read().strip().splitlines() or [f"exit {rc}"])[-1]
            log(f"{ctx['points'][i]['id']} {part} failed (log {out}): {last}")
    return failed


def run_slurm(ctx, ctx_path, todo, jobs, log, poll=2.0):
    """Submit the points in `todo` as one job array (at most `jobs` tasks at once when
    jobs > 0) and wait for it, polling squeue."""
    outdir = os.path.dirname(ctx_path)
    t0 = time.monotonic()
    cmds = [[sys.executable, DSE_PY, "point", ctx_path, str(i)] for i in todo]
    jobarray.run_slurm(cmds, jobs, os.path.join(outdir, "slurm"), lambda: _progress(ctx, todo, t0, log), poll,
                       "tessera-dse", outdir, log)
    return [i for i in todo if not _done(ctx, i)]
