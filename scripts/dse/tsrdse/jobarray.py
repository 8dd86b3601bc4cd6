# Run a list of independent commands, each one task, either as worker processes
# on this machine or as one Slurm job array (sbatch, polled with squeue). The DSE's
# engines (a sweep's points) and scripts/soak/psoak.py (a soak's shards) both run
# through here, so a soak reaches a cluster the way a sweep does.
#
# Every task writes its output (stdout and stderr) to OUTDIR/task-K.out and its exit
# status to OUTDIR/task-K.rc; the runners return, per task, (rc, output path), rc
# None when the task never reported one (killed, node lost).
import os
import shlex
import subprocess
import time


def _paths(outdir, k):
    return os.path.join(outdir, f"task-{k}.out"), os.path.join(outdir, f"task-{k}.rc")


def _read_rc(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def run_local(cmds, jobs, outdir, progress=None, nice=0, names=None):
    """Run cmds (lists of arguments) with at most `jobs` at once. progress(done, total) is
    called whenever a task ends; names[k] (optional) names task k's output file."""
    os.makedirs(outdir, exist_ok=True)
    queue, running, done = list(range(len(cmds))), {}, 0
    res = [None] * len(cmds)
    jobs = max(1, jobs)
    while queue or running:
        while queue and len(running) < jobs:
            k = queue.pop(0)
            out = os.path.join(outdir, names[k]) if names else _paths(outdir, k)[0]
            lf = open(out, "w")
            cmd = (["nice", "-n", str(nice)] if nice else []) + list(cmds[k])
            running[k] = (subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT), lf, out)
        time.sleep(0.2)
        for k, (p, lf, out) in list(running.items()):
            if p.poll() is not None:
                lf.close()
                del running[k]
                res[k] = (p.returncode, out)
                done += 1
                if progress:
                    progress(done, len(cmds))
    return res


def run_slurm(cmds, jobs, outdir, progress=None, poll=2.0, job_name="tessera", chdir=None, log=print):
    """Submit cmds as one job array (at most `jobs` tasks at once when jobs > 0) and wait for
    it. progress() is called at every poll. Raises RuntimeError when sbatch or squeue fail."""
    os.makedirs(outdir, exist_ok=True)
    outdir = os.path.abspath(outdir)
    lines = os.path.join(outdir, "commands.txt")
    with open(lines, "w") as f:
        f.write("".join(shlex.join(c) + "\n" for c in cmds))
    for k in range(len(cmds)):  # a stale status from an earlier run must not count
        rc = _paths(outdir, k)[1]
        if os.path.exists(rc):
            os.remove(rc)
    script = os.path.join(outdir, "task.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n"
                "# one command per array task: the task id selects a line of commands.txt\n"
                "k=$SLURM_ARRAY_TASK_ID\n"
                f"cmd=$(sed -n \"$((k + 1))p\" '{lines}')\n"
                f"sh -c \"$cmd\" > '{outdir}/task-'$k.out 2>&1\n"
                f"echo $? > '{outdir}/task-'$k.rc.tmp && mv '{outdir}/task-'$k.rc.tmp '{outdir}/task-'$k.rc\n")
    os.chmod(script, 0o755)
    arr = f"0-{len(cmds) - 1}" + (f"%{jobs}" if jobs else "")
    cmd = ["sbatch", "--parsable", f"--array={arr}", f"--job-name={job_name}", "--ntasks=1",
           "--cpus-per-task=1", f"--output={outdir}/slurm-%A_%a.log", f"--chdir={chdir or outdir}", script]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"sbatch failed: {(p.stderr.strip() or p.stdout.strip())}")
    job = p.stdout.strip().split(";")[0]
    log(f"slurm: submitted job array {job} ({len(cmds)} tasks, {arr})")
    while True:
        q = subprocess.run(["squeue", "-h", "-j", job, "-o", "%i %T"], capture_output=True, text=True)
        if q.returncode != 0 and "Invalid job id" not in q.stderr:
            raise RuntimeError(f"squeue failed: {q.stderr.strip()}")
        if progress:
            progress()
        if not q.stdout.strip():
            break
        time.sleep(poll)
    return [(_read_rc(_paths(outdir, k)[1]), _paths(outdir, k)[0]) for k in range(len(cmds))]
