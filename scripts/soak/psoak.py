#!/usr/bin/python3
"""Run a differential soak (tsr_soak, normal or --hostile) or a calibration of the SystemC
model against the RTL (tsr_sccal) as shards in parallel: worker processes on this
machine's cores, or one Slurm job array (the engine the DSE uses,
scripts/dse/tsrdse/jobarray.py), then add the shards' results up.

  psoak.py [--tool soak|sccal] [--jobs N] [--shards K] [--engine local|slurm] [--out DIR]
           [--bin PATH] -- TOOL_ARGS...

Shard k runs `tsr_soak TSR_SOAK_ARGS --shard k/K --quiet`: program i of the soak goes to
shard i % K with the seed, config and interleaving the serial run gives it, so the K
shards run exactly the serial soak's programs (tests/tsr_soak.c). Prints every shard's
output (its mismatch reports and summary) as `[shard k] ...`, then one line

  psoak: P programs, M mismatches (K shards on ENGINE, W s wall, R programs/s)

and exits 0 only when every shard ran to its summary, the shards' programs add up to
--count, and nothing mismatched (1 otherwise; 2 for a bad command line). A 100 k-program
soak on a cluster: `psoak.py --engine slurm --shards 200 -- --count 100000 --backend rtl`.

--tool sccal: shard k runs `tsr_sccal TOOL_ARGS --shard k/K --samples` (its programs'
cycles on systemc and the RTL, one line each), then `tsr_sccal --merge` prints the report
one serial run would print (error statistics equal; the speeds are the shards' cycles over
their summed CPU time) and gives the exit status.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "dse"))
from tsrdse import jobarray  # noqa: E402

SUMMARY = re.compile(r"^(\d+) (programs|streams), (\d+) (mismatches|disagreements)(.*)$")
ERRORS = re.compile(r"(\d+) (harness )?errors")


def fail(msg):
    sys.stderr.write("psoak: " + msg.replace("\n", " ")[:1000] + "\n")
    sys.exit(2)


def parse(argv):
    ap = argparse.ArgumentParser(prog="psoak.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                    help="shards running at once (local: processes; slurm: array throttle, 0 = no limit)")
    ap.add_argument("--shards", type=int, default=0, help="shards (default: --jobs, at least 1)")
    ap.add_argument("--engine", choices=("local", "slurm"), default="local")
    ap.add_argument("--out", help="directory for the shards' outputs (default: a temporary one, kept on failure)")
    ap.add_argument("--tool", choices=("soak", "sccal"), default="soak")
    ap.add_argument("--bin", help="the tool's binary (default build/tests/tsr_soak or tsr_sccal)")
    if "--" not in argv:
        fail("the soak's own arguments follow `--` (e.g. psoak.py -j 2 -- --count 1000 --backend rtl)")
    cut = argv.index("--")
    try:
        a = ap.parse_args(argv[:cut])
    except SystemExit as e:
        sys.exit(0 if e.code == 0 else 2)
    a.args = argv[cut + 1:]
    if a.jobs < 0 or (a.jobs == 0 and a.engine == "local"):
        fail(f"--jobs {a.jobs}: want at least 1 (0, no limit, only with --engine slurm)")
    a.shards = a.shards or max(a.jobs, 1)
    if not 1 <= a.shards <= 100000:
        fail(f"--shards {a.shards}: want 1 .. 100000")
    if any(x == "--shard" or x.startswith("--shard=") for x in a.args):
        fail("--shard is psoak's to set, not an argument to pass through")
    a.bin = a.bin or os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "tests", "tsr_" + a.tool)
    if not (os.path.isfile(a.bin) and os.access(a.bin, os.X_OK)):
        fail(f"{a.bin}: no tsr_{a.tool} binary there (build first, or pass --bin PATH)")
    if a.tool == "sccal" and any(x in ("--samples", "--merge", "--jit-resnet18") for x in a.args):
        fail("--samples and --merge are psoak's to set; --jit-resnet18 is one run, not shards")
    a.count = 100  # the tools' default
    for i, x in enumerate(a.args):
        if x == "--count":
            if i + 1 >= len(a.args) or not re.fullmatch(r"\d+", a.args[i + 1]):
                fail("--count wants a non-negative integer")
            a.count = int(a.args[i + 1])
    return a


def merge(res, out):
    """Add up the shards' summaries; print their reports. Returns (programs, mismatches,
    problems) where problems lists shards that did not end well."""
    programs = mism = 0
    problems = []
    for k, (rc, path) in enumerate(res):
        try:
            with open(path, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            lines = []
        summ = next((m for m in map(SUMMARY.match, reversed(lines)) if m), None)
        for ln in lines:  # its reports and its own summary line
            if ln.strip():
                out.write(f"[shard {k}] {ln}\n")
        if summ is None:
            problems.append(f"shard {k}: no summary (exit {rc}; output {path})")
            continue
        programs += int(summ.group(1))
        mism += int(summ.group(3))
        errs = ERRORS.search(summ.group(5))
        if errs:
            problems.append(f"shard {k}: {errs.group(0)}")
        if rc != 0 and not int(summ.group(3)) and not errs:
            problems.append(f"shard {k}: exit {rc}")
    return programs, mism, problems


def merge_sccal(a, res, out, wall):
    """tsr_sccal --merge over the shards' samples; its report, its exit status."""
    sys.stdout.flush()
    died = [f"shard {k}: exit {rc} (output {path})" for k, (rc, path) in enumerate(res) if rc not in (0, 1)]
    r = subprocess.run([a.bin, "--merge"] + [path for _, path in res], capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    for p in died + ([r.stderr.strip()] if r.stderr.strip() else []):
        print(f"psoak: {p}")
    ok = r.returncode == 0 and not died
    print(f"psoak: sccal over {a.shards} shards on {a.engine}, {wall:.1f} s wall" + ("" if ok else " (failed)"))
    if ok and not a.out:
        shutil.rmtree(out, ignore_errors=True)
    elif not ok:
        print(f"psoak: the shards' outputs are in {out}")
    return 0 if ok else 1


def main(argv):
    a = parse(argv)
    out = a.out or tempfile.mkdtemp(prefix="psoak-")
    os.makedirs(out, exist_ok=True)
    last = ["--quiet"] if a.tool == "soak" else ["--samples"]
    cmds = [[a.bin] + a.args + ["--shard", f"{k}/{a.shards}"] + last for k in range(a.shards)]
    t0 = time.monotonic()
    if a.engine == "local":
        res = jobarray.run_local(cmds, a.jobs, out)
    else:
        try:
            res = jobarray.run_slurm(cmds, a.jobs, out, job_name="tessera-soak", log=print)
        except (RuntimeError, OSError) as e:
            fail(str(e))
    wall = time.monotonic() - t0
    if a.tool == "sccal":
        return merge_sccal(a, res, out, wall)
    programs, mism, problems = merge(res, sys.stdout)
    for p in problems:
        print(f"psoak: {p}")
    if programs != a.count and not problems:
        problems.append(f"the shards ran {programs} programs, not --count {a.count}")
        print(f"psoak: {problems[-1]}")
    print(f"psoak: {programs} programs, {mism} mismatches ({a.shards} shards on {a.engine}, {wall:.1f} s wall, "
          f"{programs / wall if wall > 0 else 0:.1f} programs/s)")
    ok = not mism and not problems
    if ok and not a.out:
        shutil.rmtree(out, ignore_errors=True)
    elif not ok:
        print(f"psoak: the shards' outputs are in {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
