# One design point of a sweep: its workload's cycles on a timed backend and its
# area from yosys, each cached by content so that a rerun, a resumed sweep or
# a larger sweep reuses them.
#
# Cache keys (sha256 of canonical JSON):
#   cycles: config + workload (an ONNX workload's files by content, its reference
#           too: the entry then holds the output's mismatches; its entry holds the plan's host
#           work too, hostmodel.facts) + DRAM model + backend + the tessera binary
#           (it holds the SystemC model, the JIT and the network) + for the rtl
#           backend the RTL sources and the verilator version
#   synth:  config + RTL sources + scripts/synth.sh + the yosys version + the mode (full
#           synth_xilinx or its fast estimate, scripts/synth.sh xc7-est)
# Entries are written atomically (temp file + rename): an interrupted sweep
# leaves only whole entries, and the next run computes the missing ones.
import glob
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time

from . import cfgfile, hostmodel


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tool_version(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
        return (p.stdout + p.stderr).strip().splitlines()[0]
    except (OSError, IndexError):
        return "missing"


def rtl_sources(root):
    """The RTL a point's numbers come from: the modules and the headers they include
    (assertion and port macros), so an edit to either invalidates the cache."""
    files = glob.glob(os.path.join(root, "hw", "rtl", "*.sv")) + glob.glob(os.path.join(root, "hw", "rtl", "*.svh"))
    return sorted(files)


def fingerprints(root, cli):
    """What, besides the config and workload, decides a point's numbers."""
    h = hashlib.sha256()
    for p in rtl_sources(root):
        h.update(os.path.basename(p).encode())
        h.update(open(p, "rb").read())
    rtl = h.hexdigest()
    return {"rtl": rtl, "synth_cmd": synth_cmd(root), "synth_sh": sha256_file(synth_cmd(root)),
            "cli": sha256_file(cli), "yosys": tool_version(["yosys", "-V"]),
            "verilator": tool_version(["verilator", "--version"])}


def synth_cmd(root):
    """scripts/synth.sh, or $TSR_DSE_SYNTH (a script with its arguments and summary line, e.g. a
    test's stand-in; its content is part of the cache key, so it never mixes with yosys results)."""
    return os.path.abspath(os.environ.get("TSR_DSE_SYNTH") or os.path.join(root, "scripts", "synth.sh"))


def _digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def cycles_key(ctx, cfg):
    # the config as the hardware sees it (every derived parameter), so that equivalent
    # spellings (LOG_BLOCK = 4 or LOG_BLOCK_IN = LOG_BLOCK_OUT = 4) share one entry
    fp = ctx["fingerprints"]
    # (an ONNX workload by its files' content, not where they are)
    w = {k: v for k, v in ctx["workload"].items() if k not in ("model", "input", "reference")}
    k = {"what": "cycles", "params": pkg_params(ctx, cfg), "workload": w, "dram": ctx["dram"],
         "backend": ctx["backend"], "cli": fp["cli"]}
    if w.get("kind") == "onnx":  # entries that hold the plan's host work (not those of before it)
        k["host_facts"] = 1
    if ctx["backend"] == "rtl":
        k.update(rtl=fp["rtl"], verilator=fp["verilator"])
    return _digest(k)


_RTL_WORDS = {}


def rtl_params(ctx, cfg):
    """The package parameters the RTL consumes: `tessera config emit-sv` of the config,
    keeping the localparams some hw/rtl source names (CLOCK_MHZ, e.g., is in the package
    but no RTL reads it, so configs that differ only in the clock share one synthesis)."""
    root = ctx["root"]
    if root not in _RTL_WORDS:
        words = set()
        for p in rtl_sources(root):
            words.update(re.findall(r"[A-Z][A-Z0-9_]+", open(p, encoding="utf-8").read()))
        _RTL_WORDS[root] = words
    params = pkg_params(ctx, cfg)
    return {k: v for k, v in params.items() if k in _RTL_WORDS[root]}


_PKG = {}


def pkg_params(ctx, cfg):
    """Every localparam of `tessera config emit-sv` for the config (memoized)."""
    memo = json.dumps(cfg, sort_keys=True)
    if memo in _PKG:
        return _PKG[memo]
    p, _, files = cfgfile.run_on_config(cfg, [ctx["cli"], "config", "emit-sv", "{cfg}", "-o", "{dir}/p.sv"], "dse-pkg-")
    if p.returncode != 0:
        raise RuntimeError(f"emit-sv failed: {p.stderr.strip()}")
    text = files["p.sv"]
    _PKG[memo] = {name: int(val) for name, val in re.findall(r"localparam int ([A-Z0-9_]+) = (-?\d+);", text)}
    return _PKG[memo]


_SYNTH_KEYS = {}


def synth_key(ctx, cfg):
    memo = json.dumps([cfg, ctx["synth"]], sort_keys=True)
    if memo not in _SYNTH_KEYS:
        _SYNTH_KEYS[memo] = _synth_key(ctx, cfg)
    return _SYNTH_KEYS[memo]


def _synth_key(ctx, cfg):
    fp = ctx["fingerprints"]
    return _digest({"what": "synth", "params": rtl_params(ctx, cfg), "rtl": fp["rtl"],
                    "synth_sh": fp["synth_sh"], "yosys": fp["yosys"], "mode": ctx["synth"]})


def _cache_path(ctx, kind, key):
    return os.path.join(ctx["cache"], kind, key[:2], key + ".json")


def cache_get(ctx, kind, key):
    try:
        with open(_cache_path(ctx, kind, key), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def cache_put(ctx, kind, key, entry):
    path = _cache_path(ctx, kind, key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        json.dump(entry, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def workload_cmd(ctx, cfg_path, backend):
    w, d = ctx["workload"], ctx["dram"]
    dev = ["--dram-bw", str(d["bytes_per_cycle"]), "--dram-latency", str(d["latency"]),
           "--dram-outstanding", str(d["outstanding"])]
    if backend == "systemc-timing":  # the SystemC model's timing-only mode: same cycles, no data
        backend = "systemc"
        dev.append("--timing-only")
    if w["kind"] == "onnx":
        # every device segment's table is printed; host-placed operators take no device cycles
        cmd = [ctx["cli"], "infer", w["model"], "-i", w["input"], "--backend", backend,
               "--config", cfg_path]
    elif w["kind"] == "resnet18-layers":
        cmd = [ctx["cli"], "bench", "--kind", "resnet18", "--backend", backend, "--config", cfg_path]
        if w.get("layers"):
            cmd += ["--layers", ",".join(w["layers"])]
    else:
        cmd = [ctx["cli"], "net", "resnet18", "--backend", backend, "--config", cfg_path,
               "--batch", str(w["batch"])]
        if w["kind"] == "resnet18-small":
            cmd += ["--small", ",".join(map(str, w["small"]))]
    return cmd + dev


def parse_cycles(kind, out):
    """Total device cycles and MACs of the workload from the CLI's report."""
    if kind == "resnet18-layers":
        m = re.search(r"^total\s+-\s+(\d+)\s+(\d+)\s", out, re.M)
        if m:
            return int(m.group(2)), int(m.group(1))
    elif kind == "onnx":
        # one totals line per device segment, run one after the other
        seg = re.findall(r"^\s+total\s+-\s+-\s+(\d+)\s+(\d+)\s", out, re.M)
        if seg:
            return sum(int(c) for _, c in seg), sum(int(m) for m, _ in seg)
        raise RuntimeError("the model has no operator on the device (no device segment in `tessera infer`)")
    else:
        m = re.search(r"^\s+total\s+-\s+-\s+(\d+)\s+(\d+)\s", out, re.M)
        if m:
            return int(m.group(2)), int(m.group(1))
    raise RuntimeError("no totals line in the workload's output")


def compare(out_path, w):
    """mismatches (elements of the output that differ from the workload's reference) and max_lsb
    (the largest |difference|, in units of the output's DequantizeLinear scale for a float output
    with one, else as the values are: integers directly)."""
    import numpy as np
    try:
        out = np.load(out_path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 (numpy raises several kinds)
        raise RuntimeError(f"the workload's output is not a readable .npy ({e})")
    ref = np.load(w["reference"], allow_pickle=False)
    name = os.path.basename(w["reference"])
    if ref.shape != out.shape:
        raise RuntimeError(f"workload.reference {name}: shape {list(ref.shape)} is not the model output's "
                           f"{list(out.shape)}")
    d = np.abs(out.astype(np.float64) - ref.astype(np.float64))
    if not np.isfinite(d).all():
        raise RuntimeError(f"workload.reference {name}: the output or the reference has NaN or infinite values")
    biggest = float(d.max())
    scale = w.get("output_scale") if out.dtype.kind == "f" else None
    return {"mismatches": int((out != ref).sum()), "values": int(ref.size),
            "max_lsb": int(round(biggest / scale)) if scale else (int(biggest) if out.dtype.kind in "biu"
                                                                 else round(biggest, 6))}


def run_cycles(ctx, cfg, backend, workdir):
    cfg_path = os.path.join(workdir, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=1)
    cmd = workload_cmd(ctx, cfg_path, backend)
    ref = ctx["workload"].get("reference")
    if ref:  # the accuracy objective: the first graph output, compared with the reference
        cmd[cmd.index("--config"):cmd.index("--config")] = ["-o", os.path.join(workdir, "out.npy")]
    onnx = ctx["workload"]["kind"] == "onnx"
    if onnx:  # the plan's host operators and round trips: the host-time model's input
        cmd[cmd.index("--config"):cmd.index("--config")] = ["--placement-json", os.path.join(workdir, "place.json")]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        err = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RuntimeError(f"workload failed (exit {p.returncode}): {err}")
    cycles, macs = parse_cycles(ctx["workload"]["kind"], p.stdout)
    ent = {"cycles": cycles, "macs": macs, "wall_s": round(wall, 3), "backend": backend,
           "command": " ".join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd))}
    if ref:
        ent.update(compare(os.path.join(workdir, "out.npy"), ctx["workload"]))
    if onnx:
        try:
            with open(os.path.join(workdir, "place.json"), encoding="utf-8") as f:
                ent["host"] = hostmodel.facts(json.load(f))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"the workload's placement JSON is unreadable ({type(e).__name__} {e})")
    return ent


SYNTH_FAMILY = {"full": "xc7", "estimate": "xc7-est"}
_AREA = re.compile(r"LUT (\d+)\s+FF (\d+)\s+BRAM36 (\d+)\s+BRAM18 (\d+)\s+DSP48 (\d+)\s+LUTRAM (\d+)")


def run_synth(ctx, cfg, workdir):
    cfg_path = os.path.join(workdir, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=1)
    t0 = time.monotonic()
    # the fourth argument of scripts/synth.sh: full synth_xilinx (xc7) or its fast estimate
    family = SYNTH_FAMILY[ctx["synth"]]
    # synth.sh's own content-keyed cache (under the DSE cache unless $SYNTH_CACHE is set): a
    # design synthesized before by synth.sh or `tessera fpga fit` with the same cache is reused
    env = dict(os.environ)
    env.setdefault("SYNTH_CACHE", os.path.join(ctx["cache"], "synth-sh"))
    p = subprocess.run([ctx["fingerprints"]["synth_cmd"], ctx["cli"], cfg_path,
                        os.path.join(workdir, "synth"), family], capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    if p.returncode != 0 or not _AREA.search(p.stdout):
        err = ((p.stdout + p.stderr).strip().splitlines() or ["(no message)"])[-1]
        raise RuntimeError(f"synthesis failed (exit {p.returncode}): {err}")
    return dict(parse_area(p.stdout), wall_s=round(wall, 3), tool=ctx["fingerprints"]["yosys"],
                mode=ctx["synth"])


def parse_area(text):
    """The cell counts of scripts/synth.sh's summary line, and yosys's own seconds (the
    line's "(N s)": the time of the synthesis even when synth.sh answered from its cache)."""
    m = _AREA.search(text)
    if not m:
        raise RuntimeError("no summary line (LUT .. FF .. BRAM36 ..)")
    lut, ff, b36, b18, dsp, lutram = map(int, m.groups())
    area = {"LUT": lut, "FF": ff, "BRAM36": b36, "BRAM18": b18, "DSP": dsp, "LUTRAM": lutram}
    t = re.search(r"\((\d+) s\)", text[m.end():].split("\n")[0])
    if t:
        area["yosys_s"] = int(t.group(1))
    return area


def evaluate(ctx, index, backend=None, log=None, parts=("cycles", "synth")):
    """Evaluate point `index` of the context: cycles (cached) and, unless synthesis is
    off, area (cached); `parts` selects which. Returns {"cycles": entry|error|None,
    "synth": entry|error|None}."""
    pt = ctx["points"][index]
    cfg = pt["config"]
    backend = backend or ctx["backend"]
    c = dict(ctx, backend=backend)
    out = {}
    with tempfile.TemporaryDirectory(prefix=f"dse-{pt['id']}-") as wd:
        ck = cycles_key(c, cfg)
        ent = cache_get(c, "cycles", ck)
        if ent is None and "cycles" in parts:
            try:
                ent = run_cycles(c, cfg, backend, wd)
            except RuntimeError as e:
                ent = {"error": str(e), "backend": backend}
            if "error" not in ent:  # failures are retried next time, not cached
                cache_put(c, "cycles", ck, ent)
            if log:
                log(f"{pt['id']} cycles on {backend}: "
                    f"{ent.get('cycles', ent.get('error'))} ({ent.get('wall_s', '-')} s)"
                    + (f"; {ent['mismatches']} of {ent['values']} output values differ from the reference, "
                       f"max {ent['max_lsb']} LSB" if "mismatches" in ent else "")
                    + (f"; {ent['host']['segments']} segments, {ent['host']['host_ops']} host operators"
                       if "host" in ent else ""))
        out["cycles"] = ent
        if ctx["synth"] == "none" or backend != ctx["backend"]:
            out["synth"] = None
            return out
        sk = synth_key(c, cfg)
        ent = cache_get(c, "synth", sk)
        if ent is None and "synth" in parts:
            try:
                ent = run_synth(c, cfg, wd)
            except RuntimeError as e:
                ent = {"error": str(e)}
            if "error" not in ent:
                cache_put(c, "synth", sk, ent)
            if log:
                log(f"{pt['id']} synth: " + (f"LUT {ent['LUT']} FF {ent['FF']} BRAM36 {ent['BRAM36']} "
                                             f"BRAM18 {ent['BRAM18']} DSP {ent['DSP']} ({ent['wall_s']} s)"
                                             if "error" not in ent else ent["error"]))
        out["synth"] = ent
    return out


def lookup(ctx, index, backend=None):
    """The cached results of a point without computing anything (None where missing)."""
    cfg = ctx["points"][index]["config"]
    c = dict(ctx, backend=backend or ctx["backend"])
    return {"cycles": cache_get(c, "cycles", cycles_key(c, cfg)),
            "synth": None if ctx["synth"] == "none" else cache_get(c, "synth", synth_key(c, cfg))}
