#!/usr/bin/python3
# Tests of the design-space exploration (scripts/dse): run by ctest as
#   test_dse.py TESSERA_CLI WORKDIR {space|pareto|sweep|onnx|accuracy|host|area|hier|slurm|hostile|scale}
# space:  bad space files get the exact error, before anything runs
# pareto: the front of a hand-computed example; board fit by hand from boards/pynq-z1.json
# sweep:  a tiny sweep end to end (tiny-preset points, the small network):
#         cycles equal a direct `tessera net` run of the same config, the
#         table/CSV/plots are written, a rerun reuses the cache, a lost entry
#         (an interrupted sweep) is recomputed alone
# accuracy: an ONNX workload's reference output (workload.reference): the field checked first,
#         mismatches / max_lsb against an exact and a perturbed reference, the content in the cache key
# host:   the host-time model (space field "host"): the placement JSON's host work by hand,
#         frames/s = 1 / (device + host time) by hand, the front it decides (ACT_LUT), the field's errors
# area:   the area path (fits, budget, front, plots) with a stand-in for synth.sh,
#         --synth estimate and area-check (the estimate's error per class)
# hier:   scripts/synth_hier.py (the estimate) on a toy design: flip-flops equal the full
#         flow's, the cache keyed by the package constants a module names
# slurm:  the same sweep through a single-node Slurm started here; results
#         equal the local engine's (exit 77 = skipped: not root / no munge)
# hostile: what a careless or hostile user hands the DSE and the other Python entry
#         points (FIFOs, 1 GiB files, 100,000 brackets, YAML aliases, 10^10-point grids,
#         10^8 samples, a missing --cli, bad arguments, Ctrl-C): one line, exit 2, fast,
#         in bounded memory. Each run here has a wall-time limit (a hang fails, it does not
#         hang the test) and an address-space limit (a huge allocation fails).
# scale:  a legal 100,000-point grid checked in well under 120 s with a handful of config
#         runs (`tessera config show --batch`) and one JIT probe per hardware config; too
#         many configs to probe refused up front; the batch mode equals `config show`, and
#         its bad lines are each that line's error
import csv
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from tsrdse import boards, evaluate, pareto, report, space  # noqa: E402

CLI, WORK, WHICH = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
DSE = [sys.executable, os.path.join(HERE, "dse.py")]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def dse(*args, env=None):
    e = dict(os.environ, **(env or {}))
    return subprocess.run(DSE + list(args), capture_output=True, text=True, env=e)


def write_space(name, doc):
    p = os.path.join(WORK, name + ".json")
    with open(p, "w") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def test_space():
    # (space, the exact message after "dse: PATH: ")
    cases = [
        ('{"base": "tiny", "keys": {"LOG_BLOCK": [1, 2]', "malformed JSON near line 1: Expecting ',' delimiter"),
        ({"base": "tiny", "keys": {"LOG_BLOK": [1, 2]}},
         'keys: "LOG_BLOK" is not a config key (tessera config: point: unknown key "LOG_BLOK"; '
         "the keys are listed in isa/tsr_config.c and `tessera config show`)"),
        ({"base": "tiny", "keys": {"LOG_BATCH": [0, 5]}},
         "keys.LOG_BATCH: value 5 is legal in no point of the space: tessera config: point: key LOG_BATCH = 5 "
         "is out of range: allowed [0, 4]"),
        ({"base": "tiny", "keys": {"DRAM_BUS_WIDTH": {"range": [32, 128], "step": 16}}},
         "keys.DRAM_BUS_WIDTH: value 48 is legal in no point of the space: tessera config: point: key "
         "DRAM_BUS_WIDTH = 48 must be a power of two in [32, 512]"),
        ({"base": "tiny", "keys": {"LOG_BLOCK": [6]}},
         "the space has no legal point (1 points, all rejected; first: tessera config: point: key "
         "LOG_WGT_BUFF_SIZE = 10 is out of range: allowed [12, 24] for 4096-byte rows (at least one row, "
         "at most 2^16 rows and 16 MiB))"),
        ({"base": "tiny", "keys": {"LOG_BLOCK": [2]}, "constraints": {"boards": ["pynq-z9"]}},
         'constraints.boards: unknown board "pynq-z9" (boards/ has: ' + ", ".join(
             sorted(f[:-5] for f in os.listdir(os.path.join(ROOT, "boards")) if f.endswith(".json"))) + ")"),
        ({"base": "default", "keys": {"LOG_BLOCK": [4, 5]}, "constraints": {"boards": ["ice40-up5k"]},
          "synth": "none"},
         'constraints.boards: nothing in the space fits board "ice40-up5k": the smallest point needs 480 KiB '
         "of on-chip buffers, the board has at most 143 KiB of RAM (block RAM and all LUTs as RAM)"),
        ({"base": "tiny", "keys": {"LOG_BLOCK": [2]}, "constraints": {"budget": {"URAM": 3}}},
         'constraints.budget: unknown resource "URAM" (allowed: LUT, FF, BRAM36, DSP)'),
        ({"base": "tiny", "keys": {"LOG_BLOCK": {"range": [2, 1]}}}, "keys.LOG_BLOCK: empty range [2, 1]"),
        ({"base": "tiny", "keys": {"LOG_BLOCK": [2]}, "search": {"method": "anneal"}},
         'search.method "anneal" is unknown (allowed: grid, random)'),
        ({"base": "tiny", "keys": {"LOG_BLOCK": [2]}, "workload": {"kind": "vgg16"}},
         'workload.kind "vgg16" is unknown (allowed: resnet18, resnet18-small, resnet18-layers, onnx)'),
        ({"base": "tiny", "keys": {"LOG_BLOCK": [2]}, "sweep": 1},
         'unknown field "sweep" (allowed: name, base, keys, constraints, workload, search, dram, backend, synth, host)'),
        ({"base": "nosuch", "keys": {"LOG_BLOCK": [2]}},
         'base "nosuch" is neither a config file nor a preset in configs/'),
        # `tessera config` and the RTL take BLOCK_IN != BLOCK_OUT; the network's JIT does not
        ({"base": "tiny", "keys": {"LOG_BLOCK_IN": [2], "LOG_BLOCK_OUT": [3]}, "synth": "none"},
         "the space has no legal point (1 points, all rejected; first: the workload cannot run on this "
         "hardware: graph: dtensor: config has BLOCK_IN 4 != BLOCK_OUT 8: an operator's output rows cannot "
         "be the next operator's input rows (device tensors need equal blocks) "
         "(`tessera net resnet18 --small 8,2,2 --backend fsim`))"),
    ]
    for i, (doc, want) in enumerate(cases):
        p = write_space(f"bad{i}", doc)
        r = dse("check", p, "--cli", CLI)
        got = r.stderr.strip()
        check(r.returncode != 0 and got == f"dse: {p}: {want}",
              f"bad space {i}: {want[:60]}..." + ("" if got == f"dse: {p}: {want}" else f"\n     got: {got}"))
        check(r.stdout == "", f"bad space {i}: nothing listed or run")
    # the same space in YAML (python3-yaml) lists the same points as in JSON
    yp = os.path.join(WORK, "good.yaml")
    with open(yp, "w") as f:
        f.write("base: tiny\nkeys:\n  LOG_BLOCK: [1, 2]\n  LOG_ACC_BUFF_SIZE: {range: [11, 12]}\n")
    jp = write_space("good-json", {"base": "tiny", "keys": {"LOG_BLOCK": [1, 2], "LOG_ACC_BUFF_SIZE": [11, 12]}})
    ry, rj = dse("check", yp, "--cli", CLI), dse("check", jp, "--cli", CLI)
    try:
        import yaml  # noqa: F401
        check(ry.returncode == 0 and ry.stdout.splitlines()[1:] == rj.stdout.splitlines()[1:]
              and "4 legal points" in ry.stdout, "YAML space = JSON space (4 points)")
    except ImportError:
        check(ry.stderr.strip() == f"dse: {yp}: YAML space files need python3-yaml; use JSON instead",
              "YAML without python3-yaml: a clear error")
    # random search: `samples` legal points, the same for the same seed, listed with their draws
    rs = {"base": "tiny", "keys": {"LOG_BLOCK": [1, 2, 3], "LOG_ACC_BUFF_SIZE": {"range": [8, 14]},
                                   "CMD_QUEUE_DEPTH": {"range": [4, 64], "double": True}},
          "search": {"method": "random", "samples": 5, "seed": 3}}
    a1, a2 = dse("check", write_space("rand1", rs), "--cli", CLI), dse("check", write_space("rand2", rs), "--cli", CLI)
    pts = [ln for ln in a1.stdout.splitlines() if ln.startswith("  p")]
    check(a1.returncode == 0 and len(pts) == 5 and "5 legal points" in a1.stdout, f"random: 5 legal points ({len(pts)})")
    check(a1.stdout.replace("rand1", "") == a2.stdout.replace("rand2", ""), "random: same seed, same points")
    rs["search"]["seed"] = 4
    a3 = dse("check", write_space("rand3", rs), "--cli", CLI)
    check([ln for ln in a3.stdout.splitlines() if ln.startswith("  p")] != pts, "random: another seed, other points")
    # unequal blocks: illegal for the network (listed with the JIT's reason, not run), legal for
    # the layer set (conv2d alone lowers on them)
    blk = {"base": "tiny", "keys": {"LOG_BLOCK_IN": [2, 3], "LOG_BLOCK_OUT": [2, 3]}, "synth": "none",
           "workload": {"kind": "resnet18-small"}}
    r = dse("check", write_space("blocks", blk), "--cli", CLI)
    bad = sorted(ln.split(":")[0].strip() for ln in r.stdout.splitlines() if ln.startswith("  illegal"))
    check(r.returncode == 0 and "2 legal points, 2 illegal" in r.stdout
          and bad == ["illegal LOG_BLOCK_IN=2 LOG_BLOCK_OUT=3", "illegal LOG_BLOCK_IN=3 LOG_BLOCK_OUT=2"]
          and r.stdout.count("BLOCK_IN") >= 4 and "device tensors need equal blocks" in r.stdout,
          "network workload: the two unequal-block points are illegal, with the JIT's reason\n" + r.stdout + r.stderr)
    r = dse("check", write_space("blocks-layers", dict(blk, workload={"kind": "resnet18-layers"})), "--cli", CLI)
    check(r.returncode == 0 and "4 legal points, 0 illegal" in r.stdout,
          "layer-set workload: unequal blocks are legal\n" + r.stdout + r.stderr)
    # a legal space: points and the illegal combination reported
    p = write_space("good", {"base": "tiny", "keys": {"LOG_BLOCK": [2, 6], "LOG_WGT_BUFF_SIZE": [10, 12]}})
    r = dse("check", p, "--cli", CLI)
    check(r.returncode == 0 and "2 legal points, 2 illegal" in r.stdout and "LOG_WGT_BUFF_SIZE = 10 is out of range" in r.stdout
          and "LOG_BLOCK=6 LOG_WGT_BUFF_SIZE=12: the workload cannot run on this hardware: graph: node \"conv1\": "
              "conv2d: no tiling fits the buffers" in r.stdout,
          "good space: LOG_BLOCK=6 (4 KiB weight rows) with a 1 KiB weight buffer is not a config, with a "
          "one-row weight buffer the network's stem does not tile\n" + r.stdout + r.stderr)


