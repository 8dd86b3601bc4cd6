#!/usr/bin/python3
"""Train a small CNN on scikit-learn's handwritten digits (8x8, shipped in
python3-sklearn), quantize it post-training (static, qnnpack engine,
calibration on training images) and write, into OUTDIR:

  digits_qdq.onnx     QDQ form (torch.onnx.export of the quantized model)
  digits_qlinear.onnx operator form (QLinearConv, MaxPool uint8, Flatten,
                      com.microsoft QGemm) built with onnx.helper from the
                      quantized weights, float input, DequantizeLinear and
                      Softmax at the end
  test_x.npy          held-out images, float32 [N,1,8,8] in [0,1]
  test_y.npy          their labels, int32 [N]
  float.txt           the float model's held-out accuracy

Seeded and deterministic (one thread): the same files on every run.
Usage: train_digits.py OUTDIR
"""
import os
import sys

USAGE = "usage: train_digits.py OUTDIR"


def out_dir(argv):
    """OUTDIR, made if missing; a bad one is one line and exit 2 (before torch is imported:
    that takes seconds)."""
    def fail(msg):
        sys.stderr.write("train_digits: " + msg.replace("\n", "?")[:1000] + "\n")
        sys.exit(2)
    if len(argv) != 1 or argv[0] in ("-h", "--help") or not argv[0]:
        fail(USAGE)
    out = argv[0]
    if os.path.exists(out) and not os.path.isdir(out):
        fail(f"{out}: OUTDIR is not a directory")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        fail(f"{out}: cannot make OUTDIR: {e.strerror}")
    if not os.access(out, os.W_OK):
        fail(f"{out}: OUTDIR is not writable")
    return out


if __name__ == "__main__":
    OUT = out_dir(sys.argv[1:])

import numpy as np  # noqa: E402 (after the argument check)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, TensorProto, numpy_helper  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

SEED = 1234


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = torch.quantization.QuantStub()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 4 * 4, 10)
        self.dequant = torch.quantization.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.relu1(self.conv1(x))
        x = self.relu2(self.conv2(x))
        x = self.pool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)
        return self.dequant(x)


def accuracy(model, x, y):
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def train_float(xb, yb):
    """A fresh Net trained in float: Adam 3e-3, 12 epochs of batches of 32 in a seeded order (the
    recipe of this model and of scripts/train/make_newclass.py's base model). Left in eval mode."""
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    lossf = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(SEED)
    for _ in range(12):
        perm = torch.randperm(len(xb), generator=g)
        for i in range(0, len(perm), 32):
            idx = perm[i:i + 32]
            opt.zero_grad()
            lossf(model(xb[idx]), yb[idx]).backward()
            opt.step()
    model.eval()
    return model


def quantize(model, xcal):
    """Post-training static int8 in place (qnnpack engine, conv+relu fused), calibrated on xcal in
    batches of 64."""
    torch.backends.quantized.engine = "qnnpack"
    model.qconfig = torch.quantization.get_default_qconfig("qnnpack")
    torch.quantization.fuse_modules(model, [["conv1", "relu1"], ["conv2", "relu2"]], inplace=True)
    torch.quantization.prepare(model, inplace=True)
    with torch.no_grad():
        for i in range(0, len(xcal), 64):
            model(xcal[i:i + 64])
    torch.quantization.convert(model, inplace=True)


def seeded_split():
    """Seed torch and numpy (deterministic, one thread) and split the digits 80/20, stratified:
    (xtr, xte, ytr, yte). The upright model's data and state; make_newclass.py starts from it too."""
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)


def main(out):
    xtr, xte, ytr, yte = seeded_split()
    xtr_t, ytr_t = torch.from_numpy(xtr), torch.from_numpy(ytr)
    xte_t, yte_t = torch.from_numpy(xte), torch.from_numpy(yte)

    model = train_float(xtr_t, ytr_t)
    facc = accuracy(model, xte_t, yte_t)
    print(f"float accuracy on the held-out split: {facc * 100:.2f}% ({len(yte)} images)")

    quantize(model, xtr_t)
    qacc = accuracy(model, xte_t, yte_t)
    print(f"int8 accuracy (torch qnnpack) on the held-out split: {qacc * 100:.2f}%")

    torch.onnx.export(model, xte_t[:1], os.path.join(out, "digits_qdq.onnx"), opset_version=13,
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "n"}, "logits": {0: "n"}})
    write_qlinear(model, os.path.join(out, "digits_qlinear.onnx"))
    np.save(os.path.join(out, "test_x.npy"), xte.astype(np.float32))
    np.save(os.path.join(out, "test_y.npy"), yte.astype(np.int32))
    with open(os.path.join(out, "float.txt"), "w") as f:
        f.write(f"{facc:.6f} {qacc:.6f}\n")


