#!/usr/bin/python3
"""A model a user brings for on-device training (issue 27): the zoo's torchvision ResNet-18 with a new
head for a task of 10 classes, quantized by the repo's static QDQ quantizer the way onnxruntime's
quantize_static writes it, and the task's data. Writes into OUTDIR:

  resnet18.onnx, resnet18.json   the float model: scripts/zoo/build.py --models resnet18 --size S
                                 --classes 10 (torchvision's resnet18, weights=None as every zoo model:
                                 nothing can be downloaded here; seeded, BatchNorm statistics from the
                                 zoo's calibration-like images, folded into the convs; fc 512->10 new;
                                 exported for one image, [1,3,S,S], as the zoo exports it)
  resnet18_qdq.onnx              its QDQ form (scripts/zoo/qdq.py: per-channel int8 weights, uint8
                                 activations, MinMax calibration on 32 of the training images below:
                                 the user's data; ONNX Runtime's quantizer removes the Relus whose range
                                 the uint8 output is)
  train_x.npy, train_y.npy       the task: 400 of scikit-learn's 8x8 handwritten digits (python3-sklearn;
                                 the first 400 of the training split of scripts/onnx/train_digits.py),
                                 upscaled bilinearly to SxS, the grey level in all 3 channels,
                                 ImageNet-normalized as the zoo's inputs
  test_x.npy, test_y.npy         the 360 held-out digits of that split, the same way

The untuned model guesses (its head is new: ~10%); fine-tuning the last basic block (layer4.1: conv,
conv, the residual Add, Relu), the global average pool and fc on the 400 digits is the test of
`tessera train` on a model as the zoo brings it (scripts/train/test_train.sh zoo). Seeded: the same
files on every run. Needs node + onnxruntime-node (the calibration).
Usage: make_zoo_resnet.py OUTDIR [--size S]   (S 32..512, default 32)
"""
import os
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
USAGE = "usage: make_zoo_resnet.py OUTDIR [--size S]"
N_TRAIN, N_CALIB, CLASSES = 400, 32, 10


def fail(msg):
    sys.stderr.write("make_zoo_resnet: " + str(msg).replace("\n", "?")[:1000] + "\n")
    sys.exit(2)


def parse(argv):
    out, size, i = None, 32, 0
    while i < len(argv):
        a = argv[i]
        if a == "--size":
            if i + 1 >= len(argv):
                fail("--size needs a value; " + USAGE)
            try:
                size = int(argv[i + 1])
            except ValueError:
                fail(f"--size {argv[i + 1]!r}: not an integer")
            if not 32 <= size <= 512:
                fail(f"--size {size}: must be 32..512")
            i += 2
        elif a.startswith("-") or out is not None:
            fail(USAGE)
        else:
            out, i = a, i + 1
    if not out:
        fail(USAGE)
    return out, size


def digits(size):
    """(train x, train y, test x, test y): the digits split as train_digits.py splits it, upscaled."""
    import numpy as np
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int32)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)

    def up(a):
        t = torch.nn.functional.interpolate(torch.from_numpy(a), size=(size, size), mode="bilinear",
                                            align_corners=False).repeat(1, 3, 1, 1).numpy()
        return np.ascontiguousarray(((t - mean) / std).astype(np.float32))
    return up(xtr[:N_TRAIN]), ytr[:N_TRAIN].copy(), up(xte), yte.copy()


def main(argv):
    out_dir, size = parse(argv)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        fail(f"{out_dir}: cannot make OUTDIR: {e.strerror}")
    if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK):
        fail(f"{out_dir}: not a writable directory")
    sys.path.insert(0, os.path.join(HERE, "..", "zoo"))
    import common
    import build
    why = common.ort_available()
    if why:
        fail(why)
    import onnx
    import qdq
    fp32, _, _ = build.build("resnet18", size, out_dir, classes=CLASSES, log=lambda m: None)
    trx, try_, tex, tey = digits(size)
    try:
        q = qdq.quantize_model(onnx.load(fp32), trx[:N_CALIB], "u8")
    except common.OrtError as e:
        fail(f"{fp32}: ONNX Runtime failed in calibration: {e}")
    q.metadata_props.add(key="tessera.qdq", value=f"activations=u8 calib={N_CALIB} (the first training digits; "
                                                  "scripts/train/make_zoo_resnet.py via scripts/zoo/qdq.py)")
    common.save_onnx(os.path.join(out_dir, "resnet18_qdq.onnx"), q)
    for nm, a in (("train_x", trx), ("train_y", try_), ("test_x", tex), ("test_y", tey)):
        common.save_npy(os.path.join(out_dir, nm + ".npy"), a)
    print(f"make_zoo_resnet: {out_dir}/resnet18_qdq.onnx (ResNet-18 {size}x{size}, {CLASSES} classes), "
          f"{len(try_)} training and {len(tey)} held-out digits")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