def test_pareto():
    # hand-computed: maximise t, minimise a and b
    rows = [
        {"t": 10, "a": 5, "b": 5},   # 0 front (best t)
        {"t": 8, "a": 5, "b": 5},    # 1 dominated by 0
        {"t": 8, "a": 3, "b": 6},    # 2 front (smallest a among t >= 8)
        {"t": 2, "a": 1, "b": 9},    # 3 front (smallest a)
        {"t": 2, "a": 2, "b": 9},    # 4 dominated by 3
        {"t": 1, "a": 9, "b": 1},    # 5 front (smallest b)
        {"t": 10, "a": 5, "b": 5},   # 6 equal to 0: neither dominates, both on the front
        {"t": 7, "a": 3, "b": 6},    # 7 dominated by 2
    ]
    objs = (("t", +1), ("a", -1), ("b", -1))
    check(pareto.front(rows, objs) == [0, 2, 3, 5, 6], f"pareto front {pareto.front(rows, objs)} == [0, 2, 3, 5, 6]")
    check(pareto.front(rows, (("t", +1), ("a", -1))) == [0, 2, 3, 6],
          f"2-objective front {pareto.front(rows, (('t', +1), ('a', -1)))} == [0, 2, 3, 6]")
    check(pareto.dominates(rows[0], rows[1], objs) and not pareto.dominates(rows[0], rows[6], objs),
          "dominates: strictly better on one objective, no worse on the others")
    # with a workload reference, agreement is an objective: a design as costly and slower but with
    # fewer mismatches (an exact mode) stays on the front, with synthesis or without
    acc = [{"throughput": 10, "macs_per_cycle": 16, "sram_kib": 8, "LUT": 100, "DSP": 4, "BRAM36": 2, "mismatches": 7},
           {"throughput": 9, "macs_per_cycle": 16, "sram_kib": 8, "LUT": 100, "DSP": 4, "BRAM36": 2, "mismatches": 0},
           {"throughput": 9, "macs_per_cycle": 16, "sram_kib": 8, "LUT": 110, "DSP": 4, "BRAM36": 2, "mismatches": 7}]
    for synth in ("estimate", "none"):
        plain, with_ref = pareto.objectives(synth, None), pareto.objectives(synth, "ref.npy")
        check(pareto.front(acc, plain) == [0] and pareto.front(acc, with_ref) == [0, 1]
              and with_ref[-1] == ("mismatches", -1) and plain == (pareto.OBJECTIVES if synth != "none"
                                                                    else pareto.CONFIG_OBJECTIVES),
              f"synth {synth}: front {pareto.front(acc, plain)} == [0] without a reference, "
              f"{pareto.front(acc, with_ref)} == [0, 1] with one (fewer mismatches, slower: on the front)")
    # board fit against boards/pynq-z1.json by hand: LUT 53200 x 0.80 = 42560 usable,
    # 140 BRAM36 (a RAMB18 is half), 220 DSP, 106400 FF; clock at most the preset's 100 MHz
    b = boards.load(ROOT, "pynq-z1")
    a = {"LUT": 42000, "LUTRAM": 560, "FF": 1000, "BRAM36": 130, "BRAM18": 20, "DSP": 220}
    check(boards.fit(b, a)[0], "pynq-z1: LUT 42560 of 42560, BRAM 140 of 140, DSP 220 of 220 fits")
    check(boards.fit(b, dict(a, LUTRAM=561))[:2] == (False, "LUT"), "pynq-z1: one LUT more does not fit")
    check(boards.fit(b, dict(a, BRAM18=21))[:2] == (False, "BRAM36"), "pynq-z1: half a BRAM36 more does not fit")
    check(boards.fit(b, dict(a, DSP=221))[:2] == (False, "DSP"), "pynq-z1: DSP 221 does not fit")
    # the summary line scripts/synth.sh prints (its awk format string)
    m = evaluate._AREA.search("synth_xilinx c.json: LUT 812  FF 1303  BRAM36 16  BRAM18 3  DSP48 64  LUTRAM 40")
    check(m is not None and tuple(map(int, m.groups())) == (812, 1303, 16, 3, 64, 40), "synth.sh summary parsed")
    check(boards.fit(b, a, 100)[0] and boards.fit(b, a, 101)[:2] == (False, "clock"),
          "pynq-z1: 100 MHz fits, 101 MHz does not")
    # the cache key covers the RTL's headers (assertion and port macros), not only its modules
    fake = os.path.join(WORK, "fake-root")
    os.makedirs(os.path.join(fake, "hw", "rtl"), exist_ok=True)
    os.makedirs(os.path.join(fake, "scripts"), exist_ok=True)
    for name, text in (("hw/rtl/m.sv", "module m; endmodule\n"), ("hw/rtl/m.svh", "`define A 1\n"),
                       ("scripts/synth.sh", "#!/bin/sh\n")):
        with open(os.path.join(fake, name), "w") as f:
            f.write(text)
    before = evaluate.fingerprints(fake, CLI)["rtl"]
    with open(os.path.join(fake, "hw", "rtl", "m.svh"), "w") as f:
        f.write("`define A 2\n")
    check(evaluate.fingerprints(fake, CLI)["rtl"] != before, "an edit to an .svh header changes the RTL fingerprint")


SMALL = [16, 8, 10]


def test_best_tie():
    """best_per_board: among points of equal throughput that fit, the one on the front (not the first)."""
    b = boards.load(ROOT, "pynq-z1")
    rows = [{"id": "p001", "status": "ok", "throughput": 5.0, "fits": ["pynq-z1"]},
            {"id": "p002", "status": "ok", "throughput": 5.0, "fits": ["pynq-z1"], "pareto": True},
            {"id": "p000", "status": "ok", "throughput": 1.0, "fits": ["pynq-z1"], "pareto": True}]
    best = report.best_per_board(rows, [b])["pynq-z1"]["id"]
    check(best == "p002", f"equal throughput: the best per board is the point on the front ({best})")


def sweep_space(name):
    return write_space(name, {"name": name, "base": "tiny", "keys": {"LOG_BLOCK": [1, 2], "CLOCK_MHZ": [50, 100]},
                              "workload": {"kind": "resnet18-small", "small": SMALL},
                              "dram": {"board": "pynq-z1"}, "synth": "none"})


def read_csv(out):
    with open(os.path.join(out, "results.csv")) as f:
        return list(csv.DictReader(f))


def direct_cycles(log_block, mhz):
    cfg = dict(json.load(open(os.path.join(ROOT, "configs", "tiny.json"))), LOG_BLOCK=log_block, CLOCK_MHZ=mhz)
    p = os.path.join(WORK, f"direct-{log_block}-{mhz}.json")
    json.dump(cfg, open(p, "w"))
    r = subprocess.run([CLI, "net", "resnet18", "--backend", "systemc", "--config", p, "--small",
                        ",".join(map(str, SMALL)), "--dram-bw", "8"], capture_output=True, text=True, cwd=WORK)
    m = re.search(r"^total cycles (\d+)", r.stdout, re.M)
    return int(m.group(1)) if m else None


def test_sweep():
    sp = sweep_space("tiny2x2")
    out, cache = os.path.join(WORK, "out"), os.path.join(WORK, "cache")
    r = dse("sweep", sp, "-j", "2", "--out", out, "--cache", cache, "--cli", CLI)
    print(r.stdout, r.stderr)
    check(r.returncode == 0, "tiny sweep exits 0")
    rows = read_csv(out)
    check(len(rows) == 4 and all(x["status"] == "ok" for x in rows), "4 rows, all complete")
    for x in rows:
        ov = dict(kv.split("=") for kv in x["overrides"].split())
        want = direct_cycles(int(ov["LOG_BLOCK"]), int(ov["CLOCK_MHZ"]))
        check(want is not None and int(x["cycles"]) == want,
              f"{x['id']} cycles {x['cycles']} == direct tessera net {want}")
        check(abs(float(x["throughput"]) - int(ov["CLOCK_MHZ"]) * 1e6 / want) < 1e-3 * float(x["throughput"]),
              f"{x['id']} throughput = clock / cycles")
    # Pareto with synthesis off (throughput vs MACs/cycle and buffer KiB, equal buffers here):
    # the two 100 MHz points; each 50 MHz point is dominated by its 100 MHz twin
    front = sorted(x["overrides"] for x in rows if x["pareto"] == "1")
    check(front == ["LOG_BLOCK=1 CLOCK_MHZ=100", "LOG_BLOCK=2 CLOCK_MHZ=100"], f"front {front} = the 100 MHz points")
    check(os.path.isfile(os.path.join(out, "throughput.png")) and os.path.isfile(os.path.join(out, "throughput.svg")),
          "plots written (PNG and SVG)")
    check(os.path.getsize(os.path.join(out, "results.json")) > 0, "results.json written")
    # rerun: everything from the cache
    r = dse("sweep", sp, "--out", out, "--cache", cache, "--cli", CLI)
    check("4 cached, 0 to run" in r.stdout, "rerun: all 4 points cached")
    # an interrupted sweep: one entry lost; only it is recomputed
    entries = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(cache, "cycles")) for f in fs)
    check(len(entries) == 4, "4 cycle entries in the cache")
    os.unlink(entries[0])
    r = dse("sweep", sp, "--out", out, "--cache", cache, "--cli", CLI)
    def nowall(t):
        return [{k: v for k, v in x.items() if not k.endswith("wall_s")} for x in t]
    check("3 cached, 1 to run" in r.stdout and nowall(read_csv(out)) == nowall(rows),
          "resume: the lost point alone, same table (but its wall time)")
    # the default backend is systemc-timing (the model's --timing-only); the full model
    # (backend systemc): the same cycles, cached apart
    check("on systemc-timing" in r.stdout, "default backend: systemc-timing")
    doc = json.load(open(sp))
    doc["backend"] = "systemc"
    spt = write_space("tiny2x2-full", doc)
    outt = os.path.join(WORK, "out-full")
    r = dse("sweep", spt, "-j", "2", "--out", outt, "--cache", cache, "--cli", CLI)
    trows = read_csv(outt) if r.returncode == 0 else []
    same = sorted((x["overrides"], x["cycles"]) for x in trows) == sorted((x["overrides"], x["cycles"]) for x in rows)
    check(r.returncode == 0 and "0 cached, 4 to run" in r.stdout and len(trows) == 4 and same,
          "systemc (full model) sweep: the 4 points computed (not the timing-only cache entries), the same cycles")
    # --full-check K: K points of the timing-only sweep on the full model, cycle for cycle
    r = dse("sweep", sp, "--out", out, "--cache", cache, "--cli", CLI, "--full-check", "2")
    fc = json.load(open(os.path.join(out, "full_check.json"))) if r.returncode == 0 else []
    check(r.returncode == 0 and "full check: 2 points, the same cycles on every one" in r.stdout and len(fc) == 2
          and all(c["same"] and c["sweep_cycles"] == c["full_cycles"] for c in fc),
          "--full-check 2: two points, the full model's cycles equal the timing-only sweep's")
    # a full-check that finds a difference fails the sweep: a doctored timing-only cache entry
    ent = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(cache, "cycles")) for f in fs]
    doctored = 0
    for e in ent:
        j = json.load(open(e))
        if j.get("backend") == "systemc-timing":
            j["cycles"] += 1
            json.dump(j, open(e, "w"))
            doctored += 1
    r = dse("sweep", sp, "--out", out, "--cache", cache, "--cli", CLI, "--full-check", "1")
    check(doctored == 4 and r.returncode == 1 and "DIFFERENT" in r.stdout and "cycles differ" in r.stdout,
          "--full-check: a timing-only result one cycle off fails the sweep (exit 1), naming the point")
    r = dse("sweep", spt, "--out", outt, "--cache", cache, "--cli", CLI, "--full-check", "1")
    check(r.returncode == 2 and "--full-check compares a systemc-timing sweep" in r.stderr,
          "--full-check on a systemc sweep: refused naming why")
    doc["backend"] = "systemc-timing"
    doc["workload"] = {"kind": "onnx", "model": "m.onnx", "input": "x.npy", "reference": "y.npy"}
    r = dse("check", write_space("timing-ref", doc))
    check(r.returncode == 2 and "systemc-timing computes no outputs" in r.stderr,
          "systemc-timing with a reference: refused naming why")


