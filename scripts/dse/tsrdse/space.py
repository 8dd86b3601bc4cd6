# Space files for the design-space exploration: load (JSON, or YAML when
# python3-yaml is installed), check every field, expand into points, and
# check every point with `tessera config show --batch` (one process for all
# the points) before anything runs.
#
# Why the CLI and not a table here: the one table of config keys and their
# ranges is isa/tsr_config.c. A copy in Python would drift; asking the CLI
# gives exactly the errors a user would get for the generated config, and
# those errors name the key and the allowed range.
import itertools
import json
import os
import random
import re
import subprocess
import sys

from . import boards as boards_mod
from . import cfgfile, hostmodel, safeio
from .safeio import show


class SpaceError(Exception):
    """A bad space file: the message names the file, the field and the problem."""


TOP_FIELDS = ("name", "base", "keys", "constraints", "workload", "search", "dram", "backend",
              "synth", "host")
WORKLOADS = ("resnet18", "resnet18-small", "resnet18-layers", "onnx")
# "systemc-timing": the SystemC model's timing-only mode (`--timing-only`: the same cycles without
# computing the data, several times faster; no outputs, so no accuracy objective): the default
BACKENDS = ("systemc", "systemc-timing", "rtl", "fsim")
SYNTH_MODES = ("full", "estimate", "none")
RESOURCES = ("LUT", "FF", "BRAM36", "DSP")
# Limits (scripts/dse/README.md): every point of a grid is made in Python and checked by
# the CLI (all in one `tessera config show --batch`, ~10 us each, and ~30 us of Python), so
# the grid is bounded; a random search draws at most 20 x samples points, so samples are
# bounded; the counts are products of the axis lengths, computed before any point is made
# or any CLI call. The network and ONNX workloads also run one JIT probe (a process,
# ~20-100 ms) per distinct hardware config, so those are bounded too (MAX_PROBES).
MAX_POINTS = 100000  # grid points; larger spaces must use random sampling
MAX_PROBES = 1000  # distinct configs apart from CLOCK_MHZ the workload's JIT probe runs on
MAX_SAMPLES = 10000  # random search: legal points wanted
MAX_KEYS = 64  # swept keys (the config has 20)
MAX_STRING = 256  # characters of a string value
DRAWS_PER_SAMPLE = 20  # random search: draws per wanted point at most
MAX_WORKLOAD_FILE = 1 << 30  # an ONNX model or its input (hashed, not held in memory)


def _load_text(path):
    # the space file: a regular file of at most 1 MiB, nesting and YAML aliases bounded
    try:
        text = safeio.read_text(path, "space file")
        if path.endswith((".yaml", ".yml")):
            try:
                import yaml  # noqa: F401 (Debian's python3-yaml; optional)
            except ImportError:
                raise SpaceError(f"{path}: YAML space files need python3-yaml; use JSON instead")
            doc = safeio.load_yaml(text, path, "space file")
        else:
            doc = safeio.load_json(text, path, "space file")
    except safeio.InputError as e:
        raise SpaceError(str(e))
    if not isinstance(doc, dict):
        raise SpaceError(f"{path}: the top level must be an object")
    return doc


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _values(path, key, spec):
    """The list of values of one key: a scalar, a list, or {"range": [lo, hi], "step": s}
    (inclusive; "log2": true doubles instead of adding, for keys given in plain units)."""
    where = f"{path}: keys.{key}"

    def value_ok(v):
        if isinstance(v, str) and len(v) > MAX_STRING:
            raise SpaceError(f"{where}: a string value is longer than {MAX_STRING} characters: {show(v)}")
        return _is_int(v) or isinstance(v, str)
    if _is_int(spec) or isinstance(spec, str):
        value_ok(spec)
        return [spec]
    if isinstance(spec, list):
        if not spec:
            raise SpaceError(f"{where}: empty list of values")
        if len(spec) > MAX_POINTS:
            raise SpaceError(f"{where}: the list has more than {MAX_POINTS} values")
        for v in spec:
            if not value_ok(v):
                raise SpaceError(f"{where}: values must be integers (or strings), got {show(v)}")
        if len(set(map(json.dumps, spec))) != len(spec):
            raise SpaceError(f"{where}: a value appears twice")
        return list(spec)
    if isinstance(spec, dict):
        extra = set(spec) - {"range", "step", "double"}
        if extra:
            first = sorted(map(show, extra))[0]
            raise SpaceError(f"{where}: unknown field {first} (allowed: range, step, double)")
        r = spec.get("range")
        if not (isinstance(r, list) and len(r) == 2 and all(map(_is_int, r))):
            raise SpaceError(f"{where}: \"range\" must be [lo, hi] (integers, inclusive)")
        lo, hi = r
        if lo > hi:
            raise SpaceError(f"{where}: empty range [{lo}, {hi}]")
        if spec.get("double"):
            if lo < 1:
                raise SpaceError(f"{where}: a doubling range must start at 1 or more")
            if hi.bit_length() - lo.bit_length() >= 64:
                raise SpaceError(f"{where}: the doubling range has more than 64 values")
            out, v = [], lo
            while v <= hi:
                out.append(v)
                v *= 2
            return out
        step = spec.get("step", 1)
        if not _is_int(step) or step < 1:
            raise SpaceError(f"{where}: \"step\" must be a positive integer")
        if (hi - lo) // step + 1 > MAX_POINTS:
            raise SpaceError(f"{where}: the range has more than {MAX_POINTS} values")
        return range(lo, hi + 1, step)  # a sequence, not a list: no memory per value
    raise SpaceError(f"{where}: give a value, a list of values or {{\"range\": [lo, hi]}}")


