#!/usr/bin/python3
# The fast area estimate behind `scripts/synth.sh ... xc7-est`: synthesize tsr_top one module
# at a time and add the parts up, with every module's result cached by what decides it.
#
# Why: the full flow (`synth_xilinx -flatten`) flattens first, so `share` compares the shifters
# of all BATCH x BLOCK_OUT ALU lanes pairwise and abc maps the whole GEMM array with everything
# else: most of 45 minutes for the default, and every point of a sweep pays it again. Here each
# module is synthesized alone with the same flow (`synth_xilinx -flatten -top M`, without I/O and
# clock buffers: its ports are not pins), its child
# modules read as black boxes (`read_verilog -lib`), so a module is mapped once per distinct
# parameter set and counted once per instance. A module's cells depend only on its source, its
# parameters and the package constants and field functions it names, so that is its cache key:
# configs that differ only in buffer sizes share every module that does not see the sizes.
# What this loses against the full flow: optimization across module boundaries (constants and
# unused outputs are not propagated into or out of a module), so LUT and FF come out somewhat
# high; memories and multipliers are inferred per module in both flows. Its measured error
# against the full flow is in scripts/dse/README.md.
#
# Usage: synth_hier.py PKG.sv RTL_DIR WORKDIR CACHE_DIR [xc7|xcup] > stat.txt
# (xcup: synth_xilinx -family xcup, UltraScale+; the family is part of every cache key)
# Prints "CELL COUNT" lines of the whole design (what synth.sh's summary reads) and, on stderr,
# one line per module synthesized or taken from the cache.
import collections
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import tempfile

TOP = "tsr_top"
USAGE = "usage: synth_hier.py PKG.sv RTL_DIR WORKDIR CACHE_DIR [xc7|xcup [TOP]]"
MAX_SOURCE = 16 << 20  # bytes of the package or of one RTL source


class InputError(Exception):
    """A bad argument or input file: one line, exit 2."""