def qlinearconv_model(path, seed):
    """A QLinearConv (uint8 4 -> 8 channels, 3x3, pad 1) as ONNX, its weights drawn from seed."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    inits = {"xs": np.array(0.02, np.float32), "xz": np.array(0, np.uint8),
             "w": rng.integers(-60, 60, (8, 4, 3, 3)).astype(np.int8), "ws": np.array(0.01, np.float32),
             "wz": np.array(0, np.int8), "ys": np.array(0.05, np.float32), "yz": np.array(10, np.uint8),
             "b": rng.integers(-100, 100, 8).astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                            pads=[1, 1, 1, 1])
    g = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 8, 8, 8])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with open(path, "wb") as f:
        f.write(m.SerializeToString())


def test_onnx():
    """An ONNX model as the workload: cycles of `tessera infer` on the sweep's backend, keyed by
    the files' content; bad model paths and models the device cannot run are refused first."""
    import numpy as np
    qlinearconv_model(os.path.join(WORK, "conv.onnx"), 1)
    np.save(os.path.join(WORK, "x.npy"), np.random.default_rng(2).integers(0, 256, (2, 4, 8, 8)).astype(np.uint8))
    with open(os.path.join(WORK, "junk.onnx"), "wb") as f:
        f.write(b"not a protobuf \xff\xff\xff")
    base = {"base": "tiny", "keys": {"LOG_BLOCK": [1, 2]}, "synth": "none", "dram": {"board": "pynq-z1"}}
    for doc, want in (
            ({"kind": "onnx", "model": "nosuch.onnx", "input": "x.npy"},
             "workload.model: cannot read nosuch.onnx: No such file or directory"),
            ({"kind": "onnx", "input": "x.npy"}, "workload.model must name an ONNX model file (kind onnx)"),
            ({"kind": "resnet18", "model": "conv.onnx"}, "workload.model needs kind onnx"),
            ({"kind": "onnx", "model": "conv.onnx", "input": "conv.onnx"},
             "workload.input: not a readable .npy file"),
            ({"kind": "onnx", "model": "conv.onnx", "input": "x.npy", "batch": 3},
             "workload.batch 3 is not the input's first dimension 2")):
        p = write_space("bad-onnx", dict(base, workload=doc))
        r = dse("check", p, "--cli", CLI)
        check(r.returncode != 0 and r.stderr.strip().startswith(f"dse: {p}: {want}"),
              f"onnx space refused: {want}" + ("" if want in r.stderr else f"\n     got: {r.stderr.strip()}"))
    p = write_space("junk", dict(base, workload={"kind": "onnx", "model": "junk.onnx", "input": "x.npy"}))
    r = dse("check", p, "--cli", CLI)
    check(r.returncode != 0 and "the space has no legal point" in r.stderr
          and "the workload cannot run on this hardware" in r.stderr and "junk.onnx" in r.stderr,
          "a model tessera cannot import: every point refused at check time, with the importer's message\n"
          + r.stderr)
    sp = write_space("conv", dict(base, workload={"kind": "onnx", "model": "conv.onnx", "input": "x.npy"}))
    out, cache = os.path.join(WORK, "out"), os.path.join(WORK, "cache")
    r = dse("sweep", sp, "-j", "2", "--out", out, "--cache", cache, "--cli", CLI)
    print(r.stdout, r.stderr)
    check(r.returncode == 0 and "workload onnx conv.onnx" in r.stdout, "onnx sweep exits 0")
    rows = read_csv(out)
    check(len(rows) == 2 and all(x["status"] == "ok" for x in rows), "2 rows, both complete")
    for x in rows:
        ov = dict(kv.split("=") for kv in x["overrides"].split())
        cfg = dict(json.load(open(os.path.join(ROOT, "configs", "tiny.json"))), LOG_BLOCK=int(ov["LOG_BLOCK"]))
        cp = os.path.join(WORK, f"direct-{ov['LOG_BLOCK']}.json")
        json.dump(cfg, open(cp, "w"))
        d = subprocess.run([CLI, "infer", "conv.onnx", "-i", "x.npy", "--backend", "systemc", "--config", cp,
                            "--dram-bw", "8"], capture_output=True, text=True, cwd=WORK)
        seg = re.findall(r"^\s+total\s+-\s+-\s+\d+\s+(\d+)\s", d.stdout, re.M)
        want = sum(map(int, seg)) if seg else None
        check(want and int(x["cycles"]) == want, f"{x['id']} cycles {x['cycles']} == direct tessera infer {want}")
        check(abs(float(x["throughput"]) - 2 * cfg["CLOCK_MHZ"] * 1e6 / want) < 1e-3 * float(x["throughput"]),
              f"{x['id']} throughput = 2 images x clock / cycles")
    r = dse("sweep", sp, "--out", out, "--cache", cache, "--cli", CLI)
    check("2 cached, 0 to run" in r.stdout, "rerun: both points cached")
    qlinearconv_model(os.path.join(WORK, "conv.onnx"), 3)  # other weights: other content, run again
    r = dse("sweep", sp, "--out", out, "--cache", cache, "--cli", CLI)
    check(r.returncode == 0 and "0 cached, 2 to run" in r.stdout, "a changed model is run again")


def test_accuracy():
    """The accuracy objective (workload.reference): the field checked before anything runs, each
    point's output compared with the reference (mismatches, max_lsb), the reference's content in
    the cache key, a shape that is not the output's a clear point error; without a reference the
    table is as before."""
    import numpy as np
    qlinearconv_model(os.path.join(WORK, "conv.onnx"), 1)
    np.save(os.path.join(WORK, "x.npy"), np.random.default_rng(2).integers(0, 256, (2, 4, 8, 8)).astype(np.uint8))
    # the exact reference: the model's own output on the device (fsim; the timed backends agree)
    r = subprocess.run([CLI, "infer", "conv.onnx", "-i", "x.npy", "-o", "ref.npy", "--config", "tiny", "--quiet"],
                       capture_output=True, text=True, cwd=WORK)
    check(r.returncode == 0, "reference output written by tessera infer " + r.stderr.strip())
    ref = np.load(os.path.join(WORK, "ref.npy"))
    bad = ref.copy().reshape(-1)
    at = np.flatnonzero(bad < 250)[:5]  # five elements off by 3 (no wrap-around)
    bad[at] += 3
    np.save(os.path.join(WORK, "ref-off.npy"), bad.reshape(ref.shape))
    np.save(os.path.join(WORK, "ref-shape.npy"), ref.reshape(-1))
    with open(os.path.join(WORK, "ref.txt"), "w") as f:
        f.write("1 2 3\n")
    base = {"base": "tiny", "keys": {"LOG_BLOCK": [1, 2]}, "synth": "none", "dram": {"board": "pynq-z1"}}
    wl = {"kind": "onnx", "model": "conv.onnx", "input": "x.npy"}
    out, cache = os.path.join(WORK, "out"), os.path.join(WORK, "cache")
    for doc, want in (
            (dict(wl, reference="nosuch.npy"), "workload.reference: cannot read nosuch.npy: No such file or directory"),
            (dict(wl, reference="ref.txt"), "workload.reference: not a readable .npy file"),
            ({"kind": "resnet18", "reference": "ref.npy"}, "workload.reference needs kind onnx")):
        p = write_space("bad-ref", dict(base, workload=doc))
        r = dse("sweep", p, "--out", out, "--cache", cache, "--cli", CLI)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"dse: {p}: {want}")
              and not os.path.exists(out) and not os.path.exists(cache),
              f"reference refused in one line, exit 2, nothing written: {want}"
              + ("" if want in r.stderr else f"\n     got: {r.stderr.strip()}"))

    def sweep(name, refname, plot=False):
        sp = write_space(name, dict(base, workload=dict(wl, **({"reference": refname} if refname else {}))))
        r = dse("sweep", sp, "--out", out, "--cache", cache, "--cli", CLI, *([] if plot else ["--no-plot"]))
        print(r.stdout, r.stderr)
        return r, read_csv(out)
    r, rows = sweep("exact", "ref.npy")
    check(r.returncode == 0 and len(rows) == 2, "sweep with an exact reference exits 0, 2 rows")
    check(all(x["mismatches"] == "0" and x["max_lsb"] == "0" for x in rows),
          f"exact reference: mismatches 0, max_lsb 0 ({[(x['mismatches'], x['max_lsb']) for x in rows]})")
    check(re.search(r"mismatch\s+LSB", r.stdout) is not None, "the summary shows the mismatches and LSB columns")
    res = json.load(open(os.path.join(out, "results.json")))
    check(all(p.get("mismatches") == 0 for p in res["points"]), "results.json has mismatches per point")
    r, rows = sweep("off", "ref-off.npy", plot=True)
    check(r.returncode == 0 and "0 cached, 2 to run" in r.stdout and os.path.isfile(os.path.join(out, "throughput.png")),
          "another reference's content is another cache entry (run again); plotted")
    check(all(x["mismatches"] == "5" and x["max_lsb"] == "3" for x in rows),
          f"perturbed reference: mismatches 5, max_lsb 3 ({[(x['mismatches'], x['max_lsb']) for x in rows]})")
    r, rows = sweep("shape", "ref-shape.npy")
    said = re.findall(r"^p00[01] cycles failed \(log [^)]*\): (.*)$", r.stdout, re.M)
    check(r.returncode == 1 and len(said) == 2 and all(
        x == "p00%d cycles on systemc: workload.reference ref-shape.npy: shape [1024] is not the model output's "
             "[2, 8, 8, 8] (- s)" % n for n, x in enumerate(said)) and all(x["status"] != "ok" for x in rows),
          f"a reference of another shape: each point fails, the sweep says why naming the field and both shapes {said}")
    r, rows = sweep("noref", None)
    with open(os.path.join(out, "results.csv")) as f:
        header = f.readline().strip().split(",")
    res = json.load(open(os.path.join(out, "results.json")))
    check(r.returncode == 0 and header == report.CSV_FIELDS and "mismatch" not in r.stdout
          and not any("mismatches" in p for p in res["points"]),
          "without a reference: the columns and summary of before")