class Space:
    """A checked space: base config, swept keys, constraints, workload, search, DRAM."""

    def __init__(self, path, doc, root, cli):
        self.path, self.doc, self.root, self.cli = path, doc, root, cli
        self.name = doc.get("name", os.path.splitext(os.path.basename(path))[0])
        self.base_name = doc.get("base", "default")
        self.keys = {}        # key -> its values (a list, or a range: a sequence without a list)
        self.boards = []      # board dicts from boards/
        self.budget = {}      # resource class -> limit
        self.workload = {}
        self.search = {}
        self.dram = {}
        self.backend = "systemc-timing"
        self.synth = "full"
        self.host = None      # the host-time model (tsrdse/hostmodel.py), None: device time only
        self.points = []      # list of (overrides dict, full config dict), legal only
        self.illegal = []     # (overrides, CLI error) of the points the CLI rejected


def load(path, root, cli, check_points=True):
    """Load and check a space file. root: the repository (boards/, configs/); cli: the
    tessera binary. Raises SpaceError before anything runs."""
    doc = _load_text(path)
    for k in doc:
        if k not in TOP_FIELDS:
            raise SpaceError(f"{path}: unknown field {show(k)} (allowed: {', '.join(TOP_FIELDS)})")
    sp = Space(path, doc, root, cli)
    # (it names the output directory dse-out/NAME: "." and ".." would be another one)
    if not isinstance(sp.name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", sp.name) or sp.name in (".", ".."):
        raise SpaceError(f"{path}: name must be letters, digits, '_', '.', '-' (at most 128)")

    # Base config: a preset name or a JSON file (relative to the space file).
    base = sp.base_name
    if not isinstance(base, str) or not base or len(base) > 4096 or "\0" in base:
        raise SpaceError(f"{path}: base must be a preset name or a config file")
    sp.base = load_config(root, os.path.join(os.path.dirname(os.path.abspath(path)), base), base)
    if isinstance(sp.base, str):
        raise SpaceError(f"{path}: base {sp.base}")

    keys = doc.get("keys", {})
    if not isinstance(keys, dict) or not keys:
        raise SpaceError(f"{path}: keys must be an object of config keys and their values")
    if len(keys) > MAX_KEYS:
        raise SpaceError(f"{path}: keys: {len(keys)} keys, more than the {MAX_KEYS} allowed")
    for k, spec in keys.items():
        if not isinstance(k, str) or not re.fullmatch(r"[A-Za-z0-9_]{1,64}", k):
            raise SpaceError(f"{path}: keys: {show(k)} is not a config key (letters, digits, '_')")
        sp.keys[k] = _values(path, k, spec)
    # Block size: LOG_BLOCK alone or LOG_BLOCK_IN + LOG_BLOCK_OUT (the config rule).
    if "LOG_BLOCK_IN" in sp.keys or "LOG_BLOCK_OUT" in sp.keys:
        if "LOG_BLOCK" in sp.keys:
            raise SpaceError(f"{path}: keys: sweep LOG_BLOCK or LOG_BLOCK_IN/LOG_BLOCK_OUT, not both")

    _load_constraints(sp)
    w = doc.get("workload")
    if doc.get("backend") == "systemc-timing" and isinstance(w, dict) and "reference" in w:
        raise SpaceError(f"{path}: backend systemc-timing computes no outputs: workload.reference needs systemc")
    _load_workload(sp)
    _load_search(sp)
    _load_dram(sp)
    _load_host(sp)
    # Default: the timing-only model (the same cycles as the full one, several times faster; the
    # cycles do not depend on the data, tests/test_sc_timing.c), the full model where the accuracy
    # objective needs the outputs. `dse.py sweep --full-check K` runs K points on the full model.
    has_ref = isinstance(w, dict) and "reference" in w
    sp.backend = doc.get("backend", "systemc" if has_ref else "systemc-timing")
    if sp.backend not in BACKENDS:
        raise SpaceError(f"{path}: backend {show(sp.backend)} is unknown (allowed: {', '.join(BACKENDS)})")
    if sp.backend == "fsim":
        raise SpaceError(f"{path}: backend fsim is untimed: use systemc (fast) or rtl")
    sp.synth = doc.get("synth", "full")
    if sp.synth not in SYNTH_MODES:
        raise SpaceError(f"{path}: synth {show(sp.synth)} is unknown (allowed: {', '.join(SYNTH_MODES)})")
    # The size of the space: the product of the axis lengths, before any point is made and
    # before the CLI is asked anything (a 10^10-point grid is refused at once).
    sp.total = 1
    for vals in sp.keys.values():
        sp.total *= len(vals)
    if sp.search["method"] == "grid" and sp.total > MAX_POINTS:
        raise SpaceError(f"{path}: the grid has {sp.total if sp.total < 10 ** 30 else 'more than 10^30'} points "
                         f"(more than {MAX_POINTS}): use \"search\": {{\"method\": \"random\", "
                         f"\"samples\": N, \"seed\": S}}")

    # Now the CLI: the base config, then each key's name (once per key, not per value).
    err = check_config(cli, sp.base, "base")
    if err:
        raise SpaceError(f"{path}: base config is not legal: {err}")
    _check_keys(sp)
    if check_points:
        _expand(sp)
        _check_boards_fit(sp)
    return sp


def load_config(root, path, preset=None):
    """A config from a JSON file, else the preset of that name in configs/ (preset: the name
    to look up when it differs from path). Returns the dict, or an error message (a string)."""
    name = path if preset is None else preset
    for p in (path, os.path.join(root, "configs", name + ".json")):
        # anything there but a directory is read as the config: a FIFO or a device is
        # refused by name rather than taken for a missing file (or blocked on)
        if os.path.lexists(p) and not os.path.isdir(p):
            try:
                cfg = safeio.load_json(safeio.read_text(p, "config file"), p, "config file")
            except safeio.InputError as e:
                return f"{show(name)}: {e.reason}"
            return cfg if isinstance(cfg, dict) else f"{show(name)}: a config must be a JSON object"
    return f"{show(name)} is neither a config file nor a preset in configs/"


def point_config(base, overrides):
    """The full config of a point: the base with the swept keys replaced. A swept
    LOG_BLOCK_IN/OUT replaces the base's LOG_BLOCK (the config allows one or the other)."""
    cfg = dict(base)
    if "LOG_BLOCK_IN" in overrides or "LOG_BLOCK_OUT" in overrides:
        blk = cfg.pop("LOG_BLOCK", None)
        if blk is not None:
            cfg.setdefault("LOG_BLOCK_IN", blk)
            cfg.setdefault("LOG_BLOCK_OUT", blk)
    cfg.update(overrides)
    return cfg


def check_config(cli, cfg, label):
    """None if `tessera config show` accepts cfg, else its error message (one line)."""
    show = config_show(cli, cfg, label)
    return show if isinstance(show, str) else None


_SHOW_CACHE = {}
_SHOW_FIELDS = ("buffers", "macs", "bus_bits", "clock_mhz")


def config_show(cli, cfg, label):
    """The derived values of a config as a dict ({"buffers": {name: bytes}, "macs": n,
    "bus_bits": n, "clock_mhz": n}), or the CLI's error message (a string) when the config is
    illegal. label names the config in the message ("point", "base", a file name)."""
    return config_show_many(cli, [cfg], label)[0]


def config_show_many(cli, cfgs, label):
    """config_show of each of cfgs, in order: those not in the cache in one process
    (`tessera config show --batch`, one JSON config per line, one answer per line), not
    one process per config (~5 ms each: 100,000 points took minutes)."""
    keys = [json.dumps(c, sort_keys=True) for c in cfgs]
    todo = {}
    for k, c in zip(keys, cfgs):
        if k not in _SHOW_CACHE and k not in todo:
            todo[k] = c
    if todo:
        for k, res in zip(todo, _show_batch(cli, list(todo.values()), label)):
            _SHOW_CACHE[k] = res
    return [_SHOW_CACHE[k] for k in keys]


def _show_batch(cli, cfgs, label):
    # the configs as JSON text exactly as a config file of them would be (json.dumps: ASCII,
    # no newline), so each message is the one `tessera config show FILE` gives
    argv = [cli, "config", "show", "--batch", "--name=" + label]
    try:
        p = subprocess.run(argv, input="".join(json.dumps(c) + "\n" for c in cfgs), capture_output=True,
                           text=True, errors="replace")
    except OSError as e:
        raise SpaceError(f"{show(cli)}: cannot run: {e.strerror}")
    # (split on "\n" alone: str.splitlines would also split an echoed key at U+2028 or U+0085)
    answers = p.stdout.split("\n")[:-1]
    if p.returncode != 0 or len(answers) != len(cfgs):
        why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise SpaceError(f"`{show(cli)} config show --batch` failed ({show(why)}; {len(answers)} answers to "
                         f"{len(cfgs)} configs): the DSE needs the tessera CLI built from this tree")
    out = []
    for a in answers:
        try:
            a = json.loads(a)
        except ValueError:
            a = None
        if isinstance(a, dict) and isinstance(a.get("error"), str):
            # the line `tessera config show FILE` prints, its last line as before
            msg = ("tessera: error: " + a["error"]).strip().splitlines()[-1]
            out.append("tessera config: " + re.sub(r"^(tessera: )?(config: )?(error: )?", "", msg))
        elif isinstance(a, dict) and all(f in a for f in _SHOW_FIELDS):
            out.append({f: a[f] for f in _SHOW_FIELDS})
        else:
            raise SpaceError(f"`{show(cli)} config show --batch`: an answer is not what it writes: "
                             f"{show(a)}")
    return out


# The network's JIT lowers on any config `tessera config` accepts except those its plan refuses
# (e.g. BLOCK_IN != BLOCK_OUT: the RTL builds it, but one operator's output rows cannot be the
# next one's input rows, jit/tsr_dtensor.c). Which configs those are is the JIT's to say: plan
# and run the smallest network on fsim (~0.1 s) and report its error. The clock does not matter.
# The probe's layers are the network's kernels with fewer channels and pixels: buffers too small
# to tile the probe (e.g. one weight row) are too small for the network too.
PROBE_NET = ["net", "resnet18", "--small", "8,2,2", "--backend", "fsim"]
PROBED = ("resnet18", "resnet18-small", "onnx")
_PROBE_CACHE = {}


def probe_key(workload, cfg):
    """What the probe's answer depends on: the config without its clock, and the workload."""
    return json.dumps([{k: v for k, v in cfg.items() if k != "CLOCK_MHZ"}, workload], sort_keys=True)


def workload_check(cli, workload, cfg, key=None):
    """None if the workload's JIT plans on cfg, else its error (one line). Network workloads
    only: the layer set (conv2d alone) lowers on any legal config. An ONNX model is probed
    itself: imported, placed and run once on fsim (its own operators decide what runs).
    key: probe_key(workload, cfg) when the caller has it."""
    if workload.get("kind") not in PROBED:
        return None
    key = key or probe_key(workload, cfg)
    if key in _PROBE_CACHE:
        return _PROBE_CACHE[key]
    probe = PROBE_NET
    if workload["kind"] == "onnx":
        probe = ["infer", workload["model"], "-i", workload["input"], "--backend", "fsim", "--quiet"]
    p, cp, _ = cfgfile.run_on_config(cfg, [cli] + probe + ["--config", "{cfg}"], "dse-probe-", cwd_tmp=True)
    res = None
    if p.returncode != 0:
        msg = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        msg = re.sub(r"^(tessera: )?(error: )?", "", msg.replace(cp, "point"))
        res = f"the workload cannot run on this hardware: {msg} (`tessera {' '.join(probe)}`)"
    _PROBE_CACHE[key] = res
    return res


def _check_keys(sp):
    """Each key must be a config key: one config per key (its first value on the base), not
    one per value, all in one CLI run. Whether each value is legal in some point is the
    grid's to say (_expand), from the points themselves."""
    ks = list(sp.keys)
    shows = config_show_many(sp.cli, [point_config(sp.base, {k: sp.keys[k][0]}) for k in ks], "point")
    for k, err in zip(ks, shows):
        err = err if isinstance(err, str) else None
        if err and f"unknown key \"{k}\"" in err:
            raise SpaceError(f"{sp.path}: keys: \"{k}\" is not a config key ({err}; the keys are "
                             f"listed in isa/tsr_config.c and `tessera config show`)")


def _load_constraints(sp):
    c = sp.doc.get("constraints", {})
    if not isinstance(c, dict):
        raise SpaceError(f"{sp.path}: constraints must be an object")
    for k in c:
        if k not in ("boards", "budget"):
            raise SpaceError(f"{sp.path}: constraints: unknown field {show(k)} (allowed: boards, budget)")
    names = c.get("boards", [])
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SpaceError(f"{sp.path}: constraints.boards must be a list of board names")
    known = boards_mod.names(sp.root)
    for n in names:
        if n not in known:
            raise SpaceError(f"{sp.path}: constraints.boards: unknown board {show(n)} "
                             f"(boards/ has: {', '.join(known)})")
        b = boards_mod.load(sp.root, n)
        if b["family"] not in boards_mod.SYNTH_FAMILIES and sp.doc.get("synth", "full") != "none":
            raise SpaceError(f"{sp.path}: constraints.boards: board \"{n}\" is family {b['family']}; "
                             f"the DSE synthesizes with synth_xilinx (families "
                             f"{', '.join(boards_mod.SYNTH_FAMILIES)}) only")
        sp.boards.append(b)
    budget = c.get("budget", {})
    if not isinstance(budget, dict):
        raise SpaceError(f"{sp.path}: constraints.budget must be an object of resource limits")
    for k, v in budget.items():
        if not isinstance(k, str) or k not in RESOURCES:
            raise SpaceError(f"{sp.path}: constraints.budget: unknown resource {show(k)} "
                             f"(allowed: {', '.join(RESOURCES)})")
        # (not NaN: every comparison with it is false, so nothing would fit, silently; YAML has .nan)
        if not (isinstance(v, (int, float)) and not isinstance(v, bool)) or not v > 0 or v == float("inf"):
            raise SpaceError(f"{sp.path}: constraints.budget.{k} must be a positive number")
        sp.budget[k] = v


def _load_workload(sp):
    w = sp.doc.get("workload", {"kind": "resnet18"})
    if isinstance(w, str):
        w = {"kind": w}
    if not isinstance(w, dict):
        raise SpaceError(f"{sp.path}: workload must be a name or an object")
    for k in w:
        if k not in ("kind", "small", "layers", "batch", "model", "input", "reference"):
            raise SpaceError(f"{sp.path}: workload: unknown field {show(k)} (allowed: kind, small, layers, batch, "
                             f"model, input, reference)")
    kind = w.get("kind", "resnet18")
    if not isinstance(kind, str) or kind not in WORKLOADS:
        raise SpaceError(f"{sp.path}: workload.kind {show(kind)} is unknown (allowed: {', '.join(WORKLOADS)})")
    if kind == "onnx":
        sp.workload = _onnx_workload(sp, w)
        return
    for k in ("model", "input", "reference"):
        if k in w:
            raise SpaceError(f"{sp.path}: workload.{k} needs kind onnx")
    out = {"kind": kind, "batch": w.get("batch", 1)}
    if not _is_int(out["batch"]) or not 1 <= out["batch"] <= 64:
        raise SpaceError(f"{sp.path}: workload.batch must be an integer in [1, 64]")
    if kind == "resnet18-small":
        s = w.get("small", [32, 8, 10])
        if not (isinstance(s, list) and len(s) == 3 and all(_is_int(x) and x >= 1 for x in s)):
            raise SpaceError(f"{sp.path}: workload.small must be [H, WIDTH, CLASSES] (positive integers)")
        out["small"] = s
    elif "small" in w:
        raise SpaceError(f"{sp.path}: workload.small needs kind resnet18-small")
    if kind == "resnet18-layers":
        layers = w.get("layers", [])
        ok = {f"C{i}" for i in range(1, 12)}
        if not isinstance(layers, list) or any(x not in ok for x in layers):
            raise SpaceError(f"{sp.path}: workload.layers must be a list of C1..C11")
        out["layers"] = layers
        if out["batch"] != 1:
            raise SpaceError(f"{sp.path}: workload.batch: the layer set runs batch 1")
    elif "layers" in w:
        raise SpaceError(f"{sp.path}: workload.layers needs kind resnet18-layers")
    sp.workload = out


def workload_label(w):
    """The workload as a report names it: its kind, and an ONNX workload's model file."""
    return f"onnx {os.path.basename(w['model'])}" if w["kind"] == "onnx" else w["kind"]


def _onnx_workload(sp, w):
    """An ONNX model and the input it runs on (`tessera infer MODEL -i INPUT`), paths relative
    to the space file. Their bytes are hashed into the workload, so the cycle cache is keyed by
    content: a changed model is run again, a moved one is not."""
    out = {"kind": "onnx"}
    here = os.path.dirname(os.path.abspath(sp.path))
    files = (("model", "an ONNX model file"), ("input", "a .npy input file"))
    if "reference" in w:  # optional: the accuracy objective
        files += (("reference", "a .npy reference output file"),)
    for k, what in files:
        v = w.get(k)
        if not isinstance(v, str) or not v:
            raise SpaceError(f"{sp.path}: workload.{k} must name {what} (kind onnx)")
        f = os.path.join(here, v)
        shown = v if len(v) <= 200 else v[:200] + "..."
        try:
            out[k + "_sha256"] = safeio.sha256_file(f, what, MAX_WORKLOAD_FILE)
        except safeio.InputError as e:
            raise SpaceError(f"{sp.path}: workload.{k}: cannot read {shown}: {e.reason}")
        out[k] = os.path.abspath(f)
    # images per run: the input's first dimension (tessera infer runs them as the batch)
    try:
        import numpy as np
        shape = np.load(out["input"], mmap_mode="r").shape
    except Exception as e:  # noqa: BLE001 (numpy raises several kinds on a bad file)
        raise SpaceError(f"{sp.path}: workload.input: not a readable .npy file ({e})")
    if len(shape) < 1 or shape[0] < 1:
        raise SpaceError(f"{sp.path}: workload.input: its first dimension (the batch) must be >= 1")
    if "batch" in w and w["batch"] != shape[0]:
        raise SpaceError(f"{sp.path}: workload.batch {show(w['batch'])} is not the input's first dimension {shape[0]}")
    for k in ("small", "layers"):
        if k in w:
            raise SpaceError(f"{sp.path}: workload.{k} needs kind resnet18-small / resnet18-layers, not onnx")
    out["batch"] = int(shape[0])
    if "reference" in out:
        _reference(sp, out)
    return out


def _reference(sp, out):
    """The workload's reference output (a .npy of numbers: e.g. ONNX Runtime's output on the same
    input): each point's output is compared with it (mismatches, max_lsb). Its header is read
    here; whether its shape is the model's output is known only when the model has run (the
    point's error then says so). The output's DequantizeLinear scale (scripts/zoo/common.py
    output_scale) gives max_lsb its unit for a float output."""
    try:
        import numpy as np
        ref = np.load(out["reference"], mmap_mode="r", allow_pickle=False)
    except Exception as e:  # noqa: BLE001 (numpy raises several kinds on a bad file)
        raise SpaceError(f"{sp.path}: workload.reference: not a readable .npy file ({show(str(e))})")
    if not isinstance(ref, np.ndarray) or ref.dtype.kind not in "biuf" or ref.size == 0:
        raise SpaceError(f"{sp.path}: workload.reference: must hold numbers (got dtype {ref.dtype}, "
                         f"shape {list(ref.shape)})")
    out["output_scale"] = output_scale(out["model"])


def output_scale(model):
    """scripts/zoo/common.py output_scale of the ONNX file (None when the model's output is not
    written by a per-tensor DequantizeLinear, or the file is not a model onnx can read: the
    probe then says what is wrong with it)."""
    zoo = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "zoo")
    if zoo not in sys.path:
        sys.path.insert(0, zoo)
    try:
        import common
        import onnx
        return common.output_scale(onnx.load(model, load_external_data=False))
    except Exception:  # noqa: BLE001 (a model onnx cannot parse: tessera's probe names the problem)
        return None


