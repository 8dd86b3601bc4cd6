#!/usr/bin/python3
"""build.py: the model zoo's float models, as ONNX, from Debian's torch 1.13 / torchvision 0.14.

usage: build.py [--models a,b,...|all] [--size S] [--classes K] [--out DIR] [--force]

Every model is built with weights=None (nothing is downloaded), seeded (torch.manual_seed(0) before it
is constructed), its BatchNorm statistics made realistic by a few train-mode forward passes over
calibration-like images (momentum None: a plain average over the passes, the statistics reset first),
then eval() and exported with opset 13, do_constant_folding and TrainingMode.EVAL, so that every
BatchNormalization that follows a Conv folds into it. Same seed -> byte-identical .onnx.

Two models are not torchvision's own architectures:
- vit_tiny: torchvision's VisionTransformer with DeiT-tiny's dimensions (patch 16, 12 layers, hidden
  192, 3 heads, MLP 768); its head, which torchvision initialises to zeros (all logits 0, so top-1
  would be meaningless), gets N(0, 0.02) weights.
- bert_tiny: a BERT-tiny-shaped encoder (2 layers, hidden 128, 2 heads, FFN 512, GELU, post-LN,
  sequence 128, vocabulary 1000, 10 classes from the [CLS] position through a tanh pooler), written
  the way HuggingFace's BertModel is (view(x.size()[:-1] + ...), so the export carries the usual
  Shape/Gather/Unsqueeze/Concat subgraphs), initialised as BERT is (N(0, 0.02), zero biases). Its
  input is int64 token ids [1, 128], not embeddings: that is the file a user brings (every BERT
  export takes input_ids), and the embedding lookup (a Gather of a quantized table) and the
  position-embedding Add are part of what an importer must place.

--classes K gives the model a new head for a task of K classes, as a user who fine-tunes it does: its
last Linear (resnet's fc, mobilenet's classifier[-1], ...) replaced by a Linear of the same inputs and K
outputs, torch's default initialisation under torch.manual_seed(SEED + 1) (scripts/train/make_zoo_resnet.py
fine-tunes such a ResNet-18 on the device).

Writes DIR/MODEL.onnx (atomically) and DIR/MODEL.json (what it was built from: the cache key the
zoo table checks before reusing a model).
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import common  # noqa: E402
from common import UsageError  # noqa: E402

BN_PASSES, BN_BATCH = 4, 8


def script_hash():
    with open(os.path.realpath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def build_key(model, size, classes=None):
    key = {"model": model, "size": None if model in common.TOKEN_MODELS else size, "seed": common.SEED,
           "build.py": script_hash()}
    if classes is not None:  # (only then: the keys of the zoo's own models stay as they were)
        key["classes"] = classes
    return key


def bert_tiny():
    import torch
    from torch import nn

    hidden, heads, ff, layers, classes = 128, 2, 512, 2, 10

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.h, self.dh = heads, hidden // heads
            self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
            self.out = nn.Linear(hidden, hidden)

        def split(self, x):  # [B, S, H] -> [B, heads, S, dh], as HuggingFace writes it
            x = x.view(x.size()[:-1] + (self.h, self.dh))
            return x.permute(0, 2, 1, 3)

        def forward(self, x):
            q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
            return self.out(ctx.view(ctx.size()[:-2] + (hidden,)))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn, self.ln1 = SelfAttention(), nn.LayerNorm(hidden, eps=1e-12)
            self.ff1, self.ff2, self.ln2 = nn.Linear(hidden, ff), nn.Linear(ff, hidden), nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x):
            x = self.ln1(x + self.attn(x))
            return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(common.BERT_VOCAB, hidden)
            self.pos = nn.Parameter(torch.zeros(1, common.BERT_SEQ, hidden))
            self.ln = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.pool, self.cls = nn.Linear(hidden, hidden), nn.Linear(hidden, classes)
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, 0.0, 0.02)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)
            nn.init.normal_(self.pos, 0.0, 0.02)

        def forward(self, ids):
            x = self.ln(self.tok(ids) + self.pos)
            for layer in self.layers:
                x = layer(x)
            return self.cls(torch.tanh(self.pool(x[:, 0])))

    return Bert()


def new_head(m, classes):
    """Replace m's last Linear by a Linear of the same inputs and `classes` outputs (seeded)."""
    import torch
    from torch import nn
    last = None
    for name, mod in m.named_modules():
        if isinstance(mod, nn.Linear):
            last = name
    if last is None:
        raise UsageError("--classes: the model has no Linear layer to replace")
    parent, _, leaf = last.rpartition(".")
    owner = m.get_submodule(parent) if parent else m
    old = getattr(owner, leaf) if not leaf.isdigit() else owner[int(leaf)]
    torch.manual_seed(common.SEED + 1)
    head = nn.Linear(old.in_features, classes)
    if leaf.isdigit():
        owner[int(leaf)] = head
    else:
        setattr(owner, leaf, head)
    return m


