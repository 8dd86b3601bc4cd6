"""qdq_check.py: structural checks of a QDQ model against the rules qdq.py follows (docs/guide/model-zoo.md).

check(model, activations, fp32=None) -> list of problems (one line each; empty when the model conforms):
- onnx.checker accepts the model;
- every Conv / Gemm / MatMul reads its activation through a DequantizeLinear of a QuantizeLinear;
- every constant weight of a Conv (axis 0), Gemm (axis 0 when transB, else 1) and MatMul (axis 1) is an
  int8 initializer through a DequantizeLinear with that axis, one float32 scale > 0 per channel and
  zero points all 0, values in [-127, 127]; with the float model given, the values are
  round_half_even(float32(w) / scale[c]);
- every bias is an int32 initializer through a DequantizeLinear with zero points 0 and the scale exactly
  float32(x_scale * w_scale[c]) (x_scale: the scale of the DequantizeLinear feeding input 0);
- every activation QuantizeLinear has a scalar float32 scale > 0 and a scalar zero point: uint8 for u8;
  int8 and 0 for s8; its DequantizeLinear consumers use the same two initializers;
- u8: no Relu/Clip reads a DequantizeLinear output (quantize_static removes them); s8: every Relu/Clip
  that reads one writes a QuantizeLinear (kept between Q/DQ pairs).
"""
import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def check(model, activations, fp32=None):
    problems = []
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        problems.append("onnx.checker: " + str(e).splitlines()[0])
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    arr = {}

    def value(name):
        if name not in arr:
            arr[name] = numpy_helper.to_array(inits[name])
        return arr[name]

    producer = {o: n for n in g.node for o in n.output}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    f32 = {t.name: numpy_helper.to_array(t) for t in fp32.graph.initializer} if fp32 is not None else {}

    def attr(n, name, default=None):
        for a in n.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def dq_of_init(name):
        p = producer.get(name)
        if p is None or p.op_type != "DequantizeLinear" or p.input[0] not in inits:
            return None
        return p

    def act_dq(name):
        """The DequantizeLinear of a QuantizeLinear that produces name, or None."""
        p = producer.get(name)
        if p is None or p.op_type != "DequantizeLinear":
            return None
        q = producer.get(p.input[0])
        return p if q is not None and q.op_type == "QuantizeLinear" else None

    def check_weight(n, k, axis):
        dq = dq_of_init(n.input[k])
        where = f"{n.name} ({n.op_type}) input {k}"
        if dq is None:
            problems.append(f"{where}: not a DequantizeLinear of an initializer")
            return None
        w, s, z = (inits[dq.input[0]], inits.get(dq.input[1]), inits.get(dq.input[2]))
        if w.data_type != TensorProto.INT8:
            problems.append(f"{where}: weight type {w.data_type}, not int8")
        if attr(dq, "axis") != axis:
            problems.append(f"{where}: DequantizeLinear axis {attr(dq, 'axis')}, expected {axis}")
        if s is None or z is None:
            problems.append(f"{where}: scale or zero point is not an initializer")
            return None
        wv, sv, zv = value(dq.input[0]), value(dq.input[1]), value(dq.input[2])
        ch = wv.shape[axis] if wv.ndim > axis else -1
        if s.data_type != TensorProto.FLOAT or sv.shape != (ch,) or not np.all(sv > 0):
            problems.append(f"{where}: scale is not float32 [{ch}] > 0")
            return None
        if z.data_type != TensorProto.INT8 or zv.shape != (ch,) or np.any(zv != 0):
            problems.append(f"{where}: zero points are not int8 [{ch}] zeros")
        if wv.min() < -127:
            problems.append(f"{where}: weight value -128 (symmetric int8 is [-127, 127])")
        orig = dq.input[0][:-len("_quantized")] if dq.input[0].endswith("_quantized") else None
        if orig in f32 and f32[orig].shape == wv.shape:
            shape = [1] * wv.ndim
            shape[axis] = ch
            exp = np.clip((f32[orig].astype(np.float32) / sv.reshape(shape)).round(), -128, 127).astype(np.int8)
            if not np.array_equal(exp, wv):
                problems.append(f"{where}: {int((exp != wv).sum())} weight values differ from round(w / scale)")
        return sv

    def act_scale(n, k):
        dq = act_dq(n.input[k])
        if dq is None:
            problems.append(f"{n.name} ({n.op_type}) input {k}: not a QuantizeLinear/DequantizeLinear pair")
            return None
        return value(dq.input[1]) if dq.input[1] in inits else None

    def check_bias(n, xs, ws):
        dq = dq_of_init(n.input[2])
        where = f"{n.name} ({n.op_type}) bias"
        if dq is None:
            problems.append(f"{where}: not a DequantizeLinear of an initializer")
            return
        if inits[dq.input[0]].data_type != TensorProto.INT32:
            problems.append(f"{where}: not int32")
        if xs is None or ws is None:
            return
        sv, zv = value(dq.input[1]), value(dq.input[2])
        exp = (np.float32(xs) * ws.astype(np.float32)).astype(np.float32)
        if sv.shape != exp.shape or sv.dtype != np.float32 or not np.array_equal(sv, exp):
            problems.append(f"{where}: scale is not float32(x_scale * w_scale[c])")
        if np.any(zv != 0) or inits[dq.input[2]].data_type != TensorProto.INT32:
            problems.append(f"{where}: zero point is not int32 0")
        if sv.size > 1 and attr(dq, "axis") != 0:
            problems.append(f"{where}: per-channel DequantizeLinear without axis 0")

    for n in g.node:
        if n.op_type == "Conv":
            xs = act_scale(n, 0)
            ws = check_weight(n, 1, 0)
            if len(n.input) > 2 and n.input[2]:
                check_bias(n, xs, ws)
        elif n.op_type == "Gemm":
            xs = act_scale(n, 0)
            ws = check_weight(n, 1, 0 if attr(n, "transB", 0) else 1)
            if len(n.input) > 2 and n.input[2]:
                check_bias(n, xs, ws)
        elif n.op_type == "MatMul":
            for k in range(2):
                p = producer.get(n.input[k])
                if p is not None and p.op_type == "DequantizeLinear" and p.input[0] in inits:
                    check_weight(n, k, 1)
                else:
                    act_scale(n, k)
        elif n.op_type == "QuantizeLinear":
            where = f"{n.name} (QuantizeLinear)"
            if len(n.input) < 3 or n.input[1] not in inits or n.input[2] not in inits:
                problems.append(f"{where}: scale or zero point is not an initializer")
                continue
            s, z = inits[n.input[1]], inits[n.input[2]]
            sv, zv = value(n.input[1]), value(n.input[2])
            if s.data_type != TensorProto.FLOAT or sv.shape != () or not sv > 0:
                problems.append(f"{where}: scale is not a float32 scalar > 0")
            want = TensorProto.UINT8 if activations == "u8" else TensorProto.INT8
            if z.data_type != want or zv.shape != ():
                problems.append(f"{where}: zero point is not a {'uint8' if want == TensorProto.UINT8 else 'int8'} scalar")
            elif activations == "s8" and zv != 0:
                problems.append(f"{where}: symmetric int8 zero point {int(zv)}, not 0")
            for c in consumers.get(n.output[0], []):
                if c.op_type != "DequantizeLinear" or list(c.input[1:3]) != list(n.input[1:3]):
                    problems.append(f"{where}: consumer {c.name} is not a DequantizeLinear with its scale and zero point")
        elif n.op_type in ("Relu", "Clip"):
            p = producer.get(n.input[0])
            if p is None or p.op_type != "DequantizeLinear":
                continue
            if activations == "u8":
                problems.append(f"{n.name} ({n.op_type}): kept after a DequantizeLinear (u8 removes it)")
            elif not all(c.op_type == "QuantizeLinear" for c in consumers.get(n.output[0], [])):
                problems.append(f"{n.name} ({n.op_type}): its output is not quantized (s8 keeps Q/DQ around it)")
    return problems
