#!/usr/bin/python3
"""Check that docs/architecture.md matches the code, and that the docs' links hold.

    /usr/bin/python3 scripts/check_architecture.py [--root DIR] [--self-test]

Fails (exit 1), one line per finding naming the file, when:
  - a source file of a layer directory (isa/ sim/ driver/ jit/ onnx/ train/ cli/ hw/rtl/, and the .py files
    of python/) is not named in docs/architecture.md;
  - docs/architecture.md names a file that does not exist;
  - a file's #include of a project header goes against the layer table of docs/architecture.md
    (directly, or through a header of a lower layer that passes on a layer its user may not see);
  - a relative link in README.md, CHANGELOG.md or docs/**/*.md points to no existing file, or
    README.md or docs/**/*.md names a file of those directories that does not exist.
Exit 2 when the doc itself cannot be read or has no layer table (bad input, one line).

Why the layer table is parsed from the doc: the doc and the check are then one thing, so neither
can drift from the other; changing a dependency means changing the table a reader sees.
--self-test first builds small trees with one violation each and requires the check to find it
(and a clean tree to pass), so the check itself can fail.
"""

import os
import re
import sys
import tempfile

# The directories whose source files architecture.md must list.
LAYER_ROOTS = ("isa", "sim", "driver", "jit", "onnx", "train", "cli", "hw/rtl", "python")
SOURCE_EXT = (".c", ".h", ".cpp", ".cc", ".hpp", ".sv", ".svh", ".v")
# The Python package (python/) is listed by its .py files (its C is compiled from build_cffi.py).
ROOT_EXT = {"python": (".py",)}
# What counts as naming a file in architecture.md: a path under a layer root or hw/ with an
# extension (prose included, so a renamed file cannot survive anywhere in the doc).
NAMED_FILE_RE = re.compile(
    r"(?<![\w./-])((?:isa|sim|driver|jit|onnx|train|cli|hw)/[\w./-]*\.(?:c|h|cpp|cc|hpp|sv|svh|v|md|vlt)"
    r"|python/[\w./-]*\.py)(?![\w/-])")
INCLUDE_RE = re.compile(r'^\s*(?:#\s*include|`include)\s+"([^"]+)"', re.M)
ARCH_DOC = "docs/architecture.md"


class BadInput(Exception):
    """The doc cannot be checked at all (missing, no layer table): exit 2."""


def rel(root, path):
    return os.path.relpath(path, root).replace(os.sep, "/")


def source_files(root):
    """Every source file under the layer roots, as repo-relative paths."""
    out = []
    for top in LAYER_ROOTS:
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for f in sorted(filenames):
                if f.startswith(".") or not f.endswith(ROOT_EXT.get(top, SOURCE_EXT)):
                    continue
                out.append(rel(root, os.path.join(dirpath, f)))
    return sorted(set(out))


def split_row(line):
    cells = line.strip().strip("|").split("|")
    return [c.strip() for c in cells]


def parse_layers(text):
    """The layer table: the markdown table whose header has a 'may include' column.

    Returns a list of (name, [path prefixes], set(allowed layer names)).
    """
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("|"):
            continue
        head = [c.lower() for c in split_row(line)]
        if not any("may include" in c for c in head):
            continue
        try:
            c_name = head.index("layer")
            c_paths = next(k for k, c in enumerate(head) if "files" in c or "director" in c)
            c_allow = next(k for k, c in enumerate(head) if "may include" in c)
        except (ValueError, StopIteration):
            raise BadInput(f"{ARCH_DOC}: the layer table needs the columns 'layer', "
                           "'directories and files' and 'may include'")
        layers = []
        for row in lines[i + 2:]:
            if not row.lstrip().startswith("|"):
                break
            cells = split_row(row)
            if len(cells) <= max(c_name, c_paths, c_allow):
                raise BadInput(f"{ARCH_DOC}: layer table row has too few cells: {row.strip()}")
            name = cells[c_name].strip("`* ")
            paths = re.findall(r"`([^`]+)`", cells[c_paths])
            allow = {a.strip().strip("`") for a in re.split(r"[,;]", cells[c_allow])}
            allow = {a for a in allow if a and a not in ("-", "—", "none", "nothing")}
            if not name or not paths:
                raise BadInput(f"{ARCH_DOC}: layer table row without a name or paths: {row.strip()}")
            layers.append((name, paths, allow))
        if not layers:
            raise BadInput(f"{ARCH_DOC}: the layer table has no rows")
        names = {n for n, _, _ in layers}
        for n, _, allow in layers:
            for a in sorted(allow - names):
                raise BadInput(f"{ARCH_DOC}: layer {n} may include unknown layer '{a}'")
        return layers
    raise BadInput(f"{ARCH_DOC}: no layer table (a table with a 'may include' column)")


