#!/usr/bin/python3
"""resnet18_onnx.py: the C-built ResNet-18 (jit/tsr_netdesc.c, written out by
tests/tsr_netdump) as a QDQ ONNX model.

usage: resnet18_onnx.py DIR   (DIR: net.json, w<i>.npy, b<i>.npy of tsr_netdump)
writes DIR/resnet18_qdq.onnx and DIR/ort_resnet18_qdq.onnx (the same model with
every quantized tensor also a graph output, for ONNX Runtime).

Every netdesc tensor t is the quantized value "t<t>" (uint8/int8, the netdesc's
scale and zero point) followed by a DequantizeLinear; every conv/fc is
DequantizeLinear(weights, per output channel) and DequantizeLinear(int32 bias)
into Conv/Gemm, [Relu], QuantizeLinear; an add is Add, Relu, QuantizeLinear;
pools sit between DequantizeLinear and QuantizeLinear with the same scale and
zero point (as ONNX Runtime's quantizer writes them).

Requantization: the netdesc holds per-channel integers (mult, shift) =
QuantizeMultiplier(x_scale * w_scale[o] / y_scale) computed in double, and its
adds TFLite's integer parameters. ONNX scales are float32, which cannot carry
31-bit multipliers exactly, so the model holds both: w_scale[o] =
mult * 2^(shift-31) * y_scale / x_scale in float32 (what ONNX Runtime computes
with) and the integers in the metadata entry "tessera.requant/<node>" (what
the Tessera importer uses, after checking that they are the scales' multiplier
to 1e-5). Weights, biases and zero points are the netdesc's bytes.
"""
import json
import os
import stat
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper as h, numpy_helper as nh

USAGE = "usage: resnet18_onnx.py DIR   (DIR: net.json, w<i>.npy, b<i>.npy of tsr_netdump)"
MAX_JSON = 16 << 20  # bytes of net.json (ResNet-18's is ~100 KB)
ET = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8}
NP = {"uint8": np.uint8, "int8": np.int8}
nodes, inits, meta = [], [], {}
T = None


class InputError(Exception):
    """A bad argument or input file: one line, exit 2."""