def write_qlinear(m, path):
    """Operator form from the converted modules' integer weights."""
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def scal(name, v, dt):
        return const(name, np.array(v, dtype=dt))

    xs, xz = float(m.quant.scale), int(m.quant.zero_point)
    scal("x_scale", xs, np.float32)
    scal("x_zp", xz, np.uint8)
    nodes.append(helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="quant"))
    cur, cs, cz = "xq", "x_scale", "x_zp"
    prev_scale = xs
    for name in ["conv1", "conv2"]:
        c = getattr(m, name)
        w = c.weight()
        wq = w.int_repr().numpy().astype(np.int8)
        ws = float(w.q_scale())
        wz = int(w.q_zero_point())
        b = c.bias().detach().numpy()
        bq = np.round(b / (prev_scale * ws)).astype(np.int32)
        ys, yz = float(c.scale), int(c.zero_point)
        const(name + ".w", wq)
        scal(name + ".w_scale", ws, np.float32)
        scal(name + ".w_zp", wz, np.int8)
        const(name + ".b", bq)
        scal(name + ".y_scale", ys, np.float32)
        scal(name + ".y_zp", yz, np.uint8)
        nodes.append(helper.make_node(
            "QLinearConv", [cur, cs, cz, name + ".w", name + ".w_scale", name + ".w_zp",
                            name + ".y_scale", name + ".y_zp", name + ".b"], [name + ".y"],
            name=name, kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        cur, cs, cz, prev_scale = name + ".y", name + ".y_scale", name + ".y_zp", ys
    nodes.append(helper.make_node("MaxPool", [cur], ["pool.y"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(helper.make_node("Flatten", ["pool.y"], ["flat"], name="flatten", axis=1))
    fc = m.fc
    w = fc.weight()
    wq = w.int_repr().numpy().astype(np.int8)
    ws, wz = float(w.q_scale()), int(w.q_zero_point())
    b = fc.bias().detach().numpy()
    bq = np.round(b / (prev_scale * ws)).astype(np.int32)
    ys, yz = float(fc.scale), int(fc.zero_point)
    const("fc.w", wq)
    scal("fc.w_scale", ws, np.float32)
    scal("fc.w_zp", wz, np.int8)
    const("fc.b", bq)
    scal("fc.y_scale", ys, np.float32)
    scal("fc.y_zp", yz, np.uint8)
    nodes.append(helper.make_node(
        "QGemm", ["flat", cs, cz, "fc.w", "fc.w_scale", "fc.w_zp", "fc.b", "fc.y_scale", "fc.y_zp"], ["fc.y"],
        name="fc", domain="com.microsoft", transB=1))
    nodes.append(helper.make_node("DequantizeLinear", ["fc.y", "fc.y_scale", "fc.y_zp"], ["logits"], name="dequant"))
    nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1))
    graph = helper.make_graph(
        nodes, "digits_qlinear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["n", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
                              producer_name="tessera train_digits.py")
    model.ir_version = 7
    onnx.save(model, path)  # no check_model: it rejects com.microsoft ops


if __name__ == "__main__":
    try:
        main(OUT)
    except KeyboardInterrupt:
        sys.stderr.write("train_digits: interrupted\n")
        sys.exit(130)
    except OSError as e:  # writing OUTDIR's files (disk full, permissions)
        sys.stderr.write(f"train_digits: {e.filename or OUT}: {e.strerror or e}\n")
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 (the last line of defence: one line, not a traceback)
        sys.stderr.write(f"train_digits: internal error ({type(e).__name__}: {str(e)[:500]!r}); please report it\n")
        sys.exit(1)
