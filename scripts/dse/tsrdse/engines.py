# Engines that run the pending points of a sweep: `local` (N worker processes on
# this machine) and `slurm` (one sbatch job array, one task per point, polled
# with squeue). Both run the same per-point command, `dse.py point CTX INDEX`,
# which writes its results into the content-addressed cache; the sweep reads
# the cache afterwards, so both engines give the same table.
import os
import subprocess
import sys
import time

from . import evaluate

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
    queue, running, failed = list(todo), {}, []
    logdir = os.path.join(os.path.dirname(ctx_path), "logs")
    os.makedirs(logdir, exist_ok=True)
    while queue or running:
        while queue and len(running) < jobs:
            i = queue.pop(0)
            lf = open(os.path.join(logdir, f"{ctx['points'][i]['id']}.{part}.log"), "w")
            # workers inherit the sweep's priority (start a long sweep with `nice`)
            cmd = (["nice", "-n", str(nice)] if nice else []) + [sys.executable, DSE_PY, "point", ctx_path,
                                                                str(i), "--only", part]
            running[i] = (subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT), lf)
        time.sleep(0.5)
        for i, (p, lf) in list(running.items()):
            if p.poll() is not None:
                lf.close()
                del running[i]
                if p.returncode != 0:
                    failed.append(i)
                    # why, in the sweep's own output (the table only says the result is missing)
                    with open(lf.name, errors="replace") as f:
                        last = (f.read().strip().splitlines() or [f"exit {p.returncode}"])[-1]
                    log(f"{ctx['points'][i]['id']} {part} failed (log {lf.name}): {last}")
                _progress(ctx, todo, t0, log, part)
    return failed


def run_slurm(ctx, ctx_path, todo, jobs, log, poll=2.0):
    """Submit the points in `todo` as one job array (at most `jobs` tasks at once when
    jobs > 0) and wait for it, polling squeue."""
    outdir = os.path.dirname(ctx_path)
    sdir = os.path.join(outdir, "slurm")
    os.makedirs(sdir, exist_ok=True)
    idx_file = os.path.join(sdir, "indices.txt")
    with open(idx_file, "w") as f:
        f.write("\n".join(map(str, todo)) + "\n")
    script = os.path.join(sdir, "task.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n"
                "# one DSE point per array task: the task id selects a line of indices.txt\n"
                f"i=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" '{idx_file}')\n"
                f"exec '{sys.executable}' '{DSE_PY}' point '{ctx_path}' \"$i\"\n")
    os.chmod(script, 0o755)
    arr = f"0-{len(todo) - 1}" + (f"%{jobs}" if jobs else "")
    cmd = ["sbatch", "--parsable", f"--array={arr}", "--job-name=tessera-dse", "--ntasks=1",
           "--cpus-per-task=1", f"--output={sdir}/%A_%a.out", f"--chdir={outdir}", script]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"sbatch failed: {(p.stderr.strip() or p.stdout.strip())}")
    job = p.stdout.strip().split(";")[0]
    log(f"slurm: submitted job array {job} ({len(todo)} tasks, {arr})")
    t0 = time.monotonic()
    while True:
        q = subprocess.run(["squeue", "-h", "-j", job, "-o", "%i %T"], capture_output=True, text=True)
        if q.returncode != 0 and "Invalid job id" not in q.stderr:
            raise RuntimeError(f"squeue failed: {q.stderr.strip()}")
        _progress(ctx, todo, t0, log)
        if not q.stdout.strip():
            break
        time.sleep(poll)
    return [i for i in todo if not _done(ctx, i)]