def layer_of(path, layers):
    """The layer whose longest directory or file prefix holds path (None: no layer)."""
    best, best_len = None, -1
    for name, prefixes, _ in layers:
        for p in prefixes:
            if (path == p or (p.endswith("/") and path.startswith(p))) and len(p) > best_len:
                best, best_len = name, len(p)
    return best


def strip_code(text):
    """Markdown without fenced code blocks and inline code (links there are not links)."""
    text = re.sub(r"^\s*(```|~~~).*?^\s*\1[^\n]*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


LINK_RE = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF_RE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)


def check_links(root):
    errors = []
    docs = []
    for top in ("README.md", "CHANGELOG.md"):
        if os.path.isfile(os.path.join(root, top)):
            docs.append(top)
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "docs")):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        docs += [rel(root, os.path.join(dirpath, f)) for f in sorted(filenames) if f.endswith(".md")]
    for doc in docs:
        with open(os.path.join(root, doc), encoding="utf-8", errors="replace") as f:
            text = strip_code(f.read())
        targets = LINK_RE.findall(text) + REFDEF_RE.findall(text)
        for t in targets:
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t) or t.startswith("#"):
                continue  # a URL or an anchor in the same page
            path = t.split("#", 1)[0].split("?", 1)[0]
            if not path:
                continue
            full = os.path.normpath(os.path.join(root, os.path.dirname(doc), path))
            if not os.path.exists(full):
                errors.append(f"{doc}: link to {t}: no such file")
    return errors


def resolve_include(inc, src, root, by_name):
    """The project file an #include "inc" in src means, or None for a system/generated header."""
    cand = os.path.normpath(os.path.join(os.path.dirname(src), inc)).replace(os.sep, "/")
    if os.path.isfile(os.path.join(root, cand)):
        return cand
    if os.path.isfile(os.path.join(root, inc)):
        return inc
    # The build puts every layer's directory on the include path, so a bare name means the one
    # project file of that name (same directory first).
    hits = by_name.get(os.path.basename(inc), [])
    if not hits:
        return None
    same = [h for h in hits if os.path.dirname(h) == os.path.dirname(src)]
    return (same or hits)[0]


def check_includes(root, files, layers):
    allowed = {n: a | {n} for n, _, a in layers}
    by_name = {}
    for f in files:
        by_name.setdefault(os.path.basename(f), []).append(f)
    direct = {}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            incs = INCLUDE_RE.findall(fh.read())
        direct[f] = [r for r in (resolve_include(i, f, root, by_name) for i in incs) if r]

    errors = []
    # Direct includes against the including file's own layer.
    bad_edges = set()
    for f in files:
        lf = layer_of(f, layers)
        if lf is None:
            continue
        for g in direct[f]:
            lg = layer_of(g, layers)
            if lg is not None and lg not in allowed[lf]:
                bad_edges.add((f, g))
                errors.append(f"{f}: includes {g} (layer {lg}); layer {lf} may include only: "
                              f"{', '.join(sorted(allowed[lf]))}")
    # Through headers: a header a layer may include must not hand it a layer it may not see.
    leaks = {}
    for f in files:
        lf = layer_of(f, layers)
        if lf is None:
            continue
        seen = {f}
        stack = [(g, f) for g in direct[f]]
        while stack:
            g, via = stack.pop()
            if g in seen:
                continue
            seen.add(g)
            lg = layer_of(g, layers)
            if lg is not None and lg not in allowed[lf]:
                # Reported once, where the chain first enters a layer f may not see (a direct
                # include was reported above); what g includes in turn is the same finding.
                if via != f and (via, g) not in bad_edges:
                    leaks.setdefault((via, g, lf), f)
                continue
            stack.extend((h, g) for h in direct.get(g, []))
    for (via, g, lf), example in sorted(leaks.items()):
        errors.append(f"{via}: includes {g} (layer {layer_of(g, layers)}), which reaches layer {lf} "
                      f"(e.g. {example}) that may include only: {', '.join(sorted(allowed[lf]))}")
    return errors


