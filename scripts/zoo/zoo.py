#!/usr/bin/python3
"""zoo.py: the model zoo's table - which standard networks tessera imports, where their work runs and how
their results compare with ONNX Runtime's.

usage: zoo.py table [--models a,b|all] [--variants u8,s8] [--size S] [--inputs N] [--calib N]
                    [--dir DIR] [--tessera PATH] [--backend fsim|rtl|systemc] [--cycles]
                    [--rtl-check [--rtl-timeout SECONDS]] [--json]

Per model (build.py, cached in DIR/sS/) and activation variant (qdq.py, u8 and s8, cached):
- ORT: the float and the QDQ model run in ONNX Runtime on N seeded inputs (the QDQ model through
  scripts/onnx/ort_exact.py, so that ORT computes its exact integers); "fp32 top-1" is how often the
  QDQ model's top-1 class equals the float model's; "qdq ok" is qdq_check.py's verdict on the file.
- tessera: `tessera infer` on the QDQ model, its placement read from `--placement-json -` (one JSON
  object per node, names in full): "imports" is yes or the refusal's one line; "device MACs" the share
  of the Conv/Gemm/MatMul multiply-accumulates (computed here from the ONNX graph) whose nodes the CLI
  placed on the device;
  "segments" the device segments; "host ops" the nodes placed on the host; "round trips" the runs of
  host nodes between two device nodes in the placement order; then on the N inputs against ORT's QDQ
  run: top-1 agreement, output values that differ, and the largest difference in LSB of the final
  quantized output (its DequantizeLinear's scale).
With --cycles, one more run of the first input on the systemc backend (the timed model, within 0.06% of
the RTL) with the kernel cache off gives: total cycles, frames/s at the config's clock, the ratio of
the summed per-layer roofline bounds to the cycles, and the cold plan time (cycles and bounds summed
over the device segments; frames/s from the summed cycles, the host's time not counted).
With --rtl-check, the first input runs once more on the rtl backend (the Verilated RTL; slow, about
300 k cycles/s: a ResNet-50 takes minutes, so --rtl-timeout, default 3600 s, bounds it separately) and
once on fsim; the column "fsim == RTL" is yes when the two output files hold the same bytes, else the
first differing element, and gives the RTL's cycles (and their difference to systemc's with --cycles).
Prints a markdown table (stdout) and the total time; --json prints the rows as JSON instead.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import build  # noqa: E402
import common  # noqa: E402
from common import UsageError  # noqa: E402

VARIANTS = ("u8", "s8")


def place_args(a):
    """tessera infer's --place SPEC when given (--place), else nothing."""
    return ["--place", a.place] if getattr(a, "place", None) else []


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def sha(path, n=16):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()[:n]


def script_hashes(*names):
    h = hashlib.sha256()
    for nm in names:
        with open(os.path.join(common.HERE, nm), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


class Cache:
    """DIR/MODEL.cache.json: artifact file -> the key it was made from."""

    def __init__(self, d, model):
        self.path = os.path.join(d, model + ".cache.json")
        try:
            with open(self.path) as f:
                self.meta = json.load(f)
        except (OSError, ValueError):
            self.meta = {}

    def get(self, f, key):
        e = self.meta.get(os.path.basename(f))
        return e["value"] if e and e["key"] == key and os.path.exists(f) else None

    def put(self, f, key, value=True):
        self.meta[os.path.basename(f)] = {"key": key, "value": value}
        common.save_json(self.path, self.meta)


# --- MACs and placement -------------------------------------------------------------------------

def macs_per_node(model):
    """{node index: MACs} of the Conv, ConvTranspose, Gemm and MatMul nodes (batch included)."""
    import onnx
    m = onnx.shape_inference.infer_shapes(model)
    shapes = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else 1 for d in t.shape.dim]
    for t in m.graph.initializer:
        shapes[t.name] = list(t.dims)
    out = {}
    for i, n in enumerate(model.graph.node):
        o = shapes.get(n.output[0]) if n.output else None
        if n.op_type in ("Conv", "ConvTranspose"):
            w = shapes.get(n.input[1])
            if o and w:
                x = shapes.get(n.input[0])
                if n.op_type == "Conv":
                    out[i] = int(np.prod(o)) * int(np.prod(w[1:]))
                elif x:  # every input pixel times every kernel tap to Cout/group outputs
                    out[i] = int(np.prod(x)) * int(np.prod(w[1:]))
        elif n.op_type in ("Gemm", "MatMul"):
            a = shapes.get(n.input[0])
            if o and a:
                trans_a = any(at.name == "transA" and at.i for at in n.attribute)
                k = a[-2] if (n.op_type == "Gemm" and trans_a) else a[-1]
                out[i] = int(np.prod(o)) * int(k)
    return out