def _load_search(sp):
    s = sp.doc.get("search", {"method": "grid"})
    if isinstance(s, str):
        s = {"method": s}
    if not isinstance(s, dict):
        raise SpaceError(f"{sp.path}: search must be \"grid\" or an object")
    for k in s:
        if k not in ("method", "samples", "seed"):
            raise SpaceError(f"{sp.path}: search: unknown field {show(k)} (allowed: method, samples, seed)")
    m = s.get("method", "grid")
    if not isinstance(m, str) or m not in ("grid", "random"):
        raise SpaceError(f"{sp.path}: search.method {show(m)} is unknown (allowed: grid, random)")
    out = {"method": m}
    if m == "random":
        if not _is_int(s.get("samples")) or s["samples"] < 1:
            raise SpaceError(f"{sp.path}: search.samples must be a positive integer for random search")
        if s["samples"] > MAX_SAMPLES:
            raise SpaceError(f"{sp.path}: search.samples is {show(s['samples'])}, more than the {MAX_SAMPLES} allowed")
        if not _is_int(s.get("seed", 1)):
            raise SpaceError(f"{sp.path}: search.seed must be an integer")
        out["samples"], out["seed"] = s["samples"], s.get("seed", 1)
    sp.search = out


def _load_dram(sp):
    """DRAM model of the timed backends: bytes per cycle from the board's port (bus_bits / 8),
    or given; latency and outstanding bursts as the CLI's device options."""
    d = sp.doc.get("dram", {})
    if not isinstance(d, dict):
        raise SpaceError(f"{sp.path}: dram must be an object")
    for k in d:
        if k not in ("board", "bytes_per_cycle", "latency", "outstanding"):
            raise SpaceError(f"{sp.path}: dram: unknown field {show(k)} "
                             f"(allowed: board, bytes_per_cycle, latency, outstanding)")
    out = {"latency": d.get("latency", 32), "outstanding": d.get("outstanding", 8)}
    if "board" in d:
        if not isinstance(d["board"], str) or d["board"] not in boards_mod.names(sp.root):
            raise SpaceError(f"{sp.path}: dram.board: unknown board {show(d['board'])}")
        out["bytes_per_cycle"] = boards_mod.load(sp.root, d["board"])["dram"]["bus_bits"] // 8
        out["from"] = d["board"]
        if "bytes_per_cycle" in d:
            raise SpaceError(f"{sp.path}: dram: give board or bytes_per_cycle, not both")
    else:
        out["bytes_per_cycle"] = d.get("bytes_per_cycle", 8)
    for k in ("latency", "outstanding", "bytes_per_cycle"):
        if not _is_int(out[k]) or out[k] < 1:
            raise SpaceError(f"{sp.path}: dram.{k} must be a positive integer")
    sp.dram = out


