"""common.py: what the zoo scripts share (scripts/zoo/build.py, qdq.py, zoo.py, test_zoo.py).

- Usage errors: one line on stderr and exit status 2 (UsageError, main_guard), never a traceback.
- Outputs written whole to a temporary file next to the destination, then renamed (write_atomic), so
  a failing run leaves every destination as it was; a FIFO or device destination (/dev/null) is
  written into, never renamed over.
- Seeded inputs: "calibration-like" images (smooth random structure, ImageNet-normalized) and token ids.
- ONNX Runtime (npm onnxruntime-node, scripts/setup.sh installs it) through scripts/onnx/ort_run.js.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ORT_RUN = os.path.join(ROOT, "scripts", "onnx", "ort_run.js")

# The zoo: name -> kind ("image" models take float [1,3,S,S]; "tokens" take int64 ids [1,128]).
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
          "efficientnet_b0", "squeezenet1_1", "shufflenet_v2_x1_0", "googlenet", "densenet121",
          "regnet_x_400mf", "mnasnet1_0", "vit_tiny", "bert_tiny"]
TOKEN_MODELS = {"bert_tiny"}
BERT_SEQ, BERT_VOCAB = 128, 1000
SEED = 0


class UsageError(Exception):
    """A bad argument or a missing tool: one line, exit status 2."""


def main_guard(fn):
    """Run fn(); a UsageError (or an OSError about a file) becomes one line and exit 2."""
    try:
        rc = fn()
    except UsageError as e:
        print(f"{os.path.basename(sys.argv[0])}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{os.path.basename(sys.argv[0])}: interrupted", file=sys.stderr)
        return 130
    return rc or 0


def parse_models(spec):
    """--models a,b,c (or 'all') -> list; an unknown name is a usage error."""
    if spec in (None, "", "all"):
        return list(MODELS)
    names = [m.strip() for m in spec.split(",") if m.strip()]
    bad = [m for m in names if m not in MODELS]
    if bad:
        raise UsageError(f"unknown model {bad[0]!r} (known: {', '.join(MODELS)})")
    if not names:
        raise UsageError("--models: no model named")
    return names


def parse_size(v):
    """--size: an image side in pixels, 32..512 (the zoo's models need 32 at least: five stride-2 stages)."""
    try:
        s = int(v)
    except (TypeError, ValueError):
        raise UsageError(f"--size {v!r}: not an integer") from None
    if not 32 <= s <= 512:
        raise UsageError(f"--size {s}: must be 32..512")
    return s


def parse_count(v, what, lo, hi):
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise UsageError(f"{what} {v!r}: not an integer") from None
    if not lo <= n <= hi:
        raise UsageError(f"{what} {n}: must be {lo}..{hi}")
    return n


def ensure_dir(d):
    """Create d if needed and check that it is writable (a usage error otherwise)."""
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{d}: cannot create the directory: {e.strerror}") from None
    if not os.path.isdir(d) or not os.access(d, os.W_OK | os.X_OK):
        raise UsageError(f"{d}: not a writable directory")
    return d


def is_special(path):
    """True when path exists and is not a regular file (a FIFO, a device such as /dev/null, a socket)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def write_atomic(path, write):
    """write(tmp_path) then rename onto path: path is replaced whole or not at all.

    A destination that is not a regular file (`-o /dev/null`, a FIFO) is never renamed over: that
    would replace the device or FIFO with a regular file (run as root, /dev/null itself). The
    output is written whole to a temporary file first, then copied into it."""
    if is_special(path):
        fd, tmp = tempfile.mkstemp(prefix=".part-", suffix=os.path.splitext(path)[1])
        os.close(fd)
        try:
            write(tmp)
            with open(tmp, "rb") as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
        finally:
            os.unlink(tmp)
        return
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".part-", suffix=os.path.splitext(path)[1], dir=d)
    os.close(fd)
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 is not what a user's output file should get
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_npy(path, a):
    def w(tmp):
        with open(tmp, "wb") as f:
            np.save(f, a)
    write_atomic(path, w)


def save_onnx(path, model):
    import onnx
    write_atomic(path, lambda tmp: onnx.save(model, tmp))


def save_json(path, obj):
    def w(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
            f.write("\n")
    write_atomic(path, w)


def images(n, size, seed):
    """n seeded images [n,3,size,size] float32, ImageNet-normalized: smooth random structure (a coarse
    random grid upsampled bilinearly, plus a little pixel noise) so that activations have the spatial
    correlation of photographs rather than white noise's."""
    import torch
    import torch.nn.functional as F
    rng = np.random.default_rng(seed)
    coarse = rng.random((n, 3, 7, 7), dtype=np.float32)
    x = F.interpolate(torch.from_numpy(coarse), size=(size, size), mode="bilinear", align_corners=False).numpy()
    x = x + rng.normal(0, 0.05, x.shape).astype(np.float32)
    x = np.clip(x, 0, 1)
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
    return np.ascontiguousarray(((x - mean) / std).astype(np.float32))


def tokens(n, seed):
    """n seeded token-id sequences [n,128] int64: id 1 first (a [CLS]), the rest uniform in 2..vocab-1."""
    rng = np.random.default_rng(seed)
    t = rng.integers(2, BERT_VOCAB, (n, BERT_SEQ), dtype=np.int64)
    t[:, 0] = 1
    return t


def inputs(model, n, size, seed):
    return tokens(n, seed) if model in TOKEN_MODELS else images(n, size, seed)


# Seeds: calibration and evaluation inputs never overlap.
CALIB_SEED, EVAL_SEED = 1000, 2000


def ort_dir():
    return os.environ.get("TSR_ORT_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tessera", "ort")


def ort_available():
    """None when node and onnxruntime-node are there, else why not (one line)."""
    if not shutil.which("node"):
        return "node is not on PATH (scripts/setup.sh installs nodejs)"
    if not os.path.isdir(os.path.join(ort_dir(), "node_modules", "onnxruntime-node")):
        return f"ONNX Runtime not found in {ort_dir()} (scripts/setup.sh installs it; TSR_ORT_DIR moves it)"
    return None


def require_ort():
    why = ort_available()
    if why:
        raise UsageError(why)


class OrtError(Exception):
    """ONNX Runtime refused or failed: its message, one line."""


def ort_run(model, inp, out, batch=True, opt="all", as_is=False, minmax=False, named=(), s8_as_u8=False):
    """Run scripts/onnx/ort_run.js; named = [(output name, file)] for extra outputs; s8_as_u8: int8
    activation Q/DQ pairs moved to uint8 first (scripts/onnx/ort_exact.py --s8-as-u8)."""
    args = ["node", ORT_RUN]
    if batch:
        args.append("--batch")
    if as_is:
        args.append("--as-is")
    if s8_as_u8:
        args.append("--s8-as-u8")
    if minmax:
        args.append("--minmax")
    args += ["--opt", opt, model, inp, out]
    for n, f in named:
        args += [n, f]
    env = dict(os.environ, NODE_PATH=os.path.join(ort_dir(), "node_modules"))
    p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode:
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        raise OrtError(lines[-1] if lines else f"ort_run.js exit {p.returncode}")


def output_scale(m):
    """The per-tensor scale of the DequantizeLinear that writes ModelProto m's first output, through
    relabellings after it (squeezenet1_1 ends in DequantizeLinear -> Flatten); None if there is none:
    a dequantized float output is compared in units of it."""
    from onnx import numpy_helper
    out = m.graph.output[0].name
    inits = {t.name: t for t in m.graph.initializer}
    writer = {o: n for n in m.graph.node for o in n.output}
    for _ in range(len(m.graph.node)):
        n = writer.get(out)
        if n is None:
            return None
        if n.op_type == "DequantizeLinear":
            s = numpy_helper.to_array(inits[n.input[1]]) if n.input[1] in inits else None
            return float(s) if s is not None and s.size == 1 else None
        if n.op_type not in ("Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity"):
            return None
        out = n.input[0]
    return None
