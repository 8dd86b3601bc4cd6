#!/usr/bin/python3
"""The new-class demo of on-device training (issue 27): a digits CNN that has never
seen one digit, which `tessera train` then teaches that digit from a few hundred
samples. Writes into OUTDIR:

  base_qdq.onnx             the digits CNN of scripts/onnx/train_digits.py (same net,
                            recipe, quantization) trained on the training split WITHOUT
                            digit NEW (default 9): its 10 outputs keep a slot for the new
                            class, which training only ever pushed down (a reserved output,
                            as a deployed model would ship one), and its conv features
                            never saw the digit
  train_x.npy, train_y.npy  COUNT (default 100) training images of digit NEW and REPLAY
                            (default 200) of the other digits, shuffled (float32 [N,1,8,8]
                            in [0,1], labels int32 [N]): the data `tessera train` fine-tunes
                            on; the other digits are a rehearsal buffer (as in continual
                            learning) so that the old classes are not forgotten
  new_x.npy, new_y.npy      the held-out images of digit NEW (the new class' test set)
  old_x.npy, old_y.npy      the held-out images of the other digits (the old classes)

The split is train_digits.py's (test_size 0.2, random_state 0, stratified): no
held-out image is seen by the base model or by the fine-tuning. Seeded and
deterministic (one thread): the same files on every run (~15 s).
Usage: make_newclass.py OUTDIR [--new D] [--count N] [--replay N] [--seed S]
"""
import os
import sys

USAGE = "usage: make_newclass.py OUTDIR [--new D] [--count N] [--replay N] [--seed S]"


def fail(msg):
    sys.stderr.write("make_newclass: " + str(msg).replace("\n", "?")[:1000] + "\n")
    sys.exit(2)


def parse(argv):
    """OUTDIR and the options; bad ones are one line and exit 2 (before torch is imported)."""
    out, new, count, replay, seed = None, 9, 100, 200, 27
    limits = {"--new": (0, 9), "--count": (1, 140), "--replay": (0, 1290), "--seed": (0, 2**32 - 1)}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            fail(USAGE)
        if a in limits:
            if i + 1 >= len(argv):
                fail(f"{a} needs a value")
            lo, hi = limits[a]
            try:
                v = int(argv[i + 1])
                if not (lo <= v <= hi):
                    raise ValueError
            except ValueError:
                fail(f"{a} {argv[i + 1]!r}: expected an integer in [{lo}, {hi}]")
            if a == "--new":
                new = v
            elif a == "--count":
                count = v
            elif a == "--replay":
                replay = v
            else:
                seed = v
            i += 2
            continue
        if a.startswith("-") or out is not None:
            fail(f"unexpected argument {a!r}; " + USAGE)
        out = a
        i += 1
    if not out:
        fail(USAGE)
    if os.path.exists(out) and not os.path.isdir(out):
        fail(f"{out}: OUTDIR is not a directory")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        fail(f"{out}: cannot make OUTDIR: {e.strerror}")
    return out, new, count, replay, seed


def main(out, new, count, replay, seed):
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx"))
    from train_digits import quantize, seeded_split, train_float  # the upright digits model's data, state, recipe

    xtr, xte, ytr, yte = seeded_split()
    old = ytr != new
    xb, yb = torch.from_numpy(xtr[old]), torch.from_numpy(ytr[old])

    # the base model: train_digits.py's recipe on the old classes only (10 outputs)
    model = train_float(xb, yb)
    quantize(model, xb)
    with torch.no_grad():
        pred = model(torch.from_numpy(xte)).argmax(1).numpy()
    acc_old = float((pred[yte != new] == yte[yte != new]).mean())

    # the fine-tuning data: COUNT of the new digit, REPLAY of the others, from the training split
    rng = np.random.default_rng(seed)
    inew, iold = np.flatnonzero(ytr == new), np.flatnonzero(ytr != new)
    if count > len(inew) or replay > len(iold):
        fail(f"--count {count} / --replay {replay}: the training split has {len(inew)} images of digit {new} "
             f"and {len(iold)} of the others")
    pick = np.concatenate([rng.choice(inew, size=count, replace=False), rng.choice(iold, size=replay, replace=False)])
    pick = pick[rng.permutation(len(pick))]
    files = {"train_x.npy": xtr[pick].astype(np.float32), "train_y.npy": ytr[pick].astype(np.int32),
             "new_x.npy": xte[yte == new].astype(np.float32), "new_y.npy": yte[yte == new].astype(np.int32),
             "old_x.npy": xte[yte != new].astype(np.float32), "old_y.npy": yte[yte != new].astype(np.int32)}
    # every file staged then renamed: a failing run leaves no half-written set
    tmp = os.path.join(out, ".base_qdq.onnx.tmp")
    torch.onnx.export(model, torch.from_numpy(xte[:1]), tmp, opset_version=13, input_names=["x"],
                      output_names=["logits"], dynamic_axes={"x": {0: "n"}, "logits": {0: "n"}})
    for name, arr in files.items():
        t = os.path.join(out, "." + name + ".tmp")
        with open(t, "wb") as f:
            np.save(f, arr)
        os.replace(t, os.path.join(out, name))
    os.replace(tmp, os.path.join(out, "base_qdq.onnx"))
    print(f"make_newclass: base model without digit {new} (int8 {acc_old * 100:.2f}% on the other "
          f"{int((yte != new).sum())} held-out digits), {count} + {replay} fine-tuning images, "
          f"{int((yte == new).sum())} held-out of digit {new} -> {out}")


if __name__ == "__main__":
    args = parse(sys.argv[1:])
    try:
        main(*args)
    except KeyboardInterrupt:
        sys.stderr.write("make_newclass: interrupted\n")
        sys.exit(130)
    except OSError as e:
        sys.stderr.write(f"make_newclass: {e.filename or args[0]}: {e.strerror or e}\n")
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 (the last line of defence: one line, not a traceback)
        sys.stderr.write(f"make_newclass: internal error ({type(e).__name__}: {str(e)[:500]!r}); please report it\n")
        sys.exit(1)