def _load_host(sp):
    """The host-time model (scripts/dse/README.md, "Host time"): only an ONNX workload leaves
    operators on the host (the network workloads run wholly on the device)."""
    if "host" not in sp.doc:
        return
    if sp.workload.get("kind") != "onnx":
        raise SpaceError(f"{sp.path}: host needs workload kind onnx (the other workloads have no host operators)")
    try:
        sp.host = hostmodel.load(sp.doc["host"], show)
    except hostmodel.HostModelError as e:
        raise SpaceError(f"{sp.path}: {e}")


def _draws(rng, total, k):
    """k distinct indices into a space of `total` points, in draw order, without making the
    space: random.sample for totals it can index (the same draws as before for a given seed),
    else one draw at a time with a set of those taken (k is at most 20 x MAX_SAMPLES)."""
    if total <= sys.maxsize:
        yield from rng.sample(range(total), k)
        return
    taken = set()
    while len(taken) < k:
        i = rng.randrange(total)
        if i not in taken:
            taken.add(i)
            yield i


def _combos(sp, names):
    """The points to check, lazily: every grid point, or the random draws (at most
    DRAWS_PER_SAMPLE per wanted point)."""
    if sp.search["method"] == "grid":
        yield from itertools.product(*(sp.keys[k] for k in names))
        return
    sizes = [len(sp.keys[k]) for k in names]
    rng = random.Random(sp.search["seed"])
    for i in _draws(rng, sp.total, min(sp.total, DRAWS_PER_SAMPLE * sp.search["samples"])):
        c = []
        for k, s in zip(reversed(names), reversed(sizes)):
            c.append(sp.keys[k][i % s])
            i //= s
        yield tuple(reversed(c))