def qdq_conv_sigmoid_model(path):
    """X -> QuantizeLinear -> 3x3 Conv -> Sigmoid -> 1x1 Conv -> Y in QDQ form (u8, 4 channels, 8x8): on a
    config without activation tables the Sigmoid's DequantizeLinear, Sigmoid and QuantizeLinear run on the
    host between two device segments; with ACT_LUT they are a table in the first conv's epilogue."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    n, c = helper.make_node, 4
    inits = {"xs": np.float32(0.02), "xz": np.uint8(128),
             "w1": rng.integers(-60, 60, (c, c, 3, 3)).astype(np.int8), "w1s": np.float32(0.01), "wz": np.int8(0),
             "b1": rng.integers(-200, 200, c).astype(np.int32), "b1s": np.float32(0.02 * 0.01), "bz": np.int32(0),
             "as": np.float32(0.05), "az": np.uint8(128), "ss": np.float32(1 / 256), "sz": np.uint8(0),
             "w2": rng.integers(-60, 60, (c, c, 1, 1)).astype(np.int8), "w2s": np.float32(0.01),
             "b2": rng.integers(-200, 200, c).astype(np.int32), "b2s": np.float32(0.01 / 256),
             "ys": np.float32(0.03), "yz": np.uint8(128)}
    nodes = [n("QuantizeLinear", ["X", "xs", "xz"], ["Xq"]), n("DequantizeLinear", ["Xq", "xs", "xz"], ["Xd"]),
             n("DequantizeLinear", ["w1", "w1s", "wz"], ["W1"]), n("DequantizeLinear", ["b1", "b1s", "bz"], ["B1"]),
             n("Conv", ["Xd", "W1", "B1"], ["A"], pads=[1, 1, 1, 1], name="conv1"),
             n("QuantizeLinear", ["A", "as", "az"], ["Aq"]), n("DequantizeLinear", ["Aq", "as", "az"], ["Ad"]),
             n("Sigmoid", ["Ad"], ["S"], name="sig"),
             n("QuantizeLinear", ["S", "ss", "sz"], ["Sq"]), n("DequantizeLinear", ["Sq", "ss", "sz"], ["Sd"]),
             n("DequantizeLinear", ["w2", "w2s", "wz"], ["W2"]), n("DequantizeLinear", ["b2", "b2s", "bz"], ["B2"]),
             n("Conv", ["Sd", "W2", "B2"], ["C"], name="conv2"),
             n("QuantizeLinear", ["C", "ys", "yz"], ["Cq"]), n("DequantizeLinear", ["Cq", "ys", "yz"], ["Y"])]
    g = helper.make_graph(nodes, "conv_sigmoid", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, c, 8, 8])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, c, 8, 8])],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with open(path, "wb") as f:
        f.write(m.SerializeToString())


def test_host():
    """The host-time model (space field "host", tsrdse/hostmodel.py): the placement JSON's host work
    counted by hand; frames/s = 1 / (device time + host time) with the host time computed by hand from
    it; a feature that moves host work onto the device at some device cycles (ACT_LUT) wins the front
    with host time counted and loses it on device cycles alone; the field's errors."""
    import numpy as np
    qdq_conv_sigmoid_model(os.path.join(WORK, "cs.onnx"))
    np.save(os.path.join(WORK, "x.npy"), np.random.default_rng(4).standard_normal((1, 4, 8, 8)).astype(np.float32))
    # the plan's host work by hand: 256 values per tensor; Q of X (256 float in, 256 u8 out), the chain
    # DQ, Sigmoid, Q (512 each), the output's DQ (512); segments conv1 and conv2, each 256 B in and out
    r = subprocess.run([CLI, "infer", "cs.onnx", "-i", "x.npy", "--config", "tiny", "--quiet", "--placement-json", "-"],
                       capture_output=True, text=True, cwd=WORK)
    pl = json.loads(r.stdout) if r.returncode == 0 else {}
    host = {p["name"]: p["elements"] for p in pl.get("placement", []) if p["side"] == "host"}
    check(host == {"Xq": 512, "Ad": 512, "sig": 512, "Sq": 512, "Y": 512} and pl.get("segments") == 2
          and pl.get("boundary_bytes") == 1024, f"placement JSON: host elements, segments, boundary bytes by hand "
          f"({host}, {pl.get('segments')}, {pl.get('boundary_bytes')})")
    check(all(p["elements"] == 0 for p in pl.get("placement", []) if p["side"] != "host"),
          "placement JSON: elements 0 off the host")
    base = {"base": "tiny", "keys": {"ACT_LUT": [0, 4]}, "synth": "none", "dram": {"board": "pynq-z1"},
            "workload": {"kind": "onnx", "model": "cs.onnx", "input": "x.npy"}}
    out, cache = os.path.join(WORK, "out"), os.path.join(WORK, "cache")
    for doc, want in (
            ({"factor": 0}, "host.factor must be a positive finite number"),
            ({"round_trip_us": -1}, "host.round_trip_us must be a non-negative finite number"),
            ({"facto": 2}, 'host: unknown field "facto" (allowed: board, factor, round_trip_us, ns_per_byte, '
                           'ns_per_element)'),
            ("nosuch", 'host.board: no host model for "nosuch"'),
            ({"ns_per_element": {"quantize": "fast"}}, 'host.ns_per_element."quantize" must be a non-negative'),
            ({"ns_per_element": [1]}, "host.ns_per_element must be an object")):
        p = write_space("bad-host", dict(base, host=doc))
        r = dse("check", p, "--cli", CLI)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"dse: {p}: {want}"),
              f"host refused in one line, exit 2: {want}" + ("" if want in r.stderr else f"\n     got: {r.stderr.strip()}"))
    p = write_space("bad-host", {"base": "tiny", "keys": {"LOG_BLOCK": [1]}, "host": "pynq-z1",
                                 "workload": {"kind": "resnet18-small", "small": SMALL}})
    r = dse("check", p, "--cli", CLI)
    check(r.returncode == 2 and "host needs workload kind onnx" in r.stderr, "host on a network workload refused")

    # 2 x this machine's time, 500 ns per element for every host kernel, 10 us per segment, 1 ns per byte
    model = {"factor": 2, "round_trip_us": 10, "ns_per_byte": 1, "ns_per_element": {"*": 500}}
    r = dse("sweep", write_space("host", dict(base, host=model)), "--out", out, "--cache", cache, "--cli", CLI,
            "--no-plot")
    print(r.stdout, r.stderr)
    rows = {x["overrides"]: x for x in read_csv(out)}
    check(r.returncode == 0 and set(rows) == {"ACT_LUT=0", "ACT_LUT=4"}, "host sweep: 2 points")
    exact = {" ".join(f"{k}={v}" for k, v in p["overrides"].items()): p
             for p in json.load(open(os.path.join(out, "results.json")))["points"]}
    # ACT_LUT 0: 2,560 elements, 2 segments, 1,024 B; ACT_LUT 4: the input's Q and the output's DQ
    # (1,024 elements), 1 segment, 512 B
    for ov, el, segs, nbytes in (("ACT_LUT=0", 2560, 2, 1024), ("ACT_LUT=4", 1024, 1, 512)):
        x = rows.get(ov, {})
        want_host = 2 * 500e-9 * el + segs * 10e-6 + nbytes * 1e-9
        got = exact.get(ov, {}).get("host_ms", float("nan")) / 1e3  # (the CSV's are rounded)
        fps = 1 / (int(x.get("cycles", 0) or 1) / 50e6 + want_host)
        check(abs(got - want_host) < 1e-12 and x.get("segments") == str(segs)
              and abs(float(x.get("throughput", "nan")) - fps) < 1e-3,
              f"{ov}: host {got * 1e3:.4f} ms == {want_host * 1e3:.4f} by hand, {x.get('segments')} segments, "
              f"throughput {x.get('throughput')} == 1 / (device + host) = {fps:.3f}")
    check(int(rows["ACT_LUT=4"]["cycles"]) > int(rows["ACT_LUT=0"]["cycles"]),
          "the tables cost device cycles (LOAD lut)")
    front = sorted(k for k, x in rows.items() if x["pareto"] == "1")
    check(front == ["ACT_LUT=4"], f"with host time the tables' point alone is on the front ({front})")
    check(re.search(r"host ms\s+segs", r.stdout) is not None and "host model: this machine, 2x" in r.stdout,
          "the summary shows the host model and the host ms / segments columns")
    res = json.load(open(os.path.join(out, "results.json")))
    check(res.get("host", {}).get("factor") == 2.0, "results.json names the host model")
    # the same points on device time alone (no "host"): the cheaper device run wins, the table is as before
    r = dse("sweep", write_space("nohost", base), "--out", out, "--cache", cache, "--cli", CLI, "--no-plot")
    rows = {x["overrides"]: x for x in read_csv(out)}
    front = sorted(k for k, x in rows.items() if x["pareto"] == "1")
    with open(os.path.join(out, "results.csv")) as f:
        header = f.readline().strip().split(",")
    check(r.returncode == 0 and "2 cached" in r.stdout and front == ["ACT_LUT=0"] and header == report.CSV_FIELDS,
          f"without host: cached entries reused, device cycles alone put ACT_LUT=0 on the front ({front}), "
          "the columns of before")