def regular(path, what):
    """path if it is a regular file (np.load and open() block on a FIFO), else InputError
    (FileNotFoundError when missing, for the optional bias files)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise InputError(f"{path}: cannot open the {what}: {e.strerror}")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: the {what} is not a regular file")
    return path


def read_net(d):
    if not os.path.isdir(d):
        raise InputError(f"{d}: cannot open DIR: {'not a directory' if os.path.exists(d) else 'no such directory'}")
    p = f"{d}/net.json"
    try:
        regular(p, "network description")
    except FileNotFoundError:
        raise InputError(f"{p}: no such file (write it with tests/tsr_netdump)")
    if os.path.getsize(p) > MAX_JSON:
        raise InputError(f"{p}: more than {MAX_JSON} bytes")
    try:
        with open(p, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, RecursionError) as e:
        raise InputError(f"{p}: not JSON: {str(e)[:100]}")


def load_npy(path):
    try:
        return np.load(regular(path, "array"))
    except (ValueError, OSError, EOFError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise InputError(f"{path}: not a .npy array: {str(e)[:100]}")


def init(name, arr):
    inits.append(nh.from_array(arr, name))
    return name


def qparams(t):  # one scale and zero point initializer per tensor, shared by its Q and DQ
    if not any(i.name == f"t{t}_scale" for i in inits):
        init(f"t{t}_scale", np.array(T[t]["scale"], np.float32))
        init(f"t{t}_zp", np.array(T[t]["zp"], NP[T[t]["dtype"]]))
    return f"t{t}_scale", f"t{t}_zp"


def dequantize(t):  # every tensor is followed by its DequantizeLinear
    s, z = qparams(t)
    nodes.append(h.make_node("DequantizeLinear", [f"t{t}", s, z], [f"t{t}_f"], name=f"t{t}_dq"))


def quantize(src, t, name):
    s, z = qparams(t)
    nodes.append(h.make_node("QuantizeLinear", [src, s, z], [f"t{t}"], name=name + "_q"))
    dequantize(t)


def build(d, net):
    global nodes
    dequantize(0)
    for i, n in enumerate(net["nodes"]):
        name, x, y = n["name"], n["in"][0], n["out"]
        if n["kind"] in ("conv", "dense"):
            w = load_npy(f"{d}/w{i}.npy")
            mult = np.array(n["mult"], np.float64)
            shift = np.array(n["shift"], np.float64)
            real = mult * np.exp2(shift - 31)  # the netdesc's multiplier, exactly
            ws = (real * T[y]["scale"] / T[x]["scale"]).astype(np.float32)
            if len(n["w_zp"]) != len(ws) and len(n["w_zp"]) != 1:
                raise InputError(f"{name}: {len(n['w_zp'])} weight zero points")
            wz = np.broadcast_to(np.array(n["w_zp"], np.int8), ws.shape).copy()
            nodes.append(h.make_node("DequantizeLinear", [init(f"{name}.w", w), init(f"{name}.w_scale", ws),
                                                          init(f"{name}.w_zp", wz)], [f"{name}.w_f"], axis=0))
            ins = [f"t{x}_f", f"{name}.w_f"]
            try:
                b = load_npy(f"{d}/b{i}.npy")
                bs = (np.float32(T[x]["scale"]) * ws).astype(np.float32)
                nodes.append(h.make_node("DequantizeLinear", [init(f"{name}.b", b), init(f"{name}.b_scale", bs),
                                                              init(f"{name}.b_zp", np.zeros(len(b), np.int32))],
                                         [f"{name}.b_f"], axis=0))
                ins.append(f"{name}.b_f")
            except FileNotFoundError:
                pass
            if n["kind"] == "conv":
                k, st, p = n["k"], n["stride"], n["pads"]
                nodes.append(h.make_node("Conv", ins, [f"{name}_y"], name=name, kernel_shape=k, strides=st,
                                         pads=[p[0], p[1], p[2], p[3]], group=n["groups"]))
            else:
                nodes.append(h.make_node("Flatten", [f"t{x}_f"], [f"{name}_flat"], axis=1))
                ins[0] = f"{name}_flat"
                nodes.append(h.make_node("Gemm", ins, [f"{name}_y"], name=name, transB=1))
            meta[name] = " ".join(f"{a} {b}" for a, b in zip(n["mult"], n["shift"]))
            lo, hi = n["act"]
            top = 255 if T[y]["dtype"] == "uint8" else 127
            bot = 0 if T[y]["dtype"] == "uint8" else -128
            src = f"{name}_y"
            if T[y]["dtype"] == "uint8" and T[y]["zp"] == 0 and (lo, hi) == (0, 255):  # the netdesc's conv + relu
                nodes.append(h.make_node("Relu", [src], [f"{name}_relu"], name=name + "_relu"))
                src = f"{name}_relu"
            elif (lo, hi) != (bot, top):
                raise InputError(f"{name}: clamp {lo},{hi} is neither the full range nor a relu")
            quantize(src, y, name)
        elif n["kind"] == "pool":
            if n["pool"] == "max":
                p = n["pads"]
                nodes.append(h.make_node("MaxPool", [f"t{x}_f"], [f"{name}_y"], name=name, kernel_shape=n["k"],
                                         strides=n["stride"], pads=[p[0], p[1], p[2], p[3]]))
            elif n["pool"] == "global_avg":
                nodes.append(h.make_node("GlobalAveragePool", [f"t{x}_f"], [f"{name}_y"], name=name))
            else:
                raise InputError(f"{name}: pool {n['pool']} is not written")
            quantize(f"{name}_y", y, name)
        elif n["kind"] == "add":
            nodes.append(h.make_node("Add", [f"t{x}_f", f"t{n['in'][1]}_f"], [f"{name}_y"], name=name))
            meta[name] = " ".join(str(v) for v in n["add"])
            src = f"{name}_y"
            if T[y]["dtype"] == "uint8" and T[y]["zp"] == 0 and n["act"] == [0, 255]:  # add + relu
                nodes.append(h.make_node("Relu", [src], [f"{name}_relu"], name=name + "_relu"))
                src = f"{name}_relu"
            quantize(src, y, name)
        else:
            raise InputError(f"{name}: kind {n['kind']}")

    # drop the DequantizeLinear of tensors nobody reads (the network output)
    used = {i for nd in nodes for i in nd.input}
    nodes = [nd for nd in nodes if nd.op_type != "DequantizeLinear" or nd.output[0] in used]
    out = net["output"]
    yshape = [T[out]["shape"][0], T[out]["shape"][1]]
    g = h.make_graph(nodes, net["name"], [h.make_tensor_value_info("t0", ET[T[0]["dtype"]], T[0]["shape"])],
                     [h.make_tensor_value_info(f"t{out}", ET[T[out]["dtype"]], yshape)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="tessera resnet18_onnx.py")
    m.ir_version = 8
    for k, v in meta.items():
        e = m.metadata_props.add()
        e.key, e.value = f"tessera.requant/{k}", v
    onnx.checker.check_model(m)
    onnx.save(m, f"{d}/resnet18_qdq.onnx")
    for t in range(1, len(T)):
        if t != out:
            m.graph.output.append(h.make_tensor_value_info(f"t{t}", ET[T[t]["dtype"]], None))
    onnx.save(m, f"{d}/ort_resnet18_qdq.onnx")
    print(f"resnet18_onnx: {len(nodes)} ONNX nodes, {len(inits)} initializers, {len(meta)} tessera.requant entries "
          f"-> {d}/resnet18_qdq.onnx")


def main():
    global T
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        raise InputError(USAGE)
    d = sys.argv[1]
    net = read_net(d)
    try:
        T = net["tensors"]
        build(d, net)
    except (KeyError, TypeError, IndexError, ValueError, AttributeError) as e:
        raise InputError(f"{d}/net.json: not a tsr_netdump network description ({type(e).__name__}: {str(e)[:100]})")
    except FileNotFoundError as e:  # a weight file
        raise InputError(f"{e.filename}: no such file")
    except onnx.checker.ValidationError as e:
        raise InputError(f"{d}: the model made from it is not valid ONNX: {str(e).splitlines()[0][:200]}")


if __name__ == "__main__":
    try:
        main()
    except InputError as e:
        sys.stderr.write("resnet18_onnx: " + str(e).replace("\n", "?")[:1000] + "\n")
        sys.exit(2)
    except KeyboardInterrupt:
        sys.stderr.write("resnet18_onnx: interrupted\n")
        sys.exit(130)
    except OSError as e:  # writing the models (disk full, permissions)
        sys.stderr.write(f"resnet18_onnx: {e.filename or ''}: {e.strerror or e}\n")
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 (the last line of defence: one line, not a traceback)
        sys.stderr.write(f"resnet18_onnx: internal error ({type(e).__name__}: {str(e)[:500]!r}); please report it\n")
        sys.exit(1)
