#!/usr/bin/python3
"""Tests of the parallel soak runner (psoak.py).

  test_psoak.py TSR_SOAK WORKDIR local|sccal|slurm

local: the shards of a hostile soak (fsim against fsim with random interleavings) run the
       serial soak's streams: the counts of streams that both devices ran to the end and
       that both refused add up to the serial run's, and the programs to --count; a normal
       soak over random configs the same; a stand-in soak that reports a mismatch in one
       shard, one that miscounts, one that crashes: each makes psoak fail and say why; bad
       command lines exit 2 with one line.
sccal: a calibration (tsr_sccal, next to TSR_SOAK) in shards prints the serial run's error
       statistics (tiny config: it runs the RTL); --merge refuses a shard's cut output;
       --only P runs the program of a random-config run printed as seed P with that line's
       cycles (model only: the RTL's from a log), P outside the run is one line, exit 2.
slurm: the same normal soak as one job array on a single-node Slurm started here
       (scripts/dse/slurm_local.sh; skipped, exit 77, where it cannot run).
"""
import os
import re
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PSOAK = os.path.join(HERE, "psoak.py")
SOAK, WORK, WHICH = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ, **(env or {})))


def psoak(*args, soak=SOAK, env=None):
    return run([sys.executable, PSOAK, "--bin", soak] + list(args), env)


def hostile_counts(text):
    """(streams, both ok, both error) summed over every summary line of text."""
    t = [0, 0, 0]
    for m in re.finditer(r"(\d+) streams, \d+ disagreements \(fsim vs fsim; (\d+) both ok, (\d+) both error", text):
        for i in range(3):
            t[i] += int(m.group(i + 1))
    return t


def fake_soak(name, body):
    """A stand-in for tsr_soak: a shell script that sees --shard K/N as its last-but-one args."""
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def test_local():
    for seed, count, shards in ((3, 60, 4), (11, 50, 3)):
        serial = run([SOAK, "--hostile", "--backend", "fsim", "--count", str(count), "--seed", str(seed), "--quiet"])
        want = hostile_counts(serial.stdout)
        check(serial.returncode == 0 and want[0] == count and want[1] > 0 and want[2] > 0,
              f"serial hostile soak: {want} (streams, both ok, both error)")
        r = psoak("-j", "2", "--shards", str(shards), "--", "--hostile", "--backend", "fsim", "--count", str(count),
                  "--seed", str(seed))
        got = hostile_counts(r.stdout)
        check(r.returncode == 0 and got == want, f"{shards} shards run the serial soak's streams: {got} == {want}")
    check("psoak: 50 programs, 0 mismatches (3 shards on local" in r.stdout, "psoak's summary line")
    r = psoak("-j", "2", "--shards", "3", "--", "--config", "random", "--configs", "2", "--count", "30")
    check(r.returncode == 0 and "psoak: 30 programs, 0 mismatches" in r.stdout, "random-config soak in 3 shards")

    bad = fake_soak("mismatch.sh", 'shard=""; for a; do case $prev in --shard) shard=$a;; esac; prev=$a; done\n'
                    'case $shard in 1/*) echo "seed 7: output differs"; echo "5 programs, 1 mismatches"; exit 1;;\n'
                    '*) echo "5 programs, 0 mismatches";; esac\n')
    r = psoak("-j", "2", "--shards", "2", "--", "--count", "10", soak=bad)
    check(r.returncode == 1 and "[shard 1] seed 7: output differs" in r.stdout
          and "psoak: 10 programs, 1 mismatches" in r.stdout, "a mismatch in one shard fails the soak, with its report")
    short = fake_soak("short.sh", 'echo "4 programs, 0 mismatches"\n')
    r = psoak("-j", "2", "--shards", "2", "--", "--count", "10", soak=short)
    check(r.returncode == 1 and "ran 8 programs, not --count 10" in r.stdout, "shards that miss programs fail the soak")
    crash = fake_soak("crash.sh", 'kill -SEGV $$\n')
    r = psoak("-j", "1", "--shards", "2", "--", "--count", "10", soak=crash)
    check(r.returncode == 1 and "shard 0: no summary" in r.stdout, "a shard that dies without a summary fails the soak")
    for args, what in ((["--", "--shard", "0/2"], "--shard is psoak's"), (["-j", "0", "--", "--count", "1"], "--jobs 0"),
                       (["--shards", "-3", "--", "--count", "1"], "--shards -3"), (["--count", "5"], "follow `--`"),
                       (["--", "--count", "x"], "--count wants")):
        r = psoak(*args)
        check(r.returncode == 2 and what in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              f"refused with one line: {' '.join(args)}")
    r = psoak("--", "--count", "1", soak=os.path.join(WORK, "nothing-here"))
    check(r.returncode == 2 and "no tsr_soak binary" in r.stderr, "a missing soak binary is refused")