def test_area():
    """The area path with a stand-in for scripts/synth.sh (same summary line, numbers from the
    config: DSP = MACs, LUT = 100 x MACs): fits, budget, front and plot, hand-computed."""
    stub = os.path.join(WORK, "synth-stub.sh")
    with open(stub, "w") as f:
        f.write("#!/bin/sh\n# $1 = tessera, $2 = config.json, $4 = xc7 (full) or xc7-est (estimate: 10% more LUT/FF)\n"
                "b=$(sed -n 's/.*\"LOG_BLOCK\": *\\([0-9]*\\).*/\\1/p' \"$2\")\n"
                "m=$(( (1 << b) * (1 << b) )); k=100; f=1000\n"
                "[ \"$4\" = xc7-est ] && { k=110; f=1100; }\n"
                "echo \"synth_xilinx $4 $2: LUT $((k * m))  FF $f  BRAM36 4  BRAM18 1  DSP48 $m  LUTRAM 0 (7 s)\"\n")
    os.chmod(stub, 0o755)
    sp = write_space("area", {"name": "area", "base": "tiny", "keys": {"LOG_BLOCK": [1, 2], "CLOCK_MHZ": [50, 100]},
                              "workload": {"kind": "resnet18-small", "small": SMALL}, "dram": {"board": "pynq-z1"},
                              "constraints": {"boards": ["pynq-z1"], "budget": {"DSP": 10}}})
    out, cache = os.path.join(WORK, "out-area"), os.path.join(WORK, "cache-area")
    r = dse("sweep", sp, "-j", "2", "--out", out, "--cache", cache, "--cli", CLI, env={"TSR_DSE_SYNTH": stub})
    print(r.stdout, r.stderr)
    check(r.returncode == 0, "sweep with the synthesis stand-in exits 0")
    rows = {x["overrides"]: x for x in read_csv(out)}
    for blk, macs in ((1, 4), (2, 16)):
        for mhz in (50, 100):
            x = rows[f"LOG_BLOCK={blk} CLOCK_MHZ={mhz}"]
            check((x["DSP"], x["LUT"], x["BRAM36"]) == (str(macs), str(100 * macs), "4.5"),
                  f"LOG_BLOCK={blk} {mhz} MHz: DSP {x['DSP']} LUT {x['LUT']} BRAM36 {x['BRAM36']} (RAMB18 = half)")
            check(x["fits"] == "pynq-z1", f"LOG_BLOCK={blk} {mhz} MHz fits pynq-z1 (clock <= 100 MHz)")
    # the board column: the tightest class and its share (DSP 16 of 220 = 7%; LUT 1600 of 42560 = 4%)
    x = rows["LOG_BLOCK=2 CLOCK_MHZ=100"]
    check(x["fit:pynq-z1"] == "yes DSP 7%", f"fit:pynq-z1 column 'yes DSP 7%' ({x['fit:pynq-z1']})")
    front = [k for k, x in rows.items() if x["pareto"] == "1"]
    check(front == ["LOG_BLOCK=1 CLOCK_MHZ=100"],
          f"front within DSP <= 10: the 4-MAC point at 100 MHz alone ({front})")
    check(os.path.isfile(os.path.join(out, "pareto.png")) and os.path.isfile(os.path.join(out, "pareto.svg")),
          "Pareto plots written")
    check("best on pynq-z1: p001 (" in r.stdout, "best design on pynq-z1 within the budget: p001")
    # the stand-in's results never answer for yosys: another synthesis command, another key
    r2 = dse("sweep", sp, "--out", out, "--cache", cache, "--cli", CLI, "--no-plot",
             env={"TSR_DSE_SYNTH": os.path.join(ROOT, "scripts", "dse", "no-such-synth.sh")})
    check("4 cached" not in r2.stdout, "a different synthesis command does not reuse the stand-in's entries")
    # the estimate: its own cache entries (not the full synthesis's), its numbers in the table
    r3 = dse("sweep", sp, "--out", out + "-est", "--cache", cache, "--cli", CLI, "--no-plot", "--synth", "estimate",
             env={"TSR_DSE_SYNTH": stub})
    rows = {x["overrides"]: x for x in read_csv(out + "-est")}
    check("4 cached" not in r3.stdout and rows["LOG_BLOCK=2 CLOCK_MHZ=50"]["LUT"] == "1760"
          and rows["LOG_BLOCK=2 CLOCK_MHZ=50"]["synth_yosys_s"] == "7",
          f"--synth estimate: own entries, LUT 110 x 16 = 1760 ({rows['LOG_BLOCK=2 CLOCK_MHZ=50']['LUT']}), "
          "yosys seconds from the summary line")
    # area-check: the estimate's error per class against the full synthesis, run or given
    env = {"TSR_DSE_SYNTH": stub}
    r4 = dse("area-check", "tiny", "--cache", cache, "--cli", CLI, env=env)
    check(r4.returncode == 0 and "tiny: estimate LUT 1760 FF 1100 BRAM36 4.5 DSP 16 (7 s); full LUT 1600 FF 1000 "
          "BRAM36 4.5 DSP 16 (7 s); error LUT +10.0%, FF +10.0%, BRAM36 +0.0%, DSP +0.0%" in r4.stdout,
          "area-check tiny: LUT and FF +10%, BRAM and DSP exact\n" + r4.stdout + r4.stderr)
    ref = os.path.join(WORK, "full-result.txt")
    with open(ref, "w") as f:
        f.write("synth_xilinx xc7 tiny: LUT 1700  FF 1000  BRAM36 4  BRAM18 3  DSP48 20  LUTRAM 0  URAM 0 (2231 s)\n")
    r5 = dse("area-check", f"tiny={ref}", "--cache", cache, "--cli", CLI, env=env)
    check(r5.returncode == 0 and "(2231 s, from " in r5.stdout
          and "error LUT +3.5%, FF +10.0%, BRAM36 -18.2%, DSP -20.0%" in r5.stdout,
          "area-check against a given synth.sh result: 1760/1700, 4.5/5.5, 16/20\n" + r5.stdout + r5.stderr)
    r6 = dse("area-check", f"tiny={WORK}", "--cache", cache, "--cli", CLI, env=env)
    check(r6.returncode != 0 and "not a scripts/synth.sh result" in r6.stderr, "area-check: a bad result file is an error")


def test_hier():
    """scripts/synth_hier.py (the estimate behind synth.sh xc7-est) on a toy design against the
    full flow: registers do not optimize across module boundaries, so the flip-flop counts must
    match exactly; the cache is keyed by the package constants a module names."""
    rtl = os.path.join(WORK, "rtl")
    os.makedirs(rtl)
    srcs = {
        "tsr_top": "module tsr_top (input logic clk_i, input logic [7:0] d0_i, d1_i, d2_i, d3_i,\n"
                   "  output logic [25:0] q_o);\n"
                   "  logic [7:0] a, b, c; logic [1:0] r_q;\n"
                   # every flip-flop fed from its own input pin and seen at an output: nothing for
                   # the full flow to merge, trim or turn into a shift register
                   "  toy_reg #(.Width(3)) u_a (.clk_i, .d_i(d0_i), .q_o(a));\n"
                   "  toy_reg #(.Width(3)) u_b (.clk_i, .d_i(d1_i), .q_o(b));\n"
                   "  toy_reg #(.Width(5)) u_c (.clk_i, .d_i(d2_i), .q_o(c));\n"
                   "  always_ff @(posedge clk_i) r_q <= d3_i[1:0];\n"
                   "  assign q_o = {a, b, c, r_q};\nendmodule\n",
        # a register of Width bits plus a tsr_pkg::EXTRA-bit one (so a package constant matters)
        "toy_reg": "module toy_reg #(parameter int Width = 1) (input logic clk_i, input logic [7:0] d_i,\n"
                   "  output logic [7:0] q_o);\n  logic [Width-1:0] q_q; logic [tsr_pkg::EXTRA-1:0] e_q;\n"
                   "  always_ff @(posedge clk_i) begin q_q <= d_i[Width-1:0]; e_q <= d_i[7 -: tsr_pkg::EXTRA]; end\n"
                   "  assign q_o = 8'(q_q) ^ {e_q, (8 - tsr_pkg::EXTRA)'(0)};\nendmodule\n",
    }
    for m, t in srcs.items():
        with open(os.path.join(rtl, m + ".sv"), "w") as f:
            f.write(t)

    def pkg(extra, other):
        p = os.path.join(WORK, f"pkg-{extra}-{other}.sv")
        with open(p, "w") as f:
            f.write(f"package tsr_pkg;\n  localparam int EXTRA = {extra};\n  localparam int OTHER = {other};\nendpackage\n")
        return p

    def hier(p, *family):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "synth_hier.py"), p, rtl,
                            os.path.join(WORK, "work"), os.path.join(WORK, "cache"), *family],
                           capture_output=True, text=True)
        cells = {ln.split()[0]: int(ln.split()[1]) for ln in r.stdout.splitlines() if ln.strip()}
        return r, sum(n for c, n in cells.items() if c.startswith("FD"))

    def full(p, fam=""):
        st = os.path.join(WORK, "full-stat.txt")
        subprocess.run(["yosys", "-q", "-p", f"read_verilog -sv {p} {' '.join(os.path.join(rtl, m + '.sv') for m in srcs)}; "
                        f"synth_xilinx {fam} -top tsr_top -flatten -noiopad; tee -q -o {st} stat"], check=True)
        return sum(int(ln.split()[1]) for ln in open(st) if re.match(r"\s+FD\w+\s+\d+$", ln))

    p1 = pkg(2, 0)
    r, ff = hier(p1)
    want = full(p1)
    check(r.returncode == 0 and ff == want == 3 + 3 + 5 + 3 * 2 + 2,
          f"hier FF {ff} == full-flow FF {want} == 3+3+5 + 3 instances x 2 + 2\n{r.stderr}")
    check(r.stderr.count("synthesized") == 3, "three distinct modules synthesized (top, toy_reg x2 params)\n" + r.stderr)
    r, ff2 = hier(pkg(2, 7))
    check(ff2 == ff and r.stderr.count("cached") == 3 and "synthesized" not in r.stderr,
          "a package constant no module names: every module from the cache\n" + r.stderr)
    p3 = pkg(3, 0)
    r, ff3 = hier(p3)
    check(ff3 == full(p3) == 3 + 3 + 5 + 3 * 3 + 2 and r.stderr.count("synthesized") == 2
          and r.stderr.count("cached") == 1,
          f"EXTRA = 3: toy_reg synthesized again (both parameter sets), tsr_top cached; FF {ff3}\n" + r.stderr)
    # UltraScale+ (tessera fpga fit --estimate on an xcup board): its own cache entries, and the
    # same flip-flops as its full flow
    r, ffu = hier(p1, "xcup")
    check(r.returncode == 0 and ffu == full(p1, "-family xcup") == ff and r.stderr.count("synthesized") == 3,
          f"xcup: FF {ffu} == the xcup full flow's, every module synthesized for xcup (not the xc7 cache)\n" + r.stderr)
    r, _ = hier(p1, "zynq")
    check(r.returncode != 0 and "usage" in r.stderr, "an unknown family is a usage error\n" + r.stderr)