def parse_placement(text):
    """(segments, host ops, [(node index, side)]) from `tessera infer --placement-json -`'s stdout
    (graph order; side "device", "host", "folded", "alias", "view" or "constant"), None if absent."""
    try:
        j = json.loads(text)
        return j["segments"], j["host_ops"], [(int(p["index"]), p["side"]) for p in j["placement"]]
    except (ValueError, KeyError, TypeError):
        return None


def round_trips(placed):
    """Runs of host nodes with device nodes before and after them (in the placement order)."""
    seq = [("dev" if w.startswith("device") else "host") for _, w in placed
           if w.startswith("device") or w.startswith("host")]
    trips, seen_dev, in_host = 0, False, False
    for s in seq:
        if s == "dev":
            if in_host and seen_dev:
                trips += 1
            seen_dev, in_host = True, False
        else:
            in_host = True
    return trips


# --- one model, one variant ---------------------------------------------------------------------

def ort_outputs(cache, model_path, x_path, out_path, key, timing, s8_as_u8=False):
    if cache.get(out_path, key) is None:
        t0 = time.time()
        common.ort_run(model_path, x_path, out_path, batch=True, s8_as_u8=s8_as_u8)
        timing["ort"] += time.time() - t0
        cache.put(out_path, key)
    return np.load(out_path)