def construct(model, size, classes=None):
    """The torch module, seeded, untrained (with a new head of `classes` outputs if given)."""
    if classes is not None:
        return new_head(construct(model, size), classes)
    import torch
    import torchvision.models as tvm
    torch.manual_seed(common.SEED)
    if model == "bert_tiny":
        return bert_tiny()
    if model == "vit_tiny":
        if size % 16:
            raise UsageError(f"--size {size}: vit_tiny needs a multiple of 16 (patch 16)")
        m = tvm.VisionTransformer(image_size=size, patch_size=16, num_layers=12, num_heads=3, hidden_dim=192,
                                  mlp_dim=768, num_classes=1000)
        torch.nn.init.normal_(m.heads.head.weight, 0.0, 0.02)
        return m
    if model == "googlenet":
        return tvm.googlenet(weights=None, aux_logits=False, init_weights=True)
    return getattr(tvm, model)(weights=None)


def calibrate_bn(m, size):
    """Realistic BatchNorm statistics: reset, momentum None (a cumulative average), a few train-mode
    passes over seeded calibration-like images (not the calibration or evaluation inputs)."""
    import torch
    from torch import nn
    bns = [b for b in m.modules() if isinstance(b, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for b in bns:
        b.reset_running_stats()
        b.momentum = None
    m.train()
    with torch.no_grad():
        for i in range(BN_PASSES):
            m(torch.from_numpy(common.images(BN_BATCH, size, 500 + i)))


def export(model, size, path, classes=None):
    import torch
    m = construct(model, size, classes)
    calibrate_bn(m, size)
    m.eval()
    x = torch.from_numpy(common.inputs(model, 1, size, 0))
    with torch.no_grad():
        torch.onnx.export(m, x, path, opset_version=13, do_constant_folding=True,
                          training=torch.onnx.TrainingMode.EVAL, input_names=["input"], output_names=["logits"])


def cached(out, model, size, classes=None):
    """True when DIR/MODEL.onnx exists and was built from these arguments and this script."""
    try:
        with open(os.path.join(out, model + ".json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    return meta.get("key") == build_key(model, size, classes) and os.path.isfile(os.path.join(out, model + ".onnx"))


def build(model, size, out, force=False, log=print, classes=None):
    """Build DIR/MODEL.onnx unless cached; returns (path, seconds spent, was cached)."""
    path = os.path.join(out, model + ".onnx")
    if not force and cached(out, model, size, classes):
        return path, 0.0, True
    t0 = time.time()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's export warnings (tracer, constant folding) are noise here
        common.write_atomic(path, lambda tmp: export(model, size, tmp, classes))
    dt = time.time() - t0
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    common.save_json(os.path.join(out, model + ".json"),
                     {"key": build_key(model, size, classes), "sha256": digest, "bytes": os.path.getsize(path),
                      "seconds": round(dt, 2)})
    log(f"build: {model} ({'' if model in common.TOKEN_MODELS else f'{size}x{size}, '}"
        f"{os.path.getsize(path) / 1e6:.1f} MB) in {dt:.1f} s")
    return path, dt, False


def main():
    ap = argparse.ArgumentParser(description="Build the zoo's float ONNX models from torchvision (seeded).")
    ap.add_argument("--models", default="all", help="comma-separated names or 'all': " + ", ".join(common.MODELS))
    ap.add_argument("--size", default="224", help="input resolution of the image models (default 224)")
    ap.add_argument("--classes", default=None, help="a new head of K outputs (the last Linear replaced)")
    ap.add_argument("--out", default="build/zoo", help="output directory (default build/zoo)")
    ap.add_argument("--force", action="store_true", help="rebuild even when cached")
    a = ap.parse_args()
    models = common.parse_models(a.models)
    size = common.parse_size(a.size)
    classes = None if a.classes is None else common.parse_count(a.classes, "--classes", 2, 100000)
    if "vit_tiny" in models and size % 16:
        raise UsageError(f"--size {size}: vit_tiny needs a multiple of 16 (patch 16)")
    out = common.ensure_dir(a.out)
    t0 = time.time()
    for m in models:
        build(m, size, out, a.force, classes=classes)
    print(f"build: {len(models)} model(s) in {time.time() - t0:.1f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(common.main_guard(main))