class Run:
    def __init__(self, rc, out, err, secs):
        self.returncode, self.stdout, self.stderr, self.secs = rc, out, err, secs


def _asan(cli):
    """Whether the CLI is built with AddressSanitizer (scripts/test.sh's second pass): it
    reserves terabytes of shadow address space before main(), which no address-space limit
    allows. The release pass keeps the limit, so a huge allocation still fails there."""
    try:
        return "libasan" in subprocess.run(["ldd", cli], capture_output=True, text=True).stdout
    except OSError:
        return False


ASAN_CLI = _asan(CLI)


def run_limited(argv, timeout=20, mem=1 << 30, env=None, cwd=None):
    """argv with its address space limited to `mem` bytes (RLIMIT_AS, inherited by its
    children; not under an ASan-built CLI, see _asan) and its wall time to `timeout` s: then
    its process group is killed and returncode is None."""
    def limit():
        if not ASAN_CLI:
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    t0 = time.monotonic()
    # (MALLOC_ARENA_MAX: each thread's malloc arena reserves 64 MiB of address space, which
    # would count against the limit on a machine with many CPUs)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         text=True, errors="replace", preexec_fn=limit, start_new_session=True,
                         env=dict(os.environ, MALLOC_ARENA_MAX="2", **(env or {})), cwd=cwd)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return Run(None, out, err + f"\n(killed after {timeout} s)", time.monotonic() - t0)
    return Run(p.returncode, out, err, time.monotonic() - t0)