def check(root):
    """All findings for the tree at root, as a list of lines."""
    doc_path = os.path.join(root, ARCH_DOC)
    try:
        with open(doc_path, encoding="utf-8") as f:
            doc = f.read()
    except OSError as e:
        raise BadInput(f"{ARCH_DOC}: cannot read: {e.strerror}")
    except UnicodeDecodeError:
        raise BadInput(f"{ARCH_DOC}: not UTF-8")
    layers = parse_layers(doc)
    errors = []
    for _, prefixes, _ in layers:
        for p in prefixes:
            if not os.path.exists(os.path.join(root, p)):
                errors.append(f"{ARCH_DOC}: layer table names {p}, which does not exist")
    files = source_files(root)
    named = set(NAMED_FILE_RE.findall(doc))
    for f in files:
        if f not in named:
            errors.append(f"{f}: not in {ARCH_DOC} (add a line saying what it does)")
        elif layer_of(f, layers) is None:
            errors.append(f"{f}: in no layer of the layer table of {ARCH_DOC}")
    for n in sorted(named):
        if not os.path.exists(os.path.join(root, n)):
            errors.append(f"{ARCH_DOC}: names {n}, which does not exist")
    errors += check_includes(root, files, layers)
    errors += check_links(root)
    errors += check_named_in_docs(root)
    return errors


def check_named_in_docs(root):
    """Files of the layers named in README.md and docs/**/*.md (not the CHANGELOG: history may name
    what is gone) must exist too: a guide that sends a reader to a renamed file is a broken link."""
    errors = []
    docs = ["README.md"] if os.path.isfile(os.path.join(root, "README.md")) else []
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "docs")):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        docs += [rel(root, os.path.join(dirpath, f)) for f in sorted(filenames) if f.endswith(".md")]
    for doc in docs:
        if doc == ARCH_DOC:
            continue  # checked above with its own message
        with open(os.path.join(root, doc), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for n in sorted(set(NAMED_FILE_RE.findall(text))):
            if not os.path.exists(os.path.join(root, n)):
                errors.append(f"{doc}: names {n}, which does not exist")
    return errors


# ---------------------------------------------------------------- self-test

SELFTEST_DOC = """# Architecture

| layer | target | directories and files | may include |
|---|---|---|---|
| isa | `tsr_isa` | `isa/` | — |
| driver | `tsr_driver` | `driver/` | isa |
| jit | `tsr_jit` | `jit/` | driver, isa |
| hw | — | `hw/rtl/` | — |

| file | job |
|---|---|
| `isa/a.h`, `isa/a.c` | a |
| `driver/d.h` | d |
| `jit/j.c` | j |
| `hw/rtl/top.sv` | top |

See [the guide](guide.md).
"""


def _write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)


def _tree(root, **changes):
    files = {
        ARCH_DOC: SELFTEST_DOC,
        "docs/guide.md": "# Guide\n[back](architecture.md) [web](https://example.org/x) [here](#guide)\n",
        "README.md": "[arch](docs/architecture.md)\n```\n[not a link](nowhere.md)\n```\n",
        "isa/a.h": "int a(void);\n",
        "isa/a.c": '#include "a.h"\n#include <stdio.h>\n#include "generated.h"\n',
        "driver/d.h": '#include "a.h"\n',
        "jit/j.c": '#include "d.h"\n#include "a.h"\n',
        "hw/rtl/top.sv": "module top; endmodule\n",
    }
    files.update(changes)
    for path, text in files.items():
        if text is not None:
            _write(root, path, text)