def _judge(sp, names, combos, probed, sub):
    """(overrides, config, None or the reason the point is illegal: the CLI's, else the
    JIT's) of each combo, in order, lazily. The configs are checked in one CLI run; the JIT
    probe runs once per distinct config without its clock, on worker threads, `sub` points
    at a time (a consumer that stops early runs no more), each part's new probe keys counted
    in `probed` against MAX_PROBES before it runs."""
    items = []
    for c in combos:
        ov = dict(zip(names, c))
        items.append((ov, point_config(sp.base, ov)))
    shows = config_show_many(sp.cli, [cfg for _, cfg in items], "point")
    probing = sp.workload.get("kind") in PROBED
    for at in range(0, len(items), sub):
        part = range(at, min(at + sub, len(items)))
        keys = {}
        if probing:
            todo = {}
            for i in part:
                if not isinstance(shows[i], str):
                    keys[i] = k = probe_key(sp.workload, items[i][1])
                    if k not in probed:
                        probed.add(k)
                        todo[k] = items[i][1]
            if len(probed) > MAX_PROBES:
                what = (f"the grid's legal points are {len(probed)} distinct hardware configs"
                        if sp.search["method"] == "grid" else
                        f"random search drew more than {MAX_PROBES} distinct hardware configs before finding "
                        f"{sp.search['samples']} legal points")
                raise SpaceError(f"{sp.path}: {what} (points apart from CLOCK_MHZ); the workload's JIT probe "
                                 f"(one `tessera {' '.join(PROBE_NET[:4])} ...` or ONNX run each, ~0.1 s) runs on "
                                 f"at most {MAX_PROBES}: sweep fewer values, or use workload resnet18-layers")
            todo = [kc for kc in todo.items() if kc[0] not in _PROBE_CACHE]
            for _ in safeio.pmap(lambda kc: workload_check(sp.cli, sp.workload, kc[1], kc[0]), todo,
                                 4 * safeio.workers()):
                pass
        for i in part:
            s = shows[i]
            yield items[i][0], items[i][1], s if isinstance(s, str) else (_PROBE_CACHE[keys[i]] if i in keys else None)


