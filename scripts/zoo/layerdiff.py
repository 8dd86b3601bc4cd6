#!/usr/bin/python3
"""layerdiff.py: where a QDQ model's results part from ONNX Runtime's, operator by operator.

usage: layerdiff.py MODEL.onnx INPUTS.npy --tessera PATH [--inputs N] [--dir DIR] [--backend fsim|rtl]
                    [--json]

Every activation QuantizeLinear output (a quantized tensor; weights are constants) is a
measuring point. Per point, in graph order, two comparisons in LSBs of that tensor:
- "chain": ONNX Runtime's value (the tensor added as a graph output) against tessera's
  (`tessera infer --tensor NAME=FILE`) on the same model input: the error accumulated up to here.
- "alone": the operator group that writes the point (the nodes between the quantized tensors
  it reads and the point: DequantizeLinear inputs, the operator, a fused Relu, the
  QuantizeLinear) run in ONNX Runtime on TESSERA's own inputs of that group (its values of the
  quantized tensors read), against tessera's output: the error this operator adds by itself,
  whatever came before. Both sides are fed the same integers, so this is the per-operator
  figure the bounds speak of (exact where ORT computes in integers, <= 1 LSB where it rounds
  in float). All groups run in one ORT session: one model holding a renamed copy of each.
INPUTS.npy holds samples along its first axis (the first N are used, one tessera run each).
Prints one line per point (op, elements, chain differ/max, alone differ/max) and a summary;
exit 0, or 2 on a usage or input error, 1 when tessera or ORT fails.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import common  # noqa: E402
from common import UsageError  # noqa: E402

CHUNK = 64  # tessera infer takes at most 64 --tensor options per run


def qtype(m, q_node, consts):
    """The ONNX element type of a QuantizeLinear's output: its zero point's, else uint8."""
    from onnx import TensorProto
    if len(q_node.input) > 2 and q_node.input[2] in consts:
        return consts[q_node.input[2]].data_type
    return TensorProto.UINT8


def points(m):
    """[(tensor name, onnx elem type, producing QuantizeLinear index)] of every activation Q output."""
    consts = {t.name: t for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = a.t
    out = []
    for i, n in enumerate(m.graph.node):
        if n.op_type == "QuantizeLinear" and n.input[0] not in consts:
            out.append((n.output[0], qtype(m, n, consts), i))
    return out, consts


def group(m, qi, boundary, consts, graph_inputs):
    """The nodes (indices, graph order) between the quantized tensors in boundary (and the graph
    inputs) and node qi's output, and the boundary tensors they read."""
    prod = {}
    for i, n in enumerate(m.graph.node):
        for o in n.output:
            prod[o] = i
    nodes, reads, todo = set(), [], [qi]
    while todo:
        i = todo.pop()
        if i in nodes:
            continue
        nodes.add(i)
        for t in m.graph.node[i].input:
            if not t or t in consts:
                continue
            if t in boundary or t in graph_inputs or t not in prod:
                if t not in reads:
                    reads.append(t)
            else:
                todo.append(prod[t])
    return sorted(nodes), reads


def label(m, nodes):
    ops = [m.graph.node[i].op_type for i in nodes
           if m.graph.node[i].op_type not in ("QuantizeLinear", "DequantizeLinear")]
    return "+".join(ops) or "Q"


def isolated_model(m, groups, vi_type):
    """One model holding a renamed copy of each group k: inputs g{k}__T (T read), output g{k}__Y."""
    import onnx
    from onnx import helper
    consts = {t.name for t in m.graph.initializer}
    g = m.graph
    nodes, ins, outs = [], [], []
    for k, (y, gnodes, reads) in enumerate(groups):
        def rn(t):
            return t if (not t or t in consts) else f"g{k}__{t}"
        for t in reads:
            ins.append(helper.make_tensor_value_info(rn(t), vi_type[t], None))
        for i in gnodes:
            n = onnx.NodeProto()
            n.CopyFrom(g.node[i])
            n.name = f"g{k}__{n.name or i}"
            for j, t in enumerate(n.input):
                n.input[j] = rn(t)
            for j, t in enumerate(n.output):
                n.output[j] = rn(t)
            nodes.append(n)
        outs.append(helper.make_tensor_value_info(rn(y), vi_type[y], None))
    ng = helper.make_graph(nodes, "layerdiff", ins, outs, list(g.initializer))
    nm = helper.make_model(ng, opset_imports=list(m.opset_import))
    nm.ir_version = m.ir_version
    return nm


def with_outputs(m, pts):
    """A copy of m with every point added as a graph output (first output unchanged)."""
    import onnx
    from onnx import helper
    c = onnx.ModelProto()
    c.CopyFrom(m)
    have = {o.name for o in c.graph.output}
    for t, et, _ in pts:
        if t not in have:
            c.graph.output.append(helper.make_tensor_value_info(t, et, None))
    return c


