#!/usr/bin/python3
"""The shifted domain of the on-device training demo (issue 27): scikit-learn's
handwritten digits rotated by ANGLE degrees (default 30), which the digits CNN
of scripts/onnx/train_digits.py (trained on upright digits) mostly gets wrong.
Writes into OUTDIR:

  train_x.npy, train_y.npy  COUNT (default 300) rotated images of the training split and
                            REPLAY (default 100) other ones upright, shuffled (float32
                            [N,1,8,8] in [0,1], labels int32 [N]): the data `tessera train`
                            fine-tunes on. The upright ones are a rehearsal buffer (as in
                            continual learning): without them the fine-tuned model forgets
                            6-10 points of the old domain (float, 3-6 epochs)
  test_x.npy, test_y.npy    the 360 held-out images rotated (the new domain's test set)
  old_x.npy, old_y.npy      the same 360 held-out images upright (the old domain; equal
                            to train_digits.py's test_x.npy / test_y.npy)

The split is train_digits.py's (test_size 0.2, random_state 0, stratified), so no
held-out image was seen by the model or by the fine-tuning. The rotation is
bilinear about the image centre, zero outside, written here in numpy (no scipy)
so that it is the same on every machine. Seeded: the same files on every run.
Usage: make_shifted.py OUTDIR [--angle DEG] [--count N] [--replay N] [--seed S]
"""
import os
import sys

USAGE = "usage: make_shifted.py OUTDIR [--angle DEG] [--count N] [--replay N] [--seed S]"


def fail(msg):
    sys.stderr.write("make_shifted: " + str(msg).replace("\n", "?")[:1000] + "\n")
    sys.exit(2)


def parse(argv):
    """OUTDIR and the options; bad ones are one line and exit 2."""
    out, angle, count, replay, seed = None, 30.0, 300, 100, 27
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            fail(USAGE)
        if a in ("--angle", "--count", "--replay", "--seed"):
            if i + 1 >= len(argv):
                fail(f"{a} needs a value")
            v = argv[i + 1]
            try:
                if a == "--angle":
                    angle = float(v)
                    if not (-180.0 <= angle <= 180.0):
                        raise ValueError
                elif a == "--count":
                    count = int(v)
                    if not (1 <= count <= 1437):
                        raise ValueError
                elif a == "--replay":
                    replay = int(v)
                    if not (0 <= replay <= 1437):
                        raise ValueError
                else:
                    seed = int(v)
                    if not (0 <= seed < 2**32):
                        raise ValueError
            except ValueError:
                fail(f"{a} {v!r}: expected "
                     + {"--angle": "degrees in [-180, 180]", "--count": "an integer in [1, 1437] (the training split)",
                        "--replay": "an integer in [0, 1437]",
                        "--seed": "an integer in [0, 2^32)"}[a])
            i += 2
            continue
        if a.startswith("-") or out is not None:
            fail(f"unexpected argument {a!r}; " + USAGE)
        out = a
        i += 1
    if not out:
        fail(USAGE)
    if count + replay > 1437:
        fail(f"--count {count} + --replay {replay} exceed the 1437 images of the training split")
    if os.path.exists(out) and not os.path.isdir(out):
        fail(f"{out}: OUTDIR is not a directory")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        fail(f"{out}: cannot make OUTDIR: {e.strerror}")
    return out, angle, count, replay, seed


def rotate(img, deg):
    """img [H,W] rotated by deg (counter-clockwise as displayed) about its centre, bilinear, 0 outside."""
    import numpy as np
    h, w = img.shape
    cy, cx = (h - 1) / 2.0, (w - 1) / 2.0
    t = np.deg2rad(deg)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    # inverse map: the source of each output pixel
    sx = np.cos(t) * (xx - cx) - np.sin(t) * (yy - cy) + cx
    sy = np.sin(t) * (xx - cx) + np.cos(t) * (yy - cy) + cy
    x0, y0 = np.floor(sx).astype(int), np.floor(sy).astype(int)
    fx, fy = sx - x0, sy - y0
    out = np.zeros_like(img, dtype=np.float64)
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            yi, xi = y0 + dy, x0 + dx
            ok = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
            v = np.where(ok, img[np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)], 0.0)
            out += wy * wx * v
    return out


def main(out, angle, count, replay, seed):
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(xtr), size=count + replay, replace=False)  # disjoint: rotated, then upright

    def rot(a):
        return np.clip(np.stack([rotate(im[0].astype(np.float64), angle) for im in a])[:, None], 0.0, 1.0).astype(
            np.float32)

    tx = np.concatenate([rot(xtr[pick[:count]]), xtr[pick[count:]].astype(np.float32)])
    ty = np.concatenate([ytr[pick[:count]], ytr[pick[count:]]]).astype(np.int32)
    mix = rng.permutation(len(tx))
    files = {"train_x.npy": tx[mix], "train_y.npy": ty[mix],
             "test_x.npy": rot(xte), "test_y.npy": yte.astype(np.int32),
             "old_x.npy": xte.astype(np.float32), "old_y.npy": yte.astype(np.int32)}
    # every file staged then renamed: a failing run leaves no half-written set
    for name, arr in files.items():
        tmp = os.path.join(out, "." + name + ".tmp")
        with open(tmp, "wb") as f:
            np.save(f, arr)
        os.replace(tmp, os.path.join(out, name))
    print(f"make_shifted: {count} training images rotated by {angle:g} degrees and {replay} upright, "
          f"{len(yte)} test images rotated and upright (old domain) -> {out}")


if __name__ == "__main__":
    args = parse(sys.argv[1:])
    try:
        main(*args)
    except KeyboardInterrupt:
        sys.stderr.write("make_shifted: interrupted\n")
        sys.exit(130)
    except OSError as e:
        sys.stderr.write(f"make_shifted: {e.filename or args[0]}: {e.strerror or e}\n")
        sys.exit(1)