def _expand(sp):
    # (the point count was checked in load(), before anything was made)
    names = list(sp.keys)
    rand = sp.search["method"] == "random"
    seen_values, probed = set(), set()
    if rand:
        # in draw order, as it stops at `samples` legal ones: the configs of growing chunks
        # of draws in one CLI run each, their probes a few at a time
        sizes, sub = itertools.chain((64, 256, 1024), itertools.repeat(4096)), 4 * safeio.workers()
    else:
        # the whole grid at once: how many probes it needs is known before any runs
        sizes, sub = (MAX_POINTS,), MAX_POINTS
    draws = iter(_combos(sp, names))
    for n in sizes:
        part = list(itertools.islice(draws, n))
        if not part:
            break
        for ov, cfg, err in _judge(sp, names, part, probed, sub):
            if err:
                sp.illegal.append((ov, err))
            else:
                sp.points.append((ov, cfg))
                if not rand:
                    seen_values.update(ov.items())
            if rand and len(sp.points) == sp.search["samples"]:
                break
        if rand and len(sp.points) == sp.search["samples"]:
            break
    # A grid value that is in no legal point: if the CLI rejects it on the base config too,
    # that is the error to report (its message names the key and the range). Only those
    # values are asked about, in one CLI run. (A random sample may miss the one combination
    # that makes a value legal, so it lists its illegal draws instead.)
    if not rand:
        # (values are integers or strings: (key, value) pairs tell 1 from "1")
        unseen = [(k, v) for k in names for v in sp.keys[k] if (k, v) not in seen_values]
        errs = config_show_many(sp.cli, [point_config(sp.base, {k: v}) for k, v in unseen], "point")
        for (k, v), err in zip(unseen, errs):
            if isinstance(err, str) and k in err:
                raise SpaceError(f"{sp.path}: keys.{k}: value {show(v)} is legal in no point of the space: {err}")
    if not sp.points:
        first = sp.illegal[0][1] if sp.illegal else "no points"
        raise SpaceError(f"{sp.path}: the space has no legal point ({len(sp.illegal)} points, all rejected; "
                         f"first: {first})")