def named(shown, chunk):
    """The name of chunk a tessera message shows as shown: the whole name, or (a name over 80 bytes,
    isa/tsr_strsafe.h) its first 80 bytes and "..."; None when none or several match."""
    if shown in chunk:
        return shown
    if not shown.endswith("..."):
        return None
    hits = [t for t in chunk if len(t.encode()) > 80 and t.startswith(shown[:-3])]
    return hits[0] if len(hits) == 1 else None


def known_names(a, mpath, x, names, d):
    """The names tessera has a value for: a point folded into a device operator (the inner
    QuantizeLinear of a Relu kept between Q/DQ pairs, a chain's inside an activation table: a GELU's Erf)
    has none; `tessera infer` names it."""
    import re
    inp = os.path.join(d, "ld_x.npy")
    np.save(inp, x[:1])
    names, gone = list(names), []
    for c0 in range(0, len(names), CHUNK):
        while True:
            chunk = names[c0:c0 + CHUNK]
            cmd = [a.tessera, "infer", mpath, "-i", inp, "--quiet", "--backend", a.backend, "--config", a.config]
            cmd += ["--place", a.place] if a.place else []
            for j, t in enumerate(chunk):
                cmd += ["--tensor", f"{t}={os.path.join(d, f'ld_k{j}.npy')}"]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=a.timeout)
            mm = re.search(r'no value called "(.*)"$', p.stderr.strip()) or \
                re.search(r'"([^"]*)" is computed inside a device activation table', p.stderr.strip())
            nm = mm and named(mm.group(1), chunk)
            if p.returncode and nm:
                names.remove(nm)
                gone.append(nm)
                continue
            if p.returncode:
                lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
                raise RuntimeError("tessera: " + (lines[-1] if lines else f"exit {p.returncode}"))
            break
    return names, gone


def run_tessera(a, mpath, x, names, d):
    """{name: [array per sample]} of tessera's values of names, and its outputs concatenated."""
    vals = {t: [] for t in names}
    outs = []
    inp = os.path.join(d, "ld_x.npy")
    for s in range(len(x)):
        np.save(inp, x[s:s + 1])
        for c0 in range(0, max(len(names), 1), CHUNK):
            chunk = names[c0:c0 + CHUNK]
            files = [os.path.join(d, f"ld_t{j}.npy") for j in range(len(chunk))]
            out = os.path.join(d, "ld_y.npy")
            cmd = [a.tessera, "infer", mpath, "-i", inp, "-o", out, "--quiet", "--backend", a.backend, "--config", a.config]
            cmd += ["--place", a.place] if a.place else []
            for t, f in zip(chunk, files):
                cmd += ["--tensor", f"{t}={f}"]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=a.timeout)
            if p.returncode:
                lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
                raise RuntimeError("tessera: " + (lines[-1] if lines else f"exit {p.returncode}"))
            for t, f in zip(chunk, files):
                vals[t].append(np.load(f))
            if c0 == 0:
                outs.append(np.load(out))
    return vals, np.concatenate(outs)


def diff(got, want):
    if got.shape != want.shape:
        return None
    dd = np.abs(got.astype(np.int64) - want.astype(np.int64))
    return int((dd != 0).sum()), int(dd.max()) if dd.size else 0