def read_source(path, what):
    """A regular file (a FIFO would block the open) of at most MAX_SOURCE bytes, as text."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(f"{path}: cannot open the {what}: {e.strerror}")
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{path}: the {what} is not a regular file")
        data = f.read(MAX_SOURCE + 1)
    if len(data) > MAX_SOURCE:
        raise InputError(f"{path}: the {what} is more than {MAX_SOURCE} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: the {what} is not UTF-8 text (byte {e.start})")


def yosys_version():
    return subprocess.run(["yosys", "-V"], capture_output=True, text=True).stdout.strip()


class Hier:
    def __init__(self, pkg, rtl, work, cache, family="xc7"):
        self.pkg, self.work, self.cache, self.family = pkg, work, cache, family
        # without comments: the header names the file it was generated from
        self.pkg_text = re.sub(r"//[^\n]*", "", read_source(pkg, "package"))
        if not os.path.isdir(rtl):
            raise InputError(f"{rtl}: RTL_DIR is not a directory")
        try:
            self.srcs = {os.path.basename(p)[:-3]: os.path.join(rtl, p)
                         for p in sorted(os.listdir(rtl)) if p.endswith(".sv")}
        except OSError as e:
            raise InputError(f"{rtl}: cannot list RTL_DIR: {e.strerror}")
        self.stamp = yosys_version() + open(os.path.abspath(__file__), "rb").read().decode()
        self.memo = {}

    def pkg_refs(self, text):
        """The package lines a source depends on: each constant it names, each field function."""
        out = []
        for name in sorted(set(re.findall(r"tsr_pkg::(\w+)", re.sub(r"//[^\n]*", "", text)))):
            m = (re.search(rf"^\s*localparam int {name} = .*$", self.pkg_text, re.M) or
                 re.search(rf"function automatic [^\n]*\b{name}\(.*?endfunction", self.pkg_text, re.S))
            out.append(m.group(0) if m else self.pkg_text)  # unknown: the whole package
        return out

    def key(self, mod, params):
        if mod not in self.srcs:
            raise InputError(f"module {mod!r} has no source {mod}.sv in the RTL directory")
        text = read_source(self.srcs[mod], "RTL source")
        h = json.dumps([mod, text, sorted(params.items()), self.pkg_refs(text), self.stamp, self.family])
        return hashlib.sha256(h.encode()).hexdigest()[:20]

    def synth(self, mod, params):
        """{leaf cell type: count} of one instance of mod with params (children included)."""
        memo = (mod, tuple(sorted(params.items())))
        if memo in self.memo:
            return self.memo[memo]
        path = os.path.join(self.cache, f"hier-{mod}-{self.key(mod, params)}.json")
        try:
            with open(path, encoding="utf-8") as f:
                own = json.load(f)
            print(f"synth_hier: {mod} {params or ''}: cached", file=sys.stderr)
        except (OSError, ValueError):
            own = self._run(mod, params)
            os.makedirs(self.cache, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.cache, prefix=".tmp-")
            with os.fdopen(fd, "w") as f:
                json.dump(own, f)
            os.replace(tmp, path)
        total = collections.Counter(own["cells"])
        for child in own["children"]:
            for cell, n in self.synth(child["type"], child["params"]).items():
                total[cell] += n * child["count"]
        self.memo[memo] = total
        return total

    def _run(self, mod, params):
        """Synthesize mod alone; its own leaf cells and its child instances (type, params, count)."""
        # black boxes: the modules its source names (parsing all of hw/rtl costs more than most
        # modules' synthesis)
        text = read_source(self.srcs[mod], "RTL source")
        others = [p for m, p in self.srcs.items() if m != mod and re.search(rf"\b{m}\b", text)]
        sets = "".join(f"chparam -set {k} {v} {mod}; " for k, v in sorted(params.items()))
        os.makedirs(self.work, exist_ok=True)
        base = os.path.join(self.work, f"hier-{mod}-{self.key(mod, params)[:8]}")
        libs = f"read_verilog -sv -lib -DSYNTHESIS {self.pkg} {' '.join(others)}; " if others else ""
        script = (f"read_verilog -sv -DSYNTHESIS {self.pkg} {self.srcs[mod]}; {libs}{sets}"
                  f"synth_xilinx{' -family xcup' if self.family == 'xcup' else ''} -top {mod} -flatten -noiopad "
                  f"-noclkbuf; write_json {base}.json")
        p = subprocess.run(["yosys", "-q", "-l", base + ".log", "-p", script], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"synth_hier: yosys failed on {mod} {params}: "
                     f"{(p.stderr.strip().splitlines() or ['?'])[-1]} (log {base}.log)")
        with open(base + ".json", encoding="utf-8") as f:
            net = json.load(f)["modules"][mod]
        cells, kids = collections.Counter(), collections.Counter()
        for c in net["cells"].values():
            if c["type"] in self.srcs:
                pv = {k: int(v, 2) if re.fullmatch(r"[01]+", str(v)) else v
                      for k, v in c.get("parameters", {}).items()}
                kids[json.dumps([c["type"], sorted(pv.items())])] += 1
            else:
                cells[c["type"]] += 1
        children = [{"type": t, "params": dict(pv), "count": n}
                    for (t, pv), n in ((json.loads(k), n) for k, n in sorted(kids.items()))]
        print(f"synth_hier: {mod} {params or ''}: synthesized ({sum(cells.values())} cells, "
              f"{sum(kids.values())} child instances)", file=sys.stderr)
        return {"cells": dict(cells), "children": children}


def main():
    if len(sys.argv) not in (5, 6, 7) or (len(sys.argv) >= 6 and sys.argv[5] not in ("xc7", "xcup")):
        raise InputError(USAGE)
    pkg, rtl, work, cache = sys.argv[1:5]
    family = sys.argv[5] if len(sys.argv) >= 6 else "xc7"
    top = sys.argv[6] if len(sys.argv) == 7 else TOP
    for d, what in ((work, "WORKDIR"), (cache, "CACHE_DIR")):
        if os.path.exists(d) and not os.path.isdir(d):
            raise InputError(f"{d}: {what} is not a directory")
    total = Hier(pkg, rtl, work, cache, family).synth(top, {})
    for cell, n in sorted(total.items()):
        print(f"     {cell} {n}")


def guard(prog, fn):
    """Bad input: one line, exit 2; Ctrl-C: one line; anything else is a bug: one line, exit 1."""
    def line(msg):
        return re.sub(r"[\x00-\x1f\x7f]", "?", msg)[:1000]
    try:
        fn()
    except InputError as e:
        sys.stderr.write(line(f"{prog}: {e}") + "\n")
        sys.exit(2)
    except KeyboardInterrupt:
        sys.stderr.write(f"{prog}: interrupted\n")
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 (the last line of defence: one line, not a traceback)
        sys.stderr.write(line(f"{prog}: internal error ({type(e).__name__}: {e}); please report it") + "\n")
        sys.exit(1)


if __name__ == "__main__":
    guard("synth_hier", main)