def _check_boards_fit(sp):
    """A board whose block RAM cannot hold the buffers of even the smallest point fits
    nothing: say so before anything runs (a lower bound: buffer bytes vs RAM bits)."""
    need = []
    for ov, cfg in sp.points:
        show = config_show(sp.cli, cfg, "point")
        need.append(sum(show["buffers"].values()) * 8)
    smallest = min(need)
    for b in sp.boards:
        cap = boards_mod.ram_bits(b)
        if smallest > cap:
            raise SpaceError(f"{sp.path}: constraints.boards: nothing in the space fits board \"{b['name']}\": "
                             f"the smallest point needs {smallest // 8192} KiB of on-chip buffers, the board "
                             f"has at most {cap // 8192} KiB of RAM (block RAM and all LUTs as RAM)")
    if "BRAM36" in sp.budget and "LUT" in sp.budget:
        cap = int(sp.budget["BRAM36"] * 36 * 1024 + sp.budget["LUT"] * 64)
        if smallest > cap:
            raise SpaceError(f"{sp.path}: constraints.budget: nothing in the space fits BRAM36 <= "
                             f"{sp.budget['BRAM36']}, LUT <= {sp.budget['LUT']}: the smallest point needs "
                             f"{smallest // 8192} KiB of on-chip buffers, the budget holds at most "
                             f"{cap // 8192} KiB (block RAM and all LUTs as RAM)")
