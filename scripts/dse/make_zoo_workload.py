#!/usr/bin/python3
"""make_zoo_workload.py: a zoo network as a DSE `onnx` workload with an accuracy reference.

usage: make_zoo_workload.py [--model mobilenet_v2] [--size 224] [--images 1] [--activations u8]
                            [--out scripts/dse/spaces/zoo]

Builds the float model with scripts/zoo/build.py (seeded, nothing downloaded), quantizes it to QDQ
with scripts/zoo/qdq.py (onnxruntime's quantize_static form, 16 calibration inputs), draws the
evaluation images (scripts/zoo/common.py inputs, EVAL_SEED) and writes ONNX Runtime's output on them
(scripts/zoo/common.py ort_run, the zoo's own reference) as the workload's `reference`:

    OUT/MODEL-ACT-SIZE.onnx      the QDQ model             (workload.model)
    OUT/MODEL-ACT-SIZE-x.npy     the images [N, 3, S, S]    (workload.input)
    OUT/MODEL-ACT-SIZE-ref.npy   ONNX Runtime's output      (workload.reference)

These are generated, not committed (scripts/dse/.gitignore): the space files that name them
(scripts/dse/spaces/exact-requant.json) say which command makes them. Same arguments -> the same
files (seeded build, calibration and images). Needs Debian's torch/onnx and ONNX Runtime
(scripts/setup.sh); bad arguments are one line, exit 2.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "zoo"))
import common  # noqa: E402
from common import UsageError  # noqa: E402


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, exit 2 (its default prints the usage first)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (--help for usage)\n")


def main():
    ap = Parser(description="A zoo network + input + ONNX Runtime reference for the DSE.")
    ap.add_argument("--model", default="mobilenet_v2", help="a zoo image model (default mobilenet_v2)")
    ap.add_argument("--size", default="224", help="image side (default 224)")
    ap.add_argument("--images", default="1", help="images in the input (default 1)")
    ap.add_argument("--activations", default="u8", help="u8 (default) or s8")
    ap.add_argument("--out", default=os.path.join(HERE, "spaces", "zoo"), help="output directory")
    a = ap.parse_args()
    models = common.parse_models(a.model)
    if len(models) != 1 or models[0] in common.TOKEN_MODELS:
        raise UsageError(f"--model {a.model!r}: give one image model of the zoo")
    model = models[0]
    size = common.parse_size(a.size)
    n = common.parse_count(a.images, "--images", 1, 64)
    if a.activations not in ("u8", "s8"):
        raise UsageError(f"--activations {a.activations!r}: must be u8 or s8")
    common.require_ort()
    out = common.ensure_dir(a.out)
    import build
    import qdq
    t0 = time.time()
    fdir = common.ensure_dir(os.path.join(out, f"float-{size}"))
    fp32, _, cached = build.build(model, size, fdir)
    stem = os.path.join(out, f"{model}-{a.activations}-{size}")
    try:
        q = qdq.quantize(fp32, model, a.activations, 16, size)
    except common.OrtError as e:
        raise UsageError(f"{model}: ONNX Runtime failed in calibration: {e}") from None
    common.save_onnx(stem + ".onnx", q)
    common.save_npy(stem + "-x.npy", common.inputs(model, n, size, common.EVAL_SEED))
    # the reference written atomically too: a failed run leaves no half file a sweep would read
    common.write_atomic(stem + "-ref.npy", lambda tmp: common.ort_run(stem + ".onnx", stem + "-x.npy", tmp,
                                                                      batch=True))
    for suffix in (".onnx", "-x.npy", "-ref.npy"):
        print(f"make_zoo_workload: {stem}{suffix}")
    print(f"make_zoo_workload: {model} {a.activations} {size}x{size}, {n} image(s), in {time.time() - t0:.1f} s"
          f"{' (float model cached)' if cached else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(common.main_guard(main))