def strip_speeds(text):
    return [ln for ln in text.splitlines() if not ln.startswith(("speed", "fsim alone"))]


def test_sccal():
    """The calibration in shards prints the serial run's report (but its speeds)."""
    sccal = os.path.join(os.path.dirname(SOAK), "tsr_sccal")
    args = ["--config", "tiny", "--count", "30", "--seed", "4"]
    serial = run([sccal] + args)
    r = run([sys.executable, PSOAK, "--tool", "sccal", "--bin", sccal, "-j", "2", "--shards", "3", "--"] + args)
    rep = [ln for ln in r.stdout.splitlines() if not ln.startswith("psoak:")]
    check(serial.returncode == 0 and "mean |err|" in serial.stdout, "serial calibration runs")
    check(r.returncode == 0 and strip_speeds("\n".join(rep)) == strip_speeds(serial.stdout),
          "3 calibration shards print the serial report's error statistics")
    cut = os.path.join(WORK, "cut.txt")
    with open(cut, "w") as f:
        f.write("sample 5 100 101 20 3 64 0 0 0\n")
    r = run([sccal, "--merge", cut])
    check(r.returncode == 2 and "has no summary line" in r.stderr, "--merge refuses a shard that did not finish")
    test_sccal_only(sccal)


def test_sccal_only(sccal):
    """--only P: the whole run's line for seed P (its random config: the run's config seed for P)."""
    log = os.path.join(WORK, "rtl_cycles.txt")
    with open(log, "w") as f:  # (the RTL's cycles: made up, so only the model runs)
        f.write("".join(f"seed {s}: rtl 1000 systemc 0\n" for s in range(4, 12)))
    args = ["--config", "random", "--configs", "4", "--count", "8", "--seed", "4", "--verbose", "--rtl-cycles", log]
    full = run([sccal] + args)
    lines = {m.group(1): m.group(0) for m in re.finditer(r"^seed (\d+): rtl .*$", full.stdout, re.M)}
    check(full.returncode == 0 and len(lines) == 8, "a random-config run of 8 programs")
    for p in ("6", "11"):
        r = run([sccal] + args + ["--only", p])
        got = re.findall(r"^seed \d+: rtl .*$", r.stdout, re.M)
        check(r.returncode == 0 and got == [lines.get(p)], f"--only {p} prints the run's line for seed {p} ({got})")
    for p in ("3", "12"):
        r = run([sccal] + args + ["--only", p])
        check(r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "not a program of this run" in r.stderr,
              f"--only {p} (outside seeds 4..11): one line, exit 2")


def test_slurm():
    sdir = os.path.join(WORK, "slurm")
    st = run([os.path.join(os.path.dirname(HERE), "dse", "slurm_local.sh"), "start", sdir])
    if st.returncode == 77:
        print("SKIP: " + st.stderr.strip())
        sys.exit(77)
    check(st.returncode == 0, "single-node Slurm starts: " + st.stderr.strip())
    if st.returncode:
        return
    env = {"SLURM_CONF": os.path.join(sdir, "slurm.conf")}
    try:
        out = os.path.join(WORK, "out")
        r = psoak("--engine", "slurm", "-j", "0", "--shards", "3", "--out", out, "--", "--config", "random", "--count",
                  "30", "--seed", "9", env=env)
        print(r.stdout, r.stderr)
        check(r.returncode == 0 and "slurm: submitted job array" in r.stdout
              and "psoak: 30 programs, 0 mismatches (3 shards on slurm" in r.stdout, "the soak as a Slurm job array")
        outs = sorted(f for f in os.listdir(out) if f.endswith(".out"))
        check(outs == ["task-0.out", "task-1.out", "task-2.out"], f"one output per array task ({outs})")
    finally:
        run([os.path.join(os.path.dirname(HERE), "dse", "slurm_local.sh"), "stop", sdir], env)


os.makedirs(WORK, exist_ok=True)
{"local": test_local, "sccal": test_sccal, "slurm": test_slurm}[WHICH]()
if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
