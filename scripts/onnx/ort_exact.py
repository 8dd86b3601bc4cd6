#!/usr/bin/python3
"""ort_exact.py: rewrite a quantized ONNX model so that ONNX Runtime computes it exactly on
every x86 CPU, for use as the ONNX tests' reference (called by ort_run.js).

Why: on x86 CPUs without VNNI (AVX2 only, as on the AMD EPYC machines here), ONNX Runtime's
uint8 x int8 GEMM kernel (MLAS QgemmU8X8KernelAvx2, VPMADDUBSW) adds pairs of products into
saturating int16 lanes, so QLinearConv / QGemm / ConvInteger results are off by tens of LSB
when two adjacent products are large (microsoft/onnxruntime#16105; its session option
"session.x64quantprecision" covers QAttention only). Its uint8 x uint8 kernel widens to int16
first and is exact. So every int8 weight (with its zero point) is moved to uint8 by adding
128 to both when its activation is uint8 (int8 activations use another kernel): (x - xz) * (w - wz) is unchanged term by term, and a DequantizeLinear of the
moved weight gives the same floats. Nothing else changes, and on a VNNI CPU the result is
the same as the original model's.

Weights are the constant B operands: QLinearConv/QLinearMatMul/com.microsoft QGemm input 3
(zero point 5), ConvInteger/MatMulInteger input 1 (zero point 3), and a DequantizeLinear of
a constant int8 tensor that feeds a Conv, Gemm or MatMul as its second input.

With --s8-as-u8 (zoo.py table --ort-s8-as-u8) every activation QuantizeLinear/DequantizeLinear with an int8
zero point gets the uint8 one 128 above it: the same dequantized values (int8 [-128, 127] on zero point z is
uint8 [0, 255] on z + 128). ONNX Runtime makes that move itself (QDQS8ToU8Transformer) only for a
QuantizeLinear that feeds one DequantizeLinear, and on x86 fuses DQ -> Conv -> Q into a QLinearConv only
for uint8 activations; so an int8 tensor read by two nodes (a residual block's input: its conv and the Add)
leaves the conv reading it a float Conv (im2col + SGEMM in float32, then QuantizeLinear), whose sums part
from QLinearConv's exact integers near ties. Moved, every conv is a QLinearConv, as in the u8 models.

usage: ort_exact.py [--s8-as-u8] IN.onnx OUT.onnx   (prints how many weights it moved)
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

# op type -> (weight input, zero-point input)
DIRECT = {"QLinearConv": (3, 5), "QLinearMatMul": (3, 5), "QGemm": (3, 5),
          "ConvInteger": (1, 3), "MatMulInteger": (1, 3)}
WEIGHT_USERS = {"Conv": 1, "Gemm": 1, "MatMul": 1}


def s8_as_u8(g, const):
    """Every activation Q/DQ with a constant int8 zero point reads a uint8 one 128 above it; the count."""
    made, count = {}, 0
    for n in g.node:
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear") or len(n.input) < 3 or n.input[0] in const:
            continue
        zp = n.input[2]
        if zp not in const or const[zp].data_type != onnx.TensorProto.INT8:
            continue
        if zp not in made:
            v = numpy_helper.to_array(const[zp]).astype(np.int16) + 128
            t = numpy_helper.from_array(v.astype(np.uint8), name=zp + "__s8_as_u8")
            g.initializer.append(t)
            const[t.name] = t
            made[zp] = t.name
        n.input[2] = made[zp]
        count += 1
    return count


def main(src, dst, move_s8=False):
    m = onnx.load(src)
    g = m.graph
    const = {t.name: t for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and len(n.output) == 1:
            for a in n.attribute:
                if a.name == "value":
                    const[n.output[0]] = a.t
    if move_s8:
        print(f"ort_exact: {s8_as_u8(g, const)} int8 activation Q/DQ(s) moved to uint8")
    consumers = {}
    for n in g.node:
        for k, name in enumerate(n.input):
            consumers.setdefault(name, []).append((n, k))
    new_inits, done = [], {}

    def moved(name, suffix):
        """The name of a uint8 copy (+128) of the int8 constant `name`."""
        key = name + "__u8" + suffix
        if key not in done:
            v = numpy_helper.to_array(const[name]).astype(np.int16) + 128
            new_inits.append(numpy_helper.from_array(v.astype(np.uint8), name=key))
            done[key] = key
        return key

    def move_pair(n, wi, zi):
        if wi >= len(n.input) or n.input[wi] not in const:
            return 0
        if const[n.input[wi]].data_type != onnx.TensorProto.INT8:
            return 0
        zp = n.input[zi] if zi < len(n.input) and n.input[zi] else None
        if zp is not None and (zp not in const or const[zp].data_type != onnx.TensorProto.INT8):
            return 0  # a computed zero point: leave the node alone
        w_new = moved(n.input[wi], "")
        if zp is None:  # absent zero point = 0 of the weight's type
            z_new = f"{n.input[wi]}__u8zp"
            if z_new not in done:
                new_inits.append(numpy_helper.from_array(np.array(128, np.uint8), name=z_new))
                done[z_new] = z_new
        else:
            z_new = moved(zp, "")
        while len(n.input) <= zi:
            n.input.append("")
        n.input[wi], n.input[zi] = w_new, z_new
        return 1

    producer = {o: n for n in g.node for o in n.output}

    def is_u8(zp):
        return bool(zp) and zp in const and const[zp].data_type == onnx.TensorProto.UINT8

    def act_u8(user):
        """The node's activation (input 0) is uint8: its DequantizeLinear has a uint8 zero point."""
        p = producer.get(user.input[0]) if user.input else None
        return p is not None and p.op_type == "DequantizeLinear" and len(p.input) > 2 and is_u8(p.input[2])

    # Only u8 x s8 is the saturating case, and ORT has no s8 x u8 kernel: an int8 activation
    # keeps its int8 weight.
    count = 0
    for n in list(g.node):
        if n.op_type in DIRECT and (n.op_type != "QGemm" or n.domain == "com.microsoft"):
            if len(n.input) > 2 and is_u8(n.input[2]):
                count += move_pair(n, *DIRECT[n.op_type])
        elif n.op_type == "DequantizeLinear" and n.input and n.input[0] in const:
            users = consumers.get(n.output[0], [])
            if users and all(WEIGHT_USERS.get(u.op_type) == k and act_u8(u) for u, k in users):
                count += move_pair(n, 0, 2)
    g.initializer.extend(new_inits)
    onnx.save(m, dst)
    print(f"ort_exact: {count} int8 weight(s) moved to uint8")


if __name__ == "__main__":
    args = sys.argv[1:]
    move = bool(args) and args[0] == "--s8-as-u8"
    if move:
        args = args[1:]
    if len(args) != 2:
        sys.exit("usage: ort_exact.py [--s8-as-u8] IN.onnx OUT.onnx")
    main(args[0], args[1], move)