def one_line(r, want, rc=2):
    """The run failed with exit `rc` and exactly one printable line on stderr holding `want`."""
    err = r.stderr.strip("\n")
    return (r.returncode == rc and len(err.splitlines()) == 1 and want in err and "Traceback" not in err
            and not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", err))


def refused(name, r, want, rc=2, secs=None):
    ok = one_line(r, want, rc) and (secs is None or r.secs < secs)
    check(ok, f"{name}: one line, exit {rc}, '{want[:70]}'" + (f", under {secs} s" if secs else "")
          + ("" if ok else f"\n     got exit {r.returncode} after {r.secs:.1f} s: {r.stderr.strip()[:600]!r}"))


def hdse(*args, **kw):
    return run_limited(DSE + list(args), **kw)


def counting_cli():
    """A stand-in for the CLI that counts its runs in a file, then runs the real one."""
    stub, count = os.path.join(WORK, "counting-tessera"), os.path.join(WORK, "cli-calls")
    with open(stub, "w") as f:
        f.write(f"#!/bin/sh\necho \"$1\" >> '{count}'\nexec '{CLI}' \"$@\"\n")
    os.chmod(stub, 0o755)

    def calls(by_command=False):
        """The runs since the last call (by_command: {subcommand: runs})."""
        lines = []
        if os.path.exists(count):
            with open(count) as f:
                lines = f.read().split()
            os.unlink(count)
        return {c: lines.count(c) for c in set(lines)} if by_command else len(lines)
    return stub, calls


def interrupt(proc, settle=0.0):
    """Ctrl-C (SIGINT) to proc once it runs a child process (so it is at work, not still starting),
    settle seconds later; its stderr once it has exited (killed after 20 s: the check then fails)."""
    def has_child(pid):
        try:
            return any(open(f"/proc/{pid}/task/{t}/children").read().strip() for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:  # a thread gone meanwhile
            return False
    for _ in range(200):
        if proc.poll() is not None or has_child(proc.pid):
            break
        time.sleep(0.05)
    time.sleep(settle)
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=20)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[1]


def test_hostile():
    try:
        import yaml  # noqa: F401
        have_yaml = True
    except ImportError:
        have_yaml = False
    good = {"base": "tiny", "keys": {"LOG_BLOCK": [2]}, "synth": "none"}

    # 2b: a FIFO (or any non-regular file) as the space or the base config: refused by
    # name, never opened for a blocking read
    fifo = os.path.join(WORK, "fifo.json")
    os.mkfifo(fifo)
    refused("FIFO space file", hdse("check", fifo, "--cli", CLI),
            f"{fifo}: the space file is a FIFO (named pipe), not a regular file", secs=10)
    refused("a directory as the space file", hdse("check", WORK, "--cli", CLI),
            f"{WORK}: the space file is a directory, not a regular file")
    refused("/dev/zero as the space file", hdse("check", "/dev/zero", "--cli", CLI),
            "/dev/zero: the space file is a character device, not a regular file", secs=10)
    os.mkfifo(os.path.join(WORK, "fifo-base.json"))
    p = write_space("fifo-base-space", dict(good, base="fifo-base.json"))
    refused("FIFO base config", hdse("check", p, "--cli", CLI),
            'base "fifo-base.json": the config file is a FIFO (named pipe), not a regular file', secs=10)

    # 7: a 1 GiB space file or base config (sparse: no disk): refused by its size before
    # reading, in 1 GiB of address space; 1 MiB + 1 byte is over, 1 MiB is not
    big = os.path.join(WORK, "big.json")
    with open(big, "wb") as f:
        f.truncate(1 << 30)
    refused("1 GiB space file", hdse("check", big, "--cli", CLI),
            f"{big}: the space file is 1073741824 bytes, more than the 1048576 allowed", secs=10)
    p = write_space("big-base-space", dict(good, base="big.json"))
    refused("1 GiB base config", hdse("check", p, "--cli", CLI),
            'base "big.json": the config file is 1073741824 bytes, more than the 1048576 allowed', secs=10)
    text = json.dumps(good)
    p = write_space("mib-plus-1", text + " " * ((1 << 20) + 1 - len(text)))
    refused("space file of 1 MiB + 1 byte", hdse("check", p, "--cli", CLI),
            "the space file is 1048577 bytes, more than the 1048576 allowed")
    p = write_space("mib", text + " " * ((1 << 20) - len(text)))
    r = hdse("check", p, "--cli", CLI)
    check(r.returncode == 0 and "1 legal points" in r.stdout, "space file of exactly 1 MiB: accepted\n" + r.stderr)

    # ... and read with a bound: a file whose size says 0 (as /proc's do) but that holds more
    try:
        from tsrdse import safeio
        try:
            safeio.read_bytes("/proc/self/status", "status file", 10)
            grew = "read whole"
        except safeio.InputError as e:
            grew = str(e)
    except ImportError as e:
        grew = str(e)
    check(grew == "/proc/self/status: the status file grew past 10 bytes while being read",
          f"a file longer than its size says: the read stops at the bound ({grew})")

    # 8: 100,000 nested brackets (JSON; YAML flow and block style; a base config): one line
    deep = "[" * 100000 + "]" * 100000
    p = write_space("deep", '{"base": "tiny", "keys": {"LOG_BLOCK": ' + deep + "}}")
    refused("100,000 nested brackets", hdse("check", p, "--cli", CLI),
            f"{p}: the space file nests brackets more than 32 deep", secs=10)
    p = write_space("deep-string", '{"base": "tiny", "keys": {"LOG_BLOCK": [2]}, "name": "' + "[" * 100 + '"}')
    refused("brackets inside a string are not nesting", hdse("check", p, "--cli", CLI),
            "name must be letters, digits")
    with open(os.path.join(WORK, "deep-base.json"), "w") as f:
        f.write('{"LOG_BLOCK": ' + deep + "}")
    p = write_space("deep-base-space", dict(good, base="deep-base.json"))
    refused("100,000 nested brackets in the base config", hdse("check", p, "--cli", CLI),
            'base "deep-base.json": the config file nests brackets more than 32 deep', secs=10)
    if have_yaml:
        for name, body in (("deep-flow", "base: tiny\nkeys:\n  LOG_BLOCK: " + deep + "\n"),
                           ("deep-block", "base: tiny\nkeys:\n  LOG_BLOCK:\n    " + "- " * 50000 + "2\n")):
            yp = os.path.join(WORK, name + ".yaml")
            with open(yp, "w") as f:
                f.write(body)
            refused(f"YAML nested 50,000+ deep ({name})", hdse("check", yp, "--cli", CLI), f"{yp}: ", secs=10)

    # 5: YAML "billion laughs" (0.4 KB; 9^9 strings expanded): anchors and aliases refused;
    # a big value in a message is cut (it used to be printed whole)
    if have_yaml:
        lol = ["&a [" + ", ".join(["lol"] * 9) + "]"] + [
            f"&{c} [" + ", ".join([f"*{chr(ord(c) - 1)}"] * 9) + "]" for c in "bcdefghi"]
        yp = os.path.join(WORK, "laughs.yaml")
        with open(yp, "w") as f:
            f.write("base: tiny\nkeys:\n  LOG_BLOCK: [[" + ", ".join(lol) + "]]\n")
        check(os.path.getsize(yp) < 600, f"billion laughs file is small ({os.path.getsize(yp)} bytes)")
        refused("YAML billion laughs", hdse("check", yp, "--cli", CLI),
                "YAML anchors and aliases (&, *) are not allowed in a space file (line 3)", secs=10)
    p = write_space("bigvalue", {"base": "tiny", "keys": {"LOG_BLOCK": [list(range(100000))]}})
    r = hdse("check", p, "--cli", CLI)
    refused("a 100,000-element value in a message", r,
            "keys.LOG_BLOCK: values must be integers (or strings), got [0, 1, 2")
    check(len(r.stderr) < 400, f"... and the message is short ({len(r.stderr)} characters)")

    # 6: the grid's size is the product of the axis lengths, checked before any point is
    # made and before the CLI checks a value (a 10^10-point grid: only the base is checked)
    stub, calls = counting_cli()
    p = write_space("grid1e10", {"base": "tiny", "keys": {"CLOCK_MHZ": {"range": [1, 100000]},
                                                          "CMD_QUEUE_DEPTH": {"range": [2, 100001]}}})
    calls()
    refused("10^10-point grid", hdse("check", p, "--cli", stub),
            f"{p}: the grid has 10000000000 points (more than 100000): use \"search\"", secs=10)
    n = calls()
    check(n == 0, f"10^10-point grid: refused before any CLI run ({n})")
    # a legal grid: one CLI run for the base, one for the keys, one for all the points (and
    # the network probes), not one per value or per point: 50 clocks x 2 DEP_QUEUE_DEPTH values
    # (neither the base's 4)
    p = write_space("grid100", {"base": "tiny", "keys": {"CLOCK_MHZ": {"range": [1, 50]}, "DEP_QUEUE_DEPTH": [5, 6]},
                                "synth": "none"})
    r = hdse("check", p, "--cli", stub, timeout=60)
    n = calls()
    check(r.returncode == 0 and "100 legal points, 0 illegal" in r.stdout and n <= 1 + 1 + 1 + 2,
          f"100-point grid: {n} CLI runs <= base 1 + keys 1 + points 1 + probes 2\n" + r.stderr[-300:])

    # 4: random search: samples bounded; a huge space is sampled without being made
    axes = {"CLOCK_MHZ": {"range": [1, 1000]}, "CMD_QUEUE_DEPTH": {"range": [2, 1001]},
            "DEP_QUEUE_DEPTH": {"range": [1, 1000]}}
    p = write_space("rand1e8", {"base": "tiny", "keys": axes, "search": {"method": "random", "samples": 10 ** 8}})
    refused("random search, samples 10^8 over 10^9 points", hdse("check", p, "--cli", CLI),
            "search.samples is 100000000, more than the 10000 allowed", secs=10)
    p = write_space("rand3", {"base": "tiny", "keys": dict(axes, DEP_QUEUE_DEPTH={"range": [1, 255]}),
                              "search": {"method": "random", "samples": 3, "seed": 5}, "synth": "none"})
    r = hdse("check", p, "--cli", stub)
    n = calls()
    check(r.returncode == 0 and "3 legal points" in r.stdout and r.secs < 15 and n < 30,
          f"random search, 3 samples of 2.5 * 10^8 points: {r.secs:.1f} s, {n} CLI runs (not one per value)\n"
          + r.stderr[-300:])
    draws = list(space._draws(__import__("random").Random(1), 10 ** 30, 1000)) if hasattr(space, "_draws") else []
    check(len(set(draws)) == 1000 and all(0 <= d < 10 ** 30 for d in draws),
          "1000 distinct draws from 10^30 points (more than random.sample can index)")

    # 10: --cli (or $TESSERA_CLI) that is missing, not executable or a directory: an error
    # naming it, never another binary in its place
    noexec = os.path.join(WORK, "noexec")
    with open(noexec, "w") as f:
        f.write("#!/bin/sh\n")
    p = write_space("cli", good)
    for cli, want in ((os.path.join(WORK, "nosuch"), "no such file"), (noexec, "not executable"),
                      (WORK, "not a regular file")):
        refused(f"--cli {os.path.basename(cli)}", hdse("check", p, "--cli", cli), f"dse: --cli {cli}: {want}")
    refused("$TESSERA_CLI missing", hdse("check", p, env={"TESSERA_CLI": os.path.join(WORK, "nosuch")}),
            f"dse: $TESSERA_CLI {os.path.join(WORK, 'nosuch')}: no such file")

    # every other bad input: one line, exit 2
    bad_utf8 = os.path.join(WORK, "latin1.json")
    with open(bad_utf8, "wb") as f:
        f.write(b'{"base": "tiny", "keys": {"LOG_BLOCK": [2]}, "name": "caf\xe9"}')
    ctx_list = write_space("ctx-list", [1, 2])
    for name, args, want in (
            ("no arguments", [], "dse.py: the following arguments are required"),
            ("check without a space", ["check"], "dse.py check: the following arguments are required: space"),
            ("-j 0", ["sweep", p, "-j", "0"], "-j needs a positive number"),
            ("-j 100000", ["sweep", p, "-j", "100000", "--cli", CLI, "--out", os.path.join(WORK, "out-j")],
             "-j 100000: at most 1024"),
            ("--rtl-check -1", ["sweep", p, "--rtl-check", "-1", "--cli", CLI, "--out", os.path.join(WORK, "out-j")],
             "--rtl-check -1: give 0..1024 points"),
            ("a space file that is not UTF-8", ["check", bad_utf8, "--cli", CLI], "the space file is not UTF-8 text"),
            ("NaN", ["check", write_space("nan", '{"base": "tiny", "keys": {"LOG_BLOCK": [2]}, '
                                                 '"constraints": {"budget": {"DSP": NaN}}}'), "--cli", CLI],
             "NaN is not a JSON number"),
            ("a key given twice", ["check", write_space("dup", '{"base": "tiny", "keys": {"LOG_BLOCK": [2]}, '
                                                               '"keys": {"LOG_BLOCK": [3]}}'), "--cli", CLI],
             'the key "keys" appears twice in one object'),
            ("an escape sequence in a key", ["check", write_space("ansi", {"base": "tiny", "keys": {
                "LOG\x1b[31mBLOCK\nX": [2]}}), "--cli", CLI], 'keys: "LOG\\u001b[31mBLOCK\\nX" is not a config key'),
            ("an integer of 5000 digits", ["check", write_space("digits", '{"base": "tiny", "keys": {"LOG_BLOCK": [' +
                                                                   "9" * 5000 + "]}}"), "--cli", CLI],
             "malformed JSON: Exceeds the limit"),
            ("point: a missing context", ["point", os.path.join(WORK, "nosuch.json"), "0"],
             "cannot open the sweep context: No such file or directory"),
            ("point: a FIFO context", ["point", fifo, "0"], "the sweep context is a FIFO"),
            ("point: a context that is a list", ["point", ctx_list, "0"], "not a sweep context"),
            ("area-check: no such config", ["area-check", "nosuch", "--cli", CLI],
             '"nosuch" is neither a config file nor a preset in configs/')):
        refused(f"dse {name}", hdse(*args, timeout=20), want)
    if have_yaml:
        yp = os.path.join(WORK, "tag.yaml")
        with open(yp, "w") as f:
            f.write("base: tiny\nkeys: !!python/object/apply:os.system ['echo owned']\n")
        r = hdse("check", yp, "--cli", CLI)
        refused("YAML python tag", r, "malformed YAML")
        check("owned" not in r.stdout, "... and nothing was run")
        yp = os.path.join(WORK, "nan.yaml")
        with open(yp, "w") as f:
            f.write("base: tiny\nkeys: {LOG_BLOCK: [2]}\nconstraints: {budget: {DSP: .nan}}\n")
        refused("YAML .nan budget", hdse("check", yp, "--cli", CLI), "constraints.budget.DSP must be a positive number")

    # Ctrl-C during a long check: one line, exit 130 (a check takes well under a second now:
    # a CLI that takes 3 s per run makes it long)
    p = write_space("long", {"base": "tiny", "keys": {"CLOCK_MHZ": {"range": [1, 1000]}, "DEP_QUEUE_DEPTH": [5, 6]},
                             "synth": "none"})
    slow = os.path.join(WORK, "slow-tessera")
    with open(slow, "w") as f:
        f.write(f"#!/bin/sh\nsleep 3\nexec '{CLI}' \"$@\"\n")
    os.chmod(slow, 0o755)
    proc = subprocess.Popen(DSE + ["check", p, "--cli", slow], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    # interrupt it once it is checking points (a CLI child is running), not while it starts
    err = interrupt(proc, settle=0.5)
    check(proc.returncode == 130 and err.strip() == "dse: interrupted",
          f"Ctrl-C: 'dse: interrupted', exit 130 (exit {proc.returncode}: {err.strip()[-300:]!r})")

    # the other Python entry points: bad arguments and input files, one line and exit 2
    py = sys.executable
    scripts = os.path.dirname(HERE)
    tl = [py, os.path.join(scripts, "timeline_png.py")]
    hier = [py, os.path.join(scripts, "synth_hier.py")]
    digits = [py, os.path.join(scripts, "onnx", "train_digits.py")]
    r18 = [py, os.path.join(scripts, "onnx", "resnet18_onnx.py")]
    trace = os.path.join(WORK, "trace.json")
    with open(trace, "w") as f:
        json.dump({"traceEvents": []}, f)
    png = os.path.join(WORK, "t.png")
    notdir = os.path.join(WORK, "notadir")
    with open(notdir, "w") as f:
        f.write("x")
    r18dir = os.path.join(WORK, "r18")
    os.makedirs(r18dir)
    r18fifo = os.path.join(WORK, "r18fifo")
    os.makedirs(r18fifo)
    os.mkfifo(os.path.join(r18fifo, "net.json"))
    with open(os.path.join(r18dir, "net.json"), "w") as f:
        f.write('{"tensors": [], "nodes": [{"kind": "conv"}]}')
    for name, argv, want in (
            ("timeline_png: no arguments", tl, "usage: timeline_png.py"),
            ("timeline_png: missing trace", tl + [os.path.join(WORK, "nosuch.json"), png],
             "cannot open the trace: No such file or directory"),
            ("timeline_png: FIFO trace", tl + [fifo, png], "the trace is a FIFO (named pipe), not a regular file"),
            ("timeline_png: not JSON", tl + [notdir, png], "not a timeline"),
            ("timeline_png: no traceEvents", tl + [ctx_list, png], "not a timeline"),
            ("timeline_png: bad --zoom", tl + [trace, png, "--zoom", "abc"], "--zoom"),
            ("timeline_png: --title without a value", tl + [trace, png, "--title"], "--title"),
            ("synth_hier: no arguments", hier, "usage: synth_hier.py"),
            ("synth_hier: missing package", hier + [os.path.join(WORK, "nosuch.sv"), WORK, WORK, WORK],
             "cannot open the package"),
            ("synth_hier: RTL_DIR not a directory", hier + [notdir, notdir, WORK, WORK], "not a directory"),
            ("train_digits: no arguments", digits, "usage: train_digits.py OUTDIR"),
            ("train_digits: OUTDIR is a file", digits + [notdir], "not a directory"),
            ("resnet18_onnx: no arguments", r18, "usage: resnet18_onnx.py DIR"),
            ("resnet18_onnx: missing DIR", r18 + [os.path.join(WORK, "nosuch")], "cannot open"),
            ("resnet18_onnx: DIR without net.json", r18 + [WORK], "net.json: no such file"),
            ("resnet18_onnx: FIFO net.json", r18 + [r18fifo], "net.json: the network description is not a regular file"),
            ("resnet18_onnx: net.json without fields", r18 + [r18dir], "net.json")):
        refused(name, run_limited(argv, timeout=60, mem=4 << 30), want)
    check(not os.path.exists(png), "timeline_png: no output written by a failing run")
    # Ctrl-C in another entry point: synth_hier.py while its (stand-in) yosys runs
    fakebin = os.path.join(WORK, "bin")
    os.makedirs(fakebin)
    with open(os.path.join(fakebin, "yosys"), "w") as f:
        f.write("#!/bin/sh\nsleep 30\n")
    os.chmod(os.path.join(fakebin, "yosys"), 0o755)
    proc = subprocess.Popen(hier + [notdir, WORK, os.path.join(WORK, "hw"), os.path.join(WORK, "hc")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PATH=fakebin + os.pathsep + os.environ["PATH"]))
    err = interrupt(proc)
    check(proc.returncode == 130 and err.strip() == "synth_hier: interrupted",
          f"synth_hier Ctrl-C: 'synth_hier: interrupted', exit 130 (exit {proc.returncode}: {err.strip()[-300:]!r})")


def show_text(cfg, label):
    """What the DSE took from one `tessera config show FILE` run before --batch: the derived
    values parsed from its text, or its error line with the file named `label`."""
    path = os.path.join(WORK, "one.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    p = subprocess.run([CLI, "config", "show", path], capture_output=True, text=True, errors="replace")
    if p.returncode:
        msg = p.stderr.strip().splitlines()[-1].replace(path, label)
        return "tessera config: " + re.sub(r"^(tessera: )?(config: )?(error: )?", "", msg)
    res = {"buffers": {}}
    for line in p.stdout.splitlines():
        m = re.match(r"(uop|inp|wgt|acc|out)\s+(\d+)\s+\d+\s+\d+\s+\d+$", line)
        if m:
            res["buffers"][m.group(1)] = int(m.group(2))
        m = re.match(r"target\s+\S+ \((\d+)-bit DRAM bus, (\d+) MHz\)", line)
        if m:
            res["bus_bits"], res["clock_mhz"] = int(m.group(1)), int(m.group(2))
        m = re.match(r"tensor op\s+.*= (\d+) MACs/op", line)
        if m:
            res["macs"] = int(m.group(1))
    return res


def test_scale():
    """Checking a legal 100,000-point grid: the configs in one `tessera config show --batch`
    run (not one process per point), the JIT probe once per distinct hardware config, all in
    well under 120 s; a grid needing more probes than MAX_PROBES is refused before any runs;
    the batch answers equal `config show`'s, and its bad lines are each that line's error."""
    tiny = space.load_config(ROOT, "tiny")

    # the batch answers are config show's, values and messages (the label in place of the file)
    cfgs = [tiny, space.load_config(ROOT, "default"), space.load_config(ROOT, "large"),
            dict(tiny, LOG_BATCH=1, LOG_BLOCK=4, LOG_ACC_BUFF_SIZE=17, LOG_INP_BUFF_SIZE=15, CLOCK_MHZ=333),
            dict(tiny, LOG_BLOCK=9), dict(tiny, FOO=1, BAR=2), dict(tiny, TARGET="zcu104"),
            {k: v for k, v in tiny.items() if k != "LOG_BATCH"}, dict(tiny, HW_VER="x" * 40),
            dict(tiny, DSP_PACK=1, LOG_INP_WIDTH=4), dict(tiny, **{"K\u2028\u00e9": 1})]
    space._SHOW_CACHE.clear()
    got = space.config_show_many(CLI, cfgs, "point")
    for c, g in zip(cfgs, got):
        want = show_text(c, "point")
        check(g == want, f"config show --batch equals config show: {str(want)[:90]}"
              + ("" if g == want else f"\n     got {g}"))

    # the batch mode's bad lines: each one error line; the good line after it is answered
    good = json.dumps(tiny)
    bad = [b"{\"LOG_BLOCK\": 4", b'{"LOG_BLOCK": 2, "FOO": 1}', b'{"HW_VER": "' + b"x" * (2 << 20) + b'"}', b"",
           b'{"HW_VER": "caf\xe9"}', b"[1, 2]", b'{"A": 1}\0']
    want = ["line 1: malformed JSON near line 1", 'line 3: unknown key "FOO"',
            "line 5: the config line is 2097166 bytes, more than the 1048576 allowed",
            "line 7: empty line (give one JSON config per line)", "line 9: not UTF-8 text (byte 16)",
            "line 11: malformed JSON config: top level must be an object",
            "line 13: malformed JSON: line contains a NUL byte"]
    data = b"".join(b + b"\n" + good.encode() + b"\n" for b in bad)
    t0 = time.monotonic()
    p = subprocess.run([CLI, "config", "show", "--batch"], input=data, capture_output=True, timeout=60)
    lines = p.stdout.decode("utf-8").split("\n")
    check(p.returncode == 0 and len(lines) == 2 * len(bad) + 1 and lines[-1] == "" and not p.stderr,
          f"config show --batch: {len(bad)} bad lines, each answered, exit 0 ({time.monotonic() - t0:.2f} s)\n"
          + p.stderr.decode(errors="replace")[-300:])
    answer = show_text(tiny, "x")
    for i, w in enumerate(want):
        if 2 * i + 1 >= len(lines):
            break
        e, a = json.loads(lines[2 * i]), json.loads(lines[2 * i + 1])
        check(e == {"error": w} and a == answer, f"config show --batch: bad line '{w[:50]}', the next is answered"
              + ("" if e == {"error": w} and a == answer else f"\n     got {e} then {a}"))

    # a legal 100,000-point grid (the issue's: tiny, 1,000 clocks x 100 DEP_QUEUE_DEPTH values,
    # the network workload): under 90 s, 3 config runs (base, keys, points), one probe per
    # distinct config without its clock (100); it took 14 min when each point was a process
    stub, calls = counting_cli()
    calls()
    p = write_space("grid1e5", {"base": "tiny", "keys": {"CLOCK_MHZ": {"range": [1, 1000]},
                                                         "DEP_QUEUE_DEPTH": {"range": [1, 100]}}, "synth": "none"})
    r = run_limited(DSE + ["check", p, "--cli", stub], timeout=90, mem=2 << 30)
    n = calls(by_command=True)
    ok = (r.returncode == 0 and "100000 legal points, 0 illegal" in r.stdout.splitlines()[0]
          and n.get("config", 0) <= 3 and n.get("net", 0) == 100 and sum(n.values()) == n.get("config", 0) + 100)
    check(ok, f"100,000-point grid: checked in {r.secs:.1f} s (limit 90), CLI runs {n}: config <= 3, "
              "net probes = 100"
          + ("" if ok else f"\n     exit {r.returncode}: {r.stderr.strip()[-400:]!r}"))
    print(f"     (100,000-point grid: {r.secs:.1f} s wall)")
    # the same without probes (the layer set): 3 CLI runs in all
    p = write_space("grid1e5-layers", {"base": "tiny", "keys": {"CLOCK_MHZ": {"range": [1, 1000]},
                                                                "DEP_QUEUE_DEPTH": {"range": [1, 100]}},
                                       "workload": {"kind": "resnet18-layers", "layers": ["C1"]}, "synth": "none"})
    r = run_limited(DSE + ["check", p, "--cli", stub], timeout=90, mem=2 << 30)
    n = calls()
    check(r.returncode == 0 and "100000 legal points" in r.stdout and n <= 3,
          f"100,000-point grid, layer workload: {r.secs:.1f} s, {n} CLI runs (<= 3)\n" + r.stderr[-300:])

    # more distinct hardware configs than the probe may run on: refused before any probe
    p = write_space("probes", {"base": "tiny", "synth": "none",
                               "keys": {"CLOCK_MHZ": [50, 100], "DEP_QUEUE_DEPTH": {"range": [1, 255]},
                                        "CMD_QUEUE_DEPTH": [16, 32, 64, 128, 256]}})
    r = run_limited(DSE + ["check", p, "--cli", stub], timeout=30)
    n = calls(by_command=True)
    refused("a grid of 1,275 hardware configs to probe", r,
            f"{p}: the grid's legal points are 1275 distinct hardware configs (points apart from CLOCK_MHZ); the "
            f"workload's JIT probe (one `tessera net resnet18 --small 8,2,2 ...` or ONNX run each, ~0.1 s) runs on "
            f"at most {space.MAX_PROBES}", secs=30)
    check("net" not in n, f"... before any probe ran ({n})")
    # a random search stops once it has drawn more configs to probe than the limit (here
    # lowered to 4): unequal blocks plan on no network, so every draw is probed and fails
    p = write_space("probes-rand", {"base": "tiny", "keys": {"LOG_BLOCK_IN": [2, 3], "LOG_BLOCK_OUT": [3],
                                                             "DEP_QUEUE_DEPTH": {"range": [1, 255]}},
                                    "search": {"method": "random", "samples": 3, "seed": 1}, "synth": "none"})
    limit, space.MAX_PROBES = space.MAX_PROBES, 4
    try:
        space.load(p, ROOT, stub)
        got = "accepted"
    except space.SpaceError as e:
        got = str(e)
    finally:
        space.MAX_PROBES = limit
    n = calls(by_command=True)
    check(got.startswith(f"{p}: random search drew more than 4 distinct hardware configs before finding 3 legal "
                         "points") and n.get("net", 0) <= 4,
          f"random search: stopped at the probe limit (4 here), {n.get('net', 0)} probes run\n     {got[:300]}")


def test_slurm():
    sdir = os.path.join(WORK, "slurm")
    st = subprocess.run([os.path.join(HERE, "slurm_local.sh"), "start", sdir], capture_output=True, text=True)
    if st.returncode == 77:
        print("SKIP: " + st.stderr.strip())
        sys.exit(77)
    check(st.returncode == 0, "single-node Slurm starts: " + st.stderr.strip())
    if st.returncode:
        return
    env = {"SLURM_CONF": os.path.join(sdir, "slurm.conf")}
    try:
        sp = sweep_space("tiny2x2")
        out, cache = os.path.join(WORK, "out-slurm"), os.path.join(WORK, "cache-slurm")
        r = dse("sweep", sp, "--engine", "slurm", "-j", "0", "--out", out, "--cache", cache, "--cli", CLI, env=env)
        print(r.stdout, r.stderr)
        check(r.returncode == 0 and "slurm: submitted job array" in r.stdout, "slurm sweep runs as a job array")
        logs = [f for f in os.listdir(os.path.join(out, "slurm")) if f.endswith(".out")]
        check(len(logs) == 4, f"4 array task logs ({len(logs)})")
        rows = read_csv(out)
        for x in rows:
            ov = dict(kv.split("=") for kv in x["overrides"].split())
            want = direct_cycles(int(ov["LOG_BLOCK"]), int(ov["CLOCK_MHZ"]))
            check(x["status"] == "ok" and int(x["cycles"]) == want, f"slurm {x['id']} cycles {x['cycles']} == {want}")
    finally:
        subprocess.run([os.path.join(HERE, "slurm_local.sh"), "stop", sdir], env=dict(os.environ, **env))


if __name__ == "__main__":
    if os.path.isdir(WORK):
        shutil.rmtree(WORK)
    os.makedirs(WORK)
    {"space": test_space, "pareto": lambda: (test_pareto(), test_best_tie()), "sweep": test_sweep, "onnx": test_onnx,
     "accuracy": test_accuracy, "host": test_host, "area": test_area,
     "hier": test_hier, "slurm": test_slurm, "hostile": test_hostile, "scale": test_scale}[WHICH]()
    print(f"{WHICH}: {len(failures)} failures")
    sys.exit(1 if failures else 0)
