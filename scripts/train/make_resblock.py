#!/usr/bin/python3
"""A small residual block model for on-device training of a zoo-like last block (issue 27):

  conv0 (3->8, 3x3) -> relu -> [conv1 -> relu -> conv2] + skip -> relu
        -> depthwise conv (8 groups, 3x3, stride 2) -> relu6 -> global average pool -> flatten -> fc (8->10)

trained briefly in float with torch on seeded synthetic data (8x8 images of a few smooth random
patterns, one per class, with noise and a random shift), exported to ONNX and quantized to QDQ with
the repo's own quantizer (scripts/zoo/qdq.py, ONNX Runtime's quantize_static form: per-channel int8
weights, uint8 activations). Writes into OUTDIR:

  resblock_fp32.onnx, resblock_qdq.onnx    the float and the quantized model (input [N,3,8,8])
  resblock_clip_qdq.onnx                   the quantized model with its ReLU6 kept as a Clip node and the
                                           depthwise conv's weights doubled (outputs on the Clip's 6)
  train_x.npy, train_y.npy                 200 samples `tessera train` fine-tunes on, of a shifted
                                           domain (the patterns' contrast inverted in one channel)
  test_x.npy, test_y.npy                   200 held-out samples of the same domain

Seeded: the same files on every run. Needs node + onnxruntime-node (the calibration).
Usage: make_resblock.py OUTDIR
"""
import os
import sys

HERE = os.path.dirname(os.path.realpath(__file__))


def fail(msg):
    sys.stderr.write("make_resblock: " + str(msg).replace("\n", "?")[:1000] + "\n")
    sys.exit(2)


def data(n, protos, rng, shifted):
    import numpy as np
    y = rng.integers(0, protos.shape[0], n).astype(np.int32)
    x = protos[y].copy()
    for i in range(n):  # a random shift of up to one pixel
        x[i] = np.roll(x[i], (int(rng.integers(-1, 2)), int(rng.integers(-1, 2))), axis=(1, 2))
    x += rng.normal(0, 0.35, x.shape).astype(np.float32)
    if shifted:
        x[:, 1] = -x[:, 1]
    return x.astype(np.float32), y


def main(argv):
    if len(argv) != 1 or argv[0].startswith("-"):
        fail("usage: make_resblock.py OUTDIR")
    out_dir = argv[0]
    os.makedirs(out_dir, exist_ok=True)
    if not os.access(out_dir, os.W_OK):
        fail(f"{out_dir}: not writable")
    import numpy as np
    import onnx
    import torch
    import torch.nn as nn
    sys.path.insert(0, os.path.join(HERE, "..", "zoo"))
    import common
    import qdq

    torch.manual_seed(27)
    rng = np.random.default_rng(27)
    protos = rng.normal(0, 1, (10, 3, 8, 8)).astype(np.float32)
    k = np.ones((3, 3), np.float32) / 9  # smooth: a 3x3 box blur, twice
    for _ in range(2):
        p = np.pad(protos, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="wrap")
        protos = sum(p[:, :, a:a + 8, b:b + 8] * k[a, b] for a in range(3) for b in range(3))
    protos = (protos / protos.std()).astype(np.float32)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv0 = nn.Conv2d(3, 8, 3, padding=1)
            self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
            self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
            self.dw = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)
            self.fc = nn.Linear(8, 10)

        def forward(self, x):
            a = torch.relu(self.conv0(x))
            r = torch.relu(self.conv2(torch.relu(self.conv1(a))) + a)
            d = torch.clamp(self.dw(r), 0, 6)
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(d, 1), 1))

    net = Net()
    xt, yt = data(2000, protos, rng, False)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    X, Y = torch.from_numpy(xt), torch.from_numpy(yt).long()
    for ep in range(30):
        perm = torch.randperm(len(X))
        for i in range(0, len(X), 100):
            b = perm[i:i + 100]
            opt.zero_grad()
            nn.functional.cross_entropy(net(X[b]), Y[b]).backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        acc = (net(X).argmax(1) == Y).float().mean().item()
    fp32 = os.path.join(out_dir, "resblock_fp32.onnx")
    # AdaptiveAvgPool2d(1) exports as GlobalAveragePool
    torch.onnx.export(net, torch.zeros(1, 3, 8, 8), fp32, input_names=["input"], output_names=["logits"],
                      opset_version=13, dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    q = qdq.quantize_model(onnx.load(fp32), xt[:64], "u8")
    common.save_onnx(os.path.join(out_dir, "resblock_qdq.onnx"), q)
    # The same model with its ReLU6 kept as a Clip node (ONNX Runtime's quantizer removed it: its range
    # is the uint8 output's own, 6 = 255) and the depthwise conv's weights doubled, so that many of its
    # outputs sit on the Clip's high end, the type's maximum: the trainer must mask them (train_dag).
    c = onnx.ModelProto()
    c.CopyFrom(q)
    g = c.graph
    init = {t.name: t for t in g.initializer}
    for nm in ("dw.weight_scale", "dw.bias_quantized_scale"):
        t = init[nm]
        a = onnx.numpy_helper.to_array(t) * 2
        t.CopyFrom(onnx.numpy_helper.from_array(a.astype(np.float32), nm))
    conv = next(n for n in g.node if n.name == "/dw/Conv")
    out = conv.output[0]
    conv.output[0] = out + "_preclip"
    lo = onnx.numpy_helper.from_array(np.array(0, np.float32), "clip_lo")
    hi = onnx.numpy_helper.from_array(np.array(6, np.float32), "clip_hi")
    g.initializer.extend([lo, hi])
    at = list(g.node).index(conv) + 1
    g.node.insert(at, onnx.helper.make_node("Clip", [out + "_preclip", "clip_lo", "clip_hi"], [out], name="/dw/Clip"))
    common.save_onnx(os.path.join(out_dir, "resblock_clip_qdq.onnx"), c)
    trx, try_ = data(200, protos, rng, True)
    tex, tey = data(200, protos, rng, True)
    for nm, a in (("train_x", trx), ("train_y", try_), ("test_x", tex), ("test_y", tey)):
        common.save_npy(os.path.join(out_dir, nm + ".npy"), a)
    print(f"make_resblock: {out_dir}/resblock_qdq.onnx (float accuracy on its training data {100 * acc:.2f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