def self_test():
    """Each case: (what, tree changes, a substring one finding must contain; None = must pass)."""
    cases = [
        ("clean tree", {}, None),
        ("file missing from the doc", {"jit/k.c": "int k;\n"}, "jit/k.c: not in"),
        ("RTL module missing from the doc", {"hw/rtl/sub.sv": "module sub; endmodule\n"},
         "hw/rtl/sub.sv: not in"),
        ("Python module missing from the doc", {"python/tessera/m.py": "x = 1\n"}, "python/tessera/m.py: not in"),
        ("doc names a missing Python file", {ARCH_DOC: SELFTEST_DOC + "\n`python/tessera/gone.py`\n"},
         "names python/tessera/gone.py"),
        ("doc names a missing file", {ARCH_DOC: SELFTEST_DOC + "\n`jit/gone.c` was removed\n"},
         "names jit/gone.c"),
        ("lower layer includes a higher one", {"driver/d.h": '#include "j.h"\n', "jit/j.h": "",
                                               ARCH_DOC: SELFTEST_DOC + "\n`jit/j.h`\n"},
         "driver/d.h: includes jit/j.h"),
        ("a header passes on a layer its user may not see",
         {"driver/d.h": '#include "a.h"\n#include "x.h"\n', "sim/x.h": "",
          ARCH_DOC: SELFTEST_DOC.replace("| driver | `tsr_driver` | `driver/` | isa |",
                                         "| sim | `tsr_sim` | `sim/` | isa |\n"
                                         "| driver | `tsr_driver` | `driver/` | sim, isa |")
          + "\n`sim/x.h`\n"},
         "driver/d.h: includes sim/x.h (layer sim), which reaches layer jit"),
        ("broken link", {"docs/guide.md": "[gone](nothing.md)\n"}, "docs/guide.md: link to nothing.md"),
        ("a guide names a missing file", {"docs/guide.md": "see `hw/rtl/old_top.sv`\n"},
         "docs/guide.md: names hw/rtl/old_top.sv"),
        ("broken link in the README", {"README.md": "![pic](docs/none.png)\n"}, "README.md: link to docs/none.png"),
    ]
    failed = 0
    for what, changes, expect in cases:
        with tempfile.TemporaryDirectory(prefix="tsr_archcheck_") as root:
            _tree(root, **changes)
            errors = check(root)
        if expect is None:
            ok = not errors
        else:
            ok = any(expect in e for e in errors)
        if not ok:
            failed += 1
            print(f"self-test FAILED: {what}: expected "
                  f"{'no finding' if expect is None else repr(expect)}, got {errors}")
    # Bad input: no layer table must be exit 2 material, not a pass.
    with tempfile.TemporaryDirectory(prefix="tsr_archcheck_") as root:
        _tree(root, **{ARCH_DOC: "# Architecture\nno table\n"})
        try:
            check(root)
            failed += 1
            print("self-test FAILED: a doc without a layer table was accepted")
        except BadInput:
            pass
    return failed


def main(argv):
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    run_self_test = False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--self-test":
            run_self_test = True
        elif a == "--root" and args:
            root = args.pop(0)
        elif a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        else:
            print(f"check_architecture: unknown argument {a!r} (usage: [--root DIR] [--self-test])",
                  file=sys.stderr)
            return 2
    if not os.path.isdir(root):
        print(f"check_architecture: --root {root}: not a directory", file=sys.stderr)
        return 2
    if run_self_test:
        failed = self_test()
        if failed:
            print(f"check_architecture: self-test: {failed} case(s) failed")
            return 1
        print("check_architecture: self-test passed")
    try:
        errors = check(root)
    except BadInput as e:
        print(f"check_architecture: {e}", file=sys.stderr)
        return 2
    for e in errors:
        print(e)
    if errors:
        print(f"check_architecture: {len(errors)} finding(s); {ARCH_DOC} must match the code")
        return 1
    print(f"check_architecture: {ARCH_DOC} matches the code; links valid")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