def run_tessera(a, qpath, x, d, tag, macs):
    """Import + run on every input; returns the row's tessera columns."""
    row = {"imports": None, "device_macs": None, "segments": None, "host_ops": None, "round_trips": None}
    inp = os.path.join(d, f"{tag}_x0.npy")
    common.save_npy(inp, x[:1])
    cmd = [a.tessera, "infer", qpath, "-i", inp, "--backend", a.backend, "--config", a.config, "--quiet",
           *place_args(a)]
    outs = []
    for i in range(len(x)):
        if i:
            common.save_npy(inp, x[i:i + 1])
        out = os.path.join(d, f"{tag}_t{i}.npy")
        try:
            p = subprocess.run(cmd + ["-o", out] + ([] if i else ["--placement-json", "-"]), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            row["imports"] = row["imports"] or f"timeout after {a.timeout} s"
            break
        if i == 0:
            pl = parse_placement(p.stdout)
            if pl:
                segs, hosts, placed = pl
                total = sum(macs.values())
                dev = sum(macs.get(k, 0) for k, w in placed if w.startswith("device"))
                row.update(segments=segs, host_ops=hosts, round_trips=round_trips(placed),
                           device_macs=(dev / total if total else None))
        if p.returncode:
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            msg = lines[-1] if lines else f"exit status {p.returncode}"
            msg = msg.replace(f"tessera infer: {qpath}: ", "").replace(inp, "INPUT.npy")
            if msg.startswith("tessera infer: "):
                msg = msg[len("tessera infer: "):]
            if i == 0:
                row["imports"] = msg
            else:
                row["run_error"] = f"input {i}: {msg}"
            break
        if i == 0:
            row["imports"] = "yes"
        outs.append(np.load(out))
        os.unlink(out)
    if os.path.exists(inp):
        os.unlink(inp)
    return row, (np.concatenate(outs) if outs else None)


TIMING = re.compile(r"total cycles (\d+), sum of per-layer bounds (\d+), ratio ([\d.]+); ([\d.]+) images/s at "
                    r"(\d+) MHz")
PLAN = re.compile(r"^plan ([\d.]+) ms wall", re.M)


def run_cycles(a, qpath, x, d, tag):
    """Cycles, frames/s, bound ratio and cold plan time of one input on the systemc backend."""
    inp = os.path.join(d, f"{tag}_c0.npy")
    common.save_npy(inp, x[:1])
    env = dict(os.environ, TESSERA_JIT_CACHE="off")
    try:
        p = subprocess.run([a.tessera, "infer", qpath, "-i", inp, "--backend", "systemc", "--config", a.config,
                            *place_args(a)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=a.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"cycles_error": f"timeout after {a.timeout} s"}
    finally:
        os.unlink(inp)
    ts, pl = TIMING.findall(p.stdout), PLAN.findall(p.stdout)
    if p.returncode or not ts:
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        return {"cycles_error": lines[-1] if lines else f"exit status {p.returncode}"}
    # one line per device segment (a ViT has dozens between its host ops): the model's are their sums
    cycles, bounds, mhz = sum(int(t[0]) for t in ts), sum(int(t[1]) for t in ts), int(ts[0][4])
    return {"cycles": cycles, "bound_ratio": bounds / cycles if cycles else 0.0,
            "fps": mhz * 1e6 / cycles if cycles else 0.0, "mhz": mhz, "segments_timed": len(ts),
            "plan_ms": sum(float(v) for v in pl) if pl else None}


TOTAL = re.compile(r"total cycles (\d+)")


def first_difference(f, r):
    """'' when the two arrays hold the same bytes, else where and how they first differ."""
    if f.dtype != r.dtype or f.shape != r.shape:
        return f"fsim {f.dtype}{list(f.shape)} vs RTL {r.dtype}{list(r.shape)}"
    if f.tobytes() == r.tobytes():
        return ""
    ff, rf = np.ascontiguousarray(f).reshape(-1), np.ascontiguousarray(r).reshape(-1)
    # compare element bytes (not values: NaN != NaN, and -0.0 == 0.0 would hide a difference)
    ne = (ff.view(np.uint8).reshape(ff.size, -1) != rf.view(np.uint8).reshape(rf.size, -1)).any(1)
    i, n = int(np.flatnonzero(ne)[0]), int(ne.sum())
    return f"no: {n} of {ff.size} differ, first [{i}] fsim {ff[i]} RTL {rf[i]}"


def rtl_check(a, qpath, x, d, tag):
    """The first input on the rtl and on the fsim backend: are the output bytes the same?"""
    inp = os.path.join(d, f"{tag}_r0.npy")
    outs = {b: os.path.join(d, f"{tag}_r0_{b}.npy") for b in ("fsim", "rtl")}
    common.save_npy(inp, x[:1])
    got, cycles = {}, None
    try:
        for b in ("fsim", "rtl"):
            tmo = a.rtl_timeout if b == "rtl" else a.timeout
            try:
                p = subprocess.run([a.tessera, "infer", qpath, "-i", inp, "--backend", b, "--config", a.config, "-o", outs[b],
                                    *place_args(a)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=tmo)
            except subprocess.TimeoutExpired:
                return {"rtl_check": f"{b}: timeout after {tmo} s"}
            if p.returncode or not os.path.exists(outs[b]):
                lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
                return {"rtl_check": f"{b}: " + (lines[-1] if lines else f"exit status {p.returncode}")}
            got[b] = np.load(outs[b])
            if b == "rtl":
                ts = TOTAL.findall(p.stdout)  # (one line per device segment)
                cycles = sum(int(t) for t in ts) if ts else None
    finally:
        for f in [inp] + list(outs.values()):
            if os.path.exists(f):
                os.unlink(f)
    diff = first_difference(got["fsim"], got["rtl"])
    return {"rtl_check": diff or "yes", "rtl_cycles": cycles}


def output_scale(qpath):
    """The scale of the DequantizeLinear that writes the graph's first output (common.output_scale)."""
    import onnx
    return common.output_scale(onnx.load(qpath))


def do_model(a, model, timing):
    import onnx
    import qdq
    import qdq_check
    d = common.ensure_dir(os.path.join(a.dir, f"s{a.size}"))
    cache = Cache(d, model)
    t0 = time.time()
    fpath, _, was_cached = build.build(model, a.size, d, log=log)
    timing["build"] += time.time() - t0
    fsha = sha(fpath)
    x_path = os.path.join(d, f"{model}_x{a.inputs}.npy")
    xkey = [model, a.size, a.inputs, common.EVAL_SEED, build.script_hash()]
    if cache.get(x_path, xkey) is None:
        common.save_npy(x_path, common.inputs(model, a.inputs, a.size, common.EVAL_SEED))
        cache.put(x_path, xkey)
    x = np.load(x_path)
    rows = []
    try:
        f_out = ort_outputs(cache, fpath, x_path, os.path.join(d, f"{model}_fp32_out{a.inputs}.npy"),
                            [fsha, a.inputs], timing)
    except common.OrtError as e:
        return [{"model": model, "variant": v, "error": f"ORT refused the float model: {e}"} for v in a.variants]
    fp32 = onnx.load(fpath)
    for v in a.variants:
        row = {"model": model, "variant": v, "fp32_mb": round(os.path.getsize(fpath) / 1e6, 1)}
        qpath = os.path.join(d, f"{model}_{v}.onnx")
        qkey = [fsha, v, a.calib, script_hashes("qdq.py", "common.py")]
        t0 = time.time()
        if cache.get(qpath, qkey) is None:
            try:
                common.save_onnx(qpath, qdq.quantize(fpath, model, v, a.calib, a.size))
            except common.OrtError as e:
                row["error"] = f"calibration: ORT failed: {e}"
                rows.append(row)
                continue
            cache.put(qpath, qkey)
            log(f"qdq: {model} {v} in {time.time() - t0:.1f} s")
        timing["quantize"] += time.time() - t0
        qsha = sha(qpath)
        row["qdq_mb"] = round(os.path.getsize(qpath) / 1e6, 1)
        qmodel = onnx.load(qpath)
        problems = qdq_check.check(qmodel, v, fp32)
        row["qdq_check"] = "ok" if not problems else f"{len(problems)} problems: {problems[0]}"
        try:
            mv = a.ort_s8_as_u8 and v == "s8"
            q_name = f"{model}_{v}_out{a.inputs}{'_asu8' if mv else ''}.npy"
            q_out = ort_outputs(cache, qpath, x_path, os.path.join(d, q_name),
                                [qsha, a.inputs] + (["s8_as_u8"] if mv else []), timing, s8_as_u8=mv)
            row["fp32_top1"] = float((q_out.argmax(-1) == f_out.argmax(-1)).mean())
            # random-weight networks have small top-1 margins: the logits' correlation says more
            row["fp32_corr"] = round(float(np.mean([np.corrcoef(p, q)[0, 1] for p, q in
                                                    zip(f_out.reshape(len(x), -1), q_out.reshape(len(x), -1))])), 4)
        except common.OrtError as e:
            row["error"] = f"ORT refused the QDQ model: {e}"
            rows.append(row)
            continue
        macs = macs_per_node(qmodel)
        row["gmacs"] = round(sum(macs.values()) / 1e9, 3)
        t0 = time.time()
        trow, t_out = run_tessera(a, qpath, x, d, f"{model}_{v}", macs)
        timing["tessera"] += time.time() - t0
        row.update(trow)
        if a.cycles and row.get("imports") == "yes":
            row.update(run_cycles(a, qpath, x, d, f"{model}_{v}"))
        if a.rtl_check and row.get("imports") == "yes":
            t0 = time.time()
            row.update(rtl_check(a, qpath, x, d, f"{model}_{v}"))
            timing["rtl"] += time.time() - t0
            log(f"rtl check: {model} {v}: fsim == RTL:{rtl_cell(row)[:-2]} in {time.time() - t0:.0f} s")
        if t_out is not None:
            ref = q_out[:len(t_out)]
            scale = output_scale(qpath)
            row["inputs"] = len(t_out)
            row["top1"] = float((t_out.argmax(-1) == ref.argmax(-1)).mean())
            row["values_differ"] = int((t_out != ref).sum())
            row["values"] = int(ref.size)
            row["max_lsb"] = int(round(float(np.abs(t_out - ref).max()) / scale)) if scale else None
        rows.append(row)
    return rows


# --- output -------------------------------------------------------------------------------------

def cell(v, fmt="{}"):
    return "-" if v is None else fmt.format(v)


def timing_cells(r):
    if r.get("cycles_error"):
        return f" {r['cycles_error'].replace('|', '/')} | | | |"
    if "cycles" not in r:
        return " - | - | - | - |"
    return (f" {r['cycles']:,} | {r['fps']:.1f} at {r['mhz']} MHz | {r['bound_ratio']:.3f} | "
            f"{cell(r.get('plan_ms'), '{:.0f}')} |")


def rtl_cell(r):
    if "rtl_check" not in r:
        return " - |"
    c = r["rtl_check"].replace("|", "/")
    if r.get("rtl_cycles") is not None:
        c += f"; RTL {r['rtl_cycles']:,} cycles"
        if r.get("cycles"):
            c += f" ({(r['rtl_cycles'] - r['cycles']) / r['cycles']:+.3%} vs systemc)"
    return f" {c} |"


def markdown(rows):
    head = ("| model | act | imports | device MACs | segments | host ops | round trips | top-1 vs ORT | "
            "values differ | max LSB | fp32 top-1 (ORT) | fp32 corr | qdq check | GMACs | MB fp32/qdq |")
    timed = any("cycles" in r or "cycles_error" in r for r in rows)
    rtl = any("rtl_check" in r for r in rows)
    if timed:
        head += " cycles (systemc) | frames/s | bound ratio | cold plan ms |"
    if rtl:
        head += " fsim == RTL |"
    lines = [head, "|" + "|".join(["---"] * (15 + 4 * timed + rtl)) + "|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['variant']} | {r['error']} |" + " |" * 12)
            continue
        imp = r.get("imports") or "-"
        imp = imp.replace("|", "\\|")
        if r.get("run_error"):
            imp += f" (run: {r['run_error']})"
        diff = f"{r['values_differ']} of {r['values']}" if r.get("values") else "-"
        lines.append(
            f"| {r['model']} | {r['variant']} | {imp} | {cell(r.get('device_macs'), '{:.1%}')} | "
            f"{cell(r.get('segments'))} | {cell(r.get('host_ops'))} | {cell(r.get('round_trips'))} | "
            f"{cell(r.get('top1'), '{:.0%}')} | {diff} | {cell(r.get('max_lsb'))} | "
            f"{cell(r.get('fp32_top1'), '{:.0%}')} | {cell(r.get('fp32_corr'))} | {r.get('qdq_check', '-')} | {cell(r.get('gmacs'))} | "
            f"{r.get('fp32_mb')}/{r.get('qdq_mb')} |" + (timing_cells(r) if timed else "") +
            (rtl_cell(r) if rtl else ""))
    return "\n".join(lines)


def table(a):
    models = common.parse_models(a.models)
    a.variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    bad = [v for v in a.variants if v not in VARIANTS]
    if bad or not a.variants:
        raise UsageError(f"--variants {a.variants and bad[0]!r}: must be u8, s8 or u8,s8")
    a.size = common.parse_size(a.size)
    if "vit_tiny" in models and a.size % 16:
        raise UsageError(f"--size {a.size}: vit_tiny needs a multiple of 16 (patch 16)")
    a.inputs = common.parse_count(a.inputs, "--inputs", 1, 10000)
    a.calib = common.parse_count(a.calib, "--calib", 1, 10000)
    a.timeout = common.parse_count(a.timeout, "--timeout", 1, 86400)
    if a.rtl_timeout is not None and not a.rtl_check:
        raise UsageError("--rtl-timeout: only with --rtl-check")
    a.rtl_timeout = common.parse_count(a.rtl_timeout or "3600", "--rtl-timeout", 1, 86400)
    if a.backend not in ("fsim", "rtl", "systemc"):
        raise UsageError(f"--backend {a.backend!r}: must be fsim, rtl or systemc")
    if not (os.path.isfile(a.tessera) and os.access(a.tessera, os.X_OK)):
        raise UsageError(f"{a.tessera}: no tessera executable (build it, or give --tessera PATH)")
    common.require_ort()
    common.ensure_dir(a.dir)
    t0 = time.time()
    timing = {"build": 0.0, "quantize": 0.0, "ort": 0.0, "tessera": 0.0, "rtl": 0.0}
    rows = []
    for m in models:
        log(f"zoo: {m}")
        rows += do_model(a, m, timing)
    total = time.time() - t0
    if a.json:
        print(json.dumps({"rows": rows, "size": a.size, "inputs": a.inputs, "calib": a.calib,
                          "seconds": {k: round(v, 1) for k, v in dict(timing, total=total).items()}}, indent=1))
    else:
        print(markdown(rows))
        print(f"\n{len(models)} models x {len(a.variants)} variants at {a.size}x{a.size}, {a.inputs} inputs, "
              f"{a.calib} calibration inputs; total {total:.1f} s (build {timing['build']:.1f}, quantize "
              f"{timing['quantize']:.1f}, ONNX Runtime {timing['ort']:.1f}, tessera {timing['tessera']:.1f}"
              + (f", RTL check {timing['rtl']:.1f}" if a.rtl_check else "") + ")")
    return 0


def main():
    ap = argparse.ArgumentParser(description="The model zoo's table: import, placement and accuracy vs ONNX Runtime.")
    sub = ap.add_subparsers(dest="cmd")
    t = sub.add_parser("table", help="build, quantize, run and print the table")
    t.add_argument("--models", default="all")
    t.add_argument("--variants", default="u8,s8")
    t.add_argument("--size", default="224")
    t.add_argument("--inputs", default="100")
    t.add_argument("--calib", default="16")
    t.add_argument("--dir", default=os.path.join(common.ROOT, "build", "zoo"))
    t.add_argument("--tessera", default=os.path.join(common.ROOT, "build", "tessera"))
    t.add_argument("--backend", default="fsim")
    t.add_argument("--config", default="default", help="config file or preset for tessera (default: default)")
    t.add_argument("--place", default=None, help="tessera infer --place KIND=device|host[,...] for every run")
    t.add_argument("--timeout", default="1800", help="seconds per tessera run (default 1800)")
    t.add_argument("--ort-s8-as-u8", action="store_true",
                   help="ONNX Runtime runs the s8 variants with their activation Q/DQ pairs moved to uint8 "
                        "(scripts/onnx/ort_exact.py --s8-as-u8): every QDQ conv a QLinearConv")
    t.add_argument("--json", action="store_true")
    t.add_argument("--cycles", action="store_true", help="add systemc cycles, frames/s, bound ratio, cold plan time")
    t.add_argument("--rtl-check", action="store_true",
                   help="run the first input on the rtl and on the fsim backend and compare the output bytes")
    t.add_argument("--rtl-timeout", default=None, help="seconds for the rtl run of --rtl-check (default 3600)")
    a = ap.parse_args()
    if a.cmd != "table":
        raise UsageError("expected a command: table (see --help)")
    return table(a)


if __name__ == "__main__":
    sys.exit(common.main_guard(main))