def layerdiff(a):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(a.model)
    x = np.load(a.x)[:a.inputs]
    if x.ndim < 1 or len(x) == 0:
        raise UsageError(f"{a.x}: no samples")
    d = common.ensure_dir(a.dir)
    pts, consts = points(m)
    if not pts:
        raise UsageError(f"{a.model}: no activation QuantizeLinear (not a QDQ model)")
    names = [t for t, _, _ in pts]
    graph_inputs = {i.name for i in m.graph.input}
    vi_type = {t: et for t, et, _ in pts}
    for i in m.graph.input:
        vi_type[i.name] = i.type.tensor_type.elem_type
    names, gone = known_names(a, a.model, x, names, d)
    # a point tessera folded away is no boundary: the group of the next point reaches past it
    boundary = set(names)
    groups = []
    for t, _, qi in pts:
        if t in boundary:
            gn, reads = group(m, qi, boundary, consts, graph_inputs)
            groups.append((t, gn, reads))
    # ORT, chain: every point as an output of the whole model
    x_path = os.path.join(d, "ld_inputs.npy")
    np.save(x_path, x)
    full = os.path.join(d, "ld_full.onnx")
    common.save_onnx(full, with_outputs(m, pts))
    ort_files = [(t, os.path.join(d, f"ld_ort{j}.npy")) for j, t in enumerate(names + gone)]
    common.ort_run(full, x_path, os.path.join(d, "ld_ort_y.npy"), batch=True, named=ort_files)
    ort_vals = {t: np.load(f) for t, f in ort_files}
    # tessera, every point
    tsr_per, tsr_y = run_tessera(a, a.model, x, names, d)
    tsr_vals = {t: np.concatenate(v) for t, v in tsr_per.items()}
    # ORT, alone: each group on tessera's inputs
    iso = os.path.join(d, "ld_iso.onnx")
    common.save_onnx(iso, isolated_model(m, groups, vi_type))
    # A tensor whose leading axis is not the batch (torch's MultiheadAttention works in
    # [sequence, batch, features]: ViT's attention tensors are [197, 1, 192]) cannot be cut
    # into samples along axis 0 by ort_run.js --batch; then the isolated model runs once per
    # sample, unbatched, and its outputs are concatenated along axis 0 as tessera's are.
    reads_all = [t for _, _, reads in groups for t in reads]
    batched = all(t in graph_inputs or all(v.shape[:1] == (1,) for v in tsr_per[t]) for t in reads_all)
    iso_vals = {}
    for s in ([None] if batched else range(len(x))):
        in_files = []
        for t in reads_all:
            f = os.path.join(d, f"ld_in{len(in_files)}.npy")
            if s is None:
                np.save(f, x if t in graph_inputs else tsr_vals[t])
            else:
                np.save(f, x[s:s + 1] if t in graph_inputs else tsr_per[t][s])
            in_files.append(f)
        iso_files = [(f"g{k}__{t}", os.path.join(d, f"ld_iso{k}.npy")) for k, (t, _, _) in enumerate(groups)]
        common.ort_run(iso, ",".join(in_files), iso_files[0][1], batch=s is None, named=iso_files[1:])
        for k, (_, f) in enumerate(iso_files):
            iso_vals.setdefault(k, []).append(np.load(f))
    rows = []
    for k, (t, gn, reads) in enumerate(groups):
        ch = diff(tsr_vals[t], ort_vals[t])
        al = diff(tsr_vals[t], np.concatenate(iso_vals[k]))
        rows.append({"tensor": t, "op": label(m, gn), "node": m.graph.node[gn[-1]].name if gn else "",
                     "elements": int(tsr_vals[t].size), "chain_differ": ch and ch[0], "chain_max": ch and ch[1],
                     "alone_differ": al and al[0], "alone_max": al and al[1]})
    for t in gone:
        rows.append({"tensor": t, "op": "folded", "node": "", "elements": int(ort_vals[t].size),
                     "chain_differ": None, "chain_max": None, "alone_differ": None, "alone_max": None,
                     "folded": True})
    return rows, numpy_helper


def main():
    ap = argparse.ArgumentParser(prog="layerdiff.py", description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("x")
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--inputs", type=int, default=4)
    ap.add_argument("--dir", default="/tmp/layerdiff")
    ap.add_argument("--backend", default="fsim", choices=("fsim", "rtl"))
    ap.add_argument("--config", default="default", help="config file or preset for tessera (default: default)")
    ap.add_argument("--place", default=None, help="tessera infer --place KIND=device|host[,...] for every run")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    for f in (a.model, a.x, a.tessera):
        if not os.path.isfile(f):
            raise UsageError(f"{f}: no such file")
    if not 1 <= a.inputs <= 10000:
        raise UsageError("--inputs must be in 1..10000")
    common.require_ort()
    try:
        rows, _ = layerdiff(a)
    except (RuntimeError, common.OrtError) as e:
        print(f"layerdiff.py: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    folded = [r for r in rows if r.get("folded")]
    rows = [r for r in rows if not r.get("folded")]
    print(f"{'tensor':34s} {'op':24s} {'elems':>8s} {'chain':>12s} {'alone':>12s}")
    for r in rows:
        def f(n, mx):
            return "shape?" if n is None else (f"{n} / {mx}" if n else "exact")
        print(f"{r['tensor'][:34]:34s} {r['op'][:24]:24s} {r['elements']:8d} "
              f"{f(r['chain_differ'], r['chain_max']):>12s} {f(r['alone_differ'], r['alone_max']):>12s}")
    over = [r for r in rows if r["alone_max"] is None or r["alone_max"] > 1]
    one = [r for r in rows if r["alone_max"] == 1]
    print(f"{len(rows)} operators: {len(rows) - len(over) - len(one)} exact alone, {len(one)} within 1 LSB, "
          f"{len(over)} over 1 LSB" + (": " + ", ".join(f"{r['tensor']} ({r['op']}, {r['alone_max']})"
                                                          for r in over[:12]) if over else "")
          + (f"; {len(folded)} points folded into a device operator (no tessera value)" if folded else ""))
    return 0


if __name__ == "__main__":
    sys.exit(common.main_guard(main))
